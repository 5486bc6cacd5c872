/* Transfer engine black-box tests: two real processes over loopback (the peer is this binary re-run as
 * "--serve"), through the TCP path (MC_FORCE_TCP) and the same-host path, with P2PHANDSHAKE and the
 * embedded HTTP metadata server. The peer guards its registered buffer to prove nothing lands outside. */
#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/tsan.h"
#include "lib/test.h"
#include "lib/proc.h"
#include "te/engine_internal.h"
#include "meta/metadata.h"
#include "mooncake/transfer_engine.h"
#include "net/sock.h"
#include "meta/metadata_server.h"

#define GUARD 65536
#define MiB (1024ull * 1024)

static uint8_t pat(uint64_t i, unsigned seed) { return (uint8_t)((i * 131u + seed * 7u + (i >> 9)) ^ seed); }
static void fill(uint8_t *p, uint64_t n, uint64_t base, unsigned seed) {
  for (uint64_t i = 0; i < n; i++) p[i] = pat(base + i, seed);
}
static int verify(const uint8_t *p, uint64_t n, uint64_t base, unsigned seed) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != pat(base + i, seed)) return 0;
  return 1;
}
static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* ------------------------------------------------------------ the peer process */

static int serve(const char *conn, uint64_t len, int shared) {
  transfer_engine_t e = createTransferEngine(conn, "127.0.0.1", NULL, 0, 1);
  if (!e) return 2;
  uint8_t *region = NULL, *buf;
  if (shared) {
    buf = mc_te_alloc_shared(e, len, "cpu:0");
  } else {
    region = mmap(NULL, len + 2 * GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(region, 0xA5, GUARD);
    memset(region + GUARD + len, 0xA5, GUARD);
    buf = region + GUARD;
    if (registerLocalMemory(e, buf, len, "cpu:0", 1)) return 3;
  }
  if (!buf) return 4;
  char ipport[300];
  getLocalIpAndPort(e, ipport, sizeof(ipport));
  printf("READY %s %llu %llu %s\n", mc_te_local_segment_name(e), (unsigned long long)(uintptr_t)buf,
         (unsigned long long)len, ipport);
  fflush(stdout);
  char line[512];
  while (fgets(line, sizeof(line), stdin)) {
    unsigned long long off, n;
    unsigned seed;
    MC_TSAN_ACQUIRE(buf); /* the initiator's transfers reached us through the network (engine.c, pins) */
    if (sscanf(line, "FILL %u", &seed) == 1) {
      /* the buffer may already be unregistered; its memory stays mapped for the test */
      fill(buf, len, 0, seed);
      printf("OK\n");
    } else if (sscanf(line, "CHECK %llu %llu %u", &off, &n, &seed) == 3) {
      printf(off + n <= len && verify(buf + off, n, off, seed) ? "OK\n" : "BAD\n");
    } else if (!strncmp(line, "GUARD", 5)) {
      int ok = 1;
      for (int i = 0; region && i < GUARD; i++) ok &= region[i] == 0xA5 && region[GUARD + len + i] == 0xA5;
      printf(ok ? "OK\n" : "BAD\n");
    } else if (!strncmp(line, "NOTIFS", 6)) {
      int cnt = 0;
      notify_msg_t *m = getNotifsFromEngine(e, &cnt);
      printf("%d", cnt);
      for (int i = 0; i < cnt; i++) printf(" %s=%s", m[i].name, m[i].msg);
      printf("\n");
      freeNotifsMsgBuf(m, cnt);
    } else if (!strncmp(line, "PRIV", 4)) { /* a buffer registered without remote access */
      static uint8_t *priv;
      if (!priv) {
        priv = aligned_alloc(4096, 65536);
        memset(priv, 0xC3, 65536);
        if (registerLocalMemory(e, priv, 65536, "cpu:0", 0)) priv = NULL;
      }
      printf("%llu\n", (unsigned long long)(uintptr_t)priv);
    } else if (!strncmp(line, "EXTRA", 5)) { /* one more remotely accessible buffer */
      static uint8_t *extra;
      if (!extra && (extra = aligned_alloc(4096, 65536)) && registerLocalMemory(e, extra, 65536, "cpu:0", 1))
        extra = NULL;
      printf(extra ? "OK\n" : "BAD\n");
    } else if (!strncmp(line, "PCHECK", 6)) {
      uint8_t *priv = (uint8_t *)(uintptr_t)strtoull(line + 7, NULL, 10);
      int ok = priv != NULL;
      for (int i = 0; ok && i < 65536; i++) ok = priv[i] == 0xC3;
      printf(ok ? "OK\n" : "BAD\n");
    } else if (!strncmp(line, "UNREG", 5)) {
      printf(unregisterLocalMemory(e, buf) == 0 ? "OK\n" : "BAD\n");
    } else if (!strncmp(line, "QUIT", 4)) {
      break;
    }
    MC_TSAN_RELEASE(buf); /* our accesses come before the initiator's next transfer (it waits for our answer) */
    fflush(stdout);
  }
  destroyTransferEngine(e);
  return 0;
}

/* ------------------------------------------------------------ driving a peer */

struct peer {
  pid_t pid;
  FILE *in, *out;
  char name[256], rpc[300];
  uint64_t addr, len;
};

static int peer_start(struct peer *p, const char *conn, uint64_t len, int shared) {
  int to[2], from[2];
  if (pipe(to) || pipe(from)) return -1;
  char lens[32], sh[4];
  snprintf(lens, sizeof(lens), "%llu", (unsigned long long)len);
  snprintf(sh, sizeof(sh), "%d", shared);
  p->pid = fork();
  if (p->pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    execl("/proc/self/exe", "test_te", "--serve", conn, lens, sh, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  p->in = fdopen(to[1], "w");
  p->out = fdopen(from[0], "r");
  char line[1024];
  unsigned long long a, l;
  if (!fgets(line, sizeof(line), p->out) || sscanf(line, "READY %255s %llu %llu %299s", p->name, &a, &l, p->rpc) != 4)
    return -1;
  p->addr = a;
  p->len = l;
  return 0;
}

static int peer_cmd(struct peer *p, char *reply, size_t rl, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(p->in, fmt, ap);
  va_end(ap);
  fputc('\n', p->in);
  fflush(p->in);
  if (!fgets(reply, (int)rl, p->out)) return -1;
  reply[strcspn(reply, "\n")] = 0;
  return 0;
}

static int peer_ok(struct peer *p, const char *fmt, unsigned long long a, unsigned long long b, unsigned c) {
  char r[64];
  return peer_cmd(p, r, sizeof(r), fmt, a, b, c) == 0 && !strcmp(r, "OK");
}

static void peer_stop(struct peer *p) {
  if (p->in) {
    fprintf(p->in, "QUIT\n");
    fclose(p->in);
  }
  if (p->out) fclose(p->out);
  int st;
  for (int i = 0; i < 100 && waitpid(p->pid, &st, WNOHANG) == 0; i++) usleep(20000);
  kill(p->pid, SIGKILL);
  waitpid(p->pid, &st, 0);
  memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------ local side helpers */

static transfer_engine_t local_engine(const char *conn, int force_tcp) {
  static int seq;
  char name[64];
  /* under P2PHANDSHAKE the name's host is where peers reach us; elsewhere it is just a unique label */
  if (!strcmp(conn, "P2PHANDSHAKE")) snprintf(name, sizeof(name), "127.0.0.1");
  else snprintf(name, sizeof(name), "initiator-%d-%d:12001", (int)getpid(), ++seq);
  if (force_tcp) setenv("MC_FORCE_TCP", "1", 1);
  transfer_engine_t e = createTransferEngine(conn, name, NULL, 0, 1);
  unsetenv("MC_FORCE_TCP");
  return e;
}

/* Runs n requests in one batch and waits; returns the number of COMPLETED tasks. */
static int run_batch(transfer_engine_t e, struct transfer_request *r, size_t n, int *failed) {
  batch_id_t b = allocateBatchID(e, n);
  if (b == INVALID_BATCH || submitTransfer(e, b, r, n)) return -1;
  int done = 0;
  *failed = 0;
  for (size_t i = 0; i < n; i++) {
    struct transfer_status st;
    long deadline = now_ms() + 60000;
    do {
      if (getTransferStatus(e, b, i, &st)) return -1;
    } while (st.status == STATUS_WAITING && now_ms() < deadline && (sched_yield(), 1));
    done += st.status == STATUS_COMPLETED;
    *failed += st.status == STATUS_FAILED;
  }
  CHECK_EQ(freeBatchID(e, b), 0);
  return done;
}

/* Runs n requests in one batch, waits for all of them (30 s at most) and writes each task's status to
 * status[]. 0, or -1 when the batch could not be submitted or a status not read. */
static int batch_statuses(transfer_engine_t e, struct transfer_request *r, size_t n, int *status) {
  batch_id_t b = allocateBatchID(e, n);
  if (b == INVALID_BATCH || submitTransfer(e, b, r, n)) return -1;
  mc_te_wait_batch(e, b, 30000);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct transfer_status st = {0};
    rc |= getTransferStatus(e, b, i, &st) ? -1 : 0;
    status[i] = st.status;
  }
  CHECK_EQ(freeBatchID(e, b), 0);
  return rc;
}

static int xfer(transfer_engine_t e, int op, void *local, segment_id_t seg, uint64_t remote, uint64_t len) {
  struct transfer_request r = {op, local, seg, remote, len};
  int failed;
  return run_batch(e, &r, 1, &failed) == 1 ? 0 : -1;
}

/* ------------------------------------------------------------ tests */

static void roundtrip_sizes(int force_tcp, int shared, const char *want_path) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", 64 * MiB + 4096, shared) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", force_tcp);
  REQUIRE(e);
  uint64_t n = 64 * MiB + 4096;
  uint8_t *src = malloc(n), *dst = malloc(n);
  REQUIRE(registerLocalMemory(e, src, n, "cpu:0", 1) == 0);
  REQUIRE(registerLocalMemory(e, dst, n, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK_STR(mc_te_segment_path(e, seg), want_path);
  static const uint64_t sizes[] = {1, 7, 4096, 65536 + 3, MiB, 4 * MiB + 1, 16 * MiB, 64 * MiB};
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++, seed++) {
    uint64_t len = sizes[i], off = (i * 4099) % 4096;
    fill(src, len, off, seed);
    CHECK_EQ(xfer(e, OPCODE_WRITE, src, seg, p.addr + off, len), 0);
    CHECK(peer_ok(&p, "CHECK %llu %llu %u", off, len, seed));
    memset(dst, 0, len);
    CHECK_EQ(xfer(e, OPCODE_READ, dst, seg, p.addr + off, len), 0);
    CHECK(verify(dst, len, off, seed));
  }
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  destroyTransferEngine(e);
  free(src);
  free(dst);
  peer_stop(&p);
}

static void test_roundtrip_tcp(void) { roundtrip_sizes(1, 0, "tcp"); }
/* Engine-allocated memory on both paths with its pages cold (copied through the kernel), warmed by
 * the background pass (as it comes), and with warming off (plain copies). */
static void roundtrip_prefault(const char *mode) {
  if (mode) setenv("MC_SEGMENT_PREFAULT", mode, 1);
  roundtrip_sizes(1, 1, "tcp");
  roundtrip_sizes(0, 1, "shm");
  unsetenv("MC_SEGMENT_PREFAULT");
}
static void test_roundtrip_cold_pages(void) { roundtrip_prefault("populate"); }
static void test_roundtrip_warming_pages(void) { roundtrip_prefault(NULL); }
static void test_roundtrip_prefault_off(void) { roundtrip_prefault("0"); }
static void test_roundtrip_shm_memfd(void) { roundtrip_sizes(0, 1, "shm"); }
static void test_roundtrip_shm_vm(void) { roundtrip_sizes(0, 0, "shm"); }

struct worker_arg {
  transfer_engine_t e;
  segment_id_t seg;
  uint64_t remote;
  uint8_t *local;
  int tid, ok;
};

static void *batch_worker(void *a) {
  struct worker_arg *w = a;
  static const size_t batch_sizes[] = {1, 2, 17, 64, 256};
  const uint64_t blk = 4096;
  w->ok = 1;
  for (size_t k = 0; k < 5; k++) {
    size_t n = batch_sizes[k];
    struct transfer_request r[256];
    unsigned seed = (unsigned)(w->tid * 10 + k);
    for (size_t i = 0; i < n; i++) {
      fill(w->local + i * blk, blk, i * blk, seed);
      r[i] = (struct transfer_request){OPCODE_WRITE, w->local + i * blk, w->seg, w->remote + i * blk, blk};
    }
    int failed;
    if (run_batch(w->e, r, n, &failed) != (int)n) w->ok = 0;
    memset(w->local, 0, n * blk);
    for (size_t i = 0; i < n; i++) r[i].opcode = OPCODE_READ;
    if (run_batch(w->e, r, n, &failed) != (int)n) w->ok = 0;
    for (size_t i = 0; i < n; i++)
      if (!verify(w->local + i * blk, blk, i * blk, seed)) w->ok = 0;
  }
  return NULL;
}

/* Runs `threads` workers against one peer, each on its own quarter-MiB of both buffers; the last one runs
 * `last` (NULL: the same worker). Every worker must report ok. */
static void run_workers(int force_tcp, int threads, void *(*worker)(void *), void *(*last)(void *)) {
  struct peer p = {0};
  const uint64_t per = 256 * 4096;
  REQUIRE(threads <= 8);
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", per * (uint64_t)threads, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", force_tcp);
  REQUIRE(e);
  uint8_t *local = malloc(per * (uint64_t)threads);
  REQUIRE(registerLocalMemory(e, local, per * (uint64_t)threads, "*", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  pthread_t th[8];
  struct worker_arg wa[8];
  for (int t = 0; t < threads; t++) {
    wa[t] = (struct worker_arg){e, seg, p.addr + per * t, local + per * t, t, 0};
    pthread_create(&th[t], NULL, t == threads - 1 && last ? last : worker, &wa[t]);
  }
  for (int t = 0; t < threads; t++) {
    pthread_join(th[t], NULL);
    CHECK(wa[t].ok);
  }
  destroyTransferEngine(e);
  free(local);
  peer_stop(&p);
}

static void batches_threads(int force_tcp) { run_workers(force_tcp, 4, batch_worker, NULL); }
static void test_batches_threads_tcp(void) { batches_threads(1); }

/* Lone requests from several threads at once: each takes an idle lane in its own thread (direct I/O) or,
 * when every lane is taken, goes through the lane threads; both kinds interleave on the same connections
 * with batches from another thread. Every byte must land where it was meant to. */
static void *lone_worker(void *a) {
  struct worker_arg *w = a;
  const uint64_t blk = 4096;
  w->ok = 1;
  for (int it = 0; it < 300; it++) {
    uint64_t off = (uint64_t)(it % 64) * blk;
    unsigned seed = (unsigned)(w->tid * 1000 + it);
    fill(w->local + off, blk, off, seed);
    if (xfer(w->e, OPCODE_WRITE, w->local + off, w->seg, w->remote + off, blk)) w->ok = 0;
    memset(w->local + off, 0, blk);
    if (xfer(w->e, OPCODE_READ, w->local + off, w->seg, w->remote + off, blk)) w->ok = 0;
    if (!verify(w->local + off, blk, off, seed)) w->ok = 0;
  }
  return NULL;
}

static void lone_requests_threads(const char *direct) {
  if (direct) setenv("MC_TCP_DIRECT", direct, 1);
  run_workers(1, 5, lone_worker, batch_worker);
  unsetenv("MC_TCP_DIRECT");
}
static void test_lone_requests_threads(void) { lone_requests_threads(NULL); }
static void test_lone_requests_threads_no_direct(void) { lone_requests_threads("0"); }

static int count_sockets(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  char path[300], target[64];
  for (struct dirent *de; (de = readdir(d));) {
    snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
    ssize_t k = readlink(path, target, sizeof(target) - 1);
    if (k > 0) target[k] = 0, n += !strncmp(target, "socket:", 7);
  }
  closedir(d);
  return n;
}

/* One thread's lone requests keep to one connection (the lowest idle lane), so the peer's thread for that
 * connection sees back-to-back requests and stays in its busy poll; rotating over the lanes made each of
 * them wait long enough to fall asleep, and every request paid a wake-up. */
static void test_lone_requests_one_connection(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  uint8_t *buf = malloc(64 * 1024);
  REQUIRE(registerLocalMemory(e, buf, 64 * 1024, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  fill(buf, 4096, 0, 3);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096), 0); /* opens the first lane */
  int before = count_sockets();
  CHECK(before > 0);
  for (int i = 0; i < 40; i++) {
    uint64_t off = (uint64_t)(i % 8) * 4096;
    fill(buf, 4096, off, (unsigned)i);
    CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr + off, 4096), 0);
    memset(buf, 0, 4096);
    CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, p.addr + off, 4096), 0);
    CHECK(verify(buf, 4096, off, (unsigned)i));
  }
  CHECK_EQ(count_sockets(), before);
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_batches_threads_shm(void) { batches_threads(0); }

