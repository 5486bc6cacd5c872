/* The store client's local-disk tier (docs/disk-tier.md) against a real mooncake_master: a client set up with an
 * SSD directory reports its quota and use (/get_segments_detail, /metrics, /metrics/summary), objects put into
 * the directory before setup are recovered and counted, a directory another store holds fails setup and leaves
 * nothing behind, teardown drops the master's sums, and malformed or foreign REPORT_SSD requests are refused. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "disk/disk.h"
#include "lib/http.h"
#include "lib/master_client.h"
#include "lib/test.h"
#include "mooncake/store.h"

#define MiB (1024ull * 1024)

static struct mt_master M;
static char addr[64], metadata[128];

static double metric(const char *name) {
  struct th_resp r;
  th_get(M.metrics_port, "/metrics", &r);
  double v = th_prom_value(r.body, name);
  th_free(&r);
  return v;
}

static double wait_metric(const char *name, double want) {
  double v = -1;
  for (long deadline = mc_tp_now_ms() + 8000; mc_tp_now_ms() < deadline; mc_tp_sleep_ms(100))
    if ((v = metric(name)) == want) break;
  return v;
}

/* The first segment's ssd fields of /get_segments_detail; -1 when there is none. */
static void seg_ssd(long long *cap, long long *used) {
  struct th_resp r;
  *cap = *used = -1;
  th_get(M.metrics_port, "/get_segments_detail", &r);
  json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
  th_free(&r);
  json_t *s = json_array_get(json_object_get(j, "segments"), 0);
  if (s) *cap = json_integer_value(json_object_get(s, "ssd_capacity")), *used = json_integer_value(json_object_get(s, "ssd_used"));
  json_decref(j);
}

static mooncake_store_t client(const char *dir, uint64_t quota, int *rc) {
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t c = {.local_hostname = "127.0.0.1", .metadata_server = metadata, .global_segment_size = 16 * MiB,
                         .protocol = "tcp", .master_server_addr = addr, .ssd_path = dir, .ssd_quota_bytes = quota};
  *rc = mc_store_setup(s, &c);
  if (*rc) mooncake_store_destroy(s);
  return *rc ? NULL : s;
}

static void start(void) {
  int meta = mc_tp_free_port();
  char a1[64];
  snprintf(a1, sizeof(a1), "--http_metadata_server_port=%d", meta);
  const char *flags[] = {"--enable_http_metadata_server", a1, NULL};
  REQUIRE(!mt_master_start(&M, flags));
  REQUIRE(!mc_tp_wait_port(M.metrics_port, 10000, M.pid));
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", M.port);
  snprintf(metadata, sizeof(metadata), "http://127.0.0.1:%d/metadata", meta);
}

