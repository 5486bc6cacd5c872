/* Building and tearing down a client: argument checks, the memory check (docs/store-client.md, "Setup"), the held
 * auto port, the master connection, the metadata probe, the transfer engine, the segment and staging
 * buffer, the mount, the local-disk tier (docs/disk-tier.md), and starting the heartbeat thread (heartbeat.c);
 * teardown undoes them in reverse.
 * Every dependency is bounded so setup answers within ~10 s, and the log line names the dependency that
 * failed. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "net/sock.h"

#include "disk/disk.h"
#include "meta/metadata.h"

#define SETUP_BUDGET_MS 10000
#define MASTER_CHECK_MS 4000 /* connect + SERVICE_READY */
#define LEADER_RETRY_MS 200  /* following a leader: pause before reading the key again */
#define TEARDOWN_RPC_MS 3000
#define DEFAULT_MASTER_PORT 50051
#define MOUNT_RETRY_MS 8000 /* a name held by a hung predecessor: the master waits 3 s of silence, then probes ~2 s */
#define MOUNT_RETRY_GAP_MS 250

struct mc_store *mc_store_alloc(void) {
  struct mc_store *s = mc_try_calloc(1, sizeof(*s));
  if (!s) return NULL;
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&s->life, &a);
  pthread_rwlockattr_destroy(&a);
  pthread_rwlock_init(&s->regs.mu, NULL);
  pthread_mutex_init(&s->shun.mu, NULL);
  pthread_mutex_init(&s->stats.mu, NULL);
  mc_heartbeat_init(s);
  mc_sessions_init(s);
  pthread_rwlock_init(&s->xsegs.mu, NULL);
  s->self.port_fd = -1;
  return s;
}

void mc_store_free(struct mc_store *s) {
  pthread_rwlock_destroy(&s->life);
  pthread_rwlock_destroy(&s->regs.mu);
  pthread_mutex_destroy(&s->shun.mu);
  pthread_mutex_destroy(&s->stats.mu);
  mc_heartbeat_destroy(s);
  mc_sessions_free(s);
  pthread_rwlock_destroy(&s->xsegs.mu);
  mc_free(s);
}

static int remaining_ms(uint64_t deadline) {
  uint64_t now = mc_now_ms();
  return now >= deadline ? 1 : (int)(deadline - now);
}

/* ------------------------------------------------------------------ memory check */

/* A field of /proc/meminfo in bytes, 0 if absent. */
static uint64_t meminfo(const char *field) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  uint64_t v = 0;
  size_t fl = strlen(field);
  while (f && fgets(line, sizeof(line), f))
    if (!strncmp(line, field, fl) && line[fl] == ':') {
      v = strtoull(line + fl + 1, NULL, 10) * 1024;
      break;
    }
  if (f) fclose(f);
  return v;
}

/* A number from a one-line file; 0 when absent or "max". */
static uint64_t file_u64(const char *path) {
  FILE *f = fopen(path, "r");
  char buf[64] = "";
  if (f && !fgets(buf, sizeof(buf), f)) buf[0] = 0;
  if (f) fclose(f);
  return (buf[0] >= '0' && buf[0] <= '9') ? strtoull(buf, NULL, 10) : 0;
}

