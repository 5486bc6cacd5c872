/* The put contract (docs/master.md, "Put"), shared by upsert ("Upsert") through struct mc_write_ops:
 * PutStart (OBJECT_ALREADY_EXISTS is success and the stored value is kept) -> write every allocated replica
 * -> PutEnd if all writes landed, else PutRevoke and the first error. Batches make one master call per
 * phase and one transfer batch for all replicas; a key repeated in a batch is written once (its first
 * occurrence, docs/store-client.md, "Put"). Puts (not upserts) go through write extents first where they
 * can (fastput.c: one round trip, for batches too). */
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define STAGE_WAIT_MS 10000
#define PUT_CHUNK 4096 /* keys per master call in batch puts */

int mc_put_config_from(struct mc_store *s, const mooncake_replicate_config_t *in, struct mc_put_config *out) {
  memset(out, 0, sizeof(*out));
  size_t n = in ? in->replica_num : 1;
  if (n == 0 || n > UINT32_MAX) return MC_INVALID_PARAMS;
  out->replica_num = (uint32_t)n;
  out->soft_pin_action = in && in->with_soft_pin ? MC_SOFT_PIN_SET : MC_SOFT_PIN_KEEP;
  out->soft_pin_ttl_ms = -1;
  out->with_hard_pin = in && in->with_hard_pin ? 1 : 0;
  for (size_t i = 0; in && in->preferred_segments && i < in->preferred_segments_count; i++) {
    if (!in->preferred_segments[i]) continue;
    if (out->n_preferred == MC_MAX_PREFERRED) {
      LOG_WARN("put: only the first %d preferred segments are used", MC_MAX_PREFERRED);
      break;
    }
    out->preferred[out->n_preferred++] = mc_strdup(in->preferred_segments[i]);
  }
  out->writer_host_id = mc_strdup(mc_host_id());
  out->writer_zone = mc_strdup(s->zone);
  return 0;
}

static void log_put_start_failure(const struct mc_write_ops *ops, const char *key, int rc) {
  if (rc == MC_NO_AVAILABLE_HANDLE)
    LOG_WARN("Failed to start %s operation for key=%s due to insufficient space. Consider lowering "
             "eviction_high_watermark_ratio or mounting more segments.", ops->name, key);
  else LOG_WARN("%s key=%s: start failed: %s", ops->name, key, mooncake_store_err_name(rc));
}

/* Fills one write per replica into x (n = replica count); a replica smaller than the value fails. */
static size_t replica_writes(const struct mcli_reps *r, const void *src, uint64_t len, struct mc_xfer *x) {
  for (uint32_t i = 0; i < r->n; i++) {
    const struct mc_replica_rec *rep = &r->reps[i];
    x[i] = (struct mc_xfer){OPCODE_WRITE, (void *)src, rep->te_endpoint, rep->address, len};
    if (rep->size < len) x[i].endpoint = NULL; /* skipped by run_writes; writes_result fails the key */
  }
  return r->n;
}

/* First error among a key's writes (0 when all landed). */
static int writes_result(const struct mc_xfer *x, size_t n, const struct mcli_reps *r, uint64_t len) {
  for (size_t i = 0; i < n; i++) {
    if (r->reps[i].size < len) return MC_TRANSFER_FAIL;
    if (x[i].rc) return x[i].rc;
  }
  return n ? 0 : MC_NO_AVAILABLE_HANDLE;
}

/* Runs the well-formed writes of x[0..n) (endpoint set) in one transfer batch, results in place. */
static void run_writes(struct mc_store *s, struct mc_xfer *x, size_t n) {
  struct mc_xfer *w = mc_calloc(n ? n : 1, sizeof(*w));
  size_t *wi = mc_calloc(n ? n : 1, sizeof(size_t)), k = 0;
  for (size_t j = 0; j < n; j++)
    if (x[j].endpoint) w[k] = x[j], wi[k++] = j;
  mc_xfer_run_retry(s, w, k);
  for (size_t j = 0; j < k; j++) x[wi[j]] = w[j];
  mc_free(wi);
  mc_free(w);
}

/* The two-round-trip path: PutStart, writes, PutEnd (or PutRevoke). */
static int put_slow(struct mc_store *s, const struct mc_write_ops *ops, const char *key, const void *src, uint64_t len,
                    const struct mc_put_config *cfg) {
  struct mcli_reps r;
  int rc = mcli_put_start(s->master, ops, s->client_id, key, len, cfg, &r);
  if (rc == MC_OBJECT_ALREADY_EXISTS) return 0;
  if (rc) {
    log_put_start_failure(ops, key, rc);
    return rc;
  }
  struct mc_xfer *x = mc_calloc(r.n ? r.n : 1, sizeof(*x));
  replica_writes(&r, src, len, x);
  run_writes(s, x, r.n);
  rc = writes_result(x, r.n, &r, len);
  mc_free(x);
  mcli_reps_free(&r, 1);
  if (!rc) return mcli_put_end(s->master, ops, s->client_id, key, 0);
  LOG_WARN("%s key=%s: writing a replica failed (%s); revoking", ops->name, key, mooncake_store_err_name(rc));
  mcli_put_end(s->master, ops, s->client_id, key, 1);
  return rc;
}

