/* The etcd v3 client over etcd's JSON gateway (etcd.h): the endpoint list, base64, one POST tried on
 * the endpoints in turn, and the calls built on it (range / put / deleterange, the create-if-absent and
 * delete-if-unchanged transactions, leases) and the watch stream. The election's uses are described in
 * docs/ha.md, "Election and failover". Everything etcd sends is checked before it is used: int64 fields
 * (decimal strings) are parsed strictly, values must be valid base64, every member must have its type. */
#include "meta/etcd.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/metadata_curl.h"
#include "mooncake/transfer_engine.h"

#define MAX_ENDPOINTS 64
#define DEFAULT_TIMEOUT_MS 3000
#define RETRY_PAUSE_MS 50 /* before another pass over members that answered 5xx */
#define WATCH_LINE_MAX (1u << 20) /* one watch message; etcd's own limit on a value is 1.5 MiB by default,
                                     but the keys watched here hold short values */

struct mc_etcd {
  char **eps; /* "http://h:p", immutable after open */
  int n_eps;
  char *list; /* the endpoints joined by ',' (mc_etcd_endpoints) */
  pthread_mutex_t mu;
  int cur;                /* endpoint to try first; guarded by mu */
  _Atomic int timeout_ms; /* per attempt */
};

/* ---- base64 (RFC 4648, standard alphabet; padding optional on input): OpenSSL's EVP_EncodeBlock and
 * EVP_DecodeBlock, which take an int length, so both work B64_CHUNK bytes (4 * B64_CHUNK / 3 characters)
 * at a time ---- */

static const char b64_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
#define B64_CHUNK ((size_t)3 << 20) /* a multiple of 3: no padding inside the output */

static char *b64_encode(const unsigned char *in, size_t n) {
  char *out = mc_malloc((n + 2) / 3 * 4 + 1), *o = out;
  *o = 0;
  for (size_t i = 0; i < n; i += B64_CHUNK)
    o += EVP_EncodeBlock((unsigned char *)o, in + i, (int)(n - i < B64_CHUNK ? n - i : B64_CHUNK));
  return out;
}

/* Decodes n characters into a NUL-terminated buffer. Returns 0, or -1 on any invalid input. in is a JSON
 * string's value (in[n] is its NUL or a '='). What is accepted is decided here, not by EVP_DecodeBlock
 * (which skips blanks at either end and reads a '=' anywhere as zero bits): every character of the
 * alphabet, then none, one or two '=' completing the last group of four. An unpadded last group gets its
 * '=' here, and of its decoded 3 bytes the padding's are dropped. */
static int b64_decode(const char *in, size_t n, char **out, size_t *out_len) {
  if (n % 4 == 0 && n > 0 && in[n - 1] == '=') n--;
  if (n % 4 == 3 && in[n - 1] == '=') n--;
  if (n % 4 == 1 || strspn(in, b64_alpha) < n) return -1;
  size_t whole = n - n % 4, step = B64_CHUNK / 3 * 4;
  char *buf = mc_malloc(n / 4 * 3 + 3), *o = buf;
  for (size_t i = 0; i < whole; i += step)
    o += EVP_DecodeBlock((unsigned char *)o, (const unsigned char *)in + i, (int)(whole - i < step ? whole - i : step));
  if (n % 4) {
    unsigned char last[4] = {'=', '=', '=', '='}, bytes[3];
    memcpy(last, in + whole, n % 4);
    EVP_DecodeBlock(bytes, last, 4);
    memcpy(o, bytes, n % 4 - 1);
    o += n % 4 - 1;
  }
  *o = 0;
  *out_len = (size_t)(o - buf);
  *out = buf;
  return 0;
}

static json_t *b64_json(const char *s, size_t n) {
  char *enc = b64_encode((const unsigned char *)s, n);
  json_t *j = json_string(enc);
  mc_free(enc);
  return j;
}

/* An int64 as the gateway wants it: a decimal string. */
static json_t *int64_json(int64_t v) { return json_sprintf("%" PRId64, v); }

/* ---- endpoint list ---- */

/* Adds the trimmed endpoint [s, s+n) unless it is blank; "etcd://" is dropped, a bare host:port gets
 * "http://". */
