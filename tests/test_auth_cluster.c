/* A cluster with a secret (docs/security.md), against real processes: a real mooncake_master, engines
 * and store clients in this process and in children. Members holding the secret work as in an open
 * cluster; a process with another secret or none, and a raw socket speaking the protocols without the
 * handshake, get nothing but a refusal. The secret is read once per process: every process of another
 * secret is a forked child that sets its own before it creates anything. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/auth.h"
#include "common/tsan.h"
#include "lib/te_child.h"
#include "test_store_harness.c"
#include "mooncake/transfer_engine.h"
#include "net/sock.h"
#include "te/engine_internal.h"
#include "net/ctrl_rpc.h"
#include "net/mrpc.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"

#define SECRET "auth-cluster-test-secret-0123456789"
#define OTHER "auth-cluster-test-other-secret-9876"

static void use_secret(const char *s) {
  unsetenv("MC_CLUSTER_SECRET_FILE");
  if (s) setenv("MC_CLUSTER_SECRET", s, 1);
  else unsetenv("MC_CLUSTER_SECRET");
  mc_auth_reset();
}

/* Sends n bytes on a fresh connection to port and waits up to 3 s: 1 when the peer closed (or reset)
 * without sending a byte, 0 when something came back, -1 when it could not connect. */
static int closed_without_answer(uint16_t port, const void *bytes, size_t n) {
  int fd = mc_sock_connect("127.0.0.1", port, 2000);
  if (fd < 0) return -1;
  if (mc_sock_write_deadline(fd, bytes, n, 2000)) {
    close(fd);
    return 1;
  }
  char b[64];
  int rc = mc_sock_read_deadline(fd, b, 1, 3000);
  close(fd);
  return rc == -EPIPE || rc == -ECONNRESET ? 1 : 0;
}

/* ------------------------------------------------------------ the transfer engine */

static struct mc_meta_server *g_ms;
static char g_conn[128];

/* The children below are this binary run again (argv[1] names the role), not bare forks: a fork of a
 * process whose engine or client threads run copies the heap's locks in whatever state those threads
 * hold them, and a child that starts threads of its own can hang on one (seen under AddressSanitizer). */
static pid_t self_child(char *const args[]) {
  pid_t pid = fork();
  if (pid) return pid;
  execv("/proc/self/exe", args);
  _exit(127);
}

/* In a child with `secret` (NULL: none): an engine over TCP writes 4 KiB into the parent's buffer at
 * addr of segment "holder". Exit 0 when the write completed, 1 when it failed, 2 when the engine could
 * not even be created (its metadata writes were refused: 401 from the metadata server). */
static pid_t writer_child(const char *secret, uint64_t addr, unsigned char fillc) {
  char a[32], f[8];
  snprintf(a, sizeof(a), "%llu", (unsigned long long)addr);
  snprintf(f, sizeof(f), "%u", fillc);
  return self_child((char *[]){"auth_child", "--writer", g_conn, (char *)(secret ? secret : "-"), a, f, NULL});
}

