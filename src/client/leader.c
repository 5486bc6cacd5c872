/* Following the master leader (docs/ha.md, "Election and failover"): with
 * master_server_addr = "etcd://h1:2379;h2:2379;h3:2379" the client reads the leader key
 * mooncake-store/<cluster_id>/master_view (cluster id: $MC_STORE_CLUSTER_ID, else mooncake_cluster),
 * connects to the address it holds, and a thread watches the key: a new leader retargets the master
 * line at once (mc_mrpc_client_retarget) and kicks the heartbeat, whose first ping to the new leader
 * answers NEED_REMOUNT — the remount and the index upload that rebuild the new leader's view of this
 * holder follow (heartbeat.c). The watch is re-opened every WATCH_MS and after any error, each time after
 * a fresh read, and the heartbeat re-reads after PING_FAILURES failed pings (mc_leader_reread), so a
 * lost watch event costs at most one of those. Thread-safe: l->mu guards the current address. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/etcd.h"
#include "net/mrpc.h"
#include "net/sock.h"

#define ETCD_TIMEOUT_MS 1000
#define WATCH_MS 30000 /* re-read and re-watch this often (etcd may compact a long watch's history) */
#define WATCH_RETRY_MS 200

struct mc_leader {
  struct mc_store *s;
  struct mc_etcd *etcd;
  char key[320];
  pthread_t th;
  int running;
  _Atomic int stop;
  pthread_mutex_t mu;
  char addr[160];  /* the leader we point at, "" none yet (mu) */
  int64_t rev;     /* the creation revision of its key (mu): the view_version */
  int64_t seen;    /* the revision the watch continues after (thread) */
};

int mc_leader_is_ha(const char *addr) { return !strncmp(addr, "etcd://", 7); }

/* Reads the key. 0 with value/rev, MC_UNAVAILABLE_IN_CURRENT_STATUS (no leader), or ETCD_OPERATION_ERROR. */
static int read_leader(struct mc_leader *l, char *value, size_t len, int64_t *rev, int64_t *header) {
  struct mc_etcd_kv kv;
  int rc = mc_etcd_get(l->etcd, l->key, &kv, header);
  if (rc == MC_ETCD_NOT_FOUND) return MC_UNAVAILABLE_IN_CURRENT_STATUS;
  if (rc) return MC_ETCD_OPERATION_ERROR;
  int ok = kv.len > 0 && kv.len < len;
  if (ok) memcpy(value, kv.value, kv.len + 1);
  *rev = kv.create_rev;
  mc_etcd_kv_free(&kv);
  if (!ok) LOG_WARN("leader key %s holds no usable address", l->key);
  return ok ? 0 : MC_UNAVAILABLE_IN_CURRENT_STATUS;
}

/* Points the master line at value (host:port) if it is not the current leader. */
static void apply(struct mc_leader *l, const char *value, int64_t rev) {
  char host[256];
  uint16_t port;
  if (mc_split_host_port(value, host, sizeof(host), &port, 0) || !port) {
    LOG_WARN("leader key %s holds '%.100s', not host:port; ignored", l->key, value);
    return;
  }
  pthread_mutex_lock(&l->mu);
  int same = !strcmp(l->addr, value) && l->rev == rev;
  if (!same) {
    snprintf(l->addr, sizeof(l->addr), "%s", value);
    l->rev = rev;
  }
  pthread_mutex_unlock(&l->mu);
  if (same) return;
  LOG_INFO("master leader is now %s (view_version %lld)", value, (long long)rev);
  if (l->s->master.cli) {
    mc_mrpc_client_retarget(l->s->master.cli->rpc, host, port);
    mc_heartbeat_ping_now(l->s); /* the new leader answers NEED_REMOUNT */
  }
}

int mc_leader_reread(struct mc_store *s) {
  struct mc_leader *l = s->master.leader;
  if (!l) return 0;
  char v[160];
  int64_t rev = 0;
  int rc = read_leader(l, v, sizeof(v), &rev, NULL);
  if (!rc) apply(l, v, rev);
  return rc;
}

static int on_event(void *arg, const struct mc_etcd_event *ev) {
  struct mc_leader *l = arg;
  if (ev->kv.mod_rev > l->seen) l->seen = ev->kv.mod_rev;
  if (ev->deleted) {
    LOG_INFO("master leader key %s deleted: waiting for the next leader", l->key);
  } else if (ev->kv.len > 0 && ev->kv.len < 160) {
    apply(l, ev->kv.value, ev->kv.create_rev);
  }
  return 0;
}

static void *watch_main(void *arg) {
  mc_thread_name("mc-leader");
  struct mc_leader *l = arg;
  while (!atomic_load(&l->stop)) {
    char v[160];
    int64_t rev = 0, header = 0;
    int rc = read_leader(l, v, sizeof(v), &rev, &header);
    if (!rc) apply(l, v, rev);
    if (rc == MC_ETCD_OPERATION_ERROR) {
      mc_sleep_ms(WATCH_RETRY_MS);
      continue;
    }
    l->seen = header;
    if (mc_etcd_watch(l->etcd, l->key, header + 1, WATCH_MS, on_event, l, &l->stop) && !atomic_load(&l->stop))
      mc_sleep_ms(WATCH_RETRY_MS);
  }
  return NULL;
}

int mc_leader_open(struct mc_store *s, const char *conn, char *addr, size_t len) {
  struct mc_leader *l = mc_calloc(1, sizeof(*l));
  l->s = s;
  pthread_mutex_init(&l->mu, NULL);
  const char *cluster = mc_knob_str(MC_KNOB_STORE_CLUSTER_ID);
  if (!cluster) cluster = "mooncake_cluster";
  size_t n = strlen(cluster);
  while (n > 0 && cluster[n - 1] == '/') n--;
  snprintf(l->key, sizeof(l->key), "mooncake-store/%.*s/master_view", (int)n, cluster);
  s->master.leader = l;
  if (mc_etcd_open(conn + 7, &l->etcd)) {
    LOG_ERROR("setup: master address %s has no etcd endpoint", conn);
    return MC_INVALID_PARAMS;
  }
  mc_etcd_set_timeout(l->etcd, ETCD_TIMEOUT_MS);
  int64_t rev = 0;
  int rc = read_leader(l, addr, len, &rev, NULL);
  if (rc == MC_UNAVAILABLE_IN_CURRENT_STATUS) LOG_ERROR("setup: no master leader in %s (key %s)", conn, l->key);
  else if (rc) LOG_ERROR("setup: cannot read the master leader from %s (ETCD_OPERATION_ERROR)", conn);
  if (!rc) {
    pthread_mutex_lock(&l->mu);
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->rev = rev;
    pthread_mutex_unlock(&l->mu);
  }
  return rc;
}

void mc_leader_start(struct mc_store *s) {
  struct mc_leader *l = s->master.leader;
  if (!l) return;
  l->running = !pthread_create(&l->th, NULL, watch_main, l);
  if (!l->running) LOG_ERROR("store client: cannot start the master leader watch; following by failed pings only");
}

void mc_leader_close(struct mc_store *s) {
  struct mc_leader *l = s->master.leader;
  if (!l) return;
  atomic_store(&l->stop, 1);
  if (l->running) pthread_join(l->th, NULL);
  if (l->etcd) mc_etcd_close(l->etcd);
  pthread_mutex_destroy(&l->mu);
  mc_free(l);
  s->master.leader = NULL;
}
