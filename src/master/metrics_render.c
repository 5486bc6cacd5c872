/* The metrics' renderings (metrics.h, docs/admin.md "Metrics"): the Prometheus exposition, the summary line
 * and the key=value log line, from one view of the figures (mc_metrics_view) and the election's state
 * (ha.h). The serving layer's: the data core only counts. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "master/ha.h"
#include "master/master_int.h"
#include "master_core/metrics.h"
#include "mooncake/store_errors.h"

static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

/* ------------------------------------------------------------------ exposition */

static void outf(struct mc_wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct mc_wbuf *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  mc_w_reserve(w, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf((char *)w->p + w->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  w->len += (size_t)n;
}

static void family(struct mc_wbuf *w, const char *name, const char *type, const char *help) {
  outf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct mc_wbuf *w, const char *name, const char *help, uint64_t v) {
  family(w, name, "counter", help);
  outf(w, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct mc_wbuf *w, const char *name, const char *help, double v) {
  family(w, name, "gauge", help);
  outf(w, "%s %.17g\n", name, v);
}

struct op_name {
  uint16_t op;
  const char *name;
  int batch;
};

#define OP_NAME_(name, code, metric, batch, handler) {MC_OP_##name, #metric, batch},
static const struct op_name op_names[] = {MC_MASTER_OPS(OP_NAME_)};
#undef OP_NAME_

static void op_counter(struct mc_wbuf *w, const struct op_name *o, const char *what, const char *help, uint64_t v) {
  char name[128], text[256];
  snprintf(name, sizeof(name), "master_%s%s_%s_total", o->batch ? "batch_" : "", o->name, what);
  snprintf(text, sizeof(text), "%s %s RPCs: %s", o->batch ? "Batch" : "Single", o->name, help);
  counter(w, name, text, v);
}

static void rpc_families(struct mc_mstats *ms, struct mc_wbuf *w) {
  for (size_t i = 0; i < MC_ARRAY_LEN(op_names); i++) {
    const struct op_name *o = &op_names[i];
    struct mc_op_count *c = &ms->op[o->op];
    if (!o->batch) {
      op_counter(w, o, "requests", "requests received", get(&c->req));
      op_counter(w, o, "failures", "requests answered with an error status", get(&c->fail));
      continue;
    }
    struct mc_batch_count *b = &ms->batch[o->op];
    op_counter(w, o, "requests", "requests received", get(&c->req));
    op_counter(w, o, "failures", "requests that failed as a whole or in every item", get(&c->fail) + get(&b->all_failed));
    op_counter(w, o, "partial_successes", "requests with some but not all items failed", get(&b->partial));
    op_counter(w, o, "items", "items (keys) in the requests", get(&b->items));
    op_counter(w, o, "failed_items", "items answered with an error status", get(&b->failed_items));
  }
}

static void value_size_histogram(struct mc_mstats *ms, struct mc_wbuf *w) {
  family(w, "master_value_size_bytes", "histogram", "Sizes of the values of successful put/upsert starts and commits");
  uint64_t cum = 0, bound = 1024;
  for (uint32_t i = 0; i < MC_VSIZE_NBUCKETS - 1; i++, bound *= 4) {
    cum += get(&ms->vsize[i]);
    outf(w, "master_value_size_bytes_bucket{le=\"%llu\"} %llu\n", (unsigned long long)bound, (unsigned long long)cum);
  }
  cum += get(&ms->vsize[MC_VSIZE_NBUCKETS - 1]);
  outf(w, "master_value_size_bytes_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  outf(w, "master_value_size_bytes_sum %llu\nmaster_value_size_bytes_count %llu\n",
       (unsigned long long)get(&ms->vsize_sum), (unsigned long long)cum);
}

static void latency_histogram(const struct mc_mview *v, struct mc_wbuf *w) {
  family(w, "te_transfer_latency_seconds", "histogram",
         "Transfer latencies reported by every store client since the master started");
  uint64_t cum = 0;
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS - 1; i++) {
    cum += v->sum.lat[i];
    outf(w, "te_transfer_latency_seconds_bucket{le=\"%g\"} %llu\n", (double)mc_lat_bound_us(i) / 1e6,
         (unsigned long long)cum);
  }
  cum += v->sum.lat[MC_LAT_NBUCKETS - 1];
  outf(w, "te_transfer_latency_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
  outf(w, "te_transfer_latency_seconds_sum %.17g\nte_transfer_latency_seconds_count %llu\n",
       (double)v->sum.lat_sum_us / 1e6, (unsigned long long)cum);
}

static void guide_metrics(const struct mc_mview *v, struct mc_wbuf *w) {
  gauge(w, "master_segment_count", "Mounted segments", (double)v->segs);
  gauge(w, "eviction_rate", "Objects evicted per second over the last 60 s", v->eviction_rate);
  gauge(w, "te_transfer_latency_p99", "Seconds; p99 of client-reported transfer latencies over the last 60 s",
        v->p99_s);
  gauge(w, "store_hit_ratio", "Per-key hits / (hits + misses) of existence queries and read lookups since start",
        v->hit_ratio);
  gauge(w, "master_rpc_qps", "Master RPCs per second over the last 10 s", v->qps);
  counter(w, "master_rpc_requests_total", "Master RPCs of every opcode since start", v->rpcs);
  counter(w, "store_lookup_hits_total", "Key lookups (exist, get replica list) that found a readable object",
          v->hits);
  counter(w, "store_lookup_misses_total", "Key lookups (exist, get replica list) that found no readable object",
          v->misses);
}

static void upstream_gauges(const struct mc_mview *v, struct mc_wbuf *w) {
  gauge(w, "master_allocated_bytes", "Bytes allocated in mounted memory segments", (double)v->used);
  gauge(w, "master_total_capacity_bytes", "Capacity of mounted memory segments in bytes", (double)v->cap);
  gauge(w, "master_ssd_used_bytes", "Bytes used in the clients' local-disk tiers, as they report them", (double)v->ssd_used);
  gauge(w, "master_ssd_capacity_bytes", "Capacity of the clients' local-disk tiers (their quotas) in bytes",
        (double)v->ssd_cap);
  gauge(w, "master_key_count", "Objects in the master (including puts in progress)", (double)v->keys);
  gauge(w, "master_soft_pin_key_count", "Soft-pinned objects", (double)v->soft);
  gauge(w, "master_active_clients", "Clients with mounted segments that the master tracks", (double)v->clients);
  /* tiers this build does not have: exported as 0 so upstream dashboards keep working */
  gauge(w, "master_allocated_file_size_bytes", "Shared-FS tier bytes allocated (no such tier here: 0)", 0);
  gauge(w, "master_total_file_capacity_bytes", "Shared-FS tier capacity (no such tier here: 0)", 0);
  gauge(w, "master_nof_allocated_bytes", "NVMe-oF tier bytes allocated (no such tier here: 0)", 0);
  gauge(w, "master_total_nof_capacity_bytes", "NVMe-oF tier capacity (no such tier here: 0)", 0);
}

/* Upstream's tiered eviction family: <base><all>, <base>_mem, <base>_nof (no NVMe-oF tier here: 0). */
static void tiered(struct mc_wbuf *w, const char *base, const char *all, const char *help, uint64_t v) {
  char name[96], text[192];
  snprintf(name, sizeof(name), "%s%s", base, all);
  counter(w, name, help, v);
  snprintf(name, sizeof(name), "%s_mem", base);
  snprintf(text, sizeof(text), "%s (memory tier)", help);
  counter(w, name, text, v);
  snprintf(name, sizeof(name), "%s_nof", base);
  snprintf(text, sizeof(text), "%s (NVMe-oF tier; none here: 0)", help);
  counter(w, name, text, 0);
}

/* The evicted-object count comes from the view, so eviction_rate * 60 equals it in one scrape. */
static void eviction_families(struct mc_mstats *ms, const struct mc_mview *v, struct mc_wbuf *w) {
  tiered(w, "master_successful_evictions", "_total", "Eviction runs that evicted objects", get(&ms->evict_runs_ok));
  tiered(w, "master_attempted_evictions", "_total", "Eviction runs", get(&ms->evict_runs));
  tiered(w, "master_evicted_key_count", "", "Objects evicted", v->evicted);
  tiered(w, "master_evicted_size_bytes", "", "Replica bytes freed by eviction", get(&ms->evicted_bytes));
}

static void put_and_get_families(struct mc_mstats *ms, struct mc_wbuf *w) {
  counter(w, "master_put_start_alloc_failures_total", "Put/upsert starts refused for lack of space (-200)",
          get(&ms->put_alloc_failures));
  counter(w, "master_put_start_partial_allocations_total", "Put/upsert starts that got fewer replicas than asked",
          get(&ms->put_partial));
  uint64_t gets = get(&ms->op[MC_OP_GET_REPLICA_LIST].req) + get(&ms->batch[MC_OP_BATCH_GET_REPLICA_LIST].items);
  uint64_t valid = gets - get(&ms->op[MC_OP_GET_REPLICA_LIST].fail) -
                   get(&ms->batch[MC_OP_BATCH_GET_REPLICA_LIST].failed_items);
  counter(w, "mem_cache_hit_nums_", "Replica-list lookups served from memory", valid);
  counter(w, "file_cache_hit_nums_", "Replica-list lookups served from a file tier (no such tier here: 0)", 0);
  counter(w, "valid_get_nums_", "Replica-list lookups that found a readable object", valid);
  counter(w, "total_get_nums_", "Replica-list lookups", gets);
}

static void client_report_families(const struct mc_mview *v, struct mc_wbuf *w) {
  latency_histogram(v, w);
  counter(w, "store_client_read_bytes_total", "Bytes clients reported reading", v->sum.bytes_read);
  counter(w, "store_client_written_bytes_total", "Bytes clients reported writing", v->sum.bytes_written);
  counter(w, "store_client_lookup_hits_total", "Lookup hits clients reported seeing (informational)", v->sum.hits);
  counter(w, "store_client_lookup_misses_total", "Lookup misses clients reported seeing (informational)",
          v->sum.misses);
  counter(w, "store_client_stats_reports_total", "Client statistics reports received", v->reports);
}

/* master_ha_* (docs/admin.md, "Metrics"): also on a standby and without HA (enabled 0). */
static void ha_families(struct mc_master *m, struct mc_wbuf *w) {
  struct mc_ha_info hi = {0};
  if (m->ha) mc_ha_info(m->ha, &hi);
  int leader = mc_master_serving(m);
  gauge(w, "master_ha_enabled", "1 when this master runs the etcd leader election (--enable_ha)", m->ha != NULL);
  gauge(w, "master_ha_is_leader", "1 while this master serves as the leader", leader);
  family(w, "master_ha_state", "gauge", "1 for the election state this master is in");
  static const int states[] = {MC_HA_STARTING, MC_HA_STANDBY, MC_HA_CANDIDATE, MC_HA_SERVING};
  int cur = m->ha ? hi.state : MC_HA_SERVING;
  for (size_t i = 0; i < MC_ARRAY_LEN(states); i++)
    outf(w, "master_ha_state{state=\"%s\"} %d\n", mc_ha_state_name(states[i]), cur == states[i]);
  gauge(w, "master_ha_leader_present", "1 when a leader key exists (as this master last read it)",
        m->ha ? hi.present : 1);
  gauge(w, "master_ha_view_version", "view_version of the leader this master knows (the key's etcd revision)",
        (double)(m->ha ? hi.view_version : m->view_version));
  gauge(w, "master_ha_lease_remaining_seconds", "How long the leader may still serve without reaching etcd",
        m->ha ? (double)hi.lease_left_ms / 1000.0 : 0.0);
  counter(w, "master_ha_elections_won_total", "Times this master became the leader", hi.elections_won);
  counter(w, "master_ha_leader_changes_total", "Leaders this master has seen (itself included)", hi.leader_changes);
  counter(w, "master_ha_dead_leader_revokes_total",
          "Leases of dead leaders this standby revoked (their port refused connections)", hi.revokes);
  counter(w, "master_ha_keepalive_failures_total", "Lease keepalives of this leader that did not reach etcd",
          hi.keepalive_failures);
  counter(w, "master_ha_terms_lost_total", "Leaderships this master lost while running", hi.terms_lost);
}

void mc_metrics_exposition(struct mc_master *m, struct mc_wbuf *w) {
  struct mc_mview v;
  mc_metrics_view(m, &v);
  guide_metrics(&v, w);
  upstream_gauges(&v, w);
  rpc_families(m->ms, w);
  eviction_families(m->ms, &v, w);
  put_and_get_families(m->ms, w);
  value_size_histogram(m->ms, w);
  client_report_families(&v, w);
  gauge(w, "master_uptime_seconds", "Seconds since the master started",
        (double)(mc_now_ns() - m->ms->start_ns) / 1e9);
  ha_families(m, w);
}

/* ------------------------------------------------------------------ log lines */

static void human(uint64_t b, char *buf, size_t len) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = (double)b;
  int u = 0;
  while (x >= 1024 && u < 4) x /= 1024, u++;
  snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", x, units[u]);
}

struct labelled_op {
  const char *label;
  uint16_t op;
};

/* "Label=a/b, ...": successes / requests per second of each opcode over the last 10 s. */
static void ok_rates(struct mc_mstats *ms, const struct labelled_op *ops, size_t nops, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  pthread_mutex_lock(&ms->mu);
  const struct mc_msnap *old = mc_metrics_snap_before(ms, mc_now_ns(), MC_QPS_WINDOW_S);
  for (size_t i = 0; i < nops && n < len; i++) {
    uint16_t op = ops[i].op;
    uint64_t req = get(&ms->op[op].req) - old->req[op], fail = get(&ms->op[op].fail) - old->fail[op];
    n += (size_t)snprintf(buf + n, len - n, "%s%s=%.1f/%.1f", i ? ", " : "", ops[i].label,
                          (double)(req - MC_MIN(fail, req)) / MC_QPS_WINDOW_S, (double)req / MC_QPS_WINDOW_S);
  }
  pthread_mutex_unlock(&ms->mu);
}

void mc_metrics_summary(struct mc_master *m, char *buf, size_t len) {
  static const struct labelled_op single[] = {{"PutStart", MC_OP_PUT_START}, {"PutEnd", MC_OP_PUT_END},     {"PutRevoke", MC_OP_PUT_REVOKE},
                {"Get", MC_OP_GET_REPLICA_LIST}, {"Exist", MC_OP_EXIST_KEY}, {"Del", MC_OP_REMOVE},
                {"DelAll", MC_OP_REMOVE_ALL},   {"Ping", MC_OP_PING},        {"Mount", MC_OP_MOUNT_SEGMENT}},
    batch[] = {{"PutStart", MC_OP_BATCH_PUT_START}, {"PutEnd", MC_OP_BATCH_PUT_END},
               {"Get", MC_OP_BATCH_GET_REPLICA_LIST}, {"Exist", MC_OP_BATCH_EXIST_KEY}, {"Del", MC_OP_BATCH_REMOVE}};
  struct mc_mview v;
  mc_metrics_view(m, &v);
  char used[32], cap[32], ssd_used[32], ssd_cap[32], reqs[512], breqs[256], ha[256];
  int leader = mc_master_serving(m);
  const char *state = "serving";
  snprintf(ha, sizeof(ha), "enabled=false");
  if (m->ha) {
    struct mc_ha_info hi;
    mc_ha_info(m->ha, &hi);
    state = mc_ha_state_name(hi.state);
    snprintf(ha, sizeof(ha), "enabled=true, leader=%s, view_version=%llu", hi.present ? hi.leader : "none",
             (unsigned long long)hi.view_version);
  }
  human(v.used, used, sizeof(used));
  human(v.cap, cap, sizeof(cap));
  human(v.ssd_used, ssd_used, sizeof(ssd_used));
  human(v.ssd_cap, ssd_cap, sizeof(ssd_cap));
  ok_rates(m->ms, single, MC_ARRAY_LEN(single), reqs, sizeof(reqs));
  ok_rates(m->ms, batch, MC_ARRAY_LEN(batch), breqs, sizeof(breqs));
  snprintf(buf, len,
           "role=%s, state=%s, service_ready=%s, master={Mem Storage: %s / %s (%.1f%%) | NVMe-oF SSD: 0 B / "
           "0 B | SSD Storage: %s / %s (%.1f%%) | Keys: %llu (soft-pinned: %llu) | Clients: %llu | Segments: %llu | "
           "Requests (Success/Total per sec): %s | Batch Requests (Success/Total per sec): %s | Evicted: %llu}, "
           "ha={%s}",
           leader ? "leader" : "standby", state, leader ? "true" : "false", used, cap, v.cap ? 100.0 * (double)v.used / (double)v.cap : 0.0,
           ssd_used, ssd_cap, v.ssd_cap ? 100.0 * (double)v.ssd_used / (double)v.ssd_cap : 0.0, (unsigned long long)v.keys,
           (unsigned long long)v.soft, (unsigned long long)v.clients, (unsigned long long)v.segs, reqs, breqs,
           (unsigned long long)v.evicted, ha);
}

void mc_metrics_kv_line(struct mc_master *m, char *buf, size_t len) {
  struct mc_mview v;
  mc_metrics_view(m, &v);
  snprintf(buf, len,
           "master_segment_count=%llu eviction_rate=%.6g te_transfer_latency_p99=%.6g store_hit_ratio=%.6g "
           "master_rpc_qps=%.6g store_lookup_hits_total=%llu store_lookup_misses_total=%llu master_key_count=%llu "
           "master_allocated_bytes=%llu master_total_capacity_bytes=%llu master_active_clients=%llu "
           "master_evicted_key_count=%llu master_rpc_total=%llu",
           (unsigned long long)v.segs, v.eviction_rate, v.p99_s, v.hit_ratio, v.qps, (unsigned long long)v.hits,
           (unsigned long long)v.misses, (unsigned long long)v.keys, (unsigned long long)v.used,
           (unsigned long long)v.cap, (unsigned long long)v.clients, (unsigned long long)v.evicted,
           (unsigned long long)v.rpcs);
}

/* The summary line every metric_report_interval_sec (10 s by default); at --v=1 the key=value line after it. */
void mc_report_metrics(struct mc_master *m) {
  char line[2048];
  mc_metrics_summary(m, line, sizeof(line));
  LOG_INFO("Master Admin Metrics: %s", line);
  if (!MLOG_V_ON(1)) return; /* the --v=1 line: not even built when it would not be written */
  mc_metrics_kv_line(m, line, sizeof(line));
  LOG_INFO("Master Metrics: %s", line);
}
