/* Extra segments (docs/store-client.md, "Extra segments"): memory a set-up client mounts at runtime besides
 * its main segment, under the same segment name and transfer-engine endpoint — allocated here
 * (mc_te_alloc_shared, so same-host peers take the shared-memory path) or a shared mapping of a file. Each is
 * registered with the engine, then mounted at the master under a fresh segment id, which names it to the
 * caller. Unmount: at once, or gracefully (the master keeps it readable, places nothing new there, and
 * unmounts it when the grace period ends); its memory goes with unmount-and-free (after the grace period,
 * checked at the next extra-segment call, else at teardown) or at teardown. A mounted one is in the holder
 * index (holder_index.c) and is remounted with the main segment when a master forgot them (a restart, a new leader:
 * mc_segments_remount), and its objects come back from its index; one unmounted, or whose graceful unmount
 * was asked for, stays unmounted.
 *
 * Locks: xsegs.mu (a rwlock) guards the array and each entry's flags. The remount holds it for reading
 * across its RPC, and an unmount clears `mounted` under it for writing before its own RPC, so a remount
 * never mounts again a segment whose unmount the master has already answered. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"
#include "mooncake/store.h"

#define XSEG_RPC_MS 5000

static int same_id(struct mc_uuid a, struct mc_uuid b) { return a.hi == b.hi && a.lo == b.lo; }

/* Gives back g's memory (write lock held: no own-segment copy runs). */
static void release_memory(struct mc_store *s, struct mc_xseg *g) {
  if (!g->base) return;
  if (g->file) {
    unregisterLocalMemory(s->engine.te, g->base);
    munmap(g->base, g->size);
  } else {
    mc_te_free_shared(s->engine.te, g->base);
  }
  mc_regs_remove(s, (uint64_t)(uintptr_t)g->base, NULL);
  g->base = NULL;
}

/* Drops the entries whose memory went, and frees the memory whose grace period ended (write lock held). */
static void reap(struct mc_store *s, uint64_t now_ms) {
  size_t k = 0;
  for (size_t i = 0; i < s->xsegs.n; i++) {
    struct mc_xseg *g = &s->xsegs.v[i];
    if (g->free_at_ms && now_ms >= g->free_at_ms) release_memory(s, g);
    if (g->base) s->xsegs.v[k++] = *g;
    else mc_segment_rec_free(&g->rec);
  }
  s->xsegs.n = k;
}

void mc_xsegs_teardown(struct mc_store *s) {
  pthread_rwlock_wrlock(&s->xsegs.mu);
  for (size_t i = 0; i < s->xsegs.n; i++) {
    struct mc_xseg *g = &s->xsegs.v[i];
    if (s->master.cli) { /* also one whose graceful unmount is pending: its memory goes now */
      int rc = mcli_unmount(s->master.cli, g->rec.id, s->self.client_id, XSEG_RPC_MS);
      if (rc && g->mounted) LOG_WARN("teardown: unmounting an extra segment failed: %s", mooncake_store_err_name(rc));
    }
    release_memory(s, g);
    mc_segment_rec_free(&g->rec);
  }
  mc_free(s->xsegs.v);
  s->xsegs.v = NULL;
  s->xsegs.n = s->xsegs.cap = 0;
  pthread_rwlock_unlock(&s->xsegs.mu);
}

/* Maps [offset, offset + size) of the file at path, shared and writable: NULL (logged) when it cannot. */
static char *map_file(const char *path, uint64_t offset, uint64_t size) {
  long page = sysconf(_SC_PAGESIZE);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  struct stat st;
  char *p = NULL;
  if (fd < 0) LOG_ERROR("mount_segment: cannot open %s", path);
  else if (offset % (uint64_t)page) LOG_ERROR("mount_segment: offset %llu is not page-aligned", (unsigned long long)offset);
  else if (fstat(fd, &st) || (uint64_t)st.st_size < offset || (uint64_t)st.st_size - offset < size)
    LOG_ERROR("mount_segment: %s is smaller than offset + size", path); /* a mapping past the end would SIGBUS */
  else if ((p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset)) == MAP_FAILED) {
    p = NULL;
    LOG_ERROR("mount_segment: cannot map %s", path);
  }
  if (fd >= 0) close(fd);
  return p;
}

