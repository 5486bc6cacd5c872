/* The read path: look replicas up (one master RPC per batch), order them (docs/store-client.md, "Reads": this client's
 * memory, same host, same zone, any; within a rank, peers a read failed from in the last SHUN_NS go last),
 * read the first choice of every key in one transfer batch, fall
 * over to the next replica for the keys that failed, and finally enforce the read lease: data that
 * arrived after lookup time + lease_ttl_ms is discarded with LEASE_EXPIRED. A read that took longer than
 * LONG_READ_MS also checks that the master which granted the lease still runs: a restarted master knows
 * nothing of the old leases and hands out a re-mounted segment's space again after its quiet period
 * (MC_REMOUNT_QUIET_NS, 1.5 s), so such a read is discarded the same way. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define LOOKUP_CHUNK 8192 /* keys per master lookup and transfer batch */
#define LONG_READ_MS 1000 /* below the master's remount quiet period (MC_REMOUNT_QUIET_NS, 1.5 s) */
#define VIEW_CHECK_MS 2000

/* A peer that failed a read (frozen, cut off, dead but still listed until the master expires it) would
 * make every read that tries it first wait for the engine's deadline again; for SHUN_NS its replicas are
 * tried after the others of their rank instead. Only the order changes: a replica on it is still read
 * when nothing else is left, and a read that succeeds there lifts the shun at once. */
#define SHUN_NS (10ull * 1000 * 1000 * 1000)

static uint64_t ep_hash(const char *ep) { return mc_str_hash(ep) | 1; /* 0 marks a free slot */ }

/* ok = 0: ep failed a read now; ok = 1: a read from ep succeeded (lifts a shun). */
static void shun_note(struct mc_store *s, const char *ep, int ok) {
  if (ok && !atomic_load_explicit(&s->shun.any, memory_order_relaxed)) return;
  if (!ok) atomic_store(&s->shun.any, 1);
  uint64_t h = ep_hash(ep), now = mc_now_ns();
  pthread_mutex_lock(&s->shun.mu);
  struct mc_shun *slot = NULL, *oldest = &s->shun.slot[0];
  for (size_t i = 0; i < MC_ARRAY_LEN(s->shun.slot); i++) {
    if (s->shun.slot[i].ep_hash == h) slot = &s->shun.slot[i];
    if (s->shun.slot[i].until_ns < oldest->until_ns) oldest = &s->shun.slot[i];
  }
  if (ok) {
    if (slot) slot->until_ns = 0, slot->ep_hash = 0;
  } else {
    if (!slot || slot->until_ns <= now)
      LOG_WARN("peer %s failed a read; its replicas are tried after the others for %llu s", ep,
               (unsigned long long)(SHUN_NS / 1000000000ull));
    if (!slot) slot = oldest;
    *slot = (struct mc_shun){h, now + SHUN_NS};
  }
  pthread_mutex_unlock(&s->shun.mu);
}

static int shunned(struct mc_store *s, const char *ep, uint64_t now) {
  if (!atomic_load_explicit(&s->shun.any, memory_order_relaxed)) return 0;
  uint64_t h = ep_hash(ep);
  int yes = 0;
  pthread_mutex_lock(&s->shun.mu);
  for (size_t i = 0; i < MC_ARRAY_LEN(s->shun.slot) && !yes; i++) yes = s->shun.slot[i].ep_hash == h && s->shun.slot[i].until_ns > now;
  pthread_mutex_unlock(&s->shun.mu);
  return yes;
}

static int replica_rank(const struct mc_store *s, const struct mc_replica_rec *r) {
  const char *host = mc_host_id();
  if (!strcmp(r->te_endpoint, s->self.te_name)) return 0;
  if (*host && !strcmp(r->host_id, host)) return 1;
  if (s->self.zone[0] && !strcmp(r->zone, s->self.zone)) return 2;
  return 3;
}

/* Indexes of the readable replicas, best first: by rank, shunned peers last within a rank, otherwise
 * the master's order. */
