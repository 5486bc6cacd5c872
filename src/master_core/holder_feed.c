/* The feed of the holder indexes: see holder_feed.h (docs/ha.md, "Holder indexes"). */
#include "master_core/holder_feed.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "master_core/minheap.h"

struct mc_hidx {
  struct mc_hidx_feed *f;
  struct mc_uuid client;
  pthread_mutex_t mu;
  atomic_int refs; /* the feed's (until close), mc_hidx_ref's, the feed thread's while it answers */
  int closed; /* under mu */
  /* the queue, under mu: records in seq order, bytes q.p[head, q.len) */
  struct mc_wbuf q;
  size_t head;
  struct { uint64_t seq; size_t end; } *ix; /* per record: its seq, the offset just past it */
  size_t ix_head, ix_n, ix_cap;
  /* the queue overflowed and was dropped (mu): every answer says so until the holder acknowledges a record
   * numbered resync_from or above (the first queued after the overflow), so a lost answer cannot hide it */
  int resync;
  uint64_t resync_from;
  /* the resync's re-sent PUT records (mu): the next shard of the object table to queue, while dumping */
  int dumping;
  uint32_t dump_at;
  uint64_t dump_records; /* queued by this resync so far, for the log */
  uint64_t last_seq;     /* the newest record ever queued, under mu */
  uint64_t last_drop;    /* the newest DROP queued (mu): space waits for its acknowledgement, so a DROP is
                            sent at once, never held for the batch window */
  _Atomic uint64_t acked; /* every record at or below is acknowledged (or given up on overflow) */
  int discard_slot;       /* discard.c's, under its mutex */
  /* a waiting poll, under mu */
  mc_hidx_answer_fn answer;
  void *arg;
  uint64_t poll_deadline_ns;
  uint64_t answered_ns; /* when a poll was last answered (mu): the next answer with records waits until this
                           + MC_HIDX_BATCH_US, so a holder under a stream of puts polls at most that often */
  /* under f->mu */
  uint64_t first_unacked; /* seq of the oldest queued record, 0 when none */
  size_t dirty_at;        /* its place in f->dirty while first_unacked != 0 */
  size_t wait_at;         /* its place in f->waiting while on_wait */
  /* on_wait and ready_ns are set only with h->mu held too; the feed thread clears them with f->mu alone
   * (take_due), so under h->mu alone they are read as atomics and can only have gone to 0 (append) */
  _Atomic int on_wait;
  _Atomic uint64_t ready_ns; /* records came for the waiting poll: answer at this time (0: not yet) */
};

/* The feed's two heaps of holders (minheap.h's indexed heap, under f->mu): those with unacknowledged
 * records, by their oldest record (durable_seq is just below the least), and those with a waiting poll, by
 * when it is due. Each holder knows its place in both, so one whose key changed moves in O(log n) and the
 * least is read in O(1): with a holder per client and tens of thousands of clients, walking a list on
 * every acknowledgement or wake-up would cost the master more than the records themselves. */
static uint64_t unacked_key(const struct mc_hidx *h) { return h->first_unacked; }

/* When a waiting poll is due: when its records' batch window ends, else at its deadline. */
static uint64_t due_ns(const struct mc_hidx *h) {
  return h->ready_ns && h->ready_ns < h->poll_deadline_ns ? h->ready_ns : h->poll_deadline_ns;
}

MC_IDXHEAP(dirtyq, struct mc_hidx, unacked_key, dirty_at)
MC_IDXHEAP(waitq, struct mc_hidx, due_ns, wait_at)

struct mc_hidx_feed {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic uint64_t next_seq; /* taken without mu by an append that needs nothing else of it (append) */
  _Atomic uint64_t durable; /* mc_hidx_durable as last computed (mc_hidx_durable_cached) */
  struct dirtyq dirty;  /* holders with unacknowledged records, by their oldest one */
  struct waitq waiting; /* holders with a waiting poll, by when it is due */
  int stop;
  pthread_t th;
};

