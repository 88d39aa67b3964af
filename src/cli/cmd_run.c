/* cmd_run.c: `gopt run MODEL`: executes a model on this CPU (inputs from ONNX TensorProto/.npy files
 * or random), writes or checks outputs, profiles per-op and end-to-end time and peak activation
 * memory (cached in the cost database), and runs a given op order or fusion decisions. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "gopt/hlo.h"
#include "gopt/costdb.h"
#include "gopt/decisions.h"
#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "gopt/zoo.h"

int cli_run(int argc, char **argv);

static const char run_help[] =
    "usage: gopt run MODEL [options]\n"
    "  runs MODEL (an .onnx file with weights, a zoo spec, or an XLA HLO text module) on this CPU\n"
    "  --inputs DIR|F1,F2  input tensors: a folder with input_0.pb/.npy ... (or test_data_set_0/),\n"
    "                      or a comma-separated list of .pb/.npy files (default: random from --seed)\n"
    "  --outputs DIR       write output_0.pb ... into DIR (created when missing)\n"
    "  --format pb|npy     file format of --outputs (default pb)\n"
    "  --check DIR         run a test-data folder (ONNX backend layout: input_N.pb/output_N.pb, or a\n"
    "                      folder of test_data_set_*) and compare each output; exit 1 on a mismatch\n"
    "  --rtol R --atol A   tolerances of --check: |got-want| <= atol + rtol*|want| (1e-3, 1e-4) for\n"
    "                      float/double/float16/bfloat16; integer and bool outputs must be equal\n"
    "  --seed N            seed of random inputs and of random weights for data-less models (0)\n"
    "  --batch N           bind the symbolic batch dimension when no inputs are given (default 1)\n"
    "  --threads N         OpenMP threads (default: all cores)\n"
    "  --profile           time each op (warm-ups, then the median of timed runs) and the whole run\n"
    "  --steps isolated|context  how --profile times each op: re-run alone on its inputs (default,\n"
    "                      as TASO) or inside the whole runs (allocation and cache state of the run)\n"
    "  --time              end-to-end time only (warm-ups, then the median of timed runs)\n"
    "  --warmup N --reps N warm-up and timed runs of --profile and --time (8, 32, as TASO)\n"
    "  --paced             with --time: after the warm-ups print 'ready', then for every line read on\n"
    "                      stdin run once and print its wall and CPU seconds (a driver interleaves\n"
    "                      these runs with another engine's: bench/exec/pair_time.py); ends at EOF\n"
    "  --costdb FILE       measured-cost database: ops found there are not measured again; new\n"
    "                      measurements are added and the file rewritten\n"
    "  --json              print one JSON object (summary, checks, profile)\n"
    "  --order FILE        decisions JSON with \"order\": run the ops in that order\n"
    "  --fusion FILE|auto  decisions JSON with \"fusion\": run each group as one fused loop; auto:\n"
    "                      fuse every chain of elementwise ops (gopt_exec_auto_fusion)\n"
    "  --layouts auto|plain  auto (default; plain with --costdb): the layout-assignment pass: convs\n"
    "                      run the Relu/Clip/Sigmoid/swish/residual Add after them as oneDNN\n"
    "                      post-ops, activations between oneDNN ops stay in oneDNN's layout; plain:\n"
    "                      every activation row-major, each conv reorders around itself\n"
    "  --no-fold           keep shape subgraphs as ops (they run as integer ops)\n"
    "  --no-nan-check      do not look for the first op that produced NaN/Inf\n";

typedef struct run_opts {
  const char *model, *inputs, *outputs, *check, *costdb, *order, *fusion, *format, *layouts, *steps;
  double rtol, atol;
  long seed, batch, threads, warmup, reps;
  int profile, time, json, no_fold, no_nan, paced;
} run_opts;

/* ---- file helpers ------------------------------------------------------------------------------------- */

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Path of DIR/PREFIX_i.pb or .npy into buf; 0 when neither exists. */
static int find_tensor_file(const char *dir, const char *prefix, size_t i, char *buf, size_t len) {
  if (snprintf(buf, len, "%s/%s_%zu.pb", dir, prefix, i) >= (int)len) return 0;
  if (is_file(buf)) return 1;
  if (snprintf(buf, len, "%s/%s_%zu.npy", dir, prefix, i) >= (int)len) return 0;
  return is_file(buf);
}

typedef struct tensor_list {
  gopt_host_tensor *t;
  size_t n;
} tensor_list;

static void tensor_list_clear(tensor_list *l) {
  for (size_t i = 0; i < l->n; i++) gopt_host_tensor_clear(&l->t[i]);
  free(l->t);
  l->t = NULL;
  l->n = 0;
}

static int tensor_list_add(tensor_list *l, const char *path) {
  gopt_host_tensor *a = realloc(l->t, (l->n + 1) * sizeof *a);
  if (!a) return -1;
  l->t = a;
  gopt_error err = {0};
  if (gopt_exec_tensor_read(path, &l->t[l->n], &err)) {
    fprintf(stderr, "gopt run: %s\n", err.msg);
    return -1;
  }
  l->n++;
  return 0;
}

/* Reads PREFIX_0.., from dir (as many as exist). */
static int read_dir_tensors(const char *dir, const char *prefix, tensor_list *l) {
  char path[4096];
  for (size_t i = 0; find_tensor_file(dir, prefix, i, path, sizeof path); i++)
    if (tensor_list_add(l, path)) return -1;
  return 0;
}

