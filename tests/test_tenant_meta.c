/* The HTTP metadata server's owner rule (docs/transfer-engine.md, "Metadata"), against a real
 * mooncake_http_metadata_server holding the cluster secret and persisting its map: every key belongs to
 * the realm that created it; a member of the whole cluster changes any key, a tenant only its own, and
 * the rule survives a restart. Every request is signed by a real process of its identity: this one holds
 * the cluster secret, each tenant's request is made by a forked child holding that tenant's secret file
 * (the secret is read once per process; docs/security.md, "Tenants"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/auth.h"
#include "lib/proc.h"
#include "lib/test.h"

#define SECRET "tenant-meta-test-cluster-secret-0123456789"
#define RAM(seg) "mooncake/ram/" seg

static char *g_dir, *g_bin, *g_log;
static char g_t1[600], g_t2[600]; /* "file:<secret file>" */
static int g_port;

/* spec: a secret ("file:PATH" for a secret file), NULL for none. */
static void use_secret(const char *spec) {
  unsetenv("MC_CLUSTER_SECRET");
  unsetenv("MC_CLUSTER_SECRET_FILE");
  if (spec && !strncmp(spec, "file:", 5)) setenv("MC_CLUSTER_SECRET_FILE", spec + 5, 1);
  else if (spec) setenv("MC_CLUSTER_SECRET", spec, 1);
  mc_auth_reset();
}

struct answer {
  int status; /* -1: no answer */
  char text[512];
};

/* One request to the server, signed with this process's secret when it has one and the method changes
 * state. */
static void request(const char *method, const char *key, const char *body, struct answer *a) {
  char target[512], url[600], auth[MC_AUTH_HTTP_HEADER_MAX] = "", req[2048], resp[sizeof(a->text) + 512];
  snprintf(target, sizeof(target), "/metadata?key=%s", key);
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", g_port, target);
  size_t len = body ? strlen(body) : 0;
  if (mc_auth_enabled() && mc_auth_http_header_for_url(method, url, body, len, auth, sizeof(auth)) == 0)
    strcat(auth, "\r\n");
  int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s", method, target, g_port, auth, len, body ? body : "");
  a->status = -1;
  a->text[0] = 0;
  if (mc_tp_raw_http(g_port, req, (size_t)n, resp, sizeof(resp), 5000) <= 0) return;
  a->status = mc_tp_http_status(resp);
  const char *b = strstr(resp, "\r\n\r\n");
  snprintf(a->text, sizeof(a->text), "%s", b ? b + 4 : "");
}

/* The same request made by a forked child holding spec's secret (NULL: none), the answer back
 * through a pipe. */
static void request_as(const char *spec, const char *method, const char *key, const char *body, struct answer *a) {
  int p[2];
  a->status = -1;
  a->text[0] = 0;
  if (pipe(p)) return;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    use_secret(spec);
    struct answer mine;
    request(method, key, body, &mine);
    _exit(write(p[1], &mine, sizeof(mine)) == (ssize_t)sizeof(mine) ? 0 : 1);
  }
  close(p[1]);
  if (pid < 0 || read(p[0], a, sizeof(*a)) != (ssize_t)sizeof(*a)) a->status = -1;
  close(p[0]);
  if (pid > 0) CHECK_EQ(mc_tp_exit_code(pid), 0);
}

/* The status of spec's request (the cluster member's is made here); a refusal's text must say so. */
static int status_as(const char *spec, const char *method, const char *key, const char *body) {
  struct answer a;
  if (spec && !strcmp(spec, SECRET)) request(method, key, body, &a); /* the cluster member: this process */
  else request_as(spec, method, key, body, &a);
  if (a.status == 403) CHECK(strstr(a.text, "Not allowed") != NULL);
  if (a.status < 200 || a.status >= 500) fprintf(stderr, "  %s %s -> %d '%s'\n", method, key, a.status, a.text);
  return a.status;
}

#define CLUSTER SECRET
#define T1 g_t1
#define T2 g_t2
#define PUT(who, key, body) status_as((who), "PUT", (key), (body))
#define DEL(who, key) status_as((who), "DELETE", (key), NULL)

/* key's value as a GET (unsigned, open) answers it, or "" when the GET answers otherwise. */
static const char *value_of(const char *key) {
  static struct answer a;
  request("GET", key, NULL, &a);
  if (a.status != 200) a.text[0] = 0;
  return a.text;
}

static pid_t start_server(const char *persist) {
  char port[32], path[600];
  snprintf(port, sizeof(port), "--port=%d", g_port);
  snprintf(path, sizeof(path), "--persist_path=%s", persist);
  char *argv[] = {g_bin, port, "--host=127.0.0.1", path, "--log-level=WARNING", NULL};
  char *env[] = {"MC_CLUSTER_SECRET=" SECRET, "MC_CLUSTER_SECRET_FILE=", NULL};
  pid_t pid = mc_tp_spawn(argv, env, g_log);
  if (pid > 0 && mc_tp_wait_port(g_port, 10000, pid)) {
    mc_tp_dump_log(g_log);
    mc_tp_stop(pid, 1000);
    return -1;
  }
  return pid;
}

