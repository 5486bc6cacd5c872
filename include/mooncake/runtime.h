/* Process-wide services of the Mooncake libraries: the log and the lifecycle of live handles.
 *
 * One instance per process: libmooncake_te holds their state and exports these functions;
 * libmooncake_store (and any library built on the engine) calls them there, so both libraries share one
 * log level and one registry of handles to tear down on exit or a signal. An application may set the log
 * level (mc_log_set_level, or MC_LOG_LEVEL in the environment); the lifecycle calls are for libraries
 * that own handles. Exported by libmooncake_te (docs/architecture.md, "Versions and symbols"). */
#ifndef MOONCAKE_RUNTIME_H
#define MOONCAKE_RUNTIME_H
#include <sys/types.h>

#include "mooncake/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" of the library loaded; MOONCAKE_VERSION_STRING is that of the headers. */
MC_API const char *mooncake_version(void);

/* ---- Log: levels TRACE < DEBUG < INFO < WARN < ERROR; default WARN, lines on stderr. ---- */
enum mc_log_level { MC_LOG_TRACE = 0, MC_LOG_DEBUG, MC_LOG_INFO, MC_LOG_WARN, MC_LOG_ERROR, MC_LOG_OFF };

MC_API extern int mc_log_level_cur; /* read by the level check of every log line; set with mc_log_set_level */

MC_API void mc_log_set_level(int level);
/* Applies MC_LOG_LEVEL (TRACE|DEBUG|INFO|WARNING|WARN|ERROR) if set; returns the level in force. */
MC_API int mc_log_init_from_env(void);
/* Maps a gflags-style verbosity (--v=N) to a level: 0 -> keep current, 1 -> INFO, 2 -> DEBUG, >=3 -> TRACE. */
MC_API void mc_log_set_verbosity(int v);
MC_API int mc_log_parse_level(const char *s); /* -1 when unknown */

MC_API void mc_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Rate limit for a log line a peer can trigger at will: per call site (one struct mc_log_limit each) at
 * most MC_LOG_BURST lines every MC_LOG_INTERVAL_S seconds; the first line allowed after some were dropped
 * is preceded by one summary line with their count. */
#define MC_LOG_BURST 10
#define MC_LOG_INTERVAL_S 10
struct mc_log_limit {
  long long window_ns; /* start of the current interval (CLOCK_MONOTONIC), 0 = none yet */
  unsigned shown, dropped;
};
/* 1 when the line may be written (after writing the summary of dropped ones, if any), else 0 (counted). */
MC_API int mc_log_allow(struct mc_log_limit *l, int level, const char *file, int line);

/* Sends everything written to stderr from now on to <dir>/<prog>.INFO.<date>-<time>.<pid>, linked as
 * <dir>/<prog>.INFO (docs/operations.md, "Log files"). dir is created (0755) when missing and refused when
 * others may write to it without the sticky bit; the file is opened without following a symbolic link and
 * must be a regular file of ours with one link. 0, or -1 with the reason on stderr. */
MC_API int mc_log_to_dir(const char *dir, const char *prog);

/* ---- Lifecycle ----
 * The process lifecycle of the libraries' handles (docs/store-client.md, "Process lifecycle: exit and
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
 * Locking: the module's list lock guards every field of every node; it is never held while a teardown
 * runs and is a leaf otherwise. Teardown-alls (exit, signal) are serialised by a lock of their own, taken
 * before the list lock. */

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
MC_API void mc_lifecycle_add(struct mc_lifecycle *n, void (*teardown)(struct mc_lifecycle *n));
/* Unlinks n, waiting for a teardown of n in progress; frees its name. Idempotent, also for a node never
 * added (all zero). */
MC_API void mc_lifecycle_remove(struct mc_lifecycle *n);
/* Adds events (MC_LIFECYCLE_*) to n and starts what they need (atexit hook; signal thread and handlers).
 * 0, or -1 (logged) when the signal thread cannot start: n is then not torn down on signals. */
MC_API int mc_lifecycle_watch(struct mc_lifecycle *n, unsigned events);
/* The name n is known by among this process's handles (a copy; NULL clears it). */
MC_API void mc_lifecycle_set_name(struct mc_lifecycle *n, const char *name);
/* 1 when a live handle of this process other than self carries this name. */
MC_API int mc_lifecycle_name_taken(const struct mc_lifecycle *self, const char *name);


#ifdef __cplusplus
}
#endif

#endif
