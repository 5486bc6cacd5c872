#include "common/knobs.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"

uint64_t mc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t mc_now_ms(void) { return mc_now_ns() / 1000000ull; }

void mc_thread_name(const char *name) {
  char n[16];
  snprintf(n, sizeof(n), "%s", name);
  (void)pthread_setname_np(pthread_self(), n);
}

void mc_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

void mc_cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
}

uint64_t mc_str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void mc_timestamp(char *buf, size_t len) {
  struct timeval tv;
  struct tm tm;
  gettimeofday(&tv, NULL);
  localtime_r(&tv.tv_sec, &tm);
  snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%06ld", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec);
}

int mc_parse_size(const char *s, uint64_t *out) {
  if (!s) return -1;
  while (isspace((unsigned char)*s)) s++;
  if (!*s || *s == '-') return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0) return -1;
  while (isspace((unsigned char)*end)) end++;
  double mul = 1;
  if (*end) {
    switch (toupper((unsigned char)*end)) {
      case 'B': mul = 1; break;
      case 'K': mul = 1024.0; break;
      case 'M': mul = 1024.0 * 1024; break;
      case 'G': mul = 1024.0 * 1024 * 1024; break;
      case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
      default: return -1;
    }
    end++;
    if (mul > 1) {
      if (*end == 'i' || *end == 'I') end++;
      if (*end == 'b' || *end == 'B') end++;
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end) return -1;
  }
  double r = v * mul;
  if (r >= 18446744073709551615.0) return -1;
  *out = (uint64_t)r;
  return 0;
}

long mc_env_long(const char *name, long def, long min, long max) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end;
  errno = 0;
  long r = strtol(v, &end, 10);
  if (errno || *end || r < min || r > max) {
    LOG_WARN("ignoring invalid %s=%s (allowed %ld..%ld), using %ld", name, v, min, max, def);
    return def;
  }
  return r;
}

int mc_str_bool(const char *v, int def) {
  if (!v || !*v) return def;
  if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
    return 1;
  if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
    return 0;
  return -1;
}

int mc_env_bool(const char *name, int def) {
  const char *v = getenv(name);
  int b = mc_str_bool(v, def);
  if (b >= 0) return b;
  LOG_WARN("ignoring invalid %s=%s", name, v);
  return def;
}

static char boot_id[64];
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void read_boot_id(void) {
  const char *env = mc_knob_str(MC_KNOB_HOST_ID);
  if (env && *env) {
    snprintf(boot_id, sizeof(boot_id), "%s", env);
    return;
  }
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return;
  if (fgets(boot_id, sizeof(boot_id), f)) boot_id[strcspn(boot_id, "\n")] = 0;
  fclose(f);
}

const char *mc_host_id(void) {
  pthread_once(&boot_once, read_boot_id);
  return boot_id;
}

static _Atomic int self_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static void forget_pid(void) { atomic_store(&self_pid, 0); }
static void watch_fork(void) { pthread_atfork(NULL, NULL, forget_pid); }

int mc_self_pid(void) {
  int p = atomic_load_explicit(&self_pid, memory_order_relaxed);
  if (p) return p;
  pthread_once(&pid_once, watch_fork);
  p = (int)getpid();
  atomic_store(&self_pid, p);
  return p;
}

/* ---- files written whole ---- */

int mc_write_all(int fd, const void *p, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t k = write(fd, (const char *)p + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return errno;
    if (!k) return EIO;
    done += (size_t)k;
  }
  return 0;
}

static void fsync_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? mc_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : mc_strdup(".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  mc_free(dir);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

static int create_temp(const char *tmp, mode_t mode) {
  for (int attempt = 0;; attempt++) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST || attempt) return fd;
    LOG_WARN("removing %s left in the way of a rewrite", tmp);
    if (unlink(tmp) && errno != ENOENT) return -1;
  }
}

int mc_write_file_atomic(const char *path, mode_t mode, mc_write_fn fn, void *arg) {
  size_t n = strlen(path) + 5;
  char *tmp = mc_malloc(n);
  snprintf(tmp, n, "%s.tmp", path);
  int err = 0, fd = create_temp(tmp, mode);
  if (fd < 0) err = errno;
  if (!err) err = fn(fd, arg);
  if (!err && fsync(fd)) err = errno;
  if (fd >= 0 && close(fd) && !err) err = errno;
  if (!err && rename(tmp, path)) err = errno;
  if (err && fd >= 0) unlink(tmp);
  if (!err) fsync_dir_of(path);
  mc_free(tmp);
  return err;
}

json_t *mc_json_text(const char *s) {
  json_t *j = json_string(s ? s : "");
  if (j) return j;
  char *copy = mc_strdup(s);
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  j = json_string(copy);
  mc_free(copy);
  return j;
}

static volatile sig_atomic_t stop_sig;
static sigset_t stop_old_mask;
static void on_stop_signal(int sig) { stop_sig = sig; }

void mc_stop_signals_hold(void) {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  struct sigaction sa = {.sa_handler = on_stop_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigprocmask(SIG_BLOCK, &block, &stop_old_mask);
}

int mc_stop_signals_wait(void) {
  while (!stop_sig) sigsuspend(&stop_old_mask);
  return (int)stop_sig;
}
