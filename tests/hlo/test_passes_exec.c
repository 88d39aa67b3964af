/* test_passes_exec.c: every compiler pass on every real module: the result exports and re-imports
 * with the instruction count the pass reports, and a pass that does not expand adds none
 * (structure); and output equality. Every module in
 * tests/hlo/data that gopt's executor can run (and whose tensors hold at most SIZE_LIMIT elements
 * in all, to keep the test to seconds) runs on random inputs (seed 1) before and after each pass
 * and the default pipeline (up to DEFAULT_LIMIT elements: the default pipeline only) (gopt_exec_same_outputs: floats within atol 1e-5 + rtol 1e-4,
 * integers and pred exactly, NaN where NaN). A pass result that no longer runs fails too. A table
 * of the modules that run, and why the others do not, goes to stderr (docs/PASSES.md). Also
 * checks the executor's HLO kernels against hand-worked results and cuda_threefry2x32 against
 * Random123's known-answer vector. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/passes.h"
#include "hlo_test_util.h"

/* Sanitizer builds (CI's ./test --sanitize) run the executor 20x slower: a smaller limit there. */
/* Modules up to SIZE_LIMIT tensor elements run before and after every pass; up to DEFAULT_LIMIT
 * only before and after the default pipeline (2 runs instead of 34, about 6 s for the four
 * modules between the limits). */
#if defined(__SANITIZE_ADDRESS__)
#define SIZE_LIMIT (1 << 20)
#define DEFAULT_LIMIT (1 << 20)
#define MIN_VERIFIED 68
#define MUST_VERIFY 0 /* most modules of must[] in main exceed the limits here */
#define TODAY_EVERY 0 /* today's XLA modules (xla-2026*): the default pipeline only (their interpreted
                       * loops and reference convolutions take minutes under ASan over every pass;
                       * the release build runs every pass on them) */
#else
#define TODAY_EVERY 1
#define SIZE_LIMIT (1 << 22)
#define DEFAULT_LIMIT (1 << 25)
#define MIN_VERIFIED 81
#define MUST_VERIFY 1
#endif
#define MAX_FILES 128

static char *files[MAX_FILES];
static int n_files;

static int collect(const char *path, const struct stat *sb, int type, struct FTW *f) {
  (void)sb, (void)f;
  if (type == FTW_F && n_files < MAX_FILES && gopt_hlo_is_hlo_file(path) && !strstr(path, "README") &&
      !strstr(path, "LICENSE"))
    files[n_files++] = strdup(path);
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static size_t total_elements(const gopt_graph *g) {
  size_t s = 0;
  for (size_t t = 0; t < g->tensors.n; t++)
    if (gopt_tensor_is_static(g, (int32_t)t)) s += (size_t)gopt_tensor_numel(g, (int32_t)t);
  return s;
}

/* Whether g or a computation it calls has a while loop. */
static int has_while(const gopt_graph *g) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (!strcmp(gopt_node_type(g, (int32_t)n), "hlo::while")) return 1;
  for (size_t i = 0; i < g->subgraphs.n; i++)
    if (has_while(g->subgraphs.a[i])) return 1;
  return 0;
}

/* Passes that may add instructions (expanders, inliner, canonicalisers). */
static int may_grow(const char *pass) {
  static const char *const grow[] = {"call-inliner", "logistic-expander", "zero_sized_hlo_elimination",
                                     "batchnorm_expander", "dot_decomposer", "dot_merger", "operand_upcaster",
                                     "default", NULL};
  for (const char *const *q = grow; *q; q++)
    if (!strcmp(pass, *q)) return 1;
  return 0;
}

/* Structure: h (pass pn's result, st its statistics) exports and re-imports with the reported
 * instruction count; a non-expanding pass adds none. */
static void check_structure(const char *name, const char *pn, const gopt_graph *h, const gopt_pass_stats *st) {
  char *text = NULL;
  size_t len = 0;
  gopt_error err = {0};
  gopt_graph *re = NULL;
  int rc = gopt_hlo_save_mem(h, &text, &len, &err);
  if (!rc) rc = gopt_hlo_load_mem(text, len, name, &re, &err);
  CHECK_MSG(rc == 0, "%s: pass %s: export/re-import: %s", name, pn, err.msg);
  if (!rc) CHECK_MSG(gopt_hlo_instruction_count(re) == st->ops_after, "%s: pass %s: reported %zu, re-import %zu", name, pn,
                     st->ops_after, gopt_hlo_instruction_count(re));
  CHECK_MSG(st->ops_after <= st->ops_before || may_grow(pn), "%s: pass %s adds instructions (%zu -> %zu)", name, pn,
            st->ops_before, st->ops_after);
  gopt_graph_free(re);
  free(text);
}

