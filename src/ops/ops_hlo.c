/* ops_hlo.c: HLO opcodes in the op registry: the opcode -> gopt op kind table (with whether the
 * kind's shape rule checks the text's shapes) and the cost rule of "hlo::OPCODE" nodes. The
 * table is the one place that decides how HLO maps onto gopt's ops; docs/HLO.md lists it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_hlo.h"

#define K(x) GOPT_OP_##x
static const ops_hlo_info table[] = {
    /* elementwise, same semantics as the ONNX op: checked by its shape rule */
    {"abs", K(ABS), 1, 1}, {"negate", K(NEG), 1, 1}, {"exponential", K(EXP), 1, 4},
    {"log", K(LOG), 1, 4}, {"sqrt", K(SQRT), 1, 1}, {"tanh", K(TANH), 1, 4},
    {"floor", K(FLOOR), 1, 1}, {"ceil", K(CEIL), 1, 1}, {"sign", K(SIGN), 1, 1},
    {"not", K(NOT), 1, 1}, {"logistic", K(SIGMOID), 1, 4}, {"sine", K(SIN), 1, 4},
    {"cosine", K(COS), 1, 4}, {"round-nearest-even", K(ROUND), 1, 1},
    {"add", K(ADD), 1, 1}, {"subtract", K(SUB), 1, 1}, {"multiply", K(MUL), 1, 1},
    {"divide", K(DIV), 1, 1}, {"maximum", K(MAX), 1, 1}, {"minimum", K(MIN), 1, 1},
    {"power", K(POW), 1, 4}, {"and", K(AND), 1, 1}, {"or", K(OR), 1, 1}, {"xor", K(XOR), 1, 1},
    {"remainder", K(MOD), 0, 1}, {"select", K(WHERE), 1, 1}, {"convert", K(CAST), 1, 1},
    {"compare", K(EQUAL), 1, 1}, /* kind chosen by direction on import */
    {"transpose", K(TRANSPOSE), 1, 0}, {"concatenate", K(CONCAT), 1, 0},
    {"dot", K(EINSUM), 1, 0},
    /* elementwise without an equal gopt op: class only */
    {"rsqrt", K(SQRT), 0, 2}, {"cbrt", K(SQRT), 0, 4}, {"exponential-minus-one", K(EXP), 0, 4},
    {"log-plus-one", K(LOG), 0, 4}, {"atan2", K(TANH), 0, 4}, {"clamp", K(CLIP), 0, 2},
    {"shift-left", K(MUL), 0, 1}, {"shift-right-logical", K(DIV), 0, 1},
    {"shift-right-arithmetic", K(DIV), 0, 1}, {"is-finite", K(ISNAN), 0, 1},
    {"round-nearest-afz", K(ROUND), 0, 1}, {"bitcast-convert", K(CAST), 0, 0},
    {"popcnt", K(ABS), 0, 1}, {"clz", K(ABS), 0, 1}, {"real", K(IDENTITY), 0, 0},
    {"imag", K(IDENTITY), 0, 0}, {"tan", K(TANH), 0, 4}, {"erf", K(ERF), 0, 4},
    {"reduce-precision", K(IDENTITY), 0, 1}, {"stochastic-convert", K(CAST), 0, 2},
    /* layout and data movement */
    {"broadcast", K(EXPAND), 0, 0}, {"reshape", K(RESHAPE), 0, 0}, {"bitcast", K(RESHAPE), 0, 0},
    {"copy", K(IDENTITY), 0, 0}, {"slice", K(SLICE), 0, 0}, {"dynamic-slice", K(SLICE), 0, 0},
    {"dynamic-update-slice", K(SCATTER_ND), 0, 0}, {"pad", K(PAD), 0, 0},
    {"reverse", K(SLICE), 0, 0}, {"iota", K(RANGE), 0, 0}, {"gather", K(GATHER), 0, 0},
    {"scatter", K(SCATTER_ND), 0, 0},
    /* reductions, convolution, normalisation */
    {"reduce", K(REDUCE_SUM), 0, 0}, {"reduce-window", K(MAX_POOL), 0, 0},
    {"convolution", K(CONV), 0, 0}, {"batch-norm-training", K(BATCH_NORM), 0, 0},
    {"batch-norm-inference", K(BATCH_NORM), 0, 0}, {"batch-norm-grad", K(BATCH_NORM_GRAD), 0, 0},
    {"select-and-scatter", K(MAX_POOL_GRAD), 0, 0}, {"sort", K(TOPK), 0, 0},
};
#undef K

