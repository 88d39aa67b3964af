/* zoo_builder.c: the builder toolkit behind the model zoo: tensors, nodes, attributes and the
 * common layers (conv, BN, linear, attention, ...) with shapes derived by the builder itself.
 * See zoo_internal.h for the two-pass (count, then build) contract. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo/zoo_internal.h"

/* ---- shapes -------------------------------------------------------------------------------- */

zt zs_make(int rank, const int64_t *d) {
  zt s;
  memset(&s, 0, sizeof s);
  s.id = -1;
  s.rank = rank;
  for (int i = 0; i < rank && i < ZB_MAXR; i++) s.d[i] = d[i];
  return s;
}

zt zs_bcast(zt a, zt c) {
  zt s;
  memset(&s, 0, sizeof s);
  s.id = -1;
  s.rank = a.rank > c.rank ? a.rank : c.rank;
  for (int i = 0; i < s.rank; i++) {
    int ia = i - (s.rank - a.rank), ic = i - (s.rank - c.rank);
    int64_t da = ia >= 0 ? a.d[ia] : 1, dc = ic >= 0 ? c.d[ic] : 1;
    s.d[i] = da == 1 ? dc : da;
  }
  return s;
}

int64_t zs_numel(zt s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.d[i];
  return n;
}

/* ---- naming and errors --------------------------------------------------------------------- */

int zb_ok(const zb *b) { return b->rc == 0; }

void zb_scope(zb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->scope, sizeof b->scope, fmt, ap);
  va_end(ap);
}

void zb_fail(zb *b, int code, const char *fmt, ...) {
  if (b->rc) return;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  b->rc = gopt_error_set(b->err, code, "zoo: %s: %s", b->model->name, msg);
}

/* Full name "<scope>.<local><suffix>" (scoped) or "<local><suffix>" into b->name. */
static const char *fname(zb *b, int scoped, const char *local, const char *suffix) {
  if (scoped && b->scope[0])
    snprintf(b->name, sizeof b->name, "%s.%s%s", b->scope, local, suffix ? suffix : "");
  else
    snprintf(b->name, sizeof b->name, "%s%s", local, suffix ? suffix : "");
  return b->name;
}

static void knob_list(const zb *b, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < b->model->n_knobs && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", b->model->knobs[i].name);
}

/* Checks the element count of shape s; fails naming the tensor when it is too large. */
static int check_numel(zb *b, zt s, int scoped, const char *local, const char *suffix) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) {
    if (s.d[i] < 0 || __builtin_mul_overflow(n, s.d[i], &n)) n = ZB_MAX_NUMEL + 1;
    if (n > ZB_MAX_NUMEL) {
      char knobs[200];
      knob_list(b, knobs, sizeof knobs);
      zb_fail(b, GOPT_ERANGE,
              "tensor '%s' would hold more than 2^44 elements; lower the size knobs (%s)",
              fname(b, scoped, local, suffix), knobs);
      return -1;
    }
  }
  return 0;
}

/* Creates a tensor (counting mode: only counts). Returns the handle (id -1 on failure). */
static zt new_tensor(zb *b, int scoped, const char *local, const char *suffix, int dtype, zt s) {
  s.id = -1;
  if (b->rc || check_numel(b, s, scoped, local, suffix)) return s;
  b->tensors++;
  if (!b->g) return s;
  s.id = gopt_graph_add_tensor(b->g, fname(b, scoped, local, suffix), dtype, s.rank, s.d, b->err);
  if (s.id < 0) b->rc = b->err ? b->err->code : GOPT_ENOMEM;
  return s;
}

/* Existing tensor named `name` (real mode), -1 otherwise. */
static int32_t find_named(zb *b, const char *name) {
  return b->g ? gopt_graph_find_tensor(b->g, name) : -1;
}

/* Constant tensor (real mode). Parameters and buffers must have fresh names; other constants are
 * shared: an existing tensor of the same name is returned. */