static uint32_t order_replicas(struct mc_store *s, const struct mcli_reps *l, uint32_t *idx) {
  uint32_t k = 0;
  uint64_t now = mc_now_ns();
  for (int rank = 0; rank <= 3; rank++)
    for (int late = 0; late <= 1; late++)
      for (uint32_t i = 0; i < l->n; i++)
        if (l->reps[i].status == MC_REPLICA_COMPLETE && replica_rank(s, &l->reps[i]) == rank &&
            (rank ? shunned(s, l->reps[i].te_endpoint, now) : 0) == late) /* our own memory: never shunned */
          idx[k++] = i;
  return k;
}

struct rkey {
  uint32_t *order, norder, cur;
  uint64_t size;
  int done;
  int64_t res;
};

/* When a lookup is sent: the time, and the master incarnation known before it (never one born later). */
struct stamp {
  uint64_t t0_ms, view;
};

static struct stamp stamp_now(struct mc_store *s) {
  struct stamp st;
  st.view = atomic_load(&s->master.view);
  st.t0_ms = mc_now_ms();
  return st;
}

/* After a read longer than LONG_READ_MS: whether the master that answered its lookup may have been
 * replaced meanwhile (then its bytes may have been handed out again). One ServiceReady; the incarnation it
 * reports becomes the known one. The lookup's master is the one known before it, or a newer one that
 * was born before the lookup: a restart after the lookup always shows as a view other than st.view (a
 * stale st.view only costs a needless discard). */
static int master_replaced(struct mc_store *s, struct stamp st) {
  if (!st.view) return 0; /* a master that does not report its incarnation */
  char *version = NULL;
  uint64_t v = 0;
  int rc = mcli_service_ready(s->master.cli, VIEW_CHECK_MS, &version, &v);
  mc_free(version);
  if (!rc && v) atomic_store(&s->master.view, v);
  return rc || v != st.view;
}

/* Reads n looked-up keys into bufs; results per key. st: when the lookup was sent (stamp_now). */
static void read_many(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                      struct mcli_reps *l, size_t n, struct stamp st, uint64_t lease_ms, int64_t *results) {
  uint64_t t0_ms = st.t0_ms;
  struct rkey *k = mc_calloc(n ? n : 1, sizeof(*k));
  struct mc_xfer *x = mc_calloc(n ? n : 1, sizeof(*x));
  size_t *who = mc_calloc(n ? n : 1, sizeof(*who));
  for (size_t i = 0; i < n; i++) {
    k[i].res = l[i].status;
    k[i].done = l[i].status != 0;
    if (k[i].done) continue;
    k[i].order = mc_calloc(l[i].n ? l[i].n : 1, sizeof(uint32_t));
    k[i].norder = order_replicas(s, &l[i], k[i].order);
    k[i].done = 1;
    if (!k[i].norder) k[i].res = MC_INVALID_REPLICA;
    else if ((k[i].size = l[i].reps[k[i].order[0]].size) > sizes[i]) k[i].res = MC_INVALID_PARAMS;
    else k[i].done = 0, k[i].res = MC_TRANSFER_FAIL;
  }
  /* pass 0 with cached descriptors; pass 1 re-reads the descriptors of segments that failed */
  for (int pass = 0; pass < 2; pass++) {
    for (int round = 0;; round++) {
      size_t m = 0;
      for (size_t i = 0; i < n; i++) {
        if (k[i].done || k[i].cur >= k[i].norder) continue;
        const struct mc_replica_rec *r = &l[i].reps[k[i].order[k[i].cur]];
        x[m] = (struct mc_xfer){OPCODE_READ, bufs[i], r->te_endpoint, r->address, k[i].size};
        who[m++] = i;
      }
      if (!m) break;
      mc_xfer_run(s, x, m, pass == 1 && round == 0);
      for (size_t j = 0; j < m; j++) {
        struct rkey *q = &k[who[j]];
        int remote = x[j].endpoint && strcmp(x[j].endpoint, s->self.te_name);
        if (remote && (x[j].rc == MC_TRANSFER_FAIL || !x[j].rc)) shun_note(s, x[j].endpoint, !x[j].rc);
        if (x[j].rc) {
          q->res = x[j].rc;
          q->cur = x[j].rc == MC_TRANSFER_FAIL ? q->cur + 1 : q->norder; /* -600: no replica can help */
          continue;
        }
        q->done = 1;
        q->res = (int64_t)q->size;
        if (strcmp(x[j].path, "local"))
          LOG_INFO("TransferRequest key=%s bytes=%llu peer=%s protocol=%s duration_us=%llu", keys[who[j]],
                   (unsigned long long)q->size, x[j].endpoint, x[j].path, (unsigned long long)x[j].dur_us);
      }
    }
    int retry = 0;
    for (size_t i = 0; i < n; i++)
      if (!k[i].done && k[i].res == MC_TRANSFER_FAIL) k[i].cur = 0, retry = 1;
    if (!retry) break;
  }
  uint64_t now = mc_now_ms();
  int got = 0;
  for (size_t i = 0; i < n; i++) {
    results[i] = k[i].res;
    if (results[i] > 0 && lease_ms && now > t0_ms + lease_ms) {
      LOG_WARN("lease_expired_before_data_transfer_completed key=%s", keys[i]);
      results[i] = MC_LEASE_EXPIRED;
    }
    got |= results[i] > 0;
    mc_free(k[i].order);
  }
  if (got && now > t0_ms + LONG_READ_MS && master_replaced(s, st))
    for (size_t i = 0; i < n; i++)
      if (results[i] > 0) {
        LOG_WARN("key=%s: the master was restarted or is unreachable after this %llu ms read began; its lease "
                 "may be void, data discarded (LEASE_EXPIRED)",
                 keys[i], (unsigned long long)(now - t0_ms));
        results[i] = MC_LEASE_EXPIRED;
      }
  mc_free(who);
  mc_free(x);
  mc_free(k);
}

