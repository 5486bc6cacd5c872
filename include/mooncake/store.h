/* Mooncake Store client: the public C API (libmooncake_store).
 *
 * A client contributes part of its memory to a cluster-wide KV cache (its "global segment"), and
 * puts/gets objects through the master (metadata) and the Transfer Engine (bytes). Objects are
 * immutable once written.
 *
 * Two layers, one header:
 *   mooncake_store_*   the upstream API (docs/store-client.md, "C API"): names, parameter order, return conventions are
 *                      binding. -1 = "bad call" (NULL handle, NULL required pointer); otherwise 0 or a
 *                      negative store ErrorCode (store_errors.h, mooncake_store_strerror()).
 *   mc_store_*         native additions (copy-out get, copying batch put, batch remove, a setup that
 *                      takes a zone). Same conventions.
 *
 * Ownership and lifetime: every `const char *` argument and every key is copied before the call
 * returns (the caller may free it at once). Value buffers are only read/written during the call.
 * A handle is thread-safe: any number of threads may call into it at once; setup and destroy wait
 * for calls in flight. Before a successful setup (and after a teardown) every call returns its
 * "not initialized" value: -600 (per key -600 in batches), health_check 1, get_hostname "".
 *
 * Process exit (atexit) tears down every live handle as destroy would. In a process without an
 * embedded Python interpreter the library also handles SIGINT/SIGTERM/SIGHUP (only where the
 * application left the default disposition): a dedicated thread tears down all handles, then the
 * signal is re-raised with its default action. A forked child leaves its parent's handles alone
 * (docs/store-client.md, "Process lifecycle: exit and signals"). */
#ifndef MOONCAKE_STORE_H
#define MOONCAKE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/version.h"

#include "mooncake/store_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque client handle: one real client (own segment, staging buffer, master connection). */
typedef void *mooncake_store_t;

/* Per-put placement policy. NULL config = replica_num 1, no pins, no preferences.
 * replica_num is taken verbatim (0 fails the put with -600); with_soft_pin != 0 soft-pins the object
 * with the master's default TTL; with_hard_pin != 0 hard-pins it; preferred_segments[0..count) are
 * segment names (get_hostname() values) tried first, in order, NULL entries skipped. */
struct mooncake_replicate_config {
  size_t replica_num;
  int with_soft_pin;
  int with_hard_pin;
  const char **preferred_segments;
  size_t preferred_segments_count;
};
typedef struct mooncake_replicate_config mooncake_replicate_config_t;

/* ------------------------------------------------------------------ lifecycle */

/* An un-setup client, or NULL on allocation failure. Free with mooncake_store_destroy(). */
MC_API mooncake_store_t mooncake_store_create(void);

/* Full teardown (ping thread stopped, segments unmounted so objects stored only here are gone
 * cluster-wide, engine destroyed, held port released), then frees the handle. NULL is ignored.
 * The handle must not be used afterwards; calls still in flight on other threads finish first. */
MC_API void mooncake_store_destroy(mooncake_store_t store);

/* Connects the client. Arguments as Python's positional setup (docs/python.md, "`setup`"):
 *   local_hostname      "host" (a free port in [MC_STORE_CLIENT_MIN_PORT, MC_STORE_CLIENT_MAX_PORT] =
 *                       12300-14300 is picked and held bound for the client's lifetime), "host:port" or
 *                       "[v6]:port" (used verbatim as the segment name). NULL/"" -> -600.
 *   metadata_server     transfer-engine metadata: "http://h:p/metadata", "etcd://h:p", "redis://h:p",
 *                       bare "h:p" (etcd) or "P2PHANDSHAKE". NULL -> "".
 *   global_segment_size bytes contributed to the pool (0 = pure client: mounts nothing, never pings).
 *                       More than the host can back (MemAvailable + free swap, cgroup limit) -> -600.
 *   local_buffer_size   staging buffer for the copying calls (put, mc_store_get, ...); 0 disables them.
 *   protocol            "tcp" (network path with the same-host shared-memory shortcut); "rdma" (verbs,
 *                       docs/rdma.md) falls back to TCP (logged, counted) on a host without a usable device.
 *                       NULL -> "tcp".
 *   device_name         RDMA device list ("rxe0", "mlx5_0,mlx5_1"), ignored for TCP. NULL or "" -> every
 *                       device (or MC_TE_FILTERS).
 *   master_server_addr  "host[:port]" (port 50051 by default). NULL -> "127.0.0.1:50051".
 * Zone (docs/master.md, "Placement") comes from the environment variable MC_ZONE.
 * Returns 0, or: -600 bad arguments / local allocation failure; -900 master unreachable; -901 master
 * accepts but does not answer; -1000 metadata service unreachable; -300 master version mismatch;
 * -1 auto-port attempts exhausted; the master's code for a refused mount. Bounded: at most ~10 s.
 * A handle already set up is torn down first. A failed setup leaves the handle un-setup. */
