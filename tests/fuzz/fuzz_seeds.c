/* Writes the binary seed inputs of the fuzz targets (the text ones are committed as they are):
 *   fuzz_seeds OUTDIR   -> files in OUTDIR/master, OUTDIR/dataport, OUTDIR/ctrl, OUTDIR/snapshot, OUTDIR/witness
 *                          and OUTDIR/dummy
 * Bodies are built with the protocol's own encoders, so the seeds stay valid requests when a record
 * changes. Run it and commit what changed under tests/fuzz/corpus (docs/testing.md, "Fuzzing"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "standalone/wire.h"
#include "common/alloc.h"
#include "fuzz_common.h"
#include "master_core/holder_feed.h"
#include "master/master_int.h"
#include "mooncake/store.h"
#include "proto/proto.h"
#include "net/codec.h"

static const char *outdir;

static void save(const char *target, const char *name, const struct mc_wbuf *w) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", outdir, target);
  if (mkdir(path, 0755) && errno != EEXIST) perror(path), exit(1);
  snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(w->p, 1, w->len, f) != w->len || fclose(f)) perror(path), exit(1);
}

/* One seed: the arguments (expressions) build it into w, emptied first. */
#define SEED(target, name, ...) \
  do {                          \
    w.len = 0;                  \
    __VA_ARGS__;                \
    save(target, name, &w);     \
  } while (0)

/* ---------------------------------------------------------------- master: frames of dispatch calls */

static const struct mc_uuid C1 = {0x4fa5a5a5a5a54000ull, 1}, C2 = {0x4fa5a5a5a5a54000ull, 2};

static void frame(struct mc_wbuf *w, uint8_t op, const struct mc_wbuf *body) {
  mc_w_u8(w, op);
  mc_w_u8(w, (uint8_t)body->len), mc_w_u8(w, (uint8_t)(body->len >> 8));
  mc_w_bytes_raw(w, body->p, body->len);
}

/* A frame whose body gets the previous reply's first 8 bytes at `at` (fuzz_master.c). */
static void frame_patch(struct mc_wbuf *w, uint8_t op, uint8_t at, const struct mc_wbuf *body) {
  mc_w_u8(w, op | 0x80);
  mc_w_u8(w, at);
  mc_w_u8(w, (uint8_t)body->len), mc_w_u8(w, (uint8_t)(body->len >> 8));
  mc_w_bytes_raw(w, body->p, body->len);
}

static struct mc_segment_rec seg(uint64_t id, const char *name, const char *probe) {
  return (struct mc_segment_rec){.id = {0x5e65e65e00000000ull, id}, .name = (char *)name, .base = 0x10000000,
                                 .size = 1 << 24, .te_endpoint = (char *)name, .protocol = "tcp", .zone = "z1",
                                 .host_id = "host-a", .probe_addr = (char *)probe};
}

static struct mc_put_config put_cfg(uint32_t replicas) {
  return (struct mc_put_config){.replica_num = replicas, .soft_pin_ttl_ms = -1, .writer_host_id = "host-a",
                                .writer_zone = "z1"};
}

/* Appends one request frame whose body the arguments build into b (emptied first); an expression. */
#define REQ(w, op, ...) \
  ({                    \
    b.len = 0;          \
    __VA_ARGS__;        \
    frame(w, op, &b);   \
  })

static void mount(struct mc_wbuf *w, struct mc_uuid client, uint64_t id, const char *name, const char *probe) {
  struct mc_wbuf b = {0};
  struct mc_segment_rec s = seg(id, name, probe);
  mc_put_segment(&b, &s), mc_put_uuid(&b, client);
  frame(w, MC_OP_MOUNT_SEGMENT, &b);
  mc_w_free(&b);
}

static void put(struct mc_wbuf *w, uint8_t start, uint8_t end, const char *key, uint64_t len) {
  struct mc_wbuf b = {0};
  struct mc_put_config pc = put_cfg(1);
  mc_put_uuid(&b, C1), mc_w_str(&b, key), mc_w_u64(&b, len), mc_put_config(&b, &pc);
  frame(w, start, &b);
  b.len = 0;
  mc_put_uuid(&b, C1), mc_w_str(&b, key), mc_w_u8(&b, MC_REPLICA_ALL);
  frame(w, end, &b);
  mc_w_free(&b);
}

static void keys(struct mc_wbuf *b, int n, const char *prefix) {
  mc_w_u32(b, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    char k[64];
    snprintf(k, sizeof(k), "%s%d", prefix, i);
    mc_w_str(b, k);
  }
}

