/* store_bench: store-client and master benchmarks (bench/run_store_bench.sh drives it).
 *
 *   --mode=holder  a storage client that contributes --global_segment_size and idles until SIGTERM/SIGINT.
 *                  Prints "HOLDER ready name=<segment name> setup_ms=<time of mooncake_store_setup>", then
 *                  "HOLDER warm after_s=<s>" once its background warming of the segment is done.
 *   --mode=client  put/get/exist loops through libmooncake_store (zero-copy calls on registered memory:
 *                  put_from / batch_put_from, get_into / batch_get_into, is_exist / batch_is_exist).
 *                  One case from --op/--value_size/--batch, or several from --cases="op:size:batch,...",
 *                  run in order in this one process (so a same-host client maps a holder's memory once).
 *                  --warm_bytes first puts and removes that many bytes of 1 MiB objects (untimed, reported),
 *                  then waits (up to 60 s) until the client's background warming of that memory is done.
 *                  One "RESULT ..." line per case.
 *   --mode=rpc     raw master RPC rate with --threads connections (one per thread): exist, batch_exist,
 *                  batch_lookup (BatchGetReplicaList), put (PutStart + PutEnd, 4 KiB, no data moved),
 *                  xput (one COMMIT_PUT per 4 KiB put into a write extent reserved once per 16 MiB).
 *                  It mounts a metadata-only segment of its own (the master never touches bytes), keeps it
 *                  alive with pings, and unmounts it at the end. One "RPC ..." line per case.
 *
 * put cases write fresh keys; when a thread has written --cap_bytes (split among threads) the clock is
 * paused, its keys are removed and the loop goes on, so the holder never fills up and the same (warm)
 * segment offsets are reused. --max_bytes > 0 stops a put case after that many bytes instead (first pass
 * over a fresh segment). get cases first put a working set of --ws_bytes (at least 2 batches, untimed),
 * exist cases --keys keys. Every key a case creates is removed when the case ends.
 * Latency is per call (a batched call counts once); p50/p99 over all calls of all threads. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/util.h"
#include "lib/extents_client.h"
#include "lib/master_client.h"
#include "mooncake/store.h"
#include "net/sock.h"

#define KEYLEN 64
#define REMOVE_CHUNK 8192

struct opts {
  char *mode, *op, *cases, *local_hostname, *metadata_server, *master_server_addr, *protocol, *preferred, *cpu_pids;
  uint64_t value_size, global_segment_size, local_buffer_size, cap_bytes, max_bytes, ws_bytes, warm_bytes;
  int64_t batch, threads, keys, settle_ms;
  double duration;
};

static const struct mc_cfg_opt opt_table[] = {
    {"mode", MC_CFG_STRING, "client", 1, 0, offsetof(struct opts, mode), "holder | client | rpc"},
    {"op", MC_CFG_STRING, "get", 1, 0, offsetof(struct opts, op),
     "client: put | get | putget | exist | batch_exist; rpc: exist | batch_exist | batch_lookup | put | xput"},
    {"cases", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, cases),
     "client: op:size:batch,... ; rpc: op:threads,... (overrides --op/--value_size/--batch/--threads)"},
    {"value_size", MC_CFG_SIZE, "1MiB", 8, 1e12, offsetof(struct opts, value_size), "bytes per object"},
    {"batch", MC_CFG_INT, "1", 1, 1e6, offsetof(struct opts, batch), "keys per call (1 = unbatched calls)"},
    {"duration", MC_CFG_DOUBLE, "2", 0.01, 3600, offsetof(struct opts, duration), "timed seconds per case"},
    {"threads", MC_CFG_INT, "1", 1, 256, offsetof(struct opts, threads), "threads (rpc: one connection each)"},
    {"keys", MC_CFG_INT, "100000", 1, 1e8, offsetof(struct opts, keys), "existing keys for exist cases"},
    {"cap_bytes", MC_CFG_SIZE, "256MiB", 1, 1e15, offsetof(struct opts, cap_bytes),
     "put cases: remove and reuse after this many bytes (untimed)"},
    {"settle_ms", MC_CFG_INT, "0", 0, 10000, offsetof(struct opts, settle_ms),
     "put cases: after each untimed removal, wait this long (untimed) for work it left to the background"},
    {"max_bytes", MC_CFG_SIZE, "0", 0, 1e15, offsetof(struct opts, max_bytes),
     "put cases: stop after this many bytes (0 = run for --duration)"},
    {"ws_bytes", MC_CFG_SIZE, "256MiB", 1, 1e15, offsetof(struct opts, ws_bytes), "get cases: working set"},
    {"cpu_pids", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, cpu_pids),
     "client: pids (comma-separated) whose CPU time counts with this process's in cpu_us_per_key"},
    {"warm_bytes", MC_CFG_SIZE, "0", 0, 1e15, offsetof(struct opts, warm_bytes),
     "client: put+remove this many bytes of 1 MiB objects before the cases"},
    {"local_hostname", MC_CFG_STRING, "127.0.0.1", 1, 0, offsetof(struct opts, local_hostname), "segment name host"},
    {"metadata_server", MC_CFG_STRING, "http://127.0.0.1:8080/metadata", 1, 0, offsetof(struct opts, metadata_server),
     "transfer-engine metadata service"},
    {"master_server_addr", MC_CFG_STRING, "127.0.0.1:50051", 1, 0, offsetof(struct opts, master_server_addr),
     "master RPC address"},
    {"protocol", MC_CFG_STRING, "tcp", 1, 0, offsetof(struct opts, protocol), "tcp"},
    {"global_segment_size", MC_CFG_SIZE, "0", 0, 1e15, offsetof(struct opts, global_segment_size),
     "memory contributed (holder default 1 GiB when 0; client 0 = pure client)"},
    {"local_buffer_size", MC_CFG_SIZE, "16MiB", 0, 1e15, offsetof(struct opts, local_buffer_size), "staging buffer"},
    {"preferred", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, preferred),
     "client: put objects on this segment (a holder's name) first"},
    MC_CFG_END,
};

static struct opts O;

/* ------------------------------------------------------------------ small helpers */

