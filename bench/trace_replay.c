/* trace_replay: replays a KV-cache block trace (FAST'25 conversation trace format: one JSON object per
 * line with "timestamp" (ms) and "hash_ids") against a running Mooncake cluster, and compares the hit
 * ratio it observes with the ideal of an unbounded cache and an exact LRU simulation.
 *
 * Per request: one batch existence query over its blocks (exactly one lookup per block, so the
 * master's store_hit_ratio counts what this tool counts), then one batch put of the missing blocks.
 * A block's bytes are derived from its hash id, so a later read can be verified; verification reads
 * happen only after the master's ratio has been fetched. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "cli/admin.h"
#include "mooncake/store.h"


struct replay_cfg {
  char *master, *metadata, *admin, *key_prefix, *local_hostname;
  uint64_t block_bytes, segment_size;
  double time_scale;
  int64_t max_requests, capacity_blocks, capacity_blocks2, verify_requests, metrics_wait_ms;
  int json;
};

#define OPT(name, type, def, lo, hi, help) {#name, type, def, lo, hi, offsetof(struct replay_cfg, name), help}
static const struct mc_cfg_opt opts[] = {
    OPT(master, MC_CFG_STRING, "127.0.0.1:50051", 1, 0, "master RPC address host:port"),
    OPT(metadata, MC_CFG_STRING, "http://127.0.0.1:8080/metadata", 1, 0, "transfer-engine metadata service"),
    OPT(admin, MC_CFG_STRING, "", 1, 0, "master admin HTTP host:port (default: the master's host, port 9003)"),
    OPT(key_prefix, MC_CFG_STRING, "trace/", 1, 0, "object key = prefix + hash id"),
    OPT(local_hostname, MC_CFG_STRING, "127.0.0.1", 1, 0, "this client's host (a free port is picked)"),
    OPT(block_bytes, MC_CFG_SIZE, "16KiB", 8, 1 << 30, "bytes per hash_id block"),
    OPT(segment_size, MC_CFG_SIZE, "0", 0, 1e15, "memory this client contributes (0 = pure client)"),
    OPT(time_scale, MC_CFG_DOUBLE, "1", 0, 1e6,
        "wall delay = trace delay x this (1 = real time, 0 = as fast as possible)"),
    OPT(max_requests, MC_CFG_INT, "0", 0, 1e12, "replay only the first N requests in timestamp order (0 = all)"),
    OPT(capacity_blocks, MC_CFG_INT, "0", 0, 1e12,
        "LRU simulation capacity in blocks (0 = the cluster's capacity / block_bytes, from the admin port)"),
    OPT(capacity_blocks2, MC_CFG_INT, "0", 0, 1e12, "a second LRU capacity to simulate (0 = none)"),
    OPT(verify_requests, MC_CFG_INT, "16", 0, 1e9,
        "after the report, read back the blocks of the last N requests and check their bytes"),
    OPT(metrics_wait_ms, MC_CFG_INT, "12000", 0, 600000,
        "how long to wait for the master's lookup counters to catch up with this run"),
    OPT(json, MC_CFG_BOOL, "false", 1, 0, "print one JSON document instead of text"),
    MC_CFG_END,
};

/* ------------------------------------------------------------------ the trace */

struct request {
  double ts_ms;
  uint32_t first, count; /* into the block array */
  uint32_t line;
};

struct trace {
  struct request *req;
  size_t nreq, cap_req;
  uint64_t *hash;  /* hash id per block reference */
  uint32_t *dense; /* dense index of that hash id (0..nuniq) */
  size_t nblk, cap_blk, nuniq;
  uint32_t max_blocks;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 1024;
  while (c < need) c *= 2;
  void *np = realloc(*p, c * elem);
  if (!np) return -1;
  *p = np;
  *cap = c;
  return 0;
}

