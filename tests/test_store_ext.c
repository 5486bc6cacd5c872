/* The native additions the Python package uses (store.h, "additions for the Python package"), against a
 * real mooncake_master: writes with the full replicate config (soft-pin TTL rules, upsert/copy flags),
 * multi-buffer batch writes and reads, replica descriptors, the registered-range query, close-and-setup
 * on one handle, setup reusing a caller's transfer engine (which must survive the teardown),
 * batch_replica_clear (master lease 500 ms), the client HTTP server, layer-wise sessions and grouped batch
 * writes. */
#include <jansson.h>
#include <unistd.h>

#include "test_store_harness.c"
#include "lib/http.h"
#include "mooncake/transfer_engine.h"

static struct master M;

static void test_write_config_rules(void) {
  mooncake_store_t s = client_new(&M, 16 * MiB, 4 * MiB);
  REQUIRE(s);
  mc_replicate_config_t c = {1, MC_SOFT_PIN_KEEP, 60000, 0, NULL, 0};
  CHECK_EQ(mc_store_write(s, "ttl_keep", "v", 1, &c, MC_WRITE_COPY), MC_INVALID_PARAMS);
  c.soft_pin_action = MC_SOFT_PIN_CLEAR;
  CHECK_EQ(mc_store_write(s, "ttl_clear", "v", 1, &c, MC_WRITE_COPY), MC_INVALID_PARAMS);
  c.soft_pin_action = MC_SOFT_PIN_SET;
  CHECK_EQ(mc_store_write(s, "ttl_set", "v", 1, &c, MC_WRITE_COPY), 0);
  c.soft_pin_action = 7;
  CHECK_EQ(mc_store_write(s, "bad_action", "v", 1, &c, MC_WRITE_COPY), MC_INVALID_PARAMS);
  c = (mc_replicate_config_t){0, MC_SOFT_PIN_KEEP, -1, 0, NULL, 0};
  CHECK_EQ(mc_store_write(s, "zero_replicas", "v", 1, &c, 0), MC_INVALID_PARAMS);
  /* zero-copy of nothing stores nothing; copying nothing is an error */
  CHECK_EQ(mc_store_write(s, "empty", "", 0, NULL, 0), 0);
  CHECK_EQ(mc_store_write(s, "empty", "", 0, NULL, MC_WRITE_COPY), MC_INVALID_PARAMS);
  CHECK_EQ(mooncake_store_is_exist(s, "empty"), 0);
  /* upsert flag replaces, plain write keeps */
  CHECK_EQ(mc_store_write(s, "up", "old", 3, NULL, MC_WRITE_COPY), 0);
  CHECK_EQ(mc_store_write(s, "up", "new!", 4, NULL, MC_WRITE_COPY), 0);
  char out[16];
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 3);
  CHECK_EQ(mc_store_write(s, "up", "new!", 4, NULL, MC_WRITE_COPY | MC_WRITE_UPSERT), 0);
  CHECK_EQ(mooncake_store_get_into(s, "up", out, sizeof(out)), 4);
  CHECK(!memcmp(out, "new!", 4));
  const char *keys[] = {"bw1", "bw2"};
  const void *vals[] = {"aa", "bbb"};
  size_t sizes[] = {2, 3};
  int res[2] = {9, 9};
  CHECK_EQ(mc_store_batch_write(s, keys, vals, sizes, 2, NULL, MC_WRITE_COPY, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], 0);
  vals[1] = NULL;
  res[0] = 9;
  CHECK_EQ(mc_store_batch_write(s, keys, vals, sizes, 2, NULL, 0, res), -1);
  CHECK_EQ(res[0], 9); /* untouched */
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
}