int mc_extra_segment_mount(struct mc_store *s, const char *path, uint64_t offset, uint64_t size, const char *location,
                           char *id_out, size_t id_len) {
  (void)id_len; /* at least 37 (api.c) */
  int rc = MC_INVALID_PARAMS;
  struct mc_xseg g = {.size = size, .file = path != NULL};
  const char *loc = location && *location ? location : "cpu:0";
  if (size && size <= (1ull << 46)) g.base = path ? map_file(path, offset, size) : mc_te_alloc_shared(s->engine.te, size, loc);
  if (g.base && path && registerLocalMemory(s->engine.te, g.base, size, loc, 1)) {
    munmap(g.base, size);
    g.base = NULL;
  }
  if (g.base) {
    char probe[300] = "";
    getLocalIpAndPort(s->engine.te, probe, sizeof(probe));
    g.rec = (struct mc_segment_rec){.id = mc_uuid_random(), .name = mc_strdup(s->self.name),
                                    .base = (uint64_t)(uintptr_t)g.base, .size = size,
                                    .te_endpoint = mc_strdup(s->self.te_name), .protocol = mc_strdup(s->self.protocol),
                                    .zone = mc_strdup(s->self.zone), .host_id = mc_strdup(mc_host_id()),
                                    .probe_addr = mc_strdup(probe)};
    mc_regs_add(s, (uint64_t)(uintptr_t)g.base, size);
    pthread_rwlock_wrlock(&s->xsegs.mu);
    if (s->xsegs.n == s->xsegs.cap)
      s->xsegs.v = mc_realloc(s->xsegs.v, sizeof(*s->xsegs.v) * (s->xsegs.cap = s->xsegs.cap ? 2 * s->xsegs.cap : 4));
    s->xsegs.v[s->xsegs.n++] = g; /* before the mount: a put may land there as soon as it is mounted */
    pthread_rwlock_unlock(&s->xsegs.mu);
    mc_hindex_follow_segment(s, g.rec.id); /* (its records may come as soon as it is mounted) */
    rc = mcli_mount(s->master.cli, &g.rec, s->self.client_id, XSEG_RPC_MS);
    if (rc) mc_hindex_forget_segment(s, g.rec.id);
    pthread_rwlock_wrlock(&s->xsegs.mu);
    for (size_t i = 0; i < s->xsegs.n; i++)
      if (same_id(s->xsegs.v[i].rec.id, g.rec.id)) {
        s->xsegs.v[i].mounted = !rc;
        if (rc) s->xsegs.v[i].free_at_ms = 1; /* reaped below */
      }
    if (!rc) mc_uuid_str(g.rec.id, id_out);
    reap(s, mc_now_ms());
    pthread_rwlock_unlock(&s->xsegs.mu);
    if (rc) LOG_ERROR("mount_segment: mounting %llu bytes failed: %s", (unsigned long long)size, mooncake_store_err_name(rc));
  }
  return rc;
}

int mc_extra_segment_unmount(struct mc_store *s, const char *id, uint64_t grace_ms, int free_memory) {
  int rc = MC_SEGMENT_NOT_FOUND;
  struct mc_uuid sid = {0};
  pthread_rwlock_wrlock(&s->xsegs.mu); /* (not mounted from now on: no remount takes it along) */
  for (size_t i = 0; i < s->xsegs.n && rc == MC_SEGMENT_NOT_FOUND; i++) {
    char text[37];
    mc_uuid_str(s->xsegs.v[i].rec.id, text);
    if (!strcmp(text, id) && s->xsegs.v[i].mounted) sid = s->xsegs.v[i].rec.id, rc = 0, s->xsegs.v[i].mounted = 0;
  }
  pthread_rwlock_unlock(&s->xsegs.mu);
  int found = !rc;
  if (found)
    rc = grace_ms ? mcli_graceful_unmount(s->master.cli, sid, s->self.client_id, grace_ms, XSEG_RPC_MS)
                  : mcli_unmount(s->master.cli, sid, s->self.client_id, XSEG_RPC_MS);
  if (!rc) mc_hindex_forget_segment(s, sid);
  pthread_rwlock_wrlock(&s->xsegs.mu);
  uint64_t now = mc_now_ms();
  for (size_t i = 0; found && i < s->xsegs.n; i++) {
    struct mc_xseg *g = &s->xsegs.v[i];
    if (!same_id(g->rec.id, sid)) continue;
    g->mounted = rc != 0; /* a failed unmount leaves it mounted */
    /* after a graceful unmount, readers may use it until the master unmounts it: free it after that */
    if (!rc && free_memory) g->free_at_ms = grace_ms ? now + grace_ms + 1000 : now;
  }
  reap(s, now);
  pthread_rwlock_unlock(&s->xsegs.mu);
  return rc;
}

void mc_segments_remount(struct mc_store *s, int tmo_ms) {
  pthread_rwlock_rdlock(&s->xsegs.mu);
  size_t n = 1;
  struct mc_segment_rec *recs = mc_malloc(sizeof(*recs) * (s->xsegs.n + 1));
  recs[0] = s->seg.rec; /* (views: the records stay put while the lock is held) */
  for (size_t i = 0; i < s->xsegs.n; i++)
    if (s->xsegs.v[i].mounted) recs[n++] = s->xsegs.v[i].rec;
  int rc = mcli_remount(s->master.cli, recs, (uint32_t)n, s->self.client_id, tmo_ms);
  struct mc_uuid *ids = mc_malloc(sizeof(*ids) * n);
  for (size_t i = 0; i < n; i++) ids[i] = recs[i].id;
  pthread_rwlock_unlock(&s->xsegs.mu);
  mc_free(recs);
  if (rc) LOG_WARN("remount of segment %s (%zu segments) failed: %s", s->self.name, n, mooncake_store_err_name(rc));
  else LOG_INFO("segment %s remounted (%zu segments)", s->self.name, n);
  for (size_t i = 0; !rc && i < n; i++) mc_hindex_upload(s, ids[i]); /* a master that lost its state gets our objects back (docs/ha.md) */
  mc_free(ids);
}
