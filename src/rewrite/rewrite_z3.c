/* rewrite_z3.c: formal verification of generated rules with Z3, as TASO does: tensors are one
 * uninterpreted sort, each operator an uninterpreted function, and the operators' algebra is given
 * as universally quantified axioms (commutativity, associativity, distributivity and linearity of
 * matmul, transpose identities, concat/split relations, elementwise ops over concat and split;
 * for rules with convolutions or scalar Muls, TASO's convolution axioms: linearity in the input
 * and in the weight, scalar Mul through conv, concat and split, conv over a concat of weights or
 * of input channels, a split of a conv's output channels, a grouped conv as the concat of its
 * groups' convs). Gemm is MatMul of its (transposed) operands plus its bias. BatchNormalization
 * (inference) is a function of the input and its four parameters: it commutes with a batch concat
 * and split, and is a per-channel affine map (a channel scale, linear in the input, plus a shift)
 * whose scale folds into a conv's weight (TASO's conv + BN fusion). Reshape to a target s
 * commutes with elementwise ops, Relu and scalar Mul, and is idempotent.
 * A rule is proved when "some source output differs from its target output" is unsatisfiable
 * together with the axioms within the time limit. The axioms ignore shapes (TASO's carry them), so
 * a proof is only accepted after the rule passed numerical verification. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <z3.h>

#include "rewrite/rewrite_internal.h"

/* Conv variants with axioms ("same" pads): kernels 1x1, 3x3, 1x3 (stride and dilation 1), 3x3
 * with stride 2, 3x3 with dilation 2, each with 1 or 2 groups (variant + ZK_G2). The axioms hold
 * for any stride and dilation; each variant is its own function. */
enum { ZK_1x1, ZK_3x3, ZK_1x3, ZK_3x3S2, ZK_3x3D2, ZK_G2, ZK_N = 2 * ZK_G2 };

typedef struct zc {
  Z3_context c;
  Z3_sort T;
  Z3_func_decl M, A, X, R, Tr, C0, C1, S[2][2]; /* S[axis][half] */
  Z3_func_decl SM, K[ZK_N];                     /* scalar Mul, conv variants */
  Z3_func_decl BN, CH, BSC, BSH, WS, RS;        /* BN; its affine form; conv weight scale; Reshape */
} zc;

static Z3_ast ap1(zc *z, Z3_func_decl f, Z3_ast a) { return Z3_mk_app(z->c, f, 1, &a); }
static Z3_ast ap2(zc *z, Z3_func_decl f, Z3_ast a, Z3_ast b) {
  Z3_ast x[2] = {a, b};
  return Z3_mk_app(z->c, f, 2, x);
}

static void axiom(zc *z, Z3_solver s, Z3_ast *v, unsigned nv, Z3_ast lhs, Z3_ast rhs) {
  Z3_app bound[8];
  for (unsigned i = 0; i < nv; i++) bound[i] = Z3_to_app(z->c, v[i]);
  Z3_ast body = Z3_mk_eq(z->c, lhs, rhs);
  Z3_solver_assert(z->c, s, Z3_mk_forall_const(z->c, 0, nv, bound, 0, NULL, body));
}

/* Four tensor constants named <prefix>0..3 for an axiom's bound variables. */
static void bound_vars(zc *z, char prefix, Z3_ast *v) {
  for (int i = 0; i < 4; i++) {
    char n[16];
    snprintf(n, sizeof n, "%c%d", prefix, i);
    v[i] = Z3_mk_const(z->c, Z3_mk_string_symbol(z->c, n), z->T);
  }
}

