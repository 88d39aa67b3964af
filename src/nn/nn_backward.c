/* nn_backward.c: reverse-mode autograd. gopt_nn_backward walks the ctx tape from the loss back to
 * the first op and, in ONE switch over op kinds, accumulates (+=) each op's input gradients.
 * Every parallel loop partitions the gradient being written (rows, columns, or (segment, head)
 * tasks), so there are no atomics and results do not depend on scheduling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "nn/nn_kernels.h"

/* Fixed number of row chunks for column reductions (independent of the thread count). */
#define NN_CHUNKS 64

static inline float *G(gopt_nn_tensor *s) { return (s && s->requires_grad) ? s->grad : NULL; }

static float unary_df(int op, float x, float y, const float *fp) {
  switch (op) {
    case GOPT_NN_OP_SCALE: return fp[0];
    case GOPT_NN_OP_ADD_SCALAR: return 1.0f;
    case GOPT_NN_OP_RELU: return x > 0 ? 1.0f : 0.0f;
    case GOPT_NN_OP_GELU:
      return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
    case GOPT_NN_OP_GELU_TANH: {
      const float k = 0.7978845608028654f;
      float t = tanhf(k * (x + 0.044715f * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case GOPT_NN_OP_TANH: return 1.0f - y * y;
    case GOPT_NN_OP_SIGMOID: return y * (1.0f - y);
    case GOPT_NN_OP_EXP: return y;
    case GOPT_NN_OP_LOG: return 1.0f / x;
    case GOPT_NN_OP_SOFTPLUS: return x > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-x));
    case GOPT_NN_OP_CLAMP: return (x >= fp[0] && x <= fp[1]) ? 1.0f : 0.0f;
    default: return 1.0f;
  }
}

/* d out / d a and d out / d b for the binary ops */
static inline void binary_df(int op, float a, float b, float *da, float *db) {
  switch (op) {
    case GOPT_NN_OP_ADD: *da = 1.0f; *db = 1.0f; break;
    case GOPT_NN_OP_SUB: *da = 1.0f; *db = -1.0f; break;
    case GOPT_NN_OP_MUL: *da = b; *db = a; break;
    default:  /* minimum: ties split in halves (PyTorch) */
      if (a < b) { *da = 1.0f; *db = 0.0f; }
      else if (a > b) { *da = 0.0f; *db = 1.0f; }
      else { *da = 0.5f; *db = 0.5f; }
  }
}

static int backward_binary(gopt_nn_tensor *t) {
  gopt_nn_tensor *a = t->src[0], *b = t->src[1];
  float *ga = G(a), *gb = G(b);
  const float *g = t->grad, *A = a->data, *B = b->data;
  nn_bcast bc;
  nn_broadcast(a, b, &bc);
  int op = t->op, nt = nn_threads();
  int64_t n = bc.n;
  if (bc.a_same && bc.b_same) {
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
      float da, db;
      binary_df(op, A[i], B[i], &da, &db);
      if (ga) ga[i] += g[i] * da;
      if (gb) gb[i] += g[i] * db;
    }
  } else if (bc.a_same && bc.b_rows > 0) {
    int64_t D = bc.b_rows, R = n / D;
    if (ga) {
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
      for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < D; j++) {
          float da, db;
          binary_df(op, A[r * D + j], B[j], &da, &db);
          ga[r * D + j] += g[r * D + j] * da;
        }
    }
    if (gb) {
      /* column sums over fixed row chunks, then the chunks in order: deterministic, cache-friendly */
      float *part = malloc((size_t)(NN_CHUNKS * D) * sizeof(float));
      if (!part) return GOPT_ENOMEM;
      int64_t rows = (R + NN_CHUNKS - 1) / NN_CHUNKS;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > NN_PAR_MIN)
      for (int c = 0; c < NN_CHUNKS; c++) {
        float *pc = part + (int64_t)c * D;
        for (int64_t j = 0; j < D; j++) pc[j] = 0.0f;
        int64_t r0 = c * rows, r1 = r0 + rows < R ? r0 + rows : R;
        for (int64_t r = r0; r < r1; r++) {
          const float *gr = g + r * D, *ar = A + r * D;
          if (op == GOPT_NN_OP_ADD) for (int64_t j = 0; j < D; j++) pc[j] += gr[j];
          else if (op == GOPT_NN_OP_SUB) for (int64_t j = 0; j < D; j++) pc[j] -= gr[j];
          else if (op == GOPT_NN_OP_MUL) for (int64_t j = 0; j < D; j++) pc[j] += gr[j] * ar[j];
          else
            for (int64_t j = 0; j < D; j++) {
              float da, db;
              binary_df(op, ar[j], B[j], &da, &db);
              pc[j] += gr[j] * db;
            }
        }
      }
      for (int64_t j = 0; j < D; j++) {
        double acc = 0.0;
        for (int c = 0; c < NN_CHUNKS; c++) acc += part[(int64_t)c * D + j];
        gb[j] += (float)acc;
      }
      free(part);
    }
  } else {
    int64_t o = 0;
    for (int64_t i0 = 0; i0 < bc.os[0]; i0++)
      for (int64_t i1 = 0; i1 < bc.os[1]; i1++)
        for (int64_t i2 = 0; i2 < bc.os[2]; i2++)
          for (int64_t i3 = 0; i3 < bc.os[3]; i3++, o++) {
            int64_t ia = i0 * bc.as[0] + i1 * bc.as[1] + i2 * bc.as[2] + i3 * bc.as[3];
            int64_t ib = i0 * bc.bs[0] + i1 * bc.bs[1] + i2 * bc.bs[2] + i3 * bc.bs[3];
            float da, db;
            binary_df(op, A[ia], B[ib], &da, &db);
            if (ga) ga[ia] += g[o] * da;
            if (gb) gb[ib] += g[o] * db;
          }
  }
  return 0;
}

