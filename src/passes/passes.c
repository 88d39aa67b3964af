/* passes.c: the pass registry (one table, addressed by index or XLA's name), the driver that runs
 * a pass over a clone of a graph and every computation it calls, the pipelines (XLA's CPU
 * default order with its fixed-point loop, or a list), and the rewrite helpers of
 * passes_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/hlo.h"
#include "gopt/ops.h"
#include "ir/ir_internal.h"
#include "ops/ops_hlo.h"
#include "passes/passes_internal.h"

static const struct {
  const char *name, *desc;
  pass_fn fn;
} passes[] = {
    {"algsimp", "algebraic simplifier (rules in docs/PASSES.md)", pass_algsimp},
    {"cse", "common-subexpression elimination (nodes and equal constants)", pass_cse},
    {"dce", "dead-code elimination (side-effecting ops kept)", pass_dce},
    {"constant_folding", "evaluates elementwise ops and broadcasts of constants", pass_constant_folding},
    {"tuple-simplifier", "get-tuple-element(tuple) and tuple(get-tuple-element...) folding", pass_tuple_simplifier},
    {"transpose-folding", "folds transposes of dot operands into the dimension numbers", pass_transpose_folding},
    {"call-inliner", "inlines call instructions", pass_call_inliner},
    {"zero_sized_hlo_elimination", "replaces ops with zero-element results by constants", pass_zero_sized},
    {"logistic-expander", "logistic(x) -> 1 / (1 + exp(-x))", pass_logistic_expander},
    {"batchnorm_expander", "batch-norm-inference/-training as reduce and elementwise ops", pass_batchnorm_expander},
    {"broadcast-folding", "broadcast of broadcast, elementwise ops sunk below broadcasts, rearranged scalar broadcasts", pass_broadcast_folding},
    {"reshape-mover", "sinks equal reshapes/transposes below elementwise ops", pass_reshape_mover},
    {"dot_decomposer", "canonical dots: [batch, M, K] x [batch, K, N] with transposes and reshapes", pass_dot_decomposer},
    {"dot_merger", "two independent dots sharing an operand become one dot and two slices", pass_dot_merger},
    {"operand_upcaster", "converts dot/convolution operands to a wider result type", pass_operand_upcaster},
    {"simplify-while-loops", "while loops with a known trip count of 0 or 1 removed or made a call", pass_while_simplifier},
};
#define N_PASSES ((int)(sizeof passes / sizeof passes[0]))

int gopt_pass_count(void) { return N_PASSES; }
const char *gopt_pass_name(int i) { return i >= 0 && i < N_PASSES ? passes[i].name : NULL; }
const char *gopt_pass_description(int i) { return i >= 0 && i < N_PASSES ? passes[i].desc : NULL; }

int gopt_pass_find(const char *name) {
  for (int i = 0; name && i < N_PASSES; i++)
    if (!strcmp(passes[i].name, name)) return i;
  return -1;
}

/* ---- helpers ----------------------------------------------------------------------------- */

const char *pass_op(const gopt_graph *g, int32_t n) { return ops_hlo_opcode(g, n); }

int pass_is(const gopt_graph *g, int32_t n, const char *op) {
  const char *o = ops_hlo_opcode(g, n);
  return o && !strcmp(o, op);
}

int pass_same_type(const gopt_graph *g, int32_t a, int32_t b) {
  if (a < 0 || b < 0) return 0;
  const gopt_tensor *x = &g->tensors.a[a], *y = &g->tensors.a[b];
  if (x->dtype != y->dtype || x->rank != y->rank || ((x->flags | y->flags) & GOPT_T_NOSHAPE)) return 0;
  return x->rank == 0 || !memcmp(gopt_tensor_dims(g, a), gopt_tensor_dims(g, b), (size_t)x->rank * sizeof(int64_t));
}

int pass_is_output(const pctx *p, int32_t t) {
  for (size_t i = 0; i < p->g->outputs.n; i++)
    if (p->g->outputs.a[i] == t) return 1;
  return 0;
}

static void drop_unused(pctx *p, int32_t n, int depth);

/* Removes node n when none of its results is used (or a graph output) and it has no side
 * effect, then the operands that leaves unused, as XLA's RemoveInstructionAndUnusedOperands. */
void pass_drop_unused(pctx *p, int32_t n) { drop_unused(p, n, 0); }

