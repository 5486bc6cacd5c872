/* Store client black-box tests against a real mooncake_master (one process): round trips of 1 B..64 MiB
 * through the copying and zero-copy paths, the put contract (existing keys keep their value, staging
 * limits), misses and short buffers, batch APIs with per-key results, removal by key / regex / all,
 * read leases (-706) and lease expiry (-707), teardown unmounting, a pool without segments (-200), and
 * many threads on one handle, and upsert (replace in place / reallocate, zero-copy and batch forms). */
#include "test_store_harness.c"

static struct master M; /* lease TTL 1000 ms */

static mooncake_store_t must_client(uint64_t gss, uint64_t lbs) { return client_new(&M, gss, lbs); }

/* ------------------------------------------------------------ round trips */

static void roundtrip(mooncake_store_t s, const char *tag, uint64_t n, unsigned seed, char *reg, uint64_t reg_len) {
  char key[64];
  uint8_t *v = malloc(n), *out = malloc(n + 64);
  fill(v, n, seed);
  /* copying put, read back into unregistered memory and through the copy-out get */
  snprintf(key, sizeof(key), "%s_copy_%llu", tag, (unsigned long long)n);
  CHECK_EQ(mooncake_store_put(s, key, v, n, NULL), 0);
  CHECK_EQ(mooncake_store_get_size(s, key), (long long)n);
  memset(out, 0, n + 64);
  CHECK_EQ(mooncake_store_get_into(s, key, out, n + 64), (long long)n);
  CHECK(verify(out, n, seed));
  void *copy = NULL;
  CHECK_EQ(mc_store_get(s, key, &copy), (long long)n);
  CHECK(copy && verify(copy, n, seed));
  free(copy);
  /* zero-copy put from registered memory, read back into registered memory */
  if (n <= reg_len / 2) {
    snprintf(key, sizeof(key), "%s_zc_%llu", tag, (unsigned long long)n);
    fill(reg, n, seed + 1);
    CHECK_EQ(mooncake_store_put_from(s, key, reg, n, NULL), 0);
    memset(reg + reg_len / 2, 0, n);
    CHECK_EQ(mooncake_store_get_into(s, key, reg + reg_len / 2, reg_len / 2), (long long)n);
    CHECK(verify(reg + reg_len / 2, n, seed + 1));
  }
  free(out);
  free(v);
}

static void test_basic_roundtrip_sizes(void) {
  mooncake_store_t s = must_client(256 * MiB, 72 * MiB);
  REQUIRE(s);
  uint64_t reg_len = 130 * MiB;
  char *reg = malloc(reg_len);
  CHECK_EQ(mooncake_store_register_buffer(s, reg, reg_len), 0);
  const uint64_t sizes[] = {1, 7, 4096, 16 * KiB + 3, MiB + 3, 16 * MiB, 64 * MiB};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) roundtrip(s, "rt", sizes[i], (unsigned)i + 1, reg, reg_len);
  CHECK_EQ(mooncake_store_unregister_buffer(s, reg), 0);
  CHECK_EQ(mooncake_store_remove_all(s, 1), 14);
  mooncake_store_destroy(s);
  free(reg);
}

static void test_basic_put_existing_keeps_value(void) {
  mooncake_store_t s = must_client(16 * MiB, 4 * MiB);
  REQUIRE(s);
  char out[16] = "";
  CHECK_EQ(mooncake_store_put(s, "dup", "first", 5, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "dup", "second!", 7, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "dup", out, sizeof(out)), 5);
  CHECK(!memcmp(out, "first", 5));
  /* more replicas than segments: partial allocation is success */
  mooncake_replicate_config_t cfg = {3, 0, 0, NULL, 0};
  CHECK_EQ(mooncake_store_put(s, "three", "abc", 3, &cfg), 0);
  CHECK_EQ(mooncake_store_get_into(s, "three", out, sizeof(out)), 3);
  cfg.with_soft_pin = 1;
  cfg.with_hard_pin = 1;
  CHECK_EQ(mooncake_store_put(s, "pinned", "p", 1, &cfg), 0);
  CHECK_EQ(mooncake_store_is_exist(s, "pinned"), 1);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
}

