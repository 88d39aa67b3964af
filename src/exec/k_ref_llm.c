/* k_ref_llm.c: reference kernels (k_ref.h) for the transformer ops of opsets 23-24: Attention
 * (3-D or 4-D Q/K/V, boolean or additive masks shorter than the keys, is_causal aligned to the
 * bottom right, grouped-query heads, past key/value and the present outputs, softcap, scale,
 * nonpad_kv_seqlen, the four qk_matmul_output modes), RMSNormalization and RotaryEmbedding, and
 * the recurrent-state ops of opset 27 (LinearAttention with its linear / gated / delta /
 * gated_delta update rules, CausalConvWithState), and ai.onnx.preview's FlexAttention without
 * its modifier graphs.
 * ONNX semantics as the operator specification and onnx's reference implementation state them,
 * in double precision. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

/* ---- Attention -------------------------------------------------------------------------------------- */

typedef struct attn_dims {
  int64_t B, Hq, Hkv, Sq, Skv, Sp, St, D, Dv; /* St = Sp (past) + Skv */
  int r3;                                      /* Q/K/V are 3-D [B, S, heads * size] */
} attn_dims;

/* Element (b, h, s, d) of a 4-D [B, H, S, Dh] tensor or its 3-D [B, S, H * Dh] form. */
static double at4(const rt *t, int r3, int64_t H, int64_t S, int64_t Dh, int64_t b, int64_t h, int64_t s,
                  int64_t d) {
  if (r3) return t->v[((b * S + s) * H + h) * Dh + d];
  return t->v[((b * H + h) * S + s) * Dh + d];
}

/* Whether t is 4-D [d0, d1, d2, d3]. */
static int ref_dims_are(const rt *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return t->rank == 4 && t->d[0] == d0 && t->d[1] == d1 && t->d[2] == d2 && t->d[3] == d3;
}

static int attn_shape(gopt_exec *x, ex_kernel *k, rt *in, attn_dims *a, gopt_error *err) {
  const rt *q = &in[0], *kk = &in[1], *v = &in[2];
  if ((q->rank != 3 && q->rank != 4) || kk->rank != q->rank || v->rank != q->rank)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "Q, K and V must all be 3-D or all 4-D");
  a->r3 = q->rank == 3;
  a->B = q->d[0];
  if (a->r3) {
    a->Hq = gopt_node_get_int(G, NODE, "q_num_heads", 0);
    a->Hkv = gopt_node_get_int(G, NODE, "kv_num_heads", 0);
    if (a->Hq <= 0 || a->Hkv <= 0 || q->d[2] % a->Hq || kk->d[2] % a->Hkv || v->d[2] % a->Hkv)
      return ex_node_error(x, NODE, err, GOPT_EINVAL,
                           "3-D inputs need q_num_heads and kv_num_heads dividing the hidden sizes");
    a->Sq = q->d[1], a->Skv = kk->d[1], a->D = q->d[2] / a->Hq, a->Dv = v->d[2] / a->Hkv;
    if (kk->d[2] / a->Hkv != a->D)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "K's head size differs from Q's");
  } else {
    a->Hq = q->d[1], a->Hkv = kk->d[1], a->Sq = q->d[2], a->Skv = kk->d[2], a->D = q->d[3], a->Dv = v->d[3];
    if (kk->d[3] != a->D || v->d[1] != a->Hkv)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "K/V heads or head size do not match Q's");
  }
  if (a->Hkv <= 0 || a->Hq % a->Hkv)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "q heads (%lld) are not a multiple of kv heads (%lld)",
                         (long long)a->Hq, (long long)a->Hkv);
  int64_t vs = a->r3 ? v->d[1] : v->d[2];
  if (kk->d[0] != a->B || v->d[0] != a->B || vs != a->Skv)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "K/V batch (%lld, %lld) or sequence (%lld, %lld) do not match Q's batch %lld",
                         (long long)kk->d[0], (long long)v->d[0], (long long)a->Skv, (long long)vs, (long long)a->B);
  if ((in[4].v != NULL) != (in[5].v != NULL))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "past_key and past_value must be given together");
  a->Sp = in[4].v ? in[4].d[2] : 0;
  a->St = a->Sp + a->Skv;
  if (in[4].v && !ref_dims_are(&in[4], a->B, a->Hkv, a->Sp, a->D))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "past_key must be [B, kv heads, past, head size]");
  if (in[5].v && !ref_dims_are(&in[5], a->B, a->Hkv, a->Sp, a->Dv))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "past_value must be [B, kv heads, past, v head size] like past_key");
  const rt *m = &in[3];
  int64_t full[4] = {a->B, a->Hq, a->Sq, a->St};
  if (m->v && (m->rank < 1 || m->rank > 4))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "attn_mask must be 1-D to 4-D, it is %d-D", m->rank);
  for (int i = 0; m->v && i < m->rank - 1; i++)
    if (m->d[i] != 1 && m->d[i] != full[4 - m->rank + i])
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "attn_mask dim %d is %lld, neither 1 nor %lld", i,
                           (long long)m->d[i], (long long)full[4 - m->rank + i]);
  if (in[6].v && in[6].n != 1 && in[6].n != a->B)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "nonpad_kv_seqlen has %lld values, neither 1 nor the batch %lld",
                         (long long)in[6].n, (long long)a->B);
  return GOPT_OK;
}

