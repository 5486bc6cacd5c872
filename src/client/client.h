/* Internals of the store client (libmooncake_store). Not a public header.
 *
 * One request, one path (docs/architecture.md, "The put and get walks"): api.c holds every public entry
 * point (argument rules, not-initialized values, the life lock) and calls the handle's back-end through
 * its table (struct mc_backend below). The local back-end (local.c: this process is the client) points
 * its verbs straight at put.c / get.c / session.c, which decide and run the protocol (put.c: through a
 * write extent or PutStart/PutEnd) -> master_rpc.c, every master RPC's encoding. The standalone layer
 * (src/standalone/) supplies the other back-end, the dummy client that forwards every verb to a real
 * client process. Below put.c and get.c, called and returning: transfer.c moves bytes (own-segment memcpy,
 * Transfer Engine batches, staging bounce), staging.c allocates staging space, write_extents.c write-extent
 * space, stats.c counts. setup.c builds and tears down a client, heartbeat.c runs its heartbeat thread,
 * live.c puts every handle in the process's registry of live handles (common/lifecycle.h: atexit,
 * signals), http.c serves its HTTP endpoints.
 *
 * Locks, outermost first; a lock is never taken while one listed after it is held:
 *   life        every API call holds it for reading for its whole duration, setup/teardown for writing
 *   extents mu  (write_extents.c) the current write extent; held across RESERVE_EXTENT
 *   stats.mu    serialises statistics reports; held across REPORT_CLIENT_STATS
 *   regs.mu, shun.mu, hb.mu, the staging allocator's mutex, the registry's list lock, the master RPC
 *   pool's own locks (inside every RPC): leaves, no other lock is taken while one of them is held
 * The heartbeat thread and the HTTP handlers never take life: teardown stops them (joining their
 * threads) while holding life for writing, before it frees anything they read. */
#ifndef MC_CLIENT_CLIENT_H
#define MC_CLIENT_CLIENT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/runtime.h"
#include "proto/proto.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"

struct mc_mrpc_client;
struct mc_stage;
struct MHD_Daemon;
struct mc_xfer;
struct mc_fastput;
struct fp_ext;
struct mc_exec;
struct mc_disk;

struct mc_region {
  uint64_t addr, len;
};

/* Transfer and lookup statistics (stats.c): totals bumped lock-free; `sent` (under mu) is what the
 * master has acknowledged. */
struct mc_cstats {
  _Atomic uint64_t lat[MC_LAT_NBUCKETS], lat_sum_us, bytes_read, bytes_written, hits, misses;
  pthread_mutex_t mu; /* guards sent and unsupported; held across the report RPC; takes no other lock */
  struct mc_client_stats sent;
  int unsupported; /* the master predates REPORT_CLIENT_STATS: stop sending */
};

/* A segment mounted at runtime besides the main one (extra_segments.c; docs/store-client.md, "Extra segments"). */
struct mc_xseg {
  struct mc_segment_rec rec; /* as mounted (strings owned); rec.id names it */
  char *base;
  uint64_t size;
  int file;              /* 1: a mapping of a file (munmap), 0: mc_te_alloc_shared memory */
  int mounted;           /* 0 once unmounted (or a graceful unmount was asked for) */
  uint64_t free_at_ms;   /* > 0: its memory goes at this time (unmount_and_free with a grace period) */
};

struct mc_store {
  /* writer-preferring; read-held by every API call, write-held by setup and teardown (outermost lock) */
  pthread_rwlock_t life;
  int ready;              /* guarded by life */
  struct mc_lifecycle lc; /* the process's registry of live handles (live.c), guarded by its own lock */

  /* ---- below: built by setup, torn down by teardown (life held for writing), valid while ready ---- */

  struct { /* who this client is */
    char name[300];    /* segment name "host:port" (get_hostname) */
    char te_name[300]; /* the engine's segment name (te_endpoint of our replicas) */
    char zone[128];
    char protocol[16];
    struct mc_uuid client_id;
    int port_fd; /* the held auto port, or -1 */
  } self;

  struct {
    transfer_engine_t te;
    int external; /* te belongs to the caller (mc_store_config.engine): teardown must not destroy it */
  } engine;

  struct { /* the line to the master and what the client knows of it; no lock (atomics, a thread-safe pool) */
    struct mcli *cli;            /* master_rpc.c */
    _Atomic uint64_t view;       /* the master incarnation (view_version) last seen; 0 unknown (get.c) */
    _Atomic uint64_t ok_ns;      /* send time of the last mount or ping answered OK (write_extents.c "Safety") */
    char addr[300];              /* as given to setup (for /health) */
    struct mc_leader *leader;    /* with an etcd:// address: the leader watch (leader.c), else NULL */
  } master;

