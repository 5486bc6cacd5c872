/* The P2P store (docs/p2p-store.md) with real engines, real processes and real metadata services (our HTTP
 * metadata server, etcd): every operation's semantics and error, hostile records, concurrent fetchers
 * racing on the record (compare-and-swap loses no holder), a dead holder skipped and expired, checksum
 * mismatches, resume. Bytes are checked one by one. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <zlib.h>

#include "lib/proc.h"
#include "lib/test.h"
#include "meta/metadata.h"
#include "meta/metadata_server.h"
#include "mooncake/p2p_store.h"
#include "p2p/record.h"

#define MIB (1ull << 20)

/* ---- helpers ---- */

static uint8_t pattern(uint64_t i, unsigned seed) { return (uint8_t)((i >> 9) * 131 + i * 7 + seed); }

static uint8_t *filled(uint64_t size, unsigned seed) {
  uint8_t *b = malloc(size);
  for (uint64_t i = 0; i < size; i++) b[i] = pattern(i, seed);
  return b;
}

/* The first offset where b differs from the pattern, or size. */
static uint64_t first_bad(const uint8_t *b, uint64_t size, unsigned seed) {
  for (uint64_t i = 0; i < size; i++)
    if (b[i] != pattern(i, seed)) return i;
  return size;
}

static mc_p2p_store_t *store(const char *conn) {
  char name[64];
  snprintf(name, sizeof(name), "127.0.0.1:%d", mc_tp_free_port());
  mc_p2p_store_t *s = mc_p2p_store_new(conn, name, "");
  CHECK(s != NULL);
  return s;
}

/* The record of name as JSON (NULL when absent). */
static json_t *record(const char *conn, const char *name) {
  struct mc_meta *m = NULL;
  if (mc_meta_open(conn, &m) || !m) return NULL;
  char key[512], *v = NULL;
  snprintf(key, sizeof(key), "mooncake/checkpoint/%s", name);
  json_t *o = mc_meta_get(m, key, &v) ? NULL : json_loads(v, 0, NULL);
  free(v);
  mc_meta_close(m);
  return o;
}

static void put_raw(const char *conn, const char *name, const char *text) {
  struct mc_meta *m = NULL;
  REQUIRE(!mc_meta_open(conn, &m) && m);
  char key[512];
  snprintf(key, sizeof(key), "mooncake/checkpoint/%s", name);
  CHECK_EQ(text ? m->ops->set(m, key, text) : m->ops->remove(m, key), 0);
  mc_meta_close(m);
}

/* How many entries of shard i's list (gold or replica_list) have segment_name seg (NULL: any). */
static int holders(json_t *rec, size_t i, const char *list, const char *seg) {
  json_t *a = json_object_get(json_array_get(json_object_get(rec, "shards"), i), list), *h;
  size_t k;
  int n = 0;
  json_array_foreach(a, k, h) n += !seg || !strcmp(json_string_value(json_object_get(h, "segment_name")), seg);
  return n;
}

static size_t nshards(json_t *rec) { return json_array_size(json_object_get(rec, "shards")); }

/* 1 when every shard of the record has exactly n replica entries (n = 0: the key may be gone). */
static int replicas_everywhere(const char *conn, const char *name, int n) {
  json_t *r = record(conn, name);
  int ok = r || !n;
  for (size_t i = 0; r && i < nshards(r); i++) ok &= holders(r, i, "replica_list", NULL) == n;
  json_decref(r);
  return ok;
}

/* The whole text of a file (static copy; empty when unreadable). */
static const char *file_text(const char *path) {
  static char buf[65536];
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return buf;
}

/* Spawns this binary running case `which` with the given environment (NULL-terminated). */
static pid_t spawn_child(const char *which, char **env, const char *log) {
  static char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  char *argv[] = {self, (char *)which, NULL};
  return mc_tp_spawn(argv, env, log);
}

/* ---- children (run as "test_p2p child_*" with MC_P2P_T_* set) ---- */

static uint64_t env_u64(const char *n, uint64_t def) {
  const char *v = getenv(n);
  return v ? strtoull(v, NULL, 10) : def;
}

/* Registers MC_P2P_T_SIZE bytes of pattern MC_P2P_T_SEED as MC_P2P_T_NAME and serves until killed. */
static void child_producer(void) {
  const char *conn = getenv("MC_P2P_T_CONN"), *name = getenv("MC_P2P_T_NAME");
  if (!conn || !name) return;
  uint64_t size = env_u64("MC_P2P_T_SIZE", 0);
  uint8_t *b = filled(size, (unsigned)env_u64("MC_P2P_T_SEED", 1));
  mc_p2p_store_t *s = store(conn);
  void *addrs[] = {b};
  size_t sizes[] = {size};
  REQUIRE(s && mc_p2p_register(s, name, addrs, sizes, 1, env_u64("MC_P2P_T_SHARD", 4 * MIB), "cpu:0", 0) == 0);
  fprintf(stderr, "registered\n");
  mc_tp_sleep_ms(600000);
}

/* Fetches MC_P2P_T_NAME, checks every byte, holds it for MC_P2P_T_HOLD_MS, deletes the replica. Exit code 0
 * only when all went right. */
static void child_fetcher(void) {
  const char *conn = getenv("MC_P2P_T_CONN"), *name = getenv("MC_P2P_T_NAME");
  if (!conn || !name) return;
  uint64_t size = env_u64("MC_P2P_T_SIZE", 0);
  uint8_t *b = calloc(1, size);
  mc_p2p_store_t *s = store(conn);
  void *addrs[] = {b};
  size_t sizes[] = {size};
  long t0 = mc_tp_now_ms();
  int rc = s ? mc_p2p_get_replica(s, name, addrs, sizes, 1) : -100;
  uint64_t bad = first_bad(b, size, (unsigned)env_u64("MC_P2P_T_SEED", 1));
  fprintf(stderr, "fetched rc=%d (%s) in %ld ms, first bad byte %llu of %llu\n", rc, mc_p2p_strerror(rc),
          mc_tp_now_ms() - t0, (unsigned long long)bad, (unsigned long long)size);
  CHECK_EQ(rc, 0);
  CHECK_EQ(bad, size);
  mc_tp_sleep_ms((long)env_u64("MC_P2P_T_HOLD_MS", 0));
  if (!rc) CHECK_EQ(mc_p2p_delete_replica(s, name), 0);
  mc_p2p_store_close(s);
  free(b);
  exit(mc_test_failures ? 1 : 0);
}

/* ---- in one process: every operation and error ---- */

