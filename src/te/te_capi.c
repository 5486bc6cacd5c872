/* The small diagnostic corners of the upstream C API (c-api.md §2.4). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "te/engine_internal.h"

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

int showLinks(transfer_engine_t engine, char *buf_out, size_t buf_len, int json) {
  struct mc_engine *e = engine;
  if (!e || !buf_out || !buf_len) return -1;
  size_t off = 0;
  off += (size_t)snprintf(buf_out, buf_len, json ? "{\"segment\":\"%s\",\"links\":[" : "segment %s\n", e->name);
  pthread_mutex_lock(&e->seg_mu);
  for (size_t i = 1; i < e->nsegs && off < buf_len; i++) {
    struct mc_seg *s = e->segs[i];
    const char *p = s->path == MC_PATH_SHM ? "shm" : s->path == MC_PATH_TCP ? "tcp" : "none";
    off += (size_t)snprintf(buf_out + off, buf_len - off,
                            json ? "%s{\"id\":%d,\"name\":\"%s\",\"path\":\"%s\"}" : "%s%d %s %s\n",
                            json && i > 1 ? "," : "", s->id, s->name, p);
  }
  pthread_mutex_unlock(&e->seg_mu);
  if (json && off < buf_len) snprintf(buf_out + off, buf_len - off, "]}");
  return 0;
}

/* Graceful shutdown: a signal handler may only flag; a watcher thread does the teardown. */
static pthread_mutex_t gs_mu = PTHREAD_MUTEX_INITIALIZER;
static transfer_engine_t gs_engines[16];
static int gs_count, gs_pipe[2] = {-1, -1};

static void gs_signal(int sig) {
  unsigned char s = (unsigned char)sig;
  ssize_t w = write(gs_pipe[1], &s, 1);
  (void)w;
}

static void *gs_watch(void *arg) {
  unsigned char s;
  if (read(gs_pipe[0], &s, 1) != 1) return NULL;
  pthread_mutex_lock(&gs_mu);
  for (int i = 0; i < gs_count; i++) destroyTransferEngine(gs_engines[i]);
  gs_count = 0;
  pthread_mutex_unlock(&gs_mu);
  signal(s, SIG_DFL);
  raise(s);
  return NULL;
}

void enableGracefulShutdown(transfer_engine_t engine) {
  if (!engine) return;
  pthread_mutex_lock(&gs_mu);
  if (gs_pipe[0] < 0 && pipe(gs_pipe) == 0) {
    pthread_t t;
    pthread_create(&t, NULL, gs_watch, NULL);
    pthread_detach(t);
    signal(SIGINT, gs_signal);
    signal(SIGTERM, gs_signal);
  }
  if (gs_count < 16) gs_engines[gs_count++] = engine;
  pthread_mutex_unlock(&gs_mu);
}
