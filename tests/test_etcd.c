/* The etcd v3 client (src/meta/etcd.h) against real etcd processes: key-value round trips with the
 * fields etcd reports, the create-if-absent and delete-if-unchanged transactions, leases (keep-alive,
 * revoke, expiry), the watch (live events, replayed history, stop flag, deadline, compaction), a
 * 3-member cluster losing the member the client uses, dead endpoints in the list; and a fake HTTP server
 * answering garbage, which must give ERR_METADATA, never a crash or a hang. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "lib/proc.h"
#include "common/util.h"
#include "lib/test.h"
#include "meta/etcd.h"
#include "mooncake/transfer_engine.h"

/* ---- helpers ---- */

static struct mc_tp_service shared;

static void shared_stop(void) { mc_tp_service_stop(&shared); }

/* The single-node etcd the tests share (started on first use, stopped at exit), or -1. */
static int shared_port(void) {
  if (shared.pid > 0) return shared.port;
  if (mc_tp_start_etcd(&shared)) return -1;
  atexit(shared_stop);
  return shared.port;
}

static struct mc_etcd *open_ok(const char *endpoints) {
  struct mc_etcd *c = NULL;
  CHECK_EQ(mc_etcd_open(endpoints, &c), 0);
  CHECK(c != NULL);
  return c;
}

/* A client of the shared etcd, or NULL. */
static struct mc_etcd *open_shared(void) {
  char ep[64];
  int port = shared_port();
  if (port < 0) return NULL;
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", port);
  return open_ok(ep);
}

/* ---- key-value ---- */

static void test_open_and_endpoints(void) {
  struct mc_etcd *c = NULL;
  CHECK_EQ(mc_etcd_open(" , ;", &c), ERR_METADATA);
  CHECK(c == NULL);
  CHECK_EQ(mc_etcd_open("", &c), ERR_METADATA);
  c = open_ok("etcd://a:1; http://b:2/ ,c:3,etcd://d:4");
  if (c) CHECK_STR(mc_etcd_endpoints(c), "http://a:1,http://b:2,http://c:3,http://d:4");
  mc_etcd_close(c);
  mc_etcd_close(NULL);
}

/* put then get of value (len bytes): the value and the fields etcd reports. */
static void check_roundtrip(struct mc_etcd *c, const char *key, const char *value, size_t len) {
  int64_t rev = 0, hrev = 0;
  struct mc_etcd_kv kv;
  CHECK_EQ(mc_etcd_put(c, key, value, len, 0, &rev), 0);
  CHECK(rev > 0);
  REQUIRE(mc_etcd_get(c, key, &kv, &hrev) == 0);
  CHECK_EQ(kv.len, len);
  CHECK(kv.value != NULL && memcmp(kv.value, value, len) == 0 && kv.value[len] == 0);
  CHECK_EQ(kv.mod_rev, rev);
  CHECK(kv.create_rev > 0 && kv.create_rev <= rev);
  CHECK(kv.version >= 1);
  CHECK_EQ(kv.lease, 0);
  CHECK(hrev >= rev);
  mc_etcd_kv_free(&kv);
}

static void test_kv_roundtrip(void) {
  struct mc_etcd *c = open_shared();
  REQUIRE(c);
  char bin[256];
  for (int i = 0; i < 256; i++) bin[i] = (char)(255 - i); /* NULs, high bytes */
  for (size_t len = 0; len <= 5; len++) check_roundtrip(c, "t/kv/short", bin + 250, len); /* every padding */
  check_roundtrip(c, "t/kv/bin", bin, sizeof(bin));
  check_roundtrip(c, "t/kv/empty", "", 0); /* the gateway omits the empty value */
  char *big = malloc(200000);
  for (int i = 0; i < 200000; i++) big[i] = (char)(i * 7);
  check_roundtrip(c, "t/kv/big", big, 200000);
  free(big);
  check_roundtrip(c, "t/kv/odd key: spaces, \xc3\xa9, ?&=", "x", 1);

  /* a second write: same create_rev, new mod_rev, version 2 */
  int64_t r1 = 0, r2 = 0;
  struct mc_etcd_kv kv;
  CHECK_EQ(mc_etcd_put(c, "t/kv/v", "one", 3, 0, &r1), 0);
  CHECK_EQ(mc_etcd_put(c, "t/kv/v", "two", 3, 0, &r2), 0);
  CHECK(r2 > r1);
  if (mc_etcd_get(c, "t/kv/v", &kv, NULL) == 0) {
    CHECK_STR(kv.value, "two");
    CHECK_EQ(kv.create_rev, r1);
    CHECK_EQ(kv.mod_rev, r2);
    CHECK_EQ(kv.version, 2);
    mc_etcd_kv_free(&kv);
  } else {
    CHECK(!"get t/kv/v");
  }
  /* delete, absent, delete again */
  CHECK_EQ(mc_etcd_delete(c, "t/kv/v"), 0);
  kv.value = (char *)"untouched";
  int64_t hrev = 0;
  CHECK_EQ(mc_etcd_get(c, "t/kv/v", &kv, &hrev), MC_ETCD_NOT_FOUND);
  CHECK(kv.value == NULL && kv.len == 0 && kv.mod_rev == 0);
  CHECK(hrev > r2); /* the delete was a revision */
  CHECK_EQ(mc_etcd_delete(c, "t/kv/v"), 0);
  CHECK_EQ(mc_etcd_get(c, "t/kv/never", &kv, NULL), MC_ETCD_NOT_FOUND);
  mc_etcd_close(c);
}

