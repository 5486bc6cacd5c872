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

/* Witnesses are kept as the blocks the replies brought them in: one allocation per block, its records'
 * bytes copied in one piece, and a record dropped by marking it. A writer that puts in batches gets one
 * block per batch and prunes it whole once durable_seq passes its newest record, so keeping them costs one
 * copy per reply, not per record. Pruned blocks are kept for reuse (up to POOL_MAX blocks of at most
 * POOL_BYTES each, POOL_TOTAL bytes in all): a writer's blocks live for a few milliseconds each, and
 * handing them back to malloc made its heap's top shrink and grow under a stream of batched puts, every new
 * block a run of page faults (tens of microseconds each in a virtual machine; a removal of 8192 keys brings
 * a block of ~900 KiB, which malloc maps and unmaps afresh every time). */
#define POOL_MAX 128
#define POOL_BYTES (2u << 20)
#define POOL_TOTAL (8u << 20)
struct rec {
  uint64_t seq, sent_ns; /* sent_ns: first sent to a master other than its own, 0 not yet */
  uint32_t off, len;     /* in the block's data */
  uint8_t live;
};
struct block {
  size_t size; /* of this allocation */
  uint64_t view, max_seq;
  uint32_t n, live;
  struct rec *r;  /* n records, in this allocation */
  uint8_t *data; /* their bytes as the master sent them (master_core/holder_feed.h layout) */
};

struct mc_witnesses {
  pthread_mutex_t mu;
  struct block **b; /* in arrival order */
  size_t nb, capb;
  struct block *pool[POOL_MAX]; /* pruned blocks kept for reuse */
  size_t npool, pool_bytes;
  size_t live;       /* records kept */
  uint64_t view;     /* the master heard from last */
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
  for (size_t i = 0; i < w->nb; i++) mc_free(w->b[i]);
  for (size_t i = 0; i < w->npool; i++) mc_free(w->pool[i]);
  mc_free(w->b);
  pthread_mutex_destroy(&w->mu);
  mc_free(w);
}

/* Drops record i of block x (mu held); the block goes at the next compact once none is left. */
static void drop_rec(struct mc_witnesses *w, struct block *x, uint32_t i) {
  if (!x->r[i].live) return;
  x->r[i].live = 0;
  x->live--;
  w->live--;
}

/* A block no longer used goes to the pool, or is freed (mu held). */
static void put_back(struct mc_witnesses *w, struct block *x) {
  if (x->size <= POOL_BYTES && w->npool < POOL_MAX && w->pool_bytes + x->size <= POOL_TOTAL) {
    w->pool[w->npool++] = x;
    w->pool_bytes += x->size;
  } else {
    mc_free(x);
  }
}

/* A block of at least size bytes: a pooled one when one is large enough (mu held), else a new one. */
static struct block *get_block(struct mc_witnesses *w, size_t size) {
  for (size_t i = w->npool; i-- > 0;)
    if (w->pool[i]->size >= size) {
      struct block *x = w->pool[i];
      w->pool[i] = w->pool[--w->npool];
      w->pool_bytes -= x->size;
      return x;
    }
  if (size <= POOL_BYTES && size < POOL_BYTES / 4) size = MC_MIN(POOL_BYTES, 2 * size); /* room to be reused */
  struct block *x = mc_malloc(size);
  x->size = size;
  return x;
}

/* Releases the blocks with no record left, keeping the order of the others (mu held). */
static void compact(struct mc_witnesses *w) {
  size_t k = 0;
  for (size_t i = 0; i < w->nb; i++)
    if (w->b[i]->live) w->b[k++] = w->b[i];
    else put_back(w, w->b[i]);
  w->nb = k;
}

/* Past MC_WITNESS_MAX the oldest are given up, logged: a writer whose master never makes records durable
 * must not grow without bound (mu held). */
static void cap(struct mc_witnesses *w) {
  if (w->live <= MC_WITNESS_MAX) return;
  for (size_t i = 0; i < w->nb && w->live > MC_WITNESS_MAX; i++)
    for (uint32_t j = 0; j < w->b[i]->n && w->live > MC_WITNESS_MAX; j++)
      if (w->b[i]->r[j].live) {
        drop_rec(w, w->b[i], j);
        w->given_up++;
      }
  compact(w);
  LOG_WARN_LIMITED("witnesses: %d pending (the master is not making them durable); the oldest are given up",
                   MC_WITNESS_MAX);
}

/* Skips one record (master_core/holder_feed.h layout) and returns its seq; r->err when it does not decode. Past the
 * key, a record has a fixed part: segment (16), offset, length, size (3 x 8), hard pin (1), soft-pin TTL (8),
 * then a key group only when its kind has MC_HIDX_GROUPED. */
#define REC_TAIL (16 + 3 * 8 + 1 + 8)
static uint64_t skip_record(struct mc_rbuf_rd *r) {
  uint64_t seq = mc_r_u64(r);
  uint8_t kind = mc_r_u8(r);
  uint32_t kl;
  mc_r_blob(r, &kl);
  mc_r_take(r, REC_TAIL);
  if (kind & MC_HIDX_GROUPED) mc_r_blob(r, &kl); /* the key group (re-sent as it came) */
  return seq;
}

/* Reads a witness block at r (absent when the body ends: a master without witnesses) and takes its
 * records in; prunes what its durable_seq covers. Returns the block's view_version, 0 when absent or
 * malformed. mu not held. */