/* The present key (or value): past (if any) then the new keys, as [B, Hkv, St, Dh]. */
static void attn_present(const attn_dims *a, const rt *past, const rt *cur, int64_t Dh, double *p) {
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t h = 0; h < a->Hkv; h++)
      for (int64_t t = 0; t < a->St; t++)
        for (int64_t d = 0; d < Dh; d++)
          p[((b * a->Hkv + h) * a->St + t) * Dh + d] =
              t < a->Sp ? past->v[((b * a->Hkv + h) * a->Sp + t) * Dh + d]
                        : at4(cur, a->r3, a->Hkv, a->Skv, Dh, b, h, t - a->Sp, d);
}

/* Additive bias of (b, h, i, j): the mask (boolean: false is -inf; a last dim shorter than the
 * keys is padded with -inf), causal (j > i + offset is -inf, offset the past length, or with
 * nonpad_kv_seqlen and no past its length minus Sq), and nonpad_kv_seqlen (j beyond it: -inf). */
static double attn_bias(const attn_dims *a, const rt *mask, const rt *nonpad, int causal, int64_t b, int64_t h,
                        int64_t i, int64_t j) {
  double bias = 0;
  if (mask && mask->v) {
    int r = mask->rank;
    int64_t last = mask->d[r - 1];
    if (j >= last) return -INFINITY;
    int64_t c[4] = {b, h, i, j}, idx = 0;
    for (int k = 0; k < r; k++) {
      int64_t dimk = mask->d[k], ck = c[4 - r + k];
      idx = idx * dimk + (dimk == 1 ? 0 : ck);
    }
    double m = mask->v[idx];
    bias = mask->dt == GOPT_DT_BOOL ? (m != 0 ? 0 : -INFINITY) : m;
  }
  int64_t len = nonpad && nonpad->v ? (int64_t)nonpad->v[nonpad->n > 1 ? b : 0] : a->St;
  if (causal) {
    int64_t off = a->Sp ? a->Sp : (nonpad && nonpad->v ? len - a->Sq : 0);
    if (j > i + off) bias += -INFINITY;
  }
  if (j >= len) bias += -INFINITY;
  return bias;
}

