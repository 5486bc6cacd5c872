/* The public entry points (include/mooncake/store.h): the "-1 = bad call" checks, the batch
 * no-touch rules, the not-initialized values, and the life lock around every call. Every write (put,
 * put_from, upsert, their batches, and mc_store_write / mc_store_batch_write behind them) goes straight
 * to put.c, every read to get.c, key queries and removals to mcli.c; building and tearing down to
 * setup.c. */
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "net/mrpc.h"
#include "client/dummy.h"

#define BAD_CALL (-1)
#define HEALTH_TIMEOUT_MS 2000
#define EXIST_CHUNK 65536

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
  if (s->ready) mc_store_do_teardown(s);
  mc_store_drop_dummy(s);
  int rc = mc_store_do_setup(s, cfg);
  pthread_rwlock_unlock(&s->life);
  return rc;
}

uint64_t mc_store_warmup_pending(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return 0;
  MC_VIA_DUMMY(s, uint64_t, 0);
  if (!mc_api_enter(s)) return 0;
  uint64_t n = mc_te_prefault_pending(s->engine.te);
  mc_api_leave(s);
  return n;
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
  int rc = s->ready ? MC_INVALID_PARAMS : mc_store_do_setup(s, &c);
  pthread_rwlock_unlock(&s->life);
  return rc;
}

int mooncake_store_health_check(mooncake_store_t store) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  MC_VIA_DUMMY(s, int, mc_dummy_health(dm));
  if (!mc_api_enter(s)) return 1;
  char *version = NULL;
  int rc = mcli_service_ready(s->master.cli, HEALTH_TIMEOUT_MS, &version, NULL);
  mc_free(version);
  mc_api_leave(s);
  return rc ? 2 : 0;
}

int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len) {
  struct mc_store *s = store;
  if (!s || !buf_out || !buf_len) return BAD_CALL;
  MC_VIA_DUMMY(s, int, mc_dummy_hostname(dm, buf_out, buf_len));
  if (!mc_api_enter(s)) {
    buf_out[0] = 0;
    return 0;
  }
  size_t n = strlen(s->self.name);
  int rc = n < buf_len ? 0 : BAD_CALL;
  if (!rc) memcpy(buf_out, s->self.name, n + 1);
  mc_api_leave(s);
  return rc;
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
  MC_VIA_DUMMY(s, int, mc_dummy_write1(dm, key, value, size, config, flags));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int rc = mc_write(s, flags, key, value, size, config);
  mc_api_leave(s);
  return rc;
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

/* The batch no-touch rules (docs/store-client.md, "C API"). */
int mc_batch_args_ok(const char **keys, const void *const *bufs, const size_t *sizes, size_t count,
                     const void *results) {
  if (!keys || !bufs || !sizes || !results) return 0;
  for (size_t i = 0; i < count; i++)
    if (!keys[i] || (!bufs[i] && sizes[i] > 0)) return 0;
  return 1;
}

void mc_fill_int(int *r, size_t n, int v) {
  for (size_t i = 0; i < n; i++) r[i] = v;
}

int mc_store_batch_write_grouped(mooncake_store_t store, const char **keys, const void *const *values,
                                 const size_t *sizes, size_t count, const mc_replicate_config_t *config,
                                 const char *const *group_ids, int flags, int *results_out) {
  struct mc_store *s = store;
  if (!s || !mc_batch_args_ok(keys, values, sizes, count, results_out)) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int, (mc_dummy_write(dm, flags, keys, values, sizes, NULL, count, config, group_ids, 0, results_out), 0));
  if (!mc_api_enter(s)) {
    mc_fill_int(results_out, count, MC_INVALID_PARAMS);
    return 0;
  }
  mc_write_batch(s, flags, keys, values, sizes, count, config, group_ids, results_out);
  mc_api_leave(s);
  return 0;
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

/* ------------------------------------------------------------------ reads */

int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer, size_t size) {
  struct mc_store *s = store;
  if (!s || !key || (!buffer && size)) return BAD_CALL;
  MC_VIA_DUMMY(s, int64_t, mc_dummy_read1(dm, key, buffer, size));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int64_t rc = *key ? mc_get_into(s, key, buffer, size) : MC_INVALID_PARAMS;
  mc_api_leave(s);
  return rc;
}

