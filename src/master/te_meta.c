/* The serving layer's part in client liveness (docs/master.md, "Liveness and metadata cleanup", "Segment
 * ownership"), the core's hooks probe and endpoint_expired (core.h): probes of a transfer engine's control
 * RPC, and the deletion of an expired client's TE metadata keys: only keys that name the client's own
 * control-RPC address (what it mounted with) and whose owner no longer answers. Both are blocking I/O and
 * run with no lock held. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "master/master_int.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"

#define PROBE_TIMEOUT_MS 1000
#define PROBE_GAP_MS 100
#define PROBE_REFUSALS 3 /* refusals in a row that mean "nothing listens there" */

int mc_probe_alive(const char *probe_addr, int budget_ms) {
  char host[256];
  uint16_t port = 0;
  if (!probe_addr || !*probe_addr || mc_split_host_port(probe_addr, host, sizeof(host), &port, 0) || !port)
    return MC_PROBE_SILENT;
  uint64_t end = mc_now_ms() + (uint64_t)(budget_ms > 0 ? budget_ms : 0);
  for (int refused = 0;;) {
    char *reply = NULL;
    int rc = mc_rpc_call(host, port, MC_RPC_PROBE, "{}", &reply, PROBE_TIMEOUT_MS);
    mc_free(reply);
    if (!rc) return MC_PROBE_ALIVE;
    /* A refusal is the peer's kernel saying no socket listens on the port: a flood cannot cause it (a full
     * accept queue drops SYNs, the control RPC server accepts and closes its overflow); it takes three, in
     * case a backlog overflow answered with a reset. Anything else may be a flood: retried within budget. */
    refused = rc == -ECONNREFUSED ? refused + 1 : 0;
    if (refused >= PROBE_REFUSALS) return MC_PROBE_GONE;
    if (!refused && mc_now_ms() + PROBE_GAP_MS >= end) return MC_PROBE_SILENT;
    mc_sleep_ms(PROBE_GAP_MS);
  }
}

/* The key's value: 0 (*v malloc'ed), 1 absent, -1 unreadable. */
static int read_key(struct mc_master *m, const char *key, char **v) {
  *v = NULL;
  if (m->meta_server) return (*v = mc_meta_server_get(m->meta_server, key)) ? 0 : 1;
  int rc = mc_meta_get(m->meta, key, v);
  return rc == 0 ? 0 : rc == MC_META_NOT_FOUND ? 1 : -1;
}

static void delete_key(struct mc_master *m, const char *key) {
  int rc = m->meta_server ? mc_meta_server_delete(m->meta_server, key) : mc_meta_remove(m->meta, key);
  if (rc < 0) LOG_WARN("cannot delete TE metadata key %s", key);
  else LOG_INFO("deleted TE metadata key %s%s", key, rc == 1 ? " (was absent)" : "");
}

/* NULL when the value (a segment descriptor or an rpc_meta record) names the claimant's control-RPC
 * address (and its host id, when both carry one); else why the key is someone else's. The address is
 * written into owner. */
static const char *claim_mismatch(const char *value, const struct mc_ep_claim *c, char *owner, size_t cap) {
  json_t *o = json_loads(value, 0, NULL);
  const char *ip = json_string_value(json_object_get(o, "ip_or_host_name"));
  const char *host = json_string_value(json_object_get(o, "host_id"));
  json_int_t port = json_integer_value(json_object_get(o, "rpc_port"));
  snprintf(owner, cap, "%s:%lld", ip ? ip : "", (long long)port);
  const char *why = NULL;
  if (!ip || port <= 0 || port > 65535) why = "it names no control-RPC address";
  else if (strcmp(owner, c->probe)) why = "it names another process's address than the client mounted with";
  else if (host && *host && *c->host && strcmp(host, c->host)) why = "it names another host";
  json_decref(o);
  return why;
}

/* Deletes ram/<ep> and rpc_meta/<ep> unless a mounted segment still uses the endpoint, the key is not the
 * client's own (claim_mismatch), or its owner still answers a probe: a client may claim any endpoint at
 * mount, and its expiry must not remove a live engine's keys. */
void mc_te_endpoint_expired(struct mc_master *m, const struct mc_ep_claim *c, const char *keep) {
  if (!m->cfg.enable_metadata_cleanup_on_timeout || (!m->meta_server && !m->meta)) return;
  if ((keep && !strcmp(c->ep, keep)) || mc_endpoint_in_use(m, c->ep)) return;
  int alive = -1; /* probed once for both keys: they name the same address when they pass the check */
  for (int k = 0; k < 2; k++) {
    char key[1024], owner[300], *v;
    (k ? mc_meta_rpc_key : mc_meta_segment_key)(key, sizeof(key), c->ep);
    int rc = read_key(m, key, &v);
    const char *why = rc < 0 ? "it cannot be read" : rc ? NULL : claim_mismatch(v, c, owner, sizeof(owner));
    if (!rc && !why) {
      if (alive < 0) alive = mc_probe_alive(owner, MC_PROBE_RETRY_MS) == MC_PROBE_ALIVE;
      if (alive) why = "its owner still answers at that address";
    }
    if (why) LOG_WARN("kept TE metadata key %s of expired endpoint %s: %s", key, c->ep, why);
    else if (!rc) delete_key(m, key);
    mc_free(v);
  }
}
