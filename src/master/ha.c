/* Leader election over etcd (docs/ha.md, "Election and failover"). One thread per master:
 *
 *   candidate: grant a lease of MC_HA_LEASE_TTL_S, create the leader key
 *              mooncake-store/<cluster_id>/master_view = "<rpc_address>:<rpc_port>" bound to it, only if
 *              absent (one transaction). Won: leader. Lost: standby of the key's holder.
 *   leader:    serves until serve_until = (send time of the last successful keepalive, or of the grant)
 *              + MC_HA_SERVE_MS (7/10 TTL), keeps the lease alive every KEEPALIVE_MS and retries a failed
 *              keepalive KA_RETRY_MS later. etcd expires the lease no earlier than TTL after it processed
 *              that keepalive, so a leader cut off from etcd has stopped serving for at least 3/10 TTL
 *              (1.5 s) before another can win. A lease found gone (revoked, expired) stops it at
 *              once. Once it stopped, its state may be stale: the process restarts as a standby
 *              (mc_ha_lost).
 *   standby:   reads the key every READ_MS and holds one idle TCP connection to the leader's RPC port.
 *              When the connection breaks it connects again: REFUSALS refusals in a row mean no process
 *              listens on the leader's port although its host is up — the leader is dead (a serving
 *              leader always listens) — and the standby revokes the leader's lease (the key goes with it)
 *              and campaigns at once. A timeout proves nothing (a partition looks the same): the standby
 *              then waits for the key to go (the lease expires), when the old leader stopped 3/10 TTL ago.
 *
 * The gate (m->serve_until_ns) is checked by every RPC (rpc.c) against the monotonic clock, so a leader
 * stops on time even while its keepalive call is still blocked. Locking: h->mu guards the published
 * view (info) and the stop flag; the counters are atomics; the rest belongs to the thread. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "master/ha.h"
#include "master/master_int.h"
#include "master_core/holder_feed.h"
#include "meta/etcd.h"
#include "net/sock.h"

#define SERVE_NS (MC_HA_SERVE_MS * 1000000ull)
#define KEEPALIVE_MS 500      /* TTL/10 */
#define KA_RETRY_MS 100       /* after a failed keepalive: an etcd raft election ends any moment */
#define ETCD_TIMEOUT_MS 700   /* per etcd member and call (a member without a raft leader holds a keepalive
                                 until one is elected, so a call cut by this is simply sent again) */
#define READ_MS 250           /* a standby re-reads the key this often */
#define RETRY_MS 250          /* after a failed campaign step */
#define CONNECT_MS 500        /* a standby's connection attempt to the leader */
#define RECONNECT_MS 1000     /* a standby without a connection tries again this often */
#define REFUSALS 3            /* refusals in a row that mean nothing listens on the leader's port */
#define REFUSAL_GAP_MS 20

struct mc_ha {
  struct mc_master *m;
  struct mc_etcd *etcd;
  char key[320], self[160];
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* monotonic */
  int stop;          /* mu */
  struct mc_ha_info info; /* mu: state mirrored in `state`, the view, the counters copied on read */
  _Atomic int state, lost;
  _Atomic uint64_t won, changes, revokes, ka_fail, terms_lost;
  int64_t lease; /* ours while leader (thread; read by mc_ha_free after the join) */
};

const char *mc_ha_state_name(int s) {
  static const char *names[] = {"starting", "standby", "candidate", "serving", "standby"};
  return s >= 0 && s <= MC_HA_STOPPED ? names[s] : "starting";
}

/* Waits ms or until stop; returns the stop flag. */
static int wait_ms(struct mc_ha *h, uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + ms * 1000000ull;
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  pthread_mutex_lock(&h->mu);
  if (!h->stop) pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  int stop = h->stop;
  pthread_mutex_unlock(&h->mu);
  return stop;
}

static int stopping(struct mc_ha *h) {
  pthread_mutex_lock(&h->mu);
  int s = h->stop;
  pthread_mutex_unlock(&h->mu);
  return s;
}

