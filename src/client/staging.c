/* Staging-buffer allocator: first fit over a sorted array of free extents, coalesced on release.
 * Few allocations are live at once (one per copying call in flight), so a linear scan is enough.
 * Waiters sleep on a condition variable until a release might satisfy them. Thread-safe. Below it, the
 * areas of multi-buffer batches: one contiguous area per key standing in for its buffer list. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/util.h"

#define ALIGN 64

struct extent {
  uint64_t off, len;
};

struct mc_stage {
  char *base;
  uint64_t size;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct extent *free; /* sorted by off, never adjacent (merged) */
  size_t nfree, capfree;
};

static uint64_t round_up(uint64_t n) { return (n + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

struct mc_stage *mc_stage_new(char *base, uint64_t size) {
  struct mc_stage *st = mc_calloc(1, sizeof(*st));
  st->base = base;
  st->size = size & ~(uint64_t)(ALIGN - 1);
  pthread_mutex_init(&st->mu, NULL);
  mc_cond_init_monotonic(&st->cv);
  st->capfree = 16;
  st->free = mc_calloc(st->capfree, sizeof(*st->free));
  if (st->size) st->free[st->nfree++] = (struct extent){0, st->size};
  return st;
}

void mc_stage_free(struct mc_stage *st) {
  if (!st) return;
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
  mc_free(st->free);
  mc_free(st);
}

uint64_t mc_stage_capacity(const struct mc_stage *st) { return st ? st->size : 0; }

/* mu held. */
static char *try_alloc(struct mc_stage *st, uint64_t n) {
  for (size_t i = 0; i < st->nfree; i++) {
    struct extent *e = &st->free[i];
    if (e->len < n) continue;
    char *p = st->base + e->off;
    e->off += n;
    e->len -= n;
    if (!e->len) {
      memmove(e, e + 1, (st->nfree - i - 1) * sizeof(*e));
      st->nfree--;
    }
    return p;
  }
  return NULL;
}

char *mc_stage_alloc(struct mc_stage *st, uint64_t n, int wait_ms) {
  if (!st || !n || n > st->size) return NULL;
  n = round_up(n);
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += wait_ms / 1000;
  dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&st->mu);
  char *p;
  while (!(p = try_alloc(st, n)) && wait_ms > 0)
    if (pthread_cond_timedwait(&st->cv, &st->mu, &dl) == ETIMEDOUT) {
      p = try_alloc(st, n);
      break;
    }
  pthread_mutex_unlock(&st->mu);
  return p;
}

void mc_stage_release(struct mc_stage *st, char *p, uint64_t n) {
  if (!st || !p || !n) return;
  uint64_t off = (uint64_t)(p - st->base), len = round_up(n);
  pthread_mutex_lock(&st->mu);
  size_t i = 0;
  while (i < st->nfree && st->free[i].off < off) i++;
  int merge_prev = i > 0 && st->free[i - 1].off + st->free[i - 1].len == off;
  int merge_next = i < st->nfree && off + len == st->free[i].off;
  if (merge_prev && merge_next) {
    st->free[i - 1].len += len + st->free[i].len;
    memmove(&st->free[i], &st->free[i + 1], (st->nfree - i - 1) * sizeof(*st->free));
    st->nfree--;
  } else if (merge_prev) {
    st->free[i - 1].len += len;
  } else if (merge_next) {
    st->free[i].off = off;
    st->free[i].len += len;
  } else {
    if (st->nfree == st->capfree) {
      st->capfree *= 2;
      st->free = mc_realloc(st->free, st->capfree * sizeof(*st->free));
    }
    memmove(&st->free[i + 1], &st->free[i], (st->nfree - i) * sizeof(*st->free));
    st->free[i] = (struct extent){off, len};
    st->nfree++;
  }
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

/* ------------------------------------------------------------------ areas of multi-buffer keys */

void mc_multi_open(struct mc_store *s, struct mc_multi *m, const void *const *bufs, const size_t *sizes,
                   const size_t *nbufs, size_t count) {
  m->a = mc_calloc(count ? count : 1, sizeof(*m->a));
  m->first = mc_calloc(count ? count : 1, sizeof(size_t));
  m->p = mc_calloc(count ? count : 1, sizeof(void *));
  m->len = mc_calloc(count ? count : 1, sizeof(size_t));
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    struct mc_area *a = &m->a[i];
    m->first[i] = at;
    a->len = 0;
    for (size_t j = 0; j < nbufs[i]; j++) a->len += sizes[at + j];
    if (nbufs[i] == 1 && a->len) a->p = (char *)bufs[at], a->kind = 0;
    else if (!a->len) a->p = NULL, a->kind = -1;
    else if (s->staging.pool && (a->p = mc_stage_alloc(s->staging.pool, a->len, 0))) a->kind = 1;
    else a->kind = (a->p = mc_try_malloc(a->len)) ? 2 : -1;
    at += nbufs[i];
    m->p[i] = a->p, m->len[i] = a->len;
  }
}

void mc_multi_close(struct mc_store *s, struct mc_multi *m, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (m->a[i].kind == 1) mc_stage_release(s->staging.pool, m->a[i].p, m->a[i].len);
    else if (m->a[i].kind == 2) mc_free(m->a[i].p);
  }
  mc_free(m->len);
  mc_free(m->p);
  mc_free(m->first);
  mc_free(m->a);
}

void mc_area_copy(struct mc_area *a, void *const *bufs, const size_t *sizes, size_t nbufs, uint64_t len, int gather) {
  uint64_t off = 0;
  for (size_t j = 0; j < nbufs && off < len; j++) {
    uint64_t n = MC_MIN(sizes[j], len - off);
    if (gather) memcpy(a->p + off, bufs[j], n);
    else memcpy(bufs[j], a->p + off, n);
    off += n;
  }
}
