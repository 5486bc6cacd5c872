/* Unit tests for the shared layer: error tables, size parsing, the configuration table, host:port
 * parsing, the RPC port-range rule and control-RPC frame decoding. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/hostport.h"
#include "common/log.h"
#include "common/util.h"
#include "lib/test.h"
#include "net/sock.h"
#include "mooncake/store_errors.h"
#include "mooncake/transfer_engine.h"
#include "net/conn_server.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"

static void test_error_tables(void) {
  CHECK_EQ(MC_NO_AVAILABLE_HANDLE, -200);
  CHECK_EQ(MC_OBJECT_NOT_FOUND, -704);
  CHECK_EQ(MC_UNAVAILABLE_IN_CURRENT_STATUS, -1010);
  CHECK_STR(mooncake_store_err_name(-704), "OBJECT_NOT_FOUND");
  CHECK_STR(mooncake_store_err_name(-713), "REPLICA_NOT_IN_LOCAL_MEMORY");
  CHECK_STR(mooncake_store_err_name(-12345), "UNKNOWN_ERROR");
  CHECK_STR(mooncake_store_strerror(-200), "No space");
  CHECK_EQ(ERR_NOT_IMPLEMENTED, -303);
  CHECK_EQ(MC_TE_STATUS_NOT_IMPLEMENTED, 999);
  CHECK_EQ(MC_TE_STATUS_ADDRESS_OVERLAPPED, 7);
  CHECK_STR(mc_te_err_name(-200), "ERR_METADATA"); /* same number as NO_AVAILABLE_HANDLE: separate spaces */
  CHECK_STR(mc_te_status_name(4), "BatchBusy");
  CHECK_STR(mc_te_task_state_name(STATUS_COMPLETED), "COMPLETED");
}

static void test_parse_size(void) {
  uint64_t v;
  CHECK(mc_parse_size("4096", &v) == 0 && v == 4096);
  CHECK(mc_parse_size("64KB", &v) == 0 && v == 65536);
  CHECK(mc_parse_size("64KiB", &v) == 0 && v == 65536);
  CHECK(mc_parse_size("512 MB", &v) == 0 && v == 512ull << 20);
  CHECK(mc_parse_size("8GiB", &v) == 0 && v == 8ull << 30);
  CHECK(mc_parse_size("1.5g", &v) == 0 && v == 3ull << 29);
  CHECK(mc_parse_size("", &v) == -1);
  CHECK(mc_parse_size("-1", &v) == -1);
  CHECK(mc_parse_size("12XB", &v) == -1);
  CHECK(mc_parse_size("99999999999T", &v) == -1);
  CHECK(mc_parse_size("4 KB junk", &v) == -1);
}

struct opts {
  int64_t port;
  int enable;
  double ratio;
  char *name;
  uint64_t size;
};

static const struct mc_cfg_opt tab[] = {
    {"rpc_port", MC_CFG_INT, "50051", 1, 65535, offsetof(struct opts, port), "port"},
    {"enable_x", MC_CFG_BOOL, "false", 0, 0, offsetof(struct opts, enable), "flag"},
    {"ratio", MC_CFG_DOUBLE, "0.9", 0, 1, offsetof(struct opts, ratio), "ratio"},
    {"name", MC_CFG_STRING, "abc", 0, 0, offsetof(struct opts, name), "name"},
    {"size", MC_CFG_SIZE, "1GB", 1, -1, offsetof(struct opts, size), "size"},
    MC_CFG_END,
};

static int parse(struct opts *o, int argc, char **argv) {
  mc_cfg_free(tab, o);
  mc_cfg_defaults(tab, o);
  return mc_cfg_parse_argv(tab, o, argc, argv, NULL, NULL);
}

