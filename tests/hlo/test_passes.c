/* test_passes.c: the compiler passes on hand-written HLO. Output equality: a module built from ops
 * gopt's executor runs (elementwise, compare/select, transpose, constants) computes the same
 * outputs on random inputs before and after every pass and the default pipeline. Structure: each
 * pass's rewrite on a module made for it (tuples, calls, dot(transpose), logistic, zero-sized). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hlo_test_util.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"

static const char exec_mod[] =
    "HloModule a\n\nENTRY e {\n"
    "  x = f32[2,3] parameter(0)\n  y = f32[2,3] parameter(1)\n"
    "  z = f32[2,3] constant({ {0,0,0}, {0,0,0} })\n  o = f32[2,3] constant({ {1,1,1}, {1,1,1} })\n"
    "  c1 = f32[2,3] constant({ {1,2,3}, {4,5,6} })\n  c2 = f32[2,3] add(c1, o)\n"
    "  a0 = f32[2,3] add(x, z)\n  a1 = f32[2,3] multiply(a0, o)\n  n1 = f32[2,3] negate(a1)\n"
    "  n2 = f32[2,3] negate(n1)\n  t = f32[2,3] transpose(n2), dimensions={0,1}\n"
    "  m = f32[2,3] maximum(t, t)\n  s1 = f32[2,3] add(m, y)\n  s2 = f32[2,3] add(m, y)\n"
    "  dead = f32[2,3] exponential(s1)\n  p = pred[2,3] compare(s1, s2), direction=GE\n"
    "  sel = f32[2,3] select(p, s1, s2)\n  sel2 = f32[2,3] select(p, c2, c2)\n"
    "  r = f32[2,3] subtract(sel, sel2)\n  ROOT out = f32[2,3] multiply(r, c2)\n}\n";

/* Output 0 of g on the random inputs of seed into out[0..6). */
static int run(const gopt_graph *g, uint64_t seed, float *out) {
  gopt_exec *x = NULL;
  gopt_error err = {0};
  gopt_host_tensor t = {0};
  gopt_exec_opts o = {0};
  o.threads = 1;
  int rc = gopt_exec_new(g, &o, &x, NULL, &err);
  if (!rc) rc = gopt_exec_random_inputs(x, seed, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  if (!rc) rc = gopt_exec_get_output(x, 0, &t, &err);
  CHECK_MSG(rc == 0, "exec: %s", err.msg);
  if (!rc) memcpy(out, t.data, 6 * sizeof *out);
  gopt_host_tensor_clear(&t);
  gopt_exec_free(x);
  return rc;
}

static void check_same_outputs(const gopt_graph *a, const gopt_graph *b, const char *what) {
  for (uint64_t seed = 1; seed <= 3; seed++) {
    float u[6], v[6];
    if (run(a, seed, u) || run(b, seed, v)) return;
    for (int i = 0; i < 6; i++) CHECK_MSG(fabsf(u[i] - v[i]) <= 1e-6f * (1 + fabsf(u[i])), "%s: output %d differs", what, i);
  }
}

static gopt_graph *apply(const gopt_graph *g, const char *name, gopt_pass_stats *st) {
  gopt_graph *h = NULL;
  gopt_error err = {0};
  int rc = gopt_pass_run(gopt_pass_find(name), g, &h, st, &err);
  CHECK_MSG(rc == 0 && h, "%s: %s", name, err.msg);
  return h;
}

static void exec_checks(void) {
  gopt_graph *g = load(exec_mod);
  if (!g) return;
  for (int i = 0; i < gopt_pass_count(); i++) {
    gopt_pass_stats st;
    gopt_graph *h = apply(g, gopt_pass_name(i), &st);
    if (!h) continue;
    check_same_outputs(g, h, gopt_pass_name(i));
    CHECK_EQ_INT(st.ops_after, gopt_hlo_instruction_count(h));
    gopt_graph_free(h);
  }
  gopt_pass_stats st;
  gopt_graph *h = apply(g, "algsimp", &st); /* a0, a1, n2 (via n1), t, m, sel2 */
  if (h) CHECK_MSG(st.rewrites >= 6, "algsimp rewrites %zu", st.rewrites);
  gopt_graph_free(h);
  h = apply(g, "cse", &st);
  if (h) CHECK_EQ_INT(count_type(h, "hlo::add"), 3); /* s2 merged into s1 */
  gopt_graph_free(h);
  h = apply(g, "dce", &st);
  if (h) CHECK_EQ_INT(count_type(h, "hlo::exponential"), 0);
  gopt_graph_free(h);
  h = apply(g, "constant_folding", &st);
  if (h) CHECK_EQ_INT(st.rewrites, 1); /* c2 = c1 + o */
  gopt_graph_free(h);
  gopt_error err = {0};
  gopt_pipeline_step *steps = NULL;
  size_t ns = 0;
  CHECK_EQ_INT(gopt_pipeline_run("default", g, &h, &steps, &ns, &err), 0);
  if (h) {
    check_same_outputs(g, h, "default pipeline");
    /* x, y, c2 folded, s1, p, sel, r, out: 8 instructions left of 20 */
    CHECK_MSG(gopt_hlo_instruction_count(h) <= 9, "default: %zu", gopt_hlo_instruction_count(h));
    CHECK(ns > 10 && steps[0].ops_before == 20);
  }
  free(steps);
  gopt_graph_free(h);
  CHECK(gopt_pipeline_run("algsimp,nope", g, &h, NULL, NULL, &err) != 0 && strstr(err.msg, "'nope'"));
  gopt_graph_free(g);
}

static void structure_checks(void) {
  gopt_pass_stats st;
  gopt_graph *g = load(
      "HloModule t\n\nf {\n  a = f32[4] parameter(0)\n  ROOT b = f32[4] negate(a)\n}\n\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  y = s32[] parameter(1)\n"
      "  t = (f32[4], s32[]) tuple(x, y)\n  g0 = f32[4] get-tuple-element(t), index=0\n"
      "  c = f32[4] call(g0), to_apply=f\n  l = f32[4] logistic(c)\n"
      "  w = f32[3,4] parameter(2)\n  tw = f32[4,3] transpose(w), dimensions={1,0}\n"
      "  d = f32[3] dot(l, tw), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
      "  zz = f32[0,4] broadcast(x), dimensions={1}\n"
      "  ROOT r = (f32[3], f32[0,4]) tuple(d, zz)\n}\n");
  if (!g) return;
  gopt_graph *h = apply(g, "tuple-simplifier", &st);
  if (h) CHECK_EQ_INT(count_type(h, "hlo::get-tuple-element"), 0);
  gopt_graph_free(h);
  h = apply(g, "call-inliner", &st);
  if (h) CHECK(count_type(h, "hlo::call") == 0 && count_type(h, "hlo::negate") == 1);
  gopt_graph_free(h);
  h = apply(g, "logistic-expander", &st);
  if (h) CHECK(count_type(h, "hlo::logistic") == 0 && count_type(h, "hlo::exponential") == 1 &&
               count_type(h, "hlo::divide") == 1);
  gopt_graph_free(h);
  h = apply(g, "transpose-folding", &st);
  if (h) {
    CHECK_EQ_INT(st.rewrites, 1);
    for (size_t n = 0; n < h->nodes.n; n++)
      if (!strcmp(gopt_node_type(h, (int32_t)n), "hlo::dot")) {
        size_t k;
        const int64_t *rc = gopt_node_get_ints(h, (int32_t)n, "rhs_contracting_dims", &k);
        CHECK(k == 1 && rc[0] == 1); /* w's dim 1 */
      }
  }
  gopt_graph_free(h);
  h = apply(g, "zero_sized_hlo_elimination", &st);
  if (h) CHECK_EQ_INT(count_type(h, "hlo::broadcast"), 0);
  gopt_graph_free(h);
  gopt_graph *bn = load(
      "HloModule b\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n  s = f32[3] parameter(1)\n"
      "  o = f32[3] parameter(2)\n  m = f32[3] parameter(3)\n  v = f32[3] parameter(4)\n"
      "  i = f32[2,3] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1\n"
      "  t = (f32[2,3], f32[3], f32[3]) batch-norm-training(i, s, o), epsilon=0.001, feature_index=1\n"
      "  ROOT r = f32[2,3] get-tuple-element(t), index=0\n}\n");
  h = bn ? apply(bn, "batchnorm_expander", &st) : NULL;
  if (h) {
    CHECK(count_type(h, "hlo::batch-norm-inference") == 0 && count_type(h, "hlo::batch-norm-training") == 0);
    CHECK_EQ_INT(count_type(h, "hlo::reduce"), 2); /* sum and sum of squares */
    char *text = NULL;
    gopt_error err = {0};
    gopt_graph *r = NULL;
    CHECK(gopt_hlo_save_mem(h, &text, NULL, &err) == 0 && gopt_hlo_load_mem(text, strlen(text), "bn.hlo", &r, &err) == 0);
    free(text);
    gopt_graph_free(r);
  }
  gopt_graph_free(h);
  gopt_graph_free(bn);
  /* every pass leaves a module that exports and re-imports with its instruction count */
  for (int i = 0; i < gopt_pass_count(); i++) {
    h = apply(g, gopt_pass_name(i), &st);
    char *text = NULL;
    size_t len = 0;
    gopt_error err = {0};
    gopt_graph *r = NULL;
    if (h && gopt_hlo_save_mem(h, &text, &len, &err) == 0 && gopt_hlo_load_mem(text, len, "re.hlo", &r, &err) == 0)
      CHECK_MSG(gopt_hlo_instruction_count(r) == gopt_hlo_instruction_count(h), "%s: re-import count", gopt_pass_name(i));
    else
      CHECK_MSG(0, "%s: export/re-import: %s", gopt_pass_name(i), err.msg);
    free(text);
    gopt_graph_free(r);
    gopt_graph_free(h);
  }
  gopt_graph_free(g);
}

int main(void) {
  exec_checks();
  structure_checks();
  return check_exit("test_passes");
}
