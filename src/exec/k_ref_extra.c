/* k_ref_extra.c: reference kernels (k_ref.h) for ops of opsets 18-24 and for the dtypes the
 * specialised kernels do not take: BitCast, CumProd, LpNormalization, LpPool, CenterCropPad,
 * AveragePool with ceil_mode and count_include_pad or dilations, DeformConv (2-D), Col2Im, AffineGrid, GroupNormalization (opset 21), TensorScatter, Gelu / Swish / Mish,
 * ai.onnx.ml's Binarizer and ArrayFeatureExtractor, Expand and Range of 16-bit and low-bit floats,
 * Bitwise{And,Or,Xor,Not}, and arithmetic, comparisons and unary functions on unsigned,
 * 16-bit float and double tensors. ONNX semantics as the operator specification states
 * them; double precision (integers exact up to 2^53). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

static const char *optype(const gopt_exec *x, int32_t n) { return gopt_graph_str(x->g, x->g->nodes.a[n].type); }

/* BitCast: the input's bytes reinterpreted as the output dtype (same element size): copied as
 * bytes, not through doubles. Sub-byte types are held one per byte (INT4/INT2 sign-extended):
 * each keeps its low `bits` bits, sign-extended when the output is signed. */
static int f_bitcast(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  size_t nb = (size_t)out[0].n * gopt_dtype_size(out[0].dt);
  uint8_t *dst = ex_data(x, k->out[0]);
  if (nb) memcpy(dst, ex_data(x, k->in[0]), nb);
  int bits = gopt_dtype_bits(out[0].dt);
  if (bits > 0 && bits < 8 && gopt_dtype_bits(in[0].dt) == bits) {
    uint8_t mask = (uint8_t)((1u << bits) - 1), sign = (uint8_t)(1u << (bits - 1));
    int sgn = out[0].dt == GOPT_DT_INT4 || out[0].dt == GOPT_DT_INT2;
    for (size_t i = 0; i < nb; i++) {
      uint8_t v = dst[i] & mask;
      dst[i] = sgn && (v & sign) ? (uint8_t)(v | ~mask) : v;
    }
  }
  out[0].written = 1;
  return GOPT_OK;
}

/* CumProd along axis (input 1), exclusive and reverse attributes as CumSum's. */
static int f_cumprod(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int r = in[0].rank;
  int64_t a = (int64_t)in[1].v[0];
  if (a < 0) a += r;
  if (a < 0 || a >= (r ? r : 1))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "axis %lld out of range for rank %d", (long long)in[1].v[0], r);
  int excl = (int)gopt_node_get_int(G, NODE, "exclusive", 0), rev = (int)gopt_node_get_int(G, NODE, "reverse", 0);
  int64_t outer, m, inner;
  ref_split3(&in[0], (int)a, &outer, &m, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double p = 1;
      for (int64_t s = 0; s < m; s++) {
        int64_t j = rev ? m - 1 - s : s, idx = (o * m + j) * inner + i;
        if (excl) {
          out[0].v[idx] = p;
          p *= in[0].v[idx];
        } else {
          p *= in[0].v[idx];
          out[0].v[idx] = p;
        }
      }
    }
  return GOPT_OK;
}

/* LpNormalization: x / ||x||_p along axis (p 1 or 2; a zero norm gives 0). */
static int f_lpnorm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, in[0].rank, &axis, err))) return rc;
  int64_t p = gopt_node_get_int(G, NODE, "p", 2), outer, m, inner;
  if (p != 1 && p != 2) return ex_node_error(x, NODE, err, GOPT_EINVAL, "p must be 1 or 2, not %lld", (long long)p);
  ref_split3(&in[0], axis, &outer, &m, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0;
      for (int64_t j = 0; j < m; j++) {
        double v = in[0].v[(o * m + j) * inner + i];
        s += p == 1 ? fabs(v) : v * v;
      }
      double nrm = p == 1 ? s : sqrt(s);
      for (int64_t j = 0; j < m; j++) {
        int64_t idx = (o * m + j) * inner + i;
        out[0].v[idx] = nrm == 0 ? 0 : in[0].v[idx] / nrm;
      }
    }
  return GOPT_OK;
}

/* LpPool ((sum over the window of |x|^p)^(1/p)) and AveragePool in the cases the oneDNN kernel
 * does not take (ceil_mode with count_include_pad or dilations): kernel_shape, strides,
 * dilations, pads or auto_pad, the output shape from shape inference. An average divides by the
 * window's positions inside the input, or with count_include_pad inside input and pads (not the
 * part of a ceil_mode window beyond the end pad). */
