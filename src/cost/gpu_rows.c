/* gpu_rows.c: turns one measurement entry of a GPU measurements file (a PyTorch layer row or a
 * micro-benchmark) into the one-op gopt graph it times, and that graph (forward, or forward +
 * backward) into the GPU cost model's features, so layers, micro-benchmarks and whole models are
 * all described by the same per-node features. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/gpu_internal.h"
#include "gopt/ops.h"
#include "gopt/train.h"

/* A one-op graph under construction; errors are sticky in rc. */
typedef struct mb {
  gopt_graph *g;
  gopt_error *err;
  int rc;
} mb;

static int32_t mb_tensor(mb *b, int dtype, int rank, const int64_t *d, unsigned flags) {
  if (b->rc) return -1;
  int32_t t = gopt_graph_add_tensor(b->g, NULL, dtype, rank, d, b->err);
  if (t < 0) {
    b->rc = b->err->code ? b->err->code : GOPT_EINVAL;
    return -1;
  }
  if (flags & GOPT_T_INPUT) gopt_graph_add_input(b->g, t);
  if (flags & GOPT_T_CONST) gopt_tensor_set_const(b->g, t, NULL, 0, b->err);
  b->g->tensors.a[t].flags |= (uint16_t)(flags & (GOPT_T_PARAM | GOPT_T_INIT));
  return t;
}

/* Input x (a parameter too when grad: the backward then includes dX, as PyTorch's does). */
static int32_t mb_in(mb *b, int dtype, int rank, const int64_t *d, int grad) {
  return mb_tensor(b, dtype, rank, d, GOPT_T_INPUT | (grad ? GOPT_T_PARAM : 0));
}
static int32_t mb_param(mb *b, int rank, const int64_t *d) {
  return mb_tensor(b, GOPT_DT_FLOAT, rank, d, GOPT_T_CONST | GOPT_T_PARAM | GOPT_T_INIT);
}
/* Node with n_in inputs and n_out outputs of unknown shape; returns the node id. */
static int32_t mb_node(mb *b, const char *type, int n_in, const int32_t *in, int n_out) {
  int32_t outs[4];
  for (int i = 0; i < n_out; i++) outs[i] = mb_tensor(b, GOPT_DT_FLOAT, -1, NULL, 0);
  if (b->rc) return -1;
  int32_t n = gopt_graph_add_node(b->g, type, NULL, n_in, in, n_out, outs, b->err);
  if (n < 0) b->rc = b->err->code ? b->err->code : GOPT_EINVAL;
  else gopt_graph_add_output(b->g, outs[0]);
  return n;
}

/* ---- PyTorch extra_repr() parsing ---- */

/* Integers of "key=(a, b)" or "key=a" in s (at most max); 0 when the key is absent. */
static int kv_ints(const char *s, const char *key, int64_t *v, int max) {
  char pat[40];
  snprintf(pat, sizeof pat, "%s=", key);
  const char *p = strstr(s, pat);
  if (!p) return 0;
  p += strlen(pat);
  int paren = *p == '(';
  if (paren) p++;
  int k = 0;
  while (k < max) {
    char *end;
    long long x = strtoll(p, &end, 10);
    if (end == p) break;
    v[k++] = x;
    p = end;
    while (*p == ' ') p++;
    if (!paren || *p != ',') break;
    p++;
    while (*p == ' ') p++;
  }
  return k;
}
/* The leading positional integers "a, b, key=..." of s. */
static int pos_ints(const char *s, int64_t *v, int max) {
  int k = 0;
  const char *p = s;
  while (k < max) {
    while (*p == ' ' || *p == '(') p++;
    char *end;
    long long x = strtoll(p, &end, 10);
    if (end == p || *end == '=') break;
    v[k++] = x;
    p = end;
    while (*p == ' ' || *p == ')') p++;
    if (*p != ',') break;
    p++;
  }
  return k;
}
static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* Shape of a JSON array of ints into d; rank or -1. */
static int shape_of(json_t *a, int64_t *d) {
  if (!json_is_array(a) || json_array_size(a) > 8) return -1;
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *x = json_array_get(a, i);
    if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > (1 << 30)) return -1;
    d[i] = json_integer_value(x);
  }
  return (int)json_array_size(a);
}

/* Conv1d / Conv2d from "Cin, Cout, kernel_size=(..), stride=(..), padding=(..), dilation, groups,
 * bias". */
