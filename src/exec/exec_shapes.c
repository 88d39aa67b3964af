/* exec_shapes.c: shapes that depend on the values of a run's inputs (a Range whose length is an
 * input, a window size, a Reshape target computed from an input tensor). Shape inference cannot
 * make them static from the graph alone; once the inputs are known, a copy of the graph with the
 * inputs as constants is inferred again, its value propagation folds the shape subgraphs, and the
 * shapes it finds are given to the original graph's tensors. The executor's kernels then compute
 * the values themselves and check them against those shapes as for any other tensor. */
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/ops.h"

static int graph_has_unknown(const gopt_graph *g) {
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    const gopt_node *nd = &g->nodes.a[n];
    for (int j = 0; j < nd->n_out; j++) {
      int32_t t = gopt_node_output(g, (int32_t)n, j);
      if (t >= 0 && ((g->tensors.a[t].flags & GOPT_T_NOSHAPE) || !gopt_tensor_is_static(g, t))) return 1;
    }
  }
  return 0;
}

int gopt_exec_complete_shapes(gopt_graph *g, const gopt_host_tensor *in, size_t n_in,
                              const gopt_infer_opts *io, gopt_error *err) {
  if (!graph_has_unknown(g) || !n_in) return 0;
  gopt_graph *c = gopt_graph_clone(g);
  if (!c) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc = 0, done = 0;
  size_t k = 0;
  for (size_t i = 0; i < c->inputs.n && k < n_in; i++) {
    int32_t t = c->inputs.a[i];
    if (c->tensors.a[t].flags & GOPT_T_CONST) continue;
    const gopt_host_tensor *h = &in[k++];
    if (h->dtype != c->tensors.a[t].dtype || h->rank != c->tensors.a[t].rank) goto out; /* the run reports it */
    if ((rc = gopt_tensor_set_shape(c, t, h->rank, h->dims)) ||
        (rc = gopt_tensor_set_const(c, t, h->data, h->nbytes, err)))
      goto out;
  }
  gopt_infer_opts o = io ? *io : (gopt_infer_opts){.fold_constants = 1, .keep_source_shapes = 1};
  o.fold_constants = 1;
  if (gopt_infer_shapes(c, &o, NULL)) goto out; /* the original graph's own error stands */
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *gt = &g->tensors.a[t];
    if (!(gt->flags & GOPT_T_NOSHAPE) && gopt_tensor_is_static(g, (int32_t)t)) continue;
    int32_t ct = gopt_graph_find_tensor(c, gopt_graph_str(g, gt->name));
    if (ct < 0 || (c->tensors.a[ct].flags & GOPT_T_NOSHAPE) || !gopt_tensor_is_static(c, ct)) continue;
    if ((rc = gopt_tensor_set_shape(g, (int32_t)t, c->tensors.a[ct].rank, gopt_tensor_dims(c, ct)))) goto out;
    if (gt->dtype == GOPT_DT_UNDEFINED) g->tensors.a[t].dtype = c->tensors.a[ct].dtype; /* e.g. a Scan's */
    done++;
  }
out:
  gopt_graph_free(c);
  if (rc) return rc < 0 ? rc : gopt_error_set(err, GOPT_EINVAL, "completing shapes failed");
  return done;
}
