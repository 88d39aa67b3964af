/* shape_rules_modern.c: shape rules of the ops that opsets 13-24 added (CastLike, BitCast,
 * CumProd, LpNormalization, RMSNormalization, RotaryEmbedding, Attention), beside the older
 * ones in shape_rules.c. */
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

/* Attention (opset 23): Q [B, Hq, Sq, D] or [B, Sq, Hq * D], K/V [B, Hkv, Skv, D/Dv] or 3-D,
 * past_key/value [B, Hkv, Sp, D/Dv]. Y has Q's layout with V's head size; present_key/value are
 * [B, Hkv, Sp + Skv, D/Dv]; the qk output is [B, Hq, Sq, Sp + Skv]. */
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

int ops_infer_modern(ictx *c, int32_t n, int op) {
  switch (op) {
    case GOPT_OP_CAST_LIKE: return same_shape(c, n, ops_in_dtype(c, n, 1));
    case GOPT_OP_BITCAST: return r_bitcast(c, n);
    case GOPT_OP_CUMPROD: case GOPT_OP_LP_NORM: case GOPT_OP_RMS_NORM: case GOPT_OP_ROTARY_EMBEDDING:
      return same_shape(c, n, 0);
    case GOPT_OP_ATTENTION: return r_attention(c, n);
    default: return 0;
  }
}