/* A put tries one round trip through a write extent first (fastput.c; it declines upserts and
 * anything it cannot do exactly like put_slow). */
static int put_object(struct mc_store *s, const struct mc_write_ops *ops, const char *key, const void *src, uint64_t len,
                      const struct mc_put_config *cfg) {
  if (ops == &mc_put_ops && !mc_fastput_put(s, key, src, len, cfg)) return 0;
  return put_slow(s, ops, key, src, len, cfg);
}

int mc_put_copy(struct mc_store *s, const struct mc_write_ops *ops, const char *key, const void *value, size_t size,
                const struct mc_put_config *cfg) {
  if (!s->stage || size > s->stage_size) {
    LOG_WARN("%s key=%s: %zu bytes do not fit the staging buffer (local_buffer_size=%llu); use %s_from", ops->name,
             key, size, (unsigned long long)s->stage_size, ops->name);
    return MC_INVALID_PARAMS;
  }
  /* the extent path copies straight from the caller's value (a same-segment extent is one memcpy) */
  if (ops == &mc_put_ops && !mc_fastput_put(s, key, value, size, cfg)) return 0;
  char *p = mc_stage_alloc(s->stage, size, STAGE_WAIT_MS);
  if (!p) return MC_INVALID_PARAMS;
  memcpy(p, value, size);
  int rc = put_slow(s, ops, key, p, size, cfg);
  mc_stage_release(s->stage, p, size);
  return rc;
}

int mc_put_from(struct mc_store *s, const struct mc_write_ops *ops, const char *key, void *buf, size_t size,
                const struct mc_put_config *cfg) {
  return put_object(s, ops, key, buf, size, cfg);
}

/* ------------------------------------------------------------------ batches */

/* first[i] = index of the first occurrence of keys[i] (i itself when it is the first). */
static void first_occurrences(const char *const *keys, size_t n, size_t *first) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  size_t *tab = mc_malloc(cap * sizeof(size_t));
  memset(tab, 0xff, cap * sizeof(size_t));
  for (size_t i = 0; i < n; i++) {
    size_t h = (size_t)mc_str_hash(keys[i]) & (cap - 1);
    while (tab[h] != SIZE_MAX && strcmp(keys[tab[h]], keys[i])) h = (h + 1) & (cap - 1);
    if (tab[h] == SIZE_MAX) tab[h] = i;
    first[i] = tab[h];
  }
  mc_free(tab);
}

/* One chunk of distinct, valid keys: results[i] for each. */
static void put_chunk(struct mc_store *s, const struct mc_write_ops *ops, const char *const *keys, void *const *bufs,
                      const uint64_t *lens, size_t n, const struct mc_put_config *cfg, int *results) {
  struct mcli_reps *r = mc_calloc(n, sizeof(*r));
  int rc = mcli_batch_put_start(s->master, ops, s->client_id, keys, lens, n, cfg, r);
  if (rc) {
    for (size_t i = 0; i < n; i++) results[i] = rc;
    mc_free(r);
    return;
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    if (!r[i].status) total += r[i].n;
  struct mc_xfer *x = mc_calloc(total ? total : 1, sizeof(*x));
  size_t *at = mc_calloc(n, sizeof(size_t)), m = 0;
  for (size_t i = 0; i < n; i++) {
    at[i] = m;
    if (!r[i].status) m += replica_writes(&r[i], bufs[i], lens[i], x + m);
  }
  run_writes(s, x, m); /* every replica of every key in one transfer batch */
  /* PutEnd for keys fully written, PutRevoke for the others */
  const char **end = mc_calloc(n, sizeof(char *)), **rev = mc_calloc(n, sizeof(char *));
  size_t *endi = mc_calloc(n, sizeof(size_t)), *revi = mc_calloc(n, sizeof(size_t)), ne = 0, nr = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i].status) {
      results[i] = r[i].status == MC_OBJECT_ALREADY_EXISTS ? 0 : r[i].status;
      if (results[i]) log_put_start_failure(ops, keys[i], results[i]);
      continue;
    }
    results[i] = writes_result(x + at[i], r[i].n, &r[i], lens[i]);
    if (results[i]) rev[nr] = keys[i], revi[nr++] = i;
    else end[ne] = keys[i], endi[ne++] = i;
  }
  int *er = mc_calloc(n, sizeof(int));
  if (ne && (rc = mcli_batch_put_end(s->master, ops, s->client_id, end, ne, 0, er)))
    for (size_t j = 0; j < ne; j++) er[j] = rc;
  for (size_t j = 0; j < ne; j++) results[endi[j]] = er[j];
  if (nr) {
    LOG_WARN("batch %s: %zu keys failed to write a replica; revoking them", ops->name, nr);
    mcli_batch_put_end(s->master, ops, s->client_id, rev, nr, 1, er);
  }
  mc_free(er);
  mc_free(revi);
  mc_free(endi);
  mc_free(rev);
  mc_free(end);
  mc_free(at);
  mc_free(x);
  mcli_reps_free(r, n);
  mc_free(r);
}

