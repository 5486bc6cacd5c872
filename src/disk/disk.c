/* The local-disk object store (disk.h; the design, the format and what a crash leaves: docs/disk-tier.md).
 *
 * <dir>/FORMAT         "mooncake-disk-format <version>\n", written last when the layout is created
 * <dir>/LOCK           flock'ed by the one store that has the directory open
 * <dir>/obj/<xx>/<id>  an object: <id> is 16 hex digits of a 64-bit sequence number, xx its low byte
 * <dir>/obj/<xx>/<id>.tmp  the same while being written; renamed to <id> to commit
 *
 * An object file is a header block (MC_DISK_BLOCK bytes) and the value padded to a whole block. The header
 * (little-endian): magic[8] "MCDSKOBJ", u32 format version, u32 header block size, u64 id (= the file's
 * name), u64 value length, u32 value CRC-32C, u32 key length, 20 reserved bytes (zero), u32 header CRC-32C
 * (of bytes 0..59 and the key), then the key at byte 64. A key's later object (a higher id) wins over an
 * earlier one, in memory as after a recovery. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "disk/disk.h"

#define FANOUT 256
#define RING_DEPTH 64
#define SUBMIT_RETRIES 5000 /* 1 ms apart: a ring refused with EAGAIN/EBUSY for 5 s fails the operation */
#define MAX_SLOTS 64
#define HDR_MAGIC "MCDSKOBJ"
#define HDR_KEY_OFF 64
#define HDR_CRC_OFF 60
#define FORMAT_FILE "FORMAT"
#define FORMAT_TAG "mooncake-disk-format"

struct lane {
  struct io_uring ring;
  char *buf; /* nslots x chunk bytes, registered with the ring when fixed */
  int fixed;
  int ring_ok;
  struct lane *next_free;
};

struct ent {
  struct ent *next;
  uint64_t hash, id, len;
  uint32_t klen;
  char key[];
};

struct mc_disk {
  int dirfd, lockfd;
  int fan[FANOUT];
  uint64_t quota;
  unsigned chunk, nslots, nlanes;
  struct lane *lanes;
  struct lane *free_lanes;
  pthread_mutex_t lane_mu;
  pthread_cond_t lane_cv;
  pthread_mutex_t mu; /* the index and the space counters */
  struct ent **tab;
  size_t nb, n;
  uint64_t used, value_bytes;
  uint64_t seed;
  _Atomic uint64_t next_id;
  _Atomic uint64_t broken, io_errors;
};

/* ---- little helpers ---- */

static void put32(char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (char)(v >> (8 * i));
}
static void put64(char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (char)(v >> (8 * i));
}
static uint32_t get32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)(unsigned char)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)(unsigned char)p[i] << (8 * i);
  return v;
}