#define BATCH_NS (MC_HIDX_BATCH_US * 1000ull)

static int64_t ms_ns(uint32_t ms) { return (int64_t)ms * 1000000; }

/* ---- the heaps (f->mu held) ---- */

static void dirty_add(struct mc_hidx_feed *f, struct mc_hidx *h, uint64_t seq) {
  if (h->first_unacked) return;
  h->first_unacked = seq;
  dirtyq_push(&f->dirty, h);
}

static void dirty_remove(struct mc_hidx_feed *f, struct mc_hidx *h) {
  if (!h->first_unacked) return;
  dirtyq_remove(&f->dirty, h);
  h->first_unacked = 0;
}

/* f->mu held: O(1), just below the oldest unacknowledged record of any holder. */
static uint64_t durable_locked(struct mc_hidx_feed *f) {
  uint64_t d = atomic_load(&f->next_seq) - 1;
  struct mc_hidx *oldest = dirtyq_min(&f->dirty);
  if (oldest && oldest->first_unacked - 1 < d) d = oldest->first_unacked - 1;
  if (d > atomic_load(&f->durable)) atomic_store(&f->durable, d);
  return d;
}

uint64_t mc_hidx_durable(struct mc_hidx_feed *f) {
  pthread_mutex_lock(&f->mu);
  uint64_t d = durable_locked(f);
  pthread_mutex_unlock(&f->mu);
  return d;
}

uint64_t mc_hidx_durable_cached(struct mc_hidx_feed *f) { return atomic_load(&f->durable); }

void mc_hidx_encode(struct mc_wbuf *w, uint64_t seq, uint8_t kind, const void *key, uint32_t klen, struct mc_uuid seg,
                    uint64_t off, uint64_t len, uint64_t size, uint8_t hard_pin, uint64_t ttl, const char *group) {
  int grouped = kind == MC_HIDX_PUT && group && *group;
  size_t glen = grouped ? strlen(group) : 0;
  /* the layout of mc_w_u64 seq, u8 kind, blob key, uuid segment, u64 off, len, size, u8 hard_pin, u64 ttl
   * [, str group], written in one reservation: two copies of every record are encoded on the put path */
  size_t n = 8 + 1 + 4 + (size_t)klen + 16 + 24 + 1 + 8 + (grouped ? 4 + glen : 0);
  if (mc_w_reserve(w, n)) return;
  uint8_t *p = w->p + w->len;
  mc_le_put64(p, seq), p += 8;
  *p++ = (uint8_t)(kind | (grouped ? MC_HIDX_GROUPED : 0));
  mc_le_put32(p, klen), p += 4;
  if (klen) memcpy(p, key, klen), p += klen;
  mc_le_put64(p, seg.hi), p += 8;
  mc_le_put64(p, seg.lo), p += 8;
  mc_le_put64(p, off), p += 8;
  mc_le_put64(p, len), p += 8;
  mc_le_put64(p, size), p += 8;
  *p++ = hard_pin;
  mc_le_put64(p, ttl), p += 8;
  if (grouped) {
    mc_le_put32(p, (uint32_t)glen), p += 4;
    memcpy(p, group, glen);
  }
  w->len += n;
}

uint64_t mc_hidx_next_seq(struct mc_hidx_feed *f) {
  pthread_mutex_lock(&f->mu);
  uint64_t s = atomic_load(&f->next_seq);
  pthread_mutex_unlock(&f->mu);
  return s;
}

/* ---- a holder's queue (h->mu held) ---- */

static void queue_clear(struct mc_hidx *h) {
  mc_w_free(&h->q);
  mc_free(h->ix);
  h->ix = NULL;
  h->head = h->ix_head = h->ix_n = h->ix_cap = 0;
}

/* Drops the records at or below acked; compacts when half the buffer is dead. An acknowledgement past the
 * newest record queued counts up to that record only. */
