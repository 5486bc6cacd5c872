/* Copy and move tasks (docs/master.md, "Copy and move tasks"): the master places a task's target replicas
 * (objects.c, mc_obj_task_begin), the client owning the first target fetches the task (FETCH_TASKS),
 * moves the bytes with its transfer engine and reports (MARK_TASK_COMPLETE); the master then completes
 * the targets and, for a move, frees the source after any read lease on it (mc_obj_task_end).
 *
 * Every task is bounded: at most max_total_pending_tasks pending (more: TASK_PENDING_LIMIT_EXCEEDED), at
 * most max_total_processing_tasks handed out at once, at most max_total_finished_tasks kept for queries
 * (the oldest pruned); a pending task fails after pending_task_timeout_sec, a processing one after
 * processing_task_timeout_sec (each at least 1 s), so no object stays under a task forever.
 *
 * Retries (docs/master.md, "Copy and move tasks", "Retries"): an attempt that fails — the executor reports a
 * failure, the task times out pending or processing (an executor that died or stalled), a target went with its
 * segment — is retried up to max_retry_attempts times: its targets are released (held like any timed-out
 * target when the executor may still write), new ones are placed on the same segment names (possibly another
 * segment of that name, so another executor), and the task is pending again under the same id. Each attempt
 * has its own handle for its executor (the id with the attempt number in the top 16 bits of lo; attempt 0: the
 * id itself), so a report or a confirmation of an earlier attempt is refused. A task whose object is gone,
 * whose retry cannot be placed, or whose retries are used up ends FAILED, its message naming the attempt. Tasks live
 * in this master's memory only: after a restart or failover their ids are unknown (TASK_NOT_FOUND) and
 * the objects, rebuilt from the holders' indexes with their complete replicas only, carry no task.
 *
 * LOCK: tasks->mu, a leaf below shard->mu (mc_obj_task_begin calls admit with the shard locked). A task
 * being ended (settling) is left alone by every other path; the shard work runs without tasks->mu. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "master_core/core.h"
#include "mooncake/store_errors.h"

/* A task is on two lists at most: L_ALL, tasks->active (pending, processing) or tasks->done (finished); L_EXEC, while
 * pending, its executor's queue (so a fetch walks that client's pending tasks only). */
enum { L_ALL, L_EXEC };
struct tlink {
  struct mtask *prev, *next;
};

struct execq;

struct mtask {
  struct mc_hnode hn; /* in tasks->byid */
  struct tlink link[2];
  struct execq *q; /* the executor's queue while pending, else NULL */
  struct mc_uuid id;
  uint8_t type, status, settling;
  uint32_t attempt;                /* 0 for the first attempt, then one more per retry */
  uint64_t created_ms, updated_ms; /* wall clock */
  uint64_t deadline_ns;            /* monotonic: when a pending or processing task fails */
  char *tenant;                    /* the realm that created it ("" = the whole cluster) */
  char *key;
  uint32_t klen;
  char *src_name;                  /* a move's source segment (NULL for a copy), for the retries */
  char *tgt_names[MC_TASK_MAX_TARGETS];
  char message[MC_TASK_MSG_MAX];
  struct mc_task_place tp;
};

struct tlist {
  struct mtask *head, *tail;
  uint32_t n;
};

/* One executor's pending tasks, oldest first; freed when it has none. */
struct execq {
  struct mc_hnode hn; /* in tasks->byexec */
  struct mc_uuid client;
  struct tlist pending;
};

struct mc_tasks {
  pthread_mutex_t mu;
  struct mc_htab byid, byexec;
  struct tlist active, done;
  uint32_t npending, nprocessing;
  uint64_t next;
};

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t id_hash(struct mc_uuid id) { return mc_key_hash(&id, sizeof(id)); }

static void tl_push(struct tlist *l, struct mtask *t, int k) {
  t->link[k].next = NULL;
  t->link[k].prev = l->tail;
  if (l->tail) l->tail->link[k].next = t;
  else l->head = t;
  l->tail = t;
  l->n++;
}

