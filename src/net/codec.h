/* Bounded binary codec for our own wire formats (master RPC). Writers grow a buffer; readers are total:
 * every read is bounds-checked and a failed read sets a sticky error, after which reads return zeros.
 * Integers are little-endian; strings and byte blobs are u32 length + bytes.
 *
 * A writer with `max` set (the master's reply buffers, docs/master.md "Limits") fails soft: growing past
 * max bytes, or an allocation failure, sets the sticky `err` flag and drops that write and every later
 * one (len stops growing, p stays valid). With max 0 the buffer is unbounded and an allocation failure
 * aborts, as for every mc_malloc. String fields read with mc_r_str are at most MC_STR_MAX bytes. */
#ifndef MC_NET_CODEC_H
#define MC_NET_CODEC_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

/* Little-endian integers at p: the one set of such helpers for every wire format of ours (the master RPC,
 * the control RPC's frame header, the TCP transport's request and status frames). */
static inline void mc_le_put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static inline void mc_le_put64(uint8_t *p, uint64_t v) {
  mc_le_put32(p, (uint32_t)v);
  mc_le_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t mc_le_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mc_le_get64(const uint8_t *p) { return mc_le_get32(p) | (uint64_t)mc_le_get32(p + 4) << 32; }

struct mc_wbuf {
  uint8_t *p;
  size_t len, cap;
  size_t max; /* 0: unbounded (allocation failure aborts); else the largest len, beyond it err is set */
  int err;    /* a write was dropped (max exceeded or no memory): the content is incomplete */
};

/* Longest string field mc_r_str accepts (segment names, endpoints, zones, host ids, patterns, scopes);
 * longer ones are a decode error (INVALID_PARAMS at the master). Keys are blobs, not bounded here. */
#define MC_STR_MAX 4096u

struct mc_rbuf_rd {
  const uint8_t *p;
  size_t len, off;
  int err;
};

/* Room for n more bytes. 0, or -1 with err set (bounded writers only; nothing changed). */
static inline int mc_w_reserve(struct mc_wbuf *w, size_t n) {
  if (w->err) return -1;
  if (n <= w->cap - w->len) return 0;
  if (n > SIZE_MAX - w->len || (w->max && (n > w->max || w->len > w->max - n))) {
    w->err = 1;
    return -1;
  }
  size_t c = w->cap ? w->cap : 256;
  while (c - w->len < n) c = c > SIZE_MAX / 2 ? SIZE_MAX : c * 2;
  if (w->max && c > w->max) c = w->max;
  if (!w->max) {
    w->p = mc_realloc(w->p, c);
  } else {
    uint8_t *p = mc_try_malloc(c);
    if (!p) {
      w->err = 1;
      return -1;
    }
    if (w->len) memcpy(p, w->p, w->len);
    mc_free(w->p);
    w->p = p;
  }
  w->cap = c;
  return 0;
}
static inline void mc_w_bytes_raw(struct mc_wbuf *w, const void *d, size_t n) {
  if (mc_w_reserve(w, n)) return;
  if (n) memcpy(w->p + w->len, d, n);
  w->len += n;
}
static inline void mc_w_u8(struct mc_wbuf *w, uint8_t v) { mc_w_bytes_raw(w, &v, 1); }
static inline void mc_w_u32(struct mc_wbuf *w, uint32_t v) {
  uint8_t b[4];
  mc_le_put32(b, v);
  mc_w_bytes_raw(w, b, 4);
}
static inline void mc_w_u64(struct mc_wbuf *w, uint64_t v) {
  mc_w_u32(w, (uint32_t)v);
  mc_w_u32(w, (uint32_t)(v >> 32));
}
static inline void mc_w_i32(struct mc_wbuf *w, int32_t v) { mc_w_u32(w, (uint32_t)v); }
static inline void mc_w_i64(struct mc_wbuf *w, int64_t v) { mc_w_u64(w, (uint64_t)v); }
static inline void mc_w_blob(struct mc_wbuf *w, const void *d, size_t n) {
  mc_w_u32(w, (uint32_t)n);
  mc_w_bytes_raw(w, d, n);
}
static inline void mc_w_str(struct mc_wbuf *w, const char *s) { mc_w_blob(w, s ? s : "", s ? strlen(s) : 0); }
/* Overwrites the u32 / u64 at offset `at`, written before (nothing when it was not: a bounded writer that
 * failed); for a count or a status known only after what follows it was written. */
static inline void mc_w_patch_u32(struct mc_wbuf *w, size_t at, uint32_t v) {
  if (at <= w->len && w->len - at >= 4) mc_le_put32(w->p + at, v);
}
static inline void mc_w_patch_u64(struct mc_wbuf *w, size_t at, uint64_t v) {
  if (at <= w->len && w->len - at >= 8) mc_le_put64(w->p + at, v);
}
static inline void mc_w_free(struct mc_wbuf *w) {
  mc_free(w->p);
  w->p = NULL;
  w->len = w->cap = 0;
  w->err = 0;
}

static inline void mc_r_init(struct mc_rbuf_rd *r, const void *p, size_t len) {
  r->p = p;
  r->len = len;
  r->off = 0;
  r->err = 0;
}
static inline const uint8_t *mc_r_take(struct mc_rbuf_rd *r, size_t n) {
  if (r->err || n > r->len - r->off) {
    r->err = 1;
    return NULL;
  }
  const uint8_t *p = r->p + r->off;
  r->off += n;
  return p;
}
static inline uint8_t mc_r_u8(struct mc_rbuf_rd *r) {
  const uint8_t *p = mc_r_take(r, 1);
  return p ? p[0] : 0;
}
static inline uint32_t mc_r_u32(struct mc_rbuf_rd *r) {
  const uint8_t *p = mc_r_take(r, 4);
  return p ? mc_le_get32(p) : 0;
}
static inline uint64_t mc_r_u64(struct mc_rbuf_rd *r) {
  uint64_t lo = mc_r_u32(r);
  return lo | (uint64_t)mc_r_u32(r) << 32;
}
static inline int32_t mc_r_i32(struct mc_rbuf_rd *r) { return (int32_t)mc_r_u32(r); }
static inline int64_t mc_r_i64(struct mc_rbuf_rd *r) { return (int64_t)mc_r_u64(r); }
/* A blob view into the buffer (not NUL-terminated); *n gets its length. */
static inline const uint8_t *mc_r_blob(struct mc_rbuf_rd *r, uint32_t *n) {
  *n = mc_r_u32(r);
  const uint8_t *p = mc_r_take(r, *n);
  if (!p) *n = 0;
  return p;
}
/* A malloc'ed NUL-terminated copy of a string field ("" on error). Embedded NULs and strings longer
 * than MC_STR_MAX are an error. */
static inline char *mc_r_str(struct mc_rbuf_rd *r) {
  uint32_t n;
  const uint8_t *p = mc_r_blob(r, &n);
  if (p && (n > MC_STR_MAX || memchr(p, 0, n))) r->err = 1;
  return mc_strndup(p && !r->err ? (const char *)p : "", p && !r->err ? n : 0);
}
/* A count that must be plausible given the bytes left (each element needs at least min_elem bytes). */
static inline uint32_t mc_r_count(struct mc_rbuf_rd *r, size_t min_elem) {
  uint32_t n = mc_r_u32(r);
  if (!r->err && min_elem && n > (r->len - r->off) / min_elem) r->err = 1;
  return r->err ? 0 : n;
}

#endif
