/* cli.h: shared pieces of the gopt command's subcommands (model loading, option parsing). */
#ifndef GOPT_CLI_H
#define GOPT_CLI_H

#include "gopt/graph.h"

/* A subcommand: argc/argv start at the subcommand's own name. Returns the process exit code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cli_info(int argc, char **argv);
int cli_zoo(int argc, char **argv);
int cli_dot(int argc, char **argv);
int cli_convert(int argc, char **argv);

/* Options common to commands that load a model. */
typedef struct cli_model_opts {
  long batch;      /* > 0: bind the symbolic batch dim (an error when the model has none) */
  long default_batch; /* > 0 and batch unset: bind the symbolic batch dim when there is one */
  int training;    /* build the training step */
  int no_fold;     /* keep shape subgraphs as ops */
} cli_model_opts;

/* Parses a model-loading flag at argv[*i] (--batch N, --training, --no-fold), advancing *i past
 * its value. Returns 1 when it was one, 0 when it is some other argument, -1 after printing a
 * usage error. */
int cli_model_flag(const char *cmd, int argc, char **argv, int *i, cli_model_opts *o);

/* Loads MODEL (a .onnx path or a zoo spec), applies --batch/--training, infers shapes.
 * On failure prints one error line to stderr and returns NULL. */
gopt_graph *cli_load_model(const char *model, const cli_model_opts *o);

/* Prints "gopt CMD: MESSAGE" to stderr; returns 2 (usage errors) for convenience. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parses a positive integer flag value; returns 0 and sets *out, or prints an error. */
int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);


/* Hooks into modules that may be absent in a build (training). */
int cli_make_training(const char *model, gopt_graph *g, gopt_error *err);

#endif