static void add_endpoint(struct mc_etcd *c, const char *s, size_t n) {
  while (n > 0 && isspace((unsigned char)*s)) s++, n--;
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  while (n > 0 && s[n - 1] == '/') n--;
  if (n >= 7 && !strncasecmp(s, "etcd://", 7)) s += 7, n -= 7;
  if (n == 0) return;
  if (c->n_eps >= MAX_ENDPOINTS) {
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
  c->eps[c->n_eps++] = ep;
}

static void parse_endpoints(struct mc_etcd *c, const char *list) {
  c->eps = mc_calloc(MAX_ENDPOINTS, sizeof(char *));
  for (const char *p = list;;) {
    size_t n = strcspn(p, ",;");
    add_endpoint(c, p, n);
    if (!p[n]) break;
    p += n + 1;
  }
}

static char *join_endpoints(const struct mc_etcd *c) {
  size_t n = 1;
  for (int i = 0; i < c->n_eps; i++) n += strlen(c->eps[i]) + 1;
  char *s = mc_calloc(1, n);
  for (int i = 0; i < c->n_eps; i++) {
    if (i) strcat(s, ",");
    strcat(s, c->eps[i]);
  }
  return s;
}

int mc_etcd_open(const char *endpoints, struct mc_etcd **out) {
  *out = NULL;
  struct mc_etcd *c = mc_calloc(1, sizeof(*c));
  parse_endpoints(c, endpoints ? endpoints : "");
  if (c->n_eps == 0) {
    LOG_ERROR("etcd endpoint list '%s' is empty", endpoints ? endpoints : "");
    mc_free(c->eps);
    mc_free(c);
    return ERR_METADATA;
  }
  c->list = join_endpoints(c);
  c->timeout_ms = DEFAULT_TIMEOUT_MS;
  pthread_mutex_init(&c->mu, NULL);
  mc_curl_ref();
  *out = c;
  return 0;
}

void mc_etcd_close(struct mc_etcd *c) {
  if (!c) return;
  for (int i = 0; i < c->n_eps; i++) mc_free(c->eps[i]);
  mc_free(c->eps);
  mc_free(c->list);
  pthread_mutex_destroy(&c->mu);
  mc_free(c);
  mc_curl_unref();
}

void mc_etcd_set_timeout(struct mc_etcd *c, int timeout_ms) { c->timeout_ms = timeout_ms > 0 ? timeout_ms : 1; }

const char *mc_etcd_endpoints(const struct mc_etcd *c) { return c->list; }

static int current_endpoint(struct mc_etcd *c) {
  pthread_mutex_lock(&c->mu);
  int idx = c->cur;
  pthread_mutex_unlock(&c->mu);
  return idx;
}

const char *mc_etcd_current(struct mc_etcd *c) { return c->eps[current_endpoint(c)]; }

/* Makes idx the endpoint to try first; with failed, the one after it (unless another thread moved on). */
static void note_endpoint(struct mc_etcd *c, int idx, int failed) {
  pthread_mutex_lock(&c->mu);
  if (!failed)
    c->cur = idx;
  else if (c->cur == idx)
    c->cur = (idx + 1) % c->n_eps;
  pthread_mutex_unlock(&c->mu);
}

static char *endpoint_url(const struct mc_etcd *c, int idx, const char *path) {
  size_t ulen = strlen(c->eps[idx]) + strlen(path) + 1;
  char *url = mc_malloc(ulen);
  snprintf(url, ulen, "%s%s", c->eps[idx], path);
  return url;
}

/* ---- one call, tried on the endpoints in turn ---- */

/* One attempt against endpoint idx, bounded by timeout_ms. 0 when it answered with a status below 500
 * (a member without a leader answers 503: another member may do better). */
static int post_one(struct mc_etcd *c, int idx, const char *path, const char *body, long timeout_ms,
                    struct mc_curl_resp *resp) {
  char err[512];
  char *url = endpoint_url(c, idx, path);
  int rc = mc_curl_request_t("POST", url, body, strlen(body), timeout_ms, resp, err, sizeof(err));
  mc_free(url);
  if (rc) LOG_WARN("etcd endpoint %s: %s", c->eps[idx], err);
  if (!rc && resp->status >= 500)
    LOG_WARN("etcd endpoint %s: HTTP %ld: %.200s", c->eps[idx], resp->status, resp->body);
  return rc || resp->status >= 500 ? -1 : 0;
}

/* Whether another pass over the endpoints fits before deadline (after RETRY_PAUSE_MS, slept here). */
static int another_pass(uint64_t deadline) {
  if (mc_now_ms() + RETRY_PAUSE_MS + 1 >= deadline) return 0;
  struct timespec ts = {0, RETRY_PAUSE_MS * 1000000L};
  nanosleep(&ts, NULL);
  return 1;
}

/* POSTs req to path, trying the endpoints in turn from the last good one. A pass in which a member
 * answered 5xx (up, but without a leader: an election is under way, which takes a few election
 * timeouts) is followed by another while the call's budget, n_eps x the timeout, lasts; a pass of
 * refused or silent endpoints is not. Returns 0 with the answer in resp (the last one when every
 * endpoint failed at HTTP level), or -1 (logged) when none answered. */
static int etcd_post(struct mc_etcd *c, const char *path, const json_t *req, struct mc_curl_resp *resp) {
  memset(resp, 0, sizeof(*resp));
  char *body = json_dumps(req, JSON_COMPACT);
  if (!body) {
    LOG_ERROR("etcd %s: cannot encode the request", path);
    return -1;
  }
  int start = current_endpoint(c), rc = -1, timeout = c->timeout_ms, busy = 0;
  uint64_t deadline = mc_now_ms() + (uint64_t)timeout * (uint64_t)c->n_eps;
  for (int i = 0; rc; i++) {
    if (i > 0 && i % c->n_eps == 0 && !(busy && another_pass(deadline))) break;
    if (i % c->n_eps == 0) busy = 0;
    int idx = (start + i) % c->n_eps;
    uint64_t now = mc_now_ms();
    long left = deadline > now ? (long)(deadline - now) : 1;
    if (i > 0) mc_curl_resp_free(resp);
    rc = post_one(c, idx, path, body, left < timeout ? left : timeout, resp);
    if (!rc) note_endpoint(c, idx, 0);
    if (rc && resp->status >= 500) busy = 1;
  }
  free(body);
  if (rc && resp->status) return 0; /* reported by the caller as an HTTP error */
  if (rc) LOG_ERROR("no etcd endpoint of '%s' answered %s", c->list, path);
  return rc;
}

static int malformed(const char *path, const char *what, const char *why) {
  LOG_ERROR("etcd %s key '%s': malformed answer: %s", path, what, why);
  return ERR_METADATA;
}

#define CALL_404_OK 1 /* a 404 (gRPC NotFound: no such lease) is MC_ETCD_NOT_FOUND, not an error */

/* Runs one call (taking req) and parses its 200 JSON answer into *ans (caller decrefs). 0,
 * MC_ETCD_NOT_FOUND (a 404 with CALL_404_OK), or ERR_METADATA (logged). what names the key in messages. */
static int etcd_call(struct mc_etcd *c, const char *path, json_t *req, const char *what, int flags, json_t **ans) {
  struct mc_curl_resp r = {0};
  *ans = NULL;
  int rc = req ? etcd_post(c, path, req, &r) : -1;
  json_decref(req);
  if (rc) {
    mc_curl_resp_free(&r);
    return ERR_METADATA;
  }
  if (r.status == 404 && (flags & CALL_404_OK)) {
    rc = MC_ETCD_NOT_FOUND;
  } else if (r.status != 200) {
    LOG_ERROR("etcd %s key '%s': HTTP %ld: %.200s", path, what, r.status, r.body);
    rc = ERR_METADATA;
  } else {
    json_error_t jerr;
    *ans = json_loadb(r.body, r.len, 0, &jerr);
    if (!json_is_object(*ans)) {
      rc = malformed(path, what, *ans ? "not an object" : jerr.text);
      json_decref(*ans);
      *ans = NULL;
    }
  }
  mc_curl_resp_free(&r);
  return rc;
}

/* ---- reading answers ---- */

/* Reads a non-negative int64 field that the gateway renders as a decimal string (or a number) into *out;
 * 0 when absent (the gateway omits zero values). -1 for anything else: another type, junk, a sign, or
 * a value over INT64_MAX. */
static int int64_field(const json_t *o, const char *name, int64_t *out) {
  json_t *v = json_object_get(o, name);
  *out = 0;
  if (!v) return 0;
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return *out < 0 ? -1 : 0;
  }
  if (!json_is_string(v)) return -1;
  const char *s = json_string_value(v);
  char *end;
  errno = 0;
  unsigned long long x = isdigit((unsigned char)s[0]) ? strtoull(s, &end, 10) : 0;
  if (!isdigit((unsigned char)s[0]) || errno || *end || x > INT64_MAX) return -1;
  *out = (int64_t)x;
  return 0;
}

