/* test_learn_seq.c: the sequential agent (learn_seq.h) on a toy MDP whose optimum is known by
 * hand: a chain of 3 stages, each offering 3 candidates (one-hot type features, anchored at the
 * stage's node) plus STOP; the right type at stage t of graph g is (t + g) % 3. Right picks cost
 * -0.2, -0.2 and the last gives +2 (total 1.6: a temporary loss before a big gain, so a
 * myopic agent stops at 0); a wrong pick gives -0.1 and changes nothing; STOP gives 0 and ends
 * the episode (as do 8 steps).
 * Checks: trained from a fixed seed, the greedy episode on both graphs reaches the optimum 1.6
 * and the untrained one does not; 2 rollout groups in one process give bitwise the weights of 2
 * ranks (threads) with a fake allgather; an interrupted run resumed from its file gives the
 * uninterrupted weights; 30 iterations of imitation of an optimal expert reach the optimum where
 * 30 of PPO do not; policy files of another kind, truncated or corrupted get one line
 * naming the file; probabilities sum to one. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/learn_seq.h"
#include "gopt/nn.h"

#define L 3
#define NF (L + 3)     /* node features: stage one-hot, current, done, graph id */
#define CF 3
#define OPT 1.6     /* 2 x -0.2 + 2 */

typedef struct toy {
  int graph, stage, over;
  float feat[L * NF], cf[3 * CF];
  int32_t edges[2 * (L - 1)], anchor[3];
} toy;

static int toy_reset(void *u, size_t g, gopt_error *err) {
  (void)err;
  toy *t = u;
  t->graph = (int)g;
  t->stage = 0;
  t->over = 0;
  return 0;
}

static int toy_observe(void *u, gopt_seq_obs *o, gopt_error *err) {
  (void)err;
  toy *t = u;
  memset(t->feat, 0, sizeof t->feat);
  for (int i = 0; i < L; i++) {
    float *r = t->feat + i * NF;
    r[i] = 1;
    r[L] = i == t->stage;
    r[L + 1] = i < t->stage;
    r[L + 2] = (float)t->graph;
  }
  for (int i = 0; i + 1 < L; i++) { t->edges[2 * i] = i; t->edges[2 * i + 1] = i + 1; }
  memset(t->cf, 0, sizeof t->cf);
  for (int c = 0; c < 3; c++) { t->cf[c * CF + c] = 1; t->anchor[c] = t->stage; }
  *o = (gopt_seq_obs){L, t->feat, L - 1, t->edges, t->over ? 0 : 3, t->cf, t->anchor};
  return 0;
}

static int toy_step(void *u, int a, double *r, int *done, gopt_error *err) {
  toy *t = u;
  if (a >= 3 || a < GOPT_SEQ_STOP) return gopt_error_set(err, GOPT_EINVAL, "toy: bad action %d", a);
  *done = 0;
  if (a == GOPT_SEQ_STOP) { *r = 0; *done = 1; return 0; }
  if (a != (t->stage + t->graph) % 3) { *r = -0.1; return 0; }
  *r = t->stage == L - 1 ? 2.0 : -0.2;
  if (++t->stage == L) *done = 1;
  return 0;
}

/* The expert: the right type at the current stage (the optimum's action). */
static int toy_expert(void *u, unsigned char *ok, gopt_error *err) {
  (void)err;
  toy *t = u;
  for (int a = 0; a <= 3; a++) ok[a] = a == (t->stage + t->graph) % 3;
  return 0;
}

static gopt_seq_env toy_env(toy *t) { return (gopt_seq_env){toy_reset, toy_observe, toy_step, t, toy_expert}; }