int64_t mc_get_into(struct mc_store *s, const char *key, void *buf, size_t size) {
  if (!*key) return MC_INVALID_PARAMS;
  struct mcli_reps l;
  uint64_t lease = 0;
  struct stamp st = stamp_now(s);
  int rc = mcli_get_replicas(s->master.cli, key, &lease, &l);
  mc_stats_replica_lookup(s, rc);
  if (rc) return rc;
  int64_t res;
  read_many(s, &key, &buf, &size, &l, 1, st, lease, &res);
  mcli_reps_free(&l, 1);
  return res;
}

static void get_chunk(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes, size_t n,
                      int64_t *results) {
  struct mcli_reps *l = mc_calloc(n, sizeof(*l));
  uint64_t lease = 0;
  struct stamp st = stamp_now(s);
  int rc = mcli_batch_get_replicas(s->master.cli, keys, n, &lease, l);
  for (size_t i = 0; !rc && i < n; i++) mc_stats_replica_lookup(s, l[i].status);
  if (rc) {
    for (size_t i = 0; i < n; i++) results[i] = rc;
  } else {
    read_many(s, keys, bufs, sizes, l, n, st, lease, results);
    mcli_reps_free(l, n);
  }
  mc_free(l);
}

static void get_batch_flat(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                           size_t n, int64_t *results) {
  /* empty keys are answered here; the rest go to the master in chunks */
  const char **k = mc_calloc(n ? n : 1, sizeof(*k));
  void **b = mc_calloc(n ? n : 1, sizeof(*b));
  size_t *z = mc_calloc(n ? n : 1, sizeof(*z)), *pos = mc_calloc(n ? n : 1, sizeof(*pos));
  int64_t *r = mc_calloc(n ? n : 1, sizeof(*r));
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!*keys[i]) {
      results[i] = MC_INVALID_PARAMS;
      continue;
    }
    k[m] = keys[i], b[m] = bufs[i], z[m] = sizes[i], pos[m++] = i;
  }
  for (size_t off = 0; off < m; off += LOOKUP_CHUNK)
    get_chunk(s, k + off, b + off, z + off, MC_MIN(LOOKUP_CHUNK, m - off), r + off);
  for (size_t i = 0; i < m; i++) results[pos[i]] = r[i];
  mc_free(r);
  mc_free(pos);
  mc_free(z);
  mc_free(b);
  mc_free(k);
}

