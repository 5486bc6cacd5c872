/* Blocking-socket helpers with bounded waits. Nothing here knows about frames or engines. */
#include "net/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"

static int connect_one(const struct addrinfo *ai, int timeout_ms) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -errno;
  int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc < 0 && errno != EINPROGRESS) {
    rc = -errno;
    close(fd);
    return rc;
  }
  if (rc < 0) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n;
    do n = poll(&p, 1, timeout_ms); while (n < 0 && errno == EINTR);
    if (n <= 0) {
      close(fd);
      return n == 0 ? -ETIMEDOUT : -errno;
    }
    int err = 0;
    socklen_t el = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      close(fd);
      return -err;
    }
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int mc_sock_connect(const char *host, uint16_t port, int timeout_ms) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC}, *res;
  char ps[8];
  snprintf(ps, sizeof(ps), "%u", port);
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g) return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
  int fd = -EHOSTUNREACH;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = connect_one(ai, timeout_ms);
    if (fd >= 0) break;
  }
  freeaddrinfo(res);
  return fd;
}

int mc_sock_listen(const char *bind_ip, uint16_t port, int backlog) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (bind_ip && *bind_ip && inet_pton(AF_INET, bind_ip, &a.sin_addr) != 1) return -EINVAL;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

int mc_sock_listen_range(const char *bind_ip, int min_port, int max_port, int attempts, int backlog,
                         uint16_t *port_out) {
  unsigned seed = (unsigned)(mc_now_ns() ^ (getpid() * 2654435761u));
  int span = max_port - min_port + 1, fd = -EADDRINUSE;
  for (int i = 0; i < attempts; i++) {
    int port = min_port + (int)(rand_r(&seed) % (unsigned)span);
    fd = mc_sock_listen(bind_ip, (uint16_t)port, backlog);
    if (fd >= 0) {
      *port_out = (uint16_t)port;
      return fd;
    }
    if (fd != -EADDRINUSE && fd != -EACCES) return fd;
  }
  return fd;
}

uint16_t mc_sock_local_port(int fd) {
  struct sockaddr_storage ss;
  socklen_t l = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &l)) return 0;
  if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int mc_sock_set_timeouts(int fd, int rcv_ms, int snd_ms) {
  struct timeval r = {rcv_ms / 1000, (rcv_ms % 1000) * 1000}, s = {snd_ms / 1000, (snd_ms % 1000) * 1000};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof(r)) ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof(s)))
    return -errno;
  return 0;
}

int mc_sock_read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
    } else if (r == 0)
      return -EPIPE;
    else if (errno != EINTR)
      return errno == EAGAIN ? -ETIMEDOUT : -errno;
  }
  return 0;
}

int mc_sock_write_full(int fd, const void *buf, size_t n) {
  struct iovec iov = {(void *)buf, n};
  return mc_sock_writev_full(fd, &iov, 1, NULL);
}

int mc_iov_advance(struct iovec **iov, int iovcnt, size_t n) {
  struct iovec *v = *iov;
  while (iovcnt > 0 && n >= v->iov_len) {
    n -= v->iov_len;
    v++;
    iovcnt--;
  }
  if (iovcnt > 0) {
    v->iov_base = (char *)v->iov_base + n;
    v->iov_len -= n;
  }
  *iov = v;
  return iovcnt;
}

int mc_sock_writev_full(int fd, struct iovec *iov, int iovcnt, uint64_t *sent) {
  while (iovcnt > 0) {
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = iovcnt};
    ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN ? -ETIMEDOUT : -errno;
    }
    if (sent) *sent += (uint64_t)w;
    iovcnt = mc_iov_advance(&iov, iovcnt, (size_t)w);
  }
  return 0;
}

uint64_t mc_spin_ns(void) {
  static atomic_llong ns = -1;
  long long v = atomic_load_explicit(&ns, memory_order_relaxed);
  if (v < 0) {
    v = mc_knob_long(MC_KNOB_SPIN_US) * 1000;
    atomic_store(&ns, v);
  }
  return (uint64_t)v;
}

/* Whether a wait that found nothing may poll; counts a skipped one. (Data already there when a wait
 * starts says nothing about polling and changes nothing.) */
int mc_spin_try(struct mc_spin *sp) {
  if (!sp || !mc_spin_ns()) return 0;
  unsigned char k = atomic_load_explicit(&sp->skip, memory_order_relaxed);
  if (!k) return 1;
  atomic_store_explicit(&sp->skip, (unsigned char)(k - 1), memory_order_relaxed);
  return 0;
}

void mc_spin_done(struct mc_spin *sp, int got) {
  if (got) {
    atomic_store_explicit(&sp->backoff, 0, memory_order_relaxed);
    return;
  }
  unsigned char b = atomic_load_explicit(&sp->backoff, memory_order_relaxed);
  b = b ? (unsigned char)MC_MIN(2 * b, 64) : 1;
  atomic_store_explicit(&sp->backoff, b, memory_order_relaxed);
  atomic_store_explicit(&sp->skip, b, memory_order_relaxed);
}

