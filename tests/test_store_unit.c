/* Store client tests that need no real master: the staging allocator, the C API's bad-call and
 * not-initialized rules, setup failures with measured deadlines (closed port, silent master, unreachable
 * metadata, memory the host cannot back, version mismatch), the auto port, and teardown on exit() and
 * on SIGTERM, observed by a scripted stand-in master (net/mrpc server) that records the RPCs it gets. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "client/client.h"
#include "lib/proc.h"
#include "lib/test.h"
#include "proto/proto.h"
#include "mooncake/store.h"
#include "mooncake/store_c.h"
#include "net/mrpc.h"
#include "meta/metadata_server.h"

/* ------------------------------------------------------------ a scripted stand-in master */

static atomic_int op_count[64];
static const char *fake_version = MC_STORE_VERSION;
static atomic_int fake_garbage; /* 1: malformed replies to data RPCs; 2: random bytes */
static unsigned garbage_seed = 1;
/* 3: GET_REPLICA_LIST names a replica in the caller's own segment (as mounted) at fake_own_off from its
 * base (wrapping, so "before the base" works too), fake_own_size bytes */
static pthread_mutex_t own_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_segment_rec own_seg;
static uint64_t fake_own_off, fake_own_size;

static void garbage_reply(uint16_t op, struct mc_wbuf *reply) {
  if (atomic_load(&fake_garbage) == 2) {
    size_t n = rand_r(&garbage_seed) % 64;
    for (size_t i = 0; i < n; i++) mc_w_u8(reply, (uint8_t)rand_r(&garbage_seed));
    return;
  }
  switch (op) {
    case MC_OP_GET_REPLICA_LIST:
      if (atomic_load(&fake_garbage) == 3) {
        pthread_mutex_lock(&own_mu);
        struct mc_replica_rec r = {3, fake_own_size, own_seg.base + fake_own_off, own_seg.te_endpoint, own_seg.name,
                                   "tcp", "", ""};
        mc_w_u64(reply, 10000);
        mc_w_u32(reply, 1);
        mc_put_replica(reply, &r);
        pthread_mutex_unlock(&own_mu);
        break;
      }
      mc_w_u64(reply, 1000);
      mc_w_u32(reply, 1000); /* claims 1000 replicas, sends none */
      break;
    case MC_OP_BATCH_GET_REPLICA_LIST:
    case MC_OP_BATCH_EXIST_KEY:
    case MC_OP_BATCH_PUT_START:
      if (op == MC_OP_BATCH_GET_REPLICA_LIST) mc_w_u64(reply, 1000);
      mc_w_u32(reply, 1); /* one entry, whatever was asked */
      mc_w_i32(reply, 0);
      break;
    case MC_OP_PUT_START: { /* a replica on a segment nobody knows */
      struct mc_replica_rec r = {2, 16, 4096, "nowhere:1", "nowhere:1", "tcp", "", ""};
      mc_w_u32(reply, 1);
      mc_put_replica(reply, &r);
      break;
    }
    case MC_OP_REMOVE_ALL:
      mc_w_i64(reply, -5); /* a negative count */
      break;
    default:
      break; /* empty body */
  }
}

static int fake_handler(void *ctx, void **conn_ctx, const char *tenant, uint16_t op, const uint8_t *body, size_t len,
                        struct mc_wbuf *reply) {
  if (op < 64) atomic_fetch_add(&op_count[op], 1);
  switch (op) {
    case MC_OP_SERVICE_READY:
      mc_w_str(reply, fake_version);
      return 0;
    case MC_OP_PING:
      mc_w_u64(reply, 1);
      mc_w_u8(reply, MC_PING_OK);
      return 0;
    case MC_OP_MOUNT_SEGMENT: {
      struct mc_rbuf_rd r;
      mc_r_init(&r, body, len);
      pthread_mutex_lock(&own_mu);
      mc_segment_rec_free(&own_seg);
      mc_get_segment(&r, &own_seg);
      pthread_mutex_unlock(&own_mu);
      return 0;
    }
    case MC_OP_UNMOUNT_SEGMENT:
    case MC_OP_REMOUNT_SEGMENTS:
      return 0;
    case MC_OP_PUT_REVOKE:
      return 0;
    default:
      if (!atomic_load(&fake_garbage)) return MC_NOT_SUPPORTED;
      garbage_reply(op, reply);
      return 0;
  }
}

struct fake {
  struct mc_mrpc_server *srv;
  uint16_t port;
  struct mc_meta_server *meta;
  char master[64], metadata[128];
};

