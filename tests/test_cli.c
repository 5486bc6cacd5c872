/* Black-box tests of the operator tools against a live cluster: the real mooncake_master (embedded
 * metadata server, admin port), three mooncake_store_node processes in two zones, and a store client
 * in this process that writes and looks up keys. Every `mooncake` command runs as a child process;
 * --json output is parsed and its values asserted. trace_replay runs on a prefix of the real trace
 * against its own fresh master, and its hit ratio must equal the master's store_hit_ratio. */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>

#include "cli/admin.h"
#include "common/version.h"
#include "lib/proc.h"
#include "lib/test.h"
#include "mooncake/store.h"

#define MiB (1024ull * 1024)
#define MIN_(a, b) ((a) < (b) ? (a) : (b))
#define MAX_(a, b) ((a) > (b) ? (a) : (b))

static char bin_dir[512];

/* ------------------------------------------------------------------ running a tool */

struct out {
  int rc; /* exit status, -1 killed by the deadline or by a signal */
  long ms;
  char so[1 << 16], se[1 << 14];
};

/* Runs BIN_DIR/tool with the NULL-terminated arguments; stdout and stderr captured; killed after
 * timeout_ms. */
static void run_tool(struct out *o, long timeout_ms, const char *tool, ...) {
  char *argv[32], path[600];
  snprintf(path, sizeof(path), "%s/%s", bin_dir, tool);
  int n = 0;
  argv[n++] = path;
  va_list ap;
  va_start(ap, tool);
  for (const char *a; n < 31 && (a = va_arg(ap, const char *));) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  int po[2], pe[2];
  memset(o, 0, sizeof(*o));
  o->rc = -1;
  if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) return;
  long t0 = mc_tp_now_ms();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    execv(path, argv);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  size_t no = 0, ne = 0;
  struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
  int open_fds = 2, killed = 0;
  while (open_fds) {
    long left = t0 + timeout_ms - mc_tp_now_ms();
    if (left <= 0) {
      kill(pid, SIGKILL);
      killed = 1;
      break;
    }
    if (poll(p, 2, (int)left) <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char *buf = i ? o->se : o->so;
      size_t *len = i ? &ne : &no, cap = i ? sizeof(o->se) : sizeof(o->so);
      char tmp[4096];
      ssize_t r = read(p[i].fd, tmp, sizeof(tmp));
      if (r <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        open_fds--;
        continue;
      }
      size_t take = MIN_((size_t)r, cap - 1 - *len);
      memcpy(buf + *len, tmp, take);
      *len += take;
      buf[*len] = 0;
    }
  }
  for (int i = 0; i < 2; i++)
    if (p[i].fd >= 0) close(p[i].fd);
  int st = 0;
  waitpid(pid, &st, 0);
  o->ms = mc_tp_now_ms() - t0;
  o->rc = !killed && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (o->rc != 0) fprintf(stderr, "  [%s ... -> rc %d in %ld ms] %s", tool, o->rc, o->ms, o->se);
}

static json_t *parse(const char *text) {
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  if (!j) fprintf(stderr, "not JSON (%s): %.500s\n", e.text, text);
  return j;
}

static double jnum(json_t *o, const char *path) { /* "a.b" */
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", path);
  json_t *cur = o;
  for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
    cur = json_object_get(cur, k);
  return json_is_number(cur) ? json_number_value(cur) : NAN;
}

/* ------------------------------------------------------------------ the cluster */

struct cluster {
  pid_t master, node[3];
  int rpc, meta, admin;
  char *dir, addr[64], meta_url[96], admin_addr[64], admin_flag[96];
  char node_name[3][64];
};

static struct cluster C;
static mooncake_store_t W; /* a pure client that writes and looks up */

