/* TCP transport: per peer up to MC_TCP_LANES_PER_PEER persistent connections ("lanes"). Each lane has a
 * sender thread that pipelines requests (queued requests go out in groups, headers and payloads in one
 * sendmsg) and a receiver thread that reads status frames in order, so a WRITE is COMPLETED only after
 * the target acknowledged that the bytes landed (v2 framing). The server coalesces the acknowledgements
 * of back-to-back WRITEs. The server
 * side validates every request against the registered buffers and drains rejected payloads so the
 * connection stays usable. It must never write outside a registered, remotely accessible buffer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "net/codec.h"
#include "net/conn_server.h"
#include "net/sock.h"
#include "te/engine_internal.h"

extern const struct mc_transport_ops mc_tcp_transport_ops;

#define HDR_LEN 24
#define OP_V2 0x80
#define STATUS_MAGIC 0x4D435456ull
#define STATUS_OK 0
#define STATUS_REJECTED 1
#define POLL_SLICE_MS 500
#define MAX_LANES 16
#define AUTH_TIMEOUT_MS 2000 /* the cluster-secret handshake of a new connection (docs/security.md) */
#define GRP_MAX 32
#define GRP_BYTES (1u << 20)

struct tcp_tp;

/* Locks. tcp_tp.mu guards the peer list only (peers are never freed while the transport runs) and is
 * never held with a lane's mu. Each lane's mu guards the lane's state below, and cv announces every
 * change of it; the I/O itself runs without the lock:
 *   - under mu: q_*, f_*, fd (replaced only under mu; a thread that copied it uses its copy and checks
 *     l->fd == copy before acting on the lane), alive, stop, started, direct, recovering, ngrp;
 *   - owned by the sender between setting ngrp and clearing it (under mu): grp, grp_len, hdrs — the
 *     receiver's recovery waits for ngrp == 0 before it takes the in-flight list;
 *   - owned by the connection's one reader: stbuf and st_have, read by the receiver thread, or by the
 *     submitting thread of direct_io while `direct` is set (the lane is idle then: nothing in flight, so
 *     the receiver is parked on cv); both reset st_have under mu when the connection is lost;
 *   - atomics, no lock: progress_ns (bumped by whoever moves bytes), timed_out (set by the sender before
 *     its shutdown, consumed by the receiver's recovery or cleared by the next connect).
 * A slice is on exactly one of q (to send) and f (sent, awaiting its status), or handed to recover() /
 * mc_slice_done() after it left both. */
struct lane {
  struct tcp_peer *peer;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct mc_slice *q_head, *q_tail; /* to send */
  struct mc_slice *f_head, *f_tail; /* sent (or being sent), awaiting status, in wire order */
  int fd, alive, stop, started;
  int direct; /* a submitting thread owns the connection (direct_io): the lane threads keep off */
  struct mc_spin direct_spin; /* direct_io's reply waits */
  int recovering; /* the receiver is settling the slices of a lost connection: no reconnect yet */
  atomic_int timed_out; /* the sender gave this connection up at the no-progress deadline (see recover) */
  atomic_uint_least64_t progress_ns;
  pthread_t snd, rcv;
  struct mc_slice *grp[GRP_MAX]; /* the group the sender is putting on the wire */
  uint64_t grp_len[GRP_MAX];     /* payload bytes of each member */
  int ngrp;
  uint8_t hdrs[GRP_MAX][HDR_LEN];
  uint8_t stbuf[8 * 64]; /* status frames of consecutive WRITEs read ahead by the receiver */
  size_t st_have;
};

struct tcp_peer {
  struct tcp_peer *next;
  struct tcp_tp *tp;
  char host[256];
  uint16_t port;
  atomic_uint rr;
  struct lane lanes[MAX_LANES];
};

struct tcp_tp {
  struct mc_transport base;
  uint16_t port;
  atomic_int stop;
  struct mc_conn_server *srv; /* the data port: one thread per connection running conn_main */
  pthread_mutex_t mu; /* guards peers */
  struct tcp_peer *peers;
  int nlanes, io_timeout_ms, connect_timeout_ms, direct;
  size_t chunk;
  uint64_t split; /* MC_TCP_SPLIT_SIZE: requests above this many bytes are cut into pieces (0 = never) */
};

/* ---------------------------------------------------------------- progress-aware I/O */

/* Receives at least min and at most max bytes (*got says how many, also on failure) on a socket with a
 * short SO_RCVTIMEO; fails after io_timeout without progress on the connection (either direction counts,
 * through *progress), or when *stop is set. idle_ok: waiting for the first byte is no lack of progress.
 * With sp, the wait for the first bytes starts with an adaptive busy poll (net/sock.h). */
static int recv_atleast(int fd, void *buf, size_t min, size_t max, size_t *got, atomic_uint_least64_t *progress,
                        int timeout_ms, atomic_int *stop, int idle_ok, struct mc_spin *sp) {
  char *p = buf;
  size_t g = 0;
  int rc = 0;
  if (sp && min) {
    long first = mc_sock_spin_recv(fd, p, max, 0, sp);
    if (first > 0) {
      g = (size_t)first;
      atomic_store(progress, mc_now_ns());
    } else if (first != -EAGAIN) {
      rc = (int)first;
    }
  }
  while (!rc && g < min) {
    ssize_t r = recv(fd, p + g, max - g, 0);
    if (r > 0) {
      g += (size_t)r;
      atomic_store(progress, mc_now_ns());
    } else if (r == 0) {
      rc = -EPIPE;
    } else if (errno != EINTR && errno != EAGAIN) {
      rc = -errno;
    } else if (errno == EAGAIN && stop && atomic_load(stop)) {
      rc = -ECANCELED;
    } else if (errno == EAGAIN && !(idle_ok && g == 0) &&
               mc_now_ns() - atomic_load(progress) > (uint64_t)timeout_ms * 1000000ull) {
      rc = -ETIMEDOUT;
    }
  }
  *got = g;
  return rc;
}

