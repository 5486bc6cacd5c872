/* Control RPC server and client. Each connection (one request) gets its own thread (net/conn_server.h)
 * so that one slow client cannot stall the others; at most RPC_MAX_WORKERS at once, each bounded by
 * read deadlines: the 9-byte frame header within RPC_HEADER_MS of the accept (a client sends its request
 * right after connecting, so an idle connection is closed after 1 s and a flood of idle connections
 * cannot keep the workers, and with them the master's liveness probe, out for long), the JSON within
 * RPC_SERVER_READ_MS more. */
#include "net/ctrl_rpc.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "net/codec.h"
#include "net/conn_server.h"
#include "net/sock.h"

#define RPC_HEADER_MS 1000
#define RPC_SERVER_READ_MS 5000
#define RPC_MAX_WORKERS 64

struct mc_rpc_server {
  struct mc_conn_server *cs;
  mc_rpc_handler handler;
  void *ctx;
};

uint64_t mc_rpc_max_length(void) {
  return (uint64_t)mc_knob_long(MC_KNOB_HANDSHAKE_MAX_LENGTH);
}

int mc_rpc_decode_header(const uint8_t hdr[9], uint64_t max_len, int *type, uint64_t *json_len, int *legacy) {
  uint64_t len = mc_le_get64(hdr);
  if (len == 0 || len > max_len) return -EPROTO;
  if (hdr[8] <= MC_RPC_PROBE) {
    *type = hdr[8];
    *json_len = len - 1;
    *legacy = 0;
  } else {
    *type = MC_RPC_CONNECTION;
    *json_len = len;
    *legacy = 1;
  }
  return 0;
}

static int send_frame(int fd, int type, const char *json, int timeout_ms) {
  size_t jl = strlen(json);
  uint8_t hdr[9];
  mc_le_put64(hdr, jl + 1);
  hdr[8] = (uint8_t)type;
  int rc = mc_sock_write_deadline(fd, hdr, 9, timeout_ms);
  return rc ? rc : mc_sock_write_deadline(fd, json, jl, timeout_ms);
}

/* Reads one frame: the header within header_ms, then the JSON within timeout_ms; returns 0 with a
 * malloc'ed NUL-terminated JSON and its type. */
static int recv_frame(int fd, int header_ms, int timeout_ms, int *type, char **json, size_t *jlen) {
  uint8_t hdr[9];
  int legacy, rc = mc_sock_read_deadline(fd, hdr, 9, header_ms);
  if (rc) return rc;
  uint64_t len;
  if (mc_rpc_decode_header(hdr, mc_rpc_max_length(), type, &len, &legacy))
    return mc_auth_is_hello(hdr, sizeof(hdr)) ? -EACCES : -EPROTO; /* a client with a secret, we have none */
  char *buf = mc_try_malloc(len + 1);
  if (!buf) return -ENOMEM;
  size_t off = 0;
  if (legacy) buf[off++] = (char)hdr[8];
  rc = mc_sock_read_deadline(fd, buf + off, len - off, timeout_ms);
  if (rc) {
    mc_free(buf);
    return rc;
  }
  buf[len] = 0;
  *json = buf;
  *jlen = len;
  return 0;
}

/* After replying, half-close and give the client a moment to close its side (the socket is closed
 * when the connection thread is joined). */
static void linger(int fd) {
  shutdown(fd, SHUT_WR);
  char sink[256];
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (int i = 0; i < 4 && poll(&p, 1, 250) > 0; i++)
    if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) break;
}

static void serve_conn(void *arg, int fd) {
  struct mc_rpc_server *s = arg;
  int type;
  char *req = NULL, *reply = NULL;
  size_t len;
  if (mc_auth_server(fd, "te-ctrl", RPC_HEADER_MS)) return; /* docs/security.md; refusals are logged there */
  int rc = recv_frame(fd, RPC_HEADER_MS, RPC_SERVER_READ_MS, &type, &req, &len);
  if (rc == -EACCES) {
    mc_auth_answer_open(fd, RPC_HEADER_MS); /* so that it can say why it stops */
  } else if (rc) {
    LOG_WARN("control RPC: rejected a request (%s)", rc == -EPROTO ? "invalid frame length" : strerror(-rc));
  } else {
    s->handler(s->ctx, type, req, len, &reply);
    send_frame(fd, type, reply ? reply : "{}", RPC_SERVER_READ_MS);
    linger(fd);
  }
  mc_free(req);
  mc_free(reply);
}

struct mc_rpc_server *mc_rpc_server_start(uint16_t port, mc_rpc_handler h, void *ctx, uint16_t *port_out) {
  int backlog = (int)mc_knob_long(MC_KNOB_HANDSHAKE_LISTEN_BACKLOG);
  int fd;
  if (port) {
    fd = mc_sock_listen(mc_te_bind_ip(), port, backlog);
  } else {
    int lo, hi;
    mc_rpc_port_range(&lo, &hi);
    fd = mc_sock_listen_range(mc_te_bind_ip(), lo, hi, 500, backlog, &port);
  }
  if (fd < 0) {
    LOG_ERROR("control RPC: cannot listen (port %u): %s", port, strerror(-fd));
    return NULL;
  }
  mc_auth_note_open("control RPC");
  struct mc_rpc_server *s = mc_calloc(1, sizeof(*s));
  s->handler = h;
  s->ctx = ctx;
  *port_out = mc_sock_local_port(fd);
  if (!(s->cs = mc_conn_server_start(fd, serve_conn, NULL, s, RPC_MAX_WORKERS, "control RPC"))) {
    close(fd);
    mc_free(s);
    return NULL;
  }
  return s;
}

void mc_rpc_server_stop(struct mc_rpc_server *s) {
  if (!s) return;
  mc_conn_server_stop(s->cs); /* joins every connection thread: the handler context stays valid until then */
  mc_free(s);
}

int mc_rpc_call(const char *host, uint16_t port, int type, const char *json, char **reply, int timeout_ms) {
  int cto = (int)mc_knob_long(MC_KNOB_HANDSHAKE_CONNECT_TIMEOUT) * 1000;
  int fd = mc_sock_connect(host, port, MC_MIN(cto, timeout_ms));
  if (fd < 0) return fd;
  int rtype = -1, rc = mc_auth_client(fd, "te-ctrl", timeout_ms);
  if (!rc) rc = send_frame(fd, type, json, timeout_ms);
  size_t len;
  if (!rc) rc = recv_frame(fd, timeout_ms, timeout_ms, &rtype, reply, &len);
  if (!rc && rtype != type) {
    mc_free(*reply);
    *reply = NULL;
    rc = -EPROTO;
  }
  close(fd);
  return rc;
}