static void test_config_table(void) {
  struct opts o = {0};
  char *a1[] = {"prog", "--rpc_port=123", "--enable_x", "--ratio", "0.5", "-name=zz", "--size=64KB"};
  CHECK_EQ(parse(&o, 7, a1), 0);
  CHECK_EQ(o.port, 123);
  CHECK_EQ(o.enable, 1);
  CHECK(o.ratio == 0.5);
  CHECK_STR(o.name, "zz");
  CHECK_EQ(o.size, 65536);
  char *a2[] = {"prog", "--enable_x=false", "--noenable_x"};
  CHECK_EQ(parse(&o, 3, a2), 0);
  CHECK_EQ(o.enable, 0);
  CHECK_EQ(o.port, 50051); /* defaults restored */
  CHECK_STR(o.name, "abc");
  char *bad1[] = {"prog", "--unknown=1"};
  CHECK_EQ(parse(&o, 2, bad1), -1);
  char *bad2[] = {"prog", "--rpc_port=70000"};
  CHECK_EQ(parse(&o, 2, bad2), -1);
  char *bad3[] = {"prog", "--ratio=1.5"};
  CHECK_EQ(parse(&o, 2, bad3), -1);
  char *bad4[] = {"prog", "positional"};
  CHECK_EQ(parse(&o, 2, bad4), -1);
  char *v[] = {"prog", "-v2"};
  int saved = mc_log_level_cur;
  CHECK_EQ(parse(&o, 2, v), 0);
  CHECK_EQ(mc_log_level_cur, MC_LOG_DEBUG);
  mc_log_set_level(saved);
  json_t *j = mc_cfg_to_json(tab, &o);
  CHECK_EQ(json_integer_value(json_object_get(j, "rpc_port")), 50051);
  CHECK_STR(json_string_value(json_object_get(j, "name")), "abc");
  json_decref(j);
  /* config file: keys as flags; command line overrides */
  char path[] = "/tmp/mc_cfg_XXXXXX";
  int fd = mkstemp(path);
  const char *body = "{\"rpc_port\": 777, \"enable_x\": true, \"name\": \"file\"}";
  CHECK_EQ(write(fd, body, strlen(body)), (long)strlen(body));
  close(fd);
  char cp[64];
  snprintf(cp, sizeof(cp), "--config_path=%s", path);
  char *a3[] = {"prog", cp, "--name=cli"};
  CHECK_EQ(parse(&o, 3, a3), 0);
  CHECK_EQ(o.port, 777);
  CHECK_EQ(o.enable, 1);
  CHECK_STR(o.name, "cli");
  unlink(path);
  mc_cfg_free(tab, &o);
}

static void test_host_port(void) {
  char h[64];
  uint16_t p;
  CHECK(mc_split_host_port("10.0.0.1:123", h, sizeof(h), &p, 1) == 0 && !strcmp(h, "10.0.0.1") && p == 123);
  CHECK(mc_split_host_port("node7", h, sizeof(h), &p, 12001) == 0 && !strcmp(h, "node7") && p == 12001);
  CHECK(mc_split_host_port("[fe80::1]:99", h, sizeof(h), &p, 1) == 0 && !strcmp(h, "fe80::1") && p == 99);
  CHECK(mc_split_host_port("fe80::1", h, sizeof(h), &p, 5) == 0 && !strcmp(h, "fe80::1") && p == 5);
  CHECK(mc_split_host_port("h:0", h, sizeof(h), &p, 1) == -1);
  CHECK(mc_split_host_port("h:65536", h, sizeof(h), &p, 1) == -1);
  CHECK(mc_split_host_port(":80", h, sizeof(h), &p, 1) == -1);
  CHECK(mc_split_host_port("", h, sizeof(h), &p, 1) == -1);
  CHECK(mc_split_host_port(NULL, h, sizeof(h), &p, 1) == -1);
  /* hostnames, IPv6 in brackets with and without a port */
  CHECK(mc_split_host_port("etcd-0.example.com:2379", h, sizeof(h), &p, 1) == 0 && !strcmp(h, "etcd-0.example.com") &&
        p == 2379);
  CHECK(mc_split_host_port("[::1]", h, sizeof(h), &p, 7) == 0 && !strcmp(h, "::1") && p == 7);
  CHECK(mc_split_host_port("[::ffff:10.0.0.1]:65535", h, sizeof(h), &p, 1) == 0 && !strcmp(h, "::ffff:10.0.0.1") &&
        p == 65535);
  CHECK(mc_split_host_port("h:1", h, sizeof(h), &p, 9) == 0 && p == 1);
  /* missing, invalid and out-of-range ports; empty hosts; broken brackets; a host that does not fit */
  static const char *bad[] = {"h:", "h:abc", "h:80x", "h:+80", "h:-1", "h: 80", "h:0x50", "h:99999999999999999999",
                              "h:100000", "[]:80", "[]", "[::1", "[::1]x", "[::1]:", "[::1]:0", "[::1]:65536", ":"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    p = 4242;
    strcpy(h, "untouched");
    if (mc_split_host_port(bad[i], h, sizeof(h), &p, 1) != -1) fprintf(stderr, "accepted '%s'\n", bad[i]);
    CHECK(mc_split_host_port(bad[i], h, sizeof(h), &p, 1) == -1);
    CHECK(p == 4242 && !strcmp(h, "untouched")); /* nothing written on failure */
  }
  char small[4];
  CHECK(mc_split_host_port("abcd:1", small, sizeof(small), &p, 1) == -1);
  CHECK(mc_split_host_port("abc:1", small, sizeof(small), &p, 1) == 0 && !strcmp(small, "abc"));
  char out[64];
  mc_join_host_port("::1", 9003, out, sizeof(out));
  CHECK_STR(out, "[::1]:9003");
  mc_join_host_port("node7", 80, out, sizeof(out));
  CHECK_STR(out, "node7:80");
}

