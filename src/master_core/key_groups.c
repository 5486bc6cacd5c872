/* Key groups (docs/master.md, "Key groups"): a put may name a group (ReplicateConfig.group_ids in the
 * Python API). The first member placed fixes the group's segment, and later members try it before any
 * other (as a preferred segment: a full segment sends them elsewhere); when eviction takes a member, it
 * takes every other evictable member too, and a read lease granted on a member spares the whole group. A group lives while an object names it. Its
 * name travels with each member in the holder indexes' PUT records and in snapshots, so a rebuilt or restored
 * member joins its group again (the group's segment: the first member rebuilt). Locking: kgroup_mu is a leaf, taken under a shard lock, never the
 * other way round. */
#include <stdatomic.h>
#include <string.h>

#include "common/util.h"
#include "master_core/core.h"

struct kgroup {
  struct mc_hnode hn; /* in m->kgroups, by mc_key_hash(name) */
  uint64_t refs;      /* objects naming it, plus the holds of puts and eviction runs in progress */
  _Atomic uint64_t lease_ns; /* the latest read lease granted on a member: eviction spares the group until then */
  char *seg;          /* the segment the group's first member went to, or NULL */
  char name[];
};

void mc_kgroup_init(struct mc_master *m) {
  pthread_mutex_init(&m->kgroup_mu, NULL);
  memset(&m->kgroups, 0, sizeof(m->kgroups));
}

void mc_kgroup_destroy(struct mc_master *m) {
  for (uint32_t i = 0; i < m->kgroups.nb; i++)
    for (struct mc_hnode *x = m->kgroups.b[i], *next; x; x = next) {
      next = x->next;
      struct kgroup *g = MC_HTAB_ENTRY(x, struct kgroup, hn);
      mc_free(g->seg);
      mc_free(g);
    }
  mc_free(m->kgroups.b);
  memset(&m->kgroups, 0, sizeof(m->kgroups));
  pthread_mutex_destroy(&m->kgroup_mu);
}

struct kgroup *mc_kgroup_get(struct mc_master *m, const char *name) {
  return name ? mc_kgroup_get_n(m, name, strlen(name)) : NULL;
}

struct kgroup *mc_kgroup_get_n(struct mc_master *m, const char *name, size_t n) {
  if (!name || !n) return NULL;
  uint64_t h = mc_key_hash(name, n);
  pthread_mutex_lock(&m->kgroup_mu);
  struct kgroup *g = NULL;
  for (struct mc_hnode *x = mc_htab_first(&m->kgroups, h); x && !g; x = mc_htab_next(x, h)) {
    struct kgroup *c = MC_HTAB_ENTRY(x, struct kgroup, hn);
    if (strlen(c->name) == n && !memcmp(c->name, name, n)) g = c;
  }
  if (!g) {
    g = mc_calloc(1, sizeof(*g) + n + 1);
    memcpy(g->name, name, n);
    mc_htab_add(&m->kgroups, &g->hn, h);
  }
  g->refs++;
  pthread_mutex_unlock(&m->kgroup_mu);
  return g;
}

void mc_kgroup_hold(struct mc_master *m, struct kgroup *g) {
  pthread_mutex_lock(&m->kgroup_mu);
  g->refs++;
  pthread_mutex_unlock(&m->kgroup_mu);
}

void mc_kgroup_put(struct mc_master *m, struct kgroup *g) {
  if (!g) return;
  pthread_mutex_lock(&m->kgroup_mu);
  int last = --g->refs == 0;
  if (last) mc_htab_del(&m->kgroups, &g->hn);
  pthread_mutex_unlock(&m->kgroup_mu);
  if (!last) return;
  mc_free(g->seg);
  mc_free(g);
}

char *mc_kgroup_segment(struct mc_master *m, struct kgroup *g) {
  pthread_mutex_lock(&m->kgroup_mu);
  char *s = g->seg ? mc_strdup(g->seg) : NULL;
  pthread_mutex_unlock(&m->kgroup_mu);
  return s;
}

void mc_kgroup_placed(struct mc_master *m, struct kgroup *g, const char *seg) {
  pthread_mutex_lock(&m->kgroup_mu);
  if (!g->seg || strcmp(g->seg, seg)) {
    mc_free(g->seg);
    g->seg = mc_strdup(seg);
  }
  pthread_mutex_unlock(&m->kgroup_mu);
}

void mc_kgroup_lease(struct kgroup *g, uint64_t until_ns) {
  uint64_t cur = atomic_load(&g->lease_ns);
  while (cur < until_ns && !atomic_compare_exchange_weak(&g->lease_ns, &cur, until_ns)) {
  }
}

int mc_kgroup_leased(const struct kgroup *g, uint64_t now_ns) { return g && atomic_load(&g->lease_ns) > now_ns; }

const char *mc_kgroup_name(const struct kgroup *g) { return g ? g->name : NULL; }

void mc_kgroup_rebuilt(struct mc_master *m, struct object *o, struct kgroup *g, const char *seg) {
  if (!g) return;
  pthread_mutex_lock(&m->kgroup_mu);
  if (!g->seg) g->seg = mc_strdup(seg);
  pthread_mutex_unlock(&m->kgroup_mu);
  mc_kgroup_assign(m, o, g);
}

void mc_kgroup_assign(struct mc_master *m, struct object *o, struct kgroup *g) {
  struct kgroup *old = o->kg;
  o->kg = g;
  mc_kgroup_put(m, old);
}
