/* mc_tlsf_reserve: rebuilding a segment's allocator from the (offset, length) ranges its holder reports
 * (docs/ha.md, "Rebuild: restart and promotion"). Random non-overlapping ranges in shuffled order, later
 * allocations never landing on reserved bytes, everything freed merging back into one block; every refusal
 * (empty, unaligned, out of bounds, overflowing, overlapping each other, overlapping allocated space) leaving
 * the allocator consistent; carving and freeing reserved blocks; a 200k-range segment, timed. */
#include "common/util.h"
#include "lib/test.h"
#include "master_core/tlsf.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { return mc_tp_xorshift(&rng_state); }

static uint64_t round_up(uint64_t len) { return (len + MC_TLSF_ALIGN - 1) / MC_TLSF_ALIGN * MC_TLSF_ALIGN; }

struct ranges {
  uint64_t *off, *len;
  struct mc_tlsf_block **out;
  enum mc_tlsf_refusal *why;
  size_t n;
  uint64_t bytes; /* sum of rounded lengths */
};

/* Up to max ranges laid out left to right over [0, cap): aligned starts, lengths 1..max_len (often
 * unaligned), gaps 0..max_gap units (0 often: neighbours touch); then shuffled. */
static struct ranges gen_ranges(uint64_t cap, size_t max, uint64_t max_len, uint64_t max_gap) {
  struct ranges r = {malloc(max * 8), malloc(max * 8), calloc(max, sizeof(void *)), calloc(max, sizeof(enum mc_tlsf_refusal)), 0, 0};
  uint64_t at = 0;
  while (r.n < max) {
    uint64_t gap = rng() % 3 ? 0 : rng() % (max_gap + 1) * MC_TLSF_ALIGN, len = 1 + rng() % max_len;
    if (at + gap >= cap || len > cap - at - gap) break;
    r.off[r.n] = at + gap;
    r.len[r.n++] = len;
    at += gap + round_up(len);
    r.bytes += round_up(len);
  }
  for (size_t i = r.n; i > 1; i--) {
    size_t j = rng() % i;
    uint64_t o = r.off[i - 1], l = r.len[i - 1];
    r.off[i - 1] = r.off[j], r.len[i - 1] = r.len[j];
    r.off[j] = o, r.len[j] = l;
  }
  return r;
}

static void ranges_free(struct ranges *r) {
  free(r->off);
  free(r->len);
  free(r->out);
  free(r->why);
}

/* Every range reserved at exactly its offset with its rounded length. */
static void check_all_reserved(const struct ranges *r) {
  for (size_t i = 0; i < r->n; i++) {
    uint64_t o = 0, s = 0;
    CHECK_EQ(r->why[i], MC_TLSF_RESERVED);
    if (!r->out[i]) continue;
    mc_tlsf_block_range(r->out[i], &o, &s);
    CHECK_EQ(o, r->off[i]);
    CHECK_EQ(s, round_up(r->len[i]));
    CHECK(!mc_tlsf_block_is_free(r->out[i]));
  }
}

/* Frees the n blocks (NULLs skipped) in random order; the allocator must be one free block again. */
static void free_all_expect_empty(struct mc_tlsf *t, struct mc_tlsf_block **b, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = rng() % i;
    struct mc_tlsf_block *x = b[i - 1];
    b[i - 1] = b[j], b[j] = x;
  }
  for (size_t i = 0; i < n; i++) mc_tlsf_free(t, b[i]);
  CHECK_EQ(mc_tlsf_used(t), 0);
  CHECK_EQ(mc_tlsf_largest_free(t), mc_tlsf_capacity(t));
  CHECK_EQ(mc_tlsf_check(t), 0);
}

/* One range through mc_tlsf_reserve; the block (or NULL) and the reason in *why. */
static struct mc_tlsf_block *reserve1(struct mc_tlsf *t, uint64_t off, uint64_t len, enum mc_tlsf_refusal *why) {
  struct mc_tlsf_block *b = (void *)1;
  size_t got = mc_tlsf_reserve(t, &off, &len, 1, &b, why);
  CHECK_EQ(got, b != NULL);
  return b;
}

static void mark(uint8_t *bits, uint64_t off, uint64_t size, int *clash) {
  for (uint64_t u = off / MC_TLSF_ALIGN; u < (off + size) / MC_TLSF_ALIGN; u++) {
    if (bits[u / 8] & (1u << (u % 8))) *clash = 1;
    bits[u / 8] |= (uint8_t)(1u << (u % 8));
  }
}

