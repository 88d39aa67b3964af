/* test_regal.c: REGAL (learn.h). REINFORCE learns: from fixed seeds, 60 iterations on a tiny
 * 16-node graph's memory task (8 branches x -> a_i -> big_i -> b_i -> small_i on 2 devices) make the
 * policy-guided brkga-regal's mean best peak memory (64 held seeds, 60 evaluations, population 12,
 * from the default decisions) drop well below its untrained self's and stay at or above the
 * hand-computed optimum (4608 B: one big tensor alive per device, four branches each). The sampled
 * chromosomes decode to valid vectors; a REGAL policy file round-trips (kind "regal", same weights)
 * and an interrupted run resumed from its file ends with bitwise the weights of an uninterrupted
 * one; rollout groups need samples % groups == 0; the GO method refuses a REGAL policy, REGAL a GO
 * one and a policy of another task; a truncated and a corrupted REGAL policy file each get one line
 * naming the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/learn.h"
#include "gopt/nn.h"
#include "gopt/util.h"
#include "search/search_fixture.h"

typedef struct rfix { fx_costs k; gopt_graph *g; gopt_cluster *c; gopt_env *e; } rfix;

/* nb branches x -> a_i -> big_i (4 KB) -> b_i -> small_i (64 B, a graph output): the peak is
 * smallest when every b_i runs right after its a_i (one big tensor alive at a time). */
static gopt_graph *branches(int nb, fx_costs *k) {
  gopt_graph *g = gopt_graph_new("branches");
  int64_t ex = 64, eb = 1024, es = 16;
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 1, &ex, NULL);
  gopt_graph_add_input(g, x);
  memset(k, 0, sizeof *k);
  for (int i = 0; i < nb; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "big%d", i);
    int32_t big = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 1, &eb, NULL);
    snprintf(nm, sizeof nm, "small%d", i);
    int32_t sm = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 1, &es, NULL);
    snprintf(nm, sizeof nm, "a%d", i);
    k->flops[gopt_graph_add_node(g, "Relu", nm, 1, &x, 1, &big, NULL)] = 1e6;
    snprintf(nm, sizeof nm, "b%d", i);
    k->flops[gopt_graph_add_node(g, "Relu", nm, 1, &big, 1, &sm, NULL)] = 1e6;
    gopt_graph_add_output(g, sm);
  }
  return g;
}

static void rfix_make(rfix *f, int nb) {
  f->g = branches(nb, &f->k);
  f->c = fx_cluster(2, 1e9, 0, 0);
  f->e = fx_env(f->g, f->c, GOPT_TASK_MEMORY, &f->k, 2);
}
static void rfix_free(rfix *f) {
  gopt_env_free(f->e);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
}

/* Mean best objective of brkga-regal over seeds [s0, s0 + ns) at budget evals (policy p, or
 * uniform when NULL). */
