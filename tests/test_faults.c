/* Faults that are not the network's or a peer's: the host itself.
 *
 * saturated_holder_keeps_pinging: a holder with a 256 MiB segment starts while every CPU is kept busy by
 * another process (one spinning child pinned to each CPU, at normal priority) for SATURATE_MS. A busy
 * host slows a holder down, but must not make the master expire it: it has to ping at least once per
 * client_ttl (3 s here), and must serve once the load is gone.
 *
 * History: its first runs failed. The prefault threads ran at SCHED_IDLE and populated 16 MiB at a time
 * with MADV_POPULATE_WRITE, which holds the process's mmap lock. With the CPUs saturated a SCHED_IDLE
 * thread got no CPU for seconds while holding it, and every other thread that maps or unmaps memory (the
 * pinger's allocations, a new thread's stack) waited behind it in D state (/proc/<pid>/task/<tid>/wchan:
 * vm_mmap_pgoff, __vm_munmap): the holder stopped pinging and was expired 3 s after its mount, and
 * remounted only once the prefault was done (13 s for 68 MiB in one run), its objects lost. The same
 * starvation made test_netns_cluster's 0.3 s blip check fail under load. The threads now run at nice 10
 * and populate 2 MiB at a time (src/te/prefault.c). */
#include <sched.h>

#include "test_store_harness.c"

#define SATURATE_MS 12000L

static int holder_main(char **argv) { /* --holder MASTER METADATA GSS */
  mooncake_store_t s = mooncake_store_create();
  if (mooncake_store_setup(s, "127.0.0.1", argv[3], strtoull(argv[4], NULL, 10), 4 * MiB, "tcp", "", argv[2]))
    return 2;
  char name[128];
  mooncake_store_get_hostname(s, name, sizeof(name));
  printf("READY %s\n", name);
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof(line), stdin)) {
  }
  mooncake_store_destroy(s);
  return 0;
}

/* One child spinning on each CPU (pinned), killed by spinners_stop. */
static pid_t spinners[64];
static int nspin;

static void spinners_start(void) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < ncpu && nspin < 64; c++) {
    pid_t p = fork();
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET((int)c, &set);
      sched_setaffinity(0, sizeof(set), &set);
      for (volatile unsigned long x = 0;; x++) {
      }
    }
    if (p > 0) spinners[nspin++] = p;
  }
}

static void spinners_stop(void) {
  for (int i = 0; i < nspin; i++) {
    kill(spinners[i], SIGKILL);
    waitpid(spinners[i], NULL, 0);
  }
  nspin = 0;
}

/* Occurrences of needle in the file at path (read whole; logs here are small). */
static int log_count(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *text = calloc(1, (size_t)(size > 0 ? size : 0) + 1);
  size_t got = text ? fread(text, 1, (size_t)(size > 0 ? size : 0), f) : 0;
  fclose(f);
  int n = 0;
  for (char *p = text; p && got && (p = strstr(p, needle)); p += strlen(needle)) n++;
  free(text);
  return n;
}

static void saturated_holder_keeps_pinging(void) {
  struct master m;
  const char *flags[] = {"--client_ttl=3", NULL};
  REQUIRE(master_start(&m, flags) == 0);
  char *log = mc_tp_path(m.dir, "holder.log");
  spinners_start();
  long t0 = mc_tp_now_ms();
  struct peer h;
  char *args[] = {"faults_holder", "--holder", m.addr, m.metadata, "268435456", NULL};
  const char *env[] = {"MC_LOG_LEVEL=INFO", NULL};
  REQUIRE(self_spawn(&h, args, env, log) == 0);
  char line[256] = "";
  int ready = fgets(line, sizeof(line), h.out) && sscanf(line, "READY %127s", h.name) == 1;
  fprintf(stderr, "  holder %s ready %ld ms after its start, CPUs saturated\n", h.name, mc_tp_now_ms() - t0);
  CHECK(ready);
  while (mc_tp_now_ms() - t0 < SATURATE_MS) mc_tp_sleep_ms(100);
  spinners_stop();
  int expired = log_count(m.log, "action=client_expired");
  fprintf(stderr, "  after %ld ms of saturation: the master expired %d client(s), the holder remounted %d time(s)\n",
          SATURATE_MS, expired, log_count(log, " remounted"));
  CHECK_EQ(expired, 0);
  /* once the load is gone it serves */
  mooncake_store_t c = client_new(&m, 0, 8 * MiB);
  REQUIRE(c);
  uint8_t *buf = malloc(MiB);
  fill(buf, MiB, 7);
  const char *pref[1] = {h.name};
  mooncake_replicate_config_t cfg = {1, 0, 0, pref, 1};
  int rc = -1;
  for (long t = mc_tp_now_ms(); rc && mc_tp_now_ms() - t < 15000; mc_tp_sleep_ms(200)) {
    rc = mooncake_store_put(c, "faults/after", buf, MiB, &cfg);
    mc_replica_desc_t *d = NULL;
    int nd = rc ? 0 : mc_store_get_replica_desc(c, "faults/after", &d);
    int on_it = nd == 1 && d && strstr(d[0].segment_name, h.name);
    if (nd > 0) mc_store_replica_desc_free(d, nd);
    if (!rc && !on_it) {
      mooncake_store_remove(c, "faults/after", 1);
      rc = -1;
    }
  }
  CHECK_EQ(rc, 0);
  memset(buf, 0, MiB);
  CHECK_EQ(mooncake_store_get_into(c, "faults/after", buf, MiB), (long long)MiB);
  CHECK(verify(buf, MiB, 7));
  free(buf);
  mooncake_store_destroy(c);
  CHECK(!mc_tp_exited(h.pid));
  peer_quit(&h);
  free(log);
  master_stop(&m);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 1 && !strcmp(argv[1], "--holder")) return holder_main(argv);
  static const struct mc_test_case cases[] = {TEST_CASE(saturated_holder_keeps_pinging)};
  return run_cases(cases, 1, argc, argv);
}
