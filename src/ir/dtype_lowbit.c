/* dtype_lowbit.c: ONNX's 8-, 4- and 2-bit element types (float8 e4m3fn / e4m3fnuz / e5m2 /
 * e5m2fnuz / e8m0, float4 e2m1, int4 / uint4, int2 / uint2): the value of a code, the code of a
 * value (Cast's rounding and saturation rules), and ONNX's packing of the sub-byte ones.
 *
 * The float formats are described by (exponent bits, mantissa bits, bias, specials). Their
 * positive codes are ordered by value, so the code of a finite magnitude is found by binary search
 * over the codes: the largest code not above it, then the nearer of it and the next one, a tie to
 * the even code. Past the largest finite code a virtual "next" code one top spacing above it
 * stands for overflow, which is exactly where the onnx reference (and IEEE round to nearest even)
 * leaves the finite range. */
#include <math.h>
#include <string.h>

#include "gopt/graph.h"

enum { SP_FN, SP_FNUZ, SP_IEEE, SP_NONE }; /* e4m3fn, *fnuz, e5m2, e2m1 */

typedef struct fmt {
  int mbits, bias, special;
  uint8_t sign, maxc; /* sign bit; largest finite positive code */
} fmt;

static int fmt_of(int dtype, fmt *f) {
  switch (dtype) {
    case GOPT_DT_FLOAT8E4M3FN: *f = (fmt){3, 7, SP_FN, 0x80, 0x7E}; return 1;
    case GOPT_DT_FLOAT8E4M3FNUZ: *f = (fmt){3, 8, SP_FNUZ, 0x80, 0x7F}; return 1;
    case GOPT_DT_FLOAT8E5M2: *f = (fmt){2, 15, SP_IEEE, 0x80, 0x7B}; return 1;
    case GOPT_DT_FLOAT8E5M2FNUZ: *f = (fmt){2, 16, SP_FNUZ, 0x80, 0x7F}; return 1;
    case GOPT_DT_FLOAT4E2M1: *f = (fmt){1, 1, SP_NONE, 0x08, 0x07}; return 1;
    default: return 0;
  }
}

int gopt_dtype_is_lowbit(int dtype) { return dtype >= GOPT_DT_FLOAT8E4M3FN && dtype <= GOPT_DT_INT2; }

int gopt_dtype_bits(int dtype) {
  switch (dtype) {
    case GOPT_DT_UINT4: case GOPT_DT_INT4: case GOPT_DT_FLOAT4E2M1: return 4;
    case GOPT_DT_UINT2: case GOPT_DT_INT2: return 2;
    default: return (int)gopt_dtype_size(dtype) * 8;
  }
}

/* Magnitude of positive code c (no sign bit, not a special). */
static double fmt_val(const fmt *f, int c) {
  int e = c >> f->mbits, m = c & ((1 << f->mbits) - 1);
  if (e == 0) return ldexp(m, 1 - f->bias - f->mbits);
  return ldexp(m + (1 << f->mbits), e - f->bias - f->mbits);
}

static uint8_t fmt_nan(const fmt *f, uint8_t sign) {
  switch (f->special) {
    case SP_FN: return (uint8_t)(0x7F | sign);
    case SP_IEEE: return (uint8_t)(0x7F | sign);
    case SP_FNUZ: return 0x80;
    default: return 0x08; /* e2m1 has no NaN: onnx gives the code of -0 */
  }
}

/* Code of an infinity or an overflow. */
static uint8_t fmt_over(const fmt *f, uint8_t sign, int saturate) {
  if (saturate || f->special == SP_NONE) return (uint8_t)(f->maxc | sign);
  if (f->special == SP_IEEE) return (uint8_t)(0x7C | sign);
  return fmt_nan(f, sign);
}

static uint8_t fmt_encode(const fmt *f, double d, int saturate) {
  uint8_t sign = signbit(d) ? f->sign : 0;
  if (isnan(d)) return fmt_nan(f, sign);
  double a = fabs(d);
  if (isinf(a)) return fmt_over(f, sign, saturate);
  int lo = 0, hi = f->maxc; /* largest code with value <= a */
  if (a >= fmt_val(f, hi)) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      int mid = (lo + hi) / 2;
      if (fmt_val(f, mid) <= a) lo = mid;
      else hi = mid;
    }
  }
  double vlo = fmt_val(f, lo);
  double vhi = lo < f->maxc ? fmt_val(f, lo + 1) : vlo + (vlo - fmt_val(f, lo - 1));
  int c = lo;
  if (a - vlo > vhi - a || (a - vlo == vhi - a && (lo & 1))) c = lo + 1;
  if (c > f->maxc) return fmt_over(f, sign, saturate);
  if (c == 0 && f->special == SP_FNUZ) return 0; /* no negative zero */
  return (uint8_t)(c | sign);
}

