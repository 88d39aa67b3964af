/* exec_layout.c: the executor's layout-assignment pass, a graph-level decision made at plan time
 * (docs/EXECUTOR.md "Layouts"): which convolutions absorb the elementwise ops after them as oneDNN
 * post-ops (bias is the conv's own; Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSwish, x*Sigmoid(x)
 * as swish, and a residual Add as a sum post-op), and which activations stay in the layout oneDNN
 * picks (blocked or NHWC) because every op that touches them is a oneDNN op that reads that layout
 * (Conv, pooling, BatchNorm, and under the pass GlobalAveragePool and per-channel Mul/Add too).
 * A MatMul with constant 2-D weights heads a chain too: its bias Add becomes oneDNN matmul's bias,
 * and the eltwise ops and residual Add after it post-ops; its output stays plain. A zero Pad of a
 * Conv's spatial dims right before it becomes the conv's padding (wavenet's causal pads). A channel
 * Concat whose only reader is an inference BatchNorm takes it (and the Relu after it): one pass
 * from the Concat's inputs to the normalised output (k_concat_bn.c).
 * The concrete layout of a kept tensor is the one its producer's primitive chose; k_dnnl.c records
 * it here and its consumers read it. Everything else stays plain (row-major NCHW).
 * A chain takes only nodes of its head's fusion group (a `--fusion` group may be a conv/matmul with
 * its chain), and the same chain builder answers two graph-level questions without an executor:
 * whether a set of nodes is one chain (ex_group_chain_ok, the host fusion legality) and which nodes
 * the pass runs in oneDNN steps when no group is given (gopt_exec_auto_plan). */
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "gopt/costdb.h"
#include "gopt/util.h"

struct ex_layout {
  int32_t *absorbed_by;       /* per node: the conv whose step runs it as a post-op, or -1 */
  int32_t *chain_of;          /* per node: index in chains for a conv with post-ops, or -1 */
  ex_chain *chains;
  size_t n_chains;
  uint8_t *keep;              /* per tensor: may stay in a oneDNN layout */
  dnnl_memory_desc_t **md;    /* per tensor: the layout recorded by its producer (NULL: plain) */
  uint8_t *chain_done;        /* per chain: the conv kernel applied it */
  int chains_only;            /* --layouts plain with fusion groups: the groups' chains, no kept layouts */
  const int32_t *group;       /* the fusion groups the pass was planned with (NULL: none) */
  int32_t *gsize;             /* per group id: its number of members (NULL without groups) */
  int aware;                  /* the kernel prepared last reads oneDNN layouts */
  gopt_exec_layout_stats st;
};

/* ---- graph predicates --------------------------------------------------------------------------- */

static int is_float(const gopt_exec *x, int32_t t) { return t >= 0 && ex_dtype(x, t) == GOPT_DT_FLOAT; }

static int ungrouped(const int32_t *group, int32_t n) { return !group || group[n] < 0; }

/* Whether n (a BatchNorm or AveragePool) is in a group of two that is its layout-pass pairing: the
 * BatchNorm's only reader a Relu, the pool's input a Pad, in its group (such a group runs as the
 * pairing's oneDNN step, gopt_exec_group_kind's GOPT_EXEC_GROUP_CHAIN). */
static int pair_grouped(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  if (!group || group[n] < 0 || (size_t)group[n] >= g->nodes.n || !x->lay || !x->lay->gsize ||
      x->lay->gsize[group[n]] != 2)
    return 0;
  int op = g->nodes.a[n].op;
  if (op == GOPT_OP_AVERAGE_POOL) {
    int32_t p = g->tensors.a[gopt_node_input(g, n, 0)].producer;
    return p >= 0 && g->nodes.a[p].op == GOPT_OP_PAD && group[p] == group[n];
  }
  if (op != GOPT_OP_BATCH_NORM) return 0;
  int32_t Y = gopt_node_output(g, n, 0), s = Y >= 0 ? g->tensors.a[Y].first_use : -1;
  if (s < 0 || g->slots.a[s].next_use >= 0) return 0;
  int32_t c = g->slots.a[s].node;
  return g->nodes.a[c].op == GOPT_OP_RELU && group[c] == group[n];
}

/* Whether constant t has data: the executor's value (weights made up for structure-only files),
 * or, when checking a graph without an executor (vals NULL), every constant a kernel reads will. */
static int const_ok(const gopt_exec *x, int32_t t) {
  return ex_is_const(x, t) && (x->graph_only || !x->vals || ex_data(x, t));
}

/* The value of constant t: the executor's, or the graph's initializer (NULL: none yet). */
static const void *const_data(const gopt_exec *x, int32_t t) {
  return x->graph_only || !x->vals ? gopt_tensor_data(x->g, t) : ex_data(x, t);
}

/* The nodes a post-op chain headed by h may take: exactly the members mem[0..n_mem) of a fusion
 * group being checked without an executor (mem != NULL), else the nodes in h's fusion group
 * (group[c] == group[h], -1 meaning none: with no groups, every node). */
typedef struct ex_unit {
  const int32_t *group, *mem;
  int n_mem;
} ex_unit;

/* Whether a chain headed by h may take the extended post-ops (oneDNN binary ops with a broadcast or
 * same-shape operand, GELU): only as a fusion decision (a --fusion group holding h, or a group
 * checked without an executor), never in the executor's own plan, whose numerics they change
 * (GELU: oneDNN's erf) and which the fusion task may then choose against. */
static int unit_ext(const ex_unit *u, int32_t h) { return u->mem || (u->group && u->group[h] >= 0); }

static int in_unit(const ex_unit *u, int32_t h, int32_t c) {
  if (u->mem) {
    for (int i = 0; i < u->n_mem; i++)
      if (u->mem[i] == c) return 1;
    return 0;
  }
  return !u->group || u->group[c] == u->group[h];
}

/* Whether node c is already a post-op of another chain (only while the executor plans). */
static int absorbed(const gopt_exec *x, int32_t c) { return x->lay && x->lay->absorbed_by[c] >= 0; }

static int opaque(const gopt_exec *x, int32_t n) { return (x->g->nodes.a[n].flags & GOPT_N_OPAQUE) != 0; }

/* Whether tensor t is a graph output. */
static int is_output(const gopt_exec *x, int32_t t) {
  for (size_t i = 0; i < x->g->outputs.n; i++)
    if (x->g->outputs.a[i] == t) return 1;
  return 0;
}

/* Live uses of t: count, and the first up to cap (node, input index) pairs. */
static int uses(const gopt_exec *x, int32_t t, int32_t *node, int *slot, int cap) {
  const gopt_graph *g = x->g;
  int n = 0;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t c = g->slots.a[s].node;
    if (!gopt_node_alive(g, c)) continue;
    if (n < cap) {
      node[n] = c;
      slot[n] = s - (int32_t)g->nodes.a[c].in;
    }
    n++;
  }
  return n;
}

/* A float Conv with constant weights (and bias) of 1-3 spatial dims that oneDNN runs (in a fusion
 * group too: a group may be a conv with its post-op chain). */
