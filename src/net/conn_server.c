/* One thread per connection (see conn_server.h). A connection thread that finishes wakes the acceptor
 * (a pipe), which joins it at once, so a long-lived server piles up no finished threads between accepts. */
#include "net/conn_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

struct conn {
  struct conn *next;
  struct mc_conn_server *s;
  int fd;
  int done;    /* serve() returned (or was skipped); s->mu */
  int waiting; /* no byte from the peer yet; s->mu */
  int evicted; /* closed to make room at the cap (no longer counted in live); s->mu */
  pthread_t th;
};

struct mc_conn_server {
  int fd;
  int wake[2]; /* a finished connection thread writes a byte: the acceptor reaps */
  atomic_int stop;
  pthread_t acceptor;
  struct mc_conn_server_opts o;
  pthread_mutex_t mu; /* guards conns and live */
  struct conn *conns; /* newest first */
  int live;           /* connections counted against max_conns: not finished, not evicted */
};

/* Waits for the first byte (or EOF: serve() reports it). 1 to serve, 0 to close. */
static int first_byte(struct conn *c) {
  struct mc_conn_server *s = c->s;
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, s->o.first_byte_timeout_ms);
  while (r < 0 && errno == EINTR);
  pthread_mutex_lock(&s->mu);
  c->waiting = 0;
  int go = r > 0 && !c->evicted && !atomic_load(&s->stop);
  pthread_mutex_unlock(&s->mu);
  if (r == 0) LOG_WARN_LIMITED("%s: closing a connection that sent nothing for %d ms", s->o.name,
                               s->o.first_byte_timeout_ms);
  return go;
}

static void *conn_main(void *arg) {
  mc_thread_name("mc-conn");
  struct conn *c = arg;
  struct mc_conn_server *s = c->s;
  if (s->o.first_byte_timeout_ms <= 0 || first_byte(c)) s->o.serve(s->o.ctx, c->fd);
  shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_lock(&s->mu);
  c->done = 1;
  if (!c->evicted) s->live--;
  pthread_mutex_unlock(&s->mu);
  char b = 0;
  ssize_t w = write(s->wake[1], &b, 1); /* a full pipe already holds a wake-up */
  (void)w;
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
    pp = &s->conns; /* the list may have changed meanwhile */
  }
}

/* At the cap: closes the oldest connection still waiting for its first byte. 1 when one was. s->mu held. */
static int evict_waiting(struct mc_conn_server *s) {
  struct conn *oldest = NULL;
  for (struct conn *c = s->conns; c; c = c->next)
    if (c->waiting && !c->evicted && !c->done) oldest = c;
  if (!oldest) return 0;
  oldest->evicted = 1;
  s->live--;
  shutdown(oldest->fd, SHUT_RDWR); /* wakes its poll */
  return 1;
}

static void drain_wake(struct mc_conn_server *s) {
  char buf[256];
  while (read(s->wake[0], buf, sizeof(buf)) > 0) {
  }
}

static void *acceptor_main(void *arg) {
  mc_thread_name("mc-accept");
  struct mc_conn_server *s = arg;
  while (!atomic_load(&s->stop)) {
    struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
    int r = poll(p, 2, 1000);
    if (r > 0 && p[1].revents) {
      drain_wake(s);
      pthread_mutex_lock(&s->mu);
      reap(s, 0);
      pthread_mutex_unlock(&s->mu);
    }
    if (r <= 0 || !p[0].revents) continue;
    int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    pthread_mutex_lock(&s->mu);
    int full = s->o.max_conns > 0 && s->live >= s->o.max_conns && !evict_waiting(s);
    pthread_mutex_unlock(&s->mu);
    if (full) {
      LOG_WARN_LIMITED("%s: too many concurrent connections (%d), dropping one", s->o.name, s->o.max_conns);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (s->o.on_accept) s->o.on_accept(s->o.ctx, fd);
    struct conn *c = mc_calloc(1, sizeof(*c));
    c->s = s;
    c->fd = fd;
    c->waiting = s->o.first_byte_timeout_ms > 0;
    pthread_mutex_lock(&s->mu);
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

struct mc_conn_server *mc_conn_server_start_opts(int listen_fd, const struct mc_conn_server_opts *o) {
  struct mc_conn_server *s = mc_calloc(1, sizeof(*s));
  s->o = *o;
  if (!s->o.name) s->o.name = "server";
  s->fd = listen_fd;
  if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
    mc_free(s);
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  if (pthread_create(&s->acceptor, NULL, acceptor_main, s)) {
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    mc_free(s);
    return NULL;
  }
  return s;
}

struct mc_conn_server *mc_conn_server_start(int listen_fd, mc_conn_serve_fn serve, mc_conn_accept_fn on_accept,
                                            void *ctx, int max_conns, const char *name) {
  struct mc_conn_server_opts o = {
      .serve = serve, .on_accept = on_accept, .ctx = ctx, .name = name, .max_conns = max_conns};
  return mc_conn_server_start_opts(listen_fd, &o);
}

void mc_conn_server_stop(struct mc_conn_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  shutdown(s->fd, SHUT_RDWR); /* wakes the acceptor's poll at once */
  char b = 0;
  ssize_t w = write(s->wake[1], &b, 1);
  (void)w;
  pthread_join(s->acceptor, NULL);
  close(s->fd);
  pthread_mutex_lock(&s->mu);
  for (struct conn *c = s->conns; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
  reap(s, 1);
  pthread_mutex_unlock(&s->mu);
  close(s->wake[0]);
  close(s->wake[1]);
  pthread_mutex_destroy(&s->mu);
  mc_free(s);
}
