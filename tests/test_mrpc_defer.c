/* Deferred replies of the master RPC server (net/mrpc.h, mc_mrpc_defer): a long poll holds no worker
 * thread, its connection serves nothing else meanwhile, the reply may come from any thread (or from the
 * handler itself), and a server stopped with replies outstanding neither crashes nor leaks. Real sockets,
 * one worker thread where it matters. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "lib/test.h"
#include "mooncake/store_errors.h"
#include "net/mrpc.h"

enum { OP_NOW = 1, OP_LATER = 2, OP_INLINE = 3 };

/* deferred requests waiting for the answerer, in arrival order */
#define QMAX 256
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_mrpc_deferred *q[QMAX];
static uint32_t q_tag[QMAX];
static int q_n;

static int handler(void *ctx, void **conn_ctx, const char *tenant, uint16_t op, const uint8_t *body, size_t len,
                   struct mc_wbuf *reply) {
  uint32_t tag = len >= 4 ? (uint32_t)body[0] | (uint32_t)body[1] << 8 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 24 : 0;
  if (op == OP_NOW) {
    mc_w_u32(reply, tag + 1);
    return 0;
  }
  struct mc_mrpc_deferred *d = mc_mrpc_defer();
  if (!d) return -1;
  CHECK(mc_mrpc_defer() == NULL); /* once per request */
  mc_w_u32(reply, 0xdead);        /* ignored: the deferred reply is what is sent */
  if (op == OP_INLINE) {          /* answered before the handler even returns */
    struct mc_wbuf b = {0};
    mc_w_u32(&b, tag + 3);
    mc_mrpc_deferred_reply(d, 0, &b);
    return 0;
  }
  pthread_mutex_lock(&q_mu);
  q_tag[q_n] = tag;
  q[q_n++] = d;
  pthread_mutex_unlock(&q_mu);
  return 0;
}

static int queued(void) {
  pthread_mutex_lock(&q_mu);
  int n = q_n;
  pthread_mutex_unlock(&q_mu);
  return n;
}

/* Answers every queued request: tag + 2, status -(tag % 3) (0, -1, -2 pass through as statuses). */
static void answer_all(void) {
  pthread_mutex_lock(&q_mu);
  for (int i = 0; i < q_n; i++) {
    struct mc_wbuf b = {0};
    mc_w_u32(&b, q_tag[i] + 2);
    mc_mrpc_deferred_reply(q[i], -(int32_t)(q_tag[i] % 3), &b);
  }
  q_n = 0;
  pthread_mutex_unlock(&q_mu);
}

static int call(struct mc_mrpc_client *c, uint16_t op, uint32_t tag, uint32_t *out) {
  struct mc_wbuf req = {0}, rep = {0};
  mc_w_u32(&req, tag);
  int rc = mc_mrpc_call(c, op, &req, &rep);
  *out = rep.len == 4 ? (uint32_t)rep.p[0] | (uint32_t)rep.p[1] << 8 | (uint32_t)rep.p[2] << 16 | (uint32_t)rep.p[3] << 24
                      : 0xffffffffu;
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

struct caller {
  uint16_t port;
  uint32_t tag, got;
  int rc;
};

static void *later_caller(void *arg) {
  struct caller *k = arg;
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", k->port, 3000, 20000);
  k->rc = call(c, OP_LATER, k->tag, &k->got);
  mc_mrpc_client_free(c);
  return NULL;
}

static int wait_queued(int n) {
  for (int i = 0; i < 2000 && queued() < n; i++) usleep(2000);
  return queued() >= n;
}

static struct mc_mrpc_server *start(int threads, uint16_t *port) {
  struct mc_mrpc_server_opts o = {.threads = threads};
  return mc_mrpc_server_start_opts("127.0.0.1", 0, handler, NULL, NULL, &o, port);
}

/* One worker: a pending long poll does not stop other connections from being served, and the same
 * connection carries on normally after its deferred reply. */
static void test_one_worker(void) {
  uint16_t port;
  struct mc_mrpc_server *s = start(1, &port);
  REQUIRE(s);
  struct caller k = {port, 7};
  pthread_t th;
  pthread_create(&th, NULL, later_caller, &k);
  REQUIRE(wait_queued(1));
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", port, 3000, 5000);
  uint32_t got;
  for (uint32_t i = 0; i < 100; i++) {
    CHECK_EQ(call(c, OP_NOW, i, &got), 0);
    CHECK_EQ(got, i + 1);
  }
  CHECK_EQ(call(c, OP_INLINE, 40, &got), 0);
  CHECK_EQ(got, 43u);
  CHECK_EQ(call(c, OP_NOW, 41, &got), 0); /* the same pooled connection, served normally again */
  CHECK_EQ(got, 42u);
  answer_all();
  pthread_join(th, NULL);
  CHECK_EQ(k.rc, -1); /* 7 % 3 */
  CHECK_EQ(k.got, 9u);
  mc_mrpc_client_free(c);
  mc_mrpc_server_stop(s);
}

/* Many long polls at once, answered together from another thread; each caller gets its own reply. */
static void test_many(void) {
  enum { N = 64 };
  uint16_t port;
  struct mc_mrpc_server *s = start(2, &port);
  REQUIRE(s);
  struct caller k[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    k[i] = (struct caller){port, (uint32_t)(100 + i)};
    pthread_create(&th[i], NULL, later_caller, &k[i]);
  }
  REQUIRE(wait_queued(N));
  answer_all();
  int ok = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ok += k[i].rc == -(int)(k[i].tag % 3) && k[i].got == k[i].tag + 2;
  }
  CHECK_EQ(ok, N);
  mc_mrpc_server_stop(s);
}

/* A server stopped while replies are outstanding: the callers fail, the late replies are no-ops. */
static void test_stop_pending(void) {
  uint16_t port;
  struct mc_mrpc_server *s = start(2, &port);
  REQUIRE(s);
  struct caller k[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    k[i] = (struct caller){port, (uint32_t)i};
    pthread_create(&th[i], NULL, later_caller, &k[i]);
  }
  REQUIRE(wait_queued(3));
  mc_mrpc_server_stop(s);
  answer_all(); /* after the stop: nothing is sent, nothing freed twice */
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    CHECK(k[i].rc == MC_RPC_FAIL || k[i].rc == MC_RPC_TIMEOUT);
  }
}

TEST_MAIN(TEST_CASE(test_one_worker), TEST_CASE(test_many), TEST_CASE(test_stop_pending))
