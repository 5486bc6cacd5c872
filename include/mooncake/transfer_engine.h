/* Mooncake Transfer Engine: the public C API (libmooncake_te).
 *
 * Moves bytes between registered memory of processes on any node. Each process runs one engine that
 * owns one segment (named by local_server_name); peers find each other through a metadata service
 * (embedded HTTP server, etcd, Redis, or none with P2PHANDSHAKE).
 *
 * Two layers, one header:
 *   upstream names   createTransferEngine, submitTransfer, ...: names, argument order, types and return
 *                    conventions are upstream's (docs/transfer-engine.md, "C API"), so upstream C programs
 *                    build unchanged. The conventions are mixed, as upstream's:
 *                      engine calls returning int: 0 or a negative ERR_* code;
 *                      Status calls (submitTransfer, submitTransferWithNotify, getTransferStatus,
 *                      freeBatchID): 0 or a positive MC_TE_STATUS_* code;
 *                      ids and handles: -1, INVALID_BATCH or NULL on failure.
 *                    Where upstream crashes on a NULL engine these answer ERR_INVALID_ARGUMENT (the Status
 *                    calls InvalidArgument, 1; the id and handle calls their failure value; the
 *                    compatibility no-ops 0).
 *   mc_te_*          native additions. Same conventions.
 *
 * Ownership: what is passed in (strings, request and buffer lists, notification texts) is only read during
 * the call; strings are copied before it returns. Out-parameters are written only as each call says.
 * Memory returned to the caller says beside its call how it is freed.
 * Handles are opaque; segment and batch ids belong to the engine that gave them.
 * Threads: all calls are thread-safe (any number of threads may call into one engine) except where a call
 * says otherwise: destroyTransferEngine, and the calls on one batch id (submissions to one batch, and
 * freeBatchID against any call on that batch).
 * Blocking: calls that talk to the metadata service or a peer say so; each such request has a bounded
 * deadline (docs/transfer-engine.md, "Metadata"; control RPC calls 10 s; TCP transfers
 * MC_TCP_CONNECT_TIMEOUT_MS and MC_TCP_IO_TIMEOUT_MS), so only mc_te_wait_batch with a negative timeout
 * waits without a bound. */
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

/* Task states (transfer_status.status). The TCP and shared-memory transports produce WAITING (not yet
 * terminal), COMPLETED (the bytes landed) and FAILED only: a transfer that stops making progress for
 * MC_TCP_IO_TIMEOUT_MS ends FAILED, not TIMEOUT. PENDING, INVALID, CANCELED and TIMEOUT are upstream's, kept
 * for source compatibility; of them only INVALID is returned, by mc_te_batch_status for an unknown batch. */
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

/* The name of an ERR_* code ("ERR_ADDRESS_OVERLAPPED"; 0 gives "OK", any other value "UNKNOWN_ERROR"). All four
 * name functions return static strings (never NULL, never to be freed) and are safe from any thread. */
MC_API const char *mc_te_err_name(int err);
/* The message of an ERR_* code ("address range overlaps a registration"; 0 "success", else "unknown error"). */
MC_API const char *mc_te_strerror(int err);
/* The name of a Status code ("AddressOverlapped", "NotSupportedTransport"; 0 "OK", else "Unknown"). */
MC_API const char *mc_te_status_name(int status);
/* The name of a task state ("COMPLETED"; outside STATUS_WAITING..STATUS_FAILED "UNKNOWN"). */
MC_API const char *mc_te_task_state_name(int state);

/* An engine handle (createTransferEngine), and a transport handle (installTransport; only ever compared
 * with NULL: no call takes one). */
typedef void *transfer_engine_t;
typedef void *transport_t;

/* One request of a submission: one task of its batch.
 *   opcode         OPCODE_READ (target -> source) or OPCODE_WRITE (source -> target); anything else refuses
 *                  the submission (InvalidArgument, 1).
 *   source         local address: [source, source + length) must lie inside one registration of this engine
 *                  (remotely accessible or not), else the submission is refused (AddressNotRegistered, 3).
 *   target_id      an id from openSegment / openSegmentNoCache of this engine, or LOCAL_SEGMENT (this engine).
 *   target_offset  absolute virtual address in the target process; [target_offset, + length) must lie inside
 *                  one of its remotely accessible registrations, else the task ends FAILED.
 *   length         bytes; 0 is a task that completes at once without I/O (source not checked). */
