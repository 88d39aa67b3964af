/* k_concat_bn.c: a channel Concat and the inference BatchNormalization (and Relu) that is its only
 * reader, as one step (exec_layout.c's Concat chain): input i's channels c go to the output's
 * channels off_i + c as y = x a + b (a = scale / sqrt(var + eps), b = B - mean a, the BatchNorm's
 * affine form, as k_misc.c's plain BatchNorm), max(y, 0) with the Relu. The concatenated tensor is
 * never made: the Concat's copy and the BatchNorm's read of that copy become one pass over the
 * inputs. Every input is read in the layout its producer left it in; the output, when the pass
 * keeps it, takes input 0's kind of layout (channels-last, channel-blocked, or plain), else plain.
 * Fast paths when an input and the output are both channels-last (rows of an input's channels per
 * pixel), both plain (planes per channel) or both blocked alike at a block-aligned offset; any
 * other pair of oneDNN layouts goes element by element through the descriptors' offsets. */
#include <dnnl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_vec.h"

enum { CB_CL, CB_PLAIN, CB_BLK, CB_GEN };

/* Where element (n, c, p) of a tensor is (p: the spatial dims flattened): for CB_CL / CB_PLAIN /
 * CB_BLK n*sn + (c / blk)*sc + c % blk + p*sp (blk 1 but for CB_BLK); CB_GEN through md. */
typedef struct cb_view {
  int kind;
  int64_t sn, sc, sp, blk;
  dnnl_memory_desc_t md;
} cb_view;

typedef struct cb_st {
  int n_in, relu, fixed;   /* fixed: a and b computed once (constant BatchNorm parameters) */
  int64_t N, C, P, cpad;   /* batch, output channels (cpad: padded to the output's block), spatial size */
  int64_t sp_dims[3];      /* the spatial dims (CB_GEN offsets) */
  int n_sp;
  float eps;
  int64_t *off, *ci;       /* per input: first output channel, channels */
  cb_view *in, out;
  float *ab;               /* [2 C]: a, then b */
  const ex_vec_ops *vec;
} cb_st;

static void cb_free(void *p) {
  cb_st *s = p;
  if (!s) return;
  free(s->off);
  free(s->ci);
  free(s->in);
  free(s->ab);
  free(s);
}

/* The view of a buffer of dims (rank r) in layout md (NULL: plain). */
static void view_of(cb_view *v, const dnnl_memory_desc_t *md, int r, const int64_t *dims) {
  memset(v, 0, sizeof *v);
  v->blk = 1;
  if (!md) {
    int64_t p = 1;
    for (int i = 2; i < r; i++) p *= dims[i];
    v->kind = CB_PLAIN;
    v->sp = 1;
    v->sc = p;
    v->sn = p * dims[1];
    return;
  }
  v->md = *md;
  v->kind = CB_GEN;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || md->offset0 != 0 || md->ndims != r) return;
  for (int i = 2; i + 1 < r; i++) /* the spatial dims flatten into one stride */
    if (b->strides[i] != b->strides[i + 1] * md->padded_dims[i + 1]) return;
  int64_t sp = b->strides[r - 1];
  if (b->inner_nblks == 0 && b->strides[1] == 1) v->kind = CB_CL;
  else if (b->inner_nblks == 0 && sp == 1) v->kind = CB_PLAIN;
  else if (b->inner_nblks == 1 && b->inner_idxs[0] == 1 && sp == b->inner_blks[0]) v->kind = CB_BLK;
  else return;
  v->sn = b->strides[0];
  v->sc = b->strides[1];
  v->sp = sp;
  if (v->kind == CB_BLK) v->blk = b->inner_blks[0];
}

/* Offset of element (n, c, p) in a CB_GEN view (oneDNN's blocked offset: inner blocks, then the
 * outer strides). */
static int64_t gen_off(const cb_st *s, const cb_view *v, int64_t n, int64_t c, int64_t p) {
  const dnnl_memory_desc_t *md = &v->md;
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int64_t pos[DNNL_MAX_NDIMS] = {n, c};
  for (int i = s->n_sp - 1; i >= 0; i--) {
    pos[2 + i] = p % s->sp_dims[i];
    p /= s->sp_dims[i];
  }
  int64_t off = md->offset0, bs = 1;
  for (int i = b->inner_nblks - 1; i >= 0; i--) {
    int d = (int)b->inner_idxs[i];
    off += (pos[d] % b->inner_blks[i]) * bs;
    pos[d] /= b->inner_blks[i];
    bs *= b->inner_blks[i];
  }
  for (int d = 0; d < md->ndims; d++) off += pos[d] * b->strides[d];
  return off;
}

