/* Mount, unmount and client expiry (docs/master.md, "Segments", "Segment ownership", "Liveness and metadata
 * cleanup"): what reaches beyond the registry. The registry's part of each (segments.c) runs under seg_mu; the
 * rest runs after it is released, in the order core.h's SEGMENT LIFETIME asks: a detached segment's replicas
 * leave the object table one shard at a time, then its discard entries and write extents go, and only then
 * is it freed. A mount that takes a name from a dead holder expires that holder first. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "master_core/core.h"
#include "mooncake/store_errors.h"

/* A holder whose probe goes unanswered keeps its name until it has not pinged for this long (three
 * ping intervals of the store client, docs/master.md "Segment ownership"), or client_ttl if shorter. */
#define TAKEOVER_SILENCE_MS 3000

/* ------------------------------------------------------------------ sweeping */

static void sweep_shard(struct mc_master *m, struct shard *sh) {
  pthread_mutex_lock(&sh->mu);
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b], *next; o; o = next) {
      next = o->next;
      uint32_t before = o->nrep;
      mc_obj_drop_dead(o);
      if (!o->nrep) {
        MLOG_V(1, "key=%s, info=object_lost_with_segment", o->key);
        mc_obj_erase(m, sh, o);
      } else if (o->nrep != before) {
        MLOG_V(2, "key=%s, info=replica_lost_with_segment", o->key);
      }
    }
  pthread_mutex_unlock(&sh->mu);
}

void mc_sweep_and_free(struct mc_master *m, struct mseg **segs, uint32_t n) {
  if (!n) return;
  for (uint32_t i = 0; i < MC_NSHARDS; i++) sweep_shard(m, &m->shards[i]);
  mc_discard_drop_unreadable(m);
  mc_extents_drop_unmounting(m);
  for (uint32_t i = 0; i < n; i++) {
    while (atomic_load(&segs[i]->rebuilders)) usleep(1000); /* an index upload still uses it (rebuild.c) */
    mc_seg_free(segs[i]);
  }
}

/* ------------------------------------------------------------------ client expiry */

/* Detaches all of the client's segments (seg_mu held for writing); collects them and its distinct
 * endpoints (each with the address and host id of the first segment mounted with it). */
static uint32_t detach_client_locked(struct mc_master *m, struct mc_uuid id, struct mseg ***segs,
                                     struct mc_ep_claim **eps, uint32_t *neps) {
  struct mclient *c = mc_client_find_locked(m, id);
  uint32_t n = c ? c->nsegs : 0;
  *segs = mc_malloc(sizeof(**segs) * (n ? n : 1));
  *eps = mc_malloc(sizeof(**eps) * (n ? n : 1));
  *neps = 0;
  if (n) memcpy(*segs, c->segs, sizeof(**segs) * n); /* detaching takes each out of c->segs */
  char cid[37];
  mc_uuid_str(id, cid);
  for (uint32_t i = 0; i < n; i++) {
    struct mseg *s = (*segs)[i];
    LOG_INFO("client_id=%s, segment_name=%s, action=unmount_expired_mem_segment", cid, s->name);
    int dup = 0;
    for (uint32_t j = 0; j < *neps && !dup; j++) dup = !strcmp((*eps)[j].ep, s->te_endpoint);
    if (!dup)
      (*eps)[(*neps)++] =
          (struct mc_ep_claim){mc_strdup(s->te_endpoint), mc_strdup(s->probe_addr), mc_strdup(s->host_id)};
    mc_seg_detach_locked(m, s);
  }
  mc_client_remove_locked(m, id);
  return n;
}

/* Expires id; when only_if_due, only if its deadline is still in the past (a ping may have raced). */
static uint32_t expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep, int only_if_due) {
  struct mseg **segs;
  struct mc_ep_claim *eps;
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
    if (m->hooks.endpoint_expired) m->hooks.endpoint_expired(m, &eps[i], keep);
    mc_free(eps[i].ep);
    mc_free(eps[i].probe);
    mc_free(eps[i].host);
  }
  mc_free(eps);
  mc_free(segs);
  return n;
}

uint32_t mc_client_expire(struct mc_master *m, struct mc_uuid id, const char *why, const char *keep_endpoint) {
  return expire(m, id, why, keep_endpoint, 0);
}

uint32_t mc_client_expire_if_due(struct mc_master *m, struct mc_uuid id, const char *why) {
  return expire(m, id, why, NULL, 1);
}

/* ------------------------------------------------------------------ mount and unmount */

/* Milliseconds since seen_ns (UINT64_MAX when unknown). */
static uint64_t quiet_for_ms(uint64_t seen_ns) {
  uint64_t now = mc_now_ns();
  return !seen_ns ? UINT64_MAX : now > seen_ns ? (now - seen_ns) / MC_NS_PER_MS : 0;
}

/* docs/master.md, "Segment ownership": whether a new incarnation may take the name from holder. It
 * may when nothing listens at the holder's probe address any more (a crashed holder), or when the probe
 * goes unanswered and the holder has not pinged for TAKEOVER_SILENCE_MS (a hung one). A holder that
 * still pings keeps its name even when its probe fails: flooding its control port must not hand its
 * name, and the objects on its segments, to someone else. */
