/* The local-disk object store (src/disk/, docs/disk-tier.md) on real files in a directory under /tmp: round
 * trips at the block edges and across chunks, replace, many keys and the walk, reopen, corrupted and
 * truncated files and leftover temporaries, the format version, the quota, a writer killed at random
 * moments, threads on overlapping keys, and a real ENOSPC on a small tmpfs (root only). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "disk/disk.h"
#include "lib/test.h"

static char base[64]; /* this run's directory under /tmp */
static pid_t base_owner; /* the process that removes it at exit (not a forked child) */

static void mkpath(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", base, name); }

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) { return remove(p); }
static void rm_tree(const char *p) { nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* ---- values that say what they are: [u64 tag][u64 seed] then a stream of seed ---- */

static void fill(char *b, uint64_t len, uint64_t tag, uint64_t seed) {
  if (len < 16) {
    for (uint64_t i = 0; i < len; i++) b[i] = (char)(tag * 31 + len + i);
    return;
  }
  memcpy(b, &tag, 8);
  memcpy(b + 8, &seed, 8);
  uint64_t s = seed | 1;
  for (uint64_t i = 16; i < len; i += 8) {
    uint64_t v = mc_tp_xorshift(&s);
    memcpy(b + i, &v, MC_MIN(8, len - i));
  }
}

/* 1 when b (len bytes) is a whole value of tag; *seed its seed (0 for short values) */
static int whole(const char *b, uint64_t len, uint64_t tag, uint64_t *seed) {
  char *want = mc_malloc(len + 1);
  uint64_t sd = 0;
  if (len >= 16) memcpy(&sd, b + 8, 8);
  fill(want, len, tag, sd);
  int ok = !memcmp(want, b, len);
  mc_free(want);
  if (seed) *seed = sd;
  return ok;
}

/* ---- files of the store, found from outside ---- */

static int g_tmp, g_obj;
static char g_key[256], g_found[512];
static int count_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  if (flag != FTW_F || !strstr(p, "/obj/")) return 0;
  size_t n = strlen(p);
  if (n > 4 && !strcmp(p + n - 4, ".tmp")) g_tmp++;
  else g_obj++;
  if (g_key[0]) {
    char h[4096];
    int fd = open(p, O_RDONLY);
    if (fd >= 0 && pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h)) {
      uint32_t kl;
      memcpy(&kl, h + 36, 4);
      if (kl == strlen(g_key) && !memcmp(h + 64, g_key, kl)) snprintf(g_found, sizeof(g_found), "%s", p);
    }
    if (fd >= 0) close(fd);
  }
  return 0;
}
static void count_files(const char *dir, int *objs, int *tmps) {
  g_tmp = g_obj = 0;
  g_key[0] = 0;
  nftw(dir, count_one, 16, FTW_PHYS);
  if (objs) *objs = g_obj;
  if (tmps) *tmps = g_tmp;
}
/* The path of the file holding key (by its header), "" when none. */
static const char *file_of(const char *dir, const char *key) {
  g_tmp = g_obj = 0;
  snprintf(g_key, sizeof(g_key), "%s", key);
  g_found[0] = 0;
  nftw(dir, count_one, 16, FTW_PHYS);
  g_key[0] = 0;
  return g_found;
}

static void flip_byte(const char *path, off_t off) {
  int fd = open(path, O_RDWR);
  unsigned char c = 0;
  if (fd < 0 || pread(fd, &c, 1, off) != 1) abort();
  c ^= 0x5a;
  if (pwrite(fd, &c, 1, off) != 1) abort();
  close(fd);
}

static struct mc_disk *open_ok(const char *dir, uint64_t quota, const struct mc_disk_opts *o,
                               struct mc_disk_recovery *rep) {
  struct mc_disk *d = NULL;
  int r = mc_disk_open(dir, quota, o, &d, rep);
  CHECK_EQ(r, 0);
  return d;
}

