/* learn_test_chain.h: what the placement-learning tests share (test_learn, test_segment): the
 * MatMul chain they place, whose weights set how much of a device's memory and time each step
 * takes, and the environment fixture over it. Include after check.h. */
#ifndef GOPT_LEARN_TEST_CHAIN_H
#define GOPT_LEARN_TEST_CHAIN_H
#include <stdint.h>
#include <stdio.h>

#include <string.h>

#include "check.h"
#include "gopt/gpu_cost.h"
#include "gopt/graph.h"
#include "gopt/task.h"

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

typedef struct fix { gopt_graph *g; gopt_cluster *c; gopt_env *e; } fix;

/* An environment for task over g (owned by f from here on) on cluster; fast1: device 1 gets twice
 * the FLOP/s and bandwidth of device 0 (and, on the measured-GPU presets, its FLOP and byte terms
 * twice as fast). */
static inline int fix_make2(fix *f, gopt_graph *g, const char *cluster, int task, int fast1) {
  gopt_error err = {0};
  memset(f, 0, sizeof *f);
  f->g = g;
  gopt_env_opts o = {.task = task, .threads = 2};
  int rc = gopt_cluster_parse(cluster, &f->c, &err);
  if (!rc && fast1) {
    gopt_device *d1 = &f->c->devices[1];
    for (int t = 0; t < GOPT_DT_COUNT; t++) d1->peak_flops[t] *= 2;
    d1->mem_bw *= 2;
    if (d1->gpu_model) gopt_gpu_scale(d1->gpu_coef, 1, 1, 1, 2, 2, 1, d1->gpu_coef);
  }
  rc = rc ? rc : gopt_env_new(f->g, f->c, &o, &f->e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc;
}

static inline void fix_free(fix *f) {
  gopt_env_free(f->e);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
}

#endif