static zt make_const(zb *b, const char *name_in, int dtype, zt s, const void *data, size_t nbytes,
                     int param, int shared) {
  char name[sizeof b->name];
  snprintf(name, sizeof name, "%s", name_in);
  s.id = -1;
  if (b->rc) return s;
  int32_t old = shared ? find_named(b, name) : -1;
  if (old >= 0) {
    s.id = old;
    return s;
  }
  s = new_tensor(b, 0, name, NULL, dtype, s);
  if (s.id < 0) return s;
  if (gopt_tensor_set_const(b->g, s.id, data, nbytes, b->err)) {
    b->rc = b->err ? b->err->code : GOPT_ENOMEM;
    s.id = -1;
    return s;
  }
  if (param) b->g->tensors.a[s.id].flags |= GOPT_T_PARAM;
  /* Data-less constants are the model's state (weights, BatchNorm statistics): what an exported
   * model holds as initializers, and what graph stats count as params. */
  if (!data) b->g->tensors.a[s.id].flags |= GOPT_T_INIT;
  return s;
}

/* ---- tensors ------------------------------------------------------------------------------- */

zt zb_input(zb *b, const char *name, int dtype, zt shape) {
  zt t = new_tensor(b, 0, name, NULL, dtype, shape);
  if (t.id >= 0 && gopt_graph_add_input(b->g, t.id)) zb_fail(b, GOPT_ENOMEM, "out of memory");
  return t;
}

zt zb_param(zb *b, const char *local, zt shape) {
  if (b->rc) return shape;
  if (!b->g) return new_tensor(b, 1, local, NULL, GOPT_DT_FLOAT, shape);
  int64_t n = zs_numel(shape);
  return make_const(b, fname(b, 1, local, NULL), GOPT_DT_FLOAT, shape, NULL,
                    (size_t)n * sizeof(float), 1, 0);
}

zt zb_buffer(zb *b, const char *local, zt shape) {
  if (b->rc) return shape;
  if (!b->g) return new_tensor(b, 1, local, NULL, GOPT_DT_FLOAT, shape);
  int64_t n = zs_numel(shape);
  return make_const(b, fname(b, 1, local, NULL), GOPT_DT_FLOAT, shape, NULL,
                    (size_t)n * sizeof(float), 0, 0);
}

zt zb_const_f32(zb *b, const char *name, zt shape, const float *data) {
  if (b->rc) return shape;
  if (!b->g) return new_tensor(b, 0, name, NULL, GOPT_DT_FLOAT, shape);
  return make_const(b, name, GOPT_DT_FLOAT, shape, data, (size_t)zs_numel(shape) * sizeof(float),
                    0, 1);
}

zt zb_scalar(zb *b, float v) {
  char nm[64];
  zt s = zs_make(0, NULL);
  if (b->rc) return s;
  if (!b->g) return new_tensor(b, 0, "const.f32", NULL, GOPT_DT_FLOAT, s);
  snprintf(nm, sizeof nm, "const.f32(%.9g)", (double)v);
  return make_const(b, nm, GOPT_DT_FLOAT, s, &v, sizeof v, 0, 1);
}

zt zb_ints_named(zb *b, const char *name, int n, const int64_t *v) {
  zt s = ZS(n);
  if (b->rc) return s;
  if (!b->g) return new_tensor(b, 0, name, NULL, GOPT_DT_INT64, s);
  return make_const(b, name, GOPT_DT_INT64, s, v, (size_t)n * sizeof *v, 0, 1);
}

zt zb_ints(zb *b, int n, const int64_t *v) {
  char nm[300];
  if (!b->g) return zb_ints_named(b, "const.i64", n, v); /* counting: the name is not needed */
  size_t k = (size_t)snprintf(nm, sizeof nm, "const.i64[");
  for (int i = 0; i < n && k < sizeof nm - 24; i++)
    k += (size_t)snprintf(nm + k, sizeof nm - k, "%s%lld", i ? "," : "", (long long)v[i]);
  snprintf(nm + k, sizeof nm - k, "]");
  return zb_ints_named(b, nm, n, v);
}

zt zb_int_scalar(zb *b, int64_t v) {
  char nm[64];
  zt s = zs_make(0, NULL);
  if (b->rc) return s;
  if (!b->g) return new_tensor(b, 0, "const.i64", NULL, GOPT_DT_INT64, s);
  snprintf(nm, sizeof nm, "const.i64(%lld)", (long long)v);
  return make_const(b, nm, GOPT_DT_INT64, s, &v, sizeof v, 0, 1);
}

void zb_output(zb *b, zt t) {
  if (b->rc || !b->g) return;
  if (gopt_graph_add_output(b->g, t.id)) zb_fail(b, GOPT_ENOMEM, "out of memory");
}

/* ---- nodes --------------------------------------------------------------------------------- */

