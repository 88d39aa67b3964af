/* nn_rng.c: seeded random numbers (xoshiro256**, splitmix64 seeding; uniform, normal, Gamma, Beta)
 * and the special functions the Beta head needs (lgamma, digamma, trigamma in double). */
#include <math.h>

#include "nn/nn_internal.h"

void gopt_nn_rng_seed(gopt_nn_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = gopt_splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gopt_nn_rng_u64(gopt_nn_rng *r) {
  uint64_t *s = r->s;
  uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return res;
}

double gopt_nn_rng_uniform(gopt_nn_rng *r) { return (double)(gopt_nn_rng_u64(r) >> 11) * 0x1.0p-53; }

double gopt_nn_rng_normal(gopt_nn_rng *r) {
  double u1 = gopt_nn_rng_uniform(r), u2 = gopt_nn_rng_uniform(r);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Marsaglia & Tsang (2000); shape < 1 via G(a) = G(a+1) * U^(1/a). */
double gopt_nn_rng_gamma(gopt_nn_rng *r, double a) {
  if (!(a > 0)) return 0.0;
  if (a < 1.0) {
    double u = gopt_nn_rng_uniform(r);
    return gopt_nn_rng_gamma(r, a + 1.0) * pow(u > 0 ? u : 1e-300, 1.0 / a);
  }
  double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do { x = gopt_nn_rng_normal(r); v = 1.0 + c * x; } while (v <= 0);
    v = v * v * v;
    double u = gopt_nn_rng_uniform(r);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (log(u > 0 ? u : 1e-300) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
  }
}

double gopt_nn_rng_beta(gopt_nn_rng *r, double a, double b) {
  double x = gopt_nn_rng_gamma(r, a), y = gopt_nn_rng_gamma(r, b);
  return (x + y) > 0 ? x / (x + y) : 0.5;
}

/* lgamma for x > 0: shift to x >= 8 with the recurrence, then Stirling's series. Thread-safe
 * (libm's lgamma writes signgam). */
double gopt_nn_lgamma(double x) {
  double shift = 0.0;
  while (x < 8.0) { shift -= log(x); x += 1.0; }
  double z = 1.0 / (x * x);
  double series = (1.0 / 12 - z * (1.0 / 360 - z * (1.0 / 1260 - z * (1.0 / 1680 - z / 1188)))) / x;
  return shift + (x - 0.5) * log(x) - x + 0.91893853320467274178 + series;
}

double gopt_nn_digamma(double x) {
  double r = 0.0;
  while (x < 8.0) { r -= 1.0 / x; x += 1.0; }
  double z = 1.0 / (x * x);
  return r + log(x) - 0.5 / x -
         z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z / 132))));
}

double gopt_nn_trigamma(double x) {
  double r = 0.0;
  while (x < 8.0) { r += 1.0 / (x * x); x += 1.0; }
  double z = 1.0 / (x * x);
  return r + 1.0 / x + z / 2 +
         z / x * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * 5.0 / 66))));
}