static void out_of_bounds(int force_tcp) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", force_tcp);
  REQUIRE(e);
  uint8_t *buf = malloc(4 * MiB);
  memset(buf, 0x5A, 4 * MiB);
  REQUIRE(registerLocalMemory(e, buf, 4 * MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  struct {
    uint64_t addr, len;
  } bad[] = {
      {p.addr - 1, 16},            /* starts before */
      {p.addr + p.len - 8, 16},    /* one past the end */
      {p.addr + p.len, 1},         /* just outside */
      {p.addr - GUARD, GUARD * 2}, /* covers the guard and the buffer */
      {p.addr, p.len + 1},         /* whole buffer + 1 */
      {UINT64_MAX - 8, 64},        /* wraps around */
      {p.addr + 16, UINT64_MAX - 8},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    uint64_t len = bad[i].len > 4 * MiB ? 4 * MiB : bad[i].len;
    if (bad[i].len > 4 * MiB && bad[i].addr != p.addr + 16) continue;
    CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, bad[i].addr, len == bad[i].len ? len : 4 * MiB), -1);
    CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, bad[i].addr, len), -1);
  }
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  /* the connection stays usable: a valid transfer right after succeeds */
  fill(buf, 4096, 0, 9);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 4096, 9));
  /* exact fit and interior ranges pass */
  fill(buf, MiB, 0, 3);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, MiB), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, MiB, 3));
  /* an unregistered local source is refused at submit */
  uint8_t stack[64];
  batch_id_t b = allocateBatchID(e, 1);
  struct transfer_request r = {OPCODE_WRITE, stack, seg, p.addr, sizeof(stack)};
  CHECK_EQ(submitTransfer(e, b, &r, 1), MC_TE_STATUS_ADDRESS_NOT_REGISTERED);
  CHECK_EQ(freeBatchID(e, b), 0);
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_out_of_bounds_tcp(void) { out_of_bounds(1); }