static void tl_del(struct tlist *l, struct mtask *t, int k) {
  struct tlink *x = &t->link[k];
  if (x->prev) x->prev->link[k].next = x->next;
  else l->head = x->next;
  if (x->next) x->next->link[k].prev = x->prev;
  else l->tail = x->prev;
  l->n--;
}

static struct execq *execq_find(struct mc_tasks *ts, struct mc_uuid client) {
  uint64_t h = id_hash(client);
  for (struct mc_hnode *x = mc_htab_first(&ts->byexec, h); x; x = mc_htab_next(x, h)) {
    struct execq *q = MC_HTAB_ENTRY(x, struct execq, hn);
    if (mc_uuid_eq(q->client, client)) return q;
  }
  return NULL;
}

/* t joins its executor's queue (pending). */
static void execq_add(struct mc_tasks *ts, struct mtask *t) {
  struct execq *q = execq_find(ts, t->tp.executor);
  if (!q) {
    q = mc_calloc(1, sizeof(*q));
    q->client = t->tp.executor;
    mc_htab_add(&ts->byexec, &q->hn, id_hash(q->client));
  }
  tl_push(&q->pending, t, L_EXEC);
  t->q = q;
}

/* t leaves its executor's queue (it is no longer pending); an empty queue goes. */
static void execq_del(struct mc_tasks *ts, struct mtask *t) {
  struct execq *q = t->q;
  if (!q) return;
  tl_del(&q->pending, t, L_EXEC);
  t->q = NULL;
  if (q->pending.n) return;
  mc_htab_del(&ts->byexec, &q->hn);
  mc_free(q);
}

