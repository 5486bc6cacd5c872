/* mooncake: the operator's command-line tool. Talks only to the master's admin HTTP port (status,
 * segments, keys, one key's replicas, remove, drain, live metrics); readable tables by default, one
 * JSON document with --json. Every request is bounded (--timeout-ms); it never waits without a limit.
 * Exit codes: 0 ok, 1 the master refused or failed the operation, 2 bad arguments, 3 the master's admin
 * port could not be reached (or did not answer in time), 4 no such key / segment / job. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/admin.h"
#include "common/alloc.h"
#include "meta/metadata_curl.h"
#include "net/auth.h"
#include "common/knobs.h"
#include "common/util.h"
#include "common/version.h"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2, EX_UNREACHABLE = 3, EX_NOTFOUND = 4 };

struct cli {
  const char *admin;
  int json;
  long timeout_ms;
};

/* ------------------------------------------------------------------ help */

struct command {
  const char *name, *args, *help;
  int (*run)(struct cli *, int, char **);
};

static const struct command *commands(void);
static const struct command *find_command(const char *name);

static void usage_all(FILE *f) {
  fprintf(f,
          "usage: mooncake [--master-admin=host:port] [--json] [--timeout-ms=N] <command> [args]\n\n"
          "Talks to mooncake_master's admin HTTP port (--master-admin, else $MOONCAKE_ADMIN, else 127.0.0.1:9003).\n\n"
          "commands:\n");
  for (const struct command *c = commands(); c->name; c++)
    fprintf(f, "  %-11s %.*s\n", c->name, (int)strcspn(c->help, ".\n"), c->help);
  fprintf(f, "\n'mooncake <command> --help' describes one command.\n"
             "exit codes: 0 ok, 1 operation failed, 2 bad arguments, 3 master unreachable, 4 not found\n");
}

/* On stdout (--help) the whole description; on stderr (after a usage error) the usage line. */
static int usage_cmd(const struct command *c, FILE *f) {
  fprintf(f, "usage: mooncake [--master-admin=host:port] [--json] %s%s%s\n", c->name, *c->args ? " " : "", c->args);
  if (f == stdout) fprintf(f, "\n%s\n", c->help);
  else fprintf(f, "(see 'mooncake %s --help')\n", c->name);
  return f == stdout ? EX_OK : EX_USAGE;
}

static int bad_args(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mooncake %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return usage_cmd(find_command(cmd), stderr);
}

/* ------------------------------------------------------------------ HTTP with error mapping */

/* Prints why a request failed and returns the exit code for it. */
static int report_failure(const struct cli *c, const char *what, const struct mc_admin_resp *r, int transport_rc) {
  if (transport_rc) {
    fprintf(stderr, "mooncake: cannot reach the master admin port at %s: %s\n", c->admin, r->err);
    return EX_UNREACHABLE;
  }
  json_t *o = json_loads(r->body ? r->body : "", 0, NULL);
  const char *msg = json_string_value(json_object_get(o, "error_message"));
  if (!msg) msg = json_string_value(json_object_get(o, "error"));
  json_t *code = json_object_get(o, "error_code");
  if (msg && json_is_integer(code))
    fprintf(stderr, "mooncake: %s: %s (%lld)\n", what, msg, (long long)json_integer_value(code));
  else if (msg) fprintf(stderr, "mooncake: %s: %s\n", what, msg);
  else fprintf(stderr, "mooncake: %s: HTTP %ld %.200s\n", what, r->status, r->body ? r->body : "");
  json_decref(o);
  if (r->status == 503) fprintf(stderr, "mooncake: the master at %s is not serving (standby or starting)\n", c->admin);
  return r->status == 404 ? EX_NOTFOUND : EX_FAIL;
}

/* One request; 0 with r filled on a 2xx answer, else the exit code (message printed, r freed). */
static int call(const struct cli *c, const char *method, const char *path, const char *what, struct mc_admin_resp *r) {
  int rc = mc_admin_request(c->admin, method, path, c->timeout_ms, r);
  if (!rc && r->status >= 200 && r->status < 300) return 0;
  int ex = report_failure(c, what, r, rc);
  mc_admin_resp_free(r);
  return ex;
}

/* GET path and parse the JSON body into *out (new reference). 0 or an exit code. */
static int call_json(const struct cli *c, const char *method, const char *path, const char *what, json_t **out) {
  struct mc_admin_resp r;
  int ex = call(c, method, path, what, &r);
  if (ex) return ex;
  json_error_t err;
  *out = json_loads(r.body, 0, &err);
  if (!*out) fprintf(stderr, "mooncake: %s: the master answered something that is not JSON: %s\n", what, err.text);
  mc_admin_resp_free(&r);
  return *out ? 0 : EX_FAIL;
}

/* POST whose JSON answer must say "success": true. 0 with *out, or an exit code (message printed). */
static int post_checked(const struct cli *c, const char *path, const char *what, json_t **out) {
  int ex = call_json(c, "POST", path, what, out);
  if (ex || json_is_true(json_object_get(*out, "success"))) return ex;
  const char *msg = json_string_value(json_object_get(*out, "error_message"));
  fprintf(stderr, "mooncake: %s: %s\n", what, msg ? msg : "the master did not report success");
  json_decref(*out);
  *out = NULL;
  return EX_FAIL;
}

