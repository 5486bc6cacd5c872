/* The engine core: lifecycle, local registrations, the segment table, batches and notifications.
 * It routes slices to transports and never touches sockets itself (the control RPC lives in net/). */

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/tsan.h"
#include "common/util.h"
#include "net/ctrl_rpc.h"
#include "net/sock.h"
#include "te/engine_internal.h"
#include "te/metadata_server.h"

#define RPC_CALL_TIMEOUT_MS 10000

struct mc_outnote {
  struct mc_outnote *next;
  int32_t target;
  char *name, *msg;
};

static void rpc_handler(void *ctx, int type, const char *req, size_t len, char **reply);
static void mem_changed(struct mc_engine *e);
static void *notifier_main(void *arg);

/* ------------------------------------------------------------------ the process's live engines */

/* Leaf lock above every engine's reg_mu: guards the list and keeps a listed engine's registrations alive. */
static pthread_mutex_t local_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_engine *local_engines;

static void local_add(struct mc_engine *e) {
  pthread_mutex_lock(&local_mu);
  e->local_next = local_engines;
  local_engines = e;
  pthread_mutex_unlock(&local_mu);
}

static void local_remove(struct mc_engine *e) {
  pthread_mutex_lock(&local_mu);
  for (struct mc_engine **p = &local_engines; *p; p = &(*p)->local_next)
    if (*p == e) {
      *p = e->local_next;
      break;
    }
  pthread_mutex_unlock(&local_mu);
}

struct mc_buf *mc_local_pin_range(uint64_t addr, uint64_t len) {
  struct mc_buf *b = NULL;
  pthread_mutex_lock(&local_mu);
  for (struct mc_engine *e = local_engines; e && !b; e = e->local_next) b = mc_engine_pin_range(e, addr, len);
  pthread_mutex_unlock(&local_mu);
  return b;
}

/* ------------------------------------------------------------------ lifecycle */

/* Publishes rpc_meta/<name>. An entry left by a dead incarnation (which write-once servers would keep
 * forever) is replaced when its owner does not answer; one held by a live engine is a name collision,
 * and the key stays the owner's: this engine never deletes it (MC_PUB_RPC stays clear). */
static int publish_rpc_meta(struct mc_engine *e) {
  char key[512], *old = NULL;
  pthread_mutex_lock(&e->pub_mu);
  if (e->withdrawn) {
    pthread_mutex_unlock(&e->pub_mu);
    return 0;
  }
  json_t *v = json_pack("{s:s, s:i}", "ip_or_host_name", e->ip, "rpc_port", (int)e->rpc_port);
  char *body = json_dumps(v, JSON_COMPACT);
  json_decref(v);
  mc_meta_rpc_key(key, sizeof(key), e->name);
  int rc = 0;
  if (mc_meta_get(e->meta, key, &old) == 0 && strcmp(old, body)) {
    if (mc_meta_rpc_owner_alive(old, 2000)) {
      LOG_ERROR("%s is held by another live engine (%s): choose another server name", key, old);
      rc = ERR_METADATA;
    } else {
      LOG_WARN("replacing stale %s (its previous owner does not answer)", key);
      mc_meta_remove(e->meta, key);
    }
  }
  if (!rc) rc = mc_meta_set(e->meta, key, body);
  if (!rc) e->published |= MC_PUB_RPC;
  pthread_mutex_unlock(&e->pub_mu);
  mc_free(old);
  free(body);
  if (rc) LOG_ERROR("cannot publish %s to metadata service %s", key, e->conn);
  return rc;
}

/* Deletes the keys this engine published, and nothing else: a creation that failed on a name collision
 * must leave the live owner's keys alone. Nothing is published afterwards. */
static void unpublish(struct mc_engine *e) {
  char key[512];
  pthread_mutex_lock(&e->pub_mu);
  e->withdrawn = 1;
  if (e->published & MC_PUB_SEG) {
    mc_meta_segment_key(key, sizeof(key), e->name);
    mc_meta_remove(e->meta, key);
  }
  if (e->published & MC_PUB_RPC) {
    mc_meta_rpc_key(key, sizeof(key), e->name);
    mc_meta_remove(e->meta, key);
  }
  e->published = 0;
  pthread_mutex_unlock(&e->pub_mu);
}

/* The registry's teardown on a signal (common/lifecycle.h): the control RPC stops and the engine's keys
 * go, as in destroyTransferEngine, so that peers stop finding it (the HTTP metadata server deletes an
 * rpc_meta key only when its engine no longer answers: docs/transfer-engine.md, "Metadata"). The rest
 * stays for destroyTransferEngine: application threads may still be using the engine until the signal's
 * default action ends the process. Only the creator and destroy read e->rpc besides this. */
static void engine_teardown(struct mc_lifecycle *n) {
  struct mc_engine *e = mc_container_of(n, struct mc_engine, lc);
  mc_rpc_server_stop(e->rpc);
  e->rpc = NULL;
  if (e->meta) unpublish(e);
}

static int init_rpc(struct mc_engine *e, const char *server_name) {
  char host[256];
  uint16_t port = 0, fixed = 0;
  if (mc_split_host_port(server_name, host, sizeof(host), &port,
                         (uint16_t)mc_knob_long(MC_KNOB_HANDSHAKE_PORT))) {
    LOG_ERROR("invalid local server name '%s'", server_name);
    return -1;
  }
  int legacy = mc_knob_bool(MC_KNOB_LEGACY_RPC_PORT_BINDING);
  if (legacy) fixed = port;
  if (e->p2p || legacy) snprintf(e->ip, sizeof(e->ip), "%s", host);
  else mc_local_ip(e->ip, sizeof(e->ip));
  e->rpc = mc_rpc_server_start(fixed, rpc_handler, e, &e->rpc_port);
  if (!e->rpc) return -1;
  if (e->p2p) {
    char n[300];
    snprintf(n, sizeof(n), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, e->rpc_port);
    e->name = mc_strdup(n);
  } else {
    e->name = mc_strdup(server_name);
  }
  LOG_INFO("Transfer Engine RPC using %s, listening on %s:%u",
           legacy ? "legacy/P2P" : e->p2p ? "P2P handshake" : "new RPC mapping", e->ip, e->rpc_port);
  return 0;
}

static struct mc_seg *new_seg(struct mc_engine *e, const char *name, struct mc_desc *d, int path) {
  struct mc_seg *s = mc_calloc(1, sizeof(*s));
  s->name = mc_strdup(name);
  s->desc = d;
  s->path = path;
  if (e->nsegs == e->capsegs) {
    e->capsegs = e->capsegs ? e->capsegs * 2 : 16;
    e->segs = mc_realloc(e->segs, e->capsegs * sizeof(*e->segs));
  }
  s->id = (int32_t)e->nsegs;
  e->segs[e->nsegs++] = s;
  return s;
}

