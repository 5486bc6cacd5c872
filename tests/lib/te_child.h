/* Test-side helper for a child process acting as a remote writer: one engine over TCP writes 4 KiB into
 * a peer's registered memory. Used by the tests of the cluster secret and of tenants, after they set the
 * child's secret. */
#ifndef MC_TEST_TE_CHILD_H
#define MC_TEST_TE_CHILD_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/transfer_engine.h"

/* An engine named `name` on metadata `conn` writes 4 KiB of `fill` at addr of segment `seg`. 0 when the
 * write completed; 1 when the segment could not be opened or the write failed; 2 when the engine could
 * not be created or its buffer registered (its metadata writes refused, for instance). */
static inline int mt_te_write_4k(const char *conn, const char *name, const char *seg, uint64_t addr,
                                 unsigned char fill) {
  setenv("MC_FORCE_TCP", "1", 1);
  setenv("MC_TCP_CONNECT_TIMEOUT_MS", "1000", 1);
  transfer_engine_t e = createTransferEngine(conn, name, NULL, 0, 1);
  if (!e) return 2;
  uint8_t *src = malloc(4096);
  memset(src, fill, 4096);
  int ok = 0;
  if (registerLocalMemory(e, src, 4096, "cpu:0", 1)) {
    destroyTransferEngine(e);
    free(src);
    return 2;
  }
  segment_id_t sid = openSegment(e, seg);
  if (sid >= 0) {
    struct transfer_request r = {OPCODE_WRITE, src, sid, addr, 4096};
    batch_id_t b = allocateBatchID(e, 1);
    struct transfer_status st = {0};
    ok = !submitTransfer(e, b, &r, 1) && mc_te_wait_batch(e, b, 15000) >= 0 && !getTransferStatus(e, b, 0, &st) &&
         st.status == STATUS_COMPLETED;
    freeBatchID(e, b);
  }
  destroyTransferEngine(e);
  free(src);
  return ok ? 0 : 1;
}

#endif