  struct { /* our global segment and its mount */
    char *base;
    uint64_t size;
    struct mc_segment_rec rec; /* what we mounted (strings owned) */
    int mounted;
  } seg;

  struct { /* the staging buffer (staging.c); pool NULL when local_buffer_size == 0 */
    struct mc_stage *pool; /* has its own mutex (a leaf) */
    char *base;
    uint64_t size;
  } staging;

  struct { /* registered ranges (transfer.c), sorted by addr: staging, segment, user buffers */
    pthread_rwlock_t mu; /* guards v, n, cap; nested inside life, takes no other lock */
    struct mc_region *v;
    size_t n, cap;
  } regs;

  struct { /* peers a read failed from lately, tried after the other replicas of their rank (get.c) */
    pthread_mutex_t mu; /* guards slot[]; nested inside life, takes no other lock */
    _Atomic int any;    /* a read ever failed: before that, no lookup in slot[] */
    struct mc_shun {
      uint64_t ep_hash, until_ns;
    } slot[16];
  } shun;

  struct mc_cstats stats;

  struct { /* the local-disk tier (docs/disk-tier.md); d NULL without one. The report fields: heartbeat thread only */
    struct mc_disk *d;
    int unsupported;          /* the master predates REPORT_SSD: stop sending */
    int sent;                 /* the master has the numbers below (cleared by a remount) */
    uint64_t cap, used, objects; /* as last acknowledged */
    uint64_t next_ns;         /* no report before this */
  } ssd;

  struct { /* the heartbeat thread (heartbeat.c): pings, statistics reports, write-extent releases */
    pthread_t th;
    int running;
    pthread_mutex_t mu; /* guards stop and kick; never held across an RPC, takes no other lock */
    pthread_cond_t cv;  /* monotonic clock */
    int stop;
    int kick; /* work for the thread before its next tick (fastput releases) */
    int ping_now; /* and a ping (a new leader) */
    _Atomic int witness_ticks; /* the thread wakes every witness tick (witnesses pending): no kick needed */
  } hb;

  struct mc_fastput *fastput; /* write extents (write_extents.c); NULL: disabled (MC_STORE_PUT_EXTENTS=0) */
  struct mc_hindex *hindex;   /* this holder's index of its segment (holder_index.c); NULL without a segment */
  struct mc_exec *exec;       /* the task executor's thread (tasks.c); NULL when not running */
  struct mc_sessions *sessions; /* layer-wise put and get sessions (session.c); lives as long as the handle */
  struct { /* extra segments (extra_segments.c) */
    pthread_rwlock_t mu; /* guards v/n and the memory: own-segment copies read-hold it (transfer.c); a leaf */
    struct mc_xseg *v;
    size_t n, cap;
  } xsegs;

  struct { /* the client HTTP server (http.c); daemon NULL when disabled or not bound */
    struct MHD_Daemon *daemon;
    uint16_t port; /* bound port */
  } http;

  /* The back-end every entry point calls (guarded by life): &mc_local_backend once setup succeeded, the
   * standalone layer's dummy back-end after mc_store_setup_dummy, NULL while the handle is not set up.
   * be_ctx is the back-end's own state (the dummy's connection), NULL for the local one. */
  const struct mc_backend *be;
  void *be_ctx;
};

/* ---- the back-end table (api.c calls it; local.c and the standalone layer fill it) ----
 * Every verb runs with life held for reading and s->be set; the entry point has already applied the C
 * API's "-1 = bad call" checks (no NULL array, key or non-empty buffer). A verb applies the semantic
 * rules itself (an empty key is INVALID_PARAMS), so that a dummy and its real client answer alike.
 * nbufs NULL: one buffer per key; else key i is the next nbufs[i] buffers (bufs, sizes), in order.
 * flags: MC_WRITE_COPY, MC_WRITE_UPSERT. groups: NULL, or each key's key group (NULL or "" = none). */
