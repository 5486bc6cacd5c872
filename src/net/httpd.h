/* The libmicrohttpd glue shared by the project's HTTP servers (the TE metadata server, the master's
 * admin/metrics server): resolving and binding host:port ("::" = dual-stack IPv6 + IPv4), the bounded
 * daemon options every server uses, MHD's log routed to ours, and one reply helper. Knows nothing of
 * what the servers serve. */
#ifndef MC_NET_HTTPD_H
#define MC_NET_HTTPD_H
#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mc_mhd_ret;
#else
typedef int mc_mhd_ret;
/* Requests that change state (docs/security.md). mc_httpd_cross_site: 1 when a browser sent the request
 * from another site (Sec-Fetch-Site other than same-origin/none, or an Origin that is not this host):
 * such requests never change anything, secret or not. mc_httpd_authorized: 1 when the request may
 * proceed: not cross-site, and no cluster secret is configured or it carries a valid X-Mooncake-Auth
 * signature of method, url with its query arguments (as MHD decoded them, in order) and body, made by a
 * member of the whole cluster. mc_httpd_authorized_realm: the same, accepting a tenant's signature too,
 * with the signer's realm in realm (>= MC_AUTH_TENANT_MAX + 1 bytes): the tenant id, or "" for a member
 * of the whole cluster or when no secret is configured (an open cluster). */
int mc_httpd_cross_site(struct MHD_Connection *c);
int mc_httpd_authorized(struct MHD_Connection *c, const char *method, const char *url, const void *body, size_t len);
int mc_httpd_authorized_realm(struct MHD_Connection *c, const char *method, const char *url, const void *body,
                              size_t len, char *realm);

#endif

struct mc_httpd_opts {
  const char *name; /* for log lines, e.g. "metadata server" */
  const char *host; /* bind address; NULL or "" = any IPv4; "::" = dual stack */
  uint16_t port;    /* 0 = ephemeral */
  MHD_AccessHandlerCallback handler;
  MHD_RequestCompletedCallback completed; /* may be NULL */
  void *cls;        /* passed to both callbacks */
  unsigned threads; /* thread pool size (>= 1) */
  int suspend;      /* handlers may MHD_suspend_connection (MHD_ALLOW_SUSPEND_RESUME) */
};

/* Starts a daemon with its own threads: at most 1024 connections, MC_HTTP_MAX_CONNECTIONS_PER_IP (64) from
 * one client address, an idle connection closed after MC_HTTP_CONNECTION_TIMEOUT_S (10 s).
 * *port_out gets the bound port. NULL (logged) when the address cannot be resolved or bound. */
struct MHD_Daemon *mc_httpd_start(const struct mc_httpd_opts *o, uint16_t *port_out);

/* Queues a response with a copy of body and the given Content-Type. */
mc_mhd_ret mc_httpd_reply(struct MHD_Connection *c, unsigned status, const char *body, size_t len, const char *ctype);

/* Requests that change state (docs/security.md). mc_httpd_cross_site: 1 when a browser sent the request
 * from another site (Sec-Fetch-Site other than same-origin/none, or an Origin that is not this host):
 * such requests never change anything, secret or not. mc_httpd_authorized: 1 when the request may
 * proceed: not cross-site, and no cluster secret is configured or it carries a valid X-Mooncake-Auth
 * signature of method, url with its query arguments (as MHD decoded them, in order) and body, made by a
 * member of the whole cluster. mc_httpd_authorized_realm: the same, accepting a tenant's signature too,
 * with the signer's realm in realm (>= MC_AUTH_TENANT_MAX + 1 bytes): the tenant id, or "" for a member
 * of the whole cluster or when no secret is configured (an open cluster). */
int mc_httpd_cross_site(struct MHD_Connection *c);
int mc_httpd_authorized(struct MHD_Connection *c, const char *method, const char *url, const void *body, size_t len);
int mc_httpd_authorized_realm(struct MHD_Connection *c, const char *method, const char *url, const void *body,
                              size_t len, char *realm);

#endif