static void api_semantics(const char *conn) {
  mc_p2p_store_t *a = store(conn), *b = store(conn), *c = store(conn);
  REQUIRE(a && b && c);
  CHECK(strchr(mc_p2p_local_server_name(a), ':') != NULL);
  uint64_t size = 10 * MIB + 12345; /* 3 shards of 4 MiB, the last short; then a second buffer */
  uint8_t *src = filled(size, 7), *src2 = filled(MIB, 8);
  void *addrs[] = {src, src2};
  size_t sizes[] = {size, MIB};
  /* register: arguments */
  CHECK_EQ(mc_p2p_register(a, "t/one", addrs, sizes, 0, 4 * MIB, "cpu:0", 0), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_register(a, "t/one", NULL, sizes, 2, 4 * MIB, "cpu:0", 0), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_register(a, "t/one", addrs, sizes, 2, 3 * MIB, "cpu:0", 0), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_register(a, "t/one", addrs, sizes, 2, 8ull << 30, "cpu:0", 0), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_register(a, "", addrs, sizes, 2, 4 * MIB, "cpu:0", 0), MC_P2P_INVALID_ARGUMENT);
  CHECK(record(conn, "t/one") == NULL); /* nothing published by a refused call */
  CHECK_EQ(mc_p2p_register(a, "t/one", addrs, sizes, 2, 4 * MIB, "cpu:0", 0), 0);
  CHECK_EQ(mc_p2p_register(a, "t/one", addrs, sizes, 2, 4 * MIB, "cpu:0", 0), MC_P2P_PAYLOAD_OPENED);
  /* the same range again under another name: counted, fine; an overlapping different range: refused */
  CHECK_EQ(mc_p2p_register(a, "t/same", addrs, sizes, 1, 4 * MIB, NULL, 0), 0);
  void *inner[] = {src + 4096};
  size_t inner_size[] = {MIB};
  CHECK_EQ(mc_p2p_register(a, "t/overlap", inner, inner_size, 1, 4 * MIB, NULL, 0), MC_P2P_ADDRESS_OVERLAPPED);
  CHECK(record(conn, "t/overlap") == NULL);
  /* another node: the key exists */
  uint8_t *other = filled(MIB, 9);
  void *oa[] = {other};
  size_t os[] = {MIB};
  CHECK_EQ(mc_p2p_register(b, "t/one", oa, os, 1, 4 * MIB, NULL, 0), MC_P2P_ALREADY_EXISTS);
  json_t *r = record(conn, "t/one");
  REQUIRE(r != NULL);
  CHECK_EQ(json_integer_value(json_object_get(r, "size")), (json_int_t)(size + MIB));
  CHECK_EQ(json_integer_value(json_object_get(r, "max_shard_size")), (json_int_t)(4 * MIB));
  CHECK_EQ(nshards(r), 4);
  CHECK(json_is_null(json_object_get(json_array_get(json_object_get(r, "shards"), 0), "replica_list")));
  for (size_t i = 0; i < nshards(r); i++) CHECK_EQ(holders(r, i, "gold", NULL), 1);
  json_decref(r);
  /* list */
  mc_p2p_payload_info_t *l;
  size_t n;
  CHECK_EQ(mc_p2p_list(c, "t/", &l, &n), 0);
  CHECK_EQ(n, 2);
  for (size_t i = 0; i < n; i++) {
    int one = !strcmp(l[i].name, "t/one");
    CHECK(one || !strcmp(l[i].name, "t/same"));
    CHECK_EQ(l[i].size_count, one ? 2 : 1);
    CHECK_EQ(l[i].total_size, one ? size + MIB : size);
    CHECK_EQ(l[i].size_list[0], size);
    CHECK_EQ(l[i].max_shard_size, 4 * MIB);
  }
  mc_p2p_list_free(l, n);
  CHECK_EQ(mc_p2p_list(c, "t/on", &l, &n), 0);
  CHECK_EQ(n, 1);
  mc_p2p_list_free(l, n);
  CHECK_EQ(mc_p2p_list(c, "nothing", &l, &n), 0);
  CHECK_EQ(n, 0);
  mc_p2p_list_free(l, n);
  /* get_replica: errors, then a fetch */
  uint8_t *dst = calloc(1, size), *dst2 = calloc(1, MIB);
  void *da[] = {dst, dst2};
  size_t ds[] = {size, MIB}, wrong[] = {size, MIB + 1};
  CHECK_EQ(mc_p2p_get_replica(b, "t/none", da, ds, 2), MC_P2P_PAYLOAD_NOT_FOUND);
  CHECK_EQ(mc_p2p_get_replica(b, "t/one", da, ds, 0), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_get_replica(b, "t/one", da, wrong, 2), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_get_replica(b, "t/one", da, ds, 1), MC_P2P_INVALID_ARGUMENT);
  /* a private copy (mc_p2p_get_copy): the bytes; the node is in no holder list, holds nothing, and its
   * destination is unregistered when the call returns (a different range overlapping it registers) */
  uint8_t *cp = calloc(1, size), *cp2 = calloc(1, MIB);
  void *ca[] = {cp, cp2}, *cin[] = {cp + 4096};
  CHECK_EQ(mc_p2p_get_copy(c, "t/none", ca, ds, 2), MC_P2P_PAYLOAD_NOT_FOUND);
  CHECK_EQ(mc_p2p_get_copy(c, "t/one", ca, wrong, 2), MC_P2P_INVALID_ARGUMENT);
  CHECK_EQ(mc_p2p_get_copy(c, "t/one", ca, ds, 2), 0);
  CHECK_EQ(first_bad(cp, size, 7), size);
  CHECK_EQ(first_bad(cp2, MIB, 8), MIB);
  r = record(conn, "t/one");
  for (size_t i = 0; r && i < nshards(r); i++) CHECK_EQ(holders(r, i, "replica_list", NULL), 0);
  CHECK(r != NULL);
  json_decref(r);
  CHECK_EQ(mc_p2p_delete_replica(c, "t/one"), MC_P2P_PAYLOAD_NOT_OPENED);
  CHECK_EQ(mc_p2p_register(c, "t/cp", cin, inner_size, 1, 4 * MIB, NULL, 0), 0);
  CHECK_EQ(mc_p2p_unregister(c, "t/cp"), 0);
  memset(cp, 0, size);
  CHECK_EQ(mc_p2p_get_copy(c, "t/one", ca, ds, 2), 0); /* again: nothing was kept of the first */
  CHECK_EQ(first_bad(cp, size, 7), size);
  free(cp), free(cp2);
  CHECK_EQ(mc_p2p_get_replica(b, "t/one", da, ds, 2), 0);
  CHECK_EQ(first_bad(dst, size, 7), size);
  CHECK_EQ(first_bad(dst2, MIB, 8), MIB);
  CHECK_EQ(mc_p2p_get_replica(b, "t/one", da, ds, 2), MC_P2P_PAYLOAD_OPENED);
  r = record(conn, "t/one");
  for (size_t i = 0; r && i < nshards(r); i++) {
    CHECK_EQ(holders(r, i, "replica_list", NULL), 1);
    json_t *h = json_array_get(json_object_get(json_array_get(json_object_get(r, "shards"), i), "replica_list"), 0);
    CHECK(json_integer_value(json_object_get(h, "expires")) > 0);
    CHECK(json_integer_value(json_object_get(h, "offset")) != 0);
  }
  json_decref(r);
  /* the wrong side's withdrawals */
  CHECK_EQ(mc_p2p_unregister(b, "t/one"), MC_P2P_PAYLOAD_NOT_OPENED);
  CHECK_EQ(mc_p2p_delete_replica(a, "t/one"), MC_P2P_PAYLOAD_NOT_OPENED);
  CHECK_EQ(mc_p2p_delete_replica(c, "t/one"), MC_P2P_PAYLOAD_NOT_OPENED);
  /* the producer leaves: the replica serves the next consumer alone */
  CHECK_EQ(mc_p2p_unregister(a, "t/one"), 0);
  r = record(conn, "t/one");
  for (size_t i = 0; r && i < nshards(r); i++) CHECK_EQ(holders(r, i, "gold", NULL), 0);
  CHECK(r != NULL);
  json_decref(r);
  memset(src, 0, size); /* (the producer's memory is no longer served: a read from it would show) */
  uint8_t *dst3 = calloc(1, size), *dst4 = calloc(1, MIB);
  void *da3[] = {dst3, dst4};
  CHECK_EQ(mc_p2p_get_replica(c, "t/one", da3, ds, 2), 0);
  CHECK_EQ(first_bad(dst3, size, 7), size);
  CHECK_EQ(first_bad(dst4, MIB, 8), MIB);
  CHECK_EQ(mc_p2p_delete_replica(b, "t/one"), 0);
  CHECK(replicas_everywhere(conn, "t/one", 1));
  CHECK_EQ(mc_p2p_delete_replica(c, "t/one"), 0);
  CHECK(record(conn, "t/one") == NULL); /* no holder left: the key is gone */
  CHECK_EQ(mc_p2p_delete_replica(c, "t/one"), MC_P2P_PAYLOAD_NOT_OPENED);
  /* force_create replaces */
  CHECK_EQ(mc_p2p_register(b, "t/same", oa, os, 1, 4 * MIB, NULL, 1), 0);
  r = record(conn, "t/same");
  CHECK_EQ(json_integer_value(json_object_get(r, "size")), (json_int_t)MIB);
  json_decref(r);
  CHECK_EQ(mc_p2p_unregister(b, "t/same"), 0);
  CHECK_EQ(mc_p2p_unregister(a, "t/same"), MC_P2P_PAYLOAD_NOT_FOUND); /* its record went with b's */
  mc_p2p_store_close(a);
  mc_p2p_store_close(b);
  mc_p2p_store_close(c);
  free(src), free(src2), free(other), free(dst), free(dst2), free(dst3), free(dst4);
}

