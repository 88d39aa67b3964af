/* cli_compare.c: the method comparison shared by `gopt compare` and `gopt report`
 * (cli_compare.h): method list, runs, best row, curves, convergence SVG; the text buffer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_compare.h"
#include "gopt/baselines.h"
#include "gopt/search.h"
#include "gopt/task.h"

int cli_sb_printf(cli_sbuf *b, const char *fmt, ...) {
  if (b->oom) return -1;
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
    if (!s) {
      b->oom = 1;
      return -1;
    }
    b->s = s;
    b->cap = cap;
  }
}

void cli_xml_text(cli_sbuf *b, const char *s) {
  for (; s && *s; s++) {
    if (*s == '<') cli_sb_printf(b, "&lt;");
    else if (*s == '>') cli_sb_printf(b, "&gt;");
    else if (*s == '&') cli_sb_printf(b, "&amp;");
    else if (*s == '"') cli_sb_printf(b, "&quot;");
    else cli_sb_printf(b, "%c", *s);
  }
}

static void on_improve(uint64_t evals, double seconds, double best, void *user) {
  (void)seconds;
  cli_cmp_curve *c = user;
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

const char *cli_cmp_kind_name(int kind) {
  return kind == CLI_METHOD_SEARCH ? "search" : kind == CLI_METHOD_LEARNED || kind == CLI_METHOD_GUIDED ? "learned" : "baseline";
}

const char *cli_cmp_start_col(int kind, const cli_task_flags *f, const cli_task_start *st) {
  if (CLI_METHOD_SEARCHES(kind)) return st->info.name;
  if (kind == CLI_METHOD_LEARNED) return f->finetune ? "policy+finetune" : "policy (zero-shot)";
  return "-";
}

json_t *cli_cmp_curve_json(const cli_cmp_curve *cv) {
  json_t *a = json_array();
  for (size_t k = 0; k < cv->n; k++) {
    json_t *p = json_array();
    json_array_append_new(p, json_integer((json_int_t)cv->ev[k]));
    json_array_append_new(p, json_real(cv->best[k]));
    json_array_append_new(a, p);
  }
  return a;
}

void cli_cmp_free(cli_cmp *m) {
  for (size_t i = 0; i < m->cap; i++) {
    free(m->rows[i].cv.ev);
    free(m->rows[i].cv.best);
    free(m->rows[i].x);
  }
  free(m->rows);
  free(m->skipped);
  free(m->xd);
  cli_task_start_free(&m->start);
  memset(m, 0, sizeof *m);
}

/* Parses the --methods list into m's rows; returns 0 or 2 after a usage error. */
static int parse_list(const char *cmd, const char *methods, int task, cli_cmp *m) {
  char list[1024];
  const char *s = methods;
  cli_cmp_row *rows = m->rows;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (!len || len >= sizeof rows[0].name || m->nr == m->cap)
      return cli_usage_error(cmd, "--methods: bad entry in '%s'", methods);
    cli_cmp_row *r = &rows[m->nr];
    memcpy(r->name, s, len);
    r->name[len] = 0;
    if (!(r->kind = cli_task_method_kind(r->name)))
      return cli_usage_error(cmd, "--methods: unknown method '%s' (%s)", r->name,
                             cli_task_methods_text(task, list, sizeof list));
    m->nr++;
    s = end ? end + 1 : s + len;
  }
  return 0;
}

