/* k_misc.c: reductions (ReduceMean/Sum/Max/Min/Prod/L2/SumSquare), global pooling, and the ONNX
 * LSTM (all gates at once: the input projection for every step in one product, the recurrent one
 * per step, against weights transposed once at plan time; gate order i, o, f, c as ONNX defines
 * it). A reduction over contiguous
 * axes, the LSTM's small products and its cell's gate math run the vector loops of k_vec.inc for the executor's
 * instruction set. */
#include <cblas.h>
#undef I /* complex.h (through cblas.h) defines I */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_vec.h"

int ex_misc_handles(int op) {
  switch (op) {
    case GOPT_OP_REDUCE_MEAN: case GOPT_OP_REDUCE_SUM: case GOPT_OP_REDUCE_MAX:
    case GOPT_OP_REDUCE_MIN: case GOPT_OP_REDUCE_PROD: case GOPT_OP_REDUCE_L2:
    case GOPT_OP_REDUCE_SUM_SQUARE: case GOPT_OP_GLOBAL_AVG_POOL: case GOPT_OP_GLOBAL_MAX_POOL:
    case GOPT_OP_LSTM:
      return 1;
    default: return 0;
  }
}

/* ---- reductions ------------------------------------------------------------------------------------ */

typedef struct red_st {
  int op;
  int contiguous;         /* reduced axes form one block: [outer, red, inner] */
  int64_t outer, red, inner;
  int rank;
  int64_t dims[GOPT_MAX_RANK];
  uint8_t reduced[GOPT_MAX_RANK];
} red_st;

static int reduce_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  red_st *s = k->st;
  (void)err;
  const float *in = ex_data(x, k->in[0]);
  float *out = ex_data(x, k->out[0]);
  if (s->contiguous) {
    ex_vec_ops_for(x->isa)->reduce(out, in, s->op, s->outer, s->red, s->inner);
    return GOPT_OK;
  }
  /* general: scatter every input element onto its output */
  int64_t on = ex_numel(x, k->out[0]), n = ex_numel(x, k->in[0]), cnt = n / (on ? on : 1);
  for (int64_t i = 0; i < on; i++) out[i] = ex_red_init(s->op);
  int64_t ost[GOPT_MAX_RANK], a = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    ost[i] = s->reduced[i] ? 0 : a;
    if (!s->reduced[i]) a *= s->dims[i];
  }
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, o = 0;
    for (int i = s->rank - 1; i >= 0; i--) {
      o += (rem % s->dims[i]) * ost[i];
      rem /= s->dims[i];
    }
    out[o] = ex_red_step(s->op, out[o], in[e]);
  }
  for (int64_t i = 0; i < on; i++) out[i] = ex_red_final(s->op, out[i], cnt);
  return GOPT_OK;
}

static int prep_reduce(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t in = k->in[0];
  if (ex_dtype(x, in) != GOPT_DT_FLOAT)
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "reductions run on FLOAT only");
  red_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = free;
  k->run = reduce_run;
  s->op = g->nodes.a[k->node].op;
  int r = ex_rank(x, in);
  s->rank = r;
  if (r) memcpy(s->dims, ex_dims(x, in), (size_t)r * sizeof(int64_t));
  int64_t axes[GOPT_MAX_RANK];
  size_t na = 0;
  if (s->op == GOPT_OP_GLOBAL_AVG_POOL || s->op == GOPT_OP_GLOBAL_MAX_POOL) {
    for (int i = 2; i < r; i++) axes[na++] = i;
  } else if (k->n_in >= 2 && k->in[1] >= 0) {
    if (!ex_is_const(x, k->in[1]) || ex_read_ints(x, k->in[1], axes, GOPT_MAX_RANK, &na))
      return ex_node_error(x, k->node, err, GOPT_EUNSUP, "axes must be a constant");
  } else {
    size_t c = 0;
    const int64_t *a = gopt_node_get_ints(g, k->node, "axes", &c);
    for (na = 0; a && na < c && na < GOPT_MAX_RANK; na++) axes[na] = a[na];
  }
  if (na == 0 && !gopt_node_get_int(g, k->node, "noop_with_empty_axes", 0))
    for (int i = 0; i < r; i++) axes[na++] = i;
  for (size_t i = 0; i < na; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a < 0 || a >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
    s->reduced[a] = 1;
  }
  int lo = -1, hi = -1;
  for (int i = 0; i < r; i++)
    if (s->reduced[i]) {
      if (lo < 0) lo = i;
      hi = i;
    }
  s->contiguous = 1;
  for (int i = lo; lo >= 0 && i <= hi; i++)
    if (!s->reduced[i]) s->contiguous = 0;
  s->outer = s->red = s->inner = 1;
  for (int i = 0; i < r; i++) {
    if (lo < 0 || i < lo) s->outer *= s->dims[i];
    else if (i <= hi) s->red *= s->dims[i];
    else s->inner *= s->dims[i];
  }
  if (ex_numel(x, k->out[0]) * s->red != ex_numel(x, in) && s->contiguous)
    return ex_node_error(x, k->node, err, GOPT_ESHAPE, "output size does not match the reduction");
  return GOPT_OK;
}

