/* Master RPC server (see mrpc.h): a few worker threads serve every connection through one epoll set,
 * instead of a thread per connection.
 *
 * Why: with a thread per connection every request woke its own thread, and on a small machine those
 * threads spent more time being switched in and out than running handlers (16 clients on two vCPUs:
 * one context switch per request, 120 k/s). Here the worker that polls serves every connection that is
 * ready, and a busy one rarely sleeps: 25-150x fewer context switches, half the median latency with 16
 * clients, half the master CPU for batch lookups (bench/RESULTS.md, "The master RPC server: epoll workers
 * against a thread per connection").
 *
 * How:
 *  - One worker at a time polls the epoll set (the owner) and serves what it finds itself, so there is
 *    no hand-off and no wake-up between receiving a request and running it. One other worker (the
 *    watcher) looks every FOLLOW_NS whether the owner has been busy serving for longer than
 *    TAKEOVER_NS, and then takes over polling: a slow request (a regex removal over a million keys, a
 *    huge batch, a mount's 1 s liveness probe) holds up its own connection only. The remaining workers
 *    sleep until they are needed as watcher; after a quiet second the watcher sleeps too.
 *  - Connections are registered with EPOLLONESHOT, so one worker serves a connection at a time even
 *    while two poll during a take-over.
 *  - Nothing blocks on a client. Each connection has its own input buffer: a frame that arrives in
 *    pieces waits there, and replies the client does not read wait in an output buffer while the
 *    connection is armed for EPOLLOUT and its further requests stay unread (back-pressure). A frame or
 *    reply that has not moved for stall_ms (10 s) drops the connection.
 *  - The owner polls for a while instead of sleeping (MC_SPIN_US, as everywhere) after serving requests,
 *    and when it served a single connection it keeps that one out of epoll and reads it directly. A
 *    lone busy client then costs one recv and one send per request and is never woken for. Polling
 *    adapts as struct mc_spin describes: windows that end empty make the next ones be skipped.
 *  - Periodic duties (every second, by whichever worker is due): drop stalled connections, close idle
 *    ones (rpc_conn_timeout_seconds), re-arm the listener after accept ran out of file descriptors, and
 *    look again at connections waiting for in-flight room.
 *  - A handler may defer its reply (mc_mrpc_defer, for long polls): the connection is then armed for
 *    nothing, so it holds no worker, until the answer arms it for EPOLLOUT and one worker sends it
 *    (struct mc_mrpc_deferred says who owns what).
 *  - Bounds against hostile or broken peers (docs/master.md "Limits"): at most max_conns connections
 *    (more are accepted and closed at once); a new connection must send its first frame within the stall
 *    limit; a reply is built into a buffer bounded by MC_MRPC_MAX_BODY (a larger one is answered
 *    INVALID_PARAMS); the bytes of large request frames (what grows a connection's input buffer past
 *    IN_KEEP) are kept under max_inflight across all connections: a connection whose frame would exceed
 *    it is not read until room frees up (it is still dropped by the stall limit); and so are the large
 *    replies (over IN_KEEP) being sent or waiting to be: one that would exceed it is answered
 *    INVALID_PARAMS instead. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "mooncake/store_errors.h"
#include "net/mrpc.h"
#include "net/sock.h"

#define IN_INIT (16u << 10)   /* input buffer of a new connection */
#define IN_KEEP (64u << 10)   /* larger buffers (grown for a big frame) shrink back once empty; the bytes
                                 past this count as in flight */
#define MAX_EVENTS 32
#define MAX_WORKERS 256
#define TAKEOVER_NS 5000000ull /* a polling worker busy serving for this long is relieved by a follower */
#define FOLLOW_NS 5000000L     /* how often followers look while requests come */
#define DEFAULT_IDLE_S 600     /* idle_timeout_s 0 */

struct conn {
  struct conn *prev, *next; /* s->conns, under s->mu */
  int fd;
  void *conn_ctx;
  uint8_t *in;
  size_t cap, lo, hi;          /* unread input: in[lo, hi) */
  int sending;                 /* a reply is partly unsent: hdr[hdr_off..] then out[out_off, out_len) */
  uint8_t hdr[MC_MRPC_HDR];
  size_t hdr_off;
  uint8_t *out;                /* the reply body (the handler's buffer, taken over) */
  size_t out_len, out_off;
  size_t charged_in, charged_out; /* what this connection counts in s->in_bytes, s->out_bytes */
  int parked;                  /* waiting for in-flight room: armed for nothing (under s->mu) */
  int doomed;                  /* parked, and closed to break a deadlock over room (break_room_deadlock): the
                                  worker unpark_all hands it to closes it (set under s->mu while parked) */
  _Atomic uint64_t stall_ns;   /* since when a frame or a reply is half done (0: neither) */
  _Atomic uint64_t active_ns;  /* last request served */
  int close_after_out;         /* a reply to a wrong version: close once it is sent */
  int authed;                  /* the cluster-secret handshake is done, or there is no secret */
  struct mc_auth_srv auth;     /* its state until then (docs/security.md) */
  struct mc_mrpc_deferred *def; /* a request whose reply comes later (mc_mrpc_defer), or NULL */
};

/* A deferred reply (mc_mrpc_defer): shared by the connection and the code that will answer, freed by
 * whichever lets go last. `mu` guards every field. While the connection waits for it (WAITING) it is
 * armed for nothing, so no worker touches it; the answer arms it for EPOLLOUT, which hands it to one
 * worker that sends the reply. A connection closed first (stop, or an error before the wait) sets conn
 * to NULL, and the answer is then dropped. Lock order: def->mu before s->mu is never needed; arm() under
 * def->mu takes no other lock. */
