/* test_exec_groups.c: the host target's fusion legality (gopt_exec_group_kind, which the fusion
 * task applies on a cpu cluster) and the executor running each legal group kind as one step.
 * Graph: x[2,4,6,6] -> Conv(pads 1) -> Relu -> Add(r) -> Mul(per-channel c) -> Sigmoid -> y2;
 * k = Add(c, c) -> Mul(s1, k) -> y3 (k is a graph output too); f[3,8] -> MatMul(Wm) -> Add(bias)
 * -> Tanh -> y4. Legal: {conv, relu, add} (a chain: eltwise + sum post-ops), {mul, sigmoid} (a
 * loop), {matmul, bias add, tanh} (a chain: bias + eltwise). Not legal: a chain plus a non-post-op,
 * a chain with a gap, two heads, a loop whose smaller member output is read outside, one node.
 * Each legal group runs as one step; its outputs equal the unfused run's bit for bit under the
 * layout pass (same kernels, same math) and within 1e-5 under --layouts plain (post-ops against
 * separate kernels); an illegal group is refused with one error naming the node. Measured host
 * cost: profiling the fused run (--layouts plain, as with --costdb) records each group under
 * gopt_group_signature, and the simulator on the measured host device prices the same groups
 * from those entries: its serial step equals the sum of the five steps' measured times; the same
 * with the steps timed inside whole runs (GOPT_EXEC_PROFILE_CONTEXT). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "exec_groups.h"
#include "gopt/ops.h"

enum { NB = 2, CI = 4, CO = 6, HW = 6, NX = NB * CI * HW * HW, NY = NB * CO * HW * HW };
enum { N_CONV, N_RELU, N_ADD, N_MUL, N_SIG, N_K, N_MUL3, N_MM, N_BIAS, N_TANH, N_COUNT };

static float W1[CO * CI * 9], b1[CO], cv[CO], Wm[8 * 5], bm[5];

static gopt_graph *build(int32_t *nodes) {
  gopt_graph *g = gopt_graph_new("groups");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t xd[4] = {NB, CI, HW, HW}, yd[4] = {NB, CO, HW, HW}, wd[4] = {CO, CI, 3, 3}, bd[1] = {CO};
  int64_t cd[4] = {1, CO, 1, 1}, fd[2] = {3, 8}, wmd[2] = {8, 5}, qd[2] = {3, 5}, bmd[1] = {5};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 4, xd), r = tensor(g, "r", GOPT_DT_FLOAT, 4, yd);
  int32_t f = tensor(g, "f", GOPT_DT_FLOAT, 2, fd);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, r);
  gopt_graph_add_input(g, f);
  int32_t w = const_tensor(g, "W1", GOPT_DT_FLOAT, 4, wd, W1, sizeof W1);
  int32_t b = const_tensor(g, "b1", GOPT_DT_FLOAT, 1, bd, b1, sizeof b1);
  int32_t c = const_tensor(g, "c", GOPT_DT_FLOAT, 4, cd, cv, sizeof cv);
  int32_t wm = const_tensor(g, "Wm", GOPT_DT_FLOAT, 2, wmd, Wm, sizeof Wm);
  int32_t bmt = const_tensor(g, "bm", GOPT_DT_FLOAT, 1, bmd, bm, sizeof bm);
  int32_t c1 = tensor(g, "c1", GOPT_DT_FLOAT, 4, yd), a1 = tensor(g, "a1", GOPT_DT_FLOAT, 4, yd);
  int32_t s1 = tensor(g, "s1", GOPT_DT_FLOAT, 4, yd), m2 = tensor(g, "m2", GOPT_DT_FLOAT, 4, yd);
  int32_t y2 = tensor(g, "y2", GOPT_DT_FLOAT, 4, yd), k = tensor(g, "k", GOPT_DT_FLOAT, 4, cd);
  int32_t y3 = tensor(g, "y3", GOPT_DT_FLOAT, 4, yd), q = tensor(g, "q", GOPT_DT_FLOAT, 2, qd);
  int32_t q2 = tensor(g, "q2", GOPT_DT_FLOAT, 2, qd), y4 = tensor(g, "y4", GOPT_DT_FLOAT, 2, qd);
  nodes[N_CONV] = node(g, "Conv", "conv", 3, (int32_t[]){x, w, b}, c1);
  gopt_node_set_ints(g, nodes[N_CONV], "pads", (int64_t[]){1, 1, 1, 1}, 4);
  gopt_node_set_ints(g, nodes[N_CONV], "kernel_shape", (int64_t[]){3, 3}, 2);
  nodes[N_RELU] = node(g, "Relu", "relu", 1, (int32_t[]){c1}, a1);
  nodes[N_ADD] = node(g, "Add", "add", 2, (int32_t[]){a1, r}, s1);
  nodes[N_MUL] = node(g, "Mul", "mul", 2, (int32_t[]){s1, c}, m2);
  nodes[N_SIG] = node(g, "Sigmoid", "sig", 1, (int32_t[]){m2}, y2);
  nodes[N_K] = node(g, "Add", "k", 2, (int32_t[]){c, c}, k);
  nodes[N_MUL3] = node(g, "Mul", "mul3", 2, (int32_t[]){s1, k}, y3);
  nodes[N_MM] = node(g, "MatMul", "mm", 2, (int32_t[]){f, wm}, q);
  nodes[N_BIAS] = node(g, "Add", "bias", 2, (int32_t[]){q, bmt}, q2);
  nodes[N_TANH] = node(g, "Tanh", "tanh", 1, (int32_t[]){q2}, y4);
  gopt_graph_add_output(g, y2);
  gopt_graph_add_output(g, y3);
  gopt_graph_add_output(g, k);
  gopt_graph_add_output(g, y4);
  finish(g);
  return g;
}

static int kind_of(const gopt_graph *g, const int32_t *nodes, const int *idx, int n) {
  int32_t mem[8];
  for (int i = 0; i < n; i++) mem[i] = nodes[idx[i]];
  return gopt_exec_group_kind(g, mem, n);
}

static void clear4(gopt_host_tensor *t) {
  for (int i = 0; i < 4; i++) gopt_host_tensor_clear(&t[i]);
}

/* Profiles the run with the groups into a cost database (steps timed in isolation or in context,
 * mode) and simulates the same groups on the measured host device from it. */
