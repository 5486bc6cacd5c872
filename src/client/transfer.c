/* Moving object bytes between this client and replicas. Own-segment replicas are plain memcpy
 * (bounds-checked against our segment: addresses come off the wire); everything else goes through the
 * Transfer Engine in one batch, which picks the shared-memory path for same-host peers by itself.
 * The engine only accepts registered local memory, so unregistered caller memory is bounced through
 * the staging buffer, in waves of what fits. Also keeps the table of registered ranges. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

#define STAGE_WAIT_MS 10000

/* ------------------------------------------------------------------ registered ranges */

static size_t regs_lower(struct mc_store *s, uint64_t a) {
  size_t lo = 0, hi = s->regs.n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->regs.v[mid].addr < a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int mc_regs_add(struct mc_store *s, uint64_t addr, uint64_t len) {
  pthread_rwlock_wrlock(&s->regs.mu);
  if (s->regs.n == s->regs.cap) {
    s->regs.cap = s->regs.cap ? s->regs.cap * 2 : 8;
    s->regs.v = mc_realloc(s->regs.v, s->regs.cap * sizeof(*s->regs.v));
  }
  size_t i = regs_lower(s, addr);
  memmove(&s->regs.v[i + 1], &s->regs.v[i], (s->regs.n - i) * sizeof(*s->regs.v));
  s->regs.v[i] = (struct mc_region){addr, len};
  s->regs.n++;
  pthread_rwlock_unlock(&s->regs.mu);
  return 0;
}

int mc_regs_remove(struct mc_store *s, uint64_t addr, uint64_t *len_out) {
  int rc = -1;
  pthread_rwlock_wrlock(&s->regs.mu);
  size_t i = regs_lower(s, addr);
  if (i < s->regs.n && s->regs.v[i].addr == addr) {
    if (len_out) *len_out = s->regs.v[i].len;
    memmove(&s->regs.v[i], &s->regs.v[i + 1], (s->regs.n - i - 1) * sizeof(*s->regs.v));
    s->regs.n--;
    rc = 0;
  }
  pthread_rwlock_unlock(&s->regs.mu);
  return rc;
}

int mc_regs_covers(struct mc_store *s, const void *p, uint64_t len) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  int ok = 0;
  pthread_rwlock_rdlock(&s->regs.mu);
  size_t i = regs_lower(s, a + 1); /* first range starting after a */
  if (i > 0) {
    const struct mc_region *r = &s->regs.v[i - 1];
    uint64_t off = a - r->addr;
    ok = off < r->len && len <= r->len - off;
  }
  pthread_rwlock_unlock(&s->regs.mu);
  return ok;
}

/* ------------------------------------------------------------------ own segment */

/* The memory of own-segment address a (len bytes) in the main segment or a mounted extra one, or NULL. */
static char *own_memory(struct mc_store *s, uint64_t a, uint64_t len) {
  uint64_t base = (uint64_t)(uintptr_t)s->seg.base;
  if (s->seg.base && a >= base && a - base < s->seg.size && len <= s->seg.size - (a - base)) return (char *)(uintptr_t)a;
  for (size_t i = 0; i < s->xsegs.n; i++) {
    const struct mc_xseg *g = &s->xsegs.v[i];
    uint64_t b = (uint64_t)(uintptr_t)g->base;
    if (a >= b && a - b < g->size && len <= g->size - (a - b)) return (char *)(uintptr_t)a;
  }
  return NULL;
}

static void own_copy(struct mc_store *s, struct mc_xfer *x) {
  x->path = "local";
  pthread_rwlock_rdlock(&s->xsegs.mu); /* an extra segment's memory is not freed under a copy */
  char *mine = own_memory(s, x->remote, x->len);
  if (!mine) {
    pthread_rwlock_unlock(&s->xsegs.mu);
    LOG_WARN("replica at 0x%llx+%llu is outside this client's segments", (unsigned long long)x->remote,
             (unsigned long long)x->len);
    x->rc = MC_TRANSFER_FAIL;
    return;
  }
  uint64_t t0 = mc_now_ns();
  if (x->opcode == OPCODE_WRITE) memcpy(mine, x->local, x->len);
  else memcpy(x->local, mine, x->len);
  pthread_rwlock_unlock(&s->xsegs.mu);
  x->dur_us = (mc_now_ns() - t0) / 1000;
  x->rc = 0;
}

