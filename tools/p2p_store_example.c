/* p2p-store-example: the P2P store's example program (docs/p2p-store.md, "Example program"). The trainer
 * maps --file_size_mb MiB, registers them as foo/bar (64 MiB shards), lists the prefix foo, idles, then
 * unregisters; the inferencer fetches foo/bar and deletes its replica. Both end with "ALL DONE". */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "mooncake/p2p_store.h"

#define NAME "foo/bar"
#define SHARD (64ull << 20)

struct ex_cfg {
  char *cmd, *metadata_server, *local_server_name, *device_name, *nic_priority_matrix;
  int64_t file_size_mb, idle_s;
};

static const struct mc_cfg_opt opts[] = {
    {"cmd", MC_CFG_STRING, "trainer", 0, 0, offsetof(struct ex_cfg, cmd), "trainer | inferencer"},
    {"metadata_server", MC_CFG_STRING, "localhost:2379", 0, 0, offsetof(struct ex_cfg, metadata_server),
     "metadata service: etcd h:p (or etcd://h:p) or http://h:p/metadata"},
    {"local_server_name", MC_CFG_STRING, "localhost", 0, 0, offsetof(struct ex_cfg, local_server_name),
     "this node's segment name, host[:port] (no port: 12345)"},
    {"device_name", MC_CFG_STRING, "mlx5_2", 0, 0, offsetof(struct ex_cfg, device_name),
     "RDMA NIC (used through --nic_priority_matrix; without one the transport is TCP)"},
    {"nic_priority_matrix", MC_CFG_STRING, "", 0, 0, offsetof(struct ex_cfg, nic_priority_matrix),
     "file holding the NIC priority matrix (JSON); empty: TCP"},
    {"file_size_mb", MC_CFG_INT, "2048", 1, 1 << 24, offsetof(struct ex_cfg, file_size_mb), "payload size, MiB"},
    {"idle_s", MC_CFG_INT, "100", 0, 86400, offsetof(struct ex_cfg, idle_s), "trainer: seconds to serve before unregistering"},
    MC_CFG_END,
};

static atomic_int stop; /* (lock-free: set from a signal handler, which may run on any thread) */
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The file's text (malloc'ed), or NULL. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 1 << 20);
  size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (buf) buf[n] = 0;
  return buf;
}

static int trainer(struct ex_cfg *c, mc_p2p_store_t *s) {
  size_t size = (size_t)c->file_size_mb << 20;
  char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return perror("mmap"), 1;
  for (size_t i = 0; i < size; i += 4096) buf[i] = (char)(i / 4096);
  void *addrs[] = {buf};
  size_t sizes[] = {size};
  double t0 = now_ms();
  int rc = mc_p2p_register(s, NAME, addrs, sizes, 1, SHARD, "cpu:0", 1);
  if (rc) return fprintf(stderr, "register: %s\n", mc_p2p_strerror(rc)), 1;
  double ms = now_ms() - t0;
  printf("Object registration done: duration (ms) %.3f throughput (GB/s) %.3f\n", ms,
         ms > 0 ? (double)c->file_size_mb / ms : 0.0);
  mc_p2p_payload_info_t *l;
  size_t n;
  if (!mc_p2p_list(s, "foo", &l, &n)) {
    for (size_t i = 0; i < n; i++)
      printf("Name %s MaxShardSize %llu TotalSize %llu SizeList %zu entries\n", l[i].name,
             (unsigned long long)l[i].max_shard_size, (unsigned long long)l[i].total_size, l[i].size_count);
    mc_p2p_list_free(l, n);
  }
  fflush(stdout);
  for (int64_t i = 0; i < c->idle_s * 10 && !stop; i++) usleep(100000);
  rc = mc_p2p_unregister(s, NAME);
  if (rc) fprintf(stderr, "unregister: %s\n", mc_p2p_strerror(rc));
  munmap(buf, size);
  return rc != 0;
}

static int inferencer(mc_p2p_store_t *s) {
  mc_p2p_payload_info_t *l;
  size_t n;
  int rc = mc_p2p_list(s, NAME, &l, &n);
  size_t at = 0;
  while (!rc && at < n && strcmp(l[at].name, NAME)) at++;
  if (rc || at == n) {
    fprintf(stderr, "inferencer: %s\n", mc_p2p_strerror(rc ? rc : MC_P2P_PAYLOAD_NOT_FOUND));
    if (!rc) mc_p2p_list_free(l, n);
    return 1;
  }
  size_t cnt = l[at].size_count, total = l[at].total_size;
  void **addrs = calloc(cnt, sizeof(void *));
  size_t *sizes = calloc(cnt, sizeof(size_t));
  char *buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (size_t i = 0, off = 0; buf != MAP_FAILED && i < cnt; off += l[at].size_list[i++])
    addrs[i] = buf + off, sizes[i] = l[at].size_list[i];
  mc_p2p_list_free(l, n);
  if (buf == MAP_FAILED) return perror("mmap"), 1;
  printf("Object retrieval started: name %s\n", NAME);
  fflush(stdout);
  double t0 = now_ms();
  rc = mc_p2p_get_replica(s, NAME, addrs, sizes, cnt);
  double ms = now_ms() - t0;
  if (rc) {
    fprintf(stderr, "get replica: %s\n", mc_p2p_strerror(rc));
  } else {
    printf("Object retrieval done: duration (ms) %.3f throughput (GB/s) %.3f\n", ms,
           ms > 0 ? (double)(total >> 20) / ms : 0.0);
    fflush(stdout);
    rc = mc_p2p_delete_replica(s, NAME);
    if (rc) fprintf(stderr, "delete replica: %s\n", mc_p2p_strerror(rc));
  }
  munmap(buf, total);
  free(addrs);
  free(sizes);
  return rc != 0;
}

int main(int argc, char **argv) {
  struct ex_cfg c;
  mc_log_init_from_env();
  mc_cfg_defaults(opts, &c);
  int rc = mc_cfg_parse_argv(opts, &c, argc, argv, "--cmd=trainer|inferencer [flags]", NULL);
  if (rc) return rc > 0 ? 0 : 1;
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  char *matrix = c.nic_priority_matrix[0] ? slurp(c.nic_priority_matrix) : NULL;
  if (c.nic_priority_matrix[0] && !matrix) {
    fprintf(stderr, "cannot read %s\n", c.nic_priority_matrix);
    return 1;
  }
  mc_p2p_store_t *s = mc_p2p_store_new(c.metadata_server, c.local_server_name, matrix ? matrix : "");
  free(matrix);
  if (!s) return fprintf(stderr, "cannot start the P2P store (metadata service %s)\n", c.metadata_server), 1;
  rc = !strcmp(c.cmd, "trainer") ? trainer(&c, s) : !strcmp(c.cmd, "inferencer") ? inferencer(s) : 2;
  if (rc == 2) fprintf(stderr, "--cmd must be trainer or inferencer\n");
  mc_p2p_store_close(s);
  if (!rc) printf("ALL DONE\n");
  mc_cfg_free(opts, &c);
  return rc != 0;
}