/* The base axioms; mat = 0 leaves out those of MatMul and Transpose (conv rules have neither). */
static void axioms(zc *z, Z3_solver s, int mat) {
  Z3_ast v[4];
  bound_vars(z, 'v', v);
  Z3_ast a = v[0], b = v[1], c = v[2], d = v[3];
  Z3_func_decl ew[2] = {z->A, z->X};
  for (int i = 0; i < 2; i++) {
    axiom(z, s, v, 2, ap2(z, ew[i], a, b), ap2(z, ew[i], b, a));
    axiom(z, s, v, 3, ap2(z, ew[i], ap2(z, ew[i], a, b), c), ap2(z, ew[i], a, ap2(z, ew[i], b, c)));
  }
  if (mat) {
    axiom(z, s, v, 3, ap2(z, z->M, ap2(z, z->M, a, b), c), ap2(z, z->M, a, ap2(z, z->M, b, c)));
    axiom(z, s, v, 3, ap2(z, z->M, a, ap2(z, z->A, b, c)), ap2(z, z->A, ap2(z, z->M, a, b), ap2(z, z->M, a, c)));
    axiom(z, s, v, 3, ap2(z, z->M, ap2(z, z->A, a, b), c), ap2(z, z->A, ap2(z, z->M, a, c), ap2(z, z->M, b, c)));
  }
  axiom(z, s, v, 3, ap2(z, z->X, a, ap2(z, z->A, b, c)), ap2(z, z->A, ap2(z, z->X, a, b), ap2(z, z->X, a, c)));
  /* transpose */
  if (mat) {
    axiom(z, s, v, 1, ap1(z, z->Tr, ap1(z, z->Tr, a)), a);
    axiom(z, s, v, 2, ap1(z, z->Tr, ap2(z, z->M, a, b)), ap2(z, z->M, ap1(z, z->Tr, b), ap1(z, z->Tr, a)));
    for (int i = 0; i < 2; i++)
      axiom(z, s, v, 2, ap1(z, z->Tr, ap2(z, ew[i], a, b)), ap2(z, ew[i], ap1(z, z->Tr, a), ap1(z, z->Tr, b)));
    axiom(z, s, v, 1, ap1(z, z->Tr, ap1(z, z->R, a)), ap1(z, z->R, ap1(z, z->Tr, a)));
  }
  axiom(z, s, v, 1, ap1(z, z->R, ap1(z, z->R, a)), ap1(z, z->R, a));
  /* concat and split */
  Z3_func_decl C[2] = {z->C0, z->C1};
  for (int ax = 0; ax < 2; ax++) {
    axiom(z, s, v, 2, ap1(z, z->S[ax][0], ap2(z, C[ax], a, b)), a);
    axiom(z, s, v, 2, ap1(z, z->S[ax][1], ap2(z, C[ax], a, b)), b);
    axiom(z, s, v, 1, ap2(z, C[ax], ap1(z, z->S[ax][0], a), ap1(z, z->S[ax][1], a)), a);
    /* (no concat associativity: with Split halving its input and shapes left out, it and the two
     * axioms above imply C(a, b) = a for all a, b, so every rule would be "proved") */
    for (int i = 0; i < 2; i++)
      axiom(z, s, v, 4, ap2(z, ew[i], ap2(z, C[ax], a, b), ap2(z, C[ax], c, d)),
            ap2(z, C[ax], ap2(z, ew[i], a, c), ap2(z, ew[i], b, d)));
    axiom(z, s, v, 2, ap1(z, z->R, ap2(z, C[ax], a, b)), ap2(z, C[ax], ap1(z, z->R, a), ap1(z, z->R, b)));
    if (mat)
      axiom(z, s, v, 2, ap1(z, z->Tr, ap2(z, C[ax], a, b)), ap2(z, C[1 - ax], ap1(z, z->Tr, a), ap1(z, z->Tr, b)));
    for (int h = 0; h < 2; h++) {
      for (int i = 0; i < 2; i++)
        axiom(z, s, v, 2, ap1(z, z->S[ax][h], ap2(z, ew[i], a, b)),
              ap2(z, ew[i], ap1(z, z->S[ax][h], a), ap1(z, z->S[ax][h], b)));
      axiom(z, s, v, 1, ap1(z, z->S[ax][h], ap1(z, z->R, a)), ap1(z, z->R, ap1(z, z->S[ax][h], a)));
      if (mat)
        axiom(z, s, v, 1, ap1(z, z->S[ax][h], ap1(z, z->Tr, a)), ap1(z, z->Tr, ap1(z, z->S[1 - ax][h], a)));
    }
  }
  if (mat) { /* (in the order the shipped 2-D rules were proved with) */
    axiom(z, s, v, 3, ap2(z, z->M, ap2(z, z->C0, a, b), c), ap2(z, z->C0, ap2(z, z->M, a, c), ap2(z, z->M, b, c)));
    axiom(z, s, v, 3, ap2(z, z->M, a, ap2(z, z->C1, b, c)), ap2(z, z->C1, ap2(z, z->M, a, b), ap2(z, z->M, a, c)));
    axiom(z, s, v, 4, ap2(z, z->M, ap2(z, z->C1, a, b), ap2(z, z->C0, c, d)),
          ap2(z, z->A, ap2(z, z->M, a, c), ap2(z, z->M, b, d)));
  }
  axiom(z, s, v, 4, ap2(z, z->C1, ap2(z, z->C0, a, b), ap2(z, z->C0, c, d)),
        ap2(z, z->C0, ap2(z, z->C1, a, c), ap2(z, z->C1, b, d)));
  if (!mat) return;
  for (int h = 0; h < 2; h++) {
    axiom(z, s, v, 2, ap1(z, z->S[0][h], ap2(z, z->M, a, b)), ap2(z, z->M, ap1(z, z->S[0][h], a), b));
    axiom(z, s, v, 2, ap1(z, z->S[1][h], ap2(z, z->M, a, b)), ap2(z, z->M, a, ap1(z, z->S[1][h], b)));
  }
}


