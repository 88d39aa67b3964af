/* values.c: propagation of the values of small tensors (shape computations: Shape -> Gather ->
 * Concat -> Reshape and friends). Elements may be symbolic (a dim symbol); arithmetic that keeps a
 * symbol exact (x*1, x+0, x-x, products and exact quotients of symbols) stays exact, anything else
 * becomes a memoised symbol or unknown. Dims are never negative, which decides comparisons such as
 * Equal(dim, -1) that exporters use for Expand/Reshape shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

static pval pv_conc_i(int64_t i) { pval v = {i, (double)i, PV_CONC}; return v; }
static pval pv_conc_f(double f) {
  pval v = {0, f, PV_CONC};
  if (fabs(f) < 9.2e18) v.i = (int64_t)f;
  return v;
}
static pval pv_unk(void) { pval v = {0, 0, PV_UNK}; return v; }
static pval pv_dim(int64_t d) {
  if (d >= 0) return pv_conc_i(d);
  pval v = {0, 0, (int32_t)GOPT_DIM_SYM_ID(d)};
  return v;
}

/* When v is a valid dim (a symbol or a non-negative integral concrete), stores it in *d. */
static int as_dim(const pval *v, int fl, int64_t *d) {
  if (v->s >= 0) { *d = GOPT_DIM_SYM(v->s); return 1; }
  if (v->s != PV_CONC) return 0;
  if (fl) {
    if (v->f < 0 || v->f != floor(v->f) || v->f > 9e15) return 0;
    *d = (int64_t)v->f;
    return 1;
  }
  if (v->i < 0) return 0;
  *d = v->i;
  return 1;
}

/* Static shape of tensor t; returns its element count, or -1 when not static. */
static int64_t static_shape(ictx *c, int32_t t, oshape *s) {
  s->rank = -1;
  if (t < 0) return -1;
  const gopt_tensor *x = &c->g->tensors.a[t];
  if (x->flags & GOPT_T_NOSHAPE) return -1;
  s->rank = x->rank;
  if (x->rank) memcpy(s->d, gopt_tensor_dims(c->g, t), (size_t)x->rank * sizeof(int64_t));
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->d[i] < 0) return -1;
    if (s->d[i] > 0 && n > OPS_MAX_CONST_VALS / s->d[i]) return OPS_MAX_CONST_VALS + 1;
    n *= s->d[i];
  }
  return n;
}

/* Flat index into a tensor of shape s broadcast to shape o, for flat output index f. */
static int64_t bc_index(const oshape *o, const oshape *s, int64_t f) {
  int64_t idx = 0, stride = 1;
  for (int j = o->rank - 1, k = s->rank - 1; j >= 0; j--, k--) {
    int64_t oi = f % o->d[j];
    f /= o->d[j];
    if (k < 0) continue;
    if (s->d[k] != 1) idx += oi * stride;
    stride *= s->d[k];
  }
  return idx;
}

static int cmp_op(int op) {
  return op == GOPT_OP_EQUAL || op == GOPT_OP_LESS || op == GOPT_OP_GREATER ||
         op == GOPT_OP_LESS_OR_EQUAL || op == GOPT_OP_GREATER_OR_EQUAL;
}