static int f_pool(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int sp = in[0].rank - 2, lp = !strcmp(optype(x, NODE), "LpPool");
  size_t nk = 0, ns = 0, nd = 0, np = 0;
  const int64_t *ks = gopt_node_get_ints(G, NODE, "kernel_shape", &nk);
  const int64_t *st = gopt_node_get_ints(G, NODE, "strides", &ns);
  const int64_t *dl = gopt_node_get_ints(G, NODE, "dilations", &nd);
  const int64_t *pd = gopt_node_get_ints(G, NODE, "pads", &np);
  if (sp < 1 || sp > 3 || !ks || (int)nk != sp)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs a 3- to 5-D input and kernel_shape of its spatial rank");
  double p = (double)gopt_node_get_int(G, NODE, "p", 2);
  int cip = (int)gopt_node_get_int(G, NODE, "count_include_pad", 0);
  const char *ap = gopt_node_get_string(G, NODE, "auto_pad", "NOTSET");
  int64_t oi[3] = {1, 1, 1}, ii[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, ss[3] = {1, 1, 1}, dd[3] = {1, 1, 1};
  int64_t pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  for (int i = 0; i < sp; i++) {
    oi[i] = out[0].d[2 + i], ii[i] = in[0].d[2 + i], kk[i] = ks[i];
    ss[i] = st && (int)ns == sp ? st[i] : 1, dd[i] = dl && (int)nd == sp ? dl[i] : 1;
    if (pd && (int)np == 2 * sp) pb[i] = pd[i], pe[i] = pd[sp + i];
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      int64_t total = (oi[i] - 1) * ss[i] + (kk[i] - 1) * dd[i] + 1 - ii[i];
      if (total < 0) total = 0;
      pb[i] = !strcmp(ap, "SAME_LOWER") ? (total + 1) / 2 : total / 2, pe[i] = total - pb[i];
    }
  }
  int64_t NC = in[0].d[0] * in[0].d[1], on = oi[0] * oi[1] * oi[2], inn = ii[0] * ii[1] * ii[2];
  for (int64_t c = 0; c < NC; c++)
    for (int64_t o = 0; o < on; o++) {
      int64_t oc[3] = {o / (oi[1] * oi[2]), o / oi[2] % oi[1], o % oi[2]}, w[3];
      double s = 0, cnt = 0;
      for (w[0] = 0; w[0] < kk[0]; w[0]++)
        for (w[1] = 0; w[1] < kk[1]; w[1]++)
          for (w[2] = 0; w[2] < kk[2]; w[2]++) {
            int inside = 1, padded = 1;
            int64_t idx = 0;
            for (int a = 0; a < 3; a++) {
              int64_t q = oc[a] * ss[a] - pb[a] + w[a] * dd[a];
              if (q < 0 || q >= ii[a]) inside = 0;
              if (q < -pb[a] || q >= ii[a] + pe[a]) padded = 0;
              idx = idx * ii[a] + q;
            }
            cnt += cip ? padded : inside;
            if (inside) s += lp ? pow(fabs(in[0].v[c * inn + idx]), p) : in[0].v[c * inn + idx];
          }
      out[0].v[c * on + o] = lp ? pow(s, 1.0 / p) : cnt > 0 ? s / cnt : 0;
    }
  return GOPT_OK;
}

/* CenterCropPad: each axis (the axes attribute, default all) is cropped or zero-padded around
 * its centre to the target length (input 1); as onnx's reference, a crop starts at (d - t) / 2
 * and a pad puts (t - d) / 2 zeros before. */
static int f_centercroppad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  int r = in[0].rank;
  int64_t off[GOPT_MAX_RANK] = {0}, ist[GOPT_MAX_RANK], ost[GOPT_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int64_t d = in[0].d[i], t = out[0].d[i];
    off[i] = t <= d ? (d - t) / 2 : -((t - d) / 2); /* input index of output index 0 */
  }
  ref_strides(&in[0], ist);
  ref_strides(&out[0], ost);
  for (int64_t o = 0; o < out[0].n; o++) {
    int64_t idx = 0, inside = 1;
    for (int i = 0; i < r; i++) {
      int64_t c = o / ost[i] % out[0].d[i] + off[i];
      if (c < 0 || c >= in[0].d[i]) inside = 0;
      idx += c * ist[i];
    }
    out[0].v[o] = inside ? in[0].v[idx] : 0;
  }
  return GOPT_OK;
}

