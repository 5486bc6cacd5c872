/* mc_p2p_get_replica (docs/p2p-store.md, "Fetching"): every shard split into stripes, each stripe read from
 * the least-busy live holder that has it by a pool of workers, each stripe checked against its CRC-32 on
 * arrival (a record without stripe CRCs: each shard once complete); finished shards and the verified
 * stripes of unfinished ones advertised while the fetch runs; holders that fail or serve wrong bytes are
 * excluded; a failed fetch leaves what arrived for the next attempt (resume). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/metadata.h"
#include "mooncake/p2p_store.h"
#include "mooncake/transfer_engine.h"
#include "p2p/record.h"
#include "p2p/store_internal.h"

#define STRIPE P2P_STRIPE /* (a record without stripe_size) */
#define WORKERS 8
#define ADVERTISE_MS 200
#define WAIT_MS 120000 /* one stripe's READ (the engine fails a stalled one long before) */
#define MAX_SOURCES 4096 /* distinct holders one fetch considers (a hostile record may name millions) */
#define SCAN_SHARDS 64 /* shards next_stripe compares */
#define STRIKES 3 /* failed READs after which a holder is excluded for this fetch */
#define MAX_PARTIALS 64 /* failed fetches remembered for a resume */
#define GOLD_CAP 2 /* stripes in flight from producers while others can serve, or until alone (next_stripe) */
#define MAX_PARTS 64 /* partial holders of a shard one fetch considers */
#define RAMP_MS 1000 /* a fetch alone this long after its first stripe uses every worker on producers */

/* A holder of this fetch (one per segment name). */
struct src {
  char seg[P2P_MAX_SEGMENT + 1];
  segment_id_t id;
  int opened, excluded, inflight, fails;
};

struct sh_holder {
  size_t src;
  uint64_t off;
  int gold;
  uint8_t *bits; /* a partial holder: the stripes it advertised (malloc'ed); NULL: it holds the whole shard */
  int seen;      /* a partial holder: in the record last read (merge_holders) */
};

struct fshard {
  uint64_t addr, size;
  uint32_t crc;
  int has_crc;
  uint32_t *scrc;   /* per stripe: its CRC-32 (malloc'ed), NULL when the record has none for this shard */
  size_t nstripes, done, inflight;
  uint8_t *state;   /* per stripe: 0 to do, 1 in flight, 2 landed (verified when scrc) */
  uint8_t *avail;   /* per stripe: 1 when a live holder that is not a producer has it (refresh_avail) */
  uint8_t *gold_read; /* per stripe: 1 when this fetch read it (or reads it) from a producer */
  size_t *served;   /* per stripe: the src that served it */
  struct sh_holder *h;
  size_t nh, nparts;
  size_t origin;    /* where this fetch's scan of its stripes starts (at random: consumers differ) */
  int complete, verifying;
  int failed;       /* no holder left: the fetch fails, after reading what the other shards need */
  int gold_begun;   /* this fetch has read a stripe of it from a producer */
};

struct fetch {
  struct mc_p2p_store *s;
  struct p2p_payload *p; /* in the catalog (pending) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct fshard *sh;
  size_t nsh, left, start, inflight, gold_inflight;
  size_t workers; /* alive */
  struct src *src;
  size_t nsrc;
  int err, newly;
  int64_t first_landed; /* when the first stripe arrived (ms since the epoch; 0: none yet) */
  int ramped; /* RAMP_MS went by since first_landed: the others starting at once are known */
  int others; /* the record last read names a holder other than a producer: this fetch is not alone */
  int copy; /* mc_p2p_get_copy: nothing is advertised, the node never becomes a holder */
  unsigned seed;
  uint64_t stripe;        /* the stripe size: the record's stripe_size, else STRIPE */
  uint64_t rec_stripe;    /* the record's stripe_size (0: none); a later record with another is not merged */
};

/* ---- holders ---- */

/* The index of seg among f's holders, added when new; -1 when MAX_SOURCES are known already. */
static long src_index(struct fetch *f, const char *seg) {
  for (size_t i = 0; i < f->nsrc; i++)
    if (!strcmp(f->src[i].seg, seg)) return (long)i;
  if (f->nsrc >= MAX_SOURCES) return -1;
  f->src = mc_realloc(f->src, (f->nsrc + 1) * sizeof(*f->src));
  memset(&f->src[f->nsrc], 0, sizeof(*f->src));
  strcpy(f->src[f->nsrc].seg, seg);
  return (long)f->nsrc++;
}

static int has_bit(const uint8_t *bits, size_t k) { return bits[k / 8] >> (k % 8) & 1; }

