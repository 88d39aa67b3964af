/* bench_fusion_inproc.c: fusion plans of one model compared inside one process, step by step
 * (issue 29, docs/BENCHMARKS.md "Host fusion", fifth round). Every PLAN (none: the executor's own
 * plan; auto: --fusion auto; or a decisions file with "fusion" groups) gets its own executor, one
 * thread, default layouts. Each round runs the plans in a shuffled order (seeded), each as
 * gopt_exec_profile_run_mode(CONTEXT, warmup 1, REPS): its end-to-end median CPU time and every
 * step's time inside those runs. Statements are per-round paired against the first plan: the
 * median ratio (first / other) and per step the median difference (first - other, µs), each with
 * a distribution-free 95 % interval of the median (order statistics of binomial(ROUNDS, 1/2), as
 * bench_fusion.py). Steps are matched by their head node's name (a fused group's first member).
 * Listing a plan twice gives an A/A pair: two executors of the same steps, whose difference is
 * where their buffers and weights landed in memory, not what they compute. The executor built
 * first (the first PLAN) is not like the others: its weight copies land where malloc puts a
 * fresh process's, and its weight-streaming steps (1x1 convolutions on a 1x1 map) differ from
 * every later executor's by 5-25 us, of either sign (docs/BENCHMARKS.md "Host fusion", sixth
 * round); list the plans in alternation and compare executors beyond the first too.
 * Usage: bench_fusion_inproc MODEL [--rounds N] [--reps K] [--seed S] [--min-us U] PLAN...
 * Prints the plans' lines, then the steps whose difference to the first plan's is shown (interval
 * off 0) and at least U µs (default 2) in its median, or that one of the two plans lacks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/decisions.h"
#include "gopt/exec.h"
#include "gopt/graph.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

enum { MAX_PLANS = 8 };

typedef struct plan {
  const char *name;
  gopt_decisions dec;
  int have_dec;
  int32_t *auto_group;
  gopt_exec *x;
  size_t n_steps;
  const char **step_name; /* head node name per step */
  double *run;            /* [round]: median seconds of the round's runs */
  double *step;           /* [step * rounds + round]: seconds */
} plan;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorted in place) and its 95 % order-statistic interval [*lo, *hi]. */
static double median_ci(double *v, int n, double *lo, double *hi) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int best = 1;
  for (int k = 1; k <= n / 2; k++) {
    double cover = 0;
    for (int i = k; i <= n - k; i++)
      cover += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    if (cover >= 0.95) best = k;
  }
  *lo = v[best - 1];
  *hi = v[n - best];
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Builds p's executor on g (plan name none|auto|decisions file). 0 or -1 (printed). */
static int plan_open(plan *p, const gopt_graph *g, int rounds) {
  gopt_error err = {0};
  gopt_exec_opts eo = {.threads = 1, .layouts = GOPT_EXEC_LAYOUT_AUTO};
  if (!strcmp(p->name, "auto")) {
    if (!(p->auto_group = malloc((g->nodes.n + 1) * sizeof *p->auto_group))) return -1;
    gopt_exec_auto_fusion(g, p->auto_group);
    eo.group = p->auto_group;
  } else if (strcmp(p->name, "none")) {
    gopt_decisions_init(&p->dec, g);
    p->have_dec = 1;
    if (gopt_decisions_load(&p->dec, g, p->name, &err)) {
      fprintf(stderr, "bench_fusion_inproc: %s\n", err.msg);
      return -1;
    }
    if (!p->dec.group) {
      fprintf(stderr, "bench_fusion_inproc: %s: the file has no \"fusion\" groups\n", p->name);
      return -1;
    }
    eo.group = p->dec.group;
  }
  if (gopt_exec_new(g, &eo, &p->x, NULL, &err) || gopt_exec_random_inputs(p->x, 0, &err)) {
    fprintf(stderr, "bench_fusion_inproc: %s: %s\n", p->name, err.msg);
    return -1;
  }
  p->n_steps = gopt_exec_n_steps(p->x);
  p->step_name = calloc(p->n_steps + 1, sizeof *p->step_name);
  p->run = calloc((size_t)rounds, sizeof *p->run);
  p->step = calloc(p->n_steps * (size_t)rounds + 1, sizeof *p->step);
  return p->step_name && p->run && p->step ? 0 : -1;
}

static void plan_close(plan *p) {
  gopt_exec_free(p->x);
  if (p->have_dec) gopt_decisions_clear(&p->dec);
  free(p->auto_group);
  free(p->step_name);
  free(p->run);
  free(p->step);
}

