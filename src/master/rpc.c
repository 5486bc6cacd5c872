/* The master's RPC dispatcher: decodes each request of proto.h completely (total, bounds-checked
 * readers; any decode error -> INVALID_PARAMS before anything runs), calls the service, encodes the
 * reply, and counts what the metrics need (per opcode, per batch item, per key looked up: docs/admin.md, "Metrics").
 * Knows the wire layout, not the locking. Key patterns are read here and compiled by key_pattern.c; a key
 * whose match hits a limit fails the whole request (INVALID_PARAMS). Also the write extents' handlers
 * (write_extents.h) and the witness block of replies (docs/ha.md, "Witnesses"). */
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "master_core/holder_feed.h"
#include "master_core/key_pattern.h"
#include "master/master_int.h"
#include "master_core/metrics.h"
#include "mooncake/store_errors.h"
#include "net/mrpc.h"

#define SEGMENT_MIN_BYTES 56 /* uuid + 6 empty strings + base + size */

struct key {
  const uint8_t *p;
  uint32_t n;
};

typedef int (*op_fn)(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w);

static size_t slot_i32(struct mc_wbuf *w) {
  size_t at = w->len;
  mc_w_i32(w, 0);
  return at;
}

/* Both helpers ignore a slot past the end: a reply that outgrew its bound (w->err) lost it. */
static void patch_i32(struct mc_wbuf *w, size_t at, int32_t v) {
  if (at + 4 > w->len) return;
  mc_le_put32(w->p + at, (uint32_t)v);
}

static uint32_t read_u32_at(const struct mc_wbuf *w, size_t at) {
  if (at + 4 > w->len) return 0;
  return mc_le_get32(w->p + at);
}

/* A lookup (exist or replica list) found a readable object: status 0 hits; "absent" and "not readable
 * yet" miss; other errors (malformed input) are neither. */
static void count_lookup(int st, uint64_t *hits, uint64_t *misses) {
  if (!st) (*hits)++;
  else if (st == MC_OBJECT_NOT_FOUND || st == MC_REPLICA_IS_NOT_READY) (*misses)++;
}

/* After a put/upsert start of len bytes whose reply (list<replica>) begins at `at`. */
static void count_start(struct mc_master *m, int st, const struct mc_wbuf *w, size_t at, uint64_t len,
                        const struct mc_put_config *pc) {
  if (st) mc_metrics_put_failed(m->ms, st);
  else mc_metrics_put_started(m->ms, len, read_u32_at(w, at), pc->replica_num);
}

const uint8_t *mc_req_key(struct mc_rbuf_rd *r, uint32_t *n) {
  const uint8_t *p = mc_r_blob(r, n);
  struct mc_req *q = mc_req_of(r);
  if (!r->err && q->nslen && (*n < q->nslen || memcmp(p, q->ns, q->nslen))) {
    LOG_WARN_LIMITED("tenant %s: a request names a key outside its namespace; answered INVALID_PARAMS", q->tenant);
    r->err = 1;
  }
  return p;
}

static struct key get_key(struct mc_rbuf_rd *r) {
  struct key k;
  k.p = mc_req_key(r, &k.n);
  return k;
}

/* A tenant's request is about its own segments and placement (docs/security.md, "Tenants"). */
static const char *tenant_of(struct mc_rbuf_rd *r) { return mc_req_of(r)->tenant; }

/* Arrays sized by a request's counts use the non-aborting allocator: a huge batch fails, not the master.
 * On failure the reader is marked bad (the request is answered INVALID_PARAMS) and *n is 0. */
static void *request_array(struct mc_rbuf_rd *r, uint32_t *n, size_t elem) {
  void *p = mc_try_malloc(elem * (*n ? *n : 1));
  if (!p) {
    r->err = 1;
    *n = 0;
  }
  return p;
}

/* list<str key> as views into the request (caller frees the array). */
static struct key *get_keys(struct mc_rbuf_rd *r, uint32_t *n) {
  *n = mc_r_count(r, 4);
  struct key *k = request_array(r, n, sizeof(*k));
  for (uint32_t i = 0; i < *n; i++) k[i] = get_key(r);
  return k;
}

/* ------------------------------------------------------------------ segments and clients */

static int op_service_ready(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  mc_w_str(w, MC_STORE_VERSION);
  mc_w_u64(w, m->view_version);
  return 0;
}