static int conv_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  (void)group;
  if (nd->op != GOPT_OP_CONV || opaque(x, n) || nd->n_in < 2 || nd->n_out != 1) return 0;
  int32_t X = gopt_node_input(g, n, 0), W = gopt_node_input(g, n, 1);
  int32_t B = nd->n_in > 2 ? gopt_node_input(g, n, 2) : -1;
  int r = X >= 0 ? ex_rank(x, X) : 0;
  return is_float(x, X) && is_float(x, W) && const_ok(x, W) && r >= 3 && r <= 5 &&
         (B < 0 || (const_ok(x, B) && is_float(x, B))) && is_float(x, gopt_node_output(g, n, 0));
}

/* A float MatMul of an activation (rank >= 2) and constant 2-D weights: oneDNN's matmul with the
 * weights packed once (k_dnnl.c), which takes a bias and post-ops. */
static int mm_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  (void)group;
  if (nd->op != GOPT_OP_MATMUL || opaque(x, n) || nd->n_in != 2 || nd->n_out != 1) return 0;
  int32_t A = gopt_node_input(g, n, 0), W = gopt_node_input(g, n, 1);
  return is_float(x, A) && ex_rank(x, A) >= 2 && is_float(x, W) && const_ok(x, W) &&
         ex_rank(x, W) == 2 && is_float(x, gopt_node_output(g, n, 0));
}

/* Whether t is a constant float bias for a matmul output of last dim ncols: [ncols] or [1, .., ncols]. */
static int bias_ok(const gopt_exec *x, int32_t t, int64_t ncols) {
  return t >= 0 && is_float(x, t) && const_ok(x, t) && ex_rank(x, t) >= 1 &&
         ex_numel(x, t) == ncols && ex_dims(x, t)[ex_rank(x, t) - 1] == ncols;
}

/* An inference BatchNormalization with float operands and no used statistics outputs (any group). */
static int bn_ok(const gopt_exec *x, int32_t n) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op != GOPT_OP_BATCH_NORM || opaque(x, n) || nd->n_in < 5 || gopt_node_get_int(g, n, "training_mode", 0))
    return 0;
  int32_t X = gopt_node_input(g, n, 0);
  if (!is_float(x, X) || ex_rank(x, X) < 3 || ex_rank(x, X) > 5) return 0;
  for (int i = 1; i < 5; i++)
    if (!is_float(x, gopt_node_input(g, n, i))) return 0;
  return nd->n_out == 1 || gopt_node_output(g, n, 1) < 0;
}

/* A float MaxPool/AveragePool without a used Indices output, or an inference BatchNormalization. */
static int window_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (opaque(x, n) || (!ungrouped(group, n) && !pair_grouped(x, n, group)) || nd->n_in < 1) return 0;
  if (nd->op == GOPT_OP_BATCH_NORM) return bn_ok(x, n);
  int32_t X = gopt_node_input(g, n, 0);
  int r = X >= 0 ? ex_rank(x, X) : 0;
  if (!is_float(x, X) || r < 3 || r > 5) return 0;
  if (nd->op == GOPT_OP_AVERAGE_POOL && gopt_node_get_int(g, n, "ceil_mode", 0) &&
      gopt_node_get_int(g, n, "count_include_pad", 0))
    return 0; /* k_dnnl.c refuses it; the reference kernel reads plain buffers */
  if (nd->op == GOPT_OP_MAX_POOL || nd->op == GOPT_OP_AVERAGE_POOL)
    return nd->n_out == 1 || gopt_node_output(g, n, 1) < 0 || gopt_tensor_use_count(g, gopt_node_output(g, n, 1)) == 0;
  return 0;
}

/* Same rank and dims. */
static int same_shape(const gopt_exec *x, int32_t a, int32_t b) {
  if (ex_rank(x, a) != ex_rank(x, b)) return 0;
  for (int i = 0; i < ex_rank(x, a); i++)
    if (ex_dims(x, a)[i] != ex_dims(x, b)[i]) return 0;
  return 1;
}

/* A float GlobalAveragePool (oneDNN average pooling over the whole window under the pass). */
static int gap_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op != GOPT_OP_GLOBAL_AVG_POOL || opaque(x, n) || !ungrouped(group, n) || nd->n_in != 1 || nd->n_out != 1)
    return 0;
  int32_t X = gopt_node_input(g, n, 0);
  return is_float(x, X) && ex_rank(x, X) >= 3 && ex_rank(x, X) <= 5 && is_float(x, gopt_node_output(g, n, 0));
}

/* For a float Mul or Add of an activation and a per-channel tensor ([N or 1, C, 1, ...], a
 * squeeze-excitation scale) that oneDNN's binary primitive runs under the pass: the input slot of
 * the activation; -1 when n is not one. */
int ex_layout_binary_slot(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if ((nd->op != GOPT_OP_MUL && nd->op != GOPT_OP_ADD) || opaque(x, n) || !ungrouped(group, n) || nd->n_in != 2 ||
      nd->n_out != 1 || (x->lay && x->lay->absorbed_by[n] >= 0))
    return -1;
  int32_t Y = gopt_node_output(g, n, 0);
  if (!is_float(x, Y) || ex_rank(x, Y) < 3 || ex_rank(x, Y) > 5) return -1;
  for (int slot = 0; slot < 2; slot++) {
    int32_t a = gopt_node_input(g, n, slot), b = gopt_node_input(g, n, 1 - slot);
    if (a < 0 || b < 0 || a == b || !is_float(x, a) || !is_float(x, b) || !same_shape(x, a, Y) ||
        ex_rank(x, b) != ex_rank(x, Y))
      continue;
    const int64_t *bd = ex_dims(x, b), *yd = ex_dims(x, Y);
    int ok = (bd[0] == 1 || bd[0] == yd[0]) && bd[1] == yd[1];
    for (int i = 2; i < ex_rank(x, Y); i++) ok = ok && bd[i] == 1;
    if (ok) return slot;
  }
  return -1;
}

/* Constant float scalar t (-1: dflt); 0 when t is not one. */
static int const_scalar(const gopt_exec *x, int32_t t, float dflt, float *v) {
  *v = dflt;
  if (t < 0) return 1;
  const float *d = ex_is_const(x, t) ? const_data(x, t) : NULL;
  if (!d || ex_numel(x, t) != 1 || ex_dtype(x, t) != GOPT_DT_FLOAT) return 0;
  *v = *d;
  return 1;
}

/* The oneDNN eltwise post-op of unary node c (one float input, one output): 1 with alg/alpha/beta
 * filled, 0 when c is not one. */
static int eltwise_of(const gopt_exec *x, int32_t c, int *alg, float *alpha, float *beta) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[c];
  *alpha = *beta = 0.0f;
  if (nd->n_out != 1) return 0;
  switch (nd->op) {
    case GOPT_OP_RELU: *alg = dnnl_eltwise_relu; return 1;
    case GOPT_OP_LEAKY_RELU:
      *alg = dnnl_eltwise_relu;
      *alpha = (float)gopt_node_get_float(g, c, "alpha", 0.01);
      return 1;
    case GOPT_OP_SIGMOID: *alg = dnnl_eltwise_logistic; return 1;
    case GOPT_OP_TANH: *alg = dnnl_eltwise_tanh; return 1;
    case GOPT_OP_HARD_SWISH: *alg = dnnl_eltwise_hardswish; return 1;
    case GOPT_OP_CLIP:
      *alg = dnnl_eltwise_clip_v2;
      if (nd->n_in > 1) {
        return const_scalar(x, gopt_node_input(g, c, 1), -INFINITY, alpha) &&
               const_scalar(x, nd->n_in > 2 ? gopt_node_input(g, c, 2) : -1, INFINITY, beta);
      }
      *alpha = (float)gopt_node_get_float(g, c, "min", -INFINITY);
      *beta = (float)gopt_node_get_float(g, c, "max", INFINITY);
      return 1;
    default: return 0;
  }
}

