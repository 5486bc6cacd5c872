/* A binary min-heap over an array of structs, by one uint64_t field: MC_MINHEAP(name, type, key) defines
 * name_up(h, i) and name_down(h, n, i), which restore the order after element i was added at the end or
 * replaced. The discard heap (discard.c, by release time) and the clients' expiry timers (liveness.c, by
 * deadline) use it. */
#ifndef MC_MASTER_MINHEAP_H
#define MC_MASTER_MINHEAP_H
#include <stddef.h>

#define MC_MINHEAP(name, type, key)                                                                    \
  static inline void name##_swap(type *a, type *b) {                                                   \
    type t = *a;                                                                                       \
    *a = *b;                                                                                           \
    *b = t;                                                                                            \
  }                                                                                                    \
  static inline void name##_up(type *h, size_t i) {                                                    \
    while (i > 0) {                                                                                    \
      size_t p = (i - 1) / 2;                                                                          \
      if (h[p].key <= h[i].key) break;                                                                 \
      name##_swap(&h[p], &h[i]);                                                                       \
      i = p;                                                                                           \
    }                                                                                                  \
  }                                                                                                    \
  static inline void name##_down(type *h, size_t n, size_t i) {                                        \
    for (;;) {                                                                                         \
      size_t l = 2 * i + 1, r = l + 1, s = i;                                                          \
      if (l < n && h[l].key < h[s].key) s = l;                                                         \
      if (r < n && h[r].key < h[s].key) s = r;                                                         \
      if (s == i) return;                                                                              \
      name##_swap(&h[s], &h[i]);                                                                       \
      i = s;                                                                                           \
    }                                                                                                  \
  }

#endif