/* ---- transactions ---- */

static void test_create_and_delete_if(void) {
  struct mc_etcd *c = open_shared();
  REQUIRE(c);
  const char *key = "t/txn/leader";
  struct mc_etcd_kv cur, kv;
  int won = -1, deleted = -1;
  int64_t rev = 0, rev2 = 0;
  CHECK_EQ(mc_etcd_create(c, key, "first:1", 0, &won, &rev, &cur), 0);
  CHECK_EQ(won, 1);
  CHECK(rev > 0);
  CHECK(cur.value == NULL);
  /* the second loses and sees the first */
  CHECK_EQ(mc_etcd_create(c, key, "second:2", 0, &won, &rev2, &cur), 0);
  CHECK_EQ(won, 0);
  CHECK_STR(cur.value, "first:1");
  CHECK_EQ(cur.len, 7);
  CHECK_EQ(cur.create_rev, rev);
  CHECK_EQ(cur.mod_rev, rev);
  CHECK_EQ(cur.version, 1);
  mc_etcd_kv_free(&cur);
  CHECK_EQ(mc_etcd_create(c, key, "third", 0, &won, NULL, NULL), 0); /* cur may be NULL */
  CHECK_EQ(won, 0);
  /* delete_if: a stale mod_rev deletes nothing */
  CHECK_EQ(mc_etcd_delete_if(c, key, rev + 1000, &deleted), 0);
  CHECK_EQ(deleted, 0);
  CHECK_EQ(mc_etcd_put(c, key, "rewritten", 9, 0, &rev2), 0);
  CHECK_EQ(mc_etcd_delete_if(c, key, rev, &deleted), 0); /* the old revision */
  CHECK_EQ(deleted, 0);
  CHECK_EQ(mc_etcd_get(c, key, &kv, NULL), 0);
  CHECK_STR(kv.value, "rewritten");
  mc_etcd_kv_free(&kv);
  CHECK_EQ(mc_etcd_delete_if(c, key, rev2, &deleted), 0); /* the right one */
  CHECK_EQ(deleted, 1);
  CHECK_EQ(mc_etcd_get(c, key, &kv, NULL), MC_ETCD_NOT_FOUND);
  CHECK_EQ(mc_etcd_delete_if(c, key, rev2, &deleted), 0); /* gone */
  CHECK_EQ(deleted, 0);
  /* create bound to a lease: the key carries it; an empty value */
  int64_t lease = 0;
  CHECK_EQ(mc_etcd_lease_grant(c, 30, &lease), 0);
  CHECK_EQ(mc_etcd_create(c, key, "", lease, &won, &rev, &cur), 0);
  CHECK_EQ(won, 1);
  CHECK_EQ(mc_etcd_create(c, key, "x", 0, &won, NULL, &cur), 0);
  CHECK_EQ(won, 0);
  CHECK_EQ(cur.lease, lease);
  CHECK_EQ(cur.len, 0);
  CHECK_STR(cur.value, "");
  CHECK_EQ(cur.mod_rev, rev);
  mc_etcd_kv_free(&cur);
  CHECK_EQ(mc_etcd_lease_revoke(c, lease), 0);
  CHECK_EQ(mc_etcd_get(c, key, &kv, NULL), MC_ETCD_NOT_FOUND);
  mc_etcd_close(c);
}

/* ---- leases ---- */

