/* k_dnnl.c: kernels backed by oneDNN (libdnnl 2.6, OpenMP runtime): Conv (1-D/2-D/3-D, groups,
 * dilations), MatMul (batched, broadcast) and Gemm (matmul primitive; transposes as strides) --
 * constant weights reordered once into the layout the primitive prefers, one copy per weight
 * tensor and layout shared by every primitive reading it (packed_weights) --, MaxPool/AveragePool,
 * BatchNormalization (inference), LayerNormalization, Softmax/LogSoftmax. Primitives are created
 * when the executor is prepared; a run only points their memories at the current buffers. Gemm with
 * alpha/beta other than 1 uses OpenBLAS sgemm. */
#include <cblas.h>
#undef I /* complex.h (through cblas.h) defines I */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

/* A constant weight tensor reordered into the layout a primitive wants (a packed MatMul/Gemm
 * weight, a blocked conv filter): read from tensor w through the descriptor usr, stored as want.
 * Every primitive that reads w through usr and wants the same layout shares this one copy (the
 * unrolled steps of a recurrent graph read one weight from hundreds of MatMuls). */
typedef struct dn_packed {
  int32_t w;
  dnnl_memory_desc_t usr, want;
  void *buf;
} dn_packed;

typedef struct ex_dnnl {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  void *scr[2];     /* shared scratch for blocked-layout conv input/output (steps run one by one) */
  size_t scr_n[2];
  dn_packed *packed; /* the cache of reordered constant weights, owned here */
  size_t n_packed, cap_packed;
  size_t packed_bytes, packed_readers; /* bytes of the copies; weight arguments bound to one */
} ex_dnnl;

/* Grows shared scratch buffer i to at least n bytes. */
static int scratch_reserve(ex_dnnl *d, int i, size_t n) {
  if (d->scr_n[i] >= n) return GOPT_OK;
  void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
  if (!p) return GOPT_ENOMEM;
  free(d->scr[i]);
  d->scr[i] = p;
  d->scr_n[i] = n;
  return GOPT_OK;
}

int ex_dnnl_init(gopt_exec *x, gopt_error *err) {
  ex_dnnl *d = calloc(1, sizeof *d);
  if (!d) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  x->dnnl = d;
  if (dnnl_engine_create(&d->eng, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags) != dnnl_success)
    return gopt_error_set(err, GOPT_EUNSUP, "oneDNN: cannot create a CPU engine");
  return GOPT_OK;
}

void ex_dnnl_fini(gopt_exec *x) {
  ex_dnnl *d = x->dnnl;
  if (!d) return;
  if (d->stream) dnnl_stream_destroy(d->stream);
  if (d->eng) dnnl_engine_destroy(d->eng);
  free(d->scr[0]);
  free(d->scr[1]);
  for (size_t i = 0; i < d->n_packed; i++) free(d->packed[i].buf);
  free(d->packed);
  free(d);
  x->dnnl = NULL;
}

size_t gopt_exec_packed_weights(const gopt_exec *x, size_t *bytes, size_t *readers) {
  const ex_dnnl *d = x ? x->dnnl : NULL;
  if (bytes) *bytes = d ? d->packed_bytes : 0;
  if (readers) *readers = d ? d->packed_readers : 0;
  return d ? d->n_packed : 0;
}

int ex_dnnl_handles(int op) {
  switch (op) {
    case GOPT_OP_CONV: case GOPT_OP_MATMUL: case GOPT_OP_GEMM: case GOPT_OP_MAX_POOL:
    case GOPT_OP_AVERAGE_POOL: case GOPT_OP_BATCH_NORM: case GOPT_OP_LAYER_NORM:
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX:
      return 1;
    default: return 0;
  }
}

/* arguments of one primitive: a concat's inputs, or a chain's source, weights, bias, destination
 * and the operands of its binary post-ops */
#define DN_MAX_ARGS (EX_CONCAT_MAX + 8 > 6 + EX_MAX_POST ? EX_CONCAT_MAX + 8 : 6 + EX_MAX_POST)

/* A primitive and the memories of its arguments. tensor[i] >= 0: the memory points at that
 * tensor's buffer on each run; -1: fixed memory (reordered weights, owned by the cache of
 * ex_dnnl, or shared scratch). */
typedef struct dn_st {
  dnnl_primitive_t prim;
  int n;
  int arg[DN_MAX_ARGS];
  int32_t tensor[DN_MAX_ARGS];
  dnnl_memory_t mem[DN_MAX_ARGS];
  /* a tensor whose layout differs from the primitive's: the input is reordered into scratch 0
   * (re_in), the primitive writes scratch 1 and re_out reorders it into the output */
  dnnl_primitive_t re_in, re_out;
  dnnl_primitive_t pre;                /* or instead of re_in: the AveragePool a 1x1 conv runs first */
  dnnl_memory_t m_usr_in, m_usr_out;  /* views of the tensors in their own layouts */
  int scr_arg[2];                      /* index in mem[] of the memories on scratch 0 / 1 */
  /* sum post-op: the residual is copied (res_bytes) or reordered (re_res) into the destination */
  int32_t res;
  size_t res_bytes;
  dnnl_primitive_t re_res;
  dnnl_memory_t m_res;
  int dst_arg;                         /* index in mem[] of the destination memory */
  /* Gemm fallback (alpha/beta) */
  int blas;
  int64_t M, N, K;
  int ta, tb;
  float alpha, beta;
  int c_rank;
  int64_t c_dims[2];
} dn_st;

static void dn_free(void *p) {
  dn_st *s = p;
  if (!s) return;
  for (int i = 0; i < s->n; i++)
    if (s->mem[i]) dnnl_memory_destroy(s->mem[i]);
  if (s->prim) dnnl_primitive_destroy(s->prim);
  if (s->re_in) dnnl_primitive_destroy(s->re_in);
  if (s->pre) dnnl_primitive_destroy(s->pre);
  if (s->re_out) dnnl_primitive_destroy(s->re_out);
  if (s->m_usr_in) dnnl_memory_destroy(s->m_usr_in);
  if (s->m_usr_out) dnnl_memory_destroy(s->m_usr_out);
  if (s->re_res) dnnl_primitive_destroy(s->re_res);
  if (s->m_res) dnnl_memory_destroy(s->m_res);
  free(s);
}

static int dn_fail(gopt_exec *x, ex_kernel *k, gopt_error *err, const char *what, dnnl_status_t st) {
  return ex_node_error(x, k->node, err, GOPT_EUNSUP, "oneDNN %s failed: %s", what, dnnl_status2str(st));
}

#define DN(call, what)                                   \
  do {                                                   \
    dnnl_status_t st_ = (call);                          \
    if (st_ != dnnl_success) {                           \
      rc = dn_fail(x, k, err, what, st_);                \
      goto done;                                         \
    }                                                    \
  } while (0)

static int dn_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  dn_st *s = k->st;
  ex_dnnl *d = x->dnnl;
  dnnl_exec_arg_t args[DN_MAX_ARGS];
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i < s->n; i++) {
    if (s->tensor[i] >= 0) dnnl_memory_set_data_handle(s->mem[i], ex_data(x, s->tensor[i]));
    args[i].arg = s->arg[i];
    args[i].memory = s->mem[i];
  }
  if (s->re_in || s->pre) { /* the input reordered, or pooled, into scratch 0 */
    dnnl_memory_t in = s->mem[s->scr_arg[0]];
    dnnl_memory_set_data_handle(in, d->scr[0]);
    dnnl_memory_set_data_handle(s->m_usr_in, ex_data(x, k->in[0]));
    dnnl_exec_arg_t ra[2] = {{s->pre ? DNNL_ARG_SRC : DNNL_ARG_FROM, s->m_usr_in},
                             {s->pre ? DNNL_ARG_DST : DNNL_ARG_TO, in}};
    st = dnnl_primitive_execute(s->pre ? s->pre : s->re_in, d->stream, 2, ra);
  }
  if (s->re_out) dnnl_memory_set_data_handle(s->mem[s->scr_arg[1]], d->scr[1]);
  if (st == dnnl_success && s->res >= 0) { /* sum post-op: the destination starts as the residual */
    if (s->re_res) {
      dnnl_memory_set_data_handle(s->m_res, ex_data(x, s->res));
      dnnl_exec_arg_t rr[2] = {{DNNL_ARG_FROM, s->m_res}, {DNNL_ARG_TO, s->mem[s->dst_arg]}};
      st = dnnl_primitive_execute(s->re_res, d->stream, 2, rr);
    } else {
      void *dst = s->re_out ? d->scr[1] : ex_data(x, k->out[0]);
      if (dst != ex_data(x, s->res)) memcpy(dst, ex_data(x, s->res), s->res_bytes); /* in place: nothing */
    }
  }
  if (st == dnnl_success) st = dnnl_primitive_execute(s->prim, d->stream, s->n, args);
  if (st == dnnl_success && s->re_out) {
    dnnl_memory_set_data_handle(s->m_usr_out, ex_data(x, k->out[0]));
    dnnl_exec_arg_t rb[2] = {{DNNL_ARG_FROM, s->mem[s->scr_arg[1]]}, {DNNL_ARG_TO, s->m_usr_out}};
    st = dnnl_primitive_execute(s->re_out, d->stream, 2, rb);
  }
  if (st == dnnl_success) st = dnnl_stream_wait(d->stream);
  if (st != dnnl_success) return dn_fail(x, k, err, "execute", st);
  return GOPT_OK;
}

