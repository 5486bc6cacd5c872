/* Copy and move tasks end to end (docs/master.md, "Copy and move tasks"): a real mooncake_master, peer
 * clients in other processes holding the segments (this binary re-run as "--peer", test_store_harness.c),
 * the test's own client creating and querying tasks. Every read checks every byte. */
#include <stdatomic.h>

#include "test_store_harness.c"

#define TMO_S "3" /* the master's pending and processing task timeouts in these tests */

/* (a read lease of 1 s: the objects read here are removable a moment later; no retries: these cases check what one
 * attempt does) */
static const char *const master_flags[] = {"--pending_task_timeout_sec=" TMO_S, "--processing_task_timeout_sec=" TMO_S,
                                           "--default_kv_lease_ttl=1000", "--max_retry_attempts=0", NULL};
/* the same with 2 retries (docs/master.md, "Copy and move tasks", "Retries") */
static const char *const retry_flags[] = {"--pending_task_timeout_sec=" TMO_S, "--processing_task_timeout_sec=" TMO_S,
                                          "--default_kv_lease_ttl=1000", "--max_retry_attempts=2", NULL};

/* Polls the task until it leaves PENDING/PROCESSING (up to ms); its last status, -1 when not found. */
static int wait_task(mooncake_store_t s, mc_task_id_t id, long ms, mc_task_info_t *info) {
  long deadline = mc_tp_now_ms() + ms;
  do {
    if (mc_store_query_task(s, id, info)) return -1;
    if (info->status == 2 || info->status == 3) return info->status;
    mc_tp_sleep_ms(50);
  } while (mc_tp_now_ms() < deadline);
  return info->status;
}

/* The segment names holding key's replicas, comma-joined into out; the count. */
static int holders(mooncake_store_t s, const char *key, char *out, size_t len) {
  mc_replica_desc_t *d = NULL;
  int n = mc_store_get_replica_desc(s, key, &d);
  out[0] = 0;
  for (int i = 0; i < n; i++)
    snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "", d[i].segment_name);
  mc_store_replica_desc_free(d, n);
  return n;
}

/* Reads key into a fresh buffer and checks it: its size, -1 on a mismatch, or the error. */
static int64_t read_check(mooncake_store_t s, const char *key, uint64_t size, unsigned seed) {
  char *buf = malloc(size + 1);
  int64_t n = mooncake_store_get_into(s, key, buf, size + 1);
  if (n == (int64_t)size && !verify(buf, size, seed)) n = -1;
  free(buf);
  return n;
}

/* The object is whole (read byte-exact) and, once that read's lease (1 s) ran out, removable: under no task. */
static void usable_then_removed(mooncake_store_t s, const char *key, uint64_t size, unsigned seed) {
  CHECK_EQ(read_check(s, key, size, seed), (int64_t)size);
  mc_tp_sleep_ms(1200);
  CHECK_EQ(mooncake_store_remove(s, key, 0), 0);
}

struct cluster {
  struct master m;
  struct peer p[3];
  int np;
  mooncake_store_t c; /* the test's client: no segment of its own */
};

static const char *const *peer_env; /* environment entries of the next cluster's peers (NULL: none) */

static int cluster_up(struct cluster *k, int npeers, uint64_t gss, const char *const *flags) {
  memset(k, 0, sizeof(*k));
  if (master_start(&k->m, flags)) return -1;
  for (k->np = 0; k->np < npeers; k->np++)
    if (peer_start(&k->p[k->np], &k->m, gss, 16 * MiB, peer_env)) return -1;
  k->c = client_new(&k->m, 0, 64 * MiB);
  return k->c ? 0 : -1;
}

static void cluster_down(struct cluster *k) {
  if (k->c) mooncake_store_destroy(k->c);
  for (int i = 0; i < k->np; i++) {
    if (k->p[i].pid > 0) kill(k->p[i].pid, SIGCONT);
    peer_quit(&k->p[i]);
  }
  master_stop(&k->m);
}

/* The frozen-executor setting: 2 peers, key1 (and key2 when not NULL) put on peer 0's segment (sizes 1 MiB, seeds
 * seed and seed + 1), peer 1 frozen, then a copy of key1 to peer 1's segment, which stays pending: *id. */
