/* train.c: gopt_train_build: loss construction, the parameter->loss path analysis, the reverse
 * walk that calls the per-op gradient rules (grad_rules.c), gradient accumulation, optimizer
 * update ops, and the tensor/op helpers the rules share. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/train.h"
#include "train/train_internal.h"

#define NAME_MAX_LEN 1024

/* ---- small helpers ---------------------------------------------------------------------------- */

int tb_is_float(int dt) {
  return dt == GOPT_DT_FLOAT || dt == GOPT_DT_DOUBLE || dt == GOPT_DT_FLOAT16 ||
         dt == GOPT_DT_BFLOAT16;
}

int tb_fail(tb *b, int code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (b->cur >= 0)
    return gopt_error_set(b->err, code, "training: node '%s' (op %s): %s",
                          gopt_node_name(b->g, b->cur), gopt_node_type(b->g, b->cur), msg);
  return gopt_error_set(b->err, code, "training: %s", msg);
}

/* Default-domain opset of g (or of the nearest enclosing graph that declares one); 17 when none. */
static int64_t graph_opset(const gopt_graph *g) { return gopt_graph_opset(g, "", 17); }

const char *tb_dname(int i, char *buf, size_t len) {
  snprintf(buf, len, "d%d", i);
  return buf;
}

/* Adds a tensor with exactly `name`, or name_1, name_2, ... when taken. dims are copied first
 * (they may point into g->dims, which adding a tensor can move). */
static int32_t add_tensor_unique(tb *b, const char *name, int dtype, int rank, const int64_t *dims) {
  int64_t d[GOPT_MAX_RANK];
  char buf[NAME_MAX_LEN + 16];
  if (rank > GOPT_MAX_RANK) return tb_fail(b, GOPT_EUNSUP, "rank %d too large", rank), -1;
  if (rank > 0) memcpy(d, dims, (size_t)rank * sizeof *d);
  snprintf(buf, sizeof buf, "%s", name);
  for (int k = 1; gopt_graph_find_tensor(b->g, buf) >= 0; k++)
    snprintf(buf, sizeof buf, "%s_%d", name, k);
  return gopt_graph_add_tensor(b->g, buf, dtype, rank, rank > 0 ? d : NULL, b->err);
}

int32_t tb_tensor(tb *b, const char *what, int dtype, int rank, const int64_t *dims) {
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "grad/%s/%s", b->cur >= 0 ? gopt_node_name(b->g, b->cur) : "",
           what);
  return add_tensor_unique(b, name, dtype, rank, dims);
}

int32_t tb_tensor_like(tb *b, const char *what, int32_t like) {
  const gopt_tensor *x = &b->g->tensors.a[like];
  return tb_tensor(b, what, x->dtype, x->rank, gopt_tensor_dims(b->g, like));
}

/* Adds a node; name may point into the graph's string table (it is copied first, since interning
 * the type can move the table). */
static int32_t add_node_flagged(tb *b, const char *type, const char *name, int n_in,
                                const int32_t *in, int n_out, const int32_t *out, uint16_t flag) {
  char nm[NAME_MAX_LEN];
  snprintf(nm, sizeof nm, "%s", name);
  int32_t n = gopt_graph_add_node(b->g, type, nm, n_in, in, n_out, out, b->err);
  if (n >= 0) b->g->nodes.a[n].flags |= flag;
  return n;
}

int32_t tb_node(tb *b, const char *type, int n_in, const int32_t *in, int n_out, const int32_t *out) {
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "%s", gopt_graph_str(b->g, b->g->tensors.a[out[0]].name));
  int32_t n = add_node_flagged(b, type, name, n_in, in, n_out, out, GOPT_N_GRAD);
  if (n >= 0) b->n_grad_nodes++;
  return n;
}

int32_t tb_op(tb *b, const char *type, const char *what, int n_in, const int32_t *in, int dtype,
              int rank, const int64_t *dims) {
  int32_t t = tb_tensor(b, what, dtype, rank, dims);
  if (t < 0) return -1;
  return tb_node(b, type, n_in, in, 1, &t) < 0 ? -1 : t;
}

