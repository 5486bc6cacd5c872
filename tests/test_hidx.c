/* The holder-index feed (src/master_core/holder_feed.h, docs/ha.md "Holder indexes"): records in order per holder,
 * acknowledgement and durable_seq, long polls answered by records or by their time, the queue bound and
 * the resync it asks for, close with a poll waiting, many holders at once (durable_seq and deadlines kept
 * in heaps), and many writers and pollers at once (run under TSan in CI). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "lib/test.h"
#include "master_core/holder_feed.h"

/* a poll's answer, decoded */
struct ans {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int got;
  uint64_t durable, last_seq, first_seq;
  uint8_t flags;
  uint32_t n;
  int malformed, out_of_order;
  uint64_t at_ns;
};

static void ans_init(struct ans *a) {
  memset(a, 0, sizeof(*a));
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
}

static void on_answer(void *arg, struct mc_wbuf *body) {
  struct ans *a = arg;
  struct mc_rbuf_rd r;
  mc_r_init(&r, body->p, body->len);
  pthread_mutex_lock(&a->mu);
  a->durable = mc_r_u64(&r);
  a->flags = mc_r_u8(&r);
  a->n = mc_r_u32(&r);
  a->first_seq = a->last_seq = 0;
  for (uint32_t i = 0; i < a->n && !r.err; i++) {
    uint64_t seq = mc_r_u64(&r);
    uint8_t kind = mc_r_u8(&r);
    uint32_t kl;
    mc_r_blob(&r, &kl);
    mc_r_take(&r, 16 + 8 * 3 + 1 + 8);
    if (kind != MC_HIDX_PUT && kind != MC_HIDX_DROP) a->malformed = 1;
    if (seq <= a->last_seq) a->out_of_order = 1;
    if (!a->first_seq) a->first_seq = seq;
    a->last_seq = seq;
  }
  if (r.err || r.off != r.len) a->malformed = 1;
  a->got++;
  a->at_ns = mc_now_ns();
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  mc_w_free(body);
}

static int ans_wait(struct ans *a, int got, int ms) {
  pthread_mutex_lock(&a->mu);
  uint64_t end = mc_now_ns() + (uint64_t)ms * 1000000ull;
  while (a->got < got && mc_now_ns() < end) {
    pthread_mutex_unlock(&a->mu);
    usleep(1000);
    pthread_mutex_lock(&a->mu);
  }
  int ok = a->got >= got;
  pthread_mutex_unlock(&a->mu);
  return ok;
}

static struct mc_uuid U(uint64_t n) { return (struct mc_uuid){n, n}; }

static void test_order_and_durable(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(100);
  REQUIRE(f);
  struct mc_hidx *h = mc_hidx_open(f, U(1));
  CHECK_EQ(mc_hidx_durable(f), 99u); /* nothing queued: everything before the next number */
  uint64_t s1 = mc_hidx_put(h, "k1", 2, U(9), 0, 4096, 4000, 0, 0, NULL, NULL);
  uint64_t s2 = mc_hidx_drop(h, "k0", 2, U(9));
  uint64_t s3 = mc_hidx_put(h, "k2", 2, U(9), 4096, 8192, 8000, 1, 50, NULL, NULL);
  CHECK_EQ(s1, 100u);
  CHECK(s2 > s1 && s3 > s2);
  CHECK_EQ(mc_hidx_durable(f), 99u);
  struct ans a;
  ans_init(&a);
  mc_hidx_follow(h, 0, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 1, 1000));
  CHECK_EQ(a.n, 3u);
  CHECK_EQ(a.first_seq, s1);
  CHECK_EQ(a.last_seq, s3);
  CHECK(!a.malformed && !a.out_of_order);
  CHECK_EQ(a.durable, 99u);
  mc_hidx_follow(h, s2, 0, on_answer, &a); /* acknowledges two: the third is sent again */
  REQUIRE(ans_wait(&a, 2, 1000));
  CHECK_EQ(a.n, 1u);
  CHECK_EQ(a.first_seq, s3);
  CHECK_EQ(a.durable, s2);
  mc_hidx_follow(h, s3, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 3, 1000));
  CHECK_EQ(a.n, 0u);
  CHECK_EQ(a.durable, s3);
  CHECK_EQ(mc_hidx_durable(f), s3);
  mc_hidx_close(h);
  mc_hidx_feed_stop(f);
}

