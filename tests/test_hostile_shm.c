/* Hostile descriptors on the same-host path, and a flood of notifications (docs/transfer-engine.md,
 * "Same-host path: what a descriptor can make us touch"). A forged descriptor is published in a real
 * metadata server; the initiator is a real engine. A liar that can crash the initiator runs it in a
 * child process, so that the test reports the crash instead of dying of it. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "lib/proc.h"
#include "lib/te_desc.h"
#include "lib/test.h"
#include "mooncake/transfer_engine.h"
#include "te/engine_internal.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"
#include "net/sock.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

static const char *g_conn;

static void start_meta(void) { g_conn = mt_meta_conn(); }

/* Publishes a descriptor for segment `name` claiming pid and one buffer [addr, addr+len) (shm_fd, or -1). */
static int forge(const char *name, int pid, uint64_t addr, uint64_t len, int shm_fd) {
  json_t *b = json_pack("{s:s, s:I, s:I}", "name", name, "addr", (json_int_t)addr, "length", (json_int_t)len);
  if (shm_fd >= 0) json_object_set_new(b, "shm_fd", json_integer(shm_fd));
  json_t *d = json_pack("{s:s, s:s, s:s, s:i, s:s, s:i, s:i, s:i, s:[o]}", "name", name, "protocol", "tcp", "host_id",
                        mc_host_id(), "pid", pid, "ip_or_host_name", "127.0.0.1", "rpc_port", 1, "tcp_data_port", 0,
                        "shm_registry_fd", -1, "buffers", b);
  char *text = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  int rc = mt_publish_desc(g_conn, name, text);
  free(text);
  return rc;
}

/* One request through a batch: 0 when COMPLETED, -1 when the batch or the task failed. */
static int xfer(transfer_engine_t e, int op, void *local, segment_id_t seg, uint64_t remote, uint64_t len) {
  return mt_xfer(e, op, local, seg, remote, len) == STATUS_COMPLETED ? 0 : -1;
}

/* ------------------------------------------------------------ a descriptor claiming our own pid */

/* A peer answers with a descriptor that claims this process and a "buffer" over memory we never
 * registered (a canary block; then an unmapped address). The copy must be refused: our own
 * registrations decide, not the descriptor. */
static void test_forged_own_pid(void) {
  start_meta();
  REQUIRE(g_conn);
  transfer_engine_t e = createTransferEngine(g_conn, "victim", NULL, 0, 1);
  REQUIRE(e);
  uint8_t *src = malloc(64 * KiB), *canary = malloc(64 * KiB);
  memset(src, 0x11, 64 * KiB);
  memset(canary, 0x5A, 64 * KiB);
  REQUIRE(registerLocalMemory(e, src, 64 * KiB, "cpu:0", 1) == 0);
  REQUIRE(forge("evil", getpid(), (uint64_t)(uintptr_t)canary, 64 * KiB, -1) == 0);
  segment_id_t seg = openSegment(e, "evil");
  REQUIRE(seg > 0);
  CHECK_STR(mc_te_segment_path(e, seg), "shm");
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, seg, (uint64_t)(uintptr_t)canary, 64 * KiB), -1);
  int intact = 1;
  for (uint64_t i = 0; i < 64 * KiB; i++) intact &= canary[i] == 0x5A;
  CHECK(intact);
  /* nor can it read unregistered memory of ours into a buffer */
  CHECK_EQ(xfer(e, OPCODE_READ, src, seg, (uint64_t)(uintptr_t)canary, 64 * KiB), -1);
  CHECK(src[0] == 0x11 && src[64 * KiB - 1] == 0x11);
  /* an address nothing maps: refused, not a crash */
  REQUIRE(forge("evil2", getpid(), 0x10000, 64 * KiB, -1) == 0);
  segment_id_t seg2 = openSegment(e, "evil2");
  REQUIRE(seg2 > 0);
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, seg2, 0x10000, 4096), -1);

  /* the legitimate same-process case still works: a second engine's registered buffer */
  transfer_engine_t e2 = createTransferEngine(g_conn, "neighbour", NULL, 0, 1);
  REQUIRE(e2);
  uint8_t *dst = calloc(1, 64 * KiB);
  REQUIRE(registerLocalMemory(e2, dst, 64 * KiB, "cpu:0", 1) == 0);
  segment_id_t s2 = openSegment(e, "neighbour");
  REQUIRE(s2 > 0);
  CHECK_STR(mc_te_segment_path(e, s2), "shm");
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, s2, (uint64_t)(uintptr_t)dst, 64 * KiB), 0);
  CHECK(dst[0] == 0x11 && dst[64 * KiB - 1] == 0x11);
  /* ... but only within what it registered */
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, s2, (uint64_t)(uintptr_t)dst + 4096, 64 * KiB), -1);
  /* once the neighbour is gone, its memory is no longer reachable through a cached descriptor */
  destroyTransferEngine(e2);
  CHECK_EQ(xfer(e, OPCODE_WRITE, src, s2, (uint64_t)(uintptr_t)dst, 4096), -1);
  destroyTransferEngine(e);
  free(src);
  free(canary);
  free(dst);
}

