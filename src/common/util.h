/* Small shared helpers: clocks, size parsing, environment knobs, host identity. */
#ifndef MC_UTIL_H
#define MC_UTIL_H
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define mc_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define MC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MC_MAX(a, b) ((a) > (b) ? (a) : (b))

uint64_t mc_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t mc_now_ms(void);
/* Names the calling thread (at most 15 bytes are kept): what `top -H`, `ps -L` and debuggers show, and what
 * docs/operations.md lists. */
void mc_thread_name(const char *name);
/* Sleeps ms milliseconds (the rest of them again after a signal). */
void mc_sleep_ms(long ms);
/* Initialises a condition variable whose timed waits take CLOCK_MONOTONIC deadlines. */
void mc_cond_init_monotonic(pthread_cond_t *cv);
/* Wall-clock "YYYY-MM-DD HH:MM:SS.uuuuuu" (local time) into buf (>= 27 bytes). */
void mc_timestamp(char *buf, size_t len);

/* FNV-1a of a NUL-terminated string: small in-process tables (not the master's key hash). */
uint64_t mc_str_hash(const char *s);

/* Parses "4096", "64KB", "64KiB", "1.5GB", "8 GiB" (K/M/G/T; KB and KiB both = 1024).
 * Returns 0 and *out, or -1 on junk, negative or overflowing values. */
int mc_parse_size(const char *s, uint64_t *out);
/* A JSON string of s (new reference): jansson takes only UTF-8, so a name that is not (hostile, or a
 * latin-1 host) comes out with each byte outside ASCII as '?' rather than as no value at all. */
json_t *mc_json_text(const char *s);
/* Environment integer in [min,max]; unset or invalid -> def (invalid logs a warning). */
long mc_env_long(const char *name, long def, long min, long max);
/* Environment boolean: 1/true/yes/on, 0/false/no/off; unset or invalid -> def. */
int mc_env_bool(const char *name, int def);
/* The same parse of a string already read: 1 / 0, def when NULL or empty, -1 when not a boolean. */
int mc_str_bool(const char *v, int def);

/* Writes what fn writes into fd (0 or an errno value) to path, whole or not at all: path.tmp is created
 * afresh with mode `mode` (never through a symbolic link nor into a file planted there: one in the way is
 * removed and the create tried once more), synced, renamed over path, and path's directory synced. 0 or an
 * errno value; on failure path is as it was and path.tmp is gone. */
typedef int (*mc_write_fn)(int fd, void *arg);
int mc_write_file_atomic(const char *path, mode_t mode, mc_write_fn fn, void *arg);
/* Writes n bytes to fd, again after EINTR and short writes: 0 or an errno value. */
int mc_write_all(int fd, const void *p, size_t n);

/* The kernel boot id (same for all processes of one host boot); "" if unavailable. MC_HOST_ID overrides
 * it: network-namespace test hosts share one kernel but must not take the same-host path. */
const char *mc_host_id(void);
/* This process's pid without a system call per use (glibc's getpid is one): cached, and forgotten in a
 * forked child. */
int mc_self_pid(void);

/* Daemons that stop cleanly on SIGTERM/SIGINT (mooncake_store_node, mooncake_client): mc_stop_signals_hold
 * installs a handler for both and blocks them (before anything else that could install its own, e.g. the
 * store library's teardown), saving the previous mask; mc_stop_signals_wait sleeps until one arrives and
 * returns its number. */
void mc_stop_signals_hold(void);
int mc_stop_signals_wait(void);

#endif
