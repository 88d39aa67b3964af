/* test_passes_exec.c: output equality of every compiler pass on the real modules. Every module in
 * tests/hlo/data that gopt's executor can run (and whose tensors hold at most SIZE_LIMIT elements
 * in all, to keep the test to seconds) runs on random inputs (seed 1) before and after each pass
 * and the default pipeline; the outputs must be equal (floats within rtol 1e-4 + atol 1e-5,
 * integers and pred exactly, NaN where NaN). A pass result that no longer runs fails too. A table
 * of the modules that run, and why the others do not, goes to stderr (docs/PASSES.md). Also
 * checks the cuda_threefry2x32 kernel against Random123's known-answer vector. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"

#define SIZE_LIMIT (1 << 22)
#define MAX_FILES 128

static char *files[MAX_FILES];
static int n_files;

static int collect(const char *path, const struct stat *sb, int type, struct FTW *f) {
  (void)sb, (void)f;
  if (type == FTW_F && n_files < MAX_FILES && gopt_hlo_is_hlo_file(path) && !strstr(path, "README") &&
      !strstr(path, "LICENSE"))
    files[n_files++] = strdup(path);
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs g on the random inputs of seed 1 into outs (*n_out of them); 0 or an error in err. */
static int run(const gopt_graph *g, gopt_host_tensor *outs, size_t *n_out, gopt_error *err) {
  gopt_exec *x = NULL;
  gopt_exec_opts o = {0};
  o.threads = 1;
  o.seed = 1;
  *n_out = 0;
  int rc = gopt_exec_new(g, &o, &x, NULL, err);
  if (!rc) rc = gopt_exec_random_inputs(x, 1, err);
  if (!rc) rc = gopt_exec_run(x, err);
  for (size_t i = 0; !rc && i < gopt_exec_n_outputs(x) && i < 64; i++, ++*n_out)
    rc = gopt_exec_get_output(x, i, &outs[i], err);
  gopt_exec_free(x);
  return rc;
}

static double val(const gopt_host_tensor *t, int64_t i) {
  switch (t->dtype) {
    case GOPT_DT_FLOAT: return ((const float *)t->data)[i];
    case GOPT_DT_DOUBLE: return ((const double *)t->data)[i];
    case GOPT_DT_INT32: return ((const int32_t *)t->data)[i];
    case GOPT_DT_INT64: return (double)((const int64_t *)t->data)[i];
    case GOPT_DT_UINT32: return ((const uint32_t *)t->data)[i];
    case GOPT_DT_BOOL: case GOPT_DT_UINT8: return ((const uint8_t *)t->data)[i];
    case GOPT_DT_INT8: return ((const int8_t *)t->data)[i];
    default: return 0;
  }
}

/* Index of the first element of a and b that differs, -1 when equal (also in dtype and shape). */
static int64_t differs(const gopt_host_tensor *a, const gopt_host_tensor *b) {
  if (a->dtype != b->dtype || a->nbytes != b->nbytes || a->rank != b->rank) return 0;
  int fl = a->dtype == GOPT_DT_FLOAT || a->dtype == GOPT_DT_DOUBLE;
  for (int64_t i = 0; i < gopt_host_tensor_numel(a); i++) {
    double u = val(a, i), v = val(b, i);
    if (isnan(u) && isnan(v)) continue;
    if (fl ? !(fabs(u - v) <= 1e-5 + 1e-4 * fabs(u)) && u != v : u != v) return i;
  }
  return -1;
}

static size_t total_elements(const gopt_graph *g) {
  size_t s = 0;
  for (size_t t = 0; t < g->tensors.n; t++)
    if (gopt_tensor_is_static(g, (int32_t)t)) s += (size_t)gopt_tensor_numel(g, (int32_t)t);
  return s;
}

