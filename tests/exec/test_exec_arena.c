/* test_exec_arena.c: the executor's static memory plan (exec_arena.c). A chain of three Relus
 * needs two buffers (the first and third are never live together), so its arena is exactly two
 * buffers. Corpus models, plain and under --fusion auto (in-place outputs included): the outputs
 * equal the pool executor's (GOPT_ARENA=0) bitwise, in a first and a second run; every activation
 * of a run lies at its planned offset; and, checked independently of the planner from the steps'
 * reads and writes, no two activations whose bytes overlap in the arena are live at one step
 * (except an output written in place over the input that dies at its step); the arena is no
 * smaller than the most bytes live at one step and no larger than all buffers side by side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec/exec_internal.h"
#include "exec_graph.h"
#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

#if defined(__SANITIZE_ADDRESS__)
enum { GAP = 64 };
#else
enum { GAP = 0 };
#endif

static size_t r64(size_t n) { return (n + 63) / 64 * 64; }

/* x -> Relu -> Relu -> Relu -> y, [1024] floats: an arena of two 4096-byte buffers; one when each
 * Relu writes over its input in place (the first reads the graph input, which it must not). */
static void test_chain(int inplace) {
  gopt_graph *g = gopt_graph_new("chain");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t d[1] = {1024};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 1, d), a = tensor(g, "a", GOPT_DT_FLOAT, 1, d);
  int32_t b = tensor(g, "b", GOPT_DT_FLOAT, 1, d), y = tensor(g, "y", GOPT_DT_FLOAT, 1, d);
  gopt_graph_add_input(g, x);
  node(g, "Relu", "r1", 1, (int32_t[]){x}, a);
  node(g, "Relu", "r2", 1, (int32_t[]){a}, b);
  node(g, "Relu", "r3", 1, (int32_t[]){b}, y);
  gopt_graph_add_output(g, y);
  finish(g);
  gopt_exec *e = NULL;
  gopt_exec_opts o = {.threads = 1, .layouts = GOPT_EXEC_LAYOUT_PLAIN};
  setenv("GOPT_INPLACE", inplace ? "1" : "0", 1);
  CHECK_MSG(gopt_exec_new(g, &o, &e, NULL, &err) == 0, "%s", err.msg);
  unsetenv("GOPT_INPLACE");
  size_t oa = 1, ob = 1, oy = 1;
  if (e) {
    CHECK_EQ_INT(gopt_exec_n_inplace(e), inplace ? 2 : 0);
    CHECK_EQ_INT(gopt_exec_arena_bytes(e), (inplace ? 1 : 2) * (4096 + GAP));
    CHECK(gopt_exec_arena_offset(e, a, &oa) && gopt_exec_arena_offset(e, b, &ob) &&
          gopt_exec_arena_offset(e, y, &oy));
    CHECK(inplace ? oa == ob && ob == oy : oa != ob && oy == oa);
    CHECK(!gopt_exec_arena_offset(e, x, &oa)); /* a graph input has no planned buffer */
  }
  gopt_exec_free(e);
  gopt_graph_free(g);
}

/* ---- corpus models ------------------------------------------------------------------------------ */

/* An executor of g (group: a fusion plan or NULL) with or without the arena, random inputs. */
static gopt_exec *open_exec(const gopt_graph *g, const int32_t *group, int arena) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  setenv("GOPT_ARENA", arena ? "1" : "0", 1);
  gopt_exec_opts o = {.threads = 1, .seed = 5, .group = group, .layouts = GOPT_EXEC_LAYOUT_AUTO};
  int rc = gopt_exec_new(g, &o, &x, NULL, &err);
  unsetenv("GOPT_ARENA");
  if (!rc) rc = gopt_exec_random_inputs(x, 9, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) {
    gopt_exec_free(x);
    return NULL;
  }
  return x;
}