static void frozen_copy(struct cluster *k, const char *key1, const char *key2, unsigned seed, mc_task_id_t *id) {
  CHECK(!cluster_up(k, 2, 32 * MiB, master_flags));
  CHECK_EQ(peer_cmd(&k->p[0], "PUT %s %llu %u 1 1", key1, 1 * MiB, seed), 0);
  if (key2) CHECK_EQ(peer_cmd(&k->p[0], "PUT %s %llu %u 1 1", key2, 1 * MiB, seed + 1), 0);
  mc_tp_freeze(k->p[1].pid, 5000);
  const char *tg[] = {k->p[1].name};
  CHECK_EQ(mc_store_create_copy_task(k->c, key1, tg, 1, id), 0);
}

/* ------------------------------------------------------------------ cases */

/* A copy to another segment; then the source's holder dies and the object is still read, byte-exact, from
 * the copy. */
static void test_copy_survives_source(void) {
  struct cluster k;
  CHECK(!cluster_up(&k, 2, 32 * MiB, master_flags));
  struct peer *a = &k.p[0], *b = &k.p[1];
  CHECK_EQ(peer_cmd(a, "PUT cp1 %llu 11 1 1", 3 * MiB), 0);
  char who[512];
  CHECK_EQ(holders(k.c, "cp1", who, sizeof(who)), 1);
  CHECK_STR(who, a->name);
  const char *tg[] = {b->name};
  mc_task_id_t id;
  CHECK_EQ(mc_store_create_copy_task(k.c, "cp1", tg, 1, &id), 0);
  CHECK(id.hi || id.lo);
  mc_task_info_t info;
  CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
  CHECK_EQ(info.type, 0);
  CHECK(info.created_at_ms_epoch > 1600000000000ull && info.last_updated_at_ms_epoch >= info.created_at_ms_epoch);
  CHECK(strlen(info.assigned_client) == 36);
  CHECK_EQ(holders(k.c, "cp1", who, sizeof(who)), 2);
  CHECK_EQ(peer_cmd(b, "GET cp1 %llu 11", 3 * MiB), (long long)(3 * MiB));
  /* a second copy to the same segment: it holds one already */
  CHECK_EQ(mc_store_create_copy_task(k.c, "cp1", tg, 1, &id), -711);
  CHECK(!id.hi && !id.lo);
  peer_kill(a); /* the source's holder dies */
  CHECK_EQ(read_check(k.c, "cp1", 3 * MiB, 11), (int64_t)(3 * MiB));
  CHECK_EQ(peer_cmd(b, "GET cp1 %llu 11", 3 * MiB), (long long)(3 * MiB));
  cluster_down(&k);
}

/* One copy to two segments: the first target's holder reads the source, then writes the second target in another
 * process; both copies are byte-exact, the last one standing serves the reads. */
static void test_copy_two_targets(void) {
  struct cluster k;
  CHECK(!cluster_up(&k, 3, 32 * MiB, master_flags));
  struct peer *a = &k.p[0], *b = &k.p[1], *c = &k.p[2];
  CHECK_EQ(peer_cmd(a, "PUT cp2 %llu 12 1 1", 2 * MiB), 0);
  const char *tg[] = {b->name, c->name};
  mc_task_id_t id;
  CHECK_EQ(mc_store_create_copy_task(k.c, "cp2", tg, 2, &id), 0);
  mc_task_info_t info;
  CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
  char who[512];
  CHECK_EQ(holders(k.c, "cp2", who, sizeof(who)), 3);
  peer_kill(a);
  peer_kill(b);
  CHECK_EQ(peer_cmd(c, "GET cp2 %llu 12", 2 * MiB), (long long)(2 * MiB));
  CHECK_EQ(read_check(k.c, "cp2", 2 * MiB, 12), (int64_t)(2 * MiB));
  cluster_down(&k);
}

struct reader {
  struct peer *p;
  uint64_t size;
  unsigned seed;
  _Atomic int stop;
  long reads, bad;
  long long last_bad;
};

static void *reader_main(void *arg) {
  struct reader *r = arg;
  while (!atomic_load(&r->stop)) {
    long long n = peer_cmd(r->p, "GET mv1 %llu %u", (unsigned long long)r->size, r->seed);
    r->reads++;
    if (n != (long long)r->size) r->bad++, r->last_bad = n;
  }
  return NULL;
}