/* Memory the target registered with remote_accessible = 0 is its own: a peer can neither write nor read
 * it, over TCP or through the same-host path, and its bytes stay as they were. */
static void private_buffer(int force_tcp) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  char r[64];
  REQUIRE(peer_cmd(&p, r, sizeof(r), "PRIV", 0, 0, 0) == 0);
  uint64_t priv = strtoull(r, NULL, 10);
  REQUIRE(priv != 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", force_tcp);
  REQUIRE(e);
  uint8_t *buf = malloc(65536);
  memset(buf, 0x11, 65536);
  REQUIRE(registerLocalMemory(e, buf, 65536, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, priv, 4096), -1);
  CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, priv + 4096, 4096), -1);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, priv, 65536), -1);
  CHECK(buf[0] == 0x11 && buf[4096] == 0x11); /* nothing read into ours */
  char cmd[64];
  snprintf(cmd, sizeof(cmd), "PCHECK %llu", (unsigned long long)priv);
  CHECK(peer_ok(&p, cmd, 0, 0, 0));
  /* the accessible buffer next to it still works */
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096), 0);
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_private_buffer_tcp(void) { private_buffer(1); }
static void test_private_buffer_shm(void) { private_buffer(0); }

/* A batch of small READs travels pipelined and the target answers runs of them with one writev; a
 * rejected READ, a WRITE and a larger READ in the middle end such runs. Each request must get exactly
 * its own answer: good reads their bytes, bad ones a failure, and the write must land. */
