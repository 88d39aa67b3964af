/* nn_ops.c: forward op constructors. Each checks shapes, allocates its output in the ctx arena,
 * computes it immediately (eager, llm.c style) and records itself on the tape for
 * gopt_nn_backward (nn_backward.c). Shapes of the flat buffers are given in comments. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "nn/nn_kernels.h"

#define CHECK_IN(ctx, x) do { if (!(ctx)) return NULL; if ((ctx)->err.code) return NULL; \
  if (!(x)) return nn_fail((ctx), GOPT_EINVAL, "nn: %s: NULL input", __func__); } while (0)

/* ---- broadcasting ------------------------------------------------------------------------ */
int nn_broadcast(const gopt_nn_tensor *a, const gopt_nn_tensor *b, nn_bcast *bc) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  int64_t sa[4], sb[4];
  for (int i = 0; i < 4; i++) { sa[i] = 1; sb[i] = 1; }
  for (int i = 0; i < a->ndim; i++) sa[4 - a->ndim + i] = a->shape[i];
  for (int i = 0; i < b->ndim; i++) sb[4 - b->ndim + i] = b->shape[i];
  int64_t st_a = 1, st_b = 1;
  for (int i = 3; i >= 0; i--) {
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1) return -1;
    bc->os[i] = sa[i] > sb[i] ? sa[i] : sb[i];
    if (sa[i] == 0 || sb[i] == 0) bc->os[i] = 0;
    bc->as[i] = sa[i] == 1 ? 0 : st_a;
    bc->bs[i] = sb[i] == 1 ? 0 : st_b;
    st_a *= sa[i];
    st_b *= sb[i];
  }
  bc->ndim = nd;
  bc->n = bc->os[0] * bc->os[1] * bc->os[2] * bc->os[3];
  bc->a_same = a->n == bc->n;
  bc->b_same = b->n == bc->n;
  /* b broadcast along leading dims only (e.g. bias [D] over [N,D]) */
  int64_t inner = 1;
  int k = 3;
  while (k >= 0 && sb[k] == bc->os[k]) { inner *= sb[k]; k--; }
  int lead_ones = 1;
  for (int i = k; i >= 0; i--) if (sb[i] != 1) lead_ones = 0;
  bc->b_rows = (lead_ones && inner == b->n) ? b->n : 0;
  return 0;
}

static float bin_f(int op, float x, float y) {
  switch (op) {
    case GOPT_NN_OP_ADD: return x + y;
    case GOPT_NN_OP_SUB: return x - y;
    case GOPT_NN_OP_MUL: return x * y;
    default: return x < y ? x : y;
  }
}

static gopt_nn_tensor *binary(gopt_nn_ctx *ctx, int op, gopt_nn_tensor *a, gopt_nn_tensor *b) {
  CHECK_IN(ctx, a);
  CHECK_IN(ctx, b);
  nn_bcast bc;
  if (nn_broadcast(a, b, &bc) != 0)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: binary op %d: shapes do not broadcast", op);
  int64_t shape[4];
  for (int i = 0; i < bc.ndim; i++) shape[i] = bc.os[4 - bc.ndim + i];
  gopt_nn_tensor *t = nn_op_new(ctx, op, bc.ndim, shape);
  if (!t) return NULL;
  nn_op_srcs(t, a, b, NULL);
  const float *A = a->data, *B = b->data;
  float *Y = t->data;
  int64_t n = bc.n;
  int nt = nn_threads();
  if (bc.a_same && bc.b_same) {
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
    for (int64_t i = 0; i < n; i++) Y[i] = bin_f(op, A[i], B[i]);
  } else if (bc.a_same && bc.b_rows > 0) {
    int64_t D = bc.b_rows, R = n / D;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
    for (int64_t r = 0; r < R; r++)
      for (int64_t j = 0; j < D; j++) Y[r * D + j] = bin_f(op, A[r * D + j], B[j]);
  } else {
    int64_t o = 0;
    for (int64_t i0 = 0; i0 < bc.os[0]; i0++)
      for (int64_t i1 = 0; i1 < bc.os[1]; i1++)
        for (int64_t i2 = 0; i2 < bc.os[2]; i2++)
          for (int64_t i3 = 0; i3 < bc.os[3]; i3++) {
            int64_t ia = i0 * bc.as[0] + i1 * bc.as[1] + i2 * bc.as[2] + i3 * bc.as[3];
            int64_t ib = i0 * bc.bs[0] + i1 * bc.bs[1] + i2 * bc.bs[2] + i3 * bc.bs[3];
            Y[o++] = bin_f(op, A[ia], B[ib]);
          }
  }
  return t;
}