static void test_basic_staging_limit(void) {
  mooncake_store_t s = must_client(32 * MiB, 1 * MiB);
  REQUIRE(s);
  uint64_t n = 2 * MiB;
  char *v = malloc(n), *out = malloc(n);
  fill(v, n, 9);
  CHECK_EQ(mooncake_store_put(s, "big", v, n, NULL), -600); /* larger than local_buffer_size, as upstream */
  CHECK_EQ(mooncake_store_is_exist(s, "big"), 0);
  CHECK_EQ(mooncake_store_put_from(s, "big", v, n, NULL), 0); /* unregistered: bounced in chunks */
  CHECK_EQ(mooncake_store_get_into(s, "big", out, n), (long long)n);
  CHECK(verify(out, n, 9));
  void *copy = (void *)1;
  CHECK_EQ(mc_store_get(s, "big", &copy), -600); /* the copying get has the same limit */
  CHECK(copy == NULL);
  CHECK_EQ(mooncake_store_register_buffer(s, v, n), 0);
  CHECK_EQ(mooncake_store_put_from(s, "big2", v, n, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "big2", out, n), (long long)n);
  CHECK(verify(out, n, 9));
  CHECK_EQ(mooncake_store_unregister_buffer(s, v), 0);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  /* no staging buffer at all: copying put fails and creates nothing */
  s = must_client(16 * MiB, 0);
  REQUIRE(s);
  CHECK_EQ(mooncake_store_put(s, "nostage", "x", 1, NULL), -600);
  CHECK_EQ(mooncake_store_is_exist(s, "nostage"), 0);
  mooncake_store_destroy(s);
  free(out);
  free(v);
}

static void test_basic_misses(void) {
  mooncake_store_t s = must_client(16 * MiB, 4 * MiB);
  REQUIRE(s);
  char out[8];
  CHECK_EQ(mooncake_store_get_into(s, "nope", out, sizeof(out)), -704);
  CHECK_EQ(mooncake_store_get_size(s, "nope"), -704);
  CHECK_EQ(mooncake_store_is_exist(s, "nope"), 0);
  CHECK_EQ(mooncake_store_remove(s, "nope", 0), -704);
  void *copy = (void *)1;
  CHECK_EQ(mc_store_get(s, "nope", &copy), -704);
  CHECK(copy == NULL);
  CHECK_EQ(mooncake_store_put(s, "ten", "0123456789", 10, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "ten", out, sizeof(out)), -600); /* buffer smaller than the object */
  CHECK_EQ(mooncake_store_get_into(s, "", out, sizeof(out)), -600);
  CHECK_EQ(mooncake_store_is_exist(s, ""), -600);
  CHECK_EQ(mooncake_store_remove(s, "ten", 1), 0);
  mooncake_store_destroy(s);
}

/* Segment memory is committed lazily: setup time does not grow with global_segment_size. */
static void test_basic_setup_lazy_segment(void) {
  long t0 = mc_tp_now_ms();
  mooncake_store_t s = must_client(16 * MiB, 16 * MiB);
  long small = mc_tp_now_ms() - t0;
  REQUIRE(s);
  mooncake_store_destroy(s);
  FILE *mi = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long avail_kb = 0;
  while (mi && fgets(line, sizeof(line), mi)) sscanf(line, "MemAvailable: %llu kB", &avail_kb);
  if (mi) fclose(mi);
  s = mooncake_store_create();
  t0 = mc_tp_now_ms();
  int rc = mooncake_store_setup(s, "127.0.0.1", M.metadata, 16ull << 30, 16 * MiB, "tcp", "", M.addr);
  long big = mc_tp_now_ms() - t0;
  fprintf(stderr, "  setup with a 16 MiB segment: %ld ms; 16 GiB: %ld ms (rc %d, MemAvailable %llu kB)\n", small, big, rc,
          avail_kb);
  if (avail_kb * 1024 > (16ull << 30) + 256 * MiB) {
    CHECK_EQ(rc, 0);
    CHECK(big < small + 1000);
    CHECK_EQ(mooncake_store_put(s, "in_big", "x", 1, NULL), 0);
    CHECK_EQ(mooncake_store_remove(s, "in_big", 1), 0);
  } else if (avail_kb * 1024 < (16ull << 30)) {
    CHECK_EQ(rc, -600);
  }
  mooncake_store_destroy(s);
}

