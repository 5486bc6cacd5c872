/* conn_rate: the reference for the fuzz targets that open one connection per input (dataport, ctrl,
 * http): how many loopback connections per second this machine completes when each one carries a
 * small request to a server thread and a small answer back, with nothing else done (bench/run_fuzz.sh
 * prints it next to the targets' rates).
 *   conn_rate [SECONDS]   (default 5)
 * Per connection: connect, send 64 bytes, half-close, read the server's 64 bytes until it closes. The
 * server accepts on one thread and serves each connection on a new thread, as the data port and the
 * control RPC do. Prints "connections/s N". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *serve(void *arg) {
  int fd = (int)(intptr_t)arg;
  char b[256];
  while (read(fd, b, sizeof(b)) > 0) {
  }
  memset(b, 'a', 64);
  if (write(fd, b, 64) != 64) perror("write");
  close(fd);
  return NULL;
}

static void *acceptor(void *arg) {
  int ls = (int)(intptr_t)arg;
  for (;;) {
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) continue;
    pthread_t th;
    if (pthread_create(&th, NULL, serve, (void *)(intptr_t)fd)) close(fd);
    else pthread_detach(th);
  }
  return NULL;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 128) || getsockname(ls, (struct sockaddr *)&a, &al)) {
    perror("listen");
    return 1;
  }
  pthread_t th;
  pthread_create(&th, NULL, acceptor, (void *)(intptr_t)ls);
  char req[64], rep[256];
  memset(req, 'q', sizeof(req));
  long n = 0;
  double t0 = now_s(), t;
  while ((t = now_s()) - t0 < secs) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) || write(fd, req, sizeof(req)) != (ssize_t)sizeof(req)) {
      perror("connect");
      return 1;
    }
    shutdown(fd, SHUT_WR);
    while (read(fd, rep, sizeof(rep)) > 0) {
    }
    close(fd);
    n++;
  }
  printf("connections/s %.0f\n", (double)n / (t - t0));
  return 0;
}