/* What this process can still back: MemAvailable + SwapFree, capped by the cgroup's headroom. */
static uint64_t backable_bytes(char *why, size_t wl) {
  uint64_t avail = meminfo("MemAvailable"), swap = meminfo("SwapFree"), total = avail + swap;
  int n = snprintf(why, wl, "MemAvailable %llu + free swap %llu", (unsigned long long)avail,
                   (unsigned long long)swap);
  uint64_t limit = file_u64("/sys/fs/cgroup/memory.max"), used = file_u64("/sys/fs/cgroup/memory.current");
  if (!limit) { /* cgroup v1: "no limit" reads as a huge number */
    limit = file_u64("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = file_u64("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (limit >= (1ull << 60)) limit = 0;
  }
  if (limit) {
    uint64_t room = limit > used ? limit - used : 0;
    if (room < total) total = room;
    if (n > 0 && (size_t)n < wl)
      snprintf(why + n, wl - (size_t)n, ", cgroup limit %llu with %llu in use", (unsigned long long)limit,
               (unsigned long long)used);
  }
  return total;
}

static int check_memory(uint64_t gss, uint64_t lbs) {
  char why[256];
  uint64_t want = gss + lbs, can = backable_bytes(why, sizeof(why));
  if (want >= gss && want <= can) return 0;
  LOG_ERROR("setup: global_segment_size %llu + local_buffer_size %llu bytes exceed the memory this host can back: "
            "%llu bytes (%s)",
            (unsigned long long)gss, (unsigned long long)lbs, (unsigned long long)can, why);
  return MC_INVALID_PARAMS;
}

/* ------------------------------------------------------------------ auto port */

static void client_port_range(int *lo, int *hi) {
  long a = mc_knob_long(MC_KNOB_STORE_CLIENT_MIN_PORT);
  long b = mc_knob_long(MC_KNOB_STORE_CLIENT_MAX_PORT);
  if (a < 1024 || b < a || (a <= 60999 && b >= 32768)) {
    LOG_WARN("store client port range %ld-%ld is unusable; using 12300-14300", a, b);
    a = 12300, b = 14300;
  }
  *lo = (int)a;
  *hi = (int)b;
}

/* Binds (and keeps bound, not listening) a random free port of the range. fd, or -1. */
static int hold_port(uint16_t *port_out) {
  int lo, hi;
  client_port_range(&lo, &hi);
  long tries = mc_knob_long(MC_KNOB_STORE_CLIENT_SETUP_RETRIES);
  uint64_t x = mc_now_ns() ^ ((uint64_t)getpid() << 20);
  for (long t = 0; t < tries; t++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int port = lo + (int)(x % (uint64_t)(hi - lo + 1));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a))) {
      *port_out = (uint16_t)port;
      return fd;
    }
    if (fd >= 0) close(fd);
  }
  LOG_ERROR("setup: no free client port in %d-%d after %ld attempts", lo, hi, tries);
  return -1;
}

/* ------------------------------------------------------------------ dependencies */

/* ServiceReady at the master line; following a leader, a master that does not answer or answers as a
 * standby (a failover under way) is tried again after reading the key again, until the deadline. */
static int service_ready(struct mc_store *s, uint64_t deadline, char **version, uint64_t *view) {
  for (;;) {
    int rc = mcli_service_ready(s->master.cli, MC_MIN(MASTER_CHECK_MS, remaining_ms(deadline)), version, view);
    if (!s->master.leader || (rc != MC_RPC_FAIL && rc != MC_UNAVAILABLE_IN_CURRENT_STATUS) ||
        remaining_ms(deadline) < 2 * LEADER_RETRY_MS)
      return rc;
    mc_sleep_ms(LEADER_RETRY_MS);
    mc_leader_reread(s);
  }
}

static int connect_master(struct mc_store *s, const char *given, uint64_t deadline) {
  char host[256], leader[160];
  uint16_t port;
  const char *addr = given;
  if (mc_leader_is_ha(given)) { /* docs/ha.md, "Election and failover" */
    int rc = mc_leader_open(s, given, leader, sizeof(leader));
    if (rc) return rc;
    addr = leader;
  } else if (strstr(given, "://")) {
    LOG_ERROR("setup: master address %s: only etcd:// leader discovery is supported (not redis://, k8s://)", given);
    return MC_INVALID_PARAMS;
  }
  if (mc_split_host_port(addr, host, sizeof(host), &port, DEFAULT_MASTER_PORT)) {
    LOG_ERROR("setup: invalid master address '%s'", addr);
    return MC_INVALID_PARAMS;
  }
  int tmo = (int)mc_knob_long(MC_KNOB_RPC_TIMEOUT_MS);
  int ctmo = (int)mc_knob_long(MC_KNOB_RPC_CONNECT_TIMEOUT_MS);
  s->master.cli = mcli_new(host, port, ctmo, tmo < 0 ? 1 << 30 : (tmo ? tmo : 30000)); /* < 0: no limit */
  char *version = NULL;
  uint64_t view = 0;
  int rc = service_ready(s, deadline, &version, &view);
  atomic_store(&s->master.view, view);
  if (rc == MC_RPC_FAIL) LOG_ERROR("setup: master %s is unreachable (RPC_FAIL)", addr);
  else if (rc == MC_RPC_TIMEOUT) LOG_ERROR("setup: master %s accepted the connection but did not answer (RPC_TIMEOUT)", addr);
  else if (rc) LOG_ERROR("setup: master %s refused ServiceReady: %s", addr, mooncake_store_err_name(rc));
  else if (strcmp(version, MC_STORE_VERSION)) {
    LOG_ERROR("setup: master %s runs version '%s', this client '%s'", addr, version, MC_STORE_VERSION);
    rc = MC_INVALID_VERSION;
  }
  mc_free(version);
  return rc;
}