/* A boolean field into *out (0 when absent); -1 when it is something else. */
static int bool_field(const json_t *o, const char *name, int *out) {
  json_t *v = json_object_get(o, name);
  *out = json_is_true(v);
  return !v || json_is_boolean(v) ? 0 : -1;
}

/* o's member name if it has type (NULL when absent); -1 when it has another type. */
static int typed_field(const json_t *o, const char *name, json_type type, json_t **out) {
  *out = json_object_get(o, name);
  if (*out && json_typeof(*out) != type) *out = NULL;
  return *out || !json_object_get(o, name) ? 0 : -1;
}

/* The revision of o's header (which must be there) into *rev (may be NULL). 0 or -1. */
static int header_rev(const json_t *o, int64_t *rev) {
  json_t *h = json_object_get(o, "header");
  int64_t r = 0;
  if (!json_is_object(h) || int64_field(h, "revision", &r) || r < 1) return -1;
  if (rev) *rev = r;
  return 0;
}

/* A KeyValue (rpc.proto's mvccpb.KeyValue) into *kv; the gateway omits an empty value. 0 or -1. */
static int parse_kv(const json_t *o, struct mc_etcd_kv *kv) {
  memset(kv, 0, sizeof(*kv));
  json_t *v = json_object_get(o, "value");
  if (!json_is_object(o) || (v && !json_is_string(v)) || int64_field(o, "create_revision", &kv->create_rev) ||
      int64_field(o, "mod_revision", &kv->mod_rev) || int64_field(o, "version", &kv->version) ||
      int64_field(o, "lease", &kv->lease))
    return -1;
  if (!v) {
    kv->value = mc_strdup("");
    return 0;
  }
  return b64_decode(json_string_value(v), json_string_length(v), &kv->value, &kv->len);
}