/* TASO's convolution axioms for the conv variants in mask `kmask` (and scalar Mul). */
static void conv_axioms(zc *z, Z3_solver s, int kmask) {
  Z3_ast v[4];
  bound_vars(z, 'k', v);
  Z3_ast a = v[0], b = v[1], w = v[2], u = v[3]; /* every axiom binds all four */
  Z3_func_decl SM = z->SM, A = z->A, C[2] = {z->C0, z->C1};
  /* scalar Mul: distributes over Add, commutes with concat, split and another scalar Mul */
  axiom(z, s, v, 4, ap2(z, SM, ap2(z, A, a, b), w), ap2(z, A, ap2(z, SM, a, w), ap2(z, SM, b, w)));
  axiom(z, s, v, 4, ap2(z, SM, a, ap2(z, A, w, u)), ap2(z, A, ap2(z, SM, a, w), ap2(z, SM, a, u)));
  axiom(z, s, v, 4, ap2(z, SM, ap2(z, SM, a, w), u), ap2(z, SM, ap2(z, SM, a, u), w));
  for (int ax = 0; ax < 2; ax++) {
    axiom(z, s, v, 4, ap2(z, SM, ap2(z, C[ax], a, b), w), ap2(z, C[ax], ap2(z, SM, a, w), ap2(z, SM, b, w)));
    for (int h = 0; h < 2; h++)
      axiom(z, s, v, 4, ap1(z, z->S[ax][h], ap2(z, SM, a, w)), ap2(z, SM, ap1(z, z->S[ax][h], a), w));
  }
  for (int k = 0; k < ZK_N; k++) {
    if (!(kmask & (1 << k))) continue;
    Z3_func_decl K = z->K[k];
    /* linear in the input and in the weight; scalars move through */
    axiom(z, s, v, 4, ap2(z, K, ap2(z, A, a, b), w), ap2(z, A, ap2(z, K, a, w), ap2(z, K, b, w)));
    axiom(z, s, v, 4, ap2(z, K, a, ap2(z, A, w, u)), ap2(z, A, ap2(z, K, a, w), ap2(z, K, a, u)));
    axiom(z, s, v, 4, ap2(z, K, ap2(z, SM, a, u), w), ap2(z, SM, ap2(z, K, a, w), u));
    axiom(z, s, v, 4, ap2(z, K, a, ap2(z, SM, w, u)), ap2(z, SM, ap2(z, K, a, w), u));
    /* over a batch concat / split */
    axiom(z, s, v, 4, ap2(z, K, ap2(z, z->C0, a, b), w), ap2(z, z->C0, ap2(z, K, a, w), ap2(z, K, b, w)));
    for (int h = 0; h < 2; h++)
      axiom(z, s, v, 4, ap1(z, z->S[0][h], ap2(z, K, a, w)), ap2(z, K, ap1(z, z->S[0][h], a), w));
    if (k >= ZK_G2) {
      /* a 2-group conv is the concat of its groups' convs */
      Z3_func_decl K1 = z->K[k - ZK_G2];
      axiom(z, s, v, 4, ap2(z, K, ap2(z, z->C1, a, b), ap2(z, z->C0, w, u)),
            ap2(z, z->C1, ap2(z, K1, a, w), ap2(z, K1, b, u)));
      continue;
    }
    /* group 1: output channels come from weight rows; input channels pair with weight columns */
    axiom(z, s, v, 4, ap2(z, K, a, ap2(z, z->C0, w, u)), ap2(z, z->C1, ap2(z, K, a, w), ap2(z, K, a, u)));
    axiom(z, s, v, 4, ap2(z, K, ap2(z, z->C1, a, b), ap2(z, z->C1, w, u)), ap2(z, A, ap2(z, K, a, w), ap2(z, K, b, u)));
    for (int h = 0; h < 2; h++)
      axiom(z, s, v, 4, ap1(z, z->S[1][h], ap2(z, K, a, w)), ap2(z, K, a, ap1(z, z->S[0][h], w)));
  }
}

