/* transfer_engine_bench: upstream's throughput tool (docs/transfer-engine.md) over our C API. A target
 * allocates and registers one buffer and idles until SIGINT/SIGTERM; an initiator runs --threads
 * loops of batched READs or WRITEs against it for --duration seconds and prints one result line.
 * --protocol defaults to "tcp" (network path + same-host shortcut, docs/transfer-engine.md, "Design decisions");
 * MC_FORCE_TCP=1 forces real TCP between same-host processes. --protocol=rdma uses --device_name (or the
 * --nic_priority_matrix file) and refuses to run when rdma cannot be installed (no silent tcp figures);
 * MC_SAME_HOST_PATH=0 makes two processes of one host meet over rdma (docs/rdma.md). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/config.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/util.h"
#include "mooncake/transfer_engine.h"

#define LOCATION "cpu:0"
#define MAX_REMOTE_BUFS 64

struct opts {
  char *mode, *operation, *protocol, *device_name, *nic_priority_matrix;
  int auto_discovery;
  char *metadata_server, *local_server_name, *segment_id;
  uint64_t buffer_size, block_size;
  int64_t batch_size, duration, threads;
  char *report_unit;
  int64_t report_precision;
  char *backend;
  int latency, busy_poll;
};

static const struct mc_cfg_opt opt_table[] = {
    {"mode", MC_CFG_STRING, "initiator", 1, 0, offsetof(struct opts, mode),
     "initiator (issues transfers) or target (serves its buffer until SIGINT)"},
    {"operation", MC_CFG_STRING, "read", 1, 0, offsetof(struct opts, operation), "read or write"},
    {"protocol", MC_CFG_STRING, "tcp", 1, 0, offsetof(struct opts, protocol),
     "tcp (network path with the same-host shortcut; MC_FORCE_TCP=1 forces real TCP), rdma (verbs: "
     "docs/rdma.md; upstream's default) or shm (same host only)"},
    {"device_name", MC_CFG_STRING, "mlx5_2", 1, 0, offsetof(struct opts, device_name),
     "RDMA device list, comma-separated (rdma only)"},
    {"nic_priority_matrix", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, nic_priority_matrix),
     "NIC priority matrix file (rdma only; its devices win over --device_name)"},
    {"auto_discovery", MC_CFG_BOOL, "false", 1, 0, offsetof(struct opts, auto_discovery),
     "let the engine pick and install its transport (then --protocol is not used)"},
    {"metadata_server", MC_CFG_STRING, "192.168.3.77:2379", 1, 0, offsetof(struct opts, metadata_server),
     "metadata service: etcd host:port, etcd://, redis://, http://..., or P2PHANDSHAKE"},
    {"local_server_name", MC_CFG_STRING, "", 1, 0, offsetof(struct opts, local_server_name),
     "segment name of this process (default: the host name)"},
    {"segment_id", MC_CFG_STRING, "192.168.3.76", 1, 0, offsetof(struct opts, segment_id),
     "initiator: the target's segment name (ip:rpc_port under P2PHANDSHAKE, as the target prints it)"},
    {"buffer_size", MC_CFG_SIZE, "1GiB", 1, 0, offsetof(struct opts, buffer_size),
     "registered buffer size, raised to at least block_size * batch_size * threads"},
    {"batch_size", MC_CFG_INT, "128", 1, 1 << 24, offsetof(struct opts, batch_size), "requests per batch"},
    {"block_size", MC_CFG_SIZE, "65536", 1, 1e15, offsetof(struct opts, block_size), "bytes per request"},
    {"duration", MC_CFG_INT, "10", 1, 1e9, offsetof(struct opts, duration), "test length in seconds"},
    {"threads", MC_CFG_INT, "12", 1, 1024, offsetof(struct opts, threads), "initiator threads"},
    {"report_unit", MC_CFG_STRING, "GB", 1, 0, offsetof(struct opts, report_unit),
     "GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb (invalid: warning, GB)"},
    {"report_precision", MC_CFG_INT, "2", 0, 12, offsetof(struct opts, report_precision),
     "digits after the decimal point"},
    {"backend", MC_CFG_STRING, "classic", 1, 0, offsetof(struct opts, backend),
     "classic or tent (tent is not implemented)"},
    {"latency", MC_CFG_BOOL, "false", 1, 0, offsetof(struct opts, latency),
     "initiator: also print p50/p99/p999 per-batch latency in microseconds"},
    {"busy_poll", MC_CFG_BOOL, "false", 1, 0, offsetof(struct opts, busy_poll),
     "initiator: spin on getTransferStatus as upstream does, instead of blocking in mc_te_wait_batch"},
    MC_CFG_END,
};

/* ------------------------------------------------------------------ report units */

