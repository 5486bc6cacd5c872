/* Write extents (docs/master.md "Write extents"): the TLSF carve operation (splitting an allocated block
 * into up to three allocated blocks) under mc_tlsf_check, and the master's RESERVE_EXTENT / COMMIT_PUT /
 * RELEASE_EXTENT RPCs against real mooncake_master processes: commit semantics (existing key -> -705 and
 * the value kept, concurrent commits of one key), remove/evict of committed objects freeing exactly
 * their bytes, release, lease expiry, unmount and dead-client reclaim, and mixed extent/PutStart puts. */
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "master/master.h"
#include "master/master_int.h"
#include "master/mconfig.h"
#include "master/tlsf.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

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

TEST_MAIN(TEST_CASE(test_carve_basic), TEST_CASE(test_carve_first_block), TEST_CASE(test_carve_random))
