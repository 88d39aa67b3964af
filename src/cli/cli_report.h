/* cli_report.h: the sections of `gopt report`'s self-contained HTML page (cmd_report.c): each
 * appends one <section> to the page buffer. The decisions drawn are the best method's and the
 * default heuristic's, simulated again here to read their timelines and memory curves. */
#ifndef GOPT_CLI_REPORT_H
#define GOPT_CLI_REPORT_H

#include "cli/cli_compare.h"
#include "gopt/costdb.h"
#include "gopt/sim.h"

/* What the sections read. */
typedef struct cli_report_ctx {
  const cli_task_flags *f;
  int task;
  const gopt_graph *g;
  const gopt_cluster *c;
  gopt_env *e;
  const cli_cmp *m;
  gopt_decisions best_d, dflt_d;    /* the best method's and the default's decisions */
  gopt_sim_state *best_st, *dflt_st; /* evaluated with them */
  gopt_sim_result best_r, dflt_r;
  const char *best_name;
  const gopt_costdb *costdb;        /* --costdb, may be NULL */
  const char *costdb_path;
} cli_report_ctx;

extern const char *const cli_report_palette[10];
void cli_report_summary(cli_sbuf *b, const cli_report_ctx *r);
void cli_report_methods(cli_sbuf *b, const cli_report_ctx *r);
void cli_report_timeline(cli_sbuf *b, const cli_report_ctx *r);
void cli_report_memory(cli_sbuf *b, const cli_report_ctx *r);
void cli_report_convergence(cli_sbuf *b, const cli_report_ctx *r);
void cli_report_fidelity(cli_sbuf *b, const cli_report_ctx *r);
/* The graph drawn by Graphviz (dot -Tsvg; a note when dot is missing or fails), nodes coloured by
 * device (or fusion group for the fusion task); above max_nodes nodes, collapsed by scope. */
void cli_report_graph(cli_sbuf *b, const cli_report_ctx *r, size_t max_nodes);
/* The page's style sheet and script (zoom of the timelines). */
void cli_report_head(cli_sbuf *b, const char *title);
void cli_report_script(cli_sbuf *b);
#endif
