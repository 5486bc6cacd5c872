/* Every write of the client, from its entry point to the wire: the put contract (docs/master.md, "Put"),
 * shared by upsert ("Upsert") through struct mc_write_ops, and the one decision each write makes
 * (docs/store-client.md, "Write extents"):
 *   - through a write extent, one round trip: carve a range (write_extents.c), write it, COMMIT_PUT (batches:
 *     one BATCH_COMMIT_PUT per extent). Puts only (not upserts), one replica, values of at most
 *     EXTENT_MAX_VALUE, batches whose eligible values total at most EXTENT_BATCH_BYTES;
 *   - otherwise, and for every write the extent path declines or fails: PutStart (OBJECT_ALREADY_EXISTS
 *     is success and the stored value is kept) -> write every allocated replica -> PutEnd if all writes
 *     landed, else PutRevoke and the first error.
 * Either way the caller sees the results of the PutStart/PutEnd path. Batches make one master call per
 * phase and one transfer batch for all replicas; a key repeated in a batch is written once (its first
 * occurrence, docs/store-client.md, "Put"). Master RPCs are master_rpc.c's, transfers transfer.c's. */
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define STAGE_WAIT_MS 10000
#define PUT_CHUNK 4096                     /* keys per master call in batch puts */
#define EXTENT_MAX_VALUE (1ull << 20)      /* the largest value a write extent takes */
#define EXTENT_BATCH_BYTES (4ull << 20)    /* eligible bytes of a batch that goes through extents, at most */

/* ------------------------------------------------------------------ config */

static void add_preferred(struct mc_put_config *out, const mc_replicate_config_t *in) {
  for (size_t i = 0; in && in->preferred_segments && i < in->preferred_segments_count; i++) {
    if (!in->preferred_segments[i]) continue;
    if (out->n_preferred == MC_MAX_PREFERRED) {
      LOG_WARN("put: only the first %d preferred segments are used", MC_MAX_PREFERRED);
      break;
    }
    out->preferred[out->n_preferred++] = mc_strdup(in->preferred_segments[i]);
  }
}

/* The master-protocol config of a write (NULL = defaults: one replica, no pins, no preference); -600 for
 * replica_num 0 and invalid pin combinations. Free with mc_put_config_free, also after an error. */
static int put_config(struct mc_store *s, const mc_replicate_config_t *in, struct mc_put_config *out) {
  memset(out, 0, sizeof(*out));
  if (in && (in->soft_pin_action < MC_SOFT_PIN_KEEP || in->soft_pin_action > MC_SOFT_PIN_CLEAR))
    return MC_INVALID_PARAMS;
  if (in && in->soft_pin_ttl_ms >= 0 && in->soft_pin_action != MC_SOFT_PIN_SET) {
    LOG_WARN("put: soft_pin_ttl_ms is only valid with the soft pin set (SoftPinAction.ENABLE)");
    return MC_INVALID_PARAMS;
  }
  size_t n = in ? in->replica_num : 1;
  if (n == 0 || n > UINT32_MAX) return MC_INVALID_PARAMS;
  out->replica_num = (uint32_t)n;
  /* the protocol carries enum mc_soft_pin itself (proto/proto.h) */
  out->soft_pin_action = in ? (uint8_t)in->soft_pin_action : MC_SOFT_PIN_KEEP;
  out->soft_pin_ttl_ms = in && in->soft_pin_ttl_ms >= 0 ? in->soft_pin_ttl_ms : -1;
  out->with_hard_pin = in && in->with_hard_pin ? 1 : 0;
  add_preferred(out, in);
  out->writer_host_id = mc_strdup(mc_host_id());
  out->writer_zone = mc_strdup(s->self.zone);
  return 0;
}

static const struct mc_write_ops *write_ops(int flags) {
  return (flags & MC_WRITE_UPSERT) ? &mc_upsert_ops : &mc_put_ops;
}

/* A value a write extent may take (besides the config and the extent's own checks). */
static int extent_value(const char *key, uint64_t len) { return len && len <= EXTENT_MAX_VALUE && *key; }

/* Whether writes of ops with cfg may go through write extents at all. */
static int extents_for(const struct mc_store *s, const struct mc_write_ops *ops, const struct mc_put_config *cfg) {
  /* a grouped key goes through PutStart: the master places it with its group (docs/master.md, "Key groups") */
  return ops == &mc_put_ops && s->fastput && cfg->replica_num == 1 && !cfg->group;
}

