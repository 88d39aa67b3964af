/* k_data.c: data-movement and shape ops over any dtype: Reshape/Flatten/Squeeze/Unsqueeze (copy),
 * Transpose, Slice, Concat, Split, Gather, Pad, Resize (nearest, linear), Tile, and the shape
 * computations Shape, Size, ConstantOfShape, Range, Constant. Output shapes come from shape
 * inference; runtime values (Slice bounds, Pad amounts, indices) are read from the inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

int ex_data_handles(int op) {
  switch (op) {
    case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN: case GOPT_OP_SQUEEZE: case GOPT_OP_UNSQUEEZE:
    case GOPT_OP_TRANSPOSE: case GOPT_OP_CONCAT: case GOPT_OP_SPLIT: case GOPT_OP_SLICE:
    case GOPT_OP_GATHER: case GOPT_OP_PAD: case GOPT_OP_RESIZE: case GOPT_OP_SHAPE_OF:
    case GOPT_OP_SIZE: case GOPT_OP_CONSTANT_OF_SHAPE: case GOPT_OP_RANGE: case GOPT_OP_TILE:
    case GOPT_OP_CONSTANT:
      return 1;
    default: return 0;
  }
}

static size_t esize(const gopt_exec *x, int32_t t) { return gopt_dtype_size(ex_dtype(x, t)); }

static void contiguous_strides(int rank, const int64_t *d, int64_t *s) {
  int64_t a = 1;
  for (int i = rank - 1; i >= 0; i--) {
    s[i] = a;
    a *= d[i];
  }
}

/* The same strided view with fewer dims: size-1 dims dropped and each dim merged into the one
 * before it where that one steps over it exactly (st[i] == st[i+1] * d[i+1]); the elements and their
 * order are unchanged. A channel shuffle's Transpose (1,2,C,H,W -> 1,C,2,H,W) becomes C*2 rows of
 * H*W contiguous elements instead of C*2*H rows of W, and a channel Slice of a batch-1 tensor one
 * row. Returns the new rank (0 for a single element). */
static int coalesce_view(int rank, const int64_t *d, const int64_t *st, int64_t *cd, int64_t *cs) {
  int n = 0;
  for (int i = 0; i < rank; i++) {
    if (d[i] == 1) continue;
    if (n > 0 && cs[n - 1] == st[i] * d[i]) {
      cd[n - 1] *= d[i];
      cs[n - 1] = st[i];
      continue;
    }
    cd[n] = d[i];
    cs[n++] = st[i];
  }
  return n;
}

/* Copies one element of es bytes. */
static inline void copy_elem(char *q, const char *p, size_t es) {
  if (es == 4) *(uint32_t *)q = *(const uint32_t *)p;
  else if (es == 8) *(uint64_t *)q = *(const uint64_t *)p;
  else memcpy(q, p, es);
}

#define TR_TILE 64 /* tile edge of the blocked transpose (elements) */

/* The blocked form of strided_copy_forward for a view whose last dim is strided (sl = st[rank-1]
 * != 1) while dim k (< rank - 1) is contiguous in the source (st[k] == 1), as in a transpose:
 * element by element, every read of an output row would touch a new cache line and often a new
 * page. Tiles of TR_TILE x TR_TILE over (dim k, last dim) read TR_TILE source rows and write
 * TR_TILE output rows that stay in cache. Parallel over the other dims and the tiles of dim k. */
static void blocked_copy(void *dst, const void *src, size_t es, int rank, const int64_t *d, const int64_t *st,
                         int64_t off, int k) {
  int64_t last = d[rank - 1], sl = st[rank - 1], dk = d[k];
  int64_t dst_k = last; /* destination stride of dim k: product of the dims after it */
  for (int i = k + 1; i < rank - 1; i++) dst_k *= d[i];
  int64_t outer = 1;
  for (int i = 0; i < rank - 1; i++)
    if (i != k) outer *= d[i];
  int64_t kt = (dk + TR_TILE - 1) / TR_TILE, jobs = outer * kt;
#pragma omp parallel for schedule(static) if (outer * dk * last > 32768)
  for (int64_t job = 0; job < jobs; job++) {
    int64_t o = job / kt, k0 = (job % kt) * TR_TILE, k1 = k0 + TR_TILE < dk ? k0 + TR_TILE : dk;
    int64_t so = off, dof = 0, rem = o, stride = 1;
    for (int i = rank - 2; i >= 0; i--) { /* the other dims' index from o, as dims of dst */
      int64_t di = i == k ? 1 : d[i], ii = i == k ? 0 : rem % di;
      if (i != k) rem /= di;
      so += ii * st[i];
      dof += ii * stride * last;
      stride *= d[i];
    }
    for (int64_t j0 = 0; j0 < last; j0 += TR_TILE) {
      int64_t j1 = j0 + TR_TILE < last ? j0 + TR_TILE : last;
      for (int64_t ik = k0; ik < k1; ik++) {
        char *q = (char *)dst + (size_t)(dof + ik * dst_k) * es;
        const char *p = (const char *)src + (size_t)(so + ik) * es;
        for (int64_t j = j0; j < j1; j++) copy_elem(q + (size_t)j * es, p + (size_t)(j * sl) * es, es);
      }
    }
  }
}

