/* Metadata service tests: the HTTP, etcd and Redis client backends against real servers (the embedded and
 * the standalone HTTP metadata server, etcd, redis-server), the HTTP server's contract
 * (docs/transfer-engine.md, "The HTTP metadata server"), persistence across restarts, the key layout, and
 * bounded failures against dead or silent peers. */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>

#include "lib/proc.h"
#include "lib/test.h"
#include "mooncake/transfer_engine.h"
#include "meta/metadata.h"
#include "meta/metadata_curl.h"
#include "meta/metadata_server.h"

/* ---- helpers ---- */

static struct mc_meta *open_ok(const char *conn) {
  struct mc_meta *m = NULL;
  int rc = mc_meta_open(conn, &m);
  CHECK_EQ(rc, 0);
  CHECK(m != NULL);
  return rc ? NULL : m;
}

static struct mc_meta *open_http(int port, const char *suffix) {
  char conn[128];
  snprintf(conn, sizeof(conn), "http://127.0.0.1:%d/metadata%s", port, suffix);
  return open_ok(conn);
}

static void check_get(struct mc_meta *m, const char *key, const char *want) {
  char *v = (char *)"untouched";
  int rc = mc_meta_get(m, key, &v);
  if (!want) {
    CHECK_EQ(rc, MC_META_NOT_FOUND);
    CHECK(v == NULL);
    return;
  }
  CHECK_EQ(rc, 0);
  if (rc == 0 && strlen(want) < 200) CHECK_STR(v, want);
  if (rc == 0 && strlen(want) >= 200) CHECK(v && !strcmp(v, want));
  if (rc == 0) free(v);
}

static void roundtrip_basic(struct mc_meta *m, const char *tag) {
  char key[256];
  snprintf(key, sizeof(key), "mooncake/test/%s/a/b c?d&e=f%%g+h#i", tag);
  check_get(m, key, NULL);
  CHECK_EQ(mc_meta_set(m, key, "{\"x\":1}"), 0);
  check_get(m, key, "{\"x\":1}");
  CHECK_EQ(mc_meta_set(m, key, "{\"x\":2,\"s\":\"\xc3\xbc\"}"), 0); /* overwrite */
  check_get(m, key, "{\"x\":2,\"s\":\"\xc3\xbc\"}");
  CHECK_EQ(mc_meta_remove(m, key), 0);
  check_get(m, key, NULL);
  CHECK_EQ(mc_meta_remove(m, key), 0); /* removing a missing key is not an error */
  snprintf(key, sizeof(key), "mooncake/ram/%s-\xc3\xbc\xd0\xba/x", tag);
  CHECK_EQ(mc_meta_set(m, key, ""), 0); /* empty value */
  check_get(m, key, "");
  for (int len = 1; len <= 5; len++) { /* every base64 tail shape */
    char v[8] = "abcde";
    v[len] = 0;
    CHECK_EQ(mc_meta_set(m, key, v), 0);
    check_get(m, key, v);
  }
  CHECK_EQ(mc_meta_remove(m, key), 0);
}

static void roundtrip_big(struct mc_meta *m, const char *tag) {
  size_t n = 1000 * 1000;
  char *big = malloc(n + 1), key[128];
  memset(big, 'v', n);
  memcpy(big, "{\"pad\":\"", 8);
  memcpy(big + n - 2, "\"}", 2);
  big[n] = 0;
  snprintf(key, sizeof(key), "mooncake/test/%s/big", tag);
  CHECK_EQ(mc_meta_set(m, key, big), 0);
  check_get(m, key, big);
  CHECK_EQ(mc_meta_remove(m, key), 0);
  free(big);
}

static void roundtrip_many(struct mc_meta *m, const char *tag, int count) {
  char key[128], val[64];
  for (int i = 0; i < count; i++) {
    snprintf(key, sizeof(key), "mooncake/test/%s/many/%d", tag, i);
    snprintf(val, sizeof(val), "{\"i\":%d}", i);
    CHECK_EQ(mc_meta_set(m, key, val), 0);
  }
  for (int i = 0; i < count; i++) {
    snprintf(key, sizeof(key), "mooncake/test/%s/many/%d", tag, i);
    snprintf(val, sizeof(val), "{\"i\":%d}", i);
    check_get(m, key, val);
    CHECK_EQ(mc_meta_remove(m, key), 0);
  }
  snprintf(key, sizeof(key), "mooncake/test/%s/many/0", tag);
  check_get(m, key, NULL);
}

static void roundtrip(struct mc_meta *m, const char *tag) {
  if (!m) return;
  roundtrip_basic(m, tag);
  roundtrip_big(m, tag);
  roundtrip_many(m, tag, 200);
}

/* Several threads sharing one handle. */
struct par_arg {
  struct mc_meta *m;
  int id, errors;
};

static void *par_worker(void *p) {
  struct par_arg *a = p;
  char key[64], val[64], *v;
  for (int i = 0; i < 40; i++) {
    snprintf(key, sizeof(key), "mooncake/test/par/%d/%d", a->id, i);
    snprintf(val, sizeof(val), "{\"t\":%d,\"i\":%d}", a->id, i);
    if (mc_meta_set(a->m, key, val)) a->errors++;
    v = NULL;
    if (mc_meta_get(a->m, key, &v) || strcmp(v, val)) a->errors++;
    free(v);
    if (mc_meta_remove(a->m, key)) a->errors++;
  }
  return NULL;
}

static void concurrent(struct mc_meta *m) {
  enum { N = 8 };
  pthread_t t[N];
  struct par_arg a[N];
  for (int i = 0; i < N; i++) {
    a[i] = (struct par_arg){m, i, 0};
    pthread_create(&t[i], NULL, par_worker, &a[i]);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].errors, 0);
  }
}

/* Raw HTTP through libcurl (status, body and content type). */
struct http_ans {
  long status;
  char body[4096];
  size_t len;
  char ctype[64];
};

static size_t ans_write(char *d, size_t sz, size_t n, void *ud) {
  struct http_ans *a = ud;
  size_t k = sz * n, room = sizeof(a->body) - 1 - a->len;
  memcpy(a->body + a->len, d, k < room ? k : room);
  a->len += k < room ? k : room;
  a->body[a->len] = 0;
  return k;
}

