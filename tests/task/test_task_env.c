/* test_task_env.c: the task environment (task.h) against independent references: the default
 * vector evaluates to what the simulator gives for the default decisions applied directly;
 * incremental evaluation equals a fresh full evaluation after random changes; batch equals
 * sequential; decisions round trip (in memory and through a JSON file); fusion repairs on a
 * hand-built graph match groups derived by hand and are deterministic; features are finite and
 * follow the documented layout; bad vectors fail with one line naming the node. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/task.h"
#include "gopt/train.h"
#include "gopt/zoo.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

static int same_result(const gopt_env_result *a, const gopt_env_result *b) {
  return a->objective == b->objective && a->step_time == b->step_time && a->peak_mem == b->peak_mem &&
         a->mem_over == b->mem_over && a->feasible == b->feasible;
}

/* Simulates decisions d on a fresh simulator (independent of the environment). */
static int sim_direct(const gopt_graph *g, const gopt_cluster *c, const gopt_decisions *d,
                      double *step, double *peak) {
  gopt_error err = {0};
  gopt_sim *s = NULL;
  gopt_sim_state *st = NULL;
  gopt_sim_result r;
  int rc = gopt_sim_new(g, c, NULL, &s, &err);
  if (!rc) rc = (st = gopt_sim_state_new(s)) ? 0 : GOPT_ENOMEM;
  if (!rc) rc = gopt_sim_state_apply(st, d, &err);
  if (!rc) rc = gopt_sim_evaluate(st, &r, &err);
  if (!rc) {
    *step = r.step_time;
    *peak = 0;
    for (int k = 0; k < r.n_devices; k++) *peak = fmax(*peak, r.peak_mem[k]);
  }
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  return rc;
}

/* A random valid vector. */
static void random_x(const gopt_env *e, double *x) {
  const gopt_env_var *v = gopt_env_vars(e);
  for (size_t i = 0; i < gopt_env_nvars(e); i++)
    x[i] = v[i].kind == GOPT_VAR_PRIORITY ? urand() : (double)(rnd() % (uint64_t)v[i].card);
}

static int same_decisions(const gopt_decisions *a, const gopt_decisions *b, size_t nn) {
  if (!!a->placement != !!b->placement || !!a->group != !!b->group || !!a->priority != !!b->priority)
    return 0;
  for (size_t i = 0; i < nn; i++) {
    if (a->placement && a->placement[i] != b->placement[i]) return 0;
    if (a->group && a->group[i] != b->group[i]) return 0;
    if (a->priority && !(a->priority[i] == b->priority[i] || (isnan(a->priority[i]) && isnan(b->priority[i]))))
      return 0;
  }
  return a->n_groups == b->n_groups;
}