static void drop_unused(pctx *p, int32_t n, int depth) {
  gopt_graph *g = p->g;
  if (n < 0 || !gopt_node_alive(g, n) || pass_side_effect(g, n) || depth > 64) return;
  for (int i = 0; i < g->nodes.a[n].n_out; i++) {
    int32_t t = gopt_node_output(g, n, i);
    if (gopt_tensor_use_count(g, t) || pass_is_output(p, t)) return;
  }
  int nin = g->nodes.a[n].n_in;
  int32_t ins[16];
  for (int i = 0; i < nin && i < 16; i++) ins[i] = gopt_node_input(g, n, i);
  gopt_graph_remove_node(g, n);
  p->st->removed++;
  for (int i = 0; i < nin && i < 16; i++)
    if (ins[i] >= 0) drop_unused(p, g->tensors.a[ins[i]].producer, depth + 1);
}

void pass_replace(pctx *p, int32_t n, const int32_t *to) {
  gopt_graph *g = p->g;
  int no = g->nodes.a[n].n_out, nin = g->nodes.a[n].n_in;
  int32_t ins[16];
  for (int i = 0; i < nin && i < 16; i++) ins[i] = gopt_node_input(g, n, i);
  for (int i = 0; i < no; i++) gopt_graph_replace_uses(g, gopt_node_output(g, n, i), to[i]);
  gopt_graph_remove_node(g, n);
  p->st->removed++;
  p->st->rewrites++;
  for (int i = 0; i < nin && i < 16; i++)
    if (ins[i] >= 0) drop_unused(p, g->tensors.a[ins[i]].producer, 0);
}

static int const_all_equal(const gopt_graph *g, int32_t t, double v) {
  const gopt_tensor *x = &g->tensors.a[t];
  const void *d = gopt_tensor_data(g, t);
  if (!(x->flags & GOPT_T_CONST) || !d) return 0;
  int64_t ne = gopt_tensor_numel(g, t);
  if (g->consts.a[x->cdata].nbytes < (size_t)ne * gopt_dtype_size(x->dtype)) return 0;
  for (int64_t i = 0; i < ne; i++) {
    double e;
    switch (x->dtype) {
    case GOPT_DT_FLOAT: e = ((const float *)d)[i]; break;
    case GOPT_DT_DOUBLE: e = ((const double *)d)[i]; break;
    case GOPT_DT_INT32: e = ((const int32_t *)d)[i]; break;
    case GOPT_DT_INT64: e = (double)((const int64_t *)d)[i]; break;
    case GOPT_DT_UINT32: e = ((const uint32_t *)d)[i]; break;
    case GOPT_DT_BOOL: case GOPT_DT_UINT8: e = ((const uint8_t *)d)[i]; break;
    default: return 0;
    }
    if (e != v) return 0;
  }
  return 1;
}

int pass_all_equal(const gopt_graph *g, int32_t t, double v) {
  if (t < 0) return 0;
  if (const_all_equal(g, t, v)) return 1;
  int32_t n = g->tensors.a[t].producer;
  return n >= 0 && pass_is(g, n, "broadcast") && g->nodes.a[n].n_in == 1 &&
         const_all_equal(g, gopt_node_input(g, n, 0), v);
}

int pass_elementwise(const char *op) {
  static const char *const u[] = {"abs", "negate", "exponential", "log", "sqrt", "rsqrt", "tanh", "floor",
                                  "ceil", "sign", "not", "logistic", "sine", "cosine", "convert",
                                  "exponential-minus-one", "log-plus-one", "add", "subtract", "multiply",
                                  "divide", "maximum", "minimum", "power", "and", "or", "xor", "compare",
                                  "select", "clamp", "remainder", "atan2", NULL};
  for (const char *const *q = u; *q; q++)
    if (!strcmp(op, *q)) return 1;
  return 0;
}

/* Copies n's STRING attributes (compare's direction, ...) to node m and re-derives m's kind. */
int pass_copy_string_attrs(pctx *p, int32_t n, int32_t m) {
  gopt_graph *g = p->g;
  for (uint16_t a = 0; a < g->nodes.a[n].n_attr; a++) {
    const gopt_attr *at = &g->attrs.a[g->nodes.a[n].attr + a];
    if (at->kind != GOPT_ATTR_STRING) continue;
    char key[128];
    snprintf(key, sizeof key, "%s", gopt_graph_str(g, at->name));
    char *val = strdup(gopt_graph_str(g, at->v.s));
    int bad = !val || gopt_node_set_string(g, m, key, val);
    free(val);
    if (bad) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  }
  ops_hlo_set_kind(g, m, 0);
  return 0;
}

