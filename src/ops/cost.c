/* cost.c: per-node cost facts (FLOPs, bytes read/written, parameter elements) and graph totals.
 * The conventions are documented in docs/OPS.md; symbolic dims count as 1. */
#include <string.h>

#include "gopt/ops.h"
#include "ops/ops_hlo.h"
#include "ops/ops_train.h"

static double numel(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  return (double)gopt_tensor_numel(g, t);
}


/* a + b for counts b >= 0, saturating at INT64_MAX (shapes from a file may be absurd) */
static int64_t sat_add(int64_t a, int64_t b) { return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b; }

static int32_t in_t(const gopt_graph *g, int32_t n, int i) {
  return i < g->nodes.a[n].n_in ? gopt_node_input(g, n, i) : -1;
}

static int32_t out_t(const gopt_graph *g, int32_t n, int i) {
  return i < g->nodes.a[n].n_out ? gopt_node_output(g, n, i) : -1;
}

/* Dim k of t as a count (symbols and unknown shapes count 1). */
static double dim(const gopt_graph *g, int32_t t, int k) {
  if (t < 0) return 1;
  const gopt_tensor *x = &g->tensors.a[t];
  if ((x->flags & GOPT_T_NOSHAPE) || k < 0 || k >= x->rank) return 1;
  int64_t d = gopt_tensor_dims(g, t)[k];
  return d < 0 ? 1 : (double)d;
}

static int rank(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return -1;
  return g->tensors.a[t].rank;
}

/* Product of the kernel's spatial dims (kernel_shape attribute, else the weight's dims 2..). */
static double kernel_elems(const gopt_graph *g, int32_t n, int32_t w) {
  size_t k = 0;
  const int64_t *ks = gopt_node_get_ints(g, n, "kernel_shape", &k);
  double p = 1;
  if (ks) {
    for (size_t i = 0; i < k; i++) p *= ks[i] > 0 ? (double)ks[i] : 1;
    return p;
  }
  for (int i = 2; i < rank(g, w); i++) p *= dim(g, w, i);
  return p;
}

/* Einsum FLOPs: 2 * product of every label's size (ellipsis dims included) for two or more
 * operands; one pass over the input for one operand. */
static double einsum_flops(const gopt_graph *g, int32_t n) {
  const char *eq = gopt_node_get_string(g, n, "equation", "");
  int n_in = g->nodes.a[n].n_in;
  if (n_in < 2) return numel(g, in_t(g, n, 0));
  double size[128] = {0}, ell = 1;
  int op = 0, pos = 0, seen_ell_len = 0;
  for (const char *q = eq; *q && op < n_in; q++) {
    int32_t t = in_t(g, n, op);
    if (*q == '-') break;
    if (*q == ',') { op++; pos = 0; continue; }
    if (*q == ' ') continue;
    if (*q == '.') {
      if (q[1] == '.' && q[2] == '.') {
        int letters = 0;
        for (const char *r = q + 3; *r && *r != ',' && *r != '-'; r++) letters += *r != ' ' && *r != '.';
        int ne = rank(g, t) - pos - letters;
        double e = 1;
        for (int i = 0; i < ne; i++) e *= dim(g, t, pos + i);
        if (ne > seen_ell_len || e > ell) { ell = e; seen_ell_len = ne; }
        pos += ne > 0 ? ne : 0;
        q += 2;
      }
      continue;
    }
    unsigned char l = (unsigned char)*q;
    double d = dim(g, t, pos++);
    if (l < 128 && d > size[l]) size[l] = d;
  }
  double p = 2 * ell;
  for (int l = 0; l < 128; l++)
    if (size[l] > 0) p *= size[l];
  return p;
}

/* Attention: the two matmuls (2 * B*Hq*Sq*St*(D + Dv)) and the softmax (5 per score); sizes from
 * Q (3-D [B, Sq, Hq*D] or 4-D) and the qk scores' key length St = Sp + Skv. */
