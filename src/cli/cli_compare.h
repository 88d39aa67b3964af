/* cli_compare.h: the method comparison shared by `gopt compare` and `gopt report`: the method
 * list (--methods or every applicable baseline, search method and the learned policy), running
 * each with the same budget from one --start (each run recorded in the history), the best row in
 * the hard memory ranking, the searches' curves, and the convergence plot as SVG. Also the small
 * growing text buffer both commands write SVG/HTML with. */
#ifndef GOPT_CLI_COMPARE_H
#define GOPT_CLI_COMPARE_H

#include <jansson.h>

#include "cli/cli.h"

/* Appends printf output to a growing buffer; sb_printf returns -1 on out of memory (and keeps
 * failing after, so one check at the end suffices: cli_sb_ok). */
typedef struct cli_sbuf {
  char *s;
  size_t n, cap;
  int oom;
} cli_sbuf;
int cli_sb_printf(cli_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with <, >, & and " escaped (XML/HTML text and attribute values). */
void cli_xml_text(cli_sbuf *b, const char *s);

typedef struct cli_cmp_curve {
  double *ev, *best;
  size_t n, cap;
  uint64_t offset; /* evaluations spent before the search (choosing its start) */
} cli_cmp_curve;

typedef struct cli_cmp_row {
  char name[96];
  int kind;               /* CLI_METHOD_BASELINE, _SEARCH or _LEARNED */
  cli_task_run run;
  cli_cmp_curve cv;
  double *x;              /* its decision vector (nvars), once done */
  int done;
  size_t failed;          /* 1 + its line in skipped when it failed */
} cli_cmp_row;

typedef struct cli_cmp {
  cli_cmp_row *rows;
  size_t nr, cap;
  char (*skipped)[320];   /* "method (why)" for methods left out or failed */
  size_t nskip;
  int explicit_list;      /* --methods given: a method that does not apply is an error */
  gopt_env_result rd;     /* the default heuristic's result ... */
  double *xd;             /* ... and vector */
  size_t best;            /* the best done row (nr when none) */
  uint64_t budget;        /* evaluations per search method (0: --seconds) */
  cli_task_start start;
} cli_cmp;

/* The method list into m: --methods (a comma list; NULL: every baseline of the task, every search
 * method and go when a policy exists). Returns 0, 2 after printing a usage error, 1 on out of
 * memory. */
int cli_cmp_methods(const char *cmd, const char *methods, int task, const cli_task_flags *f, cli_cmp *m);
/* Drops methods that do not apply to e (listing them as skipped; an error when the list was
 * explicit), evaluates the default, resolves --start, runs every method (Ctrl-C stops between
 * and within methods; a failing method is listed as skipped), records each in the history and
 * picks the best. Returns 0 or the exit code after printing "gopt CMD: ...". */
int cli_cmp_run(const char *cmd, const cli_task_flags *f, gopt_env *e, cli_cmp *m);
void cli_cmp_free(cli_cmp *m); /* accepts a zeroed struct */

const char *cli_cmp_kind_name(int kind);
/* The table's start column: a search's start, the learned method's mode, "-" for a baseline. */
const char *cli_cmp_start_col(int kind, const cli_task_flags *f, const cli_task_start *st);
/* The curve as [[evaluations, best], ...]. */
json_t *cli_cmp_curve_json(const cli_cmp_curve *cv);
/* Best objective vs evaluations as SVG into b: one step line per search/learned method, a dashed
 * line per baseline and the default; xml_header adds the <?xml?> line (a file; not inline HTML). */
void cli_cmp_plot_svg(cli_sbuf *b, const char *title, int task, const cli_cmp *m, int xml_header);
#endif
