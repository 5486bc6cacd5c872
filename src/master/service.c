/* Master lifecycle: state, the data core's hooks (core.h), the background threads, the embedded metadata
 * server and the cleanup target for dead clients' TE metadata keys. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "master/ha.h"
#include "master_core/holder_feed.h"
#include "master/master_int.h"
#include "master_core/metrics.h"
#include "mooncake/store_errors.h"
#include "net/mrpc.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"

/* The metadata service to clean up on when the server is not embedded: --metadata_server, else
 * $MOONCAKE_TE_META_DATA_SERVER, else "metadata_server" of the JSON at $MOONCAKE_CONFIG_PATH. */
static char *cleanup_target(const struct mc_master_cfg *c) {
  if (c->metadata_server && *c->metadata_server) return mc_strdup(c->metadata_server);
  const char *env = getenv("MOONCAKE_TE_META_DATA_SERVER");
  if (env && *env) return mc_strdup(env);
  const char *path = getenv("MOONCAKE_CONFIG_PATH");
  json_t *root = path && *path ? json_load_file(path, 0, NULL) : NULL;
  const char *v = json_string_value(json_object_get(root, "metadata_server"));
  char *r = v && *v ? mc_strdup(v) : NULL;
  json_decref(root);
  return r;
}

static int open_metadata(struct mc_master *m) {
  const struct mc_master_cfg *c = &m->cfg;
  if (c->enable_http_metadata_server) {
    m->meta_server = mc_meta_server_start(c->http_metadata_server_host, (uint16_t)c->http_metadata_server_port, NULL);
    if (!m->meta_server) {
      LOG_ERROR("cannot start the HTTP metadata server on %s:%lld", c->http_metadata_server_host,
                (long long)c->http_metadata_server_port);
      return -1;
    }
    LOG_INFO("HTTP metadata server listening on %s:%u", c->http_metadata_server_host,
             (unsigned)mc_meta_server_port(m->meta_server));
    return 0;
  }
  if (!c->enable_metadata_cleanup_on_timeout) return 0;
  char *conn = cleanup_target(c);
  if (conn && !mc_meta_is_p2p(conn) && mc_meta_open(conn, &m->meta))
    LOG_WARN("metadata cleanup disabled: cannot open metadata service %s", conn);
  else if (conn && m->meta)
    LOG_INFO("dead clients' TE metadata keys will be deleted from %s", conn);
  mc_free(conn);
  return 0;
}

static int start_threads(struct mc_master *m) {
  if (pthread_create(&m->evict_th, NULL, mc_evict_main, m)) return -1;
  if (pthread_create(&m->house_th, NULL, mc_housekeeping_main, m)) {
    pthread_mutex_lock(&m->bg_mu);
    m->stopping = 1;
    pthread_mutex_unlock(&m->bg_mu);
    pthread_join(m->evict_th, NULL);
    return -1;
  }
  m->threads_started = 1;
  return 0;
}

static struct mc_master *alloc_master(const struct mc_master_cfg *cfg) {
  struct mc_master *m = mc_calloc(1, sizeof(*m));
  m->cfg = *cfg;
  /* what the data core asks of this layer (core.h), fixed before its threads start */
  m->hooks = (struct mc_core_hooks){.probe = mc_probe_alive,
                                    .endpoint_expired = mc_te_endpoint_expired,
                                    .segment_remounted = mc_restore_segment,
                                    .report_metrics = mc_report_metrics};
  /* this master's incarnation: wall-clock microseconds at start, so a restart (even within the same
   * second) always shows a new value; clients compare it after long reads (docs/store-client.md) */
  m->view_version = mc_wall_us();
  /* without HA the one master serves from the start; with HA the election opens the gate (ha.c) */
  m->serve_until_ns = cfg->enable_ha ? 0 : UINT64_MAX;
  atomic_init(&m->next_seq, 1);
  m->ms = mc_calloc(1, sizeof(*m->ms));
  mc_metrics_init(m->ms);
  mc_objects_init(m);
  m->tasks = mc_tasks_new();
  mc_extents_init(m);
  pthread_rwlockattr_t a;
  pthread_rwlockattr_init(&a);
  pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&m->seg_mu, &a);
  pthread_rwlockattr_destroy(&a);
  pthread_mutex_init(&m->discard_mu, NULL);
  pthread_mutex_init(&m->timer_mu, NULL);
  pthread_mutex_init(&m->bg_mu, NULL);
  pthread_cond_init(&m->bg_cv, NULL);
  return m;
}