static void test_leases(void) {
  struct mc_etcd *c = open_shared();
  REQUIRE(c);
  int64_t id = 0, ttl = -1, rev = 0;
  struct mc_etcd_kv kv;
  CHECK_EQ(mc_etcd_lease_grant(c, 10, &id), 0);
  CHECK(id > 0);
  CHECK_EQ(mc_etcd_lease_keepalive(c, id, &ttl), 0);
  CHECK(ttl > 0 && ttl <= 10);
  CHECK_EQ(mc_etcd_put(c, "t/lease/a", "bound", 5, id, &rev), 0);
  CHECK_EQ(mc_etcd_get(c, "t/lease/a", &kv, NULL), 0);
  CHECK_EQ(kv.lease, id);
  CHECK_EQ(kv.mod_rev, rev);
  mc_etcd_kv_free(&kv);
  /* revoke: the key goes with it; keep-alive then says 0; revoking again is fine */
  CHECK_EQ(mc_etcd_lease_revoke(c, id), 0);
  CHECK_EQ(mc_etcd_get(c, "t/lease/a", &kv, NULL), MC_ETCD_NOT_FOUND);
  ttl = -1;
  CHECK_EQ(mc_etcd_lease_keepalive(c, id, &ttl), 0);
  CHECK_EQ(ttl, 0);
  CHECK_EQ(mc_etcd_lease_revoke(c, id), 0);
  CHECK_EQ(mc_etcd_put(c, "t/lease/a", "x", 1, id, NULL), ERR_METADATA); /* no such lease */
  /* expiry: a 2 s lease left alone */
  CHECK_EQ(mc_etcd_lease_grant(c, 2, &id), 0);
  CHECK_EQ(mc_etcd_put(c, "t/lease/b", "short", 5, id, NULL), 0);
  long t0 = mc_tp_now_ms(), gone = -1;
  while (gone < 0 && mc_tp_now_ms() - t0 < 6000) {
    if (mc_etcd_get(c, "t/lease/b", &kv, NULL) == MC_ETCD_NOT_FOUND) gone = mc_tp_now_ms() - t0;
    mc_etcd_kv_free(&kv);
    mc_tp_sleep_ms(100);
  }
  fprintf(stderr, "  a 2 s lease's key was gone after %ld ms\n", gone);
  CHECK(gone >= 1500);
  ttl = -1;
  CHECK_EQ(mc_etcd_lease_keepalive(c, id, &ttl), 0);
  CHECK_EQ(ttl, 0);
  mc_etcd_close(c);
}

/* ---- watch ---- */

#define MAX_EVENTS 8

struct recorder {
  int n, stop_after, ret; /* the callback returns ret at event stop_after */
  struct {
    int deleted;
    char value[32];
    size_t len;
    int64_t mod_rev, create_rev, version;
  } ev[MAX_EVENTS];
};

static int record(void *arg, const struct mc_etcd_event *e) {
  struct recorder *r = arg;
  if (r->n < MAX_EVENTS) {
    r->ev[r->n].deleted = e->deleted;
    snprintf(r->ev[r->n].value, sizeof(r->ev[r->n].value), "%s", e->kv.value ? e->kv.value : "(null)");
    r->ev[r->n].len = e->kv.len;
    r->ev[r->n].mod_rev = e->kv.mod_rev;
    r->ev[r->n].create_rev = e->kv.create_rev;
    r->ev[r->n].version = e->kv.version;
  }
  return ++r->n == r->stop_after ? r->ret : 0;
}

struct writer {
  struct mc_etcd *c;
  const char *key;
  int64_t rev[3];
};

/* put v1, put v2, delete: 150 ms after the watch began */
static void *write_later(void *arg) {
  struct writer *w = arg;
  mc_tp_sleep_ms(150);
  CHECK_EQ(mc_etcd_put(w->c, w->key, "v1", 2, 0, &w->rev[0]), 0);
  CHECK_EQ(mc_etcd_put(w->c, w->key, "v2", 2, 0, &w->rev[1]), 0);
  CHECK_EQ(mc_etcd_delete(w->c, w->key), 0);
  return NULL;
}

static void check_put_delete_events(const struct recorder *r, const struct writer *w) {
  CHECK_EQ(r->n, 3);
  CHECK_EQ(r->ev[0].deleted, 0);
  CHECK_STR(r->ev[0].value, "v1");
  CHECK_EQ(r->ev[0].mod_rev, w->rev[0]);
  CHECK_EQ(r->ev[0].create_rev, w->rev[0]);
  CHECK_EQ(r->ev[0].version, 1);
  CHECK_EQ(r->ev[1].deleted, 0);
  CHECK_STR(r->ev[1].value, "v2");
  CHECK_EQ(r->ev[1].mod_rev, w->rev[1]);
  CHECK_EQ(r->ev[1].create_rev, w->rev[0]);
  CHECK_EQ(r->ev[1].version, 2);
  CHECK_EQ(r->ev[2].deleted, 1);
  CHECK_EQ(r->ev[2].len, 0);
  CHECK_STR(r->ev[2].value, "");
  CHECK(r->ev[2].mod_rev > w->rev[1]);
}

struct stopper {
  _Atomic int flag;
  long set_at;
};

static void *stop_later(void *arg) {
  struct stopper *s = arg;
  mc_tp_sleep_ms(300);
  s->set_at = mc_tp_now_ms();
  s->flag = 1;
  return NULL;
}

