/* The store client's one-round-trip put (src/client/put.c through write_extents.c's write extents) against a real mooncake_master: puts go
 * through a write extent (one reserve for many puts), an existing key keeps its value, two clients
 * racing on the same keys leave one intact value per key, MC_STORE_PUT_EXTENTS=0 turns it off, and
 * extents the master took away (the holder's segment unmounted, the master restarted) make that put
 * fall back to PutStart/PutEnd with the same result, never touching another object's bytes. */
#include <pthread.h>

#include "lib/http.h"
#include "test_store_harness.c"

static int log_count(const struct master *m, const char *needle) {
  FILE *f = fopen(m->log, "r");
  int n = 0;
  char line[4096];
  while (f && fgets(line, sizeof(line), f)) n += strstr(line, needle) != NULL;
  if (f) fclose(f);
  return n;
}

static int start(struct master *m, const char *extra) {
  const char *args[] = {"--v=1", extra, NULL};
  return master_start(m, args);
}

/* n keys "<tag>-<i>" of size bytes, value seed base + i */
static int put_keys(mooncake_store_t s, const char *tag, int n, uint64_t size, unsigned base) {
  uint8_t *v = malloc(size);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    char key[64];
    snprintf(key, sizeof(key), "%s-%d", tag, i);
    fill(v, size, base + (unsigned)i);
    bad += mooncake_store_put(s, key, v, size, NULL) != 0;
  }
  free(v);
  return bad;
}

/* How many of the keys "<tag>-<i>" (i < n) do not read back as sizes[i] bytes of seed base + i; a key of
 * size 0 must be absent. */
static int check_sized(mooncake_store_t s, const char *tag, int n, const size_t *sizes, unsigned base) {
  size_t max = 1;
  for (int i = 0; i < n; i++) max = sizes[i] > max ? sizes[i] : max;
  uint8_t *v = malloc(max);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    char key[64];
    snprintf(key, sizeof(key), "%s-%d", tag, i);
    memset(v, 0, max);
    long long got = mooncake_store_get_into(s, key, v, max);
    bad += sizes[i] ? got != (long long)sizes[i] || !verify(v, sizes[i], base + (unsigned)i) : got != MC_OBJECT_NOT_FOUND;
  }
  free(v);
  return bad;
}

static int check_keys(mooncake_store_t s, const char *tag, int n, uint64_t size, unsigned base) {
  size_t *sizes = malloc((size_t)n * sizeof(*sizes) + 1);
  for (int i = 0; i < n; i++) sizes[i] = size;
  int bad = check_sized(s, tag, n, sizes, base);
  free(sizes);
  return bad;
}

static void test_fast_path_used(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t s = client_new(&m, 64 * MiB, 4 * MiB), r = client_new(&m, 0, 4 * MiB);
  REQUIRE(s && r);
  CHECK_EQ(put_keys(s, "fast", 200, 4 * KiB, 1), 0);
  CHECK_EQ(check_keys(s, "fast", 200, 4 * KiB, 1), 0);
  CHECK_EQ(check_keys(r, "fast", 200, 4 * KiB, 1), 0); /* readable by anyone once put returned */
  CHECK_EQ(log_count(&m, "action=reserve_extent"), 1); /* 800 KiB in one 1 MiB extent */
  CHECK_EQ(log_count(&m, "ObjectAllocated key=fast-"), 200);
  /* an existing key returns 0 and keeps the value */
  CHECK_EQ(put_keys(s, "fast", 10, 4 * KiB, 99), 0);
  CHECK_EQ(check_keys(r, "fast", 200, 4 * KiB, 1), 0);
  /* sizes the fast path declines (and odd sizes it takes) all round-trip */
  CHECK_EQ(put_keys(s, "odd", 20, 4 * KiB + 3, 7), 0);
  CHECK_EQ(put_keys(s, "big", 3, 512 * KiB, 8), 0);
  CHECK_EQ(put_keys(s, "huge", 2, 3 * MiB, 9), 0);
  CHECK_EQ(check_keys(r, "odd", 20, 4 * KiB + 3, 7), 0);
  CHECK_EQ(check_keys(r, "big", 3, 512 * KiB, 8), 0);
  CHECK_EQ(check_keys(r, "huge", 2, 3 * MiB, 9), 0);
  /* removal frees: the whole cycle again fits */
  CHECK_EQ(mooncake_store_remove_all(s, 1), 225);
  mooncake_store_destroy(r);
  mooncake_store_destroy(s);
  CHECK(log_count(&m, "reason=released_by_client") >= 1);
  master_stop(&m);
}

