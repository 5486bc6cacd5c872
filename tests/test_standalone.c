/* Standalone client mode (docs/standalone.md) end to end: a real mooncake_master, a real mooncake_client
 * process, and dummy clients in other processes (this binary re-run as "--dummy") driven over pipes.
 * Two dummies put and get byte-exact through the real client and read each other's keys (zero-copy pool
 * buffers, the copying calls, batches, exist/size/remove); a get into a pool buffer moves only headers
 * over the local socket (the bytes arrive in the shared pages); a dummy SIGKILLed in the middle of its
 * transfers leaves the real client serving the other; hostile peers on the socket (no descriptor, a pipe,
 * an unsealed or short memory file, offsets outside the shared memory, oversized and truncated frames,
 * stray descriptors, another user) are refused and leave no descriptor behind. */
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "test_store_harness.c"

#include "client/client.h"
#include "standalone/standalone.h"
#include "standalone/wire.h"
#include "net/sock.h"

#define POOL (24 * MiB)
#define STAGE (4 * MiB)

static struct master M;
static pid_t real_pid = -1;
static int real_port;
static char real_log[512];

/* ------------------------------------------------------------ the real client */

static int sock_connect(void) {
  struct sockaddr_un a;
  unsigned len = mc_dummy_sockaddr(&a, real_port);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, len)) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

static int real_start(void) {
  const char *bin_dir = getenv("MC_TEST_BIN_DIR");
  char bin[512], a1[160], a2[160], a3[64];
  snprintf(bin, sizeof(bin), "%s/mooncake_client", bin_dir ? bin_dir : ".");
  real_port = 20000 + (int)(getpid() % 20000); /* names the abstract socket only: no TCP port is bound */
  snprintf(a1, sizeof(a1), "--metadata_server=%s", M.metadata);
  snprintf(a2, sizeof(a2), "--master_server_address=%s", M.addr);
  snprintf(a3, sizeof(a3), "--port=%d", real_port);
  snprintf(real_log, sizeof(real_log), "%s/mooncake_client.log", M.dir);
  char *argv[] = {bin, "--host=127.0.0.1", a1, a2, a3, "--global_segment_size=192MB", "--max_dummies=8",
                  "--max_shared_size=64MB", NULL};
  real_pid = mc_tp_spawn(argv, NULL, real_log);
  for (long t = mc_tp_now_ms() + 20000; real_pid > 0 && mc_tp_now_ms() < t; mc_tp_sleep_ms(50)) {
    int fd = sock_connect();
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    if (mc_tp_exited(real_pid)) break;
  }
  mc_tp_dump_log(real_log);
  return -1;
}

/* ------------------------------------------------------------ dummies in other processes */

/* The dummy process: setup_dummy against the real client, then obeys (answers one integer a line)
 *   PUT k n seed       put_from a pool buffer                 GET k n seed   get_into a pool buffer + verify
 *   BPUT k1 k2 n seed  batch_put_from (seeds seed, seed+1)   BGET k1 k2 n seed  batch_get_into + verify
 *   CPUT k n seed      copying put from the heap             CGET k n seed  copying get + verify
 *   EXIST k / SIZE k / REMOVE k
 *   WIRE k n seed      get_into a pool buffer; answers the bytes that crossed the socket meanwhile
 *   FORK k             a forked child's is_exist must fail -900; answers the parent's is_exist after it
 *   SPIN n             starts a thread putting, getting and removing n-byte objects without end; answers 0
 *   SESS k n seed      put session: start, the first half written from a pool buffer, the second from the heap
 *                      (through staging), end -> first failure or 0
 *   SREAD k n seed     get session: start, read back the same two ways, verify, end -> bytes read, -1 mismatch
 *   SOPEN k n / SWRITE k n / SEND k revoke   put session start / one ranged write / end, alone
 *   COPY k / MOVE k source    a task placing k on this dummy's real client's segment -> rc
 *   TASKWAIT           queries the last task until it ends -> its status (3 SUCCESS), or the query's code
 *   QUERY hi lo        query_task of that id -> rc
 *   MOUNT / UNMOUNT    the extra-segment calls -> rc
 *   DESC k             get_replica_desc -> the line desc_line writes */
static mooncake_store_t D;
static char *pool_a, *pool_b;
static mc_task_id_t last_task;

/* get_replica_desc of key on s, as one line: the count or code, then per descriptor its fields. */
static void desc_line(mooncake_store_t s, const char *key, char *out, size_t cap) {
  mc_replica_desc_t *d = NULL;
  int n = mc_store_get_replica_desc(s, key, &d);
  size_t at = (size_t)snprintf(out, cap, "%d", n);
  for (int i = 0; i < n && at < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, " %d %llu %llx %s %s", d[i].status, (unsigned long long)d[i].size,
                           (unsigned long long)d[i].address, d[i].endpoint, d[i].segment_name);
  if (n < 0 && d) snprintf(out, cap, "failed with an array");
  mc_store_replica_desc_free(d, n);
}

/* A put session over [pool_a: first half][heap: second half] of n bytes. */
static long long dummy_session_put(const char *k, size_t n, unsigned seed) {
  char *heap = malloc(n), *v = malloc(n);
  fill(v, n, seed);
  size_t h = n / 2, sz = n;
  memcpy(pool_a, v, h);
  memcpy(heap, v + h, n - h);
  const char *keys[1] = {k};
  int r = -1;
  long long out = mc_store_put_session_start(D, keys, &sz, 1, NULL, NULL, &r);
  if (!out) out = r;
  if (!out) {
    const void *bufs[2] = {pool_a, heap};
    size_t sizes[2] = {h, n - h}, offs[2] = {0, h}, nb = 2;
    int64_t w = -1;
    out = mc_store_put_session_write(D, keys, bufs, sizes, offs, &nb, 1, &w);
    if (!out) out = w == (int64_t)n ? 0 : w ? w : -1;
  }
  if (!out) {
    out = mc_store_put_session_end(D, keys, 1, 0, &r);
    if (!out) out = r;
  }
  free(heap);
  free(v);
  return out;
}

