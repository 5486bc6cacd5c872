/* Write-extent space for one-round-trip puts (master_core/write_extents.h; docs/store-client.md "Write extents").
 *
 * A client reserves an extent from the master once, then for each eligible put carves [cursor, cursor +
 * size) locally; put.c writes the bytes there and sends one COMMIT_PUT. This file keeps the extents:
 * reserving, carving, the safety rule, reference counts, retiring and releasing; the put itself (the
 * decision, the write, the commit, the fallback to PutStart/PutEnd for anything unusual) is put.c's, the
 * RPC encodings are master_rpc.c's. MC_STORE_PUT_EXTENTS=0 turns the fast path off.
 *
 * A client with a mounted segment pings and is subject to liveness; a pure client (no segment, no pings:
 * docs/master.md, "Liveness and metadata cleanup") gets a lease-only extent, which the master ends only by
 * its lease (min(put_start_release_timeout_sec, client_ttl), renewed by every commit), RELEASE_EXTENT or
 * an unmount, never by a client expiry; its grant says client_ttl = 0.
 *
 * Carved here (put.c checks the rest: put, replica_num 1, 0 < size <= 1 MiB): at most 1/8 of the extent,
 * and no preferred segment other than the extent's (the first put reserves with its own config, so
 * placement follows the same rules as PutStart: preferred, writer's host, writer's zone, rest).
 *
 * Safety (see master_core/write_extents.c): a write into the extent starts only while
 *   now + margin < (time the reserve or last commit was SENT) + lease, and (unless lease-only)
 *   now + margin < (time the last OK ping was SENT) + client_ttl,
 * margin = min(lease, client_ttl) / 4 (lease / 4 for a lease-only extent). The master reclaims an
 * extent no earlier than either bound, so a write that starts in time has at least the margin to land.
 * And a write starts only within MC_FASTPUT_CONTACT_NS (500 ms; under load commits renew it, else a new reserve does) of the last successful
 * contact with the master (OK ping, reserve or commit): a master that restarted knows nothing of our
 * extent, but it keeps every re-mounted segment free of new allocations for longer than that
 * (MC_REMOUNT_QUIET_NS), so a write aimed at the old extent cannot land in space the new master handed
 * out. The extent is retired (never written again) on any failed write, any commit error other than
 * OBJECT_ALREADY_EXISTS / INVALID_PARAMS, and when a ping answers NEED_REMOUNT (a master that forgot
 * us, or the first ping after a mount: released either way, see heartbeat.c). Writes (put.c) use cached
 * segment descriptors without the refresh-and-retry of the ordinary path, so a write aimed at a holder
 * that restarted fails rather than landing in its new incarnation's memory. The cursor only moves
 * forward: a range is written at most once, whatever happens to the put that carved it.
 *
 * Locking: fp->mu guards the current extent pointer, its cursor, deadline and reference count, and the
 * list of releases left for the heartbeat thread; it is held across RESERVE_EXTENT (puts wait for it
 * rather than reserving twice), the registry lookup of other_local and the release of an extent that
 * lookup refuses, never across a write, a commit or any other release, nor while hb.mu is taken
 * (finish_later unlocks it first). Extents are reference counted: the current one holds a reference, each put
 * that carved from it another; the last one out of a retired extent releases it at the master.
 *
 * Batches (mc_fastput_carve_batch): the eligible keys of a batch put are carved in order under one lock;
 * put.c writes them in one transfer batch and commits them with one BATCH_COMMIT_PUT per extent (usually
 * one), each key with exactly the single put's rules and results; keys it does not finish take the batch
 * PutStart/PutEnd path. Only batches whose eligible values total at most 4 MiB go this way: the last
 * write of such a batch starts soon after the carving checked the extent's deadline, as a single put's
 * does, and an extent serves several batches. Larger batches gain little from saving one round trip beside their
 * transfers, and lost 5-12 % to the extra reserves and releases (1 MiB x 16, bench/RESULTS.md).
 *
 * Releases: a put that drops the last reference leaves the RELEASE_EXTENT to the heartbeat thread
 * (woken at once), so a put never waits on it: against a master that stopped answering, that wait
 * was up to FP_RPC_MS on top of the put's own PutStart. Teardown sends what is left. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"

#define FP_HINT (16ull << 20)
#define FP_RETRY_NS (1000ull * 1000 * 1000) /* after a refused reserve */
#define FP_RPC_MS 3000

