/* A program that knows only the public headers and links only the two shared libraries, as an
 * application does (docs/architecture.md, "Versions and symbols"): it would not link if it needed a symbol
 * the libraries hide. Against a real master with its embedded metadata server it checks the version,
 * one process-wide log level (set through libmooncake_te, in force in libmooncake_store), a store put/get
 * and an engine transfer into the store's own segment, both libraries' handles in one process. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"
#include "lib/test.h"
#include "mooncake/runtime.h"
#include "mooncake/store.h"
#include "mooncake/transfer_engine.h"
#include "mooncake/version.h"

#define MiB (1024ull * 1024)

static void abi(void) {
  /* the version of the headers is the version of the library */
  CHECK_STR(mooncake_version(), MOONCAKE_VERSION_STRING);
  CHECK(MOONCAKE_VERSION == MOONCAKE_VERSION_AT(MOONCAKE_VERSION_MAJOR, MOONCAKE_VERSION_MINOR,
                                                MOONCAKE_VERSION_PATCH));

  const char *bindir = getenv("MC_TEST_BIN_DIR");
  char bin[1024], a1[40], a2[48], a3[40], meta[96], addr[40];
  int port = mc_tp_free_port(), mport, aport;
  do mport = mc_tp_free_port(); while (mport == port);
  do aport = mc_tp_free_port(); while (aport == port || aport == mport);
  snprintf(bin, sizeof(bin), "%s/mooncake_master", bindir ? bindir : ".");
  snprintf(a1, sizeof(a1), "--rpc_port=%d", port);
  snprintf(a2, sizeof(a2), "--http_metadata_server_port=%d", mport);
  snprintf(a3, sizeof(a3), "--metrics_port=%d", aport);
  char *dir = mc_tp_mkdtemp("abi"), *log = mc_tp_path(dir, "master.log");
  char *argv[] = {bin, a1, "--enable_http_metadata_server", a2, a3, NULL};
  pid_t master = mc_tp_spawn(argv, NULL, log);
  REQUIRE(master > 0 && mc_tp_wait_port(port, 10000, master) == 0 && mc_tp_wait_port(mport, 10000, master) == 0);
  snprintf(meta, sizeof(meta), "http://127.0.0.1:%d/metadata", mport);
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);

  /* One log level for both libraries: OFF set through libmooncake_te silences libmooncake_store, whose
   * failing setup below would otherwise log an error (the level lives once, in libmooncake_te). */
  mc_log_set_level(MC_LOG_OFF);
  CHECK_EQ(mc_log_level_cur, MC_LOG_OFF);
  mooncake_store_t bad = mooncake_store_create();
  CHECK(bad != NULL);
  CHECK(mooncake_store_setup(bad, "127.0.0.1", meta, 1 * MiB, 1 * MiB, "tcp", "", "127.0.0.1:1") != 0);
  mooncake_store_destroy(bad);
  mc_log_set_level(MC_LOG_WARN);

  /* the store through libmooncake_store */
  mooncake_store_t s = mooncake_store_create();
  REQUIRE(s != NULL);
  REQUIRE(mooncake_store_setup(s, "127.0.0.1", meta, 16 * MiB, 4 * MiB, "tcp", "", addr) == 0);
  const char *val = "the value of abi-key";
  CHECK_EQ(mooncake_store_put(s, "abi-key", val, strlen(val), NULL), 0);
  char out[64] = {0};
  CHECK_EQ(mooncake_store_get_into(s, "abi-key", out, sizeof(out)), (int64_t)strlen(val));
  CHECK_STR(out, val);
  CHECK_EQ(mooncake_store_is_exist(s, "abi-key"), 1);
  CHECK_STR(mooncake_store_err_name(MC_OBJECT_NOT_FOUND), "OBJECT_NOT_FOUND");

  /* an engine of our own through libmooncake_te, in the same process, writing to a buffer of its own */
  transfer_engine_t e = createTransferEngine(meta, "127.0.0.1", "127.0.0.1", 0, 1);
  REQUIRE(e != NULL);
  CHECK(installTransport(e, "tcp", NULL) != NULL);
  char *src = malloc(1 * MiB), *dst = malloc(1 * MiB);
  memset(src, 0x5a, 1 * MiB);
  memset(dst, 0, 1 * MiB);
  CHECK_EQ(registerLocalMemory(e, src, 1 * MiB, "cpu:0", 1), 0);
  CHECK_EQ(registerLocalMemory(e, dst, 1 * MiB, "cpu:0", 1), 0);
  const char *self = mc_te_local_segment_name(e);
  REQUIRE(self != NULL);
  segment_id_t seg = openSegment(e, self);
  CHECK(seg >= 0);
  batch_id_t b = allocateBatchID(e, 1);
  struct transfer_request req = {.opcode = OPCODE_WRITE, .source = src, .target_id = seg,
                                 .target_offset = (uint64_t)(uintptr_t)dst, .length = 1 * MiB};
  CHECK_EQ(submitTransfer(e, b, &req, 1), 0);
  CHECK_EQ(mc_te_wait_batch(e, b, 10000), STATUS_COMPLETED);
  CHECK(memcmp(src, dst, 1 * MiB) == 0);
  CHECK_EQ(freeBatchID(e, b), 0);
  CHECK_EQ(unregisterLocalMemory(e, src), 0);
  CHECK_EQ(unregisterLocalMemory(e, dst), 0);
  destroyTransferEngine(e);
  free(src);
  free(dst);

  CHECK_EQ(mooncake_store_remove(s, "abi-key", 1), 0);
  mooncake_store_destroy(s);
  mc_tp_stop(master, 5000);
  mc_tp_rmrf(dir);
  free(dir);
  free(log);
}

TEST_MAIN(TEST_CASE(abi))