/* Runs x and compares every output to ref's (already run) bitwise. */
static void run_same(gopt_exec *x, gopt_exec *ref, const char *what) {
  gopt_error err = {0};
  CHECK_MSG(gopt_exec_run(x, &err) == 0, "%s: %s", what, err.msg);
  for (size_t i = 0; i < gopt_exec_n_outputs(x); i++) {
    gopt_host_tensor p = {0}, q = {0};
    CHECK(gopt_exec_get_output(x, i, &p, &err) == 0 && gopt_exec_get_output(ref, i, &q, &err) == 0);
    CHECK_MSG(p.nbytes == q.nbytes && p.data && q.data && !memcmp(p.data, q.data, p.nbytes),
              "%s: output %zu differs from the pool executor's", what, i);
    gopt_host_tensor_clear(&p);
    gopt_host_tensor_clear(&q);
  }
}

/* Liveness from the steps alone: [def, end] per activation (end: its last read or write; graph
 * outputs live to the end); given[t]: the step at which t's buffer passed to an output in place. */
static void liveness(const gopt_exec *x, int32_t *def, int32_t *end, int32_t *given) {
  size_t nt = x->g->tensors.n;
  for (size_t t = 0; t < nt; t++) def[t] = end[t] = given[t] = -1;
  for (size_t s = 0; s < x->n_steps; s++) {
    const ex_kernel *k = &x->steps[s];
    for (int j = 0; j < k->n_in + k->n_out; j++) {
      int32_t t = j < k->n_in ? k->in[j] : k->out[j - k->n_in];
      if (t < 0) continue;
      if (j >= k->n_in && def[t] < 0) def[t] = (int32_t)s;
      end[t] = (int32_t)s;
    }
    for (int o = 0; k->reuse && o < k->n_out; o++)
      if (k->reuse[o] >= 0) given[k->in[k->reuse[o]]] = (int32_t)s;
  }
  for (size_t i = 0; i < x->g->outputs.n; i++) end[x->g->outputs.a[i]] = (int32_t)x->n_steps;
}

/* Whether u passed its buffer (through a chain of in-place steps) on to t. */
static int chained(const gopt_exec *x, int32_t u, int32_t t, const int32_t *given) {
  for (int hops = 0; hops < 64 && given[u] >= 0; hops++) {
    const ex_kernel *k = &x->steps[given[u]];
    int32_t next = -1;
    for (int o = 0; o < k->n_out; o++)
      if (k->reuse[o] >= 0 && k->in[k->reuse[o]] == u) next = k->out[o];
    if (next == t) return 1;
    if (next < 0) return 0;
    u = next;
  }
  return 0;
}

