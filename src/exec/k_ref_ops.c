/* k_ref_ops.c: reference kernels (k_ref.h) for elementwise math the fused engine lacks
 * (trigonometry, Shrink, Celu, Selu, Softsign, BitShift, IsInf, variadic Max/Min/Sum/Mean, integer Mod/Pow/Clip),
 * the Reduce family with run-time axes, ArgMax/ArgMin, Hardmax, CumSum, Trilu, TopK, NonZero,
 * index ops (GatherElements, ScatterElements, GatherND, ScatterND, OneHot, Compress, EyeLike,
 * DepthToSpace, SpaceToDepth, ReverseSequence) and the losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss). ONNX semantics as the operator specification states them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

/* ---- elementwise -------------------------------------------------------------------------------- */

static double unary(const char *op, double v, const gopt_exec *x, int32_t n) {
  if (!strcmp(op, "Tan")) return tan(v);
  if (!strcmp(op, "Sinh")) return sinh(v);
  if (!strcmp(op, "Cosh")) return cosh(v);
  if (!strcmp(op, "Asin")) return asin(v);
  if (!strcmp(op, "Acos")) return acos(v);
  if (!strcmp(op, "Atan")) return atan(v);
  if (!strcmp(op, "Asinh")) return asinh(v);
  if (!strcmp(op, "Acosh")) return acosh(v);
  if (!strcmp(op, "Atanh")) return atanh(v);
  if (!strcmp(op, "ThresholdedRelu")) return v > gopt_node_get_float(G, n, "alpha", 1.0) ? v : 0;
  if (!strcmp(op, "Celu")) {
    double a = gopt_node_get_float(G, n, "alpha", 1.0);
    return (v > 0 ? v : 0) + fmin(0, a * (exp(v / a) - 1));
  }
  if (!strcmp(op, "Selu")) {
    double a = gopt_node_get_float(G, n, "alpha", 1.67326319217681884765625);
    double gm = gopt_node_get_float(G, n, "gamma", 1.05070102214813232421875);
    return gm * (v > 0 ? v : a * (exp(v) - 1));
  }
  if (!strcmp(op, "Softsign")) return v / (1 + fabs(v));
  if (!strcmp(op, "Shrink")) {
    double l = gopt_node_get_float(G, n, "lambd", 0.5), b = gopt_node_get_float(G, n, "bias", 0);
    return v < -l ? v + b : v > l ? v - b : 0;
  }
  if (!strcmp(op, "IsInf")) {
    int neg = (int)gopt_node_get_int(G, n, "detect_negative", 1);
    int pos = (int)gopt_node_get_int(G, n, "detect_positive", 1);
    return isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
  }
  if (!strcmp(op, "Cast") || !strcmp(op, "CastLike") || !strcmp(op, "Identity")) return v;
  return NAN;
}

static int f_unary(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  const char *op = gopt_graph_str(G, G->nodes.a[NODE].type);
  for (int64_t i = 0; i < out[0].n; i++) out[0].v[i] = unary(op, in[0].v[i], x, NODE);
  return GOPT_OK;
}

