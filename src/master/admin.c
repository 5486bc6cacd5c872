/* The master's admin/metrics HTTP server (docs/admin.md) on libmicrohttpd: metrics,
 * health and role, the effective configuration, key and segment queries, removal, and drain jobs.
 * It runs on its own threads and takes the master's locks only to copy numbers out (one shard or the
 * segment registry at a time); the key listing is streamed shard by shard. Admin reads never grant
 * leases (docs/master.md, "Design decisions"). Every request is bounded (64 KiB body, 10000 keys per batch query). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "master/ha.h"
#include "master/master_int.h"
#include "master_core/metrics.h"
#include "mooncake/store_errors.h"
#include "net/httpd.h"

#define ADMIN_THREADS 2u
#define BODY_MAX (64u << 10)
#define BATCH_KEYS_MAX 10000u
#define STREAM_BLOCK (64u << 10)
#define DRAIN_JOBS_MAX 256u /* jobs kept (docs/admin.md): finished ones make room oldest first */

#define CT_JSON "application/json"
#define CT_TEXT "text/plain; charset=utf-8"
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"

struct drain_job {
  char id[37];
  char *segment;
  int cancelled;
};

struct mc_admin {
  struct mc_master *m;
  struct MHD_Daemon *d;
  pthread_mutex_t mu; /* guards jobs; taken before (outside) the master's seg_mu, never inside it */
  struct drain_job *jobs; /* oldest first */
  uint32_t njobs, capjobs;
};

/* One request's upload (POST bodies), owned by MHD's per-request pointer. */
struct req {
  char *body;
  size_t len;
  int too_big;
};

typedef mc_mhd_ret (*route_fn)(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq);

/* ------------------------------------------------------------------ replies */

static mc_mhd_ret reply_text(struct MHD_Connection *c, unsigned status, const char *text) {
  return mc_httpd_reply(c, status, text, strlen(text), CT_TEXT);
}

/* Sends j (reference stolen) as compact JSON. */
static mc_mhd_ret reply_json(struct MHD_Connection *c, unsigned status, json_t *j) {
  char *s = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  if (!s) return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot encode JSON");
  mc_mhd_ret rc = mc_httpd_reply(c, status, s, strlen(s), CT_JSON);
  free(s);
  return rc;
}

/* docs/admin.md, "Endpoints": INVALID_PARAMS 400, *_NOT_FOUND 404, UNAVAILABLE_* / TENANT_NOT_EMPTY 409, else 500;
 * ours: a leased or still-being-written object (OBJECT_HAS_LEASE, REPLICA_IS_NOT_READY) is 409 too. */
static unsigned http_status(int code) {
  const char *name = mooncake_store_err_name(code);
  size_t n = strlen(name);
  if (code == MC_INVALID_PARAMS) return MHD_HTTP_BAD_REQUEST;
  if (n > 10 && !strcmp(name + n - 10, "_NOT_FOUND")) return MHD_HTTP_NOT_FOUND;
  if (!strncmp(name, "UNAVAILABLE_", 12) || code == MC_TENANT_NOT_EMPTY || code == MC_OBJECT_HAS_LEASE ||
      code == MC_REPLICA_IS_NOT_READY)
    return MHD_HTTP_CONFLICT;
  return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

static json_t *error_body(int code, const char *detail) {
  json_t *j = json_pack("{s:b, s:i, s:s}", "success", 0, "error_code", code, "error_message",
                        mooncake_store_err_name(code));
  if (detail) json_object_set_new(j, "detail", json_string(detail));
  return j;
}

static mc_mhd_ret reply_error(struct MHD_Connection *c, int code, const char *detail) {
  return reply_json(c, http_status(code), error_body(code, detail));
}

/* {"success": true} plus the fields of extra (reference stolen, may be NULL). */
static mc_mhd_ret reply_ok(struct MHD_Connection *c, json_t *extra) {
  json_t *j = json_pack("{s:b}", "success", 1);
  if (extra) json_object_update_new(j, extra);
  return reply_json(c, MHD_HTTP_OK, j);
}

/* ------------------------------------------------------------------ arguments */

/* The query argument (decoded), or NULL; *len gets its length. Values with a NUL byte count as absent
 * (callers answer 400). */
static const char *arg(struct MHD_Connection *c, const char *name, size_t *len) {
  const char *v = NULL;
  size_t n = 0;
  if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name, strlen(name), &v, &n) != MHD_YES || !v) return NULL;
  if (memchr(v, 0, n)) return NULL;
  if (len) *len = n;
  return v;
}

