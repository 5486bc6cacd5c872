/* The cluster secret and the connection handshake that proves it (docs/security.md).
 *
 * A cluster may have one shared secret, read once per process from MC_CLUSTER_SECRET_FILE (the file's
 * first line that is not empty or a '#' comment) or else from MC_CLUSTER_SECRET. With one, every
 * connection to a listener of ours starts with a mutual HMAC-SHA256 challenge-response before any
 * request is read, and an HTTP request that changes state carries a signed header; a peer that cannot
 * prove the secret gets nothing but a refusal. Requests on an authenticated connection pay nothing.
 * Without a secret everything works as in an open cluster and each process logs that once.
 *
 * Tenants: a tenant's processes hold, instead of the cluster secret, the tenant's own secret, which the
 * cluster derives from its secret (HMAC(cluster secret, "mooncake tenant secret v1\0" id), hex;
 * `mooncake secret tenant ID FILE` writes it, with a line "tenant <id>" before it). Every connection has
 * a realm, "" (the whole cluster) or one tenant, and is keyed by that realm's secret; members of the
 * whole cluster derive any tenant's. Who serves whom (choose_realm in auth.c): a tenant's process serves
 * its own tenant and members of the whole cluster; a member of the whole cluster serves tenants only at
 * the master ("master"), which confines their requests to their tenant's keys (docs/security.md).
 *
 * The handshake (every message begins with a 4-byte tag; MACs are HMAC-SHA256 under the realm's key):
 *   client -> server  "MCAH" u8 version(2) nonce_c[16] u8 len tenant[len]     (len 0: no tenant)
 *   server -> client  "MCAS" u8 status nonce_s[16] mac_s[32] u8 len realm[len]
 *                     status 0 = go on, 1 = this server has no secret, 2 = not served here;
 *                     mac_s = HMAC("MCAS" service len realm nonce_c nonce_s)
 *   client -> server  "MCAP" mac_c[32]            mac_c = HMAC("MCAP" service len realm nonce_s nonce_c)
 *   server -> client  "MCAR" u8 result(0 = accepted, 1 = refused)
 * The client checks mac_s before it answers, so a server that does not hold the secret learns nothing
 * and is not talked to; `service` names the protocol ("master", "te-ctrl", "te-data"), so a proof made
 * for one listener is worth nothing at another. Nonces come from getrandom(2). */
#ifndef MC_COMMON_AUTH_H
#define MC_COMMON_AUTH_H
#include <stddef.h>
#include <stdint.h>

#define MC_AUTH_VERSION 2
#define MC_AUTH_TENANT_MAX 128 /* bytes of a tenant id */
#define MC_AUTH_HELLO_LEN 22   /* a hello without its tenant id */
#define MC_AUTH_HELLO_MAX (MC_AUTH_HELLO_LEN + MC_AUTH_TENANT_MAX)
#define MC_AUTH_CHALLENGE_LEN 54 /* a challenge without its realm (and the whole of a status 1 or 2) */
#define MC_AUTH_CHALLENGE_MAX (MC_AUTH_CHALLENGE_LEN + MC_AUTH_TENANT_MAX)
#define MC_AUTH_PROOF_LEN 36
#define MC_AUTH_RESULT_LEN 5
#define MC_AUTH_HTTP_HEADER "X-Mooncake-Auth"
#define MC_AUTH_HTTP_VALUE_MAX 400  /* room for the header's value (mc_auth_http_sign) */
#define MC_AUTH_HTTP_HEADER_MAX 432 /* room for the whole header line (mc_auth_http_header_for_url) */
#define MC_AUTH_HTTP_WINDOW_S 300 /* a signed HTTP request is valid this long either side of its time */

/* 1 when this process has a cluster secret. The first call reads it (and logs a bad secret file). */
int mc_auth_enabled(void);
/* Logs once per process, at the first call, that `component` accepts peers without a secret. No-op
 * when a secret is configured. */
void mc_auth_note_open(const char *component);
/* The tenant this process is a member of ("" = the whole cluster, or no secret). */
const char *mc_auth_tenant(void);
/* 1 when t[0, n) is a valid tenant id: 1 to MC_AUTH_TENANT_MAX bytes of UTF-8, no control character, not
 * "default". */
int mc_auth_tenant_ok(const char *t, size_t n);
/* For tests: forget the secret read before, so that the next call reads the environment again. */
void mc_auth_reset(void);