static void queue_ack(struct mc_hidx *h, uint64_t acked) {
  if (acked > h->last_seq) acked = h->last_seq;
  if (acked > atomic_load(&h->acked)) atomic_store(&h->acked, acked);
  if (h->resync && h->resync_from && acked >= h->resync_from) h->resync = 0; /* it cleared its index */
  while (h->ix_head < h->ix_n && h->ix[h->ix_head].seq <= acked) h->head = h->ix[h->ix_head++].end;
  if (h->ix_head == h->ix_n) {
    h->q.len = h->head = 0;
    h->ix_head = h->ix_n = 0;
    return;
  }
  if (h->head < h->q.len / 2) return;
  size_t live = h->q.len - h->head;
  memmove(h->q.p, h->q.p + h->head, live);
  for (size_t i = h->ix_head; i < h->ix_n; i++) h->ix[i - h->ix_head] = (typeof(*h->ix)){h->ix[i].seq, h->ix[i].end - h->head};
  h->ix_n -= h->ix_head;
  h->ix_head = 0;
  h->q.len = live;
  h->head = 0;
}

static uint64_t queue_first(const struct mc_hidx *h) { return h->ix_head < h->ix_n ? h->ix[h->ix_head].seq : 0; }

/* The answer: durable_seq, flags, count, the oldest queued records up to MC_HIDX_ANSWER_MAX bytes (at
 * least one). They stay queued until acknowledged. */
static void encode_answer(struct mc_hidx *h, uint64_t durable, struct mc_wbuf *w) {
  size_t n = 0, end = h->head;
  while (h->ix_head + n < h->ix_n && (!n || h->ix[h->ix_head + n].end - h->head <= MC_HIDX_ANSWER_MAX))
    end = h->ix[h->ix_head + n++].end;
  mc_w_u64(w, durable);
  mc_w_u8(w, h->resync ? 1 : 0);
  mc_w_u32(w, (uint32_t)n);
  mc_w_bytes_raw(w, h->q.p + h->head, end - h->head);
}

/* Takes the waiting poll out (f->mu held too). */
static void wait_remove(struct mc_hidx_feed *f, struct mc_hidx *h) {
  if (!h->on_wait) return;
  waitq_remove(&f->waiting, h);
  h->on_wait = 0;
  h->ready_ns = 0;
}

/* Answers h's waiting poll now with what is queued (h->mu held, f->mu not). */
static void answer_now(struct mc_hidx *h) {
  mc_hidx_answer_fn fn = h->answer;
  void *arg = h->arg;
  if (!fn) return;
  h->answer = NULL;
  pthread_mutex_lock(&h->f->mu);
  wait_remove(h->f, h);
  pthread_mutex_unlock(&h->f->mu);
  struct mc_wbuf w = {0};
  encode_answer(h, mc_hidx_durable(h->f), &w);
  h->answered_ns = mc_now_ns();
  fn(arg, &w);
}

/* The queue passed its bound: drop it, let durable_seq go past it, ask for a resync. */
static void overflow(struct mc_hidx *h) {
  queue_clear(h);
  h->resync = 1;
  h->resync_from = 0; /* the record being appended (append) */
  h->dumping = 1;     /* from the first shard again, should a resync be under way */
  h->dump_at = 0;
  atomic_store(&h->acked, h->last_seq); /* given up: nothing waits for these any more */
  pthread_mutex_lock(&h->f->mu);
  dirty_remove(h->f, h);
  pthread_mutex_unlock(&h->f->mu);
  LOG_WARN_LIMITED("holder index: the queue of client %016llx%016llx passed %u MiB unacknowledged; dropped, "
                   "the holder resyncs", (unsigned long long)h->client.hi, (unsigned long long)h->client.lo,
                   MC_HIDX_QUEUE_MAX >> 20);
}