int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers, const size_t *sizes,
                                  size_t count, int64_t *results_out) {
  struct mc_store *s = store;
  if (!s || !mc_batch_args_ok(keys, (const void *const *)buffers, sizes, count, results_out)) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int, (mc_dummy_read(dm, keys, buffers, sizes, NULL, count, 0, results_out), 0));
  if (!mc_api_enter(s)) {
    for (size_t i = 0; i < count; i++) results_out[i] = MC_INVALID_PARAMS;
    return 0;
  }
  mc_get_batch(s, keys, buffers, sizes, count, results_out);
  mc_api_leave(s);
  return 0;
}

int64_t mc_store_get(mooncake_store_t store, const char *key, void **value_out) {
  struct mc_store *s = store;
  if (!s || !key || !value_out) return BAD_CALL;
  *value_out = NULL;
  MC_VIA_DUMMY(s, int64_t, mc_dummy_get_copy(dm, key, value_out));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int64_t rc = *key ? mc_get_copy(s, key, value_out) : MC_INVALID_PARAMS;
  mc_api_leave(s);
  return rc;
}

int64_t mooncake_store_get_size(mooncake_store_t store, const char *key) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  MC_VIA_DUMMY(s, int64_t, mc_dummy_key1(dm, MC_DOP_SIZE, 0, key));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int64_t rc = *key ? mc_get_size(s, key) : MC_INVALID_PARAMS;
  mc_api_leave(s);
  return rc;
}

int mooncake_store_is_exist(mooncake_store_t store, const char *key) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  MC_VIA_DUMMY(s, int, (int)mc_dummy_key1(dm, MC_DOP_EXIST, 0, key));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int rc = *key ? mcli_exist(s->master.cli, key) : MC_INVALID_PARAMS;
  if (rc == 0 || rc == 1) mc_stats_lookup(s, rc);
  mc_api_leave(s);
  return rc;
}

/* Runs a per-key master batch call over the non-empty keys, in chunks; empty keys get -600. */
typedef int (*keys_call)(struct mcli *c, const char *const *keys, size_t n, int arg, int *results);

static void keyed_batch(struct mc_store *s, const char **keys, size_t count, int arg, int *results, keys_call fn) {
  const char **k = mc_calloc(count, sizeof(char *));
  size_t *pos = mc_calloc(count, sizeof(size_t)), m = 0;
  int *r = mc_calloc(count, sizeof(int));
  for (size_t i = 0; i < count; i++) {
    if (!*keys[i]) results[i] = MC_INVALID_PARAMS;
    else k[m] = keys[i], pos[m++] = i;
  }
  for (size_t off = 0; off < m; off += EXIST_CHUNK) {
    size_t n = MC_MIN(EXIST_CHUNK, m - off);
    int rc = fn(s->master.cli, k + off, n, arg, r + off);
    if (rc) mc_fill_int(r + off, n, rc);
  }
  for (size_t i = 0; i < m; i++) results[pos[i]] = r[i];
  mc_free(r);
  mc_free(pos);
  mc_free(k);
}

static int exist_call(struct mcli *c, const char *const *keys, size_t n, int arg, int *results) {
  return mcli_batch_exist(c, keys, n, results);
}

int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys || !results_out) return BAD_CALL;
  for (size_t i = 0; i < count; i++)
    if (!keys[i]) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int, mc_dummy_keys_int(dm, MC_DOP_EXIST, 0, keys, count, results_out));
  if (!mc_api_enter(s)) {
    mc_fill_int(results_out, count, MC_INVALID_PARAMS);
    return 0;
  }
  keyed_batch(s, keys, count, 0, results_out, exist_call);
  for (size_t i = 0; i < count; i++)
    if (results_out[i] == 0 || results_out[i] == 1) mc_stats_lookup(s, results_out[i]);
  mc_api_leave(s);
  return 0;
}