/* Receives exactly n bytes (recv_atleast with min = max = n). */
static int recv_progress(int fd, void *buf, size_t n, atomic_uint_least64_t *progress, int timeout_ms,
                         atomic_int *stop, int idle_ok, struct mc_spin *sp) {
  size_t got;
  return recv_atleast(fd, buf, n, n, &got, progress, timeout_ms, stop, idle_ok, sp);
}

/* Sends iov fully, at most `chunk` bytes per sendmsg so that progress is recorded while a large payload
 * goes out; *sent counts bytes put on the wire. iov is consumed. */
static int send_progress(int fd, struct iovec *iov, int cnt, size_t chunk, atomic_uint_least64_t *progress,
                         uint64_t *sent) {
  while (cnt > 0) {
    struct iovec part[2 * GRP_MAX];
    int pc = 0;
    size_t budget = chunk;
    for (int i = 0; i < cnt && pc < (int)MC_ARRAY_LEN(part) && budget; i++) {
      size_t l = MC_MIN(iov[i].iov_len, budget);
      part[pc].iov_base = iov[i].iov_base;
      part[pc++].iov_len = l;
      budget -= l;
    }
    uint64_t before = *sent;
    int rc = mc_sock_writev_full(fd, part, pc, sent);
    size_t w = (size_t)(*sent - before);
    atomic_store(progress, mc_now_ns());
    if (rc) return rc;
    cnt = mc_iov_advance(&iov, cnt, w);
  }
  return 0;
}

/* ---------------------------------------------------------------- server side */

static int drain(int fd, uint64_t n, atomic_uint_least64_t *progress, int timeout_ms, atomic_int *stop) {
  char sink[65536];
  while (n) {
    size_t k = (size_t)MC_MIN(n, sizeof(sink));
    int rc = recv_progress(fd, sink, k, progress, timeout_ms, stop, 0, NULL);
    if (rc) return rc;
    n -= k;
  }
  return 0;
}

/* Per-connection server state. WRITE status frames are held back while more requests are already
 * waiting: they go out together when the next read would block, or with the next READ reply (the
 * client reads them in order). Requests are read through a small read-ahead buffer: a header, a small
 * payload and the headers queued behind them usually come with one recv, and whether anything is
 * queued is then known without asking the socket (a syscall costs ~1 us in a VM). Larger payloads go
 * straight from the socket to their destination once the buffered part is placed. */
#define RA_CAP ((64u << 10) + 256) /* a header and up to a 64 KiB payload, with room for the next headers */
#define RA_SMALL 4096u               /* after a larger WRITE: its successor's payload goes straight in, too */
struct pend {
  uint8_t buf[8 * 256];
  int n;
  char *bounce; /* BOUNCE bytes, allocated on first use: staging for cold destination pages */
  struct mc_spin spin; /* waits for the next request */
  uint8_t *ra;  /* RA_CAP bytes; unread: [lo, hi) */
  size_t lo, hi;
  size_t lim;   /* bytes one recv may read ahead: RA_CAP, or RA_SMALL while WRITEs come larger than that */
  int drained; /* the last recv into ra left room: nothing more was queued at that moment */
};

/* Makes ra hold at least n (<= RA_CAP) unread bytes. idle: between requests (waiting for the first
 * byte is no lack of progress, and the wait starts with the busy poll). */
static int ra_fill(struct tcp_tp *tp, int fd, struct pend *pd, size_t n, atomic_uint_least64_t *progress, int idle) {
  size_t have = pd->hi - pd->lo;
  if (have >= n) return 0;
  if (pd->lo + n > RA_CAP) {
    memmove(pd->ra, pd->ra + pd->lo, have);
    pd->lo = 0;
    pd->hi = have;
  }
  size_t got = 0, max = MC_MIN(RA_CAP - pd->hi, MC_MAX(pd->lim, n - have));
  idle = idle && !have;
  int rc = recv_atleast(fd, pd->ra + pd->hi, n - have, max, &got, progress, tp->io_timeout_ms, &tp->stop, idle,
                        idle ? &pd->spin : NULL);
  pd->hi += got;
  pd->drained = got < max;
  return rc;
}

/* Whether another request is already waiting: buffered, or (when the last recv filled the buffer, so
 * the socket may hold more) found by one non-blocking recv into the buffer. */
static int more_queued(int fd, struct pend *pd, atomic_uint_least64_t *progress) {
  if (pd->hi > pd->lo) return 1;
  pd->lo = pd->hi = 0;
  if (pd->drained) return 0;
  ssize_t r = recv(fd, pd->ra, pd->lim, MSG_DONTWAIT);
  if (r > 0) {
    pd->hi = (size_t)r;
    pd->drained = pd->hi < pd->lim;
    atomic_store(progress, mc_now_ns());
    return 1;
  }
  pd->drained = r < 0 && errno == EAGAIN; /* EOF or an error: the next read reports it */
  return 0;
}

