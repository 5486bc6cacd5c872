/* Black-box tests of the master's admin/metrics HTTP server (docs/admin.md) against real mooncake_master
 * processes over real sockets: every endpoint's status codes, Content-Type and JSON (parsed with jansson),
 * /query_key granting no lease, removal codes, drain jobs,
 * malformed query strings, the metric values after a scripted workload (puts, hits and misses, batch
 * lookups, evictions, client statistics reports), the same values through a real Prometheus scraping
 * every second and its query API, `promtool check metrics` flagging only exempt names, reports from real
 * store clients (a storage client, a pure client, a short-lived one), the periodic log lines, and the
 * listeners. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>

#include "lib/http.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "mooncake/store.h"

#define MiB (1024ull * 1024)

static struct mc_mrpc_client *C;
static struct mt_master M;

static int start(const char *const extra[]) {
  if (mt_master_start(&M, extra)) return -1;
  C = mt_connect(M.port);
  return mc_tp_wait_port(M.metrics_port, 10000, M.pid);
}

static void stop(void) {
  mc_mrpc_client_free(C);
  C = NULL;
  CHECK_EQ(mt_master_stop(&M), 0);
}

/* GET path and parse the JSON body; NULL on a parse error. *status gets the HTTP status. */
static json_t *get_json(const char *path, long *status) {
  struct th_resp r;
  *status = th_get(M.metrics_port, path, &r);
  json_t *j = json_loadb(r.body, r.len, 0, NULL);
  if (!j) fprintf(stderr, "GET %s: not JSON (%ld): %s\n", path, *status, r.body);
  else if (strcmp(r.ctype, "application/json")) fprintf(stderr, "GET %s: Content-Type %s\n", path, r.ctype);
  CHECK_STR(r.ctype, "application/json");
  th_free(&r);
  return j;
}

static json_t *post_json(const char *path, const char *body, long *status) {
  struct th_resp r;
  *status = th_post(M.metrics_port, path, body, &r);
  json_t *j = json_loadb(r.body, r.len, 0, NULL);
  CHECK(j != NULL);
  CHECK_STR(r.ctype, "application/json");
  th_free(&r);
  return j;
}

/* A request answered with the error body: the HTTP status and error_code (0: not checked). */
static void expect_error(int post, const char *path, long status, int code) {
  long st;
  json_t *j = post ? post_json(path, NULL, &st) : get_json(path, &st);
  if (st != status) fprintf(stderr, "%s %s -> %ld, expected %ld\n", post ? "POST" : "GET", path, st, status);
  CHECK_EQ(st, status);
  CHECK(json_is_false(json_object_get(j, "success")));
  if (code) CHECK_EQ(json_integer_value(json_object_get(j, "error_code")), code);
  json_decref(j);
}

static const char *jstr(json_t *j, const char *k) { return json_string_value(json_object_get(j, k)); }
static long long jint(json_t *j, const char *k) { return json_integer_value(json_object_get(j, k)); }

/* The value of one sample in the master's /metrics now. */
static double metric(const char *name) {
  struct th_resp r;
  th_get(M.metrics_port, "/metrics", &r);
  double v = th_prom_value(r.body, name);
  th_free(&r);
  return v;
}

static struct mc_segment_rec seg(uint64_t id, const char *name, const char *zone, uint64_t size) {
  struct mc_segment_rec s = mt_seg(id, name, 0x10000000ull * id, size);
  s.zone = (char *)zone;
  return s;
}

/* A put of len bytes preferring segment `pref` (NULL = any); *where gets the chosen segment's name. */
static int put_on(const char *key, uint64_t len, const char *pref, char *where, size_t wlen) {
  struct mc_put_config cfg = mt_cfg(1);
  if (pref) cfg.n_preferred = 1, cfg.preferred[0] = (char *)pref;
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  int rc = mt_put_start(C, mt_id(1), key, len, &cfg, &reps, &n);
  if (!rc && where) snprintf(where, wlen, "%s", n ? reps[0].segment_name : "");
  mc_replicas_free(reps, n);
  return rc ? rc : mt_put_end(C, mt_id(1), key);
}

/* ------------------------------------------------------------ endpoints */

static void check_status_endpoints(void) {
  long st;
  json_t *j = get_json("/health", &st);
  CHECK_EQ(st, 200);
  CHECK_STR(jstr(j, "status"), "ok");
  CHECK_STR(jstr(j, "role"), "leader");
  CHECK_STR(jstr(j, "ha_state"), "serving");
  CHECK(json_is_true(json_object_get(j, "service_ready")));
  char want[64];
  snprintf(want, sizeof(want), "0.0.0.0:%d", M.port);
  CHECK_STR(jstr(j, "leader_address"), want);
  json_decref(j);
  j = get_json("/leader", &st);
  CHECK_EQ(st, 200);
  CHECK(json_is_true(json_object_get(j, "present")));
  CHECK(jint(j, "view_version") > 0);
  json_decref(j);
  struct th_resp r;
  CHECK_EQ(th_get(M.metrics_port, "/role", &r), 200);
  CHECK_STR(r.body, "leader");
  CHECK(!strncmp(r.ctype, "text/plain", 10));
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/ha_status", &r), 200);
  CHECK_STR(r.body, "serving");
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/metrics", &r), 200);
  CHECK_STR(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
  CHECK(strstr(r.body, "# TYPE store_hit_ratio gauge\n") != NULL);
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/metrics/summary", &r), 200);
  CHECK(!strncmp(r.body, "role=leader, state=serving, service_ready=true, master={Mem Storage: ", 69));
  CHECK(strstr(r.body, "Keys: 3 (soft-pinned: 0)") != NULL);
  th_free(&r);
  j = get_json("/config", &st);
  CHECK_EQ(st, 200);
  CHECK_EQ(jint(j, "metrics_port"), M.metrics_port);
  CHECK_EQ(jint(j, "client_ttl"), 3600);
  CHECK_STR(jstr(j, "default_kv_lease_ttl"), "10000");
  json_decref(j);
}

/* Lines of a text body, sorted and joined by '|'. */
static void sorted_lines(const char *body, char *out, size_t len) {
  char *copy = strdup(body), *save = NULL, *v[64];
  int n = 0;
  for (char *t = strtok_r(copy, "\n", &save); t && n < 64; t = strtok_r(NULL, "\n", &save)) v[n++] = t;
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
      char *x = v[k];
      v[k] = v[k - 1], v[k - 1] = x;
    }
  out[0] = 0;
  for (int i = 0; i < n; i++) snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "|" : "", v[i]);
  free(copy);
}