/* force: absent, "false" or "0" -> 0; "true" or "1" -> 1; anything else -> -1. */
static int force_arg(struct MHD_Connection *c) {
  const char *v = arg(c, "force", NULL);
  if (!v || !strcasecmp(v, "false") || !strcmp(v, "0")) return 0;
  return !strcasecmp(v, "true") || !strcmp(v, "1") ? 1 : -1;
}

/* ------------------------------------------------------------------ status and metrics */

static mc_mhd_ret get_metrics(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  struct mc_wbuf w = {0};
  mc_metrics_exposition(a->m, &w);
  mc_mhd_ret rc = mc_httpd_reply(c, MHD_HTTP_OK, (const char *)w.p, w.len, CT_PROM);
  mc_w_free(&w);
  return rc;
}

static mc_mhd_ret get_summary(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  char line[2048];
  mc_metrics_summary(a->m, line, sizeof(line) - 1);
  strcat(line, "\n");
  return reply_text(c, MHD_HTTP_OK, line);
}

/* The leader as this master knows it: itself without HA; with HA what the election last read. */
static json_t *leader_fields(struct mc_admin *a, int *present) {
  struct mc_master *m = a->m;
  char addr[160];
  uint64_t view = m->view_version;
  *present = 1;
  if (m->ha) {
    struct mc_ha_info hi;
    mc_ha_info(m->ha, &hi);
    *present = hi.present;
    snprintf(addr, sizeof(addr), "%s", hi.leader);
    view = hi.view_version;
  } else {
    snprintf(addr, sizeof(addr), "%s:%u", m->cfg.bind_ip, (unsigned)m->rpc_port);
  }
  return *present ? json_pack("{s:s, s:I}", "leader_address", addr, "view_version", (json_int_t)view) : json_object();
}

static const char *ha_state(struct mc_master *m) {
  if (!m->ha) return "serving";
  struct mc_ha_info hi;
  mc_ha_info(m->ha, &hi);
  return mc_ha_state_name(hi.state);
}

static const char *role(struct mc_master *m) { return strcmp(ha_state(m), "serving") ? "standby" : "leader"; }

static mc_mhd_ret get_health(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  int present;
  json_t *j = json_pack("{s:s, s:s, s:s, s:b}", "status", "ok", "role", role(a->m), "ha_state", ha_state(a->m),
                        "service_ready", mc_master_serving(a->m));
  json_object_update_new(j, leader_fields(a, &present));
  return reply_json(c, MHD_HTTP_OK, j);
}

static mc_mhd_ret get_leader(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  int present;
  json_t *f = leader_fields(a, &present);
  json_t *j = json_pack("{s:b}", "present", present);
  json_object_update_new(j, f);
  return reply_json(c, MHD_HTTP_OK, j);
}

static mc_mhd_ret get_role(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  return reply_text(c, MHD_HTTP_OK, role(a->m));
}

static mc_mhd_ret get_ha_status(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  return reply_text(c, MHD_HTTP_OK, ha_state(a->m));
}

static mc_mhd_ret get_config(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  return reply_json(c, MHD_HTTP_OK, mc_cfg_to_json(mc_master_opts, &a->m->cfg));
}

/* ------------------------------------------------------------------ keys */

