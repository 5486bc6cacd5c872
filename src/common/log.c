/* Logger: one line per call, written with a single write(2) so lines from threads never interleave. */
#include "common/knobs.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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
  int l = mc_log_parse_level(mc_knob_str(MC_KNOB_LOG_LEVEL));
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

int mc_log_allow(struct mc_log_limit *l, int level, const char *file, int line) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long now = (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
  unsigned dropped = 0;
  pthread_mutex_lock(&mu);
  if (!l->window_ns || now - l->window_ns >= MC_LOG_INTERVAL_S * 1000000000ll) {
    dropped = l->dropped;
    l->window_ns = now;
    l->shown = l->dropped = 0;
  }
  int ok = l->shown < MC_LOG_BURST;
  if (ok) l->shown++;
  else l->dropped++;
  pthread_mutex_unlock(&mu);
  if (ok && dropped) mc_log_write(level, file, line, "(%u more lines like the next one were suppressed)", dropped);
  return ok;
}

int mc_log_to_dir(const char *dir, const char *prog) {
  char name[256], link[256];
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  snprintf(name, sizeof(name), "%s.INFO.%04d%02d%02d-%02d%02d%02d.%d", prog, tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)getpid());
  snprintf(link, sizeof(link), "%s.INFO", prog);
  if (mkdir(dir, 0755) && errno != EEXIST) {
    fprintf(stderr, "ERROR: cannot create log directory %s: %s\n", dir, strerror(errno));
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (dfd < 0 || fstat(dfd, &st)) {
    fprintf(stderr, "ERROR: cannot open log directory %s: %s\n", dir, strerror(errno));
    if (dfd >= 0) close(dfd);
    return -1;
  }
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    fprintf(stderr, "ERROR: log directory %s is writable by everyone and not sticky: refusing it\n", dir);
    close(dfd);
    return -1;
  }
  int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  if (!err && (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1))
    err = EPERM;
  if (err) {
    fprintf(stderr, "ERROR: cannot open log file %s/%s: %s\n", dir, name,
            err == ELOOP ? "it is a symbolic link" : err == EPERM ? "not a regular file of ours with one link"
                                                              : strerror(err));
    if (fd >= 0) close(fd);
    close(dfd);
    return -1;
  }
  unlinkat(dfd, link, 0);
  if (symlinkat(name, dfd, link)) fprintf(stderr, "WARNING: cannot create %s/%s: %s\n", dir, link, strerror(errno));
  close(dfd);
  dup2(fd, STDERR_FILENO);
  close(fd);
  return 0;
}
