/* Master RPC transport (see mrpc.h). Knows frames, not masters. */
#include "net/mrpc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "mooncake/store_errors.h"
#include "net/conn_server.h"
#include "net/sock.h"

static void put_hdr(uint8_t *h, uint16_t op, uint64_t id, uint32_t len, int32_t status) {
  struct mc_wbuf w = {0};
  mc_w_u32(&w, MC_MRPC_MAGIC);
  mc_w_u8(&w, MC_MRPC_VERSION & 0xff);
  mc_w_u8(&w, MC_MRPC_VERSION >> 8);
  mc_w_u8(&w, op & 0xff);
  mc_w_u8(&w, op >> 8);
  mc_w_u64(&w, id);
  mc_w_u32(&w, len);
  mc_w_i32(&w, status);
  memcpy(h, w.p, MC_MRPC_HDR);
  mc_w_free(&w);
}

struct hdr {
  uint32_t magic, len;
  uint16_t version, op;
  uint64_t id;
  int32_t status;
};

static void get_hdr(const uint8_t *b, struct hdr *h) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, b, MC_MRPC_HDR);
  h->magic = mc_r_u32(&r);
  uint16_t v0 = mc_r_u8(&r), v1 = mc_r_u8(&r); /* two statements: evaluation order matters */
  h->version = (uint16_t)(v0 | v1 << 8);
  uint16_t o0 = mc_r_u8(&r), o1 = mc_r_u8(&r);
  h->op = (uint16_t)(o0 | o1 << 8);
  h->id = mc_r_u64(&r);
  h->len = mc_r_u32(&r);
  h->status = mc_r_i32(&r);
}

static int send_frame(int fd, uint16_t op, uint64_t id, int32_t status, const uint8_t *body, size_t len, int tmo) {
  uint8_t h[MC_MRPC_HDR];
  put_hdr(h, op, id, (uint32_t)len, status);
  struct iovec iov[2] = {{h, MC_MRPC_HDR}, {(void *)body, len}}; /* one syscall per frame */
  return mc_sock_writev_deadline(fd, iov, len ? 2 : 1, tmo);
}

/* ------------------------------------------------------------------ server */

struct mc_mrpc_server {
  atomic_int stop;
  struct mc_conn_server *cs;
  mc_mrpc_handler handler;
  mc_mrpc_on_close on_close;
  void *ctx;
};

/* Per-connection read-ahead: a request's header and body (and whatever the client sent behind them)
 * usually come with one recv; bodies up to RA_CAP are handed to the handler in place. */
#define RA_CAP (64u << 10)
struct readahead {
  uint8_t *b;
  size_t lo, hi; /* unread bytes: [lo, hi) */
};

/* Waits for the first bytes of the next request into an empty ra: indefinitely, but checking for
 * shutdown; a busy client's next request comes soon, so the wait starts with a busy poll. */
static int wait_request(struct mc_mrpc_server *s, int fd, struct readahead *ra, struct mc_spin *sp) {
  ra->lo = ra->hi = 0;
  long got = mc_sock_spin_recv(fd, ra->b, RA_CAP, 0, sp);
  if (got > 0) ra->hi = (size_t)got;
  if (got != -EAGAIN) return got > 0 ? 0 : (int)got;
  for (;;) {
    if (atomic_load(&s->stop)) return -ECANCELED;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 250);
    if (n < 0 && errno != EINTR) return -errno;
    if (n > 0) return 0; /* ra_fill reads it */
  }
}

/* Makes ra hold at least n (<= RA_CAP) unread bytes, within 10 s. */
static int ra_fill(int fd, struct readahead *ra, size_t n) {
  size_t have = ra->hi - ra->lo;
  if (have >= n) return 0;
  if (ra->lo + n > RA_CAP) {
    memmove(ra->b, ra->b + ra->lo, have);
    ra->lo = 0;
    ra->hi = have;
  }
  size_t got = 0;
  int rc = mc_sock_read_atleast_spin(fd, ra->b + ra->hi, n - have, RA_CAP - ra->hi, &got, 10000, NULL);
  ra->hi += got;
  return rc;
}

