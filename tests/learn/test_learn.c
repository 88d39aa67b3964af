/* test_learn.c: the learned policy (learn.h). PPO learns: on a chain of MatMuls whose weights do
 * not fit one device, the trained policy's greedy placement reaches the optimum found by brute force
 * over all placements, and beats its untrained self (the version-2 segment head: the default one
 * places this chain optimally untrained, test_segment.c); one policy serves 2 and 8 devices; every
 * task's heads give valid x vectors (cards and ranges of gopt_env_vars); resuming an interrupted
 * training run reproduces the losses and the final weights bitwise; policy files with the wrong
 * task, truncated or corrupted get one-line errors naming the file; zero-shot optimize plus
 * fine-tuning counts its evaluations and never returns worse than zero-shot; the imitation warm start
 * alone (no PPO) makes the greedy decision reproduce the best baseline's result (gopt_learn_reference)
 * on a graph where that is a split across devices, and resume is exact across the imitation -> PPO
 * boundary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/learn.h"
#include "gopt/nn.h"
#include "gopt/task.h"
#include "gopt/zoo.h"

#include "learn_test_chain.h"

static int fix_make(fix *f, gopt_graph *g, const char *cluster, int task) {
  return fix_make2(f, g, cluster, task, 0);
}

static int eval1(gopt_env *e, const double *x, gopt_env_result *r) {
  gopt_error err = {0};
  int rc = gopt_env_evaluate_batch(e, x, 1, r, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc;
}

/* Every value of x is valid for its variable. */
static int x_valid(const gopt_env *e, const double *x) {
  const gopt_env_var *v = gopt_env_vars(e);
  for (size_t i = 0; i < gopt_env_nvars(e); i++) {
    if (v[i].card > 0 && (x[i] != floor(x[i]) || x[i] < 0 || x[i] >= v[i].card)) return 0;
    if (v[i].card == 0 && !(x[i] >= 0 && x[i] <= 1)) return 0;
  }
  return 1;
}

static void test_ppo_learns(void) {
  int n = 6;
  fix f;
  if (fix_make2(&f, learn_test_matmul_chain(n, 4096), "2xV100-nvlink", GOPT_TASK_PLACEMENT, 1)) return;
  size_t nv = gopt_env_nvars(f.e);
  CHECK_EQ_INT(nv, n);
  /* brute force over all 2^n placements */
  double *x = calloc(nv, sizeof *x);
  gopt_env_result best = {0}, r;
  int have = 0, n_best = 0;
  for (int m = 0; m < (1 << n); m++) {
    for (int i = 0; i < n; i++) x[i] = (m >> i) & 1;
    if (eval1(f.e, x, &r)) break;
    int c = have ? gopt_env_result_cmp(&r, &best) : -1;
    if (c < 0) best = r, have = 1, n_best = 0;
    n_best += c <= 0;
  }
  CHECK(best.feasible);
  for (int i = 0; i < n; i++) x[i] = 0;
  eval1(f.e, x, &r);
  CHECK(gopt_env_result_better(&best, &r)); /* the default (all on device 0) is not optimal */
  fprintf(stderr, "ppo: %d optimal placements of %d\n", n_best, 1 << n);

  gopt_error err = {0};
  gopt_policy *p = NULL;
  /* the version-2 segment head: the default head's list-schedule prior places this chain optimally
   * untrained (tests/learn/test_segment.c), so PPO's learning is shown on the older head here */
  gopt_learn_arch v2 = {.seg_feats = 4};
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, &v2, 1, &p, &err) == 0);
  gopt_env_result r0, r1;
  CHECK(gopt_policy_decide(p, f.e, 1, 1, 0, x, &err) == 0);
  eval1(f.e, x, &r0);
  gopt_learn_train_opts o = {.iters = 60, .seed = 3, .graphs_per_iter = 1, .samples = 16};
  gopt_learn_train_result tr;
  const char *name = "chain";
  int rc = gopt_learn_train(p, &f.e, &name, 1, &o, &tr, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(tr.iters_done, o.iters);
  CHECK(gopt_policy_decide(p, f.e, 1, 1, 0, x, &err) == 0);
  eval1(f.e, x, &r1);
  fprintf(stderr, "ppo: untrained %.6g (feasible %d), trained %.6g (feasible %d), optimum %.6g\n", r0.objective,
          r0.feasible, r1.objective, r1.feasible, best.objective);
  CHECK(gopt_env_result_cmp(&r1, &best) == 0);
  CHECK(gopt_env_result_better(&r1, &r0));
  free(x);
  gopt_policy_free(p);
  fix_free(&f);
}

