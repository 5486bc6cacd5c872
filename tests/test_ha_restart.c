/* A lone master SIGKILLed and started again with the same command line loses no completed object whose
 * holder is alive (docs/ha.md, "Rebuild"): the holder keeps the index of its segment from the master's
 * records, remounts when the new master answers NEED_REMOUNT, and uploads the index; the objects come back
 * with the same bytes, removed ones stay removed, and it holds over a second restart with puts in between.
 * Real master binary, real store clients, real TCP. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "lib/http.h"
#include "test_store_harness.c"

#define NKEYS 120
#define NREMOVED 10

static uint64_t size_of(int i) { return (uint64_t)(4 + (i * 37) % 250) * KiB; }

static void key_of(char *k, size_t n, const char *tag, int i) { snprintf(k, n, "ha-%s-%03d", tag, i); }

static int all_there(mooncake_store_t s, const char *tag, int from, int to) {
  char k[64];
  for (int i = from; i < to; i++) {
    key_of(k, sizeof(k), tag, i);
    if (mooncake_store_is_exist(s, k) != 1) return 0;
  }
  return 1;
}

/* Waits until every key of tag in [from, to) exists; the milliseconds it took, or -1 after limit_ms. */
static long wait_back(mooncake_store_t s, const char *tag, int from, int to, long limit_ms) {
  long t0 = mc_tp_now_ms();
  while (!all_there(s, tag, from, to)) {
    if (mc_tp_now_ms() - t0 > limit_ms) return -1;
    usleep(50 * 1000);
  }
  return mc_tp_now_ms() - t0;
}

static int verify_keys(mooncake_store_t s, const char *tag, int from, int to, unsigned seed) {
  char k[64];
  uint8_t *buf = malloc(256 * KiB);
  int bad = 0;
  for (int i = from; i < to; i++) {
    key_of(k, sizeof(k), tag, i);
    int64_t n = mooncake_store_get_into(s, k, buf, 256 * KiB);
    if (n != (int64_t)size_of(i) || !verify(buf, size_of(i), seed + (unsigned)i)) bad++;
  }
  free(buf);
  return bad;
}

static int put_keys(mooncake_store_t s, const char *tag, int from, int to, unsigned seed) {
  char k[64];
  uint8_t *buf = malloc(256 * KiB);
  int bad = 0;
  for (int i = from; i < to; i++) {
    key_of(k, sizeof(k), tag, i);
    fill(buf, size_of(i), seed + (unsigned)i);
    bad += mooncake_store_put(s, k, buf, size_of(i), NULL) != 0;
  }
  free(buf);
  return bad;
}

/* The holder has every entry it should (and the next poll acknowledges them). */
static int wait_indexed(mooncake_store_t holder, size_t want) {
  for (int i = 0; i < 200 && mc_hindex_count((struct mc_store *)holder) != want; i++) usleep(10 * 1000);
  usleep(300 * 1000); /* one poll more: acknowledged */
  return mc_hindex_count((struct mc_store *)holder) == want;
}

