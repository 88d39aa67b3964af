/* cmd_calibrate_gpu.c: `gopt calibrate --gpu MEASUREMENTS.json --device NAME [-o dev.json]
 * [--models DIR]... [--loo] [--model-weight W|auto]`: fits the measured-GPU cost model (gopt/gpu_cost.h)
 * to a GPU measurements file (tools/gpu_profile.py), writes a one-device cluster file for
 * --cluster, and with --loo reports the leave-one-architecture-out table of docs/SIMULATOR.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/device.h"
#include "gopt/gpu_cost.h"
#include "gopt/sim.h"
#include "gopt/util.h"

static const char gpu_help[] =
    "usage: gopt calibrate --gpu MEASUREMENTS.json [--device NAME] [-o dev.json] [--models DIR]\n"
    "                      [--loo] [--model-weight W|auto] [--version TAG] [--layer-harness]\n"
    "  fits the measured-GPU cost model to a measurements file (tools/gpu_profile.py writes one);\n"
    "  --gpu may be repeated (up to 8 files of the same device: their rows are fitted together)\n"
    "  --device NAME  preset whose peaks, memory and links the written device keeps (default H100)\n"
    "  -o FILE        write the calibrated device as a cluster JSON file (--cluster FILE)\n"
    "  --models DIR   where MODEL.onnx of each measured model is (default corpus): whole-model\n"
    "                 times are fitted against those graphs; may be repeated (searched in order)\n"
    "  --loo          leave-one-architecture-out: fit without each model, predict its batch-1,\n"
    "                 batch-32 and training times; prints the markdown tables of docs/SIMULATOR.md\n"
    "                 (a summary over all models and, with several files, over each file's)\n"
    "  --layer-harness  count in a layer's forward+backward row the loss reduction its timing runs\n"
    "                 (out.sum(), which backward() starts from); off by default (the shipped preset)\n"
    "  --model-weight W  weight of a whole-model row against a layer row (default 15); auto:\n"
    "                 chosen from 6..30 by leave-one-architecture-out over the models (with --loo:\n"
    "                 per held-out model, without it: nested; slow, ~1 min)\n";

/* The grid --model-weight auto chooses from. */
static const double weight_grid[] = {6, 8, 10, 12, 15, 20, 30};
#define GPU_MAX_FILES 8
#define WEIGHT_GRID_N ((int)(sizeof weight_grid / sizeof *weight_grid))

/* Per layer class: median |error| and geometric mean of predicted / measured of the fitted
 * predictions of the layer rows (fwd and fwd+bwd): the second says which way a class is off. */
static void class_table(const gopt_gpu_data *d, const double *coef) {
  char seen[64][48];
  int ns = 0;
  for (size_t i = 0; i < d->n && ns < 64; i++) {
    if (d->rows[i].what != GOPT_GPU_ROW_FWD) continue;
    int k = 0;
    while (k < ns && strcmp(seen[k], d->rows[i].label)) k++;
    if (k == ns) snprintf(seen[ns++], sizeof seen[0], "%s", d->rows[i].label);
  }
  double *e = malloc((d->n + 1) * sizeof *e);
  if (!e) return;
  printf("\n| layer class | rows (fwd / fwd+bwd) | median \\|error\\| fwd | median \\|error\\| fwd+bwd "
         "| geomean predicted / measured fwd | fwd+bwd |\n|---|---|---|---|---|---|\n");
  for (int k = 0; k <= ns; k++) {
    double med[2], gm[2];
    size_t cnt[2];
    for (int w = 0; w < 2; w++) {
      size_t n = 0;
      double lg = 0;
      for (size_t i = 0; i < d->n; i++) {
        const gopt_gpu_row *r = &d->rows[i];
        if (r->what != (w ? GOPT_GPU_ROW_FWDBWD : GOPT_GPU_ROW_FWD)) continue;
        if (k < ns && strcmp(r->label, seen[k])) continue;
        double q = gopt_gpu_time(coef, r->phi) / r->seconds;
        lg += log(q);
        e[n++] = fabs(q - 1) * 100;
      }
      cnt[w] = n;
      med[w] = gopt_median(e, n);
      gm[w] = n ? exp(lg / (double)n) : NAN;
    }
    printf("| %s | %zu / %zu | %.1f %% | %.1f %% | %.3f | %.3f |\n", k < ns ? seen[k] : "**all layers**",
           cnt[0], cnt[1], med[0], med[1], gm[0], gm[1]);
  }
  free(e);
}