struct transfer_request {
  int opcode;
  void *source;
  segment_id_t target_id;
  uint64_t target_offset; /* absolute virtual address in the target process (RAM segments) */
  uint64_t length;
};
typedef struct transfer_request transfer_request_t;

/* A task's state (STATUS_*) and the bytes of its pieces that landed so far: its length once COMPLETED; for a
 * FAILED task the pieces that completed before the failure (0 for one sent whole). */
struct transfer_status {
  int status;
  uint64_t transferred_bytes;
};
typedef struct transfer_status transfer_status_t;

/* A notification: two NUL-terminated strings. Passed in, both are only read (NULL counts as ""); returned by
 * getNotifsFromEngine, both are malloc'ed and belong to that call's array. */
struct notify_msg {
  char *name;
  char *msg;
};
typedef struct notify_msg notify_msg_t;

/* One buffer of registerLocalMemoryBatch. */
struct buffer_entry {
  void *addr;
  size_t length;
};
typedef struct buffer_entry buffer_entry_t;

/* Upstream's per-NIC load record. This build drives no NIC: getNicLoadStats never fills one. */
struct nic_load_stat {
  char device_name[64];
  uint64_t inflight_bytes;
  double ewma_bandwidth_bps;
};
typedef struct nic_load_stat nic_load_stat_t;

/* Upstream's segment description, kept for source compatibility: no call of this API takes or returns it. */
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

/* ------------------------------------------------------------------ lifecycle */

/* Starts an engine and its (empty) segment. Returns the handle, or NULL (logged) when an argument is bad
 * (NULL connection string; NULL or empty server name, or one that is not "host[:port]"), the connection
 * string's scheme is unknown, the control RPC finds no free port, the rpc_meta key cannot be written
 * (metadata service unreachable) or is held by a live engine (a name collision: that engine's keys stay),
 * or auto_discover != 0 and the transport cannot start.
 *   metadata_conn_string  "P2PHANDSHAKE" (exactly; no metadata service), "etcd://h:p[,h:p]" or bare
 *                         "h:p[,h:p]" (etcd), "redis://h:p", "http(s)://h:p/path" (docs/transfer-engine.md,
 *                         "Connection strings and keys").
 *   local_server_name     the segment name peers open, used verbatim; under P2PHANDSHAKE it becomes
 *                         "host:<control RPC port>" (a missing port counts as MC_HANDSHAKE_PORT, 12001, when
 *                         parsing; mc_te_local_segment_name says the result).
 *   ip_or_host_name, rpc_port  accepted and ignored: the control RPC listens on a free port of
 *                         MC_MIN_RPC_PORT..MC_MAX_RPC_PORT and advertises MC_TCP_BIND_ADDRESS or the first UP
 *                         non-loopback IPv4 (the name's host under P2PHANDSHAKE); MC_LEGACY_RPC_PORT_BINDING=1
 *                         listens on the name's port and advertises its host (getLocalIpAndPort says which).
 *   auto_discover         != 0 installs "tcp" (with "shm", as installTransport does); 0 installs nothing:
 *                         install a transport before opening segments and submitting.
 * An rpc_meta key left by a dead previous engine of the same name is replaced. Blocks for the metadata
 * round trips (and a 2 s probe of a previous holder of the key); nothing under P2PHANDSHAKE. */
MC_API transfer_engine_t createTransferEngine(const char *metadata_conn_string, const char *local_server_name,
                                              const char *ip_or_host_name, uint64_t rpc_port,
                                              int auto_discover);
/* Stops the engine and frees it; NULL is ignored. It waits for a teardown of the engine by a signal in
 * progress (enableGracefulShutdown), sends the notifications already queued (each bounded by the control
 * RPC deadline), stops the control RPC and the transports (requests still queued end FAILED), deletes the
 * metadata keys it published itself (no others), waits until no copy of another engine of this process
 * uses its memory, and unmaps its mc_te_alloc_shared memory. Memory the application registered stays the
 * application's. The handle and every segment and batch id of the engine are invalid afterwards. Not
 * thread-safe against other calls on the same engine: call it once they have returned. */
MC_API void destroyTransferEngine(transfer_engine_t engine);
/* Compatibility no-op (the TCP and shared-memory transports need no NIC topology): 0, ERR_INVALID_ARGUMENT
 * for a NULL engine. */