int32_t tb_op_like(tb *b, const char *type, const char *what, int n_in, const int32_t *in,
                   int32_t like) {
  int32_t t = tb_tensor_like(b, what, like);
  if (t < 0) return -1;
  return tb_node(b, type, n_in, in, 1, &t) < 0 ? -1 : t;
}

int32_t tb_const_i64(tb *b, const char *what, const int64_t *v, int n) {
  int64_t d = n;
  int32_t t = tb_tensor(b, what, GOPT_DT_INT64, 1, &d);
  if (t < 0) return -1;
  if (gopt_tensor_set_const(b->g, t, v, (size_t)n * sizeof *v, b->err)) return -1;
  return t;
}

/* IEEE half from a float (round to nearest; enough for the constants used here). */
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    m |= 0x800000u;
    return (uint16_t)(sign | ((m >> (14 - e)) + ((m >> (13 - e)) & 1u)));
  }
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((m >> 13) + ((m >> 12) & 1u)));
}

static int32_t const_scalar_named(tb *b, const char *name, int dtype, double v) {
  unsigned char bytes[8];
  size_t nb = gopt_dtype_size(dtype);
  float f = (float)v;
  switch (dtype) {
    case GOPT_DT_FLOAT: memcpy(bytes, &f, 4); break;
    case GOPT_DT_DOUBLE: memcpy(bytes, &v, 8); break;
    case GOPT_DT_FLOAT16: { uint16_t h = f32_to_f16(f); memcpy(bytes, &h, 2); break; }
    case GOPT_DT_BFLOAT16: {
      uint32_t x;
      memcpy(&x, &f, 4);
      uint16_t h = (uint16_t)(x >> 16);
      memcpy(bytes, &h, 2);
      break;
    }
    default:
      return tb_fail(b, GOPT_EUNSUP, "no float constant of dtype %s", gopt_dtype_name(dtype)), -1;
  }
  int32_t t = add_tensor_unique(b, name, dtype, 0, NULL);
  if (t < 0) return -1;
  if (gopt_tensor_set_const(b->g, t, bytes, nb, b->err)) return -1;
  return t;
}

int32_t tb_const_scalar(tb *b, const char *what, int dtype, double v) {
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "grad/%s/%s", b->cur >= 0 ? gopt_node_name(b->g, b->cur) : "",
           what);
  return const_scalar_named(b, name, dtype, v);
}

int32_t tb_zeros_like(tb *b, const char *what, int32_t t) {
  int32_t s = tb_shape_of(b, t);
  return s < 0 ? -1 : tb_op_like(b, "ConstantOfShape", what, 1, &s, t);
}

int32_t tb_shape_of(tb *b, int32_t t) {
  if ((size_t)t < b->nt && b->shape_t[t] >= 0) return b->shape_t[t];
  const gopt_tensor *x = &b->g->tensors.a[t];
  int rank = x->rank;
  int64_t d[GOPT_MAX_RANK];
  char name[NAME_MAX_LEN];
  memcpy(d, gopt_tensor_dims(b->g, t), (size_t)rank * sizeof *d);
  snprintf(name, sizeof name, "grad/%s/shape", gopt_graph_str(b->g, x->name));
  int32_t s;
  if (gopt_tensor_is_static(b->g, t)) {
    int64_t r = rank;
    s = add_tensor_unique(b, name, GOPT_DT_INT64, 1, &r);
    if (s < 0 || gopt_tensor_set_const(b->g, s, d, (size_t)rank * sizeof *d, b->err)) return -1;
  } else {
    int64_t r = rank;
    s = add_tensor_unique(b, name, GOPT_DT_INT64, 1, &r);
    if (s < 0 || tb_node(b, "Shape", 1, &t, 1, &s) < 0) return -1;
  }
  if ((size_t)t < b->nt) b->shape_t[t] = s;
  return s;
}