/* ------------------------------------------------------------ batches */

static void test_batch_apis(void) {
  mooncake_store_t s = must_client(64 * MiB, 8 * MiB);
  REQUIRE(s);
  enum { N = 6 };
  static char bufs_mem[N][4096];
  const char *keys[N] = {"b0", "b1", "b0", "", "b4", "b5"};
  void *bufs[N];
  size_t sizes[N] = {100, 200, 300, 10, 0, 4096};
  for (int i = 0; i < N; i++) {
    bufs[i] = bufs_mem[i];
    fill(bufs[i], 4096, 100 + i);
  }
  bufs[4] = NULL; /* size 0 with a NULL buffer is allowed and answered -600 */
  int res[N];
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, N, NULL, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], 0);
  CHECK_EQ(res[2], 0);    /* repeated key: first occurrence wins */
  CHECK_EQ(res[3], -600); /* empty key */
  CHECK_EQ(res[4], -600); /* size 0 */
  CHECK_EQ(res[5], 0);
  CHECK_EQ(mooncake_store_get_size(s, "b0"), 100);
  /* a second batch over existing keys keeps the values */
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, res), 0);
  CHECK(res[0] == 0 && res[1] == 0);
  /* batch reads: hit, hit, missing, short buffer */
  const char *gk[4] = {"b0", "b5", "missing", "b1"};
  static char out_mem[4][4096];
  void *outs[4] = {out_mem[0], out_mem[1], out_mem[2], out_mem[3]};
  size_t osz[4] = {4096, 4096, 4096, 150};
  int64_t gres[4];
  CHECK_EQ(mooncake_store_batch_get_into(s, gk, outs, osz, 4, gres), 0);
  CHECK_EQ(gres[0], 100);
  CHECK(verify(out_mem[0], 100, 100));
  CHECK_EQ(gres[1], 4096);
  CHECK(verify(out_mem[1], 4096, 105));
  CHECK_EQ(gres[2], -704);
  CHECK_EQ(gres[3], -600);
  int ex[4];
  CHECK_EQ(mooncake_store_batch_is_exist(s, gk, 4, ex), 0);
  CHECK(ex[0] == 1 && ex[1] == 1 && ex[2] == 0 && ex[3] == 1);
  /* copying batch put (native) */
  const char *ck[3] = {"c0", "c1", "c2"};
  const void *cv[3] = {"zero", "one", "two!"};
  size_t cs[3] = {4, 3, 4};
  CHECK_EQ(mc_store_batch_put(s, ck, cv, cs, 3, NULL, res), 0);
  CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0);
  char small[8] = "";
  CHECK_EQ(mooncake_store_get_into(s, "c1", small, sizeof(small)), 3);
  CHECK(!memcmp(small, "one", 3));
  /* batch remove (native): leased keys need force; a repeat gets -704 */
  const char *rk[3] = {"c0", "c0", "nothere"};
  CHECK_EQ(mc_store_batch_remove(s, rk, 3, 1, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], -704);
  CHECK_EQ(res[2], -704);
  /* many keys at once */
  enum { MANY = 2000 };
  const char **mk = calloc(MANY, sizeof(char *));
  void **mb = calloc(MANY, sizeof(void *));
  size_t *ms = calloc(MANY, sizeof(size_t));
  int *mr = calloc(MANY, sizeof(int));
  int64_t *mg = calloc(MANY, sizeof(int64_t));
  char *area = malloc(MANY * 512);
  for (int i = 0; i < MANY; i++) {
    char *k = malloc(32);
    snprintf(k, 32, "many_%d", i);
    mk[i] = k;
    mb[i] = area + i * 512;
    ms[i] = 512;
    fill(mb[i], 512, (unsigned)i);
  }
  CHECK_EQ(mooncake_store_batch_put_from(s, mk, mb, ms, MANY, NULL, mr), 0);
  int ok = 0;
  for (int i = 0; i < MANY; i++) ok += mr[i] == 0;
  CHECK_EQ(ok, MANY);
  memset(area, 0, MANY * 512);
  CHECK_EQ(mooncake_store_batch_get_into(s, mk, mb, ms, MANY, mg), 0);
  ok = 0;
  for (int i = 0; i < MANY; i++) ok += mg[i] == 512 && verify(mb[i], 512, (unsigned)i);
  CHECK_EQ(ok, MANY);
  for (int i = 0; i < MANY; i++) free((void *)mk[i]);
  free(area);
  free(mg);
  free(mr);
  free(ms);
  free(mb);
  free(mk);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
}

