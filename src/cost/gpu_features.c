/* gpu_features.c: per-node features of the measured-GPU cost model (gopt/gpu_cost.h): which GPU
 * kernel kind a node is, and its kernel count, FLOPs, wave K-steps and bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/gpu_cost.h"
#include "gopt/ops.h"

static const char *const kind_names[GOPT_GK_COUNT] = {
    "conv", "conv_grouped", "conv_dw", "gemm", "bmm", "eltwise", "norm", "pool", "move", "rnn",
    "conv_bwd", "conv_grouped_bwd", "conv_dw_bwd", "update", "conv_epilogue", "conv_epilogue_bwd"};
static const char *const feat_names[GOPT_GF_PER_KIND] = {"n", "flops", "waves", "bytes", "flops_alt"};

const char *gopt_gpu_kind_name(int k) { return k >= 0 && k < GOPT_GK_COUNT ? kind_names[k] : ""; }
const char *gopt_gpu_feature_name(int f) {
  return f >= 0 && f < GOPT_GF_PER_KIND ? feat_names[f] : "";
}

int gopt_gpu_coef_index(const char *name) {
  const char *dot = name ? strrchr(name, '.') : NULL;
  if (!dot) return -1;
  for (int k = 0; k < GOPT_GK_COUNT; k++)
    if (strlen(kind_names[k]) == (size_t)(dot - name) && !strncmp(name, kind_names[k], (size_t)(dot - name)))
      for (int f = 0; f < GOPT_GF_PER_KIND; f++)
        if (!strcmp(dot + 1, feat_names[f])) return k * GOPT_GF_PER_KIND + f;
  return -1;
}

double gopt_gpu_time(const double *coef, const double *phi) {
  double t = 0;
  for (int j = 0; j < GOPT_GPU_NCOEF; j++) t += coef[j] * phi[j];
  return t;
}

/* Whether kind k runs on tensor cores in half precision (depthwise convolutions do not: one
 * input channel per output channel is no matrix product). */
static int tensor_core_kind(int k) {
  return k == GOPT_GK_CONV || k == GOPT_GK_CONV_GROUPED || k == GOPT_GK_GEMM || k == GOPT_GK_BMM ||
         k == GOPT_GK_RNN || k == GOPT_GK_CONV_BWD || k == GOPT_GK_CONV_GROUPED_BWD;
}

double gopt_gpu_time_half(const double *coef, const double *phi, double speedup) {
  double t = 0, s = speedup > 0 ? speedup : 1;
  for (int j = 0; j < GOPT_GPU_NCOEF; j++) {
    int f = j % GOPT_GF_PER_KIND;
    int compute = f == GOPT_GF_FLOPS || f == GOPT_GF_WAVES || f == GOPT_GF_FLOPS_ALT;
    t += coef[j] * phi[j] / (compute && tensor_core_kind(j / GOPT_GF_PER_KIND) ? s : 1);
  }
  return t;
}

void gopt_gpu_scale(const double *from_coef, double from_peak, double from_bw, double from_launch,
                    double to_peak, double to_bw, double to_launch, double *to_coef) {
  for (int j = 0; j < GOPT_GPU_NCOEF; j++) {
    int f = j % GOPT_GF_PER_KIND;
    double r = f == GOPT_GF_N ? to_launch / from_launch
               : f == GOPT_GF_BYTES ? from_bw / to_bw : from_peak / to_peak;
    to_coef[j] = from_coef[j] * r;
  }
}

uint8_t *gopt_gpu_dynamic_tensors(const gopt_graph *g) {
  uint8_t *dyn = calloc(g->tensors.n ? g->tensors.n : 1, 1);
  int32_t *order = malloc((g->nodes.n ? g->nodes.n : 1) * sizeof *order);
  gopt_error err = {0};
  int64_t cnt = order ? gopt_graph_topo(g, order, &err) : -1;
  if (!dyn || !order || cnt < 0) {
    free(order);
    free(dyn);
    return NULL;
  }
  for (size_t i = 0; i < g->inputs.n; i++) dyn[g->inputs.a[i]] = 1;
  for (int64_t i = 0; i < cnt; i++) {
    int32_t n = order[i];
    const gopt_node *nd = &g->nodes.a[n];
    int any = 0;
    for (int k = 0; k < nd->n_in && !any; k++) {
      int32_t t = gopt_node_input(g, n, k);
      any = t >= 0 && dyn[t];
    }
    /* a node with no inputs (RandomNormal...) or a training op counts as dynamic */
    if (!nd->n_in || (nd->flags & (GOPT_N_GRAD | GOPT_N_UPDATE))) any = 1;
    for (int k = 0; k < nd->n_out; k++) dyn[gopt_node_output(g, n, k)] = (uint8_t)any;
  }
  free(order);
  return dyn;
}

