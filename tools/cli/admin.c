/* Admin-port HTTP client and Prometheus text reader for the operator tools (see admin.h). */
#include "admin.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"

struct sink {
  char *buf;
  size_t len, cap;
};

static size_t sink_write(char *data, size_t size, size_t n, void *arg) {
  struct sink *s = arg;
  size_t add = size * n;
  if (s->len + add + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + add + 1) cap *= 2;
    char *nb = realloc(s->buf, cap);
    if (!nb) return 0; /* curl reports a write error */
    s->buf = nb;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, data, add);
  s->len += add;
  s->buf[s->len] = 0;
  return add;
}

int mc_admin_request(const char *addr, const char *method, const char *path, long timeout_ms,
                     struct mc_admin_resp *r) {
  memset(r, 0, sizeof(*r));
  struct sink s = {0};
  char *url = malloc(strlen(addr) + strlen(path) + 16);
  if (!url) {
    snprintf(r->err, sizeof(r->err), "out of memory");
    return -1;
  }
  sprintf(url, "http://%s%s", addr, path);
  CURL *c = curl_easy_init();
  CURLcode rc = CURLE_FAILED_INIT;
  if (c) {
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "POST")) curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    char auth[MC_AUTH_HTTP_HEADER_MAX]; /* a mutating request is signed with the cluster secret (docs/security.md) */
    struct curl_slist *hdrs = NULL;
    if (!mc_auth_http_header_for_url(method, url, "", 0, auth, sizeof(auth))) hdrs = curl_slist_append(NULL, auth);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 3000 ? timeout_ms : 3000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
  }
  free(url);
  if (rc != CURLE_OK) {
    snprintf(r->err, sizeof(r->err), "%s", curl_easy_strerror(rc));
    free(s.buf);
    return -1;
  }
  r->body = s.buf ? s.buf : calloc(1, 1);
  r->len = s.len;
  return 0;
}

void mc_admin_resp_free(struct mc_admin_resp *r) {
  free(r->body);
  r->body = NULL;
  r->len = 0;
}

char *mc_admin_escape(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  char *out = malloc(strlen(s) * 3 + 1), *p = out;
  if (!out) return NULL;
  for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
    if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || strchr("-_.~", *q)) {
      *p++ = (char)*q;
    } else {
      *p++ = '%';
      *p++ = hex[*q >> 4];
      *p++ = hex[*q & 15];
    }
  }
  *p = 0;
  return out;
}

/* Walks the samples named `name`; calls back with each value. Returns how many were found. */
static int prom_each(const char *text, const char *name, void (*fn)(double, void *), void *arg) {
  size_t nlen = strlen(name);
  int found = 0;
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    if (*line != '#' && !strncmp(line, name, nlen) && (line[nlen] == ' ' || line[nlen] == '{')) {
      const char *v = line + nlen;
      if (*v == '{') { /* label values may hold '}' inside quotes */
        int q = 0;
        for (v++; *v && *v != '\n' && (q || *v != '}'); v++) {
          if (*v == '\\' && q && v[1]) v++;
          else if (*v == '"') q = !q;
        }
        if (*v == '}') v++;
      }
      char *e;
      double d = strtod(v, &e);
      if (e != v) {
        fn(d, arg);
        found++;
      }
    }
    line = end ? end + 1 : NULL;
  }
  return found;
}

static void take_first(double d, void *arg) {
  double *p = arg;
  if (isnan(p[1])) p[0] = d, p[1] = 1;
}

static void add_up(double d, void *arg) { *(double *)arg += d; }

int mc_prom_value(const char *text, const char *name, double *out) {
  double st[2] = {0, NAN};
  if (!text || !prom_each(text, name, take_first, st)) return -1;
  *out = st[0];
  return 0;
}

int mc_prom_sum(const char *text, const char *name, double *out) {
  double sum = 0;
  if (!text || !prom_each(text, name, add_up, &sum)) return -1;
  *out = sum;
  return 0;
}

char **mc_ops_underscore_flags(int argc, char **argv) {
  char **copy = calloc((size_t)argc + 1, sizeof(char *));
  if (!copy) return NULL;
  for (int i = 0; i < argc; i++) {
    copy[i] = strdup(argv[i]);
    if (!copy[i]) {
      mc_ops_free_argv(i, copy);
      return NULL;
    }
    if (i == 0 || copy[i][0] != '-') continue;
    char *p = copy[i] + strspn(copy[i], "-");
    for (; *p && *p != '='; p++)
      if (*p == '-') *p = '_';
  }
  return copy;
}

void mc_ops_free_argv(int argc, char **argv) {
  for (int i = 0; argv && i < argc; i++) free(argv[i]);
  free(argv);
}

void mc_ops_admin_from_master(const char *master, char *out, size_t len) {
  const char *colon = strrchr(master, ':'), *bracket = strrchr(master, ']');
  size_t hlen = colon && (!bracket || colon > bracket) ? (size_t)(colon - master) : strlen(master);
  if (!hlen) snprintf(out, len, "127.0.0.1:9003");
  else snprintf(out, len, "%.*s:9003", (int)hlen, master);
}
