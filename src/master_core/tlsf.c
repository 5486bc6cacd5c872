/* TLSF over segment offsets (see tlsf.h). Sizes are handled in units of MC_TLSF_ALIGN bytes.
 * Class of a size u (units): u < 32 -> (0, u); else fl = msb(u) - 4, sl = the 5 bits below the msb.
 * Lists hold free blocks of their class; a search rounds the request up to the next class so that any
 * block found fits, after first looking at the head of the request's own class (exact-size holes are
 * what uniform workloads leave behind, and taking them keeps utilisation near 100%). */
#include "master_core/tlsf.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/alloc.h"

#define SL_LOG2 5
#define SL_COUNT (1u << SL_LOG2)
#define FL_COUNT 60 /* enough for any 64-bit size; an allocator has only the rows its size needs */
#define NODES_FIRST_CHUNK 4 /* node chunks double from this up to NODES_PER_CHUNK */
#define NODES_PER_CHUNK 256
#define OWN_CLASS_PROBES 4

struct mc_tlsf_block {
  uint64_t off, size; /* units */
  struct mc_tlsf_block *prev_phys, *next_phys;
  struct mc_tlsf_block *prev_free, *next_free; /* free blocks: class list; spare nodes: pool list */
  int free;
};

struct node_chunk {
  struct node_chunk *next;
  struct mc_tlsf_block nodes[];
};

/* Sized to the segment (docs/master.md, "Allocator"): nfl first-level rows, the classes a block of at most
 * `units` can fall in, and each row's 32 list heads allocated when a free block first lands in it. A fresh
 * 64 MiB segment holds one free block: one row of heads and one chunk of NODES_FIRST_CHUNK nodes. */
struct mc_tlsf {
  uint64_t units, used_units;
  uint64_t fl_map;
  _Atomic uint64_t *used_sum; /* mc_tlsf_count_into: also counts used bytes there, or NULL */
  struct mc_tlsf_block *first; /* offset 0: merges keep the lower block, so this node lives forever */
  struct mc_tlsf_block *spare;   /* pool of unused nodes */
  struct node_chunk *chunks;
  uint32_t next_chunk; /* nodes in the next chunk */
  int nfl;
  uint32_t *sl_map;              /* [nfl] */
  struct mc_tlsf_block ***heads; /* [nfl] rows of SL_COUNT heads, NULL until used */
};

static int msb64(uint64_t x) { return 63 - __builtin_clzll(x); }

static void mapping(uint64_t u, int *fl, int *sl) {
  if (u < SL_COUNT) {
    *fl = 0;
    *sl = (int)u;
    return;
  }
  int m = msb64(u);
  *fl = m - (SL_LOG2 - 1);
  *sl = (int)((u >> (m - SL_LOG2)) ^ SL_COUNT);
}

/* The class whose every block is >= u: u rounded up to the next class boundary. */
static void mapping_search(uint64_t u, int *fl, int *sl) {
  if (u >= SL_COUNT) u += (1ull << (msb64(u) - SL_LOG2)) - 1;
  mapping(u, fl, sl);
}

static struct mc_tlsf_block *node_get(struct mc_tlsf *t) {
  if (!t->spare) {
    uint32_t n = t->next_chunk;
    struct node_chunk *c = mc_malloc(sizeof(*c) + sizeof(c->nodes[0]) * n);
    c->next = t->chunks;
    t->chunks = c;
    for (uint32_t i = 0; i < n; i++) {
      c->nodes[i].next_free = t->spare;
      t->spare = &c->nodes[i];
    }
    t->next_chunk = 2 * n < NODES_PER_CHUNK ? 2 * n : NODES_PER_CHUNK;
  }
  struct mc_tlsf_block *b = t->spare;
  t->spare = b->next_free;
  *b = (struct mc_tlsf_block){0};
  return b;
}

static void node_put(struct mc_tlsf *t, struct mc_tlsf_block *b) {
  b->next_free = t->spare;
  t->spare = b;
}

/* Used units change by delta (two's complement for a decrease); the shared counter follows. */
static void used_add(struct mc_tlsf *t, uint64_t delta) {
  t->used_units += delta;
  if (t->used_sum) atomic_fetch_add_explicit(t->used_sum, delta * MC_TLSF_ALIGN, memory_order_relaxed);
}

static void list_insert(struct mc_tlsf *t, struct mc_tlsf_block *b) {
  int fl, sl;
  mapping(b->size, &fl, &sl);
  if (!t->heads[fl]) t->heads[fl] = mc_calloc(SL_COUNT, sizeof(*t->heads[fl]));
  b->free = 1;
  b->prev_free = NULL;
  b->next_free = t->heads[fl][sl];
  if (b->next_free) b->next_free->prev_free = b;
  t->heads[fl][sl] = b;
  t->fl_map |= 1ull << fl;
  t->sl_map[fl] |= 1u << sl;
}