/* A counter of the master's /metrics (NAN when unreadable). */
static double metric(const struct master *m, const char *name) {
  struct th_resp r;
  double v = th_get(m->metrics, "/metrics", &r) == 200 ? th_prom_value(r.body, name) : NAN;
  th_free(&r);
  return v;
}

/* One batch_put_from of keys "<tag>-<i>" (i < n), value i of sizes[i] bytes with seed base + i; the
 * per-key results go to res. Returns the call's own return value. */
static int batch_put(mooncake_store_t s, const char *tag, int n, const size_t *sizes, unsigned base, int *res) {
  char **keys = calloc((size_t)n, sizeof(char *));
  void **bufs = calloc((size_t)n, sizeof(void *));
  for (int i = 0; i < n; i++) {
    keys[i] = malloc(64);
    snprintf(keys[i], 64, "%s-%d", tag, i);
    bufs[i] = malloc(sizes[i] ? sizes[i] : 1);
    fill(bufs[i], sizes[i], base + (unsigned)i);
  }
  int rc = mooncake_store_batch_put_from(s, (const char **)keys, bufs, sizes, (size_t)n, NULL, res);
  for (int i = 0; i < n; i++) free(keys[i]), free(bufs[i]);
  free(keys);
  free(bufs);
  return rc;
}

/* Batch puts go through write extents too: a batch of small keys takes one reserve and one
 * BATCH_COMMIT_PUT (no PutStart); existing keys keep their values; the keys the extent path declines
 * (0 bytes, over 1 MiB) and whole batches of more than 4 MiB of values end exactly as on the
 * PutStart/PutEnd path; every value reads back intact from another client. */
