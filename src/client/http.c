/* The store client's own HTTP server (Python's enable_client_http_server; docs/store-client.md, "Client HTTP server"):
 * GET /health, /metrics (Prometheus text 0.0.4) and /metrics/summary, from this client's statistics
 * (stats.c) on a libmicrohttpd daemon (net/httpd.c). The handlers never take store->life: teardown
 * stops the daemon (joining its threads) before it frees anything they read, so they use s->master.cli and
 * s->stats directly. A port that cannot be bound is a warning, never a setup failure. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/log.h"
#include "common/util.h"
#include "net/httpd.h"

#define HTTP_HEALTH_TIMEOUT_MS 2000
#define HTTP_THREADS 2
#define HTTP_DEFAULT_PORT 9300

/* The counters at one instant (each read atomically; not one consistent snapshot across them). */
struct snap {
  uint64_t lat[MC_LAT_NBUCKETS], lat_sum_us, bytes_read, bytes_written, hits, misses, count;
};

static void take(struct mc_store *s, struct snap *v) {
  memset(v, 0, sizeof(*v));
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) {
    v->lat[i] = atomic_load(&s->stats.lat[i]);
    v->count += v->lat[i];
  }
  v->lat_sum_us = atomic_load(&s->stats.lat_sum_us);
  v->bytes_read = atomic_load(&s->stats.bytes_read);
  v->bytes_written = atomic_load(&s->stats.bytes_written);
  v->hits = atomic_load(&s->stats.hits);
  v->misses = atomic_load(&s->stats.misses);
}

static void outf(struct mc_wbuf *w, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n > 0) mc_w_bytes_raw(w, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void family(struct mc_wbuf *w, const char *name, const char *type, const char *help) {
  outf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(struct mc_wbuf *w, const char *name, const char *help, uint64_t v) {
  family(w, name, "counter", help);
  outf(w, "%s %llu\n", name, (unsigned long long)v);
}

static void metrics(struct mc_store *s, struct mc_wbuf *w) {
  struct snap v;
  take(s, &v);
  family(w, "te_transfer_latency_seconds", "histogram",
         "Latencies of this client's Transfer Engine transfers (own-segment copies excluded) since setup");
  uint64_t cum = 0;
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS - 1; i++) {
    cum += v.lat[i];
    outf(w, "te_transfer_latency_seconds_bucket{le=\"%g\"} %llu\n", (double)mc_lat_bound_us(i) / 1e6,
         (unsigned long long)cum);
  }
  outf(w, "te_transfer_latency_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)v.count);
  outf(w, "te_transfer_latency_seconds_sum %.17g\nte_transfer_latency_seconds_count %llu\n",
       (double)v.lat_sum_us / 1e6, (unsigned long long)v.count);
  family(w, "te_transfer_latency_p99", "gauge", "Seconds; p99 of this client's transfer latencies since setup");
  outf(w, "te_transfer_latency_p99 %.9g\n", mc_lat_quantile_s(v.lat, 0.99));
  counter(w, "store_client_read_bytes_total", "Bytes this client read (transfers and own-segment copies)",
          v.bytes_read);
  counter(w, "store_client_written_bytes_total", "Bytes this client wrote (transfers and own-segment copies)",
          v.bytes_written);
  counter(w, "store_client_lookup_hits_total", "Lookups by this client that found a readable object", v.hits);
  counter(w, "store_client_lookup_misses_total", "Lookups by this client that found no readable object", v.misses);
  char te[1024]; /* the engine's own (te_transport_fallback_total) */
  int n = mc_te_metrics(s->engine.te, te, sizeof(te));
  if (n > 0 && (size_t)n < sizeof(te)) mc_w_bytes_raw(w, te, (size_t)n);
}

static void summary(struct mc_store *s, struct mc_wbuf *w) {
  struct snap v;
  take(s, &v);
  outf(w,
       "client=%s transfers=%llu te_transfer_latency_p99=%.6g read_bytes=%llu written_bytes=%llu lookup_hits=%llu "
       "lookup_misses=%llu\n",
       s->self.name, (unsigned long long)v.count, mc_lat_quantile_s(v.lat, 0.99), (unsigned long long)v.bytes_read,
       (unsigned long long)v.bytes_written, (unsigned long long)v.hits, (unsigned long long)v.misses);
}

static unsigned health(struct mc_store *s, struct mc_wbuf *w) {
  char *version = NULL;
  int rc = mcli_service_ready(s->master.cli, HTTP_HEALTH_TIMEOUT_MS, &version, NULL);
  mc_free(version);
  json_t *o = json_pack("{s:s, s:o, s:o, s:I}", "status", rc ? "master_unreachable" : "ok", "segment",
                        mc_json_text(s->self.name), "master", mc_json_text(s->master.addr), "segment_bytes",
                        (json_int_t)s->seg.size);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (text) mc_w_bytes_raw(w, text, strlen(text)), mc_w_bytes_raw(w, "\n", 1);
  free(text);
  json_decref(o);
  return rc ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
}

static mc_mhd_ret on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **ctx) {
  static int first;
  (void)version, (void)upload;
  if (!*ctx) { /* headers only: answer once the (ignored) body is in */
    *ctx = &first;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  struct mc_store *s = cls;
  struct mc_wbuf w = {0};
  unsigned status = MHD_HTTP_OK;
  const char *ctype = "text/plain; charset=utf-8";
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
    outf(&w, "method not allowed\n");
  } else if (!strcmp(url, "/health")) {
    status = health(s, &w);
    ctype = "application/json";
  } else if (!strcmp(url, "/metrics")) {
    metrics(s, &w);
    ctype = "text/plain; version=0.0.4; charset=utf-8";
  } else if (!strcmp(url, "/metrics/summary")) {
    summary(s, &w);
  } else {
    status = MHD_HTTP_NOT_FOUND;
    outf(&w, "not found\n");
  }
  mc_mhd_ret r = mc_httpd_reply(c, status, w.len ? (const char *)w.p : "", w.len, ctype);
  mc_w_free(&w);
  return r;
}

int mc_http_start(struct mc_store *s, int port) {
  struct mc_httpd_opts o = {.name = "client HTTP server", .host = "", .port = (uint16_t)(port ? port : HTTP_DEFAULT_PORT),
                            .handler = on_request, .cls = s, .threads = HTTP_THREADS};
  uint16_t bound = 0;
  s->http.daemon = mc_httpd_start(&o, &bound);
  if (!s->http.daemon) {
    LOG_WARN("store client %s: the client HTTP server could not listen on port %u; continuing without it", s->self.name,
             (unsigned)o.port);
    return -1;
  }
  s->http.port = bound;
  LOG_INFO("store client %s: client HTTP server listening on port %u (/health, /metrics, /metrics/summary)", s->self.name,
           (unsigned)bound);
  return 0;
}

void mc_http_stop(struct mc_store *s) {
  if (!s->http.daemon) return;
  MHD_stop_daemon(s->http.daemon);
  s->http.daemon = NULL;
  s->http.port = 0;
}
