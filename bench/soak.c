/* soak: a long mixed workload against a running store (bench/run_soak.sh starts the cluster around it).
 *
 *   soak --master_server_addr=H:P --metadata_server=URL [--threads=16] [--secs=600] [--keys=512]
 *        [--min_size=1024] [--max_size=4194304] [--seed=N] [--report_s=60]
 *
 * Each thread is a store client of its own (no segment: the data lives on the holders) doing puts (upserts),
 * gets, batch gets, exists and removes over one key space shared by all threads, value sizes log-uniform
 * between min_size and max_size. Every value carries a header (magic, key, writer, version, size) and a body
 * that (writer, version) defines; every byte of every successful read is checked against it. A read may see
 * any complete value some thread wrote under that key, never another key's, a torn one or zeros.
 *
 * Prints a progress line every report_s and at the end one summary (the lines run_soak.sh parses):
 *   SOAK ops put=N get=N batch_get=N exist=N remove=N total=N ops_per_s=X
 *   SOAK ok  put=N get=N ...                 (calls that succeeded; a get of an absent key is not ok)
 *   SOAK errors <code>(<name>)=N ...          (every negative result, per code)
 *   SOAK wrong_bytes=N reads_checked=N bytes_read=N bytes_written=N max_ms=N slow=N
 * Exit status 0 when no read returned wrong bytes and no call took longer than its bound (SLOW_MS), else 1. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store.h"

#define MAGIC 0x4b414f53534f414bull
#define HDR 32
#define SLOW_MS 30000L /* the longest any call may take: the RPC deadline plus a transfer's no-progress timeout */
#define MAX_CODES 32
#define BATCH 4

enum { OP_PUT, OP_GET, OP_BGET, OP_EXIST, OP_REMOVE, OP_N };
static const char *const op_name[OP_N] = {"put", "get", "batch_get", "exist", "remove"};

struct hdr {
  uint64_t magic;
  uint32_t key, writer;
  uint64_t version, size;
};

struct stats {
  long ops[OP_N], ok[OP_N];
  int code[MAX_CODES];
  long code_n[MAX_CODES];
  long wrong, checked, slow, max_ms;
  uint64_t bytes_read, bytes_written;
};

static struct {
  const char *master, *metadata;
  int threads, keys;
  double secs, report_s;
  uint64_t min_size, max_size, seed;
} cfg = {NULL, NULL, 16, 512, 600, 60, 1024, 4u << 20, 0};

static atomic_int stop_flag;
static pthread_mutex_t agg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stats total;

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* The body byte at offset i of the value (writer, version): 8 bytes of a per-value stream at a time. */
static void fill_body(uint8_t *p, uint64_t n, uint32_t writer, uint64_t version) {
  uint64_t x = (uint64_t)writer << 40 ^ version * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995u;
  for (uint64_t i = 0; i < n; i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    memcpy(p + i, &z, n - i < 8 ? n - i : 8);
  }
}

static void make_value(uint8_t *p, uint32_t key, uint32_t writer, uint64_t version, uint64_t size) {
  struct hdr h = {MAGIC, key, writer, version, size};
  memcpy(p, &h, HDR);
  fill_body(p + HDR, size - HDR, writer, version);
}

/* 0 when buf[0..n) is a value written under key; else prints what differs and returns -1. scratch holds
 * at least n bytes. */
static int check_value(const uint8_t *buf, int64_t n, uint32_t key, uint8_t *scratch) {
  struct hdr h;
  if (n < HDR) {
    fprintf(stderr, "WRONG key %u: %lld bytes, shorter than a header\n", key, (long long)n);
    return -1;
  }
  memcpy(&h, buf, HDR);
  if (h.magic != MAGIC || h.key != key || h.size != (uint64_t)n) {
    fprintf(stderr, "WRONG key %u: header magic %llx key %u writer %u version %llu size %llu, read %lld bytes\n",
            key, (unsigned long long)h.magic, h.key, h.writer, (unsigned long long)h.version,
            (unsigned long long)h.size, (long long)n);
    return -1;
  }
  fill_body(scratch, (uint64_t)n - HDR, h.writer, h.version);
  if (memcmp(buf + HDR, scratch, (size_t)n - HDR)) {
    int64_t i = 0;
    while (buf[HDR + i] == scratch[i]) i++;
    fprintf(stderr, "WRONG key %u: writer %u version %llu size %lld: body differs at byte %lld\n", key, h.writer,
            (unsigned long long)h.version, (long long)n, (long long)(HDR + i));
    return -1;
  }
  return 0;
}

static void count_codes(struct stats *st, int code, long n) {
  for (int i = 0; i < MAX_CODES; i++) {
    if (st->code_n[i] && st->code[i] == code) {
      st->code_n[i] += n;
      return;
    }
    if (!st->code_n[i]) {
      st->code[i] = code;
      st->code_n[i] = n;
      return;
    }
  }
}

static void count_code(struct stats *st, int code) { count_codes(st, code, 1); }

