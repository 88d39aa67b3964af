/* test_gpu_cost.c: the measured-GPU calibration (gopt/gpu_cost.h).
 *  - A synthetic device: made-up coefficients give every entry of a measurements file its time
 *    (layer rows forward and forward+backward, micro-benchmarks); gopt_gpu_fit gives the same
 *    coefficients back and the same times.
 *  - Features against hand arithmetic: a 3x3 stride-1 convolution's FLOPs go to flops_alt, a
 *    depthwise one is its own kind, wave K-steps of a small matmul, an LSTM's time steps; a
 *    Linear's forward+backward: only the forward Gemm (transB, PyTorch's layout) counts as
 *    flops_alt, both gradient GEMMs as plain FLOPs, and its bias gradient (N x F -> F) is no
 *    convolution-bias epilogue.
 *  - The model weight chosen by leave-one-architecture-out (gopt_gpu_select_weight): layer rows
 *    twice as slow as the whole models they make up favour the largest weight; a fit without two
 *    models (gopt_gpu_fit2) equals the fit without one when the other's rows carry its label.
 *  - Malformed, truncated and foreign measurement files: one line naming the file and the entry.
 *  - Model directories searched in order (the extra calibration set's vgg13 found in the second);
 *    kernel sums above the eager wall time replaced by the graph replay or left out, and named;
 *    an in-place layer's copy ("inplace_copy") and the timing's loss reduction (--layer-harness)
 *    counted as the kernels they are.
 *  - The cluster JSON round trip of "gpu_model" / "gpu_half_speedup", a bf16 node's time, and the
 *    scaling to another GPU. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/device.h"
#include "gopt/gpu_cost.h"
#include "gopt/ops.h"

static char tmpdir[] = "/tmp/gopt_gpu_cost_XXXXXX";

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* Layer rows and micro entries with varied shapes (times filled in later). */
static json_t *synthetic_entries(void) {
  json_t *layers = json_array(), *micro = json_array();
  static const int ch[][4] = {{3, 32, 3, 1}, {32, 64, 3, 1}, {64, 64, 1, 1}, {64, 128, 3, 2},
                              {128, 128, 3, 1}, {16, 96, 1, 1}, {256, 256, 3, 1}, {8, 512, 5, 2}};
  for (int b = 1; b <= 32; b *= 32)
    for (size_t i = 0; i < sizeof ch / sizeof ch[0]; i++)
      for (int hw = 14; hw <= 56; hw *= 2) {
        char attrs[160];
        snprintf(attrs, sizeof attrs, "%d, %d, kernel_size=(%d, %d), stride=(%d, %d), padding=(1, 1), bias=False",
                 ch[i][0], ch[i][1], ch[i][2], ch[i][2], ch[i][3], ch[i][3]);
        json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i,i,i]], s:i}", "layer", "Conv2d", "attrs", attrs,
                                                "in", b, ch[i][0], hw, hw, "count", 1));
        snprintf(attrs, sizeof attrs, "%d, %d, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=%d, bias=False",
                 ch[i][1], ch[i][1], ch[i][1]);
        json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i,i,i]]}", "layer", "Conv2d", "attrs", attrs,
                                                "in", b, ch[i][1], hw, hw));
        json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i,i,i]]}", "layer", "BatchNorm2d", "attrs",
                                                "64, eps=1e-05", "in", b, ch[i][1], hw, hw));
        json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i,i,i]]}", "layer", "ReLU", "attrs", "",
                                                "in", b, ch[i][1], hw, hw));
        json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i,i,i]]}", "layer", "MaxPool2d", "attrs",
                                                "kernel_size=3, stride=2, padding=1", "in", b, ch[i][1], hw, hw));
      }
  for (int m = 16; m <= 4096; m *= 4)
    for (int k = 64; k <= 2048; k *= 8) {
      char attrs[96];
      snprintf(attrs, sizeof attrs, "in_features=%d, out_features=%d, bias=True", k, m);
      json_array_append_new(layers, json_pack("{s:s, s:s, s:[[i,i]]}", "layer", "Linear", "attrs", attrs, "in", m / 4 + 1, k));
      json_array_append_new(micro, json_pack("{s:s, s:i, s:i, s:i}", "op", "MatMul", "M", m, "N", k, "K", m / 2 + 3));
      json_array_append_new(micro, json_pack("{s:s, s:i, s:i, s:i, s:i}", "op", "BatchMatMul", "B", 12, "M", m / 4 + 1, "N", m / 4 + 1, "K", k / 8));
      json_array_append_new(micro, json_pack("{s:s, s:i}", "op", "Add", "numel", m * k));
      json_array_append_new(micro, json_pack("{s:s, s:[i,i]}", "op", "Softmax", "shape", m, k));
      json_array_append_new(micro, json_pack("{s:s, s:[i,i]}", "op", "Transpose", "shape", m, k));
      json_array_append_new(micro, json_pack("{s:s, s:i, s:i, s:i, s:i}", "op", "LSTM", "batch", m / 16, "hidden", k / 2,
                                             "input", k / 4, "seq", m / 64 + 2));
    }
  return json_pack("{s:s, s:{s:{s:o}}, s:o}", "device", "synthetic", "models", "net", "layers_b32", layers,
                   "micro", micro);
}

