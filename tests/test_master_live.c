/* Black-box liveness tests (docs/master.md, "Liveness and metadata cleanup"): ping status and remount,
 * expiry of a client that stops pinging (segments, objects and TE metadata keys gone within
 * client_ttl + 1 s), the restart rule for a segment name still held by an older incarnation (probe
 * answered vs not). */
#include "lib/master_client.h"
#include "lib/test.h"
#include "net/ctrl_rpc.h"
#include "meta/metadata.h"

#define BASE 0x7f0000000000ull
#define MIB (1ull << 20)

struct env {
  struct mt_master mm;
  struct mc_mrpc_client *c;
  int meta_port;
  struct mc_meta *meta; /* client of the embedded metadata server, when started with one */
};

static int env_start_env(struct env *e, const char *const extra[], int embedded_meta, char *const envv[]) {
  const char *args[16];
  char metaflag[64];
  int n = 0;
  memset(e, 0, sizeof(*e));
  if (embedded_meta) {
    e->meta_port = mc_tp_free_port();
    snprintf(metaflag, sizeof(metaflag), "--http_metadata_server_port=%d", e->meta_port);
    args[n++] = "--enable_http_metadata_server";
    args[n++] = metaflag;
  }
  for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  if (mt_master_start_env(&e->mm, args, envv)) return -1;
  e->c = mt_connect(e->mm.port);
  if (embedded_meta) {
    char conn[96];
    snprintf(conn, sizeof(conn), "http://127.0.0.1:%d/metadata", e->meta_port);
    if (mc_tp_wait_port(e->meta_port, 5000, e->mm.pid) || mc_meta_open(conn, &e->meta)) return -1;
  }
  return 0;
}

static int env_start(struct env *e, const char *const extra[], int embedded_meta) {
  return env_start_env(e, extra, embedded_meta, NULL);
}

static void env_stop(struct env *e) {
  if (e->meta) mc_meta_close(e->meta);
  mc_mrpc_client_free(e->c);
  CHECK_EQ(mt_master_stop(&e->mm), 0);
}

static uint32_t seg_count(struct env *e) {
  uint32_t n = 0;
  CHECK_EQ(mt_query_segments(e->c, &n, NULL, NULL, NULL, 0), 0);
  return n;
}

static int meta_has(struct mc_meta *m, const char *key) {
  char *v = NULL;
  int rc = mc_meta_get(m, key, &v);
  free(v);
  return rc == 0;
}

/* ------------------------------------------------------------------ ping, expiry, remount */

