/* A writer's witnesses (docs/ha.md, "Witnesses"): the master answers every completed put and every removal
 * with the index records it queued for the holders (the witness block, proto.h: PUT and DROP records),
 * before any holder has them. The writer
 * keeps those records until the master says they are durable (durable_seq, in every witness block), so a
 * master that dies first loses nothing the writer can give back: once a new master (a restart, a new
 * leader) answers, the writer sends what it still holds (RECOMMIT) and the new master installs what the
 * holder's index upload did not settle. Witnesses are kept per issuing master (its view_version): a
 * durable_seq prunes only its own master's records.
 *
 * The heartbeat thread (heartbeat.c) calls mc_witness_tick every TICK_NS while some are pending: one
 * RECOMMIT per issuing master. To the master that issued them it is only a question (it answers KNOWN and
 * its durable_seq); to another one it is the hand-over. Witnesses another master keeps answering "not
 * yet" for (the holder has not remounted or uploaded) are given up after GIVE_UP_NS: the new master stops
 * taking them once the holder's segment takes new allocations anyway (its remount quiet period). At most
 * MC_WITNESS_MAX are kept; past that the oldest are given up (logged): a writer whose master never answers
 * must not grow without bound. Thread-safe: w->mu guards everything and is never held across an RPC. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/store_errors.h"

#define MC_WITNESS_MAX 65536
#define TICK_NS (100ull * 1000000)    /* pending witnesses are asked about this often */
#define GIVE_UP_NS (5000ull * 1000000) /* a witness another master keeps answering "not yet" for */
#define RECOMMIT_BATCH 1024
#define RECOMMIT_TMO_MS 3000

struct wit {
  uint64_t seq, view, sent_ns; /* sent_ns: first sent to a master other than its own, 0 not yet */
  uint32_t len;
  uint8_t rec[]; /* the record as the master sent it (master/hidx.h layout) */
};

struct mc_witnesses {
  pthread_mutex_t mu;
  struct wit **v;
  size_t n, cap;
  uint64_t view;    /* the master heard from last */
  uint64_t given_up; /* witnesses given up (never installed), for the log and tests */
  uint64_t block_ns; /* when a witness block came last: while they come, the replies prune */
  uint64_t pruned_view, pruned_durable; /* the last prune: a block with the same master and durable_seq
                                           has nothing to prune (its own records are all newer) */
  void (*on_pending)(void *arg); /* called (mu not held) when witnesses appear in an empty set */
  void *arg;
};

void mc_witness_on_pending(struct mc_witnesses *w, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&w->mu);
  w->on_pending = fn;
  w->arg = arg;
  pthread_mutex_unlock(&w->mu);
}

struct mc_witnesses *mc_witness_new(void) {
  struct mc_witnesses *w = mc_calloc(1, sizeof(*w));
  pthread_mutex_init(&w->mu, NULL);
  return w;
}

void mc_witness_free(struct mc_witnesses *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) mc_free(w->v[i]);
  mc_free(w->v);
  pthread_mutex_destroy(&w->mu);
  mc_free(w);
}

/* Drops v[i] (order is not kept). mu held. */
static void drop_at(struct mc_witnesses *w, size_t i) {
  mc_free(w->v[i]);
  w->v[i] = w->v[--w->n];
}

static void add(struct mc_witnesses *w, uint64_t view, uint64_t seq, const uint8_t *rec, size_t len) {
  if (w->n >= MC_WITNESS_MAX) {
    size_t old = 0;
    for (size_t i = 1; i < w->n; i++)
      if (w->v[i]->seq < w->v[old]->seq) old = i;
    drop_at(w, old);
    w->given_up++;
    LOG_WARN_LIMITED("witnesses: %d pending (the master is not making them durable); the oldest are given up",
                     MC_WITNESS_MAX);
  }
  if (w->n == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 64;
    w->v = mc_realloc(w->v, sizeof(*w->v) * w->cap);
  }
  struct wit *x = mc_malloc(sizeof(*x) + len);
  *x = (struct wit){.seq = seq, .view = view, .len = (uint32_t)len};
  memcpy(x->rec, rec, len);
  w->v[w->n++] = x;
}

