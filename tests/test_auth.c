/* The cluster-secret handshake and HTTP signatures (src/common/auth.c, docs/security.md) over real
 * sockets. The secret is per process, so a peer with another secret (or none) is a forked child. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/auth.h"
#include "lib/proc.h"
#include "lib/test.h"
#include "net/sock.h"

#define SECRET_A "0123456789abcdef0123456789abcdef"
#define SECRET_B "fedcba9876543210fedcba9876543210"

static void use_secret(const char *s) {
  if (s) setenv("MC_CLUSTER_SECRET", s, 1);
  else unsetenv("MC_CLUSTER_SECRET");
  unsetenv("MC_CLUSTER_SECRET_FILE");
  mc_auth_reset();
}

/* Runs the client side in a child with its own secret (NULL: none; "raw": sends a plain request
 * instead of a hello) and returns what mc_auth_client returned there (as a negative errno), or 1 for
 * "raw". The parent runs the server side on the other end of a socket pair. */
static pid_t client_child(int fd, const char *secret, const char *service) {
  pid_t pid = fork();
  if (pid == 0) {
    if (secret && !strcmp(secret, "raw")) {
      _exit(write(fd, "GET / HTTP/1.0\r\n\r\n", 18) == 18 ? 1 : 2);
    }
    use_secret(secret);
    int rc = mc_auth_client(fd, service, 3000);
    _exit(rc == 0 ? 0 : rc == -EACCES ? 13 : 99);
  }
  return pid;
}

static int handshake(const char *server_secret, const char *client_secret, const char *srv_service,
                     const char *cli_service, int *client_result) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -999;
  pid_t pid = client_child(sv[1], client_secret, cli_service);
  close(sv[1]);
  use_secret(server_secret);
  int rc = mc_auth_server(sv[0], srv_service, 2000);
  close(sv[0]);
  *client_result = mc_tp_exit_code(pid);
  return rc;
}

static void test_same_secret(void) {
  int cli;
  CHECK_EQ(handshake(SECRET_A, SECRET_A, "master", "master", &cli), 0);
  CHECK_EQ(cli, 0);
}

static void test_other_secret(void) {
  int cli;
  CHECK(handshake(SECRET_A, SECRET_B, "master", "master", &cli) != 0); /* the client hung up on us */
  CHECK_EQ(cli, 13); /* the client saw a server that cannot prove our secret and stopped */
}

static void test_proof_for_another_service(void) {
  int cli;
  CHECK(handshake(SECRET_A, SECRET_A, "te-data", "master", &cli) != 0);
  CHECK_EQ(cli, 13);
}

static void test_client_without_secret(void) {
  int cli;
  CHECK_EQ(handshake(SECRET_A, "raw", "master", "master", &cli), -EACCES);
  CHECK_EQ(cli, 1);
}

static void test_silent_client_bounded(void) {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  use_secret(SECRET_A);
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_auth_server(sv[0], "master", 300), -ETIMEDOUT);
  CHECK(mc_tp_now_ms() - t0 < 3000);
  close(sv[0]);
  close(sv[1]);
}

static void test_open_server_answers_hello(void) {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pid_t pid = client_child(sv[1], SECRET_A, "te-ctrl");
  close(sv[1]);
  use_secret(NULL);
  CHECK_EQ(mc_auth_server(sv[0], "te-ctrl", 2000), 0); /* no secret here: nothing asked */
  uint8_t hello[MC_AUTH_HELLO_LEN];
  CHECK_EQ(mc_sock_read_deadline(sv[0], hello, sizeof(hello), 2000), 0);
  CHECK(mc_auth_is_hello(hello, sizeof(hello)));
  CHECK_EQ(mc_auth_answer_open(sv[0], 2000), 0);
  CHECK_EQ(mc_tp_exit_code(pid), 13); /* a client with a secret will not talk to an open server */
  close(sv[0]);
}

/* The state machine, fed one byte at a time (a client whose bytes arrive in pieces). */
static void test_feed_in_pieces(void) {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pid_t pid = client_child(sv[1], SECRET_A, "master");
  close(sv[1]);
  use_secret(SECRET_A);
  struct mc_auth_srv st = {0};
  uint8_t buf[64];
  size_t have = 0;
  int done = 0, failed = 0;
  while (!done && !failed) {
    if (mc_sock_read_deadline(sv[0], buf + have, 1, 2000)) break;
    have++;
    uint8_t out[MC_AUTH_CHALLENGE_LEN];
    size_t out_len = 0;
    long used = mc_auth_srv_feed(&st, "master", buf, have, out, &out_len, &done);
    if (out_len) CHECK_EQ(mc_sock_write_deadline(sv[0], out, out_len, 2000), 0);
    if (used < 0) failed = 1;
    else if (used) {
      memmove(buf, buf + used, have - (size_t)used);
      have -= (size_t)used;
    }
  }
  CHECK(done);
  CHECK(!failed);
  CHECK_EQ(mc_tp_exit_code(pid), 0);
  close(sv[0]);
}

