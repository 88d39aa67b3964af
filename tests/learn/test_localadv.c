/* test_localadv.c: local advantage functions (localadv.h). The label transform gives the exact
 * values sign(a) log(1 + |a|/sigma) with sigma the per-graph median |a|; prioritised sampling draws
 * 90% of its labels from each graph's top 10% |a| over many draws (fixed seed); the advantage model
 * learns: on a small graph (a chain of big and a chain of small elementwise ops) whose advantages are
 * computed by enumerating every configuration and flip, the model trained on that enumeration ranks
 * the significant variables first (and better than its untrained self); dataset files and model files that are truncated, corrupted or of the wrong
 * kind get one line naming the file; guided walks down its ranking past rejected nodes; khop and
 * guided respect the budget, never return worse than
 * their start and are reproducible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/localadv.h"
#include "gopt/zoo.h"
#include "learn/learn_localadv.h"

typedef struct fix { gopt_graph *g; gopt_cluster *c; gopt_env *e; } fix;

static int fix_make(fix *f, const char *spec) {
  gopt_error err = {0};
  memset(f, 0, sizeof *f);
  gopt_env_opts o = {.task = GOPT_TASK_FUSION, .threads = 1};
  int rc = gopt_zoo_build(spec, &f->g, &err);
  rc = rc ? rc : gopt_cluster_parse("V100", &f->c, &err);
  rc = rc ? rc : gopt_env_new(f->g, f->c, &o, &f->e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc;
}
static void fix_free(fix *f) {
  gopt_env_free(f->e);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
}

static void test_label_transform(void) {
  CHECK_NEAR(gopt_localadv_label(3.0, 1.0), log(4.0), 1e-15);
  CHECK_NEAR(gopt_localadv_label(-3.0, 1.0), -log(4.0), 1e-15);
  CHECK_NEAR(gopt_localadv_label(2e-6, 1e-6), log(3.0), 1e-15);
  CHECK(gopt_localadv_label(0.0, 5.0) == 0.0);
  double a[] = {1, -3, 2};
  CHECK_NEAR(gopt_localadv_sigma(a, 3), 2.0, 0); /* median |a| */
  double b[] = {-1, 4, 2, 3};
  CHECK_NEAR(gopt_localadv_sigma(b, 4), 2.5, 0);
  double z[] = {0, 0, 0, 1, -2};
  CHECK_NEAR(gopt_localadv_sigma(z, 5), 1.5, 0); /* median 0: the nonzero ones' median */
  double zz[] = {0, 0};
  CHECK_NEAR(gopt_localadv_sigma(zz, 2), 1.0, 0);
}

/* Two graphs with 100 labels each (card 2, default 0): graph 0's advantages are r (r = 0..99),
 * graph 1's are -1000 r (another scale, the other sign): sigma is per graph and the top 10% is per
 * graph, so both graphs' ten largest |a| are the top set. */
static void test_prioritised_sampling(void) {
  gopt_ladata *d = NULL;
  gopt_error err = {0};
  CHECK(gopt_ladata_new(GOPT_TASK_FUSION, &d, &err) == 0);
  uint8_t card = 2, dflt = 0, cfg = 0;
  for (int g = 0; g < 2; g++) {
    long gi = ladata_add_graph(d, g ? "b" : "a", "V100", 7, 1, &card, &dflt);
    CHECK(gi == g);
    for (int r = 0; r < 100; r++) {
      double cost[2] = {5.0, 5.0 + (g ? -1000.0 * r : (double)r)};
      CHECK(ladata_add_record(&d->g[gi], 0, &cfg, cost) == 0);
    }
  }
  la_labels ls;
  CHECK(la_labels_build(d, 0.1, &ls, &err) == 0);
  CHECK_EQ_INT(ls.n, 200);
  CHECK_EQ_INT(ls.ntop, 20);
  CHECK_NEAR(ls.sigma[0], 49.5, 0);
  CHECK_NEAR(ls.sigma[1], 49500, 0);
  CHECK_NEAR(ls.l[10].t, log(1 + 10 / 49.5), 1e-12);
  CHECK_NEAR(ls.l[110].t, -log(1 + 10000 / 49500.0), 1e-12);
  int top_ok = 1;
  for (size_t i = 0; i < ls.ntop; i++) top_ok &= ls.l[ls.top[i]].rec >= 90;
  CHECK_MSG(top_ok, "the top set is not each graph's 10 largest |a|");
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, 42);
  long from_top = 0, draws = 200000, g1 = 0;
  for (long i = 0; i < draws; i++) {
    const la_label *l = &ls.l[la_labels_draw(&ls, 0.9, &rng)];
    from_top += l->rec >= 90;
    g1 += l->g == 1;
  }
  CHECK_NEAR((double)from_top / (double)draws, 0.9, 0.005);
  CHECK_NEAR((double)g1 / (double)draws, 0.5, 0.01);
  la_labels_free(&ls);
  gopt_ladata_free(d);
}