static uint64_t append(struct mc_hidx *h, uint8_t kind, const void *key, uint32_t klen, struct mc_uuid seg,
                       uint64_t off, uint64_t len, uint64_t size, uint8_t hard_pin, uint64_t ttl, const char *group,
                       struct mc_wbuf *copy) {
  pthread_mutex_lock(&h->mu);
  if (h->closed) {
    pthread_mutex_unlock(&h->mu);
    return 0;
  }
  if (h->q.len - h->head + klen + (group ? strlen(group) : 0) + 72 > MC_HIDX_QUEUE_MAX) overflow(h);
  struct mc_hidx_feed *f = h->f;
  uint64_t seq;
  /* The feed's lock is needed to put h on the dirty heap or to wake its waiting poll. When neither is due
   * (h has an older unacknowledged record, which keeps durable_seq below this one until h->mu is let go,
   * and its waiting poll, if any, is already timed), the number is taken alone: under a stream of puts to
   * one holder, that is nearly every record. */
  if (h->first_unacked && !(atomic_load(&h->on_wait) && (!atomic_load(&h->ready_ns) || kind == MC_HIDX_DROP))) {
    seq = atomic_fetch_add(&f->next_seq, 1);
  } else {
    pthread_mutex_lock(&f->mu);
    seq = atomic_fetch_add(&f->next_seq, 1);
    dirty_add(f, h, seq);
    if (h->on_wait && (!h->ready_ns || kind == MC_HIDX_DROP)) { /* the waiting poll is answered once a batch
                                       window has passed since the last answer: at once after a quiet spell or
                                       for a DROP, else batched */
      uint64_t now = mc_now_ns(), at = kind == MC_HIDX_DROP ? now : MC_MAX(now, h->answered_ns + BATCH_NS);
      if (!h->ready_ns || at < h->ready_ns) {
        h->ready_ns = at;
        waitq_fix(&f->waiting, h);
        pthread_cond_signal(&f->cv);
      }
    }
    pthread_mutex_unlock(&f->mu);
  }
  size_t at = h->q.len;
  mc_hidx_encode(&h->q, seq, kind, key, klen, seg, off, len, size, hard_pin, ttl, group);
  if (copy) mc_w_bytes_raw(copy, h->q.p + at, h->q.len - at); /* (one encoding for both) */
  if (h->ix_n == h->ix_cap) {
    h->ix_cap = h->ix_cap ? 2 * h->ix_cap : 64;
    h->ix = mc_realloc(h->ix, h->ix_cap * sizeof(*h->ix));
  }
  h->ix[h->ix_n].seq = seq;
  h->ix[h->ix_n++].end = h->q.len;
  h->last_seq = seq;
  if (kind == MC_HIDX_DROP) h->last_drop = seq;
  if (h->resync && !h->resync_from) h->resync_from = seq;
  pthread_mutex_unlock(&h->mu);
  return seq;
}

uint64_t mc_hidx_put(struct mc_hidx *h, const void *key, uint32_t klen, struct mc_uuid segment, uint64_t offset,
                     uint64_t length, uint64_t size, uint8_t hard_pin, uint64_t soft_pin_ttl_ms, const char *group,
                     struct mc_wbuf *copy) {
  return append(h, MC_HIDX_PUT, key, klen, segment, offset, length, size, hard_pin, soft_pin_ttl_ms, group, copy);
}

uint64_t mc_hidx_drop(struct mc_hidx *h, const void *key, uint32_t klen, struct mc_uuid segment) {
  return append(h, MC_HIDX_DROP, key, klen, segment, 0, 0, 0, 0, 0, NULL, NULL);
}

/* Drops what acked covers and recomputes durable_seq (h->mu held). Returns the oldest record still queued. */
static uint64_t ack_locked(struct mc_hidx *h, uint64_t acked) {
  queue_ack(h, acked);
  struct mc_hidx_feed *f = h->f;
  uint64_t first = queue_first(h);
  pthread_mutex_lock(&f->mu);
  if (!first) {
    dirty_remove(f, h);
  } else if (h->first_unacked) {
    h->first_unacked = first;
    dirtyq_fix(&f->dirty, h);
  }
  durable_locked(f);
  pthread_mutex_unlock(&f->mu);
  return first;
}

