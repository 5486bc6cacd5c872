/* Standalone client mode (docs/standalone.md): the wire between a dummy client (proxy.c) and the real
 * client process that serves it (real_client.c, run by tools/mooncake_client.c); wire.c holds both ends'
 * helpers and the decoders. Not a public header.
 *
 * Transport: a SOCK_STREAM unix socket in the abstract namespace, "@mooncake_client_<port>.sock". Every
 * frame, both ways, is a 16-byte header followed by `len` body bytes:
 *   u32 magic (MC_DUMMY_MAGIC), u16 op, u16 flags, u32 len, u32 reserved (0)
 * Integers are little-endian (host order: both ends are on one host). Requests:
 *   HELLO   body u64 pool_size, u64 total_size; exactly one descriptor (SCM_RIGHTS): a sealed memfd of
 *           total_size bytes (the dummy's memory pool followed by its staging area). Must be the first frame.
 *           Reply: i64 status, then the real client's segment name (rest of the body).
 *   WRITE   flags MC_WRITE_UPSERT / MC_DUMMY_SINGLE / MC_DUMMY_GROUPS; config; u32 count; per key: str key,
 *           (with MC_DUMMY_GROUPS) str group, u32 nbufs, nbufs x (u64 offset, u64 length) inside the shared
 *           memory. Reply: count x i64.
 *   READ    flags MC_DUMMY_SINGLE; u32 count; per key as WRITE. Reply: count x i64.
 *   EXIST / REMOVE (u32 force first) / SIZE: u32 count; count x str. Reply: count x i64.
 *   REMOVE_REGEX: u32 force, str pattern. REMOVE_ALL: u32 force. HEALTH: empty. STATS: u32 which.
 *           Reply: one i64.
 *   PUT_START  flags MC_DUMMY_GROUPS; config; u32 count; per key: str key, u64 size, (with the flag) str group.
 *           Reply: count x i64.
 *   PUT_WRITE / GET_READ: u32 count; per key: str key, u32 nbufs, nbufs x (u64 offset, u64 length inside the
 *           shared memory, u64 offset inside the object). Reply: count x i64.
 *   PUT_END: u32 revoke, u32 count, count x str. GET_START: u32 count, count x str. Reply: count x i64.
 *   GET_END: u32 count, count x str. Reply: one i64.
 *   COPY_TASK: str key, u32 n (1..MC_TASK_MAX_TARGETS), n x str target. MOVE_TASK: str key, str source,
 *           str target. Reply: i64 status, u64 id hi, u64 id lo.
 *   QUERY_TASK: u64 id hi, u64 id lo. Reply: i64 status, u64 hi, u64 lo, u32 type, u32 status,
 *           u64 created ms, u64 updated ms, str assigned client, str message.
 *   REPLICA_DESC: u32 count; count x str (the dummy sends one key). Reply per key: i64 n (the descriptor
 *           count, or the real call's negative code and nothing more), then n x (i32 status, u64 size,
 *           u64 address, str endpoint, str segment name). A key whose descriptors would push the reply past
 *           MC_DUMMY_MAX_BODY gets -600 instead.
 * A str is u32 length + bytes (no NUL). A config is u64 replica_num, i32 soft_pin_action, i64 ttl_ms,
 * i32 hard_pin, u32 count, count x str preferred segments. Reply frames carry the request's op.
 * The real client decodes every request with mc_dreq_decode (wire.c), a pure function of the bytes. */
#ifndef MC_STANDALONE_WIRE_H
#define MC_STANDALONE_WIRE_H
#include <stddef.h>
#include <stdint.h>

#define MC_DUMMY_MAGIC 0x5544434du /* "MCDU" */
#define MC_DUMMY_DEFAULT_PORT 50052
#define MC_DUMMY_MAX_BODY (16u << 20)   /* a larger frame is refused and the connection dropped */
#define MC_DUMMY_MAX_KEYS (1u << 20)    /* keys in one request */
#define MC_DUMMY_MAX_BUFS (1u << 22)    /* buffers in one request, over all keys */
#define MC_DUMMY_MAX_PREFERRED 64       /* preferred segments in one config */
#define MC_DUMMY_MAX_SESSIONS 65536     /* sessions one dummy may hold open at once (put and get) */
#define MC_DUMMY_SINGLE 0x100           /* WRITE/READ of one key with the single-call semantics */
#define MC_DUMMY_GROUPS 0x200           /* WRITE, PUT_START: every key carries its group id */
#define MC_DUMMY_MAX_DESCS 1024         /* replica descriptors of one key a dummy accepts in a reply */
#define MC_DUMMY_MAX_NAME 4096          /* bytes of an endpoint or segment name a dummy accepts in a reply */