static void master_seeds(void) {
  struct mc_wbuf w = {0}, b = {0};
  struct mc_put_config pc = put_cfg(1), pc2 = put_cfg(2);
  struct mc_segment_rec s2[2] = {seg(3, "127.0.0.1:30003", ""), seg(4, "127.0.0.1:30004", "")};
  const struct mc_wbuf none = {0};

  SEED("master", "service_ready", frame(&w, MC_OP_SERVICE_READY, &none));
  SEED("master", "unknown_ops", frame(&w, 0, &none), frame(&w, 7, &none), frame(&w, 64, &none), frame(&w, 127, &none));
  SEED("master", "ping", REQ(&w, MC_OP_PING, mc_put_uuid(&b, C1)));
  SEED("master", "mount_put_get", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "key-1", 4096), REQ(&w, MC_OP_GET_REPLICA_LIST, mc_w_str(&b, "key-1")),
       REQ(&w, MC_OP_EXIST_KEY, mc_w_str(&b, "key-1")), REQ(&w, MC_OP_REMOVE, mc_w_str(&b, "key-1"), mc_w_u8(&b, 1)));
  SEED("master", "put_revoke", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_REVOKE, "key-r", 100));
  SEED("master", "upsert", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_UPSERT_START, MC_OP_UPSERT_END, "key-u", 512), put(&w, MC_OP_UPSERT_START, MC_OP_UPSERT_REVOKE, "key-u", 1024),
       put(&w, MC_OP_UPSERT_START, MC_OP_UPSERT_END, "key-u", 512));
  SEED("master", "batch_put", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_BATCH_PUT_START, mc_put_uuid(&b, C1), mc_w_u32(&b, 2), mc_w_str(&b, "b0"), mc_w_u64(&b, 64),
           mc_w_str(&b, "b1"), mc_w_u64(&b, 8192), mc_put_config(&b, &pc)),
       REQ(&w, MC_OP_BATCH_PUT_END, mc_put_uuid(&b, C1), keys(&b, 1, "b"), mc_w_u8(&b, MC_REPLICA_ALL)),
       REQ(&w, MC_OP_BATCH_PUT_REVOKE, mc_put_uuid(&b, C1), mc_w_u32(&b, 1), mc_w_str(&b, "b1"), mc_w_u8(&b, 0)),
       REQ(&w, MC_OP_BATCH_GET_REPLICA_LIST, keys(&b, 3, "b")), REQ(&w, MC_OP_BATCH_EXIST_KEY, keys(&b, 3, "b")),
       REQ(&w, MC_OP_BATCH_REMOVE, keys(&b, 2, "b"), mc_w_u8(&b, 0)));
  SEED("master", "batch_upsert", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_BATCH_UPSERT_START, mc_put_uuid(&b, C1), mc_w_u32(&b, 2), mc_w_str(&b, "u0"), mc_w_u64(&b, 64),
           mc_w_str(&b, "u1"), mc_w_u64(&b, 128), mc_put_config(&b, &pc)),
       REQ(&w, MC_OP_BATCH_UPSERT_END, mc_put_uuid(&b, C1), keys(&b, 1, "u"), mc_w_u8(&b, MC_REPLICA_ALL)),
       REQ(&w, MC_OP_BATCH_UPSERT_REVOKE, mc_put_uuid(&b, C1), mc_w_u32(&b, 1), mc_w_str(&b, "u1"), mc_w_u8(&b, 0)));
  SEED("master", "two_replicas", mount(&w, C1, 1, "127.0.0.1:30001", ""), mount(&w, C2, 2, "127.0.0.1:30002", ""),
       b = (struct mc_wbuf){0},
       REQ(&w, MC_OP_PUT_START, mc_put_uuid(&b, C1), mc_w_str(&b, "r2"), mc_w_u64(&b, 1000), mc_put_config(&b, &pc2)),
       REQ(&w, MC_OP_PUT_END, mc_put_uuid(&b, C1), mc_w_str(&b, "r2"), mc_w_u8(&b, MC_REPLICA_MEMORY)),
       REQ(&w, MC_OP_UNMOUNT_SEGMENT, mc_put_uuid(&b, seg(2, "", "").id), mc_put_uuid(&b, C2)),
       REQ(&w, MC_OP_GET_REPLICA_LIST, mc_w_str(&b, "r2")));
  /* copy and move tasks: create, query, the executor's fetch and report (its id's counter part is 1 in a fresh
   * master; the view_version part comes from CREATE's reply), remove under the task, a move */
  SEED("master", "tasks", mount(&w, C1, 1, "127.0.0.1:30001", ""), mount(&w, C2, 2, "127.0.0.1:30002", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "t1", 4096), put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "t2", 4096),
       REQ(&w, MC_OP_CREATE_COPY_TASK, mc_w_str(&b, "t1"), mc_w_u32(&b, 1), mc_w_str(&b, "127.0.0.1:30002")),
       (b.len = 0, mc_w_u64(&b, 0), mc_w_u64(&b, 1), frame_patch(&w, MC_OP_QUERY_TASK, 0, &b)),
       REQ(&w, MC_OP_REMOVE, mc_w_str(&b, "t1"), mc_w_u8(&b, 1)),
       REQ(&w, MC_OP_FETCH_TASKS, mc_put_uuid(&b, C2), mc_w_u32(&b, 16)),
       REQ(&w, MC_OP_CREATE_MOVE_TASK, mc_w_str(&b, "t2"), mc_w_str(&b, "127.0.0.1:30001"), mc_w_str(&b, "127.0.0.1:30002")),
       (b.len = 0, mc_put_uuid(&b, C2), mc_w_u64(&b, 0), mc_w_u64(&b, 2), mc_w_i32(&b, 0), mc_w_str(&b, "ok"),
        frame_patch(&w, MC_OP_MARK_TASK_COMPLETE, 16, &b)),
       REQ(&w, MC_OP_FETCH_TASKS, mc_put_uuid(&b, C2), mc_w_u32(&b, 16)),
       REQ(&w, MC_OP_MARK_TASK_COMPLETE, mc_put_uuid(&b, C2), mc_put_uuid(&b, C1), mc_w_i32(&b, -800), mc_w_str(&b, "")),
       REQ(&w, MC_OP_GET_REPLICA_LIST, mc_w_str(&b, "t2")));
  SEED("master", "regex_get", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "re-a1", 64), put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "re-b2", 64),
       REQ(&w, MC_OP_GET_REPLICA_LIST_BY_REGEX, mc_w_str(&b, "^re-[a-z][0-9]$")));
  SEED("master", "regex_remove", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "re-a1", 64),
       REQ(&w, MC_OP_REMOVE_BY_REGEX, mc_w_str(&b, "(a|b)+1"), mc_w_u8(&b, 1)),
       REQ(&w, MC_OP_REMOVE_BY_REGEX, mc_w_str(&b, "x{1,3}"), mc_w_u8(&b, 0)));
  SEED("master", "regex_backref", REQ(&w, MC_OP_GET_REPLICA_LIST_BY_REGEX, mc_w_str(&b, "(a)\\1")));
  SEED("master", "regex_bad", REQ(&w, MC_OP_GET_REPLICA_LIST_BY_REGEX, mc_w_str(&b, "([")),
       REQ(&w, MC_OP_REMOVE_BY_REGEX, mc_w_str(&b, "*"), mc_w_u8(&b, 0)));
  SEED("master", "remove_all", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "t\x1fk", 64), REQ(&w, MC_OP_REMOVE_ALL, mc_w_u8(&b, 0)),
       REQ(&w, MC_OP_REMOVE_ALL, mc_w_u8(&b, 1), mc_w_str(&b, "t\x1f")));
  SEED("master", "remount", REQ(&w, MC_OP_REMOUNT_SEGMENTS, mc_w_u32(&b, 2), mc_put_segment(&b, &s2[0]), mc_put_segment(&b, &s2[1]),
                      mc_put_uuid(&b, C1)),
       REQ(&w, MC_OP_PING, mc_put_uuid(&b, C1)), REQ(&w, MC_OP_QUERY_SEGMENTS));
  SEED("master", "graceful_unmount", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_GRACEFUL_UNMOUNT, mc_put_uuid(&b, seg(1, "", "").id), mc_put_uuid(&b, C1), mc_w_u64(&b, 5)),
       REQ(&w, MC_OP_QUERY_SEGMENTS));
  SEED("master", "name_held", mount(&w, C1, 1, "127.0.0.1:30001", "127.0.0.1:1"),
       mount(&w, C2, 2, "127.0.0.1:30001", "127.0.0.1:1"), REQ(&w, MC_OP_QUERY_SEGMENTS));
  SEED("master", "extent", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_RESERVE_EXTENT, mc_put_uuid(&b, C1), mc_w_u64(&b, 4096), mc_w_u64(&b, 1 << 20), mc_put_config(&b, &pc)),
       b.len = 0, mc_put_uuid(&b, C1), mc_w_u64(&b, 0), mc_w_str(&b, "ext-k"), mc_w_u64(&b, 0), mc_w_u64(&b, 4096),
       mc_w_u8(&b, 0), mc_w_i64(&b, -1), mc_w_u8(&b, 0), frame_patch(&w, MC_OP_COMMIT_PUT, 16, &b),
       REQ(&w, MC_OP_EXIST_KEY, mc_w_str(&b, "ext-k")));
  SEED("master", "extent_batch", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_RESERVE_EXTENT, mc_put_uuid(&b, C1), mc_w_u64(&b, 64), mc_w_u64(&b, 65536), mc_put_config(&b, &pc)),
       b.len = 0, mc_put_uuid(&b, C1), mc_w_u64(&b, 0), mc_w_u8(&b, 1), mc_w_i64(&b, 1000), mc_w_u8(&b, 0), mc_w_u32(&b, 2),
       mc_w_str(&b, "e0"), mc_w_u64(&b, 0), mc_w_u64(&b, 64), mc_w_str(&b, "e1"), mc_w_u64(&b, 64), mc_w_u64(&b, 64),
       frame_patch(&w, MC_OP_BATCH_COMMIT_PUT, 16, &b));
  SEED("master", "extent_release", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_RESERVE_EXTENT, mc_put_uuid(&b, C1), mc_w_u64(&b, 64), mc_w_u64(&b, 4096), mc_put_config(&b, &pc)),
       b.len = 0, mc_put_uuid(&b, C1), mc_w_u64(&b, 0), frame_patch(&w, MC_OP_RELEASE_EXTENT, 16, &b));
  SEED("master", "replica_clear", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       put(&w, MC_OP_PUT_START, MC_OP_PUT_END, "c0", 64),
       REQ(&w, MC_OP_BATCH_REPLICA_CLEAR, mc_put_uuid(&b, C1), keys(&b, 2, "c"), mc_w_str(&b, "")),
       REQ(&w, MC_OP_BATCH_REPLICA_CLEAR, mc_put_uuid(&b, C1), keys(&b, 1, "c"), mc_w_str(&b, "127.0.0.1:30001")));
  SEED("master", "client_stats", REQ(&w, MC_OP_REPORT_CLIENT_STATS, {
         struct mc_client_stats st = {.client = C1, .lat = {[2] = 5}, .lat_sum_us = 17, .hits = 3, .misses = 1};
         mc_put_client_stats(&b, &st);
       }));
  SEED("master", "report_ssd", mount(&w, C1, 1, "127.0.0.1:30001", ""),
       REQ(&w, MC_OP_REPORT_SSD, mc_put_uuid(&b, C1), mc_w_u64(&b, 1 << 20), mc_w_u64(&b, 8192), mc_w_u64(&b, 2)));
  mc_w_free(&w);
  mc_w_free(&b);
}

