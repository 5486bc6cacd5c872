/* In-process master tests: the TLSF offset allocator (utilisation, coalescing, fragmentation, O(1)
 * behaviour, invariants under random churn), the configuration helpers (durations, JSON/YAML files,
 * validation), and the RPC dispatcher fed with malformed and random bodies (decoders are total). */
#include <math.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "master/master.h"
#include "master/master_int.h"
#include "master/mconfig.h"
#include "master/tlsf.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* ------------------------------------------------------------------ TLSF */

/* Fills a fresh allocator with equal blocks; returns how many fit. */
static uint64_t fill_uniform(struct mc_tlsf *t, uint64_t size, struct mc_tlsf_block **blocks, uint64_t max) {
  uint64_t n = 0, off;
  while (n < max && (blocks[n] = mc_tlsf_alloc(t, size, &off))) n++;
  return n;
}

static void test_tlsf_uniform_utilisation(void) {
  const uint64_t cap = 64ull << 20, sizes[] = {1000, 4096, 777, 100000, 1 << 20, 24};
  struct mc_tlsf_block **b = malloc(sizeof(*b) * (cap / 24 + 1));
  for (size_t i = 0; i < MC_ARRAY_LEN(sizes); i++) {
    struct mc_tlsf *t = mc_tlsf_create(cap);
    uint64_t n = fill_uniform(t, sizes[i], b, cap / 24 + 1);
    double util = (double)(n * sizes[i]) / (double)cap;
    if (util < 0.95) fprintf(stderr, "size %llu: utilisation %.4f\n", (unsigned long long)sizes[i], util);
    CHECK(util >= 0.95);
    CHECK_EQ(n, cap / (((sizes[i] + 7) / 8) * 8)); /* every aligned slot is used */
    CHECK_EQ(mc_tlsf_check(t), 0);
    mc_tlsf_destroy(t);
  }
  free(b);
}

static void test_tlsf_churn_refill(void) {
  const uint64_t cap = 16ull << 20, size = 1000;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  uint64_t max = cap / 1000 + 1, off;
  struct mc_tlsf_block **b = malloc(sizeof(*b) * max);
  uint64_t n = fill_uniform(t, size, b, max);
  for (int round = 0; round < 5; round++) {
    uint64_t freed = 0;
    for (uint64_t i = 0; i < n; i++)
      if (b[i] && rng() % 2) {
        mc_tlsf_free(t, b[i]);
        b[i] = NULL;
        freed++;
      }
    CHECK_EQ(mc_tlsf_check(t), 0);
    uint64_t refilled = 0;
    for (uint64_t i = 0; i < n; i++)
      if (!b[i] && (b[i] = mc_tlsf_alloc(t, size, &off))) refilled++;
    CHECK_EQ(refilled, freed); /* every hole of the same size is found again */
    CHECK(mc_tlsf_alloc(t, size, &off) == NULL);
    CHECK_EQ(mc_tlsf_check(t), 0);
  }
  CHECK((double)mc_tlsf_used(t) / (double)cap >= 0.99);
  free(b);
  mc_tlsf_destroy(t);
}

static void test_tlsf_coalesce_and_fragmentation(void) {
  const uint64_t s = 4096;
  struct mc_tlsf *t = mc_tlsf_create(3 * s);
  uint64_t oa, ob, oc, off;
  struct mc_tlsf_block *a = mc_tlsf_alloc(t, s, &oa), *b = mc_tlsf_alloc(t, s, &ob), *c = mc_tlsf_alloc(t, s, &oc);
  REQUIRE(a && b && c);
  CHECK_EQ(oa, 0);
  CHECK_EQ(ob, s);
  CHECK_EQ(oc, 2 * s);
  CHECK_EQ(mc_tlsf_largest_free(t), 0);
  mc_tlsf_free(t, a);
  mc_tlsf_free(t, c);
  CHECK_EQ(mc_tlsf_used(t), s);
  CHECK_EQ(mc_tlsf_largest_free(t), s);    /* two holes, not adjacent */
  CHECK(mc_tlsf_alloc(t, 2 * s, &off) == NULL); /* fragmented */
  mc_tlsf_free(t, b);                      /* coalesces with both neighbours */
  CHECK_EQ(mc_tlsf_largest_free(t), 3 * s);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *all = mc_tlsf_alloc(t, 3 * s, &off);
  CHECK(all != NULL);
  CHECK_EQ(off, 0);
  mc_tlsf_free(t, all);
  /* many blocks freed in random order coalesce back into one */
  enum { N = 5000 };
  struct mc_tlsf *u = mc_tlsf_create(N * 64ull);
  struct mc_tlsf_block *blk[N];
  for (int i = 0; i < N; i++) blk[i] = mc_tlsf_alloc(u, 64, &off);
  for (int i = N - 1; i > 0; i--) {
    int j = (int)(rng() % (uint64_t)(i + 1));
    struct mc_tlsf_block *x = blk[i];
    blk[i] = blk[j];
    blk[j] = x;
  }
  for (int i = 0; i < N; i++) mc_tlsf_free(u, blk[i]);
  CHECK_EQ(mc_tlsf_used(u), 0);
  CHECK_EQ(mc_tlsf_largest_free(u), N * 64ull);
  CHECK_EQ(mc_tlsf_check(u), 0);
  mc_tlsf_destroy(u);
  mc_tlsf_destroy(t);
}

