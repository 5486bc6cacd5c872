/* Batches: allocation, submission (validation, slicing, dispatch to the transports), completion and
 * waiting (docs/transfer-engine.md). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"
#include "te/engine_internal.h"
#include "meta/metadata_server.h"

/* ------------------------------------------------------------------ batches */

#define BATCH_SLOT(id) ((size_t)((id)&0xffffffffu))

static struct mc_batch *batch_get(struct mc_engine *e, batch_id_t id) {
  struct mc_batch *b = NULL;
  pthread_mutex_lock(&e->batch_mu);
  size_t slot = BATCH_SLOT(id);
  if (id != INVALID_BATCH && slot < e->nbatch_slots && e->batches[slot] && e->batches[slot]->id == id)
    b = e->batches[slot];
  pthread_mutex_unlock(&e->batch_mu);
  return b;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size) {
  struct mc_engine *e = engine;
  if (!e || batch_size == 0 || batch_size > (1u << 24)) return INVALID_BATCH;
  struct mc_batch *b = mc_calloc(1, sizeof(*b));
  b->tasks = mc_try_calloc(batch_size, sizeof(*b->tasks));
  if (!b->tasks) {
    mc_free(b);
    return INVALID_BATCH;
  }
  b->cap = batch_size;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  pthread_mutex_lock(&e->batch_mu);
  size_t slot = 0;
  while (slot < e->nbatch_slots && e->batches[slot]) slot++;
  if (slot == e->nbatch_slots) {
    size_t n = e->nbatch_slots ? e->nbatch_slots * 2 : 64;
    e->batches = mc_realloc(e->batches, n * sizeof(*e->batches));
    memset(e->batches + e->nbatch_slots, 0, (n - e->nbatch_slots) * sizeof(*e->batches));
    e->nbatch_slots = n;
  }
  b->id = ((uint64_t)(++e->batch_gen & 0x7fffffffu) << 32) | slot;
  e->batches[slot] = b;
  pthread_mutex_unlock(&e->batch_mu);
  return b->id;
}

int freeBatchID(transfer_engine_t engine, batch_id_t id) {
  struct mc_engine *e = engine;
  if (!e) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b) return MC_TE_STATUS_INVALID_ARGUMENT;
  if (atomic_load(&b->pending) > 0) return MC_TE_STATUS_BATCH_BUSY;
  pthread_mutex_lock(&e->batch_mu);
  e->batches[BATCH_SLOT(id)] = NULL;
  pthread_mutex_unlock(&e->batch_mu);
  /* The last slice_done may still hold b->mu for its wake-up; take it once before freeing. */
  pthread_mutex_lock(&b->mu);
  pthread_mutex_unlock(&b->mu);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  mc_free(b->notify_name);
  mc_free(b->notify_msg);
  mc_free(b->tasks);
  mc_free(b);
  return 0;
}

static void queue_notify(struct mc_engine *e, int32_t target, const char *name, const char *msg) {
  struct mc_outnote *n = mc_calloc(1, sizeof(*n)), **pp;
  n->target = target;
  n->name = mc_strdup(name ? name : "");
  n->msg = mc_strdup(msg ? msg : "");
  pthread_mutex_lock(&e->out_mu);
  for (pp = &e->outbox; *pp; pp = &(*pp)->next) {
  }
  *pp = n;
  pthread_cond_signal(&e->out_cv);
  pthread_mutex_unlock(&e->out_mu);
}