/* A move while another process reads the key in a loop: every read is whole and byte-exact; afterwards the
 * object lives on the target only. */
static void move_while_read(const char *const *env) {
  struct cluster k;
  peer_env = env;
  CHECK(!cluster_up(&k, 3, 32 * MiB, master_flags));
  peer_env = NULL;
  struct peer *a = &k.p[0], *b = &k.p[1];
  uint64_t size = 4 * MiB;
  CHECK_EQ(peer_cmd(a, "PUT mv1 %llu 22 1 1", (unsigned long long)size), 0);
  struct reader r = {.p = &k.p[2], .size = size, .seed = 22};
  pthread_t th;
  CHECK(!pthread_create(&th, NULL, reader_main, &r));
  mc_tp_sleep_ms(300);
  mc_task_id_t id;
  CHECK_EQ(mc_store_create_move_task(k.c, "mv1", a->name, b->name, &id), 0);
  mc_task_info_t info;
  CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
  CHECK_EQ(info.type, 1);
  mc_tp_sleep_ms(500);
  long during = r.reads;
  mc_tp_sleep_ms(700);
  atomic_store(&r.stop, 1);
  pthread_join(th, NULL);
  fprintf(stderr, "  %ld reads, %ld bad (last %lld)\n", r.reads, r.bad, r.last_bad);
  CHECK(during >= 3 && r.reads > during);
  CHECK_EQ(r.bad, 0);
  char who[512];
  CHECK_EQ(holders(k.c, "mv1", who, sizeof(who)), 1);
  CHECK_STR(who, b->name);
  /* the source holds nothing now: moving from it again names no replica */
  CHECK_EQ(mc_store_create_move_task(k.c, "mv1", a->name, b->name, &id), -710);
  usable_then_removed(k.c, "mv1", size, 22);
  cluster_down(&k);
}

static const char *const tcp_only[] = {"MC_FORCE_TCP=1", NULL}; /* peers reach each other over TCP only */

static void test_move_while_read(void) { move_while_read(NULL); } /* same host: the shared-memory path */
static void test_move_while_read_tcp(void) { move_while_read(tcp_only); }

/* While a task runs (its executor frozen, so it stays pending): remove, forced remove and upsert answer
 * -708, remove_all skips the object; once the executor runs again the task completes and remove works. */
static void test_remove_during_task(void) {
  struct cluster k;
  mc_task_id_t id;
  frozen_copy(&k, "rm1", "rm2", 33, &id);
  struct peer *b = &k.p[1];
  const char *tg[] = {b->name};
  mc_task_info_t info;
  CHECK_EQ(mc_store_query_task(k.c, id, &info), 0);
  CHECK_EQ(info.status, 0); /* PENDING */
  CHECK_EQ(mooncake_store_remove(k.c, "rm1", 0), -708);
  CHECK_EQ(mooncake_store_remove(k.c, "rm1", 1), -708);
  char v[64];
  memset(v, 7, sizeof(v));
  CHECK_EQ(mc_store_upsert(k.c, "rm1", v, sizeof(v), NULL), -708);
  /* a second task on the same object */
  CHECK_EQ(mc_store_create_copy_task(k.c, "rm1", tg, 1, &id), -708);
  CHECK_EQ(mooncake_store_remove_all(k.c, 1), 1); /* rm2 only */
  CHECK_EQ(mooncake_store_is_exist(k.c, "rm1"), 1);
  CHECK_EQ(mooncake_store_is_exist(k.c, "rm2"), 0);
  kill(b->pid, SIGCONT);
  CHECK_EQ(wait_task(k.c, info.id, 10000, &info), 3);
  usable_then_removed(k.c, "rm1", 1 * MiB, 33);
  cluster_down(&k);
}