static int start_master(struct cluster *c, const char *tag, const char *lease_ms) {
  c->dir = mc_tp_mkdtemp(tag);
  c->rpc = mc_tp_free_port(), c->meta = mc_tp_free_port(), c->admin = mc_tp_free_port();
  char a1[48], a2[48], a3[48], a4[48], bin[600], *log = mc_tp_path(c->dir, "master.log");
  snprintf(a1, sizeof(a1), "--rpc_port=%d", c->rpc);
  snprintf(a2, sizeof(a2), "--http_metadata_server_port=%d", c->meta);
  snprintf(a3, sizeof(a3), "--metrics_port=%d", c->admin);
  snprintf(a4, sizeof(a4), "--default_kv_lease_ttl=%s", lease_ms);
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bin_dir);
  char *argv[] = {bin, a1, "--enable_http_metadata_server", a2, a3, "--metrics_host=127.0.0.1", a4, NULL};
  c->master = mc_tp_spawn(argv, NULL, log);
  int ok = c->master > 0 && !mc_tp_wait_port(c->rpc, 15000, c->master) && !mc_tp_wait_port(c->admin, 15000, c->master);
  if (!ok) mc_tp_dump_log(log);
  free(log);
  snprintf(c->addr, sizeof(c->addr), "127.0.0.1:%d", c->rpc);
  snprintf(c->meta_url, sizeof(c->meta_url), "http://127.0.0.1:%d/metadata", c->meta);
  snprintf(c->admin_addr, sizeof(c->admin_addr), "127.0.0.1:%d", c->admin);
  snprintf(c->admin_flag, sizeof(c->admin_flag), "--master-admin=%s", c->admin_addr);
  return ok ? 0 : -1;
}

