/* test_rdma_guest (docs/testing.md, "The RDMA guest"; docs/rdma.md): the RDMA transport's data path on a real
 * verbs device, Soft-RoCE rxe0 inside the qemu guest (tests/rdma_guest.cmake starts it there). Three processes:
 * this one (the initiator) and two targets forked before any engine exists, each an engine on rxe0 with one
 * registered buffer between unregistered guard bytes. MC_SAME_HOST_PATH=0: the same-host path is off, so the
 * path is rdma. Checks: byte-exact WRITE and READ at 1 B .. 64 MiB, batches of 1 and 256, several threads at
 * once, a notification, requests outside the peer's or the local buffer refused with the guard bytes intact,
 * and a target SIGKILLed mid-transfer failing within a bound while the other target keeps working. A fourth
 * process, a target on rxe0 and rxe1 (the guest's second device, on the other end of its veth pair), takes a
 * transfer striped over both NICs. Run on a host without rxe0 it exits 77 (skipped). */
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/test.h"
#include "mooncake/transfer_engine.h"
#include "net/ctrl_rpc.h"
#include "te/transport_rdma.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)
#define GUARD (64 * KiB)
#define TLEN (64 * MiB + MiB) /* a target's registered buffer */
#define SRC_LEN (64 * MiB + MiB)
#define GUARD_BYTE 0xEE
#define NOTE_MSG "hello-rdma"
#define TARGET_MAX_EPS 8 /* MC_RDMA_MAX_ENDPOINTS of the targets: the hostile handshakes go past it */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(uint64_t i, int seed) { return (uint8_t)((i * 131 + (i >> 12) * 7 + (uint64_t)seed) & 0xff); }

static const char *g_devices = "rxe0"; /* what new_engine installs rdma on */

static transfer_engine_t new_engine(void) {
  transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 0);
  void *args[2] = {(void *)g_devices, NULL};
  transport_t t = e ? installTransport(e, "rdma", args) : NULL;
  if (!t || strcmp(mc_te_transport_name(t), "rdma")) {
    fprintf(stderr, "cannot install rdma on %s (%s)\n", g_devices, t ? mc_te_transport_name(t) : "no transport");
    return NULL;
  }
  return e;
}

/* ------------------------------------------------------------ a target process */

struct target {
  pid_t pid;
  int cmd, rep; /* our ends of its pipes */
  char name[128];
  uint64_t addr, spare; /* the buffer, and a 1 MiB one it unregisters on "unreg" */
  segment_id_t seg;
};

/* The target: an engine with [buf + GUARD, + TLEN) registered and filled with pattern(seed), guard bytes
 * around it. Says "<name> <addr>"; then answers "check" with whether the guards are intact and how many
 * notifications came; leaves when its command pipe closes. */