/* ------------------------------------------------------------ upsert (docs/master.md, "Upsert") */

static void test_upsert_replaces(void) {
  mooncake_store_t s = must_client(32 * MiB, 1 * MiB);
  REQUIRE(s);
  char out[64] = "";
  /* absent key: inserted */
  CHECK_EQ(mc_store_upsert(s, "up", "first", 5, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 5);
  CHECK(!memcmp(out, "first", 5));
  /* same size: replaced (in place) */
  CHECK_EQ(mc_store_upsert(s, "up", "FIRST", 5, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 5);
  CHECK(!memcmp(out, "FIRST", 5));
  /* another size: replaced, the size changes both ways */
  CHECK_EQ(mc_store_upsert(s, "up", "a longer value", 14, NULL), 0);
  CHECK_EQ(mooncake_store_get_size(s, "up"), 14);
  void *copy = NULL;
  CHECK_EQ(mc_store_get(s, "up", &copy), 14);
  CHECK(copy && !memcmp(copy, "a longer value", 14));
  free(copy);
  CHECK_EQ(mc_store_upsert(s, "up", "xy", 2, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 2);
  CHECK(!memcmp(out, "xy", 2));
  /* a plain put still keeps the value */
  CHECK_EQ(mooncake_store_put(s, "up", "zz", 2, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 2);
  CHECK(!memcmp(out, "xy", 2));
  /* argument rules as put */
  CHECK_EQ(mc_store_upsert(s, "", "x", 1, NULL), -600);
  CHECK_EQ(mc_store_upsert(s, "up", "x", 0, NULL), -600);
  CHECK_EQ(mc_store_upsert(s, NULL, "x", 1, NULL), -1);
  CHECK_EQ(mc_store_upsert_from(s, "up", NULL, 0, NULL), 0); /* nothing stored, value kept */
  CHECK_EQ(mooncake_store_get_size(s, "up"), 2);
  /* zero-copy upsert, larger than the staging buffer: registered and unregistered memory */
  uint64_t n = 2 * MiB;
  char *v = malloc(n), *big = malloc(n);
  fill(v, n, 21);
  CHECK_EQ(mc_store_upsert(s, "big", v, n, NULL), -600); /* copying form: larger than local_buffer_size */
  CHECK_EQ(mooncake_store_is_exist(s, "big"), 0);
  CHECK_EQ(mc_store_upsert_from(s, "big", v, n, NULL), 0); /* unregistered: bounced */
  CHECK_EQ(mooncake_store_get_into(s, "big", big, n), (long long)n);
  CHECK(verify(big, n, 21));
  CHECK_EQ(mooncake_store_register_buffer(s, v, n), 0);
  fill(v, n, 22);
  CHECK_EQ(mc_store_upsert_from(s, "big", v, n, NULL), 0); /* same size: in place */
  CHECK_EQ(mooncake_store_get_into(s, "big", big, n), (long long)n);
  CHECK(verify(big, n, 22));
  fill(v, n / 2, 23);
  CHECK_EQ(mc_store_upsert_from(s, "big", v, n / 2, NULL), 0); /* smaller */
  CHECK_EQ(mooncake_store_get_into(s, "big", big, n), (long long)(n / 2));
  CHECK(verify(big, n / 2, 23));
  CHECK_EQ(mc_store_upsert_from(s, "up", v, n / 2, NULL), 0); /* "up" grows from 2 bytes */
  CHECK_EQ(mooncake_store_get_size(s, "up"), (long long)(n / 2));
  CHECK_EQ(mooncake_store_unregister_buffer(s, v), 0);
  /* no staging buffer: the copying form fails and creates nothing */
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  s = must_client(16 * MiB, 0);
  REQUIRE(s);
  CHECK_EQ(mc_store_upsert(s, "nostage", "x", 1, NULL), -600);
  CHECK_EQ(mooncake_store_is_exist(s, "nostage"), 0);
  mooncake_store_destroy(s);
  free(big);
  free(v);
}

static void test_upsert_batch(void) {
  mooncake_store_t s = must_client(64 * MiB, 8 * MiB);
  REQUIRE(s);
  enum { N = 6 };
  static char bufs_mem[N][4096];
  const char *keys[N] = {"ub0", "ub1", "ub0", "", "ub4", "ub5"};
  void *bufs[N];
  size_t sizes[N] = {100, 200, 300, 10, 0, 4096};
  for (int i = 0; i < N; i++) {
    bufs[i] = bufs_mem[i];
    fill(bufs[i], 4096, 200 + i);
  }
  bufs[4] = NULL;
  int res[N];
  CHECK_EQ(mooncake_store_put(s, "ub1", "old", 3, NULL), 0); /* an existing key is replaced */
  CHECK_EQ(mooncake_store_put(s, "ub5", bufs_mem[0], 4096, NULL), 0); /* same size: in place */
  CHECK_EQ(mc_store_batch_upsert_from(s, keys, bufs, sizes, N, NULL, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], 0);
  CHECK_EQ(res[2], 0);    /* repeated key: first occurrence's bytes */
  CHECK_EQ(res[3], -600); /* empty key */
  CHECK_EQ(res[4], -600); /* size 0 */
  CHECK_EQ(res[5], 0);
  char out[4096];
  CHECK_EQ(mooncake_store_get_into(s, "ub0", out, sizeof(out)), 100);
  CHECK(verify(out, 100, 200));
  CHECK_EQ(mooncake_store_get_into(s, "ub1", out, sizeof(out)), 200);
  CHECK(verify(out, 200, 201));
  CHECK_EQ(mooncake_store_get_into(s, "ub5", out, sizeof(out)), 4096);
  CHECK(verify(out, 4096, 205));
  /* a second batch with new bytes and sizes replaces again */
  size_t sizes2[2] = {4000, 50};
  fill(bufs[0], 4096, 210);
  fill(bufs[1], 4096, 211);
  CHECK_EQ(mc_store_batch_upsert_from(s, keys, bufs, sizes2, 2, NULL, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], 0);
  CHECK_EQ(mooncake_store_get_into(s, "ub0", out, sizeof(out)), 4000);
  CHECK(verify(out, 4000, 210));
  CHECK_EQ(mooncake_store_get_into(s, "ub1", out, sizeof(out)), 50);
  CHECK(verify(out, 50, 211));
  /* the no-touch rules */
  res[0] = 7;
  CHECK_EQ(mc_store_batch_upsert_from(s, keys, bufs, NULL, 2, NULL, res), -1);
  CHECK_EQ(res[0], 7);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
}

/* ------------------------------------------------------------ removal and leases */

static void test_remove_regex_all(void) {
  mooncake_store_t s = must_client(16 * MiB, 4 * MiB);
  REQUIRE(s);
  mooncake_store_remove_all(s, 1);
  CHECK_EQ(mooncake_store_put(s, "alpha1", "a", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "alpha2", "a", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "beta1", "b", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "gamma", "g", 1, NULL), 0);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^alpha", 1), 2);
  CHECK_EQ(mooncake_store_is_exist(s, "alpha1"), 0);
  CHECK_EQ(mooncake_store_is_exist(s, "beta1"), 1);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "(", 1), -600);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "a1", 1), 1); /* search semantics: matches "beta1" */
  CHECK_EQ(mooncake_store_remove(s, "gamma", 1), 0);
  CHECK_EQ(mooncake_store_put(s, "x1", "x", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "x2", "x", 1, NULL), 0);
  CHECK_EQ(mooncake_store_is_exist(s, "x1"), 1); /* leased now */
  CHECK_EQ(mooncake_store_remove_all(s, 0), 1); /* the leased key is skipped */
  CHECK_EQ(mooncake_store_remove_all(s, 1), 1);
  CHECK_EQ(mooncake_store_remove_all(s, 1), 0);
  mooncake_store_destroy(s);
}

