/* etcd v3 metadata backend over etcd's JSON gateway (POST /v3/kv/range|put|deleterange, keys and
 * values base64-encoded). Endpoints are tried in turn on connection failure, starting from the last one
 * that answered; each attempt is bounded by the shared 3 s / 1.5 s curl timeouts. */
#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "mooncake/transfer_engine.h"
#include "meta/metadata.h"
#include "meta/metadata_curl.h"

#define MAX_ENDPOINTS 64

struct etcd_meta {
  struct mc_meta base;
  char **eps; /* "http://h:p", immutable after open */
  int n_eps;
  pthread_mutex_t mu;
  int cur; /* endpoint to try first; guarded by mu */
  char lease[32]; /* the lease bound keys carry (decimal id), "" before the first grant; guarded by mu */
};

/* ---- base64 (RFC 4648, standard alphabet; padding optional on input) ---- */

static const char b64_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *in, size_t n) {
  char *out = mc_malloc((n + 2) / 3 * 4 + 1), *o = out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16;
    if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
    if (i + 2 < n) v |= in[i + 2];
    *o++ = b64_alpha[v >> 18 & 63];
    *o++ = b64_alpha[v >> 12 & 63];
    *o++ = i + 1 < n ? b64_alpha[v >> 6 & 63] : '=';
    *o++ = i + 2 < n ? b64_alpha[v & 63] : '=';
  }
  *o = 0;
  return out;
}

static int b64_value(char c) {
  const char *p = c ? strchr(b64_alpha, c) : NULL;
  return p ? (int)(p - b64_alpha) : -1;
}

/* Decodes n characters into a NUL-terminated buffer. Returns 0, or -1 on any invalid input. */
static int b64_decode(const char *in, size_t n, char **out, size_t *out_len) {
  if (n % 4 == 0 && n > 0 && in[n - 1] == '=') n--;
  if (n % 4 == 3 && in[n - 1] == '=') n--;
  if (n % 4 == 1) return -1;
  char *buf = mc_malloc(n / 4 * 3 + 3), *o = buf;
  uint32_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64_value(in[i]);
    if (v < 0) {
      mc_free(buf);
      return -1;
    }
    acc = acc << 6 | (uint32_t)v;
    if (i % 4 == 3) {
      *o++ = (char)(acc >> 16);
      *o++ = (char)(acc >> 8);
      *o++ = (char)acc;
    }
  }
  if (n % 4 == 2) *o++ = (char)(acc >> 4);
  if (n % 4 == 3) {
    *o++ = (char)(acc >> 10);
    *o++ = (char)(acc >> 2);
  }
  *o = 0;
  *out_len = (size_t)(o - buf);
  *out = buf;
  return 0;
}

/* ---- requests ---- */

static json_t *b64_json(const char *s) {
  char *enc = b64_encode((const unsigned char *)s, strlen(s));
  json_t *j = json_string(enc);
  mc_free(enc);
  return j;
}

/* One attempt against endpoint idx. 0 when it answered with a status below 500 (a member without
 * a leader answers 503: another member may do better). */
static int post_one(struct etcd_meta *e, int idx, const char *path, const char *body,
                    struct mc_curl_resp *resp) {
  char err[512];
  size_t ulen = strlen(e->eps[idx]) + strlen(path) + 1;
  char *url = mc_malloc(ulen);
  snprintf(url, ulen, "%s%s", e->eps[idx], path);
  int rc = mc_curl_request("POST", url, body, strlen(body), resp, err, sizeof(err));
  mc_free(url);
  if (rc) LOG_WARN("etcd endpoint %s: %s", e->eps[idx], err);
  if (!rc && resp->status >= 500)
    LOG_WARN("etcd endpoint %s: HTTP %ld: %.200s", e->eps[idx], resp->status, resp->body);
  return rc || resp->status >= 500 ? -1 : 0;
}

/* POSTs req to path, trying the endpoints in turn from the last good one. Returns 0 with the answer in
 * resp (the last one when every endpoint failed at HTTP level), or -1 (logged) when none answered. */