gopt_nn_tensor *gopt_nn_add(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b) { return binary(ctx, GOPT_NN_OP_ADD, a, b); }
gopt_nn_tensor *gopt_nn_sub(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b) { return binary(ctx, GOPT_NN_OP_SUB, a, b); }
gopt_nn_tensor *gopt_nn_mul(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b) { return binary(ctx, GOPT_NN_OP_MUL, a, b); }
gopt_nn_tensor *gopt_nn_minimum(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b) { return binary(ctx, GOPT_NN_OP_MINIMUM, a, b); }

/* ---- matmul ------------------------------------------------------------------------------ */
gopt_nn_tensor *gopt_nn_matmul(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b, int ta, int tb) {
  CHECK_IN(ctx, a);
  CHECK_IN(ctx, b);
  if (a->ndim != 2 || b->ndim != 2) return nn_fail(ctx, GOPT_ESHAPE, "nn: matmul: operands must be 2-D");
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t K2 = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != K2)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: matmul: inner dims differ (%lld vs %lld)", (long long)K,
                   (long long)K2);
  int64_t shape[2] = {M, N};
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_MATMUL, 2, shape);
  if (!t) return NULL;
  nn_op_srcs(t, a, b, NULL);
  t->ip[0] = ta; t->ip[1] = tb;
  if (K == 0) memset(t->data, 0, (size_t)t->n * sizeof(float));
  else nn_gemm(ta, tb, M, N, K, 1.0f, a->data, a->shape[1], b->data, b->shape[1], 0.0f, t->data, N);
  return t;
}

/* y[N,out] = x[N,in] W[out,in]^T + b[out] (fused: one output, bias pre-filled, sgemm beta=1) */
gopt_nn_tensor *gopt_nn_linear_op(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_tensor *w, gopt_nn_tensor *b) {
  CHECK_IN(ctx, x);
  CHECK_IN(ctx, w);
  if (x->ndim != 2 || w->ndim != 2 || x->shape[1] != w->shape[1] || (b && b->n != w->shape[0]))
    return nn_fail(ctx, GOPT_ESHAPE, "nn: linear: x [N,%lld] does not fit W [%lld,%lld]", (long long)x->shape[x->ndim - 1],
                   (long long)w->shape[0], (long long)w->shape[w->ndim - 1]);
  int64_t N = x->shape[0], O = w->shape[0], I = w->shape[1], shape[2] = {N, O};
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_LINEAR, 2, shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, w, b);
  int nt = nn_threads();
  if (b) {
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
    for (int64_t r = 0; r < N; r++) memcpy(t->data + r * O, b->data, (size_t)O * sizeof(float));
  }
  if (I == 0 && !b) memset(t->data, 0, (size_t)t->n * sizeof(float));
  else if (I > 0) nn_gemm(0, 1, N, O, I, 1.0f, x->data, I, w->data, I, b ? 1.0f : 0.0f, t->data, O);
  return t;
}

/* ---- unary elementwise ------------------------------------------------------------------- */
static float unary_f(int op, float x, const float *fp) {
  switch (op) {
    case GOPT_NN_OP_SCALE: return x * fp[0];
    case GOPT_NN_OP_ADD_SCALAR: return x + fp[0];
    case GOPT_NN_OP_RELU: return x > 0 ? x : 0.0f;
    case GOPT_NN_OP_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case GOPT_NN_OP_GELU_TANH: {
      float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(u));
    }
    case GOPT_NN_OP_TANH: return tanhf(x);
    case GOPT_NN_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case GOPT_NN_OP_EXP: return expf(x);
    case GOPT_NN_OP_LOG: return logf(x);
    case GOPT_NN_OP_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
    case GOPT_NN_OP_CLAMP: return x < fp[0] ? fp[0] : (x > fp[1] ? fp[1] : x);
    default: return x;  /* DETACH, RESHAPE */
  }
}

