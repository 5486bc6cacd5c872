/* Eviction (docs/master.md, "Eviction"). One thread wakes every 10 ms; it runs when the used ratio passes the high
 * watermark, or when a PutStart failed for space (need_eviction) and eviction_ratio > 0. A run scans
 * the shards one lock at a time (optionally with eviction_thread_num scanners), collecting candidates
 * (lease expired, not hard-pinned, complete on a mounted segment) and the base count, then evicts the
 * oldest lease stamps first, relocking each object's shard and re-checking it. RPCs never wait for more
 * than one shard's scan. The same thread frees discarded and abandoned puts. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "master_core/metrics.h"

#define EVICT_TICK_MS 10
#define PARALLEL_SCAN_MIN_OBJECTS 65536

struct evict_cand {
  uint64_t lease, seq, hash;
  int soft;
};

struct scan {
  struct mc_master *m;
  uint32_t first, last; /* shard range [first, last) */
  uint64_t now, base;
  struct evict_cand *c;
  size_t n, cap;
};

static int soft_pinned(const struct object *o, uint64_t now) {
  return o->soft_pin_ttl_ms && (!o->soft_pin_deadline_ns || now < o->soft_pin_deadline_ns);
}

/* Has a replica eviction may take: COMPLETE on a mounted segment, nothing still being written, no copy/move task. */
static int evictable(const struct object *o) {
  int any = 0;
  for (uint32_t i = 0; i < o->nrep; i++) {
    if (o->rep[i].status != MC_REPLICA_COMPLETE) return 0;
    any |= seg_readable(o->rep[i].seg);
  }
  return any && !o->hard_pin && !o->in_task; /* (a task's targets are PROCESSING anyway) */
}

static void add_cand(struct scan *s, const struct object *o) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->c = mc_realloc(s->c, sizeof(*s->c) * s->cap);
  }
  s->c[s->n++] = (struct evict_cand){.lease = o->lease_ns, .seq = o->seq, .hash = o->hash, .soft = soft_pinned(o, s->now)};
}

/* One pass over the shard: abandoned puts are released (the same work as release_stale_everywhere,
 * in the same walk), then the evictable objects counted and the expired ones collected. */
static void scan_shard(struct scan *s, struct shard *sh) {
  pthread_mutex_lock(&sh->mu);
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b], *next; o; o = next) {
      next = o->next;
      if (mc_obj_release_if_stale(s->m, sh, o, s->now) || !evictable(o)) continue;
      s->base++;
      if (o->lease_ns <= s->now) add_cand(s, o);
    }
  pthread_mutex_unlock(&sh->mu);
}

static void *scan_range(void *arg) {
  struct scan *s = arg;
  for (uint32_t i = s->first; i < s->last; i++) scan_shard(s, &s->m->shards[i]);
  return NULL;
}

/* Scans every shard with up to eviction_thread_num scanners into out, whose array is the one kept
 * between runs (a fresh 30 MB array per run cost more in page faults than the scan itself). */
static void scan_all(struct mc_master *m, uint64_t now, struct scan *out) {
  uint32_t nt = (uint32_t)m->cfg.eviction_thread_num;
  if (nt < 1 || atomic_load(&m->nobjects) < PARALLEL_SCAN_MIN_OBJECTS) nt = 1;
  struct scan *parts = mc_calloc(nt, sizeof(*parts));
  pthread_t *th = mc_calloc(nt, sizeof(*th));
  int *started = mc_calloc(nt, sizeof(*started));
  for (uint32_t t = 0; t < nt; t++) {
    parts[t] = (struct scan){.m = m, .now = now, .first = MC_NSHARDS * t / nt, .last = MC_NSHARDS * (t + 1) / nt};
    if (t == 0) parts[t].c = m->evict_buf, parts[t].cap = m->evict_cap;
    started[t] = t > 0 && !pthread_create(&th[t], NULL, scan_range, &parts[t]);
  }
  for (uint32_t t = 0; t < nt; t++)
    if (!started[t]) scan_range(&parts[t]);
  *out = parts[0];
  for (uint32_t t = 1; t < nt; t++) {
    if (started[t]) pthread_join(th[t], NULL);
    out->base += parts[t].base;
    for (size_t i = 0; i < parts[t].n; i++) {
      if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 1024;
        out->c = mc_realloc(out->c, sizeof(*out->c) * out->cap);
      }
      out->c[out->n++] = parts[t].c[i];
    }
    mc_free(parts[t].c);
  }
  m->evict_buf = out->c, m->evict_cap = out->cap;
  mc_free(parts);
  mc_free(th);
  mc_free(started);
}

