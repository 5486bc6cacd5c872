/* Internals of the master's serving layer, shared by its files: the RPC dispatcher (rpc.c), the admin HTTP
 * server (admin.c), lifecycle (service.c), the election (ha.c), rebuild (rebuild.c), snapshots (snapshot.c),
 * the metrics' renderings (metrics_render.c) and the TE metadata cleanup and engine probes (te_meta.c). It
 * sits above the data core (core.h: the structures, their locks and the core's functions), which includes
 * nothing of it and calls it only through the hooks of struct mc_core_hooks (set by mc_master_create).
 * Never included outside src/master. */
#ifndef MC_MASTER_INT_H
#define MC_MASTER_INT_H
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "master_core/core.h"
#include "master/master.h"
#include "net/auth.h"
#include "net/codec.h"
#include "proto/proto.h"

/* Wall-clock microseconds: a master's first view_version and the lowest number of its holder-index records
 * (service.c), raised again at promotion (ha.c). */
static inline uint64_t mc_wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* ---- the witness block of replies (rpc.c; docs/ha.md, "Witnesses") ---- */
/* Starts s, its records in its own buffer. */
void mc_wsink_open(struct mc_wsink *s);
/* The same for a reply whose every other field is written already (a batch's statuses, as placeholders
 * patched later): the block's header is written into w now and the records follow it there as they are
 * queued, with no copy; mc_witness_reply (ok = 1) fills the header in. */
void mc_wsink_open_in(struct mc_wsink *s, struct mc_wbuf *w);
/* Writes n i32 placeholders (a batch's statuses, set with mc_w_patch_u32 once known) and makes room for the
 * n witness records likely to follow them; returns where the first placeholder is. */
size_t mc_batch_reply_start(struct mc_wbuf *w, uint32_t n);
/* Appends the witness block to a successful reply: u64 view_version, u64 durable_seq, u32 count, records;
 * frees the sink's buffer. ok = 0: nothing appended. */
void mc_witness_reply(struct mc_master *m, struct mc_wsink *s, int ok, struct mc_wbuf *w);

/* ---- snapshots (snapshot.c; docs/ha.md, "Snapshots") ---- */
#define MC_SNAPSHOT_VERSION 2u /* the newest format this master writes and reads (and every older one) */
struct mc_restore;
/* Appends a snapshot of every complete replica and every segment to out. 0 or INTERNAL_ERROR. */
int mc_master_snapshot(struct mc_master *m, struct mc_wbuf *out);
/* Reads and checks a whole snapshot file: 0 and *out, or INVALID_PARAMS with err saying why (a newer
 * format version, a bad checksum, a truncated or malformed file) and nothing kept. */
int mc_restore_load(const char *path, struct mc_restore **out, char *err, size_t errlen);
void mc_restore_free(struct mc_restore *x);
uint64_t mc_restore_next_seq(const struct mc_restore *x);
/* A segment remounted after the master forgot it: installs the snapshot's entries of that segment id (once,
 * and only if base and size match). The hook segment_remounted. */
void mc_restore_segment(struct mc_master *m, struct mc_uuid client, const struct mc_segment_rec *rec);
/* Installs entries on client's segment seg_id like writers' witnesses (rebuild.c): a key that exists is
 * left as it is, space already taken is skipped, a key installed is recorded for a following holder.
 * Returns how many were installed. */
uint32_t mc_master_restore_entries(struct mc_master *m, struct mc_uuid client, struct mc_uuid seg_id,
                                   const struct mc_index_entry *e, uint32_t n);

/* ---- requests and tenants (rpc.c; docs/security.md, "Tenants") ---- */
/* A request being dispatched: its reader first (the op functions are given &req->r) and who sent it. A
 * tenant's connection is confined to the tenant's keys ("<tenant>\x1f..."), segments and placement. */
struct mc_req {
  struct mc_rbuf_rd r;
  const char *tenant; /* NULL: a member of the whole cluster (or an open cluster) */
  size_t nslen;       /* bytes of ns, 0 without a tenant */
  char ns[MC_AUTH_TENANT_MAX + 2]; /* the tenant's key namespace "<tenant>\x1f" */
};
static inline struct mc_req *mc_req_of(struct mc_rbuf_rd *r) { return (struct mc_req *)r; }
/* Reads an object key (a blob) of the request; a tenant's key outside its namespace marks the request
 * bad (INVALID_PARAMS), so no request of a tenant names another realm's object. */
const uint8_t *mc_req_key(struct mc_rbuf_rd *r, uint32_t *n);

/* ---- engine probes and TE metadata cleanup (te_meta.c): the hooks probe and endpoint_expired ---- */
/* Probes the transfer engine at probe_addr ("host:port"), retrying for up to budget_ms while it goes
 * unanswered: MC_PROBE_* (core.h). */
int mc_probe_alive(const char *probe_addr, int budget_ms);
/* Deletes ram/<ep> and rpc_meta/<ep> of an expired client's endpoint c (keep: an endpoint to leave alone). */
void mc_te_endpoint_expired(struct mc_master *m, const struct mc_ep_claim *c, const char *keep);

/* ---- the metrics' renderings (metrics_render.c; docs/admin.md, "Metrics") ---- */
/* The Prometheus text exposition (format 0.0.4), appended to w. */
void mc_metrics_exposition(struct mc_master *m, struct mc_wbuf *w);
/* "role=leader, state=serving, service_ready=true, master={...}, ha={...}" (no prefix). */
void mc_metrics_summary(struct mc_master *m, char *buf, size_t len);
/* "master_segment_count=.. eviction_rate=.. ..." for log shippers. */
void mc_metrics_kv_line(struct mc_master *m, char *buf, size_t len);
/* Logs the summary line, and at --v=1 the key=value line after it: the hook report_metrics. */
void mc_report_metrics(struct mc_master *m);

/* ---- admin HTTP (admin.c) ---- */
void mc_admin_stop(struct mc_admin *a); /* NULL ignored */

/* ---- HA (ha.c) ---- */
/* This master won the election with the leader key at etcd revision rev: its view_version becomes rev
 * and its holder-index records are numbered above every earlier leader's (docs/ha.md). */
void mc_master_promote(struct mc_master *m, uint64_t rev);
/* Whether this master serves now (always without HA; the leader within its lease's safe horizon). */
static inline int mc_master_serving(struct mc_master *m) {
  return !m->ha || mc_now_ns() < atomic_load_explicit(&m->serve_until_ns, memory_order_acquire);
}

#endif
