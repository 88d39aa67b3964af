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
/* Peak resident set size of this process in bytes (0 when unknown). */
size_t gopt_peak_rss(void);

#ifdef __cplusplus
}
#endif
#endif