MC_API int discoverTopology(transfer_engine_t engine);
/* Writes "ip:port" into buf_out: the advertised address and the control RPC port (what the engine's
 * rpc_meta key points at; an IPv6 address without brackets), cut to buf_len - 1 bytes and NUL-terminated.
 * Always 0; with a NULL engine, NULL buf_out or buf_len 0 nothing is written. */
MC_API int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);
/* Installs a transport: a network one, "tcp" or "rdma" (and with it "shm", the same-host path, unless
 * MC_FORCE_TCP=1 or MC_SAME_HOST_PATH=0: docs/transfer-engine.md, "Path choice"), or "shm" alone. A network
 * transport other than tcp that cannot be installed ("rdma" on a host with no usable RDMA device: "no RDMA
 * device", "device rxe9 not found"), or any under MC_FORCE_TCP=1, is replaced by "tcp", logged with the reason
 * and counted (mc_te_metrics); mc_te_transport_name says which was installed. args: NULL, or for "rdma" args[0]
 * a device list ("rxe0", "mlx5_0,mlx5_1") or a NIC priority matrix JSON (docs/rdma.md); ignored otherwise.
 * Returns the transport (the installed one when it is already there), or NULL: NULL engine or proto,
 * another protocol ("nvmeof", ...: logged), or the transport cannot start (no free data port in
 * MC_MIN_RPC_PORT..MC_MAX_RPC_PORT). Republishes the segment descriptor (blocking; a failure is logged, not
 * returned). A transport stays installed until destroyTransferEngine. A segment's path is chosen when its
 * descriptor is first fetched and again only when the descriptor changes: a segment opened before its
 * transport was installed stays unreachable (NotSupportedTransport) until then, so install first. */
MC_API transport_t installTransport(transfer_engine_t engine, const char *proto, void **args);
/* Compatibility no-op: always 0; the transport stays installed until destroyTransferEngine. */
MC_API int uninstallTransport(transfer_engine_t engine, const char *proto);
/* The protocol of a transport installTransport returned ("tcp", "shm"; static strings), NULL for NULL. */
MC_API const char *mc_te_transport_name(transport_t transport);

/* ------------------------------------------------------------------ segments */

/* The id of a segment, for transfer_request.target_id. segment_name is a peer's segment name (one leading
 * '/' is ignored; under P2PHANDSHAKE "host:port" of the peer's control RPC, port 12001 when omitted). This
 * engine's own name gives LOCAL_SEGMENT without a lookup; a name opened before gives its id from the cache,
 * without a lookup (the descriptor may be stale: openSegmentNoCache, syncSegmentCache); any other name is
 * fetched (metadata GET, or the peer's control RPC under P2PHANDSHAKE: blocking, bounded) and gets the next
 * id (ids are never reused within an engine). -1: NULL engine, NULL or empty name, no descriptor, metadata
 * service or peer unreachable, malformed descriptor. An id is returned even when no installed transport
 * can reach the segment (logged); a submission to it then answers NotSupportedTransport (8). */
MC_API segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);
/* As openSegment, but the descriptor is always fetched (the own name still gives LOCAL_SEGMENT): an opened
 * name keeps its id and gets the fresh descriptor (transfers in flight finish with the old one). A failure
 * is a negative ERR_* code instead of -1: ERR_METADATA (no descriptor, service or peer unreachable),
 * ERR_MALFORMED_JSON (malformed descriptor), ERR_INVALID_ARGUMENT (NULL engine, NULL or empty name, a
 * P2PHANDSHAKE name that is not host:port); the cached descriptor, if any, stays. */
MC_API segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);
/* Compatibility no-op: 0 for any engine and id; the id stays valid with its cached descriptor
 * (removeLocalSegment forgets one). */
MC_API int closeSegment(transfer_engine_t engine, segment_id_t segment_id);
/* Forgets an opened segment (upstream's name: the local cache of segments, not this engine's segment). Its
 * id stays taken but dead: submissions to it answer InvalidArgument (1), genNotifyInEngine ERR_METADATA,
 * mc_te_segment_path NULL; the next openSegment of the name fetches the descriptor again under a new id.
 * Nothing is deleted from the metadata service. The engine's own name, or a name not opened: nothing
 * happens. 0, or ERR_INVALID_ARGUMENT for a NULL engine or a NULL or empty name. */