static void test_engine_ports(void) {
  use_secret(SECRET);
  g_ms = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(g_ms);
  snprintf(g_conn, sizeof(g_conn), "http://127.0.0.1:%u/metadata", mc_meta_server_port(g_ms));
  transfer_engine_t e = createTransferEngine(g_conn, "holder", NULL, 0, 1);
  REQUIRE(e);
  uint8_t *buf = calloc(1, 64 * 1024);
  REQUIRE(registerLocalMemory(e, buf, 64 * 1024, "cpu:0", 1) == 0);
  uint64_t addr = (uint64_t)(uintptr_t)buf;
  /* a member with the secret writes through the data port */
  CHECK_EQ(mc_tp_exit_code_within(writer_child(SECRET, addr, 0x11), 60000), 0);
  MC_TSAN_ACQUIRE(buf); /* the child's write reached us through the network (engine.c, pins) */
  CHECK(buf[0] == 0x11 && buf[4095] == 0x11);
  /* another secret, or none: refused, nothing written */
  memset(buf, 0, 4096);
  MC_TSAN_RELEASE(buf);
  CHECK(mc_tp_exit_code_within(writer_child(OTHER, addr, 0x22), 60000) > 0); /* refused by the metadata server already */
  CHECK(mc_tp_exit_code_within(writer_child(NULL, addr, 0x33), 60000) > 0);
  MC_TSAN_ACQUIRE(buf);
  CHECK(buf[0] == 0 && buf[4095] == 0);
  /* raw bytes without the handshake: a data-port request header, a control RPC metadata request */
  struct mc_desc *d = NULL;
  char *json = mc_engine_describe(e);
  REQUIRE(json && (d = mc_desc_decode(json)));
  uint8_t hdr[24] = {0};
  CHECK_EQ(closed_without_answer(d->tcp_data_port, hdr, sizeof(hdr)), 1);
  uint8_t ctrl[11] = {3, 0, 0, 0, 0, 0, 0, 0, MC_RPC_METADATA, '{', '}'};
  CHECK_EQ(closed_without_answer(d->rpc_port, ctrl, sizeof(ctrl)), 1);
  /* ... while a call with the secret is answered */
  char *reply = NULL;
  CHECK_EQ(mc_rpc_call("127.0.0.1", d->rpc_port, MC_RPC_METADATA, "{}", &reply, 3000), 0);
  CHECK(reply && strstr(reply, "\"holder\""));
  free(reply);
  mc_desc_unref(d);
  free(json);
  destroyTransferEngine(e);
  free(buf);
  mc_meta_server_stop(g_ms);
  g_ms = NULL;
}

/* ------------------------------------------------------------ the master and store clients */

/* In a child with `secret`: a store client against m puts and reads back a key. Exit 0 on success, 1
 * when set-up failed, 3 when a put or get failed. */
static pid_t store_child(struct master *m, const char *secret, const char *key) {
  return self_child((char *[]){"auth_child", "--store", m->addr, m->metadata, (char *)(secret ? secret : "-"),
                               (char *)key, NULL});
}

static int store_child_main(char **argv) {
  struct master m;
  memset(&m, 0, sizeof(m));
  snprintf(m.addr, sizeof(m.addr), "%s", argv[2]);
  snprintf(m.metadata, sizeof(m.metadata), "%s", argv[3]);
  use_secret(strcmp(argv[4], "-") ? argv[4] : NULL);
  const char *key = argv[5];
  mooncake_store_t s = client_new(&m, 0, 16 * MiB); /* no segment: what it puts outlives it */
  if (!s) return 1;
  char v[100], got[100];
  snprintf(v, sizeof(v), "value of %s", key);
  int ok = !mooncake_store_put(s, key, v, strlen(v) + 1, NULL) &&
           mooncake_store_get_into(s, key, got, sizeof(got)) == (int64_t)strlen(v) + 1 && !strcmp(got, v);
  mooncake_store_destroy(s);
  return ok ? 0 : 3;
}

static void test_master_and_clients(void) {
  use_secret(SECRET); /* the master inherits it */
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0);
  mooncake_store_t s = client_new(&m, 32 * MiB, 16 * MiB);
  REQUIRE(s);
  CHECK_EQ(mooncake_store_put(s, "k1", "v1", 3, NULL), 0);
  CHECK_EQ(mc_tp_exit_code_within(store_child(&m, SECRET, "k2"), 60000), 0); /* a member in another process */
  CHECK_EQ(mc_tp_exit_code_within(store_child(&m, OTHER, "k3"), 60000), 1);  /* cannot even set up */
  CHECK_EQ(mc_tp_exit_code_within(store_child(&m, NULL, "k4"), 60000), 1);
  /* a raw ping frame without the handshake gets no answer */
  uint8_t ping[MC_MRPC_HDR];
  mc_mrpc_put_hdr(ping, 2 /* PING */, 1, 0, 0);
  CHECK_EQ(closed_without_answer((uint16_t)m.rpc, ping, sizeof(ping)), 1);
  char got[100] = "";
  CHECK_EQ(mooncake_store_get_into(s, "k2", got, sizeof(got)), (int64_t)sizeof("value of k2"));
  CHECK_STR(got, "value of k2");
  CHECK(mooncake_store_get_into(s, "k3", got, sizeof(got)) < 0); /* nobody without the secret put anything */
  CHECK_EQ(mooncake_store_get_into(s, "k1", got, sizeof(got)), 3);
  CHECK_STR(got, "v1");
  mooncake_store_destroy(s);
  master_stop(&m);
  use_secret(NULL);
}

