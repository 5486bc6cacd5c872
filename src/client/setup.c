/* Building and tearing down a client: argument checks, the memory check (docs/store-client.md, "Setup"), the held
 * auto port, the master connection, the metadata probe, the transfer engine, the segment and staging
 * buffer, the mount, and the heartbeat thread that keeps the client alive at the master (pings, for
 * clients with a segment) and reports its statistics (every client, stats.c). Every dependency
 * is bounded so setup answers within ~10 s, and the log line names the dependency that failed. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "net/mrpc.h"
#include "net/sock.h"

#include "meta/metadata.h"

#define SETUP_BUDGET_MS 10000
#define MASTER_CHECK_MS 4000 /* connect + SERVICE_READY */
#define PING_INTERVAL_MS 1000
#define PING_TIMEOUT_MS 2000
#define PING_FAILURES 3
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
  pthread_rwlock_init(&s->reg_mu, NULL);
  pthread_mutex_init(&s->ping_mu, NULL);
  pthread_mutex_init(&s->shun_mu, NULL);
  pthread_mutex_init(&s->stats.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->ping_cv, &ca);
  pthread_condattr_destroy(&ca);
  s->port_fd = -1;
  return s;
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

static int connect_master(struct mc_store *s, const char *addr, uint64_t deadline) {
  char host[256];
  uint16_t port;
  if (strstr(addr, "://")) {
    LOG_ERROR("setup: master address %s: HA master discovery (etcd://, redis://, k8s://) is not supported yet", addr);
    return MC_INVALID_PARAMS;
  }
  if (mc_split_host_port(addr, host, sizeof(host), &port, DEFAULT_MASTER_PORT)) {
    LOG_ERROR("setup: invalid master address '%s'", addr);
    return MC_INVALID_PARAMS;
  }
  int tmo = (int)mc_knob_long(MC_KNOB_RPC_TIMEOUT_MS);
  int ctmo = (int)mc_knob_long(MC_KNOB_RPC_CONNECT_TIMEOUT_MS);
  s->master = mcli_new(host, port, ctmo, tmo < 0 ? 1 << 30 : (tmo ? tmo : 30000)); /* < 0: no limit */
  char *version = NULL;
  uint64_t view = 0;
  int rc = mcli_service_ready(s->master, MC_MIN(MASTER_CHECK_MS, remaining_ms(deadline)), &version, &view);
  atomic_store(&s->master_view, view);
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

static int start_engine(struct mc_store *s, const char *meta, const char *protocol, void *engine) {
  s->te_external = engine != NULL;
  s->te = engine ? engine : createTransferEngine(meta, s->name, NULL, 0, 0);
  if (!s->te) {
    int rc = probe_metadata(meta, s->name);
    LOG_ERROR("setup: cannot create the transfer engine for %s (metadata %s)", s->name, meta);
    return rc ? rc : MC_INTERNAL_ERROR;
  }
  const char *p = protocol;
  if (!strcmp(p, "rdma")) {
    LOG_WARN("setup: protocol rdma is not available in this build; falling back to tcp");
    p = "tcp";
  }
  if (!installTransport(s->te, p, NULL)) {
    LOG_ERROR("setup: cannot install transport '%s'", p);
    return MC_INVALID_PARAMS;
  }
  snprintf(s->protocol, sizeof(s->protocol), "%s", p);
  snprintf(s->te_name, sizeof(s->te_name), "%s", mc_te_local_segment_name(s->te));
  return 0;
}

static uint64_t round64(uint64_t n) { return (n + 63) & ~63ull; }

static int alloc_memory(struct mc_store *s, uint64_t gss, uint64_t lbs) {
  if (gss) {
    s->segment = mc_te_alloc_shared(s->te, gss, "cpu:0");
    if (!s->segment) {
      LOG_ERROR("setup: cannot allocate the %llu-byte global segment", (unsigned long long)gss);
      return MC_INVALID_PARAMS;
    }
    s->segment_size = gss;
    mc_regs_add(s, (uint64_t)(uintptr_t)s->segment, gss);
  }
  if (lbs) {
    s->stage_base = mc_te_alloc_shared(s->te, round64(lbs), "cpu:0");
    if (!s->stage_base) {
      LOG_ERROR("setup: cannot allocate the %llu-byte staging buffer", (unsigned long long)lbs);
      return MC_INVALID_PARAMS;
    }
    s->stage_size = lbs;
    s->stage = mc_stage_new(s->stage_base, round64(lbs));
    mc_regs_add(s, (uint64_t)(uintptr_t)s->stage_base, round64(lbs));
  }
  return 0;
}

static int mount_segment(struct mc_store *s, uint64_t deadline) {
  char probe[300] = "";
  getLocalIpAndPort(s->te, probe, sizeof(probe));
  s->seg_rec = (struct mc_segment_rec){
      .id = mc_uuid_random(),
      .name = mc_strdup(s->name),
      .base = (uint64_t)(uintptr_t)s->segment,
      .size = s->segment_size,
      .te_endpoint = mc_strdup(s->te_name),
      .protocol = mc_strdup(s->protocol),
      .zone = mc_strdup(s->zone),
      .host_id = mc_strdup(mc_host_id()),
      .probe_addr = mc_strdup(probe),
  };
  uint64_t sent = mc_now_ns(), retry_end = MC_MIN(deadline, mc_now_ms() + MOUNT_RETRY_MS);
  int rc = mcli_mount(s->master, &s->seg_rec, s->client_id, remaining_ms(deadline));
  /* The name may still be held by our previous incarnation, hung rather than dead: the master hands it
   * over only once that one has stopped pinging for a few seconds (docs/master.md, "Segment ownership"). */
  if (rc == MC_SEGMENT_ALREADY_EXISTS && mc_now_ms() + MOUNT_RETRY_GAP_MS < retry_end)
    LOG_WARN("setup: segment name %s is held by another client; retrying for up to %d ms", s->name,
             remaining_ms(retry_end));
  while (rc == MC_SEGMENT_ALREADY_EXISTS && mc_now_ms() + MOUNT_RETRY_GAP_MS < retry_end) {
    usleep(MOUNT_RETRY_GAP_MS * 1000);
    sent = mc_now_ns();
    rc = mcli_mount(s->master, &s->seg_rec, s->client_id, remaining_ms(deadline));
  }
  if (rc) LOG_ERROR("setup: mounting segment %s failed: %s", s->name, mooncake_store_err_name(rc));
  else s->mounted = 1, atomic_store(&s->ping_ok_ns, sent);
  return rc;
}

/* ------------------------------------------------------------------ ping thread */

static void remount(struct mc_store *s) {
  mc_te_republish(s->te); /* a restarted master may have lost our rpc_meta and descriptor */
  int rc = mcli_remount(s->master, &s->seg_rec, 1, s->client_id, PING_TIMEOUT_MS);
  if (rc) LOG_WARN("remount of segment %s failed: %s", s->name, mooncake_store_err_name(rc));
  else LOG_INFO("segment %s remounted", s->name);
}

static void ping(struct mc_store *s, int *failures) {
  uint64_t sent = mc_now_ns();
  uint64_t view = 0;
  int status = 0, rc = mcli_ping(s->master, s->client_id, PING_TIMEOUT_MS, &status, &view);
  if (!rc && view) atomic_store(&s->master_view, view);
  if (rc && ++*failures >= PING_FAILURES) {
    LOG_WARN("master: %d pings failed (%s); reconnecting", *failures, mooncake_store_err_name(rc));
    mc_mrpc_client_reset(s->master->rpc);
    *failures = 0;
  } else if (!rc) {
    *failures = 0;
    if (status == MC_PING_OK) atomic_store(&s->ping_ok_ns, sent);
    /* Retired and released: NEED_REMOUNT comes both from a master that forgot us (the release is then a
     * no-op) and, by design (docs/master.md, "Segments": only ReMountSegment fills the OK set), as the
     * answer to the first ping after a mount, when the master still holds the extent and would keep it for
     * its whole lease. */
    if (status == MC_PING_NEED_REMOUNT) mc_fastput_retire(s, 0), remount(s);
  }
}

/* Waits on ping_cv (held) until the monotonic deadline, a kick or a stop. */
static void wait_until(struct mc_store *s, uint64_t deadline_ns) {
  struct timespec ts = {(time_t)(deadline_ns / 1000000000ull), (long)(deadline_ns % 1000000000ull)};
  while (!s->ping_stop && !s->ping_kick && pthread_cond_timedwait(&s->ping_cv, &s->ping_mu, &ts) != ETIMEDOUT) {
  }
  s->ping_kick = 0;
}

void mc_store_kick_heartbeat(struct mc_store *s) {
  pthread_mutex_lock(&s->ping_mu);
  s->ping_kick = 1;
  pthread_cond_broadcast(&s->ping_cv);
  pthread_mutex_unlock(&s->ping_mu);
}

static void *heartbeat_main(void *arg) {
  struct mc_store *s = arg;
  int failures = 0;
  uint64_t ping_ns = (uint64_t)PING_INTERVAL_MS * 1000000, report_ns = (uint64_t)mc_stats_interval_ms() * 1000000;
  uint64_t next_ping = mc_now_ns() + ping_ns, next_report = mc_now_ns() + report_ns;
  pthread_mutex_lock(&s->ping_mu);
  while (!s->ping_stop) {
    wait_until(s, s->mounted ? MC_MIN(next_ping, next_report) : next_report);
    if (s->ping_stop) break;
    pthread_mutex_unlock(&s->ping_mu);
    uint64_t now = mc_now_ns();
    if (s->mounted && now >= next_ping) {
      ping(s, &failures);
      next_ping = now + ping_ns;
    }
    mc_fastput_flush(s); /* after the ping: a release that waits on a slow master never delays liveness */
    if (now >= next_report) {
      mc_stats_report(s, PING_TIMEOUT_MS);
      next_report = now + report_ns;
    }
    pthread_mutex_lock(&s->ping_mu);
  }
  pthread_mutex_unlock(&s->ping_mu);
  return NULL;
}

static void stop_ping(struct mc_store *s) {
  if (!s->ping_running) return;
  pthread_mutex_lock(&s->ping_mu);
  s->ping_stop = 1;
  pthread_cond_broadcast(&s->ping_cv);
  pthread_mutex_unlock(&s->ping_mu);
  pthread_join(s->ping_th, NULL);
  s->ping_running = 0;
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
    snprintf(s->name, sizeof(s->name), "%s", hostname);
    return 0;
  }
  s->port_fd = hold_port(&port);
  if (s->port_fd < 0) return MC_INTERNAL_ERROR;
  snprintf(s->name, sizeof(s->name), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
  return 0;
}

static const char *or_default(const char *v, const char *def) { return v ? v : def; }

/* A tenant id: at most 128 bytes, no control characters (the namespace separator is 0x1f). */
static int tenant_ok(const char *t) {
  size_t n = strlen(t);
  int ok = n <= 128;
  for (size_t i = 0; i < n && ok; i++) ok = (unsigned char)t[i] >= 0x20 && t[i] != 0x7f;
  if (!ok) LOG_ERROR("setup: invalid tenant_id (at most 128 bytes, no control characters)");
  return ok;
}

int mc_store_do_setup(struct mc_store *s, const mc_store_config_t *cfg) {
  uint64_t deadline = mc_now_ms() + SETUP_BUDGET_MS;
  const char *meta = or_default(cfg->metadata_server, ""), *master = or_default(cfg->master_server_addr, "127.0.0.1:50051");
  const char *zone = cfg->zone ? cfg->zone : or_default(mc_knob_str(MC_KNOB_ZONE), "");
  mc_log_init_from_env();
  snprintf(s->zone, sizeof(s->zone), "%s", zone);
  s->client_id = mc_uuid_random();
  snprintf(s->master_addr, sizeof(s->master_addr), "%s", master);
  if (cfg->enable_http_server && (cfg->http_port < 0 || cfg->http_port > 65535)) {
    LOG_ERROR("setup: client HTTP port %d is not in 1-65535", cfg->http_port);
    return MC_INVALID_PARAMS;
  }
  const char *tenant = or_default(cfg->tenant_id, ""), *realm = mc_auth_tenant();
  int rc = tenant_ok(tenant) ? 0 : MC_INVALID_PARAMS;
  if (!rc && *realm) { /* a tenant's secret: its namespace is the tenant's (docs/security.md, "Tenants") */
    if (*tenant && strcmp(tenant, realm)) {
      LOG_ERROR("setup: tenant_id '%s' is not the tenant of this process's secret ('%s')", tenant, realm);
      rc = MC_INVALID_PARAMS;
    }
    tenant = realm;
  }
  if (!rc) rc = set_name(s, or_default(cfg->local_hostname, ""));
  if (!rc) rc = check_memory(cfg->global_segment_size, cfg->local_buffer_size);
  if (!rc) rc = connect_master(s, master, deadline);
  if (!rc) mcli_set_key_ns(s->master, tenant);
  if (!rc) rc = probe_metadata(meta, s->name);
  if (!rc) rc = start_engine(s, meta, or_default(cfg->protocol, "tcp"), cfg->engine);
  if (!rc) rc = alloc_memory(s, cfg->global_segment_size, cfg->local_buffer_size);
  if (!rc && s->segment) rc = mount_segment(s, deadline);
  if (!rc) mc_fastput_init(s); /* pure clients too: they get lease-only extents */
  if (!rc) {
    s->ping_stop = 0;
    s->ping_running = !pthread_create(&s->ping_th, NULL, heartbeat_main, s);
  }
  if (rc) {
    mc_store_do_teardown(s);
    return rc;
  }
  if (cfg->enable_http_server) mc_http_start(s, cfg->http_port); /* a bind failure is only a warning */
  s->ready = 1;
  LOG_INFO("store client %s ready (segment %llu bytes, staging %llu bytes, master %s, metadata %s, zone '%s')", s->name,
           (unsigned long long)s->segment_size, (unsigned long long)s->stage_size, master, meta, s->zone);
  return 0;
}

/* A caller's engine stays up: give back only what this client put into it. */
static void release_engine_memory(struct mc_store *s) {
  for (size_t i = 0; i < s->nregs; i++) {
    void *p = (void *)(uintptr_t)s->regs[i].addr;
    if (p != s->segment && p != s->stage_base) unregisterLocalMemory(s->te, p);
  }
  if (s->segment) mc_te_free_shared(s->te, s->segment);
  if (s->stage_base) mc_te_free_shared(s->te, s->stage_base);
}

void mc_store_do_teardown(struct mc_store *s) {
  mc_http_stop(s); /* first: its handlers read the master connection and the name */
  stop_ping(s);
  mc_fastput_free(s); /* before the unmount: the extent may be on our own segment */
  if (s->ready) mc_stats_report(s, TEARDOWN_RPC_MS); /* the last numbers of a short-lived client */
  if (s->mounted) {
    int rc = mcli_unmount(s->master, s->seg_rec.id, s->client_id, TEARDOWN_RPC_MS);
    if (rc) LOG_WARN("teardown: unmounting segment %s failed: %s", s->name, mooncake_store_err_name(rc));
    s->mounted = 0;
  }
  if (s->te_external) release_engine_memory(s);
  else destroyTransferEngine(s->te); /* frees the segment and staging memory, deletes our metadata keys */
  s->te = NULL;
  s->te_external = 0;
  mc_stage_free(s->stage);
  s->stage = NULL;
  s->stage_base = s->segment = NULL;
  s->stage_size = s->segment_size = 0;
  pthread_rwlock_wrlock(&s->reg_mu);
  mc_free(s->regs);
  s->regs = NULL;
  s->nregs = s->capregs = 0;
  pthread_rwlock_unlock(&s->reg_mu);
  mcli_free(s->master);
  s->master = NULL;
  if (s->port_fd >= 0) close(s->port_fd);
  s->port_fd = -1;
  mc_segment_rec_free(&s->seg_rec);
  memset(&s->seg_rec, 0, sizeof(s->seg_rec));
  s->name[0] = s->te_name[0] = 0;
  s->ready = 0;
}