static gopt_seq_policy *fresh(void) {
  gopt_seq_arch a = {.node_feat = NF, .cand_feat = CF, .hidden = 16, .mlp_hidden = 32};
  gopt_seq_policy *p = NULL;
  gopt_error err = {0};
  int rc = gopt_seq_policy_new("toy", &a, 7, &p, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return p;
}

static gopt_seq_train_opts base_opts(int64_t iters) {
  gopt_seq_train_opts o = {0};
  o.iters = iters;
  o.seed = 11;
  o.episodes = 16;
  o.max_steps = 8;
  return o;
}

static double greedy_return(gopt_seq_policy *p, int graph) {
  toy t;
  gopt_seq_env e = toy_env(&t);
  double r = NAN;
  gopt_error err = {0};
  int rc = gopt_seq_run(p, &e, (size_t)graph, 1, 0, 8, &r, NULL, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return r;
}

static void test_learns(void) {
  gopt_seq_policy *p = fresh();
  double u0 = greedy_return(p, 0), u1 = greedy_return(p, 1);
  toy t;
  gopt_seq_env e = toy_env(&t);
  gopt_seq_train_opts o = base_opts(150);
  gopt_learn_train_result res;
  gopt_error err = {0};
  const char *names[2] = {"toy0", "toy1"};
  int rc = gopt_seq_train(p, &e, names, 2, &o, &res, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  double t0 = greedy_return(p, 0), t1 = greedy_return(p, 1);
  fprintf(stderr, "toy: untrained greedy %.2f %.2f, trained %.2f %.2f (optimum %.2f)\n", u0, u1, t0, t1, OPT);
  CHECK_NEAR(t0, OPT, 1e-9);
  CHECK_NEAR(t1, OPT, 1e-9);
  CHECK(u0 < OPT - 1e-9 || u1 < OPT - 1e-9);
  CHECK(strcmp(gopt_seq_policy_trainset(p), "toy0\ntoy1\n") == 0);
  /* probabilities of the first state sum to one over 3 candidates + STOP */
  gopt_seq_obs ob;
  toy_reset(&t, 0, &err);
  toy_observe(&t, &ob, &err);
  double pr[4], s = 0;
  CHECK(gopt_seq_policy_probs(p, &ob, pr, &err) == 0);
  for (int i = 0; i < 4; i++) s += pr[i];
  CHECK_NEAR(s, 1.0, 1e-5);
  CHECK(pr[0] > 0.5);
  gopt_seq_policy_free(p);
}

/* The imitation warm start alone reaches the optimum in 30 iterations, where PPO alone does not
 * yet: the expert is optimal and the greedy policy copies it; PPO afterwards keeps it there.
 * An environment without an expert is refused with one line. */
static void test_imitate(void) {
  toy t;
  gopt_seq_env e = toy_env(&t);
  gopt_learn_train_result res;
  gopt_error err = {0};
  gopt_seq_policy *p = fresh();
  gopt_seq_train_opts o = base_opts(30);
  o.imitate_iters = 30;
  int rc = gopt_seq_train(p, &e, NULL, 2, &o, &res, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  double i0 = greedy_return(p, 0), i1 = greedy_return(p, 1);
  gopt_seq_policy *q = fresh();
  o.imitate_iters = 0;
  CHECK(gopt_seq_train(q, &e, NULL, 2, &o, &res, &err) == 0);
  double q0 = greedy_return(q, 0), q1 = greedy_return(q, 1);
  fprintf(stderr, "toy: 30 imitation iterations %.2f %.2f, 30 PPO iterations %.2f %.2f (optimum %.2f)\n", i0, i1, q0, q1, OPT);
  CHECK_NEAR(i0, OPT, 1e-9);
  CHECK_NEAR(i1, OPT, 1e-9);
  CHECK(q0 < OPT - 1e-9 || q1 < OPT - 1e-9); /* PPO alone is not there yet at the same count */
  gopt_seq_policy_free(q);
  /* imitation then PPO: the continued policy stays at the optimum */
  o.iters = 60;
  o.imitate_iters = 30;
  gopt_seq_policy_free(p);
  p = fresh();
  CHECK(gopt_seq_train(p, &e, NULL, 2, &o, &res, &err) == 0);
  CHECK_NEAR(greedy_return(p, 0), OPT, 1e-9);
  CHECK_NEAR(greedy_return(p, 1), OPT, 1e-9);
  gopt_seq_policy_free(p);
  /* no expert */
  e.expert = NULL;
  p = fresh();
  o.iters = 5;
  o.imitate_iters = 5;
  CHECK(gopt_seq_train(p, &e, NULL, 2, &o, &res, &err) == GOPT_EINVAL);
  CHECK(strstr(err.msg, "no expert") != NULL);
  gopt_seq_policy_free(p);
}

/* ---- groups == ranks ---- */
typedef struct fake_world {
  pthread_barrier_t bar;
  unsigned char *shared;
  size_t cap;
  pthread_mutex_t mu;
} fake_world;
typedef struct fake_rank { fake_world *w; int rank; gopt_seq_policy *p; int rc; char msg[600]; } fake_rank;

static int fake_allgather(void *buf, size_t bytes, int rc, void *user, gopt_error *err) {
  fake_rank *r = user;
  fake_world *w = r->w;
  static int rcs[2];
  pthread_barrier_wait(&w->bar);
  if (r->rank == 0) {
    pthread_mutex_lock(&w->mu);
    if (w->cap < 2 * bytes) { free(w->shared); w->shared = malloc(2 * bytes); w->cap = 2 * bytes; }
    pthread_mutex_unlock(&w->mu);
  }
  pthread_barrier_wait(&w->bar);
  memcpy(w->shared + (size_t)r->rank * bytes, (unsigned char *)buf + (size_t)r->rank * bytes, bytes);
  rcs[r->rank] = rc;
  pthread_barrier_wait(&w->bar);
  memcpy(buf, w->shared, 2 * bytes);
  int any = rcs[0] || rcs[1];
  pthread_barrier_wait(&w->bar);
  return any ? gopt_error_set(err, GOPT_EINVAL, "fake: a rank failed") : 0;
}

static void *rank_main(void *u) {
  fake_rank *r = u;
  toy t;
  gopt_seq_env e = toy_env(&t);
  gopt_learn_dist d = {r->rank, 2, fake_allgather, r};
  gopt_seq_train_opts o = base_opts(4);
  o.dist = &d;
  gopt_learn_train_result res;
  gopt_error err = {0};
  r->rc = gopt_seq_train(r->p, &e, NULL, 2, &o, &res, &err);
  snprintf(r->msg, sizeof r->msg, "%s", err.msg);
  return NULL;
}

static void test_groups(void) {
  gopt_seq_policy *one = fresh();
  toy t;
  gopt_seq_env e = toy_env(&t);
  gopt_seq_train_opts o = base_opts(4);
  o.rollout_groups = 2;
  gopt_learn_train_result res;
  gopt_error err = {0};
  CHECK(gopt_seq_train(one, &e, NULL, 2, &o, &res, &err) == 0);
  fake_world w = {0};
  pthread_barrier_init(&w.bar, NULL, 2);
  pthread_mutex_init(&w.mu, NULL);
  fake_rank r[2] = {{&w, 0, fresh(), 0, ""}, {&w, 1, fresh(), 0, ""}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, rank_main, &r[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  size_t n = gopt_seq_policy_param_count(one);
  for (int i = 0; i < 2; i++) {
    CHECK_MSG(r[i].rc == 0, "%s", r[i].msg);
    CHECK(memcmp(gopt_seq_policy_weights(one), gopt_seq_policy_weights(r[i].p), n * sizeof(float)) == 0);
    gopt_seq_policy_free(r[i].p);
  }
  /* and 2 groups differ from 1 group (the test would pass vacuously if groups were ignored... they
   * are not: the sum of group means differs from one mean) */
  gopt_seq_policy *g1 = fresh();
  o.rollout_groups = 1;
  CHECK(gopt_seq_train(g1, &e, NULL, 2, &o, &res, &err) == 0);
  CHECK(memcmp(gopt_seq_policy_weights(one), gopt_seq_policy_weights(g1), n * sizeof(float)) != 0);
  gopt_seq_policy_free(g1);
  gopt_seq_policy_free(one);
  free(w.shared);
  pthread_barrier_destroy(&w.bar);
  pthread_mutex_destroy(&w.mu);
}

/* ---- resume and files ---- */
static void write_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

static void test_resume_files(void) {
  char dir[] = "/tmp/gopt-seq-XXXXXX", path[256], bad[256];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/p.gpol", dir);
  snprintf(bad, sizeof bad, "%s/bad.gpol", dir);
  toy t;
  gopt_seq_env e = toy_env(&t);
  gopt_learn_train_result res;
  gopt_error err = {0};
  gopt_seq_policy *full = fresh(), *part = fresh(), *back = NULL;
  gopt_seq_train_opts o = base_opts(6);
  CHECK(gopt_seq_train(full, &e, NULL, 2, &o, &res, &err) == 0);
  o.stop_after = 3;
  CHECK(gopt_seq_train(part, &e, NULL, 2, &o, &res, &err) == 0 && res.interrupted && res.iters_done == 3);
  CHECK(gopt_seq_policy_save(part, path, &err) == 0);
  int rc = gopt_seq_policy_load(path, "toy", &back, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  o.stop_after = 0;
  if (back) {
    CHECK(gopt_seq_policy_iters(back) == 3);
    CHECK(gopt_seq_train(back, &e, NULL, 2, &o, &res, &err) == 0 && res.iters_done == 6);
    CHECK(memcmp(gopt_seq_policy_weights(full), gopt_seq_policy_weights(back), gopt_seq_policy_param_count(full) * sizeof(float)) == 0);
  }
  gopt_seq_policy *q = NULL;
  CHECK(gopt_seq_policy_load(path, "rewrite", &q, &err) != 0 && q == NULL);
  CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "seq:toy") && !strchr(err.msg, '\n'), "%s", err.msg);
  /* corrupted (one byte flipped) and truncated */
  FILE *f = fopen(path, "rb");
  unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  buf[n / 2] ^= 0x40;
  write_bytes(bad, buf, n);
  CHECK(gopt_seq_policy_load(bad, "toy", &q, &err) != 0);
  CHECK_MSG(strstr(err.msg, bad) && strstr(err.msg, "corrupted"), "%s", err.msg);
  buf[n / 2] ^= 0x40;
  write_bytes(bad, buf, n / 3);
  CHECK(gopt_seq_policy_load(bad, "toy", &q, &err) != 0);
  CHECK_MSG(strstr(err.msg, bad) && strstr(err.msg, "truncated"), "%s", err.msg);
  /* a GO policy refuses a sequential file */
  gopt_policy *gp = NULL;
  CHECK(gopt_policy_load(path, -1, &gp, &err) != 0 && gp == NULL);
  CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "sequential"), "%s", err.msg);
  unlink(path);
  unlink(bad);
  rmdir(dir);
  gopt_seq_policy_free(full);
  gopt_seq_policy_free(part);
  gopt_seq_policy_free(back);
}

int main(void) {
  gopt_nn_set_threads(1);
  test_learns();
  test_imitate();
  test_groups();
  test_resume_files();
  return check_exit("test_learn_seq");
}