static void print_json(json_t *o) {
  char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(12));
  printf("%s\n", s ? s : "null");
  free(s);
}

/* ------------------------------------------------------------------ tables */

#define MAX_COLS 8
struct table {
  int ncols;
  const char *head[MAX_COLS];
  int right[MAX_COLS]; /* right-align numbers */
  char **cells;        /* rows x ncols */
  size_t rows, cap;
};

static void table_add(struct table *t, ...) {
  if (t->rows == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 16;
    t->cells = realloc(t->cells, t->cap * MAX_COLS * sizeof(char *));
  }
  va_list ap;
  va_start(ap, t);
  for (int i = 0; i < t->ncols; i++) t->cells[t->rows * MAX_COLS + i] = strdup(va_arg(ap, const char *));
  va_end(ap);
  t->rows++;
}

static void table_print(struct table *t) {
  int w[MAX_COLS];
  for (int i = 0; i < t->ncols; i++) {
    w[i] = (int)strlen(t->head[i]);
    for (size_t r = 0; r < t->rows; r++) {
      int n = (int)strlen(t->cells[r * MAX_COLS + i]);
      if (n > w[i]) w[i] = n;
    }
  }
  for (size_t r = 0; r <= t->rows; r++) {
    for (int i = 0; i < t->ncols; i++) {
      const char *s = r ? t->cells[(r - 1) * MAX_COLS + i] : t->head[i];
      int last = i == t->ncols - 1;
      if (t->right[i]) printf("%*s%s", w[i], s, last ? "" : "  ");
      else printf("%-*s%s", last ? 0 : w[i], s, last ? "" : "  ");
    }
    printf("\n");
  }
  for (size_t r = 0; r < t->rows; r++)
    for (int i = 0; i < t->ncols; i++) free(t->cells[r * MAX_COLS + i]);
  free(t->cells);
}

static const char *human(double bytes, char *buf, size_t len) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (fabs(bytes) >= 1024 && u < 5) bytes /= 1024, u++;
  if (u) snprintf(buf, len, "%.1f %s", bytes, unit[u]);
  else snprintf(buf, len, "%.0f B", bytes);
  return buf;
}

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(json_t *o, const char *key, const char *def) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : def;
}

/* ------------------------------------------------------------------ metrics */

/* The guide's five metrics plus the capacity/keys/clients gauges status shows. */
static const char *const guide_metrics[] = {"master_segment_count", "eviction_rate", "te_transfer_latency_p99",
                                            "store_hit_ratio", "master_rpc_qps", NULL};
static const char *const extra_metrics[] = {"master_key_count", "master_active_clients", "master_total_capacity_bytes",
                                            "master_allocated_bytes", "store_lookup_hits_total",
                                            "store_lookup_misses_total", NULL};

/* Fetches /metrics into a JSON object {name: value|null} over both lists. 0 or an exit code. */
static int fetch_metrics(const struct cli *c, json_t **out) {
  struct mc_admin_resp r;
  int ex = call(c, "GET", "/metrics", "GET /metrics", &r);
  if (ex) return ex;
  json_t *o = json_object();
  const char *const *lists[] = {guide_metrics, extra_metrics};
  for (int l = 0; l < 2; l++)
    for (const char *const *n = lists[l]; *n; n++) {
      double v;
      json_object_set_new(o, *n, mc_prom_value(r.body, *n, &v) || isnan(v) ? json_null() : json_real(v));
    }
  mc_admin_resp_free(&r);
  *out = o;
  return 0;
}

static const char *fmt_metric(json_t *m, const char *name, char *buf, size_t len) {
  double v = num(m, name);
  if (isnan(v)) return "-";
  if (!strcmp(name, "te_transfer_latency_p99")) snprintf(buf, len, "%.3f ms", v * 1000);
  else if (!strcmp(name, "store_hit_ratio")) snprintf(buf, len, "%.2f %%", v * 100);
  else if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, len, "%.0f", v);
  else snprintf(buf, len, "%.2f", v);
  return buf;
}

/* ------------------------------------------------------------------ commands */

/* Options go through getopt_long_only (docs/operations.md, "The `mooncake` tool"): "--name=value" and
 * "--name value" alike, "-name" as "--name", unambiguous prefixes, options and positionals in any order
 * after the command, "--" ending the options. */
struct opt {
  const char *name;
  int has_value;
  const char **value; /* set for options with a value */
  int *flag;          /* set for booleans */
};

#define MAX_OPTS 8
enum { OPT_JSON = 0x100, OPT_TIMEOUT, OPT_ADMIN, OPT_VERSION, OPT_BASE = 0x200 }; /* getopt values beyond any char */

/* The next option of argv, or -1 when none is left; -2 when argv[optind - 1] is not one of lo (printed
 * as "<who>: <why>"). The caller resets optind to 0 before its first call. */
