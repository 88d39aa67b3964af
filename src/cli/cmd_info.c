/* cmd_info.c: `gopt info MODEL`: size, op mix, FLOPs, bytes, parameters and tensor shapes. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/hlo.h"
#include "gopt/ops.h"
#include "gopt/util.h"

static const char info_help[] =
    "usage: gopt info MODEL [--json] [--tensors] [--batch N] [--training] [--no-fold]\n"
    "  MODEL        an .onnx file or a zoo spec (gopt zoo lists them)\n"
    "  --json       print one JSON object instead of a table\n"
    "  --tensors    include every tensor's dtype and shape\n"
    "  --batch N    bind the model's symbolic batch dimension to N and re-infer shapes\n"
    "  --training   turn the forward graph into a training step first\n"
    "  --no-fold    keep shape-computing subgraphs as ops instead of folding them\n";

typedef cli_op_row op_row;

static int row_cmp(const void *a, const void *b) {
  const op_row *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return strcmp(x->type, y->type);
}

/* Lists live nodes' op types with counts and FLOPs; returns the row count (rows malloc'd). */
static size_t collect_ops(const gopt_graph *g, op_row **rows_out) {
  uint32_t maxid = 0;
  size_t n = 0;
  for (size_t i = 0; i < g->nodes.n; i++)
    if (g->nodes.a[i].type > maxid) maxid = g->nodes.a[i].type;
  uint32_t *row_of = calloc((size_t)maxid + 1, sizeof *row_of); /* type id -> row + 1 */
  op_row *rows = malloc(((size_t)maxid + 1) * sizeof *rows);
  if (!row_of || !rows) {
    free(row_of);
    free(rows);
    *rows_out = NULL;
    return 0;
  }
  for (size_t i = 0; i < g->nodes.n; i++) {
    const gopt_node *nd = &g->nodes.a[i];
    if (nd->flags & GOPT_N_DEAD) continue;
    if (!row_of[nd->type]) {
      rows[n] = (op_row){gopt_graph_str(g, nd->type), 0, 0};
      row_of[nd->type] = (uint32_t)++n;
    }
    gopt_cost c;
    gopt_node_cost(g, (int32_t)i, &c);
    op_row *r = &rows[row_of[nd->type] - 1];
    r->count++;
    r->flops += c.flops;
  }
  free(row_of);
  *rows_out = rows;
  return n;
}

size_t cli_info_ops(const gopt_graph *g, cli_op_row **rows) {
  size_t n = collect_ops(g, rows);
  if (*rows) qsort(*rows, n, sizeof **rows, row_cmp);
  return n;
}

/* Whether t belongs in the tensor listing: inputs, constants and outputs of live nodes. */
static int listed_tensor(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  if (x->flags & GOPT_T_ATTR) return 0;
  return x->producer >= 0 || (x->flags & (GOPT_T_INPUT | GOPT_T_CONST));
}

static json_t *shape_json(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  if (x->flags & GOPT_T_NOSHAPE) return json_null();
  json_t *a = json_array();
  const int64_t *d = gopt_tensor_dims(g, t);
  for (int i = 0; i < x->rank; i++) {
    if (d[i] >= 0) json_array_append_new(a, json_integer(d[i]));
    else json_array_append_new(a, json_string(gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])])));
  }
  return a;
}

static void shape_text(const gopt_graph *g, int32_t t, char *buf, size_t n) {
  const gopt_tensor *x = &g->tensors.a[t];
  if (x->flags & GOPT_T_NOSHAPE) {
    snprintf(buf, n, "?");
    return;
  }
  const int64_t *d = gopt_tensor_dims(g, t);
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < x->rank && k < n; i++) {
    if (d[i] >= 0) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)d[i]);
    else k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "",
                               gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])]));
  }
  if (k < n) snprintf(buf + k, n - k, "]");
}

static void human(double v, char *buf, size_t n) {
  const char *u[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) {
    v /= 1000;
    i++;
  }
  snprintf(buf, n, i ? "%.2f%s" : "%.0f%s", v, u[i]);
}