int ex_layout_eltwise_of(const gopt_exec *x, int32_t n, int *alg, float *alpha, float *beta) {
  return eltwise_of(x, n, alg, alpha, beta);
}

/* Under the pass, a unary activation oneDNN's eltwise primitive runs on the layout it is given
 * (Relu, LeakyRelu, Sigmoid, Tanh, HardSwish, constant Clip; not a post-op of a chain, in no
 * fusion group): densenet's BatchNorm -> Relu -> Conv stays in the conv's layout. */
int ex_layout_eltwise_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_node *nd = &x->g->nodes.a[n];
  int alg;
  float a, b;
  if (opaque(x, n) || !ungrouped(group, n) || absorbed(x, n) || nd->n_in < 1 || !eltwise_of(x, n, &alg, &a, &b))
    return 0;
  int32_t X = gopt_node_input(x->g, n, 0), Y = gopt_node_output(x->g, n, 0);
  return is_float(x, X) && is_float(x, Y) && ex_rank(x, X) >= 3 && ex_rank(x, X) <= 5;
}

/* A float Concat of 3-5-D activations (none constant) along the channels (axis 1). */
static int channel_concat(const gopt_exec *x, int32_t n) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op != GOPT_OP_CONCAT || opaque(x, n) || nd->n_in < 1 || nd->n_out != 1) return 0;
  int32_t Y = gopt_node_output(g, n, 0);
  int r = Y >= 0 ? ex_rank(x, Y) : 0;
  int64_t axis = gopt_node_get_int(g, n, "axis", 0);
  if (!is_float(x, Y) || r < 3 || r > 5 || (axis < 0 ? axis + r : axis) != 1) return 0;
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (!is_float(x, t) || ex_rank(x, t) != r || ex_is_const(x, t)) return 0;
  }
  return 1;
}

/* Under the pass, a float Concat along the channels (axis 1) of 3-5-D activations, at most
 * EX_CONCAT_MAX inputs: oneDNN's concat primitive reads each input in its layout and writes the
 * output in the layout the inputs share (densenet's and inception's branches joined). */
int ex_layout_concat_ok(const gopt_exec *x, int32_t n, const int32_t *group) {
  return ungrouped(group, n) && x->g->nodes.a[n].n_in <= EX_CONCAT_MAX && channel_concat(x, n);
}

/* The oneDNN binary post-op of node c (Add, Mul, Sub, Div, Max, Min of two inputs) that reads the
 * chain's value cur at input slot: 1 with *alg and *src1 (the other operand) filled when src1
 * broadcasts to cur (right-aligned, each dim 1 or equal), c's output has cur's shape, cur is the
 * left operand of Sub/Div, and oneDNN can read src1 beside the head's destination: a Conv's
 * src1 is a scalar or per-channel ([.., C, 1, ..]); a MatMul's (whose 2-D destination folds the
 * leading dims into M) has leading dims all 1 or all equal to the output's. */
static int binary_of(const gopt_exec *x, int32_t h, int32_t c, int slot, int32_t cur, int *alg, int32_t *src1) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[c];
  switch (nd->op) {
    case GOPT_OP_ADD: *alg = dnnl_binary_add; break;
    case GOPT_OP_MUL: *alg = dnnl_binary_mul; break;
    case GOPT_OP_SUB: *alg = dnnl_binary_sub; break;
    case GOPT_OP_DIV: *alg = dnnl_binary_div; break;
    case GOPT_OP_MAX: *alg = dnnl_binary_max; break;
    case GOPT_OP_MIN: *alg = dnnl_binary_min; break;
    default: return 0;
  }
  if (nd->n_in != 2 || ((nd->op == GOPT_OP_SUB || nd->op == GOPT_OP_DIV) && slot != 0)) return 0;
  int32_t b = gopt_node_input(g, c, 1 - slot);
  int r = ex_rank(x, cur);
  if (b < 0 || b == cur || !is_float(x, b) || (ex_is_const(x, b) && !const_ok(x, b)) || ex_rank(x, b) > r ||
      !same_shape(x, cur, gopt_node_output(g, c, 0)))
    return 0;
  const int64_t *cd = ex_dims(x, cur), *bd = ex_dims(x, b);
  int64_t bb[GOPT_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int j = i - (r - ex_rank(x, b));
    bb[i] = j < 0 ? 1 : bd[j];
    if (bb[i] != 1 && bb[i] != cd[i]) return 0;
  }
  if (g->nodes.a[h].op == GOPT_OP_CONV) {
    for (int i = 0; i < r; i++)
      if (i != 1 && bb[i] != 1) return 0;
  } else {
    int ones = 1, full = 1;
    for (int i = 0; i < r - 1; i++) ones &= bb[i] == 1, full &= bb[i] == cd[i];
    if (!ones && !full) return 0;
  }
  *src1 = b;
  return 1;
}

/* Single live use of t inside the unit, not a graph output: that node (and its input slot), or -1. */
static int32_t sole_use(const gopt_exec *x, int32_t t, const ex_unit *u, int32_t h, int *slot) {
  int32_t un[2];
  int us[2];
  if (t < 0 || is_output(x, t) || uses(x, t, un, us, 2) != 1 || opaque(x, un[0]) || !in_unit(u, h, un[0]) ||
      absorbed(x, un[0]))
    return -1;
  if (slot) *slot = us[0];
  return un[0];
}

/* Whether node n of type op reads t and a constant scalar within tol of v (either order). */
static int op_with_scalar(const gopt_exec *x, int32_t n, int op, int32_t t, float v, float tol) {
  const gopt_graph *g = x->g;
  if (n < 0 || g->nodes.a[n].op != op || g->nodes.a[n].n_in != 2) return 0;
  int32_t a = gopt_node_input(g, n, 0), b = gopt_node_input(g, n, 1);
  float s;
  if (op == GOPT_OP_DIV && a != t) return 0;
  int32_t o = a == t ? b : b == t ? a : -1;
  return o >= 0 && o != t && const_scalar(x, o, 0.0f, &s) && fabsf(s - v) <= tol;
}

/* x * 0.5 * (1 + erf(x / sqrt 2)) as PyTorch exports GELU (Div, Erf, Add 1, Mul x, Mul 0.5), the
 * two uses of cur being u0, u1: oneDNN's gelu_erf post-op. Appends the five nodes to ch and returns
 * the output, or -1. */