int cli_cmp_methods(const char *cmd, const char *methods, int task, const cli_task_flags *f, cli_cmp *m) {
  memset(m, 0, sizeof *m);
  if (methods && !*methods) return cli_usage_error(cmd, "--methods: empty list");
  m->cap = gopt_baseline_task_count(task) + gopt_search_method_count() + 64;
  m->rows = calloc(m->cap, sizeof *m->rows);
  m->skipped = calloc(m->cap, sizeof *m->skipped);
  if (!m->rows || !m->skipped) {
    fprintf(stderr, "gopt %s: out of memory\n", cmd);
    return 1;
  }
  m->explicit_list = methods != NULL;
  if (methods) return parse_list(cmd, methods, task, m);
  cli_cmp_row *rows = m->rows;
  for (size_t i = 0; i < gopt_baseline_task_count(task); i++, m->nr++) {
    snprintf(rows[m->nr].name, sizeof rows[0].name, "%s", gopt_baseline_task_name(task, i));
    rows[m->nr].kind = CLI_METHOD_BASELINE;
  }
  char pp[4096];
  gopt_error perr = {0};
  for (size_t i = 0; i < gopt_search_method_count(); i++) {
    const char *nm = gopt_search_method_name(i);
    /* guided only when its advantage model is there (--policy or the shipped one) */
    if (!strcmp(nm, "guided") && (task == GOPT_TASK_FUSION || task == GOPT_TASK_PLACEMENT) &&
        cli_localadv_model_path(f, task, pp, sizeof pp, &perr)) {
      snprintf(m->skipped[m->nskip++], sizeof m->skipped[0], "guided (%.280s)", perr.msg);
      continue;
    }
    snprintf(rows[m->nr].name, sizeof rows[0].name, "%s", nm);
    rows[m->nr++].kind = CLI_METHOD_SEARCH;
  }
  /* the learned policies when there is one for the task: the shipped ones, or --policy: the row of
   * its kind (go or regal; neither when it is not such a policy, e.g. guided's advantage model) */
  static const char *const learned[2] = {"go", "regal"};
  gopt_policy *given = NULL;
  gopt_error gerr = {0};
  const char *given_kind = NULL;
  if (f->policy) given_kind = gopt_policy_load(f->policy, task, &given, &gerr) ? "" : gopt_policy_kind(given);
  gopt_policy_free(given); /* the kind names are static */
  for (int i = 0; i < 2; i++) {
    memset(&perr, 0, sizeof perr);
    if (given_kind && strcmp(given_kind, learned[i])) {
      if (!given_kind[0]) snprintf(m->skipped[m->nskip++], sizeof m->skipped[0], "%s (--policy: %.270s)", learned[i], gerr.msg);
      continue;
    }
    if (!cli_task_policy_path(f, task, learned[i], pp, sizeof pp, &perr)) {
      snprintf(rows[m->nr].name, sizeof rows[0].name, "%s", learned[i]);
      rows[m->nr++].kind = cli_task_method_kind(learned[i]);
    } else {
      snprintf(m->skipped[m->nskip++], sizeof m->skipped[0], "%s (%.280s)", learned[i], perr.msg);
    }
  }
  return 0;
}

/* Keeps the methods that apply to e; returns 0 or 2 after printing (an explicit list). */
static int keep_applicable(const char *cmd, const cli_task_flags *f, gopt_env *e, cli_cmp *m) {
  size_t k = 0;
  for (size_t i = 0; i < m->nr; i++) {
    const char *why = NULL;
    if (cli_task_applicable(m->rows[i].name, e, &why)) {
      if (k != i) {
        cli_cmp_row t = m->rows[k];
        m->rows[k] = m->rows[i];
        m->rows[i] = t;
      }
      k++;
      continue;
    }
    if (m->explicit_list) return cli_task_not_applicable(cmd, m->rows[i].name, f->task, why);
    snprintf(m->skipped[m->nskip++], sizeof m->skipped[0], "%s (%s)", m->rows[i].name,
             why ? why : "not applicable");
  }
  m->nr = k;
  return 0;
}

/* Under mpirun: every row's outcome (result and decisions, or its failure line) from the rank that
 * ran it to all (rank 0 prints). Curves stay on the rank that ran the row (plots show rank 0's). */
