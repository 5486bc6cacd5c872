/* Space that must not be handed out again yet (m->discard_mu). Two structures:
 *
 * - The discard heap: space that waits for a time. Preempted puts park their space until put_start +
 *   put_start_release_timeout_sec; a leased object that is force-removed or re-put parks its old replicas
 *   until its lease ends ("read leases protect bytes", docs/master.md). A binary min-heap by release time:
 *   the eviction thread's 10 ms tick frees what is due in O(due * log n) instead of walking every entry.
 *   (A list walked on every tick would not do: after a forced remove_all of a million just-read objects,
 *   the walk would take the master's CPU and the removal itself, which pushes under the same mutex, would run
 *   20x slower.) An entry that must also wait for a DROP's acknowledgement (a leased replica on a holder that
 *   follows its index) goes back with a release time one tick later while it is not acknowledged.
 * - The acknowledgement queues: space of a complete replica whose holder follows its index waits until the
 *   holder has acknowledged the replica's DROP ("Space is reused only after its DROP is acknowledged",
 *   docs/ha.md). One FIFO per holder, in the order the DROPs were queued (near enough: two removals may
 *   push in the other order than their numbers, which only delays the later one to a later
 *   acknowledgement); the poll that acknowledges releases what it covers at once, and the tick catches
 *   what a closed holder leaves. No heap work, and consecutive entries of one segment are freed under one
 *   hold of its allocator's lock.
 *
 * Lifetime: an entry's segment stays allocated while the entry is reachable under discard_mu (the
 * unmount sweeper drops entries of unreadable segments before freeing them), so entries are released
 * under the mutex, in bounded chunks that let pushers in between.
 *
 * Space released here, or straight away by a removal that need not wait, goes back to its segment's allocator
 * through mc_rep_release. */
#include <string.h>

#include "common/alloc.h"
#include "master_core/holder_feed.h"
#include "master_core/core.h"
#include "master_core/minheap.h"

#define RELEASE_CHUNK 4096 /* entries released per hold of discard_mu */
#define ACK_RETRY_NS 10000000ull /* an entry whose acknowledgement has not come is looked at again after */

MC_MINHEAP(heap, struct discard, release_ns)

/* Gives memory back once the heap has shrunk to a quarter of its capacity (discard_mu held). */
static void maybe_shrink(struct mc_master *m) {
  if (m->capdiscards <= 1024 || m->ndiscards > m->capdiscards / 4) return;
  m->capdiscards /= 2;
  m->discards = mc_realloc(m->discards, m->capdiscards * sizeof(*m->discards));
}

static void push_locked(struct mc_master *m, struct discard d) {
  if (m->ndiscards == m->capdiscards) {
    m->capdiscards = m->capdiscards ? 2 * m->capdiscards : 256;
    m->discards = mc_realloc(m->discards, m->capdiscards * sizeof(*m->discards));
  }
  m->discards[m->ndiscards] = d;
  heap_up(m->discards, m->ndiscards++);
}

void mc_rep_release(struct mseg *seg, struct mc_tlsf_block *blk) {
  pthread_mutex_lock(&seg->alloc_mu);
  mc_tlsf_free(seg->tlsf, blk);
  atomic_store(&seg->used, mc_tlsf_used(seg->tlsf));
  pthread_mutex_unlock(&seg->alloc_mu);
}

/* ---- the acknowledgement queues (discard_mu held) ---- */

static struct ackq *ackq_of(struct mc_master *m, struct mc_hidx *h) {
  int *slot = mc_hidx_discard_slot(h);
  if (*slot >= 0) return &m->ackqs[*slot];
  if (m->nackqs == m->capackqs) {
    m->capackqs = m->capackqs ? 2 * m->capackqs : 16;
    m->ackqs = mc_realloc(m->ackqs, m->capackqs * sizeof(*m->ackqs));
  }
  mc_hidx_ref(h);
  *slot = (int)m->nackqs;
  m->ackqs[m->nackqs] = (struct ackq){.h = h};
  return &m->ackqs[m->nackqs++];
}

static void ackq_push(struct mc_master *m, struct mc_hidx *h, struct discard d) {
  struct ackq *q = ackq_of(m, h);
  if (q->n == q->cap) {
    if (q->head > q->n / 2) { /* half of it is released: slide down instead of growing */
      memmove(q->e, q->e + q->head, (q->n - q->head) * sizeof(*q->e));
      q->n -= q->head;
      q->head = 0;
    } else {
      q->cap = q->cap ? 2 * q->cap : 256;
      q->e = mc_realloc(q->e, q->cap * sizeof(*q->e));
    }
  }
  q->e[q->n++] = d;
}

/* Removes queue i (empty, or its entries already dropped). */
static void ackq_remove(struct mc_master *m, uint32_t i) {
  struct ackq *q = &m->ackqs[i];
  *mc_hidx_discard_slot(q->h) = -1;
  mc_hidx_unref(q->h);
  mc_free(q->e);
  m->ackqs[i] = m->ackqs[--m->nackqs];
  if (i < m->nackqs) *mc_hidx_discard_slot(m->ackqs[i].h) = (int)i;
}

/* Frees up to RELEASE_CHUNK acknowledged entries of queue i, a segment's run under one hold of its lock;
 * removes the queue once empty. Returns 1 when acknowledged entries are left (the chunk ended first). */
