/* The master's configuration table, validation and the startup line (see config.h); the config-file
 * loader is config_file.c. */
#include "master_core/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"

#define O(name, type, def, lo, hi, help) {#name, type, def, lo, hi, offsetof(struct mc_master_cfg, name), help}
#define B_(name, def, help) O(name, MC_CFG_BOOL, def, 1, 0, help)
#define I_(name, def, lo, hi, help) O(name, MC_CFG_INT, def, lo, hi, help)
#define D_(name, def, lo, hi, help) O(name, MC_CFG_DOUBLE, def, lo, hi, help)
#define S_(name, def, help) O(name, MC_CFG_STRING, def, 1, 0, help)
#define Z_(name, def, help) O(name, MC_CFG_SIZE, def, 1, 0, help)
#define NS " (accepted; not supported by this build)"
#define I64MAX 9.3e18

const struct mc_cfg_opt mc_master_opts[] = {
    /* core */
    I_(rpc_port, "0", 0, 65535, "RPC listen port (0 = use the deprecated --port)"),
    I_(rpc_thread_num, "0", 0, 4096, "RPC worker threads serving all connections (0 = min(max_threads, online CPUs))"),
    S_(rpc_address, "0.0.0.0", "RPC bind address"),
    S_(rpc_interface, "", "network interface whose IPv4 address the RPC server binds (overrides rpc_address)"),
    I_(rpc_conn_timeout_seconds, "0", 0, 86400, "idle RPC connection timeout (0 = none)"),
    B_(rpc_enable_tcp_no_delay, "true", "TCP_NODELAY on RPC sockets"),
    I_(port, "50051", 1, 65535, "deprecated alias of rpc_port"),
    I_(max_threads, "16", 1, 4096, "deprecated: cap of the default rpc_thread_num"),
    /* leases and pins */
    S_(default_kv_lease_ttl, "10000", "read lease length (duration: ms default, or s/m/h)"),
    S_(default_kv_soft_pin_ttl, "30m", "soft pin TTL when ENABLE gives none (duration)"),
    S_(max_kv_soft_pin_ttl, "24h", "largest soft pin TTL accepted (duration)"),
    B_(allow_evict_soft_pinned_objects, "true", "soft-pinned objects are second-pass eviction candidates"),
    /* eviction */
    D_(eviction_high_watermark_ratio, "0.9", 0, 1, "used/capacity ratio above which eviction runs"),
    D_(eviction_ratio, "0.05", 0, 1, "fraction of evictable objects evicted per run"),
    I_(eviction_thread_num, "1", 1, 64, "threads scanning eviction candidates (one eviction run at a time)"),
    D_(nof_eviction_ratio, "0.05", 0, 1, "NVMe-oF tier eviction ratio" NS),
    D_(nof_eviction_high_watermark_ratio, "0.9", 0, 1, "NVMe-oF tier watermark" NS),
    /* liveness and puts */
    I_(client_ttl, "10", 1, 86400 * 365, "seconds after a client's last ping before it expires (file key client_live_ttl_sec)"),
    I_(put_start_discard_timeout_sec, "30", 0, I64MAX, "age after which an unfinished put may be preempted"),
    I_(put_start_release_timeout_sec, "600", 0, I64MAX, "age after which a preempted or abandoned put's space is freed"),
    /* allocation */
    S_(memory_allocator, "offset", "segment allocator: offset (cachelib accepted, runs as offset)"),
    S_(allocation_strategy, "random", "random | free_ratio_first | local_first (ssd_free_ratio_first, cxl accepted)"),
    /* TE metadata */
    B_(enable_http_metadata_server, "false", "run the TE HTTP metadata server in this process"),
    I_(http_metadata_server_port, "8080", 0, 65535, "its port"),
    S_(http_metadata_server_host, "0.0.0.0", "its bind address"),
    B_(enable_metadata_cleanup_on_timeout, "true", "delete an expired client's TE keys (ram/, rpc_meta/)"),
    S_(metadata_server, "", "metadata service used for that cleanup when the server is not embedded "
                            "(default $MOONCAKE_TE_META_DATA_SERVER, else metadata_server of $MOONCAKE_CONFIG_PATH)"),
    /* metrics */
    B_(enable_metric_reporting, "true", "log the metrics summary line every metric_report_interval_sec (and a key=value line at --v=1)"),
    I_(metric_report_interval_sec, "10", 1, 86400, "seconds between metrics summary lines (not an upstream flag)"),
    I_(metrics_port, "9003", 0, 65535, "admin/metrics HTTP port (0 = any free port)"),
    S_(metrics_host, "0.0.0.0", "admin/metrics HTTP address (:: = IPv6 and IPv4)"),
    /* HA */
    B_(enable_ha, "false", "leader election over etcd (docs/ha.md)"),
    S_(ha_backend_type, "etcd", "etcd (redis and k8s are not supported)"),
    S_(ha_backend_connstring, "", "etcd endpoints h:p, separated by , or ;"),
    S_(etcd_endpoints, "", "legacy alias of ha_backend_connstring"),
    S_(cluster_id, "mooncake_cluster", "cluster namespace ([0-9A-Za-z_.-], <= 128; default $MC_STORE_CLUSTER_ID)"),
    B_(enable_oplog, "false", "replicate metadata mutations to standbys" NS),
    I_(oplog_poll_interval_ms, "1000", 1, I64MAX, "standby OpLog poll period" NS),
    I_(oplog_batch_max_entries, "1024", 1, I64MAX, "OpLog batch size cap" NS),
    I_(batch_oplog_retry_timeout_sec, "180", 0, I64MAX, "OpLog retry window" NS),
    S_(pod_name, "", "k8s pod name" NS),
    S_(pod_namespace, "", "k8s namespace" NS),
    /* snapshots */
    S_(restore_snapshot, "", "start from this snapshot file (mooncake snapshot save): its objects come back as their "
                             "holders remount; a newer, corrupt or truncated file is refused"),
    B_(enable_snapshot, "false", "periodic metadata snapshot" NS),
    B_(enable_snapshot_restore, "false", "restore a snapshot at start" NS),
    I_(snapshot_interval_seconds, "600", 1, I64MAX, "snapshot cadence" NS),
    I_(snapshot_child_timeout_seconds, "300", 1, I64MAX, "snapshot child timeout" NS),
    I_(snapshot_retention_count, "2", 0, I64MAX, "snapshots kept" NS),
    S_(snapshot_object_store_type, "", "local | s3" NS),
    S_(snapshot_catalog_store_type, "", "embedded | redis" NS),
    S_(snapshot_catalog_store_connstring, "", "catalog store endpoints" NS),
    S_(snapshot_backup_dir, "", "snapshot backup directory" NS),
    S_(snapshot_payload_store_type, "", "deprecated alias" NS),
    S_(snapshot_payload_backend_type, "", "deprecated alias" NS),
    S_(snapshot_catalog_backend_type, "", "deprecated alias" NS),
    S_(snapshot_catalog_backend_connstring, "", "deprecated alias" NS),
    /* storage tiers */
    S_(root_fs_dir, "", "shared-FS DISK replicas" NS),
    I_(global_file_segment_size, "9223372036854775807", 0, I64MAX, "shared-FS capacity" NS),
    B_(enable_offload, "false", "SSD offload" NS),
    B_(offload_on_evict, "false", "offload at eviction" NS),
    B_(offload_force_evict, "false", "evict beyond the offload cap" NS),
    I_(offloading_queue_limit, "50000", 1, 100000000, "per-disk-segment offload queue" NS),
    D_(offload_cap_ratio, "0.5", 0, 1, "per-cycle offload cap ratio" NS),
    B_(promotion_on_hit, "false", "SSD->DRAM promotion" NS),
    I_(promotion_admission_threshold, "2", 0, I64MAX, "hits before promotion" NS),
    I_(promotion_queue_limit, "50000", 0, I64MAX, "promotion queue" NS),
    I_(promotion_max_per_heartbeat, "1", 0, I64MAX, "promotions per heartbeat" NS),
    B_(enable_disk_eviction, "true", "served to clients' disk backends" NS),
    Z_(quota_bytes, "0", "disk quota (0 = 90% of disk)" NS),
    I_(nof_heartbeat_interval_sec, "10", 1, I64MAX, "NVMe-oF probing" NS),
    I_(nof_heartbeat_probe_timeout_ms, "1000", 1, I64MAX, "NVMe-oF probe timeout" NS),
    I_(nof_heartbeat_failures_threshold, "3", 1, I64MAX, "NVMe-oF failures threshold" NS),
    B_(enable_cxl, "false", "CXL DAX segment" NS),
    S_(cxl_path, "/dev/dax0.0", "CXL device" NS),
    Z_(cxl_size, "8GiB", "CXL size" NS),
    /* task manager */
    I_(max_total_finished_tasks, "10000", 0, I64MAX, "finished copy/move tasks kept for queries (oldest pruned)"),
    I_(max_total_pending_tasks, "10000", 0, I64MAX, "copy/move tasks waiting for their executor (more: TASK_PENDING_LIMIT_EXCEEDED)"),
    I_(max_total_processing_tasks, "10000", 0, I64MAX, "copy/move tasks handed to executors at once"),
    I_(pending_task_timeout_sec, "300", 0, I64MAX, "a task not fetched by then fails (at least 1 s)"),
    I_(processing_task_timeout_sec, "300", 0, I64MAX, "a fetched task not reported by then fails (at least 1 s)"),
    I_(max_retry_attempts, "10", 0, I64MAX, "retries of a copy/move task whose attempt failed (0: none)" NS),
    /* misc */
    S_(dynamic_replication_mode, "off", "off | observe | enforce" NS),
    I_(dynamic_replication_heat_window_seconds, "10", 1, I64MAX, "hot-key window" NS),
    D_(dynamic_replication_admission_qps_threshold, "0.8", 1, 0, "hot-key admission" NS),
    I_(dynamic_replication_max_memory_replicas, "2", 1, I64MAX, "hot-key replicas" NS),
    B_(enable_multi_tenants, "false", "tenant quotas" NS),
    S_(tenant_quota_connector_type, "file", "file | etcd" NS),
    S_(tenant_quota_connector_uri, "", "tenant quota source" NS),
    B_(enable_kv_events, "false", "ZMQ KV-event publisher" NS),
    S_(kv_events_bind_endpoint, "", "KV events" NS),
    S_(kv_events_backend_id, "", "KV events" NS),
    B_(kv_events_emit_legacy_compat, "true", "KV events" NS),
    B_(kv_events_emit_object_key, "true", "KV events" NS),
    I_(kv_events_queue_capacity, "65536", 1, I64MAX, "KV events" NS),
    S_(kv_events_model_name, "", "legacy no-op"),
    S_(kv_events_tenant_id, "", "legacy no-op"),
    S_(kv_events_additional_salt, "", "legacy no-op"),
    S_(kv_events_lora_name, "", "legacy no-op"),
    I_(kv_events_block_size, "0", 1, 0, "legacy no-op"),
    I_(kv_events_dp_rank, "0", 1, 0, "legacy no-op"),
    /* glog */
    S_(vmodule, "", "per-module verbosity (accepted; --v applies to all modules)"),
    S_(log_dir, "", "write the log to <dir>/mooncake_master.INFO.<date>-<time>.<pid> (+ symlink)"),
    B_(logtostderr, "false", "log to stderr (the default without --log_dir)"),
    B_(alsologtostderr, "false", "accepted"),
    I_(minloglevel, "0", 0, 3, "0 INFO, 1 WARNING, 2 ERROR, 3 FATAL"),
    I_(stderrthreshold, "2", 0, 3, "accepted"),
    MC_CFG_END,
};