MC_API int removeLocalSegment(transfer_engine_t engine, const char *segment_name);
/* Compatibility no-op (no EFA in this build): 0 for any arguments; nothing is opened or fetched. */
MC_API int warmupEfaSegment(transfer_engine_t engine, const char *segment_name);

/* ------------------------------------------------------------------ local memory */

/* Adds [addr, addr + length) of this process to the engine's segment. remote_accessible != 0: peers may
 * read and write it (it is published in the descriptor); 0: only a source of this engine's own requests.
 * location ("cpu:N", "cuda:N", ...) is recorded only (docs/transfer-engine.md, "Known limits"); NULL, ""
 * and "*" are recorded as "cpu:0". The memory stays the caller's: not copied, pinned or freed; it must stay
 * mapped until it is unregistered. Returns 0, or: ERR_INVALID_ARGUMENT (NULL engine or addr, length 0, a
 * range that wraps); ERR_ADDRESS_OVERLAPPED (overlaps a registration of this engine; adjacent ranges are
 * fine; of two racing overlapping calls exactly one wins); ERR_METADATA (registered, but the descriptor
 * could not be republished: peers see the range after the next publish, e.g. mc_te_republish). Blocks for
 * the republish (a metadata PUT; none under P2PHANDSHAKE). */
MC_API int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                               int remote_accessible);
/* Removes the registration that starts at addr (an address inside one is not enough). Before it returns no
 * peer's TCP transfer uses the range any more, same-host copies announced by peers have drained (bounded:
 * 2 s) and copies of other engines of this process have finished, so the memory may be freed then; this
 * engine's own tasks that read or write it are not waited for (wait for their batch first). Returns 0, or:
 * ERR_INVALID_ARGUMENT (NULL engine; memory of mc_te_alloc_shared, which stays registered: free it with
 * mc_te_free_shared); ERR_ADDRESS_NOT_REGISTERED (no registration starts at addr); ERR_METADATA (removed,
 * the republish failed). Blocking as registerLocalMemory. */
MC_API int unregisterLocalMemory(transfer_engine_t engine, void *addr);
/* Registers buffer_list[0..buffer_len), all remotely accessible, all with `location` (as
 * registerLocalMemory). All or nothing: checked in address order, the first entry with a NULL addr, length
 * 0 or a wrapping range gives ERR_INVALID_ARGUMENT, the first that overlaps another entry or a registration
 * ERR_ADDRESS_OVERLAPPED, and nothing is registered. ERR_INVALID_ARGUMENT also for a NULL engine, or a NULL
 * list with buffer_len > 0; buffer_len 0 registers nothing (0). One republish for the whole batch
 * (ERR_METADATA as registerLocalMemory). The list is only read during the call. */
MC_API int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list, size_t buffer_len,
                                    const char *location);
/* Unregisters every addr_list[i] as unregisterLocalMemory does and goes on past failures; returns the first
 * failure (ERR_ADDRESS_NOT_REGISTERED), else the republish's result (0 or ERR_METADATA). Unlike
 * unregisterLocalMemory it takes mc_te_alloc_shared memory too, and unmaps it as mc_te_free_shared does.
 * ERR_INVALID_ARGUMENT for a NULL engine, or a NULL list with addr_len > 0. */
MC_API int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len);

/* ------------------------------------------------------------------ batches */

/* A batch of up to batch_size tasks, counted over all its submissions (task ids 0..batch_size-1 in
 * submission order; a slot is never reused). INVALID_BATCH for a NULL engine, batch_size 0 or above
 * 16777216 (2^24), or no memory for its tasks. Batches of one engine are independent; a freed batch's id is
 * refused by every call (InvalidArgument), never taken for another batch's. Does not block. */
