/* shape_rules.c: per-op shape and dtype inference rules, following the ONNX operator definitions
 * across opsets 7-18 (attribute-vs-input forms switch at the opset the spec moved them).
 * Unknowable dims become symbols memoised on their inputs (ops_fresh) so equal expressions agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

#define BIG_END (((int64_t)1 << 31) - 1) /* an end at or beyond this means "to the end" */

static int shape_err2(ictx *c, const char *what, const oshape *a, const oshape *b) {
  char x[160], y[160];
  return ops_node_err(c, GOPT_ESHAPE, "%s: %s vs %s", what, ops_fmt_shape(c, a, x, sizeof x),
                      ops_fmt_shape(c, b, y, sizeof y));
}

static int shape_err1(ictx *c, const char *what, const oshape *a) {
  char x[160];
  return ops_node_err(c, GOPT_ESHAPE, "%s (input shape %s)", what, ops_fmt_shape(c, a, x, sizeof x));
}

/* Normalises axis a for rank r into *out; error when out of range. */
static int norm_axis(ictx *c, int64_t a, int r, int *out) {
  *out = 0;
  if (a < -r || a >= r) return ops_node_err(c, GOPT_ESHAPE, "axis %lld out of range for rank %d", (long long)a, r);
  *out = (int)(a < 0 ? a + r : a);
  return 0;
}

static int64_t fresh_node(ictx *c, int32_t n, int out, int dim) {
  return ops_fresh(c, 'N', n, out, dim);
}

static void unknown_dims(ictx *c, int32_t n, int out, oshape *s, int rank) {
  s->rank = rank;
  for (int i = 0; i < rank && i < GOPT_MAX_RANK; i++) s->d[i] = fresh_node(c, n, out, i);
}

/* Tracked value entry to a dim (unknown or negative: a fresh symbol for (n, out, i)). */
static int64_t pval_dim(ictx *c, const pval *v, int fl, int32_t n, int out, int i) {
  if (v->s >= 0) return GOPT_DIM_SYM(v->s);
  if (v->s == PV_CONC) {
    int64_t x = fl ? pv_f2i(v->f) : v->i;
    if (x >= 0) return x;
  }
  return fresh_node(c, n, out, i);
}

/* Values of input i as a shape vector; returns the count, or -1 when the values are not tracked. */
static int in_shape_vals(ictx *c, int32_t n, int i, const pval **v, int *fl) {
  int32_t t = ops_in(c, n, i), cnt;
  *v = ops_val(c, t, &cnt);
  if (!*v || cnt > GOPT_MAX_RANK) return -1;
  *fl = ops_is_float_dtype(c->g->tensors.a[t].dtype);
  return cnt;
}

/* Length of a static 1-D input (-1 when unknown). */
static int in_len(ictx *c, int32_t n, int i) {
  oshape s;
  if (ops_in(c, n, i) < 0) return -1;
  ops_in_shape(c, n, i, &s);
  if (s.rank == 0) return 1;
  if (s.rank != 1 || s.d[0] < 0 || s.d[0] > GOPT_MAX_RANK * 2) return -1;
  return (int)s.d[0];
}

/* Multidirectional broadcast of k shapes. */
static int bcast(ictx *c, const oshape *sh, int k, oshape *out) {
  int r = 0;
  out->rank = -1;
  for (int i = 0; i < k; i++) {
    if (sh[i].rank < 0) return 0;
    if (sh[i].rank > r) r = sh[i].rank;
  }
  out->rank = r;
  for (int j = 0; j < r; j++) out->d[j] = 1;
  for (int i = 0; i < k; i++)
    for (int j = 0; j < sh[i].rank; j++) {
      int p = r - sh[i].rank + j, bad = 0;
      out->d[p] = ops_bcast_dim(c, out->d[p], sh[i].d[j], &bad);
      if (bad) return shape_err2(c, "shapes cannot be broadcast", &sh[0], &sh[i == 0 ? 0 : i]);
    }
  return 0;
}

static int r_same(ictx *c, int32_t n, int dtype) {
  oshape s;
  ops_in_shape(c, n, 0, &s);
  return ops_set_out(c, n, 0, dtype ? dtype : ops_in_dtype(c, n, 0), &s);
}

static int r_broadcast(ictx *c, int32_t n, int dtype) {
  oshape sh[16], out;
  int k = c->g->nodes.a[n].n_in, m = 0;
  for (int i = 0; i < k && m < 16; i++) {
    if (ops_in(c, n, i) < 0) continue;
    ops_in_shape(c, n, i, &sh[m++]);
  }
  int rc = bcast(c, sh, m, &out);
  if (rc) return rc;
  return ops_set_out(c, n, 0, dtype ? dtype : ops_in_dtype(c, n, 0), &out);
}

static int r_constant(ictx *c, int32_t n) {
  const gopt_graph *g = c->g;
  oshape s = {0};
  const gopt_attr *a;
  if ((a = gopt_node_attr(g, n, "value")) && a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) {
    const gopt_tensor *x = &g->tensors.a[a->v.tensor];
    s.rank = (x->flags & GOPT_T_NOSHAPE) ? -1 : x->rank;
    if (s.rank > 0) memcpy(s.d, gopt_tensor_dims(g, a->v.tensor), (size_t)s.rank * sizeof(int64_t));
    return ops_set_out(c, n, 0, x->dtype, &s);
  }
  if ((a = gopt_node_attr(g, n, "value_int"))) return ops_set_out(c, n, 0, GOPT_DT_INT64, &s);
  if ((a = gopt_node_attr(g, n, "value_float"))) return ops_set_out(c, n, 0, GOPT_DT_FLOAT, &s);
  if ((a = gopt_node_attr(g, n, "value_string"))) return ops_set_out(c, n, 0, GOPT_DT_STRING, &s);
  s.rank = 1;
  if ((a = gopt_node_attr(g, n, "value_ints"))) { s.d[0] = a->n; return ops_set_out(c, n, 0, GOPT_DT_INT64, &s); }
  if ((a = gopt_node_attr(g, n, "value_floats"))) { s.d[0] = a->n; return ops_set_out(c, n, 0, GOPT_DT_FLOAT, &s); }
  if ((a = gopt_node_attr(g, n, "value_strings"))) { s.d[0] = a->n; return ops_set_out(c, n, 0, GOPT_DT_STRING, &s); }
  return 0; /* sparse_value etc.: keep what the source said */
}

static int r_dropout(ictx *c, int32_t n) {
  oshape s;
  ops_in_shape(c, n, 0, &s);
  int rc = ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &s);
  if (!rc) rc = ops_set_out(c, n, 1, GOPT_DT_BOOL, &s);
  return rc;
}

