/* Process helpers for black-box tests: free ports, temp dirs, children spawned with their output in a log
 * file (killed if the test dies), waiting for a port, stopping children, raw HTTP over a socket, and real
 * etcd / redis-server instances. A missing binary is a test failure with a clear message, never a skip. */
#ifndef MC_TEST_PROC_H
#define MC_TEST_PROC_H
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static inline long mc_tp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static inline void mc_tp_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0), or -1. */
static inline int mc_tp_free_port(void) {
  /* The kernel may hand the same ephemeral port to two binds in a row; a test that asks for an RPC and a
   * metrics port would then start a master on one port twice. Ports handed out before are skipped. */
  static unsigned char issued[65536 / 8];
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  for (int tries = 0; tries < 1000; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) && !getsockname(fd, (struct sockaddr *)&a, &len))
      port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    if (port <= 0) return -1;
    pthread_mutex_lock(&mu);
    int fresh = !(issued[port / 8] & (1u << (port % 8)));
    issued[port / 8] |= (unsigned char)(1u << (port % 8));
    pthread_mutex_unlock(&mu);
    if (fresh) return port;
  }
  return -1;
}

/* A listening socket on 127.0.0.1 that never accepts (connections complete, nothing answers); -1 on
 * error. *port receives its port. The caller closes it. */
static inline int mc_tp_silent_listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (fd < 0) return -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
      getsockname(fd, (struct sockaddr *)&a, &len)) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/* A fresh directory /tmp/mc_test_<tag>_XXXXXX (malloc'ed path), or NULL. */
static inline char *mc_tp_mkdtemp(const char *tag) {
  char *p = malloc(strlen(tag) + 32);
  sprintf(p, "/tmp/mc_test_%s_XXXXXX", tag);
  if (mkdtemp(p)) return p;
  fprintf(stderr, "mkdtemp(%s): %s\n", p, strerror(errno));
  free(p);
  return NULL;
}

/* Joins two path parts into a malloc'ed string. */
static inline char *mc_tp_path(const char *dir, const char *name) {
  char *p = malloc(strlen(dir) + strlen(name) + 2);
  sprintf(p, "%s/%s", dir, name);
  return p;
}

/* rm -rf path (NULL ignored); symbolic links are removed, never followed. */
static inline void mc_tp_rmrf(const char *path) {
  struct stat st;
  if (!path || lstat(path, &st)) return;
  DIR *d = S_ISDIR(st.st_mode) ? opendir(path) : NULL;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      char *child = mc_tp_path(path, e->d_name);
      mc_tp_rmrf(child);
      free(child);
    }
  }
  if (d) closedir(d);
  remove(path);
}