enum def_state { DEF_SERVING, DEF_WAITING, DEF_READY };
struct mc_mrpc_deferred {
  pthread_mutex_t mu;
  int refs;
  enum def_state state;
  struct mc_mrpc_server *s;
  struct conn *conn; /* NULL once the connection is closed */
  uint16_t op;
  uint64_t id;
  int32_t status;
  struct mc_wbuf body;
};

/* The request a worker is running a handler for (mc_mrpc_defer needs it). */
static __thread struct {
  struct mc_mrpc_server *s;
  struct conn *c;
  const struct mc_mrpc_hdr *h;
} cur_req;

struct mc_mrpc_server {
  int ep, listen_fd, wake_fd;
  atomic_int stop;
  atomic_int owner;         /* the worker that polls the epoll set (-1: none) */
  _Atomic uint64_t busy_since;   /* when the polling worker started serving what it found (0: polling) */
  _Atomic uint64_t last_work_ns; /* the last time it found requests */
  atomic_int watcher;            /* a follower looks every FOLLOW_NS */
  atomic_int sleepers;           /* followers waiting on cv */
  unsigned wake_gen;             /* under mu */
  pthread_cond_t cv;
  atomic_int listen_paused; /* accept ran out of descriptors: re-armed by the periodic duty */
  _Atomic uint64_t next_duty_ns;
  struct mc_spin spin;
  mc_mrpc_handler handler;
  mc_mrpc_on_close on_close;
  void *ctx;
  int idle_timeout_s, nagle;
  int max_conns, nconns; /* nconns under mu */
  uint64_t max_inflight;
  _Atomic uint64_t in_bytes, out_bytes; /* large request frames, large replies: all connections */
  atomic_int nparked;
  _Atomic uint64_t last_refusal_log_ns, last_reply_log_ns;
  uint64_t stall_ns; /* a frame half received or a reply half sent for this long drops the peer */
  int nworkers;
  pthread_t workers[MAX_WORKERS];
  struct worker {
    struct mc_mrpc_server *s;
    int idx;
  } w[MAX_WORKERS];
  pthread_mutex_t mu; /* guards conns, wake_gen */
  struct conn *conns;
};

/* epoll_event.data.ptr of the listener and of the stop event (never confused with a struct conn *) */
static char listen_tag, wake_tag;

enum io { IO_IDLE, IO_SERVED, IO_WANT_OUT, IO_CLOSE, IO_PARK, IO_DEFER };

/* At most one line a second per kind: a flood must not flood the log too. */
static int log_due(_Atomic uint64_t *last) {
  uint64_t now = mc_now_ns(), prev = atomic_load(last);
  return now - prev >= 1000000000ull && atomic_compare_exchange_strong(last, &prev, now);
}

/* Moves a connection's share of pool (s->in_bytes or s->out_bytes) to n bytes; growing fails (0,
 * nothing changed) when the pool would pass max_inflight. 1 on success. */
static int charge(struct mc_mrpc_server *s, _Atomic uint64_t *pool, size_t *share, size_t n) {
  if (n > *share) {
    uint64_t add = n - *share, cur = atomic_fetch_add(pool, add);
    if (cur + add > s->max_inflight) {
      atomic_fetch_sub(pool, add);
      return 0;
    }
  } else if (n < *share) {
    atomic_fetch_sub(pool, *share - n);
  }
  *share = n;
  return 1;
}

static int arm(struct mc_mrpc_server *s, int fd, void *tag, uint32_t ev) {
  struct epoll_event e = {.events = ev | EPOLLONESHOT, .data.ptr = tag};
  MC_TSAN_RELEASE(tag); /* the worker that epoll_wait hands it to next sees what this one wrote */
  /* Once the re-arm takes effect, another worker may get the connection's event and close its fd while
   * this call is still returning; the kernel holds its own reference to the file, and this thread never
   * touches the connection after arming it. TSan's model of epoll_ctl(MOD) publishes nothing, so it would
   * report this call's use of the fd against that close: not recorded. */
  MC_TSAN_IGNORE_BEGIN();
  int rc = epoll_ctl(s->ep, EPOLL_CTL_MOD, fd, &e);
  MC_TSAN_IGNORE_END();
  if (!rc) return 0;
  LOG_WARN("master RPC: epoll_ctl: %s", strerror(errno));
  return -1;
}

/* Lets every connection waiting for in-flight room try again (each parks again if there is none). */
static void unpark_all(struct mc_mrpc_server *s) {
  if (!atomic_load(&s->nparked)) return;
  pthread_mutex_lock(&s->mu);
  for (struct conn *c = s->conns; c; c = c->next)
    if (c->parked) {
      c->parked = 0;
      atomic_fetch_sub(&s->nparked, 1);
      arm(s, c->fd, c, EPOLLIN);
    }
  pthread_mutex_unlock(&s->mu);
}

/* Lowers a connection's share of s->in_bytes to n (and lets connections waiting for room retry). */
static void uncharge_in(struct mc_mrpc_server *s, struct conn *c, size_t n) {
  if (n >= c->charged_in) return;
  charge(s, &s->in_bytes, &c->charged_in, n);
  unpark_all(s);
}

static void def_release(struct mc_mrpc_deferred *d) {
  pthread_mutex_lock(&d->mu);
  int last = --d->refs == 0;
  pthread_mutex_unlock(&d->mu);
  if (!last) return;
  mc_w_free(&d->body);
  pthread_mutex_destroy(&d->mu);
  mc_free(d);
}

