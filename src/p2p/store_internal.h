/* The P2P store's handle and the helpers store.c gives fetch.c (docs/p2p-store.md). Internal header. */
#ifndef MC_P2P_STORE_INTERNAL_H
#define MC_P2P_STORE_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mooncake/p2p_store.h"
#include "mooncake/transfer_engine.h"
#include "p2p/record.h"

struct mc_meta;

/* A range registered with the engine, counted by the payloads that use it. */
struct p2p_reg {
  void *addr;
  size_t len;
  int count;
  struct p2p_reg *next;
};

/* A payload of the catalog: produced here (gold) or fetched (replica). */
struct p2p_payload {
  char *name;
  int gold;
  int pending; /* being registered or fetched: not yet droppable */
  void **addrs;
  uint64_t *sizes;
  size_t n;
  size_t nshards;
  uint64_t *shard_size, *shard_addr;
  uint8_t *have; /* the shards this node holds (and advertises); mu */
  uint64_t stripe; /* the record's stripe_size (0: none), the unit of bits */
  uint8_t **bits;  /* NULL, or per shard NULL or the bitmap of its verified stripes while it is not in have
                    * (advertised as a partial holder, docs/p2p-store.md "Fetching"); mu */
  struct p2p_payload *next;
};

/* What a failed fetch leaves for the next attempt at the same payload into the same buffers (resume). */
struct p2p_partial {
  char *name;
  struct p2p_payload *p; /* its layout and the shards that had arrived verified */
  struct p2p_partial *next;
};

struct mc_p2p_store {
  transfer_engine_t te;
  struct mc_meta *meta;
  char self[P2P_MAX_SEGMENT + 1]; /* the segment name: holder entries carry it */
  char ipport[64];
  int64_t ttl_ms;
  unsigned seed; /* rand_r state for back-offs; mu not needed (races only blur randomness) */
  pthread_mutex_t mu; /* payloads, partials */
  struct p2p_payload *payloads;
  struct p2p_partial *partials;
  pthread_mutex_t regmu; /* regs */
  struct p2p_reg *regs;
  pthread_mutex_t renew_mu;
  pthread_cond_t renew_cv;
  int stop, renewer_started;
  pthread_t renewer;
  _Atomic uint64_t bytes_done;
  _Atomic unsigned sources_in_use;
};

int64_t p2p_wall_ms(void);
char *p2p_key(const char *name);
int p2p_name_ok(const char *name);
int p2p_check_buffers(void *const *addrs, const size_t *sizes, size_t n);
int p2p_mem_acquire(struct mc_p2p_store *s, void *const *addrs, const uint64_t *sizes, size_t n, const char *location);
void p2p_mem_release(struct mc_p2p_store *s, void *const *addrs, const uint64_t *sizes, size_t n);
struct p2p_payload *p2p_find(struct mc_p2p_store *s, const char *name);
struct p2p_payload *p2p_payload_new(const char *name, int gold, void *const *addrs, const size_t *sizes, size_t n,
                                    uint64_t max_shard);
void p2p_payload_free(struct p2p_payload *p);
void p2p_unlink(struct mc_p2p_store *s, struct p2p_payload *p);
struct p2p_payload *p2p_snapshot(const struct p2p_payload *p);
/* Frees a list of partials. */
void p2p_partials_free(struct p2p_partial *list);

/* An edit of a record inside the compare-and-swap loop: 0 = write it, 1 = nothing to write, < 0 = stop
 * with that MC_P2P_* code. */
typedef int (*p2p_edit_fn)(struct mc_p2p_store *s, struct p2p_record *r, void *arg);
/* Reads name's record, drops expired holders, applies edit and writes the result with compare-and-swap
 * (deleting the key when no holder is left), until it wins. 0, MC_P2P_PAYLOAD_NOT_FOUND (absent or
 * unusable), the edit's code, or MC_P2P_METADATA. */
int p2p_update(struct mc_p2p_store *s, const char *name, p2p_edit_fn edit, void *arg);
/* Makes this node a holder (fresh lease) of snap's shards it has. */
int p2p_publish(struct mc_p2p_store *s, const struct p2p_payload *snap);
/* Removes this node's gold or replica entries from name's record. */
int p2p_withdraw(struct mc_p2p_store *s, const char *name, int gold);
#endif