static void backward_matmul(gopt_nn_tensor *t) {
  gopt_nn_tensor *a = t->src[0], *b = t->src[1];
  int ta = (int)t->ip[0], tb = (int)t->ip[1];
  int64_t M = t->shape[0], N = t->shape[1], K = ta ? a->shape[0] : a->shape[1];
  const float *g = t->grad;
  float *ga = G(a), *gb = G(b);
  if (ga) {
    if (!ta) nn_gemm(0, !tb, M, K, N, 1.0f, g, N, b->data, b->shape[1], 1.0f, ga, K);
    else nn_gemm(tb, 1, K, M, N, 1.0f, b->data, b->shape[1], g, N, 1.0f, ga, M);
  }
  if (gb) {
    if (!tb) nn_gemm(!ta, 0, K, N, M, 1.0f, a->data, a->shape[1], g, N, 1.0f, gb, N);
    else nn_gemm(1, ta, N, K, M, 1.0f, g, N, a->data, a->shape[1], 1.0f, gb, K);
  }
}

/* dx = g W; dW += g^T x; db += column sums of g (fixed chunks) */
static int backward_linear(gopt_nn_tensor *t) {
  gopt_nn_tensor *x = t->src[0], *w = t->src[1], *b = t->src[2];
  int64_t N = t->shape[0], O = t->shape[1], I = w->shape[1];
  const float *g = t->grad;
  float *gx = G(x), *gw = G(w), *gb = G(b);
  if (gx) nn_gemm(0, 0, N, I, O, 1.0f, g, O, w->data, I, 1.0f, gx, I);
  if (gw) nn_gemm(1, 0, O, I, N, 1.0f, g, O, x->data, I, 1.0f, gw, I);
  if (gb) {
    float *part = malloc((size_t)(NN_CHUNKS * O) * sizeof(float));
    if (!part) return GOPT_ENOMEM;
    int64_t rows = (N + NN_CHUNKS - 1) / NN_CHUNKS;
    int nt = nn_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
    for (int c = 0; c < NN_CHUNKS; c++) {
      float *pc = part + (int64_t)c * O;
      for (int64_t j = 0; j < O; j++) pc[j] = 0.0f;
      int64_t r0 = c * rows, r1 = r0 + rows < N ? r0 + rows : N;
      for (int64_t r = r0; r < r1; r++)
        for (int64_t j = 0; j < O; j++) pc[j] += g[r * O + j];
    }
    for (int64_t j = 0; j < O; j++) {
      double acc = 0.0;
      for (int c = 0; c < NN_CHUNKS; c++) acc += part[(int64_t)c * O + j];
      gb[j] += (float)acc;
    }
    free(part);
  }
  return 0;
}

