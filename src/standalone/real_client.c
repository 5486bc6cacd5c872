/* Standalone client mode, the real client's side (docs/standalone.md): serves dummy clients of this host
 * on the abstract unix socket "@mooncake_client_<port>.sock" (wire: wire.h). Each connection maps the
 * dummy's sealed memfd, registers it with this client, and runs the dummy's calls with pointers into that
 * mapping, so transfers land in the dummy's pages. The peer is untrusted: only this user (or root) may
 * connect (SO_PEERCRED); frames are length-checked, every offset must lie inside what that dummy shared,
 * connections and shared bytes are capped, a frame must arrive whole within FRAME_TIMEOUT_MS, and a
 * closed connection (a dummy that died) releases its mapping and registration. A request runs as a call of
 * the store's own back-end (client.h, struct mc_backend) with the life lock held, as an entry point would
 * run it, and the dummy's sessions as sessions of their own owner (session.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "net/sock.h"
#include "standalone/standalone.h"
#include "standalone/wire.h"

#define FRAME_TIMEOUT_MS 10000 /* a started frame (and the HELLO after connect) must be complete by then */
#define REPLY_TIMEOUT_MS 10000 /* a dummy that does not read its reply is dropped */
#define POLL_MS 500            /* how often idle waits look at the stop flag */

struct conn {
  struct mc_real_client *srv;
  pthread_t th;
  int fd, used, done;
  char *base; /* the dummy's memory, mapped here; NULL before HELLO */
  uint64_t total;
  uint64_t frames, bytes_in, bytes_out;
  pid_t pid;
  struct mc_sess_owner own; /* the sessions this dummy holds open in the store */
};

struct mc_real_client {
  mooncake_store_t store;
  int lfd, port;
  uint64_t max_shared; /* bytes one dummy may share */
  _Atomic int stop;
  pthread_t th;
  pthread_mutex_t mu; /* guards slots[].used/done/fd for accept and stop; a leaf */
  int nslots;
  struct conn *slots;
  _Atomic uint64_t refused; /* connections and frames refused (tests read it through mc_real_client_refused) */
};

/* Waits for the first byte of a frame, looking at the stop flag: 1 readable, 0 stop/EOF-ish, -1 error. */
static int wait_readable(struct conn *c) {
  while (!atomic_load(&c->srv->stop)) {
    struct pollfd p = {c->fd, POLLIN, 0};
    int n = poll(&p, 1, POLL_MS);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
  return 0;
}

static int reply(struct conn *c, uint16_t op, const struct mc_dbuf *b) {
  struct mc_dummy_hdr h = {MC_DUMMY_MAGIC, op, 0, (uint32_t)b->n, 0};
  struct iovec iov[2] = {{&h, sizeof(h)}, {b->p, b->n}};
  c->bytes_out += sizeof(h) + b->n;
  return mc_sock_writev_deadline(c->fd, iov, b->n ? 2 : 1, REPLY_TIMEOUT_MS);
}

static void refuse(struct conn *c, const char *why) {
  atomic_fetch_add(&c->srv->refused, 1);
  LOG_WARN_LIMITED("mooncake_client: dummy pid %d refused: %s", (int)c->pid, why);
}

/* ------------------------------------------------------------------ HELLO */

/* Reads the HELLO frame and its descriptor, maps and registers the memory. 0 or -1 (connection dropped). */
static int hello(struct conn *c) {
  struct mc_dummy_hdr h;
  uint64_t sz[2];
  struct iovec iov[2] = {{&h, sizeof(h)}, {sz, sizeof(sz)}};
  char ctl[CMSG_SPACE(sizeof(int) * 4)];
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct pollfd p = {c->fd, POLLIN, 0};
  if (poll(&p, 1, FRAME_TIMEOUT_MS) <= 0) return refuse(c, "no HELLO in time"), -1;
  ssize_t n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  int fd = -1, nfds = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) { /* keep the first, close every other descriptor the peer sent */
      int f;
      memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (nfds++ == 0) fd = f;
      else close(f);
    }
  }
  const char *why = NULL;
  struct stat st;
  int seals;
  /* one sendmsg carries the whole HELLO; anything else is not our dummy */
  if (n != (ssize_t)(sizeof(h) + sizeof(sz)) || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) why = "short or truncated HELLO";
  else if (h.magic != MC_DUMMY_MAGIC || h.op != MC_DOP_HELLO || h.len != sizeof(sz)) why = "not a HELLO frame";
  else if (nfds != 1) why = "HELLO without exactly one descriptor";
  else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) why = "descriptor is not a memory file";
  else if ((seals = fcntl(fd, F_GET_SEALS)) < 0 || !(seals & F_SEAL_SHRINK))
    why = "memory file not sealed against shrinking"; /* else the dummy could truncate it under us (SIGBUS) */
  else if (!sz[1] || sz[0] > sz[1] || (uint64_t)st.st_size < sz[1]) why = "sizes do not match the memory file";
  else if (sz[1] > c->srv->max_shared) why = "shares more than --max_shared_size";
  int rc = MC_INVALID_PARAMS;
  if (!why) {
    c->base = mmap(NULL, sz[1], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c->base == MAP_FAILED) c->base = NULL, why = "cannot map the memory file";
  }
  if (fd >= 0) close(fd);
  if (!why) {
    c->total = sz[1];
    struct mc_store *st = c->srv->store;
    rc = MC_INVALID_PARAMS;
    if (mc_api_enter(st)) {
      rc = st->be->register_buffer(st, c->base, c->total);
      mc_api_leave(st);
    }
    if (rc) {
      munmap(c->base, c->total);
      c->base = NULL;
      why = "registration with this client failed";
    }
  }
  if (why) refuse(c, why);
  c->bytes_in += n > 0 ? (uint64_t)n : 0;
  if (n <= 0) return -1;
  struct mc_dbuf b = {0};
  int64_t st64 = why ? (rc ? rc : MC_INVALID_PARAMS) : 0;
  mc_dbuf_put(&b, &st64, 8);
  if (!why) {
    char name[300] = "";
    struct mc_store *st = c->srv->store;
    if (mc_api_enter(st)) {
      st->be->hostname(st, name, sizeof(name));
      mc_api_leave(st);
    }
    mc_dbuf_put(&b, name, strlen(name));
  }
  int wr = reply(c, MC_DOP_HELLO, &b);
  mc_free(b.p);
  return why || wr ? -1 : 0;
}

