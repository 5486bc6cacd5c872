/* The transport table (docs/transfer-engine.md, "Path choice"): the order a segment's transport is chosen in
 * (same host, then the network), descriptors that must not fall to TCP, MC_SAME_HOST_PATH=0, the fallback to
 * tcp when a requested transport cannot be installed (its log line and metric), and the split operation. The
 * engines are real ones of this process, with an embedded HTTP metadata server; forged descriptors are real
 * ones with a field changed. */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "lib/proc.h"
#include "lib/te_desc.h"
#include "lib/test.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"
#include "mooncake/runtime.h"
#include "mooncake/transfer_engine.h"
#include "te/engine_internal.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

static const char *g_conn;

static void start_meta(void) { g_conn = mt_meta_conn(); }

/* An engine named <tag>-<pid>-<n> with tcp installed (auto discovery), under the given environment
 * ("NAME=value" words, applied for its creation only). */
static transfer_engine_t engine(const char *tag, const char *env1, const char *env2) {
  static int seq;
  char name[64];
  snprintf(name, sizeof(name), "%s-%d-%d", tag, (int)getpid(), ++seq);
  const char *env[] = {env1, env2};
  char var[2][64];
  for (int i = 0; i < 2; i++)
    if (env[i]) {
      snprintf(var[i], sizeof(var[i]), "%.*s", (int)(strchr(env[i], '=') - env[i]), env[i]);
      setenv(var[i], strchr(env[i], '=') + 1, 1);
    }
  transfer_engine_t e = createTransferEngine(g_conn, name, NULL, 0, 1);
  for (int i = 0; i < 2; i++)
    if (env[i]) unsetenv(var[i]);
  return e;
}

/* ------------------------------------------------------------ capturing the log */

struct capture {
  int saved;
  char path[64];
};

static void capture_start(struct capture *c) {
  snprintf(c->path, sizeof(c->path), "/tmp/mc_te_paths_XXXXXX");
  int fd = mkstemp(c->path);
  fflush(stderr);
  c->saved = dup(2);
  dup2(fd, 2);
  close(fd);
  setenv("MC_LOG_LEVEL", "INFO", 1); /* engines apply it when they are created */
  mc_log_set_level(MC_LOG_INFO);
}

/* What was logged since capture_start (malloc'ed). */
static char *capture_end(struct capture *c) {
  unsetenv("MC_LOG_LEVEL");
  mc_log_set_level(MC_LOG_WARN);
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  FILE *f = fopen(c->path, "r");
  char *text = calloc(1, 1 << 20);
  if (f) {
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = 0;
    fclose(f);
  }
  unlink(c->path);
  return text;
}

/* ------------------------------------------------------------ forged descriptors */

/* Publishes `name`: the descriptor of engine `of` with string fields set to other values (field, value pairs,
 * then NULL). */
static int forge(transfer_engine_t of, const char *name, ...) {
  char *text = mc_te_segment_json(of, LOCAL_SEGMENT);
  json_t *d = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  if (!d) return -1;
  json_object_set_new(d, "name", json_string(name));
  va_list ap;
  va_start(ap, name);
  for (const char *field; (field = va_arg(ap, const char *));) json_object_set_new(d, field, json_string(va_arg(ap, const char *)));
  va_end(ap);
  text = json_dumps(d, JSON_COMPACT);
  json_decref(d);
  int rc = mt_publish_desc(g_conn, name, text);
  free(text);
  return rc;
}

/* A remotely accessible 1 MiB buffer of e, filled with `byte`. */
static uint8_t *buffer(transfer_engine_t e, int byte) {
  uint8_t *p = aligned_alloc(4096, MiB);
  memset(p, byte, MiB);
  return registerLocalMemory(e, p, MiB, "cpu:0", 1) ? NULL : p;
}

/* ------------------------------------------------------------ tests */

/* The table: the same-host row first, the fallback (tcp) last; rdma between them, with every operation and the
 * Connection handshake's. An engine keeps its transports in the table's order whatever order they were installed in. */
