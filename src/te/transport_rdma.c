/* RDMA transport (docs/rdma.md): libibverbs RC queue pairs, one-sided RDMA WRITE and READ.
 *
 * Per device: a context, one PD, one CQ with a completion channel and a poller thread that sleeps on the
 * channel when idle (no CPU burnt by an idle engine). Every local registration is one MR per device. A
 * request is checked against one local registration and one buffer of the peer's descriptor before anything
 * is posted, cut into work requests (mc_rdma_next_slice), each sent on a rail chosen with the NIC priority
 * matrices (mc_rdma_select). A completion error retries the work request on the next rail (the retry walk) up
 * to MC_RDMA_RETRY_COUNT times; the endpoints (transport_rdma_ep.c) handle queue pairs and handshakes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "te/transport_rdma.h"

extern const struct mc_transport_ops mc_rdma_transport_ops;

#define CQ_DEPTH 4096
#define POLL_BATCH 32
#define WATCHDOG_NS 500000000ull

static uint32_t rnd32(void) {
  static _Thread_local uint32_t x;
  if (!x) x = (uint32_t)mc_now_ns() | 1u;
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  return x;
}

/* ---------------------------------------------------------------- devices */

static int read_numa(const char *dev) {
  char path[256], buf[32];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", dev);
  FILE *f = fopen(path, "r");
  int n = -1;
  if (f) {
    if (fgets(buf, sizeof(buf), f)) n = atoi(buf);
    fclose(f);
  }
  return n < 0 ? -1 : n;
}

/* The GID index: MC_RDMA_GID_INDEX, else (RoCE) the first RoCE v2 GID holding an IPv4-mapped address, else 0. */
static int pick_gid(struct rdma_dev *d, const struct ibv_port_attr *pa) {
  long forced = mc_knob_long(MC_KNOB_RDMA_GID_INDEX);
  if (forced >= 0) return (int)forced;
  if (!d->roce) return 0;
  for (int i = 0; i < pa->gid_tbl_len && i < 256; i++) {
    struct ibv_gid_entry g;
    if (ibv_query_gid_ex(d->ctx, d->port, (uint32_t)i, &g, 0)) continue;
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (g.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(g.gid.raw, v4, 12)) return i;
  }
  return 0;
}

/* Opens a device and its first ACTIVE port; 0, or -1 with why set. */
static int dev_open(struct rdma_tp *tp, struct ibv_device *ibd, struct rdma_dev *d, char *why, size_t why_len) {
  snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(ibd));
  d->tp = tp;
  d->wake_fd = -1;
  if (!(d->ctx = ibv_open_device(ibd))) return snprintf(why, why_len, "cannot open %s: %s", d->name, strerror(errno)), -1;
  struct ibv_device_attr da;
  if (ibv_query_device(d->ctx, &da)) return snprintf(why, why_len, "cannot query %s", d->name), -1;
  struct ibv_port_attr pa;
  for (uint8_t p = 1; p <= da.phys_port_cnt && !d->port; p++)
    if (!ibv_query_port(d->ctx, p, &pa) && pa.state == IBV_PORT_ACTIVE) d->port = p;
  if (!d->port) return snprintf(why, why_len, "%s has no ACTIVE port", d->name), -1;
  ibv_query_port(d->ctx, d->port, &pa);
  d->lid = pa.lid;
  d->mtu = pa.active_mtu;
  d->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  d->max_rd_atomic = MC_MIN(16, MC_MAX(1, da.max_qp_rd_atom));
  d->gid_index = pick_gid(d, &pa);
  union ibv_gid gid;
  if (ibv_query_gid(d->ctx, d->port, d->gid_index, &gid)) return snprintf(why, why_len, "%s: no GID %d", d->name, d->gid_index), -1;
  memcpy(d->gid, gid.raw, 16);
  d->numa = read_numa(d->name);
  d->cqe = MC_MIN(CQ_DEPTH, da.max_cqe);
  if (!(d->pd = ibv_alloc_pd(d->ctx)) || !(d->ch = ibv_create_comp_channel(d->ctx)) ||
      !(d->cq = ibv_create_cq(d->ctx, d->cqe, d, d->ch, 0)))
    return snprintf(why, why_len, "%s: cannot allocate a PD, channel or CQ: %s", d->name, strerror(errno)), -1;
  fcntl(d->ch->fd, F_SETFL, fcntl(d->ch->fd, F_GETFL) | O_NONBLOCK);
  if ((d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) return snprintf(why, why_len, "eventfd failed"), -1;
  char g[48];
  mc_rdma_gid_format(d->gid, g);
  LOG_INFO("rdma: %s port %u lid %u gid[%d] %s mtu %u", d->name, d->port, d->lid, d->gid_index, g, 128u << d->mtu);
  return 0;
}

