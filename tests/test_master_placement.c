/* Placement semantics over the master's indexes (docs/master.md, "Placement"), in-process: `random` spreads
 * uniformly within a tier; `free_ratio_first` takes the emptiest of its sample; `local_first` follows the host
 * order among 50 hosts; preferred segments come first,
 * in order; locality order writer's host -> writer's zone -> the rest, with thousands of segments outside the
 * writer's tiers; tenants place only on their realm's segments. And the registry itself under churn: after
 * random mounts, unmounts, graceful unmounts and client expiries, every index agrees with the segment table
 * and the running usage sums with the allocators (docs/master.md, "Data structures"); the clients' expiry
 * timers; placement cost flat in the segment count. */
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "master/master.h"
#include "master/master_int.h"
#include "master_core/config.h"

#define BASE 0x100000000000ull
#define SEG (64ull << 20)

static struct mc_master *master_new(struct mc_master_cfg *c, int strategy) {
  char err[256];
  mc_master_cfg_defaults(c);
  mc_master_cfg_finalize(c, err, sizeof(err));
  struct mc_master *m = NULL;
  CHECK_EQ(mc_master_create(c, &m), 0);
  if (m) m->cfg.strategy = strategy;
  return m;
}

static void master_free(struct mc_master *m, struct mc_master_cfg *c) {
  mc_master_destroy(m);
  mc_master_cfg_free(c);
}

/* Segment i ("s<i>:1", client i) in zone and on host ("" = none), of size bytes; tenant NULL = the cluster. */
static struct mc_segment_rec rec(int i, char *name, size_t nlen, const char *zone, const char *host, uint64_t size) {
  snprintf(name, nlen, "s%d:1", i);
  struct mc_segment_rec r = mt_seg((uint64_t)i, name, BASE + (uint64_t)i * SEG, size);
  r.zone = (char *)zone;
  r.host_id = (char *)host;
  return r;
}

static int mount(struct mc_master *m, int i, const char *zone, const char *host, uint64_t size, const char *tenant) {
  char name[32];
  struct mc_segment_rec r = rec(i, name, sizeof(name), zone, host, size);
  r.tenant = tenant;
  return mc_master_mount(m, &r, mt_id((uint64_t)i));
}

/* PutStart of key: the segment numbers of its replicas in order (from "s<i>:1"), their count returned. */
static uint32_t put_on(struct mc_master *m, const char *key, uint64_t len, const struct mc_put_config *pc, int *segs,
                       uint32_t max) {
  struct mc_wbuf w = {0};
  uint32_t n = 0;
  if (!mc_master_put_start(m, mt_id(999999), key, (uint32_t)strlen(key), len, pc, &w)) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, w.p, w.len);
    struct mc_replica_rec *reps;
    n = mc_get_replicas(&r, &reps);
    for (uint32_t i = 0; i < n && i < max; i++) segs[i] = atoi(reps[i].segment_name + 1);
    mc_replicas_free(reps, n);
  }
  mc_w_free(&w);
  return n;
}

/* Puts `puts` one-replica keys and counts where they went (count[i] for segment i < nseg). */
static void spread(struct mc_master *m, const struct mc_put_config *pc, int puts, int *count, int nseg,
                   const char *prefix) {
  memset(count, 0, sizeof(*count) * (size_t)nseg);
  for (int k = 0; k < puts; k++) {
    char key[48];
    int at = -1;
    snprintf(key, sizeof(key), "%s-%d", prefix, k);
    if (put_on(m, key, 1024, pc, &at, 1) == 1 && at >= 0 && at < nseg) count[at]++;
  }
}

/* Every segment of [lo, hi) got its share of `total` within 20 % (expected >= 500: the spread of a fair
 * draw is under 5 %), and none outside got any. */
static void check_uniform(const int *count, int nseg, int lo, int hi, int total) {
  double mean = (double)total / (hi - lo);
  for (int i = 0; i < nseg; i++) {
    if (i < lo || i >= hi) {
      CHECK_EQ(count[i], 0);
      continue;
    }
    if (fabs(count[i] - mean) > 0.2 * mean) fprintf(stderr, "segment %d: %d puts, mean %.0f\n", i, count[i], mean);
    CHECK(fabs(count[i] - mean) <= 0.2 * mean);
  }
}