static void target_main(int cmd, int rep, int seed) {
  setenv("MC_RDMA_MAX_ENDPOINTS", "8", 1);
  uint8_t *buf = aligned_alloc(4096, TLEN + 2 * GUARD);
  memset(buf, GUARD_BYTE, TLEN + 2 * GUARD);
  for (uint64_t i = 0; i < TLEN; i++) buf[GUARD + i] = pattern(i, seed);
  uint8_t *spare = aligned_alloc(4096, MiB);
  memset(spare, 0, MiB);
  transfer_engine_t e = new_engine();
  if (!e || registerLocalMemory(e, buf + GUARD, TLEN, "cpu:0", 1) || registerLocalMemory(e, spare, MiB, "cpu:0", 1))
    _exit(3);
  dprintf(rep, "%s %llu %llu\n", mc_te_local_segment_name(e), (unsigned long long)(uintptr_t)(buf + GUARD),
          (unsigned long long)(uintptr_t)spare);
  int unreg = 0;
  int notes = 0;
  for (;;) {
    struct pollfd p = {.fd = cmd, .events = POLLIN};
    int r = poll(&p, 1, 50);
    int n = 0;
    notify_msg_t *m = getNotifsFromEngine(e, &n);
    for (int i = 0; i < n; i++) notes += m[i].msg && !strcmp(m[i].msg, NOTE_MSG);
    if (m) freeNotifsMsgBuf(m, n);
    if (r <= 0) continue;
    char line[64];
    ssize_t k = read(cmd, line, sizeof(line) - 1);
    if (k <= 0) break;
    if (!strncmp(line, "unreg", 5)) { /* its MR goes: no peer may write there any more */
      unreg = !unregisterLocalMemory(e, spare);
      memset(spare, 0x5A, MiB);
      dprintf(rep, "unreg=%d\n", unreg);
      continue;
    }
    int guards = 1;
    for (uint64_t i = 0; unreg && i < MiB; i++) guards &= spare[i] == 0x5A;
    for (uint64_t i = 0; i < GUARD; i++) guards &= buf[i] == GUARD_BYTE && buf[GUARD + TLEN + i] == GUARD_BYTE;
    struct rdma_tp *tp = (struct rdma_tp *)mc_engine_transport(e, "rdma");
    pthread_mutex_lock(&tp->ep_mu);
    int peps = tp->npeps;
    pthread_mutex_unlock(&tp->ep_mu);
    dprintf(rep, "guards=%d notes=%d peps=%d\n", guards, notes, peps);
  }
  destroyTransferEngine(e);
  free(buf);
  free(spare);
  exit(0); /* not _exit: under ASan the passive side's teardown is leak-checked too */
}

static int target_start(struct target *t, int seed) {
  int c[2], r[2];
  if (pipe(c) || pipe(r)) return -1;
  fflush(NULL);
  t->pid = fork();
  if (t->pid == 0) {
    close(c[1]);
    close(r[0]);
    target_main(c[0], r[1], seed);
  }
  close(c[0]);
  close(r[1]);
  t->cmd = c[1];
  t->rep = r[0];
  return t->pid > 0 ? 0 : -1;
}

/* A line from the target within 60 s (engines come up slowly under TCG). */
static int target_line(struct target *t, char *out, size_t cap) {
  size_t n = 0;
  while (n + 1 < cap) {
    struct pollfd p = {.fd = t->rep, .events = POLLIN};
    if (poll(&p, 1, 60000) <= 0 || read(t->rep, out + n, 1) != 1) return -1;
    if (out[n] == '\n') break;
    n++;
  }
  out[n] = 0;
  return 0;
}

static int target_hello(struct target *t) {
  char line[256];
  unsigned long long a, sp;
  if (target_line(t, line, sizeof(line)) || sscanf(line, "%127s %llu %llu", t->name, &a, &sp) != 3) return -1;
  t->addr = a;
  t->spare = sp;
  return 0;
}

/* ------------------------------------------------------------ the initiator */

static transfer_engine_t A;
static uint8_t *src, *dst;
static struct target B, C, D; /* D: on rxe0 and rxe1 (0 pid when the guest has no rxe1) */

/* One batch of n requests; its final state within timeout_ms (or WAITING). */
static int xfer_n(struct transfer_request *r, size_t n, const notify_msg_t *note, int timeout_ms) {
  batch_id_t b = allocateBatchID(A, n);
  int rc = note ? submitTransferWithNotify(A, b, r, n, *note) : submitTransfer(A, b, r, n);
  if (rc) {
    freeBatchID(A, b);
    return -rc;
  }
  int st = mc_te_wait_batch(A, b, timeout_ms);
  if (st != STATUS_WAITING) freeBatchID(A, b);
  return st;
}

static int xfer(int op, void *local, segment_id_t seg, uint64_t remote, uint64_t len) {
  struct transfer_request r = {.opcode = op, .source = local, .target_id = seg, .target_offset = remote, .length = len};
  return xfer_n(&r, 1, NULL, 120000);
}

static void fill_random(uint8_t *p, uint64_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u | 1;
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}

