/* A small libcurl client for black-box tests of HTTP endpoints: one request, the status, Content-Type
 * and body (NUL-terminated) back, bounded by a timeout. Plus a JSON-number lookup in a Prometheus text
 * exposition. */
#ifndef MC_TEST_HTTP_H
#define MC_TEST_HTTP_H
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct th_resp {
  long status; /* 0 when the request failed */
  char ctype[128];
  char *body;
  size_t len;
};

static size_t th_write_(char *p, size_t sz, size_t n, void *ud) {
  struct th_resp *r = ud;
  size_t k = sz * n;
  char *b = realloc(r->body, r->len + k + 1);
  if (!b) return 0;
  memcpy(b + r->len, p, k);
  r->body = b;
  r->len += k;
  r->body[r->len] = 0;
  return k;
}

/* method "GET" / "POST" / ...; body may be NULL. Returns r->status (0 on a transport failure). */
static inline long th_request(const char *method, const char *url, const char *body, struct th_resp *r) {
  memset(r, 0, sizeof(*r));
  r->body = calloc(1, 1);
  CURL *c = curl_easy_init();
  if (!c) return 0;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  else if (!strcmp(method, "POST")) curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, th_write_);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (curl_easy_perform(c) == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(r->ctype, sizeof(r->ctype), "%s", ct ? ct : "");
  }
  curl_easy_cleanup(c);
  return r->status;
}

static inline void th_free(struct th_resp *r) {
  free(r->body);
  r->body = NULL;
}

/* GET http://127.0.0.1:<port><path>. */
static inline long th_get(int port, const char *path, struct th_resp *r) {
  char url[4096];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  return th_request("GET", url, NULL, r);
}

static inline long th_post(int port, const char *path, const char *body, struct th_resp *r) {
  char url[4096];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  return th_request("POST", url, body, r);
}

/* The value of the unlabelled sample `name` in a Prometheus text exposition, or NAN. */
static inline double th_prom_value(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, name, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
  return NAN;
}

#endif