static int cmp_gather(cli_cmp *m, size_t nv) {
  for (size_t i = 0; i < m->nr; i++) {
    cli_cmp_row *r = &m->rows[i];
    int owner = (int)(i % (size_t)cli_mpi_size()), mine = owner == cli_mpi_rank();
    struct { int done; cli_task_run run; char msg[320]; } h;
    memset(&h, 0, sizeof h);
    h.done = r->done;
    h.run = r->run;
    if (mine && r->failed) memcpy(h.msg, m->skipped[r->failed - 1], sizeof h.msg);
    if (cli_mpi_bcast(&h, sizeof h, owner)) return 1;
    if (h.done && r->x && cli_mpi_bcast(r->x, nv * sizeof *r->x, owner)) return 1;
    if (mine) continue;
    r->done = h.done;
    r->run = h.run;
    if (!h.done && h.msg[0]) memcpy(m->skipped[m->nskip++], h.msg, sizeof h.msg);
  }
  return 0;
}

int cli_cmp_run(const char *cmd, const cli_task_flags *f, gopt_env *e, cli_cmp *m) {
  int rc = keep_applicable(cmd, f, e, m);
  if (rc) return rc;
  size_t nv = gopt_env_nvars(e);
  gopt_env_ws *w = gopt_env_ws_new(e);
  m->xd = calloc(nv + 1, sizeof *m->xd);
  for (size_t i = 0; i < m->nr; i++) m->rows[i].x = calloc(nv + 1, sizeof *m->rows[i].x);
  for (size_t i = 0; i < m->nr; i++)
    if (!m->rows[i].x) m->xd = (free(m->xd), NULL);
  if (!w || !m->xd) {
    gopt_env_ws_free(w);
    fprintf(stderr, "gopt %s: out of memory\n", cmd);
    return 1;
  }
  rc = cli_task_default(cmd, e, w, m->xd, &m->rd);
  gopt_env_ws_free(w);
  if (rc) return rc;
  m->budget = cli_task_budget(f);
  int tty = isatty(STDERR_FILENO), any_search = 0;
  for (size_t i = 0; i < m->nr; i++) any_search |= CLI_METHOD_SEARCHES(m->rows[i].kind);
  if (any_search && (rc = cli_task_start_resolve(cmd, f, e, &m->start))) return rc;
  gopt_error err = {0};
  cli_task_sigint(1);
  /* under mpirun the methods are spread over the ranks (row i on rank i % P); with --mpi-search
   * every rank runs every row and each search is distributed as in `gopt optimize` */
  int spread = cli_mpi_size() > 1 && !f->mpi_search_set;
  cli_mpi_search = !spread;
  for (size_t i = 0; i < m->nr && !(spread ? cli_task_interrupted() : cli_task_interrupted_agreed()); i++) {
    if (spread && (int)(i % (size_t)cli_mpi_size()) != cli_mpi_rank()) continue;
    cli_cmp_row *r = &m->rows[i];
    gopt_search_opts so;
    cli_task_search_opts(f, tty, &so);
    so.on_improve = on_improve;
    so.user = &r->cv;
    r->cv.offset = CLI_METHOD_SEARCHES(r->kind) ? m->start.info.evals : 0;
    if (tty) fprintf(stderr, "gopt %s: [%zu/%zu] %s ...\n", cmd, i + 1, m->nr, r->name);
    if (cli_task_run_method(r->name, e, f, &so, CLI_METHOD_SEARCHES(r->kind) ? &m->start : NULL, r->x, &r->run,
                            &err)) {
      /* one failing method does not lose the others: it is listed with its error */
      fprintf(stderr, "gopt %s: warning: %s: %s\n", cmd, r->name, err.msg);
      snprintf(m->skipped[m->nskip++], sizeof m->skipped[0], "%s (failed: %.150s)", r->name, err.msg);
      r->failed = m->nskip;
      continue;
    }
    r->done = 1;
    if (cli_mpi_rank() == 0 && !spread) cli_history_record(cmd, f, e, r->name, r->x, &r->run);
  }
  cli_task_sigint(0);
  if (spread) {
    if (cmp_gather(m, gopt_env_nvars(e))) {
      fprintf(stderr, "gopt %s: MPI broadcast of the results failed\n", cmd);
      return 1;
    }
    for (size_t i = 0; i < m->nr && cli_mpi_rank() == 0; i++)
      if (m->rows[i].done) cli_history_record(cmd, f, e, m->rows[i].name, m->rows[i].x, &m->rows[i].run);
  }
  /* the best method: fitting in memory first, then the lower objective (gopt_env_result_cmp) */
  m->best = m->nr;
  for (size_t i = 0; i < m->nr; i++)
    if (m->rows[i].done && (m->best == m->nr || gopt_env_result_better(&m->rows[i].run.r, &m->rows[m->best].run.r)))
      m->best = i;
  return 0;
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b", "#e377c2", "#17becf"};

void cli_cmp_plot_svg(cli_sbuf *b0, const char *title, int task, const cli_cmp *m, int xml_header) {
  const cli_cmp_row *rows = m->rows;
  size_t nr = m->nr;
  double dflt = m->rd.objective, budget = (double)m->budget;
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
  cli_sbuf *b = b0;
  if (xml_header) cli_sb_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  cli_sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
  cli_sb_printf(b, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">", L);
  cli_xml_text(b, title);
  cli_sb_printf(b, "</text>\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
            L, T, W - L - R, H - T - B);
  for (int k = 0; k <= 5; k++) {
    double xv = xmax * k / 5, yv = ymin + (ymax - ymin) * k / 5;
    cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", PX(xv), (double)T, PX(xv), H - B);
    cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", PX(xv), H - B + 18, xv);
    cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, PY(yv), W - R, PY(yv));
    cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", L - 6, PY(yv) + 4, yv * scale);
  }
  cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">evaluations</text>\n", (L + W - R) / 2, H - 16);
  cli_sb_printf(b, "<text transform=\"translate(20,%.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
            (T + H - B) / 2, unit);
  /* the default heuristic and the baselines */
  double ly = T + 10;
  cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"2,3\"/>\n",
            L, PY(dflt), W - R, PY(dflt));
  cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\">default heuristic</text>\n", W - R + 10, ly);
  cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"2,3\"/>\n",
            W - R + 150, ly - 4, W - R + 200, ly - 4);
  ly += 18;
  int ci = 0;
  for (size_t i = 0; i < nr; i++) {
    if (!rows[i].done || rows[i].kind != CLI_METHOD_BASELINE) continue;
    double y = rows[i].run.r.objective;
    cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-dasharray=\"6,4\"/>\n",
              L, PY(y), W - R, PY(y));
    cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">", W - R + 10, ly);
    cli_xml_text(b, rows[i].name);
    cli_sb_printf(b, " %.4g</text>\n", y * scale);
    ly += 16;
  }
  ly += 8;
  for (size_t i = 0; i < nr; i++) {
    if (!rows[i].done || rows[i].kind == CLI_METHOD_BASELINE) continue;
    const char *col = palette[ci++ % (int)(sizeof palette / sizeof palette[0])];
    const cli_cmp_curve *cv = &rows[i].cv;
    cli_sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
    double prev = cv->n ? cv->best[0] : rows[i].run.r.objective;
    cli_sb_printf(b, "%.1f,%.1f", PX(cv->n ? cv->ev[0] : 0), PY(prev));
    for (size_t k = 1; k < cv->n; k++) {
      cli_sb_printf(b, " %.1f,%.1f %.1f,%.1f", PX(cv->ev[k]), PY(prev), PX(cv->ev[k]), PY(cv->best[k]));
      prev = cv->best[k];
    }
    cli_sb_printf(b, " %.1f,%.1f\"/>\n", PX(fmax((double)rows[i].run.evals, cv->n ? cv->ev[cv->n - 1] : 0)), PY(prev));
    cli_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
              W - R + 150, ly - 4, W - R + 200, ly - 4, col);
    cli_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\">", W - R + 10, ly);
    cli_xml_text(b, rows[i].name);
    cli_sb_printf(b, "</text>\n");
    ly += 18;
  }
  cli_sb_printf(b, "</svg>\n");
#undef PX
#undef PY
}
