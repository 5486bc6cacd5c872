/* Hostile peers against segment ownership and client expiry on the master (issue #20, defects 5 and 6),
 * with a real mooncake_master, real holder processes and raw master clients on 127.0.0.1:
 *   - flooding a holder's control-RPC port with idle connections (more than the server's 64 workers,
 *     re-opened as the server closes them) does not let another client mount the holder's segment name:
 *     the holder still pings, so the master refuses the mount and the holder's objects stay readable;
 *     an idle flood that is not re-opened is reaped within about a second (the probe answers again);
 *   - a holder killed with SIGKILL and restarted under the same name gets the name back at once, and one
 *     frozen with SIGSTOP gets it back within a bound (the store client retries the refused mount);
 *   - a client that mounts claiming a live engine's TE endpoint and then expires does not delete that
 *     engine's metadata keys, while a real holder's own keys are still deleted when it expires. */
#include <jansson.h>
#include <poll.h>
#include <stdatomic.h>

#include "lib/master_client.h"
#include "net/ctrl_rpc.h"
#include "meta/metadata.h"
#include "test_store_harness.c"

#define OBJ_SIZE (64 * KiB)
#define NFLOOD 100

/* ------------------------------------------------------------ holder process */

/* --holder NAME MASTER METADATA GSS: a storage client under a fixed name, obeying
 *   PUT <key> <size> <seed> (one replica on its own segment) -> rc;  GET <key> <size> <seed> -> bytes, -1 wrong. */
static int holder_main(char **argv) {
  mooncake_store_t s = mooncake_store_create();
  int rc = mooncake_store_setup(s, argv[2], argv[4], strtoull(argv[5], NULL, 10), 4 * MiB, "tcp", "", argv[3]);
  printf("READY %d\n", rc);
  fflush(stdout);
  if (rc) return 2;
  char line[512], key[256];
  unsigned long long size;
  unsigned seed;
  uint8_t *buf = malloc(OBJ_SIZE);
  while (fgets(line, sizeof(line), stdin)) {
    if (sscanf(line, "PUT %255s %llu %u", key, &size, &seed) == 3 && size <= OBJ_SIZE) {
      const char *pref[1] = {argv[2]};
      mooncake_replicate_config_t cfg = {1, 0, 0, pref, 1};
      fill(buf, size, seed);
      printf("%d\n", mooncake_store_put(s, key, buf, size, &cfg));
    } else if (sscanf(line, "GET %255s %llu %u", key, &size, &seed) == 3 && size <= OBJ_SIZE) {
      int64_t n = mooncake_store_get_into(s, key, buf, OBJ_SIZE);
      printf("%lld\n", (long long)(n == (int64_t)size && !verify(buf, size, seed) ? -1 : n));
    } else {
      break;
    }
    fflush(stdout);
  }
  free(buf);
  mooncake_store_destroy(s);
  return 0;
}

/* Starts a holder named name; 0 once it answered READY 0, else -1. *ready_ms: how long setup took. */
static int holder_start(struct peer *p, struct master *m, const char *name, long *ready_ms) {
  char *args[] = {"holder", "--holder", (char *)name, m->addr, m->metadata, "16777216", NULL};
  long t0 = mc_tp_now_ms();
  if (self_spawn(p, args, NULL, NULL)) return -1;
  char line[64] = "";
  int rc = -1;
  if (!fgets(line, sizeof(line), p->out) || sscanf(line, "READY %d", &rc) != 1 || rc) {
    fprintf(stderr, "holder %s did not start: %s\n", name, line);
    return -1;
  }
  if (ready_ms) *ready_ms = mc_tp_now_ms() - t0;
  snprintf(p->name, sizeof(p->name), "%s", name);
  return 0;
}

/* ------------------------------------------------------------ the master's view */

struct seg_view {
  char client[40], probe[128], endpoint[128];
};

/* Segment `name` as the master lists it: 1 found (*v filled), 0 not listed, -1 query failed. */
static int seg_lookup(struct mc_mrpc_client *c, const char *name, struct seg_view *v) {
  struct mc_wbuf w = {0}, rep;
  int found = mt_call(c, MC_OP_QUERY_SEGMENTS, &w, &rep) ? -1 : 0;
  struct mc_rbuf_rd r;
  mc_r_init(&r, rep.p, rep.len);
  uint32_t n = found ? 0 : mc_r_u32(&r);
  for (uint32_t i = 0; i < n && !r.err; i++) {
    struct mc_segment_rec s;
    mc_get_segment(&r, &s);
    char *client = mc_r_str(&r);
    mc_r_u8(&r);
    mc_r_u64(&r);
    if (!r.err && !found && !strcmp(s.name, name)) {
      snprintf(v->client, sizeof(v->client), "%s", client);
      snprintf(v->probe, sizeof(v->probe), "%s", s.probe_addr ? s.probe_addr : "");
      snprintf(v->endpoint, sizeof(v->endpoint), "%s", s.te_endpoint ? s.te_endpoint : "");
      found = 1;
    }
    mc_free(client);
    mc_segment_rec_free(&s);
  }
  mc_w_free(&rep);
  return found;
}