static int op_ping(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid id = mc_get_uuid(r);
  uint8_t status;
  if (r->err) return MC_INVALID_PARAMS;
  int rc = mc_master_ping(m, id, &status);
  mc_w_u64(w, m->view_version);
  mc_w_u8(w, status);
  return rc;
}

static int op_mount(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_segment_rec s;
  mc_get_segment(r, &s);
  s.tenant = tenant_of(r);
  struct mc_uuid client = mc_get_uuid(r);
  int rc = r->err ? MC_INVALID_PARAMS : mc_master_mount(m, &s, client);
  mc_segment_rec_free(&s);
  return rc;
}

static int op_remount(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  uint32_t n = mc_r_count(r, SEGMENT_MIN_BYTES);
  struct mc_segment_rec *s = request_array(r, &n, sizeof(*s));
  for (uint32_t i = 0; i < n; i++) {
    mc_get_segment(r, &s[i]);
    s[i].tenant = tenant_of(r);
  }
  struct mc_uuid client = mc_get_uuid(r);
  int rc = r->err ? MC_INVALID_PARAMS : mc_master_remount(m, s, n, client);
  for (uint32_t i = 0; i < n; i++) mc_segment_rec_free(&s[i]);
  mc_free(s);
  return rc;
}

static int op_unmount(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid seg = mc_get_uuid(r), client = mc_get_uuid(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_unmount(m, seg, client, tenant_of(r));
}

static int op_graceful_unmount(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid seg = mc_get_uuid(r), client = mc_get_uuid(r);
  uint64_t grace = mc_r_u64(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_graceful_unmount(m, seg, client, grace, tenant_of(r));
}

static int op_query_segments(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  mc_master_query_segments(m, tenant_of(r), w);
  return 0;
}

/* ------------------------------------------------------------------ puts */

typedef int (*start_fn)(struct mc_master *, struct mc_uuid, const void *, uint32_t, uint64_t,
                        const struct mc_put_config *, struct mc_wbuf *);

static int single_start(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, start_fn fn) {
  struct mc_uuid client = mc_get_uuid(r);
  struct key k = get_key(r);
  uint64_t len = mc_r_u64(r);
  struct mc_put_config pc = {0};
  mc_get_config(r, &pc);
  pc.tenant = tenant_of(r);
  size_t at = w->len;
  int rc = r->err ? MC_INVALID_PARAMS : fn(m, client, k.p, k.n, len, &pc, w);
  if (!r->err) count_start(m, rc, w, at, len, &pc);
  mc_put_config_free(&pc);
  return rc;
}

static int op_put_start(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return single_start(m, r, w, mc_master_put_start);
}

static int op_upsert_start(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return single_start(m, r, w, mc_master_upsert_start);
}

typedef int (*end_fn)(struct mc_master *, struct mc_uuid, const void *, uint32_t, uint8_t, struct mc_wsink *);

static int single_end(struct mc_master *m, struct mc_rbuf_rd *r, end_fn fn, struct mc_wsink *ws) {
  struct mc_uuid client = mc_get_uuid(r);
  struct key k = get_key(r);
  uint8_t type = mc_r_u8(r);
  return r->err ? MC_INVALID_PARAMS : fn(m, client, k.p, k.n, type, ws);
}

/* PutRevoke in end_fn's shape: it frees PROCESSING replicas only, which queue no index record. */
static int put_revoke(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type,
                      struct mc_wsink *ws) {
  (void)ws;
  return mc_master_put_revoke(m, client, key, klen, type);
}

void mc_wsink_open(struct mc_wsink *s) {
  *s = (struct mc_wsink){0};
  s->out = &s->w;
}

void mc_wsink_open_in(struct mc_wsink *s, struct mc_wbuf *w) {
  *s = (struct mc_wsink){.out = w, .at = w->len};
  mc_w_u64(w, 0); /* view_version, durable_seq, count: mc_witness_reply */
  mc_w_u64(w, 0);
  mc_w_u32(w, 0);
}

/* What a witness record of a batch's key takes, about (master_core/holder_feed.h layout: 62 bytes and the key). */
#define WITNESS_GUESS 96u

size_t mc_batch_reply_start(struct mc_wbuf *w, uint32_t n) {
  size_t want = 4 * (size_t)n + 20 + (size_t)n * WITNESS_GUESS;
  if (!w->max || (w->len <= w->max && want <= w->max - w->len)) mc_w_reserve(w, want); /* one allocation */
  size_t at = w->len;
  for (uint32_t i = 0; i < n; i++) mc_w_i32(w, 0);
  return at;
}

void mc_witness_reply(struct mc_master *m, struct mc_wsink *s, int ok, struct mc_wbuf *w) {
  if (ok && s->unwitnessed)
    LOG_WARN_LIMITED("a reply witnesses %u index records and not %u more (at most %u): a master that dies within one "
                     "index batch may lose them", s->n, s->unwitnessed, MC_WSINK_MAX);
  if (s->out == w) { /* straight into the reply (mc_wsink_open_in) */
    if (!ok) {
      w->len = MC_MIN(w->len, s->at); /* (its callers always answer; kept whole all the same) */
      return;
    }
    mc_w_patch_u64(w, s->at, m->view_version);
    mc_w_patch_u64(w, s->at + 8, mc_hidx_durable_cached(m->hfeed));
    mc_w_patch_u32(w, s->at + 16, s->n);
    return;
  }
  if (ok) {
    mc_w_u64(w, m->view_version);
    mc_w_u64(w, mc_hidx_durable_cached(m->hfeed));
    mc_w_u32(w, s->n);
    mc_w_bytes_raw(w, s->w.p, s->w.len);
  }
  mc_w_free(&s->w);
}

/* An op function that passes a witness sink down to the core calls it makes. */
typedef int (*wop_fn)(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws);

/* fn's reply carries the witnesses of the index records it queued (docs/ha.md, "Witnesses"): a put's PUT
 * records, a removal's DROP records, so a master that dies before a holder has them loses neither. */
static int witnessed(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, wop_fn fn) {
  struct mc_wsink sink;
  mc_wsink_open(&sink);
  int rc = fn(m, r, w, &sink);
  mc_witness_reply(m, &sink, !rc, w);
  return rc;
}

static int put_end(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws) {
  (void)w;
  return single_end(m, r, mc_master_put_end, ws);
}

/* PUT_END / UPSERT_END: the reply carries the witnesses of the records the completion queued. */
static int op_put_end(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) { return witnessed(m, r, w, put_end); }

static int op_put_revoke(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return single_end(m, r, put_revoke, NULL);
}

static int batch_start(struct mc_master *m, uint16_t op, struct mc_rbuf_rd *r, struct mc_wbuf *w, start_fn fn) {
  struct mc_uuid client = mc_get_uuid(r);
  uint32_t n = mc_r_count(r, 12), n2 = n;
  struct key *k = request_array(r, &n, sizeof(*k));
  uint64_t *len = request_array(r, &n2, sizeof(*len));
  if (n2 != n) n = 0;
  for (uint32_t i = 0; i < n; i++) {
    k[i] = get_key(r);
    len[i] = mc_r_u64(r);
  }
  struct mc_put_config pc = {0};
  mc_get_config(r, &pc);
  pc.tenant = tenant_of(r);
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    uint32_t failed = 0;
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
      size_t at = slot_i32(w);
      int st = fn(m, client, k[i].p, k[i].n, len[i], &pc, w);
      if (st) mc_w_u32(w, 0);
      patch_i32(w, at, st);
      count_start(m, st, w, at + 4, len[i], &pc);
      failed += st != 0;
    }
    mc_metrics_batch(m->ms, op, n, failed);
  }
  mc_put_config_free(&pc);
  mc_free(k);
  mc_free(len);
  return rc;
}