int32_t tb_reduce_sum(tb *b, int32_t d, const int64_t *axes, int na, int keepdims,
                      const char *what, int rank, const int64_t *dims) {
  int dt = b->g->tensors.a[d].dtype;
  if (b->opset >= 13) {
    char an[96];
    snprintf(an, sizeof an, "%.80s_axes", what);
    int32_t ax = tb_const_i64(b, an, axes, na);
    if (ax < 0) return -1;
    int32_t in[2] = {d, ax};
    int32_t t = tb_op(b, "ReduceSum", what, 2, in, dt, rank, dims);
    if (t < 0) return -1;
    gopt_node_set_int(b->g, b->g->tensors.a[t].producer, "keepdims", keepdims);
    return t;
  }
  int32_t t = tb_op(b, "ReduceSum", what, 1, &d, dt, rank, dims);
  if (t < 0) return -1;
  int32_t n = b->g->tensors.a[t].producer;
  gopt_node_set_ints(b->g, n, "axes", axes, (size_t)na);
  gopt_node_set_int(b->g, n, "keepdims", keepdims);
  return t;
}

int tb_reduce_needed(const tb *b, int32_t d, int32_t target) {
  return tb_reduce_needed_dims(b, gopt_tensor_dims(b->g, d), b->g->tensors.a[d].rank, target);
}

int tb_reduce_needed_dims(const tb *b, const int64_t *dd, int r, int32_t target) {
  const gopt_graph *g = b->g;
  int q = g->tensors.a[target].rank;
  const int64_t *td = gopt_tensor_dims(g, target);
  if (q != r) return 1;
  for (int i = 0; i < q; i++)
    if (td[i] == 1 && dd[i] != 1) return 1;
  return 0;
}

int32_t tb_reduce_to(tb *b, int32_t d, int32_t target, const char *what) {
  const gopt_graph *g = b->g;
  int r = g->tensors.a[d].rank, q = g->tensors.a[target].rank;
  int64_t dd[GOPT_MAX_RANK], td[GOPT_MAX_RANK], lead_axes[GOPT_MAX_RANK], keep_axes[GOPT_MAX_RANK];
  memcpy(dd, gopt_tensor_dims(g, d), (size_t)r * sizeof *dd);
  memcpy(td, gopt_tensor_dims(g, target), (size_t)q * sizeof *td);
  if (q > r) return tb_fail(b, GOPT_ESHAPE, "gradient of rank %d cannot reduce to rank %d", r, q), -1;
  int lead = r - q, nl = 0, nk = 0;
  for (int i = 0; i < lead; i++) lead_axes[nl++] = i;
  /* A target dim of concrete 1 against anything but 1 was broadcast; symbolic dims are taken to
   * match (ONNX's rule leaves no other consistent choice). */
  for (int i = 0; i < q; i++)
    if (td[i] == 1 && dd[lead + i] != 1) keep_axes[nk++] = i;
  if (!nl && !nk) return d;
  if (nl && !nk) return tb_reduce_sum(b, d, lead_axes, nl, 0, what, q, td);
  if (!nl) return tb_reduce_sum(b, d, keep_axes, nk, 1, what, q, td);
  char mid[96];
  snprintf(mid, sizeof mid, "%.80s_lead", what);
  int32_t t = tb_reduce_sum(b, d, lead_axes, nl, 0, mid, q, dd + lead);
  if (t < 0) return -1;
  return tb_reduce_sum(b, t, keep_axes, nk, 1, what, q, td);
}

