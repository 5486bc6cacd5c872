/* The P2P store (include/mooncake/p2p_store.h; docs/p2p-store.md): the catalog of held payloads, memory
 * registrations counted by range, the compare-and-swap loop on records, and the lease renewer. The fetch is
 * in fetch.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "meta/metadata.h"
#include "mooncake/p2p_store.h"
#include "mooncake/transfer_engine.h"
#include "p2p/record.h"
#include "p2p/store_internal.h"

#define DEFAULT_PORT "12345"
#define CHUNK (4ull << 30) /* memory is registered with the engine in pieces of at most this */
#define CAS_ATTEMPTS 200   /* compare-and-swap rounds before giving up (MC_P2P_METADATA) */
#define CRC_THREADS 8

const char *mc_p2p_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case MC_P2P_INVALID_ARGUMENT: return "error: invalid argument";
  case MC_P2P_ADDRESS_OVERLAPPED: return "error: address overlapped";
  case MC_P2P_PAYLOAD_OPENED: return "error: payload has been replicated";
  case MC_P2P_PAYLOAD_NOT_OPENED: return "error: payload does not replicated";
  case MC_P2P_PAYLOAD_NOT_FOUND: return "error: payload not found in metadata";
  case MC_P2P_TOO_MANY_RETRIES: return "error: too many retries";
  case MC_P2P_TRANSFER_ENGINE: return "error: transfer engine core";
  case MC_P2P_ALREADY_EXISTS: return "error: key already exists";
  case MC_P2P_METADATA: return "error: metadata service";
  default: return "unknown error";
  }
}

int64_t p2p_wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

char *p2p_key(const char *name) {
  size_t n = strlen(P2P_KEY_PREFIX) + strlen(name) + 1;
  char *k = mc_malloc(n);
  snprintf(k, n, "%s%s", P2P_KEY_PREFIX, name);
  return k;
}

int p2p_name_ok(const char *name) { return name && name[0] && strlen(name) <= P2P_MAX_NAME; }

/* ---- memory registrations, counted by exact range ---- */

static int overlaps(const struct p2p_reg *r, uintptr_t a, size_t len) {
  uintptr_t b = (uintptr_t)r->addr;
  return a < b + r->len && b < a + len;
}

/* Registers [addr, addr + len) in CHUNK pieces. 0 or an MC_P2P_* code (nothing left registered). */
static int engine_register(struct mc_p2p_store *s, void *addr, size_t len, const char *location) {
  size_t n = (len + CHUNK - 1) / CHUNK;
  buffer_entry_t *e = mc_calloc(n, sizeof(*e));
  for (size_t i = 0; i < n; i++) {
    e[i].addr = (char *)addr + i * CHUNK;
    e[i].length = len - i * CHUNK < CHUNK ? len - i * CHUNK : CHUNK;
  }
  int rc = registerLocalMemoryBatch(s->te, e, n, location ? location : "cpu:0");
  if (rc == ERR_METADATA) { /* registered, but peers cannot see it yet: publish once more */
    rc = mc_te_republish(s->te);
    if (rc) {
      void **a = mc_calloc(n, sizeof(void *));
      for (size_t i = 0; i < n; i++) a[i] = e[i].addr;
      unregisterLocalMemoryBatch(s->te, a, n);
      mc_free(a);
    }
  }
  mc_free(e);
  if (rc) LOG_ERROR("p2p store: registering %zu bytes at %p: %s", len, addr, mc_te_strerror(rc));
  return !rc ? 0 : rc == ERR_ADDRESS_OVERLAPPED ? MC_P2P_ADDRESS_OVERLAPPED : MC_P2P_TRANSFER_ENGINE;
}

static void engine_unregister(struct mc_p2p_store *s, void *addr, size_t len) {
  size_t n = (len + CHUNK - 1) / CHUNK;
  void **a = mc_calloc(n, sizeof(void *));
  for (size_t i = 0; i < n; i++) a[i] = (char *)addr + i * CHUNK;
  int rc = unregisterLocalMemoryBatch(s->te, a, n);
  if (rc && rc != ERR_METADATA) LOG_WARN("p2p store: unregistering %p: %s", addr, mc_te_strerror(rc));
  mc_free(a);
}