struct mc_tasks *mc_tasks_new(void) {
  struct mc_tasks *t = mc_calloc(1, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

static void place_free(struct mc_task_place *tp) {
  mc_free(tp->src.ep);
  for (uint32_t i = 0; i < tp->ntgt; i++) mc_free(tp->tgt[i].ep);
}

static void task_free(struct mtask *t) {
  place_free(&t->tp);
  mc_free(t->src_name);
  for (uint32_t i = 0; i < MC_TASK_MAX_TARGETS; i++) mc_free(t->tgt_names[i]);
  mc_free(t->tenant);
  mc_free(t->key);
  mc_free(t);
}

void mc_tasks_free(struct mc_tasks *t) {
  if (!t) return;
  struct tlist *lists[] = {&t->active, &t->done};
  for (int i = 0; i < 2; i++)
    for (struct mtask *x = lists[i]->head, *next; x; x = next) {
      next = x->link[L_ALL].next;
      execq_del(t, x);
      task_free(x);
    }
  mc_free(t->byid.b);
  mc_free(t->byexec.b);
  pthread_mutex_destroy(&t->mu);
  mc_free(t);
}

static uint64_t secs_ns(int64_t s) { return (uint64_t)(s < 1 ? 1 : s) * MC_NS_PER_S; }

#define ATTEMPT_SHIFT 48 /* an attempt's handle: the task id with (attempt) << ATTEMPT_SHIFT or'ed into lo */

static struct mc_uuid attempt_id(const struct mtask *t) {
  return (struct mc_uuid){t->id.hi, t->id.lo | ((uint64_t)t->attempt << ATTEMPT_SHIFT)};
}

static struct mtask *find_locked(struct mc_tasks *ts, struct mc_uuid id) {
  id.lo &= (1ull << ATTEMPT_SHIFT) - 1;
  uint64_t h = id_hash(id);
  for (struct mc_hnode *x = mc_htab_first(&ts->byid, h); x; x = mc_htab_next(x, h)) {
    struct mtask *t = MC_HTAB_ENTRY(x, struct mtask, hn);
    if (mc_uuid_eq(t->id, id)) return t;
  }
  return NULL;
}

static void set_message(struct mtask *t, const char *msg, size_t len) {
  len = MC_MIN(len, sizeof(t->message) - 1);
  memcpy(t->message, msg, len);
  t->message[len] = 0;
}

/* The task leaves the active list for the finished ones; the oldest finished beyond the cap are pruned. */
static void finish_locked(struct mc_master *m, struct mtask *t, uint8_t status) {
  struct mc_tasks *ts = m->tasks;
  if (t->status == MC_TASK_PENDING) ts->npending--, execq_del(ts, t);
  else ts->nprocessing--;
  t->status = status;
  t->settling = 0;
  t->updated_ms = wall_ms();
  tl_del(&ts->active, t, L_ALL);
  tl_push(&ts->done, t, L_ALL);
  while (ts->done.n > (uint64_t)MC_MAX(m->cfg.max_total_finished_tasks, 0)) {
    struct mtask *old = ts->done.head;
    tl_del(&ts->done, old, L_ALL);
    mc_htab_del(&ts->byid, &old->hn);
    task_free(old);
  }
}

/* ------------------------------------------------------------------ create */

struct admit_ctx {
  struct mc_master *m;
  struct mtask *t;
  struct mc_uuid id; /* t's id (t may be ended and pruned before its creator answers) */
};

/* Under the object's shard lock (objects.c): the pending cap, then the task joins the table. */
static int admit(void *arg, const struct mc_task_place *tp) {
  struct admit_ctx *c = arg;
  struct mc_tasks *ts = c->m->tasks;
  struct mtask *t = c->t;
  pthread_mutex_lock(&ts->mu);
  int rc = ts->npending >= (uint64_t)MC_MAX(c->m->cfg.max_total_pending_tasks, 0) ? MC_TASK_PENDING_LIMIT_EXCEEDED : 0;
  if (!rc) {
    t->tp = *tp; /* the endpoints move into the task */
    t->id = c->id = (struct mc_uuid){.hi = c->m->view_version, .lo = ++ts->next};
    t->created_ms = t->updated_ms = wall_ms();
    t->deadline_ns = mc_now_ns() + secs_ns(c->m->cfg.pending_task_timeout_sec);
    t->status = MC_TASK_PENDING;
    mc_htab_add(&ts->byid, &t->hn, id_hash(t->id));
    tl_push(&ts->active, t, L_ALL);
    execq_add(ts, t);
    ts->npending++;
  }
  pthread_mutex_unlock(&ts->mu);
  return rc;
}

int mc_master_create_task(struct mc_master *m, const char *tenant, uint8_t type, const void *key, uint32_t klen,
                          const char *src, char *const *targets, uint32_t ntgt, struct mc_uuid *id) {
  *id = (struct mc_uuid){0, 0};
  if (!klen || !ntgt || ntgt > MC_TASK_MAX_TARGETS || (type == MC_TASK_MOVE && (ntgt != 1 || !src || !*src)))
    return MC_INVALID_PARAMS;
  for (uint32_t i = 0; i < ntgt; i++) {
    if (!*targets[i] || (src && !strcmp(src, targets[i]))) return MC_INVALID_PARAMS; /* a move onto itself */
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(targets[i], targets[j])) return MC_INVALID_PARAMS;
  }
  struct mtask *t = mc_calloc(1, sizeof(*t));
  t->type = type;
  t->tenant = mc_strdup(tenant ? tenant : "");
  t->key = mc_malloc(klen + 1);
  memcpy(t->key, key, klen);
  t->key[klen] = 0;
  t->klen = klen;
  t->src_name = type == MC_TASK_MOVE ? mc_strdup(src) : NULL;
  for (uint32_t i = 0; i < ntgt; i++) t->tgt_names[i] = mc_strdup(targets[i]);
  struct admit_ctx c = {m, t, {0, 0}};
  struct mc_task_place tp;
  int rc = mc_obj_task_begin(m, key, klen, tenant, type == MC_TASK_MOVE ? src : NULL, targets, ntgt, &tp, admit, &c);
  if (rc) {
    t->tp.ntgt = 0; /* nothing of tp was taken */
    task_free(t);
    MLOG_V(1, "key=%.*s, info=task_refused, type=%u, error=%s", (int)klen, (const char *)key, type,
           mooncake_store_err_name(rc));
    return rc;
  }
  *id = c.id;
  MLOG_V(1, "key=%.*s, info=task_created, type=%u, task=%llu", (int)klen, (const char *)key, type,
         (unsigned long long)id->lo);
  return 0;
}

/* ------------------------------------------------------------------ query, fetch, report */

int mc_master_query_task(struct mc_master *m, const char *tenant, struct mc_uuid id, struct mc_wbuf *w) {
  struct mc_tasks *ts = m->tasks;
  pthread_mutex_lock(&ts->mu);
  struct mtask *t = find_locked(ts, id);
  uint32_t asked = (uint32_t)(id.lo >> ATTEMPT_SHIFT); /* 0: the task; else an attempt's handle (its executor) */
  if (t && strcmp(t->tenant, tenant ? tenant : "")) t = NULL; /* another realm's task is not there */
  if (t && asked > t->attempt) t = NULL;
  if (t) {
    char exe[37];
    mc_uuid_str(t->tp.executor, exe);
    mc_put_uuid(w, t->id);
    mc_w_u8(w, t->type);
    mc_w_u8(w, asked && asked != t->attempt ? MC_TASK_FAILED : t->status); /* an earlier attempt is over */
    mc_w_u64(w, t->created_ms);
    mc_w_u64(w, t->updated_ms);
    mc_w_str(w, exe);
    mc_w_str(w, t->message);
  }
  pthread_mutex_unlock(&ts->mu);
  return t ? 0 : MC_TASK_NOT_FOUND;
}

/* t is client's to execute, asked on a connection of t's realm. */
static int mine(const struct mtask *t, const char *tenant, struct mc_uuid client) {
  return mc_uuid_eq(t->tp.executor, client) && !strcmp(t->tenant, tenant ? tenant : "");
}

static void encode_task(struct mc_wbuf *w, const struct mtask *t) {
  mc_put_uuid(w, attempt_id(t));
  mc_w_u8(w, t->type);
  mc_w_blob(w, t->key, t->klen);
  mc_w_u64(w, t->tp.size);
  mc_w_str(w, t->tp.src.ep);
  mc_w_u64(w, t->tp.src.addr);
  mc_w_u32(w, t->tp.ntgt);
  for (uint32_t i = 0; i < t->tp.ntgt; i++) {
    mc_w_str(w, t->tp.tgt[i].ep);
    mc_w_u64(w, t->tp.tgt[i].addr);
  }
}

int mc_master_fetch_tasks(struct mc_master *m, const char *tenant, struct mc_uuid client, uint32_t max, struct mc_wbuf *w) {
  struct mc_tasks *ts = m->tasks;
  uint64_t tmo = secs_ns(m->cfg.processing_task_timeout_sec), now = mc_now_ns();
  uint64_t cap = (uint64_t)MC_MAX(m->cfg.max_total_processing_tasks, 0);
  max = MC_MIN(max, MC_TASK_FETCH_MAX);
  mc_w_u64(w, tmo / MC_NS_PER_MS);
  size_t at = w->len;
  uint32_t n = 0;
  mc_w_u32(w, 0);
  pthread_mutex_lock(&ts->mu);
  /* only this client's pending tasks are walked: every client with a segment asks several times a second */
  struct execq *q = execq_find(ts, client);
  for (struct mtask *t = q ? q->pending.head : NULL, *next; t && n < max && ts->nprocessing < cap; t = next) {
    next = t->link[L_EXEC].next;
    if (t->settling || !mine(t, tenant, client)) continue;
    execq_del(ts, t); /* (q may go with its last task: next was read before) */
    t->status = MC_TASK_PROCESSING;
    t->updated_ms = wall_ms();
    t->deadline_ns = now + tmo;
    ts->npending--;
    ts->nprocessing++;
    encode_task(w, t);
    n++;
  }
  pthread_mutex_unlock(&ts->mu);
  if (at + 4 <= w->len) mc_le_put32(w->p + at, n);
  return 0;
}

/* Under the object's shard lock (objects.c), for a retry: t (settling) takes the new attempt's place, pending. */
static int readmit(void *arg, const struct mc_task_place *tp) {
  struct admit_ctx *c = arg;
  struct mc_tasks *ts = c->m->tasks;
  struct mtask *t = c->t;
  pthread_mutex_lock(&ts->mu);
  if (t->status == MC_TASK_PENDING) execq_del(ts, t); /* (a pending timeout: it never left its queue) */
  else ts->nprocessing--, ts->npending++;
  place_free(&t->tp);
  t->tp = *tp;
  t->attempt++;
  t->status = MC_TASK_PENDING;
  t->updated_ms = wall_ms();
  t->deadline_ns = mc_now_ns() + secs_ns(c->m->cfg.pending_task_timeout_sec);
  execq_add(ts, t);
  t->settling = 0;
  pthread_mutex_unlock(&ts->mu);
  return 0;
}

/* set_message with tasks->mu taken (queries read the message under it). */
static void word(struct mc_master *m, struct mtask *t, const char *msg, int n) {
  pthread_mutex_lock(&m->tasks->mu);
  set_message(t, msg, (size_t)(n < 0 ? 0 : n));
  pthread_mutex_unlock(&m->tasks->mu);
}

/* A failed attempt of t (settling; its targets already released) is retried when retries are left: 1 when t
 * is pending again, 0 when no retry is left, -1 when its retry could not start (t's message says why). */
static int retry(struct mc_master *m, struct mtask *t, const char *failure) {
  if (t->attempt >= (uint64_t)MC_MAX(m->cfg.max_retry_attempts, 0)) return 0;
  char msg[MC_TASK_MSG_MAX + 64];
  int n = snprintf(msg, sizeof(msg), "attempt %u failed: %s", t->attempt + 1, failure);
  word(m, t, msg, n); /* (set before readmit: a query sees it once t is pending) */
  struct admit_ctx c = {m, t, t->id};
  struct mc_task_place tp;
  uint32_t failed = t->attempt + 1;
  int rc = mc_obj_task_begin(m, t->key, t->klen, *t->tenant ? t->tenant : NULL, t->src_name, t->tgt_names,
                             t->tp.ntgt, &tp, readmit, &c);
  LOG_WARN_LIMITED("task %llu on key %s: attempt %u failed (%s); %s%s", (unsigned long long)t->id.lo, t->key, failed,
                   failure, rc ? "its retry cannot start: " : "retried", rc ? mooncake_store_err_name(rc) : "");
  if (!rc) return 1;
  n = snprintf(msg, sizeof(msg), "attempt %u failed: %s; no retry: %s", failed, failure, mooncake_store_err_name(rc));
  word(m, t, msg, n);
  return -1;
}

/* Ends t (settling, taken out from under tasks->mu) on its object, then records the outcome, or retries it. */
static void settle(struct mc_master *m, struct mtask *t, int ok, uint64_t hold_until_ns, const char *why) {
  int rc = mc_obj_task_end(m, &t->tp, t->type, ok, hold_until_ns);
  int failed = !(ok && !rc), worded = 0; /* worded: the message is final */
  if (failed && rc != MC_OBJECT_NOT_FOUND) { /* (an object removed meanwhile: nothing to retry) */
    char failure[MC_TASK_MSG_MAX + 64];
    snprintf(failure, sizeof(failure), "%s%s%s", rc ? mooncake_store_err_name(rc) : why ? why : "the executor failed",
             !rc && !why && *t->message ? ": " : "", !rc && !why ? t->message : "");
    int r = retry(m, t, failure);
    if (r == 1) return;
    if (r == 0 && t->attempt) {
      char msg[MC_TASK_MSG_MAX + 64];
      word(m, t, msg, snprintf(msg, sizeof(msg), "attempt %u of %u failed: %s", t->attempt + 1, t->attempt + 1, failure));
    }
    worded = r == -1 || t->attempt;
  }
  pthread_mutex_lock(&m->tasks->mu);
  if (!worded && rc) {
    char msg[MC_TASK_MSG_MAX + 64]; /* the code first; what the executor said after it, cut to fit */
    int n = snprintf(msg, sizeof(msg), "%s%s%s", mooncake_store_err_name(rc), *t->message ? ": " : "", t->message);
    set_message(t, msg, n < 0 ? 0 : (size_t)n);
  } else if (!worded && why) {
    set_message(t, why, strlen(why));
  }
  MLOG_V(1, "key=%s, info=task_finished, task=%llu, status=%s", t->key, (unsigned long long)t->id.lo,
         failed ? "FAILED" : "SUCCESS");
  finish_locked(m, t, failed ? MC_TASK_FAILED : MC_TASK_SUCCESS); /* (t may be pruned once unlocked) */
  pthread_mutex_unlock(&m->tasks->mu);
}

int mc_master_mark_task(struct mc_master *m, const char *tenant, struct mc_uuid client, struct mc_uuid id, int32_t status, const char *msg,
                        size_t msglen) {
  struct mc_tasks *ts = m->tasks;
  pthread_mutex_lock(&ts->mu);
  struct mtask *t = find_locked(ts, id);
  int rc = !t                                     ? MC_TASK_NOT_FOUND
           : !mine(t, tenant, client)              ? MC_ILLEGAL_CLIENT
           : t->status != MC_TASK_PROCESSING || t->settling || (id.lo >> ATTEMPT_SHIFT) != t->attempt
               ? MC_OBJECT_NO_REPLICATION_TASK /* (or a report of an earlier attempt) */
               : 0;
  if (!rc) {
    t->settling = 1;
    set_message(t, msg, msglen);
  }
  pthread_mutex_unlock(&ts->mu);
  if (!rc) settle(m, t, status == 0, 0, NULL); /* the executor is done with the targets: their space is free now */
  return rc;
}

/* ------------------------------------------------------------------ deadlines */

#define EXPIRE_BATCH 256
#define TASK_HOLD_MIN_S 60ull

void mc_tasks_expire(struct mc_master *m, uint64_t now) {
  struct mc_tasks *ts = m->tasks;
  struct mtask *due[EXPIRE_BATCH];
  uint32_t n = 0;
  pthread_mutex_lock(&ts->mu);
  for (struct mtask *t = ts->active.head; t && n < EXPIRE_BATCH; t = t->link[L_ALL].next)
    if (!t->settling && now >= t->deadline_ns) {
      t->settling = 1;
      due[n++] = t;
    }
  pthread_mutex_unlock(&ts->mu);
  /* a processing task's executor may still be writing its targets (a transfer it started in time may run as long
   * as its transport lets it): their space waits one more processing timeout, at least TASK_HOLD_MIN_S */
  uint64_t hold = mc_now_ns() + MC_MAX(secs_ns(m->cfg.processing_task_timeout_sec), TASK_HOLD_MIN_S * MC_NS_PER_S);
  for (uint32_t i = 0; i < n; i++) {
    int processing = due[i]->status == MC_TASK_PROCESSING;
    LOG_WARN_LIMITED("task %llu on key %s: %s timed out", (unsigned long long)due[i]->id.lo, due[i]->key,
             processing ? "processing" : "pending");
    settle(m, due[i], 0, processing ? hold : 0, processing ? "processing timed out" : "pending timed out");
  }
}
