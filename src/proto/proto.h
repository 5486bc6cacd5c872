/* The client <-> master protocol: opcodes and the encodings of the shared records. Carried by
 * net/mrpc.c frames (versioned); bodies use net/codec.h. Every decoder is total (sticky error).
 *
 * Request and reply bodies (status travels in the frame header; replies below are for status 0 unless
 * noted; "ids" = u64 hi, u64 lo; "str" = u32 length + bytes; lists = u32 count + elements):
 *   SERVICE_READY      -> str version, u64 view_version (this master's incarnation; new at every start)
 *   PING               client id -> u64 view_version, u8 status (0 OK, 1 NEED_REMOUNT)
 *   MOUNT_SEGMENT      segment, client id -> -
 *   REMOUNT_SEGMENTS   list<segment>, client id -> -
 *   UNMOUNT_SEGMENT    segment id, client id -> -
 *   GRACEFUL_UNMOUNT   segment id, client id, u64 grace_ms -> -
 *   PUT_START          client id, str key, u64 length, config -> list<replica>
 *   PUT_END/REVOKE     client id, str key, u8 replica_type -> -
 *   BATCH_PUT_START    client id, list<{str key, u64 length}>, config -> list<{i32 status, list<replica>}>
 *   BATCH_PUT_END/REVOKE client id, list<str key>, u8 replica_type -> list<i32 status>
 *   UPSERT_START, UPSERT_END/REVOKE, BATCH_UPSERT_START, BATCH_UPSERT_END/REVOKE: bodies and replies
 *                      exactly as the PUT forms above (docs/master.md, "Upsert"; insert or replace, never
 *                      OBJECT_ALREADY_EXISTS). Opcodes 16-19, 25, 26.
 *   GET_REPLICA_LIST   str key -> u64 lease_ttl_ms, list<replica>
 *   BATCH_GET_REPLICA_LIST list<str key> -> u64 lease_ttl_ms, list<{i32 status, list<replica>}>
 *   EXIST_KEY          str key -> u8 exists
 *   BATCH_EXIST_KEY    list<str key> -> list<i32 (1 exists, 0 absent, <0 error)>
 *   GET_REPLICA_LIST_BY_REGEX str regex -> list<{str key, list<replica>}>
 *   REMOVE             str key, u8 force -> witness block (of its DROP records)
 *   BATCH_REMOVE       list<str key>, u8 force -> list<i32 status>, witness block
 *   REMOVE_BY_REGEX    str regex, u8 force -> i64 count, witness block
 *   REMOVE_ALL         u8 force -> i64 count, witness block
 *   QUERY_SEGMENTS     -> list<{segment, str client id text, u8 state, u64 used}>
 *   PROBE_CLIENT       (master -> nothing; reserved)
 *   REPORT_CLIENT_STATS client stats (below) -> -   (any client, with or without segments; never a ping)
 *   REPORT_SSD         client id, u64 capacity, u64 used, u64 objects -> -   (a client's local-disk tier,
 *                      docs/disk-tier.md: the body is exactly these 40 bytes; used <= capacity; only a client with
 *                      a segment here, of the caller's realm, else CLIENT_NOT_FOUND)
 *   BATCH_REPLICA_CLEAR client id, list<str key>, str segment_name -> list<str cleared key> (in request
 *                      order; only objects the client wrote, complete and unleased; "" = every replica)
 *   RESERVE_EXTENT     client id, u64 min_len, u64 len_hint, config -> u64 extent id, replica (the extent:
 *                      address, size), u64 lease_ms, u64 client_ttl_ms, u64 view_version
 *   COMMIT_PUT         client id, u64 extent id, str key, u64 offset (from the extent's start, 8-aligned),
 *                      u64 length, u8 soft_pin_action, i64 soft_pin_ttl_ms, u8 with_hard_pin -> -
 *                      (OBJECT_ALREADY_EXISTS: key exists, value kept; LEASE_EXPIRED: extent reclaimed)
 *   RELEASE_EXTENT     client id, u64 extent id -> -
 *   BATCH_COMMIT_PUT   client id, u64 extent id, u8 soft_pin_action, i64 soft_pin_ttl_ms, u8 with_hard_pin,
 *                      list<{str key, u64 offset, u64 length}> -> list<i32 status> (each as COMMIT_PUT's
 *                      answer, in request order)
 *   FOLLOW_INDEX       client id, u64 acked_seq, u32 max_wait_ms -> u64 durable_seq, u8 flags (1 = resync),
 *                      list<index record> (master_core/holder_feed.h; docs/ha.md, "Holder indexes"): a long poll of a holder
 *                      for the records of its segments, answered when some come or after max_wait_ms (at
 *                      most 1 s); acknowledges every record up to acked_seq. CLIENT_NOT_FOUND: no segment of
 *                      that client here (or one of another realm)
 *   REMOUNT_INDEX      client id, segment id, list<{str key, u64 offset, u64 length, u64 size, u8 hard_pin,
 *                      u64 soft_pin_ttl_ms}>, then u64 applied_seq, u8 last -> list<i32 status>: a holder's
 *                      index of a segment it remounted, after a master restart or failover, in batches (last = 1
 *                      on the final one; applied_seq: the newest record the index has taken in, from any
 *                      master); each entry becomes its complete object again (master/master.h,
 *                      mc_master_rebuild_index; docs/ha.md, "Rebuild"). Without the two trailing fields: 0, 1.
 *                      Then (optional) list<{u32 entry index, str group}>: the key groups of the entries that
 *                      have one (each entry at most once; docs/master.md, "Key groups")
 *   witness block      what PUT_END, UPSERT_END, COMMIT_PUT, REMOVE (after nothing) and BATCH_PUT_END,
 *                      BATCH_UPSERT_END, BATCH_COMMIT_PUT, BATCH_REMOVE (after their statuses), REMOVE_BY_REGEX,
 *                      REMOVE_ALL (after their count) also answer: u64 view_version, u64 durable_seq, u32 count,
 *                      index records (master_core/holder_feed.h; PUT for what the request completed, DROP, with the
 *                      replica's offset, length and size, for what it removed or replaced; at most 65 536) — the
 *                      caller keeps them until durable_seq reaches them (docs/ha.md, "Witnesses"). A master
 *                      that predates them sends nothing: a reader stops at the end of the body
 *   RECOMMIT           client id, u64 view_version (of the master that issued them), list<index record> ->
 *                      list<i32 status> (master/master.h, mc_master_recommit and mc_master_recommit_drop),
 *                      witness block (of the records it issued for what it installed or removed)
 * Segment records carry zone and host_id (docs/master.md, "Segments") and the owner's control-RPC address, which the
 * master probes when a client re-mounts under a name still held by an older incarnation (docs/master.md, "Segment ownership"). */