int tb_copy_attrs(tb *b, int32_t from, int32_t to) {
  gopt_graph *g = b->g;
  uint16_t na = g->nodes.a[from].n_attr;
  for (uint16_t i = 0; i < na; i++) {
    /* Copy the attribute first: setting one may move g->attrs and the value arrays. */
    gopt_attr a = g->attrs.a[g->nodes.a[from].attr + i];
    char name[256];
    snprintf(name, sizeof name, "%s", gopt_graph_str(g, a.name));
    int rc = 0;
    switch (a.kind) {
      case GOPT_ATTR_INT: rc = gopt_node_set_int(g, to, name, a.v.i); break;
      case GOPT_ATTR_FLOAT: rc = gopt_node_set_float(g, to, name, a.v.f); break;
      case GOPT_ATTR_STRING: {
        char s[NAME_MAX_LEN];
        snprintf(s, sizeof s, "%s", gopt_graph_str(g, a.v.s));
        rc = gopt_node_set_string(g, to, name, s);
        break;
      }
      case GOPT_ATTR_INTS: {
        int64_t *v = malloc((a.n ? a.n : 1) * sizeof *v);
        if (!v) return tb_fail(b, GOPT_ENOMEM, "out of memory");
        memcpy(v, g->ints.a + a.v.off, a.n * sizeof *v);
        rc = gopt_node_set_ints(g, to, name, v, a.n);
        free(v);
        break;
      }
      case GOPT_ATTR_FLOATS: {
        float *v = malloc((a.n ? a.n : 1) * sizeof *v);
        if (!v) return tb_fail(b, GOPT_ENOMEM, "out of memory");
        memcpy(v, g->floats.a + a.v.off, a.n * sizeof *v);
        rc = gopt_node_set_floats(g, to, name, v, a.n);
        free(v);
        break;
      }
      case GOPT_ATTR_STRINGS: {
        /* Copies: interning while setting can move the string table the values point into. */
        char **v = calloc(a.n ? a.n : 1, sizeof *v);
        if (!v) return tb_fail(b, GOPT_ENOMEM, "out of memory");
        for (uint32_t k = 0; k < a.n && !rc; k++)
          if (!(v[k] = strdup(gopt_graph_str(g, g->strids.a[a.v.off + k])))) rc = GOPT_ENOMEM;
        if (!rc) rc = gopt_node_set_strings(g, to, name, (const char *const *)v, a.n);
        for (uint32_t k = 0; k < a.n; k++) free(v[k]);
        free(v);
        break;
      }
      default: break; /* tensor and graph attributes are not needed by any gradient op */
    }
    if (rc) return tb_fail(b, rc, "cannot copy attribute '%s'", name);
  }
  return 0;
}

int tb_partial(tb *b, int32_t t, int32_t grad) {
  if (grad < 0) return tb_fail(b, GOPT_EINVAL, "internal: missing partial gradient");
  if ((size_t)t >= b->nt) return tb_fail(b, GOPT_EINVAL, "internal: gradient of a new tensor");
  if (b->nparts == b->capparts) {
    size_t nc = b->capparts ? b->capparts * 2 : 256;
    tb_part *p = realloc(b->parts, nc * sizeof *p);
    if (!p) return tb_fail(b, GOPT_ENOMEM, "out of memory");
    b->parts = p;
    b->capparts = nc;
  }
  /* Append at the tail so a Sum lists partials in the order they were made. */
  int32_t k = (int32_t)b->nparts++;
  b->parts[k].grad = grad;
  b->parts[k].next = -1;
  if (b->phead[t] < 0) {
    b->phead[t] = k;
  } else {
    int32_t j = b->phead[t];
    while (b->parts[j].next >= 0) j = b->parts[j].next;
    b->parts[j].next = k;
  }
  return 0;
}

/* The gradient of tensor t: its one partial, or a Sum of its partials (named grad/<t>); -1 when
 * it has none. */
static int32_t finalize(tb *b, int32_t t) {
  if (b->grad[t] >= 0) return b->grad[t];
  int k = 0;
  for (int32_t j = b->phead[t]; j >= 0; j = b->parts[j].next) k++;
  if (k == 0) return -1;
  if (k == 1) return b->grad[t] = b->parts[b->phead[t]].grad;
  int32_t *in = malloc((size_t)k * sizeof *in);
  if (!in) return tb_fail(b, GOPT_ENOMEM, "out of memory"), -1;
  k = 0;
  for (int32_t j = b->phead[t]; j >= 0; j = b->parts[j].next) in[k++] = b->parts[j].grad;
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "grad/%s", gopt_graph_str(b->g, b->g->tensors.a[t].name));
  const gopt_tensor *x = &b->g->tensors.a[t];
  int32_t s = add_tensor_unique(b, name, x->dtype, x->rank, gopt_tensor_dims(b->g, t));
  int32_t n = s < 0 ? -1 : tb_node(b, "Sum", k, in, 1, &s);
  free(in);
  if (n < 0) return -1;
  return b->grad[t] = s;
}

/* ---- loss --------------------------------------------------------------------------------------- */