static double attention_flops(const gopt_graph *g, int32_t n) {
  int32_t q = in_t(g, n, 0), k = in_t(g, n, 1), v = in_t(g, n, 2), pk = in_t(g, n, 4);
  int r3 = rank(g, q) == 3;
  double hq = r3 ? (double)gopt_node_get_int(g, n, "q_num_heads", 1) : dim(g, q, 1);
  double hkv = r3 ? (double)gopt_node_get_int(g, n, "kv_num_heads", 1) : dim(g, k, 1);
  double b = dim(g, q, 0), sq = dim(g, q, r3 ? 1 : 2), skv = dim(g, k, r3 ? 1 : 2);
  double d = r3 ? dim(g, q, 2) / (hq > 0 ? hq : 1) : dim(g, q, 3);
  double dv = r3 ? dim(g, v, 2) / (hkv > 0 ? hkv : 1) : dim(g, v, 3);
  double st = skv + (pk >= 0 ? dim(g, pk, 2) : 0);
  return b * hq * sq * st * (2 * (d + dv) + 5);
}

static int transcendental(int op) {
  switch (op) {
    case GOPT_OP_SIGMOID: case GOPT_OP_TANH: case GOPT_OP_EXP: case GOPT_OP_LOG: case GOPT_OP_ERF:
    case GOPT_OP_GELU: case GOPT_OP_SIN: case GOPT_OP_COS: case GOPT_OP_SOFTPLUS: case GOPT_OP_MISH:
    case GOPT_OP_POW: case GOPT_OP_ELU: case GOPT_OP_SELU: case GOPT_OP_CELU:
      return 1;
    default:
      return 0;
  }
}