struct mc_backend {
  const char *name; /* "local", "dummy" */
  void (*close)(struct mc_store *s); /* life held for writing; leaves s->be_ctx NULL */
  uint64_t (*warmup_pending)(struct mc_store *s);
  int (*health)(struct mc_store *s); /* 0 healthy, 2 the master (or the real client) unreachable */
  int (*hostname)(struct mc_store *s, char *buf, size_t len); /* 0, or -1 when buf is too small */
  /* writes */
  int (*write1)(struct mc_store *s, int flags, const char *key, const void *value, size_t size,
                const mc_replicate_config_t *cfg);
  void (*write)(struct mc_store *s, int flags, const char *const *keys, const void *const *bufs, const size_t *sizes,
                const size_t *nbufs, size_t count, const mc_replicate_config_t *cfg, const char *const *groups,
                int *results);
  /* reads: bytes read or a negative code */
  int64_t (*read1)(struct mc_store *s, const char *key, void *buf, size_t size);
  void (*read)(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
               const size_t *nbufs, size_t count, int64_t *results);
  int64_t (*read_copy)(struct mc_store *s, const char *key, void **out);
  int64_t (*size)(struct mc_store *s, const char *key);
  /* queries and removal */
  int (*exist)(struct mc_store *s, const char *key);
  void (*exist_batch)(struct mc_store *s, const char *const *keys, size_t count, int *results);
  int (*remove)(struct mc_store *s, const char *key, int force);
  void (*remove_batch)(struct mc_store *s, const char *const *keys, size_t count, int force, int *results);
  int64_t (*remove_regex)(struct mc_store *s, const char *pattern, int force);
  int64_t (*remove_all)(struct mc_store *s, int force);
  int (*replica_desc)(struct mc_store *s, const char *key, mc_replica_desc_t **out);
  /* the count cleared; cleared[] zeroed by the entry point */
  int (*replica_clear)(struct mc_store *s, const char *const *keys, size_t count, const char *segment, int *cleared);
  /* memory */
  int (*register_buffer)(struct mc_store *s, void *buf, size_t size);
  int (*unregister_buffer)(struct mc_store *s, void *buf);
  int (*is_registered)(struct mc_store *s, const void *p, size_t len);
  uint64_t (*pool_alloc)(struct mc_store *s, size_t size);
  int (*mount_extra)(struct mc_store *s, const char *path, uint64_t offset, uint64_t size, const char *location,
                     char *id_out, size_t id_len);
  int (*unmount_extra)(struct mc_store *s, const char *id, uint64_t grace_ms, int free_memory);
  /* copy and move tasks; *id zeroed by the entry point */
  int (*copy_task)(struct mc_store *s, const char *key, const char *const *targets, size_t n, mc_task_id_t *id);
  int (*move_task)(struct mc_store *s, const char *key, const char *src, const char *dst, mc_task_id_t *id);
  int (*query_task)(struct mc_store *s, mc_task_id_t id, mc_task_info_t *out);
  /* layer-wise sessions (docs/store-client.md, "Sessions") */
  void (*put_start)(struct mc_store *s, const char *const *keys, const size_t *sizes, size_t count,
                    const mc_replicate_config_t *cfg, const char *const *groups, int *results);
  void (*ranged)(struct mc_store *s, int put, const char *const *keys, void *const *bufs, const size_t *sizes,
                 const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results);
  void (*put_end)(struct mc_store *s, const char *const *keys, size_t count, int revoke, int *results);
  void (*get_start)(struct mc_store *s, const char *const *keys, size_t count, int *results);
  void (*get_end)(struct mc_store *s, const char *const *keys, size_t count);
};
/* This process is the client (local.c). */
extern const struct mc_backend mc_local_backend;

/* ---- session.c: sessions of an owner (life held for reading, the local back-end) ----
 * The owner is NULL for the handle's own callers, or a dummy the real client serves (src/standalone/). */
struct mc_sess_owner {
  size_t n, cap; /* sessions open (guarded by the session table's lock), and at most */
};
void mc_sess_put_start(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, const size_t *sizes,
                       size_t count, const mc_replicate_config_t *config, const char *const *group_ids,
                       int *results);
void mc_sess_ranged(struct mc_store *s, struct mc_sess_owner *o, int put, const char *const *keys,
                    void *const *bufs, const size_t *sizes, const size_t *offsets, const size_t *nbufs,
                    size_t count, int64_t *results);
void mc_sess_put_end(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count, int revoke,
                     int *results);
void mc_sess_get_start(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count,
                       int *results);
void mc_sess_get_end(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count);
/* Revokes the owner's put sessions and drops all of its sessions (none of its calls may be running; takes
 * the life lock itself). */
void mc_sess_drop_owner(struct mc_store *s, struct mc_sess_owner *o);