static int probe_port(const char *probe) {
  const char *colon = strrchr(probe, ':');
  return colon ? atoi(colon + 1) : -1;
}

/* 1 when the engine at 127.0.0.1:port answers a control-RPC Probe within 1 s. */
static int probe_answers(int port) {
  char *reply = NULL;
  int rc = mc_rpc_call("127.0.0.1", (uint16_t)port, MC_RPC_PROBE, "{}", &reply, 1000);
  free(reply);
  return rc == 0;
}

/* ------------------------------------------------------------ the flood */

struct flood {
  int port, renew, fds[NFLOOD];
  atomic_int stop;
  pthread_t th;
  long reopened;
};

/* Keeps NFLOOD idle connections open to the port; with renew, every one the server closes is re-opened. */
static void *flood_main(void *arg) {
  struct flood *f = arg;
  while (!atomic_load(&f->stop) && f->renew) {
    struct pollfd p[NFLOOD];
    for (int i = 0; i < NFLOOD; i++) p[i] = (struct pollfd){.fd = f->fds[i], .events = POLLIN};
    if (poll(p, NFLOOD, 20) <= 0) continue;
    for (int i = 0; i < NFLOOD; i++) {
      char b;
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)) || recv(f->fds[i], &b, 1, MSG_DONTWAIT) > 0) continue;
      close(f->fds[i]);
      f->fds[i] = mc_tp_connect(f->port);
      f->reopened++;
    }
    usleep(20000); /* an eager flood, but one that leaves the 2 CPUs of a test machine to the others */
  }
  return NULL;
}

static void flood_start(struct flood *f, int port, int renew) {
  memset(f, 0, sizeof(*f));
  f->port = port;
  f->renew = renew;
  for (int i = 0; i < NFLOOD; i++) f->fds[i] = mc_tp_connect(port);
  pthread_create(&f->th, NULL, flood_main, f);
}

static void flood_stop(struct flood *f) {
  atomic_store(&f->stop, 1);
  pthread_join(f->th, NULL);
  for (int i = 0; i < NFLOOD; i++)
    if (f->fds[i] >= 0) close(f->fds[i]);
}

/* ------------------------------------------------------------ metadata keys */

static int meta_has_key(struct mc_meta *meta, const char *kind, const char *ep, char *val, size_t cap) {
  char key[256], *v = NULL;
  snprintf(key, sizeof(key), "mooncake/%s/%s", kind, ep);
  int rc = mc_meta_get(meta, key, &v);
  if (val && cap) snprintf(val, cap, "%s", rc == 0 && v ? v : "");
  free(v);
  return rc == 0;
}

/* ------------------------------------------------------------ defect 5: flood, crash, freeze */

static void test_flooded_holder_keeps_its_name(void) {
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0);
  struct mc_mrpc_client *c = mt_connect(m.rpc);
  char name[64];
  snprintf(name, sizeof(name), "127.0.0.1:%d", mc_tp_free_port());
  struct peer h;
  REQUIRE(holder_start(&h, &m, name, NULL) == 0);
  CHECK_EQ(peer_cmd(&h, "PUT held-obj %llu 7", (unsigned long long)OBJ_SIZE), 0);
  struct seg_view before = {0}, after = {0};
  REQUIRE(seg_lookup(c, name, &before) == 1);
  int port = probe_port(before.probe);
  REQUIRE(port > 0);
  CHECK(probe_answers(port));

  /* a flood re-opened as fast as the server closes it: the probe fails, the holder keeps pinging */
  struct flood f;
  flood_start(&f, port, 1);
  mc_tp_sleep_ms(300);
  int probe_failed = !probe_answers(port);
  struct mc_segment_rec evil = mt_seg(1, name, 0x7f0000000000ull, 1 << 20);
  evil.te_endpoint = "evil:1";
  int refused = 0, tries = 0;
  for (long t0 = mc_tp_now_ms(); mc_tp_now_ms() - t0 < 5000; tries++) { /* longer than the 3 s silence bound */
    int rc = mt_mount(c, mt_id(66), &evil);
    refused += rc == MC_SEGMENT_ALREADY_EXISTS;
    if (rc != MC_SEGMENT_ALREADY_EXISTS) fprintf(stderr, "  mount under the holder's name: %d\n", rc);
    mc_tp_sleep_ms(300);
  }
  flood_stop(&f);
  fprintf(stderr, "  flood: %ld re-opened, probe failed under it: %d; %d/%d takeover mounts refused\n", f.reopened,
          probe_failed, refused, tries);
  CHECK_EQ(refused, tries);
  CHECK_EQ(seg_lookup(c, name, &after), 1);
  CHECK_STR(after.client, before.client); /* still the holder's */
  CHECK(mt_log_count(&(struct mt_master){.log = m.log}, "it still pings") >= 1);
  mooncake_store_t reader = client_new(&m, 0, 16 * MiB);
  REQUIRE(reader);
  uint8_t *buf = malloc(OBJ_SIZE);
  CHECK_EQ(mooncake_store_get_into(reader, "held-obj", buf, OBJ_SIZE), (int64_t)OBJ_SIZE);
  CHECK(verify(buf, OBJ_SIZE, 7));
  free(buf);
  mooncake_store_destroy(reader);

  /* an idle flood that is not re-opened is reaped: the probe answers again within ~1 s, not 5 s */
  flood_start(&f, port, 0);
  long t0 = mc_tp_now_ms(), answered = -1;
  while (answered < 0 && mc_tp_now_ms() - t0 < 8000)
    if (probe_answers(port)) answered = mc_tp_now_ms() - t0;
  flood_stop(&f);
  fprintf(stderr, "  idle flood of %d connections: probe answered after %ld ms\n", NFLOOD, answered);
  CHECK(answered >= 0 && answered < 3000);
  CHECK_EQ(peer_cmd(&h, "GET held-obj %llu 7", (unsigned long long)OBJ_SIZE), (long long)OBJ_SIZE);
  peer_quit(&h);
  mc_mrpc_client_free(c);
  master_stop(&m);
}