static int fake_start(struct fake *f) {
  memset(f, 0, sizeof(*f));
  for (int i = 0; i < 64; i++) atomic_store(&op_count[i], 0);
  f->srv = mc_mrpc_server_start("127.0.0.1", 0, fake_handler, NULL, NULL, &f->port);
  f->meta = mc_meta_server_start("127.0.0.1", 0, NULL);
  if (!f->srv || !f->meta) return -1;
  snprintf(f->master, sizeof(f->master), "127.0.0.1:%u", f->port);
  snprintf(f->metadata, sizeof(f->metadata), "http://127.0.0.1:%u/metadata", mc_meta_server_port(f->meta));
  return 0;
}

static void fake_stop(struct fake *f) {
  mc_mrpc_server_stop(f->srv);
  mc_meta_server_stop(f->meta);
}

/* ------------------------------------------------------------ staging allocator */

static void test_stage_allocator(void) {
  static char buf[4096] __attribute__((aligned(64)));
  struct mc_stage *st = mc_stage_new(buf, sizeof(buf));
  CHECK_EQ(mc_stage_capacity(st), 4096);
  CHECK(mc_stage_alloc(st, 0, 0) == NULL);
  CHECK(mc_stage_alloc(st, 4097, 0) == NULL);
  char *a = mc_stage_alloc(st, 1000, 0), *b = mc_stage_alloc(st, 1000, 0), *c = mc_stage_alloc(st, 2000, 0);
  CHECK(a == buf);
  CHECK(b == buf + 1024); /* 64-byte rounding */
  CHECK(c == buf + 2048);
  CHECK(mc_stage_alloc(st, 64, 0) == NULL); /* full */
  mc_stage_release(st, b, 1000);
  CHECK(mc_stage_alloc(st, 1025, 0) == NULL); /* the hole is 1024 */
  char *d = mc_stage_alloc(st, 1024, 0);
  CHECK(d == b);
  mc_stage_release(st, a, 1000);
  mc_stage_release(st, d, 1024);
  mc_stage_release(st, c, 2000);
  char *all = mc_stage_alloc(st, 4096, 0); /* everything coalesced again */
  CHECK(all == buf);
  mc_stage_release(st, all, 4096);
  mc_stage_free(st);
}

struct waiter {
  struct mc_stage *st;
  char *got;
};

static void *wait_alloc(void *arg) {
  struct waiter *w = arg;
  w->got = mc_stage_alloc(w->st, 4096, 5000);
  return NULL;
}

static void test_stage_waits_for_release(void) {
  static char buf[4096] __attribute__((aligned(64)));
  struct mc_stage *st = mc_stage_new(buf, sizeof(buf));
  char *a = mc_stage_alloc(st, 100, 0);
  struct waiter w = {st, NULL};
  pthread_t t;
  pthread_create(&t, NULL, wait_alloc, &w);
  mc_tp_sleep_ms(100);
  long t0 = mc_tp_now_ms();
  mc_stage_release(st, a, 100);
  pthread_join(t, NULL);
  CHECK(w.got == buf);
  CHECK(mc_tp_now_ms() - t0 < 1000);
  long t1 = mc_tp_now_ms();
  CHECK(mc_stage_alloc(st, 64, 200) == NULL); /* bounded wait */
  CHECK(mc_tp_now_ms() - t1 >= 190);
  mc_stage_free(st);
}

/* ------------------------------------------------------------ API rules without setup */