/* ---- LSTM ------------------------------------------------------------------------------------------- */

typedef struct lstm_st {
  int64_t T, B, I, H;
  int dirs, reverse, layout;
  ex_lstm_cell_fn cell;  /* the ISA's gate math (k_vec.inc) */
  ex_gemm_acc_fn gemm;   /* the ISA's small matrix product (k_vec.inc) */
  int packed;            /* wt/rt hold the constant W, R transposed (at plan time) */
  float *wt, *rt;        /* [dirs, I, 4H], [dirs, H, 4H]: W and R transposed */
  float *xw;             /* [T*B, 4H] scratch: input projection plus biases, then the gates */
  float *h, *c;          /* [B, H] */
} lstm_st;

static void lstm_free(void *p) {
  lstm_st *s = p;
  if (!s) return;
  free(s->wt);
  free(s->rt);
  free(s->xw);
  free(s->h);
  free(s->c);
  free(s);
}

/* dst [D, K, N] = src [D, N, K] transposed per direction. */
static void lstm_transpose(float *dst, const float *src, int64_t D, int64_t N, int64_t K) {
  for (int64_t d = 0; d < D; d++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) dst[(d * K + k) * N + n] = src[(d * N + n) * K + k];
}

/* C [M, N] (row stride ldc) += A [M, K] B^T, B [N, K], Bt its transpose [K, N]. The ISA's own
 * product when the rows are few or Bt fits in L2 (OpenBLAS's packing dominates there, and on CPUs it
 * does not recognise it runs its SSE3 kernels), else OpenBLAS sgemm. */
static void lstm_gemm(const lstm_st *s, float *C, int64_t ldc, const float *A, const float *B, const float *Bt,
                      int64_t M, int64_t N, int64_t K) {
  if (M <= 4 || (size_t)(K * N) * sizeof(float) <= ((size_t)1 << 20)) {
    if (ldc == N) s->gemm(C, A, Bt, M, N, K);
    else
      for (int64_t m = 0; m < M; m++) s->gemm(C + m * ldc, A + m * K, Bt, 1, N, K);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K, B, (int)K, 1.0f,
              C, (int)ldc);
}

/* xw[r] = X[r] W^T + Bw + Br for the T*B rows of one direction (time-major rows t*B+b). */
static void lstm_project(const lstm_st *s, const float *X, const float *W, const float *Wt, const float *Bw,
                         const float *Br) {
  int64_t T = s->T, B = s->B, I = s->I, G = 4 * s->H;
  for (int64_t j = 0; j < G; j++) s->xw[j] = Bw ? Bw[j] + Br[j] : 0.0f;
  for (int64_t r = 1; r < T * B; r++) memcpy(s->xw + r * G, s->xw, (size_t)G * sizeof(float));
  if (s->layout == 0) lstm_gemm(s, s->xw, G, X, W, Wt, T * B, G, I);
  else
    for (int64_t b = 0; b < B; b++) lstm_gemm(s, s->xw + b * G, B * G, X + b * T * I, W, Wt, T, G, I);
}