static double now_s(void) { return (double)mc_now_ns() / 1e9; }

struct lat {
  double *v; /* microseconds */
  size_t n, cap;
};

static void lat_add(struct lat *l, double us) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 4096;
    l->v = realloc(l->v, l->cap * sizeof(double));
    if (!l->v) abort();
  }
  l->v[l->n++] = us;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* p50/p99 over several latency arrays. */
static void percentiles(struct lat *ls, int n, double *p50, double *p99) {
  size_t total = 0;
  for (int i = 0; i < n; i++) total += ls[i].n;
  *p50 = *p99 = 0;
  if (!total) return;
  double *all = malloc(total * sizeof(double));
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    memcpy(all + k, ls[i].v, ls[i].n * sizeof(double));
    k += ls[i].n;
  }
  qsort(all, total, sizeof(double), cmp_d);
  *p50 = all[(size_t)((double)(total - 1) * 0.50)];
  *p99 = all[(size_t)((double)(total - 1) * 0.99)];
  free(all);
}

static void *xalloc_prefaulted(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, n ? n : 1)) {
    fprintf(stderr, "cannot allocate %zu bytes\n", n);
    exit(1);
  }
  memset(p, 0x5a, n);
  return p;
}

/* ------------------------------------------------------------------ holder */

static volatile sig_atomic_t g_stop;
static void on_stop(int sig) { g_stop = sig; }
/* the process id in key names, read once (getpid is a system call; the timed loops name a key per call) */
static int mypid(void) {
  static int pid;
  if (!pid) pid = (int)getpid();
  return pid;
}
#define MYPID mypid()

