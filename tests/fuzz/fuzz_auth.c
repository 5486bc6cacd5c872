/* Fuzz target: the cluster-secret handshake and signed HTTP headers (src/net/auth.c, docs/security.md)
 * with a secret configured, from either side. The first byte picks who this process is (a member of the
 * whole cluster, or tenant "alpha") and what is fuzzed:
 *   - the server's state machine (mc_auth_srv_feed, what the master's event loop runs), fed the rest of
 *     the input in pieces whose sizes come from the input: it never consumes more than it was given,
 *     never writes more than MC_AUTH_CHALLENGE_MAX bytes per call, and once it failed or finished it is
 *     not fed again;
 *   - the client (mc_auth_client) against a hostile server whose bytes are the rest of the input, over a
 *     socket pair: it ends, within its deadline, accepted only when the server's bytes prove the secret
 *     (which random input cannot), and never reads a realm longer than the limit;
 *   - mc_auth_http_check_realm on the rest of the input as a header value: never accepted (a valid
 *     signature cannot be guessed), and the realm reported is empty whenever it is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/auth.h"
#include "fuzz_common.h"

static char tenant_file[64];

static void remove_tenant_file(void) { unlink(tenant_file); }

static void identity(int tenant) {
  static int current = -1;
  if (current == tenant) return;
  if (!tenant_file[0]) { /* a tenant secret file, made once with the cluster secret below */
    snprintf(tenant_file, sizeof(tenant_file), "/tmp/mc_fuzz_auth_%d", (int)getpid());
    unlink(tenant_file);
    setenv("MC_CLUSTER_SECRET", "fuzz-auth-cluster-secret-0123456789", 1);
    unsetenv("MC_CLUSTER_SECRET_FILE");
    mc_auth_reset();
    if (mc_auth_generate_tenant("alpha", tenant_file)) abort();
    atexit(remove_tenant_file);
  }
  if (tenant) {
    setenv("MC_CLUSTER_SECRET_FILE", tenant_file, 1);
  } else {
    unsetenv("MC_CLUSTER_SECRET_FILE");
    setenv("MC_CLUSTER_SECRET", "fuzz-auth-cluster-secret-0123456789", 1);
  }
  mc_auth_reset();
  if (!mc_auth_enabled()) abort();
  current = tenant;
}

static const char *const services[] = {"master", "te-ctrl", "te-data", "other"};

static void fuzz_server(const char *service, struct fz_in *in) {
  struct mc_auth_srv st = {0};
  uint8_t buf[1024], out[MC_AUTH_CHALLENGE_MAX + 64];
  size_t have = 0;
  while (fz_left(in)) {
    size_t got, want = fz_u8(in) % 64 + 1;
    const uint8_t *p = fz_take(in, want, &got);
    if (!p) break;
    if (have + got > sizeof(buf)) break;
    memcpy(buf + have, p, got);
    have += got;
    size_t out_len = 0;
    int done = -1;
    long used = mc_auth_srv_feed(&st, service, buf, have, out, &out_len, &done);
    if (out_len > MC_AUTH_CHALLENGE_MAX || (used > 0 && (size_t)used > have) || done < 0) abort();
    if (used < 0 || done) {
      if (done && st.state != 2) abort();
      return;
    }
    memmove(buf, buf + used, have - (size_t)used);
    have -= (size_t)used;
  }
}

static void fuzz_client(const char *service, struct fz_in *in) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) abort();
  size_t got;
  const uint8_t *p = fz_take(in, fz_left(in), &got);
  if (p && got && write(sv[1], p, got) != (ssize_t)got) abort(); /* fits the socket buffer: inputs are small */
  shutdown(sv[1], SHUT_WR);
  int rc = mc_auth_client(sv[0], service, 50);
  if (rc == 0) abort(); /* random bytes proved the secret */
  close(sv[0]);
  close(sv[1]);
}

static void fuzz_http(struct fz_in *in) {
  size_t got;
  const uint8_t *p = fz_take(in, fz_left(in), &got);
  char value[1024], realm[MC_AUTH_TENANT_MAX + 1];
  size_t n = p ? (got < sizeof(value) - 1 ? got : sizeof(value) - 1) : 0;
  if (n) memcpy(value, p, n);
  value[n] = 0;
  if (mc_auth_http_check_realm("PUT", "/metadata?key=k", "b", 1, value, realm) || realm[0]) abort();
  if (mc_auth_http_check("POST", "/api/v1/remove_all", "", 0, value)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_quiet();
  struct fz_in in = {data, size, 0};
  uint8_t mode = fz_u8(&in);
  identity(mode & 1);
  const char *service = services[(mode >> 1) & 3];
  switch ((mode >> 3) % 3) {
    case 0: fuzz_server(service, &in); break;
    case 1: fuzz_client(service, &in); break;
    default: fuzz_http(&in); break;
  }
  return 0;
}
