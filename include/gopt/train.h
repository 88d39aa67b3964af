/* gopt/train.h: turns a forward graph into one training step: a loss, the backward (gradient)
 * ops and one optimizer update per trained parameter, edited into the graph in place.
 *
 * The result is structure for analysis (placement, scheduling, peak memory): every tensor added
 * has its dtype and shape set (symbolic dims carried), activations a backward op needs are read by
 * it (so dataflow edges carry their liveness), and gradient accumulation is explicit. The
 * transformation and the semantics of gopt's training ops are documented in docs/TRAINING.md. */
#ifndef GOPT_TRAIN_H
#define GOPT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"
#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_train_opts {
  const char *optimizer;  /* "sgd" (default when NULL), "momentum" or "adam" */
  double lr;              /* learning rate, an attribute of every update op (default 0.01) */
  double momentum;        /* momentum (default 0.9) */
  double beta1, beta2;    /* Adam (defaults 0.9, 0.999) */
  double epsilon;         /* Adam (default 1e-8) */
  double weight_decay;    /* L2 / AdamW decay (default 0) */
} gopt_train_opts;

/* Fills o with the defaults above. */
void gopt_train_opts_init(gopt_train_opts *o);

/* What a build did. Tensor ids are valid until the graph is compacted. */
typedef struct gopt_train_info {
  int32_t loss;          /* the scalar loss tensor */
  int32_t seed;          /* the constant dLoss/dLoss = 1 */
  size_t n_fwd_tensors;  /* tensors before the build (ids below this are forward tensors) */
  size_t n_fwd_nodes;    /* node slots before the build */
  int32_t *grad_of;      /* [n_fwd_tensors + loss tensors]: gradient tensor of each tensor of the
                            forward graph and loss, -1 when none (malloc'd) */
  size_t n_grad_of;      /* entries in grad_of */
  size_t n_params;       /* parameters that got a gradient and an update */
  size_t n_frozen;       /* GOPT_T_PARAM tensors with no gradient path to the loss (e.g.
                            BatchNormalization running statistics): no update */
  size_t n_loss_nodes, n_grad_nodes, n_update_nodes;  /* nodes added, by role */
} gopt_train_info;

/* Frees info's arrays (not info itself); accepts NULL. */
void gopt_train_info_free(gopt_train_info *info);

/* Edits forward graph g (shapes inferred: every tensor on a gradient path has a dtype and a shape)
 * into a training step:
 *  1. loss: each float graph output of rank >= 1 is reduced by ReduceMean over all elements
 *     (keepdims=0); several outputs' means are added by Sum; a single rank-0 float output is the
 *     loss itself. The loss becomes a graph output; the seed dLoss/dLoss = 1 is a constant.
 *  2. backward: for every forward op on a path from a parameter (GOPT_T_PARAM) to the loss,
 *     gradient ops (flag GOPT_N_GRAD, named grad/<forward node>/...); partial gradients of a tensor
 *     with several consumers are added by one Sum (named grad/<tensor>).
 *  3. updates: per parameter with a gradient, one update op (flag GOPT_N_UPDATE, named
 *     update/<param>) producing <param>.updated (and updated optimizer state), all graph outputs;
 *     optimizer state tensors are GOPT_T_STATE constants without data.
 * Fails (the graph is then partly edited and should be discarded) with GOPT_EUNSUP naming the
 * node and op when an op on a gradient path has no gradient rule, GOPT_ESHAPE when a tensor on a
 * gradient path has no shape, GOPT_EINVAL when there is no float output or no parameter reaches
 * the loss. o may be NULL (defaults). */
int gopt_train_build(gopt_graph *g, const gopt_train_opts *o, gopt_error *err);

/* Same, and fills *info (when non-NULL; free with gopt_train_info_free, also after a failure). */
int gopt_train_build_ex(gopt_graph *g, const gopt_train_opts *o, gopt_train_info *info,
                        gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
