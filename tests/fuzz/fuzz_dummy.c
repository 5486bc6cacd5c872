/* Fuzz target: the real client's decoder of a dummy client's request bodies (docs/standalone.md, "Security";
 * mc_dreq_decode in src/standalone/wire.c). Input: u16 op, u16 flags, u8 s (the dummy shares 2^(s % 48)
 * bytes), then the body. Checked: a decoded request is within the wire's caps (keys, buffers, preferred
 * segments, task targets), every buffer lies inside the shared size, strings hold no NUL; a request with
 * no buffer outside the shared memory encodes again, field by field, to the very body it came from (the
 * body was consumed exactly, nothing was dropped or invented); a refused body leaves nothing allocated.
 * With op REPLICA_DESC and flags FZ_DUMMY_REPLY the body is a reply instead, for the dummy's decoder
 * (mc_drep_replica_desc): within its caps, and encoding again to the same bytes when accepted. */
#include <stdlib.h>
#include <string.h>

#include "standalone/wire.h"
#include "common/alloc.h"
#include "fuzz_common.h"
#include "mooncake/store.h"

static void str(struct mc_dbuf *b, const char *s) {
  if (!s) abort();
  mc_dbuf_str(b, s);
}

static void check(const struct mc_dreq *q, uint64_t shared) {
  if (q->count > MC_DUMMY_MAX_KEYS || q->nb > MC_DUMMY_MAX_BUFS || q->npref > MC_DUMMY_MAX_PREFERRED ||
      q->nstr > MC_DREQ_MAX_STRS)
    abort();
  size_t nb = 0;
  for (uint32_t i = 0; i < q->count; i++) {
    if (!q->keys || !q->keys[i]) abort();
    if (q->nbufs) nb += q->nbufs[i];
    if (q->groups && !q->groups[i]) abort();
  }
  if (q->nbufs && nb != q->nb) abort();
  for (size_t j = 0; j < q->nb; j++)
    if (q->off[j] > shared || q->len[j] > shared - q->off[j]) abort();
  if (q->op == MC_DOP_COPY_TASK && (q->nstr < 2 || q->nstr > MC_DREQ_MAX_STRS)) abort();
  if (q->op == MC_DOP_MOVE_TASK && q->nstr != 3) abort();
}

/* The body the request came from, written again with the dummy side's encoders. */
static void encode(const struct mc_dreq *q, struct mc_dbuf *b) {
  if (q->has_cfg) {
    mc_dbuf_u64(b, q->replica_num);
    mc_dbuf_put(b, &q->soft_pin, 4);
    mc_dbuf_u64(b, q->ttl_ms);
    mc_dbuf_put(b, &q->hard_pin, 4);
    mc_dbuf_u32(b, q->npref);
    for (uint32_t i = 0; i < q->npref; i++) str(b, q->pref[i]);
  }
  switch (q->op) {
    case MC_DOP_REMOVE:
    case MC_DOP_PUT_END:
    case MC_DOP_REMOVE_REGEX:
    case MC_DOP_REMOVE_ALL:
    case MC_DOP_STATS:
      mc_dbuf_u32(b, q->arg);
      break;
  }
  switch (q->op) {
    case MC_DOP_WRITE:
    case MC_DOP_READ:
    case MC_DOP_PUT_WRITE:
    case MC_DOP_GET_READ:
      mc_dbuf_u32(b, q->count);
      for (uint32_t i = 0, j = 0; i < q->count; i++) {
        str(b, q->keys[i]);
        if (q->groups) str(b, q->groups[i]);
        mc_dbuf_u32(b, (uint32_t)q->nbufs[i]);
        for (size_t e = j + q->nbufs[i]; j < e; j++) {
          mc_dbuf_u64(b, q->off[j]);
          mc_dbuf_u64(b, q->len[j]);
          if (q->obj) mc_dbuf_u64(b, q->obj[j]);
        }
      }
      break;
    case MC_DOP_PUT_START:
      mc_dbuf_u32(b, q->count);
      for (uint32_t i = 0; i < q->count; i++) {
        str(b, q->keys[i]);
        mc_dbuf_u64(b, q->sizes[i]);
        if (q->groups) str(b, q->groups[i]);
      }
      break;
    case MC_DOP_REMOVE:
    case MC_DOP_EXIST:
    case MC_DOP_SIZE:
    case MC_DOP_REPLICA_DESC:
    case MC_DOP_PUT_END:
    case MC_DOP_GET_START:
    case MC_DOP_GET_END:
      mc_dbuf_u32(b, q->count);
      for (uint32_t i = 0; i < q->count; i++) str(b, q->keys[i]);
      break;
    case MC_DOP_REMOVE_REGEX:
    case MC_DOP_MOVE_TASK:
      for (uint32_t i = 0; i < q->nstr; i++) str(b, q->str[i]);
      break;
    case MC_DOP_COPY_TASK:
      str(b, q->str[0]);
      mc_dbuf_u32(b, q->nstr - 1);
      for (uint32_t i = 1; i < q->nstr; i++) str(b, q->str[i]);
      break;
    case MC_DOP_QUERY_TASK:
      mc_dbuf_u64(b, q->id_hi);
      mc_dbuf_u64(b, q->id_lo);
      break;
  }
}

/* The dummy's reading of a REPLICA_DESC reply body. */
static void reply_case(const char *body, size_t n) {
  mc_replica_desc_t *d = NULL;
  int r = 0;
  if (mc_drep_replica_desc(body, n, &d, &r)) {
    if (d || r != MC_RPC_FAIL) abort();
    return;
  }
  if ((r >= 0) != (d != NULL) || r > MC_DUMMY_MAX_DESCS) abort();
  for (int i = 0; i < r; i++)
    if (!d[i].endpoint || !d[i].segment_name || strlen(d[i].endpoint) > MC_DUMMY_MAX_NAME ||
        strlen(d[i].segment_name) > MC_DUMMY_MAX_NAME)
      abort();
  struct mc_dbuf b = {0}; /* accepted: it was the body, exactly */
  mc_drep_put_replica_desc(&b, r, d);
  if (b.n != n || memcmp(b.p, body, n)) abort();
  mc_free(b.p);
  mc_store_replica_desc_free(d, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  struct fz_in in = {data, size, 0};
  uint16_t op = fz_u16(&in), flags = fz_u16(&in);
  uint64_t shared = 1ull << (fz_u8(&in) % 48);
  size_t n;
  const uint8_t *p = fz_take(&in, fz_left(&in), &n);
  /* the body in a buffer of its own size, so that a read past it is the sanitizer's to see */
  char *body = malloc(n ? n : 1);
  if (n) memcpy(body, p, n);
  if (op == MC_DOP_REPLICA_DESC && (flags & FZ_DUMMY_REPLY)) {
    reply_case(body, n);
    free(body);
    return 0;
  }
  struct mc_dreq q;
  if (mc_dreq_decode(op, flags, body, n, shared, &q) == 0) {
    check(&q, shared);
    if (!q.outside) {
      struct mc_dbuf b = {0};
      encode(&q, &b);
      if (b.n != n || (n && memcmp(b.p, body, n))) abort();
      mc_free(b.p);
    }
  }
  mc_dreq_free(&q);
  /* freed twice is harmless: mc_dreq_free leaves an empty request */
  mc_dreq_free(&q);
  free(body);
  return 0;
}
