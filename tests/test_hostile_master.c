/* Hostile clients against a real mooncake_master (issue #20, defects 2 and 3 and the master-RPC part of
 * defect 7; docs/master.md "Limits"): patterns that crashed or stalled the master, requests whose replies
 * were unbounded, oversized strings, connection floods, silent connections and large half-sent frames.
 * Each case asserts what the master must do (a clear error, staying alive, bounded RSS, a legitimate
 * client served alongside). Bounds are generous: the machine may be loaded. */
#include <poll.h>
#include <pthread.h>

#include "common/util.h"
#include "lib/master_client.h"
#include "lib/test.h"

#define BASE 0x100000000ull
#define MIB (1ull << 20)

struct env {
  struct mt_master mm;
  struct mc_mrpc_client *c;
};

static int env_start(struct env *e, const char *const extra[], char *const envv[]) {
  if (mt_master_start_env(&e->mm, extra, envv)) return -1;
  e->c = mt_connect(e->mm.port);
  return 0;
}

static void env_stop(struct env *e) {
  mc_mrpc_client_free(e->c);
  CHECK_EQ(mt_master_stop(&e->mm), 0); /* alive until here and exits cleanly */
}

static int alive(const struct env *e) { return !mc_tp_exited(e->mm.pid); }

/* A field of /proc/<pid>/status in KiB (VmRSS, VmHWM), or -1. */
static long status_kib(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  size_t fl = strlen(field);
  while (f && fgets(line, sizeof(line), f))
    if (!strncmp(line, field, fl) && line[fl] == ':') v = atol(line + fl + 1);
  if (f) fclose(f);
  return v;
}

/* A string of n copies of ch (malloc'ed). */
static char *filled(size_t n, char ch) {
  char *s = malloc(n + 1);
  memset(s, ch, n);
  s[n] = 0;
  return s;
}

static int get_by_regex(struct mc_mrpc_client *c, const char *re, uint32_t *count) {
  return mt_get_by_regex(c, re, count, NULL, 0);
}

/* ------------------------------------------------------------------ patterns */

static void put_keys(struct env *e, const char *fmt, int n) {
  struct mc_uuid a = mt_id(1);
  struct mc_segment_rec s = mt_seg(1, "10.0.0.1:1", BASE, 1024 * MIB); /* metadata only: no memory */
  CHECK_EQ(mt_mount(e->c, a, &s), 0);
  for (int i = 0; i < n; i++) {
    char k[128];
    snprintf(k, sizeof(k), fmt, i);
    CHECK_EQ(mt_put(e->c, a, k, 64, 1), 0);
  }
}

/* `(|)(\1\1)*` sent glibc's matcher into unbounded recursion: the master died. Back-references are
 * refused now, for lookups and removals, and the master keeps serving. */
static void test_regex_crasher(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  put_keys(&e, "crash/%d", 8);
  uint32_t count = 0;
  int64_t removed = -1;
  CHECK_EQ(get_by_regex(e.c, "(|)(\\1\\1)*", &count), MC_INVALID_PARAMS);
  CHECK_EQ(mt_remove_many(e.c, "(|)(\\1\\1)*", 1, &removed), MC_INVALID_PARAMS);
  CHECK_EQ(get_by_regex(e.c, "(a)\\1", &count), MC_INVALID_PARAMS);
  CHECK_EQ(get_by_regex(e.c, "(?<x>a)\\k<x>", &count), MC_INVALID_PARAMS);
  CHECK(alive(&e));
  CHECK_EQ(mt_exist(e.c, "crash/3"), 1);
  CHECK_EQ(get_by_regex(e.c, "^crash/[0-9]$", &count), 0);
  CHECK_EQ(count, 8);
  env_stop(&e);
}

/* Nested repeats took gigabytes in glibc's regcomp; a huge pattern is refused by length. Both answer
 * INVALID_PARAMS at once. Ordinary patterns keep their meaning (substring search, anchors, classes). */
