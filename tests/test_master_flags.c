/* Black-box tests of mooncake_master's command line (docs/master.md, "Command line"): gflags syntax, the
 * guide's commands verbatim, unknown flags, --help/--version, durations with units, config files (JSON,
 * YAML) and their precedence, boolean forms, unsupported flags, --flagfile, --log_dir, and signal-driven
 * shutdown. */
#include "common/util.h"
#include "lib/master_client.h"
#include "lib/test.h"

static char out_buf[1 << 16];

/* Runs the master with args to completion (expects it to exit by itself within 5 s). Returns the exit
 * status (or -1 on timeout); its output is in out_buf. */
static int run_sync(const char *const args[]) {
  const char *bindir = getenv("MC_TEST_BIN_DIR");
  char bin[1024];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bindir ? bindir : ".");
  char *dir = mc_tp_mkdtemp("mflags"), *log = mc_tp_path(dir, "log");
  char *argv[32] = {bin};
  int n = 1;
  for (int i = 0; args[i] && n < 31; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  pid_t pid = mc_tp_spawn(argv, NULL, log);
  int st = 0, rc = -1;
  long deadline = mc_tp_now_ms() + 5000;
  while (pid > 0 && mc_tp_now_ms() < deadline) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    mc_tp_sleep_ms(10);
  }
  if (rc < 0 && pid > 0) mc_tp_stop(pid, 1000);
  FILE *f = fopen(log, "r");
  size_t got = f ? fread(out_buf, 1, sizeof(out_buf) - 1, f) : 0;
  out_buf[got] = 0;
  if (f) fclose(f);
  mc_tp_rmrf(dir);
  free(dir);
  free(log);
  return rc;
}

static int has(const char *needle) { return strstr(out_buf, needle) != NULL; }

/* Starts a serving master; 0 and mm, or -1. */
static int start(struct mt_master *mm, const char *const args[]) { return mt_master_start(mm, args); }

static void stop_ok(struct mt_master *mm) { CHECK_EQ(mt_master_stop(mm), 0); }

static void test_unknown_flag(void) {
  const char *a[] = {"--eviction_ratio=0.2", "--no_such_flag=3", NULL};
  CHECK_EQ(run_sync(a), 1);
  CHECK(has("ERROR: unknown command line flag 'no_such_flag'"));
  const char *b[] = {"-bogus", NULL};
  CHECK_EQ(run_sync(b), 1);
  CHECK(has("ERROR: unknown command line flag 'bogus'"));
  const char *c[] = {"--nobogus", NULL};
  CHECK_EQ(run_sync(c), 1);
}

static void test_help_and_version(void) {
  const char *h[] = {"--help", NULL};
  CHECK_EQ(run_sync(h), 0);
  CHECK(has("--default_kv_lease_ttl"));
  CHECK(has("--eviction_thread_num"));
  CHECK(has("--client_ttl"));
  CHECK(has("--enable_http_metadata_server"));
  CHECK(has("default: \"50051\""));
  const char *v[] = {"--version", NULL};
  CHECK_EQ(run_sync(v), 0);
  CHECK(has("mooncake_master version " MC_STORE_VERSION));
}

/* The deployment guide's commands, verbatim apart from the port. */
static void test_guide_commands(void) {
  struct mt_master mm;
  const char *g1[] = {"--eviction_high_watermark_ratio=0.9", "--default_kv_lease_ttl=5000", NULL};
  REQUIRE(start(&mm, g1) == 0);
  char line[64];
  snprintf(line, sizeof(line), "Master service started on port %d,", mm.port);
  CHECK(mt_wait_log(&mm, line, 2000));
  CHECK_EQ(mt_log_count(&mm, "default_kv_lease_ttl=5000,"), 1);
  CHECK_EQ(mt_log_count(&mm, "eviction_high_watermark_ratio=0.9,"), 1);
  CHECK_EQ(mt_log_count(&mm, "rpc protocol=tcp"), 1);
  stop_ok(&mm);
  const char *g2[] = {"--eviction_ratio=0.2", "--eviction_thread_num=4", NULL};
  REQUIRE(start(&mm, g2) == 0);
  CHECK(mt_wait_log(&mm, "eviction_ratio=0.2,", 2000));
  CHECK_EQ(mt_log_count(&mm, "eviction_thread_num=4,"), 1);
  CHECK_EQ(mt_log_count(&mm, "client_ttl=10,"), 1); /* defaults */
  CHECK_EQ(mt_log_count(&mm, "default_kv_lease_ttl=10000,"), 1);
  CHECK_EQ(mt_log_count(&mm, "enable_metadata_cleanup_on_timeout=1"), 1); /* on by default here */
  stop_ok(&mm);
}

