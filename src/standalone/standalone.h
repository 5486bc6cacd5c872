/* Standalone client mode (docs/standalone.md): a layer above the store client. Its dummy back-end
 * (proxy.c) makes a handle forward every verb of client.h's struct mc_backend to a real client process of
 * the same host; mc_store_setup_dummy (include/mooncake/store.h) installs it. The real client (real_client.c,
 * run by tools/mooncake_client.c) serves dummies by calling its own handle's back-end. The wire between
 * them is wire.h. Not a public header. */
#ifndef MC_STANDALONE_STANDALONE_H
#define MC_STANDALONE_STANDALONE_H
#include <stdint.h>

#include "mooncake/store.h"

/* ---- real_client.c: the real client's listener for dummies ---- */
struct mc_real_client;
/* Listens on "@mooncake_client_<port>.sock" for store (set up, local); NULL when it cannot. max_dummies
 * connections at once, each sharing at most max_shared bytes. */
struct mc_real_client *mc_real_client_start(mooncake_store_t store, int port, int max_dummies, uint64_t max_shared);
void mc_real_client_stop(struct mc_real_client *v);
uint64_t mc_real_client_refused(const struct mc_real_client *v);

/* ---- proxy.c: the dummy ---- */
struct mc_dummy;
/* The dummy of a handle set up with mc_store_setup_dummy, or NULL (tests). */
struct mc_dummy *mc_dummy_of(mooncake_store_t store);
/* REMOVE_REGEX (pattern) / REMOVE_ALL / HEALTH / STATS (force = which counter): one i64 (wire.h). */
int64_t mc_dummy_simple(struct mc_dummy *d, int op, int force, const char *pattern);

#endif
