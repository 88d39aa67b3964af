/* cmd_dot.c: `gopt dot MODEL`: the graph as Graphviz DOT (ops as boxes, tensors as edges). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_compare.h"
#include "gopt/ops.h"
#include "gopt/util.h"

static const char dot_help[] =
    "usage: gopt dot MODEL [-o FILE.dot] [--batch N] [--training] [--no-fold]\n"
    "  writes the graph in Graphviz DOT to FILE (default: stdout); render with dot -Tsvg\n";

/* DOT-escapes s (quotes and backslashes) into a static buffer. */
static const char *esc(const char *s) {
  static char buf[1024];
  size_t k = 0;
  for (; *s && k + 2 < sizeof buf; s++) {
    if (*s == '"' || *s == '\\') buf[k++] = '\\';
    buf[k++] = *s;
  }
  buf[k] = 0;
  return buf;
}

static void dims_text(const gopt_graph *g, int32_t t, char *buf, size_t n) {
  const gopt_tensor *x = &g->tensors.a[t];
  const int64_t *d = gopt_tensor_dims(g, t);
  size_t k = 0;
  buf[0] = 0;
  if (x->flags & GOPT_T_NOSHAPE) { snprintf(buf, n, "?"); return; }
  for (int i = 0; i < x->rank && k + 1 < n; i++) {
    if (d[i] >= 0) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", (long long)d[i]);
    else k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "x" : "",
                               gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])]));
  }
}

int cli_dot(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  cli_model_opts mo = {0};
  int arc = cli_model_out_args("dot", dot_help, argc, argv, &model, &out, &mo);
  if (arc >= 0) return arc;
  gopt_graph *g = cli_load_model(model, &mo);
  if (!g) return 1;
  cli_sbuf b = {0};
  char dims[128];
  cli_sb_printf(&b, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n",
            esc(gopt_graph_str(g, g->name)));
  for (size_t i = 0; i < g->inputs.n; i++)
    cli_sb_printf(&b, "  t%d [shape=ellipse, label=\"%s\"];\n", g->inputs.a[i],
              esc(gopt_graph_str(g, g->tensors.a[g->inputs.a[i]].name)));
  for (size_t n = 0; n < g->nodes.n; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    cli_sb_printf(&b, "  n%zu [label=\"%s", n, esc(gopt_node_type(g, (int32_t)n)));
    cli_sb_printf(&b, "\\n%s\"];\n", esc(gopt_node_name(g, (int32_t)n)));
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = gopt_node_input(g, (int32_t)n, (int)i);
      if (t < 0) continue;
      int32_t p = g->tensors.a[t].producer;
      if (p < 0 && !(g->tensors.a[t].flags & GOPT_T_INPUT)) continue; /* constants: omitted */
      dims_text(g, t, dims, sizeof dims);
      if (p >= 0) cli_sb_printf(&b, "  n%d -> n%zu [label=\"%s\"];\n", p, n, esc(dims));
      else cli_sb_printf(&b, "  t%d -> n%zu [label=\"%s\"];\n", t, n, esc(dims));
    }
  }
  for (size_t i = 0; i < g->outputs.n; i++) {
    int32_t t = g->outputs.a[i];
    cli_sb_printf(&b, "  o%d [shape=ellipse, label=\"%s\"];\n", t,
              esc(gopt_graph_str(g, g->tensors.a[t].name)));
    if (g->tensors.a[t].producer >= 0) cli_sb_printf(&b, "  n%d -> o%d;\n", g->tensors.a[t].producer, t);
  }
  cli_sb_printf(&b, "}\n");
  int rc = 0;
  if (b.oom) {
    fprintf(stderr, "gopt dot: out of memory\n");
    rc = 1;
  } else if (out) {
    gopt_error err = {0};
    if (gopt_file_write_atomic(out, b.s, b.n, &err)) {
      fprintf(stderr, "gopt dot: %s\n", err.msg);
      rc = 1;
    }
  } else if (fwrite(b.s, 1, b.n, stdout) != b.n || fflush(stdout)) {
    rc = 1;
  }
  free(b.s);
  gopt_graph_free(g);
  return rc;
}