static void test_table_order(void) {
  int n = mc_transport_rows();
  REQUIRE(n >= 3);
  CHECK(mc_transport_row(0)->same_host);
  CHECK_STR(mc_transport_row(0)->name, "shm");
  CHECK(mc_transport_row(n - 1) == mc_transport_fallback());
  CHECK_STR(mc_transport_fallback()->name, "tcp");
  for (int i = 1; i < n; i++) CHECK(!mc_transport_row(i)->same_host);
  const struct mc_transport_ops *rdma = mc_transport_lookup("rdma");
  REQUIRE(rdma);
  CHECK(rdma->init && rdma->reachable && rdma->submit && rdma->connection && !rdma->same_host);
  CHECK(mc_transport_rank(rdma) > 0 && mc_transport_rank(rdma) < n - 1);
  CHECK(mc_transport_lookup("nvmeof") == NULL);

  start_meta();
  transfer_engine_t e = engine("order", "MC_FORCE_TCP=1", NULL); /* tcp alone */
  REQUIRE(e);
  struct mc_engine *me = e;
  CHECK_EQ(me->ntps, 1);
  transport_t shm = installTransport(e, "shm", NULL); /* asked for by name: installed, placed first */
  CHECK_STR(mc_te_transport_name(shm), "shm");
  REQUIRE(me->ntps == 2);
  CHECK(me->tps[0]->ops->same_host);
  CHECK(me->tps[1]->ops == mc_transport_fallback());
  CHECK(installTransport(e, "tcp", NULL) == me->tps[1]); /* installed already: the same one */
  CHECK(installTransport(e, "nvmeof", NULL) == NULL);
  destroyTransferEngine(e);
}

/* Same host first, then tcp: a peer of this host is reached through shared memory, the same descriptor on
 * another host over TCP (and the bytes land), one offering only shared memory on another host by nothing; one
 * offering rdma on this host through shared memory (the same-host path comes first). MC_FORCE_TCP=1 gives tcp; an engine that has tcp alone but is
 * then given shm probes shm first. */
static void test_choice_order(void) {
  start_meta();
  transfer_engine_t a = engine("chooser", NULL, NULL), b = engine("target", NULL, NULL);
  REQUIRE(a && b);
  uint8_t *src = buffer(a, 0x11), *dst = buffer(b, 0);
  REQUIRE(src && dst);
  char *bname = mc_strdup(mc_te_local_segment_name(b));
  REQUIRE(forge(b, "far", "host_id", "another-host", NULL) == 0);
  REQUIRE(forge(b, "far-shm-only", "host_id", "another-host", "protocol", "shm", NULL) == 0);
  REQUIRE(forge(b, "near-rdma", "protocol", "rdma", NULL) == 0);
  REQUIRE(forge(b, "near-again", NULL) == 0);
  /* rdma fields that break their rule reject the whole descriptor (docs/rdma.md), whatever else it offers */
  REQUIRE(forge(b, "bad-rdma", "protocol", "rdma", "devices", "rxe0", NULL) == 0);
  CHECK(openSegment(a, "bad-rdma") < 0);

  struct capture c;
  capture_start(&c);
  segment_id_t near = openSegment(a, bname), far = openSegment(a, "far"), shm_only = openSegment(a, "far-shm-only"),
               rdma = openSegment(a, "near-rdma");
  char *log = capture_end(&c);
  REQUIRE(near > 0 && far > 0 && shm_only > 0 && rdma > 0);
  CHECK_STR(mc_te_segment_path(a, near), "shm");
  CHECK_STR(mc_te_segment_path(a, far), "tcp");
  CHECK(mc_te_segment_path(a, shm_only) == NULL);
  CHECK_STR(mc_te_segment_path(a, rdma), "shm");
  char want[300];
  snprintf(want, sizeof(want), "segment %s: using protocol shm", bname);
  CHECK(strstr(log, want) != NULL);
  CHECK(strstr(log, "segment far: using protocol tcp") != NULL);
  CHECK(strstr(log, "segment far-shm-only: no installed transport can reach it (protocol shm)") != NULL);
  CHECK(strstr(log, "segment near-rdma: using protocol shm") != NULL);
  free(log);
  char links[1024];
  CHECK_EQ(showLinks(a, links, sizeof(links), 0), 0);
  snprintf(want, sizeof(want), "%d %s shm\n%d far tcp\n%d far-shm-only none\n", near, bname, far, shm_only);
  CHECK(strstr(links, want) != NULL);

  /* the bytes land both ways */
  uint64_t at = (uint64_t)(uintptr_t)dst;
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, near, at, 64 * KiB), STATUS_COMPLETED);
  memset(src, 0x22, MiB);
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, far, at + 64 * KiB, 64 * KiB), STATUS_COMPLETED);
  CHECK(dst[0] == 0x11 && dst[64 * KiB - 1] == 0x11 && dst[64 * KiB] == 0x22 && dst[128 * KiB - 1] == 0x22);
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, shm_only, at, 4096), -MC_TE_STATUS_NOT_SUPPORTED_TRANSPORT);
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, rdma, at, 4096), STATUS_COMPLETED);

  /* MC_FORCE_TCP=1: tcp even on this host; given shm afterwards, the table's order decides again */
  transfer_engine_t f = engine("forced", "MC_FORCE_TCP=1", NULL);
  REQUIRE(f);
  segment_id_t s = openSegment(f, bname);
  CHECK_STR(mc_te_segment_path(f, s), "tcp");
  CHECK(installTransport(f, "shm", NULL) != NULL);
  s = openSegment(f, "near-again"); /* fetched after the install: shm, probed before tcp */
  CHECK_STR(mc_te_segment_path(f, s), "shm");
  destroyTransferEngine(f);
  destroyTransferEngine(a);
  destroyTransferEngine(b);
  free(src);
  free(dst);
  free(bname);
}

