/* The object table: key -> replicas, striped over MC_NSHARDS shards by key hash (docs/master.md, "Objects").
 * Every function here takes exactly one shard lock at a time (see core.h for the lock order). */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "master_core/holder_feed.h"
#include "master_core/key_pattern.h"
#include "mooncake/store_errors.h"

/* ------------------------------------------------------------------ hash table */

static struct shard *shard_of(struct mc_master *m, uint64_t h) { return &m->shards[h & (MC_NSHARDS - 1)]; }
static uint32_t bucket_of(const struct shard *sh, uint64_t h) { return (uint32_t)(h >> 10) & (sh->nbuckets - 1); }

static struct object *find(struct shard *sh, uint64_t h, const void *key, uint32_t klen) {
  for (struct object *o = sh->buckets[bucket_of(sh, h)]; o; o = o->next)
    if (o->hash == h && o->klen == klen && !memcmp(o->key, key, klen)) return o;
  return NULL;
}

struct object *mc_obj_find_seq(struct shard *sh, uint64_t hash, uint64_t seq) {
  for (struct object *o = sh->buckets[bucket_of(sh, hash)]; o; o = o->next)
    if (o->seq == seq) return o;
  return NULL;
}

static void grow(struct shard *sh) {
  uint32_t nb = sh->nbuckets * 2;
  struct object **b = mc_calloc(nb, sizeof(*b));
  for (uint32_t i = 0; i < sh->nbuckets; i++)
    for (struct object *o = sh->buckets[i], *next; o; o = next) {
      next = o->next;
      uint32_t j = (uint32_t)(o->hash >> 10) & (nb - 1);
      o->next = b[j];
      b[j] = o;
    }
  mc_free(sh->buckets);
  sh->buckets = b;
  sh->nbuckets = nb;
}

static struct object *insert_new(struct mc_master *m, struct shard *sh, uint64_t h, const void *key, uint32_t klen) {
  if (sh->count >= sh->nbuckets) grow(sh);
  struct object *o = mc_calloc(1, sizeof(*o) + klen + 1);
  o->hash = h;
  o->klen = klen;
  memcpy(o->key, key, klen);
  uint32_t b = bucket_of(sh, h);
  o->next = sh->buckets[b];
  sh->buckets[b] = o;
  sh->count++;
  atomic_fetch_add(&m->nobjects, 1);
  return o;
}

/* Frees o's replica array (never the inline one); o then has no replica storage. */
static void drop_rep_storage(struct object *o) {
  if (o->rep != &o->rep1) mc_free(o->rep);
  o->rep = NULL;
}

/* Takes reps (n of them, allocated by mc_place) as o's replicas; a single one is kept inline, so a
 * million objects are not a million small heap blocks (glibc consolidated those all at once after a
 * mass removal: a 0.4 s stall). */
static void adopt_reps(struct object *o, struct replica *reps, uint32_t n) {
  drop_rep_storage(o);
  if (n == 1) {
    o->rep1 = reps[0];
    mc_free(reps);
    o->rep = &o->rep1;
  } else {
    o->rep = reps;
  }
  o->nrep = n;
}

void mc_obj_erase(struct mc_master *m, struct shard *sh, struct object *o) {
  for (struct object **pp = &sh->buckets[bucket_of(sh, o->hash)]; *pp; pp = &(*pp)->next)
    if (*pp == o) {
      *pp = o->next;
      break;
    }
  sh->count--;
  atomic_fetch_sub(&m->nobjects, 1);
  if (o->soft_pin_ttl_ms) atomic_fetch_sub(&m->n_soft_pinned, 1);
  mc_kgroup_put(m, o->kg);
  drop_rep_storage(o);
  mc_free(o);
}

void mc_objects_init(struct mc_master *m) {
  for (uint32_t i = 0; i < MC_NSHARDS; i++) {
    pthread_mutex_init(&m->shards[i].mu, NULL);
    m->shards[i].nbuckets = 16;
    m->shards[i].buckets = mc_calloc(16, sizeof(struct object *));
  }
  mc_kgroup_init(m);
}

/* Called with no other user left: segments are freed separately, so replicas are simply dropped. */
void mc_objects_destroy(struct mc_master *m) {
  for (uint32_t i = 0; i < MC_NSHARDS; i++) {
    struct shard *sh = &m->shards[i];
    for (uint32_t b = 0; b < sh->nbuckets; b++)
      for (struct object *o = sh->buckets[b], *next; o; o = next) {
        next = o->next;
        drop_rep_storage(o);
        mc_free(o);
      }
    mc_free(sh->buckets);
    pthread_mutex_destroy(&sh->mu);
  }
  mc_kgroup_destroy(m); /* the objects' references went with them */
}

/* ------------------------------------------------------------------ replicas */

void mc_obj_drop_dead(struct object *o) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < o->nrep; i++)
    if (seg_readable(o->rep[i].seg)) o->rep[k++] = o->rep[i];
  o->nrep = k;
}

/* Where the witness of a record about to be queued goes (mc_hidx_put's copy, or the DROP's encoding): the
 * sink ws of the request being handled while it has room, else NULL (docs/ha.md, "Witnesses"). */
static struct mc_wbuf *witness_to(struct mc_wsink *ws) { return ws && ws->n < MC_WSINK_MAX ? ws->out : NULL; }

/* Counts the record seq just queued, witnessed in witness_to(ws)'s buffer when that had room. */
static void witnessed(struct mc_wsink *ws, uint64_t seq) {
  if (!seq || !ws) return;
  if (ws->n < MC_WSINK_MAX) ws->n++;
  else ws->unwitnessed++;
}

void mc_rep_free(struct mc_master *m, const struct object *o, const struct replica *r, uint64_t not_before_ns,
                 struct mc_wsink *ws) {
  struct mc_hidx *h = r->status == MC_REPLICA_COMPLETE ? atomic_load(&r->seg->hidx) : NULL;
  uint64_t seq = h ? mc_hidx_drop(h, o->key, o->klen, r->seg->id) : 0;
  struct mc_wbuf *w = seq ? witness_to(ws) : NULL;
  if (w) { /* a removal the holder may miss comes back from its witness */
    uint64_t off, len;
    mc_tlsf_block_range(r->blk, &off, &len);
    mc_hidx_encode(w, seq, MC_HIDX_DROP, o->key, o->klen, r->seg->id, r->off, len, o->size, o->hard_pin,
                   o->soft_pin_ttl_ms, mc_kgroup_name(o->kg));
  }
  witnessed(ws, seq);
  if (seq || not_before_ns) mc_discard_push_acked(m, r->seg, r->blk, not_before_ns, seq ? h : NULL, seq);
  else mc_rep_release(r->seg, r->blk);
}