static int run_holder(void) {
  mc_alloc_tune_server(); /* as mooncake_store_node, the holder it stands for */
  struct sigaction sa = {0};
  sa.sa_handler = on_stop; /* our own handler: the library then installs none */
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  uint64_t gss = O.global_segment_size ? O.global_segment_size : (1ull << 30);
  mooncake_store_t s = mooncake_store_create();
  double t0 = now_s();
  int rc = mooncake_store_setup(s, O.local_hostname, O.metadata_server, gss, O.local_buffer_size, O.protocol, "",
                                O.master_server_addr);
  double setup_ms = (now_s() - t0) * 1e3;
  if (rc) {
    fprintf(stderr, "holder setup failed: %d %s\n", rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(s);
    return 1;
  }
  char name[256];
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("HOLDER ready name=%s setup_ms=%.2f segment=%llu\n", name, setup_ms, (unsigned long long)gss);
  fflush(stdout);
  double w0 = now_s();
  while (!g_stop && mc_store_warmup_pending(s)) usleep(20000);
  if (!g_stop) printf("HOLDER warm after_s=%.2f\n", now_s() - w0);
  fflush(stdout);
  while (!g_stop) pause();
  t0 = now_s();
  mooncake_store_destroy(s);
  printf("HOLDER stopped destroy_ms=%.1f\n", (now_s() - t0) * 1e3);
  return 0;
}

/* ------------------------------------------------------------------ client */

enum { OP_PUT, OP_GET, OP_EXIST, OP_BATCH_EXIST };

struct ccase {
  int op;
  const char *opname;
  uint64_t size;
  int batch;
};

static mooncake_store_t S;
static mooncake_replicate_config_t CFG;
static const mooncake_replicate_config_t *CFGP;
static pthread_barrier_t BAR;

struct shared_set { /* keys of a get/exist case, shared by the threads */
  char (*names)[KEYLEN];
  const char **keys;
  size_t n;
};
static struct shared_set SET;

struct tctx {
  int id, nthreads, case_no;
  const struct ccase *c;
  char *buf;
  size_t buflen;
  uint64_t calls, keys, bytes, errors;
  double timed_s;
  struct lat lat;
};

static void remove_keys(const char **keys, size_t n) {
  int *res = malloc(REMOVE_CHUNK * sizeof(int));
  for (size_t off = 0; off < n; off += REMOVE_CHUNK)
    mc_store_batch_remove(S, keys + off, MC_MIN(REMOVE_CHUNK, n - off), 1, res);
  free(res);
}

/* Puts set keys [0,n) with value size `size`, key index in the first 8 bytes. Untimed. 0 or -1. */
static int populate(size_t n, uint64_t size) {
  size_t chunk = (size_t)MC_MAX(1, MC_MIN((uint64_t)1024, (64ull << 20) / size));
  chunk = MC_MIN(chunk, n);
  char *buf = xalloc_prefaulted(chunk * size);
  if (mooncake_store_register_buffer(S, buf, chunk * size)) {
    fprintf(stderr, "register_buffer failed\n");
    free(buf);
    return -1;
  }
  void **bufs = calloc(chunk, sizeof(void *));
  size_t *sizes = calloc(chunk, sizeof(size_t));
  int *res = calloc(chunk, sizeof(int)), bad = 0;
  for (size_t j = 0; j < chunk; j++) bufs[j] = buf + j * size, sizes[j] = size;
  for (size_t off = 0; off < n && !bad; off += chunk) {
    size_t m = MC_MIN(chunk, n - off);
    for (size_t j = 0; j < m; j++) {
      uint64_t idx = off + j;
      memcpy(bufs[j], &idx, 8);
    }
    if (mooncake_store_batch_put_from(S, SET.keys + off, bufs, sizes, m, CFGP, res)) bad = 1;
    /* space that the case before removed comes back once its holder acknowledged the DROPs (docs/ha.md,
     * "Space is reused only after its DROP is acknowledged"): a key that found none waits for it (2 s) */
    for (size_t j = 0; j < m && !bad; j++)
      for (int t = 0; res[j] == MC_NO_AVAILABLE_HANDLE && t < 100; t++) {
        usleep(20000);
        res[j] = mooncake_store_put_from(S, SET.keys[off + j], bufs[j], size, CFGP);
      }
    for (size_t j = 0; j < m; j++)
      if (res[j]) {
        fprintf(stderr, "populate: put %s failed: %d %s\n", SET.keys[off + j], res[j], mooncake_store_err_name(res[j]));
        bad = 1;
        break;
      }
  }
  mooncake_store_unregister_buffer(S, buf);
  free(res);
  free(sizes);
  free(bufs);
  free(buf);
  return bad ? -1 : 0;
}

static void put_loop(struct tctx *t) {
  const struct ccase *c = t->c;
  int B = c->batch;
  uint64_t per_thread_cap = O.cap_bytes / (uint64_t)t->nthreads;
  size_t cap_keys = (size_t)MC_MAX((uint64_t)B, per_thread_cap / c->size / (uint64_t)B * (uint64_t)B);
  char (*names)[KEYLEN] = malloc(cap_keys * KEYLEN);
  const char **keys = malloc(cap_keys * sizeof(char *));
  void **bufs = malloc((size_t)B * sizeof(void *));
  size_t *sizes = malloc((size_t)B * sizeof(size_t));
  int *res = malloc((size_t)B * sizeof(int));
  for (int j = 0; j < B; j++) bufs[j] = t->buf + (size_t)j * c->size, sizes[j] = c->size;
  for (size_t i = 0; i < cap_keys; i++) keys[i] = names[i];
  uint64_t counter = 0, max_bytes = O.max_bytes ? O.max_bytes / (uint64_t)t->nthreads : 0;
  size_t written = 0;
  double limit = O.max_bytes ? 1e9 : O.duration, timed = 0;
  pthread_barrier_wait(&BAR);
  double start = now_s();
  while (timed + (now_s() - start) < limit && (!max_bytes || t->bytes < max_bytes)) {
    if (written + (size_t)B > cap_keys) { /* untimed: remove what we wrote, reuse the space */
      timed += now_s() - start;
      remove_keys(keys, written);
      if (O.settle_ms) usleep((useconds_t)O.settle_ms * 1000);
      written = 0;
      start = now_s();
    }
    for (int j = 0; j < B; j++)
      snprintf(names[written + (size_t)j], KEYLEN, "sb/%d/%d/%d/%llu", MYPID, t->case_no, t->id,
               (unsigned long long)counter++);
    double t0 = now_s();
    int ok = 0;
    if (B == 1) {
      int rc = mooncake_store_put_from(S, keys[written], bufs[0], c->size, CFGP);
      ok = rc == 0;
      if (rc && t->errors < 3) fprintf(stderr, "put: %d %s\n", rc, mooncake_store_err_name(rc));
    } else {
      int rc = mooncake_store_batch_put_from(S, keys + written, bufs, sizes, (size_t)B, CFGP, res);
      for (int j = 0; j < B; j++) {
        ok += !rc && !res[j];
        if ((rc || res[j]) && t->errors < 3) fprintf(stderr, "batch put: %d %d\n", rc, res[j]);
      }
    }
    lat_add(&t->lat, (now_s() - t0) * 1e6);
    t->calls++;
    t->keys += (uint64_t)ok;
    t->bytes += (uint64_t)ok * c->size;
    t->errors += (uint64_t)(B - ok);
    written += (size_t)B;
  }
  t->timed_s = timed + (now_s() - start);
  remove_keys(keys, written);
  free(res);
  free(sizes);
  free(bufs);
  free(keys);
  free(names);
}

static void get_loop(struct tctx *t) {
  const struct ccase *c = t->c;
  int B = c->batch;
  size_t n = SET.n, pos = (n / (size_t)t->nthreads) * (size_t)t->id;
  const char **keys = malloc((size_t)B * sizeof(char *));
  void **bufs = malloc((size_t)B * sizeof(void *));
  size_t *sizes = malloc((size_t)B * sizeof(size_t));
  int64_t *res = malloc((size_t)B * sizeof(int64_t));
  int *eres = malloc((size_t)B * sizeof(int));
  size_t *idx = malloc((size_t)B * sizeof(size_t));
  for (int j = 0; j < B; j++) bufs[j] = t->buf + (size_t)j * c->size, sizes[j] = c->size;
  pthread_barrier_wait(&BAR);
  double start = now_s();
  while (now_s() - start < O.duration) {
    for (int j = 0; j < B; j++) {
      idx[j] = pos;
      keys[j] = SET.keys[pos];
      pos = pos + 1 == n ? 0 : pos + 1;
    }
    double t0 = now_s();
    int ok = 0;
    if (c->op == OP_GET) {
      if (B == 1) {
        res[0] = mooncake_store_get_into(S, keys[0], bufs[0], c->size);
      } else if (mooncake_store_batch_get_into(S, keys, bufs, sizes, (size_t)B, res)) {
        for (int j = 0; j < B; j++) res[j] = -1;
      }
      double us = (now_s() - t0) * 1e6;
      for (int j = 0; j < B; j++) {
        uint64_t got = 0;
        if (res[j] == (int64_t)c->size) memcpy(&got, bufs[j], 8);
        if (res[j] == (int64_t)c->size && got == idx[j]) ok++;
        else if (t->errors < 3)
          fprintf(stderr, "get %s: %lld (index %llu, want %zu)\n", keys[j], (long long)res[j], (unsigned long long)got,
                  idx[j]);
      }
      lat_add(&t->lat, us);
    } else {
      if (c->op == OP_EXIST) {
        eres[0] = mooncake_store_is_exist(S, keys[0]);
      } else if (mooncake_store_batch_is_exist(S, keys, (size_t)B, eres)) {
        for (int j = 0; j < B; j++) eres[j] = -1;
      }
      lat_add(&t->lat, (now_s() - t0) * 1e6);
      for (int j = 0; j < B; j++) ok += eres[j] == 1;
    }
    t->calls++;
    t->keys += (uint64_t)ok;
    t->bytes += c->op == OP_GET ? (uint64_t)ok * c->size : 0;
    t->errors += (uint64_t)(B - ok);
  }
  t->timed_s = now_s() - start;
  free(idx);
  free(eres);
  free(res);
  free(sizes);
  free(bufs);
  free(keys);
}

/* CPU seconds (user + system) of this process (each[0]) and of each --cpu_pids process (each[1..], in the
 * order given) so far; returns their sum. A case's cpu_us_per_key is the sum's growth over the case divided
 * by its keys: what a key costs the machine, whatever else runs on it (a wall-clock rate on a shared machine
 * says less); cpu_each splits it by process, so a cost off the caller's path (a holder's, which in a
 * cluster runs on another host) can be told from one on it. */
#define CPU_PROCS_MAX 8
static double cpu_s(double each[CPU_PROCS_MAX], int *n_each) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double t = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  int n = 0;
  each[n++] = t;
  long hz = sysconf(_SC_CLK_TCK);
  for (const char *p = O.cpu_pids; p && *p && n < CPU_PROCS_MAX;) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", strtol(p, NULL, 10));
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[len] = 0;
    const char *q = strrchr(buf, ')'); /* fields after the command name: state is field 3, utime 14, stime 15 */
    unsigned long long ut = 0, st = 0;
    double c = 0;
    if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
      c = (double)(ut + st) / (double)hz;
    each[n++] = c;
    t += c;
    p = strchr(p, ',');
    if (p) p++;
  }
  *n_each = n;
  return t;
}

