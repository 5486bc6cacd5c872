/* Fuzz target: a P2P store metadata record as the metadata service hands it over (docs/p2p-store.md,
 * "Metadata"), decoded with p2p_record_decode, then the edits a store makes to it. Input: the record's
 * text up to the first NUL byte (no expected name), then bytes steering the edits. Checked: a decoded
 * record is within its caps (shards, holders per list, partial holders, segment name lengths), its sizes add
 * up and its stripe fields fit (stripe_size, a CRC per stripe, partial entries only with stripe CRCs, no
 * bitmap bit past the last stripe); its encoding decodes again to the same encoding; after prune / put /
 * put_partial / remove it still encodes to text that decodes. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "p2p/record.h"

static void check_shape(const struct p2p_record *r) {
  if (!r->name || r->nshards > P2P_MAX_SHARDS || r->nsize > P2P_MAX_BUFFERS) abort();
  uint64_t sum = 0, ssum = 0;
  for (size_t i = 0; i < r->nsize; i++) sum += r->size_list[i];
  for (size_t i = 0; i < r->nshards; i++) {
    const struct p2p_shard *s = &r->shards[i];
    if (s->ngold > P2P_MAX_HOLDERS || s->nrep > P2P_MAX_HOLDERS || s->npart > P2P_MAX_HOLDERS) abort();
    if ((s->stripe_crc || s->npart) && (!r->stripe_size || !s->stripe_crc)) abort();
    size_t ns = p2p_stripes(s->size, r->stripe_size);
    for (size_t k = 0; k < s->ngold + s->nrep + s->npart; k++) {
      const struct p2p_holder *h = k < s->ngold ? &s->gold[k] : k < s->ngold + s->nrep ? &s->rep[k - s->ngold]
                                                                : &s->part[k - s->ngold - s->nrep].h;
      if (!h->seg[0] || strlen(h->seg) > P2P_MAX_SEGMENT || h->expires < 0) abort();
      if (k >= s->ngold + s->nrep && ns % 8 && s->part[k - s->ngold - s->nrep].bits[p2p_bitmap_bytes(ns) - 1] >> (ns % 8))
        abort();
    }
    ssum += s->size;
  }
  if (sum != r->size || ssum != r->size) abort();
  if (r->stripe_size && (r->stripe_size < P2P_MIN_STRIPE || r->stripe_size > r->max_shard ||
                         (r->stripe_size & (r->stripe_size - 1))))
    abort();
}

/* text decodes, and its encoding is a fixed point; returns that encoding (malloc'ed). */
static char *round_trip(const struct p2p_record *r) {
  char *text = p2p_record_encode(r);
  struct p2p_record again;
  const char *why;
  if (p2p_record_decode(text, r->name, &again, &why)) abort();
  check_shape(&again);
  char *text2 = p2p_record_encode(&again);
  if (strcmp(text, text2)) abort();
  free(text2);
  p2p_record_free(&again);
  return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  size_t n = strnlen((const char *)data, size);
  char *text = malloc(n + 1);
  memcpy(text, data, n);
  text[n] = 0;
  const uint8_t *steer = n < size ? data + n + 1 : NULL;
  size_t nsteer = steer ? size - n - 1 : 0;
  struct p2p_record r;
  const char *why = NULL;
  if (p2p_record_decode(text, NULL, &r, &why) == 0) {
    check_shape(&r);
    free(round_trip(&r));
    int64_t now = nsteer ? (int64_t)steer[0] * 1000 : 0;
    p2p_record_prune(&r, now);
    uint64_t *addr = r.nshards ? calloc(r.nshards, sizeof(*addr)) : NULL;
    uint8_t *have = r.nshards ? calloc(r.nshards, 1) : NULL;
    for (size_t i = 0; i < r.nshards; i++) {
      addr[i] = 4096 * (i + 1);
      have[i] = nsteer > 1 ? steer[1 + i % (nsteer - 1)] & 1 : 1; /* which shards the holder has */
    }
    /* a partial entry on a shard picked by the input, bits from the input (past the last stripe too) */
    size_t pi = r.nshards && nsteer > 2 ? steer[2] % r.nshards : 0;
    uint8_t bits[8192] = {0};
    for (size_t k = 0; k < sizeof(bits); k++) bits[k] = nsteer > 3 ? steer[3 + k % (nsteer - 3)] : 0xff;
    p2p_record_put_partial(&r, "fuzz-part:1", pi, bits, 4096, now + 10000);
    p2p_record_put_partial(&r, "fuzz-holder:1", pi, bits, 4096, now + 10000);
    check_shape(&r);
    free(round_trip(&r));
    p2p_record_put(&r, "fuzz-holder:1", nsteer > 1 && (steer[1] & 2), have, addr, now + 10000);
    check_shape(&r);
    free(round_trip(&r));
    if (nsteer > 1 && (steer[1] & 8)) p2p_record_remove(&r, "fuzz-part:1", 0);
    p2p_record_remove(&r, "fuzz-holder:1", nsteer > 1 && (steer[1] & 4));
    (void)p2p_record_empty(&r);
    check_shape(&r);
    free(round_trip(&r));
    free(addr);
    free(have);
    p2p_record_free(&r);
  } else if (!why) {
    abort(); /* a refusal always says why */
  }
  free(text);
  return 0;
}
