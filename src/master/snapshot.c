/* Snapshots of the object table (docs/ha.md, "Snapshots"): a file with every complete replica of every
 * object (key, size, pins, segment id, offset and length of its space) and the segments they sit on. A
 * master started with --restore_snapshot=FILE reads and checks the whole file before it serves (a file of a
 * newer format, a bad checksum, a truncated or malformed file: the master refuses to start, and nothing of
 * it is loaded), keeps the entries per segment, and installs a segment's entries when its holder remounts
 * it with the same id (the bytes are still in that holder's memory), as a holder's own index upload would.
 *
 * File layout (little-endian, codec.h):
 *   magic "MCSNAP\0\1" | u32 format version | u64 next object seq | u64 created (unix ms)
 *   u32 segments, each: uuid id | u64 base | u64 size | str name
 *   u64 entries, each:  uuid segment | blob key | u64 offset | u64 length | u64 size | u8 hard pin |
 *                       u64 soft pin ttl ms | str key group ("" = none; from version 2 on)
 *   32 bytes: SHA-256 of everything before them
 * A master reads its own format version and every older one. Version 1 is the first; version 2 added the
 * key group of each entry (a version 1 file restores its objects ungrouped). */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "master/master_int.h"
#include "master_core/tlsf.h"
#include "mooncake/store_errors.h"
#include "net/codec.h"
#include "proto/proto.h"

#define MAGIC "MCSNAP\0\1"
#define MAGIC_LEN 8
#define HEADER_LEN (MAGIC_LEN + 4 + 8 + 8)
#define DIGEST_LEN 32
#define MAX_FILE_BYTES (64ull << 30) /* a snapshot larger than this is refused unread */
#define ENTRY_MIN_BYTES (16 + 4 + 8 * 3 + 1 + 8) /* (version 1; later versions' entries are longer) */
#define SEG_MIN_BYTES (16 + 8 + 8 + 4)

struct snap_seg {
  struct mc_uuid id;
  uint64_t base, size;
  uint32_t n, cap;
  struct mc_index_entry *e; /* keys point into the restore's file image */
};

struct mc_restore {
  pthread_mutex_t mu;
  uint8_t *image; /* the file (keys point into it) */
  size_t len;
  uint32_t nsegs;
  struct snap_seg *segs;
  uint64_t next_seq, entries;
};

static int digest(const void *p, size_t n, uint8_t out[DIGEST_LEN]) {
  unsigned int len = 0;
  return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 && len == DIGEST_LEN ? 0 : -1;
}

/* ------------------------------------------------------------------ save */

static void put_entries_of_shard(struct shard *sh, struct mc_wbuf *w, uint64_t *n) {
  pthread_mutex_lock(&sh->mu);
  for (uint32_t b = 0; b < sh->nbuckets; b++)
    for (struct object *o = sh->buckets[b]; o; o = o->next)
      for (uint32_t i = 0; i < o->nrep; i++) {
        const struct replica *r = &o->rep[i];
        if (r->status != MC_REPLICA_COMPLETE || !r->seg || !r->blk || !seg_readable(r->seg)) continue;
        uint64_t off, len;
        mc_tlsf_block_range(r->blk, &off, &len);
        mc_put_uuid(w, r->seg->id);
        mc_w_blob(w, o->key, o->klen);
        mc_w_u64(w, r->off);
        mc_w_u64(w, len);
        mc_w_u64(w, o->size);
        mc_w_u8(w, o->hard_pin);
        mc_w_u64(w, o->soft_pin_ttl_ms);
        mc_w_str(w, mc_kgroup_name(o->kg));
        (*n)++;
      }
  pthread_mutex_unlock(&sh->mu);
}

