/* Every public entry point of the store (include/mooncake/store.h), ordered by verb: lifecycle, health,
 * writes, reads, queries and removal, memory, sessions, tasks. An entry point applies the C API's rules
 * (the "-1 = bad call" checks, the batch no-touch rules of docs/store-client.md, "C API"), takes the life
 * lock, answers the not-initialized value when the handle has no back-end, and otherwise calls one verb
 * of the handle's back-end (client.h, struct mc_backend): the local one (local.c) or the dummy client of
 * the standalone layer. Nothing below calls back into this file. */
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"

#define BAD_CALL (-1)

/* The value of verb `verb` of the handle's back-end, called with the life lock held for reading, or
 * `absent` when the handle has none (not set up, or closed). */
#define CALL(s, absent, verb, ...)                                  \
  ({                                                                \
    __typeof__((s)->be->verb((s), ##__VA_ARGS__)) r_ = (absent);    \
    if (mc_api_enter(s)) {                                          \
      r_ = (s)->be->verb((s), ##__VA_ARGS__);                       \
      mc_api_leave(s);                                              \
    }                                                               \
    r_;                                                             \
  })
/* The same for a verb that answers per key: `absent` is run when the handle has no back-end. */
#define CALL_KEYS(s, absent, verb, ...)                             \
  do {                                                              \
    if (mc_api_enter(s)) {                                          \
      (s)->be->verb((s), ##__VA_ARGS__);                            \
      mc_api_leave(s);                                              \
    } else {                                                        \
      absent;                                                       \
    }                                                               \
  } while (0)

static void fill_i64(int64_t *r, size_t n, int64_t v) {
  for (size_t i = 0; i < n; i++) r[i] = v;
}

/* The batch no-touch rules: 0 when an array or a key is NULL, or a buffer is NULL with a size > 0. */
static int batch_args_ok(const char **keys, const void *const *bufs, const size_t *sizes, size_t count,
                         const void *results) {
  if (!keys || !bufs || !sizes || !results) return 0;
  for (size_t i = 0; i < count; i++)
    if (!keys[i] || (!bufs[i] && sizes[i] > 0)) return 0;
  return 1;
}

/* The same for multi-buffer batches: key i is the next nbufs[i] buffers. */
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

static int keys_ok(const char **keys, size_t count) {
  for (size_t i = 0; keys && i < count; i++)
    if (!keys[i]) return 0;
  return keys != NULL;
}

/* ------------------------------------------------------------------ lifecycle */

mooncake_store_t mooncake_store_create(void) {
  struct mc_store *s = mc_store_alloc();
  if (s) mc_live_add(s);
  return s;
}

void mooncake_store_destroy(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return;
  mc_live_remove(s);
  mc_store_close(s);
  mc_store_free(s);
}

int mc_store_setup(mooncake_store_t store, const mc_store_config_t *cfg) {
  struct mc_store *s = store;
  if (!s || !cfg) return BAD_CALL;
  pthread_rwlock_wrlock(&s->life);
  mc_store_close_backend(s);
  int rc = mc_store_do_setup(s, cfg);
  if (!rc) s->be = &mc_local_backend;
  pthread_rwlock_unlock(&s->life);
  return rc;
}

int mooncake_store_setup(mooncake_store_t store, const char *local_hostname, const char *metadata_server,
                         uint64_t global_segment_size, uint64_t local_buffer_size, const char *protocol,
                         const char *device_name, const char *master_server_addr) {
  mc_store_config_t c = {local_hostname, metadata_server, global_segment_size, local_buffer_size,
                         protocol,       device_name,     master_server_addr,  NULL};
  return mc_store_setup(store, &c);
}

int mooncake_store_init_all(mooncake_store_t store, const char *protocol, const char *device_name,
                            uint64_t mount_segment_size) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  mc_store_config_t c = {"localhost:12345", "127.0.0.1:2379", mount_segment_size, 1ull << 30,
                         protocol,          device_name,      "127.0.0.1:50051", NULL};
  pthread_rwlock_wrlock(&s->life);
  int rc = s->be ? MC_INVALID_PARAMS : mc_store_do_setup(s, &c);
  if (!rc) s->be = &mc_local_backend;
  pthread_rwlock_unlock(&s->life);
  return rc;
}

int mc_store_close(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  mc_store_drop_backend(s);
  return 0;
}

/* ------------------------------------------------------------------ health */

int mooncake_store_health_check(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  return CALL(s, 1, health);
}

int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len) {
  struct mc_store *s = store;
  if (!s || !buf_out || !buf_len) return BAD_CALL;
  buf_out[0] = 0; /* (not set up: an empty name) */
  return CALL(s, 0, hostname, buf_out, buf_len) ? BAD_CALL : 0;
}

uint64_t mc_store_warmup_pending(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return 0;
  return CALL(s, 0, warmup_pending);
}

/* ------------------------------------------------------------------ writes */

/* The upstream config as the native one (NULL stays NULL = defaults). */
static const mc_replicate_config_t *native_config(const mooncake_replicate_config_t *in, mc_replicate_config_t *out) {
  if (!in) return NULL;
  *out = (mc_replicate_config_t){in->replica_num, in->with_soft_pin ? MC_SOFT_PIN_SET : MC_SOFT_PIN_KEEP, -1,
                                 in->with_hard_pin, in->preferred_segments, in->preferred_segments_count};
  return out;
}

int mc_store_write(mooncake_store_t store, const char *key, const void *value, size_t size,
                   const mc_replicate_config_t *config, int flags) {
  struct mc_store *s = store;
  if (!s || !key || (!value && size)) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, write1, flags, key, value, size, config);
}

int mooncake_store_put(mooncake_store_t store, const char *key, const void *value, size_t size,
                       const mooncake_replicate_config_t *config) {
  mc_replicate_config_t c;
  return mc_store_write(store, key, value, size, native_config(config, &c), MC_WRITE_COPY);
}

int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                            const mooncake_replicate_config_t *config) {
  mc_replicate_config_t c;
  return mc_store_write(store, key, buffer, size, native_config(config, &c), 0);
}

