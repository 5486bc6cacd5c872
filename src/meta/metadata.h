/* Metadata backends: a plain key -> JSON-text store (docs/transfer-engine.md, "Metadata"). The engine
 * uses only get, set and remove. Backends: embedded/standalone HTTP server ("http://h:p/path"), etcd v3
 * ("etcd://h:p[,h:p]" or bare "h:p"), Redis ("redis://h:p"). "P2PHANDSHAKE" has no backend (the engine
 * pulls descriptors from peers over the control RPC). Every call is bounded in time; none blocks forever. Thread-safe. */
#ifndef MC_TE_METADATA_H
#define MC_TE_METADATA_H
#include <stddef.h>
#include <stdint.h>

struct mc_meta;

struct mc_meta_ops {
  const char *scheme; /* "http", "etcd", "redis" */
  /* 0 and a malloc'ed NUL-terminated value (caller frees); MC_META_NOT_FOUND; or ERR_METADATA (-200). */
  int (*get)(struct mc_meta *m, const char *key, char **value_out);
  /* 0 or ERR_METADATA. */
  int (*set)(struct mc_meta *m, const char *key, const char *value);
  /* 0 (also when the key did not exist) or ERR_METADATA. */
  int (*remove)(struct mc_meta *m, const char *key);
  void (*destroy)(struct mc_meta *m);
  /* Optional (etcd, Redis): set, with the key bound to this writer's liveness (etcd lease / Redis
   * EXPIRE of ttl_s seconds) so that it disappears when the process dies. 0 or ERR_METADATA. */
  int (*set_bound)(struct mc_meta *m, const char *key, const char *value, int ttl_s);
  /* Optional, with set_bound: extends the bound keys by ttl_s; a key found gone (lease lost, key
   * expired) is written again with its value. 0 or ERR_METADATA. */
  int (*keepalive)(struct mc_meta *m, int ttl_s, char *const *keys, char *const *values, size_t n);
  /* Optional (HTTP, etcd): compare-and-swap (docs/p2p-store.md, "Metadata"). get_rev reads key with
   * its revision (nonzero; etcd: the key's mod_revision, HTTP: mc_meta_value_rev of the value): 0,
   * MC_META_NOT_FOUND or ERR_METADATA. cas writes value (NULL: deletes the key) only while the key's
   * revision is still rev (rev 0: only while the key does not exist): 0 with *won = 1 when written,
   * 0 with *won = 0 when the key changed meanwhile, or ERR_METADATA. */
  int (*get_rev)(struct mc_meta *m, const char *key, char **value_out, uint64_t *rev);
  int (*cas)(struct mc_meta *m, const char *key, const char *value, uint64_t rev, int *won);
  /* Optional (HTTP, etcd): every key starting with prefix, up to max keys, with its value: 0 with
   * malloc'ed arrays of *n malloc'ed strings (mc_meta_list_free), or ERR_METADATA. */
  int (*list)(struct mc_meta *m, const char *prefix, size_t max, char ***keys, char ***values, size_t *n);
};

struct mc_meta_live;

struct mc_meta {
  const struct mc_meta_ops *ops;
  char *conn;                /* the connection string as given */
  struct mc_meta_live *live; /* bound keys and their keep-alive thread (metadata.c), or NULL */
};

#define MC_META_NOT_FOUND 1

/* True for the exact literal "P2PHANDSHAKE". */
int mc_meta_is_p2p(const char *conn);
/* Creates the backend for conn. P2PHANDSHAKE -> 0 with *out = NULL. Unknown scheme, empty endpoint
 * list or a backend that cannot be initialised -> ERR_METADATA (-200) with an error logged naming the
 * connection string; never aborts. Creation does not require the service to be up. */
int mc_meta_open(const char *conn, struct mc_meta **out);
void mc_meta_close(struct mc_meta *m);
static inline int mc_meta_get(struct mc_meta *m, const char *key, char **v) { return m->ops->get(m, key, v); }
/* Writes key. On etcd and Redis the key is bound to this process's liveness: it carries
 * a lease / EXPIRE of MC_METADATA_TTL_S seconds (default 10; 0 = unbound, keys stay until removed) that
 * a background thread of this mc_meta renews every third of it, writing the key again if it was lost
 * while the process lives. A process that dies leaves no key behind after the TTL. On the HTTP server
 * (no TTLs) the same thread looks the keys up as often and writes again those the server lost (a
 * restart without its persist file). */
int mc_meta_set(struct mc_meta *m, const char *key, const char *v);
/* Deletes key (and stops renewing it). */
int mc_meta_remove(struct mc_meta *m, const char *key);

/* Compare-and-swap and prefix listing (the ops above); ERR_METADATA (logged) on a backend without them
 * (Redis). */
int mc_meta_get_rev(struct mc_meta *m, const char *key, char **value_out, uint64_t *rev);
int mc_meta_cas(struct mc_meta *m, const char *key, const char *value, uint64_t rev, int *won);
int mc_meta_list(struct mc_meta *m, const char *prefix, size_t max, char ***keys, char ***values, size_t *n);
void mc_meta_list_free(char **keys, char **values, size_t n);
/* The revision of a value on the HTTP metadata server: 64-bit FNV-1a of its bytes, never 0. The server
 * compares it with a request's If-Match (a value that came back to the same bytes is the same record,
 * so the compare is exactly "unchanged since read"). */
uint64_t mc_meta_value_rev(const char *value, size_t len);

/* Key prefix "mooncake/" or "mooncake/<MC_METADATA_CLUSTER_ID>/" (no doubled '/'). Static string. */
const char *mc_meta_prefix(void);
/* Writes "<prefix>rpc_meta/<name>" / "<prefix>ram/<segment>" (or "<prefix><segment>" when the segment
 * name contains '/') into buf. Returns the length (truncated like snprintf). */
int mc_meta_rpc_key(char *buf, size_t len, const char *server_name);
int mc_meta_segment_key(char *buf, size_t len, const char *segment_name);

/* Backend constructors (used by mc_meta_open; conn without the scheme prefix). */
int mc_meta_http_open(const char *url, struct mc_meta **out);
int mc_meta_etcd_open(const char *endpoints, struct mc_meta **out);
int mc_meta_redis_open(const char *hostport, struct mc_meta **out);

#endif