/* Adds the loss (forward) nodes; returns the loss tensor or -1. */
static int32_t build_loss(tb *b, size_t *n_nodes) {
  gopt_graph *g = b->g;
  size_t nout = g->outputs.n;
  int32_t *terms = malloc((nout ? nout : 1) * sizeof *terms);
  int nterm = 0, dt = GOPT_DT_UNDEFINED;
  if (!terms) return tb_fail(b, GOPT_ENOMEM, "out of memory"), -1;
  int32_t loss = -1;
  int nfloat = 0;
  for (size_t i = 0; i < nout; i++) {
    int32_t o = g->outputs.a[i];
    if (tb_is_float(g->tensors.a[o].dtype) && !(g->tensors.a[o].flags & GOPT_T_NOSHAPE)) nfloat++;
  }
  for (size_t i = 0; i < nout; i++) {
    int32_t o = g->outputs.a[i];
    const gopt_tensor *x = &g->tensors.a[o];
    if (!tb_is_float(x->dtype) || (x->flags & GOPT_T_NOSHAPE)) continue;
    if (dt != GOPT_DT_UNDEFINED && x->dtype != dt) {
      tb_fail(b, GOPT_EUNSUP, "float outputs of different dtypes (%s, %s) cannot be summed into "
              "one loss", gopt_dtype_name(dt), gopt_dtype_name(x->dtype));
      goto out;
    }
    dt = x->dtype;
    if (x->rank == 0) {
      terms[nterm++] = o;
      continue;
    }
    char name[NAME_MAX_LEN];
    if (nfloat == 1) snprintf(name, sizeof name, "loss");
    else snprintf(name, sizeof name, "loss/%s", gopt_graph_str(g, x->name));
    int32_t t = add_tensor_unique(b, name, dt, 0, NULL);
    if (t < 0) goto out;
    if (add_node_flagged(b, "ReduceMean", gopt_graph_str(g, g->tensors.a[t].name), 1, &o, 1, &t,
                         0) < 0)
      goto out;
    gopt_node_set_int(g, g->tensors.a[t].producer, "keepdims", 0);
    (*n_nodes)++;
    terms[nterm++] = t;
  }
  if (nterm == 0) {
    tb_fail(b, GOPT_EINVAL, "the graph has no float output with a known shape to build a loss from");
    goto out;
  }
  if (nterm == 1) {
    loss = terms[0];
  } else {
    int32_t t = add_tensor_unique(b, "loss", dt, 0, NULL);
    if (t < 0) goto out;
    if (add_node_flagged(b, "Sum", gopt_graph_str(g, g->tensors.a[t].name), nterm, terms, 1, &t,
                         0) < 0)
      goto out;
    (*n_nodes)++;
    loss = t;
  }
  if (!(g->tensors.a[loss].flags & GOPT_T_OUTPUT) && gopt_graph_add_output(g, loss)) {
    tb_fail(b, GOPT_ENOMEM, "out of memory");
    loss = -1;
  }
out:
  free(terms);
  return loss;
}

/* ---- optimizer updates -------------------------------------------------------------------------- */

/* A GOPT_T_STATE constant without data shaped like p, named <p><suffix>. */
static int32_t state_like(tb *b, int32_t p, const char *suffix) {
  char name[NAME_MAX_LEN];
  const gopt_tensor *x = &b->g->tensors.a[p];
  snprintf(name, sizeof name, "%s%s", gopt_graph_str(b->g, x->name), suffix);
  int32_t s = add_tensor_unique(b, name, x->dtype, x->rank, gopt_tensor_dims(b->g, p));
  if (s < 0) return -1;
  size_t nb = (size_t)gopt_tensor_numel(b->g, s) * gopt_dtype_size(b->g->tensors.a[s].dtype);
  if (gopt_tensor_set_const(b->g, s, NULL, nb, b->err)) return -1;
  b->g->tensors.a[s].flags |= GOPT_T_STATE;
  return s;
}

/* Updated-value tensor <name>.updated shaped like t, made a graph output. */
static int32_t updated_like(tb *b, int32_t t) {
  char name[NAME_MAX_LEN];
  const gopt_tensor *x = &b->g->tensors.a[t];
  snprintf(name, sizeof name, "%s.updated", gopt_graph_str(b->g, x->name));
  int32_t u = add_tensor_unique(b, name, x->dtype, x->rank, gopt_tensor_dims(b->g, t));
  if (u < 0) return -1;
  if (gopt_graph_add_output(b->g, u)) return tb_fail(b, GOPT_ENOMEM, "out of memory"), -1;
  return u;
}

