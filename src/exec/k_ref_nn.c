/* k_ref_nn.c: reference kernels (k_ref.h) for network ops the specialised kernels do not run:
 * ConvTranspose, ConvInteger/QLinearConv, MatMulInteger/QLinearMatMul, QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, RNN/GRU (and LSTM with run-time sequence_lens), Einsum,
 * LRN, MeanVarianceNormalization, Det, Dropout's mask, Resize (cubic, tf_crop_and_resize,
 * align_corners) and Upsample, MaxPool with indices or integer input, MaxUnpool, GridSample.
 * ONNX semantics as the operator specification states them; double precision throughout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

static const char *optype(const gopt_exec *x, int32_t n) { return gopt_graph_str(x->g, x->g->nodes.a[n].type); }

/* ints attribute name into v (count c), or fill with dflt when absent. */
static void ints_or(const gopt_exec *x, int32_t n, const char *name, int64_t *v, int c, int64_t dflt) {
  size_t got = 0;
  const int64_t *a = gopt_node_get_ints(x->g, n, name, &got);
  for (int i = 0; i < c; i++) v[i] = a && (size_t)i < got ? a[i] : dflt;
}

/* Clamps v to integer dtype dt's range (floats and unknown types: unchanged). */
static double sat(double v, int dt) {
  double lo, hi;
  switch (dt) {
    case GOPT_DT_INT8: lo = -128, hi = 127; break;
    case GOPT_DT_UINT8: lo = 0, hi = 255; break;
    case GOPT_DT_INT16: lo = -32768, hi = 32767; break;
    case GOPT_DT_UINT16: lo = 0, hi = 65535; break;
    case GOPT_DT_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case GOPT_DT_UINT32: lo = 0, hi = 4294967295.0; break;
    case GOPT_DT_INT4: lo = -8, hi = 7; break;
    case GOPT_DT_UINT4: lo = 0, hi = 15; break;
    case GOPT_DT_INT2: lo = -2, hi = 1; break;
    case GOPT_DT_UINT2: lo = 0, hi = 3; break;
    default: return v;
  }
  return v < lo ? lo : v > hi ? hi : v;
}

static int is_float_dt(int dt) {
  return dt == GOPT_DT_FLOAT || dt == GOPT_DT_DOUBLE || dt == GOPT_DT_FLOAT16 || dt == GOPT_DT_BFLOAT16 ||
         (gopt_dtype_is_lowbit(dt) && dt != GOPT_DT_INT4 && dt != GOPT_DT_UINT4 && dt != GOPT_DT_INT2 &&
          dt != GOPT_DT_UINT2);
}

/* ---- convolution ---------------------------------------------------------------------------------- */

void ref_conv_params(const gopt_exec *x, int32_t n, const rt *X, const rt *W, const rt *Y, int transpose,
                     conv_p *p) {
  p->sp = X->rank - 2;
  p->group = gopt_node_get_int(x->g, n, "group", 1);
  ints_or(x, n, "strides", p->s, p->sp, 1);
  ints_or(x, n, "dilations", p->dl, p->sp, 1);
  ints_or(x, n, "pads", p->pb, p->sp, 0);
  const char *ap = gopt_node_get_string(x->g, n, "auto_pad", "NOTSET");
  int outshape = gopt_node_attr(x->g, n, "output_shape") != NULL;
  if (strcmp(ap, "SAME_UPPER") && strcmp(ap, "SAME_LOWER") && !(transpose && outshape)) return;
  int64_t op[GOPT_MAX_RANK];
  ints_or(x, n, "output_padding", op, p->sp, 0);
  for (int i = 0; i < p->sp; i++) {
    int64_t in = X->d[2 + i], out = Y->d[2 + i], kk = (W->d[2 + i] - 1) * p->dl[i] + 1;
    int64_t total = transpose ? p->s[i] * (in - 1) + op[i] + kk - out : (out - 1) * p->s[i] + kk - in;
    if (total < 0) total = 0;
    p->pb[i] = !strcmp(ap, "SAME_LOWER") ? total - total / 2 : total / 2;
  }
}

/* Y[n, m, o...] = sum_{c in group, k...} X[n, c, o*s - pb + k*d] W[m, c, k...] (+ bias). */
static void conv_fwd(const rt *X, const rt *W, const double *bias, rt *Y, const conv_p *p) {
  int sp = p->sp;
  int64_t N = X->d[0], C = X->d[1], M = Y->d[1], Cg = C / p->group, Mg = M / p->group;
  int64_t isz = 1, osz = 1, ksz = 1;
  for (int i = 0; i < sp; i++) {
    isz *= X->d[2 + i];
    osz *= Y->d[2 + i];
    ksz *= W->d[2 + i];
  }
  for (int64_t nn = 0; nn < N; nn++)
    for (int64_t m = 0; m < M; m++) {
      int64_t g = m / Mg;
      for (int64_t o = 0; o < osz; o++) {
        double acc = bias ? bias[m] : 0;
        for (int64_t kf = 0; kf < ksz; kf++) {
          int64_t ip = 0, rem_o = o, rem_k = kf, mul = 1, ok = 1;
          for (int i = sp - 1; i >= 0; i--) {
            int64_t oc = rem_o % Y->d[2 + i], kc = rem_k % W->d[2 + i];
            rem_o /= Y->d[2 + i];
            rem_k /= W->d[2 + i];
            int64_t c = oc * p->s[i] - p->pb[i] + kc * p->dl[i];
            if (c < 0 || c >= X->d[2 + i]) ok = 0;
            ip += c * mul;
            mul *= X->d[2 + i];
          }
          if (!ok) continue;
          for (int64_t c = 0; c < Cg; c++)
            acc += X->v[(nn * C + g * Cg + c) * isz + ip] * W->v[(m * Cg + c) * ksz + kf];
        }
        Y->v[(nn * M + m) * osz + o] = acc;
      }
    }
}

static int f_convtranspose(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  const rt *X = &in[0], *W = &in[1];
  rt *Y = &out[0];
  conv_p p;
  ref_conv_params(x, NODE, X, W, Y, 1, &p);
  int sp = p.sp;
  int64_t N = X->d[0], C = X->d[1], M = Y->d[1], Cg = C / p.group, Mg = W->d[1];
  int64_t isz = 1, osz = 1, ksz = 1;
  for (int i = 0; i < sp; i++) {
    isz *= X->d[2 + i];
    osz *= Y->d[2 + i];
    ksz *= W->d[2 + i];
  }
  for (int64_t nn = 0; nn < N; nn++) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t o = 0; o < osz; o++) Y->v[(nn * M + m) * osz + o] = nin > 2 && in[2].v ? in[2].v[m] : 0;
    for (int64_t c = 0; c < C; c++) {
      int64_t g = c / Cg;
      for (int64_t ii = 0; ii < isz; ii++) {
        double xv = X->v[(nn * C + c) * isz + ii];
        for (int64_t kf = 0; kf < ksz; kf++) {
          int64_t op = 0, rem_i = ii, rem_k = kf, mul = 1, ok = 1;
          for (int i = sp - 1; i >= 0; i--) {
            int64_t ic = rem_i % X->d[2 + i], kc = rem_k % W->d[2 + i];
            rem_i /= X->d[2 + i];
            rem_k /= W->d[2 + i];
            int64_t q = ic * p.s[i] - p.pb[i] + kc * p.dl[i];
            if (q < 0 || q >= Y->d[2 + i]) ok = 0;
            op += q * mul;
            mul *= Y->d[2 + i];
          }
          if (!ok) continue;
          for (int64_t mm = 0; mm < Mg; mm++)
            Y->v[(nn * M + g * Mg + mm) * osz + op] += xv * W->v[(c * Mg + mm) * ksz + kf];
        }
      }
    }
  }
  return GOPT_OK;
}

