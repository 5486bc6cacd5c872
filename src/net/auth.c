/* The cluster secret and the connection handshake (auth.h, docs/security.md). HMAC-SHA256 and SHA-256
 * come from OpenSSL's libcrypto; nonces from getrandom(2); the percent-decoding of HTTP targets from libcurl. */
#include "net/auth.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "net/sock.h"

#define SECRET_MIN 16
#define SECRET_MAX 1024
#define MAC_LEN 32

static pthread_mutex_t secret_mu = PTHREAD_MUTEX_INITIALIZER;
static int secret_read;
static char secret[SECRET_MAX + 1];
static size_t secret_len;
static char tenant[MC_AUTH_TENANT_MAX + 1]; /* "" = a member of the whole cluster */

/* A tenant id (docs/security.md, "Tenants"): 1 to MC_AUTH_TENANT_MAX bytes, no control character, not
 * "default" (the name of the namespace of no tenant). */
int mc_auth_tenant_ok(const char *t, size_t n) {
  if (!n || n > MC_AUTH_TENANT_MAX || (n == 7 && !memcmp(t, "default", 7))) return 0;
  const unsigned char *u = (const unsigned char *)t;
  for (size_t i = 0; i < n;) { /* UTF-8 (ids end up in JSON files and logs), no control character */
    unsigned c = u[i];
    size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
    if (c < 0x20 || c == 0x7f || k > 3 || i + k >= n + (k ? 0 : 1) || (k == 1 && c < 0xc2)) return 0;
    for (size_t j = 1; j <= k; j++)
      if ((u[i + j] & 0xc0) != 0x80) return 0;
    unsigned d = k ? u[i + 1] : 0; /* no overlong form, surrogate or code point past U+10FFFF */
    if ((c == 0xe0 && d < 0xa0) || (c == 0xed && d >= 0xa0) || (c == 0xf0 && d < 0x90) || c > 0xf4 ||
        (c == 0xf4 && d >= 0x90))
      return 0;
    i += k + 1;
  }
  return 1;
}

/* The secret file: its first line that is not empty or a comment, trimmed, is the secret; a tenant's
 * file (made by `mooncake secret tenant`) has a line "tenant <id>" before it. 0 or -1 (logged). */