static void test_multi_buffers(void) {
  mooncake_store_t s = client_new(&M, 32 * MiB, 2 * MiB);
  REQUIRE(s);
  enum { PARTS = 6, PART = 300 * 1024 }; /* 1.8 MiB per object: larger than the free staging space */
  uint8_t *src = malloc(PARTS * PART), *dst = calloc(PARTS, PART);
  fill(src, PARTS * PART, 3);
  const void *bufs[PARTS + 1];
  void *outs[PARTS + 1];
  size_t sizes[PARTS + 1], nbufs[3] = {PARTS - 1, 1, 1};
  for (int i = 0; i < PARTS; i++) bufs[i] = src + (size_t)i * PART, outs[i] = dst + (size_t)i * PART, sizes[i] = PART;
  bufs[PARTS] = src, outs[PARTS] = dst, sizes[PARTS] = 0; /* third object: a total of 0 bytes */
  const char *keys[] = {"multi_a", "multi_b", "multi_zero"};
  int res[3];
  CHECK_EQ(mc_store_batch_write_multi(s, keys, bufs, sizes, nbufs, 3, NULL, 0, res), 0);
  CHECK_EQ(res[0], 0);
  CHECK_EQ(res[1], 0);
  CHECK_EQ(res[2], MC_INVALID_PARAMS);
  CHECK_EQ(mooncake_store_get_size(s, "multi_a"), (PARTS - 1) * PART);
  int64_t got[3];
  CHECK_EQ(mc_store_batch_get_into_multi(s, keys, outs, sizes, nbufs, 2, got), 0);
  CHECK_EQ(got[0], (PARTS - 1) * PART);
  CHECK_EQ(got[1], PART);
  CHECK(!memcmp(dst, src, PARTS * PART));
  /* scatter over buffers that are together too small */
  size_t small[PARTS - 1] = {PART, PART, PART, PART, PART - 1};
  CHECK_EQ(mc_store_batch_get_into_multi(s, keys, outs, small, nbufs, 1, got), 0);
  CHECK_EQ(got[0], MC_INVALID_PARAMS);
  CHECK_EQ(mc_store_batch_get_into_multi(s, keys, outs, sizes, NULL, 1, got), -1);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  free(src);
  free(dst);
}

static void test_replicas_registrations_close(void) {
  mooncake_store_t s = client_new(&M, 16 * MiB, 4 * MiB);
  REQUIRE(s);
  CHECK_EQ(mooncake_store_put(s, "rd", "abcd", 4, NULL), 0);
  mc_replica_desc_t *d = NULL;
  int n = mc_store_get_replica_desc(s, "rd", &d);
  CHECK_EQ(n, 1);
  if (n == 1) {
    CHECK_EQ(d[0].status, 3);
    CHECK_EQ(d[0].size, 4);
    CHECK(d[0].address != 0 && d[0].endpoint && *d[0].endpoint);
  }
  mc_store_replica_desc_free(d, n);
  CHECK_EQ(mc_store_get_replica_desc(s, "rd_missing", &d), MC_OBJECT_NOT_FOUND);
  CHECK(d == NULL);
  static char buf[8192];
  CHECK_EQ(mc_store_is_registered(s, buf, 10), 0);
  CHECK_EQ(mooncake_store_register_buffer(s, buf, sizeof(buf)), 0);
  CHECK_EQ(mc_store_is_registered(s, buf + 100, 100), 1);
  CHECK_EQ(mc_store_is_registered(s, buf + 8000, 500), 0);
  CHECK_EQ(mc_store_close(s), 0);
  CHECK_EQ(mc_store_close(s), 0);
  CHECK_EQ(mc_store_is_registered(s, buf, 10), 0);
  CHECK_EQ(mooncake_store_health_check(s), 1);
  CHECK_EQ(mc_store_get_replica_desc(s, "rd", &d), MC_INVALID_PARAMS);
  /* the same handle sets up again; the old segment (and "rd" with it) is gone */
  CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", M.metadata, 16 * MiB, 4 * MiB, "tcp", "", M.addr), 0);
  CHECK_EQ(mooncake_store_is_exist(s, "rd"), 0);
  mooncake_store_destroy(s);
}

static void test_setup_with_caller_engine(void) {
  transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 1);
  REQUIRE(e);
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t c = {"127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 4 * MiB, "tcp", "", M.addr, NULL, e};
  CHECK_EQ(mc_store_setup(s, &c), 0);
  static char reg[4096];
  CHECK_EQ(mooncake_store_register_buffer(s, reg, sizeof(reg)), 0);
  CHECK_EQ(mooncake_store_put(s, "eng_k", "via caller engine", 17, NULL), 0);
  mooncake_store_t r = mooncake_store_create(); /* a reader on the same (P2P) metadata */
  CHECK_EQ(mooncake_store_setup(r, "127.0.0.1", "P2PHANDSHAKE", 0, 4 * MiB, "tcp", "", M.addr), 0);
  char out[32] = "";
  CHECK_EQ(mooncake_store_get_into(r, "eng_k", out, sizeof(out)), 17);
  CHECK(!memcmp(out, "via caller engine", 17));
  mooncake_store_destroy(s);
  /* the engine survives the client: its memory registrations are gone, it still works */
  CHECK_EQ(unregisterLocalMemory(e, reg), ERR_ADDRESS_NOT_REGISTERED);
  CHECK_EQ(registerLocalMemory(e, reg, sizeof(reg), "cpu:0", 1), 0);
  CHECK_EQ(unregisterLocalMemory(e, reg), 0);
  mooncake_store_destroy(r);
  destroyTransferEngine(e);
}

