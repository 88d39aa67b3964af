/* k_hlo_custom.c: the executor's dense linear algebra (the HLO op triangular-solve) and its kernels
 * for custom-call targets of real modules besides cuBLAS GEMMs and cuda_threefry2x32 (those are in
 * k_hlo.c):
 * - sharding annotations (`Sharding`, `SPMDFullToShardShape`, `SPMDShardToFullShape`): identities on
 *   the one device the executor is; and the HLO op opt-barrier (its operands unchanged);
 * - the dense linear algebra jaxlib lowers to cuSOLVER/cuBLAS: LU with partial pivoting
 *   (`cusolver_getrf`, `cublas_getrf_batched`: results LU, 1-based pivots, info, workspace),
 *   Cholesky (`cusolver_potrf`: result factor in the lower or upper triangle as the descriptor's
 *   fill mode says, the other triangle left as it was; info, workspace), Householder QR
 *   (`cusolver_geqrf`, `cusolver_orgqr`), triangular solves (`cublas_trsm_batched`, side, fill
 *   mode, transpose and unit diagonal from its descriptor), computed by LAPACK/BLAS (OpenBLAS's
 *   dgetrf, dpotrf, dgeqrf, dorgqr, dtrsm) on each matrix of the batch, and
 *   `cuda_lu_pivots_to_permutation`. The matrices are the logical ones:
 *   jaxlib's operand layouts are column-major, which is what cuSOLVER reads, so the library sees the
 *   logical matrix; info is LAPACK's (0, or the 1-based column where the factorisation stopped).
 * - the AWS Neuron targets that PyTorch/XLA writes for Trainium/Inferentia: AwsNeuronGelu
 *   (x * Phi(x), Phi the normal CDF), AwsNeuronGeluApprxTanh (0.5 x (1 + tanh(sqrt(2/pi)
 *   (x + 0.044715 x^3)))), AwsNeuronGeluBackward (d/dx of x * Phi(x): Phi(x) + x * phi(x); the
 *   modules multiply it by the incoming gradient themselves) and AwsNeuronTransferWithStaticRing
 *   (a host-to-device transfer of a parameter: the identity). Neuron documents none of these
 *   publicly; the semantics are read from the modules (torch_xla's GeluForwardImpl op names, the
 *   same operand and result shape, the backward's use as a factor of the gradient). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_hlo.h"

#define NODE (k->node)
#define G (x->g)

/* LAPACK (OpenBLAS), column-major; the trailing size_t is Fortran's hidden string length. */
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t uplo_len);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork,
                    int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work,
                    const int *lwork, int *info);
extern void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m, const int *n,
                   const double *alpha, const double *a, const int *lda, double *b, const int *ldb, size_t l1, size_t l2,
                   size_t l3, size_t l4);

/* custom_call_target of node n without its quotes, into buf. */
static const char *target(const gopt_graph *g, int32_t n, char *buf, size_t cap) {
  const char *s = gopt_node_get_string(g, n, "custom_call_target", "");
  size_t len = strlen(s);
  if (len >= 2 && s[0] == '"' && s[len - 1] == '"') s++, len -= 2;
  snprintf(buf, cap, "%.*s", (int)len, s);
  return buf;
}

/* ---- Neuron ---------------------------------------------------------------------------------- */

static int f_neuron(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  char tb[64];
  const char *t = target(G, NODE, tb, sizeof tb);
  if (nin != 1 || nout != 1 || in[0].n != out[0].n) return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: one operand of the result's size expected", t);
  int kind = !strcmp(t, "AwsNeuronGelu") ? 0 : !strcmp(t, "AwsNeuronGeluApprxTanh") ? 1 : !strcmp(t, "AwsNeuronGeluBackward") ? 2 : 3;
  for (int64_t i = 0; i < out[0].n; i++) {
    double v = in[0].v[i], cdf = 0.5 * (1 + erf(v / sqrt(2.0)));
    switch (kind) {
      case 0: out[0].v[i] = v * cdf; break;
      case 1: out[0].v[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); break;
      case 2: out[0].v[i] = cdf + v * exp(-0.5 * v * v) / sqrt(2 * M_PI); break;
      default: out[0].v[i] = v; break;
    }
  }
  return GOPT_OK;
}

/* ---- sharding annotations ---------------------------------------------------------------------- */

/* custom-call Sharding / SPMDFullToShardShape / SPMDShardToFullShape (what `with_sharding_constraint`
 * and shard_map leave before SPMD partitioning): on the one device the executor is, each is its
 * operand unchanged; a shape change (a real partition) is refused. */
