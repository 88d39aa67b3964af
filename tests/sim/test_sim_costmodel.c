/* test_sim_costmodel.c: the optional refinements of the analytical kernel time (device.h): each
 * term against hand arithmetic (per-class overhead, separate memory efficiency, efficiency slope
 * over arithmetic intensity, compute/memory overlap, cache bandwidths); presets keep the plain
 * roofline (refinements zero; the GPU presets use the measured-GPU model's class-level cost); the cluster JSON round trip of the new fields and one-line errors
 * for bad values; and the calibration fit recovering a refined truth device from its own times
 * (predictions within a few %, the serial share and slopes near the truth) while a plain-roofline
 * truth still comes back as a plain roofline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/device.h"
#include "gopt/ops.h"
#include "gopt/sim.h"

/* A simple device: 1 TFLOP/s, 100 GB/s, 1 us launch, every efficiency 0.5. */
static gopt_device base(void) {
  gopt_device d;
  memset(&d, 0, sizeof d);
  snprintf(d.name, sizeof d.name, "t");
  snprintf(d.model, sizeof d.model, "custom");
  snprintf(d.kind, sizeof d.kind, "cpu");
  d.peak_flops[GOPT_DT_FLOAT] = 1e12;
  d.mem_bw = 100e9;
  d.mem_bytes = 1e9;
  d.launch_s = 1e-6;
  for (int c = 0; c < GOPT_SIM_NCLASS; c++) d.eff[c] = 0.5;
  return d;
}

static void test_terms(void) {
  gopt_device d = base();
  const int C = GOPT_OPC_CONV, E = GOPT_OPC_ELEMWISE;
  /* plain: 1e-6 + max(1e9/1e12, 1e8/1e11)/0.5 = 1e-6 + 2e-3 */
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e8), 1e-6 + 2e-3, 1e-15);
  /* per-class overhead adds to launch for that class only */
  d.op_s[C] = 3e-6;
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e8), 4e-6 + 2e-3, 1e-15);
  CHECK_NEAR(gopt_device_kernel_time(&d, E, GOPT_DT_FLOAT, 1e9, 1e8), 1e-6 + 2e-3, 1e-15);
  /* memory efficiency: tf = 1e9/1e12/0.5 = 2e-3, tb = 1e9/1e11/0.25 = 4e-2 */
  d.eff_mem[C] = 0.25;
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e9), 4e-6 + 4e-2, 1e-15);
  /* serial share: + 0.5 * min(tf, tb) */
  d.serial = 0.5;
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e9), 4e-6 + 4e-2 + 1e-3, 1e-15);
  d.serial = 0;
  /* slope: intensity 1e9/1e8 = 10, slope -1: compute efficiency 0.5 / 10 -> tf = 1e-3 / 0.05 */
  d.eff_slope[C] = -1;
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e8), 4e-6 + 2e-2, 1e-15);
  /* slope +0.5 at intensity 100: eff 0.5 * 10 = 5 -> tf = 1e-3 / 5 = 2e-4; tb = 1e7/1e11/0.25 */
  d.eff_slope[C] = 0.5;
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 1e9, 1e7), 4e-6 + 4e-4, 1e-15);
  /* no FLOPs: the slope does nothing, memory time only */
  CHECK_NEAR(gopt_device_kernel_time(&d, C, GOPT_DT_FLOAT, 0, 1e8), 4e-6 + 1e-3 / 0.25, 1e-15);
  /* caches: <= 1 MB at 400 GB/s, <= 32 MB at 200 GB/s, beyond mem_bw (elemwise: eff 0.5) */
  d.cache_bytes[0] = 1e6, d.cache_bw[0] = 400e9;
  d.cache_bytes[1] = 32e6, d.cache_bw[1] = 200e9;
  CHECK_NEAR(gopt_device_kernel_time(&d, E, GOPT_DT_FLOAT, 0, 1e6), 1e-6 + 1e6 / 400e9 / 0.5, 1e-15);
  CHECK_NEAR(gopt_device_kernel_time(&d, E, GOPT_DT_FLOAT, 0, 2e6), 1e-6 + 2e6 / 200e9 / 0.5, 1e-15);
  CHECK_NEAR(gopt_device_kernel_time(&d, E, GOPT_DT_FLOAT, 0, 64e6), 1e-6 + 64e6 / 100e9 / 0.5, 1e-15);
  /* a cache level with no bandwidth is skipped (the host preset before calibration) */
  d.cache_bw[0] = 0;
  CHECK_NEAR(gopt_device_kernel_time(&d, E, GOPT_DT_FLOAT, 0, 1e6), 1e-6 + 1e6 / 200e9 / 0.5, 1e-15);
  /* shape ops stay free */
  CHECK(gopt_device_kernel_time(&d, GOPT_OPC_SHAPE, GOPT_DT_FLOAT, 1e9, 1e9) == 0);
  /* presets: every refinement zero except the host's cache sizes, whose bandwidths are unset */
  for (size_t i = 0; i < gopt_device_preset_count(); i++) {
    const gopt_device *p = gopt_device_preset(i);
    int zero = p->serial == 0 && p->cache_bw[0] == 0 && p->cache_bw[1] == 0;
    for (int c = 0; c < GOPT_SIM_NCLASS; c++)
      zero &= p->eff_mem[c] == 0 && p->eff_slope[c] == 0 && p->op_s[c] == 0;
    CHECK_MSG(zero, "preset %s has refinements set", p->model);
    if (strcmp(p->kind, "cpu")) CHECK(p->cache_bytes[0] == 0 && p->cache_bytes[1] == 0);
    double f = 3e9, b = 7e8, pk = gopt_device_peak(p, GOPT_DT_FLOAT), tf = f / pk, tb = b / p->mem_bw;
    if (p->gpu_model) { /* GPUs: the measured-GPU model's conv kind for a class-level cost */
      const double *k = p->gpu_coef + GOPT_GK_CONV * GOPT_GF_PER_KIND;
      CHECK(!strcmp(p->kind, "gpu"));
      CHECK(gopt_device_kernel_time(p, C, GOPT_DT_FLOAT, f, b) ==
            k[GOPT_GF_N] + k[GOPT_GF_FLOPS] * f + k[GOPT_GF_BYTES] * b);
    } else { /* the plain roofline, exactly */
      CHECK(gopt_device_kernel_time(p, C, GOPT_DT_FLOAT, f, b) ==
            p->launch_s + (tf > tb ? tf : tb) / p->eff[C]);
    }
  }
}

