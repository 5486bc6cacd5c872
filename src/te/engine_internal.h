/* Internals shared by the engine core and its transports. Not a public header.
 *
 * Lock order: eng->seg_mu, then eng->reg_mu, then desc->shm_mu; eng->tp_mu comes after reg_mu; batch,
 * inbox and outbox locks are leaves; pub_mu is described with its fields below. Each lock's note sits
 * beside it.
 * A remote descriptor (mc_desc) is immutable once published in a segment and refcounted: a slice holds
 * a reference for its whole life, so a refresh can swap descriptors under running transfers. */
#ifndef MC_TE_ENGINE_INTERNAL_H
#define MC_TE_ENGINE_INTERNAL_H
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mooncake/runtime.h"
#include "mooncake/transfer_engine.h"
#include "net/sock.h"
#include "meta/metadata.h"

struct mc_engine;
struct mc_transport;
struct mc_rdma_desc;

/* ---- local registered memory ---- */
struct mc_buf {
  uint64_t addr, len;
  char *location;
  int remote_accessible;
  int memfd;          /* memfd backing (engine-allocated shared memory) or -1 */
  int owned;          /* allocated by mc_te_alloc_shared: unmap on free */
  atomic_int pins;    /* server-side transfers using the range right now (guarded by reg_mu to gain) */
  atomic_uint_least64_t *warm; /* owned buffers with prefault on: MC_WARM_CHUNKs touched (prefault.c) */
};

/* ---- remote segment descriptors ---- */
struct mc_rbuf {
  uint64_t addr, len;
  char *name;
  int shm_fd; /* memfd number in the owner process, -1 if none */
};

struct mc_desc {
  atomic_int refs;
  char *name, *protocol, *host_id, *ip;
  uint16_t tcp_data_port, rpc_port;
  int tcp_proto_version;
  int pid;
  size_t nbuf;
  struct mc_rbuf *bufs; /* sorted by addr */
  char *canon;          /* compact JSON without "timestamp", for change detection */
  /* same-host mappings of shm_fd buffers, created lazily by the shm transport */
  int shm_registry_fd; /* the owner's registration registry (memfd number), -1 if none */
  pthread_mutex_t shm_mu;
  void **shm_maps;    /* per buffer: mapping base or NULL */
  atomic_uint_least64_t **shm_warm; /* per mapped buffer: warm chunk bits, then queued bits */
  void *shm_registry; /* mapping of the owner's registry, or NULL */
  size_t shm_registry_len;
  struct mc_rdma_desc *rdma; /* the rdma fields (devices, keyed buffers, matrix: docs/rdma.md), NULL if none */
};

struct mc_seg {
  int32_t id;
  char *name;
  struct mc_desc *desc;   /* guarded by eng->seg_mu */
  struct mc_transport *tp; /* the installed transport that reaches it, NULL if none (eng->seg_mu) */
};

/* ---- batches, tasks, slices ---- */
struct mc_task {
  atomic_int state; /* STATUS_WAITING until terminal */
  atomic_uint_least64_t transferred;
  atomic_int slices_left;
  atomic_int failed;
  int observed; /* a status poll saw it terminal */
};

struct mc_batch {
  uint64_t id;
  size_t cap;
  atomic_size_t ntasks;
  struct mc_task *tasks;
  atomic_int pending;   /* tasks not yet terminal */
  atomic_int any_failed;
  pthread_mutex_t mu;   /* guards notify and the wait condition */
  pthread_cond_t cv;
  int has_notify;
  int32_t notify_target;
  char *notify_name, *notify_msg;
};

struct mc_slice {
  struct mc_slice *next; /* intrusive queue link, owned by whichever queue holds the slice */
  struct mc_engine *eng;
  struct mc_batch *batch;
  struct mc_task *task;
  struct mc_desc *desc; /* referenced */
  int opcode;
  void *local;
  uint64_t remote, len;
  int retries;
  uint64_t sent; /* bytes of this request put on the wire (TCP), for the retry rule */
  uint64_t start_ns;
};

