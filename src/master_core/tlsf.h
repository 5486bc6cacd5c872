/* Two-level segregated fit (TLSF) allocator over the offsets of one segment. The master never touches
 * segment bytes: block nodes (offset, size, physical neighbours, free-list links) live in master memory.
 * alloc and free are O(1): a first-level index (log2 of the size) and 32 second-level classes per
 * power of two, each with a bitmap, find a fitting free block with two find-first-set operations;
 * free coalesces with both physical neighbours at once. Sizes are rounded up to MC_TLSF_ALIGN bytes.
 * Not thread-safe: the caller holds the segment's allocation lock. */
#ifndef MC_MASTER_CORE_TLSF_H
#define MC_MASTER_CORE_TLSF_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MC_TLSF_ALIGN 8u

struct mc_tlsf;
struct mc_tlsf_block;

/* An allocator for [0, size). NULL when size is smaller than one aligned unit. */
struct mc_tlsf *mc_tlsf_create(uint64_t size);
void mc_tlsf_destroy(struct mc_tlsf *t);
/* Allocates size bytes (> 0). Returns the block handle and its offset in *off, or NULL when no free
 * block fits. The handle stays valid until mc_tlsf_free or mc_tlsf_destroy. */
struct mc_tlsf_block *mc_tlsf_alloc(struct mc_tlsf *t, uint64_t size, uint64_t *off);
void mc_tlsf_free(struct mc_tlsf *t, struct mc_tlsf_block *b);
/* Splits the ALLOCATED block b so that the byte range [off, off + size) (off a multiple of
 * MC_TLSF_ALIGN, size rounded up to it, the whole range inside b) becomes an allocated block of its own;
 * the parts of b before and after it (if any) stay allocated as separate blocks, returned in *head and
 * *tail (NULL when empty). No byte changes hands: used bytes are unchanged and nothing coalesces (a
 * later free of any piece merges only with FREE neighbours). The block of the range is returned; its
 * handle is b itself when the range starts at b's offset. NULL (nothing changed) when b is free or the
 * range is empty, unaligned or not inside b. O(1); needs at most two spare nodes. */
struct mc_tlsf_block *mc_tlsf_carve(struct mc_tlsf *t, struct mc_tlsf_block *b, uint64_t off, uint64_t size,
                                    struct mc_tlsf_block **head, struct mc_tlsf_block **tail);
/* Why mc_tlsf_reserve refused a range (0: reserved). */
enum mc_tlsf_refusal {
  MC_TLSF_RESERVED = 0,
  MC_TLSF_REFUSE_EMPTY,     /* length 0 */
  MC_TLSF_REFUSE_UNALIGNED, /* offset not a multiple of MC_TLSF_ALIGN */
  MC_TLSF_REFUSE_BOUNDS,    /* off + len overflows or ends beyond mc_tlsf_capacity */
  MC_TLSF_REFUSE_OVERLAP,   /* overlaps another range of the same call */
  MC_TLSF_REFUSE_TAKEN,     /* overlaps space allocated before the call */
};
/* Allocate-at-offset for a master rebuilding a segment from its holder's index (docs/ha.md, "Rebuild:
 * restart and promotion"): allocates each range [off[i], off[i] + len[i]) exactly, len rounded up to
 * MC_TLSF_ALIGN as mc_tlsf_alloc rounds. Ranges come in any order. Refusal is per range: out[i] is the
 * block handle (as from mc_tlsf_alloc: mc_tlsf_free and mc_tlsf_carve take it) or NULL, and why[i] (why
 * may be NULL) says why not. A refused range changes nothing; the others are still reserved, so one bad
 * entry costs only its own object. Ranges that overlap each other are ALL refused (which of them is
 * genuine cannot be told here: a caller that can tell, e.g. by seq, keeps one before calling); a range
 * is TAKEN when any of its bytes was allocated before the call. Precedence: EMPTY, UNALIGNED, BOUNDS,
 * OVERLAP, TAKEN. Returns the number reserved. Cost O(n log n) plus one walk of the block list per
 * call, so a segment's entries are best reserved in few calls; n == 0 costs nothing. */
size_t mc_tlsf_reserve(struct mc_tlsf *t, const uint64_t *off, const uint64_t *len, size_t n,
                       struct mc_tlsf_block **out, enum mc_tlsf_refusal *why);
/* Byte offset and (rounded) byte size of a block. */
void mc_tlsf_block_range(const struct mc_tlsf_block *b, uint64_t *off, uint64_t *size);
/* 1 when b is a free block (test hook). */
int mc_tlsf_block_is_free(const struct mc_tlsf_block *b);
/* From now on every change of t's used bytes is also added to *sum (NULL: no longer): t's current used
 * bytes move from the old counter, if any, to the new one. The master keeps its usage this way, one sum
 * over all mounted segments, rather than adding every segment up (docs/master.md, "Eviction"). Under the
 * same lock as t's other calls; *sum itself is updated atomically (several allocators share it). */
void mc_tlsf_count_into(struct mc_tlsf *t, _Atomic uint64_t *sum);
/* Bytes handed out (rounded sizes) and bytes managed (size rounded down to the alignment). */
uint64_t mc_tlsf_used(const struct mc_tlsf *t);
uint64_t mc_tlsf_capacity(const struct mc_tlsf *t);
/* Size of the largest free block (O(1): the highest non-empty class, then its list head). */
uint64_t mc_tlsf_largest_free(const struct mc_tlsf *t);
/* Test hook: walks all blocks and checks every invariant (coverage, coalescing, class lists, bitmaps,
 * used bytes). 0 when consistent; otherwise a negative number naming the first broken rule. */
int mc_tlsf_check(const struct mc_tlsf *t);

#endif