static int f_attention(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  rt inv[7] = {{0}}; /* the inputs, absent ones with v NULL */
  for (int i = 0; i < 7 && i < nin; i++) inv[i] = in[i];
  attn_dims a = {0};
  int rc = attn_shape(x, k, inv, &a, err);
  if (rc) return rc;
  double scale = gopt_node_get_float(G, NODE, "scale", 1.0 / sqrt((double)a.D));
  double softcap = gopt_node_get_float(G, NODE, "softcap", 0);
  int causal = (int)gopt_node_get_int(G, NODE, "is_causal", 0);
  int mode = (int)gopt_node_get_int(G, NODE, "qk_matmul_output_mode", 0);
  double *K = malloc((size_t)(a.B * a.Hkv * a.St * a.D + 1) * sizeof *K);
  double *V = malloc((size_t)(a.B * a.Hkv * a.St * a.Dv + 1) * sizeof *V);
  double *row = malloc((size_t)(4 * a.St + 1) * sizeof *row);
  if (!K || !V || !row) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  attn_present(&a, &inv[4], &inv[1], a.D, K);
  attn_present(&a, &inv[5], &inv[2], a.Dv, V);
  if (nout > 1 && out[1].v) memcpy(out[1].v, K, (size_t)(a.B * a.Hkv * a.St * a.D) * sizeof *K);
  if (nout > 2 && out[2].v) memcpy(out[2].v, V, (size_t)(a.B * a.Hkv * a.St * a.Dv) * sizeof *V);
  double *qk = row, *biased = row + a.St, *capped = row + 2 * a.St, *p = row + 3 * a.St;
  int64_t rep = a.Hq / a.Hkv;
  for (int64_t b = 0; b < a.B; b++)
    for (int64_t h = 0; h < a.Hq; h++)
      for (int64_t i = 0; i < a.Sq; i++) {
        const double *kh = K + (b * a.Hkv + h / rep) * a.St * a.D, *vh = V + (b * a.Hkv + h / rep) * a.St * a.Dv;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < a.St; j++) {
          double s = 0;
          for (int64_t d = 0; d < a.D; d++) s += at4(&inv[0], a.r3, a.Hq, a.Sq, a.D, b, h, i, d) * kh[j * a.D + d];
          qk[j] = s * scale;
          capped[j] = softcap > 0 ? softcap * tanh(qk[j] / softcap) : qk[j];
          biased[j] = capped[j] + attn_bias(&a, &inv[3], &inv[6], causal, b, h, i, j);
          if (biased[j] > mx) mx = biased[j];
        }
        for (int64_t j = 0; j < a.St; j++) sum += (p[j] = exp(biased[j] - mx));
        for (int64_t j = 0; j < a.St; j++) p[j] /= sum;
        if (nout > 3 && out[3].v) {
          const double *src = mode == 3 ? p : mode == 2 ? biased : mode == 1 ? capped : qk;
          memcpy(out[3].v + ((b * a.Hq + h) * a.Sq + i) * a.St, src, (size_t)a.St * sizeof *src);
        }
        for (int64_t d = 0; d < a.Dv; d++) {
          double s = 0;
          for (int64_t j = 0; j < a.St; j++) s += p[j] * vh[j * a.Dv + d];
          int64_t o = a.r3 ? ((b * a.Sq + i) * a.Hq + h) * a.Dv + d : ((b * a.Hq + h) * a.Sq + i) * a.Dv + d;
          out[0].v[o] = s;
        }
      }
done:
  free(K);
  free(V);
  free(row);
  return rc;
}

/* ai.onnx.preview FlexAttention without modifier graphs: softmax(Q K^T * scale) V over 4-D
 * [B, H, L, E] inputs with grouped heads, as Attention computes it. The score_mod / prob_mod /
 * mask_mod graphs run per score; the executor does not evaluate them and says so. */
static int f_flexattn(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const char *mods[] = {"score_mod", "prob_mod", "mask_mod"};
  for (int i = 0; i < 3; i++)
    if (gopt_node_attr(G, NODE, mods[i]))
      return ex_node_error(x, NODE, err, GOPT_EUNSUP, "the %s graph attribute is not evaluated by the executor", mods[i]);
  if (nin != 3 || in[0].rank != 4) return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs 4-D Q, K and V");
  return f_attention(x, k, in, nin, out, nout, err);
}

/* ---- RMSNormalization ------------------------------------------------------------------------------- */

