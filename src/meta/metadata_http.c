/* HTTP metadata backend (GET/PUT/DELETE <url>?key=<escaped key>, only 200 is success; docs/transfer-engine.md)
 * and the libcurl plumbing it shares with the etcd client and the operator tools (metadata_curl.h). Every request is bounded
 * by a 3 s total / 1.5 s connect timeout or the caller's own; a streamed answer by its connect timeout
 * and the caller's stop check, polled every 50 ms. Nothing here may block forever or raise signals. */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/log.h"
#include "mooncake/transfer_engine.h"
#include "meta/metadata.h"
#include "meta/metadata_curl.h"

#define TOTAL_TIMEOUT_MS 3000L
#define CONNECT_TIMEOUT_MS 1500L
#define RESP_MAX (64u << 20) /* larger answers are treated as a failure */
#define POOL_MAX 8
#define STREAM_POLL_MS 50 /* how often a streamed transfer's stop check runs, data or not */
#define STREAM_HEAD_MAX 256 /* what is kept of a non-200 streamed answer, for the message */

/* ---- libcurl plumbing ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_MAX]; /* idle handles, guarded by pool_mu */
static int pool_n;           /* guarded by pool_mu */
static int pool_users;       /* open backends, guarded by pool_mu */

static void global_init(void) {
  CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) LOG_ERROR("curl_global_init failed: %s", curl_easy_strerror(rc));
}

void mc_curl_ref(void) {
  pthread_once(&global_once, global_init);
  pthread_mutex_lock(&pool_mu);
  pool_users++;
  pthread_mutex_unlock(&pool_mu);
}

void mc_curl_unref(void) {
  CURL *drain[POOL_MAX];
  int n = 0;
  pthread_mutex_lock(&pool_mu);
  if (pool_users > 0 && --pool_users == 0) {
    n = pool_n;
    memcpy(drain, pool, sizeof(CURL *) * n);
    pool_n = 0;
  }
  pthread_mutex_unlock(&pool_mu);
  for (int i = 0; i < n; i++) curl_easy_cleanup(drain[i]);
}

static CURL *handle_get(void) {
  CURL *h = NULL;
  pthread_once(&global_once, global_init);
  pthread_mutex_lock(&pool_mu);
  if (pool_n > 0) h = pool[--pool_n];
  pthread_mutex_unlock(&pool_mu);
  if (!h) return curl_easy_init();
  curl_easy_reset(h); /* keeps its live connections */
  return h;
}

static void handle_put(CURL *h) {
  pthread_mutex_lock(&pool_mu);
  if (pool_users > 0 && pool_n < POOL_MAX) {
    pool[pool_n++] = h;
    h = NULL;
  }
  pthread_mutex_unlock(&pool_mu);
  if (h) curl_easy_cleanup(h);
}

/* Makes room for need bytes in *buf (capacity *cap), doubling from 4 KiB. */
static void buf_reserve(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return;
  size_t n = *cap ? *cap : 4096;
  while (n < need) n *= 2;
  *buf = mc_realloc(*buf, n);
  *cap = n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
  struct mc_curl_resp *r = ud;
  size_t add = size * nmemb;
  if (add > r->max - r->len) return 0; /* makes curl fail with CURLE_WRITE_ERROR */
  buf_reserve(&r->body, &r->cap, r->len + add + 1);
  memcpy(r->body + r->len, data, add);
  r->len += add;
  r->body[r->len] = 0;
  return add;
}

static void set_common_opts(CURL *h, const char *url, long connect_timeout_ms, char *errbuf) {
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
}

