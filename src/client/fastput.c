/* One-round-trip puts through write extents (master/extents.h; docs/store-client.md "Write extents").
 *
 * A client reserves an extent from the master once, then for each eligible put carves [cursor, cursor +
 * size) locally, writes the bytes there and sends one COMMIT_PUT. A client with a mounted segment pings
 * and is subject to liveness; a pure client (no segment, no pings: docs/master.md, "Liveness and metadata
 * cleanup") gets a lease-only extent, which the master ends only by its lease (min(put_start_release_timeout_sec,
 * client_ttl), renewed by every commit), RELEASE_EXTENT or an unmount, never by a client expiry; its grant says
 * client_ttl = 0.
 * Anything unusual (no extent to be had, a failed write, a commit error other than "already exists")
 * makes that one put take the PutStart/PutEnd path instead, so callers see exactly the results of that
 * path. MC_STORE_PUT_EXTENTS=0 turns the fast path off.
 *
 * Eligible: put (not upsert), replica_num 1, 0 < size <= 1 MiB and <= 1/8 of the extent, and no preferred
 * segment other than the extent's (the first put reserves with its own config, so placement follows the
 * same rules as PutStart: preferred, writer's host, writer's zone, rest).
 *
 * Safety (see master/extents.c): a write into the extent starts only while
 *   now + margin < (time the reserve or last commit was SENT) + lease, and (unless lease-only)
 *   now + margin < (time the last OK ping was SENT) + client_ttl,
 * margin = min(lease, client_ttl) / 4 (lease / 4 for a lease-only extent). The master reclaims an
 * extent no earlier than either bound, so a write that starts in time has at least the margin to land.
 * And a write starts only within MC_FASTPUT_CONTACT_NS (2 s; pings go every 1 s) of the last successful
 * contact with the master (OK ping, reserve or commit): a master that restarted knows nothing of our
 * extent, but it keeps every re-mounted segment free of new allocations for longer than that
 * (MC_REMOUNT_QUIET_NS), so a write aimed at the old extent cannot land in space the new master handed
 * out. The extent is retired (never written again) on any failed write, any commit error other than
 * OBJECT_ALREADY_EXISTS / INVALID_PARAMS, and when a ping answers NEED_REMOUNT (a master that forgot
 * us, or the first ping after a mount: released either way, see setup.c). Writes use cached segment descriptors without the refresh-and-retry of the
 * ordinary path, so a write aimed at a holder that restarted fails rather than landing in its new
 * incarnation's memory. The cursor only moves forward: a range is written at most once, whatever
 * happens to the put that carved it.
 *
 * Locking: fp->mu guards the current extent pointer, its cursor, deadline and reference count; it is
 * held across RESERVE_EXTENT (puts wait for it rather than reserving twice), never across a write, a
 * commit or a release. Extents are reference counted: the current one holds a reference, each put
 * that carved from it another; the last one out of a retired extent releases it at the master.
 *
 * Batches (mc_fastput_batch): the eligible keys of a batch put are carved in order under one lock, written
 * in one transfer batch and committed with one BATCH_COMMIT_PUT per extent (usually one), each key with
 * exactly the single put's rules and results; keys it does not finish take the batch PutStart/PutEnd path.
 * Only batches whose eligible values total at most FP_BATCH_BYTES go this way: the last write of such a
 * batch starts soon after the carving checked the extent's deadline, as a single put's does, and an
 * extent serves several batches. Larger batches gain little from saving one round trip beside their
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
#include "net/mrpc.h"

#define FP_HINT (16ull << 20)
#define FP_MAX_VALUE (1ull << 20)
#define FP_ALIGN 8ull
#define FP_RETRY_NS (1000ull * 1000 * 1000) /* after a refused reserve */
#define FP_RPC_MS 3000
#define FP_BATCH_BYTES (4ull << 20) /* eligible bytes of a batch that goes through extents, at most */

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
  return strcmp(ep, s->te_name) && mc_lifecycle_name_taken(&s->lc, ep);
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
  mc_lifecycle_set_name(&s->lc, s->te_name);
}

/* ------------------------------------------------------------------ RPCs */