MC_API int mooncake_store_setup(mooncake_store_t store, const char *local_hostname, const char *metadata_server,
                                uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol,
                                const char *device_name, const char *master_server_addr);

/* Legacy: setup("localhost:12345", "127.0.0.1:2379" (etcd), mount_segment_size, 1 GiB staging,
 * protocol (NULL -> "tcp"), device_name, "127.0.0.1:50051"). Already set up -> -600. */
MC_API int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name,
                                   uint64_t mount_segment_size);

/* 0 healthy, 1 not set up or torn down, 2 master unreachable; -1 for a NULL handle. */
MC_API int mooncake_store_health_check(mooncake_store_t store);

/* Copies this client's segment name ("host:port") with its NUL into buf_out. -1 (nothing written) for
 * NULL buf_out, buf_len 0, or a name that does not fit (strlen >= buf_len). Before setup writes "". */
MC_API int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);

/* ------------------------------------------------------------------ writes */

/* Copying put through the staging buffer (value is copied before the call returns).
 * -1: key NULL, or value NULL with size > 0. -600: empty key, size 0, size larger than the free
 * staging space (local_buffer_size), replica_num 0. -200: no space in the pool / no segment mounted.
 * -800: a replica could not be written (the put is revoked; nothing partial remains).
 * An existing key returns 0 and keeps its value. */
MC_API int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
                              const mooncake_replicate_config_t *config);

/* Zero-copy put from the caller's memory (best registered with register_buffer; unregistered memory
 * is bounced through the staging buffer). No size limit. size == 0 -> 0, nothing stored.
 * Otherwise as mooncake_store_put. `buffer` is only read during the call. */
MC_API int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                                   const mooncake_replicate_config_t *config);

/* Batch zero-copy put. Returns -1 without touching results_out when keys, buffers, sizes or
 * results_out is NULL, a keys[i] is NULL, or a buffers[i] is NULL with sizes[i] > 0; else 0 with one
 * code per key in results_out[0..count): 0 stored (or already present), negative otherwise
 * (sizes[i] == 0 -> -600). A key repeated in the batch: the first occurrence's bytes are stored and
 * every occurrence gets its result. Master lookups and transfers are batched. */
MC_API int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                         size_t count, const mooncake_replicate_config_t *config, int *results_out);

/* ------------------------------------------------------------------ reads */

/* Reads the whole object into buffer. Returns its size (may be smaller than `size`), or: -600 buffer
 * smaller than the object; -704 missing; -703 still being written; -707 the read lease ran out
 * before the transfer finished (data discarded); -800 every replica failed. Replicas are tried in the
 * order: this client's memory, same host, same zone, any (docs/store-client.md, "Reads"); a failed replica falls over
 * to the next. The call grants a read lease on the object. */
MC_API int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size);

/* Batch get_into; the -1/no-touch rules of batch_put_from apply (with int64_t results). Per key bytes
 * read or a negative code as get_into. One master lookup and one transfer batch for all keys. */
MC_API int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                         size_t count, int64_t *results_out);