/* Imitation only: the greedy placement scores like the best baseline, which splits the chain. */
static void test_imitation(void) {
  fix f;
  if (fix_make2(&f, learn_test_matmul_chain(8, 32768), "4xV100-nvlink", GOPT_TASK_PLACEMENT, 0)) return;
  size_t nv = gopt_env_nvars(f.e);
  double *x = calloc(nv, sizeof *x);
  gopt_error err = {0};
  gopt_env_result ref, r0, r1, dflt;
  CHECK(gopt_learn_reference(f.e, &ref, x, &err) == 0);
  int split = 0;
  for (size_t i = 1; i < nv; i++) split |= x[i] != x[0];
  CHECK(split); /* the reference is not "everything on one device" */
  for (size_t i = 0; i < nv; i++) x[i] = 0;
  eval1(f.e, x, &dflt);
  CHECK(gopt_env_result_better(&ref, &dflt));
  gopt_policy *p = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 2, &p, &err) == 0);
  CHECK(gopt_policy_decide(p, f.e, 1, 1, 0, x, &err) == 0);
  eval1(f.e, x, &r0);
  gopt_learn_train_opts o = {.iters = 80, .imitate_iters = 80, .seed = 5, .graphs_per_iter = 1};
  gopt_learn_train_result tr;
  const char *name = "chain";
  int rc = gopt_learn_train(p, &f.e, &name, 1, &o, &tr, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK(gopt_policy_decide(p, f.e, 1, 1, 0, x, &err) == 0);
  eval1(f.e, x, &r1);
  fprintf(stderr, "imitation: untrained %.6g, imitated %.6g, best baseline %.6g, default %.6g\n", r0.objective,
          r1.objective, ref.objective, dflt.objective);
  CHECK(gopt_env_result_cmp(&r1, &ref) == 0);
  free(x);
  gopt_policy_free(p);
  fix_free(&f);
}

static void test_devices_and_tasks(void) {
  gopt_error err = {0};
  gopt_policy *p = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 5, &p, &err) == 0);
  const char *clusters[2] = {"2xV100-nvlink", "8xH100"};
  for (int c = 0; c < 2; c++) {
    gopt_graph *g = NULL;
    CHECK(gopt_zoo_build("gpt2:layers=1", &g, &err) == 0);
    fix f;
    if (fix_make(&f, g, clusters[c], GOPT_TASK_PLACEMENT)) continue;
    size_t nv = gopt_env_nvars(f.e);
    double *xs = malloc(4 * nv * sizeof *xs);
    CHECK(gopt_policy_decide(p, f.e, 1, 4, 9, xs, &err) == 0);
    int used_high = 0;
    for (int r = 0; r < 4; r++) CHECK(x_valid(f.e, xs + r * nv));
    for (size_t i = 0; i < 4 * nv; i++) used_high |= xs[i] >= 2;
    CHECK(c == 0 ? !used_high : used_high); /* samples on 8 devices use devices beyond 0 and 1 */
    free(xs);
    fix_free(&f);
  }
  gopt_policy_free(p);
  /* every task's heads */
  const int tasks[4] = {GOPT_TASK_FUSION, GOPT_TASK_SCHEDULE, GOPT_TASK_JOINT, GOPT_TASK_MEMORY};
  for (int t = 0; t < 4; t++) {
    gopt_graph *g = NULL;
    CHECK(gopt_zoo_build("resnet50:blocks=1", &g, &err) == 0 || gopt_zoo_build("resnet50", &g, &err) == 0);
    fix f;
    if (fix_make(&f, g, tasks[t] == GOPT_TASK_FUSION ? "V100" : "4xV100-nvlink", tasks[t])) continue;
    CHECK(gopt_policy_new(tasks[t], NULL, 7, &p, &err) == 0);
    size_t nv = gopt_env_nvars(f.e);
    double *xs = malloc(3 * nv * sizeof *xs);
    gopt_env_result r[3];
    CHECK(gopt_policy_decide(p, f.e, 1, 3, 2, xs, &err) == 0);
    for (int i = 0; i < 3; i++) CHECK_MSG(x_valid(f.e, xs + i * nv), "task %s row %d", gopt_task_name(tasks[t]), i);
    CHECK(gopt_env_evaluate_batch(f.e, xs, 3, r, &err) == 0);
    CHECK(r[0].objective > 0);
    /* zero-shot plus fine-tuning: counts 1 + K + N evaluations, never worse than zero-shot */
    gopt_learn_opt_opts oo = {.samples = 4, .finetune_evals = 10, .seed = 1};
    gopt_search_result sr0, sr1;
    double *xb = malloc(nv * sizeof *xb);
    gopt_learn_opt_opts o0 = oo;
    o0.finetune_evals = 0;
    CHECK(gopt_learn_optimize(p, f.e, &o0, xb, &sr0, &err) == 0);
    CHECK(gopt_learn_optimize(p, f.e, &oo, xb, &sr1, &err) == 0);
    CHECK_EQ_INT(sr0.evals, 5);
    CHECK_EQ_INT(sr1.evals, 15); /* batches of 4, 4 and 2 */
    CHECK(gopt_env_result_cmp(&sr1.best, &sr0.best) <= 0);
    CHECK(x_valid(f.e, xb));
    free(xb);
    free(xs);
    gopt_policy_free(p);
    fix_free(&f);
  }
}

