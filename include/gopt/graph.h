/* gopt/graph.h: the graph IR every gopt task works on.
 *
 * A graph is a set of nodes (ops) and tensors (values) stored in flat arrays owned by the graph and
 * addressed by int32 ids. A node reads input tensors through input "slots" and produces output
 * tensors; each tensor keeps a linked list of the slots that use it, so rewiring uses, removing and
 * inserting nodes are O(degree). Removed nodes are marked dead and their storage is reclaimed by
 * gopt_graph_compact(), which renumbers ids. Storage order is not execution order:
 * gopt_graph_topo() computes a topological order.
 *
 * Nothing here is specific to ONNX: op kinds are gopt's own (see ops.h), dtypes use the ONNX
 * numbering only because every front end maps onto it, symbolic dimensions are first-class, a node
 * may have any number of outputs (HLO tuples), and attributes may reference sub-graphs (HLO
 * computations of reduce/fusion, ONNX If/Loop bodies).
 *
 * Sizes: gopt_node is 32 bytes, gopt_tensor 32 bytes, an input slot 12 bytes, an attribute 24
 * bytes; docs/IR.md gives the measured bytes per node for whole models.
 */
#ifndef GOPT_GRAPH_H
#define GOPT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GOPT_MAX_RANK 16

/* Element types; the values equal ONNX TensorProto.DataType. */
typedef enum gopt_dtype {
  GOPT_DT_UNDEFINED = 0,
  GOPT_DT_FLOAT = 1,
  GOPT_DT_UINT8 = 2,
  GOPT_DT_INT8 = 3,
  GOPT_DT_UINT16 = 4,
  GOPT_DT_INT16 = 5,
  GOPT_DT_INT32 = 6,
  GOPT_DT_INT64 = 7,
  GOPT_DT_STRING = 8,
  GOPT_DT_BOOL = 9,
  GOPT_DT_FLOAT16 = 10,
  GOPT_DT_DOUBLE = 11,
  GOPT_DT_UINT32 = 12,
  GOPT_DT_UINT64 = 13,
  GOPT_DT_COMPLEX64 = 14,
  GOPT_DT_COMPLEX128 = 15,
  GOPT_DT_BFLOAT16 = 16,
  GOPT_DT_FLOAT8E4M3FN = 17,
  GOPT_DT_FLOAT8E4M3FNUZ = 18,
  GOPT_DT_FLOAT8E5M2 = 19,
  GOPT_DT_FLOAT8E5M2FNUZ = 20,
  GOPT_DT_UINT4 = 21,
  GOPT_DT_INT4 = 22,
  GOPT_DT_FLOAT4E2M1 = 23,
  GOPT_DT_FLOAT8E8M0 = 24,
  GOPT_DT_UINT2 = 25,
  GOPT_DT_INT2 = 26,
  GOPT_DT_COUNT
} gopt_dtype;

/* The 8-, 4- and 2-bit types (17..26) are held one element per byte in memory (a 4- or 2-bit
 * value in the low bits: INT4/INT2 sign-extended, the others as their code); ONNX packs the
 * sub-byte ones two or four to a byte (low bits first), which gopt_lowbit_pack/unpack convert. */
/* Bits per element in ONNX's packed form (8 for the byte types; 0 for STRING/UNDEFINED). */
int gopt_dtype_bits(int dtype);
/* Whether dtype is one of the 8-, 4- or 2-bit float or integer types (17..26). */
int gopt_dtype_is_lowbit(int dtype);
/* The value of one element (its byte as held in memory) of a low-bit dtype. */
double gopt_lowbit_to_double(int dtype, uint8_t v);
/* Converts d to a low-bit dtype's byte: round to nearest even; with saturate, values beyond the
 * largest finite one (infinities included) become it, otherwise infinity or NaN as ONNX's Cast
 * says (integers always clamp). round_mode ("up", "down", "nearest"; NULL: "up") is
 * FLOAT8E8M0's. */
uint8_t gopt_lowbit_from_double(int dtype, double d, int saturate, const char *round_mode);
/* n elements, one per byte, of a sub-byte dtype <-> ONNX's packed bytes ((n * bits + 7) / 8). */
void gopt_lowbit_pack(int dtype, const uint8_t *in, int64_t n, uint8_t *out);
void gopt_lowbit_unpack(int dtype, const uint8_t *in, int64_t n, uint8_t *out);

