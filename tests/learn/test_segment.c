/* test_segment.c: the segment-level placement head (learn_segment.c). On a chain of MatMuls whose
 * weights do not fit one device, with device 1 twice as fast as device 0, the best contiguous split
 * is found by brute force over every split point and both device orders; the head's clusters can
 * represent it (no cluster straddles the cut). The version-2 head (4 conditioning features, the
 * balanced pipeline prior) starts away from it and after a short fixed-seed PPO run its greedy
 * placement scores exactly like it, while the per-node head (independent per-node sampling, the
 * head of version-1 policies) trained with the same budget and seeds does not reach it; the
 * version-3 head (the clusters' list schedule and memory features) places it optimally untrained.
 * PPO improves the version-3 head where its prior is not optimal: GNMT on 2 V100s, trained beats
 * untrained. The list-schedule decode order (file version 4) decides WaveNet's forks as m-ETF
 * does, where the depth-first order does not. Also: placement fine-tuning never ends worse than
 * the best baseline (the searches' start is a candidate); go's samples go to the level whose
 * greedy decode is best; go's post-process moves only constant
 * subexpressions, each to a reader's device, and speeds a training step; clusters on a fork keep
 * each branch consecutive, samples are valid, and policy files keep the head (version-1 files
 * load with the per-node head, version-2 files with 4 features, version-3 files in depth-first
 * order; an unknown version is one line). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/baselines.h"
#include "gopt/learn.h"
#include "gopt/task.h"
#include "gopt/train.h"
#include "gopt/util.h"
#include "gopt/zoo.h"
#include "learn/learn_internal.h"

#include "learn_test_chain.h"
#include "learn_test_level.h"

#define N_CHAIN 24
#define N_CLUSTERS 8
#define K_CHAIN 16384

/* 2xV100-nvlink with device 1 twice as fast (FLOP/s, memory bandwidth, the GPU model's terms). */
static int fix_make(fix *f, gopt_graph *g) { return fix_make2(f, g, "2xV100-nvlink", GOPT_TASK_PLACEMENT, 1); }

/* f: an environment for the placement task over zoo model spec on cluster; 0 on success. */
static int zoo_fix(fix *f, const char *spec, const char *cluster) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_zoo_build(spec, &g, &err) == 0, "%s", err.msg);
  return !g || fix_make2(f, g, cluster, GOPT_TASK_PLACEMENT, 0);
}

static void eval1(gopt_env *e, const double *x, gopt_env_result *r) {
  gopt_error err = {0};
  CHECK_MSG(gopt_env_evaluate_batch(e, x, 1, r, &err) == 0, "%s", err.msg);
}

/* Nodes in chain order are variables 0..n-1 (one device variable per node, added in order). */
static void split_x(double *x, int n, int cut, int first) {
  for (int i = 0; i < n; i++) x[i] = i < cut ? first : 1 - first;
}

/* Trains a fresh placement policy with the given cluster count and conditioning features (0: the
 * default) for iters iterations and returns its greedy result before and after. */
static float train_kl; /* train_greedy's KL anchor weight (gopt_learn_train_opts.kl_coef) */

static void train_greedy(gopt_env *e, int clusters, int feats, int iters, gopt_env_result *r0, gopt_env_result *r1,
                         double *best_sampled) {
  gopt_error err = {0};
  gopt_learn_arch a = {.clusters = clusters, .seg_feats = feats};
  gopt_policy *p = NULL;
  size_t nv = gopt_env_nvars(e);
  double *x = calloc(nv, sizeof *x);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &a, 1, &p, &err) == 0);
  CHECK_EQ_INT(gopt_policy_arch(p).clusters, clusters ? clusters : LEARN_SEG_DEFAULT);
  CHECK(gopt_policy_decide(p, e, 1, 1, 0, x, &err) == 0);
  eval1(e, x, r0);
  gopt_learn_train_opts o = {.iters = iters, .seed = 3, .graphs_per_iter = 1, .samples = 16, .kl_coef = train_kl};
  gopt_learn_train_result tr;
  const char *name = "chain";
  if (iters > 0) CHECK_MSG(gopt_learn_train(p, &e, &name, 1, &o, &tr, &err) == 0, "%s", err.msg);
  CHECK(gopt_policy_decide(p, e, 1, 1, 0, x, &err) == 0);
  eval1(e, x, r1);
  /* p->best: the best objective sampled during training (trainer state) */
  *best_sampled = iters > 0 ? p->best[0] : r1->objective;
  free(x);
  gopt_policy_free(p);
}

static void test_chain_split(void) {
  fix f;
  if (fix_make(&f, learn_test_matmul_chain(N_CHAIN, K_CHAIN))) return;
  size_t nv = gopt_env_nvars(f.e);
  CHECK_EQ_INT(nv, N_CHAIN);
  double *x = calloc(nv, sizeof *x);
  gopt_env_result best = {0}, r;
  int best_cut = -1, have = 0;
  for (int first = 0; first < 2; first++)
    for (int cut = 0; cut <= N_CHAIN; cut++) {
      split_x(x, N_CHAIN, cut, first);
      eval1(f.e, x, &r);
      if (!have || gopt_env_result_better(&r, &best)) best = r, best_cut = cut, have = 1;
    }
  fprintf(stderr, "segment: best contiguous split after %d of %d nodes, %.6g s (feasible %d)\n", best_cut, N_CHAIN,
          best.objective, best.feasible);
  CHECK(best.feasible && best_cut > 0 && best_cut < N_CHAIN);
  split_x(x, N_CHAIN, N_CHAIN / 2, 0);
  eval1(f.e, x, &r);
  CHECK(gopt_env_result_better(&best, &r)); /* the balanced split (the pipeline prior) is not optimal */

  /* the head's clusters: N_CLUSTERS equal runs of the chain; none straddles the optimal cut */
  gopt_error err = {0};
  gopt_learn_arch a = {.clusters = N_CLUSTERS};
  gopt_policy *p = NULL;
  learn_graph *g = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &a, 1, &p, &err) == 0);
  CHECK(learn_graph_for(p, f.e, 0, &g, &err) == 0);
  if (g) {
    CHECK_EQ_INT(g->n_seg, N_CLUSTERS);
    for (int64_t v = 1; v < g->nk[GOPT_VAR_DEVICE]; v++)
      CHECK(g->var_seg[v] >= g->var_seg[v - 1]);
    CHECK(g->var_seg[best_cut] != g->var_seg[best_cut - 1]);
  }
  learn_graph_free(g);
  gopt_policy_free(p);

  gopt_env_result s0, s1, n0, n1, v0, v1;
  double s_best, n_best, v_best;
  train_greedy(f.e, N_CLUSTERS, LEARN_SEG_NF_V2, 40, &s0, &s1, &s_best);
  train_greedy(f.e, -1, 0, 40, &n0, &n1, &n_best);
  train_greedy(f.e, N_CLUSTERS, 0, 0, &v0, &v1, &v_best);
  fprintf(stderr, "segment head (version 2): untrained %.6g, trained %.6g (best sampled %.6g); per-node head: untrained "
          "%.6g, trained %.6g (best sampled %.6g); version-3 head untrained %.6g; optimum %.6g\n", s0.objective,
          s1.objective, s_best, n0.objective, n1.objective, n_best, v0.objective, best.objective);
  CHECK(gopt_env_result_cmp(&s1, &best) == 0);   /* the segment head reaches the optimum */
  CHECK(gopt_env_result_better(&s1, &s0));
  CHECK(gopt_env_result_better(&best, &n1));     /* the per-node head does not */
  CHECK(gopt_env_result_cmp(&v0, &best) == 0);   /* the list-schedule prior finds it untrained */
  free(x);
  fix_free(&f);
}