/* Unary functions the vector kernels run in float only (here any float dtype) and the opset 20-22
 * activations Gelu (approximate none / tanh), Swish (alpha) and Mish. */
static int f_unary_x(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  const char *op = optype(x, NODE);
  int tanh_gelu = !strcmp(gopt_node_get_string(G, NODE, "approximate", "none"), "tanh");
  double alpha = gopt_node_get_float(G, NODE, "alpha", 1.0);
  for (int64_t i = 0; i < out[0].n; i++) {
    double v = in[0].v[i], r;
    if (!strcmp(op, "Exp")) r = exp(v);
    else if (!strcmp(op, "Identity")) r = v;
    else if (!strcmp(op, "IsNaN")) r = isnan(v);
    else if (!strcmp(op, "Log")) r = log(v);
    else if (!strcmp(op, "Sqrt")) r = sqrt(v);
    else if (!strcmp(op, "Tanh")) r = tanh(v);
    else if (!strcmp(op, "Sigmoid")) r = 1 / (1 + exp(-v));
    else if (!strcmp(op, "Mish")) r = v * tanh(log1p(exp(v)));
    else if (!strcmp(op, "Swish")) r = v / (1 + exp(-alpha * v));
    else if (tanh_gelu) r = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    else r = 0.5 * v * (1 + erf(v / sqrt(2)));
    out[0].v[i] = r;
  }
  return GOPT_OK;
}

/* A bit pattern as the value of an integer of dtype dt (signed types: two's complement). */
static double bits_val(uint64_t u, int dt) {
  switch (dt) {
    case GOPT_DT_UINT8: return (double)(uint8_t)u;
    case GOPT_DT_UINT16: return (double)(uint16_t)u;
    case GOPT_DT_UINT32: return (double)(uint32_t)u;
    case GOPT_DT_UINT64: return (double)u;
    case GOPT_DT_INT8: return (double)(int8_t)u;
    case GOPT_DT_INT16: return (double)(int16_t)u;
    case GOPT_DT_INT32: return (double)(int32_t)u;
    default: return (double)(int64_t)u;
  }
}

/* Binary arithmetic, comparisons and bitwise ops with numpy broadcasting; integers divide
 * truncating toward zero (store truncates), unsigned results wrap when stored. */
static int f_binary_x(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  const char *op = optype(x, NODE);
  for (int64_t o = 0; o < out[0].n; o++) {
    double a = in[0].v[ref_bcast_index(&in[0], &out[0], o)], r = 0;
    double b = nin > 1 ? in[1].v[ref_bcast_index(&in[1], &out[0], o)] : 0;
    uint64_t ua = (uint64_t)(int64_t)a, ub = (uint64_t)(int64_t)b;
    if (a >= 9.2e18) ua = (uint64_t)a;
    if (b >= 9.2e18) ub = (uint64_t)b;
    if (!strcmp(op, "Add")) r = a + b;
    else if (!strcmp(op, "Sub")) r = a - b;
    else if (!strcmp(op, "Mul")) r = a * b;
    else if (!strcmp(op, "Div")) r = b == 0 ? 0 : a / b;
    else if (!strcmp(op, "Equal")) r = a == b;
    else if (!strcmp(op, "Less")) r = a < b;
    else if (!strcmp(op, "LessOrEqual")) r = a <= b;
    else if (!strcmp(op, "Greater")) r = a > b;
    else if (!strcmp(op, "GreaterOrEqual")) r = a >= b;
    else if (!strcmp(op, "BitwiseAnd")) r = bits_val(ua & ub, in[0].dt);
    else if (!strcmp(op, "BitwiseOr")) r = bits_val(ua | ub, in[0].dt);
    else if (!strcmp(op, "BitwiseXor")) r = bits_val(ua ^ ub, in[0].dt);
    else if (!strcmp(op, "BitwiseNot")) r = bits_val(~ua, in[0].dt);
    out[0].v[o] = r;
  }
  return GOPT_OK;
}

/* Col2Im: input [N, C * prod(block), L] -> [N, C, image...]: block column l (of the sliding
 * positions, row-major) and kernel offset k add into image position l * stride - pad_begin +
 * k * dilation. */