static int32_t gelu_step(gopt_exec *x, ex_chain *ch, int32_t cur, const int32_t un[2], const ex_unit *u) {
  const gopt_graph *g = x->g;
  int32_t h = ch->nodes[0];
  int di = g->nodes.a[un[0]].op == GOPT_OP_DIV ? 0 : 1;
  int32_t dv = un[di], m1 = un[1 - di];
  if (!op_with_scalar(x, dv, GOPT_OP_DIV, cur, 1.41421356f, 1e-6f) || opaque(x, dv) || opaque(x, m1) ||
      !in_unit(u, h, dv) || !in_unit(u, h, m1) || absorbed(x, dv) || absorbed(x, m1) ||
      g->nodes.a[m1].op != GOPT_OP_MUL || g->nodes.a[m1].n_in != 2)
    return -1;
  int32_t ef = sole_use(x, gopt_node_output(g, dv, 0), u, h, NULL);
  if (ef < 0 || g->nodes.a[ef].op != GOPT_OP_ERF) return -1;
  int32_t ad = sole_use(x, gopt_node_output(g, ef, 0), u, h, NULL);
  if (!op_with_scalar(x, ad, GOPT_OP_ADD, gopt_node_output(g, ef, 0), 1.0f, 0.0f)) return -1;
  int32_t am = sole_use(x, gopt_node_output(g, ad, 0), u, h, NULL);
  if (am != m1) return -1;
  int32_t m2 = sole_use(x, gopt_node_output(g, m1, 0), u, h, NULL);
  if (!op_with_scalar(x, m2, GOPT_OP_MUL, gopt_node_output(g, m1, 0), 0.5f, 0.0f)) return -1;
  ex_post *p = &ch->post[ch->n_post++];
  memset(p, 0, sizeof *p);
  p->alg = dnnl_eltwise_gelu_erf;
  p->src1 = -1;
  int32_t mem[5] = {dv, ef, ad, m1, m2};
  for (int i = 0; i < 5; i++) ch->nodes[ch->n_nodes++] = mem[i];
  return gopt_node_output(g, m2, 0);
}

/* Whether r can be the residual of a sum post-op on cur writing y (same shape, float). */
static int residual_ok(const gopt_exec *x, int32_t r, int32_t cur, int32_t y) {
  return r >= 0 && r != cur && is_float(x, r) && same_shape(x, r, cur) && same_shape(x, r, y);
}

/* Extends chain ch of conv n by one post-op reading cur; returns the tensor it writes, or -1. */
static int32_t chain_step(gopt_exec *x, ex_chain *ch, int32_t cur, const ex_unit *u) {
  const gopt_graph *g = x->g;
  int32_t un[3];
  int us[3];
  int32_t h = ch->nodes[0];
  if (is_output(x, cur) || ch->n_post >= EX_MAX_POST || ch->n_nodes + 5 > EX_MAX_CHAIN_NODES) return -1;
  int nu = uses(x, cur, un, us, 3), ext = unit_ext(u, h);
  ex_post *p = &ch->post[ch->n_post];
  p->sum = p->bin = 0;
  p->src1 = -1;
  if (nu == 1) {
    int32_t c = un[0];
    const gopt_node *nd = &g->nodes.a[c];
    if (opaque(x, c) || !in_unit(u, h, c) || absorbed(x, c) || !is_float(x, gopt_node_output(g, c, 0))) return -1;
    int32_t b = nd->op == GOPT_OP_ADD && nd->n_in == 2 ? gopt_node_input(g, c, 1 - us[0]) : -1;
    if (g->nodes.a[ch->nodes[0]].op == GOPT_OP_MATMUL && ch->n_nodes == 1 &&
        bias_ok(x, b, ex_dims(x, cur)[ex_rank(x, cur) - 1]) && same_shape(x, cur, gopt_node_output(g, c, 0))) {
      ch->bias = b; /* the matmul's own bias, applied before the post-ops */
      ch->nodes[ch->n_nodes++] = c;
      return gopt_node_output(g, c, 0);
    }
    if (us[0] == 0 && eltwise_of(x, c, &p->alg, &p->alpha, &p->beta)) {
      p->sum = 0;
    } else if (nd->op == GOPT_OP_ADD && nd->n_in == 2 && ch->residual < 0 &&
               residual_ok(x, gopt_node_input(g, c, 1 - us[0]), cur, gopt_node_output(g, c, 0))) {
      int32_t r = gopt_node_input(g, c, 1 - us[0]);
      p->sum = 1;
      ch->residual = r;
    } else if (!(ext && binary_of(x, h, c, us[0], cur, &p->bin, &p->src1))) {
      return -1;
    }
    ch->nodes[ch->n_nodes++] = c;
    ch->n_post++;
    return gopt_node_output(g, c, 0);
  }
  if (nu == 2 && ext) {
    int32_t o = gelu_step(x, ch, cur, un, u);
    if (o >= 0) return o;
  }
  if (nu == 2) { /* x * Sigmoid(x): swish */
    int si = g->nodes.a[un[0]].op == GOPT_OP_SIGMOID ? 0 : 1;
    int32_t sg = un[si], mu = un[1 - si];
    if (g->nodes.a[sg].op != GOPT_OP_SIGMOID || g->nodes.a[mu].op != GOPT_OP_MUL || g->nodes.a[mu].n_in != 2 ||
        opaque(x, sg) || opaque(x, mu) || !in_unit(u, h, sg) || !in_unit(u, h, mu) || absorbed(x, sg) ||
        absorbed(x, mu))
      return -1;
    int32_t s = gopt_node_output(g, sg, 0);
    int32_t other = gopt_node_input(g, mu, 1 - us[1 - si]);
    int32_t su[2];
    int ss[2];
    if (other != s || is_output(x, s) || uses(x, s, su, ss, 2) != 1) return -1;
    p->sum = 0;
    p->alg = dnnl_eltwise_swish;
    p->alpha = 1.0f;
    p->beta = 0.0f;
    ch->nodes[ch->n_nodes++] = sg;
    ch->nodes[ch->n_nodes++] = mu;
    ch->n_post++;
    return gopt_node_output(g, mu, 0);
  }
  return -1;
}

/* For Conv n: whether its input 0 comes from a Pad it can fold into its own padding (constant
 * mode, value 0, constant non-negative pads on the spatial dims only, the padded tensor read by
 * n alone, the conv's auto_pad NOTSET or VALID); records the Pad in ch. */