struct unit {
  const char *name;
  double bytes; /* bytes per unit (bit units: 1/8 of the decimal size) */
};

static const struct unit units[] = {
    {"GB", 1e9}, {"GiB", 1073741824.0}, {"Gb", 1e9 / 8}, {"MB", 1e6}, {"MiB", 1048576.0},
    {"Mb", 1e6 / 8}, {"KB", 1e3}, {"KiB", 1024.0}, {"Kb", 1e3 / 8},
};

static const struct unit *report_unit = &units[0];

static void pick_unit(const char *name) {
  for (size_t i = 0; i < MC_ARRAY_LEN(units); i++)
    if (!strcmp(units[i].name, name)) {
      report_unit = &units[i];
      return;
    }
  LOG_WARN("invalid --report_unit '%s', using GB", name);
}

/* ------------------------------------------------------------------ shared state */

struct remote_buf {
  uint64_t addr, len;
};

struct bench {
  const struct opts *o;
  transfer_engine_t engine;
  char *buf;
  uint64_t buf_len;
  int shared; /* allocated by mc_te_alloc_shared */
  segment_id_t seg;
  struct remote_buf rbufs[MAX_REMOTE_BUFS];
  size_t nrbufs;
  int opcode;
  atomic_int running;
  atomic_int failed;
};

struct worker {
  struct bench *b;
  int tid;
  pthread_t th;
  _Atomic uint64_t batches; /* read by the progress line while the worker runs */
  uint64_t *lat_ns; /* per-batch latencies when --latency (grows) */
  size_t nlat, caplat;
};

/* Faults in [p, p+len) so that page faults are not part of the measurement (they cost ~10 us each
 * in some VMs). MADV_POPULATE_WRITE (Linux 5.14) is several times faster than touching every page. */
static void prefault(char *p, uint64_t len) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (madvise(p, len, MADV_POPULATE_WRITE)) memset(p, 0, len);
}

/* The initiator prefaults only the part its requests use; the target all of it. */
static int alloc_buffer(struct bench *b, uint64_t len, uint64_t used) {
  b->buf_len = len;
  b->buf = mc_te_alloc_shared(b->engine, len, LOCATION);
  if (b->buf) {
    b->shared = 1;
  } else {
    LOG_WARN("shared buffer allocation failed; using private memory (same-host peers then copy with process_vm_*)");
    if (posix_memalign((void **)&b->buf, 4096, len)) {
      fprintf(stderr, "cannot allocate %llu bytes\n", (unsigned long long)len);
      return -1;
    }
    int rc = registerLocalMemory(b->engine, b->buf, len, LOCATION, 1);
    if (rc) {
      fprintf(stderr, "registerLocalMemory failed: %s\n", mc_te_strerror(rc));
      free(b->buf);
      b->buf = NULL;
      return -1;
    }
  }
  prefault(b->buf, MC_MIN(used, len));
  return 0;
}

static void free_buffer(struct bench *b) {
  if (!b->buf) return;
  if (b->shared) {
    mc_te_free_shared(b->engine, b->buf);
  } else {
    unregisterLocalMemory(b->engine, b->buf);
    free(b->buf);
  }
  b->buf = NULL;
}

/* ------------------------------------------------------------------ engine setup */

