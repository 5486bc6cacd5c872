/* Mooncake Transfer Engine: the public C API.
 *
 * Moves bytes between registered memory of processes on any node. Each process runs one engine that
 * owns one segment (named by local_server_name); peers find each other through a metadata service
 * (embedded HTTP server, etcd, Redis, or none with P2PHANDSHAKE).
 *
 * The upstream names (createTransferEngine, submitTransfer, ...) keep their upstream semantics and return
 * conventions (docs/transfer-engine.md, "C API"). Ownership: every const char * argument is copied before
 * the call returns. Handles are opaque. All calls are thread-safe unless noted. */
#ifndef MOONCAKE_TRANSFER_ENGINE_H
#define MOONCAKE_TRANSFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ids are macros, as upstream declares them (code may test them with #ifdef). */
#define segment_handle_t int32_t
#define segment_id_t int32_t
#define batch_id_t uint64_t

#define LOCAL_SEGMENT (0)
#define INVALID_BATCH UINT64_MAX

#define OPCODE_READ (0)
#define OPCODE_WRITE (1)

/* Task states. TCP/SHM produce WAITING, COMPLETED and FAILED (TIMEOUT with MC_SLICE_TIMEOUT). */
#define STATUS_WAITING (0)
#define STATUS_PENDING (1)
#define STATUS_INVALID (2)
#define STATUS_CANCELED (3)
#define STATUS_COMPLETED (4)
#define STATUS_TIMEOUT (5)
#define STATUS_FAILED (6)

/* Engine error codes (negative, from engine int calls) and Status codes (positive, from the
 * Status wrappers: submitTransfer, getTransferStatus, freeBatchID, ...). One table generates both
 * enums and the name/strerror functions. Status = -ERR except NotImplemented (999 vs -303) and
 * NotSupportedTransport (8, no ERR twin). These collide numerically with store ErrorCodes: never mix. */
#define MC_TE_ERRORS(X)                                                              \
  X(INVALID_ARGUMENT, -1, 1, InvalidArgument, "invalid argument")                    \
  X(TOO_MANY_REQUESTS, -2, 2, TooManyRequests, "too many requests for the batch")    \
  X(ADDRESS_NOT_REGISTERED, -3, 3, AddressNotRegistered, "address not registered")   \
  X(BATCH_BUSY, -4, 4, BatchBusy, "batch has unfinished tasks")                      \
  X(DEVICE_NOT_FOUND, -6, 6, DeviceNotFound, "no usable device")                     \
  X(ADDRESS_OVERLAPPED, -7, 7, AddressOverlapped, "address range overlaps a registration") \
  X(DNS, -101, 101, Dns, "name resolution failed")                                    \
  X(SOCKET, -102, 102, Socket, "socket error")                                        \
  X(MALFORMED_JSON, -103, 103, MalformedJson, "malformed JSON")                       \
  X(REJECT_HANDSHAKE, -104, 104, RejectHandshake, "handshake rejected")               \
  X(METADATA, -200, 200, Metadata, "metadata service error")                          \
  X(ENDPOINT, -201, 201, Endpoint, "endpoint error")                                  \
  X(CONTEXT, -202, 202, Context, "device context error")                              \
  X(NUMA, -300, 300, Numa, "NUMA error")                                              \
  X(CLOCK, -301, 301, Clock, "clock error")                                           \
  X(MEMORY, -302, 302, Memory, "out of memory")                                       \
  X(NOT_IMPLEMENTED, -303, 999, NotImplemented, "not implemented")

enum mc_te_err {
#define MC_TE_ERR_ENUM_(n, err, st, sname, msg) ERR_##n = (err),
  MC_TE_ERRORS(MC_TE_ERR_ENUM_)
#undef MC_TE_ERR_ENUM_
};