static gopt_nn_tensor *unary(gopt_nn_ctx *ctx, int op, gopt_nn_tensor *x, float p0, float p1) {
  CHECK_IN(ctx, x);
  gopt_nn_tensor *t = nn_op_new(ctx, op, x->ndim, x->shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  if (op == GOPT_NN_OP_DETACH) t->requires_grad = 0;
  t->fp[0] = p0; t->fp[1] = p1;
  const float *X = x->data;
  float *Y = t->data;
  const float *fp = t->fp;
  int64_t n = x->n;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
  for (int64_t i = 0; i < n; i++) Y[i] = unary_f(op, X[i], fp);
  return t;
}

gopt_nn_tensor *gopt_nn_scale(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float s) { return unary(ctx, GOPT_NN_OP_SCALE, x, s, 0); }
gopt_nn_tensor *gopt_nn_add_scalar(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float c) { return unary(ctx, GOPT_NN_OP_ADD_SCALAR, x, c, 0); }
gopt_nn_tensor *gopt_nn_relu(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_RELU, x, 0, 0); }
gopt_nn_tensor *gopt_nn_gelu(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_GELU, x, 0, 0); }
gopt_nn_tensor *gopt_nn_gelu_tanh(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_GELU_TANH, x, 0, 0); }
gopt_nn_tensor *gopt_nn_tanh(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_TANH, x, 0, 0); }
gopt_nn_tensor *gopt_nn_sigmoid(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_SIGMOID, x, 0, 0); }
gopt_nn_tensor *gopt_nn_exp(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_EXP, x, 0, 0); }
gopt_nn_tensor *gopt_nn_log(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_LOG, x, 0, 0); }
gopt_nn_tensor *gopt_nn_softplus(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return unary(ctx, GOPT_NN_OP_SOFTPLUS, x, 0, 0); }
gopt_nn_tensor *gopt_nn_clamp(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float lo, float hi) { return unary(ctx, GOPT_NN_OP_CLAMP, x, lo, hi); }
gopt_nn_tensor *gopt_nn_detach(gopt_nn_ctx *ctx, gopt_nn_tensor *x) {
  CHECK_IN(ctx, x);
  gopt_nn_tensor *t = nn_op_view(ctx, GOPT_NN_OP_DETACH, x->ndim, x->shape, x->data);
  if (t) t->src[0] = x;  /* requires_grad stays 0 */
  return t;
}

gopt_nn_tensor *gopt_nn_reshape(gopt_nn_ctx *ctx, gopt_nn_tensor *x, int ndim, const int64_t *shape) {
  CHECK_IN(ctx, x);
  int64_t n = 1;
  if (ndim < 1 || ndim > GOPT_NN_MAX_DIMS) return nn_fail(ctx, GOPT_ESHAPE, "nn: reshape: bad ndim %d", ndim);
  for (int i = 0; i < ndim; i++) n *= shape[i];
  if (n != x->n) return nn_fail(ctx, GOPT_ESHAPE, "nn: reshape: %lld elements into %lld", (long long)x->n, (long long)n);
  gopt_nn_tensor *t = nn_op_view(ctx, GOPT_NN_OP_RESHAPE, ndim, shape, x->data);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  return t;
}

gopt_nn_tensor *gopt_nn_dropout(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float p, gopt_nn_rng *rng) {
  CHECK_IN(ctx, x);
  if (p <= 0.0f || !ctx->training) return x;
  if (p >= 1.0f || !rng) return nn_fail(ctx, GOPT_EINVAL, "nn: dropout: p must be in [0,1) and rng set");
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_DROPOUT, x->ndim, x->shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  uint8_t *mask = nn_alloc(ctx, (size_t)(x->n ? x->n : 1));
  if (!mask) return NULL;
  t->saved = mask;
  uint64_t key = gopt_nn_rng_u64(rng);
  uint64_t thr = (uint64_t)((double)p * 18446744073709551616.0);
  float s = 1.0f / (1.0f - p);
  t->fp[0] = s;
  const float *X = x->data;
  float *Y = t->data;
  int64_t n = x->n;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
  for (int64_t i = 0; i < n; i++) {
    mask[i] = nn_mix64(key ^ nn_mix64((uint64_t)i)) >= thr;
    Y[i] = mask[i] ? X[i] * s : 0.0f;
  }
  return t;
}

