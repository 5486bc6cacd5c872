/* Shared pieces of the store black-box tests (#included by test_store.c and test_store_xproc.c): a real
 * mooncake_master on free ports (with its embedded HTTP metadata server), clients set up against it,
 * and peer clients in other processes (this binary re-run as "--peer") driven over a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/test.h"
#include "mooncake/store.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024)

/* ------------------------------------------------------------ data patterns */

static inline uint8_t pat(uint64_t i, unsigned seed) { return (uint8_t)((i * 131u + seed * 7u + (i >> 11)) ^ seed); }

static inline void fill(void *p, uint64_t n, unsigned seed) {
  uint8_t *b = p;
  for (uint64_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

static inline int verify(const void *p, uint64_t n, unsigned seed) {
  const uint8_t *b = p;
  for (uint64_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return 0;
  return 1;
}

/* ------------------------------------------------------------ the master */

struct master {
  pid_t pid;
  int rpc, meta, metrics;
  char addr[64], metadata[128];
  char *dir, *log;
};

/* Runs $MC_TEST_BIN_DIR/mooncake_master on m's ports with extra flags (NULL-terminated, may be NULL),
 * logging to m->log; its pid once both ports answer, else -1. */
static inline pid_t master_spawn_(struct master *m, const char *const *extra) {
  const char *bin_dir = getenv("MC_TEST_BIN_DIR");
  char bin[512], a1[64], a2[64], a3[64];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bin_dir ? bin_dir : ".");
  snprintf(a1, sizeof(a1), "--rpc_port=%d", m->rpc);
  snprintf(a2, sizeof(a2), "--http_metadata_server_port=%d", m->meta);
  snprintf(a3, sizeof(a3), "--metrics_port=%d", m->metrics);
  char *argv[32] = {bin, a1, "--enable_http_metadata_server", a2, a3};
  int n = 5;
  for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  m->pid = mc_tp_spawn(argv, NULL, m->log);
  return m->pid > 0 && !mc_tp_wait_port(m->rpc, 15000, m->pid) && !mc_tp_wait_port(m->meta, 15000, m->pid) ? m->pid : -1;
}

/* Starts $MC_TEST_BIN_DIR/mooncake_master on free ports with extra flags (NULL-terminated, may be NULL). */
static inline int master_start(struct master *m, const char *const *extra) {
  memset(m, 0, sizeof(*m));
  m->rpc = mc_tp_free_port();
  do m->meta = mc_tp_free_port(); while (m->meta == m->rpc);
  do m->metrics = mc_tp_free_port(); while (m->metrics == m->rpc || m->metrics == m->meta);
  m->dir = mc_tp_mkdtemp("store_master");
  if (!m->dir) return -1;
  m->log = mc_tp_path(m->dir, "master.log");
  if (master_spawn_(m, extra) <= 0) {
    fprintf(stderr, "FAIL: mooncake_master ($MC_TEST_BIN_DIR=%s) did not start\n", getenv("MC_TEST_BIN_DIR"));
    if (m->log) mc_tp_dump_log(m->log);
    return -1;
  }
  snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", m->rpc);
  snprintf(m->metadata, sizeof(m->metadata), "http://127.0.0.1:%d/metadata", m->meta);
  return 0;
}

/* Kills the master with SIGKILL and starts a new one on the same ports (it starts empty). 0, -1 when
 * the new one does not start, -2 when the old one had already exited by itself (a crash; its log is
 * printed). */
static inline int master_restart(struct master *m, const char *const *extra) {
  if (mc_tp_exited(m->pid)) {
    fprintf(stderr, "FAIL: the master (pid %d) exited by itself\n", (int)m->pid);
    mc_tp_dump_log(m->log);
    waitpid(m->pid, NULL, 0);
    return master_spawn_(m, extra) > 0 ? -2 : -1;
  }
  kill(m->pid, SIGKILL);
  waitpid(m->pid, NULL, 0);
  return master_spawn_(m, extra) > 0 ? 0 : -1;
}

static inline void master_stop(struct master *m) {
  if (m->pid > 0) mc_tp_stop(m->pid, 5000);
  m->pid = -1;
  mc_tp_rmrf(m->dir);
  free(m->dir);
  free(m->log);
  m->dir = m->log = NULL;
}

/* A client with an auto port against m, or NULL (message printed). */
static inline mooncake_store_t client_new(struct master *m, uint64_t gss, uint64_t lbs) {
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, "127.0.0.1", m->metadata, gss, lbs, "tcp", "", m->addr);
  if (rc) {
    fprintf(stderr, "client setup failed: %d (%s)\n", rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(s);
    return NULL;
  }
  return s;
}

/* ------------------------------------------------------------ peers in other processes */

struct peer {
  pid_t pid;
  FILE *in, *out;
  char name[128];
};

/* Runs this binary again (/proc/self/exe) with args: its stdin and stdout piped to p->in / p->out, its
 * stderr into the file log (NULL: the test's stderr), env entries ("NAME=value", NULL-terminated, may be
 * NULL) added. The child dies with the test (a frozen one would never see EOF). 0 or -1. */
static inline int self_spawn(struct peer *p, char *const args[], const char *const *env, const char *log) {
  int to[2], from[2];
  if (pipe(to) || pipe(from)) return -1;
  int lfd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  p->pid = fork();
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(to[0], 0);
    dup2(from[1], 1);
    if (lfd >= 0) dup2(lfd, 2);
    close(to[1]);
    close(from[0]);
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    execv("/proc/self/exe", args);
    _exit(127);
  }
  if (lfd >= 0) close(lfd);
  close(to[0]);
  close(from[1]);
  p->in = fdopen(to[1], "w");
  p->out = fdopen(from[0], "r");
  return p->pid > 0 ? 0 : -1;
}

/* Runs "<self> --peer <master> <metadata> <gss> <bufsize>" with extra environment entries
 * ("NAME=value", NULL-terminated, may be NULL); waits for its READY line. */
static inline int peer_start(struct peer *p, struct master *m, uint64_t gss, uint64_t bufsize, const char *const *env) {
  char gs[32], bs[32];
  snprintf(gs, sizeof(gs), "%llu", (unsigned long long)gss);
  snprintf(bs, sizeof(bs), "%llu", (unsigned long long)bufsize);
  char *args[] = {"store_peer", "--peer", m->addr, m->metadata, gs, bs, NULL};
  if (self_spawn(p, args, env, NULL)) return -1;
  char line[256] = "";
  if (!fgets(line, sizeof(line), p->out) || sscanf(line, "READY %127s", p->name) != 1) {
    fprintf(stderr, "peer did not start: %s\n", line);
    return -1;
  }
  return 0;
}

/* Sends one command line; the peer's answer line (newline dropped) into out: 0, or -1 when none came. */
static inline int peer_vline(struct peer *p, char *out, size_t cap, const char *fmt, va_list ap) {
  vfprintf(p->in, fmt, ap);
  fputc('\n', p->in);
  fflush(p->in);
  if (!fgets(out, (int)cap, p->out)) return -1;
  out[strcspn(out, "\n")] = 0;
  return 0;
}

static inline int peer_line(struct peer *p, char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = peer_vline(p, out, cap, fmt, ap);
  va_end(ap);
  return rc;
}

/* Sends one command line; returns the integer the peer answers. */
static inline long long peer_cmd(struct peer *p, const char *fmt, ...) {
  va_list ap;
  char line[256];
  va_start(ap, fmt);
  int rc = peer_vline(p, line, sizeof(line), fmt, ap);
  va_end(ap);
  return rc ? -99999 : strtoll(line, NULL, 10);
}

static inline void peer_kill(struct peer *p) {
  if (p->pid <= 0) return;
  kill(p->pid, SIGKILL);
  waitpid(p->pid, NULL, 0);
  p->pid = -1;
  fclose(p->in);
  fclose(p->out);
}

static inline void peer_quit(struct peer *p) {
  if (p->pid <= 0) return;
  fprintf(p->in, "QUIT\n");
  fflush(p->in);
  int st;
  long deadline = mc_tp_now_ms() + 10000;
  while (waitpid(p->pid, &st, WNOHANG) == 0 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(10);
  peer_kill(p);
}

/* The peer process: a client with a segment and a registered buffer, obeying
 *   PUT <key> <size> <seed> <replicas> <here>   put_from (here=1: prefer this peer's own segment) -> rc
 *   GET <key> <size> <seed>                     get_into + verify -> bytes, or -1 on a mismatch
 *   QUIT */
static inline int peer_main(int argc, char **argv) {
  uint64_t gss = strtoull(argv[4], NULL, 10), bsz = strtoull(argv[5], NULL, 10);
  if (getenv("MC_TEST_PEER_LOG") && !freopen(getenv("MC_TEST_PEER_LOG"), "a", stderr)) return 4;
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, "127.0.0.1", argv[3], gss, 4 * MiB, "tcp", "", argv[2]);
  if (rc) {
    printf("FAILED %d\n", rc);
    return 2;
  }
  char *buf = malloc(bsz);
  if (mooncake_store_register_buffer(s, buf, bsz)) return 3;
  char name[128];
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("READY %s\n", name);
  fflush(stdout);
  char line[512], key[256];
  unsigned long long size;
  unsigned seed, reps, here;
  while (fgets(line, sizeof(line), stdin)) {
    if (sscanf(line, "PUT %255s %llu %u %u %u", key, &size, &seed, &reps, &here) == 5) {
      const char *pref[1] = {name};
      mooncake_replicate_config_t cfg = {reps, 0, 0, here ? pref : NULL, here ? 1 : 0};
      fill(buf, size, seed);
      printf("%d\n", mooncake_store_put_from(s, key, buf, size, &cfg));
    } else if (sscanf(line, "GET %255s %llu %u", key, &size, &seed) == 3) {
      memset(buf, 0, size);
      int64_t n = mooncake_store_get_into(s, key, buf, bsz);
      printf("%lld\n", (long long)(n == (int64_t)size && !verify(buf, size, seed) ? -1 : n));
    } else if (!strncmp(line, "QUIT", 4)) {
      break;
    } else {
      printf("-99998\n");
    }
    fflush(stdout);
  }
  mooncake_store_destroy(s);
  free(buf);
  return 0;
}

/* Runs the cases whose name starts with argv[1] (all without an argument). */
static inline int run_cases(const struct mc_test_case *cases, int n, int argc, char **argv) {
  for (int i = 0; i < n; i++) {
    if (argc > 1 && strncmp(cases[i].name, argv[1], strlen(argv[1]))) continue;
    int before = mc_test_failures;
    fprintf(stderr, "[ RUN  ] %s\n", cases[i].name);
    long t0 = mc_tp_now_ms();
    cases[i].fn();
    fprintf(stderr, "[ %s ] %s (%ld ms)\n", mc_test_failures == before ? " OK " : "FAIL", cases[i].name,
            mc_tp_now_ms() - t0);
  }
  fprintf(stderr, "%d checks, %d failed\n", mc_test_checks, mc_test_failures);
  return mc_test_failures ? 1 : 0;
}