static double pymod(double a, double b) {
  if (b == 0) return 0;
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* Variadic / binary broadcast ops over every input. */
static int f_nary(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  const char *op = gopt_graph_str(G, G->nodes.a[NODE].type);
  int fmod_ = (int)gopt_node_get_int(G, NODE, "fmod", 0);
  int left = !strcmp(gopt_node_get_string(G, NODE, "direction", "LEFT"), "LEFT");
  for (int64_t o = 0; o < out[0].n; o++) {
    double acc = in[0].v[ref_bcast_index(&in[0], &out[0], o)];
    for (int i = 1; i < nin; i++) {
      if (!in[i].v) continue;
      double b = in[i].v[ref_bcast_index(&in[i], &out[0], o)];
      if (!strcmp(op, "Max")) acc = isnan(acc) || isnan(b) ? NAN : fmax(acc, b);
      else if (!strcmp(op, "Min")) acc = isnan(acc) || isnan(b) ? NAN : fmin(acc, b);
      else if (!strcmp(op, "Sum") || !strcmp(op, "Mean")) acc += b;
      else if (!strcmp(op, "Pow")) acc = pow(acc, b);
      else if (!strcmp(op, "Mod")) acc = fmod_ ? fmod(acc, b) : pymod(acc, b);
      else if (!strcmp(op, "BitShift")) {
        uint64_t a = (uint64_t)acc, s = (uint64_t)b;
        acc = (double)(s >= 64 ? 0 : left ? a << s : a >> s);
      }
    }
    if (!strcmp(op, "Mean")) acc /= nin;
    out[0].v[o] = acc;
  }
  return GOPT_OK;
}

static int f_clip(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  double lo = -INFINITY, hi = INFINITY;
  if (x->opset < 11) {
    lo = gopt_node_get_float(G, NODE, "min", -INFINITY);
    hi = gopt_node_get_float(G, NODE, "max", INFINITY);
  }
  if (nin > 1 && in[1].v && in[1].n) lo = in[1].v[0];
  if (nin > 2 && in[2].v && in[2].n) hi = in[2].v[0];
  for (int64_t i = 0; i < out[0].n; i++) {
    double v = in[0].v[i];
    v = v < lo ? lo : v; /* min(max(v, lo), hi) as numpy.clip: hi wins when lo > hi; NaN stays */
    out[0].v[i] = v > hi ? hi : v;
  }
  return GOPT_OK;
}

/* ---- reductions --------------------------------------------------------------------------------- */

static int red_axes(gopt_exec *x, ex_kernel *k, rt *in, int nin, uint8_t *red, gopt_error *err) {
  int64_t ax[GOPT_MAX_RANK];
  size_t na = 0;
  const char *op = gopt_graph_str(G, G->nodes.a[NODE].type);
  int axes_input = (!strcmp(op, "ReduceSum") && x->opset >= 13) || x->opset >= 18;
  if (axes_input) {
    if (nin > 1 && in[1].v)
      for (; na < (size_t)in[1].n && na < GOPT_MAX_RANK; na++) ax[na] = (int64_t)in[1].v[na];
  } else {
    size_t c = 0;
    const int64_t *a = gopt_node_get_ints(G, NODE, "axes", &c);
    for (; a && na < c && na < GOPT_MAX_RANK; na++) ax[na] = a[na];
  }
  int r = in[0].rank;
  memset(red, 0, GOPT_MAX_RANK);
  if (na == 0) {
    if (gopt_node_get_int(G, NODE, "noop_with_empty_axes", 0)) return 1; /* identity */
    for (int i = 0; i < r; i++) red[i] = 1;
  }
  for (size_t i = 0; i < na; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + r : ax[i];
    if (a < 0 || a >= r) return ex_node_error(x, NODE, err, GOPT_EINVAL, "axis %lld out of range",
                                              (long long)ax[i]);
    red[a] = 1;
  }
  return 0;
}

static int f_reduce(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *op = gopt_graph_str(G, G->nodes.a[NODE].type) + 6; /* after "Reduce" */
  uint8_t red[GOPT_MAX_RANK];
  int rc = red_axes(x, k, in, nin, red, err);
  if (rc < 0) return rc;
  if (rc == 1) {
    memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof(double));
    return GOPT_OK;
  }
  int isMax = !strcmp(op, "Max"), isMin = !strcmp(op, "Min"), isProd = !strcmp(op, "Prod");
  int64_t *cnt = calloc((size_t)out[0].n + 1, sizeof *cnt);
  if (!cnt) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t o = 0; o < out[0].n; o++) out[0].v[o] = isMax ? -INFINITY : isMin ? INFINITY : isProd;
  int64_t ost[GOPT_MAX_RANK], a = 1;
  for (int i = in[0].rank - 1; i >= 0; i--) {
    ost[i] = red[i] ? 0 : a;
    if (!red[i]) a *= in[0].d[i];
  }
  int lse = !strcmp(op, "LogSumExp");
  double mx = -INFINITY;
  for (int64_t e = 0; lse && e < in[0].n; e++) mx = fmax(mx, in[0].v[e]);
  if (!isfinite(mx)) mx = 0;
  for (int64_t e = 0; e < in[0].n; e++) {
    int64_t rem = e, o = 0;
    for (int i = in[0].rank - 1; i >= 0; i--) {
      o += (rem % in[0].d[i]) * ost[i];
      rem /= in[0].d[i];
    }
    double v = in[0].v[e], *q = &out[0].v[o];
    if (isMax) *q = fmax(*q, v);
    else if (isMin) *q = fmin(*q, v);
    else if (isProd) *q *= v;
    else if (!strcmp(op, "L1")) *q += fabs(v);
    else if (!strcmp(op, "L2") || !strcmp(op, "SumSquare")) *q += v * v;
    else if (lse) *q += exp(v - mx);
    else *q += v;
    cnt[o]++;
  }
  for (int64_t o = 0; o < out[0].n; o++) {
    double *q = &out[0].v[o];
    if (!strcmp(op, "Mean")) *q = cnt[o] ? *q / (double)cnt[o] : NAN;
    else if (!strcmp(op, "L2")) *q = sqrt(*q);
    else if (!strcmp(op, "LogSum")) *q = log(*q);
    else if (lse) *q = log(*q) + mx;
  }
  free(cnt);
  return GOPT_OK;
}

