/* k_ref_ml.c: reference kernel (k_ref.h) of ai.onnx.ml's TreeEnsemble (opset 5): every tree
 * walked from its root to a leaf per input row, the leaves' weights aggregated per target
 * (AVERAGE, SUM, MIN, MAX) and post-transformed (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT),
 * as the operator specification and onnx's reference implementation state them. The string
 * and map op LabelEncoder is in k_string.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

enum { TE_LEQ, TE_LT, TE_GTE, TE_GT, TE_EQ, TE_NEQ, TE_MEMBER };
enum { TE_AVERAGE, TE_SUM, TE_MIN, TE_MAX };
enum { TE_NONE, TE_SOFTMAX, TE_LOGISTIC, TE_SOFTMAX_ZERO, TE_PROBIT };

/* The tree-ensemble's attributes as doubles (te_load; te_free releases them). */
typedef struct te_attrs {
  double *modes, *splits, *feat, *tnode, *fnode, *tleaf, *fleaf, *missing, *roots, *ltarget, *lweight, *members;
  int64_t n_nodes, n_roots, n_leaves, n_members, n_missing;
  int64_t *set_start; /* per node: first index in members of its set (TE_MEMBER nodes) */
} te_attrs;

static void te_free(te_attrs *a) {
  double **f[] = {&a->modes, &a->splits, &a->feat, &a->tnode, &a->fnode, &a->tleaf,
                  &a->fleaf, &a->missing, &a->roots, &a->ltarget, &a->lweight, &a->members};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) free(*f[i]);
  free(a->set_start);
}

/* Reads and checks the attributes: every nodes_* list as long as nodes_modes, leaf_* lists of one
 * length, indices in range. Returns 0 or a node error. */
static int te_load(gopt_exec *x, ex_kernel *k, te_attrs *a, int64_t n_feat, gopt_error *err) {
  int64_t c[12] = {0};
  const char *nm[] = {"nodes_modes", "nodes_splits", "nodes_featureids", "nodes_truenodeids",
                      "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs",
                      "nodes_missing_value_tracks_true", "tree_roots", "leaf_targetids", "leaf_weights",
                      "membership_values"};
  double **dst[] = {&a->modes, &a->splits, &a->feat, &a->tnode, &a->fnode, &a->tleaf,
                    &a->fleaf, &a->missing, &a->roots, &a->ltarget, &a->lweight, &a->members};
  for (int i = 0; i < 12; i++) {
    *dst[i] = ref_attr_values(x, NODE, nm[i], &c[i]);
    if (c[i] < 0) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  a->n_nodes = c[0], a->n_missing = c[7], a->n_roots = c[8], a->n_leaves = c[9], a->n_members = c[11];
  for (int i = 1; i < 7; i++)
    if (c[i] != a->n_nodes)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s has %lld values, nodes_modes %lld", nm[i],
                           (long long)c[i], (long long)a->n_nodes);
  if ((a->n_missing && a->n_missing != a->n_nodes) || c[10] != a->n_leaves || !a->n_roots)
    return ex_node_error(x, NODE, err, GOPT_EINVAL,
                         "needs tree_roots, leaf_targetids and leaf_weights of one length, and "
                         "nodes_missing_value_tracks_true absent or one per node");
  if (!(a->set_start = calloc((size_t)a->n_nodes + 1, sizeof *a->set_start)))
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int64_t pos = 0; /* membership_values: one NaN-terminated set per TE_MEMBER node, in node order */
  for (int64_t i = 0; i < a->n_nodes; i++) {
    int64_t ids[2] = {(int64_t)a->tnode[i], (int64_t)a->fnode[i]};
    double lf[2] = {a->tleaf[i], a->fleaf[i]};
    for (int b = 0; b < 2; b++)
      if (ids[b] < 0 || ids[b] >= (lf[b] ? a->n_leaves : a->n_nodes))
        return ex_node_error(x, NODE, err, GOPT_EINVAL, "node %lld: %s id %lld is out of range", (long long)i,
                             lf[b] ? "leaf" : "node", (long long)ids[b]);
    if (a->modes[i] < TE_LEQ || a->modes[i] > TE_MEMBER || a->feat[i] < 0 || a->feat[i] >= (double)n_feat)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "node %lld: mode %g or feature %g is out of range",
                           (long long)i, a->modes[i], a->feat[i]);
    if (a->modes[i] != TE_MEMBER) continue;
    a->set_start[i] = pos;
    while (pos < a->n_members && !isnan(a->members[pos])) pos++;
    if (pos++ >= a->n_members)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "membership_values has no NaN-ended set for node %lld",
                           (long long)i);
  }
  for (int64_t i = 0; i < a->n_leaves; i++)
    if (a->ltarget[i] < 0)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "leaf_targetids[%lld] is negative", (long long)i);
  for (int64_t i = 0; i < a->n_roots; i++)
    if (a->roots[i] < 0 || a->roots[i] >= (double)a->n_nodes)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "tree_roots[%lld] is out of range", (long long)i);
  return GOPT_OK;
}