/* The measurements files loaded, in order, and the first model index of each (first[n]: count). */
typedef struct gpu_files {
  const char *path[GPU_MAX_FILES];
  int first[GPU_MAX_FILES + 1];
  int n;
} gpu_files;

static const char *const loo_col[4] = {"batch-1 inference", "batch-32 inference", "batch-32 training",
                                       "batch-32 bf16 inference"};

/* The per-column summary of the leave-one-out predictions of models [m0, m1) (pred/meas: 4 per
 * model, 0 where not measured); title: the file they come from, NULL for all models. */
static void summary(const char *title, const double *pred, const double *meas, int m0, int m1) {
  if (title) printf("\nmodels of %s:\n", title);
  printf("\n| column | models | median \\|error\\| | Kendall τ | geomean predicted / measured |\n|---|---|---|---|---|\n");
  for (int c = 0; c < 4; c++) {
    double e[256], x[256], y[256], lg = 0;
    size_t n = 0;
    for (int m = m0; m < m1 && n < 256; m++)
      if (meas[m * 4 + c] > 0) {
        x[n] = pred[m * 4 + c];
        y[n] = meas[m * 4 + c];
        lg += log(x[n] / y[n]);
        e[n] = fabs(x[n] / y[n] - 1) * 100;
        n++;
      }
    double tau = gopt_sim_kendall_tau(x, y, n);
    printf("| %s | %zu | %.1f %% | %.3f | %.3f |\n", loo_col[c], n, gopt_median(e, n), tau,
           n ? exp(lg / (double)n) : NAN);
  }
}

/* Leave-one-architecture-out over the models with whole-model rows (each fold leaves out every
 * row of its model, layers included); mw <= 0: each held-out model's weight chosen by an inner
 * leave-one-out without it (nested). Prints the per-model table, the summary over all models and,
 * when more than one file has whole-model rows, the summary of each file's models. */
static int loo(const gopt_gpu_data *d, const gpu_files *fs, double mw, gopt_error *err) {
  const char *const *col = loo_col;
  int nm = d->n_models;
  double *pred = calloc((size_t)nm * 4, sizeof *pred), *meas = calloc((size_t)nm * 4, sizeof *meas);
  double coef[GOPT_GPU_NCOEF];
  if (!pred || !meas) {
    free(pred);
    free(meas);
    return gopt_error_set(err, GOPT_ENOMEM, "calibrate: out of memory");
  }
  int rc = 0;
  for (int m = 0; m < nm && !rc; m++) {
    if (!d->has_model_rows[m]) continue;
    double w = mw;
    if (mw <= 0 && (rc = gopt_gpu_select_weight(d, m, weight_grid, WEIGHT_GRID_N, &w, err))) break;
    if (mw <= 0) fprintf(stderr, "  %s held out: model weight %g (inner leave-one-out)\n", d->models[m], w);
    if ((rc = gopt_gpu_fit(d, m, w, coef, err))) break;
    double half = gopt_gpu_fit_half(d, m, coef);
    for (size_t i = 0; i < d->n; i++) {
      const gopt_gpu_row *r = &d->rows[i];
      if (r->model != m || r->what < GOPT_GPU_ROW_B1) continue;
      int c = r->what - GOPT_GPU_ROW_B1;
      double phi[GOPT_GPU_NCOEF]; /* bf16: the fp32 graph with halved bytes and faster compute */
      for (int j = 0; j < GOPT_GPU_NCOEF; j++)
        phi[j] = r->phi[j] * (c == 3 && j % GOPT_GF_PER_KIND == GOPT_GF_BYTES ? 0.5 : 1);
      pred[m * 4 + c] = c == 3 ? gopt_gpu_time_half(coef, phi, half) : gopt_gpu_time(coef, phi);
      meas[m * 4 + c] = r->seconds;
    }
  }
  if (!rc) {
    printf("| model | %s: measured / predicted ms | %s | %s | %s |\n|---|---|---|---|---|\n", col[0], col[1],
           col[2], col[3]);
    for (int m = 0; m < nm; m++) {
      if (!d->has_model_rows[m]) continue;
      printf("| %s", d->models[m]);
      for (int c = 0; c < 4; c++)
        if (meas[m * 4 + c] > 0)
          printf(" | %.3f / %.3f (%+.1f %%)", meas[m * 4 + c] * 1e3, pred[m * 4 + c] * 1e3,
                 (pred[m * 4 + c] / meas[m * 4 + c] - 1) * 100);
        else
          printf(" | -");
      printf(" |\n");
    }
    summary(NULL, pred, meas, 0, nm);
    int with_rows[GPU_MAX_FILES] = {0}, nf = 0;
    for (int f = 0; f < fs->n; f++)
      for (int m = fs->first[f]; m < fs->first[f + 1]; m++) with_rows[f] |= d->has_model_rows[m];
    for (int f = 0; f < fs->n; f++) nf += with_rows[f];
    for (int f = 0; f < fs->n && nf > 1; f++)
      if (with_rows[f]) summary(fs->path[f], pred, meas, fs->first[f], fs->first[f + 1]);
  }
  free(pred);
  free(meas);
  return rc;
}