static double dimv(const gopt_graph *g, int32_t t, int k) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 1;
  int r = g->tensors.a[t].rank;
  if (k < 0) k += r;
  if (k < 0 || k >= r) return 1;
  int64_t d = gopt_tensor_dims(g, t)[k];
  return d < 0 ? 1 : (double)d;
}

static double numel(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  double p = 1;
  for (int k = 0; k < g->tensors.a[t].rank; k++) p *= dimv(g, t, k);
  return p;
}

/* Wave K-steps of a GEMM-shaped kernel: batch * ceil(M/T) * ceil(N/T) output tiles spread over
 * the SMs in waves, each wave marching over K. */
static double waves(double batch, double m, double n, double k) {
  double tiles = batch * ceil(m / GOPT_GPU_TILE) * ceil(n / GOPT_GPU_TILE);
  return ceil(tiles / GOPT_GPU_SMS) * k;
}

/* Whether convolution-like node n with weight w is 2-D 3x3, stride 1, dilation 1. */
static int winograd(const gopt_graph *g, int32_t n, int32_t w) {
  size_t ns = 0, nd = 0;
  const int64_t *s = gopt_node_get_ints(g, n, "strides", &ns);
  const int64_t *d = gopt_node_get_ints(g, n, "dilations", &nd);
  if (g->tensors.a[w].rank != 4 || dimv(g, w, 2) != 3 || dimv(g, w, 3) != 3) return 0;
  for (size_t i = 0; s && i < ns; i++)
    if (s[i] != 1) return 0;
  for (size_t i = 0; d && i < nd; i++)
    if (d[i] != 1) return 0;
  return 1;
}

/* Convolution-like node: kind by group structure; GEMM view M x N x K per group. dir 0 forward
 * (x = in 0, w = in 1, y = out 0), 1 ConvGradInput (dY, W -> dX), 2 ConvGradWeight (dY, X -> dW). */
static int conv_kind(const gopt_graph *g, int32_t n, int dir, double *wv, int *w3) {
  int32_t i0 = gopt_node_input(g, n, 0), i1 = g->nodes.a[n].n_in > 1 ? gopt_node_input(g, n, 1) : -1;
  int32_t o = gopt_node_output(g, n, 0);
  double grp = (double)gopt_node_get_int(g, n, "group", 1);
  if (grp < 1) grp = 1;
  int32_t x = dir == 0 ? i0 : dir == 1 ? o : i1, y = dir == 0 ? o : i0;
  int32_t w = dir == 2 ? o : i1;
  double cin = dimv(g, x, 1), cout = dimv(g, y, 1), ksz = 1, osp = 1, isp = 1;
  int r = g->tensors.a[w].rank;
  for (int k = 2; k < r; k++) ksz *= dimv(g, w, k);
  for (int k = 2; k < g->tensors.a[y].rank; k++) osp *= dimv(g, y, k);
  for (int k = 2; k < g->tensors.a[x].rank; k++) isp *= dimv(g, x, k);
  double nb = dimv(g, x, 0);
  if (dir == 0) *wv = waves(grp, nb * osp, cout / grp, cin / grp * ksz);
  else if (dir == 1) *wv = waves(grp, nb * isp, cin / grp, cout / grp * ksz);
  else *wv = waves(grp, cout / grp, cin / grp * ksz, nb * osp);
  int dw = grp > 1 && grp >= cin && cin / grp <= 1;
  int kind = grp <= 1 ? GOPT_GK_CONV : dw ? GOPT_GK_CONV_DW : GOPT_GK_CONV_GROUPED;
  *w3 = kind == GOPT_GK_CONV && winograd(g, n, w);
  if (dir) kind += GOPT_GK_CONV_BWD - GOPT_GK_CONV;
  return kind;
}

/* MatMul / Gemm: a GEMM when one operand is a 2-D weight-like tensor or both are 2-D, a batched
 * matmul (kind bmm) when both operands carry batch dims. */
static int matmul_kind(const gopt_graph *g, int32_t n, double *wv, int *alt) {
  int32_t a = gopt_node_input(g, n, 0), b = gopt_node_input(g, n, 1), y = gopt_node_output(g, n, 0);
  int ra = g->tensors.a[a].rank, rb = g->tensors.a[b].rank;
  double ny = numel(g, y);
  if (g->nodes.a[n].op == GOPT_OP_GEMM) {
    int ta = (int)gopt_node_get_int(g, n, "transA", 0);
    double m = dimv(g, y, 0), nn = dimv(g, y, 1), k = dimv(g, a, ta ? 0 : 1);
    *wv = waves(1, m, nn, k);
    *alt = !ta && gopt_node_get_int(g, n, "transB", 0);
    return GOPT_GK_GEMM;
  }
  double k = dimv(g, a, -1), nn = dimv(g, y, -1);
  double m = ny / (nn > 0 ? nn : 1);
  if (rb <= 2 || ra <= 2) { /* weights shared over the batch: one flat GEMM */
    *wv = waves(1, m, nn, k);
    return GOPT_GK_GEMM;
  }
  double rows = dimv(g, y, -2), batch = m / (rows > 0 ? rows : 1);
  *wv = waves(batch, rows, nn, k);
  return GOPT_GK_BMM;
}