/* strided_copy_forward: dst[i0..ir] (contiguous, dims d) = src[off + sum i_k * st[k]], elements of
 * es bytes; parallel over rows of the last dim (after coalesce_view), blocked (blocked_copy) when
 * the last dim is strided and another dim contiguous. */
static void strided_copy_forward(void *dst, const void *src, size_t es, int rank0, const int64_t *d0,
                                 const int64_t *st0, int64_t off) {
  for (int i = 0; i < rank0; i++)
    if (d0[i] == 0) return;
  int64_t d[GOPT_MAX_RANK], st[GOPT_MAX_RANK];
  int rank = coalesce_view(rank0, d0, st0, d, st);
  if (rank == 0) {
    memcpy(dst, (const char *)src + off * (int64_t)es, es);
    return;
  }
  int64_t last = d[rank - 1], sl = st[rank - 1];
  int64_t rows = 1;
  for (int i = 0; i < rank - 1; i++) rows *= d[i];
  if (last == 0 || rows == 0) return;
  for (int k = 0; sl != 1 && k < rank - 1; k++)
    if (st[k] == 1 && d[k] >= 8 && last >= 8) {
      blocked_copy(dst, src, es, rank, d, st, off, k);
      return;
    }
#pragma omp parallel for schedule(static) if (rows * last > 32768)
  for (int64_t r = 0; r < rows; r++) {
    int64_t rem = r, o = off;
    for (int i = rank - 2; i >= 0; i--) {
      o += (rem % d[i]) * st[i];
      rem /= d[i];
    }
    char *q = (char *)dst + (size_t)(r * last) * es;
    const char *p = (const char *)src;
    if (sl == 1) {
      memcpy(q, p + (size_t)o * es, (size_t)last * es);
    } else if (es == 4) {
      for (int64_t j = 0; j < last; j++) ((uint32_t *)q)[j] = ((const uint32_t *)p)[o + j * sl];
    } else if (es == 8) {
      for (int64_t j = 0; j < last; j++) ((uint64_t *)q)[j] = ((const uint64_t *)p)[o + j * sl];
    } else {
      for (int64_t j = 0; j < last; j++) memcpy(q + (size_t)j * es, p + (size_t)(o + j * sl) * es, es);
    }
  }
}

/* ---- copy-like ops --------------------------------------------------------------------------------- */

static int copy_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  memcpy(ex_data(x, k->out[0]), ex_data(x, k->in[0]), (size_t)ex_numel(x, k->out[0]) * esize(x, k->out[0]));
  return GOPT_OK;
}

/* Strided views: transpose, slice, expand-like. */
typedef struct view_st {
  int rank;
  int64_t d[GOPT_MAX_RANK], st[GOPT_MAX_RANK], off;
} view_st;

static int transpose_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  view_st *v = k->st;
  (void)err;
  strided_copy_forward(ex_data(x, k->out[0]), ex_data(x, k->in[0]), esize(x, k->out[0]), v->rank,
                       v->d, v->st, v->off);
  return GOPT_OK;
}

static int prep_transpose(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  view_st *v = calloc(1, sizeof *v);
  if (!v) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = v;
  k->fini = free;
  k->run = transpose_run;
  int r = ex_rank(x, k->in[0]);
  int64_t is[GOPT_MAX_RANK];
  contiguous_strides(r, ex_dims(x, k->in[0]), is);
  size_t np = 0;
  const int64_t *perm = gopt_node_get_ints(x->g, k->node, "perm", &np);
  v->rank = r;
  for (int i = 0; i < r; i++) {
    int64_t p = perm && np == (size_t)r ? perm[i] : r - 1 - i;
    if (p < 0 || p >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "bad perm");
    v->d[i] = ex_dims(x, k->in[0])[p];
    v->st[i] = is[p];
  }
  return GOPT_OK;
}

