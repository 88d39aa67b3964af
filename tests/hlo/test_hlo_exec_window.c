/* test_hlo_exec_window.c: the HLO executor's convolution, reduce-window, select-and-scatter,
 * batch-norm, LU / Cholesky custom-call and Neuron GELU kernels against PyTorch and numpy (values
 * printed by tests/hlo/fixtures/hlo_window_refs.py, held below; the operands are the same small
 * integers, built here by lit()): convolutions NHWC/HWIO with stride, asymmetric padding and
 * window dilation, with feature groups, with base dilation and window reversal (a transposed
 * convolution), with batch groups (a depthwise weight gradient); max and sum pooling;
 * the max-pooling gradient; batch-norm training and gradient; getrf, potrf, trsm (lower, plain and
 * transposed), the HLO op triangular-solve, geqrf, orgqr and lu_pivots_to_permutation; GELU, its tanh
 * approximation and its derivative. Also the f64 total-order sort comparator jax writes (64-bit
 * integer constants), against the order worked by hand; output comparison of bf16/f16/f8 results. */
#include "check.h"
#include "hlo_test_util.h"

/* tests/hlo/fixtures/hlo_window_refs.py */
static const double cv_nhwc[] = {-2, 2, 0, -1, 1, 0, 1, -1, 0, 0, 0, 0};
static const double cv_groups[] = {-5, -3, 9, 3, -5, -3, -4, 3, -5, -4, 9, -3, 3, -4, 9, -5, 3, -4, -6, 9, -6, -6, -6, 9, 9, -6, -6, 9, -4, 3, -3, 9, -4, -5, -3, 9};
static const double cv_transposed[] = {2, 4, -2, 0, -2, -4, 2, 0, 2, 4, 0, 0, -2, -4, -1, 2, 0, -2, 5, 4, -4, 0, 1, 2, -1, -2, 2, 4, -1, 0, 0, -4, 0, 2, 1, 0, 0, 0, -2, -4, 1, 2, 0, 0, 2, 0, -3, 0, 1};
static const double cv_batch_groups[] = {-2, -2, 3, -2, -2, 3, -2, -2, 3, -2, -2, 3};
static const double rw_max[] = {1, 4, 5, 5, 4, 4, 5, 4, 4};
static const double rw_sum[] = {-8, -2, 4, -1, 0, -5, 1, -4, 8, -8, -2, 4, 5, 0, -5, 1};
static const double ss_maxpool[] = {0, 0, 0, 0, 0, 9, 0, 3, 7, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 3, 0, 0};
static const double bn_y[] = {-0.91280146660170769, 0.5, -2.8256029332034154, 0, -0.67717227062914009, 1.7623510321041547, 0.5, 1.9128014666017077, 0, 2.8256029332034154, 1.7623510321041547, 1.152470206420831};
static const double bn_dx[] = {-0.0014099815035944776, 0.70640073330085384, 0.0056399260143779103, -2.8256029332034154, 0.071003421401852423, -0.19860541673265755, -0.70640073330085384, 0.0014099815035944776, 2.8256029332034154, -0.0056399260143779103, 0.41127540895066611, -0.28367341361986098};
static const double bn_dscale[] = {1.4128014666017077, -2.8256029332034154, -0.91482123852498554};
static const double bn_doffset[] = {-2, 0, 2};
static const double lu_lu[] = {7, 8, 10, 0.14285714285714285, 0.85714285714285721, 1.5714285714285716, 0.5714285714285714, 0.50000000000000022, -0.5};
static const double lu_piv[] = {3, 3, 3};
static const double chol[] = {2, 2, 9, 1, 2, 7, -1, 2, 1};
static const double gelu[] = {-0.045500263896358417, -0.15426876936299344, 0, 0.58002948571734891, 2.9959503059051098};
static const double gelu_tanh[] = {-0.045402305912224938, -0.15428599017485606, 0, 0.57996055516562028, 2.9963626079182268};
static const double gelu_grad[] = {-0.085231801078196917, 0.13250487534383712, 0.5, 0.99922572173923518, 1.0119456472041839};
static const double trsm_ln[] = {2, 0.5, 0, -0.875, 1.4000000000000001, 1.6500000000000001};
static const double trsm_lt[] = {2.0999999999999996, 2.625, 0.40000000000000002, -1.25, 0.20000000000000001, 1};
static const double qr_a[] = {-5.9160797830996161, -8.282511696339462, 0.43377174556761322, 0.63245553203367599, 0.72295290927935529, 0.39696565406256445};
static const double qr_tau[] = {1.1690308509457032, 1.72773977620305};
static const double qr_q[] = {-0.16903085094570325, 0.94868329805051377, -0.50709255283710997, -0.31622776601683833, -0.84515425472851657, 2.2204460492503131e-16};
static const double lu_perm[] = {2, 0, 1};
static const double gather_batch[] = {4, 5, 0, 1, 8, 9, 8, 9};
static const double scatter_batch[] = {3, 4, 0, 0, 1, 2, 0, 0, 12, 14, 0, 0};
static const double ts_left_t[] = {7, 29, 0, -13, 1, 5};
static const double ts_right[] = {2.5750000000000002, 0.049999999999999989, 0.40000000000000002, 1.7250000000000001, -0.84999999999999998, 0.20000000000000001};

