/* cmd_passes.c: `gopt passes MODEL [--order default|default-gpu|random|greedy|genetic|rl|LIST]
 * [--budget N] [--objective ops|time] [--seed S] [-o OUT] [--json] [--list]`: finds or takes a
 * pass order (gopt/passes.h: XLA's pipelines, the pass-environment searches, the learned policy),
 * runs it and reports the instruction count and simulated step time after each pass and the
 * result against the default order; -o writes the result (HLO text for .hlo, ONNX otherwise). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/onnx.h"
#include "gopt/passes.h"
#include "gopt/util.h"

static const char passes_help[] =
    "usage: gopt passes MODEL [--order ORDER] [--budget N] [--objective ops|time] [--seed S]\n"
    "                         [--max-steps N] [--cluster C] [--policy P.gpol] [-o OUT.hlo|OUT.onnx]\n"
    "                         [--verify] [--json] [--batch N] [--training] [--no-fold]\n"
    "       gopt passes --list\n"
    "  runs target-independent compiler passes (after XLA's) and reports the instruction count\n"
    "  (parameters, constants and ops over all computations) and the simulated step time after each\n"
    "  pass, and the result against XLA's default order.\n"
    "  --order default      XLA's CPU pipeline with the passes gopt has (its simplification group\n"
    "                       repeated until nothing changes, at most 25 rounds); also default-cpu\n"
    "          default-gpu  XLA's GPU pipeline, likewise\n"
    "          random       random search over pass sequences (--budget evaluations = pass runs)\n"
    "          greedy       the best next pass while one lowers the cost\n"
    "          genetic      a genetic search over sequences (seeded with the default order)\n"
    "          rl           the learned policy (--policy P.gpol, default the shipped passes.gpol)\n"
    "          A,B,C        each named pass once, in order (gopt passes --list shows them)\n"
    "  --budget N           evaluations (pass runs) for random/greedy/genetic (default 1000)\n"
    "  --objective ops|time the cost searches and rl minimise: instruction count (default) or the\n"
    "                       simulated step time on --cluster (default V100)\n"
    "  --max-steps N        longest sequence a search or the policy may emit (default 32)\n"
    "  --seed S             seeds every random choice (default 1)\n"
    "  --verify             also runs the module before and after on random inputs (from --seed) and\n"
    "                       checks that every output is unchanged (floats within 1e-5 + 1e-4\n"
    "                       relative); exit 1 when one differs; a module the executor cannot run is\n"
    "                       reported as not verified\n"
    "  Ctrl-C stops a search and keeps its best sequence so far.\n";

static int list_passes(void) {
  for (int i = 0; i < gopt_pass_count(); i++)
    printf("%2d  %-28s %s\n", i, gopt_pass_name(i), gopt_pass_description(i));
  return 0;
}

typedef struct pstep {
  int pass;
  size_t ops;
  double time;
} pstep;

typedef struct presult {
  const char *model, *order, *objective;
  size_t ops_before, ops_after, ops_default;
  double time_before, time_after, time_default;
  pstep *steps;
  size_t n;
  uint64_t evals;
  double seconds;
  int interrupted;
  int same;         /* gopt_exec_same_outputs, 2 when not asked */
  char verify[600]; /* its message */
} presult;

static const char *verdict(int same) {
  return same == 1 ? "verified" : same == 0 ? "outputs differ" : same == -1 ? "not verified (the module does not run)"
                                                                        : "not verified (the result does not run)";
}

static double pct(double before, double after) { return before > 0 ? 100.0 * (before - after) / before : 0; }