static void test_strerror(void) {
  CHECK_STR(mc_p2p_strerror(MC_P2P_INVALID_ARGUMENT), "error: invalid argument");
  CHECK_STR(mc_p2p_strerror(MC_P2P_ADDRESS_OVERLAPPED), "error: address overlapped");
  CHECK_STR(mc_p2p_strerror(MC_P2P_PAYLOAD_OPENED), "error: payload has been replicated");
  CHECK_STR(mc_p2p_strerror(MC_P2P_PAYLOAD_NOT_OPENED), "error: payload does not replicated");
  CHECK_STR(mc_p2p_strerror(MC_P2P_PAYLOAD_NOT_FOUND), "error: payload not found in metadata");
  CHECK_STR(mc_p2p_strerror(MC_P2P_TOO_MANY_RETRIES), "error: too many retries");
  CHECK_STR(mc_p2p_strerror(MC_P2P_TRANSFER_ENGINE), "error: transfer engine core");
  CHECK(mc_p2p_store_new("redis://127.0.0.1:1", "127.0.0.1:1", "") == NULL); /* no compare-and-swap */
  CHECK(mc_p2p_store_new("P2PHANDSHAKE", "127.0.0.1:1", "") == NULL);
}

/* ---- the record's stripe fields (docs/p2p-store.md, "Metadata"), decoded and edited in process ---- */

/* A record of 12 MiB in 8 MiB shards (two stripes of 4 MiB, then one) with the stripe fields: stripe_size
 * (ss, a JSON value or NULL: absent), shard 0's stripe_crc32 (c0, NULL: absent), its crc32 (crc0) and partial
 * list (part, NULL: absent). Shard 1 has stripe_crc32 [3] and crc32 3 when ss is given. Static text. */
static const char *stripe_rec(const char *ss, const char *c0, unsigned long long crc0, const char *part) {
  static char t[1 << 17], pf[1 << 17];
  char ssf[64] = "", c0f[64] = "", c1f[64] = "";
  pf[0] = 0;
  if (ss) snprintf(ssf, sizeof(ssf), ",\"stripe_size\":%s", ss);
  if (ss) snprintf(c1f, sizeof(c1f), ",\"stripe_crc32\":[3]");
  if (c0) snprintf(c0f, sizeof(c0f), ",\"stripe_crc32\":%s", c0);
  if (part) snprintf(pf, sizeof(pf), ",\"partial\":%s", part);
  snprintf(t, sizeof(t),
           "{\"name\":\"s\",\"size\":12582912,\"size_list\":[12582912],\"max_shard_size\":8388608%s,\"shards\":["
           "{\"size\":8388608,\"crc32\":%llu%s,\"gold\":[{\"segment_name\":\"p:1\",\"offset\":4096}],"
           "\"replica_list\":null%s},"
           "{\"size\":4194304,\"crc32\":3%s,\"gold\":[{\"segment_name\":\"p:1\",\"offset\":8192}],\"replica_list\":null}]}",
           ssf, crc0, c0f, pf, c1f);
  return t;
}

static int decodes(const char *text, struct p2p_record *r) {
  const char *why = NULL;
  int rc = p2p_record_decode(text, "s", r, &why);
  if (rc) CHECK(why != NULL);
  return rc == 0;
}