enum { OPT_SGD, OPT_MOMENTUM, OPT_ADAM };

static int add_update(tb *b, int kind, const gopt_train_opts *o, int32_t p, int32_t dp,
                      int32_t *step) {
  gopt_graph *g = b->g;
  int32_t in[5] = {p, dp, -1, -1, -1}, out[3];
  int n_in = 2, n_out = 1;
  const char *type = "SGDUpdate";
  if (kind == OPT_MOMENTUM) {
    type = "MomentumUpdate";
    if ((in[2] = state_like(b, p, ".momentum")) < 0) return -1;
    n_in = 3;
    n_out = 2;
  } else if (kind == OPT_ADAM) {
    type = "AdamUpdate";
    if ((in[2] = state_like(b, p, ".adam_m")) < 0 || (in[3] = state_like(b, p, ".adam_v")) < 0)
      return -1;
    if (*step < 0) {
      /* The step count (for bias correction) is fed by the training loop. */
      *step = add_tensor_unique(b, "optimizer.step", GOPT_DT_INT64, 0, NULL);
      if (*step < 0 || gopt_graph_add_input(g, *step)) return tb_fail(b, GOPT_ENOMEM, "out of memory");
    }
    in[4] = *step;
    n_in = 5;
    n_out = 3;
  }
  if ((out[0] = updated_like(b, p)) < 0) return -1;
  for (int i = 1; i < n_out; i++)
    if ((out[i] = updated_like(b, in[1 + i])) < 0) return -1;
  char name[NAME_MAX_LEN];
  snprintf(name, sizeof name, "update/%s", gopt_graph_str(g, g->tensors.a[p].name));
  int32_t n = add_node_flagged(b, type, name, n_in, in, n_out, out, GOPT_N_UPDATE);
  if (n < 0) return -1;
  gopt_node_set_float(g, n, "lr", o->lr);
  if (o->weight_decay != 0) gopt_node_set_float(g, n, "weight_decay", o->weight_decay);
  if (kind == OPT_MOMENTUM) gopt_node_set_float(g, n, "momentum", o->momentum);
  if (kind == OPT_ADAM) {
    gopt_node_set_float(g, n, "beta1", o->beta1);
    gopt_node_set_float(g, n, "beta2", o->beta2);
    gopt_node_set_float(g, n, "epsilon", o->epsilon);
  }
  return 0;
}

/* ---- driver -------------------------------------------------------------------------------------- */

void gopt_train_opts_init(gopt_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->optimizer = "sgd";
  o->lr = 0.01;
  o->momentum = 0.9;
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  o->epsilon = 1e-8;
}

void gopt_train_info_free(gopt_train_info *info) {
  if (!info) return;
  free(info->grad_of);
  info->grad_of = NULL;
  info->n_grad_of = 0;
}

int gopt_train_build(gopt_graph *g, const gopt_train_opts *o, gopt_error *err) {
  return gopt_train_build_ex(g, o, NULL, err);
}

/* Name of the first float input tensor of n that is a parameter (for messages), or "". */
static const char *param_hint(const gopt_graph *g, int32_t n) {
  for (int i = 0; i < g->nodes.a[n].n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_PARAM)) return gopt_graph_str(g, g->tensors.a[t].name);
  }
  return "";
}

