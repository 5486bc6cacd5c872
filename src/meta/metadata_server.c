/* The HTTP metadata server (docs/transfer-engine.md, "The HTTP metadata server") on libmicrohttpd: a mutex-guarded
 * map key -> body and the realm that created the key (its owner), optionally persisted by an atomic rewrite (temp file + fsync + rename) after every change.
 * The rewrite runs outside the map's mutex, on a snapshot, in a persister thread: a burst of changes is
 * written once or twice, a change is answered once it is on disk (its request suspended meanwhile), and no
 * read waits for a disk, not even one served by the same MHD thread. Every request is bounded (16 MiB body, MHD header and
 * connection limits, net/httpd.h), and so is the map (MC_METADATA_SERVER_MAX_KEYS / _MAX_BYTES, answered
 * 507); none may crash it. docs/transfer-engine.md, "Metadata", has the limits and the owner rule: a
 * member of the whole cluster changes any key, a tenant only the keys its own realm created. */
#include "meta/metadata_server.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/metadata.h"
#include "net/ctrl_rpc.h"
#include "net/httpd.h"

typedef mc_mhd_ret mhd_ret;

#define BODY_MAX (16u << 20)
#define BUFFERED_MAX (256u << 20) /* all uploads in flight together */
#define POOL_THREADS 4u
#define PROBE_TIMEOUT_MS 2000

struct mc_meta_server {
  struct MHD_Daemon *d;
  uint16_t port;
  char *persist_path; /* NULL = memory only; immutable */
  pthread_mutex_t mu;
  json_t *map;            /* key -> entry (see entry_value; never modified: replaced); mu */
  size_t bytes;           /* key and body bytes in map; mu */
  uint64_t gen;           /* bumped by every change; mu */
  size_t max_keys, max_bytes;
  pthread_mutex_t pmu;    /* one persist at a time; taken before mu, never inside it */
  uint64_t persisted;     /* the gen last written to persist_path; pmu */
  pthread_mutex_t qmu;    /* guards queue, stopping */
  pthread_cond_t qcv;
  struct req *queue;      /* suspended requests waiting for their change to be persisted */
  int stopping, persister_started;
  pthread_t persister;
  atomic_size_t buffered; /* bytes of request bodies held right now */
};

/* One request's upload, owned by MHD's per-request pointer. */
struct req {
  char *body;
  size_t len, cap;
  int too_big; /* over BODY_MAX: 413 */
  int busy;    /* over BUFFERED_MAX: 503 */
  /* a change waiting to be persisted (on s->queue, its connection suspended), answered when resumed */
  struct req *next;
  struct MHD_Connection *conn;
  uint64_t gen;
  unsigned status;
  const char *answer; /* static text */
};

/* ---- entries ----
 * The map holds, and the persist file is, one JSON object key -> entry. A key created by a member of the
 * whole cluster (or in an open cluster) has the raw body as a JSON string, the only form there was before
 * tenants: an old file loads with every key owned by the whole cluster, and a file without tenants' keys
 * is still one an older server reads. A key created by a tenant has {"value": body, "owner": tenant id};
 * an older server drops such a key (logged) rather than hand it to the whole cluster. */

/* The body of an entry (a JSON string). */
static json_t *entry_value(json_t *e) { return json_is_string(e) ? e : json_object_get(e, "value"); }

/* The realm that owns an entry: "" (the whole cluster) or a tenant id. */
static const char *entry_owner(json_t *e) {
  return json_is_string(e) ? "" : json_string_value(json_object_get(e, "owner"));
}

/* A new entry (a new reference) for body owned by owner (a JSON string, NULL = the whole cluster). */
static json_t *entry_new(json_t *body, json_t *owner) {
  if (!owner) return json_incref(body);
  json_t *e = json_object();
  json_object_set(e, "value", body);
  json_object_set(e, "owner", owner);
  return e;
}

/* 1 when realm may change (or delete) entry e: a member of the whole cluster any, a tenant its own. */
static int may_change(json_t *e, const char *realm) { return !realm[0] || !strcmp(entry_owner(e), realm); }

/* ---- persistence ---- */

static int dump_map(int fd, void *map) {
  errno = 0;
  return json_dumpfd(map, fd, JSON_COMPACT | JSON_SORT_KEYS) ? (errno ? errno : EIO) : 0;
}