/* Slice: bounds are read at run time (they may be computed). */
static int slice_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t in = k->in[0], out = k->out[0];
  int r = ex_rank(x, in);
  const int64_t *d = ex_dims(x, in);
  int64_t starts[GOPT_MAX_RANK], ends[GOPT_MAX_RANK], axes[GOPT_MAX_RANK], steps[GOPT_MAX_RANK];
  size_t ns = 0, ne = 0, na = 0, np = 0;
  if (k->n_in >= 3) {
    if (ex_read_ints(x, k->in[1], starts, GOPT_MAX_RANK, &ns) || ex_read_ints(x, k->in[2], ends, GOPT_MAX_RANK, &ne))
      return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read starts/ends");
    if (k->n_in > 3 && k->in[3] >= 0 && ex_read_ints(x, k->in[3], axes, GOPT_MAX_RANK, &na))
      return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read axes");
    if (k->n_in > 4 && k->in[4] >= 0 && ex_read_ints(x, k->in[4], steps, GOPT_MAX_RANK, &np))
      return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read steps");
  } else {
    size_t c;
    const int64_t *a = gopt_node_get_ints(g, k->node, "starts", &c);
    for (ns = 0; ns < c && ns < GOPT_MAX_RANK; ns++) starts[ns] = a[ns];
    a = gopt_node_get_ints(g, k->node, "ends", &c);
    for (ne = 0; ne < c && ne < GOPT_MAX_RANK; ne++) ends[ne] = a[ne];
    a = gopt_node_get_ints(g, k->node, "axes", &c);
    for (na = 0; a && na < c && na < GOPT_MAX_RANK; na++) axes[na] = a[na];
  }
  if (ne != ns || (na && na != ns) || (np && np != ns))
    return ex_node_error(x, k->node, err, GOPT_EINVAL, "starts/ends/axes/steps differ in length");
  int64_t st[GOPT_MAX_RANK], is[GOPT_MAX_RANK], od[GOPT_MAX_RANK], off = 0;
  contiguous_strides(r, d, is);
  int64_t s0[GOPT_MAX_RANK], p0[GOPT_MAX_RANK];
  for (int i = 0; i < r; i++) {
    s0[i] = 0;
    p0[i] = 1;
    od[i] = d[i];
  }
  for (size_t i = 0; i < ns; i++) {
    int64_t a = na ? axes[i] : (int64_t)i;
    if (a < 0) a += r;
    if (a < 0 || a >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
    int64_t dim = d[a], s = starts[i], e = ends[i], p = np ? steps[i] : 1;
    if (p == 0) return ex_node_error(x, k->node, err, GOPT_EINVAL, "step 0");
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (p > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
    } else {
      s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    }
    int64_t cnt = p > 0 ? (e - s + p - 1) / p : (s - e + (-p) - 1) / (-p);
    if (cnt < 0) cnt = 0;
    s0[a] = s;
    p0[a] = p;
    od[a] = cnt;
  }
  const int64_t *want = ex_dims(x, out);
  for (int i = 0; i < r; i++) {
    if (od[i] != want[i])
      return ex_node_error(x, k->node, err, GOPT_ESHAPE,
                           "run-time bounds give dim %d = %lld, shape inference said %lld", i,
                           (long long)od[i], (long long)want[i]);
    st[i] = is[i] * p0[i];
    off += s0[i] * is[i];
  }
  strided_copy_forward(ex_data(x, out), ex_data(x, in), esize(x, out), r, od, st, off);
  return GOPT_OK;
}

/* ---- Concat / Split ------------------------------------------------------------------------------- */

typedef struct cat_st {
  int64_t outer, inner; /* product of dims before / after the axis */
  size_t es;
} cat_st;

static int concat_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  cat_st *c = k->st;
  (void)err;
  char *out = ex_data(x, k->out[0]);
  int64_t out_row = ex_numel(x, k->out[0]) / (c->outer ? c->outer : 1);
  int64_t pos = 0;
  for (int j = 0; j < k->n_in; j++) {
    if (k->in[j] < 0) continue;
    int64_t row = ex_numel(x, k->in[j]) / (c->outer ? c->outer : 1);
    const char *in = ex_data(x, k->in[j]);
#pragma omp parallel for schedule(static) if (c->outer * row > 65536)
    for (int64_t o = 0; o < c->outer; o++)
      memcpy(out + (size_t)(o * out_row + pos) * c->es, in + (size_t)(o * row) * c->es, (size_t)row * c->es);
    pos += row;
  }
  return GOPT_OK;
}