static void test_path_and_read(void) {
  CHECK_STR(mc_te_segment_path(A, B.seg), "rdma");
  CHECK_STR(mc_te_segment_path(A, C.seg), "rdma");
  memset(dst, 0, MiB);
  CHECK_EQ(xfer(OPCODE_READ, dst, B.seg, B.addr, MiB), STATUS_COMPLETED);
  uint64_t bad = 0;
  for (uint64_t i = 0; i < MiB; i++) bad += dst[i] != pattern(i, 1);
  CHECK_EQ(bad, 0);
}

static void test_sizes(void) {
  static const uint64_t sizes[] = {1, 4 * KiB, 64 * KiB + 1, MiB, 64 * MiB};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    uint64_t n = sizes[k], off = n < MiB ? 3 * KiB + 5 : 0; /* small ones unaligned */
    fill_random(src, n, (unsigned)k + 1);
    memset(dst, 0, n);
    uint64_t t0 = now_ms();
    CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.addr + off, n), STATUS_COMPLETED);
    uint64_t t1 = now_ms();
    CHECK_EQ(xfer(OPCODE_READ, dst, B.seg, B.addr + off, n), STATUS_COMPLETED);
    uint64_t t2 = now_ms();
    CHECK(!memcmp(src, dst, n));
    fprintf(stderr, "  %llu bytes: write %llu ms, read %llu ms\n", (unsigned long long)n,
            (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
  }
}

static void test_batch_256(void) {
  enum { N = 256 };
  static struct transfer_request r[N];
  fill_random(src, N * 4 * KiB, 99);
  memset(dst, 0, N * 4 * KiB);
  for (int i = 0; i < N; i++) /* every other 4 KiB of the target, scattered */
    r[i] = (struct transfer_request){OPCODE_WRITE, src + (uint64_t)i * 4 * KiB, B.seg, B.addr + MiB + (uint64_t)i * 8 * KiB, 4 * KiB};
  CHECK_EQ(xfer_n(r, N, NULL, 120000), STATUS_COMPLETED);
  for (int i = 0; i < N; i++) r[i].opcode = OPCODE_READ, r[i].source = dst + (uint64_t)i * 4 * KiB;
  CHECK_EQ(xfer_n(r, N, NULL, 120000), STATUS_COMPLETED);
  CHECK(!memcmp(src, dst, N * 4 * KiB));
}

#define NTHREADS 4
static void *thread_main(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t len = 256 * KiB, base = (uint64_t)id * 2 * MiB;
  for (int it = 0; it < 6; it++) {
    fill_random(src + base, len, (unsigned)(id * 100 + it));
    memset(dst + base, 0, len);
    CHECK_EQ(xfer(OPCODE_WRITE, src + base, B.seg, B.addr + 8 * MiB + base, len), STATUS_COMPLETED);
    CHECK_EQ(xfer(OPCODE_READ, dst + base, B.seg, B.addr + 8 * MiB + base, len), STATUS_COMPLETED);
    CHECK(!memcmp(src + base, dst + base, len));
  }
  return NULL;
}

static void test_threads(void) {
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i);
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
}

static void test_notify(void) {
  notify_msg_t note = {.name = "rdma-note", .msg = NOTE_MSG};
  struct transfer_request r = {OPCODE_WRITE, src, B.seg, B.addr + 16 * MiB, 4 * KiB};
  CHECK_EQ(xfer_n(&r, 1, &note, 60000), STATUS_COMPLETED);
}

/* Outside the peer's buffer (its end, before its start) and outside our registration: refused, nothing posted;
 * the target's guard bytes are checked at the end (test_target_state). */
static void test_out_of_bounds(void) {
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.addr + TLEN - 100, 4 * KiB), STATUS_FAILED);
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.addr - 4 * KiB, 4 * KiB), STATUS_FAILED);
  CHECK_EQ(xfer(OPCODE_READ, src, B.seg, B.addr + TLEN, 1), STATUS_FAILED);
  CHECK_EQ(xfer(OPCODE_READ, src + SRC_LEN - 100, B.seg, B.addr, 4 * KiB), -MC_TE_STATUS_ADDRESS_NOT_REGISTERED);
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.addr, 4 * KiB), STATUS_COMPLETED); /* the endpoint is fine */
}

