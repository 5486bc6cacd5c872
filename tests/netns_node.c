/* One storage node of test_netns_cluster, run inside its own network namespace: a store client set up
 * with the given name, then commands on stdin, one answer line each on stdout.
 *
 *   netns_node <local_hostname> <metadata_server> <master_addr> <global_segment_size> <buffer_size>
 *
 * Prints "READY <segment name> <setup ms>" (or "FAILED <rc> <setup ms>" and exits 2), then obeys
 *   PUT <key> <size> <seed> <replicas> [<preferred segment>...]  put_from a registered buffer -> "<rc> <us>"
 *   GET <key> <size> <seed>      get_into a registered buffer, bytes checked -> "<bytes> <us>" (-1 = wrong bytes,
 *                                size mismatch included), or "<negative rc> <us>"
 *   EXIST <key>                  -> "<is_exist> <us>"
 *   QUIT                         destroy the client and exit 0
 * Unknown commands answer "-99998 0". The value of a key is fill(size, seed) below. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake/store.h"

static uint8_t pat(uint64_t i, unsigned seed) { return (uint8_t)((i * 131u + seed * 7u + (i >> 11)) ^ seed); }

static void fill(uint8_t *b, uint64_t n, unsigned seed) {
  for (uint64_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

static int verify(const uint8_t *b, uint64_t n, unsigned seed) {
  for (uint64_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return 0;
  return 1;
}

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s <local_hostname> <metadata_server> <master_addr> <global_segment_size> <buffer_size>\n",
            argv[0]);
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  uint64_t gss = strtoull(argv[4], NULL, 10), bsz = strtoull(argv[5], NULL, 10);
  long long t0 = now_us();
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, argv[1], argv[2], gss, 4u << 20, "tcp", "", argv[3]);
  long long setup_ms = (now_us() - t0) / 1000;
  if (rc) {
    printf("FAILED %d %lld\n", rc, setup_ms);
    fflush(stdout);
    mooncake_store_destroy(s);
    return 2;
  }
  uint8_t *buf = malloc(bsz);
  if (!buf || mooncake_store_register_buffer(s, buf, bsz)) {
    printf("FAILED -1 %lld\n", setup_ms);
    return 3;
  }
  char name[256];
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("READY %s %lld\n", name, setup_ms);
  fflush(stdout);

  char line[4096], key[256];
  while (fgets(line, sizeof(line), stdin)) {
    unsigned long long size = 0;
    unsigned seed = 0, reps = 0;
    int used = 0;
    long long t = now_us(), res, us = -1;
    if (sscanf(line, "PUT %255s %llu %u %u %n", key, &size, &seed, &reps, &used) == 4 && size <= bsz) {
      const char *pref[8];
      size_t np = 0;
      char *save = NULL;
      for (char *p = strtok_r(line + used, " \n", &save); p && np < 8; p = strtok_r(NULL, " \n", &save))
        pref[np++] = p;
      mooncake_replicate_config_t cfg = {reps, 0, 0, np ? pref : NULL, np};
      fill(buf, size, seed);
      t = now_us();
      res = mooncake_store_put_from(s, key, buf, size, &cfg);
    } else if (sscanf(line, "GET %255s %llu %u", key, &size, &seed) == 3 && size <= bsz) {
      memset(buf, 0, size);
      t = now_us();
      int64_t n = mooncake_store_get_into(s, key, buf, bsz);
      us = now_us() - t; /* the read alone, not the check */
      res = n >= 0 && (n != (int64_t)size || !verify(buf, size, seed)) ? -1 : n;
    } else if (sscanf(line, "EXIST %255s", key) == 1) {
      res = mooncake_store_is_exist(s, key);
    } else if (!strncmp(line, "QUIT", 4)) {
      break;
    } else {
      printf("-99998 0\n");
      fflush(stdout);
      continue;
    }
    printf("%lld %lld\n", res, us >= 0 ? us : now_us() - t);
    fflush(stdout);
  }
  mooncake_store_destroy(s);
  free(buf);
  return 0;
}