struct mc_mrpc_deferred *mc_mrpc_defer(void) {
  struct conn *c = cur_req.c;
  if (!c || c->def) return NULL; /* not in a handler, or deferred already */
  struct mc_mrpc_deferred *d = mc_calloc(1, sizeof(*d));
  pthread_mutex_init(&d->mu, NULL);
  d->refs = 2; /* the connection's and the answerer's */
  d->state = DEF_SERVING;
  d->s = cur_req.s;
  d->conn = c;
  d->op = cur_req.h->op;
  d->id = cur_req.h->id;
  c->def = d;
  return d;
}

void mc_mrpc_deferred_reply(struct mc_mrpc_deferred *d, int32_t status, struct mc_wbuf *body) {
  pthread_mutex_lock(&d->mu);
  if (d->state != DEF_READY) {
    d->status = status;
    if (body) d->body = *body, *body = (struct mc_wbuf){0};
    int waiting = d->state == DEF_WAITING && d->conn;
    d->state = DEF_READY;
    if (waiting && arm(d->s, d->conn->fd, d->conn, EPOLLOUT))
      shutdown(d->conn->fd, SHUT_RDWR); /* cannot happen with a valid epoll set; the stop closes it */
  }
  pthread_mutex_unlock(&d->mu);
  if (body) mc_w_free(body);
  def_release(d);
}

/* Detaches a connection's deferred reply (the connection is closing, or the reply goes out now). */
static void def_detach(struct conn *c) {
  struct mc_mrpc_deferred *d = c->def;
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->conn = NULL;
  pthread_mutex_unlock(&d->mu);
  c->def = NULL;
  def_release(d);
}

static void conn_close(struct mc_mrpc_server *s, struct conn *c) {
  def_detach(c);
  epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
  pthread_mutex_lock(&s->mu);
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->nconns--;
  if (c->parked) atomic_fetch_sub(&s->nparked, 1);
  pthread_mutex_unlock(&s->mu);
  uncharge_in(s, c, 0);
  charge(s, &s->out_bytes, &c->charged_out, 0);
  if (s->on_close) s->on_close(s->ctx, c->conn_ctx);
  close(c->fd);
  mc_free(c->in);
  mc_free(c->out);
  mc_free(c);
}

/* Sends what is left of the pending reply (header, then body). 0 when all is sent, 1 when the socket is
 * full, -1 on error. */
static int flush_out(struct mc_mrpc_server *s, struct conn *c) {
  while (c->hdr_off < MC_MRPC_HDR || c->out_off < c->out_len) {
    struct iovec iov[2];
    int n = 0;
    if (c->hdr_off < MC_MRPC_HDR) iov[n++] = (struct iovec){c->hdr + c->hdr_off, MC_MRPC_HDR - c->hdr_off};
    if (c->out_off < c->out_len) iov[n++] = (struct iovec){c->out + c->out_off, c->out_len - c->out_off};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN ? 1 : -1;
    }
    size_t sent = (size_t)w, h = MC_MIN(sent, MC_MRPC_HDR - c->hdr_off);
    c->hdr_off += h;
    c->out_off += sent - h;
  }
  mc_free(c->out);
  c->out = NULL;
  c->out_len = c->out_off = 0;
  c->sending = 0;
  charge(s, &s->out_bytes, &c->charged_out, 0);
  return 0;
}

/* Sends one reply, taking over the body's buffer; whatever the socket does not take now is kept for
 * EPOLLOUT. 0, 1 (pending), -1. */
static int send_reply(struct mc_mrpc_server *s, struct conn *c, uint16_t op, uint64_t id, int32_t status,
                      struct mc_wbuf *body) {
  mc_mrpc_put_hdr(c->hdr, op, id, (uint32_t)body->len, status);
  c->hdr_off = 0;
  c->out = body->p;
  c->out_len = body->len;
  c->out_off = 0;
  c->sending = 1;
  *body = (struct mc_wbuf){0};
  return flush_out(s, c);
}

/* Sends n raw bytes (no frame header: the handshake's messages) the way send_reply sends a reply. */
static int send_raw(struct mc_mrpc_server *s, struct conn *c, const uint8_t *p, size_t n) {
  c->hdr_off = MC_MRPC_HDR;
  c->out = mc_malloc(n);
  memcpy(c->out, p, n);
  c->out_len = n;
  c->out_off = 0;
  c->sending = 1;
  return flush_out(s, c);
}

/* The cluster-secret handshake, before the first frame. IO_SERVED once done (frames may follow in
 * c->in), IO_IDLE while it needs more bytes, IO_WANT_OUT while its answer is unsent, IO_CLOSE. */
static enum io serve_auth(struct mc_mrpc_server *s, struct conn *c) {
  uint8_t out[MC_AUTH_CHALLENGE_MAX];
  size_t out_len = 0;
  long used = mc_auth_srv_feed(&c->auth, "master", c->in + c->lo, c->hi - c->lo, out, &out_len, &c->authed);
  if (used > 0) c->lo += (size_t)used;
  int rc = out_len ? send_raw(s, c, out, out_len) : 0;
  if (rc < 0 || (used < 0 && !rc)) return IO_CLOSE;
  if (used < 0) c->close_after_out = 1; /* the refusal goes out first */
  return rc ? IO_WANT_OUT : c->authed ? IO_SERVED : IO_IDLE;
}

/* Makes room towards `need` unread bytes in c->in: moves them to the front, grows the buffer (leaving
 * room for at least one more byte whenever need is not reached). 0, -1 (drop the connection), or 1: no
 * in-flight room for the growth now (nothing changed; the connection waits). */
