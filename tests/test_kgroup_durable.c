/* Key groups survive a master restart and a snapshot restore (docs/master.md, "Key groups"; docs/ha.md):
 *   - restart: grouped keys put, the master SIGKILLed and started again with the same command line; the
 *     holder's index (whose PUT records carry each object's group) rebuilds the objects in their group;
 *   - snapshot: the same with the holder index off, the master restarted from `mooncake snapshot save`'s file
 *     (format version 2 keeps each entry's group).
 * "In their group" is checked by behaviour: 4 members of one group and 6 ungrouped keys on one segment; once
 * the rebuilt objects' leases (one default_kv_lease_ttl) are over, the 6 ungrouped keys are read (leased)
 * and a put that cannot fit sets the need-eviction flag: with --eviction_ratio=0.1 the run takes 1 of the
 * 10, necessarily a member, and with it the 3 other members (evicted_count=4); an ungrouped rebuild would
 * take that 1 member alone. Real master and `mooncake` binaries, real store clients. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "test_store_harness.c"

#define NMEMBERS 4
#define NPLAIN 6
#define VALUE (64 * KiB)
#define LEASE_MS 2000
#define SEGMENT (16 * MiB)
#define BIG (SEGMENT - VALUE) /* fits an empty segment, not one holding the 10 objects */

static const char *const FLAGS[] = {"--eviction_ratio=0.1", "--eviction_high_watermark_ratio=1.0",
                                    "--default_kv_lease_ttl=2000", NULL};

static void key_of(char *k, size_t n, int member, int i) { snprintf(k, n, "%s-%d", member ? "member" : "plain", i); }

/* Whether the master's log says `want`. */
static int log_has(const struct master *m, const char *want) {
  FILE *f = fopen(m->log, "rb");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, want) != NULL;
  fclose(f);
  return found;
}

static int count(mooncake_store_t s, int member, int n) {
  char k[64];
  int c = 0;
  for (int i = 0; i < n; i++) {
    key_of(k, sizeof(k), member, i);
    c += mooncake_store_is_exist(s, k) == 1;
  }
  return c;
}

/* The 4 members (group "layer-7") in one grouped batch, then the 6 ungrouped keys. */
static int put_all(mooncake_store_t w, uint8_t *buf) {
  char names[NMEMBERS][64];
  const char *keys[NMEMBERS], *groups[NMEMBERS];
  const void *vals[NMEMBERS];
  size_t sizes[NMEMBERS];
  int res[NMEMBERS], bad = 0;
  for (int i = 0; i < NMEMBERS; i++) {
    key_of(names[i], sizeof(names[i]), 1, i);
    keys[i] = names[i], groups[i] = "layer-7", vals[i] = buf, sizes[i] = VALUE;
  }
  fill(buf, VALUE, 5);
  if (mc_store_batch_write_grouped(w, keys, vals, sizes, NMEMBERS, NULL, groups, MC_WRITE_COPY, res)) return -1;
  for (int i = 0; i < NMEMBERS; i++) bad += res[i] != 0;
  for (int i = 0; i < NPLAIN; i++) {
    char k[64];
    key_of(k, sizeof(k), 0, i);
    bad += mooncake_store_put(w, k, buf, VALUE, NULL) != 0;
  }
  return bad ? -1 : 0;
}

/* After a restart that rebuilt the 10 objects: the eviction described above, and its result. */
static void check_group_evicted_whole(struct master *m, mooncake_store_t w, uint8_t *buf) {
  long t0 = mc_tp_now_ms();
  while ((count(w, 1, NMEMBERS) < NMEMBERS || count(w, 0, NPLAIN) < NPLAIN) && mc_tp_now_ms() - t0 < 15000)
    usleep(50 * 1000);
  REQUIRE(count(w, 1, NMEMBERS) == NMEMBERS && count(w, 0, NPLAIN) == NPLAIN);
  fprintf(stderr, "all 10 objects back %ld ms after the restart\n", mc_tp_now_ms() - t0);
  int wrong = 0;
  for (int i = 0; i < NMEMBERS; i++) { /* exist answers without a lease; the bytes are checked too */
    char k[64];
    key_of(k, sizeof(k), 1, i);
    wrong += mooncake_store_get_into(w, k, buf, VALUE) != (int64_t)VALUE || !verify(buf, VALUE, 5);
  }
  CHECK_EQ(wrong, 0);
  mc_tp_sleep_ms(LEASE_MS + 500); /* the rebuilt objects' leases and the reads' leases are over */
  for (int i = 0; i < NPLAIN; i++) { /* leased: eviction skips them */
    char k[64];
    key_of(k, sizeof(k), 0, i);
    CHECK_EQ(mooncake_store_get_into(w, k, buf, VALUE), (int64_t)VALUE);
  }
  uint8_t *big = malloc(BIG);
  fill(big, BIG, 1);
  CHECK(mooncake_store_put(w, "too-big", big, BIG, NULL) != 0); /* sets the need-eviction flag */
  free(big);
  t0 = mc_tp_now_ms();
  while (!log_has(m, "[EVICT-RESULT]") && mc_tp_now_ms() - t0 < 5000) usleep(20 * 1000);
  if (!log_has(m, "[EVICT-RESULT] evicted_count=4, eviction_base=10")) mc_tp_dump_log(m->log);
  CHECK(log_has(m, "[EVICT-RESULT] evicted_count=4, eviction_base=10"));
  CHECK_EQ(count(w, 1, NMEMBERS), 0);
  CHECK_EQ(count(w, 0, NPLAIN), NPLAIN);
}

/* Puts the objects, restarts the master (from a snapshot saved just before when `snapshot`), checks. */
static void restart_and_check(int snapshot) {
  if (snapshot) setenv("MC_STORE_HOLDER_INDEX", "0", 1); /* only the snapshot can bring the objects back */
  struct master M;
  REQUIRE(master_start(&M, FLAGS) == 0);
  mooncake_store_t holder = client_new(&M, SEGMENT, 4 * MiB), writer = client_new(&M, 0, SEGMENT);
  REQUIRE(holder && writer);
  uint8_t *buf = malloc(VALUE);
  REQUIRE(put_all(writer, buf) == 0);
  char *snap = mc_tp_path(M.dir, "meta.snap"), cmd[1400], flag[800];
  snprintf(cmd, sizeof(cmd), "%s/mooncake --master-admin=127.0.0.1:%d snapshot save %s",
           getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".", M.metrics, snap);
  snprintf(flag, sizeof(flag), "--restore_snapshot=%s", snap);
  const char *const with[] = {FLAGS[0], FLAGS[1], FLAGS[2], snapshot ? flag : NULL, NULL};
  if (snapshot) REQUIRE(system(cmd) == 0);
  else mc_tp_sleep_ms(200); /* the holder has the records (the witnesses would cover them otherwise) */
  REQUIRE(master_restart(&M, with) == 0);
  if (snapshot) CHECK(log_has(&M, "(format version 2)"));
  check_group_evicted_whole(&M, writer, buf);
  free(snap);
  free(buf);
  mooncake_store_destroy(writer);
  mooncake_store_destroy(holder);
  master_stop(&M);
  unsetenv("MC_STORE_HOLDER_INDEX");
}

static void test_groups_survive_restart(void) { restart_and_check(0); }

static void test_groups_survive_snapshot(void) { restart_and_check(1); }

TEST_MAIN(TEST_CASE(test_groups_survive_restart), TEST_CASE(test_groups_survive_snapshot))
