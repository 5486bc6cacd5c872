/* HTTP metadata backend (GET/PUT/DELETE <url>?key=<escaped key>, only 200 is success; docs/transfer-engine.md)
 * and the libcurl plumbing it shares with the etcd backend (metadata_curl.h). Every request is bounded
 * by a 3 s total / 1.5 s connect timeout; nothing here may block forever or raise signals. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
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

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
  struct mc_curl_resp *r = ud;
  size_t add = size * nmemb;
  if (add > RESP_MAX - r->len) return 0; /* makes curl fail with CURLE_WRITE_ERROR */
  if (r->len + add + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 4096;
    while (cap < r->len + add + 1) cap *= 2;
    r->body = mc_realloc(r->body, cap);
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, add);
  r->len += add;
  r->body[r->len] = 0;
  return add;
}

static void set_common_opts(CURL *h, const char *url, struct mc_curl_resp *resp, char *errbuf) {
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, TOTAL_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
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

int mc_curl_request(const char *method, const char *url, const char *body, size_t body_len,
                    struct mc_curl_resp *resp, char *err, size_t errlen) {
  memset(resp, 0, sizeof(*resp));
  resp->body = mc_calloc(1, 1);
  CURL *h = handle_get();
  if (!h) {
    snprintf(err, errlen, "curl_easy_init failed");
    return -1;
  }
  char errbuf[CURL_ERROR_SIZE] = "";
  /* "Expect:" stops curl from waiting for 100-continue before large bodies. */
  struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  hdrs = curl_slist_append(hdrs, "Expect:");
  char auth[MC_AUTH_HTTP_HEADER_MAX]; /* a write to a server of ours is signed with the cluster secret (docs/security.md) */
  if (!mc_auth_http_header_for_url(method, url, body, body ? body_len : 0, auth, sizeof(auth)))
    hdrs = curl_slist_append(hdrs, auth);
  set_common_opts(h, url, resp, errbuf);
  set_method(h, method, body, body_len);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
  else
    snprintf(err, errlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
  /* The pooled handle must not keep pointers to this frame. */
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
  curl_slist_free_all(hdrs);
  handle_put(h);
  return rc == CURLE_OK ? 0 : -1;
}

void mc_curl_resp_free(struct mc_curl_resp *r) {
  mc_free(r->body);
  r->body = NULL;
  r->len = r->cap = 0;
}

static int unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

char *mc_curl_escape(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(s);
  char *out = mc_malloc(3 * n + 1), *o = out;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (unreserved(*p)) {
      *o++ = (char)*p;
      continue;
    }
    *o++ = '%';
    *o++ = hex[*p >> 4];
    *o++ = hex[*p & 15];
  }
  *o = 0;
  return out;
}

/* ---- the HTTP backend ---- */

struct http_meta {
  struct mc_meta base;
  char *url; /* immutable after open */
};

static char *key_url(const struct http_meta *h, const char *key) {
  char *esc = mc_curl_escape(key);
  size_t n = strlen(h->url) + strlen(esc) + 8;
  char *url = mc_malloc(n);
  snprintf(url, n, "%s%skey=%s", h->url, strchr(h->url, '?') ? "&" : "?", esc);
  mc_free(esc);
  return url;
}

/* Runs one request; returns the HTTP status, or -1 after logging a transport failure. */
static long http_call(struct mc_meta *m, const char *method, const char *key, const char *body,
                      struct mc_curl_resp *resp) {
  struct http_meta *h = (struct http_meta *)m;
  char err[CURL_ERROR_SIZE + 64];
  char *url = key_url(h, key);
  int rc = mc_curl_request(method, url, body, body ? strlen(body) : 0, resp, err, sizeof(err));
  if (rc) LOG_ERROR("metadata %s %s failed: %s", method, url, err);
  mc_free(url);
  return rc ? -1 : resp->status;
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

static void http_destroy(struct mc_meta *m) {
  struct http_meta *h = (struct http_meta *)m;
  mc_free(h->url);
  mc_free(h);
  mc_curl_unref();
}

static const struct mc_meta_ops http_ops = {
    .scheme = "http", .get = http_get, .set = http_set, .remove = http_remove, .destroy = http_destroy,
    .set_bound = http_set_bound, .keepalive = http_keepalive};

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