static void check_listings(void) {
  struct th_resp r;
  char lines[1024];
  CHECK_EQ(th_get(M.metrics_port, "/get_all_keys", &r), 200);
  CHECK(!strncmp(r.ctype, "text/plain", 10));
  sorted_lines(r.body, lines, sizeof(lines));
  CHECK_STR(lines, "a1|a2|b1");
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/get_all_keys?prefix=a", &r), 200);
  sorted_lines(r.body, lines, sizeof(lines));
  CHECK_STR(lines, "a1|a2");
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/get_all_keys?prefix=zzz", &r), 200);
  CHECK_EQ(r.len, 0);
  th_free(&r);
  CHECK_EQ(th_get(M.metrics_port, "/get_all_segments", &r), 200);
  sorted_lines(r.body, lines, sizeof(lines));
  CHECK_STR(lines, "seg-a|seg-b");
  th_free(&r);
  long st;
  json_t *j = get_json("/get_segments_detail", &st);
  CHECK_EQ(st, 200);
  CHECK_EQ(jint(j, "total_segments"), 2);
  json_t *s;
  size_t i;
  int seen = 0;
  json_array_foreach(json_object_get(j, "segments"), i, s) {
    if (strcmp(jstr(s, "segment_name"), "seg-a")) continue;
    seen = 1;
    CHECK_STR(jstr(s, "zone"), "z1");
    CHECK_STR(jstr(s, "status"), "OK");
    CHECK_STR(jstr(s, "base_address"), "0x10000000");
    CHECK_EQ(jint(s, "size_bytes"), 64 * MiB);
    CHECK_STR(jstr(s, "size_human"), "0.06 GiB");
    CHECK_STR(jstr(s, "protocol"), "tcp");
    CHECK_STR(jstr(s, "te_endpoint"), "seg-a");
    CHECK_EQ(jint(s, "allocator_used_bytes"), 2 * MiB);
    CHECK_EQ(jint(s, "allocator_capacity_bytes"), 64 * MiB);
    CHECK(fabs(json_real_value(json_object_get(s, "allocator_usage_percent")) - 3.125) < 1e-9);
    CHECK_EQ(strlen(jstr(s, "segment_id")), 36);
    CHECK_EQ(strlen(jstr(s, "client_id")), 36);
  }
  CHECK(seen);
  json_decref(j);
  CHECK_EQ(th_get(M.metrics_port, "/query_segment?segment=seg-a", &r), 200);
  CHECK_STR(r.body, "seg-a\nUsed(bytes): 2097152\nCapacity(bytes) : 67108864\n");
  th_free(&r);
  expect_error(0, "/query_segment?segment=nope", 404, -101);
}

static void check_key_queries(void) {
  long st;
  json_t *j = get_json("/query_key?key=a1", &st);
  CHECK_EQ(st, 200);
  CHECK(json_is_true(json_object_get(j, "success")));
  json_t *rep = json_array_get(json_object_get(j, "data"), 0);
  CHECK_EQ(jint(rep, "size_"), MiB);
  CHECK_STR(jstr(rep, "transport_endpoint_"), "seg-a");
  CHECK_STR(jstr(rep, "protocol_"), "tcp");
  CHECK_EQ(jint(rep, "buffer_address_"), 0x10000000);
  json_decref(j);
  /* the admin read granted no lease, so a plain (non-forced) remove succeeds at once */
  CHECK_EQ(mt_remove(C, "a1", 0), 0);
  j = get_json("/query_key?key=a1", &st);
  CHECK_EQ(st, 404);
  CHECK_EQ(jint(j, "error_code"), -704);
  CHECK_STR(jstr(j, "error_message"), "OBJECT_NOT_FOUND");
  json_decref(j);
  j = get_json("/batch_query_keys?keys=a2,nope", &st);
  CHECK_EQ(st, 200);
  json_t *data = json_object_get(j, "data");
  CHECK(json_is_true(json_object_get(json_object_get(data, "a2"), "ok")));
  CHECK_EQ(json_array_size(json_object_get(json_object_get(data, "a2"), "values")), 1);
  CHECK(json_is_false(json_object_get(json_object_get(data, "nope"), "ok")));
  CHECK_STR(jstr(json_object_get(data, "nope"), "error"), "OBJECT_NOT_FOUND");
  json_decref(j);
  j = get_json("/batch_query_keys", &st);
  CHECK_EQ(st, 400);
  CHECK_STR(jstr(j, "error"), "No keys provided. Use ?keys=key1,key2,...");
  json_decref(j);
  expect_error(0, "/query_key", 400, -600);
}

static void check_remove(void) {
  long st;
  CHECK_EQ(mt_get(C, "a2", NULL, NULL, NULL), 0); /* a client read: leased for 10 s */
  json_t *j = post_json("/api/v1/remove?key=a2", NULL, &st);
  CHECK_EQ(st, 409);
  CHECK_EQ(jint(j, "error_code"), -706);
  json_decref(j);
  j = post_json("/api/v1/remove?key=a2&force=true", NULL, &st);
  CHECK_EQ(st, 200);
  CHECK(json_is_true(json_object_get(j, "success")));
  json_decref(j);
  expect_error(1, "/api/v1/remove?key=a2&force=1", 404, -704);
  expect_error(1, "/api/v1/remove?key=b1&force=maybe", 400, 0);
  expect_error(1, "/api/v1/remove", 400, 0);
  j = get_json("/api/v1/remove?key=b1", &st); /* GET on a POST endpoint */
  CHECK_EQ(st, 405);
  json_decref(j);
  expect_error(0, "/no/such/endpoint", 404, 0);
  CHECK_EQ(mt_put(C, mt_id(1), "c1", 4096, 1), 0);
  j = post_json("/api/v1/remove_all?force=1", NULL, &st);
  CHECK_EQ(st, 200);
  CHECK_EQ(jint(j, "removed_count"), 2); /* b1, c1 */
  json_decref(j);
  CHECK_EQ(metric("master_key_count"), 0);
}

