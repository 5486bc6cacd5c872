/* Notifications (the inbox of received ones, the notifier thread that sends queued ones) and the
 * engine's control RPC handler (docs/transfer-engine.md). */
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
  struct mc_transport *tp;
  struct mc_desc *d = mc_eng_seg_desc(e, id, &tp);
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
  rc = mc_rpc_call(host, port, MC_RPC_NOTIFY, body, &reply, MC_ENG_RPC_CALL_TIMEOUT_MS);
  free(body);
  int full = !rc && reply && strstr(reply, "\"inbox full\"");
  mc_free(reply);
  if (rc) LOG_WARN("notify to %s:%u failed: %s", host, port, strerror(-rc));
  return rc ? ERR_SOCKET : full ? ERR_TOO_MANY_REQUESTS : 0;
}

void *mc_eng_notifier_main(void *arg) {
  mc_thread_name("mc-te-notify");
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

void mc_eng_rpc_handler(void *ctx, int type, const char *req, size_t len, char **reply) {
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
    default: { /* Connection: the RDMA handshake, served by the transport that answers it */
      struct mc_transport *t = NULL;
      pthread_mutex_lock(&e->tp_mu);
      for (int i = 0; i < e->ntps && !t; i++)
        if (e->tps[i]->ops->connection) t = e->tps[i];
      pthread_mutex_unlock(&e->tp_mu); /* installed transports stay until the engine goes */
      *reply = t ? t->ops->connection(t, req, len) : mc_strdup("{\"reply_msg\":\"no RDMA transport installed\"}");
    }
  }
}
