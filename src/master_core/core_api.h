/* The data core's operations (docs/master.md): segments and clients, objects, their removal by key pattern.
 * What the serving layer (RPC dispatch, admin HTTP, rebuild, snapshots; master.h) and the tests call; every
 * one is safe to call from many threads. Status results are 0 or a negative store ErrorCode; reply bodies
 * are appended to a caller's buffer in the encodings of proto.h. */
#ifndef MC_MASTER_CORE_CORE_API_H
#define MC_MASTER_CORE_CORE_API_H
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "net/codec.h"

struct mc_master;
struct mc_regex;  /* a compiled key pattern (key_pattern.h) */
struct mc_wsink;  /* a reply's witness records (core.h); NULL = none */

/* glog-style verbosity of per-request traces (0: none; 1: put allocations, misses, eviction
 * diagnostics, thread start/stop; 2: per-object eviction and replica-loss lines). Process-wide. */
void mc_master_set_verbosity(int v);

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
/* PutEnd: the replicas become COMPLETE; the PUT records queued for their holders are witnessed in ws. */
int mc_master_put_end(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type,
                      struct mc_wsink *ws);
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
/* The DROP records a removal queues are witnessed in ws (here and in mc_master_remove_matching). */
int mc_master_remove(struct mc_master *m, const void *key, uint32_t klen, int force, struct mc_wsink *ws);
/* BatchReplicaClear for one key (docs/master.md, "BatchReplicaClear"): when key's object was written by `client`, every
 * replica is COMPLETE and its lease has expired, drops its replicas (seg_len 0) or only the one on the
 * segment named seg (seg_len bytes); an object left without replicas is removed. 1 cleared, 0 not. */
int mc_master_replica_clear(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen,
                            const void *seg, uint32_t seg_len);
/* Removes the matching objects (re NULL = all). scope: NULL = every key; "" = the default key namespace
 * (keys without the 0x1f tenant separator); else only keys starting with it, re applied to the rest of
 * the key (a tenant's namespace "<tenant>\x1f"). Returns the number removed, or INVALID_PARAMS when a
 * key's match hit a limit (the shards scanned before stay removed). No pattern is matched under a
 * shard lock: each shard's candidate keys are copied out, matched, then re-checked and removed. */
int64_t mc_master_remove_matching(struct mc_master *m, struct mc_regex *re, const char *scope, int force,
                                  struct mc_wsink *ws);
/* Appends list<{str key, list<replica>}> of readable objects whose key matches (no lease), as
 * mc_master_remove_matching finds them (scope likewise; NULL = every key, matched whole). 0, or
 * INVALID_PARAMS when a match hit a limit. */
int mc_master_replicas_matching(struct mc_master *m, struct mc_regex *re, const char *scope, struct mc_wbuf *w);
uint64_t mc_master_lease_ttl_ms(const struct mc_master *m);

#endif