static void test_record_stripes(void) {
  unsigned long long c0 = crc32_combine(1, 2, 4 << 20); /* shard 0's CRC from its stripes' 1 and 2 */
  const char *part = "[{\"segment_name\":\"c:1\",\"offset\":12288,\"expires\":5,\"stripes\":\"02\"}]";
  struct p2p_record r, again;
  /* round trip */
  REQUIRE(decodes(stripe_rec("4194304", "[1,2]", c0, part), &r));
  CHECK_EQ(r.stripe_size, 4ull << 20);
  REQUIRE(r.shards[0].stripe_crc && r.shards[1].stripe_crc);
  CHECK_EQ(r.shards[0].stripe_crc[1], 2);
  CHECK_EQ(r.shards[0].npart, 1);
  CHECK_STR(r.shards[0].part[0].h.seg, "c:1");
  CHECK_EQ(r.shards[0].part[0].h.offset, 12288);
  CHECK_EQ(r.shards[0].part[0].bits[0], 2);
  CHECK_EQ(r.shards[1].npart, 0);
  char *text = p2p_record_encode(&r);
  CHECK(strstr(text, "\"stripe_size\":4194304") && strstr(text, "\"stripe_crc32\":[1,2]") &&
        strstr(text, "\"stripes\":\"02\""));
  REQUIRE(decodes(text, &again));
  char *text2 = p2p_record_encode(&again);
  CHECK_STR(text, text2);
  free(text), free(text2);
  p2p_record_free(&again);
  /* edits: a partial entry added, updated (bits past the last stripe dropped), replaced by a full one */
  uint8_t one = 1, all = 0xff, none = 0;
  uint64_t addr[2] = {65536, 131072};
  CHECK(p2p_record_put_partial(&r, "d:1", 0, &one, 65536, 1000));
  CHECK_EQ(r.shards[0].npart, 2);
  CHECK(p2p_record_put_partial(&r, "d:1", 0, &all, 65536, 2000));
  CHECK_EQ(r.shards[0].npart, 2);
  CHECK_EQ(r.shards[0].part[1].bits[0], 3);
  CHECK_EQ(r.shards[0].part[1].h.expires, 2000);
  CHECK(p2p_record_put_partial(&r, "d:1", 1, &one, 65536, 1000)); /* (the other shard) */
  uint8_t have[2] = {1, 0};
  CHECK(p2p_record_put(&r, "d:1", 0, have, addr, 3000)); /* whole shard 0: its partial entry goes */
  CHECK_EQ(r.shards[0].npart, 1);
  CHECK_EQ(r.shards[0].nrep, 1);
  CHECK_EQ(r.shards[1].npart, 1);
  CHECK(!p2p_record_put_partial(&r, "d:1", 0, &one, 65536, 1000)); /* a whole holder is never partial */
  CHECK(!p2p_record_put_partial(&r, "d:1", 2, &one, 65536, 1000)); /* (no such shard) */
  CHECK(p2p_record_put_partial(&r, "c:1", 0, &none, 12288, 1000)); /* no stripe left: removed */
  CHECK_EQ(r.shards[0].npart, 0);
  CHECK(p2p_record_put_partial(&r, "c:1", 0, &one, 12288, 5));
  CHECK_EQ(p2p_record_prune(&r, 100), 1); /* c:1's entry expired */
  CHECK_EQ(r.shards[0].npart, 0);
  CHECK_EQ(p2p_record_remove(&r, "d:1", 0), 2); /* its replica entry of shard 0, its partial one of shard 1 */
  CHECK_EQ(r.shards[1].npart, 0);
  CHECK(p2p_record_put_partial(&r, "e:1", 1, &one, 65536, 0));
  CHECK_EQ(p2p_record_remove(&r, "p:1", 1), 2);
  CHECK(!p2p_record_empty(&r)); /* a partial holder is still a holder */
  CHECK_EQ(p2p_record_remove(&r, "e:1", 1), 1); /* (unregister, too, removes a node's partial entries) */
  CHECK(p2p_record_empty(&r));
  p2p_record_free(&r);
  /* at most P2P_MAX_HOLDERS partial entries: decoded, and put_partial adds none beyond */
  char *big = malloc(P2P_MAX_HOLDERS * 100 + 100), *at = big;
  at += sprintf(at, "[");
  for (unsigned i = 0; i < P2P_MAX_HOLDERS; i++)
    at += sprintf(at, "%s{\"segment_name\":\"n%u:1\",\"offset\":1,\"stripes\":\"01\"}", i ? "," : "", i);
  sprintf(at, "]");
  REQUIRE(decodes(stripe_rec("4194304", "[1,2]", c0, big), &r));
  CHECK(!p2p_record_put_partial(&r, "x:1", 0, &one, 1, 0));
  CHECK_EQ(r.shards[0].npart, P2P_MAX_HOLDERS);
  p2p_record_free(&r);
  sprintf(at, ",{\"segment_name\":\"too:1\",\"offset\":1,\"stripes\":\"01\"}]");
  CHECK(!decodes(stripe_rec("4194304", "[1,2]", c0, big), &r));
  free(big);
  /* refused: wrong counts, bad hex, bad stripe_size, stripe fields that do not fit */
  struct { const char *ss, *c0; unsigned long long crc0; const char *part; } bad[] = {
      {"4194304", "[1]", 1, NULL},             /* one CRC for two stripes */
      {"4194304", "[1,2,3]", c0, NULL},        /* three */
      {"4194304", "[1,2]", c0 ^ 1, NULL},      /* not combining to crc32 */
      {"4194304", "[1,-2]", c0, NULL},
      {"4194304", "[1,4294967296]", c0, NULL},
      {"4194304", "\"12\"", c0, NULL},
      {NULL, "[1,2]", c0, NULL},               /* stripe_crc32 without stripe_size */
      {"3", "[1,2]", c0, NULL},
      {"32768", "[1,2]", c0, NULL},            /* below 64 KiB */
      {"16777216", "[1]", 1, NULL},            /* above max_shard_size */
      {"6291456", "[1,2]", c0, NULL},          /* not a power of two */
      {"\"4194304\"", "[1,2]", c0, NULL},
      {"4194304", NULL, 1, "[{\"segment_name\":\"c:1\",\"offset\":1,\"stripes\":\"01\"}]"}, /* no stripe CRCs */
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":1,\"stripes\":\"zz\"}]"},
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":1,\"stripes\":\"0001\"}]"},
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":1,\"stripes\":\"04\"}]"}, /* stripe 2 of 2 */
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":1,\"stripes\":1}]"},
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":1}]"},
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"\",\"offset\":1,\"stripes\":\"01\"}]"},
      {"4194304", "[1,2]", c0, "[{\"segment_name\":\"c:1\",\"offset\":-1,\"stripes\":\"01\"}]"},
      {"4194304", "[1,2]", c0, "{\"segment_name\":\"c:1\"}"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int ok = decodes(stripe_rec(bad[i].ss, bad[i].c0, bad[i].crc0, bad[i].part), &r);
    if (ok) fprintf(stderr, "  accepted bad record %zu\n", i), p2p_record_free(&r);
    CHECK(!ok);
  }
  /* a record without the fields (an older writer, upstream): as before, whole shards only */
  REQUIRE(decodes(stripe_rec(NULL, NULL, 7, NULL), &r));
  CHECK_EQ(r.stripe_size, 0);
  CHECK(r.shards[0].stripe_crc == NULL && r.shards[1].stripe_crc == NULL);
  CHECK(!p2p_record_put_partial(&r, "d:1", 0, &one, 1, 0));
  text = p2p_record_encode(&r);
  CHECK(!strstr(text, "stripe") && !strstr(text, "partial"));
  free(text);
  p2p_record_free(&r);
  /* stripe fields on a record (stripe_size, [] partial lists) but a shard without stripe CRCs: fine */
  REQUIRE(decodes(stripe_rec("4194304", NULL, 7, "[]"), &r));
  p2p_record_free(&r);
}