/* ---------------------------------------------------------------- data port: request streams */

/* A request header; rel: the address is an offset into the target's read-write bytes (relocated). */
static void dp_hdr(struct mc_wbuf *w, uint8_t op, uint64_t len, uint64_t addr, int rel) {
  mc_w_u64(w, len);
  mc_w_u64(w, rel ? FZ_DP_PAGE + addr : addr);
  mc_w_u8(w, op);
  mc_w_u8(w, rel ? 1 : 0);
  for (int i = 0; i < 6; i++) mc_w_u8(w, 0);
}

static void dp_write(struct mc_wbuf *w, uint64_t off, uint64_t len) {
  dp_hdr(w, 0x81, len, off, 1);
  for (uint64_t i = 0; i < len; i++) mc_w_u8(w, (uint8_t)('a' + i % 26));
}

static void dataport_seeds(void) {
  struct mc_wbuf w = {0};
  SEED("dataport", "write_a", dp_write(&w, FZ_DP_A_OFF, 16));
  SEED("dataport", "read_a", dp_hdr(&w, 0x80, 64, FZ_DP_A_OFF + 100, 1));
  SEED("dataport", "write_read_a", dp_write(&w, FZ_DP_A_OFF + 8, 32), dp_hdr(&w, 0x80, 32, FZ_DP_A_OFF + 8, 1));
  SEED("dataport", "write_whole_b", dp_write(&w, FZ_DP_B_OFF, FZ_DP_B_LEN));
  SEED("dataport", "read_whole_a", dp_hdr(&w, 0x80, FZ_DP_A_LEN, FZ_DP_A_OFF, 1));
  SEED("dataport", "write_over_a_end", dp_write(&w, FZ_DP_A_OFF + FZ_DP_A_LEN - 8, 16));
  SEED("dataport", "read_over_a_end", dp_hdr(&w, 0x80, 16, FZ_DP_A_OFF + FZ_DP_A_LEN - 8, 1));
  SEED("dataport", "write_before_a", dp_write(&w, FZ_DP_A_OFF - 1, 2));
  SEED("dataport", "read_before_a", dp_hdr(&w, 0x80, 9, FZ_DP_A_OFF - 1, 1));
  SEED("dataport", "write_private", dp_write(&w, FZ_DP_C_OFF, 8));
  SEED("dataport", "read_private", dp_hdr(&w, 0x80, 8, FZ_DP_C_OFF, 1));
  SEED("dataport", "read_over_b_end", dp_hdr(&w, 0x80, 2, FZ_DP_RW_LEN - 1, 1));
  SEED("dataport", "write_over_b_end", dp_write(&w, FZ_DP_RW_LEN - 4, 8));
  SEED("dataport", "zero_length", dp_hdr(&w, 0x80, 0, FZ_DP_A_OFF, 1), dp_hdr(&w, 0x81, 0, FZ_DP_B_OFF, 1));
  SEED("dataport", "absolute_addr", dp_hdr(&w, 0x81, 4, 0x10000, 0), mc_w_u32(&w, 0xdeadbeef), dp_hdr(&w, 0x80, 8, 0, 0));
  SEED("dataport", "huge_write_short", dp_hdr(&w, 0x81, 1ull << 40, FZ_DP_A_OFF, 1), mc_w_u32(&w, 1));
  SEED("dataport", "wrapping", dp_hdr(&w, 0x80, 16, UINT64_MAX - 7, 0), dp_hdr(&w, 0x81, UINT64_MAX, FZ_DP_A_OFF, 1));
  SEED("dataport", "v1_framing", dp_hdr(&w, 0x01, 8, FZ_DP_A_OFF, 1), mc_w_u64(&w, 0));
  SEED("dataport", "bad_opcode", dp_hdr(&w, 0x82, 8, FZ_DP_A_OFF, 1));
  SEED("dataport", "short_header", mc_w_u64(&w, 8), mc_w_u32(&w, 0));
  SEED("dataport", "many_reads", {
    for (int i = 0; i < 20; i++) dp_hdr(&w, 0x80, 32, FZ_DP_B_OFF + 40u * (unsigned)i, 1);
  });
  SEED("dataport", "many_writes", {
    for (int i = 0; i < 20; i++) dp_write(&w, FZ_DP_A_OFF + 50u * (unsigned)i, 24);
    dp_hdr(&w, 0x80, 8, FZ_DP_A_OFF, 1);
  });
  SEED("dataport", "mixed_reject", dp_write(&w, FZ_DP_A_OFF, 8), dp_write(&w, FZ_DP_C_OFF - 4, 8), dp_hdr(&w, 0x80, 8, FZ_DP_A_OFF, 1),
     dp_hdr(&w, 0x80, 8, FZ_DP_C_OFF, 1), dp_hdr(&w, 0x80, 8, FZ_DP_B_OFF, 1));
  mc_w_free(&w);
}