static int in_room(struct mc_mrpc_server *s, struct conn *c, size_t need) {
  size_t have = c->hi - c->lo;
  if (c->lo && (c->lo + need > c->cap || !have)) {
    memmove(c->in, c->in + c->lo, have);
    c->lo = 0;
    c->hi = have;
  }
  if (need <= c->cap) return 0;
  /* grown as the bytes come (at most doubling), not to a size a header merely claims: a peer that
   * announces 256 MiB and sends little holds little memory until the stall limit drops it */
  size_t cap = MC_MIN(need, MC_MAX(2 * c->cap, (size_t)IN_KEEP));
  size_t before = c->charged_in;
  if (!charge(s, &s->in_bytes, &c->charged_in, cap > IN_KEEP ? cap - IN_KEEP : 0)) return 1;
  uint8_t *b = mc_try_malloc(cap);
  if (!b) {
    uncharge_in(s, c, before);
    LOG_WARN("master RPC: no memory for a %zu-byte request; dropping the connection", need);
    return -1;
  }
  memcpy(b, c->in + c->lo, have);
  mc_free(c->in);
  c->in = b;
  c->cap = cap;
  c->lo = 0;
  c->hi = have;
  return 0;
}

/* Runs one request. The reply is bounded by MC_MRPC_MAX_BODY (and by max_inflight); a larger one, or a
 * large one that does not fit in s->out_bytes now, is answered INVALID_PARAMS with no body. A large
 * reply stays counted there until it is sent (flush_out). */
static int32_t handle(struct mc_mrpc_server *s, struct conn *c, const struct mc_mrpc_hdr *h, const uint8_t *body,
                      struct mc_wbuf *reply) {
  if (h->version != MC_MRPC_VERSION) return MC_INVALID_VERSION;
  reply->max = (size_t)MC_MIN((uint64_t)MC_MRPC_MAX_BODY, s->max_inflight);
  cur_req.s = s, cur_req.c = c, cur_req.h = h;
  int32_t status = s->handler(s->ctx, &c->conn_ctx, c->auth.realm[0] ? c->auth.realm : NULL, h->op, body, h->len, reply);
  cur_req.c = NULL;
  if (c->def) { /* answered later, through the deferred reply: this body is not sent */
    mc_w_free(reply);
    return 0;
  }
  int over = !reply->err && reply->len > IN_KEEP && !charge(s, &s->out_bytes, &c->charged_out, reply->len);
  if (reply->err || over) {
    if (log_due(&s->last_reply_log_ns))
      LOG_WARN("master RPC: a reply to opcode %u %s; answered INVALID_PARAMS", (unsigned)h->op,
               reply->err ? "outgrew its bound (MC_MRPC_MAX_BODY or the in-flight limit)"
                          : "does not fit in the in-flight limit now");
    mc_w_free(reply);
    status = MC_INVALID_PARAMS;
  }
  return status;
}

/* Serves every complete request in c->in. IO_SERVED / IO_IDLE (none complete), IO_WANT_OUT, IO_CLOSE,
 * IO_PARK (a frame needs in-flight room that is not there now). */
static enum io serve_buffered(struct mc_mrpc_server *s, struct conn *c) {
  enum io res = IO_IDLE;
  if (!c->authed && (res = serve_auth(s, c)) != IO_SERVED) return res;
  res = IO_IDLE;
  while (c->hi - c->lo >= MC_MRPC_HDR) {
    struct mc_mrpc_hdr h;
    mc_mrpc_get_hdr(c->in + c->lo, &h);
    if (h.magic != MC_MRPC_MAGIC || h.len > MC_MRPC_MAX_BODY) {
      if (mc_auth_is_hello(c->in + c->lo, c->hi - c->lo)) { /* a client with a secret; we have none */
        uint8_t open[MC_AUTH_CHALLENGE_LEN] = {'M', 'C', 'A', 'S', 1};
        c->close_after_out = 1;
        return send_raw(s, c, open, sizeof(open)) > 0 ? IO_WANT_OUT : IO_CLOSE;
      }
      LOG_WARN_LIMITED("master RPC: dropping a connection that sent a malformed frame");
      return IO_CLOSE;
    }
    size_t need = MC_MRPC_HDR + (size_t)h.len;
    if (c->hi - c->lo < need) {
      int r = in_room(s, c, need);
      if (r) return r < 0 ? IO_CLOSE : IO_PARK;
      break;
    }
    const uint8_t *body = c->in + c->lo + MC_MRPC_HDR;
    struct mc_wbuf reply = {0};
    int32_t status = handle(s, c, &h, body, &reply);
    c->lo += need;
    if (c->def) return IO_DEFER; /* later requests of this connection wait for that reply */
    int rc = send_reply(s, c, h.op, h.id, status, &reply);
    res = IO_SERVED;
    if (rc < 0) return IO_CLOSE;
    if (h.version != MC_MRPC_VERSION) { /* answered, then closed: a client of another version learns why */
      if (!rc) return IO_CLOSE;
      c->close_after_out = 1;
      return IO_WANT_OUT;
    }
    if (rc) return IO_WANT_OUT;
  }
  if (c->lo != c->hi) {
    if (c->hi - c->lo < MC_MRPC_HDR && in_room(s, c, MC_MRPC_HDR) < 0) return IO_CLOSE; /* room for the header */
  } else {
    c->lo = c->hi = 0;
    if (c->cap > IN_KEEP) { /* a big frame grew it: give the memory back */
      uint8_t *b = mc_try_malloc(IN_INIT);
      if (b) {
        mc_free(c->in);
        c->in = b;
        c->cap = IN_INIT;
        uncharge_in(s, c, 0);
      }
    }
  }
  return res;
}

/* Everything a ready (or polled) connection allows now: pending reply, buffered requests, new bytes.
 * Leaves no complete request in c->in unless it returns IO_WANT_OUT or IO_CLOSE. */