static void test_garbage_refused(void) {
  use_secret(SECRET_A);
  struct mc_auth_srv st = {0};
  uint8_t out[MC_AUTH_CHALLENGE_LEN];
  size_t out_len = 0;
  int done = 0;
  CHECK_EQ(mc_auth_srv_feed(&st, "master", (const uint8_t *)"\x01\x00\x00\x00", 4, out, &out_len, &done), -1);
  /* a hello, then a proof with a wrong MAC */
  struct mc_auth_srv st2 = {0};
  uint8_t hello[MC_AUTH_HELLO_LEN] = {'M', 'C', 'A', 'H', 1};
  CHECK_EQ(mc_auth_srv_feed(&st2, "master", hello, sizeof(hello), out, &out_len, &done), MC_AUTH_HELLO_LEN);
  uint8_t proof[MC_AUTH_PROOF_LEN] = {'M', 'C', 'A', 'P'};
  out_len = 0;
  CHECK_EQ(mc_auth_srv_feed(&st2, "master", proof, sizeof(proof), out, &out_len, &done), -1);
  CHECK(!done);
  CHECK_EQ(out_len, MC_AUTH_RESULT_LEN);
  CHECK(out[4] == 1);
}

static void test_http_signatures(void) {
  use_secret(SECRET_A);
  char h[160];
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata", "body", 4, h, sizeof(h)), 0);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, h), 1);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, h), 0); /* a replay */
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata", "body", 4, h, sizeof(h)), 0);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "bodY", 4, h), 0);   /* another body */
  CHECK_EQ(mc_auth_http_check("DELETE", "/metadata", "body", 4, h), 0); /* another method */
  CHECK_EQ(mc_auth_http_check("PUT", "/other", "body", 4, h), 0);      /* another path */
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, NULL), 0);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, "v1 1 00000000000000000000000000000000 "
                                                             "0000000000000000000000000000000000000000000000000000000000000000"),
           0); /* far outside the window */
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, h), 1);
  use_secret(SECRET_B);
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata", "body", 4, h, sizeof(h)), 0);
  use_secret(SECRET_A);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata", "body", 4, h), 0); /* signed with another secret */
  use_secret(NULL);
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata", "body", 4, h, sizeof(h)), -1);
}

static void test_canonical_target(void) {
  char *c = mc_auth_http_canonical("/api/v1/remove?key=a%2Fb+c&force=1#frag");
  CHECK_STR(c, "/api/v1/remove?key=a/b c&force=1");
  free(c);
  c = mc_auth_http_canonical("/metadata?key=mooncake%2Fram%2Fx&flag&&z=%zz");
  CHECK_STR(c, "/metadata?key=mooncake/ram/x&flag&z=%zz");
  free(c);
  c = mc_auth_http_canonical("/p%20q");
  CHECK_STR(c, "/p q");
  free(c);
  /* two escapings of one request sign alike */
  use_secret(SECRET_A);
  char h1[256], h2[256];
  CHECK_EQ(mc_auth_http_header_for_url("DELETE", "http://h:1/metadata?key=a%2Fb", "", 0, h1, sizeof(h1)), 0);
  CHECK(!strncmp(h1, "X-Mooncake-Auth: v1 ", 20));
  CHECK_EQ(mc_auth_http_check("DELETE", "/metadata?key=a/b", "", 0, h1 + 17), 1);
  CHECK_EQ(mc_auth_http_header_for_url("GET", "http://h:1/metadata?key=a", "", 0, h2, sizeof(h2)), -1);
}

static void test_secret_file_and_generate(void) {
  char dir[] = "/tmp/mc_auth_XXXXXX", path[300], link[300];
  REQUIRE(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/secret", dir);
  CHECK_EQ(mc_auth_generate(path), 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  CHECK_EQ(mc_auth_generate(path), -EEXIST); /* never over an existing file */
  snprintf(link, sizeof(link), "%s/planted", dir);
  CHECK_EQ(symlink("/tmp/mc_auth_target_never", link), 0);
  CHECK_EQ(mc_auth_generate(link), -EEXIST); /* nor through a planted symlink */
  CHECK(access("/tmp/mc_auth_target_never", F_OK) != 0);
  unsetenv("MC_CLUSTER_SECRET");
  setenv("MC_CLUSTER_SECRET_FILE", path, 1);
  mc_auth_reset();
  CHECK(mc_auth_enabled());
  /* a handshake between a file secret and the same secret given in the environment */
  FILE *f = fopen(path, "r");
  char line[128] = "";
  CHECK(f && fgets(line, sizeof(line), f));
  if (f) fclose(f);
  line[strcspn(line, "\n")] = 0;
  CHECK_EQ(strlen(line), 64);
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  pid_t pid = client_child(sv[1], line, "master");
  close(sv[1]);
  CHECK_EQ(mc_auth_server(sv[0], "master", 2000), 0);
  CHECK_EQ(mc_tp_exit_code(pid), 0);
  close(sv[0]);
  /* a secret that is configured but unusable stops the process instead of running open */
  pid = fork();
  if (pid == 0) {
    setenv("MC_CLUSTER_SECRET", "short", 1);
    unsetenv("MC_CLUSTER_SECRET_FILE");
    mc_auth_reset();
    _exit(mc_auth_enabled() ? 0 : 1);
  }
  CHECK_EQ(mc_tp_exit_code(pid), 78);
  unlink(path);
  unlink(link);
  rmdir(dir);
  unsetenv("MC_CLUSTER_SECRET_FILE");
  mc_auth_reset();
}

TEST_MAIN(TEST_CASE(test_same_secret), TEST_CASE(test_other_secret), TEST_CASE(test_proof_for_another_service),
          TEST_CASE(test_client_without_secret), TEST_CASE(test_silent_client_bounded),
          TEST_CASE(test_open_server_answers_hello), TEST_CASE(test_feed_in_pieces), TEST_CASE(test_garbage_refused),
          TEST_CASE(test_http_signatures), TEST_CASE(test_canonical_target), TEST_CASE(test_secret_file_and_generate))