/* A holder of x (bits: a partial one's bitmap, NULL for a whole-shard holder): added, or its entry updated (a
 * partial holder that became whole loses its bitmap; a whole one never becomes partial again). */
static void add_holder(struct fetch *f, struct fshard *x, const struct p2p_holder *h, int gold, const uint8_t *bits) {
  long k = src_index(f, h->seg);
  f->others |= !gold;
  if (k < 0) return;
  size_t nb = p2p_bitmap_bytes(x->nstripes);
  for (size_t j = 0; j < x->nh; j++)
    if (x->h[j].src == (size_t)k) {
      struct sh_holder *e = &x->h[j];
      if (bits && !e->bits) return;
      e->off = h->offset;
      e->seen = 1;
      if (bits) {
        memcpy(e->bits, bits, nb);
      } else if (e->bits) {
        mc_free(e->bits);
        e->bits = NULL;
        x->nparts--;
      }
      return;
    }
  if (x->nh >= 2 * P2P_MAX_HOLDERS || (bits && x->nparts >= MAX_PARTS)) return;
  x->h = mc_realloc(x->h, (x->nh + 1) * sizeof(*x->h));
  x->h[x->nh++] = (struct sh_holder){(size_t)k, h->offset, gold, NULL, 1};
  if (bits) {
    x->h[x->nh - 1].bits = mc_malloc(nb);
    memcpy(x->h[x->nh - 1].bits, bits, nb);
    x->nparts++;
  }
}

/* Recomputes x->avail: the stripes a live holder other than a producer has (f->mu held). */
static void refresh_avail(const struct fetch *f, struct fshard *x) {
  memset(x->avail, 0, x->nstripes);
  for (size_t j = 0; j < x->nh; j++) {
    const struct sh_holder *e = &x->h[j];
    if (e->gold || f->src[e->src].excluded) continue;
    if (!e->bits) {
      memset(x->avail, 1, x->nstripes);
      return;
    }
    for (size_t k = 0; k < x->nstripes; k++) x->avail[k] |= has_bit(e->bits, k);
  }
}

static void refresh_all(struct fetch *f) {
  for (size_t i = 0; i < f->nsh; i++)
    if (!f->sh[i].complete) refresh_avail(f, &f->sh[i]);
}

/* Excludes holder c for the rest of this fetch (f->mu held). */
static void exclude(struct fetch *f, size_t c) {
  if (f->src[c].excluded) return;
  f->src[c].excluded = 1;
  refresh_all(f);
}

/* Takes in the live holders of r, partial ones too when r's stripes are this fetch's; a partial holder no
 * longer in r (expired, withdrawn) is dropped (f->mu held). */
static void merge_holders(struct fetch *f, const struct p2p_record *r) {
  int64_t now = p2p_wall_ms();
  f->others = 0; /* (add_holder sets it) */
  for (size_t i = 0; i < f->nsh && i < r->nshards; i++) {
    const struct p2p_shard *rs = &r->shards[i];
    struct fshard *x = &f->sh[i];
    int parts = r->stripe_size == f->rec_stripe && rs->size == x->size;
    for (size_t j = 0; parts && j < x->nh; j++) x->h[j].seen = 0;
    for (int kind = 0; kind < 3; kind++) { /* replicas, producers, partial holders */
      size_t n = kind == 0 ? rs->nrep : kind == 1 ? rs->ngold : parts ? rs->npart : 0;
      for (size_t j = 0; j < n; j++) {
        const struct p2p_holder *h = kind == 0 ? &rs->rep[j] : kind == 1 ? &rs->gold[j] : &rs->part[j].h;
        if ((!h->expires || h->expires >= now) && strcmp(h->seg, f->s->self))
          add_holder(f, x, h, kind == 1, kind == 2 ? rs->part[j].bits : NULL);
      }
    }
    size_t k = 0;
    for (size_t j = 0; j < x->nh; j++) {
      if (parts && x->h[j].bits && !x->h[j].seen) {
        mc_free(x->h[j].bits);
        x->nparts--;
      } else {
        x->h[k++] = x->h[j];
      }
    }
    x->nh = k;
  }
  refresh_all(f);
}

/* The holder for stripe k of x: fewest stripes in flight, a producer counting one more (replicas spare it),
 * ties at random; producers only when gold_ok; a partial holder only when it has the stripe. -1 when none
 * is left. */
