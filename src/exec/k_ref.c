/* k_ref.c: reference kernels for the long tail of ONNX ops. Every input is converted to double,
 * the op computes in double over flat row-major arrays, and the results are converted to the
 * output dtypes the graph declares (output shapes come from shape inference). Simple, exact
 * enough for every numeric dtype, and slow: the hot ops of real models keep their own kernels
 * (k_dnnl.c, k_elem.c, k_data.c, k_misc.c); these run whatever those do not (trigonometry,
 * losses, arg/top-k, index ops, integer and quantized ops, ConvTranspose, GRU/RNN, Einsum…).
 * The ops themselves are in k_ref_ops.c, k_ref_nn.c, k_ref_more.c, k_ref_llm.c and k_ref_extra.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

static int dt_ok(int dt) {
  switch (dt) {
    case GOPT_DT_FLOAT: case GOPT_DT_DOUBLE: case GOPT_DT_INT8: case GOPT_DT_INT16:
    case GOPT_DT_INT32: case GOPT_DT_INT64: case GOPT_DT_UINT8: case GOPT_DT_UINT16:
    case GOPT_DT_UINT32: case GOPT_DT_UINT64: case GOPT_DT_BOOL: case GOPT_DT_FLOAT16:
    case GOPT_DT_BFLOAT16:
      return 1;
    default: return gopt_dtype_is_lowbit(dt);
  }
}

/* IEEE half <-> double (round to nearest even on the way down, through float). */
static double half_to_d(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return h & 0x8000 ? -v : v;
}
static uint16_t d_to_half(double d) {
  float f = (float)d;
  uint32_t b;
  memcpy(&b, &f, 4);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
  if (isnan(f)) return sign | 0x7e00;
  float a = fabsf(f);
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 6.103515625e-05f) return sign | (uint16_t)nearbyintf(a * 16777216.0f); /* subnormal */
  int e;
  float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  uint32_t q = (uint32_t)nearbyintf(m * 2048.0f); /* 11 significant bits */
  if (q == 2048) q = 1024, e++;
  return sign | (uint16_t)(((uint32_t)(e + 14) << 10) | (q - 1024));
}

/* bfloat16 (the high 16 bits of a float) <-> double. Down: to float (round to nearest), then to
 * bfloat16 rounding to nearest even (onnx >= 1.14's Cast, and the v1.22.0 node tests); a NaN stays
 * a quiet NaN. */
static double bf16_to_d(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t d_to_bf16(double d) {
  float f = (float)d;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x7fc0);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static void load(double *v, const void *p, int dt, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
      case GOPT_DT_FLOAT: v[i] = ((const float *)p)[i]; break;
      case GOPT_DT_DOUBLE: v[i] = ((const double *)p)[i]; break;
      case GOPT_DT_INT8: v[i] = ((const int8_t *)p)[i]; break;
      case GOPT_DT_INT16: v[i] = ((const int16_t *)p)[i]; break;
      case GOPT_DT_INT32: v[i] = ((const int32_t *)p)[i]; break;
      case GOPT_DT_INT64: v[i] = (double)((const int64_t *)p)[i]; break;
      case GOPT_DT_UINT8: case GOPT_DT_BOOL: v[i] = ((const uint8_t *)p)[i]; break;
      case GOPT_DT_UINT16: v[i] = ((const uint16_t *)p)[i]; break;
      case GOPT_DT_UINT32: v[i] = ((const uint32_t *)p)[i]; break;
      case GOPT_DT_UINT64: v[i] = (double)((const uint64_t *)p)[i]; break;
      case GOPT_DT_FLOAT16: v[i] = half_to_d(((const uint16_t *)p)[i]); break;
      case GOPT_DT_BFLOAT16: v[i] = bf16_to_d(((const uint16_t *)p)[i]); break;
      default: v[i] = gopt_lowbit_to_double(dt, ((const uint8_t *)p)[i]); break;
    }
  }
}

/* Stores doubles as dtype dt: integers truncate toward zero (C casts, as ONNX Cast does), bool is
 * v != 0. Values out of an integer type's range wrap through int64 like numpy's astype. The
 * low-bit types round to nearest even (gopt_lowbit_from_double with the node's saturate and
 * round_mode attributes, s). */