/* A record's copy (a writer's witness) is the record's own encoding, byte for byte; none without a seq. */
static void test_copy(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(7);
  struct mc_hidx *h = mc_hidx_open(f, U(3));
  struct mc_wbuf got = {0}, want = {0};
  uint64_t s1 = mc_hidx_put(h, "key-a", 5, U(9), 4096, 8192, 8000, 1, 50, NULL, &got);
  uint64_t s2 = mc_hidx_put(h, "key-b", 5, U(9), 0, 64, 64, 0, 0, "grp", &got);
  mc_hidx_encode(&want, s1, MC_HIDX_PUT, "key-a", 5, U(9), 4096, 8192, 8000, 1, 50, NULL);
  mc_hidx_encode(&want, s2, MC_HIDX_PUT, "key-b", 5, U(9), 0, 64, 64, 0, 0, "grp");
  CHECK_EQ(got.len, want.len);
  CHECK(got.len == want.len && !memcmp(got.p, want.p, got.len));
  mc_hidx_close(h); /* (close drops the feed's reference: h is gone past here) */
  struct mc_hidx *c = mc_hidx_open(f, U(4));
  mc_hidx_ref(c);
  mc_hidx_close(c);
  size_t len = got.len;
  CHECK_EQ(mc_hidx_put(c, "key-c", 5, U(9), 0, 64, 64, 0, 0, NULL, &got), 0u); /* closed: no seq, no copy */
  CHECK_EQ(got.len, len);
  mc_hidx_unref(c);
  mc_w_free(&got);
  mc_w_free(&want);
  mc_hidx_feed_stop(f);
}

static void test_long_poll(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx *h = mc_hidx_open(f, U(2));
  struct ans a;
  ans_init(&a);
  /* answered by its time: not before, and not long after */
  uint64_t t0 = mc_now_ns();
  mc_hidx_follow(h, 0, 80, on_answer, &a);
  CHECK_EQ(a.got, 0);
  REQUIRE(ans_wait(&a, 1, 3000));
  CHECK(a.at_ns - t0 >= 80ull * 1000000);
  CHECK_EQ(a.n, 0u);
  /* answered by a record, long before its time */
  mc_hidx_follow(h, 0, 1000, on_answer, &a);
  usleep(20000);
  CHECK_EQ(a.got, 1);
  t0 = mc_now_ns();
  uint64_t s = mc_hidx_put(h, "x", 1, U(9), 0, 64, 64, 0, 0, NULL, NULL);
  REQUIRE(ans_wait(&a, 2, 3000));
  CHECK_EQ(a.n, 1u);
  CHECK_EQ(a.first_seq, s);
  CHECK(a.at_ns - t0 < 500ull * 1000000); /* (MC_HIDX_BATCH_US; generous for a loaded machine) */
  /* a close answers the waiting poll */
  mc_hidx_follow(h, s, 1000, on_answer, &a);
  mc_hidx_close(h);
  REQUIRE(ans_wait(&a, 3, 1000));
  CHECK_EQ(a.n, 0u);
  mc_hidx_feed_stop(f);
}

/* A holder that polls again while puts keep coming is not answered at once each time: what is queued waits
 * for the end of the batch window that began with the last answer (at most one answer per window), and is
 * then sent whole. */
static void test_batch_window(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx *h = mc_hidx_open(f, U(3));
  struct ans a;
  ans_init(&a);
  mc_hidx_follow(h, 0, 1000, on_answer, &a);
  uint64_t t0 = mc_now_ns(); /* the first answer comes after this, the window starts with it */
  uint64_t s1 = mc_hidx_put(h, "a", 1, U(9), 0, 64, 64, 0, 0, NULL, NULL); /* after a quiet spell: answered at once */
  REQUIRE(ans_wait(&a, 1, 3000));
  CHECK_EQ(a.n, 1u);
  uint64_t s2 = mc_hidx_put(h, "b", 1, U(9), 64, 64, 64, 0, 0, NULL, NULL);
  uint64_t s3 = mc_hidx_put(h, "c", 1, U(9), 128, 64, 64, 0, 0, NULL, NULL);
  mc_hidx_follow(h, s1, 1000, on_answer, &a); /* records queued, but the window is not over: it waits */
  REQUIRE(ans_wait(&a, 2, 3000));
  CHECK_EQ(a.n, 2u);
  CHECK_EQ(a.first_seq, s2);
  CHECK(a.at_ns - t0 >= MC_HIDX_BATCH_US * 1000ull);
  mc_hidx_follow(h, s3, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 3, 1000));
  CHECK_EQ(a.n, 0u);
  mc_hidx_close(h);
  mc_hidx_feed_stop(f);
}