void mc_etcd_kv_free(struct mc_etcd_kv *kv) {
  if (!kv) return;
  mc_free(kv->value);
  memset(kv, 0, sizeof(*kv));
}

/* The first key of a RangeResponse into *kv: 0, MC_ETCD_NOT_FOUND, or -1 when malformed. */
static int range_first(const json_t *r, struct mc_etcd_kv *kv) {
  json_t *kvs;
  memset(kv, 0, sizeof(*kv));
  if (!json_is_object(r) || typed_field(r, "kvs", JSON_ARRAY, &kvs)) return -1;
  if (!kvs || json_array_size(kvs) == 0) return MC_ETCD_NOT_FOUND;
  if (!parse_kv(json_array_get(kvs, 0), kv)) return 0;
  mc_etcd_kv_free(kv);
  return -1;
}

/* The one response of a transaction's branch: responses[0].<name> (an object), or NULL. */
static json_t *txn_response(const json_t *ans, const char *name) {
  json_t *rs = json_object_get(ans, "responses");
  json_t *r = json_is_array(rs) && json_array_size(rs) == 1 ? json_object_get(json_array_get(rs, 0), name) : NULL;
  return json_is_object(r) ? r : NULL;
}

/* ---- key-value calls ---- */

int mc_etcd_get(struct mc_etcd *c, const char *key, struct mc_etcd_kv *kv, int64_t *header_rev_out) {
  static const char path[] = "/v3/kv/range";
  json_t *ans;
  memset(kv, 0, sizeof(*kv));
  int rc = etcd_call(c, path, json_pack("{s:o}", "key", b64_json(key, strlen(key))), key, 0, &ans);
  if (rc) return rc;
  if (header_rev(ans, header_rev_out))
    rc = malformed(path, key, "no header revision");
  else if ((rc = range_first(ans, kv)) < 0)
    rc = malformed(path, key, "bad kvs");
  json_decref(ans);
  return rc;
}

