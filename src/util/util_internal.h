/* util_internal.h: library-internal helpers shared across modules (never installed, never exported):
 * the one zeroing array allocation macro and the one splitmix64 step every seeded generator in
 * gopt (search PRNG, NN PRNG, executor random inputs) is built on. */
#ifndef GOPT_UTIL_INTERNAL_H
#define GOPT_UTIL_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

/* Allocates cnt (+1, so a zero count still gets a valid pointer) zeroed elements of *p's type into
 * p; the expression is true when the allocation FAILED:  if (GOPT_ALLOC(a, n)) goto oom; */
#define GOPT_ALLOC(p, cnt) (((p) = calloc((size_t)(cnt) + 1, sizeof *(p))) == NULL)

/* splitmix64 (Steele, Lea, Flood 2014): advances the state *x by the golden-ratio increment and
 * returns the mixed value. Used to seed xoshiro256** states and as a small generator of its own. */
static inline uint64_t gopt_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

#endif