static long pick(struct fetch *f, struct fshard *x, size_t k, int gold_ok) {
  long best = -1;
  int best_score = 0, ties = 0;
  for (size_t j = 0; j < x->nh; j++) {
    struct src *c = &f->src[x->h[j].src];
    if (c->excluded || (x->h[j].gold && !gold_ok) || (x->h[j].bits && !has_bit(x->h[j].bits, k))) continue;
    int score = 2 * c->inflight + 2 * x->h[j].gold;
    if (best < 0 || score < best_score) {
      best = (long)j, best_score = score, ties = 1;
    } else if (score == best_score && rand_r(&f->seed) % (unsigned)++ties == 0) {
      best = (long)j;
    }
  }
  return best;
}

static unsigned sources_busy(const struct fetch *f) {
  unsigned n = 0;
  for (size_t i = 0; i < f->nsrc; i++) n += f->src[i].inflight > 0;
  return n;
}

/* ---- workers ---- */

/* One READ of len bytes at off of segment id into dst: 0 or -1. */
static int read_stripe(struct mc_p2p_store *s, segment_id_t id, uint64_t off, uint64_t dst, uint64_t len) {
  batch_id_t b = allocateBatchID(s->te, 1);
  if (b == INVALID_BATCH) return -1;
  struct transfer_request rq = {.opcode = OPCODE_READ, .source = (void *)(uintptr_t)dst, .target_id = id,
                                .target_offset = off, .length = len};
  int rc = submitTransfer(s->te, b, &rq, 1);
  int st = rc ? STATUS_FAILED : mc_te_wait_batch(s->te, b, WAIT_MS);
  if (st == STATUS_WAITING) { /* (the engine's I/O timeout ends a stalled READ first) */
    LOG_WARN("p2p store: a READ is still running after %d ms: given up (its batch is left)", WAIT_MS);
    return -1;
  }
  freeBatchID(s->te, b);
  return st == STATUS_COMPLETED ? 0 : -1;
}

/* The holders of x this fetch may still use; *golds: how many of them are producers, *parts: partial. */
static size_t live_holders(const struct fetch *f, const struct fshard *x, size_t *golds, size_t *parts) {
  size_t n = 0, g = 0, p = 0;
  for (size_t j = 0; j < x->nh; j++) {
    int live = !f->src[x->h[j].src].excluded;
    n += live;
    g += live && x->h[j].gold;
    p += live && x->h[j].bits;
  }
  *golds = g, *parts = p;
  return n;
}

static int claimed(const struct fshard *x, size_t j) { return x->state[j] || x->avail[j]; }

/* 1 when a stripe of the run this fetch reads from a producer ending at stripe k of x (its last 2 * GOLD_CAP
 * + 2) was read from one by another consumer too (a live partial holder has it) whose segment name sorts
 * first: two consumers reading the same stripes from a producer in step (each sees the other's stripes only
 * once verified, behind its own front); the first keeps going, this fetch yields (gold_stripe). */
static int yields(const struct fetch *f, const struct fshard *x, size_t k) {
  size_t n = x->nstripes;
  for (size_t back = 0; back < n && back < 2 * GOLD_CAP + 2 && x->gold_read[k]; back++, k = (k + n - 1) % n) {
    if (!x->avail[k]) continue;
    for (size_t j = 0; j < x->nh; j++) {
      const struct sh_holder *e = &x->h[j];
      if (e->bits && has_bit(e->bits, k) && !f->src[e->src].excluded && strcmp(f->src[e->src].seg, f->s->self) < 0)
        return 1;
    }
  }
  return 0;
}

/* The producer-only to-do stripe of x to read from a producer (SIZE_MAX: none), *busy 1 when it is likely
 * in flight at another consumer: the stripe right after one this fetch reads from a producer (its front,
 * unless it yields); else the first from x->origin when nobody holds or reads a stripe of x; else one drawn
 * at random among those more than GOLD_CAP stripes past any stripe claimed (held or read: the others read
 * forward from what they hold; at random, so that consumers do not converge on the same one), else among
 * all (busy). */
static size_t gold_stripe(struct fetch *f, const struct fshard *x, int *busy) {
  size_t n = x->nstripes, first = SIZE_MAX, start = SIZE_MAX, pick_far = SIZE_MAX, pick_any = SIZE_MAX, len = 0;
  unsigned nfar = 0, nany = 0;
  *busy = 0;
  for (size_t q = 0; q < n; q++) {
    size_t j = (x->origin + q) % n;
    if (claimed(x, j)) {
      if (start == SIZE_MAX) start = j;
    } else if (x->gold_read[(j + n - 1) % n] && !yields(f, x, (j + n - 1) % n)) {
      return j;
    } else if (first == SIZE_MAX) {
      first = j;
    }
  }
  if (first == SIZE_MAX || start == SIZE_MAX) return first;
  for (size_t q = 1; q <= n; q++) {
    size_t j = (start + q) % n;
    len = claimed(x, j) ? 0 : len + 1;
    if (!len) continue;
    if (len > GOLD_CAP && rand_r(&f->seed) % ++nfar == 0) pick_far = j;
    if (rand_r(&f->seed) % ++nany == 0) pick_any = j;
  }
  *busy = pick_far == SIZE_MAX;
  return *busy ? pick_any : pick_far;
}