/* A PutRequest's fields: key = value (len bytes), bound to lease unless 0. */
static json_t *put_request(const char *key, const char *value, size_t len, int64_t lease) {
  json_t *req = json_pack("{s:o, s:o}", "key", b64_json(key, strlen(key)), "value", b64_json(value, len));
  if (req && lease) json_object_set_new(req, "lease", int64_json(lease));
  return req;
}

/* Runs a call whose answer carries nothing but its header: 0 with *rev (may be NULL), or ERR_METADATA. */
static int header_only_call(struct mc_etcd *c, const char *path, json_t *req, const char *key, int64_t *rev) {
  json_t *ans;
  int rc = etcd_call(c, path, req, key, 0, &ans);
  if (!rc && header_rev(ans, rev)) rc = malformed(path, key, "no header revision");
  json_decref(ans);
  return rc;
}

int mc_etcd_put(struct mc_etcd *c, const char *key, const char *value, size_t len, int64_t lease, int64_t *rev) {
  return header_only_call(c, "/v3/kv/put", put_request(key, value, len, lease), key, rev);
}

int mc_etcd_delete(struct mc_etcd *c, const char *key) {
  json_t *req = json_pack("{s:o}", "key", b64_json(key, strlen(key)));
  return header_only_call(c, "/v3/kv/deleterange", req, key, NULL);
}

/* ---- transactions ---- */

/* A TxnRequest: one compare of key's target ("CREATE" / "MOD") field with rev, one request on each side. */
static json_t *txn_request(const char *key, const char *target, int64_t rev, json_t *success, json_t *failure) {
  const char *field = !strcmp(target, "CREATE") ? "create_revision" : "mod_revision";
  json_t *cmp = json_pack("{s:o, s:s, s:s, s:o}", "key", b64_json(key, strlen(key)), "target", target, "result",
                          "EQUAL", field, int64_json(rev));
  return json_pack("{s:[o], s:o, s:o}", "compare", cmp, "success", success, "failure", failure);
}

/* Runs a transaction: 0 with *succeeded and the answer (caller decrefs), or ERR_METADATA. */
static int txn_call(struct mc_etcd *c, json_t *req, const char *key, int *succeeded, int64_t *rev, json_t **ans) {
  int rc = etcd_call(c, "/v3/kv/txn", req, key, 0, ans);
  if (!rc && (header_rev(*ans, rev) || bool_field(*ans, "succeeded", succeeded))) {
    rc = malformed("/v3/kv/txn", key, "no header revision or a bad 'succeeded'");
    json_decref(*ans);
    *ans = NULL;
  }
  return rc;
}

int mc_etcd_create(struct mc_etcd *c, const char *key, const char *value, int64_t lease, int *won, int64_t *rev,
                   struct mc_etcd_kv *cur) {
  struct mc_etcd_kv scratch, *kv = cur ? cur : &scratch;
  memset(kv, 0, sizeof(*kv));
  *won = 0;
  json_t *put = json_pack("[{s:o}]", "request_put", put_request(key, value, strlen(value), lease));
  json_t *range = json_pack("[{s:{s:o}}]", "request_range", "key", b64_json(key, strlen(key)));
  json_t *ans;
  int64_t r = 0;
  int rc = txn_call(c, txn_request(key, "CREATE", 0, put, range), key, won, &r, &ans);
  if (rc) {
    *won = 0;
    return rc;
  }
  if (*won && rev) *rev = r;
  /* lost: the key exists, so the failure branch's range holds it */
  if (!*won && range_first(txn_response(ans, "response_range"), kv))
    rc = malformed("/v3/kv/txn", key, "the lost transaction's range has no key");
  if (!cur) mc_etcd_kv_free(&scratch);
  json_decref(ans);
  return rc;
}

