/* Black-box eviction tests (docs/master.md, "Eviction"): counts by objects, oldest lease first, the ratio formulas,
 * soft-pinned objects only in pass 2 (and only when allowed), hard pins and leases never, watermark- and
 * failure-triggered runs, and the operator log lines. */
#include "lib/master_client.h"
#include "lib/test.h"

#define BASE 0x7f0000000000ull
#define MIB (1ull << 20)

struct env {
  struct mt_master mm;
  struct mc_mrpc_client *c;
};

static int env_start(struct env *e, const char *const extra[]) {
  if (mt_master_start(&e->mm, extra)) return -1;
  e->c = mt_connect(e->mm.port);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  return mt_mount(e->c, mt_id(1), &s);
}

static void env_stop(struct env *e) {
  mc_mrpc_client_free(e->c);
  CHECK_EQ(mt_master_stop(&e->mm), 0);
}

static void key_of(char *buf, size_t len, const char *prefix, int i) { snprintf(buf, len, "%s%04d", prefix, i); }

/* Puts n objects "<prefix>NNNN" one after the other (so their LRU stamps are ordered). */
static int put_n(struct env *e, const char *prefix, int n, uint64_t size, const struct mc_put_config *cfg) {
  for (int i = 0; i < n; i++) {
    char key[64];
    key_of(key, sizeof(key), prefix, i);
    if (mt_put_start(e->c, mt_id(1), key, size, cfg, NULL, NULL) || mt_put_end(e->c, mt_id(1), key)) return -1;
  }
  return 0;
}

/* Which of "<prefix>0000".."<prefix>(n-1)" still exist (batch exist). Returns how many. */
static int present(struct env *e, const char *prefix, int n, int32_t *out) {
  char (*names)[64] = malloc(sizeof(*names) * n);
  const char **keys = malloc(sizeof(*keys) * n);
  for (int i = 0; i < n; i++) {
    key_of(names[i], 64, prefix, i);
    keys[i] = names[i];
  }
  int count = 0;
  if (mt_batch_exist(e->c, keys, (uint32_t)n, out) == 0)
    for (int i = 0; i < n; i++) count += out[i] == 1;
  free(keys);
  free(names);
  return count;
}

/* A put that cannot fit: -200 and the need-eviction flag; then waits for the run's result line. */
static int trigger_and_wait(struct env *e, const char *result_line) {
  int rc = mt_put(e->c, mt_id(1), "too-big", MIB - 1024, 1);
  return rc == MC_NO_AVAILABLE_HANDLE && mt_wait_log(&e->mm, result_line, 3000);
}

static void test_exactly_the_oldest_5_percent(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0); /* eviction_ratio 0.05 (default) */
  struct mc_put_config cfg = mt_cfg(1);
  REQUIRE(put_n(&e, "o", 400, 1024, &cfg) == 0);
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-"), 0); /* 39% used: below the watermark */
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=20, eviction_base=400"));
  mc_tp_sleep_ms(100); /* a second run would show here */
  int32_t st[400];
  CHECK_EQ(present(&e, "o", 400, st), 380);
  for (int i = 0; i < 400; i++) CHECK_EQ(st[i], i >= 20); /* exactly the 20 oldest went */
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-TRIGGER] memory_ratio="), 1);
  CHECK_EQ(mt_log_count(&e.mm, "need_mem_eviction=1 eviction_ratio=0.05"), 1);
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-DONE] BatchEvict execution completed."), 1);
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-RESULT]"), 1);
  env_stop(&e);
}

/* The same rule with tens of thousands of candidates, where a run orders only the oldest it needs
 * (a selection, not a sort of every candidate): 40 000 objects in a 64 MiB segment, put in batches in
 * key order; the run takes exactly the 2000 oldest. */
