/* Replays fuzz inputs through a fuzz target in the normal test run (no libFuzzer needed): every file
 * of each directory given (the committed seed corpus, then the crash-regression corpus), each followed
 * by a fixed number of deterministic mutations (truncations, bit flips, token bytes, splices).
 * Usage: fuzz_<target>_replay [-m MUTATIONS] DIR... (files named README* and dot files are skipped;
 * a directory with nothing else in it is fine, but at least one input must be replayed overall). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static size_t read_file(const char *path, uint8_t **out) {
  FILE *f = fopen(path, "rb");
  *out = NULL;
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc(n > 0 ? (size_t)n : 1);
  size_t r = fread(*out, 1, (size_t)(n > 0 ? n : 0), f);
  fclose(f);
  return r;
}

static void mutate_and_run(const uint8_t *d, size_t n, unsigned *seed, int count) {
  uint8_t *m = malloc(n + 16);
  for (int k = 0; k < count; k++) {
    if (n) memcpy(m, d, n);
    size_t len = n;
    switch (rand_r(seed) % 4) {
      case 0: len = n ? (size_t)rand_r(seed) % n : 0; break;
      case 1: if (n) m[rand_r(seed) % n] ^= (uint8_t)(1u << (rand_r(seed) % 8)); break;
      case 2: if (n) m[rand_r(seed) % n] = (uint8_t)"{}[]\",:0-9e\\\xff\x80"[rand_r(seed) % 15]; break;
      case 3: if (n > 2) memmove(m + rand_r(seed) % (n / 2), m + n / 2, n - n / 2); break;
    }
    LLVMFuzzerTestOneInput(m, len);
  }
  free(m);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Replays one directory in name order; returns the number of files replayed, -1 if unreadable. */
static int replay_dir(const char *dir, unsigned *seed, int mutations) {
  DIR *dp = opendir(dir);
  if (!dp) {
    perror(dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(dp))) {
    if (de->d_name[0] == '.' || !strncmp(de->d_name, "README", 6)) continue;
    if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
    names[n++] = strdup(de->d_name);
  }
  closedir(dp);
  if (n) qsort(names, n, sizeof(*names), cmp_names); /* an empty regression corpus: names is NULL */
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    uint8_t *d;
    size_t len = read_file(path, &d);
    LLVMFuzzerTestOneInput(d, len);
    mutate_and_run(d, len, seed, mutations);
    free(d);
    free(names[i]);
  }
  free(names);
  return (int)n;
}

int main(int argc, char **argv) {
  int mutations = 200, i = 1, files = 0;
  if (argc > 2 && !strcmp(argv[1], "-m")) {
    mutations = atoi(argv[2]);
    i = 3;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: %s [-m MUTATIONS] DIR...\n", argv[0]);
    return 2;
  }
  unsigned seed = 12345;
  for (; i < argc; i++) {
    int k = replay_dir(argv[i], &seed, mutations);
    if (k < 0) return 2;
    printf("%s: replayed %d inputs with %d mutations each\n", argv[i], k, mutations);
    files += k;
  }
  return files > 0 ? 0 : 1;
}
