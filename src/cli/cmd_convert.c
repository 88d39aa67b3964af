/* cmd_convert.c: `gopt convert MODEL -o FILE.onnx`: writes a model (file or zoo) as ONNX. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/onnx.h"

static const char convert_help[] =
    "usage: gopt convert MODEL -o FILE.onnx [--batch N] [--training] [--no-fold]\n"
    "  writes MODEL (an .onnx file or a zoo spec) as ONNX, after shape inference and folding\n";

int cli_convert(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  cli_model_opts mo = {0};
  int mf;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(convert_help, stdout);
      return 0;
    } else if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) return cli_usage_error("convert", "-o needs a file name");
      out = argv[++i];
    } else if ((mf = cli_model_flag("convert", argc, argv, &i, &mo)) != 0) {
      if (mf < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("convert", "unknown flag '%s' (see gopt convert --help)", a);
    } else if (model) {
      return cli_usage_error("convert", "more than one MODEL given");
    } else {
      model = a;
    }
  }
  if (!model) return cli_usage_error("convert", "missing MODEL (see gopt convert --help)");
  if (!out) return cli_usage_error("convert", "missing -o FILE.onnx");
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  gopt_error err = {0};
  int rc = gopt_onnx_save(g, out, &err);
  if (rc) fprintf(stderr, "gopt convert: %s\n", err.msg);
  gopt_graph_free(g);
  return rc ? 1 : 0;
}