static void test_capacity_and_recovery(void) {
  start();
  char tmpl[] = "/tmp/mc_ssd_XXXXXX", dir[128];
  REQUIRE(mkdtemp(tmpl));
  snprintf(dir, sizeof(dir), "%s/tier", tmpl);
  const uint64_t quota = 64 * MiB;
  /* (a) an empty tier: capacity = the quota, nothing used */
  int rc;
  mooncake_store_t s = client(dir, quota, &rc);
  REQUIRE(s);
  CHECK_EQ(wait_metric("master_ssd_capacity_bytes", (double)quota), (double)quota);
  CHECK_EQ(metric("master_ssd_used_bytes"), 0);
  long long cap, used;
  seg_ssd(&cap, &used);
  CHECK_EQ(cap, (long long)quota);
  CHECK_EQ(used, 0);
  struct th_resp r;
  th_get(M.metrics_port, "/metrics/summary", &r);
  CHECK(r.body && strstr(r.body, "SSD Storage: 0 B / 64.00 MiB (0.0%)"));
  th_free(&r);
  /* (c) while it is open, a second client on the same directory fails setup, leaving no segment */
  mooncake_store_t dup = client(dir, quota, &rc);
  CHECK(!dup);
  CHECK_EQ(rc, MC_FILE_LOCK_FAIL);
  /* (d) teardown drops the sums */
  mooncake_store_destroy(s);
  CHECK_EQ(wait_metric("master_ssd_capacity_bytes", 0), 0);
  CHECK_EQ(metric("master_segment_count"), 0);
  /* (b) objects written with the disk API before setup are recovered and reported */
  struct mc_disk *d;
  REQUIRE(!mc_disk_open(dir, quota, NULL, &d, NULL));
  static char v[10000];
  memset(v, 3, sizeof(v));
  CHECK_EQ(mc_disk_put(d, "k1", 2, v, sizeof(v)), 0);
  CHECK_EQ(mc_disk_put(d, "k2", 2, v, 100), 0);
  struct mc_disk_stats st;
  mc_disk_get_stats(d, &st);
  /* (c) a directory another store holds fails setup with FILE_LOCK_FAIL, no segment left behind */
  CHECK(!client(dir, quota, &rc));
  CHECK_EQ(rc, MC_FILE_LOCK_FAIL);
  CHECK_EQ(metric("master_segment_count"), 0);
  mc_disk_close(d);
  s = client(dir, quota, &rc);
  REQUIRE(s);
  CHECK_EQ(wait_metric("master_ssd_used_bytes", (double)st.used_bytes), (double)st.used_bytes);
  seg_ssd(&cap, &used);
  CHECK_EQ(used, (long long)st.used_bytes);
  mooncake_store_destroy(s);
  CHECK_EQ(wait_metric("master_ssd_used_bytes", 0), 0);
  /* a path that is a file cannot be a tier */
  char file[160];
  snprintf(file, sizeof(file), "%s/plain", tmpl);
  FILE *f = fopen(file, "w");
  if (f) fclose(f);
  CHECK(!client(file, quota, &rc));
  CHECK_EQ(rc, MC_FILE_OPEN_FAIL);
  char cmd[200];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
  CHECK_EQ(system(cmd), 0);
  CHECK_EQ(mt_master_stop(&M), 0);
}

/* (f) REPORT_SSD's decoding and confinement over the raw RPC. */
static void test_hostile_reports(void) {
  start();
  struct mc_mrpc_client *c = mt_connect(M.port);
  struct mc_uuid id = mt_id(1);
  struct mc_segment_rec sg = mt_seg(1, "seg-a", 0x100000, 8 * MiB);
  CHECK_EQ(mt_mount(c, id, &sg), 0);
  struct mc_wbuf w = {0};
  /* short: no objects field */
  mc_put_uuid(&w, id), mc_w_u64(&w, 100), mc_w_u64(&w, 1);
  CHECK_EQ(mt_simple(c, MC_OP_REPORT_SSD, &w), MC_INVALID_PARAMS);
  /* trailing bytes */
  w = (struct mc_wbuf){0};
  mc_put_uuid(&w, id), mc_w_u64(&w, 100), mc_w_u64(&w, 1), mc_w_u64(&w, 1), mc_w_u8(&w, 0);
  CHECK_EQ(mt_simple(c, MC_OP_REPORT_SSD, &w), MC_INVALID_PARAMS);
  /* used > capacity */
  w = (struct mc_wbuf){0};
  mc_put_uuid(&w, id), mc_w_u64(&w, 100), mc_w_u64(&w, 101), mc_w_u64(&w, 1);
  CHECK_EQ(mt_simple(c, MC_OP_REPORT_SSD, &w), MC_INVALID_PARAMS);
  /* a client with no segment here */
  w = (struct mc_wbuf){0};
  mc_put_uuid(&w, mt_id(2)), mc_w_u64(&w, 100), mc_w_u64(&w, 1), mc_w_u64(&w, 1);
  CHECK_EQ(mt_simple(c, MC_OP_REPORT_SSD, &w), MC_CLIENT_NOT_FOUND);
  CHECK_EQ(metric("master_ssd_capacity_bytes"), 0);
  /* a good report, then the unmount drops it */
  w = (struct mc_wbuf){0};
  mc_put_uuid(&w, id), mc_w_u64(&w, 100), mc_w_u64(&w, 1), mc_w_u64(&w, 1);
  CHECK_EQ(mt_simple(c, MC_OP_REPORT_SSD, &w), 0);
  CHECK_EQ(metric("master_ssd_capacity_bytes"), 100);
  CHECK_EQ(metric("master_ssd_used_bytes"), 1);
  CHECK_EQ(mt_unmount(c, sg.id, id), 0);
  CHECK_EQ(metric("master_ssd_capacity_bytes"), 0);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&M), 0);
}

TEST_MAIN(TEST_CASE(test_capacity_and_recovery), TEST_CASE(test_hostile_reports))