static void measured_cost(const gopt_graph *g, const int32_t *group, int mode) {
  gopt_error err = {0};
  gopt_costdb *db = gopt_costdb_new("test", 1);
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = GOPT_EXEC_LAYOUT_PLAIN};
  gopt_exec_profile p = {0};
  CHECK_MSG(gopt_exec_new(g, &o, &x, NULL, &err) == 0 && gopt_exec_random_inputs(x, 3, &err) == 0 &&
                gopt_exec_profile_run_mode(x, 1, 3, mode, db, &p, &err) == 0,
            "%s", err.msg);
  double sum = 0;
  for (size_t i = 0; i < p.n_steps; i++) sum += p.steps[i].seconds;
  CHECK_EQ_INT(p.n_steps, 5);
  CHECK_EQ_INT(p.n_measured, 5); /* five distinct signatures, each measured once */
  for (size_t i = 0; i < p.n_steps; i++) CHECK_MSG(p.steps[i].seconds > 0, "step %zu has no time", i);
  for (int gr = 0; gr < 3; gr++) { /* each group's entry is under its group signature */
    int32_t mem[3];
    int k = 0;
    for (size_t n = 0; n < g->nodes.n; n++)
      if (group[n] == gr) mem[k++] = (int32_t)n;
    gopt_cost_entry e;
    CHECK_MSG(gopt_costdb_get(db, gopt_group_signature(g, mem, k), &e), "group %d not in the database", gr);
  }
  groups_check_sim(g, db, (int32_t *)group, 3, sum);
  gopt_exec_profile_clear(&p);
  gopt_exec_free(x);
  gopt_costdb_free(db);
}

