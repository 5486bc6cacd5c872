/* Minimal test harness: CHECK* macros record failures with file:line and keep going; TEST_MAIN runs
 * the listed test functions and exits non-zero if any check failed. One binary per area, run by ctest. */
#ifndef MC_TEST_H
#define MC_TEST_H
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* atomic: tests check from several threads */
static _Atomic int mc_test_failures;
static _Atomic int mc_test_checks;

#define CHECK(cond)                                                             \
  do {                                                                          \
    mc_test_checks++;                                                           \
    if (!(cond)) {                                                              \
      mc_test_failures++;                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
    }                                                                           \
  } while (0)

#define CHECK_EQ(a, b)                                                                          \
  do {                                                                                          \
    long long va_ = (long long)(a), vb_ = (long long)(b);                                       \
    mc_test_checks++;                                                                           \
    if (va_ != vb_) {                                                                           \
      mc_test_failures++;                                                                       \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", __FILE__,    \
              __LINE__, #a, va_, #b, vb_);                                                      \
    }                                                                                           \
  } while (0)

#define CHECK_STR(a, b)                                                                          \
  do {                                                                                           \
    const char *sa_ = (a), *sb_ = (b);                                                           \
    mc_test_checks++;                                                                            \
    if (!sa_ || !sb_ || strcmp(sa_, sb_)) {                                                      \
      mc_test_failures++;                                                                        \
      fprintf(stderr, "%s:%d: CHECK_STR failed: %s = \"%s\", expected \"%s\"\n", __FILE__,       \
              __LINE__, #a, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                         \
    }                                                                                            \
  } while (0)

/* Fails and stops the current test function. */
#define REQUIRE(cond)                                                          \
  do {                                                                         \
    int ok_ = !!(cond);                                                        \
    mc_test_checks++;                                                          \
    if (!ok_) {                                                                \
      mc_test_failures++;                                                      \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* xorshift64: a fast stream that repeats run after run (seed *state non-zero). */
static inline uint64_t mc_tp_xorshift(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

typedef void (*mc_test_fn)(void);
struct mc_test_case {
  const char *name;
  mc_test_fn fn;
};
#define TEST_CASE(f) {#f, f}

/* With arguments, only the cases they name run (in the binary's order). */
static inline int mc_test_run(const struct mc_test_case *cases, int n, int argc, char **argv) {
  for (int i = 0; i < n; i++) {
    int named = argc == 1;
    for (int a = 1; a < argc && !named; a++) named = !strcmp(argv[a], cases[i].name);
    if (!named) continue;
    int before = mc_test_failures;
    fprintf(stderr, "[ RUN  ] %s\n", cases[i].name);
    cases[i].fn();
    fprintf(stderr, "[ %s ] %s\n", mc_test_failures == before ? " OK " : "FAIL", cases[i].name);
  }
  fprintf(stderr, "%d checks, %d failed\n", mc_test_checks, mc_test_failures);
  return mc_test_failures ? 1 : 0;
}
#define TEST_MAIN(...)                                                           \
  int main(int argc, char **argv) {                                              \
    static const struct mc_test_case cases_[] = {__VA_ARGS__};                   \
    return mc_test_run(cases_, (int)(sizeof(cases_) / sizeof(cases_[0])), argc, argv); \
  }

#endif
