/* pass_search.c: the pass-order baselines over the pass environment (gopt/passes.h): random
 * search over sequences, greedy (best next pass) and a steady-state genetic search, all seeded and
 * budgeted in evaluations (pass runs), keeping the best prefix seen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/passes.h"
#include "gopt/util.h"
#include "passes/pass_env_internal.h"
#include "search/search_internal.h"

typedef struct ps {
  gopt_pass_env *e;
  const char *method;
  uint64_t budget, ev0;
  int progress, stopped, np, L;
  double t0, t_print;
  search_rng rng;
  int *best;        /* [L] */
  size_t best_n;
  double best_c;
  gopt_error *err;
} ps;

static uint64_t ps_used(const ps *s) { return gopt_pass_env_evals(s->e) - s->ev0; }

/* 1 when the search must stop before the next evaluation (budget spent or Ctrl-C). */
static int ps_out(ps *s) {
  if (search_stop_requested()) s->stopped = 1;
  return s->stopped || ps_used(s) >= s->budget;
}

static void ps_print(ps *s, int final) {
  if (!s->progress) return;
  double now = gopt_now();
  if (!final && now - s->t_print < 0.25) return;
  s->t_print = now;
  fprintf(stderr, "\rgopt passes: %s %llu/%llu evaluations, best cost %.6g (%zu passes)%s", s->method,
          (unsigned long long)ps_used(s), (unsigned long long)s->budget, s->best_c, s->best_n,
          final ? "\n" : "");
}

/* Records seq[0..n) of cost c as the best when it is lower (or equal and shorter). */
static void ps_offer(ps *s, const int *seq, size_t n, double c) {
  double eps = 1e-12 * (s->best_c > 0 ? s->best_c : 1);
  if (c < s->best_c - eps || (c <= s->best_c + eps && n < s->best_n)) {
    memcpy(s->best, seq, n * sizeof *seq);
    s->best_n = n;
    s->best_c = c;
  }
  ps_print(s, 0);
}

/* Runs seq[0..n) from the initial graph, offering every prefix; *fit (may be NULL) receives the
 * lowest prefix cost. Stops early when the budget runs out. */
static int ps_run(ps *s, const int *seq, size_t n, double *fit) {
  const gopt_graph *g = pass_env_initial_graph(s->e);
  gopt_graph *cur = NULL;
  double lo = gopt_pass_env_initial_cost(s->e);
  int rc = 0;
  for (size_t k = 0; k < n && !ps_out(s); k++) {
    gopt_graph *h = NULL;
    double c;
    int changed = 0;
    rc = pass_env_try(s->e, cur ? cur : g, seq[k], &h, &c, &changed, s->err);
    if (rc) break;
    if (changed) {
      gopt_graph_free(cur);
      cur = h;
    } else {
      gopt_graph_free(h);
    }
    if (c < lo) lo = c;
    ps_offer(s, seq, k + 1, c);
  }
  gopt_graph_free(cur);
  if (fit) *fit = lo;
  return rc;
}

static int ps_random(ps *s) {
  int *seq = malloc((size_t)s->L * sizeof *seq), rc = 0;
  if (!seq) return gopt_error_set(s->err, GOPT_ENOMEM, "out of memory");
  while (!rc && !ps_out(s)) {
    for (int k = 0; k < s->L; k++) seq[k] = (int)search_rng_below(&s->rng, (uint32_t)s->np);
    rc = ps_run(s, seq, (size_t)s->L, NULL);
  }
  free(seq);
  return rc;
}

static int ps_greedy(ps *s) {
  gopt_graph *cur = NULL;
  double c_cur = gopt_pass_env_initial_cost(s->e);
  int rc = 0;
  for (int step = 0; step < s->L && !rc; step++) {
    gopt_graph *pick = NULL;
    double c_pick = c_cur;
    int p_pick = -1;
    for (int p = 0; p < s->np && !rc && !ps_out(s); p++) {
      gopt_graph *h = NULL;
      double c;
      rc = pass_env_try(s->e, cur ? cur : pass_env_initial_graph(s->e), p, &h, &c, NULL, s->err);
      if (!rc && c < c_pick - 1e-12 * (c_pick > 0 ? c_pick : 1)) {
        gopt_graph_free(pick);
        pick = h;
        c_pick = c;
        p_pick = p;
      } else {
        gopt_graph_free(h);
      }
      ps_print(s, 0);
    }
    if (p_pick < 0) break; /* nothing lowers the cost, or out of budget */
    gopt_graph_free(cur);
    cur = pick;
    c_cur = c_pick;
    s->best[step] = p_pick;
    s->best_n = (size_t)step + 1;
    s->best_c = c_cur;
  }
  gopt_graph_free(cur);
  return rc;
}

#define GA_POP 16

typedef struct ga_ind {
  int *seq;
  size_t n;
  double fit;
} ga_ind;

/* Child of a and b: one-point crossover, then per-gene mutation, one insertion and one deletion
 * with probability 0.1 each. */
