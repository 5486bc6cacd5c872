/* The data core of the master, shared by its files: the segment registry (segments.c), mount, unmount and client
 * expiry (mount.c), the clients' expiry timers (client_timers.c), the object table (objects.c), eviction
 * (evict.c), liveness (liveness.c), key groups (key_groups.c), copy and move tasks (tasks.c), discard
 * (discard.c), write extents (write_extents.c), key patterns (key_pattern.c) and the background threads' wait
 * (core.c). A file calls only files below it: tlsf, core, key_pattern, holder_feed, config, metrics, discard,
 * key_groups, client_timers, segments, objects, write_extents, tasks, mount, liveness, evict. It includes no header of the serving layer (master_int.h: RPC, admin HTTP, HA, snapshots, rebuild,
 * TE metadata); what the core needs of that layer it calls through m->hooks. Never included outside src/master.
 *
 * LOCKS, and what each guards
 *   shard->mu        (mutex, one per object shard): the shard's hash table and every field of its
 *                    objects, including their replica arrays. Never hold two shard locks at once.
 *   m->seg_mu        (rwlock, writer-preferring): m->segs, the client table and every index of the registry
 *                    (m->seg_ids, m->groups, each client's segment list, m->graceful), and each segment's
 *                    identity, client, grace deadline and membership. Readers: placement, queries, pings
 *                    of known clients (they store the client's atomic deadline). Writers: mount/unmount,
 *                    a client's first ping, expiry. Never held across I/O (probes, metadata).
 *   m->timer_mu      (mutex, a leaf): the clients' expiry heap (client_timers.c).
 *   m->discard_mu    (mutex): the discard heap (discard.c): space of preempted puts and of leased
 *                    objects removed or replaced, until its release time.
 *   seg->alloc_mu    (mutex): seg->tlsf and seg->used (used is also read lock-free).
 *   seg->state is atomic: written under seg_mu (write), read anywhere.
 *   seg->hidx and client->hidx (the holder-index feed, holder_feed.h; docs/ha.md): set once under seg_mu (write)
 *                    when the holder first follows, seg->hidx read anywhere (atomic); hidx's own locks are
 *                    leaves below shard->mu and seg_mu.
 *   m->tasks->mu     (mutex, a leaf): the copy/move task table (tasks.c), taken under a shard lock or alone.
 * ORDER (outer to inner): shard->mu -> m->seg_mu -> m->discard_mu -> seg->alloc_mu. Code holding seg_mu
 * never takes a shard lock; unmount therefore detaches segments under seg_mu (state UNMOUNTING, out of
 * m->segs) and sweeps shards afterwards, one shard at a time.
 *
 * SEGMENT LIFETIME: a replica points at its segment. A detached segment (UNMOUNTING) is freed only
 * after its sweeper has visited every shard and the discard list, so any replica still reachable under
 * a shard lock (or discard entry under discard_mu) points at a live segment whose allocator may still
 * be used. Replicas on UNMOUNTING segments are never readable and never allocated on. */
#ifndef MC_MASTER_CORE_CORE_H
#define MC_MASTER_CORE_CORE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "master_core/core_api.h"
#include "master_core/write_extents.h"
#include "master_core/hash.h"
#include "master_core/htab.h"
#include "master_core/config.h"
#include "proto/proto.h"
#include "master_core/tlsf.h"
#include "net/codec.h"

struct mc_mstats;
struct mc_wsink;
struct mc_hidx;
struct mc_hidx_feed;
/* the serving layer's (master_int.h), held in struct mc_master for it: the core never looks inside */
struct mc_meta_server;
struct mc_meta;
struct mc_mrpc_server;
struct mc_admin;
struct mc_ha;
struct mc_restore;

#define MC_NSHARDS 1024u
#define MC_NS_PER_MS 1000000ull
#define MC_NS_PER_S 1000000000ull


/* Per-request traces (--v=1 and above) at INFO; operational lines use LOG_INFO directly. */
extern int mc_master_verbosity;
/* Whether MLOG_V(n, ...) writes: test it first where building the line costs something. */
#define MLOG_V_ON(n) (mc_master_verbosity >= (n) && MC_LOG_INFO >= mc_log_level_cur)
#define MLOG_V(n, ...)                                                                           \
  do {                                                                                           \
    if (MLOG_V_ON(n)) mc_log_write(MC_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__);                \
  } while (0)