static void task_finished(struct mc_engine *e, struct mc_batch *b, struct mc_task *t) {
  int failed = atomic_load(&t->failed) > 0;
  if (failed) atomic_store(&b->any_failed, 1);
  pthread_mutex_lock(&b->mu);
  /* pending drops before the state is published: a poller that sees the task terminal may free the
   * batch at once (freeBatchID then waits for b->mu, which we hold until we are done with b) */
  int last = atomic_fetch_sub(&b->pending, 1) == 1;
  atomic_store(&t->state, failed ? STATUS_FAILED : STATUS_COMPLETED);
  if (last) {
    if (b->has_notify && !atomic_load(&b->any_failed)) {
      queue_notify(e, b->notify_target, b->notify_name, b->notify_msg);
      b->has_notify = 0;
    }
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
}

void mc_slice_done(struct mc_slice *s, int ok, uint64_t bytes) {
  struct mc_task *t = s->task;
  if (ok) atomic_fetch_add(&t->transferred, bytes);
  else atomic_fetch_add(&t->failed, 1);
  struct mc_engine *e = s->eng;
  struct mc_batch *b = s->batch;
  mc_desc_unref(s->desc);
  mc_free(s);
  if (atomic_fetch_sub(&t->slices_left, 1) == 1) task_finished(e, b, t);
}

static int validate_requests(struct mc_engine *e, struct transfer_request *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (r[i].opcode != OPCODE_READ && r[i].opcode != OPCODE_WRITE) return MC_TE_STATUS_INVALID_ARGUMENT;
    if (r[i].length && !mc_eng_local_registered(e, r[i].source, r[i].length)) return MC_TE_STATUS_ADDRESS_NOT_REGISTERED;
  }
  return 0;
}

/* Into how many slices request r (length > 0, one of n) is cut: the transport's split operation decides (TCP's
 * spreads large requests over its lanes), kept within [1, length]. */
static uint32_t slice_count(struct mc_transport *t, const struct transfer_request *r, size_t n) {
  uint32_t k = t->ops->split ? t->ops->split(t, r, n) : 1;
  if (k > r->length) k = (uint32_t)r->length;
  return k ? k : 1;
}

static struct mc_slice *make_slice(struct mc_engine *e, struct mc_batch *b, struct mc_task *t,
                                   const struct transfer_request *r, struct mc_desc *d) {
  struct mc_slice *s = mc_calloc(1, sizeof(*s));
  s->eng = e;
  s->batch = b;
  s->task = t;
  s->desc = d;
  s->opcode = r->opcode;
  s->local = r->source;
  s->remote = r->target_offset;
  s->len = r->length;
  s->start_ns = mc_now_ns();
  return s;
}

/* Groups slices by transport and hands each group to it, in the reverse of the table's order: the network
 * transports, whose submit mostly queues, before the same-host path, which copies in this thread. */
static void dispatch(struct mc_engine *e, struct mc_slice **sl, struct mc_transport **tps, size_t n) {
  struct mc_transport *installed[MC_MAX_TRANSPORTS];
  pthread_mutex_lock(&e->tp_mu);
  int ntps = e->ntps;
  memcpy(installed, e->tps, (size_t)ntps * sizeof(installed[0]));
  pthread_mutex_unlock(&e->tp_mu);
  struct mc_slice **group = mc_malloc((n ? n : 1) * sizeof(*group));
  for (int p = ntps - 1; p >= 0; p--) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (tps[i] == installed[p]) group[k++] = sl[i];
    if (k) installed[p]->ops->submit(installed[p], group, k);
  }
  mc_free(group);
}