static int op_batch_put_start(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_start(m, MC_OP_BATCH_PUT_START, r, w, mc_master_put_start);
}

static int op_batch_upsert_start(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_start(m, MC_OP_BATCH_UPSERT_START, r, w, mc_master_upsert_start);
}

/* The batch End/Revoke forms; an End's reply carries the witnesses after its statuses. */
static int batch_end(struct mc_master *m, uint16_t op, struct mc_rbuf_rd *r, struct mc_wbuf *w, end_fn fn) {
  struct mc_uuid client = mc_get_uuid(r);
  uint32_t n, failed = 0;
  struct key *k = get_keys(r, &n);
  uint8_t type = mc_r_u8(r);
  int rc = r->err ? MC_INVALID_PARAMS : 0, end = fn == mc_master_put_end;
  if (!rc) {
    struct mc_wsink sink = {0};
    mc_w_u32(w, n);
    size_t st_at = mc_batch_reply_start(w, end ? n : 0);
    if (end) mc_wsink_open_in(&sink, w);
    for (uint32_t i = 0; i < n; i++) {
      int st = fn(m, client, k[i].p, k[i].n, type, end ? &sink : NULL);
      if (end) mc_w_patch_u32(w, st_at + 4 * (size_t)i, (uint32_t)st);
      else mc_w_i32(w, st);
      failed += st != 0;
    }
    if (end) mc_witness_reply(m, &sink, 1, w);
    mc_metrics_batch(m->ms, op, n, failed);
  }
  mc_free(k);
  return rc;
}