/* 1 present (a complete replica on a live segment; grants a lease), 0 absent or still being written,
 * negative on error (-900 master unreachable). */
MC_API int mooncake_store_is_exist(mooncake_store_t store, const char *key);

/* Per key 1/0/negative. -1 without touching results_out for NULL keys/results_out or a NULL keys[i]. */
MC_API int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count, int *results_out);

/* Object size in bytes, or negative (-704 missing, -703 being written). Grants a lease. */
MC_API int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);

/* ------------------------------------------------------------------ removal */

/* 0 or: -704 missing; -706 leased (force != 0 bypasses only the lease: the key goes at once, a leased
 * object's space is reused only after the lease ends); -703 being written; -708 replication task. */
MC_API int mooncake_store_remove(mooncake_store_t store, const char *key, int force);

/* Removes every key matching the ECMAScript regex (search semantics). Count removed, or negative
 * (-600 bad pattern). Leased keys are skipped unless force; keys being written are always skipped. */
MC_API int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);

/* Removes every object; count removed or negative. Skips as remove_by_regex. */
MC_API int64_t mooncake_store_remove_all(mooncake_store_t store, int force);

/* ------------------------------------------------------------------ registered memory */

/* Registers [buffer, buffer+size) for zero-copy transfers (it stays owned by the caller and must stay
 * valid until unregister_buffer or destroy). -1 for NULL buffer or size 0; -600 overlap with any
 * registered range (the same range twice included) or transport failure. Adjacent ranges are fine. */
MC_API int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);

/* buffer must be the start of a registered range, else -600. No transfer may be using it. */
MC_API int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

/* ------------------------------------------------------------------ native additions */

/* Setup with every parameter named. Zero the struct, set what you need (NULL strings get the
 * defaults of mooncake_store_setup). Fields may be appended in later versions, never reordered. */
struct mc_store_config {
  const char *local_hostname;
  const char *metadata_server;
  uint64_t global_segment_size;
  uint64_t local_buffer_size;
  const char *protocol;
  const char *device_name;
  const char *master_server_addr;
  const char *zone; /* NULL = $MC_ZONE (or none); "" = no zone */
  /* An existing engine (transfer_engine_t of transfer_engine.h) to use instead of creating one; NULL =
   * create one. It must outlive the client's teardown, which frees what the client allocated in it and
   * unregisters the client's buffers but leaves the engine running. */
  void *engine;
  /* Client HTTP server (docs/store-client.md, "Client HTTP server"): when enable_http_server != 0 the
   * client serves GET /health, /metrics and /metrics/summary on http_port (0 = 9300) on every address.
   * A port that cannot be bound only logs a warning. Stopped at teardown. */
  int enable_http_server;
  int http_port; /* 0 = 9300; outside 0-65535 -> -600 */
  /* Object-key namespace (Python's tenant_id, docs/python.md): NULL, "" or "default" = the shared default namespace.
   * Another id isolates this client's keys: every key it sends is stored as "<tenant_id>\x1f<key>", and
   * remove_all / remove_by_regex only see its own namespace (the regex applies to the key without the
   * prefix). Up to 128 bytes, no control characters, else -600. Admin listings show the stored form. */
  const char *tenant_id;
  /* Local-disk tier (docs/disk-tier.md): a directory this client keeps objects in beside its segment, opened at
   * setup (created when absent; its parent must exist) and closed at teardown; its capacity and use are reported
   * to the master. NULL: no tier. "": the tier in upstream's $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH (else the
   * knob MC_STORE_SSD_PATH; neither set: -600). A directory that cannot be used fails setup: -1105
   * (FILE_LOCK_FAIL) when another process has it open, -1101 (FILE_OPEN_FAIL) otherwise (not a directory, no
   * permission, a newer format). */
  const char *ssd_path;
  uint64_t ssd_quota_bytes; /* bytes the tier may take; 0 = 90 % of the file system's size */
};
typedef struct mc_store_config mc_store_config_t;

/* As mooncake_store_setup. */
MC_API int mc_store_setup(mooncake_store_t store, const mc_store_config_t *config);

