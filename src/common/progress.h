/* A progress line for a long operation (docs/operations.md, "Progress": the mooncake CLI's drain --wait,
 * trace_replay, transfer_engine_bench): on a terminal one line rewritten
 * in place ('\r') at most MC_PROGRESS_TTY_HZ times a second; elsewhere (a pipe, a log) a plain line every
 * every_s seconds, the first after every_s, so a short operation prints nothing there. */
#ifndef MC_PROGRESS_H
#define MC_PROGRESS_H
#include <stdio.h>

#define MC_PROGRESS_TTY_HZ 10
#define MC_PROGRESS_EVERY_S 5.0 /* the period of plain lines the tools use (stderr not a terminal) */
struct mc_progress {
  FILE *f;
  int tty, shown;
  double every_s, next; /* next: monotonic seconds of the next line */
};
void mc_progress_start(struct mc_progress *p, FILE *f, int tty, double every_s);
/* A line, when one is due (printf format). */
void mc_progress_show(struct mc_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears a terminal's line, so what follows starts on a clean one. */
void mc_progress_end(struct mc_progress *p);

#endif