long mc_sock_spin_recv(int fd, void *buf, size_t n, int flags, struct mc_spin *sp) {
  int spin = -1; /* not decided yet: only once the socket was found empty */
  uint64_t deadline = 0;
  for (;;) {
    ssize_t r = recv(fd, buf, n, MSG_DONTWAIT | flags);
    if (r > 0) {
      if (spin == 1) mc_spin_done(sp, 1);
      return (long)r;
    }
    if (r == 0) return -EPIPE;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return -errno;
    if (spin < 0) spin = mc_spin_try(sp);
    if (!spin) return -EAGAIN;
    uint64_t now = mc_now_ns();
    if (!deadline) deadline = now + mc_spin_ns();
    if (now >= deadline) {
      mc_spin_done(sp, 0);
      return -EAGAIN;
    }
    sched_yield();
  }
}

int mc_spin_until_zero(_Atomic int *pending, struct mc_spin *sp) {
  if (!atomic_load(pending)) return 1;
  if (!mc_spin_try(sp)) return 0;
  uint64_t deadline = mc_now_ns() + mc_spin_ns();
  while (atomic_load(pending)) {
    if (mc_now_ns() >= deadline) {
      mc_spin_done(sp, 0);
      return 0;
    }
    sched_yield();
  }
  mc_spin_done(sp, 1);
  return 1;
}

static int wait_fd(int fd, short ev, uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = mc_now_ns();
    if (now >= deadline_ns) return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = ev};
    int n = poll(&p, 1, (int)((deadline_ns - now) / 1000000 + 1));
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

int mc_sock_read_atleast_spin(int fd, void *buf, size_t min, size_t max, size_t *got, int timeout_ms,
                              struct mc_spin *sp) {
  uint64_t deadline = mc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  char *p = buf;
  size_t g = 0;
  int first = 1, rc = 0;
  while (g < min) { /* try first (polling a little, once), poll(2) only when the socket stays empty */
    long r = mc_sock_spin_recv(fd, p + g, max - g, 0, first ? sp : NULL);
    first = 0;
    if (r > 0) {
      g += (size_t)r;
    } else if (r == -EAGAIN) {
      if ((rc = wait_fd(fd, POLLIN, deadline))) break;
    } else {
      rc = (int)r;
      break;
    }
  }
  if (got) *got = g;
  return rc;
}

int mc_sock_read_deadline_spin(int fd, void *buf, size_t n, int timeout_ms, struct mc_spin *sp) {
  return mc_sock_read_atleast_spin(fd, buf, n, n, NULL, timeout_ms, sp);
}

int mc_sock_read_deadline(int fd, void *buf, size_t n, int timeout_ms) {
  return mc_sock_read_deadline_spin(fd, buf, n, timeout_ms, NULL);
}

int mc_sock_write_deadline(int fd, const void *buf, size_t n, int timeout_ms) {
  struct iovec iov = {(void *)buf, n};
  return mc_sock_writev_deadline(fd, &iov, 1, timeout_ms);
}

int mc_sock_writev_deadline(int fd, struct iovec *iov, int iovcnt, int timeout_ms) {
  uint64_t deadline = mc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  while (iovcnt > 0) {
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
    ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return -errno;
      int rc = wait_fd(fd, POLLOUT, deadline);
      if (rc) return rc;
      continue;
    }
    iovcnt = mc_iov_advance(&iov, iovcnt, (size_t)w);
  }
  return 0;
}

static char bind_ip[INET_ADDRSTRLEN];
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void read_bind_ip(void) {
  const char *env = mc_knob_str(MC_KNOB_TCP_BIND_ADDRESS);
  struct in_addr a;
  if (env && *env && inet_pton(AF_INET, env, &a) == 1) snprintf(bind_ip, sizeof(bind_ip), "%s", env);
  else if (env && *env) LOG_WARN("MC_TCP_BIND_ADDRESS=%s is not an IPv4 address: listening on every address", env);
}

const char *mc_te_bind_ip(void) {
  pthread_once(&bind_once, read_bind_ip);
  return *bind_ip ? bind_ip : NULL;
}

void mc_local_ip(char *buf, size_t len) {
  const char *env = mc_knob_str(MC_KNOB_TCP_BIND_ADDRESS);
  if (env && *env) {
    snprintf(buf, len, "%s", env);
    return;
  }
  snprintf(buf, len, "127.0.0.1");
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs)) return;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING)) continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, (socklen_t)len);
    break;
  }
  freeifaddrs(ifs);
}

void mc_rpc_port_range(int *min_port, int *max_port) {
  long lo = mc_knob_long(MC_KNOB_MIN_RPC_PORT);
  long hi = mc_knob_long(MC_KNOB_MAX_RPC_PORT);
  if (lo < 1024 || hi < lo || (lo <= 60999 && hi >= 32768)) {
    if (lo != 15000 || hi != 17000)
      LOG_WARN("RPC port range %ld-%ld is unusable (below 1024 or overlapping 32768-60999); using 15000-17000", lo, hi);
    lo = 15000;
    hi = 17000;
  }
  *min_port = (int)lo;
  *max_port = (int)hi;
}
