/* What the benches read of themselves and of the master process: a monotonic clock and a process's
 * resident memory. Header only (each bench is one .c file). */
#ifndef MC_BENCH_PROCSTAT_H
#define MC_BENCH_PROCSTAT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* VmRSS of pid in KiB, -1 when it cannot be read. */
static inline long rss_kib(int pid) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  while (f && fgets(line, sizeof(line), f))
    if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
  if (f) fclose(f);
  return v;
}

#endif
