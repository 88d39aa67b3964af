/* cmd_compare.c: `gopt compare MODEL --task T --cluster C`: runs every applicable heuristic
 * baseline and search method on the same model, task and evaluation budget and prints one table
 * (objective, improvement over the compiler's default heuristic, evaluations, time, the searches'
 * start) and the best row in the hard memory ranking, with the learned policy "go" as a row when
 * one is found for the task; the search methods start from --start
 * (default: the best of the default and the baselines, its evaluations counted in each search's
 * budget); --json adds each search's curve; --plot writes an SVG of best objective vs evaluations
 * for the search methods, with the baselines as horizontal lines. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/baselines.h"
#include "gopt/search.h"
#include "gopt/task.h"
#include "gopt/util.h"

static const char cmp_help[] =
    "usage: gopt compare MODEL --task T --cluster C [--budget N] [--seconds S] [--seed S]\n"
    "                    [--threads N] [--methods a,b,...] [--start S] [--json] [--plot FILE.svg] [--batch N]\n"
    "                    [--training]\n"
    "  runs every baseline of the task and every applicable search method with the same budget\n"
    "  --budget N     evaluations per search method, its start's included (default 1000)\n"
    "  --start S      where the search methods start: best (default: the best of the default and\n"
    "                 the task's baselines, their evaluations counted in the budget), default, a\n"
    "                 baseline name, or a decisions file\n"
    "  --methods L    comma-separated subset (baselines, composite baselines, search methods)\n"
    "  --plot F       SVG of best objective vs evaluations (search methods; baselines as lines)\n"
    "  --policy P     the learned method go's policy (default: the shipped policies/<task>.gpol;\n"
    "                 go is listed as skipped when there is none)\n"
    "  --samples K    go: decision samples besides the greedy one (default 16)\n"
    "  --finetune N   go: fine-tune the policy on this graph for N evaluations (default: zero-shot)\n";

typedef struct curve {
  double *ev, *best;
  size_t n, cap;
  uint64_t offset; /* evaluations spent before the search (choosing its start) */
} curve;

static void on_improve(uint64_t evals, double seconds, double best, void *user) {
  (void)seconds;
  curve *c = user;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 64;
    double *a = realloc(c->ev, cap * sizeof *a);
    if (!a) return;
    c->ev = a;
    double *b = realloc(c->best, cap * sizeof *b);
    if (!b) return;
    c->best = b;
    c->cap = cap;
  }
  c->ev[c->n] = (double)(evals + c->offset);
  c->best[c->n++] = best;
}

typedef struct row {
  char name[96];
  int kind;               /* CLI_METHOD_BASELINE, _SEARCH or _LEARNED */
  cli_task_run run;
  curve cv;
  int done;
  size_t failed;          /* 1 + its line in skipped when it failed */
} row;

static const char *kind_name(int kind) {
  return kind == CLI_METHOD_SEARCH ? "search" : kind == CLI_METHOD_LEARNED ? "learned" : "baseline";
}

/* The table's start column: a search's start, the learned method's mode, "-" for a baseline. */
static const char *start_col(int kind, const cli_task_flags *f, const cli_task_start *st) {
  if (kind == CLI_METHOD_SEARCH) return st->info.name;
  if (kind == CLI_METHOD_LEARNED) return f->finetune ? "policy+finetune" : "policy (zero-shot)";
  return "-";
}

/* The curve as [[evaluations, best], ...]. */
static json_t *curve_json(const curve *cv) {
  json_t *a = json_array();
  for (size_t k = 0; k < cv->n; k++) {
    json_t *p = json_array();
    json_array_append_new(p, json_integer((json_int_t)cv->ev[k]));
    json_array_append_new(p, json_real(cv->best[k]));
    json_array_append_new(a, p);
  }
  return a;
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf"};

/* Appends printf output to a growing buffer; returns -1 on out of memory. */
typedef struct sbuf {
  char *s;
  size_t n, cap;
} sbuf;
static int sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sb_printf(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return -1;
    if (b->s && b->n + (size_t)k < b->cap) {
      b->n += (size_t)k;
      return 0;
    }
    size_t cap = (b->cap ? 2 * b->cap : 4096) + (size_t)k;
    char *s = realloc(b->s, cap);
    if (!s) return -1;
    b->s = s;
    b->cap = cap;
  }
}