/* ---- transports (docs/transfer-engine.md, "Layers" and "Path choice") ---- */
struct mc_transport_ops {
  const char *name; /* the protocol: installTransport's argument, a descriptor's "protocol", the path logged */
  /* 1: reaches only peers on this host (shm). Installed with every network transport unless MC_FORCE_TCP=1 or
   * MC_SAME_HOST_PATH=0; a descriptor whose protocol names it is reached by no other (never over the network). */
  int same_host;
  /* 0, or a negative ERR_* code with the reason (a phrase, e.g. "no RDMA device") written into why. */
  int (*init)(struct mc_engine *e, struct mc_transport **out, char *why, size_t why_len);
  /* A row with only a name and an init is a transport this build names but does not carry: its init fails
   * saying so. Every other row has the operations below (describe, split and the mem_ hooks optional). */
  void (*fini)(struct mc_transport *t);
  /* Adds this transport's fields to the local segment descriptor (its "buffers" already there). */
  void (*describe)(struct mc_transport *t, json_t *desc);
  /* 1 when this transport can reach the segment described by d. */
  int (*reachable)(struct mc_transport *t, const struct mc_desc *d);
  /* Optional: into how many pieces request r (of length > 0, one of n in its submission) is cut, each its own
   * slice of length/k bytes (the last takes the rest); NULL or 1: whole. The engine keeps k within [1, length]. */
  uint32_t (*split)(struct mc_transport *t, const struct transfer_request *r, size_t n);
  /* Takes ownership of the slices; finishes each with mc_slice_done, possibly before returning. */
  void (*submit)(struct mc_transport *t, struct mc_slice **slices, size_t n);
  /* Optional: the local registrations changed (reg_mu held; bufs sorted by addr). */
  void (*mem_changed)(struct mc_transport *t, struct mc_buf *const *bufs, size_t n);
  /* Optional: after a buffer was removed, wait until no peer can still be touching it. */
  void (*mem_quiesce)(struct mc_transport *t);
  /* Optional: answers a Connection request (control RPC type 0, docs/rdma.md); a malloc'ed JSON reply. */
  char *(*connection)(struct mc_transport *t, const char *req, size_t len);
};

struct mc_transport {
  const struct mc_transport_ops *ops;
  struct mc_engine *eng;
};

/* The transport table (transport.c). Adding a transport = a file + a line there. Rows are in the order paths
 * are probed: the same-host path, then the network transports, the fallback (tcp) last. */
#define MC_TRANSPORT_ROWS_MAX 8
int mc_transport_rows(void);
const struct mc_transport_ops *mc_transport_row(int i); /* 0 <= i < mc_transport_rows() */
const struct mc_transport_ops *mc_transport_lookup(const char *name); /* NULL when no row has that name */
int mc_transport_rank(const struct mc_transport_ops *ops);            /* its row, -1 if none */
/* What installTransport installs when the requested network transport cannot be installed. */
const struct mc_transport_ops *mc_transport_fallback(void);

/* ---- engine ---- */
#define MC_MAX_TRANSPORTS 4
enum { MC_PUB_RPC = 1, MC_PUB_SEG = 2 }; /* struct mc_engine.published: rpc_meta/<name>, ram/<name> */

struct mc_engine {
  char *conn;
  struct mc_spin wait_spin; /* mc_te_wait_batch: poll before sleeping while batches finish that soon */
  struct mc_meta *meta; /* NULL under P2PHANDSHAKE */
  int p2p;
  /* pub_mu (a leaf but for the locks mc_engine_describe takes) guards the two below and is held across
   * every write and delete of our keys, so that nothing is published after the keys were withdrawn */
  pthread_mutex_t pub_mu;
  unsigned published; /* MC_PUB_*: the keys this engine wrote, the only ones it ever deletes */
  int withdrawn;      /* the keys were deleted (a signal or destroy): no publish any more */
  char *name; /* segment name */
  char ip[256];
  uint16_t rpc_port;
  struct mc_rpc_server *rpc;
  int force_tcp; /* MC_FORCE_TCP: tcp for every network transport asked for, no same-host path */
  int same_host; /* install the same-host transports with a network one (neither MC_FORCE_TCP nor MC_SAME_HOST_PATH=0) */

