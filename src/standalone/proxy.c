/* Standalone client mode, the dummy side (docs/standalone.md): the back-end (client.h, struct mc_backend)
 * of a handle set up with mc_store_setup_dummy, which owns no segment and no engine. It creates one sealed
 * memfd (memory pool, then staging area), hands it to the real client process over the unix socket
 * (wire.h), and forwards every call as a frame that names offsets in that memory: the real client's
 * transfers read and write the dummy's pages directly.
 * Buffers outside the shared memory, and the copying calls, go through the staging area (one copy, in
 * this process). One connection, one request at a time (mu). A lost connection fails later calls -900. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/hostport.h"
#include "common/log.h"
#include "common/util.h"
#include "net/sock.h"
#include "standalone/standalone.h"
#include "standalone/wire.h"

#define HELLO_TIMEOUT_MS 60000
#define CALL_TIMEOUT_MS 120000 /* bounds a reply; the real client's own calls are bounded below this */
#define POOL_ALIGN 64
#define MAX_REQ (MC_DUMMY_MAX_BODY - 4096) /* requests are cut to stay below the real client's frame limit */
#define CFG_BYTES 4096                       /* room for the config of a write (preferred segments included) */

/* ------------------------------------------------------------------ the dummy */

struct mc_dummy {
  pthread_mutex_t mu; /* one request at a time on fd; a leaf */
  int fd;             /* -1 once the connection is lost */
  char *base;         /* the shared memory: [0, pool) memory pool, [pool, total) staging */
  uint64_t pool, total;
  _Atomic uint64_t bump; /* alloc_from_mem_pool's cursor */
  char name[300];        /* the real client's segment name */
  int owner;             /* the process that connected; a forked child must not write into its stream */
};

static int send_frame(int fd, uint16_t op, uint16_t flags, const struct mc_dbuf *b, int memfd) {
  struct mc_dummy_hdr h = {MC_DUMMY_MAGIC, op, flags, (uint32_t)b->n, 0};
  struct iovec iov[2] = {{&h, sizeof(h)}, {b->p, b->n}};
  if (memfd < 0) return mc_sock_writev_deadline(fd, iov, b->n ? 2 : 1, CALL_TIMEOUT_MS);
  char ctl[CMSG_SPACE(sizeof(int))] = {0};
  struct msghdr m = {.msg_iov = iov, .msg_iovlen = b->n ? 2 : 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &memfd, sizeof(int));
  size_t want = sizeof(h) + b->n;
  ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL); /* a HELLO is small: one sendmsg carries it whole */
  return n == (ssize_t)want ? 0 : -EIO;
}

/* Sends a request and reads its reply into *rep (caller frees rep->p). 0, or -900 with the connection
 * dropped (a half-read reply leaves the stream out of step). Called with d->mu held. */
static int call(struct mc_dummy *d, uint16_t op, uint16_t flags, const struct mc_dbuf *req, struct mc_dbuf *rep,
                int memfd) {
  memset(rep, 0, sizeof(*rep));
  if (d->fd < 0) return MC_RPC_FAIL;
  if (mc_self_pid() != d->owner) { /* the parent's connection: its frames would interleave with ours */
    LOG_WARN_LIMITED("standalone: a dummy set up in process %d cannot be used in its child %d", d->owner, mc_self_pid());
    return MC_RPC_FAIL;
  }
  struct mc_dummy_hdr h;
  int rc = send_frame(d->fd, op, flags, req, memfd);
  if (!rc) rc = mc_sock_read_deadline(d->fd, &h, sizeof(h), op == MC_DOP_HELLO ? HELLO_TIMEOUT_MS : CALL_TIMEOUT_MS);
  if (!rc && (h.magic != MC_DUMMY_MAGIC || h.op != op || h.len > MC_DUMMY_MAX_BODY)) rc = -EPROTO;
  if (!rc && h.len) {
    rep->p = mc_malloc(h.len);
    rep->n = rep->cap = h.len;
    rc = mc_sock_read_deadline(d->fd, rep->p, h.len, CALL_TIMEOUT_MS);
  }
  if (rc) {
    LOG_ERROR("standalone: lost the real client %s (%s); this dummy's calls now fail", d->name, strerror(-rc));
    close(d->fd);
    d->fd = -1;
    mc_free(rep->p);
    memset(rep, 0, sizeof(*rep));
    return MC_RPC_FAIL;
  }
  return 0;
}

/* The i64 results of a reply, n of them, into out (every one `fail` when the reply is short). */
static void reply_i64(const struct mc_dbuf *rep, int64_t *out, size_t n, int64_t fail) {
  if (rep->n < n * 8) {
    for (size_t i = 0; i < n; i++) out[i] = fail;
    return;
  }
  memcpy(out, rep->p, n * 8);
}

static void dummy_close(struct mc_dummy *d);