/* ------------------------------------------------------------------ requests */

/* A decoded request with its buffers as pointers into the dummy's memory and its config in the store's form. */
struct req {
  struct mc_dreq d;
  mc_replicate_config_t cfg;
  void **ptrs;
  size_t *sizes, *objs;
};

static void req_free(struct req *q) {
  mc_dreq_free(&q->d);
  mc_free(q->ptrs);
  mc_free(q->sizes);
  mc_free(q->objs);
}

static void req_bind(struct conn *c, struct req *q) {
  struct mc_dreq *d = &q->d;
  q->cfg = (mc_replicate_config_t){d->replica_num, d->soft_pin, (int64_t)d->ttl_ms, d->hard_pin,
                                   (const char **)d->pref, d->npref};
  size_t n = d->nb ? d->nb : 1;
  q->ptrs = mc_calloc(n, sizeof(void *));
  q->sizes = mc_calloc(n, sizeof(size_t));
  q->objs = mc_calloc(n, sizeof(size_t));
  for (size_t i = 0; i < d->nb; i++) {
    q->ptrs[i] = c->base + d->off[i];
    q->sizes[i] = d->len[i];
    if (d->obj) q->objs[i] = d->obj[i];
  }
}

static int all_single(const struct mc_dreq *d) {
  for (uint32_t i = 0; i < d->count; i++)
    if (d->nbufs[i] != 1) return 0;
  return 1;
}

static void put_ints(struct mc_dbuf *out, const int *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int64_t x = v[i];
    mc_dbuf_put(out, &x, 8);
  }
}