static void xml_text(sbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '<') sb_printf(b, "&lt;");
    else if (*s == '>') sb_printf(b, "&gt;");
    else if (*s == '&') sb_printf(b, "&amp;");
    else sb_printf(b, "%c", *s);
  }
}

/* Best objective vs evaluations: one step line per search method, a dashed line per baseline. */
static int write_plot(const char *path, const char *title, int task, const row *rows, size_t nr,
                      double dflt, double budget, gopt_error *err) {
  const double W = 860, H = 520, L = 90, R = 230, T = 50, B = 60;
  double ymin = dflt, ymax = dflt, xmax = budget > 1 ? budget : 1;
  for (size_t i = 0; i < nr; i++) {
    if (!rows[i].done) continue;
    ymin = fmin(ymin, rows[i].run.r.objective);
    ymax = fmax(ymax, rows[i].run.r.objective);
    for (size_t k = 0; k < rows[i].cv.n; k++) {
      ymin = fmin(ymin, rows[i].cv.best[k]);
      ymax = fmax(ymax, rows[i].cv.best[k]);
      xmax = fmax(xmax, rows[i].cv.ev[k]);
    }
    if (rows[i].kind != CLI_METHOD_BASELINE) xmax = fmax(xmax, (double)rows[i].run.evals);
  }
  if (!(ymax > ymin)) {
    ymax = ymin * 1.01 + 1e-12;
    ymin = ymin * 0.99;
  }
  double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;
  double scale = task == GOPT_TASK_MEMORY ? 1e-6 : 1e3;
  const char *unit = task == GOPT_TASK_MEMORY ? "peak memory (MB)" : "step time (ms)";
#define PX(v) (L + (v) / xmax * (W - L - R))
#define PY(v) (T + (ymax - (v)) / (ymax - ymin) * (H - T - B))
  sbuf b = {0};
  sb_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
  sb_printf(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">", L);
  xml_text(&b, title);
  sb_printf(&b, "</text>\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
            L, T, W - L - R, H - T - B);
  for (int k = 0; k <= 5; k++) {
    double xv = xmax * k / 5, yv = ymin + (ymax - ymin) * k / 5;
    sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PX(xv), (double)T, PX(xv), H - B);
    sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", PX(xv), H - B + 18, xv);
    sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, PY(yv), W - R, PY(yv));
    sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 6, PY(yv) + 4, yv * scale);
  }
  sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">evaluations</text>\n", (L + W - R) / 2, H - 16);
  sb_printf(&b, "<text transform=\"translate(20,%.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            (T + H - B) / 2, unit);
  /* the default heuristic and the baselines */
  double ly = T + 10;
  sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"2,3\"/>\n",
            L, PY(dflt), W - R, PY(dflt));
  sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">default heuristic</text>\n", W - R + 10, ly);
  sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"2,3\"/>\n",
            W - R + 150, ly - 4, W - R + 200, ly - 4);
  ly += 18;
  int ci = 0;
  for (size_t i = 0; i < nr; i++) {
    if (!rows[i].done || rows[i].kind != CLI_METHOD_BASELINE) continue;
    double y = rows[i].run.r.objective;
    sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"6,4\"/>\n",
              L, PY(y), W - R, PY(y));
    sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">", W - R + 10, ly);
    xml_text(&b, rows[i].name);
    sb_printf(&b, " %.4g</text>\n", y * scale);
    ly += 16;
  }
  ly += 8;
  for (size_t i = 0; i < nr; i++) {
    if (!rows[i].done || rows[i].kind == CLI_METHOD_BASELINE) continue;
    const char *col = palette[ci++ % (int)(sizeof palette / sizeof palette[0])];
    const curve *cv = &rows[i].cv;
    sb_printf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    double prev = cv->n ? cv->best[0] : rows[i].run.r.objective;
    sb_printf(&b, "%.1f,%.1f", PX(cv->n ? cv->ev[0] : 0), PY(prev));
    for (size_t k = 1; k < cv->n; k++) {
      sb_printf(&b, " %.1f,%.1f %.1f,%.1f", PX(cv->ev[k]), PY(prev), PX(cv->ev[k]), PY(cv->best[k]));
      prev = cv->best[k];
    }
    sb_printf(&b, " %.1f,%.1f\"/>\n", PX(fmax((double)rows[i].run.evals, cv->n ? cv->ev[cv->n - 1] : 0)), PY(prev));
    sb_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
              W - R + 150, ly - 4, W - R + 200, ly - 4, col);
    sb_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">", W - R + 10, ly);
    xml_text(&b, rows[i].name);
    sb_printf(&b, "</text>\n");
    ly += 18;
  }
  if (sb_printf(&b, "</svg>\n")) {
    free(b.s);
    return gopt_error_set(err, GOPT_ENOMEM, "--plot: out of memory");
  }