/* Two chains of 5 elementwise ops from one input each: chain A on [4096, 4096] floats (64 MB: a
 * fusion saves a round trip through HBM, ~120 us on V100), chain B on [8, 8] (a fusion saves a
 * kernel floor, a few us). The fusion bits of chain A are the significant ones; chain A is large
 * enough that chain B's savings stay far below 10 % of it under any calibration of the floors
 * (at [2048, 2048] the h100-2026-11-28 floors put them at the threshold). */
static gopt_graph *two_chains(void) {
  gopt_graph *g = gopt_graph_new("two_chains");
  static const char *ops[5] = {"Relu", "Sigmoid", "Tanh", "Exp", "Relu"};
  for (int c = 0; c < 2; c++) {
    int64_t d[2] = {c ? 8 : 4096, c ? 8 : 4096};
    char nm[32];
    snprintf(nm, sizeof nm, "x%d", c);
    int32_t prev = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, d, NULL);
    gopt_graph_add_input(g, prev);
    for (int i = 0; i < 5; i++) {
      snprintf(nm, sizeof nm, "%c%d", c ? 'b' : 'a', i);
      int32_t t = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, d, NULL);
      gopt_graph_add_node(g, ops[i], nm, 1, &prev, 1, &t, NULL);
      prev = t;
    }
    gopt_graph_add_output(g, prev);
  }
  return g;
}

/* Every configuration of the nv <= 12 fusion bits and every variable, both choices evaluated:
 * the complete dataset, and the true |advantage| of each (configuration, variable) in truth. */
static void enumerate(gopt_env *e, gopt_ladata *d, double *truth) {
  size_t nv = gopt_env_nvars(e);
  double *x = malloc(nv * sizeof *x), *dx = malloc(nv * sizeof *dx);
  uint8_t *card = malloc(nv), *dflt = malloc(nv), *cfg = malloc(nv);
  gopt_env_ws *w = gopt_env_ws_new(e);
  gopt_env_default(e, dx);
  for (size_t i = 0; i < nv; i++) { card[i] = 2; dflt[i] = (uint8_t)dx[i]; }
  long gi = ladata_add_graph(d, "two_chains", "V100", gopt_graph_hash(gopt_env_graph(e)), (uint32_t)nv, card, dflt);
  CHECK(gi == 0);
  for (size_t c = 0; c < ((size_t)1 << nv); c++)
    for (size_t v = 0; v < nv; v++) {
      double cost[2];
      for (size_t i = 0; i < nv; i++) x[i] = (double)((c >> i) & 1);
      for (int k = 0; k < 2; k++) {
        gopt_env_result r;
        x[v] = k;
        CHECK(gopt_env_evaluate(w, x, &r, NULL, NULL) == 0);
        cost[k] = r.objective;
      }
      for (size_t i = 0; i < nv; i++) cfg[i] = (uint8_t)((c >> i) & 1);
      CHECK(ladata_add_record(&d->g[0], (uint32_t)v, cfg, cost) == 0);
      truth[c * nv + v] = fabs(cost[1] - cost[0]);
    }
  gopt_env_ws_free(w);
  free(x);
  free(dx);
  free(card);
  free(dflt);
  free(cfg);
}

/* Over every configuration: the fraction of the m variables with the largest predicted |advantage|
 * that are among the m largest true ones (m: the significant count of that configuration). */
static double top_precision(gopt_policy *p, gopt_env *e, const double *truth, double thresh) {
  size_t nv = gopt_env_nvars(e), hits = 0, total = 0;
  double *x = malloc(nv * sizeof *x), *pred = malloc(nv * sizeof *pred);
  gopt_error err = {0};
  for (size_t c = 0; c < ((size_t)1 << nv); c++) {
    for (size_t i = 0; i < nv; i++) x[i] = (double)((c >> i) & 1);
    CHECK(gopt_localadv_predict(p, e, x, pred, &err) == 0);
    const double *t = truth + c * nv;
    size_t m = 0;
    for (size_t i = 0; i < nv; i++) m += t[i] > thresh;
    for (size_t i = 0; i < nv; i++) {
      size_t rank = 0; /* ties broken by index */
      for (size_t j = 0; j < nv; j++) rank += pred[j] > pred[i] || (pred[j] == pred[i] && j < i);
      hits += rank < m && t[i] > thresh;
    }
    total += m;
  }
  free(x);
  free(pred);
  return total ? (double)hits / (double)total : 1.0;
}

