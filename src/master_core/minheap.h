/* Binary min-heaps by a uint64_t key, in two shapes that share one sift:
 *
 * MC_MINHEAP(name, type, key): over an array of structs, by the field `key`. Defines name_up(h, i) and
 * name_down(h, n, i), which restore the order after element i was added at the end or replaced; the caller
 * owns the array. The discard heap (discard.c, by release time) and the clients' expiry timers
 * (client_timers.c, by deadline) use it.
 *
 * MC_IDXHEAP(name, type, keyfn, pos): over pointers to structs that each know their place (the size_t field
 * `pos`), so an element whose key changed is moved in O(log n) and one can be taken out from the middle.
 * Defines struct name, name_push(q, e), name_remove(q, e), name_fix(q, e) (e's key changed, either way),
 * name_min(q) (NULL when empty) and name_free(q). keyfn(const type *) gives the key. The holder-index feed
 * (holder_feed.c) keeps two: holders with unacknowledged records and holders with a waiting poll. */
#ifndef MC_MASTER_CORE_MINHEAP_H
#define MC_MASTER_CORE_MINHEAP_H
#include <stddef.h>
#include <stdint.h>

#include "common/alloc.h"

/* name_up / name_down over elem h[]; keyfn(const elem *) is the key, placed(h, i) is told that h[i] was
 * written (the indexed heap records the place there). Moves a hole instead of swapping. */
#define MC_HEAP_SIFT(name, elem, keyfn, placed)                                                        \
  static inline void name##_up(elem *h, size_t i) {                                                    \
    elem e = h[i];                                                                                     \
    uint64_t k = keyfn(&e);                                                                            \
    while (i > 0) {                                                                                    \
      size_t p = (i - 1) / 2;                                                                          \
      if (keyfn(&h[p]) <= k) break;                                                                    \
      h[i] = h[p];                                                                                     \
      placed(h, i);                                                                                    \
      i = p;                                                                                           \
    }                                                                                                  \
    h[i] = e;                                                                                          \
    placed(h, i);                                                                                      \
  }                                                                                                    \
  static inline void name##_down(elem *h, size_t n, size_t i) {                                        \
    elem e = h[i];                                                                                     \
    uint64_t k = keyfn(&e);                                                                            \
    for (;;) {                                                                                         \
      size_t c = 2 * i + 1;                                                                            \
      if (c >= n) break;                                                                               \
      if (c + 1 < n && keyfn(&h[c + 1]) < keyfn(&h[c])) c++;                                           \
      if (keyfn(&h[c]) >= k) break;                                                                    \
      h[i] = h[c];                                                                                     \
      placed(h, i);                                                                                    \
      i = c;                                                                                           \
    }                                                                                                  \
    h[i] = e;                                                                                          \
    placed(h, i);                                                                                      \
  }

#define MC_MINHEAP(name, type, key)                                                                    \
  static inline uint64_t name##_key_(const type *e) { return e->key; }                                 \
  static inline void name##_placed_(type *h, size_t i) {                                               \
    (void)h;                                                                                           \
    (void)i;                                                                                           \
  }                                                                                                    \
  MC_HEAP_SIFT(name, type, name##_key_, name##_placed_)

#define MC_IDXHEAP(name, type, keyfn, pos)                                                             \
  struct name {                                                                                        \
    type **a;                                                                                          \
    size_t n, cap;                                                                                     \
  };                                                                                                   \
  static inline uint64_t name##_key_(type *const *e) { return keyfn(*e); }                             \
  static inline void name##_placed_(type **h, size_t i) { h[i]->pos = i; }                             \
  MC_HEAP_SIFT(name##_sift, type *, name##_key_, name##_placed_)                                       \
  static inline void name##_push(struct name *q, type *e) {                                            \
    if (q->n == q->cap) {                                                                              \
      q->cap = q->cap ? 2 * q->cap : 64;                                                               \
      q->a = mc_realloc(q->a, q->cap * sizeof(*q->a));                                                 \
    }                                                                                                  \
    q->a[q->n] = e;                                                                                    \
    name##_sift_up(q->a, q->n++);                                                                      \
  }                                                                                                    \
  static inline void name##_fix(struct name *q, type *e) {                                             \
    name##_sift_up(q->a, e->pos);                                                                      \
    name##_sift_down(q->a, q->n, e->pos);                                                              \
  }                                                                                                    \
  static inline void name##_remove(struct name *q, type *e) {                                          \
    size_t i = e->pos;                                                                                 \
    type *last = q->a[--q->n];                                                                         \
    if (i == q->n) return;                                                                             \
    q->a[i] = last;                                                                                    \
    last->pos = i;                                                                                     \
    name##_fix(q, last);                                                                               \
  }                                                                                                    \
  static inline type *name##_min(const struct name *q) { return q->n ? q->a[0] : NULL; }               \
  static inline void name##_free(struct name *q) {                                                     \
    mc_free(q->a);                                                                                     \
    q->a = NULL;                                                                                       \
    q->n = q->cap = 0;                                                                                 \
  }

#endif
