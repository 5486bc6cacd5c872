/* This client as the executor of copy and move tasks (docs/store-client.md, "Tasks"; docs/master.md, "Copy
 * and move tasks"), and the entry points that create and query tasks.
 *
 * A client with a segment runs one thread that asks the master for its tasks (FETCH_TASKS) every
 * POLL_MS. A task's first target lies in our own segment: the thread reads the source replica into it
 * (the Transfer Engine, or memcpy when the source is ours too), writes it from there to the other targets,
 * and reports the outcome (MARK_TASK_COMPLETE). It never takes store->life: teardown stops and joins it
 * (holding life for writing) before anything it reads goes. Every address the master gives is checked
 * against our segment before a byte is written there; each transfer starts only right after the master confirmed
 * the task (still_ours), and never once its time (the master's deadline, less a margin) ran out. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/store_errors.h"

#define POLL_MS 200
#define RPC_MS 2000
#define MARGIN_MS 1000 /* a transfer is not started this close to the master's deadline */

struct mc_exec {
  pthread_t th;
  pthread_mutex_t mu; /* guards stop; a leaf */
  pthread_cond_t cv;
  int stop;
};

struct task {
  struct mc_uuid id;
  uint8_t type;
  char *key;
  uint64_t size, src_addr;
  char *src_ep;
  uint32_t ntgt;
  char *tgt_ep[MC_TASK_MAX_TARGETS];
  uint64_t tgt_addr[MC_TASK_MAX_TARGETS];
};

static void task_clear(struct task *t) {
  mc_free(t->key);
  mc_free(t->src_ep);
  for (uint32_t i = 0; i < t->ntgt; i++) mc_free(t->tgt_ep[i]);
  memset(t, 0, sizeof(*t));
}

/* One task of a FETCH_TASKS answer; 0 when it does not decode (or names too many targets). */
static int task_get(struct mc_rbuf_rd *r, struct task *t) {
  memset(t, 0, sizeof(*t));
  t->id = mc_get_uuid(r);
  t->type = mc_r_u8(r);
  uint32_t klen;
  const uint8_t *k = mc_r_blob(r, &klen);
  t->key = mc_strndup(k ? (const char *)k : "", k ? klen : 0);
  t->size = mc_r_u64(r);
  t->src_ep = mc_r_str(r);
  t->src_addr = mc_r_u64(r);
  uint32_t n = mc_r_count(r, 12);
  if (n > MC_TASK_MAX_TARGETS) r->err = 1;
  for (uint32_t i = 0; i < n && !r->err; i++) {
    t->tgt_ep[i] = mc_r_str(r);
    t->tgt_addr[i] = mc_r_u64(r);
    t->ntgt = i + 1;
  }
  return !r->err && t->ntgt;
}

/* Moves the bytes of t: source -> first target (ours), then first target -> the others. 0, or why not. */
static int execute(struct mc_store *s, const struct task *t, char *msg, size_t len) {
  uint64_t base = (uint64_t)(uintptr_t)s->seg.base, a = t->tgt_addr[0];
  if (!t->size || a < base || a - base > s->seg.size || t->size > s->seg.size - (a - base)) {
    snprintf(msg, len, "the first target is not inside this client's segment");
    return MC_INVALID_PARAMS;
  }
  char *local = s->seg.base + (a - base);
  struct mc_xfer x[MC_TASK_MAX_TARGETS];
  memset(x, 0, sizeof(x));
  x[0] = (struct mc_xfer){.opcode = OPCODE_READ, .local = local, .endpoint = t->src_ep, .remote = t->src_addr,
                          .len = t->size};
  mc_xfer_run_retry(s, x, 1);
  if (x[0].rc) {
    snprintf(msg, len, "reading the source from %s failed (%s)", t->src_ep, mooncake_store_err_name(x[0].rc));
    return x[0].rc;
  }
  uint32_t n = 0;
  for (uint32_t i = 1; i < t->ntgt; i++, n++)
    x[n] = (struct mc_xfer){.opcode = OPCODE_WRITE, .local = local, .endpoint = t->tgt_ep[i], .remote = t->tgt_addr[i],
                            .len = t->size};
  if (n) mc_xfer_run_retry(s, x, n);
  for (uint32_t i = 0; i < n; i++)
    if (x[i].rc) {
      snprintf(msg, len, "writing target %s failed (%s)", x[i].endpoint, mooncake_store_err_name(x[i].rc));
      return x[i].rc;
    }
  return 0;
}

/* Right before a transfer: the master that handed t out still runs it (QUERY_TASK), and the transfer starts within
 * MC_FASTPUT_CONTACT_NS of asking, as a write into a write extent does (docs/store-client.md, "Write extents"): a
 * master that restarted meanwhile keeps remounted segments free of new allocations for longer than that, so these
 * bytes never land in space it handed out. Also no start within MARGIN_MS of the deadline. 0, TASK_NOT_FOUND (a
 * master that never heard of it), or another error (report it failed). */
