/* ops_train.h: shape and cost hooks for the training op kinds of gopt/op_list_train.h, called by
 * the op registry's dispatch (shape inference, gopt_node_cost). Internal to gopt. */
#ifndef GOPT_OPS_TRAIN_H
#define GOPT_OPS_TRAIN_H

#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/ops.h"

/* Index (1-based) of node n's type in op_list_train.h, 0 when it is not a training op. Matches
 * the type string, so it works whether or not op_list.h includes op_list_train.h. */
int ops_train_kind(const gopt_graph *g, int32_t n);

/* Shape rule: sets the dtype and shape of every output of training op n from its inputs and
 * attributes (the same values gopt_train_build sets). Returns 1 when it handled n, 0 when n is not
 * a training op, or a negative GOPT_E* code with err naming the node. */
int ops_train_infer(gopt_graph *g, int32_t node, gopt_error *err);

/* Cost rule for training op n (shapes must be set): FLOPs, bytes read and written, parameter
 * elements read, per the conventions of ops.h. Returns 1 when it handled n (c filled), else 0. */
int ops_train_cost(const gopt_graph *g, int32_t node, gopt_cost *c);

#endif
