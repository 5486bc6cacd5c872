/* hidx_feed: the master's holder-index feed (src/master_core/holder_feed.c) alone, with many holders; no RPC, no
 * transfer engine. What the feed costs the writer's path as the number of holders (one per client with a
 * segment) grows (docs/master.md, "Scale"; bench/RESULTS.md, "The holder-index feed with many holders").
 *
 *   hidx_feed [N ...]        (default: 100 1000 10000 50000)
 *
 * For each N, with a fresh feed:
 * 1. N holders are opened and each gets RECS unacknowledged records.
 * 2. ROUNDS rounds of "queue a record for a random holder, acknowledge that holder's oldest": the mean cost of
 *    the pair (the append takes the lock every record append takes; the acknowledgement moves the holder in
 *    the heap of holders with unacknowledged records and moves durable_seq).
 * 3. every holder polls, acknowledging all it has and waiting WAIT_MS for more: all N polls are due at the same
 *    moment; the time from that moment until the last one is answered (the feed answers due polls in order).
 * Prints, per N:
 *   HIDXFEED n=<N> put_ack_ns=<t> polls_answered_ms=<t> durable_ok=<0|1>
 * durable_ok: durable_seq reached the last record once everything was acknowledged (it must). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "master_core/holder_feed.h"

#define RECS 4
#define ROUNDS 200000
#define WAIT_MS 300

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static struct mc_uuid uuid_of(uint64_t v) {
  struct mc_uuid u = {0};
  u.lo = v;
  return u;
}

static _Atomic long answered;
static _Atomic uint64_t last_answer_ns;

static void on_answer(void *arg, struct mc_wbuf *body) {
  (void)arg;
  atomic_store(&last_answer_ns, mc_now_ns());
  atomic_fetch_add(&answered, 1);
  mc_w_free(body);
}

static int run(long n) {
  struct mc_hidx_feed *f = mc_hidx_feed_start(1);
  struct mc_hidx **h = mc_calloc((size_t)n, sizeof(*h));
  /* each holder's unacknowledged seqs, oldest first: a ring of RECS + 1 (a round adds one, then acks one) */
  uint64_t(*q)[RECS + 1] = mc_calloc((size_t)n, sizeof(*q));
  unsigned *head = mc_calloc((size_t)n, sizeof(*head));
  uint64_t *newest = mc_calloc((size_t)n, sizeof(*newest));
  for (long i = 0; i < n; i++) {
    h[i] = mc_hidx_open(f, uuid_of(1000 + (uint64_t)i));
    for (int r = 0; r < RECS; r++) q[i][r] = newest[i] = mc_hidx_put(h[i], "key", 3, uuid_of(7), 0, 64, 64, 0, 0, NULL, NULL);
  }
  uint64_t t0 = mc_now_ns();
  for (long k = 0; k < ROUNDS; k++) {
    long i = (long)(rnd() % (uint64_t)n);
    newest[i] = mc_hidx_put(h[i], "key", 3, uuid_of(7), 0, 64, 64, 0, 0, NULL, NULL);
    q[i][(head[i] + RECS) % (RECS + 1)] = newest[i];
    mc_hidx_ack(h[i], q[i][head[i]]); /* its oldest */
    head[i] = (head[i] + 1) % (RECS + 1);
  }
  double put_ack_ns = (double)(mc_now_ns() - t0) / ROUNDS;

  atomic_store(&answered, 0);
  /* acknowledge everything first (a poll answers at once when records are queued), then wait for more */
  for (long i = 0; i < n; i++) mc_hidx_ack(h[i], newest[i]);
  int durable_ok = mc_hidx_durable(f) == mc_hidx_next_seq(f) - 1;
  uint64_t asked = mc_now_ns();
  for (long i = 0; i < n; i++) mc_hidx_follow(h[i], newest[i], WAIT_MS, on_answer, NULL);
  uint64_t due = asked + (uint64_t)WAIT_MS * 1000000ull;
  for (int t = 0; t < 1000 && atomic_load(&answered) < n; t++) usleep(10000); /* at most 10 s */
  long got = atomic_load(&answered);
  double answered_ms = got == n ? ((double)atomic_load(&last_answer_ns) - (double)due) / 1e6 : -1;
  printf("HIDXFEED n=%ld put_ack_ns=%.0f polls_answered_ms=%.1f durable_ok=%d\n", n, put_ack_ns, answered_ms,
         durable_ok);
  if (got != n) printf("# only %ld of %ld polls were answered within 10 s\n", got, n);
  fflush(stdout);
  for (long i = 0; i < n; i++) mc_hidx_close(h[i]);
  mc_hidx_feed_stop(f);
  mc_free(h);
  mc_free(q);
  mc_free(head);
  mc_free(newest);
  return got == n && durable_ok ? 0 : 1;
}

int main(int argc, char **argv) {
  static const long defaults[] = {100, 1000, 10000, 50000};
  int rc = 0;
  printf("# hidx_feed: %d records a holder, %d put + ack rounds, polls waiting %d ms\n", RECS, ROUNDS, WAIT_MS);
  if (argc > 1) {
    for (int a = 1; a < argc; a++) {
      long n = strtol(argv[a], NULL, 10);
      if (n < 1 || n > 1000000) {
        fprintf(stderr, "hidx_feed: N must be 1..1000000: %s\n", argv[a]);
        return 2;
      }
      rc |= run(n);
    }
  } else {
    for (size_t a = 0; a < sizeof(defaults) / sizeof(defaults[0]); a++) rc |= run(defaults[a]);
  }
  return rc;
}