/* ------------------------------------------------------------------ PutStart/PutEnd */

static void log_put_start_failure(const struct mc_write_ops *ops, const char *key, int rc) {
  if (rc == MC_NO_AVAILABLE_HANDLE)
    LOG_WARN("Failed to start %s operation for key=%s due to insufficient space. Consider lowering "
             "eviction_high_watermark_ratio or mounting more segments (or, right after a master restart or "
             "failover, wait: remounted segments take new objects after 1.5 s).", ops->name, key);
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
  int rc = mcli_put_start(s->master.cli, ops, s->self.client_id, key, len, cfg, &r);
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
  if (!rc) return mcli_put_end(s->master.cli, ops, s->self.client_id, key, 0);
  LOG_WARN("%s key=%s: writing a replica failed (%s); revoking", ops->name, key, mooncake_store_err_name(rc));
  mcli_put_end(s->master.cli, ops, s->self.client_id, key, 1);
  return rc;
}

/* ------------------------------------------------------------------ write extents */

/* Through a write extent: carve, write, COMMIT_PUT. 0 when done (stored, or the key existed and keeps its
 * value, docs/store-client.md, "Put"), 1 when the put must take PutStart/PutEnd instead. */
static int put_extent(struct mc_store *s, const char *key, const void *src, uint64_t len,
                      const struct mc_put_config *cfg) {
  struct mc_carve c;
  if (mc_fastput_carve(s, len, cfg, &c)) return 1;
  struct mc_xfer x = {OPCODE_WRITE, (void *)src, c.endpoint, c.remote, len};
  mc_xfer_run(s, &x, 1, 0); /* cached descriptors, no refresh-and-retry (write_extents.c, "Safety") */
  int rc = x.rc, done = 0;
  uint64_t sent = mc_now_ns();
  if (!rc) {
    rc = mcli_commit_put(s->master.cli, s->self.client_id, c.extent_id, key, c.off, len, cfg);
    done = !rc || rc == MC_OBJECT_ALREADY_EXISTS;
  } else {
    LOG_WARN("put key=%s: writing into write extent %llu failed (%s); retiring it", key,
             (unsigned long long)c.extent_id, mooncake_store_err_name(rc));
  }
  mc_fastput_settle(s, &c, rc, sent);
  if (!done)
    LOG_DEBUG("put key=%s: extent path gave %s; redoing it with PutStart/PutEnd", key, mooncake_store_err_name(rc));
  return !done;
}

/* The carved keys of a batch whose bytes landed, grouped by extent for one BATCH_COMMIT_PUT each. */
struct commit_set {
  const char **keys;
  uint64_t *offs, *lens;
  size_t *at; /* index of each in the batch */
  int *st;
};

/* Commits the group of x[j]'s extent (x[q] written for batch key idx[q]); a key whose write failed
 * retires the extent as a single put's does and takes the slow path. done[i] = 1 for the keys finished. */
static void commit_group(struct mc_store *s, const char *const *keys, const uint64_t *lens, const struct mc_carve *c,
                         const size_t *idx, const struct mc_xfer *x, size_t k, size_t j, uint8_t *handled,
                         struct commit_set *cs, const struct mc_put_config *cfg, uint8_t *done) {
  const struct fp_ext *e = c[idx[j]].ext;
  uint64_t eid = c[idx[j]].extent_id; /* the extent may be gone once the group's last reference is settled */
  size_t n = 0, failed = 0, first = 0;
  for (size_t q = j; q < k; q++) {
    size_t i = idx[q];
    if (handled[q] || c[i].ext != e) continue;
    handled[q] = 1;
    if (x[q].rc) {
      if (!failed++) first = q;
      mc_fastput_settle(s, &c[i], x[q].rc, 0);
      continue;
    }
    cs->keys[n] = keys[i], cs->offs[n] = c[i].off, cs->lens[n] = lens[i], cs->at[n++] = i;
  }
  if (failed)
    LOG_WARN("batch put: writing %zu keys into write extent %llu failed (key=%s: %s); retiring it", failed,
             (unsigned long long)eid, keys[idx[first]], mooncake_store_err_name(x[first].rc));
  if (!n) return;
  uint64_t sent = mc_now_ns();
  mcli_batch_commit_put(s->master.cli, s->self.client_id, eid, cs->keys, cs->offs, cs->lens, n, cfg, cs->st);
  if (cs->st[0] == MC_NOT_SUPPORTED) mc_fastput_no_batch_commit(s); /* these keys take the slow path */
  for (size_t q = 0; q < n; q++) {
    done[cs->at[q]] = !cs->st[q] || cs->st[q] == MC_OBJECT_ALREADY_EXISTS; /* an existing key keeps its value */
    if (!done[cs->at[q]])
      LOG_DEBUG("put key=%s: extent path gave %s; redoing it with PutStart/PutEnd", cs->keys[q],
                mooncake_store_err_name(cs->st[q]));
    mc_fastput_settle(s, &c[cs->at[q]], cs->st[q], sent);
  }
}

