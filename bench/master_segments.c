/* master_segments: the master at many segments, over raw master RPCs (no transfer engine; the segments
 * are metadata only). bench/run_master_segments.sh drives it against a fresh master per N.
 *
 *   master_segments <master port> <master pid> <N> [put seconds = 3] [idle seconds = 5]
 *
 * 1. mount: N segments of 64 MiB, each from its own client id, over two connections at once.
 * 2. the master's resident memory (/proc/<pid>/status VmRSS) once they are mounted.
 * 3. put: unbatched PutStart + PutEnd of 1 KiB values on one connection for <put seconds>; the latency of
 *    each pair is recorded.
 * 4. idle: every client pings once a second (N pings/s, pipelined on one connection, as the store
 *    client's heartbeat would send them) for <idle seconds>; the master's CPU time over that window
 *    (/proc/<pid>/stat utime + stime) over the wall time.
 * Prints
 *   SEGSCALE n=<N> mount_per_s=<r> rss_mib=<m> put_per_s=<r> put_p99_us=<t> idle_cpu_pct=<c>
 * and a comment line with the pings sent and answered (a master that cannot keep up answers fewer) and
 * quiet_cpu_pct: the master's CPU over 2 s with no request at all before the pings start (its own
 * background work: eviction and housekeeping ticks). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "lib/master_client.h"
#include "procstat.h"

#define SEG_SIZE (64ull << 20)
#define VALUE_LEN 1024
#define MOUNT_THREADS 2
#define PING_WINDOW 512 /* pings in flight at most */

static int PORT;
static long NSEGS;

/* utime + stime of pid, in seconds. */
static double cpu_s(int pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static struct mc_uuid client_id(long i) { return (struct mc_uuid){0x5E65CA1E00000000ull | (uint64_t)i, (uint64_t)i + 1}; }

/* ------------------------------------------------------------------ mount */

static _Atomic long mount_failed;

static void *mount_main(void *arg) {
  long t = (long)(intptr_t)arg;
  struct mc_mrpc_client *c = mt_connect(PORT);
  for (long i = t; i < NSEGS; i += MOUNT_THREADS) {
    char name[48];
    snprintf(name, sizeof(name), "segscale-%ld:1", i);
    struct mc_segment_rec s = {.id = {0x5E6000000000000ull | (uint64_t)i, (uint64_t)i * 7919 + 1},
                               .name = name, .base = 0x100000000000ull + (uint64_t)i * SEG_SIZE, .size = SEG_SIZE,
                               .te_endpoint = name, .protocol = (char *)"tcp", .zone = (char *)"",
                               .host_id = (char *)"", .probe_addr = (char *)""};
    if (mt_mount(c, client_id(i), &s)) mount_failed++;
  }
  mc_mrpc_client_free(c);
  return NULL;
}

/* ------------------------------------------------------------------ put */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void put_phase(double secs, double *rate, double *p99_us, long *failed) {
  struct mc_mrpc_client *c = mt_connect(PORT);
  struct mc_put_config cfg = mt_cfg(1);
  size_t cap = 1 << 20, n = 0;
  uint64_t *lat = malloc(sizeof(*lat) * cap);
  *failed = 0;
  double t0 = now_s(), t;
  do {
    char key[32];
    snprintf(key, sizeof(key), "segscale-key-%zu", n);
    uint64_t a = mc_now_ns();
    int rc = mt_put_start(c, client_id(0), key, VALUE_LEN, &cfg, NULL, NULL);
    if (!rc) rc = mt_put_end(c, client_id(0), key);
    if (rc) (*failed)++;
    if (n == cap) lat = realloc(lat, sizeof(*lat) * (cap *= 2));
    lat[n++] = mc_now_ns() - a;
    t = now_s();
  } while (t - t0 < secs);
  *rate = (double)n / (t - t0);
  qsort(lat, n, sizeof(*lat), cmp_u64);
  *p99_us = (double)lat[n * 99 / 100] / 1e3;
  free(lat);
  mc_mrpc_client_free(c);
}

/* ------------------------------------------------------------------ pings */

struct pinger {
  pthread_t th;
  _Atomic int stop;
  _Atomic long sent, answered, failed;
};

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)PORT)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) return -1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* Reads whatever replies have arrived (blocking for at least one when block) and counts them. */
static int drain(struct pinger *p, int fd, uint8_t *in, size_t *have, int block) {
  ssize_t got = recv(fd, in + *have, 65536 - *have, block ? 0 : MSG_DONTWAIT);
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
  if (!got) return -1;
  *have += (size_t)got;
  size_t lo = 0;
  while (*have - lo >= MC_MRPC_HDR) {
    struct mc_mrpc_hdr h;
    mc_mrpc_get_hdr(in + lo, &h);
    if (*have - lo < MC_MRPC_HDR + h.len) break;
    h.status ? p->failed++ : p->answered++;
    lo += MC_MRPC_HDR + h.len;
  }
  memmove(in, in + lo, *have - lo);
  *have -= lo;
  return 0;
}