/* A literal of shape d[0..rank) holding (i * 7 + off) % mod - mod / 2 for flat index i (the
 * fixture's ints()), with nested braces; appended to buf. */
static void lit(char *buf, size_t cap, const int64_t *d, int rank, int mod, int off) {
  int64_t n = 1, idx[8] = {0};
  for (int i = 0; i < rank; i++) n *= d[i];
  size_t len = strlen(buf);
  for (int i = 0; i < rank; i++) len += (size_t)snprintf(buf + len, cap - len, "{");
  for (int64_t i = 0; i < n && len < cap; i++) {
    len += (size_t)snprintf(buf + len, cap - len, "%lld", (long long)((i * 7 + off) % mod - mod / 2));
    int k = rank - 1;
    while (k >= 0 && ++idx[k] == d[k]) idx[k--] = 0;
    int closed = rank - 1 - k;
    for (int j = 0; j < closed; j++) len += (size_t)snprintf(buf + len, cap - len, "}");
    if (k >= 0) len += (size_t)snprintf(buf + len, cap - len, ", %s", closed ? "" : "");
    for (int j = 0; j < closed && k >= 0; j++) len += (size_t)snprintf(buf + len, cap - len, "{");
  }
}

/* One case: a module "PRE ENTRY e { a = A constant(lit) b = B constant(lit) ROOT r = ROOT }" (b = B
 * as written when it has no dims) run against want. */
typedef struct wcase {
  const char *what, *pre, *as;
  int64_t ad[4];
  int am, ao;
  const char *bs;
  int64_t bd[4];
  int bm, bo;
  const char *root;
  const double *want;
  int n;
} wcase;

#define ADD "add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n"
#define MAX "mx {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] maximum(p, q)\n}\n"

static const wcase wcases[] = {
    {"conv NHWC/HWIO, stride 2, pad 1_0x0_1, rhs_dilate 2", "", "f32[1,7,7,2]", {1, 7, 7, 2}, 5, 1, "f32[3,3,2,3]", {3, 3, 2, 3}, 3, 2,
     "f32[1,2,2,3] convolution(a, b), window={size=3x3 stride=2x2 pad=1_0x0_1 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f", cv_nhwc, 12},
    {"conv feature_group_count 2", "", "f32[1,4,4,4]", {1, 4, 4, 4}, 5, 3, "f32[4,2,2,2]", {4, 2, 2, 2}, 3, 1,
     "f32[1,4,3,3] convolution(a, b), window={size=2x2}, dim_labels=bf01_oi01->bf01, feature_group_count=2", cv_groups, 36},
    {"conv lhs_dilate 2, rhs_reversal (transposed convolution)", "", "f32[1,1,3,3]", {1, 1, 3, 3}, 5, 0, "f32[1,1,3,3]", {1, 1, 3, 3}, 4, 1,
     "f32[1,1,7,7] convolution(a, b), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=bf01_oi01->bf01",
     cv_transposed, 49},
    {"conv batch_group_count 3 (depthwise weight gradient)", "", "f32[2,3,4,4]", {2, 3, 4, 4}, 5, 2, "f32[2,3,3,3]", {2, 3, 3, 3}, 3, 1,
     "f32[1,3,2,2] convolution(a, b), window={size=3x3}, dim_labels=fb01_io01->bf01, batch_group_count=3", cv_batch_groups, 12},
    {"reduce-window max 3x3 stride 2 pad 1", MAX, "f32[1,1,5,5]", {1, 1, 5, 5}, 11, 4, "f32[] constant(-inf)", {0}, 0, 0,
     "f32[1,1,3,3] reduce-window(a, b), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, to_apply=mx", rw_max, 9},
    {"reduce-window add 2x2", ADD, "f32[1,1,5,5]", {1, 1, 5, 5}, 11, 4, "f32[] constant(0)", {0}, 0, 0,
     "f32[1,1,4,4] reduce-window(a, b), window={size=1x1x2x2}, to_apply=add", rw_sum, 16},
};