/* Malformed and hostile query strings get a clear 4xx and never hurt the server. */
static void check_bad_requests(void) {
  static const char *const paths[] = {
      "/query_key?key=%00",       "/query_key?key=",         "/query_key?key=%ZZ%",     "/query_key?key",
      "/batch_query_keys?keys=,,,", "/batch_query_keys?keys=%00", "/query_segment?segment=", "/query_segment?",
      "/get_all_keys?prefix=%FF%FE%00", "/api/v1/drain_jobs/query?job_id=", "/api/v1/drain_jobs/query",
      "/metrics?x=%", "/%2e%2e/%2e%2e/etc/passwd", "/health/../metrics", "//health", "/get_all_keys?prefix=&prefix=a"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    struct th_resp r;
    long st = th_get(M.metrics_port, paths[i], &r);
    if (st < 200 || st >= 500) fprintf(stderr, "GET %s -> %ld\n", paths[i], st);
    CHECK(st >= 200 && st < 500);
    th_free(&r);
  }
  /* a 64 KiB key and a 200-key batch of long keys */
  size_t n = 65536;
  char *path = malloc(n + 64);
  strcpy(path, "/query_key?key=");
  memset(path + strlen(path), 'k', n);
  path[15 + n] = 0;
  struct th_resp r;
  long st = th_get(M.metrics_port, path, &r);
  CHECK(st == 404 || st == 414 || st == 431);
  th_free(&r);
  free(path);
  /* a POST body over the limit, and a garbage JSON body for a drain */
  char *big = malloc(200000);
  memset(big, 'x', 199999);
  big[199999] = 0;
  CHECK_EQ(th_post(M.metrics_port, "/api/v1/drain_jobs", big, &r), 400);
  th_free(&r);
  free(big);
  CHECK_EQ(th_post(M.metrics_port, "/api/v1/drain_jobs", "{\"segment\":", &r), 400);
  th_free(&r);
  CHECK_EQ(th_post(M.metrics_port, "/api/v1/drain_jobs", "{\"segment\":7}", &r), 400);
  th_free(&r);
  /* raw junk on the socket */
  static const char *const junk[] = {"\x01\x02GARBAGE\r\n\r\n",
                                     "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                                     "POST /api/v1/remove?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n"};
  char resp[512];
  for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
    mc_tp_raw_http(M.metrics_port, junk[i], strlen(junk[i]), resp, sizeof(resp), 2000);
  CHECK_EQ(th_get(M.metrics_port, "/health", &r), 200);
  th_free(&r);
}

static void test_endpoints(void) {
  static const char *const flags[] = {"--client_ttl=3600", NULL};
  REQUIRE(!start(flags));
  struct mc_segment_rec a = seg(1, "seg-a", "z1", 64 * MiB), b = seg(2, "seg-b", "", 64 * MiB);
  REQUIRE(!mt_mount(C, mt_id(1), &a) && !mt_mount(C, mt_id(1), &b));
  CHECK_EQ(put_on("a1", MiB, "seg-a", NULL, 0), 0);
  CHECK_EQ(put_on("a2", MiB, "seg-a", NULL, 0), 0);
  CHECK_EQ(put_on("b1", MiB, "seg-b", NULL, 0), 0);
  check_status_endpoints();
  check_listings();
  check_key_queries();
  check_remove();
  check_bad_requests();
  stop();
}

/* A listing of many keys is streamed shard by shard; RPCs keep being answered meanwhile. */
struct rpc_probe {
  int port;
  volatile int stop;
  long calls, failures, worst_ms;
};

static void *probe_main(void *arg) {
  struct rpc_probe *p = arg;
  struct mc_mrpc_client *c = mt_connect(p->port);
  while (!p->stop) {
    long t0 = mc_tp_now_ms();
    p->failures += mt_exist(c, "big-00008") != 1;
    long ms = mc_tp_now_ms() - t0;
    if (ms > p->worst_ms) p->worst_ms = ms;
    p->calls++;
  }
  mc_mrpc_client_free(c);
  return NULL;
}

static void test_large_listing(void) {
  static const char *const flags[] = {"--client_ttl=3600", NULL};
  REQUIRE(!start(flags));
  struct mc_segment_rec a = seg(1, "seg-a", "", 1ull << 30);
  REQUIRE(!mt_mount(C, mt_id(1), &a));
  enum { N = 20000, B = 1000 };
  static char names[B][16];
  const char *keys[B];
  uint64_t lens[B];
  int32_t st[B];
  struct mc_put_config cfg = mt_cfg(1);
  for (int base = 0; base < N; base += B) {
    for (int i = 0; i < B; i++) {
      snprintf(names[i], sizeof(names[i]), "%s-%05d", (base + i) % 2 ? "odd" : "big", base + i);
      keys[i] = names[i], lens[i] = 64;
    }
    CHECK_EQ(mt_batch_put_start(C, mt_id(1), keys, lens, B, &cfg, st, NULL), 0);
    CHECK_EQ(mt_batch_end(C, MC_OP_BATCH_PUT_END, mt_id(1), keys, B, st), 0);
  }
  struct rpc_probe p = {.port = M.port};
  pthread_t th;
  REQUIRE(!pthread_create(&th, NULL, probe_main, &p));
  for (int round = 0; round < 3; round++) {
    struct th_resp r;
    CHECK_EQ(th_get(M.metrics_port, round ? "/get_all_keys?prefix=odd-" : "/get_all_keys", &r), 200);
    long lines = 0;
    for (size_t i = 0; i < r.len; i++) lines += r.body[i] == '\n';
    CHECK_EQ(lines, round ? N / 2 : N);
    CHECK_EQ(r.len, (size_t)lines * 10); /* "big-00000\n", "odd-00001\n": 10 bytes a line */
    th_free(&r);
  }
  p.stop = 1;
  pthread_join(th, NULL);
  CHECK(p.calls > 0);
  CHECK_EQ(p.failures, 0);
  if (p.worst_ms >= 1000) fprintf(stderr, "slowest exist during listings: %ld ms\n", p.worst_ms);
  CHECK(p.worst_ms < 1000);
  CHECK_EQ(metric("master_key_count"), N);
  CHECK_EQ(metric("master_batch_put_start_items_total"), N);
  stop();
}

/* ------------------------------------------------------------ drain jobs */

static json_t *drain_query(const char *id) {
  char path[128];
  long st;
  snprintf(path, sizeof(path), "/api/v1/drain_jobs/query?job_id=%s", id);
  json_t *j = get_json(path, &st);
  CHECK_EQ(st, 200);
  return j;
}

static const char *seg_status(json_t *list, const char *name) {
  json_t *s;
  size_t i;
  json_array_foreach(json_object_get(list, "segments"), i, s) if (!strcmp(jstr(s, "segment_name"), name))
      return jstr(s, "status");
  return "";
}

/* Names are a client's bytes: a segment named with quotes, a backslash and a byte that is not UTF-8 is
 * still listed (jansson escapes the first two; the byte comes out as '?'), and its replicas show. */
static void test_hostile_names(void) {
  REQUIRE(!start(NULL));
  struct mc_segment_rec a = seg(1, "seg\"q\\b\xff", "z\xfe", 64 * MiB);
  REQUIRE(!mt_mount(C, mt_id(1), &a));
  char where[64];
  CHECK_EQ(put_on("hk", MiB, NULL, where, sizeof(where)), 0);
  long st;
  json_t *j = get_json("/get_segments_detail", &st);
  CHECK_EQ(st, 200);
  CHECK_EQ(json_array_size(json_object_get(j, "segments")), 1);
  json_t *s0 = json_array_get(json_object_get(j, "segments"), 0);
  CHECK_STR(jstr(s0, "segment_name"), "seg\"q\\b?");
  CHECK_STR(jstr(s0, "zone"), "z?");
  json_decref(j);
  j = get_json("/query_key?key=hk", &st);
  CHECK_EQ(st, 200);
  CHECK_STR(jstr(json_array_get(json_object_get(j, "data"), 0), "segment_name_"), "seg\"q\\b?");
  json_decref(j);
  stop();
}

static void test_drain(void) {
  static const char *const flags[] = {"--client_ttl=3600", "--default_kv_lease_ttl=300", NULL};
  REQUIRE(!start(flags));
  struct mc_segment_rec a = seg(1, "seg-a", "", 64 * MiB), b = seg(2, "seg-b", "", 64 * MiB);
  REQUIRE(!mt_mount(C, mt_id(1), &a) && !mt_mount(C, mt_id(1), &b));
  char where[64];
  CHECK_EQ(put_on("old", MiB, "seg-a", where, sizeof(where)), 0);
  CHECK_STR(where, "seg-a");
  long st;
  json_t *j = post_json("/api/v1/drain_jobs", "{\"segment\":\"seg-a\"}", &st);
  CHECK_EQ(st, 200);
  CHECK(json_is_true(json_object_get(j, "success")));
  CHECK_STR(jstr(j, "segment"), "seg-a");
  char id[64];
  snprintf(id, sizeof(id), "%s", jstr(j, "job_id") ? jstr(j, "job_id") : "");
  json_decref(j);
  json_t *q = drain_query(id);
  CHECK_STR(jstr(q, "status"), "DRAINING");
  CHECK_STR(jstr(q, "job_id"), id);
  json_decref(q);
  j = get_json("/api/v1/segments/status", &st);
  CHECK_EQ(st, 200);
  CHECK_STR(seg_status(j, "seg-a"), "DRAINING");
  CHECK_STR(seg_status(j, "seg-b"), "OK");
  json_decref(j);
  /* no new allocations on the draining segment, even when preferred; its objects stay readable */
  for (int i = 0; i < 5; i++) {
    char key[16];
    snprintf(key, sizeof(key), "new%d", i);
    CHECK_EQ(put_on(key, MiB, "seg-a", where, sizeof(where)), 0);
    CHECK_STR(where, "seg-b");
  }
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  CHECK_EQ(mt_get(C, "old", &reps, &n, NULL), 0);
  CHECK_EQ(n, 1);
  if (n) CHECK_STR(reps[0].segment_name, "seg-a");
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_remove(C, "old", 1), 0); /* the last object leaves */
  q = drain_query(id);
  CHECK_STR(jstr(q, "status"), "DRAINING"); /* its bytes stay until the get's read lease ends */
  json_decref(q);
  for (long t0 = mc_tp_now_ms(); mc_tp_now_ms() - t0 < 5000; mc_tp_sleep_ms(20)) { /* drained once it ends */
    q = drain_query(id);
    int done = jstr(q, "status") && !strcmp(jstr(q, "status"), "DRAINED");
    json_decref(q);
    if (done) break;
  }
  q = drain_query(id);
  CHECK_STR(jstr(q, "status"), "DRAINED");
  CHECK_EQ(jint(q, "used_bytes"), 0);
  json_decref(q);
  j = get_json("/get_segments_detail", &st);
  CHECK_STR(seg_status(j, "seg-a"), "DRAINED");
  json_decref(j);
  /* cancel: back in service */
  char path[128];
  snprintf(path, sizeof(path), "/api/v1/drain_jobs/cancel?job_id=%s", id);
  j = post_json(path, NULL, &st);
  CHECK_EQ(st, 200);
  CHECK_STR(jstr(j, "status"), "CANCELLED");
  json_decref(j);
  CHECK_EQ(put_on("back", MiB, "seg-a", where, sizeof(where)), 0);
  CHECK_STR(where, "seg-a");
  /* the query-string form, unknown segments and jobs */
  j = post_json("/api/v1/drain_jobs?segment=seg-b", NULL, &st);
  CHECK_EQ(st, 200);
  CHECK(json_is_true(json_object_get(j, "success")));
  json_decref(j);
  j = get_json("/api/v1/drain_jobs", &st);
  CHECK_EQ(json_array_size(json_object_get(j, "jobs")), 2);
  json_decref(j);
  expect_error(1, "/api/v1/drain_jobs?segment=nope", 404, -101);
  expect_error(1, "/api/v1/drain_jobs", 400, 0);
  expect_error(0, "/api/v1/drain_jobs/query?job_id=nope", 404, -1402);
  expect_error(1, "/api/v1/drain_jobs/cancel?job_id=nope", 404, 0);
  /* a re-mount (NEED_REMOUNT after a ping) keeps the drain */
  CHECK_EQ(mt_remount(C, mt_id(1), &b, 1), 0);
  j = get_json("/api/v1/segments/status", &st);
  CHECK_STR(seg_status(j, "seg-b"), "DRAINING");
  json_decref(j);
  stop();
}