static void test_watch(void) {
  struct mc_etcd *c = open_shared();
  REQUIRE(c);
  const char *key = "t/watch/k";
  struct mc_etcd_kv kv;
  int64_t now_rev = 0;
  CHECK_EQ(mc_etcd_get(c, key, &kv, &now_rev), MC_ETCD_NOT_FOUND);
  /* live: put, put, delete arrive in order; the callback's value is returned */
  struct writer w = {.c = c, .key = key};
  struct recorder r = {.stop_after = 3, .ret = 42};
  pthread_t th;
  pthread_create(&th, NULL, write_later, &w);
  CHECK_EQ(mc_etcd_watch(c, key, now_rev + 1, 5000, record, &r, NULL), 42);
  pthread_join(th, NULL);
  check_put_delete_events(&r, &w);
  /* history: from the first put's revision, the same three */
  struct recorder h = {.stop_after = 3, .ret = 7};
  CHECK_EQ(mc_etcd_watch(c, key, w.rev[0], 5000, record, &h, NULL), 7);
  check_put_delete_events(&h, &w);
  /* the deadline: 0 after timeout_ms, no events */
  struct recorder none = {.stop_after = 1, .ret = 1};
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_watch(c, "t/watch/quiet", 0, 300, record, &none, NULL), 0);
  long took = mc_tp_now_ms() - t0;
  CHECK(took >= 280 && took < 1500);
  CHECK_EQ(none.n, 0);
  /* the stop flag: 0 within 200 ms of it being set */
  struct stopper s = {0};
  pthread_create(&th, NULL, stop_later, &s);
  CHECK_EQ(mc_etcd_watch(c, "t/watch/quiet", 0, 10000, record, &none, &s.flag), 0);
  took = mc_tp_now_ms() - s.set_at;
  pthread_join(th, NULL);
  fprintf(stderr, "  the watch returned %ld ms after the stop flag was set\n", took);
  CHECK(took >= 0 && took < 200);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_watch(c, "t/watch/quiet", 0, 10000, record, &none, &s.flag), 0); /* set already */
  CHECK(mc_tp_now_ms() - t0 < 200);
  mc_etcd_close(c);
}

/* A compacted start revision cancels the watch; a dead endpoint fails it and the next watch uses the
 * next endpoint. */
static void test_watch_errors(void) {
  int port = shared_port();
  REQUIRE(port > 0);
  struct mc_etcd *c = open_shared();
  REQUIRE(c);
  int64_t rev = 0;
  CHECK_EQ(mc_etcd_put(c, "t/watch/compact", "a", 1, 0, NULL), 0);
  CHECK_EQ(mc_etcd_put(c, "t/watch/compact", "b", 1, 0, &rev), 0);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:%d compaction %lld >/dev/null", port,
           (long long)rev);
  CHECK_EQ(system(cmd), 0);
  struct recorder r = {.stop_after = 100};
  CHECK_EQ(mc_etcd_watch(c, "t/watch/compact", 1, 3000, record, &r, NULL), ERR_METADATA);
  CHECK_EQ(r.n, 0);
  CHECK_EQ(mc_etcd_watch(c, "t/watch/compact", rev, 300, record, &r, NULL), 0); /* not compacted: b */
  CHECK_EQ(r.n, 1);
  CHECK_STR(r.ev[0].value, "b");
  mc_etcd_close(c);

  char eps[64];
  snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", mc_tp_free_port(), port);
  c = open_ok(eps);
  REQUIRE(c);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_watch(c, "t/watch/quiet", 0, 5000, record, &r, NULL), ERR_METADATA);
  CHECK(mc_tp_now_ms() - t0 < 1000);
  CHECK_EQ(mc_etcd_watch(c, "t/watch/quiet", 0, 200, record, &r, NULL), 0);
  mc_etcd_close(c);
}

/* ---- a cluster ---- */

/* One get of key through c, which must succeed with want within 3 s. */
static void check_get_fast(struct mc_etcd *c, const char *key, const char *want) {
  struct mc_etcd_kv kv;
  long t0 = mc_tp_now_ms();
  int rc = mc_etcd_get(c, key, &kv, NULL);
  long took = mc_tp_now_ms() - t0;
  CHECK_EQ(rc, 0);
  if (!rc) CHECK_STR(kv.value, want);
  mc_etcd_kv_free(&kv);
  fprintf(stderr, "  get %s took %ld ms\n", key, took);
  CHECK(took < 3000);
}

static void check_put_fast(struct mc_etcd *c, const char *key, const char *value) {
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_put(c, key, value, strlen(value), 0, NULL), 0);
  long took = mc_tp_now_ms() - t0;
  fprintf(stderr, "  put %s took %ld ms\n", key, took);
  CHECK(took < 3000);
}

/* The member whose client port the client will try first. */
static int member_in_use(struct mc_tp_etcd_cluster *cl, struct mc_etcd *c) {
  const char *ep = mc_etcd_current(c), *colon = strrchr(ep, ':');
  for (int i = 0; colon && i < cl->n; i++)
    if (atoi(colon + 1) == cl->m[i].s.port) return i;
  CHECK(!"the current endpoint is a member");
  return 0;
}

