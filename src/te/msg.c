/* Messages (include/mooncake/transfer_engine.h, docs/transfer-engine.md "Messages"): a thin public face of
 * the framed RPC transport (net/mrpc.h), one opcode per message kind, the handler's status as the reply. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "mooncake/store_errors.h"
#include "mooncake/transfer_engine.h"
#include "net/mrpc.h"

struct mc_msg_server {
  struct mc_mrpc_server *srv;
  mc_msg_handler_fn fn;
  void *ctx;
};

struct mc_msg_client {
  struct mc_mrpc_client *rpc;
};

static int msg_handle(void *ctx, void **conn_ctx, const char *tenant, uint16_t opcode, const uint8_t *body,
                      size_t len, struct mc_wbuf *reply) {
  (void)conn_ctx, (void)tenant, (void)reply;
  struct mc_msg_server *s = ctx;
  return s->fn(s->ctx, opcode, body, len);
}

mc_msg_server_t *mc_msg_server_start(const char *bind_ip, uint16_t port, int threads, int idle_timeout_s,
                                     mc_msg_handler_fn fn, void *ctx, uint16_t *port_out) {
  if (!fn || threads < 0 || idle_timeout_s < 0) return NULL;
  struct mc_msg_server *s = mc_calloc(1, sizeof *s);
  s->fn = fn, s->ctx = ctx;
  struct mc_mrpc_server_opts o = {.threads = threads > 16 ? 16 : threads, .idle_timeout_s = idle_timeout_s,
                                  .name = "message server"};
  s->srv = mc_mrpc_server_start_opts(bind_ip && *bind_ip ? bind_ip : "0.0.0.0", port, msg_handle, NULL, s, &o,
                                     port_out);
  if (!s->srv) {
    free(s);
    return NULL;
  }
  return s;
}

void mc_msg_server_stop(mc_msg_server_t *s) {
  if (!s) return;
  mc_mrpc_server_stop(s->srv);
  free(s);
}

mc_msg_client_t *mc_msg_client_new(const char *host, uint16_t port, int timeout_ms) {
  if (!host || !*host || !port || timeout_ms <= 0) return NULL;
  struct mc_msg_client *c = mc_calloc(1, sizeof *c);
  c->rpc = mc_mrpc_client_new(host, port, timeout_ms, timeout_ms);
  if (!c->rpc) {
    free(c);
    return NULL;
  }
  return c;
}

int mc_msg_send(mc_msg_client_t *c, uint16_t kind, const void *data, size_t len) {
  if (!c || (!data && len) || len > MC_MSG_MAX_BODY) return MC_INVALID_PARAMS;
  struct mc_wbuf req = {0}, reply = {0};
  if (len) mc_w_bytes_raw(&req, data, len);
  int rc = mc_mrpc_call(c->rpc, kind, &req, &reply);
  mc_w_free(&req);
  mc_w_free(&reply);
  return rc;
}

void mc_msg_client_free(mc_msg_client_t *c) {
  if (!c) return;
  mc_mrpc_client_free(c->rpc);
  free(c);
}