/* A segment's indexes (segments.c): the groups it belongs to (segments by name, host id, zone, realm), and the
 * arrays that know its place in them (pos[] below), so that leaving any of them is O(1). */
enum { MC_GRP_NAME, MC_GRP_HOST, MC_GRP_ZONE, MC_GRP_REALM, MC_NGRP, MC_POS_ALL = MC_NGRP, MC_POS_CLIENT, MC_NPOS };
/* Segments sharing a name, a host id, a zone or a realm (one table of groups per kind, m->groups). */
struct seg_group {
  struct mc_hnode hn;
  char *key;
  struct mseg **v; /* its segments, each at its pos[kind] */
  uint32_t n, cap;
};

struct mseg {
  struct mc_hnode id_hn; /* in m->seg_ids */
  struct seg_group *grp[MC_NGRP];
  uint32_t pos[MC_NPOS]; /* its index in each group, in m->segs and in its client's segments */
  struct mc_uuid id, client;
  char *name, *te_endpoint, *protocol, *zone, *host_id, *probe_addr; /* immutable while mounted */
  char *tenant; /* the realm that mounted it: "" = the whole cluster, else a tenant (docs/security.md) */
  uint64_t base, size;
  _Atomic int state;          /* enum mc_seg_state */
  uint64_t grace_deadline_ns; /* seg_mu */
  pthread_mutex_t alloc_mu;
  struct mc_tlsf *tlsf;  /* alloc_mu */
  _Atomic uint64_t used; /* written under alloc_mu */
  _Atomic uint64_t alloc_after_ns; /* no new allocations before this (remount quiet period) */
  struct mc_hidx *_Atomic hidx;    /* the holder's index feed once it follows (a reference), or NULL */
  _Atomic int rebuilders; /* index uploads using it (rebuild.c): its memory is freed only once they are done */
  /* its holder's index upload (rebuild.c): every record numbered at or below `applied` was in the holder's
   * index when it uploaded, so the upload is the truth about them; writers' witnesses above it may be
   * installed (RECOMMIT) once `uploaded` (the last batch came) */
  _Atomic uint64_t applied;
  _Atomic int uploaded;
  /* removal witnesses taken in its remount quiet period (rebuild.c; docs/ha.md, "Witnesses"), under alloc_mu:
   * a PUT witness of the same key at the same place numbered below one is not installed, whatever order
   * the writers hand them over in; at most MC_TOMBS_MAX, freed with the segment */
  struct mc_tomb { uint64_t hash, off, seq; } *tombs;
  uint32_t ntombs, captombs;
};
#define MC_TOMBS_MAX 65536u

/* A segment re-mounted after the master forgot it (restart, client expiry) takes no new allocation for
 * this long: writers holding write extents from before stop writing within MC_FASTPUT_CONTACT_NS of
 * their last contact with the master that granted them (docs/master.md, "Write extents"), so nothing
 * the new allocations receive can be overwritten by such a late write. */
#define MC_REMOUNT_QUIET_NS (MC_FASTPUT_CONTACT_NS + 1000ull * 1000000ull) /* 1.5 s */

struct mclient {
  struct mc_hnode hn; /* in m->clients */
  struct mc_uuid id;
  uint64_t gen; /* which incarnation of this id in the table (its expiry timer names it) */
  _Atomic uint64_t deadline_ns; /* stored by pings under seg_mu (read) */
  int ok; /* in the OK set: set by ReMountSegment only (docs/master.md, "Segments") */
  struct mc_hidx *hidx; /* its index feed once it follows (docs/ha.md), closed when it leaves; seg_mu */
  struct mseg **segs;   /* its mounted segments (pos[MC_POS_CLIENT]) */
  uint32_t nsegs, capsegs;
  /* its local-disk tier as its last REPORT_SSD said (docs/disk-tier.md); seg_mu; cleared with its last segment */
  uint64_t ssd_cap, ssd_used, ssd_objects;
};

/* A client's expiry timer (client_timers.c): due at its deadline as of when it was pushed. */
struct ctimer {
  uint64_t due_ns, gen;
  struct mc_uuid id;
};

struct replica {
  struct mseg *seg;
  struct mc_tlsf_block *blk;
  uint64_t off;
  uint8_t status;
};

