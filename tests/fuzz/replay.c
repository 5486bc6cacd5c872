/* Replays a fuzz corpus through a fuzz target in the normal test run (no libFuzzer needed), plus a
 * fixed number of deterministic mutations of each file: truncations, bit flips and byte splices. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t read_file(const char *path, uint8_t **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc(n > 0 ? (size_t)n : 1);
  size_t r = fread(*out, 1, (size_t)(n > 0 ? n : 0), f);
  fclose(f);
  return r;
}

static void mutate_and_run(const uint8_t *d, size_t n, unsigned *seed) {
  uint8_t *m = malloc(n + 16);
  for (int k = 0; k < 200; k++) {
    memcpy(m, d, n);
    size_t len = n;
    switch (rand_r(seed) % 4) {
      case 0: len = n ? (size_t)rand_r(seed) % n : 0; break;
      case 1: if (n) m[rand_r(seed) % n] ^= (uint8_t)(1u << (rand_r(seed) % 8)); break;
      case 2: if (n) m[rand_r(seed) % n] = (uint8_t)"{}[]\",:0-9e\\"[rand_r(seed) % 13]; break;
      case 3: if (n > 2) memmove(m + rand_r(seed) % (n / 2), m + n / 2, n - n / 2); break;
    }
    LLVMFuzzerTestOneInput(m, len);
  }
  free(m);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  DIR *dir = opendir(argv[1]);
  if (!dir) {
    perror(argv[1]);
    return 2;
  }
  unsigned seed = 12345;
  int files = 0;
  struct dirent *de;
  while ((de = readdir(dir))) {
    if (de->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
    uint8_t *d = NULL;
    size_t n = read_file(path, &d);
    LLVMFuzzerTestOneInput(d, n);
    mutate_and_run(d, n, &seed);
    free(d);
    files++;
  }
  closedir(dir);
  printf("replayed %d corpus files with 200 mutations each\n", files);
  return files > 0 ? 0 : 1;
}
