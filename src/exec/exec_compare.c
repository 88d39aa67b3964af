/* exec_compare.c: output equality of two graphs on the same random inputs (a module before and
 * after a compiler pass or rewrite): gopt_exec_same_outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"

#define CMP_MAX_OUT 256

/* Runs g on the random inputs of seed; outs receives *n outputs (caller clears them). */
static int cmp_run(const gopt_graph *g, uint64_t seed, gopt_host_tensor *outs, size_t *n, gopt_error *err) {
  gopt_exec *x = NULL;
  gopt_exec_opts o = {0};
  o.threads = 1;
  o.seed = seed;
  *n = 0;
  int rc = gopt_exec_new(g, &o, &x, NULL, err);
  if (!rc && gopt_exec_n_outputs(x) > CMP_MAX_OUT) rc = gopt_error_set(err, GOPT_EUNSUP, "more than %d outputs", CMP_MAX_OUT);
  if (!rc) rc = gopt_exec_random_inputs(x, seed, err);
  if (!rc) rc = gopt_exec_run(x, err);
  for (size_t i = 0; !rc && i < gopt_exec_n_outputs(x); i++, ++*n) rc = gopt_exec_get_output(x, i, &outs[i], err);
  gopt_exec_free(x);
  return rc;
}

static double cmp_val(const gopt_host_tensor *t, int64_t i) {
  switch (t->dtype) {
    case GOPT_DT_FLOAT: return ((const float *)t->data)[i];
    case GOPT_DT_DOUBLE: return ((const double *)t->data)[i];
    case GOPT_DT_INT32: return ((const int32_t *)t->data)[i];
    case GOPT_DT_INT64: return (double)((const int64_t *)t->data)[i];
    case GOPT_DT_UINT32: return ((const uint32_t *)t->data)[i];
    case GOPT_DT_BOOL: case GOPT_DT_UINT8: return ((const uint8_t *)t->data)[i];
    case GOPT_DT_INT8: return ((const int8_t *)t->data)[i];
    case GOPT_DT_INT16: return ((const int16_t *)t->data)[i];
    case GOPT_DT_UINT16: return ((const uint16_t *)t->data)[i];
    case GOPT_DT_UINT64: return (double)((const uint64_t *)t->data)[i];
    case GOPT_DT_BFLOAT16: {
      uint32_t u = (uint32_t)((const uint16_t *)t->data)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case GOPT_DT_FLOAT16: {
      uint16_t h = ((const uint16_t *)t->data)[i];
      int e = (h >> 10) & 31, m = h & 1023;
      double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
      return h & 0x8000 ? -v : v;
    }
    default: return gopt_dtype_is_lowbit(t->dtype) ? gopt_lowbit_to_double(t->dtype, ((const uint8_t *)t->data)[i]) : 0;
  }
}

/* The relative tolerance for outputs of dtype dt: rtol, or two units in the last place of the
 * half-precision and 8-bit float types when that is larger (their rounding differs with the order
 * of operations); 0 for integers (compared exactly). */
static double cmp_rtol(int dt, double rtol) {
  switch (dt) {
    case GOPT_DT_FLOAT: case GOPT_DT_DOUBLE: return rtol;
    case GOPT_DT_FLOAT16: return fmax(rtol, ldexp(2, -10));
    case GOPT_DT_BFLOAT16: return fmax(rtol, ldexp(2, -7));
    case GOPT_DT_FLOAT8E4M3FN: case GOPT_DT_FLOAT8E4M3FNUZ: return fmax(rtol, ldexp(2, -3));
    case GOPT_DT_FLOAT8E5M2: case GOPT_DT_FLOAT8E5M2FNUZ: return fmax(rtol, ldexp(2, -2));
    default: return 0;
  }
}

int gopt_exec_same_outputs(const gopt_graph *a, const gopt_graph *b, uint64_t seed, double rtol, double atol,
                           char *msg, size_t cap) {
  gopt_host_tensor *ra = calloc(2 * CMP_MAX_OUT, sizeof *ra), *rb = ra ? ra + CMP_MAX_OUT : NULL;
  size_t na = 0, nb = 0;
  gopt_error err = {0};
  int res = 1;
  if (!ra) {
    snprintf(msg, cap, "out of memory");
    return -1;
  }
  if (cmp_run(a, seed, ra, &na, &err)) {
    snprintf(msg, cap, "%s", err.msg);
    res = -1;
  } else if (cmp_run(b, seed, rb, &nb, &err)) {
    snprintf(msg, cap, "%s", err.msg);
    res = -2;
  } else if (na != nb) {
    snprintf(msg, cap, "%zu outputs, %zu before", nb, na);
    res = 0;
  }
  for (size_t i = 0; res == 1 && i < na; i++) {
    const gopt_host_tensor *u = &ra[i], *v = &rb[i];
    if (u->dtype != v->dtype || u->rank != v->rank || u->nbytes != v->nbytes ||
        (u->rank && memcmp(u->dims, v->dims, (size_t)u->rank * sizeof *u->dims))) {
      snprintf(msg, cap, "output %zu: %s[%d dims] now, %s[%d dims] before", i, gopt_dtype_name(v->dtype), v->rank,
               gopt_dtype_name(u->dtype), u->rank);
      res = 0;
      break;
    }
    double rt = cmp_rtol(u->dtype, rtol);
    int fl = rt > 0;
    for (int64_t j = 0; j < gopt_host_tensor_numel(u); j++) {
      double p = cmp_val(u, j), q = cmp_val(v, j);
      if ((isnan(p) && isnan(q)) || p == q || (fl && fabs(p - q) <= atol + rt * fabs(p))) continue;
      snprintf(msg, cap, "output %zu element %lld: %.9g, %.9g before", i, (long long)j, q, p);
      res = 0;
      break;
    }
  }
  if (res == 1) snprintf(msg, cap, "%zu outputs equal on the random inputs of seed %llu", na, (unsigned long long)seed);
  for (size_t i = 0; i < CMP_MAX_OUT; i++) {
    gopt_host_tensor_clear(&ra[i]);
    gopt_host_tensor_clear(&rb[i]);
  }
  free(ra);
  return res;
}