static void test_restart_keeps_objects(void) {
  unsetenv("MC_STORE_HOLDER_INDEX"); /* the default: on (docs/ha.md) */
  struct master M;
  REQUIRE(master_start(&M, NULL) == 0);
  mooncake_store_t holder = client_new(&M, 64 * MiB, 4 * MiB), writer = client_new(&M, 0, 4 * MiB);
  REQUIRE(holder && writer);
  CHECK_EQ(put_keys(writer, "a", 0, NKEYS, 1), 0);
  char k[64];
  for (int i = 0; i < NREMOVED; i++) {
    key_of(k, sizeof(k), "a", i);
    CHECK_EQ(mooncake_store_remove(writer, k, 1), 0);
  }
  CHECK(wait_indexed(holder, NKEYS - NREMOVED));

  /* SIGKILL, same command line */
  REQUIRE(master_restart(&M, NULL) == 0);
  long ms = wait_back(writer, "a", NREMOVED, NKEYS, 15000);
  fprintf(stderr, "objects back %ld ms after the master restarted\n", ms);
  CHECK(ms >= 0 && ms <= 10000); /* (design: within about 2 s; generous on a loaded machine) */
  CHECK_EQ(verify_keys(writer, "a", NREMOVED, NKEYS, 1), 0);
  for (int i = 0; i < NREMOVED; i++) { /* removed before the crash: never back */
    key_of(k, sizeof(k), "a", i);
    CHECK_EQ(mooncake_store_is_exist(writer, k), 0);
  }

  /* new puts after the restart (a remounted segment takes new allocations after a quiet period,
   * docs/master.md "Write extents"), and a second restart: both generations survive */
  long t0 = mc_tp_now_ms();
  while (put_keys(writer, "b", 0, 1, 7) && mc_tp_now_ms() - t0 < 10000) usleep(100 * 1000);
  fprintf(stderr, "first put accepted %ld ms after the objects were back\n", mc_tp_now_ms() - t0);
  struct th_resp mr = {0};
  CHECK_EQ(th_get(M.metrics, "/metrics", &mr), 200);
  /* the puts refused while the only segment was quiet did not ask for an eviction (the segment is not full) */
  CHECK_EQ(th_prom_value(mr.body ? mr.body : "", "master_attempted_evictions_total"), 0.0);
  th_free(&mr);
  CHECK_EQ(put_keys(writer, "b", 0, 40, 7), 0);
  CHECK(wait_indexed(holder, NKEYS - NREMOVED + 40));
  REQUIRE(master_restart(&M, NULL) == 0);
  CHECK(wait_back(writer, "a", NREMOVED, NKEYS, 15000) >= 0);
  CHECK(wait_back(writer, "b", 0, 40, 15000) >= 0);
  CHECK_EQ(verify_keys(writer, "a", NREMOVED, NKEYS, 1), 0);
  CHECK_EQ(verify_keys(writer, "b", 0, 40, 7), 0);

  /* the rebuilt space is taken: new puts land elsewhere and every value stays intact */
  t0 = mc_tp_now_ms();
  while (put_keys(writer, "c", 0, 1, 9) && mc_tp_now_ms() - t0 < 10000) usleep(100 * 1000);
  CHECK_EQ(put_keys(writer, "c", 0, 40, 9), 0);
  CHECK_EQ(verify_keys(writer, "a", NREMOVED, NKEYS, 1), 0);
  CHECK_EQ(verify_keys(writer, "c", 0, 40, 9), 0);

  mooncake_store_destroy(writer);
  mooncake_store_destroy(holder);
  master_stop(&M);
}

/* A put whose record no holder has yet survives a master crash through the writer's witness (docs/ha.md,
 * "Witnesses"): the holder (another process) is frozen after its last poll was answered, so the records of
 * the puts made meanwhile stay queued at the master, which is then SIGKILLed; the new master learns the
 * objects from the writer (RECOMMIT) once the thawed holder has remounted and uploaded its index. */
static void test_witness_restores_unindexed_puts(void) {
  unsetenv("MC_STORE_HOLDER_INDEX");
  struct master M;
  REQUIRE(master_start(&M, NULL) == 0);
  struct peer holder;
  REQUIRE(peer_start(&holder, &M, 64 * MiB, 1 * MiB, NULL) == 0);
  mooncake_store_t writer = client_new(&M, 0, 4 * MiB);
  REQUIRE(writer);
  CHECK_EQ(put_keys(writer, "w", 0, 5, 3), 0); /* indexed by the holder: come back by its upload */
  usleep(500 * 1000);
  kill(holder.pid, SIGSTOP);
  usleep(600 * 1000); /* its outstanding poll is answered (empty) and not renewed */
  CHECK_EQ(put_keys(writer, "w", 5, 25, 3), 0); /* records queued for a holder that does not poll */
  struct mc_witnesses *wit = ((struct mc_store *)writer)->master.cli->wit;
  CHECK(mc_witness_count(wit) >= 20); /* nothing durable: every one of them is witnessed */
  REQUIRE(master_restart(&M, NULL) == 0);
  kill(holder.pid, SIGCONT);
  long ms = wait_back(writer, "w", 0, 25, 15000);
  fprintf(stderr, "unindexed puts back %ld ms after the restart\n", ms);
  CHECK(ms >= 0);
  CHECK_EQ(verify_keys(writer, "w", 0, 25, 3), 0);
  for (int i = 0; i < 100 && mc_witness_count(wit); i++) usleep(50 * 1000);
  CHECK_EQ(mc_witness_count(wit), 0); /* installed, then durable at the new master */
  CHECK_EQ(mc_witness_given_up(wit), 0);
  peer_quit(&holder);
  mooncake_store_destroy(writer);
  master_stop(&M);
}

static int absent(mooncake_store_t s, const char *tag, int from, int to) {
  char k[64];
  int n = 0;
  for (int i = from; i < to; i++) {
    key_of(k, sizeof(k), tag, i);
    n += mooncake_store_is_exist(s, k) == 0;
  }
  return n == to - from;
}