/* ---------------------------------------------------------------- control RPC: one connection's bytes */

static void ctrl_frame(struct mc_wbuf *w, uint64_t len, uint8_t type, const char *json) {
  mc_w_u64(w, len);
  mc_w_u8(w, type);
  mc_w_bytes_raw(w, json, strlen(json));
}

static void ctrl_seeds(void) {
  struct mc_wbuf w = {0};
  static const struct {
    const char *name, *json;
    uint8_t type;
  } ok[] = {
      {"metadata", "{}", 1},
      {"probe", "{}", 3},
      {"connection", "{\"local_nic_path\":\"x\",\"peer_nic_path\":\"y\",\"qp_num\":[1,2]}", 0},
      {"notify", "{\"name\":\"from-peer\",\"notify_msg\":\"hello\"}", 2},
      {"notify_malformed", "{\"name\":1,\"notify_msg\":null}", 2},
      {"notify_not_json", "name=x", 2},
      {"notify_unicode", "{\"name\":\"\\u00e9\\ud83d\\ude00\",\"notify_msg\":\"\\u0000x\"}", 2},
  };
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    w.len = 0;
    ctrl_frame(&w, strlen(ok[i].json) + 1, ok[i].type, ok[i].json);
    save("ctrl", ok[i].name, &w);
  }
  w.len = 0, ctrl_frame(&w, 3, 1, "{}{}{}"), save("ctrl", "trailing_bytes", &w);
  w.len = 0, ctrl_frame(&w, 40, 2, "{\"name\":\"a\""), save("ctrl", "truncated_body", &w);
  w.len = 0, ctrl_frame(&w, 0, 1, "{}"), save("ctrl", "zero_length", &w);
  w.len = 0, ctrl_frame(&w, UINT64_MAX, 1, "{}"), save("ctrl", "huge_length", &w);
  w.len = 0, ctrl_frame(&w, 7, 9, "\"ab\"}"), save("ctrl", "legacy_untyped", &w);
  mc_w_free(&w);
}

