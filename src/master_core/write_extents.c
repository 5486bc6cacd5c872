/* Write extents: one-round-trip puts (write_extents.h; docs/master.md "Write extents").
 *
 * An extent is a TLSF block allocated on a segment like any replica, then held for one client. Its
 * still-reserved bytes are a short list of allocated "pieces" (initially the whole block). COMMIT_PUT
 * carves the committed range out of the piece holding it (mc_tlsf_carve): the range becomes an ordinary
 * allocated block owned by a new COMPLETE object, the bytes before and after it stay reserved pieces.
 * A piece is never on a free list, so nothing else can be allocated there while the extent exists; a
 * freed object block merges only with FREE neighbours, so it never swallows a reserved piece.
 *
 * SAFETY (no write may land in space owned by another object). The client writes a range before
 * committing it, so a write can race only with the master taking the extent away. The master takes an
 * extent away in four cases, each of which the client can see coming or cannot be harmed by:
 *   - RELEASE_EXTENT: sent by the client itself once no write into the extent is in flight.
 *   - lease expiry (housekeeping): the lease (put_start_release_timeout_sec, the same bound the master
 *     gives an abandoned PutStart's bytes) is renewed by every commit; the client computes its own
 *     deadline from the time it SENT the reserve/commit (earlier than the master's stamp) and starts no
 *     write within a safety margin of it.
 *   - client expiry (no ping for client_ttl) or replacement by a new incarnation: the reply carries
 *     client_ttl; the client starts no write unless a ping it sent less than client_ttl minus the margin
 *     ago was answered OK (the master's expiry clock starts no earlier than that ping's arrival).
 *     LEASE-ONLY extents are exempt: a client the master does not track (a pure client: it has no
 *     segment and sends no pings) gets an extent whose lease is min(put_start_release_timeout_sec,
 *     client_ttl) and whose grant says client_ttl = 0; only its lease, RELEASE_EXTENT or an unmount
 *     end it, never the expiry of a client record under that id. So a pure client that dies holds its
 *     extent no longer than a live client that dies holds its own.
 *   - unmount of the extent's segment: as for PROCESSING replicas of PutStart, the space leaves the
 *     master with the segment; a remount under the same name builds a new allocator, and the client
 *     (which learns from a failed commit or ping) retires the extent at once. Transfers into an extent use
 *     cached segment descriptors without the refresh-and-retry of ordinary puts, so a write aimed at a
 *     restarted holder fails instead of landing in its new incarnation.
 * A reclaimed extent answers COMMIT_PUT with LEASE_EXPIRED; the client then redoes that put through
 * PutStart/PutEnd, so callers never see an error the two-round-trip path would not give.
 *
 * Locking: ext_mu (one per master, in struct mc_extents) guards the table and every extent's pieces.
 * Order: shard->mu -> ext_mu -> seg_mu -> alloc_mu. A segment pointer held by an extent stays valid
 * while ext_mu is held: the sweeper drops extents on UNMOUNTING segments (under ext_mu) before freeing
 * those segments. */
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"
#include "mooncake/store_errors.h"

#define NBUCKETS 256

struct piece {
  struct mc_tlsf_block *blk;
  uint64_t off, len; /* segment-relative bytes */
};

struct extent {
  struct extent *next;
  uint64_t id;
  struct mc_uuid client;
  struct mseg *seg;
  uint64_t base, len; /* segment-relative start and length of the whole extent */
  uint64_t deadline_ns, lease_ns;
  int lease_only; /* granted to an untracked client: not ended by client expiry (see above) */
  struct piece *pc; /* sorted by offset */
  uint32_t n, cap;
};

struct mc_extents {
  pthread_mutex_t mu;
  struct extent *b[NBUCKETS];
  uint64_t next_id, count;
};

static uint64_t lease_ns(const struct mc_master *m) {
  return (uint64_t)m->cfg.put_start_release_timeout_sec * MC_NS_PER_S;
}

static struct extent **slot(struct mc_extents *x, uint64_t id) { return &x->b[(id * 0x9E3779B97F4A7C15ull) >> 56]; }

static struct extent *find(struct mc_extents *x, uint64_t id) {
  for (struct extent *e = *slot(x, id); e; e = e->next)
    if (e->id == id) return e;
  return NULL;
}

static void unlink_extent(struct mc_extents *x, struct extent *e) {
  for (struct extent **pp = slot(x, e->id); *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      break;
    }
  x->count--;
  mc_free(e->pc);
  mc_free(e);
}