static void build_conv(mb *b, const char *a, int rank, const int64_t *xd, int grad) {
  int64_t cc[2], ks[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1}, grp = 1;
  int ns = rank - 2;
  if (pos_ints(a, cc, 2) != 2 || kv_ints(a, "kernel_size", ks, 3) != ns) {
    b->rc = gopt_error_set(b->err, GOPT_EPARSE, "cannot read the convolution attributes");
    return;
  }
  if (kv_ints(a, "stride", st, 3) == 1) st[1] = st[2] = st[0];
  if (kv_ints(a, "padding", pd, 3) == 1) pd[1] = pd[2] = pd[0];
  if (kv_ints(a, "dilation", dl, 3) == 1) dl[1] = dl[2] = dl[0];
  kv_ints(a, "groups", &grp, 1);
  if (grp < 1 || cc[0] % grp || cc[1] % grp || cc[0] != xd[1]) {
    b->rc = gopt_error_set(b->err, GOPT_EPARSE, "groups / channels do not match the input");
    return;
  }
  int64_t wd[5] = {cc[1], cc[0] / grp, ks[0], ks[1], ks[2]}, pads[6];
  for (int i = 0; i < ns; i++) pads[i] = pads[i + ns] = pd[i];
  int32_t in[3] = {mb_in(b, GOPT_DT_FLOAT, rank, xd, grad), mb_param(b, rank, wd), -1};
  if (!has(a, "bias=False")) in[2] = mb_param(b, 1, &cc[1]);
  int32_t n = mb_node(b, "Conv", 3, in, 1);
  if (n < 0) return;
  gopt_node_set_ints(b->g, n, "kernel_shape", ks, (size_t)ns);
  gopt_node_set_ints(b->g, n, "strides", st, (size_t)ns);
  gopt_node_set_ints(b->g, n, "dilations", dl, (size_t)ns);
  gopt_node_set_ints(b->g, n, "pads", pads, (size_t)(2 * ns));
  gopt_node_set_int(b->g, n, "group", grp);
}

/* nn.LSTM "input, hidden, num_layers=L, batch_first=True, bidirectional": one ONNX LSTM per
 * layer (layout 1 when batch_first), each layer's input a graph input of the right shape. */
static void build_lstm(mb *b, int64_t batch, int64_t seq, int64_t isz, int64_t h, int64_t layers,
                       int bidir, int batch_first) {
  int64_t dirs = bidir ? 2 : 1;
  for (int64_t l = 0; l < layers && !b->rc; l++) {
    int64_t xin = l ? h * dirs : isz;
    int64_t xd[3] = {batch_first ? batch : seq, batch_first ? seq : batch, xin};
    int64_t wd[3] = {dirs, 4 * h, xin}, rd[3] = {dirs, 4 * h, h}, bd[2] = {dirs, 8 * h};
    int32_t in[3] = {mb_in(b, GOPT_DT_FLOAT, 3, xd, 0), mb_param(b, 3, wd), mb_param(b, 3, rd)};
    int32_t in4[4] = {in[0], in[1], in[2], mb_param(b, 2, bd)};
    int32_t n = mb_node(b, "LSTM", 4, in4, 1);
    if (n < 0) return;
    gopt_node_set_int(b->g, n, "hidden_size", h);
    gopt_node_set_int(b->g, n, "layout", batch_first);
    if (bidir) gopt_node_set_string(b->g, n, "direction", "bidirectional");
  }
}

/* Input x of an in-place unary layer timed forward + backward by tools/gpu_profile.py: the module
 * ran on a non-leaf copy x * 1 (in place on a leaf is an error), whose multiply and its gradient
 * are two more elementwise kernels in the measured time (copy: the file's "inplace_copy"). */
static int32_t unary_in(mb *b, const char *a, int rank, const int64_t *xd, int grad, int copy) {
  int32_t x = mb_in(b, GOPT_DT_FLOAT, rank, xd, grad);
  if (!grad || !copy || !has(a, "inplace=True")) return x;
  int32_t in[2] = {x, mb_tensor(b, GOPT_DT_FLOAT, 0, NULL, GOPT_T_CONST)};
  int32_t out = mb_tensor(b, GOPT_DT_FLOAT, -1, NULL, 0);
  if (b->rc) return -1;
  if (gopt_graph_add_node(b->g, "Mul", NULL, 2, in, 1, &out, b->err) < 0) /* not a graph output */
    b->rc = b->err->code ? b->err->code : GOPT_EINVAL;
  return out;
}