static void test_shuffled_then_alloc_never_overlaps(void) {
  const uint64_t cap = 64ull << 20;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  struct ranges r = gen_ranges(cap, 20000, 4000, 64);
  REQUIRE(r.n > 1000);
  CHECK_EQ(mc_tlsf_reserve(t, r.off, r.len, r.n, r.out, r.why), r.n);
  check_all_reserved(&r);
  CHECK_EQ(mc_tlsf_used(t), r.bytes);
  CHECK_EQ(mc_tlsf_check(t), 0);
  uint8_t *bits = calloc(cap / MC_TLSF_ALIGN / 8, 1);
  int clash = 0;
  for (size_t i = 0; i < r.n; i++) mark(bits, r.off[i], round_up(r.len[i]), &clash);
  CHECK(!clash);
  size_t na = r.n, max = r.n + 200000;
  struct mc_tlsf_block **a = calloc(max, sizeof(*a));
  memcpy(a, r.out, r.n * sizeof(*a)); /* the reserved blocks first, then every allocation */
  uint64_t off, size, failures = 0;
  while (na < max && failures < 64) { /* fill every hole the reservations left */
    if (!(a[na] = mc_tlsf_alloc(t, 1 + rng() % 2048, &off))) { failures++; continue; }
    mc_tlsf_block_range(a[na++], &off, &size);
    mark(bits, off, size, &clash);
  }
  CHECK(!clash);
  CHECK_EQ(mc_tlsf_check(t), 0);
  CHECK(mc_tlsf_used(t) > r.bytes);
  fprintf(stderr, "  %zu ranges reserved (%" PRIu64 " bytes), %zu allocations after, no overlap\n", r.n, r.bytes,
          na - r.n);
  free_all_expect_empty(t, a, na);
  free(a);
  free(bits);
  mc_tlsf_destroy(t);
  ranges_free(&r);
}

/* The brief's order: reserved space first, then frees of the reserved blocks only. */
static void test_free_reserved_merges_back(void) {
  const uint64_t cap = 8ull << 20;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  struct ranges r = gen_ranges(cap, 5000, 3000, 8);
  CHECK_EQ(mc_tlsf_reserve(t, r.off, r.len, r.n, r.out, r.why), r.n);
  check_all_reserved(&r);
  free_all_expect_empty(t, r.out, r.n);
  uint64_t off = 1;
  struct mc_tlsf_block *all = mc_tlsf_alloc(t, cap, &off); /* one block of full capacity */
  CHECK(all && off == 0);
  mc_tlsf_free(t, all);
  mc_tlsf_destroy(t);
  ranges_free(&r);
}

/* A holder's upload in several calls (batches), with allocations between them. */
static void test_batches_with_allocations_between(void) {
  const uint64_t cap = 16ull << 20;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  struct ranges r = gen_ranges(cap / 2, 4000, 2000, 16);
  size_t half = r.n / 2;
  CHECK_EQ(mc_tlsf_reserve(t, r.off, r.len, half, r.out, r.why), half);
  uint64_t off;
  uint64_t top = 0;
  for (size_t i = 0; i < r.n; i++)
    if (r.off[i] + r.len[i] > top) top = r.off[i] + r.len[i];
  struct mc_tlsf_block *late = mc_tlsf_alloc(t, cap / 4, &off); /* the holes between ranges are small */
  CHECK(late && off >= top);
  CHECK_EQ(mc_tlsf_reserve(t, r.off + half, r.len + half, r.n - half, r.out + half, r.why + half), r.n - half);
  check_all_reserved(&r);
  CHECK_EQ(mc_tlsf_used(t), r.bytes + cap / 4);
  CHECK_EQ(mc_tlsf_check(t), 0);
  mc_tlsf_free(t, late);
  free_all_expect_empty(t, r.out, r.n);
  mc_tlsf_destroy(t);
  ranges_free(&r);
}