/* Rewrites a policy file's format version (and its checksum). */
/* Writes the n bytes of a policy file d to path with its checksum recomputed. */
static void write_rehashed(const char *path, unsigned char *d, size_t n) {
  uint64_t h = gopt_hash_bytes(d, n - 8, 0);
  memcpy(d + n - 8, &h, 8);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(d, 1, n, f) == n);
  if (f) fclose(f);
}

static void set_file_version(const char *path, uint32_t ver) {
  void *buf = NULL;
  size_t n = 0;
  gopt_error err = {0};
  CHECK(gopt_file_read(path, &buf, &n, &err) == 0 && n > 24);
  if (!buf || n <= 24) { free(buf); return; }
  memcpy((unsigned char *)buf + 8, &ver, 4);
  write_rehashed(path, buf, n);
  free(buf);
}

/* Removes the text pat from a policy file's metadata, e.g. " feats 4 order index" to write the
 * place_head line as version 2 did (the metadata length, the checkpoint's offset and the checksum
 * follow). */
static void strip_meta(const char *path, const char *pat) {
  void *buf = NULL;
  size_t n = 0;
  gopt_error err = {0};
  CHECK(gopt_file_read(path, &buf, &n, &err) == 0 && n > 24);
  if (!buf || n <= 24) { free(buf); return; }
  unsigned char *d = buf;
  uint32_t ml;
  memcpy(&ml, d + 12, 4);
  size_t k = strlen(pat);
  unsigned char *hit = NULL;
  for (size_t i = 16; i + k <= 16 + (size_t)ml; i++)
    if (!memcmp(d + i, pat, k)) { hit = d + i; break; }
  CHECK(hit != NULL);
  if (hit) {
    memmove(hit, hit + k, n - (size_t)(hit + k - d));
    n -= k;
    ml -= (uint32_t)k;
    memcpy(d + 12, &ml, 4);
    write_rehashed(path, d, n);
  }
  free(buf);
}

/* A policy with arch a saved, its metadata rewritten as file version ver wrote it (strip removed),
 * loads with the same architecture (clusters, features, decode order `order`) and decisions. */
static void check_old_file(gopt_env *e, const char *path, const gopt_learn_arch *a, const char *strip, uint32_t ver,
                           int order) {
  gopt_error err = {0};
  size_t nv = gopt_env_nvars(e);
  double *xa = calloc(4 * nv, sizeof *xa), *xb = calloc(4 * nv, sizeof *xb);
  gopt_policy *p = NULL, *q = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, a, 7, &p, &err) == 0);
  CHECK(p && gopt_policy_decide(p, e, 1, 4, 5, xa, &err) == 0);
  CHECK(p && gopt_policy_save(p, path, &err) == 0);
  strip_meta(path, strip);
  set_file_version(path, ver);
  CHECK_MSG(gopt_policy_load(path, GOPT_TASK_PLACEMENT, &q, &err) == 0, "%s", err.msg);
  if (p && q) {
    CHECK_EQ_INT(gopt_policy_arch(q).clusters, a->clusters);
    CHECK_EQ_INT(gopt_policy_arch(q).seg_feats, gopt_policy_arch(p).seg_feats);
    CHECK_EQ_INT(gopt_policy_arch(q).seg_order, order);
    CHECK(gopt_policy_decide(q, e, 1, 4, 5, xb, &err) == 0);
    CHECK(memcmp(xa, xb, 4 * nv * sizeof *xa) == 0);
  }
  gopt_policy_free(p);
  gopt_policy_free(q);
  free(xa);
  free(xb);
}

/* The head survives save/load (same decisions); a version-1 file (no place_head line) loads with
 * the per-node head; a file from a newer format is refused with one line naming it. */