static void list_remove(struct mc_tlsf *t, struct mc_tlsf_block *b) {
  int fl, sl;
  mapping(b->size, &fl, &sl);
  if (b->prev_free) b->prev_free->next_free = b->next_free;
  else t->heads[fl][sl] = b->next_free;
  if (b->next_free) b->next_free->prev_free = b->prev_free;
  if (!t->heads[fl][sl]) {
    t->sl_map[fl] &= ~(1u << sl);
    if (!t->sl_map[fl]) t->fl_map &= ~(1ull << fl);
  }
  b->free = 0;
  b->prev_free = b->next_free = NULL;
}

struct mc_tlsf *mc_tlsf_create(uint64_t size) {
  uint64_t units = size / MC_TLSF_ALIGN;
  if (!units) return NULL;
  int fl, sl;
  mapping(units, &fl, &sl);
  struct mc_tlsf *t = mc_calloc(1, sizeof(*t) + (size_t)(fl + 1) * (sizeof(*t->sl_map) + sizeof(*t->heads)));
  t->units = units;
  t->nfl = fl + 1;
  t->heads = (struct mc_tlsf_block ***)(t + 1);
  t->sl_map = (uint32_t *)(t->heads + t->nfl);
  t->next_chunk = NODES_FIRST_CHUNK;
  struct mc_tlsf_block *b = node_get(t);
  b->size = units;
  t->first = b;
  list_insert(t, b);
  return t;
}

void mc_tlsf_destroy(struct mc_tlsf *t) {
  if (!t) return;
  while (t->chunks) {
    struct node_chunk *c = t->chunks;
    t->chunks = c->next;
    mc_free(c);
  }
  for (int fl = 0; fl < t->nfl; fl++) mc_free(t->heads[fl]);
  mc_free(t);
}

void mc_tlsf_count_into(struct mc_tlsf *t, _Atomic uint64_t *sum) {
  if (t->used_sum) atomic_fetch_sub_explicit(t->used_sum, t->used_units * MC_TLSF_ALIGN, memory_order_relaxed);
  t->used_sum = sum;
  if (sum) atomic_fetch_add_explicit(sum, t->used_units * MC_TLSF_ALIGN, memory_order_relaxed);
}

/* A few blocks of the request's own class may fit (the class spans sizes around u). */
static struct mc_tlsf_block *probe_own_class(struct mc_tlsf *t, uint64_t u) {
  int fl, sl;
  mapping(u, &fl, &sl);
  struct mc_tlsf_block *b = fl < t->nfl && t->heads[fl] ? t->heads[fl][sl] : NULL;
  for (int i = 0; b && i < OWN_CLASS_PROBES; i++, b = b->next_free)
    if (b->size >= u) return b;
  return NULL;
}

static struct mc_tlsf_block *find_fit(struct mc_tlsf *t, uint64_t u) {
  struct mc_tlsf_block *b = probe_own_class(t, u);
  if (b) return b;
  int fl, sl;
  mapping_search(u, &fl, &sl);
  if (fl >= t->nfl) return NULL;
  uint32_t sm = t->sl_map[fl] & (~0u << sl);
  if (!sm) {
    uint64_t fm = fl + 1 < 64 ? t->fl_map & (~0ull << (fl + 1)) : 0;
    if (!fm) return NULL;
    fl = __builtin_ctzll(fm);
    sm = t->sl_map[fl];
  }
  return t->heads[fl][__builtin_ctz(sm)];
}

/* Inserts a new allocated node for [b->off + u, end of b) after b (b keeps the first u units). */
static struct mc_tlsf_block *cut_allocated(struct mc_tlsf *t, struct mc_tlsf_block *b, uint64_t u) {
  struct mc_tlsf_block *rest = node_get(t);
  rest->off = b->off + u;
  rest->size = b->size - u;
  rest->prev_phys = b;
  rest->next_phys = b->next_phys;
  if (rest->next_phys) rest->next_phys->prev_phys = rest;
  b->next_phys = rest;
  b->size = u;
  return rest; /* free == 0: allocated, on no list */
}

/* Cuts the tail of b beyond u units into a new free block. */
static void split(struct mc_tlsf *t, struct mc_tlsf_block *b, uint64_t u) {
  if (b->size != u) list_insert(t, cut_allocated(t, b, u));
}

struct mc_tlsf_block *mc_tlsf_alloc(struct mc_tlsf *t, uint64_t size, uint64_t *off) {
  if (!size || size > t->units * (uint64_t)MC_TLSF_ALIGN) return NULL;
  uint64_t u = (size + MC_TLSF_ALIGN - 1) / MC_TLSF_ALIGN;
  struct mc_tlsf_block *b = find_fit(t, u);
  if (!b) return NULL;
  list_remove(t, b);
  split(t, b, u);
  used_add(t, b->size);
  *off = b->off * MC_TLSF_ALIGN;
  return b;
}