static int f_col2im(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int sp = out[0].rank - 2;
  if (sp < 1 || sp > 8 || in[2].n != sp) return ex_node_error(x, NODE, err, GOPT_EINVAL, "block_shape must have the image's rank");
  size_t ns = 0, nd = 0, np = 0;
  const int64_t *st = gopt_node_get_ints(G, NODE, "strides", &ns), *dl = gopt_node_get_ints(G, NODE, "dilations", &nd);
  const int64_t *pd = gopt_node_get_ints(G, NODE, "pads", &np);
  int64_t ks[8], nb[8], S[8], D[8], P[8], img[8], kprod = 1, L = 1;
  for (int i = 0; i < sp; i++) {
    ks[i] = (int64_t)in[2].v[i], img[i] = out[0].d[2 + i];
    S[i] = st && (int)ns == sp ? st[i] : 1, D[i] = dl && (int)nd == sp ? dl[i] : 1;
    P[i] = pd && (int)np == 2 * sp ? pd[i] : 0;
    int64_t pe = pd && (int)np == 2 * sp ? pd[sp + i] : 0;
    nb[i] = (img[i] + P[i] + pe - D[i] * (ks[i] - 1) - 1) / S[i] + 1;
    kprod *= ks[i], L *= nb[i];
  }
  int64_t N = out[0].d[0], C = out[0].d[1], isz = N * C > 0 ? out[0].n / (N * C) : 1;
  if (in[0].rank != 3 || in[0].d[1] != C * kprod || in[0].d[2] != L)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "input must be [N, C * prod(block_shape), blocks]");
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t kk = 0; kk < kprod; kk++)
        for (int64_t l = 0; l < L; l++) {
          int64_t pos = 0, ok = 1, kr = kk, lr = l, kc[8], lc[8];
          for (int i = sp - 1; i >= 0; i--) {
            kc[i] = kr % ks[i], kr /= ks[i], lc[i] = lr % nb[i], lr /= nb[i];
          }
          for (int i = 0; i < sp; i++) {
            int64_t p = lc[i] * S[i] - P[i] + kc[i] * D[i];
            if (p < 0 || p >= img[i]) ok = 0;
            pos = pos * img[i] + p;
          }
          if (ok) out[0].v[(n * C + c) * isz + pos] += in[0].v[((n * C + c) * kprod + kk) * L + l];
        }
  return GOPT_OK;
}

/* AffineGrid: theta [N, 2, 3] (or [N, 3, 4]) and size [N, C, H, W] (or [N, C, D, H, W]) ->
 * grid [N, H, W, 2] (or [N, D, H, W, 3]) = theta @ (x, y(, z), 1) over the normalised base grid
 * (align_corners: -1 .. 1 through the end points, else through the pixel centres). */
static int f_affinegrid(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int sp = out[0].rank - 2, ac = (int)gopt_node_get_int(G, NODE, "align_corners", 0);
  if ((sp != 2 && sp != 3) || out[0].d[out[0].rank - 1] != sp)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "only 2-D and 3-D grids are supported");
  int64_t N = out[0].d[0], dims[3] = {1, 1, 1}, cnt = 1; /* (D,) H, W */
  for (int i = 0; i < sp; i++) dims[3 - sp + i] = out[0].d[1 + i], cnt *= out[0].d[1 + i];
  for (int64_t n = 0; n < N; n++)
    for (int64_t p = 0; p < cnt; p++) {
      int64_t c[3] = {p / (dims[1] * dims[2]), p / dims[2] % dims[1], p % dims[2]};
      double base[4]; /* x, y, (z,) 1: x from W (c[2]), y from H (c[1]), z from D (c[0]) */
      for (int a = 0; a < sp; a++) {
        int64_t len = dims[2 - a], i = c[2 - a];
        base[a] = ac ? (len > 1 ? -1 + 2.0 * (double)i / (double)(len - 1) : 0) : (2.0 * (double)i + 1) / (double)len - 1;
      }
      base[sp] = 1;
      for (int r = 0; r < sp; r++) {
        double s = 0;
        for (int q = 0; q <= sp; q++) s += in[0].v[(n * sp + r) * (sp + 1) + q] * base[q];
        out[0].v[(n * cnt + p) * sp + r] = s;
      }
    }
  return GOPT_OK;
}

/* GroupNormalization (opset 21): mean and variance over each group of C / num_groups channels and
 * the spatial dims, then per-channel scale and bias. */