static void stop_server(pid_t pid) {
  int st = mc_tp_stop(pid, 5000);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The persisted entry of key: its owner ("" for a plain string, the old form), NULL when absent. */
static char *persisted_owner(const char *persist, const char *key) {
  json_t *j = json_load_file(persist, 0, NULL), *e = json_object_get(j, key);
  const char *o = json_is_string(e) ? "" : json_string_value(json_object_get(e, "owner"));
  char *r = o ? strdup(o) : NULL;
  json_decref(j);
  return r;
}

static void check_persisted_owner(const char *persist, const char *key, const char *want) {
  char *o = persisted_owner(persist, key);
  CHECK(o != NULL);
  if (o) CHECK_STR(o, want);
  free(o);
}

static void setup(void) {
  if (g_dir) return;
  const char *dir = getenv("MC_TEST_BIN_DIR");
  REQUIRE(dir);
  g_bin = mc_tp_path(dir, "mooncake_http_metadata_server");
  REQUIRE(access(g_bin, X_OK) == 0);
  REQUIRE((g_dir = mc_tp_mkdtemp("tenant_meta")));
  g_log = mc_tp_path(g_dir, "server.log");
  char *t1 = mc_tp_path(g_dir, "t1.secret"), *t2 = mc_tp_path(g_dir, "t2.secret"), *odd = mc_tp_path(g_dir, "odd");
  use_secret(SECRET);
  REQUIRE(mc_auth_generate_tenant("t1", t1) == 0);
  REQUIRE(mc_auth_generate_tenant("t2", t2) == 0);
  CHECK_EQ(mc_auth_generate_tenant("t\xff", odd), -EINVAL); /* ids are UTF-8: JSON files and logs hold them */
  snprintf(g_t1, sizeof(g_t1), "file:%s", t1);
  snprintf(g_t2, sizeof(g_t2), "file:%s", t2);
  free(t1), free(t2), free(odd);
  REQUIRE((g_port = mc_tp_free_port()) > 0);
}

static void test_owner_rule_and_restart(void) {
  setup();
  char *persist = mc_tp_path(g_dir, "meta.json");
  pid_t pid = start_server(persist);
  REQUIRE(pid > 0);

  /* a tenant creates, replaces and deletes its own key */
  CHECK_EQ(PUT(T1, RAM("k1"), "{\"v\":1}"), 200);
  CHECK_STR(value_of(RAM("k1")), "{\"v\":1}");
  CHECK_EQ(PUT(T1, RAM("k1"), "{\"v\":2}"), 200);
  CHECK_STR(value_of(RAM("k1")), "{\"v\":2}");
  CHECK_EQ(DEL(T1, RAM("k1")), 200);
  CHECK_EQ(DEL(T1, RAM("k1")), 404);
  CHECK_STR(value_of(RAM("k1")), "");

  /* another tenant can neither replace nor delete it */
  CHECK_EQ(PUT(T1, RAM("k2"), "{\"of\":\"t1\"}"), 200);
  CHECK_EQ(PUT(T2, RAM("k2"), "{\"of\":\"t2\"}"), 403);
  CHECK_EQ(DEL(T2, RAM("k2")), 403);
  CHECK_STR(value_of(RAM("k2")), "{\"of\":\"t1\"}");

  /* ... nor a key the whole cluster created */
  CHECK_EQ(PUT(CLUSTER, RAM("k3"), "{\"of\":\"cluster\"}"), 200);
  CHECK_EQ(PUT(T2, RAM("k3"), "{\"of\":\"t2\"}"), 403);
  CHECK_EQ(PUT(T2, RAM("k3"), "{\"of\":\"cluster\"}"), 403); /* not even with the same value */
  CHECK_EQ(DEL(T2, RAM("k3")), 403);
  CHECK_EQ(DEL(T1, RAM("k3")), 403);
  CHECK_STR(value_of(RAM("k3")), "{\"of\":\"cluster\"}");

  /* the whole cluster changes a tenant's key, which stays the tenant's; and deletes it */
  CHECK_EQ(PUT(T1, RAM("k4"), "{\"of\":\"t1\"}"), 200);
  CHECK_EQ(PUT(CLUSTER, RAM("k4"), "{\"by\":\"cluster\"}"), 200);
  CHECK_STR(value_of(RAM("k4")), "{\"by\":\"cluster\"}");
  CHECK_EQ(PUT(T2, RAM("k4"), "{}"), 403);
  CHECK_EQ(PUT(T1, RAM("k4"), "{\"of\":\"t1\",\"again\":1}"), 200);
  CHECK_EQ(DEL(CLUSTER, RAM("k4")), 200);
  CHECK_STR(value_of(RAM("k4")), "");
  CHECK_EQ(PUT(T2, RAM("k4"), "{\"of\":\"t2\"}"), 200); /* deleted: the next creator owns it */
  CHECK_EQ(PUT(T1, RAM("k4"), "{}"), 403);

  /* unsigned writes: 401, nothing changed */
  CHECK_EQ(PUT(NULL, RAM("k2"), "{}"), 401);
  CHECK_EQ(DEL(NULL, RAM("k2")), 401);
  CHECK_EQ(PUT(NULL, RAM("k9"), "{}"), 401);
  CHECK_STR(value_of(RAM("k2")), "{\"of\":\"t1\"}");
  CHECK_STR(value_of(RAM("k9")), "");

  /* rpc_meta stays write-once, and another realm's is refused before its engine is probed */
  const char *rpc = "mooncake/rpc_meta/k5", *dead = "{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":1}";
  CHECK_EQ(PUT(T1, rpc, dead), 200);
  CHECK_EQ(PUT(T1, rpc, dead), 200); /* unchanged */
  CHECK_EQ(PUT(T1, rpc, "{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":2}"), 400);
  CHECK_EQ(PUT(T2, rpc, dead), 403);
  CHECK_EQ(DEL(T2, rpc), 403);
  CHECK_STR(value_of(rpc), dead);

  /* the file: the whole cluster's keys as plain strings (the old form), tenants' keys with their owner */
  check_persisted_owner(persist, RAM("k2"), "t1");
  check_persisted_owner(persist, RAM("k3"), "");
  check_persisted_owner(persist, RAM("k4"), "t2");

  /* the owners survive a restart */
  stop_server(pid);
  pid = start_server(persist);
  REQUIRE(pid > 0);
  CHECK_STR(value_of(RAM("k2")), "{\"of\":\"t1\"}");
  CHECK_EQ(PUT(T2, RAM("k2"), "{\"of\":\"t2\"}"), 403);
  CHECK_EQ(DEL(T2, RAM("k2")), 403);
  CHECK_EQ(PUT(T1, RAM("k2"), "{\"of\":\"t1\",\"after\":\"restart\"}"), 200);
  CHECK_STR(value_of(RAM("k2")), "{\"of\":\"t1\",\"after\":\"restart\"}");
  CHECK_EQ(PUT(T1, RAM("k3"), "{}"), 403);
  CHECK_EQ(PUT(CLUSTER, RAM("k3"), "{\"of\":\"cluster\",\"after\":\"restart\"}"), 200);
  CHECK_EQ(PUT(T1, RAM("k4"), "{}"), 403);
  CHECK_EQ(DEL(T2, rpc), 403);
  CHECK_EQ(DEL(T1, rpc), 200); /* nobody answers at its endpoint */
  CHECK_STR(value_of(rpc), "");
  stop_server(pid);
  free(persist);
}

static void test_old_format_file(void) {
  setup();
  char *persist = mc_tp_path(g_dir, "old.json");
  FILE *f = fopen(persist, "w");
  REQUIRE(f);
  /* the format before owners, with one tenant's key in the new form and two entries that are neither */
  fputs("{\"" RAM("old") "\":\"{\\\"v\\\":0}\",\"other\":\"x\","
        "\"" RAM("t1key") "\":{\"value\":\"{\\\"t\\\":1}\",\"owner\":\"t1\"},"
        "\"" RAM("bad1") "\":{\"value\":\"v\"},\"" RAM("bad2") "\":{\"value\":\"v\",\"owner\":\"\"}}",
        f);
  fclose(f);
  pid_t pid = start_server(persist);
  REQUIRE(pid > 0);
  CHECK_STR(value_of(RAM("old")), "{\"v\":0}");
  CHECK_STR(value_of("other"), "x");
  CHECK_EQ(PUT(T1, RAM("old"), "{\"v\":1}"), 403); /* owned by the whole cluster */
  CHECK_EQ(DEL(T1, RAM("old")), 403);
  CHECK_EQ(DEL(T2, "other"), 403);
  CHECK_STR(value_of(RAM("old")), "{\"v\":0}");
  CHECK_EQ(PUT(CLUSTER, RAM("old"), "{\"v\":2}"), 200);
  CHECK_STR(value_of(RAM("old")), "{\"v\":2}");
  CHECK_EQ(PUT(T2, RAM("t1key"), "{}"), 403);
  CHECK_EQ(PUT(T1, RAM("t1key"), "{\"t\":2}"), 200);
  CHECK_STR(value_of(RAM("bad1")), ""); /* dropped (logged) */
  CHECK_STR(value_of(RAM("bad2")), "");
  stop_server(pid);
  check_persisted_owner(persist, RAM("old"), "");
  check_persisted_owner(persist, "other", "");
  check_persisted_owner(persist, RAM("t1key"), "t1");
  free(persist);
  mc_tp_rmrf(g_dir);
  free(g_dir), free(g_bin), free(g_log);
}

TEST_MAIN(TEST_CASE(test_owner_rule_and_restart), TEST_CASE(test_old_format_file))