MC_API batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);
/* Starts entries[0..count) as the batch's next tasks (the first gets task id = tasks submitted so far).
 * Returns 0 (started; poll getTransferStatus or mc_te_wait_batch), or refuses the whole submission, nothing
 * started: InvalidArgument (1) for a NULL engine, NULL entries with count > 0, an unknown or freed batch, a
 * bad opcode or an unknown or forgotten target_id; AddressNotRegistered (3) for a source outside this
 * engine's registrations; NotSupportedTransport (8) for a target no installed transport reaches;
 * TooManyRequests (2) when the batch would hold more than batch_size tasks. A target range outside the
 * peer's registrations is found by the transfer: that task ends FAILED. count 0 returns 0.
 * Blocking: same-host copies are done in the calling thread (those tasks are terminal on return), and a
 * lone request of at most 1 MiB to a peer with an idle TCP lane is sent and awaited by it (bounded by
 * MC_TCP_CONNECT_TIMEOUT_MS and MC_TCP_IO_TIMEOUT_MS; docs/transfer-engine.md, "TCP"); the rest is queued.
 * Not thread-safe per batch: submissions to one batch must not run at once (different batches may). */
MC_API int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
                          size_t count);
/* As submitTransfer; in addition, once every task of the batch is terminal and none of its tasks ever
 * FAILED, the engine's notifier thread (not the caller, not a poller) sends notify_msg (copied now) to the
 * segment of entries[0].target_id (LOCAL_SEGMENT, this engine itself, when count is 0), where
 * getNotifsFromEngine returns it. A batch with a FAILED task sends nothing; a failed send is logged and
 * dropped. Each notification is sent at most once; one given while an earlier one of the batch is still
 * unsent replaces it. Returns as submitTransfer (a refused submission sets no notification). */
MC_API int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
                                    struct transfer_request *entries, size_t count, notify_msg_t notify_msg);
/* Fills *status with task task_id's state and byte count and returns 0; otherwise leaves *status untouched
 * and returns InvalidArgument (1): NULL engine or status, unknown or freed batch, task_id not submitted yet
 * (>= the tasks submitted to the batch). Does not wait and does not drive the transfer. */
MC_API int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                             struct transfer_status *status);
/* Frees the batch: 0 once every submitted task is terminal (polled or not); BatchBusy (4) while any is
 * still running (the batch stays valid: wait, e.g. mc_te_wait_batch, and free it again); InvalidArgument
 * (1) for a NULL engine or an unknown or already freed batch. Not thread-safe per batch: no other call on
 * the same batch may run at the same time. */
MC_API int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);

/* ------------------------------------------------------------------ notifications */

/* Takes every notification received so far, in arrival order: an array of *size entries, or NULL with *size
 * 0 when there is none (also for a NULL engine; NULL size: NULL, nothing taken). The array and its strings
 * belong to the caller: free them with freeNotifsMsgBuf. Taking them makes room in the inbox (at most
 * MC_NOTIFY_INBOX_MAX messages and MC_NOTIFY_INBOX_MAX_BYTES bytes: docs/transfer-engine.md,
 * "Notifications"). Does not block. */
MC_API notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);
/* Frees an array of getNotifsFromEngine with its `size` entries' strings. NULL is ignored. Always 0. */
MC_API int freeNotifsMsgBuf(notify_msg_t *msgs, int size);
/* Sends notify_msg to the engine of segment target_id (an id of openSegment; LOCAL_SEGMENT: this engine)
 * over its control RPC, in the calling thread, and waits for the answer (bounded). Returns 0 (in the
 * target's inbox), or: ERR_INVALID_ARGUMENT (NULL engine, a P2PHANDSHAKE name that is not host:port);
 * ERR_METADATA (unknown or forgotten target_id, target_id above INT32_MAX, or the target's rpc_meta key,
 * read for a descriptor without the control RPC's address, cannot be read); ERR_MALFORMED_JSON (that key is
 * malformed); ERR_SOCKET (the target does not answer); ERR_TOO_MANY_REQUESTS (the target's inbox is full:
 * docs/transfer-engine.md, "Notifications"). NULL strings are sent as "". */
MC_API int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg);

/* ------------------------------------------------------------------ diagnostics */

/* Fetches the descriptor of every opened segment again (blocking: one fetch each, as openSegmentNoCache)
 * and adopts the changed ones under their ids. Returns 0, or the first failure's ERR_* code (as
 * openSegmentNoCache) after trying them all: a segment whose fetch failed keeps its cached descriptor.
 * ERR_INVALID_ARGUMENT for a NULL engine. */
MC_API int syncSegmentCache(transfer_engine_t engine);
/* Upstream's per-NIC load. The TCP and shared-memory transports drive no NIC: sets *count to 0 and returns
 * 0, stats untouched (may be NULL); -1 (ERR_INVALID_ARGUMENT) for a NULL engine or count. */