/* Copy-out get through the staging buffer. On success returns the size (> 0) and stores a malloc'ed
 * copy of the value in *value_out; the caller frees it with free(). Objects larger than
 * local_buffer_size -> -600 (as Python get). On failure *value_out is NULL. Codes as get_into. */
MC_API int64_t mc_store_get(mooncake_store_t store, const char *key, void **value_out);

/* Copying batch put: each value is copied through the staging buffer (in waves when they do not all
 * fit; a single value larger than local_buffer_size -> -600 for that key). Rules and results as
 * mooncake_store_batch_put_from. */
MC_API int mc_store_batch_put(mooncake_store_t store, const char **keys, const void *const *values, const size_t *sizes,
                              size_t count, const mooncake_replicate_config_t *config, int *results_out);

/* Upsert (docs/master.md, "Upsert"): insert or replace. Conventions as mooncake_store_put (copying, through the
 * staging buffer: -600 for a value larger than local_buffer_size), except that an existing key is
 * replaced instead of kept: a value of the same size is rewritten in place in the existing replicas,
 * another size is stored in a fresh allocation (the old space is freed), and an unfinished put of the
 * key (by any client) is pre-empted at once. A key read within the read lease (default_kv_lease_ttl)
 * is never rewritten under its readers: the new value goes to fresh space and the old space is freed
 * when the lease ends; with no space for that, -714 and the old value stays. While the upsert runs the
 * key reads as -703; a failed write revokes it and the key is then gone (its old bytes may be partly
 * overwritten). Never -705. */
MC_API int mc_store_upsert(mooncake_store_t store, const char *key, const void *value, size_t size,
                           const mooncake_replicate_config_t *config);

/* Zero-copy upsert from the caller's memory; conventions as mooncake_store_put_from (size 0 -> 0,
 * nothing stored), semantics as mc_store_upsert. */
MC_API int mc_store_upsert_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                                const mooncake_replicate_config_t *config);

/* Batch zero-copy upsert; argument rules, results and repeated keys as mooncake_store_batch_put_from,
 * per key semantics as mc_store_upsert. */
MC_API int mc_store_batch_upsert_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                      size_t count, const mooncake_replicate_config_t *config, int *results_out);

/* Per key remove results (0 or negative as mooncake_store_remove); a key repeated in one batch: the
 * first occurrence is removed, the rest get -704. -1/no-touch rules as batch_is_exist. */
MC_API int mc_store_batch_remove(mooncake_store_t store, const char **keys, size_t count, int force, int *results_out);


/* ------------------------------------------------------------------ additions for the Python package */

/* The full placement policy of Python's ReplicateConfig that the master understands (docs/python.md,
 * "`ReplicateConfig`"). Zero the struct, then set what you need; replica_num 0 fails the write with -600. */
enum mc_soft_pin { MC_SOFT_PIN_KEEP = 0, MC_SOFT_PIN_SET = 1, MC_SOFT_PIN_CLEAR = 2 };
struct mc_replicate_config {
  size_t replica_num;
  int soft_pin_action;     /* enum mc_soft_pin: keep the current pin, pin, clear the pin */
  int64_t soft_pin_ttl_ms; /* < 0: the master's default; >= 0 only with MC_SOFT_PIN_SET (else -600) */
  int with_hard_pin;
  const char **preferred_segments; /* tried first, in order; NULL entries skipped */
  size_t preferred_segments_count;
};
typedef struct mc_replicate_config mc_replicate_config_t;

/* Flags of the mc_store_*write* calls: MC_WRITE_COPY copies values through the staging buffer first
 * (put / put_batch semantics, -600 for a value larger than local_buffer_size); without it the call
 * is zero-copy (put_from semantics). MC_WRITE_UPSERT replaces existing keys (mc_store_upsert). */
#define MC_WRITE_COPY 1
#define MC_WRITE_UPSERT 2

/* One write with the full config (NULL = defaults). Conventions as mooncake_store_put /
 * mooncake_store_put_from / mc_store_upsert*, selected by flags. */
