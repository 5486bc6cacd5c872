/* Admin-port HTTP client (over the shared libcurl wrapper, meta/metadata_curl.h) and Prometheus text
 * reader for the operator tools (see admin.h). */
#include "admin.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/hostport.h"
#include "meta/metadata_curl.h"

/* The admin answers' cap: a snapshot of a large table (mooncake snapshot save) is the largest. */
#define ADMIN_BODY_MAX ((size_t)8 << 30)
#define ADMIN_CONNECT_MAX_MS 3000L

int mc_admin_request(const char *addr, const char *method, const char *path, long timeout_ms,
                     struct mc_admin_resp *r) {
  memset(r, 0, sizeof(*r));
  size_t n = strlen(addr) + strlen(path) + 16;
  char *url = mc_malloc(n);
  snprintf(url, n, "http://%s%s", addr, path);
  struct mc_curl_opts o = {.timeout_ms = timeout_ms,
                           .connect_timeout_ms = timeout_ms < ADMIN_CONNECT_MAX_MS ? timeout_ms : ADMIN_CONNECT_MAX_MS,
                           .max_body = ADMIN_BODY_MAX,
                           .no_proxy = 1};
  struct mc_curl_resp resp;
  /* a POST carries an empty body (signed as such when a cluster secret is set, docs/security.md) */
  int rc = mc_curl_request_o(method, url, strcmp(method, "POST") ? NULL : "", 0, &o, &resp, r->err, sizeof(r->err));
  mc_free(url);
  if (rc) {
    mc_curl_resp_free(&resp);
    return -1;
  }
  r->status = resp.status;
  r->body = resp.body; /* taken over: freed by mc_admin_resp_free */
  r->len = resp.len;
  return 0;
}

void mc_admin_resp_free(struct mc_admin_resp *r) {
  mc_free(r->body);
  r->body = NULL;
  r->len = 0;
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

int mc_ops_admin_from_master(const char *master, char *out, size_t len) {
  char host[256];
  uint16_t port;
  if (!*master) return snprintf(out, len, "127.0.0.1:9003"), 0;
  if (mc_split_host_port(master, host, sizeof(host), &port, 50051)) return -1;
  mc_join_host_port(host, 9003, out, len);
  return 0;
}