/* A get session reading n bytes back into [pool_b][heap]; n, -1 on a mismatch, or the failure. */
static long long dummy_session_get(const char *k, size_t n, unsigned seed) {
  char *heap = malloc(n), *v = malloc(n);
  const char *keys[1] = {k};
  int r = -1;
  long long out = mc_store_get_session_start(D, keys, 1, &r);
  if (!out) out = r;
  if (!out) {
    size_t h = n / 2;
    memset(pool_b, 0, h);
    memset(heap, 0, n);
    void *bufs[2] = {pool_b, heap};
    size_t sizes[2] = {h, n - h}, offs[2] = {0, h}, nb = 2;
    int64_t g = -1;
    out = mc_store_get_session_read(D, keys, bufs, sizes, offs, &nb, 1, &g);
    if (!out) out = g;
    memcpy(v, pool_b, h);
    memcpy(v + h, heap, n - h);
    if (out == (long long)n && !verify(v, n, seed)) out = -1;
    if (mc_store_get_session_end(D, keys, 1)) out = -2;
  }
  free(heap);
  free(v);
  return out;
}

static long long dummy_task_wait(void) {
  mc_task_info_t t;
  for (long end = mc_tp_now_ms() + 60000; mc_tp_now_ms() < end; mc_tp_sleep_ms(100)) {
    int rc = mc_store_query_task(D, last_task, &t);
    if (rc) return rc;
    if (t.id.hi != last_task.hi || t.id.lo != last_task.lo) return -3;
    if (t.status >= 2) return t.status; /* FAILED or SUCCESS */
  }
  return -4;
}

static int64_t wire_bytes(void) {
  struct mc_dummy *d = mc_dummy_of(D);
  return mc_dummy_simple(d, MC_DOP_STATS, 1, NULL) + mc_dummy_simple(d, MC_DOP_STATS, 2, NULL);
}

static void *spin_main(void *arg) {
  uint64_t n = (uint64_t)(uintptr_t)arg;
  for (unsigned i = 0;; i++) {
    char key[64];
    snprintf(key, sizeof(key), "spin_%d_%u", (int)getpid(), i);
    fill(pool_b, n, i);
    mooncake_store_put_from(D, key, pool_b, n, NULL);
    mooncake_store_get_into(D, key, pool_b, n);
    mooncake_store_remove(D, key, 1); /* keeps the pool from filling up (eviction would take the test's keys) */
  }
  return NULL;
}

static int dummy_main(int port) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
  D = mooncake_store_create();
  int rc = mc_store_setup_dummy(D, POOL, STAGE, addr);
  pool_a = (char *)(uintptr_t)mc_store_alloc_from_mem_pool(D, 8 * MiB);
  pool_b = (char *)(uintptr_t)mc_store_alloc_from_mem_pool(D, 8 * MiB);
  if (rc || !pool_a || !pool_b) {
    printf("FAILED %d\n", rc);
    return 2;
  }
  printf("READY %d\n", (int)getpid());
  fflush(stdout);
  char line[512], k1[128], k2[128];
  unsigned long long n;
  unsigned seed;
  while (fgets(line, sizeof(line), stdin)) {
    long long out = -99998;
    if (sscanf(line, "PUT %127s %llu %u", k1, &n, &seed) == 3) {
      fill(pool_a, n, seed);
      out = mooncake_store_put_from(D, k1, pool_a, n, NULL);
    } else if (sscanf(line, "GET %127s %llu %u", k1, &n, &seed) == 3) {
      memset(pool_a, 0, n);
      out = mooncake_store_get_into(D, k1, pool_a, 8 * MiB);
      if (out == (long long)n && !verify(pool_a, n, seed)) out = -1;
    } else if (sscanf(line, "BPUT %127s %127s %llu %u", k1, k2, &n, &seed) == 4) {
      const char *keys[2] = {k1, k2};
      void *bufs[2] = {pool_a, pool_b};
      size_t sz[2] = {n, n};
      int r[2];
      fill(pool_a, n, seed);
      fill(pool_b, n, seed + 1);
      out = mooncake_store_batch_put_from(D, keys, bufs, sz, 2, NULL, r);
      if (!out) out = r[0] ? r[0] : r[1];
    } else if (sscanf(line, "BGET %127s %127s %llu %u", k1, k2, &n, &seed) == 4) {
      const char *keys[2] = {k1, k2};
      void *bufs[2] = {pool_a, pool_b};
      size_t sz[2] = {8 * MiB, 8 * MiB};
      int64_t r[2];
      memset(pool_a, 0, n);
      memset(pool_b, 0, n);
      out = mooncake_store_batch_get_into(D, keys, bufs, sz, 2, r);
      if (!out) out = r[0] != (int64_t)n ? r[0] : r[1] != (int64_t)n ? r[1] : (long long)n;
      if (out == (long long)n && !(verify(pool_a, n, seed) && verify(pool_b, n, seed + 1))) out = -1;
    } else if (sscanf(line, "CPUT %127s %llu %u", k1, &n, &seed) == 3) {
      char *v = malloc(n);
      fill(v, n, seed);
      out = mooncake_store_put(D, k1, v, n, NULL);
      free(v);
    } else if (sscanf(line, "CGET %127s %llu %u", k1, &n, &seed) == 3) {
      void *v = NULL;
      out = mc_store_get(D, k1, &v);
      if (out == (long long)n && !verify(v, n, seed)) out = -1;
      free(v);
    } else if (sscanf(line, "EXIST %127s", k1) == 1) {
      out = mooncake_store_is_exist(D, k1);
    } else if (sscanf(line, "SIZE %127s", k1) == 1) {
      out = mooncake_store_get_size(D, k1);
    } else if (sscanf(line, "REMOVE %127s", k1) == 1) {
      out = mooncake_store_remove(D, k1, 0);
    } else if (sscanf(line, "WIRE %127s %llu %u", k1, &n, &seed) == 3) {
      int64_t before = wire_bytes();
      memset(pool_a, 0, n);
      int64_t got = mooncake_store_get_into(D, k1, pool_a, 8 * MiB);
      int64_t after = wire_bytes();
      out = got == (int64_t)n && verify(pool_a, n, seed) ? after - before : -1;
    } else if (sscanf(line, "FORK %127s", k1) == 1) { /* a forked child's calls fail, the parent's go on */
      pid_t c = fork();
      if (c == 0) _exit(mooncake_store_is_exist(D, k1) == MC_RPC_FAIL ? 0 : 1);
      int st = -1;
      waitpid(c, &st, 0);
      out = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? mooncake_store_is_exist(D, k1) : -2;
    } else if (sscanf(line, "SPIN %llu", &n) == 1) {
      pthread_t th;
      out = pthread_create(&th, NULL, spin_main, (void *)(uintptr_t)n);
    } else if (sscanf(line, "SESS %127s %llu %u", k1, &n, &seed) == 3) {
      out = dummy_session_put(k1, n, seed);
    } else if (sscanf(line, "SREAD %127s %llu %u", k1, &n, &seed) == 3) {
      out = dummy_session_get(k1, n, seed);
    } else if (sscanf(line, "SOPEN %127s %llu", k1, &n) == 2) {
      const char *keys[1] = {k1};
      size_t sz = n;
      int r = -1;
      out = mc_store_put_session_start(D, keys, &sz, 1, NULL, NULL, &r);
      if (!out) out = r;
    } else if (sscanf(line, "SWRITE %127s %llu", k1, &n) == 2) {
      const char *keys[1] = {k1};
      const void *bufs[1] = {pool_a};
      size_t sz = n, off = 0, nb = 1;
      int64_t w = -1;
      out = mc_store_put_session_write(D, keys, bufs, &sz, &off, &nb, 1, &w);
      if (!out) out = w;
    } else if (sscanf(line, "SEND %127s %u", k1, &seed) == 2) {
      const char *keys[1] = {k1};
      int r = -1;
      out = mc_store_put_session_end(D, keys, 1, (int)seed, &r);
      if (!out) out = r;
    } else if (sscanf(line, "COPY %127s", k1) == 1) {
      char me[300];
      mooncake_store_get_hostname(D, me, sizeof(me));
      const char *tg[1] = {me};
      out = mc_store_create_copy_task(D, k1, tg, 1, &last_task);
    } else if (sscanf(line, "MOVE %127s %127s", k1, k2) == 2) {
      char me[300];
      mooncake_store_get_hostname(D, me, sizeof(me));
      out = mc_store_create_move_task(D, k1, k2, me, &last_task);
    } else if (!strncmp(line, "TASKWAIT", 8)) {
      out = dummy_task_wait();
    } else if (sscanf(line, "QUERY %llu %u", &n, &seed) == 2) {
      mc_task_info_t t;
      out = mc_store_query_task(D, (mc_task_id_t){n, seed}, &t);
    } else if (!strncmp(line, "MOUNT", 5)) {
      char id[40];
      out = mc_store_mount_extra_segment(D, NULL, 0, 16 * MiB, NULL, id, sizeof(id));
    } else if (!strncmp(line, "UNMOUNT", 7)) {
      out = mc_store_unmount_extra_segment(D, "00000000-0000-0000-0000-000000000000", 0, 0);
    } else if (sscanf(line, "DESC %127s", k1) == 1) {
      char desc[4096];
      desc_line(D, k1, desc, sizeof(desc));
      printf("%s\n", desc);
      fflush(stdout);
      continue;
    } else if (!strncmp(line, "QUIT", 4)) {
      break;
    }
    printf("%lld\n", out);
    fflush(stdout);
  }
  mooncake_store_destroy(D);
  return 0;
}