void p2p_mem_release(struct mc_p2p_store *s, void *const *addrs, const uint64_t *sizes, size_t n) {
  pthread_mutex_lock(&s->regmu);
  for (size_t i = 0; i < n; i++) {
    for (struct p2p_reg **p = &s->regs; *p; p = &(*p)->next) {
      struct p2p_reg *r = *p;
      if (r->addr != addrs[i] || r->len != sizes[i]) continue;
      if (--r->count == 0) {
        *p = r->next;
        engine_unregister(s, r->addr, r->len);
        mc_free(r);
      }
      break;
    }
  }
  pthread_mutex_unlock(&s->regmu);
}

int p2p_mem_acquire(struct mc_p2p_store *s, void *const *addrs, const uint64_t *sizes, size_t n, const char *location) {
  int rc = 0;
  size_t done = 0;
  pthread_mutex_lock(&s->regmu);
  for (; done < n && !rc; done++) {
    struct p2p_reg *same = NULL;
    uintptr_t a = (uintptr_t)addrs[done];
    if (!addrs[done] || !sizes[done] || a + sizes[done] < a) {
      rc = MC_P2P_INVALID_ARGUMENT;
      break;
    }
    for (struct p2p_reg *r = s->regs; r && !rc; r = r->next) {
      if (r->addr == addrs[done] && r->len == sizes[done])
        same = r;
      else if (overlaps(r, a, sizes[done]))
        rc = MC_P2P_ADDRESS_OVERLAPPED;
    }
    if (rc) break;
    if (same) {
      same->count++;
      continue;
    }
    if ((rc = engine_register(s, addrs[done], sizes[done], location))) break;
    struct p2p_reg *r = mc_calloc(1, sizeof(*r));
    r->addr = addrs[done], r->len = sizes[done], r->count = 1, r->next = s->regs;
    s->regs = r;
  }
  pthread_mutex_unlock(&s->regmu);
  if (rc) p2p_mem_release(s, addrs, sizes, done); /* the ones taken before the failure */
  return rc;
}

/* ---- the catalog ---- */

struct p2p_payload *p2p_find(struct mc_p2p_store *s, const char *name) {
  for (struct p2p_payload *p = s->payloads; p; p = p->next)
    if (!strcmp(p->name, name)) return p;
  return NULL;
}

struct p2p_payload *p2p_payload_new(const char *name, int gold, void *const *addrs, const size_t *sizes, size_t n,
                                    uint64_t max_shard) {
  struct p2p_payload *p = mc_calloc(1, sizeof(*p));
  p->name = mc_strdup(name);
  p->gold = gold;
  p->n = n;
  p->addrs = mc_calloc(n, sizeof(void *));
  p->sizes = mc_calloc(n, sizeof(uint64_t));
  for (size_t i = 0; i < n; i++) p->addrs[i] = addrs[i], p->sizes[i] = sizes[i];
  p->nshards = p2p_layout(p->sizes, n, max_shard, NULL, NULL, NULL);
  p->shard_size = mc_calloc(p->nshards + 1, sizeof(uint64_t));
  p->shard_addr = mc_calloc(p->nshards + 1, sizeof(uint64_t));
  p->have = mc_calloc(p->nshards + 1, 1);
  size_t *bi = mc_calloc(p->nshards + 1, sizeof(size_t));
  uint64_t *bo = mc_calloc(p->nshards + 1, sizeof(uint64_t));
  p2p_layout(p->sizes, n, max_shard, p->shard_size, bi, bo);
  for (size_t i = 0; i < p->nshards; i++) p->shard_addr[i] = (uint64_t)(uintptr_t)p->addrs[bi[i]] + bo[i];
  mc_free(bi);
  mc_free(bo);
  return p;
}

void p2p_payload_free(struct p2p_payload *p) {
  if (!p) return;
  mc_free(p->name);
  mc_free(p->addrs);
  mc_free(p->sizes);
  mc_free(p->shard_size);
  mc_free(p->shard_addr);
  mc_free(p->have);
  for (size_t i = 0; p->bits && i < p->nshards; i++) mc_free(p->bits[i]);
  mc_free(p->bits);
  mc_free(p);
}