static int split_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  cat_st *c = k->st;
  (void)err;
  const char *in = ex_data(x, k->in[0]);
  int64_t in_row = ex_numel(x, k->in[0]) / (c->outer ? c->outer : 1);
  int64_t pos = 0;
  for (int j = 0; j < k->n_out; j++) {
    int64_t row = ex_numel(x, k->out[j]) / (c->outer ? c->outer : 1);
    char *out = ex_data(x, k->out[j]);
#pragma omp parallel for schedule(static) if (c->outer * row > 65536)
    for (int64_t o = 0; o < c->outer; o++)
      memcpy(out + (size_t)(o * row) * c->es, in + (size_t)(o * in_row + pos) * c->es, (size_t)row * c->es);
    pos += row;
  }
  return GOPT_OK;
}

static int prep_cat(gopt_exec *x, ex_kernel *k, int32_t ref, int split, gopt_error *err) {
  cat_st *c = calloc(1, sizeof *c);
  if (!c) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = c;
  k->fini = free;
  k->run = split ? split_run : concat_run;
  int r = ex_rank(x, ref);
  int64_t axis = gopt_node_get_int(x->g, k->node, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= (r ? r : 1)) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
  c->outer = 1;
  for (int i = 0; i < axis; i++) c->outer *= ex_dims(x, ref)[i];
  c->es = esize(x, ref);
  return GOPT_OK;
}

/* ---- Gather ---------------------------------------------------------------------------------------- */

typedef struct gather_st {
  int64_t outer, axis_dim, inner;
  size_t es;
} gather_st;

