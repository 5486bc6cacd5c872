/* Test-side calls of the write-extent RPCs (master_core/write_extents.h): RESERVE_EXTENT, COMMIT_PUT,
 * BATCH_COMMIT_PUT, RELEASE_EXTENT over a raw master connection. Used by tests/test_master_extents.c and bench/store_bench.c. */
#ifndef MC_TEST_EXTENTS_CLIENT_H
#define MC_TEST_EXTENTS_CLIENT_H
#include "lib/master_client.h"

struct grant {
  uint64_t id, addr, len, lease_ms, ttl_ms, view;
  char seg[64];
};

static inline int x_reserve(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t min_len, uint64_t hint,
                     const char *preferred, struct grant *g) {
  struct mc_put_config cfg = mt_cfg(1);
  if (preferred) cfg.n_preferred = 1, cfg.preferred[0] = (char *)preferred;
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  mc_w_u64(&w, min_len);
  mc_w_u64(&w, hint);
  mc_put_config(&w, &cfg);
  int rc = mt_call(c, MC_OP_RESERVE_EXTENT, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    struct mc_replica_rec rec = {0};
    mc_r_init(&r, rep.p, rep.len);
    g->id = mc_r_u64(&r);
    mc_get_replica(&r, &rec);
    g->lease_ms = mc_r_u64(&r);
    g->ttl_ms = mc_r_u64(&r);
    g->view = mc_r_u64(&r);
    g->addr = rec.address;
    g->len = rec.size;
    snprintf(g->seg, sizeof(g->seg), "%s", rec.segment_name ? rec.segment_name : "");
    mc_replica_rec_free(&rec);
    if (r.err || r.len != r.off) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

static inline int x_commit(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t ext, const char *key, uint64_t off,
                    uint64_t len) {
  struct mc_wbuf w = {0};
  mc_put_uuid(&w, client);
  mc_w_u64(&w, ext);
  mc_w_str(&w, key);
  mc_w_u64(&w, off);
  mc_w_u64(&w, len);
  mc_w_u8(&w, MC_SOFT_PIN_KEEP);
  mc_w_i64(&w, -1);
  mc_w_u8(&w, 0);
  return mt_simple(c, MC_OP_COMMIT_PUT, &w);
}

/* BATCH_COMMIT_PUT of n entries: the call's status; st[i] per entry when it is 0. */
/* The witness block a completion's reply ends with (proto.h): u64 view_version, u64 durable_seq, u32 count and
 * that many index records (master_core/holder_feed.h), and nothing after it. 1 when it is exactly that. */
static inline int x_witness_block(struct mc_rbuf_rd *r) {
  mc_r_u64(r);
  mc_r_u64(r);
  uint32_t n = mc_r_u32(r), kl;
  for (uint32_t i = 0; i < n && !r->err; i++) {
    mc_r_u64(r), mc_r_u8(r), mc_r_blob(r, &kl), mc_get_uuid(r);
    mc_r_u64(r), mc_r_u64(r), mc_r_u64(r), mc_r_u8(r), mc_r_u64(r);
  }
  return !r->err && r->off == r->len;
}

static inline int x_batch_commit(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t ext, const char *const *keys,
                                 const uint64_t *offs, const uint64_t *lens, uint32_t n, int *st) {
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  mc_w_u64(&w, ext);
  mc_w_u8(&w, MC_SOFT_PIN_KEEP);
  mc_w_i64(&w, -1);
  mc_w_u8(&w, 0);
  mc_w_u32(&w, n);
  for (uint32_t i = 0; i < n; i++) {
    mc_w_str(&w, keys[i]);
    mc_w_u64(&w, offs[i]);
    mc_w_u64(&w, lens[i]);
  }
  int rc = mt_call(c, MC_OP_BATCH_COMMIT_PUT, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    if (mc_r_u32(&r) != n) rc = -9999;
    for (uint32_t i = 0; i < n && !rc; i++) st[i] = mc_r_i32(&r);
    if (!rc && !x_witness_block(&r)) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

static inline int x_release(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t ext) {
  struct mc_wbuf w = {0};
  mc_put_uuid(&w, client);
  mc_w_u64(&w, ext);
  return mt_simple(c, MC_OP_RELEASE_EXTENT, &w);
}

#endif
