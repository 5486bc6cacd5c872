/* Client liveness (docs/master.md, "Liveness and metadata cleanup"): the housekeeping thread expires clients whose last
 * ping is older than client_ttl, fires graceful-unmount timers, takes the metrics snapshots and has the
 * metrics summary logged (the hook report_metrics). Expiry unmounts the client's segments, sweeps their
 * replicas and hands each endpoint they were mounted with to the hook endpoint_expired, which deletes the
 * client's TE metadata keys (te_meta.c), with no lock held. */
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "master_core/minheap.h"
#include "master_core/metrics.h"

#define HOUSEKEEPING_TICK_MS 100

int mc_endpoint_in_use(struct mc_master *m, const char *ep) {
  int used = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nsegs && !used; i++) used = !strcmp(m->segs[i]->te_endpoint, ep);
  pthread_rwlock_unlock(&m->seg_mu);
  return used;
}

/* Detaches all of the client's segments (seg_mu held for writing); collects them and its distinct
 * endpoints (each with the address and host id of the first segment mounted with it). */
static uint32_t detach_client_locked(struct mc_master *m, struct mc_uuid id, struct mseg ***segs,
                                     struct mc_ep_claim **eps, uint32_t *neps) {
  struct mclient *c = mc_client_find_locked(m, id);
  uint32_t n = c ? c->nsegs : 0;
  *segs = mc_malloc(sizeof(**segs) * (n ? n : 1));
  *eps = mc_malloc(sizeof(**eps) * (n ? n : 1));
  *neps = 0;
  if (n) memcpy(*segs, c->segs, sizeof(**segs) * n); /* detaching takes each out of c->segs */
  char cid[37];
  mc_uuid_str(id, cid);
  for (uint32_t i = 0; i < n; i++) {
    struct mseg *s = (*segs)[i];
    LOG_INFO("client_id=%s, segment_name=%s, action=unmount_expired_mem_segment", cid, s->name);
    int dup = 0;
    for (uint32_t j = 0; j < *neps && !dup; j++) dup = !strcmp((*eps)[j].ep, s->te_endpoint);
    if (!dup)
      (*eps)[(*neps)++] =
          (struct mc_ep_claim){mc_strdup(s->te_endpoint), mc_strdup(s->probe_addr), mc_strdup(s->host_id)};
    mc_seg_detach_locked(m, s);
  }
  mc_client_remove_locked(m, id);
  return n;
}

/* Expires id; when only_if_due, only if its deadline is still in the past (a ping may have raced). */
static uint32_t expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep, int only_if_due) {
  struct mseg **segs;
  struct mc_ep_claim *eps;
  uint32_t neps;
  pthread_rwlock_wrlock(&m->seg_mu);
  struct mclient *c = mc_client_find_locked(m, id);
  if (only_if_due && (!c || c->deadline_ns > mc_now_ns())) {
    pthread_rwlock_unlock(&m->seg_mu);
    return 0;
  }
  char cid[37];
  mc_uuid_str(id, cid);
  LOG_INFO("client_id=%s, action=client_expired, reason=%s", cid, why);
  uint32_t n = detach_client_locked(m, id, &segs, &eps, &neps);
  pthread_rwlock_unlock(&m->seg_mu);
  mc_extents_release_client(m, id); /* after it left the table: no new extent can appear */
  mc_sweep_and_free(m, segs, n);
  for (uint32_t i = 0; i < neps; i++) {
    if (m->hooks.endpoint_expired) m->hooks.endpoint_expired(m, &eps[i], keep);
    mc_free(eps[i].ep);
    mc_free(eps[i].probe);
    mc_free(eps[i].host);
  }
  mc_free(eps);
  mc_free(segs);
  return n;
}

uint32_t mc_client_expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep_endpoint) {
  return expire(m, id, why, keep_endpoint, 0);
}

/* ---- the clients' expiry timers: a min-heap of (deadline, client), one entry per client in the table.
 * A ping only stores the client's deadline; its entry is looked at when the deadline it was pushed with
 * comes, and pushed again with the client's current deadline if that moved. A tick with nothing due costs
 * O(1) however many clients there are (rather than a walk of them all every 100 ms). */

MC_MINHEAP(timer_heap, struct ctimer, due_ns)

static void timer_push_locked(struct mc_master *m, struct ctimer t) {
  if (m->ntimers == m->captimers) {
    m->captimers = m->captimers ? 2 * m->captimers : 64;
    m->timers = mc_realloc(m->timers, sizeof(*m->timers) * m->captimers);
  }
  m->timers[m->ntimers] = t;
  timer_heap_up(m->timers, m->ntimers++);
}

void mc_client_timer_push(struct mc_master *m, const struct mclient *c) {
  pthread_mutex_lock(&m->timer_mu);
  timer_push_locked(m, (struct ctimer){atomic_load(&c->deadline_ns), c->gen, c->id});
  pthread_mutex_unlock(&m->timer_mu);
}

void mc_client_timers_free(struct mc_master *m) {
  mc_free(m->timers);
  m->timers = NULL;
  m->ntimers = m->captimers = 0;
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
  pthread_mutex_lock(&m->timer_mu);
  timer_push_locked(m, *t);
  pthread_mutex_unlock(&m->timer_mu);
  return 0;
}

/* Every due timer is looked at (a live client's costs O(log n): each comes due once per client_ttl), and at
 * most 64 clients expire per tick (each expiry sweeps every shard); the rest stay due for the next tick. */
static void expire_due_clients(struct mc_master *m, uint64_t now) {
  for (int budget = 64; budget > 0;) {
    pthread_mutex_lock(&m->timer_mu);
    int due = m->ntimers && m->timers[0].due_ns <= now;
    struct ctimer t = due ? m->timers[0] : (struct ctimer){0};
    if (due) {
      m->timers[0] = m->timers[--m->ntimers];
      timer_heap_down(m->timers, m->ntimers, 0);
    }
    pthread_mutex_unlock(&m->timer_mu);
    if (!due) return;
    if (!timer_recheck(m, &t, now)) continue;
    budget--;
    expire(m, t.id, "ttl", NULL, 1);
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