static void test_ping_expiry_and_remount(void) {
  const char *args[] = {"--client_ttl=2", NULL};
  struct env e;
  REQUIRE(env_start(&e, args, 0) == 0);
  struct mc_uuid a = mt_id(1), b = mt_id(2);
  struct mc_segment_rec sa = mt_seg(1, "10.0.0.1:1", BASE, MIB), sb = mt_seg(2, "10.0.0.2:1", BASE + 4 * MIB, MIB);
  int st = -1;
  CHECK_EQ(mt_mount(e.c, a, &sa), 0);
  CHECK_EQ(mt_mount(e.c, b, &sb), 0);
  CHECK_EQ(mt_ping(e.c, a, &st), 0);
  CHECK_EQ(st, MC_PING_NEED_REMOUNT); /* only ReMountSegment marks a client OK */
  CHECK_EQ(mt_remount(e.c, a, &sa, 1), 0);
  CHECK_EQ(mt_remount(e.c, b, &sb, 1), 0);
  CHECK_EQ(mt_remount(e.c, a, &sa, 1), 0); /* idempotent */
  CHECK_EQ(seg_count(&e), 2);
  CHECK_EQ(mt_ping(e.c, a, &st), 0);
  CHECK_EQ(st, MC_PING_OK);
  struct mc_put_config on_a = mt_cfg(1);
  on_a.n_preferred = 1;
  on_a.preferred[0] = "10.0.0.1:1";
  CHECK_EQ(mt_put_start(e.c, a, "on-a", 100, &on_a, NULL, NULL), 0);
  CHECK_EQ(mt_put_end(e.c, a, "on-a"), 0);
  CHECK_EQ(mt_put(e.c, b, "both", 100, 2), 0);
  /* a stops pinging; b keeps pinging */
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_ping(e.c, a, &st), 0);
  long gone = -1;
  while (mc_tp_now_ms() - t0 < 4000 && gone < 0) {
    CHECK_EQ(mt_ping(e.c, b, &st), 0);
    CHECK_EQ(st, MC_PING_OK);
    if (mc_tp_now_ms() - t0 < 1500) CHECK_EQ(seg_count(&e), 2); /* not before the TTL */
    if (seg_count(&e) == 1) gone = mc_tp_now_ms() - t0;
    mc_tp_sleep_ms(100);
  }
  CHECK(gone >= 1900 && gone <= 3000); /* within client_ttl + 1 s */
  CHECK_EQ(mt_get(e.c, "on-a", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  uint32_t n = 0;
  CHECK_EQ(mt_get(e.c, "both", NULL, &n, NULL), 0); /* survives on b's segment */
  CHECK_EQ(n, 1);
  CHECK_EQ(mt_log_count(&e.mm, "client_id=c11e0000-0000-0001-0000-000000001eef, action=client_expired"), 1);
  CHECK_EQ(mt_log_count(&e.mm, "segment_name=10.0.0.1:1, action=unmount_expired_mem_segment"), 1);
  /* the expired client comes back: NEED_REMOUNT, remount, OK */
  CHECK_EQ(mt_ping(e.c, a, &st), 0);
  CHECK_EQ(st, MC_PING_NEED_REMOUNT);
  CHECK_EQ(mt_remount(e.c, a, &sa, 1), 0);
  CHECK_EQ(mt_ping(e.c, a, &st), 0);
  CHECK_EQ(st, MC_PING_OK);
  CHECK_EQ(seg_count(&e), 2);
  /* a re-mounted segment takes no new allocation for MC_REMOUNT_QUIET_NS (late extent writes from
   * before the master forgot it): the preferred segment is skipped, then used again */
  struct mc_replica_rec *reps = NULL;
  n = 0;
  CHECK_EQ(mt_put_start(e.c, a, "on-a", 100, &on_a, &reps, &n), 0);
  CHECK(n == 1 && reps && !strcmp(reps[0].segment_name, "10.0.0.2:1"));
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_put_end(e.c, a, "on-a"), 0);
  for (long t0 = mc_tp_now_ms(); mc_tp_now_ms() - t0 < (long)(MC_FASTPUT_CONTACT_NS / 1000000) + 1200;) {
    CHECK_EQ(mt_ping(e.c, a, &st), 0); /* MC_REMOUNT_QUIET_NS + 200 ms, a staying alive */
    CHECK_EQ(st, MC_PING_OK);
    mc_tp_sleep_ms(200);
  }
  reps = NULL;
  CHECK_EQ(mt_put_start(e.c, a, "on-a-later", 100, &on_a, &reps, &n), 0);
  CHECK(n == 1 && reps && !strcmp(reps[0].segment_name, "10.0.0.1:1"));
  mc_replicas_free(reps, n);
  CHECK_EQ(mt_put_end(e.c, a, "on-a-later"), 0);
  env_stop(&e);
}

/* ------------------------------------------------------------------ TE metadata cleanup */

/* The keys of an engine at 127.0.0.1:port (port 1: a dead one, nothing listens there). The master deletes
 * an expired client's keys only when they name the probe address it mounted with and nobody answers. */
#define DEAD_OWNER "127.0.0.1:1"
static void publish_at(struct mc_meta *m, const char *prefix, const char *name, int port) {
  char key[256], val[128];
  snprintf(val, sizeof(val), "{\"name\":\"x\",\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":%d}", port);
  snprintf(key, sizeof(key), "%sram/%s", prefix, name);
  CHECK_EQ(mc_meta_set(m, key, val), 0);
  snprintf(val, sizeof(val), "{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":%d}", port);
  snprintf(key, sizeof(key), "%srpc_meta/%s", prefix, name);
  CHECK_EQ(mc_meta_set(m, key, val), 0);
}

static void publish(struct mc_meta *m, const char *prefix, const char *name) { publish_at(m, prefix, name, 1); }

