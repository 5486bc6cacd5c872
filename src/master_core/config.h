/* The master's configuration: one table (mc_master_opts) drives the command line, the config file
 * (JSON or YAML, config_file.c), --help and the startup line. Table fields are set as text; after parsing,
 * mc_master_cfg_finalize() validates them and fills the derived fields (durations in ms, the
 * effective port, bind address and strategy). Never prints: errors come back as text. */
#ifndef MC_MASTER_CORE_CONFIG_H
#define MC_MASTER_CORE_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

enum mc_alloc_strategy { MC_STRATEGY_RANDOM = 0, MC_STRATEGY_FREE_RATIO_FIRST, MC_STRATEGY_LOCAL_FIRST };

struct mc_master_cfg {
  /* core */
  int64_t rpc_port, rpc_thread_num, rpc_conn_timeout_seconds, port, max_threads;
  char *rpc_address, *rpc_interface;
  int rpc_enable_tcp_no_delay;
  /* leases and pins (durations as given; see the derived *_ms fields) */
  char *default_kv_lease_ttl, *default_kv_soft_pin_ttl, *max_kv_soft_pin_ttl;
  int allow_evict_soft_pinned_objects;
  /* eviction */
  double eviction_high_watermark_ratio, eviction_ratio, nof_eviction_ratio, nof_eviction_high_watermark_ratio;
  int64_t eviction_thread_num;
  /* liveness and puts */
  int64_t client_ttl, put_start_discard_timeout_sec, put_start_release_timeout_sec;
  /* allocation */
  char *memory_allocator, *allocation_strategy;
  /* TE metadata */
  int enable_http_metadata_server, enable_metadata_cleanup_on_timeout;
  int64_t http_metadata_server_port;
  char *http_metadata_server_host, *metadata_server;
  /* metrics */
  int enable_metric_reporting;
  int64_t metrics_port, metric_report_interval_sec;
  char *metrics_host;
  /* HA (docs/ha.md): etcd election; enable_oplog is accepted and ignored (holder indexes replace it) */
  int enable_ha, enable_oplog;
  char *ha_backend_type, *ha_backend_connstring, *etcd_endpoints, *cluster_id, *pod_name, *pod_namespace;
  int64_t oplog_poll_interval_ms, oplog_batch_max_entries, batch_oplog_retry_timeout_sec;
  char *restore_snapshot; /* docs/ha.md, "Snapshots" */
  /* upstream's periodic snapshots (accepted, not supported) */
  int enable_snapshot, enable_snapshot_restore;
  int64_t snapshot_interval_seconds, snapshot_child_timeout_seconds, snapshot_retention_count;
  char *snapshot_object_store_type, *snapshot_catalog_store_type, *snapshot_catalog_store_connstring,
      *snapshot_backup_dir, *snapshot_payload_store_type, *snapshot_payload_backend_type,
      *snapshot_catalog_backend_type, *snapshot_catalog_backend_connstring;
  /* storage tiers (accepted, not supported) */
  char *root_fs_dir, *cxl_path;
  int64_t global_file_segment_size, offloading_queue_limit, promotion_admission_threshold, promotion_queue_limit,
      promotion_max_per_heartbeat, nof_heartbeat_interval_sec, nof_heartbeat_probe_timeout_ms,
      nof_heartbeat_failures_threshold;
  uint64_t quota_bytes, cxl_size;
  int enable_offload, offload_on_evict, offload_force_evict, promotion_on_hit, enable_disk_eviction, enable_cxl;
  double offload_cap_ratio;
  /* copy/move tasks (tasks.c; max_retry_attempts: retries of a failed attempt) */
  int64_t max_total_finished_tasks, max_total_pending_tasks, max_total_processing_tasks, pending_task_timeout_sec,
      processing_task_timeout_sec, max_retry_attempts;
  /* misc (accepted, not supported) */
  char *dynamic_replication_mode, *tenant_quota_connector_type, *tenant_quota_connector_uri;
  int64_t dynamic_replication_heat_window_seconds, dynamic_replication_max_memory_replicas;
  double dynamic_replication_admission_qps_threshold;
  int enable_multi_tenants, enable_kv_events, kv_events_emit_legacy_compat, kv_events_emit_object_key;
  char *kv_events_bind_endpoint, *kv_events_backend_id, *kv_events_model_name, *kv_events_tenant_id,
      *kv_events_additional_salt, *kv_events_lora_name;
  int64_t kv_events_queue_capacity, kv_events_block_size, kv_events_dp_rank;
  /* glog-compatible logging flags */
  char *vmodule, *log_dir;
  int logtostderr, alsologtostderr;
  int64_t minloglevel, stderrthreshold;

  /* ---- derived by mc_master_cfg_finalize (not in the table) ---- */
  uint64_t lease_ttl_ms, soft_pin_ttl_ms, max_soft_pin_ttl_ms;
  int strategy;         /* enum mc_alloc_strategy */
  uint16_t listen_port; /* rpc_port, or the deprecated port when rpc_port is 0 */
  char bind_ip[64];     /* rpc_interface's IPv4, else rpc_address */
  int rpc_threads;      /* rpc_thread_num, or min(max_threads, online CPUs) */
};

extern const struct mc_cfg_opt mc_master_opts[];

/* Defaults of every field (derived fields zero). */
void mc_master_cfg_defaults(struct mc_master_cfg *c);
void mc_master_cfg_free(struct mc_master_cfg *c);

/* Loads a config file: format by extension (.json, .yaml, .yml; else "Unsupported config file format").
 * Keys are flag names; nested maps flatten to "a.b"; "client_live_ttl_sec" sets client_ttl. Unknown keys
 * are skipped with a warning (logged). 0, or -1 with a message in err. */
int mc_master_cfg_load_file(struct mc_master_cfg *c, const char *path, char *err, size_t errlen);

/* Validates and derives. Logs warnings (deprecated or unsupported flags in use). 0, or -1 with the
 * message in err, e.g. "Invalid value for --default_kv_lease_ttl: 1d. unknown unit 'd'". */
int mc_master_cfg_finalize(struct mc_master_cfg *c, char *err, size_t errlen);

/* Parses a duration: blanks, a non-negative decimal integer, blanks, optional unit ms|s|m|h (any
 * case; default ms), blanks. 0 and *ms, or -1 with the reason in why. */
int mc_parse_duration_ms(const char *s, uint64_t *ms, char *why, size_t whylen);

/* The startup line ("Master service started on port ..."), into buf. */
void mc_master_cfg_describe(const struct mc_master_cfg *c, char *buf, size_t len);

#endif