/* Key patterns are ECMAScript-style as upstream's std::regex reads them (docs/master.md, "Reads, leases and
 * removal"): classes like \d and \w, anchors, bracket classes, search semantics; a pattern that does not
 * compile is INVALID_PARAMS (-600), never a silent 0. */
static void test_remove_regex_patterns(void) {
  mooncake_store_t s = must_client(16 * MiB, 4 * MiB);
  REQUIRE(s);
  mooncake_store_remove_all(s, 1);
  const char *keys[] = {"key1", "key22", "keyx", "xkey3", "Key4", "key_5"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) CHECK_EQ(mooncake_store_put(s, keys[i], "v", 1, NULL), 0);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^key\\d+$", 1), 2); /* key1, key22 */
  CHECK_EQ(mooncake_store_is_exist(s, "key22"), 0);
  CHECK_EQ(mooncake_store_is_exist(s, "xkey3"), 1);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "key\\d+", 1), 1); /* unanchored: xkey3 */
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^[A-Z]ey[0-9]$", 1), 1); /* Key4 */
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^\\w+_\\d$", 1), 1);     /* key_5 */
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^key(?=x)", 1), 1);      /* a lookahead: keyx */
  CHECK_EQ(mooncake_store_remove_by_regex(s, "^key\\d+$", 1), 0);      /* none left: 0, not an error */
  const char *bad[] = {"(", "[a-", "key\\d+(", "*x", "(a)\\1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK_EQ(mooncake_store_remove_by_regex(s, bad[i], 1), -600);
  mooncake_store_destroy(s);
}