static int dummy_open(struct mc_dummy **out, uint64_t pool, uint64_t staging, const char *server_address) {
  *out = NULL;
  int port = MC_DUMMY_DEFAULT_PORT;
  char host[256];
  uint16_t p16 = 0;
  if (server_address && *server_address) {
    if (mc_split_host_port(server_address, host, sizeof(host), &p16, 0) || !p16) {
      LOG_ERROR("setup_dummy: server_address '%s' is not host:port", server_address);
      return MC_INVALID_PARAMS;
    }
    port = p16;
  }
  uint64_t total = pool + staging;
  if (!total || total < pool || total > (1ull << 46)) return MC_INVALID_PARAMS;
  struct mc_dummy *d = mc_calloc(1, sizeof(*d));
  pthread_mutex_init(&d->mu, NULL);
  d->pool = pool;
  d->total = total;
  d->fd = -1;
  d->owner = mc_self_pid();
  int memfd = memfd_create("mooncake_dummy_pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int rc = MC_INVALID_PARAMS;
  if (memfd < 0 || ftruncate(memfd, (off_t)total) ||
      fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
    LOG_ERROR("setup_dummy: shared memory of %llu bytes: %s", (unsigned long long)total, strerror(errno));
    goto fail;
  }
  d->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (d->base == MAP_FAILED) {
    d->base = NULL;
    goto fail;
  }
  struct sockaddr_un a;
  unsigned alen = mc_dummy_sockaddr(&a, port);
  d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (d->fd < 0 || connect(d->fd, (struct sockaddr *)&a, alen)) {
    LOG_ERROR("setup_dummy: no real client at @mooncake_client_%d.sock (%s); start mooncake_client --port=%d", port,
              strerror(errno), port);
    rc = MC_RPC_FAIL;
    goto fail;
  }
  struct mc_dbuf req = {0}, rep;
  mc_dbuf_u64(&req, pool);
  mc_dbuf_u64(&req, total);
  rc = call(d, MC_DOP_HELLO, 0, &req, &rep, memfd);
  mc_free(req.p);
  if (!rc) {
    int64_t st = MC_RPC_FAIL;
    reply_i64(&rep, &st, 1, MC_RPC_FAIL);
    rc = (int)st;
    if (!rc && rep.n > 8) snprintf(d->name, sizeof(d->name), "%.*s", (int)(rep.n - 8), rep.p + 8);
    if (rc) LOG_ERROR("setup_dummy: the real client on port %d refused this dummy: %d", port, rc);
  }
  mc_free(rep.p);
  if (rc) goto fail;
  close(memfd);
  *out = d;
  return 0;
fail:
  if (memfd >= 0) close(memfd);
  dummy_close(d);
  return rc;
}

static void dummy_close(struct mc_dummy *d) {
  if (!d) return;
  if (d->fd >= 0) close(d->fd); /* the real client drops our memory when it sees the end of the stream */
  if (d->base) munmap(d->base, d->total);
  pthread_mutex_destroy(&d->mu);
  mc_free(d);
}

static uint64_t dummy_alloc(struct mc_dummy *d, size_t size) {
  uint64_t n = (size + POOL_ALIGN - 1) & ~(uint64_t)(POOL_ALIGN - 1);
  if (!size || n < size) return 0;
  uint64_t off = atomic_load(&d->bump);
  do {
    if (n > d->pool - off) return 0;
  } while (!atomic_compare_exchange_weak(&d->bump, &off, off + n));
  return (uint64_t)(uintptr_t)(d->base + off);
}

/* Offset of [p, p+n) inside the shared memory, or -1. */
static int64_t shared_off(const struct mc_dummy *d, const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)d->base;
  if (a < b || a - b > d->total || n > d->total - (a - b)) return -1;
  return (int64_t)(a - b);
}

static void put_config(struct mc_dbuf *b, const mc_replicate_config_t *c) {
  mc_replicate_config_t def = {1, MC_SOFT_PIN_KEEP, -1, 0, NULL, 0};
  if (!c) c = &def;
  mc_dbuf_u64(b, c->replica_num);
  int32_t sp = c->soft_pin_action, hp = c->with_hard_pin;
  mc_dbuf_put(b, &sp, 4);
  mc_dbuf_u64(b, (uint64_t)c->soft_pin_ttl_ms);
  mc_dbuf_put(b, &hp, 4);
  uint32_t m = 0;
  for (size_t i = 0; i < c->preferred_segments_count; i++) m += c->preferred_segments[i] != NULL;
  mc_dbuf_u32(b, m);
  for (size_t i = 0; i < c->preferred_segments_count; i++)
    if (c->preferred_segments[i]) mc_dbuf_str(b, c->preferred_segments[i]);
}

/* One data request (WRITE (with groups: each key's group id) or READ, or with obj PUT_WRITE or GET_READ:
 * buffer j at object offset obj[j]) over
 * keys[0..count): object i is buffers bufs[first[i] .. first[i]+nb[i]). Keys whose buffers all lie in the
 * shared memory (and, for copying writes, none) go by offset; the others are gathered into / scattered from
 * the staging area, in waves that fit it; a key larger than the whole staging area gets -600. */