/* Starts mooncake_store_node i with zone and segment size; waits for its "ready" line. */
static int start_node(struct cluster *c, int i, const char *zone) {
  char a1[96], a2[128], a3[64], log_name[32], bin[600];
  snprintf(a1, sizeof(a1), "--master_server_addr=%s", c->addr);
  snprintf(a2, sizeof(a2), "--metadata_server=%s", c->meta_url);
  snprintf(a3, sizeof(a3), "--zone=%s", zone);
  snprintf(log_name, sizeof(log_name), "node%d.log", i);
  snprintf(bin, sizeof(bin), "%s/mooncake_store_node", bin_dir);
  char *log = mc_tp_path(c->dir, log_name);
  char *argv[] = {bin, a1, a2, a3, "--global_segment_size=16MB", "--local_buffer_size=1MB", NULL};
  c->node[i] = mc_tp_spawn(argv, NULL, log);
  int ok = 0;
  for (long t0 = mc_tp_now_ms(); c->node[i] > 0 && !ok && mc_tp_now_ms() - t0 < 15000; mc_tp_sleep_ms(20)) {
    FILE *f = fopen(log, "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
      if (sscanf(line, "mooncake_store_node: segment %63s ready", c->node_name[i]) == 1) ok = 1;
    if (f) fclose(f);
    if (mc_tp_exited(c->node[i])) break;
  }
  if (!ok) mc_tp_dump_log(log);
  free(log);
  return ok ? 0 : -1;
}

static void stop_cluster(struct cluster *c) {
  for (int i = 0; i < 3; i++)
    if (c->node[i] > 0) CHECK_EQ(mc_tp_stop(c->node[i], 10000), 0); /* clean exit on SIGTERM */
  if (c->master > 0) mc_tp_stop(c->master, 5000);
  mc_tp_rmrf(c->dir);
  free(c->dir);
  memset(c, 0, sizeof(*c));
}

/* Puts key with value bytes on node i's segment. */
static int put_on(int i, const char *key, size_t size) {
  char *v = malloc(size);
  memset(v, 'a' + i, size);
  const char *pref[1] = {C.node_name[i]};
  mooncake_replicate_config_t cfg = {1, 0, 0, pref, 1};
  int rc = mooncake_store_put(W, key, v, size, &cfg);
  free(v);
  return rc;
}

/* ------------------------------------------------------------------ tests */

static void test_setup(void) {
  REQUIRE(start_master(&C, "cli", "100") == 0);
  REQUIRE(start_node(&C, 0, "zone-a") == 0);
  REQUIRE(start_node(&C, 1, "zone-b") == 0);
  REQUIRE(start_node(&C, 2, "zone-b") == 0);
  /* The writer puts through PutStart/PutEnd: a write extent (docs/store-client.md) would keep space on a
   * node for its lease after the writer paused, and test_drain needs an empty node 2. */
  setenv("MC_STORE_PUT_EXTENTS", "0", 1);
  W = mooncake_store_create();
  REQUIRE(mooncake_store_setup(W, "127.0.0.1", C.meta_url, 0, 4 * MiB, "tcp", "", C.addr) == 0);
}

/* First, while the master has seen no lookups: known hits and misses give a known ratio. */
static void test_metrics(void) {
  REQUIRE(W);
  CHECK_EQ(put_on(0, "m/1", 1000), 0);
  CHECK_EQ(put_on(1, "m/2", 1000), 0);
  const char *keys[4] = {"m/1", "m/2", "m/none1", "m/none2"};
  int res[4];
  CHECK_EQ(mooncake_store_batch_is_exist(W, keys, 4, res), 0);
  CHECK_EQ(mooncake_store_is_exist(W, "m/1"), 1); /* 3 hits, 2 misses */
  struct out o;
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "metrics", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  REQUIRE(j);
  CHECK_EQ(jnum(j, "master_segment_count"), 3);
  CHECK(fabs(jnum(j, "store_hit_ratio") - 0.6) < 1e-12);
  CHECK(jnum(j, "eviction_rate") == 0);
  CHECK(jnum(j, "master_rpc_qps") > 0);
  double p99 = jnum(j, "te_transfer_latency_p99");
  CHECK(p99 >= 0 && p99 < 1);
  CHECK(jnum(j, "master_key_count") == 2);
  json_decref(j);
  /* --follow --count N: a header and N lines, at --interval apart */
  run_tool(&o, 10000, "mooncake", C.admin_flag, "metrics", "--follow", "--count=3", "--interval=0.2", NULL);
  CHECK_EQ(o.rc, 0);
  int lines = 0;
  for (char *p = o.so; (p = strchr(p, '\n')); p++) lines++;
  CHECK_EQ(lines, 4);
  CHECK(strstr(o.so, "HIT%") && strstr(o.so, "60.00 %"));
  CHECK(o.ms >= 400);
  /* --json --follow: one JSON document per line */
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "metrics", "--follow", "--count", "2", "--interval",
           "0.1", NULL);
  CHECK_EQ(o.rc, 0);
  int docs = 0;
  for (char *save = NULL, *l = strtok_r(o.so, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    json_t *d = parse(l);
    docs += d && jnum(d, "master_segment_count") == 3;
    json_decref(d);
  }
  CHECK_EQ(docs, 2);
}

static void test_status(void) {
  struct out o;
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "status", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  REQUIRE(j);
  CHECK_EQ(jnum(j, "segments"), 3);
  CHECK_EQ(jnum(j, "capacity_bytes"), 48 * MiB);
  CHECK(jnum(j, "used_bytes") >= 2000);
  CHECK_EQ(jnum(j, "keys"), 2);
  CHECK_EQ(jnum(j, "clients"), 3);
  CHECK_STR(json_string_value(json_object_get(json_object_get(j, "health"), "status")), "ok");
  CHECK_EQ(jnum(j, "metrics.master_segment_count"), 3);
  CHECK(fabs(jnum(j, "metrics.store_hit_ratio") - 0.6) < 1e-12);
  const char *five[] = {"master_segment_count", "eviction_rate", "te_transfer_latency_p99", "store_hit_ratio",
                        "master_rpc_qps"};
  for (int i = 0; i < 5; i++) CHECK(json_is_number(json_object_get(json_object_get(j, "metrics"), five[i])));
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "status", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "segments      3") && strstr(o.so, "48.0 MiB") && strstr(o.so, "store_hit_ratio"));
  CHECK(strstr(o.so, "60.00 %"));
}

