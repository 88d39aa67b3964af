/* test_hlo_exec_dot.c: the HLO executor's dot with dimension numbers, on the OpenBLAS path (dots of
 * >= 2^15 multiply-adds) and the reference loop (smaller ones), against a plain einsum written out
 * here: batch dims not leading, two contracting dims listed in a different order on each side,
 * several free dims per operand, and no batch dims. Operand values are small integers, so every
 * sum is exact and both paths must equal the reference bit for bit. */
#include <stdlib.h>

#include "hlo_test_util.h"

/* Value of element i of operand s: a small integer in [-6, 6]. */
static double val(int s, int64_t i) { return (double)((i * (s ? 7 : 5) + 3 * s) % 13) - 6; }

/* Appends "f32[dims] constant({...})" of operand s (flat values, nested braces) to text. */
static void put_const(char *text, size_t cap, const char *name, int s, const int64_t *d, int r) {
  size_t o = strlen(text);
  int64_t n = 1;
  o += (size_t)snprintf(text + o, cap - o, "  %s = f32[", name);
  for (int i = 0; i < r; i++) o += (size_t)snprintf(text + o, cap - o, "%s%lld", i ? "," : "", (long long)d[i]), n *= d[i];
  o += (size_t)snprintf(text + o, cap - o, "] constant(");
  for (int64_t i = 0; i < n; i++) {
    int64_t inner = 1;
    for (int k = r - 1; k >= 0; k--) { /* an opening brace per dim whose index starts here */
      if (i % (inner * d[k])) break;
      inner *= d[k];
      o += (size_t)snprintf(text + o, cap - o, "{");
    }
    o += (size_t)snprintf(text + o, cap - o, "%g", val(s, i));
    inner = 1;
    for (int k = r - 1; k >= 0; k--) {
      if ((i + 1) % (inner * d[k])) break;
      inner *= d[k];
      o += (size_t)snprintf(text + o, cap - o, "}");
    }
    if (i + 1 < n) o += (size_t)snprintf(text + o, cap - o, ", ");
  }
  snprintf(text + o, cap - o, ")\n");
}

/* One case. lhs dims dl[0..rl), rhs dr[0..rr); batch pairs (lb[i], rb[i]), contracting pairs
 * (lc[i], rc[i]). The reference: out[batch..., lhs free..., rhs free...] = sum over the
 * contracted index of lhs * rhs, element positions computed from full multi-indices. */