static void test_exactly_the_oldest_among_many(void) {
  struct env e;
  REQUIRE(mt_master_start(&e.mm, NULL) == 0);
  e.c = mt_connect(e.mm.port);
  struct mc_segment_rec seg = mt_seg(1, "10.0.0.1:1", BASE, 64 * MIB);
  REQUIRE(mt_mount(e.c, mt_id(1), &seg) == 0);
  struct mc_put_config cfg = mt_cfg(1);
  enum { N = 40000, B = 1000 };
  char (*names)[16] = malloc(sizeof(*names) * N);
  const char **keys = malloc(sizeof(*keys) * N);
  uint64_t lens[B];
  int32_t st[B];
  for (int i = 0; i < N; i++) snprintf(names[i], 16, "m%05d", i), keys[i] = names[i];
  for (int i = 0; i < B; i++) lens[i] = 1024;
  int bad = 0;
  for (int b = 0; b < N; b += B) {
    bad += mt_batch_put_start(e.c, mt_id(1), keys + b, lens, B, &cfg, st, NULL) != 0;
    for (int i = 0; i < B; i++) bad += st[i] != 0;
    bad += mt_batch_end(e.c, MC_OP_BATCH_PUT_END, mt_id(1), keys + b, B, st) != 0;
    for (int i = 0; i < B; i++) bad += st[i] != 0;
  }
  REQUIRE(bad == 0);
  CHECK_EQ(mt_put(e.c, mt_id(1), "too-big", 63 * MIB, 1), MC_NO_AVAILABLE_HANDLE);
  CHECK(mt_wait_log(&e.mm, "[EVICT-RESULT] evicted_count=2000, eviction_base=40000", 5000));
  int32_t *out = malloc(sizeof(*out) * N);
  int wrong = 0;
  REQUIRE(mt_batch_exist(e.c, keys, N, out) == 0);
  for (int i = 0; i < N; i++) wrong += out[i] != (i >= 2000);
  CHECK_EQ(wrong, 0);
  free(out);
  free(keys);
  free(names);
  env_stop(&e);
}

/* 19 soft-pinned + 1 plain, ratio 0.5: pass 1 takes the plain one (goal 10); fewer than the lower
 * bound ceil(20 * 0.25) = 5 went, so pass 2 takes the 4 oldest soft-pinned objects. */