/* C is SIGKILLed while a large batch to it runs (its submission is still posting): the batch ends FAILED within
 * the bound while B, from another thread meanwhile, keeps working. */
static uint64_t killed_at;
static void *killer_main(void *arg) {
  (void)arg;
  usleep(500000);
  killed_at = now_ms();
  kill(C.pid, SIGKILL);
  for (int i = 0; i < 3; i++) {
    fill_random(src + 32 * MiB, MiB, 7 + (unsigned)i);
    memset(dst + 32 * MiB, 0, MiB);
    CHECK_EQ(xfer(OPCODE_WRITE, src + 32 * MiB, B.seg, B.addr + 20 * MiB, MiB), STATUS_COMPLETED);
    CHECK_EQ(xfer(OPCODE_READ, dst + 32 * MiB, B.seg, B.addr + 20 * MiB, MiB), STATUS_COMPLETED);
    CHECK(!memcmp(src + 32 * MiB, dst + 32 * MiB, MiB));
  }
  fprintf(stderr, "  the live peer: 3 round trips of 1 MiB done %llu ms after the kill\n",
          (unsigned long long)(now_ms() - killed_at));
  return NULL;
}

static void test_peer_killed(void) {
  CHECK_EQ(xfer(OPCODE_WRITE, src, C.seg, C.addr, 64 * KiB), STATUS_COMPLETED);
  enum { N = 48 };
  struct transfer_request r[N];
  for (int i = 0; i < N; i++) r[i] = (struct transfer_request){OPCODE_WRITE, src, C.seg, C.addr + (uint64_t)(i % 16) * 4 * MiB, 4 * MiB};
  batch_id_t b = allocateBatchID(A, N);
  pthread_t k;
  pthread_create(&k, NULL, killer_main, NULL);
  uint64_t s0 = now_ms();
  CHECK_EQ(submitTransfer(A, b, r, N), 0);
  int st = mc_te_wait_batch(A, b, 60000);
  uint64_t end = now_ms();
  pthread_join(k, NULL);
  fprintf(stderr, "  killed peer: batch %s %lld ms after the kill (submitted for %llu ms)\n", mc_te_task_state_name(st),
          (long long)(end - killed_at), (unsigned long long)(end - s0));
  CHECK_EQ(st, STATUS_FAILED);
  /* the RC retries (~0.6 s measured), else MC_RDMA_IO_TIMEOUT_MS (4 s here), then a refused re-handshake */
  CHECK(end - killed_at <= 10000);
  if (st != STATUS_WAITING) freeBatchID(A, b);
  int ws;
  waitpid(C.pid, &ws, 0);
  uint64_t t0 = now_ms();
  CHECK_EQ(xfer(OPCODE_WRITE, src, C.seg, C.addr, 4 * KiB), STATUS_FAILED); /* and later ones too, at once */
  CHECK(now_ms() - t0 <= 5000);
  CHECK_EQ(xfer(OPCODE_READ, dst, B.seg, B.addr, 4 * KiB), STATUS_COMPLETED);
}

/* B unregisters its spare buffer: a write with our stale descriptor (its old rkey) must fail, and the memory stay
 * as B left it (checked by test_target_state). Last but one: the errors pause the rail to B (docs/rdma.md, "Rails"). */
static void test_unregistered_target(void) {
  char line[64];
  memset(src, 0x77, MiB);
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.spare, 64 * KiB), STATUS_COMPLETED);
  REQUIRE(write(B.cmd, "unreg\n", 6) == 6);
  REQUIRE(target_line(&B, line, sizeof(line)) == 0);
  CHECK_STR(line, "unreg=1");
  uint64_t t0 = now_ms();
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.spare, 64 * KiB), STATUS_FAILED);
  fprintf(stderr, "  a write to the unregistered buffer failed in %llu ms\n", (unsigned long long)(now_ms() - t0));
}