static void ga_child(ps *s, const ga_ind *a, const ga_ind *b, ga_ind *c) {
  size_t ca = search_rng_below(&s->rng, (uint32_t)a->n + 1), cb = search_rng_below(&s->rng, (uint32_t)b->n + 1);
  c->n = 0;
  for (size_t i = 0; i < ca; i++) c->seq[c->n++] = a->seq[i];
  for (size_t i = cb; i < b->n && c->n < (size_t)s->L; i++) c->seq[c->n++] = b->seq[i];
  for (size_t i = 0; i < c->n; i++)
    if (search_rng_uniform(&s->rng) * (double)s->L < 1.0)
      c->seq[i] = (int)search_rng_below(&s->rng, (uint32_t)s->np);
  if (c->n < (size_t)s->L && search_rng_uniform(&s->rng) < 0.1) {
    size_t at = search_rng_below(&s->rng, (uint32_t)c->n + 1);
    memmove(c->seq + at + 1, c->seq + at, (c->n - at) * sizeof *c->seq);
    c->seq[at] = (int)search_rng_below(&s->rng, (uint32_t)s->np);
    c->n++;
  }
  if (c->n > 1 && search_rng_uniform(&s->rng) < 0.1) {
    size_t at = search_rng_below(&s->rng, (uint32_t)c->n);
    memmove(c->seq + at, c->seq + at + 1, (c->n - at - 1) * sizeof *c->seq);
    c->n--;
  }
}

/* The baseline pipeline's pass sequence into seq (at most L); 0 when it is longer than L. */
static size_t ga_baseline_seq(ps *s, int *seq, const char *baseline) {
  gopt_graph *h = NULL;
  gopt_pipeline_step *st = NULL;
  size_t n = 0, out = 0;
  gopt_error err = {0};
  if (!gopt_pipeline_run(baseline, pass_env_initial_graph(s->e), &h, &st, &n, &err) && n <= (size_t)s->L) {
    for (size_t i = 0; i < n; i++) seq[i] = st[i].pass;
    out = n;
  }
  gopt_graph_free(h);
  free(st);
  return out;
}

static int ga_tournament(ps *s, const ga_ind *pop) {
  int a = (int)search_rng_below(&s->rng, GA_POP), b = (int)search_rng_below(&s->rng, GA_POP);
  return pop[b].fit < pop[a].fit ? b : a;
}

static int ps_genetic(ps *s, const char *baseline) {
  ga_ind pop[GA_POP + 1];
  int rc = 0, n_init = 0;
  int *mem = malloc((size_t)(GA_POP + 1) * (size_t)s->L * sizeof *mem);
  if (!mem) return gopt_error_set(s->err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i <= GA_POP; i++) pop[i] = (ga_ind){mem + (size_t)i * (size_t)s->L, 0, 1e300};
  pop[0].n = ga_baseline_seq(s, pop[0].seq, baseline);
  for (int i = 0; i < GA_POP; i++) {
    if (i > 0 || pop[0].n == 0) {
      pop[i].n = (size_t)s->L;
      for (int k = 0; k < s->L; k++) pop[i].seq[k] = (int)search_rng_below(&s->rng, (uint32_t)s->np);
    }
    if (ps_out(s)) break;
    rc = ps_run(s, pop[i].seq, pop[i].n, &pop[i].fit);
    if (rc) break;
    n_init++;
  }
  while (!rc && n_init == GA_POP && !ps_out(s)) {
    ga_ind *c = &pop[GA_POP];
    ga_child(s, &pop[ga_tournament(s, pop)], &pop[ga_tournament(s, pop)], c);
    rc = ps_run(s, c->seq, c->n, &c->fit);
    int worst = 0;
    for (int i = 1; i < GA_POP; i++)
      if (pop[i].fit > pop[worst].fit) worst = i;
    if (!rc && c->fit <= pop[worst].fit) { /* swap the child in */
      ga_ind t = pop[worst];
      pop[worst] = *c;
      *c = t;
    }
  }
  free(mem);
  return rc;
}

void gopt_pass_search_result_free(gopt_pass_search_result *r) {
  if (!r) return;
  free(r->seq);
  r->seq = NULL;
  r->n = 0;
}

int gopt_pass_search(gopt_pass_env *e, const char *method, const gopt_pass_search_opts *o,
                     gopt_pass_search_result *res, gopt_error *err) {
  memset(res, 0, sizeof *res);
  ps s = {0};
  s.e = e;
  s.method = method ? method : "";
  s.budget = o && o->budget ? o->budget : 1000;
  s.progress = o ? o->progress && isatty(2) : 0;
  s.ev0 = gopt_pass_env_evals(e);
  s.np = gopt_pass_count();
  s.L = gopt_pass_env_max_steps(e);
  s.t0 = gopt_now();
  s.best_c = gopt_pass_env_initial_cost(e);
  s.err = err;
  search_rng_seed(&s.rng, o ? o->seed : 0, 0x7061737365735ULL);
  if (!(s.best = malloc((size_t)s.L * sizeof *s.best))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc;
  if (!strcmp(s.method, "random")) rc = ps_random(&s);
  else if (!strcmp(s.method, "greedy")) rc = ps_greedy(&s);
  else if (!strcmp(s.method, "genetic")) rc = ps_genetic(&s, "default");
  else rc = gopt_error_set(err, GOPT_EINVAL, "pass search: unknown method '%s' (random, greedy, genetic)", s.method);
  ps_print(&s, 1);
  if (rc) {
    free(s.best);
    return rc;
  }
  res->seq = s.best;
  res->n = s.best_n;
  res->cost = s.best_c;
  res->evals = ps_used(&s);
  res->seconds = gopt_now() - s.t0;
  res->interrupted = s.stopped;
  return 0;
}
