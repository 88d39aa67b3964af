/* rewrite_gen_ops.c: the rule generator's reference evaluator (double precision, small tensors):
 * MatMul, Add, Mul, Relu, Transpose, Concat / Split on axes 0 and 1 at any rank, Conv ("same"
 * zero padding, grouped, stride and dilation 1 or 2), Mul by a scalar, Gemm (transposes, bias), BatchNormalization
 * (inference) and Reshape, and the generator's domains (operator subsets with the shapes of their
 * input variables and constant parameters). */
#include <math.h>
#include <string.h>

#include "util/util_internal.h"

#include "rewrite/rewrite_gen.h"

const char *const rw_gen_name[G_NOPS] = {"M", "A", "X", "R", "T", "C0", "C1", "S0", "S1",
                                         "K", "SM", "G", "GA", "GB", "GC", "BN", "RS"};
/* (BN and Reshape are unary in the enumeration: their other inputs are the domain's parameters) */
const int rw_gen_arity[G_NOPS] = {2, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 2, 2, 2, 3, 1, 1};
const int rw_gen_outs[G_NOPS] = {1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};

#define M2D ((1u << G_MATMUL) | (1u << G_ADD) | (1u << G_MUL) | (1u << G_RELU) | (1u << G_TRANSPOSE) | \
             (1u << G_CONCAT0) | (1u << G_CONCAT1) | (1u << G_SPLIT0) | (1u << G_SPLIT1))
#define MCONV ((1u << G_ADD) | (1u << G_RELU) | (1u << G_CONCAT0) | (1u << G_CONCAT1) | \
               (1u << G_SPLIT0) | (1u << G_SPLIT1) | (1u << G_CONV))
#define MGEMM ((1u << G_MATMUL) | (1u << G_ADD) | (1u << G_TRANSPOSE) | (1u << G_GEMM) | \
               (1u << G_GEMM_TA) | (1u << G_GEMM_TB) | (1u << G_GEMM_C))
#define MRESHAPE ((1u << G_ADD) | (1u << G_MUL) | (1u << G_RELU) | (1u << G_RESHAPE))
#define X4(c, s) {1, c, s, s}
#define W4(o, i, kh, kw) {o, i, kh, kw}

/* Conv domains: an activation [1, C, H, W] and two weights of one kernel (1x1, 3x3, 1x3, grouped
 * 3x3), two activations and a weight, an activation, a weight and a scalar. Gemm: 2-D matrices.
 * BN: the conv operators and BatchNormalization on two activations and a weight, with one
 * parameter set [C]. Reshape: elementwise ops and Reshape to one constant target, on matrices
 * ([4, 4] -> [2, 8]) and on activations (flattening H and W: [1, 4, 4, 4] -> [1, 4, 16]).
 * Strided / dilated: the 3x3 conv domain with stride 2 (pads 1) or dilation 2 (pads 2). */