static void *client_thread(void *arg) {
  struct tctx *t = arg;
  if (t->c->op == OP_PUT) put_loop(t);
  else get_loop(t);
  return NULL;
}

static int run_case(const struct ccase *c, int case_no) {
  int nt = (int)O.threads;
  struct tctx *ts = calloc((size_t)nt, sizeof(*ts));
  int bad = 0;
  /* the working set of get/exist cases */
  memset(&SET, 0, sizeof(SET));
  if (c->op != OP_PUT) {
    size_t n = c->op == OP_GET ? (size_t)(O.ws_bytes / c->size) : (size_t)O.keys;
    n = MC_MAX(n, 2 * (size_t)c->batch * (size_t)nt);
    SET.n = n;
    SET.names = malloc(n * KEYLEN);
    SET.keys = malloc(n * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
      snprintf(SET.names[i], KEYLEN, "sbset/%d/%d/%zu", (int)getpid(), case_no, i);
      SET.keys[i] = SET.names[i];
    }
    if (populate(n, c->op == OP_GET ? c->size : MC_MAX(c->size, 8))) bad = 1;
  }
  for (int i = 0; i < nt && !bad; i++) {
    ts[i] = (struct tctx){.id = i, .nthreads = nt, .case_no = case_no, .c = c};
    ts[i].buflen = (c->op == OP_GET || c->op == OP_PUT) ? (size_t)c->batch * c->size : 64;
    ts[i].buf = xalloc_prefaulted(ts[i].buflen);
    if (mooncake_store_register_buffer(S, ts[i].buf, ts[i].buflen)) {
      fprintf(stderr, "register_buffer of %zu bytes failed\n", ts[i].buflen);
      bad = 1;
    }
  }
  /* this client's own memory (segment, staging, the buffers above) is warmed in the background: measure
   * after that (bounded), so a case sees warm client memory whatever runs first */
  for (double w0 = now_s(); !bad && mc_store_warmup_pending(S) && now_s() - w0 < 30;) usleep(10000);
  if (!bad) {
    pthread_barrier_init(&BAR, NULL, (unsigned)nt);
    pthread_t *th = calloc((size_t)nt, sizeof(pthread_t));
    double each0[CPU_PROCS_MAX], each1[CPU_PROCS_MAX];
    int ne0, ne1;
    double cpu0 = cpu_s(each0, &ne0), wall0 = now_s();
    for (int i = 0; i < nt; i++) pthread_create(&th[i], NULL, client_thread, &ts[i]);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    double cpu = cpu_s(each1, &ne1) - cpu0, wall = now_s() - wall0;
    free(th);
    pthread_barrier_destroy(&BAR);
    double gbps = 0, keys_s = 0, calls_s = 0, secs = 0, p50, p99;
    uint64_t calls = 0, keys = 0, errors = 0, bytes = 0;
    struct lat *ls = calloc((size_t)nt, sizeof(*ls));
    for (int i = 0; i < nt; i++) {
      double ts_ = ts[i].timed_s > 0 ? ts[i].timed_s : 1e-9;
      gbps += (double)ts[i].bytes / ts_ / 1e9;
      keys_s += (double)ts[i].keys / ts_;
      calls_s += (double)ts[i].calls / ts_;
      secs = MC_MAX(secs, ts[i].timed_s);
      calls += ts[i].calls, keys += ts[i].keys, errors += ts[i].errors, bytes += ts[i].bytes;
      ls[i] = ts[i].lat;
    }
    percentiles(ls, nt, &p50, &p99);
    free(ls);
    printf("RESULT op=%s size=%llu batch=%d threads=%d calls=%llu keys=%llu bytes=%llu secs=%.3f gbps=%.3f "
           "keys_s=%.0f calls_s=%.0f p50_us=%.1f p99_us=%.1f errors=%llu cpu_us_per_key=%.2f cpus_busy=%.2f\n",
           c->opname, (unsigned long long)c->size, c->batch, nt, (unsigned long long)calls, (unsigned long long)keys,
           (unsigned long long)bytes, secs, gbps, keys_s, calls_s, p50, p99, (unsigned long long)errors,
           keys ? cpu * 1e6 / (double)keys : 0.0, wall > 0 ? cpu / wall : 0.0);
    if (ne1 > 1 && ne1 == ne0) { /* cpu_each: this client's, then each --cpu_pids process's, us per key */
      printf("CPUEACH op=%s size=%llu batch=%d each=", c->opname, (unsigned long long)c->size, c->batch);
      for (int i = 0; i < ne1; i++) printf("%s%.2f", i ? "/" : "", keys ? (each1[i] - each0[i]) * 1e6 / (double)keys : 0.0);
      printf("\n");
    }
    fflush(stdout);
    if (errors) bad = 1;
  }
  for (int i = 0; i < nt; i++) {
    if (ts[i].buf) {
      mooncake_store_unregister_buffer(S, ts[i].buf);
      free(ts[i].buf);
    }
    free(ts[i].lat.v);
  }
  if (SET.n) remove_keys(SET.keys, SET.n);
  free(SET.keys);
  free(SET.names);
  memset(&SET, 0, sizeof(SET));
  free(ts);
  return bad ? -1 : 0;
}

