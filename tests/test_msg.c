/* The message API of include/mooncake/transfer_engine.h (docs/transfer-engine.md, "Messages"): bodies arrive
 * byte for byte with their kind, the handler's status is what the sender gets, bounds and bad arguments are
 * refused, a stopped or absent server is RPC_FAIL, and a stop waits for running handlers while senders on
 * several threads share one client. Real sockets on loopback. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/test.h"
#include "mooncake/store_errors.h"
#include "mooncake/transfer_engine.h"

struct seen {
  pthread_mutex_t mu;
  uint64_t sum;      /* sum of the bytes of every body seen */
  size_t bytes, n;   /* body bytes and messages seen */
  uint16_t last_kind;
  _Atomic int in_handler, slow_ms;
};

static int handler(void *ctx, uint16_t kind, const uint8_t *body, size_t len) {
  struct seen *s = ctx;
  s->in_handler++;
  if (s->slow_ms) usleep((useconds_t)s->slow_ms * 1000);
  uint64_t sum = 0;
  for (size_t i = 0; i < len; i++) sum += body[i];
  pthread_mutex_lock(&s->mu);
  s->sum += sum, s->bytes += len, s->n++, s->last_kind = kind;
  pthread_mutex_unlock(&s->mu);
  s->in_handler--;
  return kind == 9 ? MC_OBJECT_NOT_FOUND : 0; /* kind 9: the handler refuses */
}

static void test_round_trip(void) {
  struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
  uint16_t port = 0;
  mc_msg_server_t *srv = mc_msg_server_start("127.0.0.1", 0, 2, 0, handler, &s, &port);
  REQUIRE(srv && port);
  mc_msg_client_t *c = mc_msg_client_new("127.0.0.1", port, 10000);
  REQUIRE(c);
  size_t big = 5u << 20;
  uint8_t *b = malloc(big);
  uint64_t want = 0;
  for (size_t i = 0; i < big; i++) b[i] = (uint8_t)(i * 7 + 3), want += b[i];
  CHECK_EQ(mc_msg_send(c, 3, b, big), 0);
  CHECK_EQ(s.n, 1);
  CHECK_EQ(s.bytes, big);
  CHECK(s.sum == want);
  CHECK_EQ(s.last_kind, 3);
  CHECK_EQ(mc_msg_send(c, 4, NULL, 0), 0); /* an empty body */
  CHECK_EQ(s.n, 2);
  CHECK_EQ(s.last_kind, 4);
  CHECK_EQ(mc_msg_send(c, 9, "x", 1), MC_OBJECT_NOT_FOUND); /* the handler's status comes back */
  CHECK_EQ(mc_msg_send(c, 1, NULL, 5), MC_INVALID_PARAMS);
  CHECK_EQ(mc_msg_send(NULL, 1, "x", 1), MC_INVALID_PARAMS);
  CHECK_EQ(mc_msg_send(c, 1, b, (size_t)MC_MSG_MAX_BODY + 1), MC_INVALID_PARAMS); /* refused before sending */
  CHECK_EQ(s.n, 3);
  mc_msg_server_stop(srv);
  CHECK_EQ(mc_msg_send(c, 1, "x", 1), MC_RPC_FAIL); /* nobody listens any more */
  mc_msg_client_free(c);
  free(b);
}

static void test_bad_arguments(void) {
  struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
  CHECK(mc_msg_server_start("127.0.0.1", 0, 1, 0, NULL, &s, NULL) == NULL);
  CHECK(mc_msg_server_start("127.0.0.1", 0, -1, 0, handler, &s, NULL) == NULL);
  CHECK(mc_msg_client_new(NULL, 1, 100) == NULL);
  CHECK(mc_msg_client_new("127.0.0.1", 0, 100) == NULL);
  CHECK(mc_msg_client_new("127.0.0.1", 1, 0) == NULL);
  uint16_t port = 0;
  mc_msg_server_t *a = mc_msg_server_start("127.0.0.1", 0, 1, 0, handler, &s, &port);
  REQUIRE(a);
  CHECK(mc_msg_server_start("127.0.0.1", port, 1, 0, handler, &s, NULL) == NULL); /* the port is taken */
  mc_msg_server_stop(a);
  mc_msg_server_stop(NULL);
  mc_msg_client_free(NULL);
}

struct sender {
  mc_msg_client_t *c;
  int fails;
};

static void *send_many(void *arg) {
  struct sender *x = arg;
  uint8_t body[100];
  memset(body, 1, sizeof body);
  for (int i = 0; i < 50; i++)
    if (mc_msg_send(x->c, 2, body, sizeof body) != 0) x->fails++;
  return NULL;
}

static void test_threads_and_stop(void) {
  struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
  uint16_t port = 0;
  mc_msg_server_t *srv = mc_msg_server_start("127.0.0.1", 0, 4, 0, handler, &s, &port);
  REQUIRE(srv);
  mc_msg_client_t *c = mc_msg_client_new("127.0.0.1", port, 20000);
  REQUIRE(c);
  struct sender x[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    x[i] = (struct sender){c, 0};
    pthread_create(&th[i], NULL, send_many, &x[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(x[i].fails, 0);
  }
  CHECK_EQ(s.n, 200);
  CHECK(s.sum == 200 * 100);
  s.slow_ms = 300; /* a stop during a running handler waits for it */
  x[0] = (struct sender){c, 0};
  pthread_create(&th[0], NULL, send_many, &x[0]);
  for (int i = 0; i < 200 && !s.in_handler; i++) usleep(10000);
  CHECK(s.in_handler == 1);
  mc_msg_server_stop(srv);
  CHECK(s.in_handler == 0);
  pthread_join(th[0], NULL);
  CHECK(x[0].fails >= 49); /* the message in the handler may or may not have been acknowledged */
  mc_msg_client_free(c);
}

TEST_MAIN(TEST_CASE(test_round_trip), TEST_CASE(test_bad_arguments), TEST_CASE(test_threads_and_stop))