/* Writes the carved keys in one transfer batch (cached descriptors, as a single put) and commits them. */
static void write_carved(struct mc_store *s, const char *const *keys, void *const *bufs, const uint64_t *lens,
                         const struct mc_carve *c, size_t n, const struct mc_put_config *cfg, uint8_t *done) {
  struct mc_xfer *x = mc_calloc(n, sizeof(*x));
  size_t *idx = mc_calloc(n, sizeof(*idx)), k = 0;
  for (size_t i = 0; i < n; i++)
    if (c[i].ext) x[k] = (struct mc_xfer){OPCODE_WRITE, bufs[i], c[i].endpoint, c[i].remote, lens[i]}, idx[k++] = i;
  mc_xfer_run(s, x, k, 0);
  struct commit_set cs = {mc_calloc(k, sizeof(char *)), mc_calloc(k, sizeof(uint64_t)), mc_calloc(k, sizeof(uint64_t)),
                          mc_calloc(k, sizeof(size_t)), mc_calloc(k, sizeof(int))};
  uint8_t *handled = mc_calloc(k, 1);
  for (size_t j = 0; j < k; j++)
    if (!handled[j]) commit_group(s, keys, lens, c, idx, x, k, j, handled, &cs, cfg, done);
  mc_free(handled);
  mc_free(cs.st);
  mc_free(cs.at);
  mc_free(cs.lens);
  mc_free(cs.offs);
  mc_free(cs.keys);
  mc_free(idx);
  mc_free(x);
}

/* The eligible keys of a batch (distinct) through write extents, carved in order under one lock so that
 * every write starts soon after the deadline check (write_extents.c, "Batches"); done[i] = 1 for each key
 * finished (its result is 0). Nothing when the eligible values total more than EXTENT_BATCH_BYTES. */
static void put_batch_extents(struct mc_store *s, const char *const *keys, void *const *bufs, const uint64_t *lens,
                              size_t n, const struct mc_put_config *cfg, uint8_t *done) {
  uint64_t *want = mc_calloc(n, sizeof(*want)), total = 0;
  for (size_t i = 0; i < n; i++)
    if (extent_value(keys[i], lens[i]))
      want[i] = lens[i], total += (lens[i] + MC_FASTPUT_ALIGN - 1) & ~(MC_FASTPUT_ALIGN - 1);
  struct mc_carve *c = mc_calloc(n, sizeof(*c));
  if (total <= EXTENT_BATCH_BYTES && mc_fastput_carve_batch(s, want, n, cfg, c))
    write_carved(s, keys, bufs, lens, c, n, cfg, done);
  mc_free(c);
  mc_free(want);
}

/* ------------------------------------------------------------------ one write */

/* The decision of one write: through a write extent when it can take it, else (and when it declines or
 * fails) PutStart/PutEnd; the copying put stages its value only for the latter. */
static int write_one(struct mc_store *s, const struct mc_write_ops *ops, int copy, const char *key, const void *value,
                     size_t size, const struct mc_put_config *cfg) {
  if (copy && (!s->staging.pool || size > s->staging.size)) {
    LOG_WARN("%s key=%s: %zu bytes do not fit the staging buffer (local_buffer_size=%llu); use %s_from", ops->name,
             key, size, (unsigned long long)s->staging.size, ops->name);
    return MC_INVALID_PARAMS;
  }
  /* the extent path writes straight from the caller's value (a same-segment extent is one memcpy) */
  if (extents_for(s, ops, cfg) && extent_value(key, size) && !put_extent(s, key, value, size, cfg)) return 0;
  if (!copy) return put_slow(s, ops, key, value, size, cfg);
  char *p = mc_stage_alloc(s->staging.pool, size, STAGE_WAIT_MS);
  if (!p) return MC_INVALID_PARAMS;
  memcpy(p, value, size);
  int rc = put_slow(s, ops, key, p, size, cfg);
  mc_stage_release(s->staging.pool, p, size);
  return rc;
}