static int op_batch_put_end(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_end(m, MC_OP_BATCH_PUT_END, r, w, mc_master_put_end);
}

static int op_batch_put_revoke(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_end(m, MC_OP_BATCH_PUT_REVOKE, r, w, put_revoke);
}

static int op_batch_upsert_end(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_end(m, MC_OP_BATCH_UPSERT_END, r, w, mc_master_put_end);
}

static int op_batch_upsert_revoke(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return batch_end(m, MC_OP_BATCH_UPSERT_REVOKE, r, w, put_revoke);
}

/* ------------------------------------------------------------------ reads */

static int op_get_replicas(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct key k = get_key(r);
  if (r->err) return MC_INVALID_PARAMS;
  mc_w_u64(w, mc_master_lease_ttl_ms(m));
  int rc = mc_master_get_replicas(m, k.p, k.n, w);
  uint64_t hits = 0, misses = 0;
  count_lookup(rc, &hits, &misses);
  mc_metrics_lookups(m->ms, hits, misses);
  return rc;
}

static int op_batch_get_replicas(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  uint32_t n;
  struct key *k = get_keys(r, &n);
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    uint64_t hits = 0, misses = 0;
    mc_w_u64(w, mc_master_lease_ttl_ms(m));
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
      size_t at = slot_i32(w);
      int st = mc_master_get_replicas(m, k[i].p, k[i].n, w);
      if (st) mc_w_u32(w, 0);
      patch_i32(w, at, st);
      count_lookup(st, &hits, &misses);
    }
    mc_metrics_lookups(m->ms, hits, misses);
    mc_metrics_batch(m->ms, MC_OP_BATCH_GET_REPLICA_LIST, n, n - (uint32_t)hits);
  }
  mc_free(k);
  return rc;
}

static int op_exist(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct key k = get_key(r);
  if (r->err) return MC_INVALID_PARAMS;
  int yes = mc_master_exist(m, k.p, k.n);
  mc_w_u8(w, (uint8_t)yes);
  mc_metrics_lookups(m->ms, yes, !yes);
  return 0;
}

static int op_batch_exist(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  uint32_t n;
  struct key *k = get_keys(r, &n);
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    uint32_t hits = 0;
    mc_w_reserve(w, 4 + 4 * (size_t)n);
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
      int yes = mc_master_exist(m, k[i].p, k[i].n);
      mc_w_i32(w, yes);
      hits += yes == 1;
    }
    mc_metrics_lookups(m->ms, hits, n - hits);
    mc_metrics_batch(m->ms, MC_OP_BATCH_EXIST_KEY, n, 0);
  }
  mc_free(k);
  return rc;
}

/* ------------------------------------------------------------------ key patterns */

/* Reads and compiles a key pattern. NULL (INVALID_PARAMS) when it does not decode or compile, is over a
 * limit, or uses back-references (mc_regex_compile). */
static struct mc_regex *compile(struct mc_rbuf_rd *r) {
  char *pattern = mc_r_str(r); /* at most MC_STR_MAX bytes, no NUL */
  struct mc_regex *re = r->err ? NULL : mc_regex_compile(pattern, strlen(pattern));
  mc_free(pattern);
  return re;
}

static int op_replicas_by_regex(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_regex *re = compile(r);
  if (!re) return MC_INVALID_PARAMS;
  struct mc_req *q = mc_req_of(r);
  int rc = mc_master_replicas_matching(m, re, q->nslen ? q->ns : NULL, w);
  mc_regex_free(re);
  return rc;
}

/* ------------------------------------------------------------------ removal */

static int op_remove_one(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws) {
  struct key k = get_key(r);
  uint8_t force = mc_r_u8(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_remove(m, k.p, k.n, force, ws);
}

static int op_batch_remove_list(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws) {
  uint32_t n;
  struct key *k = get_keys(r, &n);
  uint8_t force = mc_r_u8(r);
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    uint32_t failed = 0;
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
      int st = mc_master_remove(m, k[i].p, k[i].n, force, ws);
      mc_w_i32(w, st);
      failed += st != 0;
    }
    mc_metrics_batch(m->ms, MC_OP_BATCH_REMOVE, n, failed);
  }
  mc_free(k);
  return rc;
}

