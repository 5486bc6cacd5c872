/* libmicrohttpd glue shared by the HTTP servers (see httpd.h). */
#include "net/httpd.h"

#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"

#define MAX_CONNECTIONS 1024u

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  size_t n = strlen(buf);
  while (n > 0 && buf[n - 1] == '\n') buf[--n] = 0;
  LOG_WARN_LIMITED("%s: %s", (const char *)cls, buf); /* e.g. one per refused connection */
}

static struct addrinfo *resolve(const struct mc_httpd_opts *o) {
  char ps[8];
  snprintf(ps, sizeof(ps), "%u", (unsigned)o->port);
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int rc = getaddrinfo(o->host && *o->host ? o->host : NULL, ps, &hints, &ai);
  if (rc) LOG_ERROR("%s: cannot resolve '%s': %s", o->name, o->host ? o->host : "", gai_strerror(rc));
  return rc ? NULL : ai;
}

/* "::" (the IPv6 any address) listens on IPv4 too; any other IPv6 address only on itself. */
static unsigned family_flags(const struct addrinfo *ai) {
  if (ai->ai_family != AF_INET6) return 0;
  static const unsigned char any6[16];
  const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ai->ai_addr;
  return memcmp(&a->sin6_addr, any6, sizeof(any6)) ? MHD_USE_IPv6 : MHD_USE_DUAL_STACK;
}

struct MHD_Daemon *mc_httpd_start(const struct mc_httpd_opts *o, uint16_t *port_out) {
  struct addrinfo *ai = resolve(o);
  if (!ai) return NULL;
  /* docs/operations.md, "Connection limits": one client address cannot take every connection */
  unsigned per_ip = (unsigned)mc_knob_long(MC_KNOB_HTTP_MAX_CONNECTIONS_PER_IP); /* at most MAX_CONNECTIONS */
  unsigned idle_s = (unsigned)mc_knob_long(MC_KNOB_HTTP_CONNECTION_TIMEOUT_S);
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | family_flags(ai) |
                   (o->suspend ? MHD_ALLOW_SUSPEND_RESUME : 0);
  /* MHD's default SO_REUSEADDR allows a quick restart; LISTENING_ADDRESS_REUSE would add SO_REUSEPORT
   * and let a second server share a port that is in use. */
  /* clang-format off */
  struct MHD_Daemon *d = MHD_start_daemon(flags, o->port, NULL, NULL, o->handler, o->cls,
                          MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, (void *)o->name, /* must come first */
                          MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                          MHD_OPTION_NOTIFY_COMPLETED, o->completed, o->cls,
                          MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                          MHD_OPTION_CONNECTION_LIMIT, MAX_CONNECTIONS,
                          MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                          MHD_OPTION_THREAD_POOL_SIZE, o->threads ? o->threads : 1u,
                          MHD_OPTION_END);
  /* clang-format on */
  freeaddrinfo(ai);
  if (!d) {
    LOG_ERROR("%s: cannot listen on %s:%u", o->name, o->host ? o->host : "", (unsigned)o->port);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  *port_out = info && info->port ? info->port : o->port;
  return d;
}

mc_mhd_ret mc_httpd_reply(struct MHD_Connection *c, unsigned status, const char *body, size_t len, const char *ctype) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  mc_mhd_ret rc = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return rc;
}

/* ---- requests that change state (docs/security.md) ---- */

struct canon {
  char *buf;
  size_t len, cap;
};

static void canon_add(struct canon *k, const char *p, size_t n) {
  if (k->len + n + 1 > k->cap) {
    while (k->len + n + 1 > k->cap) k->cap = k->cap ? 2 * k->cap : 256;
    k->buf = mc_realloc(k->buf, k->cap);
  }
  memcpy(k->buf + k->len, p, n);
  k->len += n;
  k->buf[k->len] = 0;
}

static mc_mhd_ret canon_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  struct canon *k = cls;
  canon_add(k, strchr(k->buf, '?') ? "&" : "?", 1);
  canon_add(k, key, strlen(key));
  if (value) {
    canon_add(k, "=", 1);
    canon_add(k, value, strlen(value));
  }
  return MHD_YES;
}

int mc_httpd_cross_site(struct MHD_Connection *c) {
  const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
  if (site && strcmp(site, "same-origin") && strcmp(site, "none")) return 1;
  const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
  const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!origin) return 0;
  const char *o = strstr(origin, "://");
  return !host || !o || strcmp(o + 3, host);
}

int mc_httpd_authorized_realm(struct MHD_Connection *c, const char *method, const char *url, const void *body,
                              size_t len, char *realm) {
  realm[0] = 0;
  if (mc_httpd_cross_site(c)) return 0;
  if (!mc_auth_enabled()) return 1;
  struct canon k = {0};
  canon_add(&k, url, strlen(url));
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, canon_arg, &k);
  int ok = mc_auth_http_check_realm(method, k.buf, body, len,
                                    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MC_AUTH_HTTP_HEADER), realm);
  mc_free(k.buf);
  return ok;
}

int mc_httpd_authorized(struct MHD_Connection *c, const char *method, const char *url, const void *body, size_t len) {
  char realm[MC_AUTH_TENANT_MAX + 1];
  return mc_httpd_authorized_realm(c, method, url, body, len, realm) && !realm[0];
}
