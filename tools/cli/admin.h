/* Shared by the operator tools (the `mooncake` CLI and bench/trace_replay): bounded HTTP requests to
 * the master's admin port, a reader for the Prometheus text exposition, and flag-spelling glue.
 * Nothing here keeps state between calls; every request has a connect and a total deadline. */
#ifndef MC_OPS_ADMIN_H
#define MC_OPS_ADMIN_H
#include <stddef.h>
#include <stdio.h>

#include "common/progress.h"

/* One admin answer. body is NUL-terminated (malloc'ed, may be empty); free with mc_admin_resp_free. */
struct mc_admin_resp {
  long status; /* HTTP status, 0 when no answer arrived */
  char *body;
  size_t len;
  char err[256]; /* why no answer arrived (transport failure) */
};

/* Sends METHOD http://addr/path (path starts with '/', query already escaped with mc_curl_escape) through
 * the shared libcurl wrapper with a connect timeout of min(timeout_ms, 3000), a total timeout of
 * timeout_ms, an answer of at most 8 GiB, and no proxy. Returns 0 when an HTTP answer arrived
 * (any status), -1 when none did (r->err says why). The caller frees r with mc_admin_resp_free. */
int mc_admin_request(const char *addr, const char *method, const char *path, long timeout_ms,
                     struct mc_admin_resp *r);
void mc_admin_resp_free(struct mc_admin_resp *r);

/* The value of the first sample named exactly `name` in a Prometheus text exposition: a line
 * "name value" or "name{labels} value" (comments skipped). 0 and *out, or -1 when absent. */
int mc_prom_value(const char *text, const char *name, double *out);
/* The sum of every sample named exactly `name` (all label sets). 0 and *out, or -1 when absent. */
int mc_prom_sum(const char *text, const char *name, double *out);

/* A copy of argv (argv[0] and positionals untouched) where each flag name's '-' after the leading
 * dashes becomes '_', so "--block-bytes=4K" and "--block_bytes=4K" mean the same. The strings are
 * malloc'ed; free with mc_ops_free_argv(argc, copy). */
char **mc_ops_underscore_flags(int argc, char **argv);
void mc_ops_free_argv(int argc, char **argv);

/* "host:port" of the admin port for a master RPC address "host[:port]" (common/hostport.h): host + ":9003"
 * ("127.0.0.1:9003" for ""). 0, or -1 when master is not an address. */
int mc_ops_admin_from_master(const char *master, char *out, size_t len);

#endif