/* ------------------------------------------------------------------ engine batches */

struct seg_ref {
  const char *endpoint;
  int32_t id;
  const char *path;
};

/* The engine segment for an endpoint, opened once per run (refresh: re-read its descriptor). */
static struct seg_ref *resolve(struct mc_store *s, struct seg_ref *refs, size_t *nrefs, const char *ep, int refresh) {
  for (size_t i = *nrefs; i-- > 0;)
    if (!strcmp(refs[i].endpoint, ep)) return &refs[i];
  struct seg_ref *r = &refs[(*nrefs)++];
  r->endpoint = ep;
  r->id = refresh ? mc_te_reopen_segment(s->engine.te, ep) : openSegment(s->engine.te, ep);
  r->path = r->id >= 0 ? mc_te_segment_path(s->engine.te, r->id) : NULL;
  if (!r->path) LOG_WARN("segment %s is not reachable (id %d)", ep, r->id);
  return r;
}

/* One engine batch; ok[i] = 1 for completed tasks. Returns 0, or the submit error (ok untouched). */
static int submit_wait(struct mc_store *s, struct transfer_request *req, size_t n, int *ok) {
  batch_id_t b = allocateBatchID(s->engine.te, n);
  if (b == INVALID_BATCH) return -1;
  int rc = submitTransfer(s->engine.te, b, req, n);
  if (rc) {
    freeBatchID(s->engine.te, b);
    return rc;
  }
  mc_te_wait_batch(s->engine.te, b, -1); /* the engine bounds every task (connect and no-progress timeouts) */
  for (size_t i = 0; i < n; i++) {
    struct transfer_status st = {0};
    ok[i] = getTransferStatus(s->engine.te, b, i, &st) == 0 && st.status == STATUS_COMPLETED;
  }
  freeBatchID(s->engine.te, b);
  return 0;
}

/* Items whose local memory is registered. */
static void run_engine(struct mc_store *s, struct mc_xfer **xs, size_t n, int refresh) {
  if (!n) return;
  struct seg_ref *refs = mc_calloc(n, sizeof(*refs));
  struct transfer_request *req = mc_calloc(n, sizeof(*req));
  struct mc_xfer **sub = mc_calloc(n, sizeof(*sub));
  int *ok = mc_calloc(n, sizeof(int));
  size_t nrefs = 0, k = 0;
  for (size_t i = 0; i < n; i++) {
    struct seg_ref *r = resolve(s, refs, &nrefs, xs[i]->endpoint, refresh);
    xs[i]->rc = MC_TRANSFER_FAIL;
    xs[i]->path = r->path;
    if (!r->path) continue;
    req[k] = (struct transfer_request){xs[i]->opcode, xs[i]->local, r->id, xs[i]->remote, xs[i]->len};
    sub[k++] = xs[i];
  }
  uint64_t t0 = mc_now_ns();
  if (k && submit_wait(s, req, k, ok) && k > 1) /* isolate the request the engine refused */
    for (size_t i = 0; i < k; i++)
      if (submit_wait(s, &req[i], 1, &ok[i])) ok[i] = 0;
  uint64_t us = (mc_now_ns() - t0) / 1000;
  for (size_t i = 0; i < k; i++) {
    sub[i]->rc = ok[i] ? 0 : MC_TRANSFER_FAIL;
    sub[i]->dur_us = us;
  }
  mc_free(ok);
  mc_free(sub);
  mc_free(req);
  mc_free(refs);
}

/* ------------------------------------------------------------------ staging bounce */

/* An item larger than the staging buffer: chunk by chunk through it. */
static void bounce_chunked(struct mc_store *s, struct mc_xfer *x, int refresh) {
  uint64_t cap = mc_stage_capacity(s->staging.pool), done = 0, us = 0;
  x->rc = 0;
  while (done < x->len && !x->rc) {
    uint64_t n = MC_MIN(cap, x->len - done);
    char *p = mc_stage_alloc(s->staging.pool, n, STAGE_WAIT_MS);
    if (!p) {
      x->rc = MC_INVALID_PARAMS;
      break;
    }
    struct mc_xfer c = *x, *cp = &c;
    c.local = p;
    c.remote = x->remote + done;
    c.len = n;
    if (x->opcode == OPCODE_WRITE) memcpy(p, (char *)x->local + done, n);
    run_engine(s, &cp, 1, refresh && done == 0);
    if (!c.rc && x->opcode == OPCODE_READ) memcpy((char *)x->local + done, p, n);
    mc_stage_release(s->staging.pool, p, n);
    x->rc = c.rc;
    x->path = c.path;
    us += c.dur_us;
    done += n;
  }
  x->dur_us = us;
}

