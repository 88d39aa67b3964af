/* exec_hoist.c: constant-step hoisting, part of the optimised executor (`--layouts auto`). A step
 * whose every input is a constant (a weight, an initializer, or an output of another hoisted
 * step) computes the same values on every run: swin_t's shifted-window attention masks (Equal,
 * Not, Cast, Where over [64, 49, 49] built from ConstantOfShape/ScatterND) are such steps, and
 * shape inference folds only small values. They run once at plan time, in order; their outputs
 * become constants the executor owns, and the steps leave the step list, so a run neither
 * recomputes nor counts them (like weights, they are not activations in `peak_bytes`). */
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* Whether step k may run once at plan time: deterministic, every input a constant with data,
 * every output a plain (row-major), non-STRING activation that is not a graph output. */
static int hoistable(const gopt_exec *x, const ex_kernel *k) {
  const gopt_graph *g = x->g;
  const char *type = gopt_node_type(g, k->node);
  if (!strncmp(type, "Random", 6) || !strcmp(type, "Bernoulli") || !strcmp(type, "Multinomial") ||
      !strncmp(type, "hlo::rng", 8) || ex_control_handles(x, k->node) || ex_string_handles(x, k->node))
    return 0;
  int n_real = 0;
  for (int j = 0; j < k->n_in; j++) {
    int32_t t = k->in[j];
    if (t < 0) continue;
    if (x->vals[t].kind != EX_V_CONST || !x->vals[t].data) return 0;
    n_real++;
  }
  if (!n_real && g->nodes.a[k->node].op != GOPT_OP_CONSTANT) return 0;
  if (k->n_out < 1) return 0;
  for (int j = 0; j < k->n_out; j++) {
    int32_t t = k->out[j];
    if (t < 0 || x->vals[t].kind != EX_V_ACT || ex_layout_nbytes(x, t) || ex_dtype(x, t) == GOPT_DT_STRING ||
        gopt_dtype_size(ex_dtype(x, t)) == 0)
      return 0;
    for (size_t i = 0; i < g->outputs.n; i++)
      if (g->outputs.a[i] == t) return 0;
  }
  return 1;
}

/* Runs step k with freshly owned output buffers and turns its outputs into constants. */
static int run_once(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  for (int j = 0; j < k->n_out; j++) {
    int32_t t = k->out[j];
    size_t nb = (size_t)ex_numel(x, t) * gopt_dtype_size(ex_dtype(x, t));
    void *p = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
    if (!p || ex_own(x, p)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    x->vals[t].data = p;
    x->vals[t].nbytes = nb;
  }
  int rc = k->run(x, k, err);
  for (int j = 0; j < k->n_out; j++) {
    x->vals[k->out[j]].kind = rc ? EX_V_ACT : EX_V_CONST;
    if (rc) x->vals[k->out[j]].data = NULL; /* owned: freed with the executor */
  }
  return rc;
}

int ex_hoist_const_steps(gopt_exec *x, gopt_error *err) {
  size_t kept = 0;
  x->n_hoisted = 0;
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    if (hoistable(x, k)) {
      int rc = run_once(x, k, err);
      if (rc) { /* keep this step and the rest, so that gopt_exec_free frees each once */
        memmove(&x->steps[kept], k, (x->n_steps - s) * sizeof *k);
        x->n_steps = kept + (x->n_steps - s);
        return rc;
      }
      if (k->fini && k->st) k->fini(k->st);
      free(k->in);
      free(k->out);
      free(k->reuse);
      x->n_hoisted += (size_t)(k->n_members > 0 ? k->n_members : 1);
      continue;
    }
    x->steps[kept++] = *k;
  }
  x->n_steps = kept;
  return GOPT_OK;
}

size_t gopt_exec_n_hoisted(const gopt_exec *x) { return x ? x->n_hoisted : 0; }