/* Whether row value v takes node i's true branch. */
static int te_true(const te_attrs *a, int64_t i, double v) {
  if (isnan(v) && a->n_missing) return a->missing[i] != 0;
  double s = a->splits[i];
  switch ((int)a->modes[i]) {
    case TE_LEQ: return v <= s;
    case TE_LT: return v < s;
    case TE_GTE: return v >= s;
    case TE_GT: return v > s;
    case TE_EQ: return v == s;
    case TE_NEQ: return v != s;
    default:
      for (int64_t p = a->set_start[i]; p < a->n_members && !isnan(a->members[p]); p++)
        if (a->members[p] == v) return 1;
      return 0;
  }
}

/* Leaf index reached from root r for row xr (at most n_nodes steps: a cycle is an error). */
static int64_t te_walk(const te_attrs *a, int64_t r, const double *xr) {
  int64_t i = r;
  for (int64_t step = 0; step <= a->n_nodes; step++) {
    int t = te_true(a, i, xr[(int64_t)a->feat[i]]);
    int64_t nxt = (int64_t)(t ? a->tnode[i] : a->fnode[i]);
    if (t ? a->tleaf[i] : a->fleaf[i]) return nxt;
    i = nxt;
  }
  return -1;
}

/* Inverse of the standard normal CDF's erf form: erfinv(y) for |y| < 1 (Giles' approximation,
 * refined by two Newton steps on erf). */
static double te_erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -log((1 - y) * (1 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    const double c[] = {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                        -0.00417768164, 0.246640727, 1.50140941};
    for (int i = 0; i < 8; i++) p = c[i] + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    const double c[] = {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                        0.00943887047, 1.00167406, 2.83297682};
    for (int i = 0; i < 8; i++) p = c[i] + p * w;
  }
  double r = p * y;
  for (int i = 0; i < 2; i++) r -= (erf(r) - y) / (2 / sqrt(M_PI) * exp(-r * r));
  return r;
}

/* post_transform of one row of T scores, in place. */
static void te_post(int pt, double *s, int64_t T) {
  if (pt == TE_LOGISTIC)
    for (int64_t j = 0; j < T; j++) s[j] = 1 / (1 + exp(-s[j]));
  else if (pt == TE_PROBIT)
    for (int64_t j = 0; j < T; j++) s[j] = sqrt(2) * te_erfinv(2 * s[j] - 1);
  else if (pt == TE_SOFTMAX || pt == TE_SOFTMAX_ZERO) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < T; j++)
      if (pt == TE_SOFTMAX || s[j] != 0) mx = fmax(mx, s[j]);
    for (int64_t j = 0; j < T; j++) {
      if (pt == TE_SOFTMAX_ZERO && s[j] == 0) continue;
      sum += (s[j] = exp(s[j] - mx));
    }
    for (int64_t j = 0; j < T; j++) s[j] = sum > 0 ? s[j] / sum : s[j];
  }
}

/* TreeEnsemble: X [N, F] -> Y [N, n_targets]; each tree adds its leaf's weight to the leaf's
 * target (SUM, AVERAGE: divided by the number of trees) or keeps the smallest / largest (MIN,
 * MAX: a target no leaf reached keeps the dtype's largest / lowest value, as onnx's reference). */
static int f_tree_ensemble(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  if (in[0].rank != 2 || out[0].rank != 2 || out[0].d[0] != in[0].d[0])
    return ex_node_error(x, NODE, err, GOPT_ESHAPE, "X must be [N, F] and Y [N, n_targets]");
  int64_t N = in[0].d[0], F = in[0].d[1], T = out[0].d[1];
  int agg = (int)gopt_node_get_int(G, NODE, "aggregate_function", TE_SUM);
  int pt = (int)gopt_node_get_int(G, NODE, "post_transform", TE_NONE);
  if (agg < TE_AVERAGE || agg > TE_MAX || pt < TE_NONE || pt > TE_PROBIT)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "aggregate_function %d or post_transform %d is out of range", agg, pt);
  te_attrs a = {0};
  int rc = te_load(x, k, &a, F, err);
  for (int64_t i = 0; !rc && i < a.n_leaves; i++)
    if (a.ltarget[i] >= (double)T)
      rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "leaf_targetids[%lld] = %g is not below n_targets %lld",
                         (long long)i, a.ltarget[i], (long long)T);
  double big = out[0].dt == GOPT_DT_DOUBLE ? DBL_MAX : out[0].dt == GOPT_DT_FLOAT16 ? 65504.0 : FLT_MAX;
  for (int64_t r = 0; !rc && r < N; r++) {
    double *s = out[0].v + r * T;
    for (int64_t j = 0; j < T; j++) s[j] = agg == TE_MIN ? big : agg == TE_MAX ? -big : 0;
    for (int64_t t = 0; !rc && t < a.n_roots; t++) {
      int64_t leaf = te_walk(&a, (int64_t)a.roots[t], in[0].v + r * F);
      if (leaf < 0) {
        rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "tree %lld has a cycle", (long long)t);
        break;
      }
      double w = a.lweight[leaf], *d = &s[(int64_t)a.ltarget[leaf]];
      *d = agg == TE_MIN ? fmin(*d, w) : agg == TE_MAX ? fmax(*d, w) : *d + w;
    }
    if (agg == TE_AVERAGE)
      for (int64_t j = 0; j < T; j++) s[j] /= (double)a.n_roots;
    te_post(pt, s, T);
  }
  te_free(&a);
  return rc;
}

const ref_entry ex_ref_ml_table[] = {
    {"ai.onnx.ml::TreeEnsemble", f_tree_ensemble, NULL},
    {NULL, NULL, NULL},
};