static void engine_free(struct mc_engine *e) {
  for (size_t i = 0; i < e->nsegs; i++) {
    mc_desc_unref(e->segs[i]->desc);
    mc_free(e->segs[i]->name);
    mc_free(e->segs[i]);
  }
  for (size_t i = 0; i < e->nbatch_slots; i++)
    if (e->batches[i]) {
      mc_free(e->batches[i]->tasks);
      mc_free(e->batches[i]->notify_name);
      mc_free(e->batches[i]->notify_msg);
      mc_free(e->batches[i]);
    }
  for (size_t i = 0; i < e->nbufs; i++) {
    if (e->bufs[i]->owned) munmap((void *)(uintptr_t)e->bufs[i]->addr, e->bufs[i]->len);
    if (e->bufs[i]->memfd >= 0) close(e->bufs[i]->memfd);
    mc_free(e->bufs[i]->warm);
    mc_free(e->bufs[i]->location);
    mc_free(e->bufs[i]);
  }
  freeNotifsMsgBuf(e->inbox, e->ninbox);
  mc_free(e->batches);
  mc_free(e->segs);
  mc_free(e->bufs);
  mc_free(e->name);
  mc_free(e->conn);
  mc_free(e);
}

transfer_engine_t createTransferEngine(const char *conn, const char *local_server_name,
                                       const char *ip_or_host_name, uint64_t rpc_port, int auto_discover) {
  mc_log_init_from_env();
  if (!conn || !local_server_name || !*local_server_name) {
    LOG_ERROR("createTransferEngine: metadata connection string and server name are required");
    return NULL;
  }
  struct mc_engine *e = mc_calloc(1, sizeof(*e));
  pthread_mutex_init(&e->tp_mu, NULL);
  pthread_mutex_init(&e->pub_mu, NULL);
  pthread_mutex_init(&e->reg_mu, NULL);
  pthread_mutex_init(&e->seg_mu, NULL);
  pthread_mutex_init(&e->batch_mu, NULL);
  pthread_mutex_init(&e->inbox_mu, NULL);
  pthread_mutex_init(&e->out_mu, NULL);
  pthread_cond_init(&e->out_cv, NULL);
  e->conn = mc_strdup(conn);
  e->p2p = mc_meta_is_p2p(conn);
  e->force_tcp = mc_knob_bool(MC_KNOB_FORCE_TCP);
  e->tcp_split = (uint64_t)mc_knob_long(MC_KNOB_TCP_SPLIT_SIZE);
  e->inbox_max = (int)mc_knob_long(MC_KNOB_NOTIFY_INBOX_MAX);
  e->inbox_max_bytes = (size_t)mc_knob_long(MC_KNOB_NOTIFY_INBOX_MAX_BYTES);
  if (mc_meta_open(conn, &e->meta) || init_rpc(e, local_server_name)) goto fail;
  new_seg(e, e->name, NULL, MC_PATH_NONE);
  if (pthread_create(&e->notifier, NULL, notifier_main, e)) goto fail_rpc;
  e->prefault = mc_prefault_create(e);
  local_add(e);
  mc_lifecycle_add(&e->lc, engine_teardown);
  if (!e->p2p && publish_rpc_meta(e)) {
    destroyTransferEngine(e);
    return NULL;
  }
  if (auto_discover) {
    if (e->force_tcp) LOG_INFO("MC_FORCE_TCP is set, using TCP transport only");
    else LOG_INFO("Using TCP transport (no HCA detected)");
    if (!installTransport(e, "tcp", NULL)) {
      destroyTransferEngine(e);
      return NULL;
    }
  }
  return e;
fail_rpc:
  mc_rpc_server_stop(e->rpc);
fail:
  if (e->meta) mc_meta_close(e->meta);
  engine_free(e);
  return NULL;
}

void destroyTransferEngine(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  if (!e) return;
  mc_lifecycle_remove(&e->lc); /* first: a teardown by a signal in progress finishes before we go on */
  pthread_mutex_lock(&e->out_mu);
  e->out_stop = 1;
  pthread_cond_signal(&e->out_cv);
  pthread_mutex_unlock(&e->out_mu);
  pthread_join(e->notifier, NULL);
  local_remove(e); /* no new same-process copy can pin our buffers */
  mc_prefault_destroy(e->prefault);
  e->prefault = NULL;
  mc_rpc_server_stop(e->rpc);
  for (int i = e->ntps - 1; i >= 0; i--) e->tps[i]->ops->fini(e->tps[i]);
  if (e->meta) {
    unpublish(e);
    mc_meta_close(e->meta);
  }
  while (e->outbox) {
    struct mc_outnote *n = e->outbox;
    e->outbox = n->next;
    mc_free(n->name);
    mc_free(n->msg);
    mc_free(n);
  }
  for (size_t i = 0; i < e->nbufs; i++) /* copies of other engines of this process still running */
    while (atomic_load(&e->bufs[i]->pins) > 0) usleep(100);
  engine_free(e);
}

/* ------------------------------------------------------------------ transports */

struct mc_transport *mc_engine_transport(struct mc_engine *e, const char *name) {
  struct mc_transport *t = NULL;
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (!strcmp(e->tps[i]->ops->name, name)) t = e->tps[i];
  pthread_mutex_unlock(&e->tp_mu);
  return t;
}

static struct mc_transport *install_one(struct mc_engine *e, const char *proto) {
  struct mc_transport *t = mc_engine_transport(e, proto);
  if (t) return t;
  const struct mc_transport_ops *ops = mc_transport_lookup(proto);
  if (!ops) {
    LOG_ERROR("installTransport: unsupported protocol '%s'", proto);
    return NULL;
  }
  pthread_mutex_lock(&e->tp_mu);
  if (e->ntps < MC_MAX_TRANSPORTS && ops->init(e, &t) == 0) e->tps[e->ntps++] = t;
  else t = NULL;
  pthread_mutex_unlock(&e->tp_mu);
  return t;
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args) {
  struct mc_engine *e = engine;
  if (!e || !proto) return NULL;
  /* "tcp" is the network path with the same-host shortcut (docs/transfer-engine.md, "Path choice"). */
  if (!strcmp(proto, "tcp") && !e->force_tcp && !install_one(e, "shm")) return NULL;
  struct mc_transport *t = install_one(e, proto);
  if (!t) return NULL;
  pthread_mutex_lock(&e->reg_mu); /* replay registrations into the new transport */
  mem_changed(e);
  pthread_mutex_unlock(&e->reg_mu);
  mc_engine_publish(e);
  return t;
}

int uninstallTransport(transfer_engine_t engine, const char *proto) { return 0; }

/* ------------------------------------------------------------------ local descriptor */