static int dummy_start(struct peer *p) {
  char port[16];
  snprintf(port, sizeof(port), "%d", real_port);
  char *args[] = {"standalone_dummy", "--dummy", port, NULL};
  if (self_spawn(p, args, NULL, NULL)) return -1;
  char line[256] = "";
  if (!fgets(line, sizeof(line), p->out) || strncmp(line, "READY", 5)) {
    fprintf(stderr, "dummy did not start: %s\n", line);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ cases */

static struct peer A, B;

static void test_two_dummies(void) {
  const uint64_t sizes[] = {1, 4097, 1 * MiB + 3, 6 * MiB};
  for (unsigned i = 0; i < 4; i++) {
    uint64_t n = sizes[i];
    CHECK_EQ(peer_cmd(&A, "PUT a_%u %llu %u", i, (unsigned long long)n, i + 10), 0);
    CHECK_EQ(peer_cmd(&B, "PUT b_%u %llu %u", i, (unsigned long long)n, i + 20), 0);
    /* each reads the other's key, and its own */
    CHECK_EQ(peer_cmd(&B, "GET a_%u %llu %u", i, (unsigned long long)n, i + 10), (long long)n);
    CHECK_EQ(peer_cmd(&A, "GET b_%u %llu %u", i, (unsigned long long)n, i + 20), (long long)n);
    CHECK_EQ(peer_cmd(&A, "GET a_%u %llu %u", i, (unsigned long long)n, i + 10), (long long)n);
  }
  CHECK_EQ(peer_cmd(&A, "BPUT ba1 ba2 %llu 30", 2 * MiB + 5), 0);
  CHECK_EQ(peer_cmd(&B, "BGET ba1 ba2 %llu 30", 2 * MiB + 5), (long long)(2 * MiB + 5));
  /* copying calls go through the dummy's staging part; larger than it: -600, nothing stored */
  CHECK_EQ(peer_cmd(&B, "CPUT cb 3000000 40"), 0);
  CHECK_EQ(peer_cmd(&A, "CGET cb 3000000 40"), 3000000);
  CHECK_EQ(peer_cmd(&A, "REMOVE cb"), MC_OBJECT_HAS_LEASE); /* A's read leased it */
  CHECK_EQ(peer_cmd(&A, "CPUT toobig %llu 41", STAGE + 1), MC_INVALID_PARAMS);
  CHECK_EQ(peer_cmd(&B, "EXIST toobig"), 0);
  /* existing key keeps its value; size, exist, remove, missing */
  CHECK_EQ(peer_cmd(&B, "PUT a_1 4097 99"), 0);
  CHECK_EQ(peer_cmd(&B, "GET a_1 4097 11"), 4097);
  CHECK_EQ(peer_cmd(&A, "SIZE b_2"), (long long)(1 * MiB + 3));
  CHECK_EQ(peer_cmd(&A, "EXIST b_3"), 1);
  CHECK_EQ(peer_cmd(&B, "PUT rm 100 7"), 0);
  CHECK_EQ(peer_cmd(&A, "REMOVE rm"), 0);
  CHECK_EQ(peer_cmd(&B, "EXIST rm"), 0);
  CHECK_EQ(peer_cmd(&B, "GET rm 100 7"), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&A, "SIZE nothing"), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&A, "FORK b_0"), 1);
}

/* The bytes of a 6 MiB get into a pool buffer arrive through the shared pages: the socket carries the
 * request and the reply only. */
static void test_zero_copy(void) {
  long long wire = peer_cmd(&B, "WIRE a_3 %llu 13", 6 * MiB);
  fprintf(stderr, "  bytes over the socket for a 6 MiB get_into: %lld\n", wire);
  CHECK(wire > 0 && wire < 512);
}

/* Layer-wise sessions through the real client: byte-exact both ways (pool buffers and, through staging,
 * heap buffers), each dummy's sessions its own, and a dummy that dies leaves no put session behind. */
