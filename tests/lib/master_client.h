/* Test-side helpers for black-box master tests: start/stop a real mooncake_master on free ports (binary
 * from $MC_TEST_BIN_DIR), and a thin synchronous client that encodes requests with the proto.h records
 * over an mrpc client. Every helper returns the reply status (0 / negative ErrorCode). */
#ifndef MC_TEST_MASTER_CLIENT_H
#define MC_TEST_MASTER_CLIENT_H
#include <stdarg.h>

#include "lib/proc.h"
#include "proto/proto.h"
#include "mooncake/store_errors.h"
#include "net/mrpc.h"

/* ------------------------------------------------------------------ the master process */

struct mt_master {
  pid_t pid;
  int port, metrics_port;
  char *dir, *log;
};

/* Starts mooncake_master with the NULL-terminated extra args (and extra environment entries), adding
 * --rpc_port=<free> when port is 0, else waiting for the given port, and --metrics_port=<free> unless
 * given (mm->metrics_port is the admin port). 0, or -1 (log dumped). */
static inline int mt_master_spawn(struct mt_master *mm, const char *const extra[], char *const env[], int port) {
  const char *bindir = getenv("MC_TEST_BIN_DIR");
  char bin[1024], portflag[32], metricsflag[40];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bindir ? bindir : ".");
  memset(mm, 0, sizeof(*mm));
  mm->dir = mc_tp_mkdtemp("master");
  mm->log = mc_tp_path(mm->dir, "log");
  mm->port = port ? port : mc_tp_free_port();
  snprintf(portflag, sizeof(portflag), "--rpc_port=%d", mm->port);
  char *argv[64] = {bin};
  int n = 1, metrics_given = 0;
  if (!port) argv[n++] = portflag;
  for (int i = 0; extra && extra[i] && n < 62; i++) {
    argv[n++] = (char *)extra[i];
    if (sscanf(extra[i], "--metrics_port=%d", &mm->metrics_port) == 1) metrics_given = 1;
  }
  if (!metrics_given) {
    do mm->metrics_port = mc_tp_free_port(); while (mm->metrics_port == mm->port);
    snprintf(metricsflag, sizeof(metricsflag), "--metrics_port=%d", mm->metrics_port);
    argv[n++] = metricsflag;
  }
  argv[n] = NULL;
  mm->pid = mc_tp_spawn(argv, env, mm->log);
  if (mm->pid > 0 && mc_tp_wait_port(mm->port, 10000, mm->pid) == 0) return 0;
  fprintf(stderr, "FAIL: mooncake_master did not start on port %d\n", mm->port);
  mc_tp_dump_log(mm->log);
  return -1;
}

/* Starts mooncake_master --rpc_port=<free> plus the NULL-terminated extra args. 0, or -1 (log dumped). */
static inline int mt_master_start_env(struct mt_master *mm, const char *const extra[], char *const env[]) {
  return mt_master_spawn(mm, extra, env, 0);
}

static inline int mt_master_start(struct mt_master *mm, const char *const extra[]) {
  return mt_master_start_env(mm, extra, NULL);
}

/* SIGTERM; returns the exit status (0 = clean), or -1. Removes the temp dir. */
static inline int mt_master_stop(struct mt_master *mm) {
  int st = mc_tp_stop(mm->pid, 5000);
  int rc = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (rc != 0) mc_tp_dump_log(mm->log);
  mc_tp_rmrf(mm->dir);
  free(mm->dir);
  free(mm->log);
  mm->dir = mm->log = NULL;
  mm->pid = -1;
  return rc;
}

