/* The process lifecycle (src/common/lifecycle.h; docs/store-client.md, "Process lifecycle: exit and
 * signals") with real processes: an agent (this binary re-run as "--agent") creates engines and store
 * clients on commands from its stdin, and the test signals it and looks at what it left in the metadata
 * service (an HTTP metadata server in the test process, or redis-server) and at a real mooncake_master.
 *
 * Regression tests: a signal after destroyTransferEngine does not touch the destroyed engine (run it
 * under ASan); a 17th engine is torn down like the first 16; the application's own SIGINT/SIGTERM
 * handlers and SIG_IGN are kept; a forked child's signal or exit() leaves its parent's handles alone; an
 * engine created under a live engine's name fails without deleting the owner's keys. */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/test.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"

#define BUF_LEN (1 << 20)
#define REPLY_MS 30000

static uint8_t pat(size_t i, unsigned seed) { return (uint8_t)(i * 31u + seed); }

/* ------------------------------------------------------------ the agent process */

#define MAX_ENGINES 32
static transfer_engine_t engines[MAX_ENGINES];
static uint8_t *bufs[MAX_ENGINES];
static mooncake_store_t store;
static pid_t forked = -1;
static volatile sig_atomic_t handled[65];
static struct sigaction replaced[65]; /* what CHAIN replaced */

static void app_handler(int sig) { handled[sig]++; }

static void chain_handler(int sig) {
  handled[sig]++;
  if (!(replaced[sig].sa_flags & SA_SIGINFO) && replaced[sig].sa_handler != SIG_DFL &&
      replaced[sig].sa_handler != SIG_IGN)
    replaced[sig].sa_handler(sig);
}

static void set_handler(int sig, void (*fn)(int), struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = fn;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, old);
}

static void reply(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
  fflush(stdout);
}

/* "ENGINE <name>": an engine with a registered 1 MiB buffer (pattern seeded by its index). */
static void agent_engine(const char *conn, const char *name) {
  int i = 0;
  while (i < MAX_ENGINES && engines[i]) i++;
  transfer_engine_t e = i < MAX_ENGINES ? createTransferEngine(conn, name, NULL, 0, 1) : NULL;
  uint8_t *buf = e ? malloc(BUF_LEN) : NULL;
  if (buf)
    for (size_t k = 0; k < BUF_LEN; k++) buf[k] = pat(k, (unsigned)i);
  if (!buf || registerLocalMemory(e, buf, BUF_LEN, "cpu:0", 1)) {
    destroyTransferEngine(e);
    free(buf);
    reply("FAIL");
    return;
  }
  engines[i] = e;
  bufs[i] = buf;
  reply("OK %d %llu", i, (unsigned long long)(uintptr_t)buf);
}

/* "REAP": the exit of the child made by FORK / FORKEXIT within 10 s ("EXIT n", "SIG n" or "HUNG"). */
static void agent_reap(void) {
  int st = 0;
  long end = mc_tp_now_ms() + 10000;
  pid_t r = 0;
  while (forked > 0 && (r = waitpid(forked, &st, WNOHANG)) == 0 && mc_tp_now_ms() < end) mc_tp_sleep_ms(10);
  if (r == forked && WIFEXITED(st)) reply("EXIT %d", WEXITSTATUS(st));
  else if (r == forked && WIFSIGNALED(st)) reply("SIG %d", WTERMSIG(st));
  else reply("HUNG");
  if (r != forked && forked > 0) kill(forked, SIGKILL), waitpid(forked, &st, 0);
  forked = -1;
}