static void data_call(struct mc_dummy *d, int op, int flags, int copy, const char **keys, void *const *bufs,
                      const size_t *sizes, const size_t *obj, const size_t *nb, size_t count,
                      const mc_replicate_config_t *cfg, const char *const *groups, int64_t *res) {
  int in_op = op == MC_DOP_WRITE || op == MC_DOP_PUT_WRITE; /* bytes go from the caller's buffers */
  uint64_t per_buf = obj ? 24 : 16;
  size_t *first = mc_calloc(count + 1, sizeof(size_t));
  for (size_t i = 0; i < count; i++) first[i + 1] = first[i] + nb[i];
  uint64_t stage = d->total - d->pool;
  size_t *in = mc_calloc(count ? count : 1, sizeof(size_t)); /* keys of this wave */
  uint64_t *soff = mc_calloc(count ? count : 1, sizeof(uint64_t)); /* staging offset, or UINT64_MAX = direct */
  uint64_t *stot = mc_calloc(count ? count : 1, sizeof(uint64_t)); /* bytes of each key */
  int64_t *r = mc_calloc(count ? count : 1, sizeof(int64_t));
  pthread_mutex_lock(&d->mu);
  for (size_t i = 0; i < count;) {
    size_t m = 0, nbuf = 0;
    uint64_t used = 0, body = CFG_BYTES;
    for (; i < count; i++) {
      uint64_t tot = 0, kb = 8 + strlen(keys[i]) + per_buf * nb[i]; /* this key's bytes in the request */
      if (groups) kb += 4 + strlen(groups[i] ? groups[i] : "");
      if (kb > MAX_REQ || nb[i] > MC_DUMMY_MAX_BUFS) {
        res[i] = MC_INVALID_PARAMS;
        continue;
      }
      if (body + kb > MAX_REQ || m == MC_DUMMY_MAX_KEYS || nbuf + nb[i] > MC_DUMMY_MAX_BUFS) break;
      int direct = !copy;
      for (size_t j = first[i]; j < first[i + 1]; j++) {
        tot += sizes[j];
        if (direct && shared_off(d, bufs[j], sizes[j]) < 0) direct = 0;
      }
      stot[i] = tot;
      if (copy && !tot) { /* a copying write of nothing: -600, as the real client's own put */
        res[i] = MC_INVALID_PARAMS;
        continue;
      }
      if (direct) {
        soff[i] = UINT64_MAX;
      } else if (tot > stage) {
        res[i] = MC_INVALID_PARAMS;
        continue;
      } else if (tot > stage - used) {
        break;
      } else {
        soff[i] = d->pool + used;
        used += tot;
      }
      in[m++] = i;
      body += kb;
      nbuf += nb[i];
    }
    if (!m) continue;
    struct mc_dbuf req = {0}, rep;
    if (op == MC_DOP_WRITE) put_config(&req, cfg);
    mc_dbuf_u32(&req, (uint32_t)m);
    for (size_t q = 0; q < m; q++) {
      size_t k = in[q];
      mc_dbuf_str(&req, keys[k]);
      if (groups) mc_dbuf_str(&req, groups[k] ? groups[k] : "");
      if (soff[k] != UINT64_MAX) {
        uint64_t o = soff[k];
        for (size_t j = first[k]; in_op && j < first[k + 1]; j++)
          memcpy(d->base + o, bufs[j], sizes[j]), o += sizes[j];
        if (!obj) { /* one staged buffer: the object's bytes in order */
          mc_dbuf_u32(&req, 1);
          mc_dbuf_u64(&req, soff[k]);
          mc_dbuf_u64(&req, stot[k]);
          continue;
        }
        mc_dbuf_u32(&req, (uint32_t)nb[k]); /* ranged: each buffer staged in turn, at its own object offset */
        for (size_t j = first[k], at = soff[k]; j < first[k + 1]; at += sizes[j++]) {
          mc_dbuf_u64(&req, at);
          mc_dbuf_u64(&req, sizes[j]);
          mc_dbuf_u64(&req, obj[j]);
        }
        continue;
      }
      mc_dbuf_u32(&req, (uint32_t)nb[k]);
      for (size_t j = first[k]; j < first[k + 1]; j++) {
        mc_dbuf_u64(&req, (uint64_t)shared_off(d, bufs[j], sizes[j]));
        mc_dbuf_u64(&req, sizes[j]);
        if (obj) mc_dbuf_u64(&req, obj[j]);
      }
    }
    int rc = call(d, (uint16_t)op, (uint16_t)flags, &req, &rep, -1);
    if (rc) for (size_t q = 0; q < m; q++) r[q] = rc;
    else reply_i64(&rep, r, m, MC_RPC_FAIL);
    for (size_t q = 0; q < m; q++) {
      size_t k = in[q];
      res[k] = r[q];
      if (in_op || soff[k] == UINT64_MAX || r[q] <= 0) continue;
      uint64_t left = (uint64_t)r[q], o = soff[k];
      for (size_t j = first[k]; left && j < first[k + 1]; j++) {
        size_t c = sizes[j] < left ? sizes[j] : left;
        memcpy(bufs[j], d->base + o, c);
        o += c, left -= c;
      }
    }
    mc_free(req.p);
    mc_free(rep.p);
  }
  pthread_mutex_unlock(&d->mu);
  mc_free(r);
  mc_free(stot);
  mc_free(soff);
  mc_free(in);
  mc_free(first);
}