static transfer_engine_t make_engine(const struct opts *o) {
  transfer_engine_t e = createTransferEngine(o->metadata_server, o->local_server_name, NULL, 0, o->auto_discovery);
  if (!e) {
    fprintf(stderr, "cannot create the transfer engine (metadata server %s)\n", o->metadata_server);
    return NULL;
  }
  if (o->auto_discovery) return e;
  char *matrix = NULL;
  void *args[2] = {o->device_name, NULL};
  if (!strcmp(o->protocol, "rdma") && *o->nic_priority_matrix) {
    json_error_t err;
    json_t *m = json_load_file(o->nic_priority_matrix, 0, &err);
    if (!m) {
      fprintf(stderr, "--nic_priority_matrix %s: %s\n", o->nic_priority_matrix, err.text);
      destroyTransferEngine(e);
      return NULL;
    }
    args[0] = matrix = json_dumps(m, JSON_COMPACT);
    json_decref(m);
  }
  transport_t t = installTransport(e, o->protocol, strcmp(o->protocol, "rdma") ? NULL : args);
  free(matrix);
  if (!t || strcmp(mc_te_transport_name(t), o->protocol)) {
    fprintf(stderr, "cannot install transport '%s'%s\n", o->protocol, t ? " (the engine fell back to tcp: see the log)" : "");
    destroyTransferEngine(e);
    return NULL;
  }
  return e;
}

/* Rejects what this build cannot do before any engine exists. */
static int check_opts(struct opts *o) {
  if (strcmp(o->backend, "classic")) {
    if (!strcmp(o->backend, "tent")) fprintf(stderr, "--backend=tent: not implemented (use classic)\n");
    else fprintf(stderr, "invalid --backend '%s' (classic or tent)\n", o->backend);
    return -1;
  }
  if (strcmp(o->mode, "initiator") && strcmp(o->mode, "target")) {
    fprintf(stderr, "invalid --mode '%s' (initiator or target)\n", o->mode);
    return -1;
  }
  if (strcmp(o->operation, "read") && strcmp(o->operation, "write")) {
    fprintf(stderr, "invalid --operation '%s' (read or write)\n", o->operation);
    return -1;
  }
  if (!o->auto_discovery) {
    if (strcmp(o->protocol, "tcp") && strcmp(o->protocol, "shm") && strcmp(o->protocol, "rdma")) {
      fprintf(stderr, "unsupported --protocol '%s' (tcp, rdma or shm)\n", o->protocol);
      return -1;
    }
  }
  pick_unit(o->report_unit);
  if (strcmp(o->protocol, "rdma") && (*o->nic_priority_matrix || strcmp(o->device_name, "mlx5_2")))
    LOG_INFO("--device_name/--nic_priority_matrix only matter for RDMA; ignored");
  if (!*o->local_server_name) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    mc_free(o->local_server_name);
    o->local_server_name = mc_strdup(host);
  }
  return 0;
}

/* ------------------------------------------------------------------ target */

static int run_target(const struct opts *o, uint64_t buf_len) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* engine threads inherit the mask; main sigwaits */
  struct bench b = {.o = o};
  b.engine = make_engine(o);
  if (!b.engine) return 1;
  if (alloc_buffer(&b, buf_len, buf_len)) {
    destroyTransferEngine(b.engine);
    return 1;
  }
  printf("Target ready: segment %s\n", mc_te_local_segment_name(b.engine));
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  LOG_INFO("signal %d received, shutting down", sig);
  free_buffer(&b);
  destroyTransferEngine(b.engine);
  return 0;
}

/* ------------------------------------------------------------------ initiator */

/* Reads the peer's buffer list from its descriptor. */
static int load_remote_bufs(struct bench *b) {
  char *text = mc_te_segment_json(b->engine, b->seg);
  if (!text) {
    fprintf(stderr, "no descriptor for segment %s\n", b->o->segment_id);
    return -1;
  }
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  free(text);
  json_t *arr = json_object_get(root, "buffers");
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    if (b->nrbufs == MAX_REMOTE_BUFS) break;
    json_t *a = json_object_get(v, "addr"), *l = json_object_get(v, "length");
    if (!json_is_integer(a) || !json_is_integer(l)) continue;
    b->rbufs[b->nrbufs].addr = (uint64_t)json_integer_value(a);
    b->rbufs[b->nrbufs++].len = (uint64_t)json_integer_value(l);
  }
  json_decref(root);
  if (!b->nrbufs) {
    fprintf(stderr, "segment %s has no registered buffers\n", b->o->segment_id);
    return -1;
  }
  return 0;
}

/* Waits until every task of the batch is terminal; 0 if all COMPLETED. Every task is polled, so
 * freeBatchID also works with upstream's "observed" rule. */
