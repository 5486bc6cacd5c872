/* The P2P store's metadata record (record.h; docs/p2p-store.md, "Metadata"). Decoding trusts nothing: a
 * record is JSON text anyone with access to the metadata service may have written. */
#include "p2p/record.h"

#include <jansson.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"

int p2p_shard_size_ok(uint64_t max_shard) {
  return max_shard > 0 && max_shard <= P2P_MAX_SHARD_SIZE && (max_shard & (max_shard - 1)) == 0;
}

size_t p2p_stripes(uint64_t size, uint64_t stripe) { return stripe ? (size_t)((size + stripe - 1) / stripe) : 0; }

uint32_t p2p_stripe_crcs_combine(const uint32_t *crc, size_t n, uint64_t size, uint64_t stripe) {
  uLong all = n ? crc[0] : 0;
  for (size_t k = 1; k < n; k++) all = crc32_combine(all, crc[k], (z_off_t)p2p_stripe_len(size, stripe, k));
  return (uint32_t)all;
}

size_t p2p_layout(const uint64_t *sizes, size_t n, uint64_t max_shard, uint64_t *shard_sizes, size_t *buf_index,
                  uint64_t *buf_off) {
  size_t count = 0;
  if (!max_shard) return 0;
  for (size_t i = 0; i < n; i++) {
    if (!sizes[i]) return 0;
    for (uint64_t off = 0; off < sizes[i]; off += max_shard) {
      if (count >= P2P_MAX_SHARDS) return 0;
      uint64_t left = sizes[i] - off;
      if (shard_sizes) shard_sizes[count] = left < max_shard ? left : max_shard;
      if (buf_index) buf_index[count] = i;
      if (buf_off) buf_off[count] = off;
      count++;
    }
  }
  return count;
}

/* ---- decoding ---- */