/* The readable memory replicas of a key as upstream's JSON list, or the error; no lease. */
static int replicas_json(struct mc_master *m, const char *key, size_t klen, json_t **out) {
  struct mc_wbuf w = {0};
  int rc = mc_master_peek_replicas(m, key, (uint32_t)klen, &w);
  *out = NULL;
  if (!rc) {
    struct mc_rbuf_rd r;
    struct mc_replica_rec *reps;
    mc_r_init(&r, w.p, w.len);
    uint32_t n = mc_get_replicas(&r, &reps);
    *out = json_array();
    for (uint32_t i = 0; i < n; i++)
      json_array_append_new(*out, json_pack("{s:I, s:I, s:o, s:o, s:o, s:o}", "size_", (json_int_t)reps[i].size,
                                            "buffer_address_", (json_int_t)reps[i].address, "protocol_",
                                            mc_json_text(reps[i].protocol), "transport_endpoint_",
                                            mc_json_text(reps[i].te_endpoint), "segment_name_",
                                            mc_json_text(reps[i].segment_name), "zone_", mc_json_text(reps[i].zone)));
    mc_replicas_free(reps, n);
  }
  mc_w_free(&w);
  return rc;
}

static mc_mhd_ret get_query_key(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  size_t klen = 0;
  const char *key = arg(c, "key", &klen);
  if (!key || !klen) return reply_error(c, MC_INVALID_PARAMS, "missing or invalid ?key=");
  json_t *data;
  int rc = replicas_json(a->m, key, klen, &data);
  if (rc) return reply_error(c, rc, NULL);
  return reply_ok(c, json_pack("{s:o}", "data", data));
}

static json_t *one_key_result(struct mc_master *m, const char *key, size_t klen) {
  json_t *values;
  int rc = replicas_json(m, key, klen, &values);
  if (!rc) return json_pack("{s:b, s:o}", "ok", 1, "values", values);
  return json_pack("{s:b, s:s, s:i}", "ok", 0, "error", mooncake_store_err_name(rc), "error_code", rc);
}

static mc_mhd_ret get_batch_query_keys(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  size_t len = 0;
  const char *keys = arg(c, "keys", &len);
  json_t *data = json_object();
  uint32_t n = 0;
  for (size_t i = 0; keys && i < len && n <= BATCH_KEYS_MAX;) {
    const char *comma = memchr(keys + i, ',', len - i);
    size_t klen = comma ? (size_t)(comma - (keys + i)) : len - i;
    if (klen) {
      json_object_setn_new(data, keys + i, klen, one_key_result(a->m, keys + i, klen));
      n++;
    }
    i += klen + 1;
  }
  if (n > BATCH_KEYS_MAX || !n) {
    json_decref(data);
    return reply_json(c, MHD_HTTP_BAD_REQUEST,
                      json_pack("{s:b, s:s}", "success", 0, "error",
                                n ? "Too many keys (at most 10000)" : "No keys provided. Use ?keys=key1,key2,..."));
  }
  return reply_ok(c, json_pack("{s:o}", "data", data));
}

/* /get_all_keys: one key per line, produced one shard at a time (each shard locked only while copied). */
struct key_stream {
  struct mc_master *m;
  char *prefix;
  size_t plen;
  uint32_t shard;
  struct mc_wbuf buf;
  size_t off;
};

static void copy_shard_keys(struct key_stream *ks, struct shard *sh) {
  pthread_mutex_lock(&sh->mu);
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b]; o; o = o->next) {
      if (o->klen < ks->plen || memcmp(o->key, ks->prefix, ks->plen)) continue;
      mc_w_bytes_raw(&ks->buf, o->key, o->klen);
      mc_w_u8(&ks->buf, '\n');
    }
  pthread_mutex_unlock(&sh->mu);
}

static ssize_t read_keys(void *cls, uint64_t pos, char *out, size_t max) {
  struct key_stream *ks = cls;
  while (ks->off == ks->buf.len) {
    if (ks->shard == MC_NSHARDS) return MHD_CONTENT_READER_END_OF_STREAM;
    ks->buf.len = ks->off = 0;
    copy_shard_keys(ks, &ks->m->shards[ks->shard++]);
  }
  size_t n = MC_MIN(max, ks->buf.len - ks->off);
  memcpy(out, ks->buf.p + ks->off, n);
  ks->off += n;
  return (ssize_t)n;
}