/* --inputs: a folder (input_N files, or test_data_set_0/) or a comma-separated file list. */
static int read_inputs(const char *spec, tensor_list *l) {
  if (is_dir(spec)) {
    char path[4096], sub[4096];
    if (!find_tensor_file(spec, "input", 0, path, sizeof path)) {
      snprintf(sub, sizeof sub, "%s/test_data_set_0", spec);
      if (is_dir(sub) && find_tensor_file(sub, "input", 0, path, sizeof path)) return read_dir_tensors(sub, "input", l);
      fprintf(stderr, "gopt run: --inputs %s: no input_0.pb or input_0.npy in that folder\n", spec);
      return -1;
    }
    return read_dir_tensors(spec, "input", l);
  }
  char *s = strdup(spec);
  if (!s) return -1;
  int rc = 0;
  for (char *tok = strtok(s, ","); tok && !rc; tok = strtok(NULL, ",")) {
    if (!is_file(tok)) {
      fprintf(stderr, "gopt run: --inputs: '%s' is not a file or folder\n", tok);
      rc = -1;
    } else {
      rc = tensor_list_add(l, tok);
    }
  }
  free(s);
  return rc;
}

/* ---- model ------------------------------------------------------------------------------------------- */

static int looks_like_file(const char *model) {
  size_t n = strlen(model);
  return strchr(model, '/') || (n > 5 && !strcmp(model + n - 5, ".onnx")) ||
         (n > 4 && (!strcmp(model + n - 4, ".hlo") || !strcmp(model + n - 4, ".txt")));
}

static void shape_str(const gopt_host_tensor *t, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "%s[", gopt_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* dtype a tensor file of dtype file_dt has where the model expects model_dt: numpy has no
 * bfloat16, so onnx's test data (onnx 1.12) stores bfloat16 tensors as UINT16 with the same bits;
 * such a file is read as BFLOAT16. Any other pair keeps the file's dtype. */
static int file_dtype_as(int file_dt, int model_dt) {
  return file_dt == GOPT_DT_UINT16 && model_dt == GOPT_DT_BFLOAT16 ? GOPT_DT_BFLOAT16 : file_dt;
}

/* Loads the model, binds symbolic dims from the first inputs (or --batch), infers shapes. */
static gopt_graph *load_model(const run_opts *o, const tensor_list *in) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc;
  int hlo = looks_like_file(o->model) && gopt_hlo_is_hlo_file(o->model);
  if (hlo) rc = gopt_hlo_load(o->model, &g, &err); /* runs where every op has a kernel */
  else if (looks_like_file(o->model)) rc = gopt_onnx_load(o->model, NULL, &g, &err);
  else rc = gopt_zoo_build(o->model, &g, &err);
  if (rc) goto fail;
  if (in && in->n) {
    size_t k = 0;
    for (size_t i = 0; i < g->inputs.n; i++) {
      int32_t t = g->inputs.a[i];
      if (g->tensors.a[t].flags & GOPT_T_CONST) continue;
      if (k >= in->n) break;
      const gopt_host_tensor *h = &in->t[k++];
      if (h->rank != g->tensors.a[t].rank ||
          file_dtype_as(h->dtype, g->tensors.a[t].dtype) != g->tensors.a[t].dtype) {
        char want[256], got[256];
        size_t w = (size_t)snprintf(want, sizeof want, "%s[", gopt_dtype_name(g->tensors.a[t].dtype));
        for (int j = 0; j < g->tensors.a[t].rank && w < sizeof want; j++) {
          int64_t d = gopt_tensor_dims(g, t)[j];
          if (GOPT_DIM_IS_SYM(d))
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", j ? "," : "",
                                  gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]));
          else
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%lld", j ? "," : "", (long long)d);
        }
        if (w < sizeof want) snprintf(want + w, sizeof want - w, "]");
        shape_str(h, got, sizeof got);
        rc = gopt_error_set(&err, GOPT_ESHAPE, "%s: input '%s': expected %s, got %s", o->model,
                            gopt_graph_str(g, g->tensors.a[t].name), want, got);
        goto fail;
      }
      for (int j = 0; j < h->rank; j++) {
        int64_t d = gopt_tensor_dims(g, t)[j];
        if (GOPT_DIM_IS_SYM(d))
          gopt_graph_bind_symbol(g, gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]), h->dims[j]);
      }
    }
  } else {
    const char *sym = gopt_graph_batch_symbol(g);
    if (sym) gopt_graph_bind_symbol(g, sym, o->batch > 0 ? o->batch : 1);
  }
  gopt_infer_opts io = {.fold_constants = !o->no_fold, .keep_source_shapes = 1};
  rc = gopt_infer_shapes(g, &io, &err);
  if (rc) {
    gopt_error_prefix(&err, "%s: ", o->model);
    goto fail;
  }
  /* shapes that depend on the input values: computed from the inputs given */
  if (in && in->n && (rc = gopt_exec_complete_shapes(g, in->t, in->n, &io, &err)) < 0) {
    gopt_error_prefix(&err, "%s: ", o->model);
    goto fail;
  }
  return g;
fail:
  fprintf(stderr, "gopt run: %s\n", err.msg);
  gopt_graph_free(g);
  return NULL;
}


