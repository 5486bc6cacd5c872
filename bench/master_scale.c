/* master_scale: the store at a million keys (bench/run_master_scale.sh drives it).
 *
 *   master_scale <master addr> <metadata server> <master pid> <keys> <value bytes> <segment MiB> <lease ms>
 *
 * One store client with its own segment writes <keys> objects of <value bytes> in batches of 1000
 * (batch_put_from from registered memory, so the bytes stay in this process and the master's work is
 * what is measured), then looks them all up (batch_is_exist), reads them all (batch_get_into), removes a
 * tenth by regex and the rest with remove_all. The master's resident memory is read from
 * /proc/<master pid>/status before and after the writes. Then, once the read leases of the lookups have
 * ended (<lease ms>, the master's default_kv_lease_ttl: until then the forced removals keep the space
 * of leased objects), twice as many fresh keys are written into a pool they overfill: eviction runs
 * meanwhile, and puts the pool cannot take at once get -200 (docs/master.md, "Design decisions": a full pool is
 * answered at once, eviction is asynchronous). One line per phase:
 *   SCALE phase=<name> keys=<n> secs=<s> rate=<keys/s> ok=<n> failed=<n> [rss_kib=<master RSS>]
 * plus "SCALE phase=slow_batches count=<batches slower than 100 ms> worst_ms=<ms>" for the overfill. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake/store.h"
#include "procstat.h"

#define BATCH 1000

static char *keys[BATCH];
static void *bufs[BATCH];
static size_t sizes[BATCH];

static void name_batch(long first) {
  for (int i = 0; i < BATCH; i++) snprintf(keys[i], 32, "k%09ld", first + i);
}

static void report(const char *phase, long n, double secs, long ok, long failed, long rss) {
  printf("SCALE phase=%s keys=%ld secs=%.3f rate=%.0f ok=%ld failed=%ld", phase, n, secs, n / secs, ok, failed);
  if (rss >= 0) printf(" rss_kib=%ld", rss);
  printf("\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr,
            "usage: %s <master addr> <metadata server> <master pid> <keys> <value bytes> <segment MiB> <lease ms>\n",
            argv[0]);
    return 1;
  }
  const char *master = argv[1], *meta = argv[2];
  int mpid = atoi(argv[3]);
  long n = atol(argv[4]) / BATCH * BATCH;
  size_t v = (size_t)atol(argv[5]);
  uint64_t seg = (uint64_t)atol(argv[6]) << 20;
  long lease_ms = atol(argv[7]);
  mooncake_store_t s = mooncake_store_create();
  if (!s || mooncake_store_setup(s, "127.0.0.1", meta, seg, 16u << 20, "tcp", "", master)) {
    fprintf(stderr, "setup failed\n");
    return 2;
  }
  char *data = malloc(v * BATCH);
  int *res = malloc(sizeof(int) * BATCH);
  int64_t *gres = malloc(sizeof(int64_t) * BATCH);
  if (!data || !res || !gres || mooncake_store_register_buffer(s, data, v * BATCH)) return 3;
  memset(data, 7, v * BATCH);
  for (int i = 0; i < BATCH; i++) keys[i] = malloc(32), bufs[i] = data + (size_t)i * v, sizes[i] = v;
  mooncake_replicate_config_t cfg = {1, 0, 0, NULL, 0};
  long rss0 = rss_kib(mpid);
  printf("SCALE phase=start rss_kib=%ld\n", rss0);

  long ok = 0, failed = 0;
  double t = now_s();
  for (long b = 0; b < n; b += BATCH) {
    name_batch(b);
    mooncake_store_batch_put_from(s, (const char **)keys, bufs, sizes, BATCH, &cfg, res);
    for (int i = 0; i < BATCH; i++) res[i] ? failed++ : ok++;
  }
  report("put", n, now_s() - t, ok, failed, rss_kib(mpid));

  ok = failed = 0;
  t = now_s();
  for (long b = 0; b < n; b += BATCH) {
    name_batch(b);
    mooncake_store_batch_is_exist(s, (const char **)keys, BATCH, res);
    for (int i = 0; i < BATCH; i++) res[i] == 1 ? ok++ : failed++;
  }
  report("batch_exist", n, now_s() - t, ok, failed, -1);

  ok = failed = 0;
  t = now_s();
  for (long b = 0; b < n; b += BATCH) {
    name_batch(b);
    mooncake_store_batch_get_into(s, (const char **)keys, bufs, sizes, BATCH, gres);
    for (int i = 0; i < BATCH; i++) gres[i] == (int64_t)v ? ok++ : failed++;
  }
  report("batch_get", n, now_s() - t, ok, failed, -1);

  /* a tenth of the keys: k0 ... k(n/10 - 1) share the prefix of n/10 when n is a power of ten */
  char pattern[64];
  long tenth = n / 10, digits = 0;
  for (long x = tenth; x > 1; x /= 10) digits++;
  snprintf(pattern, sizeof(pattern), "^k%0*d", (int)(9 - digits), 0);
  t = now_s();
  int64_t removed = mooncake_store_remove_by_regex(s, pattern, 1);
  report("remove_by_regex", removed, now_s() - t, removed, 0, -1);
  t = now_s();
  removed = mooncake_store_remove_all(s, 1);
  report("remove_all", removed, now_s() - t, removed, 0, rss_kib(mpid));

  /* overfill: 2 x n fresh keys, more bytes than the pool holds */
  struct timespec ts = {(lease_ms + 500) / 1000, ((lease_ms + 500) % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  ok = failed = 0;
  long slow = 0;
  double worst = 0;
  t = now_s();
  for (long b = 0; b < 2 * n; b += BATCH) {
    name_batch(n + b);
    double t1 = now_s();
    mooncake_store_batch_put_from(s, (const char **)keys, bufs, sizes, BATCH, &cfg, res);
    double d = now_s() - t1;
    slow += d > 0.1;
    if (d > worst) worst = d;
    for (int i = 0; i < BATCH; i++) res[i] ? failed++ : ok++;
  }
  report("overfill_put", 2 * n, now_s() - t, ok, failed, rss_kib(mpid));
  printf("SCALE phase=slow_batches count=%ld worst_ms=%.1f\n", slow, worst * 1000);
  mooncake_store_remove_all(s, 1);
  mooncake_store_destroy(s);
  return 0;
}