/* Plain row-major descriptor of dims. */
static void md_plain(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
  dnnl_dims_t d, s;
  int64_t a = 1;
  if (rank == 0) {
    d[0] = 1;
    s[0] = 1;
    rank = 1;
  } else {
    for (int i = rank - 1; i >= 0; i--) {
      d[i] = dims[i];
      s[i] = a;
      a *= dims[i] ? dims[i] : 1;
    }
  }
  dnnl_memory_desc_init_by_strides(md, rank, d, dnnl_f32, s);
}

/* Adds an argument memory of descriptor md bound to tensor t (or to fixed data when t < 0). */
static dnnl_status_t dn_add(dn_st *s, ex_dnnl *d, int arg, const dnnl_memory_desc_t *md, int32_t t, void *fixed) {
  s->arg[s->n] = arg;
  s->tensor[s->n] = t;
  dnnl_status_t st = dnnl_memory_create(&s->mem[s->n], md, d->eng, t >= 0 ? DNNL_MEMORY_NONE : fixed);
  if (st == dnnl_success) s->n++;
  return st;
}

static int float_io(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  for (int i = 0; i < k->n_in; i++)
    if (k->in[i] >= 0 && ex_dtype(x, k->in[i]) != GOPT_DT_FLOAT)
      return ex_node_error(x, k->node, err, GOPT_EUNSUP, "input %d is %s (FLOAT only)", i,
                           gopt_dtype_name(ex_dtype(x, k->in[i])));
  return GOPT_OK;
}