/* Untimed-by-the-cases warm pass: 1 MiB objects up to warm_bytes, then removed. */
static int warm(uint64_t bytes) {
  const uint64_t sz = 1 << 20;
  size_t n = (size_t)(bytes / sz);
  char *buf = xalloc_prefaulted(sz);
  char(*names)[KEYLEN] = malloc(n * KEYLEN);
  const char **keys = malloc(n * sizeof(char *));
  if (mooncake_store_register_buffer(S, buf, sz)) return -1;
  int bad = 0;
  double t0 = now_s();
  for (size_t i = 0; i < n && !bad; i++) {
    snprintf(names[i], KEYLEN, "sbwarm/%d/%zu", (int)getpid(), i);
    keys[i] = names[i];
    int rc = mooncake_store_put_from(S, keys[i], buf, sz, CFGP);
    if (rc) {
      fprintf(stderr, "warm put: %d %s\n", rc, mooncake_store_err_name(rc));
      bad = 1;
    }
  }
  double secs = now_s() - t0;
  /* the mapping of the holder that these puts used is warmed in the background: let that finish (bounded) */
  double w0 = now_s();
  while (mc_store_warmup_pending(S) && now_s() - w0 < 60) usleep(20000);
  printf("WARM bytes=%llu secs=%.3f gbps=%.3f then_warmup_secs=%.3f\n", (unsigned long long)(n * sz), secs,
         (double)(n * sz) / secs / 1e9, now_s() - w0);
  fflush(stdout);
  remove_keys(keys, n);
  mooncake_store_unregister_buffer(S, buf);
  free(keys);
  free(names);
  free(buf);
  return bad ? -1 : 0;
}

static int parse_op(const char *s, struct ccase *c) {
  static const struct {
    const char *n;
    int op;
  } ops[] = {{"put", OP_PUT}, {"get", OP_GET}, {"exist", OP_EXIST}, {"batch_exist", OP_BATCH_EXIST}};
  for (size_t i = 0; i < MC_ARRAY_LEN(ops); i++)
    if (!strcmp(s, ops[i].n)) {
      c->op = ops[i].op;
      c->opname = ops[i].n;
      return 0;
    }
  return -1;
}