/* Flags whose behaviour this build does not have: a warning when set away from their default. */
static const char *const unsupported[] = {
    "enable_oplog", "pod_name", "pod_namespace",
    "enable_snapshot", "enable_snapshot_restore", "snapshot_object_store_type", "snapshot_catalog_store_type",
    "snapshot_catalog_store_connstring", "snapshot_backup_dir", "snapshot_payload_store_type",
    "snapshot_payload_backend_type", "snapshot_catalog_backend_type", "snapshot_catalog_backend_connstring",
    "root_fs_dir", "enable_offload", "offload_on_evict", "offload_force_evict", "promotion_on_hit", "enable_cxl",
    "dynamic_replication_mode", "enable_multi_tenants", "enable_kv_events", "vmodule", NULL};

void mc_master_cfg_defaults(struct mc_master_cfg *c) {
  memset(c, 0, sizeof(*c));
  mc_cfg_defaults(mc_master_opts, c);
}

void mc_master_cfg_free(struct mc_master_cfg *c) { mc_cfg_free(mc_master_opts, c); }

/* ------------------------------------------------------------------ validation */

int mc_parse_duration_ms(const char *s, uint64_t *ms, char *why, size_t whylen) {
  const char *p = s ? s : "";
  while (isspace((unsigned char)*p)) p++;
  if (!*p) return snprintf(why, whylen, "empty duration"), -1;
  if (!isdigit((unsigned char)*p)) return snprintf(why, whylen, "expected a non-negative integer"), -1;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*p); p++) {
    if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) return snprintf(why, whylen, "value overflows"), -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  while (isspace((unsigned char)*p)) p++;
  const char *unit = p;
  while (isalpha((unsigned char)*p)) p++;
  size_t ulen = (size_t)(p - unit);
  while (isspace((unsigned char)*p)) p++;
  if (*p) return snprintf(why, whylen, "unexpected '%s'", p), -1;
  uint64_t mul;
  if (!ulen || (ulen == 2 && !strncasecmp(unit, "ms", 2))) mul = 1;
  else if (ulen == 1 && tolower((unsigned char)*unit) == 's') mul = 1000;
  else if (ulen == 1 && tolower((unsigned char)*unit) == 'm') mul = 60000;
  else if (ulen == 1 && tolower((unsigned char)*unit) == 'h') mul = 3600000;
  else return snprintf(why, whylen, "unknown unit '%.*s' (use ms, s, m or h)", (int)ulen, unit), -1;
  if (v > UINT64_MAX / mul) return snprintf(why, whylen, "value overflows"), -1;
  *ms = v * mul;
  return 0;
}

