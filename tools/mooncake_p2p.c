/* mooncake_p2p: the P2P store from the command line (docs/p2p-store.md, "Command line").
 *   register        maps a file and seeds it as a payload; serves until SIGINT/SIGTERM, then unregisters
 *   fetch           fetches a payload into a file, with a progress display (bytes, rate, sources in use) on a
 *                   terminal and plain lines otherwise; a file of the payload's size is resumed (its shards that
 *                   match their checksums are kept); --hold serves it until SIGINT/SIGTERM; --serve=false
 *                   fetches a private copy (never advertised: this node serves nobody)
 *   list            the payloads under a prefix
 *   unregister      removes a node's producer entries from a payload's record (cleanup)
 *   delete-replica  removes a node's replica entries from a payload's record (cleanup) */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "mooncake/p2p_store.h"

struct p2p_cli {
  char *metadata_server, *local_server_name, *name, *file, *prefix, *server, *progress;
  int64_t shard_mb;
  int force, hold, serve;
};

static const struct mc_cfg_opt opts[] = {
    {"metadata_server", MC_CFG_STRING, "localhost:2379", 0, 0, offsetof(struct p2p_cli, metadata_server),
     "metadata service: etcd h:p (or etcd://h:p) or http://h:p/metadata"},
    {"local_server_name", MC_CFG_STRING, "localhost", 0, 0, offsetof(struct p2p_cli, local_server_name),
     "this node's segment name, host[:port] (no port: 12345)"},
    {"name", MC_CFG_STRING, "", 0, 0, offsetof(struct p2p_cli, name), "the payload's name"},
    {"file", MC_CFG_STRING, "", 0, 0, offsetof(struct p2p_cli, file), "register: the file to seed; fetch: the file to write"},
    {"shard_mb", MC_CFG_INT, "64", 1, 4096, offsetof(struct p2p_cli, shard_mb), "register: shard size, MiB (a power of two)"},
    {"force", MC_CFG_BOOL, "false", 0, 0, offsetof(struct p2p_cli, force), "register: replace an existing record"},
    {"hold", MC_CFG_BOOL, "false", 0, 0, offsetof(struct p2p_cli, hold), "fetch: serve the payload until SIGINT/SIGTERM"},
    {"serve", MC_CFG_BOOL, "true", 0, 0, offsetof(struct p2p_cli, serve),
     "fetch: serve the shards to other consumers while and after fetching (false: a private copy, never advertised)"},
    {"prefix", MC_CFG_STRING, "", 0, 0, offsetof(struct p2p_cli, prefix), "list: name prefix"},
    {"server", MC_CFG_STRING, "", 0, 0, offsetof(struct p2p_cli, server),
     "unregister / delete-replica: the holder's segment name"},
    {"progress", MC_CFG_STRING, "auto", 0, 0, offsetof(struct p2p_cli, progress),
     "fetch: auto (a bar on a terminal, else lines), bar, lines, none"},
    MC_CFG_END,
};

static atomic_int stop; /* (lock-free: set from a signal handler, which may run on any thread) */
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void wait_signal(void) {
  while (!stop) usleep(100000);
}

static int fail(const char *what, int rc) {
  fprintf(stderr, "%s: %s\n", what, mc_p2p_strerror(rc));
  return 1;
}

/* ---- register ---- */

static int cmd_register(struct p2p_cli *c, mc_p2p_store_t *s) {
  int fd = open(c->file, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || st.st_size <= 0) return fprintf(stderr, "cannot read %s\n", c->file), 1;
  size_t size = (size_t)st.st_size;
  void *buf = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (buf == MAP_FAILED) return perror("mmap"), 1;
  size_t sizes[] = {size};
  int rc = mc_p2p_register(s, c->name, &buf, sizes, 1, (uint64_t)c->shard_mb << 20, "cpu:0", c->force);
  if (rc) return fail("register", rc);
  printf("registered %s: %zu bytes from %s as %s; serving until SIGINT/SIGTERM\n", c->name, size, c->file,
         mc_p2p_local_server_name(s));
  fflush(stdout);
  wait_signal();
  rc = mc_p2p_unregister(s, c->name);
  printf("unregistered %s: %s\n", c->name, mc_p2p_strerror(rc));
  munmap(buf, size);
  return rc != 0;
}