static int put_tag(struct mc_disk *d, const char *key, uint64_t len, uint64_t tag, uint64_t seed) {
  char *b = mc_malloc(len + 1);
  fill(b, len, tag, seed);
  int r = mc_disk_put(d, key, strlen(key), b, len);
  mc_free(b);
  return r;
}

/* 1 when key holds a whole value of tag and length len */
static int get_whole(struct mc_disk *d, const char *key, uint64_t len, uint64_t tag) {
  char *b = mc_malloc(len + 1);
  int64_t r = mc_disk_get(d, key, strlen(key), b, len);
  int ok = r == (int64_t)len && whole(b, len, tag, NULL);
  mc_free(b);
  return ok;
}

static void test_crc(void) {
  CHECK_EQ(mc_disk_crc32c(0, "123456789", 9), 0xE3069283u);
  CHECK_EQ(mc_disk_crc32c(mc_disk_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
  CHECK_EQ(mc_disk_crc32c(0, "", 0), 0);
}

static void test_roundtrip(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "rt");
  struct mc_disk_opts o = {.chunk_bytes = 256 << 10}; /* 9 MiB = 36 chunks: more than the 8 in flight */
  struct mc_disk *d = open_ok(dir, 1ull << 30, &o, NULL);
  REQUIRE(d);
  const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 1 << 20, 9 << 20};
  for (size_t i = 0; i < MC_ARRAY_LEN(sizes); i++) {
    uint64_t len = sizes[i], got = 7;
    char key[32];
    snprintf(key, sizeof(key), "key-%zu", i);
    CHECK_EQ(put_tag(d, key, len, i, 1000 + i), 0);
    CHECK_EQ(mc_disk_size(d, key, strlen(key), &got), 0);
    CHECK_EQ(got, len);
    CHECK(get_whole(d, key, len, i));
    struct mc_disk_stats st;
    mc_disk_get_stats(d, &st);
    CHECK_EQ(st.used_bytes, 4096 + (len + 4095) / 4096 * 4096);
    CHECK_EQ(st.objects, 1);
    CHECK_EQ(st.value_bytes, len);
    CHECK_EQ(st.lanes, 4);
    if (geteuid() == 0) CHECK_EQ(st.lanes_registered, 4); /* (root: no RLIMIT_MEMLOCK bound) */
    if (len) {
      char *b = mc_malloc(len);
      CHECK_EQ(mc_disk_get(d, key, strlen(key), b, len - 1), MC_DISK_ERANGE);
      mc_free(b);
    }
    CHECK_EQ(mc_disk_remove(d, key, strlen(key)), 0);
    CHECK_EQ(mc_disk_get(d, key, strlen(key), NULL, 0), MC_DISK_ENOTFOUND);
    CHECK_EQ(mc_disk_size(d, key, strlen(key), &got), MC_DISK_ENOTFOUND);
    CHECK_EQ(mc_disk_remove(d, key, strlen(key)), MC_DISK_ENOTFOUND);
    mc_disk_get_stats(d, &st);
    CHECK_EQ(st.used_bytes, 0);
    int objs, tmps;
    count_files(dir, &objs, &tmps);
    CHECK_EQ(objs + tmps, 0);
  }
  /* keys are bytes: NUL and '/' inside, and the bounds of their length */
  CHECK_EQ(mc_disk_put(d, "a/\0b/../c", 9, "v", 1), 0);
  char v = 0;
  CHECK_EQ(mc_disk_get(d, "a/\0b/../c", 9, &v, 1), 1);
  CHECK_EQ(v, 'v');
  CHECK_EQ(mc_disk_put(d, "", 0, "v", 1), MC_DISK_EKEY);
  char *big = mc_malloc(MC_DISK_KEY_MAX + 1);
  memset(big, 'k', MC_DISK_KEY_MAX + 1);
  CHECK_EQ(mc_disk_put(d, big, MC_DISK_KEY_MAX + 1, "v", 1), MC_DISK_EKEY);
  CHECK_EQ(mc_disk_put(d, big, MC_DISK_KEY_MAX, "w", 1), 0);
  mc_disk_close(d);
  struct mc_disk_recovery rep;
  d = open_ok(dir, 1ull << 30, &o, &rep);
  REQUIRE(d);
  CHECK_EQ(rep.objects, 2);
  CHECK_EQ(mc_disk_get(d, big, MC_DISK_KEY_MAX, &v, 1), 1);
  CHECK_EQ(v, 'w');
  mc_free(big);
  mc_disk_close(d);
  rm_tree(dir);
}