MC_API int mc_store_write(mooncake_store_t store, const char *key, const void *value, size_t size,
                          const mc_replicate_config_t *config, int flags);

/* Batch write with the full config; argument rules and results as mooncake_store_batch_put_from. */
MC_API int mc_store_batch_write(mooncake_store_t store, const char **keys, const void *const *values, const size_t *sizes,
                                size_t count, const mc_replicate_config_t *config, int flags, int *results_out);

/* mc_store_batch_write with key groups: group_ids NULL (none), or one per key (NULL or "" = ungrouped). The
 * keys of one group share placement (the segment its first member went to is tried first) and eviction
 * (when the master evicts one, it evicts the group's other evictable members with it); grouped keys
 * always take the PutStart path. docs/master.md, "Key groups". */
MC_API int mc_store_batch_write_grouped(mooncake_store_t store, const char **keys, const void *const *values,
                                        const size_t *sizes, size_t count, const mc_replicate_config_t *config,
                                        const char *const *group_ids, int flags, int *results_out);

/* Layer-wise (session) writes and reads (docs/store-client.md, "Sessions"). Keys' ranges are flattened as in
 * mc_store_batch_write_multi: key i owns the nbufs[i] entries of bufs/sizes/offsets after those of key i-1.
 * Every call: -1 without touching results_out for NULL arrays or a NULL key; otherwise 0 with per-key
 * results (-600 for every key when the store is not set up).
 *
 * put_session_start: PutStart for each key (sizes[i] bytes; group_ids as mc_store_batch_write_grouped);
 * per key 0, -600 (empty key, size 0, a session already open for it), -705 (the key exists), or the
 * master's code. put_session_write: writes each range (buffer, size) at offset of the key's started object,
 * to every replica: per key the bytes written, or -600 (no open session, a range outside the object, or a
 * buffer not inside memory registered with this store). put_session_end (revoke 0: PutEnd, readable;
 * 1: PutRevoke, nothing left): waits for the key's running writes; per key 0 (the session closed) or an
 * error (-600 no session; the session stays, sealed, for a retry). */
MC_API int mc_store_put_session_start(mooncake_store_t store, const char **keys, const size_t *sizes, size_t count,
                                      const mc_replicate_config_t *config, const char *const *group_ids,
                                      int *results_out);
MC_API int mc_store_put_session_write(mooncake_store_t store, const char **keys, const void *const *bufs,
                                      const size_t *sizes, const size_t *offsets, const size_t *nbufs, size_t count,
                                      int64_t *results_out);
MC_API int mc_store_put_session_end(mooncake_store_t store, const char **keys, size_t count, int revoke,
                                    int *results_out);
/* get_session_start: looks the keys up once (a read lease each) and keeps a COMPLETE replica per key
 * (this client's own first): per key 0, -702 (no complete replica) or the lookup's code. get_session_read:
 * reads each range (offset in the object, size) into its buffer (inside registered memory) from that
 * replica, with no master call: per key the bytes read, -600 (no session, range outside the object or the
 * registered memory), -707 (the lookup's lease ended: the session is dropped). get_session_end: drops the
 * keys' sessions (waiting for their running reads); 0. */
MC_API int mc_store_get_session_start(mooncake_store_t store, const char **keys, size_t count, int *results_out);
MC_API int mc_store_get_session_read(mooncake_store_t store, const char **keys, void *const *bufs, const size_t *sizes,
                                     const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results_out);
MC_API int mc_store_get_session_end(mooncake_store_t store, const char **keys, size_t count);

/* Extra segments (docs/store-client.md, "Extra segments"): mounts size bytes more under this client's segment
 * name — path NULL: allocated here; else [offset, offset + size) of that file mapped shared (offset
 * page-aligned, the file at least offset + size long) — registered with the engine at `location` (NULL or
 * "": "cpu:0"). 0 with the segment id (a UUID text, 36 characters + NUL) in id_out; -600 (not set up, size 0,
 * a file that cannot be mapped), or the master's code; -1 for a NULL store or id_out, id_len < 37. */