#ifndef MC_MASTER_PROTO_H
#define MC_MASTER_PROTO_H
#include <stdint.h>

#include "common/version.h" /* MC_STORE_VERSION */
#include "mooncake/store.h"
#include "net/codec.h"

/* Every opcode, once: X(NAME, code, metric, batch, handler). MC_OP_<NAME> = code; the master's
 * dispatcher (master/rpc.c) calls `handler`; its metrics (master/metrics.c) count the opcode as
 * master_[batch_]<metric>_* (batch 1: per-item counters too). The UPSERT_END/REVOKE forms share the PUT
 * handlers; the write-extent opcodes (master_core/write_extents.h) are one-round-trip puts. */
#define MC_MASTER_OPS(X)                                                                          \
  X(SERVICE_READY, 1, service_ready, 0, op_service_ready)                                         \
  X(PING, 2, ping, 0, op_ping)                                                                    \
  X(MOUNT_SEGMENT, 3, mount_segment, 0, op_mount)                                                 \
  X(REMOUNT_SEGMENTS, 4, remount_segment, 0, op_remount)                                          \
  X(UNMOUNT_SEGMENT, 5, unmount_segment, 0, op_unmount)                                           \
  X(GRACEFUL_UNMOUNT, 6, graceful_unmount_segment, 0, op_graceful_unmount)                        \
  X(PUT_START, 10, put_start, 0, op_put_start)                                                    \
  X(PUT_END, 11, put_end, 0, op_put_end)                                                          \
  X(PUT_REVOKE, 12, put_revoke, 0, op_put_revoke)                                                 \
  X(BATCH_PUT_START, 13, put_start, 1, op_batch_put_start)                                        \
  X(BATCH_PUT_END, 14, put_end, 1, op_batch_put_end)                                              \
  X(BATCH_PUT_REVOKE, 15, put_revoke, 1, op_batch_put_revoke)                                     \
  X(UPSERT_START, 16, upsert_start, 0, op_upsert_start)                                           \
  X(UPSERT_END, 17, upsert_end, 0, op_put_end)                                                    \
  X(UPSERT_REVOKE, 18, upsert_revoke, 0, op_put_revoke)                                           \
  X(BATCH_UPSERT_START, 19, upsert_start, 1, op_batch_upsert_start)                               \
  X(GET_REPLICA_LIST, 20, get_replica_list, 0, op_get_replicas)                                   \
  X(BATCH_GET_REPLICA_LIST, 21, get_replica_list, 1, op_batch_get_replicas)                       \
  X(EXIST_KEY, 22, exist_key, 0, op_exist)                                                        \
  X(BATCH_EXIST_KEY, 23, exist_key, 1, op_batch_exist)                                            \
  X(GET_REPLICA_LIST_BY_REGEX, 24, get_replica_list_by_regex, 0, op_replicas_by_regex)            \
  X(BATCH_UPSERT_END, 25, upsert_end, 1, op_batch_upsert_end)                                     \
  X(BATCH_UPSERT_REVOKE, 26, upsert_revoke, 1, op_batch_upsert_revoke)                            \
  X(REMOVE, 30, remove, 0, op_remove)                                                             \
  X(BATCH_REMOVE, 31, remove, 1, op_batch_remove)                                                 \
  X(REMOVE_BY_REGEX, 32, remove_by_regex, 0, op_remove_by_regex)                                  \
  X(REMOVE_ALL, 33, remove_all, 0, op_remove_all)                                                 \
  X(QUERY_SEGMENTS, 40, query_segments, 0, op_query_segments)                                     \
  X(REPORT_CLIENT_STATS, 50, report_client_stats, 0, op_report_stats)                             \
  X(BATCH_REPLICA_CLEAR, 51, replica_clear, 1, op_batch_replica_clear)                            \
  X(REPORT_SSD, 52, report_ssd, 0, op_report_ssd)                                                 \
  X(RESERVE_EXTENT, 60, reserve_extent, 0, mc_op_reserve_extent)                                  \
  X(COMMIT_PUT, 61, commit_put, 0, mc_op_commit_put)                                              \
  X(RELEASE_EXTENT, 62, release_extent, 0, mc_op_release_extent)                                  \
  X(BATCH_COMMIT_PUT, 63, commit_put, 1, mc_op_batch_commit_put)                                 \
  X(FOLLOW_INDEX, 70, follow_index, 0, op_follow_index)                                           \
  X(REMOUNT_INDEX, 71, remount_index, 1, op_remount_index)                                        \
  X(RECOMMIT, 72, recommit, 1, op_recommit)                                                      \
  X(CREATE_COPY_TASK, 80, create_copy_task, 0, op_create_copy_task)                               \
  X(CREATE_MOVE_TASK, 81, create_move_task, 0, op_create_move_task)                               \
  X(QUERY_TASK, 82, query_task, 0, op_query_task)                                                 \
  X(FETCH_TASKS, 83, fetch_tasks, 0, op_fetch_tasks)                                              \
  X(MARK_TASK_COMPLETE, 84, update_task, 0, op_mark_task)

