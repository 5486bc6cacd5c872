/* Holder indexes at the master (docs/ha.md, "Holder indexes"; FOLLOW_INDEX in proto.h), against the real
 * mooncake_master binary over raw RPCs: a client with no segment is refused; once a holder follows, every
 * completed object on its segment becomes a PUT record and every removal a DROP; a long poll waits for
 * records and is answered as soon as one comes; freed space is not handed out again before the holder
 * acknowledged its DROP; an upsert takes fresh space instead of rewriting in place; a holder that never
 * follows keeps today's behaviour (space reused at once); an index upload (REMOUNT_INDEX) that reports an
 * object the master holds exactly there is left alone (no DROP), one that contradicts it is dropped; a holder
 * whose queue overflowed is resynced with every live object on its segment. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/master_client.h"
#include "lib/test.h"
#include "master_core/holder_feed.h"

#define SEG_BASE 0x100000000ull

struct rec {
  uint64_t seq, off, len, size;
  uint8_t kind;
  char key[64];
};

struct answer {
  int rc;
  uint64_t durable;
  uint8_t flags;
  uint32_t n;
  struct rec r[16];
  long ms; /* how long the call took */
};

static int follow(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t acked, uint32_t wait_ms, struct answer *a) {
  struct mc_wbuf w = {0}, rep = {0};
  mc_put_uuid(&w, client);
  mc_w_u64(&w, acked);
  mc_w_u32(&w, wait_ms);
  long t0 = mc_tp_now_ms();
  memset(a, 0, sizeof(*a));
  a->rc = mt_call(c, MC_OP_FOLLOW_INDEX, &w, &rep);
  a->ms = mc_tp_now_ms() - t0;
  if (!a->rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    a->durable = mc_r_u64(&r);
    a->flags = mc_r_u8(&r);
    a->n = mc_r_u32(&r);
    for (uint32_t i = 0; i < a->n && i < 16 && !r.err; i++) {
      struct rec *x = &a->r[i];
      x->seq = mc_r_u64(&r);
      x->kind = mc_r_u8(&r);
      uint32_t kl;
      const uint8_t *k = mc_r_blob(&r, &kl);
      if (!r.err) snprintf(x->key, sizeof(x->key), "%.*s", (int)kl, (const char *)k);
      mc_r_take(&r, 16);
      x->off = mc_r_u64(&r);
      x->len = mc_r_u64(&r);
      x->size = mc_r_u64(&r);
      mc_r_u8(&r);
      mc_r_u64(&r);
    }
    if (r.err || a->n > 16) a->rc = -9999;
  }
  mc_w_free(&rep);
  return a->rc;
}

static uint64_t last_seq(const struct answer *a) { return a->n ? a->r[a->n - 1].seq : 0; }

/* PutStart (or UpsertStart) + End of one replica; *addr gets its address from the start's answer (a read
 * would take a lease, which holds freed space by itself). */
static int put_at(struct mc_mrpc_client *c, uint16_t op, struct mc_uuid client, const char *key, uint64_t len,
                  uint64_t *addr) {
  struct mc_put_config cfg = mt_cfg(1);
  struct mc_replica_rec *reps = NULL;
  uint32_t n = 0;
  int rc = mt_start(c, op, client, key, len, &cfg, &reps, &n);
  *addr = !rc && n == 1 ? reps[0].address : 0;
  mc_replicas_free(reps, n);
  return rc ? rc : mt_end(c, op == MC_OP_PUT_START ? MC_OP_PUT_END : MC_OP_UPSERT_END, client, key, MC_REPLICA_ALL);
}

struct poll_arg {
  int port;
  struct mc_uuid client;
  uint64_t acked;
  struct answer a;
};

static void *poll_thread(void *arg) {
  struct poll_arg *p = arg;
  struct mc_mrpc_client *c = mt_connect(p->port);
  follow(c, p->client, p->acked, 1000, &p->a);
  mc_mrpc_client_free(c);
  return NULL;
}