static void test_files(void) {
  gopt_graph *g = learn_test_matmul_chain(6, 1024);
  fix f;
  if (fix_make(&f, g)) return;
  gopt_error err = {0};
  char path[128];
  snprintf(path, sizeof path, "/tmp/gopt_test_segment_%d.gpol", (int)getpid());
  size_t nv = gopt_env_nvars(f.e);
  double *xa = calloc(4 * nv, sizeof *xa), *xb = calloc(4 * nv, sizeof *xb);
  gopt_policy *p = NULL, *q = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 7, &p, &err) == 0);
  CHECK_EQ_INT(gopt_policy_arch(p).clusters, LEARN_SEG_DEFAULT); /* the default for placement */
  CHECK_EQ_INT(gopt_policy_arch(p).seg_feats, LEARN_SEG_NF);
  CHECK_EQ_INT(gopt_policy_arch(p).seg_order, GOPT_LEARN_ORDER_LIST);
  CHECK(gopt_policy_decide(p, f.e, 1, 4, 5, xa, &err) == 0);
  CHECK(gopt_policy_save(p, path, &err) == 0);
  CHECK_MSG(gopt_policy_load(path, GOPT_TASK_PLACEMENT, &q, &err) == 0, "%s", err.msg);
  if (q) {
    CHECK_EQ_INT(gopt_policy_arch(q).clusters, LEARN_SEG_DEFAULT);
    CHECK_EQ_INT(gopt_policy_arch(q).seg_feats, LEARN_SEG_NF);
    CHECK_EQ_INT(gopt_policy_arch(q).seg_order, GOPT_LEARN_ORDER_LIST);
    CHECK(gopt_policy_decide(q, f.e, 1, 4, 5, xb, &err) == 0);
    CHECK(memcmp(xa, xb, 4 * nv * sizeof *xa) == 0);
  }
  gopt_policy_free(p);
  gopt_policy_free(q);
  q = NULL;
  /* a version-2 file: `place_head segment S` without feats, 4 conditioning features */
  gopt_learn_arch v2 = {.clusters = 16, .seg_feats = LEARN_SEG_NF_V2};
  check_old_file(f.e, path, &v2, " feats 4 order index", 2, GOPT_LEARN_ORDER_INDEX);
  /* a version-3 file: no order field, the depth-first decode order */
  gopt_learn_arch v3 = {.clusters = 16, .seg_order = GOPT_LEARN_ORDER_INDEX};
  check_old_file(f.e, path, &v3, " order index", 3, GOPT_LEARN_ORDER_INDEX);
  gopt_learn_arch bad = {.seg_feats = 5};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &bad, 7, &p, &err) != 0 && !p);
  CHECK(strstr(err.msg, "conditioning features") != NULL);
  gopt_learn_arch bad_order = {.seg_order = 3};
  gopt_learn_arch v2_list = {.seg_feats = LEARN_SEG_NF_V2, .seg_order = GOPT_LEARN_ORDER_LIST};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &bad_order, 7, &p, &err) != 0 && !p);
  CHECK(strstr(err.msg, "decode order") != NULL);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &v2_list, 7, &p, &err) != 0 && !p);
  CHECK(strstr(err.msg, "decode order") != NULL);
  gopt_learn_arch node = {.clusters = -1};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &node, 7, &p, &err) == 0);
  CHECK(gopt_policy_save(p, path, &err) == 0);
  set_file_version(path, 1);
  CHECK_MSG(gopt_policy_load(path, GOPT_TASK_PLACEMENT, &q, &err) == 0, "%s", err.msg);
  if (q) CHECK_EQ_INT(gopt_policy_arch(q).clusters, -1);
  CHECK_EQ_INT(gopt_policy_param_count(q ? q : p), gopt_policy_param_count(p));
  gopt_policy_free(q);
  q = NULL;
  /* an order field without its value, and an unknown order, are one line naming the file */
  gopt_policy_free(p);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 7, &p, &err) == 0);
  for (int k = 0; k < 2; k++) {
    CHECK(p && gopt_policy_save(p, path, &err) == 0);
    strip_meta(path, k ? "li" : " list"); /* "order st" */
    CHECK(gopt_policy_load(path, GOPT_TASK_PLACEMENT, &q, &err) != 0 && !q);
    CHECK(strstr(err.msg, path) && strstr(err.msg, "placement head") && !strchr(err.msg, '\n'));
  }
  gopt_policy_free(p);
  p = NULL;
  set_file_version(path, GOPT_LEARN_FILE_VERSION + 1);
  CHECK(gopt_policy_load(path, GOPT_TASK_PLACEMENT, &q, &err) != 0);
  CHECK(strstr(err.msg, path) && strstr(err.msg, "version") && !strchr(err.msg, '\n'));
  gopt_policy_free(p);
  unlink(path);
  free(xa);
  free(xb);
  fix_free(&f);
}

/* On a fork (x -> two branches of 4 Muls -> add), the depth-first order keeps each branch
 * consecutive (Kahn's order, the rows', alternates between them), so with 2 clusters no cluster
 * holds nodes of both branches and the head can put the branches on different devices (m-ETF's
 * branch interleaving) with one decision each. Boundaries fall by weight, not at branch starts:
 * with 3 clusters of 3 nodes one would straddle. */
static void test_fork_clusters(void) {
  gopt_graph *g = gopt_graph_new("fork");
  int64_t d[2] = {64, 64};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, d, NULL), br[2];
  gopt_graph_add_input(g, x);
  char nm[32];
  for (int b = 0; b < 2; b++) {
    int32_t prev = x;
    for (int i = 0; i < 4; i++) {
      snprintf(nm, sizeof nm, "b%d_%d", b, i);
      int32_t t = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, d, NULL);
      int32_t in[2] = {prev, prev};
      gopt_graph_add_node(g, "Mul", nm, 2, in, 1, &t, NULL);
      prev = t;
    }
    br[b] = prev;
  }
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, 2, d, NULL);
  gopt_graph_add_node(g, "Add", "join", 2, br, 1, &y, NULL);
  gopt_graph_add_output(g, y);
  fix f;
  if (fix_make(&f, g)) return;
  gopt_error err = {0};
  learn_graph *lg = NULL;
  CHECK(learn_graph_new(f.e, &lg, &err) == 0);
  CHECK(lg && learn_graph_segment(lg, f.e, 2, &err) == 0);
  if (lg) {
    /* node ids: branch b's i-th Mul is node 4b+i, the join node 8; rows are Kahn's order */
    const gopt_env_var *vars = gopt_env_vars(f.e);
    int seg_of_node[9];
    for (int64_t v = 0; v < lg->nk[GOPT_VAR_DEVICE]; v++) seg_of_node[vars[lg->var[GOPT_VAR_DEVICE][v]].node] = lg->var_seg[v];
    CHECK_EQ_INT(lg->n_seg, 2);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) CHECK(seg_of_node[i] != seg_of_node[4 + j]);
  }
  learn_graph_free(lg);
  fix_free(&f);
}

/* Placement fine-tuning takes the searches' start (the best of the default and the baselines) as a
 * candidate inside its budget: never worse than the best baseline, exactly 17 + N evaluations. */
