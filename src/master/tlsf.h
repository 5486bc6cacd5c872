/* Two-level segregated fit (TLSF) allocator over the offsets of one segment. The master never touches
 * segment bytes: block nodes (offset, size, physical neighbours, free-list links) live in master memory.
 * alloc and free are O(1): a first-level index (log2 of the size) and 32 second-level classes per
 * power of two, each with a bitmap, find a fitting free block with two find-first-set operations;
 * free coalesces with both physical neighbours at once. Sizes are rounded up to MC_TLSF_ALIGN bytes.
 * Not thread-safe: the caller holds the segment's allocation lock. */
#ifndef MC_MASTER_TLSF_H
#define MC_MASTER_TLSF_H
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
/* Bytes handed out (rounded sizes) and bytes managed (size rounded down to the alignment). */
uint64_t mc_tlsf_used(const struct mc_tlsf *t);
uint64_t mc_tlsf_capacity(const struct mc_tlsf *t);
/* Size of the largest free block (O(1): the highest non-empty class, then its list head). */
uint64_t mc_tlsf_largest_free(const struct mc_tlsf *t);
/* Test hook: walks all blocks and checks every invariant (coverage, coalescing, class lists, bitmaps,
 * used bytes). 0 when consistent; otherwise a negative number naming the first broken rule. */
int mc_tlsf_check(const struct mc_tlsf *t);

#endif