static int wait_batch(struct bench *b, batch_id_t id, size_t n) {
  if (!b->o->busy_poll) mc_te_wait_batch(b->engine, id, -1);
  for (size_t i = 0; i < n; i++) {
    struct transfer_status st;
    for (;;) {
      int rc = getTransferStatus(b->engine, id, i, &st);
      if (rc) {
        fprintf(stderr, "getTransferStatus failed: %s\n", mc_te_status_name(rc));
        return -1;
      }
      if (st.status == STATUS_COMPLETED) break;
      if (st.status == STATUS_FAILED || st.status == STATUS_TIMEOUT || st.status == STATUS_CANCELED ||
          st.status == STATUS_INVALID) {
        fprintf(stderr, "transfer %zu failed with status %s\n", i, mc_te_task_state_name(st.status));
        return -1;
      }
    }
  }
  return 0;
}

static void record_latency(struct worker *w, uint64_t ns) {
  if (w->nlat == w->caplat) {
    w->caplat = w->caplat ? w->caplat * 2 : 4096;
    uint64_t *p = realloc(w->lat_ns, w->caplat * sizeof(*p));
    if (!p) return;
    w->lat_ns = p;
  }
  w->lat_ns[w->nlat++] = ns;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct bench *b = w->b;
  const struct opts *o = b->o;
  size_t n = (size_t)o->batch_size, threads = (size_t)o->threads;
  const struct remote_buf *rb = &b->rbufs[(size_t)w->tid % b->nrbufs];
  struct transfer_request *req = mc_calloc(n, sizeof(*req));
  for (size_t i = 0; i < n; i++) {
    uint64_t off = o->block_size * (i * threads + (size_t)w->tid);
    req[i].opcode = b->opcode;
    req[i].source = b->buf + off;
    req[i].target_id = b->seg;
    req[i].target_offset = rb->addr + off;
    req[i].length = o->block_size;
  }
  while (atomic_load(&b->running)) {
    batch_id_t id = allocateBatchID(b->engine, n);
    if (id == INVALID_BATCH) {
      fprintf(stderr, "allocateBatchID failed\n");
      break;
    }
    uint64_t t0 = mc_now_ns();
    int rc = submitTransfer(b->engine, id, req, n);
    if (rc) {
      fprintf(stderr, "submitTransfer failed: %s\n", mc_te_status_name(rc));
      break;
    }
    if (wait_batch(b, id, n)) break;
    if (o->latency) record_latency(w, mc_now_ns() - t0);
    freeBatchID(b->engine, id);
    w->batches++;
  }
  if (atomic_load(&b->running)) { /* left the loop on an error: stop everyone */
    atomic_store(&b->failed, 1);
    atomic_store(&b->running, 0);
  }
  mc_free(req);
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p) {
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)v[i] / 1e3;
}

static void print_latency(struct worker *w, size_t nw) {
  size_t n = 0;
  for (size_t i = 0; i < nw; i++) n += w[i].nlat;
  if (!n) return;
  uint64_t *all = malloc(n * sizeof(*all));
  if (!all) return;
  size_t k = 0;
  for (size_t i = 0; i < nw; i++) {
    memcpy(all + k, w[i].lat_ns, w[i].nlat * sizeof(*all));
    k += w[i].nlat;
  }
  qsort(all, n, sizeof(*all), cmp_u64);
  printf("Batch latency: p50 %.1f us, p99 %.1f us, p999 %.1f us, samples %zu\n", pct(all, n, 0.50),
         pct(all, n, 0.99), pct(all, n, 0.999), n);
  free(all);
}

static int open_target(struct bench *b) {
  b->seg = openSegment(b->engine, b->o->segment_id);
  if (b->seg < 0) {
    fprintf(stderr, "cannot open segment %s\n", b->o->segment_id);
    return -1;
  }
  const char *path = mc_te_segment_path(b->engine, b->seg);
  LOG_INFO("bench: segment %s opened as id %d, using protocol %s", b->o->segment_id, (int)b->seg,
           path ? path : "none");
  if (!path) {
    fprintf(stderr, "segment %s is not reachable by the installed transports\n", b->o->segment_id);
    return -1;
  }
  if (load_remote_bufs(b)) return -1;
  uint64_t need = b->o->block_size * (uint64_t)b->o->batch_size * (uint64_t)b->o->threads;
  for (size_t i = 0; i < b->nrbufs && i < (size_t)b->o->threads; i++)
    if (b->rbufs[i].len < need) {
      fprintf(stderr, "the target's buffer %zu holds %llu bytes, but this run needs %llu "
                      "(start the target with --buffer_size >= block_size*batch_size*threads)\n",
              i, (unsigned long long)b->rbufs[i].len, (unsigned long long)need);
      return -1;
    }
  return 0;
}