/* One element of a binary op. fl: the inputs are floats. */
static pval pv_bin(ictx *c, int op, const pval *a, const pval *b, int fl, int fmod_) {
  if (a->s == PV_CONC && b->s == PV_CONC) {
    if (fl) {
      double x = a->f, y = b->f;
      switch (op) {
        case GOPT_OP_ADD: return pv_conc_f(x + y);
        case GOPT_OP_SUB: return pv_conc_f(x - y);
        case GOPT_OP_MUL: return pv_conc_f(x * y);
        case GOPT_OP_DIV: return pv_conc_f(x / y);
        case GOPT_OP_MOD: return pv_conc_f(fmod(x, y));
        case GOPT_OP_MAX: return pv_conc_f(x > y ? x : y);
        case GOPT_OP_MIN: return pv_conc_f(x < y ? x : y);
        case GOPT_OP_POW: return pv_conc_f(pow(x, y));
        case GOPT_OP_EQUAL: return pv_conc_i(x == y);
        case GOPT_OP_LESS: return pv_conc_i(x < y);
        case GOPT_OP_GREATER: return pv_conc_i(x > y);
        case GOPT_OP_LESS_OR_EQUAL: return pv_conc_i(x <= y);
        case GOPT_OP_GREATER_OR_EQUAL: return pv_conc_i(x >= y);
        default: return pv_unk();
      }
    }
    int64_t x = a->i, y = b->i, r;
    switch (op) {
      case GOPT_OP_ADD: return __builtin_add_overflow(x, y, &r) ? pv_unk() : pv_conc_i(r);
      case GOPT_OP_SUB: return __builtin_sub_overflow(x, y, &r) ? pv_unk() : pv_conc_i(r);
      case GOPT_OP_MUL: return __builtin_mul_overflow(x, y, &r) ? pv_unk() : pv_conc_i(r);
      case GOPT_OP_DIV:
        if (y == 0 || (x == INT64_MIN && y == -1)) return pv_unk();
        return pv_conc_i(x / y);
      case GOPT_OP_MOD:
        if (y == 0 || (x == INT64_MIN && y == -1)) return pv_unk();
        r = x % y;
        if (!fmod_ && r != 0 && ((r < 0) != (y < 0))) r += y;
        return pv_conc_i(r);
      case GOPT_OP_MAX: return pv_conc_i(x > y ? x : y);
      case GOPT_OP_MIN: return pv_conc_i(x < y ? x : y);
      case GOPT_OP_EQUAL: return pv_conc_i(x == y);
      case GOPT_OP_LESS: return pv_conc_i(x < y);
      case GOPT_OP_GREATER: return pv_conc_i(x > y);
      case GOPT_OP_LESS_OR_EQUAL: return pv_conc_i(x <= y);
      case GOPT_OP_GREATER_OR_EQUAL: return pv_conc_i(x >= y);
      case GOPT_OP_AND: return pv_conc_i(x && y);
      case GOPT_OP_OR: return pv_conc_i(x || y);
      case GOPT_OP_XOR: return pv_conc_i(!x != !y);
      default: return pv_unk();
    }
  }
  if (a->s == PV_UNK || b->s == PV_UNK) return pv_unk();
  /* at least one symbol */
  int64_t da = 0, db = 0;
  int ia = as_dim(a, fl, &da), ib = as_dim(b, fl, &db);
  if (cmp_op(op)) {
    if (a->s >= 0 && b->s == a->s)
      return pv_conc_i(op == GOPT_OP_EQUAL || op == GOPT_OP_LESS_OR_EQUAL || op == GOPT_OP_GREATER_OR_EQUAL);
    /* a symbol is a dim, so >= 0: decide against negative constants */
    const pval *sv = a->s >= 0 ? a : b, *cv = a->s >= 0 ? b : a;
    if (cv->s != PV_CONC) return pv_unk();
    double k = fl ? cv->f : (double)cv->i;
    if (k >= 0) return pv_unk();
    int sym_left = a->s >= 0;
    (void)sv;
    switch (op) {
      case GOPT_OP_EQUAL: return pv_conc_i(0);
      case GOPT_OP_LESS: case GOPT_OP_LESS_OR_EQUAL: return pv_conc_i(!sym_left);
      default: return pv_conc_i(sym_left);
    }
  }
  switch (op) {
    case GOPT_OP_ADD:
      if (ia && ib) return pv_dim(ops_dim_add(c, da, db));
      break;
    case GOPT_OP_SUB:
      if (ia && ib) return pv_dim(ops_dim_sub(c, da, db));
      break;
    case GOPT_OP_MUL:
      if (ia && ib) return pv_dim(ops_dim_mul(c, da, db));
      break;
    case GOPT_OP_DIV:
      if (ia && ib && db != 0) {
        int ok;
        int64_t r = ops_dim_div(c, da, db, &ok);
        if (ok || !fl) return pv_dim(r); /* integer division of dims: the memoised symbol stands for it */
      }
      break;
    case GOPT_OP_MAX:
      if (ia && ib && a->s >= 0 && b->s == PV_CONC && db <= 0) return *a;
      if (ia && ib && b->s >= 0 && a->s == PV_CONC && da <= 0) return *b;
      if (a->s >= 0 && b->s == PV_CONC && (fl ? b->f : (double)b->i) <= 0) return *a;
      if (b->s >= 0 && a->s == PV_CONC && (fl ? a->f : (double)a->i) <= 0) return *b;
      break;
    case GOPT_OP_MIN:
      if (a->s >= 0 && b->s == PV_CONC && (fl ? b->f : (double)b->i) <= 0) return *b;
      if (b->s >= 0 && a->s == PV_CONC && (fl ? a->f : (double)a->i) <= 0) return *a;
      if (a->s >= 0 && b->s == PV_CONC && !fl && b->i >= ((int64_t)1 << 31) - 1) return *a;
      if (b->s >= 0 && a->s == PV_CONC && !fl && a->i >= ((int64_t)1 << 31) - 1) return *b;
      if (a->s >= 0 && a->s == b->s) return *a;
      break;
    default: break;
  }
  return pv_unk();
}

