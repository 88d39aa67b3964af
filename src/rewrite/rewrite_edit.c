/* rewrite_edit.c: graph-editing helpers of rule application: fresh tensors and constants,
 * rewiring that keeps graph output names, dead-code removal and the finishing checks (cycle,
 * shapes, compaction). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "ir/ir_internal.h"
#include "rewrite/rewrite_internal.h"

int32_t rw_new_tensor(gopt_graph *g, gopt_error *err) {
  return gopt_graph_add_tensor(g, NULL, GOPT_DT_FLOAT, -1, NULL, err);
}

int32_t rw_const(gopt_graph *g, int dtype, int rank, const int64_t *dims, const void *data,
                 gopt_error *err) {
  int32_t t = gopt_graph_add_tensor(g, NULL, dtype, rank, dims, err);
  if (t < 0) return -1;
  size_t nb = (size_t)gopt_tensor_numel(g, t) * gopt_dtype_size(dtype);
  if (gopt_tensor_set_const(g, t, data, nb, err)) return -1;
  if (!data) g->consts.a[g->tensors.a[t].cdata].nbytes = nb;
  g->tensors.a[t].flags |= GOPT_T_INIT;
  if (dtype == GOPT_DT_FLOAT) g->tensors.a[t].flags |= GOPT_T_PARAM;
  return t;
}

static int is_graph_output(const gopt_graph *g, int32_t t) {
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == t) return 1;
  return 0;
}

int rw_replace(gopt_graph *g, int32_t from, int32_t to, gopt_error *err) {
  int out = is_graph_output(g, from);
  gopt_graph_replace_uses(g, from, to);
  if (!out) return 0;
  /* swap names: the graph output keeps its name */
  uint32_t a = g->tensors.a[from].name, b = g->tensors.a[to].name;
  g->tensors.a[from].name = b;
  g->tensors.a[to].name = a;
  if (ir_graph_index_name(g, a, to) || ir_graph_index_name(g, b, from))
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  return 0;
}

void rw_dce(gopt_graph *g) {
  int changed = 1;
  while (changed) {
    changed = 0;
    for (size_t n = 0; n < g->nodes.n; n++) {
      if (!gopt_node_alive(g, (int32_t)n)) continue;
      int used = 0;
      for (int k = 0; k < g->nodes.a[n].n_out && !used; k++) {
        int32_t t = gopt_node_output(g, (int32_t)n, k);
        if (t >= 0 && (gopt_tensor_use_count(g, t) || is_graph_output(g, t))) used = 1;
      }
      if (!used) {
        gopt_graph_remove_node(g, (int32_t)n);
        changed = 1;
      }
    }
  }
}

int rw_finish(gopt_graph *h, gopt_error *err) {
  int32_t *order = malloc((h->nodes.n + 1) * sizeof *order);
  if (!order) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  gopt_error e2 = {0};
  int64_t k = gopt_graph_topo(h, order, &e2);
  free(order);
  if (k < 0) return gopt_error_set(err, GOPT_EGRAPH, "the rewrite would create a cycle (%s)", e2.msg);
  rw_dce(h);
  gopt_infer_opts io = {1, 1};
  return gopt_infer_shapes(h, &io, err);
}
