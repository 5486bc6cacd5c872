/* Fuzz target: the control RPC ("handshake daemon") and the engine's handlers behind it. The input is one
 * connection's bytes, written to the control port of an engine in this process over loopback; the reply
 * is read until the server closes (bounded). Checked: the frame header decoder's answer is consistent
 * (type 0-3, length within the limit), and whatever the server sends back is one well-formed frame of
 * the request's type holding a JSON object — or, for a connection that opens with a cluster-secret hello
 * (the engine has no secret), exactly the handshake's "this server has no secret" answer
 * (docs/security.md). Notifications that reach the engine's inbox are taken out after each input. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "fuzz_common.h"
#include "net/ctrl_rpc.h"

#define REPLY_CAP (4u << 20)
#define REPLY_TIMEOUT_MS 5000

struct reply {
  uint8_t *p;
  size_t n;
};

static int on_reply(void *ctx, const uint8_t *p, size_t n) {
  struct reply *r = ctx;
  if (r->n + n > REPLY_CAP) abort(); /* no handler answers with megabytes */
  r->p = realloc(r->p, r->n + n);
  memcpy(r->p + r->n, p, n);
  r->n += n;
  return 0;
}

static void check_reply(const struct reply *r, int type) {
  int rtype, legacy;
  uint64_t len;
  if (r->n < 9 || mc_rpc_decode_header(r->p, REPLY_CAP, &rtype, &len, &legacy) || legacy || rtype != type ||
      len != r->n - 9)
    abort();
  json_t *o = json_loadb((const char *)r->p + 9, len, 0, NULL);
  if (!json_is_object(o)) abort();
  json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint16_t port;
  transfer_engine_t e = fz_engine(NULL, &port);
  fz_quiet();
  uint8_t hdr[9] = {0};
  memcpy(hdr, data, size < 9 ? size : 9);
  int type = -1, legacy;
  uint64_t len;
  if (mc_rpc_decode_header(hdr, mc_rpc_max_length(), &type, &len, &legacy) == 0 &&
      (type < 0 || type > MC_RPC_PROBE || len > mc_rpc_max_length()))
    abort();
  struct reply r = {NULL, 0};
  fz_exchange(port, data, size, REPLY_TIMEOUT_MS, 0, on_reply, &r);
  if (r.n && size >= 9 && mc_auth_is_hello(data, size) && type < 0) { /* no frame: a hello, answered "open" */
    if (r.n != MC_AUTH_CHALLENGE_LEN || memcmp(r.p, "MCAS\001", 5)) abort();
  } else if (r.n) {
    check_reply(&r, type);
  }
  free(r.p);
  int n = 0;
  notify_msg_t *msgs = getNotifsFromEngine(e, &n);
  if (msgs) freeNotifsMsgBuf(msgs, n);
  return 0;
}