static void test_sessions(void) {
  CHECK_EQ(peer_cmd(&A, "SESS s1 %llu 70", 3 * MiB + 5), 0);
  CHECK_EQ(peer_cmd(&B, "SREAD s1 %llu 70", 3 * MiB + 5), (long long)(3 * MiB + 5));
  CHECK_EQ(peer_cmd(&A, "SREAD s1 %llu 70", 3 * MiB + 5), (long long)(3 * MiB + 5));
  CHECK_EQ(peer_cmd(&A, "SESS s1b 1 71"), 0); /* a 1-byte object: all of it from the heap */
  CHECK_EQ(peer_cmd(&B, "SREAD s1b 1 71"), 1);
  CHECK_EQ(peer_cmd(&B, "SREAD nothing 10 1"), MC_OBJECT_NOT_FOUND);
  /* A's open session is not B's: B cannot write into it, nor start the key again */
  CHECK_EQ(peer_cmd(&A, "SOPEN s2 1000"), 0);
  CHECK_EQ(peer_cmd(&B, "SWRITE s2 1000"), MC_INVALID_PARAMS);
  CHECK_EQ(peer_cmd(&B, "SOPEN s2 1000"), MC_OBJECT_ALREADY_EXISTS); /* A's put, on the master */
  CHECK_EQ(peer_cmd(&A, "SOPEN s2 1000"), MC_INVALID_PARAMS); /* already open for A */
  CHECK_EQ(peer_cmd(&A, "SWRITE s2 1001"), MC_INVALID_PARAMS); /* a range outside the object */
  CHECK_EQ(peer_cmd(&B, "SEND s2 0"), MC_INVALID_PARAMS);
  CHECK_EQ(peer_cmd(&A, "SWRITE s2 1000"), 1000);
  CHECK_EQ(peer_cmd(&A, "SEND s2 1"), 0); /* revoked: nothing left */
  CHECK_EQ(peer_cmd(&B, "EXIST s2"), 0);
  /* a dummy that dies with a put session open: the real client revokes it, the key is free again */
  struct peer C;
  REQUIRE(dummy_start(&C) == 0);
  CHECK_EQ(peer_cmd(&C, "SOPEN s3 4096"), 0);
  peer_kill(&C);
  long long r = -1;
  for (long t = mc_tp_now_ms() + 10000; r && mc_tp_now_ms() < t; mc_tp_sleep_ms(100)) r = peer_cmd(&B, "SOPEN s3 4096");
  CHECK_EQ(r, 0);
  CHECK_EQ(peer_cmd(&B, "SEND s3 1"), 0);
}

/* Copy and move tasks asked for by a dummy: the real client asks the master, the real client's segment
 * receives the replica (it runs the task as the target's owner), both dummies read it byte for byte. */
static void test_tasks(void) {
  struct peer P;
  REQUIRE(peer_start(&P, &M, 32 * MiB, 8 * MiB, NULL) == 0);
  CHECK_EQ(peer_cmd(&P, "PUT tmove %llu 80 1 1", 2 * MiB + 7), 0); /* on P's own segment */
  CHECK_EQ(peer_cmd(&A, "MOVE tmove %s", P.name), 0);
  CHECK_EQ(peer_cmd(&A, "TASKWAIT"), 3);
  CHECK_EQ(peer_cmd(&B, "GET tmove %llu 80", 2 * MiB + 7), (long long)(2 * MiB + 7));
  CHECK_EQ(peer_cmd(&P, "PUT tcopy %llu 81 1 1", 1 * MiB + 1), 0);
  CHECK_EQ(peer_cmd(&B, "COPY tcopy"), 0);
  CHECK_EQ(peer_cmd(&B, "TASKWAIT"), 3);
  CHECK_EQ(peer_cmd(&A, "GET tcopy %llu 81", 1 * MiB + 1), (long long)(1 * MiB + 1));
  peer_quit(&P); /* its replicas go with it; the moved and copied ones stay */
  mc_tp_sleep_ms(500);
  CHECK_EQ(peer_cmd(&B, "GET tmove %llu 80", 2 * MiB + 7), (long long)(2 * MiB + 7));
  CHECK_EQ(peer_cmd(&B, "GET tcopy %llu 81", 1 * MiB + 1), (long long)(1 * MiB + 1));
  CHECK_EQ(peer_cmd(&A, "COPY no_such_key"), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&A, "QUERY 1 2"), MC_TASK_NOT_FOUND);
  /* a dummy owns no segment: the extra-segment calls are refused */
  CHECK_EQ(peer_cmd(&A, "MOUNT"), MC_NOT_SUPPORTED);
  CHECK_EQ(peer_cmd(&A, "UNMOUNT"), MC_NOT_SUPPORTED);
}

/* get_replica_desc through a dummy is the real client's answer: the same descriptors (status, size,
 * address, endpoint, segment) as a real client of the cluster gets for a key put through a dummy, and the
 * same code for a missing key. */
static void test_replica_desc(void) {
  mooncake_store_t R = client_new(&M, 0, 0); /* a real client, no segment of its own */
  REQUIRE(R != NULL);
  char a[4096], b[4096], r[4096];
  CHECK_EQ(peer_cmd(&A, "PUT rd_pool 70000 91"), 0); /* zero-copy, from A's pool */
  CHECK_EQ(peer_cmd(&B, "CPUT rd_copy 5000 92"), 0); /* copying, through B's staging */
  const char *keys[] = {"rd_pool", "rd_copy"};
  const unsigned long long sizes[] = {70000, 5000};
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(peer_line(&A, a, sizeof(a), "DESC %s", keys[i]), 0);
    CHECK_EQ(peer_line(&B, b, sizeof(b), "DESC %s", keys[i]), 0);
    desc_line(R, keys[i], r, sizeof(r));
    fprintf(stderr, "  %s: dummy '%s', real client '%s'\n", keys[i], a, r);
    int n = -1, st = -1;
    unsigned long long sz = 0;
    CHECK_EQ(sscanf(r, "%d %d %llu", &n, &st, &sz), 3);
    CHECK(n >= 1 && st == 3 && sz == sizes[i]); /* one complete replica at least, of the object's size */
    CHECK_STR(a, r);
    CHECK_STR(b, r);
  }
  CHECK_EQ(peer_line(&A, a, sizeof(a), "DESC rd_missing"), 0);
  desc_line(R, "rd_missing", r, sizeof(r));
  CHECK_STR(r, "-704");
  CHECK_STR(a, r);
  mooncake_store_destroy(R);
}