static void test_bad_calls(void) {
  char buf[16];
  const char *keys[2] = {"a", "b"};
  void *bufs[2] = {buf, buf};
  size_t sizes[2] = {1, 1};
  int res[2] = {77, 77};
  int64_t res64[2] = {77, 77};
  CHECK_EQ(mooncake_store_setup(NULL, "h", "P2PHANDSHAKE", 0, 0, "tcp", "", "127.0.0.1:1"), -1);
  CHECK_EQ(mooncake_store_put(NULL, "k", "v", 1, NULL), -1);
  CHECK_EQ(mooncake_store_get_into(NULL, "k", buf, 1), -1);
  CHECK_EQ(mooncake_store_health_check(NULL), -1);
  CHECK_EQ(mooncake_store_get_hostname(NULL, buf, sizeof(buf)), -1);
  CHECK_EQ(mooncake_store_remove_all(NULL, 0), -1);
  mooncake_store_destroy(NULL);
  mooncake_store_t s = mooncake_store_create();
  REQUIRE(s);
  CHECK_EQ(mooncake_store_put(s, NULL, "v", 1, NULL), -1);
  CHECK_EQ(mooncake_store_put(s, "k", NULL, 1, NULL), -1);
  CHECK_EQ(mooncake_store_put_from(s, "k", NULL, 1, NULL), -1);
  CHECK_EQ(mooncake_store_get_into(s, NULL, buf, 1), -1);
  CHECK_EQ(mooncake_store_get_into(s, "k", NULL, 1), -1);
  CHECK_EQ(mooncake_store_is_exist(s, NULL), -1);
  CHECK_EQ(mooncake_store_get_size(s, NULL), -1);
  CHECK_EQ(mooncake_store_remove(s, NULL, 0), -1);
  CHECK_EQ(mooncake_store_remove_by_regex(s, NULL, 0), -1);
  CHECK_EQ(mooncake_store_register_buffer(s, NULL, 10), -1);
  CHECK_EQ(mooncake_store_register_buffer(s, buf, 0), -1);
  CHECK_EQ(mooncake_store_unregister_buffer(s, NULL), -1);
  CHECK_EQ(mooncake_store_get_hostname(s, NULL, 10), -1);
  CHECK_EQ(mooncake_store_get_hostname(s, buf, 0), -1);
  /* batch no-touch rules */
  const char *nullkey[2] = {"a", NULL};
  void *nullbuf[2] = {buf, NULL};
  CHECK_EQ(mooncake_store_batch_put_from(s, NULL, bufs, sizes, 2, NULL, res), -1);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, NULL, sizes, 2, NULL, res), -1);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, NULL, 2, NULL, res), -1);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, NULL), -1);
  CHECK_EQ(mooncake_store_batch_put_from(s, nullkey, bufs, sizes, 2, NULL, res), -1);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, nullbuf, sizes, 2, NULL, res), -1);
  CHECK_EQ(mooncake_store_batch_get_into(s, nullkey, bufs, sizes, 2, res64), -1);
  CHECK_EQ(mooncake_store_batch_get_into(s, keys, nullbuf, sizes, 2, res64), -1);
  CHECK_EQ(mooncake_store_batch_is_exist(s, nullkey, 2, res), -1);
  CHECK_EQ(mooncake_store_batch_is_exist(s, keys, 2, NULL), -1);
  CHECK(res[0] == 77 && res[1] == 77 && res64[0] == 77 && res64[1] == 77); /* untouched */
  /* NULL buffer with size 0 is allowed */
  size_t zero[2] = {0, 1};
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, nullbuf, zero, 1, NULL, res), 0);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, 0, NULL, res), 0);
  CHECK(res[1] == 77);
  mooncake_store_destroy(s);
}

static void test_not_initialized(void) {
  mooncake_store_t s = mooncake_store_create();
  REQUIRE(s);
  char buf[64] = "junk";
  const char *keys[2] = {"a", "b"};
  void *bufs[2] = {buf, buf};
  size_t sizes[2] = {4, 4};
  int res[2] = {0, 0};
  int64_t res64[2] = {0, 0};
  CHECK_EQ(mooncake_store_health_check(s), 1);
  CHECK_EQ(mooncake_store_get_hostname(s, buf, sizeof(buf)), 0);
  CHECK_STR(buf, "");
  CHECK_EQ(mooncake_store_put(s, "k", "v", 1, NULL), -600);
  CHECK_EQ(mooncake_store_put_from(s, "k", buf, 1, NULL), -600);
  CHECK_EQ(mooncake_store_get_into(s, "k", buf, sizeof(buf)), -600);
  CHECK_EQ(mooncake_store_get_size(s, "k"), -600);
  CHECK_EQ(mooncake_store_is_exist(s, "k"), -600);
  CHECK_EQ(mooncake_store_remove(s, "k", 1), -600);
  CHECK_EQ(mooncake_store_remove_by_regex(s, ".*", 1), -600);
  CHECK_EQ(mooncake_store_remove_all(s, 1), -600);
  CHECK_EQ(mooncake_store_register_buffer(s, buf, sizeof(buf)), -600);
  CHECK_EQ(mooncake_store_unregister_buffer(s, buf), -600);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, res), 0);
  CHECK(res[0] == -600 && res[1] == -600);
  CHECK_EQ(mooncake_store_batch_get_into(s, keys, bufs, sizes, 2, res64), 0);
  CHECK(res64[0] == -600 && res64[1] == -600);
  res[0] = res[1] = 0;
  CHECK_EQ(mooncake_store_batch_is_exist(s, keys, 2, res), 0);
  CHECK(res[0] == -600 && res[1] == -600);
  void *v = (void *)1;
  CHECK_EQ(mc_store_get(s, "k", &v), -600);
  CHECK(v == NULL);
  mooncake_store_destroy(s);
}

/* ------------------------------------------------------------ setup failures */

