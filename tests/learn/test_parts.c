/* test_parts.c: the segment head's min-cut clusters (learn_parts.c), go's decode levels over METIS's
 * k-way parts. A chain of three wide MatMuls beside six branches of two small ones, joined by a Sum,
 * on two H100s (kernels a few us, a link latency about as long): METIS's two parts cut no chain and
 * no branch, and the phase split numbers every cluster after the clusters it reads (also on
 * ResNet-18's training step at 2, 4 and 8 parts, where the backward pass crosses the parts again).
 * The untrained policy's greedy decode over the parts is more than 10 % faster than its decode at
 * one cluster per node (each node alone finishes earlier beside its producer than a link away)
 * and within 7 % of the brute-force optimum over all 65,536 placements. go's zero-shot run
 * decodes it as its third greedy row (after level 0, one node per cluster here, and S / 64 = 4
 * clusters; --samples 2 reaches it, --samples 1 does not) and with 16 samples is as good. On a
 * training step the parts get balanced decodes only; on a 2-layer Transformer's step over 4 V100s
 * on PCIe they make the untrained policy's run more than 20 % faster, and faster than METIS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/baselines.h"
#include "gopt/learn.h"
#include "learn/learn_internal.h"

#include "learn_test_chain.h"
#include "learn_test_level.h"

#define NA 3   /* MatMuls in the chain */
#define KA 512 /* their width */
#define NB 6   /* branches */
#define LB 2   /* MatMuls per branch, 64 wide */
#define N_NODES (NA + NB * LB + 1)

static int32_t weight(gopt_graph *g, int i, int64_t k, int64_t m) {
  char nm[32];
  int64_t w[2] = {k, m};
  snprintf(nm, sizeof nm, "W%d", i);
  int32_t W = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, w, NULL);
  gopt_tensor_set_const(g, W, NULL, (size_t)(k * m * 4), NULL);
  g->tensors.a[W].flags |= GOPT_T_PARAM;
  return W;
}

/* A chain of NA MatMuls [64, KA] x [KA, KA] from x, then one to [64, 64]; NB branches of LB
 * MatMuls [64, 64] x [64, 64] from z; a Sum of the chain's end and the branches' ends. Node ids:
 * the chain 0..NA-1, the branches' NA.., the Sum last. */
static gopt_graph *chain_and_branches(void) {
  gopt_graph *g = gopt_graph_new("chain_and_branches");
  int64_t da[2] = {64, KA}, db[2] = {64, 64};
  int32_t ends[NB + 1], i = 0;
  char nm[32];
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, da, NULL);
  int32_t z = gopt_graph_add_tensor(g, "z", GOPT_DT_FLOAT, 2, db, NULL);
  gopt_graph_add_input(g, x);
  gopt_graph_add_input(g, z);
  for (int b = -1; b < NB; b++) {
    int32_t prev = b < 0 ? x : z;
    for (int j = 0; j < (b < 0 ? NA : LB); j++, i++) {
      int last_a = b < 0 && j == NA - 1;
      int32_t W = weight(g, i, b < 0 ? KA : 64, b < 0 && !last_a ? KA : 64);
      snprintf(nm, sizeof nm, "m%d", i);
      int32_t t = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, b < 0 && !last_a ? da : db, NULL);
      int32_t in[2] = {prev, W};
      gopt_graph_add_node(g, "MatMul", nm, 2, in, 1, &t, NULL);
      prev = t;
    }
    ends[b + 1] = prev;
  }
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, 2, db, NULL);
  gopt_graph_add_node(g, "Sum", "join", NB + 1, ends, 1, &y, NULL);
  gopt_graph_add_output(g, y);
  return g;
}

static void eval1(gopt_env *e, const double *x, gopt_env_result *r) {
  gopt_error err = {0};
  CHECK_MSG(gopt_env_evaluate_batch(e, x, 1, r, &err) == 0, "%s", err.msg);
}