MC_API int getNicLoadStats(transfer_engine_t engine, nic_load_stat_t *stats, size_t *count);
/* On SIGINT, SIGTERM or SIGHUP the engine's control RPC stops and its metadata keys are deleted, then the
 * signal's default action ends the process (docs/store-client.md, "Process lifecycle: exit and signals").
 * Only signals still at SIG_DFL are handled: the application's own handlers and SIG_IGN are kept. Any
 * number of engines; destroyTransferEngine takes the engine out again. NULL is ignored; calling it again
 * changes nothing. If the library's signal thread cannot start (logged), nothing is armed. */
MC_API void enableGracefulShutdown(transfer_engine_t engine);
/* Writes the engine's segment name and every opened segment (id, name, path "shm", "tcp" or "none"; a
 * forgotten one has an empty name) into buf_out: lines "segment <name>" and "<id> <name> <path>", or with
 * json != 0 {"segment":"<name>","links":[{"id":..,"name":"..","path":".."},...]} (jansson: names escaped;
 * bytes of a name that is not UTF-8 come out as '?').
 * Output that does not fit is cut (then the JSON is incomplete); always NUL-terminated. 0, or -1
 * (ERR_INVALID_ARGUMENT) for a NULL engine or buf_out, or buf_len 0. */
MC_API int showLinks(transfer_engine_t engine, char *buf_out, size_t buf_len, int json);

/* ---- Native extensions ---- */

/* Allocates `length` bytes of memfd-backed memory that same-host peers can map (the fast same-host
 * path), registers it remotely accessible with `location` (as registerLocalMemory) and republishes the
 * descriptor (blocking; a failure is logged only), and returns it; NULL (logged) for a NULL engine, length
 * 0, or no memfd or mapping of that size. The memory is zero-filled and page aligned. The call does not wait for
 * the memory: a low-priority background thread of the engine populates its pages afterwards, so the
 * first writes into it do not pay a page fault per 4 KiB (MC_SEGMENT_PREFAULT=0: pages are committed
 * by the first writes only). Free with mc_te_free_shared(), which unregisters it. */
MC_API void *mc_te_alloc_shared(transfer_engine_t engine, size_t length, const char *location);
/* Unregisters memory of mc_te_alloc_shared (waiting as unregisterLocalMemory does) and unmaps it. 0, or:
 * ERR_INVALID_ARGUMENT (NULL engine), ERR_ADDRESS_NOT_REGISTERED (addr does not start a registration),
 * ERR_METADATA (freed, the republish failed). Given memory registered with registerLocalMemory, it
 * unregisters it and leaves it mapped. */
MC_API int mc_te_free_shared(transfer_engine_t engine, void *addr);
/* Bytes of background warming work left: this engine's mc_te_alloc_shared memory, and chunks of
 * same-host peers' memory it has started to use (0 when all is warm, with MC_SEGMENT_PREFAULT=0, or for a NULL
 * engine). Does not block. */
MC_API uint64_t mc_te_prefault_pending(transfer_engine_t engine);
/* Publishes this engine's rpc_meta key and segment descriptor again (e.g. after the metadata service
 * restarted empty; blocking). No-op under P2PHANDSHAKE, and after a signal withdrew the keys. Returns 0,
 * ERR_METADATA (either write failed, or the rpc_meta key is now held by another live engine), or
 * ERR_INVALID_ARGUMENT for a NULL engine. */
MC_API int mc_te_republish(transfer_engine_t engine);
/* The segment name this engine publishes (rewritten to host:port under P2PHANDSHAKE). Owned by the engine,
 * valid for its lifetime; NULL for a NULL engine. */
MC_API const char *mc_te_local_segment_name(transfer_engine_t engine);
/* Descriptor of an opened segment (LOCAL_SEGMENT: this engine's own) as compact JSON without its
 * timestamp, malloc'ed: the caller frees it with free(). NULL for a NULL engine or an unknown or forgotten
 * id. */
MC_API char *mc_te_segment_json(transfer_engine_t engine, segment_id_t segment_id);
/* Re-reads a segment's descriptor for a retry (blocking, as openSegmentNoCache): its id with the fresh
 * descriptor; the cached one when the descriptor cannot be fetched (metadata service or peer unreachable),
 * or openSegment's answer when the name was not opened; -1 when the metadata service answers that the
 * segment has no descriptor any more (unmounted, or its owner expired), so a retry does not wait on an
 * address that is known to be gone. The own name gives LOCAL_SEGMENT; -1 for a NULL engine or a NULL or
 * empty name. */