static int still_ours(struct mc_store *s, const struct task *t, uint64_t deadline, char *msg, size_t len) {
  uint64_t asked = mc_now_ns();
  struct mcli_task_info q = {0};
  int rc = mcli_query_task(s->master.cli, t->id, &q);
  int status = q.status;
  mcli_task_info_free(&q);
  if (rc) {
    snprintf(msg, len, "the master does not confirm the task (%s)", mooncake_store_err_name(rc));
    return rc == MC_TASK_NOT_FOUND ? rc : MC_RPC_FAIL;
  }
  if (status != MC_TASK_PROCESSING) {
    snprintf(msg, len, "the master no longer runs the task (status %d)", status);
    return MC_OBJECT_NO_REPLICATION_TASK;
  }
  uint64_t now = mc_now_ns();
  if (now - asked >= MC_FASTPUT_CONTACT_NS || now + MARGIN_MS * 1000000ull >= deadline) {
    snprintf(msg, len, "no time left to start the transfer");
    return MC_RPC_TIMEOUT;
  }
  return 0;
}

/* One poll: fetches our tasks and runs each. */
static void poll_once(struct mc_store *s) {
  struct mc_wbuf rep;
  uint64_t asked = mc_now_ns();
  int rc = mcli_fetch_tasks(s->master.cli, s->self.client_id, MC_TASK_FETCH_MAX, RPC_MS, &rep);
  if (rc) {
    if (rc != MC_NOT_SUPPORTED) LOG_WARN_LIMITED("tasks: FETCH_TASKS failed: %s", mooncake_store_err_name(rc));
    mc_w_free(&rep);
    return;
  }
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep.p, rep.len);
  uint64_t deadline = asked + mc_r_u64(&r) * 1000000ull; /* the master counts from its answer: later than ours */
  uint32_t n = mc_r_count(&r, 16 + 1 + 4 + 8 + 4 + 8 + 4);
  for (uint32_t i = 0; i < n && !r.err; i++) {
    struct task t;
    if (!task_get(&r, &t)) {
      task_clear(&t);
      LOG_WARN("tasks: a FETCH_TASKS answer is malformed");
      break; /* the tasks left time out at the master */
    }
    char msg[200] = "";
    int st = still_ours(s, &t, deadline, msg, sizeof(msg));
    if (st == MC_TASK_NOT_FOUND) { /* a new master (restart, failover) knows nothing of it: nothing to report */
      LOG_WARN("task %llu (%s): %s", (unsigned long long)t.id.lo, t.key, msg);
      task_clear(&t);
      continue;
    }
    if (!st) st = execute(s, &t, msg, sizeof(msg));
    /* a transfer that outlived the deadline is not reported a success: the master may have reused the space */
    if (!st && mc_now_ns() >= deadline) st = MC_RPC_TIMEOUT, snprintf(msg, sizeof(msg), "finished after the deadline");
    int mrc = mcli_mark_task(s->master.cli, s->self.client_id, t.id, st, msg, RPC_MS);
    LOG_INFO("task %llu (%s of %s, %llu bytes): %s%s%s; reported: %s", (unsigned long long)t.id.lo,
             t.type == MC_TASK_MOVE ? "move" : "copy", t.key, (unsigned long long)t.size, st ? "failed" : "done",
             *msg ? ", " : "", msg, mooncake_store_err_name(mrc));
    task_clear(&t);
  }
  mc_w_free(&rep);
}

static void *exec_main(void *arg) {
  mc_thread_name("mc-task");
  struct mc_store *s = arg;
  struct mc_exec *e = s->exec;
  pthread_mutex_lock(&e->mu);
  while (!e->stop) {
    uint64_t due = mc_now_ns() + POLL_MS * 1000000ull;
    struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
    while (!e->stop && pthread_cond_timedwait(&e->cv, &e->mu, &ts) != ETIMEDOUT) {
    }
    if (e->stop) break;
    pthread_mutex_unlock(&e->mu);
    if (s->seg.mounted) poll_once(s);
    pthread_mutex_lock(&e->mu);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

void mc_tasks_start(struct mc_store *s) {
  struct mc_exec *e = mc_calloc(1, sizeof(*e));
  pthread_mutex_init(&e->mu, NULL);
  mc_cond_init_monotonic(&e->cv);
  s->exec = e;
  if (pthread_create(&e->th, NULL, exec_main, s)) {
    LOG_ERROR("store client %s: cannot start the task thread", s->self.name);
    e->stop = 1; /* no thread to join */
    mc_tasks_stop(s);
  }
}

void mc_tasks_stop(struct mc_store *s) {
  struct mc_exec *e = s->exec;
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  int running = !e->stop;
  e->stop = 1;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  if (running) pthread_join(e->th, NULL);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  mc_free(e);
  s->exec = NULL;
}