/* Count of lines of the master's log containing needle. */
static inline int mt_log_count(const struct mt_master *mm, const char *needle) {
  FILE *f = fopen(mm->log, "r");
  if (!f) return 0;
  char line[8192];
  int n = 0;
  while (fgets(line, sizeof(line), f)) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

static inline int mt_wait_log(const struct mt_master *mm, const char *needle, long timeout_ms) {
  long deadline = mc_tp_now_ms() + timeout_ms;
  do {
    if (mt_log_count(mm, needle)) return 1;
    mc_tp_sleep_ms(20);
  } while (mc_tp_now_ms() < deadline);
  return 0;
}

/* ------------------------------------------------------------------ records */

static inline struct mc_uuid mt_id(uint64_t n) { return (struct mc_uuid){0xC11E000000000000ull | n, n * 7919}; }

static inline struct mc_segment_rec mt_seg(uint64_t id, const char *name, uint64_t base, uint64_t size) {
  struct mc_segment_rec s = {.id = mt_id(1000 + id), .name = (char *)name, .base = base, .size = size,
                             .te_endpoint = (char *)name, .protocol = (char *)"tcp", .zone = (char *)"",
                             .host_id = (char *)"", .probe_addr = (char *)""};
  return s;
}

static inline struct mc_put_config mt_cfg(uint32_t replicas) {
  struct mc_put_config c = {.replica_num = replicas, .soft_pin_action = MC_SOFT_PIN_KEEP, .soft_pin_ttl_ms = -1};
  c.writer_host_id = (char *)"";
  c.writer_zone = (char *)"";
  return c;
}

/* ------------------------------------------------------------------ calls */

static inline struct mc_mrpc_client *mt_connect(int port) { return mc_mrpc_client_new("127.0.0.1", (uint16_t)port, 3000, 10000); }

static inline int mt_call(struct mc_mrpc_client *c, uint16_t op, struct mc_wbuf *req, struct mc_wbuf *reply) {
  int rc = mc_mrpc_call(c, op, req, reply);
  mc_w_free(req);
  return rc;
}

static inline int mt_simple(struct mc_mrpc_client *c, uint16_t op, struct mc_wbuf *req) {
  struct mc_wbuf rep;
  int rc = mt_call(c, op, req, &rep);
  mc_w_free(&rep);
  return rc;
}

static inline int mt_mount(struct mc_mrpc_client *c, struct mc_uuid client, const struct mc_segment_rec *s) {
  struct mc_wbuf w = {0};
  mc_put_segment(&w, s);
  mc_put_uuid(&w, client);
  return mt_simple(c, MC_OP_MOUNT_SEGMENT, &w);
}

static inline int mt_remount(struct mc_mrpc_client *c, struct mc_uuid client, const struct mc_segment_rec *s, uint32_t n) {
  struct mc_wbuf w = {0};
  mc_w_u32(&w, n);
  for (uint32_t i = 0; i < n; i++) mc_put_segment(&w, &s[i]);
  mc_put_uuid(&w, client);
  return mt_simple(c, MC_OP_REMOUNT_SEGMENTS, &w);
}

static inline int mt_unmount(struct mc_mrpc_client *c, struct mc_uuid seg, struct mc_uuid client) {
  struct mc_wbuf w = {0};
  mc_put_uuid(&w, seg);
  mc_put_uuid(&w, client);
  return mt_simple(c, MC_OP_UNMOUNT_SEGMENT, &w);
}

static inline int mt_graceful(struct mc_mrpc_client *c, struct mc_uuid seg, struct mc_uuid client, uint64_t grace_ms) {
  struct mc_wbuf w = {0};
  mc_put_uuid(&w, seg);
  mc_put_uuid(&w, client);
  mc_w_u64(&w, grace_ms);
  return mt_simple(c, MC_OP_GRACEFUL_UNMOUNT, &w);
}

/* *status gets MC_PING_OK / MC_PING_NEED_REMOUNT. */
static inline int mt_ping(struct mc_mrpc_client *c, struct mc_uuid client, int *status) {
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  int rc = mt_call(c, MC_OP_PING, &w, &rep);
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep.p, rep.len);
  mc_r_u64(&r);
  *status = rc ? -1 : mc_r_u8(&r);
  if (!rc && r.err) rc = -9999;
  mc_w_free(&rep);
  return rc;
}

/* PUT_START or UPSERT_START (op); reps may be NULL (then freed here). */
static inline int mt_start(struct mc_mrpc_client *c, uint16_t op, struct mc_uuid client, const char *key, uint64_t len,
                           const struct mc_put_config *cfg, struct mc_replica_rec **reps, uint32_t *n) {
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  mc_w_str(&w, key);
  mc_w_u64(&w, len);
  mc_put_config(&w, cfg);
  int rc = mt_call(c, op, &w, &rep);
  struct mc_replica_rec *out = NULL;
  uint32_t cnt = 0;
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    cnt = mc_get_replicas(&r, &out);
    if (r.err) rc = -9999;
  }
  mc_w_free(&rep);
  if (n) *n = cnt;
  if (reps) *reps = out;
  else mc_replicas_free(out, cnt);
  return rc;
}

#define mt_put_start(c, id, key, len, cfg, reps, n) mt_start((c), MC_OP_PUT_START, (id), (key), (len), (cfg), (reps), (n))
#define mt_upsert_start(c, id, key, len, cfg, reps, n) \
  mt_start((c), MC_OP_UPSERT_START, (id), (key), (len), (cfg), (reps), (n))