static int f_arg(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", 0, in[0].rank, &axis, err))) return rc;
  int mx = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "ArgMax");
  int last = (int)gopt_node_get_int(G, NODE, "select_last_index", 0);
  int64_t outer, m, inner;
  ref_split3(&in[0], axis, &outer, &m, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      double bv = in[0].v[o * m * inner + i];
      for (int64_t j = 1; j < m; j++) {
        double v = in[0].v[(o * m + j) * inner + i];
        if ((mx ? v > bv : v < bv) || (last && v == bv)) {
          bv = v;
          best = j;
        }
      }
      out[0].v[o * inner + i] = (double)best;
    }
  return GOPT_OK;
}

/* Hardmax (opset >= 13: along axis; before: input coerced to 2-D at axis). */
static int f_hardmax(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", x->opset >= 13 ? -1 : 1, in[0].rank, &axis, err))) return rc;
  int64_t outer = 1, m = 1, inner = 1;
  if (x->opset >= 13) {
    ref_split3(&in[0], axis, &outer, &m, &inner);
  } else {
    for (int i = 0; i < axis; i++) outer *= in[0].d[i];
    m = outer ? in[0].n / outer : 0;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      for (int64_t j = 1; j < m; j++)
        if (in[0].v[(o * m + j) * inner + i] > in[0].v[(o * m + best) * inner + i]) best = j;
      if (m) out[0].v[(o * m + best) * inner + i] = 1;
    }
  return GOPT_OK;
}

static int f_cumsum(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t a = (int64_t)in[1].v[0];
  if (a < 0) a += in[0].rank;
  if (a < 0 || a >= in[0].rank) return ex_node_error(x, NODE, err, GOPT_EINVAL, "axis out of range");
  int excl = (int)gopt_node_get_int(G, NODE, "exclusive", 0), rev = (int)gopt_node_get_int(G, NODE, "reverse", 0);
  int64_t outer, m, inner;
  ref_split3(&in[0], (int)a, &outer, &m, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0;
      for (int64_t jj = 0; jj < m; jj++) {
        int64_t j = rev ? m - 1 - jj : jj, p = (o * m + j) * inner + i;
        if (excl) {
          out[0].v[p] = s;
          s += in[0].v[p];
        } else {
          s += in[0].v[p];
          out[0].v[p] = s;
        }
      }
    }
  return GOPT_OK;
}

static int f_trilu(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  int up = (int)gopt_node_get_int(G, NODE, "upper", 1);
  int64_t kk = nin > 1 && in[1].v && in[1].n ? (int64_t)in[1].v[0] : 0;
  int r = in[0].rank;
  int64_t R = r >= 2 ? in[0].d[r - 2] : 1, C = r >= 1 ? in[0].d[r - 1] : 1;
  for (int64_t e = 0; e < in[0].n; e++) {
    int64_t j = e % C, i = (e / C) % R;
    int keep = up ? j - i >= kk : j - i <= kk;
    out[0].v[e] = keep ? in[0].v[e] : 0;
  }
  return GOPT_OK;
}

/* ---- selection ---------------------------------------------------------------------------------- */

static const double *g_topk_v;
static int g_topk_largest;
static int topk_cmp(const void *a, const void *b) {
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  double u = g_topk_v[i], w = g_topk_v[j];
  if (u != w) return g_topk_largest ? (u < w ? 1 : -1) : (u < w ? -1 : 1);
  return i < j ? -1 : i > j;
}