/* Frees every reserved piece (the segment is alive: caller holds ext_mu, see above) and the extent. */
static void release(struct mc_extents *x, struct extent *e, const char *why) {
  for (uint32_t i = 0; i < e->n; i++) mc_rep_release(e->seg, e->pc[i].blk);
  char id[37];
  mc_uuid_str(e->client, id);
  MLOG_V(1, "extent=%llu, client_id=%s, segment=%s, pieces=%u, action=release_extent, reason=%s",
         (unsigned long long)e->id, id, e->seg->name, e->n, why);
  unlink_extent(x, e);
}

void mc_extents_init(struct mc_master *m) {
  struct mc_extents *x = mc_calloc(1, sizeof(*x));
  pthread_mutex_init(&x->mu, NULL);
  x->next_id = mc_now_ns(); /* ids of an earlier master incarnation are not reused */
  m->ext = x;
}

void mc_extents_destroy(struct mc_master *m) {
  struct mc_extents *x = m->ext;
  if (!x) return;
  for (uint32_t i = 0; i < NBUCKETS; i++)
    while (x->b[i]) unlink_extent(x, x->b[i]);
  pthread_mutex_destroy(&x->mu);
  mc_free(x);
  m->ext = NULL;
}

/* Applies fn to every extent matching pred (fn may unlink it). */
static uint32_t for_each(struct mc_master *m, int (*pred)(struct extent *, const void *), const void *arg,
                         void (*fn)(struct mc_extents *, struct extent *)) {
  struct mc_extents *x = m->ext;
  uint32_t n = 0;
  pthread_mutex_lock(&x->mu);
  for (uint32_t i = 0; i < NBUCKETS; i++)
    for (struct extent *e = x->b[i], *next; e; e = next) {
      next = e->next;
      if (pred(e, arg)) fn(x, e), n++;
    }
  pthread_mutex_unlock(&x->mu);
  return n;
}

static int of_client(struct extent *e, const void *arg) {
  return !e->lease_only && mc_uuid_eq(e->client, *(const struct mc_uuid *)arg);
}
static int on_unmounting(struct extent *e, const void *arg) { return !seg_readable(e->seg); }
static int due(struct extent *e, const void *arg) { return e->deadline_ns <= *(const uint64_t *)arg; }
static void release_dead_client(struct mc_extents *x, struct extent *e) { release(x, e, "client_expired"); }
static void release_expired(struct mc_extents *x, struct extent *e) { release(x, e, "lease_expired"); }

void mc_extents_release_client(struct mc_master *m, struct mc_uuid client) {
  for_each(m, of_client, &client, release_dead_client);
}

void mc_extents_drop_unmounting(struct mc_master *m) { for_each(m, on_unmounting, NULL, unlink_extent); }

uint32_t mc_extents_expire(struct mc_master *m, uint64_t now_ns) { return for_each(m, due, &now_ns, release_expired); }

void mc_extents_stats(struct mc_master *m, uint64_t *count, uint64_t *bytes) {
  struct mc_extents *x = m->ext;
  *count = *bytes = 0;
  pthread_mutex_lock(&x->mu);
  for (uint32_t i = 0; i < NBUCKETS; i++)
    for (struct extent *e = x->b[i]; e; e = e->next) {
      (*count)++;
      for (uint32_t j = 0; j < e->n; j++) *bytes += e->pc[j].len;
    }
  pthread_mutex_unlock(&x->mu);
}

/* ------------------------------------------------------------------ reserve */

static int client_live(struct mc_master *m, struct mc_uuid client) {
  pthread_rwlock_rdlock(&m->seg_mu);
  int live = mc_client_find_locked(m, client) != NULL;
  pthread_rwlock_unlock(&m->seg_mu);
  return live;
}

/* An allocation of len bytes on a segment too small for it (len > size / 64) is swapped for one of
 * size / 64 bytes on the same segment when that still holds min_len; else dropped. 1 when r holds a
 * block of *len bytes. */
