/* Same-host transport: bytes move by memcpy, never through the TCP stack. Buffers the peer allocated
 * with mc_te_alloc_shared are memfd-backed and mapped here through /proc/<pid>/fd/<n>; any other
 * registered buffer is reached with process_vm_readv/writev (one copy across processes). The target
 * range is checked against the peer's descriptor before any byte moves. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "te/engine_internal.h"

struct shm_tp {
  struct mc_transport base;
};

static void *map_peer_buf(const struct mc_desc *d, const struct mc_rbuf *b) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", d->pid, b->shm_fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

/* The local address of a peer's memfd buffer, mapped on first use; NULL if it cannot be mapped. */
static char *peer_base(struct mc_desc *d, const struct mc_rbuf *b) {
  size_t i = (size_t)(b - d->bufs);
  pthread_mutex_lock(&d->shm_mu);
  if (!d->shm_maps[i]) d->shm_maps[i] = map_peer_buf(d, b);
  char *p = d->shm_maps[i];
  pthread_mutex_unlock(&d->shm_mu);
  return p;
}

static int vm_copy(int pid, int op, void *local, uint64_t remote, uint64_t len) {
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

static int copy_slice(struct mc_slice *s) {
  struct mc_desc *d = s->desc;
  const struct mc_rbuf *b = mc_desc_find(d, s->remote, s->len);
  if (!b) {
    LOG_WARN("shm: %s of %llu bytes at 0x%llx is outside segment %s", s->opcode == OPCODE_WRITE ? "write" : "read",
             (unsigned long long)s->len, (unsigned long long)s->remote, d->name);
    return -EFAULT;
  }
  char *dst;
  if (d->pid == getpid()) dst = (char *)(uintptr_t)s->remote;
  else if (b->shm_fd >= 0 && (dst = peer_base(d, b))) dst += s->remote - b->addr;
  else return vm_copy(d->pid, s->opcode, s->local, s->remote, s->len);
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
      if (vm_copy(d->pid, OPCODE_READ, &byte, b->addr, 1)) return 0;
    }
  }
  return 1;
}

static int shm_init(struct mc_engine *e, struct mc_transport **out) {
  struct shm_tp *tp = mc_calloc(1, sizeof(*tp));
  tp->base.eng = e;
  tp->base.ops = mc_transport_lookup("shm");
  *out = &tp->base;
  return 0;
}

static void shm_fini(struct mc_transport *t) { mc_free(t); }

const struct mc_transport_ops mc_shm_transport_ops = {
    .name = "shm",
    .init = shm_init,
    .fini = shm_fini,
    .describe = NULL,
    .reachable = shm_reachable,
    .submit = shm_submit,
};