/* Size of the best readable replica of a looked-up key, or a negative code. */
static int64_t object_size(struct mc_store *s, const struct mcli_reps *l) {
  uint32_t *idx = mc_calloc(l->n ? l->n : 1, sizeof(uint32_t));
  int64_t res = order_replicas(s, l, idx) ? (int64_t)l->reps[idx[0]].size : MC_INVALID_REPLICA;
  mc_free(idx);
  return res;
}

int64_t mc_get_size(struct mc_store *s, const char *key) {
  if (!*key) return MC_INVALID_PARAMS;
  struct mcli_reps l;
  uint64_t lease;
  int rc = mcli_get_replicas(s->master.cli, key, &lease, &l);
  mc_stats_replica_lookup(s, rc);
  if (rc) return rc;
  int64_t res = object_size(s, &l);
  mcli_reps_free(&l, 1);
  return res;
}

int64_t mc_get_copy(struct mc_store *s, const char *key, void **out) {
  *out = NULL;
  if (!*key) return MC_INVALID_PARAMS;
  struct mcli_reps l;
  uint64_t lease = 0;
  struct stamp st = stamp_now(s);
  int rc = mcli_get_replicas(s->master.cli, key, &lease, &l);
  mc_stats_replica_lookup(s, rc);
  if (rc) return rc;
  int64_t res = object_size(s, &l);
  char *p = NULL;
  if (res > 0 && (!s->staging.pool || (uint64_t)res > s->staging.size)) {
    LOG_WARN("get key=%s: object of %lld bytes does not fit the staging buffer (local_buffer_size=%llu)", key,
             (long long)res, (unsigned long long)s->staging.size);
    res = MC_INVALID_PARAMS;
  } else if (res > 0 && !(p = mc_stage_alloc(s->staging.pool, (uint64_t)res, 10000))) {
    res = MC_INVALID_PARAMS;
  }
  if (p) {
    size_t cap = (size_t)res;
    read_many(s, &key, (void *const *)&p, &cap, &l, 1, st, lease, &res);
    if (res > 0 && !(*out = malloc((size_t)res))) res = MC_INTERNAL_ERROR;
    if (res > 0) memcpy(*out, p, (size_t)res);
    mc_stage_release(s->staging.pool, p, cap);
  }
  mcli_reps_free(&l, 1);
  return res;
}

/* Multi-buffer keys: each key read into one area (staging.c), then scattered to its buffers. */
static void get_batch_multi(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                            const size_t *nbufs, size_t count, int64_t *results) {
  struct mc_multi m;
  mc_multi_open(s, &m, (const void *const *)bufs, sizes, nbufs, count);
  const char **k = mc_calloc(count, sizeof(char *));
  size_t *pos = mc_calloc(count, sizeof(size_t)), n = 0;
  for (size_t i = 0; i < count; i++) {
    if (m.a[i].kind < 0) {
      results[i] = MC_INVALID_PARAMS;
      continue;
    }
    k[n] = keys[i], m.p[n] = m.a[i].p, m.len[n] = m.a[i].len, pos[n++] = i;
  }
  int64_t *r = mc_calloc(n ? n : 1, sizeof(int64_t));
  get_batch_flat(s, k, m.p, m.len, n, r);
  for (size_t j = 0; j < n; j++) {
    size_t i = pos[j];
    results[i] = r[j];
    if (r[j] > 0 && m.a[i].kind)
      mc_area_copy(&m.a[i], bufs + m.first[i], sizes + m.first[i], nbufs[i], (uint64_t)r[j], 0);
  }
  mc_free(r);
  mc_free(pos);
  mc_free(k);
  mc_multi_close(s, &m, count);
}

void mc_get_batch(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                  const size_t *nbufs, size_t n, int64_t *results) {
  if (nbufs) get_batch_multi(s, keys, bufs, sizes, nbufs, n, results);
  else get_batch_flat(s, keys, bufs, sizes, n, results);
}
