/* The P2P store's metadata record (docs/p2p-store.md, "Metadata"): decoding with every field checked and
 * capped (a record may be garbage or hostile: it is then refused, never trusted), encoding, the shard layout
 * of a buffer list, and the edits the store makes to holder lists. Internal header of layer p2p. */
#ifndef MC_P2P_RECORD_H
#define MC_P2P_RECORD_H
#include <stddef.h>
#include <stdint.h>

#define P2P_KEY_PREFIX "mooncake/checkpoint/"
#define P2P_MAX_SHARDS (1u << 20)  /* per record */
#define P2P_MAX_HOLDERS 1024u      /* per list of a shard */
#define P2P_MAX_BUFFERS 65536u     /* entries of size_list */
#define P2P_MAX_NAME 1024u         /* a payload name's bytes */
#define P2P_MAX_SEGMENT 255u       /* a holder's segment name's bytes */
#define P2P_MAX_SHARD_SIZE (4ull << 30)
#define P2P_STRIPE (4ull << 20)      /* the stripe size a producer writes (smaller when max_shard is) */
#define P2P_MIN_STRIPE (64ull << 10) /* a record's stripe_size is a power of two from this to max_shard */

struct p2p_holder {
  char seg[P2P_MAX_SEGMENT + 1];
  uint64_t offset;  /* the holder's virtual address of the shard */
  int64_t expires;  /* lease end, ms since the epoch; 0 = none (an upstream writer) */
};

/* A consumer still fetching a shard, holding the stripes set in bits (stripe k: byte k / 8, bit k % 8; the
 * bits past the shard's stripe count are 0). Never a replica: upstream readers do not see it. */
struct p2p_part {
  struct p2p_holder h;
  uint8_t *bits; /* malloc'ed, p2p_bitmap_bytes(the shard's stripe count) */
};

struct p2p_shard {
  uint64_t size;
  uint32_t crc;
  int has_crc;
  struct p2p_holder *gold, *rep; /* malloc'ed; counts below */
  size_t ngold, nrep;
  uint32_t *stripe_crc; /* the CRC-32 of each stripe (record's stripe_size), NULL when the shard has none */
  struct p2p_part *part; /* partial holders (only on a shard with stripe_crc) */
  size_t npart;
};

struct p2p_record {
  char *name;
  uint64_t size, max_shard;
  uint64_t *size_list;
  size_t nsize;
  struct p2p_shard *shards;
  size_t nshards;
  uint64_t stripe_size; /* 0: the record has no stripe fields (an older or upstream writer) */
};

/* The stripes of a shard of size bytes in stripes of stripe bytes (0 when stripe is 0). */
size_t p2p_stripes(uint64_t size, uint64_t stripe);
/* The bytes of stripe k of a shard of size bytes cut in stripes of stripe bytes (the last one possibly
 * shorter). */
static inline uint64_t p2p_stripe_len(uint64_t size, uint64_t stripe, size_t k) {
  uint64_t off = (uint64_t)k * stripe;
  return size - off < stripe ? size - off : stripe;
}
/* The shard's CRC-32 from its n stripes' (crc[k] of stripe k), by zlib's crc32_combine. */
uint32_t p2p_stripe_crcs_combine(const uint32_t *crc, size_t n, uint64_t size, uint64_t stripe);
/* Bytes of a bitmap of n stripes. */
static inline size_t p2p_bitmap_bytes(size_t n) { return (n + 7) / 8; }

/* 1 when max_shard is a power of two of at most 4 GiB. */
int p2p_shard_size_ok(uint64_t max_shard);
/* The number of shards of buffers sizes[0..n) cut into max_shard pieces (the last of each buffer possibly
 * shorter), or 0 when a size is 0 or the count exceeds P2P_MAX_SHARDS. With shard_sizes / buf_index /
 * buf_off non-NULL (room for that count), each shard's size, buffer and offset in it. */
size_t p2p_layout(const uint64_t *sizes, size_t n, uint64_t max_shard, uint64_t *shard_sizes, size_t *buf_index,
                  uint64_t *buf_off);

/* Decodes text into *r: 0, or -1 with a reason (static text) in *why. Checks: every field's type; name
 * matches expect_name; counts within the limits above; size = the sum of size_list; the shards are exactly
 * the layout of size_list cut by max_shard; segment names non-empty, at most P2P_MAX_SEGMENT bytes; offsets
 * and expiries non-negative; stripe_size a power of two from P2P_MIN_STRIPE to max_shard; a shard's
 * stripe_crc32 exactly one CRC per stripe and combining to its crc32; partial entries only on a shard with
 * stripe CRCs, at most P2P_MAX_HOLDERS, each bitmap lowercase or uppercase hex of exactly the stripe
 * count's bytes with no bit past the last stripe. */
int p2p_record_decode(const char *text, const char *expect_name, struct p2p_record *r, const char **why);
/* The record as compact JSON text (malloc'ed). Empty holder lists are written as null. */
char *p2p_record_encode(const struct p2p_record *r);
void p2p_record_free(struct p2p_record *r);

/* Drops every holder entry (partial ones too) whose lease ended before now_ms. Returns how many were dropped. */
size_t p2p_record_prune(struct p2p_record *r, int64_t now_ms);
/* 1 when no shard has a holder left (a partial holder counts: it is still fetching). */
int p2p_record_empty(const struct p2p_record *r);
/* Removes seg's entries from the gold (gold != 0) or replica lists of every shard, and its partial entries.
 * Returns how many. */
size_t p2p_record_remove(struct p2p_record *r, const char *seg, int gold);
/* Makes seg a holder (gold or replica list) of every shard i with have[i] (have NULL: every shard), at
 * offset addr[i], with lease end expires: an entry of seg already there is updated, else one is appended
 * (a list already at P2P_MAX_HOLDERS is left as it is); seg's partial entry of such a shard goes (the full
 * entry replaces it). Returns 1 when the record changed. */
int p2p_record_put(struct p2p_record *r, const char *seg, int gold, const uint8_t *have, const uint64_t *addr,
                   int64_t expires);
/* Makes seg a partial holder of shard i holding the stripes set in bits (p2p_bitmap_bytes of the shard's
 * stripe count) at offset addr: its entry is updated or appended (not beyond P2P_MAX_HOLDERS), removed when
 * bits is all 0. Nothing is done for a shard without stripe CRCs or one seg holds whole. Returns 1 when the
 * record changed. */
int p2p_record_put_partial(struct p2p_record *r, const char *seg, size_t i, const uint8_t *bits, uint64_t addr,
                           int64_t expires);
#endif
