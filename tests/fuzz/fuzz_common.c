/* Shared pieces of the fuzz targets (see fuzz_common.h). */
#include "fuzz_common.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "master/master_int.h"

/* ---------------------------------------------------------------- input */

uint8_t fz_u8(struct fz_in *in) { return in->off < in->n ? in->p[in->off++] : 0; }

uint16_t fz_u16(struct fz_in *in) {
  uint16_t lo = fz_u8(in);
  return (uint16_t)(lo | fz_u8(in) << 8);
}

uint64_t fz_u64(struct fz_in *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)fz_u8(in) << (8 * i);
  return v;
}

const uint8_t *fz_take(struct fz_in *in, size_t n, size_t *got) {
  *got = n < fz_left(in) ? n : fz_left(in);
  const uint8_t *p = *got ? in->p + in->off : NULL;
  in->off += *got;
  return p;
}

/* ---------------------------------------------------------------- environment */

void fz_quiet(void) {
  static int level = -1;
  if (level < 0) {
    const char *v = getenv("MC_FUZZ_LOG_LEVEL");
    level = v && *v ? mc_log_parse_level(v) : MC_LOG_ERROR;
    if (level < 0) level = MC_LOG_ERROR;
  }
  mc_log_set_level(level);
}

int fz_env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0");
}

/* ---------------------------------------------------------------- staying on this machine */

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
  static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
  if (!real) real = (int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **))dlsym(
                 RTLD_NEXT, "getaddrinfo");
  struct addrinfo h = {0};
  if (hints) h = *hints;
  if (node && strcmp(node, "localhost")) h.ai_flags |= AI_NUMERICHOST;
  return real(node, service, &h, res);
}

static int loopback(const struct sockaddr *a) {
  if (a->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family != AF_INET6) return 1; /* unix sockets and the like stay on the machine */
  const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(x) || (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
  if (addr && !loopback(addr)) {
    errno = ENETUNREACH;
    return -1;
  }
  return real(fd, addr, len);
}

/* ---------------------------------------------------------------- loopback exchange */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

long fz_exchange(uint16_t port, const void *req, size_t len, int timeout_ms, int quiet_ms, fz_reply_fn on_reply,
                 void *ctx) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
    close(fd);
    return -1;
  }
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms, quiet_until = UINT64_MAX;
  const uint8_t *p = req;
  size_t sent = 0;
  long got = 0;
  int wr_open = 1;
  uint8_t buf[65536];
  /* send and receive together: a server that answers while we still send must not deadlock us */
  for (;;) {
    uint64_t now = now_ms();
    if (wr_open && sent == len) {
      shutdown(fd, SHUT_WR);
      wr_open = 0;
    }
    if (!wr_open && quiet_ms > 0 && quiet_until == UINT64_MAX) quiet_until = now + (uint64_t)quiet_ms;
    uint64_t until = deadline < quiet_until ? deadline : quiet_until;
    if (now >= until) break;
    struct pollfd pf = {.fd = fd, .events = POLLIN | (wr_open ? POLLOUT : 0)};
    if (poll(&pf, 1, (int)(until - now)) <= 0) break;
    if (pf.revents & POLLIN || pf.revents & (POLLHUP | POLLERR)) {
      ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (r > 0) {
        got += r;
        quiet_until = now_ms() + (uint64_t)quiet_ms; /* pauses inside an answer are bounded the same way */
        if (quiet_ms <= 0) quiet_until = UINT64_MAX;
        if (on_reply && on_reply(ctx, buf, (size_t)r)) break;
      }
    }
    if (wr_open && pf.revents & POLLOUT) {
      ssize_t w = send(fd, p + sent, len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) sent += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR) wr_open = 0; /* the server hung up: read what it said */
    }
  }
  close(fd);
  return got;
}

/* ---------------------------------------------------------------- a master */

static struct mc_master *master;
static struct mc_master_cfg master_cfg;

void fz_master_stop(void) {
  if (!master) return;
  mc_master_destroy(master);
  mc_master_cfg_free(&master_cfg);
  master = NULL;
}

struct mc_master *fz_master_start(const char *const *opts) {
  static int registered;
  char err[256];
  fz_quiet();
  mc_master_cfg_defaults(&master_cfg);
  for (size_t i = 0; opts && opts[i]; i += 2)
    if (mc_cfg_set(mc_master_opts, &master_cfg, opts[i], opts[i + 1], err, sizeof(err))) abort();
  if (mc_master_cfg_finalize(&master_cfg, err, sizeof(err)) || mc_master_create(&master_cfg, &master)) abort();
  if (!registered++) atexit(fz_master_stop);
  return master;
}

/* Copies the ids of up to cap clients (or, with segs, of mounted segments and their clients). */
static uint32_t registry(struct mc_master *m, struct mc_uuid *ids, struct mc_uuid *owners, uint32_t cap, int segs) {
  uint32_t n = 0;
  pthread_rwlock_rdlock(&m->seg_mu);
  if (segs)
    for (uint32_t i = 0; i < m->nsegs && n < cap; i++, n++) ids[n] = m->segs[i]->id, owners[n] = m->segs[i]->client;
  for (uint32_t b = 0; !segs && b < m->clients.nb; b++)
    for (struct mc_hnode *x = m->clients.b[b]; x && n < cap; x = x->next)
      ids[n++] = MC_HTAB_ENTRY(x, struct mclient, hn)->id;
  pthread_rwlock_unlock(&m->seg_mu);
  return n;
}

void fz_master_reset(struct mc_master *m) {
  struct mc_uuid ids[256], owners[256];
  uint32_t n;
  mc_tasks_expire(m, UINT64_MAX); /* every task (at most one per frame) fails: no object stays under one */
  for (int round = 0; round < 16 && (n = registry(m, ids, NULL, 256, 0)) > 0; round++)
    for (uint32_t i = 0; i < n; i++) mc_client_expire(m, ids[i], "fuzz reset", NULL);
  for (int round = 0; round < 16 && (n = registry(m, ids, owners, 256, 1)) > 0; round++)
    for (uint32_t i = 0; i < n; i++) mc_master_unmount(m, ids[i], owners[i], NULL);
  mc_master_remove_matching(m, NULL, NULL, 1, NULL);
}

/* ---------------------------------------------------------------- an engine */

static transfer_engine_t engine;
static uint16_t engine_data_port, engine_rpc_port;

static void engine_stop(void) {
  destroyTransferEngine(engine);
  engine = NULL;
}

transfer_engine_t fz_engine(uint16_t *data_port, uint16_t *rpc_port) {
  if (!engine) {
    fz_quiet();
    setenv("MC_FORCE_TCP", "1", 0);
    engine = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 1);
    if (!engine) abort();
    char *text = mc_te_segment_json(engine, LOCAL_SEGMENT);
    json_t *d = json_loads(text ? text : "", 0, NULL);
    free(text);
    engine_data_port = (uint16_t)json_integer_value(json_object_get(d, "tcp_data_port"));
    engine_rpc_port = (uint16_t)json_integer_value(json_object_get(d, "rpc_port"));
    json_decref(d);
    if (!engine_data_port || !engine_rpc_port) abort();
    atexit(engine_stop);
  }
  if (data_port) *data_port = engine_data_port;
  if (rpc_port) *rpc_port = engine_rpc_port;
  return engine;
}