enum mc_te_status_code {
  MC_TE_STATUS_OK = 0,
#define MC_TE_ST_ENUM_(n, err, st, sname, msg) MC_TE_STATUS_##n = (st),
  MC_TE_ERRORS(MC_TE_ST_ENUM_)
#undef MC_TE_ST_ENUM_
  MC_TE_STATUS_NOT_SUPPORTED_TRANSPORT = 8,
};

/* Names ("ERR_ADDRESS_OVERLAPPED") and messages for ERR_* codes; "UNKNOWN_ERROR" otherwise. */
MC_API const char *mc_te_err_name(int err);
MC_API const char *mc_te_strerror(int err);
/* Names for positive Status codes ("AddressOverlapped", "NotSupportedTransport"). */
MC_API const char *mc_te_status_name(int status);
/* Names for task states ("COMPLETED"). */
MC_API const char *mc_te_task_state_name(int state);

typedef void *transfer_engine_t;
typedef void *transport_t;

struct transfer_request {
  int opcode;
  void *source;
  segment_id_t target_id;
  uint64_t target_offset; /* absolute virtual address in the target process (RAM segments) */
  uint64_t length;
};
typedef struct transfer_request transfer_request_t;

struct transfer_status {
  int status;
  uint64_t transferred_bytes;
};
typedef struct transfer_status transfer_status_t;

struct notify_msg {
  char *name;
  char *msg;
};
typedef struct notify_msg notify_msg_t;

struct buffer_entry {
  void *addr;
  size_t length;
};
typedef struct buffer_entry buffer_entry_t;

struct nic_load_stat {
  char device_name[64];
  uint64_t inflight_bytes;
  double ewma_bandwidth_bps;
};
typedef struct nic_load_stat nic_load_stat_t;

struct segment_desc {
  int type;
  union {
    struct {
      void *addr;
      uint64_t size;
      const char *location;
    } rdma;
    struct {
      const char *file_path;
      const char *subsystem_name;
      const char *proto;
      const char *ip;
      uint64_t port;
    } nvmeof;
  } desc_;
};
typedef struct segment_desc segment_desc_t;

/* ---- Upstream API (docs/transfer-engine.md, "C API") ---- */

/* NULL on failure. metadata_conn_string: "P2PHANDSHAKE", "etcd://h:p[,h:p]" or bare "h:p",
 * "redis://h:p", "http(s)://h:p/path". auto_discover != 0 installs the best transport. A server name
 * whose rpc_meta key is held by a live engine fails the creation, and that engine's keys stay. */
MC_API transfer_engine_t createTransferEngine(const char *metadata_conn_string, const char *local_server_name,
                                              const char *ip_or_host_name, uint64_t rpc_port,
                                              int auto_discover);
/* Stops the engine, deletes the metadata keys it published, frees it. NULL is ignored. Waits for a
 * teardown of the engine by a signal in progress (enableGracefulShutdown). */
MC_API void destroyTransferEngine(transfer_engine_t engine);
MC_API int discoverTopology(transfer_engine_t engine);
MC_API int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);
/* "tcp" or "shm" (args NULL); returns the (existing) transport or NULL. */
MC_API transport_t installTransport(transfer_engine_t engine, const char *proto, void **args);
MC_API int uninstallTransport(transfer_engine_t engine, const char *proto);

MC_API segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);
MC_API segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);
MC_API int closeSegment(transfer_engine_t engine, segment_id_t segment_id);
MC_API int removeLocalSegment(transfer_engine_t engine, const char *segment_name);
MC_API int warmupEfaSegment(transfer_engine_t engine, const char *segment_name);

MC_API int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                               int remote_accessible);
MC_API int unregisterLocalMemory(transfer_engine_t engine, void *addr);
MC_API int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list, size_t buffer_len,
                                    const char *location);
MC_API int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len);

MC_API batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);
MC_API int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
                          size_t count);
MC_API int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
                                    struct transfer_request *entries, size_t count, notify_msg_t notify_msg);
