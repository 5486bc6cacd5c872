/* The local-disk object store's throughput (src/disk/, docs/disk-tier.md): T threads put N objects of S
 * bytes each into a fresh store in DIR (every put durable: O_DIRECT writes, fdatasync, rename, directory
 * sync), then get them all back (O_DIRECT reads, CRC-32C checked).
 *   disk_bench DIR SIZE N [T]
 * prints
 *   DISKBENCH op=put|get size=<S> objects=<N> threads=<T> MBps=<m> per_op_us=<t>
 * bench/run_disk_bench.sh runs it beside fio on the same directory. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/util.h"
#include "disk/disk.h"

struct arg {
  struct mc_disk *d;
  uint64_t size;
  int first, n, get, bad;
};

static void *run(void *p) {
  struct arg *a = p;
  char *b = mc_malloc(a->size + 1);
  memset(b, 0x5a, a->size);
  for (int i = a->first; i < a->first + a->n; i++) {
    char key[32];
    snprintf(key, sizeof(key), "bench-%d", i);
    if (a->get) a->bad += mc_disk_get(a->d, key, strlen(key), b, a->size) != (int64_t)a->size;
    else a->bad += mc_disk_put(a->d, key, strlen(key), b, a->size) != 0;
  }
  mc_free(b);
  return NULL;
}

int main(int argc, char **argv) {
  uint64_t size;
  if (argc < 4 || mc_parse_size(argv[2], &size)) {
    fprintf(stderr, "usage: disk_bench DIR SIZE N [THREADS]\n");
    return 2;
  }
  int n = atoi(argv[3]), t = argc > 4 ? atoi(argv[4]) : 4;
  if (n <= 0 || t <= 0 || t > 64) return 2;
  struct mc_disk *d;
  int r = mc_disk_open(argv[1], 0, &(struct mc_disk_opts){.lanes = (unsigned)t}, &d, NULL);
  if (r) {
    fprintf(stderr, "disk_bench: open %s: %s\n", argv[1], strerror(-r));
    return 1;
  }
  int bad = 0;
  for (int get = 0; get < 2; get++) {
    pthread_t th[64];
    struct arg a[64];
    uint64_t t0 = mc_now_ns();
    for (int i = 0; i < t; i++) {
      a[i] = (struct arg){d, size, n / t * i, i == t - 1 ? n - n / t * i : n / t, get, 0};
      pthread_create(&th[i], NULL, run, &a[i]);
    }
    for (int i = 0; i < t; i++) {
      pthread_join(th[i], NULL);
      bad += a[i].bad;
    }
    double s = (double)(mc_now_ns() - t0) / 1e9;
    printf("DISKBENCH op=%s size=%" PRIu64 " objects=%d threads=%d MBps=%.1f per_op_us=%.1f\n", get ? "get" : "put",
           size, n, t, (double)size * n / s / 1e6, s * 1e6 * t / n);
  }
  mc_disk_close(d);
  if (bad) fprintf(stderr, "disk_bench: %d operations failed\n", bad);
  return bad != 0;
}