static void dot_case(const char *what, const int64_t *dl, int rl, const int64_t *dr, int rr, const int *lb,
                     const int *rb, int nb, const int *lc, const int *rc, int nc) {
  size_t cap = (size_t)1 << 20;
  char *text = malloc(cap);
  text[0] = 0;
  strcat(text, "HloModule d\nENTRY e {\n");
  put_const(text, cap, "a", 0, dl, rl);
  put_const(text, cap, "b", 1, dr, rr);
  /* output shape: batch dims, lhs free, rhs free */
  int64_t od[8];
  int no = 0, lrole[8], rrole[8]; /* role: output dim, or -1 - contracting index */
  for (int i = 0; i < rl; i++) lrole[i] = -100;
  for (int i = 0; i < rr; i++) rrole[i] = -100;
  for (int i = 0; i < nb; i++) lrole[lb[i]] = rrole[rb[i]] = no, od[no++] = dl[lb[i]];
  for (int i = 0; i < nc; i++) lrole[lc[i]] = rrole[rc[i]] = -1 - i;
  for (int i = 0; i < rl; i++)
    if (lrole[i] == -100) lrole[i] = no, od[no++] = dl[i];
  for (int i = 0; i < rr; i++)
    if (rrole[i] == -100) rrole[i] = no, od[no++] = dr[i];
  size_t o = strlen(text);
  o += (size_t)snprintf(text + o, cap - o, "  ROOT d = f32[");
  int64_t n = 1, K = 1;
  for (int i = 0; i < no; i++) o += (size_t)snprintf(text + o, cap - o, "%s%lld", i ? "," : "", (long long)od[i]), n *= od[i];
  int64_t cd[8];
  for (int i = 0; i < nc; i++) cd[i] = dl[lc[i]], K *= cd[i];
  const char *key[4] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"};
  const int *lists[4] = {lb, rb, lc, rc};
  int cnt[4] = {nb, nb, nc, nc};
  o += (size_t)snprintf(text + o, cap - o, "] dot(a, b)");
  for (int j = 0; j < 4; j++) {
    o += (size_t)snprintf(text + o, cap - o, ", %s={", key[j]);
    for (int i = 0; i < cnt[j]; i++) o += (size_t)snprintf(text + o, cap - o, "%s%d", i ? "," : "", lists[j][i]);
    o += (size_t)snprintf(text + o, cap - o, "}");
  }
  snprintf(text + o, cap - o, "\n}\n");
  double *want = malloc((size_t)n * sizeof *want);
  for (int64_t e = 0; e < n; e++) {
    int64_t oi[8], ci[8], rem = e;
    for (int i = no - 1; i >= 0; i--) oi[i] = rem % od[i], rem /= od[i];
    double acc = 0;
    for (int64_t q = 0; q < K; q++) {
      rem = q;
      for (int i = nc - 1; i >= 0; i--) ci[i] = rem % cd[i], rem /= cd[i];
      int64_t pa = 0, pb = 0;
      for (int i = 0; i < rl; i++) pa = pa * dl[i] + (lrole[i] >= 0 ? oi[lrole[i]] : ci[-1 - lrole[i]]);
      for (int i = 0; i < rr; i++) pb = pb * dr[i] + (rrole[i] >= 0 ? oi[rrole[i]] : ci[-1 - rrole[i]]);
      acc += val(0, pa) * val(1, pb);
    }
    want[e] = acc;
  }
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts eo = {0};
  gopt_host_tensor t = {0};
  int rc2 = gopt_hlo_load_mem(text, strlen(text), what, &g, &err);
  if (!rc2) rc2 = gopt_exec_new(g, &eo, &x, NULL, &err);
  if (!rc2) rc2 = gopt_exec_run(x, &err);
  if (!rc2) rc2 = gopt_exec_get_output(x, 0, &t, &err);
  CHECK_MSG(rc2 == 0, "%s: %s", what, err.msg);
  if (!rc2) {
    CHECK_EQ_INT(gopt_host_tensor_numel(&t), n);
    int bad = 0;
    for (int64_t i = 0; i < n && i < gopt_host_tensor_numel(&t) && bad < 5; i++)
      if (((float *)t.data)[i] != (float)want[i]) {
        CHECK_MSG(0, "%s: element %lld is %.9g, reference %.9g", what, (long long)i, ((float *)t.data)[i], want[i]);
        bad++;
      }
  }
  gopt_host_tensor_clear(&t);
  gopt_exec_free(x);
  gopt_graph_free(g);
  free(want);
  free(text);
}

int main(void) {
  /* lhs [k1=4, b=3, m=30, k2=6], rhs [k2=6, n=18, b=3, k1=4]: 1,620 outputs x 24 = 38,880 MACs */
  static const int64_t l1[] = {4, 3, 30, 6}, r1[] = {6, 18, 3, 4};
  static const int lb1[] = {1}, rb1[] = {2}, lc1[] = {3, 0}, rc1[] = {0, 3};
  dot_case("batched, two contracting dims (BLAS)", l1, 4, r1, 4, lb1, rb1, 1, lc1, rc1, 2);
  /* the same dims, smaller: the reference loop (3 x 5 x 7 outputs x 24) */
  static const int64_t l2[] = {4, 3, 5, 6}, r2[] = {6, 7, 3, 4};
  dot_case("batched, two contracting dims (reference loop)", l2, 4, r2, 4, lb1, rb1, 1, lc1, rc1, 2);
  /* no batch: lhs [m1=4, k=32, m2=8], rhs [n=40, k=32]: out [4, 8, 40], 40,960 MACs */
  static const int64_t l3[] = {4, 32, 8}, r3[] = {40, 32};
  static const int lc3[] = {1}, rc3[] = {1};
  dot_case("no batch, two lhs free dims (BLAS)", l3, 3, r3, 2, NULL, NULL, 0, lc3, rc3, 1);
  /* two batch dims in swapped order and a matrix-vector product */
  static const int64_t l4[] = {2, 5, 64, 64}, r4[] = {5, 2, 64};
  static const int lb4[] = {0, 1}, rb4[] = {1, 0}, lc4[] = {3}, rc4[] = {2};
  dot_case("two batch dims, matrix-vector (BLAS)", l4, 4, r4, 3, lb4, rb4, 2, lc4, rc4, 1);
  return check_exit("test_hlo_exec_dot");
}