uint64_t mc_obj_index_put(const struct object *o, struct mc_wsink *ws) {
  uint64_t top = 0;
  for (uint32_t i = 0; i < o->nrep; i++) {
    const struct replica *r = &o->rep[i];
    struct mc_hidx *h = r->status == MC_REPLICA_COMPLETE ? atomic_load(&r->seg->hidx) : NULL;
    if (!h) continue;
    uint64_t off, len;
    mc_tlsf_block_range(r->blk, &off, &len);
    uint64_t seq = mc_hidx_put(h, o->key, o->klen, r->seg->id, r->off, len, o->size, o->hard_pin, o->soft_pin_ttl_ms,
                               mc_kgroup_name(o->kg), witness_to(ws));
    witnessed(ws, seq);
    if (seq > top) top = seq;
  }
  return top;
}

/* One shard's records for h (its lock taken: the order every append keeps, so a record queued by a
 * mutation meanwhile lands before or after this shard's, never inside a stale picture). */
static uint64_t resync_shard(struct shard *sh, struct mc_hidx *h) {
  uint64_t n = 0;
  pthread_mutex_lock(&sh->mu);
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b]; o; o = o->next)
      for (uint32_t i = 0; i < o->nrep; i++) {
        const struct replica *r = &o->rep[i];
        if (r->status != MC_REPLICA_COMPLETE || atomic_load(&r->seg->hidx) != h) continue;
        uint64_t off, len;
        mc_tlsf_block_range(r->blk, &off, &len);
        n += mc_hidx_put(h, o->key, o->klen, r->seg->id, r->off, len, o->size, o->hard_pin, o->soft_pin_ttl_ms,
                          mc_kgroup_name(o->kg), NULL) != 0;
      }
  pthread_mutex_unlock(&sh->mu);
  return n;
}

void mc_obj_index_resync(struct mc_master *m, struct mc_hidx *h) {
  uint32_t i;
  while (mc_hidx_dump_next(h, &i)) mc_hidx_dump_done(h, i, MC_NSHARDS, i < MC_NSHARDS ? resync_shard(&m->shards[i], h) : 0);
}

static void release_all(struct mc_master *m, struct object *o, struct mc_wsink *ws) {
  for (uint32_t i = 0; i < o->nrep; i++) mc_rep_free(m, o, &o->rep[i], 0, ws);
  o->nrep = 0;
}

static void discard_push(struct mc_master *m, const struct replica *r, uint64_t release_ns) {
  mc_discard_push(m, r->seg, r->blk, release_ns);
}

/* Frees o's replicas; while a read lease on o runs, they wait on the discard heap until it ends instead.
 * A reader that looked the object up may be copying those bytes right now: until its lease ends the
 * space must not be rewritten or handed to another object, or the reader would get another value's
 * bytes and no way to tell (its own check only catches transfers that finish after the lease). */
static void release_after_lease(struct mc_master *m, struct object *o, uint64_t now, struct mc_wsink *ws) {
  for (uint32_t i = 0; i < o->nrep; i++) mc_rep_free(m, o, &o->rep[i], o->lease_ns > now ? o->lease_ns : 0, ws);
  o->nrep = 0;
}

/* 1 when some replica's holder follows its index: such an object is never rewritten in place (docs/ha.md). */
static int indexed(const struct object *o) {
  for (uint32_t i = 0; i < o->nrep; i++)
    if (atomic_load(&o->rep[i].seg->hidx)) return 1;
  return 0;
}

void mc_obj_encode_replica(struct mc_wbuf *w, const struct object *o, const struct replica *r) {
  struct mseg *s = r->seg;
  struct mc_replica_rec rec = {
      .status = r->status,
      .size = o->size,
      .address = s->base + r->off,
      .te_endpoint = s->te_endpoint,
      .segment_name = s->name,
      .protocol = s->protocol,
      .zone = s->zone,
      .host_id = s->host_id,
  };
  mc_put_replica(w, &rec);
}

static uint32_t count_status(const struct object *o, uint8_t status) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < o->nrep; i++) n += o->rep[i].status == status;
  return n;
}

/* Readable = COMPLETE on a mounted segment (docs/master.md, "Objects"). */
static uint32_t count_readable(const struct object *o) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < o->nrep; i++) n += o->rep[i].status == MC_REPLICA_COMPLETE && seg_readable(o->rep[i].seg);
  return n;
}

static void encode_readable(struct mc_wbuf *w, const struct object *o) {
  mc_w_u32(w, count_readable(o));
  for (uint32_t i = 0; i < o->nrep; i++)
    if (o->rep[i].status == MC_REPLICA_COMPLETE && seg_readable(o->rep[i].seg)) mc_obj_encode_replica(w, o, &o->rep[i]);
}

static void grant_lease(struct mc_master *m, struct object *o, uint64_t now) {
  uint64_t until = now + m->cfg.lease_ttl_ms * MC_NS_PER_MS;
  if (until > o->lease_ns) o->lease_ns = until;
  if (o->kg) mc_kgroup_lease(o->kg, until); /* and the group's: no member is evicted meanwhile */
}

/* Looks key up with dead replicas dropped; an object left without replicas is erased (NULL). */
static struct object *lookup_live(struct mc_master *m, struct shard *sh, uint64_t h, const void *key, uint32_t klen) {
  struct object *o = find(sh, h, key, klen);
  if (!o) return NULL;
  mc_obj_drop_dead(o);
  if (o->nrep) return o;
  mc_obj_erase(m, sh, o);
  return NULL;
}

/* ------------------------------------------------------------------ put */

/* Soft pin rules (docs/master.md, "Pins"). */
static int soft_pin_ttl(const struct mc_master *m, const struct mc_put_config *pc, uint64_t *ttl_ms) {
  int given = pc->soft_pin_ttl_ms != -1;
  if (pc->soft_pin_ttl_ms < -1) return MC_INVALID_PARAMS;
  *ttl_ms = 0;
  if (pc->soft_pin_action == MC_SOFT_PIN_SET) {
    uint64_t ttl = given ? (uint64_t)pc->soft_pin_ttl_ms : MC_MIN(m->cfg.soft_pin_ttl_ms, m->cfg.max_soft_pin_ttl_ms);
    if (ttl > m->cfg.max_soft_pin_ttl_ms) return MC_INVALID_PARAMS;
    *ttl_ms = ttl;
    return 0;
  }
  if (pc->soft_pin_action != MC_SOFT_PIN_KEEP && pc->soft_pin_action != MC_SOFT_PIN_CLEAR) return MC_INVALID_PARAMS;
  return given ? MC_INVALID_PARAMS : 0;
}

