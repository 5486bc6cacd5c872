/* ping_ref: the reference for the master's CPU under pings (bench/RESULTS.md, "The master at 100 000
 * segments"): what this machine charges a server that only receives small requests over TCP on loopback and
 * answers each one, with none of the master's work. A server thread pinned to CPU 0 reads what has come and
 * answers it, a client thread pinned to CPU 1 sends RATE requests of 24 bytes a second pipelined on one
 * connection (at most 512 unanswered, as bench/master_segments pings). Two ways of answering:
 *   each    one send() per reply (what the master's RPC server does: one reply, one sendmsg);
 *   batched one send() for the replies to everything one read brought in.
 * For each it prints
 *   PINGREF mode=<each|batched> rate=<answered per s> server_cpu_pct=<c> us_per_reply=<u>
 * where server_cpu_pct is the server thread's own CPU time (user + system) over the window.
 * Usage: ping_ref [RATE=100000] [SECONDS=5] */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 24
#define WINDOW 512

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double thread_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
  pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

struct server {
  int fd, batched;
  volatile int stop;
  double cpu_s, t_s; /* over the measured window (between mark and stop) */
  volatile int mark;
};

static void *server_main(void *arg) {
  struct server *sv = arg;
  pin(0);
  static uint8_t in[1 << 16], out[1 << 16];
  size_t have = 0;
  double c0 = 0, t0 = 0;
  int marked = 0;
  while (!sv->stop) {
    if (sv->mark && !marked) marked = 1, c0 = thread_cpu_s(), t0 = now_s();
    ssize_t n = recv(sv->fd, in + have, sizeof(in) - have, 0);
    if (n <= 0) break;
    have += (size_t)n;
    size_t k = have / MSG, o = 0;
    for (size_t i = 0; i < k; i++) {
      if (sv->batched) memcpy(out + o, in + i * MSG, MSG), o += MSG;
      else if (send(sv->fd, in + i * MSG, MSG, MSG_NOSIGNAL) != MSG) return NULL;
    }
    if (sv->batched && o && send(sv->fd, out, o, MSG_NOSIGNAL) != (ssize_t)o) return NULL;
    memmove(in, in + k * MSG, have - k * MSG);
    have -= k * MSG;
  }
  sv->cpu_s = thread_cpu_s() - c0;
  sv->t_s = now_s() - t0;
  return NULL;
}

static void run(int batched, long rate, double secs) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &al)) {
    perror("listen");
    exit(1);
  }
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (struct sockaddr *)&a, sizeof(a))) {
    perror("connect");
    exit(1);
  }
  struct server sv = {.fd = accept(ls, NULL, NULL), .batched = batched};
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(sv.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pthread_t th;
  pthread_create(&th, NULL, server_main, &sv);
  pin(1);
  uint8_t req[MSG] = {0}, rep[1 << 16];
  long sent = 0, got = 0, got_mark = 0, got_bytes = 0;
  double start = now_s(), mark_t = start + 1.0, end = mark_t + secs;
  while (now_s() < end) {
    double t = now_s();
    long due = (long)((t - start) * (double)rate);
    while (sent < due && sent - got < WINDOW) {
      if (send(c, req, MSG, MSG_NOSIGNAL) != MSG) exit(1);
      sent++;
    }
    ssize_t n = recv(c, rep, sizeof(rep), MSG_DONTWAIT);
    if (n > 0) got_bytes += n, got = got_bytes / MSG;
    else usleep(50);
    if (!sv.mark && t >= mark_t) sv.mark = 1, got_mark = got;
  }
  sv.stop = 1;
  shutdown(c, SHUT_RDWR);
  pthread_join(th, NULL);
  long answered = got - got_mark;
  double per_s = sv.t_s > 0 ? (double)answered / sv.t_s : 0;
  printf("PINGREF mode=%s rate=%.0f server_cpu_pct=%.1f us_per_reply=%.2f\n", batched ? "batched" : "each", per_s,
         sv.t_s > 0 ? 100.0 * sv.cpu_s / sv.t_s : 0, answered ? sv.cpu_s * 1e6 / (double)answered : 0);
  fflush(stdout);
  close(c);
  close(sv.fd);
  close(ls);
}

int main(int argc, char **argv) {
  long rate = argc > 1 ? atol(argv[1]) : 100000;
  double secs = argc > 2 ? atof(argv[2]) : 5;
  run(0, rate, secs);
  run(1, rate, secs);
  return 0;
}