/* The next stripe to read (f->mu held): 1 with *xi, *si, *hj; 0 when nothing can start now. Among the first
 * SCAN_SHARDS shards with a stripe to read, from this fetch's starting shard on, two candidates. A stripe
 * only a producer has (no replica, no partial holder advertised it; gold_stripe picks it in its shard), of
 * the shard ranked first by: this fetch already reads it from a producer; nobody else is reading it (no
 * partial holder: drawn at random, consumers fetching at once rarely pick the same one); another consumer
 * is; the stripe is likely in flight at another consumer. And a stripe a replica or a partial holder has, of
 * a shard already begun, else of the one with the fewest holders (rarest first), ties at random. The
 * producer's stripe is taken while this fetch has fewer than GOLD_CAP stripes in flight from producers
 * (with every worker when this fetch is alone: no other holder seen RAMP_MS after its first stripe
 * arrived; consumers reading more at once from a producer would claim more stripes the others cannot see,
 * read twice, and their first stripes would land late, together); of a shard another consumer reads, only
 * when there is no other stripe, and one likely in flight there only when nothing else is in flight. A
 * stripe a replica or partial holder has is read from those only: the producer's uplink carries each byte
 * about once, the consumers' carry the rest (docs/p2p-store.md, "Fetching"). A shard whose holders are all
 * excluded fails the fetch. */
static int next_stripe(struct fetch *f, size_t *xi, size_t *si, size_t *hj) {
  long gbest = -1, rbest = -1;
  size_t gj = 0, rj = 0, gkey = SIZE_MAX, rkey = SIZE_MAX, seen = 0;
  unsigned gties = 0, rties = 0;
  for (size_t k = 0; k < f->nsh && seen < SCAN_SHARDS; k++) {
    size_t i = (f->start + k) % f->nsh;
    struct fshard *x = &f->sh[i];
    if (x->complete || x->failed || x->verifying || x->done + x->inflight == x->nstripes) continue;
    size_t golds, parts, live = live_holders(f, x, &golds, &parts);
    if (!live) { /* the call fails; the other shards are still read, so that a resume reads only this one */
      LOG_ERROR("p2p store: '%s' shard %zu: no holder left", f->p->name, i);
      f->err = MC_P2P_TOO_MANY_RETRIES;
      x->failed = 1;
      f->left--;
      continue;
    }
    seen++;
    size_t gs = SIZE_MAX, rs = SIZE_MAX; /* its first producer-only and other to-do stripe */
    for (size_t q = 0; q < x->nstripes && (gs == SIZE_MAX || rs == SIZE_MAX); q++) {
      size_t j = (x->origin + q) % x->nstripes;
      if (x->state[j]) continue;
      if (x->avail[j] && rs == SIZE_MAX) rs = j;
      if (!x->avail[j] && gs == SIZE_MAX) gs = j;
    }
    int begun = x->done + x->inflight > 0;
    int busy = 0;
    if (gs != SIZE_MAX) gs = gold_stripe(f, x, &busy);
    size_t gk = busy ? 3 : x->gold_begun ? 0 : !parts && !begun ? 1 : 2;
    for (int gold = 0; gold < 2; gold++) {
      size_t j = gold ? gs : rs;
      if (j == SIZE_MAX || (gold && !golds)) continue;
      size_t key = gold ? gk : begun ? 0 : live;
      long *best = gold ? &gbest : &rbest;
      size_t *bkey = gold ? &gkey : &rkey, *bj = gold ? &gj : &rj;
      unsigned *ties = gold ? &gties : &rties;
      if (key < *bkey) {
        *best = (long)i, *bj = j, *bkey = key, *ties = 1;
      } else if (key == *bkey && rand_r(&f->seed) % ++*ties == 0) {
        *best = (long)i, *bj = j;
      }
    }
  }
  int gold = gbest >= 0 && (gkey < 2 ? f->gold_inflight < GOLD_CAP || (rbest < 0 && f->ramped && !f->others)
                                      : rbest < 0 && f->gold_inflight < GOLD_CAP && (gkey == 2 || !f->inflight));
  if (gold) {
    *xi = (size_t)gbest, *si = gj;
  } else if (rbest >= 0) {
    *xi = (size_t)rbest, *si = rj;
  } else {
    return 0;
  }
  long h = pick(f, &f->sh[*xi], *si, gold); /* (a stripe a replica or partial holder has is read from those) */
  if (h < 0) return 0;
  *hj = (size_t)h;
  return 1;
}