static void test_restarted_holder_gets_its_name_back(void) {
  struct master m;
  REQUIRE(master_start(&m, NULL) == 0); /* client_ttl 10 s: nobody waits for the old one to expire */
  struct mc_mrpc_client *c = mt_connect(m.rpc);
  char name[64];
  snprintf(name, sizeof(name), "127.0.0.1:%d", mc_tp_free_port());
  struct peer h;
  struct seg_view v0 = {0}, v1 = {0}, v2 = {0};
  REQUIRE(holder_start(&h, &m, name, NULL) == 0);
  CHECK_EQ(peer_cmd(&h, "PUT first %llu 1", (unsigned long long)OBJ_SIZE), 0);
  REQUIRE(seg_lookup(c, name, &v0) == 1);

  /* SIGKILL: nothing listens at its probe address any more, the name comes back at once */
  long t0 = mc_tp_now_ms(), setup_ms = 0;
  peer_kill(&h);
  REQUIRE(holder_start(&h, &m, name, &setup_ms) == 0);
  long back = mc_tp_now_ms() - t0;
  fprintf(stderr, "  killed holder restarted under %s: ready %ld ms after the kill (setup %ld ms)\n", name, back,
          setup_ms);
  CHECK(back < 4000);
  CHECK_EQ(seg_lookup(c, name, &v1), 1);
  CHECK(strcmp(v1.client, v0.client) != 0);
  CHECK_EQ(peer_cmd(&h, "PUT second %llu 2", (unsigned long long)OBJ_SIZE), 0);
  CHECK_EQ(peer_cmd(&h, "GET second %llu 2", (unsigned long long)OBJ_SIZE), (long long)OBJ_SIZE);

  /* SIGSTOP: its port still accepts but nobody answers and it stops pinging; the new incarnation's
   * setup retries the refused mount until the master hands the name over (3 s silence + ~2 s probe) */
  struct peer frozen = h;
  kill(frozen.pid, SIGSTOP);
  t0 = mc_tp_now_ms();
  REQUIRE(holder_start(&h, &m, name, &setup_ms) == 0);
  back = mc_tp_now_ms() - t0;
  fprintf(stderr, "  frozen holder replaced under %s: ready %ld ms after the freeze\n", name, back);
  CHECK(back >= 2500 && back < 9500);
  CHECK_EQ(seg_lookup(c, name, &v2), 1);
  CHECK(strcmp(v2.client, v1.client) != 0);
  CHECK_EQ(peer_cmd(&h, "PUT third %llu 3", (unsigned long long)OBJ_SIZE), 0);
  CHECK_EQ(peer_cmd(&h, "GET third %llu 3", (unsigned long long)OBJ_SIZE), (long long)OBJ_SIZE);
  kill(frozen.pid, SIGCONT);
  peer_kill(&frozen);
  peer_quit(&h);
  mc_mrpc_client_free(c);
  master_stop(&m);
}

/* ------------------------------------------------------------ defect 6: expiry and metadata keys */