static void test_remove_leases(void) {
  mooncake_store_t s = must_client(16 * MiB, 4 * MiB);
  REQUIRE(s);
  char out[4];
  CHECK_EQ(mooncake_store_put(s, "leased", "abc", 3, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "leased", out, sizeof(out)), 3);
  CHECK_EQ(mooncake_store_remove(s, "leased", 0), -706);
  CHECK_EQ(mooncake_store_remove(s, "leased", 1), 0); /* force bypasses the lease */
  CHECK_EQ(mooncake_store_put(s, "leased", "abc", 3, NULL), 0);
  CHECK_EQ(mooncake_store_get_size(s, "leased"), 3);
  CHECK_EQ(mooncake_store_remove(s, "leased", 0), -706);
  mc_tp_sleep_ms(1300); /* the master runs with a 1000 ms lease */
  CHECK_EQ(mooncake_store_remove(s, "leased", 0), 0);
  const char *k[1] = {"leased2"};
  int r[1];
  CHECK_EQ(mooncake_store_put(s, "leased2", "abc", 3, NULL), 0);
  CHECK_EQ(mooncake_store_batch_is_exist(s, k, 1, r), 0);
  CHECK_EQ(r[0], 1);
  CHECK_EQ(mooncake_store_remove(s, "leased2", 0), -706);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
}

static void test_remove_lease_expired_read(void) {
  /* a master whose leases last 1 ms: a 128 MiB read (~7 ms at memcpy speed) cannot finish inside it,
   * even counted in whole milliseconds (32 MiB could: ~1.8 ms, flaky once waits stopped sleeping) */
  struct master m;
  const char *flags[] = {"--default_kv_lease_ttl=1", NULL};
  REQUIRE(master_start(&m, flags) == 0);
  mooncake_store_t s = client_new(&m, 160 * MiB, 136 * MiB);
  REQUIRE(s);
  uint64_t n = 128 * MiB;
  char *v = malloc(n);
  fill(v, n, 3);
  CHECK_EQ(mooncake_store_put(s, "slow", v, n, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "slow", v, n), -707);
  const char *k[1] = {"slow"};
  void *b[1] = {v};
  size_t z[1] = {n};
  int64_t r[1];
  CHECK_EQ(mooncake_store_batch_get_into(s, k, b, z, 1, r), 0);
  CHECK_EQ(r[0], -707);
  mooncake_store_destroy(s);
  free(v);
  master_stop(&m);
}