static void test_segments(void) {
  struct out o;
  run_tool(&o, 10000, "mooncake", C.admin_flag, "segments", "--json", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so), *s;
  REQUIRE(j);
  CHECK_EQ(jnum(j, "total_segments"), 3);
  size_t i;
  int seen = 0;
  json_array_foreach(json_object_get(j, "segments"), i, s) {
    const char *name = json_string_value(json_object_get(s, "name"));
    for (int k = 0; k < 3; k++) {
      if (!name || strcmp(name, C.node_name[k])) continue;
      seen |= 1 << k;
      CHECK_STR(json_string_value(json_object_get(s, "zone")), k ? "zone-b" : "zone-a");
      CHECK_EQ(jnum(s, "capacity_bytes"), 16 * MiB);
      CHECK(k == 2 ? jnum(s, "used_bytes") == 0 : jnum(s, "used_bytes") >= 1000);
      CHECK_STR(json_string_value(json_object_get(s, "status")), "OK");
    }
  }
  CHECK_EQ(seen, 7);
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "segments", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "NAME") && strstr(o.so, "ZONE") && strstr(o.so, "USE%") && strstr(o.so, "zone-a") &&
        strstr(o.so, "16.0 MiB") && strstr(o.so, C.node_name[2]) && strstr(o.so, "3 segment(s)"));
}

static void test_keys_and_key(void) {
  CHECK_EQ(put_on(0, "cli/a1", 3000), 0);
  CHECK_EQ(put_on(1, "cli/a2", 100), 0);
  CHECK_EQ(put_on(1, "cli/b1", 100), 0);
  struct out o;
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "keys", "--prefix", "cli/a", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  REQUIRE(j);
  CHECK_EQ(jnum(j, "count"), 2);
  json_t *k = json_object_get(j, "keys");
  CHECK_EQ(json_array_size(k), 2);
  const char *k0 = json_string_value(json_array_get(k, 0)), *k1 = json_string_value(json_array_get(k, 1));
  CHECK(k0 && k1 && ((!strcmp(k0, "cli/a1") && !strcmp(k1, "cli/a2")) || (!strcmp(k0, "cli/a2") && !strcmp(k1, "cli/a1"))));
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "keys", "--limit=1", NULL);
  j = parse(o.so);
  REQUIRE(j);
  CHECK_EQ(jnum(j, "count"), 5);
  CHECK_EQ(json_array_size(json_object_get(j, "keys")), 1);
  CHECK(json_is_true(json_object_get(j, "truncated")));
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "keys", "--prefix=cli/", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "cli/a1\n") && strstr(o.so, "cli/b1\n") && !strstr(o.so, "m/1"));
  /* one key's replicas */
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "key", "cli/a1", NULL);
  CHECK_EQ(o.rc, 0);
  j = parse(o.so);
  REQUIRE(j);
  CHECK_EQ(jnum(j, "replica_count"), 1);
  json_t *r = json_array_get(json_object_get(j, "replicas"), 0);
  CHECK_EQ(jnum(r, "size_bytes"), 3000);
  CHECK_STR(json_string_value(json_object_get(r, "transport_endpoint")), C.node_name[0]);
  CHECK_STR(json_string_value(json_object_get(r, "protocol")), "tcp");
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "key", "cli/a1", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "1 replica(s)") && strstr(o.so, "3000") && strstr(o.so, C.node_name[0]));
  run_tool(&o, 10000, "mooncake", C.admin_flag, "key", "cli/nope", NULL);
  CHECK_EQ(o.rc, 4);
  CHECK(strstr(o.se, "OBJECT_NOT_FOUND"));
}

