/* Leader election over etcd (docs/ha.md, "Election and failover"): with --enable_ha every master runs
 * this supervisor; the one that creates the leader key serves, the others answer RPCs with
 * UNAVAILABLE_IN_CURRENT_STATUS and data admin endpoints with 503 until they win. Internal to src/master. */
#ifndef MC_MASTER_HA_H
#define MC_MASTER_HA_H
#include <stdint.h>

struct mc_master;
struct mc_ha;

#define MC_HA_LEASE_TTL_S 5 /* the leader key's lease (docs/ha.md, "Election and failover") */
/* A leader serves until this long after sending its last successful keepalive: 7/10 of the TTL, so the
 * lease (which etcd expires no earlier than TTL after that keepalive) outlives its serving by 1.5 s, and an
 * etcd raft election (up to 2 s with etcd's default timing) fits before it stops. */
#define MC_HA_SERVE_MS (MC_HA_LEASE_TTL_S * 700)

enum mc_ha_state { MC_HA_STARTING = 0, MC_HA_STANDBY, MC_HA_CANDIDATE, MC_HA_SERVING, MC_HA_STOPPED };

/* What /role, /ha_status, /leader, /health and the metrics show. */
struct mc_ha_info {
  int state;             /* enum mc_ha_state as others see it: STANDBY also for a leader that does not serve now */
  int present;           /* a leader key exists (as last read) */
  char leader[160];      /* its value "<rpc_address>:<rpc_port>" when present */
  uint64_t view_version; /* the etcd revision of that key's creation */
  uint64_t elections_won, leader_changes, revokes, keepalive_failures, terms_lost;
  int64_t lease_left_ms; /* while serving: how long it may still serve without a keepalive; else 0 */
};

/* The supervisor of m (m->cfg.enable_ha), not started. NULL (logged) when the endpoint list is empty. */
struct mc_ha *mc_ha_new(struct mc_master *m);
/* Starts campaigning for rpc_port (the port the RPC server listens on). 0 or -1 (logged). */
int mc_ha_start(struct mc_ha *h, uint16_t rpc_port);
/* Stops serving, gives the leadership up (revokes its lease, so a standby takes over at once), joins and
 * frees. NULL ignored. */
void mc_ha_free(struct mc_ha *h);
void mc_ha_info(struct mc_ha *h, struct mc_ha_info *out);
/* 1 once this master lost a leadership it held: its state may be stale, the process restarts as a
 * standby (tools/mooncake_master.c). */
int mc_ha_lost(struct mc_ha *h);
const char *mc_ha_state_name(int state);

#endif