/* Makes persist_path hold change `gen` (or a later one). The map is copied under mu (its values are
 * shared, not copied) and written outside it; a caller whose change a concurrent rewrite already took
 * along returns at once. 0 or an errno value (logged). */
static int persist(struct mc_meta_server *s, uint64_t gen) {
  if (!s->persist_path) return 0;
  int err = 0;
  pthread_mutex_lock(&s->pmu);
  if (s->persisted < gen) {
    pthread_mutex_lock(&s->mu);
    json_t *snap = json_copy(s->map);
    uint64_t g = s->gen;
    pthread_mutex_unlock(&s->mu);
    err = snap ? mc_write_file_atomic(s->persist_path, 0644, dump_map, snap) : ENOMEM;
    json_decref(snap);
    if (!err) s->persisted = g;
    else LOG_ERROR("cannot persist metadata to %s: %s", s->persist_path, strerror(err));
  }
  pthread_mutex_unlock(&s->pmu);
  return err;
}

/* Loads the persisted map; a missing file is an empty map. Returns NULL (logged) on a corrupt file. */
static json_t *load_map(const char *path) {
  if (!path || (access(path, F_OK) && errno == ENOENT)) return json_object();
  json_error_t err;
  json_t *map = json_load_file(path, JSON_ALLOW_NUL, &err);
  if (!json_is_object(map)) {
    LOG_ERROR("cannot load persisted metadata %s: %s (line %d)", path, map ? "not a JSON object" : err.text,
              err.line);
    json_decref(map);
    return NULL;
  }
  const char *k;
  json_t *v, *tmp;
  json_object_foreach_safe(map, tmp, k, v) {
    if (json_is_string(v)) continue;
    json_t *value = json_object_get(v, "value"), *owner = json_object_get(v, "owner");
    const char *o = json_string_value(owner);
    if (json_is_object(v) && json_object_size(v) == 2 && json_is_string(value) && o &&
        mc_auth_tenant_ok(o, json_string_length(owner)))
      continue;
    LOG_WARN("persisted metadata %s: dropping key '%s' (neither a string nor {\"value\", \"owner\"})", path, k);
    json_object_del(map, k);
  }
  return map;
}

/* ---- replies ---- */

static mhd_ret reply_text(struct MHD_Connection *c, unsigned status, const char *text) {
  return mc_httpd_reply(c, status, text, strlen(text), "text/plain");
}

/* ---- /metadata ---- */