static int f_groupnorm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t G_ = gopt_node_get_int(G, NODE, "num_groups", 1), N = in[0].d[0], C = in[0].rank > 1 ? in[0].d[1] : 1;
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5);
  if (G_ <= 0 || C % G_ || in[1].n != C)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "num_groups must divide the channels and scale be [C]");
  int64_t sz = N * C > 0 ? in[0].n / (N * C) : 1, gs = C / G_ * sz;
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < G_; g++) {
      const double *xv = in[0].v + (n * C + g * (C / G_)) * sz;
      double m = 0, v = 0;
      for (int64_t i = 0; i < gs; i++) m += xv[i];
      m /= (double)gs;
      for (int64_t i = 0; i < gs; i++) v += (xv[i] - m) * (xv[i] - m);
      double r = 1 / sqrt(v / (double)gs + eps);
      for (int64_t i = 0; i < gs; i++) {
        int64_t c = g * (C / G_) + i / sz;
        out[0].v[(n * C + g * (C / G_)) * sz + i] = (xv[i] - m) * r * in[1].v[c] + in[2].v[c];
      }
    }
  return GOPT_OK;
}

/* TensorScatter (opset 24): the cache with update written along axis (default -2) from
 * write_indices[b] (default 0) on, per batch entry b; mode circular wraps the index. */
static int f_tensorscatter(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -2, in[0].rank, &axis, err))) return rc;
  int circ = !strcmp(gopt_node_get_string(G, NODE, "mode", "linear"), "circular");
  memcpy(out[0].v, in[0].v, (size_t)in[0].n * sizeof *in[0].v);
  int64_t outer, m, inner, uo, um, ui;
  ref_split3(&in[0], axis, &outer, &m, &inner);
  ref_split3(&in[1], axis, &uo, &um, &ui);
  int64_t per_b = in[0].d[0] ? outer / in[0].d[0] : 1;
  for (int64_t o = 0; o < outer; o++) {
    int64_t b = axis == 0 ? 0 : o / (per_b ? per_b : 1);
    int64_t w = nin > 2 && in[2].v ? (int64_t)in[2].v[b] : 0;
    for (int64_t j = 0; j < um; j++) {
      int64_t t = w + j;
      if (circ) t %= m;
      if (t < 0 || t >= m) return ex_node_error(x, NODE, err, GOPT_EINVAL, "write index %lld is beyond the cache", (long long)t);
      memcpy(out[0].v + (o * m + t) * inner, in[1].v + (o * um + j) * ui, (size_t)ui * sizeof *out[0].v);
    }
  }
  return GOPT_OK;
}

/* Expand (of the dtypes the data kernels do not copy): numpy broadcasting to the output shape. */
static int f_expand(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)x, (void)k, (void)nin, (void)nout, (void)err;
  for (int64_t o = 0; o < out[0].n; o++) out[0].v[o] = in[0].v[ref_bcast_index(&in[0], &out[0], o)];
  return GOPT_OK;
}

/* ai.onnx.ml Binarizer: 1 where x > threshold (default 0), else 0. */
static int f_binarizer(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  double th = gopt_node_get_float(G, NODE, "threshold", 0);
  for (int64_t i = 0; i < out[0].n; i++) out[0].v[i] = in[0].v[i] > th;
  return GOPT_OK;
}

/* ai.onnx.ml ArrayFeatureExtractor: X's last axis gathered at the indices Y ([..., |Y|]). */
static int f_feature_extract(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t last = in[0].rank ? in[0].d[in[0].rank - 1] : 1, m = in[1].n, rows = last ? in[0].n / last : 0;
  for (int64_t j = 0; j < m; j++)
    if (in[1].v[j] < 0 || in[1].v[j] >= (double)last)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "index %lld is out of range [0, %lld)", (long long)in[1].v[j], (long long)last);
  if (rows * m != out[0].n) return ex_node_error(x, NODE, err, GOPT_ESHAPE, "the output holds %lld values, not %lld", (long long)out[0].n, (long long)(rows * m));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < m; j++) out[0].v[r * m + j] = in[0].v[r * last + (int64_t)in[1].v[j]];
  return GOPT_OK;
}

/* Softmax of the dtypes the oneDNN kernel refuses (16-bit floats, double): along axis (opset >=
 * 13, default -1), or over the dims from axis on (older opsets, default 1). */
