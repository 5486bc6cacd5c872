/* The transport table (docs/transfer-engine.md, "Path choice"). A transport is one file and one row here. The
 * rows are in the order a segment's path is chosen: the same-host path first, then the network transports, the
 * fallback last. */
#include <stdio.h>
#include <string.h>

#include "te/engine_internal.h"

extern const struct mc_transport_ops mc_tcp_transport_ops;
extern const struct mc_transport_ops mc_shm_transport_ops;

/* RDMA is not built in: asking for it installs the fallback, saying why (engine.c, installTransport). Its
 * file replaces this row. */
static int rdma_absent(struct mc_engine *e, struct mc_transport **out, char *why, size_t why_len) {
  (void)e, (void)out;
  snprintf(why, why_len, "not built in");
  return ERR_NOT_IMPLEMENTED;
}
static const struct mc_transport_ops rdma_absent_ops = {.name = "rdma", .init = rdma_absent};

static const struct mc_transport_ops *const table[] = {
    &mc_shm_transport_ops,
    &rdma_absent_ops,
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