/* ---- the life lock around a call ---- */
/* Takes the life lock for a call; 1 with the lock held when the handle has a back-end, else 0 (unlocked). */
static inline int mc_api_enter(struct mc_store *s) {
  pthread_rwlock_rdlock(&s->life);
  if (s->be) return 1;
  pthread_rwlock_unlock(&s->life);
  return 0;
}
static inline void mc_api_leave(struct mc_store *s) { pthread_rwlock_unlock(&s->life); }
static inline void mc_fill_int(int *r, size_t n, int v) {
  for (size_t i = 0; i < n; i++) r[i] = v;
}
/* ---- extra_segments.c (docs/store-client.md, "Extra segments") ---- */
/* The local back-end's mount_extra / unmount_extra verbs. */
int mc_extra_segment_mount(struct mc_store *s, const char *path, uint64_t offset, uint64_t size, const char *location,
                           char *id_out, size_t id_len);
int mc_extra_segment_unmount(struct mc_store *s, const char *id, uint64_t grace_ms, int free_memory);
/* Teardown: unmounts the extra segments and frees their memory (before the engine goes). */
void mc_xsegs_teardown(struct mc_store *s);
/* Remounts the main segment and every extra segment still mounted at a master that forgot them (heartbeat
 * thread, on NEED_REMOUNT), then uploads each one's holder index (docs/store-client.md, "Extra segments"). */
void mc_segments_remount(struct mc_store *s, int tmo_ms);
int mcli_graceful_unmount(struct mcli *c, struct mc_uuid seg, struct mc_uuid id, uint64_t grace_ms, int tmo);
/* ---- session.c ---- */
void mc_sessions_init(struct mc_store *s);
void mc_sessions_free(struct mc_store *s);
/* Teardown: revokes the open put sessions (best effort) and drops every session. */
void mc_sessions_teardown(struct mc_store *s);

/* ---- setup.c ---- */
struct mc_store *mc_store_alloc(void);
/* Frees a handle that is not set up (its locks included). */
void mc_store_free(struct mc_store *s);
/* Full setup (life held for writing by the caller). 0 or a negative ErrorCode. */
int mc_store_do_setup(struct mc_store *s, const mc_store_config_t *cfg);
/* Teardown (life held for writing); idempotent. */
void mc_store_do_teardown(struct mc_store *s);
/* Closes the handle's back-end, whichever it is, and leaves it without one (life held for writing). */
void mc_store_close_backend(struct mc_store *s);
/* The same, taking life for writing: close, destroy, exit. */
void mc_store_drop_backend(struct mc_store *s);

/* ---- heartbeat.c: the heartbeat thread (pings with a segment, statistics reports, extent releases) ---- */
void mc_heartbeat_init(struct mc_store *s);    /* its mutex and condition variable (at alloc) */
void mc_heartbeat_destroy(struct mc_store *s); /* their counterpart (at free) */
void mc_heartbeat_start(struct mc_store *s);   /* at the end of setup; a thread that cannot start is logged */
void mc_heartbeat_stop(struct mc_store *s);    /* joins the thread; no-op when not running */
/* Has the thread run its duties now instead of at its next tick. */
void mc_heartbeat_kick(struct mc_store *s);
/* The same, and ping now (a new leader: its answer NEED_REMOUNT starts the remount). */
void mc_heartbeat_ping_now(struct mc_store *s);

/* ---- tasks.c: this client as the executor of copy and move tasks (docs/store-client.md, "Tasks") ---- */
/* Starts the thread that fetches the tasks of our segment and moves their bytes (a client with a
 * segment, after the mount); mc_tasks_stop joins it (teardown, before the master line goes). */
void mc_tasks_start(struct mc_store *s);
void mc_tasks_stop(struct mc_store *s);

/* ---- leader.c: following the master leader through etcd (docs/ha.md, "Election and failover") ---- */
struct mc_leader;
/* Whether a master address names the leader key in etcd ("etcd://h:p;h:p"). */
int mc_leader_is_ha(const char *addr);
/* Reads the leader of conn ("etcd://...") into addr ("host:port"). 0, UNAVAILABLE_IN_CURRENT_STATUS (no
 * leader), ETCD_OPERATION_ERROR or INVALID_PARAMS (logged). s->master.leader is set either way. */
int mc_leader_open(struct mc_store *s, const char *conn, char *addr, size_t len);
/* Starts the watch thread (after setup); a no-op without a leader key. */
void mc_leader_start(struct mc_store *s);
/* Reads the key again and follows a new leader (after failed pings). 0 or the error of mc_leader_open. */
int mc_leader_reread(struct mc_store *s);
void mc_leader_close(struct mc_store *s); /* joins the thread, frees (NULL leader ignored) */

/* ---- holder_index.c: the holder's index of its segment (docs/ha.md, "Holder indexes") ---- */
struct mc_hindex;
/* Starts following the master's records for our segment (after the mount); a thread that cannot start is
 * logged. mc_hindex_stop joins it and frees the index (teardown, before the master line goes). */