/* Members die one after the other; each time the member the client uses is the one that dies. */
static void cluster_kills(struct mc_tp_etcd_cluster *cl, struct mc_etcd *c) {
  check_put_fast(c, "t/cl/k", "before");
  int first = member_in_use(cl, c);
  CHECK_EQ(first, 0); /* the first of the list answered */
  mc_tp_etcd_kill(cl, first);
  check_get_fast(c, "t/cl/k", "before");
  check_put_fast(c, "t/cl/k", "after0");
  check_get_fast(c, "t/cl/k", "after0");
  /* it comes back, and the one in use now dies */
  CHECK_EQ(mc_tp_etcd_restart(cl, first), 0);
  int second = member_in_use(cl, c);
  CHECK(second != first);
  mc_tp_etcd_kill(cl, second);
  check_get_fast(c, "t/cl/k", "after0");
  check_put_fast(c, "t/cl/k", "after1");
  int64_t id = 0, ttl = 0;
  CHECK_EQ(mc_etcd_lease_grant(c, 5, &id), 0);
  CHECK_EQ(mc_etcd_lease_keepalive(c, id, &ttl), 0);
  CHECK(ttl > 0);
  struct recorder r = {.stop_after = 100};
  CHECK_EQ(mc_etcd_watch(c, "t/cl/k", 1, 500, record, &r, NULL), 0);
  CHECK(r.n >= 3);
  CHECK_STR(r.ev[r.n - 1].value, "after1");
  CHECK_EQ(mc_tp_etcd_restart(cl, second), 0);
}

/* The member in use hangs: the attempt gives up after the 500 ms timeout and another member answers. */
static void cluster_hang(struct mc_tp_etcd_cluster *cl, struct mc_etcd *c) {
  check_get_fast(c, "t/cl/k", "after1");
  int used = member_in_use(cl, c);
  mc_tp_etcd_pause(cl, used, 1);
  long t0 = mc_tp_now_ms();
  check_get_fast(c, "t/cl/k", "after1");
  CHECK(mc_tp_now_ms() - t0 >= 450);
  CHECK(member_in_use(cl, c) != used);
  mc_tp_etcd_pause(cl, used, 0);
}

/* Without quorum every call fails, within n_endpoints x the timeout. */
static void cluster_no_quorum(struct mc_tp_etcd_cluster *cl, struct mc_etcd *c) {
  mc_tp_etcd_kill(cl, 0);
  mc_tp_etcd_kill(cl, 1);
  struct mc_etcd_kv kv;
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_get(c, "t/cl/k", &kv, NULL), ERR_METADATA);
  long took = mc_tp_now_ms() - t0;
  fprintf(stderr, "  without quorum, a get failed after %ld ms\n", took);
  CHECK(took < 3000);
}

static void test_cluster_failover(void) {
  struct mc_tp_etcd_cluster cl;
  REQUIRE(mc_tp_start_etcd_cluster(&cl, 3) == 0);
  struct mc_etcd *c = open_ok(cl.endpoints);
  if (c) {
    mc_etcd_set_timeout(c, 500);
    cluster_kills(&cl, c);
    cluster_hang(&cl, c);
  }
  /* a dead port first in the list */
  char eps[sizeof(cl.endpoints) + 32];
  snprintf(eps, sizeof(eps), "127.0.0.1:%d;%s", mc_tp_free_port(), cl.endpoints);
  struct mc_etcd *d = open_ok(eps);
  if (d) {
    mc_etcd_set_timeout(d, 500);
    check_get_fast(d, "t/cl/k", "after1");
    mc_etcd_close(d);
  }
  if (c) cluster_no_quorum(&cl, c);
  mc_etcd_close(c);
  mc_tp_stop_etcd_cluster(&cl);
}

/* ---- a hostile peer ---- */

/* A fake HTTP server: every connection gets the current answer, then is closed; with endless, a 200
 * whose body is one line without end. */
struct fake {
  int fd, port;
  pthread_t th;
  _Atomic int stop;
  pthread_mutex_t mu;
  char answer[4096]; /* guarded by mu */
  int endless, silent; /* guarded by mu */
  int busy_left;       /* this many connections get a 503 first; guarded by mu */
};

/* Reads a request's headers and body (Content-Length) or gives up after 2 s. */
static void fake_read_request(int fd) {
  char buf[16384];
  size_t got = 0;
  long t0 = mc_tp_now_ms();
  while (got < sizeof(buf) - 1 && mc_tp_now_ms() - t0 < 2000) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
    if (n <= 0) return;
    got += (size_t)n;
    buf[got] = 0;
    char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "Content-Length:");
    if (end && (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0) <= got) return;
  }
}

static void fake_endless(int fd) {
  static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"result\":\"";
  char chunk[65536];
  memset(chunk, 'a', sizeof(chunk));
  long t0 = mc_tp_now_ms();
  if (send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL) < 0) return;
  while (mc_tp_now_ms() - t0 < 10000 && send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) > 0) {
  }
}

static void fake_serve(struct fake *f, int fd) {
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  fake_read_request(fd);
  pthread_mutex_lock(&f->mu);
  char answer[sizeof(f->answer)];
  memcpy(answer, f->answer, sizeof(answer));
  int endless = f->endless, silent = f->silent, busy = f->busy_left > 0;
  if (busy) f->busy_left--;
  pthread_mutex_unlock(&f->mu);
  if (busy) {
    static const char no_leader[] = "HTTP/1.1 503 X\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
    if (send(fd, no_leader, sizeof(no_leader) - 1, MSG_NOSIGNAL) < 0) fprintf(stderr, "fake: %s\n", strerror(errno));
  } else if (endless) {
    fake_endless(fd);
  } else if (silent) {
    for (long t0 = mc_tp_now_ms(); !f->stop && mc_tp_now_ms() - t0 < 5000;) mc_tp_sleep_ms(20);
  } else if (send(fd, answer, strlen(answer), MSG_NOSIGNAL) < 0) {
    fprintf(stderr, "fake server: send: %s\n", strerror(errno));
  }
}

