/* k_hlo_norm.c: the executor's HLO batch normalisation ops, as XLA's operation semantics define
 * them, with every statistic over all dimensions but feature_index (m elements per feature):
 * - batch-norm-training(x, scale, offset) -> (y, mean, var): var is the biased variance
 *   mean((x - mean)^2), y = (x - mean) / sqrt(var + epsilon) * scale + offset;
 * - batch-norm-inference(x, scale, offset, mean, var) -> y, the same formula with the given mean
 *   and variance;
 * - batch-norm-grad(x, scale, mean, var, dy) -> (dx, dscale, doffset): doffset = sum(dy),
 *   dscale = sum(dy (x - mean)) / sqrt(var + eps), dx = scale / sqrt(var + eps) (dy - sum(dy) / m
 *   - (x - mean) sum(dy (x - mean)) / (m (var + eps))). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_hlo.h"

#define NODE (k->node)
#define G (x->g)

/* Feature index of element i of t viewed as [outer, C, inner]. */
#define FEAT(i) (((i) / inner) % C)

static int f_batch_norm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const char *op = ex_hlo_op(G, NODE);
  int train = !strcmp(op, "batch-norm-training"), grad = !strcmp(op, "batch-norm-grad");
  int64_t fi = gopt_node_get_int(G, NODE, "feature_index", -1);
  double eps = gopt_node_get_float(G, NODE, "epsilon", 0);
  if (fi < 0 || fi >= in[0].rank || nin != (train ? 3 : 5) || nout != (train || grad ? 3 : 1))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: operands, results or feature_index do not fit", op);
  int64_t outer, C, inner;
  ref_split3(&in[0], (int)fi, &outer, &C, &inner);
  for (int j = 1; j < nin; j++)
    if (in[j].n != (grad && j == 4 ? in[0].n : C)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: operand %d has the wrong size", op, j);
  double m = (double)(outer * inner);
  double *st = calloc((size_t)(4 * C + 1), sizeof *st), *mean = st, *var = st + C, *sdy = st + 2 * C, *sdyx = st + 3 * C;
  if (!st) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  const double *xv = in[0].v;
  if (train) {
    for (int64_t i = 0; i < in[0].n; i++) mean[FEAT(i)] += xv[i];
    for (int64_t c = 0; c < C; c++) mean[c] /= m;
    for (int64_t i = 0; i < in[0].n; i++) var[FEAT(i)] += (xv[i] - mean[FEAT(i)]) * (xv[i] - mean[FEAT(i)]);
    for (int64_t c = 0; c < C; c++) var[c] /= m;
  } else {
    memcpy(mean, in[grad ? 2 : 3].v, (size_t)C * sizeof *mean);
    memcpy(var, in[grad ? 3 : 4].v, (size_t)C * sizeof *var);
  }
  if (!grad) {
    const double *sc = in[1].v, *of = in[2].v;
    for (int64_t i = 0; i < in[0].n; i++) {
      int64_t c = FEAT(i);
      out[0].v[i] = (xv[i] - mean[c]) / sqrt(var[c] + eps) * sc[c] + of[c];
    }
    if (train) memcpy(out[1].v, mean, (size_t)C * sizeof *mean), memcpy(out[2].v, var, (size_t)C * sizeof *var);
  } else {
    const double *sc = in[1].v, *dy = in[4].v;
    for (int64_t i = 0; i < in[0].n; i++) sdy[FEAT(i)] += dy[i], sdyx[FEAT(i)] += dy[i] * (xv[i] - mean[FEAT(i)]);
    for (int64_t i = 0; i < in[0].n; i++) {
      int64_t c = FEAT(i);
      double r = 1 / sqrt(var[c] + eps);
      out[0].v[i] = sc[c] * r * (dy[i] - sdy[c] / m - (xv[i] - mean[c]) * sdyx[c] / (m * (var[c] + eps)));
    }
    for (int64_t c = 0; c < C; c++) out[1].v[c] = sdyx[c] / sqrt(var[c] + eps), out[2].v[c] = sdy[c];
  }
  free(st);
  return GOPT_OK;
}

ref_fn ex_hlo_norm_kernel(const gopt_graph *g, int32_t n) {
  const char *op = ex_hlo_op(g, n);
  if (op && (!strcmp(op, "batch-norm-training") || !strcmp(op, "batch-norm-inference") || !strcmp(op, "batch-norm-grad")))
    return f_batch_norm;
  return NULL;
}