/* Creates the primitive for pd (destroyed here). */
static dnnl_status_t dn_make(dn_st *s, dnnl_primitive_desc_t pd) {
  dnnl_status_t st = dnnl_primitive_create(&s->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

/* One argument of a primitive for dn_build: memory of descriptor md bound to tensor t on each
 * run; md NULL: the argument is left out (an omitted optional input). */
typedef struct dn_arg {
  int arg;
  const dnnl_memory_desc_t *md;
  int32_t t;
} dn_arg;

/* Creates s->prim from the operation descriptor desc (desc_st: the status of initialising desc)
 * and adds the memories of args[0..n) in order, skipping those with md NULL. Returns GOPT_OK, or a
 * node error "oneDNN <what> descriptor|<what>|<what> primitive|memory failed"; no primitive
 * descriptor outlives the call (memories already added are freed by dn_free). */
static int dn_build(gopt_exec *x, ex_kernel *k, dn_st *s, dnnl_status_t desc_st, const_dnnl_op_desc_t desc,
                    const char *what, const dn_arg *args, int n, gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  char w[64];
  if (desc_st != dnnl_success) {
    snprintf(w, sizeof w, "%s descriptor", what);
    return dn_fail(x, k, err, w, desc_st);
  }
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = dnnl_primitive_desc_create(&pd, desc, NULL, d->eng, NULL);
  if (st != dnnl_success) {
    if (pd) dnnl_primitive_desc_destroy(pd);
    return dn_fail(x, k, err, what, st);
  }
  st = dn_make(s, pd); /* destroys pd */
  if (st != dnnl_success) {
    snprintf(w, sizeof w, "%s primitive", what);
    return dn_fail(x, k, err, w, st);
  }
  for (int i = 0; i < n; i++) {
    if (!args[i].md) continue;
    st = dn_add(s, d, args[i].arg, args[i].md, args[i].t, NULL);
    if (st != dnnl_success) return dn_fail(x, k, err, "memory", st);
  }
  return GOPT_OK;
}

static int dn_bind_io(gopt_exec *x, ex_kernel *k, dn_st *s, const dnnl_memory_desc_t *psrc,
                      const dnnl_memory_desc_t *pdst, int32_t X, int32_t Y, int32_t R, int *n_re,
                      gopt_error *err);

/* dn_build for a primitive whose source is tensor X and destination tensor Y in any layout
 * (pooling, batch normalization): they are bound by dn_bind_io, then args[0..n) are added. */
static int dn_build_io(gopt_exec *x, ex_kernel *k, dn_st *s, dnnl_status_t desc_st, const_dnnl_op_desc_t desc,
                       const char *what, int32_t X, int32_t Y, const dn_arg *args, int n, gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  int n_re = 0;
  if (desc_st != dnnl_success) return dn_fail(x, k, err, what, desc_st);
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = dnnl_primitive_desc_create(&pd, desc, NULL, d->eng, NULL);
  if (st != dnnl_success) {
    if (pd) dnnl_primitive_desc_destroy(pd);
    return dn_fail(x, k, err, what, st);
  }
  dnnl_memory_desc_t p_src = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t p_dst = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  st = dn_make(s, pd); /* destroys pd */
  if (st != dnnl_success) return dn_fail(x, k, err, what, st);
  int rc = dn_bind_io(x, k, s, &p_src, &p_dst, X, Y, -1, &n_re, err);
  for (int i = 0; i < n && !rc; i++)
    if ((st = dn_add(s, d, args[i].arg, args[i].md, args[i].t, NULL)) != dnnl_success) rc = dn_fail(x, k, err, "memory", st);
  if (!rc) ex_layout_note(x, k->node, n_re, 0);
  return rc;
}

/* Descriptor of the rows x cols operand of a Gemm, stored transposed (cols x rows, row-major)
 * when trans is set. */
static void md_gemm_operand(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int trans) {
  dnnl_dims_t dims, st;
  dims[0] = rows;
  dims[1] = cols;
  st[0] = trans ? 1 : cols;
  st[1] = trans ? rows : 1;
  dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, st);
}

/* Descriptor of dims (rank entries) whose layout the primitive chooses (format_tag_any). */
static void md_any(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
  dnnl_dims_t dd;
  for (int i = 0; i < rank; i++) dd[i] = dims[i];
  dnnl_memory_desc_init_by_tag(md, rank, dd, dnnl_f32, dnnl_format_tag_any);
}

/* Creates *re, a reorder primitive from memories of descriptor from to memories of descriptor to
 * (both on eng); its primitive descriptor is destroyed here. Returns the oneDNN status. */
static dnnl_status_t dn_reorder(dnnl_primitive_t *re, const dnnl_memory_desc_t *from,
                                const dnnl_memory_desc_t *to, dnnl_engine_t eng) {
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL);
  if (st != dnnl_success) return st;
  st = dnnl_primitive_create(re, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return st;
}

/* Descriptor of tensor t's buffer: the oneDNN layout the pass recorded for it, or plain. */
static void tensor_md(const gopt_exec *x, int32_t t, dnnl_memory_desc_t *md) {
  const dnnl_memory_desc_t *m = ex_layout_md(x, t);
  if (m) *md = *m;
  else md_plain(md, ex_rank(x, t), ex_dims(x, t));
}

/* Binds the source (descriptor psrc) of the primitive to tensor X and its destination (pdst) to
 * tensor Y: directly when the tensor's buffer has that layout, else through the shared scratch
 * buffers with a reorder before (X) or after (Y). When the layout pass lets Y stay in a oneDNN
 * layout, pdst becomes Y's layout (recorded for its consumers) and Y needs no reorder. R >= 0: the
 * residual of a sum post-op, copied or reordered into the destination before each run. Adds the
 * number of activation reorders per run to *n_re. */
static int dn_bind_io(gopt_exec *x, ex_kernel *k, dn_st *s, const dnnl_memory_desc_t *psrc,
                      const dnnl_memory_desc_t *pdst, int32_t X, int32_t Y, int32_t R, int *n_re,
                      gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  int rc = GOPT_OK;
  dnnl_memory_desc_t xmd, ymd, rmd;
  tensor_md(x, X, &xmd);
  md_plain(&ymd, ex_rank(x, Y), ex_dims(x, Y));
  if (ex_layout_keep(x, Y) && !dnnl_memory_desc_equal(&ymd, pdst)) {
    if (ex_layout_set_md(x, Y, pdst)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    ymd = *pdst;
  }
  if (!dnnl_memory_desc_equal(&xmd, psrc)) {
    if (scratch_reserve(d, 0, dnnl_memory_desc_get_size(psrc))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    DN(dnnl_memory_create(&s->m_usr_in, &xmd, d->eng, DNNL_MEMORY_NONE), "memory");
    DN(dn_reorder(&s->re_in, &xmd, psrc, d->eng), "reorder");
    s->scr_arg[0] = s->n;
    DN(dn_add(s, d, DNNL_ARG_SRC, psrc, -1, d->scr[0]), "memory");
    (*n_re)++;
  } else {
    DN(dn_add(s, d, DNNL_ARG_SRC, psrc, X, NULL), "memory");
  }
  s->dst_arg = s->n;
  if (!dnnl_memory_desc_equal(&ymd, pdst)) {
    if (scratch_reserve(d, 1, dnnl_memory_desc_get_size(pdst))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    DN(dnnl_memory_create(&s->m_usr_out, &ymd, d->eng, DNNL_MEMORY_NONE), "memory");
    DN(dn_reorder(&s->re_out, pdst, &ymd, d->eng), "reorder");
    s->scr_arg[1] = s->n;
    DN(dn_add(s, d, DNNL_ARG_DST, pdst, -1, d->scr[1]), "memory");
    (*n_re)++;
  } else {
    DN(dn_add(s, d, DNNL_ARG_DST, pdst, Y, NULL), "memory");
  }
  s->res = R;
  if (R >= 0) {
    tensor_md(x, R, &rmd);
    if (dnnl_memory_desc_equal(&rmd, pdst)) {
      s->res_bytes = dnnl_memory_desc_get_size(pdst);
    } else {
      DN(dnnl_memory_create(&s->m_res, &rmd, d->eng, DNNL_MEMORY_NONE), "memory");
      DN(dn_reorder(&s->re_res, &rmd, pdst, d->eng), "reorder");
      (*n_re)++;
    }
  }
done:
  return rc;
}

/* Window attributes of a sp-D Conv/pooling node: strides (default 1) and dilations in oneDNN's
 * convention (ONNX's minus 1, default 0) from the node's attributes when they have sp entries;
 * the begin pads pl are zeroed. */
static void window_attrs(const gopt_graph *g, int32_t node, int sp, dnnl_dims_t strides, dnnl_dims_t dil,
                         dnnl_dims_t pl) {
  size_t c;
  const int64_t *a;
  for (int i = 0; i < sp; i++) {
    strides[i] = 1;
    dil[i] = 0;
    pl[i] = 0;
  }
  if ((a = gopt_node_get_ints(g, node, "strides", &c)) && c == (size_t)sp)
    for (int i = 0; i < sp; i++) strides[i] = a[i];
  if ((a = gopt_node_get_ints(g, node, "dilations", &c)) && c == (size_t)sp)
    for (int i = 0; i < sp; i++) dil[i] = a[i] - 1;
}

/* Folds the r dims at axis into dd = [product of dims before axis, product of the rest]. */
static void fold_at(int64_t dd[2], int r, const int64_t *dims, int64_t axis) {
  dd[0] = dd[1] = 1;
  for (int i = 0; i < r; i++) dd[i < axis ? 0 : 1] *= dims[i];
}

/* ---- Conv ------------------------------------------------------------------------------------------ */

/* Plain descriptor of binary post-op operand t against the primitive's destination dst (dims of
 * the chain's output tensor, possibly with the leading dims folded into one, as a MatMul's 2-D
 * destination): t's dims right-aligned to the output's, folded the same way (exec_layout.c's
 * binary_of admits only operands that fold: leading dims all 1 or all full). */
static void src1_md(const gopt_exec *x, int32_t t, int32_t out, const dnnl_memory_desc_t *dst, dnnl_memory_desc_t *md) {
  int r = ex_rank(x, out), rb = ex_rank(x, t), nd = dst->ndims;
  int64_t bb[GOPT_MAX_RANK], d[DNNL_MAX_NDIMS];
  for (int i = 0; i < r; i++) bb[i] = i < r - rb ? 1 : ex_dims(x, t)[i - (r - rb)];
  for (int i = 0; i < nd; i++) d[i] = 1;
  for (int i = 0; i < r; i++) d[i < r - nd ? 0 : i - (r - nd)] *= bb[i]; /* leading dims fold into the first */
  md_plain(md, nd, d);
}

/* Post-op attributes of chain ch (NULL when there is none); dst: the primitive's destination
 * descriptor (binary operands are described against it). */
static dnnl_status_t post_ops_attr(const gopt_exec *x, const ex_chain *ch, const dnnl_memory_desc_t *dst,
                                   dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po = NULL;
  dnnl_status_t st = dnnl_success;
  *attr = NULL;
  if (!ch) return st;
  if ((st = dnnl_post_ops_create(&po)) != dnnl_success) return st;
  for (int i = 0; i < ch->n_post && st == dnnl_success; i++) {
    const ex_post *p = &ch->post[i];
    dnnl_memory_desc_t md;
    if (p->bin) {
      src1_md(x, p->src1, ch->out, dst, &md);
      st = dnnl_post_ops_append_binary(po, (dnnl_alg_kind_t)p->bin, &md);
    } else {
      st = p->sum ? dnnl_post_ops_append_sum(po, 1.0f)
                  : dnnl_post_ops_append_eltwise(po, 1.0f, (dnnl_alg_kind_t)p->alg, p->alpha, p->beta);
    }
  }
  if (st == dnnl_success) st = dnnl_primitive_attr_create(attr);
  if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(*attr, po);
  dnnl_post_ops_destroy(po);
  return st;
}

/* Convolution primitive descriptor for src/dst descriptors (format_tag_any lets oneDNN choose);
 * NULL when oneDNN has none. */
static dnnl_primitive_desc_t conv_pd(ex_dnnl *d, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *w,
                                     const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *dst,
                                     const dnnl_dim_t *strides, const dnnl_dim_t *dil, const dnnl_dim_t *pl,
                                     const dnnl_dim_t *pr, const_dnnl_primitive_attr_t attr) {
  dnnl_convolution_desc_t cd;
  dnnl_primitive_desc_t pd = NULL;
  if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, src, w,
                                                 b, dst, strides, dil, pl, pr) != dnnl_success ||
      dnnl_primitive_desc_create(&pd, &cd, attr, d->eng, NULL) != dnnl_success) {
    if (pd) dnnl_primitive_desc_destroy(pd);
    return NULL;
  }
  return pd;
}

/* Whether pd runs oneDNN's reference or im2col+GEMM code (slow next to its direct JIT kernels). */
static int slow_impl(const_dnnl_primitive_desc_t pd) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return 0;
  return strstr(impl, "ref") != NULL || strstr(impl, "gemm") != NULL;
}

/* Convolution padding from pads / auto_pad into pl, pr. */
static void conv_pads(const gopt_graph *g, int32_t node, int sp, const int64_t *xd, const int64_t *yd,
                      const int64_t *kd, const dnnl_dims_t strides, const dnnl_dims_t dil, dnnl_dims_t pl,
                      dnnl_dims_t pr) {
  size_t c;
  const char *ap = gopt_node_get_string(g, node, "auto_pad", "NOTSET");
  const int64_t *pads = gopt_node_get_ints(g, node, "pads", &c);
  int have_pads = pads && c == (size_t)(2 * sp);
  for (int i = 0; i < sp; i++) {
    int64_t range = (kd[i] - 1) * (dil[i] + 1) + 1;
    int64_t total = (yd[2 + i] - 1) * strides[i] + range - xd[2 + i];
    if (total < 0) total = 0;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      pl[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
      pr[i] = total - pl[i];
    } else if (!strcmp(ap, "VALID")) {
      pl[i] = pr[i] = 0;
    } else {
      pl[i] = have_pads ? pads[i] : 0;
      pr[i] = have_pads ? pads[sp + i] : 0;
    }
  }
}

/* The step of a conv with post-ops writes the chain's output and reads its residual and its binary
 * post-ops' operands too. */
static int conv_chain_io(gopt_exec *x, ex_kernel *k, const ex_chain *ch, gopt_error *err) {
  k->out[0] = ch->out;
  int32_t *in = realloc(k->in, (size_t)(k->n_in + 2 + ch->n_post) * sizeof *in);
  if (!in) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->in = in;
  if (ch->residual >= 0) k->in[k->n_in++] = ch->residual;
  for (int i = 0; i < ch->n_post; i++)
    if (ch->post[i].bin) k->in[k->n_in++] = ch->post[i].src1;
  return GOPT_OK;
}

/* Binds every binary post-op's operand (after the primitive is made; dst: its destination). */
static int bind_src1(gopt_exec *x, ex_kernel *k, dn_st *s, const ex_chain *ch, const dnnl_memory_desc_t *dst,
                     gopt_error *err) {
  int rc = GOPT_OK;
  for (int i = 0; ch && i < ch->n_post; i++) {
    if (!ch->post[i].bin) continue;
    dnnl_memory_desc_t md;
    src1_md(x, ch->post[i].src1, ch->out, dst, &md);
    DN(dn_add(s, x->dnnl, DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, &md, ch->post[i].src1, NULL),
       "memory");
  }
done:
  return rc;
}

/* The copy of constant W (read through w_usr) in layout w_want: found in the cache, or made there
 * by one reorder. *buf NULL with dnnl_success: out of memory. */
static dnnl_status_t packed_weights(gopt_exec *x, int32_t W, const dnnl_memory_desc_t *w_usr,
                                    const dnnl_memory_desc_t *w_want, void **buf) {
  ex_dnnl *d = x->dnnl;
  *buf = NULL;
  for (size_t i = 0; i < d->n_packed; i++) {
    const dn_packed *p = &d->packed[i];
    if (p->w == W && dnnl_memory_desc_equal(&p->usr, w_usr) && dnnl_memory_desc_equal(&p->want, w_want)) {
      *buf = p->buf;
      return dnnl_success;
    }
  }
  if (d->n_packed == d->cap_packed) {
    size_t cap = d->cap_packed ? 2 * d->cap_packed : 16;
    dn_packed *a = realloc(d->packed, cap * sizeof *a);
    if (!a) return dnnl_success;
    d->packed = a;
    d->cap_packed = cap;
  }
  size_t sz = dnnl_memory_desc_get_size(w_want);
  void *p = aligned_alloc(64, (sz + 63) & ~(size_t)63);
  if (!p) return dnnl_success;
  dnnl_primitive_t reorder = NULL;
  dnnl_memory_t usr = NULL, dst = NULL;
  dnnl_status_t st = dnnl_memory_create(&usr, w_usr, d->eng, ex_data(x, W));
  if (st == dnnl_success) st = dnnl_memory_create(&dst, w_want, d->eng, p);
  if (st == dnnl_success) st = dn_reorder(&reorder, w_usr, w_want, d->eng);
  dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, usr}, {DNNL_ARG_TO, dst}};
  if (st == dnnl_success) st = dnnl_primitive_execute(reorder, d->stream, 2, ra);
  if (st == dnnl_success) st = dnnl_stream_wait(d->stream);
  if (reorder) dnnl_primitive_destroy(reorder);
  if (usr) dnnl_memory_destroy(usr);
  if (dst) dnnl_memory_destroy(dst);
  if (st != dnnl_success) {
    free(p);
    return st;
  }
  d->packed[d->n_packed++] = (dn_packed){W, *w_usr, *w_want, p};
  d->packed_bytes += sz;
  *buf = p;
  return dnnl_success;
}