/* One round of plan p: its run median and step times into slot r. 0 or -1 (printed). */
static int plan_round(plan *p, const gopt_graph *g, int reps, int r, int rounds) {
  gopt_error err = {0};
  gopt_exec_profile prof;
  if (gopt_exec_profile_run_mode(p->x, 1, reps, GOPT_EXEC_PROFILE_CONTEXT, NULL, &prof, &err)) {
    fprintf(stderr, "bench_fusion_inproc: %s: %s\n", p->name, err.msg);
    return -1;
  }
  p->run[r] = prof.seconds;
  for (size_t s = 0; s < prof.n_steps && s < p->n_steps; s++) {
    p->step_name[s] = gopt_node_name(g, prof.steps[s].node);
    p->step[s * (size_t)rounds + (size_t)r] = prof.steps[s].seconds;
  }
  gopt_exec_profile_clear(&prof);
  return 0;
}

/* Step index of p whose head node is called name, or -1. */
static long find_step(const plan *p, const char *name) {
  for (size_t s = 0; s < p->n_steps; s++)
    if (p->step_name[s] && !strcmp(p->step_name[s], name)) return (long)s;
  return -1;
}

/* Prints the steps of a and b (matched by name) whose paired difference is shown. */
static void report_steps(const plan *a, const plan *b, int rounds, double min_us, double *d) {
  for (int pass = 0; pass < 2; pass++) {
    const plan *p = pass ? b : a, *q = pass ? a : b;
    for (size_t s = 0; s < p->n_steps; s++) {
      long t = find_step(q, p->step_name[s]);
      if (pass && t >= 0) continue; /* matched steps are printed in the first pass */
      for (int r = 0; r < rounds; r++) {
        double va = p->step[s * (size_t)rounds + (size_t)r], vb = t >= 0 ? q->step[(size_t)t * rounds + r] : 0;
        d[r] = 1e6 * (pass ? vb - va : va - vb);
      }
      double lo, hi, m = median_ci(d, rounds, &lo, &hi);
      if (t >= 0 && !(fabs(m) >= min_us && (lo > 0 || hi < 0))) continue;
      printf("  %-64s %s - %s: %+8.1f us [%+8.1f, %+8.1f]%s\n", p->step_name[s], a->name, b->name, m, lo, hi,
             t >= 0 ? "" : pass ? " (only in the second)" : " (only in the first)");
    }
  }
}

int main(int argc, char **argv) {
  int rounds = 101, reps = 3, n = 0, rc = 1;
  unsigned long long seed = 1;
  double min_us = 2;
  const char *model = NULL;
  plan p[MAX_PLANS];
  memset(p, 0, sizeof p);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--min-us") && i + 1 < argc) min_us = atof(argv[++i]);
    else if (!model) model = argv[i];
    else if (n < MAX_PLANS) p[n++].name = argv[i];
    else return fprintf(stderr, "bench_fusion_inproc: at most %d plans\n", MAX_PLANS), 2;
  }
  if (!model || n < 2 || rounds < 6 || reps < 1) {
    fprintf(stderr, "usage: bench_fusion_inproc MODEL [--rounds N>=6] [--reps K] [--seed S] [--min-us U] "
                    "PLAN PLAN...\n");
    return 2;
  }
  gopt_error err = {0};
  gopt_graph *g = NULL;
  double *d = malloc((size_t)rounds * sizeof *d);
  if (!d || gopt_onnx_load(model, NULL, &g, &err)) goto fail;
  const char *sym = gopt_graph_batch_symbol(g);
  if (sym) gopt_graph_bind_symbol(g, sym, 1);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  if (gopt_infer_shapes(g, &io, &err)) goto fail;
  for (int i = 0; i < n; i++)
    if (plan_open(&p[i], g, rounds)) goto done;
  for (int r = 0; r < rounds; r++) {
    int order[MAX_PLANS];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates from the seed */
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      int j = (int)((seed >> 33) % (unsigned long long)(i + 1)), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    for (int i = 0; i < n; i++)
      if (plan_round(&p[order[i]], g, reps, r, rounds)) goto done;
  }
  printf("%s: %d rounds x %d runs per plan, 1 thread, CPU time; ratios and differences are %s vs each plan, "
         "per round\n", model, rounds, reps, p[0].name);
  for (int i = 0; i < n; i++) {
    double lo, hi;
    for (int r = 0; r < rounds; r++) d[r] = p[i].run[r];
    double ms = 1e3 * median_ci(d, rounds, &lo, &hi);
    for (int r = 0; r < rounds; r++) d[r] = p[0].run[r] / p[i].run[r];
    double m = median_ci(d, rounds, &lo, &hi);
    printf("plan %d %s: %zu steps, median %.3f ms; %s / this %.4f [%.4f, %.4f]\n", i, p[i].name, p[i].n_steps, ms,
           p[0].name, m, lo, hi);
  }
  for (int i = 1; i < n; i++) report_steps(&p[0], &p[i], rounds, min_us, d);
  rc = 0;
  goto done;
fail:
  fprintf(stderr, "bench_fusion_inproc: %s: %s\n", model, err.msg);
done:
  for (int i = 0; i < n; i++) plan_close(&p[i]);
  gopt_graph_free(g);
  free(d);
  return rc;
}
