/* gopt/passes.h: target-independent compiler passes over the graph IR, after XLA's (HLO modules
 * imported by gopt/hlo.h; DCE and CSE work on any graph), and pass pipelines.
 *
 * Every pass is a pure graph -> graph function: gopt_pass_run clones its input, rewrites the
 * clone (and, recursively, the computations it calls) and returns it with statistics. Passes are
 * registered in one table addressed by index (0 .. gopt_pass_count()-1) or name, so an
 * environment can apply "pass #k" as an action. docs/PASSES.md lists the passes and the
 * algebraic simplifier's rules. */
#ifndef GOPT_PASSES_H
#define GOPT_PASSES_H

#include <stddef.h>

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Statistics of one pass run. ops_* count instructions as gopt_hlo_instruction_count does
 * (parameters, constants and nodes over all called computations). */
typedef struct gopt_pass_stats {
  size_t ops_before, ops_after;
  size_t removed, added;   /* nodes removed and added by rewrites (all computations) */
  size_t rewrites;         /* rule applications */
} gopt_pass_stats;

/* Number of registered passes; name and one-line description of pass i (NULL out of range). */
int gopt_pass_count(void);
const char *gopt_pass_name(int i);
const char *gopt_pass_description(int i);
/* Index of the pass named name (XLA's names, e.g. "algsimp", "dce"), -1 when none. */
int gopt_pass_find(const char *name);

/* Runs pass i on a clone of in: *out receives the rewritten graph (the caller frees it), st (may
 * be NULL) the statistics. in is not modified. Returns 0 or an error. */
int gopt_pass_run(int i, const gopt_graph *in, gopt_graph **out, gopt_pass_stats *st,
                  gopt_error *err);

/* A pipeline step as reported by gopt_pipeline_run. */
typedef struct gopt_pipeline_step {
  int pass;
  size_t ops_before, ops_after;
} gopt_pipeline_step;

/* Runs a pipeline on a clone of in. spec is "default" (XLA's CPU order: the passes before the
 * simplification loop, the fixed-point loop run until no pass changes the graph or 25 rounds,
 * then the passes after it; see docs/PASSES.md) or a comma-separated list of pass names run once
 * each in order. steps (may be NULL) receives a malloc'd array of the steps run (*n_steps of
 * them). Returns 0, or an error naming an unknown pass. */
int gopt_pipeline_run(const char *spec, const gopt_graph *in, gopt_graph **out,
                      gopt_pipeline_step **steps, size_t *n_steps, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
