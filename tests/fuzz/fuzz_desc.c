/* Fuzz target: a segment descriptor as a peer or a metadata service hands it over, decoded
 * (mc_desc_decode), then the range checks every copy makes against it (mc_desc_find: which remote
 * buffer wholly holds [addr, addr+len)). Input: the descriptor text up to the first NUL byte, then
 * queries, each u8 buffer selector, u64 LE signed offset from that buffer's start, u64 LE length.
 * Checked: a decoded descriptor has named, non-empty, non-wrapping buffers sorted without overlap; its
 * canonical text decodes to the same canonical text; mc_desc_find agrees with a linear scan on the
 * queries and on every buffer's edges. Nothing is copied: the harness never touches the addresses a
 * descriptor names (the SHM and TCP copies themselves are the data-port target's and the engine
 * tests' business). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "te/engine_internal.h"

/* The buffer wholly holding [addr, addr+len), by a linear scan. */
static const struct mc_rbuf *scan(const struct mc_desc *d, uint64_t addr, uint64_t len) {
  for (size_t i = 0; i < d->nbuf; i++) {
    const struct mc_rbuf *b = &d->bufs[i];
    if (len && addr >= b->addr && addr - b->addr < b->len && len <= b->len - (addr - b->addr)) return b;
  }
  return NULL;
}

static void check(const struct mc_desc *d, uint64_t addr, uint64_t len) {
  if (mc_desc_find(d, addr, len) != scan(d, addr, len)) abort();
}

static void check_shape(const struct mc_desc *d) {
  if (!d->name || !d->protocol || (d->nbuf && !d->bufs) || !d->canon) abort();
  for (size_t i = 0; i < d->nbuf; i++) {
    const struct mc_rbuf *b = &d->bufs[i];
    if (!b->name || !*b->name || !b->addr || !b->len || b->addr + b->len < b->addr) abort();
    if (i && d->bufs[i - 1].addr + d->bufs[i - 1].len > b->addr) abort();
  }
}

static void check_edges(const struct mc_desc *d) {
  for (size_t i = 0; i < d->nbuf; i++) {
    const struct mc_rbuf *b = &d->bufs[i];
    uint64_t a = b->addr, l = b->len, end = a + l;
    if (mc_desc_find(d, a, l) != b) abort(); /* each buffer covers itself */
    check(d, a, l + 1), check(d, a - 1, 1), check(d, a - 1, l + 1), check(d, end - 1, 1), check(d, end - 1, 2),
        check(d, end, 1), check(d, a, 0), check(d, a, UINT64_MAX), check(d, end - 1, UINT64_MAX);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  const uint8_t *nul = memchr(data, 0, size);
  size_t tlen = nul ? (size_t)(nul - data) : size;
  char *text = malloc(tlen + 1);
  if (tlen) memcpy(text, data, tlen);
  text[tlen] = 0;
  struct mc_desc *d = mc_desc_decode(text);
  if (d) {
    check_shape(d);
    check_edges(d);
    struct fz_in in = {data, size, nul ? tlen + 1 : size};
    while (fz_left(&in)) {
      uint8_t sel = fz_u8(&in);
      uint64_t base = d->nbuf ? d->bufs[sel % d->nbuf].addr : 0, off = fz_u64(&in), len = fz_u64(&in);
      check(d, base + off, len);
    }
    struct mc_desc *again = mc_desc_decode(d->canon);
    if (!again || strcmp(again->canon, d->canon)) abort(); /* change detection compares canonical texts */
    mc_desc_unref(again);
    mc_desc_unref(d);
  }
  free(text);
  return 0;
}