static void free_key_stream(void *cls) {
  struct key_stream *ks = cls;
  mc_w_free(&ks->buf);
  mc_free(ks->prefix);
  mc_free(ks);
}

static mc_mhd_ret get_all_keys(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  size_t plen = 0;
  const char *prefix = arg(c, "prefix", &plen);
  struct key_stream *ks = mc_calloc(1, sizeof(*ks));
  ks->m = a->m;
  ks->prefix = mc_strndup(prefix ? prefix : "", prefix ? plen : 0);
  ks->plen = prefix ? plen : 0;
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, read_keys, ks,
                                                             free_key_stream);
  if (!r) {
    free_key_stream(ks);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT_TEXT);
  mc_mhd_ret rc = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return rc;
}

static mc_mhd_ret post_remove(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  size_t klen = 0;
  const char *key = arg(c, "key", &klen);
  int force = force_arg(c);
  if (!key || !klen) return reply_error(c, MC_INVALID_PARAMS, "missing or invalid ?key=");
  if (force < 0) return reply_error(c, MC_INVALID_PARAMS, "force must be true, false, 1 or 0");
  int rc = mc_master_remove(a->m, key, (uint32_t)klen, force, NULL); /* (an HTTP reply witnesses nothing) */
  return rc ? reply_error(c, rc, NULL) : reply_ok(c, NULL);
}

static mc_mhd_ret post_remove_all(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  int force = force_arg(c);
  if (force < 0) return reply_error(c, MC_INVALID_PARAMS, "force must be true, false, 1 or 0");
  size_t tlen = 0;
  const char *tenant = arg(c, "tenant_id", &tlen); /* a client's key namespace: "<tenant>\x1f" */
  char scope[136] = ""; /* no tenant_id: every key; "default": the default namespace */
  if (tenant && tlen > 128) return reply_error(c, MC_INVALID_PARAMS, "tenant_id longer than 128 bytes");
  if (tenant && tlen && strcmp(tenant, "default")) snprintf(scope, sizeof(scope), "%.*s\x1f", (int)tlen, tenant);
  int64_t n = mc_master_remove_matching(a->m, NULL, tenant && tlen ? scope : NULL, force, NULL);
  return reply_ok(c, json_pack("{s:I}", "removed_count", (json_int_t)n));
}

/* ------------------------------------------------------------------ segments */

struct seg_info {
  char id[37], client[37];
  char *name, *te_endpoint, *protocol, *zone;
  uint64_t base, size, used, cap;
  uint64_t ssd_cap, ssd_used; /* its client's local-disk tier (REPORT_SSD; 0 without one) */
  int state;
};

/* A copy of the registry, taken under seg_mu (read) and used without it. Free with free_segs. */
static struct seg_info *copy_segs(struct mc_master *m, uint32_t *n) {
  pthread_rwlock_rdlock(&m->seg_mu);
  *n = m->nsegs;
  struct seg_info *v = mc_calloc(*n ? *n : 1, sizeof(*v));
  for (uint32_t i = 0; i < *n; i++) {
    const struct mseg *s = m->segs[i];
    mc_uuid_str(s->id, v[i].id);
    mc_uuid_str(s->client, v[i].client);
    v[i].name = mc_strdup(s->name);
    v[i].te_endpoint = mc_strdup(s->te_endpoint);
    v[i].protocol = mc_strdup(s->protocol);
    v[i].zone = mc_strdup(s->zone);
    v[i].base = s->base;
    v[i].size = s->size;
    v[i].used = atomic_load(&s->used);
    v[i].cap = mc_tlsf_capacity(s->tlsf);
    v[i].state = atomic_load(&s->state);
    const struct mclient *c = mc_client_find_locked(m, s->client);
    if (c) v[i].ssd_cap = c->ssd_cap, v[i].ssd_used = c->ssd_used;
  }
  pthread_rwlock_unlock(&m->seg_mu);
  return v;
}

static void free_segs(struct seg_info *v, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    mc_free(v[i].name);
    mc_free(v[i].te_endpoint);
    mc_free(v[i].protocol);
    mc_free(v[i].zone);
  }
  mc_free(v);
}