/* "FLOAT", "INT64", ... (ONNX's names); "UNDEFINED" for unknown values. */
const char *gopt_dtype_name(int dtype);
/* Bytes per element (0 for STRING/UNDEFINED). */
size_t gopt_dtype_size(int dtype);
/* Parses an ONNX dtype name; returns GOPT_DT_UNDEFINED when unknown. */
int gopt_dtype_from_name(const char *name);

/* A dimension is >= 0, or a symbol: GOPT_DIM_SYM(k) encodes symbol k of the graph's symbol table
 * (a dim_param such as "batch", or an unnamed unknown). */
#define GOPT_DIM_SYM(k) (-(int64_t)(k)-1)
#define GOPT_DIM_IS_SYM(d) ((d) < 0)
#define GOPT_DIM_SYM_ID(d) ((uint32_t)(-((d) + 1)))

/* Tensor flags. */
enum {
  GOPT_T_INPUT = 1 << 0,     /* graph input (fed at run time) */
  GOPT_T_OUTPUT = 1 << 1,    /* graph output */
  GOPT_T_CONST = 1 << 2,     /* constant (initializer or folded): has a gopt_const entry */
  GOPT_T_PARAM = 1 << 3,     /* trainable parameter (an initializer of a float type) */
  GOPT_T_NOSHAPE = 1 << 4,   /* rank unknown: shape inference could not tell */
  GOPT_T_ATTR = 1 << 5,      /* holds an attribute's tensor value; not part of the dataflow */
  GOPT_T_STATE = 1 << 6,     /* optimizer state / gradient accumulator in training graphs */
  GOPT_T_INIT = 1 << 7       /* came from a source initializer (counted by graph stats' params) */
};

typedef struct gopt_tensor {
  uint32_t name;      /* string id */
  uint8_t dtype;      /* gopt_dtype */
  uint8_t rank;
  uint16_t flags;     /* GOPT_T_* */
  uint32_t dims;      /* offset of rank int64 dims in g->dims */
  int32_t producer;   /* producing node, -1 for inputs and constants */
  int32_t out_index;  /* output position in the producer */
  int32_t first_use;  /* first input slot reading this tensor, -1 when none */
  int32_t cdata;      /* index in g->consts when GOPT_T_CONST, else -1 */
  uint32_t pad;
} gopt_tensor;

/* Node flags. */
enum {
  GOPT_N_DEAD = 1 << 0,    /* removed; storage reclaimed by gopt_graph_compact */
  GOPT_N_OPAQUE = 1 << 1,  /* no shape/cost rule: shapes come from the source (value_info) */
  GOPT_N_GRAD = 1 << 2,    /* backward op of a training graph */
  GOPT_N_UPDATE = 1 << 3   /* optimizer update op of a training graph */
};

typedef struct gopt_node {
  uint32_t name;      /* string id (unique names are assigned on import when missing) */
  uint32_t type;      /* string id of the op type as the source wrote it ("Conv", "dom::Op") */
  uint16_t op;        /* gopt_op kind (ops.h); GOPT_OP_OPAQUE when gopt has no rule */
  uint16_t flags;     /* GOPT_N_* */
  uint16_t n_in;
  uint16_t n_out;
  uint32_t in;        /* first input slot in g->slots */
  uint32_t out;       /* first output id in g->outs */
  uint32_t attr;      /* first attribute in g->attrs */
  uint16_t n_attr;
  uint16_t pad;
} gopt_node;

/* One input position of one node. tensor == -1 is an omitted optional input. */
typedef struct gopt_slot {
  int32_t tensor;
  int32_t node;
  int32_t next_use;   /* next slot using the same tensor, -1 at the end */
} gopt_slot;

typedef enum gopt_attr_kind {
  GOPT_ATTR_INT = 1,
  GOPT_ATTR_FLOAT,
  GOPT_ATTR_STRING,
  GOPT_ATTR_INTS,
  GOPT_ATTR_FLOATS,
  GOPT_ATTR_STRINGS,
  GOPT_ATTR_TENSOR,   /* a constant tensor (flag GOPT_T_ATTR) */
  GOPT_ATTR_GRAPH     /* a sub-graph in g->subgraphs */
} gopt_attr_kind;