static void test_tlsf_edges(void) {
  CHECK(mc_tlsf_create(4) == NULL);
  struct mc_tlsf *t = mc_tlsf_create(1003); /* rounds down to 1000 */
  uint64_t off = 1;
  CHECK_EQ(mc_tlsf_capacity(t), 1000);
  CHECK(mc_tlsf_alloc(t, 0, &off) == NULL);
  CHECK(mc_tlsf_alloc(t, 1001, &off) == NULL);
  struct mc_tlsf_block *a = mc_tlsf_alloc(t, 3, &off);
  CHECK(a != NULL);
  CHECK_EQ(off, 0);
  struct mc_tlsf_block *b = mc_tlsf_alloc(t, 5, &off);
  CHECK_EQ(off, 8); /* 8-byte alignment */
  CHECK_EQ(mc_tlsf_used(t), 16);
  mc_tlsf_free(t, a);
  mc_tlsf_free(t, b);
  struct mc_tlsf_block *whole = mc_tlsf_alloc(t, 1000, &off);
  CHECK(whole != NULL);
  CHECK(mc_tlsf_alloc(t, 1, &off) == NULL);
  CHECK_EQ(mc_tlsf_check(t), 0);
  mc_tlsf_destroy(t);
}

static void test_tlsf_random_churn_invariants(void) {
  const uint64_t cap = 256ull << 20;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  enum { SLOTS = 4096 };
  struct mc_tlsf_block *b[SLOTS] = {0};
  uint64_t sz[SLOTS] = {0}, live = 0, off;
  for (int op = 0; op < 200000; op++) {
    int i = (int)(rng() % SLOTS);
    if (b[i]) {
      mc_tlsf_free(t, b[i]);
      live -= (sz[i] + 7) / 8 * 8;
      b[i] = NULL;
    } else {
      sz[i] = 1 + rng() % (rng() % 4 ? 4096 : 1 << 20);
      if ((b[i] = mc_tlsf_alloc(t, sz[i], &off))) {
        live += (sz[i] + 7) / 8 * 8;
        CHECK(off % 8 == 0 && off + sz[i] <= cap);
      }
    }
    if (op % 20000 == 0) CHECK_EQ(mc_tlsf_check(t), 0);
  }
  CHECK_EQ(mc_tlsf_used(t), live);
  CHECK_EQ(mc_tlsf_check(t), 0);
  mc_tlsf_destroy(t);
}

/* ns per alloc+free pair with `live` blocks of mixed sizes resident (fragmented). */
static double pair_cost_ns(uint64_t live) {
  struct mc_tlsf *t = mc_tlsf_create(64ull << 30);
  struct mc_tlsf_block **keep = malloc(sizeof(*keep) * live);
  uint64_t off;
  for (uint64_t i = 0; i < live; i++) keep[i] = mc_tlsf_alloc(t, 64 + rng() % 8192, &off);
  for (uint64_t i = 0; i < live; i += 2) mc_tlsf_free(t, keep[i]); /* holes everywhere */
  const int ops = 200000;
  uint64_t t0 = mc_now_ns();
  for (int i = 0; i < ops; i++) {
    struct mc_tlsf_block *x = mc_tlsf_alloc(t, 64 + rng() % 8192, &off);
    mc_tlsf_free(t, x);
  }
  double ns = (double)(mc_now_ns() - t0) / ops;
  free(keep);
  mc_tlsf_destroy(t);
  return ns;
}

static double best_of_3(uint64_t live) {
  double best = pair_cost_ns(live);
  for (int i = 0; i < 2; i++) best = MC_MIN(best, pair_cost_ns(live));
  return best;
}

