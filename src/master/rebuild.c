/* Rebuilding the object table from what holders report (docs/ha.md, "Rebuild: restart and promotion"):
 * after a holder remounts a segment, it uploads the index of that segment (REMOUNT_INDEX, proto.h), and
 * each entry becomes the complete object it describes again, its space reserved exactly where it is.
 *
 * A segment's allocator takes the whole upload in one mc_tlsf_reserve (one walk of its blocks); the
 * objects then go in key by key under their shard locks. Between the two the segment may be unmounted:
 * seg->rebuilders keeps its memory alive until the upload is done (mc_sweep_and_free waits for it), and
 * an object is installed only while the segment is still readable (its sweeper would drop it otherwise).
 *
 * The holder follows its index from the first upload on (its feed is attached before any entry is
 * installed), so every later change to a rebuilt object reaches it as a record. An entry that is not
 * installed gets a DROP back, and space it reserved waits for that DROP's acknowledgement: the holder's
 * index never keeps an entry for space the master may hand out again (docs/ha.md, the two rules). An entry
 * the master already holds exactly as reported (same key, size, segment and offset: an object put through
 * this master since the feed was attached, which the holder's table then uploads too, or an entry a
 * growing table sends twice) is left alone: dropping it would make the holder forget a live object. */
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "master_core/holder_feed.h"
#include "master/master_int.h"
#include "mooncake/store_errors.h"

/* The segment if it is mounted in realm tenant (and `client`, when given, owns it); counted as being
 * rebuilt (the caller gives it back with atomic_fetch_sub(&seg->rebuilders, 1)). */
static struct mseg *take_segment(struct mc_master *m, const struct mc_uuid *client, struct mc_uuid seg_id,
                                 const char *tenant) {
  pthread_rwlock_rdlock(&m->seg_mu);
  struct mseg *found = mc_seg_find_locked(m, seg_id);
  if (found && !((!client || mc_uuid_eq(found->client, *client)) && mc_same_realm(found->tenant, tenant) &&
                 seg_readable(found)))
    found = NULL;
  if (found) atomic_fetch_add(&found->rebuilders, 1);
  pthread_rwlock_unlock(&m->seg_mu);
  return found;
}

#define REFUSALS_LOGGED 8 /* per upload call: the first ones say why, the count says how many */

/* Every entry's range reserved in one walk of the segment's allocator: blk[i] (NULL with why[i]). */
struct reserved {
  uint64_t *off, *len;
  struct mc_tlsf_block **blk;
  enum mc_tlsf_refusal *why;
};

static void reserve_all(struct mseg *seg, const struct mc_index_entry *e, uint32_t n, struct reserved *rv) {
  size_t k = n ? n : 1;
  rv->off = mc_malloc(sizeof(*rv->off) * k);
  rv->len = mc_malloc(sizeof(*rv->len) * k);
  rv->blk = mc_malloc(sizeof(*rv->blk) * k);
  rv->why = mc_malloc(sizeof(*rv->why) * k);
  for (uint32_t i = 0; i < n; i++) rv->off[i] = e[i].offset, rv->len[i] = e[i].length;
  pthread_mutex_lock(&seg->alloc_mu);
  mc_tlsf_reserve(seg->tlsf, rv->off, rv->len, n, rv->blk, rv->why);
  atomic_store(&seg->used, mc_tlsf_used(seg->tlsf));
  pthread_mutex_unlock(&seg->alloc_mu);
}

static void reserved_free(struct reserved *rv) {
  mc_free(rv->off);
  mc_free(rv->len);
  mc_free(rv->blk);
  mc_free(rv->why);
}

static int refusal_status(enum mc_tlsf_refusal why) {
  return why == MC_TLSF_REFUSE_TAKEN || why == MC_TLSF_REFUSE_OVERLAP ? MC_OBJECT_ALREADY_EXISTS : MC_INVALID_PARAMS;
}

/* An entry the master does not install: the holder drops it (a DROP record), and the space it reserved,
 * if any, waits for that DROP to be acknowledged. */
static void refuse(struct mc_master *m, struct mseg *seg, struct mc_hidx *h, const struct mc_index_entry *e,
                   struct mc_tlsf_block *blk) {
  uint64_t seq = h ? mc_hidx_drop(h, e->key, e->klen, seg->id) : 0;
  if (blk && seq) mc_discard_push_acked(m, seg, blk, 0, h, seq);
  else if (blk) mc_rep_release(seg, blk);
}

