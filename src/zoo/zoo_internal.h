/* zoo_internal.h: the graph-builder toolkit the zoo's model builders share (internal).
 *
 * A builder runs twice: first in counting mode (b->g == NULL) where nothing is allocated and only
 * nodes/tensors are counted and sizes checked, then for real with the graph reserved to the exact
 * size. Every helper therefore works on zt handles that carry the tensor id (-1 while counting)
 * together with the shape the builder derived itself; shapes are never read back from the graph.
 * Errors are sticky: after the first failure (b->rc != 0) every helper is a no-op, and builders
 * check b->rc in their long loops to stop early. */
#ifndef GOPT_ZOO_INTERNAL_H
#define GOPT_ZOO_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gopt/graph.h"
#include "gopt/zoo.h"

#define ZB_MAXR 6
/* Largest element count one tensor may describe (2^44); keeps FLOP/byte sums finite-ish. */
#define ZB_MAX_NUMEL ((int64_t)1 << 44)
/* Constants whose data is generated (masks, positional tables) carry their bytes up to this many
 * elements; larger ones are structure-only like the weights. */
#define ZB_DATA_LIMIT ((int64_t)1 << 20)

/* A tensor handle: id in the graph (-1 in counting mode) and its shape. */
typedef struct zt {
  int32_t id;
  int rank;
  int64_t d[ZB_MAXR];
} zt;

typedef struct zb {
  gopt_graph *g;            /* NULL while counting */
  gopt_error *err;
  int rc;
  const gopt_zoo_model *model;
  const int64_t *knob;      /* knob values in the model's knob order */
  size_t nodes, tensors;    /* created so far */
  size_t limit;             /* node limit */
  int32_t last;             /* last node added (for attribute setters), -1 while counting */
  char scope[192];          /* name prefix of the block being built ("layer3.1") */
  char name[320];           /* scratch for full names */
} zb;

typedef void (*zb_build_fn)(zb *b);

/* A registered model: the public description and its builder. */
typedef struct zoo_entry {
  gopt_zoo_model pub;
  zb_build_fn build;
} zoo_entry;

/* gopt_zoo_node_count with another node limit (tests exercise the limit with small ones). */
int zoo_node_count_limit(const char *spec, size_t limit, size_t *nodes, gopt_error *err);

/* Value of the named knob of the model being built (the name must be one of its knobs). */
int64_t zb_knob(const zb *b, const char *name);

/* ---- shapes ---- */
zt zs_make(int rank, const int64_t *d);
#define ZS(...) zs_make((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
/* numpy broadcast of two shapes (caller guarantees compatibility). */
zt zs_bcast(zt a, zt b);
int64_t zs_numel(zt s);