/* Checks one module: every pass's result re-imports with its reported count; where the module runs,
 * its outputs are unchanged. Returns 1 when outputs were verified, 0 when not (reason printed). */
static int check_module(const char *path) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  char msg[600];
  const char *name = strstr(path, "data/") ? strstr(path, "data/") + 5 : path;
  if (gopt_hlo_load(path, &g, &err)) {
    CHECK_MSG(0, "%s: %s", path, err.msg);
    return 0;
  }
  int np = gopt_pass_count(), bad = 0, runs = total_elements(g) <= DEFAULT_LIMIT;
  int every = total_elements(g) <= SIZE_LIMIT; /* else the default pipeline only */
  if (!runs) snprintf(msg, sizeof msg, "%zu tensor elements (limit %d)", total_elements(g), DEFAULT_LIMIT);
  if (has_while(g)) every = 0; /* the interpreted loops take a second a run: default only */
  if (!TODAY_EVERY && strstr(path, "xla-2026")) every = 0;
  for (int p = 0; p <= np; p++) { /* p == np: the default pipeline */
    gopt_graph *h = NULL;
    gopt_pass_stats st = {0};
    gopt_pipeline_step *steps = NULL;
    size_t ns = 0;
    int rc = p < np ? gopt_pass_run(p, g, &h, &st, &err) : gopt_pipeline_run("default", g, &h, &steps, &ns, &err);
    const char *pn = p < np ? gopt_pass_name(p) : "default";
    CHECK_MSG(rc == 0, "%s: pass %s: %s", name, pn, err.msg);
    if (!rc && p == np) st.ops_before = gopt_hlo_instruction_count(g), st.ops_after = gopt_hlo_instruction_count(h);
    free(steps);
    if (!rc) check_structure(name, pn, h, &st);
    if (!every && p < np) {
      gopt_graph_free(h);
      continue;
    }
    int same = rc || !runs ? 0 : gopt_exec_same_outputs(g, h, 1, 1e-4, 1e-5, msg, sizeof msg);
    gopt_graph_free(h);
    if (same == -1) runs = 0; /* the module itself does not run: structure only from here */
    if (!runs) continue;
    CHECK_MSG(same == 1, "%s: pass %s: %s", name, pn, msg);
    bad += same != 1;
  }
  if (!runs) {
    const char *m = strstr(msg, "node '") ? strstr(msg, "node '") : msg;
    fprintf(stderr, "  not run      %s: %s\n", name, m);
  } else
    fprintf(stderr, "  %s %s: %s\n", bad ? "MISMATCH    " : "verified    ", name, every ? "every pass + default" : "default pipeline");
  gopt_graph_free(g);
  return runs && !bad;
}

/* Random123's known-answer test for Threefry-2x32, 20 rounds (kat_vectors: threefry2x32_20 with
 * pi digits as key and counter: 0x13198a2e 0x03707344, 0x243f6a88 0x85a308d3 -> 0xc4923a9c
 * 0x483df7a0; written in decimal, as HLO literals are). */