/* A non-negative JSON integer into *out. 0 or -1. */
static int uint_field(const json_t *o, const char *name, uint64_t *out) {
  json_t *v = json_object_get(o, name);
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

/* One holder entry (segment_name, offset, expires) into *e. 0 or -1 with *why. */
static int decode_holder(const json_t *h, struct p2p_holder *e, const char **why) {
  json_t *seg = json_object_get(h, "segment_name"), *exp = json_object_get(h, "expires");
  uint64_t expires = 0;
  if (!json_is_string(seg) || !json_string_length(seg) || json_string_length(seg) > P2P_MAX_SEGMENT ||
      strlen(json_string_value(seg)) != json_string_length(seg))
    return *why = "a holder's segment_name is missing, empty, too long or holds a NUL", -1;
  if (uint_field(h, "offset", &e->offset)) return *why = "a holder's offset is missing or negative", -1;
  if (exp && (uint_field(h, "expires", &expires) || expires > INT64_MAX))
    return *why = "a holder's expires is not a non-negative integer", -1;
  memcpy(e->seg, json_string_value(seg), json_string_length(seg) + 1);
  e->expires = (int64_t)expires;
  return 0;
}

/* A holder list (null or an array) into *list / *n. 0 or -1 with *why. */
static int decode_holders(const json_t *a, struct p2p_holder **list, size_t *n, const char **why) {
  *list = NULL;
  *n = 0;
  if (!a || json_is_null(a)) return 0;
  if (!json_is_array(a)) return *why = "a holder list is not an array", -1;
  if (json_array_size(a) > P2P_MAX_HOLDERS) return *why = "a holder list is longer than 1024", -1;
  *list = mc_calloc(json_array_size(a) + 1, sizeof(**list));
  size_t i;
  json_t *h;
  json_array_foreach(a, i, h) {
    if (decode_holder(h, &(*list)[i], why)) return -1;
    *n = i + 1;
  }
  return 0;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A shard's partial list (null or an array) into s->part / s->npart; nstripes: the shard's stripe count
 * (0: the shard has no stripe CRCs, so no partial entry is allowed). 0 or -1 with *why. */
static int decode_parts(const json_t *a, struct p2p_shard *s, size_t nstripes, const char **why) {
  if (!a || json_is_null(a)) return 0;
  if (!json_is_array(a)) return *why = "a partial list is not an array", -1;
  if (json_array_size(a) > P2P_MAX_HOLDERS) return *why = "a partial list is longer than 1024", -1;
  if (json_array_size(a) && !nstripes) return *why = "a shard has partial holders but no stripe_crc32", -1;
  size_t nb = p2p_bitmap_bytes(nstripes), i;
  s->part = mc_calloc(json_array_size(a) + 1, sizeof(*s->part));
  json_t *h;
  json_array_foreach(a, i, h) {
    struct p2p_part *e = &s->part[i];
    json_t *bits = json_object_get(h, "stripes");
    if (decode_holder(h, &e->h, why)) return -1;
    if (!json_is_string(bits) || json_string_length(bits) != 2 * nb)
      return *why = "a partial holder's stripes is not a hex bitmap of the shard's stripe count", -1;
    e->bits = mc_calloc(nb, 1);
    s->npart = i + 1;
    const char *t = json_string_value(bits);
    for (size_t k = 0; k < nb; k++) {
      int hi = hex_digit(t[2 * k]), lo = hex_digit(t[2 * k + 1]);
      if (hi < 0 || lo < 0) return *why = "a partial holder's stripes is not hex", -1;
      e->bits[k] = (uint8_t)(hi << 4 | lo);
    }
    if (nstripes % 8 && e->bits[nb - 1] >> (nstripes % 8))
      return *why = "a partial holder's stripes has a bit past the shard's last stripe", -1;
  }
  return 0;
}

/* A shard's stripe_crc32 (absent, or an array of exactly nstripes 32-bit CRCs combining to its crc32). */
static int decode_stripe_crcs(const json_t *a, struct p2p_shard *s, uint64_t stripe, size_t nstripes,
                              const char **why) {
  if (!a) return 0;
  if (!stripe) return *why = "a shard has stripe_crc32 but the record no stripe_size", -1;
  if (!json_is_array(a) || json_array_size(a) != nstripes)
    return *why = "a shard's stripe_crc32 is not an array of one CRC per stripe", -1;
  s->stripe_crc = mc_calloc(nstripes, sizeof(uint32_t));
  for (size_t k = 0; k < nstripes; k++) {
    json_t *v = json_array_get(a, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffll)
      return *why = "a shard's stripe_crc32 holds something not a 32-bit unsigned integer", -1;
    s->stripe_crc[k] = (uint32_t)json_integer_value(v);
  }
  if (s->has_crc && p2p_stripe_crcs_combine(s->stripe_crc, nstripes, s->size, stripe) != s->crc) return *why = "a shard's stripe_crc32 does not combine to its crc32", -1;
  return 0;
}

static int decode_shards(const json_t *arr, struct p2p_record *r, const char **why) {
  uint64_t *want = mc_calloc(P2P_MAX_SHARDS < json_array_size(arr) + 1 ? P2P_MAX_SHARDS : json_array_size(arr) + 1,
                             sizeof(uint64_t));
  size_t count = p2p_layout(r->size_list, r->nsize, r->max_shard, NULL, NULL, NULL);
  int rc = 0;
  if (!count || count != json_array_size(arr)) {
    rc = -1;
    *why = "the shard list is not the layout of size_list cut by max_shard_size";
  } else {
    p2p_layout(r->size_list, r->nsize, r->max_shard, want, NULL, NULL);
  }
  r->shards = rc ? NULL : mc_calloc(count, sizeof(*r->shards));
  for (size_t i = 0; !rc && i < count; i++) {
    json_t *o = json_array_get(arr, i), *crc = json_object_get(o, "crc32");
    struct p2p_shard *s = &r->shards[i];
    r->nshards = i + 1;
    if (!json_is_object(o) || uint_field(o, "size", &s->size) || s->size != want[i]) {
      rc = -1, *why = "a shard's size is missing or differs from the layout";
    } else if (crc && (!json_is_integer(crc) || json_integer_value(crc) < 0 || json_integer_value(crc) > 0xffffffffll)) {
      rc = -1, *why = "a shard's crc32 is not a 32-bit unsigned integer";
    } else if (decode_holders(json_object_get(o, "gold"), &s->gold, &s->ngold, why) ||
               decode_holders(json_object_get(o, "replica_list"), &s->rep, &s->nrep, why)) {
      rc = -1;
    } else {
      s->has_crc = crc != NULL;
      s->crc = crc ? (uint32_t)json_integer_value(crc) : 0;
      size_t ns = p2p_stripes(s->size, r->stripe_size);
      if (decode_stripe_crcs(json_object_get(o, "stripe_crc32"), s, r->stripe_size, ns, why) ||
          decode_parts(json_object_get(o, "partial"), s, s->stripe_crc ? ns : 0, why))
        rc = -1;
    }
  }
  mc_free(want);
  return rc;
}

static int decode(const json_t *o, const char *expect_name, struct p2p_record *r, const char **why) {
  json_t *name = json_object_get(o, "name"), *sl = json_object_get(o, "size_list"), *sh = json_object_get(o, "shards");
  if (!json_is_object(o)) return *why = "not a JSON object", -1;
  if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name) ||
      (expect_name && strcmp(json_string_value(name), expect_name)))
    return *why = "name is missing or not the payload's", -1;
  r->name = mc_strdup(json_string_value(name));
  if (uint_field(o, "size", &r->size) || uint_field(o, "max_shard_size", &r->max_shard) ||
      !p2p_shard_size_ok(r->max_shard))
    return *why = "size or max_shard_size is missing, or max_shard_size is not a power of two up to 4 GiB", -1;
  if (!json_is_array(sl) || !json_array_size(sl) || json_array_size(sl) > P2P_MAX_BUFFERS)
    return *why = "size_list is not an array of 1 to 65536 sizes", -1;
  r->size_list = mc_calloc(json_array_size(sl), sizeof(uint64_t));
  uint64_t total = 0;
  for (size_t i = 0; i < json_array_size(sl); i++) {
    json_t *v = json_array_get(sl, i);
    if (!json_is_integer(v) || json_integer_value(v) <= 0) return *why = "a size_list entry is not positive", -1;
    r->size_list[i] = (uint64_t)json_integer_value(v);
    r->nsize = i + 1;
    if (r->size_list[i] > UINT64_MAX - total) return *why = "size_list overflows", -1;
    total += r->size_list[i];
  }
  if (total != r->size) return *why = "size is not the sum of size_list", -1;
  json_t *ss = json_object_get(o, "stripe_size");
  if (ss && (uint_field(o, "stripe_size", &r->stripe_size) || r->stripe_size < P2P_MIN_STRIPE ||
             r->stripe_size > r->max_shard || (r->stripe_size & (r->stripe_size - 1))))
    return *why = "stripe_size is not a power of two from 64 KiB to max_shard_size", -1;
  if (!json_is_array(sh) || json_array_size(sh) > P2P_MAX_SHARDS) return *why = "shards is not an array (of at most 1 Mi)", -1;
  return decode_shards(sh, r, why);
}