static int etcd_post(struct etcd_meta *e, const char *path, const json_t *req, struct mc_curl_resp *resp) {
  memset(resp, 0, sizeof(*resp));
  char *body = json_dumps(req, JSON_COMPACT);
  if (!body) {
    LOG_ERROR("etcd %s: cannot encode the request", path);
    return -1;
  }
  pthread_mutex_lock(&e->mu);
  int start = e->cur;
  pthread_mutex_unlock(&e->mu);
  int rc = -1;
  for (int i = 0; i < e->n_eps && rc; i++) {
    int idx = (start + i) % e->n_eps;
    if (i > 0) mc_curl_resp_free(resp);
    rc = post_one(e, idx, path, body, resp);
    if (rc) continue;
    pthread_mutex_lock(&e->mu);
    e->cur = idx;
    pthread_mutex_unlock(&e->mu);
  }
  free(body);
  if (rc && resp->status) return 0; /* reported by the caller as an HTTP error */
  if (rc) LOG_ERROR("no etcd endpoint of '%s' answered %s", e->base.conn ? e->base.conn : "", path);
  return rc;
}

/* Runs one call (taking req) and parses its 200 JSON answer. Returns the object (new reference) or NULL
 * (logged). */
static json_t *etcd_call(struct etcd_meta *e, const char *path, json_t *req, const char *key) {
  struct mc_curl_resp r;
  json_t *ans = NULL;
  int rc = etcd_post(e, path, req, &r);
  json_decref(req);
  if (!rc && r.status != 200) LOG_ERROR("etcd %s key '%s': HTTP %ld: %.200s", path, key, r.status, r.body);
  if (!rc && r.status == 200) {
    json_error_t jerr;
    ans = json_loadb(r.body, r.len, 0, &jerr);
    if (!json_is_object(ans)) {
      LOG_ERROR("etcd %s key '%s': malformed answer: %s", path, key, jerr.text);
      json_decref(ans);
      ans = NULL;
    }
  }
  mc_curl_resp_free(&r);
  return ans;
}

/* Extracts kvs[0].value from a range answer: 0 and the value, MC_META_NOT_FOUND, or ERR_METADATA. */
static int range_value(json_t *ans, const char *key, char **value_out) {
  json_t *kvs = json_object_get(ans, "kvs");
  if (!json_is_array(kvs) || json_array_size(kvs) == 0) return MC_META_NOT_FOUND;
  json_t *v = json_object_get(json_array_get(kvs, 0), "value");
  if (!v) {
    *value_out = mc_strdup(""); /* the gateway omits empty values */
    return 0;
  }
  size_t len;
  if (!json_is_string(v) || b64_decode(json_string_value(v), json_string_length(v), value_out, &len)) {
    LOG_ERROR("etcd value of key '%s' is not valid base64", key);
    return ERR_METADATA;
  }
  return 0;
}

static int etcd_get(struct mc_meta *m, const char *key, char **value_out) {
  *value_out = NULL;
  json_t *ans =
      etcd_call((struct etcd_meta *)m, "/v3/kv/range", json_pack("{s:o}", "key", b64_json(key)), key);
  if (!ans) return ERR_METADATA;
  int rc = range_value(ans, key, value_out);
  json_decref(ans);
  return rc;
}

static int etcd_set(struct mc_meta *m, const char *key, const char *value) {
  json_t *req = json_pack("{s:o, s:o}", "key", b64_json(key), "value", b64_json(value));
  json_t *ans = etcd_call((struct etcd_meta *)m, "/v3/kv/put", req, key);
  int rc = ans ? 0 : ERR_METADATA;
  json_decref(ans);
  return rc;
}

static int etcd_remove(struct mc_meta *m, const char *key) {
  json_t *req = json_pack("{s:o}", "key", b64_json(key));
  json_t *ans = etcd_call((struct etcd_meta *)m, "/v3/kv/deleterange", req, key);
  int rc = ans ? 0 : ERR_METADATA;
  json_decref(ans);
  return rc;
}

/* ---- keys bound to a lease (mc_meta_set on etcd) ---- */

/* Reads an int64 field that the gateway renders as a string (or a number). 0 when absent. */
static long long int64_field(json_t *o, const char *name) {
  json_t *v = json_object_get(o, name);
  if (json_is_string(v)) return strtoll(json_string_value(v), NULL, 10);
  return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

/* Grants a fresh lease of ttl_s seconds into e->lease. 0 or ERR_METADATA. */
static int grant_lease(struct etcd_meta *e, int ttl_s) {
  json_t *ans = etcd_call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), "(lease)");
  long long id = ans ? int64_field(ans, "ID") : 0;
  json_decref(ans);
  if (!id) return ERR_METADATA;
  pthread_mutex_lock(&e->mu);
  snprintf(e->lease, sizeof(e->lease), "%lld", id);
  pthread_mutex_unlock(&e->mu);
  return 0;
}

