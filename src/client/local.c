/* The local back-end (client.h, struct mc_backend): this process is the client, set up by setup.c. Its
 * writes, reads and sessions are put.c's, get.c's and session.c's functions themselves; what is defined
 * here is what takes one master RPC (existence, removal, replica descriptors and clearing, tasks), the
 * registrations of caller memory, and the health and identity answers. Life is held for reading by the
 * caller (api.c, or the real client of the standalone layer). */
#include <stdio.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define HEALTH_TIMEOUT_MS 2000
#define KEYS_CHUNK 65536 /* keys of one batched master call */

static void local_close(struct mc_store *s) {
  if (s->ready) mc_store_do_teardown(s);
}

static uint64_t local_warmup_pending(struct mc_store *s) { return mc_te_prefault_pending(s->engine.te); }

static int local_health(struct mc_store *s) {
  char *version = NULL;
  int rc = mcli_service_ready(s->master.cli, HEALTH_TIMEOUT_MS, &version, NULL);
  mc_free(version);
  return rc ? 2 : 0;
}

static int local_hostname(struct mc_store *s, char *buf, size_t len) {
  size_t n = strlen(s->self.name);
  if (n >= len) return -1;
  memcpy(buf, s->self.name, n + 1);
  return 0;
}

/* ------------------------------------------------------------------ queries and removal */

static int local_exist(struct mc_store *s, const char *key) {
  int rc = *key ? mcli_exist(s->master.cli, key) : MC_INVALID_PARAMS;
  if (rc == 0 || rc == 1) mc_stats_lookup(s, rc);
  return rc;
}

/* Runs a per-key master batch call over the non-empty keys, in chunks; empty keys get -600. */
typedef int (*keys_call)(struct mcli *c, const char *const *keys, size_t n, int arg, int *results);

static void keyed_batch(struct mc_store *s, const char *const *keys, size_t count, int arg, int *results,
                        keys_call fn) {
  const char **k = mc_calloc(count, sizeof(char *));
  size_t *pos = mc_calloc(count, sizeof(size_t)), m = 0;
  int *r = mc_calloc(count, sizeof(int));
  for (size_t i = 0; i < count; i++) {
    if (!*keys[i]) results[i] = MC_INVALID_PARAMS;
    else k[m] = keys[i], pos[m++] = i;
  }
  for (size_t off = 0; off < m; off += KEYS_CHUNK) {
    size_t n = MC_MIN(KEYS_CHUNK, m - off);
    int rc = fn(s->master.cli, k + off, n, arg, r + off);
    if (rc) mc_fill_int(r + off, n, rc);
  }
  for (size_t i = 0; i < m; i++) results[pos[i]] = r[i];
  mc_free(r);
  mc_free(pos);
  mc_free(k);
}

static int exist_call(struct mcli *c, const char *const *keys, size_t n, int arg, int *results) {
  (void)arg;
  return mcli_batch_exist(c, keys, n, results);
}

static void local_exist_batch(struct mc_store *s, const char *const *keys, size_t count, int *results) {
  keyed_batch(s, keys, count, 0, results, exist_call);
  for (size_t i = 0; i < count; i++)
    if (results[i] == 0 || results[i] == 1) mc_stats_lookup(s, results[i]);
}

static int local_remove(struct mc_store *s, const char *key, int force) {
  return *key ? mcli_remove(s->master.cli, key, force) : MC_INVALID_PARAMS;
}

static int remove_call(struct mcli *c, const char *const *keys, size_t n, int force, int *results) {
  return mcli_batch_remove(c, keys, n, force, results);
}

static void local_remove_batch(struct mc_store *s, const char *const *keys, size_t count, int force, int *results) {
  keyed_batch(s, keys, count, force, results, remove_call);
}

static int64_t local_remove_regex(struct mc_store *s, const char *pattern, int force) {
  return mcli_remove_by_regex(s->master.cli, pattern, force);
}

static int64_t local_remove_all(struct mc_store *s, int force) { return mcli_remove_all(s->master.cli, force); }

static int local_replica_desc(struct mc_store *s, const char *key, mc_replica_desc_t **out) {
  struct mcli_reps l;
  uint64_t lease = 0;
  int rc = *key ? mcli_get_replicas(s->master.cli, key, &lease, &l) : MC_INVALID_PARAMS;
  if (rc) return rc;
  mc_replica_desc_t *d = mc_calloc(l.n ? l.n : 1, sizeof(*d));
  for (uint32_t i = 0; i < l.n; i++) {
    const struct mc_replica_rec *r = &l.reps[i];
    if (r->status != MC_REPLICA_COMPLETE) continue;
    d[rc++] = (mc_replica_desc_t){r->status, r->size, r->address, mc_strdup(r->te_endpoint),
                                  mc_strdup(r->segment_name)};
  }
  *out = d;
  mcli_reps_free(&l, 1);
  return rc;
}

static int local_replica_clear(struct mc_store *s, const char *const *keys, size_t count, const char *segment,
                               int *cleared) {
  const char **k = mc_calloc(count ? count : 1, sizeof(char *));
  size_t *pos = mc_calloc(count ? count : 1, sizeof(size_t)), m = 0;
  uint8_t *flag = mc_calloc(count ? count : 1, 1);
  for (size_t i = 0; i < count; i++)
    if (*keys[i]) k[m] = keys[i], pos[m++] = i; /* empty keys are skipped */
  int rc = 0;
  for (size_t off = 0; off < m && !rc; off += KEYS_CHUNK)
    rc = mcli_batch_replica_clear(s->master.cli, s->self.client_id, k + off, MC_MIN(KEYS_CHUNK, m - off), segment,
                                  flag + off);
  int n = 0;
  for (size_t i = 0; i < m && !rc; i++)
    if (flag[i]) cleared[pos[i]] = 1, n++;
  if (rc) LOG_WARN("batch_replica_clear: the master answered %d", rc);
  mc_free(flag);
  mc_free(pos);
  mc_free(k);
  return rc ? rc : n;
}

