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

#include "net/auth.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/store_errors.h"
#include "net/sock.h"

void mc_mrpc_put_hdr(uint8_t *h, uint16_t op, uint64_t id, uint32_t len, int32_t status) {
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

void mc_mrpc_get_hdr(const uint8_t *b, struct mc_mrpc_hdr *h) {
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
  mc_mrpc_put_hdr(h, op, id, (uint32_t)len, status);
  struct iovec iov[2] = {{h, MC_MRPC_HDR}, {(void *)body, len}}; /* one syscall per frame */
  return mc_sock_writev_deadline(fd, iov, len ? 2 : 1, tmo);
}

/* ------------------------------------------------------------------ client */

#define POOL_MAX 16

struct mc_mrpc_client {
  char host[256];
  uint16_t port;
  int connect_timeout_ms, timeout_ms;
  pthread_mutex_t mu; /* guards host, port, gen and the pool */
  int idle[POOL_MAX];
  int nidle;
  uint64_t gen; /* the target's generation: a connection to an earlier target is never pooled again */
  atomic_uint_least64_t next_id;
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

void mc_mrpc_client_free(struct mc_mrpc_client *c) {
  if (!c) return;
  mc_mrpc_client_reset(c);
  pthread_mutex_destroy(&c->mu);
  mc_free(c);
}

void mc_mrpc_client_retarget(struct mc_mrpc_client *c, const char *host, uint16_t port) {
  pthread_mutex_lock(&c->mu);
  snprintf(c->host, sizeof(c->host), "%s", host);
  c->port = port;
  c->gen++;
  for (int i = 0; i < c->nidle; i++) close(c->idle[i]);
  c->nidle = 0;
  pthread_mutex_unlock(&c->mu);
}

static int take_conn(struct mc_mrpc_client *c, int tmo, uint64_t *gen) {
  char host[256];
  pthread_mutex_lock(&c->mu);
  int fd = c->nidle ? c->idle[--c->nidle] : -1;
  uint16_t port = c->port;
  memcpy(host, c->host, sizeof(host));
  *gen = c->gen;
  pthread_mutex_unlock(&c->mu);
  if (fd >= 0) return fd;
  fd = mc_sock_connect(host, port, MC_MIN(c->connect_timeout_ms, tmo));
  int rc = fd < 0 ? 0 : mc_auth_client(fd, "master", tmo); /* docs/security.md */
  if (rc) {
    close(fd);
    return rc;
  }
  return fd;
}

static void give_conn(struct mc_mrpc_client *c, int fd, uint64_t gen) {
  pthread_mutex_lock(&c->mu);
  if (c->nidle < POOL_MAX && gen == c->gen) c->idle[c->nidle++] = fd;
  else close(fd);
  pthread_mutex_unlock(&c->mu);
}

static int map_err(int rc) { return rc == -ETIMEDOUT ? MC_RPC_TIMEOUT : MC_RPC_FAIL; }

#define FIRST_READ (16u << 10)

/* One exchange on fd. Returns the reply status or a negative errno-based code (< -100000). */
static int exchange(struct mc_mrpc_client *c, int fd, uint16_t op, const struct mc_wbuf *req, struct mc_wbuf *reply,
                    int tmo, int *io_err) {
  uint64_t id = atomic_fetch_add(&c->next_id, 1);
  *io_err = send_frame(fd, op, id, 0, req ? req->p : NULL, req ? req->len : 0, tmo);
  if (*io_err) return 0;
  /* the reply's header and (up to FIRST_READ bytes) its body with one recv, straight into the reply's
   * buffer: a batch's reply with its witness block (~11 KiB for 128 puts) then takes one system call, not
   * two. The master sends nothing else on this connection until our next request. */
  mc_w_reserve(reply, FIRST_READ); /* (unbounded: it cannot fail) */
  size_t got = 0;
  struct mc_mrpc_hdr h;
  if ((*io_err = mc_sock_read_atleast_spin(fd, reply->p, MC_MRPC_HDR, reply->cap, &got, tmo, &c->spin))) return 0;
  mc_mrpc_get_hdr(reply->p, &h);
  size_t early = got - MC_MRPC_HDR;
  if (h.magic != MC_MRPC_MAGIC || h.id != id || h.len > MC_MRPC_MAX_BODY || early > h.len) {
    *io_err = -EPROTO;
    return 0;
  }
  memmove(reply->p, reply->p + MC_MRPC_HDR, early);
  mc_w_reserve(reply, h.len);
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
    uint64_t gen;
    int fd = take_conn(c, tmo, &gen);
    if (fd < 0) return map_err(fd);
    int io_err = 0, st = exchange(c, fd, op, req, reply, tmo, &io_err);
    if (!io_err) {
      give_conn(c, fd, gen);
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