static size_t *ones(size_t count) {
  size_t *nb = mc_calloc(count ? count : 1, sizeof(size_t));
  for (size_t i = 0; i < count; i++) nb[i] = 1;
  return nb;
}

static void dummy_write(struct mc_dummy *d, int flags, const char *const *keys, const void *const *values,
                    const size_t *sizes, const size_t *nbufs, size_t count, const mc_replicate_config_t *cfg,
                    const char *const *groups, int single, int *results) {
  size_t *nb = nbufs ? NULL : ones(count);
  int64_t *r = mc_calloc(count ? count : 1, sizeof(int64_t));
  int wire = (flags & MC_WRITE_UPSERT) | (single ? MC_DUMMY_SINGLE : 0) | (groups ? MC_DUMMY_GROUPS : 0);
  data_call(d, MC_DOP_WRITE, wire, flags & MC_WRITE_COPY, (const char **)keys, (void *const *)values, sizes, NULL,
            nbufs ? nbufs : nb, count, cfg, groups, r);
  for (size_t i = 0; i < count; i++) results[i] = (int)r[i];
  mc_free(r);
  mc_free(nb);
}

static void dummy_read(struct mc_dummy *d, const char *const *keys, void *const *bufs, const size_t *sizes,
                   const size_t *nbufs, size_t count, int single, int64_t *results) {
  size_t *nb = nbufs ? NULL : ones(count);
  data_call(d, MC_DOP_READ, single ? MC_DUMMY_SINGLE : 0, 0, (const char **)keys, bufs, sizes, NULL,
            nbufs ? nbufs : nb, count, NULL, NULL, results);
  mc_free(nb);
}

static int64_t dummy_get_copy(struct mc_dummy *d, const char *key, void **out) {
  int64_t n;
  void *buf = d->base + d->pool; /* read into staging; copied out below */
  size_t cap = d->total - d->pool;
  if (!cap) return MC_INVALID_PARAMS;
  pthread_mutex_lock(&d->mu); /* staging is used by one request at a time: hold it across both steps */
  struct mc_dbuf req = {0}, rep;
  mc_dbuf_u32(&req, 1);
  mc_dbuf_str(&req, key);
  mc_dbuf_u32(&req, 1);
  mc_dbuf_u64(&req, d->pool);
  mc_dbuf_u64(&req, cap);
  n = call(d, MC_DOP_READ, MC_DUMMY_SINGLE, &req, &rep, -1);
  if (!n) reply_i64(&rep, &n, 1, MC_RPC_FAIL);
  if (n > 0) {
    *out = mc_malloc((size_t)n);
    memcpy(*out, buf, (size_t)n);
  }
  pthread_mutex_unlock(&d->mu);
  mc_free(req.p);
  mc_free(rep.p);
  return n;
}

/* The per-key part of a keyed request: key i's bytes appended to b. */
typedef void (*key_enc_fn)(struct mc_dbuf *b, size_t i, const void *ctx);

static void enc_key(struct mc_dbuf *b, size_t i, const void *ctx) { mc_dbuf_str(b, ((const char *const *)ctx)[i]); }

/* A request over keys[0..count) (prefix, u32 n, n encodings), cut into requests below the frame limit,
 * with one i64 per key in the reply (reply_one: a single i64 for the whole request, given to every key).
 * A key whose encoding alone passes the limit gets -600. */