static Z3_ast bn5(zc *z, Z3_ast a, const Z3_ast *p) {
  Z3_ast x[5] = {a, p[0], p[1], p[2], p[3]};
  return Z3_mk_app(z->c, z->BN, 5, x);
}

/* BatchNormalization's axioms (its parameters are p0..p3): a batch concat and split pass through
 * it; it is a per-channel affine map, CH(a, BSC(P)) + BSH(P), with CH linear in a and commuting
 * with the batch concat / split, and a channel scale of a conv's output is the conv with the
 * scaled weight (WS): together TASO's conv + BN folding. kmask: the conv variants present. */
static void bn_axioms(zc *z, Z3_solver s, int kmask) {
  Z3_ast v[8];
  bound_vars(z, 'b', v);
  bound_vars(z, 'p', v + 4);
  Z3_ast a = v[0], b = v[1], w = v[2], *p = v + 4;
  Z3_ast p4[4] = {p[0], p[1], p[2], p[3]};
  Z3_ast sc = Z3_mk_app(z->c, z->BSC, 4, p4), sh = Z3_mk_app(z->c, z->BSH, 4, p4);
  Z3_ast ab[6] = {a, b, p[0], p[1], p[2], p[3]};
  axiom(z, s, ab, 6, bn5(z, ap2(z, z->C0, a, b), p), ap2(z, z->C0, bn5(z, a, p), bn5(z, b, p)));
  for (int h = 0; h < 2; h++) axiom(z, s, ab, 6, ap1(z, z->S[0][h], bn5(z, a, p)), bn5(z, ap1(z, z->S[0][h], a), p));
  axiom(z, s, ab, 6, bn5(z, a, p), ap2(z, z->A, ap2(z, z->CH, a, sc), sh));
  Z3_ast abw[3] = {a, b, w};
  axiom(z, s, abw, 3, ap2(z, z->CH, ap2(z, z->A, a, b), w), ap2(z, z->A, ap2(z, z->CH, a, w), ap2(z, z->CH, b, w)));
  axiom(z, s, abw, 3, ap2(z, z->CH, ap2(z, z->C0, a, b), w), ap2(z, z->C0, ap2(z, z->CH, a, w), ap2(z, z->CH, b, w)));
  for (int k = 0; k < ZK_N; k++)
    if (kmask & (1 << k))
      axiom(z, s, abw, 3, ap2(z, z->CH, ap2(z, z->K[k], a, w), b), ap2(z, z->K[k], a, ap2(z, z->WS, w, b)));
}

/* Reshape's axioms (target s): elementwise ops, Relu and a scalar Mul commute with it; a
 * reshape to the shape a tensor already has is the identity, so reshaping twice to s is once. */
static void reshape_axioms(zc *z, Z3_solver s) {
  Z3_ast v[4];
  bound_vars(z, 'r', v);
  Z3_ast a = v[0], b = v[1], t = v[2];
  Z3_func_decl bin[3] = {z->A, z->X, z->SM};
  for (int i = 0; i < 3; i++)
    axiom(z, s, v, 3, ap2(z, z->RS, ap2(z, bin[i], a, b), t),
          ap2(z, bin[i], ap2(z, z->RS, a, t), i == 2 ? b : ap2(z, z->RS, b, t)));
  Z3_ast at[2] = {a, t};
  axiom(z, s, at, 2, ap2(z, z->RS, ap1(z, z->R, a), t), ap1(z, z->R, ap2(z, z->RS, a, t)));
  axiom(z, s, at, 2, ap2(z, z->RS, ap2(z, z->RS, a, t), t), ap2(z, z->RS, a, t));
}

