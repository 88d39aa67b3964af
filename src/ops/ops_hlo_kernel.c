/* ops_hlo_kernel.c: costs of the HLO instructions that run other code, so that an optimised module
 * costs what XLA runs. A fusion is one kernel: the FLOPs of its body, the bytes of its operands and
 * results only (its intermediates stay in registers or shared memory). call and async-start cost
 * their bodies; a while loop its condition and body times the known_trip_count of its
 * backend_config (once when unknown); a conditional its dearest branch. A custom-call to cuBLAS
 * costs its GEMM (2 x output elements x contracted size from the JSON dot_dimension_numbers, plus
 * one add per output with a beta), one to cuDNN its convolution (2 x forward-output elements x
 * kernel elements per output feature, the same count for the forward and both backward passes);
 * the scratch workspace they return is not counted as written. Their op kinds follow the same
 * view: a fusion takes the kind of its dearest body instruction (a GEMM fusion is a MatMul-class
 * kernel, a loop fusion an elementwise one), cuBLAS calls are MatMul, cuDNN convolutions Conv. */
#include <stdlib.h>
#include <string.h>

#include "ops/ops_hlo.h"

static double numel(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  return (double)gopt_tensor_numel(g, t);
}

/* Sum of the costs of s's live nodes. */
static void body_cost(const gopt_graph *s, gopt_cost *acc) {
  memset(acc, 0, sizeof *acc);
  for (size_t k = 0; s && k < s->nodes.n; k++) {
    if (!gopt_node_alive(s, (int32_t)k)) continue;
    gopt_cost c;
    gopt_node_cost(s, (int32_t)k, &c);
    acc->flops += c.flops;
    acc->bytes_read += c.bytes_read;
    acc->bytes_written += c.bytes_written;
  }
}

static const gopt_graph *called(const gopt_graph *g, int32_t n, const char *key) {
  const gopt_attr *a = gopt_node_attr(g, n, key);
  return a && a->kind == GOPT_ATTR_GRAPH && a->v.graph >= 0 ? g->subgraphs.a[a->v.graph] : NULL;
}

int ops_hlo_json_ints(const char *s, const char *key, int64_t *v, int max) {
  const char *p = strstr(s, key);
  if (!p || !(p = strchr(p + strlen(key), '['))) return -1;
  int n = 0;
  for (p++; *p && *p != ']';) {
    if (*p == '"' || *p == ',' || *p == ' ') { p++; continue; }
    char *e;
    long long x = strtoll(p, &e, 10);
    if (e == p || n >= max) return -1;
    v[n++] = x;
    p = e;
  }
  return n;
}

/* The scratch workspace a library call returns as its last tuple element (s8/u8), not written by
 * the math: its bytes come off bytes_written. */
static void drop_workspace(const gopt_graph *g, int32_t n, gopt_cost *c) {
  const gopt_node *nd = &g->nodes.a[n];
  int32_t w = nd->n_out > 1 ? gopt_node_output(g, n, nd->n_out - 1) : -1;
  if (w >= 0 && (g->tensors.a[w].dtype == GOPT_DT_INT8 || g->tensors.a[w].dtype == GOPT_DT_UINT8))
    c->bytes_written -= gopt_tensor_bytes(g, w);
}

static double gemm_flops(const gopt_graph *g, int32_t n, const char *cfg) {
  int64_t lc[GOPT_MAX_RANK];
  int k = ops_hlo_json_ints(cfg, "\"lhs_contracting_dimensions\"", lc, GOPT_MAX_RANK);
  int32_t a = g->nodes.a[n].n_in ? gopt_node_input(g, n, 0) : -1, y = gopt_node_output(g, n, 0);
  if (k < 0 || a < 0) return 0;
  double contracted = 1;
  for (int i = 0; i < k; i++)
    if (lc[i] >= 0 && lc[i] < g->tensors.a[a].rank) contracted *= (double)gopt_tensor_dims(g, a)[lc[i]];
  const char *beta = strstr(cfg, "\"beta\":");
  double f = 2 * numel(g, y) * contracted;
  if (beta && strtod(beta + 7, NULL) != 0) f += numel(g, y); /* C = alpha AB + beta C */
  return f;
}

