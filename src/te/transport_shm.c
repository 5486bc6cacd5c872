/* Same-host transport: bytes move by memcpy, never through the TCP stack. Buffers the peer allocated
 * with mc_te_alloc_shared are memfd-backed and mapped here through /proc/<pid>/fd/<n>; any other
 * registered buffer is reached with process_vm_readv/writev (one copy across processes).
 *
 * Every engine also shares a small registry (memfd, seqlock) of its live registrations. Before a
 * process_vm copy the initiator announces itself in the peer's registry and checks the range against
 * the live entries, and an unregistering peer waits for announced copies to finish: so a stale
 * descriptor can never make us write into memory the peer no longer registers. Mapped memfd buffers
 * need no such check (their pages stay valid for as long as we map them). */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "te/engine_internal.h"

#define REG_MAX 8192

struct shm_registry {
  _Atomic uint64_t seq;  /* odd while the owner rewrites the entries */
  _Atomic int32_t users; /* peers inside a checked process_vm copy */
  uint32_t n;
  struct {
    uint64_t addr, len;
  } e[REG_MAX];
};

struct shm_tp {
  struct mc_transport base;
  int reg_fd;
  struct shm_registry *reg;
};

/* ---- the local registry ---- */

static void shm_mem_changed(struct mc_transport *t, struct mc_buf *const *bufs, size_t n) {
  struct shm_registry *r = ((struct shm_tp *)t)->reg;
  atomic_fetch_add(&r->seq, 1);
  uint32_t k = 0;
  for (size_t i = 0; i < n && k < REG_MAX; i++)
    if (bufs[i]->remote_accessible) {
      r->e[k].addr = bufs[i]->addr;
      r->e[k++].len = bufs[i]->len;
    }
  if (n > REG_MAX) LOG_WARN("shm: more than %d registrations; the rest are reachable over TCP only", REG_MAX);
  r->n = k;
  atomic_fetch_add(&r->seq, 1);
}

static void shm_mem_quiesce(struct mc_transport *t) {
  struct shm_registry *r = ((struct shm_tp *)t)->reg;
  uint64_t deadline = mc_now_ns() + 2000000000ull; /* a peer that died inside a copy must not block us */
  while (atomic_load(&r->users) > 0 && mc_now_ns() < deadline) usleep(50);
}

/* ---- a peer's registry ---- */

static struct shm_registry *map_registry(const struct mc_desc *d) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", d->pid, d->shm_registry_fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, sizeof(struct shm_registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

static int registry_covers(struct shm_registry *r, uint64_t addr, uint64_t len) {
  for (;;) {
    uint64_t s1 = atomic_load(&r->seq);
    int ok = 0;
    uint32_t n = r->n < REG_MAX ? r->n : REG_MAX;
    for (uint32_t i = 0; i < n && !ok; i++) {
      uint64_t a = r->e[i].addr, l = r->e[i].len;
      ok = addr >= a && addr - a < l && len <= l - (addr - a);
    }
    atomic_thread_fence(memory_order_acquire);
    if (!(s1 & 1) && atomic_load(&r->seq) == s1) return ok;
  }
}

static void *map_peer_buf(const struct mc_desc *d, const struct mc_rbuf *b) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", d->pid, b->shm_fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  mc_shm_advise_huge(p, b->len);
  return p;
}

/* The local address of a peer's memfd buffer, mapped on first use; NULL if it cannot be mapped.
 * *warm receives the mapping's warm-chunk bits (prefault.c). */
static char *peer_base(struct mc_desc *d, const struct mc_rbuf *b, atomic_uint_least64_t **warm) {
  size_t i = (size_t)(b - d->bufs);
  pthread_mutex_lock(&d->shm_mu);
  if (!d->shm_maps[i] && (d->shm_maps[i] = map_peer_buf(d, b))) d->shm_warm[i] = mc_warm_bits_new(b->len);
  char *p = d->shm_maps[i];
  *warm = d->shm_warm[i];
  pthread_mutex_unlock(&d->shm_mu);
  return p;
}

int mc_vm_copy_raw(int pid, int op, void *local, uint64_t remote, uint64_t len) {
  while (len) {
    struct iovec l = {local, len}, r = {(void *)(uintptr_t)remote, len};
    ssize_t n = op == OPCODE_WRITE ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return n < 0 ? -errno : -EIO;
    local = (char *)local + n;
    remote += (uint64_t)n;
    len -= (uint64_t)n;
  }
  return 0;
}

/* process_vm copy checked against the peer's live registry. */
static int vm_copy(struct mc_desc *d, int op, void *local, uint64_t remote, uint64_t len) {
  pthread_mutex_lock(&d->shm_mu);
  if (!d->shm_registry && (d->shm_registry = map_registry(d))) d->shm_registry_len = sizeof(struct shm_registry);
  struct shm_registry *r = d->shm_registry;
  pthread_mutex_unlock(&d->shm_mu);
  if (!r) return -EACCES;
  atomic_fetch_add(&r->users, 1);
  int rc = registry_covers(r, remote, len) ? mc_vm_copy_raw(d->pid, op, local, remote, len) : -EFAULT;
  if (rc == -EFAULT)
    LOG_WARN("shm: %s of %llu bytes at 0x%llx: not registered in %s (pid %d) any more; refused",
             op == OPCODE_WRITE ? "write" : "read", (unsigned long long)len, (unsigned long long)remote, d->name, d->pid);
  atomic_fetch_sub(&r->users, 1);
  return rc;
}