/* Binds the weights argument: the plain tensor W (descriptor w_usr) when it is not constant or
 * w_want is its own layout, else W's copy in w_want from the cache (reordered once per weight
 * tensor and layout, however many primitives read it). */
static int conv_weights(gopt_exec *x, ex_kernel *k, dn_st *s, int32_t W, int wconst, const dnnl_memory_desc_t *w_usr,
                        const dnnl_memory_desc_t *w_want, gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  int rc = GOPT_OK;
  void *buf = NULL;
  if (!wconst || dnnl_memory_desc_equal(w_want, w_usr)) {
    DN(dn_add(s, d, DNNL_ARG_WEIGHTS, w_usr, W, NULL), "memory");
    return GOPT_OK;
  }
  DN(packed_weights(x, W, w_usr, w_want, &buf), "reorder");
  if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  DN(dn_add(s, d, DNNL_ARG_WEIGHTS, w_want, -1, buf), "memory");
  d->packed_readers++;
done:
  return rc;
}

/* A matmul whose weights wt_md (tensor W) are constant: oneDNN picks the weights' layout
 * (format any: packed for its brgemm kernels) and W is reordered into it once, here, instead of
 * being repacked by every run (it keeps the plain weights when it wants them). src A, bias C and
 * dst Y stay plain. With a post-op chain (the layout pass; MatMul heads only here) the chain's
 * bias becomes the matmul's bias, its eltwise/sum post-ops the attributes, and the step writes
 * the chain's output (the residual of a sum is copied into it first, as for convs). */
static int prep_matmul_wconst(gopt_exec *x, ex_kernel *k, dn_st *s, const dnnl_memory_desc_t *am,
                              const dnnl_memory_desc_t *wt_md, const dnnl_memory_desc_t *cm,
                              const dnnl_memory_desc_t *ym, int32_t A, int32_t W, int32_t C, gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  int rc = GOPT_OK;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  const ex_chain *ch = ex_layout_chain(x, k->node);
  dnnl_memory_desc_t w_any, bmd;
  if (ch && C >= 0) return ex_node_error(x, k->node, err, GOPT_EINVAL, "layout pass: Gemm chains are not planned");
  if (ch && ch->bias >= 0) {
    int64_t bd[2] = {1, ym->dims[1]};
    md_plain(&bmd, 2, bd);
    cm = &bmd;
    C = ch->bias;
  }
  if (ch && (rc = conv_chain_io(x, k, ch, err))) return rc;
  dnnl_memory_desc_init_by_tag(&w_any, wt_md->ndims, wt_md->dims, dnnl_f32, dnnl_format_tag_any);
  dnnl_matmul_desc_t md;
  DN(dnnl_matmul_desc_init(&md, am, &w_any, cm, ym), "matmul descriptor");
  DN(post_ops_attr(x, ch && ch->n_post ? ch : NULL, ym, &attr), "post-ops");
  DN(dnnl_primitive_desc_create(&pd, &md, attr, d->eng, NULL), "matmul");
  dnnl_memory_desc_t w_want = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  DN(dn_make(s, pd), "matmul primitive");
  pd = NULL;
  DN(dn_add(s, d, DNNL_ARG_SRC, am, A, NULL), "memory");
  if ((rc = conv_weights(x, k, s, W, 1, wt_md, &w_want, err))) goto done;
  if (cm) DN(dn_add(s, d, DNNL_ARG_BIAS, cm, C, NULL), "memory");
  s->dst_arg = s->n;
  DN(dn_add(s, d, DNNL_ARG_DST, ym, k->out[0], NULL), "memory");
  if ((rc = bind_src1(x, k, s, ch, ym, err))) goto done;
  if (ch) {
    s->res = ch->residual;
    s->res_bytes = dnnl_memory_desc_get_size(ym);
    ex_layout_note(x, k->node, 0, 0); /* the chain is applied */
  }
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return rc;
}