struct object {
  struct object *next; /* hash chain */
  uint64_t hash, seq;  /* seq: unique, creation order (eviction tie-break and lookup by id) */
  uint64_t size;
  uint64_t put_start_ns;
  uint64_t lease_ns; /* lease timeout; doubles as the LRU stamp (set to now at PutEnd) */
  uint64_t soft_pin_ttl_ms, soft_pin_deadline_ns; /* deadline 0 = clock not started */
  struct mc_uuid owner;
  uint8_t hard_pin;
  uint8_t in_task; /* under a copy or move task (tasks.c): its PROCESSING replicas are the task's targets */
  struct kgroup *kg; /* its key group (key_groups.c), holding a reference, or NULL */
  uint32_t nrep;
  struct replica *rep; /* &rep1 for a single replica (most objects: no allocation of its own), else an array */
  struct replica rep1;
  uint32_t klen;
  char key[]; /* klen bytes + NUL */
};

struct shard {
  pthread_mutex_t mu;
  struct object **buckets;
  uint32_t nbuckets, count;
} __attribute__((aligned(64)));

struct discard {
  struct mseg *seg;
  struct mc_tlsf_block *blk;
  uint64_t release_ns;
  struct mc_hidx *hidx; /* and not before its holder acknowledged record `seq` (a reference), or NULL */
  uint64_t seq;
};

/* One holder's space waiting for its DROPs' acknowledgements, oldest first (discard.c): e[head, n). Holds a
 * reference on h while it exists. */
struct ackq {
  struct mc_hidx *h;
  struct discard *e;
  size_t head, n, cap;
};

/* What a client's expiry knows of an endpoint it mounted with: the endpoint, its control-RPC address and
 * host id (mount.c, for the hook endpoint_expired). */
struct mc_ep_claim {
  char *ep, *probe, *host;
};

/* What the data core asks of the layer serving it: set by mc_master_create (service.c) before any thread
 * starts, never changed after; a NULL hook does nothing (and a probe answers MC_PROBE_SILENT). */
struct mc_core_hooks {
  /* Probes the transfer engine at probe_addr ("host:port"), retrying for up to budget_ms while it goes
   * unanswered: MC_PROBE_* (mount.c, "Segment ownership"). */
  int (*probe)(const char *probe_addr, int budget_ms);
  /* An expired client's endpoint c, its segments unmounted: deletes its TE metadata keys unless keep names
   * it (docs/master.md, "Liveness and metadata cleanup"). Blocking I/O; called with no lock held. */
  void (*endpoint_expired)(struct mc_master *m, const struct mc_ep_claim *c, const char *keep);
  /* A segment the master had forgotten was remounted by client (mc_master_remount): --restore_snapshot's
   * entries of it. Called with no lock held. */
  void (*segment_remounted)(struct mc_master *m, struct mc_uuid client, const struct mc_segment_rec *rec);
  /* The metrics summary, every metric_report_interval_sec with enable_metric_reporting (housekeeping). */
  void (*report_metrics)(struct mc_master *m);
};

struct mc_master {
  struct mc_master_cfg cfg;
  struct mc_core_hooks hooks; /* the serving layer's part in the core's work (set once at create) */
  _Atomic uint64_t view_version; /* this incarnation (non-HA) or the leader key's etcd revision (HA) */
  /* RPCs are served while mc_now_ns() is below this: UINT64_MAX without HA, else set by the election
   * (ha.c): 0 on a standby, the lease's safe horizon on the leader (docs/ha.md, "Election and failover") */
  _Atomic uint64_t serve_until_ns;
  struct mc_ha *ha; /* (serving) the election (ha.c) with --enable_ha, else NULL; immutable after create */
  struct shard shards[MC_NSHARDS];
  _Atomic uint64_t nobjects, next_seq;

  pthread_rwlock_t seg_mu;
  struct mseg **segs; /* every mounted segment, in no particular order (pos[MC_POS_ALL]) */
  uint32_t nsegs, capsegs;
  struct mc_htab clients, seg_ids; /* struct mclient by id, struct mseg by id */
  struct mc_htab groups[MC_NGRP];  /* struct seg_group by name, host id, zone, realm ("" = the cluster) */
  struct seg_group **host_order;   /* local_first only: the host groups by host id (segments.c) */
  uint32_t nhost_order, caphost_order;
  struct mseg **graceful;          /* segments in GRACEFULLY_UNMOUNTING, until their timer fires */
  uint32_t capgraceful;
  _Atomic uint32_t ngraceful;
  uint64_t client_gen;
  _Atomic uint64_t used_bytes, cap_bytes; /* over m->segs, kept current (mc_tlsf_count_into) */
  pthread_mutex_t timer_mu;
  struct ctimer *timers; /* min-heap by due_ns: one per client */
  size_t ntimers, captimers;

