/* Tenant secrets (docs/security.md, "Tenants") against real processes: a real mooncake_master holding the
 * cluster secret and its embedded metadata server, store clients in child processes, each of one realm:
 * a member of the whole cluster (H0, with a segment), tenant alpha (HA with a segment, CA without) and
 * tenant beta (HB with a segment). Every engine moves bytes over TCP (MC_FORCE_TCP): the same-host path
 * maps peers' memory through /proc, which the kernel grants any process of the same user, so it is no
 * boundary between tenants (docs/security.md says so).
 *
 * What must hold: a tenant's objects are stored only on its own segments and a member's only on the
 * whole cluster's; a tenant reads and removes only its own keys; a raw request naming another realm's
 * key, scope or segment is refused; a tenant reaches the transfer-engine ports of its own realm only; a
 * forged tenant secret gets nothing. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "net/auth.h"
#include "lib/te_child.h"
#include "test_store_harness.c"
#include "proto/proto.h"
#include "mooncake/store_errors.h"
#include "mooncake/transfer_engine.h"
#include "net/mrpc.h"
#include "te/engine_internal.h"

#define OBJ (64 * KiB)

static char dir[] = "/tmp/mc_tenants_XXXXXX";
static char cluster_file[300], alpha_file[300], beta_file[300], forged_file[300];
static char env_cluster[330], env_alpha[330], env_beta[330];

static void use_file(const char *path) {
  unsetenv("MC_CLUSTER_SECRET");
  if (path) setenv("MC_CLUSTER_SECRET_FILE", path, 1);
  else unsetenv("MC_CLUSTER_SECRET_FILE");
  mc_auth_reset();
}

static int make_secrets(void) {
  if (!mkdtemp(dir)) return -1;
  snprintf(cluster_file, sizeof(cluster_file), "%s/cluster", dir);
  snprintf(alpha_file, sizeof(alpha_file), "%s/alpha", dir);
  snprintf(beta_file, sizeof(beta_file), "%s/beta", dir);
  snprintf(forged_file, sizeof(forged_file), "%s/forged", dir);
  if (mc_auth_generate(cluster_file)) return -1;
  use_file(cluster_file);
  if (mc_auth_generate_tenant("alpha", alpha_file) || mc_auth_generate_tenant("beta", beta_file)) return -1;
  FILE *f = fopen(forged_file, "w"); /* tenant alpha's name with a secret the cluster never derived */
  if (!f) return -1;
  fprintf(f, "tenant alpha\n00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n");
  fclose(f);
  chmod(forged_file, 0600);
  snprintf(env_cluster, sizeof(env_cluster), "MC_CLUSTER_SECRET_FILE=%s", cluster_file);
  snprintf(env_alpha, sizeof(env_alpha), "MC_CLUSTER_SECRET_FILE=%s", alpha_file);
  snprintf(env_beta, sizeof(env_beta), "MC_CLUSTER_SECRET_FILE=%s", beta_file);
  return 0;
}

/* ------------------------------------------------------------ the master, seen by a realm */

struct seg_info {
  char name[128], client[40];
  struct mc_uuid id;
  uint64_t base, used;
};

/* QUERY_SEGMENTS over a connection of this process's realm; the count, or -1. */
static int query_segments(struct master *m, struct seg_info *out, int max) {
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)m->rpc, 2000, 5000);
  struct mc_wbuf req = {0}, rep = {0};
  int rc = mc_mrpc_call(c, MC_OP_QUERY_SEGMENTS, &req, &rep), n = -1;
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    uint32_t cnt = mc_r_u32(&r);
    for (n = 0; (uint32_t)n < cnt && !r.err; n++) {
      struct mc_segment_rec s;
      mc_get_segment(&r, &s);
      char *client = mc_r_str(&r);
      (void)mc_r_u8(&r);
      uint64_t used = mc_r_u64(&r);
      if (n < max && !r.err) {
        snprintf(out[n].name, sizeof(out[n].name), "%s", s.name);
        snprintf(out[n].client, sizeof(out[n].client), "%s", client);
        out[n].id = s.id;
        out[n].base = s.base;
        out[n].used = used;
      }
      mc_segment_rec_free(&s);
      mc_free(client);
    }
    if (r.err) n = -1;
  }
  mc_w_free(&rep);
  mc_mrpc_client_free(c);
  return n;
}

/* The segment names of key's replicas (as seen by this process's realm), comma-separated into out; the
 * status of the lookup. */
