/* test_search_regal.c: REGAL's chromosome and "brkga-regal" (search.h). A hand-worked example on
 * a 6-node graph over 2 devices: explicit genes decode to the expected devices (argmax of the
 * affinity genes, ties to the lower device) and priorities, and the simulator's list scheduling
 * then runs device 0's kernels in the expected order with the hand-computed peak memory (two gene
 * sets, two orders, two peaks). brkga-regal is deterministic, never worse than its start, takes
 * its fresh chromosomes from a key sampler when one is given (a sampler that always returns the
 * best order's genes makes it find that order), and a sampler with another method is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/decisions.h"
#include "gopt/search.h"
#include "gopt/sim.h"
#include "search/search_fixture.h"

/* x (64 floats) -> s -> ts (1 KB); ts -> u -> tu (4 KB) -> v -> tv (256 B, output);
 * ts -> w -> tw (1 KB) -> z -> tz (2 KB, output); x -> b -> tb (512 B, output).
 * Node ids: s 0, u 1, v 2, w 3, z 4, b 5. */
static gopt_graph *hand_graph(fx_costs *k) {
  gopt_graph *g = gopt_graph_new("hand");
  int64_t ex = 64;
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 1, &ex, NULL);
  gopt_graph_add_input(g, x);
  static const char *const nm[6] = {"s", "u", "v", "w", "z", "b"};
  static const int64_t el[6] = {256, 1024, 64, 256, 512, 128};
  static const int in_of[6] = {-1, 0, 1, 0, 3, -1}; /* producer node of the input (-1: x) */
  int32_t t[6];
  for (int i = 0; i < 6; i++) {
    char tn[8];
    snprintf(tn, sizeof tn, "t%s", nm[i]);
    t[i] = gopt_graph_add_tensor(g, tn, GOPT_DT_FLOAT, 1, &el[i], NULL);
    int32_t in = in_of[i] < 0 ? x : t[in_of[i]];
    int32_t id = gopt_graph_add_node(g, "Relu", nm[i], 1, &in, 1, &t[i], NULL);
    CHECK(id == i);
  }
  gopt_graph_add_output(g, t[2]);
  gopt_graph_add_output(g, t[4]);
  gopt_graph_add_output(g, t[5]);
  memset(k, 0, sizeof *k);
  for (int i = 0; i < 6; i++) k->flops[i] = 1e6;
  return g;
}

/* Genes in the environment's variable order (topological: s b w u z v): each DEVICE variable's two
 * affinities, then each PRIORITY variable's gene; aff and prio are indexed by node id. */
static const double k_aff[6][2] = {{0.9, 0.1}, {0.6, 0.3}, {0.5, 0.5}, {0.7, 0.2}, {0.8, 0.79}, {0.2, 0.9}};
static void hand_genes(const gopt_env *e, double *genes, const double prio[6]) {
  const gopt_env_var *v = gopt_env_vars(e);
  size_t j = 0;
  for (size_t i = 0; i < gopt_env_nvars(e); i++) {
    int32_t n = v[i].node;
    if (v[i].kind == GOPT_VAR_DEVICE) {
      genes[j++] = k_aff[n][0];
      genes[j++] = k_aff[n][1];
    } else {
      genes[j++] = prio[n];
    }
  }
}

