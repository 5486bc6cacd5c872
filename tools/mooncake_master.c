/* mooncake_master: the store's metadata master (docs/master.md). Command line in gflags syntax driven by
 * the master's config table (src/master_core/config.c); this file adds what gflags/glog do around it:
 * --flagfile, --version, --config_path (JSON/YAML, applied before the command line so flags win), the
 * exact unknown-flag message, --log_dir, and the signal-driven shutdown. Serves until SIGINT/SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "master/master.h"
#include "service_notify.h" /* READY=1 once every listener answers, STOPPING=1 on the shutdown signal */

#define FLAGFILE_DEPTH 4
#define USAGE "[--rpc_port=50051] [--config_path=FILE] [--flag=value ...]"

struct args {
  char **v;
  int n, cap;
  char *config_path;
};

static void push(struct args *a, const char *s) {
  if (a->n + 2 > a->cap) {
    a->cap = a->cap ? 2 * a->cap : 32;
    a->v = mc_realloc(a->v, sizeof(char *) * a->cap);
  }
  a->v[a->n++] = mc_strdup(s);
  a->v[a->n] = NULL;
}

static void args_free(struct args *a) {
  for (int i = 0; i < a->n; i++) mc_free(a->v[i]);
  mc_free(a->v);
  mc_free(a->config_path);
}

static const struct mc_cfg_opt *find_opt(const char *name, size_t len) {
  for (const struct mc_cfg_opt *o = mc_master_opts; o->name; o++)
    if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
  return NULL;
}

static int is_verbosity(const char *a) {
  if (!strcmp(a, "-v") || !strncmp(a, "--v=", 4) || !strncmp(a, "-v=", 3)) return 1;
  return a[0] == '-' && a[1] == 'v' && a[2] >= '0' && a[2] <= '9';
}

static int is_help(const char *a) {
  return !strcmp(a, "--help") || !strcmp(a, "-help") || !strcmp(a, "-h") || !strcmp(a, "--helpfull");
}

static int bool_word(const char *s) {
  static const char *w[] = {"true", "false", "1", "0", "yes", "no", "on", "off"};
  for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
    if (!strcasecmp(s, w[i])) return 1;
  return 0;
}

static int expand(struct args *a, int argc, char **argv, int depth);

/* One line per flag; blank lines and '#' comments skipped. */
static int read_flagfile(struct args *a, const char *path, int depth) {
  FILE *f = fopen(path, "r");
  if (!f || depth >= FLAGFILE_DEPTH) {
    fprintf(stderr, "ERROR: cannot read --flagfile %s: %s\n", path, f ? "nested too deep" : strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  char line[4096], *words[2] = {"", NULL};
  int rc = 0;
  while (!rc && fgets(line, sizeof(line), f)) {
    char *s = line, *e;
    while (*s == ' ' || *s == '\t') s++;
    for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
    if (!*s || *s == '#') continue;
    words[1] = s;
    rc = expand(a, 2, words, depth + 1);
  }
  fclose(f);
  return rc;
}

/* Handles one "-name[=value]" token; *i advances over a separate value. 0, 1 (exit 0) or -1. */
static int expand_flag(struct args *a, int argc, char **argv, int *i, int depth) {
  const char *arg = argv[*i], *name = arg + (arg[1] == '-' ? 2 : 1), *eq = strchr(name, '=');
  size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
  const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (nlen == 7 && !strncmp(name, "version", 7)) {
    printf("mooncake_master version %s\n", MC_STORE_VERSION);
    return 1;
  }
  if ((nlen == 8 && !strncmp(name, "flagfile", 8)) || (nlen == 11 && !strncmp(name, "config_path", 11))) {
    const char *v = eq ? eq + 1 : next;
    if (!v) return fprintf(stderr, "ERROR: flag '--%.*s' is missing its argument\n", (int)nlen, name), -1;
    if (!eq) (*i)++;
    if (nlen == 8) return read_flagfile(a, v, depth);
    mc_free(a->config_path);
    a->config_path = mc_strdup(v);
    return 0;
  }
  const struct mc_cfg_opt *o = find_opt(name, nlen);
  const struct mc_cfg_opt *neg = !o && !eq && nlen > 2 && !strncmp(name, "no", 2) ? find_opt(name + 2, nlen - 2) : NULL;
  if (neg && neg->type == MC_CFG_BOOL) return push(a, arg), 0;
  if (!o) return fprintf(stderr, "ERROR: unknown command line flag '%.*s'\n", (int)nlen, name), -1;
  if (o->type == MC_CFG_BOOL && !eq) {
    /* gflags: "--flag false" sets the flag and leaves "false" as a positional argument */
    char buf[256];
    snprintf(buf, sizeof(buf), "--%s=true", o->name);
    push(a, buf);
    return 0;
  }
  push(a, arg);
  if (!eq && next) push(a, argv[++(*i)]);
  return 0;
}

static int expand(struct args *a, int argc, char **argv, int depth) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    int rc = 0;
    if (is_help(arg)) push(a, "--help");
    else if (is_verbosity(arg)) push(a, arg);
    else if (!strcmp(arg, "--v") && i + 1 < argc) push(a, arg), push(a, argv[++i]);
    else if (arg[0] == '-' && arg[1]) rc = expand_flag(a, argc, argv, &i, depth);
    else LOG_WARN("ignoring positional argument '%s'%s", arg, bool_word(arg) ? " (use --flag=value for booleans)" : "");
    if (rc) return rc;
  }
  return 0;
}

