/* The engine's local registrations: the sorted table of registered buffers, engine-allocated shared
 * memory, and the pins that keep a range registered while a copy uses it (docs/transfer-engine.md). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"
#include "te/engine_internal.h"
#include "meta/metadata_server.h"

/* ------------------------------------------------------------------ registration */

/* Index of the first buffer with addr >= a. reg_mu held. */
static size_t buf_lower_bound(struct mc_engine *e, uint64_t a) {
  size_t lo = 0, hi = e->nbufs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e->bufs[mid]->addr < a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int overlaps(struct mc_engine *e, uint64_t a, uint64_t len) {
  size_t i = buf_lower_bound(e, a);
  if (i < e->nbufs && e->bufs[i]->addr < a + len) return 1;
  if (i > 0 && e->bufs[i - 1]->addr + e->bufs[i - 1]->len > a) return 1;
  return 0;
}

/* Tells the transports that the registrations changed. reg_mu held. */
void mc_eng_mem_changed(struct mc_engine *e) {
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->mem_changed) e->tps[i]->ops->mem_changed(e->tps[i], e->bufs, e->nbufs);
  pthread_mutex_unlock(&e->tp_mu);
}

static void mem_quiesce(struct mc_engine *e) {
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->mem_quiesce) e->tps[i]->ops->mem_quiesce(e->tps[i]);
  pthread_mutex_unlock(&e->tp_mu);
}

static void insert_buf(struct mc_engine *e, struct mc_buf *b) {
  if (e->nbufs == e->capbufs) {
    e->capbufs = e->capbufs ? e->capbufs * 2 : 16;
    e->bufs = mc_realloc(e->bufs, e->capbufs * sizeof(*e->bufs));
  }
  size_t i = buf_lower_bound(e, b->addr);
  memmove(&e->bufs[i + 1], &e->bufs[i], (e->nbufs - i) * sizeof(*e->bufs));
  e->bufs[i] = b;
  e->nbufs++;
  mc_eng_mem_changed(e);
}

static struct mc_buf *new_buf(void *addr, size_t len, const char *location, int remote, int memfd) {
  struct mc_buf *b = mc_calloc(1, sizeof(*b));
  b->addr = (uint64_t)(uintptr_t)addr;
  b->len = len;
  /* "*" would mean "detect"; without NUMA probing every CPU buffer is on node 0. */
  b->location = mc_strdup(!location || !strcmp(location, "*") || !*location ? "cpu:0" : location);
  b->remote_accessible = remote;
  b->memfd = memfd;
  return b;
}

static int check_range(void *addr, size_t len) {
  if (!addr || len == 0) return ERR_INVALID_ARGUMENT;
  if ((uint64_t)(uintptr_t)addr + len < (uint64_t)(uintptr_t)addr) return ERR_INVALID_ARGUMENT;
  return 0;
}

static int register_locked(struct mc_engine *e, void *addr, size_t len, const char *loc, int remote, int memfd) {
  int rc = check_range(addr, len);
  if (rc) return rc;
  if (overlaps(e, (uint64_t)(uintptr_t)addr, len)) return ERR_ADDRESS_OVERLAPPED;
  insert_buf(e, new_buf(addr, len, loc, remote, memfd));
  return 0;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                        int remote_accessible) {
  struct mc_engine *e = engine;
  if (!e) return ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&e->reg_mu);
  int rc = register_locked(e, addr, length, location, remote_accessible, -1);
  pthread_mutex_unlock(&e->reg_mu);
  return rc ? rc : mc_engine_publish(e);
}

static int cmp_entry(const void *a, const void *b) {
  const buffer_entry_t *x = a, *y = b;
  return (uintptr_t)x->addr < (uintptr_t)y->addr ? -1 : (uintptr_t)x->addr > (uintptr_t)y->addr;
}

int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *list, size_t n, const char *location) {
  struct mc_engine *e = engine;
  if (!e || (!list && n)) return ERR_INVALID_ARGUMENT;
  buffer_entry_t *s = mc_malloc((n ? n : 1) * sizeof(*s));
  memcpy(s, list, n * sizeof(*s));
  qsort(s, n, sizeof(*s), cmp_entry);
  int rc = 0;
  pthread_mutex_lock(&e->reg_mu);
  for (size_t i = 0; i < n && !rc; i++) {
    rc = check_range(s[i].addr, s[i].length);
    if (!rc && ((i > 0 && (uintptr_t)s[i - 1].addr + s[i - 1].length > (uintptr_t)s[i].addr) ||
                overlaps(e, (uint64_t)(uintptr_t)s[i].addr, s[i].length)))
      rc = ERR_ADDRESS_OVERLAPPED;
  }
  for (size_t i = 0; i < n && !rc; i++) insert_buf(e, new_buf(s[i].addr, s[i].length, location, 1, -1));
  pthread_mutex_unlock(&e->reg_mu);
  mc_free(s);
  return rc ? rc : mc_engine_publish(e);
}

