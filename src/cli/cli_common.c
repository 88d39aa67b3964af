/* cli_common.c: model loading and option parsing shared by the gopt subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/hlo.h"
#include "gopt/learn_seq.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/zoo.h"

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gopt %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 2;
}

int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    cli_usage_error(cmd, "%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi,
                    s ? s : "(nothing)");
    return -1;
  }
  *out = v;
  return 0;
}

int cli_model_flag(const char *cmd, int argc, char **argv, int *i, cli_model_opts *o) {
  const char *a = argv[*i];
  if (!strcmp(a, "--training")) {
    o->training = 1;
  } else if (!strcmp(a, "--no-fold")) {
    o->no_fold = 1;
  } else if (!strcmp(a, "--batch")) {
    const char *v = *i + 1 < argc ? argv[++*i] : NULL;
    if (cli_parse_long(cmd, "--batch", v, 1, 1L << 30, &o->batch)) return -1;
  } else {
    return 0;
  }
  return 1;
}

int cli_model_out_args(const char *cmd, const char *help, int argc, char **argv, const char **model,
                       const char **out, cli_model_opts *mo) {
  int mf;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help, stdout);
      return 0;
    } else if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "-o needs a file name");
      *out = argv[++i];
    } else if ((mf = cli_model_flag(cmd, argc, argv, &i, mo)) != 0) {
      if (mf < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error(cmd, "unknown flag '%s' (see gopt %s --help)", a, cmd);
    } else if (*model) {
      return cli_usage_error(cmd, "more than one MODEL given");
    } else {
      *model = a;
    }
  }
  if (!*model) return cli_usage_error(cmd, "missing MODEL (see gopt %s --help)", cmd);
  return -1;
}

static int looks_like_file(const char *model) {
  size_t n = strlen(model);
  return strchr(model, '/') || (n > 5 && !strcmp(model + n - 5, ".onnx")) ||
         (n > 4 && (!strcmp(model + n - 4, ".hlo") || !strcmp(model + n - 4, ".txt")));
}

gopt_graph *cli_load_model(const char *model, const cli_model_opts *o) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc, hlo = 0;
  if (looks_like_file(model) && gopt_hlo_is_hlo_file(model)) {
    hlo = 1; /* HLO text: shapes come from the text (checked on import); nothing to fold */
    rc = gopt_hlo_load(model, &g, &err);
  } else if (looks_like_file(model)) {
    rc = gopt_onnx_load(model, NULL, &g, &err);
  } else {
    rc = gopt_zoo_build(model, &g, &err);
  }
  if (rc != GOPT_OK) goto fail;
  int fixed_batch = 0; /* --batch on a fixed-batch-1 export: re-batched after inference */
  if (o && o->batch > 0) {
    const char *sym = gopt_graph_batch_symbol(g);
    if (sym) {
      gopt_graph_bind_symbol(g, sym, o->batch);
    } else if (!hlo && looks_like_file(model)) {
      fixed_batch = 1;
    } else {
      rc = gopt_error_set(&err, GOPT_EINVAL,
                          "%s: --batch: the model has no symbolic batch dimension", model);
      goto fail;
    }
  } else if (o && o->default_batch > 0) {
    const char *sym = gopt_graph_batch_symbol(g);
    if (sym) gopt_graph_bind_symbol(g, sym, o->default_batch);
  }
  gopt_infer_opts io = {.fold_constants = !(o && o->no_fold) && !hlo, .keep_source_shapes = 1};
  rc = gopt_infer_shapes(g, &io, &err);
  if (rc == GOPT_OK && fixed_batch) rc = gopt_graph_rebatch(g, o->batch, &err);
  if (rc != GOPT_OK) {
    gopt_error_prefix(&err, "%s: ", model);
    goto fail;
  }
  if (o && o->training) {
    rc = cli_make_training(model, g, &err);
    if (rc != GOPT_OK) goto fail;
  }
  return g;
fail:
  fprintf(stderr, "gopt: %s\n", err.msg);
  gopt_graph_free(g);
  return NULL;
}

/* The end of a sequential agent's training (gopt train --method rewrite|passes): reports a failed
 * run, writes the policy when save is set, then says how it ended. trc is the trainer's return.
 * Returns the command's exit status: 1 on error, 130 when interrupted (policy written), else 0. */
int cli_train_seq_finish(gopt_seq_policy *p, int trc, const gopt_learn_train_result *tr, int save,
                         const char *out, long iters, const char *what, int n, const char *unit,
                         gopt_error *err) {
  if (trc || (save && gopt_seq_policy_save(p, out, err))) {
    fprintf(stderr, "gopt train: %s\n", err->msg);
    return 1;
  }
  if (tr->interrupted) {
    fprintf(stderr, "gopt train: interrupted at iteration %lld of %ld; wrote %s (continue with --resume)\n",
            (long long)tr->iters_done, iters, out);
    return 130;
  }
  printf("wrote %s: %s, %d %s, %lld iterations, %zu weights, %.1f s\n", out, what, n, unit,
         (long long)tr->iters_done, gopt_seq_policy_param_count(p), tr->seconds);
  return 0;
}