/* ------------------------------------------------------------ metric values */

/* A client statistics report over the raw RPC: `count` latencies of `us` microseconds. */
static int report(uint64_t id, uint64_t us, uint64_t count, uint64_t hits, uint64_t misses) {
  struct mc_client_stats st = {.client = mt_id(id), .hits = hits, .misses = misses};
  st.lat[mc_lat_bucket(us)] = count;
  st.lat_sum_us = us * count;
  st.bytes_read = 1000 * count;
  st.bytes_written = 10 * count;
  struct mc_wbuf w = {0};
  mc_put_client_stats(&w, &st);
  return mt_simple(C, MC_OP_REPORT_CLIENT_STATS, &w);
}

static const char *const workload_flags[] = {"--client_ttl=3600", "--eviction_high_watermark_ratio=0.5",
                                             "--eviction_ratio=0.2", NULL};

/* What the scripted workload did, for the checks. */
struct expected {
  long rpcs;
  double hits, misses;
};

/* One segment, puts, per-key lookups (single and batch), two clients' statistics reports, and puts past
 * the watermark so that eviction runs (its lookups all precede the eviction, so hits are exact). */
static struct expected workload(void) {
  long rpcs = 0;
  struct mc_segment_rec a = seg(1, "seg-a", "", 64 * MiB);
  CHECK_EQ(mt_mount(C, mt_id(1), &a), 0); rpcs++;
  for (int i = 0; i < 10; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%d", i);
    CHECK_EQ(mt_put(C, mt_id(1), key, 4096, 1), 0);
    rpcs += 2;
  }
  /* lookups: exist 4 hits + 2 misses; batch exist of 10 keys: 7 hits + 3 misses (per key, not per RPC);
   * replica lists 3 hits + 1 miss; batch replica list 2 hits + 2 misses */
  for (int i = 0; i < 4; i++) {
    char key[16];
    snprintf(key, sizeof(key), "k%d", i);
    CHECK_EQ(mt_exist(C, key), 1); rpcs++;
  }
  CHECK_EQ(mt_exist(C, "nope1"), 0); rpcs++;
  CHECK_EQ(mt_exist(C, "nope2"), 0); rpcs++;
  const char *batch[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "x1", "x2", "x3"};
  int32_t res[10];
  CHECK_EQ(mt_batch_exist(C, batch, 10, res), 0); rpcs++;
  for (int i = 0; i < 3; i++, rpcs++) CHECK_EQ(mt_get(C, batch[i + 4], NULL, NULL, NULL), 0);
  CHECK_EQ(mt_get(C, "nope3", NULL, NULL, NULL), -704); rpcs++;
  struct mc_wbuf w = {0}, rep;
  const char *bg[] = {"k7", "k8", "y1", "y2"};
  mt_keys(&w, bg, 4);
  CHECK_EQ(mt_call(C, MC_OP_BATCH_GET_REPLICA_LIST, &w, &rep), 0); rpcs++;
  mc_w_free(&rep);
  /* transfer latencies from two clients (a storage client and a pure one): 90 of 150 us, 10 of 8 ms */
  CHECK_EQ(report(1, 150, 90, 5, 1), 0); rpcs++;
  CHECK_EQ(report(2, 8000, 10, 2, 2), 0); rpcs++;
  CHECK_EQ(report(2, 0, 0, 0, 0), 0); rpcs++;
  struct mc_wbuf bad = {0};
  mc_w_u32(&bad, 7);
  CHECK_EQ(mt_simple(C, MC_OP_REPORT_CLIENT_STATS, &bad), MC_INVALID_PARAMS); rpcs++;
  /* fill past the 50 % watermark with 1 MiB objects: eviction runs */
  for (int i = 0; i < 40; i++) {
    char key[16];
    snprintf(key, sizeof(key), "fill%d", i);
    rpcs += mt_put(C, mt_id(1), key, MiB, 1) == MC_NO_AVAILABLE_HANDLE ? 1 : 2; /* a refused start ends it */
  }
  return (struct expected){rpcs, 4 + 7 + 3 + 2, 2 + 3 + 1 + 2};
}