static void keyed_calls(struct mc_dummy *d, int op, int flags, const struct mc_dbuf *prefix, size_t count,
                        key_enc_fn enc, const void *ctx, int reply_one, int64_t *results) {
  for (size_t i = 0; i < count;) {
    struct mc_dbuf req = {0}, rep;
    size_t first = i;
    if (prefix->n) mc_dbuf_put(&req, prefix->p, prefix->n);
    mc_dbuf_u32(&req, 0); /* the count, set below */
    size_t at = req.n - 4;
    for (; i < count && i - first < MC_DUMMY_MAX_KEYS; i++) {
      size_t before = req.n;
      enc(&req, i, ctx);
      if (req.n > MAX_REQ) {
        req.n = before;
        break;
      }
    }
    if (i == first) { /* one key larger than a whole request */
      results[i++] = MC_INVALID_PARAMS;
      mc_free(req.p);
      continue;
    }
    uint32_t n = (uint32_t)(i - first);
    memcpy(req.p + at, &n, 4);
    pthread_mutex_lock(&d->mu);
    int rc = call(d, (uint16_t)op, (uint16_t)flags, &req, &rep, -1);
    pthread_mutex_unlock(&d->mu);
    if (rc) for (size_t j = first; j < i; j++) results[j] = rc;
    else if (reply_one) {
      int64_t v;
      reply_i64(&rep, &v, 1, MC_RPC_FAIL);
      for (size_t j = first; j < i; j++) results[j] = v;
    } else {
      reply_i64(&rep, results + first, n, MC_RPC_FAIL);
    }
    mc_free(req.p);
    mc_free(rep.p);
  }
}

/* EXIST / SIZE / REMOVE over keys: one i64 per key, in requests below the frame limit. */
static void dummy_keys(struct mc_dummy *d, int op, int force, const char *const *keys, size_t count, int64_t *results) {
  struct mc_dbuf pre = {0};
  if (op == MC_DOP_REMOVE) mc_dbuf_u32(&pre, (uint32_t)force);
  keyed_calls(d, op, 0, &pre, count, enc_key, keys, 0, results);
  mc_free(pre.p);
}

/* REMOVE_REGEX (pattern) / REMOVE_ALL / HEALTH / STATS (which): one i64. */
int64_t mc_dummy_simple(struct mc_dummy *d, int op, int force, const char *pattern) {
  struct mc_dbuf req = {0}, rep;
  int64_t v;
  if (op != MC_DOP_HEALTH) mc_dbuf_u32(&req, (uint32_t)force); /* STATS: force = which counter */
  if (pattern) mc_dbuf_str(&req, pattern);
  pthread_mutex_lock(&d->mu);
  int rc = call(d, (uint16_t)op, 0, &req, &rep, -1);
  pthread_mutex_unlock(&d->mu);
  if (rc) v = rc;
  else reply_i64(&rep, &v, 1, MC_RPC_FAIL);
  mc_free(req.p);
  mc_free(rep.p);
  return v;
}

static int dummy_owns(const struct mc_dummy *d, const void *p, size_t n) { return shared_off(d, p, n) >= 0; }

/* ------------------------------------------------------------------ one-key forms */

static int dummy_write1(struct mc_dummy *d, const char *key, const void *value, size_t size,
                    const mc_replicate_config_t *cfg, int flags) {
  int r;
  dummy_write(d, flags, &key, &value, &size, NULL, 1, cfg, NULL, 1, &r);
  return r;
}

static int64_t dummy_read1(struct mc_dummy *d, const char *key, void *buf, size_t size) {
  int64_t r;
  dummy_read(d, &key, &buf, &size, NULL, 1, 1, &r);
  return r;
}

static int64_t dummy_key1(struct mc_dummy *d, int op, int force, const char *key) {
  int64_t r;
  dummy_keys(d, op, force, &key, 1, &r);
  return r;
}

static int dummy_keys_int(struct mc_dummy *d, int op, int force, const char *const *keys, size_t count, int *results) {
  int64_t *r = mc_calloc(count ? count : 1, sizeof(int64_t));
  dummy_keys(d, op, force, keys, count, r);
  for (size_t i = 0; i < count; i++) results[i] = (int)r[i];
  mc_free(r);
  return 0;
}

static int dummy_hostname(const struct mc_dummy *d, char *buf, size_t len) {
  size_t n = strlen(d->name);
  if (n >= len) return -1;
  memcpy(buf, d->name, n + 1);
  return 0;
}

static int dummy_health(struct mc_dummy *d) {
  int64_t v = mc_dummy_simple(d, MC_DOP_HEALTH, 0, NULL);
  return v < 0 ? 2 : (int)v; /* the real client unreachable counts as its master unreachable */
}

/* ------------------------------------------------------------------ sessions and tasks */

static void to_int(const int64_t *r, int *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = (int)r[i];
}

struct start_ctx {
  const char *const *keys, *const *groups;
  const size_t *sizes;
};

static void enc_start(struct mc_dbuf *b, size_t i, const void *ctx) {
  const struct start_ctx *c = ctx;
  mc_dbuf_str(b, c->keys[i]);
  mc_dbuf_u64(b, c->sizes[i]);
  if (c->groups) mc_dbuf_str(b, c->groups[i] ? c->groups[i] : "");
}

static void dummy_put_start(struct mc_dummy *d, const char *const *keys, const size_t *sizes, size_t count,
                        const mc_replicate_config_t *cfg, const char *const *groups, int *results) {
  struct mc_dbuf pre = {0};
  put_config(&pre, cfg);
  struct start_ctx c = {keys, groups, sizes};
  int64_t *r = mc_calloc(count ? count : 1, sizeof(int64_t));
  keyed_calls(d, MC_DOP_PUT_START, groups ? MC_DUMMY_GROUPS : 0, &pre, count, enc_start, &c, 0, r);
  to_int(r, results, count);
  mc_free(r);
  mc_free(pre.p);
}