void p2p_partials_free(struct p2p_partial *list) {
  while (list) {
    struct p2p_partial *e = list;
    list = e->next;
    p2p_payload_free(e->p);
    mc_free(e->name);
    mc_free(e);
  }
}

/* Unlinks p from the catalog (mu held). */
void p2p_unlink(struct mc_p2p_store *s, struct p2p_payload *p) {
  for (struct p2p_payload **q = &s->payloads; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      return;
    }
}

/* ---- compare-and-swap on a record ---- */

int p2p_update(struct mc_p2p_store *s, const char *name, p2p_edit_fn edit, void *arg) {
  char *key = p2p_key(name);
  int rc = MC_P2P_METADATA;
  for (int attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    char *text = NULL;
    uint64_t rev = 0;
    int g = mc_meta_get_rev(s->meta, key, &text, &rev);
    if (g == MC_META_NOT_FOUND) {
      rc = MC_P2P_PAYLOAD_NOT_FOUND;
      break;
    }
    if (g) break;
    struct p2p_record r;
    const char *why;
    if (p2p_record_decode(text, name, &r, &why)) {
      LOG_WARN("p2p store: the record %s is unusable (%s): treated as absent", key, why);
      mc_free(text);
      rc = MC_P2P_PAYLOAD_NOT_FOUND;
      break;
    }
    mc_free(text);
    size_t pruned = p2p_record_prune(&r, p2p_wall_ms());
    int e = edit(s, &r, arg);
    if (e < 0 || (e > 0 && !pruned)) {
      p2p_record_free(&r);
      rc = e < 0 ? e : 0;
      break;
    }
    char *out = p2p_record_empty(&r) ? NULL : p2p_record_encode(&r);
    p2p_record_free(&r);
    int won = 0;
    g = mc_meta_cas(s->meta, key, out, rev, &won);
    mc_free(out);
    if (g) break;
    if (won) {
      rc = 0;
      break;
    }
    usleep((useconds_t)(1000 + rand_r(&s->seed) % (1000u * (attempt < 20 ? attempt + 1 : 20))));
  }
  if (rc == MC_P2P_METADATA) LOG_ERROR("p2p store: cannot update %s (metadata service failing or contention)", key);
  mc_free(key);
  return rc;
}

/* The edits: this node's entries made fresh (or added) for the shards it has; or removed. */

struct put_arg {
  const struct p2p_payload *p; /* a snapshot: name, gold, nshards, shard sizes / addresses, have */
};

static int edit_put(struct mc_p2p_store *s, struct p2p_record *r, void *arg) {
  const struct p2p_payload *p = ((struct put_arg *)arg)->p;
  if (r->nshards != p->nshards) {
    LOG_WARN("p2p store: the record of '%s' now has another layout: this node no longer holds it", p->name);
    return 1;
  }
  for (size_t i = 0; i < r->nshards; i++)
    if (r->shards[i].size != p->shard_size[i]) return 1;
  int64_t expires = p2p_wall_ms() + s->ttl_ms;
  int changed = p2p_record_put(r, s->self, p->gold, p->have, p->shard_addr, expires);
  for (size_t i = 0; p->bits && r->stripe_size == p->stripe && i < r->nshards; i++) /* (one CAS for both) */
    if (!p->have[i] && p->bits[i])
      changed |= p2p_record_put_partial(r, s->self, i, p->bits[i], p->shard_addr[i], expires);
  return changed ? 0 : 1;
}

struct remove_arg {
  const char *seg;
  int gold;
};

static int edit_remove(struct mc_p2p_store *s, struct p2p_record *r, void *arg) {
  (void)s;
  struct remove_arg *a = arg;
  return p2p_record_remove(r, a->seg, a->gold) ? 0 : 1;
}