static inline int mt_end(struct mc_mrpc_client *c, uint16_t op, struct mc_uuid client, const char *key, uint8_t type) {
  struct mc_wbuf w = {0};
  mc_put_uuid(&w, client);
  mc_w_str(&w, key);
  mc_w_u8(&w, type);
  return mt_simple(c, op, &w);
}
#define mt_put_end(c, id, key) mt_end((c), MC_OP_PUT_END, (id), (key), MC_REPLICA_ALL)
#define mt_put_revoke(c, id, key) mt_end((c), MC_OP_PUT_REVOKE, (id), (key), MC_REPLICA_ALL)
#define mt_upsert_end(c, id, key) mt_end((c), MC_OP_UPSERT_END, (id), (key), MC_REPLICA_ALL)
#define mt_upsert_revoke(c, id, key) mt_end((c), MC_OP_UPSERT_REVOKE, (id), (key), MC_REPLICA_ALL)

/* PutStart + PutEnd with replica_num replicas. Returns the first failure. */
static inline int mt_put(struct mc_mrpc_client *c, struct mc_uuid client, const char *key, uint64_t len, uint32_t replicas) {
  struct mc_put_config cfg = mt_cfg(replicas);
  int rc = mt_put_start(c, client, key, len, &cfg, NULL, NULL);
  return rc ? rc : mt_put_end(c, client, key);
}

static inline int mt_get(struct mc_mrpc_client *c, const char *key, struct mc_replica_rec **reps, uint32_t *n,
                         uint64_t *lease_ms) {
  struct mc_wbuf w = {0}, rep;
  mc_w_str(&w, key);
  int rc = mt_call(c, MC_OP_GET_REPLICA_LIST, &w, &rep);
  struct mc_replica_rec *out = NULL;
  uint32_t cnt = 0;
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint64_t l = mc_r_u64(&r);
    if (lease_ms) *lease_ms = l;
    cnt = mc_get_replicas(&r, &out);
    if (r.err) rc = -9999;
  }
  mc_w_free(&rep);
  if (n) *n = cnt;
  if (reps) *reps = out;
  else mc_replicas_free(out, cnt);
  return rc;
}

/* 1 / 0, or a negative status. */
static inline int mt_exist(struct mc_mrpc_client *c, const char *key) {
  struct mc_wbuf w = {0}, rep;
  mc_w_str(&w, key);
  int rc = mt_call(c, MC_OP_EXIST_KEY, &w, &rep);
  if (!rc) rc = rep.len == 1 ? rep.p[0] : -9999;
  mc_w_free(&rep);
  return rc;
}

static inline void mt_keys(struct mc_wbuf *w, const char *const *keys, uint32_t n) {
  mc_w_u32(w, n);
  for (uint32_t i = 0; i < n; i++) mc_w_str(w, keys[i]);
}

/* Decodes list<i32> into out (at most n). */
static inline int mt_i32_list(struct mc_wbuf *rep, int32_t *out, uint32_t n) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep->p, rep->len);
  uint32_t cnt = mc_r_u32(&r);
  for (uint32_t i = 0; i < cnt && i < n; i++) out[i] = mc_r_i32(&r);
  return r.err || cnt != n ? -9999 : 0;
}

static inline int mt_batch_exist(struct mc_mrpc_client *c, const char *const *keys, uint32_t n, int32_t *out) {
  struct mc_wbuf w = {0}, rep;
  mt_keys(&w, keys, n);
  int rc = mt_call(c, MC_OP_BATCH_EXIST_KEY, &w, &rep);
  if (!rc) rc = mt_i32_list(&rep, out, n);
  mc_w_free(&rep);
  return rc;
}

static inline int mt_remove(struct mc_mrpc_client *c, const char *key, int force) {
  struct mc_wbuf w = {0};
  mc_w_str(&w, key);
  mc_w_u8(&w, (uint8_t)force);
  return mt_simple(c, MC_OP_REMOVE, &w);
}

static inline int mt_batch_remove(struct mc_mrpc_client *c, const char *const *keys, uint32_t n, int force, int32_t *out) {
  struct mc_wbuf w = {0}, rep;
  mt_keys(&w, keys, n);
  mc_w_u8(&w, (uint8_t)force);
  int rc = mt_call(c, MC_OP_BATCH_REMOVE, &w, &rep);
  if (!rc) rc = mt_i32_list(&rep, out, n);
  mc_w_free(&rep);
  return rc;
}

static inline int mt_batch_end(struct mc_mrpc_client *c, uint16_t op, struct mc_uuid client, const char *const *keys,
                               uint32_t n, int32_t *out) {
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  mt_keys(&w, keys, n);
  mc_w_u8(&w, MC_REPLICA_ALL);
  int rc = mt_call(c, op, &w, &rep);
  if (!rc) rc = mt_i32_list(&rep, out, n);
  mc_w_free(&rep);
  return rc;
}