/* ConvInteger (x, w, x_zp, w_zp) and QLinearConv (x, xs, xzp, w, ws, wzp, ys, yzp, bias). */
/* Conv of the dtypes oneDNN does not take here (16-bit floats, double): X, W, optional bias. */
static int f_conv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  conv_p p;
  ref_conv_params(x, NODE, &in[0], &in[1], &out[0], 0, &p);
  conv_fwd(&in[0], &in[1], nin > 2 && in[2].v ? in[2].v : NULL, &out[0], &p);
  return GOPT_OK;
}

static int f_convq(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  int ql = !strcmp(optype(x, NODE), "QLinearConv");
  rt *X = &in[0], *W = &in[ql ? 3 : 1];
  const rt *xz = ql ? &in[2] : nin > 2 ? &in[2] : NULL, *wz = ql ? &in[5] : nin > 3 ? &in[3] : NULL;
  int64_t M = W->d[0], per = W->n / (M ? M : 1);
  for (int64_t i = 0; xz && xz->v && i < X->n; i++) X->v[i] -= xz->v[0];
  for (int64_t i = 0; wz && wz->v && i < W->n; i++) W->v[i] -= wz->v[wz->n > 1 ? i / per : 0];
  conv_p p;
  ref_conv_params(x, NODE, X, W, &out[0], 0, &p);
  conv_fwd(X, W, ql && nin > 8 && in[8].v ? in[8].v : NULL, &out[0], &p);
  if (!ql) return GOPT_OK;
  int64_t osz = out[0].n / (out[0].d[0] * M != 0 ? out[0].d[0] * M : 1);
  for (int64_t i = 0; i < out[0].n; i++) {
    int64_t m = (i / osz) % M;
    double s = in[1].v[0] * in[4].v[in[4].n > 1 ? m : 0] / in[6].v[0];
    out[0].v[i] = sat(nearbyint(out[0].v[i] * s) + (in[7].v ? in[7].v[0] : 0), out[0].dt);
  }
  return GOPT_OK;
}

/* ---- matmul ------------------------------------------------------------------------------------- */

/* Y = A @ B with numpy broadcasting over batch dims (A, B at least 2-D). */
static void matmul(const rt *A, const rt *B, rt *Y) {
  int64_t Mr = A->d[A->rank - 2], K = A->d[A->rank - 1], Nc = B->d[B->rank - 1];
  rt ab = *A, bb = *B, yb = *Y;
  ab.rank -= 2, bb.rank -= 2, yb.rank -= 2;
  int64_t nb = 1;
  for (int i = 0; i < yb.rank; i++) nb *= yb.d[i];
  for (int64_t b = 0; b < nb; b++) {
    const double *a = A->v + ref_bcast_index(&ab, &yb, b) * Mr * K, *bm = B->v + ref_bcast_index(&bb, &yb, b) * K * Nc;
    double *y = Y->v + b * Mr * Nc;
    for (int64_t i = 0; i < Mr; i++)
      for (int64_t j = 0; j < Nc; j++) {
        double s = 0;
        for (int64_t q = 0; q < K; q++) s += a[i * K + q] * bm[q * Nc + j];
        y[i * Nc + j] = s;
      }
  }
}

/* MatMulInteger (a, b, a_zp, b_zp) and QLinearMatMul (a, as, azp, b, bs, bzp, ys, yzp). */
static int f_matmulq(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int ql = !strcmp(optype(x, NODE), "QLinearMatMul");
  rt *A = &in[0], *B = &in[ql ? 3 : 1];
  const rt *az = ql ? &in[2] : nin > 2 ? &in[2] : NULL, *bz = ql ? &in[5] : nin > 3 ? &in[3] : NULL;
  if (A->rank < 2 || B->rank < 2) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "1-D operands are not supported");
  int64_t K = A->d[A->rank - 1], Nc = B->d[B->rank - 1];
  for (int64_t i = 0; az && az->v && i < A->n; i++) A->v[i] -= az->v[az->n > 1 ? (i / K) % az->n : 0];
  for (int64_t i = 0; bz && bz->v && i < B->n; i++) B->v[i] -= bz->v[bz->n > 1 ? (i % Nc) % bz->n : 0];
  matmul(A, B, &out[0]);
  if (!ql) return GOPT_OK;
  double s = in[1].v[0] * in[4].v[0] / in[6].v[0];
  for (int64_t i = 0; i < out[0].n; i++) out[0].v[i] = sat(nearbyint(out[0].v[i] * s) + in[7].v[0], out[0].dt);
  return GOPT_OK;
}

/* ---- quantization --------------------------------------------------------------------------------- */

/* Index into a quantization parameter p (scale or zero point) of x's flat element i: per tensor
 * (one value), per axis (1-D along axis) or blocked (x's rank, axis dim ceil(d / block)). */
static int64_t quant_index(const rt *x, const rt *p, int axis, int64_t block, int64_t i) {
  if (p->n <= 1) return 0;
  int64_t c[GOPT_MAX_RANK], r = i;
  for (int d = x->rank - 1; d >= 0; d--) {
    c[d] = r % x->d[d];
    r /= x->d[d];
  }
  if (p->rank != x->rank || block <= 0) return c[axis];
  c[axis] /= block;
  int64_t idx = 0;
  for (int d = 0; d < x->rank; d++) idx = idx * p->d[d] + (p->d[d] == 1 ? 0 : c[d]);
  return idx;
}

/* QuantizeLinear / DequantizeLinear (opsets 10-23): per tensor, per axis or blocked (block_size)
 * scales; integer outputs round half to even and saturate to the type, float8/float4 outputs round
 * x / scale to the type (store, with the node's saturate). x / scale is computed in x's precision
 * (float unless x is double). */
static int f_quant(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int q = !strcmp(optype(x, NODE), "QuantizeLinear"), axis = 0, rc;
  int64_t block = gopt_node_get_int(G, NODE, "block_size", 0);
  if ((in[1].n > 1 || block > 0) && (rc = ref_axis(x, NODE, "axis", 1, in[0].rank, &axis, err))) return rc;
  const rt *zp = nin > 2 && in[2].v ? &in[2] : NULL;
  int fl = is_float_dt(out[0].dt), dbl = in[0].dt == GOPT_DT_DOUBLE;
  for (int64_t i = 0; i < in[0].n; i++) {
    int64_t c = quant_index(&in[0], &in[1], axis, block, i);
    double s = in[1].v[c], z = zp ? zp->v[quant_index(&in[0], zp, axis, block, i)] : 0;
    if (q) {
      double v = dbl ? in[0].v[i] / s : (double)(float)(in[0].v[i] / s);
      out[0].v[i] = fl ? v + z : sat(nearbyint(v) + z, out[0].dt);
    } else {
      out[0].v[i] = (in[0].v[i] - z) * s;
    }
  }
  return GOPT_OK;
}

