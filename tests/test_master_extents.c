/* Write extents (docs/master.md "Write extents"): the TLSF carve operation (splitting an allocated block
 * into up to three allocated blocks) under mc_tlsf_check, and the master's RESERVE_EXTENT / COMMIT_PUT /
 * RELEASE_EXTENT RPCs against real mooncake_master processes: commit semantics (existing key -> -705 and
 * the value kept, concurrent commits of one key), remove/evict of committed objects freeing exactly
 * their bytes, release, lease expiry, unmount and dead-client reclaim, and mixed extent/PutStart puts. */
#include <pthread.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "lib/extents_client.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "master/master.h"
#include "master/master_int.h"
#include "master_core/config.h"
#include "master_core/tlsf.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void) { return mc_tp_xorshift(&rng_state); }

/* ------------------------------------------------------------------ TLSF carve */

static void range_of(struct mc_tlsf_block *b, uint64_t *off, uint64_t *size) { mc_tlsf_block_range(b, off, size); }

static void test_carve_basic(void) {
  struct mc_tlsf *t = mc_tlsf_create(1 << 20);
  uint64_t off, o, z;
  struct mc_tlsf_block *ext = mc_tlsf_alloc(t, 64 << 10, &off), *h, *tl;
  REQUIRE(ext);
  CHECK_EQ(mc_tlsf_used(t), 64 << 10);
  /* rejected: free block, unaligned, empty, outside, overflowing */
  CHECK(mc_tlsf_carve(t, ext, off + 4, 8, &h, &tl) == NULL);
  CHECK(mc_tlsf_carve(t, ext, off, 0, &h, &tl) == NULL);
  CHECK(mc_tlsf_carve(t, ext, off + (64 << 10), 8, &h, &tl) == NULL);
  CHECK(mc_tlsf_carve(t, ext, off + (64 << 10) - 8, 16, &h, &tl) == NULL);
  CHECK(mc_tlsf_carve(t, ext, off, UINT64_MAX, &h, &tl) == NULL);
  CHECK_EQ(mc_tlsf_check(t), 0);
  /* the front: b itself is the carved block, the rest is the tail */
  struct mc_tlsf_block *a = mc_tlsf_carve(t, ext, off, 4096, &h, &tl);
  CHECK(a == ext);
  CHECK(h == NULL);
  REQUIRE(tl);
  range_of(a, &o, &z);
  CHECK_EQ(o, off);
  CHECK_EQ(z, 4096);
  range_of(tl, &o, &z);
  CHECK_EQ(o, off + 4096);
  CHECK_EQ(z, (64 << 10) - 4096);
  CHECK_EQ(mc_tlsf_used(t), 64 << 10);
  CHECK_EQ(mc_tlsf_check(t), 0);
  /* the middle of the tail, unaligned size rounded up: head + mid + tail */
  struct mc_tlsf_block *rest = tl, *h2, *t2;
  struct mc_tlsf_block *mid = mc_tlsf_carve(t, rest, off + 8192, 1001, &h2, &t2);
  REQUIRE(mid);
  CHECK(h2 == rest);
  REQUIRE(t2);
  range_of(mid, &o, &z);
  CHECK_EQ(o, off + 8192);
  CHECK_EQ(z, 1008);
  range_of(h2, &o, &z);
  CHECK_EQ(o, off + 4096);
  CHECK_EQ(z, 4096);
  range_of(t2, &o, &z);
  CHECK_EQ(o, off + 8192 + 1008);
  CHECK_EQ(mc_tlsf_check(t), 0);
  /* the exact end of a block: no tail */
  uint64_t t2o, t2z;
  range_of(t2, &t2o, &t2z);
  struct mc_tlsf_block *h3, *t3, *end = mc_tlsf_carve(t, t2, t2o + t2z - 16, 16, &h3, &t3);
  CHECK(end && h3 == t2 && t3 == NULL);
  CHECK_EQ(mc_tlsf_check(t), 0);
  /* freeing a carved piece between allocated pieces coalesces with nothing */
  mc_tlsf_free(t, mid);
  CHECK(mc_tlsf_block_is_free(mid));
  CHECK_EQ(mc_tlsf_used(t), (64 << 10) - 1008);
  CHECK_EQ(mc_tlsf_check(t), 0);
  /* a carved piece next to the free space after the extent merges with it only */
  mc_tlsf_free(t, end);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK_EQ(mc_tlsf_used(t), (64 << 10) - 1008 - 16);
  /* a free block cannot be carved */
  CHECK(mc_tlsf_carve(t, mid, o, 8, &h, &tl) == NULL);
  mc_tlsf_free(t, a);
  mc_tlsf_free(t, h2);
  mc_tlsf_free(t, t2);
  CHECK_EQ(mc_tlsf_used(t), 0);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK_EQ(mc_tlsf_largest_free(t), 1 << 20); /* everything coalesced back */
  mc_tlsf_destroy(t);
}