static void test_replace(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "replace");
  struct mc_disk *d = open_ok(dir, 1ull << 30, NULL, NULL);
  REQUIRE(d);
  CHECK_EQ(put_tag(d, "k", 100 << 10, 1, 11), 0);
  CHECK_EQ(put_tag(d, "k", 5, 2, 0), 0);
  CHECK(get_whole(d, "k", 5, 2));
  CHECK_EQ(put_tag(d, "k", 3 << 20, 3, 33), 0);
  CHECK(get_whole(d, "k", 3 << 20, 3));
  struct mc_disk_stats st;
  mc_disk_get_stats(d, &st);
  CHECK_EQ(st.objects, 1);
  CHECK_EQ(st.used_bytes, 4096 + (3 << 20));
  int objs, tmps;
  count_files(dir, &objs, &tmps);
  CHECK_EQ(objs, 1);
  CHECK_EQ(tmps, 0);
  mc_disk_close(d);
  d = open_ok(dir, 1ull << 30, NULL, NULL);
  REQUIRE(d);
  CHECK(get_whole(d, "k", 3 << 20, 3));
  mc_disk_close(d);
  rm_tree(dir);
}

struct walk {
  int n;
  uint64_t bytes;
  char *seen;
};
static int walk_fn(const char *key, size_t klen, uint64_t len, void *arg) {
  struct walk *w = arg;
  int i = -1;
  char k[32];
  if (klen < sizeof(k)) {
    memcpy(k, key, klen);
    k[klen] = 0;
    sscanf(k, "many-%d", &i);
  }
  CHECK(i >= 0 && i < 2000);
  if (i < 0 || i >= 2000) return 1;
  CHECK_EQ(len, (uint64_t)(i * 37 % 9000));
  CHECK(!w->seen[i]);
  w->seen[i] = 1;
  w->n++;
  w->bytes += len;
  return 0;
}

static void test_many_and_reopen(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "many");
  struct mc_disk *d = open_ok(dir, 1ull << 30, NULL, NULL);
  REQUIRE(d);
  uint64_t total = 0;
  for (int i = 0; i < 2000; i++) {
    char key[32];
    snprintf(key, sizeof(key), "many-%d", i);
    uint64_t len = (uint64_t)(i * 37 % 9000);
    CHECK_EQ(put_tag(d, key, len, (uint64_t)i, (uint64_t)i + 1), 0);
    total += len;
  }
  struct walk w = {.seen = mc_calloc(2000, 1)};
  CHECK_EQ(mc_disk_foreach(d, walk_fn, &w), 0);
  CHECK_EQ(w.n, 2000);
  CHECK_EQ(w.bytes, total);
  struct mc_disk_stats st0;
  mc_disk_get_stats(d, &st0);
  mc_disk_close(d);
  for (int verify = 0; verify < 2; verify++) {
    struct mc_disk_opts o = {.verify_on_open = verify};
    struct mc_disk_recovery rep;
    d = open_ok(dir, 1ull << 30, &o, &rep);
    REQUIRE(d);
    CHECK_EQ(rep.objects, 2000);
    CHECK_EQ(rep.broken + rep.tmp_removed + rep.superseded + rep.foreign, 0);
    CHECK_EQ(rep.bytes, st0.used_bytes);
    struct mc_disk_stats st;
    mc_disk_get_stats(d, &st);
    CHECK_EQ(st.value_bytes, total);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
      char key[32];
      snprintf(key, sizeof(key), "many-%d", i);
      bad += !get_whole(d, key, (uint64_t)(i * 37 % 9000), (uint64_t)i);
    }
    CHECK_EQ(bad, 0);
    memset(w.seen, 0, 2000);
    w.n = 0;
    w.bytes = 0;
    CHECK_EQ(mc_disk_foreach(d, walk_fn, &w), 0);
    CHECK_EQ(w.n, 2000);
    mc_disk_close(d);
  }
  mc_free(w.seen);
  rm_tree(dir);
}