static void *fake_main(void *arg) {
  struct fake *f = arg;
  while (!f->stop) {
    struct pollfd p = {.fd = f->fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept(f->fd, NULL, NULL);
    if (fd < 0) continue;
    fake_serve(f, fd);
    close(fd);
  }
  return NULL;
}

static int fake_start(struct fake *f) {
  memset(f, 0, sizeof(*f));
  pthread_mutex_init(&f->mu, NULL);
  f->fd = mc_tp_silent_listener(&f->port);
  if (f->fd < 0) return -1;
  return pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(struct fake *f) {
  f->stop = 1;
  pthread_join(f->th, NULL);
  close(f->fd);
  pthread_mutex_destroy(&f->mu);
}

/* The next connections get status and body (a JSON text, or a stream of lines). */
static void fake_answer(struct fake *f, int status, const char *body) {
  pthread_mutex_lock(&f->mu);
  snprintf(f->answer, sizeof(f->answer),
           "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
           status, strlen(body), body);
  f->endless = f->silent = 0;
  pthread_mutex_unlock(&f->mu);
}

static void fake_busy(struct fake *f, int n) {
  pthread_mutex_lock(&f->mu);
  f->busy_left = n;
  pthread_mutex_unlock(&f->mu);
}

/* A member answering 503 (no leader yet) is asked again while the call's budget lasts. */
static void check_fake_busy(struct fake *f, struct mc_etcd *c) {
  int64_t rev = 0;
  fake_answer(f, 200, "{\"header\":{\"revision\":\"8\"}}");
  fake_busy(f, 3);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_put(c, "k", "v", 1, 0, &rev), 0);
  long took = mc_tp_now_ms() - t0;
  CHECK_EQ(rev, 8);
  CHECK(took >= 100 && took < 500); /* three pauses of 50 ms */
  fake_busy(f, 1000);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_put(c, "k", "v", 1, 0, &rev), ERR_METADATA);
  took = mc_tp_now_ms() - t0;
  fprintf(stderr, "  a member answering 503 for ever: the call failed after %ld ms\n", took);
  CHECK(took >= 400 && took < 1000); /* the budget: one endpoint x 500 ms */
  fake_busy(f, 0);
}

static void fake_mode(struct fake *f, int endless, int silent) {
  pthread_mutex_lock(&f->mu);
  f->endless = endless;
  f->silent = silent;
  pthread_mutex_unlock(&f->mu);
}

/* Every call fails with ERR_METADATA against the current answer, quickly, leaving outputs cleared. */
static void check_all_fail(struct mc_etcd *c, const char *what) {
  struct mc_etcd_kv kv;
  int64_t v = -1;
  int won = -1, deleted = -1, fails = 0;
  long t0 = mc_tp_now_ms();
  fails += mc_etcd_get(c, "k", &kv, NULL) == ERR_METADATA && kv.value == NULL;
  fails += mc_etcd_put(c, "k", "v", 1, 0, &v) == ERR_METADATA;
  fails += mc_etcd_delete(c, "k") == ERR_METADATA;
  fails += mc_etcd_create(c, "k", "v", 0, &won, &v, &kv) == ERR_METADATA && won == 0 && kv.value == NULL;
  fails += mc_etcd_delete_if(c, "k", 5, &deleted) == ERR_METADATA && deleted == 0;
  fails += mc_etcd_lease_grant(c, 5, &v) == ERR_METADATA && v == 0;
  fails += mc_etcd_lease_keepalive(c, 5, &v) == ERR_METADATA && v == 0;
  fails += mc_etcd_lease_revoke(c, 5) == ERR_METADATA;
  long took = mc_tp_now_ms() - t0;
  if (fails != 8) fprintf(stderr, "  answer '%s': %d of 8 calls failed as they should\n", what, fails);
  CHECK_EQ(fails, 8);
  CHECK(took < 2000);
}

/* Answers that are wrong for every call (each carries no usable header). */
static const char *const bad_for_all[] = {
    "not json",
    "[]",
    "{}",
    "{\"header\":[]}",
    "{\"header\":{\"revision\":\"99999999999999999999999\"}}",
    "{\"header\":{\"revision\":\"-5\"}}",
    "{\"header\":{\"revision\":\"12abc\"}}",
    "{\"header\":{\"revision\":\"\"}}",
    "{\"header\":{\"revision\":1.5}}",
    "{\"header\":{\"revision\":true}}",
    "{\"header\":{\"revision\":123456789012345678901234567890}}",
    "{\"header\":{\"revision\":\"0\"}}",
    "{\"header\":{\"revision\":\"1\"",
    "\xff\xfe{}",
};