static void test_pipelined_reads_tcp(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  const size_t n = 96, blk = 4096;
  uint8_t *buf = malloc(n * 64 * 1024);
  REQUIRE(registerLocalMemory(e, buf, n * 64 * 1024, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK(peer_ok(&p, "FILL %u", 7, 0, 0));
  for (int round = 0; round < 3; round++) {
    struct transfer_request r[96];
    uint64_t off[96], len[96];
    for (size_t i = 0; i < n; i++) {
      off[i] = (i * blk) % (512 * 1024);
      len[i] = i % 17 == 5 ? 40 * 1024 : i % 3 ? blk : 100; /* mostly 4 KiB, some tiny, some above a group item */
      r[i] = (struct transfer_request){OPCODE_READ, buf + i * 64 * 1024, seg, p.addr + off[i], len[i]};
    }
    r[10].target_offset = p.addr + p.len - 8; /* one past the end: rejected */
    r[41].target_offset = UINT64_MAX - 8;     /* wraps: rejected */
    r[60].opcode = OPCODE_WRITE;              /* a write in the middle, into the upper half */
    r[60].target_offset = p.addr + 768 * 1024;
    fill(buf + 60 * 64 * 1024, len[60], 768 * 1024, 8);
    memset(buf, 0, 10 * 64 * 1024);
    int st[96];
    REQUIRE(batch_statuses(e, r, n, st) == 0);
    for (size_t i = 0; i < n; i++) {
      int bad = i == 10 || i == 41;
      CHECK_EQ(st[i], bad ? STATUS_FAILED : STATUS_COMPLETED);
      if (!bad && r[i].opcode == OPCODE_READ && !verify(buf + i * 64 * 1024, len[i], off[i], 7)) {
        CHECK(!"read returned the wrong bytes");
        break;
      }
    }
    CHECK(peer_ok(&p, "CHECK %llu %llu %u", 768 * 1024, len[60], 8));
    CHECK(peer_ok(&p, "FILL %u", 7, 0, 0)); /* the write's range back to the pattern for the next round */
  }
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
/* Writes of every size relative to the target's read-ahead buffer (64 KiB + 256: payloads far below it,
 * just below, straddling and far above it), several rejected ones with payloads among them, all in one
 * batch so they arrive back to back on each connection; then every region is read back in one batch and
 * the peer checks each range itself. Three rounds with different cuts. shared: the target's buffer is
 * engine memory with cold pages (MC_SEGMENT_PREFAULT=populate), so payloads go in through the kernel. */
static void pipelined_writes(int shared) {
  struct peer p = {0};
  const uint64_t span = 16 * MiB;
  if (shared) setenv("MC_SEGMENT_PREFAULT", "populate", 1);
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", span, shared) == 0);
  unsetenv("MC_SEGMENT_PREFAULT");
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  enum { N = 60 };
  static const uint64_t sizes[] = {1,     100,   4096,      16384,        65536 - 40,  65536,     65536 + 200,
                                   65536 + 232, 65536 + 300, 70000, 200000, MiB / 2 + 5, 3,         1000};
  uint8_t *buf = malloc(span);
  REQUIRE(registerLocalMemory(e, buf, span, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  for (unsigned round = 0; round < 3; round++) {
    struct transfer_request r[N];
    uint64_t off[N], len[N], at = 0;
    for (size_t i = 0; i < N; i++) {
      len[i] = sizes[(i * 5 + round) % (sizeof(sizes) / sizeof(sizes[0]))];
      off[i] = at + (i % 3); /* unaligned starts too */
      at = (off[i] + len[i] + 4095) & ~4095ull;
      REQUIRE(at <= span);
      fill(buf + off[i], len[i], off[i], 50 + round);
      r[i] = (struct transfer_request){OPCODE_WRITE, buf + off[i], seg, p.addr + off[i], len[i]};
    }
    r[7].target_offset = p.addr + span - 10; /* runs past the end: rejected, its payload drained */
    r[31].target_offset = UINT64_MAX - 100;  /* wraps: rejected */
    int st[N], bad = 0;
    REQUIRE(batch_statuses(e, r, N, st) == 0);
    for (size_t i = 0; i < N; i++) {
      int rejected = i == 7 || i == 31;
      CHECK_EQ(st[i], rejected ? STATUS_FAILED : STATUS_COMPLETED);
      if (!rejected && !peer_ok(&p, "CHECK %llu %llu %u", off[i], len[i], 50 + round)) bad++;
    }
    CHECK_EQ(bad, 0);
    /* the same regions back in one batch */
    memset(buf, 0, at);
    for (size_t i = 0; i < N; i++) r[i] = (struct transfer_request){OPCODE_READ, buf + off[i], seg, p.addr + off[i], len[i]};
    r[7].length = 0, r[31].length = 0; /* nothing was written there */
    REQUIRE(batch_statuses(e, r, N, st) == 0);
    for (size_t i = 0; i < N; i++) {
      CHECK_EQ(st[i], STATUS_COMPLETED);
      if (i != 7 && i != 31 && !verify(buf + off[i], len[i], off[i], 50 + round)) bad++;
    }
    CHECK_EQ(bad, 0);
  }
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_pipelined_writes_tcp(void) { pipelined_writes(0); }
static void test_pipelined_writes_cold_tcp(void) { pipelined_writes(1); }

/* Runs of WRITEs and READs mixed in one batch, so that on each connection the initiator's receiver reads
 * the status frames of consecutive WRITEs ahead (up to 64 at a time) and must stop exactly where a READ's
 * status and payload begin; rejected requests of both kinds sit inside the runs. Writes go to the upper
 * half of the target, reads come from the lower half (filled with a pattern). */
static void test_pipelined_mixed_tcp(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", 2 * MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  enum { N = 200 };
  const uint64_t slot = 8192, half = MiB;
  uint8_t *buf = malloc(N * slot);
  REQUIRE(registerLocalMemory(e, buf, N * slot, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  for (unsigned round = 0; round < 4; round++) {
    CHECK(peer_ok(&p, "FILL %u", 11, 0, 0));
    struct transfer_request r[N];
    uint64_t len[N], off[N];
    int bad[N];
    unsigned run = 0, writing = 1;
    for (size_t i = 0; i < N; i++) {
      if (!run) { /* runs of 1..70 requests of one kind: some longer than the 64 statuses read at once */
        run = 1 + (unsigned)((i * 37 + round * 11) % 70);
        writing = !writing;
      }
      run--;
      len[i] = 1 + (i * 131 + round) % slot;
      off[i] = (i * slot) % half;
      bad[i] = (i + round) % 23 == 4;
      fill(buf + i * slot, len[i], off[i], writing ? 60 + round : 0);
      r[i] = (struct transfer_request){writing ? OPCODE_WRITE : OPCODE_READ, buf + i * slot, seg,
                                       p.addr + (writing ? half : 0) + off[i], len[i]};
      if (bad[i]) r[i].target_offset = p.addr + 2 * MiB - len[i] / 2 - 1; /* runs past the end */
      if (!writing) memset(buf + i * slot, 0, len[i]);
    }
    int st[N], wrong = 0;
    REQUIRE(batch_statuses(e, r, N, st) == 0);
    for (size_t i = 0; i < N; i++) {
      CHECK_EQ(st[i], bad[i] ? STATUS_FAILED : STATUS_COMPLETED);
      if (bad[i]) continue;
      if (r[i].opcode == OPCODE_READ) wrong += !verify(buf + i * slot, len[i], off[i], 11);
      else wrong += !peer_ok(&p, "CHECK %llu %llu %u", half + off[i], len[i], 60 + round);
    }
    CHECK_EQ(wrong, 0);
  }
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_out_of_bounds_shm(void) { out_of_bounds(0); }

/* A peer that unregistered its buffer must not receive writes through a stale cached descriptor. */
static void stale_descriptor(int force_tcp) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", force_tcp);
  REQUIRE(e);
  uint8_t *buf = malloc(MiB);
  REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK(peer_ok(&p, "FILL %u", 5, 0, 0));
  CHECK(peer_ok(&p, "EXTRA", 0, 0, 0)); /* the target keeps another registration: its registry is not empty */
  CHECK(peer_ok(&p, "UNREG", 0, 0, 0));
  fill(buf, MiB, 0, 6);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096), -1);
  CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, p.addr, 4096), -1);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, MiB, 5)); /* untouched */
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}
static void test_stale_descriptor_shm(void) { stale_descriptor(0); }
static void test_stale_descriptor_tcp(void) { stale_descriptor(1); }

static void test_notify_once(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  uint8_t *buf = malloc(MiB);
  REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  batch_id_t b = allocateBatchID(e, 4);
  struct transfer_request r[4];
  for (int i = 0; i < 4; i++) r[i] = (struct transfer_request){OPCODE_WRITE, buf + i * 1024, seg, p.addr + i * 1024, 1024};
  notify_msg_t nm = {"sender", "batch-done"};
  REQUIRE(submitTransferWithNotify(e, b, r, 4, nm) == 0);
  /* no polling: the engine sends the notification itself when the batch completes */
  CHECK_EQ(mc_te_wait_batch(e, b, 10000), STATUS_COMPLETED);
  CHECK_EQ(freeBatchID(e, b), 0);
  char reply[256] = "";
  long deadline = now_ms() + 5000;
  while (now_ms() < deadline) {
    peer_cmd(&p, reply, sizeof(reply), "NOTIFS");
    if (strcmp(reply, "0")) break;
    usleep(20000);
  }
  CHECK_STR(reply, "1 sender=batch-done");
  usleep(200000);
  peer_cmd(&p, reply, sizeof(reply), "NOTIFS");
  CHECK_STR(reply, "0"); /* exactly once */
  nm.msg = "direct";
  CHECK_EQ(genNotifyInEngine(e, (uint64_t)seg, nm), 0);
  peer_cmd(&p, reply, sizeof(reply), "NOTIFS");
  CHECK_STR(reply, "1 sender=direct");
  CHECK_EQ(genNotifyInEngine(e, 999, nm), ERR_METADATA);
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}

static int raw_send(const char *rpc, const void *data, size_t n) {
  char host[256];
  uint16_t port;
  if (mc_split_host_port(rpc, host, sizeof(host), &port, 0)) return -1;
  int fd = mc_sock_connect(host, port, 2000);
  if (fd < 0) return -1;
  mc_sock_write_full(fd, data, n);
  char sink[256];
  struct pollfd pf = {fd, POLLIN, 0};
  int closed = 0;
  long deadline = now_ms() + 7000;
  while (now_ms() < deadline && poll(&pf, 1, 200) >= 0) /* the server must close on its own */
    if ((pf.revents & (POLLIN | POLLHUP)) && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) {
      closed = 1;
      break;
    }
  close(fd);
  return closed ? 0 : -1;
}

static void test_control_port_junk(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const uint8_t tls[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  const uint8_t zero[9] = {0};
  uint8_t huge[9] = {0, 0, 0, 0, 0, 0, 0, 0x10, 1};
  uint8_t truncated[9] = {100, 0, 0, 0, 0, 0, 0, 0, 1}; /* promises 100 bytes, sends none */
  CHECK_EQ(raw_send(p.rpc, http, sizeof(http) - 1), 0);
  CHECK_EQ(raw_send(p.rpc, tls, sizeof(tls)), 0);
  CHECK_EQ(raw_send(p.rpc, zero, sizeof(zero)), 0);
  CHECK_EQ(raw_send(p.rpc, huge, sizeof(huge)), 0);
  CHECK_EQ(raw_send(p.rpc, truncated, sizeof(truncated)), 0);
  /* and the peer still serves: a fresh engine can open it and write */
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  uint8_t *buf = malloc(4096);
  fill(buf, 4096, 0, 4);
  REQUIRE(registerLocalMemory(e, buf, 4096, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  CHECK(seg > 0);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 4096, 4));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}

/* ---- raw frames on the TCP data port (24-byte header: u64 size, u64 address, opcode byte | 0x80) */

static void data_hdr(uint8_t *h, uint64_t size, uint64_t addr, uint8_t op) {
  memset(h, 0, 24);
  for (int i = 0; i < 8; i++) h[i] = (uint8_t)(size >> (8 * i)), h[8 + i] = (uint8_t)(addr >> (8 * i));
  h[16] = op;
}

/* One status frame from the data port: 0 OK, 1 rejected, -1 none (closed or nothing within 3 s). */
static int data_status(int fd) {
  uint8_t st[8];
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (recv(fd, st, 8, MSG_WAITALL) != 8) return -1;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)st[i] << (8 * i);
  return (v >> 32) != 0x4D435456ull ? -1 : (int)(uint32_t)v;
}

/* Whether the peer closes fd by itself within 7 s (and sent nothing but at most status frames). */
static int data_closed(int fd) {
  char sink[64];
  struct timeval tv = {7, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ssize_t r;
  while ((r = recv(fd, sink, sizeof(sink), 0)) > 0) {
  }
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* Malformed and hostile frames on the data port: every one is answered with a rejection or a closed
 * connection, nothing outside the registered buffer is read or written, a rejected request leaves the
 * connection usable, and the peer goes on serving. */
static void test_data_port_junk(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  char *json = mc_te_segment_json(e, seg);
  REQUIRE(json);
  const char *dp = strstr(json, "\"tcp_data_port\":");
  int port = dp ? atoi(dp + strlen("\"tcp_data_port\":")) : 0;
  free(json);
  REQUIRE(port > 0);
  CHECK(peer_ok(&p, "FILL %u", 31, 0, 0));
  uint8_t h[24], payload[4096];
  memset(payload, 0x5A, sizeof(payload));
  const uint64_t RD = 0x80 | OPCODE_READ, WR = 0x80 | OPCODE_WRITE;

  /* hostile requests answered "rejected" on a connection that stays usable; each is followed by a
   * valid READ on the same connection */
  struct {
    uint64_t size, addr;
    uint8_t op;
    const char *what;
  } rej[] = {
      {4096, p.addr - 4096, RD, "read just below the buffer"},
      {4096, p.addr + p.len, RD, "read just past the buffer"},
      {8192, p.addr + p.len - 4096, RD, "read straddling the end"},
      {1ull << 62, p.addr, RD, "read of 2^62 bytes"},
      {16, UINT64_MAX - 7, RD, "read whose end wraps around"},
      {4096, p.addr - 4096, WR, "write just below the buffer"},
      {4096, p.addr + p.len - 2048, WR, "write straddling the end"},
      {16, UINT64_MAX - 7, WR, "write whose end wraps around"},
      {0, 0, RD, "empty read at address 0"},
  };
  int fd = mc_sock_connect("127.0.0.1", (uint16_t)port, 2000);
  REQUIRE(fd >= 0);
  for (size_t i = 0; i < sizeof(rej) / sizeof(rej[0]); i++) {
    data_hdr(h, rej[i].size, rej[i].addr, rej[i].op);
    CHECK_EQ(mc_sock_write_full(fd, h, 24), 0);
    if (rej[i].op == WR && rej[i].size <= sizeof(payload))
      CHECK_EQ(mc_sock_write_full(fd, payload, rej[i].size), 0); /* drained by the peer */
    int st = data_status(fd);
    if (st != 1) fprintf(stderr, "  %s: status %d\n", rej[i].what, st);
    CHECK_EQ(st, 1);
    data_hdr(h, 64, p.addr + 4096, (uint8_t)RD); /* the connection still serves */
    CHECK_EQ(mc_sock_write_full(fd, h, 24), 0);
    CHECK_EQ(data_status(fd), 0);
    uint8_t got[64];
    CHECK_EQ(recv(fd, got, 64, MSG_WAITALL), 64);
    CHECK(verify(got, 64, 4096, 31));
  }
  close(fd);

  /* framings the peer does not speak, and frames cut short: the connection is dropped */
  struct {
    uint64_t size, addr;
    uint8_t op;
    size_t send_payload; /* bytes of payload sent after the header, then silence */
  } drop[] = {
      {64, p.addr, OPCODE_READ, 0},   /* v1 framing (no 0x80 bit) */
      {64, p.addr, 0x80 | 7, 0},      /* unknown opcode */
      {64, p.addr, 0xff, 0},
  };
  for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
    fd = mc_sock_connect("127.0.0.1", (uint16_t)port, 2000);
    REQUIRE(fd >= 0);
    data_hdr(h, drop[i].size, drop[i].addr, drop[i].op);
    CHECK_EQ(mc_sock_write_full(fd, h, 24), 0);
    CHECK(data_closed(fd));
    close(fd);
  }
  /* a write that announces 4096 bytes and sends 100, then closes: whatever came may land in the
   * announced range, nothing elsewhere, and the peer goes on */
  fd = mc_sock_connect("127.0.0.1", (uint16_t)port, 2000);
  REQUIRE(fd >= 0);
  data_hdr(h, 4096, p.addr + 8192, (uint8_t)WR);
  CHECK_EQ(mc_sock_write_full(fd, h, 24), 0);
  CHECK_EQ(mc_sock_write_full(fd, payload, 100), 0);
  close(fd);
  /* half a header, then close */
  fd = mc_sock_connect("127.0.0.1", (uint16_t)port, 2000);
  REQUIRE(fd >= 0);
  CHECK_EQ(mc_sock_write_full(fd, h, 10), 0);
  close(fd);
  usleep(200000);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 8192, 31));
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 8192 + 4096, p.len - 8192 - 4096, 31));
  CHECK(peer_ok(&p, "GUARD", 0, 0, 0));
  /* and the engine still reads and writes the peer */
  uint8_t *buf = malloc(MiB);
  REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
  fill(buf, 65536, 0, 32);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, 65536), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 65536, 32));
  CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, p.addr + 65536, 4096), 0);
  CHECK(verify(buf, 4096, 65536, 31));
  CHECK_EQ(kill(p.pid, 0), 0);
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}

