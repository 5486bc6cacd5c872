/* te_demo: the smallest useful two-process transfer. The target contributes memory and prints what
 * lands in it; the initiator writes a message into the target's memory, notifies it, reads the bytes
 * back and checks them. Discovery goes through whatever metadata service is given. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "mooncake/transfer_engine.h"

struct demo_cfg {
  char *role, *metadata_server, *local_server_name, *segment_id, *message;
  int64_t timeout_s;
};

static const struct mc_cfg_opt opts[] = {
    {"role", MC_CFG_STRING, "target", 0, 0, offsetof(struct demo_cfg, role), "target | initiator"},
    {"metadata_server", MC_CFG_STRING, "P2PHANDSHAKE", 0, 0, offsetof(struct demo_cfg, metadata_server),
     "metadata service: http://h:p/metadata, etcd://h:p, redis://h:p or P2PHANDSHAKE"},
    {"local_server_name", MC_CFG_STRING, "127.0.0.1", 0, 0, offsetof(struct demo_cfg, local_server_name),
     "this process's segment name"},
    {"segment_id", MC_CFG_STRING, "", 0, 0, offsetof(struct demo_cfg, segment_id), "initiator: target's segment name"},
    {"message", MC_CFG_STRING, "hello mooncake", 0, 0, offsetof(struct demo_cfg, message), "what to write"},
    {"timeout_s", MC_CFG_INT, "30", 1, 3600, offsetof(struct demo_cfg, timeout_s), "give up after this long"},
    MC_CFG_END,
};

#define BUF_LEN (1 << 20)

static int run_target(struct demo_cfg *c, transfer_engine_t e) {
  char *buf = mc_te_alloc_shared(e, BUF_LEN, "cpu:0");
  if (!buf) return 1;
  printf("target: segment %s ready, %d bytes at %p\n", mc_te_local_segment_name(e), BUF_LEN, (void *)buf);
  fflush(stdout);
  for (int64_t i = 0; i < c->timeout_s * 100; i++) {
    int n = 0;
    notify_msg_t *m = getNotifsFromEngine(e, &n);
    for (int k = 0; k < n; k++) {
      size_t len = strtoul(m[k].msg, NULL, 10);
      printf("target: %s wrote %zu bytes: \"%.*s\"\n", m[k].name, len, (int)(len < BUF_LEN ? len : 0), buf);
      fflush(stdout);
    }
    freeNotifsMsgBuf(m, n);
    if (n) {
      sleep(1); /* let the initiator read back before the memory goes away */
      return 0;
    }
    usleep(10000);
  }
  fprintf(stderr, "target: nothing arrived within %lld s\n", (long long)c->timeout_s);
  return 1;
}

static int transfer(transfer_engine_t e, int op, void *local, segment_id_t seg, uint64_t remote, size_t len,
                    const notify_msg_t *note) {
  batch_id_t b = allocateBatchID(e, 1);
  struct transfer_request r = {op, local, seg, remote, len};
  int rc = note ? submitTransferWithNotify(e, b, &r, 1, *note) : submitTransfer(e, b, &r, 1);
  int st = rc ? STATUS_FAILED : mc_te_wait_batch(e, b, 30000);
  freeBatchID(e, b);
  return st == STATUS_COMPLETED ? 0 : -1;
}

static int run_initiator(struct demo_cfg *c, transfer_engine_t e) {
  segment_id_t seg = openSegment(e, c->segment_id);
  if (seg < 0) {
    fprintf(stderr, "initiator: cannot open segment '%s'\n", c->segment_id);
    return 1;
  }
  char *desc = mc_te_segment_json(e, seg), *a = desc ? strstr(desc, "\"addr\":") : NULL;
  uint64_t remote = a ? strtoull(a + 7, NULL, 10) : 0;
  free(desc);
  size_t len = strlen(c->message);
  char *buf = mc_te_alloc_shared(e, BUF_LEN, "cpu:0");
  if (!remote || !buf || len >= BUF_LEN) return 1;
  memcpy(buf, c->message, len);
  char lens[32];
  snprintf(lens, sizeof(lens), "%zu", len);
  notify_msg_t note = {(char *)mc_te_local_segment_name(e), lens};
  if (transfer(e, OPCODE_WRITE, buf, seg, remote, len, &note)) return fprintf(stderr, "initiator: write failed\n"), 1;
  memset(buf, 0, len);
  if (transfer(e, OPCODE_READ, buf, seg, remote, len, NULL)) return fprintf(stderr, "initiator: read failed\n"), 1;
  int same = !memcmp(buf, c->message, len);
  printf("initiator: wrote \"%s\" to %s over %s and read back \"%.*s\": %s\n", c->message, c->segment_id,
         mc_te_segment_path(e, seg), (int)len, buf, same ? "match" : "MISMATCH");
  return same ? 0 : 1;
}

int main(int argc, char **argv) {
  struct demo_cfg c;
  mc_log_init_from_env();
  mc_cfg_defaults(opts, &c);
  int rc = mc_cfg_parse_argv(opts, &c, argc, argv, "--role=target|initiator [flags]", NULL);
  if (rc) return rc > 0 ? 0 : 1;
  signal(SIGPIPE, SIG_IGN);
  transfer_engine_t e = createTransferEngine(c.metadata_server, c.local_server_name, NULL, 0, 1);
  if (!e) {
    fprintf(stderr, "cannot start the transfer engine (metadata service %s)\n", c.metadata_server);
    return 1;
  }
  rc = !strcmp(c.role, "initiator") ? run_initiator(&c, e) : run_target(&c, e);
  destroyTransferEngine(e);
  mc_cfg_free(opts, &c);
  return rc;
}
