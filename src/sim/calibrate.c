/* calibrate.c: fitting a device's launch overhead and per-class efficiencies to measured op times
 * (least squares in log space), and the fidelity statistics (Kendall's tau-b, median absolute
 * percentage error). */
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
  fit->launch_s = d->launch_s;
  memcpy(fit->eff, d->eff, sizeof fit->eff);
  score(d, s, n, &fit->rms_log_after, &fit->mdape_after);
  return GOPT_OK;
}
