/* The P2P store's metadata record (record.h; docs/p2p-store.md, "Metadata"). Decoding trusts nothing: a
 * record is JSON text anyone with access to the metadata service may have written. */
#include "p2p/record.h"

#include <jansson.h>
#include <string.h>

#include "common/alloc.h"

int p2p_shard_size_ok(uint64_t max_shard) {
  return max_shard > 0 && max_shard <= P2P_MAX_SHARD_SIZE && (max_shard & (max_shard - 1)) == 0;
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
    json_t *seg = json_object_get(h, "segment_name"), *exp = json_object_get(h, "expires");
    struct p2p_holder *e = &(*list)[i];
    uint64_t expires = 0;
    if (!json_is_string(seg) || !json_string_length(seg) || json_string_length(seg) > P2P_MAX_SEGMENT ||
        strlen(json_string_value(seg)) != json_string_length(seg))
      return *why = "a holder's segment_name is missing, empty, too long or holds a NUL", -1;
    if (uint_field(h, "offset", &e->offset)) return *why = "a holder's offset is missing or negative", -1;
    if (exp && (uint_field(h, "expires", &expires) || expires > INT64_MAX))
      return *why = "a holder's expires is not a non-negative integer", -1;
    memcpy(e->seg, json_string_value(seg), json_string_length(seg) + 1);
    e->expires = (int64_t)expires;
    *n = i + 1;
  }
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

static json_t *encode_holders(const struct p2p_holder *list, size_t n) {
  if (!n) return json_null();
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) {
    json_t *h = json_pack("{s:s, s:I}", "segment_name", list[i].seg, "offset", (json_int_t)list[i].offset);
    if (list[i].expires) json_object_set_new(h, "expires", json_integer(list[i].expires));
    json_array_append_new(a, h);
  }
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
    json_array_append_new(sh, o);
  }
  json_t *o = json_pack("{s:s, s:I, s:o, s:I, s:o}", "name", r->name, "size", (json_int_t)r->size, "size_list", sl,
                        "max_shard_size", (json_int_t)r->max_shard, "shards", sh);
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

size_t p2p_record_prune(struct p2p_record *r, int64_t now_ms) {
  size_t n = 0;
  for (size_t i = 0; i < r->nshards; i++)
    n += filter(r->shards[i].gold, &r->shards[i].ngold, expired, &now_ms) +
         filter(r->shards[i].rep, &r->shards[i].nrep, expired, &now_ms);
  return n;
}

int p2p_record_empty(const struct p2p_record *r) {
  for (size_t i = 0; i < r->nshards; i++)
    if (r->shards[i].ngold || r->shards[i].nrep) return 0;
  return 1;
}

size_t p2p_record_remove(struct p2p_record *r, const char *seg, int gold) {
  size_t n = 0;
  for (size_t i = 0; i < r->nshards; i++)
    n += gold ? filter(r->shards[i].gold, &r->shards[i].ngold, is_seg, seg)
              : filter(r->shards[i].rep, &r->shards[i].nrep, is_seg, seg);
  return n;
}

int p2p_record_put(struct p2p_record *r, const char *seg, int gold, const uint8_t *have, const uint64_t *addr,
                   int64_t expires) {
  int changed = 0;
  if (strlen(seg) > P2P_MAX_SEGMENT) return 0;
  for (size_t i = 0; i < r->nshards; i++) {
    if (have && !have[i]) continue;
    struct p2p_shard *s = &r->shards[i];
    struct p2p_holder **list = gold ? &s->gold : &s->rep;
    size_t *n = gold ? &s->ngold : &s->nrep, j = 0;
    while (j < *n && strcmp((*list)[j].seg, seg)) j++;
    if (j == *n) {
      if (*n >= P2P_MAX_HOLDERS) continue;
      *list = mc_realloc(*list, (*n + 1) * sizeof(**list));
      memset(&(*list)[j], 0, sizeof(**list));
      strcpy((*list)[j].seg, seg);
      (*n)++;
    }
    (*list)[j].offset = addr[i];
    (*list)[j].expires = expires;
    changed = 1;
  }
  return changed;
}