static int f_sharding(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  char tb[64];
  const char *t = target(G, NODE, tb, sizeof tb);
  if (nin != 1 || nout != 1 || in[0].n != out[0].n)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: one operand of the result's size expected (one device)", t);
  memcpy(out[0].v, in[0].v, (size_t)out[0].n * sizeof(double));
  return GOPT_OK;
}

/* opt-barrier (a rematerialisation fence): its operands' leaves unchanged, one output per leaf. */
static int f_opt_barrier(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  if (nin != nout) return ex_node_error(x, NODE, err, GOPT_EINVAL, "opt-barrier: %d operands for %d results", nin, nout);
  for (int i = 0; i < nout; i++) {
    if (in[i].n != out[i].n) return ex_node_error(x, NODE, err, GOPT_EINVAL, "opt-barrier: leaf %d changes size", i);
    if (out[i].v && in[i].v) memcpy(out[i].v, in[i].v, (size_t)out[i].n * sizeof(double));
  }
  return GOPT_OK;
}

/* ---- LAPACK factorisations --------------------------------------------------------------------- */

/* Matrix b of the batch in[0] ([..., m, n]) into column-major a, and back. */
static void to_colmajor(const double *src, int m, int n, double *a) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) a[(size_t)j * m + i] = src[(size_t)i * n + j];
}
static void from_colmajor(const double *a, int m, int n, double *dst) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) dst[(size_t)i * n + j] = a[(size_t)j * m + i];
}

/* The matrix dims of in (rank >= 2) and its batch count, or -1 when they do not fit an int. */
static int64_t mat_dims(const rt *t, int *m, int *n) {
  if (t->rank < 2 || t->d[t->rank - 2] > 65536 || t->d[t->rank - 1] > 65536) return -1;
  *m = (int)t->d[t->rank - 2];
  *n = (int)t->d[t->rank - 1];
  return *m && *n ? t->n / ((int64_t)*m * *n) : 0;
}

/* getrf: (LU, pivots [..., min(m,n)], info [...], workspace) = getrf(a [..., m, n]). */
static int f_getrf(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int m = 0, n = 0;
  int64_t nb = mat_dims(&in[0], &m, &n);
  int mn = m < n ? m : n;
  if (nin != 1 || nout < 3 || nb < 0 || out[0].n != in[0].n || out[1].n != nb * mn || out[2].n != nb)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "getrf: results (LU, pivots, info, ...) do not match the operand");
  double *a = malloc((size_t)m * n * sizeof *a + 1);
  int *piv = malloc((size_t)mn * sizeof *piv + 1);
  if (!a || !piv) {
    free(a);
    free(piv);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t b = 0; b < nb; b++) {
    int info = 0;
    to_colmajor(in[0].v + b * m * n, m, n, a);
    dgetrf_(&m, &n, a, &m, piv, &info);
    from_colmajor(a, m, n, out[0].v + b * m * n);
    for (int i = 0; i < mn; i++) out[1].v[b * mn + i] = piv[i];
    out[2].v[b] = info;
  }
  free(a);
  free(piv);
  return GOPT_OK;
}

/* The bytes of an HLO string literal's text ("\000\350..."), up to cap; their count. */
static size_t unescape(const char *s, unsigned char *o, size_t cap) {
  size_t n = 0;
  if (*s == '"') s++;
  while (*s && *s != '"' && n < cap) {
    if (*s != '\\') {
      o[n++] = (unsigned char)*s++;
      continue;
    }
    s++;
    if (*s >= '0' && *s <= '7') {
      int v = 0;
      for (int i = 0; i < 3 && *s >= '0' && *s <= '7'; i++) v = v * 8 + (*s++ - '0');
      o[n++] = (unsigned char)v;
    } else if (*s) o[n++] = (unsigned char)(*s == 'n' ? '\n' : *s == 't' ? '\t' : *s), s++;
  }
  return n;
}

/* potrf: (factor, info, workspace) = potrf(a [..., n, n]); the descriptor's second int32 is
 * cuBLAS's fill mode (0 lower, 1 upper). */
static int f_potrf(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int m = 0, n = 0;
  int64_t nb = mat_dims(&in[0], &m, &n);
  unsigned char d[64];
  size_t nd = unescape(gopt_node_get_string(G, NODE, "backend_config", ""), d, sizeof d);
  if (nin != 1 || nout < 2 || nb < 0 || m != n || out[0].n != in[0].n || out[1].n != nb)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "potrf: results (factor, info, ...) do not match the square operand");
  if (nd < 8 || d[5] || d[6] || d[7] || d[4] > 1)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "potrf: backend_config is not a descriptor with a fill mode");
  char uplo = d[4] ? 'U' : 'L';
  double *a = malloc((size_t)n * n * sizeof *a + 1);
  if (!a) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t b = 0; b < nb; b++) {
    int info = 0;
    to_colmajor(in[0].v + b * n * n, n, n, a);
    dpotrf_(&uplo, &n, a, &n, &info, 1);
    from_colmajor(a, n, n, out[0].v + b * n * n);
    out[1].v[b] = info;
  }
  free(a);
  return GOPT_OK;
}