/* MC_SAME_HOST_PATH=0: two engines of this host reach each other over TCP (log line, mc_te_segment_path,
 * showLinks), publish no same-host registry, and the bytes land. */
static void test_same_host_path_off(void) {
  start_meta();
  transfer_engine_t a = engine("nearby-a", "MC_SAME_HOST_PATH=0", NULL),
                    b = engine("nearby-b", "MC_SAME_HOST_PATH=0", NULL);
  REQUIRE(a && b);
  struct mc_engine *ma = a;
  CHECK_EQ(ma->ntps, 1);
  CHECK(mc_engine_transport(a, "shm") == NULL);
  uint8_t *src = buffer(a, 0x5C), *dst = buffer(b, 0);
  REQUIRE(src && dst);
  char *desc = mc_te_segment_json(b, LOCAL_SEGMENT);
  CHECK(desc && strstr(desc, "\"protocol\":\"tcp\"") && !strstr(desc, "shm_registry_fd"));
  free(desc);
  struct capture c;
  capture_start(&c);
  segment_id_t s = openSegment(a, mc_te_local_segment_name(b));
  char *log = capture_end(&c);
  REQUIRE(s > 0);
  CHECK_STR(mc_te_segment_path(a, s), "tcp");
  CHECK_STR(mc_te_segment_path(a, LOCAL_SEGMENT), "tcp");
  char want[300];
  snprintf(want, sizeof(want), "segment %s: using protocol tcp", mc_te_local_segment_name(b));
  CHECK(strstr(log, want) != NULL);
  free(log);
  char links[512];
  CHECK_EQ(showLinks(a, links, sizeof(links), 1), 0);
  snprintf(want, sizeof(want), "\"name\":\"%s\",\"path\":\"tcp\"", mc_te_local_segment_name(b));
  CHECK(strstr(links, want) != NULL);
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, s, (uint64_t)(uintptr_t)dst, MiB), STATUS_COMPLETED);
  CHECK(dst[0] == 0x5C && dst[MiB - 1] == 0x5C);
  memset(src, 0, MiB);
  CHECK_EQ(mt_xfer(a, OPCODE_READ, src, s, (uint64_t)(uintptr_t)dst, MiB), STATUS_COMPLETED);
  CHECK(src[0] == 0x5C && src[MiB - 1] == 0x5C);
  /* the knob left alone: the same pair meets through shared memory */
  transfer_engine_t d = engine("nearby-d", NULL, NULL);
  REQUIRE(d);
  CHECK_STR(mc_te_segment_path(d, openSegment(d, mc_te_local_segment_name(b))), "shm");
  destroyTransferEngine(d);
  destroyTransferEngine(a);
  destroyTransferEngine(b);
  free(src);
  free(dst);
}

static double fallback_metric(transfer_engine_t e) {
  char text[2048];
  int n = mc_te_metrics(e, text, sizeof(text));
  const char *p = n > 0 ? strstr(text, "te_transport_fallback_total{requested=\"rdma\"} ") : NULL;
  return p ? strtod(strchr(p, '}') + 2, NULL) : -1;
}

/* installTransport("rdma") on a host with no RDMA device (this one: the transport is tested in the RDMA guest,
 * test_rdma_guest): tcp is installed (with the same-host path), the log line
 * says so with the reason, the metric counts it, and the engine works. MC_FORCE_TCP=1 falls back too, saying
 * why. */
