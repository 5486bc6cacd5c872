/* Fuzz target: a master snapshot file (--restore_snapshot, src/master/snapshot.c; docs/ha.md, "Snapshots").
 * Byte 0 picks the form, the rest is the file's content:
 *   bit 0 clear: the rest is framed as a snapshot the checksum accepts: magic, this master's format version (bit 1 set:
 *     the next 4 bytes are the version instead), the bytes, and the SHA-256 of it all, so the decoder
 *     behind the checksum sees lying counts and lengths;
 *   bit 0 set: the rest is the whole file as it is (magic, version and checksum checks).
 *   bit 2: a snapshot that loads is also restored into an in-process master: every segment it lists (up to
 *     8, of at most 1 GiB) is remounted there under its id, base and size, which installs its entries.
 * Checked besides "no crash, no sanitizer report": a file that loads is well-formed (read again with the codec,
 * to its last byte); a refusal says it refused; after a restore, the master's own snapshot loads again, holds no more entries than the file,
 * and its entries are inside their segments and do not overlap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fuzz_common.h"
#include "master/master_int.h"
#include "net/codec.h"
#include "proto/proto.h"

#define MAX_SEGS 8
#define MAX_SEG_SIZE (1ull << 30)
#define HEADER_AFTER_MAGIC (4 + 8 + 8) /* version, next seq, created */

static struct mc_master *master;
static char path[64];

static void remove_file(void) { unlink(path); }

static void write_file(const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f)) abort();
}

/* The segments and entries of a snapshot image that loaded (so it is well-formed), read with the codec. */
struct seg_view {
  struct mc_uuid id;
  uint64_t base, size;
};
struct ent_view {
  uint32_t seg; /* index into the segments, or UINT32_MAX when not listed */
  uint64_t off, len;
};

static uint32_t read_image(const uint8_t *p, size_t n, struct seg_view *segs, uint32_t cap, struct ent_view **ents,
                           uint64_t *nents) {
  uint32_t version;
  memcpy(&version, p + 8, 4); /* (little-endian, as the hosts this runs on) */
  struct mc_rbuf_rd r;
  mc_r_init(&r, p + 8 + HEADER_AFTER_MAGIC, n - 8 - HEADER_AFTER_MAGIC - 32);
  uint32_t ns = mc_r_u32(&r), kept = 0;
  struct seg_view *all = calloc(ns ? ns : 1, sizeof(*all));
  for (uint32_t i = 0; i < ns && !r.err; i++) {
    all[i].id = mc_get_uuid(&r);
    all[i].base = mc_r_u64(&r);
    all[i].size = mc_r_u64(&r);
    uint32_t nl;
    mc_r_blob(&r, &nl);
  }
  uint64_t ne = mc_r_u64(&r);
  if (r.err || ne > r.len) abort(); /* it loaded: the decoder accepted these counts */
  *ents = calloc(ne ? ne : 1, sizeof(**ents));
  for (uint64_t i = 0; i < ne && !r.err; i++) {
    struct mc_uuid sid = mc_get_uuid(&r);
    uint32_t kl;
    mc_r_blob(&r, &kl);
    struct ent_view *e = &(*ents)[i];
    e->off = mc_r_u64(&r);
    e->len = mc_r_u64(&r);
    (void)mc_r_u64(&r), (void)mc_r_u8(&r), (void)mc_r_u64(&r);
    if (version >= 2) (void)mc_r_blob(&r, &kl); /* the key group */
    e->seg = UINT32_MAX;
    for (uint32_t s = 0; s < ns; s++)
      if (all[s].id.hi == sid.hi && all[s].id.lo == sid.lo) e->seg = s;
  }
  if (r.err || r.off != r.len) abort();
  *nents = ne;
  for (uint32_t i = 0; i < ns && kept < cap; i++) segs[kept++] = all[i];
  free(all);
  return kept;
}