/* Bad requests get the documented codes and id (0, 0). */
static void test_bad_inputs(void) {
  struct cluster k;
  CHECK(!cluster_up(&k, 3, 8 * MiB, master_flags));
  struct peer *a = &k.p[0], *b = &k.p[1];
  CHECK_EQ(peer_cmd(a, "PUT bad1 %llu 44 1 1", 6 * MiB), 0);
  mc_task_id_t id = {1, 1};
  const char *tb[] = {b->name}, *none[] = {"127.0.0.1:1"}, *twice[] = {b->name, b->name};
  CHECK_EQ(mc_store_create_copy_task(k.c, "nokey", tb, 1, &id), -704);
  CHECK(!id.hi && !id.lo);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", none, 1, &id), -101);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", tb, 0, &id), -600);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", twice, 2, &id), -600);
  CHECK_EQ(mc_store_create_copy_task(k.c, "", tb, 1, &id), -600);
  CHECK_EQ(mc_store_create_move_task(k.c, "bad1", a->name, a->name, &id), -600);
  CHECK_EQ(mc_store_create_move_task(k.c, "bad1", "127.0.0.1:1", b->name, &id), -101);
  CHECK_EQ(mc_store_create_move_task(k.c, "bad1", b->name, a->name, &id), -710); /* b holds no replica */
  CHECK_EQ(mc_store_create_move_task(k.c, "bad1", a->name, "127.0.0.1:1", &id), -101);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", (const char *[]){a->name}, 1, &id), -711);
  /* b's 8 MiB segment takes 6 MiB once, not twice */
  CHECK_EQ(peer_cmd(b, "PUT fill1 %llu 45 1 1", 6 * MiB), 0);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", tb, 1, &id), -200);
  CHECK(!id.hi && !id.lo);
  CHECK_EQ(mc_store_create_copy_task(k.c, NULL, tb, 1, &id), -1);
  CHECK_EQ(mc_store_create_copy_task(k.c, "bad1", NULL, 1, &id), -1);
  /* unknown ids */
  mc_task_info_t info;
  CHECK_EQ(mc_store_query_task(k.c, (mc_task_id_t){0, 0}, &info), -1400);
  CHECK_EQ(mc_store_query_task(k.c, (mc_task_id_t){12345, 678}, &info), -1400);
  /* nothing was left under a task: the object is removable */
  CHECK_EQ(mooncake_store_remove(k.c, "bad1", 0), 0);
  /* the master counted them (docs/admin.md, "Metrics"): 5 copies reached it (the client refused the others), all
   * failed; 4 moves */
  static char resp[1 << 20];
  static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  CHECK(mc_tp_raw_http(k.m.metrics, req, sizeof(req) - 1, resp, sizeof(resp), 5000) > 0);
  CHECK(strstr(resp, "master_create_copy_task_requests_total 5") != NULL);
  CHECK(strstr(resp, "master_create_copy_task_failures_total 5") != NULL);
  CHECK(strstr(resp, "master_create_move_task_requests_total 4") != NULL);
  CHECK(strstr(resp, "master_query_task_failures_total 2") != NULL);
  cluster_down(&k);
}

/* The pending cap: with the executor frozen, tasks beyond --max_total_pending_tasks are refused (-1401); a
 * pending task whose executor never comes fails after the pending timeout and frees its object. */
static void test_pending_cap(void) {
  static const char *const flags[] = {"--pending_task_timeout_sec=" TMO_S, "--processing_task_timeout_sec=" TMO_S,
                                      "--default_kv_lease_ttl=1000", "--max_total_pending_tasks=2",
                                      "--max_retry_attempts=0", NULL};
  struct cluster k;
  CHECK(!cluster_up(&k, 2, 32 * MiB, flags));
  struct peer *a = &k.p[0], *b = &k.p[1];
  for (int i = 0; i < 3; i++) CHECK_EQ(peer_cmd(a, "PUT cap%d %llu %d 1 1", i, 1 * MiB, 50 + i), 0);
  mc_tp_freeze(b->pid, 5000);
  const char *tg[] = {b->name};
  mc_task_id_t id[3];
  CHECK_EQ(mc_store_create_copy_task(k.c, "cap0", tg, 1, &id[0]), 0);
  CHECK_EQ(mc_store_create_copy_task(k.c, "cap1", tg, 1, &id[1]), 0);
  mc_task_info_t info;
  for (int i = 0; i < 2; i++) {
    CHECK_EQ(mc_store_query_task(k.c, id[i], &info), 0);
    CHECK_EQ(info.status, 0);
  }
  CHECK_EQ(mc_store_create_copy_task(k.c, "cap2", tg, 1, &id[2]), -1401);
  CHECK(id[0].lo != id[1].lo);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(wait_task(k.c, id[0], 8000, &info), 2); /* FAILED: pending timed out */
  long took = mc_tp_now_ms() - t0;
  CHECK(took >= 2000 && took < 6000);
  CHECK(strstr(info.message, "timed out") != NULL);
  CHECK_EQ(wait_task(k.c, id[1], 2000, &info), 2);
  CHECK_EQ(mooncake_store_remove(k.c, "cap0", 0), 0);
  CHECK_EQ(mc_store_create_copy_task(k.c, "cap2", tg, 1, &id[2]), 0); /* room again */
  kill(b->pid, SIGCONT);
  CHECK_EQ(wait_task(k.c, id[2], 10000, &info), 3);
  CHECK_EQ(peer_cmd(b, "GET cap2 %llu 52", 1 * MiB), (long long)(1 * MiB));
  cluster_down(&k);
}