static inline int64_t view_off(const cb_st *s, const cb_view *v, int64_t n, int64_t c, int64_t p) {
  if (v->kind == CB_GEN) return gen_off(s, v, n, c, p);
  return n * v->sn + (c / v->blk) * v->sc + c % v->blk + p * v->sp;
}

/* Input i's pixels [p0, p1) of batch n into Y. */
static void cb_input(const cb_st *s, int i, const float *X, float *Y, int64_t n, int64_t p0, int64_t p1) {
  const cb_view *vi = &s->in[i], *vo = &s->out;
  int64_t off = s->off[i], ci = s->ci[i], np = p1 - p0;
  const float *a = s->ab + off, *b = s->ab + s->C + off;
  if (vi->kind == CB_CL && vo->kind == CB_CL) {
    s->vec->affine_rows(Y + n * vo->sn + p0 * vo->sp + off, X + n * vi->sn + p0 * vi->sp, a, b, np, ci, vo->sp,
                        vi->sp, s->relu);
  } else if (vi->kind == CB_PLAIN && vo->kind == CB_PLAIN) {
    for (int64_t c = 0; c < ci; c++)
      s->vec->affine_plane(Y + n * vo->sn + (off + c) * vo->sc + p0, X + n * vi->sn + c * vi->sc + p0, a[c], b[c],
                           np, s->relu);
  } else if (vi->kind == CB_BLK && vo->kind == CB_BLK && vi->blk == vo->blk && off % vo->blk == 0) {
    int64_t B = vo->blk;
    for (int64_t c0 = 0; c0 < ci; c0 += B)
      s->vec->affine_rows(Y + n * vo->sn + ((off + c0) / B) * vo->sc + p0 * B, X + n * vi->sn + (c0 / B) * vi->sc + p0 * B,
                          a + c0, b + c0, np, ci - c0 < B ? ci - c0 : B, B, B, s->relu);
  } else {
    for (int64_t c = 0; c < ci; c++)
      for (int64_t p = p0; p < p1; p++) {
        float v = X[view_off(s, vi, n, c, p)] * a[c] + b[c];
        Y[view_off(s, vo, n, off + c, p)] = s->relu ? fmaxf(v, 0.0f) : v;
      }
  }
}

/* a and b from the BatchNorm's operands bn[0..3] (scale, B, mean, var) */
static void cb_affine(gopt_exec *x, cb_st *s, const int32_t *bn) {
  ex_bn_affine(s->ab, s->C, ex_data(x, bn[0]), ex_data(x, bn[1]), ex_data(x, bn[2]), ex_data(x, bn[3]), s->eps);
}

enum { CB_PIX = 64 }; /* pixels per block of work: every input's rows of a block, then the next */

static int cb_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  cb_st *s = k->st;
  const int32_t *bn = k->in + s->n_in;
  if (!s->fixed) cb_affine(x, s, bn);
  float *Y = ex_data(x, k->out[0]);
  int64_t nb = (s->P + CB_PIX - 1) / CB_PIX;
#pragma omp parallel for schedule(static) if (s->N * nb > 1 && s->N * s->C * s->P > 32768)
  for (int64_t t = 0; t < s->N * nb; t++) {
    int64_t n = t / nb, p0 = (t % nb) * CB_PIX, p1 = p0 + CB_PIX < s->P ? p0 + CB_PIX : s->P;
    for (int i = 0; i < s->n_in; i++) cb_input(s, i, ex_data(x, k->in[i]), Y, n, p0, p1);
    for (int64_t c = s->C; c < s->cpad; c++) /* a blocked output's padding channels stay zero */
      for (int64_t p = p0; p < p1; p++) Y[view_off(s, &s->out, n, c, p)] = 0.0f;
  }
  return GOPT_OK;
}

/* The layout of the output when the pass keeps it: input 0's kind (channels-last, or blocked by 8
 * or 16 channels), else plain. */
static void out_md(const gopt_exec *x, const cb_view *v0, int32_t Y, dnnl_memory_desc_t *md) {
  static const dnnl_format_tag_t cl[3] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  static const dnnl_format_tag_t b8[3] = {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b};
  static const dnnl_format_tag_t b16[3] = {dnnl_aBc16b, dnnl_aBcd16b, dnnl_aBcde16b};
  static const dnnl_format_tag_t pl[3] = {dnnl_abc, dnnl_abcd, dnnl_abcde};
  int r = ex_rank(x, Y);
  dnnl_dims_t d;
  for (int i = 0; i < r; i++) d[i] = ex_dims(x, Y)[i];
  const dnnl_format_tag_t *tag = v0->kind == CB_CL                     ? cl
                                 : v0->kind == CB_BLK && v0->blk == 8  ? b8
                                 : v0->kind == CB_BLK && v0->blk == 16 ? b16
                                                                       : pl;
  dnnl_memory_desc_init_by_tag(md, r, d, dnnl_f32, tag[r - 3]);
}

