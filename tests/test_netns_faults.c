/* Network faults on a holder's link, in network namespaces, while nodes read and write through it. The
 * topology, master and nodes are test_netns_cluster's (that file is included): a master and three
 * tests/netns_node processes on a bridge, node 1 a pure client, nodes 2 and 3 holders, every byte over
 * TCP between namespaces. The faults are on node 2's link, both directions (its eth0 and the bridge's
 * end of its veth):
 *
 *   delay    tc netem delay 50ms (100 ms round trip)
 *   loss     tc netem loss 7%
 *   reorder  tc netem delay 10ms reorder 25% 50% (a quarter of the packets overtake the rest)
 *   flap     the link at the bridge down 1 s, up 1.5 s, three times (ip link, no netem needed)
 *
 * During each, node 1 writes objects into node 2's segment and reads them back, and node 2 reads
 * objects held by node 3 (both cross the faulty link), ROUNDS times. Checked: no read ever returns wrong
 * bytes (netns_node verifies every byte: -1); every call answers within its deadlines (OP_BOUND_MS: the
 * nodes' RPC deadline, one no-progress and one connect timeout, and slack for a loaded machine); under
 * delay, loss and reordering every call succeeds (TCP carries them; nothing reaches a deadline) and the
 * master never expires node 2 (nor during a flap: a 1 s cut is shorter than client_ttl); after the fault is
 * lifted, a put into node 2 and a read of it succeed at once, under the client node 2 had before.
 *
 * Needs root and iproute2 (a missing 'tc' fails the test). The delay, loss and reordering phases need the
 * kernel's netem queueing discipline (sch_netem); the kernel of the development and CI machines has
 * none ('Specified qdisc kind is unknown'), so there those phases are reported NOT TESTED HERE with that
 * reason and the test asserts the rest (the flap phase needs no netem). On a kernel with netem all phases
 * run and are asserted. The nodes use
 * test_netns_cluster's shortened deadlines (NODE_*_MS there). */
#pragma GCC diagnostic ignored "-Wunused-function" /* the included scenario's helpers this test does not use */
#define MC_NETNS_LIB
#include "test_netns_cluster.c"

#define ROUNDS 8
#define OP_BOUND_MS (NODE_RPC_MS + NODE_TCP_IO_MS + NODE_CONNECT_MS + 3000L)
#define FAULTY 2 /* the node whose link carries the faults */

static char tc_bin[512];