static enum io conn_io(struct mc_mrpc_server *s, struct conn *c) {
  enum io res = IO_IDLE;
  uint64_t now = mc_now_ns(), st0 = atomic_load_explicit(&c->stall_ns, memory_order_relaxed);
  if (st0 && now > st0 && now - st0 > s->stall_ns) return IO_CLOSE; /* e.g. waited for in-flight room too long */
  if (c->doomed) return IO_CLOSE; /* (set while parked, under s->mu; unpark_all's arm handed it over) */
  if (c->def) { /* armed again only once its reply is ready (settle, mc_mrpc_deferred_reply) */
    struct mc_mrpc_deferred *d = c->def;
    pthread_mutex_lock(&d->mu);
    int ready = d->state == DEF_READY;
    int32_t status = d->status;
    struct mc_wbuf body = d->body;
    d->body = (struct mc_wbuf){0};
    pthread_mutex_unlock(&d->mu);
    if (!ready) return IO_DEFER;
    uint16_t op = d->op;
    uint64_t id = d->id;
    def_detach(c);
    atomic_store_explicit(&c->active_ns, now, memory_order_relaxed);
    int rc = send_reply(s, c, op, id, status, &body);
    if (rc < 0) return IO_CLOSE;
    if (rc) {
      atomic_store_explicit(&c->stall_ns, now, memory_order_relaxed);
      return IO_WANT_OUT;
    }
  }
  if (c->sending) {
    size_t before = c->hdr_off + c->out_off;
    int f = flush_out(s, c);
    if (f < 0) return IO_CLOSE;
    if (f > 0) {
      if (c->hdr_off + c->out_off != before) atomic_store_explicit(&c->stall_ns, mc_now_ns(), memory_order_relaxed);
      return IO_WANT_OUT;
    }
    if (c->close_after_out) return IO_CLOSE;
    atomic_store_explicit(&c->stall_ns, 0, memory_order_relaxed);
  }
  int progressed = 0, drained = 0;
  for (int rounds = 0;; rounds++) {
    /* serve what is complete; every way out of this loop passes here after the last read, so no
     * complete request is left behind for an event that will not come */
    enum io r = serve_buffered(s, c);
    if (r == IO_WANT_OUT) { /* a request was served; its reply's clock starts now */
      now = mc_now_ns();
      atomic_store_explicit(&c->active_ns, now, memory_order_relaxed);
      atomic_store_explicit(&c->stall_ns, now, memory_order_relaxed);
      return r;
    }
    if (r == IO_CLOSE) return r;
    if (r == IO_DEFER) { /* settle waits for the reply (or sends it, if it came already) */
      atomic_store_explicit(&c->active_ns, mc_now_ns(), memory_order_relaxed);
      return r;
    }
    if (r == IO_PARK) { /* its clock keeps running from the frame's last byte (or starts now) */
      now = mc_now_ns();
      if (res == IO_SERVED) atomic_store_explicit(&c->active_ns, now, memory_order_relaxed);
      if (!atomic_load_explicit(&c->stall_ns, memory_order_relaxed))
        atomic_store_explicit(&c->stall_ns, now, memory_order_relaxed);
      return r;
    }
    if (r == IO_SERVED) res = IO_SERVED;
    if (drained || rounds == 8) break; /* after 8 full reads the rest waits for its (level-triggered) event */
    size_t room = c->cap - c->hi;      /* > 0: serve_buffered leaves room for the frame it waits for */
    ssize_t got = recv(c->fd, c->in + c->hi, room, MSG_DONTWAIT);
    if (got == 0) return IO_CLOSE;
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return IO_CLOSE;
      break;
    }
    c->hi += (size_t)got;
    progressed = 1;
    drained = (size_t)got < room; /* the socket is empty: serve what came, then stop */
  }
  now = mc_now_ns();
  if (res == IO_SERVED) atomic_store_explicit(&c->active_ns, now, memory_order_relaxed);
  uint64_t st = atomic_load_explicit(&c->stall_ns, memory_order_relaxed);
  if (c->lo == c->hi) {
    if (st) atomic_store_explicit(&c->stall_ns, 0, memory_order_relaxed);
  } else if (!st || progressed) { /* the clock runs from the last byte that came */
    atomic_store_explicit(&c->stall_ns, now, memory_order_relaxed);
  }
  return res;
}

/* After conn_io: re-arm, or close. Returns 1 when the connection stays open. */
static int settle(struct mc_mrpc_server *s, struct conn *c, enum io r) {
  if (r == IO_CLOSE) {
    conn_close(s, c);
    return 0;
  }
  if (r == IO_DEFER) { /* armed for nothing until the reply is ready, then for EPOLLOUT */
    struct mc_mrpc_deferred *d = c->def;
    pthread_mutex_lock(&d->mu);
    int ready = d->state == DEF_READY;
    if (!ready) d->state = DEF_WAITING;
    int rc = ready ? arm(s, c->fd, c, EPOLLOUT) : 0;
    pthread_mutex_unlock(&d->mu);
    if (rc) {
      conn_close(s, c);
      return 0;
    }
    return 1;
  }
  if (r == IO_PARK) { /* armed again by unpark_all: when in-flight bytes are freed, or within a second */
    pthread_mutex_lock(&s->mu);
    c->parked = 1;
    atomic_fetch_add(&s->nparked, 1);
    pthread_mutex_unlock(&s->mu);
    return 1;
  }
  /* a reply left waiting has its stall clock running already (conn_io starts it) */
  if (arm(s, c->fd, c, r == IO_WANT_OUT ? EPOLLOUT : EPOLLIN)) { /* never left neither armed nor closed */
    conn_close(s, c);
    return 0;
  }
  return 1;
}

