/* calibrate.c: fitting a device's cost model to measured op times (least squares in log space):
 * first the plain roofline (launch overhead + per-class efficiency), then the refinements of
 * device.h (per-class fixed overhead, separate compute and memory efficiencies, an efficiency
 * slope over arithmetic intensity, compute/memory overlap, cache bandwidths) by a regularised,
 * box-constrained Levenberg-Marquardt started from the plain fit; and the fidelity statistics
 * (Kendall's tau-b, median absolute percentage error). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "gopt/sim.h"

static int dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double gopt_sim_mdape(const double *pred, const double *meas, size_t n, double *scratch) {
  double *buf = scratch ? scratch : malloc((n ? n : 1) * sizeof *buf);
  if (!buf) return NAN;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (meas[i] > 0) buf[k++] = fabs(pred[i] - meas[i]) / meas[i] * 100.0;
  double m = NAN;
  if (k) {
    qsort(buf, k, sizeof *buf, dcmp);
    m = (k & 1) ? buf[k / 2] : 0.5 * (buf[k / 2 - 1] + buf[k / 2]);
  }
  if (!scratch) free(buf);
  return m;
}

double gopt_sim_kendall_tau(const double *x, const double *y, size_t n) {
  if (n < 2) return 0;
  double conc = 0, disc = 0, tx = 0, ty = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) tx++;
      else if (dy == 0) ty++;
      else if ((dx > 0) == (dy > 0)) conc++;
      else disc++;
    }
  double den = sqrt((conc + disc + tx) * (conc + disc + ty));
  return den > 0 ? (conc - disc) / den : 0;
}

/* Roofline time without launch and efficiency. */
static double roof(const gopt_device *d, const gopt_sim_sample *s) {
  double p = gopt_device_peak(d, s->dtype);
  double tf = p > 0 ? s->flops / p : 0, tb = d->mem_bw > 0 ? s->bytes / d->mem_bw : 0;
  return tf > tb ? tf : tb;
}

/* Sum of squared log errors, RMS and median % error of d on the usable samples. */
static double score(const gopt_device *d, const gopt_sim_sample *s, size_t n, double *rms,
                    double *mdape) {
  double sse = 0;
  size_t k = 0;
  double *pred = malloc((n ? n : 1) * sizeof *pred), *meas = malloc((n ? n : 1) * sizeof *meas);
  for (size_t i = 0; i < n; i++) {
    if (s[i].cls == GOPT_OPC_SHAPE || !(s[i].seconds > 0)) continue;
    double t = gopt_device_kernel_time(d, s[i].cls, s[i].dtype, s[i].flops, s[i].bytes);
    double e = log(t > 0 ? t : 1e-12) - log(s[i].seconds);
    sse += e * e;
    if (pred && meas) {
      pred[k] = t;
      meas[k] = s[i].seconds;
    }
    k++;
  }
  if (rms) *rms = k ? sqrt(sse / (double)k) : 0;
  if (mdape) *mdape = (pred && meas) ? gopt_sim_mdape(pred, meas, k, NULL) : NAN;
  free(pred);
  free(meas);
  return sse;
}

/* ---- refinement fit --------------------------------------------------------------------------
 * Parameters (per non-shape class c = 1..6): ln L_c (launch + fixed overhead), ln e_c (compute
 * efficiency at 1 FLOP/byte), ln m_c (memory efficiency), slope_c; then serial, and ln k_i (cache
 * level i's bandwidth over mem_bw) when the device has cache sizes. Each parameter has a box and a
 * weak quadratic pull (REG) towards its start (the plain fit: slope 0, serial 0, k 1), which keeps
 * the parameters of classes with few samples, or that the data do not determine, near it. */
#define NC (GOPT_SIM_NCLASS - 1)
#define NP (4 * NC + 3)
#define REG 0.1

typedef struct refit {
  const gopt_device *base;
  const gopt_sim_sample *s;
  size_t n;
  int use[NP];          /* parameter is fitted (its class has samples; caches exist) */
  double lo[NP], hi[NP], x0[NP];
} refit;

/* Device of parameter vector x (eff and eff_mem may exceed 1 here; normalised at the end). */
static void refit_device(const refit *R, const double *x, gopt_device *d) {
  *d = *R->base;
  d->launch_s = 0;
  for (int c = 1; c <= NC; c++) {
    d->op_s[c] = exp(x[c - 1]);
    d->eff[c] = exp(x[NC + c - 1]);
    d->eff_mem[c] = exp(x[2 * NC + c - 1]);
    d->eff_slope[c] = x[3 * NC + c - 1];
  }
  d->serial = x[4 * NC];
  for (int i = 0; i < 2; i++) d->cache_bw[i] = d->cache_bytes[i] > 0 ? d->mem_bw * exp(x[4 * NC + 1 + i]) : 0;
}