/* Unary elementwise / pooling / normalisation layers on x. */
static int build_simple(mb *b, const char *layer, const char *a, int rank, const int64_t *xd,
                        int grad, int copy) {
  static const char *const unary[][2] = {
      {"ReLU", "Relu"}, {"ReLU6", "Relu"}, {"SiLU", "Sigmoid"}, {"Sigmoid", "Sigmoid"},
      {"Hardswish", "HardSwish"}, {"Hardsigmoid", "HardSigmoid"}, {"GELU", "Gelu"},
      {"Tanh", "Tanh"}};
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
    if (!strcmp(layer, unary[i][0])) {
      int32_t x = unary_in(b, a, rank, xd, grad, copy);
      mb_node(b, unary[i][1], 1, &x, 1);
      return 1;
    }
  if (!strcmp(layer, "MaxPool2d") || !strcmp(layer, "AvgPool2d")) {
    int64_t k[2], s[2], p[2] = {0, 0};
    int nk = kv_ints(a, "kernel_size", k, 2);
    if (nk < 1) return 0;
    if (nk == 1) k[1] = k[0];
    int ns = kv_ints(a, "stride", s, 2);
    if (ns < 1) s[0] = s[1] = k[0];
    else if (ns == 1) s[1] = s[0];
    if (kv_ints(a, "padding", p, 2) == 1) p[1] = p[0];
    int32_t x = mb_in(b, GOPT_DT_FLOAT, rank, xd, grad);
    int32_t n = mb_node(b, layer[0] == 'M' ? "MaxPool" : "AveragePool", 1, &x, 1);
    if (n < 0) return 1;
    int64_t pads[4] = {p[0], p[1], p[0], p[1]};
    gopt_node_set_ints(b->g, n, "kernel_shape", k, 2);
    gopt_node_set_ints(b->g, n, "strides", s, 2);
    gopt_node_set_ints(b->g, n, "pads", pads, 4);
    return 1;
  }
  if (!strcmp(layer, "AdaptiveAvgPool2d") && has(a, "(1, 1)")) {
    int32_t x = mb_in(b, GOPT_DT_FLOAT, rank, xd, grad);
    mb_node(b, "GlobalAveragePool", 1, &x, 1);
    return 1;
  }
  if (!strcmp(layer, "BatchNorm2d") || !strcmp(layer, "BatchNorm1d")) {
    int64_t c = xd[1];
    int32_t in[5] = {mb_in(b, GOPT_DT_FLOAT, rank, xd, grad), mb_param(b, 1, &c), mb_param(b, 1, &c),
                     mb_tensor(b, GOPT_DT_FLOAT, 1, &c, GOPT_T_CONST),
                     mb_tensor(b, GOPT_DT_FLOAT, 1, &c, GOPT_T_CONST)};
    mb_node(b, "BatchNormalization", 5, in, 1);
    return 1;
  }
  if (!strcmp(layer, "LayerNorm")) {
    int64_t c = xd[rank - 1];
    int32_t in[3] = {mb_in(b, GOPT_DT_FLOAT, rank, xd, grad), mb_param(b, 1, &c), mb_param(b, 1, &c)};
    int32_t n = mb_node(b, "LayerNormalization", 3, in, 1);
    if (n >= 0) gopt_node_set_int(b->g, n, "axis", -1);
    return 1;
  }
  return 0;
}

/* Whether every integer written in the attrs string a, and the integer part of every real, is
 * within +-2^30 (the bound shape_of puts on dimensions), so that sizes built from them (4 * hidden,
 * channels x kernel) cannot overflow. */
static int attrs_in_range(const char *a) {
  for (const char *p = a; *p;) {
    if (*p < '0' || *p > '9') {
      p++;
      continue;
    }
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno == ERANGE || x > (1 << 30)) return 0; /* the parsers read a real's integer part too */
    p = end;
    if (*p == '.' || *p == 'e' || *p == 'E') /* a real (eps=1e-05, momentum=0.1): skip the rest of it */
      while (*p == '.' || *p == 'e' || *p == 'E' || *p == '-' || *p == '+' || (*p >= '0' && *p <= '9')) p++;
  }
  return 1;
}