static int backward_layernorm(gopt_nn_tensor *t) {
  gopt_nn_tensor *x = t->src[0], *gam = t->src[1], *bet = t->src[2];
  int64_t D = x->shape[x->ndim - 1], R = D ? x->n / D : 0;
  const float *st = t->saved, *g = t->grad, *X = x->data;
  float *gx = G(x), *gg = G(gam), *gbt = G(bet);
  int nt = nn_threads();
  if (gx) {
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
    for (int64_t r = 0; r < R; r++) {
      float m = st[r], rs = st[R + r], s1 = 0.0f, s2 = 0.0f;
      for (int64_t j = 0; j < D; j++) {
        float dn = g[r * D + j] * (gam ? gam->data[j] : 1.0f);
        s1 += dn;
        s2 += dn * (X[r * D + j] - m) * rs;
      }
      s1 /= (float)D;
      s2 /= (float)D;
      for (int64_t j = 0; j < D; j++) {
        float dn = g[r * D + j] * (gam ? gam->data[j] : 1.0f);
        float xh = (X[r * D + j] - m) * rs;
        gx[r * D + j] += rs * (dn - s1 - xh * s2);
      }
    }
  }
  if (gg || gbt) {
    float *part = malloc((size_t)(2 * NN_CHUNKS * D) * sizeof(float));
    if (!part) return GOPT_ENOMEM;
    int64_t rows = (R + NN_CHUNKS - 1) / NN_CHUNKS;
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
    for (int c = 0; c < NN_CHUNKS; c++) {
      float *pg = part + (int64_t)c * 2 * D, *pb = pg + D;
      for (int64_t j = 0; j < D; j++) { pg[j] = 0.0f; pb[j] = 0.0f; }
      int64_t r0 = c * rows, r1 = r0 + rows < R ? r0 + rows : R;
      for (int64_t r = r0; r < r1; r++) {
        float m = st[r], rs = st[R + r];
        const float *gr = g + r * D, *xr = X + r * D;
        for (int64_t j = 0; j < D; j++) {
          pg[j] += gr[j] * (xr[j] - m) * rs;
          pb[j] += gr[j];
        }
      }
    }
    for (int64_t j = 0; j < D; j++) {
      double sg = 0.0, sb = 0.0;
      for (int c = 0; c < NN_CHUNKS; c++) { sg += part[(int64_t)c * 2 * D + j]; sb += part[(int64_t)c * 2 * D + D + j]; }
      if (gg) gg[j] += (float)sg;
      if (gbt) gbt[j] += (float)sb;
    }
    free(part);
  }
  return 0;
}

