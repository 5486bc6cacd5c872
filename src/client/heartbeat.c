/* The heartbeat thread of a client (docs/store-client.md, "Setup", step 8): for a client with a mounted
 * segment a Ping every PING_INTERVAL_MS (NEED_REMOUNT: re-publish the engine's descriptor, ReMountSegment of
 * the main and extra segments, and retire the write extent, then upload the holder's index of each (holder_index.c); PING_FAILURES failures in a row: drop the pooled
 * connections and, following a leader (leader.c), read the leader key again), for every
 * client a statistics report every MC_STORE_STATS_INTERVAL_MS (stats.c), the local-disk tier's report (setup.c,
 * mc_ssd_report), and the write-extent releases the
 * put path left for it (write_extents.c, "Releases"), at once when kicked. It never takes store->life: teardown
 * stops and joins it while holding life for writing. hb.mu guards stop and kick only; it is not held
 * while the thread works. */
#include <errno.h>
#include <time.h>

#include "client/client.h"
#include "common/log.h"
#include "common/util.h"
#include "net/mrpc.h"

#define PING_INTERVAL_MS 1000
#define PING_TIMEOUT_MS 2000
#define PING_FAILURES 3
#define STANDBY_RETRY_NS (50ull * 1000000)

void mc_heartbeat_init(struct mc_store *s) {
  pthread_mutex_init(&s->hb.mu, NULL);
  mc_cond_init_monotonic(&s->hb.cv);
}

void mc_heartbeat_destroy(struct mc_store *s) {
  pthread_mutex_destroy(&s->hb.mu);
  pthread_cond_destroy(&s->hb.cv);
}

static void remount(struct mc_store *s) {
  mc_te_republish(s->engine.te); /* a restarted master may have lost our rpc_meta and descriptor */
  mc_segments_remount(s, PING_TIMEOUT_MS); /* the main segment and the extra ones still mounted (extra_segments.c) */
  s->ssd.sent = 0, s->ssd.next_ns = 0;     /* a master that forgot us forgot our disk tier too */
}

/* Returns the ping's status. */
static int ping(struct mc_store *s, int *failures) {
  uint64_t sent = mc_now_ns();
  uint64_t view = 0;
  int status = 0, rc = mcli_ping(s->master.cli, s->self.client_id, PING_TIMEOUT_MS, &status, &view);
  if (!rc && view) atomic_store(&s->master.view, view);
  if (rc && ++*failures >= PING_FAILURES) {
    LOG_WARN("master: %d pings failed (%s); reconnecting", *failures, mooncake_store_err_name(rc));
    mc_mrpc_client_reset(s->master.cli->rpc);
    mc_leader_reread(s); /* HA: the leader may have changed without our watch seeing it */
    *failures = 0;
  } else if (!rc) {
    *failures = 0;
    if (status == MC_PING_OK) atomic_store(&s->master.ok_ns, sent);
    /* Retired and released: NEED_REMOUNT comes both from a master that forgot us (the release is then a
     * no-op) and, by design (docs/master.md, "Segments": only ReMountSegment fills the OK set), as the
     * answer to the first ping after a mount, when the master still holds the extent and would keep it for
     * its whole lease. */
    if (status == MC_PING_NEED_REMOUNT) mc_fastput_retire(s, 0), remount(s);
  }
  return rc;
}

/* Waits on hb.cv (hb.mu held) until the monotonic deadline, a kick or a stop. */
static void wait_until(struct mc_store *s, uint64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000ull), (long)(deadline_ns % 1000000000ull)};
  while (!s->hb.stop && !s->hb.kick && pthread_cond_timedwait(&s->hb.cv, &s->hb.mu, &ts) != ETIMEDOUT) {
  }
  s->hb.kick = 0;
}

void mc_heartbeat_ping_now(struct mc_store *s) {
  pthread_mutex_lock(&s->hb.mu);
  s->hb.kick = s->hb.ping_now = 1;
  pthread_cond_broadcast(&s->hb.cv);
  pthread_mutex_unlock(&s->hb.mu);
}

void mc_heartbeat_kick(struct mc_store *s) {
  pthread_mutex_lock(&s->hb.mu);
  s->hb.kick = 1;
  pthread_cond_broadcast(&s->hb.cv);
  pthread_mutex_unlock(&s->hb.mu);
}

/* Witnesses appeared (witness.c): a thread in a long sleep wakes for them. */
static void on_witness(void *arg) {
  struct mc_store *s = arg;
  if (!atomic_load(&s->hb.witness_ticks)) mc_heartbeat_kick(s);
}

static void *heartbeat_main(void *arg) {
  mc_thread_name("mc-heartbeat");
  struct mc_store *s = arg;
  int failures = 0;
  uint64_t ping_ns = (uint64_t)PING_INTERVAL_MS * 1000000, report_ns = (uint64_t)mc_stats_interval_ms() * 1000000;
  uint64_t next_ping = mc_now_ns() + ping_ns, next_report = mc_now_ns() + report_ns, next_wit = 0;
  struct mc_witnesses *wit = s->master.cli->wit;
  pthread_mutex_lock(&s->hb.mu);
  while (!s->hb.stop) {
    uint64_t due = s->seg.mounted ? MC_MIN(next_ping, next_report) : next_report;
    int pending = mc_witness_pending(wit); /* then tick for them (docs/ha.md, "Witnesses") */
    atomic_store(&s->hb.witness_ticks, pending);
    if (pending) due = MC_MIN(due, MC_MAX(next_wit, mc_now_ns() + 1000000));
    wait_until(s, due);
    if (s->hb.stop) break;
    int ping_now = s->hb.ping_now;
    s->hb.ping_now = 0;
    pthread_mutex_unlock(&s->hb.mu);
    uint64_t now = mc_now_ns();
    if (s->seg.mounted && (now >= next_ping || ping_now)) {
      /* a master answering as a standby may be a new leader a moment before it serves: ask again soon */
      int rc = ping(s, &failures);
      next_ping = now + (rc == MC_UNAVAILABLE_IN_CURRENT_STATUS && s->master.leader ? STANDBY_RETRY_NS : ping_ns);
    }
    mc_fastput_flush(s); /* after the ping: a release that waits on a slow master never delays liveness */
    if (s->seg.mounted) mc_ssd_report(s, PING_TIMEOUT_MS);
    if (mc_witness_pending(wit) && (now >= next_wit || ping_now)) {
      mc_witness_tick(s->master.cli, s->self.client_id, ping_now);
      next_wit = mc_now_ns() + mc_witness_tick_ns();
    }
    if (now >= next_report) {
      mc_stats_report(s, PING_TIMEOUT_MS);
      next_report = now + report_ns;
    }
    pthread_mutex_lock(&s->hb.mu);
  }
  pthread_mutex_unlock(&s->hb.mu);
  return NULL;
}

void mc_heartbeat_start(struct mc_store *s) {
  s->hb.stop = 0;
  mc_witness_on_pending(s->master.cli->wit, on_witness, s);
  s->hb.running = !pthread_create(&s->hb.th, NULL, heartbeat_main, s);
  if (!s->hb.running) LOG_ERROR("store client %s: cannot start the heartbeat thread", s->self.name);
}

void mc_heartbeat_stop(struct mc_store *s) {
  if (!s->hb.running) return;
  pthread_mutex_lock(&s->hb.mu);
  s->hb.stop = 1;
  pthread_cond_broadcast(&s->hb.cv);
  pthread_mutex_unlock(&s->hb.mu);
  pthread_join(s->hb.th, NULL);
  s->hb.running = 0;
  mc_witness_on_pending(s->master.cli->wit, NULL, NULL);
}
