/* mooncake_store_node: a storage node as a long-running daemon (deploy/systemd/mooncake-store-node.service).
 * It sets up one store client that contributes --global_segment_size bytes to the pool, prints one
 * "ready" line, and holds the segment until SIGTERM/SIGINT, when it unmounts cleanly and exits 0.
 * It never touches objects itself; a failed setup exits 1 so that the service manager retries. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/util.h"
#include "common/knobs.h"
#include "mooncake/store.h"
#include "service_notify.h" /* READY=1 once the segment is mounted, STOPPING=1 on the stop signal */

struct node_cfg {
  char *local_hostname, *metadata_server, *master_server_addr, *protocol, *device_name, *zone, *ssd_path;
  uint64_t global_segment_size, local_buffer_size, ssd_quota;
};

#define OPT(name, type, def, help) {#name, type, def, 0, 1e15, offsetof(struct node_cfg, name), help}
static const struct mc_cfg_opt opts[] = {
    OPT(local_hostname, MC_CFG_STRING, "127.0.0.1", "segment name: host (a free port is picked) or host:port"),
    OPT(metadata_server, MC_CFG_STRING, "http://127.0.0.1:8080/metadata",
        "transfer-engine metadata: http://h:p/metadata, etcd://h:p, redis://h:p or P2PHANDSHAKE"),
    OPT(master_server_addr, MC_CFG_STRING, "127.0.0.1:50051", "master RPC address"),
    OPT(protocol, MC_CFG_STRING, "tcp", "transfer protocol"),
    OPT(device_name, MC_CFG_STRING, "", "NIC list (ignored for tcp)"),
    OPT(zone, MC_CFG_STRING, "", "zone label kept in the segment record; empty = $MC_ZONE or none"),
    OPT(global_segment_size, MC_CFG_SIZE, "1GB", "memory contributed to the pool"),
    OPT(local_buffer_size, MC_CFG_SIZE, "16MB", "staging buffer (unused by the node itself)"),
    OPT(ssd_path, MC_CFG_STRING, "", "local-disk tier directory (docs/disk-tier.md); empty = none"),
    OPT(ssd_quota, MC_CFG_SIZE, "0", "bytes the local-disk tier may take; 0 = 90% of its file system"),
    MC_CFG_END,
};

int main(int argc, char **argv) {
  struct node_cfg c;
  mc_alloc_tune_server();
  mc_cfg_defaults(opts, &c);
  int prc = mc_cfg_parse_argv(opts, &c, argc, argv, "[--flag=value ...]", NULL);
  if (prc) { /* --help, --version, or a bad flag */
    mc_cfg_free(opts, &c);
    return prc > 0 ? 0 : 1;
  }
  if (!c.global_segment_size) {
    fprintf(stderr, "mooncake_store_node: --global_segment_size must be > 0 (a node with no memory stores nothing)\n");
    return 1;
  }
  /* Our own handlers (installed before setup) keep the library's SIGTERM teardown out of the way:
   * the node unmounts through destroy and exits 0. */
  mc_stop_signals_hold();
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t sc = {c.local_hostname, c.metadata_server, c.global_segment_size, c.local_buffer_size,
                          c.protocol, c.device_name, c.master_server_addr, *c.zone ? c.zone : NULL};
  sc.ssd_path = *c.ssd_path ? c.ssd_path : NULL;
  sc.ssd_quota_bytes = c.ssd_quota;
  int rc = s ? mc_store_setup(s, &sc) : -1;
  if (rc) {
    fprintf(stderr, "mooncake_store_node: setup against master %s (metadata %s) failed: %d %s\n", c.master_server_addr,
            c.metadata_server, rc, mooncake_store_err_name(rc));
    mooncake_store_destroy(s);
    mc_cfg_free(opts, &c);
    return 1;
  }
  char name[256] = "";
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("mooncake_store_node: segment %s ready (%llu bytes, zone '%s')\n", name,
         (unsigned long long)c.global_segment_size, *c.zone ? c.zone : (mc_knob_str(MC_KNOB_ZONE) ? mc_knob_str(MC_KNOB_ZONE) : ""));
  fflush(stdout);
  char status[320];
  snprintf(status, sizeof(status), "READY=1\nSTATUS=segment %s mounted", name);
  sd_notify(0, status);
  int stop_sig = mc_stop_signals_wait();
  sd_notify(0, "STOPPING=1\nSTATUS=unmounting");
  printf("mooncake_store_node: signal %d, unmounting %s\n", (int)stop_sig, name);
  fflush(stdout);
  mooncake_store_destroy(s);
  mc_cfg_free(opts, &c);
  return 0;
}
