/* store_demo: put and get through the store client from the command line. Contributes a segment unless
 * --global_segment_size=0, runs the given operations in order and prints one line per operation:
 *   store_demo --master_server_addr=127.0.0.1:50051 --metadata_server=http://127.0.0.1:8080/metadata \
 *              put k1 hello  get k1  exist k1  size k1  remove k1
 * With --hold_s=N it keeps its segment mounted for N seconds afterwards (so other clients can read). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "mooncake/store.h"

struct demo_cfg {
  char *local_hostname, *metadata_server, *master_server_addr, *protocol;
  uint64_t global_segment_size, local_buffer_size;
  int64_t hold_s;
};

static const struct mc_cfg_opt opts[] = {
    {"local_hostname", MC_CFG_STRING, "127.0.0.1", 0, 0, offsetof(struct demo_cfg, local_hostname),
     "segment name host (a free port is picked) or host:port"},
    {"metadata_server", MC_CFG_STRING, "http://127.0.0.1:8080/metadata", 0, 0,
     offsetof(struct demo_cfg, metadata_server), "transfer-engine metadata service"},
    {"master_server_addr", MC_CFG_STRING, "127.0.0.1:50051", 0, 0, offsetof(struct demo_cfg, master_server_addr),
     "master RPC address"},
    {"protocol", MC_CFG_STRING, "tcp", 0, 0, offsetof(struct demo_cfg, protocol), "tcp"},
    {"global_segment_size", MC_CFG_SIZE, "64MB", 0, 1e15, offsetof(struct demo_cfg, global_segment_size),
     "memory contributed to the pool (0 = pure client)"},
    {"local_buffer_size", MC_CFG_SIZE, "16MB", 0, 1e15, offsetof(struct demo_cfg, local_buffer_size),
     "staging buffer for put/get"},
    {"hold_s", MC_CFG_INT, "0", 0, 86400, offsetof(struct demo_cfg, hold_s), "stay up this long at the end"},
    MC_CFG_END,
};

/* Runs one operation starting at argv[i]; returns how many arguments it used, 0 on an unknown one. */
static int run_op(mooncake_store_t s, char **argv, int argc, int i) {
  const char *op = argv[i], *key = i + 1 < argc ? argv[i + 1] : NULL;
  if (!key) return 0;
  if (!strcmp(op, "put") && i + 2 < argc) {
    int rc = mooncake_store_put(s, key, argv[i + 2], strlen(argv[i + 2]), NULL);
    printf("put %s: %d %s\n", key, rc, mooncake_store_err_name(rc));
    return 3;
  }
  if (!strcmp(op, "get")) {
    void *v = NULL;
    int64_t n = mc_store_get(s, key, &v);
    if (n > 0) printf("get %s: %.*s\n", key, (int)n, (char *)v);
    else printf("get %s: %lld %s\n", key, (long long)n, mooncake_store_err_name((int)n));
    free(v);
    return 2;
  }
  if (!strcmp(op, "exist")) printf("exist %s: %d\n", key, mooncake_store_is_exist(s, key));
  else if (!strcmp(op, "size")) printf("size %s: %lld\n", key, (long long)mooncake_store_get_size(s, key));
  else if (!strcmp(op, "remove")) printf("remove %s: %d\n", key, mooncake_store_remove(s, key, 1));
  else return 0;
  return 2;
}

int main(int argc, char **argv) {
  struct demo_cfg c;
  char **rest = NULL;
  mc_cfg_defaults(opts, &c);
  int prc = mc_cfg_parse_argv(opts, &c, argc, argv, "[--flag=value ...] [put K V | get K | exist K | size K | remove K]...",
                              &rest);
  if (prc) return prc > 0 ? 0 : 1;
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, c.local_hostname, c.metadata_server, c.global_segment_size, c.local_buffer_size,
                                c.protocol, "", c.master_server_addr);
  if (rc) {
    fprintf(stderr, "setup failed: %d %s\n", rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(s);
    return 1;
  }
  char name[256];
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("client %s ready\n", name);
  int n = 0, bad = 0;
  while (rest && rest[n]) n++;
  for (int i = 0; i < n;) {
    int used = run_op(s, rest, n, i);
    if (!used) {
      fprintf(stderr, "unknown or incomplete operation at '%s'\n", rest[i]);
      bad = 1;
      break;
    }
    i += used;
  }
  fflush(stdout);
  if (c.hold_s) sleep((unsigned)c.hold_s);
  mooncake_store_destroy(s);
  free(rest);
  mc_cfg_free(opts, &c);
  return bad;
}