/* BATCH_PUT_START or BATCH_UPSERT_START (op): status[i] per key; nrep[i] replicas granted (may be NULL). */
static inline int mt_batch_start(struct mc_mrpc_client *c, uint16_t op, struct mc_uuid client, const char *const *keys,
                                 const uint64_t *lens, uint32_t n, const struct mc_put_config *cfg, int32_t *status,
                                 uint32_t *nrep) {
  struct mc_wbuf w = {0}, rep;
  mc_put_uuid(&w, client);
  mc_w_u32(&w, n);
  for (uint32_t i = 0; i < n; i++) {
    mc_w_str(&w, keys[i]);
    mc_w_u64(&w, lens[i]);
  }
  mc_put_config(&w, cfg);
  int rc = mt_call(c, op, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint32_t cnt = mc_r_u32(&r);
    for (uint32_t i = 0; i < cnt && i < n; i++) {
      status[i] = mc_r_i32(&r);
      struct mc_replica_rec *reps;
      uint32_t k = mc_get_replicas(&r, &reps);
      if (nrep) nrep[i] = k;
      mc_replicas_free(reps, k);
    }
    if (r.err || cnt != n) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

#define mt_batch_put_start(c, id, keys, lens, n, cfg, status, nrep) \
  mt_batch_start((c), MC_OP_BATCH_PUT_START, (id), (keys), (lens), (n), (cfg), (status), (nrep))
#define mt_batch_upsert_start(c, id, keys, lens, n, cfg, status, nrep) \
  mt_batch_start((c), MC_OP_BATCH_UPSERT_START, (id), (keys), (lens), (n), (cfg), (status), (nrep))

/* status[i] and replica count per key; *lease_ms the lease TTL. */
static inline int mt_batch_get(struct mc_mrpc_client *c, const char *const *keys, uint32_t n, int32_t *status,
                               uint32_t *nrep, uint64_t *lease_ms) {
  struct mc_wbuf w = {0}, rep;
  mt_keys(&w, keys, n);
  int rc = mt_call(c, MC_OP_BATCH_GET_REPLICA_LIST, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint64_t l = mc_r_u64(&r);
    if (lease_ms) *lease_ms = l;
    uint32_t cnt = mc_r_u32(&r);
    for (uint32_t i = 0; i < cnt && i < n; i++) {
      status[i] = mc_r_i32(&r);
      struct mc_replica_rec *reps;
      uint32_t k = mc_get_replicas(&r, &reps);
      if (nrep) nrep[i] = k;
      mc_replicas_free(reps, k);
    }
    if (r.err || cnt != n) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

/* REMOVE_BY_REGEX (re != NULL) or REMOVE_ALL; *count = removed. */
static inline int mt_remove_many(struct mc_mrpc_client *c, const char *re, int force, int64_t *count) {
  struct mc_wbuf w = {0}, rep;
  if (re) mc_w_str(&w, re);
  mc_w_u8(&w, (uint8_t)force);
  int rc = mt_call(c, re ? MC_OP_REMOVE_BY_REGEX : MC_OP_REMOVE_ALL, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *count = mc_r_i64(&r);
    if (r.err) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

/* Number of keys returned by GET_REPLICA_LIST_BY_REGEX in *count; the first key copied into first. */
static inline int mt_get_by_regex(struct mc_mrpc_client *c, const char *re, uint32_t *count, char *first, size_t flen) {
  struct mc_wbuf w = {0}, rep;
  mc_w_str(&w, re);
  int rc = mt_call(c, MC_OP_GET_REPLICA_LIST_BY_REGEX, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *count = mc_r_u32(&r);
    for (uint32_t i = 0; i < *count && !r.err; i++) {
      char *k = mc_r_str(&r);
      if (!i && first) snprintf(first, flen, "%s", k);
      mc_free(k);
      struct mc_replica_rec *reps;
      uint32_t nr = mc_get_replicas(&r, &reps);
      mc_replicas_free(reps, nr);
    }
    if (r.err) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

/* Segments known to the master: count, and per segment (up to max) its state and used bytes. */
static inline int mt_query_segments(struct mc_mrpc_client *c, uint32_t *count, char names[][64], uint8_t *state,
                                    uint64_t *used, uint32_t max) {
  struct mc_wbuf w = {0}, rep;
  int rc = mt_call(c, MC_OP_QUERY_SEGMENTS, &w, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    *count = mc_r_u32(&r);
    for (uint32_t i = 0; i < *count && !r.err; i++) {
      struct mc_segment_rec s;
      mc_get_segment(&r, &s);
      mc_free(mc_r_str(&r));
      uint8_t st = mc_r_u8(&r);
      uint64_t u = mc_r_u64(&r);
      if (i < max) {
        if (names) snprintf(names[i], 64, "%s", s.name);
        if (state) state[i] = st;
        if (used) used[i] = u;
      }
      mc_segment_rec_free(&s);
    }
    if (r.err) rc = -9999;
  }
  mc_w_free(&rep);
  return rc;
}

#endif