static void test_durations(void) {
  struct mt_master mm;
  const char *a[] = {"--default_kv_lease_ttl= 7 m ", "--default_kv_soft_pin_ttl=1H", "--max_kv_soft_pin_ttl", "36h", NULL};
  REQUIRE(start(&mm, a) == 0);
  CHECK(mt_wait_log(&mm, "default_kv_lease_ttl=420000,", 2000));
  CHECK_EQ(mt_log_count(&mm, "default_kv_soft_pin_ttl=3600000,"), 1);
  CHECK_EQ(mt_log_count(&mm, "max_kv_soft_pin_ttl=129600000,"), 1);
  stop_ok(&mm);
  const char *bad[][2] = {{"--default_kv_lease_ttl=1d", NULL}, {"--default_kv_lease_ttl=-1", NULL},
                          {"--default_kv_lease_ttl=", NULL},   {"--default_kv_soft_pin_ttl=abc", NULL},
                          {"--max_kv_soft_pin_ttl=99999999999999999999", NULL}};
  for (size_t i = 0; i < MC_ARRAY_LEN(bad); i++) {
    CHECK_EQ(run_sync(bad[i]), 1);
    CHECK(has("Invalid value for --"));
  }
  CHECK(has("Invalid value for --max_kv_soft_pin_ttl: 99999999999999999999. value overflows"));
  const char *d[] = {"--default_kv_lease_ttl=1d", NULL};
  run_sync(d);
  CHECK(has("Invalid value for --default_kv_lease_ttl: 1d. unknown unit 'd'"));
}

static char *write_file(const char *dir, const char *name, const char *text) {
  char *p = mc_tp_path(dir, name);
  FILE *f = fopen(p, "w");
  fputs(text, f);
  fclose(f);
  return p;
}

static void test_config_files(void) {
  char *dir = mc_tp_mkdtemp("mcfgf");
  REQUIRE(dir);
  char *yaml = write_file(dir, "master.yaml",
                          "eviction_ratio: 0.1\neviction_high_watermark_ratio: 1.0\nrpc_thread_num: 16\n"
                          "client_live_ttl_sec: 60\ndefault_kv_lease_ttl: 8s\n");
  char *json = write_file(dir, "master.json", "{\"client_live_ttl_sec\": 30, \"eviction_ratio\": 0.15}");
  char *toml = write_file(dir, "master.toml", "a = 1\n");
  char flag[512];
  struct mt_master mm;
  snprintf(flag, sizeof(flag), "--config_path=%s", yaml);
  const char *a[] = {flag, "--eviction_ratio=0.3", NULL}; /* the command line wins over the file */
  REQUIRE(start(&mm, a) == 0);
  CHECK(mt_wait_log(&mm, "Master service started", 2000));
  CHECK_EQ(mt_log_count(&mm, "Loading config from: "), 1);
  CHECK_EQ(mt_log_count(&mm, "eviction_ratio=0.3,"), 1);
  CHECK_EQ(mt_log_count(&mm, "eviction_high_watermark_ratio=1,"), 1);
  CHECK_EQ(mt_log_count(&mm, "client_ttl=60,"), 1);
  CHECK_EQ(mt_log_count(&mm, "max_threads=16,"), 1);
  CHECK_EQ(mt_log_count(&mm, "default_kv_lease_ttl=8000,"), 1);
  stop_ok(&mm);
  const char *b[] = {"--config_path", json, NULL};
  REQUIRE(start(&mm, b) == 0);
  CHECK(mt_wait_log(&mm, "client_ttl=30,", 2000));
  CHECK_EQ(mt_log_count(&mm, "eviction_ratio=0.15,"), 1);
  stop_ok(&mm);
  snprintf(flag, sizeof(flag), "--config_path=%s", toml);
  const char *c[] = {flag, NULL};
  CHECK_EQ(run_sync(c), 1);
  CHECK(has("Unsupported config file format"));
  /* A flow map and a flow list (the old line reader took them for unknown keys and started on defaults). */
  char *flow = write_file(dir, "flow.yml", "{eviction_ratio: 0.12, client_live_ttl_sec: 33,\n"
                                           " etcd_endpoints: [\"127.0.0.1:2379\"]}\n");
  snprintf(flag, sizeof(flag), "--config_path=%s", flow);
  const char *e[] = {flag, NULL};
  REQUIRE(start(&mm, e) == 0);
  CHECK(mt_wait_log(&mm, "client_ttl=33,", 2000));
  CHECK_EQ(mt_log_count(&mm, "eviction_ratio=0.12,"), 1);
  stop_ok(&mm);
  char *dup = write_file(dir, "dup.yaml", "rpc_port: 1\nrpc_port: 2\n");
  snprintf(flag, sizeof(flag), "--config_path=%s", dup);
  const char *f[] = {flag, NULL};
  CHECK_EQ(run_sync(f), 1);
  CHECK(has("dup.yaml:2: duplicate key 'rpc_port'"));
  free(yaml), free(json), free(toml), free(flow), free(dup);
  mc_tp_rmrf(dir);
  free(dir);
}