/* Writes the calibrated device (the preset's peaks, memory, links; the fitted model) to outp. */
static int write_device(const char *outp, const char *devname, const char *version,
                        const double *coef, double half, gopt_error *err) {
  const gopt_device *p = gopt_device_find_preset(devname);
  gopt_device d;
  if (p) {
    d = *p;
  } else {
    d = *gopt_device_find_preset("H100");
    snprintf(d.name, sizeof d.name, "%s", devname);
    snprintf(d.model, sizeof d.model, "%s", devname);
  }
  d.gpu_model = 1;
  memcpy(d.gpu_coef, coef, sizeof d.gpu_coef);
  snprintf(d.gpu_version, sizeof d.gpu_version, "%s", version);
  d.gpu_half_speedup = half;
  double floor_s = INFINITY;
  for (int k = 0; k < GOPT_GK_COUNT; k++)
    if (coef[k * GOPT_GF_PER_KIND] > 0 && coef[k * GOPT_GF_PER_KIND] < floor_s) floor_s = coef[k * GOPT_GF_PER_KIND];
  if (isfinite(floor_s)) d.launch_s = floor_s; /* informational: the smallest kernel floor */
  gopt_cluster *c = gopt_cluster_single(&d);
  char *text = c ? gopt_cluster_to_json(c) : NULL;
  int rc = text ? gopt_file_write_atomic(outp, text, strlen(text), err)
                : gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", outp);
  free(text);
  gopt_cluster_free(c);
  return rc;
}

/* Loads the files of fs (models searched in dirs[0..nd)) into one data set; fs->first gets the
 * first model index of each. */
static int load_all(gpu_files *fs, const char *const *dirs, int nd, unsigned flags, gopt_gpu_data **out,
                    gopt_error *err) {
  int rc = gopt_gpu_data_load_dirs(fs->path[0], dirs, nd, flags, out, err);
  fs->first[0] = 0;
  for (int f = 1; f < fs->n && !rc; f++) {
    gopt_gpu_data *more = NULL;
    fs->first[f] = (*out)->n_models;
    rc = gopt_gpu_data_load_dirs(fs->path[f], dirs, nd, flags, &more, err);
    if (!rc) rc = gopt_gpu_data_append(*out, more, fs->path[f], err);
    gopt_gpu_data_free(more);
  }
  if (!rc) fs->first[fs->n] = (*out)->n_models;
  return rc;
}