  /* tp_mu guards tps/ntps (transports are only ever added); taken after reg_mu (mem_changed replays
   * registrations into every transport), never before it. tps are in the table's order (probe order). */
  pthread_mutex_t tp_mu;
  struct mc_transport *tps[MC_MAX_TRANSPORTS];
  int ntps;
  void **install_args; /* installTransport's args while a transport's init runs (tp_mu held), else NULL */
  /* per table row: installTransport asked for it and got the fallback instead (te_transport_fallback_total) */
  atomic_uint_least64_t fallbacks[MC_TRANSPORT_ROWS_MAX];

  pthread_mutex_t reg_mu; /* guards bufs: this engine's registrations (order: see the top of this file) */
  struct mc_buf **bufs; /* sorted by addr */
  size_t nbufs, capbufs;

  pthread_mutex_t seg_mu; /* guards segs: the opened remote segments (taken first of the engine's locks) */
  struct mc_seg **segs; /* index = id; segs[0] is this engine */
  size_t nsegs, capsegs;

  pthread_mutex_t batch_mu; /* guards the batch slot table (a leaf); each batch has its own lock, a leaf too */
  struct mc_batch **batches;
  size_t nbatch_slots;
  uint32_t batch_gen;

  pthread_mutex_t inbox_mu; /* guards the received notifications below (a leaf) */
  notify_msg_t *inbox;
  int ninbox, capinbox;
  int inbox_max;          /* MC_NOTIFY_INBOX_MAX: unread messages kept at most */
  size_t inbox_bytes, inbox_max_bytes; /* unread bytes (names + messages) and MC_NOTIFY_INBOX_MAX_BYTES */

  /* notifications to send, drained by the notifier thread; out_mu guards outbox and out_stop (a leaf),
   * out_cv wakes the notifier */
  pthread_mutex_t out_mu;
  pthread_cond_t out_cv;
  struct mc_outnote *outbox;
  int out_stop;
  pthread_t notifier;

  struct mc_prefault *prefault; /* NULL when MC_SEGMENT_PREFAULT=0 */
  struct mc_engine *local_next; /* the process's list of live engines (engine.c, guarded by its lock) */
  struct mc_lifecycle lc;       /* the process's registry of live handles (common/lifecycle.h) */
};

/* ---- warming memory ahead of use (prefault.c) ---- */
#define MC_WARM_CHUNK (2ull << 20)
struct mc_prefault *mc_prefault_create(struct mc_engine *e); /* NULL when MC_SEGMENT_PREFAULT=0 */
/* Bits for a buffer of len bytes: one warm bit per chunk, then one queued bit per chunk. */
atomic_uint_least64_t *mc_warm_bits_new(uint64_t len);
/* Queues the owned buffer [addr, addr+len) (whose mc_buf already has warm bits) for background
 * population and touching. NULL p: no-op. */
void mc_prefault_add(struct mc_prefault *p, uint64_t addr, uint64_t len);
/* Queues the chunks of [off, off+len) of d's mapped buffer `buf` for touching in this process. */
void mc_prefault_peer(struct mc_prefault *p, struct mc_desc *d, size_t buf, uint64_t off, uint64_t len);
uint64_t mc_prefault_pending(struct mc_prefault *p);
void mc_prefault_destroy(struct mc_prefault *p);
/* 1 when every chunk of [off, off+len) is warm (NULL bits: always). */
int mc_chunks_warm(atomic_uint_least64_t *bits, uint64_t off, uint64_t len);
int mc_buf_warm(const struct mc_buf *b, uint64_t addr, uint64_t len);
/* process_vm_writev (op WRITE) / readv to pid, looping over partial copies: 0 or -errno. With our own
 * pid it reaches this process's pages through the kernel, without a user page fault. */
