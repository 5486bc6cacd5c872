/* Client liveness (master.md §2.12, decisions D4): the housekeeping thread expires clients whose last
 * ping is older than client_ttl, fires graceful-unmount timers, takes the metrics snapshots and logs the
 * metrics summary. Expiry unmounts the client's segments, sweeps their replicas and deletes the client's
 * TE metadata keys. The metadata calls and the probes of D4 are blocking I/O and run with no lock held. */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "master/master_int.h"
#include "master/metrics.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"
#include "te/metadata.h"
#include "te/metadata_server.h"

#define HOUSEKEEPING_TICK_MS 100
#define PROBE_TIMEOUT_MS 1000

int mc_probe_alive(const char *probe_addr) {
  char host[256];
  uint16_t port = 0;
  if (!probe_addr || !*probe_addr || mc_split_host_port(probe_addr, host, sizeof(host), &port, 0) || !port) return 0;
  char *reply = NULL;
  int rc = mc_rpc_call(host, port, MC_RPC_PROBE, "{}", &reply, PROBE_TIMEOUT_MS);
  mc_free(reply);
  return rc == 0;
}

static int endpoint_in_use(struct mc_master *m, const char *ep) {
  int used = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nsegs && !used; i++) used = !strcmp(m->segs[i]->te_endpoint, ep);
  pthread_rwlock_unlock(&m->seg_mu);
  return used;
}

static void delete_key(struct mc_master *m, const char *key) {
  int rc = m->meta_server ? mc_meta_server_delete(m->meta_server, key) : mc_meta_remove(m->meta, key);
  if (rc < 0) LOG_WARN("cannot delete TE metadata key %s", key);
  else LOG_INFO("deleted TE metadata key %s%s", key, rc == 1 ? " (was absent)" : "");
}

/* Deletes ram/<ep> and rpc_meta/<ep> unless a mounted segment still uses the endpoint. */
static void cleanup_endpoint(struct mc_master *m, const char *ep, const char *keep) {
  if (!m->cfg.enable_metadata_cleanup_on_timeout || (!m->meta_server && !m->meta)) return;
  if ((keep && !strcmp(ep, keep)) || endpoint_in_use(m, ep)) return;
  char key[1024];
  mc_meta_segment_key(key, sizeof(key), ep);
  delete_key(m, key);
  mc_meta_rpc_key(key, sizeof(key), ep);
  delete_key(m, key);
}

/* Detaches all of the client's segments (seg_mu held for writing); collects them and distinct endpoints. */
static uint32_t detach_client_locked(struct mc_master *m, struct mc_uuid id, struct mseg ***segs, char ***eps,
                                     uint32_t *neps) {
  uint32_t n = 0;
  *segs = mc_malloc(sizeof(**segs) * (m->nsegs ? m->nsegs : 1));
  *eps = mc_malloc(sizeof(**eps) * (m->nsegs ? m->nsegs : 1));
  *neps = 0;
  char cid[37];
  mc_uuid_str(id, cid);
  for (uint32_t i = 0; i < m->nsegs;) {
    struct mseg *s = m->segs[i];
    if (!mc_uuid_eq(s->client, id)) {
      i++;
      continue;
    }
    LOG_INFO("client_id=%s, segment_name=%s, action=unmount_expired_mem_segment", cid, s->name);
    int dup = 0;
    for (uint32_t j = 0; j < *neps && !dup; j++) dup = !strcmp((*eps)[j], s->te_endpoint);
    if (!dup) (*eps)[(*neps)++] = mc_strdup(s->te_endpoint);
    mc_seg_detach_locked(m, s); /* removes m->segs[i]; do not advance */
    (*segs)[n++] = s;
  }
  mc_client_remove_locked(m, id);
  return n;
}

/* Expires id; when only_if_due, only if its deadline is still in the past (a ping may have raced). */
static uint32_t expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep, int only_if_due) {
  struct mseg **segs;
  char **eps;
  uint32_t neps;
  pthread_rwlock_wrlock(&m->seg_mu);
  struct mclient *c = mc_client_find_locked(m, id);
  if (only_if_due && (!c || c->deadline_ns > mc_now_ns())) {
    pthread_rwlock_unlock(&m->seg_mu);
    return 0;
  }
  char cid[37];
  mc_uuid_str(id, cid);
  LOG_INFO("client_id=%s, action=client_expired, reason=%s", cid, why);
  uint32_t n = detach_client_locked(m, id, &segs, &eps, &neps);
  pthread_rwlock_unlock(&m->seg_mu);
  mc_extents_release_client(m, id); /* after it left the table: no new extent can appear */
  mc_sweep_and_free(m, segs, n);
  for (uint32_t i = 0; i < neps; i++) {
    cleanup_endpoint(m, eps[i], keep);
    mc_free(eps[i]);
  }
  mc_free(eps);
  mc_free(segs);
  return n;
}

uint32_t mc_client_expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep_endpoint) {
  return expire(m, id, why, keep_endpoint, 0);
}

static void expire_due_clients(struct mc_master *m, uint64_t now) {
  struct mc_uuid due[64];
  uint32_t n = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nclients && n < MC_ARRAY_LEN(due); i++)
    if (m->clients[i].deadline_ns <= now) due[n++] = m->clients[i].id;
  pthread_rwlock_unlock(&m->seg_mu);
  for (uint32_t i = 0; i < n; i++) expire(m, due[i], "ttl", NULL, 1);
}

static void fire_grace_timers(struct mc_master *m, uint64_t now) {
  struct mseg *done[64];
  uint32_t n = 0;
  pthread_rwlock_wrlock(&m->seg_mu);
  for (uint32_t i = 0; i < m->nsegs && n < MC_ARRAY_LEN(done);) {
    struct mseg *s = m->segs[i];
    if (atomic_load(&s->state) == MC_SEG_GRACEFULLY_UNMOUNTING && s->grace_deadline_ns <= now) {
      char cid[37];
      mc_uuid_str(s->client, cid);
      LOG_INFO("client_id=%s, action=unmount_segment, segment_name=%s, reason=grace_period_over", cid, s->name);
      mc_seg_detach_locked(m, s);
      done[n++] = s;
    } else {
      i++;
    }
  }
  pthread_rwlock_unlock(&m->seg_mu);
  mc_sweep_and_free(m, done, n);
}

/* The summary line every metric_report_interval_sec (10 s by default); at --v=1 the key=value line after it. */
static void report_metrics(struct mc_master *m) {
  char line[2048];
  mc_metrics_summary(m, line, sizeof(line));
  LOG_INFO("Master Admin Metrics: %s", line);
  if (!MLOG_V_ON(1)) return; /* the --v=1 line: not even built when it would not be written */
  mc_metrics_kv_line(m, line, sizeof(line));
  LOG_INFO("Master Metrics: %s", line);
}

void *mc_housekeeping_main(void *arg) {
  struct mc_master *m = arg;
  uint64_t period = (uint64_t)m->cfg.metric_report_interval_sec * MC_NS_PER_S, next_summary = mc_now_ns() + period;
  MLOG_V(1, "housekeeping thread started");
  while (!mc_bg_wait(m, HOUSEKEEPING_TICK_MS)) {
    uint64_t now = mc_now_ns();
    fire_grace_timers(m, now);
    expire_due_clients(m, now);
    mc_extents_expire(m, now);
    mc_metrics_tick(m->ms, now);
    if (m->cfg.enable_metric_reporting && now >= next_summary) {
      report_metrics(m);
      next_summary = now + period;
    }
  }
  MLOG_V(1, "housekeeping thread stopped");
  return NULL;
}