/* The step reads the Concat's inputs and the BatchNorm's four operands, and writes the chain's
 * output. */
static int cb_io(gopt_exec *x, ex_kernel *k, const ex_chain *ch, gopt_error *err) {
  int32_t *in = realloc(k->in, (size_t)(k->n_in + 4) * sizeof *in);
  if (!in) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->in = in;
  for (int i = 1; i < 5; i++) k->in[k->n_in++] = gopt_node_input(x->g, ch->nodes[1], i);
  k->out[0] = ch->out;
  return GOPT_OK;
}

/* Channel offsets and views of the inputs; the output's layout (recorded when kept) and view. */
static int cb_views(gopt_exec *x, ex_kernel *k, cb_st *s, gopt_error *err) {
  int32_t Y = k->out[0];
  int r = ex_rank(x, Y);
  const int64_t *yd = ex_dims(x, Y);
  for (int i = 0; i < s->n_in; i++) {
    const int64_t *d = ex_dims(x, k->in[i]);
    for (int j = 0; j < r; j++)
      if (j != 1 && d[j] != yd[j])
        return ex_node_error(x, k->node, err, GOPT_ESHAPE, "input %d does not match the output beside the channels", i);
    s->off[i] = i ? s->off[i - 1] + s->ci[i - 1] : 0;
    s->ci[i] = d[1];
    view_of(&s->in[i], ex_layout_md(x, k->in[i]), r, d);
  }
  if (s->off[s->n_in - 1] + s->ci[s->n_in - 1] != s->C)
    return ex_node_error(x, k->node, err, GOPT_ESHAPE, "the inputs' channels do not add up to the output's");
  dnnl_memory_desc_t md;
  int keep = ex_layout_keep(x, Y);
  if (keep) {
    out_md(x, &s->in[0], Y, &md);
    if (ex_layout_set_md(x, Y, &md)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  view_of(&s->out, keep ? &md : NULL, r, yd);
  s->cpad = keep ? md.padded_dims[1] : s->C;
  return GOPT_OK;
}

int ex_prepare_concat_bn(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  const ex_chain *ch = ex_layout_chain(x, k->node);
  int rc;
  cb_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = cb_free;
  k->run = cb_run;
  s->n_in = k->n_in;
  s->relu = ch->n_nodes == 3;
  s->vec = ex_vec_ops_for(x->isa);
  s->eps = (float)gopt_node_get_float(g, ch->nodes[1], "epsilon", 1e-5);
  if ((rc = cb_io(x, k, ch, err))) return rc;
  int32_t Y = k->out[0];
  int r = ex_rank(x, Y);
  s->N = ex_dims(x, Y)[0];
  s->C = ex_dims(x, Y)[1];
  s->P = 1;
  s->n_sp = r - 2;
  for (int i = 2; i < r; i++) s->P *= s->sp_dims[i - 2] = ex_dims(x, Y)[i];
  for (int i = 0; i < 4; i++)
    if (ex_numel(x, k->in[s->n_in + i]) != s->C)
      return ex_node_error(x, ch->nodes[1], err, GOPT_ESHAPE, "input %d has %lld values, not C = %lld", i + 1,
                           (long long)ex_numel(x, k->in[s->n_in + i]), (long long)s->C);
  s->off = malloc((size_t)s->n_in * sizeof *s->off);
  s->ci = malloc((size_t)s->n_in * sizeof *s->ci);
  s->in = malloc((size_t)s->n_in * sizeof *s->in);
  s->ab = malloc((size_t)(2 * s->C + 1) * sizeof *s->ab);
  if (!s->off || !s->ci || !s->in || !s->ab) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if ((rc = cb_views(x, k, s, err))) return rc;
  const int32_t *bn = k->in + s->n_in;
  s->fixed = 1;
  for (int i = 0; i < 4; i++) s->fixed &= ex_is_const(x, bn[i]) && ex_data(x, bn[i]) != NULL;
  if (s->fixed) cb_affine(x, s, bn);
  ex_layout_note(x, k->node, 0, 0);
  return GOPT_OK;
}