/* ---------------------------------------------------------------- snapshot: file bodies (fuzz_snapshot.c) */

/* The body of a snapshot after its magic and version: next seq, created, segments, entries (in the
 * layout of format version `version`: from 2 on, every entry ends with its key group). */
static void snap_body(struct mc_wbuf *w, uint32_t version, uint32_t nsegs, uint64_t nents, int lie) {
  mc_w_u64(w, 1000), mc_w_u64(w, 1765000000000ull);
  mc_w_u32(w, nsegs);
  for (uint32_t i = 0; i < nsegs; i++) {
    mc_put_uuid(w, (struct mc_uuid){0x5a5a5a5a00000000ull, i + 1});
    mc_w_u64(w, 0x10000000ull * (i + 1)), mc_w_u64(w, 1 << 20);
    mc_w_str(w, i ? "127.0.0.1:30002" : "127.0.0.1:30001");
  }
  mc_w_u64(w, lie ? nents * 1000 : nents);
  for (uint64_t e = 0; e < nents; e++) {
    char key[32];
    int kl = snprintf(key, sizeof(key), "key-%llu", (unsigned long long)(e % 5)); /* some keys twice */
    mc_put_uuid(w, (struct mc_uuid){0x5a5a5a5a00000000ull, 1 + e % (nsegs + 1)}); /* some segment not listed */
    mc_w_blob(w, key, (uint32_t)kl);
    mc_w_u64(w, (e * 4096) % (1 << 20) + (e == 3 ? 100 : 0)); /* entry 3 overlaps entry 4's space */
    mc_w_u64(w, e == 6 ? (2u << 20) : 4096), mc_w_u64(w, 4000); /* entry 6 is larger than its segment */
    mc_w_u8(w, (uint8_t)(e & 1)), mc_w_u64(w, e % 3 ? 0 : 60000);
    if (version >= 2) mc_w_str(w, e % 2 ? "group-a" : "");
  }
}