static int submit(struct mc_engine *e, batch_id_t id, struct transfer_request *r, size_t n,
                  const notify_msg_t *notify) {
  if (!e || (!r && n)) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b) return MC_TE_STATUS_INVALID_ARGUMENT;
  int rc = validate_requests(e, r, n);
  if (rc) return rc;
  struct mc_desc **descs = mc_calloc(n ? n : 1, sizeof(*descs));
  struct mc_transport **tps = mc_calloc(n ? n : 1, sizeof(*tps));
  for (size_t i = 0; i < n && !rc; i++) {
    descs[i] = mc_eng_seg_desc(e, r[i].target_id, &tps[i]);
    if (!descs[i]) rc = MC_TE_STATUS_INVALID_ARGUMENT;
    else if (!tps[i]) rc = MC_TE_STATUS_NOT_SUPPORTED_TRANSPORT;
  }
  size_t first = atomic_load(&b->ntasks);
  if (!rc && (n > b->cap || first > b->cap - n)) rc = MC_TE_STATUS_TOO_MANY_REQUESTS;
  if (rc) {
    for (size_t i = 0; i < n; i++) mc_desc_unref(descs[i]);
    mc_free(descs);
    mc_free(tps);
    return rc;
  }
  if (notify) {
    pthread_mutex_lock(&b->mu);
    mc_free(b->notify_name);
    mc_free(b->notify_msg);
    b->has_notify = 1;
    b->notify_target = n ? r[0].target_id : 0;
    b->notify_name = mc_strdup(notify->name ? notify->name : "");
    b->notify_msg = mc_strdup(notify->msg ? notify->msg : "");
    pthread_mutex_unlock(&b->mu);
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += r[i].length ? slice_count(tps[i], &r[i], n) : 0;
  struct mc_slice **sl = mc_malloc((total ? total : 1) * sizeof(*sl));
  struct mc_transport **stps = mc_malloc((total ? total : 1) * sizeof(*stps));
  size_t ns = 0;
  atomic_fetch_add(&b->pending, (int)n);
  atomic_store(&b->ntasks, first + n);
  for (size_t i = 0; i < n; i++) {
    struct mc_task *t = &b->tasks[first + i];
    if (r[i].length == 0) { /* completes without I/O */
      atomic_store(&t->slices_left, 1);
      mc_desc_unref(descs[i]);
      task_finished(e, b, t);
      continue;
    }
    uint32_t k = slice_count(tps[i], &r[i], n);
    atomic_store(&t->slices_left, (int)k);
    uint64_t piece = r[i].length / k;
    for (uint32_t j = 0; j < k; j++) { /* pieces of one request travel on different lanes */
      struct transfer_request part = r[i];
      part.source = (char *)r[i].source + j * piece;
      part.target_offset = r[i].target_offset + j * piece;
      part.length = j + 1 < k ? piece : r[i].length - j * piece;
      if (j) mc_desc_ref(descs[i]);
      stps[ns] = tps[i];
      sl[ns++] = make_slice(e, b, t, &part, descs[i]);
    }
  }
  dispatch(e, sl, stps, ns);
  mc_free(stps);
  if (n == 0 && notify) { /* an empty batch is complete at once */
    pthread_mutex_lock(&b->mu);
    if (atomic_load(&b->pending) == 0 && b->has_notify) {
      queue_notify(e, b->notify_target, b->notify_name, b->notify_msg);
      b->has_notify = 0;
    }
    pthread_mutex_unlock(&b->mu);
  }
  mc_free(sl);
  mc_free(descs);
  mc_free(tps);
  return 0;
}

int submitTransfer(transfer_engine_t engine, batch_id_t id, struct transfer_request *entries, size_t count) {
  return submit(engine, id, entries, count, NULL);
}

int submitTransferWithNotify(transfer_engine_t engine, batch_id_t id, struct transfer_request *entries,
                             size_t count, notify_msg_t notify) {
  return submit(engine, id, entries, count, &notify);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t id, size_t task_id, struct transfer_status *st) {
  struct mc_engine *e = engine;
  if (!e || !st) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b || task_id >= atomic_load(&b->ntasks)) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_task *t = &b->tasks[task_id];
  st->status = atomic_load(&t->state);
  st->transferred_bytes = atomic_load(&t->transferred);
  if (st->status == STATUS_COMPLETED || st->status == STATUS_FAILED) t->observed = 1;
  return 0;
}

int mc_te_batch_status(transfer_engine_t engine, batch_id_t id) {
  struct mc_engine *e = engine;
  struct mc_batch *b = e ? batch_get(e, id) : NULL;
  if (!b) return STATUS_INVALID;
  if (atomic_load(&b->any_failed)) return STATUS_FAILED;
  return atomic_load(&b->pending) == 0 ? STATUS_COMPLETED : STATUS_WAITING;
}

int mc_te_wait_batch(transfer_engine_t engine, batch_id_t id, int timeout_ms) {
  struct mc_engine *e = engine;
  struct mc_batch *b = e ? batch_get(e, id) : NULL;
  if (!b) return STATUS_INVALID;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  /* small transfers finish within a wake-up's cost: poll first (adaptive, per engine) */
  if (timeout_ms) mc_spin_until_zero(&b->pending, &e->wait_spin);
  pthread_mutex_lock(&b->mu);
  while (atomic_load(&b->pending) > 0) {
    if (timeout_ms < 0) pthread_cond_wait(&b->cv, &b->mu);
    else if (pthread_cond_timedwait(&b->cv, &b->mu, &ts) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&b->mu);
  return mc_te_batch_status(e, id);
}