static int replica_segments(struct master *m, const char *key, size_t klen, char *out, size_t cap) {
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)m->rpc, 2000, 5000);
  struct mc_wbuf req = {0}, rep = {0};
  mc_w_blob(&req, key, (uint32_t)klen);
  int rc = mc_mrpc_call(c, MC_OP_GET_REPLICA_LIST, &req, &rep);
  out[0] = 0;
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    (void)mc_r_u64(&r);
    struct mc_replica_rec *reps = NULL;
    uint32_t n = mc_get_replicas(&r, &reps);
    for (uint32_t i = 0; i < n; i++) {
      size_t l = strlen(out);
      snprintf(out + l, cap - l, "%s%s", l ? "," : "", reps[i].segment_name);
      mc_replica_rec_free(&reps[i]);
    }
    mc_free(reps);
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  mc_mrpc_client_free(c);
  return rc;
}

static const struct seg_info *find_seg(const struct seg_info *s, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].name, name)) return &s[i];
  return NULL;
}

static struct mc_uuid parse_uuid(const char *t) {
  unsigned long long a, b, c, d, e;
  struct mc_uuid u = {0, 0};
  if (sscanf(t, "%8llx-%4llx-%4llx-%4llx-%12llx", &a, &b, &c, &d, &e) == 5)
    u = (struct mc_uuid){a << 32 | b << 16 | c, d << 48 | e};
  return u;
}

/* One raw request over a connection of this process's realm: the status. */
static int raw_call(struct master *m, uint16_t op, const struct mc_wbuf *req) {
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)m->rpc, 2000, 5000);
  struct mc_wbuf rep = {0};
  int rc = mc_mrpc_call(c, op, req, &rep);
  mc_w_free(&rep);
  mc_mrpc_client_free(c);
  return rc;
}

/* ------------------------------------------------------------ what a tenant may not do */

struct names {
  char ha[128], hb[128], h0[128];
  struct seg_info ha_seg;
};
static struct names g;

/* In a child of tenant beta: raw requests about alpha's objects and segment. Exit 0 when every one was
 * refused as it must be. */
static int beta_raw_checks(struct master *m) {
  use_file(beta_file);
  int bad = 0;
  struct mc_wbuf q = {0};
  mc_w_blob(&q, "alpha\x1f" "a0", 8); /* GET_REPLICA_LIST of alpha's key, named in full */
  if (raw_call(m, MC_OP_GET_REPLICA_LIST, &q) != MC_INVALID_PARAMS) bad |= 1;
  q.len = 0;
  mc_w_blob(&q, "a0", 2); /* a key of no namespace */
  if (raw_call(m, MC_OP_EXIST_KEY, &q) != MC_INVALID_PARAMS) bad |= 2;
  q.len = 0;
  mc_w_blob(&q, "alpha\x1f" "a0", 8);
  mc_w_u8(&q, 1); /* REMOVE force */
  if (raw_call(m, MC_OP_REMOVE, &q) != MC_INVALID_PARAMS) bad |= 4;
  q.len = 0;
  mc_w_u8(&q, 1); /* REMOVE_ALL force, without a scope (every key) */
  if (raw_call(m, MC_OP_REMOVE_ALL, &q) != MC_INVALID_PARAMS) bad |= 8;
  mc_w_str(&q, "alpha\x1f"); /* ... and with alpha's */
  if (raw_call(m, MC_OP_REMOVE_ALL, &q) != MC_INVALID_PARAMS) bad |= 16;
  q.len = 0;
  mc_w_u8(&q, 1); /* ... while its own scope removes its own four objects */
  mc_w_str(&q, "beta\x1f");
  struct mc_mrpc_client *rc_all = mc_mrpc_client_new("127.0.0.1", (uint16_t)m->rpc, 2000, 5000);
  struct mc_wbuf rep_all = {0};
  /* the count, then the witness block of its DROP records */
  if (mc_mrpc_call(rc_all, MC_OP_REMOVE_ALL, &q, &rep_all) || rep_all.len < 8 || rep_all.p[0] != 4) bad |= 256;
  mc_w_free(&rep_all);
  mc_mrpc_client_free(rc_all);
  q.len = 0;
  mc_w_str(&q, ".*"); /* replicas by regex: only beta's keys are seen (none has a0's name) */
  struct mc_mrpc_client *c = mc_mrpc_client_new("127.0.0.1", (uint16_t)m->rpc, 2000, 5000);
  struct mc_wbuf rep = {0};
  if (mc_mrpc_call(c, MC_OP_GET_REPLICA_LIST_BY_REGEX, &q, &rep) || memmem(rep.p, rep.len, "alpha", 5)) bad |= 32;
  mc_w_free(&rep);
  mc_mrpc_client_free(c);
  /* alpha's segment, unmounted with its owner's client id taken from a listing */
  q.len = 0;
  mc_put_uuid(&q, g.ha_seg.id);
  mc_put_uuid(&q, parse_uuid(g.ha_seg.client));
  if (raw_call(m, MC_OP_UNMOUNT_SEGMENT, &q) != MC_INVALID_PARAMS) bad |= 64;
  /* beta's listing shows beta's segment only */
  struct seg_info segs[8];
  int n = query_segments(m, segs, 8);
  if (n != 1 || strcmp(segs[0].name, g.hb)) bad |= 128;
  mc_w_free(&q);
  if (bad) fprintf(stderr, "beta_raw_checks: failed checks mask 0x%x (segments seen: %d)\n", bad, n);
  return bad ? 1 : 0;
}