static void test_batch_replica_clear(void) {
  mooncake_store_t a = client_new(&M, 16 * MiB, 4 * MiB), b = client_new(&M, 16 * MiB, 4 * MiB);
  REQUIRE(a && b);
  char bname[300], aname[300];
  CHECK_EQ(mooncake_store_get_hostname(b, bname, sizeof(bname)), 0);
  CHECK_EQ(mooncake_store_get_hostname(a, aname, sizeof(aname)), 0);
  const char *pref[] = {bname};
  mooncake_replicate_config_t two = {2, 0, 0, NULL, 0}, on_b = {1, 0, 0, pref, 1};
  CHECK_EQ(mooncake_store_put(a, "c_own", "1111", 4, NULL), 0);
  CHECK_EQ(mooncake_store_put(a, "c_leased", "2222", 4, &on_b), 0);
  CHECK_EQ(mooncake_store_put(a, "c_two", "3333", 4, &two), 0);
  CHECK_EQ(mooncake_store_put(b, "c_other", "4444", 4, NULL), 0);
  char out[8];
  CHECK_EQ(mooncake_store_get_into(a, "c_leased", out, sizeof(out)), 4); /* leased for 500 ms */
  const char *keys[] = {"c_own", "c_leased", "c_other", "c_missing", "", "c_own"};
  int r[6] = {9, 9, 9, 9, 9, 9};
  CHECK_EQ(mc_store_batch_replica_clear(a, keys, 6, NULL, r), 1);
  CHECK(r[0] == 1 && r[1] == 0 && r[2] == 0 && r[3] == 0 && r[4] == 0 && r[5] == 0);
  CHECK_EQ(mooncake_store_is_exist(a, "c_own"), 0);
  CHECK_EQ(mooncake_store_is_exist(a, "c_other"), 1);
  usleep(600 * 1000);
  CHECK_EQ(mc_store_batch_replica_clear(a, keys + 1, 1, "", r), 1);
  CHECK_EQ(mooncake_store_is_exist(a, "c_leased"), 0);
  /* segment filter */
  const char *k2[] = {"c_two"};
  CHECK_EQ(mc_store_batch_replica_clear(a, k2, 1, "nowhere:1", r), 0);
  CHECK_EQ(mc_store_batch_replica_clear(a, k2, 1, bname, r), 1);
  mc_replica_desc_t *d = NULL;
  int n = mc_store_get_replica_desc(a, "c_two", &d);
  CHECK_EQ(n, 1);
  if (n == 1) CHECK(!strcmp(d[0].segment_name, aname));
  mc_store_replica_desc_free(d, n);
  usleep(600 * 1000);
  CHECK_EQ(mc_store_batch_replica_clear(a, k2, 1, aname, r), 1);
  CHECK_EQ(mooncake_store_is_exist(a, "c_two"), 0);
  /* argument rules */
  CHECK_EQ(mc_store_batch_replica_clear(NULL, k2, 1, "", r), -1);
  CHECK_EQ(mc_store_batch_replica_clear(a, NULL, 1, "", r), -1);
  CHECK_EQ(mc_store_batch_replica_clear(a, k2, 1, "", NULL), -1);
  const char *knull[] = {"x", NULL};
  r[0] = 9;
  CHECK_EQ(mc_store_batch_replica_clear(a, knull, 2, "", r), -1);
  CHECK_EQ(r[0], 9);
  CHECK_EQ(mc_store_batch_replica_clear(a, k2, 0, "", r), 0);
  mooncake_store_t u = mooncake_store_create();
  CHECK_EQ(mc_store_batch_replica_clear(u, k2, 1, "", r), MC_INVALID_PARAMS);
  mooncake_store_destroy(u);
  mooncake_store_remove_all(b, 1);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  struct th_resp h;
  CHECK_EQ(th_get(M.metrics, "/metrics", &h), 200);
  CHECK(th_prom_value(h.body, "master_batch_replica_clear_requests_total") >= 5);
  CHECK(th_prom_value(h.body, "master_batch_replica_clear_items_total") >= 9);
  th_free(&h);
}