int pass_side_effect(const gopt_graph *g, int32_t n) {
  const char *op = pass_op(g, n);
  if (!op) return 0;
  static const char *const keep[] = {"rng", "infeed", "outfeed", "send", "send-done", "recv",
                                     "recv-done", "after-all", "all-reduce", "all-gather",
                                     "all-to-all", "collective-permute", "reduce-scatter", NULL};
  for (const char *const *k = keep; *k; k++)
    if (!strcmp(op, *k)) return 1;
  if (!strcmp(op, "custom-call"))
    return !strcmp(gopt_node_get_string(g, n, "custom_call_has_side_effect", "false"), "true");
  return 0;
}

int32_t pass_add_hlo(pctx *p, const char *op, const char *hint, int n_in, const int32_t *ins,
                     int dtype, int rank, const int64_t *dims) {
  gopt_graph *g = p->g;
  char type[64], name[96];
  snprintf(type, sizeof type, "hlo::%s", op);
  int64_t d[GOPT_MAX_RANK]; /* dims may point into g's shape storage, which adding a tensor moves */
  if (rank < 0 || rank > GOPT_MAX_RANK) return gopt_error_set(p->err, GOPT_EINVAL, "pass: rank %d", rank), -1;
  if (rank) memcpy(d, dims, (size_t)rank * sizeof *d);
  snprintf(name, sizeof name, "%s.gopt%zu", hint, g->nodes.n);
  int32_t t = gopt_graph_add_tensor(g, gopt_graph_find_tensor(g, name) >= 0 ? NULL : name, dtype,
                                    rank, d, p->err);
  if (t < 0) return -1;
  int32_t n = gopt_graph_add_node(g, type, gopt_graph_str(g, g->tensors.a[t].name), n_in, ins, 1, &t, p->err);
  if (n < 0) return -1;
  ops_hlo_set_kind(g, n, 0);
  p->st->added++;
  return t;
}

int32_t pass_splat(pctx *p, int dtype, double v, int rank, const int64_t *dims) {
  gopt_graph *g = p->g;
  char name[64];
  snprintf(name, sizeof name, "constant.gopt%zu", g->tensors.n);
  int32_t c = gopt_graph_add_tensor(g, gopt_graph_find_tensor(g, name) >= 0 ? NULL : name, dtype, 0, NULL, p->err);
  if (c < 0) return -1;
  unsigned char buf[8] = {0};
  switch (dtype) {
  case GOPT_DT_FLOAT: { float f = (float)v; memcpy(buf, &f, 4); break; }
  case GOPT_DT_DOUBLE: memcpy(buf, &v, 8); break;
  case GOPT_DT_INT32: { int32_t i = (int32_t)v; memcpy(buf, &i, 4); break; }
  case GOPT_DT_INT64: { int64_t i = (int64_t)v; memcpy(buf, &i, 8); break; }
  default: return gopt_error_set(p->err, GOPT_EUNSUP, "pass: no constant of type %s", gopt_dtype_name(dtype)), -1;
  }
  if (gopt_tensor_set_const(g, c, buf, gopt_dtype_size(dtype), p->err)) return -1;
  if (rank == 0) return c;
  int32_t b = pass_add_hlo(p, "broadcast", "broadcast", 1, &c, dtype, rank, dims);
  int64_t none = 0;
  if (b >= 0 && gopt_node_set_ints(g, g->tensors.a[b].producer, "dimensions", &none, 0))
    return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory"), -1;
  return b;
}

int pass_slice_set(pctx *p, int32_t n, int rank, const int64_t *st, const int64_t *lim, const int64_t *sd) {
  char buf[GOPT_MAX_RANK * 72 + 4];
  size_t o = 0;
  buf[o++] = '{';
  for (int i = 0; i < rank; i++)
    o += (size_t)snprintf(buf + o, sizeof buf - o, "%s[%lld:%lld:%lld]", i ? ", " : "", (long long)st[i],
                          (long long)lim[i], (long long)sd[i]);
  snprintf(buf + o, sizeof buf - o, "}");
  if (gopt_node_set_string(p->g, n, "slice", buf)) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  return 0;
}

