/* The RDMA transport's shared state (docs/rdma.md): transport_rdma.c (devices, pollers, memory registration,
 * the descriptor, submission and completion) and transport_rdma_ep.c (endpoints: queue pairs and the
 * Connection handshake). Not a header for anything else.
 *
 * Locks, in this order: rdma_tp.ep_mu (the endpoint lists; never held while waiting on the network), each
 * endpoint's mu (its QPs, state, counters, queue and rail; held while posting), rdma_tp.rq_mu (the retry queue, a
 * leaf); rdma_tp.mr_mu (a rwlock over the MR table) is a leaf too. Our (active) endpoints are never freed before
 * fini (a reset only replaces their QPs), so a work request may point at its endpoint; a passive one is freed
 * when replaced, and no work request ever points at one. */
#ifndef MC_TE_TRANSPORT_RDMA_H
#define MC_TE_TRANSPORT_RDMA_H
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "te/engine_internal.h"
#include "te/rdma_logic.h"

#define RDMA_MAX_QP 16 /* MC_RDMA_QP_PER_EP's bound, and the most QPs a peer's handshake makes us create */

struct rdma_tp;

struct rdma_dev {
  struct rdma_tp *tp;
  int idx;
  char name[MC_RDMA_DEV_NAME_MAX + 1];
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  int cqe;
  atomic_int inflight; /* work requests posted and not completed: at most cqe (no CQ overrun) */
  uint8_t port;
  uint16_t lid;
  int gid_index;
  uint8_t gid[16];
  enum ibv_mtu mtu;
  int roce; /* link layer Ethernet: the address handle carries a GRH */
  int max_rd_atomic;
  int numa;
  int wake_fd; /* eventfd: wakes the poller for shutdown */
  pthread_t poller;
  int poller_started;
};

/* A local registration: one MR per device (devices order). */
struct rdma_mr {
  struct rdma_mr *next_dead;
  uint64_t addr, len;
  char location[MC_RDMA_LOCATION_MAX + 1];
  int remote;
  atomic_int users; /* work requests using it as their local side */
  struct ibv_mr *mr[MC_RDMA_MAX_DEVICES];
};

enum { EP_IDLE, EP_CONNECTING, EP_READY, EP_BROKEN };

/* An endpoint: a (local device, peer NIC path) pair, i.e. a rail, and its QPs. Active endpoints are ours to
 * post on (set up by our handshake); passive ones are held for a peer whose handshake we answered. */
struct rdma_ep {
  struct rdma_ep *next;
  struct rdma_dev *dev;
  char peer_path[MC_RDMA_NIC_PATH_MAX + 1];
  int passive;
  uint64_t created_ns;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* state changes, freed capacity */
  int state;
  int nqp;
  struct ibv_qp *qp[RDMA_MAX_QP];
  int qp_out[RDMA_MAX_QP]; /* outstanding per QP */
  int outstanding;
  unsigned rr;
  uint64_t last_progress_ns; /* last completion, or the post that found nothing outstanding */
  /* accepted while every QP was full (READY only): posted by the poller as completions make room, in order; handed
   * to the retry thread when the endpoint breaks */
  struct rdma_wr *pend_head, *pend_tail;
  struct mc_rdma_rail rail;
  char err[160]; /* why the last handshake failed */
};

/* A part of an mc_slice carried by one work request. */
struct rdma_job {
  struct mc_slice *s;
  atomic_int left;
  atomic_int failed;
  atomic_int logged; /* its first failure is logged, not every work request's */
};
struct rdma_wr {
  struct rdma_wr *next; /* retry queue or endpoint pending queue link (one at a time) */
  struct rdma_job *job;
  struct rdma_mr *lmr;
  uint64_t local, remote, len;
  int retry;
  struct rdma_ep *ep;
  int qp;
  int ldev, pdev; /* the device indices (ours, the peer's descriptor's) it went out on */
  uint32_t lkey, rkey; /* for ldev and pdev */
  enum ibv_wr_opcode opcode;
};

struct rdma_tp {
  struct mc_transport base;
  int ndev;
  struct rdma_dev devs[MC_RDMA_MAX_DEVICES];
  struct mc_rdma_matrix matrix;
  atomic_int stop; /* no more posting: fini (work requests fail) */
  atomic_int quit; /* the pollers leave */
  int retrier_started;
  /* knobs */
  int qp_per_ep, max_wr, max_eps, retry_max, qp_timeout, qp_retry;
  int connect_timeout_ms, io_timeout_ms;
  uint64_t slice, pause_ns;
  unsigned ratio;

  pthread_rwlock_t mr_mu; /* guards mrs (sorted by addr) and dead */
  struct rdma_mr **mrs;
  size_t nmr;
  struct rdma_mr *dead; /* removed, deregistered by mem_quiesce once no work request uses them */

  pthread_mutex_t ep_mu; /* guards the two lists and their counts */
  struct rdma_ep *eps, *peps;
  int neps, npeps;

  pthread_mutex_t rq_mu; /* the retry queue, served by the retry thread */
  pthread_cond_t rq_cv;
  struct rdma_wr *rq_head, *rq_tail;
  pthread_t retrier;
};

/* transport_rdma.c: queues w for the retry thread (which posts it again, choosing its rail anew). */
void rdma_retry_push(struct rdma_tp *tp, struct rdma_wr *w);

/* transport_rdma_ep.c */
/* Our active endpoint from local device ldev to peer path, created (IDLE) on first use; NULL at the cap. */
struct rdma_ep *rdma_ep_get(struct rdma_tp *tp, int ldev, const char *peer_path);
/* The endpoint if it exists (a rail lookup: not created). */
struct rdma_ep *rdma_ep_find(struct rdma_tp *tp, int ldev, const char *peer_path);
/* Makes ep READY (handshaking over d's control RPC when needed) and posts w (its lkey, rkey, opcode set) on one of
 * its QPs; while they are all full w is queued on ep, posted by the poller as completions make room (so the
 * submitting thread does not wait for the wire). 0 (posted or queued: w belongs to the transport), or -1 with why
 * set (not posted). */
int rdma_ep_post(struct rdma_tp *tp, struct rdma_ep *ep, const struct mc_desc *d, struct rdma_wr *w, char *why,
                 size_t why_len);
/* A completion of w came back (under nothing): frees its slot. err: its status was an error, which breaks the
 * endpoint (its QPs go to the error state, flushing the rest; the next use re-handshakes). */
void rdma_ep_completed(struct rdma_tp *tp, struct rdma_wr *w, int err);
/* Endpoints with work outstanding and no completion for io_timeout are broken (their QPs flushed). */
void rdma_ep_watchdog(struct rdma_tp *tp, struct rdma_dev *dev);
/* The Connection handshake's passive side (control RPC type 0): a malloc'ed reply. */
char *rdma_ep_accept(struct rdma_tp *tp, const char *req, size_t len);
void rdma_ep_free_all(struct rdma_tp *tp);
/* Breaks every endpoint (fini): their work comes back flushed, their queued work goes to the retry thread. */
void rdma_ep_break_all(struct rdma_tp *tp);
#endif