/* A copy of p's fields (mu held) for an edit made without the lock. */
struct p2p_payload *p2p_snapshot(const struct p2p_payload *p) {
  struct p2p_payload *c = mc_calloc(1, sizeof(*c));
  c->name = mc_strdup(p->name);
  c->gold = p->gold;
  c->nshards = p->nshards;
  c->shard_size = mc_calloc(p->nshards + 1, sizeof(uint64_t));
  c->shard_addr = mc_calloc(p->nshards + 1, sizeof(uint64_t));
  c->have = mc_calloc(p->nshards + 1, 1);
  memcpy(c->shard_size, p->shard_size, p->nshards * sizeof(uint64_t));
  memcpy(c->shard_addr, p->shard_addr, p->nshards * sizeof(uint64_t));
  memcpy(c->have, p->have, p->nshards);
  c->stripe = p->stripe;
  if (p->bits) {
    c->bits = mc_calloc(p->nshards + 1, sizeof(uint8_t *));
    for (size_t i = 0; i < p->nshards; i++) {
      if (!p->bits[i]) continue;
      size_t n = p2p_bitmap_bytes(p2p_stripes(p->shard_size[i], p->stripe));
      c->bits[i] = mc_malloc(n + 1);
      memcpy(c->bits[i], p->bits[i], n);
    }
  }
  return c;
}

int p2p_publish(struct mc_p2p_store *s, const struct p2p_payload *snap) {
  struct put_arg a = {snap};
  return p2p_update(s, snap->name, edit_put, &a);
}

int p2p_withdraw(struct mc_p2p_store *s, const char *name, int gold) {
  struct remove_arg a = {s->self, gold};
  return p2p_update(s, name, edit_remove, &a);
}

int mc_p2p_remove_holder(mc_p2p_store_t *s, const char *name, const char *segment_name, int gold) {
  if (!s || !p2p_name_ok(name) || !segment_name || !segment_name[0]) return MC_P2P_INVALID_ARGUMENT;
  struct remove_arg a = {segment_name, gold != 0};
  return p2p_update(s, name, edit_remove, &a);
}

/* ---- the lease renewer ---- */

static void *renewer_main(void *arg) {
  mc_thread_name("mc-p2p-renew");
  struct mc_p2p_store *s = arg;
  pthread_mutex_lock(&s->renew_mu);
  while (!s->stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ns = until.tv_nsec + (s->ttl_ms / 3) * 1000000;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&s->renew_cv, &s->renew_mu, &until);
    if (s->stop) break;
    pthread_mutex_unlock(&s->renew_mu);
    pthread_mutex_lock(&s->mu);
    size_t n = 0;
    for (struct p2p_payload *p = s->payloads; p; p = p->next) n++;
    struct p2p_payload **snaps = mc_calloc(n + 1, sizeof(*snaps));
    n = 0;
    for (struct p2p_payload *p = s->payloads; p; p = p->next)
      if (!(p->pending && p->gold)) snaps[n++] = p2p_snapshot(p); /* (a registration publishes its record itself) */
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n; i++) {
      int rc = p2p_publish(s, snaps[i]);
      if (rc && rc != MC_P2P_PAYLOAD_NOT_FOUND)
        LOG_WARN("p2p store: cannot renew the lease of '%s': %s", snaps[i]->name, mc_p2p_strerror(rc));
      p2p_payload_free(snaps[i]);
    }
    mc_free(snaps);
    pthread_mutex_lock(&s->renew_mu);
  }
  pthread_mutex_unlock(&s->renew_mu);
  return NULL;
}

/* ---- the handle ---- */