static void test_tlsf_constant_time(void) {
  double small = best_of_3(1000), big = best_of_3(400000);
  fprintf(stderr, "tlsf alloc+free: %.1f ns with 1k blocks, %.1f ns with 400k blocks\n", small, big);
  CHECK(big < small * 4 + 200); /* no growth with the number of blocks (cache effects aside) */
}

/* ------------------------------------------------------------------ configuration */

static void test_durations(void) {
  static const struct {
    const char *in;
    long long ms; /* -1 = rejected */
  } cases[] = {{"5000", 5000},  {"5000ms", 5000}, {"5s", 5000},        {"30m", 1800000}, {"1H", 3600000},
               {" 7 m ", 420000}, {"0", 0},       {"10MS", 10},        {"", -1},         {"abc", -1},
               {"-1", -1},        {"1d", -1},     {"1.5s", -1},        {"5 s x", -1},    {"18446744073709551616", -1},
               {"18446744073709551615s", -1},     {"   ", -1},         {"s", -1}};
  for (size_t i = 0; i < MC_ARRAY_LEN(cases); i++) {
    uint64_t ms = 0;
    char why[128] = "";
    int rc = mc_parse_duration_ms(cases[i].in, &ms, why, sizeof(why));
    if (cases[i].ms < 0) {
      CHECK_EQ(rc, -1);
      CHECK(why[0] != 0);
    } else {
      CHECK_EQ(rc, 0);
      CHECK_EQ(ms, cases[i].ms);
    }
  }
}

static char *write_tmp(const char *dir, const char *name, const char *text) {
  char *p = mc_tp_path(dir, name);
  FILE *f = fopen(p, "w");
  fputs(text, f);
  fclose(f);
  return p;
}

static void test_config_files(void) {
  char *dir = mc_tp_mkdtemp("mcfg"), err[512];
  REQUIRE(dir);
  char *yaml = write_tmp(dir, "m.yaml",
                         "# sample\n---\neviction_ratio: 0.1\neviction_high_watermark_ratio: 1.0\n"
                         "rpc_thread_num: 16\nclient_live_ttl_sec: 60   # liveness\n"
                         "default_kv_lease_ttl: \"5s\"\nallocation_strategy: 'free_ratio_first'\n"
                         "nested:\n  inner: 3\nenable_http_metadata_server: true\n");
  struct mc_master_cfg c;
  mc_master_cfg_defaults(&c);
  CHECK_EQ(mc_master_cfg_load_file(&c, yaml, err, sizeof(err)), 0);
  CHECK(fabs(c.eviction_ratio - 0.1) < 1e-12);
  CHECK(fabs(c.eviction_high_watermark_ratio - 1.0) < 1e-12);
  CHECK_EQ(c.rpc_thread_num, 16);
  CHECK_EQ(c.client_ttl, 60);
  CHECK_EQ(c.enable_http_metadata_server, 1);
  CHECK_EQ(mc_master_cfg_finalize(&c, err, sizeof(err)), 0);
  CHECK_EQ(c.lease_ttl_ms, 5000);
  CHECK_EQ(c.strategy, MC_STRATEGY_FREE_RATIO_FIRST);
  CHECK_EQ(c.listen_port, 50051);
  mc_master_cfg_free(&c);

  char *json = write_tmp(dir, "m.json", "{\"client_live_ttl_sec\": 7, \"default_kv_lease_ttl\": 1500, "
                                        "\"rpc_port\": 6000, \"a\": {\"b\": 1}, \"eviction_ratio\": 0.25}");
  mc_master_cfg_defaults(&c);
  CHECK_EQ(mc_master_cfg_load_file(&c, json, err, sizeof(err)), 0);
  CHECK_EQ(mc_master_cfg_finalize(&c, err, sizeof(err)), 0);
  CHECK_EQ(c.client_ttl, 7);
  CHECK_EQ(c.lease_ttl_ms, 1500);
  CHECK_EQ(c.listen_port, 6000);
  mc_master_cfg_free(&c);

  char *bad = write_tmp(dir, "m.toml", "x = 1\n");
  mc_master_cfg_defaults(&c);
  CHECK_EQ(mc_master_cfg_load_file(&c, bad, err, sizeof(err)), -1);
  CHECK(strstr(err, "Unsupported config file format") != NULL);
  char *range = write_tmp(dir, "r.yml", "eviction_ratio: 1.5\n");
  CHECK_EQ(mc_master_cfg_load_file(&c, range, err, sizeof(err)), -1);
  mc_master_cfg_free(&c);

  mc_master_cfg_defaults(&c);
  mc_cfg_set(mc_master_opts, &c, "memory_allocator", "slab", err, sizeof(err));
  CHECK_EQ(mc_master_cfg_finalize(&c, err, sizeof(err)), -1);
  CHECK(strstr(err, "Invalid memory allocator") != NULL);
  mc_master_cfg_free(&c);
  mc_master_cfg_defaults(&c);
  mc_cfg_set(mc_master_opts, &c, "max_kv_soft_pin_ttl", "2x", err, sizeof(err));
  CHECK_EQ(mc_master_cfg_finalize(&c, err, sizeof(err)), -1);
  CHECK_STR(err, "Invalid value for --max_kv_soft_pin_ttl: 2x. unknown unit 'x' (use ms, s, m or h)");
  mc_master_cfg_free(&c);
  mc_master_cfg_defaults(&c);
  mc_cfg_set(mc_master_opts, &c, "cluster_id", "bad/id", err, sizeof(err));
  CHECK_EQ(mc_master_cfg_finalize(&c, err, sizeof(err)), -1);
  mc_master_cfg_free(&c);
  free(yaml), free(json), free(bad), free(range);
  mc_tp_rmrf(dir);
  free(dir);
}