void mc_hindex_start(struct mc_store *s);
void mc_hindex_stop(struct mc_store *s);
/* Sends the index of segment seg to the master after its remount (heartbeat thread), so that a master that
 * lost its state gets our objects back (docs/ha.md, "Rebuild"). */
void mc_hindex_upload(struct mc_store *s, struct mc_uuid seg);
/* Extra segments (extra_segments.c): records of seg are taken in from before its mount on (no index: nothing); a
 * segment unmounted is forgotten, its entries with it. */
void mc_hindex_follow_segment(struct mc_store *s, struct mc_uuid seg);
void mc_hindex_forget_segment(struct mc_store *s, struct mc_uuid seg);
/* Entries in the index (tests, /health). */
size_t mc_hindex_count(struct mc_store *s);

/* ---- witness.c: the witnesses of completed puts (docs/ha.md, "Witnesses") ---- */
struct mc_witnesses;
struct mc_witnesses *mc_witness_new(void);
void mc_witness_free(struct mc_witnesses *w); /* NULL ignored */
/* Takes in the witness block at r (proto.h), if the reply has one. */
void mc_witness_take(struct mc_witnesses *w, struct mc_rbuf_rd *r);
/* Asks about pending witnesses (one RECOMMIT per issuing master): the heartbeat thread, every
 * mc_witness_tick_ns() while mc_witness_pending, and at once when a new leader is followed. */
void mc_witness_tick(struct mcli *c, struct mc_uuid id, int force);
/* fn(arg) runs when witnesses appear in an empty set (to wake the heartbeat thread from a long sleep). */
void mc_witness_on_pending(struct mc_witnesses *w, void (*fn)(void *arg), void *arg);
int mc_witness_pending(struct mc_witnesses *w);
uint64_t mc_witness_tick_ns(void);
size_t mc_witness_count(struct mc_witnesses *w);    /* tests */
uint64_t mc_witness_given_up(struct mc_witnesses *w); /* tests */

/* ---- write_extents.c: write-extent space (docs/store-client.md, "Write extents") ---- */
void mc_fastput_init(struct mc_store *s);
/* Releases the current extent and frees the state (teardown, no put in flight). */
void mc_fastput_free(struct mc_store *s);
/* Stops carving from the current extent; dead = the master already dropped it (no release sent). */
void mc_fastput_retire(struct mc_store *s, int dead);
/* Sends the releases the put path left for the heartbeat thread (write_extents.c, "Releases"). */
void mc_fastput_flush(struct mc_store *s);
#define MC_FASTPUT_ALIGN 8ull /* carved ranges start 8-byte aligned */
/* A range carved from a write extent for one put; holds a reference to the extent until settled. */
struct mc_carve {
  struct fp_ext *ext;   /* NULL: not carved */
  uint64_t extent_id;   /* for the commit */
  uint64_t off;         /* offset in the extent (COMMIT_PUT's) */
  const char *endpoint; /* where to write: engine segment name and absolute address */
  uint64_t remote;
};
/* Carves len bytes for a put with cfg (reserving an extent when there is none): 0 with *c set, or 1 when
 * there is no range to be had (no extent, not writable now, too large, another preferred segment). */
int mc_fastput_carve(struct mc_store *s, uint64_t len, const struct mc_put_config *cfg, struct mc_carve *c);
/* Carves lens[i] bytes for each i with lens[i] > 0, in order, under one lock (c[i].ext NULL for the keys
 * not carved). Carves nothing after mc_fastput_no_batch_commit. Returns the number carved. */
size_t mc_fastput_carve_batch(struct mc_store *s, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                              struct mc_carve *c);
/* After the write (and the commit sent at `sent`, ns) of a carved range ended with rc: renews, retires or
 * drops the extent as rc says (write_extents.c, "Safety"), and the range's reference. */
void mc_fastput_settle(struct mc_store *s, const struct mc_carve *c, int rc, uint64_t sent);
/* The master does not know BATCH_COMMIT_PUT: batches of this client stop trying extents. */
void mc_fastput_no_batch_commit(struct mc_store *s);
/* The rule for starting a write into an extent at `now` (write_extents.c, "Safety"; all in ns): deadline_ns is
 * the time the reserve or last commit was sent + lease_ns; ttl_ns 0 for a lease-only extent; ping_ok_ns
 * the time the last OK ping was sent (0: none). Pure: exported for the unit tests. */
int mc_fastput_may_start(uint64_t now, uint64_t deadline_ns, uint64_t lease_ns, uint64_t ttl_ns, uint64_t margin_ns,
                         uint64_t ping_ok_ns);