static void test_finetune_start(void) {
  fix f;
  if (fix_make(&f, learn_test_matmul_chain(N_CHAIN, K_CHAIN))) return;
  gopt_error err = {0};
  gopt_policy *p = NULL;
  gopt_env_result ref;
  size_t nv = gopt_env_nvars(f.e);
  double *x = calloc(nv, sizeof *x);
  CHECK(gopt_learn_reference(f.e, &ref, NULL, &err) == 0);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 4, &p, &err) == 0);
  gopt_learn_opt_opts o = {.samples = 16, .finetune_evals = 24, .seed = 2};
  gopt_search_result res;
  CHECK_MSG(gopt_learn_optimize(p, f.e, &o, x, &res, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(res.evals, 17 + 24);
  CHECK(gopt_env_result_cmp(&res.best, &ref) <= 0);
  gopt_env_result r;
  eval1(f.e, x, &r);
  CHECK(gopt_env_result_cmp(&r, &res.best) == 0);
  free(x);
  gopt_policy_free(p);
  fix_free(&f);
}

/* PPO improves the version-3 head (list-schedule decode order) where its list-schedule prior is
 * not optimal: a 2-layer GNMT unrolled over 4 steps on 2 V100s over NVLink (earliest finish time,
 * cluster by cluster, is myopic: 7.94 ms untrained); 200 fixed-seed iterations must make the
 * greedy placement faster (7.84 ms). With a heavy KL anchor to the head's fixed-feature prior
 * (--kl 100) the same training must leave the greedy placement where the untrained head has it:
 * the anchor holds the policy at its prior. */
static void test_v3_learns(void) {
  fix f;
  if (zoo_fix(&f, "gnmt:layers=2,steps=4", "2xV100-nvlink")) return;
  gopt_env_result r0, r1;
  double sampled;
  train_greedy(f.e, 0, 0, 200, &r0, &r1, &sampled);
  fprintf(stderr, "version-3 head on gnmt @ 2xV100-nvlink: untrained %.6g, trained %.6g (best sampled %.6g)\n",
          r0.objective, r1.objective, sampled);
  CHECK(r0.feasible && r1.feasible);
  CHECK(gopt_env_result_better(&r1, &r0));
  gopt_env_result k0, k1;
  train_kl = 100.f;
  train_greedy(f.e, 0, 0, 200, &k0, &k1, &sampled);
  train_kl = 0.f;
  fprintf(stderr, "  with --kl 100: untrained %.6g, trained %.6g\n", k0.objective, k1.objective);
  CHECK(k1.objective == k0.objective);
  fix_free(&f);
}

/* Greedy node-level decode (one cluster per node) of an untrained policy with decode order `order`:
 * its objective. The 6-feature head (file versions 3-4): untrained, it decides by the earliest
 * finish time alone, as m-ETF (the 7-feature head's return-transfer preference moves off it). */
static void node_level_greedy(gopt_env *e, int order, gopt_env_result *r) {
  gopt_error err = {0};
  gopt_learn_arch a = {.seg_order = order, .seg_feats = LEARN_SEG_NF_V4};
  gopt_policy *p = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &a, 1, &p, &err) == 0);
  learn_test_level_greedy(p, e, LEARN_SEG_PER_NODE, r, NULL);
  gopt_policy_free(p);
}

/* The list-schedule decode order decides WaveNet's forks as m-ETF does. After each gated unit two
 * nodes are ready at once, the skip and the residual convolution; the depth-first order decides
 * the skip first, which takes the free device and sends the residual chain to another device at
 * every layer; the list order takes the residual first (the longer chain after it, HEFT's upward
 * rank, breaks the tie in start time) and keeps the chain on one device. Untrained, at one cluster
 * per node on 8 H100s, the list order equals m-ETF's placement time and the depth-first order is
 * slower; go's zero-shot run reaches it too (its node-level decisions). */
static void test_list_order(void) {
  gopt_error err = {0};
  fix f;
  if (zoo_fix(&f, "wavenet", "8xH100")) return;
  gopt_env_result ri, rl, rm;
  double *x = calloc(gopt_env_nvars(f.e) + 1, sizeof *x);
  gopt_env_default(f.e, x);
  CHECK_MSG(gopt_baseline_run("m_etf", f.e, x, &err) == 0, "%s", err.msg);
  eval1(f.e, x, &rm);
  node_level_greedy(f.e, GOPT_LEARN_ORDER_INDEX, &ri);
  node_level_greedy(f.e, GOPT_LEARN_ORDER_LIST, &rl);
  fprintf(stderr, "wavenet @ 8xH100, node level, untrained greedy: depth-first order %.6g, list order %.6g, m-ETF %.6g\n",
          ri.objective, rl.objective, rm.objective);
  CHECK(fabs(rl.objective - rm.objective) <= 1e-9 * rm.objective);
  CHECK(ri.objective > 1.02 * rm.objective);
  /* go's zero-shot run decodes at both levels: with one sample besides the greedy decision, the
   * clusters' greedy decision and the nodes' (the 256 clusters alone end at 3.20 ms here) */
  gopt_policy *p = NULL;
  gopt_learn_opt_opts o = {.samples = 1, .seed = 1};
  gopt_learn_arch a6 = {.seg_feats = LEARN_SEG_NF_V4};
  gopt_search_result res;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &a6, 1, &p, &err) == 0);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o, x, &res, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(res.evals, 2);
  CHECK(res.best.objective <= rl.objective);
  gopt_policy_free(p);
  free(x);
  fix_free(&f);
}

/* go's zero-shot runs on e with an untrained placement policy (*p, made here when NULL), ka and then
 * kb samples at seed 1, into ra and rb (x: the second's decision); each must use all its 1 + k
 * evaluations (with k below the greedy variants' count, every row is a greedy decode). */
static void zero_shot_pair(gopt_policy **p, gopt_env *e, int ka, int kb, double *x, gopt_search_result *ra,
                           gopt_search_result *rb) {
  gopt_error err = {0};
  gopt_learn_opt_opts oa = {.samples = ka, .seed = 1}, ob = {.samples = kb, .seed = 1};
  if (!*p) CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, p, &err) == 0);
  CHECK_MSG(*p && gopt_learn_optimize(*p, e, &oa, x, ra, &err) == 0, "%s", err.msg);
  CHECK_MSG(*p && gopt_learn_optimize(*p, e, &ob, x, rb, &err) == 0, "%s", err.msg);
  CHECK_EQ_INT(ra->evals, ka + 1);
  CHECK_EQ_INT(rb->evals, kb + 1);
}

/* go's zero-shot run also decodes at coarser levels, a quarter, a sixteenth (and a 64th,
 * test_coarsest_level) of the policy's clusters: with --samples 3 its four decisions are the
 * greedy ones of the four levels, and on a 4-layer BERT over 4 V100s on PCIe (slow links: fewer,
 * larger pieces win) they beat the two finer levels' greedy decisions (--samples 1, the same two
 * decisions, greedy uses no random draw) by 4 % (1.586 against 1.518 ms). With --samples 16 the
 * run takes 17 evaluations and is never worse than the four greedy decisions. Untrained policy. */