/* Wakes one sleeping follower (to become the watcher), or all of them (stop). */
static void wake_followers(struct mc_mrpc_server *s, int all) {
  pthread_mutex_lock(&s->mu);
  s->wake_gen++;
  if (all) pthread_cond_broadcast(&s->cv);
  else pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void accept_ready(struct mc_mrpc_server *s) {
  for (int i = 0; i < 64; i++) {
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        LOG_WARN("master RPC: cannot accept a connection: %s (retrying in a second)", strerror(errno));
        atomic_store(&s->listen_paused, 1);
        return; /* not re-armed: the periodic duty does that */
      }
      break; /* EAGAIN: none left */
    }
    pthread_mutex_lock(&s->mu);
    int full = s->nconns >= s->max_conns;
    if (!full) s->nconns++;
    pthread_mutex_unlock(&s->mu);
    if (full) { /* refused: closed at once, the peer sees the connection reset or closed */
      close(fd);
      if (log_due(&s->last_refusal_log_ns))
        LOG_WARN("master RPC: %d connections open (the limit, MC_MASTER_MAX_CONNECTIONS); refusing new ones",
                 s->max_conns);
      continue;
    }
    if (!s->nagle) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    struct conn *c = mc_calloc(1, sizeof(*c));
    c->fd = fd;
    c->authed = !mc_auth_enabled();
    c->in = mc_malloc(IN_INIT);
    c->cap = IN_INIT;
    uint64_t now = mc_now_ns();
    atomic_init(&c->active_ns, now);
    atomic_init(&c->stall_ns, now); /* the first frame must come within the stall limit */
    pthread_mutex_lock(&s->mu);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    pthread_mutex_unlock(&s->mu);
    struct epoll_event e = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e)) {
      LOG_WARN("master RPC: epoll_ctl: %s; dropping a connection", strerror(errno));
      conn_close(s, c);
    }
  }
  arm(s, s->listen_fd, &listen_tag, EPOLLIN);
}

static int by_stall(const void *a, const void *b) {
  uint64_t x = atomic_load_explicit(&(*(struct conn *const *)a)->stall_ns, memory_order_relaxed);
  uint64_t y = atomic_load_explicit(&(*(struct conn *const *)b)->stall_ns, memory_order_relaxed);
  return x < y ? -1 : x > y;
}

/* Connections waiting for in-flight room keep the room their partial frames hold (their bytes are in
 * their buffers). When every byte in flight is held by such waiting connections, none of them can ever
 * get more: frames that arrived interleaved (four 14 MB requests against a 32 MiB bound, each holding 8 MiB
 * and needing 14) would wait until the stall limit dropped them all. So the connection waiting longest
 * keeps its room, and the youngest other holders are closed until it can grow; their clients get a failed
 * call at once instead of after the stall limit, and the one kept is served. s->mu held; the number of
 * connections marked for closing. */
static int break_room_deadlock(struct mc_mrpc_server *s) {
  size_t n = 0, cap = 0;
  struct conn **v = NULL;
  uint64_t held = 0;
  for (struct conn *c = s->conns; c; c = c->next) {
    if (!c->parked || c->doomed || !c->charged_in) continue;
    if (n == cap) v = mc_realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));
    v[n++] = c;
    held += c->charged_in;
  }
  int closed = 0;
  uint64_t inflight = atomic_load(&s->in_bytes);
  if (n && held >= inflight) { /* nobody else holds room: nobody will give any back */
    qsort(v, n, sizeof(*v), by_stall);
    struct conn *keep = v[0];
    struct mc_mrpc_hdr h;
    mc_mrpc_get_hdr(keep->in + keep->lo, &h); /* (a parked connection waits for the rest of this frame) */
    size_t need = MC_MRPC_HDR + (size_t)h.len, next = MC_MIN(need, MC_MAX(2 * keep->cap, (size_t)IN_KEEP));
    uint64_t want = next > IN_KEEP && next - IN_KEEP > keep->charged_in ? next - IN_KEEP - keep->charged_in : 0;
    uint64_t room = s->max_inflight > inflight ? s->max_inflight - inflight : 0;
    for (size_t i = n - 1; i >= 1 && room < want; i--, closed++) {
      v[i]->doomed = 1;
      shutdown(v[i]->fd, SHUT_RDWR); /* readable at once: unpark_all's arm hands it to a worker */
      room += v[i]->charged_in;
    }
  }
  mc_free(v);
  return closed;
}

/* Once a second, by one worker: shut down connections stalled mid-frame or mid-reply for stall_ns,
 * or idle for longer than the idle timeout (the worker that next serves them sees the shutdown and
 * closes them), break a deadlock of connections waiting for in-flight room, and re-arm a listener paused
 * by a descriptor shortage. */