/* ---- registered ranges (transfer.c) ---- */
int mc_regs_add(struct mc_store *s, uint64_t addr, uint64_t len);
int mc_regs_remove(struct mc_store *s, uint64_t addr, uint64_t *len_out);
/* 1 when [p, p+len) lies inside one registered range. */
int mc_regs_covers(struct mc_store *s, const void *p, uint64_t len);

/* ---- stats.c ---- */
void mc_stats_xfers(struct mc_store *s, const struct mc_xfer *x, size_t n);
void mc_stats_lookup(struct mc_store *s, int found);
/* A replica-list lookup's status: 0 is a hit, "absent"/"not readable yet" a miss, other errors neither. */
void mc_stats_replica_lookup(struct mc_store *s, int status);
/* Sends what is new since the last acknowledged report (nothing when there is nothing). 0 or an error. */
int mc_stats_report(struct mc_store *s, int tmo_ms);
int mc_stats_interval_ms(void);

/* ---- http.c: the client HTTP server (/health, /metrics, /metrics/summary) ---- */
/* Starts it on port (0 = 9300), every IPv4 address; 0, or -1 (logged as a warning) when it cannot bind. */
int mc_http_start(struct mc_store *s, int port);
/* Stops it (joins its threads); no-op when not running. */
void mc_http_stop(struct mc_store *s);

/* ---- live.c: the store's part of the process lifecycle (common/lifecycle.h) ---- */
void mc_live_add(struct mc_store *s);
/* First thing in destroy: waits for a teardown of s by exit or a signal in progress. */
void mc_live_remove(struct mc_store *s);

/* ---- staging.c: first-fit allocator over the staging buffer, thread-safe ---- */
struct mc_stage *mc_stage_new(char *base, uint64_t size);
void mc_stage_free(struct mc_stage *st);
/* Space for n bytes (64-byte aligned), waiting up to wait_ms for others to release (0 = try once).
 * NULL when n is 0, larger than the buffer, or the wait ran out. */
char *mc_stage_alloc(struct mc_stage *st, uint64_t n, int wait_ms);
void mc_stage_release(struct mc_stage *st, char *p, uint64_t n);
uint64_t mc_stage_capacity(const struct mc_stage *st);
/* One contiguous area per key of a multi-buffer batch: the key's single buffer itself, or space in the
 * staging buffer (registered, so transfers need no bounce) or on the heap. */
struct mc_area {
  char *p;
  uint64_t len;
  int kind; /* 0 caller's buffer, 1 staging, 2 heap, -1 none (allocation failed or total 0) */
};
/* The areas of a batch: a[i] for key i (its buffers start at first[i]), and p[]/len[] laid out for the
 * one-buffer batch calls (p[i] = a[i].p, len[i] = a[i].len as opened). */
struct mc_multi {
  struct mc_area *a;
  size_t *first;
  void **p;
  size_t *len;
};
void mc_multi_open(struct mc_store *s, struct mc_multi *m, const void *const *bufs, const size_t *sizes,
                   const size_t *nbufs, size_t count);
void mc_multi_close(struct mc_store *s, struct mc_multi *m, size_t count);
/* Copies between a key's buffer list and its area (gather: list -> area), up to len bytes. */
void mc_area_copy(struct mc_area *a, void *const *bufs, const size_t *sizes, size_t nbufs, uint64_t len, int gather);

/* ---- transfer.c ---- */
struct mc_xfer {
  int opcode;           /* OPCODE_READ (remote -> local) or OPCODE_WRITE (local -> remote) */
  void *local;          /* any memory; unregistered memory is bounced through staging */
  const char *endpoint; /* transfer-engine segment name of the remote side */
  uint64_t remote, len; /* absolute address in the remote process, byte count */
  /* out */
  int rc;               /* 0, TRANSFER_FAIL, or INVALID_PARAMS (unregistered and no staging) */
  const char *path;     /* "local", "shm", "tcp" (static strings) */
  uint64_t dur_us;
};
/* Performs every item: own-segment ones by memcpy (bounds-checked), the rest in one TE batch.
 * Items fail independently. refresh != 0 re-reads the descriptors of the remote segments first. */
void mc_xfer_run(struct mc_store *s, struct mc_xfer *x, size_t n, int refresh);
/* mc_xfer_run with cached descriptors, then the failed items once more after re-reading their
 * descriptors: a peer that restarted under the same name has a new data port. For writes (an object
 * is invisible until PutEnd, and rewriting the same bytes is idempotent); reads fail over to another
 * replica first instead. */
void mc_xfer_run_retry(struct mc_store *s, struct mc_xfer *x, size_t n);