/* Einsum equation of a dot from its dimension numbers: batch, lhs free, rhs free. 0 or -1. */
int ops_hlo_dot_equation(const gopt_graph *g, int32_t n, int ra, int rb, char *eq, size_t cap) {
  static const char L[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  size_t nlb, nrb, nlc, nrc;
  const int64_t *lb = gopt_node_get_ints(g, n, "lhs_batch_dims", &nlb);
  const int64_t *rb_ = gopt_node_get_ints(g, n, "rhs_batch_dims", &nrb);
  const int64_t *lc = gopt_node_get_ints(g, n, "lhs_contracting_dims", &nlc);
  const int64_t *rc = gopt_node_get_ints(g, n, "rhs_contracting_dims", &nrc);
  char a[GOPT_MAX_RANK + 1] = {0}, b[GOPT_MAX_RANK + 1] = {0}, o[2 * GOPT_MAX_RANK + 1] = {0};
  int next = 0, no = 0;
  if (nlb != nrb || nlc != nrc || ra > GOPT_MAX_RANK || rb > GOPT_MAX_RANK) return -1;
  for (size_t i = 0; i < nlb; i++) {
    if (lb[i] < 0 || lb[i] >= ra || rb_[i] < 0 || rb_[i] >= rb || a[lb[i]] || b[rb_[i]]) return -1;
    a[lb[i]] = b[rb_[i]] = o[no++] = L[next++];
  }
  for (size_t i = 0; i < nlc; i++) {
    if (lc[i] < 0 || lc[i] >= ra || rc[i] < 0 || rc[i] >= rb || a[lc[i]] || b[rc[i]]) return -1;
    a[lc[i]] = b[rc[i]] = L[next++];
  }
  for (int i = 0; i < ra; i++)
    if (!a[i]) a[i] = o[no++] = L[next++];
  for (int i = 0; i < rb; i++)
    if (!b[i]) b[i] = o[no++] = L[next++];
  o[no] = 0;
  snprintf(eq, cap, "%s,%s->%s", a, b, o);
  return 0;
}

int ops_hlo_slice(const gopt_graph *g, int32_t n, int rank, int64_t *st, int64_t *lim, int64_t *sd) {
  const char *s = gopt_node_get_string(g, n, "slice", NULL);
  int k = 0;
  for (const char *q = s; q && (q = strchr(q, '[')); k++) {
    char *e;
    if (k >= rank) return -1;
    st[k] = strtoll(q + 1, &e, 10);
    if (*e != ':') return -1;
    lim[k] = strtoll(e + 1, &e, 10);
    sd[k] = 1;
    if (*e == ':') sd[k] = strtoll(e + 1, &e, 10);
    if (*e != ']' || sd[k] < 1 || st[k] < 0 || lim[k] < st[k]) return -1;
    q = e;
  }
  return s && k == rank ? 0 : -1;
}

void ops_hlo_set_kind(gopt_graph *g, int32_t n, int tuple_result) {
  gopt_node *nd = &g->nodes.a[n];
  const char *opcode = ops_hlo_opcode(g, n);
  const ops_hlo_info *info = opcode ? ops_hlo_lookup(opcode) : NULL;
  nd->op = GOPT_OP_OPAQUE;
  nd->flags |= GOPT_N_OPAQUE;
  if (!info) {
    int k = opcode ? ops_hlo_kernel_kind(g, n, opcode) : -1;
    if (k >= 0) nd->op = (uint16_t)k; /* still opaque: the kind gives the kernel's class */
    return;
  }
  nd->op = info->kind;
  int checked = info->checked && nd->n_out == 1 && !tuple_result;
  int out_dt = nd->n_out ? g->tensors.a[gopt_node_output(g, n, 0)].dtype : -1;
  for (int i = 0; i < nd->n_in && checked; i++) {
    int32_t t = gopt_node_input(g, n, i);
    checked = t >= 0 && g->tensors.a[t].dtype != GOPT_DT_STRING; /* STRING = HLO token */
  }
  if (checked && (!strcmp(opcode, "and") || !strcmp(opcode, "or") || !strcmp(opcode, "xor") ||
                  !strcmp(opcode, "not")))
    checked = out_dt == GOPT_DT_BOOL; /* on integers they are bitwise: no ONNX op */
  if (checked && !strcmp(opcode, "abs")) /* abs of a complex number is its (real) modulus */
    checked = out_dt == g->tensors.a[gopt_node_input(g, n, 0)].dtype;
  if (checked && !strcmp(opcode, "compare")) {
    const char *d = gopt_node_get_string(g, n, "direction", "");
    int k = !strcmp(d, "EQ") ? GOPT_OP_EQUAL : !strcmp(d, "LT") ? GOPT_OP_LESS
          : !strcmp(d, "LE") ? GOPT_OP_LESS_OR_EQUAL : !strcmp(d, "GT") ? GOPT_OP_GREATER
          : !strcmp(d, "GE") ? GOPT_OP_GREATER_OR_EQUAL : -1;
    if (k < 0) checked = 0; else nd->op = (uint16_t)k;
  } else if (checked && !strcmp(opcode, "convert")) {
    checked = !gopt_node_set_int(g, n, "to", out_dt);
  } else if (checked && !strcmp(opcode, "transpose")) {
    size_t k;
    const int64_t *d = gopt_node_get_ints(g, n, "dimensions", &k);
    int64_t perm[GOPT_MAX_RANK]; /* a copy: setting an attribute may move g->ints */
    checked = d && k <= GOPT_MAX_RANK;
    if (checked && k) memcpy(perm, d, k * sizeof *perm);
    checked = checked && !gopt_node_set_ints(g, n, "perm", perm, k);
  } else if (checked && !strcmp(opcode, "concatenate")) {
    size_t k;
    const int64_t *d = gopt_node_get_ints(g, n, "dimensions", &k);
    checked = d && k == 1 && !gopt_node_set_int(g, n, "axis", d[0]);
  } else if (checked && !strcmp(opcode, "dot")) {
    /* a dot whose result type differs from its operands' (XLA's preferred_element_type, e.g.
     * bf16 x bf16 -> f32) stays opaque: Einsum would re-derive the operands' type. The importer
     * checks its dims against the equation (hlo_import.c). */
    char eq[80];
    checked = nd->n_in == 2 &&
              !ops_hlo_dot_equation(g, n, g->tensors.a[gopt_node_input(g, n, 0)].rank,
                                    g->tensors.a[gopt_node_input(g, n, 1)].rank, eq, sizeof eq) &&
              !gopt_node_set_string(g, n, "equation", eq);
    nd = &g->nodes.a[n];
    for (int i = 0; i < nd->n_in && checked; i++) checked = g->tensors.a[gopt_node_input(g, n, i)].dtype == out_dt;
  }
  nd = &g->nodes.a[n];
  if (checked) nd->flags &= (uint16_t)~GOPT_N_OPAQUE;
}

const ops_hlo_info *ops_hlo_lookup(const char *opcode) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(table[i].opcode, opcode)) return &table[i];
  return NULL;
}