/* A stale put is preempted: its PROCESSING replicas keep their space until put_start + release timeout. */
static void preempt(struct mc_master *m, struct object *o, uint64_t now) {
  uint64_t release = o->put_start_ns + (uint64_t)m->cfg.put_start_release_timeout_sec * MC_NS_PER_S;
  for (uint32_t i = 0; i < o->nrep; i++) {
    if (release <= now) mc_rep_release(o->rep[i].seg, o->rep[i].blk);
    else discard_push(m, &o->rep[i], release);
  }
  char id[37];
  mc_uuid_str(o->owner, id);
  MLOG_V(1, "key=%s, info=preempt_stale_put, previous_owner=%s, replicas=%u", o->key, id, o->nrep);
  o->nrep = 0;
}

/* Age of a put at `now`; 0 when `now` was sampled before the put started (callers take the clock
 * before the shard lock, so a put may be younger than their `now`: it must never look ancient). */
static uint64_t put_age(const struct object *o, uint64_t now) {
  return now > o->put_start_ns ? now - o->put_start_ns : 0;
}

/* An existing object blocks a new put unless it is a stale, incomplete put (which gets preempted). */
static int may_replace(struct mc_master *m, struct object *o, uint64_t now) {
  if (count_status(o, MC_REPLICA_COMPLETE)) return MC_OBJECT_ALREADY_EXISTS;
  if (put_age(o, now) < (uint64_t)m->cfg.put_start_discard_timeout_sec * MC_NS_PER_S)
    return MC_OBJECT_ALREADY_EXISTS;
  preempt(m, o, now);
  return 0;
}

static void log_allocated(const struct object *o, struct mc_uuid client) {
  if (!MLOG_V_ON(1)) return; /* before formatting */
  char id[37], line[1536];
  mc_uuid_str(client, id);
  int n = snprintf(line, sizeof(line), "ObjectAllocated key=%s size=%llu replicas=%u client_id=%s", o->key,
                   (unsigned long long)o->size, o->nrep, id);
  for (uint32_t i = 0; i < o->nrep && n < (int)sizeof(line); i++)
    n += snprintf(line + n, sizeof(line) - n, " | Replica #%u: segment=%s, buffer_address=0x%llx, transport_endpoint=%s",
                  i, o->rep[i].seg->name, (unsigned long long)(o->rep[i].seg->base + o->rep[i].off),
                  o->rep[i].seg->te_endpoint);
  MLOG_V(1, "%s", line);
}

static void set_new_put(struct mc_master *m, struct object *o, struct mc_uuid client, uint64_t len,
                        const struct mc_put_config *pc, uint64_t soft_ttl, uint64_t now) {
  if (o->soft_pin_ttl_ms) atomic_fetch_sub(&m->n_soft_pinned, 1);
  if (soft_ttl) atomic_fetch_add(&m->n_soft_pinned, 1);
  o->seq = atomic_fetch_add(&m->next_seq, 1);
  o->owner = client;
  o->size = len;
  o->put_start_ns = now;
  o->lease_ns = 0;
  o->soft_pin_ttl_ms = soft_ttl;
  o->soft_pin_deadline_ns = 0;
  o->hard_pin = pc->with_hard_pin ? 1 : 0;
}

/* The new put takes over o (fresh or preempted): replicas, owner, clocks, pins; encodes the reply. */
static void install_put(struct mc_master *m, struct object *o, struct replica *reps, uint32_t n, struct mc_uuid client,
                        uint64_t len, const struct mc_put_config *pc, uint64_t soft_ttl, uint64_t now,
                        struct mc_wbuf *w) {
  adopt_reps(o, reps, n);
  set_new_put(m, o, client, len, pc, soft_ttl, now);
  mc_w_u32(w, n);
  for (uint32_t i = 0; i < n; i++) mc_obj_encode_replica(w, o, &o->rep[i]);
  if (n < pc->replica_num) MLOG_V(1, "key=%s, info=partial_allocation, wanted=%u, got=%u", o->key, pc->replica_num, n);
  log_allocated(o, client);
}

/* Upsert over an existing object (docs/master.md, "Upsert"). An unfinished put is preempted at once (its space
 * kept until put_start + release timeout, as a stale put's: its writer may still be writing). A complete
 * object under a read lease gets fresh space, and its old replicas wait for the lease to end (see
 * release_after_lease): returns 1 with the reply encoded, or OBJECT_REPLICA_BUSY with the object
 * untouched when no space is free. Otherwise, a complete object of the same length is rewritten in
 * place: its replicas go back to PROCESSING under the new owner and the reply is encoded (returns 1);
 * another length frees the old replicas now (returns 0: o is empty and needs a fresh allocation). */
static int upsert_existing(struct mc_master *m, struct object *o, uint64_t h, struct mc_uuid client, uint64_t len,
                           const struct mc_put_config *pc, uint64_t soft_ttl, uint64_t now, struct mc_wbuf *w) {
  if (count_status(o, MC_REPLICA_PROCESSING)) {
    preempt(m, o, now);
    return 0;
  }
  if (o->lease_ns > now) {
    struct replica *reps = NULL;
    uint32_t nok = 0, n = mc_place(m, pc, len, h, &reps, pc->replica_num, &nok);
    if (!n) {
      if (nok) atomic_store(&m->need_eviction, 1);
      MLOG_V(1, "key=%s, info=upsert_leased_no_space, value_length=%llu", o->key, (unsigned long long)len);
      return MC_OBJECT_REPLICA_BUSY;
    }
    MLOG_V(1, "key=%s, info=upsert_leased_reallocate, replicas=%u", o->key, n);
    release_after_lease(m, o, now, NULL); /* (an upsert start's reply witnesses nothing) */
    install_put(m, o, reps, n, client, len, pc, soft_ttl, now, w);
    return 1;
  }
  if (o->size != len || indexed(o)) {
    MLOG_V(1, "key=%s, info=upsert_reallocate, old_size=%llu, new_size=%llu", o->key, (unsigned long long)o->size,
           (unsigned long long)len);
    release_all(m, o, NULL);
    return 0;
  }
  for (uint32_t i = 0; i < o->nrep; i++) o->rep[i].status = MC_REPLICA_PROCESSING;
  set_new_put(m, o, client, len, pc, soft_ttl, now);
  mc_w_u32(w, o->nrep);
  for (uint32_t i = 0; i < o->nrep; i++) mc_obj_encode_replica(w, o, &o->rep[i]);
  MLOG_V(1, "key=%s, info=upsert_in_place, replicas=%u", o->key, o->nrep);
  log_allocated(o, client);
  return 1;
}