static void test_batch_fast_path(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  /* a 256 MiB segment: extents of 4 MiB (1/64 of it), which take values up to 512 KiB (1/8) */
  mooncake_store_t s = client_new(&m, 256 * MiB, 4 * MiB), r = client_new(&m, 0, 4 * MiB);
  REQUIRE(s && r);
  /* the holder's first ping answers NEED_REMOUNT (as upstream), and a remount retires its write extent: let
   * that happen first, so the counts of extents reserved below do not depend on when it comes */
  for (long t0 = mc_tp_now_ms(); !log_count(&m, "action=remount_segments") && mc_tp_now_ms() - t0 < 5000;)
    mc_tp_sleep_ms(20);
  CHECK(log_count(&m, "action=remount_segments") >= 1);
  int res[64];
  size_t sz[64];
  for (int i = 0; i < 64; i++) sz[i] = 4 * KiB + (size_t)i * 8 + (i % 3); /* odd sizes too */
  CHECK_EQ(batch_put(s, "bat", 64, sz, 300, res), 0);
  int bad = 0;
  for (int i = 0; i < 64; i++) bad += res[i] != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(log_count(&m, "action=reserve_extent"), 1);
  CHECK_EQ(log_count(&m, "ObjectAllocated key=bat-"), 64);
  CHECK_EQ(metric(&m, "master_batch_commit_put_requests_total"), 1);
  CHECK_EQ(metric(&m, "master_batch_commit_put_items_total"), 64);
  CHECK_EQ(metric(&m, "master_batch_put_start_requests_total"), 0);
  CHECK_EQ(check_sized(r, "bat", 64, sz, 300), 0);

  /* again with new values: every key exists, so each keeps its first value and answers 0 */
  CHECK_EQ(batch_put(s, "bat", 64, sz, 900, res), 0);
  for (int i = 0; i < 64; i++) bad += res[i] != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(check_sized(r, "bat", 64, sz, 300), 0);

  /* a mixed batch: 0 bytes (-600) and values over 1 MiB (PutStart/PutEnd) beside 2 MiB of small ones
   * (through the extent) */
  size_t mix[14];
  mix[0] = 0, mix[1] = 2 * MiB, mix[2] = MiB + 1, mix[3] = 100;
  for (int i = 4; i < 14; i++) mix[i] = 200 * KiB;
  double starts = metric(&m, "master_batch_put_start_items_total");
  double commits = metric(&m, "master_batch_commit_put_items_total");
  CHECK_EQ(batch_put(s, "mix", 14, mix, 500, res), 0);
  CHECK_EQ(res[0], MC_INVALID_PARAMS);
  for (int i = 1; i < 14; i++) bad += res[i] != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(metric(&m, "master_batch_put_start_items_total") - starts, 2);
  CHECK_EQ(metric(&m, "master_batch_commit_put_items_total") - commits, 11);
  CHECK_EQ(check_sized(r, "mix", 14, mix, 500), 0); /* mix-0 (0 bytes) absent */
  CHECK_EQ(log_count(&m, "action=reserve_extent"), 1); /* 2.3 MiB of one 4 MiB extent so far */

  /* a batch of more than 4 MiB of eligible values takes PutStart/PutEnd as a whole */
  size_t big[20];
  for (int i = 0; i < 20; i++) big[i] = 256 * KiB;
  starts = metric(&m, "master_batch_put_start_items_total");
  commits = metric(&m, "master_batch_commit_put_items_total");
  CHECK_EQ(batch_put(s, "big", 20, big, 700, res), 0);
  for (int i = 0; i < 20; i++) bad += res[i] != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(metric(&m, "master_batch_put_start_items_total") - starts, 20);
  CHECK_EQ(metric(&m, "master_batch_commit_put_items_total") - commits, 0);
  CHECK_EQ(check_keys(r, "big", 20, 256 * KiB, 700), 0);
  mooncake_store_destroy(r);
  mooncake_store_destroy(s);
  master_stop(&m);
}

/* A pure client (no segment, no pings; here in another process) gets a lease-only extent: one reserve
 * for its small puts; after idling past the lease it does not write that extent again (the master
 * reclaimed it) and reserves anew; killed while holding one, its reserved bytes come back within the
 * lease (client_ttl), as a dead live client's would. */
static void test_pure_client_extents(void) {
  struct master m;
  REQUIRE(start(&m, "--client_ttl=2") == 0);
  mooncake_store_t h = client_new(&m, 64 * MiB, 4 * MiB);
  struct peer p;
  REQUIRE(h && peer_start(&p, &m, 0, MiB, NULL) == 0);
  int bad = 0;
  for (int i = 0; i < 100; i++) bad += peer_cmd(&p, "PUT pure-%d 4096 %d 1 0", i, 1 + i) != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(check_keys(h, "pure", 100, 4 * KiB, 1), 0);
  CHECK_EQ(log_count(&m, "lease_ms=2000 (lease only), action=reserve_extent"), 1);
  CHECK_EQ(log_count(&m, "ObjectAllocated key=pure-"), 100);
  usleep(2600 * 1000); /* past the 2 s lease */
  CHECK_EQ(log_count(&m, "reason=lease_expired"), 1);
  for (int i = 0; i < 10; i++) bad += peer_cmd(&p, "PUT again-%d 4096 %d 1 0", i, 200 + i) != 0;
  CHECK_EQ(bad, 0);
  CHECK_EQ(check_keys(h, "again", 10, 4 * KiB, 200), 0);
  CHECK_EQ(check_keys(h, "pure", 100, 4 * KiB, 1), 0); /* nothing written over */
  CHECK_EQ(log_count(&m, "(lease only), action=reserve_extent"), 2);
  peer_kill(&p); /* SIGKILL with an extent held */
  usleep(2600 * 1000);
  CHECK_EQ(log_count(&m, "reason=lease_expired"), 2);
  CHECK_EQ(log_count(&m, "reason=released_by_client"), 0);
  CHECK_EQ(put_keys(h, "own", 10, 4 * KiB, 300), 0);
  CHECK_EQ(check_keys(h, "again", 10, 4 * KiB, 200), 0);
  mooncake_store_destroy(h);
  master_stop(&m);
}

