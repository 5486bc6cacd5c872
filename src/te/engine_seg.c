/* The engine's segment table: opening remote segments by name, their descriptors and the path
 * (transport) each takes, refresh and removal (docs/transfer-engine.md). */
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

/* ------------------------------------------------------------------ segments */

/* The transport a segment is reached by (docs/transfer-engine.md, "Path choice"): the first installed one, in
 * the table's order, whose reachable() says yes. The descriptor's protocol must be one this build speaks; a
 * descriptor that offers only the same-host path is never reached over the network. NULL: none can. */
static struct mc_transport *choose_transport(struct mc_engine *e, const struct mc_desc *d) {
  const struct mc_transport_ops *offered = mc_transport_lookup(d->protocol);
  if (!offered || !offered->reachable) return NULL;
  struct mc_transport *tps[MC_MAX_TRANSPORTS];
  pthread_mutex_lock(&e->tp_mu); /* installed transports stay until the engine goes: probe without the lock */
  int n = e->ntps;
  memcpy(tps, e->tps, (size_t)n * sizeof(tps[0]));
  pthread_mutex_unlock(&e->tp_mu);
  for (int i = 0; i < n; i++)
    if ((tps[i]->ops->same_host || !offered->same_host) && tps[i]->ops->reachable(tps[i], d)) return tps[i];
  return NULL;
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
    rc = mc_rpc_call(host, port, MC_RPC_METADATA, mine, &text, MC_ENG_RPC_CALL_TIMEOUT_MS);
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
  if (s->tp) LOG_INFO("segment %s: using protocol %s", s->name, s->tp->ops->name);
  else LOG_WARN("segment %s: no installed transport can reach it (protocol %s)", s->name, s->desc->protocol);
}

/* Installs a freshly fetched descriptor into the table (new entry or replacement). */
static int32_t adopt_desc(struct mc_engine *e, const char *name, struct mc_desc *d) {
  struct mc_transport *tp = choose_transport(e, d);
  pthread_mutex_lock(&e->seg_mu);
  struct mc_seg *s = find_seg(e, name);
  int changed = 1;
  if (!s) {
    s = mc_eng_new_seg(e, name, d, tp);
  } else if (s->desc && !strcmp(s->desc->canon, d->canon)) {
    mc_desc_unref(d); /* unchanged (timestamps differ only) */
    changed = 0;
  } else {
    mc_desc_unref(s->desc);
    s->desc = d;
    s->tp = tp;
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
    s->tp = NULL;
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

/* The descriptor and transport for a segment id, the descriptor referenced; the local segment describes this
 * engine. */
struct mc_desc *mc_eng_seg_desc(struct mc_engine *e, int32_t id, struct mc_transport **tp) {
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
      return mc_eng_seg_desc(e, id, tp);
    }
  }
  pthread_mutex_lock(&e->seg_mu);
  if (id >= 0 && (size_t)id < e->nsegs && e->segs[id]->desc) {
    d = e->segs[id]->desc;
    *tp = e->segs[id]->tp;
    mc_desc_ref(d);
  } else {
    d = NULL;
  }
  pthread_mutex_unlock(&e->seg_mu);
  return d;
}

char *mc_te_segment_json(transfer_engine_t engine, segment_id_t id) {
  struct mc_engine *e = engine;
  struct mc_transport *tp;
  if (!e) return NULL;
  struct mc_desc *d = mc_eng_seg_desc(e, id, &tp);
  char *r = d ? mc_strdup(d->canon) : NULL;
  mc_desc_unref(d);
  return r;
}

const char *mc_te_segment_path(transfer_engine_t engine, segment_id_t id) {
  struct mc_engine *e = engine;
  struct mc_transport *tp = NULL;
  if (!e) return NULL;
  struct mc_desc *d = mc_eng_seg_desc(e, id, &tp);
  mc_desc_unref(d);
  return d && tp ? tp->ops->name : NULL;
}

int mc_te_republish(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  if (!e) return ERR_INVALID_ARGUMENT;
  if (e->p2p) return 0;
  int rc = mc_eng_publish_rpc_meta(e) ? ERR_METADATA : 0;
  int rc2 = mc_engine_publish(e);
  return rc ? rc : rc2;
}

const char *mc_te_local_segment_name(transfer_engine_t engine) {
  return engine ? ((struct mc_engine *)engine)->name : NULL;
}

/* The local segment's cached descriptor goes stale whenever registrations change. */
void mc_eng_invalidate_local(struct mc_engine *e) {
  pthread_mutex_lock(&e->seg_mu);
  struct mc_desc *d = e->segs[0]->desc;
  e->segs[0]->desc = NULL;
  pthread_mutex_unlock(&e->seg_mu);
  mc_desc_unref(d);
}
