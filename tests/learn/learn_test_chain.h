/* learn_test_chain.h: the MatMul chain the learning tests place (test_learn, test_segment): a
 * graph whose weights set how much of a device's memory and time each step takes. */
#ifndef GOPT_LEARN_TEST_CHAIN_H
#define GOPT_LEARN_TEST_CHAIN_H
#include <stdint.h>
#include <stdio.h>

#include "gopt/graph.h"

/* x[8,K] -> MatMul(W_i[K,K]) x n, every weight a K*K-float parameter without data. */
static inline gopt_graph *learn_test_matmul_chain(int n, int64_t k) {
  gopt_graph *g = gopt_graph_new("chain");
  int64_t d[2] = {8, k}, w[2] = {k, k};
  int32_t prev = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, d, NULL);
  gopt_graph_add_input(g, prev);
  char nm[32];
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "W%d", i);
    int32_t W = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, w, NULL);
    gopt_tensor_set_const(g, W, NULL, (size_t)(k * k * 4), NULL);
    g->tensors.a[W].flags |= GOPT_T_PARAM;
    snprintf(nm, sizeof nm, "m%d", i);
    int32_t t = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, d, NULL);
    int32_t in[2] = {prev, W};
    gopt_graph_add_node(g, "MatMul", nm, 2, in, 1, &t, NULL);
    prev = t;
  }
  gopt_graph_add_output(g, prev);
  return g;
}

#endif
