/* mooncake_http_metadata_server: the standalone HTTP metadata server (docs/transfer-engine.md), same command line
 * as upstream's console script plus --persist_path. Serves until SIGINT/SIGTERM, then exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/config.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/metadata_server.h"

struct opts {
  int64_t port;
  char *host;
  char *log_level;
  char *persist_path;
};

static const struct mc_cfg_opt opt_table[] = {
    {"port", MC_CFG_INT, "8080", 0, 65535, offsetof(struct opts, port),
     "port to listen on (0 = any free port)"},
    {"host", MC_CFG_STRING, "0.0.0.0", 1, 0, offsetof(struct opts, host), "address to bind"},
    {"log-level", MC_CFG_STRING, "INFO", 1, 0, offsetof(struct opts, log_level),
     "DEBUG, INFO, WARNING, ERROR or CRITICAL"},
    {"persist_path", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, persist_path),
     "file the map is kept in across restarts (empty = memory only)"},
    MC_CFG_END,
};

/* Applies --log-level; -v/--v=N or MC_LOG_LEVEL given as well wins when more verbose. -1 on junk. */
static int apply_log_level(const char *name, int level_before_argv) {
  int lvl = !strcasecmp(name, "CRITICAL") ? MC_LOG_ERROR : mc_log_parse_level(name);
  if (lvl < 0) {
    fprintf(stderr, "invalid --log-level '%s'\n", name);
    return -1;
  }
  int from_v = mc_log_level_cur;
  mc_log_set_level(from_v != level_before_argv ? MC_MIN(from_v, lvl) : lvl);
  return 0;
}

/* Blocks the stop signals in every thread (the server's threads inherit the mask); main sigwaits. */
static void block_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

static int serve(const struct opts *o) {
  sigset_t set;
  block_signals(&set);
  const char *persist = o->persist_path && *o->persist_path ? o->persist_path : NULL;
  struct mc_meta_server *s = mc_meta_server_start(o->host, (uint16_t)o->port, persist);
  if (!s) {
    fprintf(stderr, "mooncake_http_metadata_server: cannot listen on %s:%lld\n", o->host, (long long)o->port);
    return 1;
  }
  printf("mooncake_http_metadata_server listening on %s:%u\n", o->host, (unsigned)mc_meta_server_port(s));
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  LOG_INFO("signal %d received, shutting down", sig);
  mc_meta_server_stop(s);
  return 0;
}

int main(int argc, char **argv) {
  struct opts o;
  int level_before = mc_log_level_cur;
  mc_log_init_from_env(); /* MC_LOG_LEVEL counts like -v */
  mc_cfg_defaults(opt_table, &o);
  const char *usage = "[--port=8080] [--host=0.0.0.0] [--log-level=INFO] [--persist_path=FILE]";
  int rc = mc_cfg_parse_argv(opt_table, &o, argc, argv, usage, NULL);
  int status = rc < 0 ? 1 : 0;
  if (rc == 0) status = apply_log_level(o.log_level, level_before) ? 1 : serve(&o);
  mc_cfg_free(opt_table, &o);
  return status;
}