static void set_method(CURL *h, const char *method, const char *body, size_t body_len) {
  if (body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  }
  if (!strcmp(method, "GET"))
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  else if (strcmp(method, "POST"))
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

/* The request's headers, set on h (freed by handle_done). */
static struct curl_slist *set_headers(CURL *h, const char *method, const char *url, const char *body,
                                      size_t body_len, const char *extra) {
  /* "Expect:" stops curl from waiting for 100-continue before large bodies. */
  struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  if (extra) hdrs = curl_slist_append(hdrs, extra);
  hdrs = curl_slist_append(hdrs, "Expect:");
  char auth[MC_AUTH_HTTP_HEADER_MAX]; /* a write to a server of ours is signed with the cluster secret (docs/security.md) */
  if (!mc_auth_http_header_for_url(method, url, body, body ? body_len : 0, auth, sizeof(auth)))
    hdrs = curl_slist_append(hdrs, auth);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  return hdrs;
}

/* Returns h to the pool; the pooled handle must not keep pointers to the caller's frame. */
static void handle_done(CURL *h, struct curl_slist *hdrs) {
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
  curl_slist_free_all(hdrs);
  handle_put(h);
}

int mc_curl_request_o(const char *method, const char *url, const char *body, size_t body_len,
                      const struct mc_curl_opts *o, struct mc_curl_resp *resp, char *err, size_t errlen) {
  memset(resp, 0, sizeof(*resp));
  resp->body = mc_calloc(1, 1);
  resp->max = o->max_body ? o->max_body : RESP_MAX;
  CURL *h = handle_get();
  if (!h) {
    snprintf(err, errlen, "curl_easy_init failed");
    return -1;
  }
  char errbuf[CURL_ERROR_SIZE] = "";
  set_common_opts(h, url, o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 1, errbuf);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 1);
  if (o->no_proxy) curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
  set_method(h, method, body, body_len);
  struct curl_slist *hdrs = set_headers(h, method, url, body, body_len, o->header);
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
  else
    snprintf(err, errlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
  handle_done(h, hdrs);
  return rc == CURLE_OK ? 0 : -1;
}

int mc_curl_request_t(const char *method, const char *url, const char *body, size_t body_len, long timeout_ms,
                      struct mc_curl_resp *resp, char *err, size_t errlen) {
  struct mc_curl_opts o = {.timeout_ms = timeout_ms, .connect_timeout_ms = timeout_ms / 2};
  return mc_curl_request_o(method, url, body, body_len, &o, resp, err, errlen);
}

int mc_curl_request(const char *method, const char *url, const char *body, size_t body_len,
                    struct mc_curl_resp *resp, char *err, size_t errlen) {
  return mc_curl_request_t(method, url, body, body_len, TOTAL_TIMEOUT_MS, resp, err, errlen);
}

/* ---- streamed answers, line by line ---- */

struct stream_ctx {
  CURL *h;
  struct mc_curl_stream *s;
  char *line; /* the line being assembled */
  size_t len, cap;
  int too_long;
  char head[STREAM_HEAD_MAX]; /* the start of a non-200 answer */
  size_t head_len;
};

/* Hands the assembled line to on_line (empty lines are skipped). Nonzero when it stopped the transfer. */
static int stream_line(struct stream_ctx *x) {
  size_t n = x->len;
  x->len = 0;
  if (n > 0 && x->line[n - 1] == '\r') n--;
  if (n == 0) return 0;
  x->line[n] = 0;
  return x->s->stopped = x->s->on_line(x->s->arg, x->line, n) != 0;
}

/* Appends [data, data+n) to the line; -1 when the line would exceed max_line. */
static int stream_append(struct stream_ctx *x, const char *data, size_t n) {
  if (n > x->s->max_line - x->len) return -1;
  buf_reserve(&x->line, &x->cap, x->len + n + 1);
  memcpy(x->line + x->len, data, n);
  x->len += n;
  return 0;
}

/* Keeps the first bytes of a non-200 answer; 0 (ends the transfer) once that is full. */
static size_t stream_head(struct stream_ctx *x, const char *data, size_t n) {
  size_t room = sizeof(x->head) - 1 - x->head_len, k = n < room ? n : room;
  memcpy(x->head + x->head_len, data, k);
  x->head_len += k;
  x->head[x->head_len] = 0;
  return k < n ? 0 : n;
}

static size_t on_stream(char *data, size_t size, size_t nmemb, void *ud) {
  struct stream_ctx *x = ud;
  size_t n = size * nmemb;
  if (!x->s->status) curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->s->status);
  if (x->s->status != 200) return stream_head(x, data, n);
  for (size_t off = 0; off < n;) {
    const char *nl = memchr(data + off, '\n', n - off);
    size_t k = nl ? (size_t)(nl - (data + off)) : n - off;
    if (stream_append(x, data + off, k)) {
      x->too_long = 1;
      return 0; /* makes curl fail with CURLE_WRITE_ERROR */
    }
    off += k + (nl ? 1 : 0);
    if (nl && stream_line(x)) return 0;
  }
  return n;
}

/* Drives the transfer with a multi handle: unlike curl_easy_perform, whose progress callback may run only
 * once a second on an idle connection, this checks should_stop every STREAM_POLL_MS. */
static CURLcode stream_run(CURL *h, struct mc_curl_stream *s) {
  CURLM *m = curl_multi_init();
  if (!m) return CURLE_OUT_OF_MEMORY;
  curl_multi_add_handle(m, h);
  CURLcode rc = CURLE_OK;
  int running = 1;
  while (running) {
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      rc = CURLE_FAILED_INIT;
      break;
    }
    if (running && s->should_stop && s->should_stop(s->arg)) {
      s->stopped = 1;
      break;
    }
    if (running) curl_multi_poll(m, NULL, 0, STREAM_POLL_MS, NULL);
  }
  int left;
  for (CURLMsg *msg; !running && (msg = curl_multi_info_read(m, &left));)
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  curl_multi_remove_handle(m, h);
  curl_multi_cleanup(m);
  return rc;
}

