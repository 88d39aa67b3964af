/* k_ref_train.c: reference kernels (k_ref.h) of the gradient ops gopt's training-graph builder emits
 * (docs/TRAINING.md "Training ops"): ReduceSumGrad, ReduceMeanGrad, ReluGrad, SigmoidGrad, TanhGrad,
 * SoftmaxGrad, LogSoftmaxGrad, LayerNormGrad, and ConvGradInput/ConvGradWeight for 2-d convolutions,
 * so that a training step's gradients can be run and checked against finite differences
 * (tests/train/test_train_numeric.c). Plain loops in double precision: correctness, not speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

/* ReduceSumGrad / ReduceMeanGrad (dY, x_shape) -> dX: dY, unsqueezed at `axes` when keepdims=0,
 * broadcast to dX's shape; Mean also divided by the reduced count. */
static int f_reduce_grad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  rt dy = in[0];
  int64_t cnt = 0;
  double *axes = ref_attr_values(x, NODE, "axes", &cnt);
  if (cnt < 0) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (dy.rank != out[0].rank && axes) { /* keepdims=0: put the reduced axes back as 1s */
    int j = 0;
    dy.rank = out[0].rank;
    for (int i = 0; i < out[0].rank; i++) {
      int red = 0;
      for (int64_t a = 0; a < cnt; a++)
        if ((int64_t)axes[a] == i || (int64_t)axes[a] + out[0].rank == i) red = 1;
      dy.d[i] = red ? 1 : in[0].d[j++];
    }
  }
  free(axes);
  int mean = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "ReduceMeanGrad");
  double scale = mean && dy.n ? (double)dy.n / (double)(out[0].n ? out[0].n : 1) : 1.0;
  for (int64_t o = 0; o < out[0].n; o++) out[0].v[o] = dy.v[ref_bcast_index(&dy, &out[0], o)] * scale;
  return GOPT_OK;
}

/* ReluGrad / SigmoidGrad / TanhGrad (dY, Y) -> dX. */
static int f_act_grad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout, (void)err;
  const char *op = gopt_graph_str(G, G->nodes.a[NODE].type);
  int kind = !strcmp(op, "ReluGrad") ? 0 : !strcmp(op, "SigmoidGrad") ? 1 : 2;
  for (int64_t o = 0; o < out[0].n; o++) {
    double d = in[0].v[ref_bcast_index(&in[0], &out[0], o)], y = in[1].v[ref_bcast_index(&in[1], &out[0], o)];
    out[0].v[o] = kind == 0 ? (y > 0 ? d : 0) : kind == 1 ? d * y * (1 - y) : d * (1 - y * y);
  }
  return GOPT_OK;
}

/* SoftmaxGrad: Y (dY - sum dY Y); LogSoftmaxGrad: dY - exp(Y) sum dY; sums over `axis` (over all
 * axes >= axis with coerce_2d=1). */
static int f_softmax_grad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int axis, rc, log = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "LogSoftmaxGrad");
  if ((rc = ref_axis(x, NODE, "axis", -1, in[0].rank, &axis, err))) return rc;
  int64_t outer, mid, inner;
  ref_split3(&in[0], axis, &outer, &mid, &inner);
  if (gopt_node_get_int(G, NODE, "coerce_2d", 0)) mid *= inner, inner = 1;
  const double *dy = in[0].v, *y = in[1].v;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      int64_t base = a * mid * inner + c;
      double s = 0;
      for (int64_t j = 0; j < mid; j++) s += dy[base + j * inner] * (log ? 1 : y[base + j * inner]);
      for (int64_t j = 0; j < mid; j++) {
        int64_t i = base + j * inner;
        out[0].v[i] = log ? dy[i] - exp(y[i]) * s : y[i] * (dy[i] - s);
      }
    }
  return GOPT_OK;
}

/* LayerNormGrad (dY, X, scale, [mean, inv_std_dev]) -> dX, dScale, dBias; statistics recomputed
 * from X over the axes >= `axis`. */