static void test_coarse_levels(void) {
  gopt_error err = {0};
  fix f;
  if (zoo_fix(&f, "bert:layers=4", "4xV100-pcie")) return;
  double *x = calloc(gopt_env_nvars(f.e) + 1, sizeof *x);
  gopt_policy *p = NULL;
  gopt_search_result r2, r4, r17;
  gopt_learn_opt_opts o2 = {.samples = 1, .seed = 1}, o4 = {.samples = 3, .seed = 1}, o17 = {.samples = 16, .seed = 1};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &p, &err) == 0);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o2, x, &r2, &err) == 0, "%s", err.msg);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o4, x, &r4, &err) == 0, "%s", err.msg);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o17, x, &r17, &err) == 0, "%s", err.msg);
  fprintf(stderr, "bert:layers=4 @ 4xV100-pcie, untrained greedy: two levels %.6g, four levels %.6g, with 13 samples %.6g\n",
          r2.best.objective, r4.best.objective, r17.best.objective);
  CHECK_EQ_INT(r4.evals, 4);
  CHECK(r4.best.feasible && r4.best.objective < 0.99 * r2.best.objective);
  CHECK_EQ_INT(r17.evals, 17); /* the greedy decodes, then samples at the best level: never worse */
  CHECK(r17.best.objective <= r4.best.objective);
  gopt_policy_free(p);
  free(x);
  fix_free(&f);
}

/* The coarsest level has S / 64 clusters (4 with the default 256): a layer split in a few
 * contiguous pieces, what a multilevel partitioner's coarsest graph or the expert's layer split
 * gives. On zoo WaveNet over 4 V100s on PCIe the finer levels' greedy decodes spread the gated
 * units over the slow links (--samples 3: the first four levels); the fifth, with --samples 4,
 * is at least 10 % faster than all of them. Untrained policy. */
static void test_coarsest_level(void) {
  fix f;
  if (zoo_fix(&f, "wavenet", "4xV100-pcie")) return;
  double *x = calloc(gopt_env_nvars(f.e) + 1, sizeof *x);
  gopt_policy *p = NULL;
  gopt_search_result r4, r5;
  zero_shot_pair(&p, f.e, 3, 4, x, &r4, &r5);
  fprintf(stderr, "wavenet @ 4xV100-pcie, untrained greedy: four levels %.6g, five levels %.6g\n", r4.best.objective,
          r5.best.objective);
  CHECK(r5.best.feasible && r5.best.objective < 0.9 * r4.best.objective);
  gopt_policy_free(p);
  free(x);
  fix_free(&f);
}

/* On a training step each level's greedy decode is also tried with every gradient and optimizer
 * update on its forward op's device (gopt_env_grad_owner, TensorFlow's colocate_gradients_with_ops):
 * --samples 9 gives the five levels' greedy decodes, each as decided and gradient-colocated (10
 * evaluations); --samples 4 only the five as decided. On a Transformer training step (batch 16)
 * over 4 V100s on PCIe the colocated decodes win by far (81.0 against 66.6 ms: the decoded
 * backward pass moves activations over the slow links), and the best decision has every owned
 * variable on its owner's device. Untrained policy. */
static void test_grad_variants(void) {
  gopt_error err = {0};
  fix f;
  if (learn_test_step_fix(&f, "transformer:batch=16", "4xV100-pcie")) return;
  size_t nv = gopt_env_nvars(f.e);
  double *x = calloc(nv + 1, sizeof *x);
  int32_t *own = calloc(nv + 1, sizeof *own);
  gopt_policy *p = NULL;
  gopt_search_result r5, r10;
  int owned = gopt_env_grad_owner(f.e, own, &err);
  CHECK(owned > (int)nv / 3);
  zero_shot_pair(&p, f.e, 4, 9, x, &r5, &r10);
  fprintf(stderr, "transformer:batch=16 training @ 4xV100-pcie, untrained greedy: five levels %.6g, "
          "also gradient-colocated %.6g\n", r5.best.objective, r10.best.objective);
  CHECK(r10.best.objective < 0.9 * r5.best.objective);
  int apart = 0;
  for (size_t v = 0; v < nv; v++) apart += own[v] >= 0 && x[v] != x[own[v]];
  CHECK_EQ_INT(apart, 0);
  gopt_policy_free(p);
  free(x);
  free(own);
  fix_free(&f);
}

/* The balanced decode (learn_seg_sample's cap). With every cluster weighing the same, an untrained
 * policy's greedy decode of a ResNeXt-50 training step over 4 V100s on PCIe fills every device and
 * leaves none more than one cluster's weight over LEARN_DEC_CAP_SLACK / 4; without the cap it puts
 * 77 % of the clusters on one device. In go's zero-shot the balanced variant is the eleventh greedy
 * row (--samples 10 against 9), and on this step the best one (13.11 against 13.18 ms; with the
 * shipped policy 12.83 against 16.41 ms, tests/cli/check_go.sh). */
static void test_balanced_decode(void) {
  gopt_error err = {0};
  fix f;
  if (learn_test_step_fix(&f, "resnext50", "4xV100-pcie")) return;
  gopt_policy *p = NULL;
  learn_graph *g = NULL;
  learn_acts acts = {0};
  learn_fwd fw;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &p, &err) == 0);
  CHECK(p && learn_graph_for(p, f.e, 0, &g, &err) == 0);
  double *cap = g ? calloc((size_t)g->n_seg + 1, sizeof *cap) : NULL;
  if (g && cap && learn_acts_alloc(&acts, g) == 0) {
    gopt_nn_ctx_set_training(ctx, 0);
    CHECK_MSG(learn_forward(ctx, p, g, NULL, &fw, &err) == 0, "%s", err.msg);
    gopt_nn_rng rng;
    gopt_nn_rng_seed(&rng, 1);
    for (int bal = 0; bal < 2; bal++) {
      for (int64_t s = 0; s < g->n_seg; s++) cap[s] = 1.0 / (double)g->n_seg;
      learn_seg_sample(&fw, g, &rng, 1, bal ? cap : NULL, &acts);
      double held[4] = {0};
      for (int64_t s = 0; s < g->n_seg; s++) held[acts.seg[s]] += cap[s];
      int used = 0, over = 0;
      for (int d = 0; d < 4; d++) {
        used += held[d] > 0;
        over += held[d] > LEARN_DEC_CAP_SLACK / 4 + 1.0 / (double)g->n_seg + 1e-12;
      }
      fprintf(stderr, "resnext50 training step, %s greedy decode: %.3f %.3f %.3f %.3f of the clusters per device\n",
              bal ? "balanced" : "plain", held[0], held[1], held[2], held[3]);
      if (bal) CHECK_EQ_INT(used, 4);
      CHECK_EQ_INT(over > 0, !bal);
    }
  }
  gopt_search_result r10, r11;
  double *x = calloc(gopt_env_nvars(f.e) + 1, sizeof *x);
  zero_shot_pair(&p, f.e, 9, 10, x, &r10, &r11);
  fprintf(stderr, "resnext50 training step @ 4xV100-pcie, untrained greedy: ten variants %.6g, and the balanced one %.6g\n",
          r10.best.objective, r11.best.objective);
  CHECK(r11.best.feasible && r11.best.objective < r10.best.objective);
  free(x);
  free(cap);
  learn_acts_free(&acts);
  learn_graph_free(g);
  gopt_nn_ctx_free(ctx);
  gopt_policy_free(p);
  fix_free(&f);
}