int mc_master_create(const struct mc_master_cfg *cfg, struct mc_master **out) {
  struct mc_master *m = alloc_master(cfg);
  *out = NULL;
  /* record numbers above every earlier incarnation's (docs/ha.md, "Holder indexes") */
  m->hfeed = mc_hidx_feed_start(mc_wall_us());
  if (cfg->enable_ha && !(m->ha = mc_ha_new(m))) {
    mc_master_destroy(m);
    return MC_INTERNAL_ERROR;
  }
  if (cfg->restore_snapshot && *cfg->restore_snapshot) {
    char err[512];
    int rc = mc_restore_load(cfg->restore_snapshot, &m->restore, err, sizeof(err));
    if (rc) {
      LOG_ERROR("%s", err); /* (the log is stderr, or the file stderr goes to with --log_dir) */
      mc_master_destroy(m);
      return rc;
    }
    uint64_t seq = mc_restore_next_seq(m->restore);
    if (seq > atomic_load(&m->next_seq)) atomic_store(&m->next_seq, seq);
  }
  if (!m->hfeed || open_metadata(m) || start_threads(m)) {
    mc_master_destroy(m);
    return MC_INTERNAL_ERROR;
  }
  *out = m;
  return 0;
}

uint16_t mc_master_meta_port(const struct mc_master *m) {
  return m->meta_server ? mc_meta_server_port(m->meta_server) : 0;
}

static int rpc_handler(void *ctx, void **conn_ctx, const char *tenant, uint16_t op, const uint8_t *body, size_t len,
                       struct mc_wbuf *reply) {
  (void)conn_ctx;
  return mc_master_dispatch_as(ctx, tenant, op, body, len, reply);
}

int mc_master_start_rpc(struct mc_master *m, uint16_t *port_out) {
  struct mc_mrpc_server_opts o = {.threads = m->cfg.rpc_threads,
                                  .idle_timeout_s = (int)m->cfg.rpc_conn_timeout_seconds,
                                  .nagle = !m->cfg.rpc_enable_tcp_no_delay};
  m->rpc = mc_mrpc_server_start_opts(m->cfg.bind_ip, m->cfg.listen_port, rpc_handler, NULL, m, &o, &m->rpc_port);
  if (port_out) *port_out = m->rpc_port;
  if (!m->rpc) return MC_INTERNAL_ERROR;
  return m->ha && mc_ha_start(m->ha, m->rpc_port) ? MC_INTERNAL_ERROR : 0;
}

int mc_master_ha_lost(struct mc_master *m) { return mc_ha_lost(m->ha); }

void mc_master_destroy(struct mc_master *m) {
  if (!m) return;
  mc_admin_stop(m->admin);     /* no admin request runs after this */
  mc_ha_free(m->ha);           /* RPCs answer UNAVAILABLE_IN_CURRENT_STATUS from here; a leader gives its lease up */
  mc_mrpc_server_stop(m->rpc); /* no RPC runs after this */
  pthread_mutex_lock(&m->bg_mu);
  m->stopping = 1;
  pthread_cond_broadcast(&m->bg_cv);
  pthread_mutex_unlock(&m->bg_mu);
  if (m->threads_started) {
    pthread_join(m->evict_th, NULL);
    pthread_join(m->house_th, NULL);
  }
  mc_objects_destroy(m);
  mc_tasks_free(m->tasks);
  mc_extents_destroy(m);
  mc_segments_destroy(m);
  mc_hidx_feed_stop(m->hfeed); /* after the holders' feeds closed with their clients */
  mc_restore_free(m->restore);
  mc_evict_free(m);
  mc_meta_server_stop(m->meta_server);
  if (m->meta) mc_meta_close(m->meta);
  pthread_rwlock_destroy(&m->seg_mu);
  pthread_mutex_destroy(&m->discard_mu);
  pthread_mutex_destroy(&m->timer_mu);
  pthread_mutex_destroy(&m->bg_mu);
  pthread_cond_destroy(&m->bg_cv);
  mc_metrics_destroy(m->ms);
  mc_free(m->ms);
  mc_free(m);
}