static int next_opt(int argc, char **argv, const char *shortopts, const struct option *lo, const char *who) {
  opterr = 0; /* the messages below say which argument and why */
  int v = getopt_long_only(argc, argv, shortopts, lo, NULL);
  if (v != '?' && v != ':') return v;
  const char *a = argv[optind - 1], *name = a + strspn(a, "-");
  if (v == ':') fprintf(stderr, "%s: option '%s' needs a value\n", who, a);
  else if (optopt && optopt < OPT_JSON && a[1] != '-' && !a[2]) fprintf(stderr, "%s: unknown option '-%c'\n", who, optopt);
  else if (optopt && strchr(name, '=')) fprintf(stderr, "%s: option '%.*s' takes no value\n", who, (int)strcspn(a, "="), a);
  else fprintf(stderr, "%s: unknown option '%s'\n", who, a);
  return -2;
}

/* Parses a command's options (argv[0] is the command); --help and --json are every command's. Positionals
 * are collected in pos. 0, or EX_USAGE after printing why and the command's usage. */
static int parse_opts(struct cli *c, int argc, char **argv, struct opt *opts, const char **pos, int maxpos,
                      int *npos, int *help) {
  struct option lo[MAX_OPTS + 3];
  int n = 0;
  for (; opts[n].name && n < MAX_OPTS; n++)
    lo[n] = (struct option){opts[n].name, opts[n].has_value ? required_argument : no_argument, NULL, OPT_BASE + n};
  lo[n] = (struct option){"help", no_argument, NULL, 'h'};
  lo[n + 1] = (struct option){"json", no_argument, NULL, OPT_JSON};
  lo[n + 2] = (struct option){NULL, 0, NULL, 0};
  char who[64];
  snprintf(who, sizeof(who), "mooncake %s", argv[0]);
  *npos = 0;
  optind = 0;
  for (int v; (v = next_opt(argc, argv, ":h", lo, who)) != -1;) {
    if (v == -2) return usage_cmd(find_command(argv[0]), stderr);
    if (v == 'h') *help = 1;
    else if (v == OPT_JSON) c->json = 1;
    else if (opts[v - OPT_BASE].has_value) *opts[v - OPT_BASE].value = optarg;
    else *opts[v - OPT_BASE].flag = 1;
  }
  if (*help) return 0;
  for (int i = optind; i < argc; i++) {
    if (*npos == maxpos) return bad_args(argv[0], "unexpected argument '%s'", argv[i]);
    pos[(*npos)++] = argv[i];
  }
  return 0;
}

/* A non-negative number from an option value; -1 when invalid. */
static double parse_num(const char *s, double max) {
  char *e;
  errno = 0;
  double v = s && *s ? strtod(s, &e) : -1;
  if (!s || !*s || *e || errno || v < 0 || v > max || isnan(v)) return -1;
  return v;
}

#define PARSE(cmdname, opts, pos, maxpos, npos)                                          \
  do {                                                                                    \
    int help_ = 0, rc_ = parse_opts(c, argc, argv, opts, pos, maxpos, &npos, &help_);     \
    if (rc_) return rc_;                                                                  \
    if (help_) return usage_cmd(find_command(cmdname), stdout);                           \
  } while (0)

static int cmd_status(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[1];
  int npos;
  PARSE("status", opts, pos, 0, npos);
  json_t *health = NULL, *segs = NULL, *m = NULL;
  int ex = call_json(c, "GET", "/health", "GET /health", &health);
  if (!ex) ex = call_json(c, "GET", "/get_segments_detail", "GET /get_segments_detail", &segs);
  if (!ex) ex = fetch_metrics(c, &m);
  if (ex) goto out;
  double cap = 0, used = 0;
  size_t i, nseg = json_array_size(json_object_get(segs, "segments"));
  json_t *s;
  json_array_foreach(json_object_get(segs, "segments"), i, s) {
    double sc = num(s, "allocator_capacity_bytes"), su = num(s, "allocator_used_bytes");
    cap += isnan(sc) ? (isnan(num(s, "size_bytes")) ? 0 : num(s, "size_bytes")) : sc;
    used += isnan(su) ? 0 : su;
  }
  double keys = num(m, "master_key_count"), clients = num(m, "master_active_clients");
  if (c->json) {
    json_t *o = json_pack("{s:s, s:O, s:I, s:I, s:I, s:f}", "master_admin", c->admin, "health", health, "segments",
                          (json_int_t)nseg, "capacity_bytes", (json_int_t)cap, "used_bytes", (json_int_t)used, "use_percent",
                          cap > 0 ? used * 100 / cap : 0.0);
    json_object_set_new(o, "keys", isnan(keys) ? json_null() : json_integer((json_int_t)keys));
    json_object_set_new(o, "clients", isnan(clients) ? json_null() : json_integer((json_int_t)clients));
    json_t *g = json_object();
    for (const char *const *n = guide_metrics; *n; n++) json_object_set(g, *n, json_object_get(m, *n));
    json_object_set_new(o, "metrics", g);
    print_json(o);
    json_decref(o);
    goto out;
  }
  char b1[32], b2[32], b3[32];
  printf("master        %s  status=%s role=%s service_ready=%s\n", c->admin, str(health, "status", "?"),
         str(health, "role", "?"), json_is_true(json_object_get(health, "service_ready")) ? "true" : "false");
  printf("segments      %zu\n", nseg);
  printf("capacity      %s used of %s (%.1f %%)\n", human(used, b1, sizeof(b1)), human(cap, b2, sizeof(b2)),
         cap > 0 ? used * 100 / cap : 0.0);
  printf("keys          %s\n", fmt_metric(m, "master_key_count", b3, sizeof(b3)));
  printf("clients       %s\n", fmt_metric(m, "master_active_clients", b3, sizeof(b3)));
  printf("\n");
  struct table t = {.ncols = 2, .head = {"metric", "value"}, .right = {0, 1}};
  for (const char *const *n = guide_metrics; *n; n++) table_add(&t, *n, fmt_metric(m, *n, b3, sizeof(b3)));
  table_print(&t);
out:
  json_decref(health);
  json_decref(segs);
  json_decref(m);
  return ex;
}