/* ------------------------------------------------------------------ dispatcher */

static struct mc_master *in_process_master(struct mc_master_cfg *c) {
  char err[256];
  mc_master_cfg_defaults(c);
  mc_master_cfg_finalize(c, err, sizeof(err));
  struct mc_master *m = NULL;
  CHECK_EQ(mc_master_create(c, &m), 0);
  return m;
}

/* A valid request body for each opcode (what a well-behaved client would send). */
static void valid_body(uint16_t op, struct mc_wbuf *w) {
  struct mc_segment_rec s = mt_seg(1, "fz:1", 0x100000, 1 << 20);
  struct mc_put_config pc = mt_cfg(1);
  switch (op) {
    case MC_OP_PING: mc_put_uuid(w, mt_id(1)); break;
    case MC_OP_MOUNT_SEGMENT: mc_put_segment(w, &s), mc_put_uuid(w, mt_id(1)); break;
    case MC_OP_REMOUNT_SEGMENTS: mc_w_u32(w, 1), mc_put_segment(w, &s), mc_put_uuid(w, mt_id(1)); break;
    case MC_OP_UNMOUNT_SEGMENT: mc_put_uuid(w, mt_id(9)), mc_put_uuid(w, mt_id(1)); break;
    case MC_OP_GRACEFUL_UNMOUNT: mc_put_uuid(w, mt_id(9)), mc_put_uuid(w, mt_id(1)), mc_w_u64(w, 5); break;
    case MC_OP_PUT_START: mc_put_uuid(w, mt_id(1)), mc_w_str(w, "k"), mc_w_u64(w, 64), mc_put_config(w, &pc); break;
    case MC_OP_PUT_END:
    case MC_OP_PUT_REVOKE: mc_put_uuid(w, mt_id(1)), mc_w_str(w, "k"), mc_w_u8(w, 4); break;
    case MC_OP_BATCH_PUT_START:
      mc_put_uuid(w, mt_id(1)), mc_w_u32(w, 1), mc_w_str(w, "b"), mc_w_u64(w, 64), mc_put_config(w, &pc);
      break;
    case MC_OP_BATCH_PUT_END:
    case MC_OP_BATCH_PUT_REVOKE: mc_put_uuid(w, mt_id(1)), mc_w_u32(w, 1), mc_w_str(w, "b"), mc_w_u8(w, 4); break;
    case MC_OP_GET_REPLICA_LIST:
    case MC_OP_EXIST_KEY: mc_w_str(w, "k"); break;
    case MC_OP_BATCH_GET_REPLICA_LIST:
    case MC_OP_BATCH_EXIST_KEY: mc_w_u32(w, 2), mc_w_str(w, "k"), mc_w_str(w, "b"); break;
    case MC_OP_GET_REPLICA_LIST_BY_REGEX: mc_w_str(w, "^k"); break;
    case MC_OP_REMOVE: mc_w_str(w, "zz"), mc_w_u8(w, 0); break;
    case MC_OP_BATCH_REMOVE: mc_w_u32(w, 1), mc_w_str(w, "zz"), mc_w_u8(w, 0); break;
    case MC_OP_REMOVE_BY_REGEX: mc_w_str(w, "^zz"), mc_w_u8(w, 0); break;
    case MC_OP_REMOVE_ALL: mc_w_u8(w, 0); break;
    case MC_OP_REPORT_CLIENT_STATS: {
      struct mc_client_stats st = {.client = mt_id(1), .lat = {[3] = 2}, .lat_sum_us = 20, .hits = 1};
      mc_put_client_stats(w, &st);
      break;
    }
    default: break;
  }
}