static int gather_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  gather_st *s = k->st;
  int32_t it = k->in[1];
  int64_t ni = ex_numel(x, it);
  const void *idx = ex_data(x, it);
  int idt = ex_dtype(x, it);
  const char *data = ex_data(x, k->in[0]);
  char *out = ex_data(x, k->out[0]);
  size_t blk = (size_t)s->inner * s->es;
  for (int64_t j = 0; j < ni; j++) {
    int64_t v = idt == GOPT_DT_INT32 ? ((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
    if (v < -s->axis_dim || v >= s->axis_dim)
      return ex_node_error(x, k->node, err, GOPT_ERANGE, "index %lld out of range [-%lld, %lld)",
                           (long long)v, (long long)s->axis_dim, (long long)s->axis_dim);
  }
#pragma omp parallel for schedule(static) if (s->outer * ni * s->inner > 65536)
  for (int64_t q = 0; q < s->outer * ni; q++) {
    int64_t o = q / ni, j = q % ni;
    int64_t v = idt == GOPT_DT_INT32 ? ((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
    if (v < 0) v += s->axis_dim;
    memcpy(out + (size_t)q * blk, data + (size_t)(o * s->axis_dim + v) * blk, blk);
  }
  return GOPT_OK;
}

static int prep_gather(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  gather_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = free;
  k->run = gather_run;
  int32_t d = k->in[0];
  int r = ex_rank(x, d);
  int64_t axis = gopt_node_get_int(x->g, k->node, "axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
  int idt = ex_dtype(x, k->in[1]);
  if (idt != GOPT_DT_INT64 && idt != GOPT_DT_INT32)
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "indices must be INT64 or INT32");
  s->outer = s->inner = 1;
  for (int i = 0; i < axis; i++) s->outer *= ex_dims(x, d)[i];
  for (int i = (int)axis + 1; i < r; i++) s->inner *= ex_dims(x, d)[i];
  s->axis_dim = ex_dims(x, d)[axis];
  s->es = esize(x, d);
  return GOPT_OK;
}

/* ---- Pad -------------------------------------------------------------------------------------------- */

enum { PAD_CONST, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Maps output coordinate o of a dim (input size n, leading pad b) to an input coordinate, or -1. */
static int64_t pad_map(int64_t o, int64_t n, int64_t b, int mode) {
  int64_t i = o - b;
  if (i >= 0 && i < n) return i;
  if (mode == PAD_CONST || n == 0) return -1;
  if (mode == PAD_EDGE) return i < 0 ? 0 : n - 1;
  if (mode == PAD_WRAP) return ((i % n) + n) % n;
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}

/* A no-op Pad on a oneDNN layout: its input's buffer as it is. */
static int copy_bytes_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  memcpy(ex_data(x, k->out[0]), ex_data(x, k->in[0]), ex_layout_nbytes(x, k->in[0]));
  return GOPT_OK;
}

static int pad_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  int32_t in = k->in[0], out = k->out[0];
  int r = ex_rank(x, in);
  const int64_t *id = ex_dims(x, in), *od = ex_dims(x, out);
  int64_t pads[2 * GOPT_MAX_RANK];
  size_t np = 0;
  int64_t axes[GOPT_MAX_RANK];
  size_t na = 0;
  if (k->n_in >= 2 && k->in[1] >= 0) {
    if (ex_read_ints(x, k->in[1], pads, 2 * GOPT_MAX_RANK, &np))
      return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read pads");
  } else {
    size_t c = 0;
    const int64_t *a = gopt_node_get_ints(g, k->node, "pads", &c);
    for (np = 0; a && np < c && np < 2 * GOPT_MAX_RANK; np++) pads[np] = a[np];
  }
  if (k->n_in >= 4 && k->in[3] >= 0 && ex_read_ints(x, k->in[3], axes, GOPT_MAX_RANK, &na))
    return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read axes");
  int64_t begin[GOPT_MAX_RANK] = {0};
  if (na) {
    if (np != 2 * na) return ex_node_error(x, k->node, err, GOPT_EINVAL, "pads/axes lengths differ");
    for (size_t i = 0; i < na; i++) {
      int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
      if (a < 0 || a >= r) return ex_node_error(x, k->node, err, GOPT_EINVAL, "axis out of range");
      begin[a] = pads[i];
    }
  } else {
    if (np != (size_t)(2 * r)) return ex_node_error(x, k->node, err, GOPT_EINVAL, "pads has %zu values for rank %d", np, r);
    for (int i = 0; i < r; i++) begin[i] = pads[i];
  }
  const char *ms = gopt_node_get_string(g, k->node, "mode", "constant");
  int mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE : !strcmp(ms, "wrap") ? PAD_WRAP : PAD_CONST;
  if (mode == PAD_CONST && strcmp(ms, "constant"))
    return ex_node_error(x, k->node, err, GOPT_EINVAL, "unknown mode '%s'", ms);
  size_t es = esize(x, out);
  char cval[16] = {0};
  if (mode == PAD_CONST && k->n_in >= 3 && k->in[2] >= 0 && ex_numel(x, k->in[2]) >= 1)
    memcpy(cval, ex_data(x, k->in[2]), es);
  else if (mode == PAD_CONST && k->n_in < 2) {
    float v = (float)gopt_node_get_float(g, k->node, "value", 0.0);
    if (es == 4) memcpy(cval, &v, 4);
  }
  int64_t is[GOPT_MAX_RANK];
  contiguous_strides(r, id, is);
  const char *src = ex_data(x, in);
  char *dst = ex_data(x, out);
  if (r == 0) {
    memcpy(dst, src, es);
    return GOPT_OK;
  }
  int64_t last = od[r - 1], rows = 1;
  for (int i = 0; i < r - 1; i++) rows *= od[i];
#pragma omp parallel for schedule(static) if (rows * last > 32768)
  for (int64_t row = 0; row < rows; row++) {
    int64_t rem = row, off = 0;
    int inside = 1;
    for (int i = r - 2; i >= 0; i--) {
      int64_t c = rem % od[i];
      rem /= od[i];
      int64_t m = pad_map(c, id[i], begin[i], mode);
      if (m < 0) inside = 0;
      else off += m * is[i];
    }
    char *q = dst + (size_t)(row * last) * es;
    for (int64_t j = 0; j < last; j++) {
      int64_t m = inside ? pad_map(j, id[r - 1], begin[r - 1], mode) : -1;
      memcpy(q + (size_t)j * es, m < 0 ? cval : src + (size_t)(off + m) * es, es);
    }
  }
  return GOPT_OK;
}

/* ---- Resize ------------------------------------------------------------------------------------------ */

enum { CT_HALF, CT_PT_HALF, CT_ALIGN, CT_ASYM, CT_TF_HALF };
enum { NM_RPF, NM_RPC, NM_FLOOR, NM_CEIL };

typedef struct resize_st {
  int linear;
  int ct, nm;
} resize_st;

static double resize_coord(int64_t o, int64_t in, int64_t out, double scale, int ct) {
  switch (ct) {
    case CT_ALIGN: return out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0;
    case CT_ASYM: return (double)o / scale;
    case CT_PT_HALF: return out > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0;
    case CT_TF_HALF: return ((double)o + 0.5) / scale;
    default: return ((double)o + 0.5) / scale - 0.5;
  }
}

static int64_t nearest_idx(double v, int64_t in, int nm) {
  int64_t i;
  switch (nm) {
    case NM_FLOOR: i = (int64_t)floor(v); break;
    case NM_CEIL: i = (int64_t)ceil(v); break;
    case NM_RPC: i = (v - floor(v) == 0.5) ? (int64_t)ceil(v) : (int64_t)llround(v); break;
    default: i = (v - floor(v) == 0.5) ? (int64_t)floor(v) : (int64_t)llround(v); break;
  }
  return i < 0 ? 0 : i >= in ? in - 1 : i;
}

static int resize_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  resize_st *s = k->st;
  int32_t in = k->in[0], out = k->out[0];
  int r = ex_rank(x, in);
  const int64_t *id = ex_dims(x, in), *od = ex_dims(x, out);
  double scale[GOPT_MAX_RANK];
  /* scales input (index 2 from opset 11, 1 before) when given and non-empty; else out/in */
  int32_t sc = -1;
  if (k->n_in >= 3 && k->in[2] >= 0 && ex_numel(x, k->in[2]) == r) sc = k->in[2];
  else if (k->n_in == 2 && k->in[1] >= 0 && ex_numel(x, k->in[1]) == r) sc = k->in[1];
  for (int i = 0; i < r; i++) {
    scale[i] = (double)od[i] / (double)id[i];
    if (sc >= 0 && ex_dtype(x, sc) == GOPT_DT_FLOAT) scale[i] = ((const float *)ex_data(x, sc))[i];
  }
  const float *src = ex_data(x, in);
  float *dst = ex_data(x, out);
  if (!s->linear) {
    int64_t is[GOPT_MAX_RANK];
    contiguous_strides(r, id, is);
    int64_t n = ex_numel(x, out);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t e = 0; e < n; e++) {
      int64_t rem = e, off = 0;
      for (int i = r - 1; i >= 0; i--) {
        int64_t c = rem % od[i];
        rem /= od[i];
        int64_t m = od[i] == id[i] ? c : nearest_idx(resize_coord(c, id[i], od[i], scale[i], s->ct), id[i], s->nm);
        off += m * is[i];
      }
      dst[e] = src[off];
    }
    return GOPT_OK;
  }
  /* linear: only the last two dims may change */
  for (int i = 0; i < r - 2; i++)
    if (id[i] != od[i]) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "linear resize of dim %d (only the last two)", i);
  int64_t H = r >= 2 ? id[r - 2] : 1, W = id[r - 1], OH = r >= 2 ? od[r - 2] : 1, OW = od[r - 1];
  double sh = r >= 2 ? scale[r - 2] : 1.0, sw = scale[r - 1];
  int64_t planes = ex_numel(x, in) / (H * W);
  /* the columns' source indices and weights, once per run (the same for every row and plane) */
  int64_t *xi = malloc((size_t)(2 * OW + 1) * sizeof *xi);
  float *wxs = malloc((size_t)(OW + 1) * sizeof *wxs);
  if (!xi || !wxs) {
    free(xi);
    free(wxs);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t ox = 0; ox < OW; ox++) {
    double fx = OW == W ? (double)ox : resize_coord(ox, W, OW, sw, s->ct);
    if (fx < 0) fx = 0;
    if (fx > (double)(W - 1)) fx = (double)(W - 1);
    int64_t x0 = (int64_t)fx;
    xi[2 * ox] = x0;
    xi[2 * ox + 1] = x0 + 1 < W ? x0 + 1 : W - 1;
    wxs[ox] = (float)(fx - (double)x0);
  }