static void test_setup_bad_arguments(void) {
  mooncake_store_t s = mooncake_store_create();
  REQUIRE(s);
  CHECK_EQ(mooncake_store_setup(s, NULL, "P2PHANDSHAKE", 0, 0, NULL, NULL, "127.0.0.1:1"), -600);
  CHECK_EQ(mooncake_store_setup(s, "", "P2PHANDSHAKE", 0, 0, NULL, NULL, "127.0.0.1:1"), -600);
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1:99999", "P2PHANDSHAKE", 0, 0, NULL, NULL, "127.0.0.1:1"), -600);
  /* leader discovery: only etcd:// (an etcd that does not answer is ETCD_OPERATION_ERROR) */
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 0, NULL, NULL, "redis://127.0.0.1:6379"), -600);
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 0, NULL, NULL, "etcd://127.0.0.1:1"), -1000);
  CHECK_EQ(mooncake_store_health_check(s), 1); /* a failed setup leaves the handle un-setup */
  mooncake_store_destroy(s);
}

static void test_setup_huge_segment(void) {
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 1ull << 60, 1 << 20, "tcp", "", "127.0.0.1:1"), -600);
  CHECK(mc_tp_now_ms() - t0 < 1000);
  mooncake_store_destroy(s);
}

static void test_setup_master_closed_port(void) {
  char master[64];
  snprintf(master, sizeof(master), "127.0.0.1:%d", mc_tp_free_port());
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master), -900);
  long dt = mc_tp_now_ms() - t0;
  fprintf(stderr, "  closed master port: -900 after %ld ms\n", dt);
  CHECK(dt < 2000);
  CHECK_EQ(mooncake_store_health_check(s), 1);
  mooncake_store_destroy(s);
}

static void test_setup_master_silent(void) {
  int port = 0, fd = mc_tp_silent_listener(&port);
  REQUIRE(fd >= 0);
  char master[64];
  snprintf(master, sizeof(master), "127.0.0.1:%d", port);
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master), -901);
  long dt = mc_tp_now_ms() - t0;
  fprintf(stderr, "  silent master: -901 after %ld ms\n", dt);
  CHECK(dt <= 10000);
  mooncake_store_destroy(s);
  close(fd);
}

static void test_setup_metadata_unreachable(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  char meta[128];
  snprintf(meta, sizeof(meta), "http://127.0.0.1:%d/metadata", mc_tp_free_port());
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", meta, 1 << 20, 1 << 20, "tcp", "", f.master), -1000);
  long dt = mc_tp_now_ms() - t0;
  fprintf(stderr, "  metadata closed port: -1000 after %ld ms\n", dt);
  CHECK(dt < 5000);
  /* a metadata service that accepts and never answers */
  int port = 0, fd = mc_tp_silent_listener(&port);
  snprintf(meta, sizeof(meta), "http://127.0.0.1:%d/metadata", port);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", meta, 1 << 20, 1 << 20, "tcp", "", f.master), -1000);
  dt = mc_tp_now_ms() - t0;
  fprintf(stderr, "  metadata silent: -1000 after %ld ms\n", dt);
  CHECK(dt <= 10000);
  close(fd);
  CHECK_EQ(atomic_load(&op_count[MC_OP_MOUNT_SEGMENT]), 0);
  mooncake_store_destroy(s);
  fake_stop(&f);
}

static void test_setup_version_mismatch(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  fake_version = "mooncake-c 0.0.0-other";
  mooncake_store_t s = mooncake_store_create();
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", f.metadata, 0, 0, "tcp", "", f.master), -300);
  fake_version = MC_STORE_VERSION;
  mooncake_store_destroy(s);
  fake_stop(&f);
}

/* ------------------------------------------------------------ a successful setup against the stand-in */

static int port_is_bound(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int bound = bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0;
  close(fd);
  return bound;
}