/* lstm_forward for one direction d: X [T,B,I] (or [B,T,I] with layout 1), W [4H,I], R [4H,H],
 * Bias [8H] or NULL, P [3H] or NULL, h0/c0 [B,H] or NULL; writes Y (may be NULL), Yh, Yc.
 * The input part of every step's gates is one product over the whole sequence (biases folded
 * in); each step adds h R^T in place and runs the vectorised cell. */
static int lstm_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  lstm_st *s = k->st;
  (void)err;
  int64_t T = s->T, B = s->B, I = s->I, H = s->H, G = 4 * H;
  const float *X = ex_data(x, k->in[0]);
  const float *Wa = ex_data(x, k->in[1]), *Ra = ex_data(x, k->in[2]);
  const float *Ba = k->n_in > 3 && k->in[3] >= 0 ? ex_data(x, k->in[3]) : NULL;
  const float *h0 = k->n_in > 5 && k->in[5] >= 0 ? ex_data(x, k->in[5]) : NULL;
  const float *c0 = k->n_in > 6 && k->in[6] >= 0 ? ex_data(x, k->in[6]) : NULL;
  const float *Pa = k->n_in > 7 && k->in[7] >= 0 ? ex_data(x, k->in[7]) : NULL;
  float *Y = k->n_out > 0 && k->out[0] >= 0 ? ex_data(x, k->out[0]) : NULL;
  float *Yh = k->n_out > 1 && k->out[1] >= 0 ? ex_data(x, k->out[1]) : NULL;
  float *Yc = k->n_out > 2 && k->out[2] >= 0 ? ex_data(x, k->out[2]) : NULL;
  if (!s->packed) {
    lstm_transpose(s->wt, Wa, s->dirs, G, I);
    lstm_transpose(s->rt, Ra, s->dirs, G, H);
  }
  for (int d = 0; d < s->dirs; d++) {
    const float *W = Wa + (size_t)d * G * I, *R = Ra + (size_t)d * G * H;
    const float *Wt = s->wt + (size_t)d * G * I, *Rt = s->rt + (size_t)d * G * H;
    const float *Bw = Ba ? Ba + (size_t)d * 2 * G : NULL, *Br = Ba ? Bw + G : NULL;
    const float *P = Pa ? Pa + (size_t)d * 3 * H : NULL;
    int rev = s->reverse || (s->dirs == 2 && d == 1);
    lstm_project(s, X, W, Wt, Bw, Br);
    for (int64_t i = 0; i < B * H; i++) {
      s->h[i] = h0 ? h0[(size_t)d * B * H + i] : 0.0f;
      s->c[i] = c0 ? c0[(size_t)d * B * H + i] : 0.0f;
    }
    for (int64_t step = 0; step < T; step++) {
      int64_t t = rev ? T - 1 - step : step;
      float *gates = s->xw + (size_t)t * B * G;
      lstm_gemm(s, gates, G, s->h, R, Rt, B, G, H);
      s->cell(gates, s->c, s->h, P, B, H);
      if (Y)
        for (int64_t b = 0; b < B; b++) {
          float *y = s->layout == 0 ? Y + (((size_t)t * s->dirs + d) * B + b) * H
                                    : Y + (((size_t)b * T + t) * s->dirs + d) * H;
          memcpy(y, s->h + b * H, (size_t)H * sizeof(float));
        }
    }
    for (int64_t b = 0; b < B; b++) {
      size_t o = s->layout == 0 ? ((size_t)d * B + b) * H : ((size_t)b * s->dirs + d) * H;
      if (Yh) memcpy(Yh + o, s->h + b * H, (size_t)H * sizeof(float));
      if (Yc) memcpy(Yc + o, s->c + b * H, (size_t)H * sizeof(float));
    }
  }
  return GOPT_OK;
}