int pass_set_ints(pctx *p, int32_t t, const char *key, const int64_t *v, size_t k) {
  int32_t n = p->g->tensors.a[t].producer;
  int64_t copy[2 * GOPT_MAX_RANK + 1];
  if (k > 2 * GOPT_MAX_RANK) return gopt_error_set(p->err, GOPT_EINVAL, "pass: too many dimensions");
  if (k) memcpy(copy, v, k * sizeof *v); /* v may point into g->ints, which may move */
  if (gopt_node_set_ints(p->g, n, key, copy, k)) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  ops_hlo_set_kind(p->g, n, 0);
  return 0;
}

/* ---- driver --------------------------------------------------------------------------------- */

static int run_on(pass_fn fn, gopt_graph *g, gopt_pass_stats *st, gopt_error *err, int depth) {
  if (depth > 64) return gopt_error_set(err, GOPT_EUNSUP, "pass: computations nest deeper than 64");
  for (size_t s = 0; s < g->subgraphs.n; s++) {
    int rc = run_on(fn, g->subgraphs.a[s], st, err, depth + 1);
    if (rc) return rc;
  }
  pctx p = {g, st, err, NULL, 0};
  int rc = fn(&p);
  if (rc) return rc;
  if (g->n_dead && gopt_graph_compact(g, NULL))
    return gopt_error_set(err, GOPT_ENOMEM, "pass: out of memory compacting the graph");
  return 0;
}

int gopt_pass_run(int i, const gopt_graph *in, gopt_graph **out, gopt_pass_stats *st,
                  gopt_error *err) {
  gopt_pass_stats local;
  gopt_error local_err = {0}; /* the passes write p->err: err may be NULL */
  if (!st) st = &local;
  if (!err) err = &local_err;
  memset(st, 0, sizeof *st);
  if (out) *out = NULL;
  if (i < 0 || i >= N_PASSES || !in || !out)
    return gopt_error_set(err, GOPT_EINVAL, "gopt_pass_run: no pass #%d", i);
  gopt_graph *g = gopt_graph_clone(in);
  if (!g) return gopt_error_set(err, GOPT_ENOMEM, "pass %s: out of memory", passes[i].name);
  st->ops_before = gopt_hlo_instruction_count(in);
  int rc = run_on(passes[i].fn, g, st, err, 0);
  if (rc) {
    gopt_error_prefix(err, "pass %s: ", passes[i].name);
    gopt_graph_free(g);
    return rc;
  }
  st->ops_after = gopt_hlo_instruction_count(g);
  *out = g;
  return 0;
}

/* XLA's default pipelines (cpu_compiler.cc / gpu_compiler.cc, BRIEF): the passes before the
 * fixed-point simplification group, the group, the passes after it. XLA's names; a name gopt does
 * not register is skipped (docs/PASSES.md lists which). */
typedef struct pipeline_def {
  const char *name;
  const char *const *pre, *const *loop, *const *post;
} pipeline_def;
static const char *const cpu_pre[] = {"call-inliner", "zero_sized_hlo_elimination", "dot_decomposer",
                                      "operand_upcaster", "batchnorm_expander", "logistic-expander", NULL};
static const char *const cpu_loop[] = {"algsimp", "simplify-sorts", "dce", "zero_sized_hlo_elimination",
                                       "tuple-simplifier", "simplify-while-loops", "dce",
                                       "reshape-mover", "constant_folding", NULL};
static const char *const cpu_post[] = {"transpose-folding", "cse", "tuple-simplifier", "dce", NULL};
static const char *const gpu_pre[] = {"zero_sized_hlo_elimination", "call-inliner", "dot_decomposer",
                                      "batchnorm_expander", "logistic-expander", "operand_upcaster", NULL};
static const char *const gpu_loop[] = {"zero_sized_hlo_elimination", "algsimp", "dot_decomposer",
                                       "dot_merger", "simplify-sorts", "tuple-simplifier",
                                       "simplify-while-loops", "reshape-mover", "constant_folding",
                                       "transpose-folding", "cse", "dce", NULL};
static const char *const gpu_post[] = {"algsimp", "dce", NULL};
static const pipeline_def pipelines[] = {{"default", cpu_pre, cpu_loop, cpu_post},
                                         {"default-cpu", cpu_pre, cpu_loop, cpu_post},
                                         {"default-gpu", gpu_pre, gpu_loop, gpu_post}};

typedef struct prun {
  gopt_graph *g;
  gopt_pipeline_step *steps;
  size_t n, cap;
  gopt_error *err;
} prun;

