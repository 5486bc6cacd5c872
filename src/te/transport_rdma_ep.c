/* RDMA endpoints (docs/rdma.md, "Endpoints and queue pairs"): per (local device, peer NIC path) a set of RC
 * queue pairs, set up lazily through the Connection handshake over the control RPC (type 0). The initiator
 * creates its QPs, sends their numbers; the passive side creates as many, moves them to RTR and RTS towards
 * the initiator's and answers with its own; the initiator then moves its QPs likewise.
 *
 * A completion error breaks the endpoint it came from only: its QPs go to the error state (the rest of its
 * work requests come back flushed and are retried), and once nothing is outstanding the next use destroys
 * the QPs and handshakes afresh. The handshake is hostile input on the passive side: it is decoded by
 * mc_rdma_hs_decode, its QP count is bounded (RDMA_MAX_QP) and so is the number of endpoints peers may make
 * us hold (MC_RDMA_MAX_ENDPOINTS; at the cap the oldest one goes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "net/ctrl_rpc.h"
#include "te/transport_rdma.h"

#define HS_RETRY_GAP_NS 1000000000ull /* after a failed handshake, uses within this fail at once */

static enum ibv_mtu mtu_enum(uint32_t bytes) {
  return bytes >= 4096 ? IBV_MTU_4096
         : bytes >= 2048 ? IBV_MTU_2048
         : bytes >= 1024 ? IBV_MTU_1024
         : bytes >= 512  ? IBV_MTU_512
                         : IBV_MTU_256;
}
static uint32_t mtu_bytes(enum ibv_mtu m) { return 128u << m; }

/* ---- queue pairs ---- */

static struct ibv_qp *qp_create(struct rdma_tp *tp, struct rdma_dev *dev) {
  struct ibv_qp_init_attr a = {
      .send_cq = dev->cq,
      .recv_cq = dev->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = (uint32_t)tp->max_wr, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
  };
  struct ibv_qp *qp = ibv_create_qp(dev->pd, &a);
  if (!qp) return NULL;
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = dev->port,
                           .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ibv_destroy_qp(qp);
    return NULL;
  }
  return qp;
}

/* INIT -> RTR -> RTS towards the remote QP. The ACK timeout and retry count bound how long a dead peer takes
 * to give an error completion (MC_RDMA_QP_TIMEOUT, MC_RDMA_QP_RETRY_CNT: ~0.5 s by default). rnr_retry is 6, not 7
 * (7 retries receiver-not-ready forever: a destroyed peer QP that answers RNR would never fail); one-sided WRITE
 * and READ never meet RNR from a live peer. */
static int qp_connect(struct rdma_tp *tp, struct rdma_dev *dev, struct ibv_qp *qp, uint32_t rqpn, uint16_t lid,
                      const uint8_t gid[16], enum ibv_mtu mtu) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = rqpn, .rq_psn = 0,
                          .max_dest_rd_atomic = (uint8_t)dev->max_rd_atomic, .min_rnr_timer = 12};
  a.ah_attr.dlid = lid;
  a.ah_attr.port_num = dev->port;
  if (dev->roce || !lid) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) return rc;
  struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = (uint8_t)tp->qp_timeout,
                          .retry_cnt = (uint8_t)tp->qp_retry, .rnr_retry = 6, .sq_psn = 0,
                          .max_rd_atomic = (uint8_t)dev->max_rd_atomic};
  return ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC);
}

static void qps_destroy(struct rdma_ep *ep) {
  for (int i = 0; i < ep->nqp; i++)
    if (ep->qp[i]) ibv_destroy_qp(ep->qp[i]);
  memset(ep->qp, 0, sizeof(ep->qp));
  memset(ep->qp_out, 0, sizeof(ep->qp_out));
  ep->nqp = 0;
}

/* Creates n QPs on ep; 0 or -1 (none left). */
static int qps_create(struct rdma_tp *tp, struct rdma_ep *ep, int n) {
  for (ep->nqp = 0; ep->nqp < n; ep->nqp++)
    if (!(ep->qp[ep->nqp] = qp_create(tp, ep->dev))) {
      qps_destroy(ep);
      return -1;
    }
  return 0;
}