/* Unary element map. */
static pval pv_un(int op, const pval *a, int fl_in, int dt_out) {
  int fl_out = ops_is_float_dtype(dt_out);
  switch (op) {
    case GOPT_OP_IDENTITY: case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN: case GOPT_OP_SQUEEZE:
    case GOPT_OP_UNSQUEEZE:
      return *a;
    case GOPT_OP_CAST:
      if (a->s >= 0) return dt_out == GOPT_DT_BOOL ? pv_unk() : *a;
      if (a->s != PV_CONC) return pv_unk();
      if (dt_out == GOPT_DT_BOOL) return pv_conc_i(fl_in ? a->f != 0 : a->i != 0);
      if (fl_out) return pv_conc_f(fl_in ? a->f : (double)a->i);
      if (fl_in) {
        if (!(fabs(a->f) < 9.2e18)) return pv_unk();
        return pv_conc_i((int64_t)a->f);
      }
      return pv_conc_i(a->i);
    case GOPT_OP_NEG:
      if (a->s != PV_CONC) return pv_unk();
      return fl_in ? pv_conc_f(-a->f) : (a->i == INT64_MIN ? pv_unk() : pv_conc_i(-a->i));
    case GOPT_OP_ABS:
      if (a->s >= 0) return *a;
      if (a->s != PV_CONC) return pv_unk();
      return fl_in ? pv_conc_f(fabs(a->f)) : (a->i == INT64_MIN ? pv_unk() : pv_conc_i(a->i < 0 ? -a->i : a->i));
    case GOPT_OP_NOT:
      if (a->s != PV_CONC) return pv_unk();
      return pv_conc_i(!a->i);
    case GOPT_OP_FLOOR: case GOPT_OP_CEIL: case GOPT_OP_ROUND:
      if (a->s >= 0) return *a;
      if (a->s != PV_CONC) return pv_unk();
      if (!fl_in) return *a;
      return pv_conc_f(op == GOPT_OP_FLOOR ? floor(a->f) : op == GOPT_OP_CEIL ? ceil(a->f) : nearbyint(a->f));
    case GOPT_OP_SIGN:
      if (a->s != PV_CONC) return pv_unk();
      return fl_in ? pv_conc_f((a->f > 0) - (a->f < 0)) : pv_conc_i((a->i > 0) - (a->i < 0));
    default:
      return pv_unk();
  }
}