/* A draining segment that holds nothing any more is DRAINED (it stays mounted, allocating nothing). */
static const char *seg_status(const struct seg_info *s) {
  switch (s->state) {
    case MC_SEG_OK: return "OK";
    case MC_SEG_DRAINING: return s->used ? "DRAINING" : "DRAINED";
    case MC_SEG_GRACEFULLY_UNMOUNTING: return "UNMOUNTING";
    default: return "UNMOUNTED";
  }
}

static mc_mhd_ret get_all_segments(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  uint32_t n;
  struct seg_info *v = copy_segs(a->m, &n);
  struct mc_wbuf w = {0};
  for (uint32_t i = 0; i < n; i++) {
    mc_w_bytes_raw(&w, v[i].name, strlen(v[i].name));
    mc_w_u8(&w, '\n');
  }
  free_segs(v, n);
  mc_mhd_ret rc = mc_httpd_reply(c, MHD_HTTP_OK, w.len ? (const char *)w.p : "", w.len, CT_TEXT);
  mc_w_free(&w);
  return rc;
}

static json_t *seg_detail(const struct seg_info *s) {
  char base[32], human[32];
  snprintf(base, sizeof(base), "0x%llx", (unsigned long long)s->base);
  snprintf(human, sizeof(human), "%.2f GiB", (double)s->size / (double)(1ull << 30));
  /* (names and endpoints are a client's text: mc_json_text keeps a segment whose name is not UTF-8 listed) */
  return json_pack("{s:o, s:s, s:s, s:s, s:I, s:s, s:o, s:o, s:o, s:s, s:I, s:I, s:f, s:I, s:I}", "segment_name",
                   mc_json_text(s->name), "segment_id", s->id, "client_id", s->client, "base_address", base,
                   "size_bytes", (json_int_t)s->size, "size_human", human, "te_endpoint",
                   mc_json_text(s->te_endpoint), "protocol", mc_json_text(s->protocol), "zone",
                   mc_json_text(s->zone), "status", seg_status(s), "allocator_used_bytes",
                   (json_int_t)s->used, "allocator_capacity_bytes", (json_int_t)s->cap,
                   "allocator_usage_percent", s->cap ? 100.0 * (double)s->used / (double)s->cap : 0.0, "ssd_capacity",
                   (json_int_t)s->ssd_cap, "ssd_used", (json_int_t)s->ssd_used);
}

static json_t *segs_json(struct mc_master *m, uint32_t *n) {
  struct seg_info *v = copy_segs(m, n);
  json_t *list = json_array();
  for (uint32_t i = 0; i < *n; i++) json_array_append_new(list, seg_detail(&v[i]));
  free_segs(v, *n);
  return list;
}

static mc_mhd_ret get_segments_detail(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  uint32_t n;
  json_t *list = segs_json(a->m, &n);
  return reply_json(c, MHD_HTTP_OK, json_pack("{s:I, s:o}", "total_segments", (json_int_t)n, "segments", list));
}

static mc_mhd_ret get_segments_status(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  uint32_t n;
  json_t *list = segs_json(a->m, &n);
  return reply_ok(c, json_pack("{s:I, s:o}", "total_segments", (json_int_t)n, "segments", list));
}

static mc_mhd_ret get_query_segment(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  const char *name = arg(c, "segment", NULL);
  if (!name || !*name) return reply_error(c, MC_INVALID_PARAMS, "missing or invalid ?segment=");
  uint32_t n, found = 0;
  uint64_t used = 0, cap = 0;
  struct seg_info *v = copy_segs(a->m, &n);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name)) found++, used += v[i].used, cap += v[i].cap;
  free_segs(v, n);
  if (!found) return reply_error(c, MC_SEGMENT_NOT_FOUND, NULL);
  char text[1024];
  snprintf(text, sizeof(text), "%s\nUsed(bytes): %llu\nCapacity(bytes) : %llu\n", name, (unsigned long long)used,
           (unsigned long long)cap);
  return reply_text(c, MHD_HTTP_OK, text);
}