/* Plain descriptor of conv weights W with groups: [G, O/G, I/G, k...] when grouped, else W's dims. */
static void conv_w_md(const gopt_exec *x, int32_t W, int64_t groups, dnnl_memory_desc_t *md) {
  const int64_t *wd = ex_dims(x, W);
  int64_t wdims[DNNL_MAX_NDIMS];
  int wr = 0;
  if (groups > 1) {
    wdims[wr++] = groups;
    wdims[wr++] = wd[0] / groups;
  } else {
    wdims[wr++] = wd[0];
  }
  for (int i = 1; i < ex_rank(x, W); i++) wdims[wr++] = wd[i];
  md_plain(md, wr, wdims);
}

/* A 1x1 Conv with the AveragePool after it run first (exec_layout.c's pool-first chain, ch->pool):
 * the pool reads the conv's input in its layout into scratch 0 (in the layout pooling picks), and
 * the conv reads that and writes the pool's output, in the layout it picks when the pass keeps
 * the output, else plain. */
static int prep_conv_pooled(gopt_exec *x, ex_kernel *k, dn_st *s, const ex_chain *ch, gopt_error *err) {
  const gopt_graph *g = x->g;
  ex_dnnl *d = x->dnnl;
  int rc = GOPT_OK;
  dnnl_primitive_desc_t ppd = NULL, pd = NULL;
  int32_t X = k->in[0], W = k->in[1], B = k->n_in > 2 ? k->in[2] : -1, Y = k->out[0] = ch->out, P = ch->pool;
  int r = ex_rank(x, X), sp = r - 2;
  int64_t pdims[DNNL_MAX_NDIMS], bdim = ex_dims(x, W)[0];
  size_t nk = 0;
  const int64_t *ks = gopt_node_get_ints(g, P, "kernel_shape", &nk);
  if (!ks || nk != (size_t)sp) return ex_node_error(x, P, err, GOPT_EINVAL, "kernel_shape missing");
  dnnl_dims_t kern, strides, dil, pads, one, zero;
  window_attrs(g, P, sp, strides, dil, pads);
  for (int i = 0; i < sp; i++) kern[i] = ks[i], one[i] = 1, zero[i] = 0;
  pdims[0] = ex_dims(x, X)[0];
  pdims[1] = ex_dims(x, X)[1];
  for (int i = 0; i < sp; i++) pdims[2 + i] = ex_dims(x, Y)[2 + i];
  dnnl_memory_desc_t xmd, pany, pooled, w_usr, w_any, b_md, ymd;
  tensor_md(x, X, &xmd);
  md_any(&pany, r, pdims);
  dnnl_pooling_v2_desc_t pdsc;
  DN(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, dnnl_pooling_avg_exclude_padding, &xmd, &pany,
                                       strides, kern, dil, pads, pads),
     "pooling descriptor");
  DN(dnnl_primitive_desc_create(&ppd, &pdsc, NULL, d->eng, NULL), "pooling");
  pooled = *dnnl_primitive_desc_query_md(ppd, dnnl_query_dst_md, 0);
  DN(dnnl_primitive_create(&s->pre, ppd), "pooling primitive");
  DN(dnnl_memory_create(&s->m_usr_in, &xmd, d->eng, DNNL_MEMORY_NONE), "memory");
  if (scratch_reserve(d, 0, dnnl_memory_desc_get_size(&pooled))) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  conv_w_md(x, W, gopt_node_get_int(g, k->node, "group", 1), &w_usr);
  md_any(&w_any, w_usr.ndims, w_usr.dims);
  if (B >= 0) md_plain(&b_md, 1, &bdim);
  int keep = ex_layout_keep(x, Y);
  if (keep) md_any(&ymd, r, ex_dims(x, Y));
  else md_plain(&ymd, r, ex_dims(x, Y));
  if (!(pd = conv_pd(d, &pooled, &w_any, B >= 0 ? &b_md : NULL, &ymd, one, zero, zero, zero, NULL))) {
    rc = ex_node_error(x, k->node, err, GOPT_EUNSUP, "oneDNN convolution failed: no implementation");
    goto done;
  }
  dnnl_memory_desc_t w_want = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t p_dst = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  DN(dn_make(s, pd), "convolution primitive");
  pd = NULL;
  if (keep && ex_layout_set_md(x, Y, &p_dst)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  s->scr_arg[0] = s->n;
  DN(dn_add(s, d, DNNL_ARG_SRC, &pooled, -1, d->scr[0]), "memory");
  s->dst_arg = s->n;
  DN(dn_add(s, d, DNNL_ARG_DST, &p_dst, Y, NULL), "memory");
  if ((rc = conv_weights(x, k, s, W, 1, &w_usr, &w_want, err))) goto done;
  if (B >= 0) DN(dn_add(s, d, DNNL_ARG_BIAS, &b_md, B, NULL), "memory");
  ex_layout_note(x, k->node, 0, 0);
done:
  if (ppd) dnnl_primitive_desc_destroy(ppd);
  if (pd) dnnl_primitive_desc_destroy(pd);
  return rc;
}

/* Conv: oneDNN chooses the activation layouts when the weights are constant (blocked layouts run
 * its direct JIT kernels, plain NCHW only im2col+GEMM). Plain mode: the input and output are
 * reordered around the conv. Under the layout pass the conv reads its input in the layout its
 * producer left it in, writes the layout its consumers read, and runs its chain as post-ops. */
static int prep_conv(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  ex_dnnl *d = x->dnnl;
  int rc = GOPT_OK;
  dnnl_primitive_desc_t pd = NULL, pd_ref = NULL;
  dnnl_primitive_attr_t attr = NULL;
  int32_t X = k->in[0], W = k->in[1], B = k->n_in > 2 ? k->in[2] : -1, Y = k->out[0];
  int r = ex_rank(x, X), sp = r - 2;
  if (sp < 1 || sp > 3) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "%d-D convolution", sp);
  const int64_t *xd = ex_dims(x, X), *wd = ex_dims(x, W), *yd = ex_dims(x, Y);
  int64_t groups = gopt_node_get_int(g, k->node, "group", 1);
  dnnl_dims_t strides, dil, pl, pr;
  int64_t kd[3];
  for (int i = 0; i < sp; i++) kd[i] = wd[2 + i];
  window_attrs(g, k->node, sp, strides, dil, pl);
  conv_pads(g, k->node, sp, xd, yd, kd, strides, dil, pl, pr);
  const ex_chain *ch = ex_layout_chain(x, k->node);
  if (ch && ch->pad >= 0) { /* the Pad before the conv is its padding: read the Pad's input */
    X = k->in[0] = gopt_node_input(g, ch->pad, 0);
    xd = ex_dims(x, X);
    for (int i = 0; i < sp; i++) pl[i] += ch->pad_l[i], pr[i] += ch->pad_r[i];
  }
  if (ch && (rc = conv_chain_io(x, k, ch, err))) return rc;
  Y = k->out[0];
  int32_t R = ch ? ch->residual : -1;
  dnnl_memory_desc_t src_md, dst_md, w_any, w_usr, b_md, src_any, dst_any, x_md, r_md;
  md_plain(&src_md, r, xd);
  md_plain(&dst_md, r, yd);
  md_any(&src_any, r, xd);
  md_any(&dst_any, r, yd);
  conv_w_md(x, W, groups, &w_usr);
  int wr = w_usr.ndims;
  const dnnl_dim_t *wdims = w_usr.dims;
  int wconst = ex_is_const(x, W);
  if (wconst) md_any(&w_any, wr, wdims);
  else w_any = w_usr;
  if (B >= 0) md_plain(&b_md, 1, &wd[0]);
  const dnnl_memory_desc_t *bp = B >= 0 ? &b_md : NULL;
  int n_re = 0, n_plain = 0;
  /* what plain mode runs: oneDNN's choice of layouts, or plain NCHW when it has none */
  if (wconst) pd_ref = conv_pd(d, &src_any, &w_any, bp, &dst_any, strides, dil, pl, pr, NULL);
  if (!pd_ref) pd_ref = conv_pd(d, &src_md, &w_any, bp, &dst_md, strides, dil, pl, pr, NULL);
  if (!pd_ref) {
    rc = ex_node_error(x, k->node, err, GOPT_EUNSUP, "oneDNN convolution failed: no implementation");
    goto done;
  }
  /* one reorder per side whose layout differs, as dn_bind_io counts them (the first convolution of
   * a CNN, 3 input channels, may read plain NCHW and write a blocked layout) */
  n_plain = !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd_ref, dnnl_query_src_md, 0), &src_md) +
            !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd_ref, dnnl_query_dst_md, 0), &dst_md);
  if (x->lay && wconst) {
    DN(post_ops_attr(x, ch, &dst_md, &attr), "post-ops");
    /* read the input in its producer's layout and accumulate in the residual's, unless that
     * makes oneDNN fall back to slow code: then it reorders */
    const dnnl_memory_desc_t *xm = ex_layout_md(x, X), *rm = R >= 0 ? ex_layout_md(x, R) : NULL;
    if (xm || rm) {
      if (xm) x_md = *xm;
      if (rm) r_md = *rm;
      pd = conv_pd(d, xm ? &x_md : &src_any, &w_any, bp, rm ? &r_md : &dst_any, strides, dil, pl, pr, attr);
      if (pd && slow_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
      }
    }
    if (!pd) pd = conv_pd(d, &src_any, &w_any, bp, &dst_any, strides, dil, pl, pr, attr);
    if (!pd) pd = conv_pd(d, &src_md, &w_any, bp, &dst_md, strides, dil, pl, pr, attr);
    if (!pd) {
      rc = ex_node_error(x, k->node, err, GOPT_EUNSUP, "oneDNN convolution with post-ops failed: no implementation");
      goto done;
    }
  } else {
    if (ch) {
      rc = ex_node_error(x, k->node, err, GOPT_EUNSUP, "post-ops need constant weights");
      goto done;
    }
    pd = pd_ref;
    pd_ref = NULL;
  }
  dnnl_memory_desc_t w_want = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_desc_t p_src = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t p_dst = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  DN(dn_make(s, pd), "convolution primitive");
  pd = NULL;
  if ((rc = dn_bind_io(x, k, s, &p_src, &p_dst, X, Y, R, &n_re, err))) goto done;
  if ((rc = conv_weights(x, k, s, W, wconst, &w_usr, &w_want, err))) goto done;
  if (B >= 0) DN(dn_add(s, d, DNNL_ARG_BIAS, &b_md, B, NULL), "memory");
  if ((rc = bind_src1(x, k, s, ch, &dst_md, err))) goto done;
  ex_layout_note(x, k->node, n_re, n_plain);
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (pd_ref) dnnl_primitive_desc_destroy(pd_ref);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return rc;
}