static void store(void *p, const double *v, int dt, int64_t n, const ref_st *s) {
  for (int64_t i = 0; i < n; i++) {
    double d = v[i];
    int64_t q = isfinite(d) && fabs(d) < 9.2e18 ? (int64_t)d : 0;
    switch (dt) {
      case GOPT_DT_FLOAT: ((float *)p)[i] = (float)d; break;
      case GOPT_DT_DOUBLE: ((double *)p)[i] = d; break;
      case GOPT_DT_INT8: ((int8_t *)p)[i] = (int8_t)q; break;
      case GOPT_DT_INT16: ((int16_t *)p)[i] = (int16_t)q; break;
      case GOPT_DT_INT32: ((int32_t *)p)[i] = (int32_t)q; break;
      case GOPT_DT_INT64: ((int64_t *)p)[i] = q; break;
      case GOPT_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)q; break;
      case GOPT_DT_BOOL: ((uint8_t *)p)[i] = d != 0; break;
      case GOPT_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)q; break;
      case GOPT_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)q; break;
      case GOPT_DT_UINT64:
        ((uint64_t *)p)[i] = d >= 9.2e18 && d < 1.8e19 ? (uint64_t)d : (uint64_t)q;
        break;
      case GOPT_DT_FLOAT16: ((uint16_t *)p)[i] = d_to_half(d); break;
      case GOPT_DT_BFLOAT16: ((uint16_t *)p)[i] = d_to_bf16(d); break;
      case GOPT_DT_INT4: case GOPT_DT_UINT4: case GOPT_DT_INT2: case GOPT_DT_UINT2: { /* wrap */
        int bits = gopt_dtype_bits(dt);
        uint8_t u = (uint8_t)((uint64_t)q & ((1u << bits) - 1));
        if ((dt == GOPT_DT_INT4 || dt == GOPT_DT_INT2) && (u >> (bits - 1))) u |= (uint8_t)(0xFFu << bits);
        ((uint8_t *)p)[i] = u;
        break;
      }
      default:
        ((uint8_t *)p)[i] = gopt_lowbit_from_double(dt, d, s->saturate, s->round_mode);
        break;
    }
  }
}

static void rt_set(rt *t, const gopt_exec *x, int32_t id) {
  memset(t, 0, sizeof *t);
  t->id = id;
  if (id < 0) return;
  t->dt = ex_dtype(x, id);
  t->rank = ex_rank(x, id);
  if (t->rank) memcpy(t->d, ex_dims(x, id), (size_t)t->rank * sizeof(int64_t));
  t->n = ex_numel(x, id);
}

static int ref_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  ref_st *s = k->st;
  int rc = GOPT_OK;
  rt in[REF_MAX_IO], out[REF_MAX_IO];
  int nin = k->n_in < REF_MAX_IO ? k->n_in : REF_MAX_IO;
  int nout = k->n_out < REF_MAX_IO ? k->n_out : REF_MAX_IO;
  for (int i = 0; i < nin; i++) {
    rt_set(&in[i], x, k->in[i]);
    if (k->in[i] < 0) continue;
    in[i].v = malloc((size_t)(in[i].n + 1) * sizeof(double));
    if (!in[i].v) rc = GOPT_ENOMEM;
    else load(in[i].v, ex_data(x, k->in[i]), in[i].dt, in[i].n);
  }
  for (int i = 0; i < nout; i++) {
    rt_set(&out[i], x, k->out[i]);
    if (k->out[i] < 0) continue;
    out[i].v = calloc((size_t)(out[i].n + 1), sizeof(double));
    if (!out[i].v) rc = GOPT_ENOMEM;
  }
  if (rc) rc = gopt_error_set(err, rc, "out of memory");
  else rc = s->fn(x, k, in, nin, out, nout, err);
  for (int i = 0; i < nout && !rc; i++)
    if (out[i].v && out[i].n && !out[i].written) store(ex_data(x, k->out[i]), out[i].v, out[i].dt, out[i].n, s);
  for (int i = 0; i < nin; i++) free(in[i].v);
  for (int i = 0; i < nout; i++) free(out[i].v);
  return rc;
}

static const ref_entry *find(const gopt_exec *x, int32_t n) {
  const char *type = gopt_graph_str(x->g, x->g->nodes.a[n].type);
  const ref_entry *tabs[] = {ex_ref_ops_table, ex_ref_nn_table, ex_ref_more_table, ex_ref_llm_table,
                            ex_ref_extra_table, ex_ref_ml_table, ex_ref_train_table};
  for (size_t t = 0; t < sizeof tabs / sizeof *tabs; t++)
    for (const ref_entry *e = tabs[t]; e->name; e++)
      if (!strcmp(e->name, type)) return e;
  return NULL;
}