static int f_softmax(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int old = x->opset < 13, axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", old ? 1 : -1, in[0].rank, &axis, err))) return rc;
  int64_t outer, m, inner;
  ref_split3(&in[0], axis, &outer, &m, &inner);
  if (old) m *= inner, inner = 1;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const double *v = in[0].v + o * m * inner + i;
      double *y = out[0].v + o * m * inner + i, mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < m; j++) mx = fmax(mx, v[j * inner]);
      for (int64_t j = 0; j < m; j++) sum += (y[j * inner] = exp(v[j * inner] - mx));
      for (int64_t j = 0; j < m; j++) y[j * inner] /= sum;
    }
  return GOPT_OK;
}

/* Bilinear sample of the H x W plane p at (y, x); corners outside the plane count as 0, and a
 * point a full pixel or more outside gives 0 (torchvision's deform_conv2d, as onnx's reference). */
static double bilinear0(const double *p, int64_t H, int64_t W, double y, double x) {
  if (y <= -1 || y >= (double)H || x <= -1 || x >= (double)W) return 0;
  int64_t y0 = (int64_t)floor(y), x0 = (int64_t)floor(x);
  double fy = y - (double)y0, fx = x - (double)x0, v = 0;
  for (int dy = 0; dy < 2; dy++)
    for (int dx = 0; dx < 2; dx++) {
      int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
      v += (dy ? fy : 1 - fy) * (dx ? fx : 1 - fx) * p[yy * W + xx];
    }
  return v;
}

/* DeformConv (2-D): X [N, C, H, W], W [M, C/group, kH, kW], offset [N, G*2*kH*kW, oH, oW] ((dy, dx)
 * per kernel position and offset group G), B [M], mask [N, G*kH*kW, oH, oW]: each tap samples X
 * bilinearly at its offset position, times the mask, into a grouped convolution. */
static int f_deformconv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  if (in[0].rank != 4 || in[1].rank != 4 || out[0].rank != 4)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "only 2-D deformable convolution is supported");
  int64_t N = in[0].d[0], C = in[0].d[1], H = in[0].d[2], Wd = in[0].d[3], M = in[1].d[0], kH = in[1].d[2], kW = in[1].d[3];
  int64_t oH = out[0].d[2], oW = out[0].d[3], grp = gopt_node_get_int(G, NODE, "group", 1);
  int64_t og = gopt_node_get_int(G, NODE, "offset_group", 1), K = kH * kW;
  int64_t st[2] = {1, 1}, dl[2] = {1, 1}, pd[4] = {0, 0, 0, 0};
  size_t n1 = 0, n2 = 0, n3 = 0;
  const int64_t *a1 = gopt_node_get_ints(G, NODE, "strides", &n1), *a2 = gopt_node_get_ints(G, NODE, "dilations", &n2);
  const int64_t *a3 = gopt_node_get_ints(G, NODE, "pads", &n3);
  for (int i = 0; i < 2; i++) {
    if (a1 && n1 == 2) st[i] = a1[i];
    if (a2 && n2 == 2) dl[i] = a2[i];
  }
  for (int i = 0; a3 && n3 == 4 && i < 4; i++) pd[i] = a3[i];
  if (grp <= 0 || og <= 0 || C % grp || M % grp || C % og || in[1].d[1] != C / grp || in[2].d[1] != og * 2 * K)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "group, offset_group and the offset's channels do not fit the input");
  const rt *bias = nin > 3 && in[3].v ? &in[3] : NULL, *mask = nin > 4 && in[4].v ? &in[4] : NULL;
  int64_t Cg = C / grp, Mg = M / grp, Co = C / og;
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t oh = 0; oh < oH; oh++)
        for (int64_t ow = 0; ow < oW; ow++) {
          double acc = bias ? bias->v[m] : 0;
          int64_t g = m / Mg;
          for (int64_t cc = 0; cc < Cg; cc++) {
            int64_t c = g * Cg + cc, o = c / Co;
            const double *plane = in[0].v + (n * C + c) * H * Wd;
            for (int64_t kk = 0; kk < K; kk++) {
              int64_t kh = kk / kW, kw = kk % kW;
              const double *off = in[2].v + ((n * og + o) * 2 * K + 2 * kk) * oH * oW + oh * oW + ow;
              double y = (double)(oh * st[0] - pd[0] + kh * dl[0]) + off[0];
              double xx = (double)(ow * st[1] - pd[1] + kw * dl[1]) + off[oH * oW];
              double mv = mask ? mask->v[((n * og + o) * K + kk) * oH * oW + oh * oW + ow] : 1;
              acc += in[1].v[((m * Cg + cc) * kH + kh) * kW + kw] * mv * bilinear0(plane, H, Wd, y, xx);
            }
          }
          out[0].v[((n * M + m) * oH + oh) * oW + ow] = acc;
        }
  return GOPT_OK;
}