  pthread_mutex_t discard_mu;
  struct discard *discards; /* min-heap by release_ns (discard.c); discard_mu */
  size_t ndiscards, capdiscards;
  struct ackq *ackqs; /* per holder: space waiting only for a DROP's acknowledgement (discard.c); discard_mu */
  uint32_t nackqs, capackqs;

  _Atomic int need_eviction;
  struct evict_cand *evict_buf; /* eviction candidates, kept between runs (evict.c; one run at a time) */
  size_t evict_cap;
  /* background threads */
  pthread_mutex_t bg_mu;
  pthread_cond_t bg_cv;
  int stopping;
  pthread_t evict_th, house_th;
  int threads_started;
  /* (serving) TE metadata cleanup target: the embedded server, else a metadata client (either may be NULL) */
  struct mc_meta_server *meta_server;
  struct mc_meta *meta;
  struct mc_mrpc_server *rpc; /* (serving) the RPC server */
  struct mc_extents *ext; /* write extents (write_extents.c) */
  uint16_t rpc_port;      /* (serving) bound RPC port, once started */
  struct mc_admin *admin; /* (serving) admin/metrics HTTP server (admin.c), NULL until started */
  _Atomic uint64_t n_soft_pinned;
  struct mc_mstats *ms; /* metrics (metrics.h) */
  struct mc_hidx_feed *hfeed; /* the holder indexes' records (holder_feed.h; docs/ha.md) */
  struct mc_tasks *tasks;      /* copy and move tasks (tasks.c) */
  struct mc_restore *restore; /* (serving) a snapshot's entries waiting for their segments (snapshot.c), or NULL */
  pthread_mutex_t kgroup_mu;  /* a leaf lock: guards kgroups and each group's refs and segment */
  struct mc_htab kgroups;     /* struct kgroup by name (key_groups.c; docs/master.md, "Key groups") */
};

/* used/capacity over mounted segments: the running sums (m->used_bytes, m->cap_bytes), O(1), no lock. */
static inline void mc_usage(struct mc_master *m, uint64_t *used, uint64_t *cap) {
  *used = atomic_load_explicit(&m->used_bytes, memory_order_relaxed);
  *cap = atomic_load_explicit(&m->cap_bytes, memory_order_relaxed);
}

/* ---- helpers (objects.c; the key hash is hash.h's) ---- */
static inline int mc_uuid_eq(struct mc_uuid a, struct mc_uuid b) { return a.hi == b.hi && a.lo == b.lo; }
static inline int seg_readable(const struct mseg *s) { return atomic_load(&s->state) != MC_SEG_UNMOUNTING; }
void mc_obj_encode_replica(struct mc_wbuf *w, const struct object *o, const struct replica *r);
/* Frees the space of o's replica r (shard lock held), not before not_before_ns (a read lease: 0 = now):
 * a COMPLETE replica on a segment whose holder follows its index also gets a DROP record, and its space
 * waits until the holder acknowledged it (docs/ha.md, "Holder indexes"); the DROP's witness goes to ws. */
void mc_rep_free(struct mc_master *m, const struct object *o, const struct replica *r, uint64_t not_before_ns,
                 struct mc_wsink *ws);
/* Queues the PUT records of o's COMPLETE replicas for their holders (shard lock held), their witnesses to
 * ws; the highest seq, 0 when none follows. */
uint64_t mc_obj_index_put(const struct object *o, struct mc_wsink *ws);
/* A holder's resync (holder_feed.h): queues the shards of the object table its feed asks for, while less than one
 * answer is queued, a PUT record per COMPLETE replica on the holder's segments (docs/ha.md, "Holder indexes"). */
void mc_obj_index_resync(struct mc_master *m, struct mc_hidx *h);
/* The witness records of the request being handled (docs/ha.md, "Witnesses"): an RPC handler passes its sink
 * down to every call of the object table that may queue a record (the parameter ws; NULL = none), and each
 * record queued is also appended here, in the feed's record layout (holder_feed.h); the reply carries them back to
 * the writer (mc_witness_reply, master_int.h). */
