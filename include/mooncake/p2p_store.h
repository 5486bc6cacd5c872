/* Mooncake P2P store: the public C API (libmooncake_p2p; docs/p2p-store.md).
 *
 * Distributes large immutable payloads from producers to many consumers without a master: a payload's
 * layout and the holders of each of its shards live in one metadata record (etcd or the HTTP metadata
 * server, key "mooncake/checkpoint/<name>"), the bytes move node to node through the transfer engine.
 * mc_p2p_register publishes ("seeds"); mc_p2p_get_replica fetches, checksum-verified, striped across the
 * live holders, and makes this node a holder too.
 *
 * Every call returns 0 or a negative MC_P2P_* code (mc_p2p_strerror gives the contract's text). A handle
 * is thread-safe; calls on different payloads may run at once. Buffers stay the caller's: they must stay
 * mapped while the payload is held (until mc_p2p_unregister / mc_p2p_delete_replica / mc_p2p_store_close). */
#ifndef MOONCAKE_P2P_STORE_H
#define MOONCAKE_P2P_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MC_P2P_INVALID_ARGUMENT (-1)
#define MC_P2P_ADDRESS_OVERLAPPED (-2)
#define MC_P2P_PAYLOAD_OPENED (-3)
#define MC_P2P_PAYLOAD_NOT_OPENED (-4)
#define MC_P2P_PAYLOAD_NOT_FOUND (-5)
#define MC_P2P_TOO_MANY_RETRIES (-6)
#define MC_P2P_TRANSFER_ENGINE (-7)
#define MC_P2P_ALREADY_EXISTS (-8) /* register without force on an existing record */
#define MC_P2P_METADATA (-9)       /* the metadata service did not answer within its bounds */

/* The contract's text of an error ("error: invalid argument", ...); MC_P2P_ALREADY_EXISTS gives
 * "error: key already exists" (the log line names the key). "unknown error" for other values. */
MC_API const char *mc_p2p_strerror(int err);

typedef struct mc_p2p_store mc_p2p_store_t;

/* One engine whose segment name is local_server_name ("host:port"; no port: 12345, logged). metadata_conn:
 * "etcd://h:p[,h:p]", bare "h:p" (etcd) or "http://h:p/metadata" (docs/p2p-store.md, "Metadata").
 * nic_priority_matrix: NULL or "" for TCP, else the RDMA NIC priority matrix (JSON). NULL on failure
 * (logged). */
MC_API mc_p2p_store_t *mc_p2p_store_new(const char *metadata_conn, const char *local_server_name,
                                        const char *nic_priority_matrix);
/* Drops every payload this store holds (as mc_p2p_unregister / mc_p2p_delete_replica do), stops the
 * engine and frees the handle. NULL is ignored. Call it once every other call on the handle has returned. */
MC_API void mc_p2p_store_close(mc_p2p_store_t *s);
/* The engine's "ip:port" (its control RPC address). */
MC_API const char *mc_p2p_local_server_name(mc_p2p_store_t *s);

/* Seeds payload `name` from buffers addrs[i] of sizes[i] (n > 0), cut into max_shard_size shards (a power
 * of two, at most 4 GiB). location: "cpu:0" and the like (NULL = "cpu:0"). force_create != 0 replaces an
 * existing record. */
MC_API int mc_p2p_register(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n,
                           uint64_t max_shard_size, const char *location, int force_create);
/* Withdraws this node as producer of name (other holders keep serving). */
MC_API int mc_p2p_unregister(mc_p2p_store_t *s, const char *name);

/* One payload of mc_p2p_list. */
typedef struct mc_p2p_payload_info {
  char *name;
  uint64_t max_shard_size, total_size;
  uint64_t *size_list;
  size_t size_count;
} mc_p2p_payload_info_t;
/* Every payload whose name starts with name_prefix (at most 65536): *out (free with mc_p2p_list_free). */
MC_API int mc_p2p_list(mc_p2p_store_t *s, const char *name_prefix, mc_p2p_payload_info_t **out, size_t *count);
MC_API void mc_p2p_list_free(mc_p2p_payload_info_t *list, size_t count);

/* Fetches payload name into addrs[i] / sizes[i] (the record's size_list exactly), then holds it as a
 * replica. Shards whose bytes are already right (a resumed fetch) are not read again. */
MC_API int mc_p2p_get_replica(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes,
                              size_t n);
/* As mc_p2p_get_replica, for a destination that may already hold some of the payload (a file-backed mapping
 * written by a fetch that was interrupted, even in another process): every shard whose bytes match its
 * CRC-32 is kept and only the others are read. */
MC_API int mc_p2p_get_replica_resume(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes,
                                     size_t n);
/* As mc_p2p_get_replica, but this node does not become a holder: nothing is advertised during or after the
 * fetch, the destination is unregistered when the call returns and stays the caller's alone (a consumer
 * that must not serve others; the source-only baseline of the fan-out bench). */
MC_API int mc_p2p_get_copy(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n);
/* Withdraws this node as replica holder of name. */
MC_API int mc_p2p_delete_replica(mc_p2p_store_t *s, const char *name);

/* Operator cleanup: removes every entry of segment_name from name's record, from the producers' lists
 * (gold != 0) or the replicas' (gold == 0), deleting the record when no holder is left. For holders that are
 * gone or must stop being used; a live holder's lease renewal adds it back. 0 or an MC_P2P_* code. */
MC_API int mc_p2p_remove_holder(mc_p2p_store_t *s, const char *name, const char *segment_name, int gold);

/* Progress of the fetches of this store, for progress displays: bytes landed so far, and the number of
 * distinct holders read from at this moment. */
MC_API void mc_p2p_progress(mc_p2p_store_t *s, uint64_t *bytes_done, unsigned *sources_in_use);

#ifdef __cplusplus
}
#endif
#endif