static double mean_best(gopt_policy *p, gopt_env *e, uint64_t budget, int pop, uint64_t s0, int ns) {
  size_t nv = gopt_env_nvars(e);
  double *x = malloc(nv * sizeof *x), sum = 0;
  for (int s = 0; s < ns; s++) {
    gopt_search_opts o = {.budget_evals = budget, .seed = s0 + (uint64_t)s, .population = pop, .threads = 1};
    gopt_search_result r;
    gopt_error err = {0};
    int rc = p ? gopt_learn_regal_search(p, e, &o, x, &r, &err) : gopt_search_run("brkga-regal", e, &o, x, &r, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    sum += r.best.objective;
  }
  free(x);
  return sum / ns;
}

static void test_regal_learns(void) {
  rfix f;
  rfix_make(&f, 8);
  gopt_error err = {0};
  gopt_policy *p = NULL;
  CHECK(gopt_policy_new_regal(GOPT_TASK_MEMORY, NULL, 1, &p, &err) == 0);
  CHECK(strcmp(gopt_policy_kind(p), "regal") == 0);
  const uint64_t budget = 60;
  const int pop = 12, ns = 64;
  double uni = mean_best(NULL, f.e, budget, pop, 1000, ns);
  double before = mean_best(p, f.e, budget, pop, 1000, ns);
  gopt_learn_train_opts o = {.iters = 60, .seed = 7, .graphs_per_iter = 1, .samples = 8, .regal_evals = budget,
                             .regal_population = pop, .lr = 1e-2f};
  gopt_learn_train_result tr;
  const char *name = "branches";
  int rc = gopt_learn_train(p, &f.e, &name, 1, &o, &tr, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(tr.iters_done, 60);
  double after = mean_best(p, f.e, budget, pop, 1000, ns);
  fprintf(stderr, "regal: mean best peak memory: uniform %.6g, untrained %.6g, trained %.6g B (optimum 4608)\n", uni,
          before, after);
  CHECK(after < 0.8 * before);
  CHECK(after >= 4608);
  /* sampled chromosomes decode to valid vectors */
  gopt_regal_sampler *s = NULL;
  CHECK(gopt_regal_sampler_new(p, f.e, &s, &err) == 0);
  gopt_search_opts so = {0};
  gopt_regal_sampler_attach(s, &so);
  size_t ng = gopt_search_regal_genes(f.e), nv = gopt_env_nvars(f.e);
  double *keys = malloc(4 * ng * sizeof *keys), *x = malloc(nv * sizeof *x);
  CHECK(so.sample_keys(keys, 4, ng, 5, so.keys_user) == 0);
  CHECK(so.sample_keys(keys, 1, ng + 1, 5, so.keys_user) != 0);
  for (size_t i = 0; i < 4 * ng; i++) CHECK(keys[i] > 0 && keys[i] < 1);
  gopt_search_regal_decode(f.e, keys, x);
  const gopt_env_var *v = gopt_env_vars(f.e);
  for (size_t i = 0; i < nv; i++)
    CHECK(v[i].kind == GOPT_VAR_PRIORITY ? (x[i] > 0 && x[i] < 1) : (x[i] == 0 || x[i] == 1));
  free(keys);
  free(x);
  gopt_regal_sampler_free(s);
  /* the GO method refuses a REGAL policy */
  gopt_learn_opt_opts lo = {.samples = 2};
  gopt_search_result r;
  x = malloc(nv * sizeof *x);
  CHECK(gopt_learn_optimize(p, f.e, &lo, x, &r, &err) == GOPT_EINVAL && strstr(err.msg, "regal"));
  free(x);
  gopt_policy_free(p);
  rfix_free(&f);
}

/* Interrupted at 2 of 4 iterations, saved, loaded, resumed: the weights of an uninterrupted run;
 * file errors. */
static void test_regal_files(void) {
  rfix f;
  rfix_make(&f, 4);
  gopt_error err = {0};
  gopt_policy *a = NULL, *b = NULL, *b2 = NULL, *q = NULL;
  CHECK(gopt_policy_new_regal(GOPT_TASK_MEMORY, NULL, 3, &a, &err) == 0);
  CHECK(gopt_policy_new_regal(GOPT_TASK_MEMORY, NULL, 3, &b, &err) == 0);
  gopt_learn_train_opts o = {.iters = 4, .seed = 9, .graphs_per_iter = 1, .samples = 4, .regal_evals = 30,
                             .regal_population = 8, .rollout_groups = 2};
  gopt_learn_train_result tr;
  const char *name = "branches4";
  CHECK(gopt_learn_train(a, &f.e, &name, 1, &o, &tr, &err) == 0 && !tr.interrupted);
  o.stop_after = 2;
  CHECK(gopt_learn_train(b, &f.e, &name, 1, &o, &tr, &err) == 0 && tr.interrupted);
  char path[64], bad[80];
  snprintf(path, sizeof path, "/tmp/gopt_test_regal_%d.gpol", (int)getpid());
  snprintf(bad, sizeof bad, "%s.bad", path);
  CHECK(gopt_policy_save(b, path, &err) == 0);
  int rc = gopt_policy_load(path, GOPT_TASK_MEMORY, &b2, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (b2) {
    CHECK(strcmp(gopt_policy_kind(b2), "regal") == 0);
    CHECK_EQ_INT(gopt_policy_iters(b2), 2);
    size_t np = gopt_policy_param_count(b);
    CHECK(np == gopt_policy_param_count(b2));
    CHECK(memcmp(gopt_policy_weights(b), gopt_policy_weights(b2), np * sizeof(float)) == 0);
    o.stop_after = 0;
    rc = gopt_learn_train(b2, &f.e, &name, 1, &o, &tr, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK(memcmp(gopt_policy_weights(a), gopt_policy_weights(b2), np * sizeof(float)) == 0);
  }
  /* samples not a multiple of the groups */
  o.rollout_groups = 3;
  gopt_policy_free(b);
  CHECK(gopt_policy_new_regal(GOPT_TASK_MEMORY, NULL, 3, &b, &err) == 0);
  CHECK(gopt_learn_train(b, &f.e, &name, 1, &o, &tr, &err) == GOPT_EINVAL && strstr(err.msg, "rollout groups"));
  /* REGAL refuses a GO policy and a policy of another task */
  gopt_policy *go = NULL;
  gopt_regal_sampler *s = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_MEMORY, NULL, 1, &go, &err) == 0);
  CHECK(gopt_regal_sampler_new(go, f.e, &s, &err) == GOPT_EINVAL && !s && strstr(err.msg, "'go' policy"));
  gopt_policy_free(go);
  CHECK(gopt_policy_new_regal(GOPT_TASK_PLACEMENT, NULL, 1, &go, &err) == 0);
  CHECK(gopt_regal_sampler_new(go, f.e, &s, &err) == GOPT_EINVAL && !s && strstr(err.msg, "'placement'"));
  gopt_policy_free(go);
  /* truncated and corrupted files: one line naming the file */
  void *buf = NULL;
  size_t sz = 0;
  CHECK(gopt_file_read(path, &buf, &sz, &err) == 0 && sz > 100);
  unsigned char *u = buf;
  CHECK(gopt_file_write_atomic(bad, u, sz - 37, &err) == 0);
  CHECK(gopt_policy_load(bad, GOPT_TASK_MEMORY, &q, &err) == GOPT_EPARSE && !q);
  CHECK(strstr(err.msg, bad) && strstr(err.msg, "truncated") && !strchr(err.msg, '\n'));
  u[sz / 3] ^= 0x04;
  CHECK(gopt_file_write_atomic(bad, u, sz, &err) == 0);
  CHECK(gopt_policy_load(bad, GOPT_TASK_MEMORY, &q, &err) == GOPT_EPARSE && !q);
  CHECK(strstr(err.msg, bad) && strstr(err.msg, "checksum") && !strchr(err.msg, '\n'));
  free(buf);
  unlink(bad);
  unlink(path);
  gopt_policy_free(a);
  gopt_policy_free(b);
  gopt_policy_free(b2);
  rfix_free(&f);
}

int main(void) {
  test_regal_learns();
  test_regal_files();
  return check_exit("test_regal");
}