/* Training at the coarsest level (gopt_learn_train_opts.coarse_frac): PPO batches decided over
 * S / 64 clusters, where a layer split is a few decisions. On a ResNeXt-50 training step over 4
 * V100s on PCIe the untrained policy's greedy decode at that level keeps everything on one device
 * (16.5 ms); after 200 iterations with coarse_frac 1 it splits the step (13.2 ms, METIS 13.3). */
static void test_coarse_training(void) {
  gopt_error err = {0};
  fix f;
  if (learn_test_step_fix(&f, "resnext50", "4xV100-pcie")) return;
  gopt_policy *p = NULL;
  gopt_env_result r0, r1;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &p, &err) == 0);
  int S = LEARN_SEG_DEFAULT / LEARN_DEC_COARSEST;
  learn_test_level_greedy(p, f.e, S, &r0, NULL);
  gopt_learn_train_opts o = {.iters = 200, .seed = 3, .graphs_per_iter = 1, .samples = 16, .coarse_frac = 1};
  gopt_learn_train_result tr;
  const char *name = "step";
  CHECK_MSG(gopt_learn_train(p, &f.e, &name, 1, &o, &tr, &err) == 0, "%s", err.msg);
  learn_test_level_greedy(p, f.e, S, &r1, NULL);
  fprintf(stderr, "resnext50 training step @ 4xV100-pcie, %d clusters: untrained greedy %.6g, after 200 coarse "
          "iterations %.6g (best sampled %.6g)\n", S, r0.objective, r1.objective, p->best[0]);
  CHECK(r0.feasible && r1.feasible);
  CHECK(r1.objective < 0.9 * r0.objective);
  gopt_policy_free(p);
  fix_free(&f);
}

/* The samples go to the level whose greedy decode is best (learn_alloc_levels): NasRNN's four
 * greedy decodes on 4xV100-nvlink (shipped policy: 0.360, 0.366, 0.576, 0.779 ms) give all 13
 * samples to level 0; tied levels share them in turn; a feasible result beats a faster infeasible
 * one; one level takes every row; the balanced decode takes no sample even when best; a training
 * step's eleven variants, all tied, share the samples (the table of tied variants once had room
 * for four). (test_coarse_levels runs it whole.) */
static void set_res(gopt_env_result *r, double obj, int feasible) {
  memset(r, 0, sizeof *r);
  r->objective = r->step_time = obj;
  r->feasible = feasible;
  r->mem_over = feasible ? 0 : 1e9;
}

static void test_sample_levels(void) {
  gopt_env_result g[4];
  int8_t lv[17];
  set_res(&g[0], 0.360e-3, 1), set_res(&g[1], 0.366e-3, 1), set_res(&g[2], 0.576e-3, 1), set_res(&g[3], 0.779e-3, 1);
  learn_alloc_levels(g, 4, 4, 16, lv);
  for (int r = 0; r <= 16; r++) CHECK_EQ_INT(lv[r], r < 4 ? r : 0);
  set_res(&g[0], 2, 1), set_res(&g[1], 1, 1), set_res(&g[2], 1, 1), set_res(&g[3], 3, 1);
  learn_alloc_levels(g, 4, 4, 16, lv);
  for (int r = 4; r <= 16; r++) CHECK_EQ_INT(lv[r], r % 2 == 0 ? 1 : 2);
  set_res(&g[0], 0.5, 0), set_res(&g[1], 0.9, 1);
  learn_alloc_levels(g, 2, 2, 16, lv);
  for (int r = 2; r <= 16; r++) CHECK_EQ_INT(lv[r], 1);
  learn_alloc_levels(g, 1, 1, 16, lv);
  for (int r = 0; r <= 16; r++) CHECK_EQ_INT(lv[r], 0);
  set_res(&g[0], 2, 1), set_res(&g[1], 1.5, 1), set_res(&g[2], 1, 1); /* the balanced decode (2) is best */
  learn_alloc_levels(g, 3, 2, 16, lv);
  for (int r = 0; r <= 16; r++) CHECK_EQ_INT(lv[r], r < 3 ? r : 1);
  gopt_env_result t[LEARN_DEC_VARIANTS]; /* a training step's 11 variants, all tied: the 6 samples rotate over all */
  for (int v = 0; v < LEARN_DEC_VARIANTS; v++) set_res(&t[v], 1, 1);
  learn_alloc_levels(t, LEARN_DEC_VARIANTS, LEARN_DEC_VARIANTS, 16, lv);
  for (int r = 0; r <= 16; r++) CHECK_EQ_INT(lv[r], r < LEARN_DEC_VARIANTS ? r : (r - LEARN_DEC_VARIANTS) % LEARN_DEC_VARIANTS);

}

/* GNMT (2 layers, 4 steps) on 4xV100-pcie, an untrained policy's encoding of it at one cluster
 * per node (lg NULL on failure) and its topological order (topo[n], the rows' node ids; n < 0 on
 * failure): test_transfer_bytes's and test_return_feature's graph. */
typedef struct node_fix {
  fix f;
  gopt_policy *p;
  learn_graph *lg;
  int32_t *topo;
  int64_t n;
} node_fix;

