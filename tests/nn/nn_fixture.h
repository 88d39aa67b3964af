/* nn_fixture.h: test helpers for the NN engine: reads the GNNF fixture files written by
 * tools/nn_fixtures.py and compares tensors with rtol/atol, counting failures through check.h. */
#ifndef GOPT_TEST_NN_FIXTURE_H
#define GOPT_TEST_NN_FIXTURE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/nn.h"

typedef struct fx_rec { char name[128]; int dtype, ndim; int64_t shape[4]; int64_t n; void *data; } fx_rec;
typedef struct fx_file { fx_rec *r; int n; } fx_file;

static int fx_load(const char *path, fx_file *fx) {
  memset(fx, 0, sizeof *fx);
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "%s: cannot open fixture\n", path); return -1; }
  char magic[4];
  uint32_t cnt;
  if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "GNNF", 4) || fread(&cnt, 4, 1, f) != 1 || cnt > 10000) {
    fclose(f);
    fprintf(stderr, "%s: bad fixture header\n", path);
    return -1;
  }
  fx->r = calloc(cnt, sizeof *fx->r);
  for (uint32_t i = 0; i < cnt; i++) {
    fx_rec *r = &fx->r[i];
    uint16_t nl;
    uint8_t dt, nd;
    if (fread(&nl, 2, 1, f) != 1 || nl >= sizeof r->name || fread(r->name, 1, nl, f) != nl ||
        fread(&dt, 1, 1, f) != 1 || fread(&nd, 1, 1, f) != 1 || nd > 4) goto bad;
    r->dtype = dt;
    r->ndim = nd;
    r->n = 1;
    for (int k = 0; k < nd; k++) {
      uint32_t d;
      if (fread(&d, 4, 1, f) != 1) goto bad;
      r->shape[k] = d;
      r->n *= d;
    }
    r->data = malloc((size_t)(r->n ? r->n : 1) * 4);
    if ((int64_t)fread(r->data, 4, (size_t)r->n, f) != r->n) goto bad;
    fx->n++;
  }
  fclose(f);
  return 0;
bad:
  fclose(f);
  fprintf(stderr, "%s: truncated fixture\n", path);
  return -1;
}

static void fx_free(fx_file *fx) {
  for (int i = 0; i < fx->n; i++) free(fx->r[i].data);
  free(fx->r);
  memset(fx, 0, sizeof *fx);
}

static fx_rec *fx_get(fx_file *fx, const char *name) {
  for (int i = 0; i < fx->n; i++)
    if (strcmp(fx->r[i].name, name) == 0) return &fx->r[i];
  check_count++;
  check_failures++;
  fprintf(stderr, "fixture record '%s' missing\n", name);
  return NULL;
}
static float *fx_f32(fx_file *fx, const char *name) { fx_rec *r = fx_get(fx, name); return r ? (float *)r->data : NULL; }
static int32_t *fx_i32(fx_file *fx, const char *name) { fx_rec *r = fx_get(fx, name); return r ? (int32_t *)r->data : NULL; }

/* Compares n floats; one CHECK per tensor, reporting the worst element. */
static void fx_compare(const char *what, const float *got, const float *want, int64_t n, double rtol, double atol) {
  check_count++;
  if (!got || !want) { check_failures++; fprintf(stderr, "%s: missing data\n", what); return; }
  int64_t bad = 0, worst = -1;
  double worst_ex = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]), tol = atol + rtol * fabs((double)want[i]);
    if (!(d <= tol)) { bad++; if (d - tol > worst_ex || worst < 0) { worst_ex = d - tol; worst = i; } }
  }
  if (bad) {
    check_failures++;
    fprintf(stderr, "%s: %lld/%lld elements differ; worst [%lld] got %.9g want %.9g\n", what,
            (long long)bad, (long long)n, (long long)worst, (double)got[worst], (double)want[worst]);
  }
}

/* Copies every parameter's value from the fixture (record named like the parameter). */
static void fx_load_params(fx_file *fx, gopt_nn_params *p) {
  for (int i = 0; i < gopt_nn_params_count(p); i++) {
    gopt_nn_tensor *t = gopt_nn_params_get(p, i);
    fx_rec *r = fx_get(fx, t->name);
    if (!r) continue;
    CHECK_MSG(r->n == t->n, "param %s: %lld elements in fixture, %lld in model", t->name, (long long)r->n, (long long)t->n);
    if (r->n == t->n) memcpy(t->data, r->data, (size_t)t->n * 4);
  }
}

/* Checks every parameter gradient against "grad.<name>". */
static void fx_check_param_grads(fx_file *fx, gopt_nn_params *p, const char *model, double rtol, double atol) {
  for (int i = 0; i < gopt_nn_params_count(p); i++) {
    gopt_nn_tensor *t = gopt_nn_params_get(p, i);
    char nm[200], what[300];
    snprintf(nm, sizeof nm, "grad.%s", t->name);
    snprintf(what, sizeof what, "%s: %s", model, nm);
    fx_compare(what, t->grad, fx_f32(fx, nm), t->n, rtol, atol);
  }
}
#endif
