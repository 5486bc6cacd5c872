/* Fuzz target: the master's RPC dispatcher, stateful. An input is a sequence of frames
 *   u8 opcode (bit 7: patch), [u8 at, with patch], u16 LE body length, body (cut short by the input's end)
 * run in order through mc_master_dispatch on one in-process master, so a mount, a put and a lookup in
 * one input see each other. With the patch bit, the first 8 bytes of the previous frame's reply are
 * copied into the body at offset `at` before dispatch: an extent id that RESERVE_EXTENT returned (the
 * master makes them from its clock) reaches COMMIT_PUT and RELEASE_EXTENT that way. Every opcode below
 * 128 is reachable (unknown ones must answer NOT_SUPPORTED). After
 * each input the master is reset: every client expired (its segments unmounted and swept, its extents
 * released), every remaining segment unmounted, every object removed.
 * MC_FUZZ_SKIP_REGEX=1 skips the two regex opcodes (24, 32) for campaigns run while a regex defect is
 * open; the committed corpus and tests/fuzz/master.dict keep them.
 * Sleeping is free in this binary (nanosleep is interposed and only yields): a mount under a name held by
 * another client probes the holder, and the probe's pauses between refused connections would otherwise
 * make such inputs hundreds of times slower than the rest. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_common.h"
#include "master/master_int.h"
#include "mooncake/store_errors.h"

#define MAX_FRAMES 64
#define REPLY_MAX (256u << 20) /* far above what any sane input should produce */

int nanosleep(const struct timespec *req, struct timespec *rem) {
  (void)req;
  if (rem) rem->tv_sec = 0, rem->tv_nsec = 0;
  sched_yield();
  return 0;
}

static struct mc_master *master;
static int skip_regex;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!master) master = fz_master_start(NULL), skip_regex = fz_env_flag("MC_FUZZ_SKIP_REGEX");
  fz_quiet();
  struct fz_in in = {data, size, 0};
  struct mc_wbuf reply = {0};
  uint8_t prev[8] = {0}, body[65535];
  for (int f = 0; f < MAX_FRAMES && fz_left(&in); f++) {
    uint8_t b = fz_u8(&in), op = b & 0x7f, at = b & 0x80 ? fz_u8(&in) : 0;
    size_t len;
    const uint8_t *p = fz_take(&in, fz_u16(&in), &len);
    if (len) memcpy(body, p, len);
    for (size_t i = 0; b & 0x80 && i < 8 && at + i < len; i++) body[at + i] = prev[i];
    if (skip_regex && (op == MC_OP_GET_REPLICA_LIST_BY_REGEX || op == MC_OP_REMOVE_BY_REGEX)) continue;
    reply.len = 0;
    int rc = mc_master_dispatch(master, op, body, len, &reply);
    if (rc > 0 || (rc && reply.len) || reply.len > REPLY_MAX) abort(); /* statuses are 0 or negative; errors carry no body */
    if (reply.len >= 8) memcpy(prev, reply.p, 8);
  }
  mc_w_free(&reply);
  fz_master_reset(master);
  return 0;
}