static int report_text(const presult *r) {
  printf("model %s, order %s: %zu -> %zu instructions (%.2f%% fewer), %zu passes\n", r->model, r->order,
         r->ops_before, r->ops_after, pct((double)r->ops_before, (double)r->ops_after), r->n);
  printf("default order: %zu instructions; this order: %.2f%% fewer than the default order\n",
         r->ops_default, pct((double)r->ops_default, (double)r->ops_after));
  printf("simulated step time %.4f ms -> %.4f ms (default order %.4f ms)\n", r->time_before * 1e3,
         r->time_after * 1e3, r->time_default * 1e3);
  if (r->same != 2) printf("%s: %s\n", verdict(r->same), r->verify);
  if (r->evals)
    printf("search: %llu evaluations, %.2f s%s\n", (unsigned long long)r->evals, r->seconds,
           r->interrupted ? " (interrupted: best so far)" : "");
  printf("%-4s %-28s %10s %12s\n", "#", "pass", "ops after", "time ms");
  size_t prev = r->ops_before;
  for (size_t i = 0; i < r->n; i++) {
    if (r->steps[i].ops != prev || r->n <= 40)
      printf("%-4zu %-28s %10zu %12.4f\n", i, gopt_pass_name(r->steps[i].pass), r->steps[i].ops, r->steps[i].time * 1e3);
    prev = r->steps[i].ops;
  }
  return 0;
}

static int report_json(const presult *r) {
  json_t *o = json_object(), *arr = json_array(), *seq = json_array();
  json_object_set_new(o, "model", json_string(r->model));
  json_object_set_new(o, "order", json_string(r->order));
  json_object_set_new(o, "objective", json_string(r->objective));
  json_object_set_new(o, "ops_before", json_integer((json_int_t)r->ops_before));
  json_object_set_new(o, "ops_after", json_integer((json_int_t)r->ops_after));
  json_object_set_new(o, "ops_default", json_integer((json_int_t)r->ops_default));
  json_object_set_new(o, "reduction_pct", json_real(pct((double)r->ops_before, (double)r->ops_after)));
  json_object_set_new(o, "reduction_vs_default_pct", json_real(pct((double)r->ops_default, (double)r->ops_after)));
  json_object_set_new(o, "time_before", json_real(r->time_before));
  json_object_set_new(o, "time_after", json_real(r->time_after));
  json_object_set_new(o, "time_default", json_real(r->time_default));
  json_object_set_new(o, "evaluations", json_integer((json_int_t)r->evals));
  json_object_set_new(o, "search_seconds", json_real(r->seconds));
  json_object_set_new(o, "interrupted", json_boolean(r->interrupted));
  if (r->same != 2) {
    json_object_set_new(o, "verified", r->same == 1 ? json_true() : r->same == 0 ? json_false() : json_null());
    json_object_set_new(o, "verify_note", json_string(r->verify));
  }
  for (size_t i = 0; i < r->n; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "pass", json_string(gopt_pass_name(r->steps[i].pass)));
    json_object_set_new(e, "ops_after", json_integer((json_int_t)r->steps[i].ops));
    json_object_set_new(e, "time_after", json_real(r->steps[i].time));
    json_array_append_new(arr, e);
    json_array_append_new(seq, json_string(gopt_pass_name(r->steps[i].pass)));
  }
  json_object_set_new(o, "sequence", seq);
  json_object_set_new(o, "steps", arr);
  char *txt = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!txt) return 1;
  puts(txt);
  free(txt);
  return 0;
}

/* The pass sequence of a pipeline spec (XLA's default orders), malloc'd into *seq. */
static int pipeline_seq(const char *spec, const gopt_graph *g, int **seq, size_t *n, gopt_error *err) {
  gopt_graph *h = NULL;
  gopt_pipeline_step *st = NULL;
  int rc = gopt_pipeline_run(spec, g, &h, &st, n, err);
  gopt_graph_free(h);
  if (rc) return rc;
  *seq = malloc((*n ? *n : 1) * sizeof **seq);
  if (!*seq) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < *n; i++) (*seq)[i] = st[i].pass;
  free(st);
  return rc;
}