typedef struct losses { double v[64]; int n; } losses;
static void on_iter(const gopt_learn_iter_info *info, void *user) {
  losses *l = user;
  if (l->n < 64) l->v[l->n++] = info->loss;
}

static void test_resume_and_files(void) {
  gopt_error err = {0};
  fix f[2];
  gopt_graph *g0 = NULL, *g1 = NULL;
  CHECK(gopt_zoo_build("gpt2:layers=1", &g0, &err) == 0);
  CHECK(gopt_zoo_build("resnet50", &g1, &err) == 0);
  if (fix_make(&f[0], g0, "2xV100-nvlink", GOPT_TASK_PLACEMENT)) return;
  if (fix_make(&f[1], g1, "4xV100-nvlink", GOPT_TASK_PLACEMENT)) return;
  gopt_env *envs[2] = {f[0].e, f[1].e};
  const char *names[2] = {"gpt2:layers=1@2xV100-nvlink", "resnet50@4xV100-nvlink"};
  /* iterations 0-3 imitate, 4-5 are PPO; the interruption at 3 falls inside the imitation phase */
  gopt_learn_train_opts o = {.iters = 6, .imitate_iters = 4, .seed = 11, .samples = 4};
  losses la = {0}, lb = {0};
  gopt_learn_train_result tr;
  gopt_policy *a = NULL, *b = NULL, *b2 = NULL;
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 4, &a, &err) == 0);
  CHECK(gopt_policy_new(GOPT_TASK_PLACEMENT, NULL, 4, &b, &err) == 0);
  o.on_iter = on_iter;
  o.user = &la;
  CHECK(gopt_learn_train(a, envs, names, 2, &o, &tr, &err) == 0);
  CHECK(!tr.interrupted);
  o.user = &lb;
  o.stop_after = 3;
  CHECK(gopt_learn_train(b, envs, names, 2, &o, &tr, &err) == 0);
  CHECK(tr.interrupted);
  CHECK_EQ_INT(tr.iters_done, 3);
  char path[64], bad[80];
  snprintf(path, sizeof path, "/tmp/gopt_test_learn_%d.gpol", (int)getpid());
  int rc = gopt_policy_save(b, path, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_policy_free(b);
  rc = gopt_policy_load(path, GOPT_TASK_PLACEMENT, &b2, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (b2) {
    CHECK_EQ_INT(gopt_policy_iters(b2), 3);
    CHECK(strstr(gopt_policy_trainset(b2), "resnet50@4xV100-nvlink") != NULL);
    o.stop_after = 0;
    rc = gopt_learn_train(b2, envs, names, 2, &o, &tr, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK_EQ_INT(lb.n, 6);
    CHECK_EQ_INT(la.n, 6);
    for (int i = 0; i < 6 && i < lb.n; i++) CHECK_MSG(la.v[i] == lb.v[i], "loss %d: %.9g vs %.9g", i, la.v[i], lb.v[i]);
    size_t np = gopt_policy_param_count(a);
    CHECK(np == gopt_policy_param_count(b2) && np > 1000);
    CHECK(memcmp(gopt_policy_weights(a), gopt_policy_weights(b2), np * sizeof(float)) == 0);
  }
  /* wrong task, truncated, corrupted: one line naming the file */
  gopt_policy *q = NULL;
  CHECK(gopt_policy_load(path, GOPT_TASK_FUSION, &q, &err) == GOPT_EINVAL && !q);
  CHECK(strstr(err.msg, path) && strstr(err.msg, "for task 'placement', not 'fusion'") && !strchr(err.msg, '\n'));
  FILE *fp = fopen(path, "rb");
  fseek(fp, 0, SEEK_END);
  long sz = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)sz);
  CHECK(fread(buf, 1, (size_t)sz, fp) == (size_t)sz);
  fclose(fp);
  snprintf(bad, sizeof bad, "%s.bad", path);
  fp = fopen(bad, "wb");
  fwrite(buf, 1, (size_t)sz / 2, fp);
  fclose(fp);
  CHECK(gopt_policy_load(bad, -1, &q, &err) == GOPT_EPARSE && !q);
  CHECK(strstr(err.msg, bad) && strstr(err.msg, "truncated") && !strchr(err.msg, '\n'));
  buf[sz / 2] ^= 0x10;
  fp = fopen(bad, "wb");
  fwrite(buf, 1, (size_t)sz, fp);
  fclose(fp);
  CHECK(gopt_policy_load(bad, -1, &q, &err) == GOPT_EPARSE && !q);
  CHECK(strstr(err.msg, bad) && strstr(err.msg, "checksum") && !strchr(err.msg, '\n'));
  free(buf);
  unlink(bad);
  unlink(path);
  gopt_policy_free(a);
  gopt_policy_free(b2);
  fix_free(&f[0]);
  fix_free(&f[1]);
}

int main(void) {
  gopt_nn_set_threads(2);
  test_ppo_learns();
  test_imitation();
  test_devices_and_tasks();
  test_resume_and_files();
  return check_exit("test_learn");
}