static void test_setup_auto_port_mount_teardown(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", f.metadata, 16 << 20, 4 << 20, "tcp", "", f.master) == 0);
  fprintf(stderr, "  setup: %ld ms\n", mc_tp_now_ms() - t0);
  char name[64], small[4];
  CHECK_EQ(mooncake_store_get_hostname(s, name, sizeof(name)), 0);
  int port = 0;
  CHECK(sscanf(name, "127.0.0.1:%d", &port) == 1);
  CHECK(port >= 12300 && port <= 14300);
  CHECK(port_is_bound(port));
  CHECK_EQ(mooncake_store_get_hostname(s, small, sizeof(small)), -1);
  CHECK_EQ(mooncake_store_get_hostname(s, name, strlen(name)), -1); /* no room for the NUL */
  CHECK_EQ(mooncake_store_health_check(s), 0);
  CHECK_EQ(atomic_load(&op_count[MC_OP_MOUNT_SEGMENT]), 1);
  mc_tp_sleep_ms(2300); /* the ping thread runs every second */
  CHECK(atomic_load(&op_count[MC_OP_PING]) >= 1);
  /* init_all on a set-up handle is refused */
  CHECK_EQ(mooncake_store_init_all(s, "tcp", "", 1 << 20), -600);
  /* register/unregister rules */
  static char region[8192];
  CHECK_EQ(mooncake_store_register_buffer(s, region, 4096), 0);
  CHECK_EQ(mooncake_store_register_buffer(s, region, 4096), -600);       /* same range twice */
  CHECK_EQ(mooncake_store_register_buffer(s, region + 100, 100), -600);  /* overlap */
  CHECK_EQ(mooncake_store_register_buffer(s, region + 4096, 4096), 0);   /* adjacent */
  CHECK_EQ(mooncake_store_unregister_buffer(s, region + 1), -600);       /* not a start */
  CHECK_EQ(mooncake_store_unregister_buffer(s, region), 0);
  CHECK_EQ(mooncake_store_unregister_buffer(s, region), -600);
  CHECK_EQ(mooncake_store_unregister_buffer(s, region + 4096), 0);
  /* bad config values are refused before anything reaches the master */
  mooncake_replicate_config_t zero = {0};
  CHECK_EQ(mooncake_store_put(s, "k", "v", 1, &zero), -600);
  CHECK_EQ(mooncake_store_put(s, "", "v", 1, NULL), -600);
  CHECK_EQ(mooncake_store_put_from(s, "k", region, 0, NULL), 0);
  CHECK_EQ(mooncake_store_put(s, "k", region, (4 << 20) + 1, NULL), -600); /* larger than staging */
  CHECK_EQ(atomic_load(&op_count[MC_OP_PUT_START]), 0);
  mooncake_store_destroy(s);
  CHECK_EQ(atomic_load(&op_count[MC_OP_UNMOUNT_SEGMENT]), 1);
  CHECK(!port_is_bound(port)); /* released */
  /* a pure client mounts nothing and never pings */
  int pings = atomic_load(&op_count[MC_OP_PING]);
  s = mooncake_store_create();
  REQUIRE(mooncake_store_setup(s, "127.0.0.1:12299", f.metadata, 0, 0, "tcp", "", f.master) == 0);
  CHECK_EQ(mooncake_store_get_hostname(s, name, sizeof(name)), 0);
  CHECK_STR(name, "127.0.0.1:12299");
  mc_tp_sleep_ms(1500);
  CHECK_EQ(atomic_load(&op_count[MC_OP_PING]), pings);
  CHECK_EQ(atomic_load(&op_count[MC_OP_MOUNT_SEGMENT]), 1);
  CHECK_EQ(mooncake_store_put(s, "k", "v", 1, NULL), -600); /* no staging buffer */
  /* setup again on a ready handle tears the old client down first */
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", f.metadata, 1 << 20, 0, "tcp", "", f.master) == 0);
  CHECK_EQ(atomic_load(&op_count[MC_OP_MOUNT_SEGMENT]), 2);
  mooncake_store_destroy(s);
  fake_stop(&f);
}

static void test_setup_large_segment_is_lazy(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  mooncake_store_t s = mooncake_store_create();
  long t0 = mc_tp_now_ms();
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", f.metadata, 16ull << 20, 16 << 20, "tcp", "", f.master) == 0);
  long small = mc_tp_now_ms() - t0;
  mooncake_store_destroy(s);
  FILE *mi = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long avail_kb = 0;
  while (mi && fgets(line, sizeof(line), mi)) sscanf(line, "MemAvailable: %llu kB", &avail_kb);
  if (mi) fclose(mi);
  s = mooncake_store_create();
  t0 = mc_tp_now_ms();
  int rc = mooncake_store_setup(s, "127.0.0.1", f.metadata, 16ull << 30, 16 << 20, "tcp", "", f.master);
  long big = mc_tp_now_ms() - t0;
  if (avail_kb * 1024 > (16ull << 30) + (64ull << 20)) {
    CHECK_EQ(rc, 0);
    fprintf(stderr, "  setup 16 MiB: %ld ms, 16 GiB: %ld ms\n", small, big);
    CHECK(big < small + 1000);
  } else if (avail_kb * 1024 < (16ull << 30)) {
    fprintf(stderr, "  only %llu kB available: 16 GiB must be refused\n", avail_kb);
    CHECK_EQ(rc, -600);
  }
  mooncake_store_destroy(s);
  fake_stop(&f);
}

