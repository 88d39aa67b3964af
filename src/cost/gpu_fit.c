/* gpu_fit.c: the GPU measurements file (what tools/gpu_profile.py writes) read into feature rows,
 * with one-line errors naming the file and the entry, and the non-negative least-squares fit of
 * the GPU cost model's coefficients to them (gopt/gpu_cost.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/gpu_internal.h"

void gopt_gpu_data_free(gopt_gpu_data *d) {
  if (!d) return;
  free(d->rows);
  free(d->models);
  free(d->has_model_rows);
  free(d);
}

static gopt_gpu_row *add_row(gopt_gpu_data *d) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 256;
    gopt_gpu_row *r = realloc(d->rows, cap * sizeof *r);
    if (!r) return NULL;
    d->rows = r;
    d->cap = cap;
  }
  gopt_gpu_row *r = &d->rows[d->n++];
  memset(r, 0, sizeof *r);
  r->count = 1;
  return r;
}

/* A new row of features phi (GOPT_GPU_NCOEF of them, copied) measured at ms milliseconds; NULL
 * when out of memory. */
static gopt_gpu_row *add_measured(gopt_gpu_data *d, const double *phi, double ms, int model, int what,
                                  int kind) {
  gopt_gpu_row *r = add_row(d);
  if (!r) return NULL;
  memcpy(r->phi, phi, sizeof r->phi);
  r->seconds = ms * 1e-3;
  r->model = model;
  r->what = what;
  r->kind = kind;
  return r;
}

/* A measured time in ms at key: absent (0, *ms = 0), or a finite number > 0 (else an error). */
static int time_ms(json_t *o, const char *key, double *ms, const char *file, const char *what,
                   gopt_error *err) {
  json_t *x = json_object_get(o, key);
  *ms = 0;
  if (!x) return 0;
  if (!json_is_number(x) || !(json_number_value(x) > 0) || !isfinite(json_number_value(x)))
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"%s\" must be a number > 0 (milliseconds)",
                          file, what, key);
  *ms = json_number_value(x);
  return 0;
}

/* Row label of a layer: the module type, convolutions by group structure. */
static void layer_label(char *out, size_t cap, const char *layer, int kind) {
  const char *sub = kind == GOPT_GK_CONV ? " dense" : kind == GOPT_GK_CONV_GROUPED ? " grouped"
                    : kind == GOPT_GK_CONV_DW ? " depthwise" : "";
  if (strncmp(layer, "Conv", 4)) sub = "";
  snprintf(out, cap, "%s%s", layer, sub);
}

static int load_layers(gopt_gpu_data *d, json_t *arr, int model, int batch, unsigned flags,
                       const char *file, const char *what, gopt_error *err) {
  if (!json_is_array(arr))
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: must be an array of layer rows", file, what);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *row = json_array_get(arr, i);
    char w[160];
    snprintf(w, sizeof w, "%s: %s[%zu]", file, what, i);
    if (!json_is_object(row)) return gopt_error_set(err, GOPT_EPARSE, "%s: must be an object", w);
    double fwd, fb;
    json_t *cnt = json_object_get(row, "count");
    if (cnt && (!json_is_integer(cnt) || json_integer_value(cnt) < 1))
      return gopt_error_set(err, GOPT_EPARSE, "%s: \"count\" must be an integer >= 1", w);
    int rc = time_ms(row, "fwd_gpu_ms", &fwd, file, w + strlen(file) + 2, err);
    if (!rc) rc = time_ms(row, "fwdbwd_gpu_ms", &fb, file, w + strlen(file) + 2, err);
    if (rc) return rc;
    for (int bwd = 0; bwd < 2; bwd++) {
      double ms = bwd ? fb : fwd;
      if (!(ms > 0)) continue;
      double phi[GOPT_GPU_NCOEF] = {0};
      int kind = -1;
      rc = gpu_layer_features(row, bwd, flags, phi, &kind, w, err);
      if (rc < 0) return rc;
      if (rc == 0) {
        d->skipped++;
        break;
      }
      gopt_gpu_row *r = add_measured(d, phi, ms, model, bwd ? GOPT_GPU_ROW_FWDBWD : GOPT_GPU_ROW_FWD, kind);
      if (!r) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", file);
      r->count = cnt ? (int)json_integer_value(cnt) : 1;
      r->batch = batch;
      layer_label(r->label, sizeof r->label, json_string_value(json_object_get(row, "layer")), kind);
    }
  }
  return 0;
}