static int older(const struct evict_cand *x, const struct evict_cand *y) {
  return x->lease != y->lease ? x->lease < y->lease : x->seq < y->seq;
}

static int by_age(const void *a, const void *b) {
  const struct evict_cand *x = a, *y = b;
  return older(x, y) ? -1 : older(y, x);
}

static void cswap(struct evict_cand *a, struct evict_cand *b) {
  struct evict_cand t = *a;
  *a = *b;
  *b = t;
}

/* Rearranges c[0, n) so that its k oldest come first (k < n), in no particular order: quickselect with
 * a median-of-three pivot. O(n) on average, in place. */
static void select_oldest(struct evict_cand *c, size_t n, size_t k) {
  long lo = 0, hi = (long)n - 1, kk = (long)k;
  while (hi > lo) {
    long mid = lo + (hi - lo) / 2;
    if (older(&c[hi], &c[lo])) cswap(&c[hi], &c[lo]);
    if (older(&c[mid], &c[lo])) cswap(&c[mid], &c[lo]);
    if (older(&c[hi], &c[mid])) cswap(&c[hi], &c[mid]);
    struct evict_cand pivot = c[mid];
    long i = lo, j = hi;
    while (i <= j) { /* c[lo] <= pivot <= c[hi] stop the scans at the ends */
      while (older(&c[i], &pivot)) i++;
      while (older(&pivot, &c[j])) j--;
      if (i <= j) cswap(&c[i++], &c[j--]);
    }
    /* c[lo, j] <= pivot <= c[i, hi]; anything in (j, i) equals the pivot */
    if (kk <= j) hi = j;
    else if (kk >= i) lo = i;
    else return;
  }
}

/* Hands out candidates oldest first, ordering only as many as are asked for: a run evicts a few
 * percent of the candidates, so sorting all of them (a million here and there) was most of its time. */
struct cursor {
  struct evict_cand *c;
  size_t n, sorted, next; /* c[0, sorted) is ordered and older than c[sorted, n) */
};

static const struct evict_cand *cursor_next(struct cursor *cu, size_t want) {
  if (cu->next == cu->n) return NULL;
  if (cu->next == cu->sorted) {
    size_t k = MC_MIN(MC_MAX(want, (size_t)1024), cu->n - cu->sorted);
    if (k < cu->n - cu->sorted) select_oldest(cu->c + cu->sorted, cu->n - cu->sorted, k);
    qsort(cu->c + cu->sorted, k, sizeof(*cu->c), by_age);
    cu->sorted += k;
  }
  return &cu->c[cu->next++];
}

/* The key groups of the members a run evicted (docs/master.md, "Key groups"), each held once, so the run
 * can take their other members after its passes. */
struct taken_groups {
  struct kgroup **g;
  size_t n, cap;
};

static void note_group(struct mc_master *m, struct taken_groups *t, struct kgroup *g) {
  if (!g) return;
  for (size_t i = 0; i < t->n; i++)
    if (t->g[i] == g) return;
  if (t->n == t->cap) t->g = mc_realloc(t->g, sizeof(*t->g) * (t->cap = t->cap ? 2 * t->cap : 16));
  mc_kgroup_hold(m, g);
  t->g[t->n++] = g;
}

static int taken(const struct taken_groups *t, const struct kgroup *g) {
  for (size_t i = 0; g && i < t->n; i++)
    if (t->g[i] == g) return 1;
  return 0;
}

/* Whether eviction may take o now: evictable, its lease and its key group's expired, and not soft-pinned
 * unless allow_soft. */
static int may_evict(const struct object *o, uint64_t now, int allow_soft) {
  return evictable(o) && o->lease_ns <= now && !mc_kgroup_leased(o->kg, now) &&
         (allow_soft || !soft_pinned(o, now));
}