/* Every dataflow edge of e's graph goes from a cluster to the same or a later one (lg over e). */
static int topological(const gopt_env *e, const learn_graph *lg) {
  const gopt_graph *g = gopt_env_graph(e);
  int32_t *topo = malloc((g->nodes.n + 1) * sizeof *topo), *pos = malloc((g->nodes.n + 1) * sizeof *pos);
  gopt_error err = {0};
  int ok = topo && pos && learn_row_index(g, lg->n, topo, pos, NULL, &err) == 0;
  for (size_t v = 0; ok && v < g->nodes.n; v++) {
    const gopt_node *nd = &g->nodes.a[v];
    for (uint32_t k = 0; pos[v] >= 0 && k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor, u = t >= 0 ? g->tensors.a[t].producer : -1;
      if (u >= 0 && pos[u] >= 0 && lg->seg_of[pos[u]] > lg->seg_of[pos[v]]) ok = 0;
    }
  }
  free(topo);
  free(pos);
  return ok;
}

/* The chain and the branches are two clusters of the parts level (each whole, apart), the Sum a
 * third, and the numbering is topological; on ResNet-18's training step too, at 2, 4 and 8 parts. */
static void test_clusters(gopt_policy *p) {
  gopt_error err = {0};
  fix f;
  if (fix_make2(&f, chain_and_branches(), "2xH100", GOPT_TASK_PLACEMENT, 0)) return;
  learn_graph *lg = NULL;
  const gopt_graph *g0 = gopt_env_graph(f.e);
  int32_t *topo = malloc((g0->nodes.n + 1) * sizeof *topo), *pos = malloc((g0->nodes.n + 1) * sizeof *pos);
  CHECK_MSG(learn_graph_for(p, f.e, -2, &lg, &err) == 0, "%s", err.msg);
  if (lg && topo && pos) {
    CHECK_EQ_INT(lg->n, N_NODES);
    CHECK_EQ_INT(lg->n_seg, 3);
    CHECK(topological(f.e, lg));
    CHECK(learn_row_index(g0, lg->n, topo, pos, NULL, &err) == 0);
    int whole = 1; /* nothing cut: the chain in one cluster, each branch in one, the Sum alone */
    for (int v = 1; v < NA; v++) whole &= lg->seg_of[pos[v]] == lg->seg_of[pos[0]];
    for (int v = NA; v < N_NODES - 1; v++) whole &= lg->seg_of[pos[v]] == lg->seg_of[pos[NA + (v - NA) / LB * LB]];
    for (int v = 0; v < N_NODES - 1; v++) whole &= lg->seg_of[pos[v]] != lg->seg_of[pos[N_NODES - 1]];
    CHECK(whole);
  }
  free(topo);
  free(pos);
  learn_graph_free(lg);
  fix_free(&f);

  if (learn_test_step_fix(&f, "resnet50:depth=18", "8xH100")) return;
  for (int k = 2; k <= 8; k *= 2) {
    lg = NULL;
    CHECK_MSG(learn_graph_for(p, f.e, -k, &lg, &err) == 0, "%s", err.msg);
    if (lg) {
      fprintf(stderr, "resnet18 step, %d parts: %d clusters over %d rows\n", k, (int)lg->n_seg, (int)lg->n);
      CHECK(lg->n_seg >= k && lg->n_seg < lg->n / 4);
      CHECK(topological(f.e, lg));
    }
    learn_graph_free(lg);
  }
  fix_free(&f);
}