static int print_json(const gopt_graph *g, const gopt_graph_stats *s, op_row *rows, size_t nrows,
                      int tensors) {
  json_t *o = json_object(), *ops = json_object(), *fb = json_object();
  json_object_set_new(o, "name", json_string(gopt_graph_str(g, g->name)));
  json_object_set_new(o, "nodes", json_integer((json_int_t)s->nodes));
  json_object_set_new(o, "edges", json_integer((json_int_t)s->edges));
  /* HLO instructions over all computations (parameters, constants, nodes; each called
   * computation once), as the model would be written by gopt convert -o X.hlo */
  json_object_set_new(o, "instructions", json_integer((json_int_t)gopt_hlo_instruction_count(g)));
  char hash[24];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)gopt_graph_hash(g));
  json_object_set_new(o, "hash", json_string(hash)); /* gopt_graph_hash: structure, not names */
  json_object_set_new(o, "tensors_count", json_integer((json_int_t)s->tensors));
  json_object_set_new(o, "params", json_integer(s->params));
  json_object_set_new(o, "param_bytes", json_integer(s->param_bytes));
  json_object_set_new(o, "trainable", json_integer(s->trainable));
  json_object_set_new(o, "flops", json_real(s->flops));
  json_object_set_new(o, "bytes", json_real(s->bytes));
  json_object_set_new(o, "ir_bytes", json_integer((json_int_t)gopt_graph_memory(g, 0)));
  for (size_t i = 0; i < nrows; i++) {
    json_object_set_new(ops, rows[i].type, json_integer((json_int_t)rows[i].count));
    json_object_set_new(fb, rows[i].type, json_real(rows[i].flops));
  }
  json_object_set_new(o, "ops", ops);
  json_object_set_new(o, "flops_by_op", fb);
  if (tensors) {
    json_t *ts = json_array();
    for (size_t t = 0; t < g->tensors.n; t++) {
      if (!listed_tensor(g, (int32_t)t)) continue;
      json_t *e = json_object();
      json_object_set_new(e, "name", json_string(gopt_graph_str(g, g->tensors.a[t].name)));
      json_object_set_new(e, "dtype", json_string(gopt_dtype_name(g->tensors.a[t].dtype)));
      json_object_set_new(e, "shape", shape_json(g, (int32_t)t));
      const gopt_tensor *x = &g->tensors.a[t];
      int live = x->producer >= 0 || (x->flags & (GOPT_T_INPUT | GOPT_T_OUTPUT)) ||
                 gopt_tensor_use_count(g, (int32_t)t) > 0;
      json_object_set_new(e, "live", json_boolean(live));
      json_array_append_new(ts, e);
    }
    json_object_set_new(o, "tensors", ts);
  }
  int rc = json_dumpf(o, stdout, JSON_COMPACT) == 0 ? 0 : 1;
  fputc('\n', stdout);
  json_decref(o);
  return rc;
}

static void print_table(const gopt_graph *g, const gopt_graph_stats *s, op_row *rows,
                        size_t nrows, int tensors) {
  char a[32], b[32], c[32];
  printf("model    %s\n", gopt_graph_str(g, g->name));
  printf("nodes    %zu\nedges    %zu\ntensors  %zu\n", s->nodes, s->edges, s->tensors);
  human((double)s->params, a, sizeof a);
  human((double)s->param_bytes, b, sizeof b);
  printf("params   %lld (%s, %sB; %lld trainable)\n", (long long)s->params, a, b,
         (long long)s->trainable);
  human(s->flops, a, sizeof a);
  human(s->bytes, b, sizeof b);
  human((double)gopt_graph_memory(g, 0), c, sizeof c);
  printf("FLOPs    %s\nbytes    %sB read+written\nIR size  %sB\n\n", a, b, c);
  printf("%-28s %8s %12s %7s\n", "op", "count", "FLOPs", "share");
  for (size_t i = 0; i < nrows; i++) {
    human(rows[i].flops, a, sizeof a);
    printf("%-28s %8zu %12s %6.1f%%\n", rows[i].type, rows[i].count, a,
           s->flops > 0 ? 100.0 * rows[i].flops / s->flops : 0.0);
  }
  if (tensors) {
    char sh[256];
    printf("\n%-40s %-8s %s\n", "tensor", "dtype", "shape");
    for (size_t t = 0; t < g->tensors.n; t++) {
      if (!listed_tensor(g, (int32_t)t)) continue;
      shape_text(g, (int32_t)t, sh, sizeof sh);
      printf("%-40s %-8s %s\n", gopt_graph_str(g, g->tensors.a[t].name),
             gopt_dtype_name(g->tensors.a[t].dtype), sh);
    }
  }
}

int cli_info(int argc, char **argv) {
  const char *model = NULL;
  int json = 0, tensors = 0;
  cli_model_opts mo = {0};
  int mf;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(info_help, stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--tensors")) {
      tensors = 1;
    } else if ((mf = cli_model_flag("info", argc, argv, &i, &mo)) != 0) {
      if (mf < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("info", "unknown flag '%s' (see gopt info --help)", a);
    } else if (model) {
      return cli_usage_error("info", "more than one MODEL given ('%s' and '%s')", model, a);
    } else {
      model = a;
    }
  }
  if (!model) return cli_usage_error("info", "missing MODEL (see gopt info --help)");
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  gopt_graph_stats s;
  gopt_graph_stats_compute(g, &s);
  op_row *rows = NULL;
  size_t nrows = cli_info_ops(g, &rows);
  int rc = 0;
  if (json) rc = print_json(g, &s, rows, nrows, tensors);
  else print_table(g, &s, rows, nrows, tensors);
  free(rows);
  gopt_graph_free(g);
  if (fflush(stdout) != 0) rc = 1;
  return rc;
}
