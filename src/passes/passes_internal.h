/* passes_internal.h: the pass context and the rewrite helpers shared by the passes of
 * src/passes (internal). A pass function rewrites one graph in place (the driver in passes.c
 * clones the input, applies the function to the graph and every computation it calls, compacts
 * and counts). */
#ifndef GOPT_PASSES_INTERNAL_H
#define GOPT_PASSES_INTERNAL_H

#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/passes.h"

typedef struct pctx {
  gopt_graph *g;
  gopt_pass_stats *st;
  gopt_error *err;
  unsigned char *is_out; /* per tensor (at entry): a graph output */
  size_t n_is_out;
} pctx;

typedef int (*pass_fn)(pctx *p);

/* HLO opcode of node n ("add" for "hlo::add"), NULL for nodes of other front ends. */
const char *pass_op(const gopt_graph *g, int32_t n);
/* 1 when n has opcode op. */
int pass_is(const gopt_graph *g, int32_t n, const char *op);
/* 1 when tensors a and b have the same dtype and static shape. */
int pass_same_type(const gopt_graph *g, int32_t a, int32_t b);
/* 1 when t is a graph output of p's graph. */
int pass_is_output(const pctx *p, int32_t t);
/* Makes every use of n's outputs use to[i] instead and removes n (counted as a rewrite), and the
 * operands that leaves unused (as XLA's ReplaceInstruction; side-effecting ones stay). */
void pass_replace(pctx *p, int32_t n, const int32_t *to);
/* Removes node n if its results are unused (and not outputs, no side effect), then likewise its
 * operands' producers. */
void pass_drop_unused(pctx *p, int32_t n);
/* 1 when every element of t is v: a constant with bytes, or an hlo broadcast of one. */
int pass_all_equal(const gopt_graph *g, int32_t t, double v);
/* 1 when HLO opcode op is elementwise (the ops the broadcast folder and reshape mover move). */
int pass_elementwise(const char *op);
/* Copies node n's STRING attributes (compare's direction, ...) to node m and re-derives m's op
 * kind. 0 or an error. */
int pass_copy_string_attrs(pctx *p, int32_t n, int32_t m);
/* Replaces node n by a copy (same type, name, op kind, flags and attributes, sub-graphs cloned)
 * with only the inputs/outputs whose keep_in/keep_out flag is set (NULL: all); the dropped outputs
 * are left without producer. Returns the new node, or -1 with err set (n is then removed). */
int32_t pass_rebuild_node(gopt_graph *g, int32_t n, const unsigned char *keep_in, const unsigned char *keep_out,
                          gopt_error *err);
/* 1 when the node must stay although its results are unused (rng, infeed, side effects). */
int pass_side_effect(const gopt_graph *g, int32_t n);
/* Adds an hlo node of opcode op reading ins and producing one new tensor of dtype/shape; its op
 * kind is set as on import. Returns the output tensor, or -1 with p->err set. */
int32_t pass_add_hlo(pctx *p, const char *op, const char *hint, int n_in, const int32_t *ins,
                     int dtype, int rank, const int64_t *dims);
/* A new scalar constant of dtype with value v broadcast to dims (two instructions when rank > 0:
 * constant and broadcast). Returns the tensor or -1. */
int32_t pass_splat(pctx *p, int dtype, double v, int rank, const int64_t *dims);

/* Writes node n's slice="{[start:limit:stride], ...}" (ops_hlo_slice reads it). */
int pass_slice_set(pctx *p, int32_t n, int rank, const int64_t *st, const int64_t *lim, const int64_t *sd);
/* Sets the INTS attribute key of t's producer and re-derives its op kind (as import does). */
int pass_set_ints(pctx *p, int32_t t, const char *key, const int64_t *v, size_t k);
/* The slice and concatenate rules of the algebraic simplifier (pass_slice.c): the tensor that
 * replaces n's output, -1 when none applies, -2 on error (p->err set). */
int32_t pass_algsimp_slice(pctx *p, int32_t n);

/* The passes. */
int pass_dce(pctx *p);
int pass_cse(pctx *p);
int pass_tuple_simplifier(pctx *p);
int pass_zero_sized(pctx *p);
int pass_algsimp(pctx *p);
int pass_transpose_folding(pctx *p);
int pass_constant_folding(pctx *p);
int pass_call_inliner(pctx *p);
int pass_logistic_expander(pctx *p);
int pass_batchnorm_expander(pctx *p);
int pass_broadcast_folding(pctx *p);
int pass_reshape_mover(pctx *p);
int pass_dot_decomposer(pctx *p);
int pass_dot_merger(pctx *p);
int pass_operand_upcaster(pctx *p);
int pass_while_simplifier(pctx *p);

#endif