static int by_seg_off(const void *a, const void *b) {
  const struct ent_view *x = a, *y = b;
  if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Restores the loaded snapshot x into the master, then checks the master's own snapshot. */
static void restore(struct mc_restore *x, const uint8_t *img, size_t n, uint64_t file_entries) {
  struct seg_view segs[MAX_SEGS];
  struct ent_view *ents;
  uint64_t ne;
  uint32_t ns = read_image(img, n, segs, MAX_SEGS, &ents, &ne);
  free(ents);
  master->restore = x;
  struct mc_uuid client = {0xf022f022f022f022ull, 1};
  char names[MAX_SEGS][32];
  for (uint32_t i = 0; i < ns; i++) {
    if (!segs[i].size || segs[i].size > MAX_SEG_SIZE) continue;
    snprintf(names[i], sizeof(names[i]), "127.0.0.1:%u", 30000 + i);
    struct mc_segment_rec rec = {.id = segs[i].id, .name = names[i], .base = segs[i].base, .size = segs[i].size,
                                 .te_endpoint = names[i], .protocol = "tcp", .zone = "", .host_id = "host-a",
                                 .probe_addr = ""};
    mc_master_remount(master, &rec, 1, client);
  }
  master->restore = NULL;
  struct mc_wbuf w = {0};
  if (mc_master_snapshot(master, &w)) abort();
  write_file(w.p, w.len);
  struct mc_restore *again = NULL;
  char err[256];
  if (mc_restore_load(path, &again, err, sizeof(err))) abort(); /* the master's own snapshot must load */
  mc_restore_free(again);
  ns = read_image(w.p, w.len, segs, MAX_SEGS, &ents, &ne);
  if (ne > file_entries) abort(); /* nothing installed that the file did not hold */
  qsort(ents, ne, sizeof(*ents), by_seg_off);
  for (uint64_t i = 0; i < ne; i++) {
    struct ent_view *e = &ents[i];
    if (e->seg >= ns || e->len > segs[e->seg].size || e->off > segs[e->seg].size - e->len) abort();
    if (i && ents[i - 1].seg == e->seg && ents[i - 1].off + ents[i - 1].len > e->off) abort(); /* overlap */
  }
  free(ents);
  mc_w_free(&w);
  fz_master_reset(master);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!master) {
    master = fz_master_start(NULL);
    snprintf(path, sizeof(path), "/tmp/fuzz_snapshot.%d", (int)getpid());
    atexit(remove_file);
  }
  fz_quiet();
  if (!size) return 0;
  uint8_t form = data[0];
  const uint8_t *body = data + 1;
  size_t blen = size - 1;
  struct mc_wbuf img = {0};
  if (form & 1) {
    mc_w_bytes_raw(&img, body, blen);
  } else {
    uint32_t version = MC_SNAPSHOT_VERSION;
    if ((form & 2) && blen >= 4) memcpy(&version, body, 4), body += 4, blen -= 4;
    mc_w_bytes_raw(&img, "MCSNAP\0\1", 8);
    mc_w_u32(&img, version);
    mc_w_bytes_raw(&img, body, blen);
    uint8_t d[32];
    unsigned dl = 0;
    if (EVP_Digest(img.p, img.len, d, &dl, EVP_sha256(), NULL) != 1) abort();
    mc_w_bytes_raw(&img, d, sizeof(d));
  }
  write_file(img.p, img.len);
  struct mc_restore *x = NULL;
  char err[256];
  if (!mc_restore_load(path, &x, err, sizeof(err))) {
    struct seg_view segs[MAX_SEGS];
    struct ent_view *ents;
    uint64_t ne;
    read_image(img.p, img.len, segs, MAX_SEGS, &ents, &ne); /* (aborts unless it is well-formed) */
    free(ents);
    if (form & 4) restore(x, img.p, img.len, ne);
    mc_restore_free(x);
  } else if (!strstr(err, "refused")) {
    abort(); /* a refusal says so */
  }
  mc_w_free(&img);
  return 0;
}