/* ---- last-axis ops ----------------------------------------------------------------------- */
static int64_t last_dim(const gopt_nn_tensor *x) { return x->shape[x->ndim - 1]; }

static gopt_nn_tensor *softmax_impl(gopt_nn_ctx *ctx, gopt_nn_tensor *x, int logmode) {
  CHECK_IN(ctx, x);
  gopt_nn_tensor *t = nn_op_new(ctx, logmode ? GOPT_NN_OP_LOG_SOFTMAX : GOPT_NN_OP_SOFTMAX, x->ndim, x->shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  int64_t D = last_dim(x), R = D ? x->n / D : 0;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x->data + r * D;
    float *yr = t->data + r * D;
    float mx = -INFINITY;
    for (int64_t j = 0; j < D; j++) mx = xr[j] > mx ? xr[j] : mx;
    float s = 0.0f;
    for (int64_t j = 0; j < D; j++) s += expf(xr[j] - mx);
    if (logmode) {
      float ls = logf(s);
      for (int64_t j = 0; j < D; j++) yr[j] = xr[j] - mx - ls;
    } else {
      float inv = 1.0f / s;
      for (int64_t j = 0; j < D; j++) yr[j] = expf(xr[j] - mx) * inv;
    }
  }
  return t;
}
gopt_nn_tensor *gopt_nn_softmax(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return softmax_impl(ctx, x, 0); }
gopt_nn_tensor *gopt_nn_log_softmax(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return softmax_impl(ctx, x, 1); }

gopt_nn_tensor *gopt_nn_layernorm(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_tensor *gamma,
                                  gopt_nn_tensor *beta, float eps) {
  CHECK_IN(ctx, x);
  int64_t D = last_dim(x), R = D ? x->n / D : 0;
  if ((gamma && gamma->n != D) || (beta && beta->n != D))
    return nn_fail(ctx, GOPT_ESHAPE, "nn: layernorm: gamma/beta must have %lld elements", (long long)D);
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_LAYERNORM, x->ndim, x->shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, gamma, beta);
  float *stats = nn_alloc(ctx, (size_t)(2 * R + 1) * sizeof(float)); /* mean[R], rstd[R] */
  if (!stats) return NULL;
  t->saved = stats;
  t->fp[0] = eps;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x->data + r * D;
    float *yr = t->data + r * D;
    float m = 0.0f;
    for (int64_t j = 0; j < D; j++) m += xr[j];
    m /= (float)D;
    float v = 0.0f;
    for (int64_t j = 0; j < D; j++) { float d = xr[j] - m; v += d * d; }
    v /= (float)D;
    float rs = 1.0f / sqrtf(v + eps);
    stats[r] = m;
    stats[R + r] = rs;
    for (int64_t j = 0; j < D; j++) {
      float h = (xr[j] - m) * rs;
      yr[j] = h * (gamma ? gamma->data[j] : 1.0f) + (beta ? beta->data[j] : 0.0f);
    }
  }
  return t;
}

gopt_nn_tensor *gopt_nn_l2norm(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float eps) {
  CHECK_IN(ctx, x);
  int64_t D = last_dim(x), R = D ? x->n / D : 0;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_L2NORM, x->ndim, x->shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  float *nrm = nn_alloc(ctx, (size_t)(R + 1) * sizeof(float));
  if (!nrm) return NULL;
  t->saved = nrm;
  t->fp[0] = eps;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x->data + r * D;
    float s = 0.0f;
    for (int64_t j = 0; j < D; j++) s += xr[j] * xr[j];
    float nv = sqrtf(s);
    nrm[r] = nv;
    float inv = 1.0f / (nv > eps ? nv : eps);
    for (int64_t j = 0; j < D; j++) t->data[r * D + j] = xr[j] * inv;
  }
  return t;
}

/* ---- shape ops ---------------------------------------------------------------------------- */
/* outer = prod(shape[0..axis)), inner = prod(shape(axis..)) */
static void split_axis(const gopt_nn_tensor *x, int axis, int64_t *outer, int64_t *inner) {
  int64_t o = 1, in = 1;
  for (int i = 0; i < axis; i++) o *= x->shape[i];
  for (int i = axis + 1; i < x->ndim; i++) in *= x->shape[i];
  *outer = o;
  *inner = in;
}