static int gnmt_node_level(node_fix *t) {
  gopt_error err = {0};
  memset(t, 0, sizeof *t);
  if (zoo_fix(&t->f, "gnmt:layers=2,steps=4", "4xV100-pcie")) return 1;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &t->p, &err) == 0);
  CHECK_MSG(t->p && learn_graph_for(t->p, t->f.e, LEARN_SEG_PER_NODE, &t->lg, &err) == 0, "%s", err.msg);
  t->topo = malloc((t->f.g->nodes.n + 1) * sizeof *t->topo);
  t->n = t->topo ? gopt_graph_topo(t->f.g, t->topo, &err) : -1;
  return 0;
}

static void node_fix_free(node_fix *t) {
  free(t->topo);
  learn_graph_free(t->lg);
  gopt_policy_free(t->p);
  fix_free(&t->f);
}

/* The list schedule moves what the simulator moves: every tensor a cluster reads from an earlier
 * one costs the bytes of its producer's outputs, views included (a GNMT's Unsqueeze of the logits
 * writes nothing in the cost model but is a 16 MB tensor to move; reading the cost model's bytes
 * written, the head saw 40 of the 202 MB its own node-level placement moved on 4xV100-pcie). */
static void test_transfer_bytes(void) {
  node_fix t;
  if (gnmt_node_level(&t)) return;
  const gopt_graph *g = t.f.g;
  const learn_graph *lg = t.lg;
  const int32_t *topo = t.topo;
  int64_t n = t.n;
  int views = 0, bad = 0;
  for (int32_t i = 0; lg && n == lg->n && i < lg->in_ptr[lg->n_seg]; i++) {
    const gopt_node *nd = &g->nodes.a[topo[lg->in_row[i]]];
    double b = 0;
    for (uint32_t k = 0; k < nd->n_out; k++)
      if (g->outs.a[nd->out + k] >= 0) b += gopt_tensor_bytes(g, g->outs.a[nd->out + k]);
    bad += lg->in_bytes[i] != (float)b;
    views += nd->op == GOPT_OP_UNSQUEEZE && b > 0;
  }
  fprintf(stderr, "gnmt transfer bytes: %d reads of Unsqueeze outputs, %d entries differ from the tensors' bytes\n", views, bad);
  CHECK(lg && n == lg->n && lg->in_ptr[lg->n_seg] > 0);
  CHECK(views > 0);
  CHECK_EQ_INT(bad, 0);
  node_fix_free(&t);
}

/* The return-transfer feature (column 6 of the 7-feature head) against a reference computed from
 * the graph and the cluster preset: GNMT (2 layers, 4 steps) at one cluster per node on
 * 4xV100-pcie, every third cluster on device 1 and the rest on device 0. A cluster's home is the
 * device it reads the most bytes from (earlier clusters' outputs); away from home the feature is
 * -log(1 + (latency + bytes of its outputs that later clusters read / bandwidth) / mean cluster
 * time), at home and without inputs 0. */
static void test_return_feature(void) {
  node_fix t;
  if (gnmt_node_level(&t)) return;
  const gopt_graph *g = t.f.g;
  const gopt_cluster *c = t.f.c;
  learn_graph *lg = t.lg;
  const int32_t *topo = t.topo;
  int64_t n = t.n;
  size_t N = g->nodes.n;
  int32_t *pos = malloc((N + 1) * sizeof *pos);
  if (!lg || !pos || n != lg->n) goto done;
  int D = lg->n_dev, nf = LEARN_SEG_NF, bad = 0, away = 0, homeless = 0;
  int32_t *dev = malloc(((size_t)lg->n_seg + 1) * sizeof *dev);
  float *cond = malloc(((size_t)lg->n_seg * D * nf + 1) * sizeof *cond);
  for (size_t v = 0; v < N; v++) pos[v] = -1;
  for (int64_t i = 0; i < n; i++) pos[topo[i]] = (int32_t)i;
  for (int64_t s = 0; s < lg->n_seg; s++) dev[s] = s % 3 == 0;
  learn_seg_cond(lg, dev, nf, cond);
  for (int64_t r = 0; r < n; r++) {
    const gopt_node *nd = &g->nodes.a[topo[r]];
    int32_t s = lg->seg_of[r];
    double from[2] = {0, 0}, out = 0;
    for (uint32_t k = 0; k < nd->n_in; k++) { /* input bytes per device, each producer once */
      int32_t t = g->slots.a[nd->in + k].tensor, u = t >= 0 ? g->tensors.a[t].producer : -1;
      int dup = 0;
      for (uint32_t j = 0; j < k && u >= 0; j++) {
        int32_t t2 = g->slots.a[nd->in + j].tensor;
        dup |= t2 >= 0 && g->tensors.a[t2].producer == u;
      }
      if (u < 0 || pos[u] < 0 || dup || lg->seg_of[pos[u]] >= s) continue;
      const gopt_node *pn = &g->nodes.a[u];
      for (uint32_t j = 0; j < pn->n_out; j++)
        if (g->outs.a[pn->out + j] >= 0) from[dev[lg->seg_of[pos[u]]]] += gopt_tensor_bytes(g, g->outs.a[pn->out + j]);
    }
    for (uint32_t j = 0; j < nd->n_out; j++) { /* outputs some later cluster reads */
      int32_t t = g->outs.a[nd->out + j];
      int later = 0;
      for (int32_t q = t >= 0 ? g->tensors.a[t].first_use : -1; q >= 0 && !later; q = g->slots.a[q].next_use)
        later = pos[g->slots.a[q].node] >= 0 && lg->seg_of[pos[g->slots.a[q].node]] > s;
      for (uint32_t m = 0; later && m < nd->n_out; m++)
        if (g->outs.a[nd->out + m] >= 0) out += gopt_tensor_bytes(g, g->outs.a[nd->out + m]);
      if (later) break;
    }
    int home = from[0] == 0 && from[1] == 0 ? -1 : from[1] > from[0];
    homeless += home < 0;
    for (int d = 0; d < D; d++) {
      double want = 0;
      if (home >= 0 && d != home) {
        const gopt_link *l = &c->links[c->route[d * D + home]];
        want = -log1p((1e6 * l->latency_s + out * 1e6 / l->bw) / lg->tau_us);
        away++;
      }
      double got = cond[((size_t)s * D + d) * nf + 6];
      bad += fabs(got - want) > 1e-5 * (1 + fabs(want));
    }
  }
  fprintf(stderr, "return feature on gnmt @ 4xV100-pcie: %d (cluster, device) entries away from home, %d clusters without "
          "inputs, %d differ from the reference\n", away, homeless, bad);
  CHECK(away > (int)n && homeless > 0);
  CHECK_EQ_INT(bad, 0);
  free(dev);
  free(cond);
done:
  free(pos);
  node_fix_free(&t);
}

