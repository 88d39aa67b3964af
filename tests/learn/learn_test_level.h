/* learn_test_level.h: what the segment-head tests share (test_segment, test_parts): a zoo
 * model's training step as a placement fixture, and the greedy decode of a policy at one cluster
 * level, evaluated. Include after learn_test_chain.h and learn/learn_internal.h. */
#ifndef GOPT_LEARN_TEST_LEVEL_H
#define GOPT_LEARN_TEST_LEVEL_H
#include <stdlib.h>
#include <string.h>

#include "gopt/train.h"
#include "gopt/zoo.h"

/* The training step of zoo model spec on cluster, as a placement fixture (non-zero on failure). */
static inline int learn_test_step_fix(fix *f, const char *spec, const char *cluster) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_zoo_build(spec, &g, &err) == 0, "%s", err.msg);
  CHECK_MSG(!g || gopt_train_build(g, NULL, &err) == 0, "%s", err.msg);
  return !g || fix_make2(f, g, cluster, GOPT_TASK_PLACEMENT, 0);
}

/* Greedy decode of p at `clusters` clusters (learn_graph_for's argument: LEARN_SEG_PER_NODE one per
 * node, -K K min-cut parts; the raw decisions, no post-process): its result in *r, the level's
 * cluster count in *n_seg (may be NULL). */
static inline void learn_test_level_greedy(gopt_policy *p, gopt_env *e, int clusters, gopt_env_result *r, int *n_seg) {
  gopt_error err = {0};
  learn_graph *g = NULL;
  learn_acts acts = {0};
  learn_fwd f;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  double *x = calloc(gopt_env_nvars(e) + 1, sizeof *x);
  memset(r, 0, sizeof *r);
  CHECK_MSG(p && learn_graph_for(p, e, clusters, &g, &err) == 0, "%s", err.msg);
  if (g) {
    if (n_seg) *n_seg = (int)g->n_seg;
    if (clusters == LEARN_SEG_PER_NODE) CHECK_EQ_INT(g->n_seg, g->n);
    CHECK(learn_acts_alloc(&acts, g) == 0);
    gopt_nn_ctx_set_training(ctx, 0);
    CHECK_MSG(learn_forward(ctx, p, g, NULL, &f, &err) == 0, "%s", err.msg);
    gopt_nn_rng rng;
    gopt_nn_rng_seed(&rng, 1);
    gopt_env_default(e, x);
    learn_sample(&f, g, &rng, 1, &acts);
    learn_to_x(g, &acts, x);
    CHECK_MSG(gopt_env_evaluate_batch(e, x, 1, r, &err) == 0, "%s", err.msg);
  }
  learn_acts_free(&acts);
  learn_graph_free(g);
  gopt_nn_ctx_free(ctx);
  free(x);
}

#endif
