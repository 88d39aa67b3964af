/* ops_hlo.h: the op registry's facts about XLA HLO opcodes (nodes of type "hlo::OPCODE"): the gopt
 * op kind of each opcode, whether gopt's shape rule for that kind applies as is, and the cost rule
 * (FLOPs and bytes from the text's shapes and the HLO attributes). Internal to gopt; used by the
 * HLO importer (src/hlo) and gopt_node_cost. */
#ifndef GOPT_OPS_HLO_H
#define GOPT_OPS_HLO_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/ops.h"

typedef struct ops_hlo_info {
  const char *opcode;
  uint16_t kind;     /* gopt_op: same semantics when checked, else only the same fusion class */
  uint8_t checked;   /* 1: the kind's shape rule applies (with the attributes the importer sets) */
  uint8_t flops;     /* FLOPs per output element for elementwise opcodes; 0 = by rule or none */
} ops_hlo_info;

/* Facts of an opcode ("add"); NULL when gopt has none (the node is opaque, class OPAQUE). */
const ops_hlo_info *ops_hlo_lookup(const char *opcode);

/* The opcode of node n when its type is "hlo::OPCODE", else NULL. */
const char *ops_hlo_opcode(const gopt_graph *g, int32_t n);

/* Cost rule for an HLO node (shapes from the text): fills c and returns 1, or returns 0 when n is
 * not an HLO node. Tuples, get-tuple-element, bitcast and reshape move no bytes; dot counts
 * 2 * output elements * contracted size; convolution 2 * output elements * kernel elements per
 * output feature; reduce and reduce-window one FLOP per input element (times the window). */
int ops_hlo_cost(const gopt_graph *g, int32_t n, gopt_cost *c);

/* Sets node n's op kind and GOPT_N_OPAQUE flag from its "hlo::OPCODE" type (ops_hlo_lookup), adding
 * the attributes the kind's shape rule reads (to, perm, axis, equation) where it applies.
 * tuple_result: n's result is a tuple (never checked). */
void ops_hlo_set_kind(gopt_graph *g, int32_t n, int tuple_result);

/* slice="{[start:limit(:stride)], ...}" of HLO node n, rank entries, into st/lim/sd. 0, or -1 when
 * it is missing or does not parse (stride < 1, start < 0 or limit < start included). */
int ops_hlo_slice(const gopt_graph *g, int32_t n, int rank, int64_t *st, int64_t *lim, int64_t *sd);

/* Einsum equation ("ab,bc->ac") of an HLO dot node n from its dimension-number attributes and
 * operand ranks ra, rb: batch dims, then lhs free, then rhs free dims. 0, or -1 when invalid. */
int ops_hlo_dot_equation(const gopt_graph *g, int32_t n, int ra, int rb, char *eq, size_t cap);

/* Kernel elements per output feature of a convolution (or cuDNN call) n with kernel tensor w: w's
 * elements over its 'o' dim in dim_labels ("b01f_01io->b01f"); all of w's when no label says. */
double ops_hlo_conv_kernel_per_out(const gopt_graph *g, int32_t n, int32_t w);

/* Cost of an HLO node that runs other code (fusion, call, async-start, while, conditional,
 * custom-calls to cuBLAS and cuDNN; ops_hlo_kernel.c), with c already holding the node's own
 * operand and result bytes: fills c and returns 1, or returns 0 for other nodes. */
int ops_hlo_kernel_cost(const gopt_graph *g, int32_t n, const char *op, gopt_cost *c);

/* The JSON list after `key` ("\"lhs_contracting_dimensions\"") in s, as numbers quoted or not
 * ("[\"1\",2]"), into v[0..max); returns the count, -1 when key is missing or the list is not
 * numbers or longer than max. */
int ops_hlo_json_ints(const char *s, const char *key, int64_t *v, int max);

/* Op kind of such a node as the kernel it is: a fusion's dearest body instruction's kind, MatMul
 * for a cuBLAS GEMM, Conv for a cuDNN convolution; -1 when none applies. */
int ops_hlo_kernel_kind(const gopt_graph *g, int32_t n, const char *op);

#endif