/* Residuals: ln predicted - ln measured per usable sample, then REG * (x - x0) per fitted
 * parameter. Returns the count written (r may be NULL to count). */
static size_t refit_resid(const refit *R, const double *x, double *r) {
  gopt_device d;
  refit_device(R, x, &d);
  size_t k = 0;
  for (size_t i = 0; i < R->n; i++) {
    const gopt_sim_sample *q = &R->s[i];
    if (q->cls <= GOPT_OPC_SHAPE || q->cls >= GOPT_SIM_NCLASS || !(q->seconds > 0)) continue;
    if (r) {
      double t = gopt_device_kernel_time(&d, q->cls, q->dtype, q->flops, q->bytes);
      r[k] = log(t > 1e-15 ? t : 1e-15) - log(q->seconds);
    }
    k++;
  }
  for (int j = 0; j < NP; j++)
    if (R->use[j]) {
      if (r) r[k] = REG * (x[j] - R->x0[j]);
      k++;
    }
  return k;
}

static double sumsq(const double *r, size_t m) {
  double f = 0;
  for (size_t i = 0; i < m; i++) f += r[i] * r[i];
  return f;
}

/* Solves A z = b (A symmetric positive definite, p x p, destroyed) by Gaussian elimination with
 * partial pivoting. Returns -1 when singular. */
static int solve(double *A, double *b, double *z, int p) {
  for (int i = 0; i < p; i++) {
    int piv = i;
    for (int r = i + 1; r < p; r++)
      if (fabs(A[r * p + i]) > fabs(A[piv * p + i])) piv = r;
    if (!(fabs(A[piv * p + i]) > 1e-300)) return -1;
    if (piv != i) {
      for (int c = 0; c < p; c++) {
        double t = A[i * p + c];
        A[i * p + c] = A[piv * p + c];
        A[piv * p + c] = t;
      }
      double t = b[i];
      b[i] = b[piv];
      b[piv] = t;
    }
    for (int r = i + 1; r < p; r++) {
      double f = A[r * p + i] / A[i * p + i];
      for (int c = i; c < p; c++) A[r * p + c] -= f * A[i * p + c];
      b[r] -= f * b[i];
    }
  }
  for (int i = p - 1; i >= 0; i--) {
    double v = b[i];
    for (int c = i + 1; c < p; c++) v -= A[i * p + c] * z[c];
    z[i] = v / A[i * p + i];
  }
  return 0;
}

/* Box-constrained Levenberg-Marquardt on the residuals (forward differences, stepping inwards at
 * an upper bound); x is updated in place. Returns 0, or -1 when out of memory. */
static int refit_lm(const refit *R, double *x) {
  size_t m = refit_resid(R, x, NULL);
  int idx[NP], p = 0;
  for (int j = 0; j < NP; j++)
    if (R->use[j]) idx[p++] = j;
  double *r = malloc(m * sizeof *r), *rn = malloc(m * sizeof *rn), *J = malloc(m * (size_t)p * sizeof *J);
  if (!r || !rn || !J) {
    free(r);
    free(rn);
    free(J);
    return -1;
  }
  double A[NP * NP], g[NP], z[NP], xn[NP], lam = 1e-2;
  refit_resid(R, x, r);
  double f = sumsq(r, m);
  for (int it = 0; it < 300; it++) {
    for (int a = 0; a < p; a++) {
      int j = idx[a];
      double h = 1e-6 * (1 + fabs(x[j])), keep = x[j];
      if (x[j] + h > R->hi[j]) h = -h;
      x[j] += h;
      refit_resid(R, x, rn);
      x[j] = keep;
      for (size_t i = 0; i < m; i++) J[i * (size_t)p + (size_t)a] = (rn[i] - r[i]) / h;
    }
    double An[NP * NP];
    for (int a = 0; a < p; a++) {
      g[a] = 0;
      for (int b = 0; b < p; b++) An[a * p + b] = 0;
    }
    for (size_t i = 0; i < m; i++) {
      const double *Ji = J + i * (size_t)p;
      for (int a = 0; a < p; a++) {
        if (Ji[a] == 0) continue;
        g[a] += Ji[a] * r[i];
        for (int b = 0; b < p; b++) An[a * p + b] += Ji[a] * Ji[b];
      }
    }
    int improved = 0;
    double step = 0;
    while (lam < 1e10) {
      memcpy(A, An, sizeof(double) * (size_t)(p * p));
      double b[NP];
      for (int a = 0; a < p; a++) {
        A[a * p + a] += lam * (An[a * p + a] + 1e-9);
        b[a] = -g[a];
      }
      if (solve(A, b, z, p)) {
        lam *= 4;
        continue;
      }
      memcpy(xn, x, sizeof xn);
      step = 0;
      for (int a = 0; a < p; a++) {
        int j = idx[a];
        double v = x[j] + z[a];
        v = v < R->lo[j] ? R->lo[j] : v > R->hi[j] ? R->hi[j] : v;
        if (fabs(v - x[j]) > step) step = fabs(v - x[j]);
        xn[j] = v;
      }
      refit_resid(R, xn, rn);
      double fn = sumsq(rn, m);
      if (fn < f) {
        memcpy(x, xn, sizeof xn);
        memcpy(r, rn, m * sizeof *r);
        improved = f - fn > 1e-12 * f;
        f = fn;
        lam = lam / 3 > 1e-7 ? lam / 3 : 1e-7;
        break;
      }
      lam *= 4;
    }
    if (!improved || step < 1e-8) break;
  }
  free(r);
  free(rn);
  free(J);
  return 0;
}

