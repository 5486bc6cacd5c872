/* Small shared helpers: clocks, size parsing, environment knobs, host identity. */
#ifndef MC_UTIL_H
#define MC_UTIL_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define mc_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define MC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MC_MAX(a, b) ((a) > (b) ? (a) : (b))

uint64_t mc_now_ns(void); /* CLOCK_MONOTONIC */
uint64_t mc_now_ms(void);
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
/* Environment integer in [min,max]; unset or invalid -> def (invalid logs a warning). */
long mc_env_long(const char *name, long def, long min, long max);
/* Environment boolean: 1/true/yes/on, 0/false/no/off; unset or invalid -> def. */
int mc_env_bool(const char *name, int def);
/* The same parse of a string already read: 1 / 0, def when NULL or empty, -1 when not a boolean. */
int mc_str_bool(const char *v, int def);

/* The kernel boot id (same for all processes of one host boot); "" if unavailable. MC_HOST_ID overrides
 * it: network-namespace test hosts share one kernel but must not take the same-host path. */
const char *mc_host_id(void);

#endif