static int agent_main(const char *conn) {
  char line[512], a[256], b[256];
  int n;
  while (fgets(line, sizeof(line), stdin)) {
    if (sscanf(line, "ENGINE %255s", a) == 1) {
      agent_engine(conn, a);
    } else if (sscanf(line, "GRACE %d", &n) == 1) {
      enableGracefulShutdown(engines[n]);
      reply("OK");
    } else if (sscanf(line, "DESTROY %d", &n) == 1) {
      destroyTransferEngine(engines[n]);
      free(bufs[n]);
      engines[n] = NULL;
      bufs[n] = NULL;
      reply("OK");
    } else if (sscanf(line, "HANDLER %d", &n) == 1) {
      set_handler(n, app_handler, NULL);
      reply("OK");
    } else if (sscanf(line, "IGNORE %d", &n) == 1) {
      signal(n, SIG_IGN);
      reply("OK");
    } else if (sscanf(line, "CHAIN %d", &n) == 1) { /* a handler installed after the library's, calling it */
      set_handler(n, chain_handler, &replaced[n]);
      reply("OK");
    } else if (sscanf(line, "COUNT %d", &n) == 1) {
      reply("%d", (int)handled[n]);
    } else if (sscanf(line, "STORE %255s %255s", a, b) == 2) {
      store = mooncake_store_create();
      int rc = mooncake_store_setup(store, "127.0.0.1", b, 16 << 20, 1 << 20, "tcp", "", a);
      char host[256] = "";
      mooncake_store_get_hostname(store, host, sizeof(host));
      if (rc) reply("FAIL %d", rc);
      else reply("OK %s", host);
    } else if (sscanf(line, "PUTGET %255s", a) == 1) {
      char out[16] = "";
      int rc = mooncake_store_put(store, a, "value", 5, NULL);
      int64_t got = rc ? rc : mooncake_store_get_into(store, a, out, sizeof(out));
      if (got == 5 && !memcmp(out, "value", 5)) reply("OK");
      else reply("FAIL %lld", (long long)got);
    } else if (!strncmp(line, "FORKEXIT", 8) || !strncmp(line, "FORK", 4)) {
      int then_exit = !strncmp(line, "FORKEXIT", 8);
      fflush(stdout);
      forked = fork();
      if (forked == 0) {
        if (then_exit) exit(0); /* atexit hooks run: they must leave the parent's handles alone */
        for (;;) pause();
      }
      reply("OK %d", (int)forked);
    } else if (!strncmp(line, "REAP", 4)) {
      agent_reap();
    } else if (!strncmp(line, "PING", 4)) {
      reply("OK");
    } else if (!strncmp(line, "QUIT", 4)) {
      if (store) mooncake_store_destroy(store);
      for (int i = 0; i < MAX_ENGINES; i++) {
        if (engines[i]) destroyTransferEngine(engines[i]);
        free(bufs[i]);
      }
      return 0;
    }
  }
  return 0;
}

/* ------------------------------------------------------------ the test side */

struct agent {
  pid_t pid;
  int in, out; /* its stdin, its stdout */
};

