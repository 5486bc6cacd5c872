/* What the cluster secret costs (docs/security.md): the time of a new connection's set-up with and
 * without the handshake, on loopback, in one process per mode (the secret is read once per process).
 *   auth_cost open|secret [N]
 * Runs N (default 2000) control RPC calls (one connection each: connect, the handshake when a secret
 * is set, a METADATA request and its reply) against an engine in this process and prints
 *   AUTHCOST mode=<m> calls=<n> per_call_us=<t> p99_us=<t>
 * bench/run_auth_cost.sh runs both modes alternately and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "mooncake/transfer_engine.h"
#include "net/ctrl_rpc.h"
#include "te/engine_internal.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "open") && strcmp(argv[1], "secret"))) {
    fprintf(stderr, "usage: auth_cost open|secret [N]\n");
    return 2;
  }
  if (!strcmp(argv[1], "secret")) setenv("MC_CLUSTER_SECRET", "auth-cost-bench-secret-0123456789abcdef", 1);
  else unsetenv("MC_CLUSTER_SECRET");
  unsetenv("MC_CLUSTER_SECRET_FILE");
  int n = argc > 2 ? atoi(argv[2]) : 2000;
  if (n < 10) n = 10;
  transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 1);
  if (!e) return 1;
  uint16_t port = ((struct mc_engine *)e)->rpc_port;
  uint64_t *t = malloc(sizeof(*t) * (size_t)n), total = 0;
  for (int i = 0; i < n; i++) {
    char *reply = NULL;
    uint64_t t0 = mc_now_ns();
    int rc = mc_rpc_call("127.0.0.1", port, MC_RPC_METADATA, "{}", &reply, 5000);
    t[i] = mc_now_ns() - t0;
    total += t[i];
    free(reply);
    if (rc) {
      fprintf(stderr, "call %d failed: %d\n", i, rc);
      return 1;
    }
  }
  qsort(t, (size_t)n, sizeof(*t), cmp_u64);
  printf("AUTHCOST mode=%s calls=%d per_call_us=%.1f p99_us=%.1f\n", argv[1], n, total / 1e3 / n,
         t[(size_t)n * 99 / 100] / 1e3);
  free(t);
  destroyTransferEngine(e);
  return 0;
}