/* The outcome of a streamed transfer (see mc_curl_stream). */
static int stream_result(const struct stream_ctx *x, CURLcode rc, const char *errbuf, char *err, size_t errlen) {
  if (x->too_long) {
    snprintf(err, errlen, "a line of the answer is longer than %zu bytes", x->s->max_line);
    return -1;
  }
  if (x->s->status && x->s->status != 200) {
    snprintf(err, errlen, "HTTP %ld: %.200s", x->s->status, x->head);
    return 0;
  }
  if (x->s->stopped || rc == CURLE_OK) return 0;
  snprintf(err, errlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
  return -1;
}

int mc_curl_stream(const char *method, const char *url, const char *body, size_t body_len,
                   struct mc_curl_stream *s, char *err, size_t errlen) {
  s->status = 0;
  s->stopped = 0;
  CURL *h = handle_get();
  if (!h) {
    snprintf(err, errlen, "curl_easy_init failed");
    return -1;
  }
  struct stream_ctx x = {.h = h, .s = s};
  char errbuf[CURL_ERROR_SIZE] = "";
  set_common_opts(h, url, s->connect_timeout_ms > 0 ? s->connect_timeout_ms : CONNECT_TIMEOUT_MS, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  set_method(h, method, body, body_len);
  struct curl_slist *hdrs = set_headers(h, method, url, body, body_len, NULL);
  CURLcode rc = stream_run(h, s);
  if (!s->status) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->status);
  handle_done(h, hdrs);
  mc_free(x.line);
  return stream_result(&x, rc, errbuf, err, errlen);
}

void mc_curl_resp_free(struct mc_curl_resp *r) {
  mc_free(r->body);
  r->body = NULL;
  r->len = r->cap = 0;
}

char *mc_curl_escape(const char *s) {
  pthread_once(&global_once, global_init);
  /* (the handle is unused since libcurl 7.82). It fails only out of memory or past 8 MB of input, and
   * what is escaped here is a key, a name or a command-line argument: treated as out of memory. */
  char *esc = curl_easy_escape(NULL, s, 0);
  if (!esc) abort();
  char *out = mc_strdup(esc);
  curl_free(esc);
  return out;
}

/* ---- the HTTP backend ---- */

struct http_meta {
  struct mc_meta base;
  char *url; /* immutable after open */
};

/* Runs one request (with one more header unless NULL, on ?<arg>=<key>); returns the HTTP status, or -1
 * after logging a transport failure. */
static long http_call_h(struct mc_meta *m, const char *method, const char *arg, const char *key, const char *body,
                        const char *header, struct mc_curl_resp *resp) {
  struct http_meta *h = (struct http_meta *)m;
  char err[CURL_ERROR_SIZE + 64];
  char *esc = mc_curl_escape(key);
  size_t n = strlen(h->url) + strlen(arg) + strlen(esc) + 8;
  char *url = mc_malloc(n);
  snprintf(url, n, "%s%s%s=%s", h->url, strchr(h->url, '?') ? "&" : "?", arg, esc);
  mc_free(esc);
  struct mc_curl_opts o = {.timeout_ms = TOTAL_TIMEOUT_MS, .connect_timeout_ms = CONNECT_TIMEOUT_MS, .header = header};
  int rc = mc_curl_request_o(method, url, body, body ? strlen(body) : 0, &o, resp, err, sizeof(err));
  if (rc) LOG_ERROR("metadata %s %s failed: %s", method, url, err);
  mc_free(url);
  return rc ? -1 : resp->status;
}

static long http_call(struct mc_meta *m, const char *method, const char *key, const char *body,
                      struct mc_curl_resp *resp) {
  return http_call_h(m, method, "key", key, body, NULL, resp);
}

static void log_status(const char *method, const char *key, const struct mc_curl_resp *r) {
  LOG_ERROR("metadata %s key '%s': HTTP %ld: %.200s", method, key, r->status, r->body);
}

static int http_get(struct mc_meta *m, const char *key, char **value_out) {
  struct mc_curl_resp r;
  *value_out = NULL;
  long st = http_call(m, "GET", key, NULL, &r);
  int rc = ERR_METADATA;
  if (st == 200) {
    *value_out = r.body;
    r.body = NULL;
    rc = 0;
  } else if (st == 404) {
    rc = MC_META_NOT_FOUND;
  } else if (st > 0) {
    log_status("GET", key, &r);
  }
  mc_curl_resp_free(&r);
  return rc;
}

static int http_set(struct mc_meta *m, const char *key, const char *value) {
  struct mc_curl_resp r;
  long st = http_call(m, "PUT", key, value, &r);
  if (st > 0 && st != 200) log_status("PUT", key, &r);
  mc_curl_resp_free(&r);
  return st == 200 ? 0 : ERR_METADATA;
}

static int http_remove(struct mc_meta *m, const char *key) {
  struct mc_curl_resp r;
  long st = http_call(m, "DELETE", key, NULL, &r);
  if (st > 0 && st != 200 && st != 404) log_status("DELETE", key, &r);
  mc_curl_resp_free(&r);
  return st == 200 || st == 404 ? 0 : ERR_METADATA;
}

/* The HTTP metadata server has no TTLs (the master deletes a dead client's keys), but one that persists
 * nothing comes back empty after a restart. So the keys this process wrote are kept like etcd's and
 * Redis's (metadata.c): every MC_METADATA_TTL_S / 3 seconds each is looked up and, when the server
 * answers that it is gone, written again. */
static int http_set_bound(struct mc_meta *m, const char *key, const char *value, int ttl_s) {
  (void)ttl_s;
  return http_set(m, key, value);
}

static int http_keepalive(struct mc_meta *m, int ttl_s, char *const *keys, char *const *values, size_t n) {
  (void)ttl_s;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char *v = NULL;
    int g = http_get(m, keys[i], &v);
    mc_free(v);
    if (g == MC_META_NOT_FOUND) {
      LOG_WARN("metadata key '%s' is gone from %s (a server restarted without its persist file?); writing it again",
               keys[i], m->conn);
      if (http_set(m, keys[i], values[i])) rc = ERR_METADATA;
    } else if (g) {
      rc = ERR_METADATA;
    }
  }
  return rc;
}