int p2p_record_decode(const char *text, const char *expect_name, struct p2p_record *r, const char **why) {
  memset(r, 0, sizeof(*r));
  json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  *why = "not JSON";
  int rc = o ? decode(o, expect_name, r, why) : -1;
  json_decref(o);
  if (rc) p2p_record_free(r);
  return rc;
}

/* ---- encoding ---- */

static json_t *encode_holder(const struct p2p_holder *e) {
  json_t *h = json_pack("{s:s, s:I}", "segment_name", e->seg, "offset", (json_int_t)e->offset);
  if (e->expires) json_object_set_new(h, "expires", json_integer(e->expires));
  return h;
}

static json_t *encode_holders(const struct p2p_holder *list, size_t n) {
  if (!n) return json_null();
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, encode_holder(&list[i]));
  return a;
}

static json_t *encode_parts(const struct p2p_shard *s, size_t nstripes) {
  static const char hex[] = "0123456789abcdef";
  size_t nb = p2p_bitmap_bytes(nstripes);
  char *t = mc_malloc(2 * nb + 1);
  json_t *a = json_array();
  for (size_t i = 0; i < s->npart; i++) {
    for (size_t k = 0; k < nb; k++) t[2 * k] = hex[s->part[i].bits[k] >> 4], t[2 * k + 1] = hex[s->part[i].bits[k] & 15];
    t[2 * nb] = 0;
    json_t *h = encode_holder(&s->part[i].h);
    json_object_set_new(h, "stripes", json_string(t));
    json_array_append_new(a, h);
  }
  mc_free(t);
  return a;
}

