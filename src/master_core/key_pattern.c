/* Key patterns (key_pattern.h): PCRE2 under fixed limits (docs/master.md "Limits"). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "master_core/key_pattern.h"

#include <pcre2.h>
#include <string.h>

#include "common/alloc.h"
#include "net/codec.h"

#define RE_MAX_NEST 8                 /* nested groups */
#define RE_COMPILE_MEM (1u << 20)     /* bytes PCRE2 may allocate for one compiled pattern */
#define RE_MATCH_LIMIT 200000u        /* backtracking steps per key */
#define RE_DEPTH_LIMIT 10000u         /* nested backtracking frames per key */
#define RE_HEAP_LIMIT_KIB 4096u       /* heap for those frames per key */

struct mc_regex {
  size_t mem_used; /* what the compile allocations below hold (at most RE_COMPILE_MEM) */
  pcre2_general_context *gctx;
  pcre2_compile_context *cctx;
  pcre2_code *code;
  pcre2_match_context *mctx;
  pcre2_match_data *md;
};

/* PCRE2's allocator for compiling: counts what a pattern costs and refuses past RE_COMPILE_MEM. */
#define RE_HDR 16
static void *re_malloc(size_t n, void *data) {
  struct mc_regex *re = data;
  if (n > RE_COMPILE_MEM - re->mem_used) return NULL;
  uint8_t *p = mc_try_malloc(n + RE_HDR);
  if (!p) return NULL;
  memcpy(p, &n, sizeof(n));
  re->mem_used += n;
  return p + RE_HDR;
}

static void re_free(void *q, void *data) {
  if (!q) return;
  struct mc_regex *re = data;
  size_t n;
  uint8_t *p = (uint8_t *)q - RE_HDR;
  memcpy(&n, p, sizeof(n));
  re->mem_used -= n;
  mc_free(p);
}

void mc_regex_free(struct mc_regex *re) {
  if (!re) return;
  pcre2_match_data_free(re->md);
  pcre2_match_context_free(re->mctx);
  pcre2_code_free(re->code);
  pcre2_compile_context_free(re->cctx);
  pcre2_general_context_free(re->gctx);
  mc_free(re);
}

struct mc_regex *mc_regex_compile(const char *pattern, size_t n) {
  struct mc_regex *re = mc_calloc(1, sizeof(*re));
  re->gctx = pcre2_general_context_create(re_malloc, re_free, re);
  re->cctx = re->gctx ? pcre2_compile_context_create(re->gctx) : NULL;
  re->mctx = pcre2_match_context_create(NULL);
  re->md = pcre2_match_data_create(1, NULL);
  if (!re->cctx || !re->mctx || !re->md) {
    mc_regex_free(re);
    return NULL;
  }
  pcre2_set_max_pattern_length(re->cctx, MC_STR_MAX);
  pcre2_set_parens_nest_limit(re->cctx, RE_MAX_NEST);
  pcre2_set_match_limit(re->mctx, RE_MATCH_LIMIT);
  pcre2_set_depth_limit(re->mctx, RE_DEPTH_LIMIT);
  pcre2_set_heap_limit(re->mctx, RE_HEAP_LIMIT_KIB);
  int err;
  PCRE2_SIZE at;
  /* bytes, not UTF-8 (and no pattern may switch that on); `$` only at the very end, as in POSIX */
  re->code = pcre2_compile((PCRE2_SPTR)pattern, n,
                           PCRE2_NEVER_UTF | PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_DOLLAR_ENDONLY, &err,
                           &at, re->cctx);
  uint32_t backrefs = 0;
  if (re->code) pcre2_pattern_info(re->code, PCRE2_INFO_BACKREFMAX, &backrefs);
  if (!re->code || backrefs) {
    mc_regex_free(re);
    return NULL;
  }
  return re;
}

int mc_regex_match(struct mc_regex *re, const char *s, size_t n) {
  int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, re->md, re->mctx);
  if (rc >= 0) return 1;
  return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