static int count_node(zb *b) {
  if (++b->nodes > b->limit) {
    char knobs[200];
    knob_list(b, knobs, sizeof knobs);
    zb_fail(b, GOPT_ERANGE, "the graph would have more than %zu nodes; lower the size knobs (%s)",
            b->limit, knobs);
    return -1;
  }
  return 0;
}

zt zb_op_arr(zb *b, const char *type, const char *local, zt out, int n_in, const int32_t *in) {
  out.id = -1;
  if (b->rc || count_node(b)) return out;
  out = new_tensor(b, 1, local, NULL, GOPT_DT_FLOAT, out);
  if (!b->g || out.id < 0) return out;
  /* The node takes its output's name (nodes and values are separate namespaces). */
  b->last = gopt_graph_add_node(b->g, type, b->name, n_in, in, 1, &out.id, b->err);
  if (b->last < 0) {
    b->rc = b->err ? b->err->code : GOPT_ENOMEM;
    out.id = -1;
  }
  return out;
}

zt zb_op(zb *b, const char *type, const char *local, zt out, int n_in, ...) {
  int32_t in[16];
  va_list ap;
  va_start(ap, n_in);
  for (int i = 0; i < n_in && i < 16; i++) in[i] = va_arg(ap, int32_t);
  va_end(ap);
  return zb_op_arr(b, type, local, out, n_in, in);
}

void zb_op_multi(zb *b, const char *type, const char *local, int n_out, zt *outs, int n_in,
                 const int32_t *in) {
  if (b->rc || count_node(b)) return;
  char suffix[24];
  int32_t small[16], *ids = n_out <= 16 ? small : NULL;
  if (b->g && !ids && !(ids = malloc((size_t)n_out * sizeof *ids))) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    return;
  }
  for (int i = 0; i < n_out && !b->rc; i++) {
    snprintf(suffix, sizeof suffix, ":%d", i);
    outs[i] = new_tensor(b, 1, local, suffix, GOPT_DT_FLOAT, outs[i]);
    if (ids) ids[i] = outs[i].id;
  }
  if (b->g && !b->rc) {
    b->last = gopt_graph_add_node(b->g, type, fname(b, 1, local, NULL), n_in, in, n_out, ids,
                                  b->err);
    if (b->last < 0) b->rc = b->err ? b->err->code : GOPT_ENOMEM;
  }
  if (ids != small) free(ids);
}

static void attr_rc(zb *b, int rc) {
  if (rc) zb_fail(b, rc, "cannot set an attribute on node '%s'", gopt_node_name(b->g, b->last));
}

void zb_ai(zb *b, const char *name, int64_t v) {
  if (b->g && !b->rc) attr_rc(b, gopt_node_set_int(b->g, b->last, name, v));
}

void zb_af(zb *b, const char *name, double v) {
  if (b->g && !b->rc) attr_rc(b, gopt_node_set_float(b->g, b->last, name, v));
}

void zb_ais(zb *b, const char *name, int n, const int64_t *v) {
  if (b->g && !b->rc) attr_rc(b, gopt_node_set_ints(b->g, b->last, name, v, (size_t)n));
}

/* ---- layers -------------------------------------------------------------------------------- */

zt zb_unary(zb *b, const char *type, const char *local, zt x) {
  return zb_op(b, type, local, x, 1, x.id);
}

zt zb_binary(zb *b, const char *type, const char *local, zt x, zt y) {
  return zb_op(b, type, local, zs_bcast(x, y), 2, x.id, y.id);
}

zt zb_matmul(zb *b, const char *local, zt x, zt y) {
  zt bx = x, by = y, out;
  bx.rank = x.rank - 2;
  by.rank = y.rank - 2;
  out = zs_bcast(bx, by);
  out.d[out.rank++] = x.d[x.rank - 2];
  out.d[out.rank++] = y.d[y.rank - 1];
  return zb_op(b, "MatMul", local, out, 2, x.id, y.id);
}

zt zb_linear(zb *b, const char *local, zt x, int64_t out, int bias) {
  char nm[160];
  snprintf(nm, sizeof nm, "%s.weight", local);
  zt w = zb_param(b, nm, ZS(x.d[x.rank - 1], out));
  zt y = zb_matmul(b, local, x, w);
  if (!bias) return y;
  snprintf(nm, sizeof nm, "%s.bias", local);
  zt bs = zb_param(b, nm, ZS(out));
  snprintf(nm, sizeof nm, "%s.add", local);
  return zb_op(b, "Add", nm, y, 2, y.id, bs.id);
}

