/* The data core's process-wide parts: the verbosity of per-request traces (MLOG_V) and the background
 * threads' wait (eviction, housekeeping). */
#include <time.h>

#include "master_core/core.h"

int mc_master_verbosity;

void mc_master_set_verbosity(int v) { mc_master_verbosity = v; }

int mc_bg_wait(struct mc_master *m, uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + ms * MC_NS_PER_MS;
  ts.tv_sec += (time_t)(ns / MC_NS_PER_S);
  ts.tv_nsec = (long)(ns % MC_NS_PER_S);
  pthread_mutex_lock(&m->bg_mu);
  if (!m->stopping) pthread_cond_timedwait(&m->bg_cv, &m->bg_mu, &ts);
  int stop = m->stopping;
  pthread_mutex_unlock(&m->bg_mu);
  return stop;
}