char *mc_engine_describe(struct mc_engine *e) {
  char ts[40];
  mc_timestamp(ts, sizeof(ts));
  struct mc_transport *tcp = mc_engine_transport(e, "tcp");
  json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:i}", "name", e->name, "protocol",
                        tcp || !mc_engine_transport(e, "shm") ? "tcp" : "shm", "timestamp", ts, "host_id",
                        mc_host_id(), "pid", (int)getpid(), "ip_or_host_name", e->ip, "rpc_port",
                        (int)e->rpc_port, "tcp_data_port", 0);
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->describe) e->tps[i]->ops->describe(e->tps[i], d);
  pthread_mutex_unlock(&e->tp_mu);
  json_t *arr = json_array();
  pthread_mutex_lock(&e->reg_mu);
  for (size_t i = 0; i < e->nbufs; i++) {
    struct mc_buf *b = e->bufs[i];
    if (!b->remote_accessible) continue;
    json_t *o = json_pack("{s:s, s:I, s:I}", "name", e->name, "addr", (json_int_t)b->addr, "length",
                          (json_int_t)b->len);
    if (b->memfd >= 0) json_object_set_new(o, "shm_fd", json_integer(b->memfd));
    json_array_append_new(arr, o);
  }
  pthread_mutex_unlock(&e->reg_mu);
  json_object_set_new(d, "buffers", arr);
  char *s = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  return s;
}

static void invalidate_local(struct mc_engine *e);

int mc_engine_publish(struct mc_engine *e) {
  invalidate_local(e);
  if (e->p2p || !e->meta) return 0;
  char key[512], *d = NULL;
  mc_meta_segment_key(key, sizeof(key), e->name);
  pthread_mutex_lock(&e->pub_mu); /* described under it too: concurrent publishes land in order */
  int rc = e->withdrawn ? 0 : mc_meta_set(e->meta, key, d = mc_engine_describe(e));
  if (!rc && !e->withdrawn) e->published |= MC_PUB_SEG;
  pthread_mutex_unlock(&e->pub_mu);
  free(d);
  if (rc) LOG_ERROR("cannot publish segment descriptor %s to %s", key, e->conn);
  return rc ? ERR_METADATA : 0;
}

/* ------------------------------------------------------------------ registration */

/* Index of the first buffer with addr >= a. reg_mu held. */
static size_t buf_lower_bound(struct mc_engine *e, uint64_t a) {
  size_t lo = 0, hi = e->nbufs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e->bufs[mid]->addr < a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int overlaps(struct mc_engine *e, uint64_t a, uint64_t len) {
  size_t i = buf_lower_bound(e, a);
  if (i < e->nbufs && e->bufs[i]->addr < a + len) return 1;
  if (i > 0 && e->bufs[i - 1]->addr + e->bufs[i - 1]->len > a) return 1;
  return 0;
}

/* Tells the transports that the registrations changed. reg_mu held. */
static void mem_changed(struct mc_engine *e) {
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->mem_changed) e->tps[i]->ops->mem_changed(e->tps[i], e->bufs, e->nbufs);
  pthread_mutex_unlock(&e->tp_mu);
}

static void mem_quiesce(struct mc_engine *e) {
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->mem_quiesce) e->tps[i]->ops->mem_quiesce(e->tps[i]);
  pthread_mutex_unlock(&e->tp_mu);
}

static void insert_buf(struct mc_engine *e, struct mc_buf *b) {
  if (e->nbufs == e->capbufs) {
    e->capbufs = e->capbufs ? e->capbufs * 2 : 16;
    e->bufs = mc_realloc(e->bufs, e->capbufs * sizeof(*e->bufs));
  }
  size_t i = buf_lower_bound(e, b->addr);
  memmove(&e->bufs[i + 1], &e->bufs[i], (e->nbufs - i) * sizeof(*e->bufs));
  e->bufs[i] = b;
  e->nbufs++;
  mem_changed(e);
}

static struct mc_buf *new_buf(void *addr, size_t len, const char *location, int remote, int memfd) {
  struct mc_buf *b = mc_calloc(1, sizeof(*b));
  b->addr = (uint64_t)(uintptr_t)addr;
  b->len = len;
  /* "*" would mean "detect"; without NUMA probing every CPU buffer is on node 0. */
  b->location = mc_strdup(!location || !strcmp(location, "*") || !*location ? "cpu:0" : location);
  b->remote_accessible = remote;
  b->memfd = memfd;
  return b;
}

static int check_range(void *addr, size_t len) {
  if (!addr || len == 0) return ERR_INVALID_ARGUMENT;
  if ((uint64_t)(uintptr_t)addr + len < (uint64_t)(uintptr_t)addr) return ERR_INVALID_ARGUMENT;
  return 0;
}

static int register_locked(struct mc_engine *e, void *addr, size_t len, const char *loc, int remote, int memfd) {
  int rc = check_range(addr, len);
  if (rc) return rc;
  if (overlaps(e, (uint64_t)(uintptr_t)addr, len)) return ERR_ADDRESS_OVERLAPPED;
  insert_buf(e, new_buf(addr, len, loc, remote, memfd));
  return 0;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                        int remote_accessible) {
  struct mc_engine *e = engine;
  if (!e) return ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&e->reg_mu);
  int rc = register_locked(e, addr, length, location, remote_accessible, -1);
  pthread_mutex_unlock(&e->reg_mu);
  return rc ? rc : mc_engine_publish(e);
}

static int cmp_entry(const void *a, const void *b) {
  const buffer_entry_t *x = a, *y = b;
  return (uintptr_t)x->addr < (uintptr_t)y->addr ? -1 : (uintptr_t)x->addr > (uintptr_t)y->addr;
}

int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *list, size_t n, const char *location) {
  struct mc_engine *e = engine;
  if (!e || (!list && n)) return ERR_INVALID_ARGUMENT;
  buffer_entry_t *s = mc_malloc((n ? n : 1) * sizeof(*s));
  memcpy(s, list, n * sizeof(*s));
  qsort(s, n, sizeof(*s), cmp_entry);
  int rc = 0;
  pthread_mutex_lock(&e->reg_mu);
  for (size_t i = 0; i < n && !rc; i++) {
    rc = check_range(s[i].addr, s[i].length);
    if (!rc && ((i > 0 && (uintptr_t)s[i - 1].addr + s[i - 1].length > (uintptr_t)s[i].addr) ||
                overlaps(e, (uint64_t)(uintptr_t)s[i].addr, s[i].length)))
      rc = ERR_ADDRESS_OVERLAPPED;
  }
  for (size_t i = 0; i < n && !rc; i++) insert_buf(e, new_buf(s[i].addr, s[i].length, location, 1, -1));
  pthread_mutex_unlock(&e->reg_mu);
  mc_free(s);
  return rc ? rc : mc_engine_publish(e);
}