/* Parses one line into t. 0, 1 for a blank line, -1 with why filled. */
static int parse_line(struct trace *t, const char *line, uint32_t lineno, char *why, size_t wlen) {
  if (!line[strspn(line, " \t\r\n")]) return 1;
  json_error_t jerr;
  json_t *o = json_loads(line, 0, &jerr);
  json_t *ts = o ? json_object_get(o, "timestamp") : NULL, *ids = o ? json_object_get(o, "hash_ids") : NULL;
  int rc = -1;
  if (!o) snprintf(why, wlen, "not JSON: %s", jerr.text);
  else if (!json_is_number(ts) || json_number_value(ts) < 0) snprintf(why, wlen, "no non-negative \"timestamp\"");
  else if (!json_is_array(ids)) snprintf(why, wlen, "no \"hash_ids\" array");
  else if (grow((void **)&t->req, &t->cap_req, t->nreq + 1, sizeof(*t->req)) ||
           grow((void **)&t->hash, &t->cap_blk, t->nblk + json_array_size(ids), sizeof(*t->hash)))
    snprintf(why, wlen, "out of memory");
  else {
    struct request *r = &t->req[t->nreq];
    *r = (struct request){json_number_value(ts), (uint32_t)t->nblk, 0, lineno};
    size_t i;
    json_t *v;
    rc = 0;
    json_array_foreach(ids, i, v) {
      if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(why, wlen, "hash_ids[%zu] is not a non-negative integer", i);
        rc = -1;
        break;
      }
      t->hash[t->nblk + r->count++] = (uint64_t)json_integer_value(v);
    }
    if (!rc) {
      t->nblk += r->count;
      t->nreq++;
    }
  }
  json_decref(o);
  return rc;
}

