/* test_pass_rl.c: the learned pass-ordering agent (gopt_pass_rl_*). Learning: from a fixed seed,
 * PPO on two hand-written modules (where the expanders add instructions and cse, algsimp and dce
 * remove them) makes the greedy policy's result better than the untrained policy's and than XLA's
 * default order on both, and reach the brute-force optimum over sequences of at most 3 passes.
 * The order it emits replays to its reported cost. Policy files: save/load round trip gives the same decisions; a flipped byte, a
 * truncated file and a policy of another kind are refused with one line naming the file. */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pass_test_util.h"
#include "gopt/hlo.h"
#include "gopt/nn.h"
#include "gopt/passes.h"

static const char mod_a[] =
    "HloModule a\n\nENTRY e {\n"
    "  x = f32[2,3] parameter(0)\n  y = f32[2,3] parameter(1)\n"
    "  z = f32[2,3] constant({ {0,0,0}, {0,0,0} })\n  o = f32[2,3] constant({ {1,1,1}, {1,1,1} })\n"
    "  a0 = f32[2,3] add(x, z)\n  a1 = f32[2,3] multiply(a0, o)\n  n1 = f32[2,3] negate(a1)\n"
    "  n2 = f32[2,3] negate(n1)\n  lg = f32[2,3] logistic(n2)\n"
    "  s1 = f32[2,3] add(lg, y)\n  s2 = f32[2,3] add(lg, y)\n"
    "  mx = f32[2,3] maximum(s1, s2)\n  ROOT out = f32[2,3] multiply(mx, o)\n}\n";
static const char mod_b[] =
    "HloModule b\n\nENTRY e {\n"
    "  x = f32[4] parameter(0)\n  z = f32[4] constant({0,0,0,0})\n"
    "  l1 = f32[4] logistic(x)\n  l2 = f32[4] logistic(x)\n  m = f32[4] minimum(l1, l2)\n"
    "  a = f32[4] add(m, z)\n  s = f32[4] subtract(a, z)\n  ROOT r = f32[4] negate(s)\n}\n";

/* The greedy episode's result (budget 0) on e; checks the sequence replays to it. */
static double order_cost(gopt_seq_policy *p, gopt_pass_env *e, const gopt_graph *g) {
  gopt_pass_search_result r;
  gopt_error err = {0};
  if (gopt_pass_rl_order(p, e, 0, 1, &r, &err)) {
    CHECK_MSG(0, "order: %s", err.msg);
    return 1e300;
  }
  gopt_graph *cur = gopt_graph_clone(g);
  for (size_t i = 0; i < r.n && cur; i++) {
    gopt_graph *h = NULL;
    CHECK(gopt_pass_run(r.seq[i], cur, &h, NULL, NULL) == 0);
    gopt_graph_free(cur);
    cur = h;
  }
  CHECK(cur && (double)gopt_hlo_instruction_count(cur) == r.cost);
  gopt_graph_free(cur);
  double c = r.cost;
  gopt_pass_search_result_free(&r);
  return c;
}

static void test_files(gopt_seq_policy *p, gopt_pass_env *e, const gopt_graph *g) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/gopt_test_pass_rl_%ld.gpol", (long)getpid());
  gopt_error err = {0};
  gopt_seq_policy *q = NULL;
  CHECK_MSG(gopt_seq_policy_save(p, path, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_pass_rl_policy_load(path, &q, &err) == 0, "%s", err.msg);
  if (q) CHECK(order_cost(q, e, g) == order_cost(p, e, g));
  gopt_seq_policy_free(q);
  FILE *f = fopen(path, "r+b");
  CHECK(f != NULL);
  if (f) { /* flip a byte in the weights */
    fseek(f, 400, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 400, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
  }
  q = NULL;
  CHECK(gopt_pass_rl_policy_load(path, &q, &err) != 0 && !q && strstr(err.msg, path) && !strchr(err.msg, '\n'));
  CHECK(truncate(path, 100) == 0);
  CHECK(gopt_pass_rl_policy_load(path, &q, &err) != 0 && !q && strstr(err.msg, path));
  gopt_seq_arch a = {5, 3, 8, 1, 8};
  gopt_seq_policy *other = NULL;
  CHECK(gopt_seq_policy_new("rewrite", &a, 1, &other, &err) == 0);
  CHECK(other && gopt_seq_policy_save(other, path, &err) == 0);
  CHECK(gopt_pass_rl_policy_load(path, &q, &err) != 0 && !q && strstr(err.msg, path));
  gopt_seq_policy_free(other);
  remove(path);
}

int main(void) {
  gopt_nn_set_threads(1);
  gopt_graph *gs[2] = {load(mod_a), load(mod_b)};
  gopt_pass_env *envs[2] = {NULL, NULL};
  gopt_seq_policy *p = NULL;
  gopt_error err = {0};
  gopt_pass_env_opts eo = {GOPT_PASS_OBJ_OPS, 6, NULL, NULL};
  for (int i = 0; i < 2; i++)
    CHECK_MSG(gs[i] && gopt_pass_env_new(gs[i], &eo, &envs[i], &err) == 0, "env: %s", err.msg);
  CHECK_MSG(gopt_pass_rl_policy_new(7, &p, &err) == 0, "%s", err.msg);
  if (!envs[0] || !envs[1] || !p) return check_exit("test_pass_rl");
  double before[2], after[2];
  for (int i = 0; i < 2; i++) before[i] = order_cost(p, envs[i], gs[i]);
  gopt_seq_train_opts to = {.iters = 60, .seed = 3, .episodes = 8};
  gopt_learn_train_result tr;
  CHECK_MSG(gopt_pass_rl_train(p, envs, NULL, 2, &to, &tr, &err) == 0, "train: %s", err.msg);
  for (int i = 0; i < 2; i++) {
    after[i] = order_cost(p, envs[i], gs[i]);
    size_t opt = ptu_brute(gs[i], 3);
    fprintf(stderr, "module %d: %zu instructions, untrained %g, trained %g, optimum (3 passes) %zu, default %g\n", i,
            gopt_hlo_instruction_count(gs[i]), before[i], after[i], opt, gopt_pass_env_baseline_cost(envs[i]));
    CHECK(after[i] < before[i]);
    CHECK(after[i] < gopt_pass_env_baseline_cost(envs[i])); /* better than XLA's default order */
    CHECK(after[i] <= (double)opt);
  }
  test_files(p, envs[0], gs[0]);
  gopt_seq_policy_free(p);
  for (int i = 0; i < 2; i++) {
    gopt_pass_env_free(envs[i]);
    gopt_graph_free(gs[i]);
  }
  return check_exit("test_pass_rl");
}