static int duration(const char *flag, const char *text, uint64_t *ms, char *err, size_t errlen) {
  char why[160];
  if (!mc_parse_duration_ms(text, ms, why, sizeof(why))) return 0;
  snprintf(err, errlen, "Invalid value for --%s: %s. %s", flag, text ? text : "", why);
  return -1;
}

static int interface_ipv4(const char *ifname, char *buf, size_t len) {
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs)) return -1;
  int rc = -1;
  for (i = ifs; i && rc; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, ifname))
      rc = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, (socklen_t)len) ? 0 : -1;
  freeifaddrs(ifs);
  return rc;
}

static int strategy_of(const char *s, int *out) {
  if (!strcmp(s, "random")) *out = MC_STRATEGY_RANDOM;
  else if (!strcmp(s, "free_ratio_first")) *out = MC_STRATEGY_FREE_RATIO_FIRST;
  else if (!strcmp(s, "local_first")) *out = MC_STRATEGY_LOCAL_FIRST;
  else if (!strcmp(s, "ssd_free_ratio_first")) {
    LOG_WARN("allocation_strategy=ssd_free_ratio_first: no SSD tier in this build; using free_ratio_first");
    *out = MC_STRATEGY_FREE_RATIO_FIRST;
  } else if (!strcmp(s, "cxl")) {
    LOG_WARN("allocation_strategy=cxl: not supported by this build; using random");
    *out = MC_STRATEGY_RANDOM;
  } else return -1;
  return 0;
}