gopt_nn_tensor *gopt_nn_concat(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b, int axis) {
  CHECK_IN(ctx, a);
  CHECK_IN(ctx, b);
  if (axis < 0) axis += a->ndim;
  if (a->ndim != b->ndim || axis < 0 || axis >= a->ndim)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: concat: rank mismatch or bad axis");
  for (int i = 0; i < a->ndim; i++)
    if (i != axis && a->shape[i] != b->shape[i])
      return nn_fail(ctx, GOPT_ESHAPE, "nn: concat: dim %d differs (%lld vs %lld)", i,
                     (long long)a->shape[i], (long long)b->shape[i]);
  int64_t shape[4];
  for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
  shape[axis] += b->shape[axis];
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_CONCAT, a->ndim, shape);
  if (!t) return NULL;
  nn_op_srcs(t, a, b, NULL);
  t->ip[0] = axis;
  int64_t outer, inner;
  split_axis(a, axis, &outer, &inner);
  int64_t ca = a->shape[axis] * inner, cb = b->shape[axis] * inner;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
  for (int64_t o = 0; o < outer; o++) {
    memcpy(t->data + o * (ca + cb), a->data + o * ca, (size_t)ca * sizeof(float));
    memcpy(t->data + o * (ca + cb) + ca, b->data + o * cb, (size_t)cb * sizeof(float));
  }
  return t;
}

gopt_nn_tensor *gopt_nn_slice(gopt_nn_ctx *ctx, gopt_nn_tensor *x, int axis, int64_t start, int64_t len) {
  CHECK_IN(ctx, x);
  if (axis < 0) axis += x->ndim;
  if (axis < 0 || axis >= x->ndim || start < 0 || len < 0 || start + len > x->shape[axis])
    return nn_fail(ctx, GOPT_ESHAPE, "nn: slice: [%lld, %lld) out of range on axis %d", (long long)start,
                   (long long)(start + len), axis);
  int64_t shape[4];
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
  shape[axis] = len;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_SLICE, x->ndim, shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  t->ip[0] = axis; t->ip[1] = start;
  int64_t outer, inner;
  split_axis(x, axis, &outer, &inner);
  int64_t cx = x->shape[axis] * inner, cy = len * inner;
  for (int64_t o = 0; o < outer; o++)
    memcpy(t->data + o * cy, x->data + o * cx + start * inner, (size_t)cy * sizeof(float));
  return t;
}

/* ---- reductions ---------------------------------------------------------------------------- */
/* Sum (of squares when sq) in double over 256 fixed chunks, in a fixed order: the result is
 * independent of the thread count. */
static double sum_det(const float *x, int64_t n, int sq) {
  double part[256];
  int64_t chunk = (n + 255) / 256;
  if (chunk < 1) chunk = 1;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
  for (int c = 0; c < 256; c++) {
    double s = 0.0;
    int64_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
    if (sq)
      for (int64_t i = b; i < e; i++) s += (double)x[i] * x[i];
    else
      for (int64_t i = b; i < e; i++) s += x[i];
    part[c] = s;
  }
  double s = 0.0;
  for (int c = 0; c < 256; c++) s += part[c];
  return s;
}

double nn_sum_det(const float *x, int64_t n) { return sum_det(x, n, 0); }
double nn_sumsq_det(const float *x, int64_t n) { return sum_det(x, n, 1); }

static gopt_nn_tensor *reduce_all(gopt_nn_ctx *ctx, int op, gopt_nn_tensor *x) {
  CHECK_IN(ctx, x);
  int64_t one = 1;
  gopt_nn_tensor *t = nn_op_new(ctx, op, 1, &one);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  double s = nn_sum_det(x->data, x->n);
  if (op == GOPT_NN_OP_MEAN) s = x->n ? s / (double)x->n : 0.0;
  t->data[0] = (float)s;
  return t;
}
gopt_nn_tensor *gopt_nn_sum(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return reduce_all(ctx, GOPT_NN_OP_SUM, x); }
gopt_nn_tensor *gopt_nn_mean(gopt_nn_ctx *ctx, gopt_nn_tensor *x) { return reduce_all(ctx, GOPT_NN_OP_MEAN, x); }