/* Runs seq on g measuring every step (r->steps), the result into *out. */
static int replay(gopt_pass_env *e, const gopt_graph *g, const int *seq, size_t n, presult *r,
                  gopt_graph **out, gopt_error *err) {
  gopt_graph *cur = gopt_graph_clone(g);
  r->steps = calloc(n ? n : 1, sizeof *r->steps);
  if (!cur || !r->steps) {
    gopt_graph_free(cur);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    gopt_graph *h = NULL;
    int rc = gopt_pass_run(seq[i], cur, &h, NULL, err);
    if (!rc) rc = gopt_pass_env_measure(e, h, NULL, &r->steps[i].ops, &r->steps[i].time, err);
    gopt_graph_free(cur);
    cur = h;
    if (rc) return rc;
    r->steps[i].pass = seq[i];
    r->n = i + 1;
  }
  *out = cur;
  return 0;
}

typedef struct popts {
  const char *model, *out, *order, *cluster, *policy;
  long budget, seed, max_steps;
  int json, objective, verify, has_budget;
  cli_model_opts mo;
} popts;

/* Finds the sequence for p->order on env e (searches and rl) or from the pipeline/list. */
static int find_seq(const popts *p, gopt_pass_env *e, const gopt_graph *g, int **seq, size_t *n,
                    presult *r, gopt_error *err) {
  const char *o = p->order;
  if (!strcmp(o, "random") || !strcmp(o, "greedy") || !strcmp(o, "genetic")) {
    gopt_pass_search_opts so = {(uint64_t)p->budget, (uint64_t)p->seed, 1};
    gopt_pass_search_result sr;
    cli_task_sigint(1);
    int rc = gopt_pass_search(e, o, &so, &sr, err);
    cli_task_sigint(0);
    if (rc) return rc;
    *seq = sr.seq;
    *n = sr.n;
    r->evals = sr.evals;
    r->seconds = sr.seconds;
    r->interrupted = sr.interrupted;
    return 0;
  }
  if (!strcmp(o, "rl")) { /* the greedy episode, then sampled ones while --budget lasts */
    char path[1200];
    gopt_seq_policy *pol = NULL;
    gopt_pass_search_result sr;
    int rc = 0;
    if (p->policy) snprintf(path, sizeof path, "%s", p->policy);
    else rc = gopt_seq_find_policy("passes", NULL, path, sizeof path, err);
    if (!rc) rc = gopt_pass_rl_policy_load(path, &pol, err);
    cli_task_sigint(1);
    if (!rc) rc = gopt_pass_rl_order(pol, e, p->has_budget ? (uint64_t)p->budget : 0, (uint64_t)p->seed, &sr, err);
    cli_task_sigint(0);
    gopt_seq_policy_free(pol);
    if (rc) return rc;
    *seq = sr.seq;
    *n = sr.n;
    r->evals = sr.evals;
    r->seconds = sr.seconds;
    r->interrupted = sr.interrupted;
    return 0;
  }
  return pipeline_seq(o, g, seq, n, err);
}