/* Answers with a valid header that are still wrong for one call: what follows the header. */
static const char *const bad_get[] = {
    "\"kvs\":\"str\"",
    "\"kvs\":[5]",
    "\"kvs\":[{\"value\":7}]",
    "\"kvs\":[{\"value\":\"!!!!\"}]",
    "\"kvs\":[{\"value\":\"YQ=\\u0000\"}]",
    "\"kvs\":[{\"value\":\"YQ==\",\"mod_revision\":\"1e5\"}]",
    "\"kvs\":[{\"value\":\"YQ==\",\"version\":\"9223372036854775808\"}]",
    "\"kvs\":[{\"value\":\"YQ==\",\"lease\":{}}]",
};
static const char *const bad_create[] = {
    "\"succeeded\":\"yes\"",
    "\"count\":\"1\"", /* lost, but no range of the key */
    "\"responses\":{}",
    "\"responses\":[{\"response_range\":{\"kvs\":[]}}]",
};
static const char *const bad_delete_if[] = {
    "\"succeeded\":true",
    "\"succeeded\":true,\"responses\":[{\"response_delete_range\":{\"deleted\":\"x\"}}]",
};
static const char *const bad_grant[] = {
    "\"ID\":true",
    "\"ID\":\"0\"",
    "\"ID\":\"77\",\"error\":\"etcdserver: too many requests\"",
    "\"TTL\":\"5\"",
};
#define HDR "\"header\":{\"revision\":\"3\"}"
/* Whole answers to a keep-alive. */
static const char *const bad_keepalive[] = {
    "{\"result\":\"x\"}",
    "{" HDR ",\"TTL\":\"5\"}",
    "{\"result\":{" HDR ",\"TTL\":\"-1\"}}",
    "{\"result\":{\"TTL\":\"5\"}}",
};

static int run_one(struct mc_etcd *c, int call) {
  struct mc_etcd_kv kv = {0};
  int64_t v = 0;
  int won = 0, rc = -1;
  if (call == 0) rc = mc_etcd_get(c, "k", &kv, NULL);
  if (call == 1) rc = mc_etcd_create(c, "k", "v", 0, &won, &v, &kv);
  if (call == 2) rc = mc_etcd_delete_if(c, "k", 3, &won);
  if (call == 3) rc = mc_etcd_lease_grant(c, 5, &v);
  if (call == 4) rc = mc_etcd_lease_keepalive(c, 5, &v);
  CHECK(kv.value == NULL);
  mc_etcd_kv_free(&kv);
  return rc;
}

/* Each answer (after a valid header when with_header) makes call fail with ERR_METADATA. */
static void check_bad_for_one(struct fake *f, struct mc_etcd *c, int call, const char *const *bodies, size_t n,
                              int with_header) {
  for (size_t i = 0; i < n; i++) {
    char body[512];
    snprintf(body, sizeof(body), with_header ? "{" HDR ",%s}" : "%s", bodies[i]);
    fake_answer(f, 200, body);
    int rc = run_one(c, call);
    if (rc != ERR_METADATA) fprintf(stderr, "  answer '%s' gave %d\n", body, rc);
    CHECK_EQ(rc, ERR_METADATA);
  }
}

/* Well-formed answers a real gateway could give: accepted, with the values they carry. */
static void check_fake_accepts(struct fake *f, struct mc_etcd *c) {
  struct mc_etcd_kv kv;
  int64_t rev = 0, ttl = 0;
  fake_answer(f, 200, "{\"header\":{\"revision\":5}}"); /* int64 as a JSON number */
  CHECK_EQ(mc_etcd_put(c, "k", "v", 1, 0, &rev), 0);
  CHECK_EQ(rev, 5);
  fake_answer(f, 200, "{" HDR ",\"kvs\":[{\"key\":\"aw==\",\"value\":\"aGk=\",\"mod_revision\":\"9223372036854775807\"}]}");
  CHECK_EQ(mc_etcd_get(c, "k", &kv, &rev), 0);
  CHECK_STR(kv.value, "hi");
  CHECK_EQ(kv.mod_rev, INT64_MAX);
  CHECK_EQ(rev, 3);
  mc_etcd_kv_free(&kv);
  fake_answer(f, 200, "{\"result\":{" HDR ",\"TTL\":\"4\"}}");
  CHECK_EQ(mc_etcd_lease_keepalive(c, 1, &ttl), 0);
  CHECK_EQ(ttl, 4);
  fake_answer(f, 404, "{\"error\":\"etcdserver: requested lease not found\",\"code\":5}");
  CHECK_EQ(mc_etcd_lease_revoke(c, 1), 0); /* already gone */
  CHECK_EQ(mc_etcd_put(c, "k", "v", 1, 1, NULL), ERR_METADATA);
}