/* A DROP is not held for the batch window: the space it frees waits for its acknowledgement (docs/ha.md),
 * so a poll that finds one queued, or is waiting when one comes, is answered at once, PUTs before it
 * included. */
static void test_drop_at_once(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx *h = mc_hidx_open(f, U(3));
  struct ans a;
  ans_init(&a);
  mc_hidx_follow(h, 0, 1000, on_answer, &a);
  uint64_t acked = mc_hidx_put(h, "a", 1, U(9), 0, 64, 64, 0, 0, NULL, NULL); /* after a quiet spell: answered at once */
  REQUIRE(ans_wait(&a, 1, 3000));
  /* inside the window that answer began, a PUT waits; a DROP arriving after it ends the wait. Whether the
   * feed thread woke before the window's end is a matter of timing on a loaded machine: one of three
   * tries must see it (the window is 10 ms; without the DROP every try would wait for its end). */
  int early = 0;
  for (int t = 0; t < 3 && !early; t++) {
    uint64_t w0 = a.at_ns; /* the window starts with the answer before */
    mc_hidx_follow(h, acked, 1000, on_answer, &a);
    uint64_t sp = mc_hidx_put(h, "b", 1, U(9), 64, 64, 64, 0, 0, NULL, NULL);
    uint64_t sd = mc_hidx_drop(h, "b", 1, U(9));
    REQUIRE(ans_wait(&a, 2 + t, 3000));
    CHECK_EQ(a.n, 2u);
    CHECK_EQ(a.first_seq, sp);
    CHECK_EQ(a.last_seq, sd);
    early = a.at_ns - w0 < MC_HIDX_BATCH_US * 1000ull;
    acked = sd;
  }
  CHECK(early);
  /* a DROP already queued when the poll comes inside the window: answered by the poll itself */
  int got = a.got;
  uint64_t sd = mc_hidx_drop(h, "a", 1, U(9));
  mc_hidx_follow(h, acked, 1000, on_answer, &a);
  CHECK_EQ(a.got, got + 1); /* synchronously */
  CHECK_EQ(a.n, 1u);
  CHECK_EQ(a.first_seq, sd);
  mc_hidx_close(h);
  mc_hidx_feed_stop(f);
}

static void test_two_holders(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx *a = mc_hidx_open(f, U(3)), *b = mc_hidx_open(f, U(4));
  uint64_t sa = mc_hidx_put(a, "a", 1, U(9), 0, 64, 64, 0, 0, NULL, NULL);
  uint64_t sb = mc_hidx_put(b, "b", 1, U(8), 0, 64, 64, 0, 0, NULL, NULL);
  struct ans x;
  ans_init(&x);
  mc_hidx_follow(b, sb, 0, on_answer, &x); /* b acknowledges; a does not: durable stays below a's record */
  REQUIRE(ans_wait(&x, 1, 1000));
  CHECK_EQ(mc_hidx_durable(f), sa - 1);
  mc_hidx_follow(a, sa, 0, on_answer, &x);
  REQUIRE(ans_wait(&x, 2, 1000));
  CHECK_EQ(mc_hidx_durable(f), sb);
  /* a holder that goes away no longer holds durable_seq back */
  uint64_t sa2 = mc_hidx_put(a, "a2", 2, U(9), 64, 64, 64, 0, 0, NULL, NULL);
  CHECK_EQ(mc_hidx_durable(f), sa2 - 1);
  mc_hidx_close(a);
  CHECK_EQ(mc_hidx_durable(f), sa2);
  mc_hidx_close(b);
  mc_hidx_feed_stop(f);
}