/* The master answers a client's first ping after mount with NEED_REMOUNT (the OK set is filled by
 * ReMountSegment only, docs/master.md), while it still holds that client's extent: the retired extent must
 * be released then, not left reserved until its lease (put_start_release_timeout_sec). */
static void test_first_ping_releases_extent(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t s = client_new(&m, 64 * MiB, 4 * MiB);
  REQUIRE(s);
  CHECK_EQ(put_keys(s, "early", 10, 4 * KiB, 5), 0); /* before the first ping */
  CHECK_EQ(log_count(&m, "action=reserve_extent"), 1);
  for (int i = 0; i < 40 && !log_count(&m, "action=remount_segments"); i++) usleep(100 * 1000);
  CHECK(log_count(&m, "action=remount_segments") >= 1);
  for (int i = 0; i < 20 && !log_count(&m, "reason=released_by_client"); i++) usleep(100 * 1000);
  CHECK_EQ(log_count(&m, "reason=released_by_client"), 1); /* while the client lives on */
  CHECK_EQ(put_keys(s, "later", 10, 4 * KiB, 6), 0);
  CHECK_EQ(check_keys(s, "early", 10, 4 * KiB, 5), 0);
  CHECK_EQ(check_keys(s, "later", 10, 4 * KiB, 6), 0);
  mooncake_store_destroy(s);
  master_stop(&m);
}

static void test_env_disables(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  setenv("MC_STORE_PUT_EXTENTS", "0", 1);
  mooncake_store_t s = client_new(&m, 64 * MiB, 4 * MiB);
  unsetenv("MC_STORE_PUT_EXTENTS");
  REQUIRE(s);
  CHECK_EQ(put_keys(s, "slow", 50, 4 * KiB, 3), 0);
  CHECK_EQ(check_keys(s, "slow", 50, 4 * KiB, 3), 0);
  CHECK_EQ(log_count(&m, "action=reserve_extent"), 0);
  mooncake_store_destroy(s);
  master_stop(&m);
}

struct racer {
  mooncake_store_t s;
  unsigned base;
  pthread_barrier_t *bar;
  int bad;
};

static void *race_main(void *arg) {
  struct racer *r = arg;
  pthread_barrier_wait(r->bar);
  r->bad = put_keys(r->s, "race", 300, 16 * KiB, r->base);
  return NULL;
}

/* Two clients (each with its own extent) put the same keys at once: every key holds one writer's
 * value, intact. */
static void test_concurrent_same_keys(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t a = client_new(&m, 64 * MiB, 4 * MiB), b = client_new(&m, 64 * MiB, 4 * MiB);
  REQUIRE(a && b);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  struct racer ra = {a, 1000, &bar, 0}, rb = {b, 5000, &bar, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, race_main, &ra);
  pthread_create(&tb, NULL, race_main, &rb);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  pthread_barrier_destroy(&bar);
  CHECK_EQ(ra.bad + rb.bad, 0);
  uint8_t *v = malloc(16 * KiB);
  int bad = 0, from_a = 0;
  for (int i = 0; i < 300; i++) {
    char key[64];
    snprintf(key, sizeof(key), "race-%d", i);
    bad += mooncake_store_get_into(b, key, v, 16 * KiB) != (long long)(16 * KiB);
    int is_a = verify(v, 16 * KiB, 1000 + (unsigned)i), is_b = verify(v, 16 * KiB, 5000 + (unsigned)i);
    bad += is_a == is_b;
    from_a += is_a;
  }
  free(v);
  CHECK_EQ(bad, 0);
  fprintf(stderr, "  client a won %d of 300 keys\n", from_a);
  CHECK(log_count(&m, "action=reserve_extent") >= 2);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  master_stop(&m);
}