/* docs/master.md, "BatchReplicaClear": per key, the caller's own complete unleased objects; answers the cleared keys. */
static int op_batch_replica_clear(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint32_t n;
  struct key *k = get_keys(r, &n);
  struct key seg;
  seg.p = mc_r_blob(r, &seg.n); /* a segment name, not an object key */
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    uint32_t cleared = 0;
    size_t at = slot_i32(w);
    for (uint32_t i = 0; i < n; i++)
      if (k[i].n && mc_master_replica_clear(m, client, k[i].p, k[i].n, seg.p, seg.n)) {
        mc_w_blob(w, k[i].p, k[i].n);
        cleared++;
      }
    patch_i32(w, at, (int32_t)cleared);
    mc_metrics_batch(m->ms, MC_OP_BATCH_REPLICA_CLEAR, n, n - cleared);
  }
  mc_free(k);
  return rc;
}

static int op_remove_matching(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws) {
  struct mc_regex *re = compile(r);
  uint8_t force = mc_r_u8(r);
  char *scope = r->off < r->len ? mc_r_str(r) : NULL; /* optional: the client's key namespace */
  struct mc_req *q = mc_req_of(r);
  if (q->nslen && (!scope || strcmp(scope, q->ns))) r->err = 1; /* a tenant's: its own namespace, said */
  int64_t n = re && !r->err ? mc_master_remove_matching(m, re, scope, force, ws) : MC_INVALID_PARAMS;
  if (n >= 0) mc_w_i64(w, n);
  mc_regex_free(re);
  mc_free(scope);
  return n < 0 ? (int)n : 0;
}

static int op_remove_every(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, struct mc_wsink *ws) {
  uint8_t force = mc_r_u8(r);
  char *scope = r->off < r->len ? mc_r_str(r) : NULL; /* optional: the client's key namespace */
  struct mc_req *q = mc_req_of(r);
  if (q->nslen && (!scope || strcmp(scope, q->ns))) r->err = 1; /* a tenant's: its own namespace, said */
  if (!r->err) mc_w_i64(w, mc_master_remove_matching(m, NULL, scope, force, ws));
  mc_free(scope);
  return r->err ? MC_INVALID_PARAMS : 0;
}

static int op_remove(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return witnessed(m, r, w, op_remove_one);
}
static int op_batch_remove(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return witnessed(m, r, w, op_batch_remove_list);
}
static int op_remove_by_regex(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return witnessed(m, r, w, op_remove_matching);
}
static int op_remove_all(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return witnessed(m, r, w, op_remove_every);
}

/* ------------------------------------------------------------------ statistics */

/* Any client, pure ones included: merged into the cluster figures; never touches liveness (docs/admin.md, "Client reports"). */
static int op_report_stats(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_client_stats st;
  mc_get_client_stats(r, &st);
  if (r->err) return MC_INVALID_PARAMS;
  mc_metrics_report(m->ms, &st);
  return 0;
}

/* A client's local-disk tier (proto.h, REPORT_SSD): the body is exactly its four fields. */
static int op_report_ssd(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t cap = mc_r_u64(r), used = mc_r_u64(r), objects = mc_r_u64(r);
  if (r->err || r->off != r->len) return MC_INVALID_PARAMS;
  return mc_client_report_ssd(m, client, tenant_of(r), cap, used, objects);
}

/* ------------------------------------------------------------------ holder indexes */

static void answer_deferred(void *arg, struct mc_wbuf *body) { mc_mrpc_deferred_reply(arg, 0, body); }

static void answer_inline(void *arg, struct mc_wbuf *body) {
  mc_w_bytes_raw(arg, body->p, body->len);
  mc_w_free(body);
}

/* A holder's long poll (proto.h, FOLLOW_INDEX; docs/ha.md): the reply is deferred while it waits, so it
 * holds no RPC worker. Dispatched outside the RPC server (in-process callers), it never waits. */
