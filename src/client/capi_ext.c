/* Native entry points the Python package needs beyond the upstream C API (store.h, "additions for the
 * Python package") that are not single calls of put.c / get.c: multi-buffer batches (gathered into /
 * scattered from one contiguous area, the staging buffer when it has room), replica descriptors, the
 * registered-range query, replica clearing and a close that keeps the handle. Argument rules and
 * not-initialized values follow capi.c; the writes and reads themselves are put.c's and get.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define BAD_CALL (-1)

/* mc_api_enter for a batch call: when not set up, every result is the not-initialized value. */
static int enter_batch(struct mc_store *s, size_t count, int *results) {
  if (mc_api_enter(s)) return 1;
  mc_fill_int(results, count, MC_INVALID_PARAMS);
  return 0;
}

/* ------------------------------------------------------------------ multi-buffer batches */

/* One contiguous area per key standing in for its buffer list: the key's single buffer itself, or
 * space in the staging buffer (registered, so transfers need no bounce) or on the heap. */
struct area {
  char *p;
  uint64_t len;
  int kind; /* 0 caller's buffer, 1 staging, 2 heap, -1 none (allocation failed or total 0) */
};

static void areas_get(struct mc_store *s, struct area *a, const void *const *bufs, const size_t *sizes,
                      const size_t *nbufs, size_t count, size_t *first) {
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    first[i] = at;
    a[i].len = 0;
    for (size_t j = 0; j < nbufs[i]; j++) a[i].len += sizes[at + j];
    if (nbufs[i] == 1 && a[i].len) a[i].p = (char *)bufs[at], a[i].kind = 0;
    else if (!a[i].len) a[i].p = NULL, a[i].kind = -1;
    else if ((a[i].p = mc_stage_alloc(s->staging.pool, a[i].len, 0))) a[i].kind = 1;
    else a[i].kind = (a[i].p = mc_try_malloc(a[i].len)) ? 2 : -1;
    at += nbufs[i];
  }
}

static void areas_put(struct mc_store *s, struct area *a, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (a[i].kind == 1) mc_stage_release(s->staging.pool, a[i].p, a[i].len);
    else if (a[i].kind == 2) mc_free(a[i].p);
  }
}

/* Copies between a key's buffer list and its area (gather: list -> area), up to len bytes. */
static void area_copy(struct area *a, void *const *bufs, const size_t *sizes, size_t nbufs, uint64_t len, int gather) {
  uint64_t off = 0;
  for (size_t j = 0; j < nbufs && off < len; j++) {
    uint64_t n = MC_MIN(sizes[j], len - off);
    if (gather) memcpy(a->p + off, bufs[j], n);
    else memcpy(bufs[j], a->p + off, n);
    off += n;
  }
}

static int multi_args_ok(const char **keys, const void *const *bufs, const size_t *sizes, const size_t *nbufs,
                         size_t count, const void *results) {
  if (!keys || !bufs || !sizes || !nbufs || !results) return 0;
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    if (!keys[i]) return 0;
    total += nbufs[i];
  }
  for (size_t j = 0; j < total; j++)
    if (!bufs[j] && sizes[j]) return 0;
  return 1;
}

/* The areas of a multi-buffer call, with their pointers and lengths in the layout of the batch calls. */
struct multi {
  struct area *a;
  size_t *first;
  void **p;
  size_t *len;
};

static void multi_open(struct mc_store *s, struct multi *m, const void *const *bufs, const size_t *sizes,
                       const size_t *nbufs, size_t count) {
  m->a = mc_calloc(count, sizeof(*m->a));
  m->first = mc_calloc(count, sizeof(size_t));
  m->p = mc_calloc(count, sizeof(void *));
  m->len = mc_calloc(count, sizeof(size_t));
  areas_get(s, m->a, bufs, sizes, nbufs, count, m->first);
  for (size_t i = 0; i < count; i++) m->p[i] = m->a[i].p, m->len[i] = m->a[i].len;
}