/* The first block of the allocator (offset 0) carved in the middle keeps its node as the head. */
static void test_carve_first_block(void) {
  struct mc_tlsf *t = mc_tlsf_create(4096);
  uint64_t off;
  struct mc_tlsf_block *all = mc_tlsf_alloc(t, 4096, &off), *h, *tl;
  REQUIRE(all);
  CHECK_EQ(off, 0);
  struct mc_tlsf_block *m = mc_tlsf_carve(t, all, 1024, 1024, &h, &tl);
  CHECK(m && h == all && tl);
  CHECK_EQ(mc_tlsf_check(t), 0);
  mc_tlsf_free(t, h);
  mc_tlsf_free(t, tl);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK_EQ(mc_tlsf_used(t), 1024);
  CHECK(mc_tlsf_alloc(t, 3072, &off) == NULL); /* no 3 KiB hole: 1 KiB + 2 KiB around the object */
  struct mc_tlsf_block *x = mc_tlsf_alloc(t, 2048, &off);
  CHECK(x != NULL);
  CHECK_EQ(off, 2048);
  mc_tlsf_free(t, m);
  mc_tlsf_free(t, x);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK_EQ(mc_tlsf_largest_free(t), 4096);
  mc_tlsf_destroy(t);
}

/* Random extents carved monotonically with random sizes, interleaved with ordinary allocations and
 * frees of carved pieces and remainders, checked after every step; everything freed at the end. */
static void test_carve_random(void) {
  enum { MAXB = 4096 };
  struct mc_tlsf *t = mc_tlsf_create(8 << 20);
  struct mc_tlsf_block *blocks[MAXB];
  size_t n = 0;
  uint64_t off;
  for (int round = 0; round < 300; round++) {
    struct mc_tlsf_block *ext = mc_tlsf_alloc(t, 8192 + (rng() % 16) * 4096, &off);
    if (!ext) break;
    uint64_t eo, ez;
    range_of(ext, &eo, &ez);
    uint64_t cur = eo;
    struct mc_tlsf_block *rest = ext;
    while (rest && n + 3 < MAXB) {
      uint64_t sz = 1 + rng() % 3000, skip = (rng() % 3) * 8;
      uint64_t ro, rz;
      range_of(rest, &ro, &rz);
      if (cur + skip + sz > ro + rz) break;
      struct mc_tlsf_block *h, *tl, *mid = mc_tlsf_carve(t, rest, cur + skip, sz, &h, &tl);
      REQUIRE(mid);
      if (h) blocks[n++] = h; /* skipped bytes: a reserved piece left behind */
      blocks[n++] = mid;
      cur = cur + skip + ((sz + 7) & ~7ull);
      rest = tl;
      if (mc_tlsf_check(t)) break;
    }
    if (rest) blocks[n++] = rest;
    CHECK_EQ(mc_tlsf_check(t), 0);
    for (int k = 0; k < 5 && n; k++) { /* free a few random pieces */
      size_t i = rng() % n;
      mc_tlsf_free(t, blocks[i]);
      blocks[i] = blocks[--n];
    }
    struct mc_tlsf_block *o = mc_tlsf_alloc(t, 1 + rng() % 5000, &off);
    if (o && n < MAXB) blocks[n++] = o;
    CHECK_EQ(mc_tlsf_check(t), 0);
  }
  while (n) mc_tlsf_free(t, blocks[--n]);
  CHECK_EQ(mc_tlsf_used(t), 0);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK_EQ(mc_tlsf_largest_free(t), 8 << 20);
  mc_tlsf_destroy(t);
}

/* ------------------------------------------------------------------ RPC helpers */

/* Used bytes of the segment named name (UINT64_MAX when absent). */
static uint64_t seg_used(struct mc_mrpc_client *c, const char *name) {
  uint32_t n = 0;
  char names[16][64];
  uint64_t used[16];
  if (mt_query_segments(c, &n, names, NULL, used, 16)) return UINT64_MAX;
  for (uint32_t i = 0; i < n && i < 16; i++)
    if (!strcmp(names[i], name)) return used[i];
  return UINT64_MAX;
}

static uint64_t addr_of(struct mc_mrpc_client *c, const char *key, uint64_t *size) {
  struct mc_replica_rec *r = NULL;
  uint32_t n = 0;
  uint64_t a = 0;
  if (!mt_get(c, key, &r, &n, NULL) && n == 1) a = r[0].address, *size = r[0].size;
  mc_replicas_free(r, n);
  return a;
}

#define SEG_BASE 0x10000000ull
#define LEASE_WAIT_MS 500 /* the 100 ms lease, the eviction thread's next look, and slack for a loaded machine */
#define SEG_SIZE (64ull << 20) /* extents here are at most 1 MiB (1/64) */

