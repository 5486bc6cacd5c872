/* Redis metadata backend: GET/SET/DEL on the full key over one hiredis connection guarded by a mutex.
 * Connects lazily (1.5 s connect, 3 s command timeouts), authenticates and selects the database from
 * the environment, and reconnects once when a reused connection turns out to be broken. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "common/alloc.h"
#include "common/hostport.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/transfer_engine.h"
#include "meta/metadata.h"

#define DEFAULT_PORT 6379

struct redis_meta {
  struct mc_meta base;
  char *host; /* host, port, user, password, db: immutable after open */
  int port;
  char *user; /* NULL when unset */
  char *password;
  int db;
  pthread_mutex_t mu;
  redisContext *c; /* NULL when disconnected; guarded by mu */
};

/* Answers the AUTH/SELECT handshake command; 0 unless Redis replied with an error or not at all. */
static int handshake_cmd(redisContext *c, const char *what, int argc, const char **argv) {
  redisReply *rep = redisCommandArgv(c, argc, argv, NULL);
  int ok = rep && rep->type != REDIS_REPLY_ERROR;
  if (!ok) LOG_ERROR("redis %s failed: %s", what, rep ? rep->str : c->errstr);
  if (rep) freeReplyObject(rep);
  return ok ? 0 : -1;
}

static int authenticate(struct redis_meta *r, redisContext *c) {
  if (r->password) {
    const char *with_user[] = {"AUTH", r->user, r->password}, *plain[] = {"AUTH", r->password};
    int rc = r->user ? handshake_cmd(c, "AUTH", 3, with_user) : handshake_cmd(c, "AUTH", 2, plain);
    if (rc) return -1;
  }
  if (r->db == 0) return 0;
  char db[8];
  snprintf(db, sizeof(db), "%d", r->db);
  const char *select[] = {"SELECT", db};
  return handshake_cmd(c, "SELECT", 2, select);
}

static int connect_locked(struct redis_meta *r) {
  if (r->c) return 0;
  struct timeval conn_tv = {1, 500000}, cmd_tv = {3, 0};
  redisContext *c = redisConnectWithTimeout(r->host, r->port, conn_tv);
  if (!c || c->err) {
    LOG_ERROR("cannot connect to redis %s:%d: %s", r->host, r->port, c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return -1;
  }
  if (redisSetTimeout(c, cmd_tv) != REDIS_OK || authenticate(r, c)) {
    redisFree(c);
    return -1;
  }
  r->c = c;
  return 0;
}

/* A broken (not merely slow) connection: worth one retry on a fresh one. */
static int is_broken(const redisContext *c, int err_no) {
  if (c->err == REDIS_ERR_EOF) return 1;
  return c->err == REDIS_ERR_IO && err_no != EAGAIN && err_no != EWOULDBLOCK && err_no != ETIMEDOUT;
}

/* Runs one command with mu held. Returns the reply (caller frees) or NULL (logged). */
static redisReply *run_locked(struct redis_meta *r, int argc, const char **argv, const size_t *lens) {
  for (int attempt = 0; attempt < 2; attempt++) {
    int reused = r->c != NULL;
    if (connect_locked(r)) return NULL;
    errno = 0;
    redisReply *rep = redisCommandArgv(r->c, argc, argv, lens);
    int err_no = errno;
    if (rep) return rep;
    int retry = reused && attempt == 0 && is_broken(r->c, err_no);
    LOG_WARN("redis %s:%d %s failed: %s%s", r->host, r->port, argv[0], r->c->errstr,
             retry ? "; reconnecting" : "");
    redisFree(r->c);
    r->c = NULL;
    if (!retry) return NULL;
  }
  return NULL;
}

static redisReply *run(struct redis_meta *r, int argc, const char **argv, const size_t *lens) {
  pthread_mutex_lock(&r->mu);
  redisReply *rep = run_locked(r, argc, argv, lens);
  pthread_mutex_unlock(&r->mu);
  return rep;
}

/* Logs an unexpected reply and frees it. Always returns ERR_METADATA. */
static int bad_reply(redisReply *rep, const char *cmd, const char *key) {
  if (rep && rep->type == REDIS_REPLY_ERROR)
    LOG_ERROR("redis %s '%s': %s", cmd, key, rep->str);
  else if (rep)
    LOG_ERROR("redis %s '%s': unexpected reply type %d", cmd, key, rep->type);
  if (rep) freeReplyObject(rep);
  return ERR_METADATA;
}

static int redis_get(struct mc_meta *m, const char *key, char **value_out) {
  const char *argv[] = {"GET", key};
  size_t lens[] = {3, strlen(key)};
  *value_out = NULL;
  redisReply *rep = run((struct redis_meta *)m, 2, argv, lens);
  if (!rep || (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING))
    return bad_reply(rep, "GET", key);
  int rc = MC_META_NOT_FOUND;
  if (rep->type == REDIS_REPLY_STRING) {
    char *v = mc_malloc((size_t)rep->len + 1);
    memcpy(v, rep->str, (size_t)rep->len);
    v[rep->len] = 0;
    *value_out = v;
    rc = 0;
  }
  freeReplyObject(rep);
  return rc;
}

static int redis_set(struct mc_meta *m, const char *key, const char *value) {
  const char *argv[] = {"SET", key, value};
  size_t lens[] = {3, strlen(key), strlen(value)};
  redisReply *rep = run((struct redis_meta *)m, 3, argv, lens);
  if (!rep || rep->type != REDIS_REPLY_STATUS) return bad_reply(rep, "SET", key);
  freeReplyObject(rep);
  return 0;
}

static int redis_set_bound(struct mc_meta *m, const char *key, const char *value, int ttl_s) {
  char ttl[16];
  snprintf(ttl, sizeof(ttl), "%d", ttl_s);
  const char *argv[] = {"SET", key, value, "EX", ttl};
  size_t lens[] = {3, strlen(key), strlen(value), 2, strlen(ttl)};
  redisReply *rep = run((struct redis_meta *)m, 5, argv, lens);
  if (!rep || rep->type != REDIS_REPLY_STATUS) return bad_reply(rep, "SET", key);
  freeReplyObject(rep);
  return 0;
}

/* EXPIRE each key again; one that is gone (expired while Redis was unreachable, or a restarted
 * server) is written again. */
static int redis_keepalive(struct mc_meta *m, int ttl_s, char *const *keys, char *const *values, size_t n) {
  char ttl[16];
  snprintf(ttl, sizeof(ttl), "%d", ttl_s);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    const char *argv[] = {"EXPIRE", keys[i], ttl};
    size_t lens[] = {6, strlen(keys[i]), strlen(ttl)};
    redisReply *rep = run((struct redis_meta *)m, 3, argv, lens);
    if (!rep || rep->type != REDIS_REPLY_INTEGER) {
      rc = bad_reply(rep, "EXPIRE", keys[i]);
      continue;
    }
    long long found = rep->integer;
    freeReplyObject(rep);
    if (!found) {
      LOG_WARN("redis key '%s' had expired; writing it again", keys[i]);
      if (redis_set_bound(m, keys[i], values[i], ttl_s)) rc = ERR_METADATA;
    }
  }
  return rc;
}