static int fit_share(struct replica *r, uint64_t min_len, uint64_t *len) {
  struct mseg *s = r->seg;
  uint64_t share = (s->size / MC_EXTENT_SEG_RATIO) & ~(uint64_t)(MC_TLSF_ALIGN - 1);
  if (*len <= share) return 1;
  mc_rep_release(s, r->blk);
  if (share < min_len) return 0;
  pthread_mutex_lock(&s->alloc_mu);
  r->blk = atomic_load(&s->state) == MC_SEG_OK ? mc_tlsf_alloc(s->tlsf, share, &r->off) : NULL;
  if (r->blk) atomic_store(&s->used, mc_tlsf_used(s->tlsf));
  pthread_mutex_unlock(&s->alloc_mu);
  *len = share;
  return r->blk != NULL;
}

static void encode_grant(struct mc_master *m, const struct extent *e, struct mc_wbuf *w) {
  struct mseg *s = e->seg;
  struct mc_replica_rec rec = {.status = MC_REPLICA_PROCESSING, .size = e->len, .address = s->base + e->base,
                               .te_endpoint = s->te_endpoint, .segment_name = s->name, .protocol = s->protocol,
                               .zone = s->zone, .host_id = s->host_id};
  mc_w_u64(w, e->id);
  mc_put_replica(w, &rec);
  mc_w_u64(w, e->lease_ns / 1000000);
  mc_w_u64(w, e->lease_only ? 0 : (uint64_t)m->cfg.client_ttl * 1000);
  mc_w_u64(w, m->view_version);
}

int mc_master_reserve_extent(struct mc_master *m, struct mc_uuid client, uint64_t min_len, uint64_t len_hint,
                             const struct mc_put_config *pc, struct mc_wbuf *w) {
  if (!min_len || pc->replica_num != 1 || min_len > MC_EXTENT_MAX_BYTES) return MC_INVALID_PARAMS;
  uint64_t len = MC_MIN(MC_MAX(len_hint, min_len), MC_EXTENT_MAX_BYTES);
  len = (len + MC_TLSF_ALIGN - 1) & ~(uint64_t)(MC_TLSF_ALIGN - 1);
  struct mc_extents *x = m->ext;
  pthread_mutex_lock(&x->mu);
  /* Checked under ext_mu: an expiry removes the client first and then frees its extents under ext_mu,
   * so an extent granted here as a live client's is seen by that release. An untracked client gets a
   * lease-only extent. */
  int lease_only = !client_live(m, client);
  uint64_t lease = lease_ns(m);
  if (lease_only) lease = MC_MIN(lease, (uint64_t)m->cfg.client_ttl * MC_NS_PER_S);
  struct replica *r = NULL;
  uint32_t nok = 0, n = mc_place(m, pc, len, x->next_id, &r, 1, &nok);
  if (!n || !fit_share(r, min_len, &len)) {
    pthread_mutex_unlock(&x->mu);
    mc_free(r);
    return MC_NO_AVAILABLE_HANDLE;
  }
  struct extent *e = mc_calloc(1, sizeof(*e));
  *e = (struct extent){.id = x->next_id++, .client = client, .seg = r->seg, .base = r->off, .len = len,
                       .deadline_ns = mc_now_ns() + lease, .lease_ns = lease, .lease_only = lease_only,
                       .n = 1, .cap = 4};
  e->pc = mc_malloc(sizeof(*e->pc) * e->cap);
  e->pc[0] = (struct piece){r->blk, r->off, len};
  struct extent **sl = slot(x, e->id);
  e->next = *sl;
  *sl = e;
  x->count++;
  encode_grant(m, e, w);
  char id[37];
  mc_uuid_str(client, id);
  MLOG_V(1,
         "extent=%llu, client_id=%s, segment=%s, offset=%llu, length=%llu, lease_ms=%llu%s, action=reserve_extent",
         (unsigned long long)e->id, id, e->seg->name, (unsigned long long)e->base, (unsigned long long)len,
         (unsigned long long)(lease / 1000000), lease_only ? " (lease only)" : "");
  pthread_mutex_unlock(&x->mu);
  mc_free(r);
  return 0;
}

/* ------------------------------------------------------------------ commit */

/* The piece holding [off, off + len) (segment-relative), searched from the end: commits mostly arrive
 * in carving order, so the last piece usually holds them. -1 when none does. */
static int piece_of(const struct extent *e, uint64_t off, uint64_t len) {
  for (uint32_t i = e->n; i-- > 0;) {
    const struct piece *p = &e->pc[i];
    if (off >= p->off && off - p->off < p->len && len <= p->len - (off - p->off)) return (int)i;
  }
  return -1;
}