/* In a child of the realm of secret file `file`: an engine writes 4 KiB at addr of segment `seg` over
 * TCP. Exit 0 when the write completed, 1 when it failed, 2 when the engine could not start. */
static pid_t writer_child(struct master *m, const char *file, const char *seg, uint64_t addr) {
  static int nth;
  char name[32];
  snprintf(name, sizeof(name), "writer-%d", ++nth); /* each child publishes its own engine's keys */
  pid_t pid = fork();
  if (pid) return pid;
  use_file(file);
  _exit(mt_te_write_4k(m->metadata, name, seg, addr, 0x5a));
}

/* In a child with secret file `file`: setup with tenant_id; exit 0 when it returned want (1: any error). */
static pid_t setup_child(struct master *m, const char *file, const char *tenant_id, int want) {
  pid_t pid = fork();
  if (pid) return pid;
  use_file(file);
  mooncake_store_t s = mooncake_store_create();
  mc_store_config_t cfg = {.local_hostname = "127.0.0.1", .metadata_server = m->metadata, .local_buffer_size = 4 * MiB,
                           .protocol = "tcp", .master_server_addr = m->addr, .tenant_id = tenant_id};
  int rc = mc_store_setup(s, &cfg);
  int as_wanted = want == 1 ? rc != 0 : rc == want;
  if (!as_wanted) fprintf(stderr, "setup_child(%s): %d, expected %d\n", tenant_id, rc, want);
  mooncake_store_destroy(s);
  _exit(as_wanted ? 0 : 1);
}