static int f_topk(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, in[0].rank, &axis, err))) return rc;
  int64_t K = out[0].d[axis];
  int64_t outer, m, inner;
  ref_split3(&in[0], axis, &outer, &m, &inner);
  double *col = malloc((size_t)(m + 1) * sizeof *col);
  int64_t *ix = malloc((size_t)(m + 1) * sizeof *ix);
  if (!col || !ix) {
    free(col);
    free(ix);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  g_topk_largest = (int)gopt_node_get_int(G, NODE, "largest", 1);
  g_topk_v = col;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t j = 0; j < m; j++) {
        col[j] = in[0].v[(o * m + j) * inner + i];
        ix[j] = j;
      }
      qsort(ix, (size_t)m, sizeof *ix, topk_cmp);
      for (int64_t j = 0; j < K && j < m; j++) {
        out[0].v[(o * K + j) * inner + i] = col[ix[j]];
        if (nout > 1 && out[1].v) out[1].v[(o * K + j) * inner + i] = (double)ix[j];
      }
    }
  free(col);
  free(ix);
  return GOPT_OK;
}

static int f_nonzero(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t nnz = 0, cap = out[0].rank == 2 ? out[0].d[1] : 0, st[GOPT_MAX_RANK];
  ref_strides(&in[0], st);
  for (int64_t e = 0; e < in[0].n; e++)
    if (in[0].v[e] != 0) {
      if (nnz >= cap) return ex_node_error(x, NODE, err, GOPT_ESHAPE, "more non-zeros than the output holds");
      for (int i = 0; i < in[0].rank; i++) out[0].v[i * cap + nnz] = (double)((e / st[i]) % in[0].d[i]);
      nnz++;
    }
  return GOPT_OK;
}

/* ---- index ops ---------------------------------------------------------------------------------- */

/* GatherElements / ScatterElements / Scatter (which ScatterElements replaced). */
static int f_elements(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", 0, in[0].rank, &axis, err))) return rc;
  int gather = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "GatherElements");
  const char *red = gopt_node_get_string(G, NODE, "reduction", "none");
  int64_t dst[GOPT_MAX_RANK], ist[GOPT_MAX_RANK];
  ref_strides(&in[0], dst);
  ref_strides(&in[1], ist);
  if (!gather) memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof(double));
  for (int64_t e = 0; e < in[1].n; e++) {
    int64_t p = 0;
    for (int i = 0; i < in[1].rank; i++) {
      int64_t c = (e / ist[i]) % in[1].d[i];
      if (i == axis) {
        c = (int64_t)in[1].v[e];
        if (c < 0) c += in[0].d[i];
        if (c < 0 || c >= in[0].d[i]) return ex_node_error(x, NODE, err, GOPT_EINVAL, "index out of range");
      }
      p += c * dst[i];
    }
    if (gather) out[0].v[e] = in[0].v[p];
    else if (!strcmp(red, "add")) out[0].v[p] += in[2].v[e];
    else if (!strcmp(red, "mul")) out[0].v[p] *= in[2].v[e];
    else if (!strcmp(red, "max")) out[0].v[p] = fmax(out[0].v[p], in[2].v[e]);
    else if (!strcmp(red, "min")) out[0].v[p] = fmin(out[0].v[p], in[2].v[e]);
    else out[0].v[p] = in[2].v[e];
  }
  return GOPT_OK;
}

/* GatherND (batch_dims) and ScatterND (reduction). */
static int f_nd(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int gather = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "GatherND");
  int b = gather ? (int)gopt_node_get_int(G, NODE, "batch_dims", 0) : 0;
  const char *red = gopt_node_get_string(G, NODE, "reduction", "none");
  const rt *D = &in[0], *I = &in[1];
  int q = I->rank, kk = (int)I->d[q - 1];
  int64_t dst[GOPT_MAX_RANK], nb = 1, slice = 1, tuples = 1;
  ref_strides(D, dst);
  for (int i = 0; i < b; i++) nb *= D->d[i];
  for (int i = b + kk; i < D->rank; i++) slice *= D->d[i];
  for (int i = b; i < q - 1; i++) tuples *= I->d[i];
  int64_t bstride = b ? dst[b - 1] : D->n;
  if (!gather) memcpy(out[0].v, D->v, (size_t)D->n * sizeof(double));
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t t = 0; t < tuples; t++) {
      const double *ix = I->v + (bi * tuples + t) * kk;
      int64_t p = bi * bstride;
      for (int j = 0; j < kk; j++) {
        int64_t c = (int64_t)ix[j];
        if (c < 0) c += D->d[b + j];
        if (c < 0 || c >= D->d[b + j]) return ex_node_error(x, NODE, err, GOPT_EINVAL, "index out of range");
        p += c * dst[b + j];
      }
      for (int64_t s = 0; s < slice; s++) {
        int64_t u = (bi * tuples + t) * slice + s;
        if (gather) out[0].v[u] = D->v[p + s];
        else if (!strcmp(red, "add")) out[0].v[p + s] += in[2].v[u];
        else if (!strcmp(red, "mul")) out[0].v[p + s] *= in[2].v[u];
        else if (!strcmp(red, "max")) out[0].v[p + s] = fmax(out[0].v[p + s], in[2].v[u]);
        else if (!strcmp(red, "min")) out[0].v[p + s] = fmin(out[0].v[p + s], in[2].v[u]);
        else out[0].v[p + s] = in[2].v[u];
      }
    }
  return GOPT_OK;
}

