#include "common/progress.h"

#include <stdarg.h>
#include <time.h>

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void mc_progress_start(struct mc_progress *p, FILE *f, int tty, double every_s) {
  *p = (struct mc_progress){.f = f, .tty = tty, .every_s = every_s};
  p->next = tty ? 0 : mono_now() + every_s;
}

void mc_progress_show(struct mc_progress *p, const char *fmt, ...) {
  double now = mono_now();
  if (now < p->next) return;
  p->next = now + (p->tty ? 1.0 / MC_PROGRESS_TTY_HZ : p->every_s);
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (p->tty) fprintf(p->f, "\r%s\033[K", line); /* (erase what a longer line left) */
  else fprintf(p->f, "%s\n", line);
  fflush(p->f);
  p->shown = 1;
}

void mc_progress_end(struct mc_progress *p) {
  if (p->tty && p->shown) fprintf(p->f, "\r\033[K");
  fflush(p->f);
  p->shown = 0;
}