void mc_hidx_ack(struct mc_hidx *h, uint64_t acked) {
  pthread_mutex_lock(&h->mu);
  ack_locked(h, acked);
  pthread_mutex_unlock(&h->mu);
}

int mc_hidx_dump_next(struct mc_hidx *h, uint32_t *shard) {
  pthread_mutex_lock(&h->mu);
  /* a resync's records are queued only while the queue holds less than one answer: the holder's polls pace
   * it (records queued after the overflow all reach the holder after the flag, so after it cleared) */
  int due = h->dumping && !h->closed && h->q.len - h->head < MC_HIDX_ANSWER_MAX;
  *shard = h->dump_at;
  pthread_mutex_unlock(&h->mu);
  return due;
}

void mc_hidx_dump_done(struct mc_hidx *h, uint32_t shard, uint32_t nshards, uint64_t records) {
  pthread_mutex_lock(&h->mu);
  if (h->dumping && h->dump_at == shard) { /* (an overflow meanwhile started it over) */
    h->dump_records += records;
    if (++h->dump_at >= nshards) {
      h->dumping = 0;
      LOG_INFO("holder index: resync of client %016llx%016llx queued (%llu records)", (unsigned long long)h->client.hi,
               (unsigned long long)h->client.lo, (unsigned long long)h->dump_records);
      h->dump_records = 0;
    }
  }
  pthread_mutex_unlock(&h->mu);
}

int mc_hidx_resyncing(struct mc_hidx *h) {
  pthread_mutex_lock(&h->mu);
  int r = h->dumping || h->resync;
  pthread_mutex_unlock(&h->mu);
  return r;
}

void mc_hidx_follow(struct mc_hidx *h, uint64_t acked, uint32_t max_wait_ms, mc_hidx_answer_fn answer, void *arg) {
  pthread_mutex_lock(&h->mu);
  answer_now(h); /* a poll still waiting (its client gave up on it) */
  uint64_t first = ack_locked(h, acked);
  struct mc_hidx_feed *f = h->f;
  /* Records already queued are sent at once only when a batch window has passed since the last answer (or
   * they fill an answer, or one is a DROP, whose space waits for it): a holder whose every poll finds a few
   * new records would otherwise poll in a tight loop under load, one round trip per couple of puts
   * (docs/ha.md, "Holder indexes"). */
  uint64_t now = mc_now_ns(), batch_end = h->answered_ns + BATCH_NS;
  int due = first && (now >= batch_end || h->last_drop >= first || h->q.len - h->head >= MC_HIDX_ANSWER_MAX);
  if (due || !max_wait_ms || h->closed || h->resync) {
    struct mc_wbuf w = {0};
    encode_answer(h, mc_hidx_durable(f), &w);
    h->answered_ns = now;
    pthread_mutex_unlock(&h->mu);
    answer(arg, &w);
    return;
  }
  h->answer = answer;
  h->arg = arg;
  h->poll_deadline_ns = now + (uint64_t)ms_ns(MC_MIN(max_wait_ms, MC_HIDX_POLL_MAX_MS));
  pthread_mutex_lock(&f->mu);
  h->on_wait = 1;
  if (first) h->ready_ns = batch_end; /* records wait for the rest of the window */
  waitq_push(&f->waiting, h);              /* (its key set above, as it must be while it is in the heap) */
  pthread_cond_signal(&f->cv); /* its deadline may be the nearest */
  pthread_mutex_unlock(&f->mu);
  pthread_mutex_unlock(&h->mu);
}

/* ---- holders' lifetimes ---- */

struct mc_hidx *mc_hidx_open(struct mc_hidx_feed *f, struct mc_uuid client) {
  struct mc_hidx *h = mc_calloc(1, sizeof(*h));
  h->f = f;
  h->client = client;
  h->discard_slot = -1;
  atomic_init(&h->refs, 1);
  pthread_mutex_init(&h->mu, NULL);
  return h;
}

int *mc_hidx_discard_slot(struct mc_hidx *h) { return &h->discard_slot; }