/* A header of the store's format with a valid header checksum and the given value length. */
static void forge_header(char *h, uint64_t id, const char *key, uint64_t len) {
  memset(h, 0, 4096);
  memcpy(h, "MCDSKOBJ", 8);
  uint32_t v = MC_DISK_FORMAT_VERSION, bs = 4096, kl = (uint32_t)strlen(key), crc = 0;
  memcpy(h + 8, &v, 4);
  memcpy(h + 12, &bs, 4);
  memcpy(h + 16, &id, 8);
  memcpy(h + 24, &len, 8);
  memcpy(h + 32, &crc, 4);
  memcpy(h + 36, &kl, 4);
  memcpy(h + 64, key, kl);
  crc = mc_disk_crc32c(mc_disk_crc32c(0, h, 60), key, kl);
  memcpy(h + 60, &crc, 4);
}

static void test_corruption(void) {
  char dir[128], p[600];
  mkpath(dir, sizeof(dir), "corrupt");
  struct mc_disk *d = open_ok(dir, 1ull << 30, NULL, NULL);
  REQUIRE(d);
  const char *keys[] = {"val-a", "val-b", "hdr-c", "trunc-d", "good-e", "klen-f"};
  for (int i = 0; i < 6; i++) CHECK_EQ(put_tag(d, keys[i], 3 * 4096 + 100, (uint64_t)i, (uint64_t)i + 7), 0);
  mc_disk_close(d);

  flip_byte(file_of(dir, "val-a"), 4096 + 5000); /* a value byte: found by the verifying recovery */
  snprintf(p, sizeof(p), "%s", file_of(dir, "val-b"));
  flip_byte(p, 4096 + 3 * 4096 + 99); /* the last value byte: found by the get */
  snprintf(p, sizeof(p), "%s", file_of(dir, "trunc-d"));
  REQUIRE(truncate(p, 4096 + 4096) == 0);
  snprintf(p, sizeof(p), "%s", file_of(dir, "klen-f"));
  { /* a valid header checksum over a value length past the file */
    char h[4096];
    uint64_t id = strtoull(strrchr(p, '/') + 1, NULL, 16);
    forge_header(h, id, "klen-f", 1ull << 40);
    int fd = open(p, O_WRONLY);
    REQUIRE(fd >= 0 && pwrite(fd, h, 4096, 0) == 4096);
    close(fd);
  }
  flip_byte(file_of(dir, "hdr-c"), 66); /* a key byte: the header checksum fails */
  /* a temporary of a write cut short, and a file that is not the store's */
  snprintf(p, sizeof(p), "%s/obj/05/0000000000abcd05.tmp", dir);
  int fd = open(p, O_CREAT | O_WRONLY, 0600);
  CHECK(fd >= 0 && write(fd, "partial", 7) == 7);
  close(fd);
  snprintf(p, sizeof(p), "%s/obj/00/README", dir);
  fd = open(p, O_CREAT | O_WRONLY, 0600);
  close(fd);

  /* without value verification: the header faults are found at open, the value fault of val-b at its get */
  struct mc_disk_opts o = {.verify_on_open = 0};
  struct mc_disk_recovery rep;
  d = open_ok(dir, 1ull << 30, &o, &rep);
  REQUIRE(d);
  CHECK_EQ(rep.broken, 3); /* hdr-c, trunc-d, klen-f */
  CHECK_EQ(rep.tmp_removed, 1);
  CHECK_EQ(rep.foreign, 1);
  CHECK_EQ(rep.objects, 3);
  uint64_t len = 3 * 4096 + 100;
  char *b = mc_malloc(len);
  CHECK_EQ(mc_disk_get(d, "val-b", 5, b, len), MC_DISK_ECORRUPT);
  CHECK_EQ(mc_disk_get(d, "val-b", 5, b, len), MC_DISK_ENOTFOUND);
  CHECK_EQ(mc_disk_get(d, "hdr-c", 5, b, len), MC_DISK_ENOTFOUND);
  CHECK_EQ(mc_disk_get(d, "trunc-d", 7, b, len), MC_DISK_ENOTFOUND);
  CHECK_EQ(mc_disk_get(d, "klen-f", 6, b, len), MC_DISK_ENOTFOUND);
  CHECK(get_whole(d, "good-e", len, 4));
  struct mc_disk_stats st;
  mc_disk_get_stats(d, &st);
  CHECK_EQ(st.broken_dropped, 4);
  CHECK_EQ(st.objects, 2);
  /* ids continue past every name seen (the temporary's included) */
  CHECK_EQ(put_tag(d, "after", 10, 9, 0), 0);
  snprintf(p, sizeof(p), "%s", file_of(dir, "after"));
  CHECK(strtoull(strrchr(p, '/') + 1, NULL, 16) > 0xabcd05);
  mc_disk_close(d);

  /* with value verification: val-a goes at open */
  o.verify_on_open = 1;
  d = open_ok(dir, 1ull << 30, &o, &rep);
  REQUIRE(d);
  CHECK_EQ(rep.broken, 1);
  CHECK_EQ(rep.tmp_removed, 0);
  CHECK_EQ(rep.objects, 2);
  CHECK_EQ(mc_disk_get(d, "val-a", 5, b, len), MC_DISK_ENOTFOUND);
  CHECK(get_whole(d, "good-e", len, 4));
  mc_disk_close(d);
  mc_free(b);
  snprintf(p, sizeof(p), "%s/obj/00/README", dir);
  CHECK(access(p, F_OK) == 0);
  rm_tree(dir);
}