/* Flushes everything outstanding on ep (ep->mu held): its QPs to the error state; what was queued on it goes to
 * the retry thread unposted (no retry is charged: it never went out). */
static void ep_break(struct rdma_tp *tp, struct rdma_ep *ep) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
  for (int i = 0; i < ep->nqp; i++) ibv_modify_qp(ep->qp[i], &a, IBV_QP_STATE);
  ep->state = EP_BROKEN;
  while (ep->pend_head) {
    struct rdma_wr *w = ep->pend_head;
    if (!(ep->pend_head = w->next)) ep->pend_tail = NULL;
    rdma_retry_push(tp, w); /* rq_mu is a leaf */
  }
  pthread_cond_broadcast(&ep->cv);
}

void rdma_ep_break_all(struct rdma_tp *tp) {
  pthread_mutex_lock(&tp->ep_mu);
  for (struct rdma_ep *ep = tp->eps; ep; ep = ep->next) {
    pthread_mutex_lock(&ep->mu);
    ep_break(tp, ep);
    pthread_mutex_unlock(&ep->mu);
  }
  pthread_mutex_unlock(&tp->ep_mu);
}

/* ---- endpoint lists ---- */

static struct rdma_ep *ep_new(struct rdma_dev *dev, const char *peer_path, int passive) {
  struct rdma_ep *ep = mc_calloc(1, sizeof(*ep));
  ep->dev = dev;
  snprintf(ep->peer_path, sizeof(ep->peer_path), "%s", peer_path);
  ep->passive = passive;
  ep->created_ns = mc_now_ns();
  pthread_mutex_init(&ep->mu, NULL);
  mc_cond_init_monotonic(&ep->cv);
  return ep;
}

static void ep_free(struct rdma_ep *ep) {
  qps_destroy(ep);
  pthread_mutex_destroy(&ep->mu);
  pthread_cond_destroy(&ep->cv);
  mc_free(ep);
}

static struct rdma_ep *find_in(struct rdma_ep *l, int ldev, const char *peer_path) {
  for (; l; l = l->next)
    if (l->dev->idx == ldev && !strcmp(l->peer_path, peer_path)) return l;
  return NULL;
}

struct rdma_ep *rdma_ep_find(struct rdma_tp *tp, int ldev, const char *peer_path) {
  pthread_mutex_lock(&tp->ep_mu);
  struct rdma_ep *ep = find_in(tp->eps, ldev, peer_path);
  pthread_mutex_unlock(&tp->ep_mu);
  return ep;
}

struct rdma_ep *rdma_ep_get(struct rdma_tp *tp, int ldev, const char *peer_path) {
  pthread_mutex_lock(&tp->ep_mu);
  struct rdma_ep *ep = find_in(tp->eps, ldev, peer_path);
  if (!ep && tp->neps < tp->max_eps) {
    ep = ep_new(&tp->devs[ldev], peer_path, 0);
    ep->next = tp->eps;
    tp->eps = ep;
    tp->neps++;
  }
  pthread_mutex_unlock(&tp->ep_mu);
  if (!ep) LOG_WARN_LIMITED("rdma: %d endpoints open (MC_RDMA_MAX_ENDPOINTS): none for %s", tp->max_eps, peer_path);
  return ep;
}

void rdma_ep_free_all(struct rdma_tp *tp) {
  for (int k = 0; k < 2; k++) {
    struct rdma_ep *l = k ? tp->peps : tp->eps;
    while (l) {
      struct rdma_ep *n = l->next;
      ep_free(l);
      l = n;
    }
  }
  tp->eps = tp->peps = NULL;
  tp->neps = tp->npeps = 0;
}

/* ---- the handshake ---- */