/* Runs pass idx on r->g (replacing it); *changed is set when the graph changed. */
static int step(prun *r, int idx, int *changed) {
  gopt_graph *h = NULL;
  gopt_pass_stats st;
  int rc = gopt_pass_run(idx, r->g, &h, &st, r->err);
  if (rc) return rc;
  if (r->n == r->cap) {
    size_t c = r->cap ? r->cap * 2 : 32;
    gopt_pipeline_step *s = realloc(r->steps, c * sizeof *s);
    if (!s) {
      gopt_graph_free(h);
      return gopt_error_set(r->err, GOPT_ENOMEM, "out of memory");
    }
    r->steps = s;
    r->cap = c;
  }
  r->steps[r->n++] = (gopt_pipeline_step){idx, st.ops_before, st.ops_after};
  if (changed) *changed = st.rewrites > 0 || st.ops_after != st.ops_before;
  gopt_graph_free(r->g);
  r->g = h;
  return 0;
}

static int run_list(prun *r, const char *const *names, int *changed) {
  for (; *names; names++) {
    int idx = gopt_pass_find(*names), c = 0;
    if (idx < 0) continue; /* not registered in gopt */
    int rc = step(r, idx, &c);
    if (rc) return rc;
    if (changed) *changed |= c;
  }
  return 0;
}

int gopt_pipeline_run(const char *spec, const gopt_graph *in, gopt_graph **out,
                      gopt_pipeline_step **steps, size_t *n_steps, gopt_error *err) {
  prun r = {0};
  int rc = 0;
  r.err = err;
  if (out) *out = NULL;
  if (steps) *steps = NULL;
  if (n_steps) *n_steps = 0;
  if (!spec || !in || !out) return gopt_error_set(err, GOPT_EINVAL, "gopt_pipeline_run: bad arguments");
  if (!(r.g = gopt_graph_clone(in))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  const pipeline_def *pd = NULL;
  for (size_t i = 0; i < sizeof pipelines / sizeof pipelines[0]; i++)
    if (!strcmp(spec, pipelines[i].name)) pd = &pipelines[i];
  if (pd) {
    rc = run_list(&r, pd->pre, NULL);
    for (int round = 0, changed = 1; !rc && changed && round < 25; round++) {
      changed = 0;
      rc = run_list(&r, pd->loop, &changed);
    }
    if (!rc) rc = run_list(&r, pd->post, NULL);
  } else {
    char *list = strdup(spec), *save = NULL;
    if (!list) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    for (char *tok = list ? strtok_r(list, ",", &save) : NULL; tok && !rc; tok = strtok_r(NULL, ",", &save)) {
      int idx = gopt_pass_find(tok);
      if (idx < 0) {
        rc = gopt_error_set(err, GOPT_EINVAL, "--order: unknown pass '%s' (gopt passes --list shows them)", tok);
        break;
      }
      rc = step(&r, idx, NULL);
    }
    free(list);
  }
  if (rc) {
    gopt_graph_free(r.g);
    free(r.steps);
    return rc;
  }
  *out = r.g;
  if (steps) *steps = r.steps;
  else free(r.steps);
  if (n_steps) *n_steps = r.n;
  return 0;
}

int32_t pass_rebuild_node(gopt_graph *g, int32_t n, const unsigned char *keep_in, const unsigned char *keep_out,
                          gopt_error *err) {
  gopt_node old = g->nodes.a[n];
  int32_t *buf = malloc(((size_t)old.n_in + old.n_out + 1) * sizeof *buf);
  char *type = strdup(gopt_node_type(g, n)), *name = strdup(gopt_node_name(g, n));
  int ni = 0, no = 0;
  int32_t m = -1;
  if (!buf || !type || !name) {
    gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < old.n_in; i++)
    if (!keep_in || keep_in[i]) buf[ni++] = gopt_node_input(g, n, i);
  for (int i = 0; i < old.n_out; i++)
    if (!keep_out || keep_out[i]) buf[ni + no++] = gopt_node_output(g, n, i);
  gopt_graph_remove_node(g, n);
  m = gopt_graph_add_node(g, type, name, ni, buf, no, buf + ni, err);
  if (m >= 0 && ir_node_copy_attrs(g, n, m)) {
    m = -1;
    gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  if (m >= 0) {
    g->nodes.a[m].op = old.op;
    g->nodes.a[m].flags = (uint16_t)(old.flags & ~GOPT_N_DEAD);
  }
done:
  free(buf);
  free(type);
  free(name);
  return m;
}
