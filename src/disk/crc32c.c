/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32 instruction where the CPU has it,
 * a byte table otherwise (both give the same values; tests/test_disk.c checks the standard test vector). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "disk/disk.h"

static uint32_t crc_table[256];

static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    crc_table[i] = c;
  }
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n) {
  while (n--) c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    c = __builtin_ia32_crc32qi(c, *p++);
    n--;
  }
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c64 = __builtin_ia32_crc32di(c64, v);
    p += 8;
    n -= 8;
  }
  c = (uint32_t)c64;
  while (n--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}
#endif

static uint32_t (*crc_impl)(uint32_t, const unsigned char *, size_t);

static void crc_pick(void) {
  crc_table_init();
  crc_impl = crc_sw;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) crc_impl = crc_hw;
#endif
}

uint32_t mc_disk_crc32c(uint32_t crc, const void *p, size_t n) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, crc_pick);
  return ~crc_impl(~crc, p, n);
}