int mc_store_upsert(mooncake_store_t store, const char *key, const void *value, size_t size,
                    const mooncake_replicate_config_t *config) {
  mc_replicate_config_t c;
  return mc_store_write(store, key, value, size, native_config(config, &c), MC_WRITE_COPY | MC_WRITE_UPSERT);
}

int mc_store_upsert_from(mooncake_store_t store, const char *key, void *buffer, size_t size,
                         const mooncake_replicate_config_t *config) {
  mc_replicate_config_t c;
  return mc_store_write(store, key, buffer, size, native_config(config, &c), MC_WRITE_UPSERT);
}

/* A batch of writes, nbufs NULL (one buffer per key) or per key its buffer count. */
static int write_batch(struct mc_store *s, const char **keys, const void *const *bufs, const size_t *sizes,
                       const size_t *nbufs, size_t count, const mc_replicate_config_t *config,
                       const char *const *group_ids, int flags, int *results_out) {
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), write, flags, keys, bufs, sizes, nbufs, count,
            config, group_ids, results_out);
  return 0;
}

int mc_store_batch_write_grouped(mooncake_store_t store, const char **keys, const void *const *values,
                                 const size_t *sizes, size_t count, const mc_replicate_config_t *config,
                                 const char *const *group_ids, int flags, int *results_out) {
  struct mc_store *s = store;
  if (!s || !batch_args_ok(keys, values, sizes, count, results_out)) return BAD_CALL;
  return write_batch(s, keys, values, sizes, NULL, count, config, group_ids, flags, results_out);
}

int mc_store_batch_write(mooncake_store_t store, const char **keys, const void *const *values, const size_t *sizes,
                         size_t count, const mc_replicate_config_t *config, int flags, int *results_out) {
  return mc_store_batch_write_grouped(store, keys, values, sizes, count, config, NULL, flags, results_out);
}

int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                  size_t count, const mooncake_replicate_config_t *config, int *results_out) {
  mc_replicate_config_t c;
  return mc_store_batch_write(store, keys, (const void *const *)buffers, sizes, count, native_config(config, &c), 0,
                              results_out);
}

int mc_store_batch_upsert_from(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                               size_t count, const mooncake_replicate_config_t *config, int *results_out) {
  mc_replicate_config_t c;
  return mc_store_batch_write(store, keys, (const void *const *)buffers, sizes, count, native_config(config, &c),
                              MC_WRITE_UPSERT, results_out);
}

int mc_store_batch_put(mooncake_store_t store, const char **keys, const void *const *values, const size_t *sizes,
                       size_t count, const mooncake_replicate_config_t *config, int *results_out) {
  mc_replicate_config_t c;
  return mc_store_batch_write(store, keys, values, sizes, count, native_config(config, &c), MC_WRITE_COPY,
                              results_out);
}