/* ---- naming and errors ---- */
/* Sets the scope (printf-style); names of later nodes/params are "<scope>.<local>". */
void zb_scope(zb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fails the build with a one-line message prefixed "zoo: <model>: " (first failure wins). */
void zb_fail(zb *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int zb_ok(const zb *b);

/* ---- tensors ---- */
/* Graph input named exactly `name` (not scoped). */
zt zb_input(zb *b, const char *name, int dtype, zt shape);
/* Trainable float parameter "<scope>.<local>" without data (GOPT_T_CONST | GOPT_T_PARAM). */
zt zb_param(zb *b, const char *local, zt shape);
/* Non-trainable float constant "<scope>.<local>" without data (BN running statistics). */
zt zb_buffer(zb *b, const char *local, zt shape);
/* Float constant named exactly `name`, with data (copied) or NULL; reused when a tensor of that
 * name exists already (shared constants). */
zt zb_const_f32(zb *b, const char *name, zt shape, const float *data);
/* Float scalar constant (rank 0) with data, shared by value. */
zt zb_scalar(zb *b, float v);
/* 1-D int64 constant with data, shared by value (named after its values). */
zt zb_ints(zb *b, int n, const int64_t *v);
#define ZI(...) zb_ints(b, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
/* 1-D int64 constant with data named exactly `name` (for long lists), shared by name. */
zt zb_ints_named(zb *b, const char *name, int n, const int64_t *v);
/* Rank-0 int64 constant with data, shared by value. */
zt zb_int_scalar(zb *b, int64_t v);
void zb_output(zb *b, zt t);

/* ---- nodes ---- */
/* Node "<scope>.<local>" of op `type` with n_in inputs (tensor ids, -1 = omitted) and one output
 * of shape `out` named like the node. */
zt zb_op_arr(zb *b, const char *type, const char *local, zt out, int n_in, const int32_t *in);
/* Same with the input ids as int32_t varargs (at most 16). */
zt zb_op(zb *b, const char *type, const char *local, zt out, int n_in, ...);
/* Node with n_out outputs "<name>:<i>", shapes outs[i] (ids filled in). */
void zb_op_multi(zb *b, const char *type, const char *local, int n_out, zt *outs, int n_in,
                 const int32_t *in);
/* Attribute setters on the last node added (no-ops while counting). */
void zb_ai(zb *b, const char *name, int64_t v);
void zb_af(zb *b, const char *name, double v);
void zb_ais(zb *b, const char *name, int n, const int64_t *v);
#define ZAIS(name, ...) zb_ais(b, name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* ---- layers ---- */
zt zb_unary(zb *b, const char *type, const char *local, zt x);
zt zb_binary(zb *b, const char *type, const char *local, zt x, zt y);
/* Batched MatMul with numpy broadcasting of the leading dims. */
zt zb_matmul(zb *b, const char *local, zt x, zt y);
/* x[..., in] @ W[in, out] (+ bias[out] when bias): params "<local>.weight", "<local>.bias";
 * nodes "<local>" (MatMul) and "<local>.add". */
zt zb_linear(zb *b, const char *local, zt x, int64_t out, int bias);
/* 2-D convolution without bias (kernel kh x kw, stride, pads t/l/b/r, group); weight
 * "<local>.weight". */
zt zb_conv2d(zb *b, const char *local, zt x, int64_t cout, int kh, int kw, int sh, int sw,
             int pt, int pl, int pb, int pr, int64_t group);
/* TF "SAME" padding of one spatial dim of size `in` (kernel k, stride s): begin/end pads. */
void zb_same_pads(int64_t in, int k, int s, int *pb, int *pe);
/* zb_conv2d with TF "SAME" padding (stride s both ways). */
zt zb_conv_same(zb *b, const char *local, zt x, int64_t cout, int kh, int kw, int s,
                int64_t group);
/* Square conv with bias (torchvision's nn.Conv2d default): params "<local>.weight/.bias". */
zt zb_conv2d_bias(zb *b, const char *local, zt x, int64_t cout, int k, int s, int p);
/* Inference BatchNormalization: params weight/bias, buffers running_mean/running_var. */
zt zb_bn(zb *b, const char *local, zt x, double eps);
zt zb_layernorm(zb *b, const char *local, zt x, double eps);
/* MaxPool / AveragePool (type) 2-D with pads t/l/b/r; count_include_pad for AveragePool. */
zt zb_pool2d(zb *b, const char *type, const char *local, zt x, int k, int s, int pt, int pl,
             int pb, int pr, int count_include_pad);
zt zb_reshape(zb *b, const char *local, zt x, zt shape);
zt zb_transpose(zb *b, const char *local, zt x, int n, const int64_t *perm);
#define ZTRANS(local, x, ...) zb_transpose(b, local, x, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
/* Concat of n <= 16 handles; zb_concat_ids takes any number of ids and the output shape. */
zt zb_concat(zb *b, const char *local, int axis, int n, const zt *xs);
zt zb_concat_ids(zb *b, const char *local, int axis, int n, const int32_t *ids, zt out);
/* Equal split of x along axis into n outputs (split sizes as a constant input). */
void zb_split(zb *b, const char *local, zt x, int axis, int n, zt *outs);
/* Slice of x along one axis [start, end). */
zt zb_slice(zb *b, const char *local, zt x, int axis, int64_t start, int64_t end);
zt zb_squeeze(zb *b, const char *local, zt x, int axis);
zt zb_unsqueeze(zb *b, const char *local, zt x, int axis);
/* Multi-head attention core: q [B,Sq,H], k/v [B,Sk,H] projections -> [B,Sq,H]. mask: additive
 * mask broadcastable to [B,heads,Sq,Sk], or a rank-0 handle for none. Nodes under "<local>.". */
zt zb_attention(zb *b, const char *local, zt q, zt k, zt v, int64_t heads, zt mask);
/* Additive causal mask [Sq, Sk] where query i may see keys j <= i + (Sk - Sq) (0 / -10000). */
zt zb_causal_mask(zb *b, int64_t sq, int64_t sk);
/* Sinusoidal position table [n, d] (data when small); rows in order, or reversed when rev. */
zt zb_sinusoid(zb *b, const char *name, int64_t n, int64_t d, int rev);
/* ONNX-export style GELU: erf form (BERT) or tanh form (GPT-2). */
zt zb_gelu_erf(zb *b, const char *local, zt x);
zt zb_gelu_tanh(zb *b, const char *local, zt x);

/* ---- models (zoo_cnn.c, zoo_nlp.c, zoo_rnn.c) ---- */
extern const zoo_entry zoo_inception_v3, zoo_resnet50, zoo_transformer, zoo_transformer_xl,
    zoo_bert, zoo_gpt2, zoo_wavenet, zoo_gnmt, zoo_amoebanet, zoo_rnnlm, zoo_resnext50,
    zoo_squeezenet, zoo_vgg19, zoo_nasnet_a, zoo_nasrnn, zoo_bert_tensat;
#define ZOO_KNOBS(arr) (sizeof(arr) / sizeof((arr)[0])), (arr)

#endif
