/* The holder's index of its segments (docs/ha.md, "Holder indexes"): (segment, key) -> where the object's
 * bytes sit in that segment — the main one and every extra segment mounted (xseg.c) — kept from the master's
 * PUT and DROP records, which a thread of ours follows with a long
 * poll (FOLLOW_INDEX), acknowledging what it holds with the next poll. After a remount (heartbeat.c) each
 * remounted segment's index goes to the master (REMOUNT_INDEX), so a master that restarted, or a new leader,
 * gets our objects back. Records of segments we do not follow (one unmounted meanwhile) are ignored; a record that does not decode ends its answer (the
 * rest comes again: it is not acknowledged).
 *
 * Locks: mu guards the table; it is never held across an RPC (the upload copies a batch out first) and
 * takes no other lock. The thread polls at most POLL_MS at a time, so a stop waits that long at most. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define POLL_MS 250        /* the longest poll: a stop waits this long at most */
#define POLL_TMO_MS 5000   /* RPC deadline of a poll */
#define RETRY_MS 200       /* after a refused or failed poll (a master restarting, no segment yet) */
#define UPLOAD_BATCH 4096  /* entries per REMOUNT_INDEX */
#define UPLOAD_TMO_MS 10000

struct entry {
  struct entry *next;
  struct mc_uuid seg;
  uint64_t off, len, size, ttl, seq;
  uint8_t pin;
  uint32_t klen, glen;
  char key[]; /* klen bytes, then the key group's glen bytes (0: none; docs/master.md, "Key groups") */
};

struct mc_hindex {
  struct mc_store *s;
  pthread_mutex_t mu;
  struct entry **b;
  size_t nb, n;
  pthread_t th;
  int running;
  atomic_int stop;
  uint64_t acked; /* the thread's: the last record received from the current master */
  uint64_t applied; /* the newest record taken in from any master (mu): sent with the upload, so the master
                       knows which writers' witnesses our index already settled (docs/ha.md, "Witnesses") */
  struct mc_uuid *segs; /* the segments followed (mu): the main one, then extra segments while mounted */
  size_t nsegs, capsegs;
};

/* ---- the table (mu held) ---- */

static int same_seg(struct mc_uuid a, struct mc_uuid b) { return a.hi == b.hi && a.lo == b.lo; }

static uint64_t khash(struct mc_uuid seg, const char *k, uint32_t n) { /* FNV-1a of the key, mixed with the segment */
  uint64_t h = 1469598103934665603ull ^ seg.lo ^ (seg.hi * 31);
  for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
  return h;
}

static struct entry **slot(struct mc_hindex *x, struct mc_uuid seg, const char *k, uint32_t n) {
  struct entry **p = &x->b[khash(seg, k, n) & (x->nb - 1)];
  while (*p && !((*p)->klen == n && same_seg((*p)->seg, seg) && !memcmp((*p)->key, k, n))) p = &(*p)->next;
  return p;
}

static int followed(const struct mc_hindex *x, struct mc_uuid seg) {
  for (size_t i = 0; i < x->nsegs; i++)
    if (same_seg(x->segs[i], seg)) return 1;
  return 0;
}

static void grow(struct mc_hindex *x) {
  size_t nb = x->nb * 2;
  struct entry **b = mc_calloc(nb, sizeof(*b));
  for (size_t i = 0; i < x->nb; i++)
    for (struct entry *e = x->b[i], *next; e; e = next) {
      next = e->next;
      size_t j = khash(e->seg, e->key, e->klen) & (nb - 1);
      e->next = b[j];
      b[j] = e;
    }
  mc_free(x->b);
  x->b = b;
  x->nb = nb;
}

/* One PUT record's fields. */
struct rec {
  uint64_t seq, off, len, size, ttl;
  uint8_t pin;
  const char *group;
  uint32_t glen;
};

static void put(struct mc_hindex *x, struct mc_uuid seg, const char *k, uint32_t n, const struct rec *r) {
  struct entry **p = slot(x, seg, k, n), *e = *p;
  if (e && e->seq > r->seq) return; /* (a master's numbers only grow; a newer record is kept) */
  if (e && e->glen != r->glen) { /* another group name: the entry is made again at its size */
    *p = e->next;
    mc_free(e);
    x->n--;
    e = NULL;
  }
  if (!e) {
    if (x->n >= x->nb) {
      grow(x);
      p = slot(x, seg, k, n);
    }
    e = mc_malloc(sizeof(*e) + n + r->glen);
    e->next = *p;
    memcpy(e->key, k, n);
    *p = e;
    x->n++;
  }
  *e = (struct entry){e->next, seg, r->off, r->len, r->size, r->ttl, r->seq, r->pin, n, r->glen};
  if (r->glen) memcpy(e->key + n, r->group, r->glen);
}

