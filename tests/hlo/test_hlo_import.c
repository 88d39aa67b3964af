/* test_hlo_import.c: the HLO importer on hand-written modules: the new syntax (bare names, untyped
 * operands, headers without signatures, index comments, elided constants, module attributes), the
 * old one, tuples flattened into leaves, called computations as sub-graphs, opaque ops kept,
 * literal decoding, shapes checked against gopt's rules, and one-line errors with line:column. */
#include <string.h>

#include "check.h"
#include "hlo_test_util.h"
#include "gopt/hlo.h"
#include "gopt/ops.h"

static const char new_syntax[] =
    "HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, s32[])->(f32[2,3]{1,0}, f32[3])}, "
    "input_output_alias={ {0}: (0, {}, may-alias) }\n\n"
    "region_0.4 {\n  Arg_0.5 = f32[] parameter(0)\n  Arg_1.6 = f32[] parameter(1)\n"
    "  ROOT add.7 = f32[] add(Arg_0.5, Arg_1.6)\n}\n\n"
    "ENTRY main.12 {\n  Arg_0.1 = f32[2,3]{1,0} parameter(0)\n  Arg_1.2 = s32[] parameter(1)\n"
    "  constant.3 = f32[] constant(0)\n  w = f32[3,4]{1,0} constant({...})\n"
    "  c2 = f32[2,2]{1,0} constant({ {1.5, -2}, {inf, 3e2} })\n"
    "  reduce.8 = f32[3]{0} reduce(Arg_0.1, constant.3), dimensions={0}, to_apply=region_0.4\n"
    "  dot.9 = f32[2,4]{1,0} dot(Arg_0.1, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  t = (f32[2,3]{1,0}, /*index=1*/f32[3]{0}) tuple(Arg_0.1, reduce.8)\n"
    "  g = f32[3]{0} get-tuple-element(t), index=1\n"
    "  weird.10 = f32[5] my-new-op(g), foo={bar}\n"
    "  ROOT tuple.11 = (f32[2,3]{1,0}, f32[3]{0}) tuple(Arg_0.1, g)\n}\n";

static const char old_syntax[] =
    "HloModule m\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
    "ENTRY %e (p: (f32[4], s32[])) -> f32[4] {\n  %p = (f32[4]{0}, s32[]) parameter(0)\n"
    "  %x = f32[4]{0} get-tuple-element((f32[4]{0}, s32[]) %p), index=0\n"
    "  %c = pred[4]{0} compare(f32[4]{0} %x, f32[4]{0} %x), direction=LT\n"
    "  ROOT %y = f32[4]{0} select(pred[4]{0} %c, f32[4]{0} %x, f32[4]{0} %x)\n}\n";

