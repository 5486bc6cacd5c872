/* The HTTP metadata server (docs/transfer-engine.md, "The HTTP metadata server"), embeddable in any binary
 * (mooncake_master embeds it; the standalone mooncake_http_metadata_server wraps it). An in-memory map key
 * -> body, optionally persisted to a file so that a restart loses nothing. */
#ifndef MC_TE_METADATA_SERVER_H
#define MC_TE_METADATA_SERVER_H
#include <stdint.h>

struct mc_meta_server;

/* Starts serving on host:port (port 0 = pick a free port; see mc_meta_server_port). persist_path may be
 * NULL (memory only); otherwise the map is loaded from it at start and rewritten atomically after every
 * change (before the change is answered). Returns NULL with an error logged when the port cannot be bound. */
struct mc_meta_server *mc_meta_server_start(const char *host, uint16_t port, const char *persist_path);
uint16_t mc_meta_server_port(const struct mc_meta_server *s);
/* In-process access for the embedding binary (e.g. the master deleting a dead client's keys): not subject
 * to the rpc_meta rule that refuses an HTTP DELETE of a key whose engine still answers. */
int mc_meta_server_delete(struct mc_meta_server *s, const char *key); /* 0, or 1 when absent */
char *mc_meta_server_get(struct mc_meta_server *s, const char *key);   /* malloc'ed value, NULL when absent */
/* 1 when the engine recorded in an rpc_meta value ({"ip_or_host_name", "rpc_port"}) answers a control
 * RPC probe within timeout_ms. */
int mc_meta_rpc_owner_alive(const char *value, int timeout_ms);
/* Stops serving and frees everything. NULL ignored. */
void mc_meta_server_stop(struct mc_meta_server *s);

#endif