/* Runs one data request (WRITE, READ, PUT_WRITE, GET_READ); results into res[0..count). */
static void run_data(struct conn *c, struct mc_store *s, struct req *q, int64_t *res) {
  const struct mc_backend *be = s->be;
  struct mc_dreq *d = &q->d;
  const char *const *k = (const char *const *)d->keys;
  size_t n = d->count;
  int single = (d->flags & MC_DUMMY_SINGLE) && n == 1 && d->nbufs[0] == 1, upsert = d->flags & MC_WRITE_UPSERT;
  const char *const *g = (const char *const *)d->groups;
  const size_t *nb = all_single(d) ? NULL : d->nbufs;
  if (d->op == MC_DOP_WRITE) {
    int *ir = mc_calloc(n ? n : 1, sizeof(int));
    if (single && !g) ir[0] = be->write1(s, upsert, k[0], q->ptrs[0], q->sizes[0], &q->cfg);
    else if (n) be->write(s, upsert, k, (const void *const *)q->ptrs, q->sizes, nb, n, &q->cfg, g, ir);
    for (size_t i = 0; i < n; i++) res[i] = ir[i];
    mc_free(ir);
  } else if (d->op == MC_DOP_READ) {
    if (single) res[0] = be->read1(s, k[0], q->ptrs[0], q->sizes[0]);
    else if (n) be->read(s, k, q->ptrs, q->sizes, nb, n, res);
  } else if (n) { /* the dummy's own sessions */
    mc_sess_ranged(s, &c->own, d->op == MC_DOP_PUT_WRITE, k, q->ptrs, q->sizes, q->objs, d->nbufs, n, res);
  }
}

/* Session, task and replica-descriptor requests; reply into out. */
static void run_other(struct conn *c, struct mc_store *s, struct req *q, struct mc_dbuf *out) {
  const struct mc_backend *be = s->be;
  struct mc_dreq *d = &q->d;
  const char *const *k = (const char *const *)d->keys;
  int *ir = mc_calloc(d->count ? d->count : 1, sizeof(int));
  int64_t v = 0;
  mc_task_id_t id = {0, 0};
  switch (d->op) {
    case MC_DOP_PUT_START: {
      size_t *sz = mc_calloc(d->count ? d->count : 1, sizeof(size_t));
      for (uint32_t i = 0; i < d->count; i++) sz[i] = d->sizes[i];
      if (d->count) mc_sess_put_start(s, &c->own, k, sz, d->count, &q->cfg, (const char *const *)d->groups, ir);
      mc_free(sz);
      put_ints(out, ir, d->count);
      break;
    }
    case MC_DOP_PUT_END:
      if (d->count) mc_sess_put_end(s, &c->own, k, d->count, (int)d->arg, ir);
      put_ints(out, ir, d->count);
      break;
    case MC_DOP_GET_START:
      if (d->count) mc_sess_get_start(s, &c->own, k, d->count, ir);
      put_ints(out, ir, d->count);
      break;
    case MC_DOP_GET_END:
      mc_sess_get_end(s, &c->own, k, d->count);
      mc_dbuf_put(out, &v, 8);
      break;
    case MC_DOP_COPY_TASK:
    case MC_DOP_MOVE_TASK:
      v = d->op == MC_DOP_COPY_TASK ? be->copy_task(s, d->str[0], (const char *const *)d->str + 1, d->nstr - 1, &id)
                                    : be->move_task(s, d->str[0], d->str[1], d->str[2], &id);
      mc_dbuf_put(out, &v, 8);
      mc_dbuf_u64(out, id.hi);
      mc_dbuf_u64(out, id.lo);
      break;
    case MC_DOP_REPLICA_DESC:
      for (uint32_t i = 0; i < d->count; i++) {
        mc_replica_desc_t *rd = NULL;
        int n = be->replica_desc(s, k[i], &rd);
        size_t at = out->n;
        mc_drep_put_replica_desc(out, n, rd);
        if (out->n + 8ull * (d->count - 1 - i) > MC_DUMMY_MAX_BODY) { /* keep the reply a frame the dummy reads */
          out->n = at;
          mc_drep_put_replica_desc(out, MC_INVALID_PARAMS, NULL);
        }
        mc_store_replica_desc_free(rd, n);
      }
      break;
    case MC_DOP_QUERY_TASK: {
      mc_task_info_t t;
      memset(&t, 0, sizeof(t));
      v = be->query_task(s, (mc_task_id_t){d->id_hi, d->id_lo}, &t);
      mc_dbuf_put(out, &v, 8);
      mc_dbuf_u64(out, t.id.hi);
      mc_dbuf_u64(out, t.id.lo);
      mc_dbuf_u32(out, (uint32_t)t.type);
      mc_dbuf_u32(out, (uint32_t)t.status);
      mc_dbuf_u64(out, t.created_at_ms_epoch);
      mc_dbuf_u64(out, t.last_updated_at_ms_epoch);
      mc_dbuf_str(out, t.assigned_client);
      mc_dbuf_str(out, t.message);
      break;
    }
  }
  mc_free(ir);
}