int main(void) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_hlo_load_mem(new_syntax, strlen(new_syntax), "new.hlo", &g, &err), 0);
  if (g) {
    CHECK_EQ_INT(gopt_hlo_instruction_count(g), 14); /* 3 in region_0.4, 11 in the entry */
    CHECK_EQ_INT(g->inputs.n, 2);
    CHECK_EQ_INT(g->outputs.n, 2);
    int32_t w = gopt_graph_find_tensor(g, "w"), c2 = gopt_graph_find_tensor(g, "c2");
    CHECK(w >= 0 && (g->tensors.a[w].flags & GOPT_T_CONST) && gopt_tensor_data(g, w) == NULL);
    CHECK(c2 >= 0 && gopt_tensor_data(g, c2) != NULL);
    if (c2 >= 0 && gopt_tensor_data(g, c2)) {
      const float *v = gopt_tensor_data(g, c2);
      CHECK(v[0] == 1.5f && v[1] == -2.0f && v[2] > 1e30f && v[3] == 300.0f);
    }
    CHECK(gopt_graph_find_tensor(g, "t#0") >= 0 && gopt_graph_find_tensor(g, "t#1") >= 0);
    int seen_reduce = 0, seen_weird = 0, seen_dot = 0;
    for (size_t n = 0; n < g->nodes.n; n++) {
      const char *ty = gopt_node_type(g, (int32_t)n);
      if (!strcmp(ty, "hlo::reduce")) {
        const gopt_attr *a = gopt_node_attr(g, (int32_t)n, "to_apply");
        seen_reduce = a && a->kind == GOPT_ATTR_GRAPH &&
                      g->subgraphs.a[a->v.graph]->nodes.n == 1;
      }
      if (!strcmp(ty, "hlo::my-new-op"))
        seen_weird = (g->nodes.a[n].flags & GOPT_N_OPAQUE) &&
                     !strcmp(gopt_node_get_string(g, (int32_t)n, "foo", ""), "{bar}");
      if (!strcmp(ty, "hlo::dot")) {
        gopt_cost c;
        gopt_node_cost(g, (int32_t)n, &c);
        seen_dot = g->nodes.a[n].op == GOPT_OP_EINSUM && c.flops == 2 * 2 * 4 * 3;
      }
    }
    CHECK(seen_reduce && seen_weird && seen_dot);
  }
  gopt_graph_free(g);
  g = NULL;
  CHECK_EQ_INT(gopt_hlo_load_mem(old_syntax, strlen(old_syntax), "old.hlo", &g, &err), 0);
  if (g) {
    CHECK_EQ_INT(gopt_hlo_instruction_count(g), 4); /* %add is never called: not kept (warned) */
    CHECK_EQ_INT(g->inputs.n, 2); /* the tuple parameter's two leaves */
    CHECK(gopt_graph_find_tensor(g, "p#1") >= 0);
  }
  gopt_graph_free(g);

  load_err("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[3] add(x, x)\n}\n",
           "t.hlo:4:3: instruction 'y': the text's shape disagrees");
  /* a dot with its own result type (XLA's preferred_element_type): bf16 x bf16 -> f32 is kept as
   * the text says (opaque, dims checked), a mixed dot with wrong dims is rejected */
  static const char mixed[] = "HloModule m\nENTRY e {\n  x = bf16[2,3] parameter(0)\n  y = bf16[3,4] parameter(1)\n"
                              "  ROOT d = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  g = NULL;
  CHECK_EQ_INT(gopt_hlo_load_mem(mixed, strlen(mixed), "t.hlo", &g, &err), 0);
  if (g) {
    int32_t d = gopt_graph_find_tensor(g, "d");
    CHECK(d >= 0 && g->tensors.a[d].dtype == GOPT_DT_FLOAT && gopt_tensor_dims(g, d)[1] == 4);
    CHECK(d >= 0 && (g->nodes.a[g->tensors.a[d].producer].flags & GOPT_N_OPAQUE));
    gopt_cost c;
    if (d >= 0) gopt_node_cost(g, g->tensors.a[d].producer, &c);
    CHECK(d >= 0 && c.flops == 2 * 2 * 4 * 3);
  }
  gopt_graph_free(g);
  load_err("HloModule m\nENTRY e {\n  x = bf16[2,3] parameter(0)\n  y = bf16[3,4] parameter(1)\n"
           "  ROOT d = f32[2,5] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
           "t.hlo:5:3: instruction 'd': the text's shape disagrees with gopt's shape rule (dims against the dimension");
  load_err("HloModule m\nENTRY e {\n  x = bf16[2,3] parameter(0)\n  y = bf16[4,4] parameter(1)\n"
           "  ROOT d = f32[2,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
           "t.hlo:5:3: instruction 'd'");
  load_err("HloModule m\nENTRY e {\n  ROOT y = f32[3] negate(z)\n}\n", "t.hlo:3:3: instruction 'y': operand 'z'");
  load_err("HloModule m\nENTRY e {\n  x = f32[2 parameter(0)\n}\n", "t.hlo:3:12:");
  load_err("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n", "not closed");
  load_err("HloModule m\nENTRY e {\n  x = q9[2] parameter(0)\n}\n", "t.hlo:3:7: unsupported element type");
  load_err("HloModule m\nENTRY e {\n  x = f32[2] constant({1,2,3})\n}\n", "more values");
  load_err("HloModule m\nENTRY e {\n  x = f32[2] call(), to_apply=nope\n}\n", "no computation named 'nope'");
  load_err("Hlo", "not an HLO module");
  load_err("HloModule m\nENTRY e {\n  x = f32[2] parameter(1)\n}\n", "parameter(0) is missing");
  return check_exit("test_hlo_import");
}
