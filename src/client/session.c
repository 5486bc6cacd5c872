/* Layer-wise (session) puts and gets (docs/store-client.md, "Sessions"). A put session splits a put in
 * three: PutStart for the keys (the replicas are kept here), any number of ranged writes into the started
 * objects, then PutEnd (readable) or PutRevoke (nothing left). A get session looks the replicas up once
 * (granting the read lease) and serves ranged reads from that lookup until its lease ends.
 *
 * Every range is checked before any byte moves: inside the object, and inside memory registered with this
 * client (register_buffer, the staging buffer or the segment): addresses come from Python callers, and a
 * bad one must fail the key, not the process. End and revoke seal a session first and wait for the writes
 * still running on it. An abandoned put session (a client that died) is the master's to clean up, as any
 * unfinished put: after put_start_discard_timeout_sec another writer may take the key over, and its space
 * is freed after put_start_release_timeout_sec (docs/master.md, "Put"). Teardown revokes the open put
 * sessions of the handle.
 *
 * A session belongs to an owner: NULL for the handle's own callers, or a dummy client the real client serves
 * (src/standalone/real_client.c, docs/standalone.md). Owners do not see each other's sessions (the same key under another owner
 * is another session), each dummy holds at most its cap open at once, and a dummy that leaves has its put
 * sessions revoked and its get sessions dropped (mc_sess_drop_owner). */
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/store.h"

#define NBUCKETS 1024

struct sess {
  struct sess *next;
  int put;            /* 1: put session, 0: get session */
  int sealed;         /* end/revoke under way: no new range writes */
  int inflight;       /* range transfers running on it */
  uint64_t size;      /* the object's size */
  uint64_t lease_end; /* get: when the lookup's lease ends (mc_now_ms) */
  struct mcli_reps r; /* put: the replicas being written; get: the lookup, r.reps[rep] read */
  uint32_t rep;
  struct mc_sess_owner *owner; /* NULL: the handle's own callers */
  char key[];
};

struct mc_sessions {
  pthread_mutex_t mu; /* a leaf: guards the table and every entry's fields but r (immutable while it exists) */
  pthread_cond_t cv;  /* an entry's inflight dropped */
  struct sess *b[NBUCKETS];
};

void mc_sessions_init(struct mc_store *s) {
  s->sessions = mc_calloc(1, sizeof(*s->sessions));
  pthread_mutex_init(&s->sessions->mu, NULL);
  pthread_cond_init(&s->sessions->cv, NULL);
}

static void sess_free(struct sess *e) {
  mcli_reps_free(&e->r, 1);
  mc_free(e);
}

static struct sess **slot(struct mc_sessions *t, const char *key, int put, const struct mc_sess_owner *o) {
  struct sess **p = &t->b[(mc_str_hash(key) ^ (uint64_t)put) & (NBUCKETS - 1)];
  while (*p && ((*p)->put != put || (*p)->owner != o || strcmp((*p)->key, key))) p = &(*p)->next;
  return p;
}

static struct sess *find(struct mc_sessions *t, const char *key, int put, const struct mc_sess_owner *o) {
  return *slot(t, key, put, o);
}

static void drop(struct mc_sessions *t, const char *key, int put, struct mc_sess_owner *o) {
  struct sess **p = slot(t, key, put, o), *e = *p;
  if (!e) return;
  *p = e->next;
  if (o) o->n--;
  sess_free(e);
}

/* Whether the owner may open one more session (the handle's own callers always may). */
static int room(const struct mc_sess_owner *o, size_t more) { return !o || o->n + more < o->cap; }

static void add(struct mc_sessions *t, const char *key, int put, uint64_t size, struct mcli_reps *r, uint32_t rep,
                uint64_t lease_end, struct mc_sess_owner *o) {
  drop(t, key, put, o);
  size_t n = strlen(key);
  struct sess *e = mc_calloc(1, sizeof(*e) + n + 1);
  memcpy(e->key, key, n);
  e->put = put, e->size = size, e->r = *r, e->rep = rep, e->lease_end = lease_end, e->owner = o;
  memset(r, 0, sizeof(*r)); /* moved */
  if (o) o->n++;
  struct sess **p = slot(t, key, put, o);
  e->next = *p;
  *p = e;
}

void mc_sessions_free(struct mc_store *s) {
  struct mc_sessions *t = s->sessions;
  if (!t) return;
  for (size_t i = 0; i < NBUCKETS; i++)
    for (struct sess *e = t->b[i], *next; e; e = next) {
      next = e->next;
      sess_free(e);
    }
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  mc_free(t);
  s->sessions = NULL;
}