static void dummy_ranged(struct mc_dummy *d, int put, const char *const *keys, void *const *bufs, const size_t *sizes,
                     const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results) {
  data_call(d, put ? MC_DOP_PUT_WRITE : MC_DOP_GET_READ, 0, 0, (const char **)keys, bufs, sizes, offsets, nbufs, count,
            NULL, NULL, results);
}

/* PUT_END (with revoke) / GET_START / GET_END over keys. */
static void keys_op(struct mc_dummy *d, int op, int revoke, const char *const *keys, size_t count, int *results) {
  struct mc_dbuf pre = {0};
  if (op == MC_DOP_PUT_END) mc_dbuf_u32(&pre, (uint32_t)revoke);
  int64_t *r = mc_calloc(count ? count : 1, sizeof(int64_t));
  keyed_calls(d, op, 0, &pre, count, enc_key, keys, op == MC_DOP_GET_END, r);
  if (results) to_int(r, results, count);
  mc_free(r);
  mc_free(pre.p);
}

static void dummy_put_end(struct mc_dummy *d, const char *const *keys, size_t count, int revoke, int *results) {
  keys_op(d, MC_DOP_PUT_END, revoke, keys, count, results);
}

static void dummy_get_start(struct mc_dummy *d, const char *const *keys, size_t count, int *results) {
  keys_op(d, MC_DOP_GET_START, 0, keys, count, results);
}

static int dummy_get_end(struct mc_dummy *d, const char *const *keys, size_t count) {
  keys_op(d, MC_DOP_GET_END, 0, keys, count, NULL);
  return 0; /* as the real call: the sessions are gone (or the real client is, and them with it) */
}

/* One request, its reply in *rep (NULL-safe to free); 0 or the call's failure. */
static int call1(struct mc_dummy *d, int op, const struct mc_dbuf *req, struct mc_dbuf *rep) {
  pthread_mutex_lock(&d->mu);
  int rc = call(d, (uint16_t)op, 0, req, rep, -1);
  pthread_mutex_unlock(&d->mu);
  return rc;
}

/* COPY_TASK (targets, n) or MOVE_TASK (source, one target). */
static int dummy_task(struct mc_dummy *d, const char *key, const char *const *targets, size_t n, const char *source,
                  mc_task_id_t *id) {
  *id = (mc_task_id_t){0, 0};
  if (!*key || !n || n > MC_DREQ_MAX_STRS - 1) return MC_INVALID_PARAMS; /* the real call's own answer */
  struct mc_dbuf req = {0}, rep;
  mc_dbuf_str(&req, key);
  if (source) {
    mc_dbuf_str(&req, source);
    mc_dbuf_str(&req, targets[0]);
  } else {
    mc_dbuf_u32(&req, (uint32_t)n);
    for (size_t i = 0; i < n; i++) mc_dbuf_str(&req, targets[i]);
  }
  int64_t v = MC_INVALID_PARAMS;
  if (req.n > MAX_REQ) goto out; /* names longer than a frame: no real segment is called that */
  struct mc_drd r;
  v = call1(d, source ? MC_DOP_MOVE_TASK : MC_DOP_COPY_TASK, &req, &rep);
  r = (struct mc_drd){rep.p, rep.n, 0, 0};
  if (!v && (mc_drd_get(&r, &v, 8) || mc_drd_u64(&r, &id->hi) || mc_drd_u64(&r, &id->lo))) v = MC_RPC_FAIL;
  if (v) *id = (mc_task_id_t){0, 0};
  mc_free(rep.p);
out:
  mc_free(req.p);
  return (int)v;
}

/* REPLICA_DESC of one key: the real client's answer, its reply decoded as untrusted (wire.c). */
static int dummy_replica_desc(struct mc_dummy *d, const char *key, mc_replica_desc_t **out) {
  *out = NULL;
  struct mc_dbuf req = {0}, rep = {0};
  mc_dbuf_u32(&req, 1);
  mc_dbuf_str(&req, key);
  int rc = MC_INVALID_PARAMS; /* a key longer than a frame: no object is called that */
  if (req.n <= MAX_REQ) rc = call1(d, MC_DOP_REPLICA_DESC, &req, &rep);
  if (!rc && mc_drep_replica_desc(rep.p, rep.n, out, &rc))
    LOG_ERROR("standalone: malformed replica descriptors from the real client %s", d->name);
  mc_free(rep.p);
  mc_free(req.p);
  return rc;
}

