/* The cluster secret and the connection handshake (auth.h, docs/security.md). HMAC-SHA256 and SHA-256
 * come from OpenSSL's libcrypto; nonces from getrandom(2). */
#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
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

/* The first line of path that is not empty or a comment, trimmed, into secret; 0 or -1 (logged). */
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
  int rc = -1;
  while (rc && fgets(line, sizeof(line), f)) {
    char *p = line, *e;
    while (*p == ' ' || *p == '\t') p++;
    for (e = p + strlen(p); e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
    if (!*p || *p == '#') continue;
    size_t n = strlen(p);
    if (n > SECRET_MAX) {
      LOG_ERROR("cluster secret: %s: the secret is longer than %d characters", path, SECRET_MAX);
      break;
    }
    memcpy(secret, p, n + 1);
    rc = 0;
  }
  fclose(f);
  if (rc) LOG_ERROR("cluster secret: %s holds no secret", path);
  return rc;
}

/* Reads the secret once; a secret that is configured but unusable is fatal for the process: running
 * open when the operator asked for a closed cluster would be worse than not running. */
static void load_secret(void) {
  pthread_mutex_lock(&secret_mu);
  if (!secret_read) {
    const char *file = getenv("MC_CLUSTER_SECRET_FILE"), *env = getenv("MC_CLUSTER_SECRET");
    secret[0] = 0;
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
  }
  pthread_mutex_unlock(&secret_mu);
}

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

