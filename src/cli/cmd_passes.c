/* cmd_passes.c: `gopt passes MODEL [--order default|LIST] [-o OUT] [--json] [--verify] [--list]`: runs a
 * compiler-pass pipeline (gopt/passes.h) and reports the instruction count before and after each
 * pass; -o writes the result (HLO text for .hlo, ONNX otherwise). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/exec.h"
#include "gopt/hlo.h"
#include "gopt/onnx.h"
#include "gopt/passes.h"

static const char passes_help[] =
    "usage: gopt passes MODEL [--order default|PASS,PASS,...] [-o OUT.hlo|OUT.onnx] [--json]\n"
    "                         [--verify [--seed N]]\n"
    "                         [--batch N] [--training] [--no-fold]\n"
    "       gopt passes --list\n"
    "  runs target-independent compiler passes (after XLA's) and reports the instruction count\n"
    "  (parameters, constants and ops over all computations) before and after each pass.\n"
    "  --order default is XLA's CPU pipeline with the passes gopt has (its simplification group\n"
    "  repeated until nothing changes, at most 25 rounds); a list runs each named pass once.\n"
    "  --verify   also run the module before and after on random inputs (--seed N, default 1) and\n"
    "             check that every output is unchanged (floats within 1e-5 + 1e-4 relative); exit 1\n"
    "             when one differs; a module the executor cannot run is reported as not verified\n";

static int list_passes(void) {
  for (int i = 0; i < gopt_pass_count(); i++)
    printf("%2d  %-28s %s\n", i, gopt_pass_name(i), gopt_pass_description(i));
  return 0;
}

static int report(const char *model, const char *order, const gopt_pipeline_step *s, size_t n,
                  size_t before, size_t after, int json, int same, const char *msg) {
  static const char *const verdict[] = {"outputs differ", "verified", "", "not verified (the module does not run)",
                                        "not verified (the result does not run)"};
  const char *v = verdict[same >= 0 ? (same == 0 ? 0 : same == 1 ? 1 : 2) : same == -1 ? 3 : 4];
  double red = before ? 100.0 * ((double)before - (double)after) / (double)before : 0;
  if (!json) {
    printf("model %s, order %s: %zu -> %zu instructions (%.2f%% fewer), %zu pass runs\n", model,
           order, before, after, red, n);
    printf("%-4s %-28s %10s %10s\n", "#", "pass", "before", "after");
    for (size_t i = 0; i < n; i++)
      if (s[i].ops_before != s[i].ops_after || n <= 40)
        printf("%-4zu %-28s %10zu %10zu\n", i, gopt_pass_name(s[i].pass), s[i].ops_before, s[i].ops_after);
    if (*v) printf("%s: %s\n", v, msg);
    return 0;
  }
  json_t *o = json_object(), *arr = json_array();
  json_object_set_new(o, "model", json_string(model));
  json_object_set_new(o, "order", json_string(order));
  json_object_set_new(o, "ops_before", json_integer((json_int_t)before));
  json_object_set_new(o, "ops_after", json_integer((json_int_t)after));
  json_object_set_new(o, "reduction_pct", json_real(red));
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_object();
    json_object_set_new(e, "pass", json_string(gopt_pass_name(s[i].pass)));
    json_object_set_new(e, "ops_before", json_integer((json_int_t)s[i].ops_before));
    json_object_set_new(e, "ops_after", json_integer((json_int_t)s[i].ops_after));
    json_array_append_new(arr, e);
  }
  json_object_set_new(o, "steps", arr);
  if (*v) {
    json_object_set_new(o, "verified", same == 1 ? json_true() : same == 0 ? json_false() : json_null());
    json_object_set_new(o, "verify_note", json_string(msg));
  }
  char *txt = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!txt) return 1;
  puts(txt);
  free(txt);
  return 0;
}

int cli_passes(int argc, char **argv) {
  const char *model = NULL, *out = NULL, *order = "default";
  cli_model_opts mo = {0};
  int json = 0, mf, verify = 0;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(passes_help, stdout);
      return 0;
    } else if (!strcmp(a, "--list")) {
      return list_passes();
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--verify")) {
      verify = 1;
    } else if (!strcmp(a, "--seed")) {
      char *e = NULL;
      if (i + 1 >= argc || (seed = strtoull(argv[++i], &e, 10), !e || *e || !*argv[i]))
        return cli_usage_error("passes", "--seed needs a non-negative integer");
    } else if (!strcmp(a, "--order") || !strcmp(a, "-o")) {
      if (i + 1 >= argc) return cli_usage_error("passes", "%s needs a value", a);
      *(!strcmp(a, "-o") ? &out : &order) = argv[++i];
    } else if ((mf = cli_model_flag("passes", argc, argv, &i, &mo)) != 0) {
      if (mf < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("passes", "unknown flag '%s' (see gopt passes --help)", a);
    } else if (model) {
      return cli_usage_error("passes", "more than one MODEL given");
    } else {
      model = a;
    }
  }
  if (!model) return cli_usage_error("passes", "missing MODEL (see gopt passes --help)");
  if (strcmp(order, "default")) { /* check the names before loading */
    char *l = strdup(order), *save = NULL;
    for (char *t = l ? strtok_r(l, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
      if (gopt_pass_find(t) < 0) {
        cli_usage_error("passes", "--order: unknown pass '%s' (gopt passes --list shows them)", t);
        free(l);
        return 2;
      }
    free(l);
  }
  gopt_graph *g = cli_load_model(model, &mo), *h = NULL;
  if (!g) return 1;
  gopt_error err = {0};
  gopt_pipeline_step *steps = NULL;
  size_t n = 0;
  int rc = gopt_pipeline_run(order, g, &h, &steps, &n, &err);
  int same = 2; /* not asked */
  char msg[600] = "";
  if (!rc && verify) same = gopt_exec_same_outputs(g, h, seed, 1e-4, 1e-5, msg, sizeof msg);
  if (!rc) rc = report(model, order, steps, n, gopt_hlo_instruction_count(g), gopt_hlo_instruction_count(h), json, same, msg);
  else fprintf(stderr, "gopt passes: %s\n", err.msg);
  if (!rc && same == 0) rc = 1;
  if (!rc && out) {
    size_t ol = strlen(out);
    int hlo = ol > 4 && !strcmp(out + ol - 4, ".hlo");
    if ((hlo ? gopt_hlo_save(h, out, &err) : gopt_onnx_save(h, out, &err))) {
      fprintf(stderr, "gopt passes: %s\n", err.msg);
      rc = 1;
    }
  }
  free(steps);
  gopt_graph_free(g);
  gopt_graph_free(h);
  return rc ? 1 : 0;
}
