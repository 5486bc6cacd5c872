/* memcached_ref: the memcached reference of bench/run_store_bench.sh. Stores and reads --value_size values
 * over memcached's text protocol with --conns connections (one thread each, TCP_NODELAY), keys
 * "mcref:<i>" for i in [0, --keys), each connection walking its own share of the key space.
 * Phase "set" runs for --duration (and, untimed, until every key was stored once); phase "get" then
 * runs for --duration and checks every value's length and its first 8 bytes (the key index).
 * --one_pass: the set phase stores each key exactly once, timed (first pass over fresh memcached memory).
 * One line per phase: "MEMCACHED op=set|get size=.. conns=.. ops=.. secs=.. gbps=.. ops_s=.. p50_us=..
 * p99_us=.. errors=..". Latency is per request (send to last byte of the reply). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/config.h"
#include "common/util.h"

struct opts {
  char *host, *op;
  int64_t port, conns, keys;
  uint64_t value_size;
  double duration;
  int one_pass;
};

static const struct mc_cfg_opt opt_table[] = {
    {"host", MC_CFG_STRING, "127.0.0.1", 1, 0, offsetof(struct opts, host), "memcached address"},
    {"port", MC_CFG_INT, "11211", 1, 65535, offsetof(struct opts, port), "memcached port"},
    {"op", MC_CFG_STRING, "setget", 1, 0, offsetof(struct opts, op), "setget (set phase, then get phase) or set"},
    {"conns", MC_CFG_INT, "4", 1, 256, offsetof(struct opts, conns), "connections (one thread each)"},
    {"keys", MC_CFG_INT, "1024", 1, 1e8, offsetof(struct opts, keys), "key space"},
    {"value_size", MC_CFG_SIZE, "1MiB", 8, 1e10, offsetof(struct opts, value_size), "bytes per value"},
    {"duration", MC_CFG_DOUBLE, "2", 0.01, 3600, offsetof(struct opts, duration), "seconds per phase"},
    {"one_pass", MC_CFG_BOOL, "false", 0, 0, offsetof(struct opts, one_pass),
     "the set phase stores every key exactly once, timed (a first pass over fresh memory), then stops"},
    MC_CFG_END,
};

static struct opts O;
static pthread_barrier_t BAR;

struct conn {
  int id, fd;
  char *val;  /* value to send (first 8 bytes = key index) */
  char *rbuf; /* receive buffer, value_size + 256 */
  size_t rlen, rcap;
  uint64_t ops, errors, covered;
  double secs;
  double *lat;
  size_t nlat, caplat;
  int get_phase;
};

static double now_s(void) { return (double)mc_now_ns() / 1e9; }

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)O.port)};
  inet_pton(AF_INET, O.host, &a.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
    fprintf(stderr, "connect %s:%lld: %s\n", O.host, (long long)O.port, strerror(errno));
    exit(1);
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

static int send_all(int fd, struct iovec *iov, int n) {
  while (n) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    while (n && (size_t)w >= iov->iov_len) w -= (ssize_t)iov->iov_len, iov++, n--;
    if (n) iov->iov_base = (char *)iov->iov_base + w, iov->iov_len -= (size_t)w;
  }
  return 0;
}

/* Reads until rbuf holds at least `need` bytes. */
static int fill(struct conn *c, size_t need) {
  while (c->rlen < need) {
    ssize_t r = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c->rlen += (size_t)r;
  }
  return 0;
}

/* Index just past the first "\r\n" at or after `from`, reading more as needed; 0 on error. */
static size_t line_end(struct conn *c, size_t from) {
  for (;;) {
    for (size_t i = from; i + 1 < c->rlen; i++)
      if (c->rbuf[i] == '\r' && c->rbuf[i + 1] == '\n') return i + 2;
    if (c->rlen == c->rcap || fill(c, c->rlen + 1)) return 0;
  }
}

static void consume(struct conn *c, size_t n) {
  memmove(c->rbuf, c->rbuf + n, c->rlen - n);
  c->rlen -= n;
}

static int do_set(struct conn *c, uint64_t idx) {
  char hdr[96];
  memcpy(c->val, &idx, 8);
  int hl = snprintf(hdr, sizeof(hdr), "set mcref:%llu 0 0 %llu\r\n", (unsigned long long)idx,
                    (unsigned long long)O.value_size);
  struct iovec iov[3] = {{hdr, (size_t)hl}, {c->val, O.value_size}, {(void *)"\r\n", 2}};
  if (send_all(c->fd, iov, 3)) return -1;
  size_t e = line_end(c, 0);
  if (!e) return -1;
  int ok = e == 8 && !memcmp(c->rbuf, "STORED\r\n", 8);
  consume(c, e);
  return ok ? 0 : -1;
}

