/* The client side of the master protocol (proto/proto.h): one function per RPC, encoding the request
 * and decoding the reply with total readers. Knows nothing of transfers or handles. A reply that does
 * not decode is reported as RPC_FAIL (and logged). */
#include <stdio.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "net/mrpc.h"

struct mcli *mcli_new(const char *host, uint16_t port, int connect_timeout_ms, int timeout_ms) {
  struct mcli *c = mc_calloc(1, sizeof(*c));
  c->rpc = mc_mrpc_client_new(host, port, connect_timeout_ms, timeout_ms);
  c->wit = mc_witness_new();
  return c;
}

void mcli_set_key_ns(struct mcli *c, const char *tenant) {
  if (tenant && *tenant && strcmp(tenant, "default"))
    snprintf(c->key_ns, sizeof(c->key_ns), "%s\x1f", tenant);
  else
    c->key_ns[0] = 0;
}

void mcli_free(struct mcli *c) {
  if (!c) return;
  mc_mrpc_client_free(c->rpc);
  mc_witness_free(c->wit);
  mc_free(c);
}

static int malformed(int op) {
  LOG_WARN("master reply to opcode %d is malformed", op);
  return MC_RPC_FAIL;
}
#define MALFORMED(op) malformed(op)

static int call(struct mcli *c, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply, int tmo) {
  return tmo > 0 ? mc_mrpc_call_timeout(c->rpc, op, req, reply, tmo) : mc_mrpc_call(c->rpc, op, req, reply);
}

int mcli_call(struct mcli *c, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply, int tmo) {
  return call(c, op, req, reply, tmo);
}

/* A call whose reply body is empty on success, or (wit non-NULL: a completion) only a witness block
 * (proto.h) that wit keeps (witness.c). */
static int call_body_w(struct mcli *c, uint16_t op, struct mc_wbuf *req, int tmo, struct mc_witnesses *wit) {
  struct mc_wbuf rep;
  int rc = call(c, op, req, &rep, tmo);
  if (!rc && wit) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    mc_witness_take(wit, &r);
  }
  mc_w_free(req);
  mc_w_free(&rep);
  return rc;
}

static int call_void(struct mcli *c, uint16_t op, struct mc_wbuf *req, int tmo) {
  return call_body_w(c, op, req, tmo, NULL);
}

void mcli_reps_free(struct mcli_reps *r, size_t n) {
  for (size_t i = 0; r && i < n; i++) {
    mc_replicas_free(r[i].reps, r[i].n);
    r[i].reps = NULL;
    r[i].n = 0;
  }
}

/* An object key as a str field, prefixed with the client's key namespace (tenant). */
static void put_key(struct mc_wbuf *w, struct mcli *c, const char *key) {
  const char *ns = c->key_ns;
  size_t nl = strlen(ns), kl = strlen(key);
  mc_w_u32(w, (uint32_t)(nl + kl));
  mc_w_bytes_raw(w, ns, nl);
  mc_w_bytes_raw(w, key, kl);
}

int mcli_service_ready(struct mcli *c, int tmo, char **version, uint64_t *view) {
  struct mc_wbuf req = {0}, rep;
  int rc = call(c, MC_OP_SERVICE_READY, &req, &rep, tmo);
  if (view) *view = 0;
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *version = mc_r_str(&r);
    if (!r.err && r.len - r.off >= 8) { /* a master that does not send it: 0, unknown */
      uint64_t v = mc_r_u64(&r);
      if (view) *view = v;
    }
    if (r.err) {
      mc_free(*version);
      *version = NULL;
      rc = MALFORMED(MC_OP_SERVICE_READY);
    }
  }
  mc_w_free(&rep);
  return rc;
}

int mcli_ping(struct mcli *c, struct mc_uuid id, int tmo, int *status, uint64_t *view) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  int rc = call(c, MC_OP_PING, &req, &rep, tmo);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint64_t v = mc_r_u64(&r); /* view_version: the master's incarnation (HA is not followed yet) */
    *status = mc_r_u8(&r);
    if (view && !r.err) *view = v;
    if (r.err) rc = MALFORMED(MC_OP_PING);
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

int mcli_mount(struct mcli *c, const struct mc_segment_rec *seg, struct mc_uuid id, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_segment(&req, seg);
  mc_put_uuid(&req, id);
  return call_void(c, MC_OP_MOUNT_SEGMENT, &req, tmo);
}