/* Made-up coefficients: every kind the entries exercise, with each feature it has data for. */
static void truth(double *c) {
  memset(c, 0, GOPT_GPU_NCOEF * sizeof *c);
  for (int k = 0; k < GOPT_GK_COUNT; k++) {
    double *p = c + k * GOPT_GF_PER_KIND;
    p[GOPT_GF_N] = (2 + 0.37 * k) * 1e-6;
    p[GOPT_GF_BYTES] = (1 + 0.11 * k) / 3e12;
  }
  c[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1 / 40e12;
  c[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_FLOPS_ALT] = 1 / 70e12;
  c[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_WAVES] = 5e-8;
  c[GOPT_GK_CONV_BWD * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1 / 30e12;
  c[GOPT_GK_CONV_DW * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1 / 2e12;
  c[GOPT_GK_GEMM * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1 / 50e12;
  c[GOPT_GK_GEMM * GOPT_GF_PER_KIND + GOPT_GF_WAVES] = 8e-8;
  c[GOPT_GK_BMM * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1 / 25e12;
  c[GOPT_GK_RNN * GOPT_GF_PER_KIND + GOPT_GF_WAVES] = 6e-6;
}

/* Sets each entry's time from the rows the loader made of it (rows follow the file order: each
 * layer's forward then forward+backward, then the micro entries). */
static void fill_times(json_t *root, const gopt_gpu_data *d, const double *coef) {
  json_t *layers = json_object_get(json_object_get(json_object_get(root, "models"), "net"), "layers_b32");
  json_t *micro = json_object_get(root, "micro");
  size_t r = 0;
  for (size_t i = 0; i < json_array_size(layers) && r < d->n; i++) {
    json_t *e = json_array_get(layers, i);
    json_object_set_new(e, "fwd_gpu_ms", json_real(gopt_gpu_time(coef, d->rows[r++].phi) * 1e3));
    json_object_set_new(e, "fwdbwd_gpu_ms", json_real(gopt_gpu_time(coef, d->rows[r++].phi) * 1e3));
  }
  for (size_t i = 0; i < json_array_size(micro) && r < d->n; i++)
    json_object_set_new(json_array_get(micro, i), "gpu_ms", json_real(gopt_gpu_time(coef, d->rows[r++].phi) * 1e3));
  CHECK_EQ_INT(r, d->n);
}

static void test_synthetic_device(void) {
  char path[96];
  snprintf(path, sizeof path, "%s/synthetic.json", tmpdir);
  json_t *root = synthetic_entries();
  json_t *layers = json_object_get(json_object_get(json_object_get(root, "models"), "net"), "layers_b32");
  for (size_t i = 0; i < json_array_size(layers); i++) { /* placeholder times for the first load */
    json_object_set_new(json_array_get(layers, i), "fwd_gpu_ms", json_real(1));
    json_object_set_new(json_array_get(layers, i), "fwdbwd_gpu_ms", json_real(1));
  }
  for (size_t i = 0; i < json_array_size(json_object_get(root, "micro")); i++)
    json_object_set_new(json_array_get(json_object_get(root, "micro"), i), "gpu_ms", json_real(1));
  json_dump_file(root, path, 0);
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  CHECK_EQ_INT(gopt_gpu_data_load(path, NULL, &d, &err), 0);
  if (!d) {
    fprintf(stderr, "%s\n", err.msg);
    json_decref(root);
    return;
  }
  CHECK_EQ_INT(d->skipped, 0);
  double want[GOPT_GPU_NCOEF], got[GOPT_GPU_NCOEF];
  truth(want);
  fill_times(root, d, want);
  json_dump_file(root, path, 0);
  gopt_gpu_data_free(d);
  d = NULL;
  CHECK_EQ_INT(gopt_gpu_data_load(path, NULL, &d, &err), 0);
  CHECK(d && gopt_gpu_fit(d, -1, 15, got, &err) == 0);
  if (d) {
    double worst = 0;
    for (size_t i = 0; i < d->n; i++) {
      double e = fabs(gopt_gpu_time(got, d->rows[i].phi) / d->rows[i].seconds - 1);
      if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 1e-6, "worst relative error %g", worst);
    /* the coefficients come back: every one that carries at least 1% of some row's time */
    for (int j = 0; j < GOPT_GPU_NCOEF; j++) {
      double share = 0;
      for (size_t i = 0; i < d->n; i++) {
        double s = want[j] * d->rows[i].phi[j] / d->rows[i].seconds;
        if (s > share) share = s;
      }
      if (share < 0.01) continue;
      CHECK_MSG(fabs(got[j] / want[j] - 1) < 1e-4, "%s.%s: %g vs %g", gopt_gpu_kind_name(j / GOPT_GF_PER_KIND),
                gopt_gpu_feature_name(j % GOPT_GF_PER_KIND), got[j], want[j]);
    }
  }
  gopt_gpu_data_free(d);
  json_decref(root);
  unlink(path);
}

/* Features of single entries against hand arithmetic. */
static void test_features(void) {
  char path[96];
  snprintf(path, sizeof path, "%s/feat.json", tmpdir);
  write_text(path,
             "{\"models\": {\"m\": {\"layers_b1\": ["
             "{\"layer\": \"Conv2d\", \"attrs\": \"64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False\","
             " \"in\": [[2, 64, 8, 8]], \"fwd_gpu_ms\": 0.01},"
             "{\"layer\": \"Conv2d\", \"attrs\": \"32, 32, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=32, bias=False\","
             " \"in\": [[1, 32, 8, 8]], \"fwd_gpu_ms\": 0.01},"
             "{\"layer\": \"Dropout\", \"attrs\": \"p=0.5\", \"in\": [[1, 8]], \"fwd_gpu_ms\": 0.001}]}},"
             " \"micro\": [{\"op\": \"MatMul\", \"M\": 300, \"N\": 200, \"K\": 64, \"gpu_ms\": 0.01},"
             " {\"op\": \"LSTM\", \"batch\": 4, \"hidden\": 16, \"input\": 8, \"seq\": 7, \"gpu_ms\": 0.05}]}");
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  CHECK_EQ_INT(gopt_gpu_data_load(path, NULL, &d, &err), 0);
  if (d && d->n == 4) {
    const double *c = d->rows[0].phi + GOPT_GK_CONV * GOPT_GF_PER_KIND;
    /* 2 * N*Cout*H*W * Cin*9 = 2 * 2*64*64 * 576 */
    CHECK_NEAR(c[GOPT_GF_FLOPS_ALT], 2.0 * 2 * 64 * 64 * 576, 0);
    CHECK_NEAR(c[GOPT_GF_FLOPS], 0, 0);
    /* M = 2*64 = 128 rows, N = 64: one tile, one wave, K = 576 */
    CHECK_NEAR(c[GOPT_GF_WAVES], 576, 0);
    CHECK_EQ_INT(d->rows[1].kind, GOPT_GK_CONV_DW);
    CHECK_NEAR(d->rows[1].phi[GOPT_GK_CONV_DW * GOPT_GF_PER_KIND + GOPT_GF_FLOPS], 2.0 * 32 * 16 * 9, 0);
    CHECK_EQ_INT(d->skipped, 1); /* Dropout: no kernel */
    const double *g = d->rows[2].phi + GOPT_GK_GEMM * GOPT_GF_PER_KIND;
    CHECK_NEAR(g[GOPT_GF_FLOPS], 2.0 * 300 * 200 * 64, 0);
    CHECK_NEAR(g[GOPT_GF_WAVES], 64, 0); /* 3 x 2 tiles: one wave over K = 64 */
    CHECK_NEAR(g[GOPT_GF_BYTES], 4.0 * (300 * 64 + 64 * 200 + 300 * 200), 0);
    CHECK_NEAR(d->rows[3].phi[GOPT_GK_RNN * GOPT_GF_PER_KIND + GOPT_GF_WAVES], 7, 0);
  } else {
    CHECK_MSG(0, "expected 4 rows: %s", err.msg);
  }
  gopt_gpu_data_free(d);
  unlink(path);
}

/* A Linear layer row run forward + backward: which GEMM FLOPs are "alternative" and that the
 * bias gradient is not costed as a convolution epilogue's backward. */
static void test_linear_backward(void) {
  char path[96];
  snprintf(path, sizeof path, "%s/linear.json", tmpdir);
  write_text(path,
             "{\"models\": {\"m\": {\"layers_b32\": ["
             "{\"layer\": \"Linear\", \"attrs\": \"in_features=64, out_features=48, bias=True\","
             " \"in\": [[32, 64]], \"fwd_gpu_ms\": 0.01, \"fwdbwd_gpu_ms\": 0.03}]}}}");
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  CHECK_EQ_INT(gopt_gpu_data_load(path, NULL, &d, &err), 0);
  if (d && d->n == 2) {
    double mnk = 2.0 * 32 * 48 * 64;
    const double *f = d->rows[0].phi + GOPT_GK_GEMM * GOPT_GF_PER_KIND;
    const double *b = d->rows[1].phi + GOPT_GK_GEMM * GOPT_GF_PER_KIND;
    CHECK_NEAR(f[GOPT_GF_FLOPS_ALT], mnk + 32 * 48, 0); /* with the bias add */
    CHECK_NEAR(f[GOPT_GF_FLOPS], 0, 0);
    CHECK_NEAR(b[GOPT_GF_N], 3, 0);           /* forward, dX = dY W, dW = dY^T X */
    CHECK_NEAR(b[GOPT_GF_FLOPS_ALT], mnk + 32 * 48, 0); /* the forward's only */
    CHECK_NEAR(b[GOPT_GF_FLOPS], 2 * mnk, 0);
    CHECK_NEAR(d->rows[1].phi[GOPT_GK_CONV_EPILOGUE_BWD * GOPT_GF_PER_KIND + GOPT_GF_N], 0, 0);
    CHECK(d->rows[1].phi[GOPT_GK_NORM * GOPT_GF_PER_KIND + GOPT_GF_N] >= 1); /* the bias's ReduceSum */
  } else {
    CHECK_MSG(0, "expected 2 rows: %s", err.msg);
  }
  gopt_gpu_data_free(d);
  unlink(path);
}

/* An in-memory data set: 20 elementwise layer rows timed at twice the truth (2 us + bytes at
 * 3 TB/s) and 5 whole-model batch-32 rows of many such kernels timed at the truth. */
static gopt_gpu_data *weight_data(void) {
  gopt_gpu_data *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->n_models = 5;
  d->rows = calloc(25, sizeof *d->rows);
  d->models = calloc(5, sizeof *d->models);
  d->has_model_rows = calloc(5, sizeof *d->has_model_rows);
  if (!d->rows || !d->models || !d->has_model_rows) {
    gopt_gpu_data_free(d);
    return NULL;
  }
  const int n = GOPT_GK_ELTWISE * GOPT_GF_PER_KIND + GOPT_GF_N, by = n - GOPT_GF_N + GOPT_GF_BYTES;
  for (int i = 0; i < 25; i++) {
    gopt_gpu_row *r = &d->rows[d->n++];
    int model = i < 20 ? i % 5 : i - 20;
    r->phi[n] = i < 20 ? 1 : 40 + 30 * model;
    r->phi[by] = i < 20 ? 1e6 * (1 + 7 * i) : 3e8 * (1 + (model * 3) % 5);
    r->seconds = (i < 20 ? 2 : 1) * (2e-6 * r->phi[n] + r->phi[by] / 3e12);
    r->model = model;
    r->what = i < 20 ? GOPT_GPU_ROW_FWD : GOPT_GPU_ROW_B32;
    r->kind = i < 20 ? GOPT_GK_ELTWISE : -1;
    r->count = 1;
    d->has_model_rows[model] = 1;
    snprintf(d->models[model], sizeof d->models[model], "m%d", model);
  }
  return d;
}

static void test_select_weight(void) {
  gopt_gpu_data *d = weight_data();
  CHECK(d != NULL);
  if (!d) return;
  gopt_error err = {0};
  static const double grid[] = {1, 4, 16, 64};
  double w = 0;
  CHECK_EQ_INT(gopt_gpu_select_weight(d, -1, grid, 4, &w, &err), 0);
  CHECK_NEAR(w, 64, 0);
  CHECK_EQ_INT(gopt_gpu_select_weight(d, 2, grid, 4, &w, &err), 0);
  CHECK_NEAR(w, 64, 0);
  double a[GOPT_GPU_NCOEF], b[GOPT_GPU_NCOEF];
  CHECK_EQ_INT(gopt_gpu_fit2(d, 1, 3, 8, a, &err), 0);
  for (size_t i = 0; i < d->n; i++)
    if (d->rows[i].model == 3) d->rows[i].model = 1;
  CHECK_EQ_INT(gopt_gpu_fit(d, 1, 8, b, &err), 0);
  for (int j = 0; j < GOPT_GPU_NCOEF; j++) CHECK_NEAR(a[j], b[j], 1e-12 * fabs(b[j]));
  /* without models 1 and 3 the fit sits between the layer rows' 2x and the models' 1x */
  double k = a[GOPT_GK_ELTWISE * GOPT_GF_PER_KIND + GOPT_GF_BYTES] * 3e12;
  CHECK_MSG(k > 1 && k < 2, "bytes coefficient x 3e12 = %g", k);
  gopt_gpu_data_free(d);
}

/* A bad file: load fails with one line that contains every expected piece. */
static void bad(const char *name, const char *text, const char *want) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  if (text) write_text(path, text);
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  CHECK(gopt_gpu_data_load(path, NULL, &d, &err) != 0 && d == NULL);
  CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%s: got '%s', want '%s'",
            name, err.msg, want);
  if (text) unlink(path);
}

static void test_bad_files(void) {
  bad("missing.json", NULL, "cannot open");
  bad("trunc.json", "{\"models\": {\"a\": {\"layers_b1\": [{\"layer\": \"ReLU\", ", "line 1");
  bad("foreign.json", "{\"devices\": [{\"preset\": \"H100\"}]}", "not a GPU measurements file");
  bad("neg.json", "{\"micro\": [{\"op\": \"Add\", \"numel\": 4, \"gpu_ms\": -1}]}", "micro[0]: \"gpu_ms\" must be a number > 0");
  bad("notime.json", "{\"micro\": [{\"op\": \"Add\", \"numel\": 4}]}", "micro[0]: missing \"gpu_ms\"");
  bad("layer.json", "{\"models\": {\"r\": {\"layers_b32\": [{\"layer\": \"ReLU\", \"attrs\": \"\", \"in\": [[1, 2]], \"fwd_gpu_ms\": 0.1},"
      " {\"layer\": \"Conv2d\", \"attrs\": \"x\", \"in\": [[1, 3, 8, 8]], \"fwd_gpu_ms\": 0.1}]}}}",
      "models.r.layers_b32[1]: Conv2d: cannot read the convolution attributes");
  bad("shape.json", "{\"models\": {\"r\": {\"layers_b1\": [{\"layer\": \"ReLU\", \"attrs\": \"\", \"in\": [[1, -2]], \"fwd_gpu_ms\": 0.1}]}}}",
      "models.r.layers_b1[0]: ReLU: \"in\"[0] must be a shape");
  bad("count.json", "{\"models\": {\"r\": {\"layers_b1\": [{\"layer\": \"ReLU\", \"attrs\": \"\", \"in\": [[4]], \"count\": 0, \"fwd_gpu_ms\": 0.1}]}}}",
      "models.r.layers_b1[0]: \"count\" must be an integer >= 1");
  bad("empty.json", "{\"micro\": []}", "no measured entry");
  bad("inplace.json", "{\"inplace_copy\": 1, \"micro\": [{\"op\": \"Add\", \"numel\": 4, \"gpu_ms\": 1}]}",
      "\"inplace_copy\" must be true or false");
}

/* Loads text as a measurements file with model directories dirs and flags; NULL on an error. */
static gopt_gpu_data *load_text(const char *name, const char *text, const char *const *dirs, int nd,
                                unsigned flags) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  write_text(path, text);
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  int rc = gopt_gpu_data_load_dirs(path, dirs, nd, flags, &d, &err);
  CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
  unlink(path);
  return d;
}

/* Whole-model rows from a second model directory (the extra calibration set's vgg13, found after
 * a directory without it), and overlapping kernel sums: the batch-32 one (above the eager wall
 * time) replaced by the graph replay; the training one, below its eager time, left out all the
 * same because the batch-32 sum is above 1.1 x the replay; both named. */
static void test_model_dirs_overlap(void) {
  static const char *const dirs[2] = {"corpus", "tests/cost/data/calib"};
  gopt_gpu_data *d = load_text("dirs.json", "{\"models\": {\"vgg13\": {\"infer_b1_graph_ms\": 1.4, "
                               "\"infer_b32_kernel_ms\": 30, \"infer_b32_ms\": 20, \"infer_b32_graph_ms\": 18, "
                               "\"train_b32_kernel_ms\": 35, \"train_b32_ms\": 40}}}", dirs, 2, 0);
  if (!d) return;
  CHECK(d->n_models == 1 && d->has_model_rows[0]);
  CHECK_EQ_INT((int)d->overlapped, 2);
  CHECK_MSG(strstr(d->overlap_note, "vgg13.infer_b32_kernel_ms (graph replay used)") &&
            strstr(d->overlap_note, "vgg13.train_b32_kernel_ms"), "%s", d->overlap_note);
  int b1 = 0, b32 = 0, train = 0;
  for (size_t i = 0; i < d->n; i++) {
    b1 += d->rows[i].what == GOPT_GPU_ROW_B1;
    train += d->rows[i].what == GOPT_GPU_ROW_TRAIN;
    if (d->rows[i].what == GOPT_GPU_ROW_B32) {
      b32++;
      CHECK_NEAR(d->rows[i].seconds, 18e-3, 1e-12);
      /* vgg13 at batch 32: ~32 x 11.3 GFLOP x 2 of convolutions and GEMMs */
      double fl = 0;
      for (int k = 0; k < GOPT_GK_COUNT; k++)
        fl += d->rows[i].phi[k * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] + d->rows[i].phi[k * GOPT_GF_PER_KIND + GOPT_GF_FLOPS_ALT];
      CHECK_MSG(fl > 32 * 2 * 10e9 && fl < 32 * 2 * 12.5e9, "vgg13 batch-32 FLOPs %g", fl);
    }
  }
  CHECK(b1 == 1 && b32 == 1 && train == 0);
  gopt_gpu_data_free(d);
  /* without the second directory there is no whole-model row */
  d = load_text("dirs1.json", "{\"models\": {\"vgg13\": {\"infer_b1_graph_ms\": 1.4, \"layers_b1\": "
                "[{\"layer\": \"ReLU\", \"attrs\": \"\", \"in\": [[4]], \"fwd_gpu_ms\": 0.1}]}}}", dirs, 1, 0);
  if (d) CHECK(!d->has_model_rows[0] && d->n == 1);
  gopt_gpu_data_free(d);
  /* a malformed eager time of a model found in the second directory: one line naming file and entry */
  char path[128];
  snprintf(path, sizeof path, "%s/badeager.json", tmpdir);
  write_text(path, "{\"models\": {\"vgg13\": {\"infer_b32_kernel_ms\": 20, \"infer_b32_ms\": \"x\"}}}");
  gopt_error err = {0};
  d = NULL;
  CHECK(gopt_gpu_data_load_dirs(path, dirs, 2, 0, &d, &err) != 0 && d == NULL);
  CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "models.vgg13: \"infer_b32_ms\" must be a number > 0") &&
            !strchr(err.msg, '\n'), "%s", err.msg);
  unlink(path);
}