static void test_learns(void) {
  gopt_graph *g = two_chains();
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  gopt_error err = {0};
  gopt_env_opts eo = {.task = GOPT_TASK_FUSION, .threads = 1};
  CHECK(gopt_cluster_parse("V100", &c, &err) == 0);
  CHECK_MSG(gopt_env_new(g, c, &eo, &e, &err) == 0, "%s", err.msg);
  size_t nv = e ? gopt_env_nvars(e) : 0;
  CHECK_MSG(nv >= 4 && nv <= 12, "%zu fusion variables", nv);
  if (nv < 4 || nv > 12) return;
  double *truth = malloc(((size_t)1 << nv) * nv * sizeof *truth);
  gopt_ladata *d = NULL;
  gopt_policy *p = NULL;
  CHECK(gopt_ladata_new(GOPT_TASK_FUSION, &d, &err) == 0);
  enumerate(e, d, truth);
  /* significant: |a| above 10% of the largest one */
  double mx = 0;
  size_t sig = 0, all = ((size_t)1 << nv) * nv;
  for (size_t i = 0; i < all; i++) mx = truth[i] > mx ? truth[i] : mx;
  for (size_t i = 0; i < all; i++) sig += truth[i] > 0.1 * mx;
  CHECK_MSG(sig > all / 8 && sig < all * 3 / 4, "significant (configuration, variable) pairs: %zu of %zu", sig, all);
  CHECK(gopt_localadv_new(GOPT_TASK_FUSION, NULL, 5, &p, &err) == 0);
  double before = top_precision(p, e, truth, 0.1 * mx);
  gopt_localadv_train_opts o = {.steps = 200, .seed = 1};
  gopt_learn_train_result tr;
  CHECK_MSG(gopt_localadv_train(p, d, &e, &o, &tr, &err) == 0, "%s", err.msg);
  double after = top_precision(p, e, truth, 0.1 * mx);
  fprintf(stderr, "learns: %zu variables, %zu of %zu pairs significant; top-m precision untrained %.3f, trained %.3f\n",
          nv, sig, all, before, after);
  CHECK_MSG(after >= 0.9, "the trained model ranks the significant variables first in only %.1f%% of the slots", 100 * after);
  CHECK(after > before);
  gopt_policy_free(p);
  gopt_ladata_free(d);
  free(truth);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Writes bytes to path. */
static void put_file(const char *path, const unsigned char *b, size_t n) {
  FILE *fp = fopen(path, "wb");
  CHECK(fp && fwrite(b, 1, n, fp) == n);
  if (fp) fclose(fp);
}
static unsigned char *get_file(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  *n = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *b = malloc(*n + 1);
  CHECK(fread(b, 1, *n, fp) == *n);
  fclose(fp);
  return b;
}
/* The error is one line that names the file. */
static void check_one_line(const gopt_error *err, const char *path) {
  CHECK_MSG(strstr(err->msg, path) != NULL, "error does not name %s: %s", path, err->msg);
  CHECK_MSG(strchr(err->msg, '\n') == NULL, "error is not one line: %s", err->msg);
}

static void test_bad_files(void) {
  fix f;
  if (fix_make(&f, "gpt2:layers=1,seq=16")) return;
  char dpath[] = "/tmp/gopt-la-data-XXXXXX", ppath[] = "/tmp/gopt-la-model-XXXXXX", gpath[] = "/tmp/gopt-la-go-XXXXXX";
  int fd1 = mkstemp(dpath), fd2 = mkstemp(ppath), fd3 = mkstemp(gpath);
  CHECK(fd1 >= 0 && fd2 >= 0 && fd3 >= 0);
  close(fd1);
  close(fd2);
  close(fd3);
  gopt_error err = {0};
  gopt_ladata *d = NULL, *d2 = NULL;
  gopt_policy *p = NULL, *q = NULL, *go = NULL;
  CHECK(gopt_ladata_new(GOPT_TASK_FUSION, &d, &err) == 0);
  gopt_search_opts so = {.budget_evals = 60, .seed = 1};
  CHECK(gopt_ladata_collect(d, f.e, "gpt2:layers=1,seq=16", "V100", &so, NULL, &err) == 0);
  CHECK(gopt_ladata_save(d, dpath, &err) == 0);
  CHECK_MSG(gopt_ladata_load(dpath, &d2, &err) == 0, "%s", err.msg);
  CHECK(d2 && gopt_ladata_records(d2, 0) == gopt_ladata_records(d, 0) && gopt_ladata_check_env(d2, 0, f.e, &err) == 0);
  gopt_ladata_free(d2);
  d2 = NULL;
  size_t n = 0;
  unsigned char *b = get_file(dpath, &n);
  CHECK(b && n > 100);
  put_file(dpath, b, n / 2); /* truncated */
  CHECK(gopt_ladata_load(dpath, &d2, &err) != 0 && !d2);
  check_one_line(&err, dpath);
  b[n / 2] ^= 0x40; /* one bit flipped */
  put_file(dpath, b, n);
  CHECK(gopt_ladata_load(dpath, &d2, &err) != 0 && !d2);
  check_one_line(&err, dpath);
  put_file(dpath, (const unsigned char *)"GOPTPOL1xxxx", 12); /* another format */
  CHECK(gopt_ladata_load(dpath, &d2, &err) != 0);
  check_one_line(&err, dpath);
  free(b);
  /* model files */
  CHECK(gopt_localadv_new(GOPT_TASK_FUSION, NULL, 1, &p, &err) == 0);
  CHECK(gopt_policy_save(p, ppath, &err) == 0);
  CHECK(gopt_localadv_load(ppath, GOPT_TASK_FUSION, &q, &err) == 0 && gopt_policy_is_localadv(q));
  gopt_policy_free(q);
  q = NULL;
  CHECK(gopt_policy_load(ppath, GOPT_TASK_FUSION, &q, &err) != 0); /* not a GO policy */
  check_one_line(&err, ppath);
  CHECK(gopt_policy_new(GOPT_TASK_FUSION, NULL, 1, &go, &err) == 0 && gopt_policy_save(go, gpath, &err) == 0);
  CHECK(gopt_localadv_load(gpath, GOPT_TASK_FUSION, &q, &err) != 0); /* not an advantage model */
  check_one_line(&err, gpath);
  b = get_file(ppath, &n);
  CHECK(b != NULL);
  put_file(ppath, b, n - 9);
  CHECK(gopt_localadv_load(ppath, GOPT_TASK_FUSION, &q, &err) != 0);
  check_one_line(&err, ppath);
  b[n / 3] ^= 1;
  put_file(ppath, b, n);
  CHECK(gopt_localadv_load(ppath, GOPT_TASK_FUSION, &q, &err) != 0);
  check_one_line(&err, ppath);
  free(b);
  gopt_policy_free(p);
  gopt_policy_free(go);
  gopt_ladata_free(d);
  unlink(dpath);
  unlink(ppath);
  unlink(gpath);
  fix_free(&f);
}

/* A fake guide over nv variables: variable i scores i (the last variables are the top ones), or
 * every one the same when flat (the ranking is then the node order). */
typedef struct fake_guide_cfg {
  size_t nv;
  int flat;
} fake_guide_cfg;

static int fake_guide(const double *x, double *score, void *user, gopt_error *err) {
  (void)x;
  (void)err;
  const fake_guide_cfg *c = user;
  for (size_t i = 0; i < c->nv; i++) score[i] = c->flat ? 1.0 : (double)i;
  return 0;
}

static void test_khop_guided(void) {
  fix f;
  if (fix_make(&f, "transformer:layers=1,seq=32")) return;
  size_t nv = gopt_env_nvars(f.e);
  double *x0 = malloc(nv * sizeof *x0), *xb = malloc(nv * sizeof *xb), *xb2 = malloc(nv * sizeof *xb2);
  gopt_env_ws *w = gopt_env_ws_new(f.e);
  gopt_policy *p = NULL;
  gopt_error err = {0};
  CHECK(gopt_localadv_new(GOPT_TASK_FUSION, NULL, 2, &p, &err) == 0);
  gopt_localadv_guide g = {.model = p, .env = f.e};
  fake_guide_cfg rising = {nv, 0};
  for (int start = 0; start < 2; start++) {
    gopt_env_default(f.e, x0);
    if (start) /* a start away from the default */
      for (size_t i = 0; i < nv; i++) x0[i] = (double)((i * 7 + 3) % 5 == 0);
    gopt_env_result r0;
    CHECK(gopt_env_evaluate(w, x0, &r0, NULL, NULL) == 0);
    for (int m = 0; m < 3; m++) {
      const char *method = m == 0 ? "khop" : "guided";
      gopt_search_opts o = {.budget_evals = 150, .seed = 9, .x0 = x0, .hops = 2, .alpha = 20};
      if (m == 1) { o.guide = fake_guide; o.guide_user = &rising; }
      if (m == 2) { o.guide = gopt_localadv_guide_fn; o.guide_user = &g; }
      gopt_search_result res, res2;
      CHECK_MSG(gopt_search_run(method, f.e, &o, xb, &res, &err) == 0, "%s", err.msg);
      CHECK_MSG(res.evals <= 150 && res.evals >= 150, "%s: %llu evaluations", method, (unsigned long long)res.evals);
      CHECK_MSG(gopt_env_result_cmp(&res.best, &r0) <= 0, "%s is worse than its start", method);
      gopt_env_result rb;
      CHECK(gopt_env_evaluate(w, xb, &rb, NULL, NULL) == 0 && rb.objective == res.best.objective);
      CHECK(gopt_search_run(method, f.e, &o, xb2, &res2, &err) == 0);
      CHECK_MSG(memcmp(xb, xb2, nv * sizeof *xb) == 0, "%s is not reproducible", method);
    }
  }
  gopt_search_opts o = {.budget_evals = 10};
  gopt_search_result res;
  CHECK(gopt_search_run("guided", f.e, &o, xb, &res, &err) != 0); /* no guide */
  gopt_localadv_guide_free(&g);
  gopt_policy_free(p);
  gopt_env_ws_free(w);
  free(x0);
  free(xb);
  free(xb2);
  fix_free(&f);
}

/* guided walks down its ranking: with room for one node at the top (alpha tiny) and a flat guide,
 * a node whose mutation is rejected steps aside for the next, so the run changes variables all
 * over the graph, as khop does. Re-drawing the top node (the search before 29 Nov) only ever
 * mutates the first node's neighbourhood. */
static void test_guided_walks(void) {
  fix f;
  if (fix_make(&f, "transformer:layers=1,seq=32")) return;
  size_t nv = gopt_env_nvars(f.e);
  double *x0 = malloc(nv * sizeof *x0), *xb = malloc(nv * sizeof *xb), *xk = malloc(nv * sizeof *xk);
  gopt_error err = {0};
  gopt_env_default(f.e, x0);
  gopt_search_opts o = {.budget_evals = 400, .seed = 3, .x0 = x0, .hops = 1, .alpha = 1e-6};
  gopt_search_result rg, rk;
  fake_guide_cfg flat = {nv, 1};
  o.guide = fake_guide;
  o.guide_user = &flat;
  CHECK_MSG(gopt_search_run("guided", f.e, &o, xb, &rg, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_search_run("khop", f.e, &o, xk, &rk, &err) == 0, "%s", err.msg);
  gopt_env_ws *w = gopt_env_ws_new(f.e);
  gopt_env_result r0;
  CHECK(w && gopt_env_evaluate(w, x0, &r0, NULL, NULL) == 0);
  size_t dg = 0, dk = 0;
  for (size_t i = 0; i < nv; i++) dg += xb[i] != x0[i], dk += xk[i] != x0[i];
  fprintf(stderr, "from %.6g ms: guided (flat guide, one node at the top) changed %zu variables, %.6g ms; khop %zu, %.6g ms\n",
          r0.objective * 1e3, dg, rg.best.objective * 1e3, dk, rk.best.objective * 1e3);
  /* 29 Nov: 23 variables, 0.486 ms; khop 46, 0.456 ms; re-drawing the top node: 2, 0.570 ms */
  CHECK_MSG(dg > 10 && rg.best.objective < 0.9 * r0.objective, "guided changed %zu variables (khop %zu)", dg, dk);
  gopt_env_ws_free(w);
  free(x0);
  free(xb);
  free(xk);
  fix_free(&f);
}

int main(void) {
  test_label_transform();
  test_prioritised_sampling();
  test_bad_files();
  test_khop_guided();
  test_guided_walks();
  test_learns();
  return check_exit("test_localadv");
}
