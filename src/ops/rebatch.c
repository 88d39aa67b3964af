/* rebatch.c: gopt_graph_rebatch (ops.h): a fixed-batch-1 export run at another batch size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/gpu_cost.h"
#include "gopt/ops.h"

/* Sets dim 0 of every graph input whose dim 0 is 1 to batch (the corpus's fixed-batch exports)
 * and scales the constant Reshape targets of activations to match (call after a first shape
 * inference folded the shape computations). Returns 0 or GOPT_ENOMEM. */
static int rebatch_consts(gopt_graph *g, int64_t batch) {
  uint8_t *done = calloc(g->tensors.n + 1, 1), *dyn = gopt_gpu_dynamic_tensors(g);
  if (!done || !dyn) {
    free(done);
    free(dyn);
    return GOPT_ENOMEM;
  }
  for (size_t i = 0; i < g->inputs.n; i++) {
    int32_t t = g->inputs.a[i];
    gopt_tensor *x = &g->tensors.a[t];
    if ((x->flags & GOPT_T_NOSHAPE) || x->rank < 1) continue;
    int64_t d[GOPT_MAX_RANK];
    int r = x->rank;
    memcpy(d, gopt_tensor_dims(g, t), (size_t)r * sizeof *d);
    if (d[0] != 1) continue;
    d[0] = batch;
    int rc = gopt_tensor_set_shape(g, t, r, d);
    if (rc) {
      free(done);
      free(dyn);
      return rc;
    }
  }
  /* Reshape targets (constants once folded) of activations: the leading dim carries the batch
   * (alone, or folded with other dims as in [64, 49, 96] = windows x tokens); -1 adapts alone */
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].op != GOPT_OP_RESHAPE || g->nodes.a[n].n_in < 2)
      continue;
    int32_t x = gopt_node_input(g, (int32_t)n, 0), s = gopt_node_input(g, (int32_t)n, 1);
    if (x < 0 || !dyn[x]) continue; /* not computed from the inputs: no batch */
    int64_t *v = s >= 0 && g->tensors.a[s].dtype == GOPT_DT_INT64
                     ? (int64_t *)(uintptr_t)gopt_tensor_data(g, s) : NULL;
    int64_t k = v ? gopt_tensor_numel(g, s) : 0, minus = 0;
    for (int64_t i = 0; i < k; i++) minus |= v[i] == -1;
    if (k < 1 || v[0] <= 0 || done[s]) continue;
    if (!minus) v[0] *= batch;
    else if (v[0] == 1) v[0] = batch;
    done[s] = 1; /* a target shared by several Reshapes changes once */
  }
  free(done);
  free(dyn);
  return 0;
}

int gopt_graph_rebatch(gopt_graph *g, int64_t batch, gopt_error *err) {
  int any = 0;
  for (size_t i = 0; i < g->inputs.n; i++) {
    const gopt_tensor *x = &g->tensors.a[g->inputs.a[i]];
    any |= !(x->flags & GOPT_T_NOSHAPE) && x->rank >= 1 && gopt_tensor_dims(g, g->inputs.a[i])[0] == 1;
  }
  if (!any)
    return gopt_error_set(err, GOPT_EINVAL, "--batch: the model has no symbolic batch dimension and no "
                                            "input of batch 1");
  if (batch == 1) return 0;
  if (rebatch_consts(g, batch)) return gopt_error_set(err, GOPT_ENOMEM, "--batch: out of memory");
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  return gopt_infer_shapes(g, &io, err);
}