static void test_records_and_space(void) {
  struct mt_master mm;
  REQUIRE(mt_master_start(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_uuid holder = mt_id(1);
  struct answer a;
  CHECK_EQ(follow(c, holder, 0, 0, &a), MC_CLIENT_NOT_FOUND); /* no segment yet */

  struct mc_segment_rec seg = mt_seg(1, "holder-a:1", SEG_BASE, 128 * 1024);
  REQUIRE(mt_mount(c, holder, &seg) == 0);
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0); /* from now on it follows */
  CHECK_EQ(a.n, 0u);

  /* a completed put: one PUT record with its place */
  uint64_t a1;
  CHECK_EQ(put_at(c, MC_OP_PUT_START, holder, "k1", 64 * 1024, &a1), 0); /* half the segment */
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  REQUIRE(a.n == 1);
  CHECK_EQ(a.r[0].kind, MC_HIDX_PUT);
  CHECK_STR(a.r[0].key, "k1");
  CHECK_EQ(a.r[0].off, a1 - SEG_BASE);
  CHECK_EQ(a.r[0].len, 64u * 1024);
  CHECK_EQ(a.r[0].size, 64u * 1024);
  CHECK(a.durable < a.r[0].seq); /* not acknowledged yet */
  uint64_t s1 = a.r[0].seq;

  /* removed: a DROP, and its space is not handed out before the DROP is acknowledged */
  CHECK_EQ(mt_remove(c, "k1", 1), 0);
  CHECK_EQ(follow(c, holder, s1, 0, &a), 0);
  REQUIRE(a.n == 1);
  CHECK_EQ(a.r[0].kind, MC_HIDX_DROP);
  CHECK_STR(a.r[0].key, "k1");
  CHECK(a.durable >= s1);
  uint64_t s2 = a.r[0].seq;
  usleep(100 * 1000); /* ten eviction ticks: the space would be free by now without the rule */
  CHECK_EQ(mt_put(c, holder, "k2", 128 * 1024, 1), MC_NO_AVAILABLE_HANDLE); /* needs k1's half too */
  CHECK_EQ(follow(c, holder, s2, 0, &a), 0); /* acknowledged */
  CHECK_EQ(a.n, 0u);
  int rc = MC_NO_AVAILABLE_HANDLE;
  for (int i = 0; i < 200 && rc == MC_NO_AVAILABLE_HANDLE; i++) {
    usleep(10 * 1000);
    rc = mt_put(c, holder, "k2", 128 * 1024, 1);
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(mt_remove(c, "k2", 1), 0); /* (a full segment would be evicted from) */
  CHECK_EQ(follow(c, holder, s2, 0, &a), 0);
  CHECK(a.n == 2 && a.r[0].kind == MC_HIDX_PUT && !strcmp(a.r[0].key, "k2") && a.r[1].kind == MC_HIDX_DROP);
  CHECK_EQ(mt_put(c, holder, "k3", 4096, 1), MC_NO_AVAILABLE_HANDLE); /* k2's space waits for its DROP's ack */
  uint64_t s_drop = last_seq(&a);
  CHECK_EQ(follow(c, holder, s_drop, 0, &a), 0);
  rc = MC_NO_AVAILABLE_HANDLE;
  for (int i = 0; i < 200 && rc == MC_NO_AVAILABLE_HANDLE; i++) {
    usleep(10 * 1000);
    rc = mt_put(c, holder, "k3", 4096, 1);
  }
  CHECK_EQ(rc, 0);
  CHECK_EQ(follow(c, holder, s_drop, 0, &a), 0);
  CHECK(a.n == 1 && a.r[0].kind == MC_HIDX_PUT && !strcmp(a.r[0].key, "k3"));
  uint64_t s3 = last_seq(&a);

  /* a long poll waits for records, and one coming ends it at once */
  struct poll_arg p = {mm.port, holder, s3};
  pthread_t th;
  pthread_create(&th, NULL, poll_thread, &p);
  usleep(200 * 1000);
  CHECK_EQ(mt_remove(c, "k3", 1), 0);
  pthread_join(th, NULL);
  CHECK_EQ(p.a.rc, 0);
  CHECK(p.a.n == 1 && p.a.r[0].kind == MC_HIDX_DROP);
  CHECK(p.a.ms >= 150 && p.a.ms < 900); /* it waited, and did not wait for its time */
  CHECK_EQ(follow(c, holder, last_seq(&p.a), 300, &a), 0); /* nothing comes: answered by its time */
  CHECK_EQ(a.n, 0u);
  CHECK(a.ms >= 250);

  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

static void test_upsert_not_in_place(void) {
  struct mt_master mm;
  REQUIRE(mt_master_start(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_uuid holder = mt_id(2);
  struct mc_segment_rec seg = mt_seg(2, "holder-b:1", SEG_BASE, 1 << 20);
  REQUIRE(mt_mount(c, holder, &seg) == 0);
  struct answer a;
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  uint64_t before, after;
  CHECK_EQ(put_at(c, MC_OP_PUT_START, holder, "u", 4096, &before), 0);
  CHECK_EQ(put_at(c, MC_OP_UPSERT_START, holder, "u", 4096, &after), 0);
  CHECK(before && after && before != after); /* fresh space: the holder's entry never describes changing bytes */
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  REQUIRE(a.n == 3);
  CHECK(a.r[0].kind == MC_HIDX_PUT && a.r[0].off == before - SEG_BASE);
  CHECK(a.r[1].kind == MC_HIDX_DROP && !strcmp(a.r[1].key, "u"));
  CHECK(a.r[2].kind == MC_HIDX_PUT && a.r[2].off == after - SEG_BASE);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* A holder that does not follow: no records, space reused at once, upserts in place (as before). */
static void test_not_following(void) {
  struct mt_master mm;
  REQUIRE(mt_master_start(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_uuid holder = mt_id(3);
  struct mc_segment_rec seg = mt_seg(3, "holder-c:1", SEG_BASE, 64 * 1024);
  REQUIRE(mt_mount(c, holder, &seg) == 0);
  CHECK_EQ(mt_put(c, holder, "k1", 64 * 1024, 1), 0);
  int rm = mt_remove(c, "k1", 1);
  CHECK(rm == 0 || rm == MC_OBJECT_NOT_FOUND); /* (k1 fills the segment: eviction may have taken it first) */
  uint64_t before, after;
  CHECK_EQ(put_at(c, MC_OP_PUT_START, holder, "k2", 64 * 1024, &before), 0);
  CHECK_EQ(put_at(c, MC_OP_UPSERT_START, holder, "k2", 64 * 1024, &after), 0);
  CHECK_EQ(after, before); /* rewritten in place */
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* REMOUNT_INDEX of entries {key, offset, length, size}; res[i] gets each entry's status. */
static int remount_index(struct mc_mrpc_client *c, struct mc_uuid client, struct mc_uuid seg, const char *const *keys,
                         const uint64_t (*ols)[3], uint32_t n, int32_t *res) {
  struct mc_wbuf w = {0}, rep = {0};
  mc_put_uuid(&w, client);
  mc_put_uuid(&w, seg);
  mc_w_u32(&w, n);
  for (uint32_t i = 0; i < n; i++) {
    mc_w_blob(&w, keys[i], (uint32_t)strlen(keys[i]));
    mc_w_u64(&w, ols[i][0]);
    mc_w_u64(&w, ols[i][1]);
    mc_w_u64(&w, ols[i][2]);
    mc_w_u8(&w, 0);
    mc_w_u64(&w, 0);
  }
  mc_w_u64(&w, 0); /* applied_seq */
  mc_w_u8(&w, 1);  /* last batch */
  int rc = mt_call(c, MC_OP_REMOUNT_INDEX, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint32_t got = mc_r_u32(&r);
    for (uint32_t i = 0; i < n && i < got; i++) res[i] = mc_r_i32(&r);
    if (r.err || got != n) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

/* A holder's upload repeats what the master holds (its table took in the PUT records of this master's own
 * puts): those entries are kept as they are, with no DROP; an entry over the same space under another key
 * is refused and dropped. */
static void test_upload_of_held_entries(void) {
  struct mt_master mm;
  REQUIRE(mt_master_start(&mm, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_uuid holder = mt_id(4);
  struct mc_segment_rec seg = mt_seg(4, "holder-d:1", SEG_BASE, 1 << 20);
  REQUIRE(mt_mount(c, holder, &seg) == 0);
  struct answer a;
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  uint64_t addr;
  CHECK_EQ(put_at(c, MC_OP_PUT_START, holder, "held", 8192, &addr), 0);
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  REQUIRE(a.n == 1 && a.r[0].kind == MC_HIDX_PUT);
  uint64_t s1 = a.r[0].seq, off = a.r[0].off, len = a.r[0].len;
  CHECK_EQ(follow(c, holder, s1, 0, &a), 0); /* acknowledged */
  const char *keys[] = {"held", "other"};
  const uint64_t ols[2][3] = {{off, len, 8192}, {off, len, 8192}};
  int32_t res[2] = {-1, -1};
  CHECK_EQ(remount_index(c, holder, seg.id, keys, ols, 2, res), 0);
  CHECK_EQ(res[0], 0);                       /* known as it is */
  CHECK_EQ(res[1], MC_OBJECT_ALREADY_EXISTS); /* its space is taken */
  CHECK_EQ(follow(c, holder, s1, 0, &a), 0);
  REQUIRE(a.n == 1); /* one DROP, for "other" only */
  CHECK_EQ(a.r[0].kind, MC_HIDX_DROP);
  CHECK_STR(a.r[0].key, "other");
  CHECK_EQ(mt_exist(c, "held"), 1); /* (still there, and readable) */
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

/* Every record of one poll (any number), for the resync test: PUT keys are marked seen by their index. */
#define NSMALL 10
#define NLONG 1150 /* 1150 records of 60 000-byte keys pass the queue's 64 MiB bound */
#define LONG_KEY 60000
struct seen {
  uint8_t small[NSMALL], lng[NLONG];
  int dropped_small9_after_flag, bad;
};

static int follow_all(struct mc_mrpc_client *c, struct mc_uuid client, uint64_t acked, uint8_t *flags, uint32_t *n,
                      uint64_t *last, struct seen *sn) {
  struct mc_wbuf w = {0}, rep = {0};
  mc_put_uuid(&w, client);
  mc_w_u64(&w, acked);
  mc_w_u32(&w, 0);
  int rc = mt_call(c, MC_OP_FOLLOW_INDEX, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    mc_r_u64(&r);
    *flags = mc_r_u8(&r);
    *n = mc_r_u32(&r);
    if (*flags & 1) memset(sn, 0, sizeof(*sn)); /* what a holder does: clear, then take the records in */
    for (uint32_t i = 0; i < *n && !r.err; i++) {
      *last = mc_r_u64(&r);
      uint8_t kind = mc_r_u8(&r);
      uint32_t kl;
      const char *k = (const char *)mc_r_blob(&r, &kl);
      mc_r_take(&r, 16 + 8 * 3 + 1 + 8);
      if (r.err) break;
      int idx;
      if (kl > 6 && !memcmp(k, "small-", 6) && sscanf(k + 6, "%d", &idx) == 1 && idx >= 0 && idx < NSMALL)
        sn->small[idx] = kind == MC_HIDX_PUT;
      else if (kl == LONG_KEY && sscanf(k, "L%05d", &idx) == 1 && idx >= 0 && idx < NLONG)
        sn->lng[idx] = kind == MC_HIDX_PUT;
      else sn->bad = 1;
    }
    if (r.err || r.off != r.len) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

/* A holder that stops polling while objects keep coming passes its queue's bound: the queue is dropped, and
 * the holder is told to resync. The flag stays in every answer until the holder acknowledges a record queued
 * after the overflow (a lost answer cannot hide it), and the master re-sends a PUT record for every complete
 * replica on the holder's segment, so after clearing its index on the flag the holder ends with exactly the
 * live objects (docs/ha.md, "Holder indexes"). */
static void test_resync_after_overflow(void) {
  struct mt_master mm;
  /* the fake holder never pings: a long client TTL keeps it alive through a slow (sanitizer) run */
  const char *const ttl[] = {"--client_ttl=300", NULL};
  REQUIRE(mt_master_start(&mm, ttl) == 0);
  struct mc_mrpc_client *c = mt_connect(mm.port);
  struct mc_uuid holder = mt_id(5);
  struct mc_segment_rec seg = mt_seg(5, "holder-e:1", SEG_BASE, 256u << 20);
  REQUIRE(mt_mount(c, holder, &seg) == 0);
  struct answer a;
  CHECK_EQ(follow(c, holder, 0, 0, &a), 0);
  char key[64];
  for (int i = 0; i < NSMALL; i++) {
    snprintf(key, sizeof(key), "small-%d", i);
    CHECK_EQ(mt_put(c, holder, key, 4096, 1), 0);
  }
  CHECK_EQ(mt_remove(c, "small-9", 1), 0);
  static char lk[LONG_KEY + 1];
  memset(lk, 'x', LONG_KEY);
  for (int i = 0; i < NLONG; i++) { /* no poll meanwhile: the holder is far behind */
    char head[8];
    snprintf(head, sizeof(head), "L%05d", i);
    memcpy(lk, head, 6);
    REQUIRE(mt_put(c, holder, lk, 64, 1) == 0);
  }
  static struct seen sn;
  uint8_t flags = 0;
  uint32_t n = 0;
  uint64_t last = 0;
  REQUIRE(follow_all(c, holder, 0, &flags, &n, &last, &sn) == 0);
  CHECK_EQ(flags, 1); /* the resync */
  CHECK(n > 0);
  REQUIRE(follow_all(c, holder, 0, &flags, &n, &last, &sn) == 0); /* that answer was "lost": asked again */
  CHECK_EQ(flags, 1);
  int polls = 0, quiet = 0;
  for (; polls < 2000 && quiet < 3; polls++) {
    uint64_t acked = last;
    REQUIRE(follow_all(c, holder, acked, &flags, &n, &last, &sn) == 0);
    CHECK_EQ(flags, 0);
    quiet = n ? 0 : quiet + 1;
  }
  CHECK(quiet == 3);
  CHECK(!sn.bad);
  int small = 0, lng = 0;
  for (int i = 0; i < NSMALL; i++) small += sn.small[i];
  for (int i = 0; i < NLONG; i++) lng += sn.lng[i];
  CHECK_EQ(small, NSMALL - 1); /* small-9 was removed before the overflow: not re-sent */
  CHECK_EQ(sn.small[9], 0);
  CHECK_EQ(lng, NLONG);
  CHECK_EQ(mt_remove(c, "small-0", 1), 0); /* and records flow as before */
  REQUIRE(follow_all(c, holder, last, &flags, &n, &last, &sn) == 0);
  CHECK(flags == 0 && n == 1 && !sn.small[0]);
  mc_mrpc_client_free(c);
  CHECK_EQ(mt_master_stop(&mm), 0);
}

TEST_MAIN(TEST_CASE(test_records_and_space), TEST_CASE(test_upsert_not_in_place), TEST_CASE(test_not_following),
          TEST_CASE(test_upload_of_held_entries), TEST_CASE(test_resync_after_overflow))