static int valid_cluster_id(const char *s) {
  size_t n = strlen(s);
  if (!n || n > 128) return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && !strchr("_.-", *s)) return 0;
  return 1;
}

static void warn_unsupported(const struct mc_master_cfg *c) {
  json_t *now = mc_cfg_to_json(mc_master_opts, c);
  struct mc_master_cfg d;
  mc_master_cfg_defaults(&d);
  json_t *def = mc_cfg_to_json(mc_master_opts, &d);
  for (int i = 0; unsupported[i]; i++)
    if (!json_equal(json_object_get(now, unsupported[i]), json_object_get(def, unsupported[i])))
      LOG_WARN("--%s is set but not supported by this build; ignored", unsupported[i]);
  if (!json_equal(json_object_get(now, "port"), json_object_get(def, "port")))
    LOG_WARN("--port is deprecated; use --rpc_port");
  if (!json_equal(json_object_get(now, "max_threads"), json_object_get(def, "max_threads")))
    LOG_WARN("--max_threads is deprecated; use --rpc_thread_num");
  json_decref(now);
  json_decref(def);
  mc_master_cfg_free(&d);
}

static int derive_network(struct mc_master_cfg *c, char *err, size_t errlen) {
  c->listen_port = (uint16_t)(c->rpc_port ? c->rpc_port : c->port);
  if (c->rpc_interface && *c->rpc_interface) {
    if (interface_ipv4(c->rpc_interface, c->bind_ip, sizeof(c->bind_ip))) {
      snprintf(err, errlen, "cannot resolve an IPv4 address of --rpc_interface=%s", c->rpc_interface);
      return -1;
    }
  } else {
    snprintf(c->bind_ip, sizeof(c->bind_ip), "%s", c->rpc_address && *c->rpc_address ? c->rpc_address : "0.0.0.0");
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  c->rpc_threads = (int)(c->rpc_thread_num ? c->rpc_thread_num : MC_MIN(c->max_threads, cpus > 0 ? cpus : 1));
  return 0;
}

static int check_choices(struct mc_master_cfg *c, char *err, size_t errlen) {
  if (!strcmp(c->memory_allocator, "cachelib")) {
    LOG_WARN("memory_allocator=cachelib is deprecated and not supported by this build; using offset");
  } else if (strcmp(c->memory_allocator, "offset")) {
    snprintf(err, errlen, "Invalid memory allocator: %s", c->memory_allocator);
    return -1;
  }
  if (strategy_of(c->allocation_strategy, &c->strategy)) {
    snprintf(err, errlen, "Invalid allocation strategy: %s", c->allocation_strategy);
    return -1;
  }
  const char *env_cluster = mc_knob_str(MC_KNOB_STORE_CLUSTER_ID);
  if (!strcmp(c->cluster_id, "mooncake_cluster") && env_cluster && *env_cluster) {
    mc_free(c->cluster_id);
    c->cluster_id = mc_strdup(env_cluster);
  }
  if (!valid_cluster_id(c->cluster_id)) {
    snprintf(err, errlen, "Invalid cluster_id '%s' (chars [0-9A-Za-z_.-], at most 128)", c->cluster_id);
    return -1;
  }
  return 0;
}

/* --enable_ha (docs/ha.md): etcd endpoints, and a published address other masters and clients can reach. */
static int check_ha(const struct mc_master_cfg *c, char *err, size_t errlen) {
  if (!c->enable_ha) return 0;
  const char *eps = c->ha_backend_connstring && *c->ha_backend_connstring ? c->ha_backend_connstring : c->etcd_endpoints;
  if (!eps || !*eps) {
    snprintf(err, errlen, "--enable_ha needs --ha_backend_connstring (or --etcd_endpoints): the etcd endpoints");
    return -1;
  }
  if (strcmp(c->ha_backend_type, "etcd")) {
    snprintf(err, errlen, "--ha_backend_type=%s is not supported by this build (etcd only)", c->ha_backend_type);
    return -1;
  }
  if (!strcmp(c->bind_ip, "0.0.0.0")) {
    snprintf(err, errlen, "--enable_ha publishes the RPC address as the leader's: set --rpc_address to a routable "
                          "address (or --rpc_interface), not 0.0.0.0");
    return -1;
  }
  return 0;
}

int mc_master_cfg_finalize(struct mc_master_cfg *c, char *err, size_t errlen) {
  if (duration("default_kv_lease_ttl", c->default_kv_lease_ttl, &c->lease_ttl_ms, err, errlen) ||
      duration("default_kv_soft_pin_ttl", c->default_kv_soft_pin_ttl, &c->soft_pin_ttl_ms, err, errlen) ||
      duration("max_kv_soft_pin_ttl", c->max_kv_soft_pin_ttl, &c->max_soft_pin_ttl_ms, err, errlen))
    return -1;
  if (check_choices(c, err, errlen) || derive_network(c, err, errlen) || check_ha(c, err, errlen)) return -1;
  const char *proto = mc_knob_str(MC_KNOB_RPC_PROTOCOL);
  if (proto && *proto && strcasecmp(proto, "tcp"))
    LOG_WARN("MC_RPC_PROTOCOL=%s is not supported by this build; the RPC runs over tcp", proto);
  warn_unsupported(c);
  return 0;
}

void mc_master_cfg_describe(const struct mc_master_cfg *c, char *buf, size_t len) {
  snprintf(buf, len,
           "Master service started on port %u, max_threads=%d, enable_metric_reporting=%d, metrics_port=%lld, "
           "rpc_address=%s, rpc_thread_num=%d, default_kv_lease_ttl=%llu, default_kv_soft_pin_ttl=%llu, "
           "max_kv_soft_pin_ttl=%llu, allow_evict_soft_pinned_objects=%d, eviction_ratio=%g, "
           "eviction_high_watermark_ratio=%g, eviction_thread_num=%lld, client_ttl=%lld, "
           "put_start_discard_timeout_sec=%lld, put_start_release_timeout_sec=%lld, memory_allocator=%s, "
           "allocation_strategy=%s, enable_http_metadata_server=%d, http_metadata_server_port=%lld, "
           "enable_metadata_cleanup_on_timeout=%d, cluster_id=%s, enable_ha=%d, rpc protocol=tcp",
           (unsigned)c->listen_port, c->rpc_threads, c->enable_metric_reporting, (long long)c->metrics_port,
           c->bind_ip, c->rpc_threads, (unsigned long long)c->lease_ttl_ms, (unsigned long long)c->soft_pin_ttl_ms,
           (unsigned long long)c->max_soft_pin_ttl_ms, c->allow_evict_soft_pinned_objects, c->eviction_ratio,
           c->eviction_high_watermark_ratio, (long long)c->eviction_thread_num, (long long)c->client_ttl,
           (long long)c->put_start_discard_timeout_sec, (long long)c->put_start_release_timeout_sec,
           c->memory_allocator, c->allocation_strategy, c->enable_http_metadata_server,
           (long long)c->http_metadata_server_port, c->enable_metadata_cleanup_on_timeout, c->cluster_id,
           c->enable_ha);
}