static uint64_t pad_block(uint64_t n) { return (n + MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK; }
static uint64_t file_size(uint64_t len) { return MC_DISK_BLOCK + pad_block(len); }

static void obj_name(char *out, uint64_t id, int tmp) {
  snprintf(out, 32, "%016" PRIx64 "%s", id, tmp ? ".tmp" : "");
}

/* 1: an object name, 2: a temporary's name, 0: neither; *id its number */
static int parse_name(const char *s, uint64_t *id) {
  size_t n = strlen(s);
  if (n != 16 && !(n == 20 && !strcmp(s + 16, ".tmp"))) return 0;
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) {
    char c = s[i];
    if (c >= '0' && c <= '9') v = v << 4 | (uint64_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v = v << 4 | (uint64_t)(c - 'a' + 10);
    else return 0;
  }
  *id = v;
  return n == 16 ? 1 : 2;
}

static int fan_of(uint64_t id) { return (int)(id & (FANOUT - 1)); }

static int full_code(int err) { return err == -ENOSPC || err == -EDQUOT ? MC_DISK_EFULL : err; }

/* ---- the index: key -> (id, length), chained, seeded hash ---- */

static uint64_t key_hash(const struct mc_disk *d, const char *k, size_t n) {
  uint64_t h = d->seed ^ 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

static struct ent **idx_slot(struct mc_disk *d, const char *k, size_t n, uint64_t h) {
  struct ent **pp = &d->tab[h & (d->nb - 1)];
  for (; *pp; pp = &(*pp)->next)
    if ((*pp)->hash == h && (*pp)->klen == n && !memcmp((*pp)->key, k, n)) break;
  return pp;
}

static void idx_grow(struct mc_disk *d) {
  size_t nb = d->nb * 2;
  struct ent **t = mc_calloc(nb, sizeof(*t));
  for (size_t i = 0; i < d->nb; i++)
    for (struct ent *e = d->tab[i], *nx; e; e = nx) {
      nx = e->next;
      e->next = t[e->hash & (nb - 1)];
      t[e->hash & (nb - 1)] = e;
    }
  mc_free(d->tab);
  d->tab = t;
  d->nb = nb;
}

/* Under mu: inserts a key known to be absent (the caller has counted its space in used). */
static void idx_insert(struct mc_disk *d, const char *k, size_t n, uint64_t h, uint64_t id, uint64_t len) {
  if (d->n >= d->nb) idx_grow(d);
  struct ent *e = mc_malloc(sizeof(*e) + n);
  e->hash = h;
  e->id = id;
  e->len = len;
  e->klen = (uint32_t)n;
  memcpy(e->key, k, n);
  e->next = d->tab[h & (d->nb - 1)];
  d->tab[h & (d->nb - 1)] = e;
  d->n++;
  d->value_bytes += len;
}

/* Under mu: unlinks *pp from the index and frees it, giving back its space. */
static void idx_drop(struct mc_disk *d, struct ent **pp) {
  struct ent *e = *pp;
  *pp = e->next;
  d->n--;
  d->used -= file_size(e->len);
  d->value_bytes -= e->len;
  mc_free(e);
}

/* ---- lanes: an io_uring with its registered bounce buffers, one operation at a time ---- */

/* The lane's ring, its buffers registered with it when the kernel allows (else plain reads and writes). */
static int lane_ring(struct mc_disk *d, struct lane *l) {
  int r = io_uring_queue_init(RING_DEPTH, &l->ring, 0);
  if (r < 0) return r;
  l->ring_ok = 1;
  struct iovec iov[MAX_SLOTS];
  for (unsigned i = 0; i < d->nslots; i++) {
    iov[i].iov_base = l->buf + (size_t)i * d->chunk;
    iov[i].iov_len = d->chunk;
  }
  r = io_uring_register_buffers(&l->ring, iov, d->nslots);
  l->fixed = r == 0;
  if (r) LOG_INFO("disk: io_uring_register_buffers: %s; unregistered buffers are used", strerror(-r));
  return 0;
}

static int lane_init(struct mc_disk *d, struct lane *l) {
  size_t bytes = (size_t)d->nslots * d->chunk;
  l->buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (l->buf == MAP_FAILED) {
    l->buf = NULL;
    return -ENOMEM;
  }
  return lane_ring(d, l);
}

/* A ring that refused to take its queue holds entries it will never run: it is closed (the kernel waits
 * for what it did take) and opened again, so the lane's next operation starts clean. */
static void lane_reset(struct mc_disk *d, struct lane *l) {
  if (l->ring_ok) io_uring_queue_exit(&l->ring);
  l->ring_ok = 0;
  l->fixed = 0;
  int r = lane_ring(d, l);
  if (r) LOG_ERROR("disk: reopening an io_uring after a refused submission: %s", strerror(-r));
}

static void lane_fini(struct mc_disk *d, struct lane *l) {
  if (l->ring_ok) io_uring_queue_exit(&l->ring);
  if (l->buf) munmap(l->buf, (size_t)d->nslots * d->chunk);
}

static struct lane *lane_get(struct mc_disk *d) {
  pthread_mutex_lock(&d->lane_mu);
  while (!d->free_lanes) pthread_cond_wait(&d->lane_cv, &d->lane_mu);
  struct lane *l = d->free_lanes;
  d->free_lanes = l->next_free;
  pthread_mutex_unlock(&d->lane_mu);
  return l;
}

static void lane_put(struct mc_disk *d, struct lane *l) {
  pthread_mutex_lock(&d->lane_mu);
  l->next_free = d->free_lanes;
  d->free_lanes = l;
  pthread_cond_signal(&d->lane_cv);
  pthread_mutex_unlock(&d->lane_mu);
}

/* One operation's chunks: chunk i is the file range span(i); a write fills chunk i's buffer just before it
 * goes out (in order of i), a read hands chunk i's data to drain once chunks 0..i-1 have been drained. */
struct job {
  int fd, write;
  uint64_t n;
  void (*span)(void *arg, uint64_t i, uint64_t *off, uint32_t *len);
  int (*fill)(void *arg, uint64_t i, char *buf, uint32_t len);
  int (*drain)(void *arg, uint64_t i, const char *buf, uint32_t len);
  void *arg;
};

struct slot {
  uint64_t off;
  uint32_t len, done;
  int busy, ready;
};

static void slot_submit(struct mc_disk *d, struct lane *l, const struct job *j, unsigned k, struct slot *s) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
  while (!sqe) { /* (the ring holds RING_DEPTH >= nslots entries: only a full submission queue gets here) */
    io_uring_submit(&l->ring);
    sqe = io_uring_get_sqe(&l->ring);
  }
  char *buf = l->buf + (size_t)k * d->chunk + s->done;
  unsigned len = s->len - s->done;
  uint64_t off = s->off + s->done;
  if (j->write && l->fixed) io_uring_prep_write_fixed(sqe, j->fd, buf, len, off, (int)k);
  else if (j->write) io_uring_prep_write(sqe, j->fd, buf, len, off);
  else if (l->fixed) io_uring_prep_read_fixed(sqe, j->fd, buf, len, off, (int)k);
  else io_uring_prep_read(sqe, j->fd, buf, len, off);
  io_uring_sqe_set_data64(sqe, k);
}

/* Runs the job with up to nslots chunks in flight: 0, the first error (a negated errno value, or
 * MC_DISK_ECORRUPT when a read ends before the file should, or what fill/drain returned). Returns only when
 * nothing is in flight, so the lane's buffers are free again. */
static int lane_run(struct mc_disk *d, struct lane *l, const struct job *j) {
  if (!l->ring_ok) lane_reset(d, l); /* (a reset that could not reopen it) */
  if (!l->ring_ok) return -EIO;
  struct slot s[MAX_SLOTS] = {0};
  unsigned ns = d->nslots, inflight = 0;
  uint64_t next_sub = 0, next_drain = 0;
  int err = 0;
  unsigned refused = 0; /* submissions refused with EAGAIN/EBUSY in a row */
  for (;;) {
    while (!j->write && next_drain < next_sub) {
      struct slot *x = &s[next_drain % ns];
      if (!x->ready) break;
      if (!err) err = j->drain(j->arg, next_drain, l->buf + (size_t)(next_drain % ns) * d->chunk, x->len);
      x->ready = x->busy = 0;
      next_drain++;
    }
    while (!err && next_sub < j->n && !s[next_sub % ns].busy) {
      unsigned k = (unsigned)(next_sub % ns);
      struct slot *x = &s[k];
      j->span(j->arg, next_sub, &x->off, &x->len);
      x->done = 0;
      if (j->write) err = j->fill(j->arg, next_sub, l->buf + (size_t)k * d->chunk, x->len);
      if (err) break;
      slot_submit(d, l, j, k, x);
      x->busy = 1;
      inflight++;
      next_sub++;
    }
    if (!inflight) break;
    int r = io_uring_submit_and_wait(&l->ring, 1);
    if (r == -EAGAIN || r == -EBUSY) { /* the kernel is short of resources: a bounded wait, then an error */
      if (++refused <= SUBMIT_RETRIES) {
        usleep(1000);
        continue;
      }
    }
    if (r < 0 && r != -EINTR) { /* refused for good: what it took is waited for by the reset */
      LOG_ERROR("disk: io_uring_submit_and_wait: %s", strerror(-r));
      lane_reset(d, l);
      return err ? err : r;
    }
    refused = 0;
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&l->ring, head, cqe) {
      seen++;
      unsigned k = (unsigned)io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      struct slot *x = &s[k];
      if ((res == -EAGAIN || res == -EINTR) && !err) {
        slot_submit(d, l, j, k, x);
        continue;
      }
      if (res > 0 && !err && x->done + (uint32_t)res < x->len) { /* a short transfer: the rest again */
        x->done += (uint32_t)res;
        slot_submit(d, l, j, k, x);
        continue;
      }
      inflight--;
      if (res < 0 && !err) err = res;
      if (res == 0 && !err) err = j->write ? -EIO : MC_DISK_ECORRUPT; /* (a file shorter than its header says) */
      if (res >= 0 && j->write) x->busy = 0;
      else if (res > 0 && !err) x->ready = 1;
      else x->busy = 0, x->ready = 0;
    }
    io_uring_cq_advance(&l->ring, seen);
    if (err && !inflight) break;
  }
  return err;
}

