/* main.c: the gopt command: dispatches to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/util.h"

int cli_run(int argc, char **argv); /* cmd_run.c */
int cli_simulate(int argc, char **argv), cli_devices(int argc, char **argv),
    cli_calibrate(int argc, char **argv), cli_fidelity(int argc, char **argv); /* simulator */
int cli_optimize(int argc, char **argv), cli_compare(int argc, char **argv); /* tasks */
int cli_train(int argc, char **argv); /* cmd_train.c */
int cli_collect(int argc, char **argv); /* cmd_localadv.c */
int cli_passes(int argc, char **argv); /* cmd_passes.c */
int cli_history(int argc, char **argv), cli_costdb(int argc, char **argv); /* records */
int cli_report(int argc, char **argv); /* cmd_report.c */
int cli_rewrite(int argc, char **argv), cli_rules(int argc, char **argv); /* cmd_rewrite.c, cmd_rules.c */

static const struct {
  const char *name;
  cli_cmd_fn fn;
  const char *help;
} cmds[] = {
    {"info", cli_info, "show a model's size, op mix, FLOPs, bytes and tensor shapes"},
    {"zoo", cli_zoo, "list the built-in models and their size knobs"},
    {"dot", cli_dot, "write a model as Graphviz DOT"},
    {"convert", cli_convert, "write a model (file or zoo name) as ONNX or XLA HLO text"},
    {"passes", cli_passes, "run compiler passes (XLA's default order or a list): instruction counts"},
    {"run", cli_run, "execute a model on this CPU: outputs, --check against test data, --profile"},
    {"rewrite", cli_rewrite, "rewrite the graph with verified substitution rules (TASO-style search)"},
    {"rules", cli_rules, "generate, verify or list the rewrite rules (rules.json)"},
    {"simulate", cli_simulate, "simulate one step on a cluster: time, memory, transfers, trace"},
    {"devices", cli_devices, "list the simulator's device presets and cluster shorthands"},
    {"calibrate", cli_calibrate, "fit the host device's cost model to a measured cost database"},
    {"fidelity", cli_fidelity, "compare predicted with measured op and step times"},
    {"optimize", cli_optimize, "optimize placement/fusion/schedule/memory decisions with a baseline or search"},
    {"compare", cli_compare, "run every baseline and search method on one task: table and SVG plot"},
    {"train", cli_train, "train a learned policy over many graphs (GO-style with PPO, --method regal or localadv): P.gpol"},
    {"collect", cli_collect, "Gibbs-sample per-choice costs into a local advantage dataset (fusion, placement)"},
    {"report", cli_report, "one self-contained HTML report: methods, timelines, memory, graph, convergence"},
    {"history", cli_history, "list the recorded optimize, compare and train runs"},
    {"costdb", cli_costdb, "import/export measured-cost databases between JSON and SQLite"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: gopt COMMAND [ARGS] (gopt COMMAND --help for each)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
  fprintf(f, "\nMODEL is an .onnx or HLO text file (.hlo, or .txt starting HloModule) or a zoo spec such as resnet50 or gnmt:layers=8,steps=100\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("gopt %s\n", gopt_version());
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) {
      cli_mpi_init(&argc, &argv); /* under mpirun: rank 0 of P speaks, the others work (cli_mpi.c) */
      int rc = cmds[i].fn(argc - 1, argv + 1);
      cli_mpi_finalize();
      return rc;
    }
  fprintf(stderr, "gopt: unknown command '%s' (see gopt --help)\n", argv[1]);
  return 2;
}