static int parse_args(int argc, char **argv, popts *p) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int mf;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(passes_help, stdout);
      return 0;
    } else if (!strcmp(a, "--list")) {
      return list_passes();
    } else if (!strcmp(a, "--json")) {
      p->json = 1;
    } else if (!strcmp(a, "--verify")) {
      p->verify = 1;
    } else if (!strcmp(a, "--order") || !strcmp(a, "-o") || !strcmp(a, "--cluster") || !strcmp(a, "--policy") ||
               !strcmp(a, "--objective")) {
      if (i + 1 >= argc) return cli_usage_error("passes", "%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "-o")) p->out = v;
      else if (!strcmp(a, "--order")) p->order = v;
      else if (!strcmp(a, "--cluster")) p->cluster = v;
      else if (!strcmp(a, "--policy")) p->policy = v;
      else if (!strcmp(v, "ops") || !strcmp(v, "time")) p->objective = !strcmp(v, "time") ? GOPT_PASS_OBJ_TIME : GOPT_PASS_OBJ_OPS;
      else return cli_usage_error("passes", "--objective: '%s' is not ops or time", v);
    } else if (!strcmp(a, "--budget") || !strcmp(a, "--seed") || !strcmp(a, "--max-steps")) {
      if (i + 1 >= argc) return cli_usage_error("passes", "%s needs a value", a);
      p->has_budget |= !strcmp(a, "--budget");
      long *dst = !strcmp(a, "--budget") ? &p->budget : !strcmp(a, "--seed") ? &p->seed : &p->max_steps;
      if (cli_parse_long("passes", a, argv[++i], !strcmp(a, "--seed") ? 0 : 1,
                         !strcmp(a, "--max-steps") ? 4096 : 2000000000L, dst))
        return 2;
    } else if ((mf = cli_model_flag("passes", argc, argv, &i, &p->mo)) != 0) {
      if (mf < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("passes", "unknown flag '%s' (see gopt passes --help)", a);
    } else if (p->model) {
      return cli_usage_error("passes", "more than one MODEL given");
    } else {
      p->model = a;
    }
  }
  if (!p->model) return cli_usage_error("passes", "missing MODEL (see gopt passes --help)");
  static const char *const named[] = {"default", "default-cpu", "default-gpu", "random", "greedy", "genetic", "rl", NULL};
  for (const char *const *k = named; *k; k++)
    if (!strcmp(p->order, *k)) return -1;
  char *l = strdup(p->order), *save = NULL; /* a list: check the names before loading */
  for (char *t = l ? strtok_r(l, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
    if (gopt_pass_find(t) < 0) {
      cli_usage_error("passes", "--order: unknown pass or order '%s' (gopt passes --list shows the passes)", t);
      free(l);
      return 2;
    }
  free(l);
  return -1;
}

int cli_passes(int argc, char **argv) {
  popts p = {0};
  p.order = "default";
  p.seed = 1;
  int rc = parse_args(argc, argv, &p);
  if (rc >= 0) return rc;
  gopt_graph *g = cli_load_model(p.model, &p.mo), *h = NULL;
  if (!g) return 1;
  gopt_error err = {0};
  gopt_pass_env *e = NULL;
  gopt_pass_env_opts eo = {p.objective, (int)p.max_steps, p.cluster, "default"};
  int *seq = NULL;
  size_t n = 0;
  presult r = {0};
  r.model = p.model;
  r.order = p.order;
  r.objective = p.objective == GOPT_PASS_OBJ_TIME ? "time" : "ops";
  rc = gopt_pass_env_new(g, &eo, &e, &err);
  if (!rc) rc = find_seq(&p, e, g, &seq, &n, &r, &err);
  if (!rc) rc = gopt_pass_env_measure(e, g, NULL, &r.ops_before, &r.time_before, &err);
  gopt_graph *dg = NULL; /* the default order's result */
  if (!rc) rc = gopt_pipeline_run("default", g, &dg, NULL, NULL, &err);
  if (!rc) rc = gopt_pass_env_measure(e, dg, NULL, &r.ops_default, &r.time_default, &err);
  if (!rc) rc = replay(e, g, seq, n, &r, &h, &err);
  if (!rc) rc = gopt_pass_env_measure(e, h, NULL, &r.ops_after, &r.time_after, &err);
  r.same = 2;
  if (!rc && p.verify) /* outputs before and after on the same random inputs */
    r.same = gopt_exec_same_outputs(g, h, (uint64_t)p.seed, 1e-4, 1e-5, r.verify, sizeof r.verify);
  if (!rc) rc = p.json ? report_json(&r) : report_text(&r);
  else fprintf(stderr, "gopt passes: %s\n", err.msg);
  if (!rc && p.out) {
    size_t ol = strlen(p.out);
    int hlo = ol > 4 && !strcmp(p.out + ol - 4, ".hlo");
    if ((hlo ? gopt_hlo_save(h, p.out, &err) : gopt_onnx_save(h, p.out, &err))) {
      fprintf(stderr, "gopt passes: %s\n", err.msg);
      rc = 1;
    }
  }
  free(seq);
  free(r.steps);
  gopt_graph_free(dg);
  gopt_pass_env_free(e);
  gopt_graph_free(g);
  gopt_graph_free(h);
  return rc || r.same == 0 ? 1 : 0;
}