static int ackq_release(struct mc_master *m, uint32_t i) {
  struct ackq *q = &m->ackqs[i];
  uint64_t acked = mc_hidx_acked(q->h);
  struct mseg *held = NULL;
  int k = 0;
  for (; q->head < q->n && q->e[q->head].seq <= acked && k < RELEASE_CHUNK; k++) {
    struct discard *d = &q->e[q->head++];
    if (d->seg != held) {
      if (held) {
        atomic_store(&held->used, mc_tlsf_used(held->tlsf));
        pthread_mutex_unlock(&held->alloc_mu);
      }
      held = d->seg;
      pthread_mutex_lock(&held->alloc_mu);
    }
    mc_tlsf_free(held->tlsf, d->blk);
  }
  if (held) {
    atomic_store(&held->used, mc_tlsf_used(held->tlsf));
    pthread_mutex_unlock(&held->alloc_mu);
  }
  int more = q->head < q->n && q->e[q->head].seq <= acked;
  if (q->head == q->n) {
    q->head = q->n = 0;
    if (!k || acked == UINT64_MAX) ackq_remove(m, i); /* idle (or its holder closed): give it back */
  }
  return more;
}

void mc_discard_release_acked(struct mc_master *m, struct mc_hidx *h) {
  for (int more = 1; more;) {
    pthread_mutex_lock(&m->discard_mu);
    int slot = *mc_hidx_discard_slot(h);
    more = slot >= 0 && ackq_release(m, (uint32_t)slot);
    pthread_mutex_unlock(&m->discard_mu);
  }
}

void mc_discard_push_acked(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, uint64_t release_ns,
                           struct mc_hidx *h, uint64_t seq) {
  pthread_mutex_lock(&m->discard_mu);
  if (h && !release_ns) {
    ackq_push(m, h, (struct discard){seg, blk, 0, NULL, seq});
  } else {
    if (h) mc_hidx_ref(h);
    push_locked(m, (struct discard){seg, blk, release_ns, h, seq});
  }
  pthread_mutex_unlock(&m->discard_mu);
}

void mc_discard_push(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, uint64_t release_ns) {
  mc_discard_push_acked(m, seg, blk, release_ns, NULL, 0);
}

static void entry_done(struct discard *d) {
  if (d->hidx) mc_hidx_unref(d->hidx);
}

void mc_discard_release_due(struct mc_master *m, uint64_t now) {
  for (int more = 1; more;) {
    pthread_mutex_lock(&m->discard_mu);
    for (int k = 0; k < RELEASE_CHUNK && m->ndiscards && m->discards[0].release_ns <= now; k++) {
      struct discard d = m->discards[0];
      m->discards[0] = m->discards[--m->ndiscards];
      heap_down(m->discards, m->ndiscards, 0);
      if (d.hidx && mc_hidx_acked(d.hidx) < d.seq) { /* its DROP not acknowledged yet */
        d.release_ns = now + ACK_RETRY_NS;
        push_locked(m, d);
        continue;
      }
      entry_done(&d);
      mc_rep_release(d.seg, d.blk);
    }
    more = m->ndiscards && m->discards[0].release_ns <= now;
    maybe_shrink(m);
    pthread_mutex_unlock(&m->discard_mu);
  }
  /* the acknowledgement queues: what a poll did not release (a holder that closed, a chunk's rest) */
  pthread_mutex_lock(&m->discard_mu);
  for (uint32_t i = m->nackqs; i-- > 0;) {
    while (ackq_release(m, i)) { /* a chunk at a time, letting pushers in between */
      pthread_mutex_unlock(&m->discard_mu);
      pthread_mutex_lock(&m->discard_mu);
      if (i >= m->nackqs) break;
    }
  }
  pthread_mutex_unlock(&m->discard_mu);
}

void mc_discard_drop_unreadable(struct mc_master *m) {
  pthread_mutex_lock(&m->discard_mu);
  size_t k = 0;
  for (size_t i = 0; i < m->ndiscards; i++)
    if (seg_readable(m->discards[i].seg)) m->discards[k++] = m->discards[i];
    else entry_done(&m->discards[i]);
  if (k != m->ndiscards) {
    m->ndiscards = k;
    for (size_t i = k / 2; i-- > 0;) heap_down(m->discards, k, i);
    maybe_shrink(m);
  }
  for (uint32_t i = m->nackqs; i-- > 0;) {
    struct ackq *q = &m->ackqs[i];
    size_t n = 0;
    for (size_t j = q->head; j < q->n; j++)
      if (seg_readable(q->e[j].seg)) q->e[n++] = q->e[j];
    q->head = 0;
    q->n = n;
    if (!n) ackq_remove(m, i);
  }
  pthread_mutex_unlock(&m->discard_mu);
}

size_t mc_discard_count(struct mc_master *m) {
  pthread_mutex_lock(&m->discard_mu);
  size_t n = m->ndiscards;
  for (uint32_t i = 0; i < m->nackqs; i++) n += m->ackqs[i].n - m->ackqs[i].head;
  pthread_mutex_unlock(&m->discard_mu);
  return n;
}

void mc_discard_free(struct mc_master *m) {
  for (size_t i = 0; i < m->ndiscards; i++) entry_done(&m->discards[i]);
  mc_free(m->discards);
  m->discards = NULL;
  m->ndiscards = m->capdiscards = 0;
  while (m->nackqs) ackq_remove(m, m->nackqs - 1);
  mc_free(m->ackqs);
  m->ackqs = NULL;
  m->capackqs = 0;
}
