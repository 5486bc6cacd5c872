/* Standalone client mode (docs/standalone.md), the wire both ends share (wire.h): the socket address, the
 * body builder and reader, the real client's decoder of a dummy's request bodies, and the dummy's decoder
 * of the one reply that carries more than numbers (REPLICA_DESC). The decoders are pure functions of the
 * bytes, so that they can be fed anything (tests/fuzz/fuzz_dummy.c):
 * every count is checked against its cap and against the bytes left before anything is allocated for it,
 * every (offset, length) against the shared size without overflow, and the body must be consumed exactly.
 * What a request then does is real_client.c's business. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/alloc.h"
#include "standalone/wire.h"
#include "mooncake/store.h"

#define TASK_MAX_TARGETS (MC_DREQ_MAX_STRS - 1)

/* ------------------------------------------------------------------ frames and bodies (both ends) */

unsigned mc_dummy_sockaddr(struct sockaddr_un *a, int port) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "mooncake_client_%d.sock", port);
  return (unsigned)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void mc_dbuf_put(struct mc_dbuf *b, const void *v, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = mc_realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, v, n);
  b->n += n;
}
void mc_dbuf_u32(struct mc_dbuf *b, uint32_t v) { mc_dbuf_put(b, &v, 4); }
void mc_dbuf_u64(struct mc_dbuf *b, uint64_t v) { mc_dbuf_put(b, &v, 8); }
void mc_dbuf_str(struct mc_dbuf *b, const char *s) {
  size_t n = strlen(s);
  mc_dbuf_u32(b, (uint32_t)n);
  mc_dbuf_put(b, s, n);
}

int mc_drd_get(struct mc_drd *r, void *v, size_t n) {
  if (r->bad || n > r->n - r->off) return r->bad = -1;
  memcpy(v, r->p + r->off, n);
  r->off += n;
  return 0;
}
int mc_drd_u32(struct mc_drd *r, uint32_t *v) { return mc_drd_get(r, v, 4); }
int mc_drd_u64(struct mc_drd *r, uint64_t *v) { return mc_drd_get(r, v, 8); }
int mc_drd_str(struct mc_drd *r, char **s) {
  uint32_t n;
  if (mc_drd_u32(r, &n) || n > r->n - r->off || memchr(r->p + r->off, 0, n)) return r->bad = -1;
  *s = mc_strndup(r->p + r->off, n);
  r->off += n;
  return 0;
}

void mc_dreq_free(struct mc_dreq *q) {
  for (uint32_t i = 0; q->keys && i < q->count; i++) mc_free(q->keys[i]);
  for (uint32_t i = 0; q->groups && i < q->count; i++) mc_free(q->groups[i]);
  for (uint32_t i = 0; q->pref && i < q->npref; i++) mc_free(q->pref[i]);
  for (uint32_t i = 0; i < q->nstr; i++) mc_free(q->str[i]);
  mc_free(q->keys);
  mc_free(q->groups);
  mc_free(q->pref);
  mc_free(q->sizes);
  mc_free(q->nbufs);
  mc_free(q->off);
  mc_free(q->len);
  mc_free(q->obj);
  memset(q, 0, sizeof(*q));
}

static size_t left(const struct mc_drd *r) { return r->n - r->off; }

static int get_config(struct mc_drd *r, struct mc_dreq *q) {
  uint32_t n;
  if (mc_drd_u64(r, &q->replica_num) || mc_drd_get(r, &q->soft_pin, 4) || mc_drd_u64(r, &q->ttl_ms) ||
      mc_drd_get(r, &q->hard_pin, 4) || mc_drd_u32(r, &n) || n > MC_DUMMY_MAX_PREFERRED || n > left(r) / 4)
    return -1;
  q->has_cfg = 1;
  q->pref = mc_calloc(n ? n : 1, sizeof(char *));
  for (; q->npref < n; q->npref++)
    if (mc_drd_str(r, &q->pref[q->npref])) return -1;
  return 0;
}

