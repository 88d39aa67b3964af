/* test_exec_pairs.c: the layout pass's two pairings as host fusion groups (issue 29). A decision may
 * name a BatchNorm with the Relu that is its only reader (oneDNN's fuse_norm_relu) and a zero Pad
 * with the AveragePool after it (the pool's padding) as groups: gopt_exec_group_kind calls them
 * chains, gopt_exec_auto_plan reports them as the executor's own steps, and such a group runs as
 * that one step under either layout mode, computing what the unfused run computes. Profiling the
 * grouped run in the default layouts (steps in context, entries tagged as oneDNN-layout steps)
 * and simulating the same groups on the measured host device prices every step from the database:
 * the simulated step is the sum of the measured steps (gopt_costdb_get_run).
 * Graph: x[2,8,6,6] -> BatchNorm -> Relu -> Pad(1,1 spatial) -> AveragePool(3x3) -> y; and
 * x -> BatchNorm(b2) -> {Relu(r2) -> y2, and b2 itself -> y3}: b2 is read twice, so no pairing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec_graph.h"
#include "exec_groups.h"

enum { NB = 2, C = 8, HW = 6, NX = NB * C * HW * HW };
enum { N_BN, N_RELU, N_PAD, N_POOL, N_BN2, N_RELU2, N_COUNT };

static float sc[C], bi[C], mu[C], var[C];

static int32_t bn(gopt_graph *g, const char *name, int32_t x, int32_t out) {
  int64_t cd[1] = {C};
  char nm[4][32];
  int32_t in[5] = {x};
  const float *v[4] = {sc, bi, mu, var};
  for (int i = 0; i < 4; i++) {
    snprintf(nm[i], sizeof nm[i], "%s_p%d", name, i);
    in[i + 1] = const_tensor(g, nm[i], GOPT_DT_FLOAT, 1, cd, v[i], sizeof sc);
  }
  return node(g, "BatchNormalization", name, 5, in, out);
}

static gopt_graph *build(int32_t *nd) {
  gopt_graph *g = gopt_graph_new("pairs");
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t xd[4] = {NB, C, HW, HW}, pd[4] = {NB, C, HW + 2, HW + 2}, nd1[1] = {8};
  int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 4, xd);
  gopt_graph_add_input(g, x);
  int32_t b = tensor(g, "b", GOPT_DT_FLOAT, 4, xd), r = tensor(g, "r", GOPT_DT_FLOAT, 4, xd);
  int32_t p = tensor(g, "p", GOPT_DT_FLOAT, 4, pd), y = tensor(g, "y", GOPT_DT_FLOAT, 4, xd);
  int32_t b2 = tensor(g, "b2", GOPT_DT_FLOAT, 4, xd), y2 = tensor(g, "y2", GOPT_DT_FLOAT, 4, xd);
  int32_t P = const_tensor(g, "pads", GOPT_DT_INT64, 1, nd1, pads, sizeof pads);
  nd[N_BN] = bn(g, "bn", x, b);
  nd[N_RELU] = node(g, "Relu", "relu", 1, (int32_t[]){b}, r);
  nd[N_PAD] = node(g, "Pad", "pad", 2, (int32_t[]){r, P}, p);
  nd[N_POOL] = node(g, "AveragePool", "pool", 1, (int32_t[]){p}, y);
  gopt_node_set_ints(g, nd[N_POOL], "kernel_shape", (int64_t[]){3, 3}, 2);
  nd[N_BN2] = bn(g, "bn2", x, b2);
  nd[N_RELU2] = node(g, "Relu", "relu2", 1, (int32_t[]){b2}, y2);
  gopt_graph_add_output(g, y);
  gopt_graph_add_output(g, y2);
  gopt_graph_add_output(g, b2);
  finish(g);
  return g;
}

static int kind_of(const gopt_graph *g, const int32_t *nd, const int *idx, int n) {
  int32_t mem[4];
  for (int i = 0; i < n; i++) mem[i] = nd[idx[i]];
  return gopt_exec_group_kind(g, mem, n);
}

/* Profiles the grouped run in the default layouts (steps in context) and simulates the groups on
 * the measured host from that database: the step is the sum of the steps' measured times. */
