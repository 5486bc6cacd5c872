/* Key patterns (docs/master.md "Limits"): PCRE2 under fixed limits, at most MC_STR_MAX bytes, 8 nested
 * groups, 1 MiB of compile memory, no back-references; each key's match is bounded in steps, depth and
 * heap. A pattern is searched for anywhere in the key (a substring search). Part of the data core: the
 * object table matches keys (mc_master_remove_matching, mc_master_replicas_matching); the RPC dispatcher
 * compiles what a request names. */
#ifndef MC_MASTER_CORE_KEY_PATTERN_H
#define MC_MASTER_CORE_KEY_PATTERN_H
#include <stddef.h>

struct mc_regex;

/* Compiles pattern (n bytes, bytes not UTF-8): NULL when it does not compile, is over a limit, or uses
 * back-references (matching them is exponential). */
struct mc_regex *mc_regex_compile(const char *pattern, size_t n);
/* NULL ignored. */
void mc_regex_free(struct mc_regex *re);
/* Searches s (n bytes) for the pattern: 1 found, 0 not, -1 the match hit a limit. Not thread-safe per
 * pattern (one request uses it). */
int mc_regex_match(struct mc_regex *re, const char *s, size_t n);

#endif
