/* shape_rules_modern.c: shape rules of the ops that opsets 13-24 added (CastLike, BitCast,
 * CumProd, LpNormalization, RMSNormalization, RotaryEmbedding, Attention, ai.onnx.ml's LabelEncoder and
 * TreeEnsemble), beside the older
 * ones in shape_rules.c, and Scan's (opset >= 9) from its body. */
#include <string.h>

#include "ops/ops_internal.h"

/* Output 0 has input 0's shape and dtype dt (0: input 0's). */
static int same_shape(ictx *c, int32_t n, int dt) {
  oshape s;
  ops_in_shape(c, n, 0, &s);
  return ops_set_out(c, n, 0, dt ? dt : ops_in_dtype(c, n, 0), &s);
}

/* BitCast reinterprets each element: the shape stays when both types have the same size (the
 * only case ONNX allows). */
static int r_bitcast(ictx *c, int32_t n) {
  int to = (int)gopt_node_get_int(c->g, n, "to", 0), from = ops_in_dtype(c, n, 0);
  if (from && to && gopt_dtype_bits(from) != gopt_dtype_bits(to))
    return ops_node_err(c, GOPT_EINVAL, "BitCast from %s to %s: the element sizes differ",
                        gopt_dtype_name(from), gopt_dtype_name(to));
  return same_shape(c, n, to);
}