/* An in-place ReLU's forward+backward row: with "inplace_copy" its x * 1 copy adds two
 * elementwise kernels (the multiply and its gradient); --layer-harness adds the loss reduction (one
 * norm kernel); forward rows change with neither. */
static void test_inplace_harness(void) {
  static const char row[] = "{\"layer\": \"ReLU\", \"attrs\": \"inplace=True\", \"in\": [[32, 64, 56, 56]], "
                            "\"fwd_gpu_ms\": 0.02, \"fwdbwd_gpu_ms\": 0.1}";
  char text[512];
  double n_elt[4][2], n_norm[4][2];
  for (int v = 0; v < 4; v++) {
    snprintf(text, sizeof text, "{\"inplace_copy\": %s, \"models\": {\"m\": {\"layers_b32\": [%s]}}}",
             v & 1 ? "true" : "false", row);
    gopt_gpu_data *d = load_text("inplace.json", text, NULL, 0, v & 2 ? GOPT_GPU_LOAD_HARNESS : 0);
    if (!d) return;
    CHECK_EQ_INT((int)d->n, 2);
    for (int r = 0; r < 2 && r < (int)d->n; r++) {
      int w = d->rows[r].what == GOPT_GPU_ROW_FWDBWD;
      n_elt[v][w] = d->rows[r].phi[GOPT_GK_ELTWISE * GOPT_GF_PER_KIND + GOPT_GF_N];
      n_norm[v][w] = d->rows[r].phi[GOPT_GK_NORM * GOPT_GF_PER_KIND + GOPT_GF_N];
    }
    gopt_gpu_data_free(d);
  }
  for (int v = 1; v < 4; v++) CHECK(n_elt[v][0] == n_elt[0][0] && n_norm[v][0] == n_norm[0][0]);
  CHECK_NEAR(n_elt[1][1] - n_elt[0][1], 2, 0);
  CHECK_NEAR(n_norm[1][1], n_norm[0][1], 0);
  CHECK_NEAR(n_norm[2][1] - n_norm[0][1], 1, 0);
  CHECK_NEAR(n_elt[2][1], n_elt[0][1], 0);
  CHECK_NEAR(n_elt[3][1] - n_elt[0][1], 2, 0);
}