/* ------------------------------------------------------------ a peer lying about its memfd */

enum liar_kind { LIAR_SHORT, LIAR_UNSEALED, LIAR_NOT_MEMFD };

struct liar {
  pid_t pid;
  int to, from; /* pipes: commands to the liar, its answers */
  int fd;       /* the fd number in the liar */
};

/* The liar: holds a memfd named like ours (4 KiB, or 1 MiB unsealed) or a plain file, and truncates it
 * to 0 on request. */
static void liar_main(enum liar_kind kind, int in, int out) {
  int fd = kind == LIAR_NOT_MEMFD ? open("/dev/zero", O_RDWR) : memfd_create("mooncake-segment", MFD_CLOEXEC);
  if (fd < 0 || (kind != LIAR_NOT_MEMFD && ftruncate(fd, kind == LIAR_SHORT ? 4096 : (off_t)MiB))) _exit(2);
  if (write(out, &fd, sizeof(fd)) != sizeof(fd)) _exit(2);
  char c;
  while (read(in, &c, 1) == 1) {
    if (c == 'T' && ftruncate(fd, 0)) _exit(3);
    if (write(out, &c, 1) != 1) _exit(2);
  }
  _exit(0);
}

static int liar_start(struct liar *l, enum liar_kind kind) {
  int a[2], b[2];
  if (pipe(a) || pipe(b)) return -1;
  if ((l->pid = fork()) == 0) {
    close(a[1]);
    close(b[0]);
    liar_main(kind, a[0], b[1]);
  }
  close(a[0]);
  close(b[1]);
  l->to = a[1];
  l->from = b[0];
  return read(l->from, &l->fd, sizeof(l->fd)) == sizeof(l->fd) ? 0 : -1;
}

static int liar_cmd(struct liar *l, char c) {
  char r;
  return write(l->to, &c, 1) == 1 && read(l->from, &r, 1) == 1 ? 0 : -1;
}

static void liar_stop(struct liar *l) {
  close(l->to);
  close(l->from);
  waitpid(l->pid, NULL, 0);
}

/* The initiator, in a child: opens the liar's segment and writes at `off`, then (truncate) has the liar
 * shrink its memfd and writes again. Exit 0: every transfer was refused or failed cleanly; 1: a write
 * went through where it must not; killed by a signal: the liar crashed us. The child is this binary
 * run again with MC_TEST_INITIATOR set (initiator_child runs before main), not a bare fork: this process
 * has a metadata server's threads, and a fork copies the heap's locks in whatever state they hold them. */