void gopt_node_cost(const gopt_graph *g, int32_t n, gopt_cost *c) {
  memset(c, 0, sizeof *c);
  if (!g || n < 0 || (size_t)n >= g->nodes.n) return;
  if (ops_train_kind(g, n) > 0 && ops_train_cost(g, n, c) == 1) return;
  if (ops_hlo_cost(g, n, c)) return; /* "hlo::OPCODE" nodes: rules from the HLO attributes */
  memset(c, 0, sizeof *c);
  const gopt_node *nd = &g->nodes.a[n];
  int op = nd->op;
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_PARAM)) { /* saturates: shapes may be absurd */
      double p = (double)c->params + numel(g, t);
      c->params = p < 9.2e18 ? (int64_t)p : INT64_MAX;
    }
  }
  if (op < GOPT_OP_COUNT && gopt_op_class_of(op) == GOPT_OPC_SHAPE) return; /* metadata only */
  for (int i = 0; i < nd->n_in; i++) c->bytes_read += gopt_tensor_bytes(g, gopt_node_input(g, n, i));
  for (int i = 0; i < nd->n_out; i++) c->bytes_written += gopt_tensor_bytes(g, gopt_node_output(g, n, i));
  if (op == GOPT_OP_GATHER || op == GOPT_OP_GATHER_ND) {
    /* A lookup reads only the rows it gathers (as many bytes as it writes) and the indices,
     * not the whole table: an embedding of 50k x 768 read by 128 tokens costs 128 rows. */
    double table = gopt_tensor_bytes(g, gopt_node_input(g, n, 0));
    if (c->bytes_written < table) c->bytes_read += c->bytes_written - table;
  }
  if (nd->flags & GOPT_N_OPAQUE) return;

  int32_t x = in_t(g, n, 0), w = in_t(g, n, 1), y = out_t(g, n, 0);
  double ny = numel(g, y), nx = numel(g, x);
  switch (op) {
    case GOPT_OP_CONV:
      /* 2 * N*Cout*prod(out spatial) * (Cin/group) * prod(kernel), + one add per output for bias */
      c->flops = 2 * ny * dim(g, w, 1) * kernel_elems(g, n, w);
      if (in_t(g, n, 2) >= 0) c->flops += ny;
      break;
    case GOPT_OP_CONV_TRANSPOSE:
      /* every input element scatters into Cout/group * prod(kernel) outputs */
      c->flops = 2 * nx * dim(g, w, 1) * kernel_elems(g, n, w);
      if (in_t(g, n, 2) >= 0) c->flops += ny;
      break;
    case GOPT_OP_MATMUL:
      c->flops = 2 * ny * dim(g, x, rank(g, x) - 1);
      break;
    case GOPT_OP_GEMM: {
      int ta = (int)gopt_node_get_int(g, n, "transA", 0);
      c->flops = 2 * ny * dim(g, x, ta ? 0 : 1);
      if (in_t(g, n, 2) >= 0) c->flops += ny;
      break;
    }
    case GOPT_OP_EINSUM:
      c->flops = einsum_flops(g, n);
      break;
    case GOPT_OP_LSTM: case GOPT_OP_GRU: case GOPT_OP_RNN: {
      double gates = op == GOPT_OP_LSTM ? 4 : op == GOPT_OP_GRU ? 3 : 1;
      int layout = (int)gopt_node_get_int(g, n, "layout", 0);
      double seq = dim(g, x, layout ? 1 : 0), batch = dim(g, x, layout ? 0 : 1), in = dim(g, x, 2);
      double dirs = dim(g, w, 0), h = (double)gopt_node_get_int(g, n, "hidden_size", 0);
      if (h <= 0) h = dim(g, w, 1) / gates;
      /* input and recurrent matmuls of every gate, plus ~4 pointwise FLOPs per gate element */
      c->flops = seq * dirs * batch * gates * h * (2 * (in + h) + 4);
      break;
    }
    case GOPT_OP_MAX_POOL: case GOPT_OP_AVERAGE_POOL:
      c->flops = ny * kernel_elems(g, n, -1);
      break;
    case GOPT_OP_LP_POOL: /* |x|^p, the sum and a root per output */
      c->flops = 2 * ny * kernel_elems(g, n, -1) + 4 * ny;
      break;
    case GOPT_OP_ATTENTION:
      c->flops = attention_flops(g, n);
      break;
    case GOPT_OP_RMS_NORM: case GOPT_OP_LP_NORM: /* square, sum, root, scale */
      c->flops = 4 * nx;
      break;
    case GOPT_OP_ROTARY_EMBEDDING: /* two multiplies and an add per rotated element */
      c->flops = 3 * ny;
      break;
    case GOPT_OP_CUMPROD:
      c->flops = nx;
      break;
    case GOPT_OP_LABEL_ENCODER: /* one look-up (a hash probe, counted as 1) per element */
      c->flops = nx;
      break;
    case GOPT_OP_TREE_ENSEMBLE: { /* per row and tree, one comparison per level: at most every node */
      size_t nn = 0, nr = 0;
      gopt_node_get_ints(g, n, "nodes_featureids", &nn);
      gopt_node_get_ints(g, n, "tree_roots", &nr);
      double rows = dim(g, x, 0), depth = nr ? (double)nn / (double)nr : 0;
      c->flops = rows * (double)nr * depth + ny;
      break;
    }
    case GOPT_OP_GLOBAL_AVG_POOL: case GOPT_OP_GLOBAL_MAX_POOL:
    case GOPT_OP_REDUCE_MEAN: case GOPT_OP_REDUCE_SUM: case GOPT_OP_REDUCE_MAX:
    case GOPT_OP_REDUCE_MIN: case GOPT_OP_REDUCE_PROD: case GOPT_OP_ARGMAX: case GOPT_OP_ARGMIN:
    case GOPT_OP_CUMSUM: case GOPT_OP_NON_ZERO: case GOPT_OP_TOPK:
      c->flops = nx;
      break;
    case GOPT_OP_REDUCE_L2: case GOPT_OP_REDUCE_SUM_SQUARE:
      c->flops = 2 * nx;
      break;
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX:
      c->flops = 5 * nx; /* max, subtract, exp (counted as 4 with the sum)... see OPS.md */
      break;
    case GOPT_OP_LAYER_NORM: case GOPT_OP_INSTANCE_NORM:
      c->flops = 8 * nx;
      break;
    case GOPT_OP_BATCH_NORM:
      c->flops = 2 * nx;
      break;
    case GOPT_OP_SUM: case GOPT_OP_MAX: case GOPT_OP_MIN:
      c->flops = ny * (nd->n_in > 1 ? nd->n_in - 1 : 0);
      break;
    case GOPT_OP_MEAN:
      c->flops = ny * nd->n_in;
      break;
    case GOPT_OP_RESIZE: case GOPT_OP_UPSAMPLE: {
      const char *mode = gopt_node_get_string(g, n, "mode", "nearest");
      c->flops = strcmp(mode, "nearest") == 0 ? 0 : 4 * ny;
      break;
    }
    case GOPT_OP_IDENTITY: case GOPT_OP_DROPOUT: case GOPT_OP_EXPAND: case GOPT_OP_TRANSPOSE:
    case GOPT_OP_CONCAT: case GOPT_OP_SPLIT: case GOPT_OP_SLICE: case GOPT_OP_GATHER:
    case GOPT_OP_GATHER_ELEMENTS: case GOPT_OP_GATHER_ND: case GOPT_OP_SCATTER_ND:
    case GOPT_OP_SCATTER_ELEMENTS: case GOPT_OP_TILE: case GOPT_OP_PAD: case GOPT_OP_DEPTH_TO_SPACE:
    case GOPT_OP_SPACE_TO_DEPTH: case GOPT_OP_TRILU: case GOPT_OP_ONE_HOT:
    case GOPT_OP_CONSTANT_OF_SHAPE: case GOPT_OP_RANGE: case GOPT_OP_IF: case GOPT_OP_LOOP:
    case GOPT_OP_SCAN: case GOPT_OP_OPAQUE: case GOPT_OP_BITCAST:
      c->flops = 0; /* data movement only */
      break;
    default:
      /* elementwise and broadcasting ops: one FLOP per output element, transcendental ones 4 */
      c->flops = ny * (transcendental(op) ? 4 : 1);
      break;
  }
}