/* ---- fetch, with its progress display ---- */

struct progress {
  mc_p2p_store_t *s;
  uint64_t total;
  int bar; /* 1: one line rewritten in place (a terminal), 0: a line a second */
  atomic_int done; /* set by the fetching thread when the fetch returned */
};

static void show(struct progress *p, double t0, uint64_t base, int last) {
  uint64_t bytes;
  unsigned sources;
  mc_p2p_progress(p->s, &bytes, &sources);
  bytes -= base;
  double el = now_s() - t0, mib = bytes / 1048576.0, rate = el > 0 ? mib / el : 0;
  if (p->bar) {
    int width = 30, fill = p->total ? (int)(width * (double)bytes / p->total) : width;
    fill = fill > width ? width : fill;
    fprintf(stderr, "\r[%.*s%*s] %8.1f / %.1f MiB  %8.1f MiB/s  %u sources%s", fill,
            "##############################", width - fill, "", mib, p->total / 1048576.0, rate, sources,
            last ? "\n" : "");
  } else {
    fprintf(stderr, "progress: %.1f / %.1f MiB, %.1f MiB/s, %u sources\n", mib, p->total / 1048576.0, rate, sources);
  }
  fflush(stderr);
}

static void *progress_main(void *arg) {
  struct progress *p = arg;
  double t0 = now_s(), next = t0;
  uint64_t base;
  mc_p2p_progress(p->s, &base, NULL);
  while (!atomic_load(&p->done)) {
    usleep(100000);
    if (now_s() < next) continue;
    next += p->bar ? 0.2 : 1.0;
    show(p, t0, base, 0);
  }
  show(p, t0, base, 1);
  return NULL;
}

/* The record's layout of name (size list), from the listing. 0 or an MC_P2P_* code. */
static int layout(mc_p2p_store_t *s, const char *name, uint64_t **sizes, size_t *n, uint64_t *total) {
  mc_p2p_payload_info_t *l;
  size_t cnt;
  int rc = mc_p2p_list(s, name, &l, &cnt);
  if (rc) return rc;
  rc = MC_P2P_PAYLOAD_NOT_FOUND;
  for (size_t i = 0; i < cnt; i++) {
    if (strcmp(l[i].name, name)) continue;
    *sizes = l[i].size_list, *n = l[i].size_count, *total = l[i].total_size;
    l[i].size_list = NULL;
    rc = 0;
  }
  mc_p2p_list_free(l, cnt);
  return rc;
}

static int cmd_fetch(struct p2p_cli *c, mc_p2p_store_t *s) {
  uint64_t *sz = NULL, total = 0;
  size_t n = 0;
  int rc = layout(s, c->name, &sz, &n, &total);
  if (rc) return fail("fetch", rc);
  struct stat st;
  /* a previous fetch's file: keep what is right (a private copy is read whole) */
  int resume = c->serve && !stat(c->file, &st) && (uint64_t)st.st_size == total;
  int fd = open(c->file, O_RDWR | O_CREAT, 0644);
  if (fd < 0 || ftruncate(fd, (off_t)total)) return fprintf(stderr, "cannot write %s\n", c->file), 1;
  char *buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (buf == MAP_FAILED) return perror("mmap"), 1;
  void **addrs = calloc(n, sizeof(void *));
  size_t *sizes = calloc(n, sizeof(size_t));
  for (size_t i = 0, off = 0; i < n; off += sz[i++]) addrs[i] = buf + off, sizes[i] = sz[i];
  free(sz);
  struct progress p = {.s = s, .total = total, .bar = isatty(2)};
  if (!strcmp(c->progress, "bar")) p.bar = 1;
  if (!strcmp(c->progress, "lines")) p.bar = 0;
  pthread_t th;
  int shown = strcmp(c->progress, "none") && !pthread_create(&th, NULL, progress_main, &p);
  double t0 = now_s();
  uint64_t before, after;
  mc_p2p_progress(s, &before, NULL);
  rc = !c->serve ? mc_p2p_get_copy(s, c->name, addrs, sizes, n)
       : resume  ? mc_p2p_get_replica_resume(s, c->name, addrs, sizes, n)
                 : mc_p2p_get_replica(s, c->name, addrs, sizes, n);
  mc_p2p_progress(s, &after, NULL);
  double el = now_s() - t0;
  atomic_store(&p.done, 1);
  if (shown) pthread_join(th, NULL);
  if (!rc) msync(buf, total, MS_SYNC);
  if (rc) {
    fail("fetch", rc);
  } else {
    printf("fetched %s: %llu bytes into %s in %.3f s (%.1f MiB/s), %llu bytes read%s\n", c->name,
           (unsigned long long)total, c->file, el, el > 0 ? total / 1048576.0 / el : 0,
           (unsigned long long)(after - before), resume ? " (the file's right shards were kept)" : "");
    fflush(stdout);
    if (c->hold) {
      printf("holding %s as %s until SIGINT/SIGTERM\n", c->name, mc_p2p_local_server_name(s));
      fflush(stdout);
      wait_signal();
    }
    rc = c->serve ? mc_p2p_delete_replica(s, c->name) : 0;
    if (rc) fail("delete replica", rc);
  }
  munmap(buf, total);
  free(addrs);
  free(sizes);
  return rc != 0;
}