static void multi_close(struct mc_store *s, struct multi *m, size_t count) {
  areas_put(s, m->a, count);
  mc_free(m->len);
  mc_free(m->p);
  mc_free(m->first);
  mc_free(m->a);
}

int mc_store_batch_write_multi(mooncake_store_t store, const char **keys, const void *const *bufs, const size_t *sizes,
                               const size_t *nbufs, size_t count, const mc_replicate_config_t *config, int flags,
                               int *results_out) {
  return mc_store_batch_write_multi_grouped(store, keys, bufs, sizes, nbufs, count, config, NULL, flags, results_out);
}

int mc_store_batch_write_multi_grouped(mooncake_store_t store, const char **keys, const void *const *bufs,
                                       const size_t *sizes, const size_t *nbufs, size_t count,
                                       const mc_replicate_config_t *config, const char *const *group_ids, int flags,
                                       int *results_out) {
  struct mc_store *s = store;
  if (!s || !multi_args_ok(keys, bufs, sizes, nbufs, count, results_out)) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int,
               (mc_dummy_write(dm, flags & MC_WRITE_UPSERT, keys, bufs, sizes, nbufs, count, config, group_ids, 0,
                               results_out),
                0));
  if (!enter_batch(s, count, results_out)) return 0;
  struct multi m;
  multi_open(s, &m, bufs, sizes, nbufs, count);
  const char **k = mc_calloc(count, sizeof(char *)), **g = group_ids ? mc_calloc(count, sizeof(char *)) : NULL;
  size_t *pos = mc_calloc(count, sizeof(size_t)), n = 0;
  for (size_t i = 0; i < count; i++) {
    if (m.a[i].kind < 0) { /* total 0, or no memory to gather into */
      results_out[i] = MC_INVALID_PARAMS;
      continue;
    }
    if (m.a[i].kind) area_copy(&m.a[i], (void *const *)bufs + m.first[i], sizes + m.first[i], nbufs[i], m.a[i].len, 1);
    if (g) g[n] = group_ids[i];
    k[n] = keys[i], m.p[n] = m.p[i], m.len[n] = m.len[i], pos[n++] = i;
  }
  int *r = mc_calloc(n ? n : 1, sizeof(int));
  mc_write_batch(s, flags & MC_WRITE_UPSERT, k, (const void *const *)m.p, m.len, n, config, g, r); /* zero-copy */
  for (size_t j = 0; j < n; j++) results_out[pos[j]] = r[j];
  mc_free(r);
  mc_free(pos);
  mc_free(g);
  mc_free(k);
  multi_close(s, &m, count);
  mc_api_leave(s);
  return 0;
}

int mc_store_batch_get_into_multi(mooncake_store_t store, const char **keys, void *const *bufs, const size_t *sizes,
                                  const size_t *nbufs, size_t count, int64_t *results_out) {
  struct mc_store *s = store;
  if (!s || !multi_args_ok(keys, (const void *const *)bufs, sizes, nbufs, count, results_out)) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int, (mc_dummy_read(dm, keys, bufs, sizes, nbufs, count, 0, results_out), 0));
  if (!mc_api_enter(s)) {
    for (size_t i = 0; i < count; i++) results_out[i] = MC_INVALID_PARAMS;
    return 0;
  }
  struct multi m;
  multi_open(s, &m, (const void *const *)bufs, sizes, nbufs, count);
  const char **k = mc_calloc(count, sizeof(char *));
  size_t *pos = mc_calloc(count, sizeof(size_t)), n = 0;
  for (size_t i = 0; i < count; i++) {
    if (m.a[i].kind < 0) {
      results_out[i] = MC_INVALID_PARAMS;
      continue;
    }
    k[n] = keys[i], m.p[n] = m.a[i].p, m.len[n] = m.a[i].len, pos[n++] = i;
  }
  int64_t *r = mc_calloc(n ? n : 1, sizeof(int64_t));
  mc_get_batch(s, k, m.p, m.len, n, r);
  for (size_t j = 0; j < n; j++) {
    size_t i = pos[j];
    results_out[i] = r[j];
    if (r[j] > 0 && m.a[i].kind) area_copy(&m.a[i], bufs + m.first[i], sizes + m.first[i], nbufs[i], (uint64_t)r[j], 0);
  }
  mc_free(r);
  mc_free(pos);
  mc_free(k);
  multi_close(s, &m, count);
  mc_api_leave(s);
  return 0;
}