#pragma omp parallel for schedule(static) if (planes * OH * OW > 32768)
  for (int64_t p = 0; p < planes * OH; p++) {
    int64_t pl = p / OH, oy = p % OH;
    double fy = OH == H ? (double)oy : resize_coord(oy, H, OH, sh, s->ct);
    if (fy < 0) fy = 0;
    if (fy > (double)(H - 1)) fy = (double)(H - 1);
    int64_t y0 = (int64_t)fy, y1 = y0 + 1 < H ? y0 + 1 : H - 1;
    float wy = (float)(fy - (double)y0);
    const float *r0 = src + (size_t)(pl * H * W + y0 * W), *r1 = src + (size_t)(pl * H * W + y1 * W);
    float *o = dst + (size_t)(pl * OH * OW + oy * OW);
    for (int64_t ox = 0; ox < OW; ox++) {
      int64_t x0 = xi[2 * ox], x1 = xi[2 * ox + 1];
      float wx = wxs[ox];
      float top = r0[x0] * (1 - wx) + r0[x1] * wx;
      float bot = r1[x0] * (1 - wx) + r1[x1] * wx;
      o[ox] = top * (1 - wy) + bot * wy;
    }
  }
  free(xi);
  free(wxs);
  return GOPT_OK;
}

static int prep_resize(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  if (ex_dtype(x, k->in[0]) != GOPT_DT_FLOAT)
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "Resize runs on FLOAT only");
  resize_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = free;
  k->run = resize_run;
  const char *mode = gopt_node_get_string(g, k->node, "mode", "nearest");
  if (gopt_node_get_int(g, k->node, "antialias", 0) && strcmp(mode, "nearest"))
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "antialias (the reference kernel runs it)");
  if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) s->linear = 1;
  else if (strcmp(mode, "nearest"))
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "mode '%s' (nearest and linear are supported)", mode);
  const char *ct = gopt_node_get_string(g, k->node, "coordinate_transformation_mode", "half_pixel");
  if (x->opset < 11) ct = "asymmetric";
  if (!strcmp(ct, "half_pixel")) s->ct = CT_HALF;
  else if (!strcmp(ct, "pytorch_half_pixel")) s->ct = CT_PT_HALF;
  else if (!strcmp(ct, "align_corners")) s->ct = CT_ALIGN;
  else if (!strcmp(ct, "asymmetric")) s->ct = CT_ASYM;
  else if (!strcmp(ct, "tf_half_pixel_for_nearest")) s->ct = CT_TF_HALF;
  else return ex_node_error(x, k->node, err, GOPT_EUNSUP, "coordinate_transformation_mode '%s'", ct);
  const char *nm = gopt_node_get_string(g, k->node, "nearest_mode", "round_prefer_floor");
  if (x->opset < 11) nm = "floor";
  s->nm = !strcmp(nm, "floor") ? NM_FLOOR : !strcmp(nm, "ceil") ? NM_CEIL
          : !strcmp(nm, "round_prefer_ceil") ? NM_RPC : NM_RPF;
  return GOPT_OK;
}