typedef struct gopt_attr {
  uint32_t name;      /* string id */
  uint8_t kind;       /* gopt_attr_kind */
  uint8_t pad[3];
  uint32_t n;         /* element count for lists */
  uint32_t pad2;
  union {
    int64_t i;        /* INT */
    double f;         /* FLOAT */
    uint32_t s;       /* STRING: string id */
    uint32_t off;     /* INTS: offset in g->ints; FLOATS: in g->floats; STRINGS: in g->strids */
    int32_t tensor;   /* TENSOR */
    int32_t graph;    /* GRAPH */
  } v;
} gopt_attr;

/* Constant data of a tensor. data == NULL when the bytes are not available (external data file
 * missing): shapes and costs still work, execution does not. */
typedef struct gopt_const {
  void *data;
  size_t nbytes;
  int32_t tensor;
  uint32_t external;  /* string id of the external data location, 0 when inline */
  int64_t ext_offset;
  int64_t ext_length;
} gopt_const;

/* Interned strings. Id 0 is the empty string. */
typedef struct gopt_strtab gopt_strtab;

typedef struct gopt_opset {
  uint32_t domain;    /* string id ("" = the default domain) */
  int64_t version;
} gopt_opset;

/* A property of a whole graph kept from its source (HLO module attributes and header tables):
 * key and value are string ids. */
typedef struct gopt_prop {
  uint32_t key, val;
} gopt_prop;

#define GOPT_ARRAY(T) struct { T *a; size_t n, cap; }

typedef struct gopt_graph {
  uint32_t name;
  gopt_strtab *strs;
  GOPT_ARRAY(gopt_node) nodes;
  GOPT_ARRAY(gopt_tensor) tensors;
  GOPT_ARRAY(gopt_slot) slots;
  GOPT_ARRAY(int32_t) outs;      /* output tensor ids of nodes */
  GOPT_ARRAY(gopt_attr) attrs;
  GOPT_ARRAY(int64_t) dims;
  GOPT_ARRAY(int64_t) ints;
  GOPT_ARRAY(float) floats;
  GOPT_ARRAY(uint32_t) strids;
  GOPT_ARRAY(gopt_const) consts;
  GOPT_ARRAY(int32_t) inputs;    /* graph inputs, in order */
  GOPT_ARRAY(int32_t) outputs;   /* graph outputs, in order */
  GOPT_ARRAY(uint32_t) syms;     /* symbol k -> string id of its name */
  GOPT_ARRAY(struct gopt_graph *) subgraphs;
  GOPT_ARRAY(gopt_opset) opsets;
  GOPT_ARRAY(gopt_prop) props;   /* source properties, in insertion order (not in the hash) */
  GOPT_ARRAY(int32_t) tensor_of_str; /* string id -> tensor id (-1) for name lookup */
  GOPT_ARRAY(int32_t) sym_of_str;    /* string id -> symbol id (-1) for named symbols */
  int64_t ir_version;              /* of the source format, 0 when none */
  size_t n_dead;                   /* dead nodes not yet compacted */
  uint32_t n_unnamed;              /* counter for generated names */
  struct gopt_graph *parent;       /* enclosing graph of a sub-graph (shares nothing) */
} gopt_graph;

/* ---- strings ---------------------------------------------------------------------------- */
uint32_t gopt_graph_intern(gopt_graph *g, const char *s);
uint32_t gopt_graph_intern_n(gopt_graph *g, const char *s, size_t len);
const char *gopt_graph_str(const gopt_graph *g, uint32_t id);

/* ---- lifetime ----------------------------------------------------------------------------- */
gopt_graph *gopt_graph_new(const char *name);
void gopt_graph_free(gopt_graph *g);  /* accepts NULL; frees sub-graphs and constant data */
gopt_graph *gopt_graph_clone(const gopt_graph *g);
/* A clone whose own constants of more than max_bytes carry no bytes (data NULL, nbytes kept;
 * sub-graphs and attribute tensors such as ConstantOfShape's value are copied whole): the
 * structure of a model without copying its large weights (SIZE_MAX: gopt_graph_clone). */
gopt_graph *gopt_graph_clone_lean(const gopt_graph *g, size_t max_bytes);
/* Reserves room for about n nodes (and as many tensors) to avoid regrowth while building. */
void gopt_graph_reserve(gopt_graph *g, size_t n_nodes);

/* ---- tensors ------------------------------------------------------------------------------ */
/* Adds a tensor. name may be NULL or "" for a generated unique name. dims may be NULL when rank is
 * 0; rank < 0 means unknown shape (GOPT_T_NOSHAPE). Returns the id, or -1 with err set when the
 * name is taken, rank too large, or memory runs out. */