static int redis_remove(struct mc_meta *m, const char *key) {
  const char *argv[] = {"DEL", key};
  size_t lens[] = {3, strlen(key)};
  redisReply *rep = run((struct redis_meta *)m, 2, argv, lens);
  if (!rep || rep->type != REDIS_REPLY_INTEGER) return bad_reply(rep, "DEL", key);
  freeReplyObject(rep);
  return 0;
}

static void redis_destroy(struct mc_meta *m) {
  struct redis_meta *r = (struct redis_meta *)m;
  if (r->c) redisFree(r->c);
  pthread_mutex_destroy(&r->mu);
  mc_free(r->host);
  mc_free(r->user);
  mc_free(r->password);
  mc_free(r);
}

static const struct mc_meta_ops redis_ops = {.scheme = "redis",
                                            .get = redis_get,
                                            .set = redis_set,
                                            .remove = redis_remove,
                                            .destroy = redis_destroy,
                                            .set_bound = redis_set_bound,
                                            .keepalive = redis_keepalive};

/* "host[:port]" / "[v6]:port" with any trailing '/' (a URL's) through the one parser. 0, or -1 on junk. */
static int parse_hostport(const char *s, char **host, int *port) {
  char text[512], h[256];
  size_t n = strlen(s);
  while (n > 0 && s[n - 1] == '/') n--;
  uint16_t p;
  if (n >= sizeof(text)) return -1;
  memcpy(text, s, n);
  text[n] = 0;
  if (mc_split_host_port(text, h, sizeof(h), &p, DEFAULT_PORT)) return -1;
  *host = mc_strdup(h);
  *port = p;
  return 0;
}

static char *env_dup(enum mc_knob k) {
  const char *v = mc_knob_str(k);
  return v ? mc_strdup(v) : NULL;
}

int mc_meta_redis_open(const char *hostport, struct mc_meta **out) {
  *out = NULL;
  struct redis_meta *r = mc_calloc(1, sizeof(*r));
  if (parse_hostport(hostport, &r->host, &r->port)) {
    LOG_ERROR("bad redis address '%s' (want host:port)", hostport);
    mc_free(r);
    return ERR_METADATA;
  }
  r->base.ops = &redis_ops;
  r->user = env_dup(MC_KNOB_REDIS_USERNAME);
  r->password = env_dup(MC_KNOB_REDIS_PASSWORD);
  r->db = (int)mc_knob_long(MC_KNOB_REDIS_DB_INDEX);
  pthread_mutex_init(&r->mu, NULL);
  *out = &r->base;
  return 0;
}