static void periodic_duty(struct mc_mrpc_server *s) {
  uint64_t now = mc_now_ns(), due = atomic_load(&s->next_duty_ns);
  if (now < due || !atomic_compare_exchange_strong(&s->next_duty_ns, &due, now + 1000000000ull)) return;
  uint64_t stall_ns = s->stall_ns, idle_ns = (uint64_t)s->idle_timeout_s * 1000000000ull;
  int stalled = 0, idle = 0, deadlocked = 0;
  pthread_mutex_lock(&s->mu);
  for (struct conn *c = s->conns; c; c = c->next) {
    uint64_t st = atomic_load_explicit(&c->stall_ns, memory_order_relaxed);
    uint64_t act = atomic_load_explicit(&c->active_ns, memory_order_relaxed);
    if (st && now - st > stall_ns) {
      stalled++;
      shutdown(c->fd, SHUT_RDWR);
    } else if (idle_ns && now > act && now - act > idle_ns) {
      idle++;
      shutdown(c->fd, SHUT_RDWR);
    }
  }
  if (atomic_load(&s->nparked)) deadlocked = break_room_deadlock(s);
  pthread_mutex_unlock(&s->mu);
  if (stalled)
    LOG_WARN("master RPC: dropping %d connection(s) silent since connecting, or stuck mid-frame or mid-reply, "
             "for %llu ms", stalled, (unsigned long long)(stall_ns / 1000000));
  if (idle) LOG_INFO("master RPC: closing %d connection(s) idle for %d s", idle, s->idle_timeout_s);
  if (deadlocked)
    LOG_WARN("master RPC: every in-flight byte (MC_MASTER_MAX_INFLIGHT_BYTES) is held by partial frames waiting for "
             "more; closing the %d youngest so that the oldest can finish", deadlocked);
  if (atomic_exchange(&s->listen_paused, 0)) arm(s, s->listen_fd, &listen_tag, EPOLLIN);
  unpark_all(s); /* waiting ones retry (and the stalled among them are closed) */
}

/* Serves one ready event. Returns the connection if it may be kept out of epoll and polled (it had
 * requests and nothing is pending), else NULL (re-armed or closed). */
static struct conn *serve_event(struct mc_mrpc_server *s, struct epoll_event *e, int may_hold) {
  if (e->data.ptr == &listen_tag) {
    accept_ready(s);
    return NULL;
  }
  if (e->data.ptr == &wake_tag) return NULL;
  struct conn *c = e->data.ptr;
  MC_TSAN_ACQUIRE(c); /* EPOLLONESHOT: the worker that armed it last is done with it (arm) */
  enum io r = conn_io(s, c);
  if (r == IO_SERVED && may_hold) return c;
  settle(s, c, r);
  return NULL;
}

/* Serves as the polling worker until another worker takes over (this one was busy too long) or stop. */
static void own(struct mc_mrpc_server *s, int me) {
  struct epoll_event ev[MAX_EVENTS];
  struct conn *held = NULL; /* polled directly, out of epoll, while spinning */
  int spinning = 0;
  unsigned polls = 0;
  uint64_t spin_end = 0;
  while (!atomic_load(&s->stop)) {
    periodic_duty(s);
    int work = 0;
    uint64_t stamp = 0; /* this iteration's busy_since, cleared only if still ours (a take-over may follow) */
    if (held) { /* the lone busy connection's next request, without epoll */
      atomic_store(&s->busy_since, stamp = mc_now_ns());
      enum io r = conn_io(s, held);
      work = r == IO_SERVED;
      if (r != IO_SERVED && r != IO_IDLE) {
        settle(s, held, r);
        held = NULL;
      }
    }
    /* while a connection is held, the others are looked at every fourth round (served or not): a
     * syscall less per request for the lone busy client, a few microseconds later for the rest */
    int n = 0;
    if (!held || ++polls % 4 == 0) n = epoll_wait(s->ep, ev, MAX_EVENTS, spinning ? 0 : 1000);
    if (n < 0 && errno != EINTR) { /* cannot happen with a valid epoll fd; never spin on it */
      LOG_ERROR("master RPC: epoll_wait: %s", strerror(errno));
      usleep(10000);
    }
    uint64_t now = mc_now_ns();
    if (n > 0) {
      /* busy_since and last_work_ns before looking for a watcher, all sequentially consistent: a
       * follower giving up watching or going to sleep stores its state and then reads busy_since, so
       * either it sees this batch or this check sees it gone and wakes a sleeper */
      atomic_store(&s->busy_since, stamp = now);
      atomic_store(&s->last_work_ns, now);
      if (!atomic_load(&s->watcher) && atomic_load(&s->sleepers))
        wake_followers(s, 0); /* nobody would notice if this batch turns out slow */
      if (held) { /* others are ready too: stop polling that one */
        settle(s, held, IO_IDLE);
        held = NULL;
      }
      for (int i = 0; i < n; i++) {
        struct conn *c = serve_event(s, &ev[i], n == 1);
        if (c) held = c;
      }
      work = 1;
      now = mc_now_ns();
    }
    if (work) {
      atomic_store_explicit(&s->last_work_ns, now, memory_order_relaxed);
      if (!spinning && mc_spin_ns()) spinning = mc_spin_try(&s->spin);
      else if (spinning) mc_spin_done(&s->spin, 1);
      spin_end = now + mc_spin_ns();
    } else if (spinning && now >= spin_end) {
      mc_spin_done(&s->spin, 0);
      spinning = 0;
    }
    if (stamp) atomic_compare_exchange_strong(&s->busy_since, &stamp, 0); /* not a new owner's stamp */
    int lost = atomic_load(&s->owner) != me; /* taken over while this worker was busy */
    if (held && (!spinning || lost)) {
      settle(s, held, IO_IDLE);
      held = NULL;
    }
    if (lost) return;
    if (spinning && !work) sched_yield();
  }
  if (held) settle(s, held, IO_IDLE); /* closed by stop */
}

/* Waits until this worker should poll: nobody does, or the polling worker has been busy serving for
 * longer than TAKEOVER_NS (a slow request must not hold up the other connections). One follower, the
 * watcher, looks every FOLLOW_NS while requests come; the others sleep until the owner finds the watcher
 * gone (it took over, or slept through a quiet second) and wakes one of them. Returns 0 on stop. */