MC_API int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                             struct transfer_status *status);
/* Succeeds once every task is terminal (polled or not); BatchBusy (4) otherwise. */
MC_API int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);

/* Drains received notifications into a malloc'ed array (NULL when none); free with freeNotifsMsgBuf. */
MC_API notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);
MC_API int freeNotifsMsgBuf(notify_msg_t *msgs, int size);
MC_API int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg);

MC_API int syncSegmentCache(transfer_engine_t engine);
MC_API int getNicLoadStats(transfer_engine_t engine, nic_load_stat_t *stats, size_t *count);
/* On SIGINT, SIGTERM or SIGHUP the engine's control RPC stops and its metadata keys are deleted, then the
 * signal's default action ends the process (docs/store-client.md, "Process lifecycle: exit and signals").
 * Only signals still at SIG_DFL are handled: the application's own handlers and SIG_IGN are kept. Any
 * number of engines; destroyTransferEngine takes the engine out again. */
MC_API void enableGracefulShutdown(transfer_engine_t engine);
MC_API int showLinks(transfer_engine_t engine, char *buf_out, size_t buf_len, int json);

/* ---- Native extensions ---- */

/* Allocates `length` bytes of memfd-backed memory that same-host peers can map (the fast same-host
 * path), registers it with `location`, and returns it (NULL on failure). The call does not wait for
 * the memory: a low-priority background thread of the engine populates its pages afterwards, so the
 * first writes into it do not pay a page fault per 4 KiB (MC_SEGMENT_PREFAULT=0: pages are committed
 * by the first writes only). Free with mc_te_free_shared(), which unregisters it. */
MC_API void *mc_te_alloc_shared(transfer_engine_t engine, size_t length, const char *location);
MC_API int mc_te_free_shared(transfer_engine_t engine, void *addr);
/* Bytes of background warming work left: this engine's mc_te_alloc_shared memory, and chunks of
 * same-host peers' memory it has started to use (0 when all is warm, or with MC_SEGMENT_PREFAULT=0). */
MC_API uint64_t mc_te_prefault_pending(transfer_engine_t engine);
/* Publishes this engine's rpc_meta key and segment descriptor again (e.g. after the metadata service
 * restarted empty). No-op under P2PHANDSHAKE. Returns 0 or ERR_METADATA. */
MC_API int mc_te_republish(transfer_engine_t engine);
/* The segment name this engine publishes (rewritten to host:port under P2PHANDSHAKE). Valid for the
 * engine's lifetime. */
MC_API const char *mc_te_local_segment_name(transfer_engine_t engine);
/* Descriptor of an opened segment as compact JSON (malloc'ed; caller frees), NULL if unknown. */
MC_API char *mc_te_segment_json(transfer_engine_t engine, segment_id_t segment_id);
/* Re-reads a segment's descriptor for a retry: its id with the fresh descriptor; the cached one when the
 * descriptor cannot be fetched (metadata service or peer unreachable); -1 when the metadata service
 * answers that the segment has no descriptor any more (unmounted, or its owner expired), so a retry
 * does not wait on an address that is known to be gone. */
MC_API segment_id_t mc_te_reopen_segment(transfer_engine_t engine, const char *name);
/* Path the engine uses to reach a segment: "tcp", "shm", or NULL when unknown. */
MC_API const char *mc_te_segment_path(transfer_engine_t engine, segment_id_t segment_id);
/* Batch status (docs/transfer-engine.md, "C API"): COMPLETED iff all tasks completed; FAILED if any failed or
 * timed out; else WAITING. Does not mark tasks as observed. */
MC_API int mc_te_batch_status(transfer_engine_t engine, batch_id_t batch_id);
/* Blocks until every task of the batch is terminal or timeout_ms passes (-1: no limit); returns the
 * batch status. */
MC_API int mc_te_wait_batch(transfer_engine_t engine, batch_id_t batch_id, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
