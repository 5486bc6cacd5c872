/* Warming memory ahead of use.
 *
 * Memory the engine allocates (mc_te_alloc_shared: a store client's segment and staging buffer) is a
 * memfd committed lazily, so setup time does not grow with its size. The first touch of each 4 KiB
 * page costs a fault, and in virtual machines with shadow paging it costs a fault *per process and
 * per page* (12-17 us measured here) even when the page already exists: a first pass of 1 MiB puts
 * ran at 0.2-0.3 GB/s against 2-6 GB/s warm. What we do about it:
 *
 *  1. Populate. Background threads per engine (nice 10; one per CPU, at most PF_MAX_THREADS,
 *     MC_PREFAULT_THREADS; setup never waits for them) allocate the pages of every shared buffer with
 *     MADV_POPULATE_WRITE, 2 MiB at a time, round robin over the buffers and from low offsets up (the
 *     master's allocator hands out low offsets first). Cheap: ~0.1-0.4 s per GiB here when the host has
 *     the memory at hand; several threads help when it does not (its faults are served in parallel).
 *  2. Touch. The same threads then touch every page of those buffers through this process's own
 *     mapping, from user and from kernel mode (an atomic add of 0 each: no byte changes, even against
 *     concurrent writers; see touch_pages) and mark each MC_WARM_CHUNK warm. Slow in a VM (~25 us a
 *     page here, ~6 s per GiB), but off the data path; well under a second per GiB on bare metal.
 *  3. Avoid cold mappings on the data path. Until a chunk is warm, the engine copies into and out
 *     of it through the kernel (process_vm_writev/readv), which reaches populated pages without a
 *     user page fault: the TCP server receives a WRITE into a bounce buffer and copies it in that way
 *     (a READ the other way round), and the same-host path copies into a peer's memfd with
 *     process_vm_* until this process has touched its own mapping of that chunk (queued here too).
 *
 * MC_SEGMENT_PREFAULT=0 turns steps 1-2 off (memory is then committed by the first writes, and every
 * chunk counts as warm); MC_SEGMENT_PREFAULT=populate does step 1 only (chunks stay cold, so the data
 * path keeps copying through the kernel; used by tests to pin that path). Pinning a buffer for one chunk
 * at a time means freeing a buffer waits at most one chunk; a peer mapping is kept alive by a descriptor reference while it is touched. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "te/engine_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
/* MADV_POPULATE_WRITE holds the process's mmap lock while it works: a piece is kept small so that a
 * thread that maps or unmaps memory (a new thread's stack, the heartbeat's allocations) never waits
 * long behind it. */
#define POPULATE_CHUNK (2ull << 20)
#define PF_MAX_THREADS 4
#define PAGE 4096ull

struct pf_range {
  uint64_t addr, len, populated, touched;
};

struct pf_peer {
  struct pf_peer *next;
  struct mc_desc *desc; /* referenced */
  size_t buf;
  uint64_t chunk;
};

struct mc_prefault {
  struct mc_engine *eng;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct pf_range *r;
  size_t n, cap, next;
  struct pf_peer *peers, *peers_tail;
  uint64_t busy_since_ns, bytes; /* the current run of own-buffer work, for the log line */
  atomic_uint_least64_t pending; /* bytes of populate + touch work queued and not done (peer chunks too) */
  int stop, started, no_populate, populate_only;
  int nthreads, busy; /* workers, and how many of them hold a unit of work now (mu) */
  pthread_t th[PF_MAX_THREADS];
};

/* Touches each page for writing from user mode (an atomic add of 0) and from kernel mode (the same add
 * done by the kernel: FUTEX_WAKE_OP's operation on uaddr2, which wakes nobody here). Some hypervisors
 * (shadow paging, e.g. PVM) keep separate shadow tables for a guest's user and kernel modes, so a
 * page that user code has touched still faults when recv() copies into it, and the other way round.
 * Neither add changes a byte, even against concurrent writers. */