static void test_remove(void) {
  struct out o;
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "remove", "cli/b1", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  CHECK(j && json_is_true(json_object_get(j, "removed")));
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "key", "cli/b1", NULL);
  CHECK_EQ(o.rc, 4);
  CHECK_EQ(mooncake_store_is_exist(W, "cli/b1"), 0);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "remove", "cli/b1", NULL);
  CHECK_EQ(o.rc, 4);
  /* A leased key (is_exist grants a 100 ms lease here) is refused without --force, removed with it. */
  long leased_at = mc_tp_now_ms();
  CHECK_EQ(mooncake_store_is_exist(W, "cli/a2"), 1);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "remove", "cli/a2", NULL);
  int refused = o.rc == 1 && strstr(o.se, "OBJECT_HAS_LEASE");
  if (!refused) { /* only acceptable when the machine was so slow that the lease had run out */
    CHECK_EQ(o.rc, 0);
    CHECK(mc_tp_now_ms() - leased_at >= 100);
  }
  if (refused) {
    run_tool(&o, 10000, "mooncake", C.admin_flag, "remove", "cli/a2", "--force", NULL);
    CHECK_EQ(o.rc, 0);
    CHECK(strstr(o.so, "removed cli/a2"));
  }
  CHECK_EQ(mooncake_store_is_exist(W, "cli/a2"), 0);
  /* remove-all --force: m/1, m/2, cli/a1 are left */
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "remove-all", "--force", NULL);
  CHECK_EQ(o.rc, 0);
  j = parse(o.so);
  CHECK_EQ(jnum(j, "removed_count"), 3);
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "keys", NULL);
  j = parse(o.so);
  CHECK_EQ(jnum(j, "count"), 0);
  json_decref(j);
}

static void test_drain(void) {
  struct out o;
  /* node 2 is empty: drain --wait returns DRAINED at once */
  run_tool(&o, 10000, "mooncake", C.admin_flag, "drain", C.node_name[2], "--wait", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "DRAINED"));
  /* node 1 holds an object: the drain starts and stays DRAINING */
  CHECK_EQ(put_on(1, "d/1", 5000), 0);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "drain", C.node_name[1], "--wait", "--wait-timeout=0.5",
           NULL);
  CHECK_EQ(o.rc, 1);
  CHECK(strstr(o.se, "still DRAINING"));
  json_t *j = parse(o.so);
  CHECK(j && !strcmp(json_string_value(json_object_get(j, "status")) ?: "", "DRAINING"));
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "segments", NULL);
  j = parse(o.so);
  json_t *s;
  size_t i;
  json_array_foreach(json_object_get(j, "segments"), i, s) {
    const char *name = json_string_value(json_object_get(s, "name")), *st = json_string_value(json_object_get(s, "status"));
    if (name && !strcmp(name, C.node_name[1])) CHECK_STR(st, "DRAINING");
  }
  json_decref(j);
  /* a draining segment takes no new objects: a put preferring it lands on node 0 (node 2 is drained) */
  CHECK_EQ(put_on(1, "d/2", 100), 0);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "--json", "key", "d/2", NULL);
  j = parse(o.so);
  const char *ep = json_string_value(json_object_get(json_array_get(json_object_get(j, "replicas"), 0), "transport_endpoint"));
  CHECK_STR(ep, C.node_name[0]);
  json_decref(j);
  run_tool(&o, 10000, "mooncake", C.admin_flag, "drain", "127.0.0.1:1", NULL);
  CHECK_EQ(o.rc, 4);
}