/* Conv with an optional bias parameter "<local>.bias". */
static zt conv2d(zb *b, const char *local, zt x, int64_t cout, const int k[2], const int s[2],
                 const int p[4], int64_t group, int bias) {
  char nm[160];
  snprintf(nm, sizeof nm, "%s.weight", local);
  zt w = zb_param(b, nm, ZS(cout, x.d[1] / group, k[0], k[1]));
  zt bs = w;
  if (bias) {
    snprintf(nm, sizeof nm, "%s.bias", local);
    bs = zb_param(b, nm, ZS(cout));
  }
  int64_t oh = (x.d[2] + p[0] + p[2] - k[0]) / s[0] + 1, ow = (x.d[3] + p[1] + p[3] - k[1]) / s[1] + 1;
  zt y = zb_op(b, "Conv", local, ZS(x.d[0], cout, oh, ow), bias ? 3 : 2, x.id, w.id, bs.id);
  ZAIS("kernel_shape", k[0], k[1]);
  ZAIS("strides", s[0], s[1]);
  ZAIS("pads", p[0], p[1], p[2], p[3]);
  ZAIS("dilations", 1, 1);
  zb_ai(b, "group", group);
  return y;
}

zt zb_conv2d(zb *b, const char *local, zt x, int64_t cout, int kh, int kw, int sh, int sw,
             int pt, int pl, int pb, int pr, int64_t group) {
  return conv2d(b, local, x, cout, (int[]){kh, kw}, (int[]){sh, sw}, (int[]){pt, pl, pb, pr},
                group, 0);
}

zt zb_conv2d_bias(zb *b, const char *local, zt x, int64_t cout, int k, int s, int p) {
  return conv2d(b, local, x, cout, (int[]){k, k}, (int[]){s, s}, (int[]){p, p, p, p}, 1, 1);
}

void zb_same_pads(int64_t in, int k, int s, int *pb, int *pe) {
  int64_t out = (in + s - 1) / s, total = (out - 1) * s + k - in;
  if (total < 0) total = 0;
  *pb = (int)(total / 2);
  *pe = (int)(total - total / 2);
}

zt zb_conv_same(zb *b, const char *local, zt x, int64_t cout, int kh, int kw, int s,
                int64_t group) {
  int pt, pb, pl, pr;
  zb_same_pads(x.d[2], kh, s, &pt, &pb);
  zb_same_pads(x.d[3], kw, s, &pl, &pr);
  return zb_conv2d(b, local, x, cout, kh, kw, s, s, pt, pl, pb, pr, group);
}

zt zb_bn(zb *b, const char *local, zt x, double eps) {
  char nm[160];
  zt c = ZS(x.d[1]);
  snprintf(nm, sizeof nm, "%s.weight", local);
  zt sc = zb_param(b, nm, c);
  snprintf(nm, sizeof nm, "%s.bias", local);
  zt bs = zb_param(b, nm, c);
  snprintf(nm, sizeof nm, "%s.running_mean", local);
  zt mu = zb_buffer(b, nm, c);
  snprintf(nm, sizeof nm, "%s.running_var", local);
  zt var = zb_buffer(b, nm, c);
  zt y = zb_op(b, "BatchNormalization", local, x, 5, x.id, sc.id, bs.id, mu.id, var.id);
  zb_af(b, "epsilon", eps);
  return y;
}

zt zb_layernorm(zb *b, const char *local, zt x, double eps) {
  char nm[160];
  zt c = ZS(x.d[x.rank - 1]);
  snprintf(nm, sizeof nm, "%s.weight", local);
  zt sc = zb_param(b, nm, c);
  snprintf(nm, sizeof nm, "%s.bias", local);
  zt bs = zb_param(b, nm, c);
  zt y = zb_op(b, "LayerNormalization", local, x, 3, x.id, sc.id, bs.id);
  zb_ai(b, "axis", -1);
  zb_af(b, "epsilon", eps);
  return y;
}

zt zb_pool2d(zb *b, const char *type, const char *local, zt x, int k, int s, int pt, int pl,
             int pb, int pr, int count_include_pad) {
  int64_t oh = (x.d[2] + pt + pb - k) / s + 1, ow = (x.d[3] + pl + pr - k) / s + 1;
  zt y = zb_op(b, type, local, ZS(x.d[0], x.d[1], oh, ow), 1, x.id);
  ZAIS("kernel_shape", k, k);
  ZAIS("strides", s, s);
  ZAIS("pads", pt, pl, pb, pr);
  if (strcmp(type, "AveragePool") == 0) zb_ai(b, "count_include_pad", count_include_pad);
  return y;
}