static int dummy_query_task(struct mc_dummy *d, mc_task_id_t id, mc_task_info_t *out) {
  struct mc_dbuf req = {0}, rep;
  mc_dbuf_u64(&req, id.hi);
  mc_dbuf_u64(&req, id.lo);
  int64_t v = call1(d, MC_DOP_QUERY_TASK, &req, &rep);
  struct mc_drd r = {rep.p, rep.n, 0, 0};
  char *client = NULL, *msg = NULL;
  uint32_t type = 0, status = 0;
  if (!v && mc_drd_get(&r, &v, 8)) v = MC_RPC_FAIL;
  if (!v && (mc_drd_u64(&r, &out->id.hi) || mc_drd_u64(&r, &out->id.lo) || mc_drd_u32(&r, &type) ||
             mc_drd_u32(&r, &status) || mc_drd_u64(&r, &out->created_at_ms_epoch) ||
             mc_drd_u64(&r, &out->last_updated_at_ms_epoch) || mc_drd_str(&r, &client) || mc_drd_str(&r, &msg)))
    v = MC_RPC_FAIL;
  if (!v) {
    out->type = (int)type, out->status = (int)status;
    snprintf(out->assigned_client, sizeof(out->assigned_client), "%s", client);
    snprintf(out->message, sizeof(out->message), "%s", msg);
  } else {
    memset(out, 0, sizeof(*out));
  }
  mc_free(client);
  mc_free(msg);
  mc_free(req.p);
  mc_free(rep.p);
  return (int)v;
}

/* ------------------------------------------------------------------ the back-end */

#define D(s) ((struct mc_dummy *)(s)->be_ctx)

static void be_close(struct mc_store *s) {
  dummy_close(D(s));
  s->be_ctx = NULL;
}

static uint64_t be_warmup_pending(struct mc_store *s) {
  (void)s;
  return 0; /* the real client's engine prefaults its own memory */
}

static int be_health(struct mc_store *s) { return dummy_health(D(s)); }
static int be_hostname(struct mc_store *s, char *buf, size_t len) { return dummy_hostname(D(s), buf, len); }

static int be_write1(struct mc_store *s, int flags, const char *key, const void *value, size_t size,
                     const mc_replicate_config_t *cfg) {
  return dummy_write1(D(s), key, value, size, cfg, flags);
}

static void be_write(struct mc_store *s, int flags, const char *const *keys, const void *const *bufs,
                     const size_t *sizes, const size_t *nbufs, size_t count, const mc_replicate_config_t *cfg,
                     const char *const *groups, int *results) {
  dummy_write(D(s), flags, keys, bufs, sizes, nbufs, count, cfg, groups, 0, results);
}

static int64_t be_read1(struct mc_store *s, const char *key, void *buf, size_t size) {
  return dummy_read1(D(s), key, buf, size);
}

static void be_read(struct mc_store *s, const char *const *keys, void *const *bufs, const size_t *sizes,
                    const size_t *nbufs, size_t count, int64_t *results) {
  dummy_read(D(s), keys, bufs, sizes, nbufs, count, 0, results);
}

static int64_t be_read_copy(struct mc_store *s, const char *key, void **out) { return dummy_get_copy(D(s), key, out); }
static int64_t be_size(struct mc_store *s, const char *key) { return dummy_key1(D(s), MC_DOP_SIZE, 0, key); }
static int be_exist(struct mc_store *s, const char *key) { return (int)dummy_key1(D(s), MC_DOP_EXIST, 0, key); }

static void be_exist_batch(struct mc_store *s, const char *const *keys, size_t count, int *results) {
  dummy_keys_int(D(s), MC_DOP_EXIST, 0, keys, count, results);
}

static int be_remove(struct mc_store *s, const char *key, int force) {
  return (int)dummy_key1(D(s), MC_DOP_REMOVE, force, key);
}

static void be_remove_batch(struct mc_store *s, const char *const *keys, size_t count, int force, int *results) {
  dummy_keys_int(D(s), MC_DOP_REMOVE, force, keys, count, results);
}

static int64_t be_remove_regex(struct mc_store *s, const char *pattern, int force) {
  return mc_dummy_simple(D(s), MC_DOP_REMOVE_REGEX, force, pattern);
}

static int64_t be_remove_all(struct mc_store *s, int force) {
  return mc_dummy_simple(D(s), MC_DOP_REMOVE_ALL, force, NULL);
}

/* The real client's answer (docs/standalone.md). */
static int be_replica_desc(struct mc_store *s, const char *key, mc_replica_desc_t **out) {
  return dummy_replica_desc(D(s), key, out);
}

/* What a dummy does not forward: clearing replicas and extra segments are the real client's own (a dummy
 * owns no segment: the real client's segment is the host's contribution, docs/standalone.md). */
static int be_replica_clear(struct mc_store *s, const char *const *keys, size_t count, const char *segment,
                            int *cleared) {
  (void)s, (void)keys, (void)count, (void)segment, (void)cleared;
  return MC_NOT_SUPPORTED;
}