gopt_nn_tensor *gopt_nn_sum_last(gopt_nn_ctx *ctx, gopt_nn_tensor *x) {
  CHECK_IN(ctx, x);
  int64_t shape[4] = {1, 1, 1, 1};
  int nd = x->ndim > 1 ? x->ndim - 1 : 1;
  for (int i = 0; i < x->ndim - 1; i++) shape[i] = x->shape[i];
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_SUM_LAST, nd, shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  int64_t D = last_dim(x), R = t->n;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
  for (int64_t r = 0; r < R; r++) {
    float s = 0.0f;
    for (int64_t j = 0; j < D; j++) s += x->data[r * D + j];
    t->data[r] = s;
  }
  return t;
}

/* ---- index ops ----------------------------------------------------------------------------- */
static int32_t *copy_idx(gopt_nn_ctx *ctx, const int32_t *idx, int64_t m, int64_t bound, const char *who) {
  if (m > 0 && !idx) return nn_fail(ctx, GOPT_EINVAL, "nn: %s: NULL index", who);
  int32_t *c = nn_alloc(ctx, (size_t)(m ? m : 1) * sizeof *c);
  if (!c) return NULL;
  for (int64_t i = 0; i < m; i++) {
    if (idx[i] < 0 || idx[i] >= bound)
      return nn_fail(ctx, GOPT_ERANGE, "nn: %s: index[%lld]=%d out of range [0,%lld)", who,
                     (long long)i, idx[i], (long long)bound);
    c[i] = idx[i];
  }
  return c;
}

gopt_nn_tensor *gopt_nn_gather_rows(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const int32_t *idx, int64_t m) {
  CHECK_IN(ctx, x);
  int64_t N = x->shape[0], D = N ? x->n / N : 0;
  int32_t *ci = copy_idx(ctx, idx, m, N, "gather_rows");
  if (!ci) return NULL;
  int64_t shape[4];
  for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
  shape[0] = m;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_GATHER_ROWS, x->ndim, shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  t->idx = ci;
  t->ip[0] = m;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
  for (int64_t i = 0; i < m; i++) memcpy(t->data + i * D, x->data + (int64_t)ci[i] * D, (size_t)D * sizeof(float));
  return t;
}
gopt_nn_tensor *gopt_nn_embedding(gopt_nn_ctx *ctx, gopt_nn_tensor *table, const int32_t *idx, int64_t m) {
  return gopt_nn_gather_rows(ctx, table, idx, m);
}

gopt_nn_tensor *gopt_nn_scatter_add(gopt_nn_ctx *ctx, gopt_nn_tensor *src, const int32_t *idx, int64_t n_out) {
  CHECK_IN(ctx, src);
  int64_t M = src->shape[0], D = M ? src->n / M : 1;
  if (M == 0) D = 1;
  for (int i = 1; i < src->ndim && M == 0; i++) D *= src->shape[i];
  int32_t *ci = copy_idx(ctx, idx, M, n_out, "scatter_add");
  if (!ci) return NULL;
  int64_t shape[4];
  for (int i = 0; i < src->ndim; i++) shape[i] = src->shape[i];
  shape[0] = n_out;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_SCATTER_ADD, src->ndim, shape);
  if (!t) return NULL;
  nn_op_srcs(t, src, NULL, NULL);
  t->idx = ci;
  int32_t *ptr, *pos;
  if (nn_invert_index(ctx, ci, M, n_out, &ptr, &pos)) return NULL;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
  for (int64_t j = 0; j < n_out; j++) {
    float *o = t->data + j * D;
    for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
    for (int32_t e = ptr[j]; e < ptr[j + 1]; e++) {
      const float *s = src->data + (int64_t)pos[e] * D;
      for (int64_t d = 0; d < D; d++) o[d] += s[d];
    }
  }
  return t;
}

gopt_nn_tensor *gopt_nn_pick(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const int32_t *idx) {
  CHECK_IN(ctx, x);
  if (x->ndim != 2) return nn_fail(ctx, GOPT_ESHAPE, "nn: pick: x must be [N,C]");
  int64_t N = x->shape[0], C = x->shape[1];
  int32_t *ci = copy_idx(ctx, idx, N, C, "pick");
  if (!ci) return NULL;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_PICK, 1, &N);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  t->idx = ci;
  for (int64_t i = 0; i < N; i++) t->data[i] = x->data[i * C + ci[i]];
  return t;
}