static void test_overflow(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx *h = mc_hidx_open(f, U(5));
  static char key[60000];
  memset(key, 'k', sizeof(key));
  uint64_t last = 0;
  for (int i = 0; i < (int)(MC_HIDX_QUEUE_MAX / sizeof(key)) + 20; i++)
    last = mc_hidx_put(h, key, sizeof(key), U(9), (uint64_t)i * 64, 64, 64, 0, 0, NULL, NULL);
  CHECK(last > 0);
  /* the bound was passed: what came before was dropped, durable_seq went past it */
  CHECK(mc_hidx_durable(f) >= last - 25);
  struct ans a;
  ans_init(&a);
  mc_hidx_follow(h, 0, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 1, 1000));
  CHECK_EQ(a.flags, 1); /* resync */
  CHECK(a.n < 30u);
  CHECK(!a.malformed);
  uint64_t first = a.first_seq;
  /* the flag stays until a record queued after the overflow is acknowledged: a lost answer cannot hide it */
  mc_hidx_follow(h, first - 1, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 2, 1000));
  CHECK_EQ(a.flags, 1);
  CHECK(mc_hidx_resyncing(h));
  /* the re-sent records, a shard at a time, while less than one answer is queued */
  uint32_t shard = 99;
  static char big[MC_HIDX_ANSWER_MAX];
  memset(big, 'b', sizeof(big));
  uint64_t sb = mc_hidx_put(h, big, sizeof(big), U(9), 0, 64, 64, 0, 0, NULL, NULL);
  CHECK(!mc_hidx_dump_next(h, &shard)); /* more than one answer is queued: the polls pace the resync */
  mc_hidx_follow(h, sb, 0, on_answer, &a);
  REQUIRE(ans_wait(&a, 3, 1000));
  CHECK_EQ(a.flags, 0);
  REQUIRE(mc_hidx_dump_next(h, &shard));
  CHECK_EQ(shard, 0u);
  mc_hidx_dump_done(h, 0, 3, 0);
  mc_hidx_dump_done(h, 0, 3, 0); /* a stale one (another overflow started over meanwhile) moves nothing */
  REQUIRE(mc_hidx_dump_next(h, &shard));
  CHECK_EQ(shard, 1u);
  mc_hidx_dump_done(h, 1, 3, 0);
  mc_hidx_dump_done(h, 2, 3, 0);
  CHECK(!mc_hidx_dump_next(h, &shard));
  CHECK(!mc_hidx_resyncing(h));
  mc_hidx_close(h);
  mc_hidx_feed_stop(f);
}

/* ---- many at once ---- */
#define NH 3
#define NW 4
#define PER 5000
static struct mc_hidx *g_h[NH];
static atomic_int g_writers_done;
struct poller {
  int idx;
  uint64_t acked, received;
  int bad;
};

static void *writer(void *arg) {
  long w = (long)arg;
  char key[32];
  for (int i = 0; i < PER; i++) {
    int n = snprintf(key, sizeof(key), "w%ld-%d", w, i);
    mc_hidx_put(g_h[i % NH], key, (uint32_t)n, U(9), (uint64_t)i * 64, 64, 64, 0, 0, NULL, NULL);
  }
  atomic_fetch_add(&g_writers_done, 1);
  return NULL;
}

static void *poller(void *arg) {
  struct poller *p = arg;
  struct ans a;
  ans_init(&a);
  for (int round = 1;; round++) {
    int done_before = atomic_load(&g_writers_done) == NW; /* an empty answer after this is the end */
    mc_hidx_follow(g_h[p->idx], p->acked, 50, on_answer, &a);
    if (!ans_wait(&a, round, 5000)) {
      p->bad = 1;
      break;
    }
    pthread_mutex_lock(&a.mu);
    if (a.malformed || a.out_of_order || (a.n && a.first_seq <= p->acked)) p->bad = 1;
    p->received += a.n;
    if (a.n) p->acked = a.last_seq;
    uint32_t n = a.n;
    pthread_mutex_unlock(&a.mu);
    if (!n && done_before) break;
  }
  return NULL;
}

static void test_concurrent(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  for (int i = 0; i < NH; i++) g_h[i] = mc_hidx_open(f, U(10 + (uint64_t)i));
  pthread_t w[NW], p[NH];
  struct poller ps[NH];
  for (int i = 0; i < NH; i++) {
    ps[i] = (struct poller){i};
    pthread_create(&p[i], NULL, poller, &ps[i]);
  }
  for (long i = 0; i < NW; i++) pthread_create(&w[i], NULL, writer, (void *)i);
  for (int i = 0; i < NW; i++) pthread_join(w[i], NULL);
  uint64_t total = 0;
  for (int i = 0; i < NH; i++) {
    pthread_join(p[i], NULL);
    CHECK_EQ(ps[i].bad, 0);
    total += ps[i].received;
  }
  CHECK_EQ(total, (uint64_t)NW * PER);
  CHECK_EQ(mc_hidx_durable(f), mc_hidx_next_seq(f) - 1);
  for (int i = 0; i < NH; i++) mc_hidx_close(g_h[i]);
  mc_hidx_feed_stop(f);
}

/* Many holders (the feed keeps them in two heaps, holder_feed.c): durable_seq is always just below the oldest
 * unacknowledged record of any holder, through records queued and acknowledged in a random order; and
 * polls waiting with different deadlines are each answered, none before its time and in the order their
 * times come. */
#define MANY 1500
#define RECS 4
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) { return mc_tp_xorshift(&rng_state); }