struct batcher {
  mooncake_store_t s;
  unsigned base;
  pthread_barrier_t *bar;
  int bad;
};

static void *batch_main(void *arg) {
  struct batcher *b = arg;
  size_t sz[32];
  int res[32];
  for (int i = 0; i < 32; i++) sz[i] = 16 * KiB;
  pthread_barrier_wait(b->bar);
  for (int round = 0; round < 10; round++) {
    char tag[16];
    snprintf(tag, sizeof(tag), "cb%d", round);
    b->bad += batch_put(b->s, tag, 32, sz, b->base + 100 * (unsigned)round, res) != 0;
    for (int i = 0; i < 32; i++) b->bad += res[i] != 0;
  }
  return NULL;
}

/* Two threads of one client batch-put the same keys at once through the client's one extent: every
 * key holds one thread's value, intact. */
static void test_concurrent_batches(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t a = client_new(&m, 256 * MiB, 4 * MiB);
  REQUIRE(a);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  struct batcher x = {a, 1000, &bar, 0}, y = {a, 5000, &bar, 0};
  pthread_t tx, ty;
  pthread_create(&tx, NULL, batch_main, &x);
  pthread_create(&ty, NULL, batch_main, &y);
  pthread_join(tx, NULL);
  pthread_join(ty, NULL);
  pthread_barrier_destroy(&bar);
  CHECK_EQ(x.bad + y.bad, 0);
  uint8_t *v = malloc(16 * KiB);
  int bad = 0;
  for (int round = 0; round < 10; round++)
    for (int i = 0; i < 32; i++) {
      char key[64];
      snprintf(key, sizeof(key), "cb%d-%d", round, i);
      unsigned off = 100 * (unsigned)round + (unsigned)i;
      bad += mooncake_store_get_into(a, key, v, 16 * KiB) != (long long)(16 * KiB);
      bad += verify(v, 16 * KiB, 1000 + off) == verify(v, 16 * KiB, 5000 + off); /* exactly one of the two */
    }
  free(v);
  CHECK_EQ(bad, 0);
  CHECK(metric(&m, "master_batch_commit_put_items_total") >= 320);
  mooncake_store_destroy(a);
  master_stop(&m);
}

/* A's extent lies on holder H's segment (preferred); H goes away (its segment is unmounted and the
 * extent with it). A's next puts preferring H fall back and succeed elsewhere; nothing A stored before
 * is damaged. */
static void test_holder_gone_falls_back(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t a = client_new(&m, 64 * MiB, 4 * MiB), h = client_new(&m, 64 * MiB, 4 * MiB);
  REQUIRE(a && h);
  char hname[128] = "";
  mooncake_store_get_hostname(h, hname, sizeof(hname));
  const char *pref[] = {hname};
  mooncake_replicate_config_t cfg = {.replica_num = 1, .preferred_segments = pref, .preferred_segments_count = 1};
  uint8_t v[8192];
  CHECK_EQ(put_keys(a, "mine", 30, 8 * KiB, 40), 0); /* on a's own segment */
  for (int i = 0; i < 20; i++) {
    char key[64];
    snprintf(key, sizeof(key), "onh-%d", i);
    fill(v, sizeof(v), 70 + (unsigned)i);
    CHECK_EQ(mooncake_store_put(a, key, v, sizeof(v), &cfg), 0);
  }
  CHECK(log_count(&m, "action=reserve_extent") >= 1);
  mooncake_store_destroy(h); /* unmounts: the extent on it goes too */
  for (int i = 0; i < 20; i++) {
    char key[64];
    snprintf(key, sizeof(key), "after-%d", i);
    fill(v, sizeof(v), 90 + (unsigned)i);
    CHECK_EQ(mooncake_store_put(a, key, v, sizeof(v), &cfg), 0);
  }
  CHECK_EQ(check_keys(a, "after", 20, 8 * KiB, 90), 0);
  /* "mine" keys placed on h are gone with it; every one still readable is intact */
  int corrupt = 0, alive = 0;
  for (int i = 0; i < 30; i++) {
    char key[64];
    snprintf(key, sizeof(key), "mine-%d", i);
    long long n = mooncake_store_get_into(a, key, v, sizeof(v));
    if (n == (long long)sizeof(v)) alive++, corrupt += !verify(v, sizeof(v), 40 + (unsigned)i);
    else CHECK_EQ(n, MC_OBJECT_NOT_FOUND);
  }
  CHECK_EQ(corrupt, 0);
  CHECK(alive > 0);
  CHECK_EQ(mooncake_store_is_exist(a, "onh-0"), 0); /* gone with its holder */
  mooncake_store_destroy(a);
  master_stop(&m);
}