static void test_peer_killed_midtransfer(void) {
  struct peer victim = {0}, other = {0};
  REQUIRE(peer_start(&victim, "P2PHANDSHAKE", 64 * MiB, 0) == 0);
  REQUIRE(peer_start(&other, "P2PHANDSHAKE", MiB, 0) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  REQUIRE(e);
  uint64_t n = 64 * MiB;
  uint8_t *buf = malloc(n);
  memset(buf, 1, n);
  REQUIRE(registerLocalMemory(e, buf, n, "cpu:0", 1) == 0);
  segment_id_t sv = openSegment(e, victim.name), so = openSegment(e, other.name);
  REQUIRE(sv > 0 && so > 0);
  /* 32 x 64 MiB writes keep the victim busy for a while; kill it after the first lands. */
  struct transfer_request r[32];
  for (int i = 0; i < 32; i++) r[i] = (struct transfer_request){OPCODE_WRITE, buf, sv, victim.addr, n};
  batch_id_t b = allocateBatchID(e, 32);
  REQUIRE(submitTransfer(e, b, r, 32) == 0);
  usleep(50000);
  kill(victim.pid, SIGKILL);
  long t0 = now_ms();
  int st = mc_te_wait_batch(e, b, 15000);
  long took = now_ms() - t0;
  CHECK_EQ(st, STATUS_FAILED);
  CHECK(took < 12000); /* within MC_TCP_IO_TIMEOUT_MS (10 s) plus slack */
  CHECK_EQ(freeBatchID(e, b), 0);
  /* the engine keeps working with the other peer */
  fill(buf, MiB, 0, 11);
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, so, other.addr, MiB), 0);
  CHECK(peer_ok(&other, "CHECK %llu %llu %u", 0, MiB, 11));
  /* and a new transfer to the dead peer fails fast instead of hanging */
  t0 = now_ms();
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, sv, victim.addr, 4096), -1);
  CHECK(now_ms() - t0 < 5000);
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&victim);
  peer_stop(&other);
}