/* Range of 16-bit floats (the data kernel reads float, double and integer scalars): start + i *
 * delta for the output's length (shape inference computed it). */
static int f_range(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)x, (void)k, (void)nin, (void)nout, (void)err;
  for (int64_t i = 0; i < out[0].n; i++) out[0].v[i] = in[0].v[0] + (double)i * in[2].v[0];
  return GOPT_OK;
}

/* The specialised kernels take float (unary) and signed / 8-bit (binary) inputs; these the rest. */
static int claim_not_float(const gopt_exec *x, int32_t n) {
  int dt = ex_dtype(x, gopt_node_input(x->g, n, 0));
  return dt != GOPT_DT_FLOAT;
}
static int claim_avgpool(const gopt_exec *x, int32_t n) {
  size_t nd = 0;
  const int64_t *dl = gopt_node_get_ints(x->g, n, "dilations", &nd);
  int dil = 0;
  for (size_t i = 0; dl && i < nd; i++) dil |= dl[i] != 1;
  return gopt_node_get_int(x->g, n, "ceil_mode", 0) && (dil || gopt_node_get_int(x->g, n, "count_include_pad", 0));
}
static int claim_half(const gopt_exec *x, int32_t n) {
  int dt = ex_dtype(x, gopt_node_input(x->g, n, 0));
  return dt == GOPT_DT_FLOAT16 || dt == GOPT_DT_BFLOAT16 || gopt_dtype_is_lowbit(dt);
}
static int claim_unsigned(const gopt_exec *x, int32_t n) {
  int dt = ex_dtype(x, gopt_node_input(x->g, n, 0));
  return dt == GOPT_DT_UINT16 || dt == GOPT_DT_UINT32 || dt == GOPT_DT_UINT64;
}

const ref_entry ex_ref_extra_table[] = {
    {"BitCast", f_bitcast, NULL}, {"CumProd", f_cumprod, NULL}, {"LpNormalization", f_lpnorm, NULL},
    {"LpPool", f_pool, NULL}, {"AveragePool", f_pool, claim_avgpool},
    {"DeformConv", f_deformconv, NULL}, {"CenterCropPad", f_centercroppad, NULL}, {"Col2Im", f_col2im, NULL},
    {"AffineGrid", f_affinegrid, NULL}, {"GroupNormalization", f_groupnorm, NULL},
    {"TensorScatter", f_tensorscatter, NULL}, {"Identity", f_unary_x, claim_half},
    {"IsNaN", f_unary_x, claim_half}, {"Expand", f_expand, claim_half}, {"Softmax", f_softmax, claim_not_float},
    {"Range", f_range, claim_half},
    {"ai.onnx.ml::Binarizer", f_binarizer, NULL}, {"ai.onnx.ml::ArrayFeatureExtractor", f_feature_extract, NULL},
    {"Gelu", f_unary_x, NULL}, {"Swish", f_unary_x, NULL}, {"Mish", f_unary_x, NULL},
    {"Exp", f_unary_x, claim_not_float}, {"Log", f_unary_x, claim_not_float},
    {"Sqrt", f_unary_x, claim_not_float}, {"Tanh", f_unary_x, claim_not_float},
    {"Sigmoid", f_unary_x, claim_not_float},
    {"BitwiseAnd", f_binary_x, NULL}, {"BitwiseOr", f_binary_x, NULL}, {"BitwiseXor", f_binary_x, NULL},
    {"BitwiseNot", f_binary_x, NULL},
    {"Add", f_binary_x, claim_unsigned}, {"Sub", f_binary_x, claim_unsigned}, {"Mul", f_binary_x, claim_unsigned},
    {"Div", f_binary_x, claim_unsigned}, {"Equal", f_binary_x, claim_unsigned}, {"Less", f_binary_x, claim_unsigned},
    {"LessOrEqual", f_binary_x, claim_unsigned}, {"Greater", f_binary_x, claim_unsigned},
    {"GreaterOrEqual", f_binary_x, claim_unsigned},
    {NULL, NULL, NULL},
};