int mc_master_snapshot(struct mc_master *m, struct mc_wbuf *out) {
  /* the entries first, one shard at a time (shard locks are taken before seg_mu elsewhere: never under it) */
  struct mc_wbuf e = {0};
  uint64_t n = 0;
  for (uint32_t s = 0; s < MC_NSHARDS; s++) put_entries_of_shard(&m->shards[s], &e, &n);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  mc_w_bytes_raw(out, MAGIC, MAGIC_LEN);
  mc_w_u32(out, MC_SNAPSHOT_VERSION);
  mc_w_u64(out, atomic_load(&m->next_seq));
  mc_w_u64(out, (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
  pthread_rwlock_rdlock(&m->seg_mu);
  mc_w_u32(out, m->nsegs);
  for (uint32_t i = 0; i < m->nsegs; i++) {
    const struct mseg *s = m->segs[i];
    mc_put_uuid(out, s->id);
    mc_w_u64(out, s->base);
    mc_w_u64(out, s->size);
    mc_w_str(out, s->name);
  }
  pthread_rwlock_unlock(&m->seg_mu);
  mc_w_u64(out, n);
  mc_w_bytes_raw(out, e.p, e.len);
  mc_w_free(&e);
  uint8_t d[DIGEST_LEN];
  if (digest(out->p, out->len, d)) return MC_INTERNAL_ERROR;
  mc_w_bytes_raw(out, d, DIGEST_LEN);
  LOG_INFO("action=snapshot, segments=%u, entries=%llu, bytes=%zu", m->nsegs, (unsigned long long)n, out->len);
  return 0;
}

/* ------------------------------------------------------------------ load */

static int fail(char *err, size_t errlen, const char *path, const char *why) {
  snprintf(err, errlen, "snapshot %s refused: %s; nothing of it was loaded", path, why);
  return MC_INVALID_PARAMS;
}

/* x->segs is sorted by id once decoded, so each entry and each remount finds its segment by bisection. */
static int by_id(const void *a, const void *b) {
  const struct mc_uuid *x = a, *y = b; /* (the id is a snap_seg's first member) */
  return x->hi != y->hi ? (x->hi > y->hi ? 1 : -1) : x->lo != y->lo ? (x->lo > y->lo ? 1 : -1) : 0;
}

static struct snap_seg *seg_of(struct mc_restore *x, struct mc_uuid id) {
  return x->nsegs ? bsearch(&id, x->segs, x->nsegs, sizeof(*x->segs), by_id) : NULL;
}

void mc_restore_free(struct mc_restore *x) {
  if (!x) return;
  for (uint32_t i = 0; i < x->nsegs; i++) mc_free(x->segs[i].e);
  mc_free(x->segs);
  mc_free(x->image);
  pthread_mutex_destroy(&x->mu);
  mc_free(x);
}

/* Decodes the checked image into x (0), or says why it is malformed (-1). */
static int decode(struct mc_restore *x, const uint8_t *p, size_t len, uint32_t version, uint64_t *skipped,
                  const char **why) {
  struct mc_rbuf_rd r;
  mc_r_init(&r, p + MAGIC_LEN + 4, len - MAGIC_LEN - 4);
  x->next_seq = mc_r_u64(&r);
  (void)mc_r_u64(&r); /* created */
  uint32_t ns = mc_r_count(&r, SEG_MIN_BYTES);
  x->segs = mc_calloc(ns ? ns : 1, sizeof(*x->segs));
  for (uint32_t i = 0; i < ns && !r.err; i++) {
    struct snap_seg *s = &x->segs[i];
    s->id = mc_get_uuid(&r);
    s->base = mc_r_u64(&r);
    s->size = mc_r_u64(&r);
    uint32_t nl;
    mc_r_blob(&r, &nl);
    x->nsegs = i + 1;
  }
  if (!r.err && x->nsegs) qsort(x->segs, x->nsegs, sizeof(*x->segs), by_id);
  for (uint32_t i = 1; i < x->nsegs && !r.err; i++)
    if (!by_id(&x->segs[i - 1].id, &x->segs[i].id)) *why = "a segment is listed twice", r.err = 1;
  uint64_t ne = mc_r_u64(&r);
  if (!r.err && ne > (r.len - r.off) / ENTRY_MIN_BYTES) *why = "more entries counted than the file holds", r.err = 1;
  for (uint64_t i = 0; i < ne && !r.err; i++) {
    struct mc_uuid sid = mc_get_uuid(&r);
    struct mc_index_entry e;
    e.key = mc_r_blob(&r, &e.klen);
    e.offset = mc_r_u64(&r);
    e.length = mc_r_u64(&r);
    e.size = mc_r_u64(&r);
    e.hard_pin = mc_r_u8(&r);
    e.soft_pin_ttl_ms = mc_r_u64(&r);
    e.group = NULL;
    e.glen = 0;
    if (version >= 2) {
      const char *g = (const char *)mc_r_blob(&r, &e.glen);
      if (!r.err && (e.glen > MC_STR_MAX || (e.glen && memchr(g, 0, e.glen)))) *why = "a malformed key group", r.err = 1;
      e.group = e.glen ? g : NULL;
    }
    if (r.err) break;
    struct snap_seg *s = seg_of(x, sid);
    if (!e.klen || e.size > e.length || !s || e.length > s->size || e.offset > s->size - e.length) {
      (*skipped)++; /* (a segment mounted while the snapshot was taken is not listed) */
      continue;
    }
    if (s->n == s->cap) {
      s->cap = s->cap ? 2 * s->cap : 64;
      s->e = mc_realloc(s->e, sizeof(*s->e) * s->cap);
    }
    s->e[s->n++] = e;
    x->entries++;
  }
  if (!r.err && r.off != r.len) *why = "bytes after the last entry", r.err = 1;
  if (r.err && !*why) *why = "truncated or malformed";
  return r.err ? -1 : 0;
}

int mc_restore_load(const char *path, struct mc_restore **out, char *err, size_t errlen) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    char why[128];
    snprintf(why, sizeof(why), "cannot open it: %s", strerror(errno));
    return fail(err, errlen, path, why);
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE_BYTES) {
    close(fd);
    return fail(err, errlen, path, "not a regular file of at most 64 GiB");
  }
  size_t len = (size_t)st.st_size, got = 0;
  uint8_t *p = mc_malloc(len ? len : 1);
  while (got < len) {
    ssize_t k = read(fd, p + got, len - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  const char *why = NULL;
  uint8_t d[DIGEST_LEN];
  uint32_t version = 0;
  if (got != len) why = "it could not be read whole";
  else if (len < MAGIC_LEN || memcmp(p, MAGIC, MAGIC_LEN)) why = "not a mooncake master snapshot (bad magic)";
  else if (len < HEADER_LEN + 4 + 8 + DIGEST_LEN) why = "truncated (shorter than its header)";
  if (!why) {
    memcpy(&version, p + MAGIC_LEN, 4);
    version = le32toh(version);
  }
  char vwhy[160];
  if (!why && version == 0) why = "its format version 0 is not a valid version";
  if (!why && version > MC_SNAPSHOT_VERSION) {
    snprintf(vwhy, sizeof(vwhy), "its format version %u is newer than this master's (%u): restore it with a newer master",
             version, MC_SNAPSHOT_VERSION);
    why = vwhy;
  }
  if (!why && (digest(p, len - DIGEST_LEN, d) || memcmp(d, p + len - DIGEST_LEN, DIGEST_LEN)))
    why = "its SHA-256 does not match (corrupt or truncated)";
  struct mc_restore *x = mc_calloc(1, sizeof(*x));
  pthread_mutex_init(&x->mu, NULL);
  x->image = p;
  x->len = len;
  uint64_t skipped = 0;
  if (!why) decode(x, p, len - DIGEST_LEN, version, &skipped, &why);
  if (why) {
    mc_restore_free(x);
    return fail(err, errlen, path, why);
  }
  LOG_INFO("snapshot %s (format version %u): %u segments, %llu entries (%llu skipped: a segment not listed or a "
           "range outside it); each segment's entries are installed when its holder remounts it",
           path, version, x->nsegs, (unsigned long long)x->entries, (unsigned long long)skipped);
  *out = x;
  return 0;
}

uint64_t mc_restore_next_seq(const struct mc_restore *x) { return x ? x->next_seq : 0; }

void mc_restore_segment(struct mc_master *m, struct mc_uuid client, const struct mc_segment_rec *rec) {
  struct mc_restore *x = m->restore;
  if (!x) return;
  pthread_mutex_lock(&x->mu);
  struct snap_seg *s = seg_of(x, rec->id);
  struct snap_seg take = {0};
  if (s && s->n && s->base == rec->base && s->size == rec->size) {
    take = *s;
    s->e = NULL;
    s->n = s->cap = 0;
  }
  pthread_mutex_unlock(&x->mu);
  if (!take.n) return;
  uint32_t installed = mc_master_restore_entries(m, client, rec->id, take.e, take.n);
  char id[37];
  mc_uuid_str(client, id);
  LOG_INFO("client_id=%s, segment_name=%s, action=restore_snapshot_entries, entries=%u, installed=%u", id, rec->name,
           take.n, installed);
  mc_free(take.e);
}
