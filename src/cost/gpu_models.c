/* gpu_models.c: whole-model features for the GPU calibration: an ONNX model loaded at a batch
 * size (a fixed-batch-1 export re-batched by gopt_graph_rebatch), optionally turned into a training step, its nodes' features summed. */

#include "cost/gpu_internal.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/train.h"

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
  if (!rc && !sym && batch != 1) rc = gopt_graph_rebatch(g, batch, err);
  if (!rc && training) rc = gopt_train_build(g, NULL, err);
  if (rc) {
    gopt_error_prefix(err, "%s: batch %d%s: ", path, batch, training ? " training" : "");
  } else {
    gpu_graph_features(g, -1, phi);
  }
  gopt_graph_free(g);
  return rc;
}
