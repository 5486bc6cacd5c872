/* Chaos test of the store against real processes: one mooncake_master, three holders (storage clients
 * with fixed names, so a restart reclaims the same segment name) and four worker clients that put,
 * upsert, read, batch-read, remove and look up a small shared key space as fast as they can, two over
 * TCP (MC_FORCE_TCP=1) and two through same-host shared memory, one of each contributing a segment of
 * its own (write extents under liveness) and one a pure client (lease-only extents).
 *
 * Meanwhile holders are killed with SIGKILL and restarted under the same name, or frozen with SIGSTOP
 * for up to 0.7 s and thawed; two more writers (victims, with segments of their own) are killed and
 * restarted; and now and then the master is killed and restarted on the same ports (it starts empty, D4:
 * clients remount and republish). What must hold throughout:
 *   - every read that succeeds returns exactly one value some worker wrote under that key: a 32-byte
 *     header (magic, key, writer, version, size) and the body that (writer, version) defines. A torn
 *     value, another key's value, the zeros of a restarted holder's fresh memory or a stale extent
 *     write landing in a new incarnation all fail this check;
 *   - no call hangs: every call returns within OP_BOUND_MS whatever the holders do;
 *   - no process crashes; once the chaos stops, every holder is back, the master still answers, and
 *     new objects can be written to and read from each holder.
 * Failed calls are expected (a killed holder's objects are lost) and are counted by code, not checked.
 *
 * MC_CHAOS_SECS sets the length of the chaos phase (default 20 s; ctest runs it with 20 in Release and
 * 8 under the sanitizers). The seed is printed; MC_CHAOS_SEED repeats a run's choices (the workload's
 * timing does not repeat). For narrowing a failure down: MC_CHAOS_CALM=1 keeps every process up (the
 * workload alone), MC_CHAOS_MASTER=0 keeps the master up, MC_CHAOS_NO_UPSERT=1 turns upserts into puts,
 * MC_CHAOS_HOLDER_MIB=N gives the holders N MiB instead of 64 (below ~40 the pool is always full: eviction),
 * MC_CHAOS_LONG_FREEZE=1 makes the first freeze 12 s long (past the TCP no-progress timeout; the TCP workers'
 * max_ms then shows the ~12 s a read waits: 10 s to the timeout, then the retry with a fresh descriptor
 * until the holder thaws), MC_CHAOS_KEEP_LOGS=1 keeps every process's log even when the test passes.
 *
 * History: its first runs found reads returning another key's value or a torn one, with and without
 * holder failures: an upsert rewrote a leased object in place under a reader, and a size-changing upsert
 * or a forced removal let other objects take leased space at once. The master now keeps leased bytes
 * until the lease ends (docs/master.md, "Read leases protect bytes"). */
#include <poll.h>
#include <time.h>

#include "test_store_harness.c"

#define NKEYS 40
#define NHOLDERS 3
#define NWORKERS 4
#define NVICTIMS 2 /* workers that are killed and restarted, with the objects on their segments */
#define VMAGIC 0x43484130534f4153ull
#define HDR 32
#define OP_BOUND_MS 15000L
#define SLOT (2 * MiB)

struct vhdr {
  uint64_t magic;
  uint32_t key, writer;
  uint64_t version, size;
};

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static unsigned body_seed(uint32_t writer, uint64_t version) { return (unsigned)(writer * 40503u + version * 2654435761u); }

static void make_value(uint8_t *p, uint32_t key, uint32_t writer, uint64_t version, uint64_t size) {
  struct vhdr h = {VMAGIC, key, writer, version, size};
  memcpy(p, &h, HDR);
  fill(p + HDR, size - HDR, body_seed(writer, version));
}