void mc_sessions_teardown(struct mc_store *s) {
  struct mc_sessions *t = s->sessions;
  const char **keys = NULL;
  size_t n = 0, cap = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < NBUCKETS; i++) /* no API call runs during teardown: nothing is in flight */
    for (struct sess *e = t->b[i]; e; e = e->next)
      if (e->put) {
        if (n == cap) keys = mc_realloc(keys, sizeof(*keys) * (cap = cap ? 2 * cap : 16));
        keys[n++] = e->key;
      }
  if (n && s->ready && s->master.cli) {
    int *r = mc_calloc(n, sizeof(*r));
    if (mcli_batch_put_end(s->master.cli, &mc_put_ops, s->self.client_id, keys, n, 1, r))
      LOG_WARN("teardown: revoking %zu open put sessions failed; the master reclaims them later", n);
    mc_free(r);
  }
  mc_free(keys);
  for (size_t i = 0; i < NBUCKETS; i++)
    for (struct sess *e = t->b[i], *next; e; e = next) {
      next = e->next;
      sess_free(e);
    }
  memset(t->b, 0, sizeof(t->b));
  pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ put sessions */

/* PutStart for the keys of one group run (order[a..b)); sessions for those that started. */
static void start_run(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, const size_t *sizes,
                      const size_t *order, size_t a, size_t b, const mc_replicate_config_t *config, const char *group,
                      int *results) {
  size_t n = b - a;
  struct mc_put_config cfg;
  int rc = mc_write_config(s, config, group, &cfg);
  const char **k = mc_calloc(n, sizeof(*k));
  uint64_t *len = mc_calloc(n, sizeof(*len));
  size_t *at = mc_calloc(n, sizeof(*at)), m = 0;
  pthread_mutex_lock(&s->sessions->mu);
  for (size_t j = a; j < b; j++) {
    size_t i = order[j];
    if (rc || !*keys[i] || !sizes[i] || find(s->sessions, keys[i], 1, o) || !room(o, m)) {
      results[i] = rc ? rc : MC_INVALID_PARAMS; /* empty key, size 0, a session already open, the owner's cap */
      continue;
    }
    k[m] = keys[i], len[m] = sizes[i], at[m++] = i;
  }
  pthread_mutex_unlock(&s->sessions->mu);
  struct mcli_reps *r = mc_calloc(m ? m : 1, sizeof(*r));
  int call = m ? mcli_batch_put_start(s->master.cli, &mc_put_ops, s->self.client_id, k, len, m, &cfg, r) : 0;
  pthread_mutex_lock(&s->sessions->mu);
  for (size_t q = 0; q < m; q++) {
    results[at[q]] = call ? call : r[q].status;
    if (!call && !r[q].status) add(s->sessions, k[q], 1, len[q], &r[q], 0, 0, o);
  }
  pthread_mutex_unlock(&s->sessions->mu);
  mcli_reps_free(r, m); /* the moved ones are empty */
  mc_free(r);
  mc_free(at);
  mc_free(len);
  mc_free(k);
  mc_put_config_free(&cfg);
}

void mc_sess_put_start(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, const size_t *sizes,
                       size_t count, const mc_replicate_config_t *config, const char *const *group_ids,
                       int *results_out) {
  size_t *ord = mc_group_order(group_ids, count);
  for (size_t a = 0, b; a < count; a = b) {
    const char *g = mc_group_of(group_ids, ord[a]);
    for (b = a; b < count && !strcmp(mc_group_of(group_ids, ord[b]), g); b++) {
    }
    start_run(s, o, keys, sizes, ord, a, b, config, g, results_out);
  }
  mc_free(ord);
}

/* Checks key i's ranges against the object (size) and the registered memory: 0 or -600. */
static int ranges_ok(struct mc_store *s, void *const *bufs, const size_t *sizes, const size_t *offsets,
                     size_t first, size_t nb, uint64_t size) {
  for (size_t j = first; j < first + nb; j++) {
    if (offsets[j] > size || sizes[j] > size - offsets[j]) return MC_INVALID_PARAMS;
    if (sizes[j] && (!bufs[j] || !mc_regs_covers(s, bufs[j], sizes[j]))) return MC_INVALID_PARAMS;
  }
  return 0;
}

/* The ranged transfers of one session call: per key its session (held by inflight) and its slice of x. */
struct ranged {
  struct sess **e;
  size_t *x0, *nx; /* key i's transfers: x[x0[i], x0[i] + nx[i]) */
  struct mc_xfer *x;
  size_t m;
};

/* Looks each key's session up, checks its ranges and takes it (inflight); results[i] = -600 for a key
 * without a usable session, and a get session past its lease is dropped with -707. */