static void run_wcase(const wcase *c) {
  static char text[16384];
  snprintf(text, sizeof text, "%sENTRY e {\n  a = %s constant(", c->pre, c->as);
  lit(text, sizeof text, c->ad, 4, c->am, c->ao);
  snprintf(text + strlen(text), sizeof text - strlen(text), ")\n  b = %s%s", c->bs, c->bd[0] ? " constant(" : "");
  if (c->bd[0]) lit(text, sizeof text, c->bd, 4, c->bm, c->bo);
  snprintf(text + strlen(text), sizeof text - strlen(text), "%s\n  ROOT r = %s\n}\n", c->bd[0] ? ")" : "", c->root);
  kernel_case_tol(c->what, text, 0, c->want, c->n, 1e-12);
}

static void windows(void) {
  for (size_t i = 0; i < sizeof wcases / sizeof wcases[0]; i++) run_wcase(&wcases[i]);
  static const char ss[] =
      "ge {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT c = pred[] compare(p, q), direction=GE\n}\n" ADD
      "ENTRY e {\n  x = f32[1,1,5,5] constant({ { {5, 2, 19, 16, 11}, {22, 17, 24, 23, 14}, {1, 10, 13, 8, 6}, "
      "{18, 4, 9, 7, 20}, {3, 0, 21, 15, 12} } })\n"
      "  s = f32[1,1,3,3] constant({ { {4, 1, 3}, {5, 2, 4}, {1, 3, 5} } })\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[1,1,5,5] select-and-scatter(x, s, z), window={size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}, "
      "select=ge, scatter=add\n}\n";
  kernel_case("select-and-scatter (max-pooling gradient)", ss, 0, ss_maxpool, 25);
}

/* The octal-escaped bytes of int32 values v[0..n) (little-endian), as a cuBLAS descriptor in an HLO
 * string. */
static void desc(char *buf, const int *v, int n) {
  buf[0] = 0;
  for (int i = 0; i < n; i++)
    for (int b = 0; b < 4; b++) sprintf(buf + strlen(buf), "\\%03o", (unsigned)(v[i] >> (8 * b)) & 255u);
}