/* ---- master_rpc.c: master RPCs (status in the frame; the codes below are store ErrorCodes) ---- */
struct mcli_reps {
  int status;
  uint32_t n;
  struct mc_replica_rec *reps;
};
/* The store's line to its master: the RPC client and the key namespace every object key is sent under
 * ("<tenant>\x1f", empty for the default tenant; docs/security.md, "Tenants"). */
struct mcli {
  struct mc_mrpc_client *rpc;
  char key_ns[136];
  struct mc_witnesses *wit; /* the witnesses of this client's completed puts (witness.c) */
};
/* One call of op (tmo ms, 0 = the line's default). The reply status; the body in *reply (caller frees). */
int mcli_call(struct mcli *c, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply, int tmo);
struct mcli *mcli_new(const char *host, uint16_t port, int connect_timeout_ms, int timeout_ms);
void mcli_set_key_ns(struct mcli *c, const char *tenant); /* "" or "default": none */
void mcli_free(struct mcli *c);
void mcli_reps_free(struct mcli_reps *r, size_t n);
int mcli_service_ready(struct mcli *c, int tmo, char **version, uint64_t *view);
int mcli_ping(struct mcli *c, struct mc_uuid id, int tmo, int *status, uint64_t *view);
int mcli_mount(struct mcli *c, const struct mc_segment_rec *seg, struct mc_uuid id, int tmo);
/* FOLLOW_INDEX (proto.h): the raw answer in *reply (u64 durable_seq, u8 flags, records; master_core/holder_feed.h). */
int mcli_follow_index(struct mcli *c, struct mc_uuid id, uint64_t acked, uint32_t wait_ms, int tmo,
                      struct mc_wbuf *reply);
struct mcli_index_entry {
  const char *key; /* as the master's records carry it (the key namespace included) */
  uint32_t klen;
  uint64_t offset, length, size, soft_pin_ttl_ms;
  uint8_t hard_pin;
  const char *group; /* its key group, glen bytes (0: none) */
  uint32_t glen;
};
/* REMOUNT_INDEX (proto.h): one batch of this holder's index of segment seg, after a remount; applied: the
 * newest record the index took in; last: the final batch. */
int mcli_remount_index(struct mcli *c, struct mc_uuid id, struct mc_uuid seg, const struct mcli_index_entry *e,
                       uint32_t n, uint64_t applied, int last, int tmo);
int mcli_remount(struct mcli *c, const struct mc_segment_rec *segs, uint32_t n, struct mc_uuid id,
                 int tmo);
int mcli_unmount(struct mcli *c, struct mc_uuid seg, struct mc_uuid id, int tmo);
/* The opcodes of one write protocol: put (docs/master.md, "Put") or upsert ("Upsert"). Both follow the same
 * client contract (put.c); only the master's treatment of an existing key differs. */
struct mc_write_ops {
  uint16_t start, end, revoke, batch_start, batch_end, batch_revoke;
  const char *name; /* "put" / "upsert", for logs */
};
extern const struct mc_write_ops mc_put_ops, mc_upsert_ops;
int mcli_put_start(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id, const char *key,
                   uint64_t len, const struct mc_put_config *cfg, struct mcli_reps *out);
int mcli_put_end(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id, const char *key,
                 int revoke);
/* Per key status + replicas in out[0..n). Returns 0 or the RPC-level error (out untouched then). */
int mcli_batch_put_start(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id,
                         const char *const *keys, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                         struct mcli_reps *out);
int mcli_batch_put_end(struct mcli *c, const struct mc_write_ops *ops, struct mc_uuid id,
                       const char *const *keys, size_t n, int revoke, int *results);
int mcli_get_replicas(struct mcli *c, const char *key, uint64_t *lease_ttl_ms, struct mcli_reps *out);
int mcli_batch_get_replicas(struct mcli *c, const char *const *keys, size_t n, uint64_t *lease_ttl_ms,
                            struct mcli_reps *out);
int mcli_exist(struct mcli *c, const char *key);
int mcli_batch_exist(struct mcli *c, const char *const *keys, size_t n, int *results);
int mcli_remove(struct mcli *c, const char *key, int force);
int mcli_batch_remove(struct mcli *c, const char *const *keys, size_t n, int force, int *results);
/* BATCH_REPLICA_CLEAR: cleared[i] = 1 for the keys the master cleared, else 0. 0 or the RPC error. */
int mcli_batch_replica_clear(struct mcli *c, struct mc_uuid id, const char *const *keys, size_t n,
                             const char *segment, uint8_t *cleared);
