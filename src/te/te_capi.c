/* The small diagnostic corners of the upstream C API (docs/transfer-engine.md, "C API"). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/util.h"
#include "mooncake/runtime.h"
#include "te/engine_internal.h"

const char *mooncake_version(void) { return MOONCAKE_VERSION_STRING; }

int discoverTopology(transfer_engine_t engine) { return engine ? 0 : ERR_INVALID_ARGUMENT; }

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len) {
  struct mc_engine *e = engine;
  if (e && buf_out && buf_len) snprintf(buf_out, buf_len, "%s:%u", e->ip, e->rpc_port);
  return 0;
}

int warmupEfaSegment(transfer_engine_t engine, const char *segment_name) { return 0; }

int getNicLoadStats(transfer_engine_t engine, nic_load_stat_t *stats, size_t *count) {
  if (!engine || !count) return -1;
  *count = 0; /* no NICs are driven by the TCP and shared-memory transports */
  return 0;
}

/* The JSON form through jansson: segment names are whatever peers published (docs/transfer-engine.md). */
static void links_json(struct mc_engine *e, char *buf_out, size_t buf_len) {
  json_t *links = json_array();
  pthread_mutex_lock(&e->seg_mu);
  for (size_t i = 1; i < e->nsegs; i++) {
    struct mc_seg *s = e->segs[i];
    json_array_append_new(links, json_pack("{s:i, s:o, s:s}", "id", s->id, "name", mc_json_text(s->name), "path",
                                           s->tp ? s->tp->ops->name : "none"));
  }
  pthread_mutex_unlock(&e->seg_mu);
  json_t *o = json_pack("{s:o, s:o}", "segment", mc_json_text(e->name), "links", links);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  snprintf(buf_out, buf_len, "%s", text ? text : "");
  free(text);
  json_decref(o);
}

int showLinks(transfer_engine_t engine, char *buf_out, size_t buf_len, int json) {
  struct mc_engine *e = engine;
  if (!e || !buf_out || !buf_len) return -1;
  if (json) {
    links_json(e, buf_out, buf_len);
    return 0;
  }
  size_t off = (size_t)snprintf(buf_out, buf_len, "segment %s\n", e->name);
  pthread_mutex_lock(&e->seg_mu);
  for (size_t i = 1; i < e->nsegs && off < buf_len; i++) {
    struct mc_seg *s = e->segs[i];
    off += (size_t)snprintf(buf_out + off, buf_len - off, "%d %s %s\n", s->id, s->name,
                            s->tp ? s->tp->ops->name : "none");
  }
  pthread_mutex_unlock(&e->seg_mu);
  return 0;
}

/* The engine's Prometheus metrics (docs/transfer-engine.md, "Path choice"): per network transport that may be
 * asked for and fall back, how often it did. */
int mc_te_metrics(transfer_engine_t engine, char *buf_out, size_t buf_len) {
  struct mc_engine *e = engine;
  if (!e || (!buf_out && buf_len)) return ERR_INVALID_ARGUMENT;
  char text[MC_TRANSPORT_ROWS_MAX * 96 + 256];
  size_t n = (size_t)snprintf(text, sizeof(text),
                              "# HELP te_transport_fallback_total Transports asked for that could not be installed, %s "
                              "installed instead\n# TYPE te_transport_fallback_total counter\n",
                              mc_transport_fallback()->name);
  for (int i = 0; i < mc_transport_rows() && n < sizeof(text); i++) {
    const struct mc_transport_ops *o = mc_transport_row(i);
    if (!o->same_host && o != mc_transport_fallback())
      n += (size_t)snprintf(text + n, sizeof(text) - n, "te_transport_fallback_total{requested=\"%s\"} %llu\n",
                            o->name, (unsigned long long)atomic_load(&e->fallbacks[i]));
  }
  return buf_len ? snprintf(buf_out, buf_len, "%s", text) : (int)strlen(text);
}

/* Graceful shutdown: the engine's keys are deleted on SIGINT/SIGTERM/SIGHUP before the signal's default
 * action ends the process (common/lifecycle.h; docs/store-client.md, "Process lifecycle: exit and
 * signals"). A signal the application handles or ignores is left to it. destroyTransferEngine takes the
 * engine out of the registry. */
void enableGracefulShutdown(transfer_engine_t engine) {
  struct mc_engine *e = engine;
  if (e) mc_lifecycle_watch(&e->lc, MC_LIFECYCLE_ON_SIGNAL);
}