zt zb_reshape(zb *b, const char *local, zt x, zt shape) {
  zt sh = zb_ints(b, shape.rank, shape.d);
  return zb_op(b, "Reshape", local, shape, 2, x.id, sh.id);
}

zt zb_transpose(zb *b, const char *local, zt x, int n, const int64_t *perm) {
  zt out = x;
  for (int i = 0; i < n; i++) out.d[i] = x.d[perm[i]];
  zt y = zb_op(b, "Transpose", local, out, 1, x.id);
  zb_ais(b, "perm", n, perm);
  return y;
}

zt zb_concat(zb *b, const char *local, int axis, int n, const zt *xs) {
  int32_t ids[16];
  zt out = xs[0];
  out.d[axis] = 0;
  for (int i = 0; i < n && i < 16; i++) {
    ids[i] = xs[i].id;
    out.d[axis] += xs[i].d[axis];
  }
  return zb_concat_ids(b, local, axis, n, ids, out);
}

zt zb_concat_ids(zb *b, const char *local, int axis, int n, const int32_t *ids, zt out) {
  zt y = zb_op_arr(b, "Concat", local, out, n, ids);
  zb_ai(b, "axis", axis);
  return y;
}

void zb_split(zb *b, const char *local, zt x, int axis, int n, zt *outs) {
  zt part = x;
  part.d[axis] = x.d[axis] / n;
  for (int i = 0; i < n; i++) outs[i] = part;
  zt sizes;
  if (n <= 8) {
    int64_t v[8];
    for (int i = 0; i < n; i++) v[i] = part.d[axis];
    sizes = zb_ints(b, n, v);
  } else {
    char nm[96];
    snprintf(nm, sizeof nm, "const.split(%dx%lld)", n, (long long)part.d[axis]);
    int64_t *v = NULL;
    if (b->g && !b->rc && find_named(b, nm) < 0) {
      v = malloc((size_t)n * sizeof *v);
      if (!v) {
        zb_fail(b, GOPT_ENOMEM, "out of memory");
        return;
      }
      for (int i = 0; i < n; i++) v[i] = part.d[axis];
    }
    sizes = zb_ints_named(b, nm, n, v);
    free(v);
  }
  int32_t in[2] = {x.id, sizes.id};
  zb_op_multi(b, "Split", local, n, outs, 2, in);
  zb_ai(b, "axis", axis);
}

zt zb_slice(zb *b, const char *local, zt x, int axis, int64_t start, int64_t end) {
  zt st = ZI(start), en = ZI(end), ax = ZI(axis);
  zt out = x;
  out.d[axis] = end - start;
  return zb_op(b, "Slice", local, out, 4, x.id, st.id, en.id, ax.id);
}

zt zb_squeeze(zb *b, const char *local, zt x, int axis) {
  zt ax = ZI(axis), out = x;
  out.rank = x.rank - 1;
  for (int i = axis; i < out.rank; i++) out.d[i] = x.d[i + 1];
  return zb_op(b, "Squeeze", local, out, 2, x.id, ax.id);
}

zt zb_unsqueeze(zb *b, const char *local, zt x, int axis) {
  zt ax = ZI(axis), out = x;
  out.rank = x.rank + 1;
  for (int i = out.rank - 1; i > axis; i--) out.d[i] = x.d[i - 1];
  out.d[axis] = 1;
  return zb_op(b, "Unsqueeze", local, out, 2, x.id, ax.id);
}