/* Log-uniform in [min_size, max_size], at least a header plus one byte. */
static uint64_t pick_size(uint64_t *r) {
  double lo = (double)cfg.min_size, hi = (double)cfg.max_size;
  double u = (double)(rnd(r) >> 11) / 9007199254740992.0;
  uint64_t n = (uint64_t)(lo * pow(hi / lo, u));
  if (n < HDR + 1) n = HDR + 1;
  return n > cfg.max_size ? cfg.max_size : n;
}

static void merge(struct stats *into, const struct stats *from) {
  for (int i = 0; i < OP_N; i++) into->ops[i] += from->ops[i], into->ok[i] += from->ok[i];
  for (int i = 0; i < MAX_CODES && from->code_n[i]; i++)
    count_codes(into, from->code[i], from->code_n[i]);
  into->wrong += from->wrong;
  into->checked += from->checked;
  into->slow += from->slow;
  into->bytes_read += from->bytes_read;
  into->bytes_written += from->bytes_written;
  if (from->max_ms > into->max_ms) into->max_ms = from->max_ms;
}

/* Adds st's counts to the total and clears them (so progress lines and the summary see them). */
static void flush_stats(struct stats *st) {
  pthread_mutex_lock(&agg_mu);
  merge(&total, st);
  pthread_mutex_unlock(&agg_mu);
  memset(st, 0, sizeof(*st));
}

static void *worker(void *arg) {
  uint32_t me = (uint32_t)(uintptr_t)arg;
  uint64_t r = cfg.seed * 1000003u + me * 7919u + 1, version = 0;
  size_t slot = cfg.max_size;
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, "127.0.0.1", cfg.metadata, 0, 16u << 20, "tcp", "", cfg.master);
  if (rc) {
    fprintf(stderr, "thread %u: setup failed: %d (%s)\n", me, rc, mooncake_store_err_name(rc));
    exit(3);
  }
  /* slot 0: the value to write; slots 1..BATCH: read targets; then a scratch slot for the check */
  uint8_t *mem = aligned_alloc(4096, (BATCH + 2) * slot), *scratch = mem + (BATCH + 1) * slot;
  if (!mem || mooncake_store_register_buffer(s, mem, (BATCH + 1) * slot)) {
    fprintf(stderr, "thread %u: cannot register its buffers\n", me);
    exit(3);
  }
  struct stats st;
  memset(&st, 0, sizeof(st));
  long last_flush = now_ms();
  char keys[BATCH][32];
  const char *kp[BATCH];
  for (int i = 0; i < BATCH; i++) kp[i] = keys[i];
  while (!atomic_load(&stop_flag)) {
    unsigned roll = (unsigned)(rnd(&r) % 100);
    int op = roll < 30 ? OP_PUT : roll < 65 ? OP_GET : roll < 75 ? OP_BGET : roll < 87 ? OP_EXIST : OP_REMOVE;
    uint32_t k[BATCH];
    for (int i = 0; i < BATCH; i++) {
      k[i] = (uint32_t)(rnd(&r) % (uint64_t)cfg.keys);
      snprintf(keys[i], sizeof(keys[i]), "soak/%05u", k[i]);
    }
    long t0 = now_ms();
    int64_t res = 0, got[BATCH];
    int ok = 0;
    switch (op) {
    case OP_PUT: {
      uint64_t n = pick_size(&r);
      make_value(mem, k[0], me, ++version, n);
      mooncake_replicate_config_t rc1 = {1 + rnd(&r) % 2, 0, 0, NULL, 0};
      res = mc_store_upsert_from(s, keys[0], mem, n, &rc1);
      if (!res) st.bytes_written += n;
      ok = res == 0;
      break;
    }
    case OP_GET:
      memset(mem + slot, 0, HDR);
      res = mooncake_store_get_into(s, keys[0], mem + slot, slot);
      if (res > 0) {
        st.checked++;
        st.bytes_read += (uint64_t)res;
        if (check_value(mem + slot, res, k[0], scratch)) st.wrong++;
      }
      ok = res > 0;
      break;
    case OP_BGET: {
      void *bufs[BATCH];
      size_t sz[BATCH];
      for (int i = 0; i < BATCH; i++) bufs[i] = mem + (1 + i) * slot, sz[i] = slot, memset(bufs[i], 0, HDR);
      res = mooncake_store_batch_get_into(s, kp, bufs, sz, BATCH, got);
      for (int i = 0; !res && i < BATCH; i++) {
        if (got[i] > 0) {
          st.checked++;
          st.bytes_read += (uint64_t)got[i];
          if (check_value(bufs[i], got[i], k[i], scratch)) st.wrong++;
          ok = 1;
        } else {
          count_code(&st, (int)got[i]);
        }
      }
      break;
    }
    case OP_EXIST: /* 1 or 0; negative on an error */
      ok = (res = mooncake_store_is_exist(s, keys[0])) >= 0;
      break;
    case OP_REMOVE: /* without force: a leased object stays (OBJECT_HAS_LEASE, counted) */
      ok = (res = mooncake_store_remove(s, keys[0], 0)) == 0;
      break;
    }
    long dt = now_ms() - t0;
    if (dt > st.max_ms) st.max_ms = dt;
    if (dt > SLOW_MS) {
      st.slow++;
      fprintf(stderr, "SLOW %s took %ld ms (rc %lld)\n", op_name[op], dt, (long long)res);
    }
    st.ops[op]++;
    st.ok[op] += ok;
    if (res < 0) count_code(&st, (int)res);
    if (now_ms() - last_flush >= 1000) {
      flush_stats(&st);
      last_flush = now_ms();
    }
  }
  flush_stats(&st);
  mooncake_store_unregister_buffer(s, mem);
  mooncake_store_destroy(s);
  free(mem);
  return NULL;
}