static void test_metric_values(void) {
  REQUIRE(!start(workload_flags));
  struct expected e = workload();
  double evicted = 0, hits = e.hits, misses = e.misses;
  long rpcs = e.rpcs;
  for (long deadline = mc_tp_now_ms() + 5000; mc_tp_now_ms() < deadline && evicted < 1; mc_tp_sleep_ms(50))
    evicted = metric("master_evicted_key_count");
  mc_tp_sleep_ms(300); /* let the run finish */
  struct th_resp r;
  CHECK_EQ(th_get(M.metrics_port, "/metrics", &r), 200);
  const char *t = r.body;
  CHECK_EQ(th_prom_value(t, "store_lookup_hits_total"), hits);
  CHECK_EQ(th_prom_value(t, "store_lookup_misses_total"), misses);
  CHECK(fabs(th_prom_value(t, "store_hit_ratio") - hits / (hits + misses)) < 1e-12);
  CHECK_EQ(th_prom_value(t, "master_segment_count"), 1);
  evicted = th_prom_value(t, "master_evicted_key_count");
  CHECK(evicted >= 1);
  CHECK(fabs(th_prom_value(t, "eviction_rate") - evicted / 60) < 1e-12);
  CHECK(th_prom_value(t, "master_successful_evictions_total") >= 1);
  CHECK(th_prom_value(t, "master_evicted_size_bytes") >= evicted * 4096);
  /* p99 of 100 latencies (90 in (100,200] us, 10 in (5,10] ms): rank 99 -> 5 ms + 5 ms * 9/10 */
  CHECK(fabs(th_prom_value(t, "te_transfer_latency_p99") - 0.0095) < 1e-12);
  CHECK_EQ(th_prom_value(t, "te_transfer_latency_seconds_count"), 100);
  CHECK(fabs(th_prom_value(t, "te_transfer_latency_seconds_sum") - (90 * 150 + 10 * 8000) / 1e6) < 1e-9);
  CHECK(strstr(t, "te_transfer_latency_seconds_bucket{le=\"0.0002\"} 90\n") != NULL);
  CHECK(strstr(t, "te_transfer_latency_seconds_bucket{le=\"0.01\"} 100\n") != NULL);
  CHECK_EQ(th_prom_value(t, "store_client_read_bytes_total"), 100000);
  CHECK_EQ(th_prom_value(t, "store_client_written_bytes_total"), 1000);
  CHECK_EQ(th_prom_value(t, "store_client_lookup_hits_total"), 7);
  CHECK_EQ(th_prom_value(t, "store_client_lookup_misses_total"), 3);
  CHECK_EQ(th_prom_value(t, "store_client_stats_reports_total"), 3);
  CHECK_EQ(th_prom_value(t, "master_report_client_stats_requests_total"), 4);
  CHECK_EQ(th_prom_value(t, "master_report_client_stats_failures_total"), 1);
  /* per-RPC and batch families */
  CHECK_EQ(th_prom_value(t, "master_put_start_requests_total"), 50);
  CHECK_EQ(th_prom_value(t, "master_exist_key_requests_total"), 6);
  CHECK_EQ(th_prom_value(t, "master_get_replica_list_failures_total"), 1);
  CHECK_EQ(th_prom_value(t, "master_batch_exist_key_requests_total"), 1);
  CHECK_EQ(th_prom_value(t, "master_batch_exist_key_items_total"), 10);
  CHECK_EQ(th_prom_value(t, "master_batch_get_replica_list_items_total"), 4);
  CHECK_EQ(th_prom_value(t, "master_batch_get_replica_list_failed_items_total"), 2);
  CHECK_EQ(th_prom_value(t, "master_batch_get_replica_list_partial_successes_total"), 1);
  CHECK_EQ(th_prom_value(t, "master_mount_segment_requests_total"), 1);
  CHECK_EQ(th_prom_value(t, "total_get_nums_"), 8);
  CHECK_EQ(th_prom_value(t, "valid_get_nums_"), 5);
  CHECK_EQ(th_prom_value(t, "master_value_size_bytes_count"), 50 - th_prom_value(t, "master_put_start_failures_total"));
  CHECK(strstr(t, "master_value_size_bytes_bucket{le=\"4096\"} 10\n") != NULL);
  CHECK_EQ(th_prom_value(t, "master_active_clients"), 1);
  CHECK_EQ(th_prom_value(t, "master_total_capacity_bytes"), 64 * MiB);
  /* RPCs over the last 10 s: every one of ours (the workload took well under 10 s) */
  CHECK(fabs(th_prom_value(t, "master_rpc_qps") - rpcs / 10.0) < 1e-9);
  if (fabs(th_prom_value(t, "master_rpc_qps") - rpcs / 10.0) >= 1e-9)
    fprintf(stderr, "qps %g, expected %g\n", th_prom_value(t, "master_rpc_qps"), rpcs / 10.0);
  th_free(&r);
  /* the summary's per-second rates over the same 10 s: 6 exists, 3 of 4 replica lists, 1 batch exist */
  CHECK_EQ(th_get(M.metrics_port, "/metrics/summary", &r), 200);
  CHECK(strstr(r.body, "Requests (Success/Total per sec): PutStart=5.0/5.0, ") != NULL);
  CHECK(strstr(r.body, ", Get=0.3/0.4, Exist=0.6/0.6, ") != NULL);
  CHECK(strstr(r.body, "Batch Requests (Success/Total per sec): PutStart=0.0/0.0, PutEnd=0.0/0.0, Get=0.1/0.1, "
                       "Exist=0.1/0.1, ") != NULL);
  if (!strstr(r.body, ", Get=0.3/0.4, Exist=0.6/0.6, ")) fprintf(stderr, "summary: %s\n", r.body);
  th_free(&r);
  stop();
}