#define MC_OP_ENUM_(name, code, metric, batch, handler) MC_OP_##name = code,
enum mc_master_op { MC_MASTER_OPS(MC_OP_ENUM_) };
#undef MC_OP_ENUM_
/* The kind of a holder-index record (FOLLOW_INDEX answers; layout in master_core/holder_feed.h). */
enum mc_hidx_kind { MC_HIDX_PUT = 1, MC_HIDX_DROP = 2 };
/* Or'ed into a PUT record's kind: a str group follows the record's fixed fields (master_core/holder_feed.h). */
#define MC_HIDX_GROUPED 0x80
/* A RECOMMIT status besides the ErrorCodes: nothing to do (the issuing master itself, or a holder's index
 * upload, settled the witness). */
#define MC_RECOMMIT_KNOWN 1
#define MC_OP_MAX 84 /* the highest opcode: tables indexed by opcode have MC_OP_MAX + 1 entries */


/* A writer starts a write into an extent only within this long of its last successful contact with
 * the master that granted it (OK ping, reserve or commit); the master keeps re-mounted segments free
 * of new allocations for longer (MC_REMOUNT_QUIET_NS), so a late write from before a master restart
 * cannot land in space the new master handed out. */
#define MC_FASTPUT_CONTACT_NS (500ull * 1000000ull) /* short: the quiet period it sets bounds a failover's first put */