static void drop(struct mc_hindex *x, struct mc_uuid seg, const char *k, uint32_t n) {
  struct entry **p = slot(x, seg, k, n), *e = *p;
  if (!e) return;
  *p = e->next;
  mc_free(e);
  x->n--;
}

static void clear(struct mc_hindex *x) {
  for (size_t i = 0; i < x->nb; i++)
    for (struct entry *e = x->b[i], *next; e; e = next) {
      next = e->next;
      mc_free(e);
    }
  memset(x->b, 0, x->nb * sizeof(*x->b));
  x->n = 0;
}

/* ---- following ---- */

/* Applies an answer: returns the last record's number (0 when none), or the answer's own end at the
 * first record that does not decode. */
static uint64_t apply(struct mc_hindex *x, const struct mc_wbuf *rep) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep->p, rep->len);
  mc_r_u64(&r); /* durable_seq (for the writers' witnesses; not used by the holder) */
  uint8_t flags = mc_r_u8(&r);
  uint32_t count = mc_r_u32(&r);
  uint64_t last = 0;
  pthread_mutex_lock(&x->mu);
  if (flags & 1) { /* records for us were dropped: what we hold cannot be trusted any more */
    LOG_WARN_LIMITED("holder index: the master dropped records for us (its queue overflowed); index cleared");
    clear(x);
  }
  for (uint32_t i = 0; i < count && !r.err; i++) {
    struct rec e = {.seq = mc_r_u64(&r)};
    uint8_t kind = mc_r_u8(&r);
    uint32_t kl;
    const char *k = (const char *)mc_r_blob(&r, &kl);
    struct mc_uuid seg = mc_get_uuid(&r);
    e.off = mc_r_u64(&r), e.len = mc_r_u64(&r), e.size = mc_r_u64(&r);
    e.pin = mc_r_u8(&r);
    e.ttl = mc_r_u64(&r);
    if (kind == (MC_HIDX_PUT | MC_HIDX_GROUPED)) { /* its key group follows (master/hidx.h) */
      kind = MC_HIDX_PUT;
      e.group = (const char *)mc_r_blob(&r, &e.glen);
      if (!r.err && (!e.glen || e.glen > MC_STR_MAX || memchr(e.group, 0, e.glen))) r.err = 1;
    }
    if (r.err) break;
    last = e.seq;
    if (e.seq > x->applied) x->applied = e.seq;
    if (!followed(x, seg)) continue;
    if (kind == MC_HIDX_PUT) put(x, seg, k, kl, &e);
    else if (kind == MC_HIDX_DROP) drop(x, seg, k, kl);
  }
  pthread_mutex_unlock(&x->mu);
  if (r.err) LOG_WARN_LIMITED("holder index: a FOLLOW_INDEX answer does not decode; the rest comes again");
  return last;
}

static void nap(struct mc_hindex *x, int ms) {
  for (int t = 0; t < ms && !atomic_load(&x->stop); t += 20) usleep(20000);
}

static void *follow_main(void *arg) {
  struct mc_hindex *x = arg;
  struct mc_store *s = x->s;
  while (!atomic_load(&x->stop)) {
    struct mc_wbuf rep = {0};
    int rc = mcli_follow_index(s->master.cli, s->self.client_id, x->acked, POLL_MS, POLL_TMO_MS, &rep);
    if (!rc) {
      uint64_t last = apply(x, &rep);
      if (last) x->acked = last;
    }
    mc_w_free(&rep);
    if (rc) { /* no segment here yet, or a master restarting: its records start over */
      x->acked = 0;
      nap(x, RETRY_MS);
    }
  }
  return NULL;
}

void mc_hindex_start(struct mc_store *s) {
  struct mc_hindex *x = mc_calloc(1, sizeof(*x));
  x->s = s;
  x->nb = 64;
  x->b = mc_calloc(x->nb, sizeof(*x->b));
  pthread_mutex_init(&x->mu, NULL);
  s->hindex = x;
  mc_hindex_follow_segment(s, s->seg.rec.id);
  /* one poll before setup returns: from its answer on, the master records every object placed on our
   * segment (those placed between the mount and this poll have no record: a window of one round trip) */
  struct mc_wbuf rep = {0};
  if (!mcli_follow_index(s->master.cli, s->self.client_id, 0, 0, POLL_TMO_MS, &rep)) x->acked = apply(x, &rep);
  mc_w_free(&rep);
  x->running = !pthread_create(&x->th, NULL, follow_main, x);
  if (!x->running) LOG_ERROR("store client %s: cannot start the holder-index thread", s->self.name);
}

