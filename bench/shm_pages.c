/* shm_pages: what a page of shared memory costs here, with 4 KiB pages and with 2 MiB pages asked for
 * (MADV_HUGEPAGE, granted where /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it). For a fresh
 * memfd of SIZE MiB (default 1024) it times, in seconds per GiB: populating it (MADV_POPULATE_WRITE in
 * 16 MiB steps, as the engine's warm-up does), touching every 4 KiB from user mode and then from kernel mode
 * (FUTEX_WAKE_OP, as touch_pages in src/te/prefault.c), and touching it through a second mapping (what a
 * same-host peer pays). Prints one line per page size and the kB mapped with 2 MiB pages.
 * With "populate" it only populates a fresh memfd the way a segment's warm-up does (2 MiB pages asked for
 * unless MC_SEGMENT_HUGEPAGE=0) and prints "FRESH gbps=X": how fast this machine hands out fresh shared
 * memory at that moment, the limit of a first pass over a fresh segment (bench/run_store_bench.sh).
 * Usage: shm_pages [SIZE_MIB [populate]] */
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* kB of this process's memory mapped with 2 MiB shmem pages (smaps_rollup's ShmemPmdMapped). */
static long pmd_kb(void) {
  char line[256];
  long kb = -1;
  FILE *f = fopen("/proc/self/smaps_rollup", "re");
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "ShmemPmdMapped: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* A fresh memfd of len bytes mapped shared (2 MiB pages asked for when huge); NULL after a message. */
static char *fresh_mapping(size_t len, int huge, int *fd) {
  *fd = memfd_create("shm_pages", MFD_CLOEXEC);
  if (*fd < 0 || ftruncate(*fd, (off_t)len)) return perror("memfd"), NULL;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (p == MAP_FAILED) return perror("mmap"), NULL;
  if (huge && madvise(p, len, MADV_HUGEPAGE)) perror("madvise(MADV_HUGEPAGE)");
  return p;
}

/* MADV_POPULATE_WRITE over [p, p+len) in 16 MiB steps, as the engine's warm-up does: 0 or -1. */
static int populate(char *p, size_t len) {
  for (size_t o = 0; o < len; o += 16u << 20)
    if (madvise(p + o, len - o < (16u << 20) ? len - o : 16u << 20, MADV_POPULATE_WRITE)) return perror("populate"), -1;
  return 0;
}

static int run(size_t len, int huge) {
  int fd;
  char *p = fresh_mapping(len, huge, &fd);
  if (!p) return -1;
  double t0 = now();
  if (populate(p, len)) return -1;
  double t1 = now();
  for (size_t o = 0; o < len; o += 4096) __atomic_fetch_add(p + o, 0, __ATOMIC_RELAXED);
  double t2 = now();
  for (size_t o = 0; o < len; o += 4096)
    syscall(SYS_futex, (uint32_t *)(p + o), FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0, 0, (uint32_t *)(p + o),
            FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
  double t3 = now();
  long kb = pmd_kb();
  char *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (q == MAP_FAILED) return perror("mmap"), -1;
  double t4 = now();
  for (size_t o = 0; o < len; o += 4096) __atomic_fetch_add(q + o, 0, __ATOMIC_RELAXED);
  double t5 = now();
  double g = (double)(1u << 30) / (double)len;
  printf("pages=%s populate_s_per_gib=%.3f user_touch=%.3f kernel_touch=%.3f second_mapping_touch=%.3f pmd_mapped_kb=%ld\n",
         huge ? "2MiB-asked" : "4KiB", (t1 - t0) * g, (t2 - t1) * g, (t3 - t2) * g, (t5 - t4) * g, kb);
  munmap(q, len);
  munmap(p, len);
  close(fd);
  return 0;
}

/* Populates a fresh memfd of len bytes as a segment's warm-up does and prints the rate. */
static int fresh(size_t len) {
  const char *h = getenv("MC_SEGMENT_HUGEPAGE");
  int fd;
  char *p = fresh_mapping(len, !(h && !strcmp(h, "0")), &fd);
  if (!p) return -1;
  double t0 = now();
  if (populate(p, len)) return -1;
  double t1 = now();
  printf("FRESH gbps=%.3f secs=%.3f pmd_mapped_kb=%ld\n", (double)len / (t1 - t0) / 1e9, t1 - t0, pmd_kb());
  munmap(p, len);
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  size_t len = (size_t)(argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) << 20;
  if (argc > 2 && !strcmp(argv[2], "populate")) return len && !fresh(len) ? 0 : 1;
  char mode[128] = "unreadable";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");
  if (f && fgets(mode, sizeof(mode), f)) mode[strcspn(mode, "\n")] = 0;
  if (f) fclose(f);
  printf("shmem_enabled: %s; %zu MiB\n", mode, len >> 20);
  if (!len || run(len, 0) || run(len, 1)) return 1;
  return 0;
}