int main(void) {
  for (size_t i = 0; i < sizeof W1 / sizeof *W1; i++) W1[i] = frand() * 0.3f;
  for (int i = 0; i < CO; i++) b1[i] = frand() * 0.1f, cv[i] = frand();
  for (int i = 0; i < 40; i++) Wm[i] = frand();
  for (int i = 0; i < 5; i++) bm[i] = frand();
  int32_t nd[N_COUNT];
  gopt_graph *g = build(nd);
  /* legality */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONV, N_RELU, N_ADD}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONV, N_RELU}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_MUL, N_SIG}, 2), GOPT_EXEC_GROUP_LOOP);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_RELU, N_ADD, N_MUL, N_SIG}, 4), GOPT_EXEC_GROUP_LOOP);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_MM, N_BIAS, N_TANH}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONV, N_RELU, N_ADD, N_MUL}, 4), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONV, N_ADD}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_MM, N_TANH}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_CONV, N_MM}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_K, N_MUL3}, 2), GOPT_EXEC_GROUP_NONE); /* k [1,6,1,1] is an output */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_MUL}, 1), GOPT_EXEC_GROUP_NONE);
  /* the legal groups run as one step each and compute what the unfused run computes */
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  group[nd[N_CONV]] = group[nd[N_RELU]] = group[nd[N_ADD]] = 0;
  group[nd[N_MUL]] = group[nd[N_SIG]] = 1;
  group[nd[N_MM]] = group[nd[N_BIAS]] = group[nd[N_TANH]] = 2;
  gopt_error err = {0};
  for (int lay = 0; lay < 2; lay++) {
    gopt_host_tensor ref[4] = {{0}}, got[4] = {{0}};
    int s0 = groups_run(g, NULL, lay, 3, ref, 4, &err);
    CHECK_MSG(s0 > 0, "unfused (%s): %s", lay ? "auto" : "plain", err.msg);
    int s1 = groups_run(g, group, lay, 3, got, 4, &err);
    CHECK_MSG(s1 > 0, "fused (%s): %s", lay ? "auto" : "plain", err.msg);
    /* 10 nodes: conv chain 1 step, loop 1, k 1, mul3 1, matmul chain 1 */
    CHECK_EQ_INT(s1, 5);
    /* plain unfused: one step per node; auto unfused: the pass makes both chains itself */
    CHECK_EQ_INT(s0, lay ? 6 : 10);
    double d = groups_max_diff(ref, got, 4);
    /* auto: the chains are the same oneDNN primitives either way, but unfused the lone Sigmoid
     * runs as oneDNN's eltwise primitive under the layout pass and fused inside the group's loop
     * (gopt's own sigmoid): the two agree to the last bits of a float, not bitwise */
    if (lay) CHECK_MSG(d <= 1e-6, "auto: fused outputs differ from unfused by %g", d);
    else CHECK_MSG(d <= 1e-5, "plain: fused outputs differ from unfused by %g", d);
    clear4(ref);
    clear4(got);
  }
  measured_cost(g, group, GOPT_EXEC_PROFILE_ISOLATED);
  measured_cost(g, group, GOPT_EXEC_PROFILE_CONTEXT);
  /* an illegal group is refused, naming a node */
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  group[nd[N_CONV]] = group[nd[N_RELU]] = group[nd[N_ADD]] = group[nd[N_MUL]] = 0; /* a chain and a Mul */
  gopt_host_tensor o[4] = {{0}};
  CHECK_MSG(groups_run(g, group, GOPT_EXEC_LAYOUT_AUTO, 3, o, 4, &err) < 0 && err.code == GOPT_EUNSUP &&
                strstr(err.msg, "fusion group 0"), "%d %s", err.code, err.msg);
  clear4(o);
  free(group);
  gopt_graph_free(g);
  return check_exit("test_exec_groups");
}