/* Whether dims a and b are known to differ (both concrete; a symbol may be either). */
static int dims_differ(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* Attention's inputs must fit each other as the kernel (k_ref_llm.c) requires: K/V batch and
 * sequence as Q's batch and K's, K's head size as Q's, V's heads as K's (4-D), q heads a multiple
 * of kv heads, hidden sizes divisible by the head counts (3-D), past_key/value [B, Hkv, Sp, D/Dv].
 * Concrete dims only; one error naming the node, with the kernel's wording. */
static int attention_fit(ictx *c, int32_t n, const oshape *q, const oshape *k, const oshape *v, int64_t hq,
                         int64_t hkv, int64_t d, int64_t dv) {
  int r3 = q->rank == 3;
  int64_t qd = r3 ? (hq > 0 && q->d[2] >= 0 && q->d[2] % hq == 0 ? q->d[2] / hq : -1) : q->d[3];
  if (r3 && ((q->d[2] >= 0 && q->d[2] % hq) || (k->d[2] >= 0 && k->d[2] % hkv) || (v->d[2] >= 0 && v->d[2] % hkv)))
    return ops_node_err(c, GOPT_EINVAL, "3-D inputs need q_num_heads and kv_num_heads dividing the hidden sizes");
  if (dims_differ(d, qd)) return ops_node_err(c, GOPT_EINVAL, r3 ? "K's head size differs from Q's" : "K/V heads or head size do not match Q's");
  if (!r3 && dims_differ(v->d[1], hkv)) return ops_node_err(c, GOPT_EINVAL, "K/V heads or head size do not match Q's");
  if (hq >= 0 && hkv > 0 && hq % hkv)
    return ops_node_err(c, GOPT_EINVAL, "q heads (%lld) are not a multiple of kv heads (%lld)", (long long)hq, (long long)hkv);
  int64_t skv = r3 ? k->d[1] : k->d[2], vs = r3 ? v->d[1] : v->d[2];
  if (dims_differ(k->d[0], q->d[0]) || dims_differ(v->d[0], q->d[0]) || dims_differ(vs, skv))
    return ops_node_err(c, GOPT_EINVAL, "K/V batch (%lld, %lld) or sequence (%lld, %lld) do not match Q's batch %lld",
                        (long long)k->d[0], (long long)v->d[0], (long long)skv, (long long)vs, (long long)q->d[0]);
  oshape pk, pv;
  ops_in_shape(c, n, 4, &pk);
  ops_in_shape(c, n, 5, &pv);
  if ((ops_in(c, n, 4) >= 0) != (ops_in(c, n, 5) >= 0))
    return ops_node_err(c, GOPT_EINVAL, "past_key and past_value must be given together");
  if (pk.rank >= 0 && (pk.rank != 4 || dims_differ(pk.d[0], q->d[0]) || dims_differ(pk.d[1], hkv) || dims_differ(pk.d[3], d)))
    return ops_node_err(c, GOPT_EINVAL, "past_key must be [B, kv heads, past, head size]");
  if (pv.rank >= 0 && (pv.rank != 4 || dims_differ(pv.d[0], q->d[0]) || dims_differ(pv.d[1], hkv) ||
                       dims_differ(pv.d[2], pk.rank == 4 ? pk.d[2] : -1) || dims_differ(pv.d[3], dv)))
    return ops_node_err(c, GOPT_EINVAL, "past_value must be [B, kv heads, past, v head size] like past_key");
  return GOPT_OK;
}

/* Attention (opset 23): Q [B, Hq, Sq, D] or [B, Sq, Hq * D], K/V [B, Hkv, Skv, D/Dv] or 3-D,
 * past_key/value [B, Hkv, Sp, D/Dv]. Y has Q's layout with V's head size; present_key/value are
 * [B, Hkv, Sp + Skv, D/Dv]; the qk output is [B, Hq, Sq, Sp + Skv]. Inputs that do not fit each
 * other are an error (attention_fit). */
static int r_attention(ictx *c, int32_t n) {
  oshape q, k, v, pk, y, pres_k, pres_v, qk;
  int dt = ops_in_dtype(c, n, 0), rc;
  ops_in_shape(c, n, 0, &q);
  ops_in_shape(c, n, 1, &k);
  ops_in_shape(c, n, 2, &v);
  ops_in_shape(c, n, 4, &pk);
  y.rank = pres_k.rank = pres_v.rank = qk.rank = -1;
  if (q.rank >= 0 && (q.rank != k.rank || q.rank != v.rank || (q.rank != 3 && q.rank != 4)))
    return ops_node_err(c, GOPT_EINVAL, "Q, K and V must all be 3-D or all 4-D");
  if (q.rank == 4 || q.rank == 3) {
    int r3 = q.rank == 3, ok = 1;
    int64_t hq = r3 ? gopt_node_get_int(c->g, n, "q_num_heads", 0) : q.d[1];
    int64_t hkv = r3 ? gopt_node_get_int(c->g, n, "kv_num_heads", 0) : k.d[1];
    if (r3 && (hq <= 0 || hkv <= 0))
      return ops_node_err(c, GOPT_EINVAL, "3-D Q/K/V need the q_num_heads and kv_num_heads attributes");
    int64_t sq = r3 ? q.d[1] : q.d[2], skv = r3 ? k.d[1] : k.d[2];
    int64_t d = r3 ? ops_dim_div(c, k.d[2], hkv, &ok) : k.d[3];
    int64_t dv = r3 ? ops_dim_div(c, v.d[2], hkv, &ok) : v.d[3];
    if ((rc = attention_fit(c, n, &q, &k, &v, r3 ? hq : q.d[1], hkv, d, dv))) return rc;
    int64_t st = pk.rank == 4 ? ops_dim_add(c, pk.d[2], skv) : skv;
    y = q;
    if (r3) y.d[2] = ops_dim_mul(c, hq, dv);
    else y.d[3] = dv;
    pres_k.rank = pres_v.rank = qk.rank = 4;
    pres_k.d[0] = pres_v.d[0] = qk.d[0] = q.d[0];
    pres_k.d[1] = pres_v.d[1] = hkv;
    pres_k.d[2] = pres_v.d[2] = st;
    pres_k.d[3] = d;
    pres_v.d[3] = dv;
    qk.d[1] = hq, qk.d[2] = sq, qk.d[3] = st;
  }
  if ((rc = ops_set_out(c, n, 0, dt, &y)) || (rc = ops_set_out(c, n, 1, dt, &pres_k)) ||
      (rc = ops_set_out(c, n, 2, dt, &pres_v)))
    return rc;
  return ops_set_out(c, n, 3, dt, &qk);
}

/* ai.onnx.ml LabelEncoder: X's shape, the values' type (values_strings: STRING, values_int64s:
 * INT64, values_floats: FLOAT, values_tensor: its dtype). */
static int r_label_encoder(ictx *c, int32_t n) {
  const gopt_attr *t = gopt_node_attr(c->g, n, "values_tensor");
  int dt = t && t->kind == GOPT_ATTR_TENSOR && t->v.tensor >= 0 ? c->g->tensors.a[t->v.tensor].dtype
           : gopt_node_attr(c->g, n, "values_strings") ? GOPT_DT_STRING
           : gopt_node_attr(c->g, n, "values_int64s") ? GOPT_DT_INT64
           : gopt_node_attr(c->g, n, "values_floats") ? GOPT_DT_FLOAT : 0;
  if (!dt) return ops_node_err(c, GOPT_EINVAL, "needs values_strings, values_int64s, values_floats or values_tensor");
  return same_shape(c, n, dt);
}

/* ai.onnx.ml TreeEnsemble: X [N, F] -> [N, n_targets] of X's type. */
static int r_tree_ensemble(ictx *c, int32_t n) {
  oshape x, y;
  ops_in_shape(c, n, 0, &x);
  int64_t t = gopt_node_get_int(c->g, n, "n_targets", 0);
  if (t <= 0) return ops_node_err(c, GOPT_EINVAL, "n_targets must be positive");
  if (x.rank >= 0 && x.rank != 2) return ops_node_err(c, GOPT_EINVAL, "X must be 2-D [N, F], it is %d-D", x.rank);
  y.rank = 2;
  y.d[0] = x.rank == 2 ? x.d[0] : ops_fresh(c, GOPT_OP_TREE_ENSEMBLE, n, 0, 0);
  y.d[1] = t;
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &y);
}