static void test_format_and_lock(void) {
  char dir[128], p[200];
  mkpath(dir, sizeof(dir), "format");
  struct mc_disk *d = open_ok(dir, 1ull << 30, NULL, NULL), *d2 = NULL;
  REQUIRE(d);
  CHECK_EQ(mc_disk_open(dir, 1ull << 30, NULL, &d2, NULL), MC_DISK_EBUSY);
  CHECK(!d2);
  mc_disk_close(d);
  snprintf(p, sizeof(p), "%s/FORMAT", dir);
  FILE *f = fopen(p, "r");
  char line[64] = "";
  CHECK(f && fgets(line, sizeof(line), f));
  if (f) fclose(f);
  CHECK_STR(line, "mooncake-disk-format 1\n");
  f = fopen(p, "w");
  REQUIRE(f);
  fputs("mooncake-disk-format 2\n", f);
  fclose(f);
  CHECK_EQ(mc_disk_open(dir, 1ull << 30, NULL, &d2, NULL), MC_DISK_EVERSION);
  f = fopen(p, "w");
  REQUIRE(f);
  fputs("something else", f);
  fclose(f);
  CHECK_EQ(mc_disk_open(dir, 1ull << 30, NULL, &d2, NULL), -EINVAL);
  CHECK(!d2);
  rm_tree(dir);
}