static int start_master(struct mt_master *mm, const char *const extra[]) {
  /* short read leases: addr_of() reads objects, and a forced removal keeps leased bytes until the
   * lease ends; the checks of used bytes below wait LEASE_WAIT_MS for that */
  const char *base[16] = {"--eviction_high_watermark_ratio=1.0", "--v=1", "--default_kv_lease_ttl=100"};
  size_t k = 3;
  for (size_t i = 0; extra && extra[i] && k < 15; i++) base[k++] = extra[i];
  base[k] = NULL;
  return mt_master_start(mm, base);
}

/* ------------------------------------------------------------------ commit semantics */

static void test_reserve_commit_basics(void) {
  struct mt_master mm;
  REQUIRE(start_master(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s = mt_seg(1, "ext:1", SEG_BASE, SEG_SIZE);
  struct grant g;
  CHECK_EQ(x_reserve(c, mt_id(1), 4096, 16 << 20, NULL, &g), MC_NO_AVAILABLE_HANDLE); /* no segment yet */
  CHECK_EQ(mt_mount(c, mt_id(1), &s), 0);
  CHECK_EQ(x_reserve(c, mt_id(1), 0, 16 << 20, NULL, &g), MC_INVALID_PARAMS);
  CHECK_EQ(x_reserve(c, mt_id(1), 4096, 16 << 20, NULL, &g), 0);
  CHECK_EQ(g.len, SEG_SIZE / 64); /* capped to the segment's 1/64 share */
  CHECK_STR(g.seg, "ext:1");
  CHECK(g.addr >= SEG_BASE && g.addr + g.len <= SEG_BASE + SEG_SIZE);
  CHECK_EQ(g.lease_ms, 600000);
  CHECK_EQ(g.ttl_ms, 10000);
  CHECK_EQ(seg_used(c, "ext:1"), g.len); /* reserved bytes count as used */
  CHECK_EQ(mt_exist(c, "a"), 0);
  /* commit: the object is complete and readable at once, at the committed address */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "a", 0, 5000), 0);
  CHECK_EQ(mt_exist(c, "a"), 1);
  uint64_t sz = 0;
  CHECK_EQ(addr_of(c, "a", &sz), g.addr);
  CHECK_EQ(sz, 5000);
  CHECK(mt_wait_log(&mm, "ObjectAllocated key=a size=5000 replicas=1", 3000) > 0);
  CHECK_EQ(seg_used(c, "ext:1"), g.len);
  /* an existing key: -705, value kept, the range returned to the pool */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "a", 5000, 4096), MC_OBJECT_ALREADY_EXISTS);
  CHECK_EQ(addr_of(c, "a", &sz), g.addr);
  CHECK_EQ(sz, 5000);
  CHECK_EQ(seg_used(c, "ext:1"), g.len - 4096);
  /* PutStart of a committed key -> -705; commit of a put in flight or complete -> -705 */
  struct mc_put_config pc = mt_cfg(1);
  CHECK_EQ(mt_put_start(c, mt_id(1), "a", 100, &pc, NULL, NULL), MC_OBJECT_ALREADY_EXISTS);
  CHECK_EQ(mt_put_start(c, mt_id(1), "inflight", 100, &pc, NULL, NULL), 0);
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "inflight", 16384, 100), MC_OBJECT_ALREADY_EXISTS);
  CHECK_EQ(mt_put_end(c, mt_id(1), "inflight"), 0);
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "inflight", 20480, 100), MC_OBJECT_ALREADY_EXISTS);
  /* a batch commit: each entry as its own COMMIT_PUT would be, in order */
  {
    const char *bk[5] = {"b1", "a", "b2", "b3", "b1"};
    uint64_t bo[5] = {32768, 36864, 4, 40960, 45056}, bl[5] = {100, 100, 100, 200, 100};
    int st[5] = {1, 1, 1, 1, 1};
    uint64_t used = seg_used(c, "ext:1");
    CHECK_EQ(x_batch_commit(c, mt_id(1), g.id, bk, bo, bl, 5, st), 0);
    CHECK_EQ(st[0], 0);
    CHECK_EQ(st[1], MC_OBJECT_ALREADY_EXISTS); /* "a" kept; its range goes back to the pool */
    CHECK_EQ(st[2], MC_INVALID_PARAMS);        /* unaligned */
    CHECK_EQ(st[3], 0);
    CHECK_EQ(st[4], MC_OBJECT_ALREADY_EXISTS); /* b1, committed by the first entry */
    CHECK_EQ(mt_exist(c, "b1"), 1);
    CHECK_EQ(mt_exist(c, "b3"), 1);
    CHECK_EQ(mt_exist(c, "b2"), 0);
    CHECK_EQ(addr_of(c, "b1", &sz), g.addr + 32768);
    CHECK_EQ(sz, 100);
    CHECK_EQ(addr_of(c, "a", &sz), g.addr);
    CHECK_EQ(seg_used(c, "ext:1"), used - 2 * 104); /* the ranges of the two -705 entries */
    const char *other[1] = {"b4"};
    CHECK_EQ(x_batch_commit(c, mt_id(2), g.id, other, bo, bl, 1, st), 0);
    CHECK_EQ(st[0], MC_ILLEGAL_CLIENT);
    CHECK_EQ(mt_exist(c, "b4"), 0);
    CHECK_EQ(x_batch_commit(c, mt_id(1), g.id, bk, bo, bl, 0, st), 0); /* an empty batch */
    CHECK_EQ(seg_used(c, "ext:1"), used - 2 * 104);
  }
  /* malformed commits change nothing */
  uint64_t before = seg_used(c, "ext:1");
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", 0, 100), MC_INVALID_PARAMS);        /* already committed range */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", 8192, 100), MC_INVALID_PARAMS);     /* returned to the pool */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", 4, 100), MC_INVALID_PARAMS);        /* unaligned */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", g.len - 8, 16), MC_INVALID_PARAMS); /* past the end */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", g.len * 4, 16), MC_INVALID_PARAMS);
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "b", 65536, 16), MC_ILLEGAL_CLIENT);
  CHECK_EQ(x_commit(c, mt_id(1), g.id + 12345, "b", 65536, 16), MC_LEASE_EXPIRED);
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "", 65536, 16), MC_INVALID_PARAMS);
  CHECK_EQ(x_release(c, mt_id(2), g.id), MC_ILLEGAL_CLIENT);
  CHECK_EQ(seg_used(c, "ext:1"), before);
  CHECK_EQ(mt_exist(c, "b"), 0);
  /* remove frees exactly the object's bytes */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "b", 65536, 1001), 0);
  CHECK_EQ(seg_used(c, "ext:1"), before);
  CHECK_EQ(mt_remove(c, "b", 1), 0);
  CHECK_EQ(seg_used(c, "ext:1"), before - 1008);
  /* release: the reserved rest goes back; only the objects stay */
  CHECK_EQ(x_release(c, mt_id(1), g.id), 0);
  CHECK_EQ(x_release(c, mt_id(1), g.id), 0); /* unknown id: OK */
  CHECK_EQ(seg_used(c, "ext:1"), 5000 + 104 + 104 + 200); /* a, inflight, b1, b3 */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "c", 131072, 64), MC_LEASE_EXPIRED);
  CHECK_EQ(mt_remove(c, "a", 1), 0);
  CHECK_EQ(mt_remove(c, "inflight", 1), 0);
  CHECK_EQ(mt_remove(c, "b1", 1), 0);
  CHECK_EQ(mt_remove(c, "b3", 1), 0);
  mc_tp_sleep_ms(LEASE_WAIT_MS);
  CHECK_EQ(seg_used(c, "ext:1"), 0);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* A small segment (< 64 x the object) gives no extent; a hint smaller than the share is honoured. */
