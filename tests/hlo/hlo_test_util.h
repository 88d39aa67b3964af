/* hlo_test_util.h: helpers shared by the HLO pass tests (tests/hlo/test_passes*.c): loading a
 * module from text (a failed load is a failed check), a load that must fail, and counting live nodes of one type. */
#ifndef GOPT_TEST_HLO_UTIL_H
#define GOPT_TEST_HLO_UTIL_H

#include <string.h>

#include "check.h"
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

#endif