/* The next request's body: in place in ra, or (larger than RA_CAP) in *owned, which the caller frees. */
static int read_body(int fd, struct readahead *ra, uint32_t len, uint8_t **body, uint8_t **owned) {
  *owned = NULL;
  if (len <= RA_CAP) {
    int rc = ra_fill(fd, ra, len);
    *body = ra->b + ra->lo;
    ra->lo += rc ? 0 : len;
    return rc;
  }
  if (!(*owned = mc_try_malloc(len))) return -ENOMEM;
  size_t have = ra->hi - ra->lo;
  memcpy(*owned, ra->b + ra->lo, have);
  ra->lo = ra->hi;
  *body = *owned;
  return mc_sock_read_deadline(fd, *owned + have, len - have, 10000);
}

static void serve_conn(void *arg, int fd) {
  struct mc_mrpc_server *s = arg;
  void *conn_ctx = NULL;
  struct readahead ra = {mc_malloc(RA_CAP), 0, 0};
  struct mc_spin spin = {0};
  for (;;) {
    if (ra.lo == ra.hi && wait_request(s, fd, &ra, &spin)) break;
    if (ra_fill(fd, &ra, MC_MRPC_HDR)) break;
    struct hdr h;
    get_hdr(ra.b + ra.lo, &h);
    if (h.magic != MC_MRPC_MAGIC || h.len > MC_MRPC_MAX_BODY) {
      LOG_WARN("master RPC: dropping a connection that sent a malformed frame");
      break;
    }
    ra.lo += MC_MRPC_HDR;
    uint8_t *body, *owned;
    if (read_body(fd, &ra, h.len, &body, &owned)) {
      mc_free(owned);
      break;
    }
    struct mc_wbuf reply = {0};
    int status = h.version != MC_MRPC_VERSION ? MC_INVALID_VERSION
                                              : s->handler(s->ctx, &conn_ctx, h.op, body, h.len, &reply);
    mc_free(owned);
    int rc = send_frame(fd, h.op, h.id, status, reply.p, reply.len, 10000);
    mc_w_free(&reply);
    if (rc || h.version != MC_MRPC_VERSION) break;
  }
  mc_free(ra.b);
  if (s->on_close) s->on_close(s->ctx, conn_ctx);
}

struct mc_mrpc_server *mc_mrpc_server_start(const char *bind_ip, uint16_t port, mc_mrpc_handler h,
                                            mc_mrpc_on_close on_close, void *ctx, uint16_t *port_out) {
  int fd = mc_sock_listen(bind_ip, port, 1024);
  if (fd < 0) {
    LOG_ERROR("master RPC: cannot listen on %s:%u: %s", bind_ip && *bind_ip ? bind_ip : "0.0.0.0", port,
              strerror(-fd));
    return NULL;
  }
  struct mc_mrpc_server *s = mc_calloc(1, sizeof(*s));
  s->handler = h;
  s->on_close = on_close;
  s->ctx = ctx;
  if (port_out) *port_out = mc_sock_local_port(fd);
  if (!(s->cs = mc_conn_server_start(fd, serve_conn, NULL, s, 0, "master RPC"))) {
    close(fd);
    mc_free(s);
    return NULL;
  }
  return s;
}

void mc_mrpc_server_stop(struct mc_mrpc_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  mc_conn_server_stop(s->cs);
  mc_free(s);
}

/* ------------------------------------------------------------------ client */

#define POOL_MAX 16

struct mc_mrpc_client {
  char host[256];
  uint16_t port;
  int connect_timeout_ms, timeout_ms;
  pthread_mutex_t mu;
  int idle[POOL_MAX];
  int nidle;
  atomic_uint_least64_t next_id;
  char *key_ns; /* prefix of every object key sent through this client (a tenant's namespace), or NULL */
  struct mc_spin spin; /* reply waits: poll first while the master answers within the window */
};

struct mc_mrpc_client *mc_mrpc_client_new(const char *host, uint16_t port, int connect_timeout_ms, int timeout_ms) {
  struct mc_mrpc_client *c = mc_calloc(1, sizeof(*c));
  snprintf(c->host, sizeof(c->host), "%s", host);
  c->port = port;
  c->connect_timeout_ms = connect_timeout_ms;
  c->timeout_ms = timeout_ms;
  pthread_mutex_init(&c->mu, NULL);
  atomic_init(&c->next_id, 1);
  return c;
}