static int agent_start(struct agent *ag, const char *conn) {
  int to[2], from[2];
  if (pipe(to) || pipe(from)) return -1;
  ag->pid = fork();
  if (ag->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    /* LeakSanitizer cannot check a child forked from a process with busy threads (FORKEXIT): its exit-time
     * check locks the allocator, whose lock another thread of the parent may have held at the fork, and
     * hangs. The agent runs without it; this process and every other test keep it. */
    setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
    execl("/proc/self/exe", "test_lifecycle", "--agent", conn, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  ag->in = to[1];
  ag->out = from[0];
  return ag->pid > 0 ? 0 : -1;
}

/* Sends one command line and reads one reply line (within REPLY_MS); 0, or -1 when the agent died. */
static int agent_cmd(struct agent *ag, char *out, size_t cap, const char *fmt, ...) {
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  if (write(ag->in, line, (size_t)n) != n) return -1;
  size_t got = 0;
  long end = mc_tp_now_ms() + REPLY_MS;
  while (got + 1 < cap) {
    struct pollfd p = {ag->out, POLLIN, 0};
    long left = end - mc_tp_now_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
    char c;
    if (read(ag->out, &c, 1) != 1) break;
    if (c == '\n') {
      out[got] = 0;
      return 0;
    }
    out[got++] = c;
  }
  out[got] = 0;
  fprintf(stderr, "  agent gave no answer to %.*s", n, line);
  return -1;
}

/* The reply's first word is "OK". */
static int agent_ok(struct agent *ag, const char *fmt, ...) {
  char cmd[600], r[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  if (agent_cmd(ag, r, sizeof(r), "%s", cmd)) return 0;
  if (strncmp(r, "OK", 2)) fprintf(stderr, "  %s -> %s\n", cmd, r);
  return !strncmp(r, "OK", 2);
}

/* Its wait status within timeout_ms (then SIGKILL and -1). Closes the pipes. */
static int agent_wait(struct agent *ag, long timeout_ms) {
  int st = 0;
  long end = mc_tp_now_ms() + timeout_ms;
  pid_t r;
  while ((r = waitpid(ag->pid, &st, WNOHANG)) == 0 && mc_tp_now_ms() < end) mc_tp_sleep_ms(10);
  if (r != ag->pid) {
    fprintf(stderr, "  agent %d still running after %ld ms: killed\n", (int)ag->pid, timeout_ms);
    kill(ag->pid, SIGKILL);
    waitpid(ag->pid, &st, 0);
    st = -1;
  }
  close(ag->in);
  close(ag->out);
  return st;
}

static int died_by(int st, int sig) {
  if (st != -1 && !(WIFSIGNALED(st) && WTERMSIG(st) == sig))
    fprintf(stderr, "  agent ended with %s %d, expected signal %d\n", WIFEXITED(st) ? "exit code" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), sig);
  return st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == sig;
}

/* QUIT: the agent destroys what it made and exits 0 (1), or not (0). */
static int agent_quit(struct agent *ag) {
  if (write(ag->in, "QUIT\n", 5) != 5) return 0;
  int st = agent_wait(ag, 15000);
  return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A metadata service (an HTTP metadata server in this process, or redis-server), a client of it, and one
 * agent using it; with a master (store tests) a real mooncake_master too. */
struct env {
  struct mc_meta_server *ms;
  struct mc_tp_service redis;
  struct mc_meta *m;
  char conn[128];
  struct agent ag;
  pid_t master_pid;
  int master_port, admin_port;
  char *master_dir, master[64];
};

static int master_start(struct env *v) {
  const char *bindir = getenv("MC_TEST_BIN_DIR");
  char bin[1024], a1[32], a2[32];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bindir ? bindir : ".");
  v->master_dir = mc_tp_mkdtemp("lifecycle");
  char *log = mc_tp_path(v->master_dir, "log");
  v->master_port = mc_tp_free_port();
  v->admin_port = mc_tp_free_port();
  snprintf(a1, sizeof(a1), "--rpc_port=%d", v->master_port);
  snprintf(a2, sizeof(a2), "--metrics_port=%d", v->admin_port);
  snprintf(v->master, sizeof(v->master), "127.0.0.1:%d", v->master_port);
  char *argv[] = {bin, a1, a2, NULL};
  v->master_pid = mc_tp_spawn(argv, NULL, log);
  free(log);
  return v->master_pid > 0 && mc_tp_wait_port(v->master_port, 10000, v->master_pid) == 0 ? 0 : -1;
}

static int env_start_on(struct env *v, int with_master, int redis) {
  memset(v, 0, sizeof(*v));
  if (redis) {
    if (mc_tp_start_redis(&v->redis, 0, NULL)) return -1;
    snprintf(v->conn, sizeof(v->conn), "redis://127.0.0.1:%d", v->redis.port);
  } else {
    if (!(v->ms = mc_meta_server_start("127.0.0.1", 0, NULL))) return -1;
    snprintf(v->conn, sizeof(v->conn), "http://127.0.0.1:%u/metadata", mc_meta_server_port(v->ms));
  }
  if (mc_meta_open(v->conn, &v->m) || (with_master && master_start(v))) return -1;
  return agent_start(&v->ag, v->conn);
}

static int env_start(struct env *v, int with_master) { return env_start_on(v, with_master, 0); }

static void env_stop(struct env *v) {
  if (v->master_pid > 0) mc_tp_stop(v->master_pid, 5000);
  if (v->master_dir) mc_tp_rmrf(v->master_dir);
  free(v->master_dir);
  mc_meta_close(v->m);
  if (v->ms) mc_meta_server_stop(v->ms);
  if (v->redis.dir) mc_tp_service_stop(&v->redis);
}

/* Which of the two keys of a segment name are in the metadata service: bit 1 ram/, bit 2 rpc_meta/. */
static int keys_of(struct env *v, const char *name) {
  char key[512], *val = NULL;
  int bits = 0;
  mc_meta_segment_key(key, sizeof(key), name);
  if (mc_meta_get(v->m, key, &val) == 0) bits |= 1;
  free(val);
  val = NULL;
  mc_meta_rpc_key(key, sizeof(key), name);
  if (mc_meta_get(v->m, key, &val) == 0) bits |= 2;
  free(val);
  return bits;
}

/* An engine of the agent with graceful shutdown: 1 when made. */
static int graceful_engine(struct env *v, const char *name) {
  char r[128];
  int idx = -1;
  if (agent_cmd(&v->ag, r, sizeof(r), "ENGINE %s", name) || sscanf(r, "OK %d", &idx) != 1) return 0;
  return agent_ok(&v->ag, "GRACE %d", idx);
}

/* ------------------------------------------------------------ engines */

/* An engine destroyed before the signal stays out of the teardown: nothing reads its freed memory (ASan
 * would report it) and nothing deletes the keys of the engine that took its name in another process. */
static void test_signal_after_destroy(void) {
  struct env v;
  REQUIRE(env_start(&v, 0) == 0);
  CHECK(graceful_engine(&v, "127.0.0.1:20001"));
  CHECK(agent_ok(&v.ag, "DESTROY 0"));
  CHECK(graceful_engine(&v, "127.0.0.1:20002")); /* in the slot of the destroyed one */
  CHECK_EQ(keys_of(&v, "127.0.0.1:20001"), 0);
  transfer_engine_t heir = createTransferEngine(v.conn, "127.0.0.1:20001", NULL, 0, 1);
  REQUIRE(heir);
  CHECK_EQ(keys_of(&v, "127.0.0.1:20001"), 3);
  CHECK_EQ(keys_of(&v, "127.0.0.1:20002"), 3);
  kill(v.ag.pid, SIGTERM);
  CHECK(died_by(agent_wait(&v.ag, 15000), SIGTERM));
  CHECK_EQ(keys_of(&v, "127.0.0.1:20002"), 0); /* the live one was torn down */
  CHECK_EQ(keys_of(&v, "127.0.0.1:20001"), 3); /* the heir's keys are untouched */
  destroyTransferEngine(heir);
  env_stop(&v);
}

/* Seventeen engines with graceful shutdown: a signal tears down every one (the registry has no limit). */
static void test_seventeen_engines(void) {
  struct env v;
  REQUIRE(env_start(&v, 0) == 0);
  char name[64];
  for (int i = 0; i < 17; i++) {
    snprintf(name, sizeof(name), "127.0.0.1:%d", 21000 + i);
    CHECK(graceful_engine(&v, name));
    CHECK_EQ(keys_of(&v, name), 3);
  }
  kill(v.ag.pid, SIGINT);
  CHECK(died_by(agent_wait(&v.ag, 20000), SIGINT));
  for (int i = 0; i < 17; i++) {
    snprintf(name, sizeof(name), "127.0.0.1:%d", 21000 + i);
    if (keys_of(&v, name)) fprintf(stderr, "  engine %d (%s) kept its keys\n", i + 1, name);
    CHECK_EQ(keys_of(&v, name), 0);
  }
  env_stop(&v);
}

/* Waits up to 5 s for the agent's handler of sig to have run `want` times; the count seen. */
static int handler_runs(struct agent *ag, int sig, int want) {
  char r[64];
  int got = -1;
  for (long end = mc_tp_now_ms() + 5000; mc_tp_now_ms() < end && got != want; mc_tp_sleep_ms(20)) {
    if (agent_cmd(ag, r, sizeof(r), "COUNT %d", sig)) break;
    got = atoi(r);
  }
  if (got != want) fprintf(stderr, "  signal %d: the application's handler ran %d times, not %d\n", sig, got, want);
  return got;
}

/* Handlers the application installed before, and SIG_IGN, are kept: its handlers run, the ignored signal
 * is ignored, nothing is torn down on them; destroy still cleans up. */
static void test_application_handlers_kept(void) {
  struct env v;
  REQUIRE(env_start(&v, 0) == 0);
  CHECK(agent_ok(&v.ag, "HANDLER %d", SIGINT));
  CHECK(agent_ok(&v.ag, "HANDLER %d", SIGTERM));
  CHECK(agent_ok(&v.ag, "IGNORE %d", SIGHUP));
  CHECK(graceful_engine(&v, "127.0.0.1:22001"));
  kill(v.ag.pid, SIGINT);
  CHECK_EQ(handler_runs(&v.ag, SIGINT, 1), 1);
  kill(v.ag.pid, SIGTERM);
  CHECK_EQ(handler_runs(&v.ag, SIGTERM, 1), 1);
  kill(v.ag.pid, SIGINT);
  CHECK_EQ(handler_runs(&v.ag, SIGINT, 2), 2);
  kill(v.ag.pid, SIGHUP);
  mc_tp_sleep_ms(200);
  CHECK(agent_ok(&v.ag, "PING"));
  CHECK_EQ(keys_of(&v, "127.0.0.1:22001"), 3); /* nothing was torn down */
  CHECK(agent_quit(&v.ag));
  CHECK_EQ(keys_of(&v, "127.0.0.1:22001"), 0);
  env_stop(&v);
}

/* A handler the application installs after the library's and that calls the one it replaced: both run,
 * and the library's teardown and default action follow. */
static void test_application_handler_chains(void) {
  struct env v;
  REQUIRE(env_start(&v, 0) == 0);
  CHECK(graceful_engine(&v, "127.0.0.1:23001"));
  CHECK(agent_ok(&v.ag, "CHAIN %d", SIGTERM));
  kill(v.ag.pid, SIGTERM);
  CHECK(died_by(agent_wait(&v.ag, 15000), SIGTERM));
  CHECK_EQ(keys_of(&v, "127.0.0.1:23001"), 0);
  env_stop(&v);
}

/* A child forked by a process with graceful shutdown: a signal to the child takes its default action
 * there, and the parent neither hears of it nor tears anything down. */
static void test_forked_child_signal(void) {
  struct env v;
  REQUIRE(env_start(&v, 0) == 0);
  char r[64];
  CHECK(graceful_engine(&v, "127.0.0.1:24001"));
  REQUIRE(agent_cmd(&v.ag, r, sizeof(r), "FORK") == 0);
  pid_t child = (pid_t)atoi(r + 3);
  REQUIRE(child > 0);
  kill(child, SIGTERM);
  CHECK_EQ(agent_cmd(&v.ag, r, sizeof(r), "REAP"), 0);
  CHECK_STR(r, "SIG 15");
  CHECK(agent_ok(&v.ag, "PING"));
  CHECK_EQ(keys_of(&v, "127.0.0.1:24001"), 3);
  CHECK(agent_quit(&v.ag));
  env_stop(&v);
}

/* The two keys of name are there with exactly these values. */
static int keys_are(struct env *v, const char *name, const char *ram, const char *rpc) {
  char key[512], *a = NULL, *b = NULL;
  mc_meta_segment_key(key, sizeof(key), name);
  int ok = mc_meta_get(v->m, key, &a) == 0 && ram && !strcmp(a, ram);
  mc_meta_rpc_key(key, sizeof(key), name);
  ok = mc_meta_get(v->m, key, &b) == 0 && rpc && !strcmp(b, rpc) && ok;
  free(a);
  free(b);
  return ok;
}

/* READs len bytes at addr of segment name into buf through engine e: 1 when the transfer completed. */
static int read_from(transfer_engine_t e, const char *name, uint64_t addr, uint8_t *buf, uint64_t len) {
  segment_id_t seg = openSegment(e, name);
  if (seg < 0) return 0;
  batch_id_t b = allocateBatchID(e, 1);
  struct transfer_request req = {OPCODE_READ, buf, seg, addr, len};
  struct transfer_status ts = {0};
  if (submitTransfer(e, b, &req, 1)) return 0;
  long end = mc_tp_now_ms() + 10000;
  while (getTransferStatus(e, b, 0, &ts) == 0 && ts.status != STATUS_COMPLETED && ts.status != STATUS_FAILED &&
         mc_tp_now_ms() < end)
    mc_tp_sleep_ms(1);
  freeBatchID(e, b);
  return ts.status == STATUS_COMPLETED;
}

/* A second engine under a live engine's server name: its creation fails, and the owner keeps its keys
 * and stays reachable. The HTTP metadata server refuses to delete an rpc_meta key while its engine
 * answers (docs/transfer-engine.md, "Metadata"), etcd and Redis do not. */
static void name_collision_keeps_owner(int redis) {
  struct env v;
  REQUIRE(env_start_on(&v, 0, redis) == 0);
  char r[64], key[512], *ram = NULL, *rpc = NULL;
  unsigned long long addr = 0;
  int idx = -1;
  REQUIRE(agent_cmd(&v.ag, r, sizeof(r), "ENGINE 127.0.0.1:25001") == 0);
  REQUIRE(sscanf(r, "OK %d %llu", &idx, &addr) == 2);
  mc_meta_segment_key(key, sizeof(key), "127.0.0.1:25001");
  CHECK_EQ(mc_meta_get(v.m, key, &ram), 0);
  mc_meta_rpc_key(key, sizeof(key), "127.0.0.1:25001");
  CHECK_EQ(mc_meta_get(v.m, key, &rpc), 0);
  CHECK(createTransferEngine(v.conn, "127.0.0.1:25001", NULL, 0, 1) == NULL);
  CHECK(keys_are(&v, "127.0.0.1:25001", ram, rpc));
  free(ram);
  free(rpc);
  transfer_engine_t reader = createTransferEngine(v.conn, "127.0.0.1:25002", NULL, 0, 1);
  REQUIRE(reader);
  uint8_t *buf = calloc(1, BUF_LEN);
  REQUIRE(registerLocalMemory(reader, buf, BUF_LEN, "cpu:0", 1) == 0);
  CHECK(read_from(reader, "127.0.0.1:25001", addr, buf, BUF_LEN)); /* the owner is still reachable */
  int same = 1;
  for (size_t k = 0; k < BUF_LEN && same; k++) same = buf[k] == pat(k, (unsigned)idx);
  CHECK(same);
  destroyTransferEngine(reader);
  free(buf);
  CHECK(agent_quit(&v.ag));
  CHECK_EQ(keys_of(&v, "127.0.0.1:25001"), 0); /* the owner's destroy still removes them */
  env_stop(&v);
}

static void test_name_collision_keeps_owner_http(void) { name_collision_keeps_owner(0); }
static void test_name_collision_keeps_owner_redis(void) { name_collision_keeps_owner(1); }

/* ------------------------------------------------------------ store clients */

/* The master's count of mounted segments (GET /get_segments_detail), or -1. */
static int segments(struct env *v) {
  static const char req[] = "GET /get_segments_detail HTTP/1.0\r\n\r\n";
  char resp[16384];
  if (mc_tp_raw_http(v->admin_port, req, sizeof(req) - 1, resp, sizeof(resp), 3000) <= 0) return -1;
  const char *p = strstr(resp, "\"total_segments\":");
  return p ? atoi(p + strlen("\"total_segments\":")) : -1;
}

/* A store client of the agent; its segment name into host (1), or 0. */
static int agent_store(struct env *v, char *host, size_t cap) {
  char r[300], fmt[16];
  snprintf(fmt, sizeof(fmt), "OK %%%zus", cap - 1);
  return agent_cmd(&v->ag, r, sizeof(r), "STORE %s %s", v->master, v->conn) == 0 && sscanf(r, fmt, host) == 1;
}

/* One SIGTERM tears down a store client and an engine with graceful shutdown of the same process. */
static void test_store_and_engine_one_signal(void) {
  struct env v;
  REQUIRE(env_start(&v, 1) == 0);
  char host[256] = "";
  CHECK(agent_store(&v, host, sizeof(host)));
  CHECK(graceful_engine(&v, "127.0.0.1:26001"));
  CHECK_EQ(segments(&v), 1);
  CHECK_EQ(keys_of(&v, host), 3);
  kill(v.ag.pid, SIGTERM);
  CHECK(died_by(agent_wait(&v.ag, 15000), SIGTERM));
  CHECK_EQ(segments(&v), 0); /* unmounted, not left to expire */
  CHECK_EQ(keys_of(&v, host), 0);
  CHECK_EQ(keys_of(&v, "127.0.0.1:26001"), 0);
  env_stop(&v);
}

/* A forked child that calls exit() leaves its parent's store client alone: no teardown (its heartbeat
 * thread does not exist there), no unmount. */
static void test_forked_child_exit(void) {
  struct env v;
  REQUIRE(env_start(&v, 1) == 0);
  char r[64], host[256] = "";
  CHECK(agent_store(&v, host, sizeof(host)));
  CHECK(agent_ok(&v.ag, "FORKEXIT"));
  CHECK_EQ(agent_cmd(&v.ag, r, sizeof(r), "REAP"), 0);
  CHECK_STR(r, "EXIT 0");
  CHECK(agent_ok(&v.ag, "PUTGET k1"));
  CHECK_EQ(segments(&v), 1);
  CHECK_EQ(keys_of(&v, host), 3);
  CHECK(agent_quit(&v.ag));
  CHECK_EQ(segments(&v), 0);
  env_stop(&v);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && !strcmp(argv[1], "--agent")) return agent_main(argv[2]);
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_signal_after_destroy),
      TEST_CASE(test_seventeen_engines),
      TEST_CASE(test_application_handlers_kept),
      TEST_CASE(test_application_handler_chains),
      TEST_CASE(test_forked_child_signal),
      TEST_CASE(test_name_collision_keeps_owner_http),
      TEST_CASE(test_name_collision_keeps_owner_redis),
      TEST_CASE(test_store_and_engine_one_signal),
      TEST_CASE(test_forked_child_exit),
  };
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