static int set_inputs(gopt_exec *x, const run_opts *o, const tensor_list *in) {
  gopt_error err = {0};
  int rc;
  if (in->n) {
    if (in->n != gopt_exec_n_inputs(x)) {
      fprintf(stderr, "gopt run: %s: the model has %zu inputs, %zu tensor files were given\n", o->model,
              gopt_exec_n_inputs(x), in->n);
      return -1;
    }
    for (size_t i = 0; i < in->n; i++) {
      gopt_host_tensor h = in->t[i]; /* shallow: only the dtype label may change */
      h.dtype = file_dtype_as(h.dtype, gopt_exec_input_dtype(x, i));
      if ((rc = gopt_exec_set_input(x, i, &h, &err))) break;
    }
  } else {
    rc = gopt_exec_random_inputs(x, (uint64_t)o->seed, &err);
  }
  if (rc) {
    fprintf(stderr, "gopt run: %s: %s\n", o->model, err.msg);
    return -1;
  }
  return 0;
}

/* ---- check -------------------------------------------------------------------------------------------- */

/* Whether --check can compare elements of dtype dt (every numeric type the executor can hold and
 * STRING; not the complex types or UNDEFINED). */
static int check_comparable(int dt) {
  switch (dt) {
    case GOPT_DT_FLOAT: case GOPT_DT_DOUBLE: case GOPT_DT_FLOAT16: case GOPT_DT_BFLOAT16:
    case GOPT_DT_INT8: case GOPT_DT_INT16: case GOPT_DT_INT32: case GOPT_DT_INT64:
    case GOPT_DT_UINT8: case GOPT_DT_UINT16: case GOPT_DT_UINT32: case GOPT_DT_UINT64:
    case GOPT_DT_BOOL: case GOPT_DT_STRING:
      return 1;
    default:
      return gopt_dtype_is_lowbit(dt);
  }
}

/* IEEE binary16 bits -> double (subnormals, inf and NaN included). */
static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* bfloat16 bits (the high half of a float) -> double. */
static double bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Element i of got and want (dtype dt, check_comparable) as doubles in *a / *b, and |a - b| in *d.
 * 64-bit integers are subtracted as integers, so values beyond 2^53 that differ by 1 still differ. */
static void check_elems(int dt, const void *got, const void *want, int64_t i, double *a, double *b,
                        double *d) {
  switch (dt) {
#define CASE_INT(DT, T)                                                                            \
  case DT: {                                                                                       \
    T x = ((const T *)got)[i], y = ((const T *)want)[i];                                           \
    *a = (double)x;                                                                                \
    *b = (double)y;                                                                                \
    *d = x >= y ? (double)((uint64_t)x - (uint64_t)y) : (double)((uint64_t)y - (uint64_t)x);       \
    return;                                                                                        \
  }
    CASE_INT(GOPT_DT_INT8, int8_t)
    CASE_INT(GOPT_DT_INT16, int16_t)
    CASE_INT(GOPT_DT_INT32, int32_t)
    CASE_INT(GOPT_DT_INT64, int64_t)
    CASE_INT(GOPT_DT_UINT8, uint8_t)
    CASE_INT(GOPT_DT_BOOL, uint8_t)
    CASE_INT(GOPT_DT_UINT16, uint16_t)
    CASE_INT(GOPT_DT_UINT32, uint32_t)
    CASE_INT(GOPT_DT_UINT64, uint64_t)
#undef CASE_INT
    case GOPT_DT_FLOAT: *a = ((const float *)got)[i]; *b = ((const float *)want)[i]; break;
    case GOPT_DT_DOUBLE: *a = ((const double *)got)[i]; *b = ((const double *)want)[i]; break;
    case GOPT_DT_FLOAT16:
      *a = half_to_double(((const uint16_t *)got)[i]);
      *b = half_to_double(((const uint16_t *)want)[i]);
      break;
    case GOPT_DT_BFLOAT16:
      *a = bf16_to_double(((const uint16_t *)got)[i]);
      *b = bf16_to_double(((const uint16_t *)want)[i]);
      break;
    default: /* the low-bit types (check_comparable): their values, compared exactly */
      *a = gopt_lowbit_to_double(dt, ((const uint8_t *)got)[i]);
      *b = gopt_lowbit_to_double(dt, ((const uint8_t *)want)[i]);
      break;
  }
  *d = fabs(*a - *b);
}

/* Compares got with want; fills a JSON record; returns 1 when they match within tolerances, 0 when
 * not, -1 (after one error line naming dir and the output) on a dtype --check cannot compare. */
