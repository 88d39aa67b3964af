/* cmd_convert.c: `gopt convert MODEL -o FILE.onnx`: writes a model (file or zoo) as ONNX. */
#include <stdio.h>

#include "cli/cli.h"
#include "gopt/onnx.h"

static const char convert_help[] =
    "usage: gopt convert MODEL -o FILE.onnx [--batch N] [--training] [--no-fold]\n"
    "  writes MODEL (an .onnx file or a zoo spec) as ONNX, after shape inference and folding\n";

int cli_convert(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  cli_model_opts mo = {0};
  int arc = cli_model_out_args("convert", convert_help, argc, argv, &model, &out, &mo);
  if (arc >= 0) return arc;
  if (!out) return cli_usage_error("convert", "missing -o FILE.onnx");
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  gopt_error err = {0};
  int rc = gopt_onnx_save(g, out, &err);
  if (rc) fprintf(stderr, "gopt convert: %s\n", err.msg);
  gopt_graph_free(g);
  return rc ? 1 : 0;
}
