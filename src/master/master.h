/* The master service: segment registry, per-segment allocators, the key -> replica map with leases and
 * pins, eviction and client liveness (docs/master.md). Metadata only: it never touches object bytes.
 * Every operation is safe to call from many threads (the RPC server's workers, src/net/mrpc_server.c);
 * locks are short and documented in master_int.h. Status results are 0 or a negative store ErrorCode;
 * reply bodies are appended to a caller's buffer in the encodings of proto.h. */
#ifndef MC_MASTER_MASTER_H
#define MC_MASTER_MASTER_H
#include <stddef.h>
#include <stdint.h>

#include "master/mconfig.h"
#include "proto/proto.h"
#include "net/codec.h"

struct mc_master;

/* Creates the service from a finalized configuration (copied; the caller keeps and later frees its
 * strings, after mc_master_destroy). Starts the embedded HTTP metadata server when configured, and the
 * eviction and housekeeping threads. 0, or INTERNAL_ERROR (-1) with the reason logged. */
int mc_master_create(const struct mc_master_cfg *cfg, struct mc_master **out);
/* Starts the RPC server on cfg bind_ip:listen_port (*port_out gets the port), and with --enable_ha the
 * election (docs/ha.md): until it wins, every RPC answers UNAVAILABLE_IN_CURRENT_STATUS. 0 or INTERNAL_ERROR. */
int mc_master_start_rpc(struct mc_master *m, uint16_t *port_out);
/* 1 once this master lost a leadership it held (HA): its state may be stale; the process should be
 * restarted (it rejoins as a standby). */
int mc_master_ha_lost(struct mc_master *m);
/* Stops the RPC server and the threads, frees everything. NULL ignored. */
void mc_master_destroy(struct mc_master *m);
/* Port of the embedded HTTP metadata server, 0 when none. */
uint16_t mc_master_meta_port(const struct mc_master *m);

/* One RPC: decodes body (a total decoder: malformed input -> INVALID_PARAMS), runs it, appends the
 * reply body. Unknown opcodes -> NOT_SUPPORTED. Exposed for the in-process fuzz test. */
int mc_master_dispatch(struct mc_master *m, uint16_t op, const uint8_t *body, size_t len, struct mc_wbuf *reply);
/* The same for a request of a tenant's connection (tenant NULL = a member of the whole cluster): the
 * request is confined to the tenant's keys, segments and placement (docs/security.md, "Tenants"). */
int mc_master_dispatch_as(struct mc_master *m, const char *tenant, uint16_t op, const uint8_t *body, size_t len,
                          struct mc_wbuf *reply);

/* glog-style verbosity of per-request traces (0: none; 1: put allocations, misses, eviction
 * diagnostics, thread start/stop; 2: per-object eviction and replica-loss lines). Process-wide. */
void mc_master_set_verbosity(int v);

/* Starts the admin/metrics HTTP server on cfg metrics_host:metrics_port (*port_out gets the port; admin.c,
 * docs/admin.md). It has its own threads and takes the master's locks only briefly. 0 or INTERNAL_ERROR. */
int mc_master_start_admin(struct mc_master *m, uint16_t *port_out);

/* ---- segments and clients (docs/master.md, "Segments", "Liveness and metadata cleanup") ---- */
int mc_master_mount(struct mc_master *m, const struct mc_segment_rec *seg, struct mc_uuid client);
int mc_master_remount(struct mc_master *m, const struct mc_segment_rec *segs, uint32_t n, struct mc_uuid client);
/* One entry of a holder's index upload (REMOUNT_INDEX; docs/ha.md, "Rebuild"): key views into the request. */
struct mc_index_entry {
  const uint8_t *key;
  uint32_t klen;
  uint64_t offset, length, size; /* offset and length of the space in the segment; size of the object */
  uint8_t hard_pin;
  uint64_t soft_pin_ttl_ms;
  const char *group; /* its key group, glen bytes (0: none; no NUL; docs/master.md, "Key groups") */
  uint32_t glen;
};
/* Rebuilds the objects of a segment `client` owns (in realm tenant) from its index entries: results[i] 0
 * installed, OBJECT_ALREADY_EXISTS (the key exists, or the space is taken), INVALID_PARAMS (a range
 * outside the segment or unaligned, an empty key, a size above its length), SEGMENT_NOT_FOUND (unmounted
 * meanwhile). Returns SEGMENT_NOT_FOUND when the segment is not the client's or not mounted, else 0. */
int mc_master_rebuild_index(struct mc_master *m, struct mc_uuid client, struct mc_uuid seg_id, const char *tenant,
                            const struct mc_index_entry *e, uint32_t n, uint64_t applied, int last, int32_t *results);
/* One writer's witness (RECOMMIT; docs/ha.md, "Witnesses"): the record seq of another master placed the
 * object e on segment seg_id. MC_RECOMMIT_KNOWN (proto.h): nothing to do (the holder's upload covered it);
 * 0: installed, its new record's witness in mc_wsink; SEGMENT_NOT_FOUND / UNAVAILABLE_IN_CURRENT_STATUS:
 * not yet (the holder has not remounted, or not finished its upload: ask again); OBJECT_ALREADY_EXISTS (key
 * or space taken), LEASE_EXPIRED (too late: the segment takes new allocations), INVALID_PARAMS: never. */