/* ------------------------------------------------------------------ replicas, registrations, close */

int mc_store_get_replica_desc(mooncake_store_t store, const char *key, mc_replica_desc_t **out) {
  struct mc_store *s = store;
  if (!s || !key || !out) return BAD_CALL;
  *out = NULL;
  MC_VIA_DUMMY(s, int, mc_dummy_replica_desc(dm, key, out)); /* the real client's answer (docs/standalone.md) */
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  struct mcli_reps l;
  uint64_t lease = 0;
  int rc = *key ? mcli_get_replicas(s->master.cli, key, &lease, &l) : MC_INVALID_PARAMS;
  if (!rc) {
    mc_replica_desc_t *d = mc_calloc(l.n ? l.n : 1, sizeof(*d));
    for (uint32_t i = 0; i < l.n; i++) {
      const struct mc_replica_rec *r = &l.reps[i];
      if (r->status != MC_REPLICA_COMPLETE) continue;
      d[rc++] = (mc_replica_desc_t){r->status, r->size, r->address, mc_strdup(r->te_endpoint),
                                    mc_strdup(r->segment_name)};
    }
    *out = d;
    mcli_reps_free(&l, 1);
  }
  mc_api_leave(s);
  return rc;
}

void mc_store_replica_desc_free(mc_replica_desc_t *descs, int count) {
  for (int i = 0; descs && i < count; i++) {
    mc_free(descs[i].endpoint);
    mc_free(descs[i].segment_name);
  }
  mc_free(descs);
}

int mc_store_is_registered(mooncake_store_t store, const void *ptr, size_t len) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  MC_VIA_DUMMY(s, int, ptr && len && mc_dummy_owns(dm, ptr, len));
  if (!mc_api_enter(s)) return 0;
  int rc = ptr && len && mc_regs_covers(s, ptr, len);
  mc_api_leave(s);
  return rc;
}

int mc_store_close(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  pthread_rwlock_wrlock(&s->life);
  if (s->ready) mc_store_do_teardown(s);
  mc_store_drop_dummy(s);
  pthread_rwlock_unlock(&s->life);
  return 0;
}

/* ------------------------------------------------------------------ standalone mode (docs/standalone.md) */

void mc_store_drop_dummy(struct mc_store *s) {
  if (!s->dummy) return;
  atomic_store(&s->dummy_on, 0);
  mc_dummy_close(s->dummy);
  s->dummy = NULL;
}

int mc_store_setup_dummy(mooncake_store_t store, uint64_t mem_pool_size, uint64_t local_buffer_size,
                         const char *server_address) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  struct mc_dummy *d;
  int rc = mc_dummy_open(&d, mem_pool_size, local_buffer_size, server_address);
  if (rc) return rc; /* a failed setup_dummy leaves the handle as it was */
  pthread_rwlock_wrlock(&s->life);
  if (s->ready) mc_store_do_teardown(s);
  mc_store_drop_dummy(s);
  s->dummy = d;
  atomic_store(&s->dummy_on, 1);
  pthread_rwlock_unlock(&s->life);
  return 0;
}

uint64_t mc_store_alloc_from_mem_pool(mooncake_store_t store, size_t size) {
  struct mc_store *s = store;
  if (!s) return 0;
  MC_VIA_DUMMY(s, uint64_t, mc_dummy_alloc(dm, size));
  return 0;
}

/* ------------------------------------------------------------------ batch_replica_clear */

#define CLEAR_CHUNK 65536