static const gdomain k_domains[] = {
    {"gen", M2D, {2, 2, 2}, {{{4, 4}, {4, 4}, {4, 4}}, {{6, 6}, {6, 6}, {6, 6}}}, 0, 1},
    {"genc3", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 4, 3, 3), W4(4, 4, 3, 3)}, {X4(6, 5), W4(6, 6, 3, 3), W4(6, 6, 3, 3)}}, 1, 2},
    {"genc1", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 4, 1, 1), W4(4, 4, 1, 1)}, {X4(6, 5), W4(6, 6, 1, 1), W4(6, 6, 1, 1)}}, 1, 2},
    {"genc13", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 4, 1, 3), W4(4, 4, 1, 3)}, {X4(6, 5), W4(6, 6, 1, 3), W4(6, 6, 1, 3)}}, 1, 2},
    {"gencg", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 2, 3, 3), W4(4, 2, 3, 3)}, {X4(8, 5), W4(8, 4, 3, 3), W4(8, 4, 3, 3)}}, 1, 2},
    {"gencx", MCONV, {4, 4, 4}, {{X4(4, 4), X4(4, 4), W4(4, 4, 3, 3)}, {X4(6, 5), X4(6, 5), W4(6, 6, 3, 3)}}, 1, 2},
    {"gencs", MCONV | (1u << G_SMUL), {4, 4, 0}, {{X4(4, 4), W4(4, 4, 3, 3), {0}}, {X4(6, 5), W4(6, 6, 3, 3), {0}}}, 1, 2},
    {"geng", MGEMM, {2, 2, 2}, {{{4, 4}, {4, 4}, {4, 4}}, {{6, 6}, {6, 6}, {6, 6}}}, 1, 2},
    {"gencst", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 4, 3, 3), W4(4, 4, 3, 3)}, {X4(6, 5), W4(6, 6, 3, 3), W4(6, 6, 3, 3)}},
     1, 2, 0, 0, {0}, {{0}}, 0, 2, 1},
    {"gencdl", MCONV, {4, 4, 4}, {{X4(4, 4), W4(4, 4, 3, 3), W4(4, 4, 3, 3)}, {X4(6, 5), W4(6, 6, 3, 3), W4(6, 6, 3, 3)}},
     1, 2, 0, 0, {0}, {{0}}, 0, 1, 2},
    {"genbn", MCONV | (1u << G_BN), {4, 4, 4}, {{X4(4, 4), X4(4, 4), W4(4, 4, 3, 3)}, {X4(6, 5), X4(6, 5), W4(6, 6, 3, 3)}},
     1, 2, 1u << G_BN, 4, {4, 6}, {{0}}, 0},
    {"genr", MRESHAPE, {2, 2, 2}, {{{4, 4}, {4, 4}, {4, 4}}, {{6, 6}, {6, 6}, {6, 6}}},
     1, 2, 1u << G_RESHAPE, 1, {0}, {{2, 8}, {4, 9}}, 2},
    {"genr4", MRESHAPE, {4, 4, 4}, {{X4(4, 4), X4(4, 4), X4(4, 4)}, {X4(6, 5), X4(6, 5), X4(6, 5)}},
     1, 2, 1u << G_RESHAPE, 1, {0}, {{1, 4, 16}, {1, 6, 25}}, 3},
};

const gdomain *rw_gen_domains(int *n) {
  *n = (int)(sizeof k_domains / sizeof k_domains[0]);
  return k_domains;
}

static void copy_val(gval *o, const gval *a) {
  o->rank = a->rank;
  memcpy(o->d, a->d, sizeof o->d);
  memcpy(o->v, a->v, sizeof(double) * (size_t)gval_numel(a));
}

static int same_shape(const gval *a, const gval *b) {
  if (a->rank != b->rank) return 0;
  for (int k = 0; k < a->rank; k++)
    if (a->d[k] != b->d[k]) return 0;
  return 1;
}

/* C = op(A) op(B) (+ bias) for n x n style matrices; rank 2 only. */
static int matmul(const gval *a, int ta, const gval *b, int tb, const gval *bias, gval *out) {
  if (a->rank != 2 || b->rank != 2) return -1;
  int m = ta ? a->d[1] : a->d[0], k = ta ? a->d[0] : a->d[1];
  int k2 = tb ? b->d[1] : b->d[0], n = tb ? b->d[0] : b->d[1];
  if (k != k2 || m * n > 256) return -1;
  if (bias && (bias->rank != 2 || bias->d[0] != m || bias->d[1] != n)) return -1;
  out->rank = 2, out->d[0] = m, out->d[1] = n;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = bias ? bias->v[i * n + j] : 0;
      for (int q = 0; q < k; q++)
        s += a->v[ta ? q * a->d[1] + i : i * a->d[1] + q] * b->v[tb ? j * b->d[1] + q : q * b->d[1] + j];
      out->v[i * n + j] = s;
    }
  return 0;
}

/* Outer (dims before axis) and inner (dims after it) element counts. */
static void outer_inner(const gval *a, int axis, int *outer, int *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; k++) *outer *= a->d[k];
  for (int k = axis + 1; k < a->rank; k++) *inner *= a->d[k];
}