int mc_master_recommit(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                       const struct mc_index_entry *e);
/* A writer's witness of a DROP another master queued (a removal the holder may have missed): 0 the object
 * the removal removed was there again and is removed; RECOMMIT_KNOWN nothing to do (the holder had the
 * DROP, or the object is not there); the not-yet and too-late statuses as above. Either way, during the
 * segment's quiet period a PUT witness of the same key at the same place numbered below it is then
 * answered RECOMMIT_KNOWN instead of installed. */
int mc_master_recommit_drop(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                            const struct mc_index_entry *e);
/* tenant: the realm of the request (NULL = the whole cluster); a tenant touches only its realm's segments. */
int mc_master_unmount(struct mc_master *m, struct mc_uuid seg_id, struct mc_uuid client, const char *tenant);
int mc_master_graceful_unmount(struct mc_master *m, struct mc_uuid seg_id, struct mc_uuid client, uint64_t grace_ms,
                               const char *tenant);
/* *status: MC_PING_OK or MC_PING_NEED_REMOUNT. */
int mc_master_ping(struct mc_master *m, struct mc_uuid client, uint8_t *status);
/* Appends list<{segment, str client id text, u8 state, u64 used}>: every segment, or only those of
 * tenant's realm (tenant non-NULL). */
void mc_master_query_segments(struct mc_master *m, const char *tenant, struct mc_wbuf *w);

/* ---- objects (docs/master.md, "Objects"); keys are byte strings of klen bytes ---- */
/* On success appends list<replica> (PROCESSING). */
int mc_master_put_start(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                        const struct mc_put_config *pc, struct mc_wbuf *w);
int mc_master_put_end(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type);
int mc_master_put_revoke(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type);
/* UpsertStart (docs/master.md, "Upsert"): insert or replace, never OBJECT_ALREADY_EXISTS. Absent key: as PutStart.
 * A complete object of the same length keeps its replicas (back to PROCESSING, same addresses); another
 * length frees them and allocates anew; an unfinished put is preempted at once. The caller becomes the
 * owner. On success appends list<replica> (PROCESSING). UpsertEnd/Revoke are mc_master_put_end/revoke. */
int mc_master_upsert_start(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                           const struct mc_put_config *pc, struct mc_wbuf *w);
/* On success grants a lease and appends list<replica> (readable ones). */
int mc_master_get_replicas(struct mc_master *m, const void *key, uint32_t klen, struct mc_wbuf *w);
/* As mc_master_get_replicas without granting a lease (admin reads are side-effect free). */
int mc_master_peek_replicas(struct mc_master *m, const void *key, uint32_t klen, struct mc_wbuf *w);
/* 1 readable (lease granted), 0 absent or not yet readable. */
int mc_master_exist(struct mc_master *m, const void *key, uint32_t klen);
int mc_master_remove(struct mc_master *m, const void *key, uint32_t klen, int force);
/* BatchReplicaClear for one key (docs/master.md, "BatchReplicaClear"): when key's object was written by `client`, every
 * replica is COMPLETE and its lease has expired, drops its replicas (seg_len 0) or only the one on the
 * segment named seg (seg_len bytes); an object left without replicas is removed. 1 cleared, 0 not. */
int mc_master_replica_clear(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen,
                            const void *seg, uint32_t seg_len);
/* A compiled key pattern (rpc.c: PCRE2 under the limits of docs/master.md "Limits"). */
struct mc_regex;
/* Searches s (n bytes) for the pattern: 1 found, 0 not, -1 the match hit a limit. Not thread-safe per
 * pattern (one request uses it). */
int mc_regex_match(struct mc_regex *re, const char *s, size_t n);
/* Removes the matching objects (re NULL = all). scope: NULL = every key; "" = the default key namespace
 * (keys without the 0x1f tenant separator); else only keys starting with it, re applied to the rest of
 * the key (a tenant's namespace "<tenant>\x1f"). Returns the number removed, or INVALID_PARAMS when a
 * key's match hit a limit (the shards scanned before stay removed). No pattern is matched under a
 * shard lock: each shard's candidate keys are copied out, matched, then re-checked and removed. */
int64_t mc_master_remove_matching(struct mc_master *m, struct mc_regex *re, const char *scope, int force);
/* Appends list<{str key, list<replica>}> of readable objects whose key matches (no lease), as
 * mc_master_remove_matching finds them (scope likewise; NULL = every key, matched whole). 0, or
 * INVALID_PARAMS when a match hit a limit. */
int mc_master_replicas_matching(struct mc_master *m, struct mc_regex *re, const char *scope, struct mc_wbuf *w);
uint64_t mc_master_lease_ttl_ms(const struct mc_master *m);

#endif