static void test_dummy_dies_mid_operation(void) {
  struct peer C;
  REQUIRE(dummy_start(&C) == 0);
  CHECK_EQ(peer_cmd(&C, "SPIN %llu", 2 * MiB), 0);
  mc_tp_sleep_ms(400); /* transfers in flight */
  peer_kill(&C);
  CHECK(!mc_tp_exited(real_pid));
  mc_tp_sleep_ms(2500); /* the space of its removed objects comes back once their leases (2 s) end */
  for (unsigned i = 0; i < 3; i++) {
    CHECK_EQ(peer_cmd(&A, "PUT after_%u %llu %u", i, 3 * MiB, i + 50), 0);
    CHECK_EQ(peer_cmd(&B, "GET after_%u %llu %u", i, 3 * MiB, i + 50), (long long)(3 * MiB));
  }
}

/* A raw frame with an optional descriptor; 0 or -1. */
static int send_raw(int fd, uint16_t op, const void *body, uint32_t len, uint32_t claimed, int pass) {
  struct mc_dummy_hdr h = {MC_DUMMY_MAGIC, op, 0, claimed, 0};
  struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)body, len}};
  char ctl[CMSG_SPACE(sizeof(int))] = {0};
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
  if (pass >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof(ctl);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass, sizeof(int));
  }
  return sendmsg(fd, &m, MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + len) ? 0 : -1;
}

/* Reads a reply: its first i64 (the status or first result), or -99 when the real client hung up. */
static long long recv_i64(int fd) {
  struct mc_dummy_hdr h;
  int64_t v;
  if (mc_sock_read_deadline(fd, &h, sizeof(h), 15000) || h.len < 8) return -99;
  char *b = malloc(h.len);
  int rc = mc_sock_read_deadline(fd, b, h.len, 5000);
  memcpy(&v, b, 8);
  free(b);
  return rc ? -99 : v;
}

static int memfd_of(uint64_t size, int seal) {
  int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, (off_t)size)) return -1;
  if (seal) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  return fd;
}

/* HELLO with the given descriptor (-1: none) and sizes; the real client's answer (-99: hung up). */
static long long hello_with(int pass, uint64_t pool, uint64_t total, int *keep) {
  int fd = sock_connect();
  uint64_t sz[2] = {pool, total};
  long long r = fd < 0 || send_raw(fd, MC_DOP_HELLO, sz, 16, 16, pass) ? -98 : recv_i64(fd);
  if (keep && r == 0) *keep = fd;
  else if (fd >= 0) close(fd);
  return r;
}

/* A fresh connection (HELLO with sealed), one frame; the real client's first answer (-99: it hung up). */
static long long one_frame(int sealed, uint16_t op, uint16_t flags, const struct mc_dbuf *b) {
  int fd = -1;
  if (hello_with(sealed, MiB / 2, MiB, &fd) != 0) return -98;
  struct mc_dummy_hdr h = {MC_DUMMY_MAGIC, op, flags, (uint32_t)b->n, 0};
  long long r = -97;
  if (mc_sock_write_deadline(fd, &h, sizeof(h), 5000) == 0 && (!b->n || !mc_sock_write_deadline(fd, b->p, b->n, 5000)))
    r = recv_i64(fd);
  close(fd);
  return r;
}

static void put_default_config(struct mc_dbuf *b, uint32_t npref) {
  int32_t z = 0;
  mc_dbuf_u64(b, 1);
  mc_dbuf_put(b, &z, 4);
  mc_dbuf_u64(b, (uint64_t)-1);
  mc_dbuf_put(b, &z, 4);
  mc_dbuf_u32(b, npref);
}

/* The session and task frames, lying: every malformed one drops the connection, buffers outside the
 * shared memory fail -600 with the connection kept. */