/* Whether the metadata service answers (a GET of our own key; "not found" is an answer). */
static int probe_metadata(const char *conn, const char *name) {
  if (mc_meta_is_p2p(conn)) return 0;
  struct mc_meta *m = NULL;
  if (mc_meta_open(conn, &m)) {
    LOG_ERROR("setup: invalid metadata connection string '%s'", conn);
    return MC_INVALID_PARAMS;
  }
  char key[512], *v = NULL;
  mc_meta_rpc_key(key, sizeof(key), name);
  int rc = mc_meta_get(m, key, &v);
  mc_free(v);
  mc_meta_close(m);
  if (rc == 0 || rc == MC_META_NOT_FOUND) return 0;
  LOG_ERROR("setup: metadata service %s is unreachable (ETCD_OPERATION_ERROR)", conn);
  return MC_ETCD_OPERATION_ERROR;
}

static int start_engine(struct mc_store *s, const char *meta, const char *protocol, const char *devices,
                        void *engine) {
  s->engine.external = engine != NULL;
  s->engine.te = engine ? engine : createTransferEngine(meta, s->self.name, NULL, 0, 0);
  if (!s->engine.te) {
    int rc = probe_metadata(meta, s->self.name);
    LOG_ERROR("setup: cannot create the transfer engine for %s (metadata %s)", s->self.name, meta);
    return rc ? rc : MC_INTERNAL_ERROR;
  }
  /* an unavailable "rdma" gives tcp (logged with the reason and counted by the engine: docs/transfer-engine.md,
   * "Path choice"); the protocol recorded is the one installed. device_name ("rxe0", "mlx5_0,mlx5_1") picks the
   * RDMA devices (docs/rdma.md); empty: every one, or MC_TE_FILTERS */
  void *args[2] = {(void *)devices, NULL};
  transport_t t = installTransport(s->engine.te, protocol, devices && *devices ? args : NULL);
  if (!t) {
    LOG_ERROR("setup: cannot install transport '%s'", protocol);
    return MC_INVALID_PARAMS;
  }
  snprintf(s->self.protocol, sizeof(s->self.protocol), "%s", mc_te_transport_name(t));
  snprintf(s->self.te_name, sizeof(s->self.te_name), "%s", mc_te_local_segment_name(s->engine.te));
  return 0;
}

static uint64_t round64(uint64_t n) { return (n + 63) & ~63ull; }

static int alloc_memory(struct mc_store *s, uint64_t gss, uint64_t lbs) {
  if (gss) {
    s->seg.base = mc_te_alloc_shared(s->engine.te, gss, "cpu:0");
    if (!s->seg.base) {
      LOG_ERROR("setup: cannot allocate the %llu-byte global segment", (unsigned long long)gss);
      return MC_INVALID_PARAMS;
    }
    s->seg.size = gss;
    mc_regs_add(s, (uint64_t)(uintptr_t)s->seg.base, gss);
  }
  if (lbs) {
    s->staging.base = mc_te_alloc_shared(s->engine.te, round64(lbs), "cpu:0");
    if (!s->staging.base) {
      LOG_ERROR("setup: cannot allocate the %llu-byte staging buffer", (unsigned long long)lbs);
      return MC_INVALID_PARAMS;
    }
    s->staging.size = lbs;
    s->staging.pool = mc_stage_new(s->staging.base, round64(lbs));
    mc_regs_add(s, (uint64_t)(uintptr_t)s->staging.base, round64(lbs));
  }
  return 0;
}