/* Replaces piece i by head and tail (either may be NULL). */
static void replace_piece(struct extent *e, uint32_t i, struct mc_tlsf_block *head, struct mc_tlsf_block *tail) {
  struct piece repl[2];
  uint32_t k = 0;
  if (head) repl[k++] = (struct piece){head, 0, 0};
  if (tail) repl[k++] = (struct piece){tail, 0, 0};
  for (uint32_t j = 0; j < k; j++) mc_tlsf_block_range(repl[j].blk, &repl[j].off, &repl[j].len);
  if (e->n + 1 > e->cap) {
    e->cap *= 2;
    e->pc = mc_realloc(e->pc, sizeof(*e->pc) * e->cap);
  }
  memmove(&e->pc[i + k], &e->pc[i + 1], sizeof(*e->pc) * (e->n - i - 1));
  memcpy(&e->pc[i], repl, sizeof(*repl) * k);
  e->n = e->n - 1 + k;
}

struct commit {
  struct mc_master *m;
  struct mc_uuid client;
  uint64_t ext_id, off, len;
};

/* objects.c's callback, under the key's shard lock: keep -> carve the range into *out (COMPLETE);
 * !keep (the key exists) -> carve it and give it back to the pool (the client is done writing it). */
static int carve_range(void *ctx, int keep, struct replica *out) {
  struct commit *c = ctx;
  struct mc_extents *x = c->m->ext;
  pthread_mutex_lock(&x->mu);
  struct extent *e = find(x, c->ext_id);
  int rc = !e                                    ? MC_LEASE_EXPIRED
           : !mc_uuid_eq(e->client, c->client)   ? MC_ILLEGAL_CLIENT
           : atomic_load(&e->seg->state) != MC_SEG_OK ? MC_LEASE_EXPIRED
           : c->off > e->len                     ? MC_INVALID_PARAMS
                                                 : 0;
  uint64_t rlen = (c->len + MC_TLSF_ALIGN - 1) & ~(uint64_t)(MC_TLSF_ALIGN - 1);
  int i = rc ? -1 : piece_of(e, e->base + c->off, rlen);
  if (!rc && i < 0) rc = MC_INVALID_PARAMS; /* outside the extent, or committed before */
  if (rc == MC_LEASE_EXPIRED && e && seg_readable(e->seg)) /* draining: give back what the extent reserves there */
    release(x, e, "segment_not_allocatable");
  if (rc) {
    pthread_mutex_unlock(&x->mu);
    return rc;
  }
  struct mseg *s = e->seg;
  struct mc_tlsf_block *head, *tail;
  pthread_mutex_lock(&s->alloc_mu);
  struct mc_tlsf_block *mid = mc_tlsf_carve(s->tlsf, e->pc[i].blk, e->base + c->off, c->len, &head, &tail);
  if (mid && !keep) {
    mc_tlsf_free(s->tlsf, mid);
    atomic_store(&s->used, mc_tlsf_used(s->tlsf));
  }
  pthread_mutex_unlock(&s->alloc_mu);
  if (!mid) { /* unaligned: nothing changed */
    pthread_mutex_unlock(&x->mu);
    return MC_INVALID_PARAMS;
  }
  replace_piece(e, (uint32_t)i, head, tail);
  if (keep) *out = (struct replica){.seg = s, .blk = mid, .off = e->base + c->off, .status = MC_REPLICA_COMPLETE};
  e->deadline_ns = mc_now_ns() + e->lease_ns;
  pthread_mutex_unlock(&x->mu);
  return 0;
}

int mc_master_commit_put(struct mc_master *m, struct mc_uuid client, uint64_t ext_id, const void *key, uint32_t klen,
                         uint64_t off, uint64_t len, const struct mc_put_config *pc, struct mc_wsink *ws) {
  if (!klen || !len || len > MC_EXTENT_MAX_BYTES || off % MC_TLSF_ALIGN) return MC_INVALID_PARAMS;
  struct commit c = {m, client, ext_id, off, len};
  return mc_obj_put_carved(m, client, key, klen, len, pc, carve_range, &c, ws);
}

int mc_master_release_extent(struct mc_master *m, struct mc_uuid client, uint64_t ext_id) {
  struct mc_extents *x = m->ext;
  pthread_mutex_lock(&x->mu);
  struct extent *e = find(x, ext_id);
  int rc = e && !mc_uuid_eq(e->client, client) ? MC_ILLEGAL_CLIENT : 0;
  if (e && !rc) release(x, e, "released_by_client");
  pthread_mutex_unlock(&x->mu);
  return rc;
}