/* Removes the buffer starting at addr and waits until no server-side transfer uses it. */
static int unregister_one(struct mc_engine *e, void *addr, struct mc_buf **out) {
  uint64_t a = (uint64_t)(uintptr_t)addr;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, a);
  if (i >= e->nbufs || e->bufs[i]->addr != a) {
    pthread_mutex_unlock(&e->reg_mu);
    return ERR_ADDRESS_NOT_REGISTERED;
  }
  struct mc_buf *b = e->bufs[i];
  memmove(&e->bufs[i], &e->bufs[i + 1], (e->nbufs - i - 1) * sizeof(*e->bufs));
  e->nbufs--;
  mem_changed(e);
  pthread_mutex_unlock(&e->reg_mu);
  mem_quiesce(e);
  while (atomic_load(&b->pins) > 0) usleep(100);
  *out = b;
  return 0;
}

static void free_buf(struct mc_buf *b) {
  mc_free(b->warm);
  if (b->owned) munmap((void *)(uintptr_t)b->addr, b->len);
  if (b->memfd >= 0) close(b->memfd);
  mc_free(b->location);
  mc_free(b);
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr) {
  struct mc_engine *e = engine;
  struct mc_buf *b;
  if (!e) return ERR_INVALID_ARGUMENT;
  int rc = unregister_one(e, addr, &b);
  if (rc) return rc;
  if (b->owned) { /* shared memory must be freed through mc_te_free_shared; keep it registered */
    pthread_mutex_lock(&e->reg_mu);
    insert_buf(e, b);
    pthread_mutex_unlock(&e->reg_mu);
    return ERR_INVALID_ARGUMENT;
  }
  free_buf(b);
  return mc_engine_publish(e);
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addrs, size_t n) {
  struct mc_engine *e = engine;
  if (!e || (!addrs && n)) return ERR_INVALID_ARGUMENT;
  int first = 0;
  for (size_t i = 0; i < n; i++) {
    struct mc_buf *b;
    int rc = unregister_one(e, addrs[i], &b);
    if (!rc) free_buf(b);
    if (rc && !first) first = rc;
  }
  int prc = mc_engine_publish(e);
  return first ? first : prc;
}

void *mc_te_alloc_shared(transfer_engine_t engine, size_t length, const char *location) {
  struct mc_engine *e = engine;
  if (!e || !length) return NULL;
  int fd = mc_shm_memfd("segment", length);
  if (fd < 0) {
    LOG_ERROR("cannot create %zu bytes of shared memory: %s", length, strerror(errno));
    return NULL;
  }
  void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    LOG_ERROR("cannot map %zu bytes of shared memory: %s", length, strerror(errno));
    close(fd);
    return NULL;
  }
  mc_shm_advise_huge(p, length);
  pthread_mutex_lock(&e->reg_mu);
  int rc = register_locked(e, p, length, location, 1, fd);
  if (!rc) {
    struct mc_buf *b = e->bufs[buf_lower_bound(e, (uint64_t)(uintptr_t)p)];
    b->owned = 1;
    if (e->prefault) b->warm = mc_warm_bits_new(length);
  }
  pthread_mutex_unlock(&e->reg_mu);
  if (rc) {
    munmap(p, length);
    close(fd);
    return NULL;
  }
  mc_engine_publish(e);
  mc_prefault_add(e->prefault, (uint64_t)(uintptr_t)p, length);
  return p;
}

uint64_t mc_te_prefault_pending(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  return e ? mc_prefault_pending(e->prefault) : 0;
}

int mc_te_free_shared(transfer_engine_t engine, void *addr) {
  struct mc_engine *e = engine;
  struct mc_buf *b;
  if (!e) return ERR_INVALID_ARGUMENT;
  int rc = unregister_one(e, addr, &b);
  if (rc) return rc;
  free_buf(b);
  return mc_engine_publish(e);
}

struct mc_buf *mc_engine_pin_range(struct mc_engine *e, uint64_t addr, uint64_t len) {
  struct mc_buf *r = NULL;
  if (len == 0) return NULL;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, addr + 1); /* first buffer starting after addr */
  if (i > 0) {
    struct mc_buf *b = e->bufs[i - 1];
    uint64_t off = addr - b->addr;
    if (b->remote_accessible && off < b->len && len <= b->len - off) {
      atomic_fetch_add(&b->pins, 1);
      r = b;
    }
  }
  pthread_mutex_unlock(&e->reg_mu);
  /* a peer's access is ordered against the owner's own through the network (the peer learns that the
   * owner is done, or the owner learns that the peer is), which TSan cannot see: the owner's code
   * releases and acquires on the buffer's base address around its own accesses (tests do) */
  if (r) MC_TSAN_ACQUIRE((void *)(uintptr_t)r->addr);
  return r;
}

void mc_engine_unpin(struct mc_buf *b) {
  MC_TSAN_RELEASE((void *)(uintptr_t)b->addr);
  atomic_fetch_sub(&b->pins, 1);
}

/* 1 when [p, p+len) lies inside one local registration (any, remote accessible or not). */
static int local_registered(struct mc_engine *e, const void *p, uint64_t len) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  int ok = 0;
  pthread_mutex_lock(&e->reg_mu);
  size_t i = buf_lower_bound(e, a + 1);
  if (i > 0) {
    struct mc_buf *b = e->bufs[i - 1];
    uint64_t off = a - b->addr;
    ok = off < b->len && len <= b->len - off;
  }
  pthread_mutex_unlock(&e->reg_mu);
  return ok;
}

/* ------------------------------------------------------------------ segments */

static const char *path_name(int p) { return p == MC_PATH_SHM ? "shm" : p == MC_PATH_TCP ? "tcp" : NULL; }

static int choose_path(struct mc_engine *e, const struct mc_desc *d) {
  struct mc_transport *shm = mc_engine_transport(e, "shm"), *tcp = mc_engine_transport(e, "tcp");
  int want_shm = !strcmp(d->protocol, "shm");
  if (!want_shm && strcmp(d->protocol, "tcp")) return MC_PATH_NONE;
  if (shm && shm->ops->reachable(shm, d)) return MC_PATH_SHM;
  if (!want_shm && tcp && tcp->ops->reachable(tcp, d)) return MC_PATH_TCP;
  return MC_PATH_NONE;
}

/* Fetches a peer's descriptor: metadata GET, or a Metadata RPC to host:port under P2PHANDSHAKE.
 * *gone (when given) is set to 1 when the metadata service answered that the segment has no descriptor. */