static void check_fake_watch(struct fake *f, struct mc_etcd *c) {
  static const char *const bad[] = {
      "garbage\n",
      "{\"error\":{\"grpc_code\":14,\"message\":\"unavailable\"}}\n",
      "{\"result\":{\"header\":{},\"created\":true}}\n{\"result\":{\"header\":{},\"events\":\"x\"}}\n",
      "{\"result\":{\"header\":{},\"events\":[{\"type\":\"BOGUS\",\"kv\":{}}]}}\n",
      "{\"result\":{\"header\":{},\"events\":[{\"kv\":{\"value\":\"%%%\"}}]}}\n",
      "{\"result\":{\"header\":{},\"events\":[{\"type\":\"PUT\"}]}}\n",
      "{\"result\":{\"header\":{},\"events\":[7]}}\n",
      "{\"result\":{\"header\":{},\"canceled\":true,\"compact_revision\":\"4\"}}\n",
      "{\"result\":{\"header\":{},\"created\":true}}\n", /* then the stream ends */
      "{\"result\":{\"header\":{},\"created\":\"yes\"}}\n{\"result\":{\"header\":[]}}\n",
  };
  struct recorder r = {.stop_after = 100};
  for (size_t i = 0; i < MC_ARRAY_LEN(bad); i++) {
    fake_answer(f, 200, bad[i]);
    long t0 = mc_tp_now_ms();
    CHECK_EQ(mc_etcd_watch(c, "k", 0, 5000, record, &r, NULL), ERR_METADATA);
    CHECK(mc_tp_now_ms() - t0 < 2000);
  }
  CHECK_EQ(r.n, 0);
  fake_answer(f, 404, "not found");
  CHECK_EQ(mc_etcd_watch(c, "k", 0, 5000, record, &r, NULL), ERR_METADATA);
  /* a good stream through the fake: created, then one PUT whose callback value is returned */
  struct recorder one = {.stop_after = 1, .ret = 5};
  fake_answer(f, 200,
              "{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\r\n\n"
              "{\"result\":{\"header\":{},\"events\":[{\"kv\":{\"key\":\"aw==\",\"value\":\"aGk=\",\"mod_revision\":\"2\"}}]}}\n");
  CHECK_EQ(mc_etcd_watch(c, "k", 0, 5000, record, &one, NULL), 5);
  CHECK_STR(one.ev[0].value, "hi");
  CHECK_EQ(one.ev[0].mod_rev, 2);
  /* one line without end: fails at the 1 MiB cap */
  fake_mode(f, 1, 0);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_watch(c, "k", 0, 20000, record, &r, NULL), ERR_METADATA);
  fprintf(stderr, "  an endless line failed the watch after %ld ms\n", mc_tp_now_ms() - t0);
  CHECK(mc_tp_now_ms() - t0 < 5000);
  /* a peer that accepts and never answers: no confirmation within the client's timeout */
  fake_mode(f, 0, 1);
  t0 = mc_tp_now_ms();
  CHECK_EQ(mc_etcd_watch(c, "k", 0, 20000, record, &r, NULL), ERR_METADATA);
  long took = mc_tp_now_ms() - t0;
  CHECK(took >= 400 && took < 2000);
}

static void test_hostile_peer(void) {
  struct fake f;
  REQUIRE(fake_start(&f) == 0);
  char ep[64];
  snprintf(ep, sizeof(ep), "127.0.0.1:%d", f.port);
  struct mc_etcd *c = open_ok(ep);
  if (c) {
    mc_etcd_set_timeout(c, 500);
    for (size_t i = 0; i < MC_ARRAY_LEN(bad_for_all); i++) {
      fake_answer(&f, 200, bad_for_all[i]);
      check_all_fail(c, bad_for_all[i]);
    }
    mc_etcd_set_timeout(c, 100); /* a 5xx is asked again for the whole budget */
    fake_answer(&f, 500, "{\"error\":\"etcdserver: no leader\"}");
    check_all_fail(c, "HTTP 500");
    mc_etcd_set_timeout(c, 500);
    fake_answer(&f, 400, "<html>");
    check_all_fail(c, "HTTP 400");
    check_bad_for_one(&f, c, 0, bad_get, MC_ARRAY_LEN(bad_get), 1);
    check_bad_for_one(&f, c, 1, bad_create, MC_ARRAY_LEN(bad_create), 1);
    check_bad_for_one(&f, c, 2, bad_delete_if, MC_ARRAY_LEN(bad_delete_if), 1);
    check_bad_for_one(&f, c, 3, bad_grant, MC_ARRAY_LEN(bad_grant), 1);
    check_bad_for_one(&f, c, 4, bad_keepalive, MC_ARRAY_LEN(bad_keepalive), 0);
    check_fake_accepts(&f, c);
    check_fake_busy(&f, c);
    check_fake_watch(&f, c);
    mc_etcd_close(c);
  }
  fake_stop(&f);
}

TEST_MAIN(TEST_CASE(test_open_and_endpoints), TEST_CASE(test_kv_roundtrip), TEST_CASE(test_create_and_delete_if),
          TEST_CASE(test_leases), TEST_CASE(test_watch), TEST_CASE(test_watch_errors),
          TEST_CASE(test_cluster_failover), TEST_CASE(test_hostile_peer))