/* Evicts o (shard lock held), noting its key group; adds the replica bytes freed to *bytes. */
static void evict_obj(struct mc_master *m, struct shard *sh, struct object *o, struct taken_groups *t,
                      uint64_t *bytes) {
  MLOG_V(2, "key=%s, info=evicted", o->key);
  note_group(m, t, o->kg);
  *bytes += o->size * o->nrep;
  for (uint32_t i = 0; i < o->nrep; i++) mc_rep_free(m, o, &o->rep[i], 0, NULL);
  o->nrep = 0;
  mc_obj_erase(m, sh, o);
}

/* Evicts the candidate if it still qualifies: 1 when evicted. */
static int evict_one(struct mc_master *m, const struct evict_cand *c, int allow_soft, struct taken_groups *t,
                     uint64_t *bytes) {
  struct shard *sh = &m->shards[c->hash & (MC_NSHARDS - 1)];
  int done = 0;
  pthread_mutex_lock(&sh->mu);
  struct object *o = mc_obj_find_seq(sh, c->hash, c->seq);
  if (o && may_evict(o, mc_now_ns(), allow_soft)) {
    evict_obj(m, sh, o, t, bytes);
    done = 1;
  }
  pthread_mutex_unlock(&sh->mu);
  return done;
}

/* Evicts candidates from the cursor, oldest first, until *evicted reaches goal or they run out. */
static void evict_pass(struct mc_master *m, struct cursor *cu, int soft, uint64_t goal, struct taken_groups *t,
                       uint64_t *evicted, uint64_t *bytes) {
  const struct evict_cand *c;
  while (*evicted < goal && (c = cursor_next(cu, (size_t)(goal - *evicted))))
    *evicted += (uint64_t)evict_one(m, c, soft, t, bytes);
}

/* Grouped keys are evicted together: after the passes, every other member of a group the run took from
 * that eviction may take (soft-pinned ones only when the master allows evicting those) goes too, in one
 * more walk of the shards. Then the run's holds on the groups are dropped. */
static void evict_groups(struct mc_master *m, struct taken_groups *t, uint64_t *evicted, uint64_t *bytes) {
  int soft = m->cfg.allow_evict_soft_pinned_objects;
  for (uint32_t i = 0; t->n && i < MC_NSHARDS; i++) {
    struct shard *sh = &m->shards[i];
    pthread_mutex_lock(&sh->mu);
    uint64_t now = mc_now_ns();
    for (uint32_t b = 0; b < sh->nbuckets; b++)
      for (struct object *o = sh->buckets[b], *next; o; o = next) {
        next = o->next;
        if (taken(t, o->kg) && may_evict(o, now, soft)) {
          evict_obj(m, sh, o, t, bytes);
          ++*evicted;
        }
      }
    pthread_mutex_unlock(&sh->mu);
  }
  for (size_t i = 0; i < t->n; i++) mc_kgroup_put(m, t->g[i]);
  mc_free(t->g);
}

/* ceil(base * ratio), forgiving the binary rounding of ratios like 0.05 (400 * 0.05 = 20, not 21). */
static uint64_t ceil_count(uint64_t base, double ratio) {
  double x = (double)base * ratio, tol = 1e-9 * (x > 1 ? x : 1);
  uint64_t k = (uint64_t)x;
  return (double)k < x - tol ? k + 1 : k;
}