static int cmd_segments(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[1];
  int npos;
  PARSE("segments", opts, pos, 0, npos);
  json_t *segs = NULL;
  int ex = call_json(c, "GET", "/get_segments_detail", "GET /get_segments_detail", &segs);
  if (ex) return ex;
  json_t *list = json_object_get(segs, "segments"), *s, *out = json_array();
  size_t i;
  json_array_foreach(list, i, s) {
    double cap = num(s, "allocator_capacity_bytes"), used = num(s, "allocator_used_bytes");
    if (isnan(cap)) cap = num(s, "size_bytes");
    double pct = num(s, "allocator_usage_percent");
    if (isnan(pct)) pct = cap > 0 && !isnan(used) ? used * 100 / cap : 0;
    json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:I, s:I, s:f, s:s, s:s, s:s}", "name",
                                         str(s, "segment_name", ""), "segment_id", str(s, "segment_id", ""), "zone",
                                         str(s, "zone", ""), "capacity_bytes", (json_int_t)(isnan(cap) ? 0 : cap),
                                         "used_bytes", (json_int_t)(isnan(used) ? 0 : used), "use_percent", pct, "status",
                                         str(s, "status", ""), "te_endpoint", str(s, "te_endpoint", ""),
                                         "client_id", str(s, "client_id", "")));
  }
  if (c->json) {
    json_t *o = json_pack("{s:I, s:O}", "total_segments", (json_int_t)json_array_size(out), "segments", out);
    print_json(o);
    json_decref(o);
  } else {
    struct table t = {.ncols = 6, .head = {"NAME", "ZONE", "CAPACITY", "USED", "USE%", "STATUS"},
                      .right = {0, 0, 1, 1, 1, 0}};
    json_array_foreach(out, i, s) {
      char b1[32], b2[32], b3[32];
      snprintf(b3, sizeof(b3), "%.1f", num(s, "use_percent"));
      const char *zone = str(s, "zone", "");
      table_add(&t, str(s, "name", ""), *zone ? zone : "-", human(num(s, "capacity_bytes"), b1, sizeof(b1)),
                human(num(s, "used_bytes"), b2, sizeof(b2)), b3, str(s, "status", ""));
    }
    table_print(&t);
    printf("%zu segment(s)\n", json_array_size(out));
  }
  json_decref(out);
  json_decref(segs);
  return EX_OK;
}

static int cmd_keys(struct cli *c, int argc, char **argv) {
  const char *prefix = "", *limit_s = NULL;
  struct opt opts[] = {{"prefix", 1, &prefix, NULL}, {"limit", 1, &limit_s, NULL}, {NULL}};
  const char *pos[1];
  int npos;
  PARSE("keys", opts, pos, 0, npos);
  double limit = limit_s ? parse_num(limit_s, 1e12) : 0;
  if (limit < 0 || limit != floor(limit)) return bad_args("keys", "--limit needs a non-negative integer, got '%s'", limit_s);
  char *esc = mc_curl_escape(prefix), *path = malloc(strlen(esc) + 32);
  sprintf(path, *prefix ? "/get_all_keys?prefix=%s" : "/get_all_keys", esc);
  struct mc_admin_resp r;
  int ex = call(c, "GET", path, "GET /get_all_keys", &r);
  mc_free(esc);
  free(path);
  if (ex) return ex;
  json_t *keys = json_array();
  size_t total = 0, plen = strlen(prefix);
  for (char *save = NULL, *k = strtok_r(r.body, "\n", &save); k; k = strtok_r(NULL, "\n", &save)) {
    size_t n = strlen(k);
    if (n && k[n - 1] == '\r') k[n - 1] = 0;
    if (!*k || strncmp(k, prefix, plen)) continue; /* the prefix is also applied here */
    total++;
    if (!limit || json_array_size(keys) < (size_t)limit) json_array_append_new(keys, json_string(k));
  }
  mc_admin_resp_free(&r);
  size_t shown = json_array_size(keys);
  if (c->json) {
    json_t *o = json_pack("{s:s, s:I, s:b, s:O}", "prefix", prefix, "count", (json_int_t)total, "truncated",
                          shown < total, "keys", keys);
    print_json(o);
    json_decref(o);
  } else {
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) printf("%s\n", json_string_value(k));
    if (shown < total) fprintf(stderr, "(%zu of %zu keys shown; raise --limit)\n", shown, total);
  }
  json_decref(keys);
  return EX_OK;
}

