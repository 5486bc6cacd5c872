/* A small etcd v3 client over etcd's JSON gateway (POST /v3/..., keys and values base64-encoded),
 * used by the etcd metadata backend (metadata_etcd.c), the master's leader election (master/ha.c) and
 * the store client's leader discovery (client/leader.c). docs/ha.md, "Election and failover".
 *
 * Endpoints are "h:p" or "http://h:p", separated by ',' or ';' (an "etcd://" prefix is accepted and
 * dropped). A call tries the endpoints in turn, starting from the last one that answered, moving on
 * when one does not answer or answers 5xx (a member without a leader answers 503). When a member
 * answered 5xx (an election under way), the call goes round the endpoints again, after 50 ms, while it
 * stays within its bound. Every call is bounded: each attempt by the client's per-request timeout
 * (mc_etcd_set_timeout), and the call by n_endpoints times that. Thread-safe: any number of threads may
 * share one client.
 *
 * Return codes: 0; MC_ETCD_NOT_FOUND (1) where documented; ERR_METADATA (-200, logged) when no endpoint
 * gave a usable answer. Everything etcd sends is checked: a malformed answer is ERR_METADATA, never a
 * crash. */
#ifndef MC_META_ETCD_H
#define MC_META_ETCD_H
#include <stddef.h>
#include <stdint.h>

struct mc_etcd;

#define MC_ETCD_NOT_FOUND 1

/* Opens a client for the endpoint list. ERR_METADATA (logged) for an empty list. Connects lazily. */
int mc_etcd_open(const char *endpoints, struct mc_etcd **out);
void mc_etcd_close(struct mc_etcd *c);
/* Per-attempt bound of later calls (total; the connect bound is half of it). Default 3000 ms. */
void mc_etcd_set_timeout(struct mc_etcd *c, int timeout_ms);
/* The endpoint list as normalised ("http://h:p", ...), for messages. */
const char *mc_etcd_endpoints(const struct mc_etcd *c);
/* The endpoint the next call tries first ("http://h:p": the last one that answered), for messages. */
const char *mc_etcd_current(struct mc_etcd *c);

struct mc_etcd_kv {
  char *value; /* NUL-terminated (binary-safe with len); owned, freed by mc_etcd_kv_free */
  size_t len;
  int64_t create_rev, mod_rev, version, lease; /* lease 0 = none */
};
void mc_etcd_kv_free(struct mc_etcd_kv *kv);

/* Reads key (linearizable). 0 with *kv filled, or MC_ETCD_NOT_FOUND (kv zeroed), or ERR_METADATA.
 * header_rev (may be NULL) gets the cluster revision of the answer. */
int mc_etcd_get(struct mc_etcd *c, const char *key, struct mc_etcd_kv *kv, int64_t *header_rev);
/* Writes key = value (len bytes), bound to lease (0 = none). 0 or ERR_METADATA. rev (may be NULL)
 * gets the revision of the write. */
int mc_etcd_put(struct mc_etcd *c, const char *key, const char *value, size_t len, int64_t lease, int64_t *rev);
/* Deletes key. 0 (also when absent) or ERR_METADATA. */
int mc_etcd_delete(struct mc_etcd *c, const char *key);

/* Creates key = value bound to lease only if the key does not exist (one transaction comparing its
 * create_revision with 0). 0 with *won = 1 and *rev = the revision of the write, or 0 with *won = 0
 * and *cur = the key as it is (caller frees; cur may be NULL), or ERR_METADATA. */
int mc_etcd_create(struct mc_etcd *c, const char *key, const char *value, int64_t lease, int *won,
                   int64_t *rev, struct mc_etcd_kv *cur);
/* Deletes key only if its mod_revision is still mod_rev (one transaction). 0 with *deleted set, or
 * ERR_METADATA. */
int mc_etcd_delete_if(struct mc_etcd *c, const char *key, int64_t mod_rev, int *deleted);

/* Writes key = value (value NULL: deletes key) only if its mod_revision is still mod_rev (0: only if the
 * key does not exist), in one transaction. 0 with *won set, or ERR_METADATA. */
int mc_etcd_put_if(struct mc_etcd *c, const char *key, const char *value, int64_t mod_rev, int *won);
/* Every key starting with prefix (a range read up to prefix's successor), at most max: 0 with *kvs, an
 * array of *n (mc_etcd_kvs_free), or ERR_METADATA. */
int mc_etcd_range_prefix(struct mc_etcd *c, const char *prefix, size_t max, struct mc_etcd_kv **kvs, char ***keys,
                         size_t *n);
void mc_etcd_kvs_free(struct mc_etcd_kv *kvs, char **keys, size_t n);

/* Grants a lease of ttl_s seconds. 0 with *id, or ERR_METADATA. */
int mc_etcd_lease_grant(struct mc_etcd *c, int ttl_s, int64_t *id);
/* One keep-alive of lease id. 0 with *ttl_left = the seconds etcd now gives it (0 when the lease no
 * longer exists: it expired or was revoked), or ERR_METADATA (etcd not reached: nothing is known). */
int mc_etcd_lease_keepalive(struct mc_etcd *c, int64_t id, int64_t *ttl_left);
/* Revokes lease id (its keys are deleted with it). 0 (also when it was already gone) or ERR_METADATA. */
int mc_etcd_lease_revoke(struct mc_etcd *c, int64_t id);

/* One watch event on the watched key. */
struct mc_etcd_event {
  int deleted;          /* 1 = DELETE (kv.value empty), 0 = PUT */
  struct mc_etcd_kv kv; /* valid only during the callback */
};
/* Watches key from revision start_rev (0 = from now) and calls cb for every event, in order, from
 * this thread. Returns when cb returns nonzero (that value), when *stop becomes nonzero (0; checked
 * at least every 100 ms), when timeout_ms passed (0; the caller re-reads and watches again — etcd
 * may compact, so a long watch is never the only source of truth; timeout_ms <= 0: no deadline), or on
 * an error: the stream could not be opened, etcd did not confirm the watch within the client's timeout,
 * the stream broke or carried a malformed message or a line over 1 MiB, or etcd cancelled the watch
 * (e.g. start_rev was compacted) (ERR_METADATA). Uses one endpoint (the current one); the next call
 * starts from the next endpoint if this one failed. */
typedef int (*mc_etcd_watch_cb)(void *arg, const struct mc_etcd_event *ev);
int mc_etcd_watch(struct mc_etcd *c, const char *key, int64_t start_rev, int timeout_ms, mc_etcd_watch_cb cb,
                  void *arg, const _Atomic int *stop);

#endif
