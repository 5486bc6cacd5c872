/* The cluster-secret handshake and HTTP signatures (src/net/auth.c, docs/security.md) over real
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

#include "net/auth.h"
#include "lib/proc.h"
#include "lib/test.h"
#include "net/sock.h"

#define SECRET_A "0123456789abcdef0123456789abcdef"
#define SECRET_B "fedcba9876543210fedcba9876543210"

/* s: a cluster secret, NULL (none), or "file:PATH" (a secret file, e.g. a tenant's). */
static void use_secret(const char *s) {
  if (s && !strncmp(s, "file:", 5)) {
    unsetenv("MC_CLUSTER_SECRET");
    setenv("MC_CLUSTER_SECRET_FILE", s + 5, 1);
    mc_auth_reset();
    return;
  }
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

static char last_realm[MC_AUTH_TENANT_MAX + 1]; /* the realm of the last handshake, on the server side */

static int handshake(const char *server_secret, const char *client_secret, const char *srv_service,
                     const char *cli_service, int *client_result) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -999;
  pid_t pid = client_child(sv[1], client_secret, cli_service);
  close(sv[1]);
  use_secret(server_secret);
  int rc = mc_auth_server_realm(sv[0], srv_service, 2000, last_realm);
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
    uint8_t out[MC_AUTH_CHALLENGE_MAX];
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
  uint8_t out[MC_AUTH_CHALLENGE_MAX];
  size_t out_len = 0;
  int done = 0;
  CHECK_EQ(mc_auth_srv_feed(&st, "master", (const uint8_t *)"\x01\x00\x00\x00", 4, out, &out_len, &done), -1);
  /* the first version of the handshake (a 21-byte hello) is refused, not misread */
  struct mc_auth_srv st1 = {0};
  uint8_t old[MC_AUTH_HELLO_LEN] = {'M', 'C', 'A', 'H', 1};
  CHECK_EQ(mc_auth_srv_feed(&st1, "master", old, sizeof(old), out, &out_len, &done), -1);
  /* a tenant id longer than the limit, or with a control character */
  struct mc_auth_srv st3 = {0};
  uint8_t longer[MC_AUTH_HELLO_LEN] = {'M', 'C', 'A', 'H', MC_AUTH_VERSION};
  longer[21] = MC_AUTH_TENANT_MAX + 1;
  CHECK_EQ(mc_auth_srv_feed(&st3, "master", longer, sizeof(longer), out, &out_len, &done), -1);
  struct mc_auth_srv st4 = {0};
  uint8_t ctl[MC_AUTH_HELLO_LEN + 2] = {'M', 'C', 'A', 'H', MC_AUTH_VERSION};
  ctl[21] = 2, ctl[22] = 'a', ctl[23] = '\x1f';
  CHECK_EQ(mc_auth_srv_feed(&st4, "master", ctl, MC_AUTH_HELLO_LEN + 1, out, &out_len, &done), 0); /* more to come */
  CHECK_EQ(mc_auth_srv_feed(&st4, "master", ctl, sizeof(ctl), out, &out_len, &done), -1);
  /* a hello, then a proof with a wrong MAC */
  out_len = 0;
  struct mc_auth_srv st2 = {0};
  uint8_t hello[MC_AUTH_HELLO_LEN] = {'M', 'C', 'A', 'H', MC_AUTH_VERSION};
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
  char h[MC_AUTH_HTTP_VALUE_MAX];
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
  c = mc_auth_http_canonical("/a+%2B%?k%2B+=%2b+%4&%");
  CHECK_STR(c, "/a++%?k+ =+ %4&%");
  free(c);
  /* two escapings of one request sign alike */
  use_secret(SECRET_A);
  char h1[MC_AUTH_HTTP_HEADER_MAX], h2[MC_AUTH_HTTP_HEADER_MAX];
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

/* Tenants (docs/security.md, "Tenants"): secrets derived from the cluster's, realms, who serves whom. */
static char tdir[] = "/tmp/mc_tenant_XXXXXX";
static char t1_file[320], t2_file[320], forged_file[320], t1_spec[330], t2_spec[330], forged_spec[330];

static void make_tenant_files(void) {
  REQUIRE(mkdtemp(tdir));
  snprintf(t1_file, sizeof(t1_file), "%s/t1", tdir);
  snprintf(t2_file, sizeof(t2_file), "%s/t2", tdir);
  snprintf(forged_file, sizeof(forged_file), "%s/forged", tdir);
  snprintf(t1_spec, sizeof(t1_spec), "file:%s", t1_file);
  snprintf(t2_spec, sizeof(t2_spec), "file:%s", t2_file);
  snprintf(forged_spec, sizeof(forged_spec), "file:%s", forged_file);
  use_secret(SECRET_A);
  CHECK_EQ(mc_auth_generate_tenant("team one", t1_file), 0);
  CHECK_EQ(mc_auth_generate_tenant("t2", t2_file), 0);
  CHECK_EQ(mc_auth_generate_tenant("t2", t2_file), -EEXIST);
  CHECK_EQ(mc_auth_generate_tenant("bad\x1fid", forged_file), -EINVAL);
  CHECK_EQ(mc_auth_generate_tenant("default", forged_file), -EINVAL);
  CHECK(mc_auth_tenant_ok("caf\xc3\xa9", 5));  /* UTF-8 */
  CHECK(!mc_auth_tenant_ok("t\xff", 2));        /* not UTF-8 */
  CHECK(!mc_auth_tenant_ok("t\xc3", 2));        /* cut short */
  CHECK(!mc_auth_tenant_ok("\xc0\xaf", 2));     /* overlong */
  CHECK(!mc_auth_tenant_ok("\xed\xa0\x80", 3)); /* a surrogate */
  FILE *f = fopen(forged_file, "w"); /* claims tenant "team one" with a secret the cluster did not derive */
  REQUIRE(f);
  fprintf(f, "tenant team one\n%s\n", SECRET_B);
  fclose(f);
  use_secret(t1_spec);
  CHECK(mc_auth_enabled());
  CHECK_STR(mc_auth_tenant(), "team one");
  CHECK_EQ(mc_auth_generate_tenant("t3", "-"), -EPERM); /* a tenant derives no secrets */
  use_secret(SECRET_A);
  CHECK_STR(mc_auth_tenant(), "");
}

static void test_tenant_realms(void) {
  make_tenant_files();
  int cli;
  /* the master serves a tenant in the tenant's realm */
  CHECK_EQ(handshake(SECRET_A, t1_spec, "master", "master", &cli), 0);
  CHECK_EQ(cli, 0);
  CHECK_STR(last_realm, "team one");
  CHECK_EQ(handshake(SECRET_A, SECRET_A, "master", "master", &cli), 0);
  CHECK_STR(last_realm, "");
  /* a forged tenant secret and a tenant at a cluster member's transfer-engine ports are refused */
  CHECK(handshake(SECRET_A, forged_spec, "master", "master", &cli) != 0);
  CHECK_EQ(cli, 13);
  CHECK_EQ(handshake(SECRET_A, t1_spec, "te-data", "te-data", &cli), -EACCES);
  CHECK_EQ(cli, 13);
  CHECK_EQ(handshake(SECRET_A, t1_spec, "te-ctrl", "te-ctrl", &cli), -EACCES);
  CHECK_EQ(cli, 13);
  /* a tenant's holder serves its own tenant and members of the whole cluster, not another tenant */
  CHECK_EQ(handshake(t1_spec, t1_spec, "te-data", "te-data", &cli), 0);
  CHECK_EQ(cli, 0);
  CHECK_STR(last_realm, "team one");
  CHECK_EQ(handshake(t1_spec, SECRET_A, "te-ctrl", "te-ctrl", &cli), 0); /* the master's liveness probe */
  CHECK_EQ(cli, 0);
  CHECK_STR(last_realm, "team one");
  CHECK_EQ(handshake(t1_spec, t2_spec, "te-data", "te-data", &cli), -EACCES);
  CHECK_EQ(cli, 13);
  CHECK(handshake(t1_spec, forged_spec, "te-data", "te-data", &cli) != 0);
  CHECK_EQ(cli, 13);
  /* a holder of another cluster's secret derives other tenant keys */
  CHECK(handshake(t1_spec, SECRET_B, "te-data", "te-data", &cli) != 0);
  CHECK_EQ(cli, 13);
}

static void test_tenant_http(void) {
  char h[MC_AUTH_HTTP_VALUE_MAX], realm[MC_AUTH_TENANT_MAX + 1];
  use_secret(t1_spec);
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata?key=k", "b", 1, h, sizeof(h)), 0);
  CHECK(!strncmp(h, "v2 ", 3));
  use_secret(SECRET_A);
  CHECK_EQ(mc_auth_http_check("PUT", "/metadata?key=k", "b", 1, h), 0); /* admin: members of the cluster only */
  CHECK_EQ(mc_auth_http_check_realm("PUT", "/metadata?key=k", "b", 1, h, realm), 1);
  CHECK_STR(realm, "team one");
  CHECK_EQ(mc_auth_http_check_realm("PUT", "/metadata?key=k", "b", 1, h, realm), 0); /* a replay */
  use_secret(forged_spec);
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata?key=k", "b", 1, h, sizeof(h)), 0);
  use_secret(SECRET_A);
  CHECK_EQ(mc_auth_http_check_realm("PUT", "/metadata?key=k", "b", 1, h, realm), 0);
  CHECK_STR(realm, "");
  /* a v2 signature whose tenant field was swapped for another tenant's */
  use_secret(t2_spec);
  CHECK_EQ(mc_auth_http_sign("PUT", "/metadata?key=k", "b", 1, h, sizeof(h)), 0);
  char swapped[MC_AUTH_HTTP_VALUE_MAX];
  long long ts;
  char nh[40], th[300], mh[80];
  REQUIRE(sscanf(h, "v2 %lld %39s %299s %79s", &ts, nh, th, mh) == 4);
  snprintf(swapped, sizeof(swapped), "v2 %lld %s %s %s", ts, nh, "7465616d206f6e65" /* "team one" */, mh);
  use_secret(SECRET_A);
  CHECK_EQ(mc_auth_http_check_realm("PUT", "/metadata?key=k", "b", 1, swapped, realm), 0);
  unlink(t1_file);
  unlink(t2_file);
  unlink(forged_file);
  rmdir(tdir);
  use_secret(NULL);
}

TEST_MAIN(TEST_CASE(test_same_secret), TEST_CASE(test_other_secret), TEST_CASE(test_proof_for_another_service),
          TEST_CASE(test_client_without_secret), TEST_CASE(test_silent_client_bounded),
          TEST_CASE(test_open_server_answers_hello), TEST_CASE(test_feed_in_pieces), TEST_CASE(test_garbage_refused),
          TEST_CASE(test_http_signatures), TEST_CASE(test_canonical_target), TEST_CASE(test_secret_file_and_generate),
          TEST_CASE(test_tenant_realms), TEST_CASE(test_tenant_http))