/* ------------------------------------------------------------------ memory */

static int local_register_buffer(struct mc_store *s, void *buffer, size_t size) {
  int rc = registerLocalMemory(s->engine.te, buffer, size, "cpu:0", 1);
  if (rc) LOG_WARN("register_buffer %p+%zu failed: %s", buffer, size, mc_te_err_name(rc));
  else mc_regs_add(s, (uint64_t)(uintptr_t)buffer, size);
  return rc ? MC_INVALID_PARAMS : 0;
}

static int local_unregister_buffer(struct mc_store *s, void *buffer) {
  uint64_t a = (uint64_t)(uintptr_t)buffer, len = 0;
  /* our own segment and staging buffer are not the caller's to unregister */
  if (buffer == s->seg.base || buffer == s->staging.base || mc_regs_remove(s, a, &len)) return MC_INVALID_PARAMS;
  int te = unregisterLocalMemory(s->engine.te, buffer);
  if (!te) return 0;
  LOG_WARN("unregister_buffer %p failed: %s", buffer, mc_te_err_name(te));
  mc_regs_add(s, a, len);
  return MC_INVALID_PARAMS;
}

static int local_is_registered(struct mc_store *s, const void *p, size_t len) { return mc_regs_covers(s, p, len); }

static uint64_t local_pool_alloc(struct mc_store *s, size_t size) {
  (void)s, (void)size;
  return 0; /* a memory pool is the dummy's (docs/standalone.md) */
}

/* ------------------------------------------------------------------ tasks */

static void task_id_out(mc_task_id_t *out, struct mc_uuid id) { *out = (mc_task_id_t){id.hi, id.lo}; }

static int local_copy_task(struct mc_store *s, const char *key, const char *const *targets, size_t n,
                           mc_task_id_t *id_out) {
  struct mc_uuid id = {0, 0};
  int rc = !*key || !n || n > MC_TASK_MAX_TARGETS
               ? MC_INVALID_PARAMS
               : mcli_create_copy_task(s->master.cli, key, (const char *const *)targets, (uint32_t)n, &id);
  task_id_out(id_out, id);
  return rc;
}

static int local_move_task(struct mc_store *s, const char *key, const char *src, const char *dst,
                           mc_task_id_t *id_out) {
  struct mc_uuid id = {0, 0};
  int rc = !*key ? MC_INVALID_PARAMS : mcli_create_move_task(s->master.cli, key, src, dst, &id);
  task_id_out(id_out, id);
  return rc;
}

static int local_query_task(struct mc_store *s, mc_task_id_t id, mc_task_info_t *out) {
  struct mcli_task_info t = {0};
  int rc = mcli_query_task(s->master.cli, (struct mc_uuid){id.hi, id.lo}, &t);
  if (rc) return rc;
  task_id_out(&out->id, t.id);
  out->type = t.type;
  out->status = t.status;
  out->created_at_ms_epoch = t.created_ms;
  out->last_updated_at_ms_epoch = t.updated_ms;
  snprintf(out->assigned_client, sizeof(out->assigned_client), "%s", t.client);
  snprintf(out->message, sizeof(out->message), "%s", t.message);
  mcli_task_info_free(&t);
  return 0;
}

/* ------------------------------------------------------------------ sessions of the handle's own callers */

static void local_put_start(struct mc_store *s, const char *const *keys, const size_t *sizes, size_t count,
                            const mc_replicate_config_t *cfg, const char *const *groups, int *results) {
  mc_sess_put_start(s, NULL, keys, sizes, count, cfg, groups, results);
}

static void local_ranged(struct mc_store *s, int put, const char *const *keys, void *const *bufs, const size_t *sizes,
                         const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results) {
  mc_sess_ranged(s, NULL, put, keys, bufs, sizes, offsets, nbufs, count, results);
}

static void local_put_end(struct mc_store *s, const char *const *keys, size_t count, int revoke, int *results) {
  mc_sess_put_end(s, NULL, keys, count, revoke, results);
}

static void local_get_start(struct mc_store *s, const char *const *keys, size_t count, int *results) {
  mc_sess_get_start(s, NULL, keys, count, results);
}

static void local_get_end(struct mc_store *s, const char *const *keys, size_t count) {
  mc_sess_get_end(s, NULL, keys, count);
}

const struct mc_backend mc_local_backend = {
    .name = "local",
    .close = local_close,
    .warmup_pending = local_warmup_pending,
    .health = local_health,
    .hostname = local_hostname,
    .write1 = mc_write,
    .write = mc_write_batch,
    .read1 = mc_get_into,
    .read = mc_get_batch,
    .read_copy = mc_get_copy,
    .size = mc_get_size,
    .exist = local_exist,
    .exist_batch = local_exist_batch,
    .remove = local_remove,
    .remove_batch = local_remove_batch,
    .remove_regex = local_remove_regex,
    .remove_all = local_remove_all,
    .replica_desc = local_replica_desc,
    .replica_clear = local_replica_clear,
    .register_buffer = local_register_buffer,
    .unregister_buffer = local_unregister_buffer,
    .is_registered = local_is_registered,
    .pool_alloc = local_pool_alloc,
    .mount_extra = mc_extra_segment_mount,
    .unmount_extra = mc_extra_segment_unmount,
    .copy_task = local_copy_task,
    .move_task = local_move_task,
    .query_task = local_query_task,
    .put_start = local_put_start,
    .ranged = local_ranged,
    .put_end = local_put_end,
    .get_start = local_get_start,
    .get_end = local_get_end,
};