struct fp_ext {
  struct fp_ext *next; /* on fp->released */
  uint64_t id, addr, len, cursor;
  char *endpoint, *seg_name;
  uint64_t lease_ns, ttl_ns, margin_ns; /* ttl_ns 0: lease-only (no liveness bound) */
  uint64_t deadline_ns; /* start of lease as the client sees it + lease; mu */
  int refs;             /* mu */
  int dead;             /* the master no longer has it: no release needed; mu */
};

struct mc_fastput {
  pthread_mutex_t mu;
  struct fp_ext *cur;
  uint64_t retry_after_ns;
  int unsupported;       /* the master does not know the opcodes */
  atomic_int batch_unsupported; /* the master knows them but not BATCH_COMMIT_PUT: batches skip extents */
  struct fp_ext *released; /* retired extents whose RELEASE_EXTENT the heartbeat thread sends; mu */
};

/* Extents on the segment of another handle of THIS process are refused. The engine writes to a
 * same-process peer through its raw address, so an extent there would be written through a pointer that
 * dies with that handle (its teardown does not know about our extent). Each handle with extents state is
 * known in the process's registry of live handles (common/lifecycle.h) by its segment endpoint; such
 * extents are released at once and those puts take PutStart/PutEnd. */
static int other_local(const struct mc_store *s, const char *ep) {
  return strcmp(ep, s->self.te_name) && mc_lifecycle_name_taken(&s->lc, ep);
}

static int enabled_by_env(void) {
  const char *e = mc_knob_str(MC_KNOB_STORE_PUT_EXTENTS);
  return !e || strcmp(e, "0");
}

void mc_fastput_init(struct mc_store *s) {
  s->fastput = NULL;
  if (!enabled_by_env()) {
    LOG_INFO("MC_STORE_PUT_EXTENTS=0: puts use PutStart/PutEnd only");
    return;
  }
  struct mc_fastput *fp = mc_calloc(1, sizeof(*fp));
  pthread_mutex_init(&fp->mu, NULL);
  s->fastput = fp;
  mc_lifecycle_set_name(&s->lc, s->self.te_name);
}

/* ------------------------------------------------------------------ RPCs */

/* A fresh extent from the master for a put of min_len bytes with cfg. 0 or the error. */
static int reserve(struct mc_store *s, uint64_t min_len, const struct mc_put_config *cfg, struct fp_ext *e) {
  struct mcli_extent g;
  int rc = mcli_reserve_extent(s->master.cli, s->self.client_id, min_len, FP_HINT, cfg, FP_RPC_MS, &g);
  if (rc) return rc;
  *e = (struct fp_ext){.id = g.id, .addr = g.addr, .len = g.len, .endpoint = g.endpoint, .seg_name = g.seg_name,
                       .lease_ns = g.lease_ms * 1000000ull, .ttl_ns = g.ttl_ms * 1000000ull};
  return 0;
}

static void rpc_release(struct mc_store *s, uint64_t id) {
  int rc = mcli_release_extent(s->master.cli, s->self.client_id, id, FP_RPC_MS);
  if (rc) LOG_WARN("releasing write extent %llu failed: %s (the master reclaims it when its lease ends)",
                   (unsigned long long)id, mooncake_store_err_name(rc));
}

/* ------------------------------------------------------------------ extent references */

static void ext_free(struct fp_ext *e) {
  mc_free(e->endpoint);
  mc_free(e->seg_name);
  mc_free(e);
}

/* Drops a reference (fp->mu held). Returns the extent when this was the last one (caller releases it
 * at the master after unlocking, then frees it), else NULL. */
static struct fp_ext *unref_locked(struct fp_ext *e) { return --e->refs == 0 ? e : NULL; }

static void finish(struct mc_store *s, struct fp_ext *last) {
  if (!last) return;
  if (!last->dead) rpc_release(s, last->id);
  ext_free(last);
}