static int backward_op(gopt_nn_ctx *ctx, gopt_nn_tensor *t) {
  gopt_nn_tensor *x = t->src[0];
  const float *g = t->grad;
  int nt = nn_threads();
  switch (t->op) {
    case GOPT_NN_OP_LEAF:
    case GOPT_NN_OP_DETACH:
      break;
    case GOPT_NN_OP_MATMUL:
      backward_matmul(t);
      break;
    case GOPT_NN_OP_LINEAR:
      return backward_linear(t);
    case GOPT_NN_OP_ADD: case GOPT_NN_OP_SUB: case GOPT_NN_OP_MUL: case GOPT_NN_OP_MINIMUM:
      return backward_binary(t);
    case GOPT_NN_OP_SCALE: case GOPT_NN_OP_ADD_SCALAR: case GOPT_NN_OP_RELU: case GOPT_NN_OP_GELU:
    case GOPT_NN_OP_GELU_TANH: case GOPT_NN_OP_TANH: case GOPT_NN_OP_SIGMOID: case GOPT_NN_OP_EXP:
    case GOPT_NN_OP_LOG: case GOPT_NN_OP_SOFTPLUS: case GOPT_NN_OP_CLAMP: case GOPT_NN_OP_RESHAPE: {
      float *gx = G(x);
      if (!gx) break;
      const float *X = x->data, *Y = t->data, *fp = t->fp;
      int op = t->op;
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t i = 0; i < t->n; i++) gx[i] += g[i] * unary_df(op, X[i], Y[i], fp);
      break;
    }
    case GOPT_NN_OP_DROPOUT: {
      float *gx = G(x);
      const uint8_t *mask = t->saved;
      if (!gx) break;
      float s = t->fp[0];
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t i = 0; i < t->n; i++) gx[i] += mask[i] ? g[i] * s : 0.0f;
      break;
    }
    case GOPT_NN_OP_SOFTMAX: case GOPT_NN_OP_LOG_SOFTMAX: {
      float *gx = G(x);
      if (!gx) break;
      int64_t D = t->shape[t->ndim - 1], R = D ? t->n / D : 0;
      int logm = t->op == GOPT_NN_OP_LOG_SOFTMAX;
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t r = 0; r < R; r++) {
        const float *y = t->data + r * D, *dy = g + r * D;
        float s = 0.0f;
        if (logm) {
          for (int64_t j = 0; j < D; j++) s += dy[j];
          for (int64_t j = 0; j < D; j++) gx[r * D + j] += dy[j] - expf(y[j]) * s;
        } else {
          for (int64_t j = 0; j < D; j++) s += dy[j] * y[j];
          for (int64_t j = 0; j < D; j++) gx[r * D + j] += y[j] * (dy[j] - s);
        }
      }
      break;
    }
    case GOPT_NN_OP_LAYERNORM:
      return backward_layernorm(t);
    case GOPT_NN_OP_L2NORM: {
      float *gx = G(x);
      if (!gx) break;
      int64_t D = t->shape[t->ndim - 1], R = D ? t->n / D : 0;
      const float *nrm = t->saved;
      float eps = t->fp[0];
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t r = 0; r < R; r++) {
        const float *y = t->data + r * D, *dy = g + r * D;
        if (nrm[r] > eps) {
          float s = 0.0f;
          for (int64_t j = 0; j < D; j++) s += dy[j] * y[j];
          for (int64_t j = 0; j < D; j++) gx[r * D + j] += (dy[j] - y[j] * s) / nrm[r];
        } else {
          for (int64_t j = 0; j < D; j++) gx[r * D + j] += dy[j] / eps;
        }
      }
      break;
    }
    case GOPT_NN_OP_CONCAT: {
      gopt_nn_tensor *b = t->src[1];
      int axis = (int)t->ip[0];
      int64_t outer = 1, inner = 1;
      for (int i = 0; i < axis; i++) outer *= x->shape[i];
      for (int i = axis + 1; i < x->ndim; i++) inner *= x->shape[i];
      int64_t ca = x->shape[axis] * inner, cb = b->shape[axis] * inner;
      float *ga = G(x), *gb = G(b);
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t o = 0; o < outer; o++) {
        if (ga) for (int64_t j = 0; j < ca; j++) ga[o * ca + j] += g[o * (ca + cb) + j];
        if (gb) for (int64_t j = 0; j < cb; j++) gb[o * cb + j] += g[o * (ca + cb) + ca + j];
      }
      break;
    }
    case GOPT_NN_OP_SLICE: {
      float *gx = G(x);
      if (!gx) break;
      int axis = (int)t->ip[0];
      int64_t start = t->ip[1], outer = 1, inner = 1;
      for (int i = 0; i < axis; i++) outer *= x->shape[i];
      for (int i = axis + 1; i < x->ndim; i++) inner *= x->shape[i];
      int64_t cx = x->shape[axis] * inner, cy = t->shape[axis] * inner;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < cy; j++) gx[o * cx + start * inner + j] += g[o * cy + j];
      break;
    }
    case GOPT_NN_OP_SUM: case GOPT_NN_OP_MEAN: {
      float *gx = G(x);
      if (!gx) break;
      float v = t->op == GOPT_NN_OP_MEAN ? (x->n ? g[0] / (float)x->n : 0.0f) : g[0];
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
      for (int64_t i = 0; i < x->n; i++) gx[i] += v;
      break;
    }
    case GOPT_NN_OP_SUM_LAST: {
      float *gx = G(x);
      if (!gx) break;
      int64_t D = x->shape[x->ndim - 1];
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
      for (int64_t r = 0; r < t->n; r++)
        for (int64_t j = 0; j < D; j++) gx[r * D + j] += g[r];
      break;
    }
    case GOPT_NN_OP_GATHER_ROWS: {
      float *gx = G(x);
      if (!gx) break;
      int64_t N = x->shape[0], m = t->ip[0], D = N ? x->n / N : 0;
      int32_t *ptr, *pos;
      if (nn_invert_index(ctx, t->idx, m, N, &ptr, &pos)) return GOPT_ENOMEM;
#pragma omp parallel for num_threads(nt) schedule(static) if (t->n > NN_PAR_MIN)
      for (int64_t j = 0; j < N; j++)
        for (int32_t e = ptr[j]; e < ptr[j + 1]; e++)
          for (int64_t d = 0; d < D; d++) gx[j * D + d] += g[(int64_t)pos[e] * D + d];
      break;
    }
    case GOPT_NN_OP_SCATTER_ADD: {
      float *gx = G(x);
      if (!gx) break;
      int64_t M = x->shape[0], D = M ? x->n / M : 0;
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN)
      for (int64_t i = 0; i < M; i++)
        for (int64_t d = 0; d < D; d++) gx[i * D + d] += g[(int64_t)t->idx[i] * D + d];
      break;
    }
    case GOPT_NN_OP_PICK: {
      float *gx = G(x);
      if (!gx) break;
      int64_t C = x->shape[1];
      for (int64_t i = 0; i < t->n; i++) gx[i * C + t->idx[i]] += g[i];
      break;
    }
    case GOPT_NN_OP_SEG_SUM: case GOPT_NN_OP_SEG_MEAN: case GOPT_NN_OP_SEG_MAX: {
      float *gx = G(x);
      if (!gx) break;
      const gopt_nn_csr *c = t->aux;
      int64_t D = x->shape[1];
      int op = t->op;
      const int32_t *arg = t->saved;
#pragma omp parallel for num_threads(nt) schedule(static) if (x->n > NN_PAR_MIN / 4)
      for (int64_t j = 0; j < c->n_src; j++) {
        float *gj = gx + j * D;
        for (int32_t e = c->t_ptr[j]; e < c->t_ptr[j + 1]; e++) {
          int64_t i = c->t_row[e];
          const float *gi = g + i * D;
          if (op == GOPT_NN_OP_SEG_MAX) {
            if (e > c->t_ptr[j] && c->t_row[e - 1] == i) continue;  /* duplicate edge */
            for (int64_t d = 0; d < D; d++)
              if (arg[i * D + d] == j) gj[d] += gi[d];
          } else {
            float w = op == GOPT_NN_OP_SEG_MEAN ? c->inv_deg[i] : 1.0f;
            for (int64_t d = 0; d < D; d++) gj[d] += gi[d] * w;
          }
        }
      }
      break;
    }
    case GOPT_NN_OP_ATTENTION:
      nn_attention_backward(t);
      break;
    case GOPT_NN_OP_BETA_LOGPROB: {
      gopt_nn_tensor *a = t->src[0], *b = t->src[1], *v = t->src[2];
      float *ga = G(a), *gb = G(b), *gv = G(v);
      for (int64_t i = 0; i < t->n; i++) {
        double A = a->data[i], B = b->data[i], X = v->data[i], pab = gopt_nn_digamma(A + B);
        if (ga) ga[i] += (float)(g[i] * (log(X) - gopt_nn_digamma(A) + pab));
        if (gb) gb[i] += (float)(g[i] * (log1p(-X) - gopt_nn_digamma(B) + pab));
        if (gv) gv[i] += (float)(g[i] * ((A - 1) / X - (B - 1) / (1 - X)));
      }
      break;
    }
    case GOPT_NN_OP_BETA_ENTROPY: {
      gopt_nn_tensor *a = t->src[0], *b = t->src[1];
      float *ga = G(a), *gb = G(b);
      for (int64_t i = 0; i < t->n; i++) {
        double A = a->data[i], B = b->data[i], tab = (A + B - 2) * gopt_nn_trigamma(A + B);
        if (ga) ga[i] += (float)(g[i] * (-(A - 1) * gopt_nn_trigamma(A) + tab));
        if (gb) gb[i] += (float)(g[i] * (-(B - 1) * gopt_nn_trigamma(B) + tab));
      }
      break;
    }
    default:
      return GOPT_EUNSUP;
  }
  return 0;
}