static int published(struct mc_meta *m, const char *prefix, const char *name) {
  char k1[256], k2[256];
  snprintf(k1, sizeof(k1), "%sram/%s", prefix, name);
  snprintf(k2, sizeof(k2), "%srpc_meta/%s", prefix, name);
  return meta_has(m, k1) + meta_has(m, k2);
}

static void test_metadata_cleanup_embedded(void) {
  const char *args[] = {"--client_ttl=1", NULL};
  struct env e;
  REQUIRE(env_start(&e, args, 1) == 0);
  publish(e.meta, "mooncake/", "10.0.0.5:7");
  publish(e.meta, "mooncake/", "10.0.0.6:7");
  struct mc_segment_rec s = mt_seg(1, "10.0.0.5:7", BASE, MIB), other = mt_seg(2, "10.0.0.6:7", BASE + 4 * MIB, MIB);
  s.probe_addr = other.probe_addr = DEAD_OWNER;
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s), 0);
  CHECK_EQ(mt_mount(e.c, mt_id(2), &other), 0);
  long t0 = mc_tp_now_ms();
  while (published(e.meta, "mooncake/", "10.0.0.5:7") && mc_tp_now_ms() - t0 < 3000) {
    int st;
    mt_ping(e.c, mt_id(2), &st);
    mc_tp_sleep_ms(100);
  }
  CHECK_EQ(published(e.meta, "mooncake/", "10.0.0.5:7"), 0); /* the dead client's keys are gone */
  CHECK_EQ(published(e.meta, "mooncake/", "10.0.0.6:7"), 2); /* the live one's stay */
  CHECK(mc_tp_now_ms() - t0 <= 2500);
  CHECK_EQ(seg_count(&e), 1);
  env_stop(&e);
}

/* Not embedded: --metadata_server names the service; keys carry $MC_METADATA_CLUSTER_ID. */
static void test_metadata_cleanup_external(void) {
  struct env svc, e;
  REQUIRE(env_start(&svc, NULL, 1) == 0); /* a master used only as an HTTP metadata server */
  char flag[128];
  snprintf(flag, sizeof(flag), "--metadata_server=http://127.0.0.1:%d/metadata", svc.meta_port);
  const char *args[] = {"--client_ttl=1", flag, NULL};
  char *envv[] = {"MC_METADATA_CLUSTER_ID=c1", NULL};
  REQUIRE(env_start_env(&e, args, 0, envv) == 0);
  publish(svc.meta, "mooncake/c1/", "10.0.0.8:9");
  publish(svc.meta, "mooncake/", "10.0.0.8:9"); /* other cluster prefix: untouched */
  struct mc_segment_rec s = mt_seg(1, "10.0.0.8:9", BASE, MIB);
  s.probe_addr = DEAD_OWNER;
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s), 0);
  long t0 = mc_tp_now_ms();
  while (published(svc.meta, "mooncake/c1/", "10.0.0.8:9") && mc_tp_now_ms() - t0 < 3000) mc_tp_sleep_ms(100);
  CHECK_EQ(published(svc.meta, "mooncake/c1/", "10.0.0.8:9"), 0);
  CHECK_EQ(published(svc.meta, "mooncake/", "10.0.0.8:9"), 2);
  env_stop(&e);
  /* cleanup disabled: keys stay */
  const char *off[] = {"--client_ttl=1", flag, "--enable_metadata_cleanup_on_timeout=false", NULL};
  REQUIRE(env_start_env(&e, off, 0, envv) == 0);
  publish(svc.meta, "mooncake/c1/", "10.0.0.8:9");
  CHECK_EQ(mt_mount(e.c, mt_id(1), &s), 0);
  mc_tp_sleep_ms(2200);
  CHECK_EQ(seg_count(&e), 0);
  CHECK_EQ(published(svc.meta, "mooncake/c1/", "10.0.0.8:9"), 2);
  env_stop(&e);
  env_stop(&svc);
}

/* ------------------------------------------------------------------ restart rule (segment ownership) */

static void probe_handler(void *ctx, int type, const char *req, size_t len, char **reply) {
  (void)ctx, (void)type, (void)req, (void)len;
  *reply = NULL; /* "{}" */
}