static int fetch_desc_ex(struct mc_engine *e, const char *name, struct mc_desc **out, int *gone) {
  char *text = NULL;
  int rc;
  if (e->p2p) {
    char host[256];
    uint16_t port;
    if (mc_split_host_port(name, host, sizeof(host), &port, 12001)) return ERR_INVALID_ARGUMENT;
    char *mine = mc_engine_describe(e);
    rc = mc_rpc_call(host, port, MC_RPC_METADATA, mine, &text, RPC_CALL_TIMEOUT_MS);
    free(mine);
    if (rc) LOG_WARN("cannot fetch descriptor of %s over the control RPC: %s", name, strerror(-rc));
    rc = rc ? ERR_METADATA : 0;
  } else {
    char key[512];
    mc_meta_segment_key(key, sizeof(key), name);
    rc = mc_meta_get(e->meta, key, &text);
    if (rc == MC_META_NOT_FOUND) LOG_WARN("segment %s not found in metadata (%s)", name, key);
    if (rc == MC_META_NOT_FOUND && gone) *gone = 1;
    rc = rc ? ERR_METADATA : 0;
  }
  if (rc) return rc;
  *out = mc_desc_decode(text);
  mc_free(text);
  return *out ? 0 : ERR_MALFORMED_JSON;
}

static int fetch_desc(struct mc_engine *e, const char *name, struct mc_desc **out) {
  return fetch_desc_ex(e, name, out, NULL);
}

static struct mc_seg *find_seg(struct mc_engine *e, const char *name) {
  for (size_t i = 0; i < e->nsegs; i++)
    if (!strcmp(e->segs[i]->name, name)) return e->segs[i];
  return NULL;
}

static const char *strip_name(const char *n) { return n && *n == '/' ? n + 1 : n; }

static void log_path(struct mc_seg *s) {
  if (s->path) LOG_INFO("segment %s: using protocol %s", s->name, path_name(s->path));
  else LOG_WARN("segment %s: no installed transport can reach it (protocol %s)", s->name, s->desc->protocol);
}

/* Installs a freshly fetched descriptor into the table (new entry or replacement). */
static int32_t adopt_desc(struct mc_engine *e, const char *name, struct mc_desc *d) {
  int path = choose_path(e, d);
  pthread_mutex_lock(&e->seg_mu);
  struct mc_seg *s = find_seg(e, name);
  int changed = 1;
  if (!s) {
    s = new_seg(e, name, d, path);
  } else if (s->desc && !strcmp(s->desc->canon, d->canon)) {
    mc_desc_unref(d); /* unchanged (timestamps differ only) */
    changed = 0;
  } else {
    mc_desc_unref(s->desc);
    s->desc = d;
    s->path = path;
  }
  int32_t id = s->id;
  pthread_mutex_unlock(&e->seg_mu);
  if (changed) log_path(s);
  return id;
}

static segment_id_t open_segment(struct mc_engine *e, const char *name, int nocache) {
  name = strip_name(name);
  if (!e || !name || !*name) return -1;
  if (!strcmp(name, e->name)) return LOCAL_SEGMENT;
  if (!nocache) {
    pthread_mutex_lock(&e->seg_mu);
    struct mc_seg *s = find_seg(e, name);
    int32_t id = s ? s->id : -1;
    pthread_mutex_unlock(&e->seg_mu);
    if (id >= 0) return id;
  }
  struct mc_desc *d;
  int rc = fetch_desc(e, name, &d);
  if (rc) return nocache ? rc : -1;
  return adopt_desc(e, name, d);
}

segment_id_t openSegment(transfer_engine_t engine, const char *name) { return open_segment(engine, name, 0); }
segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *name) {
  return open_segment(engine, name, 1);
}

segment_id_t mc_te_reopen_segment(transfer_engine_t engine, const char *name) {
  struct mc_engine *e = engine;
  name = strip_name(name);
  if (!e || !name || !*name) return -1;
  if (!strcmp(name, e->name)) return LOCAL_SEGMENT;
  struct mc_desc *d;
  int gone = 0;
  if (!fetch_desc_ex(e, name, &d, &gone)) return adopt_desc(e, name, d);
  return gone ? -1 : open_segment(e, name, 0);
}

int closeSegment(transfer_engine_t engine, segment_id_t id) { return 0; }

int removeLocalSegment(transfer_engine_t engine, const char *name) {
  struct mc_engine *e = engine;
  name = strip_name(name);
  if (!e || !name || !*name) return ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&e->seg_mu);
  struct mc_seg *s = find_seg(e, name);
  if (s && s->id != LOCAL_SEGMENT) { /* keep the id slot; forget the descriptor and the name */
    mc_free(s->name);
    s->name = mc_strdup("");
    mc_desc_unref(s->desc);
    s->desc = NULL;
    s->path = MC_PATH_NONE;
  }
  pthread_mutex_unlock(&e->seg_mu);
  return 0;
}

int syncSegmentCache(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  if (!e) return ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&e->seg_mu);
  size_t n = e->nsegs;
  char **names = mc_calloc(n, sizeof(char *));
  for (size_t i = 1; i < n; i++)
    if (e->segs[i]->desc) names[i] = mc_strdup(e->segs[i]->name);
  pthread_mutex_unlock(&e->seg_mu);
  int first = 0;
  for (size_t i = 1; i < n; i++) {
    struct mc_desc *d;
    int rc = names[i] ? fetch_desc(e, names[i], &d) : 0;
    if (names[i] && !rc) adopt_desc(e, names[i], d);
    if (rc && !first) first = rc;
    mc_free(names[i]);
  }
  mc_free(names);
  return first;
}

/* The descriptor and path for a segment id, referenced; the local segment describes this engine. */
static struct mc_desc *seg_desc(struct mc_engine *e, int32_t id, int *path) {
  struct mc_desc *d = NULL;
  if (id == LOCAL_SEGMENT) {
    pthread_mutex_lock(&e->seg_mu);
    d = e->segs[0]->desc;
    pthread_mutex_unlock(&e->seg_mu);
    if (!d) { /* built on first use and after every publish */
      char *text = mc_engine_describe(e);
      d = mc_desc_decode(text);
      free(text);
      if (!d) return NULL;
      adopt_desc(e, e->name, d);
      return seg_desc(e, id, path);
    }
  }
  pthread_mutex_lock(&e->seg_mu);
  if (id >= 0 && (size_t)id < e->nsegs && e->segs[id]->desc) {
    d = e->segs[id]->desc;
    *path = e->segs[id]->path;
    mc_desc_ref(d);
  } else {
    d = NULL;
  }
  pthread_mutex_unlock(&e->seg_mu);
  return d;
}

char *mc_te_segment_json(transfer_engine_t engine, segment_id_t id) {
  struct mc_engine *e = engine;
  int path;
  if (!e) return NULL;
  struct mc_desc *d = seg_desc(e, id, &path);
  char *r = d ? mc_strdup(d->canon) : NULL;
  mc_desc_unref(d);
  return r;
}

const char *mc_te_segment_path(transfer_engine_t engine, segment_id_t id) {
  struct mc_engine *e = engine;
  int path = MC_PATH_NONE;
  if (!e) return NULL;
  struct mc_desc *d = seg_desc(e, id, &path);
  mc_desc_unref(d);
  return d ? path_name(path) : NULL;
}