static void snapshot_seeds(void) {
  struct mc_wbuf w = {0};
  /* byte 0: bit 0 raw file, bit 1 version in the next 4 bytes, bit 2 restore into a master */
  const uint32_t v = MC_SNAPSHOT_VERSION;
  SEED("snapshot", "restore_two_segments", mc_w_u8(&w, 4), snap_body(&w, v, 2, 12, 0));
  SEED("snapshot", "load_only", mc_w_u8(&w, 0), snap_body(&w, v, 3, 8, 0));
  SEED("snapshot", "empty", mc_w_u8(&w, 4), snap_body(&w, v, 0, 0, 0));
  SEED("snapshot", "lying_count", mc_w_u8(&w, 4), snap_body(&w, v, 2, 4, 1));
  SEED("snapshot", "version_1", mc_w_u8(&w, 2 | 4), mc_w_u32(&w, 1), snap_body(&w, 1, 2, 12, 0));
  SEED("snapshot", "version_3", mc_w_u8(&w, 2), mc_w_u32(&w, 3), snap_body(&w, 3, 1, 2, 0));
  SEED("snapshot", "version_0", mc_w_u8(&w, 2), mc_w_u32(&w, 0), snap_body(&w, 0, 1, 2, 0));
  SEED("snapshot", "raw_no_checksum", mc_w_u8(&w, 1), mc_w_bytes_raw(&w, "MCSNAP\0\1", 8), mc_w_u32(&w, 1),
       snap_body(&w, 1, 1, 2, 0));
  mc_w_free(&w);
}

/* ---------------------------------------------------------------- witness: reply tails (fuzz_witness.c) */

/* A witness block: view_version, durable_seq, n records of the holder-index layout from seq first on. */
static void wit_block(struct mc_wbuf *w, uint64_t view, uint64_t durable, uint32_t n, uint64_t first, int lie) {
  mc_w_u64(w, view), mc_w_u64(w, durable);
  mc_w_u32(w, lie ? n * 1000 : n);
  for (uint32_t i = 0; i < n; i++) {
    char key[32];
    int kl = snprintf(key, sizeof(key), "key-%u", i % 7);
    mc_hidx_encode(w, first + i, i % 5 ? MC_HIDX_PUT : MC_HIDX_DROP, key, (uint32_t)kl,
                   (struct mc_uuid){0x5a5a5a5a00000000ull, 1 + i % 2}, 4096ull * i, 4096, 4000, (uint8_t)(i & 1),
                   i % 3 ? 0 : 60000, i % 4 == 1 ? "group-a" : NULL);
  }
}

