/* Fuzz target: the witness blocks a writer takes from its master's replies (docs/ha.md, "Witnesses"),
 * decoded by mc_witness_take. Input: the tail of one or more replies, read as consecutive witness blocks
 * (u64 view_version, u64 durable_seq, count, records in the holder-index layout) into one set of
 * witnesses. Checked: a block that does not decode marks the reader in error and adds nothing; the set
 * never holds more than its cap; the count only changes by what a block brought or its prune dropped. */
#include <stdlib.h>

#include "client/client.h"
#include "fuzz_common.h"
#include "net/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  struct mc_witnesses *w = mc_witness_new();
  struct mc_rbuf_rd r;
  mc_r_init(&r, data, size);
  for (int blocks = 0; blocks < 64 && r.off < r.len && !r.err; blocks++) {
    size_t before = mc_witness_count(w), at = r.off;
    mc_witness_take(w, &r);
    size_t after = mc_witness_count(w);
    if (after > 65536) abort();
    /* a block adds at most one record per 8 + 1 + 4 + 49 bytes it spans */
    if (after > before && after - before > (r.off - at) / 62) abort();
    if (r.err && after > before) abort();
    if (!r.err && r.off == at) break; /* too short for a block: the reply's end */
  }
  mc_witness_free(w);
  return 0;
}
