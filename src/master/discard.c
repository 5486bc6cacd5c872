/* The discard heap (m->discard_mu): replica space that must not be handed out again before a given
 * time. Preempted puts park their space until put_start + put_start_release_timeout_sec; a leased
 * object that is force-removed or re-put parks its old replicas until its lease ends ("read leases
 * protect bytes", docs/master.md); space of a complete replica whose holder follows its index waits until
 * the holder has acknowledged the replica's DROP ("Space is reused only after its DROP is acknowledged",
 * docs/ha.md): an entry due by time but not yet acknowledged goes back with a release time one tick
 * later. A binary min-heap by release time: the eviction thread's 10 ms tick
 * frees what is due in O(due * log n) instead of walking every entry. (It used to be a list walked on
 * every tick: after a forced remove_all of a million just-read objects, the walk took the master's CPU
 * and the removal itself, which pushes under the same mutex, ran 20x slower.)
 *
 * Lifetime: an entry's segment stays allocated while the entry is reachable under discard_mu (the
 * unmount sweeper drops entries of unreadable segments before freeing them), so entries are released
 * under the mutex, in bounded chunks that let pushers in between. */
#include <string.h>

#include "common/alloc.h"
#include "master/hidx.h"
#include "master/master_int.h"
#include "master/minheap.h"

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

void mc_discard_push_acked(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, uint64_t release_ns,
                           struct mc_hidx *h, uint64_t seq) {
  if (h) mc_hidx_ref(h);
  pthread_mutex_lock(&m->discard_mu);
  push_locked(m, (struct discard){seg, blk, release_ns, h, seq});
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
  pthread_mutex_unlock(&m->discard_mu);
}

size_t mc_discard_count(struct mc_master *m) {
  pthread_mutex_lock(&m->discard_mu);
  size_t n = m->ndiscards;
  pthread_mutex_unlock(&m->discard_mu);
  return n;
}

void mc_discard_free(struct mc_master *m) {
  for (size_t i = 0; i < m->ndiscards; i++) entry_done(&m->discards[i]);
  mc_free(m->discards);
  m->discards = NULL;
  m->ndiscards = m->capdiscards = 0;
}