static void test_random_uniform_within_tier(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
  REQUIRE(m);
  enum { NSEG = 24, PUTS = 8 * 1500 };
  /* 0-3 on the writer's host (H1, zone Z1), 4-7 in its zone (other hosts), 8-23 elsewhere */
  for (int i = 0; i < NSEG; i++)
    CHECK_EQ(mount(m, i, i < 8 ? "Z1" : "Z2", i < 4 ? "H1" : i < 8 ? "H2" : "H3", SEG, NULL), 0);
  int count[NSEG];
  struct mc_put_config pc = mt_cfg(1);
  pc.writer_host_id = "H1";
  pc.writer_zone = "Z1";
  spread(m, &pc, PUTS / 2, count, NSEG, "host");
  check_uniform(count, NSEG, 0, 4, PUTS / 2); /* the writer's host only, evenly */
  pc.writer_host_id = "H9";
  spread(m, &pc, PUTS / 2, count, NSEG, "zone");
  check_uniform(count, NSEG, 0, 8, PUTS / 2); /* no segment on its host: its zone, host H1 included */
  pc.writer_host_id = "";
  pc.writer_zone = "";
  spread(m, &pc, PUTS * 2, count, NSEG, "any");
  check_uniform(count, NSEG, 0, NSEG, PUTS * 2); /* no locality: every segment */
  master_free(m, &c);
}

/* Locality order with the writer's tiers small among thousands of segments: host, then zone, then the rest,
 * one replica each; the rest tier is never one of the writer's; after the host segments leave, the zone. */
static void test_locality_order_at_scale(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
  REQUIRE(m);
  enum { NSEG = 5000 };
  for (int i = 0; i < NSEG; i++)
    CHECK_EQ(mount(m, i, i < 3 ? "ZW" : "Z0", i < 2 ? "HW" : "H0", SEG, NULL), 0);
  struct mc_put_config pc = mt_cfg(3);
  pc.writer_host_id = "HW";
  pc.writer_zone = "ZW";
  int hist[3] = {0, 0, 0};
  for (int k = 0; k < 300; k++) {
    char key[32];
    int at[3] = {-1, -1, -1};
    snprintf(key, sizeof(key), "loc-%d", k);
    CHECK_EQ(put_on(m, key, 1024, &pc, at, 3), 3);
    CHECK(at[0] == 0 || at[0] == 1);       /* the writer's host */
    CHECK(at[1] == 0 || at[1] == 1);       /* its second segment: host before zone */
    CHECK(at[1] != at[0]);
    CHECK(at[2] == 2 || at[2] >= 3);       /* then the zone's other segment, or beyond */
    hist[0] += at[2] == 2;
  }
  CHECK_EQ(hist[0], 300); /* two host segments, then the zone: s2 every time */
  /* the host's segments leave: zone first, then the rest (anywhere but the zone) */
  CHECK_EQ(mc_master_unmount(m, mt_id(1000), mt_id(0), NULL), 0);
  CHECK_EQ(mc_master_unmount(m, mt_id(1001), mt_id(1), NULL), 0);
  int rest_seen = 0;
  for (int k = 0; k < 300; k++) {
    char key[32];
    int at[3] = {-1, -1, -1};
    snprintf(key, sizeof(key), "loc2-%d", k);
    CHECK_EQ(put_on(m, key, 1024, &pc, at, 3), 3);
    CHECK_EQ(at[0], 2);
    CHECK(at[1] >= 3 && at[2] >= 3 && at[1] != at[2]);
    rest_seen += at[1] >= 3;
  }
  CHECK_EQ(rest_seen, 300);
  master_free(m, &c);
}

/* free_ratio_first: with at most 6 x replicas segments the sample holds them all, so the emptiest is taken
 * every time, and the two emptiest for two replicas, emptiest first. */
static void test_free_ratio_first_takes_the_freest(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_FREE_RATIO_FIRST);
  REQUIRE(m);
  enum { NSEG = 6 };
  for (int i = 0; i < NSEG; i++) CHECK_EQ(mount(m, i, "", "", 1 << 20, NULL), 0);
  /* fill: segment i is (6 - i) x 100 KiB full, so s5 is the emptiest, then s4 */
  for (int i = 0; i < NSEG; i++) {
    struct mc_put_config pref = mt_cfg(1);
    char name[32], key[32];
    snprintf(name, sizeof(name), "s%d:1", i);
    snprintf(key, sizeof(key), "fill-%d", i);
    pref.n_preferred = 1;
    pref.preferred[0] = name;
    int at = -1;
    CHECK_EQ(put_on(m, key, (uint64_t)(NSEG - i) * 100 * 1024, &pref, &at, 1), 1);
    CHECK_EQ(at, i);
  }
  struct mc_put_config two = mt_cfg(2);
  int at[2];
  CHECK_EQ(put_on(m, "two", 1024, &two, at, 2), 2);
  CHECK_EQ(at[0], 5);
  CHECK_EQ(at[1], 4);
  struct mc_put_config one = mt_cfg(1);
  for (int k = 0; k < 20; k++) { /* 20 KiB more on s5 stays far emptier than s4 */
    char key[32];
    snprintf(key, sizeof(key), "fr-%d", k);
    CHECK_EQ(put_on(m, key, 1024, &one, at, 1), 1);
    CHECK_EQ(at[0], 5);
  }
  master_free(m, &c);
}