static void test_regex_limits(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  put_keys(&e, "lim/%d", 12);
  uint32_t count = 0;
  long t0 = mc_tp_now_ms();
  CHECK_EQ(get_by_regex(e.c, "((((((((((a*)*)*)*)*)*)*)*)*)*)*", &count), MC_INVALID_PARAMS);
  int64_t removed = -1;
  CHECK_EQ(mt_remove_many(e.c, "((((((((((a*)*)*)*)*)*)*)*)*)*)*", 1, &removed), MC_INVALID_PARAMS);
  char *huge = filled(1 << 20, 'a'); /* 1 MiB pattern */
  CHECK_EQ(get_by_regex(e.c, huge, &count), MC_INVALID_PARAMS);
  huge[MC_STR_MAX + 1] = 0; /* just over the limit */
  CHECK_EQ(get_by_regex(e.c, huge, &count), MC_INVALID_PARAMS);
  huge[MC_STR_MAX] = 0; /* at the limit: compiles (matches nothing) */
  CHECK_EQ(get_by_regex(e.c, huge, &count), 0);
  CHECK_EQ(count, 0);
  free(huge);
  /* a pattern that compiles but costs too much per key fails the request, at once */
  CHECK_EQ(get_by_regex(e.c, "(x+x+)+y", &count), 0); /* no key has an x: cheap */
  CHECK(mc_tp_now_ms() - t0 < 5000);
  CHECK(alive(&e));
  /* meaning kept */
  CHECK_EQ(get_by_regex(e.c, "^lim/1[01]$", &count), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(get_by_regex(e.c, "m/1", &count), 0); /* substring: lim/1, lim/10, lim/11 */
  CHECK_EQ(count, 3);
  CHECK_EQ(get_by_regex(e.c, "^lim/[[:digit:]]{2}$", &count), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(get_by_regex(e.c, "^(lim|other)/(3|4)$", &count), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(mt_remove_many(e.c, "^lim/(1|2)$", 1, &removed), 0);
  CHECK_EQ(removed, 2);
  CHECK_EQ(mt_exist(e.c, "lim/1"), 0);
  CHECK_EQ(mt_exist(e.c, "lim/10"), 1);
  env_stop(&e);
}

struct regex_job {
  struct mc_mrpc_client *c;
  const char *re;
  int rc;
  long ms;
};

static void *regex_thread(void *arg) {
  struct regex_job *j = arg;
  uint32_t count;
  long t0 = mc_tp_now_ms();
  j->rc = get_by_regex(j->c, j->re, &count);
  j->ms = mc_tp_now_ms() - t0;
  return NULL;
}

/* Back-references made matching super-polynomial per key (seconds for a 50-byte key) while the key's
 * shard lock was held, so reads and writes of that shard waited. A lookup and a put alongside such a
 * request are served promptly now, and the request itself ends quickly with an error. */
static void test_regex_no_stall(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  char fmt[80];
  memset(fmt, 'a', 50);
  strcpy(fmt + 50, "-%d");
  put_keys(&e, fmt, 4);
  char keys[4][64];
  for (int i = 0; i < 4; i++) snprintf(keys[i], sizeof(keys[i]), fmt, i);
  const char *patterns[] = {"(a*)(a*)(a*)(a*)\\4\\3\\2\\1b", "(a|aa)*(a|aa)*(a|aa)*[b-z]", "((a*)*)*[b-z]"};
  struct mc_uuid a = mt_id(1);
  for (int p = 0; p < 3; p++) {
    struct regex_job j = {mc_mrpc_client_new("127.0.0.1", (uint16_t)e.mm.port, 3000, 120000), patterns[p], 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, regex_thread, &j);
    long worst = 0, t0 = mc_tp_now_ms();
    for (int i = 0; mc_tp_now_ms() - t0 < 3000; i++) { /* lookups of the scanned keys, and puts */
      long s0 = mc_tp_now_ms();
      CHECK_EQ(mt_exist(e.c, keys[i % 4]), 1);
      char k[32];
      snprintf(k, sizeof(k), "side/%d/%d", p, i);
      CHECK_EQ(mt_put(e.c, a, k, 64, 1), 0);
      int ping;
      CHECK_EQ(mt_ping(e.c, a, &ping), 0); /* the holder stays alive past client_ttl (10 s) */
      worst = MC_MAX(worst, mc_tp_now_ms() - s0);
      mc_tp_sleep_ms(5);
    }
    pthread_join(t, NULL);
    fprintf(stderr, "  %s: %d after %ld ms; worst lookup+put alongside %ld ms\n", patterns[p], j.rc, j.ms, worst);
    CHECK(worst < 1500);
    CHECK_EQ(j.rc, MC_INVALID_PARAMS); /* refused (back-references) or over the match limit */
    CHECK(j.ms < 3000);
    mc_mrpc_client_free(j.c);
  }
  CHECK(alive(&e));
  env_stop(&e);
}

/* ------------------------------------------------------------------ strings and replies */

static struct mc_segment_rec seg_with(uint64_t id, char *name, char *endpoint, char *other, uint64_t base) {
  struct mc_segment_rec s = mt_seg(id, name, base, 64 * MIB);
  s.te_endpoint = endpoint;
  s.protocol = other;
  s.zone = other;
  s.host_id = other;
  return s;
}

/* MOUNT strings had no limit: an 8 MiB endpoint was stored and repeated in every replica of every
 * reply. Every request string is at most MC_STR_MAX bytes now. */
static void test_mount_string_limits(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  char *big = filled(8 << 20, 'e'), *over = filled(MC_STR_MAX + 1, 'n'), *max = filled(MC_STR_MAX, 'm');
  struct mc_segment_rec s = seg_with(1, (char *)"seg-a", big, (char *)"", BASE);
  int rc = mt_mount(e.c, a, &s);
  CHECK_EQ(rc, MC_INVALID_PARAMS);
  if (rc != MC_INVALID_PARAMS) { /* the lookup below would now ask for a 5 GB reply */
    free(big);
    env_stop(&e);
    return;
  }
  s = seg_with(2, over, (char *)"10.0.0.1:1", (char *)"", BASE);
  CHECK_EQ(mt_mount(e.c, a, &s), MC_INVALID_PARAMS);
  s = seg_with(3, (char *)"seg-c", (char *)"10.0.0.1:1", over, BASE);
  CHECK_EQ(mt_mount(e.c, a, &s), MC_INVALID_PARAMS);
  uint32_t n = 0;
  CHECK_EQ(mt_query_segments(e.c, &n, NULL, NULL, NULL, 0), 0);
  CHECK_EQ(n, 0);
  s = seg_with(4, max, max, max, BASE); /* at the limit: accepted */
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "k", 64, 1), 0);
  const char *keys[600];
  for (int i = 0; i < 600; i++) keys[i] = "k";
  int32_t st[600];
  uint32_t nrep[600];
  CHECK_EQ(mt_batch_get(e.c, keys, 600, st, nrep, NULL), 0); /* the 3 KB lookup: ~12 MB, not 5 GB */
  CHECK_EQ(st[599], 0);
  CHECK_EQ(nrep[599], 1);
  CHECK(alive(&e));
  free(big);
  free(over);
  free(max);
  env_stop(&e);
}

/* A reply is bounded (MC_MRPC_MAX_BODY): a batch lookup whose reply would exceed it is answered
 * INVALID_PARAMS, the master's memory goes back, and it keeps serving. */
static void test_reply_cap(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  struct mc_uuid a = mt_id(1);
  char *max = filled(MC_STR_MAX, 'm');
  struct mc_segment_rec s = seg_with(1, max, max, max, BASE); /* ~20 KiB of strings per replica */
  CHECK_EQ(mt_mount(e.c, a, &s), 0);
  CHECK_EQ(mt_put(e.c, a, "k", 64, 1), 0);
  long rss0 = status_kib(e.mm.pid, "VmRSS");
  enum { N = 14000 }; /* 70 KB request, ~290 MB reply */
  const char **keys = malloc(N * sizeof(*keys));
  for (int i = 0; i < N; i++) keys[i] = "k";
  int32_t *st = malloc(N * sizeof(*st));
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)e.mm.port, 3000, 60000);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_batch_get(c, keys, N, st, NULL, NULL), MC_INVALID_PARAMS);
  long ms = mc_tp_now_ms() - t0;
  CHECK_EQ(mt_exist(e.c, "k"), 1);
  CHECK(alive(&e));
  mc_tp_sleep_ms(200);
  long rss1 = status_kib(e.mm.pid, "VmRSS"), hwm = status_kib(e.mm.pid, "VmHWM");
  fprintf(stderr, "  refused in %ld ms; VmRSS %ld -> %ld KiB, VmHWM %ld KiB\n", ms, rss0, rss1, hwm);
  CHECK(rss1 >= 0 && rss1 - rss0 < 64 * 1024);
  CHECK(hwm >= 0 && hwm < 1024 * 1024);
  CHECK_EQ(mt_log_count(&e.mm, "outgrew its bound"), 1);
  CHECK_EQ(mt_batch_get(c, keys, 1000, st, NULL, NULL), 0); /* ~20 MB: fine */
  mc_mrpc_client_free(c);
  free(keys);
  free(st);
  free(max);
  env_stop(&e);
}

