/* hlo_test_util.h: helpers shared by the HLO tests (tests/hlo/test_*.c): loading a module from
 * text (a failed load is a failed check), a load that must fail, running a module against
 * reference values, and counting live nodes of one type. */
#ifndef GOPT_TEST_HLO_UTIL_H
#define GOPT_TEST_HLO_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"

static inline gopt_graph *load(const char *text) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_hlo_load_mem(text, strlen(text), "t.hlo", &g, &err);
  CHECK_MSG(rc == 0, "load: %s", err.msg);
  return g;
}

/* Loading text must fail with a one-line error containing want. */
static inline void load_err(const char *text, const char *want) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_hlo_load_mem(text, strlen(text), "t.hlo", &g, &err);
  CHECK_MSG(rc != 0 && g == NULL && strstr(err.msg, want) && !strchr(err.msg, '\n'),
            "want error '%s', got rc %d '%s'", want, rc, err.msg);
  gopt_graph_free(g);
}

static inline size_t count_type(const gopt_graph *g, const char *type) {
  size_t k = 0;
  for (size_t n = 0; n < g->nodes.n; n++)
    k += gopt_node_alive(g, (int32_t)n) && !strcmp(gopt_node_type(g, (int32_t)n), type);
  return k;
}

/* Output `out` of a module of constants (HloModule line added) run by the executor against
 * reference values (worked by hand, by numpy or PyTorch): equal within tol x (1 + |want|). */
static inline void kernel_case_tol(const char *what, const char *body, int out, const double *want, int n, double tol) {
  char text[16384];
  snprintf(text, sizeof text, "HloModule k\n%s", body);
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts eo = {0};
  gopt_host_tensor t = {0};
  int rc = gopt_hlo_load_mem(text, strlen(text), what, &g, &err);
  if (!rc) rc = gopt_exec_new(g, &eo, &x, NULL, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  if (!rc) rc = gopt_exec_get_output(x, (size_t)out, &t, &err);
  CHECK_MSG(rc == 0, "%s: %s", what, err.msg);
  if (!rc) {
    CHECK_EQ_INT(gopt_host_tensor_numel(&t), n);
    for (int i = 0; i < n && i < gopt_host_tensor_numel(&t); i++) {
      double v = t.dtype == GOPT_DT_FLOAT ? ((float *)t.data)[i] : ((int32_t *)t.data)[i];
      CHECK_MSG(fabs(v - want[i]) <= tol * (1 + fabs(want[i])), "%s: element %d is %.9g, reference %.9g", what, i, v, want[i]);
    }
  }
  gopt_host_tensor_clear(&t);
  gopt_exec_free(x);
  gopt_graph_free(g);
}

static inline void kernel_case(const char *what, const char *body, int out, const double *want, int n) {
  kernel_case_tol(what, body, out, want, n, 0);
}

#endif