static int put_leased(struct etcd_meta *e, const char *key, const char *value) {
  char lease[32];
  pthread_mutex_lock(&e->mu);
  memcpy(lease, e->lease, sizeof(lease));
  pthread_mutex_unlock(&e->mu);
  json_t *req = json_pack("{s:o, s:o, s:s}", "key", b64_json(key), "value", b64_json(value), "lease", lease);
  json_t *ans = etcd_call(e, "/v3/kv/put", req, key);
  int rc = ans ? 0 : ERR_METADATA;
  json_decref(ans);
  return rc;
}

static int etcd_set_bound(struct mc_meta *m, const char *key, const char *value, int ttl_s) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  pthread_mutex_lock(&e->mu);
  int have = e->lease[0] != 0;
  pthread_mutex_unlock(&e->mu);
  if (!have && grant_lease(e, ttl_s)) return ERR_METADATA;
  if (!put_leased(e, key, value)) return 0;
  /* the lease may have expired meanwhile (a partition longer than the TTL): one fresh lease */
  return grant_lease(e, ttl_s) ? ERR_METADATA : put_leased(e, key, value);
}

static int etcd_keepalive(struct mc_meta *m, int ttl_s, char *const *keys, char *const *values, size_t n) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  char lease[32];
  pthread_mutex_lock(&e->mu);
  memcpy(lease, e->lease, sizeof(lease));
  pthread_mutex_unlock(&e->mu);
  json_t *ans = lease[0] ? etcd_call(e, "/v3/lease/keepalive", json_pack("{s:s}", "ID", lease), "(lease)") : NULL;
  if (lease[0] && !ans) return ERR_METADATA; /* etcd unreachable: try again next period */
  json_t *res = json_object_get(ans, "result");
  long long ttl = int64_field(res ? res : ans, "TTL");
  json_decref(ans);
  if (ttl > 0) return 0;
  /* The lease is gone (it expired while we could not renew it): its keys went with it. */
  LOG_WARN("etcd lease %s of %s expired; writing its %zu key(s) again under a new lease", lease[0] ? lease : "-",
           m->conn, n);
  if (grant_lease(e, ttl_s)) return ERR_METADATA;
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    if (put_leased(e, keys[i], values[i])) rc = ERR_METADATA;
  return rc;
}

static void etcd_destroy(struct mc_meta *m) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  for (int i = 0; i < e->n_eps; i++) mc_free(e->eps[i]);
  mc_free(e->eps);
  pthread_mutex_destroy(&e->mu);
  mc_free(e);
  mc_curl_unref();
}

static const struct mc_meta_ops etcd_ops = {.scheme = "etcd",
                                           .get = etcd_get,
                                           .set = etcd_set,
                                           .remove = etcd_remove,
                                           .destroy = etcd_destroy,
                                           .set_bound = etcd_set_bound,
                                           .keepalive = etcd_keepalive};

/* ---- endpoint list ---- */

/* Adds the trimmed endpoint [s, s+n) unless it is blank; a bare host:port gets "http://". */
static void add_endpoint(struct etcd_meta *e, const char *s, size_t n) {
  while (n > 0 && isspace((unsigned char)*s)) s++, n--;
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  while (n > 0 && s[n - 1] == '/') n--;
  if (n == 0) return;
  if (e->n_eps >= MAX_ENDPOINTS) {
    LOG_WARN("more than %d etcd endpoints; ignoring '%.*s'", MAX_ENDPOINTS, (int)n, s);
    return;
  }
  char *ep = mc_strndup(s, n);
  if (!strstr(ep, "://")) {
    char *full = mc_malloc(n + 8);
    snprintf(full, n + 8, "http://%s", ep);
    mc_free(ep);
    ep = full;
  }
  e->eps[e->n_eps++] = ep;
}

static void parse_endpoints(struct etcd_meta *e, const char *list) {
  e->eps = mc_calloc(MAX_ENDPOINTS, sizeof(char *));
  for (const char *p = list;;) {
    size_t n = strcspn(p, ",;");
    add_endpoint(e, p, n);
    if (!p[n]) break;
    p += n + 1;
  }
}

int mc_meta_etcd_open(const char *endpoints, struct mc_meta **out) {
  *out = NULL;
  struct etcd_meta *e = mc_calloc(1, sizeof(*e));
  e->base.ops = &etcd_ops;
  parse_endpoints(e, endpoints);
  if (e->n_eps == 0) {
    LOG_ERROR("etcd endpoint list '%s' is empty", endpoints);
    mc_free(e->eps);
    mc_free(e);
    return ERR_METADATA;
  }
  pthread_mutex_init(&e->mu, NULL);
  mc_curl_ref();
  *out = &e->base;
  return 0;
}
