/* exec_graph.h: graph-building helpers shared by the executor's C tests (test_exec.c,
 * test_exec_isa.c, test_exec_hoist.c, …): add a tensor, a constant or a one-output node with a
 * CHECK on failure, infer shapes, load a corpus model, and a deterministic xorshift for test values in [-1, 1).
 * Include after check.h. */
#ifndef GOPT_TESTS_EXEC_GRAPH_H
#define GOPT_TESTS_EXEC_GRAPH_H

#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

static inline int32_t tensor(gopt_graph *g, const char *name, int dtype, int rank, const int64_t *dims) {
  gopt_error err = {0};
  int32_t t = gopt_graph_add_tensor(g, name, dtype, rank, dims, &err);
  CHECK_MSG(t >= 0, "%s", err.msg);
  return t;
}

static inline int32_t node(gopt_graph *g, const char *type, const char *name, int n_in, const int32_t *in,
                    int32_t out) {
  gopt_error err = {0};
  int32_t n = gopt_graph_add_node(g, type, name, n_in, in, 1, &out, &err);
  CHECK_MSG(n >= 0, "%s", err.msg);
  return n;
}

/* A constant tensor holding nb bytes of v. */
static inline int32_t const_tensor(gopt_graph *g, const char *name, int dtype, int rank, const int64_t *dims,
                                   const void *v, size_t nb) {
  gopt_error err = {0};
  int32_t t = tensor(g, name, dtype, rank, dims);
  CHECK_MSG(gopt_tensor_set_const(g, t, v, nb, &err) == 0, "%s", err.msg);
  return t;
}

static inline void finish(gopt_graph *g) {
  gopt_error err = {0};
  gopt_infer_opts io = {.fold_constants = 0, .keep_source_shapes = 1};
  CHECK_MSG(gopt_infer_shapes(g, &io, &err) == 0, "%s", err.msg);
}

/* An ONNX model (a corpus file: made-up weights from the executor's seed) with its batch bound to
 * 1 and shapes inferred (constants folded); NULL after a failed CHECK. */
static inline gopt_graph *load_model(const char *path) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  CHECK_MSG(gopt_onnx_load(path, NULL, &g, &err) == 0, "%s", err.msg);
  if (!g) return NULL;
  const char *sym = gopt_graph_batch_symbol(g);
  if (sym) gopt_graph_bind_symbol(g, sym, 1);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  CHECK_MSG(gopt_infer_shapes(g, &io, &err) == 0, "%s", err.msg);
  return g;
}

static uint64_t rng = 88172645463325252ULL;
static inline float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

#endif