/* ------------------------------------------------------------------ removal */

int mooncake_store_remove(mooncake_store_t store, const char *key, int force) {
  struct mc_store *s = store;
  if (!s || !key) return BAD_CALL;
  MC_VIA_DUMMY(s, int, (int)mc_dummy_key1(dm, MC_DOP_REMOVE, force, key));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int rc = *key ? mcli_remove(s->master.cli, key, force) : MC_INVALID_PARAMS;
  mc_api_leave(s);
  return rc;
}

static int remove_call(struct mcli *c, const char *const *keys, size_t n, int force, int *results) {
  return mcli_batch_remove(c, keys, n, force, results);
}

int mc_store_batch_remove(mooncake_store_t store, const char **keys, size_t count, int force, int *results_out) {
  struct mc_store *s = store;
  if (!s || !keys || !results_out) return BAD_CALL;
  for (size_t i = 0; i < count; i++)
    if (!keys[i]) return BAD_CALL;
  if (!count) return 0;
  MC_VIA_DUMMY(s, int, mc_dummy_keys_int(dm, MC_DOP_REMOVE, force, keys, count, results_out));
  if (!mc_api_enter(s)) {
    mc_fill_int(results_out, count, MC_INVALID_PARAMS);
    return 0;
  }
  keyed_batch(s, keys, count, force, results_out, remove_call);
  mc_api_leave(s);
  return 0;
}

int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force) {
  struct mc_store *s = store;
  if (!s || !pattern) return BAD_CALL;
  MC_VIA_DUMMY(s, int64_t, mc_dummy_simple(dm, MC_DOP_REMOVE_REGEX, force, pattern));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int64_t rc = mcli_remove_by_regex(s->master.cli, pattern, force);
  mc_api_leave(s);
  return rc;
}

int64_t mooncake_store_remove_all(mooncake_store_t store, int force) {
  struct mc_store *s = store;
  if (!s) return BAD_CALL;
  MC_VIA_DUMMY(s, int64_t, mc_dummy_simple(dm, MC_DOP_REMOVE_ALL, force, NULL));
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int64_t rc = mcli_remove_all(s->master.cli, force);
  mc_api_leave(s);
  return rc;
}

/* ------------------------------------------------------------------ registered memory */

int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size) {
  struct mc_store *s = store;
  if (!s || !buffer || !size) return BAD_CALL;
  MC_VIA_DUMMY(s, int, 0); /* outside the shared pool a dummy's buffers go through its staging area */
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  int rc = registerLocalMemory(s->engine.te, buffer, size, "cpu:0", 1);
  if (rc) LOG_WARN("register_buffer %p+%zu failed: %s", buffer, size, mc_te_err_name(rc));
  else mc_regs_add(s, (uint64_t)(uintptr_t)buffer, size);
  mc_api_leave(s);
  return rc ? MC_INVALID_PARAMS : 0;
}

int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer) {
  struct mc_store *s = store;
  if (!s || !buffer) return BAD_CALL;
  MC_VIA_DUMMY(s, int, 0);
  if (!mc_api_enter(s)) return MC_INVALID_PARAMS;
  uint64_t a = (uint64_t)(uintptr_t)buffer, len = 0;
  int rc = MC_INVALID_PARAMS;
  /* our own segment and staging buffer are not the caller's to unregister */
  if (buffer != s->seg.base && buffer != s->staging.base && !mc_regs_remove(s, a, &len)) {
    int te = unregisterLocalMemory(s->engine.te, buffer);
    if (te) {
      LOG_WARN("unregister_buffer %p failed: %s", buffer, mc_te_err_name(te));
      mc_regs_add(s, a, len);
    } else {
      rc = 0;
    }
  }
  mc_api_leave(s);
  return rc;
}
