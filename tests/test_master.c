/* Black-box tests of mooncake_master's object and segment rules (docs/master.md: segments, placement, objects):
 * each test starts the real binary on a free port and talks to it over the master RPC. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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
  return 0;
}

static void env_stop(struct env *e) {
  mc_mrpc_client_free(e->c);
  CHECK_EQ(mt_master_stop(&e->mm), 0);
}

/* A segment with zone and host (for placement tests). */
static struct mc_segment_rec seg_zh(uint64_t id, const char *name, uint64_t size, const char *zone, const char *host) {
  struct mc_segment_rec s = mt_seg(id, name, BASE + id * (1ull << 32), size);
  s.zone = (char *)zone;
  s.host_id = (char *)host;
  return s;
}

/* The segment name of the single replica a put of key gets (""/error code in name on failure). */
static int put_where(struct mc_mrpc_client *c, struct mc_uuid id, const char *key, uint64_t len,
                     const struct mc_put_config *cfg, char *name, size_t nlen) {
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  int rc = mt_put_start(c, id, key, len, cfg, &reps, &n);
  snprintf(name, nlen, "%s", rc || !n ? "" : reps[0].segment_name);
  mc_replicas_free(reps, n);
  if (!rc) rc = mt_put_end(c, id, key);
  return rc;
}

/* ------------------------------------------------------------------ lifecycle */

/* Eviction is kept out of the way (watermark 1.0, ratio 0): the checks below fill the segment and then
 * count on what is in it, which an eviction pass running meanwhile would change. */