/* ------------------------------------------------------------ a real Prometheus, promtool */

struct prom {
  pid_t pid;
  int port;
  char *dir, *log;
};

/* Starts Debian's prometheus scraping the master every second; bounded wait for /-/ready. */
static int prom_start(struct prom *p) {
  memset(p, 0, sizeof(*p));
  p->dir = mc_tp_mkdtemp("prometheus");
  if (!p->dir) return -1;
  p->log = mc_tp_path(p->dir, "log");
  char *cfg = mc_tp_path(p->dir, "prometheus.yml"), *data = mc_tp_path(p->dir, "data");
  FILE *f = fopen(cfg, "w");
  if (!f) return -1;
  fprintf(f,
          "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
          "scrape_configs:\n"
          "  - job_name: mooncake_master\n"
          "    scrape_interval: 1s\n"
          "    scrape_timeout: 900ms\n"
          "    static_configs: [{targets: ['127.0.0.1:%d']}]\n",
          M.metrics_port);
  fclose(f);
  p->port = mc_tp_free_port();
  char a1[4200], a2[4200], a3[64];
  snprintf(a1, sizeof(a1), "--config.file=%s", cfg);
  snprintf(a2, sizeof(a2), "--storage.tsdb.path=%s", data);
  snprintf(a3, sizeof(a3), "--web.listen-address=127.0.0.1:%d", p->port);
  char *argv[] = {"prometheus", a1, a2, a3, "--log.level=warn", NULL};
  p->pid = mc_tp_spawn(argv, NULL, p->log);
  free(cfg);
  free(data);
  for (long deadline = mc_tp_now_ms() + 30000; p->pid > 0 && mc_tp_now_ms() < deadline; mc_tp_sleep_ms(100)) {
    struct th_resp r;
    long st = th_get(p->port, "/-/ready", &r);
    th_free(&r);
    if (st == 200) return 0;
    if (mc_tp_exited(p->pid)) break;
  }
  fprintf(stderr, "FAIL: prometheus did not become ready within 30 s\n");
  if (p->pid > 0) mc_tp_dump_log(p->log);
  return -1;
}