static void norms_and_solvers(void) {
  static const char bn[] =
      "ENTRY e {\n  x = f32[2,3,2] constant({ { {-1, 0}, {1, 2}, {3, -1} }, { {0, 1}, {2, 3}, {-1, 0} } })\n"
      "  s = f32[3] constant({1, 2, -1})\n  o = f32[3] constant({0.5, 0, 1})\n"
      "  dy = f32[2,3,2] constant({ { {-1, 0}, {1, -1}, {0, 1} }, { {-1, 0}, {1, -1}, {0, 1} } })\n"
      "  t = (f32[2,3,2], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1\n"
      "  m = f32[3] get-tuple-element(t), index=1\n  v = f32[3] get-tuple-element(t), index=2\n"
      "  g = (f32[2,3,2], f32[3], f32[3]) batch-norm-grad(x, s, m, v, dy), epsilon=0.001, feature_index=1\n"
      "  ROOT r = (f32[2,3,2], f32[2,3,2], f32[3], f32[3]) tuple(t#0, g#0, g#1, g#2)\n}\n";
  kernel_case_tol("batch-norm-training", bn, 0, bn_y, 12, 1e-6);
  kernel_case_tol("batch-norm-grad dx", bn, 1, bn_dx, 12, 1e-6);
  kernel_case_tol("batch-norm-grad dscale", bn, 2, bn_dscale, 3, 1e-6);
  kernel_case_tol("batch-norm-grad doffset", bn, 3, bn_doffset, 3, 1e-6);
  static const char lu[] =
      "ENTRY e {\n  a = f32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 10} })\n"
      "  f = (f32[3,3], s32[3], s32[], f32[64]) custom-call(a), custom_call_target=\"cusolver_getrf\", "
      "operand_layout_constraints={f32[3,3]{0,1}}, api_version=API_VERSION_STATUS_RETURNING\n"
      "  ROOT r = (f32[3,3], s32[3]) tuple(f#0, f#1)\n}\n";
  kernel_case_tol("cusolver_getrf LU", lu, 0, lu_lu, 9, 1e-6);
  kernel_case("cusolver_getrf pivots", lu, 1, lu_piv, 3);
  kernel_case("cusolver_potrf lower",
              "ENTRY e {\n  a = f32[3,3] constant({ {4, 2, 9}, {2, 5, 7}, {-2, 3, 6} })\n"
              "  f = (f32[3,3], s32[], s8[8]) custom-call(a), custom_call_target=\"cusolver_potrf\", "
              "backend_config=\"\\000\\000\\000\\000\\000\\000\\000\\000\\001\\000\\000\\000\\000\\000\\000\\000\\003\"\n"
              "  ROOT r = f32[3,3] get-tuple-element(f), index=0\n}\n", 0, chol, 9);
  char text[2048], d0[160], d1[160];
  desc(d0, (const int[]){1, 1, 3, 2, 0, 0, 0, 0}, 8);
  desc(d1, (const int[]){1, 1, 3, 2, 0, 0, 1, 0}, 8);
  for (int t = 0; t < 2; t++) {
    snprintf(text, sizeof text,
             "ENTRY e {\n  a = f32[3,3] constant({ {2, 9, 9}, {1, 4, 9}, {-3, 2, 5} })\n  b = f32[3,2] constant({ {4, 1}, {2, -3}, {1, 5} })\n"
             "  f = (f32[3,2], s8[8], s8[8]) custom-call(a, b), custom_call_target=\"cublas_trsm_batched\", backend_config=\"%s\"\n"
             "  ROOT r = f32[3,2] get-tuple-element(f), index=0\n}\n", t ? d1 : d0);
    kernel_case_tol(t ? "cublas_trsm_batched lower, transposed" : "cublas_trsm_batched lower", text, 0, t ? trsm_lt : trsm_ln, 6, 1e-6);
  }
  kernel_case_tol("triangular-solve left, lower, unit, transposed",
                  "ENTRY e {\n  a = f32[3,3] constant({ {2, 9, 9}, {1, 4, 9}, {-3, 2, 5} })\n  b = f32[3,2] constant({ {4, 1}, {2, -3}, {1, 5} })\n"
                  "  ROOT x = f32[3,2] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE\n}\n",
                  0, ts_left_t, 6, 1e-6);
  kernel_case_tol("triangular-solve right, lower",
                  "ENTRY e {\n  a = f32[3,3] constant({ {2, 9, 9}, {1, 4, 9}, {-3, 2, 5} })\n  b = f32[2,3] constant({ {4, 1, 2}, {2, -3, 1} })\n"
                  "  ROOT x = f32[2,3] triangular-solve(a, b), lower=true, transpose_a=NO_TRANSPOSE\n}\n",
                  0, ts_right, 6, 1e-6);
  static const char qr[] =
      "ENTRY e {\n  a = f32[3,2] constant({ {1, 2}, {3, 4}, {5, 7} })\n"
      "  f = (f32[3,2], f32[2], s32[], f32[64]) custom-call(a), custom_call_target=\"cusolver_geqrf\"\n"
      "  q = (f32[3,2], s32[], f32[64]) custom-call(f#0, f#1), custom_call_target=\"cusolver_orgqr\"\n"
      "  ROOT r = (f32[3,2], f32[2], f32[3,2]) tuple(f#0, f#1, q#0)\n}\n";
  kernel_case_tol("cusolver_geqrf reflectors", qr, 0, qr_a, 6, 1e-6);
  kernel_case_tol("cusolver_geqrf tau", qr, 1, qr_tau, 2, 1e-6);
  kernel_case_tol("cusolver_orgqr", qr, 2, qr_q, 6, 1e-6);
  kernel_case("cuda_lu_pivots_to_permutation",
              "ENTRY e {\n  p = s32[3] constant({2, 2, 2})\n"
              "  ROOT q = s32[3] custom-call(p), custom_call_target=\"cuda_lu_pivots_to_permutation\"\n}\n", 0, lu_perm, 3);
#define GELU(t) "ENTRY e {\n  x = f32[5] constant({-2, -0.5, 0, 0.75, 3})\n  ROOT g = f32[5] custom-call(x), " \
                "custom_call_target=\"" t "\"\n}\n"
  kernel_case_tol("AwsNeuronGelu", GELU("AwsNeuronGelu"), 0, gelu, 5, 1e-6);
  kernel_case_tol("AwsNeuronGeluApprxTanh", GELU("AwsNeuronGeluApprxTanh"), 0, gelu_tanh, 5, 1e-6);
  kernel_case_tol("AwsNeuronGeluBackward", GELU("AwsNeuronGeluBackward"), 0, gelu_grad, 5, 1e-6);
}