static int read_secret_file(const char *path) {
  FILE *f = fopen(path, "re");
  if (!f) {
    LOG_ERROR("cluster secret: cannot open MC_CLUSTER_SECRET_FILE %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (!fstat(fileno(f), &st) && (st.st_mode & 077))
    LOG_WARN("cluster secret: %s is readable by others (mode %03o); chmod 600 it", path, (unsigned)(st.st_mode & 0777));
  char line[SECRET_MAX + 2];
  int rc = -1, bad = 0;
  while (rc && !bad && fgets(line, sizeof(line), f)) {
    char *p = line, *e;
    while (*p == ' ' || *p == '\t') p++;
    for (e = p + strlen(p); e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
    if (!*p || *p == '#') continue;
    size_t n = strlen(p);
    if (!strncmp(p, "tenant ", 7) && !tenant[0]) {
      if (!mc_auth_tenant_ok(p + 7, n - 7)) {
        LOG_ERROR("cluster secret: %s: invalid tenant id (1 to %d bytes, no control characters)", path,
                  MC_AUTH_TENANT_MAX);
        bad = 1;
      } else memcpy(tenant, p + 7, n - 6);
      continue;
    }
    if (n > SECRET_MAX) {
      LOG_ERROR("cluster secret: %s: the secret is longer than %d characters", path, SECRET_MAX);
      break;
    }
    memcpy(secret, p, n + 1);
    rc = 0;
  }
  fclose(f);
  if (rc && !bad) LOG_ERROR("cluster secret: %s holds no secret", path);
  return rc;
}

/* Reads the secret once; a secret that is configured but unusable is fatal for the process: running
 * open when the operator asked for a closed cluster would be worse than not running. */
static void load_secret(void) {
  pthread_mutex_lock(&secret_mu);
  if (!secret_read) {
    const char *file = mc_knob_str(MC_KNOB_CLUSTER_SECRET_FILE), *env = mc_knob_str(MC_KNOB_CLUSTER_SECRET);
    secret[0] = tenant[0] = 0;
    int bad = 0;
    if (file && *file) bad = read_secret_file(file);
    else if (env && *env) snprintf(secret, sizeof(secret), "%s", env);
    secret_len = strlen(secret);
    if (!bad && secret_len && secret_len < SECRET_MIN) {
      LOG_ERROR("cluster secret: shorter than %d characters", SECRET_MIN);
      bad = 1;
    }
    if (bad) {
      LOG_ERROR("cluster secret configured but unusable; exiting (docs/security.md)");
      exit(78);
    }
    secret_read = 1;
    if (tenant[0]) LOG_INFO("cluster secret: this process is a member of tenant %s", tenant);
  }
  pthread_mutex_unlock(&secret_mu);
}

const char *mc_auth_tenant(void) {
  load_secret();
  return tenant;
}

/* The tenant secret of tenant t as the cluster derives it: HMAC(cluster secret, label t), hex. */
static void derive(const char *t, size_t tl, char out[2 * MAC_LEN + 1]);

int mc_auth_enabled(void) {
  load_secret();
  return secret_len > 0;
}

void mc_auth_reset(void) {
  pthread_mutex_lock(&secret_mu);
  secret_read = 0;
  pthread_mutex_unlock(&secret_mu);
}

void mc_auth_note_open(const char *component) {
  static atomic_int said;
  if (!mc_auth_enabled() && !atomic_exchange(&said, 1))
    LOG_WARN("%s: no cluster secret (MC_CLUSTER_SECRET_FILE / MC_CLUSTER_SECRET): the cluster is open to anyone "
             "who can reach its ports (docs/security.md)",
             component);
}

static void hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

#define TENANT_LABEL "mooncake tenant secret v1"

static void derive(const char *t, size_t tl, char out[2 * MAC_LEN + 1]) {
  uint8_t msg[sizeof(TENANT_LABEL) + MC_AUTH_TENANT_MAX], m[MAC_LEN];
  memcpy(msg, TENANT_LABEL, sizeof(TENANT_LABEL)); /* with its NUL: the label ends before the id */
  memcpy(msg + sizeof(TENANT_LABEL), t, tl);
  unsigned int ol = MAC_LEN;
  HMAC(EVP_sha256(), secret, (int)secret_len, msg, sizeof(TENANT_LABEL) + tl, m, &ol);
  hex(m, MAC_LEN, out);
}

/* The key of a realm ("" = the whole cluster, else a tenant): ours when it is our own realm, derived
 * from the cluster secret when we are a member of the whole cluster; 0, or -1 when we cannot hold it (a
 * tenant asked for another realm). */
struct realm_key {
  char buf[2 * MAC_LEN + 1];
  const char *k;
  size_t n;
};
static int realm_key(const char *realm, size_t rl, struct realm_key *rk) {
  if (rl == strlen(tenant) && !memcmp(realm, tenant, rl)) {
    rk->k = secret, rk->n = secret_len;
    return 0;
  }
  if (tenant[0]) return -1;
  derive(realm, rl, rk->buf);
  rk->k = rk->buf, rk->n = 2 * MAC_LEN;
  return 0;
}

/* HMAC(key of realm, tag service len(realm) realm a b). */
static void mac(const struct realm_key *rk, const char *tag, const char *service, const char *realm, size_t rl,
                const uint8_t a[16], const uint8_t b[16], uint8_t out[MAC_LEN]) {
  uint8_t msg[4 + 64 + 1 + MC_AUTH_TENANT_MAX + 32];
  size_t sl = strnlen(service, 64), n = 0;
  memcpy(msg, tag, 4), n += 4;
  memcpy(msg + n, service, sl), n += sl;
  msg[n++] = (uint8_t)rl;
  memcpy(msg + n, realm, rl), n += rl;
  memcpy(msg + n, a, 16), n += 16;
  memcpy(msg + n, b, 16), n += 16;
  unsigned int ol = MAC_LEN;
  HMAC(EVP_sha256(), rk->k, (int)rk->n, msg, n, out, &ol);
}

static void nonce(uint8_t n[16]) {
  size_t got = 0;
  while (got < 16) {
    ssize_t r = getrandom(n + got, 16 - got, 0);
    if (r > 0) got += (size_t)r;
    else if (errno != EINTR) abort(); /* no randomness: nothing safe to do */
  }
}

int mc_auth_is_hello(const void *p, size_t n) { return n >= 4 && !memcmp(p, "MCAH", 4); }

/* Refusals are peer-triggered: rate-limited as every such warning is (common/log.h). */
static void log_refusal(const char *service, const char *why) {
  LOG_WARN_LIMITED("%s: unauthenticated connection refused (%s)", service, why);
}

/* What a server of `service` serves a client of tenant ct (cl bytes; 0 = a member of the whole
 * cluster): the realm of the connection into realm and *rl, or -1 to refuse. A tenant's process serves only
 * its own tenant (and members of the whole cluster, who hold every key). A member of the whole cluster
 * serves tenants only at the master, which confines their requests to their keys; its transfer-engine
 * ports would hand them memory that holds everyone's objects. */
static int choose_realm(const char *service, const uint8_t *ct, size_t cl, char *realm, size_t *rl) {
  size_t own = strlen(tenant);
  if (own) {
    if (cl && (cl != own || memcmp(ct, tenant, cl))) return -1;
    memcpy(realm, tenant, own + 1);
    *rl = own;
    return 0;
  }
  if (cl && strcmp(service, "master")) return -1;
  memcpy(realm, ct, cl);
  realm[cl] = 0;
  *rl = cl;
  return 0;
}

int mc_auth_client(int fd, const char *service, int timeout_ms) {
  if (!mc_auth_enabled()) return 0;
  size_t tl = strlen(tenant);
  uint8_t hello[MC_AUTH_HELLO_MAX] = {'M', 'C', 'A', 'H', MC_AUTH_VERSION}, ch[MC_AUTH_CHALLENGE_MAX], want[MAC_LEN];
  nonce(hello + 5);
  hello[21] = (uint8_t)tl;
  memcpy(hello + MC_AUTH_HELLO_LEN, tenant, tl);
  int rc = mc_sock_write_deadline(fd, hello, MC_AUTH_HELLO_LEN + tl, timeout_ms);
  if (!rc) rc = mc_sock_read_deadline(fd, ch, MC_AUTH_CHALLENGE_LEN, timeout_ms);
  if (rc) return rc == -EPIPE ? -EACCES : rc; /* a server that closes on our hello wants no handshake */
  if (memcmp(ch, "MCAS", 4) || ch[4] != 0) {
    int st = memcmp(ch, "MCAS", 4) ? -1 : ch[4];
    LOG_ERROR("%s: the server %s; not talking to it", service,
              st == 1   ? "has no cluster secret"
              : st == 2 ? "serves another tenant (or only members of the whole cluster)"
                        : "does not speak the handshake");
    return -EACCES;
  }
  size_t rl = ch[MC_AUTH_CHALLENGE_LEN - 1];
  if (rl > MC_AUTH_TENANT_MAX) return -EACCES;
  if (rl && (rc = mc_sock_read_deadline(fd, ch + MC_AUTH_CHALLENGE_LEN, rl, timeout_ms))) return rc;
  const char *realm = (const char *)ch + MC_AUTH_CHALLENGE_LEN;
  struct realm_key rk;
  if ((tl && (rl != tl || memcmp(realm, tenant, tl))) || realm_key(realm, rl, &rk)) {
    LOG_ERROR("%s: the server serves another tenant; not talking to it", service);
    return -EACCES;
  }
  mac(&rk, "MCAS", service, realm, rl, hello + 5, ch + 5, want);
  if (CRYPTO_memcmp(want, ch + 21, MAC_LEN)) {
    LOG_ERROR("%s: the server does not hold our cluster secret; not talking to it", service);
    return -EACCES;
  }
  uint8_t proof[MC_AUTH_PROOF_LEN] = {'M', 'C', 'A', 'P'}, res[MC_AUTH_RESULT_LEN];
  mac(&rk, "MCAP", service, realm, rl, ch + 5, hello + 5, proof + 4);
  rc = mc_sock_write_deadline(fd, proof, sizeof(proof), timeout_ms);
  if (!rc) rc = mc_sock_read_deadline(fd, res, sizeof(res), timeout_ms);
  if (rc) return rc;
  return memcmp(res, "MCAR", 4) || res[4] ? -EACCES : 0;
}

/* The refusal of a hello: a challenge with status 2 (not served here), so the client can say why. */
static void refuse_hello(uint8_t *out, size_t *out_len) {
  memset(out + *out_len, 0, MC_AUTH_CHALLENGE_LEN);
  memcpy(out + *out_len, "MCAS\2", 5);
  *out_len += MC_AUTH_CHALLENGE_LEN;
}

long mc_auth_srv_feed(struct mc_auth_srv *st, const char *service, const uint8_t *in, size_t n, uint8_t *out,
                      size_t *out_len, int *done) {
  load_secret();
  *done = st->state == 2;
  if (st->state == 0) {
    if (n < MC_AUTH_HELLO_LEN) return n >= 4 && !mc_auth_is_hello(in, n) ? (log_refusal(service, "no handshake"), -1) : 0;
    if (!mc_auth_is_hello(in, n) || in[4] != MC_AUTH_VERSION) {
      log_refusal(service, mc_auth_is_hello(in, n) ? "another handshake version" : "no handshake");
      return -1;
    }
    size_t tl = in[21];
    if (tl > MC_AUTH_TENANT_MAX) {
      log_refusal(service, "invalid tenant id");
      return -1;
    }
    if (n < MC_AUTH_HELLO_LEN + tl) return 0;
    if (tl && !mc_auth_tenant_ok((const char *)in + MC_AUTH_HELLO_LEN, tl)) {
      log_refusal(service, "invalid tenant id");
      return -1;
    }
    size_t rl;
    struct realm_key rk;
    if (choose_realm(service, in + MC_AUTH_HELLO_LEN, tl, st->realm, &rl) || realm_key(st->realm, rl, &rk)) {
      refuse_hello(out, out_len);
      log_refusal(service, tl ? "a tenant this server does not serve" : "a member of no tenant");
      return -1;
    }
    memcpy(st->nc, in + 5, 16);
    nonce(st->ns);
    uint8_t *o = out + *out_len;
    memcpy(o, "MCAS", 4);
    o[4] = 0;
    memcpy(o + 5, st->ns, 16);
    mac(&rk, "MCAS", service, st->realm, rl, st->nc, st->ns, o + 21);
    o[MC_AUTH_CHALLENGE_LEN - 1] = (uint8_t)rl;
    memcpy(o + MC_AUTH_CHALLENGE_LEN, st->realm, rl);
    *out_len += MC_AUTH_CHALLENGE_LEN + rl;
    st->state = 1;
    return (long)(MC_AUTH_HELLO_LEN + tl);
  }
  if (st->state == 1) {
    if (n < MC_AUTH_PROOF_LEN) return 0;
    uint8_t want[MAC_LEN], *o = out + *out_len;
    struct realm_key rk;
    size_t rl = strlen(st->realm);
    int ok = !realm_key(st->realm, rl, &rk);
    if (ok) mac(&rk, "MCAP", service, st->realm, rl, st->ns, st->nc, want);
    ok = ok && !memcmp(in, "MCAP", 4) && !CRYPTO_memcmp(want, in + 4, MAC_LEN);
    memcpy(o, "MCAR", 4);
    o[4] = ok ? 0 : 1;
    *out_len += MC_AUTH_RESULT_LEN;
    if (!ok) {
      log_refusal(service, "wrong secret");
      return -1;
    }
    st->state = 2;
    *done = 1;
    return MC_AUTH_PROOF_LEN;
  }
  return 0;
}

int mc_auth_server_realm(int fd, const char *service, int timeout_ms, char *realm) {
  if (realm) realm[0] = 0;
  if (!mc_auth_enabled()) return 0;
  struct mc_auth_srv st = {0};
  uint8_t in[MC_AUTH_HELLO_MAX], out[MC_AUTH_CHALLENGE_MAX];
  size_t have = 0;
  for (;;) {
    /* the tag first, so that a client speaking another protocol is refused without waiting for more */
    size_t want = have < 4 ? 4
                  : st.state == 1                     ? MC_AUTH_PROOF_LEN
                  : have < MC_AUTH_HELLO_LEN           ? MC_AUTH_HELLO_LEN
                  : in[21] <= MC_AUTH_TENANT_MAX       ? MC_AUTH_HELLO_LEN + in[21]
                                                       : MC_AUTH_HELLO_LEN; /* refused by the feed */
    int rc = want > have ? mc_sock_read_deadline(fd, in + have, want - have, timeout_ms) : 0, done = 0;
    if (rc) {
      log_refusal(service, rc == -ETIMEDOUT ? "no handshake in time" : "closed during the handshake");
      return rc;
    }
    have = want;
    size_t out_len = 0;
    long used = mc_auth_srv_feed(&st, service, in, have, out, &out_len, &done);
    if (out_len && (rc = mc_sock_write_deadline(fd, out, out_len, timeout_ms))) return rc;
    if (used < 0) return -EACCES;
    if (done) {
      if (realm) memcpy(realm, st.realm, strlen(st.realm) + 1);
      return 0;
    }
    if (used) have = 0;
  }
}

int mc_auth_server(int fd, const char *service, int timeout_ms) {
  return mc_auth_server_realm(fd, service, timeout_ms, NULL);
}

int mc_auth_answer_open(int fd, int timeout_ms) {
  uint8_t o[MC_AUTH_CHALLENGE_LEN] = {'M', 'C', 'A', 'S', 1};
  return mc_sock_write_deadline(fd, o, sizeof(o), timeout_ms);
}

/* ------------------------------------------------------------------ HTTP */

/* The MAC of a signed request, under the key of realm ("" = the whole cluster, the v1 form). -1 when we
 * cannot hold that realm's key. */
static int http_mac(const char *realm, const char *method, const char *path, long long ts, const char *nonce_hex,
                    const void *body, size_t len, char out_hex[2 * MAC_LEN + 1]) {
  struct realm_key rk;
  size_t rl = strlen(realm);
  if (realm_key(realm, rl, &rk)) return -1;
  uint8_t digest[32], m[MAC_LEN];
  unsigned int dl = sizeof(digest), ml = MAC_LEN;
  EVP_Digest(body ? body : "", body ? len : 0, digest, &dl, EVP_sha256(), NULL);
  char dh[65];
  hex(digest, 32, dh);
  size_t cap = strlen(method) + strlen(path) + rl + 170;
  char *msg = malloc(cap);
  if (!msg) abort();
  int n = rl ? snprintf(msg, cap, "MCAHTTP2\n%s\n%s\n%s\n%lld\n%s\n%s", realm, method, path, ts, nonce_hex, dh)
             : snprintf(msg, cap, "MCAHTTP\n%s\n%s\n%lld\n%s\n%s", method, path, ts, nonce_hex, dh);
  HMAC(EVP_sha256(), rk.k, (int)rk.n, (const uint8_t *)msg, (size_t)n, m, &ml);
  free(msg);
  hex(m, MAC_LEN, out_hex);
  return 0;
}

int mc_auth_http_sign(const char *method, const char *path, const void *body, size_t len, char *out, size_t cap) {
  if (!mc_auth_enabled() || cap < MC_AUTH_HTTP_VALUE_MAX) return -1;
  uint8_t nb[16];
  nonce(nb);
  char nh[33], mh[2 * MAC_LEN + 1], th[2 * MC_AUTH_TENANT_MAX + 1];
  hex(nb, 16, nh);
  long long ts = (long long)time(NULL);
  http_mac(tenant, method, path, ts, nh, body, len, mh);
  hex((const uint8_t *)tenant, strlen(tenant), th);
  if (tenant[0]) snprintf(out, cap, "v2 %lld %s %s %s", ts, nh, th, mh);
  else snprintf(out, cap, "v1 %lld %s %s", ts, nh, mh);
  return 0;
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Appends s[0, n) to out percent-decoded (and '+' as a space when plus): what an HTTP server decodes.
 * The '+' are turned before curl_easy_unescape decodes, so that an escaped "%2B" stays a '+'; a '%' not
 * followed by two hex digits stays as it is (curl keeps it). n is a piece of one request target, far
 * below curl's int length. */
static size_t decode_into(char *out, const char *s, size_t n, int plus) {
  if (n == 0) return 0; /* (curl reads a length 0 as "up to the NUL") */
  if (n > INT_MAX) abort();
  for (size_t i = 0; i < n; i++) out[i] = plus && s[i] == '+' ? ' ' : s[i];
  int len;
  char *d = curl_easy_unescape(NULL, out, (int)n, &len);
  if (!d) abort();
  memcpy(out, d, (size_t)len);
  curl_free(d);
  return (size_t)len;
}

char *mc_auth_http_canonical(const char *target) {
  size_t n = strcspn(target, "#"), q = strcspn(target, "?#");
  char *out = malloc(n + 2), *o = out;
  if (!out) abort();
  o += decode_into(o, target, q, 0);
  if (q < n) { /* each argument decoded, in order, joined by '&'; '&' and '=' inside are decoded too */
    *o++ = '?';
    for (const char *a = target + q + 1, *end = target + n; a < end;) {
      size_t al = strcspn(a, "&#");
      if (a + al > end) al = (size_t)(end - a);
      const char *eq = memchr(a, '=', al);
      if (al) {
        if (o[-1] != '?') *o++ = '&';
        o += decode_into(o, a, eq ? (size_t)(eq - a) : al, 1);
        if (eq) {
          *o++ = '=';
          o += decode_into(o, eq + 1, al - (size_t)(eq - a) - 1, 1);
        }
      }
      a += al + 1;
    }
  }
  *o = 0;
  return out;
}

int mc_auth_http_header_for_url(const char *method, const char *url, const void *body, size_t len, char *out,
                                size_t cap) {
  if (!strcmp(method, "GET") || !strcmp(method, "HEAD") || !mc_auth_enabled() || cap < MC_AUTH_HTTP_HEADER_MAX)
    return -1;
  const char *p = strstr(url, "://");
  p = p ? strchr(p + 3, '/') : strchr(url, '/');
  char *target = mc_auth_http_canonical(p ? p : "/");
  int w = snprintf(out, cap, "%s: ", MC_AUTH_HTTP_HEADER);
  int rc = mc_auth_http_sign(method, target, body, len, out + w, cap - (size_t)w);
  free(target);
  return rc;
}

/* Signatures accepted within the window, so that none is accepted twice. */
#define SEEN_MAX 4096
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  long long ts;
  char nonce[33];
} seen[SEEN_MAX];
static size_t seen_next;

/* 1 when the nonce is new (and records it); a full ring drops the oldest, which has to be outside the
 * window for the replay to matter: SEEN_MAX signed writes within MC_AUTH_HTTP_WINDOW_S, by holders of
 * the secret themselves. */
static int first_use(const char *nh, long long ts) {
  int fresh = 1;
  pthread_mutex_lock(&seen_mu);
  for (size_t i = 0; i < SEEN_MAX && fresh; i++) fresh = !(seen[i].ts == ts && !strcmp(seen[i].nonce, nh));
  if (fresh) {
    seen[seen_next].ts = ts;
    snprintf(seen[seen_next].nonce, sizeof(seen[seen_next].nonce), "%s", nh);
    seen_next = (seen_next + 1) % SEEN_MAX;
  }
  pthread_mutex_unlock(&seen_mu);
  return fresh;
}

/* cluster_only: a tenant's signature is refused before its nonce is remembered. */
static int http_check(const char *method, const char *path, const void *body, size_t len, const char *value,
                      char *realm, int cluster_only) {
  realm[0] = 0;
  if (!mc_auth_enabled() || !value) return 0;
  long long ts;
  char nh[33], mh[2 * MAC_LEN + 1], want[2 * MAC_LEN + 1], th[2 * MC_AUTH_TENANT_MAX + 1] = "";
  if (!strncmp(value, "v1 ", 3)) {
    if (sscanf(value, "v1 %lld %32[0-9a-f] %64[0-9a-f]", &ts, nh, mh) != 3) return 0;
  } else if (sscanf(value, "v2 %lld %32[0-9a-f] %256[0-9a-f] %64[0-9a-f]", &ts, nh, th, mh) != 4) {
    return 0;
  }
  size_t tl = strlen(th) / 2;
  if (strlen(nh) != 32 || strlen(mh) != 64 || strlen(th) % 2 || (th[0] && !tl)) return 0;
  for (size_t i = 0; i < tl; i++) realm[i] = (char)(hexval(th[2 * i]) * 16 + hexval(th[2 * i + 1]));
  realm[tl] = 0;
  if (th[0] && (cluster_only || !mc_auth_tenant_ok(realm, tl))) return (realm[0] = 0);
  long long now = (long long)time(NULL);
  if (ts < now - MC_AUTH_HTTP_WINDOW_S || ts > now + MC_AUTH_HTTP_WINDOW_S ||
      http_mac(realm, method, path, ts, nh, body, len, want) || CRYPTO_memcmp(want, mh, sizeof(want) - 1) ||
      !first_use(nh, ts))
    return (realm[0] = 0);
  return 1;
}

int mc_auth_http_check_realm(const char *method, const char *path, const void *body, size_t len, const char *value,
                             char *realm) {
  return http_check(method, path, body, len, value, realm, 0);
}

int mc_auth_http_check(const char *method, const char *path, const void *body, size_t len, const char *value) {
  char realm[MC_AUTH_TENANT_MAX + 1];
  return http_check(method, path, body, len, value, realm, 1);
}

/* ------------------------------------------------------------------ generation */

/* Writes line (n bytes) to path: created with mode 0600, never over an existing file; "-" prints it. */
static int write_secret(const char *path, const char *line, size_t n) {
  if (!strcmp(path, "-")) return fwrite(line, 1, n, stdout) == n ? 0 : -EIO;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int rc = write(fd, line, n) == (ssize_t)n && !fsync(fd) ? 0 : -EIO;
  close(fd);
  return rc;
}

int mc_auth_generate_tenant(const char *id, const char *path) {
  if (!mc_auth_enabled() || tenant[0]) return -EPERM;
  if (!mc_auth_tenant_ok(id, strlen(id))) return -EINVAL;
  char key[2 * MAC_LEN + 1], text[3 * MC_AUTH_TENANT_MAX + 200];
  derive(id, strlen(id), key);
  int n = snprintf(text, sizeof(text), "# mooncake tenant secret (docs/security.md): MC_CLUSTER_SECRET_FILE of tenant %s's processes\ntenant %s\n%s\n", id, id, key);
  return write_secret(path, text, (size_t)n);
}

int mc_auth_generate(const char *path) {
  uint8_t raw[32];
  nonce(raw);
  nonce(raw + 16);
  char line[66];
  hex(raw, 32, line);
  line[64] = '\n';
  line[65] = 0;
  return write_secret(path, line, 65);
}