static int follow(struct mc_mrpc_server *s, int me) {
  int watching = 0;
  for (;;) {
    if (atomic_load(&s->stop)) break;
    int o = atomic_load(&s->owner);
    uint64_t now = mc_now_ns(), busy = atomic_load_explicit(&s->busy_since, memory_order_relaxed);
    int due = o < 0 || (busy && now > busy && now - busy > TAKEOVER_NS);
    if (due && atomic_compare_exchange_strong(&s->owner, &o, me)) {
      if (watching) atomic_store(&s->watcher, 0);
      return 1;
    }
    if (!watching) {
      int free_slot = 0;
      watching = atomic_compare_exchange_strong(&s->watcher, &free_slot, 1);
    }
    if (watching && now - atomic_load_explicit(&s->last_work_ns, memory_order_relaxed) <= 1000000000ull) {
      struct timespec ts = {0, FOLLOW_NS};
      nanosleep(&ts, NULL);
      continue;
    }
    if (watching) { /* a quiet second: sleep too, until the owner finds requests again */
      atomic_store(&s->watcher, 0);
      watching = 0;
      if (atomic_load(&s->busy_since)) continue; /* a batch began meanwhile: watch it (see own()) */
    }
    pthread_mutex_lock(&s->mu);
    unsigned gen = s->wake_gen;
    atomic_fetch_add(&s->sleepers, 1);
    /* after counting in: a batch that began unwatched before the owner could see this sleeper is seen
     * here (with a watcher present, sleeping is right: the owner wakes a sleeper once it is gone) */
    while (gen == s->wake_gen && !atomic_load(&s->stop) && !(atomic_load(&s->busy_since) && !atomic_load(&s->watcher)))
      pthread_cond_wait(&s->cv, &s->mu);
    atomic_fetch_sub(&s->sleepers, 1);
    pthread_mutex_unlock(&s->mu);
  }
  if (watching) atomic_store(&s->watcher, 0);
  return 0;
}

static void *worker_main(void *arg) {
  mc_thread_name("mc-rpc");
  struct mc_mrpc_server *s = ((struct worker *)arg)->s;
  int me = ((struct worker *)arg)->idx;
  while (follow(s, me)) own(s, me);
  return NULL;
}

/* A positive integer from the environment within [min, max], else def (a bad value is logged). */

struct mc_mrpc_server *mc_mrpc_server_start_opts(const char *bind_ip, uint16_t port, mc_mrpc_handler h,
                                                 mc_mrpc_on_close on_close, void *ctx,
                                                 const struct mc_mrpc_server_opts *o, uint16_t *port_out) {
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
  s->listen_fd = fd;
  int idle = o ? o->idle_timeout_s : 0;
  s->idle_timeout_s = idle > 0 ? idle : idle < 0 ? 0 : DEFAULT_IDLE_S;
  s->max_conns = o && o->max_conns > 0 ? o->max_conns : (int)mc_knob_long(MC_KNOB_MASTER_MAX_CONNECTIONS);
  s->max_inflight = o && o->max_inflight ? o->max_inflight
                                         : (uint64_t)mc_knob_long(MC_KNOB_MASTER_MAX_INFLIGHT_BYTES);
  s->nagle = o && o->nagle;
  s->stall_ns = (uint64_t)(o && o->stall_ms > 0 ? o->stall_ms : 10000) * 1000000ull;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int n = o && o->threads > 0 ? o->threads : (int)MC_MIN(cpus > 0 ? cpus : 1, 16);
  s->nworkers = MC_MIN(n, MAX_WORKERS);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  atomic_init(&s->owner, -1);
  s->ep = epoll_create1(EPOLL_CLOEXEC);
  s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) flags = fcntl(fd, F_SETFL, flags | O_NONBLOCK); /* accept4 must not block */
  struct epoll_event le = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = &listen_tag};
  struct epoll_event we = {.events = EPOLLIN, .data.ptr = &wake_tag}; /* level-triggered: wakes every worker */
  if (s->ep < 0 || s->wake_fd < 0 || flags < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &le) ||
      epoll_ctl(s->ep, EPOLL_CTL_ADD, s->wake_fd, &we)) {
    LOG_ERROR("master RPC: cannot set up the event loop: %s", strerror(errno));
    s->nworkers = 0;
    mc_mrpc_server_stop(s);
    return NULL;
  }
  if (port_out) *port_out = mc_sock_local_port(fd);
  for (int i = 0; i < s->nworkers; i++) {
    s->w[i] = (struct worker){s, i};
    if (pthread_create(&s->workers[i], NULL, worker_main, &s->w[i])) {
      LOG_ERROR("master RPC: cannot start worker thread %d", i);
      s->nworkers = i;
      mc_mrpc_server_stop(s);
      return NULL;
    }
  }
  mc_auth_note_open(o && o->name ? o->name : "master RPC");
  return s;
}

struct mc_mrpc_server *mc_mrpc_server_start(const char *bind_ip, uint16_t port, mc_mrpc_handler h,
                                            mc_mrpc_on_close on_close, void *ctx, uint16_t *port_out) {
  return mc_mrpc_server_start_opts(bind_ip, port, h, on_close, ctx, NULL, port_out);
}

void mc_mrpc_server_stop(struct mc_mrpc_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  if (s->wake_fd >= 0) {
    uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof(one)) < 0) LOG_WARN("master RPC: eventfd: %s", strerror(errno));
  }
  wake_followers(s, 1);
  for (int i = 0; i < s->nworkers; i++) pthread_join(s->workers[i], NULL);
  while (s->conns) conn_close(s, s->conns); /* no worker runs any more */
  close(s->listen_fd);
  if (s->wake_fd >= 0) close(s->wake_fd);
  if (s->ep >= 0) close(s->ep);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  mc_free(s);
}