static int prep_lstm(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t n = k->node;
  if (k->n_in < 3) return ex_node_error(x, n, err, GOPT_EINVAL, "needs X, W, R");
  for (int i = 0; i < k->n_in; i++)
    if (k->in[i] >= 0 && i != 4 && ex_dtype(x, k->in[i]) != GOPT_DT_FLOAT)
      return ex_node_error(x, n, err, GOPT_EUNSUP, "LSTM runs on FLOAT only");
  if (gopt_node_attr(g, n, "clip") || gopt_node_get_int(g, n, "input_forget", 0))
    return ex_node_error(x, n, err, GOPT_EUNSUP, "clip and input_forget are not supported");
  size_t na = 0;
  const gopt_attr *acts = gopt_node_attr(g, n, "activations");
  if (acts && acts->kind == GOPT_ATTR_STRINGS) {
    na = acts->n;
    static const char *want[] = {"Sigmoid", "Tanh", "Tanh"};
    for (size_t i = 0; i < na; i++)
      if (strcmp(gopt_graph_str(g, g->strids.a[acts->v.off + i]), want[i % 3]))
        return ex_node_error(x, n, err, GOPT_EUNSUP, "only the default activations are supported");
  }
  lstm_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = lstm_free;
  k->run = lstm_run;
  s->cell = ex_vec_ops_for(x->isa)->lstm_cell;
  s->layout = (int)gopt_node_get_int(g, n, "layout", 0);
  const int64_t *xd = ex_dims(x, k->in[0]);
  if (ex_rank(x, k->in[0]) != 3) return ex_node_error(x, n, err, GOPT_ESHAPE, "X must be 3-D");
  s->T = s->layout ? xd[1] : xd[0];
  s->B = s->layout ? xd[0] : xd[1];
  s->I = xd[2];
  s->H = gopt_node_get_int(g, n, "hidden_size", ex_dims(x, k->in[2])[2]);
  const char *dir = gopt_node_get_string(g, n, "direction", "forward");
  s->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  s->reverse = !strcmp(dir, "reverse");
  const int64_t *wd = ex_dims(x, k->in[1]);
  if (ex_rank(x, k->in[1]) != 3 || wd[0] != s->dirs || wd[1] != 4 * s->H || wd[2] != s->I)
    return ex_node_error(x, n, err, GOPT_ESHAPE, "W shape does not match");
  if (k->n_in > 4 && k->in[4] >= 0) {
    int64_t v[1024];
    size_t c = 0;
    if (!ex_is_const(x, k->in[4]) || ex_read_ints(x, k->in[4], v, 1024, &c))
      return ex_node_error(x, n, err, GOPT_EUNSUP, "sequence_lens must be constant");
    for (size_t i = 0; i < c; i++)
      if (v[i] != s->T) return ex_node_error(x, n, err, GOPT_EUNSUP, "ragged sequence_lens");
  }
  size_t G = (size_t)(4 * s->H);
  s->gemm = ex_vec_ops_for(x->isa)->gemm_acc;
  s->wt = malloc((size_t)(s->dirs * s->I) * G * sizeof(float) + 64);
  s->rt = malloc((size_t)(s->dirs * s->H) * G * sizeof(float) + 64);
  s->xw = malloc((size_t)(s->T * s->B) * G * sizeof(float) + 64);
  s->h = malloc((size_t)(s->B * s->H) * sizeof(float) + 64);
  s->c = malloc((size_t)(s->B * s->H) * sizeof(float) + 64);
  if (!s->xw || !s->h || !s->c || !s->wt || !s->rt) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  const int64_t *rd = ex_dims(x, k->in[2]);
  if (ex_rank(x, k->in[2]) != 3 || rd[0] != s->dirs || rd[1] != 4 * s->H || rd[2] != s->H)
    return ex_node_error(x, n, err, GOPT_ESHAPE, "R shape does not match");
  if (ex_is_const(x, k->in[1]) && ex_is_const(x, k->in[2])) { /* transposed once, at plan time */
    lstm_transpose(s->wt, ex_data(x, k->in[1]), s->dirs, (int64_t)G, s->I);
    lstm_transpose(s->rt, ex_data(x, k->in[2]), s->dirs, (int64_t)G, s->H);
    s->packed = 1;
  }
  return GOPT_OK;
}