static void test_reserve_small_segment(void) {
  struct mt_master mm;
  REQUIRE(start_master(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s = mt_seg(1, "tiny:1", SEG_BASE, 1 << 20);
  CHECK_EQ(mt_mount(c, mt_id(1), &s), 0);
  struct grant g;
  CHECK_EQ(x_reserve(c, mt_id(1), 64 << 10, 16 << 20, NULL, &g), MC_NO_AVAILABLE_HANDLE);
  CHECK_EQ(seg_used(c, "tiny:1"), 0);
  CHECK_EQ(x_reserve(c, mt_id(1), 4096, 8192, NULL, &g), 0);
  CHECK_EQ(g.len, 8192);
  CHECK_EQ(x_release(c, mt_id(1), g.id), 0);
  CHECK_EQ(seg_used(c, "tiny:1"), 0);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

struct racer {
  int port, who, n;
  struct grant g;
  int *won;
  pthread_barrier_t *bar;
};

static void *race_main(void *arg) {
  struct racer *r = arg;
  struct mc_mrpc_client *c = mt_connect(r->port);
  struct mc_wbuf w = {0}, rep;
  mt_call(c, MC_OP_SERVICE_READY, &w, &rep); /* connected before the race starts */
  mc_w_free(&rep);
  pthread_barrier_wait(r->bar);
  for (int j = 0; j < r->n; j++) {
    int i = r->who == 1 ? j : r->n - 1 - j; /* opposite orders: they meet in the middle */
    char key[32];
    snprintf(key, sizeof(key), "race-%d", i);
    int rc = x_commit(c, mt_id((uint64_t)r->who), r->g.id, key, (uint64_t)i * 4096, 4096);
    if (rc == 0) r->won[i] = r->who;
    else if (rc != MC_OBJECT_ALREADY_EXISTS) r->won[i] = -100 + rc;
  }
  mc_mrpc_client_free(c);
  return NULL;
}

/* Two clients commit the same keys concurrently: per key exactly one wins, its range is the replica. */
static void test_concurrent_commits(void) {
  struct mt_master mm;
  REQUIRE(start_master(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s1 = mt_seg(1, "race:1", SEG_BASE, SEG_SIZE), s2 = mt_seg(2, "race:2", SEG_BASE << 4, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &s1), 0);
  CHECK_EQ(mt_mount(c, mt_id(2), &s2), 0);
  enum { N = 200 };
  int won1[N] = {0}, won2[N] = {0};
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  struct racer r[2] = {{mm.port, 1, N, {0}, won1, &bar}, {mm.port, 2, N, {0}, won2, &bar}};
  REQUIRE(x_reserve(c, mt_id(1), 4096, 1 << 20, "race:1", &r[0].g) == 0);
  REQUIRE(x_reserve(c, mt_id(2), 4096, 1 << 20, "race:2", &r[1].g) == 0);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, race_main, &r[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
  int ones = 0, bad = 0;
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof(key), "race-%d", i);
    int w = won1[i] ? won1[i] : won2[i];
    bad += (won1[i] != 0) == (won2[i] != 0) || w < 0;
    ones += w == 1;
    uint64_t sz = 0, a = addr_of(c, key, &sz);
    bad += a != r[w == 1 ? 0 : 1].g.addr + (uint64_t)i * 4096 || sz != 4096;
  }
  CHECK_EQ(bad, 0);
  CHECK(ones > 0 && ones < N);
  fprintf(stderr, "concurrent commits: client 1 won %d of %d keys\n", ones, N);
  /* each segment holds exactly its winners' bytes plus its reserved rest */
  CHECK_EQ(x_release(c, mt_id(1), r[0].g.id), 0);
  CHECK_EQ(x_release(c, mt_id(2), r[1].g.id), 0);
  CHECK_EQ(seg_used(c, "race:1"), (uint64_t)ones * 4096);
  CHECK_EQ(seg_used(c, "race:2"), (uint64_t)(N - ones) * 4096);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* PutStart/PutEnd and extent commits interleaved on one segment: no two objects overlap, none overlaps
 * the reserved rest, and removing everything brings the segment back to exactly the reserved rest. */
static void test_mixed_puts_no_overlap(void) {
  struct mt_master mm;
  REQUIRE(start_master(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s = mt_seg(1, "mix:1", SEG_BASE, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &s), 0);
  struct grant g;
  REQUIRE(x_reserve(c, mt_id(1), 4096, 1 << 20, NULL, &g) == 0);
  enum { N = 120 };
  uint64_t a[N], z[N], cur = 0, fast_bytes = 0;
  for (int i = 0; i < N; i++) {
    char key[32];
    snprintf(key, sizeof(key), "mix-%d", i);
    uint64_t len = 100 + rng() % 9000;
    if (i % 2) {
      CHECK_EQ(x_commit(c, mt_id(1), g.id, key, cur, len), 0);
      cur += (len + 7) & ~7ull;
      fast_bytes += (len + 7) & ~7ull;
    } else {
      CHECK_EQ(mt_put(c, mt_id(1), key, len, 1), 0);
    }
    a[i] = addr_of(c, key, &z[i]);
    CHECK_EQ(z[i], len);
  }
  for (int i = 0; i < N; i++) {
    int fast = i % 2;
    if (!fast) CHECK(a[i] + z[i] <= g.addr || a[i] >= g.addr + g.len); /* slow puts stay out of the extent */
    for (int j = i + 1; j < N; j++) CHECK(a[i] + z[i] <= a[j] || a[j] + z[j] <= a[i]);
  }
  int64_t removed = 0;
  CHECK_EQ(mt_remove_many(c, NULL, 1, &removed), 0);
  CHECK_EQ(removed, N);
  mc_tp_sleep_ms(LEASE_WAIT_MS);
  CHECK_EQ(seg_used(c, "mix:1"), g.len - fast_bytes);
  /* the rest of the extent is still usable after all that churn */
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "tail", cur, 4096), 0);
  CHECK_EQ(x_release(c, mt_id(1), g.id), 0);
  CHECK_EQ(seg_used(c, "mix:1"), 4096);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* ------------------------------------------------------------------ reclaim */

static void test_lease_expiry(void) {
  struct mt_master mm;
  const char *extra[] = {"--put_start_release_timeout_sec=1", "--put_start_discard_timeout_sec=1", NULL};
  REQUIRE(start_master(&mm, extra) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s = mt_seg(1, "lease:1", SEG_BASE, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &s), 0);
  struct grant g;
  REQUIRE(x_reserve(c, mt_id(1), 4096, 1 << 20, NULL, &g) == 0);
  CHECK_EQ(g.lease_ms, 1000);
  /* commits renew the lease */
  for (int i = 0; i < 6; i++) {
    char key[32];
    snprintf(key, sizeof(key), "l-%d", i);
    mc_tp_sleep_ms(300);
    int st;
    mt_ping(c, mt_id(1), &st);
    CHECK_EQ(x_commit(c, mt_id(1), g.id, key, (uint64_t)i * 4096, 4096), 0);
  }
  mc_tp_sleep_ms(1500);
  int st;
  mt_ping(c, mt_id(1), &st);
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "late", 65536, 4096), MC_LEASE_EXPIRED);
  CHECK_EQ(mt_exist(c, "late"), 0);
  CHECK_EQ(seg_used(c, "lease:1"), 6 * 4096); /* the objects stay, the reserved rest is free */
  CHECK(mt_log_count(&mm, "reason=lease_expired") >= 1);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* Unmounting the extent's segment takes the extent with it; the client's later commit gets -707. */
static void test_unmount_reclaims(void) {
  struct mt_master mm;
  REQUIRE(start_master(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec a = mt_seg(1, "um:a", SEG_BASE, SEG_SIZE), b = mt_seg(2, "um:b", SEG_BASE << 4, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &a), 0);
  CHECK_EQ(mt_mount(c, mt_id(2), &b), 0);
  struct grant g;
  REQUIRE(x_reserve(c, mt_id(2), 4096, 1 << 20, "um:a", &g) == 0); /* client 2's extent on client 1's segment */
  CHECK_STR(g.seg, "um:a");
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "k1", 0, 4096), 0);
  CHECK_EQ(mt_unmount(c, a.id, mt_id(1)), 0);
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "k2", 4096, 4096), MC_LEASE_EXPIRED);
  CHECK_EQ(mt_exist(c, "k1"), 0);
  CHECK_EQ(mt_exist(c, "k2"), 0);
  CHECK_EQ(x_release(c, mt_id(2), g.id), 0);
  /* remount of the same range: a fresh allocator, nothing reserved */
  CHECK_EQ(mt_mount(c, mt_id(1), &a), 0);
  CHECK_EQ(seg_used(c, "um:a"), 0);
  /* graceful unmount: no commit into a segment that takes no allocations */
  REQUIRE(x_reserve(c, mt_id(2), 4096, 1 << 20, "um:a", &g) == 0);
  CHECK_EQ(mt_graceful(c, a.id, mt_id(1), 100000), 0);
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "k3", 0, 4096), MC_LEASE_EXPIRED);
  CHECK_EQ(seg_used(c, "um:a"), 0); /* the refused commit gave the reservation back: a drain can finish */
  CHECK_EQ(x_release(c, mt_id(2), g.id), 0); /* unknown by now: still 0 */
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* A client that stops pinging is expired: its extents on other clients' segments are freed. */
static void test_dead_client_extents_reclaimed(void) {
  struct mt_master mm;
  const char *extra[] = {"--client_ttl=1", NULL};
  REQUIRE(start_master(&mm, extra) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec a = mt_seg(1, "dead:a", SEG_BASE, SEG_SIZE), b = mt_seg(2, "dead:b", SEG_BASE << 4, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &a), 0);
  CHECK_EQ(mt_mount(c, mt_id(2), &b), 0);
  struct grant g;
  REQUIRE(x_reserve(c, mt_id(2), 4096, 1 << 20, "dead:a", &g) == 0);
  CHECK_EQ(g.ttl_ms, 1000);
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "d1", 0, 4096), 0);
  CHECK_EQ(seg_used(c, "dead:a"), g.len);
  /* client 1 keeps pinging, client 2 goes silent */
  long t0 = mc_tp_now_ms();
  int st;
  while (mc_tp_now_ms() - t0 < 2500) {
    mt_ping(c, mt_id(1), &st);
    mc_tp_sleep_ms(200);
  }
  CHECK_EQ(mt_log_count(&mm, "reason=client_expired"), 1);
  CHECK_EQ(seg_used(c, "dead:a"), 4096); /* its committed object stays; the reservation is gone */
  CHECK_EQ(mt_exist(c, "d1"), 1);
  CHECK_EQ(x_commit(c, mt_id(2), g.id, "d2", 4096, 4096), MC_LEASE_EXPIRED);
  /* no longer tracked: what it gets now is a lease-only extent (client_ttl 0 in the grant) */
  CHECK_EQ(x_reserve(c, mt_id(2), 4096, 1 << 20, "dead:a", &g), 0);
  CHECK_EQ(g.ttl_ms, 0);
  CHECK_EQ(g.lease_ms, 1000);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* A client the master does not track (a pure client: no segment, no pings) gets a lease-only extent:
 * lease min(put_start_release_timeout_sec, client_ttl), client_ttl 0 in the grant. Commits renew it;
 * without them it is reclaimed by its lease; the expiry of a client record under the same id (the
 * client mounted a segment after reserving, then went silent) does not end it. */
