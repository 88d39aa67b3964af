/* gopt/ops.h: the op registry: op kinds, their fusion class, shape inference and cost facts.
 *
 * Every op kind in op_list.h has a shape rule (output dtypes and shapes from inputs and
 * attributes, with symbolic dimensions) and a cost rule (FLOPs, bytes read and written). Shape
 * inference also propagates the values of small integer tensors (shapes being computed by
 * Shape -> Gather -> Concat -> Reshape chains), symbolically where a dim is symbolic, and folds
 * tensors whose values become fully known into constants. */
#ifndef GOPT_OPS_H
#define GOPT_OPS_H

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gopt_op {
#define GOPT_OP(e, name, cls) GOPT_OP_##e,
#include "gopt/op_list.h"
  GOPT_OP_COUNT
} gopt_op;

/* Fusion classes, in TVM's order of increasing fusion difficulty. SHAPE ops only reinterpret
 * metadata (no data movement in a row-major layout). */
typedef enum gopt_op_class {
  GOPT_OPC_SHAPE = 0,
  GOPT_OPC_ELEMWISE,
  GOPT_OPC_BROADCAST,
  GOPT_OPC_INJECTIVE,
  GOPT_OPC_REDUCE,
  GOPT_OPC_CONV,
  GOPT_OPC_OPAQUE
} gopt_op_class;

/* Kind for a type name ("Conv"); GOPT_OP_OPAQUE when gopt has no rule for it. */
int gopt_op_from_name(const char *type);
/* Canonical type name of a kind ("" for OPAQUE). */
const char *gopt_op_name(int op);
int gopt_op_class_of(int op);
const char *gopt_op_class_name(int cls);

/* Cost facts of one node. FLOPs count a multiply-accumulate as 2; an elementwise op as about one
 * FLOP per output element (transcendental ops a few). Bytes are of all inputs read (including
 * weights) and all outputs written, at the tensors' dtypes. params = elements of the node's
 * parameter (GOPT_T_PARAM) inputs. */
typedef struct gopt_cost {
  double flops;
  double bytes_read;
  double bytes_written;
  int64_t params;
} gopt_cost;

/* Options of shape inference. */
typedef struct gopt_infer_opts {
  int fold_constants;   /* fold shape subgraphs whose values become known into constants */
  int keep_source_shapes; /* for opaque ops, keep shapes that came with the source (value_info) */
} gopt_infer_opts;

/* Infers every tensor's dtype and shape in topological order and (when asked) folds constant
 * shape computations. Opaque ops keep the shapes their source gave them; when an opaque op's
 * output has no shape the import fails earlier, not here. Returns 0, or an error naming the node
 * and what is inconsistent (GOPT_ESHAPE). */
int gopt_infer_shapes(gopt_graph *g, const gopt_infer_opts *opts, gopt_error *err);

/* Replaces symbol `name` by the value v in every tensor shape (used for --batch). Returns the
 * number of dims replaced. */
size_t gopt_graph_bind_symbol(gopt_graph *g, const char *name, int64_t v);

/* The symbolic leading dim of the first graph input that has one (the batch dim), or NULL. */
const char *gopt_graph_batch_symbol(const gopt_graph *g);

/* Runs a fixed-batch-1 graph (shapes inferred with constant folding) at batch size `batch`: dim 0
 * of every input whose dim 0 is 1 becomes batch, the constant Reshape targets of activations are
 * scaled to match (a leading 1 becomes the batch; a leading dim that folds the batch with others,
 * e.g. Swin's [64, 49, 96] windows x tokens, is multiplied by it; a target shared by several
 * Reshapes changes once), and shapes are inferred again. Returns 0, GOPT_EINVAL (no input of
 * batch 1) or the shape error of a graph whose batch is baked in elsewhere. */
int gopt_graph_rebatch(gopt_graph *g, int64_t batch, gopt_error *err);

/* Cost facts of node n (shapes must be inferred; symbolic dims count as 1). */
void gopt_node_cost(const gopt_graph *g, int32_t n, gopt_cost *c);

/* Model totals. params is the total element count of the model's initializers (GOPT_T_INIT:
 * weights, BatchNorm statistics, any dtype; as python-onnx counts graph.initializer), each
 * counted once however many nodes read it; trainable counts the float parameters
 * (GOPT_T_PARAM). flops and bytes are sums over live nodes. */
typedef struct gopt_graph_stats {
  size_t nodes, edges, tensors;
  int64_t params;
  int64_t trainable;
  int64_t param_bytes;
  double flops;
  double bytes;         /* bytes read + written over all nodes */
} gopt_graph_stats;
void gopt_graph_stats_compute(const gopt_graph *g, gopt_graph_stats *s);

#ifdef __cplusplus
}
#endif
#endif