/* Replies that do not decode are RPC_FAIL, never a crash or an over-read (run under ASan). */
static void test_malformed_master_replies(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  mooncake_store_t s = mooncake_store_create();
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", f.metadata, 1 << 20, 1 << 20, "tcp", "", f.master) == 0);
  atomic_store(&fake_garbage, 1);
  char buf[64];
  const char *keys[2] = {"a", "b"};
  void *bufs[2] = {buf, buf + 32};
  size_t sizes[2] = {32, 32};
  int res[2];
  int64_t res64[2];
  CHECK_EQ(mooncake_store_get_into(s, "k", buf, sizeof(buf)), -900);
  CHECK_EQ(mooncake_store_get_size(s, "k"), -900);
  CHECK_EQ(mooncake_store_is_exist(s, "k"), -900);
  CHECK_EQ(mooncake_store_remove_all(s, 1), -900);
  CHECK_EQ(mooncake_store_remove_by_regex(s, "x", 1), -900);
  CHECK_EQ(mooncake_store_put(s, "k", "0123456789abcdef", 16, NULL), -800); /* unknown segment: revoked */
  CHECK_EQ(mooncake_store_batch_is_exist(s, keys, 2, res), 0);
  CHECK(res[0] == -900 && res[1] == -900);
  CHECK_EQ(mooncake_store_batch_get_into(s, keys, bufs, sizes, 2, res64), 0);
  CHECK(res64[0] == -900 && res64[1] == -900);
  CHECK_EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, res), 0);
  CHECK(res[0] == -900 && res[1] == -900);
  atomic_store(&fake_garbage, 2);
  for (int i = 0; i < 300; i++) { /* random bytes: any negative code, never a crash */
    CHECK(mooncake_store_get_into(s, "k", buf, sizeof(buf)) < 0);
    CHECK(mooncake_store_is_exist(s, "k") <= 1);
    mooncake_store_batch_get_into(s, keys, bufs, sizes, 2, res64);
    CHECK(res64[0] < 0 && res64[1] < 0);
    mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, res);
    mooncake_store_batch_is_exist(s, keys, 2, res);
    mooncake_store_remove_all(s, 1);
  }
  atomic_store(&fake_garbage, 0);
  mooncake_store_destroy(s);
  fake_stop(&f);
}

/* The rule for starting a write into a write extent (write_extents.c "Safety"): the lease bound with its margin,
 * the liveness bound for extents of clients with a segment, and the 500 ms contact bound. */
static void test_fastput_start_rule(void) {
  const uint64_t S = 1000000000ull, t0 = 1000 * S;
  /* lease-only extent (a pure client): lease 10 s, margin 2.5 s, reserve sent at t0 */
  CHECK_EQ(mc_fastput_may_start(t0 + S / 4, t0 + 10 * S, 10 * S, 0, 10 * S / 4, 0), 1);
  CHECK_EQ(mc_fastput_may_start(t0 + S / 2, t0 + 10 * S, 10 * S, 0, 10 * S / 4, 0), 0); /* no contact for 500 ms */
  CHECK_EQ(mc_fastput_may_start(t0 + S / 2 - 1, t0 + 10 * S, 10 * S, 0, 10 * S / 4, 0), 1);
  /* short lease 600 ms, margin 150 ms: the margin ends it before the contact bound does */
  CHECK_EQ(mc_fastput_may_start(t0 + 4 * S / 10, t0 + 6 * S / 10, 6 * S / 10, 0, 15 * S / 100, 0), 1);
  CHECK_EQ(mc_fastput_may_start(t0 + 46 * S / 100, t0 + 6 * S / 10, 6 * S / 10, 0, 15 * S / 100, 0), 0);
  /* a later commit (at t0 + 4 s) moved the deadline and the contact on */
  CHECK_EQ(mc_fastput_may_start(t0 + 4 * S + S / 4, t0 + 14 * S, 10 * S, 0, 10 * S / 4, 0), 1);
  /* a client with a segment: liveness ttl 5 s, margin min(lease, ttl) / 4 = 1.25 s */
  const uint64_t ttl = 5 * S, m = 5 * S / 4, dl = t0 + 10 * S;
  CHECK_EQ(mc_fastput_may_start(t0 + S / 4, dl, 10 * S, ttl, m, 0), 0);                   /* never pinged */
  CHECK_EQ(mc_fastput_may_start(t0 + 5 * S / 2, dl, 10 * S, ttl, m, t0 + 9 * S / 4), 1); /* pinged 250 ms ago */
  CHECK_EQ(mc_fastput_may_start(t0 + S / 4, dl, 10 * S, ttl, m, t0 - 4 * S), 0);         /* last ping too old */
  CHECK_EQ(mc_fastput_may_start(t0 + 3 * S, dl, 10 * S, ttl, m, t0 + S), 0);             /* pinged, then silence 2 s */
  CHECK_EQ(mc_fastput_may_start(t0 + 9 * S, dl, 10 * S, ttl, m, t0 + 8 * S + S / 2), 0); /* lease margin */
  CHECK_EQ(mc_fastput_may_start(t0 + 8 * S, dl, 10 * S, ttl, m, t0 + 8 * S - S / 4), 1);
}