static struct mc_meta_server *http_server(char *conn, size_t len) {
  struct mc_meta_server *srv = mc_meta_server_start("127.0.0.1", 0, NULL);
  CHECK(srv != NULL);
  snprintf(conn, len, "http://127.0.0.1:%d/metadata", srv ? mc_meta_server_port(srv) : 1);
  return srv;
}

/* Runs fn against a fresh metadata service: our HTTP server, or etcd. */
static void with_http(void (*fn)(const char *conn)) {
  char conn[128];
  struct mc_meta_server *srv = http_server(conn, sizeof(conn));
  fn(conn);
  mc_meta_server_stop(srv);
}

static void with_etcd(void (*fn)(const char *conn)) {
  struct mc_tp_service etcd;
  REQUIRE(mc_tp_start_etcd(&etcd) == 0);
  char conn[128];
  snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", etcd.port);
  fn(conn);
  mc_tp_service_stop(&etcd);
}

static void test_api_http(void) { with_http(api_semantics); }
static void test_api_etcd(void) { with_etcd(api_semantics); }

/* Hostile records: refused (payload not found) without a crash or a write past the destination; a holder
 * that cannot be reached: too many retries; wrong bytes: the CRC catches them. */
static void hostile_records(const char *conn) {
  mc_p2p_store_t *s = store(conn);
  REQUIRE(s != NULL);
  uint8_t *dst = calloc(1, 8 * MIB + 64);
  void *da[] = {dst};
  size_t ds[] = {8 * MIB};
  static const char *bad[] = {
      "garbage", "[]", "{\"name\":\"h\"}",
      "{\"name\":\"other\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,\"shards\":[]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,\"shards\":[{\"size\":4194304}]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":3,\"shards\":[]}",
      "{\"name\":\"h\",\"size\":1,\"size_list\":[8388608],\"max_shard_size\":4194304,\"shards\":[{\"size\":4194304},{\"size\":4194304}]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,"
      "\"shards\":[{\"size\":4194304},{\"size\":8388608}]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,"
      "\"shards\":[{\"size\":4194304,\"gold\":[{\"segment_name\":\"\",\"offset\":1}]},{\"size\":4194304}]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,"
      "\"shards\":[{\"size\":4194304,\"gold\":[{\"segment_name\":\"x\",\"offset\":-5}]},{\"size\":4194304}]}",
      "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,"
      "\"shards\":[{\"size\":4194304,\"crc32\":99999999999},{\"size\":4194304}]}",
      "{\"name\":\"h\",\"size\":1,\"size_list\":[9223372036854775807,9223372036854775807],"
      "\"max_shard_size\":4294967296,\"shards\":[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    put_raw(conn, "h", bad[i]);
    CHECK_EQ(mc_p2p_get_replica(s, "h", da, ds, 1), MC_P2P_PAYLOAD_NOT_FOUND);
  }
  /* well-formed, but its only holder does not exist */
  put_raw(conn, "h",
          "{\"name\":\"h\",\"size\":8388608,\"size_list\":[8388608],\"max_shard_size\":4194304,\"shards\":["
          "{\"size\":4194304,\"gold\":[{\"segment_name\":\"127.0.0.1:1\",\"offset\":4096}]},"
          "{\"size\":4194304,\"gold\":[{\"segment_name\":\"127.0.0.1:1\",\"offset\":4096}]}]}");
  long t0 = mc_tp_now_ms();
  CHECK_EQ(mc_p2p_get_replica(s, "h", da, ds, 1), MC_P2P_TOO_MANY_RETRIES);
  CHECK(mc_tp_now_ms() - t0 < 20000);
  json_t *r = record(conn, "h"); /* no entry of the failed fetch is left */
  CHECK(r && holders(r, 0, "replica_list", NULL) == 0);
  json_decref(r);
  /* a producer whose bytes changed after registering: the CRC refuses them */
  mc_p2p_store_t *p = store(conn);
  uint8_t *src = filled(8 * MIB, 3);
  void *sa[] = {src};
  REQUIRE(p && mc_p2p_register(p, "crc", sa, ds, 1, 4 * MIB, NULL, 0) == 0);
  src[5 * MIB] ^= 0xff;
  CHECK_EQ(mc_p2p_get_replica(s, "crc", da, ds, 1), MC_P2P_TOO_MANY_RETRIES);
  /* resume: once the producer's bytes are right again, only the shard that failed is read again */
  src[5 * MIB] ^= 0xff;
  uint64_t before, after;
  mc_p2p_progress(s, &before, NULL);
  CHECK_EQ(mc_p2p_get_replica(s, "crc", da, ds, 1), 0);
  mc_p2p_progress(s, &after, NULL);
  CHECK_EQ(first_bad(dst, 8 * MIB, 3), 8 * MIB);
  CHECK_EQ(after - before, 4 * MIB);
  mc_p2p_store_close(p);
  mc_p2p_store_close(s);
  free(dst);
  free(src);
}

static void test_hostile_records(void) { with_http(hostile_records); }

/* Gives shard i of name's record a partial holder entry (docs/p2p-store.md, "Metadata"): seg holds the
 * stripes of the hex bitmap bits at offset off, for ten minutes. */
static void add_partial(const char *conn, const char *name, size_t i, const char *seg, uint64_t off, const char *bits) {
  json_t *r = record(conn, name);
  REQUIRE(r != NULL);
  json_t *sh = json_array_get(json_object_get(r, "shards"), i);
  json_object_set_new(sh, "partial", json_pack("[{s:s, s:I, s:I, s:s}]", "segment_name", seg, "offset", (json_int_t)off,
                                               "expires", (json_int_t)time(NULL) * 1000 + 600000, "stripes", bits));
  char *text = json_dumps(r, JSON_COMPACT);
  put_raw(conn, name, text);
  free(text);
  json_decref(r);
}

/* Partial holders: a consumer reads the stripes another node advertised as holding (a partial entry that
 * points at that node's real registered memory) from that node, the others from the producer; a partial
 * holder serving wrong bytes for a stripe is excluded and the stripe read from elsewhere. */
