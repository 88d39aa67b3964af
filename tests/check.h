/* check.h: tiny assertion helpers for gopt's C tests. A failed check prints file:line and the
 * expression, counts the failure, and the test's main returns check_exit() (non-zero on any failure). */
#ifndef GOPT_TEST_CHECK_H
#define GOPT_TEST_CHECK_H
#include <math.h>
#include <stdio.h>

static int check_failures = 0;
static int check_count = 0;

#define CHECK(cond) do { check_count++; if (!(cond)) { check_failures++; \
  fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { check_count++; if (!(cond)) { check_failures++; \
  fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long va_ = (long long)(a), vb_ = (long long)(b); check_count++; \
  if (va_ != vb_) { check_failures++; fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld vs %lld)\n", \
  __FILE__, __LINE__, #a, #b, va_, vb_); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double va_ = (double)(a), vb_ = (double)(b); check_count++; \
  if (!(fabs(va_ - vb_) <= (tol))) { check_failures++; fprintf(stderr, \
  "%s:%d: CHECK failed: %s ~ %s (%.9g vs %.9g, tol %g)\n", __FILE__, __LINE__, #a, #b, va_, vb_, (double)(tol)); } } while (0)

/* CHECK_ROUNDS(n): the number of random rounds a long randomised test runs. Under AddressSanitizer
 * (GCC's __SANITIZE_ADDRESS__, clang's __has_feature) it is half of n, at least 1, so that the
 * sanitizer suite keeps CI's time limit; the release suite runs all n. Every round still checks
 * everything a round checks. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_ROUNDS(n) ((n) > 1 ? (n) / 2 : 1)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_ROUNDS(n) ((n) > 1 ? (n) / 2 : 1)
#endif
#endif
#ifndef CHECK_ROUNDS
#define CHECK_ROUNDS(n) (n)
#endif

static inline int check_exit(const char *name) {
  if (check_count == 0) { fprintf(stderr, "%s: no checks ran\n", name); return 1; }
  fprintf(stderr, "%s: %d checks, %d failed\n", name, check_count, check_failures);
  return check_failures ? 1 : 0;
}
#endif