/* Kind of a non-convolution, non-matmul node by op. */
static int simple_kind(int op, int cls) {
  switch (op) {
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX: case GOPT_OP_LAYER_NORM:
    case GOPT_OP_INSTANCE_NORM: case GOPT_OP_BATCH_NORM: case GOPT_OP_SOFTMAX_GRAD:
    case GOPT_OP_LOG_SOFTMAX_GRAD: case GOPT_OP_LAYER_NORM_GRAD: case GOPT_OP_BATCH_NORM_GRAD:
      return GOPT_GK_NORM;
    case GOPT_OP_MAX_POOL: case GOPT_OP_AVERAGE_POOL: case GOPT_OP_GLOBAL_AVG_POOL:
    case GOPT_OP_GLOBAL_MAX_POOL: case GOPT_OP_MAX_POOL_GRAD: case GOPT_OP_AVERAGE_POOL_GRAD:
    case GOPT_OP_GLOBAL_AVG_POOL_GRAD:
      return GOPT_GK_POOL;
    case GOPT_OP_SGD_UPDATE: case GOPT_OP_MOMENTUM_UPDATE: case GOPT_OP_ADAM_UPDATE:
      /* a (multi-tensor) elementwise kernel streaming parameters, gradients and state: costed
       * as the measured elementwise kernels are, with no coefficient of its own (the update has
       * no row of its own in the measurements, only the training totals) */
      return GOPT_GK_ELTWISE;
    default:
      break;
  }
  if (cls == GOPT_OPC_ELEMWISE || cls == GOPT_OPC_BROADCAST) return GOPT_GK_ELTWISE;
  if (cls == GOPT_OPC_REDUCE) return GOPT_GK_NORM;
  return GOPT_GK_MOVE;
}

/* Per-channel reduction of an NC... tensor x, one block per channel: reduction length (N x
 * spatial) times ceil(C / SMs). */
static double channel_reduce(const gopt_graph *g, int32_t x) {
  if (x < 0) return 0;
  double c = dimv(g, x, 1), len = numel(g, x) / (c > 0 ? c : 1);
  return len * ceil(c / GOPT_GPU_SMS);
}

/* Recurrent op (LSTM / GRU / RNN, or their Grad ops): time steps (sequence x directions). */
static double rnn_steps(const gopt_graph *g, int32_t n, int32_t x) {
  int layout = (int)gopt_node_get_int(g, n, "layout", 0);
  const char *dir = gopt_node_get_string(g, n, "direction", "forward");
  double dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  return dimv(g, x, layout ? 1 : 0) * dirs;
}

/* Whether ReduceSum node n reduces every axis of its input but axis 1 (NC.. -> C: a convolution
 * bias's gradient), reading its axes from the attribute or the constant input 1. */
static int reduces_to_channels(const gopt_graph *g, int32_t n, int32_t x) {
  int r = g->tensors.a[x].rank;
  int64_t ax[GOPT_MAX_RANK];
  size_t na = 0;
  const int64_t *a = gopt_node_get_ints(g, n, "axes", &na);
  if (!a && g->nodes.a[n].n_in > 1) {
    int32_t t = gopt_node_input(g, n, 1);
    const void *p = t >= 0 ? gopt_tensor_data(g, t) : NULL;
    int64_t cnt = p ? gopt_tensor_numel(g, t) : 0;
    if (!p || cnt > GOPT_MAX_RANK || g->tensors.a[t].dtype != GOPT_DT_INT64) return 0;
    memcpy(ax, p, (size_t)cnt * sizeof *ax);
    na = (size_t)cnt;
  } else if (a) {
    if (na > GOPT_MAX_RANK) return 0;
    memcpy(ax, a, na * sizeof *ax);
  }
  if ((int)na != r - 1) return 0;
  for (size_t i = 0; i < na; i++)
    if ((ax[i] < 0 ? ax[i] + r : ax[i]) == 1) return 0;
  return 1;
}

/* Whether a GatherGrad scatters through indices that may repeat (an embedding's backward:
 * accumulation, its FLOP count at the scatter rate) rather than selecting with one scalar index
 * (qkv[0]: its gradient is a copy into zeros, bandwidth only). */
static int gather_grad_scatters(const gopt_graph *g, int32_t n) {
  int32_t idx = g->nodes.a[n].n_in > 1 ? gopt_node_input(g, n, 1) : -1;
  return idx < 0 || numel(g, idx) > 1;
}