int mc_master_rebuild_index(struct mc_master *m, struct mc_uuid client, struct mc_uuid seg_id, const char *tenant,
                            const struct mc_index_entry *e, uint32_t n, uint64_t applied, int last, int32_t *results) {
  struct mc_hidx *h = mc_client_follow(m, client, tenant); /* attached first: later changes are recorded */
  struct mseg *seg = h ? take_segment(m, &client, seg_id, tenant) : NULL;
  if (!seg) {
    if (h) mc_hidx_unref(h);
    return MC_SEGMENT_NOT_FOUND;
  }
  struct reserved rv;
  reserve_all(seg, e, n, &rv);
  struct mc_tlsf_block **blk = rv.blk;
  enum mc_tlsf_refusal *why = rv.why;
  uint32_t installed = 0, known = 0, refused = 0;
  char id[37];
  mc_uuid_str(client, id);
  for (uint32_t i = 0; i < n; i++) {
    if (!blk[i] && (why[i] == MC_TLSF_REFUSE_TAKEN || why[i] == MC_TLSF_REFUSE_OVERLAP) && e[i].klen &&
        mc_obj_held_at(m, seg, e[i].offset, e[i].key, e[i].klen, e[i].size)) {
      results[i] = 0; /* known as it is: the holder keeps its entry, no DROP */
      known++;
      continue;
    }
    if (!blk[i] || !e[i].klen || e[i].size > e[i].length) {
      results[i] = blk[i] ? MC_INVALID_PARAMS : refusal_status(why[i]);
      refuse(m, seg, h, &e[i], blk[i]);
      continue;
    }
    int rc = mc_obj_rebuild(m, seg, blk[i], &e[i]);
    if (!rc) refuse(m, seg, h, &e[i], blk[i]);
    results[i] = rc > 0 ? 0 : rc < 0 ? MC_SEGMENT_NOT_FOUND : MC_OBJECT_ALREADY_EXISTS;
    installed += rc > 0;
  }
  for (uint32_t i = 0; i < n; i++)
    if (results[i] && refused++ < REFUSALS_LOGGED)
      LOG_WARN("client_id=%s, action=rebuild_refused, key=%.*s, offset=%llu, length=%llu, error=%s", id,
               (int)(e[i].klen > 128 ? 128 : e[i].klen), e[i].key, (unsigned long long)e[i].offset,
               (unsigned long long)e[i].length, mooncake_store_err_name(results[i]));
  if (applied > atomic_load(&seg->applied)) atomic_store(&seg->applied, applied);
  if (last) atomic_store(&seg->uploaded, 1); /* writers' witnesses above `applied` may come in now */
  atomic_fetch_sub(&seg->rebuilders, 1);
  mc_hidx_unref(h);
  LOG_INFO("client_id=%s, action=rebuild_index, entries=%u, installed=%u, known=%u, refused=%u", id, n, installed,
           known, refused);
  reserved_free(&rv);
  return 0;
}

/* ---- writers' witnesses (docs/ha.md, "Witnesses") ---- */

/* The segment of a witness, counted as being rebuilt: NULL with *rc (not yet, or the holder already had
 * the record) when there is nothing to do now. */
static struct mseg *witness_segment(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                                    int *rc) {
  struct mseg *seg = take_segment(m, NULL, seg_id, tenant);
  if (!seg) {
    *rc = MC_SEGMENT_NOT_FOUND;
    return NULL;
  }
  *rc = !atomic_load(&seg->uploaded) ? MC_UNAVAILABLE_IN_CURRENT_STATUS
        : seq <= atomic_load(&seg->applied) ? MC_RECOMMIT_KNOWN : 0;
  if (*rc) {
    atomic_fetch_sub(&seg->rebuilders, 1);
    return NULL;
  }
  return seg;
}

/* Witnesses are taken only while the segment takes no new allocation (its remount quiet period): until
 * then its free space is exactly what the old master left free, so a witnessed range holds the witnessed
 * bytes, and an object at a witnessed place is the witnessed one (alloc_mu held). */
static int quiet(struct mseg *seg) {
  if (mc_now_ns() < atomic_load(&seg->alloc_after_ns)) return 1;
  mc_free(seg->tombs); /* the removal witnesses' guard is over with the period */
  seg->tombs = NULL;
  seg->ntombs = seg->captombs = 0;
  return 0;
}

/* A removal witnessed at (key hash, off) numbered above seq (alloc_mu held). */
static int removed_later(const struct mseg *seg, uint64_t hash, uint64_t off, uint64_t seq) {
  for (uint32_t i = 0; i < seg->ntombs; i++)
    if (seg->tombs[i].hash == hash && seg->tombs[i].off == off && seg->tombs[i].seq > seq) return 1;
  return 0;
}

