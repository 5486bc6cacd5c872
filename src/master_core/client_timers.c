/* The clients' expiry timers (m->timer_mu, a leaf): a min-heap of (deadline, client), one entry per client in
 * the table. The client table (segments.c) arms a client's timer when it adds the client; the housekeeping
 * thread (liveness.c) takes the due ones and re-arms those whose client pinged since. A ping only stores the
 * client's deadline; its entry is looked at when the deadline it was pushed with comes, and pushed again with
 * the client's current deadline if that moved. A tick with nothing due costs O(1) however many clients there
 * are (rather than a walk of them all every 100 ms). */
#include "common/alloc.h"
#include "master_core/core.h"
#include "master_core/minheap.h"

MC_MINHEAP(timer_heap, struct ctimer, due_ns)

static void timer_push_locked(struct mc_master *m, struct ctimer t) {
  if (m->ntimers == m->captimers) {
    m->captimers = m->captimers ? 2 * m->captimers : 64;
    m->timers = mc_realloc(m->timers, sizeof(*m->timers) * m->captimers);
  }
  m->timers[m->ntimers] = t;
  timer_heap_up(m->timers, m->ntimers++);
}

void mc_client_timer_push(struct mc_master *m, const struct mclient *c) {
  mc_client_timer_rearm(m, &(struct ctimer){atomic_load(&c->deadline_ns), c->gen, c->id});
}

void mc_client_timer_rearm(struct mc_master *m, const struct ctimer *t) {
  pthread_mutex_lock(&m->timer_mu);
  timer_push_locked(m, *t);
  pthread_mutex_unlock(&m->timer_mu);
}

int mc_client_timer_pop_due(struct mc_master *m, uint64_t now, struct ctimer *t) {
  pthread_mutex_lock(&m->timer_mu);
  int due = m->ntimers && m->timers[0].due_ns <= now;
  *t = due ? m->timers[0] : (struct ctimer){0};
  if (due) {
    m->timers[0] = m->timers[--m->ntimers];
    timer_heap_down(m->timers, m->ntimers, 0);
  }
  pthread_mutex_unlock(&m->timer_mu);
  return due;
}

void mc_client_timers_free(struct mc_master *m) {
  mc_free(m->timers);
  m->timers = NULL;
  m->ntimers = m->captimers = 0;
}