static void set_state(struct mc_ha *h, int s) {
  atomic_store(&h->state, s);
  pthread_mutex_lock(&h->mu);
  h->info.state = s;
  pthread_mutex_unlock(&h->mu);
}

/* Publishes the leader as last read (value NULL: no leader key). Counts changes of leader. */
static void publish(struct mc_ha *h, const char *value, uint64_t view) {
  pthread_mutex_lock(&h->mu);
  int changed = value ? !h->info.present || h->info.view_version != view : h->info.present;
  h->info.present = value != NULL;
  snprintf(h->info.leader, sizeof(h->info.leader), "%s", value ? value : "");
  h->info.view_version = value ? view : 0;
  pthread_mutex_unlock(&h->mu);
  if (changed && value) atomic_fetch_add(&h->changes, 1);
}

/* ------------------------------------------------------------------ leader */

void mc_master_promote(struct mc_master *m, uint64_t rev) {
  atomic_store(&m->view_version, rev);
  /* a standby's feed was numbered from its own start, which may precede the old leader's */
  mc_hidx_feed_raise(m->hfeed, mc_wall_us());
}

/* Serves while the lease is kept alive; returns when it is lost or on stop. */
static void lead(struct mc_ha *h, int64_t rev, uint64_t granted_ns) {
  struct mc_master *m = h->m;
  mc_master_promote(m, (uint64_t)rev);
  publish(h, h->self, (uint64_t)rev);
  atomic_fetch_add(&h->won, 1);
  atomic_store(&m->serve_until_ns, granted_ns + SERVE_NS);
  set_state(h, MC_HA_SERVING);
  LOG_INFO("HA: elected leader of %s as %s (view_version %lld); serving", h->key, h->self, (long long)rev);
  const char *why = NULL;
  for (uint64_t last = mc_now_ns(), gap = KEEPALIVE_MS; !why;) {
    uint64_t spent_ms = (mc_now_ns() - last) / 1000000ull;
    if (wait_ms(h, spent_ms < gap ? gap - spent_ms : 0)) break;
    last = mc_now_ns();
    int64_t left = 0;
    int rc = mc_etcd_lease_keepalive(h->etcd, h->lease, &left);
    if (!rc && left > 0) {
      atomic_store(&m->serve_until_ns, last + SERVE_NS);
      gap = KEEPALIVE_MS;
      continue;
    }
    gap = KA_RETRY_MS;
    if (!rc) {
      why = "the lease no longer exists (expired or revoked)";
    } else {
      atomic_fetch_add(&h->ka_fail, 1);
      if (mc_now_ns() >= atomic_load(&m->serve_until_ns)) why = "no keepalive reached etcd for 7/10 of the lease TTL";
    }
  }
  atomic_store(&m->serve_until_ns, 0); /* every RPC from now on answers UNAVAILABLE_IN_CURRENT_STATUS */
  set_state(h, MC_HA_STOPPED);
  if (!why) return; /* stop: mc_ha_free gives the lease up */
  atomic_fetch_add(&h->terms_lost, 1);
  LOG_ERROR("HA: stopped serving as leader of %s: %s; restarting as a standby", h->key, why);
  atomic_store(&h->lost, 1);
}

/* ------------------------------------------------------------------ standby */

/* Whether nothing listens on host:port (REFUSALS refused connects in a row). */
static int leader_gone(struct mc_ha *h, const char *host, uint16_t port) {
  for (int i = 0; i < REFUSALS; i++) {
    if (i && wait_ms(h, REFUSAL_GAP_MS)) return 0;
    int fd = mc_sock_connect(host, port, CONNECT_MS);
    if (fd >= 0) close(fd);
    if (fd != -ECONNREFUSED) return 0;
  }
  return 1;
}

/* The leader at host:port refused us: revoke its lease if the key is still the one we followed.
 * Returns 1 when the key is gone now (campaign), 0 otherwise. */