static void test_json(void) {
  gopt_error err = {0};
  gopt_cluster *c = NULL, *c2 = NULL;
  const char *js =
      "{\"devices\": [{\"preset\": \"host\", \"efficiency_mem\": {\"conv\": 0.2},"
      " \"efficiency_slope\": {\"elemwise\": -0.75, \"conv\": 0.1}, \"op_us\": {\"injective\": 0.5},"
      " \"serial\": 0.4, \"caches\": [{\"bytes\": 1048576, \"bw\": 2e11}, {\"bytes\": 3.2e7}]}]}";
  CHECK_EQ_INT(gopt_cluster_from_json(js, "r.json", &c, &err), 0);
  if (c) {
    const gopt_device *d = &c->devices[0];
    CHECK_NEAR(d->eff_mem[GOPT_OPC_CONV], 0.2, 0);
    CHECK_NEAR(d->eff_mem[GOPT_OPC_ELEMWISE], 0, 0);
    CHECK_NEAR(d->eff_slope[GOPT_OPC_ELEMWISE], -0.75, 0);
    CHECK_NEAR(d->op_s[GOPT_OPC_INJECTIVE], 0.5e-6, 1e-18);
    CHECK_NEAR(d->serial, 0.4, 0);
    CHECK_NEAR(d->cache_bytes[1], 3.2e7, 0);
    CHECK_NEAR(d->cache_bw[0], 2e11, 0);
    CHECK_NEAR(d->cache_bw[1], 0, 0);
    char *txt = gopt_cluster_to_json(c);
    CHECK(txt && gopt_cluster_from_json(txt, "back", &c2, &err) == 0);
    if (c2) {
      const gopt_device *e = &c2->devices[0];
      CHECK(memcmp(e->eff_mem, d->eff_mem, sizeof d->eff_mem) == 0);
      CHECK(memcmp(e->eff_slope, d->eff_slope, sizeof d->eff_slope) == 0);
      CHECK_NEAR(e->op_s[GOPT_OPC_INJECTIVE], d->op_s[GOPT_OPC_INJECTIVE], 1e-20);
      CHECK(e->serial == d->serial && e->cache_bw[0] == d->cache_bw[0] &&
            e->cache_bytes[1] == d->cache_bytes[1]);
      CHECK(gopt_device_kernel_time(e, GOPT_OPC_CONV, 1, 1e8, 1e6) ==
            gopt_device_kernel_time(d, GOPT_OPC_CONV, 1, 1e8, 1e6));
    }
    free(txt);
  }
  gopt_cluster_free(c);
  gopt_cluster_free(c2);
  /* a plain preset writes none of the new keys */
  c = NULL;
  CHECK_EQ_INT(gopt_cluster_parse("V100", &c, &err), 0);
  char *txt = c ? gopt_cluster_to_json(c) : NULL;
  CHECK(txt && !strstr(txt, "serial") && !strstr(txt, "efficiency_mem") && !strstr(txt, "caches"));
  free(txt);
  gopt_cluster_free(c);
  /* bad values: one line naming the file, entry and key */
  const char *bad[][2] = {
      {"{\"devices\": [{\"preset\": \"host\", \"serial\": 2}]}", "\"serial\" must be a number in [0, 1]"},
      {"{\"devices\": [{\"preset\": \"host\", \"efficiency_slope\": {\"conv\": 1.5}}]}", "efficiency_slope: \"conv\""},
      {"{\"devices\": [{\"preset\": \"host\", \"efficiency_mem\": 0}]}", "\"efficiency_mem\" must be in (0, 1]"},
      {"{\"devices\": [{\"preset\": \"host\", \"op_us\": {\"gemm\": 1}}]}", "op_us: \"gemm\" needs a class"},
      {"{\"devices\": [{\"preset\": \"host\", \"caches\": [{\"bytes\": 2e6}, {\"bytes\": 1e6}]}]}", "smallest first"},
      {"{\"devices\": [{\"preset\": \"host\", \"caches\": [{\"bw\": 2e6}]}]}", "caches[0]: missing \"bytes\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c = NULL;
    int rc = gopt_cluster_from_json(bad[i][0], "b.json", &c, &err);
    CHECK_MSG(rc == GOPT_EPARSE && strstr(err.msg, bad[i][1]) && strstr(err.msg, "b.json: devices[0]"),
              "case %zu: rc %d: %s", i, rc, err.msg);
    gopt_cluster_free(c);
  }
}

/* Samples over several classes, sizes and intensities, timed by truth. */
static size_t make_samples(const gopt_device *truth, gopt_sim_sample *s) {
  size_t n = 0;
  const int cls[5] = {GOPT_OPC_ELEMWISE, GOPT_OPC_BROADCAST, GOPT_OPC_INJECTIVE, GOPT_OPC_REDUCE,
                      GOPT_OPC_CONV};
  for (int k = 0; k < 5; k++)
    for (int i = 0; i < 24; i++) {
      double b = 2e3 * pow(1.8, i);
      /* four intensities per class (like Relu vs Sigmoid, depthwise vs dense conv) */
      double in = cls[k] == GOPT_OPC_CONV ? 3 * pow(3, i % 4) : cls[k] == GOPT_OPC_INJECTIVE ? 0
                                                                : 0.0625 * pow(2, i % 4);
      s[n] = (gopt_sim_sample){cls[k], GOPT_DT_FLOAT, b * in, b, 0};
      s[n].seconds = gopt_device_kernel_time(truth, cls[k], GOPT_DT_FLOAT, s[n].flops, s[n].bytes);
      n++;
    }
  return n;
}

static void test_fit(void) {
  gopt_device truth = *gopt_device_find_preset("host");
  truth.cache_bytes[0] = 1 << 20, truth.cache_bytes[1] = 32 << 20;
  truth.launch_s = 0.3e-6;
  truth.op_s[GOPT_OPC_INJECTIVE] = 0.4e-6;
  truth.op_s[GOPT_OPC_CONV] = 1e-6;
  truth.eff[GOPT_OPC_ELEMWISE] = 0.02, truth.eff_slope[GOPT_OPC_ELEMWISE] = -0.7;
  truth.eff_mem[GOPT_OPC_ELEMWISE] = 0.5, truth.eff_mem[GOPT_OPC_BROADCAST] = 0.4;
  truth.eff[GOPT_OPC_BROADCAST] = 0.03, truth.eff_slope[GOPT_OPC_BROADCAST] = -0.8;
  truth.eff[GOPT_OPC_CONV] = 0.5, truth.eff_slope[GOPT_OPC_CONV] = 0.2;
  truth.eff_mem[GOPT_OPC_CONV] = 0.3;
  truth.eff[GOPT_OPC_REDUCE] = 0.2, truth.eff_mem[GOPT_OPC_REDUCE] = 0.1;
  truth.eff_mem[GOPT_OPC_INJECTIVE] = 0.6;
  truth.serial = 0.6;
  truth.cache_bw[0] = 3 * truth.mem_bw, truth.cache_bw[1] = 2 * truth.mem_bw;
  gopt_sim_sample s[200];
  size_t n = make_samples(&truth, s);
  gopt_device d = *gopt_device_find_preset("host");
  d.cache_bytes[0] = truth.cache_bytes[0], d.cache_bytes[1] = truth.cache_bytes[1];
  gopt_sim_fit fit;
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_sim_fit_device(&d, s, n, &fit, &err), 0);
  /* the plain roofline cannot express it; the refined fit predicts it within a few % */
  CHECK_MSG(fit.mdape_after < 3 && fit.rms_log_after < 0.05, "mdape %g rms %g", fit.mdape_after,
            fit.rms_log_after);
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double p = gopt_device_kernel_time(&d, s[i].cls, s[i].dtype, s[i].flops, s[i].bytes);
    double e = fabs(p - s[i].seconds) / s[i].seconds;
    if (e > worst) worst = e;
  }
  CHECK_MSG(worst < 0.15, "worst sample error %.3f", worst);
  CHECK_NEAR(d.serial, 0.6, 0.15);
  /* weakly determined where memory time hides compute, and pulled towards 0: loose */
  CHECK_NEAR(d.eff_slope[GOPT_OPC_ELEMWISE], -0.7, 0.2);
  CHECK_NEAR(d.eff_slope[GOPT_OPC_CONV], 0.2, 0.1);
  CHECK_NEAR(d.launch_s + d.op_s[GOPT_OPC_CONV], 1.3e-6, 0.2e-6);
  for (int c = 1; c < GOPT_SIM_NCLASS; c++) CHECK(d.eff[c] > 0 && d.eff[c] <= 1);
  for (int c = 1; c < GOPT_SIM_NCLASS; c++) CHECK(d.eff_mem[c] > 0 && d.eff_mem[c] <= 1);
  /* the result is a valid cluster file: written and read back, it predicts the same */
  gopt_cluster *c = gopt_cluster_single(&d), *c2 = NULL;
  char *txt = c ? gopt_cluster_to_json(c) : NULL;
  CHECK(txt && gopt_cluster_from_json(txt, "fit", &c2, &err) == 0);
  if (c2)
    for (size_t i = 0; i < n; i++) {
      double a = gopt_device_kernel_time(&d, s[i].cls, 1, s[i].flops, s[i].bytes);
      double b = gopt_device_kernel_time(&c2->devices[0], s[i].cls, 1, s[i].flops, s[i].bytes);
      CHECK_NEAR(a, b, 1e-9 * a);
    }
  free(txt);
  gopt_cluster_free(c);
  gopt_cluster_free(c2);
  /* a plain-roofline truth comes back as one: same efficiencies, no serial share */
  gopt_device plain = *gopt_device_find_preset("host");
  plain.launch_s = 2e-6;
  plain.eff[GOPT_OPC_CONV] = 0.3, plain.eff[GOPT_OPC_ELEMWISE] = 0.45;
  n = make_samples(&plain, s);
  d = *gopt_device_find_preset("host");
  CHECK_EQ_INT(gopt_sim_fit_device(&d, s, n, &fit, &err), 0);
  CHECK_NEAR(fit.eff[GOPT_OPC_CONV], 0.3, 0.01);
  CHECK_NEAR(fit.eff[GOPT_OPC_ELEMWISE], 0.45, 0.02);
  CHECK_NEAR(fit.launch_s, 2e-6, 0.2e-6);
  CHECK(d.serial < 0.05 && fit.mdape_after < 1);
}

int main(void) {
  test_terms();
  test_json();
  test_fit();
  return check_exit("test_sim_costmodel");
}