/* The measured time of whole-model key k of mo into *ms (0: no row). A kernel sum above 1.05 x
 * the same step's eager wall time counts overlapping kernels: the CUDA-graph replay stands in
 * for the batch-32 forward where there is one, else the row is left out; both are noted. So is a
 * training kernel sum of a model whose batch-32 forward kernel sum is above 1.1 x its replay:
 * the same kernels (cuDNN's grouped convolutions on several streams) overlap there too, even when
 * the sum stays below the eager step (two separately timed figures: dense nets measure 0.97-1.06,
 * grouped ones 1.13-1.95). */
static int model_time(gopt_gpu_data *d, json_t *mo, int m, int k, double *ms, const char *file,
                      const char *w, gopt_error *err) {
  static const char *const keys[4] = {"infer_b1_graph_ms", "infer_b32_kernel_ms",
                                      "train_b32_kernel_ms", "infer_b32_bf16_kernel_ms"};
  static const char *const wall[4] = {NULL, "infer_b32_ms", "train_b32_ms", NULL};
  double eager = 0, replay = 0, fsum = 0, freplay = 0;
  int rc = time_ms(mo, keys[k], ms, file, w, err);
  if (!rc && wall[k]) rc = time_ms(mo, wall[k], &eager, file, w, err);
  if (!rc && k == 1) rc = time_ms(mo, "infer_b32_graph_ms", &replay, file, w, err);
  if (!rc && k == 2) rc = time_ms(mo, "infer_b32_kernel_ms", &fsum, file, w, err);
  if (!rc && k == 2) rc = time_ms(mo, "infer_b32_graph_ms", &freplay, file, w, err);
  int over = (eager > 0 && *ms > 1.05 * eager) || (freplay > 0 && fsum > 1.1 * freplay);
  if (rc || !(*ms > 0) || !over) return rc;
  size_t len = strlen(d->overlap_note);
  snprintf(d->overlap_note + len, sizeof d->overlap_note - len, "%s%s.%s%s", len ? ", " : "",
           d->models[m], keys[k], replay > 0 ? " (graph replay used)" : "");
  d->overlapped++;
  *ms = replay;
  return 0;
}

/* The whole-model rows of model m (its ONNX in the first of dirs that has it). */
static int load_totals(gopt_gpu_data *d, json_t *mo, int m, const char *const *dirs, int n_dirs,
                       const char *file, gopt_error *err) {
  static const int what[4] = {GOPT_GPU_ROW_B1, GOPT_GPU_ROW_B32, GOPT_GPU_ROW_TRAIN, GOPT_GPU_ROW_BF16};
  char path[512], w[160];
  int found = 0;
  for (int i = 0; i < n_dirs && !found; i++) {
    snprintf(path, sizeof path, "%s/%s.onnx", dirs[i], d->models[m]);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    found = f != NULL;
  }
  if (!found) return 0;
  snprintf(w, sizeof w, "models.%s", d->models[m]);
  for (int k = 0; k < 4; k++) {
    double ms;
    int rc = model_time(d, mo, m, k, &ms, file, w, err);
    if (rc) return rc;
    if (!(ms > 0)) continue;
    gopt_gpu_row *r = add_row(d);
    if (!r) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", file);
    rc = gopt_gpu_model_features(path, k ? d->batch : 1, k == 2, r->phi, err);
    if (rc) {
      d->n--;
      return rc;
    }
    r->seconds = ms * 1e-3;
    r->model = m;
    r->what = what[k];
    r->kind = -1;
    snprintf(r->label, sizeof r->label, "%s", d->models[m]);
    d->has_model_rows[m] = 1;
  }
  return 0;
}