static void witness_seeds(void) {
  struct mc_wbuf w = {0};
  SEED("witness", "one_block", wit_block(&w, 1, 10, 8, 11, 0));
  SEED("witness", "pruned_by_next", wit_block(&w, 1, 10, 8, 11, 0), wit_block(&w, 1, 16, 4, 19, 0));
  SEED("witness", "new_master", wit_block(&w, 1, 10, 8, 11, 0), wit_block(&w, 2, 30, 4, 31, 0));
  SEED("witness", "all_durable", wit_block(&w, 3, 100, 6, 50, 0));
  SEED("witness", "lying_count", wit_block(&w, 1, 0, 3, 1, 1));
  SEED("witness", "empty", wit_block(&w, 1, 0, 0, 1, 0));
  mc_w_free(&w);
}

/* ---------------------------------------------------------------- dummy: request bodies of standalone mode (and a reply) */

/* One input of fuzz_dummy: u16 op, u16 flags, u8 log2 of the shared size, the body. */
static void dummy_seed(const char *name, uint16_t op, uint16_t flags, uint8_t shared_log2, struct mc_dbuf *b) {
  struct mc_wbuf w = {0};
  mc_w_bytes_raw(&w, &op, 2);
  mc_w_bytes_raw(&w, &flags, 2);
  mc_w_u8(&w, shared_log2);
  if (b->n) mc_w_bytes_raw(&w, b->p, b->n);
  save("dummy", name, &w);
  mc_w_free(&w);
  b->n = 0;
}

static void dummy_config(struct mc_dbuf *b, uint32_t npref) {
  int32_t z = 0;
  mc_dbuf_u64(b, 2);
  mc_dbuf_put(b, &z, 4);
  mc_dbuf_u64(b, 60000);
  mc_dbuf_put(b, &z, 4);
  mc_dbuf_u32(b, npref);
  for (uint32_t i = 0; i < npref; i++) mc_dbuf_str(b, i ? "10.0.0.2:17000" : "127.0.0.1:16000");
}

/* count keys, each with nb (offset, length[, object offset]) buffers; group ids with groups. */
static void dummy_bufs(struct mc_dbuf *b, uint32_t count, uint32_t nb, int ranged, int groups, uint64_t off) {
  mc_dbuf_u32(b, count);
  for (uint32_t i = 0; i < count; i++) {
    char k[32];
    snprintf(k, sizeof(k), "layer_%u_kv", i);
    mc_dbuf_str(b, k);
    if (groups) mc_dbuf_str(b, i % 2 ? "group_b" : "group_a");
    mc_dbuf_u32(b, nb);
    for (uint32_t j = 0; j < nb; j++) {
      mc_dbuf_u64(b, off + (i * nb + j) * 4096);
      mc_dbuf_u64(b, 4096);
      if (ranged) mc_dbuf_u64(b, j * 4096);
    }
  }
}

static void dummy_keys(struct mc_dbuf *b, uint32_t count) {
  mc_dbuf_u32(b, count);
  for (uint32_t i = 0; i < count; i++) mc_dbuf_str(b, i % 3 ? "key_b" : "key_a");
}

