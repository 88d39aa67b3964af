/* learn_colocate.c: go's placement decodes, post-processed: a constant subexpression (a node
 * without kernel time that reads only weights and other such nodes: a weight transpose the cost
 * model folds, a Shape of a weight) moves to the device where it makes the fewest bytes cross a
 * link, in practice its reader's. It costs nothing where it runs, but away from its reader its
 * output is sent at time 0 and holds the link while the step's first transfers queue behind it
 * (docs/LEARNED.md, "Constant subexpressions follow their readers"). The head decides clusters by
 * kernel time, where these nodes weigh nothing. Views of activations (zero-time Squeeze, Reshape,
 * Shape) are left where the policy put them: there the device also orders them behind its other
 * kernels, and moving them by bytes alone measured worse. */
#include <stdlib.h>

#include "learn/learn_internal.h"

struct learn_coloc {
  int64_t n;        /* rows (topological positions) */
  int32_t *xvar;    /* n: each row's device variable in x, -1: none or not a constant subexpression */
  int32_t *pp, *pr; /* per row: its distinct producer rows (CSR) */
  int32_t *sp, *sr; /* per row: its distinct reader rows (CSR), in row order */
  double *bytes;    /* n: bytes of each row's outputs (what moves to a reader's device) */
  int32_t *rdev;    /* n_dev + 1 scratch: reader devices seen (-1, a row without a device variable,
                     * is one more) */
};

void learn_coloc_free(learn_coloc *c) {
  if (!c) return;
  free(c->xvar);
  free(c->pp);
  free(c->pr);
  free(c->sp);
  free(c->sr);
  free(c->bytes);
  free(c->rdev);
  free(c);
}

int learn_coloc_new(const gopt_env *e, const learn_graph *lg, learn_coloc **out, gopt_error *err) {
  *out = NULL;
  const gopt_graph *g = gopt_env_graph(e);
  size_t N = g->nodes.n;
  learn_coloc *c = calloc(1, sizeof *c);
  int32_t *topo = malloc((N + 1) * sizeof *topo), *pos = malloc((N + 1) * sizeof *pos);
  int64_t n = lg->n;
  int rc = !c || !topo || !pos ? GOPT_ENOMEM : 0;
  if (rc) goto done;
  c->n = n;
  c->xvar = malloc(((size_t)n + 1) * sizeof *c->xvar);
  c->bytes = malloc(((size_t)n + 1) * sizeof *c->bytes);
  c->rdev = malloc(((size_t)lg->n_dev + 1) * sizeof *c->rdev);
  if (!c->xvar || !c->bytes || !c->rdev) { rc = GOPT_ENOMEM; goto done; }
  if ((rc = learn_row_index(g, n, topo, pos, c->bytes, err))) goto done;
  for (int64_t i = 0; i < n; i++) c->xvar[i] = -1;
  for (int64_t v = 0; v < lg->nk[GOPT_VAR_DEVICE]; v++) {
    int32_t r = lg->rows[GOPT_VAR_DEVICE][v];
    if (learn_row_us(lg, r) <= 0) c->xvar[r] = lg->var[GOPT_VAR_DEVICE][v];
  }
  /* each row's distinct producers and readers (a node reading one tensor twice, or two tensors of
   * one producer, counts once) */
  if (learn_row_csr(g, pos, n, 0, 1, &c->pp, &c->pr) || learn_row_csr(g, pos, n, 1, 1, &c->sp, &c->sr)) {
    rc = GOPT_ENOMEM;
    goto done;
  }
  for (int64_t r = 0; r < n; r++) /* only constant subexpressions: zero-time rows reading only such rows */
    for (int32_t j = c->pp[r]; j < c->pp[r + 1] && c->xvar[r] >= 0; j++)
      if (c->xvar[c->pr[j]] < 0) c->xvar[r] = -1;
done:
  if (rc == GOPT_ENOMEM) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (colocate)");
  free(topo);
  free(pos);
  if (rc) learn_coloc_free(c);
  else *out = c;
  return rc;
}

/* Bytes that cross a link if row r runs on device d: each producer on another device sends its
 * outputs, and r's outputs go once to each other device its readers run on. */
static double coloc_cost(learn_coloc *c, const int32_t *dev_of, int64_t r, int d) {
  double b = 0;
  int nr = 0;
  for (int32_t j = c->pp[r]; j < c->pp[r + 1]; j++)
    if (dev_of[c->pr[j]] != d) b += c->bytes[c->pr[j]];
  for (int32_t j = c->sp[r]; j < c->sp[r + 1]; j++) {
    int rd = dev_of[c->sr[j]], seen = rd == d;
    for (int i = 0; i < nr && !seen; i++) seen = c->rdev[i] == rd;
    if (seen) continue;
    c->rdev[nr++] = rd;
    b += c->bytes[r];
  }
  return b;
}

/* Visits the constant subexpressions in reverse topological order, so that a chain of them follows
 * its last reader back to its source, and moves each to the device of least coloc_cost among its
 * readers' and producers' devices; ties go to its first reader's device, then to where it is. */
void learn_coloc_apply(learn_coloc *c, const learn_graph *lg, double *x, int32_t *dev_of) {
  for (int64_t r = 0; r < c->n; r++) dev_of[r] = -1;
  for (int64_t v = 0; v < lg->nk[GOPT_VAR_DEVICE]; v++)
    dev_of[lg->rows[GOPT_VAR_DEVICE][v]] = (int32_t)x[lg->var[GOPT_VAR_DEVICE][v]];
  for (int64_t r = c->n - 1; r >= 0; r--) {
    if (c->xvar[r] < 0 || c->sp[r] == c->sp[r + 1] || dev_of[r] < 0) continue;
    int best = dev_of[r], first = dev_of[c->sr[c->sp[r]]];
    double bc = coloc_cost(c, dev_of, r, best), b;
    if (first >= 0 && first != best && (b = coloc_cost(c, dev_of, r, first)) <= bc) { bc = b; best = first; }
    for (int32_t j = c->sp[r]; j < c->sp[r + 1]; j++) {
      int d = dev_of[c->sr[j]];
      if (d >= 0 && d != best && (b = coloc_cost(c, dev_of, r, d)) < bc) { bc = b; best = d; }
    }
    for (int32_t j = c->pp[r]; j < c->pp[r + 1]; j++) {
      int d = dev_of[c->pr[j]];
      if (d >= 0 && d != best && (b = coloc_cost(c, dev_of, r, d)) < bc) { bc = b; best = d; }
    }
    dev_of[r] = best;
    x[c->xvar[r]] = best;
  }
}