/* Items that fit the staging buffer: as many at once as the free space allows. */
static void bounce_waves(struct mc_store *s, struct mc_xfer **xs, size_t n, int refresh) {
  struct mc_xfer *w = mc_calloc(n, sizeof(*w));
  struct mc_xfer **wp = mc_calloc(n, sizeof(*wp));
  for (size_t i = 0; i < n;) {
    size_t k = 0;
    for (; i + k < n; k++) {
      struct mc_xfer *x = xs[i + k];
      char *p = mc_stage_alloc(s->staging.pool, x->len, k ? 0 : STAGE_WAIT_MS); /* block only holding nothing */
      if (!p) break;
      w[k] = *x;
      w[k].local = p;
      wp[k] = &w[k];
      if (x->opcode == OPCODE_WRITE) memcpy(p, x->local, x->len);
    }
    if (!k) { /* nothing fit even after waiting */
      xs[i++]->rc = MC_INVALID_PARAMS;
      continue;
    }
    run_engine(s, wp, k, refresh);
    for (size_t j = 0; j < k; j++) {
      struct mc_xfer *x = xs[i + j];
      if (!w[j].rc && x->opcode == OPCODE_READ) memcpy(x->local, w[j].local, x->len);
      mc_stage_release(s->staging.pool, w[j].local, x->len);
      x->rc = w[j].rc;
      x->path = w[j].path;
      x->dur_us = w[j].dur_us;
    }
    i += k;
  }
  mc_free(wp);
  mc_free(w);
}

static void run_bounce(struct mc_store *s, struct mc_xfer **xs, size_t n, int refresh) {
  if (!n) return;
  if (!s->staging.pool) {
    LOG_WARN("transfer from/to unregistered memory needs a staging buffer (local_buffer_size > 0) or "
             "register_buffer");
    for (size_t i = 0; i < n; i++) xs[i]->rc = MC_INVALID_PARAMS;
    return;
  }
  uint64_t cap = mc_stage_capacity(s->staging.pool);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (xs[i]->len > cap) bounce_chunked(s, xs[i], refresh);
    else xs[k++] = xs[i];
  }
  bounce_waves(s, xs, k, refresh);
}

void mc_xfer_run(struct mc_store *s, struct mc_xfer *x, size_t n, int refresh) {
  struct mc_xfer **eng = mc_calloc(n ? n : 1, sizeof(*eng)), **bnc = mc_calloc(n ? n : 1, sizeof(*bnc));
  size_t ne = 0, nb = 0;
  for (size_t i = 0; i < n; i++) {
    x[i].rc = MC_TRANSFER_FAIL;
    x[i].path = NULL;
    x[i].dur_us = 0;
    if (!x[i].len) {
      x[i].rc = 0;
      x[i].path = "local";
    } else if (!strcmp(x[i].endpoint, s->self.te_name)) {
      own_copy(s, &x[i]);
    } else if (mc_regs_covers(s, x[i].local, x[i].len)) {
      eng[ne++] = &x[i];
    } else {
      bnc[nb++] = &x[i];
    }
  }
  run_engine(s, eng, ne, refresh);
  run_bounce(s, bnc, nb, refresh);
  mc_stats_xfers(s, x, n);
  mc_free(bnc);
  mc_free(eng);
}

void mc_xfer_run_retry(struct mc_store *s, struct mc_xfer *x, size_t n) {
  mc_xfer_run(s, x, n, 0);
  size_t nf = 0;
  for (size_t i = 0; i < n; i++) nf += x[i].rc == MC_TRANSFER_FAIL;
  if (!nf) return;
  struct mc_xfer *f = mc_calloc(nf, sizeof(*f));
  size_t *fi = mc_calloc(nf, sizeof(size_t)), k = 0;
  for (size_t i = 0; i < n; i++)
    if (x[i].rc == MC_TRANSFER_FAIL) f[k] = x[i], fi[k++] = i;
  mc_xfer_run(s, f, nf, 1);
  for (size_t j = 0; j < nf; j++) x[fi[j]] = f[j];
  mc_free(fi);
  mc_free(f);
}