void gopt_graph_stats_compute(const gopt_graph *g, gopt_graph_stats *s) {
  memset(s, 0, sizeof *s);
  if (!g) return;
  s->nodes = gopt_graph_node_count(g);
  s->edges = gopt_graph_edge_count(g);
  int have_init = 0;
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_ATTR)) s->tensors++;
    if (x->flags & GOPT_T_INIT) have_init = 1;
  }
  /* params: elements of source initializers (every dtype, as onnx counts graph.initializer); a
   * graph built in memory without any GOPT_T_INIT tensor counts its GOPT_T_PARAM tensors. */
  unsigned mask = have_init ? GOPT_T_INIT : GOPT_T_PARAM;
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (x->flags & GOPT_T_NOSHAPE) continue;
    int64_t ne = gopt_tensor_numel(g, (int32_t)t);
    int64_t es = (int64_t)gopt_dtype_size(x->dtype), nb = ne > INT64_MAX / (es ? es : 1) ? INT64_MAX : ne * es;
    if (x->flags & GOPT_T_PARAM) s->trainable = sat_add(s->trainable, ne);
    if (!(x->flags & mask)) continue;
    s->params = sat_add(s->params, ne);
    s->param_bytes = sat_add(s->param_bytes, nb);
  }
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    gopt_cost c;
    gopt_node_cost(g, (int32_t)n, &c);
    s->flops += c.flops;
    s->bytes += c.bytes_read + c.bytes_written;
  }
}
