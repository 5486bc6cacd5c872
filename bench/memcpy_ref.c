/* memcpy_ref: the single-thread memcpy throughput the same-host transfer path is judged against.
 * Copies --block_size blocks between two pre-faulted buffers of --buffer_size bytes, walking through
 * them block by block (so a working set larger than the caches is not served from cache), for
 * --duration seconds. Prints one line in the units of transfer_engine_bench. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/util.h"

struct opts {
  uint64_t block_size, buffer_size;
  double duration;
  char *report_unit;
  int64_t report_precision;
};

static const struct mc_cfg_opt opt_table[] = {
    {"block_size", MC_CFG_SIZE, "65536", 1, 1e15, offsetof(struct opts, block_size), "bytes per memcpy call"},
    {"buffer_size", MC_CFG_SIZE, "1GiB", 1, 1e15, offsetof(struct opts, buffer_size),
     "size of each of the two buffers (working set), raised to at least block_size"},
    {"duration", MC_CFG_DOUBLE, "2", 0.01, 3600, offsetof(struct opts, duration), "seconds to copy for"},
    {"report_unit", MC_CFG_STRING, "GB", 1, 0, offsetof(struct opts, report_unit),
     "GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb (invalid: warning, GB)"},
    {"report_precision", MC_CFG_INT, "2", 0, 12, offsetof(struct opts, report_precision),
     "digits after the decimal point"},
    MC_CFG_END,
};

static double unit_bytes(const char **name) {
  static const struct {
    const char *n;
    double b;
  } u[] = {{"GB", 1e9}, {"GiB", 1073741824.0}, {"Gb", 1e9 / 8}, {"MB", 1e6}, {"MiB", 1048576.0},
           {"Mb", 1e6 / 8}, {"KB", 1e3}, {"KiB", 1024.0}, {"Kb", 1e3 / 8}};
  for (size_t i = 0; i < MC_ARRAY_LEN(u); i++)
    if (!strcmp(u[i].n, *name)) return u[i].b;
  fprintf(stderr, "invalid --report_unit '%s', using GB\n", *name);
  *name = "GB";
  return 1e9;
}

int main(int argc, char **argv) {
  struct opts o;
  mc_cfg_defaults(opt_table, &o);
  int rc = mc_cfg_parse_argv(opt_table, &o, argc, argv, "[--block_size=N] [--buffer_size=N] [--duration=S]", NULL);
  if (rc) {
    mc_cfg_free(opt_table, &o);
    return rc < 0 ? 1 : 0;
  }
  uint64_t block = o.block_size, nblocks = MC_MAX(o.buffer_size, block) / block, len = nblocks * block;
  char *src, *dst;
  if (posix_memalign((void **)&src, 4096, len) || posix_memalign((void **)&dst, 4096, len)) {
    fprintf(stderr, "cannot allocate 2 x %llu bytes\n", (unsigned long long)len);
    return 1;
  }
  memset(src, 0x5a, len); /* pre-fault both buffers */
  memset(dst, 0xa5, len);
  uint64_t copies = 0, start = mc_now_ns(), limit = (uint64_t)(o.duration * 1e9), now = start;
  while (now - start < limit) {
    uint64_t off = (copies % nblocks) * block;
    memcpy(dst + off, src + off, block);
    __asm__ __volatile__("" ::"r"(dst) : "memory"); /* keep the copy */
    copies++;
    now = mc_now_ns();
  }
  double secs = (double)(now - start) / 1e9;
  const char *uname = o.report_unit;
  double ub = unit_bytes(&uname);
  printf("memcpy: block %llu, working set %llu, duration %.2f, copies %llu, throughput %.*f %s/s\n",
         (unsigned long long)block, (unsigned long long)len, secs, (unsigned long long)copies,
         (int)o.report_precision, (double)copies * (double)block / secs / ub, uname);
  free(src);
  free(dst);
  mc_cfg_free(opt_table, &o);
  return 0;
}