struct mc_wsink {
  struct mc_wbuf w;    /* the records, unless they go straight into the reply (mc_wsink_open_in) */
  struct mc_wbuf *out; /* where they go: &w, or the reply */
  size_t at;           /* (straight into the reply) where its block header is */
  uint32_t n;
  uint32_t unwitnessed; /* records past MC_WSINK_MAX */
};
/* Records one reply witnesses at most (a removal by pattern may drop far more: the rest are not witnessed,
 * logged; docs/ha.md, "Witnesses"). The writer keeps as many. */
#define MC_WSINK_MAX 65536u
/* Unlinks and frees o (its replicas must already be released or dropped). Caller holds the shard lock. */
void mc_obj_erase(struct mc_master *m, struct shard *sh, struct object *o);
/* Finds the object with this hash and seq in sh (locked), or NULL. */
struct object *mc_obj_find_seq(struct shard *sh, uint64_t hash, uint64_t seq);
/* Drops replicas on UNMOUNTING segments without freeing (their allocators are going away). */
void mc_obj_drop_dead(struct object *o);
/* ---- key groups (key_groups.c; docs/master.md, "Key groups") ---- */
void mc_kgroup_init(struct mc_master *m);
void mc_kgroup_destroy(struct mc_master *m);
/* The group of that name with a reference taken (created when new); NULL for NULL or "". */
struct kgroup *mc_kgroup_get(struct mc_master *m, const char *name);
/* The same for a name of n bytes that need not end in NUL (a view into a request or a file). */
struct kgroup *mc_kgroup_get_n(struct mc_master *m, const char *name, size_t n);
/* The group's name (NULL for NULL): what the holder indexes and snapshots keep (docs/master.md, "Key groups"). */
const char *mc_kgroup_name(const struct kgroup *g);
/* An object rebuilt on seg (a holder's index, a witness, a snapshot) names g: o takes over the caller's
 * reference (o had none), and a group with no segment yet takes seg's name. */
void mc_kgroup_rebuilt(struct mc_master *m, struct object *o, struct kgroup *g, const char *seg);
void mc_kgroup_hold(struct mc_master *m, struct kgroup *g);
/* Drops a reference (NULL: nothing); the last one frees the group. */
void mc_kgroup_put(struct mc_master *m, struct kgroup *g);
/* A copy of the group's segment name (mc_free), or NULL before its first member was placed. */
char *mc_kgroup_segment(struct mc_master *m, struct kgroup *g);
/* Records where a member went: the group's segment from now on. */
void mc_kgroup_placed(struct mc_master *m, struct kgroup *g, const char *seg);
/* A read lease until until_ns on a member of g: the group's lease (shared: eviction spares every member). */
void mc_kgroup_lease(struct kgroup *g, uint64_t until_ns);
/* Whether g (NULL: no group) is under a read lease at now_ns. */
int mc_kgroup_leased(const struct kgroup *g, uint64_t now_ns);
/* o now names g (taking over the caller's reference); its previous group's reference is dropped. */
void mc_kgroup_assign(struct mc_master *m, struct object *o, struct kgroup *g);
void mc_objects_init(struct mc_master *m);
void mc_objects_destroy(struct mc_master *m);
/* A put whose one replica is already written (extent commit, write_extents.c): validates like PutStart, then
 * under the key's shard lock either refuses (OBJECT_ALREADY_EXISTS, or a stale put preempted as PutStart
 * does) and calls carve(ctx, 0, NULL), or calls carve(ctx, 1, &rep) for the COMPLETE replica and
 * installs the object as PutStart + PutEnd leave it. carve's error is returned as is. */
int mc_obj_put_carved(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                      const struct mc_put_config *pc, int (*carve)(void *ctx, int keep, struct replica *out),
                      void *ctx, struct mc_wsink *ws);
/* Rebuild from a holder's index entry (rebuild.c; docs/ha.md, "Rebuild"): a complete object whose one
 * replica is blk (reserved by the caller) at e->offset on seg, in e's key group if it names one, as if put now (leased for one lease TTL, which
 * honours a lease the old master may have granted). 1 installed (or added as another holder's copy of the
 * same size); 0 when the key exists otherwise (the caller frees blk); -1 when seg is being unmounted
 * (blk goes with its allocator). */
int mc_obj_rebuild(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, const struct mc_index_entry *e);
/* The same for a writer's witness (RECOMMIT): installs only a key that does not exist, and queues its PUT
 * record (the holder does not have it), its witness to ws. 1 installed, 0 the key exists, -1 seg being unmounted. */
int mc_obj_recommit(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, const struct mc_index_entry *e,
                    struct mc_wsink *ws);