MC_API segment_id_t mc_te_reopen_segment(transfer_engine_t engine, const char *name);
/* Path the engine uses to reach a segment (LOCAL_SEGMENT included): "tcp" or "shm" (static strings), or
 * NULL for a NULL engine, an unknown or forgotten id, or a segment no installed transport reaches. */
MC_API const char *mc_te_segment_path(transfer_engine_t engine, segment_id_t segment_id);
/* The engine's metrics in the Prometheus text format (# HELP, # TYPE and sample lines; today
 * te_transport_fallback_total{requested="rdma"}: installTransport asked for it and installed tcp instead),
 * written into buf_out as snprintf does: cut to buf_len - 1 bytes and NUL-terminated (nothing written when
 * buf_len is 0). Returns the length of the whole text, or ERR_INVALID_ARGUMENT for a NULL engine, or a NULL
 * buf_out with buf_len > 0. */
MC_API int mc_te_metrics(transfer_engine_t engine, char *buf_out, size_t buf_len);
/* Batch status (docs/transfer-engine.md, "C API"): FAILED as soon as any task failed (others may still run);
 * else COMPLETED when every submitted task completed (an empty batch too); else WAITING. STATUS_INVALID for a
 * NULL engine or an unknown or freed batch. Does not wait. */
MC_API int mc_te_batch_status(transfer_engine_t engine, batch_id_t batch_id);
/* Blocks until every task of the batch is terminal or timeout_ms passes (any negative value: no limit; 0:
 * no wait); returns the batch status as mc_te_batch_status (STATUS_INVALID for an unknown batch; WAITING
 * when the time ran out and no task failed). Any number of threads may wait on one batch; freeBatchID must
 * not run meanwhile. */
MC_API int mc_te_wait_batch(transfer_engine_t engine, batch_id_t batch_id, int timeout_ms);

/* ---- Messages (docs/transfer-engine.md, "Messages"): one-way framed messages between processes over TCP,
 * each acknowledged by its receiver; what mooncake.engine.RpcInterface sends data and tensors with. */
typedef struct mc_msg_server mc_msg_server_t;
typedef struct mc_msg_client mc_msg_client_t;
/* Called on a server thread for each message (body valid only during the call): returns the status the
 * sender gets back (0, or a negative store ErrorCode). */
typedef int (*mc_msg_handler_fn)(void *ctx, uint16_t kind, const uint8_t *body, size_t len);
/* Largest message body (bytes): larger sends are refused with -600 (INVALID_PARAMS). */
#define MC_MSG_MAX_BODY (256u << 20)
/* Listens on bind_ip:port (port 0: ephemeral; *port_out, when not NULL, gets the port) and calls fn for
 * every message, from `threads` worker threads (0: as many as CPUs, at most 16); a connection with no
 * message for idle_timeout_s seconds is closed (0: 600 s). NULL when it cannot listen or fn is NULL. */
MC_API mc_msg_server_t *mc_msg_server_start(const char *bind_ip, uint16_t port, int threads, int idle_timeout_s,
                                            mc_msg_handler_fn fn, void *ctx, uint16_t *port_out);
/* Stops listening, closes every connection and waits until no handler runs; frees the server. NULL: nothing. */
MC_API void mc_msg_server_stop(mc_msg_server_t *s);
/* A sender to host:port (does not connect yet); every send is bounded by timeout_ms (> 0). It keeps a few
 * connections for reuse; any number of threads may send through one client. NULL for a bad argument. */
MC_API mc_msg_client_t *mc_msg_client_new(const char *host, uint16_t port, int timeout_ms);
/* Sends one message of `kind` and waits for its acknowledgement: the handler's status, or -900
 * (RPC_FAIL: no connection / the peer went away) / -901 (RPC_TIMEOUT) / -600 (a body over MC_MSG_MAX_BODY,
 * a NULL client, NULL data with len > 0). */
MC_API int mc_msg_send(mc_msg_client_t *c, uint16_t kind, const void *data, size_t len);
MC_API void mc_msg_client_free(mc_msg_client_t *c);

#ifdef __cplusplus
}
#endif
#endif