/* Payload into/out of registered memory whose pages this process has not touched yet (prefault.c)
 * goes through a bounce buffer and process_vm_*v on our own pid: no user page fault per 4 KiB. */
#define BOUNCE (256u << 10)

static int recv_cold(int fd, uint64_t addr, uint64_t size, struct pend *pd, atomic_uint_least64_t *progress,
                     int timeout_ms, atomic_int *stop) {
  if (!size) return 0;
  if (!pd->bounce) pd->bounce = mc_malloc(BOUNCE);
  for (uint64_t off = 0; off < size;) {
    size_t k = (size_t)MC_MIN(size - off, BOUNCE);
    int rc = recv_progress(fd, pd->bounce, k, progress, timeout_ms, stop, 0, NULL);
    if (!rc) rc = mc_vm_copy_raw(mc_self_pid(), OPCODE_WRITE, pd->bounce, addr + off, k);
    if (rc) return rc;
    off += k;
  }
  return 0;
}

static int send_cold(int fd, uint64_t addr, uint64_t size, struct pend *pd) {
  if (!pd->bounce) pd->bounce = mc_malloc(BOUNCE);
  for (uint64_t off = 0; off < size;) {
    size_t k = (size_t)MC_MIN(size - off, BOUNCE);
    int rc = mc_vm_copy_raw(mc_self_pid(), OPCODE_READ, pd->bounce, addr + off, k);
    if (!rc) rc = mc_sock_write_full(fd, pd->bounce, k);
    if (rc) return rc;
    off += k;
  }
  return 0;
}

static int flush_pend(int fd, struct pend *pd) {
  if (!pd->n) return 0;
  int rc = mc_sock_write_full(fd, pd->buf, (size_t)pd->n * 8);
  pd->n = 0;
  return rc;
}
/* Replies to a READ, and with it to the READs read ahead right behind it (each a warm, registered
 * range), and every reply (statuses and payloads, in
 * order, after the WRITE statuses still held back) goes out in one writev. A READ that is cold, rejected
 * or would make the group too big is left for the next round. b: the first READ's pin (NULL: rejected),
 * released here like the others. */
#define RD_GROUP 16
#define RD_GROUP_BYTES (256u << 10)
#define RD_GROUP_ITEM (32u << 10) /* larger replies gain nothing from sharing a writev (measured at 64 KiB) */
static int serve_reads(struct tcp_tp *tp, int fd, struct pend *pd, struct mc_buf *b, int cold, uint64_t addr,
                       uint64_t size) {
  struct mc_buf *pin[RD_GROUP] = {b};
  uint64_t ad[RD_GROUP] = {addr}, sz[RD_GROUP] = {size}, bytes = size;
  int m = 1;
  if (b && !cold && size <= RD_GROUP_ITEM) {
    while (m < RD_GROUP && pd->hi - pd->lo >= HDR_LEN) { /* the READs already read ahead */
      const uint8_t *x = pd->ra + pd->lo;
      uint64_t l = mc_le_get64(x), a = mc_le_get64(x + 8);
      if (x[16] != (OPCODE_READ | OP_V2) || l > RD_GROUP_ITEM || l > RD_GROUP_BYTES - bytes) break;
      struct mc_buf *bb = mc_engine_pin_range(tp->base.eng, a, l);
      if (bb && !mc_buf_warm(bb, a, l)) {
        mc_engine_unpin(bb);
        bb = NULL;
      }
      if (!bb) break;
      pin[m] = bb, ad[m] = a, sz[m] = l, bytes += l, m++;
      pd->lo += HDR_LEN;
    }
  }
  mc_le_put64(pd->buf + 8 * pd->n++, (STATUS_MAGIC << 32) | (b ? STATUS_OK : STATUS_REJECTED));
  uint8_t st[RD_GROUP][8];
  struct iovec iov[2 * RD_GROUP];
  int c = 0;
  iov[c++] = (struct iovec){pd->buf, (size_t)pd->n * 8};
  /* never hand the kernel an unvalidated address, even with length 0 */
  if (b && !cold) iov[c++] = (struct iovec){(void *)(uintptr_t)addr, size};
  for (int i = 1; i < m; i++) {
    mc_le_put64(st[i], (STATUS_MAGIC << 32) | STATUS_OK);
    iov[c++] = (struct iovec){st[i], 8};
    iov[c++] = (struct iovec){(void *)(uintptr_t)ad[i], sz[i]};
  }
  int rc = mc_sock_writev_full(fd, iov, c, NULL);
  if (!rc && cold) rc = send_cold(fd, addr, size, pd);
  pd->n = 0;
  for (int i = 0; i < m; i++)
    if (pin[i]) mc_engine_unpin(pin[i]);
  return rc;
}

/* A WRITE's payload: the part already read ahead first, the rest straight from the socket into its
 * destination (b NULL: rejected, the payload is consumed and dropped). */