/* ---- object headers ---- */

struct hdr {
  uint64_t id, len;
  uint32_t vcrc, klen;
  const char *key;
};

static void hdr_build(char *b, uint64_t id, const char *key, uint32_t klen, uint64_t len, uint32_t vcrc) {
  memset(b, 0, MC_DISK_BLOCK);
  memcpy(b, HDR_MAGIC, 8);
  put32(b + 8, MC_DISK_FORMAT_VERSION);
  put32(b + 12, MC_DISK_BLOCK);
  put64(b + 16, id);
  put64(b + 24, len);
  put32(b + 32, vcrc);
  put32(b + 36, klen);
  memcpy(b + HDR_KEY_OFF, key, klen);
  put32(b + HDR_CRC_OFF, mc_disk_crc32c(mc_disk_crc32c(0, b, HDR_CRC_OFF), key, klen));
}

/* 0 when the block is a whole header of this format (every length bounded by the block), -1 otherwise. */
static int hdr_parse(const char *b, struct hdr *h) {
  if (memcmp(b, HDR_MAGIC, 8) || get32(b + 8) != MC_DISK_FORMAT_VERSION || get32(b + 12) != MC_DISK_BLOCK) return -1;
  uint32_t klen = get32(b + 36);
  if (klen == 0 || klen > MC_DISK_KEY_MAX) return -1;
  if (mc_disk_crc32c(mc_disk_crc32c(0, b, HDR_CRC_OFF), b + HDR_KEY_OFF, klen) != get32(b + HDR_CRC_OFF)) return -1;
  h->id = get64(b + 16);
  h->len = get64(b + 24);
  h->vcrc = get32(b + 32);
  h->klen = klen;
  h->key = b + HDR_KEY_OFF;
  return h->len > UINT64_MAX / 2 ? -1 : 0;
}