static int cmd_key(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[1];
  int npos;
  PARSE("key", opts, pos, 1, npos);
  if (npos != 1 || !*pos[0]) return bad_args("key", "needs exactly one key");
  char *esc = mc_curl_escape(pos[0]), *path = malloc(strlen(esc) + 32), what[300];
  sprintf(path, "/query_key?key=%s", esc);
  snprintf(what, sizeof(what), "key '%.256s'", pos[0]);
  json_t *o = NULL;
  int ex = call_json(c, "GET", path, what, &o);
  mc_free(esc);
  free(path);
  if (ex) return ex;
  json_t *data = json_object_get(o, "data"), *rep, *reps = json_array();
  size_t i;
  json_array_foreach(data, i, rep) {
    double size = num(rep, "size_");
    json_array_append_new(reps, json_pack("{s:I, s:s, s:s, s:s}", "size_bytes", (json_int_t)(isnan(size) ? 0 : size), "buffer_address",
                                          str(rep, "buffer_address_", ""), "protocol", str(rep, "protocol_", ""),
                                          "transport_endpoint", str(rep, "transport_endpoint_", "")));
    /* buffer_address_ may be a number upstream */
    json_t *ba = json_object_get(rep, "buffer_address_");
    if (json_is_integer(ba)) {
      char b[32];
      snprintf(b, sizeof(b), "0x%llx", (unsigned long long)json_integer_value(ba));
      json_object_set_new(json_array_get(reps, i), "buffer_address", json_string(b));
    }
  }
  if (c->json) {
    json_t *out = json_pack("{s:s, s:I, s:O}", "key", pos[0], "replica_count", (json_int_t)json_array_size(reps),
                            "replicas", reps);
    print_json(out);
    json_decref(out);
  } else {
    printf("key %s: %zu replica(s)\n", pos[0], json_array_size(reps));
    struct table t = {.ncols = 5, .head = {"#", "SIZE", "ENDPOINT", "PROTOCOL", "ADDRESS"}, .right = {1, 1, 0, 0, 0}};
    json_array_foreach(reps, i, rep) {
      char idx[24], sz[32];
      snprintf(idx, sizeof(idx), "%zu", i);
      snprintf(sz, sizeof(sz), "%.0f", num(rep, "size_bytes"));
      table_add(&t, idx, sz, str(rep, "transport_endpoint", ""), str(rep, "protocol", ""),
                str(rep, "buffer_address", ""));
    }
    table_print(&t);
  }
  json_decref(reps);
  json_decref(o);
  return EX_OK;
}

static int cmd_remove(struct cli *c, int argc, char **argv) {
  int force = 0;
  struct opt opts[] = {{"force", 0, NULL, &force}, {NULL}};
  const char *pos[1];
  int npos;
  PARSE("remove", opts, pos, 1, npos);
  if (npos != 1 || !*pos[0]) return bad_args("remove", "needs exactly one key");
  char *esc = mc_curl_escape(pos[0]), *path = malloc(strlen(esc) + 48), what[300];
  sprintf(path, "/api/v1/remove?key=%s%s", esc, force ? "&force=1" : "");
  snprintf(what, sizeof(what), "remove '%.256s'", pos[0]);
  json_t *o = NULL;
  int ex = post_checked(c, path, what, &o);
  mc_free(esc);
  free(path);
  if (ex) return ex;
  if (c->json) {
    json_t *out = json_pack("{s:s, s:b, s:b}", "key", pos[0], "removed", 1, "force", force);
    print_json(out);
    json_decref(out);
  } else {
    printf("removed %s\n", pos[0]);
  }
  json_decref(o);
  return EX_OK;
}