/* The conv variant of pattern op o (-1: no axioms for it). */
static int conv_variant(const rw_pop *o) {
  if (!o->attrs) return -1;
  json_t *ks = json_object_get(o->attrs, "kernel_shape"), *g = json_object_get(o->attrs, "group");
  json_t *st = json_object_get(o->attrs, "strides"), *dl = json_object_get(o->attrs, "dilations");
  json_t *pd = json_object_get(o->attrs, "pads");
  if (json_array_size(ks) != 2 || json_array_size(pd) != 4) return -1;
  int kh = (int)json_integer_value(json_array_get(ks, 0)), kw = (int)json_integer_value(json_array_get(ks, 1));
  /* one stride and one dilation for both axes (1 when absent) */
  int s0 = st ? (int)json_integer_value(json_array_get(st, 0)) : 1, d0 = dl ? (int)json_integer_value(json_array_get(dl, 0)) : 1;
  for (size_t i = 0; i < 2; i++) {
    if ((st && json_integer_value(json_array_get(st, i)) != s0) || (dl && json_integer_value(json_array_get(dl, i)) != d0))
      return -1;
    int k = i ? kw : kh;
    if (json_integer_value(json_array_get(pd, i)) != d0 * (k / 2) || json_integer_value(json_array_get(pd, i + 2)) != d0 * (k / 2))
      return -1;
  }
  int grp = g ? (int)json_integer_value(g) : 1;
  int k = kh == 1 && kw == 1 ? ZK_1x1 : kh == 3 && kw == 3 ? ZK_3x3 : kh == 1 && kw == 3 ? ZK_1x3 : -1;
  if (s0 != 1 || d0 != 1) k = k == ZK_3x3 && s0 == 2 && d0 == 1 ? ZK_3x3S2 : k == ZK_3x3 && s0 == 1 && d0 == 2 ? ZK_3x3D2 : -1;
  if (k < 0 || grp < 1 || grp > 2) return -1;
  return grp == 2 ? k + ZK_G2 : k;
}

/* Pattern reference ref is a scalar: a rank-0 variable, or an Add / Mul of scalars. */
static int is_scalar(const rw_rule *r, const rw_pattern *p, int ref) {
  if (!RW_REF_IS_OP(ref)) return r->var_rank[ref] == 0;
  const rw_pop *o = &p->ops[RW_REF_OPI(ref)];
  if ((strcmp(o->type, "Add") && strcmp(o->type, "Mul")) || o->n_in != 2) return 0;
  return is_scalar(r, p, o->in[0]) && is_scalar(r, p, o->in[1]);
}

/* A Mul of a non-scalar by a scalar (its second input). */
static int scalar_mul(const rw_rule *r, const rw_pattern *p, const rw_pop *o) {
  return !strcmp(o->type, "Mul") && o->n_in == 2 && is_scalar(r, p, o->in[1]) && !is_scalar(r, p, o->in[0]);
}