static int load_micro(gopt_gpu_data *d, json_t *arr, const char *file, gopt_error *err) {
  if (!arr) return 0;
  if (!json_is_array(arr))
    return gopt_error_set(err, GOPT_EPARSE, "%s: micro: must be an array", file);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *row = json_array_get(arr, i);
    char w[96];
    snprintf(w, sizeof w, "%s: micro[%zu]", file, i);
    if (!json_is_object(row)) return gopt_error_set(err, GOPT_EPARSE, "%s: must be an object", w);
    double ms;
    int rc = time_ms(row, "gpu_ms", &ms, file, w + strlen(file) + 2, err);
    if (rc) return rc;
    if (!(ms > 0)) return gopt_error_set(err, GOPT_EPARSE, "%s: missing \"gpu_ms\"", w);
    double phi[GOPT_GPU_NCOEF] = {0};
    int kind = -1;
    rc = gpu_micro_features(row, phi, &kind, w, err);
    if (rc < 0) return rc;
    if (rc == 0) {
      d->skipped++;
      continue;
    }
    gopt_gpu_row *r = add_measured(d, phi, ms, -1, GOPT_GPU_ROW_MICRO, kind);
    if (!r) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", file);
    snprintf(r->label, sizeof r->label, "micro %s", json_string_value(json_object_get(row, "op")));
  }
  return 0;
}

static int load_models(gopt_gpu_data *d, json_t *models, const char *const *dirs, int n_dirs,
                       unsigned flags, const char *file, gopt_error *err) {
  size_t nm = json_object_size(models);
  d->models = calloc(nm ? nm : 1, sizeof *d->models);
  d->has_model_rows = calloc(nm ? nm : 1, sizeof *d->has_model_rows);
  if (!d->models || !d->has_model_rows) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", file);
  const char *name;
  json_t *mo;
  json_object_foreach(models, name, mo) {
    int m = d->n_models++;
    snprintf(d->models[m], sizeof d->models[m], "%s", name);
    if (!json_is_object(mo))
      return gopt_error_set(err, GOPT_EPARSE, "%s: models.%s: must be an object", file, name);
    for (int b = 0; b < 2; b++) {
      const char *key = b ? "layers_b32" : "layers_b1";
      json_t *arr = json_object_get(mo, key);
      char w[128];
      snprintf(w, sizeof w, "models.%s.%s", name, key);
      int rc = arr ? load_layers(d, arr, m, b ? 32 : 1, flags, file, w, err) : 0;
      if (rc) return rc;
    }
    int rc = load_totals(d, mo, m, dirs, n_dirs, file, err);
    if (rc) return rc;
  }
  return 0;
}

int gopt_gpu_data_load(const char *path, const char *model_dir, gopt_gpu_data **out,
                       gopt_error *err) {
  return gopt_gpu_data_load_dirs(path, &model_dir, model_dir ? 1 : 0, 0, out, err);
}