/* A peer that stops answering but keeps its connections open (SIGSTOP: its kernel still accepts new
 * ones): requests fail after one no-progress deadline, not two; a connection given up at that deadline
 * is not retried on a fresh one (the retry would connect to the stopped process and wait again). Both
 * the submitting thread's lone request (direct path) and a batch on the lane threads. */
static void test_frozen_peer_not_retried(void) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", MiB, 0) == 0);
  setenv("MC_TCP_IO_TIMEOUT_MS", "1000", 1);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 1);
  unsetenv("MC_TCP_IO_TIMEOUT_MS");
  REQUIRE(e);
  uint8_t *buf = malloc(MiB);
  fill(buf, MiB, 0, 21);
  REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  struct transfer_request r[4];
  for (int i = 0; i < 4; i++) r[i] = (struct transfer_request){OPCODE_READ, buf + i * 4096, seg, p.addr + i * 4096, 4096};
  int failed = 0;
  CHECK_EQ(run_batch(e, r, 4, &failed), 4); /* every lane connected */
  CHECK_EQ(xfer(e, OPCODE_READ, buf, seg, p.addr, 4096), 0);
  REQUIRE(kill(p.pid, SIGSTOP) == 0);
  int wst = 0;
  REQUIRE(waitpid(p.pid, &wst, WUNTRACED) == p.pid && WIFSTOPPED(wst)); /* stopped for sure */
  long t0 = now_ms();
  CHECK(xfer(e, OPCODE_READ, buf, seg, p.addr, 4096) != 0);
  long lone = now_ms() - t0;
  t0 = now_ms();
  CHECK_EQ(run_batch(e, r, 4, &failed), 0);
  long batch = now_ms() - t0;
  fprintf(stderr, "  frozen peer: a lone READ failed after %ld ms, a batch of 4 after %ld ms (deadline 1000 ms)\n",
          lone, batch);
  CHECK(lone >= 900 && lone < 1800);   /* one deadline; a retry would take a second one */
  CHECK(batch >= 900 && batch < 1800);
  kill(p.pid, SIGCONT);
  /* the thawed peer serves again on fresh connections */
  fill(buf, 4096, 0, 22);
  int ok = -1;
  for (int i = 0; i < 3 && ok; i++) ok = xfer(e, OPCODE_WRITE, buf, seg, p.addr, 4096);
  CHECK_EQ(ok, 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 4096, 22));
  destroyTransferEngine(e);
  free(buf);
  peer_stop(&p);
}

static void test_registration_rules(void) {
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 0);
  REQUIRE(e);
  uint8_t *m = malloc(1 << 20);
  CHECK_EQ(registerLocalMemory(e, m, 0, "cpu:0", 1), ERR_INVALID_ARGUMENT);
  CHECK_EQ(registerLocalMemory(e, m, 4096, "cpu:0", 1), 0);
  CHECK_EQ(registerLocalMemory(e, m + 4096, 4096, "*", 1), 0); /* adjacent is fine */
  CHECK_EQ(registerLocalMemory(e, m + 100, 10, "cpu:0", 1), ERR_ADDRESS_OVERLAPPED);
  CHECK_EQ(registerLocalMemory(e, m + 8000, 4096, "cpu:0", 1), ERR_ADDRESS_OVERLAPPED);
  CHECK_EQ(unregisterLocalMemory(e, m + 1), ERR_ADDRESS_NOT_REGISTERED);
  buffer_entry_t ok[2] = {{m + 3 * 65536, 65536}, {m + 2 * 65536, 65536}};
  CHECK_EQ(registerLocalMemoryBatch(e, ok, 2, "cpu:0"), 0);
  buffer_entry_t dup[2] = {{m + 5 * 65536, 100}, {m + 5 * 65536 + 50, 100}};
  CHECK_EQ(registerLocalMemoryBatch(e, dup, 2, "cpu:0"), ERR_ADDRESS_OVERLAPPED);
  buffer_entry_t zero[1] = {{m + 7 * 65536, 0}};
  CHECK_EQ(registerLocalMemoryBatch(e, zero, 1, "cpu:0"), ERR_INVALID_ARGUMENT);
  void *addrs[3] = {m + 3 * 65536, m + 2 * 65536, m + 1};
  CHECK_EQ(unregisterLocalMemoryBatch(e, addrs, 3), ERR_ADDRESS_NOT_REGISTERED);
  CHECK_EQ(unregisterLocalMemory(e, m + 2 * 65536), ERR_ADDRESS_NOT_REGISTERED); /* already gone */
  CHECK_EQ(unregisterLocalMemory(e, m), 0);
  CHECK_EQ(unregisterLocalMemory(e, m + 4096), 0);
  /* own segment and ids */
  CHECK_EQ(openSegment(e, mc_te_local_segment_name(e)), LOCAL_SEGMENT);
  CHECK_EQ(openSegment(e, ""), -1);
  CHECK_EQ(openSegment(e, "127.0.0.1:1"), -1); /* nobody there */
  /* batches: capacity, status range, busy */
  CHECK_EQ(registerLocalMemory(e, m, 1 << 20, "cpu:0", 1), 0);
  uint8_t *dst = mc_te_alloc_shared(e, 1 << 20, "cpu:0");
  REQUIRE(dst);
  batch_id_t b = allocateBatchID(e, 2);
  struct transfer_request r[3];
  for (int i = 0; i < 3; i++) r[i] = (struct transfer_request){OPCODE_WRITE, m, LOCAL_SEGMENT, (uint64_t)(uintptr_t)dst, 1024};
  CHECK_EQ(submitTransfer(e, b, r, 3), MC_TE_STATUS_TOO_MANY_REQUESTS);
  CHECK_EQ(submitTransfer(e, b, r, 2), 0);
  CHECK_EQ(submitTransfer(e, b, r, 1), MC_TE_STATUS_TOO_MANY_REQUESTS);
  struct transfer_status st;
  CHECK_EQ(getTransferStatus(e, b, 2, &st), MC_TE_STATUS_INVALID_ARGUMENT);
  CHECK_EQ(mc_te_wait_batch(e, b, 5000), STATUS_COMPLETED);
  CHECK_EQ(freeBatchID(e, b), 0); /* terminal though never polled */
  CHECK_EQ(freeBatchID(e, b), MC_TE_STATUS_INVALID_ARGUMENT);
  r[0].target_id = 77;
  b = allocateBatchID(e, 1);
  CHECK_EQ(submitTransfer(e, b, r, 1), MC_TE_STATUS_INVALID_ARGUMENT);
  CHECK_EQ(freeBatchID(e, b), 0);
  CHECK_EQ(mc_te_free_shared(e, dst), 0);
  CHECK_STR(mc_te_err_name(ERR_ADDRESS_OVERLAPPED), "ERR_ADDRESS_OVERLAPPED");
  CHECK_STR(mc_te_status_name(8), "NotSupportedTransport");
  destroyTransferEngine(e);
  free(m);
  /* NULL handles never crash */
  CHECK_EQ(registerLocalMemory(NULL, &st, 1, "*", 1), ERR_INVALID_ARGUMENT);
  CHECK(allocateBatchID(NULL, 1) == INVALID_BATCH);
  CHECK(createTransferEngine("bogus://x", "127.0.0.1", NULL, 0, 1) == NULL);
}

