/* Same-host transport: bytes move by memcpy, never through the TCP stack. Buffers the peer allocated
 * with mc_te_alloc_shared are memfd-backed and mapped here through /proc/<pid>/fd/<n>; any other
 * registered buffer is reached with process_vm_readv/writev (one copy across processes).
 *
 * Every engine also shares a small registry (memfd, seqlock) of its live registrations. Before a
 * process_vm copy the initiator announces itself in the peer's registry and checks the range against
 * the live entries, and an unregistering peer waits for announced copies to finish: so a stale
 * descriptor can never make us write into memory the peer no longer registers. Mapped memfd buffers
 * need no such check (their pages stay valid for as long as we map them).
 *
 * A descriptor is never trusted with memory (docs/transfer-engine.md, "Same-host path: what a descriptor
 * can make us touch"): a copy into our own process is checked against this process's own registration
 * table (mc_local_pin_range), never the descriptor's buffer list; a peer's /proc/<pid>/fd/<n> is used
 * only when it is one of our memfds (its name), sealed against shrinking (so no page we mapped can
 * vanish: no SIGBUS) and at least as long as the descriptor claims. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "te/engine_internal.h"

extern const struct mc_transport_ops mc_shm_transport_ops;

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

int mc_shm_memfd(const char *what, uint64_t len) {
  char name[64];
  snprintf(name, sizeof(name), "mooncake-%s", what);
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)len) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

/* 1 when the fd behind /proc path is one of our memfds of that kind ("segment" or "registry"); its link
 * text into link. */
static int is_our_memfd(const char *path, const char *what, char *link, size_t cap) {
  char want[64];
  ssize_t n = readlink(path, link, cap - 1);
  link[n > 0 ? n : 0] = 0;
  snprintf(want, sizeof(want), "/memfd:mooncake-%s ", what);
  return n > 0 && !strncmp(link, want, strlen(want));
}

/* Opens the peer's memfd number fd read-write when it is one of our memfds of that kind, sealed against
 * shrinking, and holds at least len bytes; else -1 (logged). Nothing else the number may name is opened,
 * and the checks are repeated on the file we opened, so the peer cannot swap it between check and use. */
static int open_peer_memfd(int pid, int fd, const char *what, uint64_t len) {
  char path[64], link[128];
  if (pid <= 0 || fd < 0) return -1;
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  if (!is_our_memfd(path, what, link, sizeof(link))) {
    if (*link) LOG_WARN("shm: fd %d of pid %d (%s): not one of our memfds; not mapped", fd, pid, link);
    return -1; /* or not there (any more), or not ours to look at: not reachable */
  }
  int f = open(path, O_RDWR | O_CLOEXEC);
  if (f < 0) return -1;
  snprintf(path, sizeof(path), "/proc/self/fd/%d", f);
  struct stat st;
  const char *why = NULL;
  if (!is_our_memfd(path, what, link, sizeof(link))) why = "not one of our memfds";
  else if (fstat(f, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < len) why = "shorter than announced";
  else if (!(fcntl(f, F_GET_SEALS) & F_SEAL_SHRINK)) why = "not sealed against shrinking";
  if (!why) return f;
  close(f);
  LOG_WARN("shm: fd %d of pid %d (%s): %s; not mapped", fd, pid, link, why);
  return -1;
}

/* ---- a peer's registry ---- */

static struct shm_registry *map_registry(const struct mc_desc *d) {
  int fd = open_peer_memfd(d->pid, d->shm_registry_fd, "registry", sizeof(struct shm_registry));
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
  int fd = open_peer_memfd(d->pid, b->shm_fd, "segment", b->len);
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
  if (d->pid == mc_self_pid()) { /* our own memory: only what this process registered, whatever d claims */
    struct mc_buf *own = mc_local_pin_range(s->remote, s->len);
    if (!own) {
      LOG_WARN("shm: %s of %llu bytes at 0x%llx (segment %s, our own pid): not registered in this process; refused",
               s->opcode == OPCODE_WRITE ? "write" : "read", (unsigned long long)s->len, (unsigned long long)s->remote,
               d->name);
      return -EFAULT;
    }
    /* while a buffer is still warming (rare after start-up), its cold pages are copied by the kernel */
    int rc = 0;
    dst = (char *)(uintptr_t)s->remote;
    if (!mc_buf_warm(own, s->remote, s->len)) rc = mc_vm_copy_raw(mc_self_pid(), s->opcode, s->local, s->remote, s->len);
    else if (s->opcode == OPCODE_WRITE) memcpy(dst, s->local, s->len);
    else memcpy(s->local, dst, s->len);
    mc_engine_unpin(own);
    return rc;
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
  if (d->pid == mc_self_pid()) return 1;
  if (kill(d->pid, 0) && errno == ESRCH) return 0;
  for (size_t i = 0; i < d->nbuf; i++) {
    const struct mc_rbuf *b = &d->bufs[i];
    if (b->shm_fd >= 0) {
      int fd = open_peer_memfd(d->pid, b->shm_fd, "segment", b->len);
      if (fd < 0) return 0;
      close(fd);
    } else {
      char byte;
      if (d->shm_registry_fd < 0 || mc_vm_copy_raw(d->pid, OPCODE_READ, &byte, b->addr, 1)) return 0;
    }
  }
  return 1;
}

static int shm_init(struct mc_engine *e, struct mc_transport **out, char *why, size_t why_len) {
  int fd = mc_shm_memfd("registry", sizeof(struct shm_registry));
  if (fd < 0) {
    snprintf(why, why_len, "cannot create the registration registry: %s", strerror(errno));
    LOG_ERROR("shm: %s", why);
    return ERR_MEMORY;
  }
  void *reg = mmap(NULL, sizeof(struct shm_registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (reg == MAP_FAILED) {
    snprintf(why, why_len, "cannot map the registration registry: %s", strerror(errno));
    close(fd);
    return ERR_MEMORY;
  }
  struct shm_tp *tp = mc_calloc(1, sizeof(*tp));
  tp->reg_fd = fd;
  tp->reg = reg;
  tp->base.eng = e;
  tp->base.ops = &mc_shm_transport_ops;
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
    .same_host = 1,
    .init = shm_init,
    .fini = shm_fini,
    .describe = shm_describe,
    .reachable = shm_reachable,
    .submit = shm_submit,
    .mem_changed = shm_mem_changed,
    .mem_quiesce = shm_mem_quiesce,
};
