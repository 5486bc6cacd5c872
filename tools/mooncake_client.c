/* mooncake_client: the real client of standalone mode (docs/standalone.md). It sets up one store client
 * (its segment, staging buffer and transfer engine), then serves the dummy clients of this host (Python
 * setup_dummy / mc_store_setup_dummy) on the abstract unix socket "@mooncake_client_<port>.sock" until
 * SIGTERM/SIGINT, when it closes every dummy's connection, unmounts cleanly and exits 0. Flags follow
 * upstream's program of the same name; no TCP port is opened for dummies (docs/standalone.md, "Decisions"). */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "client/client.h"
#include "standalone/standalone.h"
#include "common/config.h"
#include "common/util.h"
#include "net/sock.h"
#include "service_notify.h" /* READY=1 once dummies can connect, STOPPING=1 on the stop signal */

struct cli_cfg {
  char *host, *metadata_server, *master_server_address, *protocol, *device_names, *device_name, *tenant_id, *ssd_path;
  uint64_t global_segment_size, local_buffer_size, max_shared_size, ssd_quota;
  int64_t port, threads, max_dummies, http_port;
  int enable_http_server, enable_offload;
};

#define OPT(name, type, def, lo, hi, help) {#name, type, def, lo, hi, offsetof(struct cli_cfg, name), help}
static const struct mc_cfg_opt opts[] = {
    OPT(host, MC_CFG_STRING, "0.0.0.0", 0, 0, "segment name: host (a free port is picked) or host:port; 0.0.0.0 = this host's address"),
    OPT(metadata_server, MC_CFG_STRING, "http://127.0.0.1:8080/metadata", 0, 0,
        "transfer-engine metadata: http://h:p/metadata, etcd://h:p, redis://h:p or P2PHANDSHAKE"),
    OPT(master_server_address, MC_CFG_STRING, "127.0.0.1:50051", 0, 0, "master RPC address"),
    OPT(protocol, MC_CFG_STRING, "tcp", 0, 0, "transfer protocol (tcp or rdma)"),
    OPT(device_names, MC_CFG_STRING, "", 0, 0, "RDMA NIC list (ignored for tcp)"),
    OPT(device_name, MC_CFG_STRING, "", 0, 0, "same as --device_names"),
    OPT(port, MC_CFG_INT, "50052", 1, 65535, "names the dummies' socket: @mooncake_client_<port>.sock"),
    OPT(global_segment_size, MC_CFG_SIZE, "4GB", 0, 1e15, "memory contributed to the pool"),
    OPT(local_buffer_size, MC_CFG_SIZE, "0", 0, 1e15, "this client's own staging buffer (dummies bring their own)"),
    OPT(threads, MC_CFG_INT, "1", 1, 1024, "accepted for compatibility; each dummy has its own thread"),
    OPT(tenant_id, MC_CFG_STRING, "default", 0, 0, "object-key namespace of every dummy served"),
    OPT(enable_offload, MC_CFG_BOOL, "false", 0, 0, "requires a local-disk tier: --ssd_path or $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"),
    OPT(ssd_path, MC_CFG_STRING, "", 0, 0, "local-disk tier directory (docs/disk-tier.md); empty = none"),
    OPT(ssd_quota, MC_CFG_SIZE, "0", 0, 1e15, "bytes the local-disk tier may take; 0 = 90% of its file system"),
    OPT(enable_http_server, MC_CFG_BOOL, "false", 0, 0, "serve /health and /metrics on --http_port"),
    OPT(http_port, MC_CFG_INT, "9300", 1, 65535, "client HTTP port"),
    OPT(max_dummies, MC_CFG_INT, "32", 1, 4096, "dummy connections at once; more are refused"),
    OPT(max_shared_size, MC_CFG_SIZE, "1TB", 1, 1e15, "memory one dummy may share (pool + its staging)"),
    MC_CFG_END,
};

int main(int argc, char **argv) {
  struct cli_cfg c;
  mc_alloc_tune_server();
  mc_cfg_defaults(opts, &c);
  int prc = mc_cfg_parse_argv(opts, &c, argc, argv, "[--flag=value ...]", NULL);
  if (prc) {
    mc_cfg_free(opts, &c);
    return prc > 0 ? 0 : 1;
  }
  const char *env_ssd = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH");
  if (c.enable_offload && !*c.ssd_path && !(env_ssd && *env_ssd)) {
    fprintf(stderr, "mooncake_client: --enable_offload needs --ssd_path (or $MOONCAKE_OFFLOAD_FILE_STORAGE_PATH)\n");
    mc_cfg_free(opts, &c);
    return 1;
  }
  mc_stop_signals_hold();
  signal(SIGPIPE, SIG_IGN); /* a dummy that hangs up is a failed write, never a signal */
  char host[300];
  if (!strcmp(c.host, "0.0.0.0") || !*c.host) mc_local_ip(host, sizeof(host));
  else snprintf(host, sizeof(host), "%s", c.host);
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t sc = {host, c.metadata_server, c.global_segment_size, c.local_buffer_size, c.protocol,
                          *c.device_names ? c.device_names : c.device_name, c.master_server_address, NULL, NULL,
                          c.enable_http_server, (int)c.http_port, c.tenant_id};
  sc.ssd_path = *c.ssd_path ? c.ssd_path : c.enable_offload ? "" : NULL; /* "": the library reads the variable */
  sc.ssd_quota_bytes = c.ssd_quota;
  int rc = s ? mc_store_setup(s, &sc) : -1;
  struct mc_real_client *srv = NULL;
  if (!rc && !(srv = mc_real_client_start(s, (int)c.port, (int)c.max_dummies, c.max_shared_size))) rc = MC_INTERNAL_ERROR;
  if (rc) {
    fprintf(stderr, "mooncake_client: setup against master %s (metadata %s) failed: %d %s\n", c.master_server_address,
            c.metadata_server, rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(s);
    mc_cfg_free(opts, &c);
    return 1;
  }
  char name[300] = "";
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("mooncake_client: segment %s ready (%llu bytes); dummies connect to @mooncake_client_%d.sock\n", name,
         (unsigned long long)c.global_segment_size, (int)c.port);
  fflush(stdout);
  sd_notify(0, "READY=1\nSTATUS=serving dummy clients");
  int stop_sig = mc_stop_signals_wait();
  sd_notify(0, "STOPPING=1\nSTATUS=closing");
  printf("mooncake_client: signal %d, closing (%llu connections or frames refused)\n", (int)stop_sig,
         (unsigned long long)mc_real_client_refused(srv));
  fflush(stdout);
  mc_real_client_stop(srv);
  mooncake_store_destroy(s);
  mc_cfg_free(opts, &c);
  return 0;
}