/* ------------------------------------------------------------------ drain jobs */

/* Moves every segment named `name` from state `from` to `to` (seg_mu write). Returns how many did, or
 * -1 when one is being unmounted; 0 when none is named so. */
static int set_state(struct mc_master *m, const char *name, int from, int to) {
  int n = 0, busy = 0;
  pthread_rwlock_wrlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nsegs; i++) {
    struct mseg *s = m->segs[i];
    if (strcmp(s->name, name)) continue;
    int st = atomic_load(&s->state);
    if (st == from) atomic_store(&s->state, to), n++;
    else if (st == to) n++;
    else busy = 1;
  }
  pthread_rwlock_unlock(&m->seg_mu);
  return busy ? -1 : n;
}

/* DRAINED once no draining segment of that name holds data (a new incarnation mounted under the name
 * after the drained one left is not part of the job). */
static const char *drain_status(struct mc_master *m, const char *name, uint64_t *used) {
  uint32_t n;
  struct seg_info *v = copy_segs(m, &n);
  *used = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(v[i].name, name) && v[i].state != MC_SEG_OK) *used += v[i].used;
  free_segs(v, n);
  return *used ? "DRAINING" : "DRAINED";
}

/* The segment name of a drain request: ?segment=, else {"segment": "..."} in the body. malloc'ed. */
static char *drain_target(struct MHD_Connection *c, const struct req *rq) {
  const char *v = arg(c, "segment", NULL);
  if (v) return *v ? mc_strdup(v) : NULL;
  json_t *j = rq->len ? json_loadb(rq->body, rq->len, 0, NULL) : NULL;
  const char *s = json_string_value(json_object_get(j, "segment"));
  char *r = s && *s ? mc_strdup(s) : NULL;
  json_decref(j);
  return r;
}

static struct drain_job *find_job_locked(struct mc_admin *a, const char *id) {
  for (uint32_t i = 0; id && i < a->njobs; i++)
    if (!strcmp(a->jobs[i].id, id)) return &a->jobs[i];
  return NULL;
}

static json_t *job_json(struct mc_admin *a, const struct drain_job *j) {
  uint64_t used = 0;
  const char *status = j->cancelled ? "CANCELLED" : drain_status(a->m, j->segment, &used);
  return json_pack("{s:s, s:o, s:s, s:I}", "job_id", j->id, "segment", mc_json_text(j->segment), "status", status,
                   "used_bytes",
                   (json_int_t)used);
}

/* Makes room for one more job: at DRAIN_JOBS_MAX the oldest finished (cancelled or drained) job goes.
 * 0, or -1 when every job kept is still running. a->mu held. */
static int make_room_locked(struct mc_admin *a) {
  if (a->njobs < DRAIN_JOBS_MAX) return 0;
  for (uint32_t i = 0; i < a->njobs; i++) {
    uint64_t used;
    if (!a->jobs[i].cancelled && strcmp(drain_status(a->m, a->jobs[i].segment, &used), "DRAINED")) continue;
    mc_free(a->jobs[i].segment);
    memmove(&a->jobs[i], &a->jobs[i + 1], sizeof(*a->jobs) * (a->njobs - i - 1));
    a->njobs--;
    return 0;
  }
  return -1;
}