static void hs_fill(struct rdma_tp *tp, struct rdma_ep *ep, struct mc_rdma_hs *h, const char *local_path) {
  memset(h, 0, sizeof(*h));
  snprintf(h->local_nic_path, sizeof(h->local_nic_path), "%s", local_path);
  snprintf(h->peer_nic_path, sizeof(h->peer_nic_path), "%s", ep->peer_path);
  h->lid = ep->dev->lid;
  memcpy(h->gid, ep->dev->gid, 16);
  h->nqp = (uint32_t)ep->nqp;
  for (int i = 0; i < ep->nqp; i++) h->qpn[i] = ep->qp[i]->qp_num;
  h->mtu = mtu_bytes(ep->dev->mtu);
  h->ready_ack = -1;
  (void)tp;
}

/* Sets up ep's QPs with the peer described by d (ep->mu not held; ep is CONNECTING, so ours alone). */
static int ep_connect(struct rdma_tp *tp, struct rdma_ep *ep, const struct mc_desc *d, char *why, size_t why_len) {
  char local[MC_RDMA_NIC_PATH_MAX + 1];
  int n = snprintf(local, sizeof(local), "%s@%s", tp->base.eng->name, ep->dev->name);
  if (n < 0 || (size_t)n >= sizeof(local)) return snprintf(why, why_len, "our NIC path is too long"), -1;
  if (qps_create(tp, ep, tp->qp_per_ep)) return snprintf(why, why_len, "cannot create QPs: %s", strerror(errno)), -1;
  struct mc_rdma_hs h, r;
  hs_fill(tp, ep, &h, local);
  char *req = mc_rdma_hs_encode(&h), *reply = NULL, err[200];
  int rc = mc_rpc_call(d->ip, d->rpc_port, MC_RPC_CONNECTION, req, &reply, tp->connect_timeout_ms);
  free(req);
  if (rc) {
    snprintf(why, why_len, "handshake with %s:%u: %s", d->ip, d->rpc_port, strerror(-rc));
  } else if (mc_rdma_hs_decode(reply, strlen(reply), &r, err, sizeof(err))) {
    snprintf(why, why_len, "handshake reply refused: %s", err);
    rc = -1;
  } else if (r.reply_msg[0]) {
    snprintf(why, why_len, "peer refused the handshake: %.100s", r.reply_msg);
    rc = -1;
  } else if ((int)r.nqp != ep->nqp || strcmp(r.local_nic_path, ep->peer_path)) {
    snprintf(why, why_len, "handshake reply is for %u QPs of %.60s, not %d of ours", r.nqp, r.local_nic_path, ep->nqp);
    rc = -1;
  }
  mc_free(reply);
  enum ibv_mtu mtu = r.mtu && mtu_enum(r.mtu) < ep->dev->mtu ? mtu_enum(r.mtu) : ep->dev->mtu;
  for (int i = 0; !rc && i < ep->nqp; i++)
    if ((rc = qp_connect(tp, ep->dev, ep->qp[i], r.qpn[i], r.lid, r.gid, mtu)))
      snprintf(why, why_len, "cannot move a QP to RTR/RTS: %s", strerror(rc));
  if (rc) qps_destroy(ep);
  return rc ? -1 : 0;
}