char *p2p_record_encode(const struct p2p_record *r) {
  json_t *sl = json_array(), *sh = json_array();
  for (size_t i = 0; i < r->nsize; i++) json_array_append_new(sl, json_integer((json_int_t)r->size_list[i]));
  for (size_t i = 0; i < r->nshards; i++) {
    const struct p2p_shard *s = &r->shards[i];
    json_t *o = json_pack("{s:I, s:o, s:o}", "size", (json_int_t)s->size, "gold", encode_holders(s->gold, s->ngold),
                          "replica_list", encode_holders(s->rep, s->nrep));
    if (s->has_crc) json_object_set_new(o, "crc32", json_integer(s->crc));
    if (s->stripe_crc) {
      json_t *c = json_array();
      for (size_t k = 0; k < p2p_stripes(s->size, r->stripe_size); k++) json_array_append_new(c, json_integer(s->stripe_crc[k]));
      json_object_set_new(o, "stripe_crc32", c);
    }
    if (s->npart) json_object_set_new(o, "partial", encode_parts(s, p2p_stripes(s->size, r->stripe_size)));
    json_array_append_new(sh, o);
  }
  json_t *o = json_pack("{s:s, s:I, s:o, s:I, s:o}", "name", r->name, "size", (json_int_t)r->size, "size_list", sl,
                        "max_shard_size", (json_int_t)r->max_shard, "shards", sh);
  if (r->stripe_size) json_object_set_new(o, "stripe_size", json_integer((json_int_t)r->stripe_size));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  char *out = mc_strdup(text ? text : "");
  free(text);
  return out;
}

void p2p_record_free(struct p2p_record *r) {
  for (size_t i = 0; i < r->nshards; i++) {
    mc_free(r->shards[i].gold);
    mc_free(r->shards[i].rep);
    mc_free(r->shards[i].stripe_crc);
    for (size_t k = 0; k < r->shards[i].npart; k++) mc_free(r->shards[i].part[k].bits);
    mc_free(r->shards[i].part);
  }
  mc_free(r->shards);
  mc_free(r->size_list);
  mc_free(r->name);
  memset(r, 0, sizeof(*r));
}

/* ---- edits ---- */

/* Keeps the entries of list[0..*n) for which drop() is 0; returns how many went. */
static size_t filter(struct p2p_holder *list, size_t *n, int (*drop)(const struct p2p_holder *, const void *),
                     const void *arg) {
  size_t k = 0, before = *n;
  for (size_t i = 0; i < before; i++)
    if (!drop(&list[i], arg)) list[k++] = list[i];
  *n = k;
  return before - k;
}

static int expired(const struct p2p_holder *h, const void *now) {
  return h->expires && h->expires < *(const int64_t *)now;
}

static int is_seg(const struct p2p_holder *h, const void *seg) { return !strcmp(h->seg, seg); }

/* The same for a shard's partial entries (the bitmaps of those that go are freed). */
static size_t filter_parts(struct p2p_shard *s, int (*drop)(const struct p2p_holder *, const void *), const void *arg) {
  size_t k = 0, before = s->npart;
  for (size_t i = 0; i < before; i++) {
    if (drop(&s->part[i].h, arg))
      mc_free(s->part[i].bits);
    else
      s->part[k++] = s->part[i];
  }
  s->npart = k;
  return before - k;
}