static int f_dynquant(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)x, (void)k, (void)nin, (void)nout, (void)err;
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < in[0].n; i++) {
    lo = fminf(lo, (float)in[0].v[i]);
    hi = fmaxf(hi, (float)in[0].v[i]);
  }
  float s = (hi - lo) / 255.0f;
  if (s == 0) s = 1;
  double zp = sat(nearbyintf((0.0f - lo) / s), GOPT_DT_UINT8);
  for (int64_t i = 0; i < in[0].n; i++) out[0].v[i] = sat(nearbyintf((float)in[0].v[i] / s) + zp, GOPT_DT_UINT8);
  out[1].v[0] = s;
  out[2].v[0] = zp;
  return GOPT_OK;
}

/* ---- recurrent -------------------------------------------------------------------------------------- */

static double act(const char *a, double v, double alpha, double beta) {
  if (!strcmp(a, "Sigmoid")) return 1 / (1 + exp(-v));
  if (!strcmp(a, "Tanh")) return tanh(v);
  if (!strcmp(a, "Relu")) return v > 0 ? v : 0;
  if (!strcmp(a, "LeakyRelu")) return v > 0 ? v : alpha * v;
  if (!strcmp(a, "HardSigmoid")) return fmax(0, fmin(1, alpha * v + beta));
  if (!strcmp(a, "Affine")) return alpha * v + beta;
  if (!strcmp(a, "ScaledTanh")) return alpha * tanh(beta * v);
  if (!strcmp(a, "Elu")) return v >= 0 ? v : alpha * (exp(v) - 1);
  if (!strcmp(a, "Softsign")) return v / (1 + fabs(v));
  if (!strcmp(a, "Softplus")) return log1p(exp(v));
  return v;
}

typedef struct rnn_cfg {
  int kind;                 /* 1 RNN, 3 GRU, 4 LSTM (gates) */
  int64_t T, B, I, H;
  int dirs, layout, lbr;
  double clip;
  const char *f[2], *g[2], *h[2];
  double fa[2], fb[2], ga[2], gb[2];
} rnn_cfg;

/* One direction d of RNN/GRU/LSTM over batch b: in = X, W, R, B, seq_lens, h0 (, c0, P). */
static void rnn_dir(const rnn_cfg *c, int d, int64_t b, rt *in, int nin, rt *out, int nout, double *h, double *cc) {
  int64_t T = c->T, B = c->B, I = c->I, H = c->H, G4 = c->kind * H;
  const double *W = in[1].v + d * G4 * I, *R = in[2].v + d * G4 * H;
  const double *Wb = nin > 3 && in[3].v ? in[3].v + d * 2 * G4 : NULL, *Rb = Wb ? Wb + G4 : NULL;
  int64_t len = nin > 4 && in[4].v ? (int64_t)in[4].v[b] : T;
  const double *P = c->kind == 4 && nin > 7 && in[7].v ? in[7].v + d * 3 * H : NULL;
  int rev = d == 1 || c->dirs == -1;
  double gx[4 * 1024], gh[4 * 1024], hn[1024];
  for (int64_t j = 0; j < H; j++) {
    h[j] = nin > 5 && in[5].v ? in[5].v[(c->layout ? b * abs(c->dirs) + d : d * B + b) * H + j] : 0;
    cc[j] = c->kind == 4 && nin > 6 && in[6].v ? in[6].v[(c->layout ? b * abs(c->dirs) + d : d * B + b) * H + j] : 0;
  }
  for (int64_t st = 0; st < len; st++) {
    int64_t t = rev ? len - 1 - st : st;
    const double *xt = in[0].v + (c->layout ? b * T + t : t * B + b) * I;
    for (int64_t q = 0; q < G4; q++) {
      double sx = Wb ? Wb[q] : 0, sh = Rb ? Rb[q] : 0;
      for (int64_t i = 0; i < I; i++) sx += W[q * I + i] * xt[i];
      for (int64_t i = 0; i < H; i++) sh += R[q * H + i] * h[i];
      gx[q] = sx;
      gh[q] = sh;
    }
    for (int64_t j = 0; j < H; j++) {
      double cl = c->clip;
#define CLIP(v) (cl > 0 ? fmax(-cl, fmin(cl, (v))) : (v))
      if (c->kind == 1) {
        hn[j] = act(c->f[d], CLIP(gx[j] + gh[j]), c->fa[d], c->fb[d]);
      } else if (c->kind == 3) {
        double z = act(c->f[d], CLIP(gx[j] + gh[j]), c->fa[d], c->fb[d]);
        double r = act(c->f[d], CLIP(gx[H + j] + gh[H + j]), c->fa[d], c->fb[d]);
        double hh;
        if (c->lbr) {
          hh = gx[2 * H + j] + r * gh[2 * H + j];
        } else {
          double s = Rb ? Rb[2 * H + j] : 0;
          for (int64_t i = 0; i < H; i++) s += R[(2 * H + j) * H + i] * r * h[i];
          hh = gx[2 * H + j] + s;
        }
        hh = act(c->g[d], CLIP(hh), c->ga[d], c->gb[d]);
        hn[j] = (1 - z) * hh + z * h[j];
      } else {
        double gi = gx[j] + gh[j], go = gx[H + j] + gh[H + j], gf = gx[2 * H + j] + gh[2 * H + j];
        double gc = gx[3 * H + j] + gh[3 * H + j];
        if (P) {
          gi += P[j] * cc[j];
          gf += P[2 * H + j] * cc[j];
        }
        double it = act(c->f[d], CLIP(gi), c->fa[d], c->fb[d]), ft = act(c->f[d], CLIP(gf), c->fa[d], c->fb[d]);
        double ct = act(c->g[d], CLIP(gc), c->ga[d], c->gb[d]);
        cc[j] = ft * cc[j] + it * ct;
        if (P) go += P[H + j] * cc[j];
        double ot = act(c->f[d], CLIP(go), c->fa[d], c->fb[d]);
        hn[j] = ot * act(c->h[d], cc[j], 0, 0);
      }
#undef CLIP
    }
    memcpy(h, hn, (size_t)H * sizeof(double));
    if (nout > 0 && out[0].v) {
      int D = abs(c->dirs);
      double *y = out[0].v + (c->layout ? ((b * T + t) * D + d) * H : ((t * D + d) * B + b) * H);
      memcpy(y, h, (size_t)H * sizeof(double));
    }
  }
  int D = abs(c->dirs);
  size_t o = (size_t)(c->layout ? (b * D + d) * H : (d * B + b) * H);
  if (nout > 1 && out[1].v) memcpy(out[1].v + o, h, (size_t)H * sizeof(double));
  if (nout > 2 && out[2].v && c->kind == 4) memcpy(out[2].v + o, cc, (size_t)H * sizeof(double));
}