/* Makes ep READY (ep->mu held on entry and return; released during the handshake). */
static int ep_ready(struct rdma_tp *tp, struct rdma_ep *ep, const struct mc_desc *d, char *why, size_t why_len) {
  uint64_t deadline = mc_now_ns() + (uint64_t)tp->io_timeout_ms * 1000000ull;
  while (ep->state != EP_READY) {
    if (atomic_load(&tp->stop)) return snprintf(why, why_len, "transport stopping"), -1;
    if (ep->state == EP_CONNECTING || (ep->state == EP_BROKEN && ep->outstanding > 0)) {
      struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull), .tv_nsec = (long)(deadline % 1000000000ull)};
      if (pthread_cond_timedwait(&ep->cv, &ep->mu, &ts) == ETIMEDOUT)
        return snprintf(why, why_len, "endpoint %s did not settle", ep->peer_path), -1;
      continue;
    }
    if (ep->err[0] && mc_now_ns() - ep->last_progress_ns < HS_RETRY_GAP_NS) /* failed just now: do not hammer */
      return snprintf(why, why_len, "%s", ep->err), -1;
    qps_destroy(ep);
    ep->state = EP_CONNECTING;
    pthread_mutex_unlock(&ep->mu);
    int rc = ep_connect(tp, ep, d, why, why_len);
    pthread_mutex_lock(&ep->mu);
    ep->state = rc ? EP_IDLE : EP_READY;
    ep->last_progress_ns = mc_now_ns();
    snprintf(ep->err, sizeof(ep->err), "%s", rc ? why : "");
    pthread_cond_broadcast(&ep->cv);
    if (rc) return -1;
    LOG_INFO("rdma: endpoint %s@%s -> %s ready (%d QPs)", tp->base.eng->name, ep->dev->name, ep->peer_path, ep->nqp);
  }
  return 0;
}

/* Posts w on a QP of the READY ep with room (ep->mu held): 0 posted, 1 every QP full, 2 the device's CQ full,
 * -1 refused (ep broken, why set). */
static int try_post(struct rdma_ep *ep, struct rdma_wr *w, int max_wr, char *why, size_t why_len) {
  struct rdma_dev *dev = ep->dev;
  int q = -1;
  for (int i = 0; i < ep->nqp && q < 0; i++) {
    int k = (int)((ep->rr + (unsigned)i) % (unsigned)ep->nqp);
    if (ep->qp_out[k] < max_wr) q = k;
  }
  if (q < 0) return 1;
  int was = atomic_fetch_add(&dev->inflight, 1);
  if (was >= dev->cqe) {
    atomic_fetch_sub(&dev->inflight, 1);
    return 2;
  }
  struct ibv_sge sge = {.addr = w->local, .length = (uint32_t)w->len, .lkey = w->lkey};
  struct ibv_send_wr wr = {.wr_id = (uintptr_t)w, .sg_list = &sge, .num_sge = 1, .opcode = w->opcode,
                           .send_flags = IBV_SEND_SIGNALED}, *bad = NULL;
  wr.wr.rdma.remote_addr = w->remote;
  wr.wr.rdma.rkey = w->rkey;
  w->ep = ep;
  w->qp = q;
  if (!ep->outstanding) ep->last_progress_ns = mc_now_ns();
  MC_TSAN_RELEASE(w); /* w travels to the poller through the device and its CQ */
  int rc = ibv_post_send(ep->qp[q], &wr, &bad);
  if (rc) {
    atomic_fetch_sub(&dev->inflight, 1);
    snprintf(why, why_len, "ibv_post_send: %s", strerror(rc));
    return -1;
  }
  ep->qp_out[q]++;
  ep->outstanding++;
  ep->rr = (unsigned)q + 1;
  if (!was) { /* the poller may sleep without a deadline while nothing is outstanding: its watchdog is due */
    uint64_t one = 1;
    (void)!write(dev->wake_fd, &one, sizeof(one));
  }
  return 0;
}

int rdma_ep_post(struct rdma_tp *tp, struct rdma_ep *ep, const struct mc_desc *d, struct rdma_wr *w, char *why,
                 size_t why_len) {
  pthread_mutex_lock(&ep->mu);
  uint64_t deadline = mc_now_ns() + (uint64_t)tp->io_timeout_ms * 1000000ull;
  int rc = -1;
  while (!ep_ready(tp, ep, d, why, why_len)) {
    if (atomic_load(&tp->stop)) { /* fini flushed the QPs already: nothing may be posted after that */
      snprintf(why, why_len, "transport stopping");
      break;
    }
    int r = ep->pend_head ? 1 : try_post(ep, w, tp->max_wr, why, why_len); /* in order behind what is queued */
    if (r == 1) { /* the QPs are full: their completions will post it (the poller) */
      w->next = NULL;
      if (ep->pend_tail) ep->pend_tail->next = w;
      else ep->pend_head = w;
      ep->pend_tail = w;
      r = 0;
    }
    if (r <= 0) {
      if (r < 0) ep_break(tp, ep); /* a QP that refuses work is no good any more */
      rc = r;
      break;
    }
    /* the device's CQ is full (many busy endpoints): wait for room, which any completion of it may bring */
    uint64_t t = MC_MIN(deadline, mc_now_ns() + 10000000ull);
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull)};
    pthread_cond_timedwait(&ep->cv, &ep->mu, &ts);
    if (mc_now_ns() >= deadline) {
      snprintf(why, why_len, "no room on device %s within %d ms", ep->dev->name, tp->io_timeout_ms);
      break;
    }
  }
  pthread_mutex_unlock(&ep->mu);
  return rc;
}