/* A batch whose extent lies on a holder in another process that was SIGKILLed: the writes fail, the
 * extent is retired, and those keys end as the PutStart/PutEnd path ends them (an error while the master
 * still lists the dead holder, success elsewhere once it expired it); nothing a stored is damaged. */
static void test_batch_holder_killed(void) {
  struct master m;
  REQUIRE(start(&m, "--client_ttl=2") == 0);
  mooncake_store_t a = client_new(&m, 64 * MiB, 4 * MiB);
  struct peer p;
  REQUIRE(a && peer_start(&p, &m, 64 * MiB, MiB, NULL) == 0);
  const char *pref[] = {p.name};
  mooncake_replicate_config_t cfg = {.replica_num = 1, .preferred_segments = pref, .preferred_segments_count = 1};
  enum { N = 16 };
  char *keys[N];
  void *bufs[N];
  size_t sz[N];
  int res[N], bad = 0;
  for (int i = 0; i < N; i++) keys[i] = malloc(64), bufs[i] = malloc(8 * KiB), sz[i] = 8 * KiB;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      snprintf(keys[i], 64, "kill%d-%d", round, i);
      fill(bufs[i], sz[i], 100 * (unsigned)round + (unsigned)i);
    }
    if (round == 1) peer_kill(&p); /* its segment stays listed until client_ttl */
    if (round == 2) mc_tp_sleep_ms(3000);
    CHECK_EQ(mooncake_store_batch_put_from(a, (const char **)keys, bufs, sz, N, &cfg, res), 0);
    int ok = 0;
    for (int i = 0; i < N; i++) ok += res[i] == 0;
    fprintf(stderr, "  round %d: %d of %d keys stored (first result %d)\n", round, ok, N, res[0]);
    if (round != 1) CHECK_EQ(ok, N);
    else
      for (int i = 0; i < N; i++) CHECK(res[i] == 0 || res[i] == MC_TRANSFER_FAIL || res[i] == MC_RPC_FAIL);
    if (round == 0) CHECK(log_count(&m, "action=reserve_extent") >= 1);
  }
  CHECK_EQ(check_keys(a, "kill2", N, 8 * KiB, 200), 0);
  for (int i = 0; i < N; i++) { /* round 1 keys: absent or intact */
    char key[64];
    uint8_t v[8 * KiB];
    snprintf(key, sizeof(key), "kill1-%d", i);
    long long n = mooncake_store_get_into(a, key, v, sizeof(v));
    bad += n == (long long)sizeof(v) ? !verify(v, sizeof(v), 100 + (unsigned)i) : n >= 0;
  }
  CHECK_EQ(bad, 0);
  for (int i = 0; i < N; i++) free(keys[i]), free(bufs[i]);
  mooncake_store_destroy(a);
  master_stop(&m);
}

/* The master restarts under a client holding an extent: the new master does not know it, so the next
 * put's commit is refused (LEASE_EXPIRED) or the ping retires the extent first; either way the put ends
 * like the two-round-trip path (-200 until the segment is remounted, then 0) and values are intact. The
 * same for a batch put. */