/* ------------------------------------------------------------ the HTTP servers */

static int http_status(int port, const char *req) {
  char resp[2048];
  return mc_tp_raw_http(port, req, strlen(req), resp, sizeof(resp), 3000) > 0 ? mc_tp_http_status(resp) : -1;
}

/* One raw request with an optional extra header line (may be NULL) and body. */
static int http_req(int port, const char *method, const char *target, const char *extra, const char *body) {
  char req[2048];
  snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%sContent-Length: %zu\r\n"
           "Connection: close\r\n\r\n%s",
           method, target, port, extra ? extra : "", extra ? "\r\n" : "", strlen(body), body);
  return http_status(port, req);
}

static void test_http_servers(void) {
  use_secret(SECRET);
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0);
  /* the embedded metadata server: reads stay open; writes need a signature */
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", NULL, "{\"a\":1}"), 401);
  char auth[MC_AUTH_HTTP_HEADER_MAX], url[256];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata?key=k%%31", m.meta); /* k1, escaped otherwise */
  REQUIRE(mc_auth_http_header_for_url("PUT", url, "{\"a\":1}", 7, auth, sizeof(auth)) == 0);
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", auth, "{\"a\":1}"), 200);
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", auth, "{\"a\":1}"), 401);  /* a replay */
  CHECK_EQ(http_req(m.meta, "GET", "/metadata?key=k1", NULL, ""), 200);
  REQUIRE(mc_auth_http_header_for_url("PUT", url, "{\"a\":1}", 7, auth, sizeof(auth)) == 0);
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k2", auth, "{\"a\":1}"), 401); /* signed for another key */
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", auth, "{\"a\":2}"), 401); /* ... or another body */
  CHECK_EQ(http_req(m.meta, "DELETE", "/metadata?key=k1", NULL, ""), 401);
  /* our own metadata client signs: an engine publishes and removes its keys */
  struct mc_meta *mm = NULL;
  REQUIRE(mc_meta_open(m.metadata, &mm) == 0);
  CHECK_EQ(mc_meta_set(mm, "x/y&z=1", "{\"b\":2}"), 0);
  CHECK_EQ(mc_meta_remove(mm, "x/y&z=1"), 0);
  mc_meta_close(mm);
  /* the admin server: reads open, mutations signed (the CLI signs); a cross-site request never passes */
  CHECK_EQ(http_req(m.metrics, "GET", "/health", NULL, ""), 200);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all", NULL, ""), 401);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/remove_all?force=1", m.metrics);
  REQUIRE(mc_auth_http_header_for_url("POST", url, "", 0, auth, sizeof(auth)) == 0);
  char both[MC_AUTH_HTTP_HEADER_MAX + 64];
  snprintf(both, sizeof(both), "%s\r\nOrigin: http://evil.example", auth);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all?force=1", both, ""), 401);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all?force=1", auth, ""), 200);
  master_stop(&m);

  /* without a secret the servers are open, but a browser's cross-site request still changes nothing */
  use_secret(NULL);
  REQUIRE(master_start(&m, NULL) == 0);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all", "Origin: http://evil.example", ""), 401);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all", "Sec-Fetch-Site: cross-site", ""), 401);
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", "Origin: http://evil.example", "{}"), 401);
  CHECK_EQ(http_req(m.metrics, "POST", "/api/v1/remove_all", NULL, ""), 200);
  CHECK_EQ(http_req(m.meta, "PUT", "/metadata?key=k1", NULL, "{}"), 200);
  master_stop(&m);
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--writer")) {
    snprintf(g_conn, sizeof(g_conn), "%s", argv[2]);
    use_secret(strcmp(argv[3], "-") ? argv[3] : NULL);
    return mt_te_write_4k(g_conn, "writer", "holder", strtoull(argv[4], NULL, 10), (unsigned char)atoi(argv[5]));
  }
  if (argc == 6 && !strcmp(argv[1], "--store")) return store_child_main(argv);
  static const struct mc_test_case cases[] = {TEST_CASE(test_engine_ports), TEST_CASE(test_master_and_clients),
                                              TEST_CASE(test_http_servers)};
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
