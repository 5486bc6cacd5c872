/* Fuzz target: the master's admin HTTP server (admin.c) and the TE HTTP metadata server
 * (metadata_server.c), both real servers of one in-process master on loopback (their handlers are
 * libmicrohttpd callbacks, reachable only through a connection). Input: byte 0 picks the server (bit 0:
 * 0 admin, 1 metadata) and the form (bit 1: 1 = the rest is sent as raw bytes; 0 = the rest is
 * "METHOD\nTARGET\nBODY", sent as one well-formed HTTP/1.1 request with that body). The master holds
 * one mounted segment and a few keys (put back before every input), so that key, segment and drain
 * requests find something. Checked: the servers stay up and every answer is an HTTP response. The
 * master (with both servers) is replaced every RESTART_EVERY inputs, which bounds what accumulates
 * (metadata keys, drain jobs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_common.h"
#include "master/master_int.h"

#define RESTART_EVERY 500
#define REPLY_TIMEOUT_MS 3000
#define REPLY_CAP (1u << 20)
#define QUIET_MS 10 /* the servers answer a complete request at once; an incomplete one gets no answer */
#define NKEYS 4

static struct mc_master *master;
static uint16_t admin_port, meta_port;
static unsigned inputs;
static const struct mc_uuid client = {0x46555a5a00000001ull, 0x1ull};

static void master_start(void) {
  static const char *const opts[] = {"enable_http_metadata_server", "true", "http_metadata_server_port", "0",
                                     "http_metadata_server_host", "127.0.0.1", "metrics_port", "0",
                                     "metrics_host", "127.0.0.1", NULL};
  master = fz_master_start(opts);
  if (mc_master_start_admin(master, &admin_port)) abort();
  meta_port = mc_master_meta_port(master);
  struct mc_segment_rec s = {.id = {7, 7}, .name = "127.0.0.1:17777", .base = 1ull << 32, .size = 64ull << 20,
                             .te_endpoint = "127.0.0.1:17777", .protocol = "tcp", .zone = "", .host_id = "fuzz",
                             .probe_addr = ""};
  if (mc_master_mount(master, &s, client)) abort();
}

/* Puts back the keys an earlier input removed (a drained or unmounted segment may refuse: fine). */
static void populate(void) {
  struct mc_put_config pc = {.replica_num = 1, .soft_pin_ttl_ms = -1};
  struct mc_wbuf w = {0};
  for (int i = 0; i < NKEYS; i++) {
    char key[16];
    int n = snprintf(key, sizeof(key), "key%d", i);
    if (mc_master_exist(master, key, (uint32_t)n)) continue;
    w.len = 0;
    if (!mc_master_put_start(master, client, key, (uint32_t)n, 4096, &pc, &w))
      mc_master_put_end(master, client, key, (uint32_t)n, MC_REPLICA_ALL, NULL);
  }
  mc_w_free(&w);
}

/* The answer so far, kept up to REPLY_CAP bytes (the rest is only counted). */
struct reply {
  char *p;
  size_t n, kept;
};

/* 1 once r holds a whole response: headers, then Content-Length bytes or the last chunk. Servers keep
 * HTTP/1.1 connections open after answering, so the exchange stops here instead of at a timeout. */
static int complete(const struct reply *r, int head) {
  const char *end = memmem(r->p, r->kept, "\r\n\r\n", 4);
  if (!end) return 0;
  size_t hl = (size_t)(end - r->p) + 4, body = r->n - hl;
  if (head) return 1;
  for (const char *h = r->p, *nl; h < end && (nl = memchr(h, '\n', (size_t)(end - h))); h = nl + 1) {
    if (!strncasecmp(h, "Content-Length:", 15)) return body >= strtoull(h + 15, NULL, 10);
    if (!strncasecmp(h, "Transfer-Encoding: chunked", 26))
      return r->kept == r->n && body >= 5 && !memcmp(r->p + r->n - 5, "0\r\n\r\n", 5);
  }
  return 0; /* no length: the server closes when done */
}

struct answer {
  struct reply r;
  int head; /* the request was HEAD: no body follows the headers */
};

static int on_reply(void *ctx, const uint8_t *p, size_t n) {
  struct answer *a = ctx;
  struct reply *r = &a->r;
  size_t keep = n < REPLY_CAP - r->kept ? n : REPLY_CAP - r->kept;
  if (keep) {
    r->p = realloc(r->p, r->kept + keep);
    memcpy(r->p + r->kept, p, keep);
    r->kept += keep;
  }
  r->n += n;
  if (r->kept >= 8 && memcmp(r->p, "HTTP/1.", 7)) abort(); /* only HTTP responses come back */
  return complete(r, a->head);
}

/* The structured form: METHOD\nTARGET\nBODY -> one request. malloc'ed, *len set. */
static char *request(const uint8_t *p, size_t n, size_t *len) {
  const uint8_t *nl1 = memchr(p, '\n', n);
  size_t ml = nl1 ? (size_t)(nl1 - p) : n;
  const uint8_t *t = nl1 ? nl1 + 1 : p + n;
  size_t rest = n - (size_t)(t - p);
  const uint8_t *nl2 = memchr(t, '\n', rest);
  size_t tl = nl2 ? (size_t)(nl2 - t) : rest;
  const uint8_t *body = nl2 ? nl2 + 1 : t + tl;
  size_t bl = n - (size_t)(body - p);
  size_t cap = ml + tl + bl + 160;
  char *out = malloc(cap);
  int k = snprintf(out, cap, "%.*s %.*s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                   (int)ml, (const char *)p, (int)tl, (const char *)t, bl);
  memcpy(out + k, body, bl);
  *len = (size_t)k + bl;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!master) master_start();
  if (++inputs % RESTART_EVERY == 0) fz_master_stop(), master_start();
  fz_quiet();
  if (!size) return 0;
  populate();
  uint16_t port = data[0] & 1 ? meta_port : admin_port;
  size_t len = size - 1;
  char *req = data[0] & 2 ? NULL : request(data + 1, size - 1, &len);
  const char *sent = req ? req : (const char *)data + 1;
  struct answer a = {{NULL, 0, 0}, len >= 5 && !memcmp(sent, "HEAD ", 5)};
  if (fz_exchange(port, sent, len, REPLY_TIMEOUT_MS, QUIET_MS, on_reply, &a) < 0) abort(); /* the server is gone */
  free(a.r.p);
  free(req);
  return 0;
}