/* ---- segment aggregation over a CSR -------------------------------------------------------- */
static gopt_nn_tensor *seg_op(gopt_nn_ctx *ctx, int op, gopt_nn_tensor *x, const gopt_nn_csr *g) {
  CHECK_IN(ctx, x);
  if (!g || !g->rowptr) return nn_fail(ctx, GOPT_EINVAL, "nn: segment op: NULL csr");
  if (x->ndim != 2 || x->shape[0] != g->n_src)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: segment op: x must be [%lld, D]", (long long)g->n_src);
  int64_t D = x->shape[1], shape[2] = {g->n_dst, D};
  gopt_nn_tensor *t = nn_op_new(ctx, op, 2, shape);
  if (!t) return NULL;
  nn_op_srcs(t, x, NULL, NULL);
  t->aux = g;
  int32_t *arg = NULL;
  if (op == GOPT_NN_OP_SEG_MAX) {
    arg = nn_alloc(ctx, (size_t)(t->n ? t->n : 1) * sizeof *arg);
    if (!arg) return NULL;
    t->saved = arg;
  }
  const int32_t *rp = g->rowptr, *col = g->col;
  const float *X = x->data;
  float *Y = t->data;
  int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN / 4)
  for (int64_t i = 0; i < g->n_dst; i++) {
    float *y = Y + i * D;
    if (op == GOPT_NN_OP_SEG_MAX) {
      int32_t *a = arg + i * D;
      if (rp[i] == rp[i + 1]) {
        for (int64_t d = 0; d < D; d++) { y[d] = 0.0f; a[d] = -1; }
        continue;
      }
      const float *x0 = X + (int64_t)col[rp[i]] * D;
      for (int64_t d = 0; d < D; d++) { y[d] = x0[d]; a[d] = col[rp[i]]; }
      for (int32_t e = rp[i] + 1; e < rp[i + 1]; e++) {
        const float *xs = X + (int64_t)col[e] * D;
        for (int64_t d = 0; d < D; d++)
          if (xs[d] > y[d]) { y[d] = xs[d]; a[d] = col[e]; }
      }
    } else {
      for (int64_t d = 0; d < D; d++) y[d] = 0.0f;
      for (int32_t e = rp[i]; e < rp[i + 1]; e++) {
        const float *xs = X + (int64_t)col[e] * D;
        for (int64_t d = 0; d < D; d++) y[d] += xs[d];
      }
      if (op == GOPT_NN_OP_SEG_MEAN) {
        float w = g->inv_deg[i];
        for (int64_t d = 0; d < D; d++) y[d] *= w;
      }
    }
  }
  return t;
}
gopt_nn_tensor *gopt_nn_seg_sum(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g) { return seg_op(ctx, GOPT_NN_OP_SEG_SUM, x, g); }
gopt_nn_tensor *gopt_nn_seg_mean(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g) { return seg_op(ctx, GOPT_NN_OP_SEG_MEAN, x, g); }
gopt_nn_tensor *gopt_nn_seg_max(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g) { return seg_op(ctx, GOPT_NN_OP_SEG_MAX, x, g); }

