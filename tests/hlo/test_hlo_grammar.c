/* test_hlo_grammar.c: the HLO text today's XLA writes: header tables (kept and written back),
 * "x#N" tuple-element operands (nested too), "}, execution_thread=" after a computation, async
 * start/update/done, while/conditional/fusion bodies, sharding, layouts with tiling and memory
 * space (kept for export), attribute keys with '-', JSON backend_config, metadata with
 * stack_frame_id/deduplicated_name/scheduling_name, parameter attributes, the sigil-less style,
 * tuple constants, collectives with every replica_groups form, sharding forms, the 8-, 4- and 2-bit
 * element types;
 * the export -> re-import round trip keeps the structural hash; errors are one line. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hlo_test_util.h"
#include "gopt/hlo.h"

/* 35 instructions: fused 3, async_comp 2, cond 3, body 5, neg_c 2, id_c 1, main 19. */
static const char today[] =
    "HloModule jit_today, is_scheduled=true, entry_computation_layout={(f32[4]{0}, pred[], f32[8,128]{1,0:T(8,128)S(1)})->(f32[4]{0}, f32[8,128]{1,0})}, frontend_attributes={fingerprint_before_lhs=\"ab,c}\"}\n"
    "\n"
    "FileNames\n"
    "1 \"model.py\"\n"
    "\n"
    "FunctionNames\n"
    "1 \"<module>\"\n"
    "2 \"f.<locals>.g\"\n"
    "\n"
    "FileLocations\n"
    "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}\n"
    "\n"
    "StackFrames\n"
    "1 {file_location_id=1 parent_frame_id=1}\n"
    "2 {file_location_id=1 parent_frame_id=1}\n"
    "\n"
    "Empty\n"
    "\n"
    "%fused (p0: f32[4], p1: f32[4]) -> f32[4] {\n"
    "  %p0 = f32[4]{0} parameter(0), metadata={scheduling_name=\"p0\"}\n"
    "  %p1 = f32[4]{0} parameter(1)\n"
    "  ROOT %m = f32[4]{0} multiply(%p0, %p1), metadata={op_name=\"jit(f)/mul\" deduplicated_name=\"m\" scheduling_name=\"m\" stack_frame_id=2}\n"
    "}\n"
    "\n"
    "%async_comp (a: f32[4]) -> f32[4] {\n"
    "  %a = f32[4]{0} parameter(0)\n"
    "  ROOT %n = f32[4]{0} negate(%a)\n"
    "}, execution_thread=\"parallel\"\n"
    "\n"
    "%cond (s: (s32[], f32[4])) -> pred[] {\n"
    "  %s = (s32[], f32[4]{0}) parameter(0)\n"
    "  %lim = s32[] constant(3)\n"
    "  ROOT %lt = pred[] compare(%s#0, %lim), direction=LT\n"
    "}\n"
    "\n"
    "%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {\n"
    "  %s.1 = (s32[], f32[4]{0}) parameter(0)\n"
    "  %one = s32[] constant(1)\n"
    "  %i.1 = s32[] add(%s.1#0, %one)\n"
    "  %v = f32[4]{0} multiply(%s.1#1, %s.1#1)\n"
    "  ROOT %t = (s32[], f32[4]{0}) tuple(%i.1, /*index=1*/%v)\n"
    "}\n"
    "\n"
    "%neg_c (q: f32[4]) -> f32[4] {\n"
    "  %q = f32[4]{0} parameter(0)\n"
    "  ROOT %nq = f32[4]{0} negate(%q)\n"
    "}\n"
    "\n"
    "%id_c (r: f32[4]) -> f32[4] {\n"
    "  ROOT %r = f32[4]{0} parameter(0)\n"
    "}\n"
    "\n"
    "ENTRY %main (x: f32[4], pr: pred[], big: f32[8,128]) -> (f32[4], f32[8,128]) {\n"
    "  %x = f32[4]{0} parameter(0), sharding={replicated}\n"
    "  %pr = pred[] parameter(1)\n"
    "  %big = f32[8,128]{1,0:T(8,128)S(1)} parameter(2), sharding={devices=[2,1]<=[2]}\n"
    "  %zero = s32[] constant(0)\n"
    "  %init = (s32[], f32[4]{0}) tuple(%zero, %x), sharding={{replicated}, {maximal device=0}}\n"
    "  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, backend_config={\"known_trip_count\":{\"n\":\"3\"}}\n"
    "  %nest = ((s32[], f32[4]{0}), f32[4]{0}) tuple(%w, %x)\n"
    "  %inner = f32[4]{0} get-tuple-element(%nest#0), index=1\n"
    "  %sum = f32[4]{0} add(%nest#0#1, %inner), control-predecessors={%w}\n"
    "  %f = f32[4]{0} fusion(%sum, %w#1), kind=kLoop, calls=%fused, frontend_attributes={xla.no_invariant_operands=\"1\"}\n"
    "  %start = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(%f), async_execution_thread=\"parallel\", calls=%async_comp\n"
    "  %upd = ((f32[4]{0}), f32[4]{0}, s32[]) async-update(%start)\n"
    "  %done = f32[4]{0} async-done(%upd)\n"
    "  %cc = (f32[4]{0}, s8[64]{0}) custom-call(%done, %x), custom_call_target=\"__cublas$lt$matmul\", api_version=API_VERSION_STATUS_RETURNING, output_to_operand_aliasing={{0}: (0, {})}, backend_config={\"gemm_backend_config\":{\"alpha_real\":1,\"note\":\"a}b,c\"},\"operation_queue_id\":\"0\"}\n"
    "  %c1 = f32[4]{0} conditional(%pr, %cc#0, %x), true_computation=%neg_c, false_computation=%id_c\n"
    "  %idx = s32[] constant(1)\n"
    "  %c2 = f32[4]{0} conditional(%idx, %c1, %done), branch_computations={%neg_c, %id_c}\n"
    "  %bc = f32[8,128]{0,1:T(128)} copy(%big)\n"
    "  ROOT %out = (f32[4]{0}, f32[8,128]{1,0}) tuple(%c2, %bc)\n"
    "}\n";