static void partial_holders(const char *conn) {
  mc_p2p_store_t *p = store(conn), *a = store(conn), *b = store(conn);
  REQUIRE(p && a && b);
  uint64_t size = 16 * MIB, before, after; /* one shard of four 4 MiB stripes */
  uint8_t *src = filled(size, 21), *amem = filled(size, 21), *dst = calloc(1, size);
  void *sa[] = {src}, *aa[] = {amem}, *da[] = {dst};
  size_t ss[] = {size};
  REQUIRE(mc_p2p_register(p, "part", sa, ss, 1, 16 * MIB, NULL, 0) == 0);
  json_t *r = record(conn, "part");
  CHECK_EQ(json_integer_value(json_object_get(r, "stripe_size")), (json_int_t)(4 * MIB));
  CHECK_EQ(json_array_size(json_object_get(json_array_get(json_object_get(r, "shards"), 0), "stripe_crc32")), 4);
  json_decref(r);
  REQUIRE(mc_p2p_register(a, "part-a", aa, ss, 1, 16 * MIB, NULL, 0) == 0); /* (a's memory, registered) */
  r = record(conn, "part-a");
  char aseg[256];
  snprintf(aseg, sizeof(aseg), "%s", json_string_value(json_object_get(json_array_get(json_object_get(
      json_array_get(json_object_get(r, "shards"), 0), "gold"), 0), "segment_name")) ?: "?");
  json_decref(r);
  /* a holds stripes 0 and 1 (its other bytes are wrong); the producer's stripes 0 and 1 are wrong now: read
   * from it, they would fail their CRC, it would be excluded and nobody would be left for stripes 2 and 3 */
  memset(amem + 8 * MIB, 0, 8 * MIB);
  src[1] ^= 0xff, src[5 * MIB] ^= 0xff;
  add_partial(conn, "part", 0, aseg, (uint64_t)(uintptr_t)amem, "03");
  mc_p2p_progress(b, &before, NULL);
  CHECK_EQ(mc_p2p_get_replica(b, "part", da, ss, 1), 0);
  mc_p2p_progress(b, &after, NULL);
  CHECK_EQ(first_bad(dst, size, 21), size);
  CHECK_EQ(after - before, size); /* every stripe once */
  r = record(conn, "part");
  CHECK_EQ(holders(r, 0, "replica_list", NULL), 1);
  CHECK_EQ(holders(r, 0, "partial", aseg), 1); /* a's entry stays; b's own partial entries became a replica one */
  CHECK_EQ(holders(r, 0, "partial", NULL), 1);
  json_decref(r);
  CHECK_EQ(mc_p2p_delete_replica(b, "part"), 0);
  /* a advertises stripe 2 too, but its bytes there are wrong: b excludes it and reads stripe 2 from the
   * producer (right again) */
  src[1] ^= 0xff, src[5 * MIB] ^= 0xff;
  add_partial(conn, "part", 0, aseg, (uint64_t)(uintptr_t)amem, "07");
  memset(dst, 0, size);
  mc_p2p_progress(b, &before, NULL);
  CHECK_EQ(mc_p2p_get_replica(b, "part", da, ss, 1), 0);
  mc_p2p_progress(b, &after, NULL);
  CHECK_EQ(first_bad(dst, size, 21), size);
  CHECK_EQ(after - before, size + 4 * MIB); /* stripe 2 twice: from a (wrong), from the producer */
  CHECK_EQ(mc_p2p_delete_replica(b, "part"), 0);
  mc_p2p_store_close(b);
  mc_p2p_store_close(a);
  mc_p2p_store_close(p);
  free(src), free(amem), free(dst);
}

static void test_partial_holders(void) { with_http(partial_holders); }

/* ---- processes ---- */

struct kids {
  char *dir;
  char env[8][256];
  char *envp[9];
};

enum { ENV_HOLD = 5, ENV_EXTRA = 6 }; /* the slot of MC_P2P_T_HOLD_MS, a free slot */

static void kids_env(struct kids *k, const char *conn, const char *name, uint64_t size, const char *extra) {
  k->dir = mc_tp_mkdtemp("p2p");
  snprintf(k->env[0], 256, "MC_P2P_T_CONN=%s", conn);
  snprintf(k->env[1], 256, "MC_P2P_T_NAME=%s", name);
  snprintf(k->env[2], 256, "MC_P2P_T_SIZE=%llu", (unsigned long long)size);
  snprintf(k->env[3], 256, "MC_P2P_T_SEED=5");
  snprintf(k->env[4], 256, "MC_P2P_HOLDER_TTL_S=2");
  snprintf(k->env[5], 256, "%s", extra ? extra : "MC_P2P_T_HOLD_MS=0");
  snprintf(k->env[ENV_EXTRA], 256, "MC_P2P_T_UNUSED=1");
  for (int i = 0; i < 7; i++) k->envp[i] = k->env[i];
  k->envp[7] = NULL;
}

static pid_t kid(struct kids *k, const char *which, int i) {
  char log[64];
  snprintf(log, sizeof(log), "%s-%d.log", which, i);
  char *path = mc_tp_path(k->dir, log);
  pid_t pid = spawn_child(which, k->envp, path);
  free(path);
  CHECK(pid > 0);
  return pid;
}

/* Waits until the record of name exists with every shard held as asked (gold n_gold, replicas n_rep). */
static int wait_holders(const char *conn, const char *name, int n_gold, int n_rep, long timeout_ms) {
  long t0 = mc_tp_now_ms();
  while (mc_tp_now_ms() - t0 < timeout_ms) {
    json_t *r = record(conn, name);
    int ok = r && nshards(r) > 0;
    for (size_t i = 0; ok && i < nshards(r); i++)
      ok = holders(r, i, "gold", NULL) == n_gold && holders(r, i, "replica_list", NULL) == n_rep;
    json_decref(r);
    if (ok) return 1;
    mc_tp_sleep_ms(50);
  }
  return 0;
}

static void dump_kids(struct kids *k) {
  if (!mc_test_failures) return;
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "tail -n 20 %s/*.log >&2", k->dir);
  if (system(cmd)) {
  }
}

/* Kills the producer, shows the children's logs on a failure, removes their directory. */
static void kids_end(struct kids *k, pid_t prod) {
  kill(prod, SIGKILL);
  waitpid(prod, NULL, 0);
  dump_kids(k);
  mc_tp_rmrf(k->dir);
  free(k->dir);
}

/* One producer and four fetchers at once: every fetcher gets every byte, and the record ends with all four
 * in every shard's replica_list (concurrent appends by compare-and-swap lose none). */
static void concurrent_fetchers(const char *conn) {
  struct kids k;
  uint64_t size = 64 * MIB;
  kids_env(&k, conn, "conc", size, "MC_P2P_T_HOLD_MS=4000");
  pid_t prod = kid(&k, "child_producer", 0);
  CHECK(wait_holders(conn, "conc", 1, 0, 20000));
  pid_t f[4];
  for (int i = 0; i < 4; i++) f[i] = kid(&k, "child_fetcher", i);
  CHECK(wait_holders(conn, "conc", 1, 4, 60000)); /* all four hold it at once (HOLD_MS) */
  for (int i = 0; i < 4; i++) CHECK_EQ(mc_tp_exit_code_within(f[i], 60000), 0);
  CHECK(wait_holders(conn, "conc", 1, 0, 10000)); /* and all four withdrew */
  kids_end(&k, prod);
}

static void test_concurrent_http(void) { with_http(concurrent_fetchers); }
static void test_concurrent_etcd(void) { with_etcd(concurrent_fetchers); }

/* The number of entries of seg (NULL: any) in name's record, all shards and lists (-1: no record). */
static int entries_of(const char *conn, const char *name, const char *seg) {
  json_t *r = record(conn, name);
  int n = r ? 0 : -1;
  for (size_t i = 0; r && i < nshards(r); i++) n += holders(r, i, "replica_list", seg) + holders(r, i, "gold", seg);
  json_decref(r);
  return n;
}