static int run_workers(struct bench *b) {
  const struct opts *o = b->o;
  size_t nw = (size_t)o->threads;
  struct worker *w = mc_calloc(nw, sizeof(*w));
  atomic_store(&b->running, 1);
  uint64_t start = mc_now_ns();
  size_t started = 0;
  for (; started < nw; started++) {
    w[started].b = b;
    w[started].tid = (int)started;
    if (pthread_create(&w[started].th, NULL, worker_main, &w[started])) break;
  }
  uint64_t end_at = start + (uint64_t)o->duration * 1000000000ull;
  struct mc_progress pr;
  mc_progress_start(&pr, stderr, isatty(STDERR_FILENO), MC_PROGRESS_EVERY_S);
  const struct unit *u = report_unit;
  while (atomic_load(&b->running) && mc_now_ns() < end_at) {
    usleep(10000);
    uint64_t done = 0;
    for (size_t i = 0; i < started; i++) done += atomic_load(&w[i].batches);
    double t = (double)(mc_now_ns() - start) / 1e9;
    mc_progress_show(&pr, "bench: %.0f/%lld s, %llu batches, %.*f %s/s", t, (long long)o->duration,
                     (unsigned long long)done, (int)o->report_precision,
                     (double)done * (double)o->batch_size * (double)o->block_size / t / u->bytes, u->name);
  }
  mc_progress_end(&pr);
  atomic_store(&b->running, 0);
  uint64_t batches = 0;
  for (size_t i = 0; i < started; i++) {
    pthread_join(w[i].th, NULL);
    batches += w[i].batches;
  }
  double secs = (double)(mc_now_ns() - start) / 1e9;
  int rc = atomic_load(&b->failed) || started < nw ? 1 : 0;
  if (!rc) {
    double bytes = (double)batches * (double)o->batch_size * (double)o->block_size;
    printf("Test completed: duration %.2f, batch count %llu, throughput %.*f %s/s\n", secs,
           (unsigned long long)batches, (int)o->report_precision, bytes / secs / u->bytes, u->name);
    if (o->latency) print_latency(w, started);
  }
  for (size_t i = 0; i < nw; i++) free(w[i].lat_ns);
  mc_free(w);
  return rc;
}

static int run_initiator(const struct opts *o, uint64_t buf_len, uint64_t used) {
  struct bench b = {.o = o, .opcode = strcmp(o->operation, "write") ? OPCODE_READ : OPCODE_WRITE};
  b.engine = make_engine(o);
  if (!b.engine) return 1;
  int rc = 1;
  if (!alloc_buffer(&b, buf_len, used) && !open_target(&b)) rc = run_workers(&b);
  free_buffer(&b);
  destroyTransferEngine(b.engine);
  return rc;
}

int main(int argc, char **argv) {
  struct opts o;
  mc_log_set_level(MC_LOG_INFO); /* like glog's default for tools; --v / MC_LOG_LEVEL adjust it */
  mc_log_init_from_env();
  mc_cfg_defaults(opt_table, &o);
  const char *usage = "--mode=target|initiator [--metadata_server=P2PHANDSHAKE] [--segment_id=NAME] [flags]";
  int rc = mc_cfg_parse_argv(opt_table, &o, argc, argv, usage, NULL);
  if (rc) {
    mc_cfg_free(opt_table, &o);
    return rc < 0 ? 1 : 0;
  }
  signal(SIGPIPE, SIG_IGN);
  int status = 1;
  if (!check_opts(&o)) {
    uint64_t need = o.block_size * (uint64_t)o.batch_size * (uint64_t)o.threads;
    uint64_t buf_len = MC_MAX(o.buffer_size, need);
    status = !strcmp(o.mode, "target") ? run_target(&o, buf_len) : run_initiator(&o, buf_len, need);
  }
  mc_cfg_free(opt_table, &o);
  return status;
}
