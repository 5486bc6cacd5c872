/* The master service: segment registry, per-segment allocators, the key -> replica map with leases and
 * pins, eviction and client liveness (docs/master.md). Metadata only: it never touches object bytes.
 * This header is the serving layer's entry (lifecycle, RPC dispatch, admin HTTP, rebuild); the data core's
 * operations it includes are core_api.h's. Every operation is safe to call from many threads (the RPC
 * server's workers, src/net/mrpc_server.c); locks are short and documented in core.h. Status results are 0
 * or a negative store ErrorCode; reply bodies are appended to a caller's buffer in the encodings of proto.h. */
#ifndef MC_MASTER_MASTER_H
#define MC_MASTER_MASTER_H
#include <stddef.h>
#include <stdint.h>

#include "master_core/core_api.h"
#include "master_core/config.h"
#include "proto/proto.h"
#include "net/codec.h"

struct mc_master;
struct mc_wsink;

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

/* Starts the admin/metrics HTTP server on cfg metrics_host:metrics_port (*port_out gets the port; admin.c,
 * docs/admin.md). It has its own threads and takes the master's locks only briefly. 0 or INTERNAL_ERROR. */
int mc_master_start_admin(struct mc_master *m, uint16_t *port_out);

/* Rebuilds the objects of a segment `client` owns (in realm tenant) from its index entries: results[i] 0
 * installed, OBJECT_ALREADY_EXISTS (the key exists, or the space is taken), INVALID_PARAMS (a range
 * outside the segment or unaligned, an empty key, a size above its length), SEGMENT_NOT_FOUND (unmounted
 * meanwhile). Returns SEGMENT_NOT_FOUND when the segment is not the client's or not mounted, else 0. */
int mc_master_rebuild_index(struct mc_master *m, struct mc_uuid client, struct mc_uuid seg_id, const char *tenant,
                            const struct mc_index_entry *e, uint32_t n, uint64_t applied, int last, int32_t *results);
/* One writer's witness (RECOMMIT; docs/ha.md, "Witnesses"): the record seq of another master placed the
 * object e on segment seg_id. MC_RECOMMIT_KNOWN (proto.h): nothing to do (the holder's upload covered it);
 * 0: installed, its new record's witness in ws; SEGMENT_NOT_FOUND / UNAVAILABLE_IN_CURRENT_STATUS:
 * not yet (the holder has not remounted, or not finished its upload: ask again); OBJECT_ALREADY_EXISTS (key
 * or space taken), LEASE_EXPIRED (too late: the segment takes new allocations), INVALID_PARAMS: never. */
int mc_master_recommit(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                       const struct mc_index_entry *e, struct mc_wsink *ws);
/* A writer's witness of a DROP another master queued (a removal the holder may have missed): 0 the object
 * the removal removed was there again and is removed; RECOMMIT_KNOWN nothing to do (the holder had the
 * DROP, or the object is not there); the not-yet and too-late statuses as above. Either way, during the
 * segment's quiet period a PUT witness of the same key at the same place numbered below it is then
 * answered RECOMMIT_KNOWN instead of installed. The DROP records of a removal: their witnesses to ws. */
int mc_master_recommit_drop(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                            const struct mc_index_entry *e, struct mc_wsink *ws);

#endif