static void test_lease_only_extent(void) {
  struct mt_master mm;
  const char *extra[] = {"--client_ttl=2", NULL};
  REQUIRE(start_master(&mm, extra) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec a = mt_seg(1, "lo:a", SEG_BASE, SEG_SIZE), b = mt_seg(2, "lo:b", SEG_BASE << 4, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &a), 0);
  struct grant g, g2;
  REQUIRE(x_reserve(c, mt_id(9), 4096, 1 << 20, "lo:a", &g) == 0);
  CHECK_EQ(g.ttl_ms, 0);
  CHECK_EQ(g.lease_ms, 2000); /* min(600 s, client_ttl) */
  CHECK_EQ(g.len, 1 << 20);
  CHECK(mt_wait_log(&mm, "(lease only), action=reserve_extent", 3000) > 0);
  CHECK_EQ(x_commit(c, mt_id(9), g.id, "p0", 0, 4096), 0);
  CHECK_EQ(mt_exist(c, "p0"), 1);
  CHECK_EQ(x_commit(c, mt_id(1), g.id, "p1", 4096, 4096), MC_ILLEGAL_CLIENT); /* still owned */
  /* id 9 now mounts a segment of its own (so it is tracked) and never pings: it expires after 2 s, while its
   * commits keep the lease-only extent alive past that */
  CHECK_EQ(mt_mount(c, mt_id(9), &b), 0);
  long t0 = mc_tp_now_ms();
  int i = 1, st;
  while (mc_tp_now_ms() - t0 < 3500) {
    mt_ping(c, mt_id(1), &st);
    char key[32];
    snprintf(key, sizeof(key), "p-%d", i);
    CHECK_EQ(x_commit(c, mt_id(9), g.id, key, (uint64_t)i * 4096, 4096), 0);
    i++;
    mc_tp_sleep_ms(300);
  }
  CHECK(mt_wait_log(&mm, "segment_name=lo:b, action=unmount_expired_mem_segment", 100) > 0); /* id 9 expired */
  CHECK(mt_log_count(&mm, "action=release_extent, reason=client_expired") == 0); /* and that freed no extent */
  CHECK_EQ(x_commit(c, mt_id(9), g.id, "after", (uint64_t)i * 4096, 4096), 0);
  i++;
  /* untracked again; a second lease-only extent, left without commits: reclaimed by its lease */
  REQUIRE(x_reserve(c, mt_id(9), 4096, 1 << 20, "lo:a", &g2) == 0);
  CHECK_EQ(g2.ttl_ms, 0);
  t0 = mc_tp_now_ms();
  while (mc_tp_now_ms() - t0 < 2800) {
    mt_ping(c, mt_id(1), &st);
    mc_tp_sleep_ms(200);
  }
  CHECK(mt_log_count(&mm, "reason=lease_expired") >= 2); /* both: the first had no commit for 2.8 s either */
  CHECK_EQ(x_commit(c, mt_id(9), g2.id, "late", 0, 4096), MC_LEASE_EXPIRED);
  CHECK_EQ(mt_exist(c, "late"), 0);
  CHECK_EQ(seg_used(c, "lo:a"), (uint64_t)i * 4096); /* the committed objects stay, the reservations are gone */
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* Eviction takes committed objects like any other and never a reserved piece: after eviction and a
 * forced remove of the rest, exactly the extent's reserved bytes are still used. (The existence checks
 * lease the objects eviction left, and a forced removal keeps leased bytes until the lease ends: a short
 * lease, and the used bytes are polled for.) */
