/* Store error codes (docs/store-client.md, "Error codes"). Numbers and names are binding. One X-macro table
 * generates the enum, mooncake_store_strerror() and mooncake_store_err_name(); transfer-engine codes live
 * in their own table (transfer_engine.h) and are never mixed with these. */
#ifndef MOONCAKE_STORE_ERRORS_H
#define MOONCAKE_STORE_ERRORS_H

#include "mooncake/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MOONCAKE_STORE_ERRORS(X) \
  X(OK, 0, "Success") \
  X(INTERNAL_ERROR, -1, "Unexpected internal failure") \
  X(BUFFER_OVERFLOW, -10, "Size arithmetic overflow") \
  X(SHARD_INDEX_OUT_OF_RANGE, -100, "Shard index out of bounds") \
  X(SEGMENT_NOT_FOUND, -101, "Named/identified segment is not mounted") \
  X(SEGMENT_ALREADY_EXISTS, -102, "Segment id already registered") \
  X(CLIENT_NOT_FOUND, -103, "Master has no segments for that client id") \
  X(NO_AVAILABLE_HANDLE, -200, "No space") \
  X(INVALID_VERSION, -300, "Version mismatch") \
  X(INVALID_KEY, -400, "Key rejected by a storage back-end") \
  X(WRITE_FAIL, -500, "Write failed") \
  X(INVALID_PARAMS, -600, "Invalid parameters / unusable state") \
  X(ILLEGAL_CLIENT, -601, "Caller is not the current writer") \
  X(INVALID_WRITE, -700, "No write in progress") \
  X(INVALID_READ, -701, "Invalid read") \
  X(INVALID_REPLICA, -702, "No usable replica") \
  X(REPLICA_IS_NOT_READY, -703, "Object exists, no replica readable yet") \
  X(OBJECT_NOT_FOUND, -704, "Key absent") \
  X(OBJECT_ALREADY_EXISTS, -705, "Key already has a complete replica, or a put for it started less than 30 s ago (`put_start_discard_timeout_sec`)") \
  X(OBJECT_HAS_LEASE, -706, "Active read lease") \
  X(LEASE_EXPIRED, -707, "Lease ran out before the read finished") \
  X(OBJECT_HAS_REPLICATION_TASK, -708, "Copy/move/offload in progress on the object") \
  X(OBJECT_NO_REPLICATION_TASK, -709, "No matching replication task") \
  X(REPLICA_NOT_FOUND, -710, "Replica not on the named segment") \
  X(REPLICA_ALREADY_EXISTS, -711, "Replica already present") \
  X(REPLICA_IS_GONE, -712, "Replica vanished") \
  X(REPLICA_NOT_IN_LOCAL_MEMORY, -713, "Replica not in this node's memory") \
  X(OBJECT_REPLICA_BUSY, -714, "Replica buffers referenced by readers") \
  X(TRANSFER_FAIL, -800, "Data transfer failed") \
  X(CHECKSUM_MISMATCH, -801, "Stored checksum differs") \
  X(RPC_FAIL, -900, "Master RPC failed") \
  X(RPC_TIMEOUT, -901, "Client-side RPC deadline hit") \
  X(ETCD_OPERATION_ERROR, -1000, "etcd call failed") \
  X(ETCD_KEY_NOT_EXIST, -1001, "etcd key missing") \
  X(ETCD_TRANSACTION_FAIL, -1002, "etcd transaction failed") \
  X(ETCD_CTX_CANCELLED, -1003, "etcd context cancelled") \
  X(OPLOG_ENTRY_NOT_FOUND, -1004, "OpLog entry missing") \
  X(K8S_LEASE_OPERATION_ERROR, -1005, "Kubernetes Lease call failed") \
  X(K8S_LEASE_NOT_FOUND, -1006, "Kubernetes Lease missing") \
  X(INCOMPLETE_OPLOG_CATCH_UP, -1007, "Promotion could not prove all durable entries applied") \
  X(UNAVAILABLE_IN_CURRENT_STATUS, -1010, "Not allowed in the current state") \
  X(UNAVAILABLE_IN_CURRENT_MODE, -1011, "Feature disabled in this master mode/build") \
  X(NOT_SUPPORTED, -1012, "Operation unsupported") \
  X(FILE_NOT_FOUND, -1100, "File missing") \
  X(FILE_OPEN_FAIL, -1101, "Open failed or file exists") \
  X(FILE_READ_FAIL, -1102, "Read failed") \
  X(FILE_WRITE_FAIL, -1103, "Write failed") \
  X(FILE_INVALID_BUFFER, -1104, "Bad buffer for file I/O") \
  X(FILE_LOCK_FAIL, -1105, "File lock failed") \
  X(FILE_INVALID_HANDLE, -1106, "Bad file handle") \
  X(BUCKET_NOT_FOUND, -1200, "Bucket missing") \
  X(BUCKET_ALREADY_EXISTS, -1201, "Bucket exists") \
  X(KEYS_EXCEED_BUCKET_LIMIT, -1202, "Too many keys for one bucket") \
  X(KEYS_ULTRA_LIMIT, -1203, "Key count over the hard limit") \
  X(UNABLE_OFFLOAD, -1300, "Offload not enabled") \
  X(UNABLE_OFFLOADING, -1301, "Offload cannot proceed now") \
  X(TASK_NOT_FOUND, -1400, "Task id unknown or already pruned") \
  X(TASK_PENDING_LIMIT_EXCEEDED, -1401, "Pending-task queue full") \
  X(JOB_NOT_FOUND, -1402, "Job id unknown") \
  X(SERIALIZE_UNSUPPORTED, -1500, "Type cannot be serialized") \
  X(SERIALIZE_FAIL, -1501, "Serialization failed") \
  X(DESERIALIZE_FAIL, -1502, "Deserialization failed") \
  X(PERSISTENT_FAIL, -1503, "Persisting failed") \
  X(DFS_NETWORK_TIMEOUT, -1600, "DFS network timeout") \
  X(DFS_SERVICE_UNAVAILABLE, -1601, "DFS unavailable") \
  X(DFS_QUOTA_EXCEEDED, -1602, "DFS quota exceeded") \
  X(DFS_PERMISSION_DENIED, -1603, "DFS permission denied") \
  X(DFS_STALE_HANDLE, -1604, "DFS handle expired") \
  X(DFS_PARTIAL_WRITE, -1605, "DFS write partially applied") \
  X(TENANT_QUOTA_EXCEEDED, -1700, "Tenant memory quota exceeded") \
  X(TENANT_NOT_REGISTERED, -1701, "Tenant has no quota policy") \
  X(TENANT_NOT_EMPTY, -1702, "Tenant still owns objects or quota")

enum mooncake_store_error {
#define MC_STORE_ERR_ENUM_(name, code, msg) MC_##name = (code),
  MOONCAKE_STORE_ERRORS(MC_STORE_ERR_ENUM_)
#undef MC_STORE_ERR_ENUM_
};

/* Static strings; unknown codes give "UNKNOWN_ERROR" / "Unknown error". */
MC_API const char *mooncake_store_err_name(int code);
MC_API const char *mooncake_store_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