/* Builds the graph of a layer row into b; 1 built, 0 no kernel / no rule. */
static int build_layer(mb *b, const char *layer, const char *a, json_t *ins, int grad, int copy) {
  int64_t xd[8];
  if (!attrs_in_range(a)) {
    b->rc = gopt_error_set(b->err, GOPT_EPARSE, "\"attrs\" has an integer above 2^30");
    return 0;
  }
  int rank = shape_of(json_array_get(ins, 0), xd);
  if (rank < 1) {
    b->rc = gopt_error_set(b->err, GOPT_EPARSE, "\"in\"[0] must be a shape (array of ints >= 1)");
    return 0;
  }
  if ((!strcmp(layer, "Conv2d") && rank == 4) || (!strcmp(layer, "Conv1d") && rank == 3)) {
    build_conv(b, a, rank, xd, grad);
    return 1;
  }
  if (!strcmp(layer, "Linear")) {
    int64_t fi = 0, fo = 0;
    if (kv_ints(a, "in_features", &fi, 1) != 1 || kv_ints(a, "out_features", &fo, 1) != 1 ||
        fi != xd[rank - 1]) {
      b->rc = gopt_error_set(b->err, GOPT_EPARSE, "cannot read in_features / out_features");
      return 0;
    }
    int64_t wd[2] = {fi, fo}, wt[2] = {fo, fi};
    int32_t in[3] = {mb_in(b, GOPT_DT_FLOAT, rank, xd, grad), mb_param(b, 2, rank == 2 ? wt : wd), -1};
    if (rank == 2) { /* as exported: Gemm(x, W[out, in], transB=1) */
      if (!has(a, "bias=False")) in[2] = mb_param(b, 1, &fo);
      int32_t n = mb_node(b, "Gemm", in[2] >= 0 ? 3 : 2, in, 1);
      if (n >= 0) gopt_node_set_int(b->g, n, "transB", 1);
    } else {
      mb_node(b, "MatMul", 2, in, 1); /* cuBLAS adds the bias in the GEMM's epilogue */
    }
    return 1;
  }
  if (!strcmp(layer, "Embedding")) {
    int64_t nd[2];
    if (pos_ints(a, nd, 2) != 2) {
      b->rc = gopt_error_set(b->err, GOPT_EPARSE, "cannot read the embedding size");
      return 0;
    }
    int32_t in[2] = {mb_param(b, 2, nd), mb_in(b, GOPT_DT_INT64, rank, xd, 0)};
    mb_node(b, "Gather", 2, in, 1);
    return 1;
  }
  if (!strcmp(layer, "LSTM")) {
    int64_t hs[2], layers = 1;
    if (pos_ints(a, hs, 2) != 2 || rank != 3) {
      b->rc = gopt_error_set(b->err, GOPT_EPARSE, "cannot read the LSTM sizes");
      return 0;
    }
    kv_ints(a, "num_layers", &layers, 1);
    if (layers < 1 || layers > 1024 || hs[0] < 1 || hs[1] < 1) {
      b->rc = gopt_error_set(b->err, GOPT_EPARSE, "LSTM sizes out of range (input %lld, hidden %lld, "
                             "num_layers %lld)", (long long)hs[0], (long long)hs[1], (long long)layers);
      return 0;
    }
    int bf = has(a, "batch_first=True");
    build_lstm(b, bf ? xd[0] : xd[1], bf ? xd[1] : xd[0], hs[0], hs[1], layers,
               has(a, "bidirectional=True"), bf);
    return 1;
  }
  return build_simple(b, layer, a, rank, xd, grad, copy);
}

void gpu_graph_features(const gopt_graph *g, int32_t first_node, double *phi) {
  uint8_t *dyn = gopt_gpu_dynamic_tensors(g);
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (first_node >= 0 && (int32_t)n >= first_node && !(g->nodes.a[n].flags & GOPT_N_GRAD)) continue;
    gopt_gpu_node_features(g, (int32_t)n, dyn, phi);
  }
  free(dyn);
}

/* The kernel the forward + backward timing of a layer adds around it (harness): the loss
 * reduction out.sum() that backward() starts from (the train build's loss nodes; the fill of its
 * gradient is the build's ReduceMeanGrad, counted already); its features into phi. */
