/* etcd v3 metadata backend on the etcd client (etcd.h): get / set / remove are range / put / deleterange
 * of the key as given; keys written with mc_meta_set are bound to one lease of this backend, renewed by
 * the keep-alive thread of metadata.c and granted again (its keys written again) when it was lost.
 * Endpoints are tried in turn, each attempt bounded by the client's 3 s timeout. */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "mooncake/transfer_engine.h"
#include "meta/etcd.h"
#include "meta/metadata.h"

struct etcd_meta {
  struct mc_meta base;
  struct mc_etcd *c;
  pthread_mutex_t mu;
  int64_t lease; /* the lease bound keys carry, 0 before the first grant; guarded by mu */
};

static int etcd_get(struct mc_meta *m, const char *key, char **value_out) {
  struct mc_etcd_kv kv;
  *value_out = NULL;
  int rc = mc_etcd_get(((struct etcd_meta *)m)->c, key, &kv, NULL);
  if (rc == MC_ETCD_NOT_FOUND) return MC_META_NOT_FOUND;
  if (rc) return ERR_METADATA;
  *value_out = kv.value; /* the caller owns it now */
  return 0;
}

static int etcd_set(struct mc_meta *m, const char *key, const char *value) {
  return mc_etcd_put(((struct etcd_meta *)m)->c, key, value, strlen(value), 0, NULL) ? ERR_METADATA : 0;
}

static int etcd_remove(struct mc_meta *m, const char *key) {
  return mc_etcd_delete(((struct etcd_meta *)m)->c, key) ? ERR_METADATA : 0;
}

/* ---- keys bound to a lease (mc_meta_set on etcd) ---- */

static int64_t current_lease(struct etcd_meta *e) {
  pthread_mutex_lock(&e->mu);
  int64_t lease = e->lease;
  pthread_mutex_unlock(&e->mu);
  return lease;
}

/* Grants a fresh lease of ttl_s seconds into e->lease. 0 or ERR_METADATA. */
static int grant_lease(struct etcd_meta *e, int ttl_s) {
  int64_t id;
  if (mc_etcd_lease_grant(e->c, ttl_s, &id)) return ERR_METADATA;
  pthread_mutex_lock(&e->mu);
  e->lease = id;
  pthread_mutex_unlock(&e->mu);
  return 0;
}

static int put_leased(struct etcd_meta *e, const char *key, const char *value) {
  return mc_etcd_put(e->c, key, value, strlen(value), current_lease(e), NULL) ? ERR_METADATA : 0;
}

static int etcd_set_bound(struct mc_meta *m, const char *key, const char *value, int ttl_s) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  if (!current_lease(e) && grant_lease(e, ttl_s)) return ERR_METADATA;
  if (!put_leased(e, key, value)) return 0;
  /* the lease may have expired meanwhile (a partition longer than the TTL): one fresh lease */
  return grant_lease(e, ttl_s) ? ERR_METADATA : put_leased(e, key, value);
}

static int etcd_keepalive(struct mc_meta *m, int ttl_s, char *const *keys, char *const *values, size_t n) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  int64_t lease = current_lease(e), ttl = 0;
  if (lease && mc_etcd_lease_keepalive(e->c, lease, &ttl)) return ERR_METADATA; /* etcd unreachable: next period */
  if (ttl > 0) return 0;
  /* The lease is gone (it expired while we could not renew it): its keys went with it. */
  char id[24] = "-";
  if (lease) snprintf(id, sizeof(id), "%" PRId64, lease);
  LOG_WARN("etcd lease %s of %s expired; writing its %zu key(s) again under a new lease", id, m->conn, n);
  if (grant_lease(e, ttl_s)) return ERR_METADATA;
  int rc = 0;
  for (size_t i = 0; i < n; i++)
    if (put_leased(e, keys[i], values[i])) rc = ERR_METADATA;
  return rc;
}

/* ---- compare-and-swap on the key's mod_revision (docs/p2p-store.md, "Metadata") ---- */

static int etcd_get_rev(struct mc_meta *m, const char *key, char **value_out, uint64_t *rev) {
  struct mc_etcd_kv kv;
  int rc = mc_etcd_get(((struct etcd_meta *)m)->c, key, &kv, NULL);
  if (rc == MC_ETCD_NOT_FOUND) return MC_META_NOT_FOUND;
  if (rc) return ERR_METADATA;
  if (kv.mod_rev <= 0 || strlen(kv.value) != kv.len) { /* (a value with a NUL is no JSON text of ours) */
    LOG_ERROR("etcd key '%s': a mod_revision below 1 or a value with a NUL byte", key);
    mc_etcd_kv_free(&kv);
    return ERR_METADATA;
  }
  *value_out = kv.value;
  *rev = (uint64_t)kv.mod_rev;
  return 0;
}

static int etcd_cas(struct mc_meta *m, const char *key, const char *value, uint64_t rev, int *won) {
  if (rev > INT64_MAX) return *won = 0, 0; /* no such revision: the key changed */
  return mc_etcd_put_if(((struct etcd_meta *)m)->c, key, value, (int64_t)rev, won) ? ERR_METADATA : 0;
}

static int etcd_list(struct mc_meta *m, const char *prefix, size_t max, char ***keys, char ***values, size_t *n) {
  struct mc_etcd_kv *kvs;
  if (mc_etcd_range_prefix(((struct etcd_meta *)m)->c, prefix, max, &kvs, keys, n)) return ERR_METADATA;
  *values = mc_calloc(*n + 1, sizeof(char *));
  for (size_t i = 0; i < *n; i++) {
    (*values)[i] = kvs[i].value; /* moved */
    kvs[i].value = NULL;
  }
  mc_etcd_kvs_free(kvs, NULL, *n);
  return 0;
}

static void etcd_destroy(struct mc_meta *m) {
  struct etcd_meta *e = (struct etcd_meta *)m;
  mc_etcd_close(e->c);
  pthread_mutex_destroy(&e->mu);
  mc_free(e);
}

static const struct mc_meta_ops etcd_ops = {.scheme = "etcd",
                                           .get = etcd_get,
                                           .set = etcd_set,
                                           .remove = etcd_remove,
                                           .destroy = etcd_destroy,
                                           .set_bound = etcd_set_bound,
                                           .keepalive = etcd_keepalive,
                                           .get_rev = etcd_get_rev,
                                           .cas = etcd_cas,
                                           .list = etcd_list};

int mc_meta_etcd_open(const char *endpoints, struct mc_meta **out) {
  *out = NULL;
  struct mc_etcd *c;
  if (mc_etcd_open(endpoints, &c)) return ERR_METADATA;
  struct etcd_meta *e = mc_calloc(1, sizeof(*e));
  e->base.ops = &etcd_ops;
  e->c = c;
  pthread_mutex_init(&e->mu, NULL);
  *out = &e->base;
  return 0;
}