/* ---- MatMul / Gemm ---------------------------------------------------------------------------------- */

static int prep_matmul(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  int32_t A = k->in[0], Bt = k->in[1], Y = k->out[0];
  int ra = ex_rank(x, A), rb = ex_rank(x, Bt);
  const int64_t *ad = ex_dims(x, A), *bd = ex_dims(x, Bt);
  int64_t a2[GOPT_MAX_RANK + 2], b2[GOPT_MAX_RANK + 2], y2[GOPT_MAX_RANK + 2];
  int na = 0, nb = 0;
  if (ra == 1) {
    a2[na++] = 1;
    a2[na++] = ad[0];
  } else {
    for (int i = 0; i < ra; i++) a2[na++] = ad[i];
  }
  if (rb == 1) {
    b2[nb++] = bd[0];
    b2[nb++] = 1;
  } else {
    for (int i = 0; i < rb; i++) b2[nb++] = bd[i];
  }
  /* B 2-D: fold A's batch dims into M */
  if (nb == 2 && na > 2) {
    int64_t m = 1;
    for (int i = 0; i < na - 1; i++) m *= a2[i];
    a2[0] = m;
    a2[1] = a2[na - 1];
    na = 2;
  }
  int nd = na > nb ? na : nb;
  if (nd > 12) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "rank too large");
  /* right-align batch dims */
  int64_t A_[12], B_[12];
  for (int i = 0; i < nd; i++) {
    A_[i] = i < nd - na ? 1 : a2[i - (nd - na)];
    B_[i] = i < nd - nb ? 1 : b2[i - (nd - nb)];
  }
  for (int i = 0; i < nd - 2; i++) y2[i] = A_[i] > B_[i] ? A_[i] : B_[i];
  y2[nd - 2] = A_[nd - 2];
  y2[nd - 1] = B_[nd - 1];
  int64_t yn = 1;
  for (int i = 0; i < nd; i++) yn *= y2[i];
  if (yn != ex_numel(x, Y) || A_[nd - 1] != B_[nd - 2])
    return ex_node_error(x, k->node, err, GOPT_ESHAPE, "MatMul shapes do not match");
  dnnl_memory_desc_t am, bm, ym;
  md_plain(&am, nd, A_);
  md_plain(&bm, nd, B_);
  md_plain(&ym, nd, y2);
  if (nd == 2 && ex_is_const(x, Bt) && ex_data(x, Bt))
    return prep_matmul_wconst(x, k, s, &am, &bm, NULL, &ym, A, Bt, -1, err);
  dnnl_matmul_desc_t md;
  dnnl_status_t st = dnnl_matmul_desc_init(&md, &am, &bm, NULL, &ym);
  const dn_arg args[] = {{DNNL_ARG_SRC, &am, A}, {DNNL_ARG_WEIGHTS, &bm, Bt}, {DNNL_ARG_DST, &ym, Y}};
  return dn_build(x, k, s, st, &md, "matmul", args, 3, err);
}

/* gemm_blas_forward: Y[M,N] = alpha * op(A) op(B) + beta * C (C broadcast to [M,N]). */
static int gemm_blas_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  dn_st *s = k->st;
  (void)err;
  float *Y = ex_data(x, k->out[0]);
  const float *A = ex_data(x, k->in[0]), *B = ex_data(x, k->in[1]);
  const float *C = k->n_in > 2 && k->in[2] >= 0 ? ex_data(x, k->in[2]) : NULL;
  float beta = 0.0f;
  if (C && s->beta != 0.0f) {
    int64_t cm = s->c_rank == 2 ? s->c_dims[0] : 1, cn = s->c_rank >= 1 ? s->c_dims[s->c_rank - 1] : 1;
    for (int64_t i = 0; i < s->M; i++)
      for (int64_t j = 0; j < s->N; j++) Y[i * s->N + j] = C[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
    beta = s->beta;
  }
  cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
              (int)s->M, (int)s->N, (int)s->K, s->alpha, A, s->ta ? (int)s->M : (int)s->K, B,
              s->tb ? (int)s->K : (int)s->N, beta, Y, (int)s->N);
  return GOPT_OK;
}

static int prep_gemm(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t A = k->in[0], Bt = k->in[1], C = k->n_in > 2 ? k->in[2] : -1, Y = k->out[0];
  if (ex_rank(x, A) != 2 || ex_rank(x, Bt) != 2)
    return ex_node_error(x, k->node, err, GOPT_ESHAPE, "Gemm needs 2-D A and B");
  s->ta = (int)gopt_node_get_int(g, k->node, "transA", 0);
  s->tb = (int)gopt_node_get_int(g, k->node, "transB", 0);
  s->alpha = (float)gopt_node_get_float(g, k->node, "alpha", 1.0);
  s->beta = (float)gopt_node_get_float(g, k->node, "beta", 1.0);
  const int64_t *ad = ex_dims(x, A), *bd = ex_dims(x, Bt);
  s->M = s->ta ? ad[1] : ad[0];
  s->K = s->ta ? ad[0] : ad[1];
  s->N = s->tb ? bd[0] : bd[1];
  if ((s->tb ? bd[1] : bd[0]) != s->K) return ex_node_error(x, k->node, err, GOPT_ESHAPE, "K differs");
  if (C >= 0) {
    s->c_rank = ex_rank(x, C);
    if (s->c_rank > 2) return ex_node_error(x, k->node, err, GOPT_ESHAPE, "C rank > 2");
    for (int i = 0; i < s->c_rank; i++) s->c_dims[i] = ex_dims(x, C)[i];
  }
  if (s->alpha != 1.0f || (C >= 0 && s->beta != 1.0f)) {
    openblas_set_num_threads(x->threads); /* OpenBLAS has its own thread pool */
    s->blas = 1;
    k->run = gemm_blas_run;
    return GOPT_OK;
  }
  dnnl_memory_desc_t am, bm, cm, ym;
  md_gemm_operand(&am, s->M, s->K, s->ta);
  md_gemm_operand(&bm, s->K, s->N, s->tb);
  int64_t yd[2] = {s->M, s->N};
  md_plain(&ym, 2, yd);
  if (C >= 0) {
    int64_t cd[2] = {1, 1};
    if (s->c_rank == 1) cd[1] = s->c_dims[0];
    if (s->c_rank == 2) {
      cd[0] = s->c_dims[0];
      cd[1] = s->c_dims[1];
    }
    md_plain(&cm, 2, cd);
  }
  if (ex_is_const(x, Bt) && ex_data(x, Bt))
    return prep_matmul_wconst(x, k, s, &am, &bm, C >= 0 ? &cm : NULL, &ym, A, Bt, C, err);
  dnnl_matmul_desc_t md;
  dnnl_status_t st = dnnl_matmul_desc_init(&md, &am, &bm, C >= 0 ? &cm : NULL, &ym);
  const dn_arg args[] = {{DNNL_ARG_SRC, &am, A},
                         {DNNL_ARG_WEIGHTS, &bm, Bt},
                         {DNNL_ARG_BIAS, C >= 0 ? &cm : NULL, C},
                         {DNNL_ARG_DST, &ym, Y}};
  return dn_build(x, k, s, st, &md, "matmul", args, 4, err);
}