static mhd_ret do_get(struct mc_meta_server *s, struct MHD_Connection *c, const char *key, size_t klen) {
  pthread_mutex_lock(&s->mu);
  json_t *v = entry_value(json_object_getn(s->map, key, klen));
  mhd_ret rc = v ? mc_httpd_reply(c, MHD_HTTP_OK, json_string_value(v), json_string_length(v), "application/json")
                 : reply_text(c, MHD_HTTP_NOT_FOUND, "metadata not found");
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* rpc_meta keys are write-once (docs/transfer-engine.md, "Metadata"): no PUT replaces one, no DELETE removes one whose engine
 * still answers. */
static int write_once(const char *key) { return strstr(key, "rpc_meta") != NULL; }

#define NOT_OWNER "Not allowed: the key belongs to another realm (a tenant changes only its own keys)"

/* Stores body under key for realm ("" = the whole cluster; owner: the same as a JSON string, NULL for
 * "") with mu held; returns the status text, setting *status (and *gen when the map changed). A new key
 * belongs to realm; a replaced one keeps its owner. */
static const char *put_locked(struct mc_meta_server *s, const char *key, size_t klen, json_t *body,
                              const char *realm, json_t *owner, unsigned *status, uint64_t *gen) {
  json_t *entry = json_object_getn(s->map, key, klen), *old = entry_value(entry);
  int same = old && json_equal(old, body);
  *status = MHD_HTTP_OK;
  if (entry && !may_change(entry, realm)) {
    *status = MHD_HTTP_FORBIDDEN;
    return NOT_OWNER;
  }
  if (old && write_once(key)) {
    if (same) return "metadata unchanged";
    *status = MHD_HTTP_BAD_REQUEST;
    return "Duplicate rpc_meta key not allowed";
  }
  if (same) return "metadata updated";
  size_t old_len = old ? klen + json_string_length(old) : 0, new_len = klen + json_string_length(body);
  if (!old && json_object_size(s->map) >= s->max_keys) {
    *status = 507; /* Insufficient Storage */
    return "Metadata server full: too many keys (MC_METADATA_SERVER_MAX_KEYS)";
  }
  if (new_len > old_len && s->bytes - old_len + new_len > s->max_bytes) {
    *status = 507;
    return "Metadata server full: too many bytes (MC_METADATA_SERVER_MAX_BYTES)";
  }
  json_t *owned_by = entry ? json_object_get(entry, "owner") : owner;
  if (json_object_setn_new(s->map, key, klen, entry_new(body, owned_by))) {
    *status = MHD_HTTP_BAD_REQUEST;
    return "Invalid key parameter (not UTF-8)";
  }
  s->bytes = s->bytes - old_len + new_len;
  *gen = ++s->gen;
  return "metadata updated";
}

/* Answers a change (gen > 0) once it is persisted: the request is suspended and queued for the persister,
 * which resumes it (on_request then sends the answer). 0 when the caller must persist and answer itself
 * (no persistence, or the server is stopping). */
static int defer(struct mc_meta_server *s, struct MHD_Connection *c, struct req *rq, uint64_t gen, unsigned status,
                 const char *text) {
  if (!gen || !s->persist_path) return 0;
  pthread_mutex_lock(&s->qmu);
  int ok = s->persister_started && !s->stopping;
  if (ok) {
    rq->conn = c, rq->gen = gen, rq->status = status, rq->answer = text;
    MHD_suspend_connection(c);
    rq->next = s->queue;
    s->queue = rq;
    pthread_cond_signal(&s->qcv);
  }
  pthread_mutex_unlock(&s->qmu);
  return ok;
}

static void *persister_main(void *arg) {
  mc_thread_name("mc-meta-persist");
  struct mc_meta_server *s = arg;
  pthread_mutex_lock(&s->qmu);
  for (;;) {
    while (!s->queue && !s->stopping) pthread_cond_wait(&s->qcv, &s->qmu);
    struct req *list = s->queue;
    s->queue = NULL;
    if (!list) break; /* stopping, and nothing left */
    pthread_mutex_unlock(&s->qmu);
    uint64_t gen = 0;
    for (struct req *r = list; r; r = r->next) gen = r->gen > gen ? r->gen : gen;
    persist(s, gen); /* every change queued so far, in one rewrite */
    while (list) {
      struct req *r = list;
      list = r->next;
      MHD_resume_connection(r->conn);
    }
    pthread_mutex_lock(&s->qmu);
  }
  pthread_mutex_unlock(&s->qmu);
  return NULL;
}

/* ---- compare-and-swap (docs/p2p-store.md, "Metadata"): If-Match / If-None-Match ----
 * A value's revision is mc_meta_value_rev of its bytes, written as an entity tag of 16 hex digits. */

enum { COND_NONE, COND_MATCH, COND_ABSENT, COND_BAD };

/* The request's precondition: COND_MATCH with *rev (If-Match: "<16 hex>"), COND_ABSENT (If-None-Match: *),
 * COND_NONE, or COND_BAD (malformed, or both). */
static int precondition(struct MHD_Connection *c, uint64_t *rev) {
  const char *m = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-Match");
  const char *n = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
  if (m && n) return COND_BAD;
  if (n) return strcmp(n, "*") ? COND_BAD : COND_ABSENT;
  if (!m) return COND_NONE;
  char hex[17];
  size_t len = strlen(m);
  if (len != 18 || m[0] != '"' || m[17] != '"') return COND_BAD;
  memcpy(hex, m + 1, 16);
  hex[16] = 0;
  char *end;
  errno = 0;
  *rev = strtoull(hex, &end, 16);
  return errno || *end || !*rev ? COND_BAD : COND_MATCH;
}

/* 1 when the precondition holds for key's current entry; mu held. */
static int precondition_holds(struct mc_meta_server *s, const char *key, size_t klen, int cond, uint64_t rev) {
  json_t *v = entry_value(json_object_getn(s->map, key, klen));
  if (cond == COND_ABSENT) return !v;
  if (cond == COND_MATCH) return v && mc_meta_value_rev(json_string_value(v), json_string_length(v)) == rev;
  return 1;
}

#define COND_FAILED "metadata changed: precondition failed"

static mhd_ret do_put(struct mc_meta_server *s, struct MHD_Connection *c, const char *key, size_t klen,
                      struct req *rq, const char *realm) {
  uint64_t rev = 0;
  int cond = precondition(c, &rev);
  if (cond == COND_BAD) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Bad If-Match / If-None-Match");
  json_t *owner = realm[0] ? json_string(realm) : NULL;
  if (realm[0] && !owner) /* the persist file is JSON: it holds UTF-8 only */
    return reply_text(c, MHD_HTTP_FORBIDDEN, "Not allowed: a tenant id that is not UTF-8 cannot own keys");
  json_t *body = json_stringn(rq->body ? rq->body : "", rq->len);
  if (!body) {
    json_decref(owner);
    return reply_text(c, MHD_HTTP_BAD_REQUEST, "Invalid body (not UTF-8)");
  }
  unsigned status;
  uint64_t gen = 0;
  pthread_mutex_lock(&s->mu);
  const char *text = COND_FAILED;
  status = MHD_HTTP_PRECONDITION_FAILED;
  if (precondition_holds(s, key, klen, cond, rev)) text = put_locked(s, key, klen, body, realm, owner, &status, &gen);
  pthread_mutex_unlock(&s->mu);
  json_decref(body);
  json_decref(owner);
  if (defer(s, c, rq, gen, status, text)) return MHD_YES;
  if (gen) persist(s, gen);
  return reply_text(c, status, text);
}

/* Deletes key for realm ("" = the whole cluster); with expect, only while its value is still expect. 0
 * (*gen: the change), 1 when absent (or changed), 2 when the key belongs to another realm (kept). */
static int delete_key(struct mc_meta_server *s, const char *key, size_t klen, const char *expect, const char *realm,
                      uint64_t *gen) {
  pthread_mutex_lock(&s->mu);
  json_t *e = json_object_getn(s->map, key, klen), *v = entry_value(e);
  int rc = !v || (expect && strcmp(json_string_value(v), expect)) ? 1 : !may_change(e, realm) ? 2 : 0;
  size_t len = rc ? 0 : klen + json_string_length(v);
  *gen = 0;
  if (!rc && !json_object_deln(s->map, key, klen)) {
    s->bytes -= len;
    *gen = ++s->gen;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* A copy of key's value (malloc'ed), or NULL when absent; *mine: whether realm may change the key. */
static char *copy_value(struct mc_meta_server *s, const char *key, size_t klen, const char *realm, int *mine) {
  pthread_mutex_lock(&s->mu);
  json_t *e = json_object_getn(s->map, key, klen), *v = entry_value(e);
  char *r = v ? mc_strndup(json_string_value(v), json_string_length(v)) : NULL;
  *mine = !e || may_change(e, realm);
  pthread_mutex_unlock(&s->mu);
  return r;
}

int mc_meta_rpc_owner_alive(const char *value, int timeout_ms) {
  json_t *o = json_loads(value, 0, NULL);
  const char *ip = json_string_value(json_object_get(o, "ip_or_host_name"));
  int port = (int)json_integer_value(json_object_get(o, "rpc_port"));
  char *probe = NULL;
  int alive =
      ip && port > 0 && port < 65536 && mc_rpc_call(ip, (uint16_t)port, MC_RPC_PROBE, "{}", &probe, timeout_ms) == 0;
  mc_free(probe);
  json_decref(o);
  return alive;
}

static mhd_ret do_delete(struct mc_meta_server *s, struct MHD_Connection *c, const char *key, size_t klen,
                         struct req *rq, const char *realm) {
  int mine = 1;
  uint64_t rev = 0;
  int cond = precondition(c, &rev);
  if (cond == COND_BAD || cond == COND_ABSENT) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Bad If-Match");
  char *old = write_once(key) || cond == COND_MATCH ? copy_value(s, key, klen, realm, &mine) : NULL;
  if (cond == COND_MATCH && (!old || mc_meta_value_rev(old, strlen(old)) != rev)) {
    mc_free(old); /* (deleted below only while the value is still old) */
    return reply_text(c, MHD_HTTP_PRECONDITION_FAILED, COND_FAILED);
  }
  if (!mine) { /* another realm's engine is not probed for this caller */
    mc_free(old);
    return reply_text(c, MHD_HTTP_FORBIDDEN, NOT_OWNER);
  }
  if (old && mc_meta_rpc_owner_alive(old, PROBE_TIMEOUT_MS)) { /* probed without any lock held */
    mc_free(old);
    return reply_text(c, MHD_HTTP_CONFLICT, "rpc_meta key held by a live engine: not deleted");
  }
  uint64_t gen;
  int rc = delete_key(s, key, klen, old, realm, &gen);
  mc_free(old);
  if (rc == 2) return reply_text(c, MHD_HTTP_FORBIDDEN, NOT_OWNER);
  if (rc && cond == COND_MATCH) return reply_text(c, MHD_HTTP_PRECONDITION_FAILED, COND_FAILED);
  if (rc) return reply_text(c, MHD_HTTP_NOT_FOUND, "metadata not found");
  if (defer(s, c, rq, gen, MHD_HTTP_OK, "metadata deleted")) return MHD_YES;
  persist(s, gen);
  return reply_text(c, MHD_HTTP_OK, "metadata deleted");
}

/* GET /metadata?prefix=P: {"<key>": "<value>", ...} of every key starting with P (docs/p2p-store.md). */
static mhd_ret do_list(struct mc_meta_server *s, struct MHD_Connection *c, const char *prefix, size_t plen) {
  json_t *out = json_object();
  const char *k;
  json_t *e;
  pthread_mutex_lock(&s->mu);
  json_object_foreach(s->map, k, e) {
    if (!strncmp(k, prefix, plen)) json_object_set(out, k, entry_value(e));
  }
  pthread_mutex_unlock(&s->mu);
  char *text = json_dumps(out, JSON_COMPACT);
  json_decref(out);
  mhd_ret rc = text ? mc_httpd_reply(c, MHD_HTTP_OK, text, strlen(text), "application/json")
                    : reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  free(text);
  return rc;
}

static mhd_ret do_metadata(struct mc_meta_server *s, struct MHD_Connection *c, const char *method,
                           struct req *rq) {
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), put = !strcmp(method, "PUT");
  int del = !strcmp(method, "DELETE");
  if (!get && !put && !del) return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method not allowed");
  if (rq->too_big) return reply_text(c, 413 /* Content Too Large */, "Request body too large");
  if (rq->busy) return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Server busy");
  const char *key = NULL;
  size_t klen = 0;
  if (get && MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "prefix", 6, &key, &klen) == MHD_YES && key) {
    if (memchr(key, 0, klen)) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Invalid prefix parameter");
    return do_list(s, c, key, klen);
  }
  if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "key", 3, &key, &klen) != MHD_YES || !key ||
      !klen)
    return reply_text(c, MHD_HTTP_BAD_REQUEST, "Missing key parameter");
  if (memchr(key, 0, klen)) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Invalid key parameter");
  if (get) return do_get(s, c, key, klen);
  char realm[MC_AUTH_TENANT_MAX + 1]; /* the signer's: "" = the whole cluster (docs/security.md) */
  if (!mc_httpd_authorized_realm(c, method, "/metadata", rq->body, rq->len, realm))
    return reply_text(c, MHD_HTTP_UNAUTHORIZED, "Not authorized: a cross-site request, or no valid X-Mooncake-Auth");
  if (put) return do_put(s, c, key, klen, rq, realm);
  return do_delete(s, c, key, klen, rq, realm);
}