static int concat(const gval *a, const gval *b, int axis, gval *out) {
  if (a->rank != b->rank || a->rank <= axis) return -1;
  for (int k = 0; k < a->rank; k++)
    if (k != axis && a->d[k] != b->d[k]) return -1;
  /* the 2-D bound of the shipped rules (16 x 16); G_MAXE otherwise */
  if (gval_numel(a) + gval_numel(b) > (a->rank == 2 ? 256 : G_MAXE)) return -1;
  int outer, ia, ib;
  outer_inner(a, axis, &outer, &ia);
  ia *= a->d[axis];
  outer_inner(b, axis, &outer, &ib);
  ib *= b->d[axis];
  out->rank = a->rank;
  memcpy(out->d, a->d, sizeof out->d);
  out->d[axis] = a->d[axis] + b->d[axis];
  for (int o = 0; o < outer; o++) {
    memcpy(out->v + o * (ia + ib), a->v + o * ia, sizeof(double) * (size_t)ia);
    memcpy(out->v + o * (ia + ib) + ia, b->v + o * ib, sizeof(double) * (size_t)ib);
  }
  return 0;
}

static int split(const gval *a, int axis, gval *out) {
  if (a->rank <= axis || a->d[axis] % 2) return -1;
  int outer, inner;
  outer_inner(a, axis, &outer, &inner);
  int half = a->d[axis] / 2 * inner;
  for (int h = 0; h < 2; h++) {
    out[h].rank = a->rank;
    memcpy(out[h].d, a->d, sizeof a->d);
    out[h].d[axis] = a->d[axis] / 2;
    for (int o = 0; o < outer; o++)
      memcpy(out[h].v + o * half, a->v + o * 2 * half + h * half, sizeof(double) * (size_t)half);
  }
  return 0;
}

/* Conv of x [N, C, H, W] with w [O, C / G, kh, kw], stride st, dilation dl, zero pads dl kh / 2,
 * dl kw / 2 (odd kernels). */
static int conv(const gval *x, const gval *w, int st, int dl, gval *out, gop *o) {
  if (x->rank != 4 || w->rank != 4 || w->d[2] % 2 == 0 || w->d[3] % 2 == 0 || x->d[1] % w->d[1]) return -1;
  int n = x->d[0], c = x->d[1], h = x->d[2], wd = x->d[3], oc = w->d[0], cg = w->d[1];
  int kh = w->d[2], kw = w->d[3], g = c / cg;
  int ph = dl * (kh / 2), pw = dl * (kw / 2), ho = (h - 1) / st + 1, wo = (wd - 1) / st + 1;
  if (oc % g || (long)n * oc * ho * wo > G_MAXE) return -1;
  int ocg = oc / g;
  out->rank = 4, out->d[0] = n, out->d[1] = oc, out->d[2] = ho, out->d[3] = wo;
  for (int b = 0; b < n; b++)
    for (int q = 0; q < oc; q++) {
      int g0 = q / ocg * cg;
      for (int y = 0; y < ho; y++)
        for (int xx = 0; xx < wo; xx++) {
          double s = 0;
          for (int i = 0; i < cg; i++)
            for (int u = 0; u < kh; u++)
              for (int v = 0; v < kw; v++) {
                int yy = y * st + u * dl - ph, xv = xx * st + v * dl - pw;
                if (yy < 0 || yy >= h || xv < 0 || xv >= wd) continue;
                s += x->v[((b * c + g0 + i) * h + yy) * wd + xv] * w->v[((q * cg + i) * kh + u) * kw + v];
              }
          out->v[((b * oc + q) * ho + y) * wo + xx] = s;
        }
    }
  o->kh = (uint8_t)kh, o->kw = (uint8_t)kw, o->grp = (uint8_t)g, o->st = (uint8_t)st, o->dl = (uint8_t)dl;
  return 0;
}

/* BatchNormalization (inference) of x [N, C, ...] with per-channel scale, bias, mean, variance. */
static int batchnorm(const gval *x, const gparams *par, gval *out) {
  if (x->rank < 2 || !par || par->p[0].rank != 1 || par->p[0].d[0] != x->d[1]) return -1;
  int outer, inner, c = x->d[1];
  outer_inner(x, 1, &outer, &inner);
  copy_val(out, x);
  for (int o = 0; o < outer; o++)
    for (int q = 0; q < c; q++) {
      double a = par->p[0].v[q] / sqrt(par->p[3].v[q] + 1e-5), b = par->p[1].v[q] - par->p[2].v[q] * a;
      for (int i = 0; i < inner; i++) out->v[(o * c + q) * inner + i] = x->v[(o * c + q) * inner + i] * a + b;
    }
  return 0;
}