static void touch_pages(char *p, uint64_t len, int kernel_too) {
  MC_TSAN_IGNORE_BEGIN(); /* these adds change no byte: not a race with the data path's writes */
  for (uint64_t o = 0; o < len; o += PAGE) {
    __atomic_fetch_add(p + o, 0, __ATOMIC_RELAXED);
    if (kernel_too)
      syscall(SYS_futex, (uint32_t *)(p + o), FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0, 0, (uint32_t *)(p + o),
              FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
  }
  MC_TSAN_IGNORE_END();
}

#define SHMEM_THP "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

int mc_shmem_thp_mode(char *out, size_t n) {
  char buf[128] = {0};
  FILE *f = fopen(SHMEM_THP, "re");
  if (!f) return -1;
  char *ok = fgets(buf, sizeof(buf), f);
  fclose(f);
  char *a = ok ? strchr(buf, '[') : NULL, *b = a ? strchr(a, ']') : NULL;
  if (!b) return -1;
  snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
  return 0;
}

void mc_shm_advise_huge(void *p, uint64_t len) {
  static atomic_int told;
  if (len < (2ull << 20) || !mc_knob_bool(MC_KNOB_SEGMENT_HUGEPAGE)) return;
  (void)madvise(p, len, MADV_HUGEPAGE); /* EINVAL on kernels without THP: nothing to do */
  if (atomic_exchange(&told, 1)) return;
  char mode[32] = "never"; /* a kernel without the file has no THP */
  (void)mc_shmem_thp_mode(mode, sizeof(mode));
  if (!strcmp(mode, "never") || !strcmp(mode, "deny"))
    LOG_INFO("shared memory uses 4 KiB pages (" SHMEM_THP " is '%s'); 'advise' gives segments 2 MiB pages "
             "and a much shorter warm-up (docs/operations.md, \"Huge pages for segments\")", mode);
  else LOG_INFO("shared memory asks for 2 MiB pages (" SHMEM_THP " is '%s')", mode);
}

static void set_bit(atomic_uint_least64_t *bits, uint64_t i) { atomic_fetch_or(&bits[i / 64], 1ull << (i % 64)); }
static int get_bit(atomic_uint_least64_t *bits, uint64_t i) {
  return (atomic_load_explicit(&bits[i / 64], memory_order_acquire) >> (i % 64)) & 1;
}

int mc_chunks_warm(atomic_uint_least64_t *bits, uint64_t off, uint64_t len) {
  if (!bits || !len) return 1;
  for (uint64_t c = off / MC_WARM_CHUNK; c <= (off + len - 1) / MC_WARM_CHUNK; c++)
    if (!get_bit(bits, c)) return 0;
  return 1;
}

int mc_buf_warm(const struct mc_buf *b, uint64_t addr, uint64_t len) {
  return !b->warm || mc_chunks_warm(b->warm, addr - b->addr, len);
}

/* One unit of own-buffer work: populate a 16 MiB piece, else touch a chunk. 0 when none left. */
static int own_work(struct mc_prefault *p) {
  long pick = -1;
  int populate = 0;
  for (int phase = 0; phase < 2 && pick < 0; phase++)
    for (size_t k = 0; k < p->n; k++) {
      size_t i = (p->next + k) % p->n;
      struct pf_range *r = &p->r[i];
      if (phase == 0 ? r->populated < r->len : r->touched < r->len && !p->populate_only) {
        pick = (long)i;
        populate = phase == 0;
        p->next = i + 1;
        break;
      }
    }
  if (pick < 0) return 0;
  struct pf_range *r = &p->r[pick];
  uint64_t off = populate ? r->populated : r->touched;
  uint64_t len = MC_MIN(r->len - off, populate ? POPULATE_CHUNK : MC_WARM_CHUNK), addr = r->addr + off;
  if (populate) r->populated += len;
  else r->touched += len;
  int no_populate = p->no_populate;
  p->busy++;
  pthread_mutex_unlock(&p->mu);
  struct mc_buf *b = mc_engine_pin_range(p->eng, addr, len); /* a buffer already freed is skipped */
  if (b) {
    if (!populate) {
      touch_pages((char *)(uintptr_t)addr, len, 1); /* own buffers: recv()/send() reach them too */
      if (b->warm) set_bit(b->warm, (addr - b->addr) / MC_WARM_CHUNK);
    } else if (!no_populate && madvise((void *)(uintptr_t)addr, len, MADV_POPULATE_WRITE) && errno == EINVAL) {
      no_populate = 1; /* kernel < 5.14: the touch pass allocates the pages instead */
    }
    mc_engine_unpin(b);
  }
  atomic_fetch_sub(&p->pending, len);
  pthread_mutex_lock(&p->mu);
  p->busy--;
  p->no_populate |= no_populate;
  return 1;
}

static void peer_work(struct mc_prefault *p) {
  struct pf_peer *j = p->peers;
  p->peers = j->next;
  if (!p->peers) p->peers_tail = NULL;
  p->busy++;
  pthread_mutex_unlock(&p->mu);
  struct mc_desc *d = j->desc;
  pthread_mutex_lock(&d->shm_mu);
  char *base = d->shm_maps[j->buf];
  atomic_uint_least64_t *bits = d->shm_warm[j->buf];
  pthread_mutex_unlock(&d->shm_mu);
  if (base && bits) { /* the mapping lives as long as our reference on d */
    uint64_t off = j->chunk * MC_WARM_CHUNK, len = MC_MIN(d->bufs[j->buf].len - off, MC_WARM_CHUNK);
    touch_pages(base + off, len, 0); /* a peer's memfd: only our memcpy reaches it through this mapping */
    set_bit(bits, j->chunk);
  }
  mc_desc_unref(d);
  mc_free(j);
  atomic_fetch_sub(&p->pending, MC_WARM_CHUNK);
  pthread_mutex_lock(&p->mu);
  p->busy--;
}

static void *prefault_main(void *arg) {
  mc_thread_name("mc-prefault");
  struct mc_prefault *p = arg;
  /* nice 10: the data path's threads (nice 0) preempt these at once, and on an idle host they run at full
   * speed. Not SCHED_IDLE, nor nice 19: on a host whose CPUs another process keeps busy, such a thread
   * gets (next to) no CPU for seconds, and one preempted inside MADV_POPULATE_WRITE or a page fault holds
   * the process's mmap lock all that time; every other thread that maps memory (malloc growing an arena,
   * a new thread's stack) waited behind it, the heartbeat stopped and the master expired the holder
   * (tests/test_faults.c: expired with SCHED_IDLE and with nice 19, kept with nice 10, on two saturated
   * vCPUs). At nice 10 a thread keeps about a tenth of a CPU's share, so a lock it holds is soon let go. */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    if (p->peers) peer_work(p); /* a data path is waiting on these */
    else if (!own_work(p)) {
      if (p->n && !p->busy) { /* the last worker out: everything is done, forget the ranges */
        LOG_INFO("prefault: %llu MiB of shared memory %s in %.2f s", (unsigned long long)(p->bytes >> 20),
                 p->populate_only ? "populated" : "populated and warm", (double)(mc_now_ns() - p->busy_since_ns) / 1e9);
        p->n = 0;
        p->bytes = 0;
      }
      pthread_cond_wait(&p->cv, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

struct mc_prefault *mc_prefault_create(struct mc_engine *e) {
  const char *mode = mc_knob_str(MC_KNOB_SEGMENT_PREFAULT); /* on (default) | off | populate */
  int populate_only = mode && !strcmp(mode, "populate"), on = populate_only ? 1 : mc_str_bool(mode, 1);
  if (on < 0) {
    LOG_WARN("ignoring invalid %s=%s", mc_knob_info(MC_KNOB_SEGMENT_PREFAULT)->name, mode);
    on = 1;
  }
  if (!on) return NULL;
  struct mc_prefault *p = mc_calloc(1, sizeof(*p));
  p->populate_only = populate_only;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  p->nthreads = (int)mc_knob_long_or(MC_KNOB_PREFAULT_THREADS, cpus < 1 ? 1 : MC_MIN(cpus, PF_MAX_THREADS));
  p->eng = e;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  return p;
}

/* Starts the workers on first use (as many as can be created, at least one). mu held. 0 or -1. */
static int ensure_started(struct mc_prefault *p) {
  if (p->stop) return -1;
  if (p->started) return 0;
  while (p->started < p->nthreads && !pthread_create(&p->th[p->started], NULL, prefault_main, p)) p->started++;
  if (!p->started) {
    LOG_WARN("prefault: cannot start a background thread; pages fault in on first use");
    return -1;
  }
  return 0;
}

atomic_uint_least64_t *mc_warm_bits_new(uint64_t len) {
  return mc_calloc(2 * (len / MC_WARM_CHUNK / 64 + 1), sizeof(atomic_uint_least64_t));
}

void mc_prefault_add(struct mc_prefault *p, uint64_t addr, uint64_t len) {
  if (!p || !len) return;
  pthread_mutex_lock(&p->mu);
  if (ensure_started(p)) {
    pthread_mutex_unlock(&p->mu);
    return;
  }
  if (p->n == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 4;
    p->r = mc_realloc(p->r, p->cap * sizeof(*p->r));
  }
  if (!p->n) p->busy_since_ns = mc_now_ns();
  p->bytes += len;
  p->r[p->n++] = (struct pf_range){addr, len, 0, 0};
  atomic_fetch_add(&p->pending, p->populate_only ? len : 2 * len);
  pthread_cond_broadcast(&p->cv); /* every worker: populating goes faster in parallel */
  pthread_mutex_unlock(&p->mu);
}

void mc_prefault_peer(struct mc_prefault *p, struct mc_desc *d, size_t buf, uint64_t off, uint64_t len) {
  if (!p || !len || p->populate_only) return;
  atomic_uint_least64_t *queued = d->shm_warm[buf] + d->bufs[buf].len / MC_WARM_CHUNK / 64 + 1;
  for (uint64_t c = off / MC_WARM_CHUNK; c <= (off + len - 1) / MC_WARM_CHUNK; c++) {
    uint64_t bit = 1ull << (c % 64);
    if (atomic_fetch_or(&queued[c / 64], bit) & bit) continue; /* queued before */
    struct pf_peer *j = mc_calloc(1, sizeof(*j));
    mc_desc_ref(d);
    *j = (struct pf_peer){NULL, d, buf, c};
    atomic_fetch_add(&p->pending, MC_WARM_CHUNK);
    pthread_mutex_lock(&p->mu);
    if (ensure_started(p)) {
      pthread_mutex_unlock(&p->mu);
      atomic_fetch_sub(&p->pending, MC_WARM_CHUNK);
      mc_desc_unref(d);
      mc_free(j);
      return;
    }
    if (p->peers_tail) p->peers_tail->next = j;
    else p->peers = j;
    p->peers_tail = j;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
}

uint64_t mc_prefault_pending(struct mc_prefault *p) { return p ? atomic_load(&p->pending) : 0; }

void mc_prefault_destroy(struct mc_prefault *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->cv);
  int started = p->started;
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < started; i++) pthread_join(p->th[i], NULL);
  while (p->peers) {
    struct pf_peer *j = p->peers;
    p->peers = j->next;
    mc_desc_unref(j->desc);
    mc_free(j);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  mc_free(p->r);
  mc_free(p);
}