struct mc_tlsf_block *mc_tlsf_carve(struct mc_tlsf *t, struct mc_tlsf_block *b, uint64_t off, uint64_t size,
                                    struct mc_tlsf_block **head, struct mc_tlsf_block **tail) {
  *head = *tail = NULL;
  if (!b || b->free || !size || off % MC_TLSF_ALIGN) return NULL;
  uint64_t uoff = off / MC_TLSF_ALIGN, u = (size + MC_TLSF_ALIGN - 1) / MC_TLSF_ALIGN;
  if (u < size / MC_TLSF_ALIGN || uoff < b->off || uoff - b->off >= b->size || u > b->size - (uoff - b->off))
    return NULL;
  struct mc_tlsf_block *mid = b;
  if (uoff > b->off) { /* b keeps the head (the lowest node never changes: t->first stays valid) */
    mid = cut_allocated(t, b, uoff - b->off);
    *head = b;
  }
  if (mid->size > u) *tail = cut_allocated(t, mid, u);
  return mid;
}

/* One range of mc_tlsf_reserve in units: [uoff, uend), its index in the caller's arrays, and whether it
 * overlaps another range of the call. */
struct rsv {
  uint64_t uoff, uend;
  size_t i;
  int overlaps;
};

static enum mc_tlsf_refusal rsv_classify(const struct mc_tlsf *t, uint64_t off, uint64_t len, struct rsv *r) {
  uint64_t cap = t->units * MC_TLSF_ALIGN;
  if (!len) return MC_TLSF_REFUSE_EMPTY;
  if (off % MC_TLSF_ALIGN) return MC_TLSF_REFUSE_UNALIGNED;
  if (off >= cap || len > cap - off) return MC_TLSF_REFUSE_BOUNDS;
  r->uoff = off / MC_TLSF_ALIGN;
  r->uend = r->uoff + len / MC_TLSF_ALIGN + (len % MC_TLSF_ALIGN != 0); /* <= units: cap is aligned */
  return MC_TLSF_RESERVED;
}

/* Ties need no order: ranges starting at the same unit overlap, and all of them are refused. */
static int rsv_cmp(const void *a, const void *b) {
  const struct rsv *x = a, *y = b;
  return (x->uoff > y->uoff) - (x->uoff < y->uoff);
}

/* Sorted by start, r[k] overlaps some other range iff it starts before the furthest end of the ranges
 * before it, or ends after the start of the next one. */
static void rsv_mark_overlaps(struct rsv *r, size_t m) {
  uint64_t max_end = 0;
  for (size_t k = 0; k < m; k++) {
    r[k].overlaps = (k && r[k].uoff < max_end) || (k + 1 < m && r[k].uend > r[k + 1].uoff);
    if (r[k].uend > max_end) max_end = r[k].uend;
  }
}

/* Allocates units [uoff, uend) if one free block holds them all (free blocks are coalesced, so a range
 * not inside one touches allocated space). *cur, a block starting at or before uoff, only moves forward:
 * called in increasing uoff, one call of mc_tlsf_reserve walks the block list once. */
static struct mc_tlsf_block *reserve_at(struct mc_tlsf *t, struct mc_tlsf_block **cur, uint64_t uoff,
                                        uint64_t uend) {
  struct mc_tlsf_block *b = *cur;
  while (b->off + b->size <= uoff) b = b->next_phys; /* blocks cover [0, units) and uoff < units */
  *cur = b;
  if (!b->free || uend > b->off + b->size) return NULL;
  list_remove(t, b);
  struct mc_tlsf_block *mid = b;
  if (uoff > b->off) { /* b keeps the free head (t->first stays valid) */
    mid = cut_allocated(t, b, uoff - b->off);
    list_insert(t, b);
  }
  split(t, mid, uend - uoff);
  used_add(t, mid->size);
  *cur = mid;
  return mid;
}

static void rsv_answer(struct mc_tlsf_block **out, enum mc_tlsf_refusal *why, size_t i, struct mc_tlsf_block *b,
                       enum mc_tlsf_refusal reason) {
  out[i] = b;
  if (why) why[i] = reason;
}