static void test_rpc_port_range(void) {
  int lo, hi;
  setenv("MC_MIN_RPC_PORT", "20000", 1);
  setenv("MC_MAX_RPC_PORT", "21000", 1);
  mc_rpc_port_range(&lo, &hi);
  CHECK(lo == 20000 && hi == 21000);
  setenv("MC_MAX_RPC_PORT", "40000", 1); /* overlaps the ephemeral range */
  mc_rpc_port_range(&lo, &hi);
  CHECK(lo == 15000 && hi == 17000);
  setenv("MC_MIN_RPC_PORT", "80", 1);
  setenv("MC_MAX_RPC_PORT", "900", 1);
  mc_rpc_port_range(&lo, &hi);
  CHECK(lo == 15000 && hi == 17000);
  unsetenv("MC_MIN_RPC_PORT");
  unsetenv("MC_MAX_RPC_PORT");
}

static void test_rpc_frame_decode(void) {
  int type, legacy;
  uint64_t len;
  uint8_t ok[9] = {5, 0, 0, 0, 0, 0, 0, 0, 1};
  CHECK(mc_rpc_decode_header(ok, 1 << 20, &type, &len, &legacy) == 0 && type == 1 && len == 4 && !legacy);
  uint8_t leg[9] = {3, 0, 0, 0, 0, 0, 0, 0, '{'};
  CHECK(mc_rpc_decode_header(leg, 1 << 20, &type, &len, &legacy) == 0 && type == 0 && len == 3 && legacy);
  uint8_t zero[9] = {0};
  CHECK(mc_rpc_decode_header(zero, 1 << 20, &type, &len, &legacy) != 0);
  uint8_t http[9] = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T'};
  CHECK(mc_rpc_decode_header(http, 1 << 20, &type, &len, &legacy) != 0);
  uint8_t tls[9] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc};
  CHECK(mc_rpc_decode_header(tls, 1 << 20, &type, &len, &legacy) != 0);
  uint8_t b790[9] = {0x16, 0x03, 0, 0, 0, 0, 0, 0, 2}; /* 790 is a valid length */
  CHECK(mc_rpc_decode_header(b790, 1 << 20, &type, &len, &legacy) == 0 && len == 789);
  uint8_t over[9] = {1, 0, 0x10, 0, 0, 0, 0, 0, 1};
  CHECK(mc_rpc_decode_header(over, 1 << 20, &type, &len, &legacy) != 0);
}

static void test_alloc_fault_injection(void) {
  mc_alloc_fail_after(2);
  void *a = mc_try_malloc(10), *b = mc_try_malloc(10), *c = mc_try_malloc(10);
  CHECK(a != NULL);
  CHECK(b == NULL);
  CHECK(c != NULL);
  free(a);
  free(c);
}

static void test_env_knobs(void) {
  setenv("MC_T_X", "42", 1);
  CHECK_EQ(mc_env_long("MC_T_X", 1, 0, 100), 42);
  setenv("MC_T_X", "420", 1);
  CHECK_EQ(mc_env_long("MC_T_X", 1, 0, 100), 1);
  setenv("MC_T_X", "abc", 1);
  CHECK_EQ(mc_env_long("MC_T_X", 7, 0, 100), 7);
  setenv("MC_T_X", "on", 1);
  CHECK_EQ(mc_env_bool("MC_T_X", 0), 1);
  unsetenv("MC_T_X");
  CHECK_EQ(mc_env_bool("MC_T_X", 1), 1);
  CHECK(strlen(mc_host_id()) > 0);
  setenv("MC_LOG_LEVEL", "error", 1);
  CHECK_EQ(mc_log_init_from_env(), MC_LOG_ERROR);
  unsetenv("MC_LOG_LEVEL");
  mc_log_set_level(MC_LOG_WARN);
}

/* The adaptive busy poll (net/sock.h): a poll that runs out makes the next 1, 2, 4, ... waits block at
 * once; data already there is returned at once and changes nothing. (That a poll which gets data resets
 * the backoff depends on timing within the 50 us window and is left to the benchmarks.) */
/* 1 when this wait polled (for the whole window), 0 when it was skipped. Told apart by the skip count
 * the wait started with, not by its duration: a skipped wait descheduled under load can take longer than
 * the window. A poll must still have lasted the window, a skip must have used up one skipped wait. */
static int polls(struct mc_spin *sp, int fd) {
  char b[8];
  unsigned skip = atomic_load(&sp->skip);
  uint64_t t0 = mc_now_ns();
  CHECK_EQ(mc_sock_spin_recv(fd, b, sizeof(b), 0, sp), -EAGAIN);
  if (skip) {
    CHECK_EQ(atomic_load(&sp->skip), skip - 1);
    return 0;
  }
  CHECK(mc_now_ns() - t0 >= mc_spin_ns());
  return 1;
}

