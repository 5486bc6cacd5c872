/* The HTTP metadata server (metadata.md §4, "embedded server" behaviour) on libmicrohttpd: a mutex-guarded
 * map key -> body, optionally persisted by an atomic rewrite (temp file + fsync + rename) on every change.
 * Every request is bounded (16 MiB body, MHD header limits, 30 s idle timeout); none may crash it. */
#include "te/metadata_server.h"

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
#include "common/log.h"
#include "net/httpd.h"

typedef mc_mhd_ret mhd_ret;

#define BODY_MAX (16u << 20)
#define BUFFERED_MAX (256u << 20) /* all uploads in flight together */
#define POOL_THREADS 4u

struct mc_meta_server {
  struct MHD_Daemon *d;
  uint16_t port;
  char *persist_path; /* NULL = memory only; immutable */
  pthread_mutex_t mu;
  json_t *map;            /* key -> JSON string holding the raw body; guarded by mu */
  atomic_size_t buffered; /* bytes of request bodies held right now */
};

/* One request's upload, owned by MHD's per-request pointer. */
struct req {
  char *body;
  size_t len, cap;
  int too_big; /* over BODY_MAX: 413 */
  int busy;    /* over BUFFERED_MAX: 503 */
};

/* ---- persistence ---- */

static int fsync_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? mc_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : mc_strdup(".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  mc_free(dir);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* Returns 0 or an errno value. */
static int write_atomically(const char *path, const json_t *map) {
  size_t n = strlen(path) + 5;
  char *tmp = mc_malloc(n);
  snprintf(tmp, n, "%s.tmp", path);
  int err = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) err = errno;
  errno = 0;
  if (!err && json_dumpfd(map, fd, JSON_COMPACT | JSON_SORT_KEYS)) err = errno ? errno : EIO;
  if (!err && fsync(fd)) err = errno;
  if (fd >= 0 && close(fd) && !err) err = errno;
  if (!err && rename(tmp, path)) err = errno;
  if (err && fd >= 0) unlink(tmp);
  if (!err) fsync_dir_of(path);
  mc_free(tmp);
  return err;
}

static int persist_locked(struct mc_meta_server *s) {
  int err = s->persist_path ? write_atomically(s->persist_path, s->map) : 0;
  if (err) LOG_ERROR("cannot persist metadata to %s: %s", s->persist_path, strerror(err));
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
    LOG_WARN("persisted metadata %s: dropping key '%s' (value is not a string)", path, k);
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
  json_t *v = json_object_getn(s->map, key, klen);
  mhd_ret rc = v ? mc_httpd_reply(c, MHD_HTTP_OK, json_string_value(v), json_string_length(v), "application/json")
                 : reply_text(c, MHD_HTTP_NOT_FOUND, "metadata not found");
  pthread_mutex_unlock(&s->mu);
  return rc;
}

/* Stores body under key with mu held; returns the status text, setting *status. */
static const char *put_locked(struct mc_meta_server *s, const char *key, size_t klen, json_t *body,
                              unsigned *status) {
  json_t *old = json_object_getn(s->map, key, klen);
  int same = old && json_equal(old, body);
  *status = MHD_HTTP_OK;
  if (old && strstr(key, "rpc_meta")) { /* write-once (metadata.md §4) */
    if (same) return "metadata unchanged";
    *status = MHD_HTTP_BAD_REQUEST;
    return "Duplicate rpc_meta key not allowed";
  }
  if (same) return "metadata updated";
  if (json_object_setn(s->map, key, klen, body)) {
    *status = MHD_HTTP_BAD_REQUEST;
    return "Invalid key parameter (not UTF-8)";
  }
  persist_locked(s);
  return "metadata updated";
}

static mhd_ret do_put(struct mc_meta_server *s, struct MHD_Connection *c, const char *key, size_t klen,
                      const struct req *rq) {
  json_t *body = json_stringn(rq->body ? rq->body : "", rq->len);
  if (!body) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Invalid body (not UTF-8)");
  unsigned status;
  pthread_mutex_lock(&s->mu);
  const char *text = put_locked(s, key, klen, body, &status);
  pthread_mutex_unlock(&s->mu);
  json_decref(body);
  return reply_text(c, status, text);
}

static int delete_key(struct mc_meta_server *s, const char *key, size_t klen) {
  pthread_mutex_lock(&s->mu);
  int absent = json_object_deln(s->map, key, klen) != 0;
  if (!absent) persist_locked(s);
  pthread_mutex_unlock(&s->mu);
  return absent;
}

static mhd_ret do_delete(struct mc_meta_server *s, struct MHD_Connection *c, const char *key, size_t klen) {
  if (delete_key(s, key, klen)) return reply_text(c, MHD_HTTP_NOT_FOUND, "metadata not found");
  return reply_text(c, MHD_HTTP_OK, "metadata deleted");
}

static mhd_ret do_metadata(struct mc_meta_server *s, struct MHD_Connection *c, const char *method,
                           const struct req *rq) {
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), put = !strcmp(method, "PUT");
  int del = !strcmp(method, "DELETE");
  if (!get && !put && !del) return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method not allowed");
  if (rq->too_big) return reply_text(c, 413 /* Content Too Large */, "Request body too large");
  if (rq->busy) return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Server busy");
  const char *key = NULL;
  size_t klen = 0;
  if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "key", 3, &key, &klen) != MHD_YES || !key ||
      !klen)
    return reply_text(c, MHD_HTTP_BAD_REQUEST, "Missing key parameter");
  if (memchr(key, 0, klen)) return reply_text(c, MHD_HTTP_BAD_REQUEST, "Invalid key parameter");
  if (get) return do_get(s, c, key, klen);
  if (put) return do_put(s, c, key, klen, rq);
  return do_delete(s, c, key, klen);
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
                            .completed = on_completed, .cls = s, .threads = POOL_THREADS};
  s->d = mc_httpd_start(&o, &s->port);
  return s->d ? 0 : -1;
}

struct mc_meta_server *mc_meta_server_start(const char *host, uint16_t port, const char *persist_path) {
  struct mc_meta_server *s = mc_calloc(1, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
  s->persist_path = persist_path ? mc_strdup(persist_path) : NULL;
  s->map = load_map(persist_path);
  /* Writing once now makes an unwritable path fail the start instead of every later change. */
  if (!s->map || persist_locked(s) || listen_on(s, host, port)) {
    mc_meta_server_stop(s);
    return NULL;
  }
  LOG_INFO("metadata server listening on %s:%u%s%s", host ? host : "", (unsigned)s->port,
           persist_path ? ", persisting to " : "", persist_path ? persist_path : "");
  return s;
}

uint16_t mc_meta_server_port(const struct mc_meta_server *s) { return s->port; }

int mc_meta_server_delete(struct mc_meta_server *s, const char *key) {
  return delete_key(s, key, strlen(key));
}

char *mc_meta_server_get(struct mc_meta_server *s, const char *key) {
  pthread_mutex_lock(&s->mu);
  json_t *v = json_object_get(s->map, key);
  char *out = v ? mc_strndup(json_string_value(v), json_string_length(v)) : NULL;
  pthread_mutex_unlock(&s->mu);
  return out;
}

void mc_meta_server_stop(struct mc_meta_server *s) {
  if (!s) return;
  if (s->d) MHD_stop_daemon(s->d);
  pthread_mutex_destroy(&s->mu);
  json_decref(s->map);
  mc_free(s->persist_path);
  mc_free(s);
}