static int f_onehot(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, out[0].rank, &axis, err))) return rc;
  int64_t depth = (int64_t)in[1].v[0], outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= out[0].d[i];
  for (int i = axis + 1; i < out[0].rank; i++) inner *= out[0].d[i];
  for (int64_t e = 0; e < out[0].n; e++) out[0].v[e] = in[2].v[0];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t c = (int64_t)in[0].v[o * inner + i];
      if (c < 0) c += depth;
      if (c >= 0 && c < depth) out[0].v[(o * depth + c) * inner + i] = in[2].v[1];
    }
  return GOPT_OK;
}

static int f_compress(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t o = 0;
  if (!gopt_node_attr(G, NODE, "axis")) {
    for (int64_t e = 0; e < in[0].n && e < in[1].n; e++)
      if (in[1].v[e] != 0 && o < out[0].n) out[0].v[o++] = in[0].v[e];
    return GOPT_OK;
  }
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", 0, in[0].rank, &axis, err))) return rc;
  int64_t outer, m, inner;
  ref_split3(&in[0], axis, &outer, &m, &inner);
  int64_t mo = out[0].d[axis];
  for (int64_t a = 0; a < outer; a++) {
    int64_t jo = 0;
    for (int64_t j = 0; j < m && j < in[1].n; j++) {
      if (in[1].v[j] == 0 || jo >= mo) continue;
      memcpy(out[0].v + (a * mo + jo) * inner, in[0].v + (a * m + j) * inner, (size_t)inner * sizeof(double));
      jo++;
    }
  }
  return GOPT_OK;
}

static int f_eyelike(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err, (void)in;
  int64_t kk = gopt_node_get_int(G, NODE, "k", 0), R = out[0].d[0], C = out[0].d[1];
  for (int64_t i = 0; i < R; i++)
    if (i + kk >= 0 && i + kk < C) out[0].v[i * C + i + kk] = 1;
  return GOPT_OK;
}

/* DepthToSpace (DCR / CRD) and SpaceToDepth on NCHW. */
static int f_d2s(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  int d2s = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "DepthToSpace");
  int crd = !strcmp(gopt_node_get_string(G, NODE, "mode", "DCR"), "CRD");
  int64_t b = gopt_node_get_int(G, NODE, "blocksize", 1);
  const rt *S = d2s ? &out[0] : &in[0], *D = d2s ? &in[0] : &out[0]; /* space / depth side */
  int64_t N = S->d[0], C = S->d[1], H = S->d[2], W = S->d[3];
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
          int64_t bh = h % b, bw = w % b;
          int64_t dc = crd ? (c * b + bh) * b + bw : (bh * b + bw) * C + c;
          int64_t sp = ((n * C + c) * H + h) * W + w;
          int64_t dp = ((n * D->d[1] + dc) * D->d[2] + h / b) * D->d[3] + w / b;
          if (d2s) out[0].v[sp] = in[0].v[dp];
          else out[0].v[dp] = in[0].v[sp];
        }
  return GOPT_OK;
}