/* ------------------------------------------------------------------ connections */

/* 1 when the master closed fd (EOF or reset) within ms, 0 when it is still open. */
static int closed_within(int fd, long ms) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, (int)ms) <= 0) return 0;
  char b;
  ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN);
}

/* Connections beyond MC_MASTER_MAX_CONNECTIONS are closed at once (one WARNING line a second at most),
 * a client connected before keeps working, and connections that never send a frame are dropped after
 * the stall limit (10 s), which lets new clients in again. */
static void test_connection_cap(void) {
  struct env e;
  char *envv[] = {(char *)"MC_MASTER_MAX_CONNECTIONS=16", NULL};
  REQUIRE(env_start(&e, NULL, envv) == 0);
  CHECK_EQ(mt_exist(e.c, "x"), 0); /* the legitimate client's pooled connection */
  enum { FLOOD = 64 };
  int fd[FLOOD], open_n = 0;
  for (int i = 0; i < FLOOD; i++) fd[i] = mc_tp_connect(e.mm.port);
  mc_tp_sleep_ms(500);
  for (int i = 0; i < FLOOD; i++) {
    int gone = fd[i] < 0 || closed_within(fd[i], 0);
    if (gone && fd[i] >= 0) {
      close(fd[i]);
      fd[i] = -1;
    }
    open_n += !gone;
  }
  fprintf(stderr, "  %d of %d flood connections left open\n", open_n, FLOOD);
  CHECK(open_n <= 15);
  CHECK(open_n >= 10);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mt_exist(e.c, "x"), 0);
  CHECK(mc_tp_now_ms() - t0 < 1000);
  CHECK(mt_log_count(&e.mm, "refusing new ones") >= 1);
  CHECK(mt_log_count(&e.mm, "refusing new ones") <= 3);
  /* the silent ones are dropped after the stall limit (10 s) */
  int still = 0;
  for (int i = 0; i < FLOOD; i++)
    if (fd[i] >= 0) {
      still += !closed_within(fd[i], 16000 - (mc_tp_now_ms() - t0));
      close(fd[i]);
    }
  long waited = mc_tp_now_ms() - t0;
  fprintf(stderr, "  silent connections dropped after %ld ms (%d left)\n", waited, still);
  CHECK_EQ(still, 0);
  CHECK(waited > 5000);
  struct mc_mrpc_client *late = mt_connect(e.mm.port);
  CHECK_EQ(mt_exist(late, "x"), 0);
  mc_mrpc_client_free(late);
  env_stop(&e);
}