static int cmd_remove_all(struct cli *c, int argc, char **argv) {
  int force = 0;
  struct opt opts[] = {{"force", 0, NULL, &force}, {NULL}};
  const char *pos[1];
  int npos;
  PARSE("remove-all", opts, pos, 0, npos);
  json_t *o = NULL;
  int ex = post_checked(c, force ? "/api/v1/remove_all?force=1" : "/api/v1/remove_all", "remove-all", &o);
  if (ex) return ex;
  double n = num(o, "removed_count");
  if (isnan(n)) {
    fprintf(stderr, "mooncake: remove-all: the master's answer has no removed_count\n");
    json_decref(o);
    return EX_FAIL;
  }
  if (c->json) {
    json_t *out = json_pack("{s:I, s:b}", "removed_count", (json_int_t)n, "force", force);
    print_json(out);
    json_decref(out);
  } else {
    printf("removed %.0f object(s)%s\n", n, force ? "" : " (leased objects skipped; --force removes them too)");
  }
  json_decref(o);
  return EX_OK;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_drain(struct cli *c, int argc, char **argv) {
  int wait = 0;
  const char *wait_s = "60";
  struct opt opts[] = {{"wait", 0, NULL, &wait}, {"wait-timeout", 1, &wait_s, NULL}, {NULL}};
  const char *pos[1];
  int npos;
  PARSE("drain", opts, pos, 1, npos);
  double limit = parse_num(wait_s, 86400);
  if (npos != 1 || !*pos[0]) return bad_args("drain", "needs exactly one segment name");
  if (limit < 0) return bad_args("drain", "--wait-timeout needs seconds, got '%s'", wait_s);
  char *esc = mc_curl_escape(pos[0]), *path = malloc(strlen(esc) + 64), what[300];
  sprintf(path, "/api/v1/drain_jobs?segment=%s", esc);
  snprintf(what, sizeof(what), "drain '%.256s'", pos[0]);
  json_t *o = NULL, *q = NULL;
  int ex = call_json(c, "POST", path, what, &o);
  mc_free(esc);
  free(path);
  if (ex) return ex;
  json_t *jid = json_object_get(o, "job_id");
  char job[128];
  if (json_is_string(jid)) snprintf(job, sizeof(job), "%s", json_string_value(jid));
  else if (json_is_integer(jid)) snprintf(job, sizeof(job), "%lld", (long long)json_integer_value(jid));
  else {
    fprintf(stderr, "mooncake: %s: the master answered without a job_id\n", what);
    json_decref(o);
    return EX_FAIL;
  }
  const char *status = str(o, "status", "DRAINING");
  double used = NAN;
  double deadline = mono_s() + limit;
  char qpath[256];
  char *jesc = mc_curl_escape(job);
  snprintf(qpath, sizeof(qpath), "/api/v1/drain_jobs/query?job_id=%s", jesc);
  mc_free(jesc);
  /* Without --wait: one query for the current state. With it: poll until DRAINED or the deadline,
   * showing how far it is (on stderr: stdout stays the one answer). */
  struct mc_progress pr;
  mc_progress_start(&pr, stderr, isatty(STDERR_FILENO), MC_PROGRESS_EVERY_S);
  double started = mono_s();
  do {
    json_decref(q);
    q = NULL;
    if ((ex = call_json(c, "GET", qpath, what, &q))) break;
    status = str(q, "status", "?");
    used = num(q, "used_bytes");
    if (!wait || !strcmp(status, "DRAINED") || mono_s() >= deadline) break;
    char b[32];
    mc_progress_show(&pr, "drain %.100s: %s, %s still stored, %.0f s of %.0f", pos[0], status,
                     isnan(used) ? "?" : human(used, b, sizeof(b)), mono_s() - started, limit);
    sleep_ms(200);
  } while (1);
  mc_progress_end(&pr);
  if (!ex && wait && strcmp(status, "DRAINED")) {
    fprintf(stderr, "mooncake: %s: still %s after %.0f s (job %s)\n", what, status, limit, job);
    ex = EX_FAIL;
  }
  if (!ex || (ex == EX_FAIL && q)) {
    if (c->json) {
      json_t *out = json_pack("{s:s, s:s, s:s}", "segment", pos[0], "job_id", job, "status", status);
      json_object_set_new(out, "used_bytes", isnan(used) ? json_null() : json_integer((json_int_t)used));
      print_json(out);
      json_decref(out);
    } else {
      char b[32];
      printf("segment %s: drain job %s %s", pos[0], job, status);
      if (!isnan(used)) printf(" (%s still stored)", human(used, b, sizeof(b)));
      printf("\n");
    }
  }
  json_decref(q);
  json_decref(o);
  return ex;
}

static int cmd_metrics(struct cli *c, int argc, char **argv) {
  int follow = 0;
  const char *interval_s = "1", *count_s = "0";
  struct opt opts[] = {{"follow", 0, NULL, &follow}, {"interval", 1, &interval_s, NULL}, {"count", 1, &count_s, NULL},
                       {NULL}};
  const char *pos[1];
  int npos;
  PARSE("metrics", opts, pos, 0, npos);
  double interval = parse_num(interval_s, 3600), count = parse_num(count_s, 1e9);
  if (interval <= 0) return bad_args("metrics", "--interval needs positive seconds, got '%s'", interval_s);
  if (count < 0 || count != floor(count)) return bad_args("metrics", "--count needs a non-negative integer, got '%s'", count_s);
  long n = follow ? (long)count : 1; /* follow without --count: until interrupted */
  static const char *cols[] = {"master_segment_count", "eviction_rate", "te_transfer_latency_p99", "store_hit_ratio",
                               "master_rpc_qps", "master_key_count"};
  if (!c->json && follow)
    printf("%-8s  %8s  %10s  %10s  %9s  %9s  %9s\n", "TIME", "SEGMENTS", "EVICT/S", "P99", "HIT%", "RPC/S", "KEYS");
  for (long i = 0; !n || i < n; i++) {
    if (i) sleep_ms((long)(interval * 1000));
    json_t *m = NULL;
    int ex = fetch_metrics(c, &m);
    if (ex) return ex;
    time_t now = time(NULL);
    char ts[16];
    strftime(ts, sizeof(ts), "%H:%M:%S", localtime(&now));
    if (c->json) {
      json_t *o = json_object();
      json_object_set_new(o, "time", json_integer((json_int_t)now));
      for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) json_object_set(o, cols[k], json_object_get(m, cols[k]));
      if (follow) { /* JSON Lines: one document per sample */
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12));
        printf("%s\n", s);
        free(s);
      } else {
        print_json(o);
      }
      json_decref(o);
    } else if (follow) {
      char b[6][32];
      printf("%-8s  %8s  %10s  %10s  %9s  %9s  %9s\n", ts, fmt_metric(m, cols[0], b[0], 32),
             fmt_metric(m, cols[1], b[1], 32), fmt_metric(m, cols[2], b[2], 32), fmt_metric(m, cols[3], b[3], 32),
             fmt_metric(m, cols[4], b[4], 32), fmt_metric(m, cols[5], b[5], 32));
    } else {
      struct table t = {.ncols = 2, .head = {"metric", "value"}, .right = {0, 1}};
      char b[32];
      for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) table_add(&t, cols[k], fmt_metric(m, cols[k], b, 32));
      table_print(&t);
    }
    fflush(stdout);
    json_decref(m);
  }
  return EX_OK;
}

