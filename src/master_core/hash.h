/* The 64-bit hash of a byte string: objects' keys (their shard and bucket), and the registry's, key groups'
 * and tasks' names and ids. A header of its own (static inline) so that every file of the core, however low,
 * hashes without calling into another. */
#ifndef MC_MASTER_CORE_HASH_H
#define MC_MASTER_CORE_HASH_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mc_key_hash(const void *key, size_t len) {
  /* MurmurHash64A-style mixing, 8 bytes at a time. */
  const uint64_t mul = 0xc6a4a7935bd1e995ull;
  const uint8_t *p = key;
  uint64_t h = 0x9747b28c1234abcdull ^ (len * mul);
  for (; len >= 8; len -= 8, p += 8) {
    uint64_t k;
    memcpy(&k, p, 8);
    k *= mul;
    k ^= k >> 47;
    k *= mul;
    h ^= k;
    h *= mul;
  }
  uint64_t t = 0;
  if (len) memcpy(&t, p, len);
  h ^= t;
  h *= mul;
  h ^= h >> 47;
  h *= mul;
  h ^= h >> 47;
  return h;
}

#endif
