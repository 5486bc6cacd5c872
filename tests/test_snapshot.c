/* Snapshots (docs/ha.md, "Snapshots"), with the real master and `mooncake` binaries and real store clients:
 *   - round trip: objects put (some removed), `mooncake snapshot save FILE`, master SIGKILLed and started
 *     with --restore_snapshot=FILE: once the holder remounts, every object is back with its bytes and the
 *     removed ones stay removed. The holder index is off here, so the snapshot is the only way back (a
 *     plain restart before it brings nothing back).
 *   - refusals: a file of a newer format version (checksum recomputed, so only the version is wrong), a
 *     flipped byte, a truncated file, a file that is not a snapshot, a missing file: the master refuses to
 *     start, exits non-zero and says why; a master that refused loaded nothing, so nothing is served.
 *   - the previous format: a file of format version 1 (committed; entries without key groups) still loads.
 * The reader accepts every version up to its own (2: entries carry their key group; test_kgroup_durable
 * restores groups from a file of this version), and the newer-version refusal is tested. */
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "test_store_harness.c"

#define NKEYS 60
#define NREMOVED 6

static uint64_t size_of(int i) { return (uint64_t)(4 + (i * 53) % 200) * KiB; }

static void key_of(char *k, size_t n, int i) { snprintf(k, n, "snap-%03d", i); }

static int count_back(mooncake_store_t s) {
  char k[64];
  int n = 0;
  for (int i = NREMOVED; i < NKEYS; i++) {
    key_of(k, sizeof(k), i);
    n += mooncake_store_is_exist(s, k) == 1;
  }
  return n;
}

static uint8_t *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(p, 1, (size_t)n, f);
  fclose(f);
  return p;
}