static int mount_segment(struct mc_store *s, uint64_t deadline) {
  char probe[300] = "";
  getLocalIpAndPort(s->engine.te, probe, sizeof(probe));
  s->seg.rec = (struct mc_segment_rec){
      .id = mc_uuid_random(),
      .name = mc_strdup(s->self.name),
      .base = (uint64_t)(uintptr_t)s->seg.base,
      .size = s->seg.size,
      .te_endpoint = mc_strdup(s->self.te_name),
      .protocol = mc_strdup(s->self.protocol),
      .zone = mc_strdup(s->self.zone),
      .host_id = mc_strdup(mc_host_id()),
      .probe_addr = mc_strdup(probe),
  };
  uint64_t sent = mc_now_ns(), retry_end = MC_MIN(deadline, mc_now_ms() + MOUNT_RETRY_MS);
  int rc = mcli_mount(s->master.cli, &s->seg.rec, s->self.client_id, remaining_ms(deadline));
  /* The name may still be held by our previous incarnation, hung rather than dead: the master hands it
   * over only once that one has stopped pinging for a few seconds (docs/master.md, "Segment ownership"). */
  if (rc == MC_SEGMENT_ALREADY_EXISTS && mc_now_ms() + MOUNT_RETRY_GAP_MS < retry_end)
    LOG_WARN("setup: segment name %s is held by another client; retrying for up to %d ms", s->self.name,
             remaining_ms(retry_end));
  while (rc == MC_SEGMENT_ALREADY_EXISTS && mc_now_ms() + MOUNT_RETRY_GAP_MS < retry_end) {
    usleep(MOUNT_RETRY_GAP_MS * 1000);
    sent = mc_now_ns();
    rc = mcli_mount(s->master.cli, &s->seg.rec, s->self.client_id, remaining_ms(deadline));
  }
  if (rc) LOG_ERROR("setup: mounting segment %s failed: %s", s->self.name, mooncake_store_err_name(rc));
  else s->seg.mounted = 1, atomic_store(&s->master.ok_ns, sent);
  return rc;
}

/* ------------------------------------------------------------------ the local-disk tier */

/* The tier's directory (include/mooncake/store.h, ssd_path): none for NULL; for "" upstream's variable, else
 * the knob, else "" (which open_ssd refuses: the tier was asked for without a directory). */
static const char *ssd_dir(const mc_store_config_t *cfg) {
  if (!cfg->ssd_path || *cfg->ssd_path) return cfg->ssd_path;
  const char *up = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH");
  const char *knob = mc_knob_str(MC_KNOB_STORE_SSD_PATH);
  return up && *up ? up : knob && *knob ? knob : "";
}

/* Opens (and recovers) the tier. A directory this client cannot use fails setup: FILE_LOCK_FAIL when another
 * store holds it, FILE_OPEN_FAIL otherwise (not a directory, no permission, a newer format, ...). */
static int open_ssd(struct mc_store *s, const char *dir, uint64_t quota) {
  if (!*dir) {
    LOG_ERROR("setup: the local-disk tier needs a directory: ssd_offload_path, $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH "
              "or MC_STORE_SSD_PATH");
    return MC_INVALID_PARAMS;
  }
  struct mc_disk_recovery rep;
  int rc = mc_disk_open(dir, quota, NULL, &s->ssd.d, &rep);
  if (rc) {
    s->ssd.d = NULL;
    const char *why = rc == MC_DISK_EBUSY      ? "another process has it open"
                      : rc == MC_DISK_EVERSION ? "its format is newer than this build's"
                                               : strerror(-rc);
    LOG_ERROR("setup: cannot open the local-disk tier %s: %s", dir, why);
    return rc == MC_DISK_EBUSY ? MC_FILE_LOCK_FAIL : MC_FILE_OPEN_FAIL;
  }
  struct mc_disk_stats st;
  mc_disk_get_stats(s->ssd.d, &st);
  LOG_INFO("store client %s: local-disk tier %s (quota %llu bytes): %llu objects, %llu bytes recovered; %llu broken and "
           "%llu superseded dropped, %llu temporaries removed", s->self.name, dir, (unsigned long long)st.quota_bytes,
           (unsigned long long)rep.objects, (unsigned long long)rep.bytes, (unsigned long long)rep.broken,
           (unsigned long long)rep.superseded, (unsigned long long)rep.tmp_removed);
  s->ssd.unsupported = s->ssd.sent = 0;
  s->ssd.next_ns = 0;
  return 0;
}

void mc_ssd_report(struct mc_store *s, int tmo_ms) {
  uint64_t now = mc_now_ns();
  if (!s->ssd.d || s->ssd.unsupported || now < s->ssd.next_ns) return;
  struct mc_disk_stats st;
  mc_disk_get_stats(s->ssd.d, &st);
  uint64_t used = MC_MIN(st.used_bytes, st.quota_bytes); /* the master refuses used > capacity */
  if (s->ssd.sent && s->ssd.cap == st.quota_bytes && s->ssd.used == used && s->ssd.objects == st.objects) return;
  int rc = mcli_report_ssd(s->master.cli, s->self.client_id, st.quota_bytes, used, st.objects, tmo_ms);
  s->ssd.next_ns = now + (uint64_t)MC_SSD_REPORT_MS * 1000000;
  if (!rc) s->ssd.sent = 1, s->ssd.cap = st.quota_bytes, s->ssd.used = used, s->ssd.objects = st.objects;
  if (rc == MC_NOT_SUPPORTED) {
    s->ssd.unsupported = 1;
    LOG_INFO("client %s: the master does not take disk-tier reports (an older master); not sending them", s->self.name);
  }
}