static int compare(const gopt_host_tensor *got, const gopt_host_tensor *want, const run_opts *o,
                   const char *dir, const char *name, json_t *rec, int quiet) {
  char gs[256], ws[256];
  shape_str(got, gs, sizeof gs);
  shape_str(want, ws, sizeof ws);
  json_object_set_new(rec, "output", json_string(name));
  if (!check_comparable(got->dtype) || !check_comparable(want->dtype)) {
    int dt = check_comparable(got->dtype) ? want->dtype : got->dtype;
    fprintf(stderr, "gopt run: --check %s: output '%s' (got %s, expected %s): dtype %s cannot be compared\n",
            dir, name, gs, ws, gopt_dtype_name(dt));
    json_object_set_new(rec, "ok", json_false());
    json_object_set_new(rec, "error", json_sprintf("dtype %s cannot be compared", gopt_dtype_name(dt)));
    return -1;
  }
  int same = got->dtype == want->dtype && got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!same) {
    json_object_set_new(rec, "ok", json_false());
    json_object_set_new(rec, "error", json_sprintf("got %s, expected %s", gs, ws));
    if (!quiet) fprintf(stderr, "  output '%s': got %s, expected %s: FAIL\n", name, gs, ws);
    return 0;
  }
  int64_t n = gopt_host_tensor_numel(got), bad = 0;
  double max_abs = 0, max_rel = 0;
  /* integers and bools must match exactly; tolerances are for the floating-point types */
  int exact = got->dtype != GOPT_DT_FLOAT && got->dtype != GOPT_DT_DOUBLE &&
              got->dtype != GOPT_DT_FLOAT16 && got->dtype != GOPT_DT_BFLOAT16;
  if (got->dtype == GOPT_DT_STRING) /* packed records, equal byte for byte */
    bad = got->nbytes != want->nbytes || (got->nbytes && memcmp(got->data, want->data, got->nbytes)) ? n : 0;
  for (int64_t i = 0; i < n && got->dtype != GOPT_DT_STRING; i++) {
    double a, b, d;
    check_elems(got->dtype, got->data, want->data, i, &a, &b, &d);
    if (isnan(a) || isnan(b)) {
      if (!(isnan(a) && isnan(b))) bad++;
      continue;
    }
    if (isinf(a) || isinf(b)) {
      if (a != b) bad++;
      continue;
    }
    double r = d / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
    if (d > max_abs) max_abs = d;
    if (d > 0 && r > max_rel) max_rel = r;
    if (exact ? d > 0 : d > o->atol + o->rtol * fabs(b)) bad++;
  }
  json_object_set_new(rec, "shape", json_string(gs));
  json_object_set_new(rec, "max_abs_err", json_real(max_abs));
  json_object_set_new(rec, "max_rel_err", json_real(max_rel));
  json_object_set_new(rec, "mismatches", json_integer(bad));
  json_object_set_new(rec, "elements", json_integer(n));
  json_object_set_new(rec, "ok", json_boolean(bad == 0));
  if (!quiet)
    fprintf(stderr, "  output '%s' %s: max abs err %.3g, max rel err %.3g, %lld of %lld beyond tolerance: %s\n",
            name, gs, max_abs, max_rel, (long long)bad, (long long)n, bad ? "FAIL" : "ok");
  return bad == 0;
}

/* --time --paced: the warm-ups, "ready", then one timed run per line read on stdin, its wall and
 * CPU seconds printed (flushed) after it; returns at EOF. The driver decides when each run starts, so it can
 * alternate them with another engine's runs (bench/exec/pair_time.py). */
static int run_paced(gopt_exec *x, const run_opts *o) {
  gopt_error err = {0};
  double sec = 0, cpu = 0;
  if (o->warmup && gopt_exec_time_run(x, (int)o->warmup - 1, 1, &sec, &err)) {
    fprintf(stderr, "gopt run: %s: %s\n", o->model, err.msg);
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (gopt_exec_time_run_cpu(x, 0, 1, &sec, &cpu, &err)) {
      fprintf(stderr, "gopt run: %s: %s\n", o->model, err.msg);
      return 1;
    }
    printf("%.9f %.9f\n", sec, cpu);
    fflush(stdout);
  }
  return 0;
}