int gopt_gpu_node_features(const gopt_graph *g, int32_t n, const uint8_t *dyn, double *phi) {
  const gopt_node *nd = &g->nodes.a[n];
  int op = nd->op, cls = gopt_op_class_of(op);
  if (!gopt_node_alive(g, n) || cls == GOPT_OPC_SHAPE || op == GOPT_OP_IDENTITY ||
      op == GOPT_OP_DROPOUT)
    return -1;
  if (dyn) {
    int any = !nd->n_in;
    for (int k = 0; k < nd->n_in && !any; k++) {
      int32_t t = gopt_node_input(g, n, k);
      any = t >= 0 && dyn[t];
    }
    if (!any) return -1;
  }
  gopt_cost c;
  gopt_node_cost(g, n, &c);
  double wv = 0;
  int kind, w3 = 0;
  /* the GEMM/conv views read inputs 0 and 1 and output 0: an empty optional name (-1) there
   * leaves the node to its class's kind */
  int io2 = nd->n_in >= 2 && nd->n_out >= 1 && gopt_node_input(g, n, 0) >= 0 &&
            gopt_node_input(g, n, 1) >= 0 && gopt_node_output(g, n, 0) >= 0;
  if (!io2) kind = simple_kind(op, cls);
  else if (op == GOPT_OP_CONV) kind = conv_kind(g, n, 0, &wv, &w3);
  else if (op == GOPT_OP_CONV_GRAD_INPUT) kind = conv_kind(g, n, 1, &wv, &w3);
  else if (op == GOPT_OP_CONV_GRAD_WEIGHT) kind = conv_kind(g, n, 2, &wv, &w3);
  else if (op == GOPT_OP_MATMUL || op == GOPT_OP_GEMM) kind = matmul_kind(g, n, &wv, &w3);
  else if (op == GOPT_OP_LSTM || op == GOPT_OP_GRU || op == GOPT_OP_RNN) {
    kind = GOPT_GK_RNN;
    wv = rnn_steps(g, n, gopt_node_input(g, n, 0));
  } else if (op == GOPT_OP_LSTM_GRAD || op == GOPT_OP_GRU_GRAD || op == GOPT_OP_RNN_GRAD) { /* one more sequential sweep, with its own FLOPs */
    kind = GOPT_GK_RNN;
    wv = rnn_steps(g, n, gopt_node_input(g, n, 0));
  } else {
    kind = simple_kind(op, cls);
    if (op == GOPT_OP_BATCH_NORM_GRAD) wv = channel_reduce(g, gopt_node_input(g, n, 1));
  }
  double *p = phi + kind * GOPT_GF_PER_KIND;
  p[GOPT_GF_N] += 1;
  /* data movement is bandwidth-bound; its FLOP term is the scatter-accumulate of an embedding's
   * backward only (Resize's interpolation arithmetic, a select's gradient cost bytes) */
  if (kind != GOPT_GK_MOVE || (op == GOPT_OP_GATHER_GRAD && gather_grad_scatters(g, n)))
    p[w3 ? GOPT_GF_FLOPS_ALT : GOPT_GF_FLOPS] += c.flops;
  p[GOPT_GF_WAVES] += wv;
  p[GOPT_GF_BYTES] += c.bytes_read + c.bytes_written;
  if (op == GOPT_OP_CONV && nd->n_in >= 3 && gopt_node_input(g, n, 2) >= 0) {
    /* a convolution with a bias: the frameworks' cuDNN path runs the bias add (or, where an
     * export folded a BatchNorm into this bias, the BatchNorm) as one more pass over the output */
    double *e = phi + GOPT_GK_CONV_EPILOGUE * GOPT_GF_PER_KIND;
    e[GOPT_GF_N] += 1;
    e[GOPT_GF_BYTES] += 2 * c.bytes_written;
  }
  if (op == GOPT_OP_REDUCE_SUM && (nd->flags & GOPT_N_GRAD) && nd->n_out == 1 && nd->n_in >= 1 &&
      gopt_node_output(g, n, 0) >= 0 && gopt_node_input(g, n, 0) >= 0 &&
      g->tensors.a[gopt_node_output(g, n, 0)].rank == 1 && g->tensors.a[gopt_node_input(g, n, 0)].rank >= 3 &&
      reduces_to_channels(g, n, gopt_node_input(g, n, 0))) {
    /* the gradient of a convolution's bias (NC.. -> C): its epilogue's backward (a folded
     * BatchNorm's backward in the framework's step) */
    double *e = phi + GOPT_GK_CONV_EPILOGUE_BWD * GOPT_GF_PER_KIND;
    e[GOPT_GF_N] += 1;
    e[GOPT_GF_BYTES] += 3 * c.bytes_read;
  }
  return kind;
}