/* Refits d (holding the plain fit) with the refinements; keeps the result only when it lowers the
 * squared log error. Efficiencies above 1 are folded into peak_flops / mem_bw (and the cache
 * bandwidths), so that every efficiency stays in (0, 1] as the cluster format requires. */
static void refine(gopt_device *d, const gopt_sim_sample *s, size_t n, double sse_plain) {
  refit R;
  memset(&R, 0, sizeof R);
  R.base = d;
  R.s = s;
  R.n = n;
  int cnt[GOPT_SIM_NCLASS] = {0};
  for (size_t i = 0; i < n; i++)
    if (s[i].cls > 0 && s[i].cls < GOPT_SIM_NCLASS && s[i].seconds > 0) cnt[s[i].cls]++;
  double x[NP];
  double L0 = d->launch_s > 1e-9 ? d->launch_s : 1e-9;
  for (int c = 1; c <= NC; c++) {
    int u = cnt[c] > 0;
    double e = d->eff[c] > 0 ? d->eff[c] : 1;
    double me = d->eff_mem[c] > 0 ? d->eff_mem[c] : e;
    x[c - 1] = log(L0 + d->op_s[c]);
    R.lo[c - 1] = log(1e-9), R.hi[c - 1] = log(1e-2);
    x[NC + c - 1] = log(e);
    R.lo[NC + c - 1] = log(1e-6), R.hi[NC + c - 1] = log(64.0);
    x[2 * NC + c - 1] = log(me);
    R.lo[2 * NC + c - 1] = log(1e-6), R.hi[2 * NC + c - 1] = log(4.0);
    x[3 * NC + c - 1] = d->eff_slope[c];
    R.lo[3 * NC + c - 1] = -1, R.hi[3 * NC + c - 1] = 1;
    R.use[c - 1] = R.use[NC + c - 1] = R.use[2 * NC + c - 1] = R.use[3 * NC + c - 1] = u;
  }
  x[4 * NC] = d->serial;
  R.lo[4 * NC] = 0, R.hi[4 * NC] = 1, R.use[4 * NC] = 1;
  for (int i = 0; i < 2; i++) {
    int j = 4 * NC + 1 + i;
    x[j] = d->cache_bw[i] > 0 && d->mem_bw > 0 ? log(d->cache_bw[i] / d->mem_bw) : 0;
    R.lo[j] = 0, R.hi[j] = log(4.0);
    R.use[j] = d->cache_bytes[i] > 0;
  }
  memcpy(R.x0, x, sizeof x);
  /* clamp the start into the box */
  for (int j = 0; j < NP; j++) x[j] = x[j] < R.lo[j] ? R.lo[j] : x[j] > R.hi[j] ? R.hi[j] : x[j];
  if (refit_lm(&R, x)) return;
  gopt_device t;
  refit_device(&R, x, &t);
  /* overheads: the smallest fitted class overhead becomes launch_s, the rest op_s */
  double L = INFINITY;
  for (int c = 1; c <= NC; c++)
    if (cnt[c] && t.op_s[c] < L) L = t.op_s[c];
  if (!isfinite(L)) return;
  t.launch_s = L;
  for (int c = 1; c < GOPT_SIM_NCLASS; c++) t.op_s[c] = cnt[c] ? t.op_s[c] - L : d->op_s[c] + d->launch_s - L;
  if (t.op_s[GOPT_OPC_SHAPE] != 0) t.op_s[GOPT_OPC_SHAPE] = 0;
  for (int c = 1; c < GOPT_SIM_NCLASS; c++)
    if (t.op_s[c] < 0) t.op_s[c] = 0;
  /* classes without samples keep their times: compute eff as before, memory eff as before */
  for (int c = 1; c < GOPT_SIM_NCLASS; c++)
    if (!cnt[c]) {
      t.eff[c] = d->eff[c];
      t.eff_mem[c] = d->eff_mem[c] > 0 ? d->eff_mem[c] : d->eff[c];
      t.eff_slope[c] = d->eff_slope[c];
    }
  t.eff_mem[GOPT_OPC_SHAPE] = 0;
  /* fold efficiencies above 1 into the peaks (predictions unchanged up to rounding) */
  double sf = 1, sb = 1;
  for (int c = 1; c < GOPT_SIM_NCLASS; c++) {
    if (t.eff[c] > sf) sf = t.eff[c];
    if (t.eff_mem[c] > sb) sb = t.eff_mem[c];
  }
  for (int k = 0; k < GOPT_DT_COUNT; k++) t.peak_flops[k] *= sf;
  t.mem_bw *= sb;
  for (int i = 0; i < 2; i++) t.cache_bw[i] *= sb;
  for (int c = 1; c < GOPT_SIM_NCLASS; c++) {
    t.eff[c] /= sf;
    t.eff_mem[c] /= sb;
    if (t.eff[c] < 1e-9) t.eff[c] = 1e-9;
    if (t.eff_mem[c] < 1e-9) t.eff_mem[c] = 1e-9;
  }
  double sse = score(&t, s, n, NULL, NULL);
  if (sse < sse_plain) *d = t;
}