/* Number of open descriptors of process pid (entries of /proc/<pid>/fd), 0 when unreadable. */
static inline int mc_tp_fd_count(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

/* Full path of an executable: name itself when it holds a '/', else the first match on $PATH (plus
 * /usr/sbin and /usr/bin). malloc'ed, or NULL. */
static inline char *mc_tp_which(const char *name) {
  if (strchr(name, '/')) return access(name, X_OK) ? NULL : strdup(name);
  const char *env = getenv("PATH");
  size_t n = strlen(env ? env : "") + 32;
  char *path = malloc(n), *save = NULL;
  snprintf(path, n, "%s:/usr/sbin:/usr/bin", env ? env : "");
  for (char *dir = strtok_r(path, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char *full = mc_tp_path(*dir ? dir : ".", name);
    if (!access(full, X_OK)) {
      free(path);
      return full;
    }
    free(full);
  }
  free(path);
  return NULL;
}

/* environ with extra "NAME=value" entries added (replacing same-named ones). Free the array only. */
static inline char **mc_tp_env_(char *const extra[]) {
  size_t n = 0, k = 0, m = 0;
  while (environ[n]) n++;
  while (extra && extra[k]) k++;
  char **env = calloc(n + k + 1, sizeof(char *));
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t j = 0; j < k && !replaced; j++) {
      size_t nl = strcspn(extra[j], "=");
      replaced = !strncmp(environ[i], extra[j], nl) && environ[i][nl] == '=';
    }
    if (!replaced) env[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++) env[m++] = extra[j];
  return env;
}

static inline void mc_tp_child_(const char *path, char *const argv[], char **env, const char *log,
                                int errfd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
  int in = open("/dev/null", O_RDONLY);
  int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1; /* NULL: the test's own stderr */
  if (in >= 0) dup2(in, 0);
  if (out >= 0) dup2(out, 1), dup2(out, 2);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(path, argv, env);
  int e = errno;
  ssize_t w = write(errfd, &e, sizeof(e));
  (void)w;
  _exit(127);
}

/* Starts argv[0] (looked up on PATH) with extra environment entries (NULL-terminated, may be NULL),
 * stdout+stderr appended to log_path. Returns the pid, or -1 with a message on stderr. */
static inline pid_t mc_tp_spawn(char *const argv[], char *const extra_env[], const char *log_path) {
  char *path = mc_tp_which(argv[0]);
  if (!path) {
    fprintf(stderr, "FAIL: '%s' not found (scripts/install-deps.sh installs the test dependencies)\n",
            argv[0]);
    return -1;
  }
  char **env = mc_tp_env_(extra_env);
  int pfd[2] = {-1, -1};
  if (pipe(pfd) == 0) fcntl(pfd[1], F_SETFD, FD_CLOEXEC), fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) mc_tp_child_(path, argv, env, log_path, pfd[1]);
  close(pfd[1]);
  int e = 0;
  if (pid > 0 && read(pfd[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
    fprintf(stderr, "FAIL: cannot execute %s: %s\n", path, strerror(e));
    waitpid(pid, NULL, 0);
    pid = -1;
  }
  close(pfd[0]);
  free(env);
  free(path);
  return pid;
}

/* True when the child has exited (it is not reaped). */
static inline int mc_tp_exited(pid_t pid) {
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  return pid > 0 && !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid;
}

/* Connects to 127.0.0.1:port; returns the socket or -1. */
static inline int mc_tp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

/* Waits until 127.0.0.1:port accepts connections. 0, or -1 on timeout or when pid (if > 0) exited. */
static inline int mc_tp_wait_port(int port, long timeout_ms, pid_t pid) {
  long deadline = mc_tp_now_ms() + timeout_ms;
  while (mc_tp_now_ms() < deadline) {
    int fd = mc_tp_connect(port);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    if (mc_tp_exited(pid)) return -1;
    mc_tp_sleep_ms(20);
  }
  return -1;
}

/* Waits for the child pid: its exit code, or 128 + the signal that killed it (said on stderr). */
static inline int mc_tp_exit_code(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  if (WIFSIGNALED(st)) fprintf(stderr, "pid %d killed by signal %d\n", (int)pid, WTERMSIG(st));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* mc_tp_exit_code with a bound: a child still running after ms is killed (SIGKILL, reported), so a
 * hung child fails the check instead of the whole test timing out. */
static inline int mc_tp_exit_code_within(pid_t pid, long ms) {
  if (pid <= 0) return -1;
  long deadline = mc_tp_now_ms() + ms;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    if (mc_tp_now_ms() >= deadline) {
      fprintf(stderr, "pid %d still running after %ld ms: killed\n", (int)pid, ms);
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    usleep(10000);
  }
  if (WIFSIGNALED(st)) fprintf(stderr, "pid %d killed by signal %d\n", (int)pid, WTERMSIG(st));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* SIGTERM, then SIGKILL after grace_ms; reaps. Returns the wait status, or -1. */
static inline int mc_tp_stop(pid_t pid, long grace_ms) {
  if (pid <= 0) return -1;
  int st = 0;
  kill(pid, SIGTERM);
  long deadline = mc_tp_now_ms() + grace_ms;
  while (mc_tp_now_ms() < deadline) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0) return -1;
    mc_tp_sleep_ms(10);
  }
  fprintf(stderr, "pid %d ignored SIGTERM for %ld ms; killing\n", (int)pid, grace_ms);
  kill(pid, SIGKILL);
  return waitpid(pid, &st, 0) == pid ? st : -1;
}

/* Sends req (len bytes) to 127.0.0.1:port and reads the answer until the peer closes, resp is full or
 * timeout_ms passes. resp is NUL-terminated. Returns the bytes read, or -1 if nothing could be sent. */
static inline long mc_tp_raw_http(int port, const char *req, size_t len, char *resp, size_t cap,
                                  long timeout_ms) {
  int fd = mc_tp_connect(port);
  if (fd < 0) return -1;
  struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  size_t got = 0;
  long sent = len ? (long)send(fd, req, len, MSG_NOSIGNAL) : 0;
  long deadline = mc_tp_now_ms() + timeout_ms;
  while (sent >= 0 && got + 1 < cap && mc_tp_now_ms() < deadline) {
    ssize_t n = recv(fd, resp + got, cap - 1 - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (cap) resp[got] = 0;
  close(fd);
  return sent < 0 ? -1 : (long)got;
}

/* The status code of a raw HTTP answer ("HTTP/1.1 404 ..."), or -1. */
static inline int mc_tp_http_status(const char *resp) {
  int code = -1;
  if (strncmp(resp, "HTTP/1.", 7) || sscanf(resp + 8, " %d", &code) != 1) return -1;
  return code;
}

/* Prints the last bytes of a log file to stderr (for failure diagnostics). */
static inline void mc_tp_dump_log(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char buf[4096];
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  fprintf(stderr, "---- tail of %s ----\n%s\n---- end ----\n", path, buf);
}

/* ---- real etcd and redis-server ---- */

struct mc_tp_service {
  pid_t pid;
  int port;
  char *dir; /* temp dir holding data and log */
  char *log;
};

static inline void mc_tp_service_stop(struct mc_tp_service *s) {
  if (s->pid > 0) mc_tp_stop(s->pid, 5000);
  s->pid = -1;
  mc_tp_rmrf(s->dir);
  free(s->dir);
  free(s->log);
  s->dir = s->log = NULL;
}

/* Spawns argv into s (dir and log already set), waits for s->port. 0, or -1 with the log dumped. */
static inline int mc_tp_service_spawn_(struct mc_tp_service *s, char *const argv[], long timeout_ms) {
  s->pid = mc_tp_spawn(argv, NULL, s->log);
  if (s->pid > 0 && mc_tp_wait_port(s->port, timeout_ms, s->pid) == 0) return 0;
  fprintf(stderr, "FAIL: %s did not start listening on 127.0.0.1:%d within %ld ms\n", argv[0], s->port,
          timeout_ms);
  if (s->pid > 0) mc_tp_dump_log(s->log);
  return -1;
}

static inline int mc_tp_service_init_(struct mc_tp_service *s, const char *tag) {
  memset(s, 0, sizeof(*s));
  s->pid = -1;
  s->dir = mc_tp_mkdtemp(tag);
  if (!s->dir) return -1;
  s->log = mc_tp_path(s->dir, "log");
  return 0;
}

/* Waits until etcd's /health says {"health":"true"} (it accepts connections before it has a leader). */
static inline int mc_tp_etcd_healthy_(int port, long timeout_ms) {
  static const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  long deadline = mc_tp_now_ms() + timeout_ms;
  char resp[2048];
  while (mc_tp_now_ms() < deadline) {
    if (mc_tp_raw_http(port, req, sizeof(req) - 1, resp, sizeof(resp), 1000) > 0 &&
        strstr(resp, "\"health\":\"true\""))
      return 0;
    mc_tp_sleep_ms(50);
  }
  return -1;
}

/* Execs one etcd member into s (dir and log set; s->port its client port) named name, with its peer port
 * and the --initial-cluster list (ignored by etcd once the data dir exists, so a restart uses the same
 * call). Heartbeat 20 ms / election 200 ms: a lost leader is replaced within a few hundred ms. Returns the
 * pid (also in s->pid), or -1. */
static inline pid_t mc_tp_etcd_exec_(struct mc_tp_service *s, const char *name, int peer, const char *initial) {
  char client[64], peer_url[64], *data = mc_tp_path(s->dir, "data");
  snprintf(client, sizeof(client), "http://127.0.0.1:%d", s->port);
  snprintf(peer_url, sizeof(peer_url), "http://127.0.0.1:%d", peer);
  char *argv[] = {"etcd",
                  "--name", (char *)name,
                  "--data-dir", data,
                  "--listen-client-urls", client,
                  "--advertise-client-urls", client,
                  "--listen-peer-urls", peer_url,
                  "--initial-advertise-peer-urls", peer_url,
                  "--initial-cluster", (char *)initial,
                  "--heartbeat-interval", "20",
                  "--election-timeout", "200",
                  "--log-level", "warn",
                  NULL};
  s->pid = mc_tp_spawn(argv, NULL, s->log);
  free(data);
  return s->pid;
}

/* Waits until the member in s listens and says it is healthy (it has a leader). 0, or -1 (FAIL printed,
 * log dumped). */
static inline int mc_tp_etcd_wait_(struct mc_tp_service *s, long timeout_ms) {
  if (s->pid > 0 && !mc_tp_wait_port(s->port, timeout_ms, s->pid) && !mc_tp_etcd_healthy_(s->port, timeout_ms))
    return 0;
  fprintf(stderr, "FAIL: etcd on port %d never became healthy\n", s->port);
  if (s->pid > 0) mc_tp_dump_log(s->log);
  return -1;
}

/* A peer port for a member whose client port is client (never the same one). */
static inline int mc_tp_etcd_peer_port_(int client) {
  int peer = mc_tp_free_port();
  while (peer == client) peer = mc_tp_free_port();
  return peer;
}

/* Starts a single-node etcd on free 127.0.0.1 ports. 0, or -1 (FAIL message printed). */
static inline int mc_tp_start_etcd(struct mc_tp_service *s) {
  if (mc_tp_service_init_(s, "etcd")) return -1;
  s->port = mc_tp_free_port();
  int peer = mc_tp_etcd_peer_port_(s->port);
  char cluster[80];
  snprintf(cluster, sizeof(cluster), "t=http://127.0.0.1:%d", peer);
  if (mc_tp_etcd_exec_(s, "t", peer, cluster) < 0) return -1;
  return mc_tp_etcd_wait_(s, 15000);
}

/* ---- an etcd cluster of several members ---- */

#define MC_TP_ETCD_MAX 7

struct mc_tp_etcd_member {
  struct mc_tp_service s; /* s.port is the member's client port; s.pid -1 while it is killed */
  int peer_port;
  char name[8];
};

struct mc_tp_etcd_cluster {
  int n;
  struct mc_tp_etcd_member m[MC_TP_ETCD_MAX];
  char initial[MC_TP_ETCD_MAX * 48];   /* --initial-cluster */
  char endpoints[MC_TP_ETCD_MAX * 24]; /* "127.0.0.1:p0,127.0.0.1:p1,..." (client ports, member order) */
};

/* Stops every member and removes their data. */
static inline void mc_tp_stop_etcd_cluster(struct mc_tp_etcd_cluster *c) {
  for (int i = 0; i < c->n; i++) mc_tp_service_stop(&c->m[i].s);
  c->n = 0;
}

/* Starts an n-member etcd cluster (n <= MC_TP_ETCD_MAX) on free 127.0.0.1 ports and waits until every
 * member is healthy. 0, or -1 (FAIL message printed, whatever started is stopped). */
static inline int mc_tp_start_etcd_cluster(struct mc_tp_etcd_cluster *c, int n) {
  memset(c, 0, sizeof(*c));
  if (n < 1 || n > MC_TP_ETCD_MAX) return -1;
  for (int i = 0; i < n; i++, c->n++) {
    struct mc_tp_etcd_member *m = &c->m[i];
    if (mc_tp_service_init_(&m->s, "etcdc")) break;
    m->s.port = mc_tp_free_port();
    m->peer_port = mc_tp_etcd_peer_port_(m->s.port);
    snprintf(m->name, sizeof(m->name), "m%d", i);
    size_t k = strlen(c->initial), e = strlen(c->endpoints);
    snprintf(c->initial + k, sizeof(c->initial) - k, "%sm%d=http://127.0.0.1:%d", i ? "," : "", i, m->peer_port);
    snprintf(c->endpoints + e, sizeof(c->endpoints) - e, "%s127.0.0.1:%d", i ? "," : "", m->s.port);
  }
  int rc = c->n == n ? 0 : -1;
  for (int i = 0; i < c->n && !rc; i++)
    if (mc_tp_etcd_exec_(&c->m[i].s, c->m[i].name, c->m[i].peer_port, c->initial) < 0) rc = -1;
  for (int i = 0; i < c->n && !rc; i++) rc = mc_tp_etcd_wait_(&c->m[i].s, 20000);
  if (rc) mc_tp_stop_etcd_cluster(c);
  return rc;
}

/* SIGKILLs member i (reaped; its data stays for a restart). */
static inline void mc_tp_etcd_kill(struct mc_tp_etcd_cluster *c, int i) {
  struct mc_tp_service *s = &c->m[i].s;
  if (s->pid <= 0) return;
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = -1;
}

/* 1 when every thread of pid is stopped (state T in /proc/pid/task/<tid>/stat). */
static inline int mc_tp_all_stopped_(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return 1; /* gone */
  int all = 1;
  for (struct dirent *e; all && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[352], buf[512];
    snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *q = strrchr(buf, ')');
    if (q && q[1] == ' ' && q[2] != 'T' && q[2] != 't') all = 0;
  }
  closedir(d);
  return all;
}

/* SIGSTOPs pid and returns once every one of its threads has stopped (at most wait_ms): kill returns
 * before that, and the signal reaches a thread running on another CPU only when that CPU is interrupted, so
 * a request sent meanwhile may still be answered. */
static inline void mc_tp_freeze(pid_t pid, int wait_ms) {
  kill(pid, SIGSTOP);
  for (int t = 0; t < wait_ms / 10 && !mc_tp_all_stopped_(pid); t++) usleep(10000);
}

/* Freezes (mc_tp_freeze, paused = 1) or thaws (SIGCONT) member i: a member that hangs instead of dying. */
static inline void mc_tp_etcd_pause(struct mc_tp_etcd_cluster *c, int i, int paused) {
  pid_t pid = c->m[i].s.pid;
  if (pid <= 0) return;
  if (paused) mc_tp_freeze(pid, 2000);
  else kill(pid, SIGCONT);
}

/* Starts killed member i again on its ports with its data, and waits until it is healthy. 0 or -1. */
static inline int mc_tp_etcd_restart(struct mc_tp_etcd_cluster *c, int i) {
  struct mc_tp_etcd_member *m = &c->m[i];
  if (m->s.pid > 0) return 0;
  if (mc_tp_etcd_exec_(&m->s, m->name, m->peer_port, c->initial) < 0) return -1;
  return mc_tp_etcd_wait_(&m->s, 20000);
}

/* Starts redis-server on port (0 = a free one) with extra arguments (NULL-terminated, may be NULL). s must
 * be zeroed before the first start; a stopped instance (mc_tp_stop(s->pid)) restarts with its own port and
 * dir. 0, or -1 (FAIL message printed). */
static inline int mc_tp_start_redis(struct mc_tp_service *s, int port, const char *const extra[]) {
  if (!s->dir && mc_tp_service_init_(s, "redis")) return -1;
  s->port = port ? port : mc_tp_free_port();
  char ps[16];
  snprintf(ps, sizeof(ps), "%d", s->port);
  char *argv[32] = {"redis-server", "--port", ps,      "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no",     "--dir", s->dir};
  int n = 11;
  for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = (char *)extra[i];
  argv[n] = NULL;
  return mc_tp_service_spawn_(s, argv, 10000);
}

#endif