/* Y = X / sqrt(mean(X^2 over axes axis..rank-1) + epsilon) * scale (scale broadcast to those axes). */
static int f_rmsnorm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, in[0].rank, &axis, err))) return rc;
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5);
  int64_t inner = 1;
  for (int i = axis; i < in[0].rank; i++) inner *= in[0].d[i];
  rt norm = in[0]; /* the normalized shape, for broadcasting scale */
  norm.rank = in[0].rank - axis;
  memmove(norm.d, in[0].d + axis, (size_t)norm.rank * sizeof *norm.d);
  norm.n = inner;
  for (int64_t o = 0; o * inner < in[0].n; o++) {
    const double *xv = in[0].v + o * inner;
    double ss = 0;
    for (int64_t i = 0; i < inner; i++) ss += xv[i] * xv[i];
    double r = 1.0 / sqrt(ss / (double)inner + eps);
    for (int64_t i = 0; i < inner; i++)
      out[0].v[o * inner + i] = xv[i] * r * in[1].v[ref_bcast_index(&in[1], &norm, i)];
  }
  return GOPT_OK;
}

/* ---- RotaryEmbedding -------------------------------------------------------------------------------- */

/* X is [B, H, S, Dh] or [B, S, H * Dh] (num_heads); the first rotary_embedding_dim (default Dh)
 * features of each head rotate by the cos/sin cache row of the position (position_ids[b, s], or
 * the caches are [B, S, rot / 2]); interleaved pairs (2i, 2i+1), else halves (i, i + rot / 2). */
static int f_rotary(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const rt *X = &in[0], *cs = &in[1], *sn = &in[2], *pos = nin > 3 && in[3].v ? &in[3] : NULL;
  int r3 = X->rank == 3;
  if (X->rank != 3 && X->rank != 4)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "X must be 3-D or 4-D, it is %d-D", X->rank);
  int64_t B = X->d[0], H, S, Dh;
  if (r3) {
    H = gopt_node_get_int(G, NODE, "num_heads", 0);
    if (H <= 0 || X->d[2] % H)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "3-D X needs num_heads dividing its hidden size");
    S = X->d[1], Dh = X->d[2] / H;
  } else {
    H = X->d[1], S = X->d[2], Dh = X->d[3];
  }
  if (cs->rank < 1 || sn->rank != cs->rank || memcmp(cs->d, sn->d, (size_t)cs->rank * sizeof *cs->d))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "cos_cache and sin_cache must have one shape of rank >= 1");
  if (pos && pos->n != S && pos->n != B * S)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "position_ids has %lld values, expected %lld or %lld",
                         (long long)pos->n, (long long)S, (long long)(B * S));
  int64_t rot = gopt_node_get_int(G, NODE, "rotary_embedding_dim", 0);
  if (rot <= 0) rot = Dh;
  int il = (int)gopt_node_get_int(G, NODE, "interleaved", 0);
  int64_t half = rot / 2, cw = cs->d[cs->rank - 1];
  if (rot > Dh || rot % 2 || cw < half)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "rotary_embedding_dim %lld does not fit head size %lld / cache width %lld",
                         (long long)rot, (long long)Dh, (long long)cw);
  memcpy(out[0].v, X->v, (size_t)X->n * sizeof *X->v);
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t row = pos ? (int64_t)pos->v[pos->n == S ? s : b * S + s] : b * S + s;
      if (row < 0 || row * cw >= cs->n)
        return ex_node_error(x, NODE, err, GOPT_EINVAL, "position %lld is beyond the cos/sin cache", (long long)row);
      const double *c = cs->v + row * cw, *sv = sn->v + row * cw;
      for (int64_t h = 0; h < H; h++) {
        int64_t base = r3 ? (b * S + s) * H * Dh + h * Dh : ((b * H + h) * S + s) * Dh;
        const double *xv = X->v + base;
        double *y = out[0].v + base;
        for (int64_t i = 0; i < half; i++) {
          int64_t i1 = il ? 2 * i : i, i2 = il ? 2 * i + 1 : i + half;
          y[i1] = c[i] * xv[i1] - sv[i] * xv[i2];
          y[i2] = sv[i] * xv[i1] + c[i] * xv[i2];
        }
      }
    }
  return GOPT_OK;
}

/* ---- LinearAttention -------------------------------------------------------------------------------- */