static void measured_cost(const gopt_graph *g, int32_t *group) {
  gopt_error err = {0};
  gopt_costdb *db = gopt_costdb_new("test", 1);
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = GOPT_EXEC_LAYOUT_AUTO};
  gopt_exec_profile p = {0};
  CHECK_MSG(gopt_exec_new(g, &o, &x, NULL, &err) == 0 && gopt_exec_random_inputs(x, 3, &err) == 0 &&
                gopt_exec_profile_run_mode(x, 1, 3, GOPT_EXEC_PROFILE_CONTEXT, db, &p, &err) == 0,
            "%s", err.msg);
  double sum = 0;
  for (size_t i = 0; i < p.n_steps; i++) sum += p.steps[i].seconds;
  groups_check_sim(g, db, group, 2, sum);
  gopt_exec_profile_clear(&p);
  gopt_exec_free(x);
  gopt_costdb_free(db);
}

int main(void) {
  for (int i = 0; i < C; i++) sc[i] = 0.5f + 0.5f * (frand() + 1), bi[i] = frand(), mu[i] = frand() * 0.1f;
  for (int i = 0; i < C; i++) var[i] = 0.5f + 0.5f * (frand() + 1);
  int32_t nd[N_COUNT];
  gopt_graph *g = build(nd);
  /* legality: exactly the pairings */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_BN, N_RELU}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_POOL, N_PAD}, 2), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_BN, N_RELU, N_PAD}, 3), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_RELU, N_PAD}, 2), GOPT_EXEC_GROUP_NONE);
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_BN2, N_RELU2}, 2), GOPT_EXEC_GROUP_NONE); /* b2 has two readers */
  CHECK_EQ_INT(kind_of(g, nd, (int[]){N_BN, N_POOL}, 2), GOPT_EXEC_GROUP_NONE);
  /* the executor's own plan reports them as its steps */
  int32_t *step_of = malloc(g->nodes.n * sizeof *step_of);
  CHECK(gopt_exec_auto_plan(g, step_of) == 0);
  CHECK_EQ_INT(step_of[nd[N_BN]], nd[N_BN]);
  CHECK_EQ_INT(step_of[nd[N_RELU]], nd[N_BN]);
  CHECK_EQ_INT(step_of[nd[N_PAD]], nd[N_POOL]);
  CHECK_EQ_INT(step_of[nd[N_POOL]], nd[N_POOL]);
  CHECK(step_of[nd[N_RELU2]] != nd[N_BN2]);
  free(step_of);
  /* the groups run as one step each and compute what the unfused run computes */
  int32_t *group = malloc(g->nodes.n * sizeof *group);
  for (size_t i = 0; i < g->nodes.n; i++) group[i] = -1;
  group[nd[N_BN]] = group[nd[N_RELU]] = 0;
  group[nd[N_PAD]] = group[nd[N_POOL]] = 1;
  gopt_error err = {0};
  for (int lay = 0; lay < 2; lay++) {
    gopt_host_tensor ref[3] = {{0}}, got[3] = {{0}};
    int s0 = groups_run(g, NULL, lay, 3, ref, 3, &err);
    CHECK_MSG(s0 > 0, "unfused (%s): %s", lay ? "auto" : "plain", err.msg);
    int s1 = groups_run(g, group, lay, 3, got, 3, &err);
    CHECK_MSG(s1 > 0, "grouped (%s): %s", lay ? "auto" : "plain", err.msg);
    /* 6 nodes: the two pairs one step each, bn2 and relu2 one each */
    CHECK_EQ_INT(s1, 4);
    CHECK_EQ_INT(s0, lay ? 4 : 6); /* the pass pairs them itself; plain: one step per node */
    double dmax = groups_max_diff(ref, got, 3);
    /* auto: the same oneDNN steps either way; plain: the pair's oneDNN step against gopt's
     * separate BatchNorm, Relu, Pad and pool kernels */
    if (lay) CHECK_MSG(dmax == 0, "auto: grouped outputs differ from unfused by %g", dmax);
    else CHECK_MSG(dmax <= 1e-5, "plain: grouped outputs differ from unfused by %g", dmax);
    for (int i = 0; i < 3; i++) gopt_host_tensor_clear(&ref[i]), gopt_host_tensor_clear(&got[i]);
  }
  measured_cost(g, group);
  free(group);
  gopt_graph_free(g);
  return check_exit("test_exec_pairs");
}