static void http_do(const char *method, int port, const char *path, const char *body, long body_len,
                    const char *header, struct http_ans *a) {
  char url[512];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  memset(a, 0, sizeof(*a));
  CURL *h = curl_easy_init();
  struct curl_slist *hdrs = header ? curl_slist_append(NULL, header) : NULL;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (!strcmp(method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ans_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
  curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
  char *ct = NULL;
  curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
  if (ct) snprintf(a->ctype, sizeof(a->ctype), "%s", ct);
  curl_slist_free_all(hdrs);
  curl_easy_cleanup(h);
}

static void expect(const char *method, int port, const char *path, const char *body, long status,
                   const char *text) {
  struct http_ans a;
  http_do(method, port, path, body, body ? (long)strlen(body) : 0, NULL, &a);
  if (a.status != status || (text && strcmp(a.body, text)))
    fprintf(stderr, "  %s %s -> %ld '%s'\n", method, path, a.status, a.body);
  CHECK_EQ(a.status, status);
  if (text) CHECK_STR(a.body, text);
}

static double elapsed_ms(long start) { return (double)(mc_tp_now_ms() - start); }

static char *bin_path(const char *name) {
  const char *dir = getenv("MC_TEST_BIN_DIR");
  if (!dir) {
    fprintf(stderr, "FAIL: MC_TEST_BIN_DIR is not set (run the test through ctest)\n");
    return NULL;
  }
  char *p = mc_tp_path(dir, name);
  if (access(p, X_OK)) {
    fprintf(stderr, "FAIL: %s is missing (build the tools first)\n", p);
    free(p);
    return NULL;
  }
  return p;
}

/* ---- key layout and connection strings ---- */

static void test_key_layout(void) {
  char buf[256];
  REQUIRE(getenv("MC_METADATA_CLUSTER_ID") == NULL || !*getenv("MC_METADATA_CLUSTER_ID"));
  CHECK_STR(mc_meta_prefix(), "mooncake/");
  CHECK_EQ(mc_meta_rpc_key(buf, sizeof(buf), "10.0.0.1:12345"), strlen("mooncake/rpc_meta/10.0.0.1:12345"));
  CHECK_STR(buf, "mooncake/rpc_meta/10.0.0.1:12345");
  mc_meta_segment_key(buf, sizeof(buf), "10.0.0.2:15000");
  CHECK_STR(buf, "mooncake/ram/10.0.0.2:15000");
  mc_meta_segment_key(buf, sizeof(buf), "nvmeof/pool1");
  CHECK_STR(buf, "mooncake/nvmeof/pool1");
  CHECK_EQ(mc_meta_segment_key(buf, 8, "seg"), strlen("mooncake/ram/seg")); /* truncated like snprintf */
  CHECK_STR(buf, "mooncak");
}

/* Runs in a child started by test_cluster_prefix with MC_TEST_EXPECT_PREFIX set; a no-op otherwise. */
static void child_cluster_prefix(void) {
  const char *want = getenv("MC_TEST_EXPECT_PREFIX");
  if (!want) return;
  char buf[256], exp[256];
  CHECK_STR(mc_meta_prefix(), want);
  mc_meta_rpc_key(buf, sizeof(buf), "n1");
  snprintf(exp, sizeof(exp), "%srpc_meta/n1", want);
  CHECK_STR(buf, exp);
  mc_meta_segment_key(buf, sizeof(buf), "s1");
  snprintf(exp, sizeof(exp), "%sram/s1", want);
  CHECK_STR(buf, exp);
}

static void test_cluster_prefix(void) {
  static const char *cases[][2] = {{"c1", "mooncake/c1/"},
                                   {"c1/", "mooncake/c1/"},
                                   {"/c1//", "mooncake/c1/"},
                                   {"", "mooncake/"},
                                   {"a/b", "mooncake/a/b/"}};
  char self[512], *dir = mc_tp_mkdtemp("prefix");
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(n > 0 && dir);
  self[n] = 0;
  char *log = mc_tp_path(dir, "log");
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char id[64], expect_env[64];
    snprintf(id, sizeof(id), "MC_METADATA_CLUSTER_ID=%s", cases[i][0]);
    snprintf(expect_env, sizeof(expect_env), "MC_TEST_EXPECT_PREFIX=%s", cases[i][1]);
    char *argv[] = {self, "child_cluster_prefix", NULL}, *env[] = {id, expect_env, NULL};
    pid_t pid = mc_tp_spawn(argv, env, log);
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fprintf(stderr, "  cluster id '%s' failed\n", cases[i][0]);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  if (mc_test_failures) mc_tp_dump_log(log);
  free(log);
  mc_tp_rmrf(dir);
  free(dir);
}

static void expect_open_fails(const char *conn) {
  struct mc_meta *m = (struct mc_meta *)1;
  int rc = mc_meta_open(conn, &m);
  if (rc != ERR_METADATA) fprintf(stderr, "  open('%s') = %d\n", conn ? conn : "(null)", rc);
  CHECK_EQ(rc, ERR_METADATA);
  CHECK(m == NULL);
}

static void expect_open_scheme(const char *conn, const char *scheme) {
  struct mc_meta *m = NULL;
  CHECK_EQ(mc_meta_open(conn, &m), 0);
  if (!m) return;
  CHECK_STR(m->ops->scheme, scheme);
  CHECK_STR(m->conn, conn);
  mc_meta_close(m);
}

static void test_open_schemes(void) {
  CHECK(mc_meta_is_p2p("P2PHANDSHAKE"));
  CHECK(!mc_meta_is_p2p("p2phandshake"));
  CHECK(!mc_meta_is_p2p("P2PHANDSHAKE "));
  CHECK(!mc_meta_is_p2p(NULL));
  struct mc_meta *m = (struct mc_meta *)1;
  CHECK_EQ(mc_meta_open("P2PHANDSHAKE", &m), 0);
  CHECK(m == NULL);
  const char *bad[] = {NULL,
                       "",
                       " ; ,",
                       "etcd://",
                       "etcd:// , ;;",
                       "zk://127.0.0.1:2181",
                       "foo://bar",
                       "://x",
                       "redis://",
                       "redis://:6379",
                       "redis://h:99999",
                       "redis://h:12x",
                       "redis://[::1",
                       "http://",
                       "http:///metadata"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) expect_open_fails(bad[i]);
  expect_open_scheme("http://127.0.0.1:1/metadata", "http");
  expect_open_scheme("HTTP://127.0.0.1:1/metadata", "http");
  expect_open_scheme("https://example.invalid/metadata", "http");
  expect_open_scheme("etcd://127.0.0.1:1", "etcd");
  expect_open_scheme("etcd://a:1, b:2 ;;c:3", "etcd");
  expect_open_scheme("127.0.0.1:2379", "etcd");
  expect_open_scheme("redis://127.0.0.1:6379", "redis");
  expect_open_scheme("redis://[::1]:6379", "redis");
  expect_open_scheme("redis://localhost", "redis");
  mc_meta_close(NULL);
}

/* ---- HTTP server and backend ---- */

static void test_embedded_server_roundtrip(void) {
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(s != NULL);
  int port = mc_meta_server_port(s);
  CHECK(port > 0);
  struct mc_meta *m = open_http(port, "");
  roundtrip(m, "http");
  concurrent(m);
  /* rpc_meta keys are write-once (identical re-PUT is fine) */
  const char *rk = "mooncake/rpc_meta/10.0.0.1:12345";
  CHECK_EQ(mc_meta_set(m, rk, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":15001}"), 0);
  CHECK_EQ(mc_meta_set(m, rk, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":15001}"), 0);
  CHECK_EQ(mc_meta_set(m, rk, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":15002}"), ERR_METADATA);
  check_get(m, rk, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":15001}");
  CHECK_EQ(mc_meta_server_delete(s, rk), 0);
  CHECK_EQ(mc_meta_server_delete(s, rk), 1);
  CHECK_EQ(mc_meta_set(m, rk, "{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":15002}"), 0);
  mc_meta_close(m);
  /* a URL that already has a query string gets "&key=" */
  m = open_http(port, "?unused=1");
  CHECK_EQ(mc_meta_set(m, "q/k", "{\"q\":1}"), 0);
  check_get(m, "q/k", "{\"q\":1}");
  mc_meta_close(m);
  mc_meta_server_stop(s);
}

static void test_http_contract(void) {
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(s != NULL);
  int p = mc_meta_server_port(s);
  expect("GET", p, "/health", NULL, 200, "OK");
  expect("HEAD", p, "/health", NULL, 200, NULL);
  expect("POST", p, "/health", "x", 405, NULL);
  expect("GET", p, "/nope", NULL, 404, NULL);
  expect("GET", p, "/metadata/", NULL, 404, NULL);
  expect("GET", p, "/metadata", NULL, 400, "Missing key parameter");
  expect("GET", p, "/metadata?key=", NULL, 400, "Missing key parameter");
  expect("PUT", p, "/metadata", "{}", 400, "Missing key parameter");
  expect("DELETE", p, "/metadata?other=1", NULL, 400, "Missing key parameter");
  expect("GET", p, "/metadata?key=absent", NULL, 404, "metadata not found");
  expect("DELETE", p, "/metadata?key=absent", NULL, 404, "metadata not found");
  expect("POST", p, "/metadata?key=k1", "{}", 405, "Method not allowed");
  expect("PATCH", p, "/metadata?key=k1", "{}", 405, "Method not allowed");
  expect("PUT", p, "/metadata?key=k1", "{\"a\":1}", 200, "metadata updated");
  expect("PUT", p, "/metadata?key=k1", "{\"a\":2}", 200, "metadata updated");
  struct http_ans a;
  http_do("GET", p, "/metadata?key=k1", NULL, 0, NULL, &a);
  CHECK_EQ(a.status, 200);
  CHECK_STR(a.body, "{\"a\":2}");
  CHECK_STR(a.ctype, "application/json");
  expect("DELETE", p, "/metadata?key=k1", NULL, 200, "metadata deleted");
  expect("GET", p, "/metadata?key=k1", NULL, 404, "metadata not found");
  /* write-once rpc_meta */
  expect("PUT", p, "/metadata?key=mooncake/rpc_meta/n1", "A", 200, "metadata updated");
  expect("PUT", p, "/metadata?key=mooncake/rpc_meta/n1", "A", 200, "metadata unchanged");
  expect("PUT", p, "/metadata?key=mooncake/rpc_meta/n1", "B", 400, "Duplicate rpc_meta key not allowed");
  expect("GET", p, "/metadata?key=mooncake/rpc_meta/n1", NULL, 200, "A");
  expect("DELETE", p, "/metadata?key=mooncake/rpc_meta/n1", NULL, 200, "metadata deleted");
  expect("PUT", p, "/metadata?key=mooncake/rpc_meta/n1", "B", 200, "metadata updated");
  /* percent-decoding of the key, bad bytes */
  expect("PUT", p, "/metadata?key=a%2Fb%20c", "{\"d\":1}", 200, "metadata updated");
  struct mc_meta *m = open_http(p, "");
  if (m) check_get(m, "a/b c", "{\"d\":1}");
  mc_meta_close(m);
  expect("PUT", p, "/metadata?key=%FF%FE", "{}", 400, NULL);
  expect("PUT", p, "/metadata?key=x%00y", "{}", 400, NULL);
  expect("PUT", p, "/metadata?key=bad_body", "\xff\xfe", 400, NULL);
  expect("GET", p, "/metadata?key=bad_body", NULL, 404, NULL);
  mc_meta_server_stop(s);
}

static void test_http_body_limit(void) {
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(s != NULL);
  int p = mc_meta_server_port(s);
  size_t n = (16u << 20) + 1;
  char *big = malloc(n);
  memset(big, 'a', n);
  struct http_ans a;
  http_do("PUT", p, "/metadata?key=big", big, (long)n, NULL, &a); /* declared length */
  CHECK_EQ(a.status, 413);
  http_do("PUT", p, "/metadata?key=big", big, (long)n, "Transfer-Encoding: chunked", &a); /* streamed */
  CHECK_EQ(a.status, 413);
  http_do("PUT", p, "/metadata?key=big", big, (long)n - 1, NULL, &a); /* exactly the limit */
  CHECK_EQ(a.status, 200);
  expect("GET", p, "/health", NULL, 200, "OK");
  free(big);
  mc_meta_server_stop(s);
}

static void test_http_persistence(void) {
  char *dir = mc_tp_mkdtemp("persist");
  REQUIRE(dir);
  char *path = mc_tp_path(dir, "meta.json"), *tmp = mc_tp_path(dir, "meta.json.tmp");
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, path);
  REQUIRE(s != NULL);
  struct mc_meta *m = open_http(mc_meta_server_port(s), "");
  CHECK_EQ(mc_meta_set(m, "k1", "{\"v\":1}"), 0);
  CHECK_EQ(mc_meta_set(m, "k2", "{\"v\":2}"), 0);
  CHECK_EQ(mc_meta_set(m, "mooncake/rpc_meta/n", "{\"rpc_port\":1}"), 0);
  CHECK_EQ(mc_meta_remove(m, "k2"), 0);
  mc_meta_close(m);
  mc_meta_server_stop(s);
  json_t *j = json_load_file(path, 0, NULL);
  CHECK(json_is_object(j));
  CHECK_STR(json_string_value(json_object_get(j, "k1")), "{\"v\":1}");
  CHECK(json_object_get(j, "k2") == NULL);
  CHECK_EQ(json_object_size(j), 2);
  json_decref(j);
  CHECK(access(tmp, F_OK) != 0);
  /* a restarted server has everything, write-once included */
  s = mc_meta_server_start("127.0.0.1", 0, path);
  REQUIRE(s != NULL);
  m = open_http(mc_meta_server_port(s), "");
  check_get(m, "k1", "{\"v\":1}");
  check_get(m, "k2", NULL);
  CHECK_EQ(mc_meta_set(m, "mooncake/rpc_meta/n", "{\"rpc_port\":2}"), ERR_METADATA);
  CHECK_EQ(mc_meta_server_delete(s, "k1"), 0);
  mc_meta_close(m);
  mc_meta_server_stop(s);
  s = mc_meta_server_start("127.0.0.1", 0, path);
  REQUIRE(s != NULL);
  m = open_http(mc_meta_server_port(s), "");
  check_get(m, "k1", NULL);
  check_get(m, "mooncake/rpc_meta/n", "{\"rpc_port\":1}");
  mc_meta_close(m);
  mc_meta_server_stop(s);
  /* a corrupt file refuses to start (rather than being overwritten); non-string values are dropped */
  FILE *f = fopen(path, "w");
  fputs("{not json", f);
  fclose(f);
  CHECK(mc_meta_server_start("127.0.0.1", 0, path) == NULL);
  f = fopen(path, "w");
  fputs("{\"a\":1,\"b\":\"x\"}", f);
  fclose(f);
  s = mc_meta_server_start("127.0.0.1", 0, path);
  REQUIRE(s != NULL);
  m = open_http(mc_meta_server_port(s), "");
  check_get(m, "a", NULL);
  check_get(m, "b", "x");
  mc_meta_close(m);
  mc_meta_server_stop(s);
  CHECK(mc_meta_server_start("127.0.0.1", 0, "/nonexistent-dir/x/meta.json") == NULL); /* unwritable */
  free(path);
  free(tmp);
  mc_tp_rmrf(dir);
  free(dir);
}

static void test_server_bind_errors(void) {
  struct mc_meta_server *a = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(a != NULL);
  CHECK(mc_meta_server_start("127.0.0.1", mc_meta_server_port(a), NULL) == NULL); /* port taken */
  CHECK(mc_meta_server_start("no-such-host.invalid", 0, NULL) == NULL);
  mc_meta_server_stop(a);
  mc_meta_server_stop(NULL);
}

/* Sends junk over a raw socket; returns the status code of the answer (or -1 when none). */
static int junk(int port, const char *req, size_t len) {
  char resp[4096];
  long n = mc_tp_raw_http(port, req, len, resp, sizeof(resp), 500);
  return n > 0 ? mc_tp_http_status(resp) : -1;
}

static void check_alive(int port) {
  static const char req[] = "GET /health HTTP/1.0\r\n\r\n";
  char resp[1024];
  CHECK(mc_tp_raw_http(port, req, sizeof(req) - 1, resp, sizeof(resp), 2000) > 0);
  CHECK_EQ(mc_tp_http_status(resp), 200);
  CHECK(strstr(resp, "\r\n\r\nOK") != NULL);
}

#define JUNK(p, s) junk((p), (s), sizeof(s) - 1)

static void test_malformed_requests(void) {
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(s != NULL);
  int p = mc_meta_server_port(s);
  int st = JUNK(p, "GARBAGE\r\n\r\n");
  CHECK(st == -1 || (st >= 400 && st < 500));
  check_alive(p);
  char bin[1024];
  for (size_t i = 0; i < sizeof(bin); i++) bin[i] = (char)(i * 131 + 7);
  junk(p, bin, sizeof(bin));
  check_alive(p);
  st = JUNK(p, "GET /metadata?key=%ZZ% HTTP/1.0\r\n\r\n");
  CHECK(st >= 400 && st < 500);
  st = JUNK(p, "PUT /metadata?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n");
  CHECK(st >= 400 && st < 500);
  st = JUNK(p, "PUT /metadata?key=a HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n");
  CHECK(st >= 400 && st < 500);
  st = JUNK(p, "PUT /metadata?key=a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n");
  CHECK(st >= 400 && st < 500);
  st = JUNK(p, "PUT /metadata?key=trunc HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
  CHECK_EQ(st, -1); /* incomplete: no answer, and nothing stored */
  st = JUNK(p, "GET /metadata?key=a\x01\x02 HTTP/1.0\r\n\r\n");
  CHECK(st == -1 || (st >= 400 && st < 500));
  size_t hl = 200 * 1024;
  char *huge = malloc(hl + 64);
  int off = sprintf(huge, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
  memset(huge + off, 'a', hl);
  memcpy(huge + off + hl, "\r\n\r\n", 4);
  st = junk(p, huge, off + hl + 4);
  CHECK(st == -1 || (st >= 400 && st < 500));
  free(huge);
  check_alive(p);
  struct mc_meta *m = open_http(p, "");
  check_get(m, "trunc", NULL);
  check_get(m, "a", NULL);
  mc_meta_close(m);
  mc_meta_server_stop(s);
}

/* ---- the standalone binary ---- */

static pid_t start_standalone(const char *bin, int port, const char *persist, const char *log) {
  char pa[32], pp[512];
  snprintf(pa, sizeof(pa), "--port=%d", port);
  snprintf(pp, sizeof(pp), "--persist_path=%s", persist);
  char *argv[] = {(char *)bin, pa, "--host=127.0.0.1", pp, "--log-level=WARNING", NULL};
  pid_t pid = mc_tp_spawn(argv, NULL, log);
  if (pid > 0 && mc_tp_wait_port(port, 10000, pid)) {
    mc_tp_dump_log(log);
    mc_tp_stop(pid, 1000);
    return -1;
  }
  return pid;
}

static int run_to_exit(char *const argv[], const char *log) {
  pid_t pid = mc_tp_spawn(argv, NULL, log);
  int st = -1;
  if (pid > 0) waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_contains(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char buf[8192];
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return strstr(buf, needle) != NULL;
}

static void test_standalone_binary(void) {
  char *bin = bin_path("mooncake_http_metadata_server"), *dir = mc_tp_mkdtemp("standalone");
  REQUIRE(bin && dir);
  char *log = mc_tp_path(dir, "log"), *persist = mc_tp_path(dir, "meta.json"), line[128];
  int port = mc_tp_free_port();
  pid_t pid = start_standalone(bin, port, persist, log);
  CHECK(pid > 0);
  struct mc_meta *m = pid > 0 ? open_http(port, "") : NULL;
  roundtrip(m, "standalone");
  if (m) CHECK_EQ(mc_meta_set(m, "survives/restart", "{\"r\":1}"), 0);
  mc_meta_close(m);
  int st = mc_tp_stop(pid, 5000);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  snprintf(line, sizeof(line), "mooncake_http_metadata_server listening on 127.0.0.1:%d\n", port);
  CHECK(file_contains(log, line));
  pid = start_standalone(bin, port, persist, log); /* same port, same file */
  CHECK(pid > 0);
  m = pid > 0 ? open_http(port, "") : NULL;
  if (m) check_get(m, "survives/restart", "{\"r\":1}");
  mc_meta_close(m);
  kill(pid, SIGINT);
  st = mc_tp_stop(pid, 5000);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *bad_flag[] = {bin, "--bogus=1", NULL}, *bad_level[] = {bin, "--log-level=LOUD", NULL};
  char *help[] = {bin, "--help", NULL};
  CHECK_EQ(run_to_exit(bad_flag, log), 1);
  CHECK_EQ(run_to_exit(bad_level, log), 1);
  CHECK_EQ(run_to_exit(help, log), 0);
  free(log);
  free(persist);
  free(bin);
  mc_tp_rmrf(dir);
  free(dir);
}

/* ---- etcd ---- */

/* Raw call to etcd's JSON gateway; returns the answer body (static buffer) or "". */
static const char *etcd_raw(int port, const char *path, const char *json) {
  static char resp[8192];
  char req[1024];
  int n = snprintf(req, sizeof(req),
                   "POST %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   path, strlen(json), json);
  if (mc_tp_raw_http(port, req, (size_t)n, resp, sizeof(resp), 3000) <= 0) resp[0] = 0;
  return resp;
}

/* ---- compare-and-swap and prefix listing (docs/p2p-store.md, "Metadata") ---- */

/* Create-only, a stale revision losing, delete-if, listing by prefix (with a lookalike outside it). */
static void cas_contract(struct mc_meta *m) {
  const char *key = "mooncake/checkpoint/cas/one";
  char *v = NULL;
  uint64_t rev = 0, rev2 = 0;
  int won = -1;
  REQUIRE(m != NULL);
  CHECK_EQ(mc_meta_get_rev(m, key, &v, &rev), MC_META_NOT_FOUND);
  CHECK_EQ(mc_meta_cas(m, key, "{\"v\":1}", 0, &won), 0);
  CHECK_EQ(won, 1);
  CHECK_EQ(mc_meta_cas(m, key, "{\"v\":9}", 0, &won), 0); /* exists: create-only loses */
  CHECK_EQ(won, 0);
  CHECK_EQ(mc_meta_get_rev(m, key, &v, &rev), 0);
  CHECK_STR(v, "{\"v\":1}");
  free(v);
  CHECK(rev != 0);
  CHECK_EQ(mc_meta_cas(m, key, "{\"v\":2}", rev, &won), 0);
  CHECK_EQ(won, 1);
  CHECK_EQ(mc_meta_cas(m, key, "{\"v\":3}", rev, &won), 0); /* the revision read before the write: stale */
  CHECK_EQ(won, 0);
  CHECK_EQ(mc_meta_get_rev(m, key, &v, &rev2), 0);
  CHECK_STR(v, "{\"v\":2}");
  free(v);
  CHECK(rev2 != rev);
  CHECK_EQ(mc_meta_cas(m, key, NULL, rev, &won), 0); /* stale delete keeps the key */
  CHECK_EQ(won, 0);
  CHECK_EQ(mc_meta_set(m, "mooncake/checkpoint/cas/two", "2"), 0);
  CHECK_EQ(mc_meta_set(m, "mooncake/checkpoint/cat", "x"), 0);
  char **keys, **vals;
  size_t n = 0;
  CHECK_EQ(mc_meta_list(m, "mooncake/checkpoint/cas/", 100, &keys, &vals, &n), 0);
  CHECK_EQ(n, 2);
  for (size_t i = 0; i < n; i++)
    CHECK_STR(vals[i], !strcmp(keys[i], key) ? "{\"v\":2}" : "2");
  mc_meta_list_free(keys, vals, n);
  CHECK_EQ(mc_meta_list(m, "mooncake/checkpoint/ca", 1, &keys, &vals, &n), 0); /* capped */
  CHECK_EQ(n, 1);
  mc_meta_list_free(keys, vals, n);
  CHECK_EQ(mc_meta_cas(m, key, NULL, rev2, &won), 0);
  CHECK_EQ(won, 1);
  CHECK_EQ(mc_meta_get_rev(m, key, &v, &rev), MC_META_NOT_FOUND);
  CHECK_EQ(mc_meta_remove(m, "mooncake/checkpoint/cas/two"), 0);
  CHECK_EQ(mc_meta_remove(m, "mooncake/checkpoint/cat"), 0);
}

struct cas_arg {
  struct mc_meta *m;
  int errors, conflicts;
};

/* Adds 1 to the counter 20 times with a read / compare-and-swap loop. */
static void *cas_worker(void *p) {
  struct cas_arg *a = p;
  for (int i = 0; i < 20; i++) {
    for (int won = 0; !won;) {
      char *v = NULL, next[32];
      uint64_t rev = 0;
      if (mc_meta_get_rev(a->m, "mooncake/checkpoint/counter", &v, &rev)) {
        a->errors++;
        return NULL;
      }
      snprintf(next, sizeof(next), "%d", atoi(v) + 1);
      free(v);
      if (mc_meta_cas(a->m, "mooncake/checkpoint/counter", next, rev, &won)) a->errors++;
      a->conflicts += !won;
    }
  }
  return NULL;
}

/* Concurrent read-modify-writes lose no update. */
static void cas_counter(struct mc_meta *m) {
  enum { N = 4 };
  pthread_t t[N];
  struct cas_arg a[N];
  CHECK_EQ(mc_meta_set(m, "mooncake/checkpoint/counter", "0"), 0);
  int conflicts = 0;
  for (int i = 0; i < N; i++) {
    a[i] = (struct cas_arg){m, 0, 0};
    pthread_create(&t[i], NULL, cas_worker, &a[i]);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].errors, 0);
    conflicts += a[i].conflicts;
  }
  check_get(m, "mooncake/checkpoint/counter", "80");
  fprintf(stderr, "cas_counter: %d conflicts retried\n", conflicts);
  CHECK_EQ(mc_meta_remove(m, "mooncake/checkpoint/counter"), 0);
}

static void test_http_cas(void) {
  struct mc_meta_server *s = mc_meta_server_start("127.0.0.1", 0, NULL);
  REQUIRE(s != NULL);
  struct mc_meta *m = open_http(mc_meta_server_port(s), "");
  cas_contract(m);
  cas_counter(m);
  /* a bad precondition header is refused, not ignored */
  char url[128];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/metadata?key=k", mc_meta_server_port(s));
  struct mc_curl_opts o = {.timeout_ms = 3000, .connect_timeout_ms = 1500, .header = "If-Match: nonsense"};
  struct mc_curl_resp r;
  char err[256];
  CHECK_EQ(mc_curl_request_o("PUT", url, "x", 1, &o, &r, err, sizeof(err)), 0);
  CHECK_EQ(r.status, 400);
  mc_curl_resp_free(&r);
  check_get(m, "k", NULL);
  mc_meta_close(m);
  mc_meta_server_stop(s);
}

static void test_etcd_cas(void) {
  struct mc_tp_service etcd;
  REQUIRE(mc_tp_start_etcd(&etcd) == 0);
  char conn[160];
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", etcd.port);
  struct mc_meta *m = open_ok(conn);
  cas_contract(m);
  cas_counter(m);
  mc_meta_close(m);
  mc_tp_service_stop(&etcd);
}

static void test_etcd_backend(void) {
  struct mc_tp_service etcd;
  REQUIRE(mc_tp_start_etcd(&etcd) == 0);
  char conn[160];
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", etcd.port);
  struct mc_meta *m = open_ok(conn);
  roundtrip(m, "etcd");
  concurrent(m);
  /* wire format: the key is stored as given, so etcdctl get --prefix mooncake/ sees it */
  const char *key = "mooncake/test/etcd/wire";
  if (m) CHECK_EQ(mc_meta_set(m, key, "{\"a\":1}"), 0);
  CHECK(strstr(etcd_raw(etcd.port, "/v3/kv/range", "{\"key\":\"bW9vbmNha2UvdGVzdC9ldGNkL3dpcmU=\"}"),
               "\"value\":\"eyJhIjoxfQ==\"") != NULL);
  etcd_raw(etcd.port, "/v3/kv/put",
           "{\"key\":\"bW9vbmNha2UvdGVzdC9ldGNkL3dpcmU=\",\"value\":\"eyJiIjoyfQ==\"}");
  if (m) check_get(m, key, "{\"b\":2}");
  mc_meta_close(m);
  /* bare host:port, and a dead first endpoint (failover) */
  int dead = mc_tp_free_port();
  snprintf(conn, sizeof(conn), " 127.0.0.1:%d ; 127.0.0.1:%d ,", dead, etcd.port);
  m = open_ok(conn);
  if (m) {
    check_get(m, key, "{\"b\":2}");
    CHECK_EQ(mc_meta_remove(m, key), 0);
    check_get(m, key, NULL);
  }
  mc_meta_close(m);
  mc_tp_service_stop(&etcd);
}

/* ---- redis ---- */

static struct mc_meta *open_redis(int port) {
  char conn[64];
  snprintf(conn, sizeof(conn), "redis://127.0.0.1:%d", port);
  return open_ok(conn);
}

static void redis_db_index(int port) {
  setenv("MC_REDIS_DB_INDEX", "5", 1);
  struct mc_meta *m5 = open_redis(port);
  setenv("MC_REDIS_DB_INDEX", "300", 1); /* out of range -> db 0 */
  struct mc_meta *m0 = open_redis(port);
  unsetenv("MC_REDIS_DB_INDEX");
  if (!m5 || !m0) return;
  CHECK_EQ(mc_meta_set(m5, "dbkey", "five"), 0);
  check_get(m0, "dbkey", NULL);
  check_get(m5, "dbkey", "five");
  CHECK_EQ(mc_meta_set(m0, "dbkey", "zero"), 0);
  check_get(m5, "dbkey", "five");
  mc_meta_close(m5);
  mc_meta_close(m0);
}

static void test_redis_backend(void) {
  struct mc_tp_service r = {0};
  REQUIRE(mc_tp_start_redis(&r, 0, NULL) == 0);
  setenv("MC_METADATA_TTL_S", "0", 1); /* plain keys: a restarted server must come back empty below */
  struct mc_meta *m = open_redis(r.port);
  unsetenv("MC_METADATA_TTL_S");
  roundtrip(m, "redis");
  concurrent(m);
  redis_db_index(r.port);
  /* the server restarts: the broken connection is replaced on the next call */
  if (m) CHECK_EQ(mc_meta_set(m, "before", "1"), 0);
  mc_tp_stop(r.pid, 5000);
  CHECK_EQ(mc_tp_start_redis(&r, r.port, NULL), 0);
  if (m) {
    check_get(m, "before", NULL); /* a fresh server without persistence */
    CHECK_EQ(mc_meta_set(m, "after", "2"), 0);
    check_get(m, "after", "2");
  }
  mc_meta_close(m);
  mc_tp_service_stop(&r);
}

/* ---- keys bound to the writer's liveness (docs/transfer-engine.md, "Metadata") ---- */

#define BOUND_KEY "mooncake/test/bound"

/* Child: writes BOUND_KEY through a bound mc_meta and waits to be killed. */
static void child_bound_writer(void) {
  const char *conn = getenv("MC_TEST_BOUND_CONN");
  if (!conn) return;
  struct mc_meta *m = open_ok(conn);
  REQUIRE(m && m->live);
  CHECK_EQ(mc_meta_set(m, BOUND_KEY, "alive"), 0);
  mc_tp_sleep_ms(60000);
  mc_meta_close(m);
}

/* An observer that never binds (MC_METADATA_TTL_S=0). */
static struct mc_meta *open_unbound(const char *conn) {
  setenv("MC_METADATA_TTL_S", "0", 1);
  struct mc_meta *m = open_ok(conn);
  unsetenv("MC_METADATA_TTL_S");
  CHECK(!m || !m->live);
  return m;
}

/* Polls until key has (want != NULL) or lacks (want == NULL) a value; returns the ms it took or -1. */
static long wait_key(struct mc_meta *m, const char *key, const char *want, long timeout_ms) {
  long t0 = mc_tp_now_ms();
  while (mc_tp_now_ms() - t0 < timeout_ms) {
    char *v = NULL;
    int rc = mc_meta_get(m, key, &v);
    int ok = want ? rc == 0 && v && !strcmp(v, want) : rc == MC_META_NOT_FOUND;
    free(v);
    if (ok) return mc_tp_now_ms() - t0;
    mc_tp_sleep_ms(50);
  }
  return -1;
}

/* A live writer's key outlives its TTL (renewed) and is written again when lost; a SIGKILLed writer's
 * key is gone within the TTL (3 s here). `lose` makes the service drop the key as if it had expired. */
static void bound_keys(const char *conn, void (*lose)(const char *key, void *arg), void *arg) {
  struct mc_meta *obs = open_unbound(conn);
  REQUIRE(obs);
  setenv("MC_METADATA_TTL_S", "3", 1);
  /* in this process: a key lost at the service comes back, a removed key stays removed */
  struct mc_meta *m = open_ok(conn);
  if (m) {
    CHECK(m->live != NULL);
    CHECK_EQ(mc_meta_set(m, "mooncake/test/bound_here", "v1"), 0);
    CHECK_EQ(mc_meta_set(m, "mooncake/test/bound_gone", "v2"), 0);
    CHECK_EQ(mc_meta_remove(m, "mooncake/test/bound_gone"), 0);
    lose("mooncake/test/bound_here", arg);
    CHECK(wait_key(obs, "mooncake/test/bound_here", "v1", 4000) >= 0);
    check_get(obs, "mooncake/test/bound_gone", NULL);
    CHECK_EQ(mc_meta_remove(m, "mooncake/test/bound_here"), 0);
    mc_meta_close(m);
  }
  /* another process, killed */
  char self[512], *dir = mc_tp_mkdtemp("bound");
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(n > 0 && dir);
  self[n] = 0;
  char *log = mc_tp_path(dir, "log"), env_conn[256];
  snprintf(env_conn, sizeof(env_conn), "MC_TEST_BOUND_CONN=%s", conn);
  char *argv[] = {self, "child_bound_writer", NULL}, *env[] = {env_conn, "MC_METADATA_TTL_S=3", NULL};
  unsetenv("MC_METADATA_TTL_S");
  pid_t pid = mc_tp_spawn(argv, env, log);
  CHECK(pid > 0);
  CHECK(wait_key(obs, BOUND_KEY, "alive", 10000) >= 0);
  mc_tp_sleep_ms(5000); /* beyond the TTL: renewed */
  check_get(obs, BOUND_KEY, "alive");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  long gone = wait_key(obs, BOUND_KEY, NULL, 10000);
  fprintf(stderr, "  %s: key gone %ld ms after SIGKILL\n", conn, gone);
  CHECK(gone >= 0);
  if (mc_test_failures) mc_tp_dump_log(log);
  free(log);
  mc_tp_rmrf(dir);
  free(dir);
  mc_meta_close(obs);
}

static int ETCD_PORT;

/* Revokes the lease the key carries (found with etcdctl): etcd deletes every key of that lease. */
static void etcd_lose(const char *key, void *arg) {
  (void)arg;
  char cmd[512], out[4096] = {0};
  snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%d get %s -w json", ETCD_PORT, key);
  FILE *f = popen(cmd, "r");
  size_t n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
  if (f) pclose(f);
  out[n] = 0;
  const char *l = strstr(out, "\"lease\":");
  unsigned long long id = l ? strtoull(l + 8, NULL, 10) : 0;
  CHECK(id != 0); /* the key carries a lease */
  if (!id) return;
  snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%d lease revoke %llx >/dev/null", ETCD_PORT,
           id);
  CHECK_EQ(system(cmd), 0);
}

static void test_etcd_bound_keys(void) {
  struct mc_tp_service etcd;
  REQUIRE(mc_tp_start_etcd(&etcd) == 0);
  ETCD_PORT = etcd.port;
  char conn[160];
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", etcd.port);
  bound_keys(conn, etcd_lose, NULL);
  mc_tp_service_stop(&etcd);
}

/* Deletes the key behind the writer's back, after checking it carries a TTL. */
static void redis_lose(const char *key, void *arg) {
  int port = *(int *)arg;
  char cmd[256], out[64] = {0};
  snprintf(cmd, sizeof(cmd), "redis-cli -p %d TTL %s", port, key);
  FILE *f = popen(cmd, "r");
  if (f && fgets(out, sizeof(out), f)) {
    long ttl = atol(out);
    CHECK(ttl > 0 && ttl <= 3);
  } else {
    CHECK(!"redis-cli TTL answered");
  }
  if (f) pclose(f);
  snprintf(cmd, sizeof(cmd), "redis-cli -p %d DEL %s >/dev/null", port, key);
  CHECK_EQ(system(cmd), 0);
}

static void test_redis_bound_keys(void) {
  struct mc_tp_service r = {0};
  REQUIRE(mc_tp_start_redis(&r, 0, NULL) == 0);
  char conn[64];
  snprintf(conn, sizeof(conn), "redis://127.0.0.1:%d", r.port);
  bound_keys(conn, redis_lose, &r.port);
  mc_tp_service_stop(&r);
}

static void test_redis_auth(void) {
  struct mc_tp_service r = {0};
  const char *args[] = {"--requirepass", "s3cret", NULL};
  REQUIRE(mc_tp_start_redis(&r, 0, args) == 0);
  struct mc_meta *m = open_redis(r.port);
  if (m) CHECK_EQ(mc_meta_set(m, "k", "v"), ERR_METADATA); /* NOAUTH */
  mc_meta_close(m);
  setenv("MC_REDIS_PASSWORD", "wrong", 1);
  m = open_redis(r.port);
  if (m) CHECK_EQ(mc_meta_set(m, "k", "v"), ERR_METADATA);
  mc_meta_close(m);
  setenv("MC_REDIS_PASSWORD", "s3cret", 1);
  m = open_redis(r.port);
  if (m) CHECK_EQ(mc_meta_set(m, "k", "v"), 0);
  mc_meta_close(m);
  setenv("MC_REDIS_USERNAME", "default", 1);
  m = open_redis(r.port);
  if (m) check_get(m, "k", "v");
  mc_meta_close(m);
  unsetenv("MC_REDIS_USERNAME");
  unsetenv("MC_REDIS_PASSWORD");
  mc_tp_service_stop(&r);
}

/* ---- unreachable and silent services ---- */

static void check_all_fail_fast(const char *conn) {
  struct mc_meta *m = open_ok(conn);
  if (!m) return;
  char *v = NULL;
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_meta_get(m, "k", &v), ERR_METADATA);
  CHECK(v == NULL);
  CHECK_EQ(mc_meta_set(m, "k", "v"), ERR_METADATA);
  CHECK_EQ(mc_meta_remove(m, "k"), ERR_METADATA);
  double ms = elapsed_ms(t0);
  if (ms >= 4000) fprintf(stderr, "  %s: three calls took %.0f ms\n", conn, ms);
  CHECK(ms < 4000);
  mc_meta_close(m);
}

static void test_unreachable_fails_fast(void) {
  char conn[128];
  int dead = mc_tp_free_port();
  snprintf(conn, sizeof(conn), "http://127.0.0.1:%d/metadata", dead);
  check_all_fail_fast(conn);
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d,127.0.0.1:%d", dead, dead);
  check_all_fail_fast(conn);
  snprintf(conn, sizeof(conn), "redis://127.0.0.1:%d", dead);
  check_all_fail_fast(conn);
}

struct silent_arg {
  char conn[128];
  int rc;
  double ms;
};

static void *silent_get(void *p) {
  struct silent_arg *a = p;
  struct mc_meta *m = NULL;
  char *v = NULL;
  a->rc = mc_meta_open(a->conn, &m);
  long t0 = mc_tp_now_ms();
  if (!a->rc) a->rc = mc_meta_get(m, "k", &v);
  a->ms = elapsed_ms(t0);
  free(v);
  mc_meta_close(m);
  return NULL;
}

/* Peers that accept connections but never answer: every backend gives up within its 3 s timeout. */
static void test_silent_peer_times_out(void) {
  static const char *fmt[] = {"http://127.0.0.1:%d/metadata", "etcd://127.0.0.1:%d", "redis://127.0.0.1:%d"};
  struct silent_arg a[3];
  pthread_t t[3];
  int fd[3];
  for (int i = 0; i < 3; i++) {
    int port = 0;
    fd[i] = mc_tp_silent_listener(&port);
    REQUIRE(fd[i] >= 0);
    snprintf(a[i].conn, sizeof(a[i].conn), fmt[i], port);
    pthread_create(&t[i], NULL, silent_get, &a[i]);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    close(fd[i]);
    fprintf(stderr, "  %s: rc %d after %.0f ms\n", a[i].conn, a[i].rc, a[i].ms);
    CHECK_EQ(a[i].rc, ERR_METADATA);
    CHECK(a[i].ms >= 2500 && a[i].ms < 4500);
  }
}

/* The one URL escaper (libcurl's) of the metadata backend and the operator tools: all but A-Z a-z 0-9
 * - . _ ~ is escaped, bytes as they are. And the shared request wrapper keeps its bounds: a silent peer
 * costs the total timeout, no more. */
static void test_curl_escape_and_bounds(void) {
  static const char *cases[][2] = {{"", ""},
                                   {"AZaz09-._~", "AZaz09-._~"},
                                   {"a b/c?d=e&f%g#h+i", "a%20b%2Fc%3Fd%3De%26f%25g%23h%2Bi"},
                                   {"mooncake/ram/[::1]:80", "mooncake%2Fram%2F%5B%3A%3A1%5D%3A80"},
                                   {"\xc3\xa9\x01\x7f\xff", "%C3%A9%01%7F%FF"}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *e = mc_curl_escape(cases[i][0]);
    CHECK_STR(e, cases[i][1]);
    free(e); /* (mc_free is free) */
  }
  int port = 0, fd = mc_tp_silent_listener(&port);
  REQUIRE(fd >= 0);
  char url[64], err[256];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", port);
  struct mc_curl_opts o = {.timeout_ms = 300, .connect_timeout_ms = 300, .no_proxy = 1};
  struct mc_curl_resp r;
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_curl_request_o("GET", url, NULL, 0, &o, &r, err, sizeof(err)), -1);
  CHECK(mc_tp_now_ms() - t0 < 2000);
  CHECK(err[0] != 0);
  mc_curl_resp_free(&r);
  close(fd);
}

TEST_MAIN(TEST_CASE(test_key_layout), TEST_CASE(test_curl_escape_and_bounds), TEST_CASE(child_cluster_prefix), TEST_CASE(test_cluster_prefix),
          TEST_CASE(test_open_schemes), TEST_CASE(test_embedded_server_roundtrip),
          TEST_CASE(test_http_cas), TEST_CASE(test_etcd_cas),
          TEST_CASE(test_http_contract), TEST_CASE(test_http_body_limit), TEST_CASE(test_http_persistence),
          TEST_CASE(test_server_bind_errors), TEST_CASE(test_malformed_requests),
          TEST_CASE(test_standalone_binary), TEST_CASE(test_etcd_backend), TEST_CASE(test_redis_backend),
          TEST_CASE(child_bound_writer), TEST_CASE(test_etcd_bound_keys), TEST_CASE(test_redis_bound_keys),
          TEST_CASE(test_redis_auth), TEST_CASE(test_unreachable_fails_fast),
          TEST_CASE(test_silent_peer_times_out))