static void print_ops(const char *label, const long *v) {
  long sum = 0;
  printf("SOAK %s", label);
  for (int i = 0; i < OP_N; i++) printf(" %s=%ld", op_name[i], v[i]), sum += v[i];
  printf(" total=%ld", sum);
}

static void report(const struct stats *t, double elapsed_s, int final) {
  long sum = 0;
  for (int i = 0; i < OP_N; i++) sum += t->ops[i];
  if (!final) {
    printf("SOAK progress t=%.0fs ops=%ld ops_per_s=%.0f wrong_bytes=%ld reads_checked=%ld max_ms=%ld\n", elapsed_s,
           sum, sum / (elapsed_s > 0 ? elapsed_s : 1), t->wrong, t->checked, t->max_ms);
    fflush(stdout);
    return;
  }
  print_ops("ops", t->ops);
  printf(" ops_per_s=%.0f\n", sum / (elapsed_s > 0 ? elapsed_s : 1));
  print_ops("ok ", t->ok);
  printf("\nSOAK errors");
  for (int i = 0; i < MAX_CODES && t->code_n[i]; i++)
    printf(" %d(%s)=%ld", t->code[i], mooncake_store_err_name(t->code[i]), t->code_n[i]);
  printf("\nSOAK wrong_bytes=%ld reads_checked=%ld bytes_read=%llu bytes_written=%llu max_ms=%ld slow=%ld\n", t->wrong,
         t->checked, (unsigned long long)t->bytes_read, (unsigned long long)t->bytes_written, t->max_ms, t->slow);
  fflush(stdout);
}

static int arg(const char *a, const char *name, const char **val) {
  size_t n = strlen(name);
  if (strncmp(a, name, n) || a[n] != '=') return 0;
  *val = a + n + 1;
  return 1;
}

int main(int argc, char **argv) {
  cfg.seed = (uint64_t)time(NULL);
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (arg(argv[i], "--master_server_addr", &v)) cfg.master = v;
    else if (arg(argv[i], "--metadata_server", &v)) cfg.metadata = v;
    else if (arg(argv[i], "--threads", &v)) cfg.threads = atoi(v);
    else if (arg(argv[i], "--secs", &v)) cfg.secs = atof(v);
    else if (arg(argv[i], "--keys", &v)) cfg.keys = atoi(v);
    else if (arg(argv[i], "--min_size", &v)) cfg.min_size = strtoull(v, NULL, 10);
    else if (arg(argv[i], "--max_size", &v)) cfg.max_size = strtoull(v, NULL, 10);
    else if (arg(argv[i], "--seed", &v)) cfg.seed = strtoull(v, NULL, 10);
    else if (arg(argv[i], "--report_s", &v)) cfg.report_s = atof(v);
    else {
      fprintf(stderr, "unknown argument '%s' (see the top of bench/soak.c)\n", argv[i]);
      return 2;
    }
  }
  if (!cfg.master || !cfg.metadata || cfg.threads < 1 || cfg.keys < 1 || cfg.min_size < HDR + 1 ||
      cfg.max_size < cfg.min_size) {
    fprintf(stderr, "usage: soak --master_server_addr=H:P --metadata_server=URL [--threads=N] [--secs=S] "
                    "[--keys=K] [--min_size=B] [--max_size=B] [--seed=N] [--report_s=S]\n");
    return 2;
  }
  printf("SOAK start threads=%d secs=%.0f keys=%d sizes=%llu..%llu seed=%llu\n", cfg.threads, cfg.secs, cfg.keys,
         (unsigned long long)cfg.min_size, (unsigned long long)cfg.max_size, (unsigned long long)cfg.seed);
  fflush(stdout);
  pthread_t *th = calloc((size_t)cfg.threads, sizeof(pthread_t));
  long t0 = now_ms();
  for (int i = 0; i < cfg.threads; i++) pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
  long next_report = t0 + (long)(cfg.report_s * 1000);
  while (now_ms() - t0 < (long)(cfg.secs * 1000)) {
    usleep(100000);
    if (now_ms() >= next_report) {
      pthread_mutex_lock(&agg_mu);
      report(&total, (now_ms() - t0) / 1000.0, 0);
      pthread_mutex_unlock(&agg_mu);
      next_report += (long)(cfg.report_s * 1000);
    }
  }
  atomic_store(&stop_flag, 1);
  for (int i = 0; i < cfg.threads; i++) pthread_join(th[i], NULL);
  report(&total, (now_ms() - t0) / 1000.0, 1);
  free(th);
  return total.wrong || total.slow ? 1 : 0;
}