/* Posts what is queued on ep while its QPs have room (ep->mu held, the poller). */
static void post_pending(struct rdma_tp *tp, struct rdma_ep *ep) {
  char why[160];
  while (ep->state == EP_READY && ep->pend_head && !atomic_load(&tp->stop)) {
    struct rdma_wr *w = ep->pend_head;
    int r = try_post(ep, w, tp->max_wr, why, sizeof(why));
    if (r == 2 && !ep->outstanding) { /* the CQ is full of other endpoints' work: none of ours will post it */
      for (; ep->pend_head; ep->pend_head = w) {
        w = ep->pend_head->next;
        rdma_retry_push(tp, ep->pend_head);
      }
      ep->pend_tail = NULL;
      return;
    }
    if (r > 0) return; /* full again */
    if (!(ep->pend_head = w->next)) ep->pend_tail = NULL;
    if (r < 0) {
      LOG_WARN("rdma: endpoint %s -> %s: %s; resetting it", ep->dev->name, ep->peer_path, why);
      rdma_retry_push(tp, w);
      ep_break(tp, ep);
    }
  }
}

void rdma_ep_completed(struct rdma_tp *tp, struct rdma_wr *w, int status) {
  struct rdma_ep *ep = w->ep;
  int has_alt = tp->ndev > 1 || (w->job->s->desc->rdma && w->job->s->desc->rdma->ndev > 1);
  atomic_fetch_sub(&ep->dev->inflight, 1); /* first: post_pending below may use the room */
  pthread_mutex_lock(&ep->mu);
  ep->qp_out[w->qp]--;
  ep->outstanding--;
  ep->last_progress_ns = mc_now_ns();
  if (status != IBV_WC_SUCCESS && status != IBV_WC_WR_FLUSH_ERR) { /* a flush is no fault of the rail */
    if (mc_rdma_rail_error(&ep->rail, mc_now_ns(), has_alt, tp->pause_ns))
      LOG_WARN("rdma: rail %s -> %s paused for %llu s", ep->dev->name, ep->peer_path,
               (unsigned long long)(tp->pause_ns / 1000000000ull));
    if (ep->state == EP_READY) {
      LOG_WARN("rdma: endpoint %s -> %s: %s; resetting it", ep->dev->name, ep->peer_path,
               ibv_wc_status_str((enum ibv_wc_status)status));
      ep_break(tp, ep);
    }
  }
  post_pending(tp, ep);
  pthread_cond_broadcast(&ep->cv);
  pthread_mutex_unlock(&ep->mu);
}

void rdma_ep_watchdog(struct rdma_tp *tp, struct rdma_dev *dev) {
  uint64_t now = mc_now_ns(), limit = (uint64_t)tp->io_timeout_ms * 1000000ull;
  pthread_mutex_lock(&tp->ep_mu);
  for (struct rdma_ep *ep = tp->eps; ep; ep = ep->next) {
    if (ep->dev != dev) continue;
    pthread_mutex_lock(&ep->mu);
    if (ep->state == EP_READY && ep->outstanding > 0 && now - ep->last_progress_ns > limit) {
      LOG_WARN("rdma: endpoint %s -> %s: no completion for %d ms; resetting it", dev->name, ep->peer_path,
               tp->io_timeout_ms);
      mc_rdma_rail_error(&ep->rail, now, tp->ndev > 1, tp->pause_ns);
      ep_break(tp, ep);
    }
    pthread_mutex_unlock(&ep->mu);
  }
  pthread_mutex_unlock(&tp->ep_mu);
}