int mc_vm_copy_raw(int pid, int op, void *local, uint64_t remote, uint64_t len);
/* Asks for 2 MiB pages on a mapping of one of our memfds (MADV_HUGEPAGE) unless MC_SEGMENT_HUGEPAGE=0. The
 * kernel uses them only where /sys/kernel/mm/transparent_hugepage/shmem_enabled allows (advise, within_size,
 * always); otherwise a no-op. The first call logs which page size applies. */
void mc_shm_advise_huge(void *p, uint64_t len);
/* The selected word of /sys/kernel/mm/transparent_hugepage/shmem_enabled into out: 0, or -1 when it cannot
 * be read (a kernel without transparent huge pages). */
int mc_shmem_thp_mode(char *out, size_t n);
/* A memfd of len bytes named "mooncake-<what>", sealed against shrinking and growing (so a peer that maps
 * it can never meet a truncated page: no SIGBUS); -1 with errno set on failure. */
int mc_shm_memfd(const char *what, uint64_t len);

/* Marks a slice finished (ok = 1) and updates its task and batch; drops the slice. Thread-safe. */
void mc_slice_done(struct mc_slice *s, int ok, uint64_t bytes);
/* Pins the local registered buffer that wholly contains [addr, addr+len) and is remotely
 * accessible; NULL if none (bounds checked without overflow). Unpin when done. */
struct mc_buf *mc_engine_pin_range(struct mc_engine *e, uint64_t addr, uint64_t len);
void mc_engine_unpin(struct mc_buf *b);
/* As mc_engine_pin_range, over every live engine of this process: the only way a same-process copy finds
 * its target, so that a descriptor claiming our own pid can never aim a memcpy outside our registrations. */
struct mc_buf *mc_local_pin_range(uint64_t addr, uint64_t len);
/* The remote buffer of d wholly containing [addr, addr+len), or NULL. */
const struct mc_rbuf *mc_desc_find(const struct mc_desc *d, uint64_t addr, uint64_t len);
void mc_desc_ref(struct mc_desc *d);
void mc_desc_unref(struct mc_desc *d);
/* Finds an installed transport by name. */
struct mc_transport *mc_engine_transport(struct mc_engine *e, const char *name);
/* Re-publishes the local descriptor (not under P2P). */
int mc_engine_publish(struct mc_engine *e);
/* Decodes a descriptor; NULL if malformed (logged). */
struct mc_desc *mc_desc_decode(const char *json);
/* The local descriptor as JSON text (malloc'ed). */
char *mc_engine_describe(struct mc_engine *e);

/* ---- the engine core, one concern per file: engine.c (live engines, create/destroy, transports, the
 * local descriptor), engine_mem.c (registrations), engine_seg.c (segments), engine_batch.c (batches),
 * engine_notify.c (notifications, the control RPC handler). What one of them uses of another: ---- */
#define MC_ENG_RPC_CALL_TIMEOUT_MS 10000 /* a control RPC call to a peer (metadata, notify) */
struct mc_outnote { /* a notification waiting for the notifier thread (out_mu) */
  struct mc_outnote *next;
  int32_t target;
  char *name, *msg;
};
/* engine.c */
int mc_eng_publish_rpc_meta(struct mc_engine *e);
struct mc_seg *mc_eng_new_seg(struct mc_engine *e, const char *name, struct mc_desc *d, struct mc_transport *tp);
/* engine_mem.c: tells every transport the registrations changed (reg_mu held); whether [p, p+len) lies in
 * one registration of this engine */
void mc_eng_mem_changed(struct mc_engine *e);
int mc_eng_local_registered(struct mc_engine *e, const void *p, uint64_t len);
/* engine_seg.c: segment id's descriptor (a reference) and the transport that reaches it (NULL if none); drops
 * the cached local descriptor */
struct mc_desc *mc_eng_seg_desc(struct mc_engine *e, int32_t id, struct mc_transport **tp);
void mc_eng_invalidate_local(struct mc_engine *e);
/* engine_notify.c */
void *mc_eng_notifier_main(void *arg);
void mc_eng_rpc_handler(void *ctx, int type, const char *req, size_t len, char **reply);

#endif