/* ---- put ---- */

struct put_ctx {
  const char *key, *val;
  uint32_t klen, chunk;
  uint64_t len, id, nval;
  uint32_t crc;
};

static void put_span(void *arg, uint64_t i, uint64_t *off, uint32_t *len) {
  struct put_ctx *c = arg;
  if (i == c->nval) { /* the header, last: it holds the value's CRC */
    *off = 0;
    *len = MC_DISK_BLOCK;
    return;
  }
  uint64_t pos = i * c->chunk;
  *off = MC_DISK_BLOCK + pos;
  *len = (uint32_t)MC_MIN((uint64_t)c->chunk, pad_block(c->len) - pos);
}

static int put_fill(void *arg, uint64_t i, char *buf, uint32_t len) {
  struct put_ctx *c = arg;
  if (i == c->nval) {
    hdr_build(buf, c->id, c->key, c->klen, c->len, c->crc);
    return 0;
  }
  uint64_t pos = i * c->chunk;
  uint32_t n = (uint32_t)MC_MIN((uint64_t)len, c->len - pos);
  memcpy(buf, c->val + pos, n);
  memset(buf + n, 0, len - n);
  c->crc = mc_disk_crc32c(c->crc, buf, n);
  return 0;
}

static int sync_dir(int fd) { return fsync(fd) ? -errno : 0; }

/* Writes the object's file as <id>.tmp and renames it into place: 0 once it is durable. On failure no file
 * of it is left. */