static void pre_pad(const gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  int32_t X = gopt_node_input(g, n, 0), p = g->tensors.a[X].producer;
  int32_t un[2];
  int us[2];
  const char *ap = gopt_node_get_string(g, n, "auto_pad", "NOTSET");
  if (p < 0 || !gopt_node_alive(g, p) || g->nodes.a[p].op != GOPT_OP_PAD || opaque(x, p) || !in_unit(u, n, p) ||
      is_output(x, X) || uses(x, X, un, us, 2) != 1 || (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")))
    return;
  const gopt_node *pd = &g->nodes.a[p];
  if (strcmp(gopt_node_get_string(g, p, "mode", "constant"), "constant") || pd->n_in > 3 || pd->n_out != 1) return;
  float v;
  int32_t P = pd->n_in > 1 ? gopt_node_input(g, p, 1) : -1, V = pd->n_in > 2 ? gopt_node_input(g, p, 2) : -1;
  if (V >= 0 && (!const_scalar(x, V, 0.0f, &v) || v != 0.0f)) return;
  int64_t pads[2 * GOPT_MAX_RANK];
  size_t np = 0;
  int r = ex_rank(x, X);
  if (P >= 0) {
    if (!ex_is_const(x, P) || ex_read_ints(x, P, pads, 2 * GOPT_MAX_RANK, &np)) return;
  } else {
    const int64_t *a = gopt_node_get_ints(g, p, "pads", &np);
    if (!a || np > 2 * GOPT_MAX_RANK) return;
    memcpy(pads, a, np * sizeof *pads);
  }
  if (np != (size_t)(2 * r) || pads[0] || pads[1] || pads[r] || pads[r + 1]) return;
  for (int i = 2; i < r; i++) {
    if (pads[i] < 0 || pads[r + i] < 0) return;
    ch->pad_l[i - 2] = pads[i];
    ch->pad_r[i - 2] = pads[r + i];
  }
  ch->pad = p;
}

/* A float Pad that pads nothing (constant pads, all zero: torchvision's densenet exports one before
 * each transition's AveragePool): under the pass a copy of its input's buffer in whatever layout
 * that has (k_data.c), so it neither ends a kept layout nor costs a reorder. */
int ex_layout_nop_pad(const gopt_exec *x, int32_t n, const int32_t *group) {
  const gopt_graph *g = x->g;
  const gopt_node *pd = &g->nodes.a[n];
  if (pd->op != GOPT_OP_PAD || opaque(x, n) || !ungrouped(group, n) || pd->n_in < 2 || pd->n_out != 1) return 0;
  int32_t X = gopt_node_input(g, n, 0), P = gopt_node_input(g, n, 1), Y = gopt_node_output(g, n, 0);
  if (!is_float(x, X) || !is_float(x, Y) || !same_shape(x, X, Y) || P < 0 || !ex_is_const(x, P)) return 0;
  int64_t pads[2 * GOPT_MAX_RANK];
  size_t np = 0;
  if (ex_read_ints(x, P, pads, 2 * GOPT_MAX_RANK, &np) || np != (size_t)(2 * ex_rank(x, X))) return 0;
  for (size_t i = 0; i < np; i++)
    if (pads[i]) return 0;
  return 1;
}

/* Whether the step that reads t through node c at input slot reads it through oneDNN with any
 * layout: input 0 of a Conv/pooling/BatchNorm step, or the residual of a conv's sum post-op. */
static int layout_use(const gopt_exec *x, const ex_layout *l, int32_t c, int slot, int32_t t,
                      const int32_t *group) {
  int32_t h = l->absorbed_by[c];
  if (h >= 0) { /* the head's primitive reads a residual, or a folded Pad's input, in any layout */
    const ex_chain *ch = &l->chains[l->chain_of[h]];
    return ch->residual == t || ch->pad == c;
  }
  if (ex_layout_binary_slot(x, c, group) == slot) return 1;
  if (ex_layout_concat_ok(x, c, group) || ex_layout_concat_chain(x, c)) return 1; /* every input */
  if (slot != 0) return 0;
  return conv_ok(x, c, group) || window_ok(x, c, group) || gap_ok(x, c, group) || ex_layout_nop_pad(x, c, group) ||
         ex_layout_eltwise_ok(x, c, group);
}

/* ---- the pass ------------------------------------------------------------------------------------ */

/* Producer step of t when it is a oneDNN Conv/pool/BN step: that node, or -1. */
static int32_t layout_producer(const gopt_exec *x, const ex_layout *l, int32_t t, const int32_t *group) {
  int32_t p = x->g->tensors.a[t].producer;
  if (p < 0 || !gopt_node_alive(x->g, p)) return -1;
  int32_t h = l->absorbed_by[p] >= 0 ? l->absorbed_by[p] : p;
  if (l->absorbed_by[p] >= 0 || l->chain_of[p] >= 0) /* only a chain's final tensor leaves its step */
    return l->chains[l->chain_of[h]].out == t && (conv_ok(x, h, group) || window_ok(x, h, group) ||
                                                   ex_layout_concat_chain(x, h))
               ? h
               : -1; /* matmuls write plain */
  return conv_ok(x, p, group) || window_ok(x, p, group) || gap_ok(x, p, group) ||
                 ex_layout_binary_slot(x, p, group) >= 0 || ex_layout_nop_pad(x, p, group) ||
                 ex_layout_eltwise_ok(x, p, group) || ex_layout_concat_ok(x, p, group)
             ? p
             : -1;
}

static void plan_keep(gopt_exec *x, ex_layout *l, const int32_t *group) {
  const gopt_graph *g = x->g;
  for (size_t t = 0; t < g->tensors.n; t++) {
    int32_t tt = (int32_t)t;
    /* a tensor a control node's sub-graph reads (exec_control.c) is read as a plain array */
    if (x->vals[t].kind != EX_V_ACT || !is_float(x, tt) || is_output(x, tt) ||
        ex_control_reads(x, tt) || layout_producer(x, l, tt, group) < 0)
      continue;
    int ok = 1, any = 0;
    for (int32_t s = g->tensors.a[t].first_use; s >= 0 && ok; s = g->slots.a[s].next_use) {
      int32_t c = g->slots.a[s].node;
      if (!gopt_node_alive(g, c)) continue;
      any = 1;
      ok = layout_use(x, l, c, s - (int32_t)g->nodes.a[c].in, tt, group);
    }
    l->keep[t] = (uint8_t)(ok && any);
  }
  /* a sum post-op accumulates into the conv's destination: the residual and the chain's output
   * must share a layout, so both stay in the oneDNN layout or neither does; so do a no-op Pad's
   * input and output (it copies the buffer as it is) */
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t n = 0; n < g->nodes.n; n++) {
      if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].op != GOPT_OP_PAD || l->absorbed_by[n] >= 0)
        continue; /* a Pad folded into its pool or conv has no step (its output is never made) */
      int32_t X = gopt_node_input(g, (int32_t)n, 0), Y = gopt_node_output(g, (int32_t)n, 0);
      if (X < 0 || Y < 0 || l->keep[X] == l->keep[Y] || !ex_layout_nop_pad(x, (int32_t)n, group)) continue;
      l->keep[X] = l->keep[Y] = 0;
      changed = 1;
    }
    for (size_t i = 0; i < l->n_chains; i++) {
      ex_chain *ch = &l->chains[i];
      if (ch->residual < 0 || l->keep[ch->residual] == l->keep[ch->out]) continue;
      l->keep[ch->residual] = l->keep[ch->out] = 0;
      changed = 1;
    }
  }
}

/* ch: a chain of head n alone (no residual, bias, Pad or pool). */
static void chain_init(ex_chain *ch, int32_t n) {
  memset(ch, 0, sizeof *ch);
  ch->residual = ch->bias = ch->pad = ch->pool = -1;
  ch->nodes[ch->n_nodes++] = n;
}

/* Under the pass, an AveragePool (ceil_mode 0, count_include_pad 1 or no pads of its own) right after
 * a zero Pad of its spatial dims takes the Pad as its own padding, counted in the average
 * (inception_v3's nine Pad -> AveragePool pairs): a chain of the pool alone with ch->pad set.
 * Returns whether it built one. */
static int pool_chain_build(gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  if (g->nodes.a[n].op != GOPT_OP_AVERAGE_POOL || !window_ok(x, n, u->group) ||
      gopt_node_get_int(g, n, "ceil_mode", 0))
    return 0;
  size_t np = 0;
  const int64_t *pads = gopt_node_get_ints(g, n, "pads", &np);
  int own = 0;
  for (size_t i = 0; pads && i < np; i++) own |= pads[i] != 0;
  if (own && !gopt_node_get_int(g, n, "count_include_pad", 0)) return 0;
  chain_init(ch, n);
  pre_pad(x, ch, n, u);
  ch->out = gopt_node_output(g, n, 0);
  return ch->pad >= 0;
}