/* A pooled connection with no request for rpc_conn_timeout_seconds is closed; without the flag the
 * default (600 s) applies, so a connection that did send a request is not dropped by the first-frame
 * limit. */
static void test_idle_timeout(void) {
  struct env e;
  REQUIRE(env_start(&e, NULL, NULL) == 0);
  int fd = mc_tp_connect(e.mm.port);
  REQUIRE(fd >= 0);
  struct mc_wbuf w = {0};
  mc_w_str(&w, "nothing");
  uint8_t h[MC_MRPC_HDR];
  mc_mrpc_put_hdr(h, MC_OP_EXIST_KEY, 1, (uint32_t)w.len, 0);
  CHECK_EQ(send(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
  CHECK_EQ(send(fd, w.p, w.len, 0), (ssize_t)w.len);
  mc_w_free(&w);
  uint8_t rep[MC_MRPC_HDR + 1];
  CHECK_EQ(recv(fd, rep, sizeof(rep), MSG_WAITALL), (ssize_t)sizeof(rep));
  CHECK_EQ(closed_within(fd, 12000), 0); /* past the 10 s first-frame limit: still open */
  close(fd);
  env_stop(&e);
  const char *extra[] = {"--rpc_conn_timeout_seconds=2", NULL};
  REQUIRE(env_start(&e, extra, NULL) == 0);
  CHECK_EQ(mt_exist(e.c, "x"), 0);
  fd = mc_tp_connect(e.mm.port);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(closed_within(fd, 6000), 1); /* silent and idle: closed by the idle timeout */
  CHECK(mc_tp_now_ms() - t0 < 5000);
  close(fd);
  CHECK_EQ(mt_exist(e.c, "x"), 0); /* the client's pooled connection was closed too: reconnects */
  env_stop(&e);
}

/* ------------------------------------------------------------------ in-flight bytes */

/* Sends a header claiming `claim` body bytes and then up to `send_n` of them (non-blocking, for at most
 * ms); returns the bytes sent. */
static size_t send_partial(int fd, uint32_t claim, size_t send_n, long ms) {
  uint8_t h[MC_MRPC_HDR];
  mc_mrpc_put_hdr(h, MC_OP_BATCH_EXIST_KEY, 7, claim, 0);
  if (send(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h)) return 0;
  static uint8_t chunk[1 << 16];
  size_t sent = 0;
  long t0 = mc_tp_now_ms();
  while (sent < send_n && mc_tp_now_ms() - t0 < ms) {
    ssize_t w = send(fd, chunk, MC_MIN(sizeof(chunk), send_n - sent), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) sent += (size_t)w;
    else if (w < 0 && errno != EAGAIN) break;
    else mc_tp_sleep_ms(2);
  }
  return sent;
}

struct big_job {
  int port, rc;
  long done_ms;
};

static void *big_request(void *arg) {
  struct big_job *j = arg;
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)j->port, 3000, 30000);
  enum { N = 400000 }; /* ~5 MB request */
  const char **keys = malloc(N * sizeof(*keys));
  int32_t *out = malloc(N * sizeof(*out));
  for (int i = 0; i < N; i++) keys[i] = "absent-key";
  j->rc = mt_batch_exist(c, keys, N, out);
  j->done_ms = mc_tp_now_ms();
  free(keys);
  free(out);
  mc_mrpc_client_free(c);
  return NULL;
}