static int write_all(const char *path, const void *p, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(p, 1, len, f) == len;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* Runs the master with --restore_snapshot=file on fresh ports: its exit code (it must refuse), and
 * whether its output names `want`. */
/* Starts a master on FILE: with refuse, it must exit non-zero within 10 s; without, it must start and serve
 * (and is then stopped). Either way its log must say `want`. 0 when all of that holds. */
static int start_with(const char *dir, const char *file, const char *want, int refuse) {
  char bin[512], flag[600], log[600], a1[64], a2[64], a3[64];
  snprintf(bin, sizeof(bin), "%s/mooncake_master", getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".");
  snprintf(flag, sizeof(flag), "--restore_snapshot=%s", file);
  snprintf(log, sizeof(log), "%s/start_with.log", dir);
  snprintf(a1, sizeof(a1), "--rpc_port=%d", mc_tp_free_port());
  snprintf(a2, sizeof(a2), "--metrics_port=%d", mc_tp_free_port());
  snprintf(a3, sizeof(a3), "--http_metadata_server_port=%d", mc_tp_free_port());
  char *argv[] = {bin, a1, a2, a3, flag, NULL};
  pid_t pid = mc_tp_spawn(argv, NULL, log);
  long t0 = mc_tp_now_ms();
  size_t n = 0;
  char *text = NULL;
  int named = 0, served = 0;
  while (!mc_tp_exited(pid) && mc_tp_now_ms() - t0 < 10000 && !(served && named)) {
    mc_tp_sleep_ms(20);
    free(text);
    text = (char *)read_all(log, &n);
    named = text && n && memmem(text, n, want, strlen(want)) != NULL;
    served = text && n && memmem(text, n, "Master service started", 22) != NULL;
  }
  int exited = mc_tp_exited(pid), code = exited ? mc_tp_exit_code(pid) : 0;
  if (!exited) mc_tp_stop(pid, 2000);
  free(text);
  text = (char *)read_all(log, &n);
  named = text && n && memmem(text, n, want, strlen(want)) != NULL;
  free(text);
  int ok = named && (refuse ? exited && code != 0 : !exited && served);
  if (!ok) {
    fprintf(stderr, "FAIL: the master %s with %s (its log should say '%s'):\n",
            refuse ? "was expected to refuse to start" : "was expected to start and serve", file, want);
    mc_tp_dump_log(log);
  }
  return ok ? 0 : -1;
}

static int refused_with(const char *dir, const char *file, const char *want) { return start_with(dir, file, want, 1); }

/* A snapshot written by format version 1 (tests/data/snapshot-v1.snap, committed: 3 segments, 8 entries of
 * which 3 name an unlisted segment or lie outside theirs) is read by this master and by every later one. */
static void test_snapshot_v1_file(void) {
  char *dir = mc_tp_mkdtemp("snapv1");
  REQUIRE(dir);
  CHECK_EQ(start_with(dir, MC_TEST_DATA_DIR "/snapshot-v1.snap", "(format version 1): 3 segments, 5 entries (3 skipped", 0), 0);
  mc_tp_rmrf(dir);
  free(dir);
}

static void test_snapshot(void) {
  setenv("MC_STORE_HOLDER_INDEX", "0", 1); /* only the snapshot can bring the objects back */
  struct master M;
  REQUIRE(master_start(&M, NULL) == 0);
  mooncake_store_t holder = client_new(&M, 64 * MiB, 4 * MiB), writer = client_new(&M, 0, 4 * MiB);
  REQUIRE(holder && writer);
  uint8_t *buf = malloc(256 * KiB);
  char k[64];
  for (int i = 0; i < NKEYS; i++) {
    key_of(k, sizeof(k), i);
    fill(buf, size_of(i), 11 + (unsigned)i);
    CHECK_EQ(mooncake_store_put(writer, k, buf, size_of(i), NULL), 0);
  }
  for (int i = 0; i < NREMOVED; i++) {
    key_of(k, sizeof(k), i);
    CHECK_EQ(mooncake_store_remove(writer, k, 1), 0);
  }

  /* mooncake snapshot save FILE */
  char *snap = mc_tp_path(M.dir, "meta.snap"), cli[512], admin[64], cmd[1400];
  snprintf(cli, sizeof(cli), "%s/mooncake", getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : ".");
  snprintf(admin, sizeof(admin), "--master-admin=127.0.0.1:%d", M.metrics);
  snprintf(cmd, sizeof(cmd), "%s %s snapshot save %s", cli, admin, snap);
  CHECK_EQ(system(cmd), 0);
  size_t len = 0;
  uint8_t *img = read_all(snap, &len);
  REQUIRE(img && len > 8 + 32);
  CHECK(!memcmp(img, "MCSNAP\0\1", 8));
  struct stat st;
  CHECK(stat(snap, &st) == 0 && (st.st_mode & 077) == 0); /* mode 0600 */
  char tmp[700];
  snprintf(tmp, sizeof(tmp), "%s.tmp", snap);
  CHECK(access(tmp, F_OK) != 0); /* renamed into place */

  /* refusals: each master exits non-zero, saying why */
  char *bad = mc_tp_path(M.dir, "bad.snap");
  uint8_t *copy = malloc(len);
  memcpy(copy, img, len);
  uint32_t v3 = htole32(3);
  memcpy(copy + 8, &v3, 4);
  unsigned dl = 0;
  EVP_Digest(copy, len - 32, copy + len - 32, &dl, EVP_sha256(), NULL);
  CHECK_EQ(write_all(bad, copy, len), 0);
  CHECK_EQ(refused_with(M.dir, bad, "format version 3 is newer than this master's (2)"), 0);
  memset(copy + 8, 0, 4);
  EVP_Digest(copy, len - 32, copy + len - 32, &dl, EVP_sha256(), NULL);
  CHECK_EQ(write_all(bad, copy, len), 0);
  CHECK_EQ(refused_with(M.dir, bad, "format version 0 is not a valid version"), 0);
  memcpy(copy, img, len);
  copy[len / 2] ^= 0x40;
  CHECK_EQ(write_all(bad, copy, len), 0);
  CHECK_EQ(refused_with(M.dir, bad, "SHA-256 does not match"), 0);
  CHECK_EQ(write_all(bad, img, len - 100), 0);
  CHECK_EQ(refused_with(M.dir, bad, "SHA-256 does not match"), 0);
  CHECK_EQ(write_all(bad, img, 20), 0);
  CHECK_EQ(refused_with(M.dir, bad, "truncated"), 0);
  CHECK_EQ(write_all(bad, "hello, world: not a snapshot at all, but long enough to have a header", 70), 0);
  CHECK_EQ(refused_with(M.dir, bad, "bad magic"), 0);
  char missing[700];
  snprintf(missing, sizeof(missing), "%s/none.snap", M.dir);
  CHECK_EQ(refused_with(M.dir, missing, "cannot open it"), 0);

  /* control: a plain restart brings nothing back here (no holder index) */
  REQUIRE(master_restart(&M, NULL) == 0);
  mc_tp_sleep_ms(2500); /* the holder's remount (its next ping) and more */
  CHECK_EQ(count_back(writer), 0);

  /* round trip: SIGKILL, restart from the snapshot; the holder remounts and its objects come back */
  char flag[800];
  snprintf(flag, sizeof(flag), "--restore_snapshot=%s", snap);
  const char *const with[] = {flag, NULL};
  REQUIRE(master_restart(&M, with) == 0);
  long t0 = mc_tp_now_ms();
  int back = 0;
  while ((back = count_back(writer)) < NKEYS - NREMOVED && mc_tp_now_ms() - t0 < 15000) usleep(50 * 1000);
  fprintf(stderr, "%d of %d objects back %ld ms after the restart from the snapshot\n", back, NKEYS - NREMOVED,
          mc_tp_now_ms() - t0);
  CHECK_EQ(back, NKEYS - NREMOVED);
  int wrong = 0;
  for (int i = NREMOVED; i < NKEYS; i++) {
    key_of(k, sizeof(k), i);
    int64_t n = mooncake_store_get_into(writer, k, buf, 256 * KiB);
    wrong += n != (int64_t)size_of(i) || !verify(buf, size_of(i), 11 + (unsigned)i);
  }
  CHECK_EQ(wrong, 0);
  for (int i = 0; i < NREMOVED; i++) { /* removed before the snapshot: never back */
    key_of(k, sizeof(k), i);
    CHECK_EQ(mooncake_store_is_exist(writer, k), 0);
  }
  /* new puts go to space the restored objects do not hold */
  t0 = mc_tp_now_ms();
  int rc = -1;
  fill(buf, 64 * KiB, 99);
  while ((rc = mooncake_store_put(writer, "snap-new", buf, 64 * KiB, NULL)) && mc_tp_now_ms() - t0 < 10000)
    usleep(100 * 1000);
  CHECK_EQ(rc, 0);
  wrong = 0;
  for (int i = NREMOVED; i < NKEYS; i++) {
    key_of(k, sizeof(k), i);
    int64_t n = mooncake_store_get_into(writer, k, buf, 256 * KiB);
    wrong += n != (int64_t)size_of(i) || !verify(buf, size_of(i), 11 + (unsigned)i);
  }
  CHECK_EQ(wrong, 0);

  free(copy);
  free(img);
  free(buf);
  free(bad);
  free(snap);
  mooncake_store_destroy(writer);
  mooncake_store_destroy(holder);
  master_stop(&M);
}

TEST_MAIN(TEST_CASE(test_snapshot_v1_file), TEST_CASE(test_snapshot))