/* mooncake secret generate [FILE]: a new cluster secret (docs/security.md), written with mode 0600 and
 * never over an existing file; without FILE (or "-") it is printed.
 * mooncake secret tenant ID [FILE]: tenant ID's secret, derived from the cluster secret this process
 * holds (MC_CLUSTER_SECRET_FILE), written the same way. */
static int cmd_secret(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[3];
  int npos;
  PARSE("secret", opts, pos, 3, npos);
  int tenant = npos >= 2 && !strcmp(pos[0], "tenant");
  if (npos < 1 || (!tenant && strcmp(pos[0], "generate")) || (!tenant && npos > 2))
    return bad_args("secret", "subcommands: 'generate [FILE]', 'tenant ID [FILE]'");
  const char *path = npos > 1 + tenant ? pos[1 + tenant] : "-";
  int rc = tenant ? mc_auth_generate_tenant(pos[1], path) : mc_auth_generate(path);
  if (rc == -EPERM) {
    fprintf(stderr, "mooncake secret tenant: needs the cluster secret (MC_CLUSTER_SECRET_FILE of a member of the "
                    "whole cluster, not a tenant's)\n");
    return EX_FAIL;
  }
  if (rc == -EINVAL) return bad_args("secret", "a tenant id is 1 to 128 bytes without control characters, not 'default'");
  if (rc) {
    fprintf(stderr, "mooncake secret: cannot write %s: %s\n", path, strerror(-rc));
    return EX_FAIL;
  }
  if (strcmp(path, "-"))
    fprintf(stderr, "wrote %s to %s (mode 0600); give %s MC_CLUSTER_SECRET_FILE=%s\n",
            tenant ? "a tenant secret" : "a new cluster secret", path,
            tenant ? "every process of that tenant" : "every process", path);
  return EX_OK;
}

static int write_body(int fd, void *arg) {
  const struct mc_admin_resp *r = arg;
  return mc_write_all(fd, r->body, r->len);
}

/* mooncake snapshot save FILE: the master's object table as a snapshot file (docs/ha.md, "Snapshots"),
 * written to a fresh FILE.tmp (mode 0600, never through a symbolic link), synced and renamed over FILE, so
 * FILE is always whole. A master started
 * with --restore_snapshot=FILE gets the objects back as their holders remount. */
static int cmd_snapshot(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[2];
  int npos;
  PARSE("snapshot", opts, pos, 2, npos);
  if (npos != 2 || strcmp(pos[0], "save")) return bad_args("snapshot", "usage: snapshot save FILE");
  long saved = c->timeout_ms;
  if (c->timeout_ms < 60000) c->timeout_ms = 60000; /* a large table takes a while to encode and send */
  struct mc_admin_resp r;
  int ex = call(c, "GET", "/api/v1/snapshot", "GET /api/v1/snapshot", &r);
  c->timeout_ms = saved;
  if (ex) return ex;
  int err = mc_write_file_atomic(pos[1], 0600, write_body, &r);
  if (err) {
    fprintf(stderr, "mooncake snapshot: cannot write %s: %s\n", pos[1], strerror(err));
    mc_admin_resp_free(&r);
    return EX_FAIL;
  }
  if (c->json) {
    json_t *o = json_pack("{s:s, s:I}", "file", pos[1], "bytes", (json_int_t)r.len);
    print_json(o);
    json_decref(o);
  } else {
    printf("snapshot saved to %s (%zu bytes)\n", pos[1], r.len);
  }
  mc_admin_resp_free(&r);
  return EX_OK;
}

/* mooncake env [--markdown]: every environment variable of the project, its default and effect
 * (src/common/knobs.h); --markdown prints the README's table, a '*' after a value marks one set here. */
static int cmd_env(struct cli *c, int argc, char **argv) {
  int md = 0;
  struct opt opts[] = {{"markdown", 0, NULL, &md}, {NULL}};
  const char *pos[1];
  int npos;
  PARSE("env", opts, pos, 0, npos);
  if (md) printf("| Variable | Default | Effect |\n|---|---|---|\n");
  for (int k = 0; k < MC_KNOB_COUNT; k++) {
    const struct mc_knob_info *i = mc_knob_info((enum mc_knob)k);
    if (md) {
      printf("| `%s` | %s | %s |\n", i->name, i->shown, i->doc);
      continue;
    }
    const char *set = getenv(i->name);
    int secret = k == MC_KNOB_CLUSTER_SECRET || k == MC_KNOB_REDIS_PASSWORD;
    printf("%-32s %-28s %s", i->name, i->shown, i->doc);
    if (set && *set) printf(" [set: %s]", secret ? "***" : set);
    printf("\n");
  }
  return EX_OK;
}

static int cmd_help(struct cli *c, int argc, char **argv) {
  struct opt opts[] = {{NULL}};
  const char *pos[1];
  int npos;
  PARSE("help", opts, pos, 1, npos);
  if (npos > 0) {
    const struct command *cmd = find_command(pos[0]);
    if (cmd) return usage_cmd(cmd, stdout);
    fprintf(stderr, "mooncake: unknown command '%s'\n", pos[0]);
    return EX_USAGE;
  }
  usage_all(stdout);
  return EX_OK;
}

