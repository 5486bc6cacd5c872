/* The client's transfer and lookup statistics (docs/admin.md, "Client reports"): counted lock-free as
 * transfers complete and lookups are answered, and sent to the master as deltas since the last acknowledged
 * report, by the heartbeat thread every MC_STORE_STATS_INTERVAL_MS (default 5 s, at most 5 s) and once more
 * at teardown so short-lived clients are counted (master_rpc.c sends them). Pure clients report too; a report is
 * never a ping. */
#include <stdatomic.h>
#include <string.h>

#include "client/client.h"
#include "common/knobs.h"
#include "common/log.h"
#include "common/util.h"

static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

void mc_stats_xfers(struct mc_store *s, const struct mc_xfer *x, size_t n) {
  struct mc_cstats *st = &s->stats;
  for (size_t i = 0; i < n; i++) {
    if (x[i].rc || !x[i].len) continue;
    add(x[i].opcode == OPCODE_READ ? &st->bytes_read : &st->bytes_written, x[i].len);
    if (!x[i].path || !strcmp(x[i].path, "local")) continue; /* own-segment memcpy is not a transfer */
    add(&st->lat[mc_lat_bucket(x[i].dur_us)], 1);
    add(&st->lat_sum_us, x[i].dur_us);
  }
}

void mc_stats_lookup(struct mc_store *s, int found) { add(found ? &s->stats.hits : &s->stats.misses, 1); }

void mc_stats_replica_lookup(struct mc_store *s, int status) {
  if (!status || status == MC_OBJECT_NOT_FOUND || status == MC_REPLICA_IS_NOT_READY) mc_stats_lookup(s, !status);
}

/* Current totals minus what the master has acknowledged. */
static void delta(struct mc_cstats *st, struct mc_client_stats *d) {
  for (uint32_t i = 0; i < MC_LAT_NBUCKETS; i++) d->lat[i] = atomic_load(&st->lat[i]) - st->sent.lat[i];
  d->lat_sum_us = atomic_load(&st->lat_sum_us) - st->sent.lat_sum_us;
  d->bytes_read = atomic_load(&st->bytes_read) - st->sent.bytes_read;
  d->bytes_written = atomic_load(&st->bytes_written) - st->sent.bytes_written;
  d->hits = atomic_load(&st->hits) - st->sent.hits;
  d->misses = atomic_load(&st->misses) - st->sent.misses;
}

static int empty(const struct mc_client_stats *d) {
  static const struct mc_client_stats zero;
  return !memcmp(d->lat, zero.lat, sizeof(d->lat)) && !d->bytes_read && !d->bytes_written && !d->hits && !d->misses;
}

int mc_stats_report(struct mc_store *s, int tmo_ms) {
  struct mc_cstats *st = &s->stats;
  pthread_mutex_lock(&st->mu);
  struct mc_client_stats d = {.client = s->self.client_id};
  delta(st, &d);
  int rc = 0;
  if (!st->unsupported && !empty(&d)) {
    rc = mcli_report_stats(s->master.cli, &d, tmo_ms);
    if (!rc) mc_client_stats_add(&st->sent, &d); /* a lost reply may count a report twice; a failed one is resent */
    if (rc == MC_NOT_SUPPORTED) {
      st->unsupported = 1;
      LOG_INFO("client %s: the master does not take statistics reports (an older master); not sending them", s->self.name);
    }
  }
  pthread_mutex_unlock(&st->mu);
  return rc;
}

int mc_stats_interval_ms(void) { return (int)mc_knob_long(MC_KNOB_STORE_STATS_INTERVAL_MS); }