static void dev_close(struct rdma_dev *d) {
  if (d->cq) ibv_destroy_cq(d->cq);
  if (d->ch) ibv_destroy_comp_channel(d->ch);
  if (d->pd) ibv_dealloc_pd(d->pd);
  if (d->ctx) ibv_close_device(d->ctx);
  if (d->wake_fd >= 0) close(d->wake_fd);
  memset(d, 0, sizeof(*d));
}

static int dev_index(struct rdma_tp *tp, const char *name) {
  for (int i = 0; i < tp->ndev; i++)
    if (!strcmp(tp->devs[i].name, name)) return i;
  return -1;
}

/* ---------------------------------------------------------------- completion of work requests */

static void wr_finish(struct rdma_wr *w, int ok) {
  struct rdma_job *j = w->job;
  if (w->lmr) atomic_fetch_sub(&w->lmr->users, 1);
  if (!ok) atomic_store(&j->failed, 1);
  mc_free(w);
  if (atomic_fetch_sub(&j->left, 1) == 1) {
    struct mc_slice *s = j->s;
    int failed = atomic_load(&j->failed);
    mc_free(j);
    mc_slice_done(s, !failed, s->len);
  }
}

void rdma_retry_push(struct rdma_tp *tp, struct rdma_wr *w) {
  w->next = NULL;
  pthread_mutex_lock(&tp->rq_mu);
  if (tp->rq_tail) tp->rq_tail->next = w;
  else tp->rq_head = w;
  tp->rq_tail = w;
  pthread_cond_signal(&tp->rq_cv);
  pthread_mutex_unlock(&tp->rq_mu);
}

static void on_completion(struct rdma_tp *tp, const struct ibv_wc *wc) {
  struct rdma_wr *w = (struct rdma_wr *)(uintptr_t)wc->wr_id;
  MC_TSAN_ACQUIRE(w); /* what the poster wrote before ibv_post_send (TSan cannot see the device) */
  rdma_ep_completed(tp, w, wc->status);
  if (wc->status == IBV_WC_SUCCESS) {
    wr_finish(w, 1);
  } else if (w->retry < tp->retry_max && !atomic_load(&tp->stop)) {
    w->retry++; /* the next rail of the walk, from the retry thread (posting may wait for a handshake) */
    rdma_retry_push(tp, w);
  } else {
    if (!atomic_exchange(&w->job->logged, 1))
      LOG_WARN("rdma: %s of %llu bytes to %s failed: %s (after %d retries)",
               w->job->s->opcode == OPCODE_WRITE ? "write" : "read", (unsigned long long)w->job->s->len,
               w->job->s->desc->name, ibv_wc_status_str(wc->status), w->retry);
    wr_finish(w, 0);
  }
}

/* The device's poller: polls the CQ, and when it is empty arms it and sleeps on the completion channel
 * (re-polling after arming, so no completion is missed); wakes every WATCHDOG_NS while work is outstanding. */
static void *poller_main(void *arg) {
  mc_thread_name("mc-rdma-poll");
  struct rdma_dev *d = arg;
  struct rdma_tp *tp = d->tp;
  struct ibv_wc wc[POLL_BATCH];
  uint64_t last_dog = mc_now_ns();
  while (!atomic_load(&tp->quit)) {
    int n = ibv_poll_cq(d->cq, POLL_BATCH, wc);
    for (int i = 0; i < n; i++) on_completion(tp, &wc[i]);
    if (mc_now_ns() - last_dog > WATCHDOG_NS) {
      last_dog = mc_now_ns();
      if (atomic_load(&d->inflight) > 0) rdma_ep_watchdog(tp, d);
    }
    if (n > 0) continue;
    ibv_req_notify_cq(d->cq, 0);
    if ((n = ibv_poll_cq(d->cq, POLL_BATCH, wc)) > 0) {
      for (int i = 0; i < n; i++) on_completion(tp, &wc[i]);
      continue;
    }
    struct pollfd pf[2] = {{.fd = d->ch->fd, .events = POLLIN}, {.fd = d->wake_fd, .events = POLLIN}};
    poll(pf, 2, atomic_load(&d->inflight) > 0 ? (int)(WATCHDOG_NS / 1000000) : -1);
    struct ibv_cq *cq;
    void *ctx;
    if ((pf[0].revents & POLLIN) && !ibv_get_cq_event(d->ch, &cq, &ctx)) ibv_ack_cq_events(cq, 1);
    uint64_t v;
    if (pf[1].revents & POLLIN) (void)!read(d->wake_fd, &v, sizeof(v));
  }
  return NULL;
}