/* Shard i is whole and verified: this node holds it (advertised at the next tick). */
static void complete(struct fetch *f, size_t i) {
  f->sh[i].complete = 1;
  f->left--;
  pthread_mutex_lock(&f->s->mu); /* (the catalog's copy: the renewer reads it under the store's mu) */
  f->p->have[i] = 1;
  if (f->p->bits) {
    mc_free(f->p->bits[i]);
    f->p->bits[i] = NULL;
  }
  pthread_mutex_unlock(&f->s->mu);
  f->newly = 1;
}

/* A shard whose stripes all landed: checked (without f->mu), then complete, or read again from others. */
static void verify(struct fetch *f, size_t i) {
  struct fshard *x = &f->sh[i];
  x->verifying = 1;
  pthread_mutex_unlock(&f->mu);
  int ok = !x->has_crc || (uint32_t)crc32_z(0, (const Bytef *)(uintptr_t)x->addr, x->size) == x->crc;
  pthread_mutex_lock(&f->mu);
  x->verifying = 0;
  if (ok) {
    complete(f, i);
    return;
  }
  LOG_WARN("p2p store: '%s' shard %zu: CRC-32 mismatch; its holders are excluded and it is read again", f->p->name, i);
  for (size_t j = 0; j < x->nstripes; j++) {
    f->src[x->served[j]].excluded = 1;
    x->state[j] = 0;
    x->gold_read[j] = 0;
  }
  x->done = 0;
  refresh_all(f);
}

/* Stripe j of shard i arrived verified (its stripe CRC): advertised as a partial holder at the next tick. */
static void stripe_verified(struct fetch *f, size_t i, size_t j) {
  struct fshard *x = &f->sh[i];
  if (x->done == x->nstripes) {
    complete(f, i); /* (the stripe CRCs combine to the shard's: checked when the record was decoded) */
    return;
  }
  pthread_mutex_lock(&f->s->mu);
  if (f->p->bits && f->p->bits[i]) f->p->bits[i][j / 8] |= (uint8_t)(1u << (j % 8));
  pthread_mutex_unlock(&f->s->mu);
  f->newly = 1;
}