/* A witness block is a peer's claim (docs/ha.md, "Witnesses"): one that does not decode is ignored as a
 * whole — it keeps nothing and prunes nothing — and a good one keeps only what is not durable yet. */
static void put_witness_record(struct mc_wbuf *w, uint64_t seq, const char *key) {
  mc_w_u64(w, seq);
  mc_w_u8(w, MC_HIDX_PUT);
  mc_w_str(w, key);
  mc_put_uuid(w, (struct mc_uuid){1, 2});
  mc_w_u64(w, 0), mc_w_u64(w, 64), mc_w_u64(w, 64), mc_w_u8(w, 0), mc_w_u64(w, 0);
}

static size_t take(struct mc_witnesses *w, const struct mc_wbuf *b) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, b->p, b->len);
  mc_witness_take(w, &r);
  return mc_witness_count(w);
}

static void test_witness_block_lies(void) {
  struct mc_witnesses *w = mc_witness_new();
  struct mc_wbuf b = {0};
  mc_w_u64(&b, 7), mc_w_u64(&b, 0), mc_w_u32(&b, 2); /* view 7, durable 0, two records */
  put_witness_record(&b, 5, "a");
  put_witness_record(&b, 6, "b");
  CHECK_EQ(take(w, &b), 2);
  b.len = 0; /* claims 1000 records, sends none */
  mc_w_u64(&b, 7), mc_w_u64(&b, 99), mc_w_u32(&b, 1000);
  CHECK_EQ(take(w, &b), 2); /* nothing pruned by its durable_seq either */
  b.len = 0; /* a good record, then one whose key claims a gigabyte */
  mc_w_u64(&b, 7), mc_w_u64(&b, 99), mc_w_u32(&b, 2);
  put_witness_record(&b, 8, "c");
  mc_w_u64(&b, 9), mc_w_u8(&b, MC_HIDX_PUT), mc_w_u32(&b, 1u << 30);
  CHECK_EQ(take(w, &b), 2);
  b.len = 0; /* truncated in its header */
  mc_w_u64(&b, 7), mc_w_u32(&b, 0);
  CHECK_EQ(take(w, &b), 2);
  b.len = 0; /* honest: durable 5 prunes a, a new record 9 is kept */
  mc_w_u64(&b, 7), mc_w_u64(&b, 5), mc_w_u32(&b, 1);
  put_witness_record(&b, 9, "d");
  CHECK_EQ(take(w, &b), 2); /* b (6) and d (9) */
  b.len = 0; /* another master's durable_seq prunes none of master 7's */
  mc_w_u64(&b, 8), mc_w_u64(&b, 100), mc_w_u32(&b, 0);
  CHECK_EQ(take(w, &b), 2);
  mc_w_free(&b);
  mc_witness_free(w);
}

/* Witnesses kept per reply block: a block is pruned whole once durable_seq passes its newest record, one
 * partly durable keeps the rest, and past 65 536 records the oldest are given up. */
static void test_witness_blocks(void) {
  struct mc_witnesses *w = mc_witness_new();
  struct mc_wbuf b = {0};
  uint64_t seq = 1;
  for (int blk = 0; blk < 70; blk++) { /* 70 replies of 1000 records, nothing durable */
    b.len = 0;
    mc_w_u64(&b, 3), mc_w_u64(&b, 0), mc_w_u32(&b, 1000);
    for (int i = 0; i < 1000; i++) put_witness_record(&b, seq++, "k");
    take(w, &b);
  }
  CHECK_EQ(mc_witness_count(w), 65536u);
  CHECK_EQ(mc_witness_given_up(w), 70000u - 65536u);
  b.len = 0; /* durable up to the middle of the 60th block: 59 500 records go, whole blocks and half a one */
  mc_w_u64(&b, 3), mc_w_u64(&b, 59500), mc_w_u32(&b, 0);
  CHECK_EQ(take(w, &b), 70000u - 59500u);
  b.len = 0; /* another master's durable_seq prunes none of master 3's */
  mc_w_u64(&b, 4), mc_w_u64(&b, 1u << 30), mc_w_u32(&b, 0);
  CHECK_EQ(take(w, &b), 70000u - 59500u);
  b.len = 0;
  mc_w_u64(&b, 3), mc_w_u64(&b, 70000), mc_w_u32(&b, 0);
  CHECK_EQ(take(w, &b), 0u);
  mc_w_free(&b);
  mc_witness_free(w);
}