/* Runs "tc <args>" (split on spaces); its stderr to ours when loud. The exit status. */
static int tcc(int loud, const char *fmt, ...) {
  char cmd[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return run_split(tc_bin, cmd, !loud);
}

/* 0 when netem can be attached here (tried on mc-t's loopback, then removed); -1 when the kernel has no
 * netem (reason printed); -2 when tc is missing (a failure). */
static int netem_available(void) {
  char *tc = mc_tp_which("tc");
  if (!tc) {
    fprintf(stderr, "FAIL: the 'tc' command (iproute2) is not installed; test_netns_faults needs it\n");
    return -2;
  }
  snprintf(tc_bin, sizeof(tc_bin), "%s", tc);
  free(tc);
  if (tcc(1, "-n %s qdisc add dev lo root netem delay 1ms", ns_name[NS_T])) {
    fprintf(stderr, "NOT TESTED HERE: 'tc qdisc add ... netem' is refused on this machine: the kernel has no netem "
                    "queueing discipline (CONFIG_NET_SCH_NETEM / the sch_netem module; 'Specified qdisc kind is "
                    "unknown' above means it is missing). The delay, loss and reordering phases are skipped; the "
                    "link flap phase runs and is asserted.\n");
    return -1;
  }
  tcc(0, "-n %s qdisc del dev lo root", ns_name[NS_T]);
  return 0;
}

/* Applies netem args (NULL: removes them) to both ends of node FAULTY's link. 0 or -1. */
static int link_netem(const char *args) {
  const char *ns_n = ns_name[NS_N1 + FAULTY - 1], *tag = ns_tag[NS_N1 + FAULTY - 1];
  if (!args) {
    int a = tcc(0, "-n %s qdisc del dev eth0 root", ns_n), b = tcc(0, "-n %s qdisc del dev v-%s root", ns_name[NS_T], tag);
    return a || b ? -1 : 0;
  }
  return tcc(1, "-n %s qdisc replace dev eth0 root netem %s", ns_n, args) ||
                 tcc(1, "-n %s qdisc replace dev v-%s root netem %s", ns_name[NS_T], tag, args)
             ? -1
             : 0;
}

struct tally {
  int calls, ok, wrong, late;
  long long worst_ms;
};

/* One call's answer into t: rc (netns_node's integer), ms the wall time it took. ok when want == rc. */
static void tally_add(struct tally *t, const char *what, long long rc, long long want, long ms) {
  t->calls++;
  t->ok += rc == want;
  t->wrong += rc == -1; /* netns_node: bytes differ, or a size mismatch */
  if (ms > OP_BOUND_MS) t->late++;
  if (ms > t->worst_ms) t->worst_ms = ms;
  if (rc != want) fprintf(stderr, "    %s: %lld (expected %lld) after %ld ms\n", what, rc, want, ms);
}

static long long timed_cmd(struct node *n, long *ms, const char *fmt, const char *key, uint64_t size, int seed,
                           const char *seg) {
  long t0 = mc_tp_now_ms();
  long long rc = seg ? node_cmd(n, NULL, fmt, key, (unsigned long long)size, seed, seg)
                     : node_cmd(n, NULL, fmt, key, (unsigned long long)size, seed);
  *ms = mc_tp_now_ms() - t0;
  return rc;
}

/* ROUNDS rounds of: node 1 puts an object into node FAULTY's segment and reads it back; node FAULTY reads
 * an object node 3 holds. Sizes from 64 KiB to ~1 MiB. */
static void workload(const char *tag, struct tally *t, const char *const *on3, int n3) {
  char key[64], what[96];
  for (int i = 0; i < ROUNDS; i++) {
    uint64_t size = i % 3 == 0 ? 65536 : obj_size(i % NOBJ);
    int seed = 100 + i;
    long ms;
    snprintf(key, sizeof(key), "%s-%d", tag, i);
    long long rc = timed_cmd(&nodes[1], &ms, "PUT %s %llu %d 1 %s", key, size, seed, nodes[FAULTY].name);
    snprintf(what, sizeof(what), "node1 PUT %s into node %d", key, FAULTY);
    tally_add(t, what, rc, 0, ms);
    rc = timed_cmd(&nodes[1], &ms, "GET %s %llu %d", key, size, seed, NULL);
    snprintf(what, sizeof(what), "node1 GET %s", key);
    tally_add(t, what, rc, rc == -704 ? -704 : (long long)size, ms); /* absent only if the put failed */
    rc = timed_cmd(&nodes[FAULTY], &ms, "GET %s %llu %d", on3[i % n3], obj_size(i % n3), 200 + i % n3, NULL);
    snprintf(what, sizeof(what), "node%d GET %s (on node 3)", FAULTY, on3[i % n3]);
    tally_add(t, what, rc, (long long)obj_size(i % n3), ms);
  }
}

/* After a fault: node FAULTY is still (or again) listed; within 10 s a put into it and reads of it
 * from node 1 succeed, each in under a second. */
static void check_recovered(const char *tag, const char *client_before, int same_client) {
  struct segs q;
  long t0 = mc_tp_now_ms(), back = wait_segment(nodes[FAULTY].name, 1, 10000);
  CHECK(back >= 0);
  if (same_client) {
    CHECK_EQ(query_segments(&q), 0);
    int k = seg_index(&q, nodes[FAULTY].name);
    CHECK(k >= 0 && !strcmp(q.client[k], client_before)); /* not expired meanwhile */
  }
  char key[64];
  long long rc = -1, us = -1;
  for (int i = 0; rc && mc_tp_now_ms() - t0 < 10000; i++, mc_tp_sleep_ms(200)) {
    snprintf(key, sizeof(key), "%s-after-%d", tag, i);
    rc = node_cmd(&nodes[1], &us, "PUT %s 262144 77 1 %s", key, nodes[FAULTY].name);
  }
  CHECK_EQ(rc, 0);
  long long got = node_cmd(&nodes[1], &us, "GET %s 262144 77", key);
  CHECK_EQ(got, 262144);
  CHECK(us >= 0 && us < 1000000);
  fprintf(stderr, "  %s lifted: node %d serves again %ld ms later (a read of 256 KiB: %lld us)\n", tag, FAULTY,
          mc_tp_now_ms() - t0, us);
}

static void report(const char *tag, const struct tally *t, int all_ok) {
  fprintf(stderr, "  %s: %d calls, %d as expected, %d wrong bytes, %d past %ld ms, slowest %lld ms\n", tag, t->calls,
          t->ok, t->wrong, t->late, OP_BOUND_MS, t->worst_ms);
  CHECK_EQ(t->wrong, 0);
  CHECK_EQ(t->late, 0);
  if (all_ok) CHECK_EQ(t->ok, t->calls);
}

static void faults(void) {
  phase_t0 = mc_tp_now_ms();
  int avail = netem_available(), netem = avail == 0;
  REQUIRE(avail != -2);
  REQUIRE(master_up() == 0);
  mcli = mc_mrpc_client_new(MASTER_IP, MASTER_RPC_PORT, 3000, 10000);
  REQUIRE(mcli);
  REQUIRE(node_start(2, 64 * MiB) == 0);
  REQUIRE(node_start(3, 64 * MiB) == 0);
  REQUIRE(node_start(1, 0) == 0);
  for (int i = 1; i <= 3; i++) CHECK(node_wait_warm(&nodes[i], WARM_TIMEOUT_MS) >= 0);
  for (int i = 2; i <= 3; i++) CHECK(wait_segment(nodes[i].name, 1, 10000) >= 0);
  /* objects on node 3 only, for node 2 to read across its link */
  const char *on3[3] = {"on3-0", "on3-1", "on3-2"};
  for (int i = 0; i < 3; i++)
    CHECK_EQ(node_cmd(&nodes[1], NULL, "PUT %s %llu %d 1 %s", on3[i], (unsigned long long)obj_size(i), 200 + i,
                      nodes[3].name), 0);
  struct tally base = {0};
  workload("base", &base, on3, 3);
  report("no fault", &base, 1);
  phase("cluster up, a round of the workload without faults");

  struct segs q;
  char client[40] = "";
  CHECK_EQ(query_segments(&q), 0);
  if (seg_index(&q, nodes[FAULTY].name) >= 0) snprintf(client, sizeof(client), "%s", q.client[seg_index(&q, nodes[FAULTY].name)]);

  static const struct {
    const char *tag, *netem;
  } kinds[] = {{"delay", "delay 50ms"}, {"loss", "loss 7%"}, {"reorder", "delay 10ms reorder 25% 50%"}};
  for (size_t k = 0; netem && k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    REQUIRE(link_netem(kinds[k].netem) == 0);
    struct tally t = {0};
    workload(kinds[k].tag, &t, on3, 3);
    CHECK_EQ(link_netem(NULL), 0);
    char what[64];
    snprintf(what, sizeof(what), "netem %s", kinds[k].netem);
    report(what, &t, 1);
    check_recovered(kinds[k].tag, client, 1);
    phase(kinds[k].tag);
  }
  if (!netem) /* the reason was printed at the start */
    fprintf(stderr, "  NOT TESTED HERE: no netem in this kernel: the delay, loss and reordering phases did not run\n");

  /* the link flaps: down 1 s, up 1.5 s, three times, with a read of an object on node 2 sent by node 1 as
   * it goes down: the read is carried through by TCP's retransmissions, or fails, within the deadlines,
   * never with wrong bytes. A cut of 1 s is shorter than client_ttl (3 s), also with the retransmission
   * of a ping lost in it (0.2 + 0.4 + 0.8 s): the master expires nothing */
  struct tally t = {0};
  for (int f = 0; f < 3; f++) {
    REQUIRE(link_set(NS_N1 + FAULTY - 1, 0) == 0);
    long t_down = mc_tp_now_ms();
    REQUIRE(node_send(&nodes[1], "GET base-1 %llu 101", (unsigned long long)obj_size(1)) == 0);
    mc_tp_sleep_ms(1000);
    REQUIRE(link_set(NS_N1 + FAULTY - 1, 1) == 0);
    long up_at = mc_tp_now_ms() - t_down;
    long long us;
    long long rc = node_answer(&nodes[1], &us);
    fprintf(stderr, "  flap %d: link down for %ld ms; node1's read through it: %lld after %lld ms\n", f, up_at, rc,
            us / 1000);
    tally_add(&t, "node1 GET base-1 (on node 2, sent as the link went down)", rc, (long long)obj_size(1),
              (long)(mc_tp_now_ms() - t_down));
    mc_tp_sleep_ms(1500);
  }
  report("link flaps", &t, 0);
  check_recovered("flap", client, 1);
  phase("link flaps");
  for (int n = 1; n <= 3; n++) CHECK_EQ(node_quit(&nodes[n]), 0);
  int st = mc_tp_stop(master_pid, 5000);
  untrack(master_pid);
  master_pid = -1;
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_netns_faults(void) { netns_run("netns_faults", faults); }

int main(int argc, char **argv) {
  static const struct mc_test_case cases[] = {TEST_CASE(test_netns_faults)};
  return netns_main(cases, argc, argv);
}