/* q [B, T, Hq*Dk], k [B, T, Hkv*Dk], v [B, T, Hkv*Dv], past_state [B, Hkv, Dk, Dv], decay
 * [B, T, Hkv*Dk] or [B, T, Hkv], beta [B, T, Hkv] or [B, T, 1]. Per (b, kv head) a state S
 * [Dk, Dv] (past_state or zeros) runs over t: gated rules scale S's rows by exp(decay); delta rules
 * write k (x) beta (v - S^T k), the others k (x) v; query head h (of Hq / Hkv per kv head) reads
 * scale * q^T S. Outputs [B, T, Hq*Dv] and the final states. */
/* Whether LinearAttention's k, v and optional past_state / decay / beta fit q's B, T and heads. */
static int linattn_shapes_ok(const rt *in, int64_t B, int64_t T, int64_t Hkv, int64_t Dk, int64_t Dv, const rt *past,
                             const rt *dec, const rt *beta) {
  for (int i = 1; i < 3; i++)
    if (in[i].d[0] != B || in[i].d[1] != T) return 0;
  if (in[1].d[2] != Hkv * Dk || (past && !ref_dims_are(past, B, Hkv, Dk, Dv))) return 0;
  if (dec && (dec->rank != 3 || dec->d[0] != B || dec->d[1] != T || (dec->d[2] != Hkv && dec->d[2] != Hkv * Dk)))
    return 0;
  return !beta || (beta->rank == 3 && beta->d[0] == B && beta->d[1] == T && (beta->d[2] == Hkv || beta->d[2] == 1));
}

static int f_linattn(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int64_t Hq = gopt_node_get_int(G, NODE, "q_num_heads", 0), Hkv = gopt_node_get_int(G, NODE, "kv_num_heads", 0);
  const char *rule = gopt_node_get_string(G, NODE, "update_rule", "gated_delta");
  if (in[0].rank != 3 || in[1].rank != 3 || in[2].rank != 3 || Hq <= 0 || Hkv <= 0 || Hq % Hkv ||
      in[0].d[2] % Hq || in[2].d[2] % Hkv)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs 3-D q/k/v and q_num_heads a multiple of kv_num_heads");
  int64_t B = in[0].d[0], T = in[0].d[1], Dk = in[0].d[2] / Hq, Dv = in[2].d[2] / Hkv, rep = Hq / Hkv;
  int gated = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta");
  int delta = !strcmp(rule, "delta") || !strcmp(rule, "gated_delta");
  const rt *past = nin > 3 && in[3].v ? &in[3] : NULL, *dec = nin > 4 && in[4].v ? &in[4] : NULL;
  const rt *beta = nin > 5 && in[5].v ? &in[5] : NULL;
  if (!linattn_shapes_ok(in, B, T, Hkv, Dk, Dv, past, dec, beta))
    return ex_node_error(x, NODE, err, GOPT_EINVAL,
                         "k [B, T, kv heads * %lld], v [B, T, ...], past_state [B, kv heads, %lld, %lld], decay "
                         "[B, T, kv heads (* %lld)] or beta [B, T, kv heads or 1] does not match q",
                         (long long)Dk, (long long)Dk, (long long)Dv, (long long)Dk);
  double scale = gopt_node_get_float(G, NODE, "scale", 1.0 / sqrt((double)Dk));
  int64_t dw = dec ? dec->d[2] / Hkv : 0, bw = beta ? beta->d[2] : 0; /* decay per key dim or per head */
  double *S = calloc((size_t)(Dk * Dv + 1), sizeof *S), *r = calloc((size_t)(Dv + 1), sizeof *r);
  if (!S || !r) {
    free(S), free(r);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hkv; h++) {
      for (int64_t i = 0; i < Dk * Dv; i++) S[i] = past ? past->v[(b * Hkv + h) * Dk * Dv + i] : 0;
      for (int64_t t = 0; t < T; t++) {
        const double *kt = in[1].v + (b * T + t) * Hkv * Dk + h * Dk, *vt = in[2].v + (b * T + t) * Hkv * Dv + h * Dv;
        if (gated && dec)
          for (int64_t i = 0; i < Dk; i++) {
            double g = exp(dec->v[(b * T + t) * dec->d[2] + h * dw + (dw > 1 ? i : 0)]);
            for (int64_t j = 0; j < Dv; j++) S[i * Dv + j] *= g;
          }
        double bt = delta && beta ? beta->v[(b * T + t) * bw + (bw > 1 ? h : 0)] : 1;
        for (int64_t j = 0; j < Dv; j++) {
          double ret = 0;
          if (delta)
            for (int64_t i = 0; i < Dk; i++) ret += S[i * Dv + j] * kt[i];
          r[j] = delta ? bt * (vt[j] - ret) : vt[j];
        }
        for (int64_t i = 0; i < Dk; i++)
          for (int64_t j = 0; j < Dv; j++) S[i * Dv + j] += kt[i] * r[j];
        for (int64_t g = 0; g < rep; g++) {
          int64_t hq = h * rep + g;
          const double *qt = in[0].v + (b * T + t) * Hq * Dk + hq * Dk;
          double *o = out[0].v + (b * T + t) * Hq * Dv + hq * Dv;
          for (int64_t j = 0; j < Dv; j++) {
            double s = 0;
            for (int64_t i = 0; i < Dk; i++) s += qt[i] * S[i * Dv + j];
            o[j] = scale * s;
          }
        }
      }
      if (nout > 1 && out[1].v) memcpy(out[1].v + (b * Hkv + h) * Dk * Dv, S, (size_t)(Dk * Dv) * sizeof *S);
    }
  free(S);
  free(r);
  return GOPT_OK;
}