int32_t gopt_graph_add_tensor(gopt_graph *g, const char *name, int dtype, int rank,
                              const int64_t *dims, gopt_error *err);
/* Id of the tensor with this name, -1 when none. */
int32_t gopt_graph_find_tensor(const gopt_graph *g, const char *name);
/* Replaces the shape (rank < 0: unknown). Returns 0, or an error when rank > GOPT_MAX_RANK. */
int gopt_tensor_set_shape(gopt_graph *g, int32_t t, int rank, const int64_t *dims);
static inline const int64_t *gopt_tensor_dims(const gopt_graph *g, int32_t t) {
  return g->dims.a + g->tensors.a[t].dims;
}
/* Number of elements; symbolic dims count as 1 (use gopt_tensor_is_static to check); saturates
 * at INT64_MAX. */
int64_t gopt_tensor_numel(const gopt_graph *g, int32_t t);
int gopt_tensor_is_static(const gopt_graph *g, int32_t t);
/* Bytes of t's data: numel times the dtype's size (symbolic dims count as 1); 0 when t < 0 or its
 * shape is unknown. A double, so huge tensors cannot overflow. */
double gopt_tensor_bytes(const gopt_graph *g, int32_t t);
/* Symbol id for a name (interned, created on first use). */
uint32_t gopt_graph_symbol(gopt_graph *g, const char *name);
/* A fresh unnamed symbol ("unk__N"). */
uint32_t gopt_graph_new_symbol(gopt_graph *g);
/* Makes t a constant with the given bytes (copied; data NULL = bytes not available). */
int gopt_tensor_set_const(gopt_graph *g, int32_t t, const void *data, size_t nbytes, gopt_error *err);
/* As gopt_tensor_set_const, but takes ownership of data (malloc'd; freed with the graph, or here
 * on failure) instead of copying it. */
int gopt_tensor_adopt_const(gopt_graph *g, int32_t t, void *data, size_t nbytes, gopt_error *err);
/* Constant bytes of t, NULL when t is not constant or its bytes are missing. */
const void *gopt_tensor_data(const gopt_graph *g, int32_t t);
int gopt_graph_add_input(gopt_graph *g, int32_t t);
/* Records an operator-set import (domain "" = the default domain); replaces an existing one. */
int gopt_graph_set_opset(gopt_graph *g, const char *domain, int64_t version);
/* Version of the opset imported for domain by g or the nearest enclosing graph that imports it
 * ("" and "ai.onnx" both name the default domain), or dflt when none. */
int64_t gopt_graph_opset(const gopt_graph *g, const char *domain, int64_t dflt);
int gopt_graph_add_output(gopt_graph *g, int32_t t);
/* Sets property key to val (replacing an earlier value; order of first setting kept). Returns 0
 * or GOPT_ENOMEM. Properties travel with clones and are not part of gopt_graph_hash. */
int gopt_graph_set_prop(gopt_graph *g, const char *key, const char *val);
/* Value of property key, NULL when unset. */
const char *gopt_graph_get_prop(const gopt_graph *g, const char *key);

/* ---- nodes -------------------------------------------------------------------------------- */
/* Adds a node of the given op type string ("Conv"); its gopt_op kind is looked up in the op
 * registry (GOPT_OP_OPAQUE when unknown). inputs may contain -1 for omitted optional inputs;
 * outputs must be tensors with no producer yet. Returns the node id or -1 with err set. */
int32_t gopt_graph_add_node(gopt_graph *g, const char *type, const char *name, int n_in,
                            const int32_t *inputs, int n_out, const int32_t *outputs,
                            gopt_error *err);
static inline int32_t gopt_node_input(const gopt_graph *g, int32_t n, int i) {
  return g->slots.a[g->nodes.a[n].in + (uint32_t)i].tensor;
}
static inline int32_t gopt_node_output(const gopt_graph *g, int32_t n, int i) {
  return g->outs.a[g->nodes.a[n].out + (uint32_t)i];
}
static inline int gopt_node_alive(const gopt_graph *g, int32_t n) {
  return !(g->nodes.a[n].flags & GOPT_N_DEAD);
}
const char *gopt_node_type(const gopt_graph *g, int32_t n);
const char *gopt_node_name(const gopt_graph *g, int32_t n);