/* mc_place for a put in key group g (NULL: none): the group's segment is tried first, before the put's
 * own preferred segments; the first member placed fixes it (docs/master.md, "Key groups"). */
static uint32_t place_in_group(struct mc_master *m, struct kgroup *g, const struct mc_put_config *pc, uint64_t len,
                               uint64_t h, struct replica **reps, uint32_t *nok) {
  char *seg = g ? mc_kgroup_segment(m, g) : NULL;
  struct mc_put_config gpc = *pc;
  if (seg) {
    gpc.preferred[0] = seg;
    gpc.n_preferred = MC_MIN(pc->n_preferred + 1, (uint32_t)MC_MAX_PREFERRED);
    memcpy(&gpc.preferred[1], pc->preferred, sizeof(char *) * (gpc.n_preferred - 1));
  }
  uint32_t n = mc_place(m, &gpc, len, h, reps, pc->replica_num, nok);
  if (g && n && !seg) mc_kgroup_placed(m, g, (*reps)[0].seg->name);
  mc_free(seg);
  return n;
}

/* PutStart (upsert 0) and UpsertStart (upsert 1): they differ only in what an existing key does. */
static int start_write(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                       const struct mc_put_config *pc, struct mc_wbuf *w, int upsert) {
  uint64_t soft_ttl = 0;
  if (!klen || !len || !pc->replica_num || soft_pin_ttl(m, pc, &soft_ttl)) return MC_INVALID_PARAMS;
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = o && !upsert ? may_replace(m, o, now) : o && o->in_task ? MC_OBJECT_HAS_REPLICATION_TASK : 0;
  if (rc) {
    pthread_mutex_unlock(&sh->mu);
    MLOG_V(1, "key=%.*s, info=object_already_exists", (int)klen, (const char *)key);
    return rc;
  }
  int up = o && upsert ? upsert_existing(m, o, h, client, len, pc, soft_ttl, now, w) : 0;
  if (up > 0) mc_kgroup_assign(m, o, mc_kgroup_get(m, pc->group));
  if (up) {
    pthread_mutex_unlock(&sh->mu);
    return up > 0 ? 0 : up;
  }
  struct replica *reps = NULL;
  struct kgroup *g = mc_kgroup_get(m, pc->group);
  uint32_t nok = 0, n = place_in_group(m, g, pc, len, h, &reps, &nok);
  if (n) {
    if (!o) o = insert_new(m, sh, h, key, klen);
    install_put(m, o, reps, n, client, len, pc, soft_ttl, now, w);
    mc_kgroup_assign(m, o, g);
  } else {
    mc_kgroup_put(m, g);
    if (o) mc_obj_erase(m, sh, o); /* a preempted put (or replaced object) whose replacement found no space */
  }
  pthread_mutex_unlock(&sh->mu);
  if (n) return 0;
  if (nok) atomic_store(&m->need_eviction, 1);
  MLOG_V(1, "key=%.*s, info=no_available_handle, value_length=%llu", (int)klen, (const char *)key, (unsigned long long)len);
  return MC_NO_AVAILABLE_HANDLE;
}

int mc_master_put_start(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                        const struct mc_put_config *pc, struct mc_wbuf *w) {
  return start_write(m, client, key, klen, len, pc, w, 0);
}

int mc_master_upsert_start(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                           const struct mc_put_config *pc, struct mc_wbuf *w) {
  return start_write(m, client, key, klen, len, pc, w, 1);
}

/* The object an extent commit creates: one COMPLETE replica, then the PutEnd effects (LRU stamp, soft
 * pin clock) at once. Mirrors start_write + do_put_end for a put that cannot fail in between. */
int mc_obj_put_carved(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint64_t len,
                      const struct mc_put_config *pc, int (*carve)(void *ctx, int keep, struct replica *out),
                      void *ctx, struct mc_wsink *ws) {
  uint64_t soft_ttl = 0;
  if (!klen || !len || soft_pin_ttl(m, pc, &soft_ttl)) return MC_INVALID_PARAMS;
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = o ? may_replace(m, o, now) : 0;
  if (rc) {
    carve(ctx, 0, NULL);
    pthread_mutex_unlock(&sh->mu);
    MLOG_V(1, "key=%.*s, info=object_already_exists", (int)klen, (const char *)key);
    return rc;
  }
  struct replica rep;
  rc = carve(ctx, 1, &rep);
  if (rc) {
    if (o) mc_obj_erase(m, sh, o); /* a preempted put whose replacement failed, as in start_write */
    pthread_mutex_unlock(&sh->mu);
    return rc;
  }
  if (!o) o = insert_new(m, sh, h, key, klen);
  drop_rep_storage(o);
  o->rep1 = rep;
  o->rep = &o->rep1;
  o->nrep = 1;
  set_new_put(m, o, client, len, pc, soft_ttl, now);
  log_allocated(o, client);
  o->lease_ns = now; /* PutEnd: not leased, the LRU age starts here */
  if (soft_ttl) o->soft_pin_deadline_ns = now + soft_ttl * MC_NS_PER_MS;
  mc_obj_index_put(o, ws);
  pthread_mutex_unlock(&sh->mu);
  return 0;
}