/* ---- attention ----------------------------------------------------------------------------- */
gopt_nn_tensor *gopt_nn_attention(gopt_nn_ctx *ctx, gopt_nn_tensor *q, gopt_nn_tensor *k,
                                  gopt_nn_tensor *v, gopt_nn_tensor *kmem, gopt_nn_tensor *vmem,
                                  int n_heads, int64_t seg_len, int causal, const uint8_t *key_valid) {
  CHECK_IN(ctx, q);
  CHECK_IN(ctx, k);
  CHECK_IN(ctx, v);
  if (q->ndim != 2 || k->ndim != 2 || v->ndim != 2 || k->shape[0] != q->shape[0] ||
      v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1])
    return nn_fail(ctx, GOPT_ESHAPE, "nn: attention: q, k, v must all be [T, H*dh]");
  if ((kmem == NULL) != (vmem == NULL))
    return nn_fail(ctx, GOPT_EINVAL, "nn: attention: kmem and vmem go together");
  if (kmem && (kmem->n != k->n || vmem->n != v->n || kmem->ndim != 2 || vmem->ndim != 2))
    return nn_fail(ctx, GOPT_ESHAPE, "nn: attention: kmem/vmem must have the shape of k/v");
  if (kmem && (kmem == k || vmem == v || kmem == v || vmem == k))
    return nn_fail(ctx, GOPT_EINVAL, "nn: attention: kmem/vmem must be tensors distinct from k/v");
  int64_t T = q->shape[0], HD = q->shape[1];
  if (n_heads < 1 || HD % n_heads)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: attention: %lld columns not divisible by %d heads", (long long)HD, n_heads);
  if (seg_len <= 0 || seg_len > T) seg_len = T > 0 ? T : 1;
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_ATTENTION, 2, q->shape);
  if (!t) return NULL;
  t->src[0] = q; t->src[1] = k; t->src[2] = v; t->src[3] = kmem; t->src[4] = vmem;
  t->requires_grad = q->requires_grad || k->requires_grad || v->requires_grad ||
                     (kmem && kmem->requires_grad) || (vmem && vmem->requires_grad);
  t->ip[0] = n_heads; t->ip[1] = seg_len; t->ip[2] = causal ? 1 : 0;
  if (key_valid) {
    uint8_t *kv = nn_alloc(ctx, (size_t)(T ? T : 1));
    if (!kv) return NULL;
    memcpy(kv, key_valid, (size_t)T);
    t->aux = kv;
  }
  int nt = nn_threads();
  int64_t L = seg_len, Lk = kmem ? 2 * L : L;
  nn_attn_state *st = nn_alloc(ctx, sizeof *st);
  if (!st) return NULL;
  st->lse = nn_alloc(ctx, (size_t)(n_heads * T + 1) * sizeof(float)); /* [H, T] */
  st->scratch = nn_alloc(ctx, (size_t)nt * (size_t)(2 * L * Lk + L + 1) * sizeof(float));
  if (!st->lse || !st->scratch) return NULL;
  st->nt = nt;
  st->per_thread = 2 * L * Lk + L + 1;
  st->lk = Lk;
  t->saved = st;
  nn_attention_forward(t);
  return t;
}

/* ---- Beta distribution ---------------------------------------------------------------------- */
gopt_nn_tensor *gopt_nn_beta_logprob(gopt_nn_ctx *ctx, gopt_nn_tensor *alpha, gopt_nn_tensor *beta,
                                     gopt_nn_tensor *x) {
  CHECK_IN(ctx, alpha);
  CHECK_IN(ctx, beta);
  CHECK_IN(ctx, x);
  if (alpha->n != beta->n || alpha->n != x->n)
    return nn_fail(ctx, GOPT_ESHAPE, "nn: beta_logprob: alpha, beta, x must have equal sizes");
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_BETA_LOGPROB, alpha->ndim, alpha->shape);
  if (!t) return NULL;
  nn_op_srcs(t, alpha, beta, x);
  for (int64_t i = 0; i < t->n; i++) {
    double a = alpha->data[i], b = beta->data[i], v = x->data[i];
    double lb = gopt_nn_lgamma(a) + gopt_nn_lgamma(b) - gopt_nn_lgamma(a + b);
    t->data[i] = (float)((a - 1) * log(v) + (b - 1) * log1p(-v) - lb);
  }
  return t;
}

gopt_nn_tensor *gopt_nn_beta_entropy(gopt_nn_ctx *ctx, gopt_nn_tensor *alpha, gopt_nn_tensor *beta) {
  CHECK_IN(ctx, alpha);
  CHECK_IN(ctx, beta);
  if (alpha->n != beta->n) return nn_fail(ctx, GOPT_ESHAPE, "nn: beta_entropy: alpha, beta sizes differ");
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_BETA_ENTROPY, alpha->ndim, alpha->shape);
  if (!t) return NULL;
  nn_op_srcs(t, alpha, beta, NULL);
  for (int64_t i = 0; i < t->n; i++) {
    double a = alpha->data[i], b = beta->data[i];
    double lb = gopt_nn_lgamma(a) + gopt_nn_lgamma(b) - gopt_nn_lgamma(a + b);
    t->data[i] = (float)(lb - (a - 1) * gopt_nn_digamma(a) - (b - 1) * gopt_nn_digamma(b) +
                         (a + b - 2) * gopt_nn_digamma(a + b));
  }
  return t;
}