static void test_restart_rule(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, 1) == 0);
  uint16_t pport = 0;
  struct mc_rpc_server *responder = mc_rpc_server_start(0, probe_handler, NULL, &pport);
  REQUIRE(responder);
  char probe[64];
  snprintf(probe, sizeof(probe), "127.0.0.1:%u", (unsigned)pport);
  struct mc_uuid old = mt_id(1), neu = mt_id(2);
  struct mc_segment_rec s_old = mt_seg(1, "node:1", BASE, MIB);
  s_old.probe_addr = probe;
  s_old.te_endpoint = "node:1@old";
  CHECK_EQ(mt_mount(e.c, old, &s_old), 0);
  CHECK_EQ(mt_put(e.c, old, "old-obj", 100, 1), 0);
  publish_at(e.meta, "mooncake/", "node:1@old", pport);
  /* a new incarnation under the same name while the old one answers its probe: refused */
  struct mc_segment_rec s_new = mt_seg(2, "node:1", BASE + 8 * MIB, MIB);
  s_new.te_endpoint = "node:1@new";
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_mount(e.c, neu, &s_new), MC_SEGMENT_ALREADY_EXISTS);
  CHECK(mc_tp_now_ms() - t0 < 1500);
  CHECK_EQ(seg_count(&e), 1);
  CHECK_EQ(mt_exist(e.c, "old-obj"), 1);
  CHECK_EQ(published(e.meta, "mooncake/", "node:1@old"), 2);
  /* the old incarnation is gone: its segments and keys go at once and the new mount proceeds */
  mc_rpc_server_stop(responder);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mt_mount(e.c, neu, &s_new), 0);
  CHECK(mc_tp_now_ms() - t0 < 1500);
  uint32_t n = 0;
  char names[2][64];
  CHECK_EQ(mt_query_segments(e.c, &n, names, NULL, NULL, 2), 0);
  CHECK_EQ(n, 1);
  CHECK_EQ(mt_get(e.c, "old-obj", NULL, NULL, NULL), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(published(e.meta, "mooncake/", "node:1@old"), 0);
  CHECK_EQ(mt_put(e.c, neu, "new-obj", 100, 1), 0);
  /* a holder that accepts but never answers keeps its name while it has contacted the master within the
   * last 3 s (it may be flooded), and counts as gone once it has not (after the ~2 s probe retries) */
  int sport = 0, sfd = mc_tp_silent_listener(&sport);
  REQUIRE(sfd >= 0);
  char silent[64];
  snprintf(silent, sizeof(silent), "127.0.0.1:%d", sport);
  struct mc_segment_rec s_hung = mt_seg(3, "hung:1", BASE + 16 * MIB, MIB);
  s_hung.probe_addr = silent;
  CHECK_EQ(mt_mount(e.c, mt_id(3), &s_hung), 0);
  long mounted = mc_tp_now_ms();
  struct mc_segment_rec s_next = mt_seg(4, "hung:1", BASE + 24 * MIB, MIB); /* same te_endpoint "hung:1" */
  publish(e.meta, "mooncake/", "hung:1");
  CHECK_EQ(mt_mount(e.c, mt_id(4), &s_next), MC_SEGMENT_ALREADY_EXISTS);
  long wait = 3100 - (mc_tp_now_ms() - mounted);
  if (wait > 0) mc_tp_sleep_ms(wait);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mt_mount(e.c, mt_id(4), &s_next), 0);
  long took = mc_tp_now_ms() - t0;
  CHECK(took >= 1900 && took < 4000);
  /* the new incarnation publishes under the same endpoint: its keys are kept */
  CHECK_EQ(published(e.meta, "mooncake/", "hung:1"), 2);
  CHECK_EQ(seg_count(&e), 2);
  close(sfd);
  /* the same client adding a second chunk under its own name is not a conflict */
  struct mc_segment_rec chunk = mt_seg(5, "hung:1", BASE + 32 * MIB, MIB);
  CHECK_EQ(mt_mount(e.c, mt_id(4), &chunk), 0);
  CHECK_EQ(seg_count(&e), 3);
  env_stop(&e);
}

TEST_MAIN(TEST_CASE(test_ping_expiry_and_remount), TEST_CASE(test_metadata_cleanup_embedded),
          TEST_CASE(test_metadata_cleanup_external), TEST_CASE(test_restart_rule))