/* ---- pooling -------------------------------------------------------------------------------------- */

static int prep_pool(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t X = k->in[0], Y = k->out[0];
  int op = g->nodes.a[k->node].op;
  if (k->n_out > 1 && k->out[1] >= 0 && gopt_tensor_use_count(g, k->out[1]) > 0)
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "the Indices output is not supported");
  int r = ex_rank(x, X), sp = r - 2;
  if (sp < 1 || sp > 3) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "%d-D pooling", sp);
  const int64_t *xd = ex_dims(x, X), *yd = ex_dims(x, Y);
  size_t c, ck;
  const int64_t *ks = gopt_node_get_ints(g, k->node, "kernel_shape", &ck);
  if (!ks || ck != (size_t)sp) return ex_node_error(x, k->node, err, GOPT_EINVAL, "kernel_shape missing");
  dnnl_dims_t kern, strides, dil, pl, pr;
  for (int i = 0; i < sp; i++) kern[i] = ks[i];
  window_attrs(g, k->node, sp, strides, dil, pl);
  const char *ap = gopt_node_get_string(g, k->node, "auto_pad", "NOTSET");
  const int64_t *pads = gopt_node_get_ints(g, k->node, "pads", &c);
  int have_pads = pads && c == (size_t)(2 * sp) && !strcmp(ap, "NOTSET");
  int include = (int)gopt_node_get_int(g, k->node, "count_include_pad", 0);
  for (int i = 0; i < sp; i++) {
    int64_t range = (kern[i] - 1) * (dil[i] + 1) + 1;
    int64_t total = (yd[2 + i] - 1) * strides[i] + range - xd[2 + i];
    if (have_pads) pl[i] = pads[i];
    else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"))
      pl[i] = !strcmp(ap, "SAME_UPPER") ? (total > 0 ? total / 2 : 0) : (total > 0 ? total - total / 2 : 0);
    pr[i] = total - pl[i];
    if (pr[i] < 0) pr[i] = 0;
    int64_t declared = have_pads ? pads[sp + i] : pr[i];
    if (pr[i] < declared) pr[i] = declared;
    if (op == GOPT_OP_AVERAGE_POOL && include && pr[i] > declared)
      return ex_node_error(x, k->node, err, GOPT_EUNSUP,
                           "ceil_mode with count_include_pad=1 is not supported");
  }
  const ex_chain *ch = ex_layout_chain(x, k->node);
  if (ch && ch->pad >= 0) { /* the zero Pad before it is its padding, counted in the average */
    X = k->in[0] = gopt_node_input(g, ch->pad, 0);
    include = 1;
    for (int i = 0; i < sp; i++) pl[i] += ch->pad_l[i], pr[i] += ch->pad_r[i];
  }
  dnnl_memory_desc_t src_md, dst_md;
  tensor_md(x, X, &src_md); /* plain, or the layout the pass kept it in */
  if (x->lay) md_any(&dst_md, r, yd);
  else md_plain(&dst_md, r, yd);
  dnnl_alg_kind_t alg = op == GOPT_OP_MAX_POOL ? dnnl_pooling_max
                        : include ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
  dnnl_pooling_v2_desc_t pdsc;
  dnnl_status_t st = dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &src_md, &dst_md,
                                                       strides, kern, dil, pl, pr);
  return dn_build_io(x, k, s, st, &pdsc, "pooling", X, Y, NULL, 0, err);
}

/* ---- normalisation, softmax ---------------------------------------------------------------------------- */

static int prep_bnorm(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  if (k->n_in < 5) return ex_node_error(x, k->node, err, GOPT_EINVAL, "needs 5 inputs");
  if (gopt_node_get_int(g, k->node, "training_mode", 0) || (k->n_out > 1 && k->out[1] >= 0))
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "training mode is not supported");
  const ex_chain *ch = ex_layout_chain(x, k->node); /* BatchNorm -> Relu (exec_layout.c) */
  int relu = ch && ch->n_nodes == 2;
  if (relu) {
    k->out[0] = ch->out;
    ex_layout_note(x, k->node, 0, 0);
  }
  int32_t X = k->in[0], Y = k->out[0];
  int r = ex_rank(x, X);
  if (r < 2) return ex_node_error(x, k->node, err, GOPT_ESHAPE, "rank < 2");
  if (!ex_layout_md(x, X)) { /* a plain source: k_misc.c's loop (oneDNN's is scalar C++ there) */
    dn_free(s);
    k->st = NULL;
    k->fini = NULL;
    return ex_prepare_bn_plain(x, k, relu, err);
  }
  dnnl_memory_desc_t md, cm;
  tensor_md(x, X, &md); /* plain, or the layout the pass kept it in */
  md_plain(&cm, 1, &ex_dims(x, X)[1]);
  float eps = (float)gopt_node_get_float(g, k->node, "epsilon", 1e-5);
  dnnl_batch_normalization_desc_t bd;
  dnnl_status_t st = dnnl_batch_normalization_forward_desc_init(
      &bd, dnnl_forward_inference, &md, eps,
      dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift | (relu ? dnnl_fuse_norm_relu : 0));
  const dn_arg args[] = {{DNNL_ARG_SCALE, &cm, k->in[1]}, {DNNL_ARG_SHIFT, &cm, k->in[2]},
                         {DNNL_ARG_MEAN, &cm, k->in[3]}, {DNNL_ARG_VARIANCE, &cm, k->in[4]}};
  return dn_build_io(x, k, s, st, &bd, "batch normalization", X, Y, args, 4, err);
}

static int prep_lnorm(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t X = k->in[0], Y = k->out[0];
  int32_t S = k->n_in > 1 ? k->in[1] : -1, Bi = k->n_in > 2 ? k->in[2] : -1;
  for (int i = 1; i < k->n_out; i++)
    if (k->out[i] >= 0 && gopt_tensor_use_count(g, k->out[i]) > 0)
      return ex_node_error(x, k->node, err, GOPT_EUNSUP, "the Mean/InvStdDev outputs are not supported");
  int r = ex_rank(x, X);
  int64_t axis = gopt_node_get_int(g, k->node, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
  int64_t dd[2];
  fold_at(dd, r, ex_dims(x, X), axis);
  if (S >= 0 && ex_numel(x, S) != dd[1]) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "Scale must cover the normalized dims");
  if (Bi >= 0 && ex_numel(x, Bi) != dd[1]) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "B must cover the normalized dims");
  dnnl_memory_desc_t md, cm;
  md_plain(&md, 2, dd);
  md_plain(&cm, 1, &dd[1]);
  float eps = (float)gopt_node_get_float(g, k->node, "epsilon", 1e-5);
  unsigned flags = (S >= 0 ? dnnl_use_scale : 0) | (Bi >= 0 ? dnnl_use_shift : 0);
  dnnl_layer_normalization_desc_t ld;
  dnnl_status_t st =
      dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &md, NULL, eps, flags);
  const dn_arg args[] = {{DNNL_ARG_SRC, &md, X},
                         {DNNL_ARG_SCALE, S >= 0 ? &cm : NULL, S},
                         {DNNL_ARG_SHIFT, Bi >= 0 ? &cm : NULL, Bi},
                         {DNNL_ARG_DST, &md, Y}};
  return dn_build(x, k, s, st, &ld, "layer normalization", args, 4, err);
}

