/* Logger: one line per call, written with a single write(2) so lines from threads never interleave. */
#include "common/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int mc_log_level_cur = MC_LOG_WARN;

static const char *level_tag[] = {"T", "D", "I", "W", "E"};

void mc_log_set_level(int level) {
  if (level >= MC_LOG_TRACE && level <= MC_LOG_OFF) mc_log_level_cur = level;
}

int mc_log_parse_level(const char *s) {
  if (!s) return -1;
  if (!strcasecmp(s, "TRACE")) return MC_LOG_TRACE;
  if (!strcasecmp(s, "DEBUG")) return MC_LOG_DEBUG;
  if (!strcasecmp(s, "INFO")) return MC_LOG_INFO;
  if (!strcasecmp(s, "WARNING") || !strcasecmp(s, "WARN")) return MC_LOG_WARN;
  if (!strcasecmp(s, "ERROR")) return MC_LOG_ERROR;
  if (!strcasecmp(s, "OFF") || !strcasecmp(s, "NONE")) return MC_LOG_OFF;
  return -1;
}

int mc_log_init_from_env(void) {
  int l = mc_log_parse_level(getenv("MC_LOG_LEVEL"));
  if (l >= 0) mc_log_level_cur = l;
  return mc_log_level_cur;
}

void mc_log_set_verbosity(int v) {
  if (v <= 0) return;
  mc_log_level_cur = v == 1 ? MC_LOG_INFO : v == 2 ? MC_LOG_DEBUG : MC_LOG_TRACE;
}

void mc_log_write(int level, const char *file, int line, const char *fmt, ...) {
  char buf[2048];
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  localtime_r(&tv.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n = snprintf(buf, sizeof(buf), "%s%02d%02d %02d:%02d:%02d.%06ld %d %s:%d] ",
                   level_tag[level < 0 ? 0 : level > 4 ? 4 : level], tm.tm_mon + 1, tm.tm_mday,
                   tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec, (int)getpid(), base, line);
  va_list ap;
  va_start(ap, fmt);
  if (n < (int)sizeof(buf)) n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof(buf) - 1) n = sizeof(buf) - 2;
  buf[n++] = '\n';
  ssize_t w = write(STDERR_FILENO, buf, n);
  (void)w;
}
