/* The master's metrics (see metrics.h). Hot-path counters are relaxed atomics; client reports and the
 * snapshot ring are under ms->mu, held only to add numbers or copy them out. A view (mc_metrics_view)
 * reads the registry under seg_mu (read) for one pass and never holds a shard lock; its renderings are
 * metrics_render.c's. */
#include "master_core/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "mooncake/store_errors.h"

#define SNAP_PERIOD_NS MC_NS_PER_S
#define EVICT_WINDOW_S 60
#define LATENCY_WINDOW_S 60

void mc_metrics_init(struct mc_mstats *ms) {
  memset(ms, 0, sizeof(*ms));
  pthread_mutex_init(&ms->mu, NULL);
  ms->start_ns = mc_now_ns();
  ms->ring[0].t_ns = ms->start_ns; /* the zero point every window falls back to */
  ms->n = 1;
}

void mc_metrics_destroy(struct mc_mstats *ms) { pthread_mutex_destroy(&ms->mu); }

/* ------------------------------------------------------------------ hot path */

static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }
static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

void mc_metrics_batch(struct mc_mstats *ms, uint16_t op, uint32_t items, uint32_t failed) {
  if (op >= MC_OPS_MAX) return;
  struct mc_batch_count *b = &ms->batch[op];
  add(&b->items, items);
  add(&b->failed_items, failed);
  if (failed && failed == items) add(&b->all_failed, 1);
  else if (failed) add(&b->partial, 1);
}

void mc_metrics_lookups(struct mc_mstats *ms, uint64_t hits, uint64_t misses) {
  if (hits) add(&ms->lookup_hits, hits);
  if (misses) add(&ms->lookup_misses, misses);
}

static uint32_t vsize_bucket(uint64_t size) {
  uint32_t i = 0;
  for (uint64_t bound = 1024; i < MC_VSIZE_NBUCKETS - 1 && size > bound; bound *= 4) i++;
  return i;
}

void mc_metrics_put_started(struct mc_mstats *ms, uint64_t size, uint32_t got, uint32_t wanted) {
  add(&ms->vsize[vsize_bucket(size)], 1);
  add(&ms->vsize_sum, size);
  if (got < wanted) add(&ms->put_partial, 1);
}

void mc_metrics_put_failed(struct mc_mstats *ms, int rc) {
  if (rc == MC_NO_AVAILABLE_HANDLE) add(&ms->put_alloc_failures, 1);
}

void mc_metrics_eviction_run(struct mc_mstats *ms, uint64_t keys, uint64_t bytes) {
  add(&ms->evict_runs, 1);
  if (!keys) return;
  add(&ms->evict_runs_ok, 1);
  add(&ms->evicted_keys, keys);
  add(&ms->evicted_bytes, bytes);
}

/* ------------------------------------------------------------------ reports and windows */

void mc_metrics_report(struct mc_mstats *ms, const struct mc_client_stats *st) {
  pthread_mutex_lock(&ms->mu);
  mc_client_stats_add(&ms->sum, st);
  ms->reports++;
  pthread_mutex_unlock(&ms->mu);
}

static uint64_t rpc_total(struct mc_mstats *ms) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < MC_OPS_MAX; i++) n += get(&ms->op[i].req);
  return n;
}

static struct mc_msnap *slot(struct mc_mstats *ms, uint32_t i) { return &ms->ring[(ms->head + i) % MC_WINDOW_SLOTS]; }

void mc_metrics_tick(struct mc_mstats *ms, uint64_t now_ns) {
  pthread_mutex_lock(&ms->mu);
  if (now_ns >= slot(ms, ms->n - 1)->t_ns + SNAP_PERIOD_NS) {
    struct mc_msnap *s;
    if (ms->n < MC_WINDOW_SLOTS) {
      s = slot(ms, ms->n++);
    } else {
      s = slot(ms, 0);
      ms->head = (ms->head + 1) % MC_WINDOW_SLOTS;
    }
    s->t_ns = now_ns;
    s->rpcs = 0;
    for (uint32_t i = 0; i < MC_OPS_MAX; i++) {
      s->req[i] = get(&ms->op[i].req);
      s->fail[i] = get(&ms->op[i].fail);
      s->rpcs += s->req[i];
    }
    s->evicted = get(&ms->evicted_keys);
    memcpy(s->lat, ms->sum.lat, sizeof(s->lat));
  }
  pthread_mutex_unlock(&ms->mu);
}

const struct mc_msnap *mc_metrics_snap_before(struct mc_mstats *ms, uint64_t now, uint64_t window_s) {
  const struct mc_msnap *best = slot(ms, 0);
  for (uint32_t i = 0; i < ms->n && slot(ms, i)->t_ns + window_s * MC_NS_PER_S <= now; i++) best = slot(ms, i);
  return best;
}

/* ------------------------------------------------------------------ one consistent view */

static void registry(struct mc_master *m, struct mc_mview *v) {
  pthread_rwlock_rdlock(&m->seg_mu);
  v->segs = m->nsegs;
  v->clients = m->clients.n;
  pthread_rwlock_unlock(&m->seg_mu);
  mc_usage(m, &v->used, &v->cap);
  mc_ssd_usage(m, &v->ssd_used, &v->ssd_cap);
}

void mc_metrics_view(struct mc_master *m, struct mc_mview *v) {
  struct mc_mstats *ms = m->ms;
  memset(v, 0, sizeof(*v));
  registry(m, v);
  v->keys = atomic_load(&m->nobjects);
  v->soft = atomic_load(&m->n_soft_pinned);
  v->hits = get(&ms->lookup_hits);
  v->misses = get(&ms->lookup_misses);
  v->hit_ratio = v->hits + v->misses ? (double)v->hits / (double)(v->hits + v->misses) : 0;
  uint64_t now = mc_now_ns();
  v->evicted = get(&ms->evicted_keys);
  v->rpcs = rpc_total(ms);
  uint64_t lat[MC_LAT_NBUCKETS];
  pthread_mutex_lock(&ms->mu);
  v->sum = ms->sum;
  v->reports = ms->reports;
  v->qps = (double)(v->rpcs - mc_metrics_snap_before(ms, now, MC_QPS_WINDOW_S)->rpcs) / MC_QPS_WINDOW_S;
  v->eviction_rate = (double)(v->evicted - mc_metrics_snap_before(ms, now, EVICT_WINDOW_S)->evicted) / EVICT_WINDOW_S;
  const struct mc_msnap *old = mc_metrics_snap_before(ms, now, LATENCY_WINDOW_S);
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) lat[i] = ms->sum.lat[i] - old->lat[i];
  pthread_mutex_unlock(&ms->mu);
  v->p99_s = mc_lat_quantile_s(lat, 0.99);
}
