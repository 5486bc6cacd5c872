/* The one level-checked logger every library and binary uses. Libraries never printf.
 * Levels: TRACE < DEBUG < INFO < WARN < ERROR. Default WARN for libraries; binaries
 * raise it with -v / --v=N (1 = INFO, 2 = DEBUG, 3 = TRACE) or MC_LOG_LEVEL. */
#ifndef MC_LOG_H
#define MC_LOG_H
#include <stdarg.h>

#include "mooncake/runtime.h" /* the functions and the level (one instance, in libmooncake_te) */

#define MC_LOG(lvl, ...)                                                                 \
  do {                                                                                   \
    if ((lvl) >= mc_log_level_cur) mc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define LOG_TRACE(...) MC_LOG(MC_LOG_TRACE, __VA_ARGS__)
#define LOG_DEBUG(...) MC_LOG(MC_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) MC_LOG(MC_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) MC_LOG(MC_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) MC_LOG(MC_LOG_ERROR, __VA_ARGS__)

/* A log line a peer can trigger at will, rate-limited per call site (mc_log_allow). */
#define MC_LOG_LIMITED(lvl, ...)                                                                  \
  do {                                                                                            \
    static struct mc_log_limit rl_;                                                               \
    if ((lvl) >= mc_log_level_cur && mc_log_allow(&rl_, (lvl), __FILE__, __LINE__))              \
      mc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                                       \
  } while (0)
#define LOG_WARN_LIMITED(...) MC_LOG_LIMITED(MC_LOG_WARN, __VA_ARGS__)

#endif