static void test_rdma_fallback(void) {
  start_meta();
  char name[64];
  snprintf(name, sizeof(name), "rdma-asker-%d", (int)getpid());
  struct capture c;
  capture_start(&c);
  transfer_engine_t e = createTransferEngine(g_conn, name, NULL, 0, 0);
  transport_t t = e ? installTransport(e, "rdma", NULL) : NULL;
  char *log = capture_end(&c);
  REQUIRE(e && t);
  CHECK_STR(mc_te_transport_name(t), "tcp");
  CHECK(strstr(log, "installTransport: using protocol tcp: rdma requested but unavailable: no RDMA device") != NULL);
  free(log);
  CHECK_EQ(fallback_metric(e), 1);
  char text[2048];
  int n = mc_te_metrics(e, text, sizeof(text));
  CHECK(n > 0 && (size_t)n == strlen(text));
  CHECK(strstr(text, "# TYPE te_transport_fallback_total counter\n") != NULL);
  CHECK_EQ(mc_te_metrics(e, NULL, 0), n);
  CHECK_EQ(mc_te_metrics(e, text, 10), n);
  CHECK_EQ(strlen(text), 9);
  CHECK_EQ(mc_te_metrics(NULL, text, sizeof(text)), ERR_INVALID_ARGUMENT);
  struct mc_engine *me = e;
  CHECK_EQ(me->ntps, 2); /* shm and tcp */
  char *desc = mc_te_segment_json(e, LOCAL_SEGMENT);
  CHECK(desc && strstr(desc, "\"protocol\":\"tcp\"") && strstr(desc, "\"tcp_data_port\":"));
  free(desc);
  CHECK(installTransport(e, "rdma", NULL) == t); /* asked again: the same fallback, counted again */
  CHECK_EQ(fallback_metric(e), 2);

  /* a peer reaches it over TCP (its same-host path turned off) and over shared memory */
  uint8_t *mine = buffer(e, 0x3D);
  transfer_engine_t p = engine("rdma-peer", "MC_SAME_HOST_PATH=0", NULL), q = engine("rdma-peer", NULL, NULL);
  REQUIRE(mine && p && q);
  uint8_t *theirs = buffer(p, 0);
  segment_id_t s = openSegment(p, name);
  CHECK_STR(mc_te_segment_path(p, s), "tcp");
  CHECK_EQ(mt_xfer(p, OPCODE_READ, theirs, s, (uint64_t)(uintptr_t)mine, MiB), STATUS_COMPLETED);
  CHECK(theirs[0] == 0x3D && theirs[MiB - 1] == 0x3D);
  CHECK_STR(mc_te_segment_path(q, openSegment(q, name)), "shm");
  CHECK_EQ(fallback_metric(p), 0); /* tcp asked for: nothing to count */
  destroyTransferEngine(q);
  destroyTransferEngine(p);
  destroyTransferEngine(e);

  capture_start(&c);
  e = engine("rdma-forced", "MC_FORCE_TCP=1", NULL);
  t = e ? installTransport(e, "rdma", NULL) : NULL;
  log = capture_end(&c);
  REQUIRE(e && t);
  CHECK_STR(mc_te_transport_name(t), "tcp");
  CHECK(strstr(log, "using protocol tcp: rdma requested but MC_FORCE_TCP is set") != NULL);
  free(log);
  CHECK_EQ(fallback_metric(e), 1);
  destroyTransferEngine(e);
  free(mine);
  free(theirs);
}

/* ------------------------------------------------------------ the split operation */

/* Records the slices a transport is handed, then passes them on. */
static struct mc_transport_ops spy_ops;
static const struct mc_transport_ops *spied;
static size_t spy_slices;
static uint64_t spy_bytes, spy_max;

static void spy_submit(struct mc_transport *t, struct mc_slice **sl, size_t n) {
  spy_slices += n;
  for (size_t i = 0; i < n; i++) {
    spy_bytes += sl[i]->len;
    if (sl[i]->len > spy_max) spy_max = sl[i]->len;
  }
  spied->submit(t, sl, n);
}

static void spy_on(struct mc_transport *t) {
  spied = t->ops;
  spy_ops = *t->ops;
  spy_ops.submit = spy_submit;
  t->ops = &spy_ops;
  spy_slices = spy_bytes = spy_max = 0;
}

static void spy_off(struct mc_transport *t) { t->ops = spied; }

/* TCP's split: above MC_TCP_SPLIT_SIZE in pieces (at most 16), a lone READ at a quarter of it, 0 = never; the
 * engine cuts requests as it says and hands the pieces to TCP. Shared memory has no split: whole. */