static void take(struct mc_store *s, struct mc_sess_owner *o, int put, const char *const *keys, void *const *bufs,
                 const size_t *sizes, const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results,
                 struct ranged *g) {
  g->e = mc_calloc(count, sizeof(*g->e));
  g->x0 = mc_calloc(count, sizeof(size_t));
  g->nx = mc_calloc(count, sizeof(size_t));
  g->x = NULL;
  g->m = 0;
  size_t cap = 0;
  uint64_t now = mc_now_ms();
  pthread_mutex_lock(&s->sessions->mu);
  for (size_t i = 0, first = 0; i < count; first += nbufs[i++]) {
    results[i] = MC_INVALID_PARAMS;
    struct sess *e = find(s->sessions, keys[i], put, o);
    if (!e || e->sealed) continue;
    if (!put && now >= e->lease_end) {
      drop(s->sessions, keys[i], 0, o);
      results[i] = MC_LEASE_EXPIRED;
      continue;
    }
    if (ranges_ok(s, bufs, sizes, offsets, first, nbufs[i], e->size)) continue;
    uint32_t nr = put ? e->r.n : 1;
    for (uint32_t q = 0; put && q < nr; q++)
      if (e->r.reps[q].size < e->size) nr = 0; /* a replica smaller than the object: cannot take it */
    if (!nr) {
      results[i] = MC_TRANSFER_FAIL;
      continue;
    }
    if (g->m + nbufs[i] * nr > cap) g->x = mc_realloc(g->x, sizeof(*g->x) * (cap = 2 * (g->m + nbufs[i] * nr) + 16));
    g->x0[i] = g->m;
    for (size_t j = first; j < first + nbufs[i]; j++)
      for (uint32_t q = 0; q < nr; q++) {
        const struct mc_replica_rec *r = &e->r.reps[put ? q : e->rep];
        if (sizes[j])
          g->x[g->m++] = (struct mc_xfer){put ? OPCODE_WRITE : OPCODE_READ, (void *)bufs[j], r->te_endpoint,
                                          r->address + offsets[j], sizes[j]};
      }
    g->nx[i] = g->m - g->x0[i];
    e->inflight++;
    g->e[i] = e;
    results[i] = 0;
  }
  pthread_mutex_unlock(&s->sessions->mu);
}

/* Runs the transfers, then per key the bytes moved (its range sizes) or the first failure; releases the
 * sessions taken. A get session whose lease ended during the reads: -707, and it is dropped. */
static void finish(struct mc_store *s, struct mc_sess_owner *o, int put, const char *const *keys, const size_t *sizes,
                   const size_t *nbufs, size_t count, int64_t *results, struct ranged *g) {
  if (put) mc_xfer_run_retry(s, g->x, g->m);
  else mc_xfer_run(s, g->x, g->m, 0);
  uint64_t now = mc_now_ms();
  pthread_mutex_lock(&s->sessions->mu);
  for (size_t i = 0, first = 0; i < count; first += nbufs[i++]) {
    struct sess *e = g->e[i];
    if (!e) continue;
    int64_t bytes = 0;
    for (size_t j = first; j < first + nbufs[i]; j++) bytes += (int64_t)sizes[j];
    for (size_t q = g->x0[i]; q < g->x0[i] + g->nx[i] && bytes >= 0; q++)
      if (g->x[q].rc) bytes = g->x[q].rc;
    results[i] = bytes;
    e->inflight--;
    if (!put && now >= e->lease_end) {
      if (bytes >= 0) LOG_WARN("lease_expired_before_data_transfer_completed key=%s", keys[i]);
      if (!e->inflight) drop(s->sessions, keys[i], 0, o);
      results[i] = MC_LEASE_EXPIRED;
    }
  }
  pthread_cond_broadcast(&s->sessions->cv);
  pthread_mutex_unlock(&s->sessions->mu);
  mc_free(g->x);
  mc_free(g->nx);
  mc_free(g->x0);
  mc_free(g->e);
}

void mc_sess_ranged(struct mc_store *s, struct mc_sess_owner *o, int put, const char *const *keys,
                    void *const *bufs, const size_t *sizes, const size_t *offsets, const size_t *nbufs,
                    size_t count, int64_t *results) {
  struct ranged g;
  take(s, o, put, keys, bufs, sizes, offsets, nbufs, count, results, &g);
  finish(s, o, put, keys, sizes, nbufs, count, results, &g);
}

