/* Standalone client mode (docs/standalone.md): the wire between a dummy client (dummy.c) and the real
 * client process that serves it (realsrv.c, run by tools/mooncake_client.c). Not a public header.
 *
 * Transport: a SOCK_STREAM unix socket in the abstract namespace, "@mooncake_client_<port>.sock". Every
 * frame, both ways, is a 16-byte header followed by `len` body bytes:
 *   u32 magic (MC_DUMMY_MAGIC), u16 op, u16 flags, u32 len, u32 reserved (0)
 * Integers are little-endian (host order: both ends are on one host). Requests:
 *   HELLO   body u64 pool_size, u64 total_size; exactly one descriptor (SCM_RIGHTS): a sealed memfd of
 *           total_size bytes (the dummy's memory pool followed by its staging area). Must be the first frame.
 *           Reply: i64 status, then the real client's segment name (rest of the body).
 *   WRITE   flags MC_WRITE_UPSERT / MC_DUMMY_SINGLE; config; u32 count; per key: str key, u32 nbufs, nbufs x
 *           (u64 offset, u64 length) inside the shared memory. Reply: count x i64.
 *   READ    flags MC_DUMMY_SINGLE; u32 count; per key as WRITE. Reply: count x i64.
 *   EXIST / REMOVE (u32 force first) / SIZE: u32 count; count x str. Reply: count x i64.
 *   REMOVE_REGEX: u32 force, str pattern. REMOVE_ALL: u32 force. HEALTH: empty. STATS: u32 which.
 *           Reply: one i64.
 * A str is u32 length + bytes (no NUL). A config is u64 replica_num, i32 soft_pin_action, i64 ttl_ms,
 * i32 hard_pin, u32 count, count x str preferred segments. Reply frames carry the request's op. */
#ifndef MC_CLIENT_DUMMY_H
#define MC_CLIENT_DUMMY_H
#include <stddef.h>
#include <stdint.h>

#define MC_DUMMY_MAGIC 0x5544434du /* "MCDU" */
#define MC_DUMMY_DEFAULT_PORT 50052
#define MC_DUMMY_MAX_BODY (16u << 20)   /* a larger frame is refused and the connection dropped */
#define MC_DUMMY_MAX_KEYS (1u << 20)    /* keys in one request */
#define MC_DUMMY_MAX_BUFS (1u << 22)    /* buffers in one request, over all keys */
#define MC_DUMMY_SINGLE 0x100           /* WRITE/READ of one key with the single-call semantics */

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

#endif