static void test_json_and_scaling(void) {
  gopt_error err = {0};
  gopt_cluster *c = NULL, *c2 = NULL;
  CHECK_EQ_INT(gopt_cluster_from_json("{\"devices\": [{\"preset\": \"H100\", \"gpu_model\": {\"conv.n\": 2e-6, "
                                      "\"gemm.flops\": 2e-14}, \"gpu_version\": \"t1\", \"gpu_half_speedup\": 2.5}]}",
                                      "g.json", &c, &err), 0);
  if (c) {
    const gopt_device *d = &c->devices[0];
    CHECK(d->gpu_model && !strcmp(d->gpu_version, "t1") && d->gpu_half_speedup == 2.5);
    /* a bf16 GEMM: its FLOP term 2.5x faster, its floor not; a bf16 ReLU unchanged */
    double phi[GOPT_GPU_NCOEF] = {0};
    phi[GOPT_GK_GEMM * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = 1e9;
    phi[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_N] = 1;
    CHECK_NEAR(gopt_gpu_time_half(d->gpu_coef, phi, d->gpu_half_speedup), 2e-6 + 2e-14 * 1e9 / 2.5, 1e-18);
    CHECK_NEAR(d->gpu_coef[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_N], 2e-6, 0);
    CHECK_NEAR(d->gpu_coef[GOPT_GK_CONV * GOPT_GF_PER_KIND + GOPT_GF_FLOPS], 0, 0); /* not named: 0 */
    char *txt = gopt_cluster_to_json(c);
    CHECK(txt && gopt_cluster_from_json(txt, "back", &c2, &err) == 0);
    if (c2) CHECK(memcmp(c2->devices[0].gpu_coef, d->gpu_coef, sizeof d->gpu_coef) == 0 &&
                  c2->devices[0].gpu_half_speedup == 2.5);
    free(txt);
  }
  gopt_cluster_free(c);
  gopt_cluster_free(c2);
  c = NULL;
  CHECK(gopt_cluster_from_json("{\"devices\": [{\"preset\": \"H100\", \"gpu_model\": {\"conv.speed\": 1}}]}", "b.json",
                               &c, &err) != 0 &&
        strstr(err.msg, "b.json: devices[0]: gpu_model: \"conv.speed\""));
  gopt_cluster_free(c);
  c = NULL; /* "gpu_model": false turns the model off: the roofline */
  CHECK_EQ_INT(gopt_cluster_from_json("{\"devices\": [{\"preset\": \"V100\", \"gpu_model\": false}]}", "r.json", &c,
                                      &err), 0);
  if (c) {
    const gopt_device *r = &c->devices[0];
    CHECK(!r->gpu_model);
    CHECK_NEAR(gopt_device_kernel_time(r, GOPT_OPC_CONV, GOPT_DT_FLOAT, 15.7e12, 0), r->launch_s + 1.0 / r->eff[GOPT_OPC_CONV], 1e-9);
  }
  gopt_cluster_free(c);
  /* presets: H100 carries the shipped calibration, V100 the same scaled by its data sheet */
  const gopt_device *h = gopt_device_find_preset("H100"), *v = gopt_device_find_preset("V100");
  CHECK(h->gpu_model && v->gpu_model && !strcmp(h->gpu_version, gopt_gpu_h100_version));
  int j = GOPT_GK_GEMM * GOPT_GF_PER_KIND;
  CHECK_NEAR(v->gpu_coef[j + GOPT_GF_FLOPS], h->gpu_coef[j + GOPT_GF_FLOPS] * 67e12 / 15.7e12, 1e-25);
  CHECK_NEAR(v->gpu_coef[j + GOPT_GF_BYTES], h->gpu_coef[j + GOPT_GF_BYTES] * 3350e9 / 900e9, 1e-25);
  CHECK_NEAR(v->gpu_coef[j + GOPT_GF_N], h->gpu_coef[j + GOPT_GF_N] * 5.0 / 3.0, 1e-15);
}

int main(void) {
  if (!mkdtemp(tmpdir)) return 1;
  test_synthetic_device();
  test_features();
  test_linear_backward();
  test_select_weight();
  test_bad_files();
  test_model_dirs_overlap();
  test_inplace_harness();
  test_json_and_scaling();
  rmdir(tmpdir);
  return check_exit("test_gpu_cost");
}