static int harness_features(const gopt_graph *g, const gopt_train_info *info, double *phi, gopt_error *err) {
  uint8_t *dyn = gopt_gpu_dynamic_tensors(g);
  if (!dyn) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t n = info->n_fwd_nodes; n < g->nodes.n; n++)
    if (!(g->nodes.a[n].flags & (GOPT_N_GRAD | GOPT_N_UPDATE))) gopt_gpu_node_features(g, (int32_t)n, dyn, phi);
  free(dyn);
  return 0;
}

/* Infers shapes of b's graph, adds the backward when bwd (with harness: and the timing harness's
 * kernels), sums the features into phi; the kind of the first node is the row's kind. */
static int finish(mb *b, int bwd, int harness, double *phi, int *kind, const char *what) {
  gopt_infer_opts io = {.fold_constants = 0, .keep_source_shapes = 1};
  gopt_train_info info = {0};
  int32_t first = -1;
  if (!b->rc) b->rc = gopt_infer_shapes(b->g, &io, b->err);
  if (!b->rc && bwd) {
    b->rc = gopt_train_build_ex(b->g, NULL, &info, b->err);
    first = (int32_t)info.n_fwd_nodes;
  }
  double one[GOPT_GPU_NCOEF] = {0};
  if (!b->rc) {
    *kind = gopt_gpu_node_features(b->g, 0, NULL, one);
    gpu_graph_features(b->g, first, phi);
    if (bwd && harness) b->rc = harness_features(b->g, &info, phi, b->err);
  }
  gopt_train_info_free(&info);
  if (b->rc) {
    gopt_error_prefix(b->err, "%s: ", what);
    return b->rc;
  }
  return 1;
}

int gpu_layer_features(json_t *row, int bwd, unsigned flags, double *phi, int *kind,
                       const char *what, gopt_error *err) {
  const char *layer = json_string_value(json_object_get(row, "layer"));
  const char *attrs = json_string_value(json_object_get(row, "attrs"));
  json_t *ins = json_object_get(row, "in");
  if (!layer || !attrs || !json_is_array(ins) || !json_array_size(ins))
    return gopt_error_set(err, GOPT_EPARSE, "%s: needs \"layer\", \"attrs\" (strings) and \"in\" "
                                             "(array of shapes)", what);
  mb b = {gopt_graph_new("layer"), err, 0};
  if (!b.g) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", what);
  int built = build_layer(&b, layer, attrs, ins, bwd, !!(flags & GPU_ROW_INPLACE_COPY));
  int rc = 0;
  if (b.rc) {
    gopt_error_prefix(err, "%s: %s: ", what, layer);
    rc = b.rc;
  } else if (built) {
    rc = finish(&b, bwd, !!(flags & GOPT_GPU_LOAD_HARNESS), phi, kind, what);
  }
  gopt_graph_free(b.g);
  return rc;
}

/* Integer field of a micro entry (>= 1), or -1. */
static int64_t mi(json_t *row, const char *key) {
  json_t *x = json_object_get(row, key);
  return json_is_integer(x) && json_integer_value(x) >= 1 ? json_integer_value(x) : -1;
}

