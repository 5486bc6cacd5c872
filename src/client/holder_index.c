/* The holder's index of its segments (docs/ha.md, "Holder indexes"): (segment, key) -> where the object's
 * bytes sit in that segment — the main one and every extra segment mounted (extra_segments.c) — kept from the master's
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

/* The fields a lookup compares come first, so a chain walk past other keys reads one cache line a link. */
struct entry {
  struct entry *next;
  uint64_t hash; /* khash(seg, key) */
  struct mc_uuid seg;
  uint32_t klen, glen;
  uint8_t pin;
  uint64_t off, len, size, ttl, seq;
  char key[]; /* klen bytes, then the key group's glen bytes (0: none; docs/master.md, "Key groups") */
};

/* Entries whose key (and group) fit SMALL_KEY bytes come from one size and are kept on a free list when
 * dropped (at most FREE_MAX): a holder under a stream of puts and removals takes and gives back thousands a
 * second, which malloc serves slower. */
#define SMALL_KEY 160
#define FREE_MAX 16384
#define PREFETCH_AHEAD 8 /* records whose buckets are fetched ahead while one is applied (apply) */

struct mc_hindex {
  struct mc_store *s;
  pthread_mutex_t mu;
  struct entry **b;
  size_t nb, n;
  struct entry *free_list; /* SMALL_KEY entries kept for reuse (mu), nfree of them */
  size_t nfree;
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

static struct entry **slot(struct mc_hindex *x, uint64_t h, struct mc_uuid seg, const char *k, uint32_t n) {
  struct entry **p = &x->b[h & (x->nb - 1)];
  while (*p && !((*p)->hash == h && (*p)->klen == n && same_seg((*p)->seg, seg) && !memcmp((*p)->key, k, n)))
    p = &(*p)->next;
  return p;
}

static struct entry *entry_alloc(struct mc_hindex *x, size_t bytes) {
  if (bytes > SMALL_KEY) return mc_malloc(sizeof(struct entry) + bytes);
  struct entry *e = x->free_list;
  if (!e) return mc_malloc(sizeof(struct entry) + SMALL_KEY);
  x->free_list = e->next;
  x->nfree--;
  return e;
}

static void entry_free(struct mc_hindex *x, struct entry *e) {
  if (e->klen + e->glen > SMALL_KEY || x->nfree >= FREE_MAX) {
    mc_free(e);
    return;
  }
  e->next = x->free_list;
  x->free_list = e;
  x->nfree++;
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
      size_t j = e->hash & (nb - 1);
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

static void put(struct mc_hindex *x, uint64_t h, struct mc_uuid seg, const char *k, uint32_t n, const struct rec *r) {
  struct entry **p = slot(x, h, seg, k, n), *e = *p;
  if (e && e->seq > r->seq) return; /* (a master's numbers only grow; a newer record is kept) */
  if (e && e->glen != r->glen) { /* another group name: the entry is made again at its size */
    *p = e->next;
    entry_free(x, e);
    x->n--;
    e = NULL;
  }
  if (!e) {
    if (x->n >= x->nb) {
      grow(x);
      p = slot(x, h, seg, k, n);
    }
    e = entry_alloc(x, (size_t)n + r->glen);
    e->next = *p;
    memcpy(e->key, k, n);
    *p = e;
    x->n++;
  }
  *e = (struct entry){.next = e->next, .hash = h, .seg = seg, .klen = n, .glen = r->glen, .pin = r->pin,
                      .off = r->off, .len = r->len, .size = r->size, .ttl = r->ttl, .seq = r->seq};
  if (r->glen) memcpy(e->key + n, r->group, r->glen);
}

static void drop(struct mc_hindex *x, uint64_t h, struct mc_uuid seg, const char *k, uint32_t n) {
  struct entry **p = slot(x, h, seg, k, n), *e = *p;
  if (!e) return;
  *p = e->next;
  entry_free(x, e);
  x->n--;
}

static void clear(struct mc_hindex *x) {
  for (size_t i = 0; i < x->nb; i++)
    for (struct entry *e = x->b[i], *next; e; e = next) {
      next = e->next;
      entry_free(x, e);
    }
  memset(x->b, 0, x->nb * sizeof(*x->b));
  x->n = 0;
}

static void free_all(struct mc_hindex *x) {
  clear(x);
  for (struct entry *e = x->free_list, *next; e; e = next) {
    next = e->next;
    mc_free(e);
  }
  x->free_list = NULL;
  x->nfree = 0;
}

/* ---- following ---- */

/* One decoded record of an answer. */
struct drec {
  struct rec r;
  uint8_t kind;
  uint32_t klen;
  const char *key;
  struct mc_uuid seg;
  uint64_t hash;
};

#define DECODE_CHUNK 256 /* records decoded ahead of their application (apply) */

/* Decodes up to max records of r into d: how many; r->err at one that does not decode. */
static uint32_t decode_chunk(struct mc_rbuf_rd *r, uint32_t max, struct drec *d) {
  uint32_t n = 0;
  for (; n < max && !r->err; n++) {
    struct drec *e = &d[n];
    e->r = (struct rec){.seq = mc_r_u64(r)};
    e->kind = mc_r_u8(r);
    e->key = (const char *)mc_r_blob(r, &e->klen);
    e->seg = mc_get_uuid(r);
    e->r.off = mc_r_u64(r), e->r.len = mc_r_u64(r), e->r.size = mc_r_u64(r);
    e->r.pin = mc_r_u8(r);
    e->r.ttl = mc_r_u64(r);
    if (e->kind == (MC_HIDX_PUT | MC_HIDX_GROUPED)) { /* its key group follows (master_core/holder_feed.h) */
      e->kind = MC_HIDX_PUT;
      e->r.group = (const char *)mc_r_blob(r, &e->r.glen);
      if (!r->err && (!e->r.glen || e->r.glen > MC_STR_MAX || memchr(e->r.group, 0, e->r.glen))) r->err = 1;
    }
    if (r->err) break;
    e->hash = khash(e->seg, e->key, e->klen);
  }
  return n;
}

/* Applies an answer: returns the last record's number (0 when none), or the answer's own end at the
 * first record that does not decode. Records are decoded a chunk at a time and their buckets fetched a few
 * records ahead of their application: the table is mostly out of the cache (the data path streams through
 * it), and the misses of one record then overlap those of the next. */
static uint64_t apply(struct mc_hindex *x, const struct mc_wbuf *rep) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep->p, rep->len);
  mc_r_u64(&r); /* durable_seq (for the writers' witnesses; not used by the holder) */
  uint8_t flags = mc_r_u8(&r);
  uint32_t count = mc_r_u32(&r);
  uint64_t last = 0;
  struct drec d[DECODE_CHUNK];
  pthread_mutex_lock(&x->mu);
  if (flags & 1) { /* records for us were dropped: what we hold cannot be trusted any more */
    LOG_WARN_LIMITED("holder index: the master dropped records for us (its queue overflowed); index cleared");
    clear(x);
  }
  for (uint32_t done = 0; done < count && !r.err;) {
    uint32_t n = decode_chunk(&r, MC_MIN(count - done, (uint32_t)DECODE_CHUNK), d);
    done += n;
    for (uint32_t i = 0; i < n && i < PREFETCH_AHEAD; i++) __builtin_prefetch(&x->b[d[i].hash & (x->nb - 1)]);
    for (uint32_t i = 0; i < n; i++) {
      if (i + PREFETCH_AHEAD < n) __builtin_prefetch(&x->b[d[i + PREFETCH_AHEAD].hash & (x->nb - 1)]);
      if (i + PREFETCH_AHEAD / 2 < n) { /* its bucket came by now: the chain's first link */
        const struct entry *h = x->b[d[i + PREFETCH_AHEAD / 2].hash & (x->nb - 1)];
        if (h) __builtin_prefetch(h);
      }
      const struct drec *e = &d[i];
      last = e->r.seq;
      if (e->r.seq > x->applied) x->applied = e->r.seq;
      if (!followed(x, e->seg)) continue;
      if (e->kind == MC_HIDX_PUT) put(x, e->hash, e->seg, e->key, e->klen, &e->r);
      else if (e->kind == MC_HIDX_DROP) drop(x, e->hash, e->seg, e->key, e->klen);
    }
  }
  pthread_mutex_unlock(&x->mu);
  if (r.err) LOG_WARN_LIMITED("holder index: a FOLLOW_INDEX answer does not decode; the rest comes again");
  return last;
}

static void nap(struct mc_hindex *x, int ms) {
  for (int t = 0; t < ms && !atomic_load(&x->stop); t += 20) usleep(20000);
}

static void *follow_main(void *arg) {
  mc_thread_name("mc-hidx");
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
      entry_free(x, e);
      x->n--;
    }
  pthread_mutex_unlock(&x->mu);
}

void mc_hindex_stop(struct mc_store *s) {
  struct mc_hindex *x = s->hindex;
  if (!x) return;
  atomic_store(&x->stop, 1);
  if (x->running) pthread_join(x->th, NULL);
  free_all(x);
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