static void mac(const char *tag, const char *service, const uint8_t a[16], const uint8_t b[16], uint8_t out[MAC_LEN]) {
  uint8_t msg[4 + 64 + 32];
  size_t sl = strnlen(service, 64), n = 0;
  memcpy(msg, tag, 4), n += 4;
  memcpy(msg + n, service, sl), n += sl;
  memcpy(msg + n, a, 16), n += 16;
  memcpy(msg + n, b, 16), n += 16;
  unsigned int ol = MAC_LEN;
  HMAC(EVP_sha256(), secret, (int)secret_len, msg, n, out, &ol);
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

int mc_auth_client(int fd, const char *service, int timeout_ms) {
  if (!mc_auth_enabled()) return 0;
  uint8_t hello[MC_AUTH_HELLO_LEN] = {'M', 'C', 'A', 'H', 1}, ch[MC_AUTH_CHALLENGE_LEN], want[MAC_LEN];
  nonce(hello + 5);
  int rc = mc_sock_write_deadline(fd, hello, sizeof(hello), timeout_ms);
  if (!rc) rc = mc_sock_read_deadline(fd, ch, sizeof(ch), timeout_ms);
  if (rc) return rc == -EPIPE ? -EACCES : rc; /* a server that closes on our hello wants no handshake */
  if (memcmp(ch, "MCAS", 4) || ch[4] != 0) {
    LOG_ERROR("%s: the server %s; not talking to it", service,
              !memcmp(ch, "MCAS", 4) && ch[4] == 1 ? "has no cluster secret" : "does not speak the handshake");
    return -EACCES;
  }
  mac("MCAS", service, hello + 5, ch + 5, want);
  if (CRYPTO_memcmp(want, ch + 21, MAC_LEN)) {
    LOG_ERROR("%s: the server does not hold our cluster secret; not talking to it", service);
    return -EACCES;
  }
  uint8_t proof[MC_AUTH_PROOF_LEN] = {'M', 'C', 'A', 'P'}, res[MC_AUTH_RESULT_LEN];
  mac("MCAP", service, ch + 5, hello + 5, proof + 4);
  rc = mc_sock_write_deadline(fd, proof, sizeof(proof), timeout_ms);
  if (!rc) rc = mc_sock_read_deadline(fd, res, sizeof(res), timeout_ms);
  if (rc) return rc;
  return memcmp(res, "MCAR", 4) || res[4] ? -EACCES : 0;
}

long mc_auth_srv_feed(struct mc_auth_srv *st, const char *service, const uint8_t *in, size_t n, uint8_t *out,
                      size_t *out_len, int *done) {
  load_secret();
  *done = st->state == 2;
  if (st->state == 0) {
    if (n < MC_AUTH_HELLO_LEN) return n >= 4 && !mc_auth_is_hello(in, n) ? (log_refusal(service, "no handshake"), -1) : 0;
    if (!mc_auth_is_hello(in, n) || in[4] != 1) {
      log_refusal(service, "no handshake");
      return -1;
    }
    memcpy(st->nc, in + 5, 16);
    nonce(st->ns);
    uint8_t *o = out + *out_len;
    memcpy(o, "MCAS", 4);
    o[4] = 0;
    memcpy(o + 5, st->ns, 16);
    mac("MCAS", service, st->nc, st->ns, o + 21);
    *out_len += MC_AUTH_CHALLENGE_LEN;
    st->state = 1;
    return MC_AUTH_HELLO_LEN;
  }
  if (st->state == 1) {
    if (n < MC_AUTH_PROOF_LEN) return 0;
    uint8_t want[MAC_LEN], *o = out + *out_len;
    mac("MCAP", service, st->ns, st->nc, want);
    int ok = !memcmp(in, "MCAP", 4) && !CRYPTO_memcmp(want, in + 4, MAC_LEN);
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

int mc_auth_server(int fd, const char *service, int timeout_ms) {
  if (!mc_auth_enabled()) return 0;
  struct mc_auth_srv st = {0};
  uint8_t in[MC_AUTH_PROOF_LEN], out[MC_AUTH_CHALLENGE_LEN];
  size_t have = 0;
  for (;;) {
    /* the tag first, so that a client speaking another protocol is refused without waiting for more */
    size_t want = have < 4 ? 4 : st.state == 0 ? MC_AUTH_HELLO_LEN : MC_AUTH_PROOF_LEN;
    int rc = mc_sock_read_deadline(fd, in + have, want - have, timeout_ms), done = 0;
    if (rc) {
      log_refusal(service, rc == -ETIMEDOUT ? "no handshake in time" : "closed during the handshake");
      return rc;
    }
    have = want;
    size_t out_len = 0;
    long used = mc_auth_srv_feed(&st, service, in, have, out, &out_len, &done);
    if (out_len && (rc = mc_sock_write_deadline(fd, out, out_len, timeout_ms))) return rc;
    if (used < 0) return -EACCES;
    if (done) return 0;
    if (used) have = 0;
  }
}

int mc_auth_answer_open(int fd, int timeout_ms) {
  uint8_t o[MC_AUTH_CHALLENGE_LEN] = {'M', 'C', 'A', 'S', 1};
  return mc_sock_write_deadline(fd, o, sizeof(o), timeout_ms);
}

/* ------------------------------------------------------------------ HTTP */

static void hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

static void http_mac(const char *method, const char *path, long long ts, const char *nonce_hex, const void *body,
                     size_t len, char out_hex[2 * MAC_LEN + 1]) {
  uint8_t digest[32], m[MAC_LEN];
  unsigned int dl = sizeof(digest), ml = MAC_LEN;
  EVP_Digest(body ? body : "", body ? len : 0, digest, &dl, EVP_sha256(), NULL);
  char dh[65];
  hex(digest, 32, dh);
  size_t cap = strlen(method) + strlen(path) + 160;
  char *msg = malloc(cap);
  if (!msg) abort();
  int n = snprintf(msg, cap, "MCAHTTP\n%s\n%s\n%lld\n%s\n%s", method, path, ts, nonce_hex, dh);
  HMAC(EVP_sha256(), secret, (int)secret_len, (const uint8_t *)msg, (size_t)n, m, &ml);
  free(msg);
  hex(m, MAC_LEN, out_hex);
}

int mc_auth_http_sign(const char *method, const char *path, const void *body, size_t len, char *out, size_t cap) {
  if (!mc_auth_enabled() || cap < 128) return -1;
  uint8_t nb[16];
  nonce(nb);
  char nh[33], mh[2 * MAC_LEN + 1];
  hex(nb, 16, nh);
  long long ts = (long long)time(NULL);
  http_mac(method, path, ts, nh, body, len, mh);
  snprintf(out, cap, "v1 %lld %s %s", ts, nh, mh);
  return 0;
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Appends s[0, n) to out percent-decoded (and '+' as a space when plus): what an HTTP server decodes. */
static size_t decode_into(char *out, const char *s, size_t n, int plus) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int h, l;
    if (s[i] == '%' && i + 2 < n && (h = hexval(s[i + 1])) >= 0 && (l = hexval(s[i + 2])) >= 0) {
      out[o++] = (char)(h * 16 + l);
      i += 2;
    } else out[o++] = plus && s[i] == '+' ? ' ' : s[i];
  }
  return o;
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
  if (!strcmp(method, "GET") || !strcmp(method, "HEAD") || !mc_auth_enabled() || cap < 160) return -1;
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

int mc_auth_http_check(const char *method, const char *path, const void *body, size_t len, const char *value) {
  if (!mc_auth_enabled() || !value) return 0;
  long long ts;
  char nh[33], mh[2 * MAC_LEN + 1], want[2 * MAC_LEN + 1];
  if (sscanf(value, "v1 %lld %32[0-9a-f] %64[0-9a-f]", &ts, nh, mh) != 3 || strlen(nh) != 32 || strlen(mh) != 64)
    return 0;
  long long now = (long long)time(NULL);
  if (ts < now - MC_AUTH_HTTP_WINDOW_S || ts > now + MC_AUTH_HTTP_WINDOW_S) return 0;
  http_mac(method, path, ts, nh, body, len, want);
  return !CRYPTO_memcmp(want, mh, sizeof(want) - 1) && first_use(nh, ts);
}

/* ------------------------------------------------------------------ generation */

int mc_auth_generate(const char *path) {
  uint8_t raw[32];
  nonce(raw);
  nonce(raw + 16);
  char line[66];
  hex(raw, 32, line);
  line[64] = '\n';
  line[65] = 0;
  if (!strcmp(path, "-")) return fputs(line, stdout) < 0 ? -EIO : 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int rc = write(fd, line, 65) == 65 && !fsync(fd) ? 0 : -EIO;
  close(fd);
  return rc;
}