/* A removal answered before a master crash stays a removal although the holder never heard of it
 * (docs/ha.md, "Witnesses"): the holder is frozen, so it uploads entries for objects that were removed
 * meanwhile (single, batch and pattern removals); the removers' DROP witnesses remove them again at the new
 * master. Puts and removals of the same keys by two different clients, all unindexed, end removed whatever
 * order the two hand their witnesses over in. */
static void test_witness_keeps_removals(void) {
  unsetenv("MC_STORE_HOLDER_INDEX");
  struct master M;
  REQUIRE(master_start(&M, NULL) == 0);
  struct peer holder;
  REQUIRE(peer_start(&holder, &M, 64 * MiB, 1 * MiB, NULL) == 0);
  mooncake_store_t writer = client_new(&M, 0, 4 * MiB), remover = client_new(&M, 0, 4 * MiB);
  REQUIRE(writer && remover);
  CHECK_EQ(put_keys(writer, "r", 0, 12, 5), 0); /* indexed by the holder */
  usleep(500 * 1000);
  kill(holder.pid, SIGSTOP);
  usleep(600 * 1000); /* its outstanding poll is answered (empty) and not renewed */
  char k[5][64];
  const char *kp[3] = {k[2], k[3], k[4]};
  for (int i = 0; i < 5; i++) key_of(k[i], sizeof(k[i]), "r", i);
  CHECK_EQ(mooncake_store_remove(writer, k[0], 1), 0);
  CHECK_EQ(mooncake_store_remove(writer, k[1], 1), 0);
  int res[3] = {-1, -1, -1};
  CHECK_EQ(mc_store_batch_remove(writer, kp, 3, 1, res), 0);
  CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0);
  CHECK_EQ(mooncake_store_remove_by_regex(remover, "^ha-r-00[56]$", 1), 2);
  CHECK_EQ(put_keys(writer, "x", 0, 3, 6), 0); /* put by one client, removed by another: none indexed */
  char x[64];
  for (int i = 0; i < 2; i++) {
    key_of(x, sizeof(x), "x", i);
    CHECK_EQ(mooncake_store_remove(remover, x, 1), 0);
  }
  struct mc_witnesses *ww = ((struct mc_store *)writer)->master.cli->wit,
                      *rw = ((struct mc_store *)remover)->master.cli->wit;
  CHECK(mc_witness_count(ww) >= 8); /* 5 removals, 3 puts */
  CHECK(mc_witness_count(rw) >= 4); /* 2 removals by pattern, 2 by key */
  REQUIRE(master_restart(&M, NULL) == 0);
  kill(holder.pid, SIGCONT);
  CHECK(wait_back(writer, "r", 7, 12, 15000) >= 0);
  CHECK(wait_back(writer, "x", 2, 3, 15000) >= 0);
  for (int i = 0; i < 100 && (mc_witness_count(ww) || mc_witness_count(rw)); i++) usleep(50 * 1000);
  CHECK_EQ(mc_witness_count(ww), 0);
  CHECK_EQ(mc_witness_count(rw), 0);
  CHECK(absent(writer, "r", 0, 7));
  CHECK(absent(writer, "x", 0, 2));
  CHECK_EQ(verify_keys(writer, "r", 7, 12, 5), 0);
  CHECK_EQ(verify_keys(writer, "x", 2, 3, 6), 0);
  CHECK_EQ(mc_witness_given_up(ww), 0);
  CHECK_EQ(mc_witness_given_up(rw), 0);
  peer_quit(&holder);
  mooncake_store_destroy(remover);
  mooncake_store_destroy(writer);
  master_stop(&M);
}

/* The base address of the mounted segment whose id is `id` (from the master's /get_segments_detail), or 0 when
 * it is not listed; *size gets its size. */
static uint64_t segment_base(int admin, const char *id, uint64_t *size) {
  struct th_resp r;
  uint64_t base = 0;
  char pat[80];
  snprintf(pat, sizeof(pat), "\"segment_id\":\"%s\"", id);
  if (th_get(admin, "/get_segments_detail", &r) == 200) {
    const char *at = strstr(r.body, pat), *end = at ? strchr(at, '}') : NULL;
    const char *b = at ? strstr(at, "\"base_address\":\"0x") : NULL, *z = at ? strstr(at, "\"size_bytes\":") : NULL;
    if (b && z && b < end && z < end) {
      base = strtoull(b + strlen("\"base_address\":\"0x"), NULL, 16);
      *size = strtoull(z + strlen("\"size_bytes\":"), NULL, 10);
    }
  }
  th_free(&r);
  return base;
}