static int copy_slice(struct mc_slice *s) {
  struct mc_desc *d = s->desc;
  const struct mc_rbuf *b = mc_desc_find(d, s->remote, s->len);
  if (!b) {
    LOG_WARN("shm: %s of %llu bytes at 0x%llx is outside segment %s", s->opcode == OPCODE_WRITE ? "write" : "read",
             (unsigned long long)s->len, (unsigned long long)s->remote, d->name);
    return -EFAULT;
  }
  char *dst;
  atomic_uint_least64_t *warm;
  uint64_t off = s->remote - b->addr;
  if (d->pid == getpid()) {
    /* while anything is still warming (rare after start-up), a cold own buffer is copied by the kernel */
    struct mc_buf *own = mc_prefault_pending(s->eng->prefault) ? mc_engine_pin_range(s->eng, s->remote, s->len) : NULL;
    int cold = own && !mc_buf_warm(own, s->remote, s->len);
    int rc = cold ? mc_vm_copy_raw(getpid(), s->opcode, s->local, s->remote, s->len) : 0;
    if (own) mc_engine_unpin(own);
    if (cold) return rc;
    dst = (char *)(uintptr_t)s->remote;
  } else if (b->shm_fd < 0 || !(dst = peer_base(d, b, &warm))) return vm_copy(d, s->opcode, s->local, s->remote, s->len);
  else if (s->eng->prefault && !mc_chunks_warm(warm, off, s->len)) {
    /* our mapping of these pages is cold: copy through the kernel, warm the mapping meanwhile */
    mc_prefault_peer(s->eng->prefault, d, (size_t)(b - d->bufs), off, s->len);
    return vm_copy(d, s->opcode, s->local, s->remote, s->len);
  } else dst += off;
  if (s->opcode == OPCODE_WRITE) memcpy(dst, s->local, s->len);
  else memcpy(s->local, dst, s->len);
  return 0;
}

static void shm_submit(struct mc_transport *t, struct mc_slice **sl, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = copy_slice(sl[i]);
    if (rc && rc != -EFAULT) LOG_WARN("shm: copy to/from pid %d failed: %s", sl[i]->desc->pid, strerror(-rc));
    mc_slice_done(sl[i], rc == 0, sl[i]->len);
  }
}

/* Same boot id, and a probe that proves this process can reach the peer's memory. */
static int shm_reachable(struct mc_transport *t, const struct mc_desc *d) {
  if (!d->pid || !d->host_id || strcmp(d->host_id, mc_host_id()) || !*d->host_id) return 0;
  if (d->pid == getpid()) return 1;
  if (kill(d->pid, 0) && errno == ESRCH) return 0;
  for (size_t i = 0; i < d->nbuf; i++) {
    const struct mc_rbuf *b = &d->bufs[i];
    if (b->shm_fd >= 0) {
      char path[64];
      snprintf(path, sizeof(path), "/proc/%d/fd/%d", d->pid, b->shm_fd);
      int fd = open(path, O_RDWR | O_CLOEXEC);
      if (fd >= 0) close(fd);
      if (fd < 0) return 0;
    } else {
      char byte;
      if (d->shm_registry_fd < 0 || mc_vm_copy_raw(d->pid, OPCODE_READ, &byte, b->addr, 1)) return 0;
    }
  }
  return 1;
}

static int shm_init(struct mc_engine *e, struct mc_transport **out) {
  int fd = memfd_create("mooncake-registry", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, sizeof(struct shm_registry))) {
    LOG_ERROR("shm: cannot create the registration registry: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return ERR_MEMORY;
  }
  void *reg = mmap(NULL, sizeof(struct shm_registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (reg == MAP_FAILED) {
    close(fd);
    return ERR_MEMORY;
  }
  struct shm_tp *tp = mc_calloc(1, sizeof(*tp));
  tp->reg_fd = fd;
  tp->reg = reg;
  tp->base.eng = e;
  tp->base.ops = mc_transport_lookup("shm");
  *out = &tp->base;
  return 0;
}

static void shm_fini(struct mc_transport *t) {
  struct shm_tp *tp = (struct shm_tp *)t;
  munmap(tp->reg, sizeof(*tp->reg));
  close(tp->reg_fd);
  mc_free(tp);
}

static void shm_describe(struct mc_transport *t, json_t *d) {
  json_object_set_new(d, "shm_registry_fd", json_integer(((struct shm_tp *)t)->reg_fd));
}

const struct mc_transport_ops mc_shm_transport_ops = {
    .name = "shm",
    .init = shm_init,
    .fini = shm_fini,
    .describe = shm_describe,
    .reachable = shm_reachable,
    .submit = shm_submit,
    .mem_changed = shm_mem_changed,
    .mem_quiesce = shm_mem_quiesce,
};
