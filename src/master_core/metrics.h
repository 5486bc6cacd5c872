/* The master's metrics (docs/admin.md): counters bumped on the RPC path (relaxed atomics,
 * no lock), the client-reported transfer statistics, one-second snapshots for the windowed figures
 * (eviction_rate over 60 s, master_rpc_qps over 10 s, te_transfer_latency_p99 over 60 s), and one view of
 * them all (metrics.c, the data core). The three renderings (the Prometheus exposition, the summary line,
 * and the key=value log line) are the serving layer's (metrics_render.c, master_int.h).
 * Never included outside src/master. */
#ifndef MC_MASTER_CORE_METRICS_H
#define MC_MASTER_CORE_METRICS_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "net/codec.h"

struct mc_master;

#define MC_OPS_MAX (MC_OP_MAX + 1) /* every opcode is counted (proto/proto.h) */
#define MC_VSIZE_NBUCKETS 12    /* value sizes: 1 KiB * 4^i, i < 11, then +Inf */
#define MC_WINDOW_SLOTS 64      /* one snapshot per second: enough for the 60 s windows */
#define MC_QPS_WINDOW_S 10      /* master_rpc_qps and the summary's per-second rates */

struct mc_op_count {
  _Atomic uint64_t req, fail;
};

/* Per batch opcode, beyond the op counts: requests whose every item failed, some failed, item counts. */
struct mc_batch_count {
  _Atomic uint64_t all_failed, partial, items, failed_items;
};

struct mc_msnap {
  uint64_t t_ns, rpcs, evicted;
  uint64_t lat[MC_LAT_NBUCKETS];
  uint64_t req[MC_OPS_MAX], fail[MC_OPS_MAX]; /* per opcode, for the summary's per-second rates */
};

struct mc_mstats {
  uint64_t start_ns;
  struct mc_op_count op[MC_OPS_MAX];
  struct mc_batch_count batch[MC_OPS_MAX];
  _Atomic uint64_t lookup_hits, lookup_misses; /* per key, over ExistKey and GetReplicaList (+ batches) */
  _Atomic uint64_t vsize[MC_VSIZE_NBUCKETS], vsize_sum;
  _Atomic uint64_t put_alloc_failures, put_partial;
  _Atomic uint64_t evict_runs, evict_runs_ok, evicted_keys, evicted_bytes;

  pthread_mutex_t mu;          /* guards everything below */
  struct mc_client_stats sum;  /* every client report added up (client field unused) */
  uint64_t reports;
  struct mc_msnap ring[MC_WINDOW_SLOTS]; /* newest at ring[(head + n - 1) % SLOTS] */
  uint32_t head, n;
};

void mc_metrics_init(struct mc_mstats *ms);
void mc_metrics_destroy(struct mc_mstats *ms);

/* ---- hot path (lock-free) ---- */
static inline void mc_metrics_rpc(struct mc_mstats *ms, uint16_t op, int rc) {
  if (op >= MC_OPS_MAX) return;
  atomic_fetch_add_explicit(&ms->op[op].req, 1, memory_order_relaxed);
  if (rc) atomic_fetch_add_explicit(&ms->op[op].fail, 1, memory_order_relaxed);
}
void mc_metrics_batch(struct mc_mstats *ms, uint16_t op, uint32_t items, uint32_t failed);
void mc_metrics_lookups(struct mc_mstats *ms, uint64_t hits, uint64_t misses);
/* A successful put start of `size` bytes that got `got` of `wanted` replicas. */
void mc_metrics_put_started(struct mc_mstats *ms, uint64_t size, uint32_t got, uint32_t wanted);
void mc_metrics_put_failed(struct mc_mstats *ms, int rc);
void mc_metrics_eviction_run(struct mc_mstats *ms, uint64_t keys, uint64_t bytes);

/* ---- client reports and windows (take ms->mu briefly) ---- */
void mc_metrics_report(struct mc_mstats *ms, const struct mc_client_stats *st);
/* Takes the once-a-second snapshot when due. Called by the housekeeping thread. */
void mc_metrics_tick(struct mc_mstats *ms, uint64_t now_ns);

/* The newest snapshot at least window_s old, else the oldest (the start). Caller holds ms->mu. */
const struct mc_msnap *mc_metrics_snap_before(struct mc_mstats *ms, uint64_t now, uint64_t window_s);

/* ---- one consistent view of the figures (the renderings' input) ---- */
struct mc_mview {
  uint64_t segs, clients, used, cap, keys, soft;
  uint64_t ssd_used, ssd_cap; /* the clients' disk tiers (REPORT_SSD) */
  uint64_t rpcs, hits, misses, reports, evicted;
  double qps, eviction_rate, p99_s, hit_ratio;
  struct mc_client_stats sum;
};
/* Reads the registry (seg_mu read), the object count and the counters into v; no shard lock. */
void mc_metrics_view(struct mc_master *m, struct mc_mview *v);

#endif