/* Where text starts in the log of child_fetcher-<i> in k's directory (a static copy), or NULL. */
static const char *log_has(struct kids *k, int i, const char *text) {
  char name[64];
  snprintf(name, sizeof(name), "child_fetcher-%d.log", i);
  char *path = mc_tp_path(k->dir, name);
  const char *at = strstr(file_text(path), text);
  free(path);
  return at;
}

/* A replica holder SIGKILLed: a fetcher that finds it in the record (it is preferred over the producer)
 * finishes from the producer, and the dead holder's entries leave the record within its lease (2 s) and
 * the renewal period of a live holder. */
static void dead_holder(const char *conn) {
  struct kids k;
  uint64_t size = 32 * MIB;
  kids_env(&k, conn, "dead", size, "MC_P2P_T_HOLD_MS=600000");
  pid_t prod = kid(&k, "child_producer", 0);
  CHECK(wait_holders(conn, "dead", 1, 0, 20000));
  pid_t holder = kid(&k, "child_fetcher", 0);
  CHECK(wait_holders(conn, "dead", 1, 1, 30000));
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
  long killed = mc_tp_now_ms();
  snprintf(k.env[ENV_HOLD], 256, "MC_P2P_T_HOLD_MS=0");
  pid_t late = kid(&k, "child_fetcher", 1); /* starts while the dead holder is still listed */
  CHECK_EQ(mc_tp_exit_code_within(late, 60000), 0);
  CHECK(wait_holders(conn, "dead", 1, 0, 10000));
  long gone = mc_tp_now_ms() - killed;
  fprintf(stderr, "  dead holder's entries gone %ld ms after SIGKILL\n", gone);
  CHECK(gone < 2000 + 2000); /* lease 2 s + the producer's renewal period (2/3 s) + margin */
  CHECK(log_has(&k, 1, "excluded for this fetch")); /* it did try the dead holder first */
  kids_end(&k, prod);
}

static void test_dead_holder(void) { with_http(dead_holder); }

/* A replica holder SIGKILLed in the middle of a fetch that reads from it: it is frozen first (SIGSTOP) so
 * the fetcher's READs from it are surely in flight, then killed; the fetcher finishes from the producer,
 * every byte right, and the dead holder's entries leave the record. Over TCP (MC_FORCE_TCP=1): the
 * same-host path would read a stopped process's memory directly. */
static void killed_mid_fetch(const char *conn) {
  struct kids k;
  uint64_t size = 128 * MIB;
  kids_env(&k, conn, "mid", size, "MC_P2P_T_HOLD_MS=600000");
  snprintf(k.env[ENV_EXTRA], 256, "MC_FORCE_TCP=1");
  pid_t prod = kid(&k, "child_producer", 0);
  CHECK(wait_holders(conn, "mid", 1, 0, 20000));
  pid_t holder = kid(&k, "child_fetcher", 0);
  CHECK(wait_holders(conn, "mid", 1, 1, 30000));
  json_t *r = record(conn, "mid");
  char seg[256];
  snprintf(seg, sizeof(seg), "%s", json_string_value(json_object_get(json_array_get(json_object_get(
      json_array_get(json_object_get(r, "shards"), 0), "replica_list"), 0), "segment_name")) ?: "?");
  json_decref(r);
  kill(holder, SIGSTOP);
  snprintf(k.env[ENV_HOLD], 256, "MC_P2P_T_HOLD_MS=3000");
  pid_t f = kid(&k, "child_fetcher", 1);
  long t0 = mc_tp_now_ms();
  mc_tp_sleep_ms(1000); /* its READs from the frozen holder wait; the producer serves the rest */
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
  long killed = mc_tp_now_ms();
  while (entries_of(conn, "mid", seg) != 0 && mc_tp_now_ms() - killed < 10000) mc_tp_sleep_ms(50);
  long gone = mc_tp_now_ms() - killed;
  fprintf(stderr, "  dead holder %s's entries gone %ld ms after the kill\n", seg, gone);
  CHECK_EQ(entries_of(conn, "mid", seg), 0);
  CHECK(gone < 5000);
  CHECK_EQ(mc_tp_exit_code_within(f, 60000), 0);
  fprintf(stderr, "  fetcher done %ld ms after it started\n", mc_tp_now_ms() - t0);
  CHECK(log_has(&k, 1, "excluded for this fetch")); /* it was reading from the holder that died */
  const char *line = log_has(&k, 1, "fetched rc=0 (success) in ");
  long ms = line ? strtol(line + strlen("fetched rc=0 (success) in "), NULL, 10) : -1;
  CHECK(ms >= 900); /* the fetch was still running when the holder died (1 s after the fetcher started) */
  kids_end(&k, prod);
}

static void test_killed_mid_fetch(void) { with_http(killed_mid_fetch); }

/* ---- the example program (docs/p2p-store.md, "Example program") ---- */

static void example(const char *conn) {
  const char *bin = getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : "tools";
  char exe[512], meta[200], name_t[64], name_i[64];
  snprintf(exe, sizeof(exe), "%s/p2p-store-example", bin);
  snprintf(meta, sizeof(meta), "--metadata_server=%s", conn);
  snprintf(name_t, sizeof(name_t), "--local_server_name=127.0.0.1:%d", mc_tp_free_port());
  snprintf(name_i, sizeof(name_i), "--local_server_name=127.0.0.1:%d", mc_tp_free_port());
  char *dir = mc_tp_mkdtemp("p2pex"), *log_t = mc_tp_path(dir, "trainer.log"), *log_i = mc_tp_path(dir, "inf.log");
  char *at[] = {exe, "--cmd=trainer", meta, name_t, "--file_size_mb=128", "--idle_s=3", NULL};
  char *ai[] = {exe, "--cmd=inferencer", meta, name_i, NULL};
  pid_t t = mc_tp_spawn(at, NULL, log_t);
  long t0 = mc_tp_now_ms();
  while (!strstr(file_text(log_t), "Object registration done") && mc_tp_now_ms() - t0 < 20000) mc_tp_sleep_ms(50);
  pid_t i = mc_tp_spawn(ai, NULL, log_i);
  CHECK_EQ(mc_tp_exit_code_within(i, 60000), 0);
  CHECK_EQ(mc_tp_exit_code_within(t, 60000), 0);
  const char *ti = file_text(log_i);
  const char *started = strstr(ti, "Object retrieval started: name foo/bar\n");
  const char *done = strstr(ti, "Object retrieval done: duration (ms) ");
  CHECK(started && done && started < done && strstr(done, " throughput (GB/s) ") && strstr(done, "\nALL DONE\n"));
  const char *tt = file_text(log_t);
  CHECK(strstr(tt, "Object registration done: duration (ms) ") && strstr(tt, " throughput (GB/s) "));
  CHECK(strstr(tt, "Name foo/bar MaxShardSize 67108864 TotalSize 134217728") != NULL);
  CHECK(strstr(tt, "\nALL DONE\n") != NULL);
  CHECK(record(conn, "foo/bar") == NULL); /* both withdrew: the record is gone */
  if (mc_test_failures) {
    mc_tp_dump_log(log_t);
    mc_tp_dump_log(log_i);
  }
  free(log_t);
  free(log_i);
  mc_tp_rmrf(dir);
  free(dir);
}