struct order {
  pthread_mutex_t mu;
  int n;
  int who[MANY];
  uint64_t at[MANY];
};
struct waiter {
  struct order *o;
  int idx;
};
static void on_ordered(void *arg, struct mc_wbuf *body) {
  struct waiter *w = arg;
  pthread_mutex_lock(&w->o->mu);
  w->o->at[w->idx] = mc_now_ns();
  w->o->who[w->o->n++] = w->idx;
  pthread_mutex_unlock(&w->o->mu);
  mc_w_free(body);
}

static void test_many_holders(void) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  static struct mc_hidx *h[MANY];
  static uint64_t seq[MANY][RECS];
  static int acked[MANY]; /* records of holder i acknowledged so far */
  for (int i = 0; i < MANY; i++) h[i] = mc_hidx_open(f, U(1000 + (uint64_t)i));
  int left[MANY];
  for (int i = 0; i < MANY; i++) left[i] = RECS;
  for (int done = 0; done < MANY * RECS;) { /* queued in a random interleaving */
    int i = (int)(rnd() % MANY);
    if (!left[i]) continue;
    seq[i][RECS - left[i]] = mc_hidx_put(h[i], "k", 1, U(9), 0, 64, 64, 0, 0, NULL, NULL);
    left[i]--, done++;
  }
  int bad = 0;
  for (int open = MANY; open > 0;) { /* acknowledged in a random order, checked at every step */
    int i = (int)(rnd() % MANY);
    while (acked[i] == RECS) i = (i + 1) % MANY;
    acked[i] += 1 + (int)(rnd() % (uint64_t)(RECS - acked[i]));
    mc_hidx_ack(h[i], seq[i][acked[i] - 1]);
    if (acked[i] == RECS) open--;
    uint64_t want = mc_hidx_next_seq(f) - 1;
    for (int k = 0; k < MANY; k++)
      if (acked[k] < RECS && seq[k][acked[k]] - 1 < want) want = seq[k][acked[k]] - 1;
    if (mc_hidx_durable(f) != want) bad++;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(mc_hidx_durable(f), mc_hidx_next_seq(f) - 1);

  /* polls waiting 100 + 2*j ms, j a shuffle of 0..299, issued at once */
  enum { W = 300 };
  static struct order o;
  memset(&o, 0, sizeof(o));
  pthread_mutex_init(&o.mu, NULL);
  static struct waiter w[W];
  int perm[W];
  uint64_t asked[W];
  for (int j = 0; j < W; j++) perm[j] = j;
  for (int j = W - 1; j > 0; j--) {
    int k = (int)(rnd() % (uint64_t)(j + 1)), t = perm[j];
    perm[j] = perm[k], perm[k] = t;
  }
  for (int j = 0; j < W; j++) {
    w[j] = (struct waiter){&o, j};
    asked[j] = mc_now_ns();
    mc_hidx_follow(h[j], seq[j][RECS - 1], (uint32_t)(100 + 2 * perm[j]), on_ordered, &w[j]);
  }
  for (int t = 0; t < 500; t++) { /* the longest waits 698 ms */
    pthread_mutex_lock(&o.mu);
    int n = o.n;
    pthread_mutex_unlock(&o.mu);
    if (n == W) break;
    usleep(10000);
  }
  pthread_mutex_lock(&o.mu);
  CHECK_EQ(o.n, W);
  int early = 0, inverted = 0;
  for (int j = 0; j < o.n; j++) {
    int a = o.who[j];
    if (o.at[a] < asked[a] + (uint64_t)(100 + 2 * perm[a]) * 1000000ull) early++;
    /* in the order of their times: a poll answered after one due clearly later (the 2 ms steps are far
     * wider than the time it took to issue them all, on a machine that is not stalled) */
    if (j && 100 + 2 * perm[o.who[j - 1]] > 100 + 2 * perm[a] + 20) inverted++;
  }
  pthread_mutex_unlock(&o.mu);
  CHECK_EQ(early, 0);
  CHECK_EQ(inverted, 0);
  for (int i = 0; i < MANY; i++) mc_hidx_close(h[i]);
  mc_hidx_feed_stop(f);
  pthread_mutex_destroy(&o.mu);
}

TEST_MAIN(TEST_CASE(test_order_and_durable), TEST_CASE(test_many_holders), TEST_CASE(test_copy), TEST_CASE(test_long_poll), TEST_CASE(test_batch_window), TEST_CASE(test_drop_at_once),
          TEST_CASE(test_two_holders),
          TEST_CASE(test_overflow), TEST_CASE(test_concurrent))