int mc_write(struct mc_store *s, int flags, const char *key, const void *value, size_t size,
             const mc_replicate_config_t *config) {
  int copy = flags & MC_WRITE_COPY;
  struct mc_put_config cfg = {0};
  int rc = !*key ? MC_INVALID_PARAMS : put_config(s, config, &cfg);
  if (!rc && !size) rc = copy ? MC_INVALID_PARAMS : 0; /* put_from of nothing stores nothing */
  else if (!rc) rc = write_one(s, write_ops(flags), copy, key, value, size, &cfg);
  mc_put_config_free(&cfg);
  return rc;
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
  int rc = mcli_batch_put_start(s->master.cli, ops, s->self.client_id, keys, lens, n, cfg, r);
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
  if (ne && (rc = mcli_batch_put_end(s->master.cli, ops, s->self.client_id, end, ne, 0, er)))
    for (size_t j = 0; j < ne; j++) er[j] = rc;
  for (size_t j = 0; j < ne; j++) results[endi[j]] = er[j];
  if (nr) {
    LOG_WARN("batch %s: %zu keys failed to write a replica; revoking them", ops->name, nr);
    mcli_batch_put_end(s->master.cli, ops, s->self.client_id, rev, nr, 1, er);
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

/* The m distinct valid keys k/b/l of a batch (at positions pos) through write extents: the result of each
 * key finished is 0; the others are moved to the front. Returns how many are left. */
static size_t extents_first(struct mc_store *s, const char **k, void **b, uint64_t *l, size_t *pos, size_t m,
                            const struct mc_put_config *cfg, int *results) {
  uint8_t *done = mc_calloc(m, 1);
  put_batch_extents(s, k, b, l, m, cfg, done);
  size_t w = 0;
  for (size_t i = 0; i < m; i++) {
    if (done[i]) {
      results[pos[i]] = 0;
      continue;
    }
    k[w] = k[i], b[w] = b[i], l[w] = l[i], pos[w++] = pos[i];
  }
  mc_free(done);
  return w;
}

/* A zero-copy batch: distinct valid keys through write extents where they can, the rest in chunks of
 * PUT_CHUNK through PutStart/PutEnd; a repeated key gets its first occurrence's result. */
static void put_batch(struct mc_store *s, const struct mc_write_ops *ops, const char *const *keys, void *const *bufs,
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
  if (extents_for(s, ops, cfg) && m) m = extents_first(s, k, b, l, pos, m, cfg, results); /* the rest below */
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

/* A copying batch: as many values staged at once as fit, in waves, each wave a zero-copy batch. */
static void put_batch_copy(struct mc_store *s, const struct mc_write_ops *ops, const char *const *keys,
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
      if (!*keys[i] || !sizes[i] || !s->staging.pool || sizes[i] > s->staging.size) {
        results[i] = MC_INVALID_PARAMS;
        continue;
      }
      char *q = mc_stage_alloc(s->staging.pool, sizes[i], m ? 0 : STAGE_WAIT_MS);
      if (!q && !m) {
        results[i] = MC_INVALID_PARAMS;
        continue;
      }
      if (!q) break;
      memcpy(q, vals[i], sizes[i]);
      k[m] = keys[i], p[m] = q, z[m] = sizes[i], pos[m++] = i;
    }
    if (!m) continue;
    put_batch(s, ops, k, (void *const *)p, z, m, cfg, r);
    for (size_t j = 0; j < m; j++) {
      results[pos[j]] = r[j];
      mc_stage_release(s->staging.pool, p[j], z[j]);
    }
  }
  mc_free(r);
  mc_free(pos);
  mc_free(z);
  mc_free(p);
  mc_free(k);
}

/* The keys of one group: one sub-batch (the master's config carries one group per request). */
static void write_batch_group(struct mc_store *s, int flags, const char *const *keys, const void *const *values,
                              const size_t *sizes, size_t n, const mc_replicate_config_t *config, const char *group,
                              int *results) {
  struct mc_put_config cfg;
  int rc = mc_write_config(s, config, group, &cfg);
  if (rc) mc_fill_int(results, n, rc);
  else if (flags & MC_WRITE_COPY) put_batch_copy(s, write_ops(flags), keys, values, sizes, n, &cfg, results);
  else put_batch(s, write_ops(flags), keys, (void *const *)values, sizes, n, &cfg, results);
  mc_put_config_free(&cfg);
}

struct grouped {
  const char *g;
  size_t i;
};

static int by_group(const void *a, const void *b) {
  const struct grouped *x = a, *y = b;
  int c = strcmp(x->g, y->g);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

size_t *mc_group_order(const char *const *groups, size_t n) {
  struct grouped *o = mc_calloc(n ? n : 1, sizeof(*o));
  for (size_t i = 0; i < n; i++) o[i] = (struct grouped){groups && groups[i] ? groups[i] : "", i};
  qsort(o, n, sizeof(*o), by_group);
  size_t *order = mc_calloc(n ? n : 1, sizeof(*order));
  for (size_t i = 0; i < n; i++) order[i] = o[i].i;
  mc_free(o);
  return order;
}

const char *mc_group_of(const char *const *groups, size_t i) { return groups && groups[i] ? groups[i] : ""; }

int mc_write_config(struct mc_store *s, const mc_replicate_config_t *in, const char *group, struct mc_put_config *out) {
  int rc = put_config(s, in, out);
  if (!rc && group && *group) out->group = mc_strdup(group);
  return rc;
}

static void write_batch_flat(struct mc_store *s, int flags, const char *const *keys, const void *const *values,
                             const size_t *sizes, size_t n, const mc_replicate_config_t *config,
                             const char *const *groups, int *results) {
  if (!groups || !n) {
    write_batch_group(s, flags, keys, values, sizes, n, config, NULL, results);
    return;
  }
  /* keys ordered by group (request order within one), each group one sub-batch */
  size_t *o = mc_group_order(groups, n);
  const char **k = mc_calloc(n, sizeof(*k));
  const void **v = mc_calloc(n, sizeof(*v));
  size_t *z = mc_calloc(n, sizeof(*z));
  int *r = mc_calloc(n, sizeof(*r));
  for (size_t a = 0, b; a < n; a = b) {
    const char *g = mc_group_of(groups, o[a]);
    for (b = a; b < n && !strcmp(mc_group_of(groups, o[b]), g); b++)
      k[b - a] = keys[o[b]], v[b - a] = values[o[b]], z[b - a] = sizes[o[b]];
    write_batch_group(s, flags, k, v, z, b - a, config, g, r);
    for (size_t j = a; j < b; j++) results[o[j]] = r[j - a];
  }
  mc_free(r);
  mc_free(z);
  mc_free(v);
  mc_free(k);
  mc_free(o);
}

/* Multi-buffer keys: each key's buffers gathered into one area (staging.c), then written zero-copy. */
static void write_batch_multi(struct mc_store *s, int flags, const char *const *keys, const void *const *bufs,
                              const size_t *sizes, const size_t *nbufs, size_t count,
                              const mc_replicate_config_t *config, const char *const *group_ids, int *results) {
  struct mc_multi m;
  mc_multi_open(s, &m, bufs, sizes, nbufs, count);
  const char **k = mc_calloc(count, sizeof(char *)), **g = group_ids ? mc_calloc(count, sizeof(char *)) : NULL;
  size_t *pos = mc_calloc(count, sizeof(size_t)), n = 0;
  for (size_t i = 0; i < count; i++) {
    if (m.a[i].kind < 0) { /* total 0, or no memory to gather into */
      results[i] = MC_INVALID_PARAMS;
      continue;
    }
    if (m.a[i].kind)
      mc_area_copy(&m.a[i], (void *const *)bufs + m.first[i], sizes + m.first[i], nbufs[i], m.a[i].len, 1);
    if (g) g[n] = group_ids[i];
    k[n] = keys[i], m.p[n] = m.p[i], m.len[n] = m.len[i], pos[n++] = i;
  }
  int *r = mc_calloc(n ? n : 1, sizeof(int));
  write_batch_flat(s, flags & MC_WRITE_UPSERT, k, (const void *const *)m.p, m.len, n, config, g, r);
  for (size_t j = 0; j < n; j++) results[pos[j]] = r[j];
  mc_free(r);
  mc_free(pos);
  mc_free(g);
  mc_free(k);
  mc_multi_close(s, &m, count);
}

void mc_write_batch(struct mc_store *s, int flags, const char *const *keys, const void *const *bufs,
                    const size_t *sizes, const size_t *nbufs, size_t n, const mc_replicate_config_t *config,
                    const char *const *groups, int *results) {
  if (nbufs) write_batch_multi(s, flags, keys, bufs, sizes, nbufs, n, config, groups, results);
  else write_batch_flat(s, flags, keys, bufs, sizes, n, config, groups, results);
}