static int f_rnn(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  rnn_cfg c;
  memset(&c, 0, sizeof c);
  const char *t = optype(x, NODE);
  c.kind = !strcmp(t, "RNN") ? 1 : !strcmp(t, "GRU") ? 3 : 4;
  c.layout = (int)gopt_node_get_int(G, NODE, "layout", 0);
  c.T = in[0].d[c.layout ? 1 : 0];
  c.B = in[0].d[c.layout ? 0 : 1];
  c.I = in[0].d[2];
  c.H = gopt_node_get_int(G, NODE, "hidden_size", in[2].d[2]);
  c.lbr = (int)gopt_node_get_int(G, NODE, "linear_before_reset", 0);
  c.clip = gopt_node_get_float(G, NODE, "clip", 0);
  const char *dir = gopt_node_get_string(G, NODE, "direction", "forward");
  c.dirs = !strcmp(dir, "bidirectional") ? 2 : !strcmp(dir, "reverse") ? -1 : 1;
  if (c.H > 1024) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "hidden_size > 1024");
  const gopt_attr *acts = gopt_node_attr(G, NODE, "activations");
  size_t na = 0, nal = 0, nbe = 0;
  const float *al = gopt_node_get_floats(G, NODE, "activation_alpha", &nal);
  const float *be = gopt_node_get_floats(G, NODE, "activation_beta", &nbe);
  int per = c.kind == 1 ? 1 : c.kind == 3 ? 2 : 3;
  for (int d = 0; d < 2; d++) {
    c.f[d] = c.kind == 1 ? "Tanh" : "Sigmoid";
    c.g[d] = c.h[d] = "Tanh";
    const char **slot[3] = {&c.f[d], &c.g[d], &c.h[d]};
    double *sa[3] = {&c.fa[d], &c.ga[d], NULL}, *sb[3] = {&c.fb[d], &c.gb[d], NULL};
    for (int q = 0; q < per; q++) {
      size_t idx = (size_t)(d * per + q);
      if (acts && acts->kind == GOPT_ATTR_STRINGS && idx < acts->n)
        *slot[q] = gopt_graph_str(G, G->strids.a[acts->v.off + idx]);
      if (sa[q]) *sa[q] = al && idx < nal ? al[idx] : !strcmp(*slot[q], "LeakyRelu") ? 0.01 : !strcmp(*slot[q], "HardSigmoid") ? 0.2 : 1.0;
      if (sb[q]) *sb[q] = be && idx < nbe ? be[idx] : !strcmp(*slot[q], "HardSigmoid") ? 0.5 : 0.0;
    }
    (void)na;
  }
  double h[1024], cc[1024];
  for (int d = 0; d < abs(c.dirs); d++)
    for (int64_t b = 0; b < c.B; b++) rnn_dir(&c, d, b, in, nin, out, nout, h, cc);
  return GOPT_OK;
}

static int claim_lstm(const gopt_exec *x, int32_t n) {
  int32_t sl = x->g->nodes.a[n].n_in > 4 ? gopt_node_input(x->g, n, 4) : -1;
  return sl >= 0 && !ex_is_const(x, sl);
}

/* ---- Einsum ---------------------------------------------------------------------------------------- */

/* Parses one term into labels (ellipsis expanded to 'A'.. right-aligned over ne dims). */
static int ein_term(const char *s, size_t len, int rank, int ne, char *lab, int *nl) {
  int n = 0, letters = 0;
  for (size_t i = 0; i < len; i++) letters += s[i] >= 'a' && s[i] <= 'z';
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') return -1;
      int e = rank >= 0 ? rank - letters : ne;
      for (int j = 0; j < e; j++) lab[n++] = (char)('A' + (ne - e) + j);
      i += 2;
    } else if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')) {
      lab[n++] = s[i];
    }
  }
  *nl = n;
  return 0;
}

static int f_einsum(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const char *eq = gopt_node_get_string(G, NODE, "equation", "");
  const char *arrow = strstr(eq, "->");
  size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
  char lab[REF_MAX_IO][GOPT_MAX_RANK + 8], olab[64];
  int nl[REF_MAX_IO], nol = 0, ne = 0;
  const char *p = eq;
  for (int i = 0; i < nin; i++) { /* ellipsis width: the widest operand's */
    const char *e = memchr(p, ',', lhs - (size_t)(p - eq));
    size_t len = e ? (size_t)(e - p) : lhs - (size_t)(p - eq);
    int letters = 0, dots = 0;
    for (size_t j = 0; j < len; j++) letters += p[j] >= 'a' && p[j] <= 'z', dots += p[j] == '.';
    if (dots && in[i].rank - letters > ne) ne = in[i].rank - letters;
    if (ein_term(p, len, in[i].rank, 0, lab[i], &nl[i]) || nl[i] < 0) break;
    p = e ? e + 1 : p + len;
  }
  p = eq;
  int64_t size[128] = {0};
  for (int i = 0; i < nin; i++) {
    const char *e = memchr(p, ',', lhs - (size_t)(p - eq));
    size_t len = e ? (size_t)(e - p) : lhs - (size_t)(p - eq);
    ein_term(p, len, in[i].rank, ne, lab[i], &nl[i]);
    if (nl[i] != in[i].rank) return ex_node_error(x, NODE, err, GOPT_EINVAL, "equation '%s' does not match input %d", eq, i);
    for (int j = 0; j < nl[i]; j++)
      if (in[i].d[j] != 1 || !size[(int)lab[i][j]]) size[(int)lab[i][j]] = in[i].d[j];
    p = e ? e + 1 : p + len;
  }
  if (arrow) {
    ein_term(arrow + 2, strlen(arrow + 2), -1, ne, olab, &nol);
  } else { /* implicit: ellipsis, then labels seen once, alphabetical */
    for (int j = 0; j < ne; j++) olab[nol++] = (char)('A' + j);
    for (int c = 'a'; c <= 'z'; c++) {
      int cnt = 0;
      for (int i = 0; i < nin; i++)
        for (int j = 0; j < nl[i]; j++) cnt += lab[i][j] == c;
      if (cnt == 1) olab[nol++] = (char)c;
    }
  }
  char all[128];
  int na = 0;
  for (int c = 0; c < 128; c++)
    if (size[c]) all[na++] = (char)c;
  int64_t total = 1, idx[128] = {0};
  for (int a = 0; a < na; a++) total *= size[(int)all[a]];
  for (int64_t e = 0; e < total; e++) {
    int64_t rem = e;
    for (int a = na - 1; a >= 0; a--) {
      idx[(int)all[a]] = rem % size[(int)all[a]];
      rem /= size[(int)all[a]];
    }
    double prod = 1;
    for (int i = 0; i < nin; i++) {
      int64_t off = 0;
      for (int j = 0; j < nl[i]; j++) off = off * in[i].d[j] + (in[i].d[j] == 1 ? 0 : idx[(int)lab[i][j]]);
      prod *= in[i].v[off];
    }
    int64_t o = 0;
    for (int j = 0; j < nol; j++) o = o * size[(int)olab[j]] + idx[(int)olab[j]];
    if (o < out[0].n) out[0].v[o] += prod;
  }
  return GOPT_OK;
}

/* ---- normalisation -------------------------------------------------------------------------------- */

