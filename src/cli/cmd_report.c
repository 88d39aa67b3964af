/* cmd_report.c: `gopt report MODEL --task T --cluster C -o report.html`: runs the methods of
 * `gopt compare` (shared code: cli_compare.c) and writes one self-contained HTML page: the model
 * summary, the methods table, zoomable per-device timelines of the best decisions and the
 * default's, memory over time per device with its capacity, the graph laid out by Graphviz and
 * coloured by device or fusion group (collapsed by scope when large), convergence curves, and the
 * cost model's fidelity when a measured database is given. Sections: cli_report.c and
 * cli_report_graph.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_report.h"
#include "gopt/decisions.h"
#include "gopt/util.h"

static const char report_help[] =
    "usage: gopt report MODEL --task T --cluster C -o report.html [--methods a,b,...] [--budget N]\n"
    "                   [--seconds S] [--seed S] [--start S] [--costdb DB] [--graph-nodes N] [--threads N]\n"
    "                   [--batch N] [--training] [--policy P] [--no-history] [--mpi-search eval|islands]\n"
    "  runs the methods of gopt compare (default: every applicable one; --methods a subset) and writes\n"
    "  one self-contained HTML file (no network, no external files): the model summary, the methods\n"
    "  table, per-device timelines of the best decisions and of the default heuristic (wheel or the\n"
    "  buttons zoom, drag pans), memory over time per device with its capacity, the graph coloured by\n"
    "  device or fusion group (Graphviz's dot; collapsed by name scope above --graph-nodes, default\n"
    "  300), the convergence curves, and with --costdb (JSON or SQLite) the cost model's fidelity.\n"
    "  Under mpirun the methods are spread over the ranks, or with --mpi-search run on all ranks\n"
    "  as in gopt compare; rank 0 writes the report.\n";

/* Applies x's decisions to a fresh state of e's simulator and evaluates it. */
static int simulate(gopt_env *e, const double *x, gopt_decisions *d, gopt_sim_state **st, gopt_sim_result *res,
                    gopt_error *err) {
  int rc = gopt_env_to_decisions(e, x, d, err);
  if (rc) return rc;
  if (!(*st = gopt_sim_state_new(gopt_env_sim(e)))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if ((rc = gopt_sim_state_apply(*st, d, err))) return rc;
  return gopt_sim_evaluate(*st, res, err);
}

/* The page into b. */
static void page(cli_sbuf *b, const cli_report_ctx *r, size_t graph_nodes) {
  char title[512];
  snprintf(title, sizeof title, "gopt report: %s, %s task on %s", r->f->model, r->f->task, r->c->name);
  cli_report_head(b, title);
  cli_sb_printf(b, "<h1>");
  cli_xml_text(b, title);
  cli_sb_printf(b, "</h1>\n<p class=\"note\">gopt %s. Best: <b>", gopt_version());
  cli_xml_text(b, r->best_name);
  cli_sb_printf(b, "</b>, step %.4f ms vs %.4f ms for the default heuristic.</p>\n", r->best_r.step_time * 1e3,
                r->dflt_r.step_time * 1e3);
  cli_report_summary(b, r);
  cli_report_methods(b, r);
  cli_report_timeline(b, r);
  cli_report_memory(b, r);
  cli_report_graph(b, r, graph_nodes);
  cli_report_convergence(b, r);
  cli_report_fidelity(b, r);
  cli_report_script(b);
  cli_sb_printf(b, "</body></html>\n");
}

int cli_report(int argc, char **argv) {
  cli_task_flags f;
  memset(&f, 0, sizeof f);
  const char *methods = NULL, *dbp = NULL, *gn = NULL;
  const cli_task_extra extra[] = {{"--methods", &methods}, {"-o", &f.out}, {"--costdb", &dbp}, {"--graph-nodes", &gn}};
  int task;
  int arc = cli_task_args("report", report_help, argc, argv, extra, sizeof extra / sizeof extra[0], &f, &task);
  if (arc >= 0) return arc;
  if (!f.out) return cli_usage_error("report", "missing -o report.html");
  long graph_nodes = 300;
  if (gn && cli_parse_long("report", "--graph-nodes", gn, 1, 100000, &graph_nodes)) return 2;
  cli_cmp m;
  int rc = cli_cmp_methods("report", methods, task, &f, &m);
  if (rc) {
    cli_cmp_free(&m);
    return rc;
  }
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_graph *g = NULL;
  gopt_env *e = NULL;
  gopt_costdb *db = NULL;
  cli_report_ctx r;
  memset(&r, 0, sizeof r);
  cli_sbuf b = {0};
  rc = 1;
  if (dbp && gopt_costdb_load(dbp, &db, &err)) {
    fprintf(stderr, "gopt report: --costdb: %s\n", err.msg);
    goto done;
  }
  if (cli_task_env("report", &f, task, &c, &g, &e)) goto done;
  if ((rc = cli_cmp_run("report", &f, e, &m))) goto done;
  rc = 1;
  r = (cli_report_ctx){.f = &f, .task = task, .g = g, .c = c, .e = e, .m = &m, .costdb = db, .costdb_path = dbp};
  gopt_decisions_init(&r.best_d, g);
  gopt_decisions_init(&r.dflt_d, g);
  r.best_name = m.best < m.nr ? m.rows[m.best].name : "default heuristic";
  const double *xb = m.best < m.nr ? m.rows[m.best].x : m.xd;
  if (simulate(e, xb, &r.best_d, &r.best_st, &r.best_r, &err) ||
      simulate(e, m.xd, &r.dflt_d, &r.dflt_st, &r.dflt_r, &err)) {
    fprintf(stderr, "gopt report: simulating the decisions: %s\n", err.msg);
    goto done;
  }
  page(&b, &r, (size_t)graph_nodes);
  if (b.oom) {
    fprintf(stderr, "gopt report: out of memory\n");
    goto done;
  }
  if (cli_mpi_rank() == 0 && gopt_file_write_atomic(f.out, b.s, b.n, &err)) { /* mpirun: rank 0 writes */
    fprintf(stderr, "gopt report: %s\n", err.msg);
    goto done;
  }
  printf("report written to %s (%zu KB): best %s, %zu methods\n", f.out, b.n / 1024, r.best_name, m.nr);
  rc = 0;
done:
  free(b.s);
  gopt_decisions_clear(&r.best_d);
  gopt_decisions_clear(&r.dflt_d);
  gopt_sim_state_free(r.best_st);
  gopt_sim_state_free(r.dflt_st);
  cli_cmp_free(&m);
  gopt_costdb_free(db);
  gopt_env_free(e);
  gopt_graph_free(g);
  gopt_cluster_free(c);
  return rc;
}