mc_p2p_store_t *mc_p2p_store_new(const char *metadata_conn, const char *local_server_name,
                                 const char *nic_priority_matrix) {
  if (!metadata_conn || !local_server_name || !local_server_name[0] ||
      strlen(local_server_name) + sizeof(DEFAULT_PORT) > P2P_MAX_SEGMENT) {
    LOG_ERROR("p2p store: a metadata connection and a server name (host[:port]) are required");
    return NULL;
  }
  struct mc_p2p_store *s = mc_calloc(1, sizeof(*s));
  const char *colon = strrchr(local_server_name, ':');
  if (!colon || strchr(colon, ']')) { /* "host", "[v6]" */
    snprintf(s->self, sizeof(s->self), "%s:%s", local_server_name, DEFAULT_PORT);
    LOG_INFO("use default port for server name: %s", s->self);
  } else {
    snprintf(s->self, sizeof(s->self), "%s", local_server_name);
  }
  if (mc_meta_is_p2p(metadata_conn) || mc_meta_open(metadata_conn, &s->meta) || !s->meta || !s->meta->ops->cas) {
    LOG_ERROR("p2p store: cannot use metadata service '%s' (etcd or http:// needed: compare-and-swap)", metadata_conn);
    mc_meta_close(s->meta);
    mc_free(s);
    return NULL;
  }
  s->te = createTransferEngine(metadata_conn, s->self, NULL, 0, 0);
  int rdma = nic_priority_matrix && nic_priority_matrix[0];
  void *args[2] = {(void *)nic_priority_matrix, NULL};
  if (!s->te || !installTransport(s->te, rdma ? "rdma" : "tcp", rdma ? args : NULL)) {
    LOG_ERROR("p2p store: cannot start the transfer engine as '%s'", s->self);
    if (s->te) destroyTransferEngine(s->te);
    mc_meta_close(s->meta);
    mc_free(s);
    return NULL;
  }
  getLocalIpAndPort(s->te, s->ipport, sizeof(s->ipport));
  s->ttl_ms = mc_knob_long(MC_KNOB_P2P_HOLDER_TTL_S) * 1000;
  s->seed = (unsigned)(p2p_wall_ms() ^ (int64_t)getpid() ^ (int64_t)(uintptr_t)s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->regmu, NULL);
  pthread_mutex_init(&s->renew_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->renew_cv, &ca);
  pthread_condattr_destroy(&ca);
  s->renewer_started = !pthread_create(&s->renewer, NULL, renewer_main, s);
  return s;
}

const char *mc_p2p_local_server_name(mc_p2p_store_t *s) { return s ? s->ipport : ""; }

void mc_p2p_progress(mc_p2p_store_t *s, uint64_t *bytes_done, unsigned *sources_in_use) {
  if (bytes_done) *bytes_done = s ? atomic_load(&s->bytes_done) : 0;
  if (sources_in_use) *sources_in_use = s ? atomic_load(&s->sources_in_use) : 0;
}

/* Drops p (held, in the catalog): withdraws this node's entries, unregisters the memory. */
static int drop_payload(struct mc_p2p_store *s, struct p2p_payload *p) {
  pthread_mutex_lock(&s->mu);
  p2p_unlink(s, p);
  pthread_mutex_unlock(&s->mu);
  int rc = p2p_withdraw(s, p->name, p->gold);
  p2p_mem_release(s, p->addrs, p->sizes, p->n);
  p2p_payload_free(p);
  return rc == MC_P2P_PAYLOAD_NOT_FOUND ? MC_P2P_PAYLOAD_NOT_FOUND : rc;
}

void mc_p2p_store_close(mc_p2p_store_t *s) {
  if (!s) return;
  if (s->renewer_started) {
    pthread_mutex_lock(&s->renew_mu);
    s->stop = 1;
    pthread_cond_signal(&s->renew_cv);
    pthread_mutex_unlock(&s->renew_mu);
    pthread_join(s->renewer, NULL);
  }
  for (;;) {
    pthread_mutex_lock(&s->mu);
    struct p2p_payload *p = s->payloads;
    pthread_mutex_unlock(&s->mu);
    if (!p) break;
    drop_payload(s, p);
  }
  p2p_partials_free(s->partials);
  destroyTransferEngine(s->te);
  mc_meta_close(s->meta);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->regmu);
  pthread_mutex_destroy(&s->renew_mu);
  pthread_cond_destroy(&s->renew_cv);
  mc_free(s);
}

/* ---- register / unregister ---- */

struct crc_job {
  struct p2p_payload *p;
  struct p2p_record *r; /* its shards' crc and stripe_crc are filled in */
  size_t first, step;
};