static mc_mhd_ret post_drain(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  char *name = drain_target(c, rq);
  if (!name) return reply_error(c, MC_INVALID_PARAMS, "missing segment (?segment= or {\"segment\": ...})");
  pthread_mutex_lock(&a->mu);
  if (make_room_locked(a)) {
    pthread_mutex_unlock(&a->mu);
    mc_free(name);
    char detail[96];
    snprintf(detail, sizeof(detail), "%u drain jobs are running; finish or cancel one first", DRAIN_JOBS_MAX);
    return reply_json(c, 429 /* Too Many Requests */, error_body(MC_TASK_PENDING_LIMIT_EXCEEDED, detail));
  }
  int n = set_state(a->m, name, MC_SEG_OK, MC_SEG_DRAINING);
  if (n <= 0) {
    pthread_mutex_unlock(&a->mu);
    mc_free(name);
    return reply_error(c, n ? MC_UNAVAILABLE_IN_CURRENT_STATUS : MC_SEGMENT_NOT_FOUND,
                       n ? "segment is being unmounted" : NULL);
  }
  LOG_INFO("segment_name=%s, action=drain, segments=%d", name, n);
  if (a->njobs == a->capjobs) {
    a->capjobs = a->capjobs ? 2 * a->capjobs : 8;
    a->jobs = mc_realloc(a->jobs, sizeof(*a->jobs) * a->capjobs);
  }
  struct drain_job *j = &a->jobs[a->njobs++];
  *j = (struct drain_job){.segment = name};
  mc_uuid_str(mc_uuid_random(), j->id);
  json_t *body = json_pack("{s:s, s:s}", "job_id", j->id, "segment", name);
  pthread_mutex_unlock(&a->mu);
  return reply_ok(c, body);
}

static mc_mhd_ret get_drain_query(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  pthread_mutex_lock(&a->mu);
  struct drain_job *j = find_job_locked(a, arg(c, "job_id", NULL));
  json_t *body = j ? job_json(a, j) : NULL;
  pthread_mutex_unlock(&a->mu);
  return body ? reply_ok(c, body) : reply_error(c, MC_JOB_NOT_FOUND, NULL);
}

static mc_mhd_ret get_drain_list(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  json_t *list = json_array();
  pthread_mutex_lock(&a->mu);
  for (uint32_t i = 0; i < a->njobs; i++) json_array_append_new(list, job_json(a, &a->jobs[i]));
  pthread_mutex_unlock(&a->mu);
  return reply_ok(c, json_pack("{s:o}", "jobs", list));
}

/* Cancelling returns the job's draining segments to service (a drained segment becomes allocatable). */
static mc_mhd_ret post_drain_cancel(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  pthread_mutex_lock(&a->mu);
  struct drain_job *j = find_job_locked(a, arg(c, "job_id", NULL));
  json_t *body = NULL;
  if (j && !j->cancelled) {
    set_state(a->m, j->segment, MC_SEG_DRAINING, MC_SEG_OK);
    j->cancelled = 1;
    LOG_INFO("segment_name=%s, action=drain_cancelled", j->segment);
  }
  if (j) body = job_json(a, j);
  pthread_mutex_unlock(&a->mu);
  return body ? reply_ok(c, body) : reply_error(c, MC_JOB_NOT_FOUND, NULL);
}

/* /api/v1/snapshot: the object table as a snapshot file (docs/ha.md, "Snapshots"; snapshot.c). */
static mc_mhd_ret get_snapshot(struct mc_admin *a, struct MHD_Connection *c, const struct req *rq) {
  (void)rq;
  struct mc_wbuf w = {0};
  int rc = mc_master_snapshot(a->m, &w);
  mc_mhd_ret r = rc ? reply_error(c, rc, "cannot encode the snapshot")
                    : mc_httpd_reply(c, MHD_HTTP_OK, (const char *)w.p, w.len, "application/octet-stream");
  mc_w_free(&w);
  return r;
}

/* ------------------------------------------------------------------ routing */

struct route {
  int post; /* 0: GET (and HEAD), 1: POST */
  const char *path;
  route_fn fn;
  int always; /* answers also while this master does not serve (a standby; docs/ha.md) */
};

static const struct route routes[] = {
    {0, "/metrics", get_metrics, 1},
    {0, "/metrics/summary", get_summary, 1},
    {0, "/health", get_health, 1},
    {0, "/role", get_role, 1},
    {0, "/ha_status", get_ha_status, 1},
    {0, "/leader", get_leader, 1},
    {0, "/config", get_config, 1},
    {0, "/get_all_keys", get_all_keys},
    {0, "/get_all_segments", get_all_segments},
    {0, "/get_segments_detail", get_segments_detail},
    {0, "/query_key", get_query_key},
    {0, "/batch_query_keys", get_batch_query_keys},
    {0, "/query_segment", get_query_segment},
    {0, "/api/v1/segments/status", get_segments_status},
    {0, "/api/v1/drain_jobs", get_drain_list},
    {0, "/api/v1/snapshot", get_snapshot},
    {0, "/api/v1/drain_jobs/query", get_drain_query},
    {1, "/api/v1/drain_jobs", post_drain},
    {1, "/api/v1/drain_jobs/cancel", post_drain_cancel},
    {1, "/api/v1/remove", post_remove},
    {1, "/api/v1/remove_all", post_remove_all},
};