/* ------------------------------------------------------------------ setup / teardown */

static int set_name(struct mc_store *s, const char *hostname) {
  char host[256];
  uint16_t port = 0;
  if (!*hostname || mc_split_host_port(hostname, host, sizeof(host), &port, 0)) {
    LOG_ERROR("setup: invalid local_hostname '%s'", hostname);
    return MC_INVALID_PARAMS;
  }
  if (port) {
    snprintf(s->self.name, sizeof(s->self.name), "%s", hostname);
    return 0;
  }
  s->self.port_fd = hold_port(&port);
  if (s->self.port_fd < 0) return MC_INTERNAL_ERROR;
  mc_join_host_port(host, port, s->self.name, sizeof(s->self.name));
  return 0;
}

static const char *or_default(const char *v, const char *def) { return v ? v : def; }

/* A tenant id as a key namespace (docs/python.md, "Differences from upstream"): at most 128 bytes, no
 * control characters (the namespace separator is 0x1f). Not mc_auth_tenant_ok, which checks the ids of
 * tenant secrets and refuses what this one accepts: "" and "default" (here both the namespace of no
 * tenant) and bytes that are not UTF-8 (a secret's tenant becomes an owner in metadata JSON; a namespace
 * without a secret is only a key prefix). A secret's own tenant id is checked by net/auth.c when it
 * reads the secret. */
static int tenant_ok(const char *t) {
  size_t n = strlen(t);
  int ok = n <= 128;
  for (size_t i = 0; i < n && ok; i++) ok = (unsigned char)t[i] >= 0x20 && t[i] != 0x7f;
  if (!ok) LOG_ERROR("setup: invalid tenant_id (at most 128 bytes, no control characters)");
  return ok;
}

/* The tenant whose key namespace this client uses: cfg's tenant_id, or with a tenant's secret that tenant,
 * which tenant_id may name but not contradict (docs/security.md, "Tenants"). NULL when refused (logged). */
static const char *namespace_of(const mc_store_config_t *cfg) {
  const char *tenant = or_default(cfg->tenant_id, ""), *realm = mc_auth_tenant();
  if (!tenant_ok(tenant)) return NULL;
  if (!*realm) return tenant;
  if (*tenant && strcmp(tenant, realm)) {
    LOG_ERROR("setup: tenant_id '%s' is not the tenant of this process's secret ('%s')", tenant, realm);
    return NULL;
  }
  return realm;
}

int mc_store_do_setup(struct mc_store *s, const mc_store_config_t *cfg) {
  uint64_t deadline = mc_now_ms() + SETUP_BUDGET_MS;
  const char *meta = or_default(cfg->metadata_server, ""), *master = or_default(cfg->master_server_addr, "127.0.0.1:50051");
  const char *zone = cfg->zone ? cfg->zone : or_default(mc_knob_str(MC_KNOB_ZONE), "");
  mc_log_init_from_env();
  snprintf(s->self.zone, sizeof(s->self.zone), "%s", zone);
  s->self.client_id = mc_uuid_random();
  snprintf(s->master.addr, sizeof(s->master.addr), "%s", master);
  if (cfg->enable_http_server && (cfg->http_port < 0 || cfg->http_port > 65535)) {
    LOG_ERROR("setup: client HTTP port %d is not in 1-65535", cfg->http_port);
    return MC_INVALID_PARAMS;
  }
  const char *tenant = namespace_of(cfg);
  int rc = tenant ? 0 : MC_INVALID_PARAMS;
  if (!rc) rc = set_name(s, or_default(cfg->local_hostname, ""));
  if (!rc) rc = check_memory(cfg->global_segment_size, cfg->local_buffer_size);
  if (!rc) rc = connect_master(s, master, deadline);
  if (!rc) mcli_set_key_ns(s->master.cli, tenant);
  if (!rc) rc = probe_metadata(meta, s->self.name);
  if (!rc) rc = start_engine(s, meta, or_default(cfg->protocol, "tcp"), cfg->device_name, cfg->engine);
  if (!rc) rc = alloc_memory(s, cfg->global_segment_size, cfg->local_buffer_size);
  if (!rc && s->seg.base) rc = mount_segment(s, deadline);
  const char *ssd = ssd_dir(cfg);
  if (!rc && ssd) rc = open_ssd(s, ssd, cfg->ssd_quota_bytes);
  /* holder index (docs/ha.md): on with MC_STORE_HOLDER_INDEX=1, and always when following a leader (HA) */
  if (!rc && s->seg.mounted && (mc_knob_bool(MC_KNOB_STORE_HOLDER_INDEX) || s->master.leader)) mc_hindex_start(s);
  if (!rc) mc_fastput_init(s); /* pure clients too: they get lease-only extents */
  if (!rc) mc_heartbeat_start(s);
  if (!rc && s->seg.mounted) mc_tasks_start(s); /* the executor of our segment's copy and move tasks */
  if (!rc) mc_leader_start(s);
  if (rc) {
    mc_store_do_teardown(s);
    return rc;
  }
  if (cfg->enable_http_server) mc_http_start(s, cfg->http_port); /* a bind failure is only a warning */
  s->ready = 1;
  LOG_INFO("store client %s ready (segment %llu bytes, staging %llu bytes, master %s, metadata %s, zone '%s')", s->self.name,
           (unsigned long long)s->seg.size, (unsigned long long)s->staging.size, master, meta, s->self.zone);
  return 0;
}