/* Each shard's stripes' CRC-32s (r->stripe_size; none when 0) and the shard's, combined from them. */
static void *crc_main(void *arg) {
  mc_thread_name("mc-p2p-crc");
  struct crc_job *j = arg;
  uint64_t stripe = j->r->stripe_size;
  for (size_t i = j->first; i < j->p->nshards; i += j->step) {
    struct p2p_shard *sh = &j->r->shards[i];
    const Bytef *at = (const Bytef *)(uintptr_t)j->p->shard_addr[i];
    uint64_t size = j->p->shard_size[i];
    if (!stripe) {
      sh->crc = (uint32_t)crc32_z(0, at, size);
      continue;
    }
    size_t n = p2p_stripes(size, stripe);
    sh->stripe_crc = mc_calloc(n, sizeof(uint32_t));
    for (size_t k = 0; k < n; k++) sh->stripe_crc[k] = (uint32_t)crc32_z(0, at + k * stripe, p2p_stripe_len(size, stripe, k));
    sh->crc = p2p_stripe_crcs_combine(sh->stripe_crc, n, size, stripe);
  }
  return NULL;
}

/* The CRC-32s of every shard of p (and of its stripes) into r, in up to CRC_THREADS threads. */
static void shard_crcs(struct p2p_payload *p, struct p2p_record *r) {
  size_t t = p->nshards < CRC_THREADS ? p->nshards : CRC_THREADS;
  pthread_t th[CRC_THREADS];
  struct crc_job jobs[CRC_THREADS];
  int started[CRC_THREADS] = {0};
  for (size_t i = 0; i < t; i++) {
    jobs[i] = (struct crc_job){p, r, i, t};
    started[i] = !pthread_create(&th[i], NULL, crc_main, &jobs[i]);
    if (!started[i]) crc_main(&jobs[i]);
  }
  for (size_t i = 0; i < t; i++)
    if (started[i]) pthread_join(th[i], NULL);
}

/* Checks a buffer list. 0 or MC_P2P_INVALID_ARGUMENT. */
int p2p_check_buffers(void *const *addrs, const size_t *sizes, size_t n) {
  if (!addrs || !sizes || !n || n > P2P_MAX_BUFFERS) return MC_P2P_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; i++)
    if (!addrs[i] || !sizes[i]) return MC_P2P_INVALID_ARGUMENT;
  return 0;
}

/* Writes the fresh record of p (gold everywhere) with create-only, or (force) over whatever is there. */
static int create_record(struct mc_p2p_store *s, struct p2p_payload *p, uint64_t max_shard, int force) {
  struct p2p_record r = {0};
  r.name = mc_strdup(p->name);
  r.max_shard = max_shard;
  r.nsize = p->n;
  r.size_list = mc_calloc(p->n, sizeof(uint64_t));
  for (size_t i = 0; i < p->n; i++) r.size_list[i] = p->sizes[i], r.size += p->sizes[i];
  r.nshards = p->nshards;
  r.shards = mc_calloc(p->nshards, sizeof(*r.shards));
  /* stripes of P2P_STRIPE (of the shard size when smaller; none below P2P_MIN_STRIPE): readers verify and
   * advertise each stripe (docs/p2p-store.md, "Metadata") */
  r.stripe_size = max_shard < P2P_MIN_STRIPE ? 0 : max_shard < P2P_STRIPE ? max_shard : P2P_STRIPE;
  for (size_t i = 0; i < p->nshards; i++) {
    r.shards[i].size = p->shard_size[i];
    r.shards[i].has_crc = 1;
  }
  shard_crcs(p, &r);
  p2p_record_put(&r, s->self, 1, NULL, p->shard_addr, p2p_wall_ms() + s->ttl_ms);
  char *text = p2p_record_encode(&r), *key = p2p_key(p->name);
  p2p_record_free(&r);
  int rc = MC_P2P_METADATA, won = 0;
  for (int attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    char *old = NULL;
    uint64_t rev = 0;
    if (force) {
      int g = mc_meta_get_rev(s->meta, key, &old, &rev);
      mc_free(old);
      if (g < 0) break;
      if (g == 0) LOG_WARN("p2p store: force_create replaces the record %s", key);
    }
    if (mc_meta_cas(s->meta, key, text, rev, &won)) break;
    if (won || !force) {
      rc = won ? 0 : MC_P2P_ALREADY_EXISTS;
      break;
    }
  }
  if (rc == MC_P2P_ALREADY_EXISTS) LOG_ERROR("error: key '%s' already exists", key);
  mc_free(text);
  mc_free(key);
  return rc;
}

