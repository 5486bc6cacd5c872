/* The transport table. RDMA and file transports become one more line here and one more file. */
#include <string.h>

#include "te/engine_internal.h"

extern const struct mc_transport_ops mc_tcp_transport_ops;
extern const struct mc_transport_ops mc_shm_transport_ops;

static const struct mc_transport_ops *const table[] = {
    &mc_tcp_transport_ops,
    &mc_shm_transport_ops,
};

const struct mc_transport_ops *mc_transport_lookup(const char *name) {
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
    if (!strcmp(table[i]->name, name)) return table[i];
  return NULL;
}