static const uint16_t all_ops[] = {
    MC_OP_SERVICE_READY,  MC_OP_PING,           MC_OP_MOUNT_SEGMENT,         MC_OP_REMOUNT_SEGMENTS,
    MC_OP_UNMOUNT_SEGMENT, MC_OP_GRACEFUL_UNMOUNT, MC_OP_PUT_START,          MC_OP_PUT_END,
    MC_OP_PUT_REVOKE,     MC_OP_BATCH_PUT_START, MC_OP_BATCH_PUT_END,        MC_OP_BATCH_PUT_REVOKE,
    MC_OP_GET_REPLICA_LIST, MC_OP_BATCH_GET_REPLICA_LIST, MC_OP_EXIST_KEY,   MC_OP_BATCH_EXIST_KEY,
    MC_OP_GET_REPLICA_LIST_BY_REGEX, MC_OP_REMOVE, MC_OP_BATCH_REMOVE,       MC_OP_REMOVE_BY_REGEX,
    MC_OP_QUERY_SEGMENTS, MC_OP_REPORT_CLIENT_STATS};

static void test_dispatch_truncated_and_random(void) {
  mc_log_set_level(MC_LOG_ERROR); /* mutated mounts trigger (harmless) D4 warnings by the thousand */
  struct mc_master_cfg c;
  struct mc_master *m = in_process_master(&c);
  REQUIRE(m);
  for (size_t i = 0; i < MC_ARRAY_LEN(all_ops); i++) {
    struct mc_wbuf body = {0}, rep = {0};
    valid_body(all_ops[i], &body);
    /* every proper prefix of a request that has arguments is rejected as INVALID_PARAMS */
    for (size_t cut = 0; cut < body.len; cut++) {
      rep.len = 0;
      int rc = mc_master_dispatch(m, all_ops[i], body.p, cut, &rep);
      if (rc != MC_INVALID_PARAMS) fprintf(stderr, "op %u cut %zu/%zu -> %d\n", all_ops[i], cut, body.len, rc);
      CHECK_EQ(rc, MC_INVALID_PARAMS);
      CHECK_EQ(rep.len, 0);
    }
    rep.len = 0;
    int rc = mc_master_dispatch(m, all_ops[i], body.p, body.len, &rep);
    CHECK(rc != MC_INVALID_PARAMS || all_ops[i] == MC_OP_PUT_END || all_ops[i] == MC_OP_PUT_REVOKE);
    /* random mutations of the valid body */
    for (int it = 0; it < 3000; it++) {
      uint8_t buf[512];
      size_t n = body.len + rng() % 16;
      if (n > sizeof(buf)) n = sizeof(buf);
      if (body.len) memcpy(buf, body.p, MC_MIN(n, body.len));
      for (size_t j = body.len; j < n; j++) buf[j] = (uint8_t)rng();
      for (int flips = 1 + (int)(rng() % 4); flips > 0 && n; flips--) buf[rng() % n] = (uint8_t)rng();
      rep.len = 0;
      mc_master_dispatch(m, all_ops[i], buf, n, &rep);
    }
    mc_w_free(&body);
    mc_w_free(&rep);
  }
  struct mc_wbuf rep = {0};
  CHECK_EQ(mc_master_dispatch(m, 999, NULL, 0, &rep), MC_NOT_SUPPORTED);
  CHECK_EQ(mc_master_dispatch(m, 0, NULL, 0, &rep), MC_NOT_SUPPORTED);
  /* still fully functional */
  struct mc_segment_rec s = mt_seg(77, "after:1", 0x200000, 1 << 20);
  struct mc_put_config pc = mt_cfg(1);
  CHECK_EQ(mc_master_remove_matching(m, NULL, NULL, 1) >= 0, 1);
  CHECK_EQ(mc_master_mount(m, &s, mt_id(77)), 0);
  CHECK_EQ(mc_master_put_start(m, mt_id(77), "after", 5, 100, &pc, &rep), 0);
  CHECK_EQ(mc_master_put_end(m, mt_id(77), "after", 5, MC_REPLICA_ALL), 0);
  CHECK_EQ(mc_master_exist(m, "after", 5), 1);
  mc_w_free(&rep);
  mc_master_destroy(m);
  mc_master_cfg_free(&c);
}