int mc_p2p_register(mc_p2p_store_t *s, const char *name, void *const *addrs, const size_t *sizes, size_t n,
                    uint64_t max_shard_size, const char *location, int force_create) {
  if (!s || !p2p_name_ok(name) || p2p_check_buffers(addrs, sizes, n) || !p2p_shard_size_ok(max_shard_size))
    return MC_P2P_INVALID_ARGUMENT;
  struct p2p_payload *p = p2p_payload_new(name, 1, addrs, sizes, n, max_shard_size);
  if (!p->nshards) {
    p2p_payload_free(p);
    return MC_P2P_INVALID_ARGUMENT; /* more than P2P_MAX_SHARDS shards */
  }
  memset(p->have, 1, p->nshards);
  pthread_mutex_lock(&s->mu);
  int rc = p2p_find(s, name) ? MC_P2P_PAYLOAD_OPENED : 0;
  if (!rc) { /* reserved: a concurrent call with the same name gets PAYLOAD_OPENED */
    p->pending = 1;
    p->next = s->payloads;
    s->payloads = p;
  }
  pthread_mutex_unlock(&s->mu);
  if (rc) {
    p2p_payload_free(p);
    return rc;
  }
  rc = p2p_mem_acquire(s, p->addrs, p->sizes, n, location);
  if (!rc && (rc = create_record(s, p, max_shard_size, force_create))) p2p_mem_release(s, p->addrs, p->sizes, n);
  pthread_mutex_lock(&s->mu);
  if (rc) p2p_unlink(s, p);
  p->pending = 0;
  pthread_mutex_unlock(&s->mu);
  if (rc) p2p_payload_free(p);
  return rc;
}

/* Takes name's catalog entry out (gold or replica as asked) and drops it. */
static int drop_named(struct mc_p2p_store *s, const char *name, int gold) {
  if (!s || !p2p_name_ok(name)) return MC_P2P_INVALID_ARGUMENT;
  pthread_mutex_lock(&s->mu);
  struct p2p_payload *p = p2p_find(s, name);
  int ok = p && !p->pending && p->gold == gold;
  pthread_mutex_unlock(&s->mu);
  return ok ? drop_payload(s, p) : MC_P2P_PAYLOAD_NOT_OPENED;
}

int mc_p2p_unregister(mc_p2p_store_t *s, const char *name) { return drop_named(s, name, 1); }

int mc_p2p_delete_replica(mc_p2p_store_t *s, const char *name) { return drop_named(s, name, 0); }

/* ---- list ---- */

int mc_p2p_list(mc_p2p_store_t *s, const char *name_prefix, mc_p2p_payload_info_t **out, size_t *count) {
  if (!s || !name_prefix || !out || !count) return MC_P2P_INVALID_ARGUMENT;
  *out = NULL;
  *count = 0;
  char *prefix = p2p_key(name_prefix), **keys, **vals;
  size_t n;
  int rc = mc_meta_list(s->meta, prefix, 65536, &keys, &vals, &n);
  mc_free(prefix);
  if (rc) return MC_P2P_METADATA;
  *out = mc_calloc(n + 1, sizeof(**out));
  for (size_t i = 0; i < n; i++) {
    struct p2p_record r;
    const char *why;
    const char *name = keys[i] + strlen(P2P_KEY_PREFIX);
    if (p2p_record_decode(vals[i], name, &r, &why)) {
      LOG_WARN("p2p store: skipping the unusable record %s (%s)", keys[i], why);
      continue;
    }
    mc_p2p_payload_info_t *e = &(*out)[(*count)++];
    e->name = mc_strdup(r.name);
    e->max_shard_size = r.max_shard;
    e->total_size = r.size;
    e->size_count = r.nsize;
    e->size_list = r.size_list; /* moved */
    r.size_list = NULL;
    p2p_record_free(&r);
  }
  mc_meta_list_free(keys, vals, n);
  return 0;
}

void mc_p2p_list_free(mc_p2p_payload_info_t *list, size_t count) {
  for (size_t i = 0; list && i < count; i++) {
    mc_free(list[i].name);
    mc_free(list[i].size_list);
  }
  mc_free(list);
}