static int f_revseq(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  int ba = (int)gopt_node_get_int(G, NODE, "batch_axis", 1), ta = (int)gopt_node_get_int(G, NODE, "time_axis", 0);
  int64_t st[GOPT_MAX_RANK];
  ref_strides(&in[0], st);
  for (int64_t e = 0; e < in[0].n; e++) {
    int64_t b = (e / st[ba]) % in[0].d[ba], t = (e / st[ta]) % in[0].d[ta];
    int64_t len = (int64_t)in[1].v[b];
    int64_t src = t < len ? e + (len - 1 - 2 * t) * st[ta] : e;
    out[0].v[e] = in[0].v[src];
  }
  return GOPT_OK;
}

/* ---- losses ------------------------------------------------------------------------------------- */

/* NLL over log-probabilities lp [N, C, d...] and targets [N, d...]; writes out (reduced or not). */
static int nll(gopt_exec *x, ex_kernel *k, const double *lp, const rt *shape, const rt *tgt,
               const rt *wt, rt *out, gopt_error *err) {
  const char *red = gopt_node_get_string(G, NODE, "reduction", "mean");
  int has_ig = gopt_node_attr(G, NODE, "ignore_index") != NULL;
  int64_t ig = gopt_node_get_int(G, NODE, "ignore_index", 0);
  int64_t N = shape->d[0], C = shape->d[1], D = 1;
  for (int i = 2; i < shape->rank; i++) D *= shape->d[i];
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t d = 0; d < D; d++) {
      int64_t t = (int64_t)tgt->v[n * D + d];
      double l = 0, w = 0;
      if (!(has_ig && t == ig)) {
        if (t < 0 || t >= C) return ex_node_error(x, NODE, err, GOPT_EINVAL, "target %lld out of range", (long long)t);
        w = wt && wt->v ? wt->v[t] : 1;
        l = -lp[(n * C + t) * D + d] * w;
      }
      if (!strcmp(red, "none")) out->v[n * D + d] = l;
      sum += l;
      wsum += w;
    }
  if (!strcmp(red, "sum")) out->v[0] = sum;
  else if (strcmp(red, "none")) out->v[0] = wsum != 0 ? sum / wsum : NAN;
  return GOPT_OK;
}

static int f_nll(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  return nll(x, k, in[0].v, &in[0], &in[1], nin > 2 ? &in[2] : NULL, &out[0], err);
}

static int f_sce(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int64_t N = in[0].d[0], C = in[0].d[1], D = in[0].n / (N * C != 0 ? N * C : 1);
  double *lp = nout > 1 && out[1].v ? out[1].v : malloc((size_t)(in[0].n + 1) * sizeof(double));
  if (!lp) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t n = 0; n < N; n++)
    for (int64_t d = 0; d < D; d++) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < C; c++) m = fmax(m, in[0].v[(n * C + c) * D + d]);
      for (int64_t c = 0; c < C; c++) s += exp(in[0].v[(n * C + c) * D + d] - m);
      for (int64_t c = 0; c < C; c++) lp[(n * C + c) * D + d] = in[0].v[(n * C + c) * D + d] - m - log(s);
    }
  int rc = nll(x, k, lp, &in[0], &in[1], nin > 2 ? &in[2] : NULL, &out[0], err);
  if (!(nout > 1 && out[1].v)) free(lp);
  return rc;
}

/* ---- LayerNormalization with Mean / InvStdDev outputs -------------------------------------------- */

static int f_layernorm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, in[0].rank, &axis, err))) return rc;
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5);
  int64_t outer = 1, m = 1;
  for (int i = 0; i < axis; i++) outer *= in[0].d[i];
  m = outer ? in[0].n / outer : 0;
  for (int64_t o = 0; o < outer; o++) {
    const double *p = in[0].v + o * m;
    double mu = 0, var = 0;
    for (int64_t j = 0; j < m; j++) mu += p[j];
    mu /= (double)m;
    for (int64_t j = 0; j < m; j++) var += (p[j] - mu) * (p[j] - mu);
    var /= (double)m;
    double inv = 1.0 / sqrt(var + eps);
    for (int64_t j = 0; j < m; j++) {
      double y = (p[j] - mu) * inv * in[1].v[j % in[1].n];
      if (nin > 2 && in[2].v) y += in[2].v[j % in[2].n];
      out[0].v[o * m + j] = y;
    }
    if (nout > 1 && out[1].v) out[1].v[o] = mu;
    if (nout > 2 && out[2].v) out[2].v[o] = inv;
  }
  return GOPT_OK;
}

/* ---- claims: cases the specialised kernels do not cover ------------------------------------------ */