/* Twelve connections each sending 15 MiB of a 16 MiB frame would hold 12 x 16 MiB of master memory unbounded;
 * with MC_MASTER_MAX_INFLIGHT_BYTES=32 MiB the rest wait unread. Small requests are served meanwhile, a
 * large one waits for room and is served as soon as the senders go. */
static void test_inflight_bound(void) {
  struct env e;
  char *envv[] = {(char *)"MC_MASTER_MAX_INFLIGHT_BYTES=33554432", NULL};
  REQUIRE(env_start(&e, NULL, envv) == 0);
  CHECK_EQ(mt_exist(e.c, "x"), 0);
  long rss0 = status_kib(e.mm.pid, "VmRSS");
  enum { HOGS = 12 };
  int fd[HOGS];
  size_t total = 0;
  long t0 = mc_tp_now_ms();
  for (int i = 0; i < HOGS; i++) {
    fd[i] = mc_tp_connect(e.mm.port);
    total += fd[i] >= 0 ? send_partial(fd[i], 16u << 20, 15u << 20, 300) : 0;
  }
  mc_tp_sleep_ms(300);
  long rss1 = status_kib(e.mm.pid, "VmRSS");
  fprintf(stderr, "  %zu MiB sent on %d connections in %ld ms; master VmRSS %ld -> %ld KiB\n", total >> 20, HOGS,
          mc_tp_now_ms() - t0, rss0, rss1);
  CHECK(rss1 - rss0 < 96 * 1024);
  long s0 = mc_tp_now_ms();
  CHECK_EQ(mt_exist(e.c, "x"), 0); /* small requests need no room */
  CHECK(mc_tp_now_ms() - s0 < 1000);
  struct big_job j = {e.mm.port, 1, 0};
  pthread_t t;
  pthread_create(&t, NULL, big_request, &j);
  mc_tp_sleep_ms(1000);
  CHECK_EQ(j.done_ms, 0); /* waiting for room */
  long closed_at = mc_tp_now_ms();
  for (int i = 0; i < HOGS; i++)
    if (fd[i] >= 0) close(fd[i]);
  pthread_join(t, NULL);
  fprintf(stderr, "  large request served %ld ms after the senders closed (rc %d)\n", j.done_ms - closed_at, j.rc);
  CHECK_EQ(j.rc, 0);
  CHECK(j.done_ms - closed_at < 4000);
  CHECK(closed_at - t0 < 8000); /* all of it before the stall limit could have freed the room */
  CHECK(alive(&e));
  env_stop(&e);
}