/* Builds the graph of micro-benchmark op `op` into b; 1 built, 0 unknown op. */
static int build_micro(mb *b, const char *op, json_t *row, int64_t *sd, int rank) {
  static const char *const unary[] = {"Relu", "Sigmoid", "Tanh", "Gelu", "Exp"};
  int64_t n = mi(row, "numel");
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
    if (!strcmp(op, unary[i]) && n > 0) {
      int32_t x = mb_in(b, GOPT_DT_FLOAT, 1, &n, 0);
      mb_node(b, op, 1, &x, 1);
      return 1;
    }
  if ((!strcmp(op, "Add") || !strcmp(op, "Mul")) && n > 0) {
    int32_t in[2] = {mb_in(b, GOPT_DT_FLOAT, 1, &n, 0), mb_in(b, GOPT_DT_FLOAT, 1, &n, 0)};
    mb_node(b, op, 2, in, 1);
    return 1;
  }
  int64_t B = mi(row, "B"), M = mi(row, "M"), N = mi(row, "N"), K = mi(row, "K");
  if (!strcmp(op, "MatMul") && M > 0 && N > 0 && K > 0) {
    int64_t ad[2] = {M, K}, bd[2] = {K, N};
    int32_t in[2] = {mb_in(b, GOPT_DT_FLOAT, 2, ad, 0), mb_in(b, GOPT_DT_FLOAT, 2, bd, 0)};
    mb_node(b, "MatMul", 2, in, 1);
    return 1;
  }
  if (!strcmp(op, "BatchMatMul") && B > 0 && M > 0 && N > 0 && K > 0) {
    int64_t ad[3] = {B, M, K}, bd[3] = {B, K, N};
    int32_t in[2] = {mb_in(b, GOPT_DT_FLOAT, 3, ad, 0), mb_in(b, GOPT_DT_FLOAT, 3, bd, 0)};
    mb_node(b, "MatMul", 2, in, 1);
    return 1;
  }
  if (!strcmp(op, "LSTM")) {
    int64_t bt = mi(row, "batch"), h = mi(row, "hidden"), is = mi(row, "input"), sq = mi(row, "seq");
    if (bt < 1 || h < 1 || is < 1 || sq < 1) return 0;
    build_lstm(b, bt, sq, is, h, 1, 0, 1);
    return 1;
  }
  if (rank < 1) return 0;
  int32_t x = mb_in(b, GOPT_DT_FLOAT, rank, sd, 0);
  int32_t nd = -1;
  if (!strcmp(op, "Softmax") || !strcmp(op, "ReduceMean") || !strcmp(op, "GlobalAveragePool")) {
    nd = mb_node(b, op, 1, &x, 1);
    if (nd >= 0 && op[0] != 'G') {
      if (op[0] == 'S') gopt_node_set_int(b->g, nd, "axis", -1);
      else gopt_node_set_ints(b->g, nd, "axes", (int64_t[]){-1}, 1);
    }
  } else if (!strcmp(op, "LayerNormalization")) {
    int64_t c = sd[rank - 1];
    int32_t in[3] = {x, mb_param(b, 1, &c), mb_param(b, 1, &c)};
    nd = mb_node(b, op, 3, in, 1);
    if (nd >= 0) gopt_node_set_int(b->g, nd, "axis", -1);
  } else if (!strcmp(op, "Transpose")) {
    nd = mb_node(b, op, 1, &x, 1);
    int64_t perm[8];
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    if (nd >= 0) gopt_node_set_ints(b->g, nd, "perm", perm, (size_t)rank);
  } else if (!strcmp(op, "Concat") && rank >= 2) {
    int32_t in[2] = {x, mb_in(b, GOPT_DT_FLOAT, rank, sd, 0)};
    nd = mb_node(b, op, 2, in, 1);
    if (nd >= 0) gopt_node_set_int(b->g, nd, "axis", 1);
  } else if (!strcmp(op, "BatchNormalization") && rank >= 2) {
    int64_t c = sd[1];
    int32_t in[5] = {x, mb_param(b, 1, &c), mb_param(b, 1, &c),
                     mb_tensor(b, GOPT_DT_FLOAT, 1, &c, GOPT_T_CONST),
                     mb_tensor(b, GOPT_DT_FLOAT, 1, &c, GOPT_T_CONST)};
    nd = mb_node(b, op, 5, in, 1);
  } else if (!strcmp(op, "MaxPool") && rank == 4) {
    int64_t k = mi(row, "kernel"), s = mi(row, "stride");
    if (k < 1 || s < 1) return 0;
    nd = mb_node(b, op, 1, &x, 1);
    if (nd >= 0) {
      gopt_node_set_ints(b->g, nd, "kernel_shape", (int64_t[]){k, k}, 2);
      gopt_node_set_ints(b->g, nd, "strides", (int64_t[]){s, s}, 2);
    }
  } else {
    return 0;
  }
  return 1;
}

int gpu_micro_features(json_t *row, double *phi, int *kind, const char *what, gopt_error *err) {
  const char *op = json_string_value(json_object_get(row, "op"));
  if (!op) return gopt_error_set(err, GOPT_EPARSE, "%s: needs \"op\" (a string)", what);
  int64_t sd[8];
  int rank = json_object_get(row, "shape") ? shape_of(json_object_get(row, "shape"), sd) : -1;
  mb b = {gopt_graph_new("micro"), err, 0};
  if (!b.g) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", what);
  int built = build_micro(&b, op, row, sd, rank);
  int rc = 0;
  if (b.rc) {
    gopt_error_prefix(err, "%s: %s: ", what, op);
    rc = b.rc;
  } else if (built) {
    rc = finish(&b, 0, 0, phi, kind, what);
  }
  gopt_graph_free(b.g);
  return rc;
}