__attribute__((constructor)) static void initiator_child(void) {
  const char *spec = getenv("MC_TEST_INITIATOR");
  if (!spec) return;
  char conn[256], seg_name[128];
  unsigned long long off;
  int truncate, to, from;
  if (sscanf(spec, "%255s %127s %llu %d %d %d", conn, seg_name, &off, &truncate, &to, &from) != 6) _exit(6);
  struct liar l = {.to = to, .from = from};
  transfer_engine_t e = createTransferEngine(conn, "initiator", NULL, 0, 1);
  if (!e) _exit(4);
  uint8_t *src = malloc(64 * KiB);
  memset(src, 0x22, 64 * KiB);
  if (registerLocalMemory(e, src, 64 * KiB, "cpu:0", 1)) _exit(4);
  const uint64_t base = 0x7e0000000000ull;
  segment_id_t seg = openSegment(e, seg_name);
  int through = seg > 0 && xfer(e, OPCODE_WRITE, src, seg, base + off, 4096) == 0;
  if (truncate) {
    if (liar_cmd(&l, 'T')) _exit(5);
    through |= seg > 0 && xfer(e, OPCODE_WRITE, src, seg, base + off, 4096) == 0;
  }
  destroyTransferEngine(e);
  free(src);
  _exit(through ? 1 : 0);
}

static int initiator(struct liar *l, const char *seg_name, uint64_t off, int truncate) {
  char spec[512];
  snprintf(spec, sizeof(spec), "MC_TEST_INITIATOR=%s %s %llu %d %d %d", g_conn, seg_name, (unsigned long long)off,
           truncate, l->to, l->from);
  /* copy through the mapping at once, no kernel-copy warm-up */
  char *env[] = {spec, "MC_SEGMENT_PREFAULT=0", NULL};
  return mc_tp_exit_code_within(mc_tp_spawn((char *[]){"/proc/self/exe", NULL}, env, NULL), 120000);
}

/* A liar of `kind` announcing len bytes; the initiator writes at off (then again after a truncation). */
static void liar_case(enum liar_kind kind, const char *name, uint64_t len, uint64_t off, int truncate) {
  start_meta();
  struct liar l;
  REQUIRE(liar_start(&l, kind) == 0);
  REQUIRE(forge(name, l.pid, 0x7e0000000000ull, len, l.fd) == 0);
  CHECK_EQ(initiator(&l, name, off, truncate), 0);
  liar_stop(&l);
}

/* 4 KiB behind a descriptor that claims 1 GiB: a write at 512 MiB must not be a SIGBUS. */
static void test_memfd_shorter_than_claimed(void) { liar_case(LIAR_SHORT, "liar-short", 1ull << 30, 512 * MiB, 0); }
/* An unsealed memfd shrunk after the initiator mapped it: the next write must not be a SIGBUS. */
static void test_memfd_truncated_under_us(void) { liar_case(LIAR_UNSEALED, "liar-shrink", MiB, 0, 1); }
/* A descriptor pointing at an fd that is not one of our memfds (/dev/zero) is not mapped. */
static void test_fd_not_a_memfd(void) { liar_case(LIAR_NOT_MEMFD, "liar-zero", MiB, 0, 0); }

/* Our own shared buffers are sealed, so peers may map them. */
static void test_own_memfd_sealed(void) {
  start_meta();
  transfer_engine_t e = createTransferEngine(g_conn, "sealer", NULL, 0, 1);
  REQUIRE(e);
  void *p = mc_te_alloc_shared(e, MiB, "cpu:0");
  REQUIRE(p);
  struct mc_engine *me = e;
  int fd = -1;
  for (size_t i = 0; i < me->nbufs; i++)
    if (me->bufs[i]->addr == (uint64_t)(uintptr_t)p) fd = me->bufs[i]->memfd;
  REQUIRE(fd >= 0);
  int seals = fcntl(fd, F_GET_SEALS);
  CHECK(seals & F_SEAL_SHRINK);
  CHECK(ftruncate(fd, 0) != 0);
  mc_te_free_shared(e, p);
  destroyTransferEngine(e);
}

/* ------------------------------------------------------------ the notify inbox */