void mc_put_batch(struct mc_store *s, const struct mc_write_ops *ops, const char *const *keys, void *const *bufs,
                  const size_t *sizes, size_t n, const struct mc_put_config *cfg, int *results) {
  size_t *first = mc_calloc(n ? n : 1, sizeof(size_t)), *pos = mc_calloc(n ? n : 1, sizeof(size_t));
  const char **k = mc_calloc(n ? n : 1, sizeof(char *));
  void **b = mc_calloc(n ? n : 1, sizeof(void *));
  uint64_t *l = mc_calloc(n ? n : 1, sizeof(uint64_t));
  int *r = mc_calloc(n ? n : 1, sizeof(int));
  first_occurrences(keys, n, first);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (first[i] != i) continue;
    if (!*keys[i] || !sizes[i]) {
      results[i] = MC_INVALID_PARAMS;
      continue;
    }
    k[m] = keys[i], b[m] = bufs[i], l[m] = sizes[i], pos[m++] = i;
  }
  if (ops == &mc_put_ops && s->fastput && m) { /* write extents first (fastput.c); the rest below */
    uint8_t *done = mc_calloc(m, 1);
    mc_fastput_batch(s, k, b, l, m, cfg, done);
    size_t w = 0;
    for (size_t i = 0; i < m; i++) {
      if (done[i]) {
        results[pos[i]] = 0;
        continue;
      }
      k[w] = k[i], b[w] = b[i], l[w] = l[i], pos[w++] = pos[i];
    }
    m = w;
    mc_free(done);
  }
  for (size_t off = 0; off < m; off += PUT_CHUNK)
    put_chunk(s, ops, k + off, b + off, l + off, MC_MIN(PUT_CHUNK, m - off), cfg, r + off);
  for (size_t i = 0; i < m; i++) results[pos[i]] = r[i];
  for (size_t i = 0; i < n; i++) results[i] = results[first[i]];
  mc_free(r);
  mc_free(l);
  mc_free(b);
  mc_free(k);
  mc_free(pos);
  mc_free(first);
}

void mc_put_batch_copy(struct mc_store *s, const struct mc_write_ops *ops, const char *const *keys,
                       const void *const *vals, const size_t *sizes, size_t n, const struct mc_put_config *cfg,
                       int *results) {
  const char **k = mc_calloc(n ? n : 1, sizeof(char *));
  char **p = mc_calloc(n ? n : 1, sizeof(char *));
  size_t *z = mc_calloc(n ? n : 1, sizeof(size_t)), *pos = mc_calloc(n ? n : 1, sizeof(size_t));
  int *r = mc_calloc(n ? n : 1, sizeof(int));
  for (size_t i = 0; i < n;) {
    /* one wave: as many values as the staging buffer holds now (blocking only for the first) */
    size_t m = 0;
    for (; i < n; i++) {
      if (!*keys[i] || !sizes[i] || !s->stage || sizes[i] > s->stage_size) {
        results[i] = MC_INVALID_PARAMS;
        continue;
      }
      char *q = mc_stage_alloc(s->stage, sizes[i], m ? 0 : STAGE_WAIT_MS);
      if (!q && !m) {
        results[i] = MC_INVALID_PARAMS;
        continue;
      }
      if (!q) break;
      memcpy(q, vals[i], sizes[i]);
      k[m] = keys[i], p[m] = q, z[m] = sizes[i], pos[m++] = i;
    }
    if (!m) continue;
    mc_put_batch(s, ops, k, (void *const *)p, z, m, cfg, r);
    for (size_t j = 0; j < m; j++) {
      results[pos[j]] = r[j];
      mc_stage_release(s->stage, p[j], z[j]);
    }
  }
  mc_free(r);
  mc_free(pos);
  mc_free(z);
  mc_free(p);
  mc_free(k);
}