int64_t mcli_remove_by_regex(struct mcli *c, const char *re, int force);
int64_t mcli_remove_all(struct mcli *c, int force);
/* Write extents (docs/master.md, "Write extents"). A grant of RESERVE_EXTENT (strings owned by the caller). */
struct mcli_extent {
  uint64_t id, addr, len, lease_ms, ttl_ms; /* ttl_ms 0: a lease-only extent */
  char *endpoint, *seg_name;
};
int mcli_reserve_extent(struct mcli *c, struct mc_uuid id, uint64_t min_len, uint64_t hint,
                        const struct mc_put_config *cfg, int tmo, struct mcli_extent *out);
int mcli_commit_put(struct mcli *c, struct mc_uuid id, uint64_t extent, const char *key, uint64_t off,
                    uint64_t len, const struct mc_put_config *cfg);
/* BATCH_COMMIT_PUT of n keys carved from one extent: st[i] per key (the call's error for every key when it
 * failed). */
void mcli_batch_commit_put(struct mcli *c, struct mc_uuid id, uint64_t extent, const char *const *keys,
                           const uint64_t *offs, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                           int *st);
int mcli_release_extent(struct mcli *c, struct mc_uuid id, uint64_t extent, int tmo);
/* REPORT_SSD (proto.h): the local-disk tier's capacity, use and objects. */
int mcli_report_ssd(struct mcli *c, struct mc_uuid id, uint64_t cap, uint64_t used, uint64_t objects, int tmo);
/* The heartbeat thread's report of the local-disk tier (setup.c): when the numbers changed since the master last
 * took them (or it lost them in a remount), at most every MC_SSD_REPORT_MS. */
void mc_ssd_report(struct mc_store *s, int tmo_ms);
#define MC_SSD_REPORT_MS 2000

/* REPORT_CLIENT_STATS (docs/admin.md, "Client reports"). */
int mcli_report_stats(struct mcli *c, const struct mc_client_stats *d, int tmo);

/* Copy and move tasks (proto.h; docs/master.md, "Copy and move tasks"). The id is (0, 0) on failure. */
int mcli_create_copy_task(struct mcli *c, const char *key, const char *const *targets, uint32_t n, struct mc_uuid *id);
int mcli_create_move_task(struct mcli *c, const char *key, const char *src, const char *dst, struct mc_uuid *id);
struct mcli_task_info {
  struct mc_uuid id;
  int type, status;
  uint64_t created_ms, updated_ms;
  char *client, *message; /* owned (mcli_task_info_free) */
};
int mcli_query_task(struct mcli *c, struct mc_uuid id, struct mcli_task_info *out);
void mcli_task_info_free(struct mcli_task_info *t);
/* FETCH_TASKS: the raw answer in *reply (tasks.c decodes it). */
int mcli_fetch_tasks(struct mcli *c, struct mc_uuid id, uint32_t max, int tmo, struct mc_wbuf *reply);
int mcli_mark_task(struct mcli *c, struct mc_uuid id, struct mc_uuid task, int status, const char *msg, int tmo);

/* ---- put.c / get.c: the local back-end's writes and reads (life held for reading) ---- */
/* One write (flags: MC_WRITE_COPY, MC_WRITE_UPSERT; cfg NULL = defaults), the put contract. 0 or an error. */
int mc_write(struct mc_store *s, int flags, const char *key, const void *value, size_t size,
             const mc_replicate_config_t *cfg);
/* A batch of writes (flags as mc_write), one result per key; nbufs as struct mc_backend. groups: NULL, or
 * each key's key group (NULL or "" = none; docs/master.md, "Key groups"). */
void mc_write_batch(struct mc_store *s, int flags, const char *const *keys, const void *const *bufs,
                    const size_t *sizes, const size_t *nbufs, size_t n, const mc_replicate_config_t *cfg,
                    const char *const *groups, int *results);
/* The master-protocol config of a write in key group `group` (NULL or "": none); free with
 * mc_put_config_free, also after an error (-600 for an invalid config). */
int mc_write_config(struct mc_store *s, const mc_replicate_config_t *in, const char *group, struct mc_put_config *out);
/* 0..n-1 ordered by groups[i] (NULL array or entry = ""), request order within a group (mc_free). */
size_t *mc_group_order(const char *const *groups, size_t n);
const char *mc_group_of(const char *const *groups, size_t i);
int64_t mc_get_into(struct mc_store *s, const char *key, void *buf, size_t size);
void mc_get_batch(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                  const size_t *nbufs, size_t n, int64_t *results);
int64_t mc_get_copy(struct mc_store *s, const char *key, void **out);
int64_t mc_get_size(struct mc_store *s, const char *key);

#endif