static void *worker_main(void *arg) {
  mc_thread_name("mc-p2p-fetch");
  struct fetch *f = arg;
  struct mc_p2p_store *s = f->s;
  pthread_mutex_lock(&f->mu);
  for (;;) {
    size_t i, j, hj;
    if (!f->left) break;
    if (!next_stripe(f, &i, &j, &hj)) {
      if (!f->inflight || !f->left) break; /* (nothing in flight could make work appear) */
      pthread_cond_wait(&f->cv, &f->mu);
      continue;
    }
    struct fshard *x = &f->sh[i];
    struct sh_holder h = x->h[hj];
    struct src *c = &f->src[h.src];
    x->state[j] = 1;
    x->inflight++;
    x->gold_begun |= h.gold;
    x->gold_read[j] = (uint8_t)h.gold;
    c->inflight++;
    f->inflight++;
    f->gold_inflight += h.gold;
    atomic_store(&s->sources_in_use, sources_busy(f));
    char seg[P2P_MAX_SEGMENT + 1];
    strcpy(seg, c->seg);
    int opened = c->opened;
    segment_id_t id = c->id;
    pthread_mutex_unlock(&f->mu);
    if (!opened) id = openSegment(s->te, seg);
    uint64_t off = (uint64_t)j * f->stripe, len = p2p_stripe_len(x->size, f->stripe, j);
    int rc = id < 0 ? -1 : read_stripe(s, id, h.off + off, x->addr + off, len);
    /* (x->scrc and x->addr never change; the stripe's bytes are this worker's until it is marked) */
    int bad = !rc && x->scrc && (uint32_t)crc32_z(0, (const Bytef *)(uintptr_t)(x->addr + off), len) != x->scrc[j];
    pthread_mutex_lock(&f->mu);
    c = &f->src[h.src]; /* (src may have moved: merge_holders reallocates) */
    if (!opened && id >= 0) c->opened = 1, c->id = id;
    c->inflight--;
    x->inflight--;
    f->inflight--;
    f->gold_inflight -= h.gold;
    if (rc) { /* a segment that cannot be opened is excluded at once, a failing READ after STRIKES */
      c->fails = id < 0 ? STRIKES : c->fails + 1;
      if (!c->excluded && c->fails >= STRIKES)
        LOG_WARN("p2p store: '%s': holder %s failed (%s); excluded for this fetch", f->p->name, seg,
                 id < 0 ? "its segment cannot be opened" : "READs failed");
      if (c->fails >= STRIKES) exclude(f, h.src);
      x->state[j] = 0;
      x->gold_read[j] = 0;
    } else if (bad) { /* wrong bytes: the holder that served them is excluded, the stripe read again */
      LOG_WARN("p2p store: '%s' shard %zu stripe %zu: CRC-32 mismatch; holder %s excluded for this fetch",
               f->p->name, i, j, seg);
      atomic_fetch_add(&s->bytes_done, len);
      exclude(f, h.src);
      x->state[j] = 0;
      x->gold_read[j] = 0;
    } else {
      x->state[j] = 2;
      x->served[j] = h.src;
      if (!f->first_landed) f->first_landed = p2p_wall_ms();
      atomic_fetch_add(&s->bytes_done, len);
      ++x->done;
      if (x->scrc)
        stripe_verified(f, i, j);
      else if (x->done == x->nstripes)
        verify(f, i);
    }
    atomic_store(&s->sources_in_use, sources_busy(f));
    pthread_cond_broadcast(&f->cv);
  }
  f->workers--;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* ---- the call ---- */

/* The shards of a previous failed attempt at name into the same buffers, checked again (resume); with all,
 * every shard is checked (the destination may hold a previous process's bytes). */
static void take_partial(struct mc_p2p_store *s, struct fetch *f, int all) {
  struct p2p_payload *old = NULL;
  pthread_mutex_lock(&s->mu);
  for (struct p2p_partial **q = &s->partials; *q; q = &(*q)->next) {
    struct p2p_partial *e = *q;
    if (strcmp(e->name, f->p->name)) continue;
    *q = e->next;
    old = e->p;
    mc_free(e->name);
    mc_free(e);
    break;
  }
  pthread_mutex_unlock(&s->mu);
  if (!old && !all) return;
  int same = all || old->nshards == f->nsh;
  for (size_t i = 0; !all && same && i < f->nsh; i++)
    same = old->shard_addr[i] == f->sh[i].addr && old->shard_size[i] == f->sh[i].size;
  size_t kept = 0, stripes = 0;
  for (size_t i = 0; same && i < f->nsh; i++) {
    struct fshard *x = &f->sh[i];
    const uint8_t *had = !all && old->bits && old->stripe == f->rec_stripe ? old->bits[i] : NULL; /* (same layout) */
    if (x->scrc && (all || old->have[i] || had)) { /* stripe by stripe: the verified ones of a shard begun too */
      for (size_t j = 0; j < x->nstripes; j++) {
        uint64_t off = (uint64_t)j * f->stripe, len = p2p_stripe_len(x->size, f->stripe, j);
        if ((!all && !old->have[i] && !has_bit(had, j)) ||
            (uint32_t)crc32_z(0, (const Bytef *)(uintptr_t)(x->addr + off), len) != x->scrc[j])
          continue;
        x->state[j] = 2;
        x->done++;
        stripes++;
        stripe_verified(f, i, j);
      }
      kept += x->complete;
      continue;
    }
    if ((!all && !old->have[i]) || !x->has_crc || (uint32_t)crc32_z(0, (const Bytef *)(uintptr_t)x->addr, x->size) != x->crc)
      continue;
    complete(f, i);
    kept++;
  }
  if (same)
    LOG_INFO("p2p store: '%s': resuming with %zu of %zu shards already here (%zu stripes checked right)", f->p->name,
             kept, f->nsh, stripes);
  p2p_payload_free(old);
}

/* Keeps what arrived of a failed fetch for the next attempt. */
static void keep_partial(struct mc_p2p_store *s, struct p2p_payload *p) {
  struct p2p_partial *e = mc_calloc(1, sizeof(*e));
  e->name = mc_strdup(p->name);
  pthread_mutex_lock(&s->mu);
  e->p = p2p_snapshot(p);
  e->next = s->partials;
  s->partials = e;
  size_t n = 0; /* the newest MAX_PARTIALS are kept */
  for (struct p2p_partial **q = &s->partials; *q; q = &(*q)->next)
    if (++n == MAX_PARTIALS) {
      p2p_partials_free((*q)->next);
      (*q)->next = NULL;
      break;
    }
  pthread_mutex_unlock(&s->mu);
}

/* Advertises newly finished shards and takes in new holders, every ADVERTISE_MS until the workers end. */
static void advertise_loop(struct fetch *f) {
  pthread_mutex_lock(&f->mu);
  while (f->left && f->workers) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long ns = until.tv_nsec + ADVERTISE_MS * 1000000L;
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&f->cv, &f->mu, &until);
    if (!f->left || !f->workers) break;
    int newly = f->newly;
    f->newly = 0;
    pthread_mutex_unlock(&f->mu);
    if (newly && !f->copy) {
      pthread_mutex_lock(&f->s->mu);
      struct p2p_payload *snap = p2p_snapshot(f->p);
      pthread_mutex_unlock(&f->s->mu);
      p2p_publish(f->s, snap);
      p2p_payload_free(snap);
    }
    char *key = p2p_key(f->p->name), *text = NULL;
    uint64_t rev;
    struct p2p_record r;
    const char *why;
    int got = !mc_meta_get_rev(f->s->meta, key, &text, &rev) && !p2p_record_decode(text, f->p->name, &r, &why);
    mc_free(key);
    mc_free(text);
    pthread_mutex_lock(&f->mu);
    if (got) {
      if (r.nshards == f->nsh) merge_holders(f, &r);
      f->ramped |= f->first_landed && p2p_wall_ms() - f->first_landed >= RAMP_MS;
      p2p_record_free(&r);
      pthread_cond_broadcast(&f->cv);
    }
  }
  pthread_mutex_unlock(&f->mu);
}