int gopt_gpu_data_load_dirs(const char *path, const char *const *model_dirs, int n_dirs,
                            unsigned flags, gopt_gpu_data **out, gopt_error *err) {
  *out = NULL;
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) {
    FILE *f = fopen(path, "rb");
    if (!f) return gopt_error_set(err, GOPT_EIO, "%s: cannot open", path);
    fclose(f);
    return gopt_error_set(err, GOPT_EPARSE, "%s: line %d: %s", path, je.line, je.text);
  }
  json_t *models = json_object_get(root, "models"), *micro = json_object_get(root, "micro");
  int rc = 0;
  gopt_gpu_data *d = calloc(1, sizeof *d);
  if (!d) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  } else if (!json_is_object(root) || (!json_is_object(models) && !json_is_array(micro))) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: not a GPU measurements file (needs a \"models\" "
                                          "object or a \"micro\" array; see gopt calibrate --help)",
                        path);
  } else {
    const char *dev = json_string_value(json_object_get(root, "device"));
    json_t *jb = json_object_get(root, "batch");
    d->batch = 32;
    if (jb && (!json_is_integer(jb) || json_integer_value(jb) < 1 || json_integer_value(jb) > 65536))
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: \"batch\" must be an integer in [1, 65536]", path);
    else if (jb)
      d->batch = (int)json_integer_value(jb);
    json_t *jc = json_object_get(root, "inplace_copy");
    if (!rc && jc && !json_is_boolean(jc))
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: \"inplace_copy\" must be true or false", path);
    snprintf(d->device, sizeof d->device, "%s", dev ? dev : "");
    if (!rc)
      rc = models ? (json_is_object(models)
                       ? load_models(d, models, model_dirs, n_dirs,
                                     flags | (json_is_true(jc) ? GPU_ROW_INPLACE_COPY : 0u), path, err)
                       : gopt_error_set(err, GOPT_EPARSE, "%s: models: must be an object", path))
                : 0;
    if (!rc) rc = load_micro(d, micro, path, err);
    if (!rc && !d->n) rc = gopt_error_set(err, GOPT_EPARSE, "%s: no measured entry gopt can use", path);
  }
  json_decref(root);
  if (rc) gopt_gpu_data_free(d);
  else *out = d;
  return rc;
}

int gopt_gpu_data_append(gopt_gpu_data *d, const gopt_gpu_data *more, const char *more_path,
                         gopt_error *err) {
  if (more->batch != d->batch)
    return gopt_error_set(err, GOPT_EPARSE, "%s: \"batch\" %d differs from the first file's %d",
                          more_path, more->batch, d->batch);
  for (int a = 0; a < more->n_models; a++)
    for (int b = 0; b < d->n_models; b++)
      if (!strcmp(more->models[a], d->models[b]))
        return gopt_error_set(err, GOPT_EPARSE, "%s: models.%s: already measured in an earlier file",
                              more_path, more->models[a]);
  int nm = d->n_models + more->n_models;
  char(*names)[64] = realloc(d->models, (size_t)(nm ? nm : 1) * sizeof *names);
  if (names) d->models = names;
  int *has = names ? realloc(d->has_model_rows, (size_t)(nm ? nm : 1) * sizeof *has) : NULL;
  if (!has) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", more_path);
  d->has_model_rows = has;
  memcpy(d->models + d->n_models, more->models, (size_t)more->n_models * sizeof *names);
  memcpy(d->has_model_rows + d->n_models, more->has_model_rows, (size_t)more->n_models * sizeof *has);
  for (size_t i = 0; i < more->n; i++) {
    gopt_gpu_row *r = add_row(d);
    if (!r) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", more_path);
    *r = more->rows[i];
    if (r->model >= 0) r->model += d->n_models;
  }
  d->n_models = nm;
  d->skipped += more->skipped;
  d->overlapped += more->overlapped;
  size_t len = strlen(d->overlap_note);
  if (more->overlap_note[0])
    snprintf(d->overlap_note + len, sizeof d->overlap_note - len, "%s%s", len ? ", " : "", more->overlap_note);
  return 0;
}

/* Whether row x is left out of a fit that excludes models ex1 and ex2 (-1: none). */
static int left_out(const gopt_gpu_row *x, int ex1, int ex2) {
  return x->model >= 0 && (x->model == ex1 || x->model == ex2);
}

/* Whether any row the fit uses has a kernel of kind k. */
static int kind_measured(const gopt_gpu_data *d, int ex1, int ex2, int k) {
  for (size_t i = 0; i < d->n; i++)
    if (!left_out(&d->rows[i], ex1, ex2) && d->rows[i].phi[k * GOPT_GF_PER_KIND] > 0) return 1;
  return 0;
}

int gopt_gpu_fit(const gopt_gpu_data *d, int exclude, double model_weight, double *coef,
                 gopt_error *err) {
  return gopt_gpu_fit2(d, exclude, -1, model_weight, coef, err);
}