size_t p2p_record_prune(struct p2p_record *r, int64_t now_ms) {
  size_t n = 0;
  for (size_t i = 0; i < r->nshards; i++)
    n += filter(r->shards[i].gold, &r->shards[i].ngold, expired, &now_ms) +
         filter(r->shards[i].rep, &r->shards[i].nrep, expired, &now_ms) + filter_parts(&r->shards[i], expired, &now_ms);
  return n;
}

int p2p_record_empty(const struct p2p_record *r) {
  for (size_t i = 0; i < r->nshards; i++)
    if (r->shards[i].ngold || r->shards[i].nrep || r->shards[i].npart) return 0;
  return 1;
}

size_t p2p_record_remove(struct p2p_record *r, const char *seg, int gold) {
  size_t n = 0;
  for (size_t i = 0; i < r->nshards; i++)
    n += (gold ? filter(r->shards[i].gold, &r->shards[i].ngold, is_seg, seg)
               : filter(r->shards[i].rep, &r->shards[i].nrep, is_seg, seg)) +
         filter_parts(&r->shards[i], is_seg, seg);
  return n;
}

/* The index of seg in list[0..n), or n. */
static size_t find_seg(const struct p2p_holder *list, size_t n, const char *seg) {
  size_t j = 0;
  while (j < n && strcmp(list[j].seg, seg)) j++;
  return j;
}

int p2p_record_put_partial(struct p2p_record *r, const char *seg, size_t i, const uint8_t *bits, uint64_t addr,
                           int64_t expires) {
  if (i >= r->nshards || strlen(seg) > P2P_MAX_SEGMENT) return 0;
  struct p2p_shard *s = &r->shards[i];
  if (!s->stripe_crc || find_seg(s->gold, s->ngold, seg) < s->ngold || find_seg(s->rep, s->nrep, seg) < s->nrep)
    return 0;
  size_t ns = p2p_stripes(s->size, r->stripe_size), nb = p2p_bitmap_bytes(ns), j = 0;
  int any = 0;
  for (size_t k = 0; k < nb; k++) any |= bits[k];
  while (j < s->npart && strcmp(s->part[j].h.seg, seg)) j++;
  if (!any) return filter_parts(s, is_seg, seg) > 0;
  if (j == s->npart) {
    if (s->npart >= P2P_MAX_HOLDERS) return 0;
    s->part = mc_realloc(s->part, (s->npart + 1) * sizeof(*s->part));
    memset(&s->part[j], 0, sizeof(*s->part));
    strcpy(s->part[j].h.seg, seg);
    s->part[j].bits = mc_calloc(nb, 1);
    s->npart++;
  }
  memcpy(s->part[j].bits, bits, nb);
  if (ns % 8) s->part[j].bits[nb - 1] &= (uint8_t)((1u << (ns % 8)) - 1); /* (no bit past the last stripe) */
  s->part[j].h.offset = addr;
  s->part[j].h.expires = expires;
  return 1;
}

int p2p_record_put(struct p2p_record *r, const char *seg, int gold, const uint8_t *have, const uint64_t *addr,
                   int64_t expires) {
  int changed = 0;
  if (strlen(seg) > P2P_MAX_SEGMENT) return 0;
  for (size_t i = 0; i < r->nshards; i++) {
    if (have && !have[i]) continue;
    struct p2p_shard *s = &r->shards[i];
    struct p2p_holder **list = gold ? &s->gold : &s->rep;
    size_t *n = gold ? &s->ngold : &s->nrep, j = find_seg(*list, *n, seg);
    if (j == *n) {
      if (*n >= P2P_MAX_HOLDERS) continue;
      *list = mc_realloc(*list, (*n + 1) * sizeof(**list));
      memset(&(*list)[j], 0, sizeof(**list));
      strcpy((*list)[j].seg, seg);
      (*n)++;
    }
    (*list)[j].offset = addr[i];
    (*list)[j].expires = expires;
    filter_parts(s, is_seg, seg); /* (the full entry replaces a partial one) */
    changed = 1;
  }
  return changed;
}