static int r_expand(ictx *c, int32_t n) {
  oshape sh[2], out;
  const pval *v;
  int fl;
  ops_in_shape(c, n, 0, &sh[0]);
  int k = in_shape_vals(c, n, 1, &v, &fl);
  if (k >= 0) {
    sh[1].rank = k;
    for (int i = 0; i < k; i++) sh[1].d[i] = pval_dim(c, &v[i], fl, n, 0, i);
    /* a fresh (unknown) entry broadcast against the input's dim d != 1 gives d */
    for (int i = 0; i < k; i++) {
      int p = sh[0].rank - k + i;
      if (v[i].s == PV_UNK && sh[0].rank >= 0 && p >= 0 && sh[0].d[p] != 1) sh[1].d[i] = sh[0].d[p];
    }
    int rc = bcast(c, sh, 2, &out);
    if (rc) return rc;
    return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  }
  k = in_len(c, n, 1);
  if (k < 0 || sh[0].rank < 0) {
    out.rank = -1;
    return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  }
  out.rank = k > sh[0].rank ? k : sh[0].rank;
  for (int i = 0; i < out.rank; i++) {
    int p = sh[0].rank - out.rank + i;
    out.d[i] = (p >= 0 && sh[0].d[p] != 1) ? sh[0].d[p] : fresh_node(c, n, 0, i);
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_reshape(ictx *c, int32_t n) {
  oshape in, out;
  const pval *v = NULL;
  pval tmp[GOPT_MAX_RANK];
  int fl = 0, k;
  int dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &in);
  if (c->opset < 5) {
    size_t cnt = 0;
    const int64_t *a = gopt_node_get_ints(c->g, n, "shape", &cnt);
    k = (!a || cnt > GOPT_MAX_RANK) ? -1 : (int)cnt;
    for (int i = 0; i < k; i++) tmp[i] = (pval){a[i], 0, PV_CONC};
    v = tmp;
  } else {
    k = in_shape_vals(c, n, 1, &v, &fl);
  }
  if (k < 0) {
    k = in_len(c, n, 1);
    if (k < 0) out.rank = -1;
    else unknown_dims(c, n, 0, &out, k);
    return ops_set_out(c, n, 0, dt, &out);
  }
  int allowzero = c->opset >= 14 ? (int)gopt_node_get_int(c->g, n, "allowzero", 0) : 0;
  int neg = -1, all_static = in.rank >= 0;
  out.rank = k;
  for (int i = 0; i < k; i++) {
    if (v[i].s >= 0) { out.d[i] = GOPT_DIM_SYM(v[i].s); all_static = 0; continue; }
    if (v[i].s == PV_UNK) { out.d[i] = fresh_node(c, n, 0, i); all_static = 0; continue; }
    int64_t x = fl ? pv_f2i(v[i].f) : v[i].i;
    if (x == 0 && !allowzero) {
      if (in.rank < 0) { out.d[i] = fresh_node(c, n, 0, i); all_static = 0; continue; }
      if (i >= in.rank) return shape_err1(c, "shape entry 0 copies a dim the input does not have", &in);
      out.d[i] = in.d[i];
    } else if (x == -1) {
      if (neg >= 0) return ops_node_err(c, GOPT_ESHAPE, "shape has more than one -1");
      neg = i;
      out.d[i] = 1;
    } else if (x < 0) {
      return ops_node_err(c, GOPT_ESHAPE, "invalid shape entry %lld", (long long)x);
    } else {
      out.d[i] = x;
    }
  }
  for (int i = 0; i < in.rank; i++)
    if (in.d[i] < 0) all_static = 0;
  for (int i = 0; i < k; i++)
    if (i != neg && out.d[i] < 0) all_static = 0;
  if (neg >= 0) {
    if (in.rank < 0) {
      out.d[neg] = fresh_node(c, n, 0, neg);
    } else {
      int64_t den[GOPT_MAX_RANK];
      int nd = 0, ok;
      for (int i = 0; i < k; i++)
        if (i != neg) den[nd++] = out.d[i];
      int64_t r = ops_dims_ratio(c, in.d, in.rank, den, nd, &ok);
      if (!ok && all_static) {
        char x[160], y[160];
        out.d[neg] = -1;
        ops_fmt_shape(c, &out, y, sizeof y);
        return ops_node_err(c, GOPT_ESHAPE, "cannot reshape %s to %s", ops_fmt_shape(c, &in, x, sizeof x), y);
      }
      out.d[neg] = r;
    }
  } else if (all_static) {
    int64_t a = ops_dims_product(c, in.d, in.rank), b = ops_dims_product(c, out.d, k);
    if (a != b) return shape_err2(c, "reshape changes the element count", &in, &out);
  }
  return ops_set_out(c, n, 0, dt, &out);
}

static int r_flatten(ictx *c, int32_t n) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out.rank = -1;
  if (in.rank >= 0) {
    int64_t a = gopt_node_get_int(c->g, n, "axis", 1);
    if (a < 0) a += in.rank;
    if (a < 0 || a > in.rank) return ops_node_err(c, GOPT_ESHAPE, "axis out of range for rank %d", in.rank);
    out.rank = 2;
    out.d[0] = ops_dims_product(c, in.d, (int)a);
    out.d[1] = ops_dims_product(c, in.d + a, in.rank - (int)a);
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_squeeze(ictx *c, int32_t n) {
  oshape in, out;
  int64_t axes[GOPT_MAX_RANK];
  int present, rc;
  ops_in_shape(c, n, 0, &in);
  int k = ops_attr_or_input_ints(c, n, "axes", 1, c->opset >= 13, axes, GOPT_MAX_RANK, &present);
  out.rank = -1;
  if (in.rank < 0 || k < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  unsigned char drop[GOPT_MAX_RANK] = {0};
  if (!present || k == 0) {
    for (int i = 0; i < in.rank; i++) drop[i] = in.d[i] == 1;
  } else {
    for (int j = 0; j < k; j++) {
      int a;
      if ((rc = norm_axis(c, axes[j], in.rank, &a))) return rc;
      if (in.d[a] >= 0 && in.d[a] != 1) return shape_err1(c, "squeezed dim is not 1", &in);
      drop[a] = 1;
    }
  }
  out.rank = 0;
  for (int i = 0; i < in.rank; i++)
    if (!drop[i]) out.d[out.rank++] = in.d[i];
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_unsqueeze(ictx *c, int32_t n) {
  oshape in, out;
  int64_t axes[GOPT_MAX_RANK];
  int present;
  ops_in_shape(c, n, 0, &in);
  int k = ops_attr_or_input_ints(c, n, "axes", 1, c->opset >= 13, axes, GOPT_MAX_RANK, &present);
  out.rank = -1;
  if (in.rank < 0 || k < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  int r = in.rank + k;
  if (r > GOPT_MAX_RANK) return ops_node_err(c, GOPT_EUNSUP, "rank %d too large", r);
  unsigned char ins[GOPT_MAX_RANK] = {0};
  for (int j = 0; j < k; j++) {
    int a, rc;
    if ((rc = norm_axis(c, axes[j], r, &a))) return rc;
    if (ins[a]) return ops_node_err(c, GOPT_ESHAPE, "repeated axis %d", a);
    ins[a] = 1;
  }
  out.rank = r;
  for (int i = 0, j = 0; i < r; i++) out.d[i] = ins[i] ? 1 : in.d[j++];
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_transpose(ictx *c, int32_t n) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out.rank = in.rank;
  if (in.rank >= 0) {
    size_t k = 0;
    const int64_t *p = gopt_node_get_ints(c->g, n, "perm", &k);
    unsigned char seen[GOPT_MAX_RANK] = {0};
    if (p && (int)k != in.rank) return shape_err1(c, "perm length differs from the rank", &in);
    for (int i = 0; i < in.rank; i++) {
      int64_t a = p ? p[i] : in.rank - 1 - i;
      if (a < 0) a += in.rank;
      if (a < 0 || a >= in.rank || seen[a]) return shape_err1(c, "invalid perm", &in);
      seen[a] = 1;
      out.d[i] = in.d[a];
    }
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_concat(ictx *c, int32_t n) {
  oshape out, s;
  int k = c->g->nodes.a[n].n_in, ax = 0, first = -1, rc;
  int64_t axis = gopt_node_get_int(c->g, n, "axis", 0);
  out.rank = -1;
  int64_t sum = 0;
  int unknown = 0;
  for (int i = 0; i < k; i++) {
    if (ops_in(c, n, i) < 0) continue;
    ops_in_shape(c, n, i, &s);
    if (s.rank < 0) { unknown = 1; continue; }
    if (first < 0) {
      first = i;
      out = s;
      if ((rc = norm_axis(c, axis, s.rank, &ax))) return rc;
      sum = s.d[ax];
      continue;
    }
    if (s.rank != out.rank) return shape_err2(c, "inputs differ in rank", &out, &s);
    for (int j = 0; j < s.rank; j++) {
      if (j == ax) continue;
      if (out.d[j] >= 0 && s.d[j] >= 0 && out.d[j] != s.d[j]) return shape_err2(c, "inputs differ outside the concat axis", &out, &s);
      if (out.d[j] < 0 && s.d[j] >= 0) out.d[j] = s.d[j];
    }
    sum = ops_dim_add(c, sum, s.d[ax]);
  }
  if (out.rank >= 0) out.d[ax] = unknown ? fresh_node(c, n, 0, ax) : sum;
  return ops_set_out(c, n, 0, first >= 0 ? ops_in_dtype(c, n, first) : ops_in_dtype(c, n, 0), &out);
}

static int r_split(ictx *c, int32_t n) {
  oshape in, out;
  int64_t sp[64];
  int present, ax, rc;
  int n_out = c->g->nodes.a[n].n_out, dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &in);
  if (in.rank < 0) {
    out.rank = -1;
    for (int i = 0; i < n_out; i++)
      if ((rc = ops_set_out(c, n, i, dt, &out))) return rc;
    return 0;
  }
  if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", 0), in.rank, &ax))) return rc;
  int k = ops_attr_or_input_ints(c, n, "split", 1, c->opset >= 13, sp, 64, &present);
  if (present && k == 0 && c->opset >= 13) present = 0; /* empty split input = equal parts */
  int64_t d = in.d[ax];
  for (int i = 0; i < n_out; i++) {
    out = in;
    if (present && k >= 0) {
      if (k != n_out) return ops_node_err(c, GOPT_ESHAPE, "split has %d entries for %d outputs", k, n_out);
      out.d[ax] = sp[i];
    } else if (present) {
      out.d[ax] = fresh_node(c, n, i, ax);
    } else if (d >= 0) {
      if (c->opset >= 18 && d % n_out) {
        int64_t part = (d + n_out - 1) / n_out;
        out.d[ax] = i < n_out - 1 ? part : d - part * (n_out - 1);
      } else {
        if (d % n_out) return shape_err1(c, "dim not divisible by the number of outputs", &in);
        out.d[ax] = d / n_out;
      }
    } else {
      int ok;
      out.d[ax] = ops_dim_div(c, d, n_out, &ok);
    }
    if ((rc = ops_set_out(c, n, i, dt, &out))) return rc;
  }
  if (present && k > 0 && d >= 0) {
    int64_t s = 0;
    for (int i = 0; i < k; i++) s += sp[i];
    if (s != d) return shape_err1(c, "split sizes do not sum to the dim", &in);
  }
  return 0;
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Output length of slicing a concrete dim d (ONNX Slice semantics). */
static int64_t slice_len(int64_t d, int64_t st, int64_t en, int64_t step) {
  const int64_t L = (int64_t)1 << 62;
  st = clampi(st, -L, L);
  en = clampi(en, -L, L);
  if (st < 0) st += d;
  if (en < 0) en += d;
  if (step > 0) {
    st = clampi(st, 0, d);
    en = clampi(en, 0, d);
    return en > st ? (en - st + step - 1) / step : 0;
  }
  st = clampi(st, 0, d - 1);
  en = clampi(en, -1, d - 1);
  return st > en ? (st - en + (-step) - 1) / (-step) : 0;
}

static int r_slice(ictx *c, int32_t n) {
  oshape in, out;
  int64_t st[GOPT_MAX_RANK], en[GOPT_MAX_RANK], ax[GOPT_MAX_RANK], sp[GOPT_MAX_RANK];
  int p1, p2, p3, p4, rc;
  int newf = c->opset >= 10;
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  int ks = ops_attr_or_input_ints(c, n, "starts", 1, newf, st, GOPT_MAX_RANK, &p1);
  int ke = ops_attr_or_input_ints(c, n, "ends", 2, newf, en, GOPT_MAX_RANK, &p2);
  int ka = ops_attr_or_input_ints(c, n, "axes", 3, newf, ax, GOPT_MAX_RANK, &p3);
  int kp = newf ? ops_attr_or_input_ints(c, n, "steps", 4, 1, sp, GOPT_MAX_RANK, &p4) : (p4 = 0, 0);
  if (ks < 0 || ke < 0 || ka < 0 || kp < 0) {
    /* values unknown: the sliced axes (all when the axes are unknown) become unknown */
    for (int i = 0; i < in.rank; i++) {
      int hit = ka < 0 || !p3;
      for (int j = 0; j < ka && !hit; j++) hit = (ax[j] < 0 ? ax[j] + in.rank : ax[j]) == i;
      if (hit) out.d[i] = fresh_node(c, n, 0, i);
    }
    return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  }
  if (ks != ke) return ops_node_err(c, GOPT_ESHAPE, "starts and ends differ in length");
  if (!p3) { ka = ks; for (int j = 0; j < ks; j++) ax[j] = j; }
  if (!p4 || kp == 0) { kp = ks; for (int j = 0; j < ks; j++) sp[j] = 1; }
  if (ka != ks || kp != ks) return ops_node_err(c, GOPT_ESHAPE, "starts, axes and steps differ in length");
  for (int j = 0; j < ks; j++) {
    int a;
    if ((rc = norm_axis(c, ax[j], in.rank, &a))) return rc;
    if (sp[j] == 0) return ops_node_err(c, GOPT_ESHAPE, "slice step is 0");
    int64_t d = in.d[a];
    if (d >= 0) {
      out.d[a] = slice_len(d, st[j], en[j], sp[j]);
    } else if (sp[j] == 1 && st[j] >= 0 && en[j] >= BIG_END) {
      out.d[a] = st[j] == 0 ? d : ops_dim_sub(c, d, st[j]);
    } else if (sp[j] == -1 && en[j] <= -BIG_END && (st[j] == -1 || st[j] >= BIG_END)) {
      out.d[a] = d; /* full reversal */
    } else {
      int64_t key[6] = {'S', d, st[j], en[j], sp[j], 0};
      out.d[a] = ops_fresh_key(c, key, 6);
    }
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_gather(ictx *c, int32_t n) {
  oshape d, ix, out;
  int ax, rc;
  ops_in_shape(c, n, 0, &d);
  ops_in_shape(c, n, 1, &ix);
  out.rank = -1;
  if (d.rank >= 0 && ix.rank >= 0) {
    if (d.rank == 0) return shape_err1(c, "gather from a scalar", &d);
    if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", 0), d.rank, &ax))) return rc;
    out.rank = d.rank - 1 + ix.rank;
    if (out.rank > GOPT_MAX_RANK) return ops_node_err(c, GOPT_EUNSUP, "rank too large");
    int p = 0;
    for (int i = 0; i < ax; i++) out.d[p++] = d.d[i];
    for (int i = 0; i < ix.rank; i++) out.d[p++] = ix.d[i];
    for (int i = ax + 1; i < d.rank; i++) out.d[p++] = d.d[i];
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_gather_nd(ictx *c, int32_t n) {
  oshape d, ix, out;
  ops_in_shape(c, n, 0, &d);
  ops_in_shape(c, n, 1, &ix);
  out.rank = -1;
  int b = (int)gopt_node_get_int(c->g, n, "batch_dims", 0);
  if (d.rank >= 0 && ix.rank >= 1 && ix.d[ix.rank - 1] >= 0) {
    int64_t m = ix.d[ix.rank - 1];
    if (b + m > d.rank) return shape_err2(c, "indices address more dims than data has", &d, &ix);
    out.rank = ix.rank - 1 + d.rank - b - (int)m;
    if (out.rank > GOPT_MAX_RANK || out.rank < 0) return ops_node_err(c, GOPT_EUNSUP, "rank too large");
    int p = 0;
    for (int i = 0; i < ix.rank - 1; i++) out.d[p++] = ix.d[i];
    for (int i = b + (int)m; i < d.rank; i++) out.d[p++] = d.d[i];
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_tile(ictx *c, int32_t n) {
  oshape in, out;
  const pval *v;
  int fl;
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  int k = in_shape_vals(c, n, 1, &v, &fl);
  if (k >= 0 && k != in.rank) return shape_err1(c, "repeats length differs from the rank", &in);
  for (int i = 0; i < in.rank; i++) {
    if (k < 0 || v[i].s != PV_CONC) {
      out.d[i] = fresh_node(c, n, 0, i);
      continue;
    }
    int64_t r = fl ? pv_f2i(v[i].f) : v[i].i;
    if (r < 0) return ops_node_err(c, GOPT_ESHAPE, "invalid repeats entry %lld", (long long)r);
    out.d[i] = ops_dim_mul(c, in.d[i], r);
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_pad(ictx *c, int32_t n) {
  oshape in, out;
  int64_t pads[2 * GOPT_MAX_RANK], axes[GOPT_MAX_RANK];
  int present, pa = 0;
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  int k;
  if (c->opset >= 11) {
    k = ops_attr_or_input_ints(c, n, "pads", 1, 1, pads, 2 * GOPT_MAX_RANK, &present);
  } else {
    k = ops_attr_or_input_ints(c, n, "pads", 0, 0, pads, 2 * GOPT_MAX_RANK, &present);
    if (!present) k = ops_attr_or_input_ints(c, n, "paddings", 0, 0, pads, 2 * GOPT_MAX_RANK, &present);
  }
  int na = in.rank;
  if (c->opset >= 18 && ops_in(c, n, 3) >= 0) {
    na = ops_in_ints(c, n, 3, axes, GOPT_MAX_RANK);
    pa = 1;
    if (na < 0) k = -1;
  }
  if (k < 0) {
    for (int i = 0; i < in.rank; i++) out.d[i] = fresh_node(c, n, 0, i);
    return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  }
  if (k != 2 * na) return shape_err1(c, "pads length is not twice the rank", &in);
  for (int j = 0; j < na; j++) {
    int a = j, rc;
    if (pa && (rc = norm_axis(c, axes[j], in.rank, &a))) return rc;
    const int64_t lim = (int64_t)1 << 56;
    if (pads[j] < -lim || pads[j] > lim || pads[j + na] < -lim || pads[j + na] > lim)
      return shape_err1(c, "pad beyond 2^56", &in);
    int64_t d = in.d[a], tot = pads[j] + pads[j + na];
    if (d >= 0) {
      if (d + tot < 0) return shape_err1(c, "negative padded size", &in);
      out.d[a] = d + tot;
    } else {
      out.d[a] = tot == 0 ? d : tot > 0 ? ops_dim_add(c, d, tot) : ops_fresh(c, 'p', d, tot, 0);
    }
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

/* floor(d * scale) in float arithmetic, as onnx's resize inference computes it. */
static int64_t scaled_dim(ictx *c, int64_t d, double scale) {
  if (d >= 0) {
    int64_t r = pv_f2i(floorf((float)d * (float)scale));
    return r >= 0 ? r : ops_fresh(c, 'Z', d, -1, 0); /* a NaN or negative scale: unknown */
  }
  if ((float)scale == 1.0f) return d;
  float f = (float)scale;
  int32_t bits;
  memcpy(&bits, &f, 4);
  return ops_fresh(c, 'Z', d, bits, 0);
}

static int r_resize(ictx *c, int32_t n, int upsample) {
  oshape in, out;
  double sc[GOPT_MAX_RANK];
  int dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank < 0) return ops_set_out(c, n, 0, dt, &out);
  int si = -1, zi = -1; /* input index of scales and sizes */
  if (upsample) {
    if (c->opset < 9) {
      size_t k = 0;
      const float *f = gopt_node_get_floats(c->g, n, "scales", &k);
      if (f && (int)k == in.rank) {
        for (int i = 0; i < in.rank; i++) out.d[i] = scaled_dim(c, in.d[i], f[i]);
        return ops_set_out(c, n, 0, dt, &out);
      }
      unknown_dims(c, n, 0, &out, in.rank);
      return ops_set_out(c, n, 0, dt, &out);
    }
    si = 1;
  } else if (c->opset < 11) {
    si = 1;
  } else {
    si = 2;
    zi = 3;
  }
  /* opset 18: scales/sizes may cover only the dims listed in `axes` */
  int ax[GOPT_MAX_RANK], na = in.rank;
  size_t nax = 0;
  const int64_t *axa = c->opset >= 18 ? gopt_node_get_ints(c->g, n, "axes", &nax) : NULL;
  if (axa && nax <= (size_t)in.rank) {
    na = (int)nax;
    for (int j = 0; j < na; j++) {
      int rc = norm_axis(c, axa[j], in.rank, &ax[j]);
      if (rc) return rc;
    }
  } else {
    for (int j = 0; j < na; j++) ax[j] = j;
  }
  if (zi >= 0 && ops_in(c, n, zi) >= 0 && in_len(c, n, zi) != 0) {
    const pval *v;
    int fl, k = in_shape_vals(c, n, zi, &v, &fl);
    if (k >= 0 && k != na) return shape_err1(c, "sizes length differs from the rank", &in);
    for (int j = 0; j < na; j++) out.d[ax[j]] = k < 0 ? fresh_node(c, n, 0, ax[j]) : pval_dim(c, &v[j], fl, n, 0, ax[j]);
    return ops_set_out(c, n, 0, dt, &out);
  }
  if (si >= 0 && ops_in(c, n, si) >= 0 && in_len(c, n, si) != 0) {
    int k = ops_in_floats(c, n, si, sc, GOPT_MAX_RANK);
    if (k >= 0 && k != na) return shape_err1(c, "scales length differs from the rank", &in);
    for (int j = 0; j < na; j++) out.d[ax[j]] = k < 0 ? fresh_node(c, n, 0, ax[j]) : scaled_dim(c, in.d[ax[j]], sc[j]);
    return ops_set_out(c, n, 0, dt, &out);
  }
  unknown_dims(c, n, 0, &out, in.rank);
  return ops_set_out(c, n, 0, dt, &out);
}

static int r_depth_space(ictx *c, int32_t n, int to_space) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out = in;
  int64_t b = gopt_node_get_int(c->g, n, "blocksize", 1);
  if (in.rank >= 0) {
    if (in.rank != 4 || b <= 0) return shape_err1(c, "expects a 4-D input and a positive blocksize", &in);
    int ok;
    if (to_space) {
      out.d[1] = ops_dim_div(c, in.d[1], b * b, &ok);
      if (!ok && in.d[1] >= 0) return shape_err1(c, "channels not divisible by blocksize^2", &in);
      out.d[2] = ops_dim_mul(c, in.d[2], b);
      out.d[3] = ops_dim_mul(c, in.d[3], b);
    } else {
      out.d[1] = ops_dim_mul(c, in.d[1], b * b);
      out.d[2] = ops_dim_div(c, in.d[2], b, &ok);
      out.d[3] = ops_dim_div(c, in.d[3], b, &ok);
    }
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_one_hot(ictx *c, int32_t n) {
  oshape in, out;
  int64_t depth;
  double df;
  ops_in_shape(c, n, 0, &in);
  out.rank = -1;
  if (in.rank >= 0) {
    int r = in.rank + 1, ax, rc;
    if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", -1), r, &ax))) return rc;
    if (ops_in_floats(c, n, 1, &df, 1) == 1 && pv_f2i(df) >= 0) depth = pv_f2i(df);
    else depth = fresh_node(c, n, 0, ax);
    out.rank = r;
    for (int i = 0, j = 0; i < r; i++) out.d[i] = i == ax ? depth : in.d[j++];
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 2), &out);
}

static int r_shape(ictx *c, int32_t n) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out.rank = 1;
  if (in.rank < 0) {
    out.d[0] = fresh_node(c, n, 0, 0);
  } else {
    int64_t st = 0, en = in.rank;
    if (c->opset >= 15) {
      st = gopt_node_get_int(c->g, n, "start", 0);
      en = gopt_node_get_int(c->g, n, "end", in.rank);
    }
    if (st < 0) st += in.rank;
    if (en < 0) en += in.rank;
    st = clampi(st, 0, in.rank);
    en = clampi(en, 0, in.rank);
    out.d[0] = en > st ? en - st : 0;
  }
  return ops_set_out(c, n, 0, GOPT_DT_INT64, &out);
}

static int r_constant_of_shape(ictx *c, int32_t n) {
  oshape out;
  const pval *v;
  int fl, dt = GOPT_DT_FLOAT;
  const gopt_attr *a = gopt_node_attr(c->g, n, "value");
  if (a && a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) dt = c->g->tensors.a[a->v.tensor].dtype;
  int k = in_shape_vals(c, n, 0, &v, &fl);
  if (k >= 0) {
    out.rank = k;
    for (int i = 0; i < k; i++) out.d[i] = pval_dim(c, &v[i], fl, n, 0, i);
  } else {
    k = in_len(c, n, 0);
    if (k < 0) out.rank = -1;
    else unknown_dims(c, n, 0, &out, k);
  }
  return ops_set_out(c, n, 0, dt, &out);
}

static int r_range(ictx *c, int32_t n) {
  oshape out;
  int32_t cnt[3];
  const pval *v[3];
  out.rank = 1;
  int fl = ops_is_float_dtype(ops_in_dtype(c, n, 0));
  for (int i = 0; i < 3; i++) {
    v[i] = ops_val(c, ops_in(c, n, i), &cnt[i]);
    if (v[i] && cnt[i] != 1) v[i] = NULL;
  }
  if (v[0] && v[1] && v[2] && v[0]->s == PV_CONC && v[1]->s == PV_CONC && v[2]->s == PV_CONC) {
    double st = fl ? v[0]->f : (double)v[0]->i, li = fl ? v[1]->f : (double)v[1]->i,
           de = fl ? v[2]->f : (double)v[2]->i;
    if (de == 0) return ops_node_err(c, GOPT_ESHAPE, "range delta is 0");
    double len = ceil((li - st) / de);
    if (!fl) {
      int64_t a = v[0]->i, b = v[1]->i, d = v[2]->i, num;
      if (__builtin_sub_overflow(b, a, &num) || d == INT64_MIN || num == INT64_MIN)
        return ops_node_err(c, GOPT_ESHAPE, "range bounds overflow");
      /* ceil(num / d) for same-signed num and d, without overflow */
      len = (double)(d > 0 ? (num > 0 ? num / d + (num % d != 0) : 0)
                           : (num < 0 ? (-num) / (-d) + ((-num) % (-d) != 0) : 0));
    }
    int64_t L = pv_f2i(len);
    if (len > 0 && L < 0) return ops_node_err(c, GOPT_ESHAPE, "range length is not finite");
    out.d[0] = L > 0 ? L : 0;
  } else if (!fl && v[0] && v[1] && v[2] && v[0]->s == PV_CONC && v[2]->s == PV_CONC && v[2]->i == 1 &&
             v[1]->s >= 0 && v[0]->i >= 0) {
    out.d[0] = ops_dim_sub(c, GOPT_DIM_SYM(v[1]->s), v[0]->i);
  } else {
    out.d[0] = fresh_node(c, n, 0, 0);
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_topk(ictx *c, int32_t n) {
  oshape in, out;
  int64_t k = -1;
  int ax, rc;
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank >= 0) {
    if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", -1), in.rank, &ax))) return rc;
    if (c->opset >= 10) {
      int64_t kv;
      if (ops_in_ints(c, n, 1, &kv, 1) == 1) k = kv;
    } else {
      k = gopt_node_get_int(c->g, n, "k", -1);
    }
    out.d[ax] = k >= 0 ? k : fresh_node(c, n, 0, ax);
    if (k >= 0 && in.d[ax] >= 0 && k > in.d[ax]) return shape_err1(c, "k larger than the axis", &in);
  }
  rc = ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  if (!rc) rc = ops_set_out(c, n, 1, GOPT_DT_INT64, &out);
  return rc;
}

static int r_reduce(ictx *c, int32_t n, int op) {
  oshape in, out;
  int64_t axes[GOPT_MAX_RANK];
  int present;
  ops_in_shape(c, n, 0, &in);
  int from_input = op == GOPT_OP_REDUCE_SUM ? c->opset >= 13 : c->opset >= 18;
  int keep = (int)gopt_node_get_int(c->g, n, "keepdims", 1);
  int noop = from_input ? (int)gopt_node_get_int(c->g, n, "noop_with_empty_axes", 0) : 0;
  int k = ops_attr_or_input_ints(c, n, "axes", 1, from_input, axes, GOPT_MAX_RANK, &present);
  out.rank = -1;
  if (in.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  if (k < 0) {
    if (keep) unknown_dims(c, n, 0, &out, in.rank);
    return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  }
  unsigned char red[GOPT_MAX_RANK] = {0};
  if (k == 0) {
    if (noop) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &in);
    memset(red, 1, sizeof red);
  }
  for (int j = 0; j < k; j++) {
    int a, rc;
    if ((rc = norm_axis(c, axes[j], in.rank, &a))) return rc;
    red[a] = 1;
  }
  out.rank = 0;
  for (int i = 0; i < in.rank; i++) {
    if (!red[i]) out.d[out.rank++] = in.d[i];
    else if (keep) out.d[out.rank++] = 1;
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_argmax(ictx *c, int32_t n) {
  oshape in, out;
  int ax, rc;
  ops_in_shape(c, n, 0, &in);
  out.rank = -1;
  if (in.rank >= 0) {
    if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", 0), in.rank, &ax))) return rc;
    int keep = (int)gopt_node_get_int(c->g, n, "keepdims", 1);
    out.rank = 0;
    for (int i = 0; i < in.rank; i++) {
      if (i != ax) out.d[out.rank++] = in.d[i];
      else if (keep) out.d[out.rank++] = 1;
    }
  }
  return ops_set_out(c, n, 0, GOPT_DT_INT64, &out);
}

static int r_layer_norm(ictx *c, int32_t n) {
  oshape in, st;
  int rc = r_same(c, n, 0);
  if (rc) return rc;
  ops_in_shape(c, n, 0, &in);
  st = in;
  int sdt = (int)gopt_node_get_int(c->g, n, "stash_type", GOPT_DT_FLOAT);
  if (in.rank >= 0) {
    int ax;
    if ((rc = norm_axis(c, gopt_node_get_int(c->g, n, "axis", -1), in.rank, &ax))) return rc;
    for (int i = ax; i < in.rank; i++) st.d[i] = 1;
  }
  if ((rc = ops_set_out(c, n, 1, sdt, &st))) return rc;
  return ops_set_out(c, n, 2, sdt, &st);
}

static int r_batch_norm(ictx *c, int32_t n) {
  oshape in, ch;
  int rc = r_same(c, n, 0);
  if (rc) return rc;
  ops_in_shape(c, n, 0, &in);
  /* scale, B, mean, var: 1-D, one entry per channel (a shorter one would be read past its end) */
  for (int i = 1; i < c->g->nodes.a[n].n_in && i < 5; i++) {
    oshape p;
    ops_in_shape(c, n, i, &p);
    if (p.rank < 0) continue;
    if (p.rank != 1) return shape_err2(c, "BatchNormalization parameter is not 1-D", &p, &in);
    if (in.rank >= 2 && in.d[1] >= 0 && p.d[0] >= 0 && p.d[0] != in.d[1])
      return shape_err2(c, "BatchNormalization parameter length differs from the channel count", &p, &in);
  }
  int n_out = c->g->nodes.a[n].n_out;
  if (n_out <= 1) return 0;
  ops_in_shape(c, n, 0, &in);
  ops_in_shape(c, n, 1, &ch);
  if (ch.rank != 1) {
    ch.rank = 1;
    ch.d[0] = in.rank >= 2 ? in.d[1] : fresh_node(c, n, 1, 0);
  }
  for (int i = 1; i < n_out; i++) {
    int dt = ops_in_dtype(c, n, i <= 2 ? 3 : 1);
    if (dt == GOPT_DT_UNDEFINED) dt = ops_in_dtype(c, n, 0);
    if ((rc = ops_set_out(c, n, i, dt, &ch))) return rc;
  }
  return 0;
}

static int r_global_pool(ictx *c, int32_t n) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out = in;
  if (in.rank >= 0) {
    if (in.rank < 2) return shape_err1(c, "expects rank >= 2", &in);
    for (int i = 2; i < in.rank; i++) out.d[i] = 1;
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

/* Spatial output dims of Conv and the pools, exactly as onnx's convPoolShapeInference. */
static int conv_pool(ictx *c, int32_t n, int op) {
  oshape x, w, out;
  int is_conv = op == GOPT_OP_CONV, rc;
  int dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &x);
  if (is_conv) ops_in_shape(c, n, 1, &w);
  else w.rank = -1;
  out.rank = -1;
  if (x.rank < 0) goto set;
  if (x.rank < 2) return shape_err1(c, "expects rank >= 2", &x);
  int ns = x.rank - 2;
  size_t kn = 0, cnt = 0;
  int64_t k[GOPT_MAX_RANK], s[GOPT_MAX_RANK], dl[GOPT_MAX_RANK], p[2 * GOPT_MAX_RANK];
  const int64_t *a = gopt_node_get_ints(c->g, n, "kernel_shape", &kn);
  if (a) {
    if ((int)kn != ns) return shape_err1(c, "kernel_shape length differs from the spatial rank", &x);
    memcpy(k, a, kn * sizeof *k);
  } else if (w.rank == x.rank) {
    memcpy(k, w.d + 2, (size_t)ns * sizeof *k);
    for (int i = 0; i < ns; i++)
      if (k[i] < 0) { unknown_dims(c, n, 0, &out, x.rank); goto batch; }
  } else {
    if (w.rank >= 0) return shape_err2(c, "weight rank differs from the input rank", &x, &w);
    unknown_dims(c, n, 0, &out, x.rank);
    goto batch;
  }
  for (int i = 0; i < ns; i++) s[i] = dl[i] = 1;
  for (int i = 0; i < 2 * ns; i++) p[i] = 0;
  if ((a = gopt_node_get_ints(c->g, n, "strides", &cnt))) {
    if ((int)cnt != ns) return shape_err1(c, "strides length differs from the spatial rank", &x);
    memcpy(s, a, cnt * sizeof *s);
  }
  if ((a = gopt_node_get_ints(c->g, n, "dilations", &cnt))) {
    if ((int)cnt != ns) return shape_err1(c, "dilations length differs from the spatial rank", &x);
    memcpy(dl, a, cnt * sizeof *dl);
  }
  if ((a = gopt_node_get_ints(c->g, n, "pads", &cnt))) {
    if ((int)cnt != 2 * ns) return shape_err1(c, "pads length is not twice the spatial rank", &x);
    memcpy(p, a, cnt * sizeof *p);
  }
  for (int i = 0; i < ns; i++)
    if (s[i] <= 0 || dl[i] <= 0 || k[i] <= 0) return shape_err1(c, "non-positive kernel, stride or dilation", &x);
  /* Bounds that keep the window arithmetic below (dilated kernel, padded input) overflow-free. */
  const int64_t lim = (int64_t)1 << 31;
  for (int i = 0; i < ns; i++)
    if (s[i] > lim || dl[i] > lim || k[i] > lim || p[i] < -lim || p[i] > lim || p[i + ns] < -lim ||
        p[i + ns] > lim)
      return shape_err1(c, "kernel, stride, dilation or pad beyond 2^31", &x);
  const char *ap = gopt_node_get_string(c->g, n, "auto_pad", "NOTSET");
  int same_u = strcmp(ap, "SAME_UPPER") == 0, same_l = strcmp(ap, "SAME_LOWER") == 0;
  int valid = strcmp(ap, "VALID") == 0;
  int ceil_mode = (int)gopt_node_get_int(c->g, n, "ceil_mode", 0);
  out.rank = x.rank;
  for (int i = 0; i < ns; i++) {
    int64_t in = x.d[2 + i], ek = (k[i] - 1) * dl[i] + 1;
    if (valid) p[i] = p[i + ns] = 0;
    if (in < 0) {
      int64_t key[9] = {'C', in, ek, s[i], p[i] + p[i + ns], ceil_mode, same_u | same_l, 0, 0};
      out.d[2 + i] = ops_fresh_key(c, key, 9);
      continue;
    }
    if (same_u || same_l) {
      int64_t res = 0;
      if (s[i] > 1) res = in % s[i];
      int64_t tot = res == 0 ? ek - s[i] : ek - res;
      if (tot < 0) tot = 0;
      int64_t small = tot >> 1, big = tot - small;
      p[i] = same_u ? small : big;
      p[i + ns] = same_u ? big : small;
    }
    int64_t eff = in + p[i] + p[i + ns];
    int64_t pos = ceil_mode ? (int64_t)ceil((double)(eff - ek) / (double)s[i]) : (eff - ek) / s[i];
    if (eff - ek < 0 && !ceil_mode) pos = -1;
    if (ceil_mode && pos > 0 && pos * s[i] >= in + p[i]) pos--; /* a last window starting in the end pad */
    if (1 + pos <= 0) {
      char b[160];
      return ops_node_err(c, GOPT_ESHAPE, "kernel %lld (dilated) exceeds padded input %lld on spatial axis %d (input %s)",
                          (long long)ek, (long long)eff, i, ops_fmt_shape(c, &x, b, sizeof b));
    }
    out.d[2 + i] = 1 + pos;
  }
batch:
  out.d[0] = x.d[0];
  if (is_conv) {
    int64_t grp = gopt_node_get_int(c->g, n, "group", 1);
    if (w.rank >= 2) {
      out.d[1] = w.d[0];
      if (x.d[1] >= 0 && w.d[1] >= 0 && x.d[1] != w.d[1] * grp)
        return shape_err2(c, "input channels differ from weight channels * group", &x, &w);
    } else {
      out.d[1] = fresh_node(c, n, 0, 1);
    }
  } else {
    out.d[1] = x.d[1];
  }
set:
  rc = ops_set_out(c, n, 0, dt, &out);
  if (!rc && op == GOPT_OP_MAX_POOL) rc = ops_set_out(c, n, 1, GOPT_DT_INT64, &out);
  return rc;
}

static int r_conv_transpose(ictx *c, int32_t n) {
  oshape x, w, out;
  int dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &x);
  ops_in_shape(c, n, 1, &w);
  out.rank = -1;
  if (x.rank < 0) return ops_set_out(c, n, 0, dt, &out);
  if (x.rank < 2) return shape_err1(c, "expects rank >= 2", &x);
  int ns = x.rank - 2;
  int64_t grp = gopt_node_get_int(c->g, n, "group", 1);
  int64_t k[GOPT_MAX_RANK], s[GOPT_MAX_RANK], dl[GOPT_MAX_RANK], op_[GOPT_MAX_RANK], p[2 * GOPT_MAX_RANK];
  size_t cnt;
  const int64_t *a;
  out.rank = x.rank;
  out.d[0] = x.d[0];
  out.d[1] = w.rank >= 2 ? ops_dim_mul(c, w.d[1], grp) : fresh_node(c, n, 0, 1);
  if (w.rank >= 2 && x.d[1] >= 0 && w.d[0] >= 0 && x.d[1] != w.d[0])
    return shape_err2(c, "input channels differ from the weight's first dim", &x, &w);
  for (int i = 0; i < ns; i++) { s[i] = dl[i] = 1; op_[i] = 0; p[i] = p[i + ns] = 0; k[i] = -1; }
  if ((a = gopt_node_get_ints(c->g, n, "kernel_shape", &cnt)) && (int)cnt == ns) memcpy(k, a, cnt * 8);
  else if (w.rank == x.rank) memcpy(k, w.d + 2, (size_t)ns * 8);
  if ((a = gopt_node_get_ints(c->g, n, "strides", &cnt)) && (int)cnt == ns) memcpy(s, a, cnt * 8);
  if ((a = gopt_node_get_ints(c->g, n, "dilations", &cnt)) && (int)cnt == ns) memcpy(dl, a, cnt * 8);
  if ((a = gopt_node_get_ints(c->g, n, "output_padding", &cnt)) && (int)cnt == ns) memcpy(op_, a, cnt * 8);
  if ((a = gopt_node_get_ints(c->g, n, "pads", &cnt)) && (int)cnt == 2 * ns) memcpy(p, a, cnt * 8);
  const int64_t *os = gopt_node_get_ints(c->g, n, "output_shape", &cnt);
  const char *ap = gopt_node_get_string(c->g, n, "auto_pad", "NOTSET");
  int same = strncmp(ap, "SAME", 4) == 0;
  for (int i = 0; i < ns; i++) {
    int64_t in = x.d[2 + i];
    if (os && (int)cnt >= ns) { out.d[2 + i] = os[cnt - (size_t)ns + (size_t)i]; continue; }
    if (in < 0 || k[i] < 0) {
      out.d[2 + i] = ops_fresh(c, 'T', in, k[i] * 1000 + s[i], p[i] + p[i + ns]);
      continue;
    }
    int64_t ek = (k[i] - 1) * dl[i] + 1;
    int64_t full = s[i] * (in - 1) + op_[i] + ek;
    out.d[2 + i] = same ? in * s[i] : full - p[i] - p[i + ns];
    if (out.d[2 + i] < 0) return shape_err1(c, "negative output size", &x);
  }
  return ops_set_out(c, n, 0, dt, &out);
}

static int r_matmul(ictx *c, int32_t n) {
  oshape a, b, out, ba, bb, bo;
  ops_in_shape(c, n, 0, &a);
  ops_in_shape(c, n, 1, &b);
  out.rank = -1;
  if (a.rank < 0 || b.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
  if (a.rank == 0 || b.rank == 0) return shape_err2(c, "matmul of a scalar", &a, &b);
  int64_t ka = a.d[a.rank - 1], kb = b.rank == 1 ? b.d[0] : b.d[b.rank - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) return shape_err2(c, "inner dims differ", &a, &b);
  ba.rank = a.rank >= 2 ? a.rank - 2 : 0;
  bb.rank = b.rank >= 2 ? b.rank - 2 : 0;
  memcpy(ba.d, a.d, (size_t)ba.rank * 8);
  memcpy(bb.d, b.d, (size_t)bb.rank * 8);
  oshape both[2] = {ba, bb};
  int rc = bcast(c, both, 2, &bo);
  if (rc) return shape_err2(c, "batch dims cannot be broadcast", &a, &b);
  out = bo;
  if (a.rank >= 2) out.d[out.rank++] = a.d[a.rank - 2];
  if (b.rank >= 2) out.d[out.rank++] = b.d[b.rank - 1];
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

static int r_gemm(ictx *c, int32_t n) {
  oshape a, b, out;
  ops_in_shape(c, n, 0, &a);
  ops_in_shape(c, n, 1, &b);
  out.rank = -1;
  if (a.rank >= 0 && b.rank >= 0) {
    if (a.rank != 2 || b.rank != 2) return shape_err2(c, "gemm expects 2-D inputs", &a, &b);
    int ta = (int)gopt_node_get_int(c->g, n, "transA", 0), tb = (int)gopt_node_get_int(c->g, n, "transB", 0);
    int64_t m = a.d[ta ? 1 : 0], ka = a.d[ta ? 0 : 1], kb = b.d[tb ? 1 : 0], nn = b.d[tb ? 0 : 1];
    if (ka >= 0 && kb >= 0 && ka != kb) return shape_err2(c, "inner dims differ", &a, &b);
    out.rank = 2;
    out.d[0] = m;
    out.d[1] = nn;
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

/* Einsum: labels of each operand; '.' stands for the ellipsis dims. */
static int r_einsum(ictx *c, int32_t n) {
  const char *eq = gopt_node_get_string(c->g, n, "equation", "");
  int n_in = c->g->nodes.a[n].n_in;
  int64_t dim_of[128];
  int count[128] = {0};
  unsigned char known[128] = {0};
  oshape ell = {0}, out;
  char lhs[256], rhs[64];
  int has_arrow = 0, has_ell = 0, rc;
  size_t li = 0, ri = 0;
  for (const char *q = eq; *q; q++) {
    if (*q == ' ') continue;
    if (q[0] == '-' && q[1] == '>') { has_arrow = 1; q++; continue; }
    if (*q == '.') {
      if (q[1] != '.' || q[2] != '.') return ops_node_err(c, GOPT_EUNSUP, "bad einsum equation '%s'", eq);
      q += 2;
      if (has_arrow) { if (ri < sizeof rhs - 1) rhs[ri++] = '.'; }
      else if (li < sizeof lhs - 1) lhs[li++] = '.';
      continue;
    }
    if (has_arrow) { if (ri < sizeof rhs - 1) rhs[ri++] = *q; }
    else if (li < sizeof lhs - 1) lhs[li++] = *q;
  }
  lhs[li] = 0;
  rhs[ri] = 0;
  out.rank = -1;
  int op = 0;
  const char *t = lhs;
  while (op < n_in) {
    const char *e = strchr(t, ',');
    size_t len = e ? (size_t)(e - t) : strlen(t);
    oshape s;
    ops_in_shape(c, n, op, &s);
    if (s.rank < 0) return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
    int nl = 0, el = 0;
    for (size_t i = 0; i < len; i++) { if (t[i] == '.') el = 1; else nl++; }
    int ne = s.rank - nl;
    if (ne < 0 || (!el && ne)) return shape_err1(c, "einsum operand rank differs from its labels", &s);
    int p = 0;
    for (size_t i = 0; i < len; i++) {
      unsigned char l = (unsigned char)t[i];
      if (l == '.') {
        oshape es, tmp[2];
        es.rank = ne;
        memcpy(es.d, s.d + p, (size_t)ne * 8);
        tmp[0] = ell;
        tmp[1] = es;
        if ((rc = bcast(c, tmp, 2, &ell))) return rc;
        has_ell = 1;
        p += ne;
        continue;
      }
      if (l >= 128) return ops_node_err(c, GOPT_EUNSUP, "bad einsum label");
      int64_t d = s.d[p++];
      count[l]++;
      if (!known[l] || (dim_of[l] < 0 && d >= 0) || dim_of[l] == 1) { dim_of[l] = d; known[l] = 1; }
      else if (d >= 0 && dim_of[l] >= 0 && d != dim_of[l] && d != 1)
        return shape_err1(c, "einsum label sizes differ", &s);
    }
    op++;
    if (!e) break;
    t = e + 1;
  }
  out.rank = 0;
  if (has_arrow) {
    for (size_t i = 0; i < ri; i++) {
      unsigned char l = (unsigned char)rhs[i];
      if (l == '.') {
        for (int j = 0; j < ell.rank; j++) out.d[out.rank++] = ell.d[j];
      } else if (l < 128 && known[l]) {
        out.d[out.rank++] = dim_of[l];
      } else {
        return ops_node_err(c, GOPT_ESHAPE, "einsum output label '%c' not among the inputs", l);
      }
    }
  } else {
    if (has_ell)
      for (int j = 0; j < ell.rank; j++) out.d[out.rank++] = ell.d[j];
    for (int l = 0; l < 128; l++)
      if (count[l] == 1) out.d[out.rank++] = dim_of[l];
  }
  return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &out);
}

/* LSTM / GRU / RNN outputs Y, Y_h (and Y_c for LSTM), with layout 0 (seq-major) or 1. */
static int r_rnn(ictx *c, int32_t n, int gates) {
  oshape x, w, y, yh;
  int rc, dt = ops_in_dtype(c, n, 0);
  ops_in_shape(c, n, 0, &x);
  ops_in_shape(c, n, 1, &w);
  const char *dir = gopt_node_get_string(c->g, n, "direction", "forward");
  int64_t nd = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
  int64_t hs = gopt_node_get_int(c->g, n, "hidden_size", -1);
  int layout = c->opset >= 14 ? (int)gopt_node_get_int(c->g, n, "layout", 0) : 0;
  if (hs < 0) {
    int ok = 0;
    if (w.rank == 3) hs = ops_dim_div(c, w.d[1], gates, &ok);
    if (!ok) hs = fresh_node(c, n, 0, 3);
  }
  y.rank = yh.rank = -1;
  if (x.rank >= 0) {
    if (x.rank != 3) return shape_err1(c, "expects a 3-D input", &x);
    int64_t seq = layout ? x.d[1] : x.d[0], batch = layout ? x.d[0] : x.d[1];
    y.rank = 4;
    yh.rank = 3;
    if (!layout) {
      y.d[0] = seq; y.d[1] = nd; y.d[2] = batch; y.d[3] = hs;
      yh.d[0] = nd; yh.d[1] = batch; yh.d[2] = hs;
    } else {
      y.d[0] = batch; y.d[1] = seq; y.d[2] = nd; y.d[3] = hs;
      yh.d[0] = batch; yh.d[1] = nd; yh.d[2] = hs;
    }
  }
  if ((rc = ops_set_out(c, n, 0, dt, &y))) return rc;
  if ((rc = ops_set_out(c, n, 1, dt, &yh))) return rc;
  return ops_set_out(c, n, 2, dt, &yh);
}

static int r_nonzero(ictx *c, int32_t n) {
  oshape in, out;
  ops_in_shape(c, n, 0, &in);
  out.rank = 2;
  out.d[0] = in.rank >= 0 ? in.rank : fresh_node(c, n, 0, 0);
  out.d[1] = fresh_node(c, n, 0, 1);
  return ops_set_out(c, n, 0, GOPT_DT_INT64, &out);
}

int ops_infer_node(ictx *c, int32_t n) {
  int op = c->g->nodes.a[n].op;
  oshape s;
  switch (op) {
    case GOPT_OP_CONSTANT: return r_constant(c, n);
    case GOPT_OP_IDENTITY: case GOPT_OP_RELU: case GOPT_OP_LEAKY_RELU: case GOPT_OP_ELU:
    case GOPT_OP_SELU: case GOPT_OP_CELU: case GOPT_OP_SIGMOID: case GOPT_OP_HARD_SIGMOID:
    case GOPT_OP_HARD_SWISH: case GOPT_OP_TANH: case GOPT_OP_EXP: case GOPT_OP_LOG:
    case GOPT_OP_SQRT: case GOPT_OP_RECIPROCAL: case GOPT_OP_NEG: case GOPT_OP_ABS:
    case GOPT_OP_ERF: case GOPT_OP_GELU: case GOPT_OP_FLOOR: case GOPT_OP_CEIL: case GOPT_OP_ROUND:
    case GOPT_OP_SIGN: case GOPT_OP_SIN: case GOPT_OP_COS: case GOPT_OP_SOFTPLUS:
    case GOPT_OP_SOFTSIGN: case GOPT_OP_MISH: case GOPT_OP_CLIP: case GOPT_OP_PRELU:
    case GOPT_OP_TRILU: case GOPT_OP_CUMSUM: case GOPT_OP_SOFTMAX: case GOPT_OP_LOG_SOFTMAX:
    case GOPT_OP_INSTANCE_NORM: case GOPT_OP_SCATTER_ND: case GOPT_OP_SCATTER_ELEMENTS:
      return r_same(c, n, 0);
    case GOPT_OP_NOT: case GOPT_OP_ISNAN: return r_same(c, n, GOPT_DT_BOOL);
    case GOPT_OP_CAST: return r_same(c, n, (int)gopt_node_get_int(c->g, n, "to", ops_in_dtype(c, n, 0)));
    case GOPT_OP_DROPOUT: return r_dropout(c, n);
    case GOPT_OP_ADD: case GOPT_OP_SUB: case GOPT_OP_MUL: case GOPT_OP_DIV: case GOPT_OP_POW:
    case GOPT_OP_MOD: case GOPT_OP_MAX: case GOPT_OP_MIN: case GOPT_OP_SUM: case GOPT_OP_MEAN:
      return r_broadcast(c, n, 0);
    case GOPT_OP_EQUAL: case GOPT_OP_LESS: case GOPT_OP_LESS_OR_EQUAL: case GOPT_OP_GREATER:
    case GOPT_OP_GREATER_OR_EQUAL: case GOPT_OP_AND: case GOPT_OP_OR: case GOPT_OP_XOR:
      return r_broadcast(c, n, GOPT_DT_BOOL);
    case GOPT_OP_WHERE: return r_broadcast(c, n, ops_in_dtype(c, n, 1));
    case GOPT_OP_EXPAND: return r_expand(c, n);
    case GOPT_OP_RESHAPE: return r_reshape(c, n);
    case GOPT_OP_FLATTEN: return r_flatten(c, n);
    case GOPT_OP_SQUEEZE: return r_squeeze(c, n);
    case GOPT_OP_UNSQUEEZE: return r_unsqueeze(c, n);
    case GOPT_OP_TRANSPOSE: return r_transpose(c, n);
    case GOPT_OP_CONCAT: return r_concat(c, n);
    case GOPT_OP_SPLIT: return r_split(c, n);
    case GOPT_OP_SLICE: return r_slice(c, n);
    case GOPT_OP_GATHER: return r_gather(c, n);
    case GOPT_OP_GATHER_ELEMENTS:
      ops_in_shape(c, n, 1, &s);
      return ops_set_out(c, n, 0, ops_in_dtype(c, n, 0), &s);
    case GOPT_OP_GATHER_ND: return r_gather_nd(c, n);
    case GOPT_OP_TILE: return r_tile(c, n);
    case GOPT_OP_PAD: return r_pad(c, n);
    case GOPT_OP_RESIZE: return r_resize(c, n, 0);
    case GOPT_OP_UPSAMPLE: return r_resize(c, n, 1);
    case GOPT_OP_DEPTH_TO_SPACE: return r_depth_space(c, n, 1);
    case GOPT_OP_SPACE_TO_DEPTH: return r_depth_space(c, n, 0);
    case GOPT_OP_ONE_HOT: return r_one_hot(c, n);
    case GOPT_OP_SHAPE_OF: return r_shape(c, n);
    case GOPT_OP_SIZE:
      s.rank = 0;
      return ops_set_out(c, n, 0, GOPT_DT_INT64, &s);
    case GOPT_OP_CONSTANT_OF_SHAPE: return r_constant_of_shape(c, n);
    case GOPT_OP_RANGE: return r_range(c, n);
    case GOPT_OP_NON_ZERO: return r_nonzero(c, n);
    case GOPT_OP_TOPK: return r_topk(c, n);
    case GOPT_OP_REDUCE_MEAN: case GOPT_OP_REDUCE_SUM: case GOPT_OP_REDUCE_MAX:
    case GOPT_OP_REDUCE_MIN: case GOPT_OP_REDUCE_PROD: case GOPT_OP_REDUCE_L2:
    case GOPT_OP_REDUCE_SUM_SQUARE:
      return r_reduce(c, n, op);
    case GOPT_OP_ARGMAX: case GOPT_OP_ARGMIN: return r_argmax(c, n);
    case GOPT_OP_LAYER_NORM: return r_layer_norm(c, n);
    case GOPT_OP_BATCH_NORM: return r_batch_norm(c, n);
    case GOPT_OP_GLOBAL_AVG_POOL: case GOPT_OP_GLOBAL_MAX_POOL: return r_global_pool(c, n);
    case GOPT_OP_CONV: case GOPT_OP_MAX_POOL: case GOPT_OP_AVERAGE_POOL: return conv_pool(c, n, op);
    case GOPT_OP_LP_POOL: return conv_pool(c, n, GOPT_OP_AVERAGE_POOL);
    case GOPT_OP_CONV_TRANSPOSE: return r_conv_transpose(c, n);
    case GOPT_OP_MATMUL: return r_matmul(c, n);
    case GOPT_OP_GEMM: return r_gemm(c, n);
    case GOPT_OP_EINSUM: return r_einsum(c, n);
    case GOPT_OP_LSTM: return r_rnn(c, n, 4);
    case GOPT_OP_GRU: return r_rnn(c, n, 3);
    case GOPT_OP_RNN: return r_rnn(c, n, 1);
    case GOPT_OP_IF: case GOPT_OP_LOOP:
      return 0; /* control flow: keep the source's shapes */
    default:
      return ops_infer_modern(c, n, op);
  }
}