static int put_file(struct mc_disk *d, struct put_ctx *c) {
  int fan = d->fan[fan_of(c->id)];
  char tmp[32], fin[32];
  obj_name(tmp, c->id, 1);
  obj_name(fin, c->id, 0);
  int fd = openat(fan, tmp, O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -errno;
  int err = 0;
  uint64_t fsize = file_size(c->len);
  /* (the space up front: a full disk fails here, before any data moves) */
  if (fallocate(fd, 0, 0, (off_t)fsize) && errno != EOPNOTSUPP) err = -errno;
  if (!err) {
    struct job j = {.fd = fd, .write = 1, .n = c->nval + 1, .span = put_span, .fill = put_fill, .arg = c};
    struct lane *l = lane_get(d);
    err = lane_run(d, l, &j);
    lane_put(d, l);
  }
  if (!err && fdatasync(fd)) err = -errno;
  close(fd);
  if (!err && renameat(fan, tmp, fan, fin)) err = -errno;
  if (!err) {
    err = sync_dir(fan);
    if (err) unlinkat(fan, fin, 0);
  } else {
    unlinkat(fan, tmp, 0);
  }
  return err;
}

int mc_disk_put(struct mc_disk *d, const char *key, size_t klen, const void *buf, uint64_t len) {
  if (klen == 0 || klen > MC_DISK_KEY_MAX) return MC_DISK_EKEY;
  if (len > UINT64_MAX / 4) return MC_DISK_EFULL;
  uint64_t fsize = file_size(len);
  pthread_mutex_lock(&d->mu);
  if (d->used + fsize > d->quota || d->used + fsize < d->used) {
    pthread_mutex_unlock(&d->mu);
    return MC_DISK_EFULL;
  }
  d->used += fsize;
  pthread_mutex_unlock(&d->mu);

  struct put_ctx c = {.key = key, .val = buf, .klen = (uint32_t)klen, .chunk = d->chunk, .len = len};
  c.id = atomic_fetch_add(&d->next_id, 1);
  c.nval = (pad_block(len) + d->chunk - 1) / d->chunk;
  int err = put_file(d, &c);

  uint64_t h = key_hash(d, key, klen), stale = 0;
  pthread_mutex_lock(&d->mu);
  if (err) {
    d->used -= fsize;
  } else {
    struct ent **pp = idx_slot(d, key, klen, h);
    if (!*pp) {
      idx_insert(d, key, klen, h, c.id, len);
    } else if ((*pp)->id > c.id) { /* a later put of the key committed first: it stays (as after a recovery) */
      stale = c.id;
      d->used -= fsize;
    } else {
      struct ent *e = *pp;
      stale = e->id;
      d->used -= file_size(e->len);
      d->value_bytes += len - e->len;
      e->id = c.id;
      e->len = len;
    }
  }
  pthread_mutex_unlock(&d->mu);
  if (stale) { /* (not synced: were it to come back after a crash, the recovery drops it for the later id) */
    char name[32];
    obj_name(name, stale, 0);
    unlinkat(d->fan[fan_of(stale)], name, 0);
  }
  if (err && full_code(err) != MC_DISK_EFULL) {
    atomic_fetch_add(&d->io_errors, 1);
    LOG_WARN_LIMITED("disk: put of object %016" PRIx64 " failed: %s", c.id, strerror(-err));
  }
  return full_code(err);
}

/* ---- get ---- */

struct read_ctx {
  uint32_t chunk;
  uint64_t fsize;
  uint64_t id;
  const char *key; /* the key the header must hold; NULL: take it into keybuf */
  uint32_t klen;
  uint64_t len; /* the value length expected (get), or learnt from the header (recovery) */
  int header_only;
  char *out; /* the caller's buffer, NULL to check only */
  char keybuf[MC_DISK_KEY_MAX];
  uint32_t vcrc, crc;
};

static void read_span(void *arg, uint64_t i, uint64_t *off, uint32_t *len) {
  struct read_ctx *c = arg;
  *off = i * c->chunk;
  *len = (uint32_t)MC_MIN((uint64_t)c->chunk, c->fsize - *off);
}

static int read_drain(void *arg, uint64_t i, const char *buf, uint32_t len) {
  struct read_ctx *c = arg;
  uint64_t off = i * c->chunk;
  if (i == 0) {
    struct hdr h;
    if (len < MC_DISK_BLOCK || hdr_parse(buf, &h) || h.id != c->id) return MC_DISK_ECORRUPT;
    if (c->key) {
      if (h.klen != c->klen || memcmp(h.key, c->key, h.klen) || h.len != c->len) return MC_DISK_ECORRUPT;
    } else {
      /* (truncated, or a length past the file; a header-only read leaves the check to its caller) */
      if (!c->header_only && file_size(h.len) != c->fsize) return MC_DISK_ECORRUPT;
      memcpy(c->keybuf, h.key, h.klen);
      c->klen = h.klen;
      c->len = h.len;
    }
    c->vcrc = h.vcrc;
    if (c->header_only) return 0;
  }
  uint64_t lo = MC_MAX(off, (uint64_t)MC_DISK_BLOCK), hi = MC_MIN(off + len, MC_DISK_BLOCK + c->len);
  if (lo < hi) {
    const char *p = buf + (lo - off);
    if (c->out) memcpy(c->out + (lo - MC_DISK_BLOCK), p, hi - lo);
    c->crc = mc_disk_crc32c(c->crc, p, hi - lo);
  }
  return 0;
}

/* Reads (or checks) the object file fd as c says: 0, MC_DISK_ECORRUPT or a negated errno value. */
static int read_file(struct mc_disk *d, int fd, struct read_ctx *c) {
  c->chunk = d->chunk;
  c->crc = 0;
  uint64_t n = c->header_only ? 1 : (c->fsize + d->chunk - 1) / d->chunk;
  struct job j = {.fd = fd, .write = 0, .n = n, .span = read_span, .drain = read_drain, .arg = c};
  if (c->header_only) c->fsize = MC_MIN(c->fsize, (uint64_t)MC_DISK_BLOCK);
  struct lane *l = lane_get(d);
  int err = lane_run(d, l, &j);
  lane_put(d, l);
  if (!err && !c->header_only && c->crc != c->vcrc) err = MC_DISK_ECORRUPT;
  return err;
}

/* Drops the key's object when the index still names it by id: broken, counted. */
static void drop_broken(struct mc_disk *d, const char *key, size_t klen, uint64_t id) {
  int dropped = 0;
  pthread_mutex_lock(&d->mu);
  struct ent **pp = idx_slot(d, key, klen, key_hash(d, key, klen));
  if (*pp && (*pp)->id == id) {
    idx_drop(d, pp);
    dropped = 1;
  }
  pthread_mutex_unlock(&d->mu);
  if (!dropped) return;
  char name[32];
  obj_name(name, id, 0);
  unlinkat(d->fan[fan_of(id)], name, 0);
  atomic_fetch_add(&d->broken, 1);
  LOG_WARN_LIMITED("disk: object %016" PRIx64 " failed its checks: dropped", id);
}

static int lookup(struct mc_disk *d, const char *key, size_t klen, uint64_t *id, uint64_t *len) {
  if (klen == 0 || klen > MC_DISK_KEY_MAX) return MC_DISK_ENOTFOUND;
  int r = MC_DISK_ENOTFOUND;
  pthread_mutex_lock(&d->mu);
  struct ent *e = *idx_slot(d, key, klen, key_hash(d, key, klen));
  if (e) {
    *id = e->id;
    *len = e->len;
    r = 0;
  }
  pthread_mutex_unlock(&d->mu);
  return r;
}

int64_t mc_disk_get(struct mc_disk *d, const char *key, size_t klen, void *buf, uint64_t cap) {
  for (;;) {
    uint64_t id, len;
    int r = lookup(d, key, klen, &id, &len);
    if (r) return r;
    if (len > cap) return MC_DISK_ERANGE;
    char name[32];
    obj_name(name, id, 0);
    int fd = openat(d->fan[fan_of(id)], name, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      int e = errno;
      uint64_t id2, len2;
      if (e == ENOENT && !lookup(d, key, klen, &id2, &len2) && id2 != id) continue; /* replaced meanwhile */
      if (e == ENOENT || e == ELOOP) { /* (the file went away under the store: the object is gone) */
        drop_broken(d, key, klen, id);
        return MC_DISK_ENOTFOUND;
      }
      atomic_fetch_add(&d->io_errors, 1);
      return -e;
    }
    struct read_ctx *c = mc_malloc(sizeof(*c));
    memset(c, 0, offsetof(struct read_ctx, keybuf));
    c->fsize = file_size(len);
    c->id = id;
    c->key = key;
    c->klen = (uint32_t)klen;
    c->len = len;
    c->out = buf;
    int err = read_file(d, fd, c);
    mc_free(c);
    close(fd);
    if (err == MC_DISK_ECORRUPT) {
      drop_broken(d, key, klen, id);
      return err;
    }
    if (err) {
      atomic_fetch_add(&d->io_errors, 1);
      return err;
    }
    return (int64_t)len;
  }
}

int mc_disk_size(struct mc_disk *d, const char *key, size_t klen, uint64_t *len) {
  uint64_t id;
  return lookup(d, key, klen, &id, len);
}

int mc_disk_remove(struct mc_disk *d, const char *key, size_t klen) {
  if (klen == 0 || klen > MC_DISK_KEY_MAX) return MC_DISK_ENOTFOUND;
  uint64_t id = 0;
  pthread_mutex_lock(&d->mu);
  struct ent **pp = idx_slot(d, key, klen, key_hash(d, key, klen));
  if (*pp) {
    id = (*pp)->id;
    idx_drop(d, pp);
  }
  pthread_mutex_unlock(&d->mu);
  if (!id) return MC_DISK_ENOTFOUND;
  char name[32];
  obj_name(name, id, 0);
  int fan = d->fan[fan_of(id)];
  if (unlinkat(fan, name, 0) && errno != ENOENT) {
    atomic_fetch_add(&d->io_errors, 1);
    LOG_WARN_LIMITED("disk: unlink of object %016" PRIx64 ": %s", id, strerror(errno));
  }
  sync_dir(fan);
  return 0;
}

int mc_disk_foreach(struct mc_disk *d, mc_disk_fn fn, void *arg) {
  struct item {
    uint64_t len;
    uint32_t klen;
    char *key;
  };
  pthread_mutex_lock(&d->mu);
  size_t n = 0, bytes = 0;
  for (size_t i = 0; i < d->nb; i++)
    for (struct ent *e = d->tab[i]; e; e = e->next) bytes += e->klen;
  struct item *it = mc_malloc((d->n + 1) * sizeof(*it));
  char *keys = mc_malloc(bytes + 1), *p = keys;
  for (size_t i = 0; i < d->nb; i++)
    for (struct ent *e = d->tab[i]; e; e = e->next) {
      it[n++] = (struct item){e->len, e->klen, p};
      memcpy(p, e->key, e->klen);
      p += e->klen;
    }
  pthread_mutex_unlock(&d->mu);
  int r = 0;
  for (size_t i = 0; i < n && !r; i++) r = fn(it[i].key, it[i].klen, it[i].len, arg);
  mc_free(keys);
  mc_free(it);
  return r;
}

void mc_disk_get_stats(struct mc_disk *d, struct mc_disk_stats *st) {
  pthread_mutex_lock(&d->mu);
  st->used_bytes = d->used;
  st->quota_bytes = d->quota;
  st->objects = d->n;
  st->value_bytes = d->value_bytes;
  pthread_mutex_unlock(&d->mu);
  st->broken_dropped = atomic_load(&d->broken);
  st->io_errors = atomic_load(&d->io_errors);
  st->lanes = d->nlanes;
  st->lanes_registered = 0;
  for (unsigned i = 0; i < d->nlanes; i++) st->lanes_registered += (unsigned)d->lanes[i].fixed;
}

/* ---- open: layout, format file, recovery ---- */

static int write_format(int fd, void *arg) {
  char s[64];
  int n = snprintf(s, sizeof(s), FORMAT_TAG " %u\n", MC_DISK_FORMAT_VERSION);
  return mc_write_all(fd, s, (size_t)n);
}

/* Reads dir's format file: 0 (it is this build's version), 1 (there is none: a directory to lay out), or
 * MC_DISK_EVERSION / -EINVAL / a negated errno value. */
static int check_format(const char *dir, int dirfd) {
  int fd = openat(dirfd, FORMAT_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? 1 : -errno;
  char s[64];
  ssize_t n = pread(fd, s, sizeof(s) - 1, 0);
  close(fd);
  if (n < 0) return -errno;
  s[n] = 0;
  unsigned v = 0;
  char tail = 0;
  if (sscanf(s, FORMAT_TAG " %u%c", &v, &tail) != 2 || tail != '\n' || v == 0) {
    LOG_ERROR("disk: %s/" FORMAT_FILE " is not a disk store's format file", dir);
    return -EINVAL;
  }
  if (v > MC_DISK_FORMAT_VERSION) {
    LOG_ERROR("disk: %s holds format version %u, newer than this build's %u: refusing to open it", dir, v,
              MC_DISK_FORMAT_VERSION);
    return MC_DISK_EVERSION;
  }
  if (v < MC_DISK_FORMAT_VERSION) {
    LOG_ERROR("disk: %s holds format version %u, which this build does not read", dir, v);
    return MC_DISK_EVERSION;
  }
  return 0;
}

static int make_layout(struct mc_disk *d, const char *dir, int fresh) {
  if (mkdirat(d->dirfd, "obj", 0700) && errno != EEXIST) return -errno;
  for (int i = 0; i < FANOUT; i++) {
    char sub[16];
    snprintf(sub, sizeof(sub), "obj/%02x", i);
    if (mkdirat(d->dirfd, sub, 0700) && errno != EEXIST) return -errno;
    d->fan[i] = openat(d->dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (d->fan[i] < 0) return -errno;
  }
  if (!fresh) return 0;
  int obj = openat(d->dirfd, "obj", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (obj < 0) return -errno;
  int r = sync_dir(obj);
  close(obj);
  if (!r) r = sync_dir(d->dirfd);
  if (r) return r;
  /* (the format file last: a directory without it is laid out again) */
  size_t n = strlen(dir) + sizeof(FORMAT_FILE) + 2;
  char *path = mc_malloc(n);
  snprintf(path, n, "%s/" FORMAT_FILE, dir);
  r = -mc_write_file_atomic(path, 0600, write_format, NULL);
  mc_free(path);
  return r;
}

static void remove_file(int fan, const char *name, uint64_t *counter) {
  if (!unlinkat(fan, name, 0)) (*counter)++;
}

/* Recovers one object file: into the index, or removed as broken or superseded. */
static void recover_one(struct mc_disk *d, int fan, const char *name, uint64_t id, int verify,
                        struct mc_disk_recovery *rep, struct read_ctx *c) {
  int fd = openat(fan, name, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    rep->foreign++;
    LOG_WARN("disk: obj/%02x/%s is not a regular file: left alone", fan_of(id), name);
    return;
  }
  memset(c, 0, offsetof(struct read_ctx, keybuf));
  c->fsize = (uint64_t)st.st_size;
  c->id = id;
  c->header_only = !verify;
  int err = st.st_size < (off_t)MC_DISK_BLOCK ? MC_DISK_ECORRUPT : read_file(d, fd, c);
  if (!err && c->header_only && file_size(c->len) != (uint64_t)st.st_size) err = MC_DISK_ECORRUPT;
  close(fd);
  if (err) {
    LOG_WARN("disk: obj/%02x/%s: %s: removed", fan_of(id), name,
             err == MC_DISK_ECORRUPT ? "bad header, checksum or length" : strerror(-err));
    remove_file(fan, name, &rep->broken);
    return;
  }
  uint64_t h = key_hash(d, c->keybuf, c->klen), gone = 0;
  struct ent **pp = idx_slot(d, c->keybuf, c->klen, h);
  if (*pp && (*pp)->id > id) {
    gone = id;
  } else {
    if (*pp) {
      gone = (*pp)->id;
      idx_drop(d, pp);
    }
    d->used += file_size(c->len);
    idx_insert(d, c->keybuf, c->klen, h, id, c->len);
  }
  if (gone) {
    char old[32];
    obj_name(old, gone, 0);
    remove_file(d->fan[fan_of(gone)], old, &rep->superseded);
  }
}

static int recover(struct mc_disk *d, int verify, struct mc_disk_recovery *rep) {
  uint64_t max_id = 0;
  struct read_ctx *c = mc_malloc(sizeof(*c));
  int err = 0;
  for (int i = 0; i < FANOUT && !err; i++) {
    int fd = dup(d->fan[i]);
    DIR *dp = fd < 0 ? NULL : fdopendir(fd);
    if (!dp) {
      err = -errno;
      if (fd >= 0) close(fd);
      break;
    }
    rewinddir(dp);
    struct dirent *de;
    while ((de = readdir(dp))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      uint64_t id;
      int kind = parse_name(de->d_name, &id);
      if (kind == 0 || fan_of(id) != i || id == 0) {
        rep->foreign++;
        LOG_WARN("disk: obj/%02x/%s is not a name of the store: left alone", i, de->d_name);
        continue;
      }
      max_id = MC_MAX(max_id, id);
      if (kind == 2) remove_file(d->fan[i], de->d_name, &rep->tmp_removed);
      else recover_one(d, d->fan[i], de->d_name, id, verify, rep, c);
    }
    closedir(dp);
  }
  mc_free(c);
  rep->objects = d->n;
  rep->bytes = d->used;
  atomic_store(&d->next_id, max_id + 1);
  atomic_store(&d->broken, rep->broken);
  return err;
}

int mc_disk_open(const char *dir, uint64_t quota_bytes, const struct mc_disk_opts *o, struct mc_disk **out,
                 struct mc_disk_recovery *rep) {
  struct mc_disk_opts def = {0};
  struct mc_disk_recovery rep_local;
  if (!o) o = &def;
  if (!rep) rep = &rep_local;
  memset(rep, 0, sizeof(*rep));
  *out = NULL;
  unsigned chunk = o->chunk_bytes ? o->chunk_bytes : 1u << 20;
  if (chunk % MC_DISK_BLOCK || chunk > (1u << 30) || o->chunks_per_lane > MAX_SLOTS || o->lanes > 1024)
    return -EINVAL;

  struct mc_disk *d = mc_calloc(1, sizeof(*d));
  d->dirfd = d->lockfd = -1;
  for (int i = 0; i < FANOUT; i++) d->fan[i] = -1;
  d->chunk = chunk;
  d->nslots = o->chunks_per_lane ? o->chunks_per_lane : 8;
  d->nlanes = o->lanes ? o->lanes : 4;
  d->nb = 1024;
  d->tab = mc_calloc(d->nb, sizeof(*d->tab));
  pthread_mutex_init(&d->mu, NULL);
  pthread_mutex_init(&d->lane_mu, NULL);
  pthread_cond_init(&d->lane_cv, NULL);
  if (getrandom(&d->seed, sizeof(d->seed), 0) != sizeof(d->seed)) d->seed = mc_now_ns();

  int err = 0, fresh = 0;
  if (mkdir(dir, 0700) && errno != EEXIST) err = -errno;
  if (!err && (d->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) err = -errno;
  /* (the lock file is opened with O_DIRECT: a file system without it is refused here, not at the first put) */
  if (!err && (d->lockfd = openat(d->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_DIRECT, 0600)) < 0) {
    err = -errno;
    if (err == -EINVAL) LOG_ERROR("disk: %s: the file system does not support O_DIRECT", dir);
  }
  if (!err && flock(d->lockfd, LOCK_EX | LOCK_NB)) err = errno == EWOULDBLOCK ? MC_DISK_EBUSY : -errno;
  if (!err) {
    err = check_format(dir, d->dirfd);
    fresh = err == 1;
    if (fresh) err = 0;
  }
  if (!err) err = make_layout(d, dir, fresh);
  if (!err) {
    struct statvfs vfs;
    if (quota_bytes) d->quota = quota_bytes;
    else if (statvfs(dir, &vfs)) err = -errno;
    else d->quota = (uint64_t)vfs.f_blocks * vfs.f_frsize / 10 * 9;
  }
  if (!err) {
    d->lanes = mc_calloc(d->nlanes, sizeof(*d->lanes));
    for (unsigned i = 0; i < d->nlanes && !err; i++) {
      err = lane_init(d, &d->lanes[i]);
      d->lanes[i].next_free = d->free_lanes;
      d->free_lanes = &d->lanes[i];
    }
    if (err) LOG_ERROR("disk: io_uring setup: %s", strerror(-err));
  }
  if (!err) err = recover(d, o->verify_on_open, rep);
  if (err) {
    if (err != MC_DISK_EVERSION && err != MC_DISK_EBUSY) LOG_ERROR("disk: open %s: %s", dir, strerror(-err));
    mc_disk_close(d);
    return err;
  }
  LOG_INFO("disk: %s: %" PRIu64 " objects, %" PRIu64 " bytes; removed %" PRIu64 " broken, %" PRIu64
           " superseded, %" PRIu64 " temporaries",
           dir, rep->objects, rep->bytes, rep->broken, rep->superseded, rep->tmp_removed);
  *out = d;
  return 0;
}

void mc_disk_close(struct mc_disk *d) {
  if (!d) return;
  if (d->lanes)
    for (unsigned i = 0; i < d->nlanes; i++) lane_fini(d, &d->lanes[i]);
  mc_free(d->lanes);
  for (size_t i = 0; i < d->nb; i++)
    for (struct ent *e = d->tab[i], *nx; e; e = nx) {
      nx = e->next;
      mc_free(e);
    }
  mc_free(d->tab);
  for (int i = 0; i < FANOUT; i++)
    if (d->fan[i] >= 0) close(d->fan[i]);
  if (d->lockfd >= 0) close(d->lockfd);
  if (d->dirfd >= 0) close(d->dirfd);
  pthread_mutex_destroy(&d->mu);
  pthread_mutex_destroy(&d->lane_mu);
  pthread_cond_destroy(&d->lane_cv);
  mc_free(d);
}