static int op_follow_index(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t acked = mc_r_u64(r);
  uint32_t wait_ms = mc_r_u32(r);
  if (r->err) return MC_INVALID_PARAMS;
  struct mc_hidx *h = mc_client_follow(m, client, tenant_of(r));
  if (!h) return MC_CLIENT_NOT_FOUND;
  if (mc_hidx_resyncing(h)) { /* after an overflow: what it acknowledged makes room for the next shards */
    mc_hidx_ack(h, acked);
    mc_obj_index_resync(m, h);
  }
  struct mc_mrpc_deferred *d = wait_ms ? mc_mrpc_defer() : NULL;
  if (d) mc_hidx_follow(h, acked, wait_ms, answer_deferred, d);
  else mc_hidx_follow(h, acked, 0, answer_inline, w);
  mc_discard_release_acked(m, h); /* the space its acknowledged DROPs held is free now, not at the next tick */
  mc_hidx_unref(h);
  return 0;
}

#define INDEX_ENTRY_MIN_BYTES (4 + 8 * 3 + 1 + 8)

/* An entry's key group (master_core/holder_feed.h): 1 to MC_STR_MAX bytes, no NUL, a view into the request. */
static void read_group(struct mc_rbuf_rd *r, struct mc_index_entry *e) {
  const char *g = (const char *)mc_r_blob(r, &e->glen);
  if (!r->err && (!e->glen || e->glen > MC_STR_MAX || memchr(g, 0, e->glen))) r->err = 1;
  e->group = r->err ? NULL : g;
  if (r->err) e->glen = 0;
}

static int op_remount_index(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r), seg = mc_get_uuid(r);
  uint32_t n = mc_r_count(r, INDEX_ENTRY_MIN_BYTES);
  struct mc_index_entry *e = request_array(r, &n, sizeof(*e));
  for (uint32_t i = 0; i < n && !r->err; i++) {
    e[i].key = mc_req_key(r, &e[i].klen);
    e[i].offset = mc_r_u64(r);
    e[i].length = mc_r_u64(r);
    e[i].size = mc_r_u64(r);
    e[i].hard_pin = mc_r_u8(r);
    e[i].soft_pin_ttl_ms = mc_r_u64(r);
    e[i].group = NULL;
    e[i].glen = 0;
  }
  /* then (a holder that knows of witnesses) u64 applied_seq, u8 last batch, then (one that knows of key
   * groups) list<{u32 entry index, str group}> */
  int more = !r->err && r->len > r->off;
  uint64_t applied = more ? mc_r_u64(r) : 0;
  int last = more ? mc_r_u8(r) : 1;
  uint32_t ng = !r->err && r->len > r->off ? mc_r_count(r, 4 + 4 + 1) : 0;
  for (uint32_t i = 0; i < ng && !r->err; i++) {
    uint32_t at = mc_r_u32(r);
    if (at >= n || e[at].glen) r->err = 1; /* (each entry's group once) */
    else read_group(r, &e[at]);
  }
  int32_t *res = r->err ? NULL : request_array(r, &n, sizeof(*res));
  int rc = r->err ? MC_INVALID_PARAMS
                  : mc_master_rebuild_index(m, client, seg, tenant_of(r), e, n, applied, last, res);
  if (!rc) {
    uint32_t failed = 0;
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) mc_w_i32(w, res[i]), failed += res[i] != 0;
    mc_metrics_batch(m->ms, MC_OP_REMOUNT_INDEX, n, failed);
  }
  mc_free(res);
  mc_free(e);
  return rc;
}