/* Skips one record (master/hidx.h layout) and returns its seq; r->err when it does not decode. */
static uint64_t skip_record(struct mc_rbuf_rd *r) {
  uint64_t seq = mc_r_u64(r);
  uint8_t kind = mc_r_u8(r);
  uint32_t kl;
  mc_r_blob(r, &kl);
  mc_get_uuid(r);
  for (int i = 0; i < 3; i++) mc_r_u64(r);
  mc_r_u8(r);
  mc_r_u64(r);
  if (kind & MC_HIDX_GROUPED) mc_r_blob(r, &kl); /* the key group (re-sent as it came) */
  return seq;
}

/* Reads a witness block at r (absent when the body ends: a master without witnesses) and takes its
 * records in; prunes what its durable_seq covers. Returns the block's view_version, 0 when absent or
 * malformed. mu not held. */
static uint64_t take_block(struct mc_witnesses *w, struct mc_rbuf_rd *r) {
  if (r->err || r->len - r->off < 20) return 0;
  uint64_t view = mc_r_u64(r), durable = mc_r_u64(r);
  uint32_t n = mc_r_count(r, 8 + 1 + 4 + 16 + 32 + 1);
  struct mc_rbuf_rd check = *r; /* the whole block decodes, or nothing of it is used */
  for (uint32_t i = 0; i < n && !check.err; i++) skip_record(&check);
  if (check.err) {
    LOG_WARN_LIMITED("witnesses: a witness block does not decode; it is ignored");
    r->err = 1;
    return 0;
  }
  pthread_mutex_lock(&w->mu);
  int was_empty = w->n == 0;
  for (uint32_t i = 0; i < n; i++) {
    size_t at = r->off;
    uint64_t seq = skip_record(r);
    if (seq > durable) add(w, view, seq, r->p + at, r->off - at);
  }
  w->view = view;
  w->block_ns = mc_now_ns();
  if (view != w->pruned_view || durable != w->pruned_durable) { /* one scan per step of durable_seq, not per put */
    for (size_t i = 0; i < w->n;)
      if (w->v[i]->view == view && w->v[i]->seq <= durable) drop_at(w, i);
      else i++;
    w->pruned_view = view;
    w->pruned_durable = durable;
  }
  void (*wake)(void *) = was_empty && w->n ? w->on_pending : NULL;
  void *arg = w->arg;
  pthread_mutex_unlock(&w->mu);
  if (wake) wake(arg);
  return view;
}

void mc_witness_take(struct mc_witnesses *w, struct mc_rbuf_rd *r) {
  if (w) take_block(w, r);
}

size_t mc_witness_count(struct mc_witnesses *w) {
  if (!w) return 0;
  pthread_mutex_lock(&w->mu);
  size_t n = w->n;
  pthread_mutex_unlock(&w->mu);
  return n;
}

uint64_t mc_witness_given_up(struct mc_witnesses *w) {
  if (!w) return 0;
  pthread_mutex_lock(&w->mu);
  uint64_t n = w->given_up;
  pthread_mutex_unlock(&w->mu);
  return n;
}

int mc_witness_pending(struct mc_witnesses *w) { return mc_witness_count(w) > 0; }

uint64_t mc_witness_tick_ns(void) { return TICK_NS; }

static int by_seq(const void *a, const void *b) {
  uint64_t x = (*(struct wit *const *)a)->seq, y = (*(struct wit *const *)b)->seq;
  return x < y ? -1 : x > y;
}