uint64_t mc_evict_run(struct mc_master *m, double ratio) {
  double hw = m->cfg.eviction_high_watermark_ratio, r = m->cfg.eviction_ratio;
  double target = MC_MAX(r, ratio - hw + r), lower = MC_MAX(target / 2, ratio - hw);
  int need = atomic_load(&m->need_eviction);
  MLOG_V(1, "[EVICT-TRIGGER] memory_ratio=%.4f high_watermark=%g need_mem_eviction=%d eviction_ratio=%g", ratio, hw,
         need, r);
  struct scan s;
  scan_all(m, mc_now_ns(), &s);
  /* the non-pinned candidates first, then the soft-pinned ones; each group handed out oldest first */
  size_t ns = 0;
  for (size_t i = 0; i < s.n; i++)
    if (!s.c[i].soft) cswap(&s.c[ns++], &s.c[i]);
  struct cursor plain = {s.c, ns, 0, 0}, soft = {s.c + ns, s.n - ns, 0, 0};
  uint64_t evicted = 0, bytes = 0, goal1 = ceil_count(s.base, target), goal2 = ceil_count(s.base, lower);
  /* pass 1 stops at goal1 or when the plain candidates run out; goal2 <= goal1 (lower <= target), so
   * falling short of goal2 means none are left and pass 2 takes soft-pinned ones only */
  struct taken_groups groups = {0};
  evict_pass(m, &plain, 0, goal1, &groups, &evicted, &bytes);
  if (evicted < goal2 && m->cfg.allow_evict_soft_pinned_objects)
    evict_pass(m, &soft, 1, goal2, &groups, &evicted, &bytes);
  evict_groups(m, &groups, &evicted, &bytes);
  /* The run answered the failed put; a later failure sets the flag again. */
  atomic_store(&m->need_eviction, 0);
  mc_metrics_eviction_run(m->ms, evicted, bytes);
  double actual = s.base ? (double)evicted / (double)s.base : 0;
  if (evicted) {
    LOG_INFO("[EVICT-TRIGGER] memory_ratio=%.4f high_watermark=%g need_mem_eviction=%d eviction_ratio=%g", ratio, hw,
             need, r);
    LOG_INFO("[EVICT-RESULT] evicted_count=%llu, eviction_base=%llu, actual_evict_ratio=%.4f, target_evict_ratio=%.4f",
             (unsigned long long)evicted, (unsigned long long)s.base, actual, target);
    LOG_INFO("[EVICT-DONE] BatchEvict execution completed.");
  } else {
    MLOG_V(1, "[EVICT-RESULT] evicted_count=0, eviction_base=%llu, actual_evict_ratio=0, target_evict_ratio=%.4f",
           (unsigned long long)s.base, target);
  }
  return evicted;
}

void mc_evict_free(struct mc_master *m) {
  mc_free(m->evict_buf);
  m->evict_buf = NULL;
  m->evict_cap = 0;
}

static void release_stale_everywhere(struct mc_master *m, uint64_t now) {
  for (uint32_t i = 0; i < MC_NSHARDS; i++) {
    struct shard *sh = &m->shards[i];
    pthread_mutex_lock(&sh->mu);
    mc_shard_release_stale(m, sh, now);
    pthread_mutex_unlock(&sh->mu);
  }
}

/* Idle period between abandoned-put scans: half the release timeout, within [1 s, 60 s]. */
static uint64_t stale_period_ns(const struct mc_master *m) {
  uint64_t p = (uint64_t)m->cfg.put_start_release_timeout_sec * MC_NS_PER_S / 2;
  return MC_MIN(MC_MAX(p, MC_NS_PER_S), 60 * MC_NS_PER_S);
}

void *mc_evict_main(void *arg) {
  mc_thread_name("mc-evict");
  struct mc_master *m = arg;
  uint64_t next_stale = mc_now_ns() + stale_period_ns(m), not_before = 0, backoff_ms = EVICT_TICK_MS;
  MLOG_V(1, "eviction thread started");
  while (!mc_bg_wait(m, EVICT_TICK_MS)) {
    uint64_t now = mc_now_ns(), used, cap;
    mc_discard_release_due(m, now);
    mc_usage(m, &used, &cap);
    double ratio = cap ? (double)used / (double)cap : 0;
    int over = ratio > m->cfg.eviction_high_watermark_ratio;
    int need = atomic_load(&m->need_eviction) && m->cfg.eviction_ratio > 0;
    if (need || (over && now >= not_before)) {
      /* Above the watermark with nothing evictable (all leased), back off up to 1 s between scans. */
      uint64_t n = mc_evict_run(m, ratio);
      backoff_ms = n ? EVICT_TICK_MS : MC_MIN(backoff_ms * 2, 1000);
      not_before = now + backoff_ms * MC_NS_PER_MS;
      next_stale = now + stale_period_ns(m);
    } else if (now >= next_stale) {
      release_stale_everywhere(m, now);
      next_stale = now + stale_period_ns(m);
    }
  }
  MLOG_V(1, "eviction thread stopped");
  return NULL;
}