static int f_lrn(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  int64_t size = gopt_node_get_int(G, NODE, "size", 1);
  double al = gopt_node_get_float(G, NODE, "alpha", 1e-4), be = gopt_node_get_float(G, NODE, "beta", 0.75);
  double bias = gopt_node_get_float(G, NODE, "bias", 1.0);
  int64_t N = in[0].d[0], C = in[0].d[1], S = in[0].n / (N * C != 0 ? N * C : 1);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t s = 0; s < S; s++) {
        double sq = 0;
        for (int64_t q = c - (size - 1) / 2; q <= c + (size - 1 + 1) / 2; q++)
          if (q >= 0 && q < C) sq += in[0].v[(n * C + q) * S + s] * in[0].v[(n * C + q) * S + s];
        out[0].v[(n * C + c) * S + s] = in[0].v[(n * C + c) * S + s] / pow(bias + al / (double)size * sq, be);
      }
  return GOPT_OK;
}

static int f_mvn(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  int64_t ax[GOPT_MAX_RANK];
  size_t na = 0;
  const int64_t *a = gopt_node_get_ints(G, NODE, "axes", &na);
  uint8_t red[GOPT_MAX_RANK] = {0};
  if (!a) red[0] = red[2] = red[3] = 1;
  for (size_t i = 0; a && i < na; i++) red[(ax[i] = a[i] < 0 ? a[i] + in[0].rank : a[i])] = 1;
  int64_t st[GOPT_MAX_RANK], mul = 1, on = 1;
  for (int i = in[0].rank - 1; i >= 0; i--) {
    st[i] = red[i] ? 0 : mul;
    if (!red[i]) mul *= in[0].d[i], on *= in[0].d[i];
  }
  double *s1 = calloc((size_t)on * 3 + 1, sizeof *s1);
  if (!s1) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  double *s2 = s1 + on, *cnt = s2 + on;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t e = 0; e < in[0].n; e++) {
      int64_t rem = e, o = 0;
      for (int i = in[0].rank - 1; i >= 0; i--) {
        o += (rem % in[0].d[i]) * st[i];
        rem /= in[0].d[i];
      }
      double v = in[0].v[e];
      if (pass == 0) {
        s1[o] += v, s2[o] += v * v, cnt[o] += 1;
      } else {
        double mu = s1[o] / cnt[o], var = s2[o] / cnt[o] - mu * mu;
        out[0].v[e] = (v - mu) / (sqrt(var) + 1e-9);
      }
    }
  free(s1);
  return GOPT_OK;
}

static int f_det(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)x, (void)k, (void)nin, (void)nout;
  int64_t n = in[0].d[in[0].rank - 1], nb = n ? in[0].n / (n * n) : 0;
  double *a = malloc((size_t)(n * n + 1) * sizeof *a);
  if (!a) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t b = 0; b < nb; b++) {
    memcpy(a, in[0].v + b * n * n, (size_t)(n * n) * sizeof *a);
    double det = 1;
    for (int64_t c = 0; c < n; c++) {
      int64_t piv = c;
      for (int64_t r = c + 1; r < n; r++)
        if (fabs(a[r * n + c]) > fabs(a[piv * n + c])) piv = r;
      if (a[piv * n + c] == 0) {
        det = 0;
        break;
      }
      if (piv != c) {
        for (int64_t j = 0; j < n; j++) {
          double t = a[c * n + j];
          a[c * n + j] = a[piv * n + j];
          a[piv * n + j] = t;
        }
        det = -det;
      }
      det *= a[c * n + c];
      for (int64_t r = c + 1; r < n; r++) {
        double f = a[r * n + c] / a[c * n + c];
        for (int64_t j = c; j < n; j++) a[r * n + j] -= f * a[c * n + j];
      }
    }
    out[0].v[b] = det;
  }
  free(a);
  return GOPT_OK;
}

/* Dropout in inference (or ratio 0): output = input, mask all true. */
static int f_dropout(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int train = nin > 2 && in[2].v && in[2].v[0] != 0;
  double ratio = nin > 1 && in[1].v ? in[1].v[0] : gopt_node_get_float(G, NODE, "ratio", 0.5);
  if (train && ratio != 0)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "training mode with ratio > 0 (random) is not supported");
  memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof(double));
  for (int64_t i = 0; nout > 1 && out[1].v && i < out[1].n; i++) out[1].v[i] = 1;
  return GOPT_OK;
}

/* ---- Resize / Upsample ----------------------------------------------------------------------------- */

#define RS_MAX_TAPS 64
typedef struct rs_tap {
  int64_t n;               /* taps */
  int64_t ix[RS_MAX_TAPS];
  double w[RS_MAX_TAPS];
  int outside;             /* tf_crop_and_resize: coordinate outside the input */
} rs_tap;

static double cubic_w(double s, double a) {
  s = fabs(s);
  if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
  if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  return 0;
}

/* Antialiased taps when downsampling (opset 18 antialias, scale sc < 1): the linear (triangle,
 * support 1) or cubic (support 2) filter stretched by 1 / sc around input coordinate c, taps at
 * floor(c) + i with edge clamping (cubic: exclude_outside zeroes those outside), normalised to
 * sum 1, as onnx's reference. At most RS_MAX_TAPS taps (the caller checks the scale). */
static void rs_antialias(const gopt_exec *x, int32_t n, int64_t in, double c, double sc, int linear, rs_tap *t) {
  double a = gopt_node_get_float(x->g, n, "cubic_coeff_a", -0.75), sum = 0;
  int excl = !linear && gopt_node_get_int(x->g, n, "exclude_outside", 0);
  int64_t base = (int64_t)floor(c), start = (int64_t)floor((linear ? -1 : -2) / sc) + 1;
  int64_t cnt = (linear ? 2 : 4) - 2 * start;
  double ratio = c - (double)base;
  if (cnt > RS_MAX_TAPS) cnt = RS_MAX_TAPS;
  t->n = cnt;
  for (int64_t j = 0; j < cnt; j++) {
    int64_t ii = base + start + j;
    double arg = sc * ((double)(start + j) - ratio);
    double w = linear ? fmax(0, 1 - fabs(arg)) : cubic_w(arg, a);
    if (excl && (ii < 0 || ii >= in)) w = 0;
    t->ix[j] = ii < 0 ? 0 : ii >= in ? in - 1 : ii;
    t->w[j] = w;
    sum += w;
  }
  for (int64_t j = 0; j < cnt && sum != 0; j++) t->w[j] /= sum;
}