static void hostile_new_frames(int sealed) {
  struct mc_dbuf b = {0};
  /* PUT_START: preferred segments over the cap; a count larger than the body; a size missing */
  put_default_config(&b, MC_DUMMY_MAX_PREFERRED + 1);
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_START, 0, &b), -99);
  b.n = 0;
  put_default_config(&b, 0);
  mc_dbuf_u32(&b, 1000);
  mc_dbuf_str(&b, "k");
  mc_dbuf_u64(&b, 5);
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_START, 0, &b), -99);
  b.n = 0;
  put_default_config(&b, 0);
  mc_dbuf_u32(&b, 1);
  mc_dbuf_str(&b, "k");
  mc_dbuf_u64(&b, 5);
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_START, MC_DUMMY_GROUPS, &b), -99); /* the group is missing */
  mc_dbuf_str(&b, "g");
  mc_dbuf_u32(&b, 0); /* a trailing word */
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_START, MC_DUMMY_GROUPS, &b), -99);
  /* PUT_WRITE / GET_READ: a buffer count past the body; a key holding a NUL; buffers outside */
  for (uint16_t op = MC_DOP_PUT_WRITE; op <= MC_DOP_GET_READ; op++) {
    b.n = 0;
    mc_dbuf_u32(&b, 1);
    mc_dbuf_str(&b, "k");
    mc_dbuf_u32(&b, 1u << 30);
    mc_dbuf_u64(&b, 0);
    CHECK_EQ(one_frame(sealed, op, 0, &b), -99);
    b.n = 0;
    mc_dbuf_u32(&b, 1);
    mc_dbuf_u32(&b, 3);
    mc_dbuf_put(&b, "a\0b", 3);
    mc_dbuf_u32(&b, 0);
    CHECK_EQ(one_frame(sealed, op, 0, &b), -99);
    b.n = 0;
    mc_dbuf_u32(&b, 1);
    mc_dbuf_str(&b, "k");
    mc_dbuf_u32(&b, 1);
    mc_dbuf_u64(&b, MiB - 8); /* 8 bytes left, 16 claimed */
    mc_dbuf_u64(&b, 16);
    mc_dbuf_u64(&b, 0);
    CHECK_EQ(one_frame(sealed, op, 0, &b), MC_INVALID_PARAMS);
    b.n -= 8; /* the object offset cut off */
    CHECK_EQ(one_frame(sealed, op, 0, &b), -99);
  }
  /* PUT_END without its revoke word, GET_START / GET_END with a count past the body */
  b.n = 0;
  mc_dbuf_u32(&b, 1);
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_END, 0, &b), -99);
  b.n = 0;
  mc_dbuf_u32(&b, 500);
  mc_dbuf_str(&b, "k");
  CHECK_EQ(one_frame(sealed, MC_DOP_GET_START, 0, &b), -99);
  CHECK_EQ(one_frame(sealed, MC_DOP_GET_END, 0, &b), -99);
  /* sessions a connection never opened: per key -600, the connection kept */
  b.n = 0;
  mc_dbuf_u32(&b, 0);
  mc_dbuf_u32(&b, 1);
  mc_dbuf_str(&b, "never_opened");
  CHECK_EQ(one_frame(sealed, MC_DOP_PUT_END, 0, &b), MC_INVALID_PARAMS);
  /* COPY_TASK with no target, and with more than 8; MOVE_TASK short; QUERY_TASK short and long */
  b.n = 0;
  mc_dbuf_str(&b, "k");
  mc_dbuf_u32(&b, 0);
  CHECK_EQ(one_frame(sealed, MC_DOP_COPY_TASK, 0, &b), -99);
  b.n = 0;
  mc_dbuf_str(&b, "k");
  mc_dbuf_u32(&b, 9);
  for (int i = 0; i < 9; i++) mc_dbuf_str(&b, "seg");
  CHECK_EQ(one_frame(sealed, MC_DOP_COPY_TASK, 0, &b), -99);
  b.n = 0;
  mc_dbuf_str(&b, "k");
  mc_dbuf_str(&b, "src");
  CHECK_EQ(one_frame(sealed, MC_DOP_MOVE_TASK, 0, &b), -99);
  b.n = 0;
  mc_dbuf_u64(&b, 1);
  CHECK_EQ(one_frame(sealed, MC_DOP_QUERY_TASK, 0, &b), -99);
  mc_dbuf_u64(&b, 2);
  CHECK_EQ(one_frame(sealed, MC_DOP_QUERY_TASK, 0, &b), MC_TASK_NOT_FOUND);
  mc_dbuf_u64(&b, 3);
  CHECK_EQ(one_frame(sealed, MC_DOP_QUERY_TASK, 0, &b), -99);
  /* REPLICA_DESC: a count past the body, a key holding a NUL, a trailing byte; a well-formed one answered */
  b.n = 0;
  mc_dbuf_u32(&b, 300);
  mc_dbuf_str(&b, "k");
  CHECK_EQ(one_frame(sealed, MC_DOP_REPLICA_DESC, 0, &b), -99);
  b.n = 0;
  mc_dbuf_u32(&b, 1);
  mc_dbuf_u32(&b, 3);
  mc_dbuf_put(&b, "a\0b", 3);
  CHECK_EQ(one_frame(sealed, MC_DOP_REPLICA_DESC, 0, &b), -99);
  b.n = 0;
  mc_dbuf_u32(&b, 1);
  mc_dbuf_str(&b, "hostile_none");
  CHECK_EQ(one_frame(sealed, MC_DOP_REPLICA_DESC, 0, &b), MC_OBJECT_NOT_FOUND);
  mc_dbuf_put(&b, "x", 1);
  CHECK_EQ(one_frame(sealed, MC_DOP_REPLICA_DESC, 0, &b), -99);
  /* an op past the last one */
  b.n = 0;
  CHECK_EQ(one_frame(sealed, MC_DOP_LAST + 1, 0, &b), -99);
  free(b.p);
}

static void test_hostile_frames(void) {
  mc_tp_sleep_ms(500);
  int base_fds = mc_tp_fd_count(real_pid);
  int p[2];
  REQUIRE(pipe(p) == 0);
  CHECK(hello_with(-1, MiB, MiB, NULL) != 0);              /* no descriptor */
  CHECK(hello_with(p[0], MiB, MiB, NULL) != 0);            /* a pipe */
  int unsealed = memfd_of(MiB, 0), sealed = memfd_of(MiB, 1), big = memfd_of(128 * MiB, 1);
  CHECK(hello_with(unsealed, MiB, MiB, NULL) != 0);        /* could be truncated under the real client */
  CHECK(hello_with(sealed, MiB, 2 * MiB, NULL) != 0);      /* claims more than the file holds */
  CHECK(hello_with(sealed, 2 * MiB, MiB, NULL) != 0);      /* pool larger than the whole */
  CHECK(hello_with(big, 128 * MiB, 128 * MiB, NULL) != 0); /* over --max_shared_size */
  /* a good HELLO, then requests naming memory outside what was shared */
  int fd = -1;
  CHECK_EQ(hello_with(sealed, MiB / 2, MiB, &fd), 0);
  REQUIRE(fd >= 0);
  struct mc_dbuf b = {0};
  mc_dbuf_u32(&b, 1);
  mc_dbuf_str(&b, "hostile_k");
  mc_dbuf_u32(&b, 1);
  mc_dbuf_u64(&b, MiB - 10); /* 10 bytes left, 20 claimed */
  mc_dbuf_u64(&b, 20);
  CHECK_EQ(send_raw(fd, MC_DOP_READ, b.p, (uint32_t)b.n, (uint32_t)b.n, -1), 0);
  CHECK_EQ(recv_i64(fd), MC_INVALID_PARAMS);
  b.n = 0;
  mc_dbuf_u64(&b, 1); /* config: 1 replica, keep pin, default ttl, no hard pin, no preference */
  int32_t z = 0;
  mc_dbuf_put(&b, &z, 4);
  mc_dbuf_u64(&b, (uint64_t)-1);
  mc_dbuf_put(&b, &z, 4);
  mc_dbuf_u32(&b, 0);
  mc_dbuf_u32(&b, 1);
  mc_dbuf_str(&b, "hostile_k");
  mc_dbuf_u32(&b, 1);
  mc_dbuf_u64(&b, UINT64_MAX - 4); /* wraps around */
  mc_dbuf_u64(&b, 8);
  CHECK_EQ(send_raw(fd, MC_DOP_WRITE, b.p, (uint32_t)b.n, (uint32_t)b.n, -1), 0);
  CHECK_EQ(recv_i64(fd), MC_INVALID_PARAMS);
  /* a stray descriptor on a request is dropped by the kernel; the request is still answered */
  CHECK_EQ(send_raw(fd, MC_DOP_HEALTH, NULL, 0, 0, p[1]), 0);
  CHECK_EQ(recv_i64(fd), 0);
  /* a count larger than the body: malformed, the connection is dropped */
  b.n = 0;
  mc_dbuf_u32(&b, 1000000);
  CHECK_EQ(send_raw(fd, MC_DOP_EXIST, b.p, (uint32_t)b.n, (uint32_t)b.n, -1), 0);
  CHECK_EQ(recv_i64(fd), -99);
  close(fd);
  /* an oversized frame, and a frame that never completes (dropped after the frame deadline) */
  fd = -1;
  CHECK_EQ(hello_with(sealed, MiB / 2, MiB, &fd), 0);
  CHECK_EQ(send_raw(fd, MC_DOP_EXIST, NULL, 0, MC_DUMMY_MAX_BODY + 1, -1), 0);
  CHECK_EQ(recv_i64(fd), -99);
  close(fd);
  fd = -1;
  CHECK_EQ(hello_with(sealed, MiB / 2, MiB, &fd), 0);
  CHECK_EQ(send_raw(fd, MC_DOP_EXIST, "ab", 2, 64, -1), 0);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(recv_i64(fd), -99);
  CHECK(mc_tp_now_ms() - t0 < 14000);
  close(fd);
  /* a frame of an unknown op */
  fd = -1;
  CHECK_EQ(hello_with(sealed, MiB / 2, MiB, &fd), 0);
  CHECK_EQ(send_raw(fd, 77, NULL, 0, 0, -1), 0);
  CHECK_EQ(recv_i64(fd), -99);
  close(fd);
  free(b.p);
  hostile_new_frames(sealed);
  close(p[0]);
  close(p[1]);
  close(unsealed);
  close(sealed);
  close(big);
  /* every connection, mapping and descriptor released; the good dummies still served */
  int fds = -1;
  for (long t = mc_tp_now_ms() + 5000; mc_tp_now_ms() < t; mc_tp_sleep_ms(100))
    if ((fds = mc_tp_fd_count(real_pid)) <= base_fds) break;
  CHECK_EQ(fds, base_fds);
  CHECK(!mc_tp_exited(real_pid));
  CHECK_EQ(peer_cmd(&A, "GET after_1 %llu 51", 3 * MiB), (long long)(3 * MiB));
}