static int prop(ictx *c, int32_t n, int op) {
  gopt_graph *g = c->g;
  int32_t out = ops_out(c, n, 0);
  if (out < 0) return 0;
  oshape os, s0, s1, s2;
  int64_t ne = static_shape(c, out, &os);
  if (ne < 0 || ne > OPS_MAX_VALS) return 0;
  pval r[OPS_MAX_VALS];
  int32_t n0, n1, n2;
  int32_t t0 = ops_in(c, n, 0), t1 = ops_in(c, n, 1), t2 = ops_in(c, n, 2);
  const pval *v0, *v1, *v2;
  int dt0 = t0 >= 0 ? g->tensors.a[t0].dtype : 0, dto = g->tensors.a[out].dtype;
  int fl0 = ops_is_float_dtype(dt0);

  switch (op) {
    case GOPT_OP_CONSTANT: {
      const gopt_attr *a = gopt_node_attr(g, n, "value");
      if (a && a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) {
        v0 = ops_val(c, a->v.tensor, &n0);
        if (!v0 || n0 != ne) return 0;
        memcpy(r, v0, (size_t)ne * sizeof *r);
        break;
      }
      if ((a = gopt_node_attr(g, n, "value_int")) && ne == 1) { r[0] = pv_conc_i(a->v.i); break; }
      if ((a = gopt_node_attr(g, n, "value_float")) && ne == 1) { r[0] = pv_conc_f(a->v.f); break; }
      size_t k = 0;
      const int64_t *iv = gopt_node_get_ints(g, n, "value_ints", &k);
      if (iv && (int64_t)k == ne) { for (size_t i = 0; i < k; i++) r[i] = pv_conc_i(iv[i]); break; }
      const float *fv = gopt_node_get_floats(g, n, "value_floats", &k);
      if (fv && (int64_t)k == ne) { for (size_t i = 0; i < k; i++) r[i] = pv_conc_f(fv[i]); break; }
      return 0;
    }
    case GOPT_OP_SHAPE_OF: {
      if (static_shape(c, t0, &s0) == -1 && s0.rank < 0) return 0;
      int64_t st = 0, en = s0.rank;
      if (c->opset >= 15) {
        st = gopt_node_get_int(g, n, "start", 0);
        en = gopt_node_get_int(g, n, "end", s0.rank);
      }
      if (st < 0) st += s0.rank;
      if (en < 0) en += s0.rank;
      if (st < 0) st = 0;
      if (en > s0.rank) en = s0.rank;
      if (en - st != ne) return 0;
      for (int64_t i = st; i < en; i++) r[i - st] = pv_dim(s0.d[i]);
      break;
    }
    case GOPT_OP_SIZE: {
      static_shape(c, t0, &s0);
      if (s0.rank < 0) return 0;
      r[0] = pv_dim(ops_dims_product(c, s0.d, s0.rank));
      break;
    }
    case GOPT_OP_IDENTITY: case GOPT_OP_RESHAPE: case GOPT_OP_FLATTEN: case GOPT_OP_SQUEEZE:
    case GOPT_OP_UNSQUEEZE: case GOPT_OP_CAST: case GOPT_OP_NEG: case GOPT_OP_ABS: case GOPT_OP_NOT:
    case GOPT_OP_FLOOR: case GOPT_OP_CEIL: case GOPT_OP_ROUND: case GOPT_OP_SIGN:
      v0 = ops_val(c, t0, &n0);
      if (!v0 || n0 != ne) return 0;
      for (int64_t i = 0; i < ne; i++) r[i] = pv_un(op, &v0[i], fl0, dto);
      break;
    case GOPT_OP_ADD: case GOPT_OP_SUB: case GOPT_OP_MUL: case GOPT_OP_DIV: case GOPT_OP_MOD:
    case GOPT_OP_MAX: case GOPT_OP_MIN: case GOPT_OP_POW: case GOPT_OP_EQUAL: case GOPT_OP_LESS:
    case GOPT_OP_GREATER: case GOPT_OP_LESS_OR_EQUAL: case GOPT_OP_GREATER_OR_EQUAL:
    case GOPT_OP_AND: case GOPT_OP_OR: case GOPT_OP_XOR: {
      if (g->nodes.a[n].n_in != 2) {
        if (g->nodes.a[n].n_in == 1 && (op == GOPT_OP_MAX || op == GOPT_OP_MIN)) {
          v0 = ops_val(c, t0, &n0);
          if (!v0 || n0 != ne) return 0;
          memcpy(r, v0, (size_t)ne * sizeof *r);
          break;
        }
        return 0;
      }
      v0 = ops_val(c, t0, &n0);
      v1 = ops_val(c, t1, &n1);
      if (!v0 || !v1 || static_shape(c, t0, &s0) != n0 || static_shape(c, t1, &s1) != n1) return 0;
      int fm = (int)gopt_node_get_int(g, n, "fmod", 0);
      for (int64_t i = 0; i < ne; i++)
        r[i] = pv_bin(c, op, &v0[bc_index(&os, &s0, i)], &v1[bc_index(&os, &s1, i)], fl0, fm);
      break;
    }
    case GOPT_OP_WHERE: {
      v0 = ops_val(c, t0, &n0);
      v1 = ops_val(c, t1, &n1);
      v2 = ops_val(c, t2, &n2);
      if (!v0 || !v1 || !v2 || static_shape(c, t0, &s0) != n0 || static_shape(c, t1, &s1) != n1 ||
          static_shape(c, t2, &s2) != n2)
        return 0;
      for (int64_t i = 0; i < ne; i++) {
        const pval *cd = &v0[bc_index(&os, &s0, i)], *x = &v1[bc_index(&os, &s1, i)],
                   *y = &v2[bc_index(&os, &s2, i)];
        if (cd->s == PV_CONC) r[i] = cd->i ? *x : *y;
        else if (x->s == y->s && (x->s >= 0 || (x->s == PV_CONC && x->i == y->i && x->f == y->f))) r[i] = *x;
        else r[i] = pv_unk();
      }
      break;
    }
    case GOPT_OP_EXPAND: case GOPT_OP_TILE: {
      v0 = ops_val(c, t0, &n0);
      if (!v0 || static_shape(c, t0, &s0) != n0) return 0;
      for (int64_t i = 0; i < ne; i++) {
        if (op == GOPT_OP_EXPAND) {
          r[i] = v0[bc_index(&os, &s0, i)];
        } else {
          if (s0.rank != os.rank) return 0;
          int64_t f = i, idx = 0, stride = 1;
          for (int j = os.rank - 1; j >= 0; j--) {
            int64_t oi = f % os.d[j];
            f /= os.d[j];
            idx += (oi % s0.d[j]) * stride;
            stride *= s0.d[j];
          }
          r[i] = v0[idx];
        }
      }
      break;
    }
    case GOPT_OP_GATHER: {
      v0 = ops_val(c, t0, &n0);
      int64_t ix[OPS_MAX_VALS];
      int ni = ops_in_ints(c, n, 1, ix, OPS_MAX_VALS);
      if (!v0 || ni < 0 || static_shape(c, t0, &s0) != n0 || s0.rank < 1) return 0;
      int64_t ax = gopt_node_get_int(g, n, "axis", 0);
      if (ax < 0) ax += s0.rank;
      if (ax < 0 || ax >= s0.rank) return 0;
      int64_t outer = 1, inner = 1, D = s0.d[ax];
      for (int j = 0; j < ax; j++) outer *= s0.d[j];
      for (int j = (int)ax + 1; j < s0.rank; j++) inner *= s0.d[j];
      if (outer * ni * inner != ne) return 0;
      int64_t p = 0;
      for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < ni; k++) {
          int64_t id = ix[k] < 0 ? ix[k] + D : ix[k];
          if (id < 0 || id >= D) return ops_node_err(c, GOPT_ESHAPE, "gather index %lld out of range [0,%lld)", (long long)ix[k], (long long)D);
          for (int64_t in = 0; in < inner; in++) r[p++] = v0[(o * D + id) * inner + in];
        }
      break;
    }
    case GOPT_OP_CONCAT: {
      int64_t ax = gopt_node_get_int(g, n, "axis", 0);
      if (ax < 0) ax += os.rank;
      if (ax < 0 || ax >= os.rank) return 0;
      int64_t outer = 1, inner = 1;
      for (int j = 0; j < ax; j++) outer *= os.d[j];
      for (int j = (int)ax + 1; j < os.rank; j++) inner *= os.d[j];
      int k = g->nodes.a[n].n_in;
      int64_t p = 0;
      for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < k; i++) {
          int32_t ti = ops_in(c, n, i), cnt;
          oshape si;
          if (static_shape(c, ti, &si) == 0) continue; /* an empty input adds nothing */
          const pval *vi = ops_val(c, ti, &cnt);
          if (!vi || static_shape(c, ti, &si) != cnt || si.rank != os.rank) return 0;
          int64_t blk = si.d[ax] * inner;
          if (p + blk > ne) return 0;
          memcpy(r + p, vi + o * blk, (size_t)blk * sizeof *r);
          p += blk;
        }
      if (p != ne) return 0;
      break;
    }
    case GOPT_OP_SLICE: {
      v0 = ops_val(c, t0, &n0);
      if (!v0 || static_shape(c, t0, &s0) != n0 || s0.rank != os.rank) return 0;
      int64_t st[GOPT_MAX_RANK], en[GOPT_MAX_RANK], ax[GOPT_MAX_RANK], sp[GOPT_MAX_RANK];
      int64_t start[GOPT_MAX_RANK], step[GOPT_MAX_RANK];
      int p1, p2, p3, p4, newf = c->opset >= 10;
      int ks = ops_attr_or_input_ints(c, n, "starts", 1, newf, st, GOPT_MAX_RANK, &p1);
      int ke = ops_attr_or_input_ints(c, n, "ends", 2, newf, en, GOPT_MAX_RANK, &p2);
      int ka = ops_attr_or_input_ints(c, n, "axes", 3, newf, ax, GOPT_MAX_RANK, &p3);
      int kp = newf ? ops_attr_or_input_ints(c, n, "steps", 4, 1, sp, GOPT_MAX_RANK, &p4) : (p4 = 0, 0);
      if (ks < 0 || ke != ks || ka < 0 || kp < 0) return 0;
      if (!p3) { ka = ks; for (int j = 0; j < ks; j++) ax[j] = j; }
      if (!p4 || kp == 0) { kp = ks; for (int j = 0; j < ks; j++) sp[j] = 1; }
      if (ka != ks || kp != ks) return 0;
      for (int j = 0; j < s0.rank; j++) { start[j] = 0; step[j] = 1; }
      for (int j = 0; j < ks; j++) {
        int64_t a = ax[j] < 0 ? ax[j] + s0.rank : ax[j], d = s0.d[a], s = st[j];
        if (a < 0 || a >= s0.rank || sp[j] == 0) return 0;
        if (s < -d) s = -d - 1;
        if (s > d) s = d;
        if (s < 0) s += d;
        if (sp[j] > 0) s = s < 0 ? 0 : s > d ? d : s;
        else s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
        start[a] = s;
        step[a] = sp[j];
      }
      for (int64_t i = 0; i < ne; i++) {
        int64_t f = i, idx = 0, stride = 1;
        for (int j = os.rank - 1; j >= 0; j--) {
          int64_t oi = f % os.d[j];
          f /= os.d[j];
          int64_t ii = start[j] + oi * step[j];
          if (ii < 0 || ii >= s0.d[j]) return 0;
          idx += ii * stride;
          stride *= s0.d[j];
        }
        r[i] = v0[idx];
      }
      break;
    }
    case GOPT_OP_TRANSPOSE: {
      v0 = ops_val(c, t0, &n0);
      if (!v0 || static_shape(c, t0, &s0) != n0 || s0.rank != os.rank) return 0;
      size_t k = 0;
      const int64_t *perm = gopt_node_get_ints(g, n, "perm", &k);
      int64_t istr[GOPT_MAX_RANK], acc = 1;
      for (int j = s0.rank - 1; j >= 0; j--) { istr[j] = acc; acc *= s0.d[j]; }
      for (int64_t i = 0; i < ne; i++) {
        int64_t f = i, idx = 0;
        for (int j = os.rank - 1; j >= 0; j--) {
          int64_t oi = f % os.d[j];
          f /= os.d[j];
          int64_t a = perm && (int)k == os.rank ? perm[j] : os.rank - 1 - j;
          if (a < 0) a += os.rank;
          idx += oi * istr[a];
        }
        r[i] = v0[idx];
      }
      break;
    }
    case GOPT_OP_CONSTANT_OF_SHAPE: {
      pval fillv = pv_conc_f(0.0);
      fillv.i = 0;
      const gopt_attr *a = gopt_node_attr(g, n, "value");
      if (a && a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) {
        v0 = ops_val(c, a->v.tensor, &n0);
        if (!v0 || n0 != 1) return 0;
        fillv = v0[0];
      }
      for (int64_t i = 0; i < ne; i++) r[i] = fillv;
      break;
    }
    case GOPT_OP_RANGE: {
      double f[3];
      if (ops_in_floats(c, n, 0, &f[0], 1) != 1 || ops_in_floats(c, n, 1, &f[1], 1) != 1 ||
          ops_in_floats(c, n, 2, &f[2], 1) != 1)
        return 0;
      for (int64_t i = 0; i < ne; i++) {
        if (ops_is_float_dtype(dto)) r[i] = pv_conc_f(f[0] + (double)i * f[2]);
        else {
          int64_t x = pv_f2i(f[0] + (double)i * f[2]);
          if (x == INT64_MIN) return 0; /* not representable: leave the value untracked */
          r[i] = pv_conc_i(x);
        }
      }
      break;
    }
    case GOPT_OP_SCATTER_ND: { /* masks built by assignment: data with updates at the indices */
      v0 = ops_val(c, t0, &n0);
      v2 = ops_val(c, t2, &n2);
      int64_t ix[OPS_MAX_VALS];
      int ni = ops_in_ints(c, n, 1, ix, OPS_MAX_VALS);
      if (!v0 || !v2 || ni < 0 || static_shape(c, t0, &s0) != n0 || n0 != ne ||
          static_shape(c, t1, &s1) != ni || s1.rank < 1 || static_shape(c, t2, &s2) != n2)
        return 0;
      if (strcmp(gopt_node_get_string(g, n, "reduction", "none"), "none")) return 0;
      int64_t kk = s1.d[s1.rank - 1], tuples = kk ? ni / kk : 0, slice = 1;
      if (kk < 1 || kk > s0.rank) return 0;
      for (int j = (int)kk; j < s0.rank; j++) slice *= s0.d[j];
      if (tuples * slice != n2) return 0;
      memcpy(r, v0, (size_t)ne * sizeof *r);
      for (int64_t q = 0; q < tuples; q++) {
        int64_t off = 0;
        for (int j = 0; j < kk; j++) {
          int64_t id = ix[q * kk + j] < 0 ? ix[q * kk + j] + s0.d[j] : ix[q * kk + j];
          if (id < 0 || id >= s0.d[j]) return 0;
          off = off * s0.d[j] + id;
        }
        for (int64_t e = 0; e < slice; e++) r[off * slice + e] = v2[q * slice + e];
      }
      break;
    }
    case GOPT_OP_TRILU: {
      v0 = ops_val(c, t0, &n0);
      int64_t kk = 0;
      if (!v0 || static_shape(c, t0, &s0) != n0 || n0 != ne || s0.rank < 2) return 0;
      if (t1 >= 0 && ops_in_ints(c, n, 1, &kk, 1) != 1) return 0;
      int up = (int)gopt_node_get_int(g, n, "upper", 1);
      int64_t R = s0.d[s0.rank - 2], C = s0.d[s0.rank - 1];
      for (int64_t i = 0; i < ne; i++) {
        int64_t col = i % C, row = (i / C) % R;
        int keep = up ? col - row >= kk : col - row <= kk;
        r[i] = keep ? v0[i] : (fl0 ? pv_conc_f(0.0) : pv_conc_i(0));
      }
      break;
    }
    case GOPT_OP_REDUCE_PROD: case GOPT_OP_REDUCE_SUM: case GOPT_OP_REDUCE_MAX: case GOPT_OP_REDUCE_MIN: {
      v0 = ops_val(c, t0, &n0);
      if (!v0 || static_shape(c, t0, &s0) != n0) return 0;
      int64_t axes[GOPT_MAX_RANK];
      int present;
      int from_input = op == GOPT_OP_REDUCE_SUM ? c->opset >= 13 : c->opset >= 18;
      int k = ops_attr_or_input_ints(c, n, "axes", 1, from_input, axes, GOPT_MAX_RANK, &present);
      if (k < 0) return 0;
      unsigned char red[GOPT_MAX_RANK] = {0};
      if (k == 0) {
        if (from_input && gopt_node_get_int(g, n, "noop_with_empty_axes", 0)) {
          memcpy(r, v0, (size_t)ne * sizeof *r);
          break;
        }
        memset(red, 1, sizeof red);
      }
      for (int j = 0; j < k; j++) {
        int64_t a = axes[j] < 0 ? axes[j] + s0.rank : axes[j];
        if (a < 0 || a >= s0.rank) return 0;
        red[a] = 1;
      }
      int first[OPS_MAX_VALS] = {0};
      for (int64_t i = 0; i < ne; i++) first[i] = 1;
      for (int64_t i = 0; i < n0; i++) {
        /* output flat index of input element i */
        int64_t f = i, o = 0, ostr = 1;
        for (int j = s0.rank - 1; j >= 0; j--) {
          int64_t ii = f % s0.d[j];
          f /= s0.d[j];
          if (red[j]) continue;
          o += ii * ostr;
          ostr *= s0.d[j];
        }
        if (o >= ne) return 0;
        if (first[o]) { r[o] = v0[i]; first[o] = 0; continue; }
        int bop = op == GOPT_OP_REDUCE_PROD ? GOPT_OP_MUL : op == GOPT_OP_REDUCE_SUM ? GOPT_OP_ADD
                  : op == GOPT_OP_REDUCE_MAX ? GOPT_OP_MAX : GOPT_OP_MIN;
        pval acc = r[o];
        r[o] = pv_bin(c, bop, &acc, &v0[i], fl0, 0);
      }
      for (int64_t i = 0; i < ne; i++)
        if (first[i]) r[i] = op == GOPT_OP_REDUCE_PROD ? pv_conc_i(1) : pv_conc_i(0);
      if (fl0)
        for (int64_t i = 0; i < ne; i++)
          if (first[i]) r[i].f = (double)r[i].i;
      break;
    }
    default:
      return 0;
  }
  /* keep the value only when something about it is known */
  int any = 0;
  for (int64_t i = 0; i < ne; i++)
    if (r[i].s != PV_UNK) any = 1;
  if (!any) return 0;
  return ops_set_val(c, out, r, (int32_t)ne);
}

int ops_prop_values(ictx *c, int32_t n) {
  int op = c->g->nodes.a[n].op;
  if (c->g->nodes.a[n].n_out < 1) return 0;
  int32_t out = ops_out(c, n, 0);
  if (out < 0) return 0;
  int dt = c->g->tensors.a[out].dtype;
  /* Values are tracked for integer/bool tensors; float ones only where the inputs are constants
   * or shape-derived (Cast to float in resize-size computations). */
  if (!ops_is_int_dtype(dt) && !ops_is_float_dtype(dt)) return 0;
  return prop(c, n, op);
}
