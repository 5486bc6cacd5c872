/* The process lifecycle of the libraries' handles (docs/store-client.md, "Process lifecycle: exit and
 * signals"): one registry of the live handles of both libraries (transfer engines and store clients) and
 * the two ways a process ends without destroying them, exit() and SIGINT/SIGTERM/SIGHUP.
 *
 * Registry: a handle embeds a struct mc_lifecycle, adds it when it is created and removes it first thing
 * in its destroy; there is no limit on the number of handles. mc_lifecycle_remove waits while a
 * teardown-all is running that handle's teardown, so a teardown-all never touches a destroyed handle.
 *
 * Events a handle asks for with mc_lifecycle_watch:
 *   MC_LIFECYCLE_AT_EXIT    its teardown runs from an atexit hook;
 *   MC_LIFECYCLE_ON_SIGNAL  its teardown runs on SIGINT/SIGTERM/SIGHUP, then the signal's default action
 *                           ends the process. The library's handler is installed only for a signal whose
 *                           disposition is still SIG_DFL: a handler or SIG_IGN of the application is kept
 *                           as it is (logged once), and nothing is torn down on that signal. An
 *                           application handler installed later and calling the one it replaced (ours)
 *                           gets the same teardown and default action.
 * The handler only writes the signal number into a pipe; a thread of the module does the teardown, puts
 * SIG_DFL back and re-raises. A second signal during the teardown takes the default action at once. No
 * signal mask of the application is changed. A forked child never tears down its parent's handles: its
 * handler takes the default action and its exit() skips them.
 *
 * A teardown callback may block (it takes the handle's own locks) and must be idempotent; it must not free
 * the handle (the application may still call destroy) nor remove its own node.
 *
 * One instance per process: libmooncake_store reaches these functions (and their state) in
 * libmooncake_te, which holds mooncake_common; a build that hides symbols must keep them one instance.
 *
 * Locking: the module's list lock guards every field of every node; it is never held while a teardown
 * runs and is a leaf otherwise. Teardown-alls (exit, signal) are serialised by a lock of their own, taken
 * before the list lock. */
#ifndef MC_LIFECYCLE_H
#define MC_LIFECYCLE_H
#include <sys/types.h>

enum { MC_LIFECYCLE_AT_EXIT = 1, MC_LIFECYCLE_ON_SIGNAL = 2 };

struct mc_lifecycle {
  struct mc_lifecycle *prev, *next;
  void (*teardown)(struct mc_lifecycle *n);
  char *name;      /* mc_lifecycle_set_name's copy, or NULL */
  unsigned events; /* MC_LIFECYCLE_* asked for */
  pid_t pid;       /* the process that added it: a forked child leaves it alone */
  int linked;      /* between add and remove */
  int busy;        /* a teardown-all is running its teardown: remove waits */
};

/* Adds n (zeroed by the caller or not: every field is set) with its teardown callback. */
void mc_lifecycle_add(struct mc_lifecycle *n, void (*teardown)(struct mc_lifecycle *n));
/* Unlinks n, waiting for a teardown of n in progress; frees its name. Idempotent, also for a node never
 * added (all zero). */
void mc_lifecycle_remove(struct mc_lifecycle *n);
/* Adds events (MC_LIFECYCLE_*) to n and starts what they need (atexit hook; signal thread and handlers).
 * 0, or -1 (logged) when the signal thread cannot start: n is then not torn down on signals. */
int mc_lifecycle_watch(struct mc_lifecycle *n, unsigned events);
/* The name n is known by among this process's handles (a copy; NULL clears it). */
void mc_lifecycle_set_name(struct mc_lifecycle *n, const char *name);
/* 1 when a live handle of this process other than self carries this name. */
int mc_lifecycle_name_taken(const struct mc_lifecycle *self, const char *name);

#endif