/* ---- CausalConvWithState ---------------------------------------------------------------------------- */

/* input [B, C, L], depthwise weight [C, 1, K], bias [C], past_state [B, C, K-1] (zeros when absent):
 * the convolution over past_state ++ input without padding, plus bias, then the activation
 * (none, or silu / swish: x * sigmoid(x)); present_state is the last K-1 steps of past ++ input. */
static int f_causalconv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  if (in[0].rank != 3 || in[1].rank != 3 || in[1].d[0] != in[0].d[1] || in[1].d[1] != 1)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs input [B, C, L] and a depthwise weight [C, 1, K]");
  int64_t B = in[0].d[0], C = in[0].d[1], L = in[0].d[2], K = in[1].d[2], P = K - 1;
  const char *act = gopt_node_get_string(G, NODE, "activation", "none");
  int silu = !strcmp(act, "silu") || !strcmp(act, "swish");
  const rt *bias = nin > 2 && in[2].v ? &in[2] : NULL, *past = nin > 3 && in[3].v ? &in[3] : NULL;
  if (K < 1 || (bias && (bias->rank != 1 || bias->d[0] != C)) ||
      (past && (past->rank != 3 || past->d[0] != B || past->d[1] != C || past->d[2] != P)))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs kernel size >= 1, bias [%lld] and past_state [%lld, %lld, %lld]",
                         (long long)C, (long long)B, (long long)C, (long long)P);
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      const double *xv = in[0].v + (b * C + c) * L, *pv = past ? past->v + (b * C + c) * P : NULL;
      const double *w = in[1].v + c * K;
      for (int64_t t = 0; t < L; t++) {
        double s = bias ? bias->v[c] : 0;
        for (int64_t j = 0; j < K; j++) { /* padded index t + j: past for < P */
          int64_t p = t + j;
          s += w[j] * (p < P ? (pv ? pv[p] : 0) : xv[p - P]);
        }
        out[0].v[(b * C + c) * L + t] = silu ? s / (1 + exp(-s)) : s;
      }
      if (nout > 1 && out[1].v)
        for (int64_t j = 0; j < P; j++) {
          int64_t p = L + j; /* the last P of the P + L padded steps */
          out[1].v[(b * C + c) * P + j] = p < P ? (pv ? pv[p] : 0) : xv[p - P];
        }
    }
  return GOPT_OK;
}

const ref_entry ex_ref_llm_table[] = {
    {"Attention", f_attention, NULL},
    {"RMSNormalization", f_rmsnorm, NULL},
    {"RotaryEmbedding", f_rotary, NULL},
    {"LinearAttention", f_linattn, NULL},
    {"CausalConvWithState", f_causalconv, NULL},
    {"ai.onnx.preview::FlexAttention", f_flexattn, NULL},
    {NULL, NULL, NULL},
};