enum mc_dummy_op {
  MC_DOP_HELLO = 1,
  MC_DOP_WRITE = 2,
  MC_DOP_READ = 3,
  MC_DOP_EXIST = 4,
  MC_DOP_SIZE = 5,
  MC_DOP_REMOVE = 6,
  MC_DOP_REMOVE_REGEX = 7,
  MC_DOP_REMOVE_ALL = 8,
  MC_DOP_HEALTH = 9,
  MC_DOP_STATS = 10, /* u32 which: 0 frames, 1 bytes received, 2 bytes sent on this connection so far */
  MC_DOP_PUT_START = 11,
  MC_DOP_PUT_WRITE = 12,
  MC_DOP_GET_READ = 13,
  MC_DOP_PUT_END = 14,
  MC_DOP_GET_START = 15,
  MC_DOP_GET_END = 16,
  MC_DOP_COPY_TASK = 17,
  MC_DOP_MOVE_TASK = 18,
  MC_DOP_QUERY_TASK = 19,
  MC_DOP_REPLICA_DESC = 20,
  MC_DOP_LAST = MC_DOP_REPLICA_DESC
};

struct mc_dummy_hdr {
  uint32_t magic;
  uint16_t op, flags;
  uint32_t len, reserved;
};

/* "\0mooncake_client_<port>.sock" into a sockaddr_un path; returns the address length for bind/connect. */
struct sockaddr_un;
unsigned mc_dummy_sockaddr(struct sockaddr_un *a, int port);

/* A growable request/reply body. */
struct mc_dbuf {
  char *p;
  size_t n, cap;
};
void mc_dbuf_put(struct mc_dbuf *b, const void *v, size_t n);
void mc_dbuf_u32(struct mc_dbuf *b, uint32_t v);
void mc_dbuf_u64(struct mc_dbuf *b, uint64_t v);
void mc_dbuf_str(struct mc_dbuf *b, const char *s);

/* A bounds-checked reader over a received body: every getter returns 0, or -1 once the body is short
 * (and then keeps failing). */
struct mc_drd {
  const char *p;
  size_t n, off;
  int bad;
};
int mc_drd_get(struct mc_drd *r, void *v, size_t n);
int mc_drd_u32(struct mc_drd *r, uint32_t *v);
int mc_drd_u64(struct mc_drd *r, uint64_t *v);
/* A string as a fresh NUL-terminated copy (strings holding a NUL are refused). */
int mc_drd_str(struct mc_drd *r, char **s);

/* A request as decoded by mc_dreq_decode: keys, strings and numbers copied out of the body; buffers as
 * (off, len) inside the dummy's shared memory. */
#define MC_DREQ_MAX_STRS 9 /* COPY_TASK: the key and up to MC_TASK_MAX_TARGETS (8) targets */
struct mc_dreq {
  uint16_t op, flags;
  uint32_t arg;    /* REMOVE, REMOVE_REGEX, REMOVE_ALL: force; STATS: which; PUT_END: revoke */
  int outside;     /* a buffer outside the shared memory (its off/len read as 0): the request fails -600 */
  int has_cfg;     /* WRITE, PUT_START */
  uint64_t replica_num, ttl_ms;
  int32_t soft_pin, hard_pin;
  uint32_t npref;
  char **pref;
  uint32_t count; /* keys */
  char **keys;
  uint64_t *sizes; /* PUT_START: each key's object size */
  char **groups;   /* WRITE and PUT_START with MC_DUMMY_GROUPS: each key's group id */
  size_t *nbufs;   /* WRITE, READ, PUT_WRITE, GET_READ: buffers of each key */
  size_t nb;       /* buffers in all */
  uint64_t *off, *len, *obj; /* obj: PUT_WRITE, GET_READ only */
  uint32_t nstr;             /* REMOVE_REGEX: the pattern; COPY_TASK: key, targets; MOVE_TASK: key, source, target */
  char *str[MC_DREQ_MAX_STRS];
  uint64_t id_hi, id_lo; /* QUERY_TASK */
};
/* Decodes one request body of op (not HELLO) against the caps above and `shared`, the bytes the dummy
 * shares: 0 (q filled; q->outside may be set), or -1 for a malformed body (short, trailing bytes, a count
 * over its cap or over what the body can hold, a string holding a NUL, an unknown op). Either way q is
 * released with mc_dreq_free. */
int mc_dreq_decode(uint16_t op, uint16_t flags, const char *body, size_t len, uint64_t shared, struct mc_dreq *q);
void mc_dreq_free(struct mc_dreq *q);

/* The dummy's decoder of one key's REPLICA_DESC reply body, a pure function of the bytes (the reply is
 * not trusted): 0 with *rc the descriptor count and *out a fresh array (free with
 * mc_store_replica_desc_free), or *rc the real client's negative code and *out NULL; -1 for a malformed
 * body (short, trailing bytes, more than MC_DUMMY_MAX_DESCS descriptors, a name longer than
 * MC_DUMMY_MAX_NAME or holding a NUL, a code that is not an int), with *rc = MC_RPC_FAIL and *out NULL. */
struct mc_replica_desc;
int mc_drep_replica_desc(const char *body, size_t len, struct mc_replica_desc **out, int *rc);
/* The real client's side: one key's answer (n descriptors d, or the negative code n) appended to b. */
void mc_drep_put_replica_desc(struct mc_dbuf *b, int64_t n, const struct mc_replica_desc *d);

#endif