/* ---- the passive side ---- */

/* A refusal, logged rate-limited: a peer can send handshakes at will. */
static char *reject(const char *fmt, const char *arg) {
  char msg[MC_RDMA_REPLY_MSG_MAX];
  snprintf(msg, sizeof(msg), fmt, arg);
  LOG_WARN_LIMITED("rdma: Connection request refused: %s", msg);
  json_t *o = json_pack("{s:s}", "reply_msg", msg);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

/* Inserts ep into the passive list, replacing the one with the same key and making room at the cap (the
 * oldest goes); what left the list is returned for destruction outside the lock. */
static struct rdma_ep *passive_insert(struct rdma_tp *tp, struct rdma_ep *ep) {
  struct rdma_ep *gone = NULL, **pp, **oldest = NULL;
  pthread_mutex_lock(&tp->ep_mu);
  for (pp = &tp->peps; *pp; pp = &(*pp)->next)
    if ((*pp)->dev == ep->dev && !strcmp((*pp)->peer_path, ep->peer_path)) break;
  if (!*pp && tp->npeps >= tp->max_eps)
    for (struct rdma_ep **q = &tp->peps; *q; q = &(*q)->next)
      if (!oldest || (*q)->created_ns < (*oldest)->created_ns) oldest = q;
  if (!*pp) pp = oldest;
  if (pp && *pp) {
    gone = *pp;
    *pp = gone->next;
    tp->npeps--;
  }
  ep->next = tp->peps;
  tp->peps = ep;
  tp->npeps++;
  pthread_mutex_unlock(&tp->ep_mu);
  return gone;
}

char *rdma_ep_accept(struct rdma_tp *tp, const char *req, size_t len) {
  struct mc_rdma_hs h, r;
  char err[200];
  size_t off;
  if (mc_rdma_hs_decode(req, len, &h, err, sizeof(err))) return reject("%s", err);
  if (h.reply_msg[0]) return reject("%s", "a request carries no reply_msg");
  if (h.nqp > RDMA_MAX_QP) return reject("%s", "more QPs than this engine accepts per endpoint (16)");
  mc_rdma_nic_path_split(h.peer_nic_path, &off);
  struct rdma_dev *dev = NULL;
  for (int i = 0; i < tp->ndev; i++)
    if (!strcmp(tp->devs[i].name, h.peer_nic_path + off)) dev = &tp->devs[i];
  if (!dev) return reject("no device %s here", h.peer_nic_path + off);
  struct rdma_ep *ep = ep_new(dev, h.local_nic_path, 1);
  enum ibv_mtu mtu = h.mtu && mtu_enum(h.mtu) < dev->mtu ? mtu_enum(h.mtu) : dev->mtu;
  int rc = qps_create(tp, ep, (int)h.nqp) ? errno ? errno : EIO : 0;
  for (uint32_t i = 0; !rc && i < h.nqp; i++) rc = qp_connect(tp, dev, ep->qp[i], h.qpn[i], h.lid, h.gid, mtu);
  if (rc) {
    ep_free(ep);
    return reject("cannot set up QPs: %s", strerror(rc));
  }
  ep->state = EP_READY;
  hs_fill(tp, ep, &r, h.peer_nic_path);
  r.mtu = mtu_bytes(mtu);
  struct rdma_ep *gone = passive_insert(tp, ep);
  if (gone) ep_free(gone); /* a peer's earlier endpoint (it re-handshakes after a reset), or the oldest */
  LOG_INFO("rdma: endpoint for %s on %s accepted (%u QPs)", h.local_nic_path, dev->name, h.nqp);
  return mc_rdma_hs_encode(&r);
}