int mc_etcd_delete_if(struct mc_etcd *c, const char *key, int64_t mod_rev, int *deleted) {
  json_t *del = json_pack("[{s:{s:o}}]", "request_delete_range", "key", b64_json(key, strlen(key)));
  json_t *ans;
  int ok = 0;
  *deleted = 0;
  int rc = txn_call(c, txn_request(key, "MOD", mod_rev, del, json_array()), key, &ok, NULL, &ans);
  if (rc) return rc;
  json_t *r = ok ? txn_response(ans, "response_delete_range") : NULL;
  int64_t n = 0;
  if (ok && (!r || int64_field(r, "deleted", &n)))
    rc = malformed("/v3/kv/txn", key, "the transaction's delete_range answer is missing or bad");
  *deleted = !rc && n > 0; /* (a key that is absent has mod_revision 0: comparing 0 succeeds, deleting nothing) */
  json_decref(ans);
  return rc;
}

int mc_etcd_put_if(struct mc_etcd *c, const char *key, const char *value, int64_t mod_rev, int *won) {
  json_t *op = value ? json_pack("[{s:o}]", "request_put", put_request(key, value, strlen(value), 0))
                     : json_pack("[{s:{s:o}}]", "request_delete_range", "key", b64_json(key, strlen(key)));
  json_t *ans;
  *won = 0;
  /* (an absent key has mod_revision 0, so mod_rev 0 is "create only") */
  int rc = txn_call(c, txn_request(key, "MOD", mod_rev, op, json_array()), key, won, NULL, &ans);
  if (!rc) json_decref(ans);
  return rc;
}

/* The key that ends the range of every key starting with prefix: prefix with its last byte below 0xff
 * incremented (the rest dropped), or "\0" (to the end of the key space) when there is none. len out. */
static char *prefix_end(const char *prefix, size_t *len) {
  size_t n = strlen(prefix);
  char *end = mc_strdup(prefix);
  while (n > 0 && (unsigned char)end[n - 1] == 0xff) n--;
  if (!n) {
    end[0] = 0;
    *len = 1;
    return end;
  }
  end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
  *len = n;
  return end;
}

void mc_etcd_kvs_free(struct mc_etcd_kv *kvs, char **keys, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (kvs) mc_etcd_kv_free(&kvs[i]);
    if (keys) mc_free(keys[i]);
  }
  mc_free(kvs);
  mc_free(keys);
}

int mc_etcd_range_prefix(struct mc_etcd *c, const char *prefix, size_t max, struct mc_etcd_kv **kvs, char ***keys,
                         size_t *n) {
  static const char path[] = "/v3/kv/range";
  size_t elen;
  char *end = prefix_end(prefix, &elen);
  json_t *req = json_pack("{s:o, s:o, s:o}", "key", b64_json(prefix, strlen(prefix)), "range_end", b64_json(end, elen),
                          "limit", int64_json((int64_t)max));
  mc_free(end);
  json_t *ans, *arr;
  *kvs = NULL;
  *keys = NULL;
  *n = 0;
  int rc = etcd_call(c, path, req, prefix, 0, &ans);
  if (rc) return rc;
  if (header_rev(ans, NULL) || typed_field(ans, "kvs", JSON_ARRAY, &arr)) {
    json_decref(ans);
    return malformed(path, prefix, "no header revision or bad kvs");
  }
  size_t cnt = arr ? json_array_size(arr) : 0;
  cnt = cnt < max ? cnt : max;
  *kvs = mc_calloc(cnt + 1, sizeof(**kvs));
  *keys = mc_calloc(cnt + 1, sizeof(char *));
  for (size_t i = 0; i < cnt && !rc; i++) {
    json_t *o = json_array_get(arr, i), *k = json_object_get(o, "key");
    size_t klen = 0;
    if (!json_is_string(k) || parse_kv(o, &(*kvs)[i]) ||
        b64_decode(json_string_value(k), json_string_length(k), &(*keys)[i], &klen) || strlen((*keys)[i]) != klen) {
      rc = malformed(path, prefix, "a bad key-value");
      *n = i + 1;
      break;
    }
    *n = i + 1;
  }
  json_decref(ans);
  if (rc) {
    mc_etcd_kvs_free(*kvs, *keys, *n);
    *kvs = NULL;
    *keys = NULL;
    *n = 0;
  }
  return rc;
}

