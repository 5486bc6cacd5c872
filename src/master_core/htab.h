/* An intrusive chained hash table for the master's registry (segments.c: clients by id, segments by id,
 * segment groups by name, host and zone; docs/master.md, "Data structures"). The caller embeds a struct
 * mc_hnode in its record, hashes the key itself and compares keys while walking a chain:
 *   for (struct mc_hnode *x = mc_htab_first(t, h); x; x = mc_htab_next(x, h)) ... container_of(x) ...
 * The bucket array doubles when the count passes it, so a chain holds about one node. No locking: the
 * registry's lock guards it. */
#ifndef MC_MASTER_CORE_HTAB_H
#define MC_MASTER_CORE_HTAB_H
#include <stddef.h>
#include <stdint.h>

#include "common/alloc.h"

struct mc_hnode {
  struct mc_hnode *next;
  uint64_t hash;
};

struct mc_htab {
  struct mc_hnode **b;
  uint32_t nb, n; /* nb: a power of two (0 before the first insert) */
};

#define MC_HTAB_ENTRY(node, type, member) ((type *)((char *)(node) - offsetof(type, member)))

static inline struct mc_hnode *mc_htab_next(struct mc_hnode *x, uint64_t hash) {
  for (x = x->next; x && x->hash != hash; x = x->next) {
  }
  return x;
}

static inline struct mc_hnode *mc_htab_first(const struct mc_htab *t, uint64_t hash) {
  if (!t->nb) return NULL;
  struct mc_hnode *x = t->b[hash & (t->nb - 1)];
  return x && x->hash != hash ? mc_htab_next(x, hash) : x;
}

static inline void mc_htab_add(struct mc_htab *t, struct mc_hnode *x, uint64_t hash) {
  if (t->n >= t->nb) {
    uint32_t nb = t->nb ? 2 * t->nb : 64;
    struct mc_hnode **b = mc_calloc(nb, sizeof(*b));
    for (uint32_t i = 0; i < t->nb; i++)
      for (struct mc_hnode *y = t->b[i], *next; y; y = next) {
        next = y->next;
        y->next = b[y->hash & (nb - 1)];
        b[y->hash & (nb - 1)] = y;
      }
    mc_free(t->b);
    t->b = b;
    t->nb = nb;
  }
  x->hash = hash;
  x->next = t->b[hash & (t->nb - 1)];
  t->b[hash & (t->nb - 1)] = x;
  t->n++;
}

/* x must be in t. */
static inline void mc_htab_del(struct mc_htab *t, struct mc_hnode *x) {
  struct mc_hnode **p = &t->b[x->hash & (t->nb - 1)];
  while (*p != x) p = &(*p)->next;
  *p = x->next;
  t->n--;
}

/* Frees the bucket array (the nodes are the caller's). */
static inline void mc_htab_free(struct mc_htab *t) {
  mc_free(t->b);
  *t = (struct mc_htab){0};
}

#endif