/* The dummy reads a REPLICA_DESC reply as untrusted: the decoder (a pure function) refuses every cut,
 * trailing bytes, counts and names over their caps, names holding a NUL and codes that are not ints, and
 * leaves nothing allocated; a dummy served by a lying real client gets -900 for such replies, keeps its
 * connection, and decodes the next good reply. */
static const mc_replica_desc_t GOOD[2] = {{3, 4096, 0x7f0000001000ull, "127.0.0.1:16000", "seg_a"},
                                         {3, 4096, 0x7f0000200000ull, "10.0.0.2:17000", "seg_b"}};

static int desc_decode(const struct mc_dbuf *b, int *rc) {
  mc_replica_desc_t *d = (mc_replica_desc_t *)1;
  int bad = mc_drep_replica_desc(b->p, b->n, &d, rc);
  if (*rc >= 0) {
    if (bad || !d || d[0].size != 4096 || strcmp(d[*rc - 1].segment_name, *rc == 2 ? "seg_b" : "seg_a")) bad = -2;
  } else if (d) {
    bad = -3;
  }
  mc_store_replica_desc_free(d, *rc);
  return bad;
}

/* A lying real client on its own port: answers the HELLO, then each request with the next of n bodies. */
struct liar {
  int lfd, port, n;
  struct mc_dbuf *bodies;
};

static void *liar_main(void *arg) {
  struct liar *l = arg;
  struct pollfd pf = {l->lfd, POLLIN, 0};
  int fd = poll(&pf, 1, 20000) == 1 ? accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
  struct mc_dummy_hdr h;
  uint64_t sz[2];
  struct iovec iov[2] = {{&h, sizeof(h)}, {sz, sizeof(sz)}};
  char ctl[CMSG_SPACE(sizeof(int))];
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  if (fd < 0 || recvmsg(fd, &m, MSG_CMSG_CLOEXEC) != (ssize_t)(sizeof(h) + sizeof(sz))) goto out;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  int memfd = -1;
  if (c && c->cmsg_type == SCM_RIGHTS) memcpy(&memfd, CMSG_DATA(c), sizeof(int));
  if (memfd >= 0) close(memfd);
  struct {
    struct mc_dummy_hdr h;
    int64_t st;
    char name[6];
  } hello = {{MC_DUMMY_MAGIC, MC_DOP_HELLO, 0, 14, 0}, 0, "liar:1"};
  if (mc_sock_write_deadline(fd, &hello, sizeof(h) + 14, 5000)) goto out;
  for (int i = 0; i < l->n; i++) {
    char body[4096];
    if (mc_sock_read_deadline(fd, &h, sizeof(h), 20000) || h.len > sizeof(body) ||
        mc_sock_read_deadline(fd, body, h.len, 5000))
      break;
    struct mc_dummy_hdr rh = {MC_DUMMY_MAGIC, h.op, 0, (uint32_t)l->bodies[i].n, 0};
    if (mc_sock_write_deadline(fd, &rh, sizeof(rh), 5000) ||
        (rh.len && mc_sock_write_deadline(fd, l->bodies[i].p, rh.len, 5000)))
      break;
  }
out:
  if (fd >= 0) close(fd);
  return NULL;
}