static int rebuild(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, const struct mc_index_entry *e,
                   int witness, struct mc_wsink *ws) {
  const void *key = e->key;
  uint32_t klen = e->klen;
  uint64_t off = e->offset, size = e->size, soft_ttl_ms = e->soft_pin_ttl_ms;
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  /* the group first: its lock is a leaf under the shard lock, but a reference taken here needs none */
  struct kgroup *g = e->glen ? mc_kgroup_get_n(m, e->group, e->glen) : NULL;
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  if (!seg_readable(seg)) { /* unmounted meanwhile: its allocator goes with it */
    pthread_mutex_unlock(&sh->mu);
    mc_kgroup_put(m, g);
    return -1;
  }
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = 0;
  if (!o) {
    o = insert_new(m, sh, h, key, klen);
    o->seq = atomic_fetch_add(&m->next_seq, 1);
    o->size = size;
    o->put_start_ns = now;
    o->lease_ns = now + m->cfg.lease_ttl_ms * MC_NS_PER_MS; /* a lease the old master granted is honoured */
    o->hard_pin = e->hard_pin ? 1 : 0;
    mc_kgroup_rebuilt(m, o, g, seg->name);
    g = NULL;
    if ((o->soft_pin_ttl_ms = soft_ttl_ms)) {
      atomic_fetch_add(&m->n_soft_pinned, 1);
      o->soft_pin_deadline_ns = now + soft_ttl_ms * MC_NS_PER_MS;
    }
    o->rep1 = (struct replica){.seg = seg, .blk = blk, .off = off, .status = MC_REPLICA_COMPLETE};
    o->rep = &o->rep1;
    o->nrep = 1;
    if (witness) mc_obj_index_put(o, ws); /* the holder did not have it */
    rc = 1;
  } else if (witness) {
    rc = 0;
  } else if (o->size == size && count_status(o, MC_REPLICA_COMPLETE) == o->nrep) { /* another holder's copy */
    int here = 0;
    for (uint32_t i = 0; i < o->nrep; i++) here |= o->rep[i].seg == seg;
    if (!here) {
      struct replica *reps = mc_malloc(sizeof(*reps) * (o->nrep + 1));
      memcpy(reps, o->rep, sizeof(*reps) * o->nrep);
      reps[o->nrep] = (struct replica){.seg = seg, .blk = blk, .off = off, .status = MC_REPLICA_COMPLETE};
      uint32_t n = o->nrep + 1;
      o->nrep = 0;
      adopt_reps(o, reps, n);
      if (!o->kg && g) mc_kgroup_rebuilt(m, o, g, seg->name), g = NULL; /* the first copy's holder predates groups */
      rc = 1;
    }
  }
  pthread_mutex_unlock(&sh->mu);
  mc_kgroup_put(m, g); /* not taken by an object */
  return rc;
}

int mc_obj_rebuild(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, const struct mc_index_entry *e) {
  return rebuild(m, seg, blk, e, 0, NULL);
}

int mc_obj_recommit(struct mc_master *m, struct mseg *seg, struct mc_tlsf_block *blk, const struct mc_index_entry *e,
                    struct mc_wsink *ws) {
  return rebuild(m, seg, blk, e, 1, ws);
}

int mc_obj_held_at(struct mc_master *m, struct mseg *seg, uint64_t off, const void *key, uint32_t klen,
                   uint64_t size) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int here = 0;
  for (uint32_t i = 0; o && o->size == size && i < o->nrep; i++)
    here |= o->rep[i].seg == seg && o->rep[i].off == off && o->rep[i].status == MC_REPLICA_COMPLETE;
  pthread_mutex_unlock(&sh->mu);
  return here;
}

int mc_obj_remove_at(struct mc_master *m, struct mseg *seg, uint64_t off, const void *key, uint32_t klen,
                     struct mc_wsink *ws) {
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int here = 0;
  for (uint32_t i = 0; o && i < o->nrep; i++)
    here |= o->rep[i].seg == seg && o->rep[i].off == off && o->rep[i].status == MC_REPLICA_COMPLETE;
  if (here && count_status(o, MC_REPLICA_COMPLETE) == o->nrep) { /* (as a forced remove) */
    release_after_lease(m, o, now, ws);
    mc_obj_erase(m, sh, o);
  } else {
    here = 0;
  }
  pthread_mutex_unlock(&sh->mu);
  return here;
}

/* Only memory replicas exist here: MEMORY and ALL target them all, other types target none. */
static int targets_memory(uint8_t type) { return type == MC_REPLICA_MEMORY || type == MC_REPLICA_ALL; }

/* Finds key for an End/Revoke by `client`: OBJECT_NOT_FOUND or ILLEGAL_CLIENT, else 0 with *out. */
static int owned(struct mc_master *m, struct shard *sh, uint64_t h, const void *key, uint32_t klen,
                 struct mc_uuid client, struct object **out) {
  struct object *o = lookup_live(m, sh, h, key, klen);
  if (!o) return MC_OBJECT_NOT_FOUND;
  if (!mc_uuid_eq(o->owner, client)) return MC_ILLEGAL_CLIENT;
  if (o->in_task) return MC_OBJECT_HAS_REPLICATION_TASK; /* its PROCESSING replicas are the task's */
  *out = o;
  return 0;
}

static int do_put_end(struct mc_master *m, struct object *o, uint8_t type, struct mc_wsink *ws) {
  if (!targets_memory(type)) return MC_INVALID_WRITE;
  uint32_t processing = count_status(o, MC_REPLICA_PROCESSING);
  if (!processing) return count_status(o, MC_REPLICA_COMPLETE) == o->nrep ? 0 : MC_INVALID_WRITE;
  for (uint32_t i = 0; i < o->nrep; i++)
    if (o->rep[i].status == MC_REPLICA_PROCESSING) o->rep[i].status = MC_REPLICA_COMPLETE;
  uint64_t now = mc_now_ns();
  o->lease_ns = now; /* not leased, but the LRU age starts here */
  if (o->soft_pin_ttl_ms && !o->soft_pin_deadline_ns)
    o->soft_pin_deadline_ns = now + o->soft_pin_ttl_ms * MC_NS_PER_MS;
  mc_obj_index_put(o, ws);
  return 0;
}

int mc_master_put_end(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type,
                      struct mc_wsink *ws) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  struct object *o = NULL;
  pthread_mutex_lock(&sh->mu);
  int rc = owned(m, sh, h, key, klen, client, &o);
  if (!rc) rc = do_put_end(m, o, type, ws);
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

int mc_master_put_revoke(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen, uint8_t type) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  struct object *o = NULL;
  pthread_mutex_lock(&sh->mu);
  int rc = owned(m, sh, h, key, klen, client, &o);
  if (!rc && (!targets_memory(type) || count_status(o, MC_REPLICA_PROCESSING) != o->nrep)) rc = MC_INVALID_WRITE;
  if (!rc) {
    release_all(m, o, NULL); /* PROCESSING replicas: no index record */
    mc_obj_erase(m, sh, o);
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

/* ------------------------------------------------------------------ reads */

static int replicas(struct mc_master *m, const void *key, uint32_t klen, struct mc_wbuf *w, int lease) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = !o ? MC_OBJECT_NOT_FOUND : !count_readable(o) ? MC_REPLICA_IS_NOT_READY : 0;
  if (!rc && lease) grant_lease(m, o, mc_now_ns());
  if (!rc) encode_readable(w, o);
  pthread_mutex_unlock(&sh->mu);
  if (rc == MC_OBJECT_NOT_FOUND && lease) MLOG_V(1, "key=%.*s, info=object_not_found", (int)klen, (const char *)key);
  return rc;
}