/* Brute force over every placement on two devices against the greedy decodes and go's run. */
static void test_parallel_chains(gopt_policy *p) {
  fix f;
  if (fix_make2(&f, chain_and_branches(), "2xH100", GOPT_TASK_PLACEMENT, 0)) return;
  size_t nv = gopt_env_nvars(f.e);
  CHECK_EQ_INT(nv, N_NODES);
  double *x = calloc(nv + 1, sizeof *x);
  gopt_env_result best = {0}, r;
  for (uint32_t m = 0; m < (1u << nv); m++) {
    for (size_t v = 0; v < nv; v++) x[v] = (m >> v) & 1;
    eval1(f.e, x, &r);
    if (!m || gopt_env_result_better(&r, &best)) best = r;
  }
  gopt_env_result node, parts;
  int ns_node = 0, ns_parts = 0;
  learn_test_level_greedy(p, f.e, LEARN_SEG_PER_NODE, &node, &ns_node);
  learn_test_level_greedy(p, f.e, -2, &parts, &ns_parts);
  gopt_error err = {0};
  gopt_learn_opt_opts o = {.samples = 16, .seed = 1}, o1 = {.samples = 1, .seed = 1}, o2 = {.samples = 2, .seed = 1};
  gopt_search_result go, go1, go2; /* 1 and 2 samples: the first two and three greedy rows */
  CHECK_MSG(gopt_learn_optimize(p, f.e, &o, x, &go, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_learn_optimize(p, f.e, &o1, x, &go1, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_learn_optimize(p, f.e, &o2, x, &go2, &err) == 0, "%s", err.msg);
  fprintf(stderr, "go with 1 sample: %.4f us, with 2 (the parts' row third): %.4f us\n", go1.best.objective * 1e6,
          go2.best.objective * 1e6);
  CHECK(go1.best.objective > parts.objective && go2.best.objective == parts.objective);
  fprintf(stderr, "chain and branches @ 2xH100: optimum %.4f us, untrained greedy per node %.4f us (%d clusters), over the "
          "parts %.4f us (%d clusters), go zero-shot %.4f us\n", best.objective * 1e6, node.objective * 1e6, ns_node,
          parts.objective * 1e6, ns_parts, go.best.objective * 1e6);
  CHECK_EQ_INT(ns_parts, 3);
  CHECK(parts.feasible && parts.objective < 0.9 * node.objective && parts.objective < 1.07 * best.objective);
  CHECK(go.best.objective <= parts.objective);
  free(x);
  fix_free(&f);
}

/* On a training step the min-cut levels get balanced decodes only (go's rows 12 and 13, after the
 * ten gradient variants and level 0's balanced decode): on a 2-layer Transformer's step (batch 16)
 * over 4 V100s on PCIe, the untrained policy's run with them (--samples 12) is more than 20 %
 * faster than without (--samples 10), and faster than METIS's own partition. */
static void test_balanced_parts(gopt_policy *p) {
  gopt_error err = {0};
  fix f;
  if (learn_test_step_fix(&f, "transformer:layers=2,batch=16", "4xV100-pcie")) return;
  double *x = calloc(gopt_env_nvars(f.e) + 1, sizeof *x);
  gopt_search_result r[3];
  for (int k = 10; k <= 12; k++) {
    gopt_learn_opt_opts o = {.samples = k, .seed = 1};
    CHECK_MSG(gopt_learn_optimize(p, f.e, &o, x, &r[k - 10], &err) == 0, "%s", err.msg);
    CHECK_EQ_INT(r[k - 10].evals, k + 1);
  }
  gopt_env_result metis;
  CHECK_MSG(gopt_baseline_run("metis", f.e, x, &err) == 0, "%s", err.msg);
  eval1(f.e, x, &metis);
  fprintf(stderr, "transformer:layers=2 training step @ 4xV100-pcie, untrained go: %.6g ms with level 0's balanced "
          "decode, %.6g with the D parts' too, %.6g with the 2 D parts' too; METIS %.6g ms\n",
          r[0].best.objective * 1e3, r[1].best.objective * 1e3, r[2].best.objective * 1e3, metis.objective * 1e3);
  CHECK(r[1].best.objective <= r[0].best.objective && r[2].best.objective <= r[1].best.objective);
  CHECK(r[2].best.feasible && r[2].best.objective < 0.8 * r[0].best.objective);
  CHECK(r[2].best.objective < metis.objective);
  free(x);
  fix_free(&f);
}

int main(void) {
  gopt_error err = {0};
  gopt_policy *p = NULL;
  CHECK_MSG(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &p, &err) == 0, "%s", err.msg);
  if (p) {
    test_clusters(p);
    test_parallel_chains(p);
    test_balanced_parts(p);
  }
  gopt_policy_free(p);
  return check_exit("test_parts");
}