static uint64_t take_block(struct mc_witnesses *w, struct mc_rbuf_rd *r) {
  if (r->err || r->len - r->off < 20) return 0;
  uint64_t view = mc_r_u64(r), durable = mc_r_u64(r);
  uint32_t n = mc_r_count(r, 8 + 1 + 4 + REC_TAIL);
  /* one pass and one allocation: the block, its records' places, their bytes (at most what is left of the
   * body: n is bounded by it too); the whole block decodes, or nothing of it is used */
  struct block *x = NULL;
  if (n && !r->err) {
    size_t left = r->len - r->off, base = r->off;
    pthread_mutex_lock(&w->mu);
    x = get_block(w, sizeof(*x) + sizeof(struct rec) * n + left);
    pthread_mutex_unlock(&w->mu);
    *x = (struct block){.size = x->size, .view = view, .n = n};
    x->r = (struct rec *)(x + 1);
    x->data = (uint8_t *)(x->r + n);
    for (uint32_t i = 0; i < n && !r->err; i++) {
      size_t at = r->off;
      uint64_t seq = skip_record(r);
      x->r[i] = (struct rec){.seq = seq, .off = (uint32_t)(at - base), .len = (uint32_t)(r->off - at), .live = seq > durable};
      x->live += seq > durable;
      if (seq > x->max_seq) x->max_seq = seq;
    }
    if (!r->err && x->live) {
      memcpy(x->data, r->p + base, r->off - base);
    } else {
      pthread_mutex_lock(&w->mu);
      put_back(w, x);
      pthread_mutex_unlock(&w->mu);
      x = NULL;
    }
  }
  if (r->err) {
    LOG_WARN_LIMITED("witnesses: a witness block does not decode; it is ignored");
    return 0;
  }
  pthread_mutex_lock(&w->mu);
  int was_empty = w->live == 0;
  if (x) {
    if (w->nb == w->capb) {
      w->capb = w->capb ? 2 * w->capb : 64;
      w->b = mc_realloc(w->b, sizeof(*w->b) * w->capb);
    }
    w->b[w->nb++] = x;
    w->live += x->live;
  }
  w->view = view;
  w->block_ns = mc_now_ns();
  if (view != w->pruned_view || durable != w->pruned_durable) { /* one scan per step of durable_seq, not per put */
    for (size_t i = 0; i < w->nb; i++) {
      struct block *y = w->b[i];
      if (y->view != view || y == x) continue;
      if (y->max_seq <= durable) { /* the whole block: the common case, one step per reply */
        w->live -= y->live;
        y->live = 0;
        continue;
      }
      for (uint32_t j = 0; j < y->n && y->live; j++)
        if (y->r[j].seq <= durable) drop_rec(w, y, j);
    }
    compact(w);
    w->pruned_view = view;
    w->pruned_durable = durable;
  }
  cap(w);
  void (*wake)(void *) = was_empty && w->live ? w->on_pending : NULL;
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
  size_t n = w->live;
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

/* A live record of the set (mu held while used). */
struct pick {
  uint64_t seq;
  struct block *b;
  uint32_t i;
};

static int by_seq(const void *a, const void *b) {
  uint64_t x = ((const struct pick *)a)->seq, y = ((const struct pick *)b)->seq;
  return x < y ? -1 : x > y;
}

/* The live records of master view, oldest first (mu held); *np of them. */
static struct pick *picks_of(struct mc_witnesses *w, uint64_t view, size_t *np) {
  struct pick *p = mc_malloc(sizeof(*p) * (w->live ? w->live : 1));
  size_t n = 0;
  for (size_t i = 0; i < w->nb; i++)
    if (w->b[i]->view == view)
      for (uint32_t j = 0; j < w->b[i]->n; j++)
        if (w->b[i]->r[j].live) p[n++] = (struct pick){w->b[i]->r[j].seq, w->b[i], j};
  qsort(p, n, sizeof(*p), by_seq);
  *np = n;
  return p;
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
  size_t np;
  struct pick *pick = picks_of(w, view, &np);
  for (size_t i = 0; i < np && n < RECOMMIT_BATCH; i++) {
    const struct rec *x = &pick[i].b->r[pick[i].i];
    mc_w_bytes_raw(&req, pick[i].b->data + x->off, x->len);
    seqs[n++] = x->seq;
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
  pick = now_view ? picks_of(w, view, &np) : NULL; /* again: the set may have changed meanwhile */
  for (uint32_t k = 0, at = 0; k < n && now_view; k++) { /* both in seq order: one merge walk */
    while (at < np && pick[at].seq < seqs[k]) at++;
    if (at == np || pick[at].seq != seqs[k]) continue;
    struct rec *x = &pick[at].b->r[pick[at].i];
    int s = st[k];
    if (s == MC_RECOMMIT_KNOWN && now_view == view) continue; /* its own master: durable in time */
    if (s == MC_SEGMENT_NOT_FOUND || s == MC_UNAVAILABLE_IN_CURRENT_STATUS) { /* not yet */
      if (!x->sent_ns) x->sent_ns = now;
      if (now - x->sent_ns < GIVE_UP_NS) continue;
    }
    if (s == 0) installed++;
    else if (s == MC_RECOMMIT_KNOWN) known++;
    else refused++, w->given_up++;
    drop_rec(w, pick[at].b, pick[at].i);
  }
  compact(w);
  pthread_mutex_unlock(&w->mu);
  mc_free(pick);
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
  for (size_t i = 0; i < w->nb && nv < 8; i++) {
    if (!quiet && w->b[i]->view == w->view) continue;
    size_t k = 0;
    while (k < nv && views[k] != w->b[i]->view) k++;
    if (k == nv) views[nv++] = w->b[i]->view;
  }
  pthread_mutex_unlock(&w->mu);
  for (size_t k = 0; k < nv; k++)
    if (recommit_view(c, id, views[k])) break; /* the master does not answer: next tick */
}