MC_API int mc_store_mount_extra_segment(mooncake_store_t store, const char *path, uint64_t offset, uint64_t size,
                                        const char *location, char *id_out, size_t id_len);
/* Unmounts an extra segment: grace_ms 0 at once; else gracefully (readable, no new allocations, unmounted by
 * the master after grace_ms). free_memory != 0 also gives its memory back (after the grace period). 0, -600
 * (not set up), -101 (no mounted extra segment of that id), or the master's code; -1 for NULL arguments. */
MC_API int mc_store_unmount_extra_segment(mooncake_store_t store, const char *id, uint64_t grace_ms, int free_memory);

/* Multi-buffer batch write: object i is the concatenation, in order, of the nbufs[i] buffers that follow
 * those of object i-1 in bufs/sizes (flattened). Zero-copy semantics (flags: MC_WRITE_UPSERT only).
 * -1 without touching results_out for NULL arrays, a NULL key or a NULL buffer with a size > 0. Per key
 * as mooncake_store_batch_put_from (a total size of 0 -> -600). */
MC_API int mc_store_batch_write_multi(mooncake_store_t store, const char **keys, const void *const *bufs, const size_t *sizes,
                                      const size_t *nbufs, size_t count, const mc_replicate_config_t *config, int flags,
                                      int *results_out);

/* mc_store_batch_write_multi with key groups (group_ids NULL or one per key, as mc_store_batch_write_grouped). */
MC_API int mc_store_batch_write_multi_grouped(mooncake_store_t store, const char **keys, const void *const *bufs,
                                              const size_t *sizes, const size_t *nbufs, size_t count,
                                              const mc_replicate_config_t *config, const char *const *group_ids,
                                              int flags, int *results_out);

/* Multi-buffer batch read: object i is scattered over its nbufs[i] buffers (flattened as above). Per
 * key the object size, or negative as mooncake_store_batch_get_into (-600 when the object is larger
 * than the sum of its buffers). -1/no-touch rules as mc_store_batch_write_multi. */
MC_API int mc_store_batch_get_into_multi(mooncake_store_t store, const char **keys, void *const *bufs, const size_t *sizes,
                                         const size_t *nbufs, size_t count, int64_t *results_out);

/* One readable replica as the master reports it. Strings are owned by the array. */
struct mc_replica_desc {
  int status;        /* ReplicaStatus: 3 = COMPLETE */
  uint64_t size;     /* object bytes */
  uint64_t address;  /* buffer address in the holder's process */
  char *endpoint;    /* transfer-engine segment name of the holder */
  char *segment_name;
};
typedef struct mc_replica_desc mc_replica_desc_t;

/* The replicas of key (grants a read lease). On success returns the count and stores a malloc'ed array
 * in *out (free with mc_store_replica_desc_free); on failure a negative code and *out = NULL. */
MC_API int mc_store_get_replica_desc(mooncake_store_t store, const char *key, mc_replica_desc_t **out);
MC_API void mc_store_replica_desc_free(mc_replica_desc_t *descs, int count);

/* 1 when [ptr, ptr+len) lies inside one range registered with this client (its staging buffer and
 * segment included), else 0 (also before setup); -1 for a NULL handle. */
MC_API int mc_store_is_registered(mooncake_store_t store, const void *ptr, size_t len);

/* BatchReplicaClear (docs/master.md, "BatchReplicaClear"): drops the replicas of keys[0..count) that this client wrote,
 * that are complete and whose lease has expired; segment_name NULL or "" = all replicas of the key, else
 * only the one on that segment (an object left without replicas is removed). cleared_out[i] = 1 for each
 * key cleared, else 0 (missing, empty, another writer's, leased, being written, no replica there).
 * Returns the number cleared, -1 (cleared_out untouched) for a NULL handle/keys/cleared_out or a NULL
 * keys[i], or a negative code (-600 not set up; the master's error) with every cleared_out[i] = 0 —
 * though keys of earlier chunks (65536 keys each) may already be cleared then. */