/* Cases from --cases ("op:size:batch,...") or from the single-case flags (putget = put then get). */
static int client_cases(struct ccase *cs, int max) {
  int n = 0;
  if (!*O.cases) {
    if (!strcmp(O.op, "putget")) {
      cs[n++] = (struct ccase){OP_PUT, "put", O.value_size, (int)O.batch};
      cs[n++] = (struct ccase){OP_GET, "get", O.value_size, (int)O.batch};
      return n;
    }
    cs[0] = (struct ccase){0, NULL, O.value_size, (int)O.batch};
    return parse_op(O.op, &cs[0]) ? -1 : 1;
  }
  char *dup = strdup(O.cases), *save = NULL;
  for (char *tok = strtok_r(dup, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
    char op[32] = "", size[32] = "";
    int batch = 0;
    if (sscanf(tok, "%31[^:]:%31[^:]:%d", op, size, &batch) != 3 || batch < 1 || parse_op(op, &cs[n]) ||
        mc_parse_size(size, &cs[n].size) || cs[n].size < 8) {
      fprintf(stderr, "bad case '%s' (want op:size:batch)\n", tok);
      free(dup);
      return -1;
    }
    cs[n++].batch = batch;
  }
  free(dup);
  return n;
}

static int run_client(void) {
  struct ccase cs[64];
  int n = client_cases(cs, 64);
  if (n <= 0) {
    fprintf(stderr, "no valid case (--op=%s)\n", O.op);
    return 1;
  }
  S = mooncake_store_create();
  double t0 = now_s();
  int rc = mooncake_store_setup(S, O.local_hostname, O.metadata_server, O.global_segment_size, O.local_buffer_size,
                                O.protocol, "", O.master_server_addr);
  if (rc) {
    fprintf(stderr, "client setup failed: %d %s\n", rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(S);
    return 1;
  }
  fprintf(stderr, "client ready in %.1f ms\n", (now_s() - t0) * 1e3);
  static const char *pref[1];
  CFG = (mooncake_replicate_config_t){.replica_num = 1};
  if (*O.preferred) {
    pref[0] = O.preferred;
    CFG.preferred_segments = pref;
    CFG.preferred_segments_count = 1;
  }
  CFGP = &CFG;
  int bad = O.warm_bytes ? warm(O.warm_bytes) : 0;
  for (int i = 0; i < n && !bad; i++) bad = run_case(&cs[i], i);
  mooncake_store_destroy(S);
  return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ rpc */

enum { R_EXIST, R_BATCH_EXIST, R_BATCH_LOOKUP, R_PUT, R_XPUT };

#define RPC_BATCH 1000
#define RPC_PUT_LEN 4096

struct rcase {
  int op;
  const char *opname;
  int threads; /* client threads, one connection each; or, with conns, connections of one thread */
  int conns;   /* "op:N:conns": one thread keeps N connections busy, one request outstanding on each (as
                * redis-benchmark -c N does), so the client's own threads do not compete for the CPUs */
};

static char RHOST[256];
static uint16_t RPORT;
static struct mc_uuid RCLIENT;
static struct mc_put_config RCFG; /* replica 1, placed on our metadata-only segment (never on a real holder) */
static char (*RNAMES)[KEYLEN];
static const char **RKEYS;
static size_t RN;
static const struct rcase *RC;
static int RCASE_NO;

struct rctx {
  int id;
  uint64_t calls, keys, errors;
  double secs;
  struct lat lat;
};

static struct mc_mrpc_client *rconnect(void) { return mc_mrpc_client_new(RHOST, RPORT, 3000, 10000); }

static void *rpc_thread(void *arg) {
  struct rctx *t = arg;
  struct mc_mrpc_client *c = rconnect();
  int32_t *st = calloc(RPC_BATCH, sizeof(int32_t));
  uint32_t *nrep = calloc(RPC_BATCH, sizeof(uint32_t));
  size_t pos = (RN / 17 * (size_t)t->id) % RN;
  pos -= pos % RPC_BATCH;
  uint64_t counter = 0;
  char key[KEYLEN];
  if (mt_exist(c, RKEYS[0]) != 1) t->errors++; /* connects before the clock starts */
  struct grant g = {0};
  uint64_t cur = 0;
  if (RC->op == R_XPUT && x_reserve(c, RCLIENT, RPC_PUT_LEN, 16 << 20, RCFG.preferred[0], &g)) t->errors++;
  pthread_barrier_wait(&BAR);
  double start = now_s(), now = start;
  while (now - start < O.duration) {
    double t0 = now;
    int ok = 0, want = 1;
    switch (RC->op) {
      case R_EXIST:
        ok = mt_exist(c, RKEYS[pos]) == 1;
        pos = pos + 1 == RN ? 0 : pos + 1;
        break;
      case R_BATCH_EXIST:
      case R_BATCH_LOOKUP: {
        want = RPC_BATCH;
        int rc = RC->op == R_BATCH_EXIST ? mt_batch_exist(c, RKEYS + pos, RPC_BATCH, st)
                                         : mt_batch_get(c, RKEYS + pos, RPC_BATCH, st, nrep, NULL);
        for (int j = 0; j < RPC_BATCH; j++) ok += !rc && (RC->op == R_BATCH_EXIST ? st[j] == 1 : st[j] == 0 && nrep[j] == 1);
        pos += RPC_BATCH;
        if (pos + RPC_BATCH > RN) pos = 0;
        break;
      }
      case R_PUT:
        snprintf(key, sizeof(key), "sbrpc/%d/%d/%d/%llu", MYPID, RCASE_NO, t->id, (unsigned long long)counter++);
        ok = mt_put_start(c, RCLIENT, key, RPC_PUT_LEN, &RCFG, NULL, NULL) == 0 && mt_put_end(c, RCLIENT, key) == 0;
        break;
      case R_XPUT: /* one COMMIT_PUT per put; a fresh extent (release + reserve, timed) when one is used up */
        if (cur + RPC_PUT_LEN > g.len) {
          x_release(c, RCLIENT, g.id);
          if (x_reserve(c, RCLIENT, RPC_PUT_LEN, 16 << 20, RCFG.preferred[0], &g)) break;
          cur = 0;
        }
        snprintf(key, sizeof(key), "sbrpc/%d/%d/%d/%llu", MYPID, RCASE_NO, t->id, (unsigned long long)counter++);
        ok = x_commit(c, RCLIENT, g.id, key, cur, RPC_PUT_LEN) == 0;
        cur += RPC_PUT_LEN;
        break;
    }
    now = now_s();
    lat_add(&t->lat, (now - t0) * 1e6);
    t->calls++;
    t->keys += (uint64_t)ok;
    t->errors += (uint64_t)(want - ok);
  }
  t->secs = now - start;
  if (RC->op == R_XPUT) x_release(c, RCLIENT, g.id);
  free(nrep);
  free(st);
  mc_mrpc_client_free(c);
  return NULL;
}

/* Keeps the metadata-only client alive (and remounts when the master asks). */
static struct mc_segment_rec RSEG;
static pthread_mutex_t PING_MU = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t PING_CV = PTHREAD_COND_INITIALIZER;
static int PING_STOP;

static void *ping_thread(void *arg) {
  struct mc_mrpc_client *c = rconnect();
  pthread_mutex_lock(&PING_MU);
  while (!PING_STOP) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&PING_CV, &PING_MU, &ts);
    if (PING_STOP) break;
    pthread_mutex_unlock(&PING_MU);
    int status = 0;
    if (mt_ping(c, RCLIENT, &status) == 0 && status == MC_PING_NEED_REMOUNT) mt_remount(c, RCLIENT, &RSEG, 1);
    pthread_mutex_lock(&PING_MU);
  }
  pthread_mutex_unlock(&PING_MU);
  mc_mrpc_client_free(c);
  return NULL;
}

/* One thread, RC->threads connections, one request outstanding on each (exist, batch_exist, put). */
struct aconn {
  int fd, phase; /* put: 0 = PutStart sent, 1 = PutEnd sent */
  uint64_t id, counter;
  double t0;
  size_t pos;
  char key[KEYLEN];
  uint8_t *rb;
  size_t rlen, rcap;
};

static int async_send(struct aconn *a, int k) {
  struct mc_wbuf w = {0};
  uint16_t op = 0;
  switch (RC->op) {
    case R_EXIST:
      mc_w_str(&w, RKEYS[a->pos]);
      op = MC_OP_EXIST_KEY;
      break;
    case R_BATCH_EXIST:
      mt_keys(&w, RKEYS + a->pos, RPC_BATCH);
      op = MC_OP_BATCH_EXIST_KEY;
      break;
    default: /* R_PUT */
      if (a->phase == 0)
        snprintf(a->key, sizeof(a->key), "sbrpc/%d/%d/a%d/%llu", MYPID, RCASE_NO, k, (unsigned long long)a->counter++);
      mc_put_uuid(&w, RCLIENT);
      mc_w_str(&w, a->key);
      if (a->phase == 0) {
        mc_w_u64(&w, RPC_PUT_LEN);
        mc_put_config(&w, &RCFG);
        op = MC_OP_PUT_START;
      } else {
        mc_w_u8(&w, MC_REPLICA_ALL);
        op = MC_OP_PUT_END;
      }
  }
  uint8_t h[MC_MRPC_HDR];
  mc_mrpc_put_hdr(h, op, ++a->id, (uint32_t)w.len, 0);
  struct iovec iov[2] = {{h, sizeof(h)}, {w.p, w.len}};
  int rc = mc_sock_writev_full(a->fd, iov, 2, NULL);
  mc_w_free(&w);
  return rc;
}

static void rpc_async(struct rctx *t) {
  int n = RC->threads;
  struct aconn *a = calloc((size_t)n, sizeof(*a));
  struct pollfd *pf = calloc((size_t)n, sizeof(*pf));
  int32_t *st = calloc(RPC_BATCH, sizeof(int32_t));
  for (int k = 0; k < n; k++) {
    a[k].fd = mc_sock_connect(RHOST, RPORT, 3000);
    a[k].pos = (RN / 17 * (size_t)k) % RN;
    a[k].pos -= a[k].pos % RPC_BATCH;
    pf[k] = (struct pollfd){.fd = a[k].fd, .events = POLLIN};
    if (a[k].fd < 0) t->errors++;
  }
  double start = now_s(), now = start;
  for (int k = 0; k < n && !t->errors; k++) {
    a[k].t0 = start;
    if (async_send(&a[k], k)) t->errors++;
  }
  while (!t->errors && now - start < O.duration) {
    int r = poll(pf, (nfds_t)n, 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      t->errors++; /* nothing for a second: the master is stuck */
      break;
    }
    for (int k = 0; k < n; k++) {
      if (!(pf[k].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      struct aconn *c = &a[k];
      if (c->rcap - c->rlen < 65536) c->rb = realloc(c->rb, c->rcap = c->rcap * 2 + 65536);
      ssize_t got = recv(c->fd, c->rb + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
      if (got <= 0) {
        if (got < 0 && errno == EAGAIN) continue;
        t->errors++;
        break;
      }
      c->rlen += (size_t)got;
      struct mc_mrpc_hdr h;
      if (c->rlen < MC_MRPC_HDR) continue;
      mc_mrpc_get_hdr(c->rb, &h);
      if (c->rlen < MC_MRPC_HDR + (size_t)h.len) continue; /* one request outstanding: one reply at a time */
      struct mc_wbuf body = {c->rb + MC_MRPC_HDR, h.len, h.len};
      int ok = 0, done = 1;
      if (h.id != c->id || h.status) {
        ok = 0;
      } else if (RC->op == R_EXIST) {
        ok = h.len == 1 && body.p[0] == 1;
      } else if (RC->op == R_BATCH_EXIST) {
        if (!mt_i32_list(&body, st, RPC_BATCH))
          for (int j = 0; j < RPC_BATCH; j++) ok += st[j] == 1;
      } else if (c->phase == 0) {
        done = 0; /* started: now PutEnd */
        c->phase = 1;
      } else {
        ok = 1;
        c->phase = 0;
      }
      size_t frame = MC_MRPC_HDR + (size_t)h.len;
      memmove(c->rb, c->rb + frame, c->rlen - frame);
      c->rlen -= frame;
      now = now_s();
      if (done) {
        int want = RC->op == R_BATCH_EXIST ? RPC_BATCH : 1;
        lat_add(&t->lat, (now - c->t0) * 1e6);
        t->calls++;
        t->keys += (uint64_t)ok;
        t->errors += (uint64_t)(want - ok);
        c->t0 = now;
        if (RC->op != R_PUT) {
          c->pos += RC->op == R_BATCH_EXIST ? RPC_BATCH : 1;
          if (c->pos + (RC->op == R_BATCH_EXIST ? RPC_BATCH : 1) > RN) c->pos = 0;
        }
      }
      if (now - start < O.duration && async_send(c, k)) t->errors++;
    }
    now = now_s();
  }
  t->secs = now - start;
  for (int k = 0; k < n; k++) {
    if (a[k].fd >= 0) close(a[k].fd);
    free(a[k].rb);
  }
  free(st);
  free(pf);
  free(a);
}

static void *rpc_async_thread(void *arg) {
  pthread_barrier_wait(&BAR);
  rpc_async(arg);
  return NULL;
}

static int rpc_cases(struct rcase *cs, int max) {
  static const struct {
    const char *n;
    int op;
  } ops[] = {{"exist", R_EXIST}, {"batch_exist", R_BATCH_EXIST}, {"batch_lookup", R_BATCH_LOOKUP}, {"put", R_PUT},
                {"xput", R_XPUT}};
  char *dup = strdup(*O.cases ? O.cases : O.op), *save = NULL;
  int n = 0;
  for (char *tok = strtok_r(dup, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
    char op[32] = "", mode[16] = "";
    int threads = (int)O.threads;
    if (sscanf(tok, "%31[^:]:%d:%15s", op, &threads, mode) < 1 || threads < 1 || threads > 256) goto bad;
    if (*mode && strcmp(mode, "conns")) goto bad;
    cs[n].conns = *mode != 0;
    cs[n].op = -1;
    for (size_t i = 0; i < MC_ARRAY_LEN(ops); i++)
      if (!strcmp(op, ops[i].n)) cs[n].op = ops[i].op, cs[n].opname = ops[i].n;
    if (cs[n].op < 0) goto bad;
    cs[n++].threads = threads;
    continue;
  bad:
    fprintf(stderr, "bad rpc case '%s' (want op[:threads] or op:connections:conns)\n", tok);
    free(dup);
    return -1;
  }
  free(dup);
  return n;
}

static int run_rpc(void) {
  struct rcase cs[64];
  int n = rpc_cases(cs, 64);
  if (n <= 0) return 1;
  if (mc_split_host_port(O.master_server_addr, RHOST, sizeof(RHOST), &RPORT, 50051)) {
    fprintf(stderr, "bad --master_server_addr\n");
    return 1;
  }
  struct mc_mrpc_client *c = rconnect();
  uint64_t tag = (uint64_t)getpid() << 16 ^ (mc_now_ns() & 0xffff);
  RCLIENT = mt_id(tag);
  char segname[64];
  snprintf(segname, sizeof(segname), "sbench-rpc-%d:1", (int)getpid());
  RSEG = mt_seg(tag, segname, 0x100000000000ull, 1ull << 40); /* metadata only: no memory behind it */
  int rc = mt_mount(c, RCLIENT, &RSEG);
  if (rc) {
    fprintf(stderr, "mount of the metadata-only segment failed: %d %s\n", rc, mooncake_store_err_name(rc));
    return 1;
  }
  pthread_t pt;
  pthread_create(&pt, NULL, ping_thread, NULL);
  /* existing keys for the lookup cases */
  RN = (size_t)(O.keys + RPC_BATCH - 1) / RPC_BATCH * RPC_BATCH;
  RNAMES = malloc(RN * KEYLEN);
  RKEYS = malloc(RN * sizeof(char *));
  uint64_t *lens = malloc(RPC_BATCH * sizeof(uint64_t));
  int32_t *st = malloc(RPC_BATCH * sizeof(int32_t));
  RCFG = mt_cfg(1);
  RCFG.n_preferred = 1;
  RCFG.preferred[0] = segname;
  for (size_t i = 0; i < RN; i++) {
    snprintf(RNAMES[i], KEYLEN, "sbrpc-e/%d/%07zu", (int)getpid(), i);
    RKEYS[i] = RNAMES[i];
  }
  for (int j = 0; j < RPC_BATCH; j++) lens[j] = RPC_PUT_LEN;
  int bad = 0;
  for (size_t off = 0; off < RN && !bad; off += RPC_BATCH) {
    if (mt_batch_put_start(c, RCLIENT, RKEYS + off, lens, RPC_BATCH, &RCFG, st, NULL) ||
        mt_batch_end(c, MC_OP_BATCH_PUT_END, RCLIENT, RKEYS + off, RPC_BATCH, st)) {
      fprintf(stderr, "populating %zu keys failed\n", RN);
      bad = 1;
    }
  }
  for (int i = 0; i < n && !bad; i++) {
    RC = &cs[i];
    RCASE_NO = i;
    int nt = cs[i].conns ? 1 : cs[i].threads;
    if (cs[i].conns && cs[i].op != R_EXIST && cs[i].op != R_BATCH_EXIST && cs[i].op != R_PUT) {
      fprintf(stderr, "op:N:conns is for exist, batch_exist and put\n");
      bad = 1;
      break;
    }
    struct rctx *ts = calloc((size_t)nt, sizeof(*ts));
    pthread_t *th = calloc((size_t)nt, sizeof(pthread_t));
    pthread_barrier_init(&BAR, NULL, (unsigned)nt);
    for (int k = 0; k < nt; k++) {
      ts[k].id = k;
      pthread_create(&th[k], NULL, cs[i].conns ? rpc_async_thread : rpc_thread, &ts[k]);
    }
    for (int k = 0; k < nt; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&BAR);
    double calls_s = 0, keys_s = 0, p50, p99;
    uint64_t calls = 0, keys = 0, errors = 0;
    struct lat *ls = calloc((size_t)nt, sizeof(*ls));
    for (int k = 0; k < nt; k++) {
      calls_s += (double)ts[k].calls / ts[k].secs;
      keys_s += (double)ts[k].keys / ts[k].secs;
      calls += ts[k].calls, keys += ts[k].keys, errors += ts[k].errors;
      ls[k] = ts[k].lat;
    }
    percentiles(ls, nt, &p50, &p99);
    printf("RPC op=%s threads=%d conns=%d calls=%llu keys=%llu secs=%.3f calls_s=%.0f keys_s=%.0f p50_us=%.1f p99_us=%.1f "
           "errors=%llu\n",
           cs[i].opname, nt, cs[i].threads, (unsigned long long)calls, (unsigned long long)keys, O.duration, calls_s, keys_s, p50, p99,
           (unsigned long long)errors);
    fflush(stdout);
    if (errors) bad = 1;
    if (cs[i].op == R_PUT) {
      char re[64];
      int64_t removed = 0;
      snprintf(re, sizeof(re), "^sbrpc/%d/%d/", (int)getpid(), i);
      mt_remove_many(c, re, 1, &removed);
    }
    for (int k = 0; k < nt; k++) free(ts[k].lat.v);
    free(ls);
    free(th);
    free(ts);
  }
  pthread_mutex_lock(&PING_MU);
  PING_STOP = 1;
  pthread_cond_signal(&PING_CV);
  pthread_mutex_unlock(&PING_MU);
  pthread_join(pt, NULL);
  char re[64];
  int64_t removed = 0;
  snprintf(re, sizeof(re), "^sbrpc-e/%d/", (int)getpid());
  mt_remove_many(c, re, 1, &removed);
  mt_unmount(c, RSEG.id, RCLIENT); /* drops whatever else is on the segment */
  mc_mrpc_client_free(c);
  free(st);
  free(lens);
  free(RKEYS);
  free(RNAMES);
  return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  mc_cfg_defaults(opt_table, &O);
  int rc = mc_cfg_parse_argv(opt_table, &O, argc, argv, "--mode=holder|client|rpc [--flag=value ...]", NULL);
  if (rc) return rc > 0 ? 0 : 1;
  if (!strcmp(O.mode, "holder")) rc = run_holder();
  else if (!strcmp(O.mode, "client")) rc = run_client();
  else if (!strcmp(O.mode, "rpc")) rc = run_rpc();
  else {
    fprintf(stderr, "unknown --mode=%s\n", O.mode);
    rc = 1;
  }
  mc_cfg_free(opt_table, &O);
  return rc;
}
