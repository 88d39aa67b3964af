/* test_hlo_exec_kernels.c: the HLO executor's scatter and cuBLAS GEMM custom-call kernels against
 * numpy (values printed by tests/hlo/fixtures/hlo_kernel_refs.py, held below): scatter-add with a
 * repeated index, scatter-replace with an out-of-bounds index dropped, scatter-add of 2-D windows;
 * a GEMM with alpha and beta, and one with a transposed operand and the BIAS_RELU epilogue;
 * conditional (pred and branch index, a tuple operand) against hand-worked values. */
#include "check.h"
#include "hlo_test_util.h"

/* tests/hlo/fixtures/hlo_kernel_refs.py */
static const double sc_rows[] = {0, 1, 2, 11, 14, 17, 6, 7, 8, 13, 15, 17};
static const double sc_drop[] = {3, 0, 0, 0, 1, 0};
static const double sc_win[] = {0, 1, 2, 0, 0, 3, 9, 6, 0, 0, 7, 8};
static const double gemm_beta[] = {3.5, 1.5, 2.5, 4.5, 12, 5.5, 8, 11.5};
static const double gemm_bias_relu[] = {8, 0, 1.5, 1, 17, 0, 4.5, 7};

#define ADD "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
#define A "  a = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
#define AT "  a = f32[3,2] constant({ {1, 4}, {2, 5}, {3, 6} })\n"
#define B "  b = f32[3,4] constant({ {1, -1, 2, 0}, {0, 1, -2, 3}, {2, 0, 1, -1} })\n"
#define DIMS(l) "\"dot_dimension_numbers\":{\"lhs_batch_dimensions\":[],\"lhs_contracting_dimensions\":[\"" l "\"],\"rhs_batch_dimensions\":[],\"rhs_contracting_dimensions\":[\"0\"]}"

int main(void) {
  kernel_case("scatter-add rows, index 1 twice",
              ADD "ENTRY e {\n  x = f32[4,3] constant({ {0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11} })\n"
              "  i = s32[3,1] constant({ {1}, {3}, {1} })\n  u = f32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 9} })\n"
              "  ROOT s = f32[4,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, "
              "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
              0, sc_rows, 12);
  kernel_case("scatter-replace, index 7 dropped",
              "second {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}\n"
              "ENTRY e {\n  x = f32[6] constant({0, 0, 0, 0, 0, 0})\n  i = s32[3] constant({4, 7, 0})\n"
              "  u = f32[3] constant({1, 2, 3})\n  ROOT s = f32[6] scatter(x, i, u), update_window_dims={}, "
              "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=second\n}\n",
              0, sc_drop, 6);
  kernel_case("scatter-add 2x2 windows",
              ADD "ENTRY e {\n  x = f32[3,4] constant({ {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0} })\n"
              "  i = s32[2,2] constant({ {0, 1}, {1, 2} })\n"
              "  u = f32[2,2,2] constant({ { {1, 2}, {3, 4} }, { {5, 6}, {7, 8} } })\n"
              "  ROOT s = f32[3,4] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, "
              "scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add\n}\n",
              0, sc_win, 12);
  kernel_case("cuBLASLt GEMM, alpha 0.5, beta 1",
              "ENTRY e {\n" A B "  c = f32[2,4] constant({ {0, 1, 2, 3}, {4, 5, 6, 7} })\n"
              "  g = (f32[2,4], s8[64]) custom-call(a, b, c), custom_call_target=\"__cublas$lt$matmul\", "
              "backend_config={\"gemm_backend_config\":{\"alpha_imag\":0,\"alpha_real\":0.5,\"beta\":1," DIMS("1")
              ",\"epilogue\":\"DEFAULT\"}}\n  ROOT r = f32[2,4] get-tuple-element(g), index=0\n}\n",
              0, gemm_beta, 8);
  kernel_case("cuBLASLt GEMM, lhs contracted on dim 0, BIAS_RELU",
              "ENTRY e {\n" AT B "  bias = f32[4] constant({1, -30, 0.5, -2})\n"
              "  g = (f32[2,4], s8[64]) custom-call(a, b, bias), custom_call_target=\"__cublas$lt$matmul\", "
              "backend_config={\"gemm_backend_config\":{\"alpha_real\":1,\"beta\":0," DIMS("0")
              ",\"epilogue\":\"BIAS_RELU\"}}\n  ROOT r = f32[2,4] get-tuple-element(g), index=0\n}\n",
              0, gemm_bias_relu, 8);
  /* conditional: pred true runs true_computation (negate); an index out of range the last branch */
  static const double neg[] = {-1, 2}, dbl[] = {2, -4};
#define BR "ng {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n" \
           "db {\n  t = (f32[2], f32[]) parameter(0)\n  ROOT d = f32[2] add(t#0, t#0)\n}\n"
  kernel_case("conditional on pred",
              BR "ENTRY e {\n  c = pred[] constant(true)\n  x = f32[2] constant({1, -2})\n  s = f32[] constant(0)\n"
              "  t = (f32[2], f32[]) tuple(x, s)\n"
              "  ROOT r = f32[2] conditional(c, x, t), true_computation=ng, false_computation=db\n}\n", 0, neg, 2);
  kernel_case("conditional on an index out of range",
              BR "ENTRY e {\n  c = s32[] constant(7)\n  x = f32[2] constant({1, -2})\n  s = f32[] constant(0)\n"
              "  t = (f32[2], f32[]) tuple(x, s)\n"
              "  ROOT r = f32[2] conditional(c, x, t), branch_computations={ng, db}\n}\n", 0, dbl, 2);
  return check_exit("test_hlo_exec_kernels");
}
