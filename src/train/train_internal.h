/* train_internal.h: the training-graph builder's context and the helpers the per-op gradient
 * rules (grad_rules.c) use to add tensors and ops (train.c). Internal to src/train. */
#ifndef GOPT_TRAIN_INTERNAL_H
#define GOPT_TRAIN_INTERNAL_H

#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/ops.h"
#include "gopt/train.h"

/* One partial gradient of a tensor (linked list per tensor). */
typedef struct tb_part {
  int32_t grad;
  int32_t next;
} tb_part;

typedef struct tb {
  gopt_graph *g;
  gopt_error *err;
  int64_t opset;         /* default-domain opset (decides ReduceSum/Split/Slice input forms) */
  size_t nt;             /* tensors of the forward graph + loss (size of the per-tensor arrays) */
  unsigned char *req;    /* per tensor: depends on a parameter through differentiable inputs */
  unsigned char *reach;  /* per tensor: the loss depends on it through differentiable inputs */
  int32_t *phead;        /* per tensor: first partial gradient (index in parts), -1 when none */
  int32_t *grad;         /* per tensor: final gradient, -1 until finalised */
  int32_t *shape_t;      /* per tensor: cached int64 shape tensor (constant or Shape op), -1 */
  tb_part *parts;
  size_t nparts, capparts;
  int32_t cur;           /* forward node being differentiated (names, messages) */
  size_t n_grad_nodes;
} tb;

/* Differentiability of forward node n: sets *mask (bit i = input i can carry a gradient; bit 31
 * stands for every input from 31 on, for variadic ops such as Concat and Sum) and
 * returns 1 when gopt has a gradient rule for the op (or it provably passes no gradient), 0 when
 * it has none (then *mask = every float input, so the path analysis is conservative). */
int tb_diff_mask(const tb *b, int32_t n, uint32_t *mask);
/* Emits the gradient ops of forward node n. dy[o] is the gradient of output o (-1 when the loss
 * does not depend on it); need[i] (one per input) says input i needs a gradient. Each needed input gets one
 * partial via tb_partial. Returns 0 or an error. */
int tb_emit(tb *b, int32_t n, const int32_t *dy, const unsigned char *need);
/* ---- what the rule files share (grad_*.c) ---- */
/* Input i / output i of node n, -1 when absent. */
static inline int32_t tb_in(const gopt_graph *g, int32_t n, int i) {
  return i < (int)g->nodes.a[n].n_in ? gopt_node_input(g, n, i) : -1;
}
static inline int32_t tb_out(const gopt_graph *g, int32_t n, int i) {
  return i < (int)g->nodes.a[n].n_out ? gopt_node_output(g, n, i) : -1;
}
/* Inside a rule (g, n and need in scope): whether input i needs a gradient; and the rule's return
 * on a failed helper (one that returned < 0 with b->err set). */
#define NEED(i) ((i) < (int)g->nodes.a[n].n_in && need[(i)])
#define TRY(x) do { if ((x) < 0) return b->err->code ? b->err->code : GOPT_EINVAL; } while (0)
/* grad_rules.c: the values of constant int32/int64 tensor t (at most max) into out; their count,
 * or -1 when t is not such a constant or holds more. */
int tb_const_ints(const gopt_graph *g, int32_t t, int64_t *out, int max);
/* grad_rules.c: the reduction axes of ReduceX node n (attribute, or constant input 1 from opset
 * 18/13), normalised to [0, rank); *na = -1 when absent (all axes). Returns 0 or an error. */
int tb_reduce_axes(tb *b, int32_t n, int rank, int64_t *axes, int *na);
/* The rules in files of their own (tb_emit's contract; d is output 0's gradient, dy every output's):
 * grad_convt.c ConvTranspose; grad_einsum.c Einsum; grad_instnorm.c InstanceNormalization;
 * grad_move.c DepthToSpace, SpaceToDepth, Trilu, CumSum, ReduceSumSquare, Tile, GatherElements,
 * GatherND, TopK, ScatterElements; grad_rnn.c LSTM, GRU, RNN; grad_select.c (a comparison routes
 * the gradient) Max, Min, Mean, PRelu, ReduceMax, ReduceMin, GlobalMaxPool. */