int cli_calibrate_gpu(int argc, char **argv) {
  const char *dirs[GPU_MAX_FILES] = {"corpus"}, *outp = NULL, *dev = "H100", *version = "calibrated";
  gpu_files fs = {.n = 0};
  int do_loo = 0, nd = 0;
  unsigned flags = 0;
  double mw = 15;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(gpu_help, stdout);
      return 0;
    } else if (!strcmp(a, "--loo")) {
      do_loo = 1;
    } else if (!strcmp(a, "--layer-harness")) {
      flags |= GOPT_GPU_LOAD_HARNESS;
    } else if (!strcmp(a, "--gpu") || !strcmp(a, "-o") || !strcmp(a, "--models") ||
               !strcmp(a, "--device") || !strcmp(a, "--model-weight") || !strcmp(a, "--version")) {
      if (i + 1 >= argc) return cli_usage_error("calibrate", "%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--gpu")) {
        if (fs.n == GPU_MAX_FILES)
          return cli_usage_error("calibrate", "--gpu %s: at most %d measurements files", v, GPU_MAX_FILES);
        fs.path[fs.n++] = v;
      } else if (!strcmp(a, "--models")) {
        if (nd == GPU_MAX_FILES)
          return cli_usage_error("calibrate", "--models %s: at most %d model directories", v, GPU_MAX_FILES);
        dirs[nd++] = v;
      }
      else if (!strcmp(a, "-o")) outp = v;
      else if (!strcmp(a, "--device")) dev = v;
      else if (!strcmp(a, "--version")) version = v;
      else if (!strcmp(v, "auto"))
        mw = 0;
      else {
        char *end;
        mw = strtod(v, &end);
        if (*end || !(mw > 0) || mw > 1e6)
          return cli_usage_error("calibrate", "--model-weight '%s': expected a number > 0 or auto", v);
      }
    } else {
      return cli_usage_error("calibrate", "unknown argument '%s' with --gpu (see gopt calibrate --gpu --help)", a);
    }
  }
  if (!fs.n) return cli_usage_error("calibrate", "--gpu needs a measurements file");
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  double coef[GOPT_GPU_NCOEF], half = 0;
  int rc = load_all(&fs, dirs, nd ? nd : 1, flags, &d, &err);
  double w = mw;
  if (!rc && mw <= 0) rc = gopt_gpu_select_weight(d, -1, weight_grid, WEIGHT_GRID_N, &w, &err);
  if (!rc) rc = gopt_gpu_fit(d, -1, w, coef, &err);
  if (!rc) half = gopt_gpu_fit_half(d, -1, coef);
  if (!rc) {
    size_t tot = 0;
    for (size_t i = 0; i < d->n; i++) tot += d->rows[i].what >= GOPT_GPU_ROW_B1;
    printf("calibrated %s from %s (%s): %zu rows (%zu whole-model), %zu layer rows skipped (no kernel "
           "or no rule), model weight %g%s\n", dev, fs.n > 1 ? "several files" : fs.path[0], d->device, d->n, tot,
           d->skipped, w, mw <= 0 ? " (auto)" : "");
    if (d->overlapped)
      printf("  %zu kernel sums above the eager wall time (overlapping kernels): %s\n", d->overlapped,
             d->overlap_note);
    if (half > 0) printf("  bf16 tensor-core speed-up over fp32 (compute terms): %.3f\n", half);
    for (int j = 0; j < GOPT_GPU_NCOEF; j++)
      if (coef[j] > 0)
        printf("  %s.%s = %.6g\n", gopt_gpu_kind_name(j / GOPT_GF_PER_KIND),
               gopt_gpu_feature_name(j % GOPT_GF_PER_KIND), coef[j]);
    class_table(d, coef);
    if (do_loo) {
      printf("\n");
      rc = loo(d, &fs, mw, &err);
    }
  }
  if (!rc && outp) {
    rc = write_device(outp, dev, version, coef, half, &err);
    if (!rc) printf("written to %s (use --cluster %s)\n", outp, outp);
  }
  if (rc) fprintf(stderr, "gopt calibrate: %s\n", err.msg);
  gopt_gpu_data_free(d);
  return rc ? 1 : 0;
}
