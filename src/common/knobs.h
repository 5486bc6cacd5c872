/* Every environment variable the libraries and programs read, listed once (the README's table of them
 * is generated from this list: `mooncake env --markdown`, checked by the ctest test_knobs_doc).
 *
 * X(NAME, kind, default, min, max, shown default, effect): the variable is MC_<NAME>;
 *   LONG  an integer in [min, max] (mc_knob_long): unset or empty gives the default, a malformed or
 *         out-of-range value the default with a warning;
 *   BOOL  1/true/yes/on or 0/false/no/off (mc_knob_bool), default 0 or 1;
 *   TEXT  a string its reader parses (mc_knob_str: NULL when unset or empty); default, min and max
 *         unused.
 * A variable is read where the component that uses it starts (an engine, a transport, a client's set-up,
 * a server), not cached: a process may set one before it creates that component. */
#ifndef MC_COMMON_KNOBS_H
#define MC_COMMON_KNOBS_H

#define MC_KNOB_MIB (1l << 20)

#define MC_KNOBS(X)                                                                                                   \
  X(LOG_LEVEL, TEXT, 0, 0, 0, "`WARNING` in libraries", "log level: `TRACE`, `DEBUG`, `INFO`, `WARNING`, `ERROR`")     \
  X(CLUSTER_SECRET_FILE, TEXT, 0, 0, 0, "none (open cluster)",                                                        \
    "file holding the cluster secret, or a tenant's secret, that every connection must prove (docs/security.md; "     \
    "`mooncake secret generate FILE`, `mooncake secret tenant ID FILE`)")                                            \
  X(CLUSTER_SECRET, TEXT, 0, 0, 0, "none",                                                                            \
    "the cluster secret itself when `MC_CLUSTER_SECRET_FILE` is unset (visible in `/proc/<pid>/environ`: prefer the " \
    "file)")                                                                                                          \
  X(FORCE_TCP, BOOL, 0, 0, 1, "off",                                                                                  \
    "TCP only: never use the same-host path, and install `tcp` for any network transport asked for (`rdma`)")          \
  X(SAME_HOST_PATH, BOOL, 1, 0, 1, "1",                                                                               \
    "reach peers on this host through shared memory (0 = through the network transport asked for, e.g. to test it "   \
    "on one host; docs/transfer-engine.md, \"Path choice\")")                                                          \
  X(TE_FILTERS, TEXT, 0, 0, 0, "every device",                                                                     \
    "RDMA: the devices to use, comma-separated (`mlx5_0,mlx5_1`); a `device_name` given to the engine wins "          \
    "(docs/rdma.md)")                                                                                                 \
  X(SLICE_SIZE, LONG, 65536, 4096, 1l << 30, "65536", "RDMA: bytes of one work request (docs/rdma.md, \"Slicing\")") \
  X(FRAGMENT_RATIO, LONG, 4, 1, 1024, "4",                                                                            \
    "RDMA: a rest of at most slice + slice / this goes as one final work request")                                    \
  X(RDMA_QP_PER_EP, LONG, 2, 1, 16, "2", "RDMA: queue pairs per endpoint (local device, peer device)")               \
  X(RDMA_MAX_WR, LONG, 64, 1, 1024, "64", "RDMA: work requests outstanding per queue pair")                          \
  X(RDMA_MAX_ENDPOINTS, LONG, 256, 1, 4096, "256",                                                                    \
    "RDMA: endpoints this engine opens, and, separately, endpoints peers may make it hold (the oldest goes at the "   \
    "cap; docs/rdma.md, \"Caps\")")                                                                                    \
  X(RDMA_CONNECT_TIMEOUT_MS, LONG, 3000, 100, 600000, "3000", "RDMA: deadline of an endpoint's handshake, ms")      \
  X(RDMA_IO_TIMEOUT_MS, LONG, 10000, 100, 3600000, "10000",                                                           \
    "RDMA: an endpoint with work outstanding and no completion for this long is reset, ms")                         \
  X(RDMA_RETRY_COUNT, LONG, 4, 0, 64, "4", "RDMA: times a failed work request is retried (on the next rail)")        \
  X(RDMA_GID_INDEX, LONG, -1, -1, 255, "-1 (auto)",                                                                   \
    "RDMA: the GID index of every device (auto: a RoCE v2 GID with an IPv4-mapped address, else index 0)")          \
  X(RDMA_QP_TIMEOUT, LONG, 14, 1, 31, "14",                                                                           \
    "RDMA: a queue pair's ACK timeout exponent (4.096 us << this); with 6 retries a dead peer fails in ~0.5 s")      \
  X(RDMA_QP_RETRY_CNT, LONG, 6, 0, 7, "6",                                                                            \
    "RDMA: a queue pair's transport retries before the error completion (Soft-RoCE retries 7 forever)")            \
  X(RDMA_RAIL_PAUSE_SECONDS, LONG, 30, 1, 3600, "30", "RDMA: how long a failing rail is paused (docs/rdma.md, \"Rails\")") \
  X(TCP_LANES_PER_PEER, LONG, 4, 1, 16, "4 (max 16)", "persistent connections per peer")                              \
  X(TCP_MAX_CONNECTIONS_PER_PEER, LONG, 4, 1, 16, "4",                                                                \
    "the same under upstream's name, read when `MC_TCP_LANES_PER_PEER` is unset")                                     \
  X(TCP_CONNECT_TIMEOUT_MS, LONG, 3000, 100, 600000, "3000",                                                          \
    "connect deadline of the TCP transport, its handshake included, ms")                                             \
  X(TCP_IO_TIMEOUT_MS, LONG, 10000, 100, 3600000, "10000", "no-progress deadline of a TCP transfer, ms")              \
  X(TCP_SPLIT_SIZE, LONG, MC_KNOB_MIB, 0, 1l << 40, "1048576",                                                        \
    "requests above this are cut into pieces sent on several lanes (a READ alone in its submission and larger than "  \
    "this: in pieces of a quarter of it; 0 = never)")                                                                 \
  X(TCP_DIRECT, LONG, 1, 0, 1, "1",                                                                                   \
    "a lone request of <= 1 MiB (one piece) on an idle lane is carried out by the submitting thread (0 = always hand " \
    "it to the lane threads)")                                                                                        \
  X(TCP_SLICE_SIZE, LONG, 65536, 4096, 1l << 30, "65536",                                                             \
    "a TCP sender hands the kernel at most 16 times this many bytes per system call")                                 \
  X(SPIN_US, LONG, 50, 0, 100000, "50",                                                                               \
    "busy-poll window (with `sched_yield`) before blocking for a reply or the next request, for TCP lanes, the "      \
    "master RPC and batch waits (0 = off)")                                                                           \
  X(TCP_BIND_ADDRESS, TEXT, 0, 0, 0, "first UP non-loopback IPv4",                                                    \
    "advertised address; when set to an IPv4 address, the control RPC and the TCP data port listen on it only "       \
    "(otherwise on every address)")                                                                                   \
  X(MIN_RPC_PORT, LONG, 15000, 1, 65535, "15000", "lowest port of the control RPC and the TCP data port")             \
  X(MAX_RPC_PORT, LONG, 17000, 1, 65535, "17000", "highest port of that range")                                       \
  X(HANDSHAKE_PORT, LONG, 12001, 1, 65535, "12001", "the port of a local server name given without one")              \
  X(LEGACY_RPC_PORT_BINDING, BOOL, 0, 0, 1, "off",                                                                    \
    "the control RPC listens on the local server name's port (upstream's old binding) and advertises the name's "     \
    "host, instead of a free port of the range and the local address")                                              \
  X(HANDSHAKE_MAX_LENGTH, LONG, MC_KNOB_MIB, 1, 128l << 20, "1 MiB", "largest control RPC frame")                     \
  X(HANDSHAKE_LISTEN_BACKLOG, LONG, 128, 1, 65535, "128", "listen backlog of the control RPC")                        \
  X(HANDSHAKE_CONNECT_TIMEOUT, LONG, 5, 1, 3600, "5", "connect deadline of a control RPC call, s")                    \
  X(TCP_SERVER_MAX_CONNECTIONS, LONG, 1024, 1, 65536, "1024", "connections the data port serves at once")             \
  X(TCP_FIRST_BYTE_TIMEOUT_MS, LONG, 5000, 100, 3600000, "5000",                                                      \
    "a data-port connection that sends nothing for this long is closed (and silent ones make room at the cap "        \
    "first)")                                                                                                         \
  X(NOTIFY_INBOX_MAX, LONG, 65536, 1, 1l << 24, "65536",                                                              \
    "unread notifications an engine keeps; beyond them (or `MC_NOTIFY_INBOX_MAX_BYTES`) a sender's "                  \
    "`genNotifyInEngine` gets `ERR_TOO_MANY_REQUESTS` until the application reads its inbox")                        \
  X(NOTIFY_INBOX_MAX_BYTES, LONG, 64 * MC_KNOB_MIB, 1, 1l << 40, "64 MiB",                                            \
    "bytes of names and messages of those unread notifications")                                                      \
  X(HOST_ID, TEXT, 0, 0, 0, "kernel boot id",                                                                         \
    "host identity for the same-host path (set distinct values for hosts that share a kernel)")                       \
  X(SEGMENT_PREFAULT, TEXT, 0, 0, 0, "on",                                                                            \
    "populate and warm engine-allocated memory in the background (`0` off, `populate` populate only)")                \
  X(PREFAULT_THREADS, LONG, 4, 1, 4, "CPUs, at most 4", "background threads that populate and warm that memory")      \
  X(SEGMENT_HUGEPAGE, BOOL, 1, 0, 1, "1",                                                                             \
    "ask for 2 MiB pages on that memory (granted where `/sys/kernel/mm/transparent_hugepage/shmem_enabled` is "       \
    "`advise`: docs/operations.md, \"Huge pages for segments\"; 0 = do not ask)")                                     \
  X(METADATA_CLUSTER_ID, TEXT, 0, 0, 0, "empty", "metadata key prefix `mooncake/<id>/`")                              \
  X(METADATA_TTL_S, LONG, 10, 0, 86400, "10",                                                                         \
    "lease of an engine's keys in Redis, s, renewed while it runs (minimum 3; `0` = plain keys; "                     \
    "docs/transfer-engine.md)")                                                                                       \
  X(P2P_HOLDER_TTL_S, LONG, 10, 1, 3600, "10",                                                                        \
    "P2P store: lease of a holder's entries in a payload record, s, renewed every third of it (docs/p2p-store.md)")   \
  X(REDIS_USERNAME, TEXT, 0, 0, 0, "none", "Redis metadata: ACL user name")                                           \
  X(REDIS_PASSWORD, TEXT, 0, 0, 0, "none", "Redis metadata: password")                                                \
  X(REDIS_DB_INDEX, LONG, 0, 0, 255, "0", "Redis metadata: database index")                                           \
  X(METADATA_SERVER_MAX_KEYS, LONG, 65536, 1, 1l << 30, "65536",                                                      \
    "HTTP metadata server: keys it holds (beyond: 507)")                                                              \
  X(METADATA_SERVER_MAX_BYTES, LONG, 256 * MC_KNOB_MIB, 1, 1l << 40, "256 MiB",                                       \
    "HTTP metadata server: key and value bytes it holds (beyond: 507)")                                               \
  X(HTTP_MAX_CONNECTIONS_PER_IP, LONG, 64, 1, 1024, "64",                                                             \
    "HTTP servers (metadata, admin/metrics): connections from one client address")                                    \
  X(HTTP_CONNECTION_TIMEOUT_S, LONG, 10, 1, 3600, "10", "HTTP servers: idle connection timeout, s")                   \
  X(ZONE, TEXT, 0, 0, 0, "none", "store client: its zone when its configuration names none (placement)")              \
  X(STORE_CLIENT_MIN_PORT, LONG, 12300, 1, 65535, "12300",                                                            \
    "store client: lowest port it tries for its name when `local_hostname` has none")                                \
  X(STORE_CLIENT_MAX_PORT, LONG, 14300, 1, 65535, "14300", "store client: highest such port")                         \
  X(STORE_CLIENT_SETUP_RETRIES, LONG, 20, 1, 10000, "20", "store client: ports tried for its name")                   \
  X(RPC_TIMEOUT_MS, LONG, 30000, -(1l << 30), 1l << 30, "30000",                                                      \
    "store client: deadline of a master RPC, ms (0 = the default, < 0 = none)")                                       \
  X(RPC_CONNECT_TIMEOUT_MS, LONG, 30000, 1, 1l << 30, "30000", "store client: connect deadline to the master, ms")    \
  X(STORE_PUT_EXTENTS, TEXT, 0, 0, 0, "on",                                                                           \
    "store client: `0` turns the one-round-trip puts through write extents off (docs/store-client.md)")               \
  X(STORE_HOLDER_INDEX, BOOL, 1, 0, 1, "1",                                                                           \
    "store client: `0` turns the holder's index of its segment off (a restarted master then gets its objects back only from a snapshot; docs/ha.md)") \
  X(STORE_SSD_PATH, TEXT, 0, 0, 0, "none",                                                                            \
    "store client: the local-disk tier's directory when the setup call asks for the tier without naming one and "     \
    "upstream's `MOONCAKE_OFFLOAD_FILE_STORAGE_PATH` is unset (docs/disk-tier.md)")                                    \
  X(STORE_STATS_INTERVAL_MS, LONG, 5000, 50, 5000, "5000",                                                            \
    "store client: how often it reports its transfer statistics to the master, ms")                                   \
  X(TRANSFER_TIMEOUT, LONG, 30, 5, 1l << 20, "30",                                                                    \
    "Python `TransferEngine`: a transfer waits at most this many seconds plus 1 ms per MB")                          \
  X(MASTER_MAX_CONNECTIONS, LONG, 4096, 1, 1l << 20, "4096",                                                          \
    "`mooncake_master` RPC: open connections (more are closed at once; docs/master.md, \"Limits\")")                  \
  X(MASTER_MAX_INFLIGHT_BYTES, LONG, 1024 * MC_KNOB_MIB, MC_KNOB_MIB, 1l << 62, "1 GiB",                              \
    "`mooncake_master` RPC: bytes of large request frames, and of large replies, in flight")                          \
  X(STORE_CLUSTER_ID, TEXT, 0, 0, 0, "none", "`mooncake_master`: the cluster id when `--cluster_id` is left default") \
  X(RPC_PROTOCOL, TEXT, 0, 0, 0, "tcp", "`mooncake_master`: the RPC's transport; only `tcp` (another value is warned about)")

enum mc_knob_kind { MC_KNOB_KIND_LONG, MC_KNOB_KIND_BOOL, MC_KNOB_KIND_TEXT };

#define MC_KNOB_ENUM_(name, kind, def, min, max, shown, doc) MC_KNOB_##name,
enum mc_knob { MC_KNOBS(MC_KNOB_ENUM_) MC_KNOB_COUNT };
#undef MC_KNOB_ENUM_

struct mc_knob_info {
  const char *name; /* "MC_..." */
  enum mc_knob_kind kind;
  long def, min, max;
  const char *shown, *doc;
};
const struct mc_knob_info *mc_knob_info(enum mc_knob k);

long mc_knob_long(enum mc_knob k);
/* The same with a default known only at run time (MC_PREFAULT_THREADS: the CPUs). */
long mc_knob_long_or(enum mc_knob k, long def);
int mc_knob_bool(enum mc_knob k);
const char *mc_knob_str(enum mc_knob k);

#endif