/* ---- list, cleanup ---- */

static int cmd_list(struct p2p_cli *c, mc_p2p_store_t *s) {
  mc_p2p_payload_info_t *l;
  size_t n;
  int rc = mc_p2p_list(s, c->prefix, &l, &n);
  if (rc) return fail("list", rc);
  for (size_t i = 0; i < n; i++)
    printf("%s\t%llu bytes\t%zu buffer(s)\tshards of %llu bytes\n", l[i].name, (unsigned long long)l[i].total_size,
           l[i].size_count, (unsigned long long)l[i].max_shard_size);
  mc_p2p_list_free(l, n);
  return 0;
}

static int cmd_remove(struct p2p_cli *c, mc_p2p_store_t *s, int gold) {
  int rc = mc_p2p_remove_holder(s, c->name, c->server, gold);
  if (rc) return fail(gold ? "unregister" : "delete-replica", rc);
  printf("%s is no longer a %s of %s\n", c->server, gold ? "producer" : "replica holder", c->name);
  return 0;
}

int main(int argc, char **argv) {
  static const char *usage = "register|fetch|list|unregister|delete-replica [flags]";
  const char *cmd = argc > 1 ? argv[1] : "";
  struct p2p_cli c;
  mc_log_init_from_env();
  mc_cfg_defaults(opts, &c);
  int is_cmd = !strcmp(cmd, "register") || !strcmp(cmd, "fetch") || !strcmp(cmd, "list") ||
               !strcmp(cmd, "unregister") || !strcmp(cmd, "delete-replica");
  int rc = mc_cfg_parse_argv(opts, &c, is_cmd ? argc - 1 : argc, is_cmd ? argv + 1 : argv, usage, NULL);
  if (rc) return rc > 0 ? 0 : 1;
  if (!is_cmd) return fprintf(stderr, "usage: mooncake_p2p %s\n", usage), 1;
  int need_name = strcmp(cmd, "list") != 0, need_file = !strcmp(cmd, "register") || !strcmp(cmd, "fetch");
  int need_server = !strcmp(cmd, "unregister") || !strcmp(cmd, "delete-replica");
  if ((need_name && !c.name[0]) || (need_file && !c.file[0]) || (need_server && !c.server[0])) {
    fprintf(stderr, "%s needs --name%s%s\n", cmd, need_file ? " and --file" : "", need_server ? " and --server" : "");
    return 1;
  }
  if (!strcmp(cmd, "fetch") && c.hold && !c.serve) return fprintf(stderr, "fetch: --hold needs --serve\n"), 1;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  mc_p2p_store_t *s = mc_p2p_store_new(c.metadata_server, c.local_server_name, "");
  if (!s) return fprintf(stderr, "cannot start the P2P store (metadata service %s)\n", c.metadata_server), 1;
  if (!strcmp(cmd, "register")) rc = cmd_register(&c, s);
  else if (!strcmp(cmd, "fetch")) rc = cmd_fetch(&c, s);
  else if (!strcmp(cmd, "list")) rc = cmd_list(&c, s);
  else rc = cmd_remove(&c, s, !strcmp(cmd, "unregister"));
  mc_p2p_store_close(s);
  mc_cfg_free(opts, &c);
  return rc;
}