void mc_mrpc_client_reset(struct mc_mrpc_client *c) {
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->nidle; i++) close(c->idle[i]);
  c->nidle = 0;
  pthread_mutex_unlock(&c->mu);
}

void mc_mrpc_client_set_key_ns(struct mc_mrpc_client *c, const char *ns) {
  mc_free(c->key_ns);
  c->key_ns = ns && *ns ? mc_strdup(ns) : NULL;
}

const char *mc_mrpc_client_key_ns(const struct mc_mrpc_client *c) { return c->key_ns ? c->key_ns : ""; }

void mc_mrpc_client_free(struct mc_mrpc_client *c) {
  if (!c) return;
  mc_mrpc_client_reset(c);
  pthread_mutex_destroy(&c->mu);
  mc_free(c->key_ns);
  mc_free(c);
}

static int take_conn(struct mc_mrpc_client *c, int tmo) {
  pthread_mutex_lock(&c->mu);
  int fd = c->nidle ? c->idle[--c->nidle] : -1;
  pthread_mutex_unlock(&c->mu);
  if (fd >= 0) return fd;
  return mc_sock_connect(c->host, c->port, MC_MIN(c->connect_timeout_ms, tmo));
}

static void give_conn(struct mc_mrpc_client *c, int fd) {
  pthread_mutex_lock(&c->mu);
  if (c->nidle < POOL_MAX) c->idle[c->nidle++] = fd;
  else close(fd);
  pthread_mutex_unlock(&c->mu);
}

static int map_err(int rc) { return rc == -ETIMEDOUT ? MC_RPC_TIMEOUT : MC_RPC_FAIL; }

/* One exchange on fd. Returns the reply status or a negative errno-based code (< -100000). */
static int exchange(struct mc_mrpc_client *c, int fd, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply,
                    int tmo, int *io_err) {
  uint64_t id = atomic_fetch_add(&c->next_id, 1);
  *io_err = send_frame(fd, op, id, 0, req ? req->p : NULL, req ? req->len : 0, tmo);
  if (*io_err) return 0;
  /* the reply's header and (up to the rest of this buffer) body with one recv; the master sends nothing
   * else on this connection until our next request */
  uint8_t rb[4096];
  size_t got = 0;
  struct hdr h;
  if ((*io_err = mc_sock_read_atleast_spin(fd, rb, MC_MRPC_HDR, sizeof(rb), &got, tmo, &c->spin))) return 0;
  get_hdr(rb, &h);
  size_t early = got - MC_MRPC_HDR;
  if (h.magic != MC_MRPC_MAGIC || h.id != id || h.len > MC_MRPC_MAX_BODY || early > h.len) {
    *io_err = -EPROTO;
    return 0;
  }
  mc_w_reserve(reply, h.len);
  if (early) memcpy(reply->p, rb + MC_MRPC_HDR, early);
  if (h.len > early && (*io_err = mc_sock_read_deadline(fd, reply->p + early, h.len - early, tmo))) return 0;
  reply->len = h.len;
  return h.status;
}

int mc_mrpc_call_timeout(struct mc_mrpc_client *c, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply,
                         int tmo) {
  memset(reply, 0, sizeof(*reply));
  for (int attempt = 0; attempt < 2; attempt++) {
    int pooled;
    pthread_mutex_lock(&c->mu);
    pooled = c->nidle > 0;
    pthread_mutex_unlock(&c->mu);
    int fd = take_conn(c, tmo);
    if (fd < 0) return map_err(fd);
    int io_err = 0, st = exchange(c, fd, op, req, reply, tmo, &io_err);
    if (!io_err) {
      give_conn(c, fd);
      return st;
    }
    close(fd);
    mc_w_free(reply);
    /* A pooled connection may have been closed by the server while idle: retry once on a fresh one,
     * but never after a timeout (the request may be running). */
    if (!pooled || io_err == -ETIMEDOUT) return map_err(io_err);
  }
  return MC_RPC_FAIL;
}

int mc_mrpc_call(struct mc_mrpc_client *c, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply) {
  return mc_mrpc_call_timeout(c, op, req, reply, c->timeout_ms);
}