/* Whether every dim of parent tensor t is concrete. */
static int static_dims(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  for (int i = 0; i < g->tensors.a[t].rank; i++)
    if (gopt_tensor_dims(g, t)[i] < 0) return 0;
  return 1;
}

/* Gives tensor t of the body copy b the dtype and shape (dims, rank r) and, when set, the bytes. */
static int bind(gopt_graph *b, int32_t t, int dt, int r, const int64_t *d, const void *data, size_t nb) {
  b->tensors.a[t].dtype = (uint8_t)dt;
  b->tensors.a[t].flags &= (uint16_t)~GOPT_T_NOSHAPE;
  int rc = gopt_tensor_set_shape(b, t, r, d);
  if (!rc && data) rc = gopt_tensor_set_const(b, t, data, nb, NULL);
  return rc;
}

/* Scan (opset >= 9) when its outputs have no static shape (a function's expansion declares
 * none): the body, copied, gets the states' and the scan slices' shapes and the outer tensors it
 * reads (their values when constant), is inferred, and the outputs are the states' shapes and the
 * body's scan outputs stacked along scan_output_axes (length: the scan inputs' sequence). Only
 * concrete dims; otherwise, or when the body does not infer, the source's shapes stand. */
static int r_scan(ictx *c, int32_t n) {
  const gopt_graph *g = c->g;
  const gopt_attr *a = gopt_node_attr(g, n, "body");
  int m = (int)gopt_node_get_int(g, n, "num_scan_inputs", 0), nin = g->nodes.a[n].n_in, nout = g->nodes.a[n].n_out;
  if (c->opset < 9 || !a || a->kind != GOPT_ATTR_GRAPH || m < 1 || m > nin || nin > 32) return 0;
  int done = 1;
  for (int i = 0; i < nout; i++) done &= ops_out(c, n, i) < 0 || static_dims(g, ops_out(c, n, i));
  for (int i = 0; i < nin; i++)
    if (!static_dims(g, ops_in(c, n, i))) return 0;
  const gopt_graph *body = g->subgraphs.a[a->v.graph];
  if (done || (int)body->inputs.n != nin || (int)body->outputs.n != nout) return 0;
  size_t na = 0;
  const int64_t *ax = gopt_node_get_ints(g, n, "scan_input_axes", &na);
  int st = nin - m, rc = 0;
  int32_t t0 = ops_in(c, n, st);
  for (int i = st; i < nin; i++) { /* each scan input's axis within its rank */
    int r = g->tensors.a[ops_in(c, n, i)].rank;
    int64_t ai = ax && (size_t)(i - st) < na ? ax[i - st] : 0;
    if (ai < -r || ai >= r)
      return ops_node_err(c, GOPT_EINVAL, "scan_input_axes value %lld is out of range for scan input %d of rank %d",
                          (long long)ai, i - st, r);
  }
  int64_t a0 = ax && na ? ax[0] : 0;
  if (a0 < 0) a0 += g->tensors.a[t0].rank;
  int64_t T = gopt_tensor_dims(g, t0)[a0];
  gopt_graph *b = gopt_graph_clone(body);
  if (!b) return ops_node_err(c, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < nin && !rc; i++) { /* states whole, scan inputs without their axis */
    int32_t t = ops_in(c, n, i);
    int r = g->tensors.a[t].rank, k = 0;
    int64_t d[GOPT_MAX_RANK], ai = i >= st && ax && (size_t)(i - st) < na ? ax[i - st] : 0;
    if (ai < 0) ai += r;
    for (int j = 0; j < r; j++)
      if (i < st || j != ai) d[k++] = gopt_tensor_dims(g, t)[j];
    rc = bind(b, b->inputs.a[i], g->tensors.a[t].dtype, k, d, NULL, 0);
  }
  for (size_t t = 0; t < b->tensors.n && !rc; t++) { /* outer-scope reads */
    const gopt_tensor *bt = &b->tensors.a[t];
    if (bt->producer >= 0 || (bt->flags & (GOPT_T_INPUT | GOPT_T_CONST)) || bt->first_use < 0) continue;
    int32_t o = gopt_graph_find_tensor(g, gopt_graph_str(b, bt->name));
    if (!static_dims(g, o)) continue;
    const void *data = gopt_tensor_data(g, o);
    rc = bind(b, (int32_t)t, g->tensors.a[o].dtype, g->tensors.a[o].rank, gopt_tensor_dims(g, o), data,
              (size_t)(gopt_tensor_numel(g, o) * (int64_t)gopt_dtype_size(g->tensors.a[o].dtype)));
  }
  if (!b->opsets.n) gopt_graph_set_opset(b, "", c->opset);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  gopt_error sub = {0};
  if (!rc && gopt_infer_shapes(b, &io, &sub) == 0) {
    size_t no = 0;
    const int64_t *oax = gopt_node_get_ints(g, n, "scan_output_axes", &no);
    for (int i = 0; i < nout && !rc; i++) {
      int32_t bo = b->outputs.a[i];
      if (!static_dims(b, bo)) continue;
      oshape s;
      int r = b->tensors.a[bo].rank, k = 0;
      int64_t oa = i >= st && oax && (size_t)(i - st) < no ? oax[i - st] : 0;
      if (i >= st && r + 1 > GOPT_MAX_RANK)
        rc = ops_node_err(c, GOPT_EINVAL, "scan output %d would have rank %d, beyond the maximum %d", i - st, r + 1,
                          GOPT_MAX_RANK);
      else if (i >= st && (oa < -(r + 1) || oa > r))
        rc = ops_node_err(c, GOPT_EINVAL, "scan_output_axes value %lld is out of range for scan output %d of rank %d",
                          (long long)oa, i - st, r + 1);
      if (rc) break;
      if (oa < 0) oa += r + 1;
      s.rank = i < st ? r : r + 1;
      for (int j = 0; j < s.rank; j++)
        s.d[j] = i >= st && j == oa ? T : gopt_tensor_dims(b, bo)[k++];
      rc = ops_set_out(c, n, i, b->tensors.a[bo].dtype, &s);
    }
  }
  gopt_graph_free(b);
  return rc;
}

int ops_infer_modern(ictx *c, int32_t n, int op) {
  switch (op) {
    case GOPT_OP_CAST_LIKE: return same_shape(c, n, ops_in_dtype(c, n, 1));
    case GOPT_OP_BITCAST: return r_bitcast(c, n);
    case GOPT_OP_CUMPROD: case GOPT_OP_LP_NORM: case GOPT_OP_RMS_NORM: case GOPT_OP_ROTARY_EMBEDDING:
      return same_shape(c, n, 0);
    case GOPT_OP_ATTENTION: return r_attention(c, n);
    case GOPT_OP_LABEL_ENCODER: return r_label_encoder(c, n);
    case GOPT_OP_TREE_ENSEMBLE: return r_tree_ensemble(c, n);
    case GOPT_OP_SCAN: return r_scan(c, n);
    default: return 0;
  }
}