void mc_sess_put_end(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count, int revoke,
                     int *results_out) {
  struct mc_sessions *t = s->sessions;
  const char **k = mc_calloc(count, sizeof(*k));
  size_t *at = mc_calloc(count, sizeof(*at)), m = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < count; i++) {
    struct sess *e = find(t, keys[i], 1, o);
    results_out[i] = MC_INVALID_PARAMS;
    if (!e) continue;
    e->sealed = 1;
    k[m] = keys[i], at[m++] = i;
  }
  for (int busy = 1; busy;) { /* the writes still running on them */
    busy = 0;
    for (size_t q = 0; q < m && !busy; q++) {
      const struct sess *e = find(t, k[q], 1, o); /* a concurrent end may have finished it */
      busy = e && e->inflight > 0;
    }
    if (busy) pthread_cond_wait(&t->cv, &t->mu);
  }
  pthread_mutex_unlock(&t->mu);
  int *r = mc_calloc(m ? m : 1, sizeof(*r));
  int call = m ? mcli_batch_put_end(s->master.cli, &mc_put_ops, s->self.client_id, k, m, revoke, r) : 0;
  pthread_mutex_lock(&t->mu);
  for (size_t q = 0; q < m; q++) {
    int st = call ? call : r[q];
    results_out[at[q]] = st;
    if (!st) drop(t, keys[at[q]], 1, o); /* on failure the session stays, sealed: end or revoke may be retried */
  }
  pthread_mutex_unlock(&t->mu);
  mc_free(r);
  mc_free(at);
  mc_free(k);
}

/* ------------------------------------------------------------------ get sessions */

/* The replica a get session reads: a COMPLETE one, this client's own first. */
static int pick(const struct mc_store *s, const struct mcli_reps *r) {
  int best = -1;
  for (uint32_t i = 0; i < r->n; i++) {
    if (r->reps[i].status != MC_REPLICA_COMPLETE) continue;
    if (!strcmp(r->reps[i].te_endpoint, s->self.te_name)) return (int)i;
    if (best < 0) best = (int)i;
  }
  return best;
}

void mc_sess_get_start(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count,
                       int *results_out) {
  struct mcli_reps *r = mc_calloc(count, sizeof(*r));
  uint64_t lease = 0, t0 = mc_now_ms();
  int call = mcli_batch_get_replicas(s->master.cli, keys, count, &lease, r);
  pthread_mutex_lock(&s->sessions->mu);
  for (size_t i = 0; i < count; i++) {
    int st = call ? call : r[i].status, rep = st ? -1 : pick(s, &r[i]);
    if (!st && rep < 0) st = MC_INVALID_REPLICA;
    if (!st && !find(s->sessions, keys[i], 0, o) && !room(o, 0)) st = MC_INVALID_PARAMS; /* the owner's cap */
    results_out[i] = st;
    if (st) drop(s->sessions, keys[i], 0, o);
    else add(s->sessions, keys[i], 0, r[i].reps[rep].size, &r[i], (uint32_t)rep, t0 + lease, o);
  }
  pthread_mutex_unlock(&s->sessions->mu);
  mcli_reps_free(r, count);
  mc_free(r);
}

void mc_sess_get_end(struct mc_store *s, struct mc_sess_owner *o, const char *const *keys, size_t count) {
  struct mc_sessions *t = s->sessions;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < count; i++) {
    struct sess *e;
    while ((e = find(t, keys[i], 0, o)) && e->inflight) pthread_cond_wait(&t->cv, &t->mu);
    drop(t, keys[i], 0, o);
  }
  pthread_mutex_unlock(&t->mu);
}

void mc_sess_drop_owner(struct mc_store *s, struct mc_sess_owner *o) {
  if (!o->n || !mc_api_enter(s)) return; /* not set up: teardown dropped every session already */
  struct mc_sessions *t = s->sessions;
  const char **keys = NULL;
  size_t n = 0, cap = 0;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < NBUCKETS; i++) /* the owner's calls have all returned: nothing of it is in flight */
    for (struct sess *e = t->b[i]; e; e = e->next)
      if (e->owner == o && e->put) {
        if (n == cap) keys = mc_realloc(keys, sizeof(*keys) * (cap = cap ? 2 * cap : 16));
        keys[n++] = mc_strdup(e->key);
      }
  pthread_mutex_unlock(&t->mu);
  if (n) {
    int *r = mc_calloc(n, sizeof(*r));
    if (mcli_batch_put_end(s->master.cli, &mc_put_ops, s->self.client_id, keys, n, 1, r))
      LOG_WARN("a dummy left %zu put sessions open; revoking them failed, the master reclaims them later", n);
    mc_free(r);
  }
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < NBUCKETS; i++)
    for (struct sess **p = &t->b[i]; *p;) {
      struct sess *e = *p;
      if (e->owner != o) {
        p = &e->next;
        continue;
      }
      *p = e->next;
      o->n--;
      sess_free(e);
    }
  pthread_mutex_unlock(&t->mu);
  for (size_t i = 0; i < n; i++) mc_free((char *)keys[i]);
  mc_free(keys);
  mc_api_leave(s);
}
