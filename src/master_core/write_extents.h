/* Write extents (docs/master.md "Write extents"): one-round-trip puts. A live client (one that mounted a
 * segment and pings) reserves an extent: an ordinary allocated TLSF block, placed like a one-replica
 * PutStart, held by the master on the client's behalf with a lease. The client bump-allocates object
 * ranges inside it locally, writes the bytes, and commits each with COMMIT_PUT, which carves the range out
 * of the reserved block into a COMPLETE object exactly as PutStart + PutEnd would leave it. Reserved,
 * uncommitted bytes count as used. Their RPC handlers are rpc.c's. Included by core.h. */
#ifndef MC_MASTER_CORE_WRITE_EXTENTS_H
#define MC_MASTER_CORE_WRITE_EXTENTS_H
#include <stdint.h>

#include "proto/proto.h"
#include "net/codec.h"

struct mc_master;
struct mc_wsink;

#define MC_EXTENT_MAX_BYTES (16ull << 20)
#define MC_EXTENT_SEG_RATIO 64 /* an extent takes at most 1/64 of its segment */

/* RESERVE_EXTENT: on success appends u64 extent id, replica (address, size = the extent), u64 lease_ms,
 * u64 client_ttl_ms, u64 view_version. A client the master does not track (a pure client) gets a
 * lease-only extent: lease min(put_start_release_timeout_sec, client_ttl), client_ttl_ms 0, not ended by
 * a client expiry (write_extents.c, SAFETY). NO_AVAILABLE_HANDLE when no segment can hold min_len within its
 * 1/64 share. */
int mc_master_reserve_extent(struct mc_master *m, struct mc_uuid client, uint64_t min_len, uint64_t len_hint,
                             const struct mc_put_config *pc, struct mc_wbuf *w);
/* COMMIT_PUT: 0 (object created COMPLETE), OBJECT_ALREADY_EXISTS (range returned to the pool, value
 * kept), LEASE_EXPIRED (no such extent: released or reclaimed), ILLEGAL_CLIENT, INVALID_PARAMS. The new
 * object's PUT records are witnessed in ws. */
int mc_master_commit_put(struct mc_master *m, struct mc_uuid client, uint64_t ext_id, const void *key, uint32_t klen,
                         uint64_t off, uint64_t len, const struct mc_put_config *pc, struct mc_wsink *ws);
/* RELEASE_EXTENT: frees every still-reserved piece. Unknown id -> 0; another client's -> ILLEGAL_CLIENT. */
int mc_master_release_extent(struct mc_master *m, struct mc_uuid client, uint64_t ext_id);

/* Lifecycle hooks */
void mc_extents_init(struct mc_master *m);
void mc_extents_destroy(struct mc_master *m);
/* Frees the extents of a client that was expired or replaced (after it left the client table). */
void mc_extents_release_client(struct mc_master *m, struct mc_uuid client);
/* Drops (without freeing: the allocators are going away) extents on UNMOUNTING segments; called by the
 * sweeper before it frees those segments. */
void mc_extents_drop_unmounting(struct mc_master *m);
/* Frees extents whose lease ran out (housekeeping). Returns how many. */
uint32_t mc_extents_expire(struct mc_master *m, uint64_t now_ns);
/* Number of extents and reserved bytes (tests, summary). */
void mc_extents_stats(struct mc_master *m, uint64_t *count, uint64_t *bytes);

#endif