/* 0 when buf[0..n) is a value written for key; else prints what is wrong and returns -1. */
static int check_value(const uint8_t *buf, int64_t n, uint32_t key, const char *what) {
  struct vhdr h;
  if (n < HDR) {
    fprintf(stderr, "VIOLATION %s key %u: %lld bytes, shorter than a header\n", what, key, (long long)n);
    return -1;
  }
  memcpy(&h, buf, HDR);
  if (h.magic != VMAGIC || h.key != key || h.size != (uint64_t)n) {
    fprintf(stderr, "VIOLATION %s key %u: header magic %llx key %u writer %u version %llu size %llu, read %lld bytes\n",
            what, key, (unsigned long long)h.magic, h.key, h.writer, (unsigned long long)h.version,
            (unsigned long long)h.size, (long long)n);
    return -1;
  }
  unsigned seed = body_seed(h.writer, h.version);
  for (int64_t i = HDR; i < n; i++)
    if (buf[i] != pat((uint64_t)(i - HDR), seed)) {
      fprintf(stderr, "VIOLATION %s key %u: writer %u version %llu size %lld: body differs at byte %lld\n", what,
              key, h.writer, (unsigned long long)h.version, (long long)n, (long long)i);
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------ holder process */

static int holder_main(char **argv) { /* --holder NAME MASTER METADATA GSS */
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, argv[2], argv[4], strtoull(argv[5], NULL, 10), 4 * MiB, "tcp", "", argv[3]);
  if (rc) {
    printf("FAILED %d\n", rc);
    fflush(stdout);
    return 2;
  }
  printf("READY\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof(line), stdin)) {
  }
  mooncake_store_destroy(s);
  return 0;
}

/* ------------------------------------------------------------ worker process */

struct wstats {
  long ops[8], ok[8], codes[8];
  int code_val[8];
  long reads_checked, violations, max_ms;
};
enum { OP_PUT, OP_UPSERT, OP_GET, OP_BGET, OP_REMOVE, OP_BPUT, OP_EXIST, OP_SIZE, OP_N };
static const char *const op_name[OP_N] = {"put", "upsert", "get", "batch_get", "remove", "batch_put", "exist", "size"};

static void count_code(struct wstats *st, int code) {
  for (int i = 0; i < 8; i++) {
    if (st->codes[i] && st->code_val[i] == code) {
      st->codes[i]++;
      return;
    }
    if (!st->codes[i]) {
      st->code_val[i] = code;
      st->codes[i] = 1;
      return;
    }
  }
}

static uint64_t pick_size(uint64_t *r, int small) {
  static const uint64_t sizes[] = {HDR + 1, 4096, 16384, 65536 + 7, 300000, 1536 * 1024};
  return sizes[rng_next(r) % (small ? 5 : 6)];
}

static int worker_main(char **argv) { /* --worker ID MASTER METADATA GSS SECS SEED */
  uint32_t me = (uint32_t)atoi(argv[2]);
  uint64_t gss = strtoull(argv[5], NULL, 10);
  double secs = atof(argv[6]);
  uint64_t r = strtoull(argv[7], NULL, 10) * 7919 + me + 1;
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, "127.0.0.1", argv[4], gss, 8 * MiB, "tcp", "", argv[3]);
  if (rc) {
    printf("FAILED setup %d\n", rc);
    return 2;
  }
  /* slots: 0..3 values to write, 4..7 read targets */
  uint8_t *mem = aligned_alloc(4096, 8 * SLOT);
  if (!mem || mooncake_store_register_buffer(s, mem, 8 * SLOT)) return 3;
  struct wstats st = {0};
  uint64_t version = 0;
  int no_upsert = getenv("MC_CHAOS_NO_UPSERT") != NULL;
  long t_end = mc_tp_now_ms() + (long)(secs * 1000);
  char keys[4][32];
  const char *kp[4] = {keys[0], keys[1], keys[2], keys[3]};
  while (mc_tp_now_ms() < t_end) {
    unsigned roll = (unsigned)(rng_next(&r) % 100);
    int op = roll < 25 ? OP_PUT : roll < 30 ? (no_upsert ? OP_PUT : OP_UPSERT) : roll < 58 ? OP_GET : roll < 70 ? OP_BGET
             : roll < 82 ? OP_REMOVE : roll < 90 ? OP_BPUT : roll < 96 ? OP_EXIST : OP_SIZE;
    uint32_t k[4];
    for (int i = 0; i < 4; i++) {
      k[i] = (uint32_t)(rng_next(&r) % NKEYS);
      snprintf(keys[i], sizeof(keys[i]), "chaos/%02u", k[i]);
    }
    mooncake_replicate_config_t cfg = {1 + rng_next(&r) % 2, 0, 0, NULL, 0};
    long t0 = mc_tp_now_ms();
    int64_t res = 0, got[4];
    int codes[4], okc = 0;
    switch (op) {
    case OP_PUT:
    case OP_UPSERT: {
      uint64_t n = pick_size(&r, 0);
      make_value(mem, k[0], me, ++version, n);
      res = op == OP_PUT ? mooncake_store_put_from(s, keys[0], mem, n, &cfg)
                         : mc_store_upsert_from(s, keys[0], mem, n, &cfg);
      okc = res == 0;
      break;
    }
    case OP_GET:
      memset(mem + 4 * SLOT, 0xEE, 64);
      res = mooncake_store_get_into(s, keys[0], mem + 4 * SLOT, SLOT);
      if (res > 0) {
        st.reads_checked++;
        if (check_value(mem + 4 * SLOT, res, k[0], "get_into")) st.violations++;
      }
      okc = res > 0;
      break;
    case OP_BGET: {
      void *bufs[4];
      size_t sz[4];
      for (int i = 0; i < 4; i++) bufs[i] = mem + (4 + i) * SLOT, sz[i] = SLOT;
      res = mooncake_store_batch_get_into(s, kp, bufs, sz, 4, got);
      for (int i = 0; !res && i < 4; i++) {
        /* a key repeated in one batch reads into each of its buffers */
        if (got[i] > 0) {
          st.reads_checked++;
          if (check_value(bufs[i], got[i], k[i], "batch_get_into")) st.violations++;
          okc = 1;
        } else {
          count_code(&st, (int)got[i]);
        }
      }
      break;
    }
    case OP_REMOVE: {
      /* mostly plain removes; 1 in 8 forced (leased bytes must stay until the lease ends), 1 in 32 a
       * (forced or not) removal of a tenth of the keys by regex */
      unsigned how = (unsigned)(rng_next(&r) % 32);
      if (how == 0) {
        char re[32];
        snprintf(re, sizeof(re), "^chaos/%u[0-9]$", k[0] % 4);
        res = mooncake_store_remove_by_regex(s, re, (int)(rng_next(&r) % 2));
        okc = res >= 0;
        if (res > 0) res = 0;
      } else {
        res = mooncake_store_remove(s, keys[0], how < 5);
        okc = res == 0;
      }
      break;
    }
    case OP_BPUT: {
      void *bufs[3];
      size_t sz[3];
      for (int i = 0; i < 3; i++) {
        sz[i] = pick_size(&r, 1);
        bufs[i] = mem + i * SLOT;
        make_value(bufs[i], k[i], me, ++version, sz[i]);
      }
      res = mooncake_store_batch_put_from(s, kp, bufs, sz, 3, &cfg, codes);
      for (int i = 0; !res && i < 3; i++) {
        if (!codes[i]) okc = 1;
        else count_code(&st, codes[i]);
      }
      break;
    }
    case OP_EXIST:
      res = mooncake_store_is_exist(s, keys[0]);
      okc = res >= 0;
      break;
    case OP_SIZE:
      res = mooncake_store_get_size(s, keys[0]);
      if (res >= 0 && res < HDR + 1) {
        fprintf(stderr, "VIOLATION get_size key %u: %lld\n", k[0], (long long)res);
        st.violations++;
      }
      okc = res > 0;
      break;
    }
    long dt = mc_tp_now_ms() - t0;
    if (dt > st.max_ms) st.max_ms = dt;
    if (dt > OP_BOUND_MS) fprintf(stderr, "SLOW %s took %ld ms (rc %lld)\n", op_name[op], dt, (long long)res);
    st.ops[op]++;
    st.ok[op] += okc;
    if (res < 0) count_code(&st, (int)res);
  }
  printf("STATS worker=%u reads_checked=%ld violations=%ld max_ms=%ld", me, st.reads_checked, st.violations,
         st.max_ms);
  for (int i = 0; i < OP_N; i++) printf(" %s=%ld/%ld", op_name[i], st.ok[i], st.ops[i]);
  printf(" codes:");
  for (int i = 0; i < 8 && st.codes[i]; i++) printf(" %d:%ld", st.code_val[i], st.codes[i]);
  printf("\n");
  fflush(stdout);
  mooncake_store_destroy(s);
  free(mem);
  return st.violations ? 1 : 0;
}