static int prep_softmax(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t X = k->in[0], Y = k->out[0];
  int r = ex_rank(x, X);
  int op = g->nodes.a[k->node].op;
  int64_t axis = gopt_node_get_int(g, k->node, "axis", x->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= (r ? r : 1)) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
  dnnl_memory_desc_t md;
  int ax = (int)axis;
  if (x->opset < 13) {
    int64_t dd[2];
    fold_at(dd, r, ex_dims(x, X), axis);
    md_plain(&md, 2, dd);
    ax = 1;
  } else {
    md_plain(&md, r, ex_dims(x, X));
  }
  dnnl_softmax_v2_desc_t sd;
  dnnl_alg_kind_t alg = op == GOPT_OP_LOG_SOFTMAX ? dnnl_softmax_log : dnnl_softmax_accurate;
  dnnl_status_t st = dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, alg, &md, &md, ax);
  const dn_arg args[] = {{DNNL_ARG_SRC, &md, X}, {DNNL_ARG_DST, &md, Y}};
  return dn_build(x, k, s, st, &sd, "softmax", args, 2, err);
}

/* ---- under the layout pass: GlobalAveragePool, per-channel Mul/Add ------------------------------------ */

static int prep_gap(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  int32_t X = k->in[0], Y = k->out[0];
  int r = ex_rank(x, X), sp = r - 2;
  dnnl_memory_desc_t src_md, dst_md;
  dnnl_dims_t kern, strides, dil, pads;
  for (int i = 0; i < sp; i++) {
    kern[i] = ex_dims(x, X)[2 + i];
    strides[i] = 1;
    dil[i] = pads[i] = 0;
  }
  tensor_md(x, X, &src_md);
  md_any(&dst_md, r, ex_dims(x, Y));
  dnnl_pooling_v2_desc_t pdsc;
  dnnl_status_t st = dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, dnnl_pooling_avg_exclude_padding,
                                                       &src_md, &dst_md, strides, kern, dil, pads, pads);
  return dn_build_io(x, k, s, st, &pdsc, "pooling", X, Y, NULL, 0, err);
}

static int prep_binary(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  int slot = ex_layout_binary_slot(x, k->node, NULL);
  if (slot < 0) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "not a per-channel Mul/Add");
  if (slot == 1) { /* the kernel reads the activation as its first input */
    int32_t t = k->in[0];
    k->in[0] = k->in[1];
    k->in[1] = t;
  }
  int32_t X = k->in[0], C = k->in[1], Y = k->out[0];
  dnnl_memory_desc_t a_md, c_md, y_md;
  tensor_md(x, X, &a_md);
  md_plain(&c_md, ex_rank(x, C), ex_dims(x, C));
  md_any(&y_md, ex_rank(x, Y), ex_dims(x, Y));
  dnnl_binary_desc_t bd;
  dnnl_alg_kind_t alg = x->g->nodes.a[k->node].op == GOPT_OP_MUL ? dnnl_binary_mul : dnnl_binary_add;
  dnnl_status_t st = dnnl_binary_desc_init(&bd, alg, &a_md, &c_md, &y_md);
  const dn_arg args[] = {{DNNL_ARG_SRC_1, &c_md, C}};
  return dn_build_io(x, k, s, st, &bd, "binary", X, Y, args, 1, err);
}

/* Under the pass: a unary activation on a kept tensor, in that tensor's layout. */
static int prep_eltwise(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  int32_t X = k->in[0], Y = k->out[0];
  int alg;
  float alpha, beta;
  if (!ex_layout_eltwise_of(x, k->node, &alg, &alpha, &beta))
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "not a oneDNN activation");
  dnnl_memory_desc_t md;
  tensor_md(x, X, &md);
  dnnl_eltwise_desc_t ed;
  dnnl_status_t st = dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, (dnnl_alg_kind_t)alg, &md, alpha, beta);
  return dn_build_io(x, k, s, st, &ed, "eltwise", X, Y, NULL, 0, err);
}

/* Under the pass: a channel Concat whose inputs or output are kept: oneDNN's concat reads each
 * input in its own layout and writes the layout it picks from them (recorded when the output is
 * kept; else plain). */
static int prep_concat(gopt_exec *x, ex_kernel *k, dn_st *s, gopt_error *err) {
  ex_dnnl *d = x->dnnl;
  int32_t Y = k->out[0];
  int n = k->n_in, rc = GOPT_OK;
  if (n > EX_CONCAT_MAX) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "more than %d inputs", EX_CONCAT_MAX);
  dnnl_memory_desc_t src[EX_CONCAT_MAX], ymd;
  for (int i = 0; i < n; i++) tensor_md(x, k->in[i], &src[i]);
  md_plain(&ymd, ex_rank(x, Y), ex_dims(x, Y));
  int keep = ex_layout_keep(x, Y);
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t st = dnnl_concat_primitive_desc_create(&pd, keep ? NULL : &ymd, n, 1, src, NULL, d->eng);
  if (st != dnnl_success && keep) { /* no layout oneDNN picks for these inputs: write it plain */
    if (pd) dnnl_primitive_desc_destroy(pd);
    pd = NULL;
    keep = 0;
    st = dnnl_concat_primitive_desc_create(&pd, &ymd, n, 1, src, NULL, d->eng);
  }
  if (st != dnnl_success) {
    if (pd) dnnl_primitive_desc_destroy(pd);
    return dn_fail(x, k, err, "concat", st);
  }
  dnnl_memory_desc_t pdst = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  if ((st = dn_make(s, pd)) != dnnl_success) return dn_fail(x, k, err, "concat primitive", st); /* destroys pd */
  if (keep && ex_layout_set_md(x, Y, &pdst)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) DN(dn_add(s, d, DNNL_ARG_MULTIPLE_SRC + i, &src[i], k->in[i], NULL), "memory");
  DN(dn_add(s, d, DNNL_ARG_DST, keep ? &pdst : &ymd, Y, NULL), "memory");
  ex_layout_note(x, k->node, 0, 0);
done:
  return rc;
}

int ex_prepare_dnnl(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int rc = float_io(x, k, err);
  if (rc) return rc;
  dn_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  s->res = -1;
  k->st = s;
  k->fini = dn_free;
  k->run = dn_run;
  switch (x->g->nodes.a[k->node].op) {
    case GOPT_OP_CONV: {
      const ex_chain *ch = ex_layout_chain(x, k->node);
      return ch && ch->pool >= 0 ? prep_conv_pooled(x, k, s, ch, err) : prep_conv(x, k, s, err);
    }
    case GOPT_OP_MATMUL: return prep_matmul(x, k, s, err);
    case GOPT_OP_GEMM: return prep_gemm(x, k, s, err);
    case GOPT_OP_MAX_POOL: case GOPT_OP_AVERAGE_POOL: return prep_pool(x, k, s, err);
    case GOPT_OP_BATCH_NORM: return prep_bnorm(x, k, s, err);
    case GOPT_OP_LAYER_NORM: return prep_lnorm(x, k, s, err);
    case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX: return prep_softmax(x, k, s, err);
    case GOPT_OP_GLOBAL_AVG_POOL: return prep_gap(x, k, s, err);
    case GOPT_OP_MUL: case GOPT_OP_ADD: return prep_binary(x, k, s, err);
    case GOPT_OP_CONCAT: return prep_concat(x, k, s, err);
    case GOPT_OP_RELU: case GOPT_OP_LEAKY_RELU: case GOPT_OP_SIGMOID: case GOPT_OP_TANH: case GOPT_OP_HARD_SWISH:
    case GOPT_OP_CLIP:
      return prep_eltwise(x, k, s, err);
    default: return ex_node_error(x, k->node, err, GOPT_EUNSUP, "not a oneDNN op");
  }
}