/* Taps of output coordinate o along one axis (in -> out, scale sc, roi [r0, r1]). */
static void rs_taps(const gopt_exec *x, int32_t n, int64_t in, int64_t out, double sc, double r0,
                    double r1, int64_t o, rs_tap *t) {
  const char *ctm = gopt_node_get_string(x->g, n, "coordinate_transformation_mode", "half_pixel");
  const char *mode = gopt_node_get_string(x->g, n, "mode", "nearest");
  int upsample = !strcmp(optype(x, n), "Upsample") || x->opset < 11;
  if (upsample) ctm = "asymmetric";
  double c;
  t->outside = 0;
  double outf = (double)in * sc; /* the resized length before flooring, as ONNX's reference */
  if (!strcmp(ctm, "align_corners")) c = outf <= 1 ? 0 : (double)o * (double)(in - 1) / (outf - 1);
  else if (!strcmp(ctm, "asymmetric")) c = (double)o / sc;
  else if (!strcmp(ctm, "pytorch_half_pixel")) c = out > 1 ? ((double)o + 0.5) / sc - 0.5 : 0;
  else if (!strcmp(ctm, "tf_half_pixel_for_nn")) c = ((double)o + 0.5) / sc;
  else if (!strcmp(ctm, "half_pixel_symmetric")) { /* opset 19: half_pixel about the centre */
    double off = (double)in / 2 * (1 - (double)out / outf);
    c = off + ((double)o + 0.5) / sc - 0.5;
  }
  else if (!strcmp(ctm, "tf_crop_and_resize")) {
    c = out > 1 ? r0 * (double)(in - 1) + (double)o * (r1 - r0) * (double)(in - 1) / (double)(out - 1)
                : 0.5 * (r0 + r1) * (double)(in - 1);
    t->outside = c < 0 || c > (double)(in - 1);
  } else c = ((double)o + 0.5) / sc - 0.5;
  if (!strcmp(mode, "nearest")) {
    const char *nm = gopt_node_get_string(x->g, n, "nearest_mode", "round_prefer_floor");
    double r;
    if (upsample || !strcmp(nm, "floor")) r = floor(c);
    else if (!strcmp(nm, "ceil")) r = ceil(c);
    else if (!strcmp(nm, "round_prefer_ceil")) r = c == floor(c) + 0.5 ? ceil(c) : nearbyint(c);
    else r = c == floor(c) + 0.5 ? floor(c) : nearbyint(c);
    t->n = 1;
    t->ix[0] = r < 0 ? 0 : r > (double)(in - 1) ? in - 1 : (int64_t)r;
    t->w[0] = 1;
  } else if (gopt_node_get_int(x->g, n, "antialias", 0) && sc < 1) {
    rs_antialias(x, n, in, c, sc, !strcmp(mode, "linear"), t);
  } else if (!strcmp(mode, "linear")) {
    double cc = c < 0 ? 0 : c > (double)(in - 1) ? (double)(in - 1) : c;
    int64_t i0 = (int64_t)floor(cc);
    int64_t i1 = i0 + 1 < in ? i0 + 1 : in - 1;
    t->n = 2;
    t->ix[0] = i0, t->ix[1] = i1;
    t->w[1] = cc - (double)i0, t->w[0] = 1 - t->w[1];
  } else { /* cubic */
    double a = gopt_node_get_float(x->g, n, "cubic_coeff_a", -0.75), sum = 0;
    int excl = (int)gopt_node_get_int(x->g, n, "exclude_outside", 0);
    int64_t i0 = (int64_t)floor(c);
    double f = c - (double)i0;
    t->n = 4;
    for (int j = 0; j < 4; j++) {
      int64_t ii = i0 - 1 + j;
      double w = cubic_w(f - (j - 1), a);
      if (excl && (ii < 0 || ii >= in)) w = 0;
      t->ix[j] = ii < 0 ? 0 : ii >= in ? in - 1 : ii;
      t->w[j] = w;
      sum += w;
    }
    if (excl && sum != 0)
      for (int j = 0; j < 4; j++) t->w[j] /= sum;
  }
}

static int f_resize(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int r = in[0].rank;
  double sc[GOPT_MAX_RANK], r0[GOPT_MAX_RANK], r1[GOPT_MAX_RANK];
  const rt *scales = x->opset < 11 || !strcmp(optype(x, NODE), "Upsample") ? (nin > 1 ? &in[1] : NULL)
                                                                         : (nin > 2 ? &in[2] : NULL);
  size_t na = 0; /* opset 18 axes: scales and roi hold values for those axes only */
  const int64_t *axes = gopt_node_get_ints(G, NODE, "axes", &na);
  int pos[GOPT_MAX_RANK], nv = axes && na ? (int)na : r;
  for (int i = 0; i < r; i++) pos[i] = axes && na ? -1 : i;
  for (size_t j = 0; axes && j < na; j++) {
    int64_t a = axes[j] < 0 ? axes[j] + r : axes[j];
    if (a < 0 || a >= r) return ex_node_error(x, NODE, err, GOPT_EINVAL, "axis %lld out of range", (long long)axes[j]);
    pos[a] = (int)j;
  }
  const rt *roi = x->opset >= 11 && nin > 1 && in[1].v && in[1].n == 2 * nv ? &in[1] : NULL;
  for (int i = 0; i < r; i++) {
    int j = pos[i];
    sc[i] = j >= 0 && scales && scales->v && scales->n == nv ? scales->v[j] : (double)out[0].d[i] / (double)in[0].d[i];
    r0[i] = roi && j >= 0 ? roi->v[j] : 0;
    r1[i] = roi && j >= 0 ? roi->v[nv + j] : 1;
  }
  double ext = gopt_node_get_float(G, NODE, "extrapolation_value", 0);
  for (int i = 0; i < r && gopt_node_get_int(G, NODE, "antialias", 0); i++)
    if (sc[i] < 4.0 / (RS_MAX_TAPS - 4))
      return ex_node_error(x, NODE, err, GOPT_EUNSUP, "antialias at scale %g needs more than %d taps", sc[i], RS_MAX_TAPS);
  rs_tap *taps[GOPT_MAX_RANK] = {0};
  int rc = GOPT_OK;
  for (int i = 0; i < r && !rc; i++) {
    taps[i] = malloc((size_t)(out[0].d[i] + 1) * sizeof(rs_tap));
    if (!taps[i]) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    for (int64_t o = 0; !rc && o < out[0].d[i]; o++)
      rs_taps(x, NODE, in[0].d[i], out[0].d[i], sc[i], r0[i], r1[i], o, &taps[i][o]);
  }
  int64_t ist[GOPT_MAX_RANK];
  ref_strides(&in[0], ist);
  for (int64_t e = 0; !rc && e < out[0].n; e++) {
    const rs_tap *t[GOPT_MAX_RANK];
    int64_t rem = e, combos = 1;
    int outside = 0;
    for (int i = r - 1; i >= 0; i--) {
      t[i] = &taps[i][rem % out[0].d[i]];
      rem /= out[0].d[i];
      combos *= t[i]->n;
      outside |= t[i]->outside;
    }
    if (outside) {
      out[0].v[e] = ext;
      continue;
    }
    double acc = 0;
    for (int64_t cmb = 0; cmb < combos; cmb++) {
      int64_t cr = cmb, off = 0;
      double w = 1;
      for (int i = r - 1; i >= 0; i--) {
        int64_t j = cr % t[i]->n;
        cr /= t[i]->n;
        off += t[i]->ix[j] * ist[i];
        w *= t[i]->w[j];
      }
      acc += w * in[0].v[off];
    }
    out[0].v[e] = acc;
  }
  for (int i = 0; i < r; i++) free(taps[i]);
  return rc;
}

static int claim_resize(const gopt_exec *x, int32_t n) {
  const char *ctm = gopt_node_get_string(x->g, n, "coordinate_transformation_mode", "half_pixel");
  return !strcmp(gopt_node_get_string(x->g, n, "mode", "nearest"), "cubic") ||
         !strcmp(ctm, "tf_crop_and_resize") || !strcmp(ctm, "align_corners") ||
         ex_dtype(x, gopt_node_input(x->g, n, 0)) != GOPT_DT_FLOAT;
}