/* Checks one module; returns 1 when verified, 0 when not executable (reason printed). */
static int check_module(const char *path) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_host_tensor ref[64], got[64];
  size_t nr = 0, ng = 0;
  const char *name = strstr(path, "data/") ? strstr(path, "data/") + 5 : path;
  if (gopt_hlo_load(path, &g, &err)) {
    CHECK_MSG(0, "%s: %s", path, err.msg);
    return 0;
  }
  if (total_elements(g) > SIZE_LIMIT) {
    fprintf(stderr, "  not run      %s: %zu tensor elements (limit %d)\n", name, total_elements(g), SIZE_LIMIT);
    gopt_graph_free(g);
    return 0;
  }
  if (run(g, ref, &nr, &err)) {
    const char *m = strstr(err.msg, "node '") ? strstr(err.msg, "node '") : err.msg;
    fprintf(stderr, "  not run      %s: %s\n", name, m);
    for (size_t i = 0; i < nr; i++) gopt_host_tensor_clear(&ref[i]);
    gopt_graph_free(g);
    return 0;
  }
  int np = gopt_pass_count(), bad = 0;
  for (int p = 0; p <= np; p++) { /* p == np: the default pipeline */
    gopt_graph *h = NULL;
    int rc = p < np ? gopt_pass_run(p, g, &h, NULL, &err) : gopt_pipeline_run("default", g, &h, NULL, NULL, &err);
    const char *pn = p < np ? gopt_pass_name(p) : "default";
    CHECK_MSG(rc == 0, "%s: pass %s: %s", name, pn, err.msg);
    if (!rc) rc = run(h, got, &ng, &err);
    CHECK_MSG(rc == 0, "%s: after pass %s the module does not run: %s", name, pn, err.msg);
    CHECK_MSG(rc || ng == nr, "%s: pass %s: %zu outputs, %zu before", name, pn, ng, nr);
    for (size_t i = 0; !rc && i < nr && i < ng; i++) {
      int64_t d = differs(&ref[i], &got[i]);
      CHECK_MSG(d < 0, "%s: pass %s: output %zu differs at element %lld (%.9g vs %.9g)", name, pn, i,
                (long long)d, d >= 0 && d < gopt_host_tensor_numel(&ref[i]) ? val(&ref[i], d) : 0,
                d >= 0 && d < gopt_host_tensor_numel(&got[i]) ? val(&got[i], d) : 0);
      bad += d >= 0;
    }
    bad += rc != 0;
    for (size_t i = 0; i < ng; i++) gopt_host_tensor_clear(&got[i]);
    gopt_graph_free(h);
  }
  fprintf(stderr, "  %s %s: %zu outputs, %d passes + default\n", bad ? "MISMATCH    " : "verified    ", name, nr, np);
  for (size_t i = 0; i < nr; i++) gopt_host_tensor_clear(&ref[i]);
  gopt_graph_free(g);
  return !bad;
}

/* Random123's known-answer test for Threefry-2x32, 20 rounds (kat_vectors: threefry2x32_20 with
 * pi digits as key and counter: 0x13198a2e 0x03707344, 0x243f6a88 0x85a308d3 -> 0xc4923a9c
 * 0x483df7a0; written in decimal, as HLO literals are). */
static void threefry_kat(void) {
  static const char mod[] =
      "HloModule t\nENTRY e {\n  k0 = u32[1] constant({320440878})\n  k1 = u32[1] constant({57701188})\n"
      "  x0 = u32[1] constant({608135816})\n  x1 = u32[1] constant({2242054355})\n"
      "  ROOT c = (u32[1], u32[1]) custom-call(k0, k1, x0, x1), custom_call_target=\"cuda_threefry2x32\"\n}\n";
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_host_tensor o[64];
  size_t n = 0;
  int rc = gopt_hlo_load_mem(mod, strlen(mod), "kat.hlo", &g, &err);
  if (!rc) rc = run(g, o, &n, &err);
  CHECK_MSG(rc == 0 && n == 2, "threefry: %s", err.msg);
  if (!rc && n == 2) {
    CHECK_EQ_INT(((uint32_t *)o[0].data)[0], 0xc4923a9cu);
    CHECK_EQ_INT(((uint32_t *)o[1].data)[0], 0x483df7a0u);
  }
  for (size_t i = 0; i < n; i++) gopt_host_tensor_clear(&o[i]);
  gopt_graph_free(g);
}

int main(void) {
  threefry_kat();
  CHECK(nftw("tests/hlo/data", collect, 16, FTW_PHYS) == 0);
  qsort(files, (size_t)n_files, sizeof *files, cmp_str);
  int verified = 0;
  for (int i = 0; i < n_files; i++) verified += check_module(files[i]);
  fprintf(stderr, "%d of %d modules executable and verified (every pass and the default pipeline)\n",
          verified, n_files);
  CHECK(n_files == 85);
  CHECK(verified >= 55); /* docs/PASSES.md lists them */
  for (int i = 0; i < n_files; i++) free(files[i]);
  return check_exit("test_passes_exec");
}