/* 1 when the n bytes at p (n >= 4) begin a client hello. */
int mc_auth_is_hello(const void *p, size_t n);

/* Client side, blocking, on a connected socket before any request: 0 when the server proved the secret
 * and accepted ours; 0 at once when we have no secret; -EACCES when the server refused us, holds another
 * secret or none; -errno on I/O (-ETIMEDOUT after timeout_ms without progress). */
int mc_auth_client(int fd, const char *service, int timeout_ms);
/* Server side, blocking, right after accept: 0 when the client proved the secret (or we have none);
 * -EACCES or -errno otherwise (the caller closes the socket; the refusal was sent and logged,
 * rate-limited, naming `service`). */
int mc_auth_server(int fd, const char *service, int timeout_ms);
/* The same, and the connection's realm into realm (>= MC_AUTH_TENANT_MAX + 1 bytes; "" = the whole
 * cluster, or no secret). */
int mc_auth_server_realm(int fd, const char *service, int timeout_ms, char *realm);
/* Answers a client hello on a server that has no secret ("MCAS" status 1) so that the client can say
 * why it stops. 0 or -errno. */
int mc_auth_answer_open(int fd, int timeout_ms);

/* Server side as a state machine, for event-driven servers. Zero-initialise, then feed input bytes:
 * returns the bytes consumed (0: need more), and appends what to send to out (*out_len; room for
 * MC_AUTH_CHALLENGE_MAX bytes). *done becomes 1 once the client is authenticated; realm then holds the
 * connection's realm. -1 when the client failed (the refusal to send is in out; close after sending it). */
struct mc_auth_srv {
  int state; /* 0: waiting for the hello, 1: waiting for the proof, 2: done */
  uint8_t nc[16], ns[16];
  char realm[MC_AUTH_TENANT_MAX + 1];
};
long mc_auth_srv_feed(struct mc_auth_srv *st, const char *service, const uint8_t *in, size_t n, uint8_t *out,
                      size_t *out_len, int *done);

/* HTTP requests that change state. mc_auth_http_sign writes the value of the MC_AUTH_HTTP_HEADER header
 * for method, path (mc_auth_http_canonical of the request target) and body into out (>=
 * MC_AUTH_HTTP_VALUE_MAX bytes), signed in this process's realm: "v1 <time> <nonce> <mac>" for a member
 * of the whole cluster, "v2 <time> <nonce> <tenant, hex> <mac>" for a tenant's; 0, or -1 without a secret.
 * mc_auth_http_check_realm: 1 when the header value is a valid signature of this request made within the
 * window and not seen before (a replay is refused), with the signer's realm in realm (>=
 * MC_AUTH_TENANT_MAX + 1 bytes); else 0. mc_auth_http_check: the same, for members of the whole cluster
 * only (a tenant's signature is refused). */
int mc_auth_http_sign(const char *method, const char *path, const void *body, size_t len, char *out, size_t cap);
int mc_auth_http_check_realm(const char *method, const char *path, const void *body, size_t len, const char *value,
                             char *realm);
int mc_auth_http_check(const char *method, const char *path, const void *body, size_t len, const char *value);

/* The form of a request target that is signed: the path percent-decoded, then, when there is a query,
 * '?' and its arguments in order, each name and value decoded ('+' as a space) and joined by '&' and '='
 * — what a server sees after decoding, whatever escaping the client chose. Caller frees. */
char *mc_auth_http_canonical(const char *target);
/* The whole header line ("X-Mooncake-Auth: v1 ...") for a request of method to url (its target: from the
 * first '/' after "scheme://host"); 0, or -1 when GET/HEAD (nothing to sign) or no secret. */
int mc_auth_http_header_for_url(const char *method, const char *url, const void *body, size_t len, char *out,
                                size_t cap);

/* Writes a new random secret (64 hex characters and a newline) to the file path, created with mode
 * 0600 and never over an existing file; path "-" prints it. 0 or -errno. */
int mc_auth_generate(const char *path);
/* Writes tenant id's secret (derived from this process's cluster secret; see above) to path the same
 * way. 0, -EPERM (no cluster secret, or this process is a tenant's), -EINVAL (bad id) or -errno. */
int mc_auth_generate_tenant(const char *id, const char *path);

#endif