/* Little-endian int32 number i of the descriptor bytes d[0..nd), -1 when beyond. */
static int64_t desc_i32(const unsigned char *d, size_t nd, int i) {
  if ((size_t)(4 * i + 4) > nd) return -1;
  return (int64_t)((uint32_t)d[4 * i] | (uint32_t)d[4 * i + 1] << 8 | (uint32_t)d[4 * i + 2] << 16 | (uint32_t)d[4 * i + 3] << 24);
}

/* BLAS dtrsm on each of the nb matrices of in[0] (ka x ka) and in[1] (m x n) into out[0]; f holds
 * side, uplo, transa, diag. */
static int trsm_batch(const rt *in, rt *out, int64_t nb, int m, int n, int ka, const char *f, gopt_error *err) {
  double one = 1, *a = malloc(((size_t)ka * ka + (size_t)m * n) * sizeof *a + 1), *b = a ? a + (size_t)ka * ka : NULL;
  if (!a) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t i = 0; i < nb; i++) {
    to_colmajor(in[0].v + i * ka * ka, ka, ka, a);
    to_colmajor(in[1].v + i * m * n, m, n, b);
    dtrsm_(&f[0], &f[1], &f[2], &f[3], &m, &n, &one, a, &ka, b, &m, 1, 1, 1, 1);
    from_colmajor(b, m, n, out[0].v + i * m * n);
  }
  free(a);
  return GOPT_OK;
}

/* cublas_trsm_batched(a [..., k, k], b [..., m, n]) -> (x, ...): op(a) x = b (side left) or
 * x op(a) = b (side right), a's fill mode triangle only, unit or not; the descriptor is
 * {type, batch, m, n, side, uplo, trans, diag} as int32 (cuBLAS's enums). */
static int f_trsm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  unsigned char d[64];
  size_t nd = unescape(gopt_node_get_string(G, NODE, "backend_config", ""), d, sizeof d);
  int64_t side = desc_i32(d, nd, 4), uplo = desc_i32(d, nd, 5), trans = desc_i32(d, nd, 6), diag = desc_i32(d, nd, 7);
  int m = 0, n = 0, ka = 0, kb = 0;
  int64_t nb = mat_dims(&in[1], &m, &n), na = nin == 2 ? mat_dims(&in[0], &ka, &kb) : -1;
  if (nin != 2 || nout < 1 || nb < 0 || na != nb || ka != kb || ka != (side ? n : m) || out[0].n != in[1].n)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "trsm: operands (a, b) and result do not match");
  if (side < 0 || side > 1 || uplo < 0 || uplo > 1 || trans < 0 || trans > 2 || diag < 0 || diag > 1)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "trsm: backend_config is not a {type, batch, m, n, side, uplo, trans, diag} descriptor");
  char cs = side ? 'R' : 'L', cu = uplo ? 'U' : 'L', ct = trans ? 'T' : 'N', cd = diag ? 'U' : 'N';
  return trsm_batch(in, out, nb, m, n, ka, (char[4]){cs, cu, ct, cd}, err);
}

/* triangular-solve(a [..., k, k], b [..., m, n]), XLA's op: left_side (op(a) x = b, else
 * x op(a) = b), lower (which triangle of a is read), unit_diagonal, transpose_a (NO_TRANSPOSE,
 * TRANSPOSE; ADJOINT is TRANSPOSE for real types). */
static int f_triangular_solve(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int m = 0, n = 0, ka = 0, kb = 0;
  int64_t nb = mat_dims(&in[1], &m, &n), na = nin == 2 ? mat_dims(&in[0], &ka, &kb) : -1;
  int left = !strcmp(gopt_node_get_string(G, NODE, "left_side", "false"), "true");
  int lower = !strcmp(gopt_node_get_string(G, NODE, "lower", "false"), "true");
  int unit = !strcmp(gopt_node_get_string(G, NODE, "unit_diagonal", "false"), "true");
  const char *ta = gopt_node_get_string(G, NODE, "transpose_a", "NO_TRANSPOSE");
  if (nin != 2 || nout != 1 || nb < 0 || na != nb || ka != kb || ka != (left ? m : n) || out[0].n != in[1].n)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "triangular-solve: operands (a, b) and result do not match");
  if (strcmp(ta, "NO_TRANSPOSE") && strcmp(ta, "TRANSPOSE") && strcmp(ta, "ADJOINT"))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "triangular-solve: transpose_a=%s", ta);
  char cs = left ? 'L' : 'R', cu = lower ? 'L' : 'U', ct = strcmp(ta, "NO_TRANSPOSE") ? 'T' : 'N', cd = unit ? 'U' : 'N';
  return trsm_batch(in, out, nb, m, n, ka, (char[4]){cs, cu, ct, cd}, err);
}