static mc_mhd_ret route(struct mc_admin *a, struct MHD_Connection *c, const char *url, const char *method,
                        const struct req *rq) {
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST"), known = 0;
  for (size_t i = 0; i < MC_ARRAY_LEN(routes); i++) {
    if (strcmp(routes[i].path, url)) continue;
    known = 1;
    if (routes[i].post && post && !mc_httpd_authorized(c, method, url, rq->body, rq->len)) /* docs/security.md */
      return reply_json(c, MHD_HTTP_UNAUTHORIZED,
                        error_body(MC_INVALID_PARAMS, "not authorized: a cross-site request, or no valid X-Mooncake-Auth"));
    if (!(routes[i].post ? post : get)) continue;
    if (!routes[i].always && !mc_master_serving(a->m))
      return reply_json(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                        json_pack("{s:b, s:i, s:s}", "success", 0, "error_code", MC_UNAVAILABLE_IN_CURRENT_MODE,
                                  "error_message", "service plane is not active"));
    return routes[i].fn(a, c, rq);
  }
  if (known) return reply_json(c, MHD_HTTP_METHOD_NOT_ALLOWED, error_body(MC_INVALID_PARAMS, "method not allowed"));
  return reply_json(c, MHD_HTTP_NOT_FOUND, json_pack("{s:b, s:s}", "success", 0, "error", "no such endpoint"));
}

static mc_mhd_ret on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **ctx) {
  struct req *rq = *ctx;
  if (!rq) {
    *ctx = mc_calloc(1, sizeof(struct req));
    return MHD_YES;
  }
  if (*upload_size) {
    if (rq->too_big || *upload_size > BODY_MAX - rq->len) {
      rq->too_big = 1;
    } else {
      rq->body = mc_realloc(rq->body, rq->len + *upload_size);
      memcpy(rq->body + rq->len, upload, *upload_size);
      rq->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (rq->too_big) return reply_error(c, MC_INVALID_PARAMS, "request body too large");
  return route(cls, c, url, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode code) {
  struct req *rq = *ctx;
  if (!rq) return;
  mc_free(rq->body);
  mc_free(rq);
  *ctx = NULL;
}

/* ------------------------------------------------------------------ lifecycle */

int mc_master_start_admin(struct mc_master *m, uint16_t *port_out) {
  struct mc_admin *a = mc_calloc(1, sizeof(*a));
  a->m = m;
  pthread_mutex_init(&a->mu, NULL);
  struct mc_httpd_opts o = {.name = "admin server", .host = m->cfg.metrics_host, .port = (uint16_t)m->cfg.metrics_port,
                            .handler = on_request, .completed = on_completed, .cls = a, .threads = ADMIN_THREADS};
  uint16_t port = 0;
  a->d = mc_httpd_start(&o, &port);
  if (!a->d) {
    mc_admin_stop(a);
    return MC_INTERNAL_ERROR;
  }
  m->admin = a;
  const char *h = m->cfg.metrics_host;
  LOG_INFO(strchr(h, ':') ? "admin/metrics HTTP server listening on [%s]:%u" : "admin/metrics HTTP server listening on %s:%u",
           h, (unsigned)port);
  if (port_out) *port_out = port;
  return 0;
}

void mc_admin_stop(struct mc_admin *a) {
  if (!a) return;
  if (a->d) MHD_stop_daemon(a->d);
  for (uint32_t i = 0; i < a->njobs; i++) mc_free(a->jobs[i].segment);
  mc_free(a->jobs);
  pthread_mutex_destroy(&a->mu);
  mc_free(a);
}