/* RECOMMIT (proto.h; docs/ha.md, "Witnesses"): a writer's witnesses of records another master issued. */
static int op_recommit(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  (void)mc_get_uuid(r); /* the writer (for the record; any client may witness) */
  uint64_t view = mc_r_u64(r);
  uint32_t n = mc_r_count(r, INDEX_ENTRY_MIN_BYTES + 8 + 1 + 16);
  struct mc_index_entry *e = request_array(r, &n, sizeof(*e));
  uint64_t *seq = r->err ? NULL : request_array(r, &n, sizeof(*seq));
  struct mc_uuid *seg = r->err ? NULL : request_array(r, &n, sizeof(*seg));
  uint8_t *kind = r->err ? NULL : request_array(r, &n, sizeof(*kind));
  for (uint32_t i = 0; i < n && !r->err; i++) {
    seq[i] = mc_r_u64(r);
    kind[i] = mc_r_u8(r);
    int grouped = kind[i] == (MC_HIDX_PUT | MC_HIDX_GROUPED);
    if (grouped) kind[i] = MC_HIDX_PUT;
    if (kind[i] != MC_HIDX_PUT && kind[i] != MC_HIDX_DROP) r->err = 1;
    e[i].key = mc_req_key(r, &e[i].klen);
    seg[i] = mc_get_uuid(r);
    e[i].offset = mc_r_u64(r);
    e[i].length = mc_r_u64(r);
    e[i].size = mc_r_u64(r);
    e[i].hard_pin = mc_r_u8(r);
    e[i].soft_pin_ttl_ms = mc_r_u64(r);
    e[i].glen = 0;
    e[i].group = NULL;
    if (grouped) read_group(r, &e[i]);
  }
  int rc = r->err ? MC_INVALID_PARAMS : 0;
  if (!rc) {
    struct mc_wsink sink;
    mc_wsink_open(&sink);
    uint32_t failed = 0;
    mc_w_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
      int st = view == m->view_version ? MC_RECOMMIT_KNOWN
               : kind[i] == MC_HIDX_DROP ? mc_master_recommit_drop(m, tenant_of(r), seg[i], seq[i], &e[i], &sink)
                                         : mc_master_recommit(m, tenant_of(r), seg[i], seq[i], &e[i], &sink);
      mc_w_i32(w, st);
      failed += st < 0;
    }
    mc_witness_reply(m, &sink, 1, w);
    mc_metrics_batch(m->ms, MC_OP_RECOMMIT, n, failed);
  }
  mc_free(e);
  mc_free(seq);
  mc_free(seg);
  mc_free(kind);
  return rc;
}

/* ------------------------------------------------------------------ copy and move tasks */

/* docs/master.md, "Copy and move tasks". The reply is the task id, (0, 0) with an error. */
static int create_task(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w, uint8_t type) {
  struct key k = get_key(r);
  char *src = NULL, *tgt[MC_TASK_MAX_TARGETS];
  uint32_t n = 1;
  if (type == MC_TASK_MOVE) {
    src = mc_r_str(r);
    tgt[0] = mc_r_str(r);
  } else {
    n = mc_r_count(r, 4);
    if (n > MC_TASK_MAX_TARGETS) r->err = 1, n = 0; /* before anything is read for them */
    for (uint32_t i = 0; i < n; i++) tgt[i] = mc_r_str(r);
  }
  struct mc_uuid id = {0, 0};
  int rc = r->err || !n ? MC_INVALID_PARAMS : mc_master_create_task(m, tenant_of(r), type, k.p, k.n, src, tgt, n, &id);
  if (!rc) mc_put_uuid(w, id);
  mc_free(src);
  for (uint32_t i = 0; i < n; i++) mc_free(tgt[i]);
  return rc;
}

static int op_create_copy_task(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return create_task(m, r, w, MC_TASK_COPY);
}

static int op_create_move_task(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  return create_task(m, r, w, MC_TASK_MOVE);
}

