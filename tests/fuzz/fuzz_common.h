/* Pieces shared by the fuzz targets (docs/testing.md, "Fuzzing"): a reader over the fuzz input, quiet
 * logging, a bounded request/reply exchange with a server on loopback, and a transfer engine in this
 * process. Every target defines LLVMFuzzerTestOneInput; replay.c drives it without libFuzzer.
 *
 * The fuzz binaries never leave the machine: fuzz_common.c interposes getaddrinfo (numeric hosts and
 * "localhost" only) and connect (loopback only), so a fuzzed host name or address in a request (a
 * segment's probe address, a notify target) costs no DNS query and sends no packet out. */
#ifndef MC_TESTS_FUZZ_COMMON_H
#define MC_TESTS_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/transfer_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the fuzz input front to back; reading past the end yields zeros / short takes. */
struct fz_in {
  const uint8_t *p;
  size_t n, off;
};
static inline size_t fz_left(const struct fz_in *in) { return in->n - in->off; }
uint8_t fz_u8(struct fz_in *in);
uint16_t fz_u16(struct fz_in *in); /* little-endian */
uint64_t fz_u64(struct fz_in *in); /* little-endian */
/* Up to n bytes (*got says how many); NULL when none are left. */
const uint8_t *fz_take(struct fz_in *in, size_t n, size_t *got);

/* Logs only errors (MC_FUZZ_LOG_LEVEL=INFO etc. overrides); call at every input: it is cheap and undoes
 * what a fuzzed flag (a config's --v=N) changed. */
void fz_quiet(void);
/* 1 when the environment variable is set to a non-empty value other than "0". */
int fz_env_flag(const char *name);

/* Connects to 127.0.0.1:port, sends req, half-closes, and reads the reply until the server closes,
 * on_reply returns non-zero (it saw a complete answer), timeout_ms pass (the whole exchange is bounded
 * by that), or, with quiet_ms > 0, nothing arrived for quiet_ms after the request was sent (a server
 * that waits for the rest of an incomplete request although the client half-closed). Each chunk read
 * goes to on_reply (may be NULL). Returns the number of reply bytes, or -1 when the connection could
 * not be made. */
typedef int (*fz_reply_fn)(void *ctx, const uint8_t *p, size_t n);
long fz_exchange(uint16_t port, const void *req, size_t len, int timeout_ms, int quiet_ms, fz_reply_fn on_reply,
                 void *ctx);

/* The process's one master (in-process, no RPC server): the defaults plus opts (name, value, ...,
 * NULL; may be NULL), finalized and created; destroyed by fz_master_stop or at exit. Aborts when it
 * cannot start. */
struct mc_master;
struct mc_master *fz_master_start(const char *const *opts);
void fz_master_stop(void);
/* Empties a master between inputs: every client expired (its segments unmounted and swept, its extents
 * released), every remaining segment unmounted, every object removed. */
void fz_master_reset(struct mc_master *m);

/* The process's one transfer engine (P2PHANDSHAKE, named 127.0.0.1:<control port>), created on first
 * call and destroyed at exit; its TCP data port and control RPC port. */
transfer_engine_t fz_engine(uint16_t *data_port, uint16_t *rpc_port);

/* The data-port target's mapping (fuzz_dataport.c; fuzz_seeds.c aims its requests with it): a PROT_NONE
 * page, FZ_DP_RW_LEN read-write bytes, a PROT_NONE page. In the read-write part:
 * [0, A) canary | A remote | canary | C private | canary | B remote, up to the second guard page.
 * A relocated request address (flags bit 0) is an offset from the first guard page. */
#define FZ_DP_PAGE 4096u
#define FZ_DP_RW_LEN (4 * FZ_DP_PAGE)
#define FZ_DP_MAP_LEN (FZ_DP_RW_LEN + 2 * FZ_DP_PAGE)
#define FZ_DP_A_OFF 1001u
#define FZ_DP_A_LEN (FZ_DP_PAGE + 13)
#define FZ_DP_C_OFF (FZ_DP_A_OFF + FZ_DP_A_LEN + 517)
#define FZ_DP_C_LEN 1500u
#define FZ_DP_B_OFF 8000u
#define FZ_DP_B_LEN (FZ_DP_RW_LEN - FZ_DP_B_OFF)

/* fuzz_dummy: flags of an input with op REPLICA_DESC whose body is a reply for the dummy's decoder. */
#define FZ_DUMMY_REPLY 0x8000

#endif