/* finish() for the put path: the release goes to the heartbeat thread, so no put waits on it. */
static void finish_later(struct mc_store *s, struct fp_ext *last) {
  if (!last || last->dead) { /* nothing to send */
    finish(s, last);
    return;
  }
  struct mc_fastput *fp = s->fastput;
  pthread_mutex_lock(&fp->mu);
  last->next = fp->released;
  fp->released = last;
  pthread_mutex_unlock(&fp->mu);
  mc_heartbeat_kick(s);
}

void mc_fastput_flush(struct mc_store *s) {
  struct mc_fastput *fp = s->fastput;
  if (!fp) return;
  pthread_mutex_lock(&fp->mu);
  struct fp_ext *list = fp->released;
  fp->released = NULL;
  pthread_mutex_unlock(&fp->mu);
  while (list) {
    struct fp_ext *e = list;
    list = e->next;
    finish(s, e);
  }
}

/* Retires the current extent (fp->mu held): no further carving from it. */
static struct fp_ext *retire_locked(struct mc_fastput *fp, int dead) {
  struct fp_ext *e = fp->cur;
  if (!e) return NULL;
  fp->cur = NULL;
  e->dead |= dead;
  return unref_locked(e);
}

void mc_fastput_retire(struct mc_store *s, int dead) {
  struct mc_fastput *fp = s->fastput;
  if (!fp) return;
  pthread_mutex_lock(&fp->mu);
  struct fp_ext *last = retire_locked(fp, dead);
  pthread_mutex_unlock(&fp->mu);
  finish(s, last);
}

void mc_fastput_free(struct mc_store *s) {
  struct mc_fastput *fp = s->fastput;
  if (!fp) return;
  mc_fastput_retire(s, 0); /* no put is in flight: teardown holds life for writing */
  mc_fastput_flush(s);      /* the heartbeat thread has stopped: what it had not sent yet */
  mc_lifecycle_set_name(&s->lc, NULL);
  pthread_mutex_destroy(&fp->mu);
  mc_free(fp);
  s->fastput = NULL;
}

/* ------------------------------------------------------------------ carving */

static uint64_t align_up(uint64_t n) { return (n + MC_FASTPUT_ALIGN - 1) & ~(MC_FASTPUT_ALIGN - 1); }

int mc_fastput_may_start(uint64_t now, uint64_t deadline_ns, uint64_t lease_ns, uint64_t ttl_ns, uint64_t margin_ns,
                         uint64_t ping_ok_ns) {
  uint64_t ping = ttl_ns ? ping_ok_ns : 0, contact = MC_MAX(ping, deadline_ns - lease_ns);
  int live_ok = !ttl_ns || (ping && now + margin_ns < ping + ttl_ns);
  return now + margin_ns < deadline_ns && live_ok && now < contact + MC_FASTPUT_CONTACT_NS;
}

/* Writes may start into e at now (fp->mu held). */
static int writable_locked(struct mc_store *s, const struct fp_ext *e, uint64_t now) {
  return mc_fastput_may_start(now, e->deadline_ns, e->lease_ns, e->ttl_ns, e->margin_ns,
                              e->ttl_ns ? atomic_load(&s->master.ok_ns) : 0);
}

static int prefers_other(const struct mc_put_config *cfg, const char *seg) {
  return cfg->n_preferred && strcmp(cfg->preferred[0], seg);
}

/* A fresh extent for cfg (fp->mu held; the RPC runs under it). NULL when refused. */
static struct fp_ext *reserve_locked(struct mc_store *s, struct mc_fastput *fp, uint64_t len,
                                     const struct mc_put_config *cfg) {
  uint64_t now = mc_now_ns();
  if (fp->unsupported || now < fp->retry_after_ns) return NULL;
  struct fp_ext *e = mc_calloc(1, sizeof(*e));
  int rc = reserve(s, len, cfg, e);
  if (rc) {
    if (rc == MC_NOT_SUPPORTED) fp->unsupported = 1;
    fp->retry_after_ns = mc_now_ns() + FP_RETRY_NS;
    LOG_DEBUG("no write extent (%s); puts use PutStart/PutEnd for a while", mooncake_store_err_name(rc));
    ext_free(e);
    return NULL;
  }
  if (other_local(s, e->endpoint)) {
    rpc_release(s, e->id);
    ext_free(e);
    fp->retry_after_ns = mc_now_ns() + FP_RETRY_NS;
    return NULL;
  }
  e->margin_ns = (e->ttl_ns ? MC_MIN(e->lease_ns, e->ttl_ns) : e->lease_ns) / 4;
  e->deadline_ns = now + e->lease_ns; /* from the send time: never later than the master's */
  e->refs = 1;
  fp->cur = e;
  return e;
}