static void dummy_seeds(void) {
  struct mc_dbuf b = {0};
  dummy_config(&b, 1), dummy_bufs(&b, 2, 1, 0, 0, 0), dummy_seed("write", MC_DOP_WRITE, 0, 24, &b);
  dummy_config(&b, 2), dummy_bufs(&b, 3, 2, 0, 1, 0), dummy_seed("write_groups", MC_DOP_WRITE, 0x201, 24, &b);
  dummy_config(&b, 0), dummy_bufs(&b, 1, 1, 0, 0, 0), dummy_seed("write_single", MC_DOP_WRITE, 0x100, 20, &b);
  dummy_bufs(&b, 2, 3, 0, 0, 0), dummy_seed("read_multi", MC_DOP_READ, 0, 24, &b);
  dummy_bufs(&b, 1, 1, 0, 0, (1 << 20) - 100), dummy_seed("read_outside", MC_DOP_READ, 0, 20, &b);
  dummy_keys(&b, 3), dummy_seed("exist", MC_DOP_EXIST, 0, 20, &b);
  dummy_keys(&b, 1), dummy_seed("size", MC_DOP_SIZE, 0, 20, &b);
  mc_dbuf_u32(&b, 1), dummy_keys(&b, 2), dummy_seed("remove", MC_DOP_REMOVE, 0, 20, &b);
  mc_dbuf_u32(&b, 0), mc_dbuf_str(&b, "^layer_[0-9]+"), dummy_seed("remove_regex", MC_DOP_REMOVE_REGEX, 0, 20, &b);
  mc_dbuf_u32(&b, 1), dummy_seed("remove_all", MC_DOP_REMOVE_ALL, 0, 20, &b);
  dummy_seed("health", MC_DOP_HEALTH, 0, 20, &b);
  mc_dbuf_u32(&b, 2), dummy_seed("stats", MC_DOP_STATS, 0, 20, &b);
  dummy_config(&b, 1), mc_dbuf_u32(&b, 2);
  mc_dbuf_str(&b, "layer_0"), mc_dbuf_u64(&b, 8192), mc_dbuf_str(&b, "layer_1"), mc_dbuf_u64(&b, 4096);
  dummy_seed("put_start", MC_DOP_PUT_START, 0, 24, &b);
  dummy_config(&b, 0), mc_dbuf_u32(&b, 1), mc_dbuf_str(&b, "layer_0"), mc_dbuf_u64(&b, 8192);
  mc_dbuf_str(&b, "g"), dummy_seed("put_start_groups", MC_DOP_PUT_START, 0x200, 24, &b);
  dummy_bufs(&b, 2, 2, 1, 0, 0), dummy_seed("put_write", MC_DOP_PUT_WRITE, 0, 24, &b);
  dummy_bufs(&b, 1, 3, 1, 0, 0), dummy_seed("get_read", MC_DOP_GET_READ, 0, 24, &b);
  dummy_bufs(&b, 1, 1, 1, 0, (1 << 16) - 8), dummy_seed("get_read_outside", MC_DOP_GET_READ, 0, 16, &b);
  mc_dbuf_u32(&b, 0), dummy_keys(&b, 2), dummy_seed("put_end", MC_DOP_PUT_END, 0, 20, &b);
  mc_dbuf_u32(&b, 1), dummy_keys(&b, 1), dummy_seed("put_revoke", MC_DOP_PUT_END, 0, 20, &b);
  dummy_keys(&b, 2), dummy_seed("get_start", MC_DOP_GET_START, 0, 20, &b);
  dummy_keys(&b, 2), dummy_seed("get_end", MC_DOP_GET_END, 0, 20, &b);
  mc_dbuf_str(&b, "obj"), mc_dbuf_u32(&b, 2), mc_dbuf_str(&b, "127.0.0.1:16000"), mc_dbuf_str(&b, "10.0.0.2:1");
  dummy_seed("copy_task", MC_DOP_COPY_TASK, 0, 20, &b);
  mc_dbuf_str(&b, "obj"), mc_dbuf_str(&b, "127.0.0.1:16000"), mc_dbuf_str(&b, "10.0.0.2:1");
  dummy_seed("move_task", MC_DOP_MOVE_TASK, 0, 20, &b);
  mc_dbuf_u64(&b, 0x4fa5a5a5a5a54000ull), mc_dbuf_u64(&b, 7), dummy_seed("query_task", MC_DOP_QUERY_TASK, 0, 20, &b);
  dummy_keys(&b, 1), dummy_seed("replica_desc", MC_DOP_REPLICA_DESC, 0, 20, &b);
  /* replies, for the dummy's decoder: two descriptors, and a code */
  mc_replica_desc_t d[2] = {{3, 4096, 0x7f0000001000ull, "127.0.0.1:16000", "127.0.0.1:16000"},
                            {3, 4096, 0x7f0000200000ull, "10.0.0.2:17000", "10.0.0.2:17000"}};
  mc_drep_put_replica_desc(&b, 2, d), dummy_seed("replica_desc_reply", MC_DOP_REPLICA_DESC, FZ_DUMMY_REPLY, 20, &b);
  mc_drep_put_replica_desc(&b, MC_OBJECT_NOT_FOUND, NULL);
  dummy_seed("replica_desc_reply_code", MC_DOP_REPLICA_DESC, FZ_DUMMY_REPLY, 20, &b);
  mc_free(b.p);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  outdir = argv[1];
  master_seeds();
  dataport_seeds();
  ctrl_seeds();
  snapshot_seeds();
  witness_seeds();
  dummy_seeds();
  return 0;
}