int mc_store_batch_replica_clear(mooncake_store_t store, const char **keys, size_t count, const char *segment_name,
                                 int *cleared_out) {
  struct mc_store *s = store;
  if (!s || !keys || !cleared_out) return BAD_CALL;
  for (size_t i = 0; i < count; i++)
    if (!keys[i]) return BAD_CALL;
  memset(cleared_out, 0, count * sizeof(*cleared_out));
  MC_VIA_DUMMY(s, int, MC_NOT_SUPPORTED);
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  const char **k = mc_calloc(count ? count : 1, sizeof(char *));
  size_t *pos = mc_calloc(count ? count : 1, sizeof(size_t)), m = 0;
  uint8_t *flag = mc_calloc(count ? count : 1, 1);
  for (size_t i = 0; i < count; i++)
    if (*keys[i]) k[m] = keys[i], pos[m++] = i; /* empty keys are skipped */
  int rc = 0;
  for (size_t off = 0; off < m && !rc; off += CLEAR_CHUNK)
    rc = mcli_batch_replica_clear(s->master.cli, s->self.client_id, k + off, MC_MIN(CLEAR_CHUNK, m - off),
                                  segment_name ? segment_name : "", flag + off);
  int n = 0;
  for (size_t i = 0; i < m && !rc; i++)
    if (flag[i]) cleared_out[pos[i]] = 1, n++;
  if (rc) LOG_WARN("batch_replica_clear: the master answered %d", rc);
  mc_free(flag);
  mc_free(pos);
  mc_free(k);
  mc_api_leave(s);
  return rc ? rc : n;
}

/* ------------------------------------------------------------------ copy and move tasks */

static void task_id_out(mc_task_id_t *out, struct mc_uuid id) { *out = (mc_task_id_t){id.hi, id.lo}; }

int mc_store_create_copy_task(mooncake_store_t store, const char *key, const char **targets, size_t count,
                              mc_task_id_t *id_out) {
  struct mc_store *s = store;
  if (!s || !key || !targets || !id_out) return BAD_CALL;
  for (size_t i = 0; i < count; i++)
    if (!targets[i]) return BAD_CALL;
  task_id_out(id_out, (struct mc_uuid){0, 0});
  MC_VIA_DUMMY(s, int, mc_dummy_task(dm, key, targets, count, NULL, id_out));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  struct mc_uuid id = {0, 0};
  int rc = !*key || !count || count > MC_TASK_MAX_TARGETS
               ? MC_INVALID_PARAMS
               : mcli_create_copy_task(s->master.cli, key, targets, (uint32_t)count, &id);
  task_id_out(id_out, id);
  mc_api_leave(s);
  return rc;
}

int mc_store_create_move_task(mooncake_store_t store, const char *key, const char *source, const char *target,
                              mc_task_id_t *id_out) {
  struct mc_store *s = store;
  if (!s || !key || !source || !target || !id_out) return BAD_CALL;
  task_id_out(id_out, (struct mc_uuid){0, 0});
  MC_VIA_DUMMY(s, int, mc_dummy_task(dm, key, &target, 1, source, id_out));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  struct mc_uuid id = {0, 0};
  int rc = !*key ? MC_INVALID_PARAMS : mcli_create_move_task(s->master.cli, key, source, target, &id);
  task_id_out(id_out, id);
  mc_api_leave(s);
  return rc;
}

int mc_store_query_task(mooncake_store_t store, mc_task_id_t id, mc_task_info_t *out) {
  struct mc_store *s = store;
  if (!s || !out) return BAD_CALL;
  memset(out, 0, sizeof(*out));
  MC_VIA_DUMMY(s, int, mc_dummy_query_task(dm, id, out));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  struct mcli_task_info t = {0};
  int rc = mcli_query_task(s->master.cli, (struct mc_uuid){id.hi, id.lo}, &t);
  if (!rc) {
    task_id_out(&out->id, t.id);
    out->type = t.type;
    out->status = t.status;
    out->created_at_ms_epoch = t.created_ms;
    out->last_updated_at_ms_epoch = t.updated_ms;
    snprintf(out->assigned_client, sizeof(out->assigned_client), "%s", t.client);
    snprintf(out->message, sizeof(out->message), "%s", t.message);
    mcli_task_info_free(&t);
  }
  mc_api_leave(s);
  return rc;
}