/* cusolver_geqrf(a [..., m, n]) -> (r and reflectors, tau [..., min(m,n)], info, workspace) and
 * cusolver_orgqr(a [..., m, n], tau [..., k]) -> (q, info, workspace): LAPACK's Householder QR. */
static int f_qr(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int org = nin == 2, m = 0, n = 0;
  int64_t nb = mat_dims(&in[0], &m, &n);
  int kq = org ? (int)in[1].d[in[1].rank - 1] : (m < n ? m : n), lw = 64 * (n + 1), info = 0;
  rt *tau = org ? &in[1] : &out[1], *inf = org ? &out[1] : &out[2];
  if (nb < 0 || nout < (org ? 2 : 3) || out[0].n != in[0].n || tau->n != nb * kq || inf->n != nb || (org && (kq > n || n > m)))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: operands and results do not match", org ? "orgqr" : "geqrf");
  double *a = malloc(((size_t)m * n + (size_t)lw + (size_t)kq) * sizeof *a + 1), *w = a ? a + (size_t)m * n : NULL, *t = w ? w + lw : NULL;
  if (!a) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int64_t i = 0; i < nb; i++) {
    to_colmajor(in[0].v + i * m * n, m, n, a);
    if (org) {
      memcpy(t, tau->v + i * kq, (size_t)kq * sizeof *t);
      dorgqr_(&m, &n, &kq, a, &m, t, w, &lw, &info);
    } else {
      dgeqrf_(&m, &n, a, &m, t, w, &lw, &info);
      memcpy(tau->v + i * kq, t, (size_t)kq * sizeof *t);
    }
    from_colmajor(a, m, n, out[0].v + i * m * n);
    inf->v[i] = info;
  }
  free(a);
  return GOPT_OK;
}

/* cuda_lu_pivots_to_permutation(pivots [..., k], 0-based) -> permutation [..., p]: the identity
 * with rows i and pivots[i] swapped for i = 0..k-1 in turn (an out-of-range pivot swaps nothing). */
static int f_lu_perm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  int64_t kp = in[0].rank ? in[0].d[in[0].rank - 1] : 1, p = out[0].rank ? out[0].d[out[0].rank - 1] : 1;
  int64_t nb = kp ? in[0].n / kp : 0;
  if (nin != 1 || nout != 1 || !p || out[0].n != nb * p) return ex_node_error(x, NODE, err, GOPT_EINVAL, "lu_pivots_to_permutation: shapes do not match");
  for (int64_t b = 0; b < nb; b++) {
    double *q = out[0].v + b * p;
    for (int64_t i = 0; i < p; i++) q[i] = (double)i;
    for (int64_t i = 0; i < kp && i < p; i++) {
      double v = in[0].v[b * kp + i];
      if (v < 0 || v >= (double)p) continue;
      double t = q[i];
      q[i] = q[(int64_t)v];
      q[(int64_t)v] = t;
    }
  }
  return GOPT_OK;
}

ref_fn ex_hlo_custom_kernel(const gopt_graph *g, int32_t n) {
  const char *op = ex_hlo_op(g, n);
  if (op && !strcmp(op, "triangular-solve")) return f_triangular_solve;
  if (op && !strcmp(op, "opt-barrier")) return f_opt_barrier;
  if (!op || strcmp(op, "custom-call")) return NULL;
  char tb[64];
  const char *t = target(g, n, tb, sizeof tb);
  if (!strcmp(t, "AwsNeuronGelu") || !strcmp(t, "AwsNeuronGeluApprxTanh") || !strcmp(t, "AwsNeuronGeluBackward") ||
      !strcmp(t, "AwsNeuronTransferWithStaticRing"))
    return f_neuron;
  if (!strcmp(t, "Sharding") || !strcmp(t, "SPMDFullToShardShape") || !strcmp(t, "SPMDShardToFullShape"))
    return f_sharding;
  if (!strcmp(t, "cusolver_getrf") || !strcmp(t, "cublas_getrf_batched")) return f_getrf;
  if (!strcmp(t, "cusolver_potrf")) return f_potrf;
  if (!strcmp(t, "cublas_trsm_batched")) return f_trsm;
  if (!strcmp(t, "cusolver_geqrf") || !strcmp(t, "cusolver_orgqr")) return f_qr;
  if (!strcmp(t, "cuda_lu_pivots_to_permutation")) return f_lu_perm;
  return NULL;
}