/* Under the pass, an inference BatchNormalization whose output only a Relu reads takes the Relu
 * (oneDNN's fuse_norm_relu flag; the plain-source loop applies it too): densenet's 62 norm ->
 * relu pairs are one pass each. A chain of the BatchNorm and the Relu. Returns whether it built one. */
/* The Relu that is the only reader of node n's output, in the unit of head h and free: that node,
 * or -1. */
static int32_t sole_relu(const gopt_exec *x, int32_t n, int32_t h, const ex_unit *u) {
  const gopt_graph *g = x->g;
  int32_t Y = gopt_node_output(g, n, 0), un[2];
  int us[2];
  if (Y < 0 || is_output(x, Y) || uses(x, Y, un, us, 2) != 1) return -1;
  int32_t c = un[0];
  const gopt_node *nd = &g->nodes.a[c];
  if (nd->op != GOPT_OP_RELU || opaque(x, c) || !in_unit(u, h, c) || absorbed(x, c) || nd->n_out != 1 ||
      !is_float(x, gopt_node_output(g, c, 0)))
    return -1;
  return c;
}

static int bn_chain_build(gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  if (g->nodes.a[n].op != GOPT_OP_BATCH_NORM || !window_ok(x, n, u->group)) return 0;
  int32_t c = sole_relu(x, n, n, u);
  if (c < 0) return 0;
  chain_init(ch, n);
  ch->nodes[ch->n_nodes++] = c;
  ch->out = gopt_node_output(g, c, 0);
  return 1;
}

/* Under the pass, a channel Concat whose output only an inference BatchNormalization reads takes
 * that BatchNorm, and the Relu that is the BatchNorm's only reader when there is one: one pass
 * reads every input in its own layout and writes the normalised channels straight into the
 * output (k_concat_bn.c), so the concatenated tensor is never made. A pre-activation DenseNet
 * layer (Concat -> BatchNorm -> Relu -> Conv; densenet121 has 62) otherwise copies every earlier
 * feature map into the Concat and reads the copy back. A chain of the Concat, the BatchNorm and
 * the Relu; its step runs at the last one. Returns whether it built one. */
static int concat_chain_build(gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  if (!channel_concat(x, n) || (u->mem && !in_unit(u, n, n))) return 0;
  int32_t Y = gopt_node_output(g, n, 0), un[2];
  int us[2];
  if (is_output(x, Y) || uses(x, Y, un, us, 2) != 1 || us[0] != 0) return 0;
  int32_t b = un[0];
  if (!bn_ok(x, b) || !in_unit(u, n, b) || absorbed(x, b)) return 0;
  chain_init(ch, n);
  ch->nodes[ch->n_nodes++] = b;
  int32_t c = sole_relu(x, b, n, u);
  if (c >= 0) ch->nodes[ch->n_nodes++] = c;
  ch->out = gopt_node_output(g, ch->nodes[ch->n_nodes - 1], 0);
  return 1;
}

int ex_layout_concat_chain(const gopt_exec *x, int32_t n) {
  const ex_chain *ch = ex_layout_chain(x, n);
  return ch && x->g->nodes.a[ch->nodes[0]].op == GOPT_OP_CONCAT;
}

/* Builds into ch the post-op chain of head n (conv_ok or mm_ok) over the nodes u allows: a zero
 * Pad before a conv, then the longest run of post-ops chain_step accepts. Returns the number of
 * nodes the chain's step runs besides the head (0: no chain). */
static int chain_build(gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  chain_init(ch, n);
  if (conv_ok(x, n, NULL)) pre_pad(x, ch, n, u);
  int32_t cur = gopt_node_output(g, n, 0), nxt;
  while ((nxt = chain_step(x, ch, cur, u)) >= 0) cur = nxt;
  ch->out = cur;
  return ch->n_nodes - 1 + (ch->pad >= 0);
}

/* Whether node n's ints attribute name is absent or every entry is v. */
static int ints_all(const gopt_graph *g, int32_t n, const char *name, int64_t v) {
  size_t c = 0;
  const int64_t *a = gopt_node_get_ints(g, n, name, &c);
  for (size_t i = 0; a && i < c; i++)
    if (a[i] != v) return 0;
  return 1;
}

/* Under the pass, a 1x1 Conv (stride 1, no padding, no post-ops) whose only reader is an
 * AveragePool without padding (ceil_mode 0, no dilations) that at least halves the pixels runs
 * after that pool instead of before it: both are linear per pixel and the bias is a constant of
 * the average, so pool(conv(x)) = conv(pool(x)) up to rounding, with the conv's work cut by the
 * pool's factor (a DenseNet transition's Conv1x1 -> AveragePool 2x2 stride 2 convolves a quarter
 * of the pixels). A Pad of nothing between them (torchvision's densenet exports one) is taken too.
 * A chain of the conv, that Pad and the pool (ch->pool); k_dnnl.c pools into scratch, then
 * convolves into the pool's output. Returns whether it built one. */