/* ---- Tile ------------------------------------------------------------------------------------------ */

static int tile_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  int32_t in = k->in[0], out = k->out[0];
  int r = ex_rank(x, in);
  const int64_t *id = ex_dims(x, in), *od = ex_dims(x, out);
  int64_t is[GOPT_MAX_RANK];
  contiguous_strides(r, id, is);
  size_t es = esize(x, out);
  int64_t n = ex_numel(x, out);
  const char *src = ex_data(x, in);
  char *dst = ex_data(x, out);
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, off = 0;
    for (int i = r - 1; i >= 0; i--) {
      off += ((rem % od[i]) % id[i]) * is[i];
      rem /= od[i];
    }
    memcpy(dst + (size_t)e * es, src + (size_t)off * es, es);
  }
  return GOPT_OK;
}

/* ---- shape computations ------------------------------------------------------------------------------ */

static int shape_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  int32_t in = k->in[0];
  int r = ex_rank(x, in);
  int64_t *o = ex_data(x, k->out[0]);
  int64_t start = gopt_node_get_int(x->g, k->node, "start", 0);
  int64_t end = gopt_node_get_int(x->g, k->node, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  if (start < 0) start = 0;
  if (end > r) end = r;
  for (int64_t i = start; i < end; i++) o[i - start] = ex_dims(x, in)[i];
  return GOPT_OK;
}

static int size_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  *(int64_t *)ex_data(x, k->out[0]) = ex_numel(x, k->in[0]);
  return GOPT_OK;
}

/* Fills the output with one element value (ConstantOfShape, Constant from a scalar attr). */
static int fill_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  const char *v = k->st;
  size_t es = esize(x, k->out[0]);
  int64_t n = ex_numel(x, k->out[0]);
  char *o = ex_data(x, k->out[0]);
  for (int64_t i = 0; i < n; i++) memcpy(o + (size_t)i * es, v, es);
  return GOPT_OK;
}

static int const_node_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  (void)err;
  int32_t t = (int32_t)(intptr_t)k->st;
  memcpy(ex_data(x, k->out[0]), ex_data(x, t), (size_t)ex_numel(x, k->out[0]) * esize(x, k->out[0]));
  return GOPT_OK;
}