static void prom_stop(struct prom *p) {
  if (p->pid > 0) mc_tp_stop(p->pid, 10000);
  mc_tp_rmrf(p->dir);
  free(p->dir);
  free(p->log);
}

/* An instant query's single value (at eval time `at`, "" = now), or NAN. */
static double prom_query(const struct prom *p, const char *expr, const char *at) {
  char *esc = curl_easy_escape(NULL, expr, 0), path[1024];
  snprintf(path, sizeof(path), "/api/v1/query?query=%s%s%s", esc, *at ? "&time=" : "", at);
  curl_free(esc);
  struct th_resp r;
  double v = NAN;
  if (th_get(p->port, path, &r) == 200) {
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    json_t *res = json_object_get(json_object_get(j, "data"), "result");
    const char *s = json_string_value(json_array_get(json_object_get(json_array_get(res, 0), "value"), 1));
    if (json_array_size(res) == 1 && s) v = strtod(s, NULL);
    json_decref(j);
  }
  th_free(&r);
  return v;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

/* The guide's five through Prometheus' query API, all read at one evaluation time. */
struct five {
  double segs, evict_rate, evicted, p99, hit_ratio, qps;
};

static struct five query_five(const struct prom *p) {
  char at[32];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(at, sizeof(at), "%.3f", (double)ts.tv_sec + ts.tv_nsec / 1e9);
  return (struct five){prom_query(p, "master_segment_count", at), prom_query(p, "eviction_rate", at),
                       prom_query(p, "master_evicted_key_count", at), prom_query(p, "te_transfer_latency_p99", at),
                       prom_query(p, "store_hit_ratio", at), prom_query(p, "master_rpc_qps", at)};
}

static int five_ok(const struct five *f, const struct expected *e) {
  return near(f->segs, 1) && f->evicted >= 1 && near(f->evict_rate, f->evicted / 60) && near(f->p99, 0.0095) &&
         near(f->hit_ratio, e->hits / (e->hits + e->misses)) && near(f->qps, e->rpcs / 10.0);
}

/* Names promtool may flag: upstream-compatible ones and the guide's master_segment_count (docs/admin.md). */
static const char *const lint_exempt[] = {
    "master_segment_count", "master_key_count", "master_soft_pin_key_count", "master_evicted_key_count",
    "master_evicted_key_count_mem", "master_evicted_key_count_nof", "master_evicted_size_bytes",
    "master_evicted_size_bytes_mem", "master_evicted_size_bytes_nof", "master_successful_evictions_mem",
    "master_successful_evictions_nof", "master_attempted_evictions_mem", "master_attempted_evictions_nof",
    "mem_cache_hit_nums_", "file_cache_hit_nums_", "valid_get_nums_", "total_get_nums_", NULL};

static int exempt(const char *name) {
  for (int i = 0; lint_exempt[i]; i++)
    if (!strcmp(lint_exempt[i], name)) return 1;
  return 0;
}

/* promtool check metrics over the exposition: every problem it reports is about an exempt name. */
static void check_promtool(void) {
  struct th_resp r;
  CHECK_EQ(th_get(M.metrics_port, "/metrics", &r), 200);
  char *path = mc_tp_path(M.dir, "exposition.txt"), cmd[4200], line[1024];
  FILE *f = fopen(path, "w");
  REQUIRE(f);
  fwrite(r.body, 1, r.len, f);
  fclose(f);
  th_free(&r);
  snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' 2>&1", path);
  FILE *out = popen(cmd, "r");
  REQUIRE(out);
  int problems = 0, foreign = 0;
  while (fgets(line, sizeof(line), out)) {
    char name[256] = "";
    sscanf(line, "%255s", name);
    problems++;
    if (!exempt(name)) foreign++, fprintf(stderr, "promtool: %s", line);
  }
  int st = pclose(out);
  CHECK_EQ(foreign, 0);
  CHECK(problems > 0);                       /* the exempt upstream names are flagged, as expected */
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3); /* 3: lint problems only (a parse error is 1) */
  free(path);
}

static void test_prometheus_scrape(void) {
  REQUIRE(!start(workload_flags));
  struct prom p;
  if (prom_start(&p)) {
    CHECK(!"prometheus started");
    prom_stop(&p);
    stop();
    return;
  }
  long t0 = mc_tp_now_ms();
  struct expected e = workload();
  struct five f = {0};
  /* master_rpc_qps counts the last 10 s: every RPC of the workload until t0 + 10 s */
  while (mc_tp_now_ms() < t0 + 9500) {
    f = query_five(&p);
    if (five_ok(&f, &e)) break;
    mc_tp_sleep_ms(250);
  }
  if (!five_ok(&f, &e))
    fprintf(stderr, "prometheus: segs %g evict_rate %g evicted %g p99 %g hit_ratio %g (want %g) qps %g (want %g)\n",
            f.segs, f.evict_rate, f.evicted, f.p99, f.hit_ratio, e.hits / (e.hits + e.misses), f.qps, e.rpcs / 10.0);
  CHECK(near(f.segs, 1));
  CHECK(f.evicted >= 1);
  CHECK(near(f.evict_rate, f.evicted / 60));
  CHECK(near(f.p99, 0.0095));
  CHECK(near(f.hit_ratio, e.hits / (e.hits + e.misses)));
  CHECK(near(f.qps, e.rpcs / 10.0));
  CHECK_EQ(prom_query(&p, "store_lookup_hits_total", ""), e.hits);
  CHECK_EQ(prom_query(&p, "store_lookup_misses_total", ""), e.misses);
  CHECK_EQ(prom_query(&p, "up", ""), 1);
  check_promtool();
  prom_stop(&p);
  stop();
}

/* ------------------------------------------------------------ real store clients */

static mooncake_store_t client(uint64_t gss, uint64_t lbs, const char *meta, const char *addr) {
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, "127.0.0.1", meta, gss, lbs, "tcp", "", addr);
  if (rc) fprintf(stderr, "store setup: %d\n", rc);
  if (rc) mooncake_store_destroy(s);
  return rc ? NULL : s;
}

