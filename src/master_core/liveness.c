/* Client liveness (docs/master.md, "Liveness and metadata cleanup"): the housekeeping thread expires clients whose last
 * ping is older than client_ttl (their timers: client_timers.c), fires graceful-unmount timers, takes the metrics
 * snapshots and has the metrics summary logged (the hook report_metrics). Expiry (mount.c) unmounts the client's
 * segments, sweeps their replicas and hands each endpoint they were mounted with to the hook endpoint_expired,
 * which deletes the client's TE metadata keys (te_meta.c), with no lock held. */
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "master_core/metrics.h"

#define HOUSEKEEPING_TICK_MS 100

int mc_endpoint_in_use(struct mc_master *m, const char *ep) {
  int used = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nsegs && !used; i++) used = !strcmp(m->segs[i]->te_endpoint, ep);
  pthread_rwlock_unlock(&m->seg_mu);
  return used;
}

/* The client of timer t if it is still that incarnation (seg_mu held), else NULL. */
static struct mclient *timer_client_locked(struct mc_master *m, const struct ctimer *t) {
  struct mclient *c = mc_client_find_locked(m, t->id);
  return c && c->gen == t->gen ? c : NULL;
}

/* Re-arms t at its client's current deadline when the client is still there and not due; 1 when it is
 * due (expire it). A client gone, or replaced by a new incarnation (with its own timer), drops t. */
static int timer_recheck(struct mc_master *m, struct ctimer *t, uint64_t now) {
  pthread_rwlock_rdlock(&m->seg_mu);
  struct mclient *c = timer_client_locked(m, t);
  uint64_t d = c ? atomic_load(&c->deadline_ns) : 0;
  pthread_rwlock_unlock(&m->seg_mu);
  if (!c || d <= now) return c != NULL;
  t->due_ns = d;
  mc_client_timer_rearm(m, t);
  return 0;
}

/* Every due timer is looked at (a live client's costs O(log n): each comes due once per client_ttl), and at
 * most 64 clients expire per tick (each expiry sweeps every shard); the rest stay due for the next tick. */
static void expire_due_clients(struct mc_master *m, uint64_t now) {
  for (int budget = 64; budget > 0;) {
    struct ctimer t;
    if (!mc_client_timer_pop_due(m, now, &t)) return;
    if (!timer_recheck(m, &t, now)) continue;
    budget--;
    mc_client_expire_if_due(m, t.id, "ttl");
    timer_recheck(m, &t, now); /* a ping that came meanwhile kept it: its timer again */
  }
}

static void fire_grace_timers(struct mc_master *m, uint64_t now) {
  struct mseg *done[64];
  uint32_t n = 0;
  if (!atomic_load(&m->ngraceful)) return; /* no segment in a grace period: no lock taken */
  pthread_rwlock_wrlock(&m->seg_mu);
  for (uint32_t i = 0; i < atomic_load(&m->ngraceful) && n < MC_ARRAY_LEN(done);) {
    struct mseg *s = m->graceful[i];
    if (s->grace_deadline_ns <= now) {
      char cid[37];
      mc_uuid_str(s->client, cid);
      LOG_INFO("client_id=%s, action=unmount_segment, segment_name=%s, reason=grace_period_over", cid, s->name);
      mc_seg_detach_locked(m, s); /* takes it out of m->graceful: m->graceful[i] is another one now */
      done[n++] = s;
    } else {
      i++;
    }
  }
  pthread_rwlock_unlock(&m->seg_mu);
  mc_sweep_and_free(m, done, n);
}

void *mc_housekeeping_main(void *arg) {
  mc_thread_name("mc-housekeep");
  struct mc_master *m = arg;
  uint64_t period = (uint64_t)m->cfg.metric_report_interval_sec * MC_NS_PER_S, next_summary = mc_now_ns() + period;
  MLOG_V(1, "housekeeping thread started");
  while (!mc_bg_wait(m, HOUSEKEEPING_TICK_MS)) {
    uint64_t now = mc_now_ns();
    fire_grace_timers(m, now);
    expire_due_clients(m, now);
    mc_extents_expire(m, now);
    mc_tasks_expire(m, now);
    mc_metrics_tick(m->ms, now);
    if (m->cfg.enable_metric_reporting && now >= next_summary) {
      if (m->hooks.report_metrics) m->hooks.report_metrics(m);
      next_summary = now + period;
    }
  }
  MLOG_V(1, "housekeeping thread stopped");
  return NULL;
}