/* Multi-buffer writes never copy on the caller's behalf beyond gathering: only MC_WRITE_UPSERT counts. */
int mc_store_batch_write_multi_grouped(mooncake_store_t store, const char **keys, const void *const *bufs,
                                       const size_t *sizes, const size_t *nbufs, size_t count,
                                       const mc_replicate_config_t *config, const char *const *group_ids, int flags,
                                       int *results_out) {
  struct mc_store *s = store;
  if (!s || !multi_args_ok(keys, bufs, sizes, nbufs, count, results_out)) return BAD_CALL;
  return write_batch(s, keys, bufs, sizes, nbufs, count, config, group_ids, flags & MC_WRITE_UPSERT, results_out);
}

int mc_store_batch_write_multi(mooncake_store_t store, const char **keys, const void *const *bufs, const size_t *sizes,
                               const size_t *nbufs, size_t count, const mc_replicate_config_t *config, int flags,
                               int *results_out) {
  return mc_store_batch_write_multi_grouped(store, keys, bufs, sizes, nbufs, count, config, NULL, flags, results_out);
}

/* ------------------------------------------------------------------ reads */

int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size) {
  struct mc_store *s = store;
  if (!s || !key || (!buffer && size)) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, read1, key, buffer, size);
}

static int read_batch(struct mc_store *s, const char **keys, void *const *bufs, const size_t *sizes,
                      const size_t *nbufs, size_t count, int64_t *results_out) {
  if (!count) return 0;
  CALL_KEYS(s, fill_i64(results_out, count, MC_INVALID_PARAMS), read, keys, bufs, sizes, nbufs, count, results_out);
  return 0;
}

int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                  size_t count, int64_t *results_out) {
  struct mc_store *s = store;
  if (!s || !batch_args_ok(keys, (const void *const *)buffers, sizes, count, results_out)) return BAD_CALL;
  return read_batch(s, keys, buffers, sizes, NULL, count, results_out);
}

int mc_store_batch_get_into_multi(mooncake_store_t store, const char **keys, void *const *bufs, const size_t *sizes,
                                  const size_t *nbufs, size_t count, int64_t *results_out) {
  struct mc_store *s = store;
  if (!s || !multi_args_ok(keys, (const void *const *)bufs, sizes, nbufs, count, results_out)) return BAD_CALL;
  return read_batch(s, keys, bufs, sizes, nbufs, count, results_out);
}

int64_t mc_store_get(mooncake_store_t store, const char *key, void **value_out) {
  struct mc_store *s = store;
  if (!s || !key || !value_out) return BAD_CALL;
  *value_out = NULL;
  return CALL(s, MC_INVALID_PARAMS, read_copy, key, value_out);
}

int64_t mooncake_store_get_size(mooncake_store_t store, const char *key) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, size, key);
}

/* ------------------------------------------------------------------ queries and removal */

int mooncake_store_is_exist(mooncake_store_t store, const char *key) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, exist, key);
}

int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), exist_batch, keys, count, results_out);
  return 0;
}

int mc_store_get_replica_desc(mooncake_store_t store, const char *key, mc_replica_desc_t **out) {
  struct mc_store *s = store;
  if (!s || !key || !out) return BAD_CALL;
  *out = NULL;
  return CALL(s, MC_INVALID_PARAMS, replica_desc, key, out);
}

void mc_store_replica_desc_free(mc_replica_desc_t *descs, int count) {
  for (int i = 0; descs && i < count; i++) {
    mc_free(descs[i].endpoint);
    mc_free(descs[i].segment_name);
  }
  mc_free(descs);
}

int mooncake_store_remove(mooncake_store_t store, const char *key, int force) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, remove, key, force);
}

int mc_store_batch_remove(mooncake_store_t store, const char **keys, size_t count, int force, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), remove_batch, keys, count, force, results_out);
  return 0;
}

int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force) {
  struct mc_store *s = store;
  if (!s || !pattern) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, remove_regex, pattern, force);
}

int64_t mooncake_store_remove_all(mooncake_store_t store, int force) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, remove_all, force);
}

int mc_store_batch_replica_clear(mooncake_store_t store, const char **keys, size_t count, const char *segment_name,
                                 int *cleared_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !cleared_out) return BAD_CALL;
  memset(cleared_out, 0, count * sizeof(*cleared_out));
  return CALL(s, MC_INVALID_PARAMS, replica_clear, keys, count, segment_name ? segment_name : "", cleared_out);
}

/* ------------------------------------------------------------------ memory */

int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size) {
  struct mc_store *s = store;
  if (!s || !buffer || !size) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, register_buffer, buffer, size);
}