/* jax's f64 sort comparator: IEEE total order through s64/u64 bit patterns (0x7fff... - bits for
 * negatives), which needs 64-bit integer constants held exactly: -1e300 < -2 < -0 < +0 < 1.5. */
static void total_order_sort(void) {
  static const double perm[] = {4, 2, 3, 1, 0};
  kernel_case("sort by the f64 total order",
              "lt {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
              "  ab = s64[] bitcast-convert(a)\n  z = s64[] constant(0)\n  an = pred[] compare(ab, z), direction=LT\n"
              "  m = u64[] constant(9223372036854775807)\n  au = u64[] bitcast-convert(a)\n  as = u64[] subtract(m, au)\n"
              "  af = s64[] bitcast-convert(as)\n  ka = s64[] select(an, af, ab)\n"
              "  bb = s64[] bitcast-convert(b)\n  bn = pred[] compare(bb, z), direction=LT\n  bu = u64[] bitcast-convert(b)\n"
              "  bs = u64[] subtract(m, bu)\n  bf = s64[] bitcast-convert(bs)\n  kb = s64[] select(bn, bf, bb)\n"
              "  ROOT c = pred[] compare(ka, kb), direction=LT\n}\n"
              "ENTRY e {\n  k = f64[5] constant({1.5, 0, -2, -0, -1e300})\n  v = s32[5] iota(), iota_dimension=0\n"
              "  ROOT s = (f64[5], s32[5]) sort(k, v), dimensions={0}, to_apply=lt\n}\n",
              1, perm, 5);
}

/* gather and scatter with batching dims (today's jax.vmap of a gather writes them). */
static void batching_dims(void) {
#define XB "  x = f32[2,3,2] constant({ { {0, 1}, {2, 3}, {4, 5} }, { {6, 7}, {8, 9}, {10, 11} } })\n" \
           "  i = s32[2,2,1] constant({ { {2}, {0} }, { {1}, {1} } })\n"
  kernel_case("gather with operand_batching_dims",
              "ENTRY e {\n" XB "  ROOT g = f32[2,2,2] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, "
              "operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,2}\n}\n",
              0, gather_batch, 8);
  kernel_case("scatter-add with input_batching_dims",
              ADD "ENTRY e {\n" XB "  c = f32[] constant(0)\n  z = f32[2,3,2] broadcast(c), dimensions={}\n"
              "  u = f32[2,2,2] constant({ { {1, 2}, {3, 4} }, { {5, 6}, {7, 8} } })\n"
              "  ROOT s = f32[2,3,2] scatter(z, i, u), update_window_dims={2}, inserted_window_dims={1}, input_batching_dims={0}, "
              "scatter_indices_batching_dims={0}, scatter_dims_to_operand_dims={1}, index_vector_dim=2, to_apply=add\n}\n",
              0, scatter_batch, 12);
}

/* gopt_exec_same_outputs on half-precision and 8-bit outputs: random inputs exist for them, and a
 * different result is a difference (their values were read as 0 before, so any two agreed). */
static void half_outputs(void) {
  static const char *const ty[] = {"bf16", "f16", "f8e4m3fn"};
  for (int i = 0; i < 3; i++) {
    char a[256], b[256], msg[300];
    snprintf(a, sizeof a, "HloModule a\nENTRY e {\n  x = %s[64] parameter(0)\n  ROOT y = %s[64] add(x, x)\n}\n", ty[i], ty[i]);
    snprintf(b, sizeof b, "HloModule b\nENTRY e {\n  x = %s[64] parameter(0)\n  ROOT y = %s[64] multiply(x, x)\n}\n", ty[i], ty[i]);
    gopt_graph *ga = load(a), *gb = load(b);
    if (ga && gb) {
      CHECK_MSG(gopt_exec_same_outputs(ga, ga, 1, 1e-4, 1e-5, msg, sizeof msg) == 1, "%s: %s", ty[i], msg);
      CHECK_MSG(gopt_exec_same_outputs(ga, gb, 1, 1e-4, 1e-5, msg, sizeof msg) == 0, "%s: x + x and x * x agree: %s", ty[i], msg);
    }
    gopt_graph_free(ga);
    gopt_graph_free(gb);
  }
}

int main(void) {
  half_outputs();
  batching_dims();
  windows();
  norms_and_solvers();
  total_order_sort();
  return check_exit("test_hlo_exec_window");
}