static int revoke_dead(struct mc_ha *h, const struct mc_etcd_kv *cur) {
  struct mc_etcd_kv now;
  int rc = mc_etcd_get(h->etcd, h->key, &now, NULL);
  if (rc == MC_ETCD_NOT_FOUND) return 1;
  if (rc) return 0;
  int same = now.create_rev == cur->create_rev && now.lease == cur->lease;
  mc_etcd_kv_free(&now);
  if (!same || !cur->lease) return 0;
  if (mc_etcd_lease_revoke(h->etcd, cur->lease)) return 0;
  atomic_fetch_add(&h->revokes, 1);
  LOG_WARN("HA: leader %s refuses connections (the process is gone); revoked its lease %lld", cur->value,
           (long long)cur->lease);
  return 1;
}

/* Whether fd's peer closed the connection (or it failed). Data, if any, is read and ignored. */
static int conn_broken(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) <= 0) return 0;
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* Follows the leader in cur until its key is gone (returns 1: campaign) or changed (0: read again). */
static int follow(struct mc_ha *h, const struct mc_etcd_kv *cur) {
  publish(h, cur->value, (uint64_t)cur->create_rev);
  set_state(h, MC_HA_STANDBY);
  char host[256];
  uint16_t port = 0;
  int addr_ok = cur->len < sizeof(h->info.leader) && !mc_split_host_port(cur->value, host, sizeof(host), &port, 0) &&
                port != 0;
  if (!addr_ok) LOG_WARN("HA: leader key %s holds '%.100s', not host:port; waiting for it to expire", h->key, cur->value);
  int fd = -1, ret = -1;
  uint64_t next_read = mc_now_ms() + READ_MS, next_connect = 0;
  while (ret < 0 && !stopping(h)) {
    if (addr_ok && fd < 0 && mc_now_ms() >= next_connect) {
      fd = mc_sock_connect(host, port, CONNECT_MS);
      next_connect = mc_now_ms() + RECONNECT_MS;
      if (fd == -ECONNREFUSED && leader_gone(h, host, port) && revoke_dead(h, cur)) ret = 1;
      if (fd < 0) fd = -1;
    }
    if (ret >= 0) break;
    if (fd >= 0) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      poll(&p, 1, 100);
      if (conn_broken(fd)) {
        close(fd);
        fd = -1;
        next_connect = 0; /* at once: a refusal now is the fast path of a failover */
        continue;
      }
    } else if (wait_ms(h, 100)) {
      break;
    }
    if (mc_now_ms() < next_read) continue;
    next_read = mc_now_ms() + READ_MS;
    struct mc_etcd_kv now;
    int rc = mc_etcd_get(h->etcd, h->key, &now, NULL);
    if (rc == MC_ETCD_NOT_FOUND) ret = 1;
    else if (!rc && (now.create_rev != cur->create_rev || now.lease != cur->lease)) ret = 0;
    if (!rc) mc_etcd_kv_free(&now);
  }
  if (fd >= 0) close(fd);
  return ret > 0;
}

/* ------------------------------------------------------------------ the supervisor */

static void *ha_main(void *arg) {
  mc_thread_name("mc-ha");
  struct mc_ha *h = arg;
  while (!stopping(h) && !atomic_load(&h->lost)) {
    set_state(h, MC_HA_CANDIDATE);
    uint64_t granted_ns = mc_now_ns(); /* the lease lives at least TTL from here */
    int64_t lease = 0, rev = 0;
    int won = 0;
    struct mc_etcd_kv cur = {0};
    if (mc_etcd_lease_grant(h->etcd, MC_HA_LEASE_TTL_S, &lease)) {
      wait_ms(h, RETRY_MS);
      continue;
    }
    if (mc_etcd_create(h->etcd, h->key, h->self, lease, &won, &rev, &cur)) {
      mc_etcd_lease_revoke(h->etcd, lease);
      wait_ms(h, RETRY_MS);
      continue;
    }
    if (won) {
      h->lease = lease;
      lead(h, rev, granted_ns);
      continue;
    }
    mc_etcd_lease_revoke(h->etcd, lease); /* unused: the key is someone else's */
    follow(h, &cur);
    mc_etcd_kv_free(&cur);
  }
  return NULL;
}

