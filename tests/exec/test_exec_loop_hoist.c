/* test_exec_loop_hoist.c: fused elementwise groups whose members have smaller outputs than the
 * group's loop (docs/EXECUTOR.md "Fusion"). Such members are computed once at their own shape
 * before the loop (hoisted, gopt_exec_n_loop_hoisted) instead of once per element of the loop;
 * the outputs must be bit for bit those of the unfused run, which computes every op alone at its
 * own shape. Graph (a LayerNorm tail with a nested scalar factor, x[2,8,16], v[2,8,1], a[1]):
 *   q = a * a ([1]); e = |v| + q ([2,8,1]); s = Sqrt(e); d = x / s; y = d * w + b ([2,8,16])
 * and a group whose two small members do not broadcast to one shape (they stay in the loop):
 *   u = -w ([16]); t = v * v ([2,8,1]); z = (x + u) * t ([2,8,16]).
 * Expected: group 1 hoists q, e and s (q once more inside the pre-program: it is smaller than
 * [2,8,1]); group 2 hoists nothing; every output equals the unfused run's, under both layout
 * modes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "exec_groups.h"

enum { B = 2, T = 8, C = 16 };
enum { N_Q, N_ABS, N_E, N_S, N_D, N_M, N_Y, N_U, N_X2, N_T, N_Z, N_COUNT };

static float wv[C], bv[C];

static gopt_graph *build(int32_t *nd) {
  gopt_graph *g = gopt_graph_new("loop_hoist");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t xd[3] = {B, T, C}, vd[3] = {B, T, 1}, ad[1] = {1}, cd[1] = {C};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 3, xd), v = tensor(g, "v", GOPT_DT_FLOAT, 3, vd);
  int32_t a = tensor(g, "a", GOPT_DT_FLOAT, 1, ad);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, v);
  gopt_graph_add_input(g, a);
  int32_t w = const_tensor(g, "w", GOPT_DT_FLOAT, 1, cd, wv, sizeof wv);
  int32_t b = const_tensor(g, "b", GOPT_DT_FLOAT, 1, cd, bv, sizeof bv);
  int32_t q = tensor(g, "q", GOPT_DT_FLOAT, 1, ad), av = tensor(g, "av", GOPT_DT_FLOAT, 3, vd);
  int32_t e = tensor(g, "e", GOPT_DT_FLOAT, 3, vd), s = tensor(g, "s", GOPT_DT_FLOAT, 3, vd);
  int32_t d = tensor(g, "d", GOPT_DT_FLOAT, 3, xd), m = tensor(g, "m", GOPT_DT_FLOAT, 3, xd);
  int32_t y = tensor(g, "y", GOPT_DT_FLOAT, 3, xd), u = tensor(g, "u", GOPT_DT_FLOAT, 1, cd);
  int32_t x2 = tensor(g, "x2", GOPT_DT_FLOAT, 3, xd), t = tensor(g, "t", GOPT_DT_FLOAT, 3, vd);
  int32_t z = tensor(g, "z", GOPT_DT_FLOAT, 3, xd);
  nd[N_Q] = node(g, "Mul", "q", 2, (int32_t[]){a, a}, q);
  nd[N_ABS] = node(g, "Abs", "abs", 1, (int32_t[]){v}, av);
  nd[N_E] = node(g, "Add", "e", 2, (int32_t[]){av, q}, e);
  nd[N_S] = node(g, "Sqrt", "sqrt", 1, (int32_t[]){e}, s);
  nd[N_D] = node(g, "Div", "div", 2, (int32_t[]){x, s}, d);
  nd[N_M] = node(g, "Mul", "mul", 2, (int32_t[]){d, w}, m);
  nd[N_Y] = node(g, "Add", "y", 2, (int32_t[]){m, b}, y);
  nd[N_U] = node(g, "Neg", "neg", 1, (int32_t[]){w}, u);
  nd[N_X2] = node(g, "Add", "x2", 2, (int32_t[]){x, u}, x2);
  nd[N_T] = node(g, "Mul", "t", 2, (int32_t[]){v, v}, t);
  nd[N_Z] = node(g, "Mul", "z", 2, (int32_t[]){x2, t}, z);
  gopt_graph_add_output(g, y);
  gopt_graph_add_output(g, z);
  gopt_graph_add_output(g, d); /* a full-size member read outside: stored by the loop */
  finish(g);
  return g;
}

/* Runs g with the groups (NULL: none), one thread, inputs from seed 5; the outputs into out[3];
 * the number of hoisted members into *hoisted. */
static void run(const gopt_graph *g, const int32_t *group, int layouts, gopt_host_tensor *out, size_t *hoisted) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = layouts};
  CHECK_MSG(gopt_exec_new(g, &o, &x, NULL, &err) == 0 && gopt_exec_random_inputs(x, 5, &err) == 0 &&
                gopt_exec_run(x, &err) == 0,
            "%s", err.msg);
  for (size_t i = 0; i < 3; i++) CHECK_MSG(gopt_exec_get_output(x, i, &out[i], &err) == 0, "%s", err.msg);
  *hoisted = gopt_exec_n_loop_hoisted(x);
  gopt_exec_free(x);
}

int main(void) {
  for (int i = 0; i < C; i++) wv[i] = frand(), bv[i] = frand();
  int32_t nd[N_COUNT];
  gopt_graph *g = build(nd);
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  for (int i = N_Q; i <= N_Y; i++) group[nd[i]] = 0;
  for (int i = N_U; i <= N_Z; i++) group[nd[i]] = 1;
  CHECK_EQ_INT(gopt_exec_group_kind(g, (int32_t[]){nd[N_Q], nd[N_ABS], nd[N_E], nd[N_S], nd[N_D], nd[N_M], nd[N_Y]}, 7),
               GOPT_EXEC_GROUP_LOOP);
  for (int lay = 0; lay < 2; lay++) {
    gopt_host_tensor ref[3] = {{0}}, got[3] = {{0}};
    size_t h0 = 0, h1 = 0;
    run(g, NULL, lay, ref, &h0);
    run(g, group, lay, got, &h1);
    CHECK_EQ_INT((int)h0, 0);
    CHECK_EQ_INT((int)h1, 4); /* q, abs, e, sqrt of group 0; group 1's u [16] and t [2,8,1] stay */
    double dmax = groups_max_diff(ref, got, 3);
    CHECK_MSG(dmax == 0, "%s: fused outputs differ from unfused by %g", lay ? "auto" : "plain", dmax);
    /* the values are not trivially equal: y is normalised, z is nonzero somewhere */
    const float *z = got[1].data;
    int nz = 0;
    for (int i = 0; i < B * T * C; i++) nz += z[i] != 0;
    CHECK(nz > 0);
    for (int i = 0; i < 3; i++) gopt_host_tensor_clear(&ref[i]), gopt_host_tensor_clear(&got[i]);
  }
  free(group);
  gopt_graph_free(g);
  return check_exit("test_exec_loop_hoist");
}