/* ---- MHD callbacks ---- */

/* Keeps the body, or drains it (flagging the request) once it exceeds a limit. */
static void append_body(struct mc_meta_server *s, struct req *rq, const char *data, size_t n) {
  if (rq->too_big || rq->busy) return;
  if (n > BODY_MAX - rq->len) {
    rq->too_big = 1;
    return;
  }
  if (atomic_fetch_add(&s->buffered, n) + n > BUFFERED_MAX) {
    atomic_fetch_sub(&s->buffered, n);
    rq->busy = 1;
    return;
  }
  if (rq->len + n > rq->cap) {
    size_t cap = rq->cap ? rq->cap : 4096;
    while (cap < rq->len + n) cap *= 2;
    rq->body = mc_realloc(rq->body, cap);
    rq->cap = cap;
  }
  memcpy(rq->body + rq->len, data, n);
  rq->len += n;
}

static int declared_too_big(struct MHD_Connection *c) {
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!cl) return 0;
  errno = 0;
  unsigned long long n = strtoull(cl, NULL, 10);
  return errno == ERANGE || n > BODY_MAX;
}

static mhd_ret on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                          const char *version, const char *upload, size_t *upload_size, void **ctx) {
  struct req *rq = *ctx;
  if (rq && rq->answer) return reply_text(c, rq->status, rq->answer); /* resumed: the change is persisted */
  if (!rq) {
    *ctx = rq = mc_calloc(1, sizeof(*rq));
    if (!declared_too_big(c)) return MHD_YES;
    rq->too_big = 1; /* refuse before reading the body */
  } else if (*upload_size) {
    append_body(cls, rq, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
  if (!strcmp(url, "/health"))
    return get ? reply_text(c, MHD_HTTP_OK, "OK")
               : reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method not allowed");
  if (strcmp(url, "/metadata")) return reply_text(c, MHD_HTTP_NOT_FOUND, "Not found");
  return do_metadata(cls, c, method, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx,
                         enum MHD_RequestTerminationCode code) {
  struct mc_meta_server *s = cls;
  struct req *rq = *ctx;
  if (!rq) return;
  atomic_fetch_sub(&s->buffered, rq->len);
  mc_free(rq->body);
  mc_free(rq);
  *ctx = NULL;
}

/* ---- lifecycle ---- */

/* Binds and starts the daemon; 0, or -1 (logged). */
static int listen_on(struct mc_meta_server *s, const char *host, uint16_t port) {
  struct mc_httpd_opts o = {.name = "metadata server", .host = host, .port = port, .handler = on_request,
                            .completed = on_completed, .cls = s, .threads = POOL_THREADS, .suspend = 1};
  s->d = mc_httpd_start(&o, &s->port);
  return s->d ? 0 : -1;
}

struct mc_meta_server *mc_meta_server_start(const char *host, uint16_t port, const char *persist_path) {
  struct mc_meta_server *s = mc_calloc(1, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->pmu, NULL);
  s->max_keys = (size_t)mc_knob_long(MC_KNOB_METADATA_SERVER_MAX_KEYS);
  s->max_bytes = (size_t)mc_knob_long(MC_KNOB_METADATA_SERVER_MAX_BYTES);
  s->persist_path = persist_path ? mc_strdup(persist_path) : NULL;
  s->map = load_map(persist_path);
  const char *k;
  json_t *v;
  json_object_foreach(s->map, k, v) s->bytes += strlen(k) + json_string_length(entry_value(v));
  s->gen = 1;
  /* Writing once now makes an unwritable path fail the start instead of every later change. */
  if (!s->map || persist(s, s->gen)) {
    mc_meta_server_stop(s);
    return NULL;
  }
  pthread_mutex_init(&s->qmu, NULL);
  pthread_cond_init(&s->qcv, NULL);
  s->persister_started = !s->persist_path || !pthread_create(&s->persister, NULL, persister_main, s);
  if (!s->persister_started || listen_on(s, host, port)) {
    mc_meta_server_stop(s);
    return NULL;
  }
  LOG_INFO("metadata server listening on %s:%u%s%s", host ? host : "", (unsigned)s->port,
           persist_path ? ", persisting to " : "", persist_path ? persist_path : "");
  mc_auth_note_open("metadata server"); /* writes are signed once a secret is configured (docs/security.md) */
  return s;
}

uint16_t mc_meta_server_port(const struct mc_meta_server *s) { return s->port; }

int mc_meta_server_delete(struct mc_meta_server *s, const char *key) {
  uint64_t gen;
  int absent = delete_key(s, key, strlen(key), NULL, "", &gen);
  if (!absent) persist(s, gen);
  return absent;
}

char *mc_meta_server_get(struct mc_meta_server *s, const char *key) {
  pthread_mutex_lock(&s->mu);
  json_t *v = entry_value(json_object_get(s->map, key));
  char *out = v ? mc_strndup(json_string_value(v), json_string_length(v)) : NULL;
  pthread_mutex_unlock(&s->mu);
  return out;
}

void mc_meta_server_stop(struct mc_meta_server *s) {
  if (!s) return;
  if (s->persister_started && s->persist_path) { /* answers every suspended request first */
    pthread_mutex_lock(&s->qmu);
    s->stopping = 1;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->persister, NULL);
  }
  if (s->d) MHD_stop_daemon(s->d);
  if (s->persister_started) {
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->pmu);
  json_decref(s->map);
  mc_free(s->persist_path);
  mc_free(s);
}