/* Removes the buffer starting at addr and waits until no server-side transfer uses it. */
static int unregister_one(struct mc_engine *e, void *addr, struct mc_buf **out) {
  uint64_t a = (uint64_t)(uintptr_t)addr;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, a);
  if (i >= e->nbufs || e->bufs[i]->addr != a) {
    pthread_mutex_unlock(&e->reg_mu);
    return ERR_ADDRESS_NOT_REGISTERED;
  }
  struct mc_buf *b = e->bufs[i];
  memmove(&e->bufs[i], &e->bufs[i + 1], (e->nbufs - i - 1) * sizeof(*e->bufs));
  e->nbufs--;
  mc_eng_mem_changed(e);
  pthread_mutex_unlock(&e->reg_mu);
  mem_quiesce(e);
  while (atomic_load(&b->pins) > 0) usleep(100);
  *out = b;
  return 0;
}

static void free_buf(struct mc_buf *b) {
  mc_free(b->warm);
  if (b->owned) munmap((void *)(uintptr_t)b->addr, b->len);
  if (b->memfd >= 0) close(b->memfd);
  mc_free(b->location);
  mc_free(b);
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr) {
  struct mc_engine *e = engine;
  struct mc_buf *b;
  if (!e) return ERR_INVALID_ARGUMENT;
  int rc = unregister_one(e, addr, &b);
  if (rc) return rc;
  if (b->owned) { /* shared memory must be freed through mc_te_free_shared; keep it registered */
    pthread_mutex_lock(&e->reg_mu);
    insert_buf(e, b);
    pthread_mutex_unlock(&e->reg_mu);
    return ERR_INVALID_ARGUMENT;
  }
  free_buf(b);
  return mc_engine_publish(e);
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addrs, size_t n) {
  struct mc_engine *e = engine;
  if (!e || (!addrs && n)) return ERR_INVALID_ARGUMENT;
  int first = 0;
  for (size_t i = 0; i < n; i++) {
    struct mc_buf *b;
    int rc = unregister_one(e, addrs[i], &b);
    if (!rc) free_buf(b);
    if (rc && !first) first = rc;
  }
  int prc = mc_engine_publish(e);
  return first ? first : prc;
}

void *mc_te_alloc_shared(transfer_engine_t engine, size_t length, const char *location) {
  struct mc_engine *e = engine;
  if (!e || !length) return NULL;
  int fd = mc_shm_memfd("segment", length);
  if (fd < 0) {
    LOG_ERROR("cannot create %zu bytes of shared memory: %s", length, strerror(errno));
    return NULL;
  }
  void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    LOG_ERROR("cannot map %zu bytes of shared memory: %s", length, strerror(errno));
    close(fd);
    return NULL;
  }
  mc_shm_advise_huge(p, length);
  pthread_mutex_lock(&e->reg_mu);
  int rc = register_locked(e, p, length, location, 1, fd);
  if (!rc) {
    struct mc_buf *b = e->bufs[buf_lower_bound(e, (uint64_t)(uintptr_t)p)];
    b->owned = 1;
    if (e->prefault) b->warm = mc_warm_bits_new(length);
  }
  pthread_mutex_unlock(&e->reg_mu);
  if (rc) {
    munmap(p, length);
    close(fd);
    return NULL;
  }
  mc_engine_publish(e);
  mc_prefault_add(e->prefault, (uint64_t)(uintptr_t)p, length);
  return p;
}

uint64_t mc_te_prefault_pending(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  return e ? mc_prefault_pending(e->prefault) : 0;
}

int mc_te_free_shared(transfer_engine_t engine, void *addr) {
  struct mc_engine *e = engine;
  struct mc_buf *b;
  if (!e) return ERR_INVALID_ARGUMENT;
  int rc = unregister_one(e, addr, &b);
  if (rc) return rc;
  free_buf(b);
  return mc_engine_publish(e);
}

struct mc_buf *mc_engine_pin_range(struct mc_engine *e, uint64_t addr, uint64_t len) {
  struct mc_buf *r = NULL;
  if (len == 0) return NULL;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, addr + 1); /* first buffer starting after addr */
  if (i > 0) {
    struct mc_buf *b = e->bufs[i - 1];
    uint64_t off = addr - b->addr;
    if (b->remote_accessible && off < b->len && len <= b->len - off) {
      atomic_fetch_add(&b->pins, 1);
      r = b;
    }
  }
  pthread_mutex_unlock(&e->reg_mu);
  /* a peer's access is ordered against the owner's own through the network (the peer learns that the
   * owner is done, or the owner learns that the peer is), which TSan cannot see: the owner's code
   * releases and acquires on the buffer's base address around its own accesses (tests do) */
  if (r) MC_TSAN_ACQUIRE((void *)(uintptr_t)r->addr);
  return r;
}

void mc_engine_unpin(struct mc_buf *b) {
  MC_TSAN_RELEASE((void *)(uintptr_t)b->addr);
  atomic_fetch_sub(&b->pins, 1);
}

/* 1 when [p, p+len) lies inside one local registration (any, remote accessible or not). */
int mc_eng_local_registered(struct mc_engine *e, const void *p, uint64_t len) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  int ok = 0;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, a + 1);
  if (i > 0) {
    struct mc_buf *b = e->bufs[i - 1];
    uint64_t off = a - b->addr;
    ok = off < b->len && len <= b->len - off;
  }
  pthread_mutex_unlock(&e->reg_mu);
  return ok;
}
