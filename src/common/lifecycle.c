/* The process lifecycle of the libraries' handles: the registry, the atexit hook and the signal thread
 * (contract in lifecycle.h; docs/store-client.md, "Process lifecycle: exit and signals"). */
#include "mooncake/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/util.h"

/* Lock order: all_mu (one teardown-all at a time) before mu (the list and every node's fields, never
 * held while a teardown runs). sig_mu guards the start of the signal thread and handlers, a leaf. */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER; /* a node stopped being busy */
static struct mc_lifecycle *head;

/* ------------------------------------------------------------------ registry */

void mc_lifecycle_add(struct mc_lifecycle *n, void (*teardown)(struct mc_lifecycle *n)) {
  n->teardown = teardown;
  n->name = NULL;
  n->events = 0;
  n->pid = getpid();
  n->busy = 0;
  n->prev = NULL;
  pthread_mutex_lock(&mu);
  n->next = head; /* at the head: a teardown-all walking the list does not meet handles added meanwhile */
  if (head) head->prev = n;
  head = n;
  n->linked = 1;
  pthread_mutex_unlock(&mu);
}

void mc_lifecycle_remove(struct mc_lifecycle *n) {
  pthread_mutex_lock(&mu);
  while (n->busy) pthread_cond_wait(&idle_cv, &mu);
  if (n->linked) {
    if (n->prev) n->prev->next = n->next;
    else head = n->next;
    if (n->next) n->next->prev = n->prev;
    n->prev = n->next = NULL;
    n->linked = 0;
  }
  mc_free(n->name);
  n->name = NULL;
  pthread_mutex_unlock(&mu);
}

void mc_lifecycle_set_name(struct mc_lifecycle *n, const char *name) {
  char *copy = name ? mc_strdup(name) : NULL;
  pthread_mutex_lock(&mu);
  char *old = n->name;
  n->name = copy;
  pthread_mutex_unlock(&mu);
  mc_free(old);
}

int mc_lifecycle_name_taken(const struct mc_lifecycle *self, const char *name) {
  int found = 0;
  pthread_mutex_lock(&mu);
  for (struct mc_lifecycle *n = head; n && !found; n = n->next)
    found = n != self && n->name && !strcmp(n->name, name);
  pthread_mutex_unlock(&mu);
  return found;
}

/* Runs the teardown of every handle of this process that asked for event. A node is marked busy while its
 * teardown runs without the list lock, so it stays linked (its destroy waits) and its successor is read
 * after the teardown. */
static void teardown_all(unsigned event) {
  pid_t self = getpid();
  pthread_mutex_lock(&all_mu);
  pthread_mutex_lock(&mu);
  for (struct mc_lifecycle *n = head; n;) {
    if (!(n->events & event) || n->pid != self) {
      n = n->next;
      continue;
    }
    n->busy = 1;
    pthread_mutex_unlock(&mu);
    n->teardown(n);
    pthread_mutex_lock(&mu);
    n->busy = 0;
    pthread_cond_broadcast(&idle_cv);
    n = n->next;
  }
  pthread_mutex_unlock(&mu);
  pthread_mutex_unlock(&all_mu);
}

static void teardown_at_exit(void) { teardown_all(MC_LIFECYCLE_AT_EXIT); }

/* ------------------------------------------------------------------ signals */

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};
static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER;
static int sig_pipe[2] = {-1, -1};  /* sig_mu; the handler reads the write end */
static atomic_int watch_pid;        /* the process whose thread reads sig_pipe (0: none yet) */
static atomic_int sig_seen;

/* Async-signal-safe: the default action of sig, now (or when the running handler returns). */
static void default_action(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  raise(sig);
}

static void on_signal(int sig) {
  int saved = errno;
  /* a forked child has no thread reading the pipe (and its parent's handles are not its own) */
  if (getpid() != atomic_load(&watch_pid) || atomic_exchange(&sig_seen, 1)) {
    default_action(sig);
  } else {
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
  }
  errno = saved;
}

static void *signal_main(void *arg) {
  mc_thread_name("mc-signal");
  int fd = (int)(intptr_t)arg;
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < MC_ARRAY_LEN(handled); i++) sigaddset(&set, handled[i]);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  unsigned char b;
  ssize_t n;
  while ((n = read(fd, &b, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) return NULL;
  LOG_WARN("signal %d: tearing down this process's transfer engines and store clients", b);
  teardown_all(MC_LIFECYCLE_ON_SIGNAL);
  default_action(b);
  return NULL;
}

/* Our handler wherever the disposition is still SIG_DFL (or already ours: inherited over fork). */
static void install_handlers(void) {
  for (size_t i = 0; i < MC_ARRAY_LEN(handled); i++) {
    struct sigaction old, sa;
    if (sigaction(handled[i], NULL, &old)) continue;
    int is_dfl = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == on_signal) continue;
    if (!is_dfl) {
      LOG_INFO("signal %d: the application's disposition is kept; handles are not torn down on it", handled[i]);
      continue;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(handled[i], &sa, NULL);
  }
}

/* The signal thread of this process (a forked child starts its own), then the handlers. sig_mu held. */
static int start_signals(void) {
  if (atomic_load(&watch_pid) == getpid()) return 0;
  int p[2];
  pthread_t t;
  if (pipe2(p, O_CLOEXEC)) {
    LOG_ERROR("cannot watch signals: pipe: %s", strerror(errno));
    return -1;
  }
  int rc = pthread_create(&t, NULL, signal_main, (void *)(intptr_t)p[0]);
  if (rc) {
    LOG_ERROR("cannot watch signals: thread: %s", strerror(rc));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  pthread_detach(t);
  if (sig_pipe[0] >= 0 && atomic_load(&watch_pid)) { /* the parent's pipe, inherited over fork */
    close(sig_pipe[0]);
    close(sig_pipe[1]);
  }
  sig_pipe[0] = p[0];
  sig_pipe[1] = p[1];
  atomic_store(&sig_seen, 0);
  atomic_store(&watch_pid, (int)getpid());
  install_handlers();
  return 0;
}

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void register_exit(void) { atexit(teardown_at_exit); }

int mc_lifecycle_watch(struct mc_lifecycle *n, unsigned events) {
  int rc = 0;
  if (events & MC_LIFECYCLE_AT_EXIT) pthread_once(&exit_once, register_exit);
  if (events & MC_LIFECYCLE_ON_SIGNAL) {
    pthread_mutex_lock(&sig_mu);
    rc = start_signals();
    pthread_mutex_unlock(&sig_mu);
    if (rc) events &= ~(unsigned)MC_LIFECYCLE_ON_SIGNAL;
  }
  pthread_mutex_lock(&mu);
  n->events |= events;
  pthread_mutex_unlock(&mu);
  return rc;
}