/* ------------------------------------------------------------ the test */

/* A process of the test: this binary re-run (self_spawn), its stderr in log. */
struct child {
  struct peer p; /* pid, stdin/stdout pipes, name (a holder's segment name) */
  char *log;
};

static char *logdir;

static int child_start(struct child *c, char *const args[], const char *env) {
  const char *envs[] = {env, NULL};
  return self_spawn(&c->p, args, env ? envs : NULL, c->log);
}

/* One line from the child within timeout_ms, or -1. */
static int child_line(struct child *c, char *line, size_t cap, long timeout_ms) {
  struct pollfd p = {.fd = fileno(c->p.out), .events = POLLIN};
  if (poll(&p, 1, (int)timeout_ms) != 1) return -1;
  return fgets(line, (int)cap, c->p.out) ? 0 : -1;
}

/* 1 when the child has died by itself: killed by a signal (a crash, a sanitizer abort) or exited with a
 * status other than 0 and 2 (2: its setup failed, which a master restart at that moment can cause). Its
 * log is printed. */
static int child_crashed(struct child *c) {
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  if (c->p.pid <= 0 || waitid(P_PID, (id_t)c->p.pid, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid != c->p.pid) return 0;
  if (si.si_code == CLD_EXITED && (si.si_status == 0 || si.si_status == 2)) return 0;
  fprintf(stderr, "FAIL: %s (pid %d) died by itself (code %d, status %d)\n", c->log, (int)c->p.pid, si.si_code,
          si.si_status);
  mc_tp_dump_log(c->log);
  return 1;
}

static void child_kill(struct child *c) { peer_kill(&c->p); }

static struct master M;
static char gss_holder[32], gss_seg[32], gss_none[8] = "0";

static int holder_start(struct child *h) {
  char *args[] = {"chaos_holder", "--holder", h->p.name, M.addr, M.metadata, gss_holder, NULL};
  char line[128] = "";
  if (child_start(h, args, NULL) || child_line(h, line, sizeof(line), 15000) || strncmp(line, "READY", 5)) {
    fprintf(stderr, "holder %s did not come up: %s\n", h->p.name, line);
    mc_tp_dump_log(h->log);
    return -1;
  }
  return 0;
}

static void test_chaos(void) {
  const char *env_secs = getenv("MC_CHAOS_SECS"), *env_seed = getenv("MC_CHAOS_SEED");
  double secs = env_secs ? atof(env_secs) : 20;
  uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : (uint64_t)time(NULL);
  fprintf(stderr, "chaos: %.0f s, MC_CHAOS_SEED=%llu\n", secs, (unsigned long long)seed);
  uint64_t r = seed * 2 + 1;
  /* short liveness and leases, so dead holders leave quickly and removals are rarely held up; abandoned
   * puts are reclaimed after 2 s */
  const char *flags[] = {"--client_ttl=2", "--default_kv_lease_ttl=500", "--put_start_discard_timeout_sec=1",
                         "--put_start_release_timeout_sec=2", NULL};
  REQUIRE(master_start(&M, flags) == 0);
  const char *hm = getenv("MC_CHAOS_HOLDER_MIB"); /* smaller holders: more eviction */
  snprintf(gss_holder, sizeof(gss_holder), "%llu", (hm ? strtoull(hm, NULL, 10) : 64) * MiB);
  snprintf(gss_seg, sizeof(gss_seg), "%llu", 16 * MiB);

  struct child h[NHOLDERS], w[NWORKERS], vic[NVICTIMS];
  logdir = mc_tp_mkdtemp("chaos");
  REQUIRE(logdir);
  for (int i = 0; i < NHOLDERS; i++) {
    char ln[32];
    snprintf(ln, sizeof(ln), "holder%d.log", i);
    h[i].log = mc_tp_path(logdir, ln);
    snprintf(h[i].p.name, sizeof(h[i].p.name), "127.0.0.1:%d", mc_tp_free_port());
    REQUIRE(holder_start(&h[i]) == 0);
  }
  char secs_s[32], seed_s[32], ids[NWORKERS][8];
  snprintf(secs_s, sizeof(secs_s), "%.1f", secs);
  snprintf(seed_s, sizeof(seed_s), "%llu", (unsigned long long)seed);
  for (int i = 0; i < NWORKERS; i++) {
    snprintf(ids[i], sizeof(ids[i]), "%d", i);
    char ln[32];
    snprintf(ln, sizeof(ln), "worker%d.log", i);
    w[i].log = mc_tp_path(logdir, ln);
    char *args[] = {"chaos_worker", "--worker", ids[i], M.addr, M.metadata, i < 2 ? gss_seg : gss_none,
                    secs_s, seed_s, NULL};
    REQUIRE(child_start(&w[i], args, i % 2 ? "MC_FORCE_TCP=1" : NULL) == 0);
  }
  /* victims: the same workload from clients with a segment of their own, killed with SIGKILL now and then
   * and started again (a new client, a new segment); they check their reads too (VIOLATION lines in their
   * logs count), and run until killed */
  char vic_ids[NVICTIMS][8], vic_secs[32];
  snprintf(vic_secs, sizeof(vic_secs), "%.1f", secs + 3600);
  for (int i = 0; i < NVICTIMS; i++) {
    snprintf(vic_ids[i], sizeof(vic_ids[i]), "%d", 10 + i);
    char ln[32];
    snprintf(ln, sizeof(ln), "victim%d.log", i);
    vic[i].log = mc_tp_path(logdir, ln);
  }
#define VICTIM_START(i)                                                                                       \
  do {                                                                                                        \
    char *va_[] = {"chaos_victim", "--worker", vic_ids[i], M.addr, M.metadata, gss_seg, vic_secs, seed_s, NULL}; \
    CHECK(child_start(&vic[i], va_, (i) % 2 ? "MC_FORCE_TCP=1" : NULL) == 0);                                \
  } while (0)
  for (int i = 0; i < NVICTIMS; i++) VICTIM_START(i);

  /* the chaos, every 0.4-1.2 s: a holder killed (restarted 0.2-1.5 s later under the same name) 4 in 10,
   * a holder frozen 3 in 10, a victim killed and restarted 2 in 10, the master restarted 1 in 10 */
  long t_end = mc_tp_now_ms() + (long)(secs * 1000), restart_at[NHOLDERS] = {0};
  int kills = 0, freezes = 0, restarts = 0, master_restarts = 0, victim_kills = 0;
  while (mc_tp_now_ms() < t_end) {
    mc_tp_sleep_ms(400 + (long)(rng_next(&r) % 800));
    long now = mc_tp_now_ms();
    for (int i = 0; i < NHOLDERS; i++)
      if (h[i].p.pid <= 0 && now >= restart_at[i]) {
        CHECK(holder_start(&h[i]) == 0);
        restarts++;
      }
    int alive = 0;
    for (int i = 0; i < NHOLDERS; i++) alive += h[i].p.pid > 0;
    int v = (int)(rng_next(&r) % NHOLDERS), what = (int)(rng_next(&r) % 10);
    if (getenv("MC_CHAOS_CALM")) continue;
    if (what == 9 && !(getenv("MC_CHAOS_MASTER") && !strcmp(getenv("MC_CHAOS_MASTER"), "0"))) {
      CHECK(master_restart(&M, flags) == 0);
      master_restarts++;
      continue;
    }
    if (what == 7 || what == 8) { /* a writer dies mid-workload, its segment with it; it comes back */
      int k = (int)(rng_next(&r) % NVICTIMS);
      CHECK(!child_crashed(&vic[k]));
      child_kill(&vic[k]);
      VICTIM_START(k);
      victim_kills++;
      continue;
    }
    if (h[v].p.pid <= 0) continue;
    if (child_crashed(&h[v])) { /* counted once; it is restarted like a killed one */
      CHECK(!"a holder died by itself");
      child_kill(&h[v]);
      restart_at[v] = mc_tp_now_ms();
      continue;
    }
    if (what < 4 && alive >= 2) {
      child_kill(&h[v]);
      restart_at[v] = mc_tp_now_ms() + 200 + (long)(rng_next(&r) % 1300);
      kills++;
    } else if (what < 7) {
      kill(h[v].p.pid, SIGSTOP);
      /* MC_CHAOS_LONG_FREEZE=1: the first freeze lasts 12 s, past the TCP no-progress timeout (10 s) */
      int long_one = getenv("MC_CHAOS_LONG_FREEZE") && !freezes;
      mc_tp_sleep_ms(long_one ? 12000 : 100 + (long)(rng_next(&r) % 600));
      kill(h[v].p.pid, SIGCONT);
      freezes++;
    }
  }
  for (int i = 0; i < NHOLDERS; i++) {
    if (child_crashed(&h[i])) {
      CHECK(!"a holder died by itself");
      child_kill(&h[i]);
    }
    if (h[i].p.pid <= 0) {
      CHECK(holder_start(&h[i]) == 0);
      restarts++;
    }
  }
  fprintf(stderr, "chaos: %d holder kills, %d holder restarts, %d freezes, %d master restarts, %d victim kills\n",
          kills, restarts, freezes, master_restarts, victim_kills);
  for (int i = 0; i < NVICTIMS; i++) {
    CHECK(!child_crashed(&vic[i]));
    child_kill(&vic[i]);
    FILE *f = fopen(vic[i].log, "r");
    char line[1024];
    int bad = 0;
    while (f && fgets(line, sizeof(line), f))
      if (strstr(line, "VIOLATION")) {
        bad++;
        fprintf(stderr, "victim %d: %s", i, line);
      }
    if (f) fclose(f);
    CHECK_EQ(bad, 0);
    free(vic[i].log);
  }

  /* every worker reports and exits on its own within the op bound */
  long total_checked = 0;
  for (int i = 0; i < NWORKERS; i++) {
    char line[1024] = "";
    int got = !child_line(&w[i], line, sizeof(line), OP_BOUND_MS + 5000);
    CHECK(got);
    if (!got) fprintf(stderr, "worker %d did not finish: it hangs\n", i);
    fprintf(stderr, "%s", line);
    long checked = 0, violations = -1, max_ms = -1;
    char *p = strstr(line, "reads_checked=");
    if (p) sscanf(p, "reads_checked=%ld violations=%ld max_ms=%ld", &checked, &violations, &max_ms);
    CHECK_EQ(violations, 0);
    CHECK(max_ms >= 0 && max_ms <= OP_BOUND_MS);
    total_checked += checked;
    int st = -1;
    if (got) {
      long deadline = mc_tp_now_ms() + 10000;
      while (waitpid(w[i].p.pid, &st, WNOHANG) == 0 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(10);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || violations) {
      fprintf(stderr, "worker %d exit status %d; its log:\n", i, st);
      mc_tp_dump_log(w[i].log);
    }
    child_kill(&w[i]);
    free(w[i].log);
  }
  CHECK(total_checked >= 50); /* reads did succeed and were checked, chaos or not */

  /* afterwards: the master answers, what survived reads back intact, each holder takes new objects */
  CHECK(!mc_tp_exited(M.pid));
  mooncake_store_t s = client_new(&M, 0, 8 * MiB);
  REQUIRE(s);
  uint8_t *buf = malloc(SLOT);
  int survivors = 0;
  for (uint32_t k = 0; k < NKEYS; k++) {
    char key[32];
    snprintf(key, sizeof(key), "chaos/%02u", k);
    int64_t n = mooncake_store_get_into(s, key, buf, SLOT);
    if (n > 0) {
      survivors++;
      CHECK_EQ(check_value(buf, n, k, "final get_into"), 0);
    }
  }
  for (int i = 0; i < NHOLDERS; i++) {
    char key[64];
    snprintf(key, sizeof(key), "after/%d", i);
    const char *pref[1] = {h[i].p.name};
    mooncake_replicate_config_t cfg = {1, 0, 0, pref, 1};
    make_value(buf, 1000 + (uint32_t)i, 99, 1, 100000);
    /* a restarted holder's segment may take a moment to be offered for new data again */
    int rc = -1;
    for (long t = mc_tp_now_ms(); rc && mc_tp_now_ms() - t < 10000; mc_tp_sleep_ms(100)) {
      rc = mooncake_store_put(s, key, buf, 100000, &cfg);
      if (!rc) {
        mc_replica_desc_t *d = NULL;
        int nd = mc_store_get_replica_desc(s, key, &d);
        int on_it = nd == 1 && d && strstr(d[0].segment_name, h[i].p.name);
        if (nd > 0) mc_store_replica_desc_free(d, nd);
        if (!on_it) { /* placed elsewhere (the holder is not offered yet): try again */
          mooncake_store_remove(s, key, 1);
          rc = -1;
        }
      }
    }
    CHECK_EQ(rc, 0);
    memset(buf, 0, 100000);
    CHECK_EQ(mooncake_store_get_into(s, key, buf, SLOT), 100000);
    CHECK_EQ(check_value(buf, 100000, 1000 + (uint32_t)i, "after get_into"), 0);
  }
  fprintf(stderr, "chaos: %ld reads checked by the workers, %d of %d keys survived\n", total_checked, survivors,
          NKEYS);
  mooncake_store_destroy(s);
  free(buf);
  for (int i = 0; i < NHOLDERS; i++) {
    CHECK(h[i].p.pid > 0 && !mc_tp_exited(h[i].p.pid));
    child_kill(&h[i]);
    free(h[i].log);
  }
  if (!mc_test_failures && !getenv("MC_CHAOS_KEEP_LOGS")) mc_tp_rmrf(logdir);
  else fprintf(stderr, "chaos: logs kept in %s\n", logdir);
  free(logdir);
  master_stop(&M);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && !strcmp(argv[1], "--holder")) return holder_main(argv);
  if (argc > 1 && !strcmp(argv[1], "--worker")) return worker_main(argv);
  static const struct mc_test_case cases[] = {{"chaos", test_chaos}};
  return run_cases(cases, 1, argc, argv);
}