/* Command line -> cfg. 0 run, 1 exit 0, -1 exit 1 (message printed). */
static int parse_command_line(struct mc_master_cfg *cfg, int argc, char **argv) {
  struct args a = {0};
  push(&a, argv[0]);
  int rc = expand(&a, argc, argv, 0);
  if (!rc && a.config_path) {
    char err[512];
    printf("Loading config from: %s\n", a.config_path);
    fflush(stdout);
    if (mc_master_cfg_load_file(cfg, a.config_path, err, sizeof(err))) {
      fprintf(stderr, "ERROR: %s\n", err);
      rc = -1;
    }
  }
  if (!rc && (rc = mc_cfg_parse_argv(mc_master_opts, cfg, a.n, a.v, USAGE, NULL)) == 1)
    printf("  --version\n      print the version and exit\n  --flagfile (string)\n      read flags from a file, one "
           "per line\n  (--config_path also reads .yaml/.yml; the liveness key there is client_live_ttl_sec)\n");
  args_free(&a);
  return rc;
}

/* --v / MC_LOG_LEVEL set the trace verbosity; operational lines print at INFO unless minloglevel hides them. */
static void apply_log_levels(const struct mc_master_cfg *cfg, int env_level_set) {
  int lvl = mc_log_level_cur;
  mc_master_set_verbosity(lvl == MC_LOG_INFO ? 1 : lvl == MC_LOG_DEBUG ? 2 : lvl == MC_LOG_TRACE ? 3 : 0);
  if (env_level_set && lvl > MC_LOG_INFO) return;
  int floor = cfg->minloglevel == 0 ? MC_LOG_INFO : cfg->minloglevel == 1 ? MC_LOG_WARN : cfg->minloglevel == 2 ? MC_LOG_ERROR : MC_LOG_OFF;
  mc_log_set_level(lvl < MC_LOG_INFO ? lvl : floor);
}

static int serve(struct mc_master_cfg *cfg) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread inherits the mask; main sigwaits */
  signal(SIGPIPE, SIG_IGN);
  struct mc_master *m;
  if (mc_master_create(cfg, &m)) return 1;
  /* The control plane keeps serving without its admin endpoints (e.g. the port is taken); said loudly. */
  if (mc_master_start_admin(m, NULL))
    LOG_ERROR("cannot start the admin/metrics HTTP server on %s:%lld; serving RPCs without it", cfg->metrics_host,
              (long long)cfg->metrics_port);
  uint16_t port = 0;
  if (mc_master_start_rpc(m, &port)) {
    LOG_ERROR("cannot start the RPC server on %s:%u", cfg->bind_ip, (unsigned)cfg->listen_port);
    mc_master_destroy(m);
    return 1;
  }
  cfg->listen_port = port;
  char line[2048];
  mc_master_cfg_describe(cfg, line, sizeof(line));
  LOG_INFO("%s", line);
  /* The embedded metadata server (mc_master_create), the admin server and the RPC listener all accept
   * connections now: units ordered after this one may start. */
  char status[160];
  snprintf(status, sizeof(status), "READY=1\nSTATUS=serving RPCs on port %u", (unsigned)port);
  sd_notify(0, status);
  /* A leader that lost its term (HA) restarts as a standby: a fresh process holds nothing of a state
   * another leader may have changed since (docs/ha.md, "Election and failover"). */
  struct timespec tick = {0, 100 * 1000000L};
  int sig;
  while ((sig = sigtimedwait(&set, NULL, &tick)) < 0 && !mc_master_ha_lost(m)) {
  }
  sd_notify(0, sig < 0 ? "RELOADING=1\nSTATUS=lost its leader term, restarting as a standby"
                       : "STOPPING=1\nSTATUS=shutting down");
  mc_master_destroy(m);
  if (sig < 0) return 2; /* main re-executes */
  LOG_INFO("Shutdown signal received, exiting gracefully");
  return 0;
}

int main(int argc, char **argv) {
  int env_level_set = mc_knob_str(MC_KNOB_LOG_LEVEL) != NULL;
  mc_alloc_tune_server();
  mc_log_init_from_env();
  struct mc_master_cfg cfg;
  mc_master_cfg_defaults(&cfg);
  int rc = parse_command_line(&cfg, argc, argv), status = rc < 0 ? 1 : 0;
  if (rc == 0) {
    char err[512];
    apply_log_levels(&cfg, env_level_set);
    if (cfg.log_dir && *cfg.log_dir && !cfg.logtostderr && mc_log_to_dir(cfg.log_dir, "mooncake_master")) status = 1;
    else if (mc_master_cfg_finalize(&cfg, err, sizeof(err))) {
      fprintf(stderr, "ERROR: %s\n", err);
      status = 1;
    } else {
      status = serve(&cfg);
    }
  }
  if (status == 2) {
    mc_master_cfg_free(&cfg);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "ERROR: cannot restart as a standby: %s\n", strerror(errno));
    return 1;
  }
  mc_master_cfg_free(&cfg);
  return status;
}