/* ------------------------------------------------------------ lifecycle */

static void test_lifecycle_destroy_unmounts(void) {
  mooncake_store_t a = must_client(16 * MiB, 4 * MiB), b = must_client(0, 4 * MiB);
  REQUIRE(a && b);
  const char *pref[1];
  char name[128], out[8];
  mooncake_store_get_hostname(a, name, sizeof(name));
  pref[0] = name;
  mooncake_replicate_config_t cfg = {1, 0, 0, pref, 1};
  CHECK_EQ(mooncake_store_put(a, "owned_by_a", "a-data", 6, &cfg), 0);
  CHECK_EQ(mooncake_store_get_into(b, "owned_by_a", out, sizeof(out)), 6);
  CHECK(!memcmp(out, "a-data", 6));
  mooncake_store_destroy(a); /* its segment is unmounted: the object is gone at once */
  CHECK_EQ(mooncake_store_get_into(b, "owned_by_a", out, sizeof(out)), -704);
  CHECK_EQ(mooncake_store_is_exist(b, "owned_by_a"), 0);
  /* only a pure client left: no segment to put into */
  CHECK_EQ(mooncake_store_put(b, "nowhere", "x", 1, NULL), -200);
  CHECK_EQ(mooncake_store_health_check(b), 0);
  mooncake_store_destroy(b);
}

struct worker {
  mooncake_store_t s;
  int id, ok;
};

static void *worker_main(void *arg) {
  struct worker *w = arg;
  char key[64], v[3000], out[3000];
  for (int i = 0; i < 200; i++) {
    size_t n = 1 + (size_t)((i * 37 + w->id * 11) % 2999);
    snprintf(key, sizeof(key), "w%d_%d", w->id, i);
    fill(v, n, (unsigned)(w->id * 1000 + i));
    if (mooncake_store_put(w->s, key, v, n, NULL)) continue;
    memset(out, 0, sizeof(out));
    if (mooncake_store_get_into(w->s, key, out, sizeof(out)) == (int64_t)n && verify(out, n, (unsigned)(w->id * 1000 + i)))
      w->ok++;
  }
  return NULL;
}

static void test_lifecycle_threads(void) {
  /* a staging buffer that fits only a few values at once: puts wait for space */
  mooncake_store_t s = must_client(64 * MiB, 8 * KiB);
  REQUIRE(s);
  struct worker w[8];
  pthread_t t[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (struct worker){s, i, 0};
    pthread_create(&t[i], NULL, worker_main, &w[i]);
  }
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 8; i++) CHECK_EQ(w[i].ok, 200);
  CHECK_EQ(mooncake_store_remove_all(s, 1), 1600);
  mooncake_store_destroy(s);
}

/* A master restart: the client notices (health 2), reconnects after failed pings, re-mounts and re-publishes
 * its descriptor (the embedded metadata server restarted empty), and puts work again; the object put before
 * comes back from the holder's index (on by default; docs/ha.md), with its byte. */
