/* One thread per connection (see conn_server.h). Finished connection threads are joined at the next
 * accept and at stop, so a long-lived server does not pile up zombies. */
#include "net/conn_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"

struct conn {
  struct conn *next;
  struct mc_conn_server *s;
  int fd, done; /* done: s->mu */
  pthread_t th;
};

struct mc_conn_server {
  int fd;
  atomic_int stop;
  pthread_t acceptor;
  mc_conn_serve_fn serve;
  mc_conn_accept_fn on_accept;
  void *ctx;
  int max_conns;
  const char *name;
  pthread_mutex_t mu; /* guards conns and live */
  struct conn *conns;
  int live; /* connections whose serve() has not returned */
};

static void *conn_main(void *arg) {
  struct conn *c = arg;
  struct mc_conn_server *s = c->s;
  s->serve(s->ctx, c->fd);
  shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_lock(&s->mu);
  c->done = 1;
  s->live--;
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Joins finished connection threads (all of them with all). s->mu held; dropped around each join. */
static void reap(struct mc_conn_server *s, int all) {
  for (struct conn **pp = &s->conns; *pp;) {
    struct conn *c = *pp;
    if (!all && !c->done) {
      pp = &c->next;
      continue;
    }
    *pp = c->next;
    pthread_mutex_unlock(&s->mu);
    pthread_join(c->th, NULL);
    close(c->fd);
    mc_free(c);
    pthread_mutex_lock(&s->mu);
  }
}

static void *acceptor_main(void *arg) {
  struct mc_conn_server *s = arg;
  while (!atomic_load(&s->stop)) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    pthread_mutex_lock(&s->mu);
    int full = s->max_conns > 0 && s->live >= s->max_conns;
    pthread_mutex_unlock(&s->mu);
    if (full) {
      LOG_WARN("%s: too many concurrent connections (%d), dropping one", s->name, s->max_conns);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (s->on_accept) s->on_accept(s->ctx, fd);
    struct conn *c = mc_calloc(1, sizeof(*c));
    c->s = s;
    c->fd = fd;
    pthread_mutex_lock(&s->mu);
    reap(s, 0);
    if (pthread_create(&c->th, NULL, conn_main, c)) {
      close(fd);
      mc_free(c);
    } else {
      c->next = s->conns;
      s->conns = c;
      s->live++;
    }
    pthread_mutex_unlock(&s->mu);
  }
  return NULL;
}

struct mc_conn_server *mc_conn_server_start(int listen_fd, mc_conn_serve_fn serve, mc_conn_accept_fn on_accept,
                                            void *ctx, int max_conns, const char *name) {
  struct mc_conn_server *s = mc_calloc(1, sizeof(*s));
  s->max_conns = max_conns;
  s->name = name;
  s->fd = listen_fd;
  s->serve = serve;
  s->on_accept = on_accept;
  s->ctx = ctx;
  pthread_mutex_init(&s->mu, NULL);
  if (pthread_create(&s->acceptor, NULL, acceptor_main, s)) {
    pthread_mutex_destroy(&s->mu);
    mc_free(s);
    return NULL;
  }
  return s;
}

void mc_conn_server_stop(struct mc_conn_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  shutdown(s->fd, SHUT_RDWR); /* wakes the acceptor's poll at once */
  pthread_join(s->acceptor, NULL);
  close(s->fd);
  pthread_mutex_lock(&s->mu);
  for (struct conn *c = s->conns; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
  reap(s, 1);
  pthread_mutex_unlock(&s->mu);
  pthread_mutex_destroy(&s->mu);
  mc_free(s);
}