static int claim_multi_out(const gopt_exec *x, int32_t n) { return x->g->nodes.a[n].n_out > 1; }
static int claim_not2(const gopt_exec *x, int32_t n) {
  return x->g->nodes.a[n].n_in != 2 || ex_dtype(x, gopt_node_input(x->g, n, 0)) != GOPT_DT_FLOAT;
}
static int claim_int(const gopt_exec *x, int32_t n) {
  int dt = ex_dtype(x, gopt_node_input(x->g, n, 0));
  return dt != GOPT_DT_FLOAT && dt != GOPT_DT_DOUBLE;
}
static int claim_f16(const gopt_exec *x, int32_t n) {
  int a = ex_dtype(x, gopt_node_input(x->g, n, 0)), b = ex_dtype(x, gopt_node_output(x->g, n, 0));
  return a == GOPT_DT_FLOAT16 || b == GOPT_DT_FLOAT16 || a == GOPT_DT_BFLOAT16 || b == GOPT_DT_BFLOAT16 ||
         gopt_dtype_is_lowbit(a) || gopt_dtype_is_lowbit(b);
}
static int claim_reduce(const gopt_exec *x, int32_t n) {
  const gopt_graph *g = x->g;
  if (ex_dtype(x, gopt_node_input(g, n, 0)) != GOPT_DT_FLOAT) return 1;
  int32_t ax = g->nodes.a[n].n_in > 1 ? gopt_node_input(g, n, 1) : -1;
  return ax >= 0 && !ex_is_const(x, ax);
}

const ref_entry ex_ref_ops_table[] = {
    {"Tan", f_unary, NULL}, {"Sinh", f_unary, NULL}, {"Cosh", f_unary, NULL},
    {"Asin", f_unary, NULL}, {"Acos", f_unary, NULL}, {"Atan", f_unary, NULL},
    {"Asinh", f_unary, NULL}, {"Acosh", f_unary, NULL}, {"Atanh", f_unary, NULL},
    {"ThresholdedRelu", f_unary, NULL}, {"Celu", f_unary, NULL}, {"Shrink", f_unary, NULL},
    {"Selu", f_unary, NULL}, {"Softsign", f_unary, NULL},
    {"IsInf", f_unary, NULL}, {"CastLike", f_unary, NULL}, {"Cast", f_unary, claim_f16},
    {"Max", f_nary, claim_not2}, {"Min", f_nary, claim_not2}, {"Sum", f_nary, claim_not2},
    {"Mean", f_nary, NULL}, {"Pow", f_nary, claim_int}, {"Mod", f_nary, claim_int},
    {"BitShift", f_nary, NULL}, {"Clip", f_clip, claim_int},
    {"ReduceSum", f_reduce, claim_reduce}, {"ReduceMean", f_reduce, claim_reduce},
    {"ReduceMax", f_reduce, claim_reduce}, {"ReduceMin", f_reduce, claim_reduce},
    {"ReduceProd", f_reduce, claim_reduce}, {"ReduceL2", f_reduce, claim_reduce},
    {"ReduceSumSquare", f_reduce, claim_reduce}, {"ReduceL1", f_reduce, NULL},
    {"ReduceLogSum", f_reduce, NULL}, {"ReduceLogSumExp", f_reduce, NULL},
    {"ArgMax", f_arg, NULL}, {"ArgMin", f_arg, NULL}, {"Hardmax", f_hardmax, NULL},
    {"CumSum", f_cumsum, NULL}, {"Trilu", f_trilu, NULL}, {"TopK", f_topk, NULL},
    {"NonZero", f_nonzero, NULL}, {"GatherElements", f_elements, NULL},
    {"ScatterElements", f_elements, NULL}, {"Scatter", f_elements, NULL},
    {"GatherND", f_nd, NULL}, {"ScatterND", f_nd, NULL}, {"OneHot", f_onehot, NULL},
    {"Compress", f_compress, NULL}, {"EyeLike", f_eyelike, NULL},
    {"DepthToSpace", f_d2s, NULL}, {"SpaceToDepth", f_d2s, NULL},
    {"ReverseSequence", f_revseq, NULL}, {"NegativeLogLikelihoodLoss", f_nll, NULL},
    {"SoftmaxCrossEntropyLoss", f_sce, NULL}, {"LayerNormalization", f_layernorm, claim_multi_out},
    {NULL, NULL, NULL},
};