/* Keyed requests (REMOVE, EXIST, SIZE) and single-value ones (REMOVE_REGEX, REMOVE_ALL, HEALTH, STATS). */
static void run_keys(struct conn *c, struct mc_store *s, struct req *q, struct mc_dbuf *out) {
  const struct mc_backend *be = s->be;
  struct mc_dreq *d = &q->d;
  const char *const *k = (const char *const *)d->keys;
  int64_t v = 0;
  if (d->op == MC_DOP_REMOVE || d->op == MC_DOP_EXIST || d->op == MC_DOP_SIZE) {
    int *ir = mc_calloc(d->count ? d->count : 1, sizeof(int));
    if (d->op == MC_DOP_EXIST && d->count) be->exist_batch(s, k, d->count, ir);
    else if (d->op == MC_DOP_REMOVE && d->count) be->remove_batch(s, k, d->count, (int)d->arg, ir);
    for (uint32_t i = 0; i < d->count; i++) {
      v = d->op == MC_DOP_SIZE ? be->size(s, k[i]) : ir[i];
      mc_dbuf_put(out, &v, 8);
    }
    mc_free(ir);
    return;
  }
  if (d->op == MC_DOP_REMOVE_REGEX) v = be->remove_regex(s, d->str[0], (int)d->arg);
  else if (d->op == MC_DOP_REMOVE_ALL) v = be->remove_all(s, (int)d->arg);
  else if (d->op == MC_DOP_HEALTH) v = be->health(s);
  else v = (int64_t)(d->arg == 0 ? c->frames : d->arg == 1 ? c->bytes_in : c->bytes_out);
  mc_dbuf_put(out, &v, 8);
}

/* One request body -> reply body, with the store's life lock held around the call. -1: malformed, or the
 * store is not set up (the connection is dropped). */
static int serve(struct conn *c, const struct mc_dummy_hdr *h, const char *body, struct mc_dbuf *out) {
  struct mc_store *s = c->srv->store;
  struct req q = {0};
  if (mc_dreq_decode(h->op, h->flags, body, h->len, c->total, &q.d)) {
    req_free(&q);
    return -1;
  }
  if (!mc_api_enter(s)) {
    req_free(&q);
    return -1;
  }
  struct mc_dreq *d = &q.d;
  req_bind(c, &q);
  switch (d->op) {
    case MC_DOP_WRITE:
    case MC_DOP_READ:
    case MC_DOP_PUT_WRITE:
    case MC_DOP_GET_READ: {
      int64_t *res = mc_calloc(d->count ? d->count : 1, sizeof(int64_t));
      if (d->outside) {
        refuse(c, "a buffer outside the memory it shared");
        for (uint32_t i = 0; i < d->count; i++) res[i] = MC_INVALID_PARAMS;
      } else {
        run_data(c, s, &q, res);
      }
      mc_dbuf_put(out, res, d->count * 8);
      mc_free(res);
      break;
    }
    case MC_DOP_REMOVE:
    case MC_DOP_EXIST:
    case MC_DOP_SIZE:
    case MC_DOP_REMOVE_REGEX:
    case MC_DOP_REMOVE_ALL:
    case MC_DOP_HEALTH:
    case MC_DOP_STATS:
      run_keys(c, s, &q, out);
      break;
    default:
      run_other(c, s, &q, out);
  }
  mc_api_leave(s);
  req_free(&q);
  return 0;
}

static void *conn_main(void *arg) {
  mc_thread_name("mc-real-conn");
  struct conn *c = arg;
  struct ucred cr;
  socklen_t cl = sizeof(cr);
  uid_t me = geteuid();
  if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) || (cr.uid != me && cr.uid != 0)) {
    refuse(c, "peer is another user");
    goto out;
  }
  c->pid = cr.pid;
  if (hello(c)) goto out;
  LOG_INFO("mooncake_client: dummy pid %d shares %llu bytes", (int)c->pid, (unsigned long long)c->total);
  char *body = NULL;
  for (;;) {
    if (wait_readable(c) <= 0) break;
    struct mc_dummy_hdr h;
    if (mc_sock_read_deadline(c->fd, &h, sizeof(h), FRAME_TIMEOUT_MS)) break; /* EOF: the dummy is gone */
    if (h.magic != MC_DUMMY_MAGIC || h.len > MC_DUMMY_MAX_BODY || h.op == MC_DOP_HELLO) {
      refuse(c, "bad frame header");
      break;
    }
    body = mc_realloc(body, h.len ? h.len : 1);
    if (h.len && mc_sock_read_deadline(c->fd, body, h.len, FRAME_TIMEOUT_MS)) {
      refuse(c, "frame body not received in time");
      break;
    }
    c->frames++;
    c->bytes_in += sizeof(h) + h.len;
    struct mc_dbuf out = {0};
    int rc = serve(c, &h, body, &out);
    if (rc) refuse(c, "malformed request");
    else rc = reply(c, h.op, &out);
    mc_free(out.p);
    if (rc) break;
  }
  mc_free(body);