static void test_master_restart_falls_back(void) {
  struct master m;
  REQUIRE(start(&m, NULL) == 0);
  mooncake_store_t a = client_new(&m, 64 * MiB, 4 * MiB);
  REQUIRE(a);
  CHECK_EQ(put_keys(a, "pre", 10, 4 * KiB, 11), 0);
  mc_tp_stop(m.pid, 5000);
  char a1[64], a2[64], a3[64], bin[512];
  snprintf(a1, sizeof(a1), "--rpc_port=%d", m.rpc);
  snprintf(a2, sizeof(a2), "--http_metadata_server_port=%d", m.meta);
  snprintf(a3, sizeof(a3), "--metrics_port=%d", m.metrics);
  snprintf(bin, sizeof(bin), "%s/mooncake_master", getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".");
  char *argv[] = {bin, a1, "--enable_http_metadata_server", a2, a3, "--v=1", NULL};
  m.pid = mc_tp_spawn(argv, NULL, m.log);
  REQUIRE(m.pid > 0 && mc_tp_wait_port(m.rpc, 15000, m.pid) == 0);
  int rc = -1, first = 1;
  long t0 = mc_tp_now_ms();
  uint8_t v[4096];
  fill(v, sizeof(v), 12);
  while (rc && mc_tp_now_ms() - t0 < 10000) {
    rc = mooncake_store_put(a, "post-0", v, sizeof(v), NULL);
    if (first) {
      if (rc) fprintf(stderr, "  first put after the restart: %d\n", rc);
      CHECK(rc == 0 || rc == MC_NO_AVAILABLE_HANDLE || rc == MC_RPC_FAIL);
      first = 0;
    }
    if (rc) mc_tp_sleep_ms(100);
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(put_keys(a, "post", 50, 4 * KiB, 12), 0); /* post-0 exists: kept, same value */
  CHECK_EQ(check_keys(a, "post", 50, 4 * KiB, 12), 0);
  /* once more for a batch: restarted again under a client holding an extent */
  size_t sz[20];
  int res[20], bad = 0;
  for (int i = 0; i < 20; i++) sz[i] = 4 * KiB;
  CHECK_EQ(batch_put(a, "bpre", 20, sz, 30, res), 0);
  for (int i = 0; i < 20; i++) bad += res[i] != 0;
  CHECK_EQ(bad, 0);
  mc_tp_stop(m.pid, 5000);
  m.pid = mc_tp_spawn(argv, NULL, m.log);
  REQUIRE(m.pid > 0 && mc_tp_wait_port(m.rpc, 15000, m.pid) == 0);
  t0 = mc_tp_now_ms();
  for (first = 1, bad = 1; bad && mc_tp_now_ms() - t0 < 10000;) {
    CHECK_EQ(batch_put(a, "bpost", 20, sz, 60, res), 0);
    bad = 0;
    for (int i = 0; i < 20; i++) {
      bad += res[i] != 0;
      if (first) CHECK(res[i] == 0 || res[i] == MC_NO_AVAILABLE_HANDLE || res[i] == MC_RPC_FAIL);
    }
    if (first && bad) fprintf(stderr, "  first batch after the restart: %d of 20 keys failed (%d)\n", bad, res[0]);
    first = 0;
    if (bad) mc_tp_sleep_ms(100);
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(check_keys(a, "bpost", 20, 4 * KiB, 60), 0);
  mooncake_store_destroy(a);
  master_stop(&m);
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_fast_path_used),         TEST_CASE(test_batch_fast_path), TEST_CASE(test_pure_client_extents), TEST_CASE(test_env_disables),
      TEST_CASE(test_first_ping_releases_extent),
      TEST_CASE(test_concurrent_same_keys), TEST_CASE(test_concurrent_batches),   TEST_CASE(test_holder_gone_falls_back),
      TEST_CASE(test_master_restart_falls_back), TEST_CASE(test_batch_holder_killed),
  };
  return run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
