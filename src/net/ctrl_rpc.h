/* The engine's control RPC ("handshake daemon"): one request/response per TCP connection, framed as
 * u64 LE length + u8 type + JSON text (length counts the type byte and the JSON). A first byte > 3
 * after the length marks a legacy untyped frame (length counts only the JSON), treated as Connection.
 * Lengths of 0 or above MC_HANDSHAKE_MAX_LENGTH are rejected, which also turns away stray HTTP or TLS. */
#ifndef MC_NET_CTRL_RPC_H
#define MC_NET_CTRL_RPC_H
#include <stddef.h>
#include <stdint.h>

enum mc_rpc_type { MC_RPC_CONNECTION = 0, MC_RPC_METADATA = 1, MC_RPC_NOTIFY = 2, MC_RPC_PROBE = 3 };

/* Handler: gets the request JSON (NUL-terminated, len bytes) and returns a malloc'ed reply JSON in
 * *reply (NULL = reply "{}"). Runs on a server worker thread. */
typedef void (*mc_rpc_handler)(void *ctx, int type, const char *req, size_t len, char **reply);

struct mc_rpc_server;

/* Listens on fixed `port` (non-zero) or a random port of the RPC range (port 0); *port_out gets it. */
struct mc_rpc_server *mc_rpc_server_start(uint16_t port, mc_rpc_handler h, void *ctx, uint16_t *port_out);
/* Stops accepting, waits for running handlers, frees. */
void mc_rpc_server_stop(struct mc_rpc_server *s);

/* One call: connect (MC_HANDSHAKE_CONNECT_TIMEOUT, 5 s), send, wait for the reply up to timeout_ms.
 * Returns 0 and a malloc'ed NUL-terminated reply, or a negative errno (-EPROTO for a bad reply). */
int mc_rpc_call(const char *host, uint16_t port, int type, const char *json, char **reply, int timeout_ms);

/* Frame header decoding, exposed for tests and fuzzing. hdr holds the first 9 bytes. Returns 0 with
 * the type and the number of JSON bytes still to read (legacy: the JSON's first byte is hdr[8] and is
 * counted in *json_len), or -EPROTO for an invalid length. */
int mc_rpc_decode_header(const uint8_t hdr[9], uint64_t max_len, int *type, uint64_t *json_len, int *legacy);
uint64_t mc_rpc_max_length(void);

#endif
