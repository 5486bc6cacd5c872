/* Fuzz target: segment descriptor decoding (every byte of it comes from a peer or a metadata service). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "te/engine_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  struct mc_desc *d = mc_desc_decode(text);
  if (d) {
    for (size_t i = 0; i < d->nbuf; i++) {
      const struct mc_rbuf *b = &d->bufs[i];
      if (mc_desc_find(d, b->addr, b->len) != b) abort(); /* each buffer covers itself */
      if (b->addr + b->len > b->addr && mc_desc_find(d, b->addr + b->len - 1, 2) == b) abort();
    }
    mc_desc_unref(d);
  }
  free(text);
  return 0;
}
