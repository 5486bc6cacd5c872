/* The engine core: the process's live engines, create/destroy, transports and the local descriptor. The
 * rest of the core is one concern per file (engine_internal.h): registrations (engine_mem.c), the segment
 * table (engine_seg.c), batches (engine_batch.c), notifications and the control RPC handler
 * (engine_notify.c). It routes slices to transports and never touches sockets itself (the control RPC
 * lives in net/). */

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
#include "meta/metadata_server.h"



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
int mc_eng_publish_rpc_meta(struct mc_engine *e) {
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
  e->rpc = mc_rpc_server_start(fixed, mc_eng_rpc_handler, e, &e->rpc_port);
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

struct mc_seg *mc_eng_new_seg(struct mc_engine *e, const char *name, struct mc_desc *d, struct mc_transport *tp) {
  struct mc_seg *s = mc_calloc(1, sizeof(*s));
  s->name = mc_strdup(name);
  s->desc = d;
  s->tp = tp;
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
  e->same_host = !e->force_tcp && mc_knob_bool(MC_KNOB_SAME_HOST_PATH);
  e->inbox_max = (int)mc_knob_long(MC_KNOB_NOTIFY_INBOX_MAX);
  e->inbox_max_bytes = (size_t)mc_knob_long(MC_KNOB_NOTIFY_INBOX_MAX_BYTES);
  if (mc_meta_open(conn, &e->meta) || init_rpc(e, local_server_name)) goto fail;
  mc_eng_new_seg(e, e->name, NULL, NULL);
  if (pthread_create(&e->notifier, NULL, mc_eng_notifier_main, e)) goto fail_rpc;
  e->prefault = mc_prefault_create(e);
  local_add(e);
  mc_lifecycle_add(&e->lc, engine_teardown);
  if (!e->p2p && mc_eng_publish_rpc_meta(e)) {
    destroyTransferEngine(e);
    return NULL;
  }
  if (auto_discover) {
    if (e->force_tcp) LOG_INFO("MC_FORCE_TCP is set, using TCP transport only");
    else LOG_INFO("Using TCP transport (no HCA detected)");
    if (!installTransport(e, mc_transport_fallback()->name, NULL)) {
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

/* Installs the transport of a table row once, keeping tps in the table's order; NULL with the reason in why
 * when it cannot be installed. */
static struct mc_transport *install_one(struct mc_engine *e, const struct mc_transport_ops *ops, void **args,
                                        char *why, size_t why_len) {
  struct mc_transport *t = NULL;
  int rank = mc_transport_rank(ops);
  pthread_mutex_lock(&e->tp_mu);
  int i = 0;
  while (i < e->ntps && mc_transport_rank(e->tps[i]->ops) < rank) i++;
  if (i < e->ntps && e->tps[i]->ops == ops) {
    t = e->tps[i];
  } else if (e->ntps == MC_MAX_TRANSPORTS) {
    snprintf(why, why_len, "%d transports installed already", MC_MAX_TRANSPORTS);
  } else if ((e->install_args = args, ops->init(e, &t, why, why_len)) == 0) {
    memmove(&e->tps[i + 1], &e->tps[i], (size_t)(e->ntps - i) * sizeof(e->tps[0]));
    e->tps[i] = t;
    e->ntps++;
  } else {
    t = NULL;
  }
  e->install_args = NULL;
  pthread_mutex_unlock(&e->tp_mu);
  return t;
}

/* The same-host transports, installed with every network transport unless MC_FORCE_TCP=1 or
 * MC_SAME_HOST_PATH=0 (docs/transfer-engine.md, "Path choice"). 0, or -1 when one of them cannot be. */
static int install_same_host(struct mc_engine *e) {
  char why[256];
  for (int i = 0; i < mc_transport_rows(); i++)
    if (mc_transport_row(i)->same_host && !install_one(e, mc_transport_row(i), NULL, why, sizeof(why))) return -1;
  return 0;
}

/* A network transport that cannot be installed is replaced by the fallback (tcp), logged with the reason and
 * counted (te_transport_fallback_total, mc_te_metrics). */
static struct mc_transport *fall_back(struct mc_engine *e, const struct mc_transport_ops *asked, const char *why) {
  const struct mc_transport_ops *fb = mc_transport_fallback();
  char fb_why[256];
  struct mc_transport *t = install_one(e, fb, NULL, fb_why, sizeof(fb_why));
  if (!t) {
    LOG_ERROR("installTransport: %s is unavailable (%s) and so is %s (%s)", asked->name, why, fb->name, fb_why);
    return NULL;
  }
  LOG_WARN("installTransport: using protocol %s: %s requested but %s", fb->name, asked->name, why);
  atomic_fetch_add(&e->fallbacks[mc_transport_rank(asked)], 1);
  return t;
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args) {
  struct mc_engine *e = engine;
  if (!e || !proto) return NULL;
  const struct mc_transport_ops *ops = mc_transport_lookup(proto);
  if (!ops) {
    LOG_ERROR("installTransport: unsupported protocol '%s'", proto);
    return NULL;
  }
  /* a network transport comes with the same-host shortcut (docs/transfer-engine.md, "Path choice") */
  if (!ops->same_host && e->same_host && install_same_host(e)) return NULL;
  int fallible = !ops->same_host && ops != mc_transport_fallback(); /* may fall back to tcp */
  char why[256] = "MC_FORCE_TCP is set";
  struct mc_transport *t = NULL;
  if (!fallible || !e->force_tcp) {
    char init_why[200] = "";
    t = install_one(e, ops, args, init_why, sizeof(init_why));
    snprintf(why, sizeof(why), "unavailable: %s", init_why);
  }
  if (!t && fallible) t = fall_back(e, ops, why);
  if (!t) return NULL;
  pthread_mutex_lock(&e->reg_mu); /* replay registrations into the new transport */
  mc_eng_mem_changed(e);
  pthread_mutex_unlock(&e->reg_mu);
  mc_engine_publish(e);
  return t;
}

const char *mc_te_transport_name(transport_t transport) {
  return transport ? ((struct mc_transport *)transport)->ops->name : NULL;
}

int uninstallTransport(transfer_engine_t engine, const char *proto) { return 0; }

/* ------------------------------------------------------------------ local descriptor */

/* The descriptor's "protocol": the first installed network transport in the table's order; the same-host one
 * when only that is installed (peers then reach us from this host only); the fallback's name before any. */
static const char *local_protocol(struct mc_engine *e) {
  const char *net = NULL, *local = NULL;
  pthread_mutex_lock(&e->tp_mu);
  for (int i = 0; i < e->ntps; i++) {
    const struct mc_transport_ops *o = e->tps[i]->ops;
    if (o->same_host && !local) local = o->name;
    if (!o->same_host && !net) net = o->name;
  }
  pthread_mutex_unlock(&e->tp_mu);
  return net ? net : local ? local : mc_transport_fallback()->name;
}

char *mc_engine_describe(struct mc_engine *e) {
  char ts[40];
  mc_timestamp(ts, sizeof(ts));
  json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:i}", "name", e->name, "protocol",
                        local_protocol(e), "timestamp", ts, "host_id", mc_host_id(), "pid", (int)getpid(),
                        "ip_or_host_name", e->ip, "rpc_port", (int)e->rpc_port, "tcp_data_port", 0);
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
  pthread_mutex_lock(&e->tp_mu); /* after the buffers: a transport may add to them (rdma: keys) */
  for (int i = 0; i < e->ntps; i++)
    if (e->tps[i]->ops->describe) e->tps[i]->ops->describe(e->tps[i], d);
  pthread_mutex_unlock(&e->tp_mu);
  char *s = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  return s;
}

int mc_engine_publish(struct mc_engine *e) {
  mc_eng_invalidate_local(e);
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