void mc_hindex_follow_segment(struct mc_store *s, struct mc_uuid seg) {
  struct mc_hindex *x = s->hindex;
  if (!x) return;
  pthread_mutex_lock(&x->mu);
  if (!followed(x, seg)) {
    if (x->nsegs == x->capsegs)
      x->segs = mc_realloc(x->segs, sizeof(*x->segs) * (x->capsegs = x->capsegs ? 2 * x->capsegs : 4));
    x->segs[x->nsegs++] = seg;
  }
  pthread_mutex_unlock(&x->mu);
}

void mc_hindex_forget_segment(struct mc_store *s, struct mc_uuid seg) {
  struct mc_hindex *x = s->hindex;
  if (!x) return;
  pthread_mutex_lock(&x->mu);
  for (size_t i = 0; i < x->nsegs; i++)
    if (same_seg(x->segs[i], seg)) x->segs[i] = x->segs[--x->nsegs];
  for (size_t i = 0; i < x->nb; i++)
    for (struct entry **p = &x->b[i]; *p;) {
      struct entry *e = *p;
      if (!same_seg(e->seg, seg)) {
        p = &e->next;
        continue;
      }
      *p = e->next;
      mc_free(e);
      x->n--;
    }
  pthread_mutex_unlock(&x->mu);
}

void mc_hindex_stop(struct mc_store *s) {
  struct mc_hindex *x = s->hindex;
  if (!x) return;
  atomic_store(&x->stop, 1);
  if (x->running) pthread_join(x->th, NULL);
  clear(x);
  mc_free(x->b);
  mc_free(x->segs);
  pthread_mutex_destroy(&x->mu);
  mc_free(x);
  s->hindex = NULL;
}

size_t mc_hindex_count(struct mc_store *s) {
  struct mc_hindex *x = s->hindex;
  if (!x) return 0;
  pthread_mutex_lock(&x->mu);
  size_t n = x->n;
  pthread_mutex_unlock(&x->mu);
  return n;
}

/* ---- upload ---- */

/* A batch of entries copied out of the table (their keys too), whole buckets at a time. */
struct batch {
  struct mcli_index_entry *e;
  char **keys;
  uint32_t n, cap;
};

static void batch_add(struct batch *b, const struct entry *x) {
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 256;
    b->e = mc_realloc(b->e, sizeof(*b->e) * b->cap);
    b->keys = mc_realloc(b->keys, sizeof(*b->keys) * b->cap);
  }
  char *k = mc_malloc(x->klen + x->glen ? x->klen + x->glen : 1);
  memcpy(k, x->key, x->klen + x->glen);
  b->keys[b->n] = k;
  b->e[b->n++] = (struct mcli_index_entry){k, x->klen, x->off, x->len, x->size, x->ttl, x->pin, k + x->klen, x->glen};
}

/* Copies seg's entries of the buckets from *at on until the batch holds UPLOAD_BATCH entries or more (mu
 * held). */
static void copy_batch(struct mc_hindex *x, struct mc_uuid seg, size_t *at, struct batch *b) {
  for (; *at < x->nb && b->n < UPLOAD_BATCH; (*at)++)
    for (struct entry *e = x->b[*at]; e; e = e->next)
      if (same_seg(e->seg, seg)) batch_add(b, e);
}

void mc_hindex_upload(struct mc_store *s, struct mc_uuid seg) {
  struct mc_hindex *x = s->hindex;
  if (!x) return;
  struct batch b = {0};
  size_t at = 0, total = 0;
  int rc = 0;
  for (int last = 0; !last;) { /* at least one call: it attaches our feed at a new master at once */
    pthread_mutex_lock(&x->mu);
    copy_batch(x, seg, &at, &b); /* (a table that grows meanwhile is walked by its new buckets: an entry may go twice) */
    last = at >= x->nb;
    uint64_t applied = x->applied;
    pthread_mutex_unlock(&x->mu);
    rc = mcli_remount_index(s->master.cli, s->self.client_id, seg, b.e, b.n, applied, last, UPLOAD_TMO_MS);
    total += b.n;
    for (uint32_t i = 0; i < b.n; i++) mc_free(b.keys[i]);
    b.n = 0;
    if (rc) break;
  }
  if (rc) LOG_WARN("holder index: upload to the master failed after %zu entries: %s", total, mooncake_store_err_name(rc));
  else if (total) LOG_INFO("holder index: %zu entries sent to the master", total);
  mc_free(b.e);
  mc_free(b.keys);
}