static const struct command command_table[] = {
    {"status", "", "Cluster health, segment count, capacity and use, keys, clients and the guide's five metrics.",
     cmd_status},
    {"segments", "", "One row per mounted segment: name, zone, capacity, used, use %, status.", cmd_segments},
    {"keys", "[--prefix P] [--limit N]", "Keys (optionally only those starting with P), at most N of them.", cmd_keys},
    {"key", "<key>", "The replicas of one key (size, endpoint, protocol, address). Exit 4 if it does not exist.",
     cmd_key},
    {"remove", "<key> [--force]",
     "Removes one key. A leased key is refused unless --force. Exit 4 if it does not exist.", cmd_remove},
    {"remove-all", "[--force]", "Removes every object (leased ones only with --force); prints how many.",
     cmd_remove_all},
    {"drain", "<segment> [--wait] [--wait-timeout S]",
     "Starts a graceful drain of a segment (no new allocations; it is unmounted once drained). With --wait,\n"
     "polls until DRAINED (exit 1 if not within --wait-timeout, default 60 s).",
     cmd_drain},
    {"metrics", "[--follow] [--interval S] [--count N]",
     "The guide's five metrics plus the key count. --follow prints a line every --interval seconds (default 1),\n"
     "--count N times (default: until interrupted); with --json, --follow prints one JSON document per line.",
     cmd_metrics},
    {"secret", "generate [FILE] | tenant ID [FILE]",
     "generate: writes a new random cluster secret to FILE (mode 0600, never over an existing file) or prints\n"
     "it; processes started with MC_CLUSTER_SECRET_FILE=FILE only talk to peers that hold it. tenant: writes\n"
     "tenant ID's secret, derived from the cluster secret of MC_CLUSTER_SECRET_FILE; processes started with\n"
     "it are confined to that tenant's keys and storage (docs/security.md).",
     cmd_secret},
    {"snapshot", "save FILE",
     "Saves the master's object table to FILE (written whole, then renamed into place). A master started with\n"
     "--restore_snapshot=FILE serves those objects again once their holders remount (docs/ha.md).",
     cmd_snapshot},
    {"env", "[--markdown]",
     "Every environment variable the libraries and programs read, with its default and effect (and the value\n"
     "set in this environment, secrets masked); --markdown prints the README's table.",
     cmd_env},
    {"help", "[command]", "Describes the commands.", cmd_help},
    {NULL, NULL, NULL, NULL},
};

static const struct command *commands(void) { return command_table; }

static const struct command *find_command(const char *name) {
  for (const struct command *c = command_table; c->name; c++)
    if (!strcmp(c->name, name)) return c;
  return NULL;
}

/* The global options, before the command (getopt stops at the first positional: the command). 0 with
 * *cmd_at the command's index, else the exit code (printed). */
static int parse_global(struct cli *c, int argc, char **argv, int *cmd_at) {
  static const struct option lo[] = {
      {"json", no_argument, NULL, OPT_JSON},         {"master-admin", required_argument, NULL, OPT_ADMIN},
      {"master_admin", required_argument, NULL, OPT_ADMIN}, {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
      {"timeout_ms", required_argument, NULL, OPT_TIMEOUT}, {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, OPT_VERSION},          {NULL, 0, NULL, 0}};
  optind = 0;
  for (int v; (v = next_opt(argc, argv, "+:h", lo, "mooncake")) != -1;) {
    double t;
    switch (v) {
      case OPT_JSON: c->json = 1; break;
      case OPT_ADMIN: c->admin = optarg; break;
      case OPT_TIMEOUT:
        if ((t = parse_num(optarg, 3600 * 1000)) < 1) {
          fprintf(stderr, "mooncake: --timeout-ms needs a positive number of milliseconds, got '%s'\n", optarg);
          return EX_USAGE;
        }
        c->timeout_ms = (long)t;
        break;
      case 'h': usage_all(stdout); return -1;
      case OPT_VERSION: printf("mooncake version %s\n", MC_STORE_VERSION); return -1;
      default: usage_all(stderr); return EX_USAGE;
    }
  }
  *cmd_at = optind;
  return 0;
}

int main(int argc, char **argv) {
  struct cli c = {.admin = getenv("MOONCAKE_ADMIN"), .json = 0, .timeout_ms = 5000};
  if (!c.admin || !*c.admin) c.admin = "127.0.0.1:9003";
  int i = 0, rc = parse_global(&c, argc, argv, &i);
  if (rc) return rc < 0 ? EX_OK : rc;
  if (i == argc) {
    usage_all(stderr);
    return EX_USAGE;
  }
  if (!*c.admin) {
    fprintf(stderr, "mooncake: --master-admin is empty\n");
    return EX_USAGE;
  }
  const struct command *cmd = find_command(argv[i]);
  if (!cmd) {
    fprintf(stderr, "mooncake: unknown command '%s'\n", argv[i]);
    usage_all(stderr);
    return EX_USAGE;
  }
  rc = cmd->run(&c, argc - i, argv + i); /* argv[0] is the command */
  fflush(stdout);
  return rc;
}