static int recv_write(struct tcp_tp *tp, int fd, struct pend *pd, struct mc_buf *b, int cold, uint64_t addr,
                      uint64_t size, atomic_uint_least64_t *progress) {
  uint64_t k = MC_MIN(size, (uint64_t)(pd->hi - pd->lo));
  int rc = 0;
  if (k && b) {
    if (cold) rc = mc_vm_copy_raw(mc_self_pid(), OPCODE_WRITE, pd->ra + pd->lo, addr, k);
    else memcpy((void *)(uintptr_t)addr, pd->ra + pd->lo, k);
  }
  pd->lo += k;
  pd->lim = size > RA_CAP - HDR_LEN ? RA_SMALL : RA_CAP; /* by this WRITE's size, not by what was buffered */
  if (rc || k == size) return rc;
  pd->drained = 0; /* what follows the payload has not been looked at */
  addr += k, size -= k;
  return cold ? recv_cold(fd, addr, size, pd, progress, tp->io_timeout_ms, &tp->stop)
         : b  ? recv_progress(fd, (void *)(uintptr_t)addr, size, progress, tp->io_timeout_ms, &tp->stop, 0, NULL)
              : drain(fd, size, progress, tp->io_timeout_ms, &tp->stop);
}

/* Serves one request; returns 0 to keep the connection, negative to drop it. */
static int serve_one(struct tcp_tp *tp, int fd, atomic_uint_least64_t *progress, struct pend *pd) {
  if (pd->n && (!more_queued(fd, pd, progress) || pd->n == 256)) {
    int frc = flush_pend(fd, pd);
    if (frc) return frc;
  }
  if (pd->lo == pd->hi) pd->lo = pd->hi = 0;
  int rc = ra_fill(tp, fd, pd, HDR_LEN, progress, 1);
  if (rc) return rc;
  const uint8_t *h = pd->ra + pd->lo;
  uint64_t size = mc_le_get64(h), addr = mc_le_get64(h + 8);
  int op = h[16] & 0x7f, v2 = h[16] & OP_V2;
  if (!v2 || op > OPCODE_WRITE) {
    LOG_WARN_LIMITED("tcp: dropping a connection that speaks an unsupported framing (opcode byte 0x%02x)", h[16]);
    return -EPROTO;
  }
  pd->lo += HDR_LEN;
  struct mc_buf *b = mc_engine_pin_range(tp->base.eng, addr, size);
  if (!b)
    LOG_WARN_LIMITED("tcp: rejected %s of %llu bytes at 0x%llx: outside memory registered for remote access",
                     op == OPCODE_WRITE ? "write" : "read", (unsigned long long)size, (unsigned long long)addr);
  int cold = b && !mc_buf_warm(b, addr, size);
  if (op == OPCODE_WRITE) {
    rc = recv_write(tp, fd, pd, b, cold, addr, size, progress);
    if (!rc) mc_le_put64(pd->buf + 8 * pd->n++, (STATUS_MAGIC << 32) | (b ? STATUS_OK : STATUS_REJECTED));
    if (b) mc_engine_unpin(b);
    return rc;
  }
  pd->lim = RA_CAP;
  return serve_reads(tp, fd, pd, b, cold, addr, size);
}

static void conn_main(void *arg, int fd) {
  struct tcp_tp *tp = arg;
  atomic_uint_least64_t progress;
  atomic_init(&progress, mc_now_ns());
  if (mc_auth_server(fd, "te-data", AUTH_TIMEOUT_MS)) return; /* docs/security.md; refusals logged there */
  struct pend pd = {.n = 0, .bounce = NULL, .ra = mc_malloc(RA_CAP), .lim = RA_CAP};
  while (!atomic_load(&tp->stop) && serve_one(tp, fd, &progress, &pd) == 0) {
  }
  mc_free(pd.ra);
  mc_free(pd.bounce);
}

static void conn_accepted(void *arg, int fd) {
  struct tcp_tp *tp = arg;
  mc_sock_set_timeouts(fd, POLL_SLICE_MS, tp->io_timeout_ms);
}

/* ---------------------------------------------------------------- client side */

static void q_push(struct mc_slice **h, struct mc_slice **t, struct mc_slice *s) {
  s->next = NULL;
  if (*t) (*t)->next = s;
  else *h = s;
  *t = s;
}

static struct mc_slice *q_pop(struct mc_slice **h, struct mc_slice **t) {
  struct mc_slice *s = *h;
  if (s) {
    *h = s->next;
    if (!*h) *t = NULL;
  }
  return s;
}

static void *sender_main(void *arg);
static void *receiver_main(void *arg);

/* Starts the lane's sender and receiver on first use. l->mu held. */
static void lane_start(struct lane *l) {
  if (l->started) return;
  l->started = 1;
  pthread_create(&l->snd, NULL, sender_main, l);
  pthread_create(&l->rcv, NULL, receiver_main, l);
}

/* Connection lost: each inflight slice is retried once on a fresh connection if it is a READ or no byte
 * of it was sent; otherwise it fails. No slice is retried when the connection was given up at the
 * no-progress deadline: a peer that did not answer for MC_TCP_IO_TIMEOUT_MS (frozen, or its host cut
 * off) is not expected to answer a new connection sooner, and the retry would add a connect timeout
 * (and another no-progress wait) before the caller can fail over; the retry is for connections that
 * broke (a reset, a peer that closed an idle connection). The sender reconnects (started here if
 * direct_io alone used the lane so far). Lane mu NOT held. */