static void test_client_http_server(void) {
  int port = mc_tp_free_port();
  mooncake_store_t s = mooncake_store_create(), peer = client_new(&M, 16 * MiB, 4 * MiB);
  REQUIRE(peer);
  char pname[300];
  CHECK_EQ(mooncake_store_get_hostname(peer, pname, sizeof(pname)), 0);
  mc_store_config_t c = {"127.0.0.1", M.metadata, 16 * MiB, 4 * MiB, "tcp", "", M.addr, NULL, NULL, 1, 70000};
  CHECK_EQ(mc_store_setup(s, &c), MC_INVALID_PARAMS);
  c.http_port = port;
  CHECK_EQ(mc_store_setup(s, &c), 0);
  struct th_resp h;
  CHECK_EQ(th_get(port, "/health", &h), 200);
  CHECK(strstr(h.body, "\"status\":\"ok\"") && strstr(h.body, M.addr));
  json_t *hj = json_loads(h.body, 0, NULL); /* built by jansson: parses back to the same names */
  CHECK_STR(json_string_value(json_object_get(hj, "master")), M.addr);
  CHECK_EQ(json_integer_value(json_object_get(hj, "segment_bytes")), 16 * MiB);
  CHECK(json_is_string(json_object_get(hj, "segment")));
  json_decref(hj);
  th_free(&h);
  CHECK_EQ(th_get(port, "/metrics", &h), 200);
  CHECK(strstr(h.ctype, "version=0.0.4") != NULL);
  double w0 = th_prom_value(h.body, "store_client_written_bytes_total");
  double n0 = th_prom_value(h.body, "te_transfer_latency_seconds_count");
  CHECK(!isnan(w0) && !isnan(n0) && !isnan(th_prom_value(h.body, "te_transfer_latency_p99")));
  CHECK(strstr(h.body, "# TYPE te_transfer_latency_seconds histogram") != NULL);
  CHECK_EQ(th_prom_value(h.body, "te_transport_fallback_total{requested=\"rdma\"}"), 0); /* tcp asked for */
  th_free(&h);
  const char *pref[] = {pname};
  mooncake_replicate_config_t on_peer = {1, 0, 0, pref, 1};
  CHECK_EQ(mooncake_store_put(s, "http_k", "0123456789", 10, &on_peer), 0);
  CHECK_EQ(th_get(port, "/metrics", &h), 200);
  CHECK(th_prom_value(h.body, "store_client_written_bytes_total") >= w0 + 10);
  CHECK(th_prom_value(h.body, "te_transfer_latency_seconds_count") >= n0 + 1);
  th_free(&h);
  CHECK_EQ(th_get(port, "/metrics/summary", &h), 200);
  CHECK(strstr(h.body, "te_transfer_latency_p99=") && strchr(h.body, '\n') == h.body + h.len - 1);
  th_free(&h);
  CHECK_EQ(th_get(port, "/other", &h), 404);
  th_free(&h);
  /* the port is taken: a second client still sets up, without a server */
  mooncake_store_t s2 = mooncake_store_create();
  CHECK_EQ(mc_store_setup(s2, &c), 0);
  mooncake_store_destroy(s2);
  CHECK_EQ(mc_store_close(s), 0);
  CHECK_EQ(th_get(port, "/health", &h), 0); /* refused */
  th_free(&h);
  mooncake_store_remove_all(peer, 1);
  mooncake_store_destroy(peer);
  mooncake_store_destroy(s);
}

/* protocol "rdma" on a host with no RDMA device (the transport is tested in the RDMA guest): the engine installs tcp (with the same-host path), the client works,
 * and its /metrics counts the fallback (docs/transfer-engine.md, "Path choice"). */
static void test_rdma_falls_back(void) {
  int port = mc_tp_free_port();
  mooncake_store_t holder = client_new(&M, 16 * MiB, 4 * MiB), s = mooncake_store_create();
  REQUIRE(holder);
  /* no segment of its own: its puts and gets go through the engine to the holder */
  mc_store_config_t c = {"127.0.0.1", M.metadata, 0, 4 * MiB, "rdma", "", M.addr, NULL, NULL, 1, port};
  REQUIRE(mc_store_setup(s, &c) == 0);
  char out[16] = {0};
  CHECK_EQ(mooncake_store_put(s, "rdma_k", "0123456789", 10, NULL), 0);
  CHECK_EQ(mooncake_store_get_into(s, "rdma_k", out, sizeof(out)), 10);
  CHECK(!memcmp(out, "0123456789", 10));
  struct th_resp h;
  CHECK_EQ(th_get(port, "/metrics", &h), 200);
  CHECK_EQ(th_prom_value(h.body, "te_transport_fallback_total{requested=\"rdma\"}"), 1);
  CHECK(strstr(h.body, "# TYPE te_transport_fallback_total counter\n") != NULL);
  CHECK(th_prom_value(h.body, "te_transfer_latency_seconds_count") >= 2);
  th_free(&h);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  mooncake_store_destroy(holder);
}