const char *ops_hlo_opcode(const gopt_graph *g, int32_t n) {
  const char *t = gopt_node_type(g, n);
  return strncmp(t, "hlo::", 5) == 0 ? t + 5 : NULL;
}

static double numel(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  return (double)gopt_tensor_numel(g, t);
}

/* Product of dims of tensor t listed in the INTS attribute key of n. */
static double dims_product(const gopt_graph *g, int32_t n, int32_t t, const char *key) {
  size_t k = 0;
  const int64_t *d = gopt_node_get_ints(g, n, key, &k);
  double p = 1;
  if (t < 0) return p;
  const gopt_tensor *x = &g->tensors.a[t];
  for (size_t i = 0; i < k; i++)
    if (d[i] >= 0 && d[i] < x->rank && gopt_tensor_dims(g, t)[d[i]] > 0)
      p *= (double)gopt_tensor_dims(g, t)[d[i]];
  return p;
}

double ops_hlo_conv_kernel_per_out(const gopt_graph *g, int32_t n, int32_t w) {
  const char *dl = gopt_node_get_string(g, n, "dim_labels", "");
  const char *us = strchr(dl, '_');
  double total = numel(g, w);
  if (!us || w < 0) return total;
  int k = 0;
  for (const char *q = us + 1; *q && *q != '-' && k < g->tensors.a[w].rank; q++, k++)
    if (*q == 'o') {
      int64_t d = gopt_tensor_dims(g, w)[k];
      return d > 0 ? total / (double)d : total;
    }
  return total;
}