static void test_errors(void) {
  struct out o;
  int closed = mc_tp_free_port(), silent_port = 0, silent = mc_tp_silent_listener(&silent_port);
  char flag[64];
  snprintf(flag, sizeof(flag), "--master-admin=127.0.0.1:%d", closed);
  run_tool(&o, 10000, "mooncake", flag, "status", NULL);
  CHECK_EQ(o.rc, 3);
  CHECK(strstr(o.se, "cannot reach the master admin port"));
  snprintf(flag, sizeof(flag), "--master-admin=127.0.0.1:%d", silent_port);
  run_tool(&o, 10000, "mooncake", flag, "--timeout-ms=500", "segments", NULL);
  CHECK_EQ(o.rc, 3);
  CHECK(o.ms < 3000);
  run_tool(&o, 10000, "mooncake", "--master-admin", flag + 15, "--timeout-ms", "500", "segments", NULL);
  CHECK_EQ(o.rc, 3); /* both options in their "--name value" form */
  CHECK(o.ms < 3000);
  run_tool(&o, 20000, "mooncake", flag, "metrics", NULL); /* default bound: 5 s */
  CHECK_EQ(o.rc, 3);
  CHECK(o.ms < 9000);
  close(silent);
  run_tool(&o, 5000, "mooncake", "frobnicate", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 5000, "mooncake", C.admin_flag, "key", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 5000, "mooncake", C.admin_flag, "keys", "--limit=-3", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 5000, "mooncake", C.admin_flag, "metrics", "--interval=0", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 5000, "mooncake", C.admin_flag, "remove", "k", "--bogus", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 5000, "mooncake", "--timeout-ms=abc", "status", NULL);
  CHECK_EQ(o.rc, 2);
  /* getopt_long: unknown options and missing values say which and why, then the usage; exit 2 */
  run_tool(&o, 5000, "mooncake", "status", "--timeout-ms", NULL);
  CHECK_EQ(o.rc, 2);
  CHECK(strstr(o.se, "unknown option '--timeout-ms'") && strstr(o.se, "usage: mooncake"));
  run_tool(&o, 5000, "mooncake", "--timeout-ms", NULL);
  CHECK_EQ(o.rc, 2);
  CHECK(strstr(o.se, "option '--timeout-ms' needs a value") && strstr(o.se, "usage: mooncake"));
  run_tool(&o, 5000, "mooncake", "--bogus", "status", NULL);
  CHECK_EQ(o.rc, 2);
  CHECK(strstr(o.se, "unknown option '--bogus'"));
  run_tool(&o, 5000, "mooncake", C.admin_flag, "drain", "seg", "--wait-timeout", NULL);
  CHECK_EQ(o.rc, 2);
  CHECK(strstr(o.se, "option '--wait-timeout' needs a value") && strstr(o.se, "usage: mooncake"));
  run_tool(&o, 5000, "mooncake", C.admin_flag, "remove", "k", "--force=yes", NULL);
  CHECK_EQ(o.rc, 2);
  CHECK(strstr(o.se, "option '--force' takes no value"));
  run_tool(&o, 5000, "mooncake", C.admin_flag, "keys", "--limit", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 10000, "mooncake", "--master-admin", C.admin_addr, "--timeout-ms", "2000", "keys", "--limit", "1",
           "--json", "--prefix", "cli/", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  CHECK(j && json_array_size(json_object_get(j, "keys")) <= 1);
  json_decref(j);
  run_tool(&o, 5000, "mooncake", "drain", "--help", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "--wait"));
  run_tool(&o, 5000, "mooncake", "--help", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "remove-all") && strstr(o.so, "exit codes"));
  /* $MOONCAKE_ADMIN is the default address */
  setenv("MOONCAKE_ADMIN", C.admin_addr, 1);
  run_tool(&o, 10000, "mooncake", "--json", "segments", NULL);
  CHECK_EQ(o.rc, 0);
  unsetenv("MOONCAKE_ADMIN");
}

static void test_teardown(void) {
  if (W) mooncake_store_destroy(W);
  W = NULL;
  stop_cluster(&C);
}

/* trace_replay on the first requests of the real trace against a fresh master: its own hit ratio
 * equals the master's store_hit_ratio, from the same integer counts. */