int tb_rule_conv_transpose(tb *b, int32_t n, int32_t d, const unsigned char *need);
int tb_rule_einsum(tb *b, int32_t n, int32_t d, const unsigned char *need);
int tb_rule_instance_norm(tb *b, int32_t n, int32_t d, const unsigned char *need);
int tb_rule_move(tb *b, int32_t n, int32_t d, const unsigned char *need);
int tb_rule_rnn(tb *b, int32_t n, const int32_t *dy, const unsigned char *need);
int tb_rule_select(tb *b, int32_t n, int32_t d, const unsigned char *need);
static inline int tb_mask_bit(uint32_t mask, int i) { return (int)((mask >> (i < 31 ? i : 31)) & 1u); }

/* ---- helpers (train.c) ---- */
int tb_fail(tb *b, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int tb_is_float(int dt);
/* Adds a tensor named "grad/<current node>/<what>" (made unique); dims copied before adding.
 * Returns its id or -1 (err set). */
int32_t tb_tensor(tb *b, const char *what, int dtype, int rank, const int64_t *dims);
int32_t tb_tensor_like(tb *b, const char *what, int32_t like);
/* Adds a backward op (flag GOPT_N_GRAD) named like its first output. Returns the node or -1. */
int32_t tb_node(tb *b, const char *type, int n_in, const int32_t *in, int n_out, const int32_t *out);
/* One-output op: creates the output tensor (what/dtype/shape) and the node. Returns the output
 * tensor or -1. */
int32_t tb_op(tb *b, const char *type, const char *what, int n_in, const int32_t *in, int dtype,
              int rank, const int64_t *dims);
/* One-output op whose output is shaped like tensor `like`. */
int32_t tb_op_like(tb *b, const char *type, const char *what, int n_in, const int32_t *in,
                   int32_t like);
/* Constant int64 vector / scalar constant of a float dtype (data set). */
int32_t tb_const_i64(tb *b, const char *what, const int64_t *v, int n);
int32_t tb_const_scalar(tb *b, const char *what, int dtype, double v);
/* Zeros shaped and typed like forward tensor t: ConstantOfShape(tb_shape_of(t)) (float32 t only:
 * ConstantOfShape's default value). Returns the tensor or -1. */
int32_t tb_zeros_like(tb *b, const char *what, int32_t t);
/* int64 tensor holding the shape of forward tensor t: a constant when t's shape is static, else a
 * Shape op reading t (cached per tensor). */
int32_t tb_shape_of(tb *b, int32_t t);
/* ReduceSum of d over `axes` in the opset's form (attribute before 13, input from 13). The output
 * has the given shape. */
int32_t tb_reduce_sum(tb *b, int32_t d, const int64_t *axes, int na, int keepdims,
                      const char *what, int rank, const int64_t *dims);
/* Sums gradient d (shaped like a broadcast result) down to the shape of `target` (ONNX
 * multidirectional broadcasting); returns d itself when nothing is broadcast. */
int32_t tb_reduce_to(tb *b, int32_t d, int32_t target, const char *what);
/* Whether tb_reduce_to(d, target) would add ops (d is shaped like the broadcast result). */
int tb_reduce_needed(const tb *b, int32_t d, int32_t target);
/* Same for a gradient of rank r and dims dd. */
int tb_reduce_needed_dims(const tb *b, const int64_t *dd, int r, int32_t target);
/* Copies every INT/FLOAT/STRING/INTS/FLOATS/STRINGS attribute of node `from` to node `to`. */
int tb_copy_attrs(tb *b, int32_t from, int32_t to);
/* Records grad as one partial gradient of forward tensor t. */
int tb_partial(tb *b, int32_t t, int32_t grad);
/* Name of input i's gradient for the current node: "d<i>". */
const char *tb_dname(int i, char *buf, size_t len);

#endif