static void test_quota(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "quota");
  struct mc_disk *d = open_ok(dir, 1 << 20, NULL, NULL);
  REQUIRE(d);
  uint64_t len = 256 << 10; /* 260 KiB a file: three fit in 1 MiB */
  CHECK_EQ(put_tag(d, "q0", len, 0, 1), 0);
  CHECK_EQ(put_tag(d, "q1", len, 1, 2), 0);
  CHECK_EQ(put_tag(d, "q2", len, 2, 3), 0);
  CHECK_EQ(put_tag(d, "q3", len, 3, 4), MC_DISK_EFULL);
  CHECK_EQ(put_tag(d, "q0", len, 9, 5), MC_DISK_EFULL); /* a replace needs room for both files */
  struct mc_disk_stats st;
  mc_disk_get_stats(d, &st);
  CHECK_EQ(st.used_bytes, 3 * (4096 + len));
  CHECK_EQ(st.quota_bytes, 1 << 20);
  CHECK_EQ(st.io_errors, 0);
  for (int i = 0; i < 3; i++) {
    char k[8];
    snprintf(k, sizeof(k), "q%d", i);
    CHECK(get_whole(d, k, len, (uint64_t)i));
  }
  CHECK_EQ(mc_disk_get(d, "q3", 2, NULL, 0), MC_DISK_ENOTFOUND);
  int objs, tmps;
  count_files(dir, &objs, &tmps);
  CHECK_EQ(objs, 3);
  CHECK_EQ(tmps, 0);
  CHECK_EQ(mc_disk_remove(d, "q1", 2), 0); /* its space is back at once */
  CHECK_EQ(put_tag(d, "q3", len, 3, 4), 0);
  CHECK(get_whole(d, "q3", len, 3));
  mc_disk_close(d);
  /* quota 0: 90 % of the file system */
  d = open_ok(dir, 0, NULL, NULL);
  REQUIRE(d);
  mc_disk_get_stats(d, &st);
  CHECK(st.quota_bytes > (1 << 20));
  mc_disk_close(d);
  rm_tree(dir);
}

/* ---- a writer killed at random moments ---- */

#define CRASH_KEYS 24
struct report {
  uint64_t key, seq;
};

static void crash_child(const char *dir, int wfd, uint64_t seq0, uint64_t rnd) {
  struct mc_disk_opts o = {.lanes = 2, .chunk_bytes = 256 << 10};
  struct mc_disk *d = NULL;
  if (mc_disk_open(dir, 1ull << 30, &o, &d, NULL)) _exit(3);
  char *b = mc_malloc(4 << 20);
  for (uint64_t seq = seq0;; seq++) {
    uint64_t k = mc_tp_xorshift(&rnd) % CRASH_KEYS, len = 16 + mc_tp_xorshift(&rnd) % (3 << 20);
    char key[32];
    snprintf(key, sizeof(key), "crash-%" PRIu64, k);
    fill(b, len, k, seq);
    if (mc_disk_put(d, key, strlen(key), b, len)) _exit(4);
    struct report r = {k, seq};
    if (write(wfd, &r, sizeof(r)) != sizeof(r)) _exit(5);
  }
}

static void test_crash(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "crash");
  uint64_t tmp_removed = 0, superseded = 0, objects = 0;
  uint64_t last[CRASH_KEYS] = {0}, rnd = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
  for (int round = 0; round < 6; round++) {
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(pfd[0]);
      crash_child(dir, pfd[1], (uint64_t)(round + 1) << 32, mc_tp_xorshift(&rnd) | 1);
    }
    close(pfd[1]);
    /* kill after a random number of committed puts and a random part of the next one's time */
    uint64_t want = 2 + mc_tp_xorshift(&rnd) % 8, got = 0;
    struct report r;
    while (got < want && read(pfd[0], &r, sizeof(r)) == sizeof(r)) {
      if (r.key < CRASH_KEYS) last[r.key] = MC_MAX(last[r.key], r.seq);
      got++;
    }
    CHECK_EQ(got, want);
    usleep((useconds_t)(mc_tp_xorshift(&rnd) % 20000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    while (read(pfd[0], &r, sizeof(r)) == sizeof(r)) /* every put the child saw return 0 */
      if (r.key < CRASH_KEYS) last[r.key] = MC_MAX(last[r.key], r.seq);
    close(pfd[0]);

    struct mc_disk_opts o = {.verify_on_open = 1};
    struct mc_disk_recovery rep;
    struct mc_disk *d = open_ok(dir, 1ull << 30, &o, &rep);
    REQUIRE(d);
    CHECK_EQ(rep.broken, 0);
    tmp_removed += rep.tmp_removed;
    superseded += rep.superseded;
    objects += rep.objects;
    int tmps;
    count_files(dir, NULL, &tmps);
    CHECK_EQ(tmps, 0);
    char *b = mc_malloc(4 << 20);
    for (uint64_t k = 0; k < CRASH_KEYS; k++) {
      char key[32];
      snprintf(key, sizeof(key), "crash-%" PRIu64, k);
      int64_t n = mc_disk_get(d, key, strlen(key), b, 4 << 20);
      if (!last[k]) {
        CHECK(n >= 0 || n == MC_DISK_ENOTFOUND);
        continue;
      }
      uint64_t seq = 0;
      CHECK(n >= 16 && whole(b, (uint64_t)n, k, &seq));
      CHECK(seq >= last[k]); /* the last reported value, or one whose put was cut short after it */
    }
    mc_free(b);
    mc_disk_close(d);
  }
  /* (what the kills cut: how often a write was caught before its commit shows here) */
  fprintf(stderr, "  6 kills: %" PRIu64 " temporaries removed, %" PRIu64 " superseded, %" PRIu64 " objects found\n",
          tmp_removed, superseded, objects);
  rm_tree(dir);
}

