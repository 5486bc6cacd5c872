/* The transport table (docs/transfer-engine.md, "Path choice"). A transport is one file and one row here. The
 * rows are in the order a segment's path is chosen: the same-host path first, then the network transports, the
 * fallback last. */
#include <stdio.h>
#include <string.h>

#include "te/engine_internal.h"

extern const struct mc_transport_ops mc_tcp_transport_ops;
extern const struct mc_transport_ops mc_shm_transport_ops;
extern const struct mc_transport_ops mc_rdma_transport_ops; /* transport_rdma.c: its init fails without a device */

static const struct mc_transport_ops *const table[] = {
    &mc_shm_transport_ops,
    &mc_rdma_transport_ops,
    &mc_tcp_transport_ops,
};
#define NROWS ((int)(sizeof(table) / sizeof(table[0])))
_Static_assert(NROWS <= MC_TRANSPORT_ROWS_MAX, "raise MC_TRANSPORT_ROWS_MAX");

int mc_transport_rows(void) { return NROWS; }

const struct mc_transport_ops *mc_transport_row(int i) { return table[i]; }

const struct mc_transport_ops *mc_transport_fallback(void) { return &mc_tcp_transport_ops; }

int mc_transport_rank(const struct mc_transport_ops *ops) {
  for (int i = 0; i < NROWS; i++)
    if (table[i] == ops) return i;
  return -1;
}

const struct mc_transport_ops *mc_transport_lookup(const char *name) {
  for (int i = 0; i < NROWS; i++)
    if (!strcmp(table[i]->name, name)) return table[i];
  return NULL;
}