/* Attribute setters replace an existing attribute of the same name. */
int gopt_node_set_int(gopt_graph *g, int32_t n, const char *name, int64_t v);
int gopt_node_set_float(gopt_graph *g, int32_t n, const char *name, double v);
int gopt_node_set_string(gopt_graph *g, int32_t n, const char *name, const char *v);
int gopt_node_set_ints(gopt_graph *g, int32_t n, const char *name, const int64_t *v, size_t cnt);
int gopt_node_set_floats(gopt_graph *g, int32_t n, const char *name, const float *v, size_t cnt);
int gopt_node_set_strings(gopt_graph *g, int32_t n, const char *name, const char *const *v, size_t cnt);
int gopt_node_set_tensor(gopt_graph *g, int32_t n, const char *name, int32_t tensor);
int gopt_node_set_graph(gopt_graph *g, int32_t n, const char *name, gopt_graph *sub); /* takes ownership */
/* Attribute lookup: NULL when absent. */
const gopt_attr *gopt_node_attr(const gopt_graph *g, int32_t n, const char *name);
int64_t gopt_node_get_int(const gopt_graph *g, int32_t n, const char *name, int64_t dflt);
double gopt_node_get_float(const gopt_graph *g, int32_t n, const char *name, double dflt);
/* INTS attribute: pointer to its values and count in *cnt; NULL (cnt 0) when absent. */
const int64_t *gopt_node_get_ints(const gopt_graph *g, int32_t n, const char *name, size_t *cnt);
const float *gopt_node_get_floats(const gopt_graph *g, int32_t n, const char *name, size_t *cnt);
const char *gopt_node_get_string(const gopt_graph *g, int32_t n, const char *name, const char *dflt);

/* ---- editing -------------------------------------------------------------------------------- */
/* Points input slot i of node n at tensor t (-1 to omit), keeping use lists right. */
int gopt_node_set_input(gopt_graph *g, int32_t n, int i, int32_t t);
/* Makes every use of tensor from (node inputs and graph outputs) use tensor to instead.
 * Returns the number of uses rewired. */
size_t gopt_graph_replace_uses(gopt_graph *g, int32_t from, int32_t to);
/* Removes node n: its inputs are unlinked, its outputs lose their producer (a tensor still used
 * afterwards dangles until rewired), and the node is marked dead. */
int gopt_graph_remove_node(gopt_graph *g, int32_t n);
/* Number of uses of t by live nodes. */
size_t gopt_tensor_use_count(const gopt_graph *g, int32_t t);
/* Drops dead nodes and tensors that are neither used, produced, inputs, outputs nor attributes;
 * renumbers ids. old_to_new_node (may be NULL) receives n_nodes_before entries (-1 = dropped). */
int gopt_graph_compact(gopt_graph *g, int32_t *old_to_new_node);

/* ---- analysis ------------------------------------------------------------------------------- */
/* Live node count. */
size_t gopt_graph_node_count(const gopt_graph *g);
/* Dataflow edge count: (producer node, consumer node) input slots over live nodes. */
size_t gopt_graph_edge_count(const gopt_graph *g);
/* Topological order of the live nodes into order (room for g->nodes.n); deterministic (Kahn's
 * algorithm, ready nodes taken in id order). Returns the count, or GOPT_EGRAPH with the name of a
 * node on a cycle in err. */
int64_t gopt_graph_topo(const gopt_graph *g, int32_t *order, gopt_error *err);
/* Topological order that keeps storage order wherever the dependencies allow (Kahn's algorithm
 * taking the smallest ready node id first; O(n log n)): a graph imported from a file in a valid
 * order keeps that order, so export -> import -> export is stable. Same returns as above. */
int64_t gopt_graph_topo_stable(const gopt_graph *g, int32_t *order, gopt_error *err);
/* Checks the graph: every input read is produced, an input, or a constant; names unique; no
 * cycle; producer/use links consistent. Returns 0 or the first problem in err. */
int gopt_graph_validate(const gopt_graph *g, gopt_error *err);
/* Canonical structural hash: independent of names, storage order and dead nodes; depends on op
 * types, attributes, dtypes and shapes, constant bytes, and how outputs are computed. Two graphs
 * that compute the same outputs by the same op structure hash equal. */
uint64_t gopt_graph_hash(const gopt_graph *g);
/* Bytes the graph's own storage takes (arrays, strings, constant data when include_data). */
size_t gopt_graph_memory(const gopt_graph *g, int include_data);

#ifdef __cplusplus
}
#endif
#endif