/* Resident pages of [p, p+len) by mincore (page-cache residency of the memfd). */
static size_t resident_pages(void *p, size_t len) {
  size_t n = len / 4096, r = 0;
  unsigned char *v = malloc(n);
  if (mincore(p, len, v)) n = 0;
  for (size_t i = 0; i < n; i++) r += v[i] & 1;
  free(v);
  return r;
}

static int wait_prefault(transfer_engine_t e, int ms) {
  for (int i = 0; i < ms / 10 && mc_te_prefault_pending(e); i++) usleep(10000);
  return mc_te_prefault_pending(e) == 0;
}

/* Shared memory is populated in the background after allocation, bytes unchanged; freeing while it
 * runs is safe; MC_SEGMENT_PREFAULT=0 leaves pages to the first writes. */
static void test_prefault(void) {
  transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 1);
  REQUIRE(e);
  size_t len = 64 * MiB;
  uint8_t *p = mc_te_alloc_shared(e, len, "cpu:0");
  REQUIRE(p);
  memset(p + len - 4096, 0xab, 4096); /* written before the background pass gets there */
  CHECK(wait_prefault(e, 20000));
  CHECK_EQ(resident_pages(p, len), len / 4096);
  size_t bad = 0;
  for (size_t i = 0; i < len - 4096; i += 512) bad += p[i] != 0;
  for (size_t i = len - 4096; i < len; i++) bad += p[i] != 0xab;
  CHECK_EQ(bad, 0);
  /* free at once, while the pass is running */
  uint8_t *q = mc_te_alloc_shared(e, 512 * MiB, "cpu:0");
  REQUIRE(q);
  CHECK_EQ(mc_te_free_shared(e, q), 0);
  CHECK(wait_prefault(e, 20000));
  CHECK_EQ(mc_te_free_shared(e, p), 0);
  destroyTransferEngine(e);

  setenv("MC_SEGMENT_PREFAULT", "0", 1);
  e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 1);
  unsetenv("MC_SEGMENT_PREFAULT");
  REQUIRE(e);
  p = mc_te_alloc_shared(e, 16 * MiB, "cpu:0");
  REQUIRE(p);
  CHECK_EQ(mc_te_prefault_pending(e), 0);
  usleep(200000);
  CHECK_EQ(resident_pages(p, 16 * MiB), 0);
  destroyTransferEngine(e); /* frees p */
}

/* kB of 2 MiB-mapped shared memory (ShmemPmdMapped) in pid's mappings of our memfd segments. */
static long segment_pmd_kb(pid_t pid) {
  char path[64], line[512];
  snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  long kb = 0, v;
  int ours = 0;
  while (fgets(line, sizeof(line), f)) {
    if (strchr(line, '-') && strchr(line, ':') && line[0] != ' ' && !strchr(line, '\t') && isxdigit((unsigned char)line[0]))
      ours = strstr(line, "memfd:mooncake-segment") != NULL; /* a mapping's header line */
    else if (ours && sscanf(line, "ShmemPmdMapped: %ld kB", &v) == 1) kb += v;
  }
  fclose(f);
  return kb;
}

#define SHMEM_THP "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
static int thp_set(const char *mode) {
  FILE *f = fopen(SHMEM_THP, "we");
  if (!f) return -1;
  int rc = fputs(mode, f) < 0;
  return fclose(f) || rc ? -1 : 0;
}

static char thp_saved[32];
static void thp_restore(void) { (void)thp_set(thp_saved); } /* also when a REQUIRE ends the test early */

/* 2 MiB pages on shared memory. Where the kernel allows them for shmem ('advise'; the test switches the
 * system setting to it when it may, and puts the old one back), a holder's segment and a same-host peer's
 * mapping of it are mapped with 2 MiB pages once warm, bytes round-trip over both paths, and
 * MC_SEGMENT_HUGEPAGE=0 keeps 4 KiB pages. */
static void test_huge_pages(void) {
  char old[32];
  if (mc_shmem_thp_mode(old, sizeof(old))) {
    fprintf(stderr, "test_huge_pages: skipped: " SHMEM_THP " is missing (kernel without transparent huge pages)\n");
    return;
  }
  if (strcmp(old, "advise") && thp_set("advise")) {
    fprintf(stderr, "test_huge_pages: skipped: shmem huge pages are '%s' and this user cannot set 'advise' (%s)\n", old,
            strerror(errno));
    return;
  }
  if (strcmp(old, "advise")) {
    snprintf(thp_saved, sizeof(thp_saved), "%s", old);
    atexit(thp_restore);
  }
  struct peer p;
  REQUIRE(peer_start(&p, "P2PHANDSHAKE", 16 * MiB, 1) == 0);
  transfer_engine_t e = local_engine("P2PHANDSHAKE", 0);
  REQUIRE(e);
  uint8_t *src = malloc(16 * MiB), *dst = malloc(16 * MiB);
  REQUIRE(registerLocalMemory(e, src, 16 * MiB, "cpu:0", 1) == 0);
  REQUIRE(registerLocalMemory(e, dst, 16 * MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK_STR(mc_te_segment_path(e, seg), "shm");
  fill(src, 16 * MiB, 0, 41);
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, seg, p.addr, 16 * MiB), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, 16 * MiB, 41));
  CHECK(wait_prefault(e, 20000)); /* our mapping of the peer's segment is warm */
  memset(dst, 0, 16 * MiB);
  CHECK_EQ(xfer(e, OPCODE_READ, dst, seg, p.addr, 16 * MiB), 0);
  CHECK(verify(dst, 16 * MiB, 0, 41));
  long mine = segment_pmd_kb(getpid()), theirs = segment_pmd_kb(p.pid);
  fprintf(stderr, "test_huge_pages: 2 MiB-mapped kB: peer's own mapping %ld, ours of it %ld\n", theirs, mine);
  CHECK(theirs >= 14 * 1024); /* 16 MiB, less at most one huge page at each end if the kernel could not align */
  CHECK(mine >= 14 * 1024);
  destroyTransferEngine(e);
  peer_stop(&p);
  free(src);
  free(dst);

  roundtrip_sizes(1, 1, "tcp"); /* every size, cold and warm chunks, on 2 MiB pages */
  roundtrip_sizes(0, 1, "shm");

  setenv("MC_SEGMENT_HUGEPAGE", "0", 1);
  e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 1);
  REQUIRE(e);
  uint8_t *q = mc_te_alloc_shared(e, 16 * MiB, "cpu:0");
  REQUIRE(q);
  CHECK(wait_prefault(e, 20000));
  CHECK_EQ(segment_pmd_kb(getpid()), 0);
  destroyTransferEngine(e);
  unsetenv("MC_SEGMENT_HUGEPAGE");
  if (strcmp(old, "advise")) CHECK_EQ(thp_set(old), 0); /* and again at exit: harmless */
}