static int op_query_task(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid id = mc_get_uuid(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_query_task(m, tenant_of(r), id, w);
}

/* An executor's poll: its tasks are assigned through its segments, so a tenant's connection fetches only
 * what its own segments (of its realm) were given. */
static int op_fetch_tasks(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint32_t max = mc_r_u32(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_fetch_tasks(m, tenant_of(r), client, max, w);
}

static int op_mark_task(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r), id = mc_get_uuid(r);
  int32_t status = mc_r_i32(r);
  uint32_t mlen;
  const uint8_t *msg = mc_r_blob(r, &mlen);
  return r->err ? MC_INVALID_PARAMS : mc_master_mark_task(m, tenant_of(r), client, id, status, (const char *)msg, mlen);
}

/* ------------------------------------------------------------------ write extents (write_extents.h) */

static int mc_op_reserve_extent(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t min_len = mc_r_u64(r), hint = mc_r_u64(r);
  struct mc_put_config pc = {0};
  mc_get_config(r, &pc);
  pc.tenant = mc_req_of(r)->tenant; /* on the tenant's own segments (docs/security.md, "Tenants") */
  int rc = r->err ? MC_INVALID_PARAMS : mc_master_reserve_extent(m, client, min_len, hint, &pc, w);
  mc_put_config_free(&pc);
  return rc;
}

static int mc_op_commit_put(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t ext_id = mc_r_u64(r);
  uint32_t klen;
  const uint8_t *key = mc_req_key(r, &klen);
  uint64_t off = mc_r_u64(r), len = mc_r_u64(r);
  struct mc_put_config pc = {.replica_num = 1};
  pc.soft_pin_action = mc_r_u8(r);
  pc.soft_pin_ttl_ms = mc_r_i64(r);
  pc.with_hard_pin = mc_r_u8(r);
  struct mc_wsink sink;
  mc_wsink_open(&sink);
  int rc = r->err ? MC_INVALID_PARAMS : mc_master_commit_put(m, client, ext_id, key, klen, off, len, &pc, &sink);
  mc_witness_reply(m, &sink, !rc, w);
  if (!rc) mc_metrics_put_started(m->ms, len, 1, 1); /* a put like PutStart's, in one round trip */
  return rc;
}

static int mc_op_batch_commit_put(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t ext_id = mc_r_u64(r);
  struct mc_put_config pc = {.replica_num = 1};
  pc.soft_pin_action = mc_r_u8(r);
  pc.soft_pin_ttl_ms = mc_r_i64(r);
  pc.with_hard_pin = mc_r_u8(r);
  uint32_t n = mc_r_count(r, 20); /* key length (4) + offset + length */
  if (r->err) return MC_INVALID_PARAMS;
  /* The whole request is checked before any entry is committed: a malformed one changes nothing. */
  size_t body = r->off;
  for (uint32_t i = 0; i < n && !r->err; i++) {
    uint32_t klen;
    (void)mc_req_key(r, &klen);
    (void)mc_r_u64(r);
    (void)mc_r_u64(r);
  }
  if (r->err) return MC_INVALID_PARAMS;
  r->off = body;
  uint32_t failed = 0;
  mc_w_u32(w, n);
  size_t st_at = mc_batch_reply_start(w, n);
  struct mc_wsink sink;
  mc_wsink_open_in(&sink, w);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t klen;
    const uint8_t *key = mc_req_key(r, &klen);
    uint64_t off = mc_r_u64(r), len = mc_r_u64(r);
    int st = mc_master_commit_put(m, client, ext_id, key, klen, off, len, &pc, &sink);
    if (!st) mc_metrics_put_started(m->ms, len, 1, 1);
    mc_w_patch_u32(w, st_at + 4 * (size_t)i, (uint32_t)st);
    failed += st != 0;
  }
  mc_witness_reply(m, &sink, 1, w);
  mc_metrics_batch(m->ms, MC_OP_BATCH_COMMIT_PUT, n, failed);
  return 0;
}

static int mc_op_release_extent(struct mc_master *m, struct mc_rbuf_rd *r, struct mc_wbuf *w) {
  struct mc_uuid client = mc_get_uuid(r);
  uint64_t ext_id = mc_r_u64(r);
  return r->err ? MC_INVALID_PARAMS : mc_master_release_extent(m, client, ext_id);
}

/* ------------------------------------------------------------------ dispatch */

#define DISPATCH_(name, code, metric, batch, handler) [MC_OP_##name] = handler,
static const op_fn ops[MC_OP_MAX + 1] = {MC_MASTER_OPS(DISPATCH_)};
#undef DISPATCH_

int mc_master_dispatch_as(struct mc_master *m, const char *tenant, uint16_t op, const uint8_t *body, size_t len,
                          struct mc_wbuf *reply) {
  if (op >= MC_ARRAY_LEN(ops) || !ops[op]) return MC_NOT_SUPPORTED;
  /* a standby, or a leader whose lease may have run out, serves nothing (docs/ha.md) */
  if (!mc_master_serving(m)) return MC_UNAVAILABLE_IN_CURRENT_STATUS;
  struct mc_req q = {.tenant = tenant && *tenant ? tenant : NULL};
  if (q.tenant) {
    size_t tl = strnlen(q.tenant, MC_AUTH_TENANT_MAX + 1);
    if (tl > MC_AUTH_TENANT_MAX) return MC_INVALID_PARAMS;
    memcpy(q.ns, q.tenant, tl);
    q.ns[tl] = 0x1f;
    q.ns[tl + 1] = 0;
    q.nslen = tl + 1;
  }
  mc_r_init(&q.r, body, len);
  int rc = ops[op](m, &q.r, reply);
  if (!rc && reply->err) rc = MC_INVALID_PARAMS; /* the reply outgrew its bound (docs/master.md "Limits") */
  mc_metrics_rpc(m->ms, op, rc);
  if (rc) reply->len = 0; /* an error carries no body */
  return rc;
}

int mc_master_dispatch(struct mc_master *m, uint16_t op, const uint8_t *body, size_t len, struct mc_wbuf *reply) {
  return mc_master_dispatch_as(m, NULL, op, body, len, reply);
}