static void test_target_state(void) {
  char line[128];
  int guards = -1, notes = -1, peps = -1;
  REQUIRE(write(B.cmd, "check\n", 6) == 6);
  REQUIRE(target_line(&B, line, sizeof(line)) == 0);
  sscanf(line, "guards=%d notes=%d peps=%d", &guards, &notes, &peps);
  CHECK_EQ(guards, 1);
  CHECK(notes >= 1);
  CHECK(peps >= 1 && peps <= TARGET_MAX_EPS);
}

/* A Connection request to B; 1 when B refused it (a non-empty reply_msg), 0 when it accepted, -1 on no reply. */
static int handshake(const char *body) {
  char *reply = NULL;
  uint16_t port = (uint16_t)atoi(strrchr(B.name, ':') + 1);
  if (mc_rpc_call("127.0.0.1", port, MC_RPC_CONNECTION, body, &reply, 10000)) return -1;
  struct mc_rdma_hs h;
  char err[200];
  int rc = mc_rdma_hs_decode(reply, strlen(reply), &h, err, sizeof(err)) ? -1 : h.reply_msg[0] ? 1 : 0;
  free(reply);
  return rc;
}

/* Hostile handshakes: malformed ones are refused, and valid ones from made-up peers beyond B's cap make it drop
 * the oldest endpoint (ours): our next transfer finds its QPs gone, the RC retries (or the watchdog) reset the
 * endpoint, and the re-handshake carries the transfer (B's count stays within the cap: test_target_state). */
static void test_hostile_handshake(void) {
  char *mine = mc_te_segment_json(A, LOCAL_SEGMENT);
  const char *g = strstr(mine, "\"gid\":\"");
  REQUIRE(g);
  char gid[48];
  snprintf(gid, sizeof(gid), "%.47s", g + 7);
  free(mine);
  char body[1024];
  CHECK_EQ(handshake("not json at all"), 1);
  CHECK_EQ(handshake("{\"reply_msg\":\"I refuse\"}"), 1);
  snprintf(body, sizeof(body), "{\"local_nic_path\":\"evil@rxe0\",\"peer_nic_path\":\"%s@rxe9\",\"local_lid\":0,"
           "\"local_gid\":\"%s\",\"qp_num\":[17],\"reply_msg\":\"\"}", B.name, gid);
  CHECK_EQ(handshake(body), 1); /* no such device */
  char qps[256] = "1";
  for (int i = 2; i <= 17; i++) snprintf(qps + strlen(qps), sizeof(qps) - strlen(qps), ",%d", i);
  snprintf(body, sizeof(body), "{\"local_nic_path\":\"evil@rxe0\",\"peer_nic_path\":\"%s@rxe0\",\"local_lid\":0,"
           "\"local_gid\":\"%s\",\"qp_num\":[%s],\"reply_msg\":\"\"}", B.name, gid, qps);
  CHECK_EQ(handshake(body), 1); /* 17 QPs */
  int accepted = 0;
  for (int i = 0; i < 2 * TARGET_MAX_EPS; i++) {
    snprintf(body, sizeof(body), "{\"local_nic_path\":\"evil-%d@rxe0\",\"peer_nic_path\":\"%s@rxe0\",\"local_lid\":0,"
             "\"local_gid\":\"%s\",\"qp_num\":[%d,%d],\"reply_msg\":\"\"}", i, B.name, gid, 1000 + i, 2000 + i);
    accepted += handshake(body) == 0;
  }
  CHECK_EQ(accepted, 2 * TARGET_MAX_EPS);
  uint64_t t0 = now_ms();
  fill_random(src, MiB, 4242);
  CHECK_EQ(xfer(OPCODE_WRITE, src, B.seg, B.addr + 24 * MiB, MiB), STATUS_COMPLETED);
  CHECK_EQ(xfer(OPCODE_READ, dst, B.seg, B.addr + 24 * MiB, MiB), STATUS_COMPLETED);
  CHECK(!memcmp(src, dst, MiB));
  fprintf(stderr, "  after the flood: a round trip in %llu ms (our endpoint was reset)\n", (unsigned long long)(now_ms() - t0));
}

/* installTransport("rdma", {arg}) on a fresh engine: the installed transport's name, and in log what the engine
 * logged meanwhile (WARNING lines: the fallback's reason). */