/* local_first: the writer's host's segments first, then the other hosts in cyclic host-id order after the
 * writer's (wrapping around), each host's segments by name; a full host is passed over for the next. */
static void test_local_first_host_order(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_LOCAL_FIRST);
  REQUIRE(m);
  enum { HOSTS = 50 };
  for (int i = 0; i < 2 * HOSTS; i++) { /* host hNN holds s(2NN) and s(2NN+1) */
    char host[16];
    snprintf(host, sizeof(host), "h%02d", i / 2);
    CHECK_EQ(mount(m, i, "", host, 1 << 20, NULL), 0);
  }
  struct mc_put_config pc = mt_cfg(3);
  pc.writer_host_id = "h20";
  int at[3];
  CHECK_EQ(put_on(m, "lf1", 1024, &pc, at, 3), 3);
  CHECK((at[0] == 40 && at[1] == 41) || (at[0] == 41 && at[1] == 40));
  CHECK_EQ(at[2], 42); /* h21, its first name */
  pc.writer_host_id = "h49";
  CHECK_EQ(put_on(m, "lf2", 1024, &pc, at, 3), 3);
  CHECK_EQ(at[2], 0); /* after the last host: h00 */
  struct mc_put_config pref = mt_cfg(1);
  pref.n_preferred = 1;
  pref.preferred[0] = "s42:1"; /* fill h21: 1 KiB left on each of its segments */
  CHECK_EQ(put_on(m, "fill42", (1 << 20) - 2048, &pref, at, 1), 1);
  pref.preferred[0] = "s43:1";
  CHECK_EQ(put_on(m, "fill43", (1 << 20) - 1024, &pref, at, 1), 1);
  struct mc_put_config one = mt_cfg(1);
  one.writer_host_id = "h205"; /* no segment there; sorts between h20 and h21 */
  CHECK_EQ(put_on(m, "lf3", 2048, &one, at, 1), 1);
  CHECK_EQ(at[0], 44); /* h21 full: h22 */
  CHECK_EQ(put_on(m, "lf4", 1000, &one, at, 1), 1);
  CHECK_EQ(at[0], 42); /* what fits in h21 still goes there */
  master_free(m, &c);
}

/* Preferred segments first, in the order given, over host and zone; a name that is not allocatable (in its
 * grace period) is skipped; one that is unknown is ignored. */
static void test_preferred_first_in_order(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
  REQUIRE(m);
  for (int i = 0; i < 200; i++) CHECK_EQ(mount(m, i, i < 2 ? "ZW" : "Z0", i < 1 ? "HW" : "H0", SEG, NULL), 0);
  struct mc_put_config pc = mt_cfg(3);
  pc.writer_host_id = "HW";
  pc.writer_zone = "ZW";
  pc.n_preferred = 3;
  pc.preferred[0] = "s150:1";
  pc.preferred[1] = "nowhere:1";
  pc.preferred[2] = "s77:1";
  int at[3];
  CHECK_EQ(put_on(m, "pref", 1024, &pc, at, 3), 3);
  CHECK_EQ(at[0], 150);
  CHECK_EQ(at[1], 77);
  CHECK_EQ(at[2], 0); /* then the writer's host */
  CHECK_EQ(mc_master_graceful_unmount(m, mt_id(1150), mt_id(150), 60000, NULL), 0);
  CHECK_EQ(put_on(m, "pref2", 1024, &pc, at, 3), 3);
  CHECK_EQ(at[0], 77);
  CHECK_EQ(at[1], 0);
  CHECK_EQ(at[2], 1); /* the zone */
  master_free(m, &c);
}