/* 1 when key's object has a COMPLETE replica of `size` bytes at off on seg: an index entry the master
 * already holds as it is (an upload that repeats an entry, or reports an object put since the feed was
 * attached), which the rebuild leaves alone rather than dropping. */
int mc_obj_held_at(struct mc_master *m, struct mseg *seg, uint64_t off, const void *key, uint32_t klen,
                   uint64_t size);
/* A removal witness (RECOMMIT of a DROP): removes key's object if it has a COMPLETE replica at off on seg
 * (the object the witnessed removal removed, rebuilt from an index that missed its DROP), queuing its DROP
 * records (their witnesses to ws). 1 removed, 0 nothing there (gone, or another object). */
int mc_obj_remove_at(struct mc_master *m, struct mseg *seg, uint64_t off, const void *key, uint32_t klen,
                     struct mc_wsink *ws);
/* ---- copy and move tasks (tasks.c; docs/master.md, "Copy and move tasks") ---- */
/* A replica a task names: its segment and offset identify it in the object (the object owns its space),
 * the engine name and address are where the executor moves bytes (ep owned by the task). */
struct mc_task_rep {
  struct mc_uuid seg;
  uint64_t off, addr;
  char *ep;
};
/* What a task knows of its object: found again by (hash, seq) under the shard lock. */
struct mc_task_place {
  uint64_t hash, seq, size;
  struct mc_uuid executor; /* the client owning the first target's segment */
  struct mc_task_rep src;
  uint32_t ntgt;
  struct mc_task_rep tgt[MC_TASK_MAX_TARGETS];
};
/* Starts a task on key's object (shard lock inside): checks it (OBJECT_NOT_FOUND, REPLICA_IS_NOT_READY,
 * OBJECT_HAS_REPLICATION_TASK; a move's source: SEGMENT_NOT_FOUND, REPLICA_NOT_FOUND; a target holding a
 * replica already: REPLICA_ALREADY_EXISTS), allocates a PROCESSING replica on each target (mc_place_on's
 * errors), fills *tp and calls admit(ctx, tp) with the shard still locked: its error undoes everything,
 * 0 marks the object in_task. src_name NULL: a copy (from any complete replica). */
int mc_obj_task_begin(struct mc_master *m, const void *key, uint32_t klen, const char *tenant, const char *src_name,
                      char *const *targets, uint32_t ntgt, struct mc_task_place *tp,
                      int (*admit)(void *ctx, const struct mc_task_place *tp), void *ctx);
/* Ends the task of tp on its object: ok makes the targets COMPLETE (a move then frees its source, after any
 * read lease on it), else the targets' space goes back (not before hold_until_ns: an executor that may
 * still write there). The object leaves in_task either way. 0, or why the task failed (OBJECT_NOT_FOUND,
 * REPLICA_IS_GONE: a target went with its segment). */
int mc_obj_task_end(struct mc_master *m, const struct mc_task_place *tp, uint8_t type, int ok, uint64_t hold_until_ns);
struct mc_tasks;
struct mc_tasks *mc_tasks_new(void);
void mc_tasks_free(struct mc_tasks *t);
/* Fails the tasks past their deadline (housekeeping thread). */
void mc_tasks_expire(struct mc_master *m, uint64_t now);
/* The RPCs (proto.h): CREATE_COPY_TASK / CREATE_MOVE_TASK (type; src only for a move; *id (0, 0) on
 * failure), QUERY_TASK (the reply's body into w), FETCH_TASKS (the reply into w) and MARK_TASK_COMPLETE. */
int mc_master_create_task(struct mc_master *m, const char *tenant, uint8_t type, const void *key, uint32_t klen,
                          const char *src, char *const *targets, uint32_t ntgt, struct mc_uuid *id);
int mc_master_query_task(struct mc_master *m, const char *tenant, struct mc_uuid id, struct mc_wbuf *w);
int mc_master_fetch_tasks(struct mc_master *m, const char *tenant, struct mc_uuid client, uint32_t max, struct mc_wbuf *w);
int mc_master_mark_task(struct mc_master *m, const char *tenant, struct mc_uuid client, struct mc_uuid id, int32_t status, const char *msg,
                        size_t msglen);

/* Frees PROCESSING replicas of puts older than put_start_release_timeout_sec (objects left empty are
 * erased) in one shard; caller holds its lock. Returns the number of objects erased. */