zt zb_attention(zb *b, const char *local, zt q, zt k, zt v, int64_t heads, zt mask) {
  char nm[160];
#define NM(s) (snprintf(nm, sizeof nm, "%s.%s", local, s), nm)
  int64_t B = q.d[0], Sq = q.d[1], Sk = k.d[1], H = q.d[2], dk = H / heads;
  zt q4 = zb_reshape(b, NM("q_split"), q, ZS(B, Sq, heads, dk));
  zt k4 = zb_reshape(b, NM("k_split"), k, ZS(B, Sk, heads, dk));
  zt v4 = zb_reshape(b, NM("v_split"), v, ZS(B, Sk, heads, dk));
  zt qt = ZTRANS(NM("q_heads"), q4, 0, 2, 1, 3);
  zt kt = ZTRANS(NM("k_heads"), k4, 0, 2, 3, 1);
  zt vt = ZTRANS(NM("v_heads"), v4, 0, 2, 1, 3);
  zt s = zb_matmul(b, NM("scores"), qt, kt);
  s = zb_binary(b, "Mul", NM("scale"), s, zb_scalar(b, (float)(1.0 / sqrt((double)dk))));
  if (mask.rank > 0) s = zb_binary(b, "Add", NM("mask"), s, mask);
  zt p = zb_op(b, "Softmax", NM("softmax"), s, 1, s.id);
  zb_ai(b, "axis", -1);
  zt c = zb_matmul(b, NM("context"), p, vt);
  c = ZTRANS(NM("merge_heads"), c, 0, 2, 1, 3);
  return zb_reshape(b, NM("merge"), c, ZS(B, Sq, H));
#undef NM
}

zt zb_causal_mask(zb *b, int64_t sq, int64_t sk) {
  char nm[96];
  snprintf(nm, sizeof nm, "const.causal_mask(%lldx%lld)", (long long)sq, (long long)sk);
  zt s = ZS(sq, sk);
  if (b->rc) return s;
  float *data = NULL;
  if (b->g && sq * sk <= ZB_DATA_LIMIT && find_named(b, nm) < 0) {
    data = malloc((size_t)(sq * sk) * sizeof *data);
    if (!data) {
      zb_fail(b, GOPT_ENOMEM, "out of memory");
      return s;
    }
    for (int64_t i = 0; i < sq; i++)
      for (int64_t j = 0; j < sk; j++) data[i * sk + j] = j <= i + (sk - sq) ? 0.0f : -10000.0f;
  }
  s = zb_const_f32(b, nm, s, data);
  free(data);
  return s;
}

zt zb_sinusoid(zb *b, const char *name, int64_t n, int64_t d, int rev) {
  zt s = ZS(n, d);
  if (b->rc) return s;
  float *data = NULL;
  if (b->g && n * d <= ZB_DATA_LIMIT && find_named(b, name) < 0) {
    data = malloc((size_t)(n * d) * sizeof *data);
    if (!data) {
      zb_fail(b, GOPT_ENOMEM, "out of memory");
      return s;
    }
    for (int64_t i = 0; i < n; i++) {
      double pos = (double)(rev ? n - 1 - i : i);
      for (int64_t j = 0; j < d; j++) {
        double f = pos / pow(10000.0, (double)(2 * (j / 2)) / (double)d);
        data[i * d + j] = (float)(j % 2 ? cos(f) : sin(f));
      }
    }
  }
  s = zb_const_f32(b, name, s, data);
  free(data);
  return s;
}

zt zb_gelu_erf(zb *b, const char *local, zt x) {
  char nm[160];
#define NM(s) (snprintf(nm, sizeof nm, "%s.%s", local, s), nm)
  zt t = zb_binary(b, "Div", NM("div"), x, zb_scalar(b, 1.41421356f));
  t = zb_unary(b, "Erf", NM("erf"), t);
  t = zb_binary(b, "Add", NM("add"), t, zb_scalar(b, 1.0f));
  t = zb_binary(b, "Mul", NM("mul"), x, t);
  return zb_binary(b, "Mul", NM("half"), t, zb_scalar(b, 0.5f));
#undef NM
}

zt zb_gelu_tanh(zb *b, const char *local, zt x) {
  char nm[160];
#define NM(s) (snprintf(nm, sizeof nm, "%s.%s", local, s), nm)
  zt c = zb_binary(b, "Pow", NM("pow"), x, zb_scalar(b, 3.0f));
  c = zb_binary(b, "Mul", NM("mul_c"), c, zb_scalar(b, 0.044715f));
  c = zb_binary(b, "Add", NM("add_x"), x, c);
  c = zb_binary(b, "Mul", NM("mul_k"), c, zb_scalar(b, 0.7978845608f));
  c = zb_unary(b, "Tanh", NM("tanh"), c);
  c = zb_binary(b, "Add", NM("add_1"), c, zb_scalar(b, 1.0f));
  zt h = zb_binary(b, "Mul", NM("half"), x, zb_scalar(b, 0.5f));
  return zb_binary(b, "Mul", NM("mul"), h, c);
#undef NM
}