/* Device 0's kernel order (node ids) of x's simulation; returns the count. */
static int dev0_order(gopt_env *e, const double *x, int32_t *order) {
  gopt_decisions d;
  memset(&d, 0, sizeof d);
  gopt_error err = {0};
  int rc = gopt_env_to_decisions(e, x, &d, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_sim_state *st = gopt_sim_state_new(gopt_env_sim(e));
  gopt_sim_result r;
  memset(&r, 0, sizeof r);
  rc = gopt_sim_state_apply(st, &d, &err);
  rc = rc ? rc : gopt_sim_evaluate(st, &r, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_sim_item it[32];
  size_t n = gopt_sim_timeline(st, it, 32);
  int k = 0;
  double start[8];
  for (size_t i = 0; i < n && i < 32; i++) {
    if (it[i].kind != 0 || it[i].device != 0) continue;
    int j = k++; /* insertion by start time */
    while (j > 0 && start[j - 1] > it[i].start) {
      start[j] = start[j - 1];
      order[j] = order[j - 1];
      j--;
    }
    start[j] = it[i].start;
    order[j] = it[i].id;
  }
  gopt_sim_state_free(st);
  gopt_decisions_clear(&d);
  return k;
}

static void test_hand_decode(void) {
  fx_costs k;
  gopt_graph *g = hand_graph(&k);
  gopt_cluster *c = fx_cluster(2, 1e9, 0, 0);
  gopt_env *e = fx_env(g, c, GOPT_TASK_MEMORY, &k, 1);
  CHECK(gopt_env_nvars(e) == 12);
  CHECK(gopt_search_regal_genes(e) == 18);
  double genes[18], x[12];
  /* u before w, v before w: s u v w z; peak on device 0 while v runs: x 256 + ts 1024 + tu 4096 +
   * tv 256 = 5632 B (then tu is freed; w and z add at most 1024 + 2048 over x, tv, ts/tw) */
  static const double p1[6] = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4};
  hand_genes(e, genes, p1);
  gopt_search_regal_decode(e, genes, x);
  static const double dev[6] = {0, 0, 0, 0, 0, 1}; /* v: tie -> 0; z: 0.8 > 0.79; b: 0.9 -> 1 */
  const gopt_env_var *v = gopt_env_vars(e);
  for (int i = 0; i < 12; i++) CHECK(x[i] == (v[i].kind == GOPT_VAR_DEVICE ? dev[v[i].node] : p1[v[i].node]));
  int32_t ord[8];
  CHECK(dev0_order(e, x, ord) == 5);
  static const int32_t o1[5] = {0, 1, 2, 3, 4};
  for (int i = 0; i < 5; i++) CHECK(ord[i] == o1[i]);
  gopt_env_result r;
  fx_eval(e, x, &r);
  CHECK(r.peak_mem == 5632);
  CHECK(r.objective == 5632);
  /* w and z first: s w z u v; while u runs: x 256 + ts 1024 + tz 2048 + tu 4096 = 7424 B
   * (device 1: x 256 + tb 512) */
  static const double p2[6] = {0.9, 0.3, 0.2, 0.8, 0.7, 0.4};
  hand_genes(e, genes, p2);
  gopt_search_regal_decode(e, genes, x);
  CHECK(dev0_order(e, x, ord) == 5);
  static const int32_t o2[5] = {0, 3, 4, 1, 2};
  for (int i = 0; i < 5; i++) CHECK(ord[i] == o2[i]);
  fx_eval(e, x, &r);
  CHECK(r.peak_mem == 7424);
  /* genes outside [0, 1] are clamped: NaN and -1 -> 0 (a tie: device 0), 2 -> 1 */
  genes[0] = NAN;
  genes[1] = -1;
  genes[12] = 2;
  gopt_search_regal_decode(e, genes, x);
  CHECK(x[0] == 0 && x[6] == 1);
  genes[0] = 0.1;
  genes[1] = 7;
  gopt_search_regal_decode(e, genes, x);
  CHECK(x[0] == 1);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* A sampler returning fixed genes; counts its calls and rows. */
typedef struct fixed_keys { const double *genes; size_t genes_n, calls, rows; } fixed_keys;
static int fixed_sampler(double *keys, size_t n, size_t genes, uint64_t seed, void *user) {
  (void)seed;
  fixed_keys *f = user;
  CHECK(genes == f->genes_n);
  for (size_t r = 0; r < n; r++) memcpy(keys + r * genes, f->genes, genes * sizeof *keys);
  f->calls++;
  f->rows += n;
  return 0;
}

static void test_brkga_regal_runs(void) {
  fx_costs k;
  gopt_graph *g = hand_graph(&k);
  gopt_cluster *c = fx_cluster(2, 1e9, 0, 0);
  gopt_env *e = fx_env(g, c, GOPT_TASK_MEMORY, &k, 2);
  double x1[12], x2[12], x0[12];
  gopt_search_result r1, r2;
  gopt_error err = {0};
  gopt_search_opts o = {.budget_evals = 200, .seed = 3, .population = 20};
  CHECK(gopt_search_run("brkga-regal", e, &o, x1, &r1, &err) == 0);
  CHECK(gopt_search_run("brkga-regal", e, &o, x2, &r2, &err) == 0);
  CHECK(r1.evals == 200 && r2.evals == 200);
  CHECK(r1.best.objective == r2.best.objective && memcmp(x1, x2, sizeof x1) == 0);
  gopt_env_default(e, x0);
  CHECK(r1.best.objective <= fx_eval(e, x0, NULL));
  /* everything on device 0 in the order s w z u v is worse than the default; a sampler that
   * supplies the genes of the order s u v w z (device 1 idle except b) is used for generation 0
   * and the mutants, so the search ends at most at that order's 5632 B */
  double genes[18];
  static const double p1[6] = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4};
  hand_genes(e, genes, p1);
  fixed_keys fk = {genes, 18, 0, 0};
  o.sample_keys = fixed_sampler;
  o.keys_user = &fk;
  o.budget_evals = 60;
  CHECK(gopt_search_run("brkga-regal", e, &o, x1, &r1, &err) == 0);
  CHECK(fk.calls >= 2 && fk.rows > 0);
  CHECK(r1.best.objective <= 5632);
  /* a sampler applies to brkga-regal only */
  CHECK(gopt_search_run("brkga", e, &o, x1, &r1, &err) == GOPT_EINVAL);
  CHECK(strstr(err.msg, "brkga-regal") != NULL);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  test_hand_decode();
  test_brkga_regal_runs();
  return check_exit("test_search_regal");
}