int gopt_sim_fit_device(gopt_device *d, const gopt_sim_sample *s, size_t n, gopt_sim_fit *fit,
                        gopt_error *err) {
  memset(fit, 0, sizeof *fit);
  double tmin = INFINITY;
  size_t usable = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i].cls != GOPT_OPC_SHAPE && s[i].cls >= 0 && s[i].cls < GOPT_SIM_NCLASS && s[i].seconds > 0) {
      usable++;
      fit->n[s[i].cls]++;
      if (s[i].seconds < tmin) tmin = s[i].seconds;
    }
  if (!usable)
    return gopt_error_set(err, GOPT_EINVAL, "calibrate: no measured op matches a model node "
                                            "(need non-shape ops with seconds > 0)");
  score(d, s, n, &fit->rms_log_before, &fit->mdape_before);
  /* the plain fit starts from the plain roofline (refinements off; cache sizes kept) */
  memset(d->eff_mem, 0, sizeof d->eff_mem);
  memset(d->eff_slope, 0, sizeof d->eff_slope);
  memset(d->op_s, 0, sizeof d->op_s);
  memset(d->cache_bw, 0, sizeof d->cache_bw);
  d->serial = 0;
  gopt_device best = *d, trial = *d;
  double best_sse = INFINITY;
  /* launch overhead on a grid from 0 to just under the fastest op (log-spaced), then the
   * per-class efficiency in closed form: ln e_c = mean(ln roof - ln(t - L)) */
  const int G = 200;
  for (int k = 0; k <= G; k++) {
    double L = k == 0 ? 0 : tmin * 0.98 * pow(10.0, -4.0 * (G - k) / G);
    double sum[GOPT_SIM_NCLASS] = {0};
    int cnt[GOPT_SIM_NCLASS] = {0};
    for (size_t i = 0; i < n; i++) {
      int c = s[i].cls;
      if (c == GOPT_OPC_SHAPE || c < 0 || c >= GOPT_SIM_NCLASS || !(s[i].seconds > 0)) continue;
      double r = roof(d, &s[i]);
      if (!(r > 0)) continue;
      sum[c] += log(r) - log(s[i].seconds - L);
      cnt[c]++;
    }
    trial.launch_s = L;
    for (int c = 1; c < GOPT_SIM_NCLASS; c++) {
      double e = cnt[c] ? exp(sum[c] / cnt[c]) : d->eff[c];
      trial.eff[c] = e < 1e-6 ? 1e-6 : e > 1 ? 1 : e;
    }
    double sse = score(&trial, s, n, NULL, NULL);
    if (sse < best_sse) {
      best_sse = sse;
      best = trial;
    }
  }
  *d = best;
  refine(d, s, n, best_sse);
  fit->launch_s = d->launch_s;
  memcpy(fit->eff, d->eff, sizeof fit->eff);
  score(d, s, n, &fit->rms_log_after, &fit->mdape_after);
  return GOPT_OK;
}