/* tenant_id: isolated key namespaces; remove_all / remove_by_regex see only their own namespace. */
static mooncake_store_t tenant_client(const char *tenant, uint64_t gss) {
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t c = {"127.0.0.1", M.metadata, gss, 4 * MiB, "tcp", "", M.addr, NULL, NULL, 0, 0, tenant};
  if (mc_store_setup(s, &c)) {
    mooncake_store_destroy(s);
    return NULL;
  }
  return s;
}

static int64_t tget(mooncake_store_t s, const char *key, char *out) {
  memset(out, 0, 8);
  return mooncake_store_get_into(s, key, out, 8);
}

static void test_tenant_namespaces(void) {
  mooncake_store_t a = tenant_client("acme", 16 * MiB), b = tenant_client("beta", 0), d = tenant_client("default", 0);
  REQUIRE(a && b && d);
  char out[8];
  CHECK_EQ(mooncake_store_put(a, "k", "A", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(b, "k", "B", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(d, "k", "D", 1, NULL), 0);
  CHECK_EQ(tget(a, "k", out), 1);
  CHECK_EQ(out[0], 'A');
  CHECK_EQ(tget(b, "k", out), 1);
  CHECK_EQ(out[0], 'B');
  CHECK_EQ(tget(d, "k", out), 1);
  CHECK_EQ(out[0], 'D');
  CHECK_EQ(mooncake_store_remove(b, "k", 1), 0);
  CHECK_EQ(mooncake_store_is_exist(b, "k"), 0);
  CHECK_EQ(mooncake_store_is_exist(a, "k"), 1);
  CHECK_EQ(mooncake_store_is_exist(d, "k"), 1);
  /* regex on the key without the namespace, anchors included; other namespaces untouched */
  CHECK_EQ(mooncake_store_put(a, "x1", "1", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(a, "x2", "2", 1, NULL), 0);
  CHECK_EQ(mooncake_store_put(d, "x1", "3", 1, NULL), 0);
  CHECK_EQ(mooncake_store_remove_by_regex(a, "^x", 1), 2);
  CHECK_EQ(mooncake_store_is_exist(d, "x1"), 1);
  /* the default namespace's remove_all leaves tenants alone */
  CHECK_EQ(mooncake_store_remove_all(d, 1), 2); /* its k and x1 */
  CHECK_EQ(mooncake_store_is_exist(a, "k"), 1);
  int cleared = 0;
  const char *keys[] = {"k"};
  usleep(600000); /* past the 500 ms lease of the reads above */
  CHECK_EQ(mc_store_batch_replica_clear(a, keys, 1, "", &cleared), 1); /* answers carry the namespace */
  CHECK_EQ(cleared, 1);
  CHECK_EQ(mooncake_store_is_exist(a, "k"), 0);
  CHECK_EQ(mooncake_store_put(a, "last", "L", 1, NULL), 0);
  CHECK_EQ(mooncake_store_remove_all(a, 1), 1);
  /* bad ids */
  CHECK(tenant_client("bad\x1fid", 0) == NULL);
  char longid[200];
  memset(longid, 'a', sizeof(longid) - 1);
  longid[sizeof(longid) - 1] = 0;
  CHECK(tenant_client(longid, 0) == NULL);
  mooncake_store_destroy(b);
  mooncake_store_destroy(d);
  mooncake_store_destroy(a);
}

/* Layer-wise sessions at the C level (docs/store-client.md, "Sessions"): a put in two ranged writes, then
 * end; a revoke that leaves nothing; unregistered and out-of-object ranges refused; a get session's ranged
 * reads; the NULL-argument rule. And grouped batch writes (their keys readable, results in request order). */
static void test_sessions_and_groups(void) {
  mooncake_store_t s = client_new(&M, 16 * MiB, 4 * MiB);
  REQUIRE(s);
  enum { N = 8192 };
  uint8_t *src = malloc(N), *dst = calloc(1, N), *unreg = malloc(64);
  fill(src, N, 11);
  REQUIRE(mooncake_store_register_buffer(s, src, N) == 0 && mooncake_store_register_buffer(s, dst, N) == 0);
  const char *keys[] = {"sess_a", "sess_b"};
  size_t sizes[] = {4096, 100};
  int st[2] = {9, 9};
  CHECK_EQ(mc_store_put_session_start(s, keys, sizes, 2, NULL, NULL, st), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(st[1], 0);
  const void *b1[] = {src, src + 5000};
  size_t z1[] = {1000, 100}, o1[] = {0, 0}, n1[] = {1, 1};
  int64_t w[2];
  CHECK_EQ(mc_store_put_session_write(s, keys, b1, z1, o1, n1, 2, w), 0);
  CHECK_EQ(w[0], 1000);
  CHECK_EQ(w[1], 100);
  const void *b2[] = {src + 1000, unreg};
  size_t z2[] = {3096, 8}, o2[] = {1000, 0};
  CHECK_EQ(mc_store_put_session_write(s, keys, b2, z2, o2, n1, 2, w), 0);
  CHECK_EQ(w[0], 3096);
  CHECK_EQ(w[1], MC_INVALID_PARAMS); /* not registered */
  const void *b3[] = {src};
  size_t z3[] = {2}, o3[] = {99};
  CHECK_EQ(mc_store_put_session_write(s, keys + 1, b3, z3, o3, n1, 1, w), 0);
  CHECK_EQ(w[0], MC_INVALID_PARAMS); /* past the object's end */
  CHECK_EQ(mc_store_put_session_end(s, keys, 1, 0, st), 0);
  CHECK_EQ(st[0], 0);
  CHECK_EQ(mc_store_put_session_end(s, keys + 1, 1, 1, st), 0); /* revoke */
  CHECK_EQ(st[0], 0);
  CHECK_EQ(mooncake_store_is_exist(s, "sess_b"), 0);
  CHECK_EQ(mooncake_store_get_into(s, "sess_a", dst, N), 4096);
  CHECK(!memcmp(dst, src, 4096));
  /* get session: two ranges of sess_a into dst */
  memset(dst, 0, N);
  CHECK_EQ(mc_store_get_session_start(s, keys, 1, st), 0);
  CHECK_EQ(st[0], 0);
  void *d[] = {dst, dst + 100};
  size_t dz[] = {10, 20}, doff[] = {4000, 0}, dn[] = {2};
  CHECK_EQ(mc_store_get_session_read(s, keys, d, dz, doff, dn, 1, w), 0);
  CHECK_EQ(w[0], 30);
  CHECK(!memcmp(dst, src + 4000, 10) && !memcmp(dst + 100, src, 20));
  CHECK_EQ(mc_store_get_session_end(s, keys, 1), 0);
  CHECK_EQ(mc_store_get_session_read(s, keys, d, dz, doff, dn, 1, w), 0);
  CHECK_EQ(w[0], MC_INVALID_PARAMS); /* ended */
  st[0] = 9;
  CHECK_EQ(mc_store_put_session_start(s, keys, NULL, 1, NULL, NULL, st), -1);
  CHECK_EQ(st[0], 9); /* untouched */
  /* grouped batch writes */
  const char *gk[] = {"grp_x", "grp_y", "grp_z"}, *groups[] = {"g", NULL, "g"};
  const void *gv[] = {src, src + 10, src + 20};
  size_t gz[] = {10, 10, 10};
  int gr[3] = {9, 9, 9};
  CHECK_EQ(mc_store_batch_write_grouped(s, gk, gv, gz, 3, NULL, groups, 0, gr), 0);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(gr[i], 0);
    CHECK_EQ(mooncake_store_get_into(s, gk[i], dst, N), 10);
    CHECK(!memcmp(dst, src + 10 * i, 10));
  }
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  free(unreg);
  free(dst);
  free(src);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  static const char *const extra[] = {"--default_kv_lease_ttl=500", NULL};
  if (master_start(&M, extra)) return 1;
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_write_config_rules),
      TEST_CASE(test_multi_buffers),
      TEST_CASE(test_replicas_registrations_close),
      TEST_CASE(test_setup_with_caller_engine),
      TEST_CASE(test_batch_replica_clear),
      TEST_CASE(test_client_http_server),
      TEST_CASE(test_rdma_falls_back),
      TEST_CASE(test_tenant_namespaces),
      TEST_CASE(test_sessions_and_groups),
  };
  int rc = run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
  master_stop(&M);
  return rc;
}