/* ---- pooling with indices ---------------------------------------------------------------------- */

static int f_maxpool(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)err;
  const rt *X = &in[0];
  rt *Y = &out[0];
  int sp = X->rank - 2;
  int64_t ks[GOPT_MAX_RANK], s[GOPT_MAX_RANK], dl[GOPT_MAX_RANK], pb[GOPT_MAX_RANK];
  ints_or(x, NODE, "kernel_shape", ks, sp, 1);
  ints_or(x, NODE, "strides", s, sp, 1);
  ints_or(x, NODE, "dilations", dl, sp, 1);
  ints_or(x, NODE, "pads", pb, sp, 0);
  const char *ap = gopt_node_get_string(G, NODE, "auto_pad", "NOTSET");
  for (int i = 0; i < sp && (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")); i++) {
    int64_t total = (Y->d[2 + i] - 1) * s[i] + (ks[i] - 1) * dl[i] + 1 - X->d[2 + i];
    if (total < 0) total = 0;
    pb[i] = !strcmp(ap, "SAME_LOWER") ? total - total / 2 : total / 2;
  }
  int colmajor = (int)gopt_node_get_int(G, NODE, "storage_order", 0);
  int64_t NC = X->d[0] * X->d[1], isz = 1, osz = 1, ksz = 1;
  for (int i = 0; i < sp; i++) isz *= X->d[2 + i], osz *= Y->d[2 + i], ksz *= ks[i];
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t o = 0; o < osz; o++) {
      double best = -INFINITY;
      int64_t bi = -1;
      for (int64_t kf = 0; kf < ksz; kf++) {
        int64_t ip = 0, cm = 0, ro = o, rk = kf, mul = 1, ok = 1;
        int64_t cs[GOPT_MAX_RANK];
        for (int i = sp - 1; i >= 0; i--) {
          int64_t c = (ro % Y->d[2 + i]) * s[i] - pb[i] + (rk % ks[i]) * dl[i];
          ro /= Y->d[2 + i];
          rk /= ks[i];
          if (c < 0 || c >= X->d[2 + i]) ok = 0;
          cs[i] = c;
          ip += c * mul;
          mul *= X->d[2 + i];
        }
        if (!ok) continue;
        mul = 1;
        for (int i = 0; i < sp; i++) cm += cs[i] * mul, mul *= X->d[2 + i];
        double v = X->v[nc * isz + ip];
        if (bi < 0 || v > best) best = v, bi = nc * isz + (colmajor ? cm : ip);
      }
      Y->v[nc * osz + o] = best;
      if (nout > 1 && out[1].v) out[1].v[nc * osz + o] = (double)bi;
    }
  return GOPT_OK;
}

static int claim_maxpool(const gopt_exec *x, int32_t n) {
  return x->g->nodes.a[n].n_out > 1 || ex_dtype(x, gopt_node_input(x->g, n, 0)) != GOPT_DT_FLOAT;
}

static int f_maxunpool(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  /* indices address the default output shape ((in - 1) * stride - pads + kernel); with an
   * explicit output_shape they are re-addressed into it */
  int sp = in[0].rank - 2;
  int64_t ks[GOPT_MAX_RANK], s[GOPT_MAX_RANK], pd[2 * GOPT_MAX_RANK], def[GOPT_MAX_RANK];
  ints_or(x, NODE, "kernel_shape", ks, sp, 1);
  ints_or(x, NODE, "strides", s, sp, 1);
  ints_or(x, NODE, "pads", pd, 2 * sp, 0);
  def[0] = out[0].d[0], def[1] = out[0].d[1];
  for (int i = 0; i < sp; i++) def[2 + i] = (in[0].d[2 + i] - 1) * s[i] - pd[i] - pd[sp + i] + ks[i];
  for (int64_t e = 0; e < in[0].n; e++) {
    int64_t p = (int64_t)in[1].v[e], q = 0, mul = 1;
    for (int i = in[0].rank - 1; i >= 0; i--) {
      int64_t c = p % def[i];
      p /= def[i];
      if (c >= out[0].d[i]) q = -1;
      if (q >= 0) q += c * mul;
      mul *= out[0].d[i];
    }
    if (q < 0 || q >= out[0].n || p > 0)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "index %lld out of range", (long long)in[1].v[e]);
    out[0].v[q] = in[0].v[e];
  }
  return GOPT_OK;
}

/* ---- GridSample (opset 16: 4-D input, grid [N, Ho, Wo, 2] of (x, y) in [-1, 1]; opset 20: 5-D) ---- */