/* Waits until the metric reaches `want` (reports arrive every 200 ms here). */
static double wait_metric(const char *name, double want) {
  double v = NAN;
  for (long deadline = mc_tp_now_ms() + 5000; mc_tp_now_ms() < deadline; mc_tp_sleep_ms(50))
    if ((v = metric(name)) >= want) break;
  return v;
}

static void test_store_client_reports(void) {
  int meta = mc_tp_free_port();
  char a1[64], addr[64], metadata[128];
  snprintf(a1, sizeof(a1), "--http_metadata_server_port=%d", meta);
  const char *flags[] = {"--enable_http_metadata_server", a1, NULL};
  REQUIRE(!start(flags));
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", M.port);
  snprintf(metadata, sizeof(metadata), "http://127.0.0.1:%d/metadata", meta);
  setenv("MC_STORE_STATS_INTERVAL_MS", "200", 1);
  mooncake_store_t storage = client(32 * MiB, 0, metadata, addr), pure = client(0, 4 * MiB, metadata, addr);
  REQUIRE(storage && pure);
  char v[4096], out[4096];
  memset(v, 7, sizeof(v));
  for (int i = 0; i < 3; i++) {
    char key[16];
    snprintf(key, sizeof(key), "obj%d", i);
    CHECK_EQ(mooncake_store_put(pure, key, v, sizeof(v), NULL), 0);
    CHECK_EQ(mooncake_store_get_into(pure, key, out, sizeof(out)), (long long)sizeof(v));
  }
  CHECK_EQ(mooncake_store_is_exist(pure, "obj0"), 1);
  CHECK_EQ(mooncake_store_is_exist(pure, "none"), 0);
  CHECK_EQ(mooncake_store_get_into(pure, "none", out, sizeof(out)), -704);
  /* 3 writes + 3 reads through the engine (same host: shared memory), from the pure client */
  CHECK_EQ(wait_metric("te_transfer_latency_seconds_count", 6), 6);
  CHECK_EQ(wait_metric("store_client_lookup_misses_total", 2), 2);
  CHECK_EQ(metric("store_client_written_bytes_total"), 3 * sizeof(v));
  CHECK_EQ(metric("store_client_read_bytes_total"), 3 * sizeof(v));
  CHECK_EQ(metric("store_client_lookup_hits_total"), 4);
  /* the master counted the same lookups itself, once each */
  CHECK_EQ(metric("store_lookup_hits_total"), 4);
  CHECK_EQ(metric("store_lookup_misses_total"), 2);
  /* the pure client reports but is not a liveness client */
  CHECK_EQ(metric("master_active_clients"), 1);
  CHECK(metric("te_transfer_latency_p99") > 0);
  /* a short-lived client with the default 5 s interval is counted by its teardown report */
  unsetenv("MC_STORE_STATS_INTERVAL_MS");
  mooncake_store_t brief = client(0, 4 * MiB, metadata, addr);
  CHECK(brief != NULL);
  if (brief) CHECK_EQ(mooncake_store_get_into(brief, "obj1", out, sizeof(out)), (long long)sizeof(v));
  mooncake_store_destroy(brief);
  CHECK_EQ(metric("te_transfer_latency_seconds_count"), 7);
  CHECK_EQ(metric("store_client_read_bytes_total"), 4 * sizeof(v));
  mooncake_store_destroy(pure);
  mooncake_store_destroy(storage);
  stop();
}

/* ------------------------------------------------------------ log lines and listeners */

static void test_report_lines(void) {
  static const char *const flags[] = {"--metric_report_interval_sec=1", "--v=1", NULL};
  REQUIRE(!start(flags));
  CHECK(mt_wait_log(&M, "Master Admin Metrics: role=leader, state=serving, service_ready=true, master={Mem Storage: ", 5000));
  CHECK(mt_wait_log(&M, "Master Metrics: master_segment_count=0 eviction_rate=0 te_transfer_latency_p99=0 "
                        "store_hit_ratio=0 master_rpc_qps=",
                    5000));
  stop();
  static const char *const quiet[] = {"--metric_report_interval_sec=1", NULL};
  REQUIRE(!start(quiet));
  CHECK(mt_wait_log(&M, "Master Admin Metrics: role=leader", 5000));
  CHECK_EQ(mt_log_count(&M, "Master Metrics: "), 0); /* key=value only at --v=1 */
  stop();
  static const char *const off[] = {"--metric_report_interval_sec=1", "--enable_metric_reporting=false", NULL};
  REQUIRE(!start(off));
  mc_tp_sleep_ms(1500);
  CHECK_EQ(mt_log_count(&M, "Master Admin Metrics"), 0);
  stop();
}

/* "::" listens on IPv6 and IPv4; a taken port leaves the RPC service up, saying so. */
static void test_listeners(void) {
  static const char *const flags[] = {"--metrics_host=::", NULL};
  REQUIRE(!start(flags));
  struct th_resp r;
  char url[128];
  snprintf(url, sizeof(url), "http://[::1]:%d/health", M.metrics_port);
  long v6 = th_request("GET", url, NULL, &r);
  th_free(&r);
  CHECK(v6 == 200 || v6 == 0); /* 0: no IPv6 loopback on this host */
  CHECK_EQ(th_get(M.metrics_port, "/health", &r), 200);
  th_free(&r);
  char taken[40];
  snprintf(taken, sizeof(taken), "--metrics_port=%d", M.metrics_port);
  const char *second[] = {taken, NULL};
  struct mt_master other;
  CHECK_EQ(mt_master_start(&other, second), 0);
  CHECK(mt_wait_log(&other, "cannot start the admin/metrics HTTP server", 5000));
  struct mc_mrpc_client *c2 = mt_connect(other.port);
  CHECK_EQ(mt_exist(c2, "x"), 0);
  mc_mrpc_client_free(c2);
  CHECK_EQ(mt_master_stop(&other), 0);
  stop();
}

TEST_MAIN(TEST_CASE(test_endpoints), TEST_CASE(test_large_listing), TEST_CASE(test_hostile_names),
          TEST_CASE(test_drain), TEST_CASE(test_metric_values), TEST_CASE(test_prometheus_scrape),
          TEST_CASE(test_store_client_reports), TEST_CASE(test_report_lines), TEST_CASE(test_listeners))