static void test_example_program(void) { with_http(example); }

/* ---- the command-line tool ---- */

/* Runs mooncake_p2p with args (NULL-terminated), its output into log; the exit code. */
static int run_cli(char **args, const char *log) {
  const char *bin = getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : "tools";
  char exe[512];
  snprintf(exe, sizeof(exe), "%s/mooncake_p2p", bin);
  char *argv[16] = {exe};
  for (int i = 0; args[i] && i < 14; i++) argv[i + 1] = args[i], argv[i + 2] = NULL;
  pid_t pid = mc_tp_spawn(argv, NULL, log);
  return mc_tp_exit_code_within(pid, 60000);
}

static void cli(const char *conn) {
  const char *bin = getenv("MC_TEST_BIN_DIR") ? getenv("MC_TEST_BIN_DIR") : "tools";
  char *dir = mc_tp_mkdtemp("p2pcli"), *in = mc_tp_path(dir, "in.bin"), *out = mc_tp_path(dir, "out.bin");
  char *log = mc_tp_path(dir, "cli.log"), *reg_log = mc_tp_path(dir, "reg.log");
  uint64_t size = 20 * MIB + 333;
  uint8_t *data = filled(size, 11);
  FILE *f = fopen(in, "w");
  REQUIRE(f && fwrite(data, 1, size, f) == size);
  fclose(f);
  char meta[200], fin[600], fout[600], self[64], exe[512];
  snprintf(meta, sizeof(meta), "--metadata_server=%s", conn);
  snprintf(fin, sizeof(fin), "--file=%s", in);
  snprintf(fout, sizeof(fout), "--file=%s", out);
  snprintf(self, sizeof(self), "--local_server_name=127.0.0.1:%d", mc_tp_free_port());
  snprintf(exe, sizeof(exe), "%s/mooncake_p2p", bin);
  char *reg[] = {exe, "register", meta, self, "--name=cli/one", fin, "--shard_mb=4", NULL};
  pid_t r = mc_tp_spawn(reg, NULL, reg_log);
  CHECK(wait_holders(conn, "cli/one", 1, 0, 20000));
  char *list[] = {"list", meta, "--prefix=cli/", NULL};
  CHECK_EQ(run_cli(list, log), 0);
  char want[128];
  snprintf(want, sizeof(want), "cli/one\t%llu bytes\t1 buffer(s)\tshards of 4194304 bytes", (unsigned long long)size);
  CHECK(strstr(file_text(log), want) != NULL);
  char *fetch[] = {"fetch", meta, "--name=cli/one", fout, "--progress=lines", NULL};
  CHECK_EQ(run_cli(fetch, log), 0);
  const char *t = file_text(log);
  CHECK(strstr(t, "progress: 20.0 / 20.0 MiB") != NULL);
  CHECK(strstr(t, "fetched cli/one: ") != NULL);
  f = fopen(out, "r");
  uint8_t *got = calloc(1, size + 1);
  CHECK(f && fread(got, 1, size + 1, f) == size);
  if (f) fclose(f);
  CHECK_EQ(first_bad(got, size, 11), size);
  /* a damaged file fetched again: only its damaged shard is read (the fetch resumes) */
  f = fopen(out, "r+");
  CHECK(f && !fseek(f, (long)(9 * MIB), SEEK_SET) && fputc(0x5a ^ got[9 * MIB], f) != EOF);
  if (f) fclose(f);
  CHECK_EQ(run_cli(fetch, log), 0);
  CHECK(strstr(file_text(log), ", 4194304 bytes read (the file's right shards were kept)") != NULL);
  f = fopen(out, "r");
  memset(got, 0, size);
  CHECK(f && fread(got, 1, size + 1, f) == size);
  if (f) fclose(f);
  CHECK_EQ(first_bad(got, size, 11), size);
  /* the terminal form of the progress display: one line rewritten in place, ended once */
  char fout2[620];
  snprintf(fout2, sizeof(fout2), "--file=%s.2", out);
  char *fetch_bar[] = {"fetch", meta, "--name=cli/one", fout2, "--progress=bar", NULL};
  CHECK_EQ(run_cli(fetch_bar, log), 0);
  CHECK(strstr(file_text(log), "\r[##############################]     20.0 / 20.0 MiB ") != NULL);
  CHECK(strstr(file_text(log), " sources\n") != NULL);
  char *bad[] = {"fetch", meta, "--name=cli/none", fout, NULL};
  CHECK_EQ(run_cli(bad, log), 1);
  CHECK(strstr(file_text(log), "fetch: error: payload not found in metadata") != NULL);
  /* cleanup of another node's entries, by name */
  json_t *rec = record(conn, "cli/one");
  const char *seg = json_string_value(json_object_get(
      json_array_get(json_object_get(json_array_get(json_object_get(rec, "shards"), 0), "gold"), 0), "segment_name"));
  char server[300];
  snprintf(server, sizeof(server), "--server=%s", seg ? seg : "?");
  json_decref(rec);
  kill(r, SIGSTOP); /* (its lease renewal would add it back) */
  char *unreg[] = {"unregister", meta, "--name=cli/one", server, NULL};
  CHECK_EQ(run_cli(unreg, log), 0);
  CHECK(record(conn, "cli/one") == NULL); /* its only holder removed: the record is gone */
  kill(r, SIGCONT);
  kill(r, SIGTERM);
  CHECK_EQ(mc_tp_exit_code_within(r, 20000), 1); /* its record was removed under it */
  CHECK(strstr(file_text(reg_log), "unregistered cli/one: error: payload not found in metadata") != NULL);
  if (mc_test_failures) mc_tp_dump_log(log), mc_tp_dump_log(reg_log);
  free(data), free(got), free(in), free(out), free(log), free(reg_log);
  mc_tp_rmrf(dir);
  free(dir);
}

static void test_cli(void) { with_http(cli); }

TEST_MAIN(TEST_CASE(child_producer), TEST_CASE(child_fetcher), TEST_CASE(test_strerror), TEST_CASE(test_api_http),
          TEST_CASE(test_api_etcd), TEST_CASE(test_hostile_records), TEST_CASE(test_record_stripes),
          TEST_CASE(test_partial_holders), TEST_CASE(test_concurrent_http),
          TEST_CASE(test_concurrent_etcd), TEST_CASE(test_dead_holder),
          TEST_CASE(test_killed_mid_fetch), TEST_CASE(test_example_program), TEST_CASE(test_cli))