static double gs_reflect(double v, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (v < lo) {
    double dv = lo - v;
    int64_t n = (int64_t)(dv / rng);
    double r = dv - (double)n * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (v > hi) {
    double dv = v - hi;
    int64_t n = (int64_t)(dv / rng);
    double r = dv - (double)n * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return v;
}

typedef struct gs_img {
  const double *p;
  int64_t H, W;
  int pad;            /* 0 zeros, 1 border, 2 reflection */
  double bx[2], by[2]; /* reflection borders */
} gs_img;

static double gs_pixel(const gs_img *im, int64_t r, int64_t c) {
  if (im->pad == 0) return r < 0 || r >= im->H || c < 0 || c >= im->W ? 0 : im->p[r * im->W + c];
  if (im->pad == 2) {
    c = (int64_t)gs_reflect((double)c, im->bx[0], im->bx[1]);
    r = (int64_t)gs_reflect((double)r, im->by[0], im->by[1]);
  }
  c = c < 0 ? 0 : c >= im->W ? im->W - 1 : c;
  r = r < 0 ? 0 : r >= im->H ? im->H - 1 : r;
  return im->p[r * im->W + c];
}

/* Unnormalised coordinate of grid value g over a dim of n pixels, after the padding mode's
 * border clamp or reflection (pad 1 / 2). */
static double gs_coord(double g, int64_t n, int ac, int pad) {
  double v = ac ? (g + 1) / 2 * (double)(n - 1) : ((g + 1) * (double)n - 1) / 2;
  if (pad == 1) return fmin(fmax(v, 0), (double)n - 1);
  if (pad == 2) return gs_reflect(v, ac ? 0 : -0.5, ac ? (double)n - 1 : (double)n - 0.5);
  return v;
}

/* Voxel (d, r, c) of the D x H x W volume p: 0 outside with zeros padding, else clamped (reflection
 * coordinates are already inside). */
static double gs_voxel(const double *p, const int64_t *dim, int pad, int64_t d, int64_t r, int64_t c) {
  int64_t q[3] = {d, r, c};
  for (int i = 0; i < 3; i++) {
    if (q[i] < 0 || q[i] >= dim[i]) {
      if (pad == 0) return 0;
      q[i] = q[i] < 0 ? 0 : dim[i] - 1;
    }
  }
  return p[(q[0] * dim[1] + q[1]) * dim[2] + q[2]];
}

/* GridSample on 5-D input (opset 20): grid [N, Do, Ho, Wo, 3] of (x, y, z); nearest (half to
 * even, as numpy's rint) or trilinear. */
static int gridsample3d(gopt_exec *x, ex_kernel *k, rt *in, rt *out, const char *mode, int pad, int ac,
                        gopt_error *err) {
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear"))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "mode '%s' on 5-D input (nearest and linear are supported)", mode);
  int64_t N = in[0].d[0], C = in[0].d[1], dim[3] = {in[0].d[2], in[0].d[3], in[0].d[4]};
  int64_t no = out[0].d[2] * out[0].d[3] * out[0].d[4], vol = dim[0] * dim[1] * dim[2];
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      const double *p = in[0].v + (n * C + c) * vol;
      for (int64_t i = 0; i < no; i++) {
        const double *g = in[1].v + (n * no + i) * 3;
        double zs = gs_coord(g[2], dim[0], ac, pad), ys = gs_coord(g[1], dim[1], ac, pad), xs = gs_coord(g[0], dim[2], ac, pad);
        double v = 0;
        if (!strcmp(mode, "nearest")) {
          v = gs_voxel(p, dim, pad, (int64_t)nearbyint(zs), (int64_t)nearbyint(ys), (int64_t)nearbyint(xs));
        } else {
          int64_t z0 = (int64_t)floor(zs), y0 = (int64_t)floor(ys), x0 = (int64_t)floor(xs);
          double fz = zs - (double)z0, fy = ys - (double)y0, fx = xs - (double)x0;
          for (int a = 0; a < 8; a++)
            v += (a & 4 ? fz : 1 - fz) * (a & 2 ? fy : 1 - fy) * (a & 1 ? fx : 1 - fx) *
                 gs_voxel(p, dim, pad, z0 + (a >> 2 & 1), y0 + (a >> 1 & 1), x0 + (a & 1));
        }
        out[0].v[(n * C + c) * no + i] = v;
      }
    }
  return GOPT_OK;
}

static int f_gridsample(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  const char *mode = gopt_node_get_string(G, NODE, "mode", "bilinear");
  if (strcmp(mode, "bilinear") && strcmp(mode, "linear") && strcmp(mode, "nearest") && strcmp(mode, "bicubic") &&
      strcmp(mode, "cubic"))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "unknown mode '%s'", mode);
  if (in[0].rank == 5) {
    const char *pm5 = gopt_node_get_string(G, NODE, "padding_mode", "zeros");
    return gridsample3d(x, k, in, out, mode, !strcmp(pm5, "border") ? 1 : !strcmp(pm5, "reflection") ? 2 : 0,
                        (int)gopt_node_get_int(G, NODE, "align_corners", 0), err);
  }
  if (in[0].rank != 4) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "only 4-D and 5-D inputs are supported");
  const char *pm = gopt_node_get_string(G, NODE, "padding_mode", "zeros");
  int ac = (int)gopt_node_get_int(G, NODE, "align_corners", 0);
  int64_t N = in[0].d[0], C = in[0].d[1], H = in[0].d[2], W = in[0].d[3], Ho = out[0].d[2], Wo = out[0].d[3];
  gs_img im = {NULL, H, W, !strcmp(pm, "border") ? 1 : !strcmp(pm, "reflection") ? 2 : 0, {0, 0}, {0, 0}};
  im.bx[0] = ac ? 0 : -0.5, im.bx[1] = ac ? (double)W - 1 : (double)W - 0.5;
  im.by[0] = ac ? 0 : -0.5, im.by[1] = ac ? (double)H - 1 : (double)H - 0.5;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      im.p = in[0].v + (n * C + c) * H * W;
      for (int64_t i = 0; i < Ho * Wo; i++) {
        const double *gxy = in[1].v + (n * Ho * Wo + i) * 2;
        double xs = ac ? (gxy[0] + 1) / 2 * (double)(W - 1) : ((gxy[0] + 1) * (double)W - 1) / 2;
        double ys = ac ? (gxy[1] + 1) / 2 * (double)(H - 1) : ((gxy[1] + 1) * (double)H - 1) / 2;
        if (im.pad == 1) {
          xs = fmin(fmax(xs, 0), (double)W - 1);
          ys = fmin(fmax(ys, 0), (double)H - 1);
        } else if (im.pad == 2) {
          xs = gs_reflect(xs, im.bx[0], im.bx[1]);
          ys = gs_reflect(ys, im.by[0], im.by[1]);
        }
        double v;
        if (!strcmp(mode, "nearest")) {
          v = gs_pixel(&im, (int64_t)nearbyint(ys), (int64_t)nearbyint(xs));
        } else if (!strcmp(mode, "bicubic") || !strcmp(mode, "cubic")) { /* opset 20 names it cubic */
          int64_t x0 = (int64_t)floor(xs) - 1, y0 = (int64_t)floor(ys) - 1;
          double tx = xs - floor(xs), ty = ys - floor(ys), wx[4], wy[4];
          for (int j = 0; j < 4; j++) wx[j] = cubic_w(tx - (j - 1), -0.75), wy[j] = cubic_w(ty - (j - 1), -0.75);
          v = 0;
          for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) v += wy[a] * wx[b] * gs_pixel(&im, y0 + a, x0 + b);
        } else {
          int64_t x0 = (int64_t)floor(xs), y0 = (int64_t)floor(ys);
          double fx = xs - (double)x0, fy = ys - (double)y0;
          v = (1 - fy) * ((1 - fx) * gs_pixel(&im, y0, x0) + fx * gs_pixel(&im, y0, x0 + 1)) +
              fy * ((1 - fx) * gs_pixel(&im, y0 + 1, x0) + fx * gs_pixel(&im, y0 + 1, x0 + 1));
        }
        out[0].v[(n * C + c) * Ho * Wo + i] = v;
      }
    }
  return GOPT_OK;
}

static int claim_dropout(const gopt_exec *x, int32_t n) {
  return x->g->nodes.a[n].n_out > 1 && !ex_dropout_is_copy(x, n);
}

/* Conv and MatMul run here only on what the oneDNN kernels refuse: inputs other than FLOAT. */
static int claim_not_f32(const gopt_exec *x, int32_t n) {
  return ex_dtype(x, gopt_node_input(x->g, n, 0)) != GOPT_DT_FLOAT;
}

const ref_entry ex_ref_nn_table[] = {
    {"ConvTranspose", f_convtranspose, NULL}, {"ConvInteger", f_convq, NULL},
    {"Conv", f_conv, claim_not_f32}, {"MatMul", f_matmulq, claim_not_f32},
    {"QLinearConv", f_convq, NULL}, {"MatMulInteger", f_matmulq, NULL},
    {"QLinearMatMul", f_matmulq, NULL}, {"QuantizeLinear", f_quant, NULL},
    {"DequantizeLinear", f_quant, NULL}, {"DynamicQuantizeLinear", f_dynquant, NULL},
    {"RNN", f_rnn, NULL}, {"GRU", f_rnn, NULL}, {"LSTM", f_rnn, claim_lstm},
    {"Einsum", f_einsum, NULL}, {"LRN", f_lrn, NULL}, {"MeanVarianceNormalization", f_mvn, NULL},
    {"Det", f_det, NULL}, {"Dropout", f_dropout, claim_dropout}, {"Resize", f_resize, claim_resize},
    {"Upsample", f_resize, NULL}, {"MaxPool", f_maxpool, claim_maxpool}, {"MaxUnpool", f_maxunpool, NULL},
    {"GridSample", f_gridsample, NULL},
    {NULL, NULL, NULL},
};
