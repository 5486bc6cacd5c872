/* Segment registry, client table and replica placement (docs/master.md, "Segments", "Placement"), and the
 * registry's part of mount and unmount (what reaches beyond it, and client expiry: mount.c). seg_mu guards
 * the registry; allocation on a segment takes its alloc_mu inside seg_mu (read). */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "master_core/holder_feed.h"
#include "master_core/core.h"
#include "mooncake/store_errors.h"

/* ------------------------------------------------------------------ randomness */

static uint64_t rnd(void) {
  static __thread uint64_t s;
  if (!s) s = mc_now_ns() ^ ((uint64_t)(uintptr_t)&s << 16) ^ 0x9e3779b97f4a7c15ull;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

/* ------------------------------------------------------------------ indexes */

static uint64_t uuid_hash(struct mc_uuid u) {
  uint64_t x = u.hi * 0x9e3779b97f4a7c15ull ^ u.lo;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ x >> 32;
}

/* Appends s to the array v (n, cap), recording its index in s->pos[slot]. */
static void segv_add(struct mseg ***v, uint32_t *n, uint32_t *cap, struct mseg *s, int slot) {
  if (*n == *cap) {
    *cap = *cap ? 2 * *cap : 4;
    *v = mc_realloc(*v, sizeof(**v) * *cap);
  }
  s->pos[slot] = *n;
  (*v)[(*n)++] = s;
}

/* Removes s from v in O(1): the last element takes its place. */
static void segv_del(struct mseg **v, uint32_t *n, struct mseg *s, int slot) {
  struct mseg *last = v[--*n];
  v[s->pos[slot]] = last;
  last->pos[slot] = s->pos[slot];
}

static const char *group_key(const struct mseg *s, int kind) {
  return kind == MC_GRP_NAME ? s->name : kind == MC_GRP_HOST ? s->host_id : kind == MC_GRP_ZONE ? s->zone : s->tenant;
}

static struct seg_group *group_find(const struct mc_master *m, int kind, const char *key) {
  uint64_t h = mc_key_hash(key, strlen(key));
  for (struct mc_hnode *x = mc_htab_first(&m->groups[kind], h); x; x = mc_htab_next(x, h)) {
    struct seg_group *g = MC_HTAB_ENTRY(x, struct seg_group, hn);
    if (!strcmp(g->key, key)) return g;
  }
  return NULL;
}

/* local_first's host order (m->host_order): the host groups sorted by host id, kept only under that strategy
 * (a new host costs a move of the array). The index of the first group whose host id sorts after key. */
static uint32_t host_order_after(const struct mc_master *m, const char *key) {
  uint32_t lo = 0, hi = m->nhost_order;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (strcmp(m->host_order[mid]->key, key) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int host_ordered(const struct mc_master *m, int kind) {
  return kind == MC_GRP_HOST && m->cfg.strategy == MC_STRATEGY_LOCAL_FIRST;
}

static void host_order_add(struct mc_master *m, struct seg_group *g) {
  if (m->nhost_order == m->caphost_order) {
    m->caphost_order = m->caphost_order ? 2 * m->caphost_order : 16;
    m->host_order = mc_realloc(m->host_order, sizeof(*m->host_order) * m->caphost_order);
  }
  uint32_t i = host_order_after(m, g->key);
  memmove(&m->host_order[i + 1], &m->host_order[i], sizeof(*m->host_order) * (m->nhost_order - i));
  m->host_order[i] = g;
  m->nhost_order++;
}

static void host_order_del(struct mc_master *m, struct seg_group *g) {
  uint32_t i = host_order_after(m, g->key);
  if (!i || m->host_order[i - 1] != g) return;
  memmove(&m->host_order[i - 1], &m->host_order[i], sizeof(*m->host_order) * (m->nhost_order - i));
  m->nhost_order--;
}

static void group_join(struct mc_master *m, struct mseg *s, int kind) {
  const char *key = group_key(s, kind);
  struct seg_group *g = group_find(m, kind, key);
  if (!g) {
    g = mc_calloc(1, sizeof(*g));
    g->key = mc_strdup(key);
    mc_htab_add(&m->groups[kind], &g->hn, mc_key_hash(key, strlen(key)));
    if (host_ordered(m, kind)) host_order_add(m, g);
  }
  segv_add(&g->v, &g->n, &g->cap, s, kind);
  s->grp[kind] = g;
}

static void group_leave(struct mc_master *m, struct mseg *s, int kind) {
  struct seg_group *g = s->grp[kind];
  segv_del(g->v, &g->n, s, kind);
  s->grp[kind] = NULL;
  if (g->n) return;
  if (host_ordered(m, kind)) host_order_del(m, g);
  mc_htab_del(&m->groups[kind], &g->hn);
  mc_free(g->key);
  mc_free(g->v);
  mc_free(g);
}

/* ------------------------------------------------------------------ placement */

struct place {
  struct mc_master *m;
  const struct mc_put_config *pc;
  uint64_t size, hash;
  struct replica *reps;
  uint32_t want, got;
  const struct seg_group *host, *zone; /* the writer's host and zone groups, NULL when none */
  const struct seg_group *realm;       /* the segments of the writer's realm (never NULL while placing) */
};

enum tier { TIER_HOST, TIER_ZONE, TIER_REST };

static int name_used(const struct place *p, const char *name) {
  for (uint32_t i = 0; i < p->got; i++)
    if (!strcmp(p->reps[i].seg->name, name)) return 1;
  return 0;
}

static int same_host(const struct place *p, const struct mseg *s) { return p->host && s->grp[MC_GRP_HOST] == p->host; }

static int same_zone(const struct place *p, const struct mseg *s) { return p->zone && s->grp[MC_GRP_ZONE] == p->zone; }

static int in_tier(const struct place *p, const struct mseg *s, int tier) {
  if (tier == TIER_HOST) return same_host(p, s);
  if (tier == TIER_ZONE) return !same_host(p, s) && same_zone(p, s);
  return !same_host(p, s) && !same_zone(p, s);
}

/* The segments a tier is drawn from, in *n: the writer's host group, its zone group (its members on the
 * writer's host are skipped), or its realm's segments (those of the two groups skipped). Empty when the
 * tier is: a writer without a host id or zone, or one whose host or zone holds every segment. */
static struct mseg **tier_source(const struct place *p, int tier, uint32_t *n) {
  const struct seg_group *g = tier == TIER_HOST ? p->host : tier == TIER_ZONE ? p->zone : p->realm;
  uint32_t all = p->m->nsegs;
  *n = g ? g->n : 0;
  if (tier == TIER_REST && ((p->host && p->host->n == all) || (p->zone && p->zone->n == all))) *n = 0;
  return g ? g->v : NULL;
}

static int allocatable(const struct place *p, const struct mseg *s) {
  return atomic_load(&s->state) == MC_SEG_OK && mc_same_realm(s->tenant, p->pc->tenant) && !name_used(p, s->name) &&
         mc_now_ns() >= atomic_load(&s->alloc_after_ns);
}

/* One replica on s if it has room. */
static int try_seg(struct place *p, struct mseg *s) {
  uint64_t off = 0;
  pthread_mutex_lock(&s->alloc_mu);
  struct mc_tlsf_block *b = mc_tlsf_alloc(s->tlsf, p->size, &off);
  if (b) atomic_store(&s->used, mc_tlsf_used(s->tlsf));
  pthread_mutex_unlock(&s->alloc_mu);
  if (!b) return 0;
  p->reps[p->got++] = (struct replica){.seg = s, .blk = b, .off = off, .status = MC_REPLICA_PROCESSING};
  return 1;
}

static void place_preferred(struct place *p) {
  for (uint32_t i = 0; i < p->pc->n_preferred && p->got < p->want; i++) {
    const struct seg_group *g = group_find(p->m, MC_GRP_NAME, p->pc->preferred[i]);
    for (uint32_t j = 0; g && j < g->n; j++)
      if (allocatable(p, g->v[j]) && try_seg(p, g->v[j])) break;
  }
}

/* random: from a random start, consecutive segments of the tier, at most 100 of them examined. */
static void walk_random(struct place *p, int tier) {
  uint32_t n;
  struct mseg **v = tier_source(p, tier, &n);
  if (!n) return;
  uint32_t start = (uint32_t)(rnd() % n), examined = 0;
  for (uint32_t i = 0; i < n && examined < 100 && p->got < p->want; i++) {
    struct mseg *s = v[(start + i) % n];
    if (!in_tier(p, s, tier)) continue;
    examined++;
    if (allocatable(p, s)) try_seg(p, s);
  }
}

static double free_ratio(const struct mseg *s) {
  return s->size ? 1.0 - (double)atomic_load(&s->used) / (double)s->size : 0;
}

static int by_free_ratio(const void *a, const void *b) {
  double fa = free_ratio(*(struct mseg *const *)a), fb = free_ratio(*(struct mseg *const *)b);
  return fa < fb ? 1 : fa > fb ? -1 : 0;
}

/* Collects up to max allocatable tier members, from a random start. */
static uint32_t collect(struct place *p, int tier, struct mseg **out, uint32_t max) {
  uint32_t n, k = 0;
  struct mseg **v = tier_source(p, tier, &n);
  if (!n) return 0;
  uint32_t start = (uint32_t)(rnd() % n);
  for (uint32_t i = 0; i < n && k < max; i++) {
    struct mseg *s = v[(start + i) % n];
    if (in_tier(p, s, tier) && allocatable(p, s)) out[k++] = s;
  }
  return k;
}
static void try_in_order(struct place *p, struct mseg **c, uint32_t k) {
  for (uint32_t i = 0; i < k && p->got < p->want; i++)
    if (allocatable(p, c[i])) try_seg(p, c[i]);
}

/* free_ratio_first: a sample of 6 x remaining candidates, emptiest first; then random. */
static void walk_free_ratio(struct place *p, int tier) {
  uint32_t max = MC_MIN(6 * (p->want - p->got), p->m->nsegs);
  struct mseg **c = mc_malloc(sizeof(*c) * (max ? max : 1));
  uint32_t k = collect(p, tier, c, max);
  qsort(c, k, sizeof(*c), by_free_ratio);
  try_in_order(p, c, k);
  mc_free(c);
  if (p->got < p->want) walk_random(p, tier);
}

static __thread const char *lf_host; /* qsort context of by_cyclic_host: the writer's host id */

static int by_name(const void *a, const void *b) {
  return strcmp((*(struct mseg *const *)a)->name, (*(struct mseg *const *)b)->name);
}

/* Cyclic lexicographic host order starting after the writer's host, then by name. */
static int by_cyclic_host(const void *a, const void *b) {
  const struct mseg *x = *(struct mseg *const *)a, *y = *(struct mseg *const *)b;
  int ax = strcmp(x->host_id, lf_host) <= 0, ay = strcmp(y->host_id, lf_host) <= 0;
  if (ax != ay) return ax - ay;
  int c = strcmp(x->host_id, y->host_id);
  return c ? c : strcmp(x->name, y->name);
}

/* local_first's rest tier: the hosts in cyclic host-id order after the writer's, each host's segments by
 * name, until the replicas are placed (the order a sort of the whole tier gives, without the sort). */
static void walk_hosts_in_order(struct place *p) {
  struct mc_master *m = p->m;
  uint32_t nh = m->nhost_order, first = host_order_after(m, lf_host), cap = 0;
  struct mseg **c = NULL;
  for (uint32_t j = 0; j < nh && p->got < p->want; j++) {
    const struct seg_group *g = m->host_order[(first + j) % nh];
    if (cap < g->n) c = mc_realloc(c, sizeof(*c) * (cap = g->n));
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n; i++)
      if (in_tier(p, g->v[i], TIER_REST) && allocatable(p, g->v[i])) c[k++] = g->v[i];
    qsort(c, k, sizeof(*c), by_name);
    try_in_order(p, c, k);
  }
  mc_free(c);
}

/* local_first: the writer's host rotated by key hash; other hosts in cyclic host-id order (the zone tier
 * sorted, the rest walked in the host order). */
static void walk_local_first(struct place *p, int tier) {
  uint32_t n;
  tier_source(p, tier, &n);
  lf_host = p->pc->writer_host_id ? p->pc->writer_host_id : "";
  if (tier == TIER_REST) {
    if (n) walk_hosts_in_order(p);
    return;
  }
  struct mseg **c = mc_malloc(sizeof(*c) * (n ? n : 1));
  uint32_t k = collect(p, tier, c, n);
  qsort(c, k, sizeof(*c), tier == TIER_HOST ? by_name : by_cyclic_host);
  uint32_t rot = tier == TIER_HOST && k ? (uint32_t)(p->hash % k) : 0;
  for (uint32_t i = 0; i < k && p->got < p->want; i++)
    if (allocatable(p, c[(rot + i) % k])) try_seg(p, c[(rot + i) % k]);
  mc_free(c);
}

static void walk_tier(struct place *p, int tier) {
  switch (p->m->cfg.strategy) {
    case MC_STRATEGY_FREE_RATIO_FIRST: walk_free_ratio(p, tier); break;
    case MC_STRATEGY_LOCAL_FIRST: walk_local_first(p, tier); break;
    default: walk_random(p, tier);
  }
}

/* Whether the realm (its group g, NULL when it has no segment) has a segment that takes allocations now:
 * mounted and past its remount quiet period. A put that found no room among them asks for an eviction;
 * one that found none at all (every segment still quiet after a restart or promotion) does not, or it
 * would evict the objects just rebuilt to make room in segments that are not full. Asked only when a put
 * placed nothing; stops at the first such segment (a full pool answers at its first segment). */
static uint32_t any_ok(const struct seg_group *g) {
  uint64_t now = mc_now_ns();
  for (uint32_t i = 0; g && i < g->n; i++)
    if (atomic_load(&g->v[i]->state) == MC_SEG_OK && now >= atomic_load(&g->v[i]->alloc_after_ns)) return 1;
  return 0;
}

static const struct seg_group *writer_group(struct mc_master *m, int kind, const char *key) {
  return key && *key ? group_find(m, kind, key) : NULL;
}

uint32_t mc_place(struct mc_master *m, const struct mc_put_config *pc, uint64_t size, uint64_t key_hash,
                  struct replica **out, uint32_t want, uint32_t *nsegs_ok) {
  pthread_rwlock_rdlock(&m->seg_mu);
  struct place p = {.m = m, .pc = pc, .size = size, .hash = key_hash};
  p.realm = group_find(m, MC_GRP_REALM, pc->tenant ? pc->tenant : "");
  p.want = p.realm ? MC_MIN(want, p.realm->n) : 0;
  if (p.want) {
    p.host = writer_group(m, MC_GRP_HOST, pc->writer_host_id);
    p.zone = writer_group(m, MC_GRP_ZONE, pc->writer_zone);
    p.reps = mc_malloc(sizeof(*p.reps) * p.want);
    place_preferred(&p);
    for (int tier = TIER_HOST; tier <= TIER_REST && p.got < p.want; tier++) walk_tier(&p, tier);
  }
  *nsegs_ok = p.got ? p.got : any_ok(p.realm);
  pthread_rwlock_unlock(&m->seg_mu);
  if (!p.got) mc_free(p.reps);
  *out = p.got ? p.reps : NULL;
  return p.got;
}

int mc_place_on(struct mc_master *m, const char *name, const char *tenant, uint64_t size, struct replica *out) {
  struct mc_put_config pc = {.tenant = tenant};
  struct place p = {.m = m, .pc = &pc, .size = size, .reps = out, .want = 1};
  int rc = MC_SEGMENT_NOT_FOUND;
  pthread_rwlock_rdlock(&m->seg_mu);
  const struct seg_group *g = group_find(m, MC_GRP_NAME, name);
  for (uint32_t j = 0; g && j < g->n && !p.got; j++) {
    struct mseg *x = g->v[j];
    /* mounted in that realm: only room (or, draining or just remounted, the right to allocate now) lacks */
    if (seg_readable(x) && mc_same_realm(x->tenant, tenant)) rc = MC_NO_AVAILABLE_HANDLE;
    if (allocatable(&p, x)) try_seg(&p, x);
  }
  pthread_rwlock_unlock(&m->seg_mu);
  return p.got ? 0 : rc;
}

int mc_seg_named(struct mc_master *m, const char *name, const char *tenant) {
  pthread_rwlock_rdlock(&m->seg_mu);
  const struct seg_group *g = group_find(m, MC_GRP_NAME, name);
  int yes = 0;
  for (uint32_t j = 0; g && j < g->n && !yes; j++) yes = seg_readable(g->v[j]) && mc_same_realm(g->v[j]->tenant, tenant);
  pthread_rwlock_unlock(&m->seg_mu);
  return yes;
}

/* ------------------------------------------------------------------ clients */

struct mclient *mc_client_find_locked(struct mc_master *m, struct mc_uuid id) {
  uint64_t h = uuid_hash(id);
  for (struct mc_hnode *x = mc_htab_first(&m->clients, h); x; x = mc_htab_next(x, h)) {
    struct mclient *c = MC_HTAB_ENTRY(x, struct mclient, hn);
    if (mc_uuid_eq(c->id, id)) return c;
  }
  return NULL;
}

struct mclient *mc_client_touch_locked(struct mc_master *m, struct mc_uuid id, uint64_t now) {
  struct mclient *c = mc_client_find_locked(m, id);
  uint64_t deadline = now + (uint64_t)m->cfg.client_ttl * MC_NS_PER_S;
  if (!c) {
    c = mc_calloc(1, sizeof(*c));
    c->id = id;
    c->gen = ++m->client_gen;
    atomic_init(&c->deadline_ns, deadline);
    mc_htab_add(&m->clients, &c->hn, uuid_hash(id));
    mc_client_timer_push(m, c);
  }
  atomic_store(&c->deadline_ns, deadline);
  return c;
}

static void client_free(struct mclient *c) {
  if (c->hidx) mc_hidx_close(c->hidx); /* its waiting poll is answered; its segments keep references */
  mc_free(c->segs);
  mc_free(c);
}

void mc_client_remove_locked(struct mc_master *m, struct mc_uuid id) {
  struct mclient *c = mc_client_find_locked(m, id);
  if (!c) return;
  mc_htab_del(&m->clients, &c->hn);
  client_free(c);
}

/* When the client last pinged or mounted (its deadline minus client_ttl), 0 when it is not in the table. */
uint64_t mc_client_seen_locked(struct mc_master *m, struct mc_uuid id) {
  struct mclient *c = mc_client_find_locked(m, id);
  uint64_t ttl = (uint64_t)m->cfg.client_ttl * MC_NS_PER_S, d = c ? atomic_load(&c->deadline_ns) : 0;
  return d > ttl ? d - ttl : 0;
}

/* A known client's ping needs only the read lock (its deadline is atomic); its first one adds it. */
int mc_master_ping(struct mc_master *m, struct mc_uuid client, uint8_t *status) {
  uint64_t now = mc_now_ns();
  pthread_rwlock_rdlock(&m->seg_mu);
  struct mclient *c = mc_client_find_locked(m, client);
  if (c) {
    atomic_store(&c->deadline_ns, now + (uint64_t)m->cfg.client_ttl * MC_NS_PER_S);
    *status = c->ok ? MC_PING_OK : MC_PING_NEED_REMOUNT;
  }
  pthread_rwlock_unlock(&m->seg_mu);
  if (c) return 0;
  pthread_rwlock_wrlock(&m->seg_mu);
  c = mc_client_touch_locked(m, client, now);
  *status = c->ok ? MC_PING_OK : MC_PING_NEED_REMOUNT;
  pthread_rwlock_unlock(&m->seg_mu);
  return 0;
}

/* ------------------------------------------------------------------ segments */

struct mseg *mc_seg_find_locked(struct mc_master *m, struct mc_uuid id) {
  uint64_t h = uuid_hash(id);
  for (struct mc_hnode *x = mc_htab_first(&m->seg_ids, h); x; x = mc_htab_next(x, h)) {
    struct mseg *s = MC_HTAB_ENTRY(x, struct mseg, id_hn);
    if (mc_uuid_eq(s->id, id)) return s;
  }
  return NULL;
}

static struct mseg *seg_new(const struct mc_segment_rec *r, struct mc_uuid client) {
  struct mseg *s = mc_calloc(1, sizeof(*s));
  s->id = r->id;
  s->client = client;
  s->name = mc_strdup(r->name);
  s->te_endpoint = mc_strdup(r->te_endpoint && *r->te_endpoint ? r->te_endpoint : r->name);
  s->protocol = mc_strdup(r->protocol && *r->protocol ? r->protocol : "tcp");
  s->zone = mc_strdup(r->zone ? r->zone : "");
  s->host_id = mc_strdup(r->host_id ? r->host_id : "");
  s->probe_addr = mc_strdup(r->probe_addr ? r->probe_addr : "");
  s->tenant = mc_strdup(r->tenant ? r->tenant : "");
  s->base = r->base;
  s->size = r->size;
  s->tlsf = mc_tlsf_create(r->size);
  atomic_init(&s->state, MC_SEG_OK);
  pthread_mutex_init(&s->alloc_mu, NULL);
  return s;
}

void mc_seg_free(struct mseg *s) {
  struct mc_hidx *h = atomic_load(&s->hidx);
  if (h) mc_hidx_unref(h);
  mc_tlsf_destroy(s->tlsf);
  mc_free(s->tombs);
  pthread_mutex_destroy(&s->alloc_mu);
  mc_free(s->name);
  mc_free(s->te_endpoint);
  mc_free(s->tenant);
  mc_free(s->protocol);
  mc_free(s->zone);
  mc_free(s->host_id);
  mc_free(s->probe_addr);
  mc_free(s);
}

/* Enters s in the registry and its indexes, and its bytes in the usage sums (seg_mu write; its client
 * is in the table). */
static void seg_add_locked(struct mc_master *m, struct mseg *s, struct mclient *c) {
  segv_add(&m->segs, &m->nsegs, &m->capsegs, s, MC_POS_ALL);
  segv_add(&c->segs, &c->nsegs, &c->capsegs, s, MC_POS_CLIENT);
  for (int k = 0; k < MC_NGRP; k++) group_join(m, s, k);
  mc_htab_add(&m->seg_ids, &s->id_hn, uuid_hash(s->id));
  pthread_mutex_lock(&s->alloc_mu);
  mc_tlsf_count_into(s->tlsf, &m->used_bytes);
  pthread_mutex_unlock(&s->alloc_mu);
  atomic_fetch_add(&m->cap_bytes, mc_tlsf_capacity(s->tlsf));
}

void mc_seg_detach_locked(struct mc_master *m, struct mseg *s) {
  if (atomic_load(&s->state) == MC_SEG_GRACEFULLY_UNMOUNTING) {
    uint32_t n = atomic_load(&m->ngraceful), i = 0;
    while (i < n && m->graceful[i] != s) i++;
    if (i < n) m->graceful[i] = m->graceful[n - 1], atomic_store(&m->ngraceful, n - 1);
  }
  atomic_store(&s->state, MC_SEG_UNMOUNTING);
  segv_del(m->segs, &m->nsegs, s, MC_POS_ALL);
  struct mclient *c = mc_client_find_locked(m, s->client);
  if (c) segv_del(c->segs, &c->nsegs, s, MC_POS_CLIENT);
  if (c && !c->nsegs) c->ssd_cap = c->ssd_used = c->ssd_objects = 0; /* a client without a segment contributes no disk */
  for (int k = 0; k < MC_NGRP; k++) group_leave(m, s, k);
  mc_htab_del(&m->seg_ids, &s->id_hn);
  pthread_mutex_lock(&s->alloc_mu);
  mc_tlsf_count_into(s->tlsf, NULL);
  pthread_mutex_unlock(&s->alloc_mu);
  atomic_fetch_sub(&m->cap_bytes, mc_tlsf_capacity(s->tlsf));
}

/* The client's index feed, opened at its first follow and attached to its segments (docs/ha.md): a
 * reference for the caller, or NULL when the client has no segment here or mounted them in another
 * realm than `tenant` (a tenant follows only its own segments' records). */
struct mc_hidx *mc_client_follow(struct mc_master *m, struct mc_uuid client, const char *tenant) {
  pthread_rwlock_wrlock(&m->seg_mu);
  struct mclient *c = mc_client_find_locked(m, client);
  int mine = 0, theirs = 0;
  for (uint32_t i = 0; c && i < c->nsegs; i++) mc_same_realm(c->segs[i]->tenant, tenant) ? mine++ : theirs++;
  struct mc_hidx *h = NULL;
  if (mine && !theirs) {
    if (!c->hidx) {
      c->hidx = mc_hidx_open(m->hfeed, client);
      for (uint32_t i = 0; i < c->nsegs; i++)
        if (!atomic_load(&c->segs[i]->hidx)) {
          mc_hidx_ref(c->hidx);
          atomic_store(&c->segs[i]->hidx, c->hidx);
        }
    }
    h = c->hidx;
    mc_hidx_ref(h);
  }
  pthread_rwlock_unlock(&m->seg_mu);
  return h;
}

int mc_client_report_ssd(struct mc_master *m, struct mc_uuid client, const char *tenant, uint64_t cap, uint64_t used,
                         uint64_t objects) {
  if (used > cap) return MC_INVALID_PARAMS;
  pthread_rwlock_wrlock(&m->seg_mu);
  struct mclient *c = mc_client_find_locked(m, client);
  int mine = 0, theirs = 0;
  for (uint32_t i = 0; c && i < c->nsegs; i++) mc_same_realm(c->segs[i]->tenant, tenant) ? mine++ : theirs++;
  int rc = mine && !theirs ? 0 : MC_CLIENT_NOT_FOUND;
  if (!rc) c->ssd_cap = cap, c->ssd_used = used, c->ssd_objects = objects;
  pthread_rwlock_unlock(&m->seg_mu);
  return rc;
}

void mc_ssd_usage(struct mc_master *m, uint64_t *used, uint64_t *cap) {
  *used = *cap = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  for (uint32_t b = 0; b < m->clients.nb; b++)
    for (struct mc_hnode *x = m->clients.b[b]; x; x = x->next) {
      const struct mclient *c = MC_HTAB_ENTRY(x, struct mclient, hn);
      *used += c->ssd_used;
      *cap += c->ssd_cap;
    }
  pthread_rwlock_unlock(&m->seg_mu);
}

void mc_segments_destroy(struct mc_master *m) {
  for (uint32_t b = 0; b < m->clients.nb; b++)
    for (struct mc_hnode *x = m->clients.b[b], *next; x; x = next) {
      next = x->next;
      client_free(MC_HTAB_ENTRY(x, struct mclient, hn));
    }
  while (m->nsegs) {
    struct mseg *s = m->segs[m->nsegs - 1];
    for (int k = 0; k < MC_NGRP; k++) group_leave(m, s, k);
    m->nsegs--;
    mc_seg_free(s);
  }
  mc_free(m->segs);
  mc_free(m->graceful);
  mc_free(m->host_order);
  mc_htab_free(&m->clients);
  mc_htab_free(&m->seg_ids);
  for (int k = 0; k < MC_NGRP; k++) mc_htab_free(&m->groups[k]);
  mc_client_timers_free(m);
  mc_discard_free(m);
}

void mc_seg_log_action(struct mc_uuid client, const char *action, const char *name) {
  char id[37];
  mc_uuid_str(client, id);
  LOG_INFO("client_id=%s, action=%s, segment_name=%s", id, action, name);
}

/* Mount under seg_mu (write). Returns 0, an error, or 1 when the name is held by another client whose
 * probe address is copied into holder/probe and whose last contact (ping or mount; 0 if unknown) goes
 * into *seen_ns (the caller probes it without the lock). */
int mc_seg_mount_locked(struct mc_master *m, const struct mc_segment_rec *r, struct mc_uuid client,
                        struct mc_uuid *holder, char **probe, uint64_t *seen_ns) {
  struct mseg *s = mc_seg_find_locked(m, r->id);
  if (s) { /* a re-mount keeps an admin drain (docs/admin.md) */
    int st = atomic_load(&s->state);
    return st == MC_SEG_OK || st == MC_SEG_DRAINING ? 0 : MC_UNAVAILABLE_IN_CURRENT_STATUS;
  }
  const struct seg_group *g = group_find(m, MC_GRP_NAME, r->name);
  for (uint32_t i = 0; g && i < g->n; i++) {
    struct mseg *o = g->v[i];
    if (!mc_uuid_eq(o->client, client)) {
      *holder = o->client;
      *probe = mc_strdup(o->probe_addr);
      *seen_ns = mc_client_seen_locked(m, o->client);
      return 1;
    }
  }
  struct mseg *n = seg_new(r, client);
  struct mclient *c = mc_client_touch_locked(m, client, mc_now_ns());
  if (c->hidx) { /* a holder that follows its index: this segment's records go there too */
    mc_hidx_ref(c->hidx);
    atomic_store(&n->hidx, c->hidx);
  }
  seg_add_locked(m, n, c);
  mc_seg_log_action(client, "mount_segment", r->name);
  return 0;
}

/* Finds the segment and checks ownership (the client, and the realm of a tenant's request): 0 found, 1
 * unknown (OK), or INVALID_PARAMS. */
int mc_seg_owned_locked(struct mc_master *m, struct mc_uuid id, struct mc_uuid client, const char *tenant,
                        struct mseg **out) {
  *out = mc_seg_find_locked(m, id);
  if (!*out) return 1;
  return mc_uuid_eq((*out)->client, client) && (!tenant || mc_same_realm((*out)->tenant, tenant)) ? 0
                                                                                               : MC_INVALID_PARAMS;
}

int mc_master_graceful_unmount(struct mc_master *m, struct mc_uuid seg_id, struct mc_uuid client, uint64_t grace_ms,
                               const char *tenant) {
  struct mseg *s;
  pthread_rwlock_wrlock(&m->seg_mu);
  int rc = mc_seg_owned_locked(m, seg_id, client, tenant, &s);
  if (!rc && atomic_load(&s->state) != MC_SEG_GRACEFULLY_UNMOUNTING) {
    uint32_t n = atomic_load(&m->ngraceful);
    if (n == m->capgraceful) {
      m->capgraceful = m->capgraceful ? 2 * m->capgraceful : 16;
      m->graceful = mc_realloc(m->graceful, sizeof(*m->graceful) * m->capgraceful);
    }
    m->graceful[n] = s; /* its timer (liveness.c) */
    atomic_store(&m->ngraceful, n + 1);
    atomic_store(&s->state, MC_SEG_GRACEFULLY_UNMOUNTING);
    s->grace_deadline_ns = mc_now_ns() + grace_ms * MC_NS_PER_MS;
    mc_seg_log_action(client, "graceful_unmount_segment", s->name);
  }
  pthread_rwlock_unlock(&m->seg_mu);
  return rc == 1 ? 0 : rc;
}

void mc_master_query_segments(struct mc_master *m, const char *tenant, struct mc_wbuf *w) {
  pthread_rwlock_rdlock(&m->seg_mu);
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->nsegs; i++) n += !tenant || mc_same_realm(m->segs[i]->tenant, tenant);
  mc_w_u32(w, n);
  for (uint32_t i = 0; i < m->nsegs; i++) {
    struct mseg *s = m->segs[i];
    if (tenant && !mc_same_realm(s->tenant, tenant)) continue;
    struct mc_segment_rec r = {.id = s->id, .name = s->name, .base = s->base, .size = s->size,
                               .te_endpoint = s->te_endpoint, .protocol = s->protocol, .zone = s->zone,
                               .host_id = s->host_id, .probe_addr = s->probe_addr};
    char id[37];
    mc_uuid_str(s->client, id);
    mc_put_segment(w, &r);
    mc_w_str(w, id);
    mc_w_u8(w, (uint8_t)atomic_load(&s->state));
    mc_w_u64(w, atomic_load(&s->used));
  }
  pthread_rwlock_unlock(&m->seg_mu);
}
