#include "common/alloc.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_long fail_countdown;

static void oom(size_t n) {
  char msg[96];
  int len = snprintf(msg, sizeof(msg), "mooncake: out of memory allocating %zu bytes\n", n);
  ssize_t w = write(2, msg, len);
  (void)w;
  abort();
}

static int injected_failure(void) {
  long c = atomic_load(&fail_countdown);
  if (c <= 0) return 0;
  return atomic_fetch_sub(&fail_countdown, 1) == 1;
}

void mc_alloc_fail_after(long n) { atomic_store(&fail_countdown, n); }

void mc_alloc_tune_server(void) {
  /* blocks up to 4 MiB (a large reply, a batch's witness block) come from the heap and are reused; up
   * to 64 MiB free at the heap's top stays mapped (glibc's defaults: 128 KiB for both) */
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_TOP_PAD, 1 << 20);
}

void *mc_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}
void *mc_calloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p) oom(n * sz);
  return p;
}
void *mc_realloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}
char *mc_strdup(const char *s) { return mc_strndup(s, strlen(s)); }
char *mc_strndup(const char *s, size_t n) {
  size_t l = strnlen(s, n);
  char *d = mc_malloc(l + 1);
  memcpy(d, s, l);
  d[l] = 0;
  return d;
}
void *mc_try_malloc(size_t n) { return injected_failure() ? NULL : malloc(n ? n : 1); }
void *mc_try_calloc(size_t n, size_t sz) {
  return injected_failure() ? NULL : calloc(n ? n : 1, sz ? sz : 1);
}
void mc_free(void *p) { free(p); }