/* ---- BatchNormalization (inference) on a plain buffer ---------------------------------------------- */

/* X [N, C, ...] plain: y = x a[c] + b[c], a = scale / sqrt(var + eps), b = B - mean a (per run:
 * C values). oneDNN's only implementation for a plain NCHW source is a scalar C++ loop
 * (ncsp_bnorm), 5-10x slower than this one; densenet's BatchNorms after each Concat read plain
 * tensors. Blocked and NHWC sources stay with oneDNN (k_dnnl.c). With relu, max(y, 0) (the layout
 * pass's BatchNorm -> Relu chain). */
void ex_bn_affine(float *ab, int64_t C, const float *sc, const float *bi, const float *mu, const float *var,
                  float eps) {
  for (int64_t c = 0; c < C; c++) {
    ab[c] = sc[c] / sqrtf(var[c] + eps);
    ab[C + c] = bi[c] - mu[c] * ab[c];
  }
}

typedef struct bn_st {
  int relu;  /* a Relu after it runs here (exec_layout.c's BatchNorm -> Relu chain) */
  float *ab; /* [2C]: a, then b */
} bn_st;

static void bn_free(void *p) {
  bn_st *s = p;
  if (s) free(s->ab);
  free(s);
}

static int bn_plain_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  const int64_t *d = ex_dims(x, k->in[0]);
  int r = ex_rank(x, k->in[0]);
  int64_t N = d[0], C = d[1], inner = 1;
  for (int i = 2; i < r; i++) inner *= d[i];
  const float *X = ex_data(x, k->in[0]), *sc = ex_data(x, k->in[1]), *bi = ex_data(x, k->in[2]);
  const float *mu = ex_data(x, k->in[3]), *var = ex_data(x, k->in[4]);
  bn_st *st = k->st;
  float *Y = ex_data(x, k->out[0]), *ab = st->ab;
  int relu = st->relu;
  ex_bn_affine(ab, C, sc, bi, mu, var, (float)gopt_node_get_float(x->g, k->node, "epsilon", 1e-5));
#pragma omp parallel for schedule(static) if (N * C * inner > 32768)
  for (int64_t nc = 0; nc < N * C; nc++) {
    const float a = ab[nc % C], b = ab[C + nc % C];
    const float *restrict xs = X + nc * inner;
    float *restrict ys = Y + nc * inner;
    if (relu)
      for (int64_t i = 0; i < inner; i++) ys[i] = fmaxf(xs[i] * a + b, 0.0f);
    else
      for (int64_t i = 0; i < inner; i++) ys[i] = xs[i] * a + b;
  }
  return GOPT_OK;
}

int ex_prepare_bn_plain(gopt_exec *x, ex_kernel *k, int relu, gopt_error *err) {
  int r = ex_rank(x, k->in[0]);
  if (k->n_in < 5 || r < 2) return ex_node_error(x, k->node, err, GOPT_EINVAL, "needs 5 inputs and rank >= 2");
  int64_t C = ex_dims(x, k->in[0])[1];
  for (int i = 1; i < 5; i++)
    if (ex_numel(x, k->in[i]) != C)
      return ex_node_error(x, k->node, err, GOPT_ESHAPE, "input %d has %lld values, not C = %lld", i,
                           (long long)ex_numel(x, k->in[i]), (long long)C);
  bn_st *st = calloc(1, sizeof *st);
  if (!st) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = st;
  k->fini = bn_free;
  st->relu = relu;
  if (!(st->ab = malloc((size_t)(2 * C + 1) * sizeof(float)))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->run = bn_plain_run;
  return GOPT_OK;
}

int ex_prepare_misc(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int op = x->g->nodes.a[k->node].op;
  openblas_set_num_threads(x->threads); /* OpenBLAS has its own thread pool */
  if (op == GOPT_OP_LSTM) return prep_lstm(x, k, err);
  return prep_reduce(x, k, err);
}