static void test_expiry_deletes_only_own_keys(void) {
  const char *args[] = {"--client_ttl=3", NULL};
  struct master m;
  REQUIRE(master_start(&m, args) == 0);
  struct mc_mrpc_client *c = mt_connect(m.rpc);
  struct mc_meta *meta = NULL;
  REQUIRE(mc_meta_open(m.metadata, &meta) == 0);
  /* the victim: a live pure client (no segment, so no mount protects its endpoint) */
  struct peer victim;
  REQUIRE(peer_start(&victim, &m, 0, 1 * MiB, NULL) == 0);
  char rpc_before[256], ram_before[4096], rpc_after[256], ram_after[4096];
  CHECK(meta_has_key(meta, "rpc_meta", victim.name, rpc_before, sizeof(rpc_before)));
  CHECK(meta_has_key(meta, "ram", victim.name, ram_before, sizeof(ram_before)));
  json_t *o = json_loads(rpc_before, 0, NULL);
  char victim_probe[128];
  snprintf(victim_probe, sizeof(victim_probe), "%s:%lld", json_string_value(json_object_get(o, "ip_or_host_name")),
           (long long)json_integer_value(json_object_get(o, "rpc_port")));
  json_decref(o);
  /* a real holder, killed: its own keys must still go when it expires */
  char hname[64];
  snprintf(hname, sizeof(hname), "127.0.0.1:%d", mc_tp_free_port());
  struct peer h;
  REQUIRE(holder_start(&h, &m, hname, NULL) == 0);
  CHECK(meta_has_key(meta, "rpc_meta", hname, NULL, 0));
  CHECK(meta_has_key(meta, "ram", hname, NULL, 0));
  peer_kill(&h);
  long t_kill = mc_tp_now_ms();
  /* anonymous clients mount tiny segments claiming the victim's endpoint, the first even its probe
   * address, and never ping; one after the other (a mounted claim keeps the endpoint in use) */
  struct mt_master view = {.log = m.log};
  struct mc_segment_rec a1 = mt_seg(1, "evil-1", 0x7f0000000000ull, 1 << 20);
  struct mc_segment_rec a2 = mt_seg(2, "evil-2", 0x7f0000100000ull, 1 << 20);
  a1.te_endpoint = a2.te_endpoint = victim.name;
  a1.probe_addr = victim_probe;
  a2.probe_addr = "127.0.0.1:1";
  CHECK_EQ(mt_mount(c, mt_id(71), &a1), 0);
  CHECK(mt_wait_log(&view, "its owner still answers at that address", 15000));
  CHECK_EQ(mt_mount(c, mt_id(72), &a2), 0);
  CHECK(mt_wait_log(&view, "it names another process's address", 15000));
  mc_tp_sleep_ms(300); /* both keys' lines */
  CHECK_EQ(mt_log_count(&view, "its owner still answers at that address"), 2);
  CHECK_EQ(mt_log_count(&view, "it names another process's address"), 2);
  CHECK(meta_has_key(meta, "rpc_meta", victim.name, rpc_after, sizeof(rpc_after)));
  CHECK(meta_has_key(meta, "ram", victim.name, ram_after, sizeof(ram_after)));
  CHECK_STR(rpc_after, rpc_before);
  long gone = -1;
  while (mc_tp_now_ms() - t_kill < 15000 && gone < 0) {
    if (!meta_has_key(meta, "rpc_meta", hname, NULL, 0) && !meta_has_key(meta, "ram", hname, NULL, 0))
      gone = mc_tp_now_ms() - t_kill;
    mc_tp_sleep_ms(100);
  }
  fprintf(stderr, "  the killed holder's own keys gone %ld ms after the kill\n", gone);
  CHECK(gone >= 0); /* the real expired client's own keys are cleaned up */
  /* the victim still works as a client: it reads what a holder stores */
  struct peer h2;
  snprintf(hname, sizeof(hname), "127.0.0.1:%d", mc_tp_free_port());
  REQUIRE(holder_start(&h2, &m, hname, NULL) == 0);
  CHECK_EQ(peer_cmd(&h2, "PUT for-victim %llu 5", (unsigned long long)OBJ_SIZE), 0);
  CHECK_EQ(peer_cmd(&victim, "GET for-victim %llu 5", (unsigned long long)OBJ_SIZE), (long long)OBJ_SIZE);
  peer_quit(&h2);
  peer_quit(&victim);
  mc_meta_close(meta);
  mc_mrpc_client_free(c);
  master_stop(&m);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 5 && !strcmp(argv[1], "--peer")) return peer_main(argc, argv);
  if (argc > 5 && !strcmp(argv[1], "--holder")) return holder_main(argv);
  static const struct mc_test_case cases[] = {
      {"test_flooded_holder_keeps_its_name", test_flooded_holder_keeps_its_name},
      {"test_restarted_holder_gets_its_name_back", test_restarted_holder_gets_its_name_back},
      {"test_expiry_deletes_only_own_keys", test_expiry_deletes_only_own_keys},
  };
  return run_cases(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