static void test_lifecycle(void) {
  const char *no_eviction[] = {"--eviction_high_watermark_ratio=1.0", "--eviction_ratio=0", NULL};
  struct env e;
  REQUIRE(env_start(&e, no_eviction) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  s.zone = "z1";
  s.host_id = "host-a";
  CHECK_EQ(mt_mount(e.c, a, &s), 0);

  struct mc_wbuf w = {0}, rep;
  CHECK_EQ(mt_call(e.c, MC_OP_SERVICE_READY, &w, &rep), 0);
  /* str version, u64 view_version (this master's incarnation: wall-clock microseconds at its start) */
  size_t vl = strlen(MC_STORE_VERSION);
  CHECK(rep.len == 4 + vl + 8 && !memcmp(rep.p + 4, MC_STORE_VERSION, vl));
  uint64_t view = 0;
  if (rep.len == 4 + vl + 8)
    for (int i = 7; i >= 0; i--) view = view << 8 | rep.p[4 + vl + i];
  CHECK(view > 1700000000ull * 1000000ull);
  mc_w_free(&rep);

  struct mc_put_config cfg = mt_cfg(1);
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  CHECK_EQ(mt_put_start(e.c, a, "a", 1000, &cfg, &reps, &n), 0);
  REQUIRE(n == 1);
  CHECK_EQ(reps[0].status, 2); /* PROCESSING */
  CHECK_EQ(reps[0].size, 1000);
  CHECK(reps[0].address >= BASE && reps[0].address + 1000 <= BASE + MIB);
  CHECK_STR(reps[0].segment_name, "10.0.0.1:1");
  CHECK_STR(reps[0].te_endpoint, "10.0.0.1:1");
  CHECK_STR(reps[0].zone, "z1");
  CHECK_STR(reps[0].host_id, "host-a");
  uint64_t addr = reps[0].address;
  mc_replicas_free(reps, n);

  CHECK_EQ(mt_get(e.c, "a", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  CHECK_EQ(mt_exist(e.c, "a"), 0);
  CHECK_EQ(mt_remove(e.c, "a", 1), MC_REPLICA_IS_NOT_READY); /* even with force */
  CHECK_EQ(mt_put_end(e.c, a, "a"), 0);
  CHECK_EQ(mt_put_end(e.c, a, "a"), 0); /* retry of a finished put */
  uint64_t lease = 0;
  CHECK_EQ(mt_get(e.c, "a", &reps, &n, &lease), 0);
  CHECK_EQ(n, 1);
  if (n) {
    CHECK_EQ(reps[0].status, 3);
    CHECK_EQ(reps[0].address, addr);
  }
  mc_replicas_free(reps, n);
  CHECK_EQ(lease, 10000);
  CHECK_EQ(mt_exist(e.c, "a"), 1);
  CHECK_EQ(mt_remove(e.c, "a", 0), MC_OBJECT_HAS_LEASE);
  CHECK_EQ(mt_remove(e.c, "a", 1), 0);
  CHECK_EQ(mt_get(e.c, "a", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_exist(e.c, "a"), 0);
  CHECK_EQ(mt_remove(e.c, "a", 0), MC_OBJECT_NOT_FOUND);

  CHECK_EQ(mt_put_start(e.c, a, "", 10, &cfg, NULL, NULL), MC_INVALID_PARAMS);
  CHECK_EQ(mt_put_start(e.c, a, "z", 0, &cfg, NULL, NULL), MC_INVALID_PARAMS);
  struct mc_put_config zero = mt_cfg(0);
  CHECK_EQ(mt_put_start(e.c, a, "z", 10, &zero, NULL, NULL), MC_INVALID_PARAMS);
  CHECK_EQ(mt_put_start(e.c, a, "huge", 2 * MIB, &cfg, NULL, NULL), MC_NO_AVAILABLE_HANDLE);
  CHECK_EQ(mt_put_end(e.c, a, "never"), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_put_revoke(e.c, a, "never"), MC_OBJECT_NOT_FOUND);
  /* the force-removed "a" was leased (the get above, 10 s): its bytes stay allocated until the lease
   * ends, so the whole segment is not free yet; everything else is */
  CHECK_EQ(mt_put(e.c, a, "whole", MIB, 1), MC_NO_AVAILABLE_HANDLE);
  CHECK_EQ(mt_put(e.c, a, "most", MIB / 2, 1), 0);
  CHECK_EQ(mt_remove(e.c, "most", 0), 0);
  env_stop(&e);
  /* without a lease the freed space is reusable at once: the whole segment in one object */
  REQUIRE(env_start(&e, no_eviction) == 0);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "a", 1000, 1), 0);
  CHECK_EQ(mt_remove(e.c, "a", 1), 0);
  CHECK_EQ(mt_put(e.c, a, "whole", MIB, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "more", 8, 1), MC_NO_AVAILABLE_HANDLE);
  env_stop(&e);
}

static void test_ownership_and_revoke(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  CHECK_EQ(mt_put_start(e.c, a, "k", 100, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_put_start(e.c, b, "k", 100, &cfg, NULL, NULL), MC_OBJECT_ALREADY_EXISTS); /* young put */
  CHECK_EQ(mt_put_end(e.c, b, "k"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_put_revoke(e.c, b, "k"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_end(e.c, MC_OP_PUT_END, a, "k", MC_REPLICA_DISK), MC_INVALID_WRITE); /* no disk replica */
  CHECK_EQ(mt_put_revoke(e.c, a, "k"), 0);
  CHECK_EQ(mt_get(e.c, "k", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_put_start(e.c, b, "k", 100, &cfg, NULL, NULL), 0); /* the key is free again */
  CHECK_EQ(mt_put_end(e.c, b, "k"), 0);
  CHECK_EQ(mt_put_start(e.c, a, "k", 100, &cfg, NULL, NULL), MC_OBJECT_ALREADY_EXISTS); /* complete */
  CHECK_EQ(mt_put_revoke(e.c, b, "k"), MC_INVALID_WRITE); /* nothing in PROCESSING */
  CHECK_EQ(mt_put_end(e.c, a, "k"), MC_ILLEGAL_CLIENT);
  uint32_t n = 0;
  CHECK_EQ(mt_get(e.c, "k", NULL, &n, NULL), 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(mt_wait_log(&e.mm, "client_id=c11e0000-0000-0001-0000-000000001eef, action=mount_segment, segment_name=10.0.0.1:1", 100), 1);
  env_stop(&e);
}

/* Preemption after put_start_discard_timeout_sec; the preempted space is held until put_start +
 * put_start_release_timeout_sec. Eviction is kept out of the way (watermark 1.0, ratio 0). */
static void test_preemption_and_release(void) {
  const char *args[] = {"--put_start_discard_timeout_sec=1", "--put_start_release_timeout_sec=2",
                        "--eviction_high_watermark_ratio=1.0", "--eviction_ratio=0", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, 8192);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_put_start(e.c, a, "p", 4096, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_put_start(e.c, b, "p", 4096, &cfg, NULL, NULL), MC_OBJECT_ALREADY_EXISTS);
  mc_tp_sleep_ms(1100);
  CHECK_EQ(mt_put_start(e.c, b, "p", 4096, &cfg, NULL, NULL), 0); /* stale: preempted */
  CHECK_EQ(mt_put_end(e.c, a, "p"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_put_end(e.c, b, "p"), 0);
  /* A's abandoned half stays unusable until t0 + 2 s */
  CHECK_EQ(mt_put_start(e.c, a, "q", 4096, &cfg, NULL, NULL), MC_NO_AVAILABLE_HANDLE);
  CHECK(mc_tp_now_ms() - t0 < 1900);
  mc_tp_sleep_ms(2300 - (mc_tp_now_ms() - t0));
  CHECK_EQ(mt_put_start(e.c, a, "q", 4096, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, a, "q"), 0);
  /* an abandoned put (never ended, never preempted) is freed after the release timeout */
  CHECK_EQ(mt_remove(e.c, "q", 1), 0);
  CHECK_EQ(mt_put_start(e.c, a, "r", 4096, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_get(e.c, "r", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  long deadline = mc_tp_now_ms() + 4500;
  while (mt_get(e.c, "r", NULL, NULL, NULL) != MC_OBJECT_NOT_FOUND && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(50);
  CHECK_EQ(mt_get(e.c, "r", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_put_end(e.c, a, "r"), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_put(e.c, a, "s", 4096, 1), 0); /* its space came back */
  env_stop(&e);
}

static void test_leases(void) {
  const char *args[] = {"--default_kv_lease_ttl=500", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "l", 100, 1), 0);
  CHECK_EQ(mt_remove(e.c, "l", 0), 0); /* PutEnd does not lease */
  CHECK_EQ(mt_put(e.c, a, "l", 100, 1), 0);
  uint64_t lease = 0;
  CHECK_EQ(mt_get(e.c, "l", NULL, NULL, &lease), 0);
  CHECK_EQ(lease, 500);
  CHECK_EQ(mt_remove(e.c, "l", 0), MC_OBJECT_HAS_LEASE);
  mc_tp_sleep_ms(650);
  CHECK_EQ(mt_remove(e.c, "l", 0), 0);
  /* exist extends: max(existing, now + ttl) */
  CHECK_EQ(mt_put(e.c, a, "m", 100, 1), 0);
  CHECK_EQ(mt_exist(e.c, "m"), 1);
  mc_tp_sleep_ms(300);
  CHECK_EQ(mt_exist(e.c, "m"), 1); /* now until ~800 ms */
  mc_tp_sleep_ms(350);
  CHECK_EQ(mt_remove(e.c, "m", 0), MC_OBJECT_HAS_LEASE);
  mc_tp_sleep_ms(400);
  CHECK_EQ(mt_remove(e.c, "m", 0), 0);
  /* batch exist and batch get grant leases too; absent keys do not fail */
  CHECK_EQ(mt_put(e.c, a, "n1", 100, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "n2", 100, 1), 0);
  const char *k1[] = {"n1", "absent"};
  int32_t st[2];
  CHECK_EQ(mt_batch_exist(e.c, k1, 2, st), 0);
  CHECK_EQ(st[0], 1);
  CHECK_EQ(st[1], 0);
  const char *k2[] = {"n2"};
  CHECK_EQ(mt_batch_get(e.c, k2, 1, st, NULL, &lease), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(lease, 500);
  CHECK_EQ(mt_remove(e.c, "n1", 0), MC_OBJECT_HAS_LEASE);
  CHECK_EQ(mt_remove(e.c, "n2", 0), MC_OBJECT_HAS_LEASE);
  mc_tp_sleep_ms(650);
  CHECK_EQ(mt_remove(e.c, "n1", 0), 0);
  CHECK_EQ(mt_remove(e.c, "n2", 0), 0);
  env_stop(&e);
}

static void test_batches(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  const char *keys[] = {"b1", "b2", "b1", ""};
  uint64_t lens[] = {100, 200, 300, 10};
  int32_t st[4];
  uint32_t nrep[4];
  CHECK_EQ(mt_batch_put_start(e.c, a, keys, lens, 4, &cfg, st, nrep), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(nrep[0], 1);
  CHECK_EQ(st[1], 0);
  CHECK_EQ(st[2], MC_OBJECT_ALREADY_EXISTS); /* the first of a repeated key wins */
  CHECK_EQ(nrep[2], 0);
  CHECK_EQ(st[3], MC_INVALID_PARAMS);
  const char *ends[] = {"b1", "b2", "nokey"};
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_PUT_END, b, ends, 2, st), 0);
  CHECK_EQ(st[0], MC_ILLEGAL_CLIENT);
  CHECK_EQ(st[1], MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_PUT_END, a, ends, 3, st), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(st[1], 0);
  CHECK_EQ(st[2], MC_OBJECT_NOT_FOUND);
  const char *ex[] = {"b1", "x", "b2"};
  CHECK_EQ(mt_batch_exist(e.c, ex, 3, st), 0);
  CHECK_EQ(st[0], 1);
  CHECK_EQ(st[1], 0);
  CHECK_EQ(st[2], 1);
  CHECK_EQ(mt_batch_exist(e.c, ex, 0, st), 0); /* empty in, empty out */
  uint64_t lease = 0;
  CHECK_EQ(mt_batch_get(e.c, ex, 2, st, nrep, &lease), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(nrep[0], 1);
  CHECK_EQ(st[1], MC_OBJECT_NOT_FOUND);
  CHECK_EQ(nrep[1], 0);
  CHECK_EQ(lease, 10000);
  const char *rm[] = {"b1", "b1", "x"};
  CHECK_EQ(mt_batch_remove(e.c, rm, 3, 0, st), 0);
  CHECK_EQ(st[0], MC_OBJECT_HAS_LEASE);
  CHECK_EQ(mt_batch_remove(e.c, rm, 3, 1, st), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(st[1], MC_OBJECT_NOT_FOUND);
  CHECK_EQ(st[2], MC_OBJECT_NOT_FOUND);
  /* batch revoke */
  const char *rv[] = {"r1", "r2"};
  uint64_t rl[] = {10, 10};
  CHECK_EQ(mt_batch_put_start(e.c, a, rv, rl, 2, &cfg, st, NULL), 0);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_PUT_REVOKE, a, rv, 2, st), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(st[1], 0);
  CHECK_EQ(mt_exist(e.c, "r1"), 0);
  CHECK_EQ(mt_get(e.c, "r2", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  env_stop(&e);
}

static void test_regex_and_remove_all(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "re/a1", 10, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "re/a2", 10, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "re/b1", 10, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "other", 10, 1), 0);
  struct mc_put_config cfg = mt_cfg(1);
  CHECK_EQ(mt_put_start(e.c, a, "re/a3", 10, &cfg, NULL, NULL), 0); /* incomplete */
  uint32_t count = 0;
  char first[64] = "";
  CHECK_EQ(mt_get_by_regex(e.c, "^re/a[0-9]+$", &count, first, sizeof(first)), 0);
  CHECK_EQ(count, 2); /* a3 is not readable */
  CHECK(!strcmp(first, "re/a1") || !strcmp(first, "re/a2"));
  CHECK_EQ(mt_get_by_regex(e.c, "a1", &count, NULL, 0), 0); /* substring search */
  CHECK_EQ(count, 1);
  CHECK_EQ(mt_exist(e.c, "re/a2"), 1); /* leased */
  int64_t removed = -1;
  CHECK_EQ(mt_remove_many(e.c, "(", 0, &removed), MC_INVALID_PARAMS);
  CHECK_EQ(mt_remove_many(e.c, "^re/a", 0, &removed), 0);
  CHECK_EQ(removed, 1); /* a1 only: a2 leased, a3 incomplete */
  CHECK_EQ(mt_exist(e.c, "re/a1"), 0);
  CHECK_EQ(mt_remove_many(e.c, "^re/a", 1, &removed), 0);
  CHECK_EQ(removed, 1); /* force takes a2 */
  CHECK_EQ(mt_exist(e.c, "other"), 1);
  CHECK_EQ(mt_remove_many(e.c, NULL, 0, &removed), 0);
  CHECK_EQ(removed, 1); /* re/b1; "other" leased, re/a3 incomplete */
  CHECK_EQ(mt_remove_many(e.c, NULL, 1, &removed), 0);
  CHECK_EQ(removed, 1); /* other */
  CHECK_EQ(mt_get(e.c, "re/a3", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  CHECK_EQ(mt_put_end(e.c, a, "re/a3"), 0);
  CHECK_EQ(mt_remove_many(e.c, NULL, 0, &removed), 0);
  CHECK_EQ(removed, 1);
  env_stop(&e);
}

/* ------------------------------------------------------------------ placement */

static void test_best_effort_distinct_names(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  CHECK_EQ(mt_put(e.c, a, "none", 10, 1), MC_NO_AVAILABLE_HANDLE); /* no segment at all */
  struct mc_segment_rec s1 = mt_seg(1, "10.0.0.1:1", BASE, MIB), s2 = mt_seg(2, "10.0.0.1:1", BASE + MIB, MIB),
                        s3 = mt_seg(3, "10.0.0.2:1", BASE + 8 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  CHECK_EQ(mt_mount(e.c, a, &s2), 0); /* a second chunk under the same name */
  CHECK_EQ(mt_mount(e.c, b, &s3), 0);
  for (int i = 0; i < 20; i++) {
    char key[32];
    snprintf(key, sizeof(key), "r3-%d", i);
    struct mc_put_config cfg = mt_cfg(3);
    struct mc_replica_rec *reps;
    uint32_t n = 0;
    CHECK_EQ(mt_put_start(e.c, a, key, 1000, &cfg, &reps, &n), 0);
    CHECK_EQ(n, 2); /* best effort: only two distinct names */
    if (n == 2) CHECK(strcmp(reps[0].segment_name, reps[1].segment_name) != 0);
    mc_replicas_free(reps, n);
    CHECK_EQ(mt_put_end(e.c, a, key), 0);
    uint32_t got = 0;
    CHECK_EQ(mt_get(e.c, key, NULL, &got, NULL), 0);
    CHECK_EQ(got, 2);
  }
  struct mc_put_config one = mt_cfg(1);
  uint32_t n = 0;
  CHECK_EQ(mt_put_start(e.c, a, "one", 10, &one, NULL, &n), 0);
  CHECK_EQ(n, 1);
  /* a segment that cannot fit the value is skipped; nothing fits -> -200 at once */
  CHECK_EQ(mt_put(e.c, a, "big", 2 * MIB, 2), MC_NO_AVAILABLE_HANDLE);
  env_stop(&e);
}

static void test_mount_unmount(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec bad = mt_seg(9, "10.0.0.9:1", 0, MIB);
  CHECK_EQ(mt_mount(e.c, a, &bad), MC_INVALID_PARAMS);
  bad = mt_seg(9, "10.0.0.9:1", BASE, 0);
  CHECK_EQ(mt_mount(e.c, a, &bad), MC_INVALID_PARAMS);
  struct mc_segment_rec s1 = mt_seg(1, "10.0.0.1:1", BASE, MIB), s2 = mt_seg(2, "10.0.0.2:1", BASE + 4 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  CHECK_EQ(mt_mount(e.c, a, &s1), 0); /* idempotent */
  CHECK_EQ(mt_mount(e.c, b, &s2), 0);
  uint32_t count = 0;
  char names[4][64];
  uint8_t state[4];
  uint64_t used[4];
  CHECK_EQ(mt_query_segments(e.c, &count, names, state, used, 4), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(state[0], MC_SEG_OK);
  CHECK_EQ(used[0], 0);
  CHECK_EQ(mt_put(e.c, a, "both", 1000, 2), 0);
  struct mc_put_config pref = mt_cfg(1);
  pref.n_preferred = 1;
  pref.preferred[0] = "10.0.0.1:1";
  CHECK_EQ(mt_put_start(e.c, a, "only1", 1000, &pref, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, a, "only1"), 0);
  CHECK_EQ(mt_query_segments(e.c, &count, names, state, used, 4), 0);
  CHECK_EQ(used[0], 2000);
  CHECK_EQ(mt_unmount(e.c, mt_id(12345), a), 0);   /* unknown id */
  CHECK_EQ(mt_unmount(e.c, s1.id, b), MC_INVALID_PARAMS); /* not the owner */
  CHECK_EQ(mt_unmount(e.c, s1.id, a), 0);
  CHECK_EQ(mt_exist(e.c, "only1"), 0); /* lost with its only segment */
  CHECK_EQ(mt_get(e.c, "only1", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  uint32_t n = 0;
  struct mc_replica_rec *reps;
  CHECK_EQ(mt_get(e.c, "both", &reps, &n, NULL), 0); /* survives on the other */
  CHECK_EQ(n, 1);
  if (n) CHECK_STR(reps[0].segment_name, "10.0.0.2:1");
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_put(e.c, a, "only1", 1000, 1), 0); /* may be put again elsewhere */
  CHECK_EQ(mt_query_segments(e.c, &count, names, state, used, 4), 0);
  CHECK_EQ(count, 1);
  CHECK_STR(names[0], "10.0.0.2:1");
  /* remounting the unmounted id works again */
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  env_stop(&e);
}

static void test_graceful_unmount(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s1 = mt_seg(1, "10.0.0.1:1", BASE, MIB), s2 = mt_seg(2, "10.0.0.2:1", BASE + 4 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  CHECK_EQ(mt_mount(e.c, b, &s2), 0);
  struct mc_put_config pref = mt_cfg(1);
  pref.n_preferred = 1;
  pref.preferred[0] = "10.0.0.1:1";
  char where[64];
  CHECK_EQ(put_where(e.c, a, "g", 100, &pref, where, sizeof(where)), 0);
  CHECK_STR(where, "10.0.0.1:1");
  CHECK_EQ(mt_graceful(e.c, s1.id, b, 800), MC_INVALID_PARAMS); /* owner only */
  CHECK_EQ(mt_graceful(e.c, mt_id(4242), a, 800), 0);          /* unknown id */
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_graceful(e.c, s1.id, a, 800), 0);
  uint32_t count = 0;
  char names[4][64];
  uint8_t state[4];
  CHECK_EQ(mt_query_segments(e.c, &count, names, state, NULL, 4), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(state[0], MC_SEG_GRACEFULLY_UNMOUNTING);
  CHECK_EQ(mt_exist(e.c, "g"), 1); /* still readable */
  for (int i = 0; i < 5; i++) {    /* no new allocations on it, even when preferred */
    char key[16];
    snprintf(key, sizeof(key), "g%d", i);
    CHECK_EQ(put_where(e.c, a, key, 100, &pref, where, sizeof(where)), 0);
    CHECK_STR(where, "10.0.0.2:1");
  }
  CHECK(mc_tp_now_ms() - t0 < 700);
  long deadline = t0 + 2000;
  while (mt_get(e.c, "g", NULL, NULL, NULL) == 0 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(20);
  CHECK(mc_tp_now_ms() - t0 >= 790);
  CHECK_EQ(mt_get(e.c, "g", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(mt_query_segments(e.c, &count, names, state, NULL, 4), 0);
  CHECK_EQ(count, 1);
  CHECK_EQ(mt_exist(e.c, "g0"), 1);
  env_stop(&e);
}

/* Placement: preferred -> writer's host -> writer's zone -> rest; replicas carry zone and host_id. */
static void test_zone_preference(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_segment_rec s1 = seg_zh(1, "n1:1", MIB, "Z1", "H1"), s2 = seg_zh(2, "n2:1", MIB, "Z1", "H2"),
                        s3 = seg_zh(3, "n3:1", MIB, "Z2", "H3"), s4 = seg_zh(4, "n4:1", MIB, "Z2", "H4");
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s1), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(2), &s2), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(3), &s3), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(4), &s4), 0);
  struct mc_uuid w = mt_id(9);
  char where[64], key[32];
  int on_host = 0, in_zone = 0, z1_seen[2] = {0, 0};
  for (int i = 0; i < 30; i++) {
    struct mc_put_config cfg = mt_cfg(1);
    cfg.writer_host_id = "H3";
    cfg.writer_zone = "Z1";
    snprintf(key, sizeof(key), "h%d", i);
    CHECK_EQ(put_where(e.c, w, key, 100, &cfg, where, sizeof(where)), 0);
    on_host += !strcmp(where, "n3:1");
    cfg.writer_host_id = "H9"; /* no segment on the writer's host: its zone */
    snprintf(key, sizeof(key), "z%d", i);
    CHECK_EQ(put_where(e.c, w, key, 100, &cfg, where, sizeof(where)), 0);
    in_zone += !strcmp(where, "n1:1") || !strcmp(where, "n2:1");
    z1_seen[0] |= !strcmp(where, "n1:1");
    z1_seen[1] |= !strcmp(where, "n2:1");
  }
  CHECK_EQ(on_host, 30);
  CHECK_EQ(in_zone, 30);
  CHECK(z1_seen[0] && z1_seen[1]); /* random within the zone */
  /* preferred wins over host and zone */
  struct mc_put_config cfg = mt_cfg(1);
  cfg.writer_host_id = "H1";
  cfg.writer_zone = "Z1";
  cfg.n_preferred = 1;
  cfg.preferred[0] = "n4:1";
  CHECK_EQ(put_where(e.c, w, "pref", 100, &cfg, where, sizeof(where)), 0);
  CHECK_STR(where, "n4:1");
  /* two replicas: host first, then zone */
  struct mc_put_config two = mt_cfg(2);
  two.writer_host_id = "H1";
  two.writer_zone = "Z1";
  struct mc_replica_rec *reps;
  uint32_t n = 0;
  CHECK_EQ(mt_put_start(e.c, w, "two", 100, &two, &reps, &n), 0);
  REQUIRE(n == 2);
  CHECK_STR(reps[0].segment_name, "n1:1");
  CHECK_STR(reps[0].host_id, "H1");
  CHECK_STR(reps[1].segment_name, "n2:1");
  CHECK_STR(reps[1].zone, "Z1");
  mc_replicas_free(reps, n);
  /* the writer's host full -> its zone */
  struct mc_put_config fill = mt_cfg(1);
  fill.n_preferred = 1;
  fill.preferred[0] = "n1:1";
  uint32_t count = 0;
  char names[4][64];
  uint64_t used[4];
  CHECK_EQ(mt_query_segments(e.c, &count, names, NULL, used, 4), 0);
  REQUIRE(count == 4 && !strcmp(names[0], "n1:1"));
  CHECK_EQ(put_where(e.c, w, "fill", MIB - used[0] - 200, &fill, where, sizeof(where)), 0);
  CHECK_STR(where, "n1:1");
  cfg.n_preferred = 0;
  CHECK_EQ(put_where(e.c, w, "spill", 1000, &cfg, where, sizeof(where)), 0);
  CHECK_STR(where, "n2:1");
  env_stop(&e);
}

static void test_strategies(void) {
  const char *fr[] = {"--allocation_strategy=free_ratio_first", NULL};
  struct env e;
  REQUIRE(env_start(&e, fr) == 0);
  struct mc_segment_rec s1 = mt_seg(1, "f1:1", BASE, MIB), s2 = mt_seg(2, "f2:1", BASE + 4 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s1), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(2), &s2), 0);
  struct mc_put_config pref = mt_cfg(1), cfg = mt_cfg(1);
  pref.n_preferred = 1;
  pref.preferred[0] = "f1:1";
  char where[64];
  CHECK_EQ(put_where(e.c, mt_id(1), "big", MIB / 2, &pref, where, sizeof(where)), 0);
  CHECK_STR(where, "f1:1");
  for (int i = 0; i < 10; i++) { /* the emptier segment first, every time */
    char key[16];
    snprintf(key, sizeof(key), "f%d", i);
    CHECK_EQ(put_where(e.c, mt_id(1), key, 1000, &cfg, where, sizeof(where)), 0);
    CHECK_STR(where, "f2:1");
  }
  env_stop(&e);

  const char *lf[] = {"--allocation_strategy=local_first", NULL};
  REQUIRE(env_start(&e, lf) == 0);
  struct mc_segment_rec l1 = seg_zh(1, "l1:1", MIB, "", "HA"), l2 = seg_zh(2, "l2:1", MIB, "", "HB"),
                        l3 = seg_zh(3, "l3:1", MIB, "", "HC");
  CHECK_EQ(mt_mount(e.c, mt_id(1), &l1), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(2), &l2), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(3), &l3), 0);
  cfg.writer_host_id = "HB";
  CHECK_EQ(put_where(e.c, mt_id(2), "local", 1000, &cfg, where, sizeof(where)), 0);
  CHECK_STR(where, "l2:1");
  /* the writer's host full: the next host in cyclic order (HC), then HA */
  pref.preferred[0] = "l2:1";
  CHECK_EQ(put_where(e.c, mt_id(2), "fillb", MIB - 1000, &pref, where, sizeof(where)), 0);
  CHECK_EQ(put_where(e.c, mt_id(2), "next", 1000, &cfg, where, sizeof(where)), 0);
  CHECK_STR(where, "l3:1");
  env_stop(&e);
}

/* ------------------------------------------------------------------ pins (parameters) */

static void test_pin_parameters(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config c = mt_cfg(1);
  c.soft_pin_ttl_ms = 1000;
  c.soft_pin_action = MC_SOFT_PIN_KEEP;
  CHECK_EQ(mt_put_start(e.c, a, "p1", 10, &c, NULL, NULL), MC_INVALID_PARAMS);
  c.soft_pin_action = MC_SOFT_PIN_CLEAR;
  CHECK_EQ(mt_put_start(e.c, a, "p1", 10, &c, NULL, NULL), MC_INVALID_PARAMS);
  c.soft_pin_action = MC_SOFT_PIN_SET;
  c.soft_pin_ttl_ms = 25ll * 3600 * 1000; /* above max_kv_soft_pin_ttl (24 h) */
  CHECK_EQ(mt_put_start(e.c, a, "p1", 10, &c, NULL, NULL), MC_INVALID_PARAMS);
  c.soft_pin_action = 7;
  c.soft_pin_ttl_ms = -1;
  CHECK_EQ(mt_put_start(e.c, a, "p1", 10, &c, NULL, NULL), MC_INVALID_PARAMS);
  c.soft_pin_action = MC_SOFT_PIN_SET;
  CHECK_EQ(mt_put_start(e.c, a, "p1", 10, &c, NULL, NULL), 0); /* default TTL */
  c.soft_pin_ttl_ms = 0;
  CHECK_EQ(mt_put_start(e.c, a, "p2", 10, &c, NULL, NULL), 0);
  c.soft_pin_ttl_ms = 24ll * 3600 * 1000;
  c.with_hard_pin = 1;
  CHECK_EQ(mt_put_start(e.c, a, "p3", 10, &c, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, a, "p1"), 0);
  CHECK_EQ(mt_put_end(e.c, a, "p3"), 0);
  CHECK_EQ(mt_remove(e.c, "p1", 0), 0); /* pins do not block Remove */
  CHECK_EQ(mt_remove(e.c, "p3", 0), 0);
  env_stop(&e);
}

/* ------------------------------------------------------------------ robustness and logs */

static int send_raw(int fd, const void *p, size_t n) { return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1; }

/* Reads one reply header; returns its status, or INT32_MIN when no reply comes (connection dropped:
 * mrpc closes a dropped socket lazily, at its next accept, so silence within the wait counts too). */
static int32_t read_status_wait(int fd, long ms) {
  uint8_t h[MC_MRPC_HDR];
  size_t got = 0;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (got < sizeof(h)) {
    ssize_t r = recv(fd, h + got, sizeof(h) - got, 0);
    if (r <= 0) return INT32_MIN;
    got += (size_t)r;
  }
  uint32_t len = (uint32_t)h[16] | (uint32_t)h[17] << 8 | (uint32_t)h[18] << 16 | (uint32_t)h[19] << 24;
  for (uint8_t tmp[256]; len;) {
    ssize_t r = recv(fd, tmp, len < sizeof(tmp) ? len : sizeof(tmp), 0);
    if (r <= 0) break;
    len -= (uint32_t)r;
  }
  return (int32_t)((uint32_t)h[20] | (uint32_t)h[21] << 8 | (uint32_t)h[22] << 16 | (uint32_t)h[23] << 24);
}

static int32_t read_status(int fd) { return read_status_wait(fd, 3000); }
static int32_t read_nothing(int fd) { return read_status_wait(fd, 300); }

static void frame(uint8_t *h, uint16_t version, uint16_t op, uint32_t len) {
  struct mc_wbuf w = {0};
  mc_w_u32(&w, MC_MRPC_MAGIC);
  mc_w_u8(&w, version & 0xff), mc_w_u8(&w, version >> 8);
  mc_w_u8(&w, op & 0xff), mc_w_u8(&w, op >> 8);
  mc_w_u64(&w, 1);
  mc_w_u32(&w, len);
  mc_w_i32(&w, 0);
  memcpy(h, w.p, MC_MRPC_HDR);
  mc_w_free(&w);
}

static void test_malformed_frames(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  int fd = mc_tp_connect(e.mm.port);
  CHECK_EQ(send_raw(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 0); /* bad magic: dropped */
  CHECK_EQ(read_nothing(fd), INT32_MIN);
  close(fd);
  uint8_t h[MC_MRPC_HDR];
  fd = mc_tp_connect(e.mm.port);
  frame(h, MC_MRPC_VERSION, MC_OP_PUT_START, 5); /* truncated body */
  CHECK_EQ(send_raw(fd, h, sizeof(h)), 0);
  CHECK_EQ(send_raw(fd, "\x01\x02\x03\x04\x05", 5), 0);
  CHECK_EQ(read_status(fd), MC_INVALID_PARAMS);
  frame(h, MC_MRPC_VERSION, 777, 0); /* unknown opcode, same connection */
  CHECK_EQ(send_raw(fd, h, sizeof(h)), 0);
  CHECK_EQ(read_status(fd), MC_NOT_SUPPORTED);
  frame(h, MC_MRPC_VERSION, MC_OP_BATCH_EXIST_KEY, 4); /* count claims far more keys than bytes */
  CHECK_EQ(send_raw(fd, h, sizeof(h)), 0);
  CHECK_EQ(send_raw(fd, "\xff\xff\xff\x7f", 4), 0);
  CHECK_EQ(read_status(fd), MC_INVALID_PARAMS);
  frame(h, 99, MC_OP_PING, 0); /* wrong version: answered, then closed */
  CHECK_EQ(send_raw(fd, h, sizeof(h)), 0);
  CHECK_EQ(read_status(fd), MC_INVALID_VERSION);
  CHECK_EQ(read_nothing(fd), INT32_MIN);
  close(fd);
  fd = mc_tp_connect(e.mm.port);
  frame(h, MC_MRPC_VERSION, MC_OP_PING, 0xffffffffu); /* absurd length */
  CHECK_EQ(send_raw(fd, h, sizeof(h)), 0);
  CHECK_EQ(read_nothing(fd), INT32_MIN);
  close(fd);
  fd = mc_tp_connect(e.mm.port); /* a header cut short, then a hang-up */
  CHECK_EQ(send_raw(fd, h, 10), 0);
  close(fd);
  /* random garbage on many connections */
  for (int i = 0; i < 50; i++) {
    uint8_t junk[200];
    for (size_t j = 0; j < sizeof(junk); j++) junk[j] = (uint8_t)(rand() & 0xff);
    if (i % 2) memcpy(junk, h, 8); /* valid magic/version prefix */
    fd = mc_tp_connect(e.mm.port);
    send_raw(fd, junk, sizeof(junk));
    close(fd);
  }
  CHECK_EQ(mt_put(e.c, a, "alive", 100, 1), 0); /* still serving */
  CHECK_EQ(mt_exist(e.c, "alive"), 1);
  CHECK(!mc_tp_exited(e.mm.pid));
  env_stop(&e);
}

/* Many requests sent back to back on one connection, before any reply is read: bodies of every size
 * (several crossing the server's read-ahead buffer, some larger than it), each answered once, in order,
 * with its own id and result. */
struct pipe_send {
  int fd;
  const uint8_t *p;
  size_t n;
};

static void *pipe_sender(void *a) {
  struct pipe_send *ps = a;
  send_raw(ps->fd, ps->p, ps->n);
  return NULL;
}

static void pipe_frame(struct mc_wbuf *w, uint64_t id, uint16_t op, const struct mc_wbuf *body) {
  mc_w_u32(w, MC_MRPC_MAGIC);
  mc_w_u8(w, MC_MRPC_VERSION & 0xff), mc_w_u8(w, MC_MRPC_VERSION >> 8);
  mc_w_u8(w, op & 0xff), mc_w_u8(w, op >> 8);
  mc_w_u64(w, id);
  mc_w_u32(w, (uint32_t)body->len);
  mc_w_i32(w, 0);
  mc_w_bytes_raw(w, body->p, body->len);
}

static int recv_full(int fd, void *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = recv(fd, (uint8_t *)p + got, n - got, 0);
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

static void test_pipelined_frames(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "alive", 100, 1), 0);
  enum { N = 300, BIG_KEYS = 6000 };
  struct mc_wbuf all = {0};
  uint32_t want_keys[N];
  for (uint64_t i = 0; i < N; i++) {
    struct mc_wbuf body = {0};
    want_keys[i] = 0;
    if (i % 3 == 1) { /* an unknown opcode with a body of some size */
      for (size_t k = 0; k < (i * 997) % 9000; k++) mc_w_u8(&body, (uint8_t)k);
      pipe_frame(&all, 1000 + i, 777, &body);
    } else { /* a batch exist: two keys, or (every 50th) more than the read-ahead buffer holds */
      uint32_t n = i % 50 == 0 ? BIG_KEYS : 2;
      want_keys[i] = n;
      mc_w_u32(&body, n);
      for (uint32_t k = 0; k < n; k++) {
        char key[32];
        snprintf(key, sizeof(key), k == 0 ? "alive" : "missing-%012u", k);
        mc_w_u32(&body, (uint32_t)strlen(key));
        mc_w_bytes_raw(&body, key, strlen(key));
      }
      pipe_frame(&all, 1000 + i, MC_OP_BATCH_EXIST_KEY, &body);
    }
    mc_w_free(&body);
  }
  CHECK(all.len > 4 * 65536);
  int fd = mc_tp_connect(e.mm.port);
  REQUIRE(fd >= 0);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  struct pipe_send ps = {fd, all.p, all.len};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, pipe_sender, &ps) == 0);
  int bad = 0;
  for (uint64_t i = 0; i < N && !bad; i++) {
    uint8_t h[MC_MRPC_HDR];
    if (recv_full(fd, h, sizeof(h))) {
      CHECK(!"reply missing");
      bad = 1;
      break;
    }
    struct mc_rbuf_rd r;
    mc_r_init(&r, h, sizeof(h));
    (void)mc_r_u32(&r), (void)mc_r_u32(&r);
    uint64_t id = mc_r_u64(&r);
    uint32_t len = mc_r_u32(&r);
    int32_t st = mc_r_i32(&r);
    uint8_t *b = malloc(len ? len : 1);
    REQUIRE(b && recv_full(fd, b, len) == 0);
    CHECK_EQ(id, 1000 + i);
    if (want_keys[i]) {
      CHECK_EQ(st, 0);
      CHECK_EQ(len, 4 + 4 * want_keys[i]);
      mc_r_init(&r, b, len);
      CHECK_EQ(mc_r_u32(&r), want_keys[i]);
      CHECK_EQ(mc_r_i32(&r), 1); /* "alive" */
      for (uint32_t k = 1; k < want_keys[i] && !r.err; k++)
        if (mc_r_i32(&r) != 0) bad = 1;
    } else {
      CHECK_EQ(st, MC_NOT_SUPPORTED);
    }
    free(b);
    bad |= id != 1000 + i;
  }
  CHECK(!bad);
  pthread_join(th, NULL);
  close(fd);
  mc_w_free(&all);
  CHECK_EQ(mt_exist(e.c, "alive"), 1); /* the ordinary client is unaffected */
  env_stop(&e);
}

/* --rpc_conn_timeout_seconds closes a connection idle that long; the client library reconnects. */
static void test_idle_connection_timeout(void) {
  struct env e;
  const char *extra[] = {"--rpc_conn_timeout_seconds=1", "--rpc_thread_num=3", NULL};
  REQUIRE(env_start(&e, extra) == 0);
  int fd = mc_tp_connect(e.mm.port);
  REQUIRE(fd >= 0);
  CHECK_EQ(mt_exist(e.c, "nothing"), 0);
  char b;
  struct timeval tv = {4, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  long t0 = mc_tp_now_ms();
  CHECK_EQ(recv(fd, &b, 1, 0), 0); /* EOF from the master, not the 4 s receive timeout */
  CHECK(mc_tp_now_ms() - t0 < 3500);
  close(fd);
  CHECK_EQ(mt_exist(e.c, "nothing"), 0); /* its pooled connection was closed too: reconnected */
  env_stop(&e);
}

static void test_allocation_log(void) {
  const char *args[] = {"--v=1", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s1 = mt_seg(1, "10.0.0.1:1", BASE, MIB), s2 = mt_seg(2, "10.0.0.2:1", BASE + 4 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  CHECK_EQ(mt_mount(e.c, a, &s2), 0);
  CHECK_EQ(mt_put(e.c, a, "logkey", 1000, 2), 0);
  CHECK_EQ(mt_put(e.c, a, "logkey", 1000, 2), MC_OBJECT_ALREADY_EXISTS);
  CHECK_EQ(mt_wait_log(&e.mm, "ObjectAllocated key=logkey size=1000 replicas=2", 2000), 1);
  CHECK_EQ(mt_log_count(&e.mm, "Replica #1: segment=10.0.0."), 1);
  CHECK_EQ(mt_log_count(&e.mm, "key=logkey, info=object_already_exists"), 1);
  env_stop(&e);
  REQUIRE(env_start(&e, NULL) == 0); /* default verbosity: no per-request lines */
  CHECK_EQ(mt_mount(e.c, a, &s1), 0);
  CHECK_EQ(mt_put(e.c, a, "quiet", 1000, 1), 0);
  mc_tp_sleep_ms(100);
  CHECK_EQ(mt_log_count(&e.mm, "ObjectAllocated"), 0);
  CHECK_EQ(mt_log_count(&e.mm, "Master service started on port"), 1);
  env_stop(&e);
}

/* ------------------------------------------------------------------ concurrency and throughput */

struct worker {
  int port, id, ok;
};

static void *put_worker(void *arg) {
  struct worker *w = arg;
  struct mc_mrpc_client *c = mt_connect(w->port);
  for (int i = 0; i < 300; i++) {
    char key[64];
    snprintf(key, sizeof(key), "w%d-%d", w->id, i);
    w->ok += mt_put(c, mt_id(1), key, 512, 1) == 0 && mt_exist(c, key) == 1 && mt_remove(c, key, 1) == 0;
    /* (exist leases the key: the forced removal keeps its bytes until the lease ends) */
  }
  mc_mrpc_client_free(c);
  return NULL;
}

static void test_concurrent_clients(void) {
  const char *args[] = {"--default_kv_lease_ttl=200", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, 64 * MIB);
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s), 0);
  enum { N = 8 };
  pthread_t th[N];
  struct worker w[N];
  for (int i = 0; i < N; i++) {
    w[i] = (struct worker){.port = e.mm.port, .id = i};
    pthread_create(&th[i], NULL, put_worker, &w[i]);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(w[i].ok, 300);
  }
  uint32_t count;
  uint64_t used[1] = {1};
  /* every byte comes back once the last leases (200 ms) end */
  for (long t0 = mc_tp_now_ms(); used[0] && mc_tp_now_ms() - t0 < 5000; mc_tp_sleep_ms(20))
    CHECK_EQ(mt_query_segments(e.c, &count, NULL, NULL, used, 1), 0);
  CHECK_EQ(used[0], 0);
  env_stop(&e);
}

static void test_throughput(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, 1ull << 34);
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s), 0);
  enum { BATCH = 1000 };
  static char names[BATCH][24];
  const char *keys[BATCH];
  uint64_t lens[BATCH];
  int32_t st[BATCH];
  struct mc_put_config cfg = mt_cfg(1);
  for (int i = 0; i < BATCH; i++) {
    snprintf(names[i], sizeof(names[i]), "tp-key-%06d", i);
    keys[i] = names[i];
    lens[i] = 4096;
  }
  CHECK_EQ(mt_batch_put_start(e.c, mt_id(1), keys, lens, BATCH, &cfg, st, NULL), 0);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_PUT_END, mt_id(1), keys, BATCH, st), 0);
  long t0 = mc_tp_now_ms();
  int batches = 0;
  while (mc_tp_now_ms() - t0 < 1000) {
    CHECK_EQ(mt_batch_exist(e.c, keys, BATCH, st), 0);
    batches++;
  }
  double exist_rate = batches * (double)BATCH * 1000.0 / (double)(mc_tp_now_ms() - t0);
  CHECK_EQ(st[BATCH - 1], 1);
  t0 = mc_tp_now_ms();
  int puts = 0;
  while (mc_tp_now_ms() - t0 < 1000) {
    char key[32];
    snprintf(key, sizeof(key), "tp-put-%d", puts++);
    CHECK_EQ(mt_put(e.c, mt_id(1), key, 4096, 1), 0);
  }
  double put_rate = puts * 1000.0 / (double)(mc_tp_now_ms() - t0);
  t0 = mc_tp_now_ms();
  int exists = 0;
  while (mc_tp_now_ms() - t0 < 500) exists += mt_exist(e.c, "tp-put-1") == 1;
  double single_rate = exists * 1000.0 / (double)(mc_tp_now_ms() - t0);
  fprintf(stderr, "throughput (one client, loopback): batch exist %.0f keys/s, put start+end %.0f puts/s, exist %.0f/s\n",
          exist_rate, put_rate, single_rate);
  CHECK(exist_rate > 100000); /* floors that hold even under sanitizers; see docs/master.md for real numbers */
  CHECK(put_rate > 1000);
  env_stop(&e);
}

/* ------------------------------------------------------------------ upsert (docs/master.md, "Upsert") */

static uint64_t seg_used(struct mc_mrpc_client *c) {
  uint32_t count = 0;
  uint64_t used[1] = {~0ull};
  CHECK_EQ(mt_query_segments(c, &count, NULL, NULL, used, 1), 0);
  return used[0];
}

/* Waits (up to 5 s) until the first segment's used bytes are want; returns them. Leased space comes back
 * when the eviction thread next looks after the lease ended. */
static uint64_t used_becomes(struct mc_mrpc_client *c, uint64_t want) {
  uint64_t u = seg_used(c);
  for (long t0 = mc_tp_now_ms(); u != want && mc_tp_now_ms() - t0 < 5000; u = seg_used(c)) mc_tp_sleep_ms(20);
  return u;
}

static void test_upsert(void) {
  /* default timeouts (discard 30 s, release 600 s); 1 ms read leases, so that the gets below leave no
   * lease behind by the time of the next upsert (a leased object is never rewritten in place:
   * test_upsert_leased) */
  const char *args[] = {"--default_kv_lease_ttl=1", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  /* absent key: as PutStart */
  CHECK_EQ(mt_upsert_start(e.c, a, "u", 1000, &cfg, &reps, &n), 0);
  REQUIRE(n == 1);
  uint64_t addr = reps[0].address;
  CHECK_EQ(reps[0].size, 1000);
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_get(e.c, "u", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  CHECK_EQ(mt_upsert_end(e.c, b, "u"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_upsert_end(e.c, a, "u"), 0);
  CHECK_EQ(mt_get(e.c, "u", NULL, NULL, NULL), 0);
  mc_tp_sleep_ms(5); /* its lease ends */
  uint64_t used1 = seg_used(e.c);
  CHECK(used1 >= 1000);
  CHECK_EQ(mt_put_start(e.c, b, "u", 1000, &cfg, NULL, NULL), MC_OBJECT_ALREADY_EXISTS); /* put still refuses */
  /* same size: the same buffers, rewritten in place under the new owner */
  CHECK_EQ(mt_upsert_start(e.c, b, "u", 1000, &cfg, &reps, &n), 0);
  REQUIRE(n == 1);
  CHECK_EQ(reps[0].address, addr);
  CHECK_EQ(reps[0].status, 2 /* PROCESSING */);
  mc_replicas_free(reps, n);
  CHECK_EQ(seg_used(e.c), used1);
  CHECK_EQ(mt_get(e.c, "u", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  CHECK_EQ(mt_exist(e.c, "u"), 0);
  CHECK_EQ(mt_put_end(e.c, a, "u"), MC_ILLEGAL_CLIENT); /* the old writer lost the object */
  CHECK_EQ(mt_upsert_end(e.c, a, "u"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_put_revoke(e.c, a, "u"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_upsert_end(e.c, b, "u"), 0);
  CHECK_EQ(mt_upsert_end(e.c, b, "u"), 0); /* retry: all COMPLETE */
  CHECK_EQ(mt_get(e.c, "u", &reps, &n, NULL), 0);
  CHECK_EQ(n, 1);
  if (n) CHECK_EQ(reps[0].address, addr);
  mc_replicas_free(reps, n);
  mc_tp_sleep_ms(5);
  /* another size: old space freed, new allocation */
  CHECK_EQ(mt_upsert_start(e.c, a, "u", 5000, &cfg, &reps, &n), 0);
  REQUIRE(n == 1);
  CHECK_EQ(reps[0].size, 5000);
  mc_replicas_free(reps, n);
  uint64_t used2 = seg_used(e.c);
  CHECK(used2 >= 5000);
  CHECK(used2 < used1 + 5000); /* the 1000-byte replica is gone */
  CHECK_EQ(mt_upsert_end(e.c, a, "u"), 0);
  CHECK_EQ(mt_get(e.c, "u", &reps, &n, NULL), 0);
  CHECK_EQ(n, 1);
  if (n) CHECK_EQ(reps[0].size, 5000);
  mc_replicas_free(reps, n);
  mc_tp_sleep_ms(5);
  /* revoking an in-place upsert erases the object (its old bytes may be partly overwritten) */
  CHECK_EQ(mt_upsert_start(e.c, b, "u", 5000, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_upsert_revoke(e.c, a, "u"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_upsert_revoke(e.c, b, "u"), 0);
  CHECK_EQ(mt_get(e.c, "u", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(seg_used(e.c), 0);
  CHECK_EQ(mt_upsert_revoke(e.c, b, "u"), MC_OBJECT_NOT_FOUND);
  /* an in-progress put is pre-empted at once (no put_start_discard_timeout wait) */
  CHECK_EQ(mt_put_start(e.c, a, "p", 2000, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_put_start(e.c, b, "p", 2000, &cfg, NULL, NULL), MC_OBJECT_ALREADY_EXISTS);
  CHECK_EQ(mt_upsert_start(e.c, b, "p", 2000, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, a, "p"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_upsert_end(e.c, b, "p"), 0);
  CHECK_EQ(mt_get(e.c, "p", NULL, &n, NULL), 0);
  CHECK_EQ(n, 1);
  /* an in-progress upsert is pre-empted the same way */
  CHECK_EQ(mt_upsert_start(e.c, a, "p", 3000, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_upsert_start(e.c, b, "p", 3000, &cfg, NULL, NULL), 0);
  CHECK_EQ(mt_upsert_end(e.c, a, "p"), MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_upsert_end(e.c, b, "p"), 0);
  /* parameter checks as PutStart; no space -> NO_AVAILABLE_HANDLE */
  CHECK_EQ(mt_upsert_start(e.c, a, "", 10, &cfg, NULL, NULL), MC_INVALID_PARAMS);
  CHECK_EQ(mt_upsert_start(e.c, a, "z", 0, &cfg, NULL, NULL), MC_INVALID_PARAMS);
  CHECK_EQ(mt_upsert_start(e.c, a, "z", 2 * MIB, &cfg, NULL, NULL), MC_NO_AVAILABLE_HANDLE);
  CHECK_EQ(mt_get(e.c, "z", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  env_stop(&e);
}

/* A read lease protects the bytes a reader was pointed at: an upsert of a leased object gets fresh
 * space (or OBJECT_REPLICA_BUSY when there is none) and a forced removal keeps the space, in both
 * cases until the lease ends; only then is the old space freed or rewritten in place. */
static void test_upsert_leased(void) {
  const char *args[] = {"--default_kv_lease_ttl=300", NULL};
  struct env e;
  REQUIRE(env_start(&e, args) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  CHECK_EQ(mt_put(e.c, a, "u", 1000, 1), 0);
  CHECK_EQ(mt_get(e.c, "u", &reps, &n, NULL), 0); /* a reader holds a lease on these bytes */
  REQUIRE(n == 1);
  uint64_t old = reps[0].address, used1 = seg_used(e.c);
  mc_replicas_free(reps, n);
  /* same size, leased: new space; the old replica still counts as used */
  CHECK_EQ(mt_upsert_start(e.c, b, "u", 1000, &cfg, &reps, &n), 0);
  REQUIRE(n == 1);
  CHECK(reps[0].address != old);
  CHECK(reps[0].address >= old + 1000 || reps[0].address + 1000 <= old); /* no overlap */
  CHECK_EQ(reps[0].status, 2 /* PROCESSING */);
  mc_replicas_free(reps, n);
  CHECK(seg_used(e.c) >= 2 * used1);
  CHECK_EQ(mt_get(e.c, "u", NULL, NULL, NULL), MC_REPLICA_IS_NOT_READY);
  CHECK_EQ(mt_upsert_end(e.c, b, "u"), 0);
  /* while the lease runs, no new object is placed on the old bytes */
  for (int i = 0; i < 40; i++) {
    char key[16];
    snprintf(key, sizeof(key), "f%d", i);
    CHECK_EQ(mt_put_start(e.c, a, key, 1000, &cfg, &reps, &n), 0);
    if (n) CHECK(reps[0].address >= old + 1000 || reps[0].address + 1000 <= old);
    mc_replicas_free(reps, n);
    CHECK_EQ(mt_put_end(e.c, a, key), 0);
  }
  /* everything goes (the new value of "u" has not been read: no lease), except the old bytes of "u" */
  int64_t removed = 0;
  CHECK_EQ(mt_remove_many(e.c, NULL, 0, &removed), 0);
  CHECK_EQ(removed, 41);
  CHECK_EQ(seg_used(e.c), used1);
  mc_tp_sleep_ms(300); /* lease over: the eviction thread frees them */
  CHECK_EQ(used_becomes(e.c, 0), 0);
  /* no room for a second copy while leased: OBJECT_REPLICA_BUSY, and the old value stays readable */
  CHECK_EQ(mt_put(e.c, a, "big", 600 * 1024, 1), 0);
  CHECK_EQ(mt_get(e.c, "big", &reps, &n, NULL), 0);
  REQUIRE(n == 1);
  uint64_t big = reps[0].address;
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_upsert_start(e.c, b, "big", 600 * 1024, &cfg, NULL, NULL), MC_OBJECT_REPLICA_BUSY);
  CHECK_EQ(mt_upsert_start(e.c, b, "big", 700 * 1024, &cfg, NULL, NULL), MC_OBJECT_REPLICA_BUSY);
  CHECK_EQ(mt_get(e.c, "big", &reps, &n, NULL), 0);
  CHECK(n == 1 && reps[0].address == big && reps[0].status == 3 /* COMPLETE */);
  mc_replicas_free(reps, n);
  mc_tp_sleep_ms(400); /* lease over: in place again */
  CHECK_EQ(mt_upsert_start(e.c, b, "big", 600 * 1024, &cfg, &reps, &n), 0);
  CHECK(n == 1 && reps[0].address == big);
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_upsert_end(e.c, b, "big"), 0);
  /* forced removal of a leased object: the key goes at once, its space when the lease ends */
  uint64_t before = seg_used(e.c);
  CHECK_EQ(mt_put(e.c, a, "r", 4000, 1), 0);
  CHECK_EQ(mt_exist(e.c, "r"), 1); /* exist leases too */
  uint64_t with_r = seg_used(e.c);
  CHECK(with_r > before);
  CHECK_EQ(mt_remove(e.c, "r", 0), MC_OBJECT_HAS_LEASE);
  CHECK_EQ(mt_remove(e.c, "r", 1), 0);
  CHECK_EQ(mt_get(e.c, "r", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(seg_used(e.c), with_r);
  mc_tp_sleep_ms(300);
  CHECK_EQ(used_becomes(e.c, before), before);
  env_stop(&e);
}

static void test_upsert_batches(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, MIB);
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  struct mc_put_config cfg = mt_cfg(1);
  CHECK_EQ(mt_put(e.c, a, "same", 100, 1), 0);
  CHECK_EQ(mt_put(e.c, a, "grow", 100, 1), 0);
  CHECK_EQ(mt_put_start(e.c, a, "busy", 100, &cfg, NULL, NULL), 0);
  const char *keys[] = {"same", "grow", "busy", "new", ""};
  uint64_t lens[] = {100, 300, 100, 50, 10};
  int32_t st[5];
  uint32_t nrep[5];
  CHECK_EQ(mt_batch_upsert_start(e.c, b, keys, lens, 5, &cfg, st, nrep), 0);
  for (int i = 0; i < 4; i++) {
    CHECK_EQ(st[i], 0);
    CHECK_EQ(nrep[i], 1);
  }
  CHECK_EQ(st[4], MC_INVALID_PARAMS);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_UPSERT_END, a, keys, 4, st), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(st[i], MC_ILLEGAL_CLIENT);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_UPSERT_END, b, keys, 4, st), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(st[i], 0);
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  CHECK_EQ(mt_get(e.c, "grow", &reps, &n, NULL), 0);
  CHECK_EQ(n, 1);
  if (n) CHECK_EQ(reps[0].size, 300);
  mc_replicas_free(reps, n);
  /* batch revoke: every key erased */
  CHECK_EQ(mt_batch_upsert_start(e.c, a, keys, lens, 4, &cfg, st, NULL), 0);
  CHECK_EQ(mt_batch_end(e.c, MC_OP_BATCH_UPSERT_REVOKE, a, keys, 4, st), 0);
  for (int i = 0; i < 4; i++) {
    CHECK_EQ(st[i], 0);
    CHECK_EQ(mt_get(e.c, keys[i], NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  }
  /* two replicas still hold space: the pre-empted put of "busy" (its writer may still be writing, so it
   * waits for put_start + put_start_release_timeout_sec like any pre-empted put's) and the old bytes of
   * "grow", which the get above leased (they wait for the lease to end) */
  uint64_t used = seg_used(e.c);
  CHECK(used >= 400 && used < 500);
  env_stop(&e);
}

/* Every thread of the master names itself (docs/operations.md, "Thread names"): the RPC workers, the index
 * feed, eviction and housekeeping are told apart in `top -H`. */
static int has_thread(pid_t pid, const char *name) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  int found = 0;
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[384], comm[32] = "";
    snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(comm, sizeof(comm), f)) comm[strcspn(comm, "\n")] = 0;
    if (f) fclose(f);
    found = !strcmp(comm, name);
  }
  if (d) closedir(d);
  return found;
}

static void test_thread_names(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL) == 0);
  const char *names[] = {"mc-rpc", "mc-hidx-feed", "mc-evict", "mc-housekeep"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    /* a thread names itself when it first runs, which may come after the master says it started */
    int found = 0;
    for (int t = 0; t < 500 && !(found = has_thread(e.mm.pid, names[i])); t++) usleep(10000);
    if (!found) {
      fprintf(stderr, "mooncake_master has no thread named %s\n", names[i]);
      CHECK(0);
    }
  }
  env_stop(&e);
}

TEST_MAIN(TEST_CASE(test_lifecycle), TEST_CASE(test_thread_names), TEST_CASE(test_ownership_and_revoke), TEST_CASE(test_preemption_and_release),
          TEST_CASE(test_leases), TEST_CASE(test_batches), TEST_CASE(test_upsert), TEST_CASE(test_upsert_leased), TEST_CASE(test_upsert_batches), TEST_CASE(test_regex_and_remove_all),
          TEST_CASE(test_best_effort_distinct_names), TEST_CASE(test_mount_unmount), TEST_CASE(test_graceful_unmount),
          TEST_CASE(test_zone_preference), TEST_CASE(test_strategies), TEST_CASE(test_pin_parameters),
          TEST_CASE(test_malformed_frames), TEST_CASE(test_pipelined_frames), TEST_CASE(test_idle_connection_timeout), TEST_CASE(test_allocation_log), TEST_CASE(test_concurrent_clients),
          TEST_CASE(test_throughput))