/* u32 count and room for count entries of at least `min` bytes each. */
static int get_count(struct mc_drd *r, struct mc_dreq *q, size_t min) {
  if (mc_drd_u32(r, &q->count) || q->count > MC_DUMMY_MAX_KEYS || q->count > left(r) / min) return -1;
  q->keys = mc_calloc(q->count ? q->count : 1, sizeof(char *));
  return 0;
}

/* Keys with their buffers: per key str, (groups) str, u32 nbufs, nbufs x (off, len[, obj]). */
static int get_bufs(struct mc_drd *r, struct mc_dreq *q, uint64_t shared, int ranged, int groups) {
  size_t each = ranged ? 24 : 16, cap = 0;
  if (get_count(r, q, groups ? 12 : 8)) return -1;
  q->nbufs = mc_calloc(q->count ? q->count : 1, sizeof(size_t));
  if (groups) q->groups = mc_calloc(q->count ? q->count : 1, sizeof(char *));
  for (uint32_t i = 0; i < q->count; i++) {
    uint32_t k;
    if (mc_drd_str(r, &q->keys[i]) || (groups && mc_drd_str(r, &q->groups[i])) || mc_drd_u32(r, &k) ||
        k > MC_DUMMY_MAX_BUFS - q->nb || k > left(r) / each)
      return -1;
    q->nbufs[i] = k;
    if (q->nb + k > cap) {
      cap = (q->nb + k) * 2;
      q->off = mc_realloc(q->off, cap * sizeof(uint64_t));
      q->len = mc_realloc(q->len, cap * sizeof(uint64_t));
      if (ranged) q->obj = mc_realloc(q->obj, cap * sizeof(uint64_t));
    }
    for (uint32_t j = 0; j < k; j++, q->nb++) {
      uint64_t off, len;
      if (mc_drd_u64(r, &off) || mc_drd_u64(r, &len) || (ranged && mc_drd_u64(r, &q->obj[q->nb]))) return -1;
      if (off > shared || len > shared - off) q->outside = 1, off = 0, len = 0;
      q->off[q->nb] = off;
      q->len[q->nb] = len;
    }
  }
  return 0;
}

static int get_strs(struct mc_drd *r, struct mc_dreq *q, uint32_t n) {
  for (uint32_t i = 0; i < n; i++, q->nstr++)
    if (mc_drd_str(r, &q->str[q->nstr])) return -1;
  return 0;
}

static int decode(struct mc_drd *r, struct mc_dreq *q, uint64_t shared) {
  switch (q->op) {
    case MC_DOP_WRITE:
      return get_config(r, q) || get_bufs(r, q, shared, 0, (q->flags & MC_DUMMY_GROUPS) != 0);
    case MC_DOP_READ:
      return get_bufs(r, q, shared, 0, 0);
    case MC_DOP_PUT_WRITE:
    case MC_DOP_GET_READ:
      return get_bufs(r, q, shared, 1, 0);
    case MC_DOP_REMOVE:
    case MC_DOP_PUT_END:
      if (mc_drd_u32(r, &q->arg)) return -1;
      /* fall through */
    case MC_DOP_EXIST:
    case MC_DOP_SIZE:
    case MC_DOP_REPLICA_DESC:
    case MC_DOP_GET_START:
    case MC_DOP_GET_END:
      if (get_count(r, q, 4)) return -1;
      for (uint32_t i = 0; i < q->count; i++)
        if (mc_drd_str(r, &q->keys[i])) return -1;
      return 0;
    case MC_DOP_PUT_START: {
      int g = (q->flags & MC_DUMMY_GROUPS) != 0;
      if (get_config(r, q) || get_count(r, q, g ? 16 : 12)) return -1;
      q->sizes = mc_calloc(q->count ? q->count : 1, sizeof(uint64_t));
      if (g) q->groups = mc_calloc(q->count ? q->count : 1, sizeof(char *));
      for (uint32_t i = 0; i < q->count; i++)
        if (mc_drd_str(r, &q->keys[i]) || mc_drd_u64(r, &q->sizes[i]) || (g && mc_drd_str(r, &q->groups[i])))
          return -1;
      return 0;
    }
    case MC_DOP_REMOVE_REGEX:
      return mc_drd_u32(r, &q->arg) || get_strs(r, q, 1);
    case MC_DOP_REMOVE_ALL:
    case MC_DOP_STATS:
      return mc_drd_u32(r, &q->arg);
    case MC_DOP_HEALTH:
      return 0;
    case MC_DOP_COPY_TASK: {
      uint32_t n;
      if (get_strs(r, q, 1) || mc_drd_u32(r, &n) || !n || n > TASK_MAX_TARGETS) return -1;
      return get_strs(r, q, n);
    }
    case MC_DOP_MOVE_TASK:
      return get_strs(r, q, 3);
    case MC_DOP_QUERY_TASK:
      return mc_drd_u64(r, &q->id_hi) || mc_drd_u64(r, &q->id_lo);
    default:
      return -1; /* HELLO only comes first, with its descriptor (real_client.c); anything else is unknown */
  }
}