/* go's post-process (learn_colocate.c) on a transformer's training step @ 4xV100-nvlink, untrained
 * head, greedy: the raw and the post-processed decodes differ only at constant subexpressions
 * (zero-time nodes reading only weights and such nodes: the backward pass's weight transposes),
 * each of those sits on one of its readers' devices, and the step is faster (raw, the transposes
 * run at time 0 on other devices and their transfers hold the links). */
static void test_colocate(void) {
  gopt_error err = {0};
  fix f;
  if (learn_test_step_fix(&f, "transformer:layers=2,seq=64", "4xV100-nvlink")) return;
  size_t nv = gopt_env_nvars(f.e);
  double *xr = calloc(nv + 1, sizeof *xr), *xc = calloc(nv + 1, sizeof *xc);
  gopt_policy *p = NULL;
  learn_graph *lg = NULL;
  gopt_search_result rr, rc;
  gopt_learn_opt_opts o_raw = {.samples = 0, .seed = 1, .raw = 1}, o = {.samples = 0, .seed = 1};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 1, &p, &err) == 0);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o_raw, xr, &rr, &err) == 0, "%s", err.msg);
  CHECK_MSG(p && gopt_learn_optimize(p, f.e, &o, xc, &rc, &err) == 0, "%s", err.msg);
  CHECK_MSG(p && learn_graph_for(p, f.e, LEARN_SEG_PER_NODE, &lg, &err) == 0, "%s", err.msg);
  const gopt_graph *G = f.g;
  const gopt_env_var *vars = gopt_env_vars(f.e);
  int32_t *pos = malloc((G->nodes.n + 1) * sizeof *pos), *topo = malloc((G->nodes.n + 1) * sizeof *topo);
  int64_t n = topo ? gopt_graph_topo(G, topo, &err) : -1;
  uint8_t *cs = calloc((size_t)(n > 0 ? n : 0) + 1, 1); /* per row: a constant subexpression */
  int32_t *dev = malloc((G->nodes.n + 1) * sizeof *dev);
  CHECK(lg && n == lg->n && pos && cs && dev);
  for (int64_t i = 0; lg && n == lg->n && i < n; i++) pos[topo[i]] = (int32_t)i;
  for (size_t v = 0; v < nv; v++) dev[vars[v].node] = (int32_t)xc[v];
  for (int64_t i = 0; lg && n == lg->n && i < n; i++) {
    const gopt_node *nd = &G->nodes.a[topo[i]];
    cs[i] = learn_row_us(lg, i) <= 0;
    for (uint32_t k = 0; k < nd->n_in && cs[i]; k++) {
      int32_t t = G->slots.a[nd->in + k].tensor, u = t >= 0 ? G->tensors.a[t].producer : -1;
      if (u >= 0 && !cs[pos[u]]) cs[i] = 0;
    }
  }
  int moved = 0, other = 0, away = 0, consts = 0;
  for (size_t v = 0; v < nv; v++) {
    int32_t r = pos[vars[v].node];
    if (xr[v] != xc[v]) *(cs[r] ? &moved : &other) += 1;
    if (!cs[r]) continue;
    int readers = 0, near = 0; /* does a reader run where it does? */
    for (size_t w = 0; w < nv; w++) {
      const gopt_node *nd = &G->nodes.a[vars[w].node];
      int reads = 0;
      for (uint32_t k = 0; k < nd->n_in; k++) {
        int32_t t = G->slots.a[nd->in + k].tensor;
        reads |= t >= 0 && G->tensors.a[t].producer == vars[v].node;
      }
      readers += reads;
      near |= reads && dev[vars[w].node] == (int32_t)xc[v];
    }
    consts += readers > 0;
    away += readers > 0 && !near;
  }
  fprintf(stderr, "transformer training step @ 4xV100-nvlink, untrained greedy: %d constant subexpressions, %d moved, "
          "%d other nodes changed, %d away from every reader; raw %.6g ms, post-processed %.6g ms\n",
          consts, moved, other, away, rr.best.objective * 1e3, rc.best.objective * 1e3);
  CHECK(consts > 0 && moved > 0);
  CHECK_EQ_INT(other, 0);
  CHECK_EQ_INT(away, 0);
  CHECK(rc.best.objective < rr.best.objective);
  free(pos);
  free(topo);
  free(cs);
  free(dev);
  free(xr);
  free(xc);
  learn_graph_free(lg);
  gopt_policy_free(p);
  fix_free(&f);
}

/* The list schedule's link booking: the first gap long enough at or after the ready time, and
 * unbooking restores the link. */
static void test_link_book(void) {
  learn_seg_iv *iv = calloc(8, sizeof *iv);
  int32_t ends[3];
  learn_graph g = {.n_links = 1, .iv = iv, .lk_ends = ends};
  ends[0] = ends[1] = -1;
  ends[2] = 0;
  CHECK(learn_seg_link_book(&g, 0, 0, 10) == 10);  /* [0, 10) */
  CHECK(learn_seg_link_book(&g, 0, 20, 5) == 25);  /* [20, 25) */
  CHECK(learn_seg_link_book(&g, 0, 5, 5) == 15);   /* the gap [10, 20): [10, 15) */
  CHECK(learn_seg_link_book(&g, 0, 12, 6) == 31);  /* [15, 20) is too short: [25, 31) */
  CHECK(learn_seg_link_book(&g, 0, 15, 5) == 20);  /* [15, 20) exactly */
  learn_seg_link_unbook(&g, 0);
  learn_seg_link_unbook(&g, 0);
  CHECK(learn_seg_link_book(&g, 0, 12, 4) == 19);  /* [15, 19) again free */
  CHECK(learn_seg_link_book(&g, 0, 40, 1) == 41);  /* after everything */
  CHECK_EQ_INT(ends[2], 5);
  free(iv);
}

int main(void) {
  test_link_book();
  test_transfer_bytes();
  test_return_feature();
  test_colocate();
  test_list_order();
  test_coarse_levels();
  test_coarsest_level();
  test_grad_variants();
  test_balanced_decode();
  test_coarse_training();
  test_sample_levels();
  test_v3_learns();
  test_finetune_start();
  test_chain_split();
  test_files();
  test_fork_clusters();
  return check_exit("test_segment");
}
