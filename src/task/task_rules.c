/* task_rules.c: rule-based fusion bits, the compiler heuristics the fusion task starts from and
 * compares against (docs/TASKS.md states the rules):
 *   XLA: loop-fusible producers (shape, elementwise, broadcast, injective) fuse into consumers
 *        that are loop- or input-fusible (those classes and reductions); a producer with several
 *        consumers only when it is cheap (shape op, or elementwise/broadcast with at most one
 *        FLOP per output element: no duplication of expensive producers); at most 64 operands
 *        (external input tensors) per fusion.
 *   TVM: conv-like ops (conv, matmul, pooling) absorb elementwise/broadcast consumers; shape,
 *        elementwise, broadcast and injective ops fuse into such ops and into reductions;
 *        reductions end a group (never fuse into their consumers); at most 256 ops and one
 *        conv-like op per group. */
#include <stdlib.h>

#include "gopt/ops.h"
#include "task/task_internal.h"

static int loop_fusible(int cls) {
  return cls == GOPT_OPC_SHAPE || cls == GOPT_OPC_ELEMWISE || cls == GOPT_OPC_BROADCAST ||
         cls == GOPT_OPC_INJECTIVE;
}

/* XLA's "cheap to duplicate": metadata ops, and elementwise/broadcast ops of <= 1 FLOP/element. */
static int cheap(const gopt_env *e, int32_t p) {
  int cls = e->cls[p];
  if (cls == GOPT_OPC_SHAPE) return 1;
  if (cls != GOPT_OPC_ELEMWISE && cls != GOPT_OPC_BROADCAST) return 0;
  const gopt_graph *g = e->g;
  int32_t id = e->order[p];
  gopt_cost co = {0};
  task_node_cost(e, id, &co);
  const gopt_node *nd = &g->nodes.a[id];
  double numel = 0;
  for (uint32_t k = 0; k < nd->n_out; k++) {
    int32_t t = g->outs.a[nd->out + k];
    if (t >= 0) numel += (double)gopt_tensor_numel(g, t);
  }
  return co.flops <= numel;
}

static int merged_ops(const task_grouper *gr, int32_t p, const int32_t *roots, int nr) {
  int32_t ops = gr->nops[p];
  for (int i = 0; i < nr; i++) ops += gr->nops[roots[i]];
  /* inputs that become internal: producer p's tensors read by each consumer */
  const gopt_env *e = gr->e;
  const gopt_graph *g = e->g;
  for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++) {
    const gopt_node *nc = &g->nodes.a[e->order[e->succ[j]]];
    for (uint32_t i = 0; i < nc->n_in; i++) {
      int32_t t = g->slots.a[nc->in + i].tensor;
      if (t < 0 || g->tensors.a[t].producer != e->order[p]) continue;
      int dup = 0;
      for (uint32_t k = 0; k < i && !dup; k++) dup = g->slots.a[nc->in + k].tensor == t;
      ops -= !dup;
    }
  }
  return ops;
}

static int xla_accept(const task_grouper *gr, int32_t p, const int32_t *roots, int nr, void *user) {
  (void)user;
  return merged_ops(gr, p, roots, nr) <= 64;
}

static int tvm_accept(const task_grouper *gr, int32_t p, const int32_t *roots, int nr, void *user) {
  (void)user;
  int32_t size = 1, conv = gr->nconv[p];
  for (int i = 0; i < nr; i++) {
    size += gr->size[roots[i]];
    conv += gr->nconv[roots[i]];
  }
  return size <= 256 && conv <= 1;
}

int task_fusion_rules(const gopt_env *e, int rules, const int32_t *dev, double *x) {
  if (e->n_fuse == 0) return GOPT_OK;
  uint8_t *want = calloc((size_t)e->n + 1, 1);
  task_grouper *gr = want ? task_grouper_new(e) : NULL;
  if (!gr) {
    free(want);
    return GOPT_ENOMEM;
  }
  for (int32_t p = 0; p < e->n; p++) {
    if (e->fuse_var[p] < 0 || rules == TASK_FUSE_NONE) continue;
    int cls = e->cls[p], all_loop = 1, all_ew = 1;
    int32_t ncons = e->succ_off[p + 1] - e->succ_off[p];
    for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++) {
      int c = e->cls[e->succ[j]];
      all_loop &= loop_fusible(c) || c == GOPT_OPC_REDUCE;
      all_ew &= c == GOPT_OPC_ELEMWISE || c == GOPT_OPC_BROADCAST;
    }
    if (rules == TASK_FUSE_XLA)
      want[p] = loop_fusible(cls) && all_loop && (ncons == 1 || cheap(e, p));
    else
      want[p] = (cls == GOPT_OPC_CONV && all_ew) || (loop_fusible(cls) && all_loop);
  }
  task_grouper_build(gr, want, dev, rules == TASK_FUSE_XLA ? xla_accept : rules == TASK_FUSE_TVM ? tvm_accept : NULL,
                     NULL);
  for (int32_t p = 0; p < e->n; p++)
    if (e->fuse_var[p] >= 0) x[e->fuse_var[p]] = gr->eff[p];
  task_grouper_free(gr);
  free(want);
  return GOPT_OK;
}
