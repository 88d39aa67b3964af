/* cli_hooks.c: steps of model loading that call into optional pipeline stages (training). */
#include "cli/cli.h"
#include "gopt/train.h"

int cli_make_training(const char *model, gopt_graph *g, gopt_error *err) {
  int rc = gopt_train_build(g, NULL, err);
  if (rc) gopt_error_prefix(err, "%s: --training: ", model);
  return rc;
}