int mcli_remount(struct mcli *c, const struct mc_segment_rec *segs, uint32_t n, struct mc_uuid id,
                 int tmo) {
  struct mc_wbuf req = {0};
  mc_w_u32(&req, n);
  for (uint32_t i = 0; i < n; i++) mc_put_segment(&req, &segs[i]);
  mc_put_uuid(&req, id);
  return call_void(c, MC_OP_REMOUNT_SEGMENTS, &req, tmo);
}

int mcli_follow_index(struct mcli *c, struct mc_uuid id, uint64_t acked, uint32_t wait_ms, int tmo,
                      struct mc_wbuf *reply) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u64(&req, acked);
  mc_w_u32(&req, wait_ms);
  int rc = call(c, MC_OP_FOLLOW_INDEX, &req, reply, tmo);
  mc_w_free(&req);
  return rc;
}

int mcli_remount_index(struct mcli *c, struct mc_uuid id, struct mc_uuid seg, const struct mcli_index_entry *e,
                       uint32_t n, uint64_t applied, int last, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_put_uuid(&req, seg);
  mc_w_u32(&req, n);
  for (uint32_t i = 0; i < n; i++) { /* the keys as the master sent them: namespace included */
    mc_w_blob(&req, e[i].key, e[i].klen);
    mc_w_u64(&req, e[i].offset);
    mc_w_u64(&req, e[i].length);
    mc_w_u64(&req, e[i].size);
    mc_w_u8(&req, e[i].hard_pin);
    mc_w_u64(&req, e[i].soft_pin_ttl_ms);
  }
  mc_w_u64(&req, applied);
  mc_w_u8(&req, last ? 1 : 0);
  uint32_t ng = 0; /* then the key groups of the entries that have one */
  for (uint32_t i = 0; i < n; i++) ng += e[i].glen != 0;
  mc_w_u32(&req, ng);
  for (uint32_t i = 0; i < n; i++)
    if (e[i].glen) mc_w_u32(&req, i), mc_w_blob(&req, e[i].group, e[i].glen);
  return call_void(c, MC_OP_REMOUNT_INDEX, &req, tmo);
}

int mcli_unmount(struct mcli *c, struct mc_uuid seg, struct mc_uuid id, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, seg);
  mc_put_uuid(&req, id);
  return call_void(c, MC_OP_UNMOUNT_SEGMENT, &req, tmo);
}

int mcli_graceful_unmount(struct mcli *c, struct mc_uuid seg, struct mc_uuid id, uint64_t grace_ms, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, seg);
  mc_put_uuid(&req, id);
  mc_w_u64(&req, grace_ms);
  return call_void(c, MC_OP_GRACEFUL_UNMOUNT, &req, tmo);
}

const struct mc_write_ops mc_put_ops = {MC_OP_PUT_START, MC_OP_PUT_END, MC_OP_PUT_REVOKE, MC_OP_BATCH_PUT_START,
                                       MC_OP_BATCH_PUT_END, MC_OP_BATCH_PUT_REVOKE, "put"};
const struct mc_write_ops mc_upsert_ops = {MC_OP_UPSERT_START,       MC_OP_UPSERT_END,       MC_OP_UPSERT_REVOKE,
                                          MC_OP_BATCH_UPSERT_START, MC_OP_BATCH_UPSERT_END, MC_OP_BATCH_UPSERT_REVOKE,
                                          "upsert"};

int mcli_put_start(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id, const char *key,
                   uint64_t len, const struct mc_put_config *cfg, struct mcli_reps *out) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  put_key(&req, c, key);
  mc_w_u64(&req, len);
  mc_put_config(&req, cfg);
  memset(out, 0, sizeof(*out));
  int rc = call(c, ops->start, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    out->n = mc_get_replicas(&r, &out->reps);
    if (r.err) {
      mcli_reps_free(out, 1);
      rc = MALFORMED(ops->start);
    }
  }
  out->status = rc;
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

int mcli_put_end(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id, const char *key,
                 int revoke) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  put_key(&req, c, key);
  mc_w_u8(&req, MC_REPLICA_ALL);
  return call_body_w(c, revoke ? ops->revoke : ops->end, &req, 0, revoke ? NULL : c->wit);
}

/* Decodes list<{i32 status, list<replica>}> of exactly n entries into out. */
static int get_status_reps(struct mc_rbuf_rd *r, size_t n, struct mcli_reps *out) {
  uint32_t cnt = mc_r_count(r, 8);
  if (r->err || cnt != n) return -1;
  for (size_t i = 0; i < n && !r->err; i++) {
    out[i].status = mc_r_i32(r);
    out[i].n = mc_get_replicas(r, &out[i].reps);
  }
  if (!r->err) return 0;
  mcli_reps_free(out, n);
  return -1;
}