/* The master core without the transport: put start+end and batch exist rates in one thread. */
static void test_core_throughput(void) {
  struct mc_master_cfg c;
  struct mc_master *m = in_process_master(&c);
  REQUIRE(m);
  struct mc_segment_rec s = mt_seg(1, "core:1", 0x100000000ull, 1ull << 36);
  CHECK_EQ(mc_master_mount(m, &s, mt_id(1)), 0);
  struct mc_put_config pc = mt_cfg(1);
  struct mc_wbuf w = {0};
  enum { N = 100000 };
  uint64_t t0 = mc_now_ns();
  int ok = 0;
  for (int i = 0; i < N; i++) {
    char key[32];
    int n = snprintf(key, sizeof(key), "core-%d", i);
    w.len = 0;
    ok += !mc_master_put_start(m, mt_id(1), key, (uint32_t)n, 4096, &pc, &w) &&
          !mc_master_put_end(m, mt_id(1), key, (uint32_t)n, MC_REPLICA_ALL);
  }
  double put_rate = N / ((double)(mc_now_ns() - t0) / 1e9);
  CHECK_EQ(ok, N);
  struct mc_wbuf req = {0}, rep = {0};
  mc_w_u32(&req, 1000);
  for (int i = 0; i < 1000; i++) {
    char key[32];
    snprintf(key, sizeof(key), "core-%d", i * 97);
    mc_w_str(&req, key);
  }
  t0 = mc_now_ns();
  for (int i = 0; i < 200; i++) {
    rep.len = 0;
    CHECK_EQ(mc_master_dispatch(m, MC_OP_BATCH_EXIST_KEY, req.p, req.len, &rep), 0);
  }
  double exist_rate = 200 * 1000 / ((double)(mc_now_ns() - t0) / 1e9);
  CHECK_EQ(rep.len, 4 + 4 * 1000);
  fprintf(stderr, "master core, one thread: put start+end %.0f/s, batch exist %.0f keys/s\n", put_rate, exist_rate);
  CHECK(put_rate > 20000);
  CHECK(exist_rate > 1000000);
  mc_w_free(&w), mc_w_free(&req), mc_w_free(&rep);
  mc_master_destroy(m);
  mc_master_cfg_free(&c);
}

/* Regression: a put that started after the release scan sampled its clock wrapped to a huge age and was
 * released as abandoned; its writer's PutEnd then got OBJECT_NOT_FOUND. */
static void test_put_younger_than_scan_clock_is_not_released(void) {
  struct mc_master_cfg c;
  struct mc_master *m = in_process_master(&c);
  REQUIRE(m);
  struct mc_segment_rec s = mt_seg(1, "young:1", 0x100000000ull, 1ull << 30);
  CHECK_EQ(mc_master_mount(m, &s, mt_id(1)), 0);
  struct mc_put_config pc = mt_cfg(1);
  struct mc_wbuf w = {0};
  uint64_t scan_clock = mc_now_ns(); /* sampled before the put, as the eviction scan does */
  CHECK_EQ(mc_master_put_start(m, mt_id(1), "young", 5, 4096, &pc, &w), 0);
  uint64_t released = 0;
  for (uint32_t i = 0; i < MC_NSHARDS; i++) {
    pthread_mutex_lock(&m->shards[i].mu);
    released += mc_shard_release_stale(m, &m->shards[i], scan_clock);
    pthread_mutex_unlock(&m->shards[i].mu);
  }
  CHECK_EQ(released, 0);
  CHECK_EQ(mc_master_put_end(m, mt_id(1), "young", 5, MC_REPLICA_ALL), 0);
  mc_w_free(&w);
  mc_master_destroy(m);
  mc_master_cfg_free(&c);
}

TEST_MAIN(TEST_CASE(test_tlsf_uniform_utilisation), TEST_CASE(test_put_younger_than_scan_clock_is_not_released), TEST_CASE(test_tlsf_churn_refill),
          TEST_CASE(test_tlsf_coalesce_and_fragmentation), TEST_CASE(test_tlsf_edges),
          TEST_CASE(test_tlsf_random_churn_invariants), TEST_CASE(test_tlsf_constant_time), TEST_CASE(test_durations),
          TEST_CASE(test_config_files), TEST_CASE(test_dispatch_truncated_and_random),
          TEST_CASE(test_core_throughput))