/* The executor dies with the task: the task fails by its deadline and the object is whole and usable. */
static void test_executor_dies(void) {
  struct cluster k;
  mc_task_id_t id;
  frozen_copy(&k, "ex1", NULL, 61, &id);
  struct peer *a = &k.p[0];
  peer_kill(&k.p[1]);
  mc_task_info_t info;
  CHECK_EQ(wait_task(k.c, id, 8000, &info), 2);
  CHECK(*info.message);
  char who[512];
  CHECK_EQ(holders(k.c, "ex1", who, sizeof(who)), 1);
  CHECK_STR(who, a->name);
  usable_then_removed(k.c, "ex1", 1 * MiB, 61);
  cluster_down(&k);
}

/* A task stuck in its transfer: 2 peers over TCP, key (1 MiB, seed) put on peer 0's segment, peer 0 frozen, then a
 * copy (or a move) of key to peer 1's segment, seen PROCESSING: its executor, peer 1, reads from the frozen source. */
static mc_task_id_t stuck_task(struct cluster *k, const char *const *flags, const char *key, unsigned seed, int move) {
  peer_env = tcp_only;
  CHECK(!cluster_up(k, 2, 32 * MiB, flags));
  peer_env = NULL;
  struct peer *a = &k->p[0], *b = &k->p[1];
  CHECK_EQ(peer_cmd(a, "PUT %s %llu %u 1 1", key, 1 * MiB, seed), 0);
  mc_tp_freeze(a->pid, 5000);
  const char *tg[] = {b->name};
  mc_task_id_t id = {0};
  if (move) CHECK_EQ(mc_store_create_move_task(k->c, key, a->name, b->name, &id), 0);
  else CHECK_EQ(mc_store_create_copy_task(k->c, key, tg, 1, &id), 0);
  mc_task_info_t info = {0};
  long deadline = mc_tp_now_ms() + 3000;
  while (!mc_store_query_task(k->c, id, &info) && info.status == 0 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(20);
  CHECK_EQ(info.status, 1); /* PROCESSING: fetched, reading from the frozen source */
  return id;
}

/* A task times out while its executor is in the middle of its transfer (the source's holder is frozen, so the read
 * hangs over TCP, where shared memory would not need the source's process, and the task is seen PROCESSING): the processing deadline fails it and the object is whole on its
 * source. kill: the executor dies there; else it lives on, its read completes once the source thaws, and its late
 * report is refused while the object stays as it was; a new task then succeeds. */
static void processing_timeout(int kill_executor) {
  struct cluster k;
  mc_task_id_t id = stuck_task(&k, master_flags, "ep1", 81, 0);
  struct peer *a = &k.p[0], *b = &k.p[1];
  const char *tg[] = {b->name};
  mc_task_info_t info = {0};
  if (kill_executor) peer_kill(b);
  CHECK_EQ(wait_task(k.c, id, 8000, &info), 2);
  CHECK(strstr(info.message, "processing timed out") != NULL);
  kill(a->pid, SIGCONT);
  if (!kill_executor) mc_tp_sleep_ms(1500); /* its read completes and it reports, too late */
  CHECK_EQ(mc_store_query_task(k.c, id, &info), 0);
  CHECK_EQ(info.status, 2);
  char who[512];
  CHECK_EQ(holders(k.c, "ep1", who, sizeof(who)), 1);
  CHECK_STR(who, a->name);
  if (!kill_executor) {
    CHECK_EQ(mc_store_create_copy_task(k.c, "ep1", tg, 1, &id), 0);
    CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
    CHECK_EQ(peer_cmd(b, "GET ep1 %llu 81", 1 * MiB), (long long)(1 * MiB));
  }
  usable_then_removed(k.c, "ep1", 1 * MiB, 81);
  cluster_down(&k);
}

static void test_executor_dies_processing(void) { processing_timeout(1); }

/* An attempt whose executor stalls past its deadline is retried under the same id: the first attempt's late report
 * is refused, the executor fetches the retry once it runs again, and the copy completes byte-exact. */
static void test_retried_after_stall(void) {
  struct cluster k;
  mc_task_id_t id = stuck_task(&k, retry_flags, "rt1", 91, 0);
  struct peer *a = &k.p[0], *b = &k.p[1];
  mc_task_info_t info = {0};
  long deadline = mc_tp_now_ms() + 8000; /* the processing deadline (3 s) passes: attempt 2, pending */
  while (!mc_store_query_task(k.c, id, &info) && !strstr(info.message, "attempt 1 failed") && mc_tp_now_ms() < deadline)
    mc_tp_sleep_ms(50);
  CHECK(strstr(info.message, "attempt 1 failed: processing timed out") != NULL);
  CHECK(info.status == 0 || info.status == 1);
  kill(a->pid, SIGCONT); /* the first attempt's read completes (its report is refused); the retry runs */
  CHECK_EQ(wait_task(k.c, id, 15000, &info), 3);
  char who[512];
  CHECK_EQ(holders(k.c, "rt1", who, sizeof(who)), 2);
  CHECK_EQ(peer_cmd(b, "GET rt1 %llu 91", 1 * MiB), (long long)(1 * MiB));
  CHECK_EQ(read_check(k.c, "rt1", 1 * MiB, 91), (long long)(1 * MiB));
  cluster_down(&k);
}

/* The executor is SIGKILLed in the middle of its transfer: each attempt fails (the first by its processing deadline,
 * the retries, placed on the dead executor's segment until its client expires, by theirs), and after 3 attempts the
 * task ends FAILED saying so; the object is whole on its source and under no task. */
static void test_retries_exhausted(void) {
  struct cluster k;
  mc_task_id_t id = stuck_task(&k, retry_flags, "rt2", 93, 0);
  struct peer *a = &k.p[0];
  peer_kill(&k.p[1]);
  kill(a->pid, SIGCONT);
  mc_task_info_t info = {0};
  CHECK_EQ(wait_task(k.c, id, 20000, &info), 2);
  fprintf(stderr, "task ended: %s\n", info.message);
  CHECK(strstr(info.message, "attempt 3 of 3 failed") != NULL || strstr(info.message, "no retry: SEGMENT_NOT_FOUND") != NULL);
  char who[512];
  CHECK_EQ(holders(k.c, "rt2", who, sizeof(who)), 1);
  CHECK_STR(who, a->name);
  usable_then_removed(k.c, "rt2", 1 * MiB, 93);
  cluster_down(&k);
}

/* The used bytes of the segments named `name` (admin /query_segment), or -1. */
static long long used_of(struct master *m, const char *name) {
  char path[256], resp[4096] = "";
  snprintf(path, sizeof(path), "/query_segment?segment=%s", name);
  int fd = mc_tp_connect(m->metrics);
  if (fd < 0) return -1;
  char req[512];
  int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
  long long used = -1;
  if (write(fd, req, (size_t)n) == n) {
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(resp) - 1 && (r = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0) got += (size_t)r;
    resp[got] = 0;
    const char *u = strstr(resp, "Used(bytes): ");
    if (u) used = strtoll(u + strlen("Used(bytes): "), NULL, 10);
  }
  close(fd);
  return used;
}

/* A master restart in the middle of a move (executor b stuck reading the frozen source a): the move is forgotten,
 * the object comes back from a's index, whole, on a only (the source is not lost, the half-written target is never
 * served), b's segment holds nothing (the target's space did not leak), and a new move then runs and frees a. */
static void test_master_restart_during_move(void) {
  struct cluster k;
  mc_task_id_t id = stuck_task(&k, master_flags, "mv1", 95, 1);
  struct peer *a = &k.p[0], *b = &k.p[1];
  mc_task_info_t info = {0};
  long deadline;
  CHECK_EQ(used_of(&k.m, b->name), (long long)(1 * MiB)); /* the target's space */
  CHECK_EQ(master_restart(&k.m, master_flags), 0);
  kill(a->pid, SIGCONT); /* a remounts; b's read completes, its write lands in its own free space, its report is refused */
  deadline = mc_tp_now_ms() + 15000;
  while (mooncake_store_is_exist(k.c, "mv1") != 1 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(100);
  CHECK_EQ(mooncake_store_is_exist(k.c, "mv1"), 1);
  CHECK_EQ(mc_store_query_task(k.c, id, &info), -1400);
  mc_tp_sleep_ms(1500); /* b's late transfer and report are over */
  char who[512];
  CHECK_EQ(holders(k.c, "mv1", who, sizeof(who)), 1);
  CHECK_STR(who, a->name);
  CHECK_EQ(read_check(k.c, "mv1", 1 * MiB, 95), (long long)(1 * MiB));
  CHECK_EQ(used_of(&k.m, b->name), 0); /* nothing of the target left */
  CHECK_EQ(used_of(&k.m, a->name), (long long)(1 * MiB));
  /* a new move on the new master completes and frees the source (after the read's lease) */
  mc_tp_sleep_ms(1200);
  deadline = mc_tp_now_ms() + 15000;
  int rc;
  while ((rc = mc_store_create_move_task(k.c, "mv1", a->name, b->name, &id)) && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(200);
  CHECK_EQ(rc, 0);
  CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
  CHECK_EQ(peer_cmd(b, "GET mv1 %llu 95", 1 * MiB), (long long)(1 * MiB));
  deadline = mc_tp_now_ms() + 5000;
  while (used_of(&k.m, a->name) != 0 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(100);
  CHECK_EQ(used_of(&k.m, a->name), 0);
  cluster_down(&k);
}
static void test_late_executor(void) { processing_timeout(0); }

/* A master restart forgets its tasks cleanly: the old id is unknown, the object comes back from its holder's
 * index under no task (removable, byte-exact), and new tasks run against the new master. */
static void test_master_restart(void) {
  struct cluster k;
  mc_task_id_t id;
  frozen_copy(&k, "hr1", "hr2", 71, &id);
  struct peer *b = &k.p[1];
  const char *tg[] = {b->name};
  CHECK_EQ(master_restart(&k.m, master_flags), 0);
  long deadline = mc_tp_now_ms() + 15000;
  while (mooncake_store_is_exist(k.c, "hr1") != 1 && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(100);
  mc_task_info_t info;
  CHECK_EQ(mc_store_query_task(k.c, id, &info), -1400);
  kill(b->pid, SIGCONT);
  usable_then_removed(k.c, "hr1", 1 * MiB, 71);
  /* the executor is back (it remounted): a new task on the new master runs */
  deadline = mc_tp_now_ms() + 15000;
  int rc;
  while ((rc = mc_store_create_copy_task(k.c, "hr2", tg, 1, &id)) && mc_tp_now_ms() < deadline) mc_tp_sleep_ms(200);
  CHECK_EQ(rc, 0);
  CHECK_EQ(wait_task(k.c, id, 10000, &info), 3);
  CHECK_EQ(peer_cmd(b, "GET hr2 %llu 72", 1 * MiB), (long long)(1 * MiB));
  cluster_down(&k);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  static const struct mc_test_case cases[] = {
      {"copy_survives_source", test_copy_survives_source}, {"move_while_read", test_move_while_read},
      {"move_while_read_tcp", test_move_while_read_tcp},   {"copy_two_targets", test_copy_two_targets},
      {"remove_during_task", test_remove_during_task},     {"bad_inputs", test_bad_inputs},
      {"pending_cap", test_pending_cap},                   {"executor_dies", test_executor_dies},
      {"executor_dies_processing", test_executor_dies_processing}, {"late_executor", test_late_executor},
      {"master_restart", test_master_restart},             {"retried_after_stall", test_retried_after_stall},
      {"retries_exhausted", test_retries_exhausted},       {"master_restart_during_move", test_master_restart_during_move},
  };
  return run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