/* ---- leases ---- */

int mc_etcd_lease_grant(struct mc_etcd *c, int ttl_s, int64_t *id) {
  static const char path[] = "/v3/lease/grant";
  json_t *ans, *err;
  *id = 0;
  int rc = etcd_call(c, path, json_pack("{s:I}", "TTL", (json_int_t)ttl_s), "(lease)", 0, &ans);
  if (rc) return rc;
  if (header_rev(ans, NULL) || int64_field(ans, "ID", id) || *id == 0) {
    rc = malformed(path, "(lease)", "no lease ID");
  } else if (json_is_string(err = json_object_get(ans, "error")) && json_string_length(err)) {
    LOG_ERROR("etcd %s: %.200s", path, json_string_value(err));
    rc = ERR_METADATA;
  }
  if (rc) *id = 0;
  json_decref(ans);
  return rc;
}

/* The gateway answers a keep-alive (a stream in gRPC) with its first message as {"result": ...}; a lease
 * that no longer exists gets one without TTL. */
int mc_etcd_lease_keepalive(struct mc_etcd *c, int64_t id, int64_t *ttl_left) {
  static const char path[] = "/v3/lease/keepalive";
  json_t *ans;
  *ttl_left = 0;
  int rc = etcd_call(c, path, json_pack("{s:o}", "ID", int64_json(id)), "(lease)", 0, &ans);
  if (rc) return rc;
  json_t *res = json_object_get(ans, "result");
  if (header_rev(res, NULL) || int64_field(res, "TTL", ttl_left)) {
    *ttl_left = 0;
    rc = malformed(path, "(lease)", "no result with a header and a TTL");
  }
  json_decref(ans);
  return rc;
}

int mc_etcd_lease_revoke(struct mc_etcd *c, int64_t id) {
  static const char path[] = "/v3/lease/revoke";
  json_t *ans;
  int rc = etcd_call(c, path, json_pack("{s:o}", "ID", int64_json(id)), "(lease)", CALL_404_OK, &ans);
  if (rc == MC_ETCD_NOT_FOUND) return 0; /* already gone */
  if (!rc && header_rev(ans, NULL)) rc = malformed(path, "(lease)", "no header revision");
  json_decref(ans);
  return rc;
}

/* ---- watch ---- */

struct watch_ctx {
  const char *key, *ep;
  mc_etcd_watch_cb cb;
  void *arg;
  const _Atomic int *stop;
  uint64_t deadline, created_by; /* ms (mc_now_ms); deadline 0 = none */
  int created;                   /* etcd confirmed the watch */
  int done, rc;                  /* a message ended the watch, with rc */
  int peer_failed;               /* ... because the endpoint misbehaved: the next watch uses the next one */
};

static int watch_fail(struct watch_ctx *x, const char *why) {
  LOG_WARN("etcd watch of key '%s' at %s: %s", x->key, x->ep, why);
  x->done = x->peer_failed = 1;
  x->rc = ERR_METADATA;
  return 1;
}

/* One event: calls cb; nonzero (cb's value, or ERR_METADATA for a malformed event) ends the watch. */
static int watch_event(struct watch_ctx *x, const json_t *ev) {
  json_t *type = json_object_get(ev, "type");
  const char *t = json_is_string(type) ? json_string_value(type) : "";
  struct mc_etcd_event e = {.deleted = type && !strcmp(t, "DELETE")};
  if (!json_is_object(ev) || (type && !e.deleted && strcmp(t, "PUT")) || parse_kv(json_object_get(ev, "kv"), &e.kv)) {
    mc_etcd_kv_free(&e.kv);
    return watch_fail(x, "malformed event");
  }
  int r = x->cb(x->arg, &e);
  mc_etcd_kv_free(&e.kv);
  if (r) x->done = 1, x->rc = r;
  return r;
}

