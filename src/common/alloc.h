/* Allocation wrappers: mc_malloc & co abort on OOM; mc_try_* return NULL. Tests can make the N-th
 * try-allocation fail with mc_alloc_fail_after(N) to exercise error paths. */
#ifndef MC_ALLOC_H
#define MC_ALLOC_H
#include <stddef.h>

void *mc_malloc(size_t n);
void *mc_calloc(size_t n, size_t sz);
void *mc_realloc(void *p, size_t n);
char *mc_strdup(const char *s);
char *mc_strndup(const char *s, size_t n);
void *mc_try_malloc(size_t n);
void *mc_try_calloc(size_t n, size_t sz);
void mc_free(void *p);
/* For the project's long-running servers only (master, storage node, standalone client), never a library
 * caller's process: malloc keeps freed memory instead of handing the heap's top and large blocks back to
 * the kernel at once, so a steady stream of requests does not fault the same pages in again and again
 * (docs/ha.md, "Witnesses: why the put does not wait"). */
void mc_alloc_tune_server(void);
/* Fault injection: the n-th following mc_try_* call fails (n >= 1); 0 disables. */
void mc_alloc_fail_after(long n);

#endif