/* ---- threads on overlapping keys ---- */

#define TH_KEYS 16
struct th_arg {
  struct mc_disk *d;
  uint64_t seed;
  int bad;
};

static void *th_main(void *p) {
  struct th_arg *a = p;
  char *b = mc_malloc(300 << 10);
  for (int i = 0; i < 600; i++) {
    uint64_t k = mc_tp_xorshift(&a->seed) % TH_KEYS, op = mc_tp_xorshift(&a->seed) % 4;
    char key[32];
    snprintf(key, sizeof(key), "th-%" PRIu64, k);
    if (op <= 1) {
      uint64_t len = mc_tp_xorshift(&a->seed) % (300 << 10);
      fill(b, len, k, mc_tp_xorshift(&a->seed) | 1);
      a->bad += mc_disk_put(a->d, key, strlen(key), b, len) != 0;
    } else if (op == 2) {
      int64_t n = mc_disk_get(a->d, key, strlen(key), b, 300 << 10);
      a->bad += n != MC_DISK_ENOTFOUND && !(n >= 0 && whole(b, (uint64_t)n, k, NULL));
    } else {
      int r = mc_disk_remove(a->d, key, strlen(key));
      a->bad += r != 0 && r != MC_DISK_ENOTFOUND;
    }
  }
  mc_free(b);
  return NULL;
}

static int th_walk(const char *key, size_t klen, uint64_t len, void *arg) {
  struct mc_disk *d = arg;
  char k[32];
  unsigned long idx = 0;
  if (klen >= sizeof(k)) return 1;
  memcpy(k, key, klen);
  k[klen] = 0;
  if (sscanf(k, "th-%lu", &idx) != 1) return 1;
  return !get_whole(d, k, len, idx);
}