int ex_ref_handles(const gopt_exec *x, int32_t n) { return find(x, n) != NULL; }

int ex_ref_claims(const gopt_exec *x, int32_t n) {
  const ref_entry *e = find(x, n);
  return e && (!e->claim || e->claim(x, n));
}

int ex_prepare_ref(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const ref_entry *e = find(x, k->node);
  return ex_prepare_ref_fn(x, k, e ? e->fn : NULL, err);
}

int ex_prepare_ref_fn(gopt_exec *x, ex_kernel *k, ref_fn fn, gopt_error *err) {
  if (!fn) return ex_node_error(x, k->node, err, GOPT_EUNSUP, "op type not supported by the executor");
  if (k->n_in > REF_MAX_IO || k->n_out > REF_MAX_IO)
    return ex_node_error(x, k->node, err, GOPT_EUNSUP, "more than %d inputs or outputs", REF_MAX_IO);
  for (int i = 0; i < k->n_in + k->n_out; i++) {
    int32_t t = i < k->n_in ? k->in[i] : k->out[i - k->n_in];
    if (t >= 0 && !dt_ok(ex_dtype(x, t)))
      return ex_node_error(x, k->node, err, GOPT_EUNSUP, "dtype %s is not supported",
                           gopt_dtype_name(ex_dtype(x, t)));
  }
  ref_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  s->fn = fn;
  s->saturate = (int)gopt_node_get_int(x->g, k->node, "saturate", 1);
  s->round_mode = gopt_node_get_string(x->g, k->node, "round_mode", "up");
  k->st = s;
  k->fini = free;
  k->run = ref_run;
  return GOPT_OK;
}

/* ---- helpers shared by the op files ---------------------------------------------------------------- */

double *ref_attr_values(const gopt_exec *x, int32_t n, const char *name, int64_t *count) {
  const gopt_attr *a = gopt_node_attr(x->g, n, name);
  size_t c = 0;
  *count = 0;
  if (!a) return NULL;
  if (a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) {
    int32_t t = a->v.tensor;
    const void *p = gopt_tensor_data(x->g, t);
    int64_t m = ex_numel(x, t);
    int dt = x->g->tensors.a[t].dtype;
    if (!p || m < 0 || !dt_ok(dt)) return NULL;
    double *v = malloc((size_t)(m + 1) * sizeof *v);
    if (!v) return *count = -1, NULL;
    load(v, p, dt, m);
    *count = m;
    return v;
  }
  const float *f = a->kind == GOPT_ATTR_FLOATS ? gopt_node_get_floats(x->g, n, name, &c) : NULL;
  const int64_t *iv = a->kind == GOPT_ATTR_INTS ? gopt_node_get_ints(x->g, n, name, &c) : NULL;
  if (!f && !iv) return NULL;
  double *v = malloc((c + 1) * sizeof *v);
  if (!v) return *count = -1, NULL;
  for (size_t i = 0; i < c; i++) v[i] = f ? f[i] : (double)iv[i];
  *count = (int64_t)c;
  return v;
}

void ref_strides(const rt *t, int64_t *st) {
  int64_t a = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    st[i] = a;
    a *= t->d[i];
  }
}

int64_t ref_bcast_index(const rt *in, const rt *out, int64_t o) {
  int64_t idx = 0, a = 1;
  int off = out->rank - in->rank;
  for (int i = out->rank - 1; i >= 0; i--) {
    int64_t c = o % out->d[i];
    o /= out->d[i];
    int j = i - off;
    if (j < 0) continue;
    if (in->d[j] != 1) idx += c * a;
    a *= in->d[j];
  }
  return idx;
}

int ref_axis(const gopt_exec *x, int32_t n, const char *name, int64_t dflt, int rank, int *axis,
             gopt_error *err) {
  int64_t a = gopt_node_get_int(x->g, n, name, dflt);
  if (a < 0) a += rank;
  if (a < 0 || a >= (rank ? rank : 1))
    return ex_node_error(x, n, err, GOPT_EINVAL, "%s %lld out of range for rank %d", name,
                         (long long)gopt_node_get_int(x->g, n, name, dflt), rank);
  *axis = (int)a;
  return GOPT_OK;
}

void ref_split3(const rt *t, int axis, int64_t *outer, int64_t *mid, int64_t *inner) {
  *outer = *inner = 1;
  *mid = t->rank ? t->d[axis] : 1;
  for (int i = 0; i < axis; i++) *outer *= t->d[i];
  for (int i = axis + 1; i < t->rank; i++) *inner *= t->d[i];
}
