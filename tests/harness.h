/* A minimal test harness: TEST(name) functions registered in a table, CHECK macros that record the
 * failing expression and go on, and a main that prints "N passed, N failed". Exit 77 = skipped. */
#ifndef PRECIS_TEST_HARNESS_H
#define PRECIS_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRECIS_TEST_SKIP 77

static int harness_failures;
static int harness_checks;

#define CHECK(cond)                                                                                   \
  do {                                                                                                \
    harness_checks++;                                                                                 \
    if (!(cond)) {                                                                                    \
      harness_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                        \
    }                                                                                                 \
  } while (0)

#define CHECK_MSG(cond, ...)                                                                          \
  do {                                                                                                \
    harness_checks++;                                                                                 \
    if (!(cond)) {                                                                                    \
      harness_failures++;                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                        \
      fprintf(stderr, __VA_ARGS__);                                                                   \
      fputc('\n', stderr);                                                                            \
    }                                                                                                 \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                            \
  do {                                                                                                \
    long long va_ = (long long)(a), vb_ = (long long)(b);                                             \
    CHECK_MSG(va_ == vb_, "%s = %lld, %s = %lld", #a, va_, #b, vb_);                                  \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                                         \
  do {                                                                                                \
    double va_ = (double)(a), vb_ = (double)(b);                                                      \
    CHECK_MSG(fabs(va_ - vb_) <= (tol), "%s = %.17g, %s = %.17g (tol %g)", #a, va_, #b, vb_, (double)(tol)); \
  } while (0)

#define CHECK_STR(a, b)                                                                               \
  do {                                                                                                \
    const char *sa_ = (a), *sb_ = (b);                                                                \
    CHECK_MSG(sa_ && sb_ && strcmp(sa_, sb_) == 0, "%s = \"%s\", %s = \"%s\"", #a, sa_ ? sa_ : "(null)", #b, \
              sb_ ? sb_ : "(null)");                                                                  \
  } while (0)

#define CHECK_OK(expr)                                                                                \
  do {                                                                                                \
    precis_status st_ = (expr);                                                                       \
    CHECK_MSG(st_ == PRECIS_OK, "%s returned %d: %s", #expr, (int)st_, precis_last_error());          \
  } while (0)

typedef struct harness_test {
  const char *name;
  void (*fn)(void);
} harness_test;

#define TEST(name) static void name(void)

/* Runs every test in the table and prints the closing line CTest logs show. */
static inline int harness_run(const harness_test *tests, size_t count) {
  int passed = 0, failed = 0;
  for (size_t i = 0; i < count; i++) {
    int before = harness_failures;
    tests[i].fn();
    if (harness_failures == before) {
      passed++;
      printf("ok   %s\n", tests[i].name);
    } else {
      failed++;
      printf("FAIL %s\n", tests[i].name);
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed (%d checks)\n", passed, failed, harness_checks);
  return failed ? 1 : 0;
}

#define RUN_TESTS(...)                                                                                \
  int main(void) {                                                                                    \
    static const harness_test tests_[] = {__VA_ARGS__};                                               \
    return harness_run(tests_, sizeof tests_ / sizeof tests_[0]);                                     \
  }
#define T(fn) {#fn, fn}

#endif