static int range_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int32_t out = k->out[0];
  int dt = ex_dtype(x, out);
  int64_t n = ex_numel(x, out);
  void *o = ex_data(x, out);
  if (dt == GOPT_DT_FLOAT || dt == GOPT_DT_DOUBLE) {
    double s = dt == GOPT_DT_FLOAT ? ((const float *)ex_data(x, k->in[0]))[0] : ((const double *)ex_data(x, k->in[0]))[0];
    double d = dt == GOPT_DT_FLOAT ? ((const float *)ex_data(x, k->in[2]))[0] : ((const double *)ex_data(x, k->in[2]))[0];
    for (int64_t i = 0; i < n; i++) {
      if (dt == GOPT_DT_FLOAT) ((float *)o)[i] = (float)(s + (double)i * d);
      else ((double *)o)[i] = s + (double)i * d;
    }
    return GOPT_OK;
  }
  int64_t sv[1], dv[1];
  size_t c;
  if (ex_read_ints(x, k->in[0], sv, 1, &c) || ex_read_ints(x, k->in[2], dv, 1, &c))
    return ex_node_error(x, k->node, err, GOPT_EINVAL, "cannot read start/delta");
  for (int64_t i = 0; i < n; i++) {
    int64_t v = sv[0] + i * dv[0];
    if (dt == GOPT_DT_INT64) ((int64_t *)o)[i] = v;
    else if (dt == GOPT_DT_INT32) ((int32_t *)o)[i] = (int32_t)v;
    else return ex_node_error(x, k->node, err, GOPT_EUNSUP, "dtype %s", gopt_dtype_name(dt));
  }
  return GOPT_OK;
}

int ex_prepare_data(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *g = x->g;
  int op = g->nodes.a[k->node].op;
  switch (op) {
    case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN: case GOPT_OP_SQUEEZE: case GOPT_OP_UNSQUEEZE:
      if (ex_numel(x, k->in[0]) != ex_numel(x, k->out[0]))
        return ex_node_error(x, k->node, err, GOPT_ESHAPE, "element counts differ");
      k->run = copy_run;
      return GOPT_OK;
    case GOPT_OP_TRANSPOSE: return prep_transpose(x, k, err);
    case GOPT_OP_SLICE: k->run = slice_run; return GOPT_OK;
    case GOPT_OP_CONCAT: return prep_cat(x, k, k->out[0], 0, err);
    case GOPT_OP_SPLIT: return prep_cat(x, k, k->in[0], 1, err);
    case GOPT_OP_GATHER: return prep_gather(x, k, err);
    case GOPT_OP_PAD:
      k->run = pad_run;
      if (x->lay && ex_layout_md(x, k->in[0]) && ex_layout_nop_pad(x, k->node, NULL)) {
        /* pads nothing and its input is in a oneDNN layout: the output keeps it (exec_layout.c) */
        if (ex_layout_set_md(x, k->out[0], ex_layout_md(x, k->in[0])))
          return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        ex_layout_note(x, k->node, 0, 0);
        k->run = copy_bytes_run;
      }
      return GOPT_OK;
    case GOPT_OP_RESIZE: return prep_resize(x, k, err);
    case GOPT_OP_TILE: k->run = tile_run; return GOPT_OK;
    case GOPT_OP_SHAPE_OF: k->run = shape_run; return GOPT_OK;
    case GOPT_OP_SIZE: k->run = size_run; return GOPT_OK;
    case GOPT_OP_RANGE: k->run = range_run; return GOPT_OK;
    case GOPT_OP_CONSTANT_OF_SHAPE: {
      char *v = calloc(1, 16);
      if (!v) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      k->st = v;
      k->fini = free;
      k->run = fill_run;
      const gopt_attr *a = gopt_node_attr(g, k->node, "value");
      if (a && a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) {
        const void *d = gopt_tensor_data(g, a->v.tensor);
        size_t es = esize(x, k->out[0]);
        if (!d || es > 16 || gopt_dtype_size(g->tensors.a[a->v.tensor].dtype) != es)
          return ex_node_error(x, k->node, err, GOPT_EUNSUP, "value attribute unreadable");
        memcpy(v, d, es);
      }
      return GOPT_OK;
    }
    case GOPT_OP_CONSTANT: {
      const gopt_attr *a = gopt_node_attr(g, k->node, "value");
      if (!a || a->kind != GOPT_ATTR_TENSOR || a->v.tensor < 0 || !gopt_tensor_data(g, a->v.tensor))
        return ex_node_error(x, k->node, err, GOPT_EUNSUP, "only a 'value' tensor attribute is supported");
      if (ex_numel(x, a->v.tensor) != ex_numel(x, k->out[0]))
        return ex_node_error(x, k->node, err, GOPT_ESHAPE, "value shape differs from the output");
      x->vals[a->v.tensor].data = (void *)gopt_tensor_data(g, a->v.tensor);
      k->st = (void *)(intptr_t)a->v.tensor;
      k->run = const_node_run;
      return GOPT_OK;
    }
    default: return ex_node_error(x, k->node, err, GOPT_EUNSUP, "op type not supported by the executor");
  }
}