/* One RECOMMIT of up to RECOMMIT_BATCH witnesses of master `view` (copied out under mu). */
static int recommit_view(struct mcli *c, struct mc_uuid id, uint64_t view) {
  struct mc_witnesses *w = c->wit;
  struct mc_wbuf req = {0};
  uint64_t *seqs = mc_malloc(sizeof(*seqs) * RECOMMIT_BATCH);
  uint32_t n = 0;
  mc_put_uuid(&req, id);
  mc_w_u64(&req, view);
  size_t count_at = req.len;
  mc_w_u32(&req, 0);
  pthread_mutex_lock(&w->mu);
  /* oldest first: a put and the removal of the same object, both witnessed here, go in the order they
   * happened (the master also guards against the other order across writers) */
  struct wit **pick = mc_malloc(sizeof(*pick) * (w->n ? w->n : 1));
  size_t np = 0;
  for (size_t i = 0; i < w->n; i++)
    if (w->v[i]->view == view) pick[np++] = w->v[i];
  qsort(pick, np, sizeof(*pick), by_seq);
  for (size_t i = 0; i < np && n < RECOMMIT_BATCH; i++) {
    mc_w_bytes_raw(&req, pick[i]->rec, pick[i]->len);
    seqs[n++] = pick[i]->seq;
  }
  pthread_mutex_unlock(&w->mu);
  mc_free(pick);
  mc_le_put32(req.p + count_at, n);
  struct mc_wbuf rep = {0};
  int rc = n ? mcli_call(c, MC_OP_RECOMMIT, &req, &rep, RECOMMIT_TMO_MS) : 0;
  mc_w_free(&req);
  if (!n || rc) {
    mc_w_free(&rep);
    mc_free(seqs);
    return rc;
  }
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep.p, rep.len);
  uint32_t cnt = mc_r_count(&r, 4);
  int32_t *st = mc_malloc(sizeof(*st) * (n ? n : 1));
  for (uint32_t i = 0; i < cnt && i < n; i++) st[i] = mc_r_i32(&r);
  if (cnt != n) r.err = 1;
  uint64_t now_view = r.err ? 0 : take_block(w, &r); /* the new witnesses of what it installed */
  uint64_t now = mc_now_ns();
  pthread_mutex_lock(&w->mu);
  uint32_t installed = 0, known = 0, refused = 0;
  for (uint32_t k = 0; k < n && now_view; k++) {
    size_t i = 0;
    while (i < w->n && !(w->v[i]->view == view && w->v[i]->seq == seqs[k])) i++;
    if (i == w->n) continue;
    struct wit *x = w->v[i];
    int s = st[k];
    if (s == MC_RECOMMIT_KNOWN && now_view == view) continue; /* its own master: durable in time */
    if (s == MC_SEGMENT_NOT_FOUND || s == MC_UNAVAILABLE_IN_CURRENT_STATUS) { /* not yet */
      if (!x->sent_ns) x->sent_ns = now;
      if (now - x->sent_ns < GIVE_UP_NS) continue;
    }
    if (s == 0) installed++;
    else if (s == MC_RECOMMIT_KNOWN) known++;
    else refused++, w->given_up++;
    drop_at(w, i);
  }
  pthread_mutex_unlock(&w->mu);
  if (installed || refused)
    LOG_INFO("witnesses of master %llu handed to master %llu: %u installed, %u known to their holders, %u given up",
             (unsigned long long)view, (unsigned long long)now_view, installed, known, refused);
  if (r.err) LOG_WARN_LIMITED("witnesses: a RECOMMIT answer does not decode");
  mc_free(st);
  mc_free(seqs);
  mc_w_free(&rep);
  return r.err ? MC_RPC_FAIL : 0;
}

void mc_witness_tick(struct mcli *c, struct mc_uuid id, int force) {
  struct mc_witnesses *w = c->wit;
  uint64_t views[8];
  size_t nv = 0;
  pthread_mutex_lock(&w->mu);
  /* witnesses of the master the replies come from are pruned by those replies while they come */
  int quiet = force || mc_now_ns() - w->block_ns >= TICK_NS;
  for (size_t i = 0; i < w->n && nv < 8; i++) {
    if (!quiet && w->v[i]->view == w->view) continue;
    size_t k = 0;
    while (k < nv && views[k] != w->v[i]->view) k++;
    if (k == nv) views[nv++] = w->v[i]->view;
  }
  pthread_mutex_unlock(&w->mu);
  for (size_t k = 0; k < nv; k++)
    if (recommit_view(c, id, views[k])) break; /* the master does not answer: next tick */
}