static void test_hostile_replies(void) {
  struct mc_dbuf b = {0};
  int rc;
  mc_drep_put_replica_desc(&b, 2, GOOD);
  CHECK_EQ(desc_decode(&b, &rc), 0);
  CHECK_EQ(rc, 2);
  size_t whole = b.n;
  int cuts_refused = 0;
  for (b.n = 0; b.n < whole; b.n++) cuts_refused += desc_decode(&b, &rc) == -1 && rc == MC_RPC_FAIL;
  CHECK_EQ(cuts_refused, (int)whole);
  b.n = whole;
  mc_dbuf_put(&b, "", 1); /* a trailing byte */
  CHECK_EQ(desc_decode(&b, &rc), -1);
  b.n = 0;
  mc_drep_put_replica_desc(&b, MC_OBJECT_NOT_FOUND, NULL); /* a code, alone */
  CHECK_EQ(desc_decode(&b, &rc), 0);
  CHECK_EQ(rc, MC_OBJECT_NOT_FOUND);
  mc_dbuf_u32(&b, 0); /* a code with bytes after it */
  CHECK_EQ(desc_decode(&b, &rc), -1);
  b.n = 0;
  mc_drep_put_replica_desc(&b, (int64_t)INT32_MIN - 1, NULL); /* not an int */
  CHECK_EQ(desc_decode(&b, &rc), -1);
  /* more descriptors than the cap, each well-formed; the count over the bytes present */
  mc_replica_desc_t *many = calloc(MC_DUMMY_MAX_DESCS + 1, sizeof(*many));
  for (int i = 0; i <= MC_DUMMY_MAX_DESCS; i++) many[i] = GOOD[0];
  b.n = 0;
  mc_drep_put_replica_desc(&b, MC_DUMMY_MAX_DESCS + 1, many);
  CHECK_EQ(desc_decode(&b, &rc), -1);
  b.n = 0;
  mc_drep_put_replica_desc(&b, 1, GOOD);
  int64_t lie = 1000;
  memcpy(b.p, &lie, 8);
  CHECK_EQ(desc_decode(&b, &rc), -1);
  free(many);
  /* names: at the cap accepted, one byte over it refused, a NUL inside refused */
  char *name = malloc(MC_DUMMY_MAX_NAME + 2);
  memset(name, 'n', MC_DUMMY_MAX_NAME + 1);
  name[MC_DUMMY_MAX_NAME + 1] = 0;
  mc_replica_desc_t one = {3, 4096, 1, name, "seg_a"};
  b.n = 0;
  mc_drep_put_replica_desc(&b, 1, &one);
  CHECK_EQ(desc_decode(&b, &rc), -1);
  name[MC_DUMMY_MAX_NAME] = 0;
  b.n = 0;
  mc_drep_put_replica_desc(&b, 1, &one);
  CHECK_EQ(desc_decode(&b, &rc), 0);
  free(name);
  b.n = 0;
  mc_drep_put_replica_desc(&b, 1, GOOD);
  b.p[b.n - 2] = 0; /* inside "seg_a" */
  CHECK_EQ(desc_decode(&b, &rc), -1);
  free(b.p);

  /* through a dummy: a lying real client's replies */
  struct mc_dbuf bodies[4] = {{0}};
  mc_drep_put_replica_desc(&bodies[0], 2, GOOD);
  bodies[0].n -= 3;                                            /* cut short */
  mc_drep_put_replica_desc(&bodies[1], MC_OBJECT_NOT_FOUND, NULL);
  mc_dbuf_u64(&bodies[1], 7);                                  /* a code with a tail */
  /* bodies[2]: empty */
  mc_drep_put_replica_desc(&bodies[3], 2, GOOD);               /* good */
  struct liar l = {-1, real_port + 1, 4, bodies};
  struct sockaddr_un a;
  unsigned alen = mc_dummy_sockaddr(&a, l.port);
  l.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(l.lfd >= 0 && !bind(l.lfd, (struct sockaddr *)&a, alen) && !listen(l.lfd, 1));
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, liar_main, &l) == 0);
  mooncake_store_t d = mooncake_store_create();
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", l.port);
  CHECK_EQ(mc_store_setup_dummy(d, MiB, MiB, addr), 0);
  for (int i = 0; i < 3; i++) {
    mc_replica_desc_t *out = (mc_replica_desc_t *)1;
    CHECK_EQ(mc_store_get_replica_desc(d, "k", &out), MC_RPC_FAIL);
    CHECK(out == NULL);
  }
  mc_replica_desc_t *out = NULL;
  CHECK_EQ(mc_store_get_replica_desc(d, "k", &out), 2); /* the connection was kept: the good reply is read */
  CHECK(out && out[1].address == GOOD[1].address && !strcmp(out[1].endpoint, GOOD[1].endpoint) &&
        !strcmp(out[1].segment_name, "seg_b"));
  mc_store_replica_desc_free(out, 2);
  mooncake_store_destroy(d);
  pthread_join(th, NULL);
  close(l.lfd);
  for (int i = 0; i < 4; i++) free(bodies[i].p);
}

/* Only this user (or root) is served: a process of another user is hung up on before its HELLO is read.
 * Needs root to become another user; without it the case says so and checks nothing. */
static void test_other_user_refused(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "  not root: cannot run a peer as another user here\n");
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) _exit(3);
    int sealed = memfd_of(MiB, 1), fd = sock_connect();
    uint64_t sz[2] = {MiB / 2, MiB};
    if (fd < 0) _exit(2);
    send_raw(fd, MC_DOP_HELLO, sz, 16, 16, sealed); /* may already fail: the real client hangs up at once */
    _exit(recv_i64(fd) == -99 ? 0 : 1);
  }
  CHECK_EQ(mc_tp_exit_code_within(pid, 20000), 0);
}

/* Connections past --max_dummies are refused at once; the ones already there keep working. */
static void test_connection_cap(void) {
  int fds[16], n = 0;
  for (int i = 0; i < 16; i++) fds[n++] = sock_connect();
  mc_tp_sleep_ms(300);
  int closed = 0;
  for (int i = 0; i < n; i++) {
    struct pollfd pf = {fds[i], POLLIN, 0};
    char c;
    if (fds[i] >= 0 && poll(&pf, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) == 0) closed++;
  }
  CHECK(closed >= 16 - 8 + 2); /* two slots are held by A and B */
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
  mc_tp_sleep_ms(11000); /* the silent ones are dropped at the HELLO deadline: their slots are free again */
  struct peer C;
  CHECK_EQ(dummy_start(&C), 0);
  CHECK_EQ(peer_cmd(&A, "PUT cap_k 5000 61"), 0);
  CHECK_EQ(peer_cmd(&C, "GET cap_k 5000 61"), 5000);
  peer_quit(&C);
  CHECK_EQ(peer_cmd(&B, "GET cap_k 5000 61"), 5000);
}

static void setup_cluster(void) {
  static const char *const lease[] = {"--default_kv_lease_ttl=2000", NULL};
  REQUIRE(master_start(&M, lease) == 0);
  REQUIRE(real_start() == 0);
  REQUIRE(dummy_start(&A) == 0);
  REQUIRE(dummy_start(&B) == 0);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && !strcmp(argv[1], "--dummy")) return dummy_main(atoi(argv[2]));
  if (argc >= 6 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  static const struct mc_test_case cases[] = {
      TEST_CASE(setup_cluster),
      TEST_CASE(test_two_dummies),
      TEST_CASE(test_zero_copy),
      TEST_CASE(test_sessions),
      TEST_CASE(test_tasks),
      TEST_CASE(test_replica_desc),
      TEST_CASE(test_dummy_dies_mid_operation),
      TEST_CASE(test_hostile_frames),
      TEST_CASE(test_hostile_replies),
      TEST_CASE(test_other_user_refused),
      TEST_CASE(test_connection_cap),
  };
  int rc = run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
  peer_quit(&A);
  peer_quit(&B);
  if (real_pid > 0) CHECK_EQ(mc_tp_stop(real_pid, 10000), 0);
  if (mc_test_failures) mc_tp_dump_log(real_log);
  master_stop(&M);
  return rc || mc_test_failures;
}
