/* The one level-checked logger every library and binary uses. Libraries never printf.
 * Levels: TRACE < DEBUG < INFO < WARN < ERROR. Default WARN for libraries; binaries
 * raise it with -v / --v=N (1 = INFO, 2 = DEBUG, 3 = TRACE) or MC_LOG_LEVEL. */
#ifndef MC_LOG_H
#define MC_LOG_H
#include <stdarg.h>

enum mc_log_level { MC_LOG_TRACE = 0, MC_LOG_DEBUG, MC_LOG_INFO, MC_LOG_WARN, MC_LOG_ERROR, MC_LOG_OFF };

extern int mc_log_level_cur;

void mc_log_set_level(int level);
/* Applies MC_LOG_LEVEL (TRACE|DEBUG|INFO|WARNING|WARN|ERROR) if set; returns the level in force. */
int mc_log_init_from_env(void);
/* Maps a gflags-style verbosity (--v=N) to a level: 0 -> keep current, 1 -> INFO, 2 -> DEBUG, >=3 -> TRACE. */
void mc_log_set_verbosity(int v);
int mc_log_parse_level(const char *s); /* -1 when unknown */

void mc_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define MC_LOG(lvl, ...)                                                                 \
  do {                                                                                   \
    if ((lvl) >= mc_log_level_cur) mc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define LOG_TRACE(...) MC_LOG(MC_LOG_TRACE, __VA_ARGS__)
#define LOG_DEBUG(...) MC_LOG(MC_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) MC_LOG(MC_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) MC_LOG(MC_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) MC_LOG(MC_LOG_ERROR, __VA_ARGS__)

/* Rate limit for a log line a peer can trigger at will (a rejected request, a refused connection): per
 * call site at most MC_LOG_BURST lines every MC_LOG_INTERVAL_S seconds; the first line allowed after some
 * were dropped is preceded by one summary line with their count. */
#define MC_LOG_BURST 10
#define MC_LOG_INTERVAL_S 10
struct mc_log_limit {
  long long window_ns; /* start of the current interval (CLOCK_MONOTONIC), 0 = none yet */
  unsigned shown, dropped;
};
/* 1 when the line may be written (after writing the summary of dropped ones, if any), else 0 (counted). */
int mc_log_allow(struct mc_log_limit *l, int level, const char *file, int line);
#define MC_LOG_LIMITED(lvl, ...)                                                                  \
  do {                                                                                            \
    static struct mc_log_limit rl_;                                                               \
    if ((lvl) >= mc_log_level_cur && mc_log_allow(&rl_, (lvl), __FILE__, __LINE__))              \
      mc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                                       \
  } while (0)
#define LOG_WARN_LIMITED(...) MC_LOG_LIMITED(MC_LOG_WARN, __VA_ARGS__)

/* Sends everything written to stderr from now on to <dir>/<prog>.INFO.<date>-<time>.<pid>, linked as
 * <dir>/<prog>.INFO (docs/operations.md, "Log files"). dir is created (0755) when missing and refused when
 * others may write to it without the sticky bit; the file is opened without following a symbolic link and
 * must be a regular file of ours with one link. 0, or -1 with the reason on stderr. */
int mc_log_to_dir(const char *dir, const char *prog);

#endif
