/* cmd_history.c: `gopt history [MODEL] [--json] [--file DB]`: lists the run history
 * (gopt/history.h), all records or those of one model (by structural hash). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/history.h"

static const char hist_help[] =
    "usage: gopt history [MODEL] [--json] [--file DB]\n"
    "  lists the recorded optimize, compare and train runs, oldest first (all models, or MODEL's:\n"
    "  the same structure under any node names). The database is $XDG_DATA_HOME/gopt/history.sqlite\n"
    "  (default ~/.local/share/gopt/history.sqlite); --file reads another one.\n"
    "  Recording is switched off by --no-history on a command or GOPT_HISTORY=0.\n"
    "  --start history (optimize, compare) starts a search from the best recorded decisions.\n";

typedef struct hist_out {
  json_t *arr; /* --json: the records; else NULL (a table) */
  size_t n;
} hist_out;

static json_t *jstr(const char *s) { return s ? json_string(s) : json_null(); }

static int on_record(const gopt_history_record *r, void *user) {
  hist_out *o = user;
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->model_hash);
  o->n++;
  if (!o->arr) {
    if (o->n == 1)
      printf("%-5s %-19s %-16s %-9s %-9s %-14s %-14s %6s %14s %4s %9s %8s\n", "id", "time (UTC)", "model hash",
             "command", "task", "cluster", "method", "seed", "objective", "fits", "evals", "time s");
    printf("%-5lld %-19s %-16s %-9s %-9s %-14s %-14s %6llu %14.6g %4s %9llu %8.3f  %s\n", (long long)r->id,
           r->time ? r->time : "", hash, r->command ? r->command : "", r->task ? r->task : "",
           r->cluster ? r->cluster : "", r->method ? r->method : "", (unsigned long long)r->seed, r->objective,
           r->feasible ? "yes" : "NO", (unsigned long long)r->evaluations, r->seconds, r->model ? r->model : "");
    return 0;
  }
  json_t *j = json_object();
  json_object_set_new(j, "id", json_integer((json_int_t)r->id));
  json_object_set_new(j, "time", jstr(r->time));
  json_object_set_new(j, "model_hash", json_string(hash));
  json_object_set_new(j, "model", jstr(r->model));
  json_object_set_new(j, "command", jstr(r->command));
  json_object_set_new(j, "task", jstr(r->task));
  json_object_set_new(j, "cluster", jstr(r->cluster));
  json_object_set_new(j, "method", jstr(r->method));
  json_object_set_new(j, "seed", json_integer((json_int_t)r->seed));
  json_object_set_new(j, "objective", json_real(r->objective));
  json_object_set_new(j, "feasible", json_boolean(r->feasible));
  json_object_set_new(j, "evaluations", json_integer((json_int_t)r->evaluations));
  json_object_set_new(j, "seconds", json_real(r->seconds));
  json_object_set_new(j, "decisions_file", jstr(r->decisions_file));
  json_t *d = r->decisions ? json_loads(r->decisions, 0, NULL) : NULL;
  json_object_set_new(j, "decisions", d ? d : json_null());
  json_object_set_new(j, "version", jstr(r->version));
  json_array_append_new(o->arr, j);
  return 0;
}

int cli_history(int argc, char **argv) {
  const char *model = NULL, *file = NULL;
  int json = 0;
  cli_model_opts mo = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(hist_help, stdout);
      return 0;
    }
    int k = cli_model_flag("history", argc, argv, &i, &mo);
    if (k < 0) return 2;
    if (k) continue;
    if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--file")) {
      if (i + 1 >= argc) return cli_usage_error("history", "--file needs a value");
      file = argv[++i];
    } else if (a[0] == '-' && a[1]) return cli_usage_error("history", "unknown flag '%s' (see gopt history --help)", a);
    else if (!model) model = a;
    else return cli_usage_error("history", "unexpected argument '%s' (one MODEL)", a);
  }
  uint64_t hash = 0;
  if (model) {
    gopt_graph *g = cli_load_model(model, &mo);
    if (!g) return 1;
    hash = gopt_graph_hash(g);
    gopt_graph_free(g);
  }
  hist_out o = {json ? json_array() : NULL, 0};
  gopt_error err = {0};
  int rc = gopt_history_list(file, hash, on_record, &o, &err);
  if (rc) {
    fprintf(stderr, "gopt history: %s\n", err.msg);
    json_decref(o.arr);
    return 1;
  }
  if (json) {
    json_dumpf(o.arr, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o.arr);
  } else if (!o.n) {
    printf("no recorded runs%s\n", model ? " of this model" : "");
  }
  return 0;
}