/* Carves len bytes for a put (fp->mu held): the extent (referenced) and the offset, or NULL. */
static struct fp_ext *carve_locked(struct mc_store *s, struct mc_fastput *fp, uint64_t len,
                                   const struct mc_put_config *cfg, uint64_t *off, struct fp_ext **last) {
  struct fp_ext *e = fp->cur;
  uint64_t now = mc_now_ns();
  if (e && (!writable_locked(s, e, now) || e->len - e->cursor < len)) {
    *last = retire_locked(fp, 0);
    e = NULL;
  }
  if (!e && !(e = reserve_locked(s, fp, len, cfg))) return NULL;
  if (prefers_other(cfg, e->seg_name) || len > e->len / 8 || e->len - e->cursor < len ||
      !writable_locked(s, e, mc_now_ns()))
    return NULL;
  *off = e->cursor;
  e->cursor += align_up(len);
  e->refs++;
  return e;
}

/* ------------------------------------------------------------------ carving for puts (put.c) */

static void carved(struct fp_ext *e, uint64_t off, struct mc_carve *c) {
  *c = (struct mc_carve){e, e->id, off, e->endpoint, e->addr + off};
}

int mc_fastput_carve(struct mc_store *s, uint64_t len, const struct mc_put_config *cfg, struct mc_carve *c) {
  struct mc_fastput *fp = s->fastput;
  uint64_t off = 0;
  struct fp_ext *last = NULL;
  pthread_mutex_lock(&fp->mu);
  struct fp_ext *e = carve_locked(s, fp, len, cfg, &off, &last);
  pthread_mutex_unlock(&fp->mu);
  finish_later(s, last);
  if (!e) return 1;
  carved(e, off, c);
  return 0;
}

size_t mc_fastput_carve_batch(struct mc_store *s, const uint64_t *lens, size_t n, const struct mc_put_config *cfg,
                              struct mc_carve *c) {
  struct mc_fastput *fp = s->fastput;
  if (atomic_load(&fp->batch_unsupported)) return 0;
  struct fp_ext **lasts = mc_calloc(n ? n : 1, sizeof(*lasts));
  size_t k = 0, nl = 0;
  pthread_mutex_lock(&fp->mu);
  for (size_t i = 0; i < n; i++) {
    uint64_t off = 0;
    struct fp_ext *last = NULL, *e = lens[i] ? carve_locked(s, fp, lens[i], cfg, &off, &last) : NULL;
    if (last) lasts[nl++] = last;
    if (e) carved(e, off, &c[i]), k++;
  }
  pthread_mutex_unlock(&fp->mu);
  for (size_t j = 0; j < nl; j++) finish_later(s, lasts[j]);
  mc_free(lasts);
  return k;
}

void mc_fastput_no_batch_commit(struct mc_store *s) { atomic_store(&s->fastput->batch_unsupported, 1); }

/* Renews the extent's deadline on success, marks it dead when the master no longer has it, retires it on
 * other errors, and drops the range's reference. */
void mc_fastput_settle(struct mc_store *s, const struct mc_carve *c, int rc, uint64_t sent) {
  struct mc_fastput *fp = s->fastput;
  struct fp_ext *e = c->ext, *last = NULL;
  pthread_mutex_lock(&fp->mu);
  if (!rc && sent + e->lease_ns > e->deadline_ns) e->deadline_ns = sent + e->lease_ns; /* renewed */
  if (rc == MC_LEASE_EXPIRED || rc == MC_ILLEGAL_CLIENT) e->dead = 1; /* the master no longer has it */
  if (rc && rc != MC_OBJECT_ALREADY_EXISTS && rc != MC_INVALID_PARAMS && fp->cur == e) last = retire_locked(fp, 0);
  struct fp_ext *mine = unref_locked(e);
  pthread_mutex_unlock(&fp->mu);
  finish_later(s, last);
  finish_later(s, mine);
}