int mcli_batch_put_start(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id,
                         const char *const *keys, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                         struct mcli_reps *out) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  mc_w_u32(&req, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    put_key(&req, c, keys[i]);
    mc_w_u64(&req, lens[i]);
  }
  mc_put_config(&req, cfg);
  memset(out, 0, n * sizeof(*out));
  int rc = call(c, ops->batch_start, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    if (get_status_reps(&r, n, out)) rc = MALFORMED(ops->batch_start);
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

/* Decodes list<i32> of exactly n entries. */
static int get_i32_list(struct mc_rbuf_rd *r, size_t n, int *out) {
  uint32_t cnt = mc_r_count(r, 4);
  if (r->err || cnt != n) return -1;
  for (size_t i = 0; i < n; i++) out[i] = mc_r_i32(r);
  return r->err ? -1 : 0;
}

/* wit non-NULL: a witness block follows the list (proto.h), for wit to keep. */
static int call_i32_list_w(struct mcli *c, uint16_t op, struct mc_wbuf *req, size_t n, int *results,
                           struct mc_witnesses *wit) {
  struct mc_wbuf rep;
  int rc = call(c, op, req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    if (get_i32_list(&r, n, results)) rc = MALFORMED(op);
    else mc_witness_take(wit, &r); /* (NULL: nothing) */
  }
  mc_w_free(req);
  mc_w_free(&rep);
  return rc;
}

static int call_i32_list(struct mcli *c, uint16_t op, struct mc_wbuf *req, size_t n, int *results) {
  return call_i32_list_w(c, op, req, n, results, NULL);
}

static void put_keys(struct mc_wbuf *w, struct mcli *c, const char *const *keys, size_t n) {
  mc_w_u32(w, (uint32_t)n);
  for (size_t i = 0; i < n; i++) put_key(w, c, keys[i]);
}

int mcli_batch_put_end(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id,
                       const char *const *keys, size_t n, int revoke, int *results) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  put_keys(&req, c, keys, n);
  mc_w_u8(&req, MC_REPLICA_ALL);
  return call_i32_list_w(c, revoke ? ops->batch_revoke : ops->batch_end, &req, n, results, revoke ? NULL : c->wit);
}