static void leader_key(const char *cluster_id, char *buf, size_t len) {
  size_t n = strlen(cluster_id);
  while (n > 0 && cluster_id[n - 1] == '/') n--; /* trailing '/' trimmed (docs/master.md) */
  snprintf(buf, len, "mooncake-store/%.*s/master_view", (int)n, cluster_id);
}

struct mc_ha *mc_ha_new(struct mc_master *m) {
  const struct mc_master_cfg *c = &m->cfg;
  const char *eps = c->ha_backend_connstring && *c->ha_backend_connstring ? c->ha_backend_connstring : c->etcd_endpoints;
  struct mc_etcd *e;
  if (!eps || !*eps || mc_etcd_open(eps, &e)) {
    LOG_ERROR("HA: no etcd endpoints (--ha_backend_connstring or --etcd_endpoints)");
    return NULL;
  }
  mc_etcd_set_timeout(e, ETCD_TIMEOUT_MS);
  struct mc_ha *h = mc_calloc(1, sizeof(*h));
  h->m = m;
  h->etcd = e;
  leader_key(c->cluster_id, h->key, sizeof(h->key));
  pthread_mutex_init(&h->mu, NULL);
  mc_cond_init_monotonic(&h->cv);
  return h;
}

int mc_ha_start(struct mc_ha *h, uint16_t rpc_port) {
  snprintf(h->self, sizeof(h->self), "%s:%u", h->m->cfg.bind_ip, (unsigned)rpc_port);
  if (pthread_create(&h->th, NULL, ha_main, h)) {
    LOG_ERROR("HA: cannot start the election thread");
    return -1;
  }
  h->started = 1;
  LOG_INFO("HA: campaigning for %s as %s (etcd %s, lease %d s)", h->key, h->self, mc_etcd_endpoints(h->etcd),
           MC_HA_LEASE_TTL_S);
  return 0;
}

void mc_ha_free(struct mc_ha *h) {
  if (!h) return;
  atomic_store(&h->m->serve_until_ns, 0);
  pthread_mutex_lock(&h->mu);
  h->stop = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  if (h->started) pthread_join(h->th, NULL);
  if (h->lease && !atomic_load(&h->lost)) { /* a leader leaving: the standbys need not wait for the TTL */
    if (!mc_etcd_lease_revoke(h->etcd, h->lease)) LOG_INFO("HA: gave the leadership of %s up", h->key);
  }
  mc_etcd_close(h->etcd);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  mc_free(h);
}

void mc_ha_info(struct mc_ha *h, struct mc_ha_info *out) {
  pthread_mutex_lock(&h->mu);
  *out = h->info;
  pthread_mutex_unlock(&h->mu);
  out->elections_won = atomic_load(&h->won);
  out->leader_changes = atomic_load(&h->changes);
  out->revokes = atomic_load(&h->revokes);
  out->keepalive_failures = atomic_load(&h->ka_fail);
  out->terms_lost = atomic_load(&h->terms_lost);
  uint64_t until = atomic_load(&h->m->serve_until_ns), now = mc_now_ns();
  /* what others see: a leader past its lease's safe horizon, or one that lost its term, serves nothing */
  if (out->state == MC_HA_STOPPED || (out->state == MC_HA_SERVING && until <= now)) out->state = MC_HA_STANDBY;
  out->lease_left_ms = out->state == MC_HA_SERVING ? (int64_t)((until - now) / 1000000ull) : 0;
}

int mc_ha_lost(struct mc_ha *h) { return h && atomic_load(&h->lost); }
