/* Master RPC transport: versioned binary frames over TCP, many requests per connection.
 * Frame = 24-byte header {u32 magic "MCRP", u16 version, u16 opcode, u64 request id, u32 body length,
 * i32 status (replies)} + body (codec.h). The server (mrpc_server.c) serves every connection from a few
 * worker threads over one epoll set and never blocks on a client, so a slow client never stalls the
 * others; the client keeps a small pool of connections and bounds every call with a deadline. Errors
 * use store ErrorCodes: RPC_FAIL (-900) and RPC_TIMEOUT (-901). */
#ifndef MC_NET_MRPC_H
#define MC_NET_MRPC_H
#include <stddef.h>
#include <stdint.h>

#include "net/codec.h"

#define MC_MRPC_MAGIC 0x5052434Du /* "MCRP" */
#define MC_MRPC_VERSION 1
#define MC_MRPC_HDR 24
#define MC_MRPC_MAX_BODY (256u << 20)

/* Handler: decode `body`, append the reply body to `reply`, return the status (0 or a negative
 * ErrorCode) sent in the reply header. `conn_ctx` is per connection (see on_close). `tenant`: the tenant
 * the connection authenticated as (docs/security.md, "Tenants"), or NULL for a member of the whole
 * cluster (or an open cluster). */
typedef int (*mc_mrpc_handler)(void *ctx, void **conn_ctx, const char *tenant, uint16_t opcode, const uint8_t *body,
                               size_t len, struct mc_wbuf *reply);
typedef void (*mc_mrpc_on_close)(void *ctx, void *conn_ctx);

/* A frame header, decoded. */
struct mc_mrpc_hdr {
  uint32_t magic, len;
  uint16_t version, op;
  uint64_t id;
  int32_t status;
};
void mc_mrpc_put_hdr(uint8_t *h, uint16_t op, uint64_t id, uint32_t len, int32_t status);
void mc_mrpc_get_hdr(const uint8_t *b, struct mc_mrpc_hdr *h);

struct mc_mrpc_server;
struct mc_mrpc_server_opts {
  int threads;        /* worker threads (at most 256); 0 = online CPUs, at most 16 */
  int idle_timeout_s; /* close a connection with no request for this long; 0 = 600 s, < 0 = never */
  int stall_ms;       /* drop a connection whose first frame, frame or reply has not moved for this long; 0 = 10 s */
  int nagle;          /* 1: leave Nagle's algorithm on (no TCP_NODELAY) on accepted connections */
  int max_conns;      /* open connections at most (more are closed at once); 0 = $MC_MASTER_MAX_CONNECTIONS or 4096 */
  uint64_t max_inflight; /* bytes of large request frames + unsent replies at most (see mrpc_server.c); 0 =
                            $MC_MASTER_MAX_INFLIGHT_BYTES or 1 GiB */
  const char *name;      /* what the server is called in the open-cluster warning; NULL = "master RPC" */
};
/* Listens on bind_ip:port (port 0 = ephemeral; *port_out gets the port). NULL if it cannot bind.
 * Handlers run on the worker threads, one request of a connection at a time, requests of different
 * connections in parallel. o may be NULL (defaults). */
struct mc_mrpc_server *mc_mrpc_server_start_opts(const char *bind_ip, uint16_t port, mc_mrpc_handler h,
                                                 mc_mrpc_on_close on_close, void *ctx,
                                                 const struct mc_mrpc_server_opts *o, uint16_t *port_out);
struct mc_mrpc_server *mc_mrpc_server_start(const char *bind_ip, uint16_t port, mc_mrpc_handler h,
                                            mc_mrpc_on_close on_close, void *ctx, uint16_t *port_out);
void mc_mrpc_server_stop(struct mc_mrpc_server *s);

/* Deferred replies (long polls). Inside a handler, mc_mrpc_defer() takes the request being handled out of
 * the request/reply turn: the handler's status and reply body are then ignored, the connection serves
 * nothing more until the reply is given, and no worker thread waits for it. Any thread later calls
 * mc_mrpc_deferred_reply exactly once (taking over body's buffer; body may be NULL for an empty one),
 * which sends it and frees the handle. The answerer must reply within a bound of its own (a long poll's
 * timeout): until then the connection is not watched, so neither its peer closing nor its idle timer is
 * noticed. A connection that closes first (server stop) turns the reply into a no-op. NULL when called
 * outside a handler or twice for one request. */
struct mc_mrpc_deferred;
struct mc_mrpc_deferred *mc_mrpc_defer(void);
void mc_mrpc_deferred_reply(struct mc_mrpc_deferred *d, int32_t status, struct mc_wbuf *body);

struct mc_mrpc_client;
/* Does not connect yet. timeout_ms bounds every call (connect + send + reply). */
struct mc_mrpc_client *mc_mrpc_client_new(const char *host, uint16_t port, int connect_timeout_ms, int timeout_ms);
void mc_mrpc_client_free(struct mc_mrpc_client *c);
/* One call. Returns the reply status (>= the server's status), and the reply body in *reply (caller
 * frees with mc_w_free), or RPC_FAIL (-900) / RPC_TIMEOUT (-901) / INVALID_VERSION (-300). */
int mc_mrpc_call(struct mc_mrpc_client *c, uint16_t opcode, const struct mc_wbuf *req, struct mc_wbuf *reply);
/* Like mc_mrpc_call with a per-call timeout. */
int mc_mrpc_call_timeout(struct mc_mrpc_client *c, uint16_t opcode, const struct mc_wbuf *req, struct mc_wbuf *reply,
                         int timeout_ms);
/* Drops pooled connections (next call reconnects). */
void mc_mrpc_client_reset(struct mc_mrpc_client *c);
/* Points later calls at host:port (a new leader); pooled connections are dropped, and connections of
 * calls in flight are closed when they finish instead of being pooled. */
void mc_mrpc_client_retarget(struct mc_mrpc_client *c, const char *host, uint16_t port);

#endif