int mc_master_get_replicas(struct mc_master *m, const void *key, uint32_t klen, struct mc_wbuf *w) {
  return replicas(m, key, klen, w, 1);
}

int mc_master_peek_replicas(struct mc_master *m, const void *key, uint32_t klen, struct mc_wbuf *w) {
  return replicas(m, key, klen, w, 0);
}

int mc_master_exist(struct mc_master *m, const void *key, uint32_t klen) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = find(sh, h, key, klen);
  int yes = o && count_readable(o) > 0;
  if (yes) grant_lease(m, o, mc_now_ns());
  pthread_mutex_unlock(&sh->mu);
  return yes;
}

uint64_t mc_master_lease_ttl_ms(const struct mc_master *m) { return m->cfg.lease_ttl_ms; }

/* ------------------------------------------------------------------ removal */

int mc_master_remove(struct mc_master *m, const void *key, uint32_t klen, int force, struct mc_wsink *ws) {
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  struct shard *sh = shard_of(m, h);
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = !o                                         ? MC_OBJECT_NOT_FOUND
           : o->in_task                               ? MC_OBJECT_HAS_REPLICATION_TASK /* even forced */
           : !force && o->lease_ns > now              ? MC_OBJECT_HAS_LEASE
           : count_status(o, MC_REPLICA_COMPLETE) != o->nrep ? MC_REPLICA_IS_NOT_READY
                                                      : 0;
  if (!rc) {
    release_after_lease(m, o, now, ws); /* force: the key goes now, leased bytes stay until the lease ends */
    mc_obj_erase(m, sh, o);
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

int mc_master_replica_clear(struct mc_master *m, struct mc_uuid client, const void *key, uint32_t klen,
                            const void *seg, uint32_t seg_len) {
  uint64_t h = mc_key_hash(key, klen), now = mc_now_ns();
  struct shard *sh = shard_of(m, h);
  int cleared = 0;
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  if (o && !o->in_task && mc_uuid_eq(o->owner, client) && o->lease_ns <= now && count_status(o, MC_REPLICA_COMPLETE) == o->nrep) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < o->nrep; i++) {
      const char *name = o->rep[i].seg->name;
      if (!seg_len || (strlen(name) == seg_len && !memcmp(name, seg, seg_len))) {
        mc_rep_free(m, o, &o->rep[i], 0, NULL); /* (BatchReplicaClear's reply witnesses nothing) */
        cleared = 1;
      } else {
        o->rep[k++] = o->rep[i];
      }
    }
    o->nrep = k;
    if (!k) mc_obj_erase(m, sh, o);
  }
  pthread_mutex_unlock(&sh->mu);
  if (cleared) MLOG_V(1, "key=%.*s, info=replica_clear", (int)klen, (const char *)key);
  return cleared;
}

/* Scope (NULL = every key; "" = the default namespace: keys without the 0x1f tenant separator; else keys
 * starting with it, sl bytes). */
static int in_scope(const char *scope, size_t sl, const struct object *o) {
  if (scope && !sl && memchr(o->key, 0x1f, o->klen)) return 0;
  return !sl || (o->klen >= sl && !memcmp(o->key, scope, sl));
}

/* o of a locked shard after dropping its dead replicas: 1 when it may be removed now (every replica
 * complete, no lease unless force), 0 when not or when it had none left (then it is erased already). */
static int removable(struct mc_master *m, struct shard *sh, struct object *o, int force, uint64_t now) {
  mc_obj_drop_dead(o);
  if (!o->nrep) {
    mc_obj_erase(m, sh, o);
    return 0;
  }
  return !o->in_task && (force || o->lease_ns <= now) && count_status(o, MC_REPLICA_COMPLETE) == o->nrep;
}

static void remove_now(struct mc_master *m, struct shard *sh, struct object *o, uint64_t now, struct mc_wsink *ws) {
  release_after_lease(m, o, now, ws);
  mc_obj_erase(m, sh, o);
}

/* Removes the complete, unleased (unless force) objects in scope of one locked shard (RemoveAll). */
static int64_t remove_in_shard(struct mc_master *m, struct shard *sh, const char *scope, int force, uint64_t now,
                               struct mc_wsink *ws) {
  size_t sl = scope ? strlen(scope) : 0;
  int64_t n = 0;
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b], *next; o; o = next) {
      next = o->next;
      if (!removable(m, sh, o, force, now) || !in_scope(scope, sl, o)) continue;
      remove_now(m, sh, o, now, ws);
      n++;
    }
  return n;
}

/* Candidates of one shard, copied out under its lock so that patterns are matched without it: what the
 * pattern sees (the key after the scope, up to its first NUL) and the object's identity (hash, seq), by
 * which the acting pass finds it again (an object replaced meanwhile has another seq and is left alone). */
struct candidates {
  struct cand {
    uint64_t hash, seq;
    size_t off, len;
    int hit;
  } *c;
  uint32_t n, cap;
  struct mc_wbuf text;
};

static void cand_add(struct candidates *cs, const struct object *o, size_t sl) {
  if (cs->n == cs->cap) {
    cs->cap = cs->cap ? 2 * cs->cap : 64;
    cs->c = mc_realloc(cs->c, cs->cap * sizeof(*cs->c));
  }
  size_t len = strnlen(o->key + sl, o->klen - sl);
  cs->c[cs->n++] = (struct cand){.hash = o->hash, .seq = o->seq, .off = cs->text.len, .len = len};
  mc_w_bytes_raw(&cs->text, o->key + sl, len);
}

/* Matches every candidate (no lock held). 1 when some matched, 0 none, -1 a match hit a limit. */
static int cand_match(struct candidates *cs, struct mc_regex *re) {
  int any = 0;
  for (uint32_t i = 0; i < cs->n; i++) {
    int r = mc_regex_match(re, (const char *)cs->text.p + cs->c[i].off, cs->c[i].len);
    if (r < 0) return -1;
    cs->c[i].hit = r;
    any |= r;
  }
  return any;
}