int ops_hlo_cost(const gopt_graph *g, int32_t n, gopt_cost *c) {
  const char *op = ops_hlo_opcode(g, n);
  if (!op) return 0;
  memset(c, 0, sizeof *c);
  const gopt_node *nd = &g->nodes.a[n];
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_PARAM)) c->params += (int64_t)numel(g, t);
  }
  if (!strcmp(op, "tuple") || !strcmp(op, "get-tuple-element") || !strcmp(op, "bitcast") ||
      !strcmp(op, "reshape") || !strcmp(op, "after-all") || !strcmp(op, "opt-barrier"))
    return 1; /* metadata only */
  for (int i = 0; i < nd->n_in; i++) c->bytes_read += gopt_tensor_bytes(g, gopt_node_input(g, n, i));
  for (int i = 0; i < nd->n_out; i++) c->bytes_written += gopt_tensor_bytes(g, gopt_node_output(g, n, i));
  int32_t x = nd->n_in ? gopt_node_input(g, n, 0) : -1;
  int32_t y = nd->n_out ? gopt_node_output(g, n, 0) : -1;
  double ny = numel(g, y);
  if (ops_hlo_kernel_cost(g, n, op, c)) return 1; /* fusion, call, while, cuBLAS, cuDNN, ... */
  if (!strcmp(op, "gather") || !strcmp(op, "dynamic-slice")) {
    double table_bytes = gopt_tensor_bytes(g, x); /* reads only the rows it gathers */
    if (c->bytes_written < table_bytes) c->bytes_read += c->bytes_written - table_bytes;
    return 1;
  }
  if (!strcmp(op, "dot")) {
    c->flops = 2 * ny * dims_product(g, n, x, "lhs_contracting_dims");
  } else if (!strcmp(op, "convolution")) {
    c->flops = 2 * ny * ops_hlo_conv_kernel_per_out(g, n, nd->n_in > 1 ? gopt_node_input(g, n, 1) : -1);
  } else if (!strcmp(op, "reduce")) {
    for (int i = 0; i < nd->n_in / 2; i++) c->flops += numel(g, gopt_node_input(g, n, i));
  } else if (!strcmp(op, "reduce-window")) {
    const char *w = gopt_node_get_string(g, n, "window", "");
    const char *s = strstr(w, "size=");
    double win = 1;
    if (s) { /* size=3x3 */
      double v = 0;
      for (s += 5; (*s >= '0' && *s <= '9') || *s == 'x'; s++) {
        if (*s == 'x') { win *= v > 0 ? v : 1; v = 0; } else v = v * 10 + (*s - '0');
      }
      win *= v > 0 ? v : 1;
    }
    c->flops = ny * win;
  } else if (!strncmp(op, "batch-norm", 10)) {
    c->flops = (!strcmp(op, "batch-norm-inference") ? 2 : 8) * numel(g, x);
  } else {
    const ops_hlo_info *in = ops_hlo_lookup(op);
    c->flops = in ? ny * in->flops : 0;
  }
  return 1;
}