/* Term of output k of pattern op i. */
static Z3_ast term(zc *z, const rw_rule *r, const rw_pattern *p, const Z3_ast *vars, int ref) {
  if (!RW_REF_IS_OP(ref)) return vars[ref];
  const rw_pop *o = &p->ops[RW_REF_OPI(ref)];
  Z3_ast a = term(z, r, p, vars, o->in[0]);
  Z3_ast b = o->n_in > 1 ? term(z, r, p, vars, o->in[1]) : NULL;
  if ((o->n_in > 0 && !a) || (o->n_in > 1 && !b)) return NULL;
  json_t *ax = o->attrs ? json_object_get(o->attrs, "axis") : NULL;
  int axis = ax ? (int)json_integer_value(ax) : 0;
  if (!strcmp(o->type, "MatMul")) return ap2(z, z->M, a, b);
  if (!strcmp(o->type, "Gemm")) {
    /* MatMul of the (transposed) operands, plus the bias; alpha / beta have no axioms */
    if (json_object_get(o->attrs, "alpha") || json_object_get(o->attrs, "beta")) return NULL;
    json_t *ta = json_object_get(o->attrs, "transA"), *tb = json_object_get(o->attrs, "transB");
    Z3_ast m = ap2(z, z->M, ta && json_integer_value(ta) ? ap1(z, z->Tr, a) : a,
                   tb && json_integer_value(tb) ? ap1(z, z->Tr, b) : b);
    if (o->n_in < 3) return m;
    Z3_ast c = term(z, r, p, vars, o->in[2]);
    return c ? ap2(z, z->A, m, c) : NULL;
  }
  if (!strcmp(o->type, "Conv")) {
    int k = conv_variant(o);
    return k < 0 || o->n_in != 2 ? NULL : ap2(z, z->K[k], a, b);
  }
  if (!strcmp(o->type, "BatchNormalization")) {
    /* epsilon 1e-5 (the generator's); momentum / training_mode change nothing at inference but
     * are left to the numeric check */
    json_t *eps = o->attrs ? json_object_get(o->attrs, "epsilon") : NULL;
    if (o->n_in != 5 || json_object_size(o->attrs) != (eps ? 1u : 0u) || (eps && fabs(json_number_value(eps) - 1e-5) > 1e-9))
      return NULL;
    Z3_ast pr[4];
    for (int k = 0; k < 4; k++)
      if (!(pr[k] = term(z, r, p, vars, o->in[k + 1]))) return NULL;
    return bn5(z, a, pr);
  }
  if (!strcmp(o->type, "Reshape"))
    return o->n_in == 2 && json_object_size(o->attrs) == 0 ? ap2(z, z->RS, a, b) : NULL;
  if (scalar_mul(r, p, o)) return ap2(z, z->SM, a, b);
  if (!strcmp(o->type, "Add")) return ap2(z, z->A, a, b);
  if (!strcmp(o->type, "Mul")) return ap2(z, z->X, a, b);
  if (!strcmp(o->type, "Relu")) return ap1(z, z->R, a);
  if (!strcmp(o->type, "Transpose")) return ap1(z, z->Tr, a);
  if (!strcmp(o->type, "Concat")) return ap2(z, axis ? z->C1 : z->C0, a, b);
  if (!strcmp(o->type, "Split")) return ap1(z, z->S[axis ? 1 : 0][RW_REF_OUTK(ref)], a);
  return NULL;
}