/* The plan's offsets against the liveness of x's last run (every activation's nbytes set). */
static void check_overlaps(const gopt_exec *x, const char *what) {
  size_t nt = x->g->tensors.n, n_act = 0, all = 0, peak = 0;
  int32_t *def = malloc(nt * sizeof *def), *end = malloc(nt * sizeof *end), *given = malloc(nt * sizeof *given);
  int32_t *act = malloc(nt * sizeof *act);
  size_t *off = malloc(nt * sizeof *off);
  if (!def || !end || !given || !act || !off) goto done;
  liveness(x, def, end, given);
  for (size_t t = 0; t < nt; t++)
    if (x->vals[t].kind == EX_V_ACT && def[t] >= 0) {
      CHECK_MSG(gopt_exec_arena_offset(x, (int32_t)t, &off[n_act]), "%s: activation %zu has no offset", what, t);
      act[n_act++] = (int32_t)t;
      all += r64(x->vals[t].nbytes) + GAP;
    }
  int bad = 0;
  for (size_t i = 0; i < n_act; i++)
    for (size_t j = i + 1; j < n_act && bad < 5; j++) {
      int32_t t = act[i], u = act[j];
      if (off[i] >= off[j] + x->vals[u].nbytes || off[j] >= off[i] + x->vals[t].nbytes) continue;
      if (end[t] < def[u] || end[u] < def[t]) continue;
      if (chained(x, t, u, given) || chained(x, u, t, given)) continue;
      bad++;
      CHECK_MSG(0, "%s: '%s' [%d, %d] and '%s' [%d, %d] overlap in the arena", what,
                gopt_graph_str(x->g, x->g->tensors.a[t].name), def[t], end[t],
                gopt_graph_str(x->g, x->g->tensors.a[u].name), def[u], end[u]);
    }
  for (size_t s = 0; s <= x->n_steps; s++) { /* the most bytes live at one step (a chain once) */
    size_t live = 0;
    for (size_t i = 0; i < n_act; i++) {
      int32_t t = act[i];
      if (def[t] <= (int32_t)s && (int32_t)s <= end[t] && !(given[t] == (int32_t)s)) live += x->vals[t].nbytes;
    }
    if (live > peak) peak = live;
  }
  CHECK_MSG(gopt_exec_arena_bytes(x) >= peak && gopt_exec_arena_bytes(x) <= all,
            "%s: arena %zu bytes, live peak %zu, all buffers %zu", what, gopt_exec_arena_bytes(x), peak, all);
  fprintf(stderr, "%s: %zu activations, arena %zu bytes, live peak %zu, all buffers side by side %zu\n", what, n_act,
          gopt_exec_arena_bytes(x), peak, all);
done:
  free(def);
  free(end);
  free(given);
  free(act);
  free(off);
}

/* Every live activation of x's last run lies at its planned offset in the arena. */
static void check_at_offsets(const gopt_exec *x, const char *what) {
  int bad = 0;
  for (size_t t = 0; t < x->g->tensors.n && bad < 3; t++) {
    size_t off;
    if (x->vals[t].kind != EX_V_ACT || !x->vals[t].data) continue;
    if (!gopt_exec_arena_offset(x, (int32_t)t, &off) || (uint8_t *)x->vals[t].data != x->arena + off) {
      bad++;
      CHECK_MSG(0, "%s: '%s' is not at its planned offset", what, gopt_graph_str(x->g, x->g->tensors.a[t].name));
    }
  }
}

static void test_corpus(const char *path, int fused) {
  gopt_error err = {0};
  gopt_graph *g = load_model(path);
  if (!g) return;
  int32_t *group = fused ? malloc((g->nodes.n + 1) * sizeof *group) : NULL;
  if (group) gopt_exec_auto_fusion(g, group);
  char what[256];
  snprintf(what, sizeof what, "%s%s", path, fused ? " --fusion auto" : "");
  gopt_exec *ref = open_exec(g, group, 0), *x = open_exec(g, group, 1);
  if (ref && x) {
    CHECK_EQ_INT(gopt_exec_arena_bytes(ref), 0);
    CHECK_MSG(gopt_exec_run(ref, &err) == 0, "%s", err.msg);
    CHECK(gopt_exec_arena_bytes(x) > 0 && gopt_exec_pool_bytes(ref) > 0);
    run_same(x, ref, what);
    check_at_offsets(x, what);
    run_same(x, ref, what); /* a second run: the same buffers, the same outputs */
    check_at_offsets(x, what);
    CHECK_EQ_INT(gopt_exec_pool_bytes(x), 0);
    check_overlaps(x, what);
  }
  gopt_exec_free(ref);
  gopt_exec_free(x);
  free(group);
  gopt_graph_free(g);
}

int main(void) {
  test_chain(0);
  test_chain(1);
  test_corpus("corpus/squeezenet1_1.onnx", 0);
  test_corpus("corpus/lraspp_mobilenet_v3_large.onnx", 0);
  test_corpus("corpus/lraspp_mobilenet_v3_large.onnx", 1);
  test_corpus("corpus/gpt2_tiny.onnx", 1);
  test_corpus("corpus/bert_tiny.onnx", 0);
  return check_exit("test_exec_arena");
}
