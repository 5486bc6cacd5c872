/* The backend-independent part of the metadata client (metadata.md §1-2): picks a backend from the
 * connection string and builds the key layout. An unknown scheme is an error returned to the caller,
 * never an abort (metadata.md §6.3). */
#include "te/metadata.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/log.h"
#include "mooncake/transfer_engine.h"

#define P2P_LITERAL "P2PHANDSHAKE"
#define PREFIX_MAX 512

int mc_meta_is_p2p(const char *conn) { return conn && !strcmp(conn, P2P_LITERAL); }

/* True when conn starts with "<scheme>://" (scheme compared case-insensitively). */
static int has_scheme(const char *conn, const char *scheme) {
  size_t n = strlen(scheme);
  return !strncasecmp(conn, scheme, n) && !strncmp(conn + n, "://", 3);
}

static int open_backend(const char *conn, struct mc_meta **out) {
  if (has_scheme(conn, "http") || has_scheme(conn, "https")) return mc_meta_http_open(conn, out);
  if (has_scheme(conn, "etcd")) return mc_meta_etcd_open(conn + strlen("etcd://"), out);
  if (has_scheme(conn, "redis")) return mc_meta_redis_open(conn + strlen("redis://"), out);
  if (!strstr(conn, "://")) return mc_meta_etcd_open(conn, out);
  LOG_ERROR(
      "unknown metadata storage scheme in connection string '%s' "
      "(supported: http://, https://, etcd://, redis://, bare host:port, P2PHANDSHAKE)",
      conn);
  return ERR_METADATA;
}

int mc_meta_open(const char *conn, struct mc_meta **out) {
  *out = NULL;
  if (!conn) {
    LOG_ERROR("no metadata connection string given");
    return ERR_METADATA;
  }
  if (mc_meta_is_p2p(conn)) return 0;
  struct mc_meta *m = NULL;
  int rc = open_backend(conn, &m);
  if (rc) {
    LOG_ERROR("cannot open metadata service '%s'", conn);
    return ERR_METADATA;
  }
  m->conn = mc_strdup(conn);
  *out = m;
  return 0;
}

void mc_meta_close(struct mc_meta *m) {
  if (!m) return;
  char *conn = m->conn;
  m->ops->destroy(m);
  mc_free(conn);
}

static char prefix_buf[PREFIX_MAX];
static pthread_once_t prefix_once = PTHREAD_ONCE_INIT;

/* "mooncake/" + id + "/", with the id's own leading and trailing '/' dropped so none is doubled. */
static void prefix_init(void) {
  const char *id = getenv("MC_METADATA_CLUSTER_ID");
  if (!id) id = "";
  while (*id == '/') id++;
  size_t n = strlen(id);
  while (n > 0 && id[n - 1] == '/') n--;
  if (n == 0) {
    snprintf(prefix_buf, sizeof(prefix_buf), "mooncake/");
    return;
  }
  if (n > PREFIX_MAX - 16) {
    LOG_ERROR("MC_METADATA_CLUSTER_ID is too long (%zu bytes); truncated", n);
    n = PREFIX_MAX - 16;
  }
  snprintf(prefix_buf, sizeof(prefix_buf), "mooncake/%.*s/", (int)n, id);
}

const char *mc_meta_prefix(void) {
  pthread_once(&prefix_once, prefix_init);
  return prefix_buf;
}

int mc_meta_rpc_key(char *buf, size_t len, const char *server_name) {
  return snprintf(buf, len, "%srpc_meta/%s", mc_meta_prefix(), server_name);
}

int mc_meta_segment_key(char *buf, size_t len, const char *segment_name) {
  if (strchr(segment_name, '/')) return snprintf(buf, len, "%s%s", mc_meta_prefix(), segment_name);
  return snprintf(buf, len, "%sram/%s", mc_meta_prefix(), segment_name);
}