/* A caller's engine stays up: give back only what this client put into it. */
static void release_engine_memory(struct mc_store *s) {
  for (size_t i = 0; i < s->regs.n; i++) {
    void *p = (void *)(uintptr_t)s->regs.v[i].addr;
    if (p != s->seg.base && p != s->staging.base) unregisterLocalMemory(s->engine.te, p);
  }
  if (s->seg.base) mc_te_free_shared(s->engine.te, s->seg.base);
  if (s->staging.base) mc_te_free_shared(s->engine.te, s->staging.base);
}

void mc_store_do_teardown(struct mc_store *s) {
  mc_http_stop(s); /* first: its handlers read the master connection and the name */
  mc_sessions_teardown(s); /* open put sessions revoked while the master line is up */
  mc_leader_close(s); /* it retargets the master line and kicks the heartbeat */
  mc_heartbeat_stop(s);
  mc_tasks_stop(s);
  mc_hindex_stop(s);
  mc_fastput_free(s); /* before the unmount: the extent may be on our own segment */
  if (s->ready) mc_stats_report(s, TEARDOWN_RPC_MS); /* the last numbers of a short-lived client */
  mc_xsegs_teardown(s);
  mc_disk_close(s->ssd.d); /* the heartbeat thread, its only other user, has stopped */
  s->ssd.d = NULL;
  if (s->seg.mounted) {
    int rc = mcli_unmount(s->master.cli, s->seg.rec.id, s->self.client_id, TEARDOWN_RPC_MS);
    if (rc) LOG_WARN("teardown: unmounting segment %s failed: %s", s->self.name, mooncake_store_err_name(rc));
    s->seg.mounted = 0;
  }
  if (s->engine.external) release_engine_memory(s);
  else destroyTransferEngine(s->engine.te); /* frees the segment and staging memory, deletes our metadata keys */
  s->engine.te = NULL;
  s->engine.external = 0;
  mc_stage_free(s->staging.pool);
  s->staging.pool = NULL;
  s->staging.base = s->seg.base = NULL;
  s->staging.size = s->seg.size = 0;
  pthread_rwlock_wrlock(&s->regs.mu);
  mc_free(s->regs.v);
  s->regs.v = NULL;
  s->regs.n = s->regs.cap = 0;
  pthread_rwlock_unlock(&s->regs.mu);
  mcli_free(s->master.cli);
  s->master.cli = NULL;
  if (s->self.port_fd >= 0) close(s->self.port_fd);
  s->self.port_fd = -1;
  mc_segment_rec_free(&s->seg.rec);
  memset(&s->seg.rec, 0, sizeof(s->seg.rec));
  s->self.name[0] = s->self.te_name[0] = 0;
  s->ready = 0;
}

void mc_store_close_backend(struct mc_store *s) {
  if (s->be) s->be->close(s);
  s->be = NULL;
}

void mc_store_drop_backend(struct mc_store *s) {
  pthread_rwlock_wrlock(&s->life);
  mc_store_close_backend(s);
  pthread_rwlock_unlock(&s->life);
}