/* ---------------------------------------------------------------- posting */

struct usable_arg {
  struct rdma_tp *tp;
  int ldev;
  const char *peer;
};

static int local_usable(void *arg, const char *name) { return dev_index(arg, name) >= 0; }

/* A peer device is usable when the rail to it from our chosen device is not paused. */
static int peer_usable(void *arg, const char *name) {
  struct usable_arg *u = arg;
  char path[MC_RDMA_NIC_PATH_MAX + 1];
  snprintf(path, sizeof(path), "%s@%s", u->peer, name);
  struct rdma_ep *ep = rdma_ep_find(u->tp, u->ldev, path);
  if (!ep) return 1;
  pthread_mutex_lock(&ep->mu);
  int ok = mc_rdma_rail_usable(&ep->rail, mc_now_ns());
  pthread_mutex_unlock(&ep->mu);
  return ok;
}

static const struct mc_rdma_desc_buf *peer_buf(const struct mc_rdma_desc *pd, uint64_t addr, uint64_t len) {
  size_t lo = 0, hi = pd->nbuf;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (pd->bufs[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return NULL;
  const struct mc_rdma_desc_buf *b = &pd->bufs[lo - 1];
  uint64_t off = addr - b->addr;
  return len && off < b->len && len <= b->len - off ? b : NULL;
}

/* A device of a row for this retry; with no row, every device in turn (ours: tp's, the peer's: pd's). */
static const char *pick(const struct mc_rdma_row *row, int retry, int (*usable)(void *, const char *), void *arg,
                        const char *(*nth)(void *, size_t), void *narg, size_t ndev) {
  if (row) return mc_rdma_select(row, retry, rnd32(), usable, arg);
  uint32_t r = rnd32();
  for (size_t k = 0; k < ndev; k++) {
    const char *n = nth(narg, (r + (uint32_t)retry + k) % ndev);
    if (usable(arg, n)) return n;
  }
  return NULL;
}
static const char *nth_local(void *a, size_t i) { return ((struct rdma_tp *)a)->devs[i].name; }
static const char *nth_peer(void *a, size_t i) { return ((struct mc_rdma_desc *)a)->devs[i].name; }

/* Chooses the rail for w's current retry and posts it: 0, or -1 with why set. */
static int post_once(struct rdma_tp *tp, struct rdma_wr *w, char *why, size_t why_len) {
  struct mc_slice *s = w->job->s;
  struct mc_rdma_desc *pd = s->desc->rdma;
  const struct mc_rdma_desc_buf *pb = peer_buf(pd, w->remote, w->len);
  if (!pb) return snprintf(why, why_len, "outside the peer's buffers"), -1;
  const char *ln = pick(mc_rdma_matrix_row(&tp->matrix, w->lmr->location), w->retry, local_usable, tp, nth_local, tp,
                        (size_t)tp->ndev);
  if (!ln) return snprintf(why, why_len, "no local device for location %s", w->lmr->location), -1;
  struct usable_arg u = {tp, dev_index(tp, ln), s->desc->name};
  const char *pn = pick(pd->matrix.n ? mc_rdma_matrix_row(&pd->matrix, pb->location) : NULL, w->retry, peer_usable,
                        &u, nth_peer, pd, pd->ndev);
  int pdev = pn ? mc_rdma_desc_dev_index(pd, pn) : -1;
  if (pdev < 0) return snprintf(why, why_len, "every rail from %s to %s is paused", ln, s->desc->name), -1;
  char path[MC_RDMA_NIC_PATH_MAX + 1];
  if (snprintf(path, sizeof(path), "%s@%s", s->desc->name, pn) >= (int)sizeof(path))
    return snprintf(why, why_len, "the peer's NIC path is too long"), -1;
  struct rdma_ep *ep = rdma_ep_get(tp, u.ldev, path);
  if (!ep) return snprintf(why, why_len, "too many endpoints (MC_RDMA_MAX_ENDPOINTS)"), -1;
  w->ldev = u.ldev;
  w->pdev = pdev;
  w->lkey = w->lmr->mr[u.ldev]->lkey;
  w->rkey = pb->rkey[pdev];
  w->opcode = s->opcode == OPCODE_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  return rdma_ep_post(tp, ep, s->desc, w, why, why_len);
}

/* Posts w, walking the rails while posting fails (a refused handshake, a paused rail), within the retry
 * bound; a w that cannot be posted finishes failed. */
static void post_wr(struct rdma_tp *tp, struct rdma_wr *w) {
  char why[256];
  while (post_once(tp, w, why, sizeof(why))) {
    if (w->retry >= tp->retry_max || atomic_load(&tp->stop)) {
      if (!atomic_exchange(&w->job->logged, 1))
        LOG_WARN("rdma: %s of %llu bytes to %s failed: %s", w->job->s->opcode == OPCODE_WRITE ? "write" : "read",
                 (unsigned long long)w->job->s->len, w->job->s->desc->name, why);
      wr_finish(w, 0);
      return;
    }
    w->retry++;
  }
}

static void *retrier_main(void *arg) {
  mc_thread_name("mc-rdma-retry");
  struct rdma_tp *tp = arg;
  pthread_mutex_lock(&tp->rq_mu);
  for (;;) {
    while (!tp->rq_head && !atomic_load(&tp->stop)) pthread_cond_wait(&tp->rq_cv, &tp->rq_mu);
    struct rdma_wr *w = tp->rq_head;
    if (!w) break;
    if (!(tp->rq_head = w->next)) tp->rq_tail = NULL;
    pthread_mutex_unlock(&tp->rq_mu);
    post_wr(tp, w); /* fails at once while stopping */
    pthread_mutex_lock(&tp->rq_mu);
  }
  pthread_mutex_unlock(&tp->rq_mu);
  return NULL;
}

/* The local registration wholly holding [addr, addr+len), with a use taken per work request; NULL if none. */
static struct rdma_mr *local_mr(struct rdma_tp *tp, uint64_t addr, uint64_t len, int uses) {
  pthread_rwlock_rdlock(&tp->mr_mu);
  size_t lo = 0, hi = tp->nmr;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (tp->mrs[mid]->addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  struct rdma_mr *m = lo ? tp->mrs[lo - 1] : NULL;
  if (m && (addr - m->addr >= m->len || len > m->len - (addr - m->addr))) m = NULL;
  if (m) atomic_fetch_add(&m->users, uses);
  pthread_rwlock_unlock(&tp->mr_mu);
  return m;
}

/* Checks the request against both sides' buffers (nothing is posted for a request that fails them), then cuts it
 * into work requests and posts them. */
static void submit_one(struct rdma_tp *tp, struct mc_slice *s) {
  struct mc_rdma_desc *pd = s->desc->rdma;
  const char *op = s->opcode == OPCODE_WRITE ? "write" : "read";
  uint64_t local = (uint64_t)(uintptr_t)s->local;
  if (!pd || !peer_buf(pd, s->remote, s->len)) {
    LOG_WARN("rdma: %s of %llu bytes at 0x%llx is outside every buffer of segment %s; refused", op,
             (unsigned long long)s->len, (unsigned long long)s->remote, s->desc->name);
    mc_slice_done(s, 0, 0);
    return;
  }
  uint64_t k = mc_rdma_slice_count(s->len, tp->slice, tp->ratio);
  struct rdma_mr *m = local_mr(tp, local, s->len, (int)k);
  if (!m) {
    LOG_WARN("rdma: %s of %llu bytes from 0x%llx: not inside one local registration; refused", op,
             (unsigned long long)s->len, (unsigned long long)local);
    mc_slice_done(s, 0, 0);
    return;
  }
  struct rdma_job *j = mc_calloc(1, sizeof(*j));
  j->s = s;
  atomic_init(&j->left, (int)k);
  for (uint64_t off = 0, left = s->len; left;) {
    uint64_t n = mc_rdma_next_slice(left, tp->slice, tp->ratio);
    struct rdma_wr *w = mc_calloc(1, sizeof(*w));
    w->job = j;
    w->lmr = m;
    w->local = local + off;
    w->remote = s->remote + off;
    w->len = n;
    off += n;
    left -= n;
    post_wr(tp, w); /* may finish j: nothing of it is touched after the last one */
  }
}

static void rdma_submit(struct mc_transport *t, struct mc_slice **sl, size_t n) {
  for (size_t i = 0; i < n; i++) submit_one((struct rdma_tp *)t, sl[i]);
}

/* ---------------------------------------------------------------- memory registration */

static int cmp_mr(const void *a, const void *b) {
  const struct rdma_mr *x = *(struct rdma_mr *const *)a, *y = *(struct rdma_mr *const *)b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void mr_free(struct rdma_tp *tp, struct rdma_mr *m) {
  for (int d = 0; d < tp->ndev; d++)
    if (m->mr[d]) ibv_dereg_mr(m->mr[d]);
  mc_free(m);
}

static struct rdma_mr *mr_new(struct rdma_tp *tp, const struct mc_buf *b) {
  struct rdma_mr *m = mc_calloc(1, sizeof(*m));
  m->addr = b->addr;
  m->len = b->len;
  m->remote = b->remote_accessible;
  snprintf(m->location, sizeof(m->location), "%s", b->location ? b->location : "cpu:0");
  int access = IBV_ACCESS_LOCAL_WRITE | (b->remote_accessible ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0);
  for (int d = 0; d < tp->ndev; d++)
    if (!(m->mr[d] = ibv_reg_mr(tp->devs[d].pd, (void *)(uintptr_t)b->addr, b->len, access))) {
      LOG_ERROR("rdma: cannot register %llu bytes at 0x%llx on %s: %s; not reachable over RDMA",
                (unsigned long long)b->len, (unsigned long long)b->addr, tp->devs[d].name, strerror(errno));
      mr_free(tp, m);
      return NULL;
    }
  return m;
}

/* Keeps the MRs of unchanged registrations, registers new ones; removed ones wait on the dead list for
 * mem_quiesce (a posted work request may still use them). */
static void rdma_mem_changed(struct mc_transport *t, struct mc_buf *const *bufs, size_t n) {
  struct rdma_tp *tp = (struct rdma_tp *)t;
  struct rdma_mr **next = mc_calloc(n ? n : 1, sizeof(*next));
  size_t k = 0;
  pthread_rwlock_wrlock(&tp->mr_mu);
  int *kept = mc_calloc(tp->nmr ? tp->nmr : 1, sizeof(int));
  for (size_t i = 0; i < n; i++) {
    struct rdma_mr *m = NULL;
    for (size_t o = 0; o < tp->nmr && !m; o++) /* both sorted: a linear merge would do; n is small */
      if (!kept[o] && tp->mrs[o]->addr == bufs[i]->addr && tp->mrs[o]->len == bufs[i]->len) kept[o] = 1, m = tp->mrs[o];
    if (!m) m = mr_new(tp, bufs[i]);
    if (m) next[k++] = m;
  }
  for (size_t o = 0; o < tp->nmr; o++)
    if (!kept[o]) {
      tp->mrs[o]->next_dead = tp->dead;
      tp->dead = tp->mrs[o];
    }
  mc_free(kept);
  mc_free(tp->mrs);
  qsort(next, k, sizeof(*next), cmp_mr);
  tp->mrs = next;
  tp->nmr = k;
  pthread_rwlock_unlock(&tp->mr_mu);
}

/* Deregisters removed registrations once no work request uses them (bounded by the no-progress deadline,
 * after which their work requests have failed). After ibv_dereg_mr no peer can reach the memory. */
static void rdma_mem_quiesce(struct mc_transport *t) {
  struct rdma_tp *tp = (struct rdma_tp *)t;
  pthread_rwlock_wrlock(&tp->mr_mu);
  struct rdma_mr *dead = tp->dead;
  tp->dead = NULL;
  pthread_rwlock_unlock(&tp->mr_mu);
  uint64_t deadline = mc_now_ns() + 2ull * (uint64_t)tp->io_timeout_ms * 1000000ull;
  while (dead) {
    struct rdma_mr *m = dead;
    dead = m->next_dead;
    while (atomic_load(&m->users) > 0 && mc_now_ns() < deadline) usleep(100);
    mr_free(tp, m);
  }
}

/* ---------------------------------------------------------------- descriptor */

static void rdma_describe(struct mc_transport *t, json_t *desc) {
  struct rdma_tp *tp = (struct rdma_tp *)t;
  json_t *devs = json_array();
  for (int i = 0; i < tp->ndev; i++) {
    char g[48];
    mc_rdma_gid_format(tp->devs[i].gid, g);
    json_array_append_new(devs, json_pack("{s:s, s:i, s:s}", "name", tp->devs[i].name, "lid", tp->devs[i].lid, "gid", g));
  }
  json_object_set_new(desc, "devices", devs);
  json_object_set_new(desc, "priority_matrix", mc_rdma_matrix_to_json(&tp->matrix));
  /* the engine's buffers get their location as name and their keys; one without an MR is left out */
  json_t *bufs = json_object_get(desc, "buffers");
  pthread_rwlock_rdlock(&tp->mr_mu);
  for (size_t i = 0; i < json_array_size(bufs);) {
    json_t *b = json_array_get(bufs, i);
    uint64_t a = (uint64_t)json_integer_value(json_object_get(b, "addr"));
    uint64_t l = (uint64_t)json_integer_value(json_object_get(b, "length"));
    struct rdma_mr *m = NULL;
    for (size_t k = 0; k < tp->nmr && !m; k++)
      if (tp->mrs[k]->addr == a && tp->mrs[k]->len == l && tp->mrs[k]->remote) m = tp->mrs[k];
    if (!m) {
      json_array_remove(bufs, i);
      continue;
    }
    json_t *rk = json_array(), *lk = json_array();
    for (int d = 0; d < tp->ndev; d++) {
      json_array_append_new(rk, json_integer(m->mr[d]->rkey));
      json_array_append_new(lk, json_integer(m->mr[d]->lkey));
    }
    json_object_set_new(b, "name", json_string(m->location));
    json_object_set_new(b, "rkey", rk);
    json_object_set_new(b, "lkey", lk);
    i++;
  }
  pthread_rwlock_unlock(&tp->mr_mu);
}

static int rdma_reachable(struct mc_transport *t, const struct mc_desc *d) {
  (void)t;
  return d->rdma && d->rdma->ndev > 0 && d->rpc_port && d->ip && *d->ip;
}

static char *rdma_connection(struct mc_transport *t, const char *req, size_t len) {
  return rdma_ep_accept((struct rdma_tp *)t, req, len);
}

/* ---------------------------------------------------------------- lifecycle */

static void tp_free(struct rdma_tp *tp) {
  rdma_ep_free_all(tp);
  for (size_t i = 0; i < tp->nmr; i++) mr_free(tp, tp->mrs[i]);
  while (tp->dead) {
    struct rdma_mr *m = tp->dead;
    tp->dead = m->next_dead;
    mr_free(tp, m);
  }
  mc_free(tp->mrs);
  for (int i = 0; i < tp->ndev; i++) dev_close(&tp->devs[i]);
  mc_rdma_matrix_free(&tp->matrix);
  pthread_rwlock_destroy(&tp->mr_mu);
  pthread_mutex_destroy(&tp->ep_mu);
  pthread_mutex_destroy(&tp->rq_mu);
  pthread_cond_destroy(&tp->rq_cv);
  mc_free(tp);
}

/* The devices asked for: installTransport's args[0] when it is a device list (a matrix JSON names its own
 * devices), else MC_TE_FILTERS; NULL: every device. */
static const char *device_filter(struct mc_engine *e, const char **matrix) {
  const char *a = e->install_args ? (const char *)e->install_args[0] : NULL;
  *matrix = a && *a == '{' ? a : NULL;
  if (a && *a && *a != '{') return a;
  return mc_knob_str(MC_KNOB_TE_FILTERS);
}

/* Opens the listed devices with an ACTIVE port; 0, or -1 with why ("no RDMA device", "device rxe9 not found"). */
static int open_devices(struct rdma_tp *tp, const char *filter, char *why, size_t why_len) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n <= 0) {
    if (list) ibv_free_device_list(list);
    return snprintf(why, why_len, "no RDMA device"), -1;
  }
  char last[256] = "";
  for (int i = 0; i < n && tp->ndev < MC_RDMA_MAX_DEVICES; i++) {
    const char *name = ibv_get_device_name(list[i]);
    if (!mc_rdma_name_listed(filter, name)) continue;
    struct rdma_dev *d = &tp->devs[tp->ndev];
    if (dev_open(tp, list[i], d, last, sizeof(last))) {
      LOG_WARN("rdma: %s", last);
      dev_close(d);
      continue;
    }
    d->idx = tp->ndev++;
  }
  ibv_free_device_list(list);
  /* every name the filter lists must be there */
  for (const char *p = filter; p && *p;) {
    char name[MC_RDMA_DEV_NAME_MAX + 1];
    size_t len = strcspn(p, ",");
    const char *s = p;
    while (len && *s == ' ') s++, len--;
    while (len && s[len - 1] == ' ') len--;
    snprintf(name, sizeof(name), "%.*s", (int)MC_MIN(len, MC_RDMA_DEV_NAME_MAX), s);
    if (*name && dev_index(tp, name) < 0)
      return snprintf(why, why_len, "device %s not found%s%s", name, *last ? " or unusable: " : "", last), -1;
    p += strcspn(p, ",");
    if (*p) p++;
  }
  if (!tp->ndev) return snprintf(why, why_len, "no RDMA device%s%s", *last ? ": " : "", last), -1;
  return 0;
}

static int build_matrix(struct rdma_tp *tp, const char *given, char *why, size_t why_len) {
  char err[200];
  if (given) {
    if (mc_rdma_matrix_parse(given, &tp->matrix, err, sizeof(err)))
      return snprintf(why, why_len, "the NIC priority matrix is refused: %s", err), -1;
    return 0;
  }
  struct mc_rdma_dev_info info[MC_RDMA_MAX_DEVICES];
  int numa[MC_RDMA_MAX_DEVICES + 1], nn = 0;
  numa[nn++] = 0;
  for (int i = 0; i < tp->ndev; i++) {
    info[i].name = tp->devs[i].name;
    info[i].numa_node = tp->devs[i].numa;
    int seen = 0;
    for (int k = 0; k < nn; k++) seen |= numa[k] == tp->devs[i].numa;
    if (!seen && tp->devs[i].numa >= 0) numa[nn++] = tp->devs[i].numa;
  }
  if (mc_rdma_matrix_build(info, (size_t)tp->ndev, numa, (size_t)nn, NULL, &tp->matrix))
    return snprintf(why, why_len, "no device for the NIC priority matrix"), -1;
  return 0;
}

/* "a,b,c": the devices a matrix names (malloc'ed). */
static char *matrix_devices(const struct mc_rdma_matrix *m) {
  size_t cap = 1;
  for (size_t i = 0; i < m->n; i++)
    for (size_t k = 0; k < m->rows[i].npref + m->rows[i].nother; k++) cap += MC_RDMA_DEV_NAME_MAX + 1;
  char *s = mc_calloc(1, cap);
  for (size_t i = 0; i < m->n; i++)
    for (size_t k = 0; k < m->rows[i].npref + m->rows[i].nother; k++) {
      const struct mc_rdma_row *r = &m->rows[i];
      const char *n = k < r->npref ? r->pref[k] : r->other[k - r->npref];
      if (!mc_rdma_name_listed(s, n) || !*s) strcat(strcat(s, *s ? "," : ""), n);
    }
  return s;
}

/* Stops the pollers (after fini let the flushes in), then the retry thread, which fails what is queued. */
static void stop_threads(struct rdma_tp *tp) {
  atomic_store(&tp->stop, 1);
  atomic_store(&tp->quit, 1);
  for (int i = 0; i < tp->ndev; i++) {
    uint64_t one = 1;
    if (!tp->devs[i].poller_started) continue;
    (void)!write(tp->devs[i].wake_fd, &one, sizeof(one));
    pthread_join(tp->devs[i].poller, NULL);
  }
  pthread_mutex_lock(&tp->rq_mu);
  pthread_cond_broadcast(&tp->rq_cv);
  pthread_mutex_unlock(&tp->rq_mu);
  if (tp->retrier_started) pthread_join(tp->retrier, NULL);
}

static int rdma_init(struct mc_engine *e, struct mc_transport **out, char *why, size_t why_len) {
  struct rdma_tp *tp = mc_calloc(1, sizeof(*tp));
  tp->base.eng = e;
  tp->base.ops = &mc_rdma_transport_ops;
  tp->qp_per_ep = (int)mc_knob_long(MC_KNOB_RDMA_QP_PER_EP);
  tp->max_wr = (int)mc_knob_long(MC_KNOB_RDMA_MAX_WR);
  tp->max_eps = (int)mc_knob_long(MC_KNOB_RDMA_MAX_ENDPOINTS);
  tp->retry_max = (int)mc_knob_long(MC_KNOB_RDMA_RETRY_COUNT);
  tp->qp_timeout = (int)mc_knob_long(MC_KNOB_RDMA_QP_TIMEOUT);
  tp->qp_retry = (int)mc_knob_long(MC_KNOB_RDMA_QP_RETRY_CNT);
  tp->connect_timeout_ms = (int)mc_knob_long(MC_KNOB_RDMA_CONNECT_TIMEOUT_MS);
  tp->io_timeout_ms = (int)mc_knob_long(MC_KNOB_RDMA_IO_TIMEOUT_MS);
  tp->slice = (uint64_t)mc_knob_long(MC_KNOB_SLICE_SIZE);
  tp->ratio = (unsigned)mc_knob_long(MC_KNOB_FRAGMENT_RATIO);
  tp->pause_ns = (uint64_t)mc_knob_long(MC_KNOB_RDMA_RAIL_PAUSE_SECONDS) * 1000000000ull;
  pthread_rwlock_init(&tp->mr_mu, NULL);
  pthread_mutex_init(&tp->ep_mu, NULL);
  pthread_mutex_init(&tp->rq_mu, NULL);
  pthread_cond_init(&tp->rq_cv, NULL);
  const char *matrix = NULL, *filter = device_filter(e, &matrix);
  char *named = NULL; /* a given matrix: its devices, unless a filter narrows them */
  int rc = matrix ? build_matrix(tp, matrix, why, why_len) : 0;
  if (!rc && matrix && !filter) filter = named = matrix_devices(&tp->matrix);
  if (!rc) rc = open_devices(tp, filter, why, why_len);
  mc_free(named);
  if (!rc && !matrix) rc = build_matrix(tp, NULL, why, why_len);
  for (int i = 0; !rc && i < tp->ndev; i++)
    if (!(rc = pthread_create(&tp->devs[i].poller, NULL, poller_main, &tp->devs[i]))) tp->devs[i].poller_started = 1;
  if (!rc && !(rc = pthread_create(&tp->retrier, NULL, retrier_main, tp))) tp->retrier_started = 1;
  if (rc) {
    if (!*why) snprintf(why, why_len, "cannot start threads");
    LOG_WARN("rdma: %s", why);
    stop_threads(tp);
    tp_free(tp);
    return ERR_DEVICE_NOT_FOUND;
  }
  LOG_INFO("rdma: %d device(s), %d QPs per endpoint", tp->ndev, tp->qp_per_ep);
  *out = &tp->base;
  return 0;
}

/* Flushes what is outstanding (every endpoint broken: its work requests come back flushed and, the transport
 * stopping, failed), then stops the threads and frees every verbs object. */
static void rdma_fini(struct mc_transport *t) {
  struct rdma_tp *tp = (struct rdma_tp *)t;
  atomic_store(&tp->stop, 1);
  rdma_ep_break_all(tp);
  uint64_t deadline = mc_now_ns() + 5000000000ull;
  for (int i = 0; i < tp->ndev; i++) {
    uint64_t one = 1;
    (void)!write(tp->devs[i].wake_fd, &one, sizeof(one));
  }
  for (int i = 0; i < tp->ndev; i++) /* the pollers run until the flushes are in */
    while (atomic_load(&tp->devs[i].inflight) > 0 && mc_now_ns() < deadline) usleep(1000);
  stop_threads(tp);
  tp_free(tp);
}

const struct mc_transport_ops mc_rdma_transport_ops = {
    .name = "rdma",
    .init = rdma_init,
    .fini = rdma_fini,
    .describe = rdma_describe,
    .reachable = rdma_reachable,
    .submit = rdma_submit,
    .mem_changed = rdma_mem_changed,
    .mem_quiesce = rdma_mem_quiesce,
    .connection = rdma_connection,
};