static int be_mount_extra(struct mc_store *s, const char *path, uint64_t offset, uint64_t size, const char *location,
                          char *id_out, size_t id_len) {
  (void)s, (void)path, (void)offset, (void)size, (void)location, (void)id_out, (void)id_len;
  return MC_NOT_SUPPORTED;
}

static int be_unmount_extra(struct mc_store *s, const char *id, uint64_t grace_ms, int free_memory) {
  (void)s, (void)id, (void)grace_ms, (void)free_memory;
  return MC_NOT_SUPPORTED;
}

/* Outside the shared pool a dummy's buffers go through its staging area: registering them is a no-op. */
static int be_register_buffer(struct mc_store *s, void *buf, size_t size) {
  (void)s, (void)buf, (void)size;
  return 0;
}

static int be_unregister_buffer(struct mc_store *s, void *buf) {
  (void)s, (void)buf;
  return 0;
}

static int be_is_registered(struct mc_store *s, const void *p, size_t len) { return dummy_owns(D(s), p, len); }
static uint64_t be_pool_alloc(struct mc_store *s, size_t size) { return dummy_alloc(D(s), size); }

static int be_copy_task(struct mc_store *s, const char *key, const char *const *targets, size_t n, mc_task_id_t *id) {
  return dummy_task(D(s), key, targets, n, NULL, id);
}

static int be_move_task(struct mc_store *s, const char *key, const char *src, const char *dst, mc_task_id_t *id) {
  return dummy_task(D(s), key, &dst, 1, src, id);
}

static int be_query_task(struct mc_store *s, mc_task_id_t id, mc_task_info_t *out) {
  return dummy_query_task(D(s), id, out);
}

static void be_put_start(struct mc_store *s, const char *const *keys, const size_t *sizes, size_t count,
                         const mc_replicate_config_t *cfg, const char *const *groups, int *results) {
  dummy_put_start(D(s), keys, sizes, count, cfg, groups, results);
}

static void be_ranged(struct mc_store *s, int put, const char *const *keys, void *const *bufs, const size_t *sizes,
                      const size_t *offsets, const size_t *nbufs, size_t count, int64_t *results) {
  dummy_ranged(D(s), put, keys, bufs, sizes, offsets, nbufs, count, results);
}

static void be_put_end(struct mc_store *s, const char *const *keys, size_t count, int revoke, int *results) {
  dummy_put_end(D(s), keys, count, revoke, results);
}

static void be_get_start(struct mc_store *s, const char *const *keys, size_t count, int *results) {
  dummy_get_start(D(s), keys, count, results);
}

static void be_get_end(struct mc_store *s, const char *const *keys, size_t count) { dummy_get_end(D(s), keys, count); }

static const struct mc_backend dummy_backend = {
    .name = "dummy",
    .close = be_close,
    .warmup_pending = be_warmup_pending,
    .health = be_health,
    .hostname = be_hostname,
    .write1 = be_write1,
    .write = be_write,
    .read1 = be_read1,
    .read = be_read,
    .read_copy = be_read_copy,
    .size = be_size,
    .exist = be_exist,
    .exist_batch = be_exist_batch,
    .remove = be_remove,
    .remove_batch = be_remove_batch,
    .remove_regex = be_remove_regex,
    .remove_all = be_remove_all,
    .replica_desc = be_replica_desc,
    .replica_clear = be_replica_clear,
    .register_buffer = be_register_buffer,
    .unregister_buffer = be_unregister_buffer,
    .is_registered = be_is_registered,
    .pool_alloc = be_pool_alloc,
    .mount_extra = be_mount_extra,
    .unmount_extra = be_unmount_extra,
    .copy_task = be_copy_task,
    .move_task = be_move_task,
    .query_task = be_query_task,
    .put_start = be_put_start,
    .ranged = be_ranged,
    .put_end = be_put_end,
    .get_start = be_get_start,
    .get_end = be_get_end,
};

int mc_store_setup_dummy(mooncake_store_t store, uint64_t mem_pool_size, uint64_t local_buffer_size,
                         const char *server_address) {
  struct mc_store *s = store;
  if (!s) return -1;
  struct mc_dummy *d;
  int rc = dummy_open(&d, mem_pool_size, local_buffer_size, server_address);
  if (rc) return rc; /* a failed setup_dummy leaves the handle as it was */
  pthread_rwlock_wrlock(&s->life);
  mc_store_close_backend(s);
  s->be = &dummy_backend;
  s->be_ctx = d;
  pthread_rwlock_unlock(&s->life);
  return 0;
}

struct mc_dummy *mc_dummy_of(mooncake_store_t store) {
  struct mc_store *s = store;
  pthread_rwlock_rdlock(&s->life);
  struct mc_dummy *d = s->be == &dummy_backend ? s->be_ctx : NULL;
  pthread_rwlock_unlock(&s->life);
  return d;
}