static int f_layernorm_grad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin;
  int axis, rc;
  if ((rc = ref_axis(x, NODE, "axis", -1, in[1].rank, &axis, err))) return rc;
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5);
  int64_t outer = 1;
  for (int i = 0; i < axis; i++) outer *= in[1].d[i];
  int64_t m = outer ? in[1].n / outer : 0;
  for (int64_t o = 0; o < outer && m; o++) {
    const double *p = in[1].v + o * m, *dy = in[0].v + o * m;
    double mu = 0, var = 0, sg = 0, sgx = 0;
    for (int64_t j = 0; j < m; j++) mu += p[j];
    mu /= (double)m;
    for (int64_t j = 0; j < m; j++) var += (p[j] - mu) * (p[j] - mu);
    double inv = 1.0 / sqrt(var / (double)m + eps);
    for (int64_t j = 0; j < m; j++) {
      double xh = (p[j] - mu) * inv, gj = dy[j] * in[2].v[j % in[2].n];
      sg += gj, sgx += gj * xh;
      if (nout > 1 && out[1].v) out[1].v[j % out[1].n] += dy[j] * xh;
      if (nout > 2 && out[2].v) out[2].v[j % out[2].n] += dy[j];
    }
    for (int64_t j = 0; j < m && out[0].v; j++) {
      double xh = (p[j] - mu) * inv, gj = dy[j] * in[2].v[j % in[2].n];
      out[0].v[o * m + j] = inv / (double)m * ((double)m * gj - sg - xh * sgx);
    }
  }
  return GOPT_OK;
}

/* ConvGradInput (dY, W, x_shape) -> dX and ConvGradWeight (dY, X, w_shape) -> dW of a 2-d
 * convolution with the forward node's strides, pads, dilations and group (auto_pad NOTSET): one
 * walk over every (n, output channel, output pixel, input channel of the group, kernel tap). */
static int f_conv_grad(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int wgrad = !strcmp(gopt_graph_str(G, G->nodes.a[NODE].type), "ConvGradWeight");
  const rt *dy = &in[0], *xs = wgrad ? &in[1] : &out[0], *ws = wgrad ? &out[0] : &in[1];
  const char *ap = gopt_node_get_string(G, NODE, "auto_pad", "NOTSET");
  if (dy->rank != 4 || xs->rank != 4 || ws->rank != 4 || (strcmp(ap, "NOTSET") && strcmp(ap, "")))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "only 2-d convolutions with explicit pads");
  conv_p cp;
  ref_conv_params(x, NODE, xs, ws, dy, 0, &cp);
  const int64_t *s = cp.s, *p = cp.pb, *dl = cp.dl;
  int64_t grp = cp.group, N = xs->d[0], C = xs->d[1], H = xs->d[2], W = xs->d[3];
  int64_t M = ws->d[0], Cg = ws->d[1], KH = ws->d[2], KW = ws->d[3], OH = dy->d[2], OW = dy->d[3];
  if (grp < 1 || C != Cg * grp || M % grp)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "channels do not match group");
  const double *other = in[1].v; /* W for the input gradient, X for the weight gradient */
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double d = dy->v[((n * M + m) * OH + oh) * OW + ow];
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = oh * s[0] - p[0] + kh * dl[0], iw = ow * s[1] - p[1] + kw * dl[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t xi = ((n * C + (m / (M / grp)) * Cg + ci) * H + ih) * W + iw;
                int64_t wi = ((m * Cg + ci) * KH + kh) * KW + kw;
                if (wgrad) out[0].v[wi] += d * other[xi];
                else out[0].v[xi] += d * other[wi];
              }
        }
  return GOPT_OK;
}

const ref_entry ex_ref_train_table[] = {
    {"ReduceSumGrad", f_reduce_grad, NULL}, {"ReduceMeanGrad", f_reduce_grad, NULL},
    {"ReluGrad", f_act_grad, NULL}, {"SigmoidGrad", f_act_grad, NULL}, {"TanhGrad", f_act_grad, NULL},
    {"SoftmaxGrad", f_softmax_grad, NULL}, {"LogSoftmaxGrad", f_softmax_grad, NULL},
    {"LayerNormGrad", f_layernorm_grad, NULL},
    {"ConvGradInput", f_conv_grad, NULL}, {"ConvGradWeight", f_conv_grad, NULL},
    {NULL, NULL, NULL},
};