/* Reshape of x to the dims in par->p[0] (no 0 or -1 entries). */
static int reshape(const gval *x, const gparams *par, gval *out) {
  const gval *s = par ? &par->p[0] : NULL;
  if (!s || s->rank != 1 || s->d[0] < 1 || s->d[0] > 4) return -1;
  int n = 1;
  for (int k = 0; k < s->d[0]; k++) n *= (int)s->v[k];
  if (n != gval_numel(x)) return -1;
  copy_val(out, x);
  out->rank = s->d[0];
  for (int k = 0; k < s->d[0]; k++) out->d[k] = (int)s->v[k];
  return 0;
}

void rw_gen_params(const gdomain *dom, int set, uint64_t seed, gparams *par) {
  uint64_t s = seed;
  memset(par->p, 0, sizeof par->p[0] * (size_t)G_MAXPAR);
  par->stride = dom->conv_stride ? dom->conv_stride : 1;
  par->dil = dom->conv_dil ? dom->conv_dil : 1;
  if (dom->shape_rank) {
    par->p[0].rank = 1, par->p[0].d[0] = dom->shape_rank;
    for (int k = 0; k < dom->shape_rank; k++) par->p[0].v[k] = dom->shape[set][k];
    return;
  }
  for (int q = 0; q < dom->n_par; q++) {
    par->p[q].rank = 1, par->p[q].d[0] = dom->par_dim[set];
    for (int i = 0; i < dom->par_dim[set]; i++) {
      double u = (double)(gopt_splitmix64(&s) >> 11) * (1.0 / 9007199254740992.0);
      par->p[q].v[i] = q == 3 ? 0.5 + u : 2 * u - 1; /* a variance is positive */
    }
  }
}

int rw_gen_eval(int type, const gval *a, const gval *b, const gval *c, const gparams *par, gval *out, gop *o) {
  switch (type) {
    case G_BN: return batchnorm(a, par, out);
    case G_RESHAPE: return reshape(a, par, out);
    case G_MATMUL: return matmul(a, 0, b, 0, NULL, out);
    case G_GEMM: return matmul(a, 0, b, 0, NULL, out);
    case G_GEMM_TA: return matmul(a, 1, b, 0, NULL, out);
    case G_GEMM_TB: return matmul(a, 0, b, 1, NULL, out);
    case G_GEMM_C: return matmul(a, 0, b, 0, c, out);
    case G_ADD:
    case G_MUL:
      if (!same_shape(a, b)) return -1;
      copy_val(out, a);
      for (int i = 0; i < gval_numel(a); i++) out->v[i] = type == G_ADD ? a->v[i] + b->v[i] : a->v[i] * b->v[i];
      return 0;
    case G_SMUL:
      if (a->rank == 0 || b->rank != 0) return -1;
      copy_val(out, a);
      for (int i = 0; i < gval_numel(a); i++) out->v[i] = a->v[i] * b->v[0];
      return 0;
    case G_RELU:
      copy_val(out, a);
      for (int i = 0; i < gval_numel(a); i++) out->v[i] = a->v[i] > 0 ? a->v[i] : 0;
      return 0;
    case G_TRANSPOSE:
      if (a->rank != 2) return -1;
      out->rank = 2, out->d[0] = a->d[1], out->d[1] = a->d[0];
      for (int i = 0; i < a->d[0]; i++)
        for (int j = 0; j < a->d[1]; j++) out->v[j * a->d[0] + i] = a->v[i * a->d[1] + j];
      return 0;
    case G_CONCAT0: return concat(a, b, 0, out);
    case G_CONCAT1: return concat(a, b, 1, out);
    case G_SPLIT0: return split(a, 0, out);
    case G_SPLIT1: return split(a, 1, out);
    case G_CONV: return conv(a, b, par ? par->stride : 1, par ? par->dil : 1, out, o);
  }
  return -1;
}