static void test_refuse_empty_unaligned_bounds(void) {
  struct mc_tlsf *t = mc_tlsf_create(1003); /* capacity 1000: the last 3 bytes are not managed */
  enum mc_tlsf_refusal why;
  CHECK_EQ(mc_tlsf_capacity(t), 1000);
  CHECK(!reserve1(t, 0, 0, &why) && why == MC_TLSF_REFUSE_EMPTY);
  CHECK(!reserve1(t, 1000, 0, &why) && why == MC_TLSF_REFUSE_EMPTY); /* empty before bounds */
  CHECK(!reserve1(t, 4, 8, &why) && why == MC_TLSF_REFUSE_UNALIGNED);
  CHECK(!reserve1(t, 999, 1, &why) && why == MC_TLSF_REFUSE_UNALIGNED);
  CHECK(!reserve1(t, 1000, 1, &why) && why == MC_TLSF_REFUSE_BOUNDS);
  CHECK(!reserve1(t, 992, 9, &why) && why == MC_TLSF_REFUSE_BOUNDS);
  CHECK(!reserve1(t, 0, 1001, &why) && why == MC_TLSF_REFUSE_BOUNDS);
  CHECK(!reserve1(t, 8, UINT64_MAX, &why) && why == MC_TLSF_REFUSE_BOUNDS);      /* off + len overflows */
  CHECK(!reserve1(t, UINT64_MAX - 7, 16, &why) && why == MC_TLSF_REFUSE_BOUNDS); /* aligned, far out */
  CHECK_EQ(mc_tlsf_used(t), 0);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *last = reserve1(t, 992, 8, &why), *first = reserve1(t, 0, 5, &why);
  CHECK(last && first && why == MC_TLSF_RESERVED);
  CHECK_EQ(mc_tlsf_used(t), 16); /* 5 bytes take one 8-byte unit, as mc_tlsf_alloc rounds */
  struct mc_tlsf_block *b[2] = {first, last};
  free_all_expect_empty(t, b, 2);
  mc_tlsf_destroy(t);
}

static void test_refuse_overlapping_each_other(void) {
  struct mc_tlsf *t = mc_tlsf_create(1 << 20);
  /* 0,1: partial overlap; 2,3: identical; 4 inside 5; 7 is [4096, 4101), rounded [4096, 4104), and 6
   * starts at 4104: they touch, both kept; 8 alone; 9 holds 10 and 11 (which only touch each other). */
  uint64_t off[] = {0, 64, 1024, 1024, 2056, 2048, 4104, 4096, 8192, 16384, 16392, 16400};
  uint64_t len[] = {100, 100, 8, 8, 8, 64, 8, 5, 1, 64, 8, 8};
  enum mc_tlsf_refusal want[] = {
      MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP,
      MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP, MC_TLSF_RESERVED,       MC_TLSF_RESERVED,
      MC_TLSF_RESERVED,       MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_OVERLAP};
  size_t n = sizeof(off) / sizeof(off[0]);
  struct mc_tlsf_block *out[12];
  enum mc_tlsf_refusal why[12];
  CHECK_EQ(mc_tlsf_reserve(t, off, len, n, out, why), 3);
  for (size_t i = 0; i < n; i++) {
    CHECK_EQ(why[i], want[i]);
    CHECK_EQ(out[i] != NULL, want[i] == MC_TLSF_RESERVED);
  }
  CHECK_EQ(mc_tlsf_used(t), 8 + 8 + 8);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *kept[] = {out[6], out[7], out[8]};
  free_all_expect_empty(t, kept, 3);
  mc_tlsf_destroy(t);
}

