/* gpu_internal.h: internals of the measured-GPU calibration shared by src/cost/gpu_*.c: one-op
 * graphs built from measurement entries (a PyTorch layer row or a micro-benchmark) and their
 * summed features. */
#ifndef GOPT_GPU_INTERNAL_H
#define GOPT_GPU_INTERNAL_H

#include <jansson.h>

#include "gopt/gpu_cost.h"

/* Row flag beside the GOPT_GPU_LOAD_* ones: the file's "inplace_copy" (an in-place unary layer ran
 * forward + backward on a copy x * 1, tools/gpu_profile.py, whose kernels count). */
#define GPU_ROW_INPLACE_COPY (1u << 16)

/* Features of a PyTorch layer row {"layer", "attrs", "in", "out"} run forward (bwd = 0) or forward
 * + backward with respect to its input and parameters (bwd = 1), added into phi; flags:
 * GPU_ROW_INPLACE_COPY, GOPT_GPU_LOAD_HARNESS. *kind receives
 * the kind of its main kernel. Returns 1 when done, 0 when the layer launches no kernel gopt
 * models (Dropout, Flatten, Identity...) or has no rule (skipped), or a negative GOPT_E* with err
 * set ("what" is the entry's name for messages). */
int gpu_layer_features(json_t *row, int bwd, unsigned flags, double *phi, int *kind,
                       const char *what, gopt_error *err);

/* Features of one micro-benchmark entry {"op", ...} (see /work/shared/gpu/README.md); same
 * returns as gpu_layer_features. */
int gpu_micro_features(json_t *row, double *phi, int *kind, const char *what, gopt_error *err);

/* Sum of the features of every node of g (shapes inferred); nodes from first_node on count only
 * when flagged GOPT_N_GRAD (so a one-layer training graph keeps its forward and backward ops and
 * drops its loss and updates); first_node < 0: every node. */
void gpu_graph_features(const gopt_graph *g, int32_t first_node, double *phi);

#endif