static gopt_graph *load_ok(const char *text, const char *label) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_hlo_load_mem(text, strlen(text), label, &g, &err);
  CHECK_MSG(rc == 0 && g, "%s: %s", label, err.msg);
  return g;
}

static int32_t node_named(const gopt_graph *g, const char *name) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (!strcmp(gopt_node_name(g, (int32_t)n), name)) return (int32_t)n;
  return -1;
}

static const gopt_graph *sub(const gopt_graph *g, int32_t n, const char *key) {
  const gopt_attr *a = n >= 0 ? gopt_node_attr(g, n, key) : NULL;
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

/* What the importer keeps of today's text. */
static void check_import(const gopt_graph *g) {
  CHECK_EQ_INT(gopt_hlo_instruction_count(g), 35);
  const char *v = gopt_graph_get_prop(g, "hlo.module");
  CHECK(v && !strcmp(v, "jit_today"));
  v = gopt_graph_get_prop(g, "hlo.table.FileNames");
  CHECK(v && !strcmp(v, "1 \"model.py\""));
  v = gopt_graph_get_prop(g, "hlo.table.StackFrames");
  CHECK(v && !strcmp(v, "1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=1 parent_frame_id=1}"));
  v = gopt_graph_get_prop(g, "hlo.table.Empty");
  CHECK(v && !*v);
  v = gopt_graph_get_prop(g, "hlo.module_attr.frontend_attributes");
  CHECK(v && !strcmp(v, "{fingerprint_before_lhs=\"ab,c}\"}"));
  /* nest = ((s32, f32[4]), f32[4]): "nest#0#1" is one leaf, "nest#0" two */
  int32_t sum = node_named(g, "sum"), inner = node_named(g, "inner"), cc = node_named(g, "cc");
  CHECK(sum >= 0 && !strcmp(gopt_graph_str(g, g->tensors.a[gopt_node_input(g, sum, 0)].name), "nest#0#1"));
  CHECK(inner >= 0 && g->nodes.a[inner].n_in == 2 && gopt_node_get_int(g, inner, "hlo.leaf_offset", -1) == 1);
  CHECK(sum >= 0 && !strcmp(gopt_node_get_string(g, sum, "control-predecessors", ""), "{%w}"));
  CHECK(cc >= 0 && strstr(gopt_node_get_string(g, cc, "backend_config", ""), "\"note\":\"a}b,c\""));
  const gopt_graph *ac = sub(g, node_named(g, "start"), "calls");
  v = ac ? gopt_graph_get_prop(ac, "hlo.comp_attr.execution_thread") : NULL;
  CHECK(v && !strcmp(v, "\"parallel\""));
  CHECK(sub(g, node_named(g, "w"), "body") && sub(g, node_named(g, "c2"), "branch_computations.1"));
}

/* Collectives and scheduling forms (22 instructions + 1 in the async wrapper): replica_groups
 * lists and iota forms ([2,2]<=[2,2]T(1,0)), all-reduce-start/-done, async-start/update/done with
 * a wrapped computation, collective-permute pairs, sharding forms (iota tiles,
 * last_tile_dim_replicate, last_tile_dims={manual}, tuples, maximal), origin=, statistics=,
 * control-predecessors, custom-call api_version/custom_call_schedule/output_to_operand_aliasing/
 * side effect, backend_config as JSON and as MLIR attributes, frontend_attributes, memory spaces on
 * a scalar layout ({:S(2)}), module attributes (input_output_alias, buffer_donor, ...). */
static const char collectives[] =
    "HloModule forms, is_scheduled=true, entry_computation_layout={(f32[8,128]{1,0:T(8,128)S(1)}, f32[4]{0:S(2)})->(f32[8,128]{1,0}, f32[4]{0})}, replica_count=2, num_partitions=4, allow_spmd_sharding_propagation_to_output={true}, frontend_attributes={xla.sdy.meshes=\"{mesh = #sdy.mesh<[\\\"x\\\"=4]>}\"}, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }\n"
    "\n"
    "%add.0 (a: f32[], b: f32[]) -> f32[] {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n"
    "}\n"
    "\n"
    "%wrapped_ag (p: f32[4]) -> f32[8] {\n"
    "  %p = f32[4]{0} parameter(0)\n"
    "  ROOT %ag = f32[8]{0} all-gather(%p), channel_id=3, replica_groups=[1,2]<=[2], dimensions={0}, use_global_device_ids=true\n"
    "}\n"
    "\n"
    "ENTRY %main (x: f32[8,128], y: f32[4]) -> (f32[8,128], f32[4]) {\n"
    "  %x = f32[8,128]{1,0:T(8,128)S(1)} parameter(0), sharding={devices=[4,1]<=[4]}, origin={{\"x\"}}\n"
    "  %y = f32[4]{0:S(2)} parameter(1), sharding={replicated}, parameter_replication={true}\n"
    "  %ar = f32[8,128]{1,0} all-reduce(%x), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%add.0, frontend_attributes={_scheduling_group_id=\"1\",_xla_stream_annotation=\"1\"}, backend_config={\"operation_queue_id\":\"0\",\"wait_on_operation_queues\":[],\"collective_backend_config\":{\"is_sync\":true,\"no_parallel_custom_call\":false}}\n"
    "  %ar2 = f32[4]{0} all-reduce(%y), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=%add.0, control-predecessors={%ar}\n"
    "  %ars = f32[4]{0} all-reduce-start(%ar2), replica_groups=[2,2]<=[4], to_apply=%add.0\n"
    "  %ard = f32[4]{0} all-reduce-done(%ars)\n"
    "  %ags = ((f32[4]{0}), f32[8]{0}) async-start(%ard), calls=%wrapped_ag, async_execution_thread=\"main\"\n"
    "  %agu = ((f32[4]{0}), f32[8]{0}) async-update(%ags)\n"
    "  %agd = f32[8]{0} async-done(%agu), statistics={visualizing_index=1,stat-0=60.5}\n"
    "  %cp = f32[8]{0} collective-permute(%agd), channel_id=2, source_target_pairs={{0,1},{1,0}}\n"
    "  %sl = f32[4]{0} slice(%cp), slice={[0:4]}, sharding={{maximal device=0}}\n"
    "  %cc = (f32[4]{0}, s8[16]{0}) custom-call(%sl), custom_call_target=\"my_target\", api_version=API_VERSION_TYPED_FFI, custom_call_schedule=SCHEDULE_LATEST, output_to_operand_aliasing={{0}: (0, {})}, custom_call_has_side_effect=true, backend_config={foo=1 : i64}, sharding={{replicated}, {manual}}, operand_layout_constraints={f32[4]{0}}\n"
    "  %g = f32[4]{0} get-tuple-element(%cc), index=0, metadata={op_type=\"x\" op_name=\"jit(f)/x\" source_file=\"m.py\" source_line=3 source_end_line=4 source_column=1 source_end_column=9 stack_frame_id=2 deduplicated_name=\"d\" scheduling_name=\"s\" preserve_layout=true}\n"
    "  %cs = (f32[4]{0}, f32[4]{0}, u32[]{:S(2)}) copy-start(%g), cross_program_prefetch_index=0\n"
    "  %cd = f32[4]{0} copy-done(%cs)\n"
    "  %ba = f32[4]{0} add(%cd, %y), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
    "  %bb = f32[4]{0} multiply(%ba, %ba), sharding={devices=[2,2]<=[2,2]T(1,0) last_tile_dims={manual}}\n"
    "  ROOT %t = (f32[8,128]{1,0}, f32[4]{0}) tuple(%ar, %bb), sharding={{devices=[4,1]<=[4]}, {replicated}}\n"
    "}\n";

/* The 8-, 4- and 2-bit element types: parameters, constants (written back as read) and an FP8 GEMM
 * custom-call. */
static const char lowbit[] =
    "HloModule f8\n"
    "ENTRY e {\n"
    "  a = f8e4m3fn[2,2]{1,0} parameter(0)\n"
    "  b = f8e5m2[2,2]{1,0} parameter(1)\n"
    "  s = f32[] parameter(2)\n"
    "  c = f8e4m3fn[2] constant({0.5, -448})\n"
    "  q = s4[3] constant({-8, 7, 1})\n"
    "  u = u4[2] constant({15, 0})\n"
    "  f = f4e2m1fn[2] constant({6, -0.5})\n"
    "  d = (f32[2,2], s8[0]) custom-call(a, b, s, s), custom_call_target=\"__cublas$lt$matmul$f8\", backend_config={\"gemm_backend_config\":{\"alpha_real\":1,\"beta\":0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"0\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]}}}\n"
    "  ca = f32[2,2] convert(a)\n"
    "  ROOT t = (f32[2,2], f8e4m3fn[2], s4[3], u4[2], f4e2m1fn[2], f32[2,2]) tuple(d#0, c, q, u, f, ca)\n"
    "}\n";