static int rpc_reserve(struct mc_store *s, uint64_t min_len, const struct mc_put_config *cfg, struct fp_ext *e) {
  struct mc_wbuf req = {0}, rep = {0};
  mc_put_uuid(&req, s->client_id);
  mc_w_u64(&req, min_len);
  mc_w_u64(&req, FP_HINT);
  mc_put_config(&req, cfg);
  int rc = mc_mrpc_call_timeout(s->master->rpc, MC_OP_RESERVE_EXTENT, &req, &rep, FP_RPC_MS);
  if (!rc) {
    struct mc_rbuf_rd r;
    struct mc_replica_rec rec = {0};
    mc_r_init(&r, rep.p, rep.len);
    e->id = mc_r_u64(&r);
    mc_get_replica(&r, &rec);
    e->lease_ns = mc_r_u64(&r) * 1000000ull;
    e->ttl_ns = mc_r_u64(&r) * 1000000ull;
    (void)mc_r_u64(&r); /* view_version */
    e->addr = rec.address;
    e->len = rec.size;
    e->endpoint = rec.te_endpoint, rec.te_endpoint = NULL;
    e->seg_name = rec.segment_name, rec.segment_name = NULL;
    mc_replica_rec_free(&rec);
    if (r.err || !e->endpoint || !e->seg_name || !e->len) rc = MC_RPC_FAIL;
  }
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

static int rpc_commit(struct mc_store *s, const struct fp_ext *e, const char *key, uint64_t off, uint64_t len,
                      const struct mc_put_config *cfg) {
  struct mc_wbuf req = {0}, rep = {0};
  mc_put_uuid(&req, s->client_id);
  mc_w_u64(&req, e->id);
  mcli_put_key(&req, s->master, key);
  mc_w_u64(&req, off);
  mc_w_u64(&req, len);
  mc_w_u8(&req, cfg->soft_pin_action);
  mc_w_i64(&req, cfg->soft_pin_ttl_ms);
  mc_w_u8(&req, cfg->with_hard_pin);
  int rc = mc_mrpc_call(s->master->rpc, MC_OP_COMMIT_PUT, &req, &rep);
  mc_w_free(&req);
  mc_w_free(&rep);
  return rc;
}

/* One BATCH_COMMIT_PUT of n keys carved from e: st[i] per key (the call's error for all on failure). */
static void rpc_batch_commit(struct mc_store *s, const struct fp_ext *e, const char *const *keys, const uint64_t *offs,
                             const uint64_t *lens, size_t n, const struct mc_put_config *cfg, int *st) {
  struct mc_wbuf req = {0}, rep = {0};
  mc_put_uuid(&req, s->client_id);
  mc_w_u64(&req, e->id);
  mc_w_u8(&req, cfg->soft_pin_action);
  mc_w_i64(&req, cfg->soft_pin_ttl_ms);
  mc_w_u8(&req, cfg->with_hard_pin);
  mc_w_u32(&req, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    mcli_put_key(&req, s->master, keys[i]);
    mc_w_u64(&req, offs[i]);
    mc_w_u64(&req, lens[i]);
  }
  int rc = mc_mrpc_call(s->master->rpc, MC_OP_BATCH_COMMIT_PUT, &req, &rep);
  if (!rc) {
    struct mc_rbuf_rd r;
    mc_r_init(&r, rep.p, rep.len);
    if (mc_r_u32(&r) != n) rc = MC_RPC_FAIL;
    for (size_t i = 0; i < n && !rc; i++) st[i] = mc_r_i32(&r);
    if (r.err) rc = MC_RPC_FAIL;
  }
  for (size_t i = 0; i < n && rc; i++) st[i] = rc;
  mc_w_free(&req);
  mc_w_free(&rep);
}

static void rpc_release(struct mc_store *s, uint64_t id) {
  struct mc_wbuf req = {0}, rep = {0};
  mc_put_uuid(&req, s->client_id);
  mc_w_u64(&req, id);
  int rc = mc_mrpc_call_timeout(s->master->rpc, MC_OP_RELEASE_EXTENT, &req, &rep, FP_RPC_MS);
  if (rc) LOG_WARN("releasing write extent %llu failed: %s (the master reclaims it when its lease ends)",
                   (unsigned long long)id, mooncake_store_err_name(rc));
  mc_w_free(&req);
  mc_w_free(&rep);
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
  mc_store_kick_heartbeat(s);
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

static uint64_t align_up(uint64_t n) { return (n + FP_ALIGN - 1) & ~(FP_ALIGN - 1); }

int mc_fastput_may_start(uint64_t now, uint64_t deadline_ns, uint64_t lease_ns, uint64_t ttl_ns, uint64_t margin_ns,
                         uint64_t ping_ok_ns) {
  uint64_t ping = ttl_ns ? ping_ok_ns : 0, contact = MC_MAX(ping, deadline_ns - lease_ns);
  int live_ok = !ttl_ns || (ping && now + margin_ns < ping + ttl_ns);
  return now + margin_ns < deadline_ns && live_ok && now < contact + MC_FASTPUT_CONTACT_NS;
}

/* Writes may start into e at now (fp->mu held). */
static int writable_locked(struct mc_store *s, const struct fp_ext *e, uint64_t now) {
  return mc_fastput_may_start(now, e->deadline_ns, e->lease_ns, e->ttl_ns, e->margin_ns,
                              e->ttl_ns ? atomic_load(&s->ping_ok_ns) : 0);
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
  int rc = rpc_reserve(s, len, cfg, e);
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

/* ------------------------------------------------------------------ put */

/* After one put's write (and commit, sent at `sent`) into e ended with rc: renews the extent's deadline
 * on success, marks it dead when the master no longer has it, retires it on other errors, and drops the
 * put's reference. */
static void settle(struct mc_store *s, struct fp_ext *e, int rc, uint64_t sent) {
  struct mc_fastput *fp = s->fastput;
  struct fp_ext *last = NULL;
  pthread_mutex_lock(&fp->mu);
  if (!rc && sent + e->lease_ns > e->deadline_ns) e->deadline_ns = sent + e->lease_ns; /* renewed */
  if (rc == MC_LEASE_EXPIRED || rc == MC_ILLEGAL_CLIENT) e->dead = 1; /* the master no longer has it */
  if (rc && rc != MC_OBJECT_ALREADY_EXISTS && rc != MC_INVALID_PARAMS && fp->cur == e) last = retire_locked(fp, 0);
  struct fp_ext *mine = unref_locked(e);
  pthread_mutex_unlock(&fp->mu);
  finish_later(s, last);
  finish_later(s, mine);
}

/* A value the extent path may take (besides the config and extent checks). */
static int eligible(const char *key, uint64_t len) { return len && len <= FP_MAX_VALUE && *key; }

int mc_fastput_put(struct mc_store *s, const char *key, const void *src, uint64_t len, const struct mc_put_config *cfg) {
  struct mc_fastput *fp = s->fastput;
  if (!fp || cfg->replica_num != 1 || !eligible(key, len)) return 1;
  uint64_t off = 0;
  struct fp_ext *last = NULL;
  pthread_mutex_lock(&fp->mu);
  struct fp_ext *e = carve_locked(s, fp, len, cfg, &off, &last);
  pthread_mutex_unlock(&fp->mu);
  finish_later(s, last);
  if (!e) return 1;
  struct mc_xfer x = {OPCODE_WRITE, (void *)src, e->endpoint, e->addr + off, len};
  mc_xfer_run(s, &x, 1, 0); /* cached descriptors, no refresh-and-retry (see above) */
  int rc = x.rc, done = 0;
  uint64_t sent = mc_now_ns();
  if (!rc) {
    rc = rpc_commit(s, e, key, off, len, cfg);
    /* an existing key keeps its value, the put returns 0 (docs/store-client.md, "Put") */
    done = !rc || rc == MC_OBJECT_ALREADY_EXISTS;
  } else {
    LOG_WARN("put key=%s: writing into write extent %llu failed (%s); retiring it", key, (unsigned long long)e->id,
             mooncake_store_err_name(rc));
  }
  settle(s, e, rc, sent);
  if (!done && rc) LOG_DEBUG("put key=%s: extent path gave %s; redoing it with PutStart/PutEnd", key,
                             mooncake_store_err_name(rc));
  return done ? 0 : 1;
}

/* ------------------------------------------------------------------ batch put */

void mc_fastput_batch(struct mc_store *s, const char *const *keys, void *const *bufs, const uint64_t *lens, size_t n,
                      const struct mc_put_config *cfg, uint8_t *done) {
  struct mc_fastput *fp = s->fastput;
  if (!fp || cfg->replica_num != 1 || !n || atomic_load(&fp->batch_unsupported)) return;
  uint64_t total = 0;
  for (size_t i = 0; i < n && total <= FP_BATCH_BYTES; i++)
    if (eligible(keys[i], lens[i])) total += align_up(lens[i]);
  if (total > FP_BATCH_BYTES) return;
  struct fp_ext **ext = mc_calloc(n, sizeof(*ext)), **lasts = mc_calloc(n, sizeof(*lasts));
  uint64_t *off = mc_calloc(n, sizeof(*off));
  size_t *idx = mc_calloc(n, sizeof(*idx)), k = 0, nl = 0;
  pthread_mutex_lock(&fp->mu);
  for (size_t i = 0; i < n; i++) {
    if (!eligible(keys[i], lens[i])) continue;
    struct fp_ext *last = NULL;
    ext[i] = carve_locked(s, fp, lens[i], cfg, &off[i], &last);
    if (last) lasts[nl++] = last;
    if (ext[i]) idx[k++] = i;
  }
  pthread_mutex_unlock(&fp->mu);
  for (size_t j = 0; j < nl; j++) finish_later(s, lasts[j]);
  if (!k) goto out;
  /* every carved key's bytes in one transfer batch (cached descriptors, no refresh-and-retry: see above) */
  struct mc_xfer *x = mc_calloc(k, sizeof(*x));
  for (size_t j = 0; j < k; j++) {
    size_t i = idx[j];
    x[j] = (struct mc_xfer){OPCODE_WRITE, bufs[i], ext[i]->endpoint, ext[i]->addr + off[i], lens[i]};
  }
  mc_xfer_run(s, x, k, 0);
  /* one BATCH_COMMIT_PUT per extent, over the keys whose bytes landed */
  const char **ck = mc_calloc(k, sizeof(*ck));
  uint64_t *co = mc_calloc(k, sizeof(*co)), *cl = mc_calloc(k, sizeof(*cl));
  size_t *cj = mc_calloc(k, sizeof(*cj));
  int *st = mc_calloc(k, sizeof(*st));
  uint8_t *handled = mc_calloc(k, 1);
  for (size_t j = 0; j < k; j++) {
    if (handled[j]) continue;
    struct fp_ext *e = ext[idx[j]];
    uint64_t eid = e->id; /* e may be gone once the group's last reference is settled */
    size_t c = 0, failed = 0, first = 0;
    for (size_t q = j; q < k; q++) {
      size_t i = idx[q];
      if (handled[q] || ext[i] != e) continue;
      handled[q] = 1;
      if (x[q].rc) { /* as a single put: the extent is retired, the key takes the slow path */
        if (!failed++) first = q;
        settle(s, e, x[q].rc, 0);
        continue;
      }
      ck[c] = keys[i], co[c] = off[i], cl[c] = lens[i], cj[c++] = i;
    }
    if (failed)
      LOG_WARN("batch put: writing %zu keys into write extent %llu failed (key=%s: %s); retiring it", failed,
               (unsigned long long)eid, keys[idx[first]], mooncake_store_err_name(x[first].rc));
    if (!c) continue;
    uint64_t sent = mc_now_ns();
    rpc_batch_commit(s, e, ck, co, cl, c, cfg, st);
    if (st[0] == MC_NOT_SUPPORTED) atomic_store(&fp->batch_unsupported, 1); /* these keys take the slow path */
    for (size_t q = 0; q < c; q++) {
      done[cj[q]] = !st[q] || st[q] == MC_OBJECT_ALREADY_EXISTS; /* an existing key keeps its value */
      if (st[q] && !done[cj[q]])
        LOG_DEBUG("put key=%s: extent path gave %s; redoing it with PutStart/PutEnd", ck[q],
                  mooncake_store_err_name(st[q]));
      settle(s, e, st[q], sent);
    }
  }
  mc_free(handled);
  mc_free(st);
  mc_free(cj);
  mc_free(cl);
  mc_free(co);
  mc_free(ck);
  mc_free(x);
out:
  mc_free(idx);
  mc_free(off);
  mc_free(lasts);
  mc_free(ext);
}
