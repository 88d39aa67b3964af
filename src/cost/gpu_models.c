/* gpu_models.c: whole-model features for the GPU calibration: an ONNX model loaded at a batch
 * size (a fixed-batch-1 export is re-batched by setting dim 0 of its inputs and re-inferring
 * shapes), optionally turned into a training step, its nodes' features summed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cost/gpu_internal.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/train.h"

/* Sets dim 0 of every graph input whose dim 0 is 1 to batch (the corpus's fixed-batch exports)
 * and scales the constant Reshape targets of activations to match (call after a first shape
 * inference folded the shape computations). Returns 0 or GOPT_ENOMEM. */
static int rebatch(gopt_graph *g, int64_t batch) {
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
    int64_t d[8];
    int r = x->rank > 8 ? 8 : x->rank;
    memcpy(d, gopt_tensor_dims(g, t), (size_t)r * sizeof *d);
    if (d[0] != 1) continue;
    d[0] = batch;
    gopt_tensor_set_shape(g, t, r, d);
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

int gopt_gpu_model_features(const char *path, int batch, int training, double *phi,
                            gopt_error *err) {
  gopt_graph *g = NULL;
  gopt_onnx_load_opts lo = {.base_dir = NULL, .load_external_data = 0};
  int rc = gopt_onnx_load(path, &lo, &g, err);
  if (rc) return rc;
  const char *sym = gopt_graph_batch_symbol(g);
  if (sym) gopt_graph_bind_symbol(g, sym, batch);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  rc = gopt_infer_shapes(g, &io, err);
  if (!rc && !sym && batch != 1) {
    /* shape computations are folded into constants now: re-batch those and infer again */
    rc = rebatch(g, batch) ? gopt_error_set(err, GOPT_ENOMEM, "out of memory")
                           : gopt_infer_shapes(g, &io, err);
  }
  if (!rc && training) rc = gopt_train_build(g, NULL, err);
  if (rc) {
    gopt_error_prefix(err, "%s: batch %d%s: ", path, batch, training ? " training" : "");
  } else {
    gpu_graph_features(g, -1, phi);
  }
  gopt_graph_free(g);
  return rc;
}