struct mc_uuid {
  uint64_t hi, lo;
};

enum mc_seg_state { MC_SEG_OK = 1, MC_SEG_DRAINING, MC_SEG_DRAINED, MC_SEG_GRACEFULLY_UNMOUNTING, MC_SEG_UNMOUNTING };
enum mc_replica_type { MC_REPLICA_MEMORY = 0, MC_REPLICA_DISK = 1, MC_REPLICA_LOCAL_DISK = 2, MC_REPLICA_ALL = 4 };
/* soft_pin_action on the wire: the public enum mc_soft_pin (mooncake/store.h) — its values are the protocol's */
enum mc_ping_status { MC_PING_OK = 0, MC_PING_NEED_REMOUNT = 1 };
/* Copy/move tasks (docs/master.md, "Copy and move tasks"): the values are the Python TaskType/TaskStatus. */
enum mc_task_type { MC_TASK_COPY = 0, MC_TASK_MOVE = 1 };
enum mc_task_status { MC_TASK_PENDING = 0, MC_TASK_PROCESSING = 1, MC_TASK_FAILED = 2, MC_TASK_SUCCESS = 3 };
#define MC_TASK_MAX_TARGETS 8 /* targets of one copy task */
#define MC_TASK_FETCH_MAX 16  /* tasks one FETCH_TASKS hands out */
#define MC_TASK_MSG_MAX 256   /* bytes of a task's message kept */

/* The records' wire fields, in wire order: X(kind, field) with kind u8 / u64 / str / uuid. The structs
 * below, and each record's encoder, decoder and free (proto.c), are generated from these lists. */
#define MC_REC_T_u8 uint8_t
#define MC_REC_T_u64 uint64_t
#define MC_REC_T_str char *
#define MC_REC_T_uuid struct mc_uuid
#define MC_REC_FIELD_(kind, field) MC_REC_T_##kind field;

#define MC_SEGMENT_FIELDS(X) \
  X(uuid, id)                \
  X(str, name)        /* the owning client's local_hostname ("ip:port") */                        \
  X(u64, base)        /* remote virtual address of the first byte */                              \
  X(u64, size)                                                                                    \
  X(str, te_endpoint) /* transfer-engine segment name to openSegment() */                        \
  X(str, protocol)    /* "tcp" */                                                                 \
  X(str, zone)        /* "" = no zone */                                                          \
  X(str, host_id)     /* kernel boot id of the owner's host */                                    \
  X(str, probe_addr)  /* "ip:port" of the owner's transfer-engine control RPC (answers Probe) */

struct mc_segment_rec {
  MC_SEGMENT_FIELDS(MC_REC_FIELD_)
  const char *tenant; /* not on the wire: the realm of the connection that mounts it (NULL = the whole
                         cluster; docs/security.md, "Tenants"); set by the dispatcher, not owned */
};

#define MC_MAX_PREFERRED 64
struct mc_put_config {
  uint32_t replica_num;
  uint8_t soft_pin_action;
  int64_t soft_pin_ttl_ms; /* -1 = not given */
  uint8_t with_hard_pin;
  uint32_t n_preferred;
  char *preferred[MC_MAX_PREFERRED];
  char *writer_host_id; /* placement: the writer's host and zone (docs/master.md, "Placement") */
  char *writer_zone;
  char *group; /* the key's group (NULL / "" = none): grouped keys share placement and eviction
                  (docs/master.md, "Key groups"); the last field on the wire */
  const char *tenant; /* not on the wire: the writer's tenant (NULL = the whole cluster); placement uses
                         only that realm's segments (docs/security.md, "Tenants"); not owned */
};