static int pool_first_build(gopt_exec *x, ex_chain *ch, int32_t n, const ex_unit *u) {
  const gopt_graph *g = x->g;
  if (!conv_ok(x, n, NULL)) return 0;
  int32_t W = gopt_node_input(g, n, 1), Y = gopt_node_output(g, n, 0), un[2];
  int us[2], r = ex_rank(x, W);
  for (int i = 2; i < r; i++)
    if (ex_dims(x, W)[i] != 1) return 0;
  if (!ints_all(g, n, "strides", 1) || !ints_all(g, n, "pads", 0) || is_output(x, Y) || uses(x, Y, un, us, 2) != 1)
    return 0;
  int32_t p = un[0], nop = -1;
  if (ex_layout_nop_pad(x, p, NULL) && in_unit(u, n, p) && !absorbed(x, p)) { /* densenet's Pad of nothing */
    int32_t Z = gopt_node_output(g, p, 0);
    if (is_output(x, Z) || uses(x, Z, un, us, 2) != 1) return 0;
    nop = p;
    p = un[0];
  }
  const gopt_node *pn = &g->nodes.a[p];
  const char *ap = gopt_node_get_string(g, p, "auto_pad", "NOTSET");
  if (pn->op != GOPT_OP_AVERAGE_POOL || opaque(x, p) || !in_unit(u, n, p) || absorbed(x, p) || pn->n_out != 1 ||
      gopt_node_get_int(g, p, "ceil_mode", 0) || !ints_all(g, p, "pads", 0) || !ints_all(g, p, "dilations", 1) ||
      (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")))
    return 0;
  int32_t P = gopt_node_output(g, p, 0);
  if (!is_float(x, P) || ex_rank(x, P) != ex_rank(x, Y)) return 0;
  int64_t in_pix = 1, out_pix = 1;
  for (int i = 2; i < ex_rank(x, Y); i++) in_pix *= ex_dims(x, Y)[i], out_pix *= ex_dims(x, P)[i];
  if (2 * out_pix > in_pix) return 0;
  chain_init(ch, n);
  if (nop >= 0) ch->nodes[ch->n_nodes++] = nop;
  ch->nodes[ch->n_nodes++] = p;
  ch->pool = p;
  ch->out = P;
  return 1;
}

int ex_layout_plan(gopt_exec *x, const int32_t *order, size_t n_order, const int32_t *group, int chains_only,
                   gopt_error *err) {
  const gopt_graph *g = x->g;
  ex_layout *l = calloc(1, sizeof *l);
  if (!l) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  x->lay = l;
  l->group = group;
  l->chains_only = chains_only;
  l->absorbed_by = malloc((g->nodes.n + 1) * sizeof *l->absorbed_by);
  l->chain_of = malloc((g->nodes.n + 1) * sizeof *l->chain_of);
  l->chains = calloc(n_order + 1, sizeof *l->chains);
  l->keep = calloc(g->tensors.n + 1, 1);
  l->md = calloc(g->tensors.n + 1, sizeof *l->md);
  l->chain_done = calloc(n_order + 1, 1);
  l->gsize = group ? calloc(g->nodes.n + 1, sizeof *l->gsize) : NULL;
  if (!l->absorbed_by || !l->chain_of || !l->chains || !l->keep || !l->md || !l->chain_done || (group && !l->gsize))
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t n = 0; group && n < g->nodes.n; n++)
    if (group[n] >= 0 && (size_t)group[n] < g->nodes.n) l->gsize[group[n]]++;
  for (size_t n = 0; n < g->nodes.n; n++) l->absorbed_by[n] = l->chain_of[n] = -1;
  /* post-op chains, heads in execution order (a later conv never absorbs an earlier node) */
  for (size_t i = 0; i < n_order; i++) {
    int32_t n = order[i];
    if (l->absorbed_by[n] >= 0) continue;
    ex_chain *ch = &l->chains[l->n_chains];
    ex_unit u = {group, NULL, 0};
    /* the pairings; under --layouts plain only when a group names them */
    int pool = (!chains_only || (group && group[n] >= 0)) &&
               (pool_chain_build(x, ch, n, &u) || bn_chain_build(x, ch, n, &u) || concat_chain_build(x, ch, n, &u));
    if (!pool && !(conv_ok(x, n, group) || mm_ok(x, n, group))) continue;
    if (chains_only && (!group || group[n] < 0)) continue; /* --layouts plain: the groups' chains only */
    if (!pool && !chain_build(x, ch, n, &u) && !pool_first_build(x, ch, n, &u)) continue;
    l->chain_of[n] = (int32_t)l->n_chains++;
    for (int j = 1; j < ch->n_nodes; j++) l->absorbed_by[ch->nodes[j]] = n;
    if (ch->pad >= 0) l->absorbed_by[ch->pad] = n;
    l->st.post_op_nodes += (size_t)ch->n_nodes - 1 + (ch->pad >= 0);
  }
  if (!chains_only) plan_keep(x, l, group);
  return GOPT_OK;
}

int ex_layout_group_is_chain(const gopt_exec *x, const int32_t *mem, int n_mem) {
  const ex_layout *l = x->lay;
  if (!l || n_mem < 2) return 0;
  int32_t h = -1;
  for (int i = 0; i < n_mem && h < 0; i++)
    if (l->chain_of[mem[i]] >= 0) h = mem[i];
  if (h < 0) return 0;
  const ex_chain *ch = &l->chains[l->chain_of[h]];
  if (ch->n_nodes + (ch->pad >= 0) != n_mem) return 0;
  for (int i = 0; i < n_mem; i++)
    if (mem[i] != h && l->absorbed_by[mem[i]] != h) return 0;
  return 1;
}

int ex_group_chain_ok(const gopt_graph *g, const int32_t *mem, int n_mem) {
  gopt_exec x = {0};
  x.g = g;
  x.graph_only = 1;
  int32_t h = -1;
  for (int i = 0; i < n_mem; i++) {
    if (!gopt_node_alive(g, mem[i])) return 0;
    if (conv_ok(&x, mem[i], NULL) || mm_ok(&x, mem[i], NULL)) {
      if (h >= 0) return 0;
      h = mem[i];
    }
  }
  ex_chain ch;
  ex_unit u = {NULL, mem, n_mem};
  if (h < 0) { /* the layout pass's pairings: exactly a BatchNorm and its Relu, a zero Pad and its
                * pool, a Concat and the BatchNorm (and Relu) after it */
    for (int i = 0; i < n_mem; i++) {
      if (n_mem == 2 && (bn_chain_build(&x, &ch, mem[i], &u) || pool_chain_build(&x, &ch, mem[i], &u))) return 1;
      if (concat_chain_build(&x, &ch, mem[i], &u)) return ch.n_nodes == n_mem;
    }
    return 0;
  }
  return chain_build(&x, &ch, h, &u) == n_mem - 1 || (pool_first_build(&x, &ch, h, &u) && ch.n_nodes == n_mem);
}

int ex_layout_dnnl_claims(const gopt_exec *x, int32_t n) {
  const ex_layout *l = x->lay;
  if (!l) return 0;
  int op = x->g->nodes.a[n].op;
  if (ex_layout_eltwise_ok(x, n, l->group) || ex_layout_concat_ok(x, n, l->group)) {
    const gopt_node *nd = &x->g->nodes.a[n]; /* when it reads or writes a kept tensor */
    int kept = l->keep[gopt_node_output(x->g, n, 0)];
    for (int i = 0; i < nd->n_in; i++) {
      int32_t t = gopt_node_input(x->g, n, i);
      if (t >= 0) kept |= l->keep[t];
    }
    return kept;
  }
  if (op != GOPT_OP_GLOBAL_AVG_POOL && op != GOPT_OP_MUL && op != GOPT_OP_ADD) return 0;
  int slot = op == GOPT_OP_GLOBAL_AVG_POOL ? (gap_ok(x, n, l->group) ? 0 : -1) : ex_layout_binary_slot(x, n, l->group);
  if (slot < 0) return 0;
  return l->keep[gopt_node_input(x->g, n, slot)] || l->keep[gopt_node_output(x->g, n, 0)];
}

void ex_layout_free(gopt_exec *x) {
  ex_layout *l = x->lay;
  if (!l) return;
  if (l->md)
    for (size_t t = 0; t < x->g->tensors.n; t++) free(l->md[t]);
  free(l->md);
  free(l->absorbed_by);
  free(l->chain_of);
  free(l->chains);
  free(l->keep);
  free(l->chain_done);
  free(l->gsize);
  free(l);
  x->lay = NULL;
}

int gopt_exec_auto_plan(const gopt_graph *g, int32_t *step_of) {
  size_t nn = g->nodes.n, nt = g->tensors.n;
  for (size_t n = 0; n < nn; n++) step_of[n] = -1;
  gopt_exec x = {0};
  x.g = g;
  x.graph_only = 1;
  int32_t *order = malloc((nn + 1) * sizeof *order);
  x.vals = calloc(nt + 1, sizeof *x.vals);
  int rc = order && x.vals ? GOPT_OK : GOPT_ENOMEM;
  int64_t cnt = rc ? -1 : gopt_graph_topo(g, order, NULL);
  if (!rc && cnt < 0) rc = (int)cnt;
  for (size_t t = 0; !rc && t < nt; t++) {
    const gopt_tensor *tt = &g->tensors.a[t];
    x.vals[t].kind = (tt->flags & GOPT_T_CONST) ? EX_V_CONST : tt->producer < 0 ? EX_V_INPUT : EX_V_ACT;
  }
  if (!rc) rc = ex_layout_plan(&x, order, (size_t)cnt, NULL, 0, NULL);
  if (!rc) {
    const ex_layout *l = x.lay;
    for (int64_t i = 0; i < cnt; i++) {
      int32_t n = order[i], h = l->absorbed_by[n];
      /* the pairings (BatchNorm -> Relu, Pad -> AveragePool) are chains too: a decision names
       * them as groups (gopt_exec_group_kind: GOPT_EXEC_GROUP_CHAIN), so the simulator prices the
       * pair as the one step the executor runs */
      step_of[n] = h >= 0 ? h : l->chain_of[n] >= 0 || l->absorbed_by[n] >= 0 || ex_layout_dnnl_claims(&x, n) ? n : -1;
    }
  }
  ex_layout_free(&x);
  free(x.vals);
  free(order);
  return rc;
}

/* ---- queries from the kernels and the planner ------------------------------------------------------ */

int ex_layout_step_node(const gopt_exec *x, int32_t n) {
  const ex_layout *l = x->lay;
  if (!l) return n;
  int32_t h = l->absorbed_by[n] >= 0 ? l->absorbed_by[n] : n;
  if (l->chain_of[h] < 0) return n;
  const ex_chain *ch = &l->chains[l->chain_of[h]];
  return ch->nodes[ch->n_nodes - 1] == n ? h : -1; /* the chain's step runs at its last node */
}

const ex_chain *ex_layout_chain(const gopt_exec *x, int32_t n) {
  const ex_layout *l = x->lay;
  return l && l->chain_of[n] >= 0 ? &l->chains[l->chain_of[n]] : NULL;
}

const void *ex_layout_md(const gopt_exec *x, int32_t t) { return x->lay && t >= 0 ? x->lay->md[t] : NULL; }

int ex_layout_keep(const gopt_exec *x, int32_t t) { return x->lay && t >= 0 && x->lay->keep[t]; }

int ex_layout_set_md(gopt_exec *x, int32_t t, const void *md) {
  ex_layout *l = x->lay;
  if (!l || !l->keep[t]) return GOPT_OK;
  if (!l->md[t] && !(l->md[t] = malloc(sizeof(dnnl_memory_desc_t)))) return GOPT_ENOMEM;
  memcpy(l->md[t], md, sizeof(dnnl_memory_desc_t));
  l->st.kept_tensors++;
  return GOPT_OK;
}

void ex_layout_note(gopt_exec *x, int32_t node, int reorders, int reorders_plain) {
  ex_layout *l = x->lay;
  if (!l) {
    x->reorders += (size_t)reorders;
    return;
  }
  l->aware = 1;
  if (l->chain_of[node] >= 0) l->chain_done[l->chain_of[node]] = 1;
  l->st.reorders += (size_t)reorders;
  l->st.reorders_plain += (size_t)reorders_plain;
}

size_t ex_layout_nbytes(const gopt_exec *x, int32_t t) {
  const dnnl_memory_desc_t *md = ex_layout_md(x, t);
  return md ? dnnl_memory_desc_get_size(md) : 0;
}

int ex_layout_step_begin(gopt_exec *x) {
  if (x->lay) x->lay->aware = 0;
  return GOPT_OK;
}

int ex_layout_step_end(gopt_exec *x, const ex_kernel *k, gopt_error *err) {
  ex_layout *l = x->lay;
  if (!l) return GOPT_OK;
  if (l->chain_of[k->node] >= 0 && !l->chain_done[l->chain_of[k->node]])
    return ex_node_error(x, k->node, err, GOPT_EINVAL, "layout pass: the post-op chain was not applied by the kernel");
  for (int j = 0; j < k->n_in && !l->aware; j++)
    if (k->in[j] >= 0 && l->md[k->in[j]])
      return ex_node_error(x, k->node, err, GOPT_EINVAL,
                           "layout pass: input '%s' is in a oneDNN layout this kernel cannot read",
                           gopt_graph_str(x->g, x->g->tensors.a[k->in[j]].name));
  return GOPT_OK;
}

/* ---- public queries -------------------------------------------------------------------------------- */

void gopt_exec_layout_stats_get(const gopt_exec *x, gopt_exec_layout_stats *s) {
  memset(s, 0, sizeof *s);
  if (x->lay && !x->lay->chains_only) {
    *s = x->lay->st;
    s->mode = GOPT_EXEC_LAYOUT_AUTO;
  } else {
    s->reorders = s->reorders_plain = x->reorders;
  }
}

/* oneDNN's name of a blocked layout: dims ordered by decreasing stride as letters (a = dim 0),
 * capitals for blocked dims, then the inner blocks ("aBcd16b" = nChw16c, "acdb" = NHWC). */
const char *gopt_exec_tensor_layout(const gopt_exec *x, int32_t t, char *buf, size_t cap) {
  const dnnl_memory_desc_t *md = ex_layout_md(x, t);
  if (!cap) return buf;
  if (!md || md->format_kind != dnnl_blocked) {
    snprintf(buf, cap, "%s", md ? "opaque" : "plain");
    return buf;
  }
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int idx[DNNL_MAX_NDIMS], nd = md->ndims, blk[DNNL_MAX_NDIMS] = {0};
  for (int i = 0; i < b->inner_nblks; i++) blk[b->inner_idxs[i]] = 1;
  for (int i = 0; i < nd; i++) idx[i] = i;
  for (int i = 1; i < nd; i++) /* stable insertion sort by decreasing stride */
    for (int j = i; j > 0 && b->strides[idx[j - 1]] < b->strides[idx[j]]; j--) {
      int tmp = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = tmp;
    }
  size_t k = 0;
  for (int i = 0; i < nd && k + 1 < cap; i++) buf[k++] = (char)((blk[idx[i]] ? 'A' : 'a') + idx[i]);
  buf[k] = 0;
  for (int i = 0; i < b->inner_nblks && k + 1 < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%lld%c", (long long)b->inner_blks[i], 'a' + (int)b->inner_idxs[i]);
  return buf;
}

uint64_t ex_layout_step_sig(const gopt_exec *x, const ex_kernel *k) {
  const ex_layout *l = x->lay;
  uint64_t sig = gopt_op_signature(x->g, k->node);
  if (!l) return sig;
  if (l->chain_of[k->node] >= 0) { /* a conv with post-ops: the members combined */
    const ex_chain *ch = &l->chains[l->chain_of[k->node]];
    int32_t mem[EX_MAX_CHAIN_NODES + 1];
    memcpy(mem, ch->nodes, (size_t)ch->n_nodes * sizeof *mem);
    if (ch->pad >= 0) mem[ch->n_nodes] = ch->pad;
    sig = gopt_group_signature(x->g, mem, ch->n_nodes + (ch->pad >= 0)); /* the simulator's group's */
  }
  int blocked = 0; /* reading or writing a oneDNN layout (no reorder inside the step) */
  for (int j = 0; j < k->n_in + k->n_out; j++) {
    int32_t t = j < k->n_in ? k->in[j] : k->out[j - k->n_in];
    if (t >= 0 && l->md[t]) blocked = 1;
  }
  return blocked ? gopt_sig_blocked(sig) : sig;
}
