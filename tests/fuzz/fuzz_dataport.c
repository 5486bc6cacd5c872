/* Fuzz target: the TE data port, through a socket. One engine in this process registers two buffers for
 * remote access and one private one inside a mapping fenced by PROT_NONE pages; the rest of the mapping
 * is random canary bytes. Each input is written to the engine's TCP data port over loopback (one
 * connection, then a half-close) and the reply read until the server closes (bounded). Then:
 *  - no byte of the mapping outside the two remote buffers changed (canaries, the private buffer);
 *  - the reply holds no 8-byte run of those bytes (a read outside the remote buffers leaks them: the
 *    canaries are random per process, so no input can spell them by chance).
 * The input is sent as is, except that a request header (24 bytes: u64 length, u64 address, opcode
 * byte, flags byte, 6 more) whose flags byte has bit 0 set gets its address relocated into the mapping
 * (offset modulo the mapping's size, guard pages included), so that short inputs reach the registered
 * buffers and their edges. A WRITE's payload (its length, or what is left of the input) follows its
 * header. Over-reads shorter than 8 bytes are not detected. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "fuzz_common.h"

#define HDR 24
#define RW_LEN FZ_DP_RW_LEN
#define A_OFF FZ_DP_A_OFF
#define A_LEN FZ_DP_A_LEN
#define C_OFF FZ_DP_C_OFF
#define C_LEN FZ_DP_C_LEN
#define B_OFF FZ_DP_B_OFF
#define B_LEN FZ_DP_B_LEN
#define WIN_SLOTS 32768 /* open-addressing table of the 8-byte runs that must never be sent */
#define REPLY_TIMEOUT_MS 3000

static uint8_t *map, *rw, *snap;
static uint16_t port;
static uint64_t wins[WIN_SLOTS];
static uint8_t win_used[WIN_SLOTS];

static int allowed(size_t off) {
  return (off >= A_OFF && off < A_OFF + A_LEN) || (off >= B_OFF && off < B_OFF + B_LEN);
}

static size_t slot_of(uint64_t w) { return (size_t)((w * 0x9E3779B97F4A7C15ull) >> 49) % WIN_SLOTS; }

static void win_add(uint64_t w) {
  size_t i = slot_of(w);
  while (win_used[i] && wins[i] != w) i = (i + 1) % WIN_SLOTS;
  win_used[i] = 1, wins[i] = w;
}

static int win_has(uint64_t w) {
  for (size_t i = slot_of(w); win_used[i]; i = (i + 1) % WIN_SLOTS)
    if (wins[i] == w) return 1;
  return 0;
}

static void setup(void) {
  transfer_engine_t e = fz_engine(&port, NULL);
  map = mmap(NULL, FZ_DP_MAP_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) abort();
  rw = map + FZ_DP_PAGE;
  if (mprotect(rw, RW_LEN, PROT_READ | PROT_WRITE)) abort();
  for (size_t off = 0; off < RW_LEN;) {
    ssize_t r = getrandom(rw + off, RW_LEN - off, 0);
    if (r <= 0) abort();
    off += (size_t)r;
  }
  snap = malloc(RW_LEN);
  memcpy(snap, rw, RW_LEN);
  for (size_t off = 0; off + 8 <= RW_LEN; off++) {
    int ok = 1;
    for (size_t k = 0; k < 8 && ok; k++) ok = !allowed(off + k);
    uint64_t w;
    memcpy(&w, rw + off, 8);
    if (ok) win_add(w);
  }
  if (registerLocalMemory(e, rw + A_OFF, A_LEN, "cpu:0", 1) || registerLocalMemory(e, rw + B_OFF, B_LEN, "cpu:0", 1) ||
      registerLocalMemory(e, rw + C_OFF, C_LEN, "cpu:0", 0))
    abort();
}

struct scan {
  uint64_t last; /* the last 8 bytes seen, across chunks */
  size_t seen;
};

static int on_reply(void *ctx, const uint8_t *p, size_t n) {
  struct scan *s = ctx;
  for (size_t i = 0; i < n; i++) {
    s->last = s->last >> 8 | (uint64_t)p[i] << 56;
    if (++s->seen >= 8 && win_has(s->last)) abort(); /* bytes from outside the remote buffers were sent */
  }
  return 0;
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The bytes to send: the input with flagged request addresses relocated into the mapping. */
static uint8_t *build(const uint8_t *data, size_t size) {
  uint8_t *out = malloc(size ? size : 1);
  struct fz_in in = {data, size, 0};
  size_t o = 0;
  while (fz_left(&in) >= HDR) {
    size_t got;
    const uint8_t *h = fz_take(&in, HDR, &got);
    memcpy(out + o, h, HDR);
    struct fz_in hv = {h, HDR, 0};
    uint64_t len = fz_u64(&hv), addr = fz_u64(&hv);
    if (h[17] & 1) put64(out + o + 8, (uint64_t)(uintptr_t)map + addr % FZ_DP_MAP_LEN);
    o += HDR;
    if (!(h[16] & 0x80) || (h[16] & 0x7f) > 1) break; /* the server drops such a connection */
    if ((h[16] & 0x7f) == 1) {
      const uint8_t *pl = fz_take(&in, len, &got);
      if (got) memcpy(out + o, pl, got);
      o += got;
    }
  }
  size_t rest;
  const uint8_t *tail = fz_take(&in, fz_left(&in), &rest);
  if (rest) memcpy(out + o, tail, rest);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!map) setup();
  fz_quiet();
  uint8_t *req = build(data, size);
  struct scan s = {0, 0};
  fz_exchange(port, req, size, REPLY_TIMEOUT_MS, 0, on_reply, &s);
  free(req);
  for (size_t off = 0; off < RW_LEN; off++)
    if (!allowed(off) && rw[off] != snap[off]) abort(); /* a write landed outside the remote buffers */
  return 0;
}