/* A replica's status on the wire (mc_replica_rec.status); the master keeps its replicas in these too. */
enum mc_replica_status { MC_REPLICA_PROCESSING = 2, MC_REPLICA_COMPLETE = 3 };

#define MC_REPLICA_FIELDS(X) \
  X(u8, status)       /* enum mc_replica_status, as seen by the master */ \
  X(u64, size)                                                            \
  X(u64, address)     /* remote virtual address */                        \
  X(str, te_endpoint) /* segment to open */                               \
  X(str, segment_name)                                                    \
  X(str, protocol)                                                        \
  X(str, zone)                                                            \
  X(str, host_id)

struct mc_replica_rec {
  MC_REPLICA_FIELDS(MC_REC_FIELD_)
};

void mc_put_uuid(struct mc_wbuf *w, struct mc_uuid u);
struct mc_uuid mc_get_uuid(struct mc_rbuf_rd *r);
void mc_put_segment(struct mc_wbuf *w, const struct mc_segment_rec *s);
void mc_get_segment(struct mc_rbuf_rd *r, struct mc_segment_rec *s); /* strings malloc'ed */
void mc_segment_rec_free(struct mc_segment_rec *s);
void mc_put_config(struct mc_wbuf *w, const struct mc_put_config *c);
void mc_get_config(struct mc_rbuf_rd *r, struct mc_put_config *c);
void mc_put_config_free(struct mc_put_config *c);
void mc_put_replica(struct mc_wbuf *w, const struct mc_replica_rec *rep);
void mc_get_replica(struct mc_rbuf_rd *r, struct mc_replica_rec *rep);
void mc_replica_rec_free(struct mc_replica_rec *rep);
/* Decodes list<replica>; *out malloc'ed array (free each + array). */
uint32_t mc_get_replicas(struct mc_rbuf_rd *r, struct mc_replica_rec **out);
void mc_replicas_free(struct mc_replica_rec *reps, uint32_t n);

/* What a client saw since its previous report (docs/admin.md, "Client reports"): transfer latencies in the fixed log-scale
 * buckets below (1-2-5 steps from 1 us to 10 s; lat[i] counts latencies <= mc_lat_bound_us(i) and above
 * the previous bound, lat[MC_LAT_NBUCKETS - 1] those above 10 s), their sum, bytes moved, and the lookups
 * it made that found a readable object (hits) or not (misses). Wire: client id, u32 bucket count (must be
 * MC_LAT_NBUCKETS), u64 per bucket, u64 lat_sum_us, bytes_read, bytes_written, hits, misses. */
#define MC_LAT_NBUCKETS 23
/* Upper bound of bucket i < MC_LAT_NBUCKETS - 1, in microseconds. */
uint64_t mc_lat_bound_us(uint32_t i);
struct mc_client_stats {
  struct mc_uuid client;
  uint64_t lat[MC_LAT_NBUCKETS];
  uint64_t lat_sum_us, bytes_read, bytes_written, hits, misses;
};
/* Bucket index of a latency. */
uint32_t mc_lat_bucket(uint64_t us);
/* The q-quantile (0..1) in seconds of a latency histogram lat[MC_LAT_NBUCKETS], interpolating linearly
 * inside the bucket (as Prometheus' histogram_quantile); above the last finite bound it answers that
 * bound. 0 when empty. */
double mc_lat_quantile_s(const uint64_t *lat, double q);
/* acc += d, field by field (the client id is left alone). */
void mc_client_stats_add(struct mc_client_stats *acc, const struct mc_client_stats *d);
void mc_put_client_stats(struct mc_wbuf *w, const struct mc_client_stats *st);
void mc_get_client_stats(struct mc_rbuf_rd *r, struct mc_client_stats *st);

/* Random RFC 4122 version 4 UUID (libuuid); text form "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh" into buf (>= 37 bytes). */
struct mc_uuid mc_uuid_random(void);
void mc_uuid_str(struct mc_uuid u, char *buf);

#endif