MC_API int mc_store_batch_replica_clear(mooncake_store_t store, const char **keys, size_t count, const char *segment_name,
                                        int *cleared_out);

/* Copy and move tasks (docs/master.md, "Copy and move tasks"): the master places new replicas of key on the
 * target segments (by segment name) and the client owning the first target moves the bytes there; a move
 * then drops the replica on `source` (readers holding a lease on it keep reading it until the lease ends).
 * While a task runs, remove and upsert of key answer -708. A task id is two integers, (0, 0) when none. */
typedef struct mc_task_id {
  uint64_t hi, lo;
} mc_task_id_t;
/* 0 with *id_out, or negative (*id_out = (0, 0)): -704 no such key, -703 key being written, -708 a task
 * runs already, -101 unknown segment, -710 source holds no replica, -711 a target holds one already, -200
 * no room on a target, -600 bad arguments (none or more than 8 targets, a repeated target, source =
 * target), -1401 too many pending tasks; -1 for a NULL handle/key/targets/id_out. */
MC_API int mc_store_create_copy_task(mooncake_store_t store, const char *key, const char **targets, size_t count,
                                     mc_task_id_t *id_out);
MC_API int mc_store_create_move_task(mooncake_store_t store, const char *key, const char *source, const char *target,
                                     mc_task_id_t *id_out);
/* A task as the master knows it: type 0 copy, 1 move; status 0 PENDING, 1 PROCESSING, 2 FAILED, 3 SUCCESS. */
typedef struct mc_task_info {
  mc_task_id_t id;
  int type, status;
  uint64_t created_at_ms_epoch, last_updated_at_ms_epoch;
  char assigned_client[40]; /* the executor's client id (text) */
  char message[256];        /* why it failed, or what its executor said */
} mc_task_info_t;
/* 0 with *out filled, -1400 unknown (or pruned) id, -1 for a NULL handle or out. */
MC_API int mc_store_query_task(mooncake_store_t store, mc_task_id_t id, mc_task_info_t *out);

/* Tears the client down as destroy does but keeps the handle usable for a new setup (Python close()).
 * Idempotent; 0, or -1 for a NULL handle. */
MC_API int mc_store_close(mooncake_store_t store);

/* Standalone mode (docs/standalone.md): makes the handle a "dummy" that owns no segment and no engine and
 * forwards every call to the real client process listening on "@mooncake_client_<port>.sock" of this host
 * (server_address "host:port"; NULL or "" = port 50052; the host part is not used). The dummy shares
 * mem_pool_size + local_buffer_size bytes of memory with it: buffers inside the pool (see
 * mc_store_alloc_from_mem_pool) are read and written by the real client's transfers directly; other
 * buffers and the copying calls go through the local_buffer_size staging part (-600 for what does not
 * fit). A handle already set up is torn down once the real client has accepted the dummy (a failure leaves
 * the handle as it was). Returns 0; -600 bad sizes or address; -900 no real
 * client there (or it went away); the real client's code when it refuses the memory. */
MC_API int mc_store_setup_dummy(mooncake_store_t store, uint64_t mem_pool_size, uint64_t local_buffer_size,
                                const char *server_address);

/* size bytes (64-byte aligned) of a dummy's memory pool, as an address; 0 when the pool is exhausted, size
 * is 0, or the handle is not a dummy. Memory is never returned to the pool (it lives as long as the setup). */
MC_API uint64_t mc_store_alloc_from_mem_pool(mooncake_store_t store, size_t size);

/* Bytes of memory this client is still warming in the background (its segment and staging buffer, and
 * the parts of same-host holders' segments it has used; see docs/transfer-engine.md "Warming memory").
 * 0 when everything is warm, before setup, and with MC_SEGMENT_PREFAULT=0. */
MC_API uint64_t mc_store_warmup_pending(mooncake_store_t store);

#ifdef __cplusplus
}
#endif
#endif