static void test_threads(void) {
  char dir[128];
  mkpath(dir, sizeof(dir), "threads");
  struct mc_disk_opts o = {.lanes = 2, .chunk_bytes = 64 << 10, .chunks_per_lane = 4};
  struct mc_disk *d = open_ok(dir, 1ull << 30, &o, NULL);
  REQUIRE(d);
  pthread_t t[4];
  struct th_arg a[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (struct th_arg){d, 0x1234567ull * (uint64_t)(i + 1), 0};
    pthread_create(&t[i], NULL, th_main, &a[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ(a[i].bad, 0);
  }
  CHECK_EQ(mc_disk_foreach(d, th_walk, d), 0);
  struct mc_disk_stats st;
  mc_disk_get_stats(d, &st);
  CHECK_EQ(st.broken_dropped + st.io_errors, 0);
  int objs, tmps;
  count_files(dir, &objs, &tmps);
  CHECK_EQ((uint64_t)objs, st.objects);
  CHECK_EQ(tmps, 0);
  mc_disk_close(d);
  struct mc_disk_recovery rep;
  d = open_ok(dir, 1ull << 30, &(struct mc_disk_opts){.verify_on_open = 1}, &rep);
  REQUIRE(d);
  CHECK_EQ(rep.objects, st.objects);
  CHECK_EQ(rep.broken + rep.superseded, 0);
  CHECK_EQ(mc_disk_foreach(d, th_walk, d), 0);
  mc_disk_close(d);
  rm_tree(dir);
}

/* ---- a real ENOSPC: a tmpfs of 8 MiB ---- */

static void test_enospc(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "  skipped: not root, no tmpfs mount\n");
    return;
  }
  char mp[128], probe[200];
  mkpath(mp, sizeof(mp), "small");
  REQUIRE(mkdir(mp, 0700) == 0);
  if (mount("tmpfs", mp, "tmpfs", 0, "size=8m")) {
    fprintf(stderr, "  skipped: mount -t tmpfs: %s\n", strerror(errno));
    rmdir(mp);
    return;
  }
  snprintf(probe, sizeof(probe), "%s/probe", mp);
  int fd = open(probe, O_CREAT | O_RDWR | O_DIRECT, 0600);
  if (fd < 0) {
    fprintf(stderr, "  skipped: tmpfs here takes no O_DIRECT: %s\n", strerror(errno));
    umount2(mp, MNT_DETACH);
    rmdir(mp);
    return;
  }
  close(fd);
  unlink(probe);
  char dir[200];
  snprintf(dir, sizeof(dir), "%s/store", mp);
  struct mc_disk *d = open_ok(dir, 1ull << 30, NULL, NULL);
  if (d) {
    int ok = 0, r = 0;
    char key[4] = "s?";
    for (; ok < 20; ok++) {
      key[1] = (char)('a' + ok);
      if ((r = put_tag(d, key, 1 << 20, (uint64_t)ok, (uint64_t)ok + 1))) break;
    }
    CHECK_EQ(r, MC_DISK_EFULL);
    CHECK(ok >= 4 && ok < 8);
    for (int i = 0; i < ok; i++) {
      key[1] = (char)('a' + i);
      CHECK(get_whole(d, key, 1 << 20, (uint64_t)i));
    }
    struct mc_disk_stats st;
    mc_disk_get_stats(d, &st);
    CHECK_EQ(st.objects, (uint64_t)ok);
    CHECK_EQ(st.used_bytes, (uint64_t)ok * (4096 + (1 << 20)));
    CHECK_EQ(st.io_errors, 0);
    int objs, tmps;
    count_files(dir, &objs, &tmps);
    CHECK_EQ(objs, ok);
    CHECK_EQ(tmps, 0);
    CHECK_EQ(mc_disk_remove(d, "sa", 2), 0);
    CHECK_EQ(put_tag(d, "sz", 1 << 20, 99, 5), 0);
    CHECK(get_whole(d, "sz", 1 << 20, 99));
    mc_disk_close(d);
    struct mc_disk_recovery rep;
    d = open_ok(dir, 1ull << 30, &(struct mc_disk_opts){.verify_on_open = 1}, &rep);
    CHECK_EQ(rep.objects, (uint64_t)ok);
    CHECK_EQ(rep.broken + rep.tmp_removed, 0);
    mc_disk_close(d);
  }
  CHECK_EQ(umount2(mp, 0), 0);
  rmdir(mp);
}

static void setup(void) __attribute__((constructor));
static void setup(void) {
  snprintf(base, sizeof(base), "/tmp/mc_test_disk.XXXXXX");
  if (!mkdtemp(base)) abort();
  base_owner = getpid();
}
static void teardown(void) __attribute__((destructor));
static void teardown(void) {
  if (getpid() == base_owner) rm_tree(base);
}

TEST_MAIN(TEST_CASE(test_crc), TEST_CASE(test_roundtrip), TEST_CASE(test_replace), TEST_CASE(test_many_and_reopen),
          TEST_CASE(test_corruption), TEST_CASE(test_format_and_lock), TEST_CASE(test_quota),
          TEST_CASE(test_crash), TEST_CASE(test_threads), TEST_CASE(test_enospc))