static void threefry_kat(void) {
  static const char mod[] =
      "HloModule t\nENTRY e {\n  k0 = u32[1] constant({320440878})\n  k1 = u32[1] constant({57701188})\n"
      "  x0 = u32[1] constant({608135816})\n  x1 = u32[1] constant({2242054355})\n"
      "  ROOT c = (u32[1], u32[1]) custom-call(k0, k1, x0, x1), custom_call_target=\"cuda_threefry2x32\"\n}\n";
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_host_tensor o[2] = {{0}};
  gopt_exec *x = NULL;
  gopt_exec_opts eo = {0};
  int rc = gopt_hlo_load_mem(mod, strlen(mod), "kat.hlo", &g, &err);
  if (!rc) rc = gopt_exec_new(g, &eo, &x, NULL, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  if (!rc) rc = gopt_exec_get_output(x, 0, &o[0], &err);
  if (!rc) rc = gopt_exec_get_output(x, 1, &o[1], &err);
  CHECK_MSG(rc == 0, "threefry: %s", err.msg);
  if (!rc) {
    CHECK_EQ_INT(((uint32_t *)o[0].data)[0], 0xc4923a9cu);
    CHECK_EQ_INT(((uint32_t *)o[1].data)[0], 0x483df7a0u);
  }
  gopt_host_tensor_clear(&o[0]);
  gopt_host_tensor_clear(&o[1]);
  gopt_exec_free(x);
  gopt_graph_free(g);
}

/* HLO kernels of the executor against hand-worked results (XLA's operation semantics). */
static void kernel_cases(void) {
  static const double sk[] = {0, 1, 1, 2, 3}, sv[] = {4, 1, 3, 2, 0}, ga[] = {5, 6, 1, 2}, rm[] = {5, 7},
                      pd[] = {0, 1, 0, 2, 0, 0}, dt[] = {11, 17, 53, 67}, bc[] = {1, 2, 1, 2, 1, 2};
  const char *sort =
      "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  ROOT r = pred[] compare(a, b), direction=LT\n}\n"
      "ENTRY e {\n  k = f32[5] constant({3, 1, 2, 1, 0})\n  v = s32[5] constant({0, 1, 2, 3, 4})\n"
      "  ROOT s = (f32[5], s32[5]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt\n}\n";
  kernel_case("sort keys", sort, 0, sk, 5);
  kernel_case("sort values (stable)", sort, 1, sv, 5);
  kernel_case("gather rows 2 and 0",
              "ENTRY e {\n  x = f32[3,2] constant({ {1, 2}, {3, 4}, {5, 6} })\n  i = s32[2,1] constant({ {2}, {0} })\n"
              "  ROOT g = f32[2,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
              "index_vector_dim=1, slice_sizes={1,2}\n}\n", 0, ga, 4);
  kernel_case("reduce max over dim 1",
              "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
              "ENTRY e {\n  x = f32[2,3] constant({ {1, 5, 2}, {7, 0, 3} })\n  z = f32[] constant(-100)\n"
              "  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=mx\n}\n", 0, rm, 2);
  kernel_case("pad low 1, interior 1, high 2",
              "ENTRY e {\n  x = f32[2] constant({1, 2})\n  z = f32[] constant(0)\n  ROOT p = f32[6] pad(x, z), padding=1_2_1\n}\n",
              0, pd, 6);
  kernel_case("batched dot", /* per batch b: a[b] (1x2) times b[b] (2x2): 1*3+2*4, 1*5+2*6; 3*7+4*8, 3*9+4*10 */
              "ENTRY e {\n  a = f32[2,1,2] constant({ { {1, 2} }, { {3, 4} } })\n  b = f32[2,2,2] constant({ { {3, 5}, {4, 6} }, { {7, 9}, {8, 10} } })\n"
              "  d = f32[2,1,2] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}\n"
              "  ROOT r = f32[4] reshape(d)\n}\n", 0, dt, 4);
  static const double sh[] = {1, 2, 3}, ob[] = {4, 6};
  kernel_case("Sharding custom-call is the identity on one device",
              "ENTRY e {\n  x = f32[3] constant({1, 2, 3})\n"
              "  ROOT s = f32[3] custom-call(x), custom_call_target=\"Sharding\", sharding={replicated}\n}\n", 0, sh, 3);
  kernel_case("opt-barrier passes every leaf through",
              "ENTRY e {\n  a = f32[2] constant({1, 2})\n  b = f32[2] constant({3, 4})\n"
              "  t = (f32[2], f32[2]) tuple(a, b)\n  o = (f32[2], f32[2]) opt-barrier(t)\n"
              "  x = f32[2] get-tuple-element(o), index=0\n  y = f32[2] get-tuple-element(o), index=1\n"
              "  ROOT r = f32[2] add(x, y)\n}\n", 0, ob, 2);
  kernel_case("broadcast along dim 1",
              "ENTRY e {\n  x = f32[2] constant({1, 2})\n  ROOT b = f32[3,2] broadcast(x), dimensions={1}\n}\n", 0, bc, 6);
  static const double as[] = {5, 12, 21};
  kernel_case("async-start/-update/-done run the called computation", /* x * y + x */
              "comp {\n  p0 = f32[3] parameter(0)\n  p1 = f32[3] parameter(1)\n  ROOT m = f32[3] multiply(p0, p1)\n}\n"
              "ENTRY e {\n  x = f32[3] constant({1, 2, 3})\n  y = f32[3] constant({4, 5, 6})\n"
              "  s = ((f32[3], f32[3]), f32[3], u32[]) async-start(x, y), calls=comp\n"
              "  u = ((f32[3], f32[3]), f32[3], u32[]) async-update(s)\n  d = f32[3] async-done(u)\n"
              "  ROOT r = f32[3] add(d, x)\n}\n", 0, as, 3);
  /* per row, the 3 largest, ties in index order: {1, 3, 3, 0} -> 3 (1), 3 (2), 1 (0); {2, -1, 2, 5} -> 5 (3), 2 (0), 2 (2) */
#define TOPK_X "  x = f32[2,4] constant({ {1, 3, 3, 0}, {2, -1, 2, 5} })\n"
  static const double tv2[] = {3, 3, 1, 5, 2, 2}, ti2[] = {1, 2, 0, 3, 0, 2};
  kernel_case("topk values", "ENTRY e {\n" TOPK_X "  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true\n}\n", 0, tv2, 6);
  kernel_case("topk indices", "ENTRY e {\n" TOPK_X "  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true\n}\n", 1, ti2, 6);
  static const double sv3[] = {0, 1, 3, -1, 2, 2}, si3[] = {3, 0, 1, 1, 0, 2};
  kernel_case("topk largest=false", "ENTRY e {\n" TOPK_X "  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=false\n}\n", 0, sv3, 6);
  kernel_case("topk largest=false indices", "ENTRY e {\n" TOPK_X "  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=false\n}\n", 1, si3, 6);
  /* scan (XLA's ScanExpander semantics): cumulative sums, forward and reversed, along either dim */
#define SCAN_ADD "add {\n  a = f32[] parameter(0)\n  c = f32[] parameter(1)\n  s = f32[] add(a, c)\n  ROOT t = (f32[], f32[]) tuple(s, s)\n}\n"
  static const double cs[] = {1, 3, 6, 10}, csc[] = {10}, rcs[] = {10, 9, 7, 4}, c2[] = {1, 3, 6, 104, 109, 115}, c2c[] = {6, 115},
                      c0[] = {1, 2, 3, 5, 7, 9};
  const char *cum = SCAN_ADD "ENTRY e {\n  x = f32[4] constant({1, 2, 3, 4})\n  z = f32[] constant(0)\n"
                    "  ROOT s = (f32[4], f32[]) scan(x, z), dimensions={0}, num_carries=1, is_associative=true, to_apply=add\n}\n";
  kernel_case("scan: cumsum", cum, 0, cs, 4);
  kernel_case("scan: cumsum's final carry", cum, 1, csc, 1);
  kernel_case("scan: reversed cumsum",
              SCAN_ADD "ENTRY e {\n  x = f32[4] constant({1, 2, 3, 4})\n  z = f32[] constant(0)\n"
              "  ROOT s = (f32[4], f32[]) scan(x, z), dimensions={0}, num_carries=1, is_reverse=true, to_apply=add\n}\n", 0, rcs, 4);
#define SCAN_X "  x = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
  const char *row = SCAN_ADD "ENTRY e {\n" SCAN_X "  z = f32[2] constant({0, 100})\n"
                    "  ROOT s = (f32[2,3], f32[2]) scan(x, z), dimensions={1}, num_carries=1, to_apply=add\n}\n";
  kernel_case("scan along dim 1 of a matrix", row, 0, c2, 6);
  kernel_case("scan along dim 1: final carries", row, 1, c2c, 2);
  kernel_case("scan along dim 0 of a matrix",
              SCAN_ADD "ENTRY e {\n" SCAN_X "  z = f32[3] constant({0, 0, 0})\n"
              "  ROOT s = (f32[2,3], f32[3]) scan(x, z), dimensions={0}, num_carries=1, to_apply=add\n}\n", 0, c0, 6);
  kernel_case("__gpu$TopK with a greater-than comparator",
              "gt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
              "  ROOT r = pred[] compare(a, b), direction=GT\n}\n"
              "ENTRY e {\n" TOPK_X "  ROOT t = (f32[2,3], s32[2,3]) custom-call(x), custom_call_target=\"__gpu$TopK\", "
              "called_computations={gt}\n}\n", 1, ti2, 6);
}

int main(void) {
  threefry_kat();
  kernel_cases();
  CHECK(nftw("tests/hlo/data", collect, 16, FTW_PHYS) == 0);
  qsort(files, (size_t)n_files, sizeof *files, cmp_str);
  int verified = 0;
  /* Modules the executor runs only with its cuDNN convolution custom-calls, topk/__gpu$TopK, scan,
   * async-start/-done and five-operand reduce-window kernels: each must verify (release limits). */
  static const char *const must[] = {"xla-2026b/cnn_train_step.after_gpu.hlo", "xla-2026b/conv_forms.after_gpu.hlo",
                                     "xla-2026b/control_flow.before.hlo", "xla-2026b/control_flow.after_gpu.hlo",
                                     "xla-2026b/lstm_train_step.after_gpu.hlo"};
  for (int i = 0; i < n_files; i++) {
    int ok = check_module(files[i]);
    verified += ok;
    for (size_t j = 0; MUST_VERIFY && j < sizeof must / sizeof must[0]; j++)
      if (strstr(files[i], must[j])) CHECK_MSG(ok, "%s is not verified", must[j]);
  }
  fprintf(stderr, "%d of %d modules executable and verified (every pass and the default pipeline)\n",
          verified, n_files);
  CHECK(n_files == 109); /* 85 shared modules + 4 of today's XLA (xla-2026) + 20 more (xla-2026b) */
  CHECK(verified >= MIN_VERIFIED); /* docs/PASSES.md lists them */
  for (int i = 0; i < n_files; i++) free(files[i]);
  return check_exit("test_passes_exec");
}