/* Four clients send ~14 MB requests at once against a 32 MiB in-flight bound, a piece of each in turn, so
 * their frames grow together: each connection ends up holding 8 MiB of room and waiting for the 6 MiB more
 * it needs, and every byte in flight is held by connections that wait. None could ever finish: left alone,
 * the stall limit (10 s) would drop all four. The master must see it within about a second, keep the one
 * waiting longest and close the others, so that one is answered. */
static void test_inflight_room_deadlock(void) {
  struct env e;
  char *envv[] = {(char *)"MC_MASTER_MAX_INFLIGHT_BYTES=33554432", NULL};
  REQUIRE(env_start(&e, NULL, envv) == 0);
  enum { SENDERS = 4, N = 1000000, STEP = 256 << 10 };
  const char **keys = malloc(N * sizeof(*keys));
  for (int i = 0; i < N; i++) keys[i] = "absent-key";
  struct mc_wbuf body = {0};
  mt_keys(&body, keys, N);
  free(keys);
  size_t len = MC_MRPC_HDR + body.len;
  uint8_t *frame = malloc(len);
  mc_mrpc_put_hdr(frame, MC_OP_BATCH_EXIST_KEY, 9, (uint32_t)body.len, 0);
  memcpy(frame + MC_MRPC_HDR, body.p, body.len);
  mc_w_free(&body);
  int fd[SENDERS], answered = 0, dropped = 0;
  size_t sent[SENDERS] = {0};
  for (int i = 0; i < SENDERS; i++) fd[i] = mc_tp_connect(e.mm.port);
  long t0 = mc_tp_now_ms(), took = -1;
  while (mc_tp_now_ms() - t0 < 8000 && !answered) {
    for (int i = 0; i < SENDERS; i++) {
      if (fd[i] < 0) continue;
      if (sent[i] < len) {
        ssize_t w = send(fd[i], frame + sent[i], MC_MIN((size_t)STEP, len - sent[i]), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) sent[i] += (size_t)w;
        else if (w < 0 && errno != EAGAIN) close(fd[i]), fd[i] = -1, dropped++;
      }
      uint8_t b;
      ssize_t r = fd[i] >= 0 ? recv(fd[i], &b, 1, MSG_DONTWAIT | MSG_PEEK) : -1;
      if (r > 0) answered++, took = mc_tp_now_ms() - t0;
      else if (r == 0) close(fd[i]), fd[i] = -1, dropped++;
    }
    mc_tp_sleep_ms(10); /* the master takes in each piece: the four frames grow in step */
  }
  fprintf(stderr, "  %d of %d answered after %ld ms, %d closed by the master\n", answered, SENDERS, took, dropped);
  CHECK(answered >= 1);
  CHECK(took >= 0 && took < 6000); /* (left to the stall limit: none is answered, all dropped after 10 s) */
  for (int i = 0; i < SENDERS; i++)
    if (fd[i] >= 0) close(fd[i]);
  free(frame);
  CHECK(alive(&e));
  env_stop(&e);
}

TEST_MAIN(TEST_CASE(test_regex_crasher), TEST_CASE(test_regex_limits), TEST_CASE(test_regex_no_stall),
          TEST_CASE(test_mount_string_limits), TEST_CASE(test_reply_cap), TEST_CASE(test_connection_cap),
          TEST_CASE(test_idle_timeout), TEST_CASE(test_inflight_bound),
          TEST_CASE(test_inflight_room_deadlock))