static double conv_flops(const gopt_graph *g, int32_t n, const char *target) {
  const gopt_node *nd = &g->nodes.a[n];
  int32_t in0 = nd->n_in > 0 ? gopt_node_input(g, n, 0) : -1, in1 = nd->n_in > 1 ? gopt_node_input(g, n, 1) : -1;
  int32_t out = gopt_node_output(g, n, 0), fwd = out, kernel = in1;
  if (strstr(target, "BackwardInput")) fwd = in0;
  else if (strstr(target, "BackwardFilter")) fwd = in1, kernel = out;
  return 2 * numel(g, fwd) * ops_hlo_conv_kernel_per_out(g, n, kernel);
}

int ops_hlo_kernel_cost(const gopt_graph *g, int32_t n, const char *op, gopt_cost *c) {
  gopt_cost b, b2;
  if (!strcmp(op, "fusion")) {
    body_cost(called(g, n, "calls"), &b);
    c->flops = b.flops;
    return 1;
  }
  if (!strcmp(op, "call") || !strcmp(op, "async-start")) {
    body_cost(called(g, n, !strcmp(op, "call") ? "to_apply" : "calls"), c);
    return 1;
  }
  if (!strcmp(op, "async-update") || !strcmp(op, "async-done")) { /* costed at the start */
    memset(c, 0, sizeof *c);
    return 1;
  }
  if (!strcmp(op, "while")) {
    int64_t trip = 1;
    const char *cfg = gopt_node_get_string(g, n, "backend_config", ""), *p = strstr(cfg, "\"known_trip_count\"");
    if (p && (p = strstr(p, "\"n\":"))) trip = strtoll(p + 4 + (p[4] == '"'), NULL, 10);
    body_cost(called(g, n, "body"), &b);
    body_cost(called(g, n, "condition"), &b2);
    double t = trip > 0 ? (double)trip : 1;
    c->flops = t * (b.flops + b2.flops);
    c->bytes_read = t * (b.bytes_read + b2.bytes_read);
    c->bytes_written = t * (b.bytes_written + b2.bytes_written);
    return 1;
  }
  if (!strcmp(op, "conditional")) {
    const gopt_node *nd = &g->nodes.a[n];
    memset(c, 0, sizeof *c);
    for (uint16_t i = 0; i < nd->n_attr; i++) {
      const gopt_attr *a = &g->attrs.a[nd->attr + i];
      if (a->kind != GOPT_ATTR_GRAPH || a->v.graph < 0) continue;
      body_cost(g->subgraphs.a[a->v.graph], &b);
      if (b.flops + b.bytes_read + b.bytes_written > c->flops + c->bytes_read + c->bytes_written) *c = b;
    }
    return 1;
  }
  if (!strcmp(op, "custom-call")) {
    const char *target = gopt_node_get_string(g, n, "custom_call_target", "");
    if (strstr(target, "__cublas$") && strstr(target, "gemm") == NULL && strstr(target, "matmul") == NULL)
      return 0;
    if (strstr(target, "__cublas$")) c->flops = gemm_flops(g, n, gopt_node_get_string(g, n, "backend_config", ""));
    else if (strstr(target, "__cudnn$conv")) c->flops = conv_flops(g, n, target);
    else return 0;
    drop_workspace(g, n, c);
    return 1;
  }
  return 0;
}

int ops_hlo_kernel_kind(const gopt_graph *g, int32_t n, const char *op) {
  if (!strcmp(op, "custom-call")) {
    const char *target = gopt_node_get_string(g, n, "custom_call_target", "");
    if (strstr(target, "__cublas$") && (strstr(target, "gemm") || strstr(target, "matmul"))) return GOPT_OP_MATMUL;
    if (strstr(target, "__cudnn$conv")) return GOPT_OP_CONV;
    return -1;
  }
  const gopt_graph *s = strcmp(op, "fusion") ? NULL : called(g, n, "calls");
  int kind = -1;
  double best = -1;
  for (size_t k = 0; s && k < s->nodes.n; k++) {
    int op_k = s->nodes.a[k].op;
    if (!gopt_node_alive(s, (int32_t)k) || gopt_op_class_of(op_k) == GOPT_OPC_SHAPE) continue;
    gopt_cost c;
    gopt_node_cost(s, (int32_t)k, &c);
    double w = c.flops + c.bytes_read + c.bytes_written;
    if (w > best) best = w, kind = op_k;
  }
  return kind;
}