static void cand_free(struct candidates *cs) {
  mc_free(cs->c);
  mc_w_free(&cs->text);
}

static int regex_limit_hit(void) {
  static _Atomic uint64_t last_ns;
  uint64_t now = mc_now_ns(), prev = atomic_load(&last_ns);
  if (now - prev >= MC_NS_PER_S && atomic_compare_exchange_strong(&last_ns, &prev, now))
    LOG_WARN("a key pattern hit its match limit on a key; the request fails with INVALID_PARAMS");
  return MC_INVALID_PARAMS;
}

/* Removes the matching, complete, unleased (unless force) objects of one shard; -1 on a match limit. */
static int64_t remove_matching_in_shard(struct mc_master *m, struct shard *sh, struct mc_regex *re, const char *scope,
                                        int force, struct candidates *cs, struct mc_wsink *ws) {
  size_t sl = scope ? strlen(scope) : 0;
  cs->n = 0;
  cs->text.len = 0;
  pthread_mutex_lock(&sh->mu);
  uint64_t now = mc_now_ns();
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b], *next; o; o = next) {
      next = o->next;
      if (removable(m, sh, o, force, now) && in_scope(scope, sl, o)) cand_add(cs, o, sl);
    }
  pthread_mutex_unlock(&sh->mu);
  int any = cand_match(cs, re);
  if (any <= 0) return any;
  int64_t n = 0;
  pthread_mutex_lock(&sh->mu);
  now = mc_now_ns();
  for (uint32_t i = 0; i < cs->n; i++) {
    struct object *o = cs->c[i].hit ? mc_obj_find_seq(sh, cs->c[i].hash, cs->c[i].seq) : NULL;
    if (!o || !removable(m, sh, o, force, now)) continue;
    remove_now(m, sh, o, now, ws);
    n++;
  }
  pthread_mutex_unlock(&sh->mu);
  return n;
}

int64_t mc_master_remove_matching(struct mc_master *m, struct mc_regex *re, const char *scope, int force,
                                  struct mc_wsink *ws) {
  int64_t n = 0;
  struct candidates cs = {0};
  for (uint32_t i = 0; i < MC_NSHARDS; i++) {
    struct shard *sh = &m->shards[i];
    if (!re) {
      pthread_mutex_lock(&sh->mu);
      n += remove_in_shard(m, sh, scope, force, mc_now_ns(), ws);
      pthread_mutex_unlock(&sh->mu);
      continue;
    }
    int64_t k = remove_matching_in_shard(m, sh, re, scope, force, &cs, ws);
    if (k < 0) {
      n = regex_limit_hit();
      break;
    }
    n += k;
  }
  cand_free(&cs);
  return n;
}

int mc_master_replicas_matching(struct mc_master *m, struct mc_regex *re, const char *scope, struct mc_wbuf *w) {
  size_t sl = scope ? strlen(scope) : 0, count_at = w->len;
  uint32_t count = 0;
  int rc = 0;
  struct candidates cs = {0};
  mc_w_u32(w, 0);
  for (uint32_t i = 0; i < MC_NSHARDS && !w->err; i++) {
    struct shard *sh = &m->shards[i];
    cs.n = 0;
    cs.text.len = 0;
    pthread_mutex_lock(&sh->mu);
    for (uint32_t b = 0; b < sh->nbuckets; b++)
      for (struct object *o = sh->buckets[b]; o; o = o->next)
        if (count_readable(o) && (!scope || in_scope(scope, sl, o))) cand_add(&cs, o, sl);
    pthread_mutex_unlock(&sh->mu);
    int any = cand_match(&cs, re);
    if (any < 0) {
      rc = regex_limit_hit();
      break;
    }
    if (!any) continue;
    pthread_mutex_lock(&sh->mu);
    for (uint32_t k = 0; k < cs.n && !w->err; k++) {
      struct object *o = cs.c[k].hit ? mc_obj_find_seq(sh, cs.c[k].hash, cs.c[k].seq) : NULL;
      if (!o || !count_readable(o)) continue;
      mc_w_blob(w, o->key, o->klen);
      encode_readable(w, o);
      count++;
    }
    pthread_mutex_unlock(&sh->mu);
  }
  cand_free(&cs);
  if (w->err || rc) return rc;
  mc_le_put32(w->p + count_at, count);
  return 0;
}

/* ------------------------------------------------------------------ stale puts */

int mc_obj_release_if_stale(struct mc_master *m, struct shard *sh, struct object *o, uint64_t now) {
  uint64_t tmo = (uint64_t)m->cfg.put_start_release_timeout_sec * MC_NS_PER_S;
  if (o->in_task || !count_status(o, MC_REPLICA_PROCESSING) || put_age(o, now) < tmo) return 0;
  uint32_t k = 0;
  for (uint32_t i = 0; i < o->nrep; i++) {
    if (o->rep[i].status == MC_REPLICA_PROCESSING) mc_rep_release(o->rep[i].seg, o->rep[i].blk);
    else o->rep[k++] = o->rep[i];
  }
  o->nrep = k;
  if (k) return 0;
  MLOG_V(1, "key=%s, info=release_abandoned_put", o->key);
  mc_obj_erase(m, sh, o);
  return 1;
}

uint64_t mc_shard_release_stale(struct mc_master *m, struct shard *sh, uint64_t now) {
  uint64_t erased = 0;
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b], *next; o; o = next) {
      next = o->next;
      erased += (uint64_t)mc_obj_release_if_stale(m, sh, o, now);
    }
  return erased;
}

/* ------------------------------------------------------------------ copy and move tasks */

static int seg_name_is(const struct replica *r, const char *name) { return !strcmp(r->seg->name, name); }

/* The replica of o on a segment named name, or NULL. */
static struct replica *rep_named(struct object *o, const char *name) {
  for (uint32_t i = 0; i < o->nrep; i++)
    if (seg_name_is(&o->rep[i], name)) return &o->rep[i];
  return NULL;
}

static void task_rep_of(struct mc_task_rep *t, const struct replica *r) {
  t->seg = r->seg->id;
  t->off = r->off;
  t->addr = r->seg->base + r->off;
  t->ep = mc_strdup(r->seg->te_endpoint);
}

static void task_reps_clear(struct mc_task_place *tp) {
  mc_free(tp->src.ep);
  tp->src.ep = NULL;
  for (uint32_t i = 0; i < tp->ntgt; i++) mc_free(tp->tgt[i].ep), tp->tgt[i].ep = NULL;
  tp->ntgt = 0;
}