static void recover(struct lane *l, struct mc_slice *list, int timed_out) {
  struct mc_slice *retry_h = NULL, *retry_t = NULL;
  while (list) {
    struct mc_slice *s = list;
    list = s->next;
    if (s->retries == 0 && (s->opcode == OPCODE_READ || s->sent == 0) && !l->stop && !timed_out) {
      s->retries++;
      s->sent = 0;
      q_push(&retry_h, &retry_t, s);
    } else {
      mc_slice_done(s, 0, 0);
    }
  }
  if (!retry_h) return;
  pthread_mutex_lock(&l->mu);
  lane_start(l);
  retry_t->next = l->q_head; /* retries go first */
  l->q_head = retry_h;
  if (!l->q_tail) l->q_tail = retry_t;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

/* Fails every queued slice (the peer cannot be reached). l->mu held; released and re-taken. */
static void fail_queue(struct lane *l) {
  struct mc_slice *list = l->q_head;
  l->q_head = l->q_tail = NULL;
  pthread_mutex_unlock(&l->mu);
  while (list) {
    struct mc_slice *s = list;
    list = s->next;
    mc_slice_done(s, 0, 0);
  }
  pthread_mutex_lock(&l->mu);
}

static int lane_connect(struct lane *l) {
  struct tcp_peer *p = l->peer;
  pthread_mutex_unlock(&l->mu);
  int fd = mc_sock_connect(p->host, p->port, p->tp->connect_timeout_ms), auth = 0;
  if (fd >= 0 && (auth = mc_auth_client(fd, "te-data", p->tp->connect_timeout_ms))) {
    close(fd);
    fd = auth;
  }
  pthread_mutex_lock(&l->mu);
  if (fd < 0) {
    LOG_WARN("tcp: cannot connect to %s:%u: %s", p->host, p->port,
             auth == -EACCES ? "the cluster-secret handshake failed" : strerror(-fd));
    return -1;
  }
  mc_sock_set_timeouts(fd, POLL_SLICE_MS, p->tp->io_timeout_ms);
  l->fd = fd;
  l->alive = 1;
  atomic_store(&l->timed_out, 0); /* a flag the last recovery did not consume belongs to a closed connection */
  atomic_store(&l->progress_ns, mc_now_ns());
  pthread_cond_broadcast(&l->cv);
  return 0;
}

static int in_flight(struct lane *l, struct mc_slice *s) {
  for (struct mc_slice *x = l->f_head; x; x = x->next)
    if (x == s) return 1;
  return 0;
}

/* After a failed send: records how much of each group member went out (for the retry rule). Only
 * slices still in flight are touched; the receiver may have completed and freed the others. mu held. */
static void attribute_sent(struct lane *l, uint64_t sent) {
  for (int i = 0; i < l->ngrp; i++) {
    struct mc_slice *s = l->grp[i];
    uint64_t want = HDR_LEN + l->grp_len[i], k = MC_MIN(sent, want);
    if (in_flight(l, s)) s->sent = k;
    sent -= k;
  }
}

/* Sends the group's headers and payloads with as few sendmsg calls as the kernel allows. The slices are
 * read only while the iovec is built: none can complete before its header is on the wire. */
static void encode_hdr(uint8_t *h, const struct mc_slice *s) {
  memset(h, 0, HDR_LEN);
  mc_le_put64(h, s->len);
  mc_le_put64(h + 8, s->remote);
  h[16] = (uint8_t)(s->opcode | OP_V2);
}

static int send_group(struct lane *l, int fd, uint64_t *sent) {
  struct iovec iov[2 * GRP_MAX];
  int n = 0;
  for (int i = 0; i < l->ngrp; i++) {
    struct mc_slice *s = l->grp[i];
    uint8_t *h = l->hdrs[i];
    encode_hdr(h, s);
    l->grp_len[i] = s->opcode == OPCODE_WRITE ? s->len : 0;
    iov[n++] = (struct iovec){h, HDR_LEN};
    if (s->opcode == OPCODE_WRITE) iov[n++] = (struct iovec){s->local, s->len};
  }
  /* The kernel copies the payloads before the peer can acknowledge them, and the caller gets its buffer
   * back only with that acknowledgement (the receiver thread's completion): an ordering through the
   * network that TSan cannot see, so these reads are not recorded (common/tsan.h). */
  MC_TSAN_IGNORE_BEGIN();
  int rc = send_progress(fd, iov, n, l->peer->tp->chunk, &l->progress_ns, sent);
  MC_TSAN_IGNORE_END();
  return rc;
}

static void *sender_main(void *arg) {
  mc_thread_name("mc-tcp-send");
  struct lane *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && (!l->q_head || l->recovering || l->direct)) pthread_cond_wait(&l->cv, &l->mu);
    if (l->stop) break;
    if (l->fd >= 0 && !l->alive) {
      close(l->fd);
      l->fd = -1;
    }
    if (l->fd < 0 && lane_connect(l)) {
      fail_queue(l);
      continue;
    }
    size_t bytes = 0;
    l->ngrp = 0;
    while (l->q_head && l->ngrp < GRP_MAX && (l->ngrp == 0 || bytes + l->q_head->len <= GRP_BYTES)) {
      struct mc_slice *s = q_pop(&l->q_head, &l->q_tail);
      if (s->opcode == OPCODE_WRITE) bytes += s->len;
      q_push(&l->f_head, &l->f_tail, s);
      l->grp[l->ngrp++] = s;
    }
    int fd = l->fd;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    uint64_t sent = 0;
    int rc = send_group(l, fd, &sent);
    if (rc == -ETIMEDOUT) atomic_store(&l->timed_out, 1); /* before the shutdown the receiver sees */
    if (rc) shutdown(fd, SHUT_RDWR);
    pthread_mutex_lock(&l->mu);
    if (rc) attribute_sent(l, sent);
    l->ngrp = 0;
    pthread_cond_broadcast(&l->cv);
    while (rc && l->alive && l->fd == fd && !l->stop) pthread_cond_wait(&l->cv, &l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Status frames of consecutive WRITEs at the head of the in-flight queue can be read together. sp: a
 * submitting thread waiting on its own request polls first (direct_io); the lane receiver does not: it
 * serves pipelined traffic, where polling only takes CPU from the peer. */
static int recv_statuses(struct lane *l, int fd, struct mc_slice *s, uint8_t *st, struct mc_spin *sp) {
  struct tcp_tp *tp = l->peer->tp;
  if (s->opcode != OPCODE_WRITE) return recv_progress(fd, st, 8, &l->progress_ns, tp->io_timeout_ms, NULL, 0, sp);
  if (l->st_have < 8) {
    size_t k = 0;
    pthread_mutex_lock(&l->mu);
    for (struct mc_slice *x = l->f_head; x && x->opcode == OPCODE_WRITE && k < 64; x = x->next) k++;
    pthread_mutex_unlock(&l->mu);
    if (!k) k = 1; /* direct_io: the one request in flight is not queued */
    size_t got;
    int rc = recv_atleast(fd, l->stbuf + l->st_have, 8 - l->st_have, 8 * k - l->st_have, &got, &l->progress_ns,
                          tp->io_timeout_ms, NULL, 0, sp);
    l->st_have += got;
    if (rc) return rc;
  }
  memcpy(st, l->stbuf, 8);
  l->st_have -= 8;
  memmove(l->stbuf, l->stbuf + 8, l->st_have);
  return 0;
}

static int recv_reply(struct lane *l, int fd, struct mc_slice *s, int *ok, struct mc_spin *sp) {
  struct tcp_tp *tp = l->peer->tp;
  uint8_t st[8];
  int rc = recv_statuses(l, fd, s, st, sp);
  if (rc) {
    l->st_have = 0;
    return rc;
  }
  uint64_t v = mc_le_get64(st);
  if ((v >> 32) != STATUS_MAGIC) return -EPROTO;
  *ok = (uint32_t)v == STATUS_OK;
  if (*ok && s->opcode == OPCODE_READ)
    rc = recv_progress(fd, s->local, s->len, &l->progress_ns, tp->io_timeout_ms, NULL, 0, sp);
  return rc;
}

static void log_lost(const struct lane *l, int rc) {
  LOG_WARN("tcp: connection to %s:%u lost: %s", l->peer->host, l->peer->port,
           rc == -EPROTO ? "bad status frame" : strerror(-rc));
}

static void log_rejected(const struct lane *l, const struct mc_slice *s) {
  LOG_WARN("tcp: %s:%u rejected a %s of %llu bytes at 0x%llx", l->peer->host, l->peer->port,
           s->opcode == OPCODE_WRITE ? "write" : "read", (unsigned long long)s->len, (unsigned long long)s->remote);
}

static void *receiver_main(void *arg) {
  mc_thread_name("mc-tcp-recv");
  struct lane *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && (!l->f_head || !l->alive)) pthread_cond_wait(&l->cv, &l->mu);
    if (l->stop) break;
    struct mc_slice *s = l->f_head;
    int fd = l->fd, ok = 0;
    pthread_mutex_unlock(&l->mu);
    int rc = recv_reply(l, fd, s, &ok, NULL);
    if (rc) {
      log_lost(l, rc);
      shutdown(fd, SHUT_RDWR);
      pthread_mutex_lock(&l->mu);
      l->alive = 0;
      l->recovering = 1;
      l->st_have = 0;
      pthread_cond_broadcast(&l->cv);
      while (l->ngrp) pthread_cond_wait(&l->cv, &l->mu);
      struct mc_slice *list = l->f_head;
      l->f_head = l->f_tail = NULL;
      int timed_out = rc == -ETIMEDOUT || atomic_exchange(&l->timed_out, 0); /* set before the shutdown */
      pthread_mutex_unlock(&l->mu);
      recover(l, list, timed_out);
      pthread_mutex_lock(&l->mu);
      l->recovering = 0;
      pthread_cond_broadcast(&l->cv);
      continue;
    }
    if (!ok) log_rejected(l, s);
    pthread_mutex_lock(&l->mu);
    q_pop(&l->f_head, &l->f_tail); /* acknowledged, so all its bytes left: no wait for the group */
    pthread_mutex_unlock(&l->mu);
    mc_slice_done(s, ok, s->len);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static struct tcp_peer *get_peer(struct tcp_tp *tp, const char *host, uint16_t port) {
  pthread_mutex_lock(&tp->mu);
  struct tcp_peer *p = tp->peers;
  while (p && (p->port != port || strcmp(p->host, host))) p = p->next;
  if (!p) {
    p = mc_calloc(1, sizeof(*p));
    p->tp = tp;
    snprintf(p->host, sizeof(p->host), "%s", host);
    p->port = port;
    for (int i = 0; i < MAX_LANES; i++) {
      p->lanes[i].peer = p;
      p->lanes[i].fd = -1;
      pthread_mutex_init(&p->lanes[i].mu, NULL);
      pthread_cond_init(&p->lanes[i].cv, NULL);
    }
    p->next = tp->peers;
    tp->peers = p;
  }
  pthread_mutex_unlock(&tp->mu);
  return p;
}

/* Appends a chain of slices with one lock and one wake-up. */
static void lane_enqueue(struct lane *l, struct mc_slice *h, struct mc_slice *t) {
  pthread_mutex_lock(&l->mu);
  lane_start(l);
  t->next = NULL;
  if (l->q_tail) l->q_tail->next = h;
  else l->q_head = h;
  l->q_tail = t;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

/* A lone request (one slice) of at most DIRECT_MAX bytes to a peer with an idle lane is carried out by the
 * submitting thread itself: two thread hand-offs (to the sender, from the receiver) cost more than a
 * loopback round trip on a VM. submitTransfer then returns with the request already terminal;
 * MC_TCP_DIRECT=0 keeps every request on the lane threads. */
#define DIRECT_MAX (1u << 20)

/* The lowest idle lane: one thread's lone requests keep to one connection, whose server thread then sees
 * them back to back and stays in its busy poll (rotating over the lanes let each server thread fall
 * asleep between its requests: a wake-up per request, 16 KiB store puts 12-16 k/s -> 16-22 k/s). */
static struct lane *claim_idle_lane(struct tcp_tp *tp, struct tcp_peer *p) {
  for (int i = 0; i < tp->nlanes; i++) {
    struct lane *l = &p->lanes[i];
    if (pthread_mutex_trylock(&l->mu)) continue;
    int idle = !l->stop && !l->direct && !l->q_head && !l->f_head && !l->recovering && !l->ngrp;
    if (idle) l->direct = 1;
    pthread_mutex_unlock(&l->mu);
    if (idle) return l;
  }
  return NULL;
}

/* Sends s on the claimed lane and reads its status (and READ payload) in this thread. A lost connection
 * is left for the lane's sender to replace, through recover() and its retry rule. */
static void direct_io(struct tcp_tp *tp, struct lane *l, struct mc_slice *s) {
  pthread_mutex_lock(&l->mu);
  if (l->fd >= 0 && !l->alive) {
    close(l->fd);
    l->fd = -1;
  }
  int rc = l->fd < 0 ? lane_connect(l) : 0, fd = l->fd, ok = 0;
  pthread_mutex_unlock(&l->mu);
  uint64_t sent = 0;
  if (!rc) {
    uint8_t h[HDR_LEN];
    encode_hdr(h, s);
    struct iovec iov[2] = {{h, HDR_LEN}, {s->local, s->len}};
    rc = send_progress(fd, iov, s->opcode == OPCODE_WRITE ? 2 : 1, tp->chunk, &l->progress_ns, &sent);
    if (!rc) rc = recv_reply(l, fd, s, &ok, &l->direct_spin);
    if (rc) {
      log_lost(l, rc);
      shutdown(fd, SHUT_RDWR);
    }
  }
  pthread_mutex_lock(&l->mu);
  if (rc && l->fd == fd) {
    l->alive = 0;
    l->st_have = 0;
  }
  l->direct = 0;
  if (l->q_head) pthread_cond_broadcast(&l->cv); /* requests queued meanwhile: the sender's turn */
  pthread_mutex_unlock(&l->mu);
  if (rc && fd >= 0) { /* lost on an open connection (not a failed connect): retry at most once */
    s->sent = sent;
    s->next = NULL;
    recover(l, s, rc == -ETIMEDOUT);
    return;
  }
  if (!rc && !ok) log_rejected(l, s);
  mc_slice_done(s, !rc && ok, s->len);
}

static void tcp_submit(struct mc_transport *t, struct mc_slice **sl, size_t n) {
  struct tcp_tp *tp = (struct tcp_tp *)t;
  struct tcp_peer *p = NULL;
  if (n == 1 && tp->direct && sl[0]->len <= DIRECT_MAX) {
    p = get_peer(tp, sl[0]->desc->ip, sl[0]->desc->tcp_data_port);
    struct lane *l = claim_idle_lane(tp, p);
    if (l) {
      direct_io(tp, l, sl[0]);
      return;
    }
    p = NULL;
  }
  struct mc_slice *h[MAX_LANES] = {0}, *tl[MAX_LANES] = {0};
  for (size_t i = 0; i < n; i++) {
    struct mc_desc *d = sl[i]->desc;
    if (!p || p->port != d->tcp_data_port || strcmp(p->host, d->ip)) {
      if (p)
        for (int k = 0; k < MAX_LANES; k++)
          if (h[k]) {
            lane_enqueue(&p->lanes[k], h[k], tl[k]);
            h[k] = tl[k] = NULL;
          }
      p = get_peer(tp, d->ip, d->tcp_data_port);
    }
    unsigned k = atomic_fetch_add(&p->rr, 1) % (unsigned)tp->nlanes;
    q_push(&h[k], &tl[k], sl[i]);
  }
  if (p)
    for (int k = 0; k < MAX_LANES; k++)
      if (h[k]) lane_enqueue(&p->lanes[k], h[k], tl[k]);
}

/* ---------------------------------------------------------------- lifecycle */

static int tcp_init(struct mc_engine *e, struct mc_transport **out, char *why, size_t why_len) {
  int lo, hi;
  mc_rpc_port_range(&lo, &hi);
  uint16_t port;
  int fd = mc_sock_listen_range(mc_te_bind_ip(), lo, hi, 500, 128, &port);
  if (fd < 0) {
    snprintf(why, why_len, "cannot bind a data port in %d-%d: %s", lo, hi, strerror(-fd));
    LOG_ERROR("tcp: %s", why);
    return ERR_SOCKET;
  }
  struct tcp_tp *tp = mc_calloc(1, sizeof(*tp));
  tp->base.eng = e;
  tp->port = port;
  long lanes = mc_knob_str(MC_KNOB_TCP_LANES_PER_PEER) ? mc_knob_long(MC_KNOB_TCP_LANES_PER_PEER)
                                               : mc_knob_long(MC_KNOB_TCP_MAX_CONNECTIONS_PER_PEER); /* at most MAX_LANES */
  tp->nlanes = (int)lanes;
  tp->io_timeout_ms = (int)mc_knob_long(MC_KNOB_TCP_IO_TIMEOUT_MS);
  tp->direct = (int)mc_knob_long(MC_KNOB_TCP_DIRECT);
  tp->connect_timeout_ms = (int)mc_knob_long(MC_KNOB_TCP_CONNECT_TIMEOUT_MS);
  tp->chunk = (size_t)mc_knob_long(MC_KNOB_TCP_SLICE_SIZE) * 16;
  tp->split = (uint64_t)mc_knob_long(MC_KNOB_TCP_SPLIT_SIZE);
  pthread_mutex_init(&tp->mu, NULL);
  tp->base.ops = &mc_tcp_transport_ops;
  /* the data port's bounds (docs/transfer-engine.md, "TCP"): a cap on connections, and a first-byte
   * timeout that also makes silent connections the first to go at the cap */
  struct mc_conn_server_opts so = {
      .serve = conn_main,
      .on_accept = conn_accepted,
      .ctx = tp,
      .name = "tcp data port",
      .max_conns = (int)mc_knob_long(MC_KNOB_TCP_SERVER_MAX_CONNECTIONS),
      .first_byte_timeout_ms = (int)mc_knob_long(MC_KNOB_TCP_FIRST_BYTE_TIMEOUT_MS),
  };
  if (!(tp->srv = mc_conn_server_start_opts(fd, &so))) {
    snprintf(why, why_len, "cannot start the data port's server");
    close(fd);
    pthread_mutex_destroy(&tp->mu);
    mc_free(tp);
    return ERR_CONTEXT;
  }
  LOG_INFO("tcp: data port %u, %d lanes per peer", port, tp->nlanes);
  *out = &tp->base;
  return 0;
}

static void stop_lane(struct lane *l) {
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  if (l->fd >= 0) shutdown(l->fd, SHUT_RDWR);
  pthread_cond_broadcast(&l->cv);
  int started = l->started;
  pthread_mutex_unlock(&l->mu);
  if (started) {
    pthread_join(l->snd, NULL);
    pthread_join(l->rcv, NULL);
  }
  struct mc_slice *rest = l->f_head;
  if (l->f_tail) l->f_tail->next = l->q_head;
  else rest = l->q_head;
  while (rest) {
    struct mc_slice *s = rest;
    rest = s->next;
    mc_slice_done(s, 0, 0);
  }
  if (l->fd >= 0) close(l->fd);
}

static void tcp_fini(struct mc_transport *t) {
  struct tcp_tp *tp = (struct tcp_tp *)t;
  atomic_store(&tp->stop, 1);
  mc_conn_server_stop(tp->srv);
  pthread_mutex_lock(&tp->mu);
  struct tcp_peer *p = tp->peers;
  tp->peers = NULL;
  pthread_mutex_unlock(&tp->mu);
  while (p) {
    struct tcp_peer *next = p->next;
    for (int i = 0; i < MAX_LANES; i++) stop_lane(&p->lanes[i]);
    mc_free(p);
    p = next;
  }
  mc_free(tp);
}

static void tcp_describe(struct mc_transport *t, json_t *d) {
  struct tcp_tp *tp = (struct tcp_tp *)t;
  json_object_set_new(d, "tcp_data_port", json_integer(tp->port));
  json_object_set_new(d, "tcp_proto_version", json_integer(2));
}

static int tcp_reachable(struct mc_transport *t, const struct mc_desc *d) {
  if (!d->tcp_data_port || !d->ip || !*d->ip) return 0;
  if (d->tcp_proto_version < 2) {
    LOG_WARN("segment %s speaks TCP framing v%d; only v2 (acknowledged writes) is supported", d->name,
             d->tcp_proto_version);
    return 0;
  }
  return 1;
}

/* Large requests are cut into pieces (MC_TCP_SPLIT_SIZE, default 1 MiB, 0 = never; at most 16) so that one
 * request uses several lanes: a single connection is capped at single-stream speed. A READ alone in its
 * submission and larger than that is cut at a quarter of it: its receive copy is then spread over the lane
 * receivers. One of at most MC_TCP_SPLIT_SIZE goes whole: direct I/O carries it in the caller's thread without
 * any hand-off (1 MiB 2.6-2.9 GB/s whole against 2.3-2.5 in four pieces; bench/RESULTS.md, "What each TCP
 * design choice is worth").
 * In batches the lanes are kept busy by the other requests and whole requests do better. */
static uint32_t tcp_split(struct mc_transport *t, const struct transfer_request *r, size_t n) {
  uint64_t split = ((struct tcp_tp *)t)->split, len = r->length;
  if (n == 1 && r->opcode == OPCODE_READ && len > split) split /= 4;
  if (!split || len <= split) return 1;
  uint64_t k = (len + split - 1) / split;
  return k > 16 ? 16 : (uint32_t)k;
}

const struct mc_transport_ops mc_tcp_transport_ops = {
    .name = "tcp",
    .init = tcp_init,
    .fini = tcp_fini,
    .describe = tcp_describe,
    .reachable = tcp_reachable,
    .split = tcp_split,
    .submit = tcp_submit,
};