/* 1 when proved, 0 when not (why says: disproved, unknown / timeout, or unsupported op). */
static int prove_here(const rw_rule *r, int timeout_ms, char *why, size_t n) {
  Z3_config cfg = Z3_mk_config();
  zc z;
  z.c = Z3_mk_context(cfg);
  Z3_del_config(cfg);
  z.T = Z3_mk_uninterpreted_sort(z.c, Z3_mk_string_symbol(z.c, "Tensor"));
  Z3_sort t2[2] = {z.T, z.T};
  const char *n2[] = {"matmul", "ewadd", "ewmul", "concat0", "concat1"};
  Z3_func_decl *f2[] = {&z.M, &z.A, &z.X, &z.C0, &z.C1};
  for (int i = 0; i < 5; i++) *f2[i] = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, n2[i]), 2, t2, z.T);
  z.R = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "relu"), 1, t2, z.T);
  z.Tr = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "transpose"), 1, t2, z.T);
  z.SM = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "smul"), 2, t2, z.T);
  Z3_sort t5[5] = {z.T, z.T, z.T, z.T, z.T};
  z.BN = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "batchnorm"), 5, t5, z.T);
  z.CH = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "chmul"), 2, t2, z.T);
  z.BSC = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "bn_scale"), 4, t5, z.T);
  z.BSH = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "bn_shift"), 4, t5, z.T);
  z.WS = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "weight_scale"), 2, t2, z.T);
  z.RS = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, "reshape"), 2, t2, z.T);
  for (int k = 0; k < ZK_N; k++) {
    char nm[16];
    snprintf(nm, sizeof nm, "conv%d", k);
    z.K[k] = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, nm), 2, t2, z.T);
  }
  for (int ax = 0; ax < 2; ax++)
    for (int h = 0; h < 2; h++) {
      char nm[16];
      snprintf(nm, sizeof nm, "split%d_%d", ax, h);
      z.S[ax][h] = Z3_mk_func_decl(z.c, Z3_mk_string_symbol(z.c, nm), 1, t2, z.T);
    }
  Z3_solver s = Z3_mk_solver(z.c);
  Z3_solver_inc_ref(z.c, s);
  Z3_params p = Z3_mk_params(z.c);
  Z3_params_inc_ref(z.c, p);
  /* a deterministic resource limit (the same rules are proved on every machine), and a time limit
   * as a backstop */
  Z3_params_set_uint(z.c, p, Z3_mk_string_symbol(z.c, "rlimit"), 3000000u);
  Z3_params_set_uint(z.c, p, Z3_mk_string_symbol(z.c, "timeout"), (unsigned)timeout_ms);
  Z3_solver_set_params(z.c, s, p);
  /* the conv axioms only where the rule has a Conv or a scalar Mul (more quantifiers slow every
   * other proof down) */
  int kmask = 0, conv_rule = 0, bn = 0, rsh = 0;
  for (int side = 0; side < 2; side++) {
    const rw_pattern *pt = side ? &r->dst : &r->src;
    for (int i = 0; i < pt->n_ops; i++) {
      bn |= !strcmp(pt->ops[i].type, "BatchNormalization");
      rsh |= !strcmp(pt->ops[i].type, "Reshape");
      int k = strcmp(pt->ops[i].type, "Conv") ? -1 : conv_variant(&pt->ops[i]);
      if (k >= 0) kmask |= 1 << k | (k >= ZK_G2 ? 1 << (k - ZK_G2) : 0);
      conv_rule |= k >= 0 || scalar_mul(r, pt, &pt->ops[i]);
    }
  }
  axioms(&z, s, !conv_rule);
  if (conv_rule) conv_axioms(&z, s, kmask);
  if (bn) bn_axioms(&z, s, kmask);
  if (rsh) reshape_axioms(&z, s);
  Z3_ast vars[RW_MAX_VARS];
  for (int v = 0; v < r->n_vars; v++) {
    char nm[16];
    snprintf(nm, sizeof nm, "x%d", v);
    vars[v] = Z3_mk_const(z.c, Z3_mk_string_symbol(z.c, nm), z.T);
  }
  Z3_ast diff[RW_MAX_OUT];
  int ok = 1;
  for (int k = 0; k < r->src.n_out && ok; k++) {
    Z3_ast ls = term(&z, r, &r->src, vars, r->src.out[k]), rs = term(&z, r, &r->dst, vars, r->dst.out[k]);
    if (!ls || !rs) ok = 0;
    else diff[k] = Z3_mk_not(z.c, Z3_mk_eq(z.c, ls, rs));
  }
  int proved = 0;
  if (!ok) {
    snprintf(why, n, "an op has no axioms");
  } else {
    Z3_solver_assert(z.c, s, Z3_mk_or(z.c, (unsigned)r->src.n_out, diff));
    Z3_lbool res = Z3_solver_check(z.c, s);
    proved = res == Z3_L_FALSE;
    if (!proved) snprintf(why, n, "%s", res == Z3_L_TRUE ? "not implied by the axioms (Z3 found a model)" : "unknown within the resource limit");
  }
  Z3_params_dec_ref(z.c, p);
  Z3_solver_dec_ref(z.c, s);
  Z3_del_context(z.c);
  return proved;
}

/* Z3 may ignore its limits deep inside quantifier instantiation (seen: 4 GiB and minutes on one
 * rule), so each proof runs in a child process with an address-space limit (1 GiB) and is killed
 * after the time limit; the child's exit status is the verdict. */
int rw_z3_prove(const rw_rule *r, int timeout_ms, char *why, size_t n) {
  int fds[2];
  if (pipe(fds)) return snprintf(why, n, "cannot create a pipe"), 0;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    snprintf(why, n, "cannot fork");
    return 0;
  }
  if (pid == 0) {
    close(fds[0]);
#if !defined(__SANITIZE_ADDRESS__)
    /* (AddressSanitizer reserves terabytes of address space: no limit in such builds) */
    struct rlimit rl = {1UL << 30, 1UL << 30};
    setrlimit(RLIMIT_AS, &rl);
#endif
    char msg[200] = "";
    int ok = prove_here(r, timeout_ms, msg, sizeof msg);
    if (write(fds[1], msg, strlen(msg)) < 0) ok = 0;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  int status = 0, done = 0;
  struct timespec ts = {0, 10 * 1000 * 1000};
  for (int waited = 0; waited < 3 * timeout_ms + 2000 && !done; waited += 10) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) done = 1;
    else nanosleep(&ts, NULL);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  char msg[200];
  ssize_t k = read(fds[0], msg, sizeof msg - 1);
  close(fds[0]);
  msg[k > 0 ? k : 0] = 0;
  if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  snprintf(why, n, "%s", done && WIFEXITED(status) ? msg : "Z3 ran out of its time or memory limit");
  return 0;
}