static void test_lifecycle_master_restart(void) {
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0);
  mooncake_store_t a = client_new(&m, 16 * MiB, 1 * MiB), b = client_new(&m, 0, 1 * MiB);
  REQUIRE(a && b);
  CHECK_EQ(mooncake_store_put(b, "before", "1", 1, NULL), 0);
  mc_tp_stop(m.pid, 5000);
  CHECK_EQ(mooncake_store_health_check(b), 2);
  CHECK_EQ(mooncake_store_is_exist(b, "before"), -900);
  char a1[64], a2[64], a3[64];
  snprintf(a1, sizeof(a1), "--rpc_port=%d", m.rpc);
  snprintf(a2, sizeof(a2), "--http_metadata_server_port=%d", m.meta);
  snprintf(a3, sizeof(a3), "--metrics_port=%d", m.metrics);
  char bin[512];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".");
  char *argv[] = {bin, a1, "--enable_http_metadata_server", a2, a3, NULL};
  m.pid = mc_tp_spawn(argv, NULL, m.log);
  REQUIRE(m.pid > 0 && mc_tp_wait_port(m.rpc, 15000, m.pid) == 0 && mc_tp_wait_port(m.meta, 15000, m.pid) == 0);
  CHECK_EQ(mooncake_store_health_check(b), 0);
  int rc = -1;
  long t0 = mc_tp_now_ms();
  while (rc && mc_tp_now_ms() - t0 < 10000) { /* the new master starts empty; a comes back within a few pings */
    rc = mooncake_store_put(b, "after", "22", 2, NULL);
    if (rc) mc_tp_sleep_ms(200);
  }
  fprintf(stderr, "  put succeeded %ld ms after the master came back\n", mc_tp_now_ms() - t0);
  CHECK_EQ(rc, 0);
  char out[4];
  CHECK_EQ(mooncake_store_get_into(b, "after", out, sizeof(out)), 2);
  CHECK_EQ(mooncake_store_is_exist(b, "before"), 1); /* rebuilt from a's index upload (or b's witness) */
  CHECK_EQ(mooncake_store_get_into(b, "before", out, sizeof(out)), 1);
  CHECK_EQ(out[0], '1');
  mooncake_store_t c = client_new(&m, 0, 1 * MiB);   /* finds a's descriptor: a re-published it */
  REQUIRE(c);
  CHECK_EQ(mooncake_store_get_into(c, "after", out, sizeof(out)), 2);
  mooncake_store_destroy(c);
  mooncake_store_destroy(b);
  mooncake_store_destroy(a);
  master_stop(&m);
}

/* Clients under P2PHANDSHAKE (no metadata service) and under etcd metadata. */
static void put_get_via(const char *meta) {
  mooncake_store_t a = mooncake_store_create(), b = mooncake_store_create();
  REQUIRE(mooncake_store_setup(a, "127.0.0.1", meta, 16 * MiB, 1 * MiB, "tcp", "", M.addr) == 0);
  REQUIRE(mooncake_store_setup(b, "127.0.0.1", meta, 0, 1 * MiB, NULL, NULL, M.addr) == 0);
  char v[5000], out[5000];
  fill(v, sizeof(v), 12);
  CHECK_EQ(mooncake_store_put(b, "via", v, sizeof(v), NULL), 0); /* lands in a's segment */
  CHECK_EQ(mooncake_store_get_into(b, "via", out, sizeof(out)), (long long)sizeof(v));
  CHECK(verify(out, sizeof(v), 12));
  CHECK_EQ(mooncake_store_remove(b, "via", 1), 0);
  mooncake_store_destroy(b);
  mooncake_store_destroy(a);
}

static void test_lifecycle_p2phandshake(void) { put_get_via("P2PHANDSHAKE"); }

static void test_lifecycle_etcd_metadata(void) {
  struct mc_tp_service etcd;
  REQUIRE(mc_tp_start_etcd(&etcd) == 0);
  char meta[64];
  snprintf(meta, sizeof(meta), "etcd://127.0.0.1:%d", etcd.port);
  put_get_via(meta);
  mc_tp_service_stop(&etcd);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  const char *flags[] = {"--default_kv_lease_ttl=1000", NULL};
  if (master_start(&M, flags)) return 1;
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_basic_roundtrip_sizes),
      TEST_CASE(test_basic_put_existing_keeps_value),
      TEST_CASE(test_basic_staging_limit),
      TEST_CASE(test_basic_misses),
      TEST_CASE(test_basic_setup_lazy_segment),
      TEST_CASE(test_batch_apis),
      TEST_CASE(test_upsert_replaces),
      TEST_CASE(test_upsert_batch),
      TEST_CASE(test_remove_regex_all), TEST_CASE(test_remove_regex_patterns),
      TEST_CASE(test_remove_leases),
      TEST_CASE(test_remove_lease_expired_read),
      TEST_CASE(test_lifecycle_destroy_unmounts),
      TEST_CASE(test_lifecycle_threads),
      TEST_CASE(test_lifecycle_master_restart),
      TEST_CASE(test_lifecycle_p2phandshake),
      TEST_CASE(test_lifecycle_etcd_metadata),
  };
  int rc = run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
  master_stop(&M);
  return rc;
}