uint64_t mc_shard_release_stale(struct mc_master *m, struct shard *sh, uint64_t now);
/* The same for one object (its shard locked); 1 when it was erased. */
int mc_obj_release_if_stale(struct mc_master *m, struct shard *sh, struct object *o, uint64_t now);

/* 1 when a segment mounted in realm seg_tenant ("" = the whole cluster) belongs to realm tenant (NULL =
 * the whole cluster). */
static inline int mc_same_realm(const char *seg_tenant, const char *tenant) {
  return !strcmp(seg_tenant ? seg_tenant : "", tenant ? tenant : "");
}

/* ---- segments (segments.c) ---- */
/* Allocates up to `want` replicas of `size` bytes on distinct segment names, in placement order
 * (preferred -> writer's host -> writer's zone -> rest), only on segments of the writer's realm
 * (pc->tenant). Caller holds a shard lock; takes seg_mu (read). Returns the number placed and a
 * malloc'ed array in *out (NULL when none); *nsegs_ok is nonzero when that realm has a segment that takes
 * allocations now (when none was placed: whether any does). */
uint32_t mc_place(struct mc_master *m, const struct mc_put_config *pc, uint64_t size, uint64_t key_hash,
                  struct replica **out, uint32_t want, uint32_t *nsegs_ok);
/* One replica of size bytes (PROCESSING) on a segment named name of realm tenant, in *out (a copy or move
 * task's target): 0, SEGMENT_NOT_FOUND (no such segment mounted in that realm) or NO_AVAILABLE_HANDLE (no room,
 * or it takes no allocation now: draining, or in its remount quiet period). Caller holds a shard lock; takes seg_mu
 * (read). */
int mc_place_on(struct mc_master *m, const char *name, const char *tenant, uint64_t size, struct replica *out);
/* 1 when a mounted segment of realm tenant is named name (seg_mu read inside). */
int mc_seg_named(struct mc_master *m, const char *name, const char *tenant);
/* Detaches (under seg_mu write) segments: state UNMOUNTING, out of m->segs. */
void mc_seg_detach_locked(struct mc_master *m, struct mseg *s);
/* Frees a segment no replica, discard entry or write extent points at any more (mc_sweep_and_free). */
void mc_seg_free(struct mseg *s);
/* The registry's part of a mount, under seg_mu (write): 0 (mounted, or already mounted by this client), an
 * error, or 1 when the name is held by another client, whose id goes into *holder, its probe address into
 * *probe (mc_strdup) and its last contact (ping or mount; 0 if unknown) into *seen_ns (the caller probes it
 * without the lock, mount.c). */
int mc_seg_mount_locked(struct mc_master *m, const struct mc_segment_rec *r, struct mc_uuid client,
                        struct mc_uuid *holder, char **probe, uint64_t *seen_ns);
/* Finds segment id and checks ownership (the client, and the realm of a tenant's request), seg_mu held: 0
 * found (in *out), 1 unknown (OK), or INVALID_PARAMS. */
int mc_seg_owned_locked(struct mc_master *m, struct mc_uuid id, struct mc_uuid client, const char *tenant,
                        struct mseg **out);
/* The INFO line of a client's action on a segment (mount, unmount). */
void mc_seg_log_action(struct mc_uuid client, const char *action, const char *name);
struct mclient *mc_client_find_locked(struct mc_master *m, struct mc_uuid id);
/* Finds or adds the client (seg_mu write) and sets its deadline to now + client_ttl. */
struct mclient *mc_client_touch_locked(struct mc_master *m, struct mc_uuid id, uint64_t now);
void mc_client_remove_locked(struct mc_master *m, struct mc_uuid id);
/* When the client last pinged or mounted (its deadline minus client_ttl), 0 when it is not in the table (seg_mu
 * held). */
uint64_t mc_client_seen_locked(struct mc_master *m, struct mc_uuid id);
void mc_segments_destroy(struct mc_master *m);

/* ---- the clients' expiry timers (client_timers.c; timer_mu inside) ---- */
/* Arms the expiry timer of a client added to the table. */
void mc_client_timer_push(struct mc_master *m, const struct mclient *c);
/* Pushes t again (its due_ns set to the client's current deadline). */
void mc_client_timer_rearm(struct mc_master *m, const struct ctimer *t);
/* Takes the earliest timer into *t when it is due at now: 1, else 0 (*t zeroed). */
int mc_client_timer_pop_due(struct mc_master *m, uint64_t now, struct ctimer *t);
void mc_client_timers_free(struct mc_master *m);