out:
  mc_sess_drop_owner(c->srv->store, &c->own); /* its put sessions revoked, the others dropped */
  if (c->base) { /* every call of this dummy has returned: nothing uses the memory any more */
    struct mc_store *st = c->srv->store;
    if (mc_api_enter(st)) {
      st->be->unregister_buffer(st, c->base);
      mc_api_leave(st);
    }
    munmap(c->base, c->total);
    c->base = NULL;
    LOG_INFO("mooncake_client: dummy pid %d left; its memory is released", (int)c->pid);
  }
  pthread_mutex_lock(&c->srv->mu);
  close(c->fd);
  c->fd = -1;
  c->done = 1;
  pthread_mutex_unlock(&c->srv->mu);
  return NULL;
}

/* Joins finished connection threads; with all, waits for every one (stop). Called with mu held. */
static void reap(struct mc_real_client *v, int all) {
  for (int i = 0; i < v->nslots; i++) {
    struct conn *c = &v->slots[i];
    if (!c->used || (!c->done && !all)) continue;
    if (!c->done && c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&v->mu);
    pthread_join(c->th, NULL);
    pthread_mutex_lock(&v->mu);
    c->used = 0;
  }
}

static void *accept_main(void *arg) {
  mc_thread_name("mc-real-accept");
  struct mc_real_client *v = arg;
  while (!atomic_load(&v->stop)) {
    struct pollfd p = {v->lfd, POLLIN, 0};
    if (poll(&p, 1, POLL_MS) <= 0) continue;
    int fd = accept4(v->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    pthread_mutex_lock(&v->mu);
    reap(v, 0);
    struct conn *c = NULL;
    for (int i = 0; !c && i < v->nslots; i++)
      if (!v->slots[i].used) c = &v->slots[i];
    if (c) {
      *c = (struct conn){.srv = v, .fd = fd, .used = 1, .own = {0, MC_DUMMY_MAX_SESSIONS}};
      if (pthread_create(&c->th, NULL, conn_main, c)) c->used = 0, c = NULL;
    }
    pthread_mutex_unlock(&v->mu);
    if (!c) {
      atomic_fetch_add(&v->refused, 1);
      LOG_WARN_LIMITED("mooncake_client: %d dummies already connected (--max_dummies); connection refused", v->nslots);
      close(fd);
    }
  }
  return NULL;
}

struct mc_real_client *mc_real_client_start(mooncake_store_t store, int port, int max_dummies, uint64_t max_shared) {
  struct sockaddr_un a;
  unsigned alen = mc_dummy_sockaddr(&a, port);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) || listen(fd, 64)) {
    LOG_ERROR("mooncake_client: cannot listen on @mooncake_client_%d.sock: %s", port, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct mc_real_client *v = mc_calloc(1, sizeof(*v));
  v->store = store;
  v->lfd = fd;
  v->port = port;
  v->max_shared = max_shared;
  v->nslots = max_dummies > 0 ? max_dummies : 1;
  v->slots = mc_calloc((size_t)v->nslots, sizeof(struct conn));
  pthread_mutex_init(&v->mu, NULL);
  if (pthread_create(&v->th, NULL, accept_main, v)) {
    close(fd);
    mc_free(v->slots);
    mc_free(v);
    return NULL;
  }
  return v;
}

void mc_real_client_stop(struct mc_real_client *v) {
  if (!v) return;
  atomic_store(&v->stop, 1);
  pthread_join(v->th, NULL);
  close(v->lfd);
  pthread_mutex_lock(&v->mu);
  reap(v, 1);
  pthread_mutex_unlock(&v->mu);
  pthread_mutex_destroy(&v->mu);
  mc_free(v->slots);
  mc_free(v);
}

uint64_t mc_real_client_refused(const struct mc_real_client *v) { return atomic_load(&v->refused); }