static void test_soft_pin_second_pass(void) {
  const char *args[] = {"--eviction_ratio=0.5", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_put_config soft = mt_cfg(1), plain = mt_cfg(1);
  soft.soft_pin_action = MC_SOFT_PIN_SET;
  REQUIRE(put_n(&e, "s", 19, 1024, &soft) == 0);
  REQUIRE(put_n(&e, "p", 1, 1024, &plain) == 0);
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=5, eviction_base=20"));
  int32_t st[19];
  CHECK_EQ(present(&e, "p", 1, st), 0);
  CHECK_EQ(present(&e, "s", 19, st), 15);
  for (int i = 0; i < 19; i++) CHECK_EQ(st[i], i >= 4);
  env_stop(&e);

  const char *no_soft[] = {"--eviction_ratio=0.5", "--allow_evict_soft_pinned_objects=false", NULL};
  REQUIRE(env_start(&e, no_soft) == 0);
  REQUIRE(put_n(&e, "s", 19, 1024, &soft) == 0);
  REQUIRE(put_n(&e, "p", 1, 1024, &plain) == 0);
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=1, eviction_base=20"));
  CHECK_EQ(present(&e, "s", 19, st), 19);
  CHECK_EQ(present(&e, "p", 1, st), 0);
  env_stop(&e);
}

/* A soft pin whose TTL ran out makes an ordinary object (pass 1 candidate). */
static void test_soft_pin_expiry(void) {
  const char *args[] = {"--eviction_ratio=0.5", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_put_config soft = mt_cfg(1);
  soft.soft_pin_action = MC_SOFT_PIN_SET;
  soft.soft_pin_ttl_ms = 300;
  REQUIRE(put_n(&e, "x", 10, 1024, &soft) == 0);
  mc_tp_sleep_ms(400);
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=5, eviction_base=10"));
  int32_t st[10];
  CHECK_EQ(present(&e, "x", 10, st), 5);
  for (int i = 0; i < 10; i++) CHECK_EQ(st[i], i >= 5);
  env_stop(&e);
}

/* Hard-pinned objects are never evicted and not counted; leased objects are skipped. */
static void test_hard_pin_and_leases_never(void) {
  const char *args[] = {"--eviction_ratio=1.0", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_put_config hard = mt_cfg(1), plain = mt_cfg(1);
  hard.with_hard_pin = 1;
  REQUIRE(put_n(&e, "h", 10, 1024, &hard) == 0);
  REQUIRE(put_n(&e, "p", 10, 1024, &plain) == 0);
  REQUIRE(put_n(&e, "l", 5, 1024, &plain) == 0);
  int32_t st[10];
  CHECK_EQ(present(&e, "l", 5, st), 5); /* leases granted (10 s) */
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=10, eviction_base=15"));
  CHECK_EQ(present(&e, "p", 10, st), 0);
  CHECK_EQ(present(&e, "h", 10, st), 10);
  CHECK_EQ(mt_put(e.c, mt_id(1), "too-big", MIB - 1024, 1), MC_NO_AVAILABLE_HANDLE); /* again */
  CHECK(mt_wait_log(&e.mm, "evicted_count=0, eviction_base=5", 0) == 0); /* quiet at --v=0 */
  mc_tp_sleep_ms(200);
  CHECK_EQ(present(&e, "h", 10, st), 10);
  CHECK_EQ(present(&e, "l", 5, st), 5);
  CHECK_EQ(mt_remove(e.c, "h0000", 1), 0); /* hard pin does not block Remove (force: present() leased it) */
  env_stop(&e);
}

/* Above the watermark without any failed put: target = used - hw + r. 50 x 1 KiB plus a hard-pinned
 * 470 KiB ballast = 0.5078 of 1 MiB; hw 0.5, r 0.2 -> ceil(50 * 0.2078) = 11 oldest go, after which
 * usage (0.497) is below the watermark and eviction stops. */
static void test_watermark_trigger(void) {
  const char *args[] = {"--eviction_high_watermark_ratio=0.5", "--eviction_ratio=0.2", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_put_config plain = mt_cfg(1), hard = mt_cfg(1);
  hard.with_hard_pin = 1;
  REQUIRE(put_n(&e, "w", 50, 1024, &plain) == 0);
  mc_tp_sleep_ms(50);
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-"), 0);
  CHECK_EQ(mt_put_start(e.c, mt_id(1), "ballast", 470 * 1024, &hard, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, mt_id(1), "ballast"), 0);
  CHECK(mt_wait_log(&e.mm, "[EVICT-RESULT] evicted_count=11, eviction_base=50", 3000));
  CHECK_EQ(mt_log_count(&e.mm, "need_mem_eviction=0"), 1);
  mc_tp_sleep_ms(200);
  CHECK_EQ(mt_log_count(&e.mm, "[EVICT-RESULT]"), 1);
  int32_t st[50];
  CHECK_EQ(present(&e, "w", 50, st), 39);
  for (int i = 0; i < 50; i++) CHECK_EQ(st[i], i >= 11);
  CHECK_EQ(mt_exist(e.c, "ballast"), 1);
  env_stop(&e);
}

/* Eviction makes room: after the run, the retried put succeeds. Objects count, not bytes: one big and
 * many small objects, ratio 0.5 -> half of the objects (the oldest) go whatever their size. */
static void test_counts_objects_not_bytes(void) {
  const char *args[] = {"--eviction_ratio=0.5", "--eviction_high_watermark_ratio=1.0", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_put_config cfg = mt_cfg(1);
  REQUIRE(put_n(&e, "a", 3, 1024, &cfg) == 0);
  REQUIRE(put_n(&e, "big", 1, 600 * 1024, &cfg) == 0);
  REQUIRE(put_n(&e, "b", 4, 1024, &cfg) == 0);
  CHECK_EQ(mt_put(e.c, mt_id(1), "need", 500 * 1024, 1), MC_NO_AVAILABLE_HANDLE);
  CHECK(mt_wait_log(&e.mm, "[EVICT-RESULT] evicted_count=4, eviction_base=8", 3000));
  int32_t st[4];
  CHECK_EQ(present(&e, "a", 3, st), 0);
  CHECK_EQ(present(&e, "big", 1, st), 0);
  CHECK_EQ(present(&e, "b", 4, st), 4);
  CHECK_EQ(mt_put(e.c, mt_id(1), "need", 500 * 1024, 1), 0);
  env_stop(&e);
}

/* Members of one group on the segment of its first member (a segment named by
 * docs/master.md, "Key groups"): with two segments and random placement, 16 members on one segment by
 * chance is 1 in 32768 per group. */
static void same_segment(struct env *e, const char *prefix, const char *group) {
  struct mc_put_config grp = mt_cfg(1);
  grp.group = (char *)group;
  char seg0[64] = "";
  for (int i = 0; i < 16; i++) {
    char key[64];
    key_of(key, sizeof(key), prefix, i);
    struct mc_replica_rec *reps = NULL;
    uint32_t n = 0;
    CHECK_EQ(mt_put_start(e->c, mt_id(1), key, 1024, &grp, &reps, &n), 0);
    CHECK_EQ(n, 1u);
    if (n && !i) snprintf(seg0, sizeof(seg0), "%s", reps[0].segment_name);
    if (n) CHECK_STR(reps[0].segment_name, seg0);
    mc_replicas_free(reps, n);
    CHECK_EQ(mt_put_end(e->c, mt_id(1), key), 0);
  }
}

static void test_key_group_placement(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_segment_rec s2 = mt_seg(2, "10.0.0.2:1", BASE + 4 * MIB, MIB);
  REQUIRE(mt_mount(e.c, mt_id(1), &s2) == 0);
  same_segment(&e, "a", "grp-a");
  same_segment(&e, "b", "grp-b");
  same_segment(&e, "c", "grp-c");
  env_stop(&e);
}

/* "g0000" (group "grp", the oldest), six ungrouped "u", then "g0001".."g0003" (group "grp", the newest). */
static int put_group_order(struct env *e) {
  struct mc_put_config plain = mt_cfg(1), grp = mt_cfg(1);
  grp.group = (char *)"grp";
  if (put_n(e, "g", 1, 1024, &grp) || put_n(e, "u", 6, 1024, &plain)) return -1;
  for (int i = 1; i < 4; i++) {
    char key[64];
    key_of(key, sizeof(key), "g", i);
    if (mt_put_start(e->c, mt_id(1), key, 1024, &grp, NULL, NULL) || mt_put_end(e->c, mt_id(1), key)) return -1;
  }
  return 0;
}

/* Eviction takes a group whole (docs/master.md, "Key groups"). Puts "g0000" (group "grp", the oldest), six
 * ungrouped "u", then "g0001".."g0003" (the newest): ratio 0.5 of 10 takes g0000 and u0000..u0003, and
 * with g0000 its group, so 8 in all; u0004 and u0005 stay. */
static void test_key_group_evicted_together(void) {
  const char *args[] = {"--eviction_ratio=0.5", "--eviction_high_watermark_ratio=1.0", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  REQUIRE(put_group_order(&e) == 0);
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=8, eviction_base=10"));
  int32_t st[6];
  CHECK_EQ(present(&e, "g", 4, st), 0);
  CHECK_EQ(present(&e, "u", 6, st), 2);
  for (int i = 0; i < 6; i++) CHECK_EQ(st[i], i >= 4);
  /* the group went with its members: a new member starts it again */
  struct mc_put_config grp = mt_cfg(1);
  grp.group = (char *)"grp";
  CHECK_EQ(mt_put_start(e.c, mt_id(1), "g0000", 1024, &grp, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, mt_id(1), "g0000"), 0);
  CHECK_EQ(mt_exist(e.c, "g0000"), 1);
  env_stop(&e);
}

/* A read lease on one member spares its whole group (docs/master.md, "Key groups"): the order of
 * test_key_group_evicted_together, then a read of g0003 just before the trigger: the oldest, g0000, is not
 * taken, the ungrouped u0000..u0004 are (5 of 10), and every member stays. */
static void test_key_group_lease_spares_group(void) {
  const char *args[] = {"--eviction_ratio=0.5", "--eviction_high_watermark_ratio=1.0", "--default_kv_lease_ttl=5000",
                        NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  REQUIRE(put_group_order(&e) == 0);
  REQUIRE(mt_get(e.c, "g0003", NULL, NULL, NULL) == 0); /* a read lease on one member */
  CHECK(trigger_and_wait(&e, "[EVICT-RESULT] evicted_count=5, eviction_base=10"));
  int32_t st[6];
  CHECK_EQ(present(&e, "g", 4, st), 4);
  CHECK_EQ(present(&e, "u", 6, st), 1);
  CHECK_EQ(st[5], 1);
  env_stop(&e);
}

TEST_MAIN(TEST_CASE(test_exactly_the_oldest_5_percent), TEST_CASE(test_exactly_the_oldest_among_many), TEST_CASE(test_soft_pin_second_pass),
          TEST_CASE(test_soft_pin_expiry), TEST_CASE(test_hard_pin_and_leases_never), TEST_CASE(test_watermark_trigger),
          TEST_CASE(test_counts_objects_not_bytes), TEST_CASE(test_key_group_placement), TEST_CASE(test_key_group_evicted_together),
          TEST_CASE(test_key_group_lease_spares_group))