/* How many of the keys of tag in [from, to) have their (one) replica inside [base, base + size) (admin
 * /query_key: no lease). */
static int on_segment(int admin, const char *tag, int from, int to, uint64_t base, uint64_t size) {
  int n = 0;
  for (int i = from; i < to; i++) {
    char k[64], path[128];
    key_of(k, sizeof(k), tag, i);
    snprintf(path, sizeof(path), "/query_key?key=%s", k);
    struct th_resp r;
    const char *a = th_get(admin, path, &r) == 200 ? strstr(r.body, "\"buffer_address_\":") : NULL;
    uint64_t addr = a ? strtoull(a + strlen("\"buffer_address_\":"), NULL, 10) : 0;
    n += addr >= base && addr - base < size;
    th_free(&r);
  }
  return n;
}

/* Extra segments (docs/store-client.md, "Extra segments") are remounted with the main one after a restart and
 * their objects come back from the holder index: the holder's main segment (1 MiB) is filled first by one object, so the
 * puts land on the extra segment A; B was mounted and unmounted before, and stays unmounted. */
static void test_restart_remounts_extra_segments(void) {
  struct master M;
  const char *const flags[] = {"--eviction_high_watermark_ratio=1.0", NULL}; /* the full main segment stays full */
  REQUIRE(master_start(&M, flags) == 0);
  mooncake_store_t holder = client_new(&M, 1 * MiB, 4 * MiB), writer = client_new(&M, 0, 4 * MiB);
  REQUIRE(holder && writer);
  uint8_t *buf = malloc(1 * MiB);
  fill(buf, 1 * MiB, 3);
  REQUIRE(mooncake_store_put(writer, "xseg-filler", buf, 1 * MiB, NULL) == 0); /* the main segment is full */
  char a[64], b[64];
  REQUIRE(mc_store_mount_extra_segment(holder, NULL, 0, 16 * MiB, NULL, a, sizeof(a)) == 0);
  REQUIRE(mc_store_mount_extra_segment(holder, NULL, 0, 4 * MiB, NULL, b, sizeof(b)) == 0);
  CHECK_EQ(mc_store_unmount_extra_segment(holder, b, 0, 0), 0);
  uint64_t asize = 0, bsize = 0, abase = segment_base(M.metrics, a, &asize);
  REQUIRE(abase && asize == 16 * MiB);
  CHECK_EQ(segment_base(M.metrics, b, &bsize), 0); /* unmounted */
  enum { N = 20 };
  CHECK_EQ(put_keys(writer, "xseg", 0, N, 77), 0); /* (the main segment has no room left) */
  CHECK_EQ(on_segment(M.metrics, "xseg", 0, N, abase, asize), N);
  mc_tp_sleep_ms(200); /* the holder has the records (the witnesses would cover the rest) */

  REQUIRE(master_restart(&M, flags) == 0);
  long ms = wait_back(writer, "xseg", 0, N, 15000);
  fprintf(stderr, "extra segment's objects back %ld ms after the restart\n", ms);
  CHECK(ms >= 0 && ms <= 7000); /* remount bound 5 s after the master is back, plus slack for a loaded machine */
  CHECK_EQ(verify_keys(writer, "xseg", 0, N, 77), 0);
  uint64_t asize2 = 0;
  CHECK_EQ(segment_base(M.metrics, a, &asize2), abase); /* the same segment, remounted */
  CHECK_EQ(on_segment(M.metrics, "xseg", 0, N, abase, asize), N);
  CHECK_EQ(segment_base(M.metrics, b, &bsize), 0); /* still unmounted */
  CHECK_EQ(mooncake_store_get_into(writer, "xseg-filler", buf, 1 * MiB), (int64_t)(1 * MiB));
  CHECK(verify(buf, 1 * MiB, 3));
  /* an extra segment unmounted after the restart is gone from the master, its objects with it */
  CHECK_EQ(mc_store_unmount_extra_segment(holder, a, 0, 1), 0);
  CHECK_EQ(segment_base(M.metrics, a, &asize2), 0);
  CHECK_EQ(mooncake_store_is_exist(writer, "ha-xseg-000"), 0);
  free(buf);
  mooncake_store_destroy(writer);
  mooncake_store_destroy(holder);
  master_stop(&M);
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  static const struct mc_test_case cases[] = {TEST_CASE(test_restart_keeps_objects),
                                              TEST_CASE(test_witness_restores_unindexed_puts),
                                              TEST_CASE(test_witness_keeps_removals),
                                              TEST_CASE(test_restart_remounts_extra_segments)};
  return run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