uint64_t mc_hidx_acked(const struct mc_hidx *h) { return atomic_load(&((struct mc_hidx *)h)->acked); }

void mc_hidx_ref(struct mc_hidx *h) { atomic_fetch_add(&h->refs, 1); }

void mc_hidx_unref(struct mc_hidx *h) {
  if (atomic_fetch_sub(&h->refs, 1) != 1) return;
  queue_clear(h);
  pthread_mutex_destroy(&h->mu);
  mc_free(h);
}

void mc_hidx_close(struct mc_hidx *h) {
  pthread_mutex_lock(&h->mu);
  h->closed = 1;
  atomic_store(&h->acked, UINT64_MAX); /* space waiting for it goes with its segments anyway */
  answer_now(h);
  queue_clear(h);
  pthread_mutex_lock(&h->f->mu);
  dirty_remove(h->f, h);
  durable_locked(h->f);
  pthread_mutex_unlock(&h->f->mu);
  pthread_mutex_unlock(&h->mu);
  mc_hidx_unref(h);
}

/* ---- the feed thread: answers polls whose records came or whose time is up ---- */

/* The holder due first if it is due now, taken off the waiting heap with a reference (taken while it is
 * still listed, so a close that has not yet taken it off cannot have dropped the last one), or NULL;
 * *next_ns: when the first one is due (UINT64_MAX: none waits). f->mu held. */
static struct mc_hidx *take_due(struct mc_hidx_feed *f, uint64_t now, uint64_t *next_ns) {
  *next_ns = UINT64_MAX;
  struct mc_hidx *h = waitq_min(&f->waiting);
  if (!h) return NULL;
  if (due_ns(h) > now) {
    *next_ns = due_ns(h);
    return NULL;
  }
  wait_remove(f, h);
  mc_hidx_ref(h);
  return h;
}

static void *feed_main(void *arg) {
  mc_thread_name("mc-hidx-feed");
  struct mc_hidx_feed *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->stop) {
    uint64_t next;
    struct mc_hidx *h = take_due(f, mc_now_ns(), &next);
    if (h) { /* (a poll that replaced the one due meanwhile is answered early: harmless, it polls again) */
      pthread_mutex_unlock(&f->mu);
      pthread_mutex_lock(&h->mu);
      answer_now(h);
      pthread_mutex_unlock(&h->mu);
      mc_hidx_unref(h);
      pthread_mutex_lock(&f->mu);
      continue;
    }
    if (next == UINT64_MAX) {
      pthread_cond_wait(&f->cv, &f->mu);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t now = mc_now_ns(), wait = next > now ? next - now : 0;
      ts.tv_sec += (time_t)(wait / 1000000000ull);
      ts.tv_nsec += (long)(wait % 1000000000ull);
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

void mc_hidx_feed_raise(struct mc_hidx_feed *f, uint64_t seq) {
  pthread_mutex_lock(&f->mu);
  uint64_t cur = atomic_load(&f->next_seq);
  while (seq > cur && !atomic_compare_exchange_weak(&f->next_seq, &cur, seq)) {
  }
  durable_locked(f);
  pthread_mutex_unlock(&f->mu);
}

struct mc_hidx_feed *mc_hidx_feed_start(uint64_t first_seq) {
  struct mc_hidx_feed *f = mc_calloc(1, sizeof(*f));
  atomic_init(&f->next_seq, first_seq ? first_seq : 1);
  atomic_init(&f->durable, atomic_load(&f->next_seq) - 1);
  pthread_mutex_init(&f->mu, NULL);
  mc_cond_init_monotonic(&f->cv);
  if (pthread_create(&f->th, NULL, feed_main, f)) {
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    mc_free(f);
    return NULL;
  }
  return f;
}

void mc_hidx_feed_stop(struct mc_hidx_feed *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  f->stop = 1;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
  pthread_join(f->th, NULL);
  dirtyq_free(&f->dirty);
  waitq_free(&f->waiting);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  mc_free(f);
}