static void test_split_op(void) {
  start_meta();
  setenv("MC_TCP_SPLIT_SIZE", "1048576", 1);
  transfer_engine_t a = engine("splitter", "MC_SAME_HOST_PATH=0", NULL), b = engine("split-target", NULL, NULL);
  unsetenv("MC_TCP_SPLIT_SIZE");
  REQUIRE(a && b);
  struct mc_transport *tcp = mc_engine_transport(a, "tcp");
  REQUIRE(tcp && tcp->ops->split);
  struct transfer_request w = {OPCODE_WRITE, NULL, 0, 0, MiB}, rd = {OPCODE_READ, NULL, 0, 0, MiB};
  CHECK_EQ(tcp->ops->split(tcp, &w, 1), 1);
  CHECK_EQ(tcp->ops->split(tcp, &rd, 1), 1);
  w.length = rd.length = MiB + 1;
  CHECK_EQ(tcp->ops->split(tcp, &w, 1), 2);
  CHECK_EQ(tcp->ops->split(tcp, &rd, 1), 5); /* alone: quarters */
  CHECK_EQ(tcp->ops->split(tcp, &rd, 2), 2);
  w.length = 64 * MiB;
  CHECK_EQ(tcp->ops->split(tcp, &w, 4), 16);
  struct mc_transport *shm = mc_engine_transport(b, "shm");
  REQUIRE(shm);
  CHECK(shm->ops->split == NULL);

  uint64_t len = 4 * MiB + 3;
  uint8_t *src = malloc(len), *dst = malloc(len);
  REQUIRE(registerLocalMemory(a, src, len, "cpu:0", 1) == 0 && registerLocalMemory(b, dst, len, "cpu:0", 1) == 0);
  for (uint64_t i = 0; i < len; i++) src[i] = (uint8_t)(i * 7 + 1);
  segment_id_t s = openSegment(a, mc_te_local_segment_name(b));
  REQUIRE(mc_te_segment_path(a, s) && !strcmp(mc_te_segment_path(a, s), "tcp"));
  spy_on(tcp);
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, s, (uint64_t)(uintptr_t)dst, len), STATUS_COMPLETED);
  CHECK_EQ(spy_slices, 5);
  CHECK_EQ(spy_bytes, len);
  CHECK(spy_max <= MiB + 3);
  spy_slices = spy_bytes = 0;
  CHECK_EQ(mt_xfer(a, OPCODE_WRITE, src, s, (uint64_t)(uintptr_t)dst, MiB), STATUS_COMPLETED);
  CHECK_EQ(spy_slices, 1);
  spy_off(tcp);
  CHECK(!memcmp(src, dst, len));

  /* the same request through shared memory goes whole */
  transfer_engine_t c = engine("split-shm", NULL, NULL);
  REQUIRE(c);
  REQUIRE(registerLocalMemory(c, src, len, "cpu:0", 1) == 0);
  segment_id_t sc = openSegment(c, mc_te_local_segment_name(b));
  CHECK_STR(mc_te_segment_path(c, sc), "shm");
  struct mc_transport *cshm = mc_engine_transport(c, "shm");
  REQUIRE(cshm);
  memset(dst, 0, len);
  spy_on(cshm);
  CHECK_EQ(mt_xfer(c, OPCODE_WRITE, src, sc, (uint64_t)(uintptr_t)dst, len), STATUS_COMPLETED);
  CHECK_EQ(spy_slices, 1);
  CHECK_EQ(spy_bytes, len);
  spy_off(cshm);
  CHECK(!memcmp(src, dst, len));
  destroyTransferEngine(c);
  destroyTransferEngine(a);
  destroyTransferEngine(b);
  free(src);
  free(dst);
}

/* showLinks' JSON form goes through jansson: a name with quotes and backslashes comes back whole. */
static void test_show_links_json(void) {
  start_meta();
  transfer_engine_t a = engine("q\"uote\\back", NULL, NULL), b = engine("plain", NULL, NULL);
  REQUIRE(a && b);
  REQUIRE(openSegment(a, mc_te_local_segment_name(b)) > 0);
  char links[1024];
  CHECK_EQ(showLinks(a, links, sizeof(links), 1), 0);
  json_t *j = json_loads(links, 0, NULL);
  CHECK(j != NULL);
  CHECK_STR(json_string_value(json_object_get(j, "segment")), mc_te_local_segment_name(a));
  json_t *l = json_array_get(json_object_get(j, "links"), 0);
  CHECK_STR(json_string_value(json_object_get(l, "name")), mc_te_local_segment_name(b));
  CHECK(json_is_integer(json_object_get(l, "id")) && json_is_string(json_object_get(l, "path")));
  json_decref(j);
  destroyTransferEngine(a);
  destroyTransferEngine(b);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  static const struct mc_test_case cases[] = {
      TEST_CASE(test_table_order),   TEST_CASE(test_choice_order), TEST_CASE(test_same_host_path_off),
      TEST_CASE(test_rdma_fallback), TEST_CASE(test_split_op), TEST_CASE(test_show_links_json),
  };
  return mc_test_run(cases, (int)(sizeof(cases) / sizeof(cases[0])), argc, argv);
}