/* One message of the stream (mc_curl_stream's on_line): {"result": WatchResponse} or {"error": ...}. */
static int watch_line(void *arg, char *line, size_t len) {
  struct watch_ctx *x = arg;
  json_error_t jerr;
  json_t *msg = json_loadb(line, len, 0, &jerr), *res = json_object_get(msg, "result"), *evs = NULL;
  int canceled = 0, stop = 0;
  /* (the header of a cancellation has no revision) */
  if (!json_is_object(res) || !json_is_object(json_object_get(res, "header")) ||
      bool_field(res, "canceled", &canceled) ||
      typed_field(res, "events", JSON_ARRAY, &evs)) {
    json_t *err = json_object_get(msg, "error");
    char why[256];
    snprintf(why, sizeof(why), "malformed message: %.200s", json_is_string(err) ? json_string_value(err) : line);
    stop = watch_fail(x, why);
  } else if (canceled) {
    json_t *reason = json_object_get(res, "cancel_reason");
    int64_t compact = 0;
    int bad = int64_field(res, "compact_revision", &compact);
    LOG_WARN("etcd watch of key '%s' at %s was cancelled (compact_revision %" PRId64 ") %.200s", x->key, x->ep,
             bad ? -1 : compact, json_is_string(reason) ? json_string_value(reason) : "");
    x->done = stop = 1;
    x->rc = ERR_METADATA;
  }
  x->created = 1; /* any well-formed message follows the creation */
  for (size_t i = 0; !stop && evs && i < json_array_size(evs); i++) stop = watch_event(x, json_array_get(evs, i));
  json_decref(msg);
  return stop;
}

/* mc_curl_stream's should_stop: the caller's flag, the watch's deadline, or no confirmation in time. */
static int watch_should_stop(void *arg) {
  struct watch_ctx *x = arg;
  uint64_t now = mc_now_ms();
  if ((x->stop && *x->stop) || (x->deadline && now >= x->deadline)) return 1;
  return !x->created && now >= x->created_by ? watch_fail(x, "no answer") : 0;
}

static char *watch_body(const char *key, int64_t start_rev) {
  json_t *cr = json_pack("{s:o}", "key", b64_json(key, strlen(key)));
  if (cr && start_rev > 0) json_object_set_new(cr, "start_revision", int64_json(start_rev));
  json_t *req = json_pack("{s:o}", "create_request", cr);
  char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  return body;
}

/* The watch's result once the stream is over (see mc_etcd_watch). */
static int watch_result(struct watch_ctx *x, int rc, const struct mc_curl_stream *s, const char *err) {
  if (x->done) return x->rc;
  if (!rc && s->stopped) return 0; /* the stop flag or the deadline */
  if (rc || s->status != 200) {
    watch_fail(x, err);
    return ERR_METADATA;
  }
  watch_fail(x, "the stream ended");
  return ERR_METADATA;
}

int mc_etcd_watch(struct mc_etcd *c, const char *key, int64_t start_rev, int timeout_ms, mc_etcd_watch_cb cb,
                  void *arg, const _Atomic int *stop) {
  int idx = current_endpoint(c), timeout = c->timeout_ms;
  uint64_t now = mc_now_ms();
  struct watch_ctx x = {.key = key, .ep = c->eps[idx], .cb = cb, .arg = arg, .stop = stop,
                        .deadline = timeout_ms > 0 ? now + (uint64_t)timeout_ms : 0,
                        .created_by = now + (uint64_t)timeout};
  struct mc_curl_stream s = {.on_line = watch_line, .should_stop = watch_should_stop, .arg = &x,
                             .max_line = WATCH_LINE_MAX, .connect_timeout_ms = timeout / 2 > 0 ? timeout / 2 : 1};
  char *body = watch_body(key, start_rev), *url = endpoint_url(c, idx, "/v3/watch");
  char err[512] = "";
  int rc = body ? mc_curl_stream("POST", url, body, strlen(body), &s, err, sizeof(err)) : -1;
  if (!body) snprintf(err, sizeof(err), "cannot encode the request");
  rc = watch_result(&x, rc, &s, err);
  if (x.peer_failed) note_endpoint(c, idx, 1);
  free(body);
  mc_free(url);
  return rc;
}