static void test_adaptive_spin(void) {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  struct mc_spin sp = {0};
  char b[8];
  CHECK_EQ(polls(&sp, sv[0]), 1);
  CHECK_EQ(polls(&sp, sv[0]), 0); /* backoff 1: one wait skipped */
  CHECK_EQ(polls(&sp, sv[0]), 1);
  CHECK_EQ(polls(&sp, sv[0]), 0); /* backoff 2 */
  CHECK_EQ(polls(&sp, sv[0]), 0);
  CHECK_EQ(polls(&sp, sv[0]), 1);
  CHECK_EQ(atomic_load(&sp.backoff), 4);
  for (int i = 0; i < 4; i++) CHECK_EQ(polls(&sp, sv[0]), 0);
  CHECK_EQ(write(sv[1], "abc", 3), 3);
  CHECK_EQ(mc_sock_spin_recv(sv[0], b, sizeof(b), 0, &sp), 3); /* data already there: no change */
  CHECK_EQ(memcmp(b, "abc", 3), 0);
  CHECK_EQ(atomic_load(&sp.backoff), 4);
  CHECK_EQ(atomic_load(&sp.skip), 0);
  CHECK_EQ(write(sv[1], "defg", 4), 4);
  CHECK_EQ(mc_sock_read_deadline_spin(sv[0], b, 4, 1000, &sp), 0);
  CHECK_EQ(memcmp(b, "defg", 4), 0);
  for (int i = 0; i < 12; i++) polls(&sp, sv[0]);
  CHECK(atomic_load(&sp.backoff) <= 64);
  _Atomic int pending = 0;
  CHECK_EQ(mc_spin_until_zero(&pending, &sp), 1);
  struct mc_spin fresh = {0};
  pending = 1;
  CHECK_EQ(mc_spin_until_zero(&pending, &fresh), 0); /* never reaches 0: runs out, backs off */
  CHECK_EQ(atomic_load(&fresh.skip), 1);
  close(sv[1]);
  CHECK_EQ(mc_sock_spin_recv(sv[0], b, sizeof(b), 0, NULL), -EPIPE);
  close(sv[0]);
}

/* net/conn_server: every connection gets its own thread (two held open at once are both served), a
 * connection beyond max_conns is closed at once, a finished one frees its place, and stop shuts down and
 * joins connections that are still open. */
static atomic_int served, finished;

static void echo_until_eof(void *ctx, int fd) {
  (void)ctx;
  atomic_fetch_add(&served, 1);
  char c;
  while (recv(fd, &c, 1, 0) == 1)
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
  atomic_fetch_add(&finished, 1);
}

static int echo_ok(int fd) {
  char c = 'x', r = 0;
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return send(fd, &c, 1, MSG_NOSIGNAL) == 1 && recv(fd, &r, 1, 0) == 1 && r == 'x';
}

static void test_conn_server(void) {
  int lfd = mc_sock_listen("127.0.0.1", 0, 16);
  REQUIRE(lfd >= 0);
  uint16_t port = mc_sock_local_port(lfd);
  struct mc_conn_server *cs = mc_conn_server_start(lfd, echo_until_eof, NULL, NULL, 2, "test server");
  REQUIRE(cs);
  int a = mc_sock_connect("127.0.0.1", port, 2000), b = mc_sock_connect("127.0.0.1", port, 2000);
  REQUIRE(a >= 0 && b >= 0);
  CHECK(echo_ok(a));
  CHECK(echo_ok(b)); /* both at once */
  int c = mc_sock_connect("127.0.0.1", port, 2000); /* a third: over the cap, closed at once */
  REQUIRE(c >= 0);
  CHECK(!echo_ok(c));
  close(c);
  close(a);
  for (int i = 0; i < 200 && atomic_load(&finished) < 1; i++) usleep(10000);
  CHECK_EQ(atomic_load(&finished), 1);
  int d = mc_sock_connect("127.0.0.1", port, 2000); /* a's place is free again */
  REQUIRE(d >= 0);
  CHECK(echo_ok(d));
  mc_conn_server_stop(cs); /* b and d still open: shut down and joined */
  CHECK_EQ(atomic_load(&served), 3);
  CHECK_EQ(atomic_load(&finished), 3);
  char x;
  CHECK(recv(b, &x, 1, 0) <= 0);
  close(b);
  close(d);
}

TEST_MAIN(TEST_CASE(test_conn_server), TEST_CASE(test_error_tables), TEST_CASE(test_parse_size), TEST_CASE(test_config_table),
          TEST_CASE(test_host_port), TEST_CASE(test_rpc_port_range), TEST_CASE(test_rpc_frame_decode),
          TEST_CASE(test_alloc_fault_injection), TEST_CASE(test_env_knobs),
          TEST_CASE(test_adaptive_spin))