/* A tenant's puts land only on its realm's segments, spread evenly over them however few they are among
 * the others (its rest tier is its realm's group: a walk of 100 segments from a random start among all of
 * them found none half of the time); a realm with none gets NO_AVAILABLE_HANDLE and no eviction. */
static void test_tenant_realm(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
  REQUIRE(m);
  enum { NSEG = 2000, EVERY = 200, PUTS = 5000 };
  for (int i = 0; i < NSEG; i++) CHECK_EQ(mount(m, i, "", "", SEG, i % EVERY == 7 ? "acme" : NULL), 0);
  static int count[NSEG];
  struct mc_put_config pc = mt_cfg(1);
  pc.tenant = "acme";
  spread(m, &pc, PUTS, count, NSEG, "t");
  double mean = (double)PUTS / (NSEG / EVERY);
  for (int i = 0; i < NSEG; i++) {
    if (i % EVERY != 7) CHECK_EQ(count[i], 0);
    else CHECK(fabs(count[i] - mean) <= 0.2 * mean);
  }
  pc.tenant = "nobody";
  struct mc_wbuf w = {0};
  CHECK_EQ(mc_master_put_start(m, mt_id(1), "t-none", 6, 1024, &pc, &w), MC_NO_AVAILABLE_HANDLE);
  CHECK_EQ(atomic_load(&m->need_eviction), 0); /* nothing of that realm to evict into */
  mc_w_free(&w);
  master_free(m, &c);
}

/* Every index agrees with m->segs, and the usage sums with the allocators. */
static void check_registry(struct mc_master *m) {
  uint64_t used = 0, cap = 0, u, k;
  pthread_rwlock_rdlock(&m->seg_mu); /* the housekeeping thread fires grace timers meanwhile */
  for (uint32_t i = 0; i < m->nsegs; i++) {
    struct mseg *s = m->segs[i];
    CHECK_EQ(s->pos[MC_POS_ALL], i);
    CHECK(mc_seg_find_locked(m, s->id) == s);
    struct mclient *c = mc_client_find_locked(m, s->client);
    REQUIRE(c);
    CHECK(c->segs[s->pos[MC_POS_CLIENT]] == s);
    for (int g = 0; g < MC_NGRP; g++) CHECK(s->grp[g]);
    used += atomic_load(&s->used);
    cap += mc_tlsf_capacity(s->tlsf);
  }
  CHECK_EQ(m->seg_ids.n, m->nsegs);
  if (m->cfg.strategy == MC_STRATEGY_LOCAL_FIRST) { /* the host order: every host group, sorted */
    CHECK_EQ(m->nhost_order, m->groups[MC_GRP_HOST].n);
    for (uint32_t i = 1; i < m->nhost_order; i++) CHECK(strcmp(m->host_order[i - 1]->key, m->host_order[i]->key) < 0);
  }
  mc_usage(m, &u, &k);
  pthread_rwlock_unlock(&m->seg_mu);
  CHECK_EQ(u, used);
  CHECK_EQ(k, cap);
}

static uint64_t rnd_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return mc_tp_xorshift(&rnd_state); }

static void churn(int strategy) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, strategy);
  REQUIRE(m);
  enum { IDS = 400 };
  static const char *zones[] = {"", "Z1", "Z2"}, *hosts[] = {"", "H1", "H2", "H3"};
  struct mc_put_config pc = mt_cfg(2);
  for (int round = 0; round < 4000; round++) {
    int i = (int)(rnd() % IDS), op = (int)(rnd() % 10);
    if (op < 5) {
      mount(m, i, zones[i % 3], hosts[i % 4], 1 << 20, NULL);
    } else if (op < 7) {
      CHECK_EQ(mc_master_unmount(m, mt_id(1000 + (uint64_t)i), mt_id((uint64_t)i), NULL), 0);
    } else if (op < 8) {
      CHECK_EQ(mc_master_graceful_unmount(m, mt_id(1000 + (uint64_t)i), mt_id((uint64_t)i), 0, NULL), 0);
    } else if (op < 9) {
      mc_client_expire(m, mt_id((uint64_t)i), "test", NULL);
    } else {
      char key[32];
      int at[2];
      snprintf(key, sizeof(key), "churn-%d", round);
      pc.writer_zone = (char *)zones[round % 3];
      pc.writer_host_id = (char *)hosts[round % 4];
      put_on(m, key, 4096, &pc, at, 2);
    }
    if (round % 97 == 0) check_registry(m);
  }
  check_registry(m);
  master_free(m, &c);
}