static void test_notify_inbox_bounded(void) {
  start_meta();
  setenv("MC_NOTIFY_INBOX_MAX", "8", 1);
  setenv("MC_NOTIFY_INBOX_MAX_BYTES", "4096", 1);
  transfer_engine_t rx = createTransferEngine(g_conn, "inbox", NULL, 0, 1);
  unsetenv("MC_NOTIFY_INBOX_MAX");
  unsetenv("MC_NOTIFY_INBOX_MAX_BYTES");
  transfer_engine_t tx = createTransferEngine(g_conn, "sender", NULL, 0, 1);
  REQUIRE(rx && tx);
  segment_id_t seg = openSegment(tx, "inbox");
  REQUIRE(seg > 0);
  int ok = 0, full = 0;
  for (int i = 0; i < 20; i++) {
    notify_msg_t m = {"n", "small"};
    int rc = genNotifyInEngine(tx, (uint64_t)seg, m);
    ok += rc == 0;
    full += rc == ERR_TOO_MANY_REQUESTS;
  }
  CHECK_EQ(ok, 8);
  CHECK_EQ(full, 12);
  int n = 0;
  notify_msg_t *got = getNotifsFromEngine(rx, &n);
  CHECK_EQ(n, 8);
  freeNotifsMsgBuf(got, n);
  /* drained: room again; the byte cap holds as well (1500-byte messages, 4096 bytes) */
  char big[1501];
  memset(big, 'x', 1500);
  big[1500] = 0;
  ok = full = 0;
  for (int i = 0; i < 5; i++) {
    notify_msg_t m = {"n", big};
    int rc = genNotifyInEngine(tx, (uint64_t)seg, m);
    ok += rc == 0;
    full += rc == ERR_TOO_MANY_REQUESTS;
  }
  CHECK_EQ(ok, 2);
  CHECK_EQ(full, 3);
  got = getNotifsFromEngine(rx, &n);
  CHECK_EQ(n, 2);
  freeNotifsMsgBuf(got, n);
  destroyTransferEngine(tx);
  destroyTransferEngine(rx);
}

/* ------------------------------------------------------------ exposure */

/* With MC_TCP_BIND_ADDRESS=127.0.0.2 the control port and the data port listen on that address only. The setting is read
 * once per process, so the engine runs in a fresh process: this binary again, with MC_TEST_BOUND_CHILD
 * set, which runs bound_child() before main and exits 0 when 127.0.0.2 answers and 127.0.0.1 refuses. */
__attribute__((constructor)) static void bound_child(void) {
  const char *conn = getenv("MC_TEST_BOUND_CHILD");
  if (!conn) return;
  transfer_engine_t e = createTransferEngine(conn, "bound", NULL, 0, 1);
  if (!e) _exit(2);
  char *json = mc_engine_describe(e);
  struct mc_desc *d = mc_desc_decode(json);
  if (!d) _exit(2);
  uint16_t ports[2] = {((struct mc_engine *)e)->rpc_port, d->tcp_data_port}; /* control RPC, data port */
  int rc = 0;
  for (int i = 0; i < 2; i++) {
    int there = mc_sock_connect("127.0.0.2", ports[i], 1000), elsewhere = mc_sock_connect("127.0.0.1", ports[i], 1000);
    if (there < 0 || elsewhere != -ECONNREFUSED) {
      fprintf(stderr, "port %u: 127.0.0.2: %d, 127.0.0.1: %d\n", ports[i], there, elsewhere);
      rc = 1;
    }
    if (there >= 0) close(there);
    if (elsewhere >= 0) close(elsewhere);
  }
  mc_desc_unref(d);
  free(json);
  destroyTransferEngine(e);
  _exit(rc);
}

static void test_bind_address(void) {
  start_meta();
  char conn[300];
  snprintf(conn, sizeof(conn), "MC_TEST_BOUND_CHILD=%s", g_conn);
  char *env[] = {"MC_TCP_BIND_ADDRESS=127.0.0.2", conn, NULL};
  CHECK_EQ(mc_tp_exit_code_within(mc_tp_spawn((char *[]){"/proc/self/exe", NULL}, env, NULL), 120000), 0);
}

TEST_MAIN({"forged_own_pid", test_forged_own_pid}, {"memfd_shorter_than_claimed", test_memfd_shorter_than_claimed},
          {"memfd_truncated_under_us", test_memfd_truncated_under_us}, {"fd_not_a_memfd", test_fd_not_a_memfd},
          {"own_memfd_sealed", test_own_memfd_sealed}, {"notify_inbox_bounded", test_notify_inbox_bounded},
          {"bind_address", test_bind_address})