int mc_te_republish(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  if (!e) return ERR_INVALID_ARGUMENT;
  if (e->p2p) return 0;
  int rc = publish_rpc_meta(e) ? ERR_METADATA : 0;
  int rc2 = mc_engine_publish(e);
  return rc ? rc : rc2;
}

const char *mc_te_local_segment_name(transfer_engine_t engine) {
  return engine ? ((struct mc_engine *)engine)->name : NULL;
}

/* The local segment's cached descriptor goes stale whenever registrations change. */
static void invalidate_local(struct mc_engine *e) {
  pthread_mutex_lock(&e->seg_mu);
  struct mc_desc *d = e->segs[0]->desc;
  e->segs[0]->desc = NULL;
  pthread_mutex_unlock(&e->seg_mu);
  mc_desc_unref(d);
}

/* ------------------------------------------------------------------ batches */

#define BATCH_SLOT(id) ((size_t)((id)&0xffffffffu))

static struct mc_batch *batch_get(struct mc_engine *e, batch_id_t id) {
  struct mc_batch *b = NULL;
  pthread_mutex_lock(&e->batch_mu);
  size_t slot = BATCH_SLOT(id);
  if (id != INVALID_BATCH && slot < e->nbatch_slots && e->batches[slot] && e->batches[slot]->id == id)
    b = e->batches[slot];
  pthread_mutex_unlock(&e->batch_mu);
  return b;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size) {
  struct mc_engine *e = engine;
  if (!e || batch_size == 0 || batch_size > (1u << 24)) return INVALID_BATCH;
  struct mc_batch *b = mc_calloc(1, sizeof(*b));
  b->tasks = mc_try_calloc(batch_size, sizeof(*b->tasks));
  if (!b->tasks) {
    mc_free(b);
    return INVALID_BATCH;
  }
  b->cap = batch_size;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  pthread_mutex_lock(&e->batch_mu);
  size_t slot = 0;
  while (slot < e->nbatch_slots && e->batches[slot]) slot++;
  if (slot == e->nbatch_slots) {
    size_t n = e->nbatch_slots ? e->nbatch_slots * 2 : 64;
    e->batches = mc_realloc(e->batches, n * sizeof(*e->batches));
    memset(e->batches + e->nbatch_slots, 0, (n - e->nbatch_slots) * sizeof(*e->batches));
    e->nbatch_slots = n;
  }
  b->id = ((uint64_t)(++e->batch_gen & 0x7fffffffu) << 32) | slot;
  e->batches[slot] = b;
  pthread_mutex_unlock(&e->batch_mu);
  return b->id;
}

int freeBatchID(transfer_engine_t engine, batch_id_t id) {
  struct mc_engine *e = engine;
  if (!e) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b) return MC_TE_STATUS_INVALID_ARGUMENT;
  if (atomic_load(&b->pending) > 0) return MC_TE_STATUS_BATCH_BUSY;
  pthread_mutex_lock(&e->batch_mu);
  e->batches[BATCH_SLOT(id)] = NULL;
  pthread_mutex_unlock(&e->batch_mu);
  /* The last slice_done may still hold b->mu for its wake-up; take it once before freeing. */
  pthread_mutex_lock(&b->mu);
  pthread_mutex_unlock(&b->mu);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  mc_free(b->notify_name);
  mc_free(b->notify_msg);
  mc_free(b->tasks);
  mc_free(b);
  return 0;
}

static void queue_notify(struct mc_engine *e, int32_t target, const char *name, const char *msg) {
  struct mc_outnote *n = mc_calloc(1, sizeof(*n)), **pp;
  n->target = target;
  n->name = mc_strdup(name ? name : "");
  n->msg = mc_strdup(msg ? msg : "");
  pthread_mutex_lock(&e->out_mu);
  for (pp = &e->outbox; *pp; pp = &(*pp)->next) {
  }
  *pp = n;
  pthread_cond_signal(&e->out_cv);
  pthread_mutex_unlock(&e->out_mu);
}

static void task_finished(struct mc_engine *e, struct mc_batch *b, struct mc_task *t) {
  int failed = atomic_load(&t->failed) > 0;
  if (failed) atomic_store(&b->any_failed, 1);
  pthread_mutex_lock(&b->mu);
  /* pending drops before the state is published: a poller that sees the task terminal may free the
   * batch at once (freeBatchID then waits for b->mu, which we hold until we are done with b) */
  int last = atomic_fetch_sub(&b->pending, 1) == 1;
  atomic_store(&t->state, failed ? STATUS_FAILED : STATUS_COMPLETED);
  if (last) {
    if (b->has_notify && !atomic_load(&b->any_failed)) {
      queue_notify(e, b->notify_target, b->notify_name, b->notify_msg);
      b->has_notify = 0;
    }
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
}

void mc_slice_done(struct mc_slice *s, int ok, uint64_t bytes) {
  struct mc_task *t = s->task;
  if (ok) atomic_fetch_add(&t->transferred, bytes);
  else atomic_fetch_add(&t->failed, 1);
  struct mc_engine *e = s->eng;
  struct mc_batch *b = s->batch;
  mc_desc_unref(s->desc);
  mc_free(s);
  if (atomic_fetch_sub(&t->slices_left, 1) == 1) task_finished(e, b, t);
}

static int validate_requests(struct mc_engine *e, struct transfer_request *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (r[i].opcode != OPCODE_READ && r[i].opcode != OPCODE_WRITE) return MC_TE_STATUS_INVALID_ARGUMENT;
    if (r[i].length && !local_registered(e, r[i].source, r[i].length)) return MC_TE_STATUS_ADDRESS_NOT_REGISTERED;
  }
  return 0;
}

/* Large TCP requests are cut into pieces (MC_TCP_SPLIT_SIZE, default 1 MiB, 0 = never; at most 16) so
 * that one request uses several lanes: a single connection is capped at single-stream speed. A READ alone
 * in its submission and larger than that is cut at a quarter of it: its receive copy is then spread over
 * the lane receivers (one stream through the lane threads measured 1.8-2.0 GB/s against 2.6 in four
 * pieces, bench/RESULTS.md, third session). One of at most MC_TCP_SPLIT_SIZE goes whole: the TCP
 * transport's direct I/O carries it in the caller's thread without any hand-off (1 MiB 2.3-2.5 -> 2.6-2.9
 * GB/s against four pieces, fourth session). In batches the lanes are kept busy by the other requests and
 * whole requests do better. */
static uint32_t slice_count(struct mc_engine *e, int path, const struct transfer_request *r, size_t n) {
  uint64_t split = e->tcp_split, len = r->length;
  if (n == 1 && r->opcode == OPCODE_READ && len > split) split /= 4;
  if (path != MC_PATH_TCP || !split || len <= split) return 1;
  uint64_t k = (len + split - 1) / split;
  return k > 16 ? 16 : (uint32_t)k;
}

