/* k_ref.h: the reference-kernel framework shared by k_ref.c (conversion to/from double, dispatch by
 * op type name) and the op files k_ref_ops.c and k_ref_nn.c. */
#ifndef GOPT_EXEC_K_REF_H
#define GOPT_EXEC_K_REF_H

#include "exec/exec_internal.h"

#define REF_MAX_IO 16

/* A tensor as the reference kernels see it: static shape and values as doubles (v is NULL for an
 * omitted optional input or output). */
typedef struct rt {
  int32_t id;
  int dt, rank;
  int64_t d[GOPT_MAX_RANK];
  int64_t n;
  double *v;
  int written;  /* an op set it: it wrote the output buffer itself (no conversion from v) */
} rt;

/* An op: reads in[0..nin), fills every out[i].v (zeroed, sized from the static output shape). */
typedef int (*ref_fn)(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err);

typedef struct ref_entry {
  const char *name;                                /* ONNX op type */
  ref_fn fn;
  int (*claim)(const gopt_exec *x, int32_t n);     /* NULL: claims every node of the type before the
                                                      specialised kernels; else only when it says so */
} ref_entry;

typedef struct ref_st {
  ref_fn fn;
  int saturate;           /* the node's saturate attribute (default 1): low-bit float outputs */
  const char *round_mode; /* its round_mode (default "up"): FLOAT8E8M0 outputs */
} ref_st;

extern const ref_entry ex_ref_ops_table[];
extern const ref_entry ex_ref_nn_table[];
extern const ref_entry ex_ref_more_table[];
extern const ref_entry ex_ref_llm_table[];
extern const ref_entry ex_ref_extra_table[];
extern const ref_entry ex_ref_ml_table[];
extern const ref_entry ex_ref_train_table[];

/* Prepares k to run fn through the reference framework (inputs as doubles, dtypes checked). */
int ex_prepare_ref_fn(gopt_exec *x, ex_kernel *k, ref_fn fn, gopt_error *err);

/* The values of node n's attribute name as doubles (malloc'd, *count of them): a numeric TENSOR
 * attribute, FLOATS or INTS. NULL with *count 0 when absent or of another kind, -1 when out of
 * memory. */
double *ref_attr_values(const gopt_exec *x, int32_t n, const char *name, int64_t *count);
/* Row-major strides of t. */
void ref_strides(const rt *t, int64_t *st);
/* Flat index into in (numpy-broadcast to out's shape) of out's flat index o. */
int64_t ref_bcast_index(const rt *in, const rt *out, int64_t o);
/* Reads int attribute name (default dflt) as an axis of a rank-`rank` tensor, negative allowed. */
int ref_axis(const gopt_exec *x, int32_t n, const char *name, int64_t dflt, int rank, int *axis,
             gopt_error *err);
/* t viewed as [outer, t->d[axis], inner]. */
void ref_split3(const rt *t, int axis, int64_t *outer, int64_t *mid, int64_t *inner);

typedef struct conv_p {
  int sp;                                   /* spatial rank */
  int64_t s[GOPT_MAX_RANK], dl[GOPT_MAX_RANK], pb[GOPT_MAX_RANK], group;
} conv_p;
/* Conv / ConvTranspose attributes of node n (k_ref_nn.c); begin pads from pads or auto_pad against
 * the static sizes of X, W and Y (in -> out; transpose: ConvTranspose's output_shape). */
void ref_conv_params(const gopt_exec *x, int32_t n, const rt *X, const rt *W, const rt *Y, int transpose,
                     conv_p *p);

#endif
