/* The process-wide list of live handles, and the two ways a process ends without calling destroy:
 * exit() (an atexit hook tears every handle down) and SIGINT/SIGTERM/SIGHUP (c-api.md §1.2).
 *
 * Signals: only where the disposition is still SIG_DFL, and not in a process with an embedded Python
 * interpreter (Python's own handling stays untouched), the library installs a handler that only writes
 * the signal number into a pipe. A dedicated thread reads it, tears every handle down, restores the
 * default action and re-raises the signal. A second signal during the teardown kills at once. No
 * signal mask of the application is changed.
 *
 * Locking: live_mu guards the list and is held across a teardown-all; a handle is destroyed only after
 * it has been unlinked under live_mu, so the teardown-all never touches freed memory. live_mu is taken
 * before a handle's life lock, never while holding it. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "client/client.h"
#include "common/log.h"

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_store *live_head;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void teardown_all(void) {
  pthread_mutex_lock(&live_mu);
  for (struct mc_store *s = live_head; s; s = s->live_next) {
    pthread_rwlock_wrlock(&s->life);
    if (s->ready) mc_store_do_teardown(s);
    pthread_rwlock_unlock(&s->life);
  }
  pthread_mutex_unlock(&live_mu);
}

/* ------------------------------------------------------------------ signals */

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};
static int sig_pipe[2] = {-1, -1};
static atomic_int sig_seen;

static void on_signal(int sig) {
  int saved = errno;
  if (atomic_exchange(&sig_seen, 1)) { /* second signal: do not wait for the teardown */
    signal(sig, SIG_DFL);
    raise(sig);
  } else {
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
  }
  errno = saved;
}

static void *signal_main(void *arg) {
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) sigaddset(&set, handled[i]);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  unsigned char b;
  ssize_t n;
  while ((n = read(sig_pipe[0], &b, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) return NULL;
  LOG_WARN("signal %d: tearing down store clients", b);
  teardown_all();
  signal(b, SIG_DFL);
  raise(b);
  return NULL;
}

static int python_embedded(void) {
  int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  return initialized && initialized();
}

static void install_signals(void) {
  if (python_embedded() || pipe2(sig_pipe, O_CLOEXEC)) return;
  pthread_t t;
  if (pthread_create(&t, NULL, signal_main, NULL)) return;
  pthread_detach(t);
  for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) {
    struct sigaction old, sa = {0};
    if (sigaction(handled[i], NULL, &old) || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(handled[i], &sa, NULL);
  }
}

static void live_init(void) {
  atexit(teardown_all);
  install_signals();
}

/* ------------------------------------------------------------------ list */

void mc_live_add(struct mc_store *s) {
  pthread_once(&live_once, live_init);
  pthread_mutex_lock(&live_mu);
  s->live_next = live_head;
  live_head = s;
  pthread_mutex_unlock(&live_mu);
}

void mc_live_remove(struct mc_store *s) {
  pthread_mutex_lock(&live_mu);
  for (struct mc_store **pp = &live_head; *pp; pp = &(*pp)->live_next)
    if (*pp == s) {
      *pp = s->live_next;
      break;
    }
  pthread_mutex_unlock(&live_mu);
}