int mcli_get_replicas(struct mcli *c, const char *key, uint64_t *lease_ttl_ms, struct mcli_reps *out) {
  struct mc_wbuf req = {0}, rep;
  put_key(&req, c, key);
  memset(out, 0, sizeof(*out));
  int rc = call(c, MC_OP_GET_REPLICA_LIST, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *lease_ttl_ms = mc_r_u64(&r);
    out->n = mc_get_replicas(&r, &out->reps);
    if (r.err) {
      mcli_reps_free(out, 1);
      rc = MALFORMED(MC_OP_GET_REPLICA_LIST);
    }
  }
  out->status = rc;
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

int mcli_batch_get_replicas(struct mcli *c, const char *const *keys, size_t n, uint64_t *lease_ttl_ms,
                            struct mcli_reps *out) {
  struct mc_wbuf req = {0}, rep;
  put_keys(&req, c, keys, n);
  memset(out, 0, n * sizeof(*out));
  int rc = call(c, MC_OP_BATCH_GET_REPLICA_LIST, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *lease_ttl_ms = mc_r_u64(&r);
    if (r.err || get_status_reps(&r, n, out)) rc = MALFORMED(MC_OP_BATCH_GET_REPLICA_LIST);
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

int mcli_exist(struct mcli *c, const char *key) {
  struct mc_wbuf req = {0}, rep;
  put_key(&req, c, key);
  int rc = call(c, MC_OP_EXIST_KEY, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    rc = mc_r_u8(&r) ? 1 : 0;
    if (r.err) rc = MALFORMED(MC_OP_EXIST_KEY);
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

int mcli_batch_exist(struct mcli *c, const char *const *keys, size_t n, int *results) {
  struct mc_wbuf req = {0};
  put_keys(&req, c, keys, n);
  return call_i32_list(c, MC_OP_BATCH_EXIST_KEY, &req, n, results);
}

int mcli_remove(struct mcli *c, const char *key, int force) {
  struct mc_wbuf req = {0};
  put_key(&req, c, key);
  mc_w_u8(&req, force ? 1 : 0);
  return call_body_w(c, MC_OP_REMOVE, &req, 0, c->wit); /* its reply witnesses its DROP records */
}

int mcli_batch_remove(struct mcli *c, const char *const *keys, size_t n, int force, int *results) {
  struct mc_wbuf req = {0};
  put_keys(&req, c, keys, n);
  mc_w_u8(&req, force ? 1 : 0);
  return call_i32_list_w(c, MC_OP_BATCH_REMOVE, &req, n, results, c->wit);
}

int mcli_batch_replica_clear(struct mcli *c, struct mc_uuid id, const char *const *keys, size_t n,
                             const char *segment, uint8_t *cleared) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  put_keys(&req, c, keys, n);
  mc_w_str(&req, segment);
  int rc = call(c, MC_OP_BATCH_REPLICA_CLEAR, &req, &rep, 0);
  memset(cleared, 0, n);
  if (!rc) {
    /* The master answers the cleared keys in request order: match them with one forward walk. */
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint32_t m = mc_r_count(&r, 4), matched = 0;
    size_t i = 0, nl = strlen(c->key_ns);
    for (uint32_t j = 0; j < m && !r.err; j++) {
      uint32_t len;
      const uint8_t *k = mc_r_blob(&r, &len);
      if (!r.err && len >= nl) k += nl, len -= (uint32_t)nl; /* the answer carries our namespace */
      while (!r.err && i < n && !(strlen(keys[i]) == len && !memcmp(keys[i], k, len))) i++;
      if (r.err || i == n) break;
      cleared[i++] = 1;
      matched++;
    }
    if (r.err || matched != m) {
      memset(cleared, 0, n);
      rc = MALFORMED(MC_OP_BATCH_REPLICA_CLEAR);
    }
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

/* A count, then (removals) the witness block of the DROP records the call queued. */
static int64_t call_count(struct mcli *c, uint16_t op, struct mc_wbuf *req) {
  struct mc_wbuf rep;
  int64_t rc = call(c, op, req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    rc = mc_r_i64(&r);
    if (r.err || rc < 0) rc = MALFORMED(op);
    else mc_witness_take(c->wit, &r);
  }
  mc_w_free(req);
  mc_w_free(&rep);
  return rc;
}

/* Both scoped to the client's key namespace ("" = the default one; docs/master.md, tenant namespaces). */
int64_t mcli_remove_by_regex(struct mcli *c, const char *re, int force) {
  struct mc_wbuf req = {0};
  mc_w_str(&req, re);
  mc_w_u8(&req, force ? 1 : 0);
  mc_w_str(&req, c->key_ns);
  return call_count(c, MC_OP_REMOVE_BY_REGEX, &req);
}

int64_t mcli_remove_all(struct mcli *c, int force) {
  struct mc_wbuf req = {0};
  mc_w_u8(&req, force ? 1 : 0);
  mc_w_str(&req, c->key_ns);
  return call_count(c, MC_OP_REMOVE_ALL, &req);
}

/* ------------------------------------------------------------------ write extents */

int mcli_reserve_extent(struct mcli *c, struct mc_uuid id, uint64_t min_len, uint64_t hint,
                        const struct mc_put_config *cfg, int tmo, struct mcli_extent *out) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  mc_w_u64(&req, min_len);
  mc_w_u64(&req, hint);
  mc_put_config(&req, cfg);
  memset(out, 0, sizeof(*out));
  int rc = call(c, MC_OP_RESERVE_EXTENT, &req, &rep, tmo);
  if (!rc) {
    struct mc_rbuf_rd r;
    struct mc_replica_rec rec = {0};
    mc_r_init(&r, rep.p, rep.len);
    out->id = mc_r_u64(&r);
    mc_get_replica(&r, &rec);
    out->lease_ms = mc_r_u64(&r);
    out->ttl_ms = mc_r_u64(&r);
    (void)mc_r_u64(&r); /* view_version */
    out->addr = rec.address;
    out->len = rec.size;
    out->endpoint = rec.te_endpoint, rec.te_endpoint = NULL;
    out->seg_name = rec.segment_name, rec.segment_name = NULL;
    mc_replica_rec_free(&rec);
    if (r.err || !out->endpoint || !out->seg_name || !out->len) {
      mc_free(out->endpoint);
      mc_free(out->seg_name);
      memset(out, 0, sizeof(*out));
      rc = MALFORMED(MC_OP_RESERVE_EXTENT);
    }
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

/* The pin fields of a put config, as COMMIT_PUT and BATCH_COMMIT_PUT carry them. */
static void put_pins(struct mc_wbuf *w, const struct mc_put_config *cfg) {
  mc_w_u8(w, cfg->soft_pin_action);
  mc_w_i64(w, cfg->soft_pin_ttl_ms);
  mc_w_u8(w, cfg->with_hard_pin);
}

int mcli_commit_put(struct mcli *c, struct mc_uuid id, uint64_t extent, const char *key, uint64_t off,
                    uint64_t len, const struct mc_put_config *cfg) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u64(&req, extent);
  put_key(&req, c, key);
  mc_w_u64(&req, off);
  mc_w_u64(&req, len);
  put_pins(&req, cfg);
  return call_body_w(c, MC_OP_COMMIT_PUT, &req, 0, c->wit);
}

void mcli_batch_commit_put(struct mcli *c, struct mc_uuid id, uint64_t extent, const char *const *keys,
                           const uint64_t *offs, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                           int *st) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u64(&req, extent);
  put_pins(&req, cfg);
  mc_w_u32(&req, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    put_key(&req, c, keys[i]);
    mc_w_u64(&req, offs[i]);
    mc_w_u64(&req, lens[i]);
  }
  int rc = call_i32_list_w(c, MC_OP_BATCH_COMMIT_PUT, &req, n, st, c->wit);
  for (size_t i = 0; i < n && rc; i++) st[i] = rc;
}

int mcli_release_extent(struct mcli *c, struct mc_uuid id, uint64_t extent, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u64(&req, extent);
  return call_void(c, MC_OP_RELEASE_EXTENT, &req, tmo);
}

/* ------------------------------------------------------------------ statistics */

int mcli_report_stats(struct mcli *c, const struct mc_client_stats *d, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_client_stats(&req, d);
  return call_void(c, MC_OP_REPORT_CLIENT_STATS, &req, tmo);
}

int mcli_report_ssd(struct mcli *c, struct mc_uuid id, uint64_t cap, uint64_t used, uint64_t objects, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u64(&req, cap);
  mc_w_u64(&req, used);
  mc_w_u64(&req, objects);
  return call_void(c, MC_OP_REPORT_SSD, &req, tmo);
}

/* ------------------------------------------------------------------ copy and move tasks (proto.h) */

static int call_task_id(struct mcli *c, uint16_t op, struct mc_wbuf *req, struct mc_uuid *id) {
  struct mc_wbuf rep;
  *id = (struct mc_uuid){0, 0};
  int rc = call(c, op, req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *id = mc_get_uuid(&r);
    if (r.err) rc = MALFORMED(op), *id = (struct mc_uuid){0, 0};
  }
  mc_w_free(req);
  mc_w_free(&rep);
  return rc;
}

int mcli_create_copy_task(struct mcli *c, const char *key, const char *const *targets, uint32_t n, struct mc_uuid *id) {
  struct mc_wbuf req = {0};
  put_key(&req, c, key);
  mc_w_u32(&req, n);
  for (uint32_t i = 0; i < n; i++) mc_w_str(&req, targets[i]);
  return call_task_id(c, MC_OP_CREATE_COPY_TASK, &req, id);
}

int mcli_create_move_task(struct mcli *c, const char *key, const char *src, const char *dst, struct mc_uuid *id) {
  struct mc_wbuf req = {0};
  put_key(&req, c, key);
  mc_w_str(&req, src);
  mc_w_str(&req, dst);
  return call_task_id(c, MC_OP_CREATE_MOVE_TASK, &req, id);
}

int mcli_query_task(struct mcli *c, struct mc_uuid id, struct mcli_task_info *out) {
  struct mc_wbuf req = {0}, rep;
  mc_put_uuid(&req, id);
  int rc = call(c, MC_OP_QUERY_TASK, &req, &rep, 0);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    out->id = mc_get_uuid(&r);
    out->type = mc_r_u8(&r);
    out->status = mc_r_u8(&r);
    out->created_ms = mc_r_u64(&r);
    out->updated_ms = mc_r_u64(&r);
    out->client = mc_r_str(&r);
    out->message = mc_r_str(&r);
    if (r.err) {
      rc = MALFORMED(MC_OP_QUERY_TASK);
      mcli_task_info_free(out);
    }
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

void mcli_task_info_free(struct mcli_task_info *t) {
  mc_free(t->client);
  mc_free(t->message);
  t->client = t->message = NULL;
}

int mcli_fetch_tasks(struct mcli *c, struct mc_uuid id, uint32_t max, int tmo, struct mc_wbuf *reply) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_w_u32(&req, max);
  int rc = call(c, MC_OP_FETCH_TASKS, &req, reply, tmo);
  mc_w_free(&req);
  return rc;
}

int mcli_mark_task(struct mcli *c, struct mc_uuid id, struct mc_uuid task, int status, const char *msg, int tmo) {
  struct mc_wbuf req = {0};
  mc_put_uuid(&req, id);
  mc_put_uuid(&req, task);
  mc_w_i32(&req, status);
  mc_w_str(&req, msg ? msg : "");
  return call_void(c, MC_OP_MARK_TASK_COMPLETE, &req, tmo);
}