int gopt_nn_backward(gopt_nn_ctx *ctx, gopt_nn_tensor *loss, gopt_error *err) {
  if (!ctx || !loss) return nn_err(err, GOPT_EINVAL, "nn_backward: NULL ctx or loss");
  if (ctx->err.code) {
    if (err) *err = ctx->err;
    return ctx->err.code;
  }
  if (loss->n != 1) return nn_err(err, GOPT_ESHAPE, "nn_backward: loss has %lld elements, want 1", (long long)loss->n);
  int64_t end = ctx->n_tape - 1;
  while (end >= 0 && ctx->tape[end] != loss) end--;
  if (end < 0) return nn_err(err, GOPT_EINVAL, "nn_backward: loss is not a tensor of this ctx pass");
  if (!loss->requires_grad) return 0;  /* nothing to differentiate */
  for (int64_t i = 0; i <= end; i++) {
    gopt_nn_tensor *t = ctx->tape[i];
    if (!t->requires_grad) continue;
    if (t->grad) {  /* second backward over the same pass: start this pass's gradients afresh */
      memset(t->grad, 0, (size_t)t->n * sizeof(float));
    } else {
      t->grad = nn_calloc(ctx, (size_t)(t->n ? t->n : 1) * sizeof(float));
      if (!t->grad) return nn_err(err, GOPT_ENOMEM, "nn_backward: out of memory for gradients");
    }
  }
  loss->grad[0] += 1.0f;
  for (int64_t i = end; i >= 0; i--) {
    gopt_nn_tensor *t = ctx->tape[i];
    if (!t->requires_grad || t->op == GOPT_NN_OP_LEAF) continue;
    int rc = backward_op(ctx, t);
    if (rc) return nn_err(err, rc, "nn_backward: op %d failed (%s)", t->op,
                          rc == GOPT_ENOMEM ? "out of memory" : "unsupported");
  }
  return 0;
}
