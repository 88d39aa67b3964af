/* cmd_convert.c: `gopt convert MODEL -o FILE.onnx|FILE.hlo`: writes a model (ONNX or HLO file, or
 * a zoo spec) as ONNX, or as HLO text when FILE ends in .hlo. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/hlo.h"
#include "gopt/onnx.h"

static const char convert_help[] =
    "usage: gopt convert MODEL -o FILE.onnx|FILE.hlo [--batch N] [--training] [--no-fold]\n"
    "  writes MODEL (an .onnx or HLO file, or a zoo spec) as ONNX, after shape inference and\n"
    "  folding, or as XLA HLO text when FILE ends in .hlo (ops without an HLO equivalent become\n"
    "  custom-calls \"gopt.TYPE\"; constants over 65536 elements are written elided, {...})\n";

int cli_convert(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  cli_model_opts mo = {0};
  int arc = cli_model_out_args("convert", convert_help, argc, argv, &model, &out, &mo);
  if (arc >= 0) return arc;
  if (!out) return cli_usage_error("convert", "missing -o FILE.onnx");
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  gopt_error err = {0};
  size_t n = strlen(out);
  int hlo = n > 4 && !strcmp(out + n - 4, ".hlo");
  int rc = hlo ? gopt_hlo_save(g, out, &err) : gopt_onnx_save(g, out, &err);
  if (rc) fprintf(stderr, "gopt convert: %s\n", err.msg);
  gopt_graph_free(g);
  return rc ? 1 : 0;
}