/* FLOAT8E8M0: 2^(c-127), 0xFF NaN; no sign, no zero. Rounds on the float's bits: "up" to the next
 * power of two when any mantissa bit is set, "down" drops them, "nearest" rounds up from the
 * midpoint of the mantissa (1.5). */
static uint8_t e8m0_encode(double d, int saturate, const char *mode) {
  float fv = (float)d;
  uint32_t b;
  memcpy(&b, &fv, 4);
  uint32_t e = (b >> 23) & 0xFF, m = b & 0x7FFFFF;
  if (isnan(fv)) return 0xFF;
  if (isinf(fv)) return saturate ? 0xFE : 0xFF;
  int up = 0;
  if (!mode || !strcmp(mode, "up")) up = m != 0;
  else if (!strcmp(mode, "nearest")) up = (m & 0x400000) != 0;
  if (e == 0) { /* zero or a subnormal float, below 2^-126: code 0 (2^-127) or 1 (2^-126) */
    double a = fabs((double)fv), lo = ldexp(1.0, -127);
    if (a <= lo) return 0;
    if (!mode || !strcmp(mode, "up")) return 1;
    return !strcmp(mode, "nearest") && a >= 1.5 * lo ? 1 : 0;
  }
  if (up) {
    if (e >= 0xFE) return saturate ? 0xFE : 0xFF;
    e++;
  }
  return (uint8_t)e;
}

double gopt_lowbit_to_double(int dtype, uint8_t v) {
  fmt f;
  switch (dtype) {
    case GOPT_DT_UINT4: case GOPT_DT_UINT2: return v;
    case GOPT_DT_INT4: case GOPT_DT_INT2: return (int8_t)v;
    case GOPT_DT_FLOAT8E8M0: return v == 0xFF ? NAN : ldexp(1.0, (int)v - 127);
    default: break;
  }
  if (!fmt_of(dtype, &f)) return 0;
  int c = v & ~f.sign;
  double s = (v & f.sign) ? -1 : 1;
  switch (f.special) {
    case SP_FN: if (c == 0x7F) return copysign(NAN, s); break; /* keeps the sign bit */
    case SP_FNUZ: if (v == 0x80) return NAN; break;
    case SP_IEEE: if (c >= 0x7C) return c == 0x7C ? s * INFINITY : copysign(NAN, s); break;
    default: break;
  }
  return s * fmt_val(&f, c);
}

static uint8_t int_encode(double d, double lo, double hi) {
  if (isnan(d)) return 0;
  double r = nearbyint(d);
  r = r < lo ? lo : r > hi ? hi : r;
  return (uint8_t)(int8_t)r;
}

uint8_t gopt_lowbit_from_double(int dtype, double d, int saturate, const char *round_mode) {
  fmt f;
  switch (dtype) {
    case GOPT_DT_UINT4: return int_encode(d, 0, 15);
    case GOPT_DT_INT4: return int_encode(d, -8, 7);
    case GOPT_DT_UINT2: return int_encode(d, 0, 3);
    case GOPT_DT_INT2: return int_encode(d, -2, 1);
    case GOPT_DT_FLOAT8E8M0: return e8m0_encode(d, saturate, round_mode);
    default: break;
  }
  return fmt_of(dtype, &f) ? fmt_encode(&f, d, saturate) : 0;
}

void gopt_lowbit_pack(int dtype, const uint8_t *in, int64_t n, uint8_t *out) {
  int bits = gopt_dtype_bits(dtype);
  if (bits >= 8) {
    if (n) memcpy(out, in, (size_t)n);
    return;
  }
  int per = 8 / bits;
  uint8_t mask = (uint8_t)((1 << bits) - 1);
  memset(out, 0, (size_t)((n + per - 1) / per));
  for (int64_t i = 0; i < n; i++) out[i / per] |= (uint8_t)((in[i] & mask) << (bits * (i % per)));
}

void gopt_lowbit_unpack(int dtype, const uint8_t *in, int64_t n, uint8_t *out) {
  int bits = gopt_dtype_bits(dtype);
  if (bits >= 8) {
    if (n) memcpy(out, in, (size_t)n);
    return;
  }
  int per = 8 / bits, sgn = dtype == GOPT_DT_INT4 || dtype == GOPT_DT_INT2;
  uint8_t mask = (uint8_t)((1 << bits) - 1);
  for (int64_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)((in[i / per] >> (bits * (i % per))) & mask);
    if (sgn && (v >> (bits - 1))) v |= (uint8_t)~mask;
    out[i] = v;
  }
}