static void test_booleans_and_forms(void) {
  struct mt_master mm;
  const char *a[] = {"--noenable_metric_reporting", "-allow_evict_soft_pinned_objects=false", "-eviction_ratio", "0.25",
                     "--enable_metadata_cleanup_on_timeout", "false", NULL};
  REQUIRE(start(&mm, a) == 0);
  CHECK(mt_wait_log(&mm, "enable_metric_reporting=0,", 2000));
  CHECK_EQ(mt_log_count(&mm, "allow_evict_soft_pinned_objects=0,"), 1);
  CHECK_EQ(mt_log_count(&mm, "eviction_ratio=0.25,"), 1);
  /* "--flag false" sets the flag; "false" is a stray positional argument (gflags) */
  CHECK_EQ(mt_log_count(&mm, "enable_metadata_cleanup_on_timeout=1"), 1);
  CHECK_EQ(mt_log_count(&mm, "ignoring positional argument 'false'"), 1);
  stop_ok(&mm);
  const char *v[] = {"-v2", NULL};
  REQUIRE(start(&mm, v) == 0);
  CHECK(mt_wait_log(&mm, "eviction thread started", 2000)); /* a --v=1 trace */
  stop_ok(&mm);
}

static void test_invalid_values(void) {
  const char *cases[][2] = {{"--eviction_ratio=1.5", NULL},        {"--memory_allocator=slab", NULL},
                            {"--allocation_strategy=bogus", NULL}, {"--rpc_port=70000", NULL},
                            {"--client_ttl=abc", NULL},            {"--rpc_interface=no-such-if0", NULL}};
  const char *msgs[] = {"eviction_ratio", "Invalid memory allocator", "Invalid allocation strategy", "rpc_port",
                        "client_ttl", "rpc_interface"};
  for (size_t i = 0; i < MC_ARRAY_LEN(cases); i++) {
    CHECK_EQ(run_sync(cases[i]), 1);
    CHECK(has(msgs[i]));
  }
}

static void test_unsupported_and_deprecated(void) {
  struct mt_master mm;
  int port = mc_tp_free_port();
  char pflag[32];
  snprintf(pflag, sizeof(pflag), "--port=%d", port);
  /* rpc_port=0 falls back to the deprecated --port */
  const char *a[] = {pflag, "--enable_snapshot", "--enable_offload=true", "--memory_allocator=cachelib",
                     "--allocation_strategy=ssd_free_ratio_first", "--nof_eviction_ratio=0.1", NULL};
  REQUIRE(mt_master_spawn(&mm, a, NULL, port) == 0);
  CHECK(mt_wait_log(&mm, "--enable_snapshot is set but not supported", 2000));
  CHECK_EQ(mt_log_count(&mm, "--enable_offload is set but not supported"), 1);
  CHECK_EQ(mt_log_count(&mm, "--port is deprecated"), 1);
  CHECK_EQ(mt_log_count(&mm, "cachelib is deprecated"), 1);
  char line[64];
  snprintf(line, sizeof(line), "started on port %d,", port);
  CHECK(mt_wait_log(&mm, line, 2000)); /* logged just after the port starts accepting */
  CHECK_EQ(mt_log_count(&mm, line), 1);
  stop_ok(&mm);
}