static struct mc_slice *make_slice(struct mc_engine *e, struct mc_batch *b, struct mc_task *t,
                                   const struct transfer_request *r, struct mc_desc *d) {
  struct mc_slice *s = mc_calloc(1, sizeof(*s));
  s->eng = e;
  s->batch = b;
  s->task = t;
  s->desc = d;
  s->opcode = r->opcode;
  s->local = r->source;
  s->remote = r->target_offset;
  s->len = r->length;
  s->start_ns = mc_now_ns();
  return s;
}

/* Groups slices by path and hands each group to its transport. */
static void dispatch(struct mc_engine *e, struct mc_slice **sl, int *paths, size_t n) {
  static const char *names[] = {NULL, "tcp", "shm"};
  struct mc_slice **group = mc_malloc((n ? n : 1) * sizeof(*group));
  for (int p = MC_PATH_TCP; p <= MC_PATH_SHM; p++) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (paths[i] == p) group[k++] = sl[i];
    if (!k) continue;
    struct mc_transport *t = mc_engine_transport(e, names[p]);
    if (t) t->ops->submit(t, group, k);
    else
      for (size_t i = 0; i < k; i++) mc_slice_done(group[i], 0, 0);
  }
  mc_free(group);
}

static int submit(struct mc_engine *e, batch_id_t id, struct transfer_request *r, size_t n,
                  const notify_msg_t *notify) {
  if (!e || (!r && n)) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b) return MC_TE_STATUS_INVALID_ARGUMENT;
  int rc = validate_requests(e, r, n);
  if (rc) return rc;
  struct mc_desc **descs = mc_calloc(n ? n : 1, sizeof(*descs));
  int *paths = mc_calloc(n ? n : 1, sizeof(int));
  for (size_t i = 0; i < n && !rc; i++) {
    descs[i] = seg_desc(e, r[i].target_id, &paths[i]);
    if (!descs[i]) rc = MC_TE_STATUS_INVALID_ARGUMENT;
    else if (paths[i] == MC_PATH_NONE) rc = MC_TE_STATUS_NOT_SUPPORTED_TRANSPORT;
  }
  size_t first = atomic_load(&b->ntasks);
  if (!rc && (n > b->cap || first > b->cap - n)) rc = MC_TE_STATUS_TOO_MANY_REQUESTS;
  if (rc) {
    for (size_t i = 0; i < n; i++) mc_desc_unref(descs[i]);
    mc_free(descs);
    mc_free(paths);
    return rc;
  }
  if (notify) {
    pthread_mutex_lock(&b->mu);
    mc_free(b->notify_name);
    mc_free(b->notify_msg);
    b->has_notify = 1;
    b->notify_target = n ? r[0].target_id : 0;
    b->notify_name = mc_strdup(notify->name ? notify->name : "");
    b->notify_msg = mc_strdup(notify->msg ? notify->msg : "");
    pthread_mutex_unlock(&b->mu);
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += r[i].length ? slice_count(e, paths[i], &r[i], n) : 0;
  struct mc_slice **sl = mc_malloc((total ? total : 1) * sizeof(*sl));
  int *spaths = mc_malloc((total ? total : 1) * sizeof(int));
  size_t ns = 0;
  atomic_fetch_add(&b->pending, (int)n);
  atomic_store(&b->ntasks, first + n);
  for (size_t i = 0; i < n; i++) {
    struct mc_task *t = &b->tasks[first + i];
    if (r[i].length == 0) { /* completes without I/O */
      atomic_store(&t->slices_left, 1);
      mc_desc_unref(descs[i]);
      task_finished(e, b, t);
      continue;
    }
    uint32_t k = slice_count(e, paths[i], &r[i], n);
    atomic_store(&t->slices_left, (int)k);
    uint64_t piece = r[i].length / k;
    for (uint32_t j = 0; j < k; j++) { /* pieces of one request travel on different lanes */
      struct transfer_request part = r[i];
      part.source = (char *)r[i].source + j * piece;
      part.target_offset = r[i].target_offset + j * piece;
      part.length = j + 1 < k ? piece : r[i].length - j * piece;
      if (j) mc_desc_ref(descs[i]);
      spaths[ns] = paths[i];
      sl[ns++] = make_slice(e, b, t, &part, descs[i]);
    }
  }
  dispatch(e, sl, spaths, ns);
  mc_free(spaths);
  if (n == 0 && notify) { /* an empty batch is complete at once */
    pthread_mutex_lock(&b->mu);
    if (atomic_load(&b->pending) == 0 && b->has_notify) {
      queue_notify(e, b->notify_target, b->notify_name, b->notify_msg);
      b->has_notify = 0;
    }
    pthread_mutex_unlock(&b->mu);
  }
  mc_free(sl);
  mc_free(descs);
  mc_free(paths);
  return 0;
}

int submitTransfer(transfer_engine_t engine, batch_id_t id, struct transfer_request *entries, size_t count) {
  return submit(engine, id, entries, count, NULL);
}

int submitTransferWithNotify(transfer_engine_t engine, batch_id_t id, struct transfer_request *entries,
                             size_t count, notify_msg_t notify) {
  return submit(engine, id, entries, count, &notify);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t id, size_t task_id, struct transfer_status *st) {
  struct mc_engine *e = engine;
  if (!e || !st) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_batch *b = batch_get(e, id);
  if (!b || task_id >= atomic_load(&b->ntasks)) return MC_TE_STATUS_INVALID_ARGUMENT;
  struct mc_task *t = &b->tasks[task_id];
  st->status = atomic_load(&t->state);
  st->transferred_bytes = atomic_load(&t->transferred);
  if (st->status == STATUS_COMPLETED || st->status == STATUS_FAILED) t->observed = 1;
  return 0;
}

int mc_te_batch_status(transfer_engine_t engine, batch_id_t id) {
  struct mc_engine *e = engine;
  struct mc_batch *b = e ? batch_get(e, id) : NULL;
  if (!b) return STATUS_INVALID;
  if (atomic_load(&b->any_failed)) return STATUS_FAILED;
  return atomic_load(&b->pending) == 0 ? STATUS_COMPLETED : STATUS_WAITING;
}