/* N pings a second, client after client, at most PING_WINDOW unanswered. */
static void *ping_main(void *arg) {
  struct pinger *p = arg;
  int fd = dial();
  if (fd < 0) return NULL;
  uint8_t *in = malloc(65536), frame[MC_MRPC_HDR + 16], batch[64 * sizeof(frame)];
  size_t have = 0;
  double t0 = now_s();
  long next = 0;
  while (!p->stop) {
    long due = (long)((now_s() - t0) * (double)NSEGS);
    size_t len = 0;
    while (p->sent < due && len + sizeof(frame) <= sizeof(batch) && p->sent - p->answered - p->failed < PING_WINDOW) {
      struct mc_wbuf w = {0};
      mc_put_uuid(&w, client_id(next));
      mc_mrpc_put_hdr(frame, MC_OP_PING, (uint64_t)p->sent, (uint32_t)w.len, 0);
      memcpy(frame + MC_MRPC_HDR, w.p, w.len);
      mc_w_free(&w);
      memcpy(batch + len, frame, sizeof(frame));
      len += sizeof(frame);
      p->sent++;
      next = (next + 1) % NSEGS;
    }
    if (len && send(fd, batch, len, MSG_NOSIGNAL) != (ssize_t)len) break;
    int full = p->sent - p->answered - p->failed >= PING_WINDOW;
    if (drain(p, fd, in, &have, full) < 0) break;
    if (!len && !full) usleep(p->sent < due ? 0 : 1000);
  }
  close(fd);
  free(in);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <master port> <master pid> <N> [put seconds] [idle seconds]\n", argv[0]);
    return 2;
  }
  PORT = atoi(argv[1]);
  int mpid = atoi(argv[2]);
  NSEGS = atol(argv[3]);
  double put_secs = argc > 4 ? atof(argv[4]) : 3, idle_secs = argc > 5 ? atof(argv[5]) : 5;
  if (NSEGS < 1) return 2;

  pthread_t th[MOUNT_THREADS];
  double t = now_s();
  for (long i = 0; i < MOUNT_THREADS; i++) pthread_create(&th[i], NULL, mount_main, (void *)(intptr_t)i);
  for (int i = 0; i < MOUNT_THREADS; i++) pthread_join(th[i], NULL);
  double mount_rate = (double)NSEGS / (now_s() - t);
  if (mount_failed) {
    fprintf(stderr, "%ld mounts failed\n", (long)mount_failed);
    return 1;
  }
  double rss_mib = (double)rss_kib(mpid) / 1024;

  double put_rate, p99;
  long put_failed;
  put_phase(put_secs, &put_rate, &p99, &put_failed);
  if (put_failed) fprintf(stderr, "%ld puts failed\n", put_failed);

  usleep(500000);
  double q0 = cpu_s(mpid), qw = now_s();
  usleep(2000000);
  double quiet = 100 * (cpu_s(mpid) - q0) / (now_s() - qw);

  struct pinger pg = {0};
  pthread_create(&pg.th, NULL, ping_main, &pg);
  usleep(1000000); /* the pings reach their rate first */
  double c0 = cpu_s(mpid), w0 = now_s();
  long a0 = pg.answered;
  usleep((useconds_t)(idle_secs * 1e6));
  double idle = 100 * (cpu_s(mpid) - c0) / (now_s() - w0);
  long answered = pg.answered - a0;
  double span = now_s() - w0;
  pg.stop = 1;
  pthread_join(pg.th, NULL);

  printf("SEGSCALE n=%ld mount_per_s=%.0f rss_mib=%.1f put_per_s=%.0f put_p99_us=%.0f idle_cpu_pct=%.1f\n", NSEGS,
         mount_rate, rss_mib, put_rate, p99, idle);
  printf("# n=%ld pings_per_s=%.0f (of %ld wanted) ping_failed=%ld put_failed=%ld quiet_cpu_pct=%.1f\n", NSEGS,
         (double)answered / span, NSEGS, (long)pg.failed, put_failed, quiet);
  return put_failed || pg.failed;
}