static void test_signals_and_log_dir(void) {
  char *dir = mc_tp_mkdtemp("mlogdir");
  REQUIRE(dir);
  char flag[512];
  snprintf(flag, sizeof(flag), "--log_dir=%s", dir);
  struct mt_master mm;
  const char *a[] = {flag, NULL};
  REQUIRE(start(&mm, a) == 0);
  char *link = mc_tp_path(dir, "mooncake_master.INFO");
  long deadline = mc_tp_now_ms() + 2000;
  struct mt_master view = {.log = link};
  while (!mt_log_count(&view, "Master service started") && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(20);
  CHECK_EQ(mt_log_count(&view, "Master service started"), 1);
  kill(mm.pid, SIGINT);
  int st = 0;
  CHECK_EQ(waitpid(mm.pid, &st, 0), mm.pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(mt_log_count(&view, "Shutdown signal received, exiting gracefully"), 1);
  char target[256] = "";
  CHECK(readlink(link, target, sizeof(target) - 1) > 0);
  CHECK(!strncmp(target, "mooncake_master.INFO.", 21));
  mc_tp_rmrf(mm.dir);
  free(mm.dir), free(mm.log), free(link);
  mc_tp_rmrf(dir);
  free(dir);
  /* SIGTERM */
  REQUIRE(start(&mm, NULL) == 0);
  CHECK(mt_wait_log(&mm, "Master service started", 2000));
  kill(mm.pid, SIGTERM);
  CHECK_EQ(waitpid(mm.pid, &st, 0), mm.pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(mt_log_count(&mm, "Shutdown signal received, exiting gracefully"), 1);
  mc_tp_rmrf(mm.dir);
  free(mm.dir), free(mm.log);
}

static void test_flagfile_and_embedded_metadata(void) {
  char *dir = mc_tp_mkdtemp("mff");
  REQUIRE(dir);
  int mport = mc_tp_free_port();
  char text[256];
  snprintf(text, sizeof(text), "# flags\n--enable_http_metadata_server\n--http_metadata_server_port=%d\n\n"
                               "--client_ttl=7\n", mport);
  char *ff = write_file(dir, "flags", text), flag[512];
  snprintf(flag, sizeof(flag), "--flagfile=%s", ff);
  struct mt_master mm;
  const char *a[] = {flag, NULL};
  REQUIRE(start(&mm, a) == 0);
  CHECK(mt_wait_log(&mm, "client_ttl=7,", 2000));
  CHECK_EQ(mt_log_count(&mm, "enable_http_metadata_server=1"), 1);
  CHECK_EQ(mc_tp_wait_port(mport, 3000, mm.pid), 0);
  char resp[1024];
  static const char req[] = "GET /health HTTP/1.0\r\n\r\n";
  CHECK(mc_tp_raw_http(mport, req, sizeof(req) - 1, resp, sizeof(resp), 2000) > 0);
  CHECK_EQ(mc_tp_http_status(resp), 200);
  stop_ok(&mm);
  free(ff);
  mc_tp_rmrf(dir);
  free(dir);
}

TEST_MAIN(TEST_CASE(test_unknown_flag), TEST_CASE(test_help_and_version), TEST_CASE(test_guide_commands),
          TEST_CASE(test_durations), TEST_CASE(test_config_files), TEST_CASE(test_booleans_and_forms),
          TEST_CASE(test_invalid_values), TEST_CASE(test_unsupported_and_deprecated), TEST_CASE(test_signals_and_log_dir),
          TEST_CASE(test_flagfile_and_embedded_metadata))
