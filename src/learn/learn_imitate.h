/* learn_imitate.h: the imitation warm start of training (learn_imitate.c): cross-entropy of the
 * policy against each training graph's reference decisions before PPO. */
#ifndef GOPT_LEARN_IMITATE_H
#define GOPT_LEARN_IMITATE_H

#include "learn/learn_internal.h"

/* The imitation target of one graph: the reference decisions x_ref (gopt_learn_reference, result
 * ref) as actions a (allocated for g); device labels renumbered by first use in topological order
 * when that scores the same as ref (symmetric devices); priorities clamped to [0.02, 0.98] for the
 * Beta head. Returns 0 or a negative GOPT_E code. */
int learn_imitate_target(gopt_env *e, const learn_graph *g, const gopt_env_result *ref, const double *x_ref,
                         learn_acts *a, gopt_error *err);

/* One cross-entropy step: loss = -mean over the graph's variables of log pi(target), one optimizer
 * step on p's parameters. *loss receives the loss. */
int learn_imitate_step(gopt_nn_ctx *ctx, gopt_policy *p, gopt_nn_optim *opt, const learn_graph *g,
                       const learn_acts *target, double *loss, gopt_error *err);

#endif