int gopt_gpu_fit2(const gopt_gpu_data *d, int ex1, int ex2, double model_weight, double *coef,
                  gopt_error *err) {
  size_t m = 0;
  for (size_t i = 0; i < d->n; i++)
    m += !left_out(&d->rows[i], ex1, ex2) && d->rows[i].what != GOPT_GPU_ROW_BF16;
  double *A = malloc((m ? m : 1) * GOPT_GPU_NCOEF * sizeof *A), *b = malloc((m ? m : 1) * sizeof *b);
  if (!A || !b) {
    free(A);
    free(b);
    return gopt_error_set(err, GOPT_ENOMEM, "calibrate: out of memory");
  }
  size_t r = 0;
  for (size_t i = 0; i < d->n; i++) {
    const gopt_gpu_row *x = &d->rows[i];
    if (left_out(x, ex1, ex2)) continue;
    int total = x->what >= GOPT_GPU_ROW_B1;
    if (x->what == GOPT_GPU_ROW_BF16) continue; /* fitted apart (gopt_gpu_fit_half) */
    double w = total ? model_weight : 1;
    for (int j = 0; j < GOPT_GPU_NCOEF; j++) A[r * GOPT_GPU_NCOEF + j] = w * x->phi[j] / x->seconds;
    b[r++] = w;
  }
  int rc = gopt_nnls(A, b, (int)m, GOPT_GPU_NCOEF, coef, err);
  /* a kind nothing measured borrows the coefficients of its nearest measured kind */
  static const int fallback[GOPT_GK_COUNT] = {
      [GOPT_GK_CONV] = -1, [GOPT_GK_CONV_GROUPED] = GOPT_GK_CONV, [GOPT_GK_CONV_DW] = GOPT_GK_CONV_GROUPED,
      [GOPT_GK_GEMM] = GOPT_GK_BMM, [GOPT_GK_BMM] = GOPT_GK_GEMM, [GOPT_GK_ELTWISE] = -1,
      [GOPT_GK_NORM] = GOPT_GK_ELTWISE, [GOPT_GK_POOL] = GOPT_GK_NORM, [GOPT_GK_MOVE] = GOPT_GK_ELTWISE,
      [GOPT_GK_RNN] = -1, [GOPT_GK_CONV_BWD] = -1, [GOPT_GK_CONV_GROUPED_BWD] = GOPT_GK_CONV_BWD,
      [GOPT_GK_CONV_DW_BWD] = GOPT_GK_CONV_GROUPED_BWD, [GOPT_GK_UPDATE] = GOPT_GK_ELTWISE, [GOPT_GK_CONV_EPILOGUE] = GOPT_GK_ELTWISE,
      [GOPT_GK_CONV_EPILOGUE_BWD] = GOPT_GK_NORM};
  for (int k = 0; !rc && k < GOPT_GK_COUNT; k++) {
    int f = fallback[k];
    if (f < 0 || kind_measured(d, ex1, ex2, k) || !kind_measured(d, ex1, ex2, f)) continue;
    memcpy(coef + k * GOPT_GF_PER_KIND, coef + f * GOPT_GF_PER_KIND, GOPT_GF_PER_KIND * sizeof *coef);
  }
  free(A);
  free(b);
  return rc;
}

double gopt_gpu_fit_half(const gopt_gpu_data *d, int exclude, const double *coef) {
  double best = 0, best_sse = INFINITY;
  for (int g = 0; g <= 300; g++) {
    double s = pow(64.0, g / 300.0), sse = 0;
    int any = 0;
    for (size_t i = 0; i < d->n; i++) {
      const gopt_gpu_row *x = &d->rows[i];
      if (x->what != GOPT_GPU_ROW_BF16 || (exclude >= 0 && x->model == exclude)) continue;
      double phi[GOPT_GPU_NCOEF];
      for (int j = 0; j < GOPT_GPU_NCOEF; j++)
        phi[j] = x->phi[j] * (j % GOPT_GF_PER_KIND == GOPT_GF_BYTES ? 0.5 : 1);
      double e = log(gopt_gpu_time_half(coef, phi, s) / x->seconds);
      sse += e * e;
      any = 1;
    }
    if (any && sse < best_sse) {
      best_sse = sse;
      best = s;
    }
  }
  return best;
}
