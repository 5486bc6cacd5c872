/* The local-disk object store (docs/disk-tier.md): objects (a key and a value) kept in a local directory, one
 * file per object, written with O_DIRECT through io_uring from registered bounce buffers, each durable when
 * its put returns, found again by the recovery scan of mc_disk_open after a restart or a crash.
 *
 * Every function is safe to call from several threads at once on one store. Keys are byte strings of 1 to
 * MC_DISK_KEY_MAX bytes (any bytes: they never become file names). Errors are negative: the MC_DISK_E* codes
 * below, or a negated errno value from the file system (-EIO, ...). */
#ifndef MC_DISK_H
#define MC_DISK_H
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define MC_DISK_FORMAT_VERSION 1u
#define MC_DISK_BLOCK 4096u                     /* O_DIRECT alignment of offsets, lengths and memory */
#define MC_DISK_KEY_MAX (MC_DISK_BLOCK - 64u)   /* a key fits the object's header block */

#define MC_DISK_ENOTFOUND (-ENOENT)       /* no object of that key */
#define MC_DISK_EFULL (-ENOSPC)           /* the quota or the file system is full (EDQUOT included) */
#define MC_DISK_ECORRUPT (-EBADMSG)       /* the object failed its checks: dropped, never served */
#define MC_DISK_ERANGE (-ERANGE)          /* the caller's buffer is smaller than the value */
#define MC_DISK_EKEY (-EINVAL)            /* empty key, or longer than MC_DISK_KEY_MAX */
#define MC_DISK_EVERSION (-EPROTONOSUPPORT) /* the directory's format is newer than this build's */
#define MC_DISK_EBUSY (-EBUSY)            /* another store (this or another process) has the directory open */

struct mc_disk;

/* Tuning; a zero field (or a NULL pointer for all of them) takes the default. Memory held: lanes x
 * chunks_per_lane x chunk_bytes of registered bounce buffers. */
struct mc_disk_opts {
  unsigned lanes;           /* I/O lanes (an io_uring and its buffers each), operations in parallel; 4 */
  unsigned chunk_bytes;     /* one I/O, a multiple of MC_DISK_BLOCK; 1 MiB */
  unsigned chunks_per_lane; /* I/Os one operation keeps in flight (at most 64); 8 */
  int verify_on_open;       /* 1: recovery reads every value and checks its CRC-32C, not only the headers */
};

/* What the recovery scan of mc_disk_open found. */
struct mc_disk_recovery {
  uint64_t objects;     /* committed objects kept */
  uint64_t bytes;       /* their space on disk (header blocks and padding included) */
  uint64_t broken;      /* removed: bad header, checksum mismatch, truncated or oversized file */
  uint64_t superseded;  /* removed: an older object of a key that has a later one (a replace cut short) */
  uint64_t tmp_removed; /* removed: temporaries of writes that never committed */
  uint64_t foreign;     /* files whose names are not the store's, left alone */
};

struct mc_disk_stats {
  uint64_t used_bytes;     /* space on disk of committed objects and writes in progress, padding included */
  uint64_t quota_bytes;
  uint64_t objects;
  uint64_t value_bytes;    /* the committed values' lengths */
  uint64_t broken_dropped; /* objects dropped since open (at open and at get) */
  uint64_t io_errors;      /* I/O errors other than a full disk */
  unsigned lanes;
  unsigned lanes_registered; /* lanes whose buffers io_uring took as fixed buffers (the others: plain reads
                              * and writes, e.g. when RLIMIT_MEMLOCK is too small for them) */
};

/* Opens the store in dir (created, with its parents' absence an error, when it does not exist). A new
 * directory gets the layout and the format file; an existing one is recovered: every committed object is
 * found and its header checked (with o->verify_on_open also its value's CRC-32C); broken objects and
 * temporaries are removed and counted in *rep (may be NULL). quota_bytes bounds the space the objects take
 * (0: 90 % of the file system's size). Returns 0 and *out, MC_DISK_EVERSION for a directory of a newer
 * format, MC_DISK_EBUSY when another store holds it, or a negated errno value. */
int mc_disk_open(const char *dir, uint64_t quota_bytes, const struct mc_disk_opts *o, struct mc_disk **out,
                 struct mc_disk_recovery *rep);
/* Closes the store (everything put is already durable). No call may be running on it. NULL is a no-op. */
void mc_disk_close(struct mc_disk *d);

/* Stores len bytes at buf under the key, replacing an object of the same key atomically: a get sees the old
 * value or the new one, whole, and after a crash at any point the key has one of the two. Durable when it
 * returns 0. Of two puts of one key at once, one value remains whole. MC_DISK_EFULL when the quota or the
 * disk has no room: nothing committed is lost and no partial file is left. MC_DISK_EKEY, or a negated errno
 * value of the I/O. */
int mc_disk_put(struct mc_disk *d, const char *key, size_t klen, const void *buf, uint64_t len);
/* Reads the value of the key into buf (cap bytes): its length, or MC_DISK_ENOTFOUND, MC_DISK_ERANGE (cap is
 * smaller than the value; mc_disk_size tells the length), MC_DISK_ECORRUPT (the object failed its header or
 * value checksum: it is dropped and counted, and buf's content is undefined), or a negated errno value. */
int64_t mc_disk_get(struct mc_disk *d, const char *key, size_t klen, void *buf, uint64_t cap);
/* Removes the object of the key, durably: 0 or MC_DISK_ENOTFOUND. Its space is free at once. */
int mc_disk_remove(struct mc_disk *d, const char *key, size_t klen);
/* The value's length in *len: 0 or MC_DISK_ENOTFOUND. */
int mc_disk_size(struct mc_disk *d, const char *key, size_t klen, uint64_t *len);

/* Calls fn once per committed object with its key and value length, from a snapshot taken at the call: fn
 * may call the store (a put or remove during the walk is not seen by it). A non-zero return of fn stops
 * the walk and is returned; 0 otherwise. */
typedef int (*mc_disk_fn)(const char *key, size_t klen, uint64_t len, void *arg);
int mc_disk_foreach(struct mc_disk *d, mc_disk_fn fn, void *arg);

void mc_disk_get_stats(struct mc_disk *d, struct mc_disk_stats *st);

/* CRC-32C (Castagnoli) of n bytes continuing crc (0 to start): the value and header checksums. */
uint32_t mc_disk_crc32c(uint32_t crc, const void *p, size_t n);

#endif