static const char *install_with(const char *arg, char *log, size_t cap) {
  char path[] = "/tmp/mc_rdma_guest_log_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 0);
  void *args[2] = {(void *)arg, NULL};
  transport_t t = e ? installTransport(e, "rdma", arg ? args : NULL) : NULL;
  const char *name = t ? mc_te_transport_name(t) : "none"; /* static strings: valid after destroy */
  char text[2048];
  int n = e ? mc_te_metrics(e, text, sizeof(text)) : 0;
  if (n > 0 && strstr(text, "te_transport_fallback_total{requested=\"rdma\"} 1")) name = !strcmp(name, "tcp") ? "tcp+counted" : name;
  if (e) destroyTransferEngine(e);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ssize_t k = pread(fd, log, cap - 1, 0);
  log[k > 0 ? k : 0] = 0;
  close(fd);
  unlink(path);
  return name;
}

/* The device list and the matrix reach the transport: an absent device falls back to tcp with the reason, logged
 * and counted; MC_TE_FILTERS when no list is given; a matrix JSON picks its own devices. */
static void test_device_choice(void) {
  static char log[1 << 16];
  CHECK_STR(install_with("rxe9", log, sizeof(log)), "tcp+counted");
  CHECK(strstr(log, "rdma requested but unavailable: device rxe9 not found") != NULL);
  CHECK_STR(install_with(" rxe0 ", log, sizeof(log)), "rdma");
  setenv("MC_TE_FILTERS", "rxe9", 1);
  CHECK_STR(install_with(NULL, log, sizeof(log)), "tcp+counted");
  CHECK(strstr(log, "device rxe9 not found") != NULL);
  unsetenv("MC_TE_FILTERS");
  CHECK_STR(install_with("{\"cpu:0\": [[\"rxe0\"]], \"*\": [[\"rxe0\"]]}", log, sizeof(log)), "rdma");
  CHECK_STR(install_with("{\"cpu:0\": [[\"rxe7\"]]}", log, sizeof(log)), "tcp+counted");
  CHECK(strstr(log, "device rxe7 not found") != NULL);
}

/* CPU time of this process (all threads), ms. */
static long cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* With nothing to do, the pollers sleep on their completion channels: an idle engine burns no CPU. */
static void test_idle_cpu(void) {
  usleep(300000); /* what the previous tests left settles */
  long c0 = cpu_ms();
  usleep(2000000);
  long used = cpu_ms() - c0;
  fprintf(stderr, "  idle for 2 s: %ld ms of CPU\n", used);
  CHECK(used <= 100);
}

static int have_device(const char *name) {
  int n = 0, found = 0;
  struct ibv_device **l = ibv_get_device_list(&n);
  for (int i = 0; l && i < n; i++) found |= !strcmp(ibv_get_device_name(l[i]), name);
  if (l) ibv_free_device_list(l);
  return found;
}

/* Packets a device has sent (its port's hw counter), -1 when unreadable. */
static long long sent_pkts(const char *dev) {
  char path[128];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts", dev);
  FILE *f = fopen(path, "r");
  long long v = -1;
  if (f && fscanf(f, "%lld", &v) != 1) v = -1;
  if (f) fclose(f);
  return v;
}

/* Two NICs on each side (rxe0, rxe1 on the two ends of a veth pair): slices are striped over the rails, so
 * both devices carry a share of one transfer, and the bytes arrive whole. */