int gopt_train_build_ex(gopt_graph *g, const gopt_train_opts *o, gopt_train_info *info,
                        gopt_error *err) {
  gopt_train_opts dflt;
  gopt_train_opts_init(&dflt);
  if (!o) o = &dflt;
  gopt_error lerr = {0};
  if (!err) err = &lerr;
  err->code = 0;
  err->msg[0] = 0;
  tb b;
  memset(&b, 0, sizeof b);
  b.g = g;
  b.err = err;
  b.cur = -1;
  b.opset = graph_opset(g);
  int rc = GOPT_OK;
  int32_t *order = NULL, step = -1;
  uint32_t *masks = NULL;
  unsigned char *has_rule = NULL, *need = NULL;
  size_t n_loss_nodes = 0, n_params = 0, n_frozen = 0, n_updates = 0;
  size_t nt0 = g->tensors.n, nn0 = g->nodes.n;
  if (info) {
    memset(info, 0, sizeof *info);
    info->loss = info->seed = -1;
    info->n_fwd_tensors = nt0;
    info->n_fwd_nodes = nn0;
  }

  int kind = OPT_SGD;
  const char *on = o->optimizer ? o->optimizer : "sgd";
  if (!strcmp(on, "sgd")) kind = OPT_SGD;
  else if (!strcmp(on, "momentum")) kind = OPT_MOMENTUM;
  else if (!strcmp(on, "adam")) kind = OPT_ADAM;
  else return gopt_error_set(err, GOPT_EINVAL, "training: unknown optimizer '%s' (sgd, momentum, adam)", on);

  int32_t loss = build_loss(&b, &n_loss_nodes);
  if (loss < 0) { rc = err->code ? err->code : GOPT_EINVAL; goto done; }

  size_t nt = b.nt = g->tensors.n, nn = g->nodes.n;
  b.req = calloc(nt, 1);
  b.reach = calloc(nt, 1);
  b.phead = malloc(nt * sizeof *b.phead);
  b.grad = malloc(nt * sizeof *b.grad);
  b.shape_t = malloc(nt * sizeof *b.shape_t);
  order = malloc((nn ? nn : 1) * sizeof *order);
  masks = calloc(nn ? nn : 1, sizeof *masks);
  has_rule = calloc(nn ? nn : 1, 1);
  need = malloc(UINT16_MAX + 1);
  if (!b.req || !b.reach || !b.phead || !b.grad || !b.shape_t || !order || !masks || !has_rule || !need) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "training: out of memory");
    goto done;
  }
  for (size_t t = 0; t < nt; t++) b.phead[t] = b.grad[t] = b.shape_t[t] = -1;
  int64_t cnt = gopt_graph_topo(g, order, err);
  if (cnt < 0) { rc = (int)cnt; goto done; }

  /* Forward: which tensors depend on a parameter through differentiable inputs. */
  for (size_t t = 0; t < nt; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if ((x->flags & GOPT_T_PARAM) && !(x->flags & GOPT_T_ATTR) && tb_is_float(x->dtype)) b.req[t] = 1;
  }
  for (int64_t k = 0; k < cnt; k++) {
    int32_t n = order[k];
    has_rule[n] = (unsigned char)tb_diff_mask(&b, n, &masks[n]);
    int any = 0;
    for (int i = 0; i < g->nodes.a[n].n_in; i++) {
      int32_t t = gopt_node_input(g, n, i);
      if (t >= 0 && tb_mask_bit(masks[n], i) && b.req[t]) any = 1;
    }
    if (!any) continue;
    for (int i = 0; i < g->nodes.a[n].n_out; i++) {
      int32_t t = gopt_node_output(g, n, i);
      if (tb_is_float(g->tensors.a[t].dtype)) b.req[t] = 1;
    }
  }
  if (!b.req[loss]) {
    rc = gopt_error_set(err, GOPT_EINVAL, "training: no parameter (GOPT_T_PARAM float constant) "
                        "reaches the loss through differentiable ops");
    goto done;
  }
  /* Backward: which tensors the loss depends on; every op on a gradient path needs a rule. */
  b.reach[loss] = 1;
  for (int64_t k = cnt - 1; k >= 0; k--) {
    int32_t n = order[k];
    int out_needed = 0;
    for (int i = 0; i < g->nodes.a[n].n_out; i++) {
      int32_t t = gopt_node_output(g, n, i);
      if (b.reach[t] && b.req[t]) out_needed = 1;
    }
    if (!out_needed) continue;
    int in_needed = 0;
    for (int i = 0; i < g->nodes.a[n].n_in; i++) {
      int32_t t = gopt_node_input(g, n, i);
      if (t < 0 || !tb_mask_bit(masks[n], i)) continue;
      b.reach[t] = 1;
      if (b.req[t]) in_needed = 1;
    }
    if (in_needed && !has_rule[n]) {
      const char *hint = param_hint(g, n);
      rc = gopt_error_set(err, GOPT_EUNSUP,
                          "training: node '%s' (op %s) lies on a gradient path from the "
                          "parameters to the loss and gopt has no gradient rule for it%s%s%s",
                          gopt_node_name(g, n), gopt_node_type(g, n), *hint ? " (it reads parameter '" : "",
                          hint, *hint ? "')" : "");
      goto done;
    }
  }
  for (size_t t = 0; t < nt; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (b.req[t] && b.reach[t] && (x->flags & GOPT_T_NOSHAPE)) {
      rc = gopt_error_set(err, GOPT_ESHAPE, "training: tensor '%s' lies on a gradient path but has "
                          "no inferred shape", gopt_graph_str(g, x->name));
      goto done;
    }
  }

  /* Seed and reverse walk. */
  {
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "grad/%s", gopt_graph_str(g, g->tensors.a[loss].name));
    int32_t seed = const_scalar_named(&b, name, g->tensors.a[loss].dtype, 1.0);
    if (seed < 0 || tb_partial(&b, loss, seed)) { rc = err->code; goto done; }
    if (info) info->seed = seed;
  }
  for (int64_t k = cnt - 1; k >= 0; k--) {
    int32_t n = order[k];
    int nout = g->nodes.a[n].n_out, nin = g->nodes.a[n].n_in;
    int nneed = 0;
    for (int i = 0; i < nin; i++) {
      int32_t t = gopt_node_input(g, n, i);
      need[i] = (unsigned char)(t >= 0 && tb_mask_bit(masks[n], i) && b.req[t] && b.reach[t]);
      nneed += need[i];
    }
    if (!nneed) continue;
    int32_t dy_small[8];
    int32_t *dy = nout <= 8 ? dy_small : malloc((size_t)nout * sizeof *dy);
    if (!dy) { rc = gopt_error_set(err, GOPT_ENOMEM, "training: out of memory"); goto done; }
    int any = 0;
    b.cur = n;
    for (int i = 0; i < nout; i++) {
      int32_t t = gopt_node_output(g, n, i);
      dy[i] = (b.req[t] && b.reach[t]) ? finalize(&b, t) : -1;
      if (b.req[t] && b.reach[t] && dy[i] < 0 && err->code == 0)
        tb_fail(&b, GOPT_EINVAL, "internal: output '%s' has no gradient",
                gopt_graph_str(g, g->tensors.a[t].name));
      if (err->code) { if (dy != dy_small) free(dy); rc = err->code; goto done; }
      if (dy[i] >= 0) any = 1;
    }
    if (any) rc = tb_emit(&b, n, dy, need);
    if (dy != dy_small) free(dy);
    if (rc) goto done;
    b.cur = -1;
  }

  /* Parameters: final gradients and updates (in tensor order: deterministic). */
  b.cur = -1;
  for (size_t t = 0; t < nt0; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_PARAM) || (x->flags & GOPT_T_ATTR) || !tb_is_float(x->dtype)) continue;
    if (!(b.req[t] && b.reach[t])) { n_frozen++; continue; }
    int32_t dp = finalize(&b, (int32_t)t);
    if (dp < 0) {
      rc = err->code ? err->code
                     : gopt_error_set(err, GOPT_EINVAL, "training: internal: parameter '%s' has no gradient",
                                      gopt_graph_str(g, x->name));
      goto done;
    }
    if (add_update(&b, kind, o, (int32_t)t, dp, &step)) { rc = err->code; goto done; }
    n_params++;
    n_updates++;
  }

done:
  if (info) {
    info->loss = loss;
    info->n_params = n_params;
    info->n_frozen = n_frozen;
    info->n_loss_nodes = n_loss_nodes;
    info->n_grad_nodes = b.n_grad_nodes;
    info->n_update_nodes = n_updates;
    if (rc == GOPT_OK && b.grad) {
      info->grad_of = malloc((b.nt ? b.nt : 1) * sizeof *info->grad_of);
      if (!info->grad_of) {
        rc = gopt_error_set(err, GOPT_ENOMEM, "training: out of memory");
      } else {
        info->n_grad_of = b.nt;
        for (size_t t = 0; t < b.nt; t++) info->grad_of[t] = (b.req[t] && b.reach[t]) ? b.grad[t] : -1;
      }
    }
  }
  free(b.req);
  free(b.reach);
  free(b.phead);
  free(b.grad);
  free(b.shape_t);
  free(b.parts);
  free(order);
  free(masks);
  free(has_rule);
  free(need);
  return rc;
}