static void test_trace_replay(void) {
  const char *trace = getenv("MC_TRACE");
  REQUIRE(trace && !access(trace, R_OK)); /* MC_TRACE_FILE: docs/testing.md, "Data sets" */
  struct cluster c = {0};
  REQUIRE(start_master(&c, "replay", "20") == 0);
  char a1[96], a2[128], a3[96];
  snprintf(a1, sizeof(a1), "--master=%s", c.addr);
  snprintf(a2, sizeof(a2), "--metadata=%s", c.meta_url);
  snprintf(a3, sizeof(a3), "--admin=%s", c.admin_addr);
  struct out o;
  run_tool(&o, 60000, "trace_replay", trace, a1, a2, a3, "--time-scale=0", "--max-requests=600", "--block-bytes=4096",
           "--segment-size=8MB", "--capacity-blocks2=512", "--verify-requests=8", "--json", NULL);
  CHECK_EQ(o.rc, 0);
  json_t *j = parse(o.so);
  if (!j) mc_tp_dump_log(c.dir);
  REQUIRE(j);
  double hits = jnum(j, "observed.hits"), misses = jnum(j, "observed.misses"), ratio = jnum(j, "observed.hit_ratio");
  double mh = jnum(j, "master.store_lookup_hits_total"), mm = jnum(j, "master.store_lookup_misses_total");
  double mr = jnum(j, "master.store_hit_ratio"), ideal = jnum(j, "ideal_unbounded.hit_ratio");
  fprintf(stderr, "  replay: hits %.0f misses %.0f ratio %.9f | master hits %.0f misses %.0f ratio %.9f | ideal %.6f\n",
          hits, misses, ratio, mh, mm, mr, ideal);
  CHECK_EQ(jnum(j, "requests"), 600);
  CHECK_EQ(hits + misses, jnum(j, "block_lookups"));
  CHECK_EQ(jnum(j, "observed.lookup_errors"), 0);
  CHECK_EQ(mh, hits); /* the same integer counts ... */
  CHECK_EQ(mm, misses);
  CHECK(fabs(mr - ratio) <= 1e-9 * MAX_(ratio, 1e-9)); /* ... so the same ratio */
  /* sanity: 8 MiB / 4 KiB = 2048 blocks; the unbounded ideal bounds everything */
  json_t *lru = json_object_get(j, "lru");
  CHECK_EQ(json_array_size(lru), 2);
  CHECK_EQ(jnum(json_array_get(lru, 0), "capacity_blocks"), 2048);
  double l1 = jnum(json_array_get(lru, 0), "hit_ratio"), l2 = jnum(json_array_get(lru, 1), "hit_ratio");
  CHECK(ideal >= l1 && l1 >= l2 && l2 > 0);
  CHECK(ratio > 0 && ratio <= ideal);
  CHECK(ideal > 0.1 && ideal < 0.9);
  CHECK_EQ(jnum(j, "puts.blocks"), misses);
  CHECK_EQ(jnum(j, "verify.mismatch"), 0);
  CHECK(jnum(j, "verify.ok") > 0);
  CHECK(jnum(j, "throughput.requests_per_s") > 0);
  json_decref(j);
  /* bad input: a clear error, exit 2 / 1, never a crash */
  run_tool(&o, 10000, "trace_replay", NULL);
  CHECK_EQ(o.rc, 2);
  run_tool(&o, 10000, "trace_replay", trace, "--block-bytes=13", NULL);
  CHECK_EQ(o.rc, 2);
  char *bad = mc_tp_path(c.dir, "bad.jsonl");
  FILE *f = fopen(bad, "w");
  fputs("{\"timestamp\": 0, \"hash_ids\": [1, 2]}\n{\"timestamp\": 1, \"hash_ids\": [\"x\"]}\n", f);
  fclose(f);
  run_tool(&o, 10000, "trace_replay", bad, a1, a2, NULL);
  CHECK_EQ(o.rc, 1);
  CHECK(strstr(o.se, "line 2"));
  free(bad);
  stop_cluster(&c);
}

/* The progress line of drain --wait, trace_replay and transfer_engine_bench (common/progress.c): rewritten in place on a
 * terminal, rate-limited; a plain line per period elsewhere, none before the first period. */
static void test_progress_line(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  REQUIRE(f);
  struct mc_progress p;
  mc_progress_start(&p, f, 1, 5);
  mc_progress_show(&p, "step %d", 1);
  mc_progress_show(&p, "step %d", 2); /* within 1/MC_PROGRESS_TTY_HZ s: not shown */
  usleep(1000000 / MC_PROGRESS_TTY_HZ + 20000);
  mc_progress_show(&p, "step %d", 3);
  mc_progress_end(&p);
  fflush(f);
  CHECK_STR(text, "\rstep 1\033[K\rstep 3\033[K\r\033[K");
  fclose(f);
  free(text);
  text = NULL;
  f = open_memstream(&text, &len);
  REQUIRE(f);
  mc_progress_start(&p, f, 0, 0.2);
  mc_progress_show(&p, "early"); /* before the first period: nothing */
  usleep(250000);
  mc_progress_show(&p, "line %d", 1);
  mc_progress_show(&p, "line %d", 2); /* within the period */
  usleep(250000);
  mc_progress_show(&p, "line %d", 3);
  mc_progress_end(&p);
  fflush(f);
  CHECK_STR(text, "line 1\nline 3\n");
  fclose(f);
  free(text);
}

