/* nnls.c: non-negative least squares (Lawson and Hanson's active-set method) for the GPU cost
 * model fit (gopt/gpu_cost.h); each inner unconstrained least squares is LAPACK's dgelsy
 * (OpenBLAS), on columns scaled to unit norm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/gpu_cost.h"

/* LAPACK (OpenBLAS exports the Fortran symbol). */
extern void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, int *jpvt, const double *rcond, int *rank,
                    double *work, const int *lwork, int *info);

/* Least squares on the columns listed in set[0..k): z[set[i]] = solution, others untouched. */
static int ls_subset(const double *A, const double *b, int m, int n, const int *set, int k,
                     double *z, double *work, int lwork, double *a, double *rhs, int *jpvt) {
  for (int c = 0; c < k; c++)
    for (int r = 0; r < m; r++) a[(size_t)c * m + r] = A[(size_t)r * n + set[c]];
  memcpy(rhs, b, (size_t)m * sizeof *rhs);
  memset(jpvt, 0, (size_t)k * sizeof *jpvt);
  int one = 1, rank = 0, info = 0;
  double rcond = 1e-10;
  dgelsy_(&m, &k, &one, a, &m, rhs, &m, jpvt, &rcond, &rank, work, &lwork, &info);
  if (info) return -1;
  for (int c = 0; c < k; c++) z[set[c]] = rhs[c];
  return 0;
}

int gopt_nnls(const double *A0, const double *b, int m, int n, double *x, gopt_error *err) {
  double *A = malloc((size_t)m * n * sizeof *A), *scale = calloc((size_t)n, sizeof *scale);
  double *a = malloc((size_t)m * n * sizeof *a), *rhs = malloc((size_t)(m > n ? m : n) * sizeof *rhs);
  double *w = malloc((size_t)n * sizeof *w), *z = calloc((size_t)n, sizeof *z);
  double *res = malloc((size_t)m * sizeof *res);
  int *set = malloc((size_t)n * sizeof *set), *in = calloc((size_t)n, sizeof *in);
  int *jpvt = malloc((size_t)n * sizeof *jpvt);
  int lwork = 4 * (m + n) + 64 * n + 256, rc = 0;
  double *work = malloc((size_t)lwork * sizeof *work);
  if (!A || !scale || !a || !rhs || !w || !z || !res || !set || !in || !jpvt || !work) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "nnls: out of memory");
    goto done;
  }
  /* unit-norm columns (features differ by ~10 orders of magnitude) */
  for (int c = 0; c < n; c++) {
    double s = 0;
    for (int r = 0; r < m; r++) s += A0[(size_t)r * n + c] * A0[(size_t)r * n + c];
    scale[c] = s > 0 ? 1 / sqrt(s) : 0;
    for (int r = 0; r < m; r++) A[(size_t)r * n + c] = A0[(size_t)r * n + c] * scale[c];
  }
  memset(x, 0, (size_t)n * sizeof *x);
  int k = 0;
  for (int outer = 0; outer < 3 * n + 10; outer++) {
    for (int r = 0; r < m; r++) {
      double s = b[r];
      for (int c = 0; c < n; c++) s -= A[(size_t)r * n + c] * x[c];
      res[r] = s;
    }
    int best = -1;
    for (int c = 0; c < n; c++) {
      double s = 0;
      for (int r = 0; r < m; r++) s += A[(size_t)r * n + c] * res[r];
      w[c] = s;
      if (!in[c] && scale[c] > 0 && s > 1e-12 && (best < 0 || s > w[best])) best = c;
    }
    if (best < 0) goto unscale;
    in[best] = 1;
    set[k++] = best;
    for (int inner = 0; inner < 3 * n + 10; inner++) {
      if (ls_subset(A, b, m, n, set, k, z, work, lwork, a, rhs, jpvt)) {
        rc = gopt_error_set(err, GOPT_EINVAL, "nnls: least squares failed");
        goto done;
      }
      double alpha = 2;
      for (int i = 0; i < k; i++) {
        int c = set[i];
        if (z[c] <= 0) {
          double al = x[c] / (x[c] - z[c]);
          if (al < alpha) alpha = al;
        }
      }
      if (alpha >= 2) { /* all positive: accept */
        for (int i = 0; i < k; i++) x[set[i]] = z[set[i]];
        break;
      }
      for (int i = 0; i < k; i++) x[set[i]] += alpha * (z[set[i]] - x[set[i]]);
      int kk = 0;
      for (int i = 0; i < k; i++) {
        int c = set[i];
        if (x[c] <= 1e-14) {
          x[c] = 0;
          in[c] = 0;
        } else {
          set[kk++] = c;
        }
      }
      k = kk;
    }
  }
  rc = gopt_error_set(err, GOPT_EINVAL, "nnls: no convergence in %d iterations", 3 * n + 10);
  goto done;
unscale:
  for (int c = 0; c < n; c++) x[c] *= scale[c];
done:
  free(A);
  free(scale);
  free(a);
  free(rhs);
  free(w);
  free(z);
  free(res);
  free(set);
  free(in);
  free(jpvt);
  free(work);
  return rc;
}