int mc_master_recommit(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                       const struct mc_index_entry *e, struct mc_wsink *ws) {
  if (!e->klen || e->size > e->length) return MC_INVALID_PARAMS;
  int rc;
  struct mseg *seg = witness_segment(m, tenant, seg_id, seq, &rc);
  if (!seg) return rc;
  struct mc_tlsf_block *blk = NULL;
  enum mc_tlsf_refusal why = 0;
  pthread_mutex_lock(&seg->alloc_mu);
  if (!quiet(seg)) rc = MC_LEASE_EXPIRED;
  else if (removed_later(seg, mc_key_hash(e->key, e->klen), e->offset, seq)) rc = MC_RECOMMIT_KNOWN;
  else mc_tlsf_reserve(seg->tlsf, &e->offset, &e->length, 1, &blk, &why);
  atomic_store(&seg->used, mc_tlsf_used(seg->tlsf));
  pthread_mutex_unlock(&seg->alloc_mu);
  if (!rc && !blk) rc = refusal_status(why);
  if (!rc) {
    int in = mc_obj_recommit(m, seg, blk, e, ws);
    if (in == 0) mc_rep_release(seg, blk); /* the key exists: its value stays */
    rc = in > 0 ? 0 : in < 0 ? MC_SEGMENT_NOT_FOUND : MC_OBJECT_ALREADY_EXISTS;
  }
  atomic_fetch_sub(&seg->rebuilders, 1);
  return rc;
}

int mc_master_recommit_drop(struct mc_master *m, const char *tenant, struct mc_uuid seg_id, uint64_t seq,
                            const struct mc_index_entry *e, struct mc_wsink *ws) {
  if (!e->klen) return MC_INVALID_PARAMS;
  int rc;
  struct mseg *seg = witness_segment(m, tenant, seg_id, seq, &rc);
  if (!seg) return rc;
  pthread_mutex_lock(&seg->alloc_mu);
  if (!quiet(seg)) {
    rc = MC_LEASE_EXPIRED;
  } else if (seg->ntombs < MC_TOMBS_MAX) { /* (past the cap the order of hand-overs is not guarded: logged) */
    if (seg->ntombs == seg->captombs) {
      seg->captombs = seg->captombs ? 2 * seg->captombs : 64;
      seg->tombs = mc_realloc(seg->tombs, sizeof(*seg->tombs) * seg->captombs);
    }
    seg->tombs[seg->ntombs++] = (struct mc_tomb){mc_key_hash(e->key, e->klen), e->offset, seq};
  } else {
    LOG_WARN_LIMITED("segment %s: more than %u removal witnesses in its quiet period; a put witnessed by another "
                     "writer may come back after its removal", seg->name, MC_TOMBS_MAX);
  }
  pthread_mutex_unlock(&seg->alloc_mu);
  /* (the quiet period may end meanwhile: nothing can be placed at off before this returns anyway, as the
   * space is held by the object found there until it is removed) */
  if (!rc) rc = mc_obj_remove_at(m, seg, e->offset, e->key, e->klen, ws) ? 0 : MC_RECOMMIT_KNOWN;
  atomic_fetch_sub(&seg->rebuilders, 1);
  return rc;
}

/* ---- a snapshot's entries (snapshot.c; docs/ha.md, "Snapshots") ---- */

uint32_t mc_master_restore_entries(struct mc_master *m, struct mc_uuid client, struct mc_uuid seg_id,
                                   const struct mc_index_entry *e, uint32_t n) {
  pthread_rwlock_rdlock(&m->seg_mu);
  struct mseg *seg = mc_seg_find_locked(m, seg_id);
  if (seg && !(mc_uuid_eq(seg->client, client) && seg_readable(seg))) seg = NULL;
  if (seg) atomic_fetch_add(&seg->rebuilders, 1);
  pthread_rwlock_unlock(&m->seg_mu);
  if (!seg) return 0;
  struct reserved rv;
  reserve_all(seg, e, n, &rv);
  struct mc_tlsf_block **blk = rv.blk;
  uint32_t installed = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!blk[i]) continue; /* the space is taken (the holder's own upload came first) or the range is bad */
    int in = mc_obj_recommit(m, seg, blk[i], &e[i], NULL); /* (a restore has no writer to witness to) */
    if (in == 0) mc_rep_release(seg, blk[i]); /* the key exists: its value stays */
    installed += in > 0;
  }
  atomic_fetch_sub(&seg->rebuilders, 1);
  reserved_free(&rv);
  return installed;
}