int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer) {
  struct mc_store *s = store;
  if (!s || !buffer) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, unregister_buffer, buffer);
}

int mc_store_is_registered(mooncake_store_t store, const void *ptr, size_t len) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  return ptr && len && CALL(s, 0, is_registered, ptr, len);
}

uint64_t mc_store_alloc_from_mem_pool(mooncake_store_t store, size_t size) {
  struct mc_store *s = store;
  if (!s) return 0;
  return CALL(s, 0, pool_alloc, size);
}

int mc_store_mount_extra_segment(mooncake_store_t store, const char *path, uint64_t offset, uint64_t size,
                                 const char *location, char *id_out, size_t id_len) {
  struct mc_store *s = store;
  if (!s || !id_out || id_len < 37) return BAD_CALL;
  *id_out = 0;
  return CALL(s, MC_INVALID_PARAMS, mount_extra, path, offset, size, location, id_out, id_len);
}

int mc_store_unmount_extra_segment(mooncake_store_t store, const char *id, uint64_t grace_ms, int free_memory) {
  struct mc_store *s = store;
  if (!s || !id) return BAD_CALL;
  return CALL(s, MC_INVALID_PARAMS, unmount_extra, id, grace_ms, free_memory);
}

/* ------------------------------------------------------------------ sessions */

int mc_store_put_session_start(mooncake_store_t store, const char **keys, const size_t *sizes, size_t count,
                               const mc_replicate_config_t *config, const char *const *group_ids, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !sizes || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), put_start, keys, sizes, count, config, group_ids,
            results_out);
  return 0;
}

static int ranged(struct mc_store *s, int put, const char **keys, void *const *bufs, const size_t *sizes,
                  const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results_out) {
  if (!s || !keys_ok(keys, count) || !bufs || !sizes || !offsets || !nbufs || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, fill_i64(results_out, count, MC_INVALID_PARAMS), ranged, put, keys, bufs, sizes, offsets, nbufs,
            count, results_out);
  return 0;
}

int mc_store_put_session_write(mooncake_store_t store, const char **keys, const void *const *bufs, const size_t *sizes,
                               const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results_out) {
  return ranged(store, 1, keys, (void *const *)bufs, sizes, offsets, nbufs, count, results_out);
}

int mc_store_get_session_read(mooncake_store_t store, const char **keys, void *const *bufs, const size_t *sizes,
                              const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results_out) {
  return ranged(store, 0, keys, bufs, sizes, offsets, nbufs, count, results_out);
}

int mc_store_put_session_end(mooncake_store_t store, const char **keys, size_t count, int revoke, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), put_end, keys, count, revoke, results_out);
  return 0;
}

int mc_store_get_session_start(mooncake_store_t store, const char **keys, size_t count, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count) || !results_out) return BAD_CALL;
  if (!count) return 0;
  CALL_KEYS(s, mc_fill_int(results_out, count, MC_INVALID_PARAMS), get_start, keys, count, results_out);
  return 0;
}

int mc_store_get_session_end(mooncake_store_t store, const char **keys, size_t count) {
  struct mc_store *s = store;
  if (!s || !keys_ok(keys, count)) return BAD_CALL;
  CALL_KEYS(s, (void)0, get_end, keys, count); /* (not set up: teardown dropped every session) */
  return 0;
}

/* ------------------------------------------------------------------ copy and move tasks */

int mc_store_create_copy_task(mooncake_store_t store, const char *key, const char **targets, size_t count,
                              mc_task_id_t *id_out) {
  struct mc_store *s = store;
  if (!s || !key || !keys_ok(targets, count) || !id_out) return BAD_CALL;
  *id_out = (mc_task_id_t){0, 0};
  return CALL(s, MC_INVALID_PARAMS, copy_task, key, targets, count, id_out);
}

int mc_store_create_move_task(mooncake_store_t store, const char *key, const char *source, const char *target,
                              mc_task_id_t *id_out) {
  struct mc_store *s = store;
  if (!s || !key || !source || !target || !id_out) return BAD_CALL;
  *id_out = (mc_task_id_t){0, 0};
  return CALL(s, MC_INVALID_PARAMS, move_task, key, source, target, id_out);
}

int mc_store_query_task(mooncake_store_t store, mc_task_id_t id, mc_task_info_t *out) {
  struct mc_store *s = store;
  if (!s || !out) return BAD_CALL;
  memset(out, 0, sizeof(*out));
  return CALL(s, MC_INVALID_PARAMS, query_task, id, out);
}