static void test_evict_committed_objects(void) {
  struct mt_master mm;
  const char *extra[] = {"--eviction_high_watermark_ratio=0.5", "--eviction_ratio=0.5", "--default_kv_lease_ttl=300",
                         NULL};
  REQUIRE(start_master(&mm, extra) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_segment_rec s = mt_seg(1, "ev:1", SEG_BASE, SEG_SIZE);
  CHECK_EQ(mt_mount(c, mt_id(1), &s), 0);
  struct grant g;
  REQUIRE(x_reserve(c, mt_id(1), 4096, 1 << 20, NULL, &g) == 0);
  uint64_t committed = 0;
  for (int i = 0; i < 64; i++) {
    char key[32];
    snprintf(key, sizeof(key), "ev-fast-%d", i);
    CHECK_EQ(x_commit(c, mt_id(1), g.id, key, (uint64_t)i * 8192, 8192), 0);
    committed += 8192;
  }
  for (int i = 0; i < 40; i++) { /* 40 MiB of PutStart puts: past the 50% watermark */
    char key[32];
    snprintf(key, sizeof(key), "ev-slow-%d", i);
    mt_put(c, mt_id(1), key, 1 << 20, 1);
  }
  long t0 = mc_tp_now_ms();
  while (mc_tp_now_ms() - t0 < 3000 && mt_log_count(&mm, "[EVICT-DONE]") < 1) mc_tp_sleep_ms(50);
  CHECK(mt_log_count(&mm, "[EVICT-DONE]") >= 1);
  int gone = 0;
  for (int i = 0; i < 64; i++) {
    char key[32];
    snprintf(key, sizeof(key), "ev-fast-%d", i);
    gone += mt_exist(c, key) == 0;
  }
  fprintf(stderr, "eviction took %d of 64 extent-committed objects\n", gone);
  CHECK(gone > 0); /* they are the oldest */
  int64_t removed = 0;
  CHECK_EQ(mt_remove_many(c, NULL, 1, &removed), 0);
  for (long t1 = mc_tp_now_ms(); mc_tp_now_ms() - t1 < 5000 && seg_used(c, "ev:1") != g.len - committed;)
    mc_tp_sleep_ms(20);
  CHECK_EQ(seg_used(c, "ev:1"), g.len - committed);
  CHECK_EQ(x_release(c, mt_id(1), g.id), 0);
  CHECK_EQ(seg_used(c, "ev:1"), 0);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* The extent opcodes' decoders are total: every truncation is INVALID_PARAMS with no reply body (a
 * truncated BATCH_COMMIT_PUT commits none of its entries). */
static void test_dispatch_truncated(void) {
  struct mc_master_cfg cfg;
  char err[256];
  mc_master_cfg_defaults(&cfg);
  mc_master_cfg_finalize(&cfg, err, sizeof(err));
  struct mc_master *m = NULL;
  REQUIRE(mc_master_create(&cfg, &m) == 0);
  struct mc_segment_rec s = mt_seg(1, "fz:1", SEG_BASE, SEG_SIZE);
  CHECK_EQ(mc_master_mount(m, &s, mt_id(1)), 0);
  struct mc_put_config pc = mt_cfg(1);
  struct mc_wbuf bodies[4] = {{0}, {0}, {0}, {0}};
  uint16_t ops[4] = {MC_OP_RESERVE_EXTENT, MC_OP_COMMIT_PUT, MC_OP_RELEASE_EXTENT, MC_OP_BATCH_COMMIT_PUT};
  mc_put_uuid(&bodies[0], mt_id(1)), mc_w_u64(&bodies[0], 64), mc_w_u64(&bodies[0], 4096), mc_put_config(&bodies[0], &pc);
  mc_put_uuid(&bodies[1], mt_id(1)), mc_w_u64(&bodies[1], 1), mc_w_str(&bodies[1], "k"), mc_w_u64(&bodies[1], 0);
  mc_w_u64(&bodies[1], 64), mc_w_u8(&bodies[1], 0), mc_w_i64(&bodies[1], -1), mc_w_u8(&bodies[1], 0);
  mc_put_uuid(&bodies[2], mt_id(1)), mc_w_u64(&bodies[2], 1);
  mc_put_uuid(&bodies[3], mt_id(1)), mc_w_u64(&bodies[3], 1), mc_w_u8(&bodies[3], 0), mc_w_i64(&bodies[3], -1);
  mc_w_u8(&bodies[3], 0), mc_w_u32(&bodies[3], 2);
  mc_w_str(&bodies[3], "k1"), mc_w_u64(&bodies[3], 0), mc_w_u64(&bodies[3], 64);
  mc_w_str(&bodies[3], "k2"), mc_w_u64(&bodies[3], 64), mc_w_u64(&bodies[3], 64);
  for (int i = 0; i < 4; i++) {
    struct mc_wbuf rep = {0};
    for (size_t cut = 0; cut < bodies[i].len; cut++) {
      rep.len = 0;
      CHECK_EQ(mc_master_dispatch(m, ops[i], bodies[i].p, cut, &rep), MC_INVALID_PARAMS);
      CHECK_EQ(rep.len, 0);
    }
    for (int it = 0; it < 2000; it++) { /* random mutations never crash */
      uint8_t buf[256];
      size_t n = bodies[i].len;
      memcpy(buf, bodies[i].p, n);
      buf[rng() % n] = (uint8_t)rng();
      rep.len = 0;
      mc_master_dispatch(m, ops[i], buf, n, &rep);
    }
    mc_w_free(&rep);
    mc_w_free(&bodies[i]);
  }
  uint64_t n, bytes;
  mc_extents_stats(m, &n, &bytes);
  CHECK(n <= 2000);
  mc_master_destroy(m);
  mc_master_cfg_free(&cfg);
}

TEST_MAIN(TEST_CASE(test_carve_basic), TEST_CASE(test_carve_first_block), TEST_CASE(test_carve_random),
          TEST_CASE(test_dispatch_truncated), TEST_CASE(test_reserve_commit_basics),
          TEST_CASE(test_reserve_small_segment), TEST_CASE(test_concurrent_commits),
          TEST_CASE(test_mixed_puts_no_overlap), TEST_CASE(test_lease_expiry), TEST_CASE(test_unmount_reclaims),
          TEST_CASE(test_dead_client_extents_reclaimed), TEST_CASE(test_lease_only_extent),
          TEST_CASE(test_evict_committed_objects))