/* Checks the destination against the record and sets up f. 0 or MC_P2P_INVALID_ARGUMENT. */
static int setup(struct fetch *f, const struct p2p_record *r, const size_t *sizes, size_t n) {
  if (n != r->nsize) return MC_P2P_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; i++)
    if (sizes[i] != r->size_list[i]) return MC_P2P_INVALID_ARGUMENT;
  if (f->p->nshards != r->nshards) return MC_P2P_INVALID_ARGUMENT;
  f->nsh = f->left = r->nshards;
  f->sh = mc_calloc(f->nsh, sizeof(*f->sh));
  f->rec_stripe = r->stripe_size;
  f->stripe = r->stripe_size ? r->stripe_size : STRIPE;
  if (r->stripe_size && !f->copy) { /* (a copy is never advertised, not even in part) */
    f->p->stripe = r->stripe_size;
    f->p->bits = mc_calloc(f->nsh + 1, sizeof(uint8_t *));
  }
  for (size_t i = 0; i < f->nsh; i++) {
    struct fshard *x = &f->sh[i];
    const struct p2p_shard *rs = &r->shards[i];
    x->addr = f->p->shard_addr[i];
    x->size = rs->size;
    x->crc = rs->crc;
    x->has_crc = rs->has_crc;
    x->nstripes = p2p_stripes(x->size, f->stripe);
    x->state = mc_calloc(x->nstripes, 1);
    x->avail = mc_calloc(x->nstripes, 1);
    x->gold_read = mc_calloc(x->nstripes, 1);
    x->served = mc_calloc(x->nstripes, sizeof(size_t));
    x->origin = (size_t)rand_r(&f->seed) % x->nstripes;
    if (rs->stripe_crc) {
      x->scrc = mc_malloc(x->nstripes * sizeof(uint32_t));
      memcpy(x->scrc, rs->stripe_crc, x->nstripes * sizeof(uint32_t));
      if (f->p->bits) f->p->bits[i] = mc_calloc(p2p_bitmap_bytes(x->nstripes), 1);
    }
  }
  merge_holders(f, r);
  f->start = f->nsh ? (size_t)rand_r(&f->seed) % f->nsh : 0; /* consumers start at different shards */
  return 0;
}

static void fetch_free(struct fetch *f) {
  for (size_t i = 0; i < f->nsh; i++) {
    mc_free(f->sh[i].state);
    mc_free(f->sh[i].avail);
    mc_free(f->sh[i].gold_read);
    mc_free(f->sh[i].served);
    mc_free(f->sh[i].scrc);
    for (size_t j = 0; j < f->sh[i].nh; j++) mc_free(f->sh[i].h[j].bits);
    mc_free(f->sh[i].h);
  }
  mc_free(f->sh);
  mc_free(f->src);
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
}