static int do_get(struct conn *c, uint64_t idx) {
  char hdr[64];
  int hl = snprintf(hdr, sizeof(hdr), "get mcref:%llu\r\n", (unsigned long long)idx);
  struct iovec iov[1] = {{hdr, (size_t)hl}};
  if (send_all(c->fd, iov, 1)) return -1;
  size_t e = line_end(c, 0);
  if (!e) return -1;
  unsigned long long len = 0;
  if (strncmp(c->rbuf, "VALUE ", 6) || sscanf(c->rbuf, "VALUE %*s %*u %llu", &len) != 1) {
    consume(c, e); /* "END\r\n": a miss */
    return -1;
  }
  size_t total = e + len + 2 + 5; /* data, "\r\n", "END\r\n" */
  if (total > c->rcap || fill(c, total)) return -1;
  uint64_t got;
  memcpy(&got, c->rbuf + e, 8);
  int ok = len == O.value_size && got == idx && !memcmp(c->rbuf + e + len + 2, "END\r\n", 5);
  consume(c, total);
  return ok ? 0 : -1;
}

static void lat_add(struct conn *c, double us) {
  if (c->nlat == c->caplat) {
    c->caplat = c->caplat ? c->caplat * 2 : 4096;
    c->lat = realloc(c->lat, c->caplat * sizeof(double));
  }
  c->lat[c->nlat++] = us;
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  uint64_t lo = (uint64_t)O.keys * (uint64_t)c->id / (uint64_t)O.conns;
  uint64_t hi = (uint64_t)O.keys * (uint64_t)(c->id + 1) / (uint64_t)O.conns, idx = lo;
  if (hi == lo) hi = lo + 1;
  pthread_barrier_wait(&BAR);
  double start = now_s(), now = start;
  while ((O.one_pass && !c->get_phase) ? !c->covered : now - start < O.duration) {
    double t0 = now;
    int rc = c->get_phase ? do_get(c, idx) : do_set(c, idx);
    now = now_s();
    lat_add(c, (now - t0) * 1e6);
    c->ops++;
    c->errors += rc != 0;
    if (++idx == hi) idx = lo, c->covered = 1;
  }
  c->secs = now - start;
  /* untimed: store the rest of our keys once, so the get phase never misses */
  if (!c->get_phase)
    for (; !c->covered && idx < hi; idx++) c->errors += do_set(c, idx) != 0;
  return NULL;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int phase(struct conn *cs, int get) {
  int n = (int)O.conns;
  pthread_t *th = calloc((size_t)n, sizeof(pthread_t));
  pthread_barrier_init(&BAR, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    cs[i].get_phase = get;
    cs[i].ops = cs[i].errors = cs[i].covered = 0;
    cs[i].nlat = 0;
    pthread_create(&th[i], NULL, conn_main, &cs[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&BAR);
  free(th);
  double ops_s = 0, secs = 0;
  uint64_t ops = 0, errors = 0;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    ops_s += (double)cs[i].ops / cs[i].secs;
    secs = MC_MAX(secs, cs[i].secs);
    ops += cs[i].ops, errors += cs[i].errors, total += cs[i].nlat;
  }
  double *all = malloc((total ? total : 1) * sizeof(double));
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    memcpy(all + k, cs[i].lat, cs[i].nlat * sizeof(double));
    k += cs[i].nlat;
  }
  qsort(all, total, sizeof(double), cmp_d);
  double p50 = total ? all[(size_t)((double)(total - 1) * 0.5)] : 0, p99 = total ? all[(size_t)((double)(total - 1) * 0.99)] : 0;
  free(all);
  printf("MEMCACHED op=%s size=%llu conns=%d ops=%llu secs=%.3f gbps=%.3f ops_s=%.0f p50_us=%.1f p99_us=%.1f "
         "errors=%llu\n",
         get ? "get" : "set", (unsigned long long)O.value_size, n, (unsigned long long)ops, secs,
         ops_s * (double)O.value_size / 1e9, ops_s, p50, p99, (unsigned long long)errors);
  fflush(stdout);
  return errors ? -1 : 0;
}

int main(int argc, char **argv) {
  mc_cfg_defaults(opt_table, &O);
  int rc = mc_cfg_parse_argv(opt_table, &O, argc, argv, "[--port=P] [--value_size=N] [--conns=4] [--keys=K]", NULL);
  if (rc) return rc > 0 ? 0 : 1;
  int n = (int)O.conns;
  struct conn *cs = calloc((size_t)n, sizeof(*cs));
  for (int i = 0; i < n; i++) {
    cs[i].id = i;
    cs[i].fd = dial();
    cs[i].val = malloc(O.value_size);
    memset(cs[i].val, 'v', O.value_size);
    cs[i].rcap = O.value_size + 256;
    cs[i].rbuf = malloc(cs[i].rcap);
  }
  int bad = phase(cs, 0);
  if (!strcmp(O.op, "setget")) bad |= phase(cs, 1);
  for (int i = 0; i < n; i++) {
    close(cs[i].fd);
    free(cs[i].val);
    free(cs[i].rbuf);
    free(cs[i].lat);
  }
  free(cs);
  mc_cfg_free(opt_table, &O);
  return bad ? 1 : 0;
}