static int by_time(const void *a, const void *b) {
  const struct request *x = a, *y = b;
  if (x->ts_ms != y->ts_ms) return x->ts_ms < y->ts_ms ? -1 : 1;
  return x->line < y->line ? -1 : x->line > y->line;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Gives every distinct hash id a dense index (open addressing, no deletions). */
static int densify(struct trace *t) {
  size_t cap = 16;
  while (cap < t->nblk * 2 + 16) cap *= 2;
  uint64_t *keys = malloc(cap * sizeof(*keys));
  uint32_t *vals = malloc(cap * sizeof(*vals));
  t->dense = malloc((t->nblk + 1) * sizeof(*t->dense));
  if (!keys || !vals || !t->dense) {
    free(keys);
    free(vals);
    return -1;
  }
  memset(vals, 0xff, cap * sizeof(*vals));
  for (size_t i = 0; i < t->nblk; i++) {
    size_t h = mix64(t->hash[i]) & (cap - 1);
    while (vals[h] != UINT32_MAX && keys[h] != t->hash[i]) h = (h + 1) & (cap - 1);
    if (vals[h] == UINT32_MAX) keys[h] = t->hash[i], vals[h] = (uint32_t)t->nuniq++;
    t->dense[i] = vals[h];
  }
  free(keys);
  free(vals);
  return 0;
}

/* Loads, validates and sorts the trace; keeps the first max_requests (0 = all) in timestamp order. */
static int load_trace(const char *path, int64_t max_requests, struct trace *t) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "trace_replay: cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  char *line = NULL, why[256];
  size_t cap = 0;
  uint32_t lineno = 0;
  int rc = 0;
  while (!rc && getline(&line, &cap, f) >= 0) {
    if (parse_line(t, line, ++lineno, why, sizeof(why)) < 0) {
      fprintf(stderr, "trace_replay: %s line %u: %s\n", path, lineno, why);
      rc = -1;
    }
  }
  free(line);
  fclose(f);
  if (rc) return -1;
  if (!t->nreq) {
    fprintf(stderr, "trace_replay: %s holds no requests\n", path);
    return -1;
  }
  qsort(t->req, t->nreq, sizeof(*t->req), by_time);
  if (max_requests > 0 && (size_t)max_requests < t->nreq) t->nreq = (size_t)max_requests;
  for (size_t i = 0; i < t->nreq; i++) t->max_blocks = MC_MAX(t->max_blocks, t->req[i].count);
  if (densify(t)) {
    fprintf(stderr, "trace_replay: out of memory\n");
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ simulations */

/* Hits of an unbounded cache: a block hits when an earlier request referenced it. Lookups of one
 * request all happen before its puts, as in the replay. Only the replayed requests count. */
static uint64_t ideal_hits(const struct trace *t, uint64_t *distinct) {
  uint8_t *seen = calloc(t->nuniq + 1, 1);
  uint64_t hits = 0;
  *distinct = 0;
  for (size_t r = 0; seen && r < t->nreq; r++) {
    const struct request *q = &t->req[r];
    for (uint32_t i = 0; i < q->count; i++) hits += seen[t->dense[q->first + i]];
    for (uint32_t i = 0; i < q->count; i++) {
      *distinct += !seen[t->dense[q->first + i]];
      seen[t->dense[q->first + i]] = 1;
    }
  }
  free(seen);
  return hits;
}

struct lru {
  uint32_t *prev, *next; /* doubly linked, head = most recent; UINT32_MAX = none */
  uint8_t *in;
  uint32_t head, tail;
  uint64_t size, cap;
};

static void lru_unlink(struct lru *l, uint32_t x) {
  if (l->prev[x] != UINT32_MAX) l->next[l->prev[x]] = l->next[x];
  else l->head = l->next[x];
  if (l->next[x] != UINT32_MAX) l->prev[l->next[x]] = l->prev[x];
  else l->tail = l->prev[x];
}

static void lru_push_front(struct lru *l, uint32_t x) {
  l->prev[x] = UINT32_MAX;
  l->next[x] = l->head;
  if (l->head != UINT32_MAX) l->prev[l->head] = x;
  l->head = x;
  if (l->tail == UINT32_MAX) l->tail = x;
}

/* Hits of an exact LRU cache holding `cap` blocks. Per request: every lookup first (a hit becomes the
 * most recent), then the missed blocks are inserted in order, evicting the least recent. */
static uint64_t lru_hits(const struct trace *t, uint64_t cap) {
  size_t n = t->nuniq + 1;
  struct lru l = {malloc(n * 4), malloc(n * 4), calloc(n, 1), UINT32_MAX, UINT32_MAX, 0, cap};
  uint64_t hits = 0;
  for (size_t r = 0; l.prev && l.next && l.in && cap && r < t->nreq; r++) {
    const struct request *q = &t->req[r];
    for (uint32_t i = 0; i < q->count; i++) {
      uint32_t x = t->dense[q->first + i];
      if (l.in[x] == 1) {
        hits++;
        lru_unlink(&l, x);
        lru_push_front(&l, x);
      } else {
        l.in[x] = 2; /* missed in this request: inserted below */
      }
    }
    for (uint32_t i = 0; i < q->count; i++) {
      uint32_t x = t->dense[q->first + i];
      if (l.in[x] != 2) continue;
      l.in[x] = 1;
      lru_push_front(&l, x);
      if (++l.size > cap) {
        uint32_t old = l.tail;
        lru_unlink(&l, old);
        l.in[old] = 0;
        l.size--;
      }
    }
  }
  free(l.prev);
  free(l.next);
  free(l.in);
  return hits;
}

/* ------------------------------------------------------------------ block bytes */

static void fill_block(uint64_t hash, uint64_t *w, size_t words) {
  uint64_t x = mix64(hash + 0x9e3779b97f4a7c15ULL);
  for (size_t k = 0; k < words; k++) w[k] = x + k * 0x9e3779b97f4a7c15ULL;
}

static int check_block(uint64_t hash, const uint64_t *w, size_t words) {
  uint64_t x = mix64(hash + 0x9e3779b97f4a7c15ULL);
  for (size_t k = 0; k < words; k++)
    if (w[k] != x + k * 0x9e3779b97f4a7c15ULL) return -1;
  return 0;
}

/* ------------------------------------------------------------------ the replay */

struct replay {
  const struct replay_cfg *c;
  const struct trace *t;
  mooncake_store_t s;
  char *buf; /* max_blocks x block_bytes, registered */
  char **keys;
  uint64_t distinct; /* distinct blocks among the replayed requests */
  uint64_t hits, misses, lookup_errors, put_blocks, put_bytes, put_failed, put_retries;
  double wall_s, max_lag_ms;
};

static void key_of(const struct replay_cfg *c, uint64_t hash, char *out, size_t len) {
  snprintf(out, len, "%s%" PRIu64, c->key_prefix, hash);
}

/* Puts the missing blocks of one request; a -200 (pool full, eviction is asynchronous) is retried a
 * few times. Returns the number that could not be stored. */
static uint64_t put_missing(struct replay *rp, const char **keys, void **bufs, size_t *sizes, size_t m) {
  int res[m ? m : 1];
  for (int attempt = 0; m && attempt < 20; attempt++) {
    if (mooncake_store_batch_put_from(rp->s, keys, bufs, sizes, m, NULL, res)) return m;
    size_t left = 0;
    for (size_t i = 0; i < m; i++) {
      if (!res[i]) {
        rp->put_blocks++;
        rp->put_bytes += sizes[i];
      } else if (res[i] == -200) {
        keys[left] = keys[i], bufs[left] = bufs[i], sizes[left++] = sizes[i];
      } else {
        LOG_WARN("put %s: %d %s", keys[i], res[i], mooncake_store_err_name(res[i]));
        rp->put_failed++;
      }
    }
    m = left;
    if (m) {
      rp->put_retries++;
      struct timespec ts = {0, 10 * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  return m;
}

static int replay_request(struct replay *rp, const struct request *q) {
  const struct replay_cfg *c = rp->c;
  uint32_t n = q->count;
  if (!n) return 0;
  int exist[n];
  const char *mkeys[n];
  void *mbufs[n];
  size_t msizes[n], m = 0;
  for (uint32_t i = 0; i < n; i++) key_of(c, rp->t->hash[q->first + i], rp->keys[i], 64 + strlen(c->key_prefix));
  int rc = mooncake_store_batch_is_exist(rp->s, (const char **)rp->keys, n, exist);
  if (rc) {
    fprintf(stderr, "trace_replay: batch_is_exist failed: %d\n", rc);
    return -1;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (exist[i] == 1) {
      rp->hits++;
    } else if (exist[i] == 0) {
      rp->misses++;
      char *b = rp->buf + (size_t)m * c->block_bytes;
      fill_block(rp->t->hash[q->first + i], (uint64_t *)b, c->block_bytes / 8);
      mkeys[m] = rp->keys[i], mbufs[m] = b, msizes[m++] = c->block_bytes;
    } else {
      rp->lookup_errors++;
      if (rp->lookup_errors == 1) fprintf(stderr, "trace_replay: lookup error %d %s\n", exist[i], mooncake_store_err_name(exist[i]));
    }
  }
  rp->put_failed += put_missing(rp, mkeys, mbufs, msizes, m);
  return 0;
}

static double now_s(void) { return (double)mc_now_ns() / 1e9; }

/* How far the replay is, on stderr (the report is stdout's): a live line on a terminal, else one every
 * MC_PROGRESS_EVERY_S seconds. */
static void show_progress(struct mc_progress *pr, const struct replay *rp, size_t done, double start) {
  uint64_t looked = rp->hits + rp->misses;
  double el = now_s() - start;
  mc_progress_show(pr, "replay: %zu/%zu requests (%.1f %%), hit ratio %.4f, %.0f requests/s", done, rp->t->nreq,
                   100.0 * (double)done / (double)rp->t->nreq, looked ? (double)rp->hits / (double)looked : 0.0,
                   el > 0 ? (double)done / el : 0.0);
}

static int run_replay(struct replay *rp) {
  const struct trace *t = rp->t;
  double start = now_s(), t0 = t->req[0].ts_ms;
  struct mc_progress pr;
  mc_progress_start(&pr, stderr, isatty(STDERR_FILENO), MC_PROGRESS_EVERY_S);
  for (size_t r = 0; r < t->nreq; r++) {
    show_progress(&pr, rp, r, start);
    const struct request *q = &t->req[r];
    if (rp->c->time_scale > 0) {
      double due = start + (q->ts_ms - t0) * rp->c->time_scale / 1000.0, now = now_s();
      if (due > now) {
        double d = due - now;
        struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
      } else {
        rp->max_lag_ms = MC_MAX(rp->max_lag_ms, (now - due) * 1000.0);
      }
    }
    if (replay_request(rp, q)) {
      mc_progress_end(&pr);
      return -1;
    }
  }
  mc_progress_end(&pr);
  rp->wall_s = now_s() - start;
  return 0;
}

/* Reads back the blocks of the last `nreq` requests through the same client and checks their bytes.
 * Evicted blocks are counted, not failures. */
static void verify_tail(struct replay *rp, int64_t nreq, uint64_t *ok, uint64_t *bad, uint64_t *gone) {
  const struct trace *t = rp->t;
  size_t from = nreq > 0 && (size_t)nreq < t->nreq ? t->nreq - (size_t)nreq : 0;
  size_t bb = rp->c->block_bytes;
  for (size_t r = nreq > 0 ? from : t->nreq; r < t->nreq; r++) {
    const struct request *q = &t->req[r];
    uint32_t n = q->count;
    if (!n) continue;
    void *bufs[n];
    size_t sizes[n];
    int64_t res[n];
    for (uint32_t i = 0; i < n; i++) {
      key_of(rp->c, t->hash[q->first + i], rp->keys[i], 64 + strlen(rp->c->key_prefix));
      bufs[i] = rp->buf + (size_t)i * bb;
      sizes[i] = bb;
    }
    if (mooncake_store_batch_get_into(rp->s, (const char **)rp->keys, bufs, sizes, n, res)) {
      *bad += n;
      continue;
    }
    for (uint32_t i = 0; i < n; i++) {
      if (res[i] == -704) (*gone)++;
      else if (res[i] == (int64_t)bb && !check_block(t->hash[q->first + i], bufs[i], bb / 8)) (*ok)++;
      else (*bad)++;
    }
  }
}

/* ------------------------------------------------------------------ the master's view */

struct master_view {
  int have_metrics;
  double ratio, hits, misses; /* NAN when absent */
  uint64_t capacity_bytes;
  char err[256];
};

static int fetch_metrics(const char *admin, struct master_view *v) {
  struct mc_admin_resp r;
  v->ratio = v->hits = v->misses = NAN;
  if (mc_admin_request(admin, "GET", "/metrics", 5000, &r)) {
    snprintf(v->err, sizeof(v->err), "admin %.100s: %.140s", admin, r.err);
    return -1;
  }
  int rc = r.status == 200 ? 0 : -1;
  if (rc) snprintf(v->err, sizeof(v->err), "admin %s: GET /metrics answered %ld", admin, r.status);
  else {
    v->have_metrics = 1;
    mc_prom_value(r.body, "store_hit_ratio", &v->ratio);
    mc_prom_value(r.body, "store_lookup_hits_total", &v->hits);
    mc_prom_value(r.body, "store_lookup_misses_total", &v->misses);
    if (isnan(v->ratio)) snprintf(v->err, sizeof(v->err), "admin %s: /metrics has no store_hit_ratio", admin);
  }
  mc_admin_resp_free(&r);
  return rc;
}

/* Sum of size_bytes over /get_segments_detail; 0 when unavailable. */
static uint64_t fetch_capacity(const char *admin) {
  struct mc_admin_resp r;
  uint64_t total = 0;
  if (mc_admin_request(admin, "GET", "/get_segments_detail", 5000, &r)) return 0;
  json_t *o = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
  json_t *segs = json_object_get(o, "segments"), *s;
  size_t i;
  json_array_foreach(segs, i, s) {
    json_t *sz = json_object_get(s, "size_bytes");
    if (json_is_integer(sz) && json_integer_value(sz) > 0) total += (uint64_t)json_integer_value(sz);
  }
  json_decref(o);
  mc_admin_resp_free(&r);
  return total;
}

/* Polls /metrics until the master's lookup counters grew by this run's lookups (client statistics
 * reach the master periodically), or until wait_ms passed. */
static void settle_metrics(const char *admin, const struct master_view *before, uint64_t lookups, long wait_ms,
                           struct master_view *after) {
  uint64_t deadline = mc_now_ms() + (uint64_t)wait_ms;
  for (;;) {
    memset(after, 0, sizeof(*after));
    int rc = fetch_metrics(admin, after);
    double base = before->have_metrics && !isnan(before->hits) ? before->hits + before->misses : 0;
    if (!rc && !isnan(after->hits) && !isnan(after->misses) && after->hits + after->misses - base >= (double)lookups)
      return;
    if (mc_now_ms() >= deadline || (rc && !after->have_metrics && mc_now_ms() + 1000 >= deadline)) return;
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* ------------------------------------------------------------------ report */

static double ratio(uint64_t h, uint64_t total) { return total ? (double)h / (double)total : 0.0; }

struct verify_counts {
  uint64_t ok, bad, gone;
};

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

static void report(const struct replay *rp, const struct master_view *before, const struct master_view *m,
                   uint64_t ideal, uint64_t cap1, uint64_t lru1, uint64_t cap2, uint64_t lru2,
                   const struct verify_counts *vc) {
  const struct replay_cfg *c = rp->c;
  const struct trace *t = rp->t;
  uint64_t lookups = rp->hits + rp->misses;
  uint64_t total_refs = 0;
  for (size_t r = 0; r < t->nreq; r++) total_refs += t->req[r].count;
  double w = rp->wall_s > 0 ? rp->wall_s : 1e-9;
  double dh = NAN, dm = NAN, dratio = NAN;
  if (m->have_metrics && !isnan(m->hits) && !isnan(m->misses)) {
    dh = m->hits - (before->have_metrics && !isnan(before->hits) ? before->hits : 0);
    dm = m->misses - (before->have_metrics && !isnan(before->misses) ? before->misses : 0);
    dratio = dh + dm > 0 ? dh / (dh + dm) : NAN;
  }
  if (c->json) {
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:f, s:f}", "requests", (json_int_t)t->nreq, "block_lookups",
                          (json_int_t)total_refs, "distinct_blocks", (json_int_t)rp->distinct, "block_bytes",
                          (json_int_t)c->block_bytes, "time_scale", c->time_scale, "max_lag_ms", rp->max_lag_ms);
    json_object_set_new(o, "observed", json_pack("{s:f, s:I, s:I, s:I}", "hit_ratio", ratio(rp->hits, lookups), "hits",
                                                 (json_int_t)rp->hits, "misses", (json_int_t)rp->misses,
                                                 "lookup_errors", (json_int_t)rp->lookup_errors));
    json_t *mo = json_object();
    json_object_set_new(mo, "store_hit_ratio", num_or_null(m->ratio));
    json_object_set_new(mo, "store_lookup_hits_total", num_or_null(m->hits));
    json_object_set_new(mo, "store_lookup_misses_total", num_or_null(m->misses));
    json_object_set_new(mo, "run_hits", num_or_null(dh));
    json_object_set_new(mo, "run_misses", num_or_null(dm));
    json_object_set_new(mo, "run_hit_ratio", num_or_null(dratio));
    if (*m->err) json_object_set_new(mo, "error", json_string(m->err));
    json_object_set_new(o, "master", mo);
    json_object_set_new(o, "ideal_unbounded", json_pack("{s:f, s:I}", "hit_ratio", ratio(ideal, total_refs), "hits",
                                                        (json_int_t)ideal));
    json_t *sims = json_array();
    if (cap1) json_array_append_new(sims, json_pack("{s:I, s:f, s:I}", "capacity_blocks", (json_int_t)cap1, "hit_ratio",
                                                    ratio(lru1, total_refs), "hits", (json_int_t)lru1));
    if (cap2) json_array_append_new(sims, json_pack("{s:I, s:f, s:I}", "capacity_blocks", (json_int_t)cap2, "hit_ratio",
                                                    ratio(lru2, total_refs), "hits", (json_int_t)lru2));
    json_object_set_new(o, "lru", sims);
    json_object_set_new(o, "puts", json_pack("{s:I, s:I, s:I, s:I}", "blocks", (json_int_t)rp->put_blocks, "bytes",
                                             (json_int_t)rp->put_bytes, "failed", (json_int_t)rp->put_failed,
                                             "retries", (json_int_t)rp->put_retries));
    json_object_set_new(o, "throughput", json_pack("{s:f, s:f, s:f, s:f}", "seconds", rp->wall_s, "requests_per_s",
                                                   t->nreq / w, "blocks_per_s", lookups / w, "put_bytes_per_s",
                                                   rp->put_bytes / w));
    json_object_set_new(o, "verify", json_pack("{s:I, s:I, s:I}", "ok", (json_int_t)vc->ok, "mismatch",
                                               (json_int_t)vc->bad, "evicted", (json_int_t)vc->gone));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    printf("%s\n", s);
    free(s);
    json_decref(o);
    return;
  }
  printf("trace_replay: %zu requests, %" PRIu64 " block lookups (%" PRIu64 " distinct blocks), block %" PRIu64
         " bytes, time scale %g\n",
         t->nreq, total_refs, rp->distinct, c->block_bytes, c->time_scale);
  printf("  %-34s %.6f  (hits %" PRIu64 ", misses %" PRIu64 ", lookup errors %" PRIu64 ")\n", "observed hit ratio",
         ratio(rp->hits, lookups), rp->hits, rp->misses, rp->lookup_errors);
  if (m->have_metrics && !isnan(m->ratio))
    printf("  %-34s %.6f  (store_lookup_hits_total %.0f, store_lookup_misses_total %.0f; this run: %.0f / %.0f "
           "= %.6f)\n",
           "master store_hit_ratio", m->ratio, m->hits, m->misses, dh, dm, dratio);
  else printf("  %-34s unavailable (%s)\n", "master store_hit_ratio", m->err);
  printf("  %-34s %.6f  (hits %" PRIu64 ")\n", "ideal, unbounded cache", ratio(ideal, total_refs), ideal);
  char label[64];
  if (cap1) {
    snprintf(label, sizeof(label), "exact LRU @ %" PRIu64 " blocks", cap1);
    printf("  %-34s %.6f  (hits %" PRIu64 ")\n", label, ratio(lru1, total_refs), lru1);
  } else printf("  %-34s unavailable (cluster capacity unknown: pass --capacity-blocks)\n", "exact LRU");
  if (cap2) {
    snprintf(label, sizeof(label), "exact LRU @ %" PRIu64 " blocks", cap2);
    printf("  %-34s %.6f  (hits %" PRIu64 ")\n", label, ratio(lru2, total_refs), lru2);
  }
  printf("  puts: %" PRIu64 " blocks, %.1f MiB, %" PRIu64 " failed, %" PRIu64 " retried after -200\n", rp->put_blocks,
         rp->put_bytes / 1048576.0, rp->put_failed, rp->put_retries);
  printf("  throughput: %.1f requests/s, %.0f blocks/s, %.1f MiB/s put  (%.2f s", t->nreq / w, lookups / w,
         rp->put_bytes / w / 1048576.0, rp->wall_s);
  if (c->time_scale > 0) printf(", max lag %.1f ms", rp->max_lag_ms);
  printf(")\n");
  printf("  verify (last %" PRId64 " requests): %" PRIu64 " ok, %" PRIu64 " mismatched, %" PRIu64 " evicted\n",
         c->verify_requests, vc->ok, vc->bad, vc->gone);
}

/* ------------------------------------------------------------------ main */

static const char usage[] =
    "<trace.jsonl> [--master=host:port] [--metadata=URL] [--admin=host:port] [--block-bytes=N] "
    "[--time-scale=X] [--max-requests=N] [--segment-size=N] [--capacity-blocks=N] [--capacity-blocks2=N] [--json]";

static int setup_client(struct replay *rp, const struct trace *t) {
  const struct replay_cfg *c = rp->c;
  size_t bufsize = (size_t)MC_MAX(t->max_blocks, 1u) * c->block_bytes;
  rp->s = mooncake_store_create();
  rp->buf = aligned_alloc(4096, (bufsize + 4095) & ~(size_t)4095);
  rp->keys = calloc(MC_MAX(t->max_blocks, 1u), sizeof(char *));
  for (uint32_t i = 0; rp->keys && i < MC_MAX(t->max_blocks, 1u); i++) rp->keys[i] = malloc(64 + strlen(c->key_prefix));
  if (!rp->s || !rp->buf || !rp->keys) return -1;
  int rc = mooncake_store_setup(rp->s, c->local_hostname, c->metadata, c->segment_size, 4 << 20, "tcp", "", c->master);
  if (rc) {
    fprintf(stderr, "trace_replay: setup against master %s (metadata %s) failed: %d %s\n", c->master, c->metadata,
            rc, mooncake_store_err_name(rc));
    return -1;
  }
  rc = mooncake_store_register_buffer(rp->s, rp->buf, bufsize);
  if (rc) fprintf(stderr, "trace_replay: register_buffer failed: %d (continuing through the staging buffer)\n", rc);
  return 0;
}

int main(int argc, char **argv) {
  struct replay_cfg c;
  char **rest = NULL, **args = mc_ops_underscore_flags(argc, argv);
  mc_cfg_defaults(opts, &c);
  mc_log_set_level(MC_LOG_ERROR); /* a full pool is expected here: no warning per refused put (-v shows them) */
  int prc = args ? mc_cfg_parse_argv(opts, &c, argc, args, usage, &rest) : -1;
  int exit_code = 1;
  struct trace t = {0};
  struct replay rp = {.c = &c, .t = &t};
  if (prc) {
    exit_code = prc > 0 ? 0 : 2;
    goto out;
  }
  if (!rest || !rest[0] || rest[1]) {
    fprintf(stderr, "usage: trace_replay %s\n", usage);
    exit_code = 2;
    goto out;
  }
  if (c.block_bytes % 8) {
    fprintf(stderr, "trace_replay: --block-bytes must be a multiple of 8\n");
    exit_code = 2;
    goto out;
  }
  char admin[256];
  if (*c.admin) snprintf(admin, sizeof(admin), "%s", c.admin);
  else if (mc_ops_admin_from_master(c.master, admin, sizeof(admin))) {
    fprintf(stderr, "trace_replay: --master=%s is not host[:port]\n", c.master);
    exit_code = 2;
    goto out;
  }
  if (load_trace(rest[0], c.max_requests, &t)) goto out;
  if (setup_client(&rp, &t)) goto out;
  uint64_t cap1 = (uint64_t)c.capacity_blocks;
  if (!cap1) cap1 = fetch_capacity(admin) / c.block_bytes;
  struct master_view before = {0}, after = {0};
  fetch_metrics(admin, &before);
  if (run_replay(&rp)) goto out;
  settle_metrics(admin, &before, rp.hits + rp.misses, (long)c.metrics_wait_ms, &after);
  uint64_t distinct = 0, ideal = ideal_hits(&t, &distinct), lru1 = cap1 ? lru_hits(&t, cap1) : 0;
  uint64_t cap2 = (uint64_t)c.capacity_blocks2, lru2 = cap2 ? lru_hits(&t, cap2) : 0;
  struct verify_counts vc = {0};
  verify_tail(&rp, c.verify_requests, &vc.ok, &vc.bad, &vc.gone);
  rp.distinct = distinct;
  report(&rp, &before, &after, ideal, cap1, lru1, cap2, lru2, &vc);
  exit_code = vc.bad || rp.lookup_errors ? 1 : 0;
  if (vc.bad) fprintf(stderr, "trace_replay: %" PRIu64 " blocks read back with wrong bytes\n", vc.bad);
out:
  if (rp.s) mooncake_store_destroy(rp.s);
  free(rp.buf);
  for (uint32_t i = 0; rp.keys && i < MC_MAX(t.max_blocks, 1u); i++) free(rp.keys[i]);
  free(rp.keys);
  free(t.req);
  free(t.hash);
  free(t.dense);
  free(rest);
  mc_ops_free_argv(argc, args);
  mc_cfg_free(opts, &c);
  return exit_code;
}