/* transfer_engine_bench shows its progress on a long run: with stderr a pipe, a plain line after
 * MC_PROGRESS_EVERY_S seconds carrying elapsed/total seconds, batches so far and the rate. */
static void test_bench_progress(void) {
  char *dir = mc_tp_mkdtemp("cli_bench");
  REQUIRE(dir);
  char *log = mc_tp_path(dir, "target.out"), bin[600];
  snprintf(bin, sizeof(bin), "%s/transfer_engine_bench", bin_dir);
  char *targv[] = {bin, "--mode=target", "--metadata_server=P2PHANDSHAKE", "--buffer_size=1048576", NULL};
  pid_t target = mc_tp_spawn(targv, NULL, log);
  REQUIRE(target > 0);
  char seg[128] = "", arg[160];
  for (int i = 0; i < 300 && !seg[0] && !mc_tp_exited(target); i++) {
    usleep(50000);
    FILE *f = fopen(log, "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
      if (sscanf(line, "Target ready: segment %127s", seg) == 1) break;
    if (f) fclose(f);
  }
  CHECK(seg[0]);
  snprintf(arg, sizeof(arg), "--segment_id=%s", seg);
  struct out o;
  run_tool(&o, 60000, "transfer_engine_bench", "--mode=initiator", "--metadata_server=P2PHANDSHAKE", arg,
           "--duration=6", "--threads=1", "--batch_size=4", "--block_size=4096", NULL);
  CHECK_EQ(o.rc, 0);
  CHECK(strstr(o.so, "Test completed: duration"));
  unsigned long long batches = 0;
  double rate = 0;
  const char *line = strstr(o.se, "bench: 5/6 s, ");
  CHECK(line && sscanf(line, "bench: 5/6 s, %llu batches, %lf", &batches, &rate) == 2);
  CHECK(batches > 0 && rate > 0);
  if (!line) fprintf(stderr, "stderr: %s\n", o.se);
  mc_tp_stop(target, 5000);
  mc_tp_rmrf(dir);
  free(log);
  free(dir);
}

/* Every program a user runs answers --version with its name and the product's version, exit 0. */
static void test_versions(void) {
  static const char *const progs[] = {"mooncake", "mooncake_master", "mooncake_http_metadata_server",
                                      "mooncake_store_node", "mooncake_client", "transfer_engine_bench"};
  for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
    struct out o;
    char want[128];
    run_tool(&o, 5000, progs[i], "--version", NULL);
    snprintf(want, sizeof(want), "%s version %s\n", progs[i], MC_STORE_VERSION);
    CHECK_EQ(o.rc, 0);
    CHECK_STR(o.so, want);
  }
}

int main(int argc, char **argv) {
  snprintf(bin_dir, sizeof(bin_dir), "%s", getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".");
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_setup),   TEST_CASE(test_metrics), TEST_CASE(test_status),   TEST_CASE(test_segments),
      TEST_CASE(test_keys_and_key), TEST_CASE(test_remove), TEST_CASE(test_drain), TEST_CASE(test_errors),
      TEST_CASE(test_teardown), TEST_CASE(test_trace_replay), TEST_CASE(test_progress_line), TEST_CASE(test_versions),
      TEST_CASE(test_bench_progress),
  };
  /* The cluster cases depend on each other: a name selects test_setup + that case + teardown. */
  if (argc > 1) {
    int rc = 0;
    char *only[] = {argv[0], "test_setup"};
    rc |= mc_test_run(cases, 1, 2, only);
    char *sel[] = {argv[0], argv[1]};
    rc |= mc_test_run(cases + 1, (int)(sizeof(cases) / sizeof(cases[0])) - 1, 2, sel);
    test_teardown();
    return rc ? 1 : 0;
  }
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