static void test_tenants(void) {
  REQUIRE(make_secrets() == 0);
  use_file(cluster_file); /* the master inherits it */
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0);
  const char *env0[] = {env_cluster, "MC_FORCE_TCP=1", NULL}, *enva[] = {env_alpha, "MC_FORCE_TCP=1", NULL},
             *envb[] = {env_beta, "MC_FORCE_TCP=1", NULL};
  struct peer h0, ha, ca, hb;
  REQUIRE(peer_start(&h0, &m, 32 * MiB, 4 * MiB, env0) == 0);
  REQUIRE(peer_start(&ha, &m, 32 * MiB, 4 * MiB, enva) == 0);
  REQUIRE(peer_start(&ca, &m, 0, 4 * MiB, enva) == 0);
  REQUIRE(peer_start(&hb, &m, 32 * MiB, 4 * MiB, envb) == 0);
  snprintf(g.ha, sizeof(g.ha), "%s", ha.name);
  snprintf(g.hb, sizeof(g.hb), "%s", hb.name);
  snprintf(g.h0, sizeof(g.h0), "%s", h0.name);

  /* tenant alpha's objects go to alpha's segment only, a member's to the whole cluster's only */
  for (int i = 0; i < 8; i++) CHECK_EQ(peer_cmd(&ca, "PUT a%d %d %d 1 0", i, OBJ, 10 + i), 0);
  for (int i = 0; i < 8; i++) CHECK_EQ(peer_cmd(&h0, "PUT d%d %d %d 1 0", i, OBJ, 30 + i), 0);
  for (int i = 0; i < 4; i++) CHECK_EQ(peer_cmd(&hb, "PUT b%d %d %d 1 0", i, OBJ, 50 + i), 0);
  struct seg_info segs[8];
  int n = query_segments(&m, segs, 8); /* as a member of the whole cluster: every segment */
  CHECK_EQ(n, 3);
  const struct seg_info *sa = find_seg(segs, n, ha.name), *sb = find_seg(segs, n, hb.name), *s0 = find_seg(segs, n, h0.name);
  REQUIRE(sa && sb && s0);
  g.ha_seg = *sa;
  char where[512], key[32];
  for (int i = 0; i < 8; i++) { /* asked in full by a member of the whole cluster, who sees every key */
    int kl = snprintf(key, sizeof(key), "alpha\x1f" "a%d", i);
    CHECK_EQ(replica_segments(&m, key, (size_t)kl, where, sizeof(where)), 0);
    CHECK_STR(where, ha.name);
    kl = snprintf(key, sizeof(key), "d%d", i);
    CHECK_EQ(replica_segments(&m, key, (size_t)kl, where, sizeof(where)), 0);
    CHECK_STR(where, h0.name);
  }
  for (int i = 0; i < 4; i++) {
    int kl = snprintf(key, sizeof(key), "beta\x1f" "b%d", i);
    CHECK_EQ(replica_segments(&m, key, (size_t)kl, where, sizeof(where)), 0);
    CHECK_STR(where, hb.name);
  }

  /* reads: a tenant's own keys, never another realm's */
  CHECK_EQ(peer_cmd(&ca, "GET a3 %d 13", OBJ), OBJ);
  CHECK_EQ(peer_cmd(&ha, "GET a3 %d 13", OBJ), OBJ); /* the same tenant, another process */
  CHECK_EQ(peer_cmd(&hb, "GET a3 %d 13", OBJ), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&h0, "GET a3 %d 13", OBJ), MC_OBJECT_NOT_FOUND); /* the default namespace has no a3 */
  CHECK_EQ(peer_cmd(&ca, "GET d3 %d 33", OBJ), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&h0, "GET d3 %d 33", OBJ), OBJ);

  /* raw requests of beta about alpha's keys and segment */
  pid_t pid = fork();
  if (pid == 0) _exit(beta_raw_checks(&m));
  CHECK_EQ(mc_tp_exit_code(pid), 0);
  n = query_segments(&m, segs, 8);
  CHECK_EQ(n, 3); /* alpha's segment is still mounted */

  /* the transfer-engine ports: alpha writes into alpha's segment; beta cannot reach it, nor the
   * whole cluster's; a forged alpha secret cannot even start an engine (its metadata writes are refused) */
  uint64_t free_a = sa->base + 16 * MiB, free_0 = s0->base + 16 * MiB;
  CHECK_EQ(mc_tp_exit_code(writer_child(&m, alpha_file, ha.name, free_a)), 0);
  CHECK_EQ(mc_tp_exit_code(writer_child(&m, beta_file, ha.name, free_a)), 1);
  CHECK_EQ(mc_tp_exit_code(writer_child(&m, alpha_file, h0.name, free_0)), 1);
  CHECK_EQ(mc_tp_exit_code(writer_child(&m, cluster_file, ha.name, free_a)), 0); /* members reach every realm */
  CHECK(mc_tp_exit_code(writer_child(&m, forged_file, ha.name, free_a)) != 0);

  /* a tenant's setup with another tenant_id fails; with its own (or none) it works */
  CHECK_EQ(mc_tp_exit_code(setup_child(&m, alpha_file, "beta", MC_INVALID_PARAMS)), 0);
  CHECK_EQ(mc_tp_exit_code(setup_child(&m, alpha_file, "alpha", 0)), 0);
  CHECK_EQ(mc_tp_exit_code(setup_child(&m, forged_file, NULL, 1)), 0);

  /* beta's remove-all (in beta_raw_checks) removed beta's objects only */
  CHECK_EQ(peer_cmd(&hb, "GET b1 %d 51", OBJ), MC_OBJECT_NOT_FOUND);
  CHECK_EQ(peer_cmd(&ca, "GET a5 %d 15", OBJ), OBJ);
  CHECK_EQ(peer_cmd(&h0, "GET d5 %d 35", OBJ), OBJ);
  peer_quit(&hb);

  peer_quit(&ca);
  peer_quit(&ha);
  peer_quit(&h0);
  master_stop(&m);
  unlink(cluster_file);
  unlink(alpha_file);
  unlink(beta_file);
  unlink(forged_file);
  rmdir(dir);
  use_file(NULL);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 6 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  static const struct mc_test_case cases[] = {TEST_CASE(test_tenants)};
  return run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