/* Runs one test_data_set folder; returns 1 when every output matched, 0 on mismatch, -1 on error. */
static int check_set(gopt_exec *x, const run_opts *o, const char *dir, json_t *sets) {
  tensor_list in = {0}, want = {0};
  int ok = -1;
  gopt_error err = {0};
  json_t *set = json_object();
  json_t *outs = json_array();
  json_object_set_new(set, "dir", json_string(dir));
  json_object_set_new(set, "outputs", outs);
  json_array_append_new(sets, set);
  if (read_dir_tensors(dir, "input", &in) || read_dir_tensors(dir, "output", &want)) goto done;
  if (!in.n && gopt_exec_n_inputs(x)) {
    fprintf(stderr, "gopt run: --check %s: no input_0.pb or input_0.npy\n", dir);
    goto done;
  }
  if (!want.n) {
    fprintf(stderr, "gopt run: --check %s: no output_0.pb or output_0.npy to compare with\n", dir);
    goto done;
  }
  if (want.n != gopt_exec_n_outputs(x)) {
    fprintf(stderr, "gopt run: --check %s: %zu expected outputs, the model has %zu\n", dir, want.n,
            gopt_exec_n_outputs(x));
    goto done;
  }
  for (size_t i = 0; i < want.n; i++) {
    char path[4096];
    if (check_comparable(want.t[i].dtype)) continue;
    if (!find_tensor_file(dir, "output", i, path, sizeof path)) snprintf(path, sizeof path, "%s", dir);
    fprintf(stderr, "gopt run: --check %s: dtype %s cannot be compared\n", path,
            gopt_dtype_name(want.t[i].dtype));
    goto done;
  }
  if (set_inputs(x, o, &in)) goto done;
  if (gopt_exec_run(x, &err)) {
    fprintf(stderr, "gopt run: %s: %s\n", o->model, err.msg);
    goto done;
  }
  if (!o->json) fprintf(stderr, "check %s:\n", dir);
  ok = 1;
  for (size_t i = 0; i < want.n; i++) {
    gopt_host_tensor got = {0};
    if (gopt_exec_get_output(x, i, &got, &err)) {
      fprintf(stderr, "gopt run: %s\n", err.msg);
      ok = -1;
      break;
    }
    json_t *rec = json_object();
    json_array_append_new(outs, rec);
    gopt_host_tensor w = want.t[i]; /* shallow: only the dtype label may change */
    w.dtype = file_dtype_as(w.dtype, got.dtype);
    int c = compare(&got, &w, o, dir, got.name ? got.name : "?", rec, o->json);
    gopt_host_tensor_clear(&got);
    if (c < 0) {
      ok = -1;
      break;
    }
    if (c == 0) ok = 0;
  }
done:
  json_object_set_new(set, "ok", json_boolean(ok == 1));
  tensor_list_clear(&in);
  tensor_list_clear(&want);
  return ok;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --check DIR: DIR is a test-data set, or holds test_data_set_* folders. */
static int run_check(gopt_exec *x, const run_opts *o, json_t *out) {
  char path[4096];
  json_t *sets = json_array();
  json_object_set_new(out, "check", sets);
  if (find_tensor_file(o->check, "output", 0, path, sizeof path)) return check_set(x, o, o->check, sets);
  DIR *d = opendir(o->check);
  if (!d) {
    fprintf(stderr, "gopt run: --check %s: %s\n", o->check, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_data_set_", 14)) continue;
    char **a = realloc(names, (n + 1) * sizeof *a);
    if (!a) break;
    names = a;
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  int rc = 1;
  if (!n) {
    fprintf(stderr, "gopt run: --check %s: no output_0.pb there and no test_data_set_* folders\n", o->check);
    rc = -1;
  }
  qsort(names, n, sizeof *names, name_cmp);
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", o->check, names[i] ? names[i] : "");
    int r = names[i] ? check_set(x, o, path, sets) : -1;
    if (r < 0) rc = -1;
    else if (r == 0 && rc > 0) rc = 0;
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- outputs ------------------------------------------------------------------------------------------- */

static int write_outputs(gopt_exec *x, const run_opts *o) {
  gopt_error err = {0};
  if (mkdir(o->outputs, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "gopt run: --outputs %s: %s\n", o->outputs, strerror(errno));
    return -1;
  }
  int npy = o->format && !strcmp(o->format, "npy");
  for (size_t i = 0; i < gopt_exec_n_outputs(x); i++) {
    gopt_host_tensor t = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/output_%zu.%s", o->outputs, i, npy ? "npy" : "pb");
    int rc = gopt_exec_get_output(x, i, &t, &err);
    if (!rc) rc = gopt_exec_tensor_write(path, &t, &err);
    gopt_host_tensor_clear(&t);
    if (rc) {
      fprintf(stderr, "gopt run: %s\n", err.msg);
      return -1;
    }
  }
  return 0;
}

/* ---- profile ------------------------------------------------------------------------------------------- */

static int run_profile(gopt_exec *x, const gopt_graph *g, const run_opts *o, json_t *out) {
  gopt_error err = {0};
  gopt_costdb *db = NULL;
  gopt_exec_profile p = {0};
  int rc = -1;
  if (o->costdb) {
    if (is_file(o->costdb)) {
      if (gopt_costdb_load(o->costdb, &db, &err)) {
        fprintf(stderr, "gopt run: %s\n", err.msg);
        return -1;
      }
    } else {
      char host[256];
      gopt_costdb_this_host(host, sizeof host);
      db = gopt_costdb_new(host, (int)(o->threads > 0 ? o->threads : 0));
      if (!db) return -1;
    }
  }
  int mode = o->steps && !strcmp(o->steps, "context") ? GOPT_EXEC_PROFILE_CONTEXT : GOPT_EXEC_PROFILE_ISOLATED;
  if (gopt_exec_profile_run_mode(x, (int)o->warmup, (int)o->reps, mode, db, &p, &err)) {
    fprintf(stderr, "gopt run: %s: %s\n", o->model, err.msg);
    goto done;
  }
  /* The end-to-end time is recorded too: gopt fidelity compares it with the simulated step. */
  if (db && gopt_costdb_put_step(db, o->model, p.seconds)) {
    fprintf(stderr, "gopt run: out of memory\n");
    goto done;
  }
  if (db && gopt_costdb_save(db, o->costdb, &err)) {
    fprintf(stderr, "gopt run: %s\n", err.msg);
    goto done;
  }
  json_t *pj = json_object();
  json_object_set_new(out, "profile", pj);
  json_object_set_new(pj, "warmup", json_integer(o->warmup));
  json_object_set_new(pj, "reps", json_integer(o->reps));
  json_object_set_new(pj, "seconds", json_real(p.seconds));
  json_object_set_new(pj, "sum_op_seconds", json_real(p.sum_op_seconds));
  json_object_set_new(pj, "peak_bytes", json_integer((json_int_t)p.peak_bytes));
  json_object_set_new(pj, "measured", json_integer((json_int_t)p.n_measured));
  json_t *ops = json_array();
  json_object_set_new(pj, "ops", ops);
  if (!o->json)
    printf("%-40s %-20s %12s %s\n", "node", "op", "time_us", "");
  for (size_t i = 0; i < p.n_steps; i++) {
    const gopt_exec_op_time *s = &p.steps[i];
    char sig[20];
    snprintf(sig, sizeof sig, "%016llx", (unsigned long long)s->sig);
    const char *op = s->group >= 0 ? "FusedElementwise" : gopt_node_type(g, s->node);
    json_t *e = json_object();
    json_object_set_new(e, "node", json_string(gopt_node_name(g, s->node)));
    json_object_set_new(e, "op", json_string(op));
    if (s->group >= 0) json_object_set_new(e, "group", json_integer(s->group));
    json_object_set_new(e, "sig", json_string(sig));
    json_object_set_new(e, "seconds", json_real(s->seconds));
    json_object_set_new(e, "cached", json_boolean(s->cached));
    json_array_append_new(ops, e);
    if (!o->json)
      printf("%-40s %-20s %12.2f %s\n", gopt_node_name(g, s->node), op, s->seconds * 1e6,
             s->cached ? "(cached)" : "");
  }
  if (!o->json)
    printf("end-to-end %.3f ms (median of %ld after %ld warm-ups), sum of ops %.3f ms, peak live "
           "activations %.2f MB, %zu signatures measured\n",
           p.seconds * 1e3, o->reps, o->warmup, p.sum_op_seconds * 1e3, (double)p.peak_bytes / 1e6,
           p.n_measured);
  rc = 0;
done:
  gopt_exec_profile_clear(&p);
  gopt_costdb_free(db);
  return rc;
}

/* ---- layouts ------------------------------------------------------------------------------------------ */

/* The layout pass's decision: the JSON object "layouts" (mode, reorders per run and what plain
 * mode does, kept tensors, post-op nodes) and one line on stderr; and "packed_weights" (the
 * constant weights reordered once: copies, bytes, primitives reading them). */
static void report_layouts(const gopt_exec *x, const gopt_graph *g, const run_opts *o, json_t *out) {
  gopt_exec_layout_stats ls;
  gopt_exec_layout_stats_get(x, &ls);
  const char *mode = ls.mode == GOPT_EXEC_LAYOUT_AUTO ? "auto" : "plain";
  json_t *lj = json_pack("{s:s,s:I,s:I,s:I,s:I}", "mode", mode, "reorders", (json_int_t)ls.reorders,
                         "reorders_plain", (json_int_t)ls.reorders_plain, "kept_tensors",
                         (json_int_t)ls.kept_tensors, "post_op_nodes", (json_int_t)ls.post_op_nodes);
  json_t *kept = json_object(); /* tensor name -> oneDNN layout name, for the kept tensors */
  char buf[64];
  for (size_t t = 0; t < g->tensors.n && ls.kept_tensors; t++)
    if (strcmp(gopt_exec_tensor_layout(x, (int32_t)t, buf, sizeof buf), "plain"))
      json_object_set_new(kept, gopt_graph_str(g, g->tensors.a[t].name), json_string(buf));
  json_object_set_new(lj, "tensors", kept);
  json_object_set_new(out, "layouts", lj);
  size_t pbytes = 0, preaders = 0, pcopies = gopt_exec_packed_weights(x, &pbytes, &preaders);
  json_object_set_new(out, "packed_weights", json_pack("{s:I,s:I,s:I}", "copies", (json_int_t)pcopies, "bytes",
                                                       (json_int_t)pbytes, "readers", (json_int_t)preaders));
  if (!o->json && ls.reorders_plain)
    fprintf(stderr, "gopt run: %s: layouts %s: %zu activation reorders per run (plain: %zu), %zu tensors "
            "kept in oneDNN layouts, %zu ops run as conv post-ops\n",
            o->model, mode, ls.reorders, ls.reorders_plain, ls.kept_tensors, ls.post_op_nodes);
}

/* ---- main -------------------------------------------------------------------------------------------- */

static int parse_double(const char *flag, const char *s, double *out) {
  char *end = NULL;
  double v = s ? strtod(s, &end) : 0;
  if (!s || !*s || *end || !(v >= 0)) {
    cli_usage_error("run", "%s: expected a non-negative number, got '%s'", flag, s ? s : "(nothing)");
    return -1;
  }
  *out = v;
  return 0;
}

int cli_run(int argc, char **argv) {
  run_opts o = {.rtol = 1e-3, .atol = 1e-4, .warmup = 8, .reps = 32};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define STR_FLAG(name, field)                                              \
  if (!strcmp(a, name)) {                                                  \
    if (!v) return cli_usage_error("run", "%s needs a value", name);       \
    o.field = v;                                                           \
    i++;                                                                   \
    continue;                                                              \
  }
#define LONG_FLAG(name, field, lo, hi)                                                   \
  if (!strcmp(a, name)) {                                                                \
    if (cli_parse_long("run", name, v, lo, hi, &o.field)) return 2;                       \
    i++;                                                                                 \
    continue;                                                                            \
  }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(run_help, stdout);
      return 0;
    }
    STR_FLAG("--inputs", inputs)
    STR_FLAG("--outputs", outputs)
    STR_FLAG("--check", check)
    STR_FLAG("--costdb", costdb)
    STR_FLAG("--order", order)
    STR_FLAG("--fusion", fusion)
    STR_FLAG("--format", format)
    STR_FLAG("--layouts", layouts)
    STR_FLAG("--steps", steps)
    LONG_FLAG("--seed", seed, 0, 1L << 62)
    LONG_FLAG("--batch", batch, 1, 1L << 30)
    LONG_FLAG("--threads", threads, 1, 4096)
    LONG_FLAG("--warmup", warmup, 0, 1000000)
    LONG_FLAG("--reps", reps, 1, 1000000)
    if (!strcmp(a, "--rtol") || !strcmp(a, "--atol")) {
      if (parse_double(a, v, a[2] == 'r' ? &o.rtol : &o.atol)) return 2;
      i++;
      continue;
    }
    if (!strcmp(a, "--profile")) { o.profile = 1; continue; }
    if (!strcmp(a, "--time")) { o.time = 1; continue; }
    if (!strcmp(a, "--paced")) { o.paced = 1; continue; }
    if (!strcmp(a, "--json")) { o.json = 1; continue; }
    if (!strcmp(a, "--no-fold")) { o.no_fold = 1; continue; }
    if (!strcmp(a, "--no-nan-check")) { o.no_nan = 1; continue; }
    if (a[0] == '-' && a[1]) return cli_usage_error("run", "unknown flag '%s' (see gopt run --help)", a);
    if (o.model) return cli_usage_error("run", "more than one MODEL given");
    o.model = a;
#undef STR_FLAG
#undef LONG_FLAG
  }
  if (!o.model) return cli_usage_error("run", "missing MODEL (see gopt run --help)");
  if (o.format && strcmp(o.format, "pb") && strcmp(o.format, "npy"))
    return cli_usage_error("run", "--format: expected pb or npy, got '%s'", o.format);
  if (o.layouts && strcmp(o.layouts, "auto") && strcmp(o.layouts, "plain"))
    return cli_usage_error("run", "--layouts: expected auto or plain, got '%s'", o.layouts);
  if (o.steps && strcmp(o.steps, "isolated") && strcmp(o.steps, "context"))
    return cli_usage_error("run", "--steps: expected isolated or context, got '%s'", o.steps);
  if (o.check && o.inputs) return cli_usage_error("run", "--check reads its own inputs; drop --inputs");
  if (o.paced && (!o.time || o.json || o.profile || o.check))
    return cli_usage_error("run", "--paced needs --time, without --json, --profile or --check");
  if (o.check && !is_dir(o.check))
    return cli_usage_error("run", "--check %s: not a folder", o.check);

  int status = 1;
  tensor_list in = {0};
  gopt_graph *g = NULL;
  gopt_exec *x = NULL;
  gopt_decisions dec;
  int have_dec = 0;
  int32_t *auto_group = NULL;
  json_t *out = json_object();
  gopt_error err = {0};

  if (o.inputs && read_inputs(o.inputs, &in)) goto done;
  if (o.check) {
    /* shapes of the check's first set bind the symbolic dims */
    char path[4096], sub[4096];
    const char *dir = o.check;
    if (!find_tensor_file(dir, "input", 0, path, sizeof path)) {
      snprintf(sub, sizeof sub, "%s/test_data_set_0", o.check);
      dir = sub;
    }
    if (is_dir(dir) && read_dir_tensors(dir, "input", &in)) goto done;
  }
  g = load_model(&o, &in);
  if (!g) goto done;
  if (o.check) tensor_list_clear(&in);
  /* per-op costs for the cost database are of single ONNX ops in plain layouts, as the simulator
   * models them, unless --layouts auto is asked for explicitly */
  const char *lay = o.layouts ? o.layouts : o.costdb ? "plain" : "auto";
  gopt_exec_opts eo = {.threads = (int)o.threads, .seed = (uint64_t)o.seed, .check_nan = !o.no_nan,
                       .layouts = !strcmp(lay, "plain") ? GOPT_EXEC_LAYOUT_PLAIN : GOPT_EXEC_LAYOUT_AUTO};
  int fuse_auto = o.fusion && !strcmp(o.fusion, "auto");
  if (fuse_auto) {
    auto_group = malloc((g->nodes.n + 1) * sizeof *auto_group);
    if (!auto_group) goto done;
    int32_t ng = gopt_exec_auto_fusion(g, auto_group);
    eo.group = auto_group;
    json_object_set_new(out, "fusion_groups", json_integer(ng));
    if (!o.json) fprintf(stderr, "gopt run: %s: --fusion auto: %d groups\n", o.model, (int)ng);
  }
  if (o.order || (o.fusion && !fuse_auto)) {
    gopt_decisions_init(&dec, g);
    have_dec = 1;
    if ((o.order && gopt_decisions_load(&dec, g, o.order, &err)) ||
        (o.fusion && !fuse_auto && gopt_decisions_load(&dec, g, o.fusion, &err))) {
      fprintf(stderr, "gopt run: %s\n", err.msg);
      goto done;
    }
    if (o.order && !dec.order) {
      fprintf(stderr, "gopt run: --order %s: the file has no \"order\"\n", o.order);
      goto done;
    }
    if (o.fusion && !fuse_auto && !dec.group) {
      fprintf(stderr, "gopt run: --fusion %s: the file has no \"fusion\" groups\n", o.fusion);
      goto done;
    }
    if (o.order) {
      eo.order = dec.order;
      eo.n_order = dec.n_order;
    }
    if (o.fusion && !fuse_auto) eo.group = dec.group;
  }
  size_t n_random = 0;
  if (gopt_exec_new(g, &eo, &x, &n_random, &err)) {
    fprintf(stderr, "gopt run: %s: %s\n", o.model, err.msg);
    goto done;
  }
  if (n_random)
    fprintf(stderr, "gopt run: %s: %zu weight tensors have no data (structure-only model): using "
            "deterministic random weights (seed %ld)\n", o.model, n_random, o.seed);
  json_object_set_new(out, "model", json_string(o.model));
  json_object_set_new(out, "steps", json_integer((json_int_t)gopt_exec_n_steps(x)));
  json_object_set_new(out, "random_weights", json_integer((json_int_t)n_random));
  report_layouts(x, g, &o, out);
  json_object_set_new(out, "isa", json_string(gopt_exec_isa(x)));
  if (o.check) {
    int r = run_check(x, &o, out);
    if (r < 0) goto done;
    json_object_set_new(out, "check_ok", json_boolean(r == 1));
    if (r == 0) {
      if (o.json) {
        json_dumpf(out, stdout, JSON_INDENT(1));
        putchar('\n');
      }
      fprintf(stderr, "gopt run: %s: check FAILED (rtol %g, atol %g)\n", o.model, o.rtol, o.atol);
      goto done;
    }
  } else {
    if (set_inputs(x, &o, &in)) goto done;
    double t0 = gopt_now();
    if (gopt_exec_run(x, &err)) {
      fprintf(stderr, "gopt run: %s: %s\n", o.model, err.msg);
      goto done;
    }
    double dt = gopt_now() - t0;
    json_object_set_new(out, "seconds", json_real(dt));
    json_object_set_new(out, "peak_bytes", json_integer((json_int_t)gopt_exec_peak_bytes(x)));
    json_object_set_new(out, "peak_bytes_without_inplace",
                        json_integer((json_int_t)gopt_exec_peak_bytes_without_inplace(x)));
    json_object_set_new(out, "inplace_outputs", json_integer((json_int_t)gopt_exec_n_inplace(x)));
    json_object_set_new(out, "arena_bytes", json_integer((json_int_t)gopt_exec_arena_bytes(x)));
    json_object_set_new(out, "pool_bytes", json_integer((json_int_t)gopt_exec_pool_bytes(x)));
    json_t *outs = json_array();
    json_object_set_new(out, "outputs", outs);
    for (size_t i = 0; i < gopt_exec_n_outputs(x); i++) {
      gopt_host_tensor t = {0};
      if (gopt_exec_get_output(x, i, &t, &err)) {
        fprintf(stderr, "gopt run: %s\n", err.msg);
        goto done;
      }
      char s[256];
      shape_str(&t, s, sizeof s);
      json_array_append_new(outs, json_pack("{s:s,s:s}", "name", t.name ? t.name : "", "shape", s));
      if (!o.json && !o.profile && !o.time) printf("output '%s' %s\n", t.name ? t.name : "", s);
      gopt_host_tensor_clear(&t);
    }
    if (!o.json && !o.profile && !o.time)
      printf("%s: %zu steps in %.3f ms, peak live activations %.2f MB (%zu bytes; %zu without "
             "in-place, %zu outputs in place), activation buffers %zu bytes (arena %zu, pool %zu), "
             "%s kernels\n", o.model, gopt_exec_n_steps(x), dt * 1e3,
             (double)gopt_exec_peak_bytes(x) / 1e6, gopt_exec_peak_bytes(x),
             gopt_exec_peak_bytes_without_inplace(x), gopt_exec_n_inplace(x),
             gopt_exec_arena_bytes(x) + gopt_exec_pool_bytes(x), gopt_exec_arena_bytes(x),
             gopt_exec_pool_bytes(x), gopt_exec_isa(x));
    if (o.outputs && write_outputs(x, &o)) goto done;
  }
  if (o.profile && run_profile(x, g, &o, out)) goto done;
  if (o.paced) {
    if (run_paced(x, &o)) goto done;
  } else if (o.time) {
    double sec = 0, cpu = 0;
    if (gopt_exec_time_run_cpu(x, (int)o.warmup, (int)o.reps, &sec, &cpu, &err)) {
      fprintf(stderr, "gopt run: %s: %s\n", o.model, err.msg);
      goto done;
    }
    json_object_set_new(out, "time", json_pack("{s:f,s:f,s:i,s:i,s:i}", "seconds", sec, "cpu_seconds", cpu, "warmup",
                                               (int)o.warmup, "reps", (int)o.reps, "threads", (int)o.threads));
    if (!o.json)
      printf("end-to-end %.3f ms, CPU %.3f ms (medians of %ld after %ld warm-ups)\n", sec * 1e3, cpu * 1e3, o.reps,
             o.warmup);
  }
  if (o.json) {
    json_dumpf(out, stdout, JSON_INDENT(1));
    putchar('\n');
  }
  status = 0;
done:
  json_decref(out);
  if (have_dec) gopt_decisions_clear(&dec);
  free(auto_group);
  gopt_exec_free(x);
  gopt_graph_free(g);
  tensor_list_clear(&in);
  return status;
}