size_t mc_tlsf_reserve(struct mc_tlsf *t, const uint64_t *off, const uint64_t *len, size_t n,
                       struct mc_tlsf_block **out, enum mc_tlsf_refusal *why) {
  if (!n) return 0;
  struct rsv *r = mc_calloc(n, sizeof(*r));
  size_t m = 0, done = 0;
  for (size_t i = 0; i < n; i++) {
    enum mc_tlsf_refusal reason = rsv_classify(t, off[i], len[i], &r[m]);
    rsv_answer(out, why, i, NULL, reason);
    if (reason == MC_TLSF_RESERVED) r[m++].i = i;
  }
  qsort(r, m, sizeof(*r), rsv_cmp);
  rsv_mark_overlaps(r, m);
  struct mc_tlsf_block *cur = t->first;
  for (size_t k = 0; k < m; k++) {
    struct mc_tlsf_block *b = r[k].overlaps ? NULL : reserve_at(t, &cur, r[k].uoff, r[k].uend);
    rsv_answer(out, why, r[k].i, b,
               b ? MC_TLSF_RESERVED : r[k].overlaps ? MC_TLSF_REFUSE_OVERLAP : MC_TLSF_REFUSE_TAKEN);
    done += b != NULL;
  }
  mc_free(r);
  return done;
}

void mc_tlsf_block_range(const struct mc_tlsf_block *b, uint64_t *off, uint64_t *size) {
  *off = b->off * MC_TLSF_ALIGN;
  *size = b->size * MC_TLSF_ALIGN;
}

int mc_tlsf_block_is_free(const struct mc_tlsf_block *b) { return b->free; }

/* Absorbs b's free physical successor into b (both out of their lists). */
static void absorb_next(struct mc_tlsf *t, struct mc_tlsf_block *b) {
  struct mc_tlsf_block *n = b->next_phys;
  list_remove(t, n);
  b->size += n->size;
  b->next_phys = n->next_phys;
  if (b->next_phys) b->next_phys->prev_phys = b;
  node_put(t, n);
}

void mc_tlsf_free(struct mc_tlsf *t, struct mc_tlsf_block *b) {
  if (!b || b->free) return;
  used_add(t, -b->size);
  if (b->next_phys && b->next_phys->free) absorb_next(t, b);
  if (b->prev_phys && b->prev_phys->free) {
    struct mc_tlsf_block *p = b->prev_phys;
    list_remove(t, p);
    p->size += b->size;
    p->next_phys = b->next_phys;
    if (p->next_phys) p->next_phys->prev_phys = p;
    node_put(t, b);
    b = p;
  }
  list_insert(t, b);
}

uint64_t mc_tlsf_used(const struct mc_tlsf *t) { return t->used_units * MC_TLSF_ALIGN; }
uint64_t mc_tlsf_capacity(const struct mc_tlsf *t) { return t->units * MC_TLSF_ALIGN; }

uint64_t mc_tlsf_largest_free(const struct mc_tlsf *t) {
  if (!t->fl_map) return 0;
  int fl = msb64(t->fl_map);
  int sl = 31 - __builtin_clz(t->sl_map[fl]);
  uint64_t best = 0;
  for (const struct mc_tlsf_block *b = t->heads[fl][sl]; b; b = b->next_free)
    if (b->size > best) best = b->size;
  return best * MC_TLSF_ALIGN;
}

/* Every free block must be on exactly the list of its class; counts both ways must agree. */
static int check_lists(const struct mc_tlsf *t, uint64_t nfree) {
  uint64_t listed = 0;
  if (t->fl_map >> t->nfl) return -5;
  for (int fl = 0; fl < t->nfl; fl++) {
    if (!!(t->fl_map & (1ull << fl)) != !!t->sl_map[fl]) return -5;
    if (!t->heads[fl]) {
      if (t->sl_map[fl]) return -6;
      continue;
    }
    for (int sl = 0; sl < (int)SL_COUNT; sl++) {
      if (!!(t->sl_map[fl] & (1u << sl)) != !!t->heads[fl][sl]) return -6;
      for (const struct mc_tlsf_block *b = t->heads[fl][sl]; b; b = b->next_free) {
        int f, s;
        mapping(b->size, &f, &s);
        if (!b->free || f != fl || s != sl) return -7;
        if (b->next_free && b->next_free->prev_free != b) return -8;
        listed++;
      }
    }
  }
  return listed == nfree ? 0 : -9;
}

int mc_tlsf_check(const struct mc_tlsf *t) {
  if (t->first->prev_phys) return -1;
  uint64_t off = 0, used = 0, nfree = 0;
  for (const struct mc_tlsf_block *b = t->first; b; b = b->next_phys) {
    if (b->off != off || !b->size) return -2;
    if (b->free && b->next_phys && b->next_phys->free) return -3; /* not coalesced */
    if (b->next_phys && b->next_phys->prev_phys != b) return -4;
    off += b->size;
    if (b->free) nfree++;
    else used += b->size;
  }
  if (off != t->units || used != t->used_units) return -10;
  return check_lists(t, nfree);
}
