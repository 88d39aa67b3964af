/* test_hlo_kernel_cost.c: optimised HLO costs what XLA runs: a fusion is one node whose FLOPs are
 * its body's and whose bytes are its operands and result only; cuBLAS and cuDNN custom-calls cost
 * their GEMM / convolution (hand-computed counts below) and take its op kind; a while loop its body times the known
 * trip count. On the real modules of today's XLA, the module after the GPU pipeline (fusions,
 * cuBLASLt calls) has the FLOPs of the module before it (plain dots and elementwise ops) within
 * 0.1%, and fewer bytes. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gopt/hlo.h"
#include "gopt/ops.h"
#include "hlo_test_util.h"

static const char module[] =
    "HloModule k\n\n"
    "%fb (a: f32[4,8], b: f32[8,16]) -> f32[4,16] {\n"
    "  %a = f32[4,8]{1,0} parameter(0)\n  %b = f32[8,16]{1,0} parameter(1)\n"
    "  %d = f32[4,16]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT %r = f32[4,16]{1,0} negate(%d)\n}\n\n"
    "%cond (s: (s32[], f32[4])) -> pred[] {\n  %s = (s32[], f32[4]{0}) parameter(0)\n"
    "  %lim = s32[] constant(5)\n  ROOT %lt = pred[] compare(%s#0, %lim), direction=LT\n}\n\n"
    "%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {\n  %s.1 = (s32[], f32[4]{0}) parameter(0)\n"
    "  %one = s32[] constant(1)\n  %i = s32[] add(%s.1#0, %one)\n"
    "  %v = f32[4]{0} multiply(%s.1#1, %s.1#1)\n  ROOT %t = (s32[], f32[4]{0}) tuple(%i, %v)\n}\n\n"
    "ENTRY %main (a: f32[4,8], b: f32[8,16], x: f32[1,3,8,8], w: f32[4,3,3,3], dy: f32[1,4,6,6], c: f32[4,16], v: f32[4]) -> f32[4,16] {\n"
    "  %a = f32[4,8]{1,0} parameter(0)\n  %b = f32[8,16]{1,0} parameter(1)\n"
    "  %x = f32[1,3,8,8]{3,2,1,0} parameter(2)\n  %w = f32[4,3,3,3]{3,2,1,0} parameter(3)\n"
    "  %dy = f32[1,4,6,6]{3,2,1,0} parameter(4)\n  %c = f32[4,16]{1,0} parameter(5)\n"
    "  %v = f32[4]{0} parameter(6)\n"
    "  %f = f32[4,16]{1,0} fusion(%a, %b), kind=kCustom, calls=%fb\n"
    "  %g = (f32[4,16]{1,0}, s8[1024]{0}) custom-call(%a, %b, %c), custom_call_target=\"__cublas$lt$matmul\", "
    "backend_config={\"gemm_backend_config\":{\"alpha_real\":1,\"beta\":1,\"dot_dimension_numbers\":"
    "{\"lhs_batch_dimensions\":[],\"lhs_contracting_dimensions\":[\"1\"],\"rhs_batch_dimensions\":[],"
    "\"rhs_contracting_dimensions\":[\"0\"]}}}\n"
    "  %cf = (f32[1,4,6,6]{3,2,1,0}, u8[0]{0}) custom-call(%x, %w), window={size=3x3}, dim_labels=bf01_oi01->bf01, "
    "custom_call_target=\"__cudnn$convForward\"\n"
    "  %ci = (f32[1,3,8,8]{3,2,1,0}, u8[0]{0}) custom-call(%dy, %w), window={size=3x3}, dim_labels=bf01_oi01->bf01, "
    "custom_call_target=\"__cudnn$convBackwardInput\"\n"
    "  %cw = (f32[4,3,3,3]{3,2,1,0}, u8[0]{0}) custom-call(%x, %dy), window={size=3x3}, dim_labels=bf01_oi01->bf01, "
    "custom_call_target=\"__cudnn$convBackwardFilter\"\n"
    "  %zero = s32[] constant(0)\n  %init = (s32[], f32[4]{0}) tuple(%zero, %v)\n"
    "  %wl = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, "
    "backend_config={\"known_trip_count\":{\"n\":\"5\"}}\n"
    "  ROOT %o = f32[4,16]{1,0} add(%f, %g#0)\n}\n";

static gopt_cost cost_of(const gopt_graph *g, const char *name) {
  gopt_cost c = {0};
  for (size_t n = 0; n < g->nodes.n; n++)
    if (!strcmp(gopt_node_name(g, (int32_t)n), name)) gopt_node_cost(g, (int32_t)n, &c);
  return c;
}

static int kind_of(const gopt_graph *g, const char *name) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (!strcmp(gopt_node_name(g, (int32_t)n), name) && (g->nodes.a[n].flags & GOPT_N_OPAQUE)) return g->nodes.a[n].op;
  return -1;
}

static double module_flops(const char *path, double *bytes) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_graph_stats st = {0};
  CHECK_MSG(gopt_hlo_load(path, &g, &err) == 0, "%s: %s", path, err.msg);
  if (g) gopt_graph_stats_compute(g, &st);
  gopt_graph_free(g);
  *bytes = st.bytes;
  return st.flops;
}

int main(void) {
  gopt_graph *g = load(module);
  if (g) {
    gopt_cost c = cost_of(g, "f"); /* dot 2*4*16*8 + negate 4*16; reads a, b; writes 4x16 */
    CHECK(c.flops == 2 * 4 * 16 * 8 + 4 * 16);
    CHECK(c.bytes_read == 4 * (4 * 8 + 8 * 16) && c.bytes_written == 4 * 4 * 16);
    c = cost_of(g, "g"); /* GEMM + beta*C; the workspace is not written */
    CHECK(c.flops == 2 * 4 * 16 * 8 + 4 * 16);
    CHECK(c.bytes_written == 4 * 4 * 16);
    /* 2 x 144 outputs of the forward conv x 27 kernel elements per output feature, all three */
    CHECK(cost_of(g, "cf").flops == 2 * 144 * 27);
    CHECK(cost_of(g, "ci").flops == 2 * 144 * 27);
    CHECK(cost_of(g, "cw").flops == 2 * 144 * 27);
    /* 5 x (body: s32 add 1 + multiply 4; condition: compare 1) */
    CHECK(cost_of(g, "wl").flops == 5 * (1 + 4 + 1));
    /* kinds of the kernels (still opaque nodes): the fusion's dot, a GEMM, a convolution */
    CHECK(kind_of(g, "f") == GOPT_OP_EINSUM && kind_of(g, "g") == GOPT_OP_MATMUL);
    CHECK(kind_of(g, "cf") == GOPT_OP_CONV && kind_of(g, "wl") == GOPT_OP_OPAQUE);
  }
  gopt_graph_free(g);
  static const char *const progs[] = {"mlp_train_step", "transformer_infer"};
  for (int i = 0; i < 2; i++) {
    char p1[200], p2[200];
    double b1, b2;
    snprintf(p1, sizeof p1, "tests/hlo/data/xla-2026/%s.before.hlo", progs[i]);
    snprintf(p2, sizeof p2, "tests/hlo/data/xla-2026/%s.after_gpu.hlo", progs[i]);
    double f1 = module_flops(p1, &b1), f2 = module_flops(p2, &b2);
    CHECK_MSG(f1 > 1e9 && f2 > 0.999 * f1 && f2 < 1.001 * f1, "%s: %.6g FLOPs before, %.6g after", progs[i], f1, f2);
    CHECK_MSG(b2 < b1, "%s: %.6g bytes before, %.6g after", progs[i], b1, b2);
  }
  return check_exit("test_hlo_kernel_cost");
}