static void test_http_metadata_discovery(void) {
  struct mc_meta_server *ms = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(ms);
  char conn[128];
  snprintf(conn, sizeof(conn), "http://127.0.0.1:%u/metadata", mc_meta_server_port(ms));
  struct peer p = {0};
  REQUIRE(peer_start(&p, conn, MiB, 1) == 0);
  CHECK_STR(p.name, "127.0.0.1"); /* the name stays as given outside P2P mode */
  transfer_engine_t e = createTransferEngine(conn, "127.0.0.2:7777", NULL, 0, 1);
  REQUIRE(e);
  uint8_t *buf = malloc(MiB);
  fill(buf, MiB, 0, 21);
  REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
  segment_id_t seg = openSegment(e, p.name);
  REQUIRE(seg > 0);
  CHECK_STR(mc_te_segment_path(e, seg), "shm");
  CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, MiB), 0);
  CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, MiB, 21));
  notify_msg_t nm = {"n", "m"};
  CHECK_EQ(genNotifyInEngine(e, (uint64_t)seg, nm), 0);
  char reply[64];
  peer_cmd(&p, reply, sizeof(reply), "NOTIFS");
  CHECK_STR(reply, "1 n=m");
  CHECK_EQ(syncSegmentCache(e), 0);
  CHECK_EQ(openSegmentNoCache(e, p.name), seg);
  /* a retry's re-read (mc_te_reopen_segment): the fresh descriptor while the metadata service has it,
   * the cached one while the service cannot be reached, none once the service answers it has no such
   * key (here: a fresh, empty server on the same port) */
  CHECK_EQ(mc_te_reopen_segment(e, p.name), seg);
  uint16_t port = mc_meta_server_port(ms);
  mc_meta_server_stop(ms);
  CHECK_EQ(mc_te_reopen_segment(e, p.name), seg);
  ms = mc_meta_server_start("127.0.0.1", port, NULL);
  REQUIRE(ms);
  CHECK_EQ(mc_te_reopen_segment(e, p.name), -1);
  CHECK_EQ(openSegment(e, p.name), seg); /* the cache is left as it was */
  peer_stop(&p);
  destroyTransferEngine(e);
  free(buf);
  mc_meta_server_stop(ms);
}

/* Discovery through a metadata backend: publish, open, transfer both paths, notify, and the keys
 * disappear when the peer's engine is destroyed. */
static void discovery_via(const char *conn) {
  struct peer p = {0};
  REQUIRE(peer_start(&p, conn, MiB, 1) == 0);
  struct mc_meta *m = NULL;
  REQUIRE(mc_meta_open(conn, &m) == 0 && m);
  char key[256], *v = NULL;
  mc_meta_segment_key(key, sizeof(key), p.name);
  CHECK_EQ(mc_meta_get(m, key, &v), 0);
  CHECK(v && strstr(v, "\"tcp_proto_version\":2"));
  free(v);
  v = NULL;
  mc_meta_rpc_key(key, sizeof(key), p.name);
  CHECK_EQ(mc_meta_get(m, key, &v), 0);
  CHECK(v && strstr(v, "rpc_port"));
  free(v);
  for (int force_tcp = 0; force_tcp <= 1; force_tcp++) {
    transfer_engine_t e = local_engine(conn, force_tcp);
    REQUIRE(e);
    uint8_t *buf = malloc(MiB);
    fill(buf, MiB, 0, 31 + force_tcp);
    REQUIRE(registerLocalMemory(e, buf, MiB, "cpu:0", 1) == 0);
    segment_id_t seg = openSegment(e, p.name);
    CHECK(seg > 0);
    CHECK_STR(mc_te_segment_path(e, seg), force_tcp ? "tcp" : "shm");
    CHECK_EQ(xfer(e, OPCODE_WRITE, buf, seg, p.addr, MiB), 0);
    CHECK(peer_ok(&p, "CHECK %llu %llu %u", 0, MiB, 31 + force_tcp));
    notify_msg_t nm = {"via", "meta"};
    CHECK_EQ(genNotifyInEngine(e, (uint64_t)seg, nm), 0);
    char reply[64];
    peer_cmd(&p, reply, sizeof(reply), "NOTIFS");
    CHECK_STR(reply, "1 via=meta");
    destroyTransferEngine(e);
    free(buf);
  }
  peer_stop(&p); /* QUIT destroys the peer's engine, which deletes its keys */
  v = NULL;
  mc_meta_segment_key(key, sizeof(key), "127.0.0.1");
  CHECK_EQ(mc_meta_get(m, key, &v), MC_META_NOT_FOUND);
  mc_meta_rpc_key(key, sizeof(key), "127.0.0.1");
  CHECK_EQ(mc_meta_get(m, key, &v), MC_META_NOT_FOUND);
  mc_meta_close(m);
}

static void test_discovery_etcd(void) {
  struct mc_tp_service s = {0};
  REQUIRE(mc_tp_start_etcd(&s) == 0);
  char conn[64];
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", s.port);
  discovery_via(conn);
  snprintf(conn, sizeof(conn), "127.0.0.1:%d", s.port); /* bare host:port means etcd */
  discovery_via(conn);
  mc_tp_service_stop(&s);
}

static void test_discovery_redis(void) {
  struct mc_tp_service s = {0};
  REQUIRE(mc_tp_start_redis(&s, 0, NULL) == 0);
  char conn[64];
  snprintf(conn, sizeof(conn), "redis://127.0.0.1:%d", s.port);
  discovery_via(conn);
  mc_tp_service_stop(&s);
}

static void test_discovery_http(void) {
  struct mc_meta_server *ms = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(ms);
  char conn[128];
  snprintf(conn, sizeof(conn), "http://127.0.0.1:%u/metadata", mc_meta_server_port(ms));
  discovery_via(conn);
  mc_meta_server_stop(ms);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 5 && !strcmp(argv[1], "--serve")) return serve(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_registration_rules),  TEST_CASE(test_prefault), TEST_CASE(test_huge_pages), TEST_CASE(test_roundtrip_tcp),
      TEST_CASE(test_roundtrip_cold_pages), TEST_CASE(test_roundtrip_warming_pages),
      TEST_CASE(test_roundtrip_prefault_off),
      TEST_CASE(test_roundtrip_shm_memfd), TEST_CASE(test_roundtrip_shm_vm),
      TEST_CASE(test_batches_threads_tcp), TEST_CASE(test_batches_threads_shm),
      TEST_CASE(test_lone_requests_threads), TEST_CASE(test_lone_requests_threads_no_direct),
      TEST_CASE(test_lone_requests_one_connection), TEST_CASE(test_pipelined_writes_tcp),
      TEST_CASE(test_pipelined_writes_cold_tcp), TEST_CASE(test_pipelined_mixed_tcp),
      TEST_CASE(test_out_of_bounds_tcp), TEST_CASE(test_private_buffer_tcp), TEST_CASE(test_private_buffer_shm),   TEST_CASE(test_out_of_bounds_shm), TEST_CASE(test_pipelined_reads_tcp),
      TEST_CASE(test_stale_descriptor_shm), TEST_CASE(test_stale_descriptor_tcp),
      TEST_CASE(test_notify_once),         TEST_CASE(test_control_port_junk), TEST_CASE(test_data_port_junk),
      TEST_CASE(test_peer_killed_midtransfer), TEST_CASE(test_frozen_peer_not_retried), TEST_CASE(test_http_metadata_discovery),
      TEST_CASE(test_discovery_http), TEST_CASE(test_discovery_etcd), TEST_CASE(test_discovery_redis),
  };
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
