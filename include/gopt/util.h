/* gopt/util.h: small helpers shared by the library and the CLI: files, hashing, timing. */
#ifndef GOPT_UTIL_H
#define GOPT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a whole file into a malloc'd buffer (NUL-terminated, *len excludes the NUL). */
int gopt_file_read(const char *path, void **buf, size_t *len, gopt_error *err);
/* Writes len bytes to path through a temporary file in the same directory, fsync and rename, so
 * the path holds either the old content or the whole new one. */
int gopt_file_write_atomic(const char *path, const void *buf, size_t len, gopt_error *err);

/* 64-bit FNV-1a and a mixing step for combining hashes. */
uint64_t gopt_hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t gopt_hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31; h *= 0xbf58476d1ce4e5b9ULL; h ^= h >> 27;
  return h;
}

/* The library's version ("0.1.0"), the project version CMake builds it with. */
const char *gopt_version(void);

/* Monotonic wall time in seconds. */
double gopt_now(void);
/* The median of v[0..n) (sorts v in place); NAN when n is 0. */
double gopt_median(double *v, size_t n);
/* Peak resident set size of this process in bytes (0 when unknown). */
size_t gopt_peak_rss(void);

/* Finds a file gopt ships, named by its path in the source tree (rel: "policies/placement.gpol",
 * "rules/rules.json", "tools/ort/ort_run.js"): next to the executable exe (a path such as argv[0];
 * NULL or no slash: /proc/self/exe) as BIN/rel, BIN/../rel, BIN/../share/gopt/rel and
 * BIN/../../rel, then in the source tree the build was configured from, then in the configured
 * install prefix's share/gopt. Writes the first readable path into buf (n bytes) and returns 1,
 * or returns 0 with buf "". Environment overrides ($GOPT_POLICY_DIR, ...) are the callers'. */
int gopt_find_shipped(const char *rel, const char *exe, char *buf, size_t n);
/* Where gopt_find_shipped looks, in words for an error message ("next to the executable, in the
 * source tree SRC or in PREFIX/share/gopt"). */
const char *gopt_shipped_places(void);

#ifdef __cplusplus
}
#endif
#endif