/* ---- compare-and-swap: If-Match / If-None-Match on the value's revision (metadata_server.c) ---- */

static int http_get_rev(struct mc_meta *m, const char *key, char **value_out, uint64_t *rev) {
  int rc = http_get(m, key, value_out);
  if (!rc) *rev = mc_meta_value_rev(*value_out, strlen(*value_out));
  return rc;
}

static int http_cas(struct mc_meta *m, const char *key, const char *value, uint64_t rev, int *won) {
  char cond[64];
  if (rev)
    snprintf(cond, sizeof(cond), "If-Match: \"%016llx\"", (unsigned long long)rev);
  else if (value)
    snprintf(cond, sizeof(cond), "If-None-Match: *");
  else
    return *won = 0, 0; /* deleting a key that must not exist: nothing to do, and nothing was done */
  struct mc_curl_resp r;
  const char *method = value ? "PUT" : "DELETE";
  long st = http_call_h(m, method, "key", key, value, cond, &r);
  *won = st == 200;
  if (st > 0 && st != 200 && st != 412) log_status(method, key, &r);
  mc_curl_resp_free(&r);
  return st == 200 || st == 412 ? 0 : ERR_METADATA;
}

/* The answer of GET ?prefix=: {"<key>": "<value>", ...}, every member checked. */
static int http_list(struct mc_meta *m, const char *prefix, size_t max, char ***keys, char ***values, size_t *n) {
  struct mc_curl_resp r;
  long st = http_call_h(m, "GET", "prefix", prefix, NULL, NULL, &r);
  json_t *o = st == 200 ? json_loadb(r.body, r.len, 0, NULL) : NULL;
  int rc = json_is_object(o) ? 0 : ERR_METADATA;
  if (rc && st > 0) log_status("GET", prefix, &r);
  mc_curl_resp_free(&r);
  size_t cap = rc ? 0 : json_object_size(o) < max ? json_object_size(o) : max;
  *keys = mc_calloc(cap + 1, sizeof(char *));
  *values = mc_calloc(cap + 1, sizeof(char *));
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (*n >= cap) break;
    if (!json_is_string(v) || strncmp(k, prefix, strlen(prefix))) continue;
    (*keys)[*n] = mc_strdup(k);
    (*values)[(*n)++] = mc_strndup(json_string_value(v), json_string_length(v));
  }
  json_decref(o);
  return rc;
}

static void http_destroy(struct mc_meta *m) {
  struct http_meta *h = (struct http_meta *)m;
  mc_free(h->url);
  mc_free(h);
  mc_curl_unref();
}

static const struct mc_meta_ops http_ops = {
    .scheme = "http", .get = http_get, .set = http_set, .remove = http_remove, .destroy = http_destroy,
    .set_bound = http_set_bound, .keepalive = http_keepalive, .get_rev = http_get_rev, .cas = http_cas,
    .list = http_list};

int mc_meta_http_open(const char *url, struct mc_meta **out) {
  *out = NULL;
  const char *host = strstr(url, "://");
  if (!host || !host[3] || host[3] == '/' || host[3] == '?') {
    LOG_ERROR("metadata URL '%s' has no host", url);
    return ERR_METADATA;
  }
  struct http_meta *h = mc_calloc(1, sizeof(*h));
  h->base.ops = &http_ops;
  h->url = mc_strdup(url);
  mc_curl_ref();
  *out = &h->base;
  return 0;
}