static void test_two_nics(void) {
  if (!D.pid) {
    fprintf(stderr, "  skipped: this guest has no rxe1\n");
    return;
  }
  g_devices = "rxe0,rxe1";
  transfer_engine_t A2 = new_engine();
  g_devices = "rxe0";
  REQUIRE(A2);
  const uint64_t n = 32 * MiB;
  REQUIRE(!registerLocalMemory(A2, src, n, "cpu:0", 1) && !registerLocalMemory(A2, dst, n, "cpu:0", 1));
  REQUIRE(!target_hello(&D));
  segment_id_t seg = openSegment(A2, D.name);
  REQUIRE(seg >= 0);
  CHECK_STR(mc_te_segment_path(A2, seg), "rdma");
  long long s0 = sent_pkts("rxe0"), s1 = sent_pkts("rxe1");
  fill_random(src, n, 77);
  memset(dst, 0, n);
  transfer_engine_t keep = A;
  A = A2; /* xfer() submits on A */
  CHECK_EQ(xfer(OPCODE_WRITE, src, seg, D.addr, n), STATUS_COMPLETED);
  CHECK_EQ(xfer(OPCODE_READ, dst, seg, D.addr, n), STATUS_COMPLETED);
  A = keep;
  CHECK(!memcmp(src, dst, n));
  long long d0 = sent_pkts("rxe0") - s0, d1 = sent_pkts("rxe1") - s1;
  fprintf(stderr, "  32 MiB each way over two NICs: rxe0 sent %lld packets, rxe1 %lld\n", d0, d1);
  CHECK(s0 >= 0 && s1 >= 0);
  CHECK(d0 >= 1000 && d1 >= 1000); /* a share each (a 32 MiB write and read: ~16 000 packets of 4 KiB in all) */
  destroyTransferEngine(A2);
}

int main(void) {
  if (!have_device("rxe0")) {
    fprintf(stderr, "SKIP: no rxe0 here (this test runs inside the RDMA guest: tests/rdma_guest.cmake)\n");
    return 77;
  }
  setenv("MC_SAME_HOST_PATH", "0", 1); /* reach the targets over rdma although they are on this host */
  signal(SIGPIPE, SIG_IGN);
  if (target_start(&B, 1) || target_start(&C, 2)) return 1; /* before any engine: no threads forked */
  if (have_device("rxe1")) {
    g_devices = "rxe0,rxe1";
    if (target_start(&D, 4)) return 1;
    g_devices = "rxe0";
  }
  setenv("MC_RDMA_IO_TIMEOUT_MS", "4000", 1); /* ours (not the targets'): resets come sooner */
  src = aligned_alloc(4096, SRC_LEN);
  dst = aligned_alloc(4096, SRC_LEN);
  uint64_t t0 = now_ms();
  A = new_engine();
  int ok = A && !registerLocalMemory(A, src, SRC_LEN, "cpu:0", 1) && !registerLocalMemory(A, dst, SRC_LEN, "cpu:0", 1) &&
           !target_hello(&B) && !target_hello(&C);
  if (ok) {
    B.seg = openSegment(A, B.name);
    C.seg = openSegment(A, C.name);
    ok = B.seg >= 0 && C.seg >= 0;
  }
  fprintf(stderr, "set up in %llu ms\n", (unsigned long long)(now_ms() - t0));
  if (!ok) {
    fprintf(stderr, "FAIL: set-up (engine, registration, targets, segments)\n");
    kill(B.pid, SIGKILL), kill(C.pid, SIGKILL);
    if (D.pid) kill(D.pid, SIGKILL);
    return 1;
  }
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_device_choice), TEST_CASE(test_path_and_read), TEST_CASE(test_sizes),         TEST_CASE(test_batch_256),
      TEST_CASE(test_threads),       TEST_CASE(test_idle_cpu),      TEST_CASE(test_notify),        TEST_CASE(test_out_of_bounds),
      TEST_CASE(test_hostile_handshake), TEST_CASE(test_peer_killed), TEST_CASE(test_unregistered_target),
      TEST_CASE(test_target_state), TEST_CASE(test_two_nics),
  };
  char *argv[] = {"test_rdma_guest", NULL};
  int rc = mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), 1, argv);
  if (D.pid) {
    close(D.cmd);
    waitpid(D.pid, NULL, 0);
  }
  close(B.cmd);
  int ws = 0;
  waitpid(B.pid, &ws, 0);
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  destroyTransferEngine(A);
  free(src);
  free(dst);
  if (!rc && mc_test_failures) rc = 1;
  fprintf(stderr, "%s (%llu ms)\n", rc ? "FAIL" : "PASS", (unsigned long long)(now_ms() - t0));
  return rc;
}