/* Replica addresses come off the wire: one that claims to be in this client's own segment (read by
 * memcpy) but lies partly or wholly outside it must fail the read (-800), never copy from outside. */
static void test_own_segment_replica_out_of_bounds(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  mooncake_store_t s = mooncake_store_create();
  const uint64_t gss = 1 << 20;
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", f.metadata, gss, 1 << 20, "tcp", "", f.master) == 0);
  pthread_mutex_lock(&own_mu);
  int mounted = own_seg.te_endpoint && own_seg.size == gss;
  pthread_mutex_unlock(&own_mu);
  REQUIRE(mounted);
  char *buf = malloc(64 * 1024);
  struct {
    uint64_t off, size;
    int64_t want;
  } cases[] = {
      {0, 4096, 4096},                       /* inside: read (zeros, never written) */
      {gss - 4096, 4096, 4096},              /* the last bytes exactly */
      {gss - 100, 4096, -800},               /* runs past the end */
      {gss, 16, -800},                       /* starts at the end */
      {(uint64_t)-4096, 4096, -800},         /* before the base */
      {(uint64_t)-100, 4096, -800},          /* straddles the base */
      {gss - 8, UINT64_MAX / 2, -600},       /* huge: larger than the buffer, refused before any copy */
  };
  atomic_store(&fake_garbage, 3);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    pthread_mutex_lock(&own_mu);
    fake_own_off = cases[i].off;
    fake_own_size = cases[i].size;
    pthread_mutex_unlock(&own_mu);
    int64_t got = mooncake_store_get_into(s, "k", buf, 64 * 1024);
    if (got != cases[i].want) fprintf(stderr, "  case %zu: off %llu size %llu\n", i,
                                      (unsigned long long)cases[i].off, (unsigned long long)cases[i].size);
    CHECK_EQ(got, cases[i].want);
  }
  atomic_store(&fake_garbage, 0);
  free(buf);
  mooncake_store_destroy(s);
  fake_stop(&f);
}

/* ------------------------------------------------------------ teardown on exit and on signals */

static int child_main(const char *how, const char *master, const char *meta) {
  mooncake_store_t s = mooncake_store_create();
  if (mooncake_store_setup(s, "127.0.0.1", meta, 1 << 20, 1 << 20, "tcp", "", master)) return 3;
  printf("READY\n");
  fflush(stdout);
  if (!strcmp(how, "exit")) exit(0); /* no destroy: the atexit hook must tear down */
  raise(SIGTERM);
  mc_tp_sleep_ms(5000);
  return 4; /* not reached */
}

static int run_child(const char *how, struct fake *f, int *status) {
  int p[2];
  if (pipe(p)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    execl("/proc/self/exe", "test_store_unit", "--child", how, f->master, f->metadata, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[64] = "";
  ssize_t n = read(p[0], buf, sizeof(buf) - 1);
  close(p[0]);
  waitpid(pid, status, 0);
  return n > 0 && !strncmp(buf, "READY", 5) ? 0 : -1;
}

static void test_teardown_at_exit(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  int st = 0;
  CHECK_EQ(run_child("exit", &f, &st), 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(atomic_load(&op_count[MC_OP_MOUNT_SEGMENT]), 1);
  CHECK_EQ(atomic_load(&op_count[MC_OP_UNMOUNT_SEGMENT]), 1);
  fake_stop(&f);
}

static void test_teardown_on_sigterm(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  int st = 0;
  CHECK_EQ(run_child("signal", &f, &st), 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM); /* re-raised with the default action */
  CHECK_EQ(atomic_load(&op_count[MC_OP_UNMOUNT_SEGMENT]), 1);
  fake_stop(&f);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 5 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3], argv[4]);
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_stage_allocator),
      TEST_CASE(test_stage_waits_for_release),
      TEST_CASE(test_bad_calls),
      TEST_CASE(test_not_initialized),
      TEST_CASE(test_setup_bad_arguments),
      TEST_CASE(test_setup_huge_segment),
      TEST_CASE(test_setup_master_closed_port),
      TEST_CASE(test_setup_master_silent),
      TEST_CASE(test_setup_metadata_unreachable),
      TEST_CASE(test_setup_version_mismatch),
      TEST_CASE(test_setup_auto_port_mount_teardown),
      TEST_CASE(test_setup_large_segment_is_lazy),
      TEST_CASE(test_malformed_master_replies),
      TEST_CASE(test_own_segment_replica_out_of_bounds),
      TEST_CASE(test_fastput_start_rule), TEST_CASE(test_witness_block_lies), TEST_CASE(test_witness_blocks),
      TEST_CASE(test_teardown_at_exit),
      TEST_CASE(test_teardown_on_sigterm),
  };
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