static void test_registry_under_churn(void) {
  churn(MC_STRATEGY_RANDOM);
  churn(MC_STRATEGY_LOCAL_FIRST);
}

static int mounted(struct mc_master *m, int i) {
  pthread_rwlock_rdlock(&m->seg_mu);
  int yes = mc_seg_find_locked(m, mt_id(1000 + (uint64_t)i)) != NULL;
  pthread_rwlock_unlock(&m->seg_mu);
  return yes;
}

/* The expiry heap (docs/master.md, "Liveness and metadata cleanup"): clients that ping outlive many TTLs
 * (their timers come due and are pushed again), the silent ones expire within a TTL and a tick, and a client
 * expired and added again expires by its new incarnation's timer. */
static void test_client_expiry_timers(void) {
  struct mc_master_cfg c;
  struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
  REQUIRE(m);
  m->cfg.client_ttl = 1;
  enum { N = 40 };
  for (int i = 0; i < N; i++) CHECK_EQ(mount(m, i, "", "", 1 << 20, NULL), 0);
  CHECK_EQ(mount(m, 50, "", "", 1 << 20, NULL), 0);
  mc_client_expire(m, mt_id(50), "test", NULL);
  CHECK(!mounted(m, 50));
  CHECK_EQ(mount(m, 50, "", "", 1 << 20, NULL), 0); /* a new incarnation, silent from now on */
  uint64_t t0 = mc_now_ns();
  while (mc_now_ns() - t0 < 2600 * MC_NS_PER_MS) {
    for (int i = 0; i < N / 2; i++) {
      uint8_t st;
      mc_master_ping(m, mt_id((uint64_t)i), &st);
    }
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < N; i++) CHECK_EQ(mounted(m, i), i < N / 2);
  CHECK(!mounted(m, 50));
  struct timespec ts = {1, 500 * 1000000L}; /* everyone silent: all gone */
  nanosleep(&ts, NULL);
  for (int i = 0; i < N / 2; i++) CHECK(!mounted(m, i));
  CHECK_EQ(m->clients.n, 0);
  master_free(m, &c);
}

/* Placement cost does not grow with the segment count: the same puts with 20 000 segments as with 2 000.
 * A walk over the table would make them 10-100x slower. What remains is memory: a put touches a random
 * segment's record and allocator, ~30 MiB of them at 20 000, so caches and the TLB make them 1-3x slower
 * in-process (over RPC, where a put costs ~30 us, it does not show: docs/master.md, "Scale"). */
static void test_put_cost_flat(void) {
  double rate[2];
  for (int t = 0; t < 2; t++) {
    struct mc_master_cfg c;
    struct mc_master *m = master_new(&c, MC_STRATEGY_RANDOM);
    REQUIRE(m);
    int nseg = t ? 20000 : 2000;
    for (int i = 0; i < nseg; i++) CHECK_EQ(mount(m, i, "Z1", "H1", SEG, NULL), 0);
    struct mc_put_config pc = mt_cfg(1);
    pc.writer_host_id = "H9"; /* neither host nor zone tier: every segment is in the rest */
    pc.writer_zone = "Z9";
    struct mc_wbuf w = {0};
    uint64_t t0 = mc_now_ns();
    for (int k = 0; k < 50000; k++) {
      char key[32];
      int n = snprintf(key, sizeof(key), "flat-%d", k);
      w.len = 0;
      CHECK_EQ(mc_master_put_start(m, mt_id(1), key, (uint32_t)n, 1024, &pc, &w), 0);
    }
    rate[t] = 50000 / ((double)(mc_now_ns() - t0) / 1e9);
    mc_w_free(&w);
    master_free(m, &c);
  }
  fprintf(stderr, "PutStart in-process: %.0f/s with 2000 segments, %.0f/s with 20000\n", rate[0], rate[1]);
#ifndef __SANITIZE_THREAD__
  CHECK(rate[1] > 0.15 * rate[0]);
#endif
}

TEST_MAIN(TEST_CASE(test_random_uniform_within_tier), TEST_CASE(test_locality_order_at_scale),
          TEST_CASE(test_free_ratio_first_takes_the_freest), TEST_CASE(test_local_first_host_order),
          TEST_CASE(test_preferred_first_in_order),
          TEST_CASE(test_tenant_realm), TEST_CASE(test_registry_under_churn), TEST_CASE(test_client_expiry_timers),
          TEST_CASE(test_put_cost_flat))