/* Module m imports with n instructions, keeps every string of want in its export, and re-imports
 * from it with the same structural hash. */
static void round_trip(const char *m, const char *name, size_t n, const char *const *want) {
  gopt_graph *g = load_ok(m, name), *h = NULL;
  gopt_error err = {0};
  char *text = NULL;
  size_t len = 0;
  CHECK(g && gopt_hlo_instruction_count(g) == n);
  CHECK_EQ_INT(g ? gopt_hlo_save_mem(g, &text, &len, &err) : -1, 0);
  for (int i = 0; text && want[i]; i++) CHECK_MSG(strstr(text, want[i]), "%s: export lacks '%s'", name, want[i]);
  if (text) h = load_ok(text, name);
  CHECK(g && h && gopt_hlo_instruction_count(h) == n && gopt_graph_hash(g) == gopt_graph_hash(h));
  free(text);
  gopt_graph_free(h);
  gopt_graph_free(g);
}

int main(void) {
  gopt_graph *g = load_ok(today, "today.hlo"), *h = NULL;
  gopt_error err = {0};
  char *text = NULL;
  size_t len = 0;
  if (g) check_import(g);
  CHECK_EQ_INT(g ? gopt_hlo_save_mem(g, &text, &len, &err) : -1, 0);
  if (text) {
    static const char *const want[] = {
        "HloModule jit_today, is_scheduled=true, entry_computation_layout={(f32[4]{0}",
        "\nFileNames\n1 \"model.py\"\n\n", "\nEmpty\n\n", "add(%nest#0#1, %inner)",
        "get-tuple-element(%nest#0), index=1", "}, execution_thread=\"parallel\"",
        "%big = f32[8,128]{1,0:T(8,128)S(1)} parameter(2), sharding={devices=[2,1]<=[2]}",
        "%bc = f32[8,128]{0,1:T(128)} copy(%big)", "%p0 = f32[4] parameter(0), metadata={scheduling_name=\"p0\"}",
        "stack_frame_id=2}", NULL};
    for (int i = 0; want[i]; i++) CHECK_MSG(strstr(text, want[i]), "export lacks '%s'", want[i]);
    CHECK(!strstr(text, ".gopt")); /* no helper get-tuple-element or tuple */
    h = load_ok(text, "export.hlo");
    if (g && h) {
      CHECK_EQ_INT(gopt_hlo_instruction_count(h), 35);
      CHECK(gopt_graph_hash(g) == gopt_graph_hash(h));
      check_import(h);
    }
  }
  free(text);
  gopt_graph_free(h);
  gopt_graph_free(g);

  static const char *const want_coll[] = {
      "replica_groups=[2,2]<=[2,2]T(1,0)", "replica_groups={{0,1},{2,3}}", "origin={{\"x\"}}",
      "statistics={visualizing_index=1,stat-0=60.5}", "control-predecessors={%ar}", "custom_call_schedule=SCHEDULE_LATEST",
      "api_version=API_VERSION_TYPED_FFI", "output_to_operand_aliasing={{0}: (0, {})}", "backend_config={foo=1 : i64}",
      "sharding={{replicated}, {manual}}", "last_tile_dims={manual}", "u32[]{:S(2)}", "f32[4]{0:S(2)} parameter(1)",
      "source_target_pairs={{0,1},{1,0}}", "buffer_donor={ (1, {}) }", "calls=%wrapped_ag", NULL};
  round_trip(collectives, "collectives.hlo", 23, want_coll);
  static const char *const want_low[] = {"f8e4m3fn[2] constant({0.5, -448})", "s4[3] constant({-8, 7, 1})",
                                         "u4[2] constant({15, 0})", "f4e2m1fn[2] constant({6, -0.5})",
                                         "f8e5m2[2,2] parameter(1)", NULL};
  round_trip(lowbit, "lowbit.hlo", 10, want_low);

  /* the sigil-less style: the same module without any '%' */
  char *bare = malloc(sizeof today);
  size_t k = 0;
  for (size_t i = 0; bare && today[i]; i++)
    if (today[i] != '%') bare[k++] = today[i];
  if (bare) {
    bare[k] = 0;
    g = load_ok(bare, "bare.hlo");
    CHECK(g && gopt_hlo_instruction_count(g) == 35);
    gopt_graph_free(g);
  }
  free(bare);

  /* an entry_computation_layout that no longer fits the entry is left out of the export */
  static const char stale[] = "HloModule m, entry_computation_layout={(f32[3]{0})->f32[3]{0}}\n\n"
                              "ENTRY e {\n  ROOT p = f32[4]{0} parameter(0)\n}\n";
  g = load_ok(stale, "stale.hlo");
  text = NULL;
  CHECK_EQ_INT(g ? gopt_hlo_save_mem(g, &text, &len, &err) : -1, 0);
  CHECK(text && !strstr(text, "entry_computation_layout") && strstr(text, "HloModule m\n"));
  free(text);
  gopt_graph_free(g);

  /* a tuple constant: one node, its literal written back */
  static const char tc[] = "HloModule t\nENTRY e {\n  c = (f32[2], (s32[], pred[])) constant(({1, 2}, (3, true)))\n"
                           "  x = f32[2] parameter(0)\n  ROOT a = f32[2] add(c#0, x)\n}\n";
  g = load_ok(tc, "tc.hlo");
  text = NULL;
  CHECK(g && gopt_hlo_instruction_count(g) == 3 && gopt_hlo_save_mem(g, &text, &len, &err) == 0);
  CHECK(text && strstr(text, "%c = (f32[2], (s32[], pred[])) constant(({1, 2}, (3, true)))"));
  free(text);
  gopt_graph_free(g);

  static const char head[] = "HloModule m\n\nT\n1 {a=1}\n\nENTRY e {\n  p = (f32[2], s32[]) parameter(0)\n";
  char buf[512];
  snprintf(buf, sizeof buf, "%s  ROOT x = f32[2] negate(p#2)\n}\n", head);
  load_err(buf, "t.hlo:8:3: instruction 'x': operand 'p#2' names no tuple element");
  snprintf(buf, sizeof buf, "%s  ROOT x = f32[2] negate(p#)\n}\n", head);
  load_err(buf, "expected a tuple index after '#'");
  snprintf(buf, sizeof buf, "%s  ROOT x = f32[2] negate(q#0)\n}\n", head);
  load_err(buf, "operand 'q#0' is not defined");
  load_err("HloModule m\nStackFrames\n1 {a=1} junk\nENTRY e {\n ROOT p = f32[] parameter(0)\n}\n",
           "t.hlo:3:8: table 'StackFrames': expected the end of the row");
  load_err("HloModule m\nFileNames\n1\"a\"\nENTRY e {\n ROOT p = f32[] parameter(0)\n}\n",
           "expected ' ' after the row id");
  load_err("HloModule m\nENTRY e {\n ROOT p = f32[] parameter(0)\n}, execution_thread\n", "expected '='");
  return check_exit("test_hlo_grammar");
}