static void test_refuse_taken(void) {
  struct mc_tlsf *t = mc_tlsf_create(1 << 20);
  uint64_t a_off, b_off;
  struct mc_tlsf_block *a = mc_tlsf_alloc(t, 4096, &a_off), *b = mc_tlsf_alloc(t, 4096, &b_off);
  REQUIRE(a && b && a_off == 0 && b_off == 4096);
  mc_tlsf_free(t, a); /* [0, 4096) free, [4096, 8192) allocated, the rest free */
  enum mc_tlsf_refusal why;
  CHECK(!reserve1(t, 4096, 8, &why) && why == MC_TLSF_REFUSE_TAKEN);    /* the start of b */
  CHECK(!reserve1(t, 6000, 100, &why) && why == MC_TLSF_REFUSE_TAKEN);  /* inside b */
  CHECK(!reserve1(t, 4000, 200, &why) && why == MC_TLSF_REFUSE_TAKEN);  /* free, then b */
  CHECK(!reserve1(t, 8184, 16, &why) && why == MC_TLSF_REFUSE_TAKEN);   /* b, then free */
  CHECK(!reserve1(t, 0, 1 << 20, &why) && why == MC_TLSF_REFUSE_TAKEN); /* around b */
  CHECK_EQ(mc_tlsf_used(t), 4096);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *x = reserve1(t, 4088, 8, &why), *y = reserve1(t, 8192, 8, &why); /* touching b */
  CHECK(x && y);
  CHECK(!reserve1(t, 4088, 8, &why) && why == MC_TLSF_REFUSE_TAKEN); /* the same range again */
  /* a mixed batch: refusals of every kind around valid ranges, in no order */
  uint64_t off[] = {9000, 100000, 4090, 12, 8200, 1 << 20, 4096, 100000, 50000};
  uint64_t len[] = {0, 16, 8, 8, 8, 8, 1, 16, 1};
  struct mc_tlsf_block *out[9];
  enum mc_tlsf_refusal w[9];
  CHECK_EQ(mc_tlsf_reserve(t, off, len, 9, out, w), 2);
  enum mc_tlsf_refusal want[] = {MC_TLSF_REFUSE_EMPTY,  MC_TLSF_REFUSE_OVERLAP, MC_TLSF_REFUSE_UNALIGNED,
                                 MC_TLSF_REFUSE_UNALIGNED, MC_TLSF_RESERVED,     MC_TLSF_REFUSE_BOUNDS,
                                 MC_TLSF_REFUSE_TAKEN,  MC_TLSF_REFUSE_OVERLAP, MC_TLSF_RESERVED};
  for (int i = 0; i < 9; i++) CHECK_EQ(w[i], want[i]);
  CHECK_EQ(mc_tlsf_used(t), 4096 + 8 + 8 + 8 + 8);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *all[] = {b, x, y, out[4], out[8]};
  free_all_expect_empty(t, all, 5);
  CHECK_EQ(mc_tlsf_reserve(t, off, len, 0, out, NULL), 0); /* n == 0; why may be NULL */
  mc_tlsf_destroy(t);
}

/* A reserved block is an ordinary allocated block: carve splits it, frees merge it back exactly. */
static void test_carve_reserved(void) {
  struct mc_tlsf *t = mc_tlsf_create(1 << 20);
  enum mc_tlsf_refusal why;
  struct mc_tlsf_block *e = reserve1(t, 65536, 65536, &why), *h, *tl;
  REQUIRE(e);
  struct mc_tlsf_block *mid = mc_tlsf_carve(t, e, 65536 + 4096, 100, &h, &tl);
  REQUIRE(mid && h == e && tl);
  uint64_t o, s;
  mc_tlsf_block_range(mid, &o, &s);
  CHECK(o == 65536 + 4096 && s == 104);
  CHECK_EQ(mc_tlsf_used(t), 65536);
  CHECK_EQ(mc_tlsf_check(t), 0);
  struct mc_tlsf_block *all[] = {h, mid, tl};
  free_all_expect_empty(t, all, 3);
  mc_tlsf_destroy(t);
}

static void test_large_segment_timed(void) {
  const uint64_t cap = 64ull << 30;
  struct mc_tlsf *t = mc_tlsf_create(cap);
  struct ranges r = gen_ranges(cap, 200000, 300 << 10, 8192);
  REQUIRE(r.n == 200000);
  double t0 = (double)mc_now_ns() / 1e9;
  size_t got = mc_tlsf_reserve(t, r.off, r.len, r.n, r.out, r.why);
  double t1 = (double)mc_now_ns() / 1e9;
  CHECK_EQ(got, r.n);
  CHECK_EQ(mc_tlsf_used(t), r.bytes);
  CHECK_EQ(mc_tlsf_check(t), 0);
  check_all_reserved(&r);
  double t2 = (double)mc_now_ns() / 1e9;
  free_all_expect_empty(t, r.out, r.n);
  double t3 = (double)mc_now_ns() / 1e9;
  fprintf(stderr, "  200000 ranges over 64 GiB (%.1f GiB used): reserve %.1f ms, free all %.1f ms\n",
          (double)r.bytes / (1ull << 30), (t1 - t0) * 1e3, (t3 - t2) * 1e3);
  CHECK(t1 - t0 < 5.0); /* loose: a loaded VM; the expected time is tens of ms */
  mc_tlsf_destroy(t);
  ranges_free(&r);
}

TEST_MAIN(TEST_CASE(test_shuffled_then_alloc_never_overlaps), TEST_CASE(test_free_reserved_merges_back),
          TEST_CASE(test_batches_with_allocations_between), TEST_CASE(test_refuse_empty_unaligned_bounds),
          TEST_CASE(test_refuse_overlapping_each_other), TEST_CASE(test_refuse_taken),
          TEST_CASE(test_carve_reserved), TEST_CASE(test_large_segment_timed))