/* ---- mount, unmount and client expiry (mount.c) ---- */
/* Removes every replica, discard entry and write extent on UNMOUNTING segments, then frees the given segments. */
void mc_sweep_and_free(struct mc_master *m, struct mseg **segs, uint32_t n);
/* Expires a client now: drops it from the OK set and the table, unmounts its segments, sweeps, has its TE
 * metadata keys deleted (the hook endpoint_expired; except keep_endpoint's). Takes seg_mu itself. Returns
 * segments unmounted. */
uint32_t mc_client_expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep_endpoint);
/* The same for a client whose timer came due, only if its deadline is still in the past (a ping may have raced). */
uint32_t mc_client_expire_if_due(struct mc_master *m, struct mc_uuid id, const char *why);
/* What a probe of a transfer engine (the hook probe) answers: MC_PROBE_ALIVE (answered), MC_PROBE_GONE
 * (connection refused three times: nothing listens there), MC_PROBE_SILENT (no address, timeout, reset: a
 * hung engine and a flooded one look alike). */
enum { MC_PROBE_GONE = -1, MC_PROBE_SILENT = 0, MC_PROBE_ALIVE = 1 };
#define MC_PROBE_RETRY_MS 2000 /* budget of an unanswered probe: outlasts one idle-connection reap (1 s) */

/* ---- liveness (liveness.c) ---- */
/* 1 when a mounted segment uses the transfer engine endpoint ep (seg_mu read inside). */
int mc_endpoint_in_use(struct mc_master *m, const char *ep);
void *mc_housekeeping_main(void *arg);

/* ---- eviction (evict.c) ---- */
void *mc_evict_main(void *arg);
/* One eviction run with used ratio `ratio` (tests call it through the thread only). */
uint64_t mc_evict_run(struct mc_master *m, double ratio);
/* Frees what eviction keeps between runs (teardown). */
void mc_evict_free(struct mc_master *m);

/* Sleeps up to ms on bg_cv; returns 1 when the master is stopping (core.c). */
int mc_bg_wait(struct mc_master *m, uint64_t ms);

/* ---- discard.c: space that must not be reused before a given time (discard_mu inside) ---- */
/* The client's holder-index feed for a FOLLOW_INDEX, opened on its first one (segments.c): a reference,
 * or NULL (no segment of the client, or one of another realm than tenant). */
struct mc_hidx *mc_client_follow(struct mc_master *m, struct mc_uuid client, const char *tenant);
/* A client's REPORT_SSD (proto.h): its disk tier's capacity, use and objects, kept until the next report or
 * until its last segment leaves. 0, or CLIENT_NOT_FOUND when it has no segment here or mounted them in another
 * realm than `tenant` (a tenant reports only for its own clients); INVALID_PARAMS when used > capacity. */
int mc_client_report_ssd(struct mc_master *m, struct mc_uuid client, const char *tenant, uint64_t cap, uint64_t used,
                         uint64_t objects);
/* The sums of the reports of the clients with a segment here (seg_mu read). */
void mc_ssd_usage(struct mc_master *m, uint64_t *used, uint64_t *cap);
/* The mounted segment with this id, or NULL (seg_mu held). */
struct mseg *mc_seg_find_locked(struct mc_master *m, struct mc_uuid id);
/* Returns the replica's space to its segment's allocator (caller holds the object's shard lock, or
 * discard_mu for discard entries). */
void mc_rep_release(struct mseg *seg, struct mc_tlsf_block *blk);
void mc_discard_push(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, uint64_t release_ns);
/* The same, and not before h acknowledged record seq (takes a reference on h; h NULL = no condition). */
void mc_discard_push_acked(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, uint64_t release_ns,
                           struct mc_hidx *h, uint64_t seq);
/* Frees every entry whose release time is <= now, and what holders have acknowledged. */
void mc_discard_release_due(struct mc_master *m, uint64_t now);
/* Frees the space waiting for h's acknowledgements that came (called right after a poll acknowledged). */
void mc_discard_release_acked(struct mc_master *m, struct mc_hidx *h);
/* Drops (without freeing: their allocator goes with them) the entries of segments being unmounted. */
void mc_discard_drop_unreadable(struct mc_master *m);
size_t mc_discard_count(struct mc_master *m);
/* At teardown (no other thread left). */
void mc_discard_free(struct mc_master *m);

#endif