/* Runs the workers and the advertiser. 0 or the fetch's error. */
static int run(struct fetch *f) {
  size_t stripes = 0;
  for (size_t i = 0; i < f->nsh; i++) stripes += f->sh[i].complete ? 0 : f->sh[i].nstripes;
  size_t nw = stripes < WORKERS ? stripes : WORKERS;
  pthread_t th[WORKERS];
  size_t started = 0;
  f->workers = nw; /* (before any starts: one that ends at once must not see 0 early) */
  for (; started < nw; started++)
    if (pthread_create(&th[started], NULL, worker_main, f)) break;
  pthread_mutex_lock(&f->mu);
  f->workers -= nw - started;
  pthread_mutex_unlock(&f->mu);
  if (nw && !started) return MC_P2P_TRANSFER_ENGINE;
  advertise_loop(f);
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  atomic_store(&f->s->sources_in_use, 0);
  return f->err ? f->err : f->left ? MC_P2P_TOO_MANY_RETRIES : 0;
}

/* resume_all: every shard of the destination is checked first (mc_p2p_get_replica_resume); copy: the
 * destination is never advertised nor held, and stays out of the catalog (the renewer publishes what is in
 * it) (mc_p2p_get_copy). */
static int get_replica(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n,
                       int resume_all, int copy) {
  if (!s || !p2p_name_ok(name) || p2p_check_buffers(addrs, sizes, n)) return MC_P2P_INVALID_ARGUMENT;
  char *key = p2p_key(name), *text = NULL;
  uint64_t rev;
  int g = mc_meta_get_rev(s->meta, key, &text, &rev);
  struct p2p_record r;
  const char *why = "";
  if (!g && p2p_record_decode(text, name, &r, &why)) {
    LOG_WARN("p2p store: the record %s is unusable (%s): treated as absent", key, why);
    g = MC_META_NOT_FOUND;
  }
  mc_free(key);
  mc_free(text);
  if (g) return g == MC_META_NOT_FOUND ? MC_P2P_PAYLOAD_NOT_FOUND : MC_P2P_METADATA;
  struct p2p_payload *p = p2p_payload_new(name, 0, addrs, sizes, n, r.max_shard);
  struct fetch f = {.s = s, .p = p, .copy = copy, .seed = s->seed ^ (unsigned)p2p_wall_ms()};
  pthread_mutex_init(&f.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&f.cv, &ca);
  pthread_condattr_destroy(&ca);
  int rc = setup(&f, &r, sizes, n);
  p2p_record_free(&r);
  pthread_mutex_lock(&s->mu);
  if (!rc && !copy && p2p_find(s, name)) rc = MC_P2P_PAYLOAD_OPENED;
  if (!rc && !copy) {
    p->pending = 1;
    p->next = s->payloads;
    s->payloads = p;
  }
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    fetch_free(&f);
    p2p_payload_free(p);
    return rc;
  }
  int64_t t0 = p2p_wall_ms();
  rc = p2p_mem_acquire(s, p->addrs, p->sizes, n, "cpu:0");
  int acquired = !rc;
  int64_t t1 = p2p_wall_ms(), t2 = t1;
  if (!rc) {
    take_partial(s, &f, resume_all);
    rc = run(&f);
    t2 = p2p_wall_ms();
  }
  if (!rc && !copy) { /* every shard: this node is a replica of all of it now */
    pthread_mutex_lock(&s->mu);
    struct p2p_payload *snap = p2p_snapshot(p);
    pthread_mutex_unlock(&s->mu);
    rc = p2p_publish(s, snap);
    p2p_payload_free(snap);
  }
  LOG_INFO("p2p store: '%s': %zu shards; registering the destination %lld ms, reading %lld ms, publishing %lld ms",
           name, f.nsh, (long long)(t1 - t0), (long long)(t2 - t1), (long long)(p2p_wall_ms() - t2));
  if (!copy) {
    pthread_mutex_lock(&s->mu);
    if (rc) p2p_unlink(s, p);
    p->pending = 0;
    pthread_mutex_unlock(&s->mu);
  }
  if (rc || copy) {
    if (rc) LOG_ERROR("p2p store: fetching '%s' failed: %s", name, mc_p2p_strerror(rc));
    if (rc && !copy) p2p_withdraw(s, name, 0);
    if (acquired) {
      if (rc) keep_partial(s, p);
      p2p_mem_release(s, p->addrs, p->sizes, n);
    }
    p2p_payload_free(p);
  }
  fetch_free(&f);
  return rc;
}

int mc_p2p_get_replica(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n) {
  return get_replica(s, name, addrs, sizes, n, 0, 0);
}

int mc_p2p_get_replica_resume(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes,
                              size_t n) {
  return get_replica(s, name, addrs, sizes, n, 1, 0);
}

int mc_p2p_get_copy(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n) {
  return get_replica(s, name, addrs, sizes, n, 0, 1);
}
