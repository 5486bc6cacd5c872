/* Test-side helpers around descriptors and single requests: publishing a segment descriptor by hand (a forged
 * or altered one) in a metadata service, and running one request through a batch. Used by the tests of hostile
 * descriptors and of the transport table; the embedded metadata server they publish in. */
#ifndef MC_TEST_TE_DESC_H
#define MC_TEST_TE_DESC_H
#include <stdint.h>
#include <stdio.h>

#include "meta/metadata.h"
#include "meta/metadata_server.h"
#include "mooncake/transfer_engine.h"

/* The test binary's embedded HTTP metadata server, started on first use and left to go with the process: its
 * connection string, or NULL when it could not start. */
static inline const char *mt_meta_conn(void) {
  static struct mc_meta_server *ms;
  static char conn[128];
  if (!ms && (ms = mc_meta_server_start("127.0.0.1", 0, NULL)))
    snprintf(conn, sizeof(conn), "http://127.0.0.1:%u/metadata", mc_meta_server_port(ms));
  return ms ? conn : NULL;
}

/* Publishes desc (JSON text) as the descriptor of segment `name` on metadata `conn`: 0, or non-zero. */
static inline int mt_publish_desc(const char *conn, const char *name, const char *desc) {
  struct mc_meta *m = NULL;
  char key[256];
  mc_meta_segment_key(key, sizeof(key), name);
  int rc = mc_meta_open(conn, &m) || mc_meta_set(m, key, desc);
  if (m) mc_meta_close(m);
  return rc;
}

/* One request through a batch of one, waited for (10 s at most): the task's status (STATUS_COMPLETED,
 * STATUS_FAILED, ...), or minus the Status with which the submission (or the batch's allocation, as
 * InvalidArgument) was refused. */
static inline int mt_xfer(transfer_engine_t e, int op, void *local, segment_id_t seg, uint64_t remote, uint64_t len) {
  struct transfer_request r = {op, local, seg, remote, len};
  batch_id_t b = allocateBatchID(e, 1);
  if (b == INVALID_BATCH) return -MC_TE_STATUS_INVALID_ARGUMENT;
  int rc = submitTransfer(e, b, &r, 1);
  struct transfer_status st = {0};
  if (!rc) {
    mc_te_wait_batch(e, b, 10000);
    if (getTransferStatus(e, b, 0, &st)) st.status = STATUS_FAILED;
  }
  freeBatchID(e, b);
  return rc ? -rc : st.status;
}

#endif