#undef PX
#undef PY
  int rc = gopt_file_write_atomic(path, b.s, b.n, err);
  free(b.s);
  return rc;
}

/* Under mpirun: every row's outcome (result, or failure line) from the rank that ran it to all
 * (rank 0 prints the table). The curves of other ranks' rows are not sent (plots show rank 0's). */
static int compare_gather(row *rows, size_t nr, char (*skipped)[320], size_t *nskip) {
  for (size_t i = 0; i < nr; i++) {
    int owner = (int)(i % (size_t)cli_mpi_size()), mine = owner == cli_mpi_rank();
    struct { int done; cli_task_run run; char msg[320]; } m;
    memset(&m, 0, sizeof m);
    m.done = rows[i].done;
    m.run = rows[i].run;
    if (mine && rows[i].failed) memcpy(m.msg, skipped[rows[i].failed - 1], sizeof m.msg);
    if (cli_mpi_bcast(&m, sizeof m, owner)) return 1;
    if (mine) continue;
    rows[i].done = m.done;
    rows[i].run = m.run;
    if (!m.done && m.msg[0]) memcpy(skipped[(*nskip)++], m.msg, sizeof m.msg);
  }
  return 0;
}

int cli_compare(int argc, char **argv) {
  cli_task_flags f;
  memset(&f, 0, sizeof f);
  const char *methods = NULL, *plot = NULL;
  const cli_task_extra extra[] = {{"--methods", &methods}, {"--plot", &plot}};
  int task;
  int arc = cli_task_args("compare", cmp_help, argc, argv, extra, sizeof extra / sizeof extra[0], &f,
                          &task);
  if (arc >= 0) return arc;
  if (methods && !*methods) return cli_usage_error("compare", "--methods: empty list");

  /* the method list */
  size_t cap = gopt_baseline_task_count(task) + gopt_search_method_count() + 64, nr = 0;
  row *rows = calloc(cap, sizeof *rows);
  char (*skipped)[320] = calloc(cap, sizeof *skipped);
  size_t nskip = 0;
  if (!rows || !skipped) {
    free(rows);
    free(skipped);
    fprintf(stderr, "gopt compare: out of memory\n");
    return 1;
  }
  char list[1024];
  int rc = 2;
  if (methods) {
    const char *s = methods;
    while (*s) {
      const char *end = strchr(s, ',');
      size_t len = end ? (size_t)(end - s) : strlen(s);
      if (!len || len >= sizeof rows[0].name || nr == cap) {
        cli_usage_error("compare", "--methods: bad entry in '%s'", methods);
        goto early;
      }
      memcpy(rows[nr].name, s, len);
      rows[nr].name[len] = 0;
      if (!(rows[nr].kind = cli_task_method_kind(rows[nr].name))) {
        cli_usage_error("compare", "--methods: unknown method '%s' (%s)", rows[nr].name,
                        cli_task_methods_text(task, list, sizeof list));
        goto early;
      }
      nr++;
      s = end ? end + 1 : s + len;
    }
  } else {
    for (size_t i = 0; i < gopt_baseline_task_count(task); i++, nr++) {
      snprintf(rows[nr].name, sizeof rows[nr].name, "%s", gopt_baseline_task_name(task, i));
      rows[nr].kind = CLI_METHOD_BASELINE;
    }
    for (size_t i = 0; i < gopt_search_method_count(); i++, nr++) {
      snprintf(rows[nr].name, sizeof rows[nr].name, "%s", gopt_search_method_name(i));
      rows[nr].kind = CLI_METHOD_SEARCH;
    }
    /* the learned policy when there is one for the task (--policy or the shipped one) */
    char pp[4096];
    gopt_error perr = {0};
    if (!cli_task_policy_path(&f, task, pp, sizeof pp, &perr)) {
      snprintf(rows[nr].name, sizeof rows[nr].name, "go");
      rows[nr++].kind = CLI_METHOD_LEARNED;
    } else {
      snprintf(skipped[nskip++], sizeof skipped[0], "go (%.280s)", perr.msg);
    }
  }

  rc = 1;
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_graph *g = NULL;
  gopt_env *e = NULL;
  gopt_env_ws *w = NULL;
  double *x = NULL;
  cli_task_start start;
  memset(&start, 0, sizeof start);
  if (cli_task_env("compare", &f, task, &c, &g, &e)) goto done;
  /* applicability: an explicitly asked method must apply; from the full list, skip with reason */
  size_t k = 0;
  for (size_t i = 0; i < nr; i++) {
    const char *why = NULL;
    if (cli_task_applicable(rows[i].name, e, &why)) {
      if (k != i) rows[k] = rows[i];
      k++;
      continue;
    }
    if (methods) {
      rc = cli_task_not_applicable("compare", rows[i].name, f.task, why);
      goto done;
    }
    snprintf(skipped[nskip++], sizeof skipped[0], "%s (%s)", rows[i].name, why ? why : "not applicable");
  }
  nr = k;
  size_t nv = gopt_env_nvars(e);
  x = calloc(nv + 1, sizeof *x);
  w = gopt_env_ws_new(e);
  if (!x || !w) {
    fprintf(stderr, "gopt compare: out of memory\n");
    goto done;
  }
  gopt_env_result rd;
  if (cli_task_default("compare", e, w, x, &rd)) goto done;
  uint64_t budget = cli_task_budget(&f);
  int tty = isatty(STDERR_FILENO);
  int any_search = 0;
  for (size_t i = 0; i < nr; i++) any_search |= rows[i].kind == CLI_METHOD_SEARCH;
  if (any_search && (rc = cli_task_start_resolve("compare", &f, e, &start))) goto done;
  rc = 1;
  cli_task_sigint(1);
  cli_mpi_islands = 0; /* under mpirun the methods are spread over the ranks (row i on rank i % P) */
  for (size_t i = 0; i < nr && !cli_task_interrupted(); i++) {
    if ((int)(i % (size_t)cli_mpi_size()) != cli_mpi_rank()) continue;
    gopt_search_opts so;
    cli_task_search_opts(&f, tty, &so);
    so.on_improve = on_improve;
    so.user = &rows[i].cv;
    rows[i].cv.offset = rows[i].kind == CLI_METHOD_SEARCH ? start.info.evals : 0;
    if (tty) fprintf(stderr, "gopt compare: %s ...\n", rows[i].name);
    if (cli_task_run_method(rows[i].name, e, &f, &so, rows[i].kind == CLI_METHOD_SEARCH ? &start : NULL, x,
                            &rows[i].run, &err)) {
      /* one failing method does not lose the others: it is listed with its error */
      fprintf(stderr, "gopt compare: warning: %s: %s\n", rows[i].name, err.msg);
      snprintf(skipped[nskip++], sizeof skipped[0], "%s (failed: %.150s)", rows[i].name, err.msg);
      rows[i].failed = nskip;
      continue;
    }
    rows[i].done = 1;
  }
  cli_task_sigint(0);
  if (cli_mpi_size() > 1 && compare_gather(rows, nr, skipped, &nskip)) {
    fprintf(stderr, "gopt compare: MPI broadcast of the results failed\n");
    goto done;
  }

  /* the best method: fitting in memory first, then the lower objective (gopt_env_result_cmp) */
  size_t best = nr;
  for (size_t i = 0; i < nr; i++)
    if (rows[i].done && (best == nr || gopt_env_result_better(&rows[i].run.r, &rows[best].run.r))) best = i;
  char title[256];
  if (budget)
    snprintf(title, sizeof title, "%s: %s task on %s, %llu evaluations per search method", f.model, f.task,
             c->name, (unsigned long long)budget);
  else
    snprintf(title, sizeof title, "%s: %s task on %s, %g s per search method", f.model, f.task, c->name, f.seconds);
  if (f.json) {
    json_t *o = cli_task_json_head(&f, g, c), *jr = json_array(), *js = json_array();
    json_object_set_new(o, "budget", json_integer((json_int_t)budget));
    json_object_set_new(o, "seed", json_integer(f.seed));
    json_object_set_new(o, "objective_unit", json_string(task == GOPT_TASK_MEMORY ? "bytes" : "seconds"));
    json_object_set_new(o, "default_objective", json_real(rd.objective));
    for (size_t i = 0; i < nr; i++) {
      if (!rows[i].done) continue;
      json_t *r = json_object();
      const cli_task_run *u = &rows[i].run;
      json_object_set_new(r, "method", json_string(rows[i].name));
      json_object_set_new(r, "kind", json_string(kind_name(rows[i].kind)));
      json_object_set_new(r, "objective", json_real(u->r.objective));
      json_object_set_new(r, "improvement_pct",
                          json_real(rd.objective > 0 ? 100 * (rd.objective - u->r.objective) / rd.objective : 0));
      json_object_set_new(r, "step_time_s", json_real(u->r.step_time));
      json_object_set_new(r, "peak_mem_bytes", json_real(u->r.peak_mem));
      json_object_set_new(r, "feasible", json_boolean(u->r.feasible));
      json_object_set_new(r, "evaluations", json_integer((json_int_t)u->evals));
      json_object_set_new(r, "seconds", json_real(u->seconds));
      json_object_set_new(r, "optimal", json_boolean(u->optimal));
      json_object_set_new(r, "interrupted", json_boolean(u->interrupted));
      if (rows[i].kind == CLI_METHOD_SEARCH) {
        json_object_set_new(r, "start", json_string(start.info.name));
        json_object_set_new(r, "start_evaluations", json_integer((json_int_t)start.info.evals));
      }
      if (rows[i].kind != CLI_METHOD_BASELINE) json_object_set_new(r, "curve", curve_json(&rows[i].cv));
      json_array_append_new(jr, r);
    }
    for (size_t i = 0; i < nskip; i++) json_array_append_new(js, json_string(skipped[i]));
    json_object_set_new(o, "results", jr);
    json_object_set_new(o, "best", best < nr ? json_string(rows[best].name) : json_null());
    json_object_set_new(o, "skipped", js);
    if (plot) json_object_set_new(o, "plot", json_string(plot));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o);
  } else {
    char b1[64];
    printf("%s (%zu nodes)\n\n", title, gopt_graph_node_count(g));
    printf("%-28s %16s %10s %12s %10s  %-20s\n", "method", "objective", "vs default", "evaluations", "time s",
           "start");
    printf("%-28s %16s %10s %12s %10s  %-20s\n", "default heuristic", cli_task_fmt(task, rd.objective, b1, sizeof b1),
           "0.00%", "1", "-", "-");
    for (size_t i = 0; i < nr; i++) {
      if (!rows[i].done) continue;
      const cli_task_run *u = &rows[i].run;
      double impr = rd.objective > 0 ? 100 * (rd.objective - u->r.objective) / rd.objective : 0;
      printf("%-28s %16s %+9.2f%% %12llu %10.3f  %-20s%s%s%s\n", rows[i].name,
             cli_task_fmt(task, u->r.objective, b1, sizeof b1), impr, (unsigned long long)u->evals, u->seconds,
             start_col(rows[i].kind, &f, &start), u->r.feasible ? "" : "  INFEASIBLE",
             u->optimal ? "  optimal" : "", u->interrupted ? "  interrupted" : "");
    }
    if (best < nr) printf("\nbest: %s%s\n", rows[best].name, rows[best].run.r.feasible ? "" : " (nothing fits in memory)");
    for (size_t i = 0; i < nskip; i++) printf("%s%s\n", i ? "         " : "\nskipped: ", skipped[i]);
    if (cli_task_interrupted()) printf("\ninterrupted: the remaining methods were not run\n");
  }
  if (plot && write_plot(plot, title, task, rows, nr, rd.objective, (double)budget, &err)) {
    fprintf(stderr, "gopt compare: %s\n", err.msg);
    goto done;
  }
  if (plot && !f.json) printf("\nplot written to %s\n", plot);
  rc = 0;
done:
  cli_task_start_free(&start);
  gopt_env_ws_free(w);
  free(x);
  gopt_env_free(e);
  gopt_graph_free(g);
  gopt_cluster_free(c);
early:
  for (size_t i = 0; i < cap; i++) {
    free(rows[i].cv.ev);
    free(rows[i].cv.best);
  }
  free(rows);
  free(skipped);
  return rc;
}