int mc_dreq_decode(uint16_t op, uint16_t flags, const char *body, size_t len, uint64_t shared, struct mc_dreq *q) {
  memset(q, 0, sizeof(*q));
  q->op = op, q->flags = flags;
  struct mc_drd r = {body, len, 0, 0};
  if (decode(&r, q, shared) || r.bad || r.off != r.n) return -1;
  return 0;
}

/* ------------------------------------------------------------------ REPLICA_DESC replies */

void mc_drep_put_replica_desc(struct mc_dbuf *b, int64_t n, const struct mc_replica_desc *d) {
  mc_dbuf_put(b, &n, 8);
  for (int64_t i = 0; i < n; i++) {
    int32_t st = d[i].status;
    mc_dbuf_put(b, &st, 4);
    mc_dbuf_u64(b, d[i].size);
    mc_dbuf_u64(b, d[i].address);
    mc_dbuf_str(b, d[i].endpoint);
    mc_dbuf_str(b, d[i].segment_name);
  }
}

/* A name of at most MC_DUMMY_MAX_NAME bytes (mc_drd_str checks the rest: present, no NUL). */
static int get_name(struct mc_drd *r, char **s) {
  uint32_t n;
  if (r->bad || left(r) < 4) return r->bad = -1;
  memcpy(&n, r->p + r->off, 4);
  return n > MC_DUMMY_MAX_NAME ? (r->bad = -1) : mc_drd_str(r, s);
}

int mc_drep_replica_desc(const char *body, size_t len, struct mc_replica_desc **out, int *rc) {
  *out = NULL;
  *rc = MC_RPC_FAIL;
  struct mc_drd r = {body, len, 0, 0};
  int64_t n;
  if (mc_drd_get(&r, &n, 8) || n < INT_MIN) return -1;
  if (n < 0) { /* a code comes alone */
    if (r.off != r.n) return -1;
    *rc = (int)n;
    return 0;
  }
  /* each descriptor takes at least 28 bytes (two empty names) */
  if (n > MC_DUMMY_MAX_DESCS || (uint64_t)n > left(&r) / 28) return -1;
  struct mc_replica_desc *d = mc_calloc(n ? (size_t)n : 1, sizeof(*d)); /* as the local path allocates it */
  int got = 0;
  for (; got < n; got++) {
    int32_t st;
    if (mc_drd_get(&r, &st, 4) || mc_drd_u64(&r, &d[got].size) || mc_drd_u64(&r, &d[got].address) ||
        get_name(&r, &d[got].endpoint) || get_name(&r, &d[got].segment_name))
      break;
    d[got].status = st;
  }
  if (got < n || r.bad || r.off != r.n) {
    mc_store_replica_desc_free(d, got < n ? got + 1 : got); /* the one cut short may hold its endpoint */
    return -1;
  }
  *out = d;
  *rc = (int)n;
  return 0;
}