static int may_take_over(struct mc_master *m, const char *name, struct mc_uuid holder, const char *probe,
                         uint64_t seen_ns) {
  uint64_t bound_ms = MC_MIN((uint64_t)TAKEOVER_SILENCE_MS, (uint64_t)m->cfg.client_ttl * 1000);
  uint64_t quiet_ms = quiet_for_ms(seen_ns);
  int budget = quiet_ms >= bound_ms ? MC_PROBE_RETRY_MS : 0;
  int p = m->hooks.probe ? m->hooks.probe(probe, budget) : MC_PROBE_SILENT;
  if (p == MC_PROBE_SILENT && quiet_ms >= bound_ms) { /* it may have pinged while we probed */
    pthread_rwlock_rdlock(&m->seg_mu);
    quiet_ms = quiet_for_ms(mc_client_seen_locked(m, holder));
    pthread_rwlock_unlock(&m->seg_mu);
  }
  int take = p == MC_PROBE_GONE || (p == MC_PROBE_SILENT && quiet_ms >= bound_ms);
  char old[37], last[32] = "none";
  mc_uuid_str(holder, old);
  if (quiet_ms != UINT64_MAX) snprintf(last, sizeof(last), "%llu ms ago", (unsigned long long)quiet_ms);
  LOG_WARN("segment_name=%s is held by client_id=%s (probe %s, last contact %s): %s", name, old,
           *probe ? probe : "none", last,
           p == MC_PROBE_ALIVE ? "it answers, mount refused"
           : p == MC_PROBE_GONE ? "nothing listens at its probe address, unmounting its segments"
           : take ? "no answer and no ping, unmounting its segments"
                  : "no answer but it still pings (stalled or flooded), mount refused");
  return take;
}

static int mount_one(struct mc_master *m, const struct mc_segment_rec *r, struct mc_uuid client) {
  if (!r->base || !r->size || r->size < MC_TLSF_ALIGN || !r->name || !*r->name) return MC_INVALID_PARAMS;
  for (int attempt = 0; attempt < 3; attempt++) {
    struct mc_uuid holder;
    char *probe = NULL;
    uint64_t seen = 0;
    pthread_rwlock_wrlock(&m->seg_mu);
    mc_client_touch_locked(m, client, mc_now_ns());
    int rc = mc_seg_mount_locked(m, r, client, &holder, &probe, &seen);
    pthread_rwlock_unlock(&m->seg_mu);
    if (rc != 1) return rc;
    int take = may_take_over(m, r->name, holder, probe, seen);
    mc_free(probe);
    if (!take) return MC_SEGMENT_ALREADY_EXISTS;
    mc_client_expire(m, holder, "replaced_by_new_incarnation",
                     r->te_endpoint && *r->te_endpoint ? r->te_endpoint : r->name);
  }
  return MC_SEGMENT_ALREADY_EXISTS;
}

int mc_master_mount(struct mc_master *m, const struct mc_segment_rec *seg, struct mc_uuid client) {
  return mount_one(m, seg, client);
}

int mc_master_remount(struct mc_master *m, const struct mc_segment_rec *segs, uint32_t n, struct mc_uuid client) {
  int first = 0;
  for (uint32_t i = 0; i < n; i++) {
    pthread_rwlock_rdlock(&m->seg_mu);
    int known = mc_seg_find_locked(m, segs[i].id) != NULL;
    pthread_rwlock_unlock(&m->seg_mu);
    int rc = mount_one(m, &segs[i], client);
    if (rc && !first) first = rc;
    if (rc || known) continue;
    /* the master had forgotten this segment (restart, expiry): MC_REMOUNT_QUIET_NS */
    pthread_rwlock_rdlock(&m->seg_mu);
    struct mseg *sg = mc_seg_find_locked(m, segs[i].id);
    if (sg) atomic_store(&sg->alloc_after_ns, mc_now_ns() + MC_REMOUNT_QUIET_NS);
    pthread_rwlock_unlock(&m->seg_mu);
    /* --restore_snapshot: its entries, before the holder's upload */
    if (m->hooks.segment_remounted) m->hooks.segment_remounted(m, client, &segs[i]);
  }
  pthread_rwlock_wrlock(&m->seg_mu);
  struct mclient *c = mc_client_touch_locked(m, client, mc_now_ns());
  if (!first) c->ok = 1;
  pthread_rwlock_unlock(&m->seg_mu);
  char id[37];
  mc_uuid_str(client, id);
  LOG_INFO("client_id=%s, action=remount_segments, count=%u, result=%d", id, n, first);
  return first;
}

int mc_master_unmount(struct mc_master *m, struct mc_uuid seg_id, struct mc_uuid client, const char *tenant) {
  struct mseg *s;
  pthread_rwlock_wrlock(&m->seg_mu);
  int rc = mc_seg_owned_locked(m, seg_id, client, tenant, &s);
  if (!rc) mc_seg_detach_locked(m, s);
  pthread_rwlock_unlock(&m->seg_mu);
  if (rc) return rc == 1 ? 0 : rc;
  mc_seg_log_action(client, "unmount_segment", s->name);
  mc_sweep_and_free(m, &s, 1);
  return 0;
}