/* The source of a task on o (shard locked): a move's replica on src_name, else any readable one. */
static int task_source(struct mc_master *m, struct object *o, const char *src_name, const char *tenant,
                       struct replica **out) {
  *out = NULL;
  if (!src_name) {
    for (uint32_t i = 0; i < o->nrep && !*out; i++)
      if (seg_readable(o->rep[i].seg)) *out = &o->rep[i];
    return *out ? 0 : MC_REPLICA_IS_NOT_READY;
  }
  *out = rep_named(o, src_name);
  if (*out) return 0;
  return mc_seg_named(m, src_name, tenant) ? MC_REPLICA_NOT_FOUND : MC_SEGMENT_NOT_FOUND;
}

/* Adds the targets' replicas to o (the array grows; an inline replica moves into it). */
static void append_reps(struct object *o, const struct replica *add, uint32_t n) {
  struct replica *v = mc_malloc(sizeof(*v) * (o->nrep + n));
  memcpy(v, o->rep, sizeof(*v) * o->nrep);
  memcpy(v + o->nrep, add, sizeof(*v) * n);
  uint32_t total = o->nrep + n;
  drop_rep_storage(o);
  o->rep = v;
  o->nrep = total;
}

int mc_obj_task_begin(struct mc_master *m, const void *key, uint32_t klen, const char *tenant, const char *src_name,
                      char *const *targets, uint32_t ntgt, struct mc_task_place *tp,
                      int (*admit)(void *ctx, const struct mc_task_place *tp), void *ctx) {
  uint64_t h = mc_key_hash(key, klen);
  struct shard *sh = shard_of(m, h);
  struct replica got[MC_TASK_MAX_TARGETS], *src = NULL;
  uint32_t n = 0;
  memset(tp, 0, sizeof(*tp));
  pthread_mutex_lock(&sh->mu);
  struct object *o = lookup_live(m, sh, h, key, klen);
  int rc = !o                                                ? MC_OBJECT_NOT_FOUND
           : o->in_task                                      ? MC_OBJECT_HAS_REPLICATION_TASK
           : count_status(o, MC_REPLICA_COMPLETE) != o->nrep ? MC_REPLICA_IS_NOT_READY
                                                             : task_source(m, o, src_name, tenant, &src);
  for (uint32_t i = 0; !rc && i < ntgt; i++) {
    rc = rep_named(o, targets[i]) ? MC_REPLICA_ALREADY_EXISTS : mc_place_on(m, targets[i], tenant, o->size, &got[n]);
    n += !rc;
  }
  if (!rc) {
    tp->hash = h;
    tp->seq = o->seq;
    tp->size = o->size;
    tp->executor = got[0].seg->client;
    task_rep_of(&tp->src, src);
    for (uint32_t i = 0; i < n; i++) task_rep_of(&tp->tgt[i], &got[i]);
    tp->ntgt = n;
    rc = admit(ctx, tp);
  }
  if (rc) {
    for (uint32_t i = 0; i < n; i++) mc_rep_release(got[i].seg, got[i].blk);
    task_reps_clear(tp);
  } else {
    append_reps(o, got, n); /* src pointed into the old array: not used past here */
    o->in_task = 1;
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}

/* The replica of o at t (its segment and offset) with status st, or NULL. */
static struct replica *rep_at(struct object *o, const struct mc_task_rep *t, uint8_t st) {
  for (uint32_t i = 0; i < o->nrep; i++)
    if (mc_uuid_eq(o->rep[i].seg->id, t->seg) && o->rep[i].off == t->off && o->rep[i].status == st) return &o->rep[i];
  return NULL;
}

/* Takes r out of o's array (order kept); r's space is the caller's to free first. */
static void rep_unlink(struct object *o, struct replica *r) {
  size_t i = (size_t)(r - o->rep);
  memmove(r, r + 1, sizeof(*r) * (o->nrep - i - 1));
  o->nrep--;
}

static void index_put_one(const struct object *o, const struct replica *r, struct mc_wsink *ws) {
  struct mc_hidx *h = atomic_load(&r->seg->hidx);
  if (!h) return;
  uint64_t off, len;
  mc_tlsf_block_range(r->blk, &off, &len);
  witnessed(ws, mc_hidx_put(h, o->key, o->klen, r->seg->id, r->off, len, o->size, o->hard_pin, o->soft_pin_ttl_ms,
                            mc_kgroup_name(o->kg), witness_to(ws)));
}

int mc_obj_task_end(struct mc_master *m, const struct mc_task_place *tp, uint8_t type, int ok, uint64_t hold_until_ns) {
  struct shard *sh = shard_of(m, tp->hash);
  uint64_t now = mc_now_ns();
  pthread_mutex_lock(&sh->mu);
  struct object *o = mc_obj_find_seq(sh, tp->hash, tp->seq);
  int rc = o ? 0 : MC_OBJECT_NOT_FOUND;
  if (o) {
    mc_obj_drop_dead(o); /* a target on a segment being unmounted is gone with it */
    for (uint32_t i = 0; i < tp->ntgt && !rc; i++)
      if (!rep_at(o, &tp->tgt[i], MC_REPLICA_PROCESSING)) rc = MC_REPLICA_IS_GONE;
    ok = ok && !rc;
    for (uint32_t i = 0; i < tp->ntgt; i++) {
      struct replica *r = rep_at(o, &tp->tgt[i], MC_REPLICA_PROCESSING);
      if (!r) continue;
      if (ok) {
        r->status = MC_REPLICA_COMPLETE;
        index_put_one(o, r, NULL); /* (MARK_TASK_COMPLETE's reply witnesses nothing) */
      } else {
        if (hold_until_ns > now) mc_discard_push(m, r->seg, r->blk, hold_until_ns);
        else mc_rep_release(r->seg, r->blk);
        rep_unlink(o, r);
      }
    }
    struct replica *src = ok && type == MC_TASK_MOVE ? rep_at(o, &tp->src, MC_REPLICA_COMPLETE) : NULL;
    if (src) { /* a reader holding a lease keeps reading it until the lease ends (release_after_lease) */
      mc_rep_free(m, o, src, o->lease_ns > now ? o->lease_ns : 0, NULL);
      rep_unlink(o, src);
    }
    o->in_task = 0;
    if (!o->nrep) mc_obj_erase(m, sh, o);
  }
  pthread_mutex_unlock(&sh->mu);
  return rc;
}