int mc_te_wait_batch(transfer_engine_t engine, batch_id_t id, int timeout_ms) {
  struct mc_engine *e = engine;
  struct mc_batch *b = e ? batch_get(e, id) : NULL;
  if (!b) return STATUS_INVALID;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
  ts.tv_sec += (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  /* small transfers finish within a wake-up's cost: poll first (adaptive, per engine) */
  if (timeout_ms) mc_spin_until_zero(&b->pending, &e->wait_spin);
  pthread_mutex_lock(&b->mu);
  while (atomic_load(&b->pending) > 0) {
    if (timeout_ms < 0) pthread_cond_wait(&b->cv, &b->mu);
    else if (pthread_cond_timedwait(&b->cv, &b->mu, &ts) == ETIMEDOUT) break;
  }
  pthread_mutex_unlock(&b->mu);
  return mc_te_batch_status(e, id);
}

/* ------------------------------------------------------------------ notifications */

/* Queues a received notification: 0, or -1 when the inbox already holds MC_NOTIFY_INBOX_MAX messages or
 * MC_NOTIFY_INBOX_MAX_BYTES bytes that the application has not read yet (the sender is told). */
static int inbox_push(struct mc_engine *e, const char *name, const char *msg) {
  size_t bytes = strlen(name) + strlen(msg) + 2;
  pthread_mutex_lock(&e->inbox_mu);
  if (e->ninbox >= e->inbox_max || e->inbox_bytes + bytes > e->inbox_max_bytes) {
    int n = e->ninbox;
    pthread_mutex_unlock(&e->inbox_mu);
    LOG_WARN_LIMITED("notify inbox full (%d unread messages); notification refused", n);
    return -1;
  }
  e->inbox_bytes += bytes;
  if (e->ninbox == e->capinbox) {
    e->capinbox = e->capinbox ? e->capinbox * 2 : 16;
    e->inbox = mc_realloc(e->inbox, (size_t)e->capinbox * sizeof(*e->inbox));
  }
  e->inbox[e->ninbox].name = mc_strdup(name);
  e->inbox[e->ninbox].msg = mc_strdup(msg);
  e->ninbox++;
  pthread_mutex_unlock(&e->inbox_mu);
  return 0;
}

notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size) {
  struct mc_engine *e = engine;
  if (size) *size = 0;
  if (!e || !size) return NULL;
  pthread_mutex_lock(&e->inbox_mu);
  notify_msg_t *r = e->inbox;
  *size = e->ninbox;
  e->inbox = NULL;
  e->ninbox = e->capinbox = 0;
  e->inbox_bytes = 0;
  pthread_mutex_unlock(&e->inbox_mu);
  return *size ? r : NULL;
}

int freeNotifsMsgBuf(notify_msg_t *msgs, int size) {
  for (int i = 0; msgs && i < size; i++) {
    mc_free(msgs[i].name);
    mc_free(msgs[i].msg);
  }
  mc_free(msgs);
  return 0;
}

/* The control RPC endpoint of a segment: from its descriptor, its rpc_meta key, or its P2P name. */
static int seg_endpoint(struct mc_engine *e, int32_t id, char *host, size_t hl, uint16_t *port) {
  int path;
  struct mc_desc *d = seg_desc(e, id, &path);
  if (!d) return ERR_METADATA;
  int rc = 0;
  if (d->ip && *d->ip && d->rpc_port) {
    snprintf(host, hl, "%s", d->ip);
    *port = d->rpc_port;
  } else if (e->p2p) {
    rc = mc_split_host_port(d->name, host, hl, port, 12001) ? ERR_INVALID_ARGUMENT : 0;
  } else {
    char key[512], *v = NULL;
    mc_meta_rpc_key(key, sizeof(key), d->name);
    rc = mc_meta_get(e->meta, key, &v) ? ERR_METADATA : 0;
    json_t *o = rc ? NULL : json_loads(v, 0, NULL);
    const char *ip = json_string_value(json_object_get(o, "ip_or_host_name"));
    json_int_t p = json_integer_value(json_object_get(o, "rpc_port"));
    if (!rc && (!ip || p <= 0 || p > 65535)) rc = ERR_MALFORMED_JSON;
    if (!rc) {
      snprintf(host, hl, "%s", ip);
      *port = (uint16_t)p;
    }
    json_decref(o);
    mc_free(v);
  }
  mc_desc_unref(d);
  return rc;
}

static int send_notify(struct mc_engine *e, int32_t target, const char *name, const char *msg) {
  char host[256], *reply = NULL;
  uint16_t port;
  int rc = seg_endpoint(e, target, host, sizeof(host), &port);
  if (rc) return rc;
  json_t *o = json_pack("{s:s, s:s}", "name", name, "notify_msg", msg);
  char *body = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  rc = mc_rpc_call(host, port, MC_RPC_NOTIFY, body, &reply, RPC_CALL_TIMEOUT_MS);
  free(body);
  int full = !rc && reply && strstr(reply, "\"inbox full\"");
  mc_free(reply);
  if (rc) LOG_WARN("notify to %s:%u failed: %s", host, port, strerror(-rc));
  return rc ? ERR_SOCKET : full ? ERR_TOO_MANY_REQUESTS : 0;
}

static void *notifier_main(void *arg) {
  struct mc_engine *e = arg;
  pthread_mutex_lock(&e->out_mu);
  for (;;) {
    while (!e->outbox && !e->out_stop) pthread_cond_wait(&e->out_cv, &e->out_mu);
    struct mc_outnote *n = e->outbox;
    if (!n) break; /* stopping with nothing left */
    e->outbox = n->next;
    pthread_mutex_unlock(&e->out_mu);
    send_notify(e, n->target, n->name, n->msg);
    mc_free(n->name);
    mc_free(n->msg);
    mc_free(n);
    pthread_mutex_lock(&e->out_mu);
  }
  pthread_mutex_unlock(&e->out_mu);
  return NULL;
}

int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify) {
  struct mc_engine *e = engine;
  if (!e || target_id > INT32_MAX) return e ? ERR_METADATA : ERR_INVALID_ARGUMENT;
  return send_notify(e, (int32_t)target_id, notify.name ? notify.name : "", notify.msg ? notify.msg : "");
}

/* ------------------------------------------------------------------ control RPC */

static void rpc_handler(void *ctx, int type, const char *req, size_t len, char **reply) {
  struct mc_engine *e = ctx;
  json_t *o;
  switch (type) {
    case MC_RPC_METADATA:
      *reply = mc_engine_describe(e);
      return;
    case MC_RPC_NOTIFY: {
      o = json_loads(req, 0, NULL);
      const char *name = json_string_value(json_object_get(o, "name"));
      const char *msg = json_string_value(json_object_get(o, "notify_msg"));
      int rc = name && msg ? inbox_push(e, name, msg) : -2;
      if (rc == -2) LOG_WARN("control RPC: malformed notify ignored");
      json_decref(o);
      *reply = mc_strdup(rc == 0    ? "{\"name\":\"\",\"notify_msg\":\"success\"}"
                         : rc == -1 ? "{\"name\":\"\",\"notify_msg\":\"inbox full\"}"
                                    : "{\"name\":\"\",\"notify_msg\":\"malformed\"}");
      return;
    }
    case MC_RPC_PROBE:
      *reply = mc_strdup("{\"status\":\"success\"}");
      return;
    default: /* Connection: RDMA handshakes are not served by this build */
      *reply = mc_strdup("{\"reply_msg\":\"no RDMA transport installed\"}");
  }
}
