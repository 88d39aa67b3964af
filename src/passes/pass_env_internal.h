/* pass_env_internal.h: what the pass-order searches (pass_search.c) and the learned agent need
 * from the environment beyond its public API (internal). */
#ifndef GOPT_PASS_ENV_INTERNAL_H
#define GOPT_PASS_ENV_INTERNAL_H

#include "gopt/passes.h"

/* Runs pass on g (not e's current graph; e is not changed except its evaluation count) into *out
 * (the caller frees it), with its cost under e's objective and whether the pass changed anything
 * (changed may be NULL). */
int pass_env_try(gopt_pass_env *e, const gopt_graph *g, int pass, gopt_graph **out, double *cost,
                 int *changed, gopt_error *err);
/* The graph episodes start from. */
const gopt_graph *pass_env_initial_graph(const gopt_pass_env *e);

#endif
