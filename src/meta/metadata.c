/* The backend-independent part of the metadata client: picks a backend from the connection string and
 * builds the key layout (docs/transfer-engine.md, "Connection strings and keys"). An unknown scheme is
 * an error returned to the caller, never an abort. */
#include "meta/metadata.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
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

/* ---- keys bound to this process's liveness ---- */

struct mc_meta_live {
  int ttl_s;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char **keys, **values;
  size_t n, cap;
  int started, stop, failing;
  pthread_t th;
};

static void *live_main(void *arg) {
  mc_thread_name("mc-meta-live");
  struct mc_meta *m = arg;
  struct mc_meta_live *l = m->live;
  pthread_mutex_lock(&l->mu);
  while (!l->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)l->ttl_s * 1000000000ull / 3;
    until.tv_sec += (time_t)(ns / 1000000000ull);
    until.tv_nsec = (long)(ns % 1000000000ull);
    while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT) {
    }
    if (l->stop || !l->n) continue;
    size_t n = l->n; /* a snapshot, so that the service is called without the lock */
    char **k = mc_calloc(n, sizeof(char *)), **v = mc_calloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++) k[i] = mc_strdup(l->keys[i]), v[i] = mc_strdup(l->values[i]);
    pthread_mutex_unlock(&l->mu);
    int rc = m->ops->keepalive(m, l->ttl_s, k, v, n);
    for (size_t i = 0; i < n; i++) mc_free(k[i]), mc_free(v[i]);
    mc_free(k);
    mc_free(v);
    pthread_mutex_lock(&l->mu);
    if (rc && !l->failing) LOG_WARN("metadata %s: cannot renew %zu key(s); retrying every %d s", m->conn, n, l->ttl_s / 3);
    if (!rc && l->failing) LOG_INFO("metadata %s: keys renewed again", m->conn);
    l->failing = rc != 0;
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static long live_find(struct mc_meta_live *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->keys[i], key)) return (long)i;
  return -1;
}

int mc_meta_set(struct mc_meta *m, const char *key, const char *v) {
  struct mc_meta_live *l = m->live;
  if (!l) return m->ops->set(m, key, v);
  int rc = m->ops->set_bound(m, key, v, l->ttl_s);
  if (rc) return rc;
  pthread_mutex_lock(&l->mu);
  long i = live_find(l, key);
  if (i >= 0) {
    mc_free(l->values[i]);
    l->values[i] = mc_strdup(v);
  } else {
    if (l->n == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 4;
      l->keys = mc_realloc(l->keys, l->cap * sizeof(char *));
      l->values = mc_realloc(l->values, l->cap * sizeof(char *));
    }
    l->keys[l->n] = mc_strdup(key);
    l->values[l->n++] = mc_strdup(v);
  }
  if (!l->started && !pthread_create(&l->th, NULL, live_main, m)) l->started = 1;
  pthread_mutex_unlock(&l->mu);
  return 0;
}

int mc_meta_remove(struct mc_meta *m, const char *key) {
  struct mc_meta_live *l = m->live;
  if (l) {
    pthread_mutex_lock(&l->mu);
    long i = live_find(l, key);
    if (i >= 0) {
      mc_free(l->keys[i]);
      mc_free(l->values[i]);
      l->keys[i] = l->keys[--l->n];
      l->values[i] = l->values[l->n];
    }
    pthread_mutex_unlock(&l->mu);
  }
  return m->ops->remove(m, key);
}

static void live_free(struct mc_meta_live *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  if (l->started) pthread_join(l->th, NULL);
  for (size_t i = 0; i < l->n; i++) mc_free(l->keys[i]), mc_free(l->values[i]);
  mc_free(l->keys);
  mc_free(l->values);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  mc_free(l);
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
  int ttl = (int)mc_knob_long(MC_KNOB_METADATA_TTL_S);
  if (ttl > 0 && m->ops->set_bound && m->ops->keepalive) {
    struct mc_meta_live *l = mc_calloc(1, sizeof(*l));
    l->ttl_s = ttl < 3 ? 3 : ttl;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    m->live = l;
  }
  *out = m;
  return 0;
}

/* ---- compare-and-swap ---- */

static int no_cas(const struct mc_meta *m) {
  LOG_ERROR("metadata %s: the %s backend has no compare-and-swap nor prefix listing (use etcd or HTTP)", m->conn,
            m->ops->scheme);
  return ERR_METADATA;
}

int mc_meta_get_rev(struct mc_meta *m, const char *key, char **value_out, uint64_t *rev) {
  *value_out = NULL;
  *rev = 0;
  return m->ops->get_rev ? m->ops->get_rev(m, key, value_out, rev) : no_cas(m);
}

int mc_meta_cas(struct mc_meta *m, const char *key, const char *value, uint64_t rev, int *won) {
  *won = 0;
  return m->ops->cas ? m->ops->cas(m, key, value, rev, won) : no_cas(m);
}

int mc_meta_list(struct mc_meta *m, const char *prefix, size_t max, char ***keys, char ***values, size_t *n) {
  *keys = *values = NULL;
  *n = 0;
  int rc = m->ops->list ? m->ops->list(m, prefix, max, keys, values, n) : no_cas(m);
  if (rc) {
    mc_meta_list_free(*keys, *values, *n);
    *keys = *values = NULL;
    *n = 0;
  }
  return rc;
}

void mc_meta_list_free(char **keys, char **values, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (keys) mc_free(keys[i]);
    if (values) mc_free(values[i]);
  }
  mc_free(keys);
  mc_free(values);
}

uint64_t mc_meta_value_rev(const char *value, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)value[i]) * 1099511628211ull;
  return h ? h : 1;
}

void mc_meta_close(struct mc_meta *m) {
  if (!m) return;
  live_free(m->live);
  char *conn = m->conn;
  m->ops->destroy(m);
  mc_free(conn);
}

static char prefix_buf[PREFIX_MAX];
static pthread_once_t prefix_once = PTHREAD_ONCE_INIT;

/* "mooncake/" + id + "/", with the id's own leading and trailing '/' dropped so none is doubled. */
static void prefix_init(void) {
  const char *id = mc_knob_str(MC_KNOB_METADATA_CLUSTER_ID);
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