static void test_task(const char *spec, const char *cluster, int task) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  gopt_env_ws *w = NULL, *w2 = NULL;
  double *x = NULL, *x2 = NULL, *xs = NULL;
  float *feat = NULL;
  gopt_decisions d, d2, d3;
  memset(&d, 0, sizeof d);
  d2 = d3 = d;
  int rc = gopt_zoo_build(spec, &g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  rc = rc ? rc : gopt_cluster_parse(cluster, &c, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_env_opts o = {.task = task};
  rc = rc ? rc : gopt_env_new(g, c, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) goto done;
  const size_t nv = gopt_env_nvars(e), NN = g->nodes.n, n = gopt_graph_node_count(g);
  const gopt_env_var *vars = gopt_env_vars(e);
  fprintf(stderr, "%s %s %s: %zu variables\n", spec, cluster, gopt_task_name(task), nv);
  /* variable layout: kinds in order DEVICE, PRIORITY, FUSE, each in topological order */
  int nk[3] = {0, 0, 0}, sorted = 1;
  for (size_t i = 0; i < nv; i++) {
    nk[vars[i].kind]++;
    if (i && vars[i].kind < vars[i - 1].kind) sorted = 0;
  }
  CHECK(sorted);
  CHECK_EQ_INT(nk[GOPT_VAR_DEVICE], (task == GOPT_TASK_PLACEMENT || task == GOPT_TASK_MEMORY || task == GOPT_TASK_JOINT) ? (long long)n : 0);
  CHECK_EQ_INT(nk[GOPT_VAR_PRIORITY], (task == GOPT_TASK_SCHEDULE || task == GOPT_TASK_MEMORY || task == GOPT_TASK_JOINT) ? (long long)n : 0);
  CHECK((nk[GOPT_VAR_FUSE] > 0) == (task == GOPT_TASK_FUSION || task == GOPT_TASK_JOINT));

  x = calloc(nv + 1, sizeof *x);
  x2 = calloc(nv + 1, sizeof *x2);
  xs = calloc(16 * nv + 1, sizeof *xs);
  w = gopt_env_ws_new(e);
  w2 = gopt_env_ws_new(e);
  feat = calloc(NN * GOPT_ENV_NFEAT + 1, sizeof *feat);
  CHECK(x && x2 && xs && w && w2 && feat);
  if (!x || !x2 || !xs || !w || !w2 || !feat) goto done;

  /* 1. default x == simulating the default decisions directly */
  gopt_env_default(e, x);
  gopt_env_result r0, r1, r2;
  size_t rep = 99;
  rc = gopt_env_evaluate(w, x, &r0, &rep, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(rep, 0); /* the default fusion rules never need repairs */
  double step = 0, peak = 0;
  gopt_decisions_init(&d, g);
  if (task == GOPT_TASK_PLACEMENT || task == GOPT_TASK_MEMORY) {
    /* no decisions at all: everything on device 0, the simulator's own priorities */
    sim_direct(g, c, &d, &step, &peak);
  } else {
    rc = gopt_env_to_decisions(e, x, &d, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (task == GOPT_TASK_SCHEDULE) {
      /* the environment's explicit default priorities must equal the simulator's defaults */
      CHECK(d.priority != NULL && d.placement != NULL);
      free(d.priority);
      d.priority = NULL;
    }
    sim_direct(g, c, &d, &step, &peak);
  }
  CHECK_MSG(r0.step_time == step, "%s: default step %.17g vs direct %.17g", gopt_task_name(task), r0.step_time, step);
  CHECK(r0.peak_mem == peak);
  CHECK(r0.objective == (task == GOPT_TASK_MEMORY ? peak : step) || !r0.feasible);
  gopt_decisions_clear(&d);

  /* 2. incremental == full on random changes (1-3 variables each) */
  int mismatches = 0;
  for (int it = 0; it < 120 && nv; it++) {
    size_t idx[3];
    size_t k = 1 + rnd() % 3;
    for (size_t j = 0; j < k; j++) {
      idx[j] = rnd() % nv;
      const gopt_env_var *v = &vars[idx[j]];
      x[idx[j]] = v->kind == GOPT_VAR_PRIORITY ? urand() : (double)(rnd() % (uint64_t)v->card);
    }
    rc = gopt_env_evaluate_delta(w, x, idx, k, &r1, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gopt_env_ws *fresh = gopt_env_ws_new(e);
    rc = gopt_env_evaluate(fresh, x, &r2, NULL, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gopt_env_ws_free(fresh);
    mismatches += !same_result(&r1, &r2);
  }
  CHECK_EQ_INT(mismatches, 0);

  /* 3. batch == sequential, and the evaluation counter */
  for (int i = 0; i < 16; i++) random_x(e, xs + (size_t)i * nv);
  gopt_env_result rb[16], rs[16];
  uint64_t before = gopt_env_evaluations(e);
  rc = gopt_env_evaluate_batch(e, xs, 16, rb, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(gopt_env_evaluations(e) - before, 16);
  int bad = 0;
  for (int i = 0; i < 16; i++) {
    rc = gopt_env_evaluate(w2, xs + (size_t)i * nv, &rs[i], NULL, &err);
    bad += rc != 0 || !same_result(&rb[i], &rs[i]);
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(gopt_env_evaluations(e) - before, 32);

  /* 4. decisions round trip: x -> d -> x' -> d', in memory and through a file */
  random_x(e, x);
  rc = gopt_env_to_decisions(e, x, &d, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  rc = gopt_env_from_decisions(e, &d, x2, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  rc = gopt_env_to_decisions(e, x2, &d2, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK(same_decisions(&d, &d2, NN));
  rc = gopt_env_evaluate(w, x, &r1, NULL, &err) || gopt_env_evaluate(w2, x2, &r2, NULL, &err);
  CHECK(rc == 0 && same_result(&r1, &r2));
  char path[64];
  snprintf(path, sizeof path, "/tmp/gopt_test_task_%d_%d.json", (int)task, (int)getpid());
  rc = gopt_decisions_save(&d, g, path, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_decisions_init(&d3, g);
  rc = gopt_decisions_load(&d3, g, path, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  remove(path);
  rc = gopt_env_from_decisions(e, &d3, x2, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  rc = gopt_env_evaluate(w2, x2, &r2, NULL, &err);
  CHECK(rc == 0 && same_result(&r1, &r2));

  /* 5. repairs are deterministic: random bits twice on fresh workspaces */
  if (nk[GOPT_VAR_FUSE]) {
    size_t ra = 0, rb2 = 0;
    for (size_t i = 0; i < nv; i++)
      if (vars[i].kind == GOPT_VAR_FUSE) x[i] = 1;
    gopt_env_ws *fa = gopt_env_ws_new(e), *fb = gopt_env_ws_new(e);
    rc = gopt_env_evaluate(fa, x, &r1, &ra, &err) || gopt_env_evaluate(fb, x, &r2, &rb2, &err);
    CHECK(rc == 0 && same_result(&r1, &r2) && ra == rb2);
    fprintf(stderr, "  all fuse bits set: %zu repaired of %d\n", ra, nk[GOPT_VAR_FUSE]);
    gopt_env_ws_free(fa);
    gopt_env_ws_free(fb);
  }

  /* 6. features: finite, documented layout */
  rc = gopt_env_node_features(e, feat, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  int fbad = 0;
  for (size_t id = 0; id < NN; id++) {
    const float *f = feat + id * GOPT_ENV_NFEAT;
    int live = gopt_node_alive(g, (int32_t)id);
    float onehot = 0;
    for (int j = 0; j < 7; j++) onehot += f[j];
    for (int j = 0; j < GOPT_ENV_NFEAT; j++) fbad += !isfinite(f[j]) || f[j] < 0 || (!live && f[j] != 0);
    if (!live) continue;
    fbad += onehot != 1.0f;
    fbad += f[gopt_op_class_of(g->nodes.a[id].op)] != 1.0f;
    for (int j = 13; j <= 15; j++) fbad += f[j] > 1.0f;          /* topo position, depths */
    for (int j = 18; j <= 23; j++) fbad += f[j] > 1.0f;          /* flags and default priority */
  }
  CHECK_EQ_INT(fbad, 0);

  /* 7. a bad vector fails with one line naming the node */
  gopt_env_default(e, x);
  x[0] = vars[0].kind == GOPT_VAR_PRIORITY ? NAN : 7.5;
  rc = gopt_env_evaluate(w, x, &r1, NULL, &err);
  CHECK(rc == GOPT_EINVAL && strstr(err.msg, gopt_node_name(g, vars[0].node)) && !strchr(err.msg, '\n'));
done:
  gopt_decisions_clear(&d);
  gopt_decisions_clear(&d2);
  gopt_decisions_clear(&d3);
  free(x);
  free(x2);
  free(xs);
  free(feat);
  gopt_env_ws_free(w);
  gopt_env_ws_free(w2);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Hand-built graph for repairs: p = Relu(X), u = Relu(p), v = Relu(u), w = Add(p, v) (output).
 * Positions p=0, u=1, v=2, w=3; FUSE variables exist for p, u, v (w has no consumer). */
static gopt_graph *repair_graph(void) {
  gopt_graph *g = gopt_graph_new("repair");
  int64_t dim = 1024;
  int32_t X = gopt_graph_add_tensor(g, "X", GOPT_DT_FLOAT, 1, &dim, NULL);
  int32_t tp = gopt_graph_add_tensor(g, "p", GOPT_DT_FLOAT, 1, &dim, NULL);
  int32_t tu = gopt_graph_add_tensor(g, "u", GOPT_DT_FLOAT, 1, &dim, NULL);
  int32_t tv = gopt_graph_add_tensor(g, "v", GOPT_DT_FLOAT, 1, &dim, NULL);
  int32_t tw = gopt_graph_add_tensor(g, "w", GOPT_DT_FLOAT, 1, &dim, NULL);
  gopt_graph_add_input(g, X);
  gopt_graph_add_node(g, "Relu", "p", 1, &X, 1, &tp, NULL);
  gopt_graph_add_node(g, "Relu", "u", 1, &tp, 1, &tu, NULL);
  gopt_graph_add_node(g, "Relu", "v", 1, &tu, 1, &tv, NULL);
  int32_t in[2] = {tp, tv};
  gopt_graph_add_node(g, "Add", "w", 2, in, 1, &tw, NULL);
  gopt_graph_add_output(g, tw);
  return g;
}

/* Groups of x as a string "p,u|v,w" (members of each group by node name, groups by first node). */
static void groups_of(const gopt_env *e, const double *x, char *out, size_t outn) {
  gopt_error err = {0};
  gopt_decisions d;
  memset(&d, 0, sizeof d);
  out[0] = 0;
  if (gopt_env_to_decisions(e, x, &d, &err)) return;
  const gopt_graph *g = gopt_env_graph(e);
  for (int32_t k = 0; k < d.n_groups; k++) {
    if (k) strncat(out, "|", outn - strlen(out) - 1);
    int first = 1;
    for (size_t i = 0; i < g->nodes.n; i++)
      if (d.group && d.group[i] == k) {
        if (!first) strncat(out, ",", outn - strlen(out) - 1);
        strncat(out, gopt_node_name(g, (int32_t)i), outn - strlen(out) - 1);
        first = 0;
      }
  }
  gopt_decisions_clear(&d);
}

static void test_repairs(void) {
  gopt_error err = {0};
  gopt_graph *g = repair_graph();
  gopt_cluster *c = NULL;
  gopt_env *e = NULL, *ej = NULL;
  int rc = gopt_cluster_parse("2xV100-nvlink", &c, &err);
  gopt_env_opts o = {.task = GOPT_TASK_FUSION};
  rc = rc ? rc : gopt_env_new(g, c, &o, &e, &err);
  gopt_env_opts oj = {.task = GOPT_TASK_JOINT};
  rc = rc ? rc : gopt_env_new(g, c, &oj, &ej, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) goto done;
  CHECK_EQ_INT(gopt_env_nvars(e), 3);
  gopt_env_ws *w = gopt_env_ws_new(e);
  struct {
    double bits[3];
    size_t repaired;
    const char *groups;
  } cases[] = {
      {{1, 0, 0}, 1, ""},          /* p with {u} and {w}: path u -> v -> w leaves and re-enters */
      {{1, 0, 1}, 0, "p,u,v,w"},   /* v joins w first; then {u} and {v,w} are adjacent: convex */
      {{0, 1, 0}, 0, "u,v"},
      {{1, 1, 1}, 0, "p,u,v,w"},
      {{0, 0, 1}, 0, "v,w"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gopt_env_result r;
    size_t rep = 99;
    char grp[128];
    rc = gopt_env_evaluate(w, cases[i].bits, &r, &rep, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    CHECK_EQ_INT(rep, cases[i].repaired);
    groups_of(e, cases[i].bits, grp, sizeof grp);
    CHECK_MSG(!strcmp(grp, cases[i].groups), "case %zu: groups '%s', expected '%s'", i, grp, cases[i].groups);
  }
  gopt_env_ws_free(w);

  /* joint: devices (p,u,v,w), priorities, bits (p,u,v); w on device 1 breaks v's merge */
  CHECK_EQ_INT(gopt_env_nvars(ej), 4 + 4 + 3);
  double xj[11];
  gopt_env_default(ej, xj);
  xj[3] = 1;                              /* w on device 1 */
  xj[8] = 0, xj[9] = 1, xj[10] = 1;       /* bits p=0, u=1, v=1 */
  gopt_env_ws *wj = gopt_env_ws_new(ej), *wf = gopt_env_ws_new(ej);
  gopt_env_result r1, r2;
  size_t rep = 99;
  char grp[128];
  rc = gopt_env_evaluate(wj, xj, &r1, &rep, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK_EQ_INT(rep, 1);
  groups_of(ej, xj, grp, sizeof grp);
  CHECK_MSG(!strcmp(grp, "u,v"), "joint groups '%s'", grp);
  /* moving w back to device 0 makes v's bit effective: the incremental path must see it */
  xj[3] = 0;
  size_t idx = 3;
  rc = gopt_env_evaluate_delta(wj, xj, &idx, 1, &r1, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  rc = gopt_env_evaluate(wf, xj, &r2, &rep, &err);
  CHECK(rc == 0 && same_result(&r1, &r2) && rep == 0);
  groups_of(ej, xj, grp, sizeof grp);
  CHECK_MSG(!strcmp(grp, "u,v,w"), "joint groups '%s'", grp);
  gopt_env_ws_free(wj);
  gopt_env_ws_free(wf);
done:
  gopt_env_free(e);
  gopt_env_free(ej);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Random FUSE bits at several densities never produce groups the simulator rejects (its convexity
 * and mutual-dependence checks are the independent reference), and repairs are reproducible. */
static void test_random_fusion(const char *spec, int task) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  int rc = gopt_zoo_build(spec, &g, &err);
  rc = rc ? rc : gopt_cluster_parse(task == GOPT_TASK_JOINT ? "4xV100-nvlink" : "V100", &c, &err);
  gopt_env_opts o = {.task = task};
  rc = rc ? rc : gopt_env_new(g, c, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) goto done;
  size_t nv = gopt_env_nvars(e);
  const gopt_env_var *v = gopt_env_vars(e);
  double *x = calloc(nv + 1, sizeof *x);
  gopt_env_ws *w = gopt_env_ws_new(e), *w2 = gopt_env_ws_new(e);
  int fails = 0, diff = 0;
  size_t total_rep = 0;
  for (int it = 0; it < 40; it++) {
    double dens = (it % 4 + 1) / 4.0;
    gopt_env_default(e, x);
    for (size_t i = 0; i < nv; i++) {
      if (v[i].kind == GOPT_VAR_FUSE) x[i] = urand() < dens;
      else if (v[i].kind == GOPT_VAR_DEVICE && it % 2) x[i] = (double)(rnd() % (uint64_t)v[i].card);
    }
    gopt_env_result r1, r2;
    size_t rep1 = 0, rep2 = 0;
    rc = gopt_env_evaluate(w, x, &r1, &rep1, &err);
    if (rc) fprintf(stderr, "  %s: %s\n", spec, err.msg);
    fails += rc != 0;
    rc = gopt_env_evaluate(w2, x, &r2, &rep2, &err);
    diff += rc || !same_result(&r1, &r2) || rep1 != rep2;
    total_rep += rep1;
  }
  CHECK_EQ_INT(fails, 0);
  CHECK_EQ_INT(diff, 0);
  fprintf(stderr, "%s %s: 40 random fusion vectors valid, %zu repairs\n", spec, gopt_task_name(task), total_rep);
  free(x);
  gopt_env_ws_free(w);
  gopt_env_ws_free(w2);
done:
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* gopt_env_grad_owner on a Transformer training step: only gradient and update nodes' device
 * variables have an owner, always a forward node's; a gradient named "grad/<forward node>/..."
 * is owned by that node, an update "update/<parameter>" by a node reading that parameter (both
 * matched here by name, independently of the library's longest-prefix rule). A forward graph, or
 * a task without placement, has none. */
static const gopt_node *node_named(const gopt_graph *g, const char *name, size_t len, int32_t *id) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    const char *nm = gopt_node_name(g, (int32_t)i);
    if (nm && strlen(nm) == len && !strncmp(nm, name, len)) {
      *id = (int32_t)i;
      return &g->nodes.a[i];
    }
  }
  return NULL;
}

static int reads_param(const gopt_graph *g, int32_t id, const char *pname) {
  const gopt_node *nd = &g->nodes.a[id];
  for (uint32_t k = 0; k < nd->n_in; k++) {
    int32_t t = g->slots.a[nd->in + k].tensor;
    const char *tn = t >= 0 ? gopt_graph_str(g, g->tensors.a[t].name) : NULL;
    if (tn && !strcmp(tn, pname)) return 1;
  }
  return 0;
}

static void test_grad_owner(void) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_env *e = NULL, *ef = NULL;
  int32_t *own = NULL;
  CHECK_MSG(gopt_zoo_build("transformer:layers=2", &g, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_cluster_parse("4xV100-pcie", &c, &err) == 0, "%s", err.msg);
  gopt_env_opts o = {.task = GOPT_TASK_PLACEMENT}, of = {.task = GOPT_TASK_FUSION};
  CHECK_MSG(g && c && gopt_env_new(g, c, &o, &e, &err) == 0, "%s", err.msg);
  if (!e) goto done;
  own = malloc((gopt_env_nvars(e) + 1) * sizeof *own);
  CHECK_EQ_INT(gopt_env_grad_owner(e, own, &err), 0); /* forward graph */
  gopt_env_free(e);
  e = NULL;
  CHECK_MSG(gopt_train_build(g, NULL, &err) == 0, "%s", err.msg);
  CHECK_MSG(gopt_env_new(g, c, &o, &e, &err) == 0 && gopt_env_new(g, c, &of, &ef, &err) == 0, "%s", err.msg);
  if (!e || !ef) goto done;
  size_t nv = gopt_env_nvars(e);
  const gopt_env_var *vars = gopt_env_vars(e);
  free(own);
  own = malloc((nv + 1) * sizeof *own);
  int owned = gopt_env_grad_owner(e, own, &err), grads = 0, by_node = 0, by_param = 0, bad = 0, counted = 0;
  for (size_t v = 0; v < nv; v++) {
    const gopt_node *nd = &g->nodes.a[vars[v].node];
    const char *name = gopt_node_name(g, vars[v].node);
    int back = (nd->flags & (GOPT_N_GRAD | GOPT_N_UPDATE)) != 0;
    grads += back;
    if (own[v] < 0) continue;
    counted++;
    int32_t o_id = vars[own[v]].node, id = -1;
    const gopt_node *on = &g->nodes.a[o_id];
    if (!back || vars[own[v]].kind != GOPT_VAR_DEVICE || (on->flags & (GOPT_N_GRAD | GOPT_N_UPDATE))) bad++;
    if (!strncmp(name, "grad/", 5) && node_named(g, name + 5, strcspn(name + 5, "/"), &id) &&
        !(g->nodes.a[id].flags & (GOPT_N_GRAD | GOPT_N_UPDATE))) {
      by_node++;
      if (id != o_id) bad++;
    } else if (!strncmp(name, "update/", 7)) {
      by_param++;
      if (!reads_param(g, o_id, name + 7)) bad++;
    }
  }
  fprintf(stderr, "transformer:layers=2 training: %zu variables, %d backward, %d owned (%d checked by node "
          "name, %d by parameter), %d wrong\n", nv, grads, owned, by_node, by_param, bad);
  CHECK_EQ_INT(owned, counted);
  CHECK_EQ_INT(bad, 0);
  CHECK(owned > grads * 9 / 10 && by_node > owned / 2 && by_param > 10);
  CHECK_EQ_INT(gopt_env_grad_owner(ef, own, &err), 0); /* fusion: no device variables */
done:
  free(own);
  gopt_env_free(e);
  gopt_env_free(ef);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

static void test_names(void) {
  for (int t = 0; t < GOPT_TASK_COUNT; t++) CHECK_EQ_INT(gopt_task_from_name(gopt_task_name(t)), t);
  CHECK(gopt_task_from_name("placment") == -1 && gopt_task_name(GOPT_TASK_COUNT) == NULL);
}

int main(void) {
  test_names();
  test_grad_owner();
  test_repairs();
  test_random_fusion("gnmt:steps=4,layers=4", GOPT_TASK_FUSION);
  test_random_fusion("inception_v3", GOPT_TASK_FUSION);
  test_random_fusion("amoebanet:cells=2", GOPT_TASK_JOINT);
  test_random_fusion("transformer_xl:segments=2,layers=4", GOPT_TASK_FUSION);
  for (int t = 0; t < GOPT_TASK_COUNT; t++) {
    test_task("inception_v3", t == GOPT_TASK_FUSION ? "V100" : "4xV100-nvlink", t);
    test_task("transformer:layers=2", t == GOPT_TASK_MEMORY ? "2xV100-nvlink" : "4xV100-nvlink", t);
  }
  return check_exit("test_task_env");
}
