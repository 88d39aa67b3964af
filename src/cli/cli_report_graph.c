/* cli_report_graph.c: the report's graph section (cli_report.h): the model as DOT, nodes coloured
 * by the best decisions' device (or fusion group for the fusion task), laid out by Graphviz
 * (`dot -Tsvg`, Debian's graphviz) and inlined as SVG. Graphs above a node limit are collapsed by
 * scope: node names split at '/' and '.', nodes sharing the longest name prefix that leaves at
 * most SCOPE_MAX groups become one box (coloured by its most common device), edges between
 * boxes counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_report.h"
#include "gopt/util.h"

#define SCOPE_MAX 120

/* DOT string: quotes and backslashes escaped. */
static void dot_str(cli_sbuf *b, const char *s) {
  cli_sb_printf(b, "\"");
  for (; *s; s++) cli_sb_printf(b, (*s == '"' || *s == '\\') ? "\\%c" : "%c", *s);
  cli_sb_printf(b, "\"");
}

/* The colour class of node n: its device, or its fusion group (fusion task; -1 unfused). */
static int node_class(const cli_report_ctx *r, int32_t n) {
  if (r->task == GOPT_TASK_FUSION) return r->best_d.group ? r->best_d.group[n] : -1;
  return gopt_sim_state_device(r->best_st, n);
}

static const char *class_colour(int k) { return k < 0 ? "#ffffff" : cli_report_palette[k % 10]; }

/* Length of the first `depth` components of name's scope (all but the last component). */
static size_t scope_len(const char *name, int depth) {
  size_t last = 0, k = 0;
  int comps = 0;
  for (size_t i = 0; name[i]; i++)
    if (name[i] == '/' || name[i] == '.') {
      if (i == 0) continue;
      last = i;
      if (++comps == depth) k = i;
    }
  return comps >= depth ? k : last;
}

/* Groups live nodes by the scope prefix of `depth` components into grp[n] (-1 for dead nodes);
 * returns the group count, or SIZE_MAX when more than cap. first[k] receives a member of group k. */
static size_t group_by_scope(const gopt_graph *g, int depth, int32_t *grp, int32_t *first, size_t cap) {
  size_t N = g->nodes.n, ng = 0;
  for (size_t n = 0; n < N; n++) {
    grp[n] = -1;
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    const char *a = gopt_node_name(g, (int32_t)n);
    size_t la = scope_len(a, depth);
    size_t k = 0;
    for (; k < ng; k++) {
      const char *c = gopt_node_name(g, first[k]);
      if (scope_len(c, depth) == la && !strncmp(a, c, la)) break;
    }
    if (k == ng) {
      if (ng == cap) return (size_t)-1;
      first[ng++] = (int32_t)n;
    }
    grp[n] = (int32_t)k;
  }
  return ng;
}

/* The collapsed DOT: one box per scope group. */
static void collapsed_dot(cli_sbuf *b, const cli_report_ctx *r, int32_t *grp, int32_t *first, size_t ng, int depth) {
  const gopt_graph *g = r->g;
  size_t N = g->nodes.n, D = (size_t)r->c->n_devices + 1;
  int *cnt = calloc(ng * D + 1, sizeof *cnt), *size = calloc(ng + 1, sizeof *size);
  unsigned char *edge = calloc(ng * ng + 1, 1);
  if (!cnt || !size || !edge) {
    b->oom = 1;
    goto done;
  }
  for (size_t n = 0; n < N; n++) {
    if (grp[n] < 0) continue;
    int d = gopt_sim_state_device(r->best_st, (int32_t)n);
    cnt[(size_t)grp[n] * D + (size_t)(d >= 0 ? d : 0)]++;
    size[grp[n]]++;
    for (int i = 0; i < (int)g->nodes.a[n].n_in; i++) {
      int32_t t = gopt_node_input(g, (int32_t)n, i);
      int32_t p = t >= 0 ? g->tensors.a[t].producer : -1;
      if (p >= 0 && grp[p] >= 0 && grp[p] != grp[n]) edge[(size_t)grp[p] * ng + (size_t)grp[n]] = 1;
    }
  }
  for (size_t k = 0; k < ng; k++) {
    int best = 0;
    for (size_t d = 1; d + 1 < D; d++)
      if (cnt[k * D + d] > cnt[k * D + (size_t)best]) best = (int)d;
    const char *nm = gopt_node_name(g, first[k]);
    size_t l = scope_len(nm, depth);
    char label[160];
    snprintf(label, sizeof label, "%.*s\n%d nodes", (int)(l ? l : strlen(nm)), nm, size[k]);
    cli_sb_printf(b, "  g%zu [label=", k);
    dot_str(b, l ? label : strchr(label, '\n') ? label : nm);
    cli_sb_printf(b, ", fillcolor=\"%s\"];\n", class_colour(best));
  }
  for (size_t a = 0; a < ng; a++)
    for (size_t c = 0; c < ng; c++)
      if (edge[a * ng + c]) cli_sb_printf(b, "  g%zu -> g%zu;\n", a, c);
done:
  free(cnt);
  free(size);
  free(edge);
}

static void full_dot(cli_sbuf *b, const cli_report_ctx *r) {
  const gopt_graph *g = r->g;
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    char label[200];
    snprintf(label, sizeof label, "%s\n%s", gopt_node_type(g, (int32_t)n), gopt_node_name(g, (int32_t)n));
    cli_sb_printf(b, "  n%zu [label=", n);
    dot_str(b, label);
    cli_sb_printf(b, ", fillcolor=\"%s\"];\n", class_colour(node_class(r, (int32_t)n)));
    for (int i = 0; i < (int)g->nodes.a[n].n_in; i++) {
      int32_t t = gopt_node_input(g, (int32_t)n, i);
      int32_t p = t >= 0 ? g->tensors.a[t].producer : -1;
      if (p >= 0) cli_sb_printf(b, "  n%d -> n%zu;\n", p, n);
    }
  }
}

/* Runs dot -Tsvg on text; appends the <svg> element to out. Returns 0, or -1 (why in msg). */
static int run_dot(const char *text, size_t len, cli_sbuf *out, char *msg, size_t msglen) {
  char path[] = "/tmp/gopt_report_XXXXXX";
  int fd = mkstemp(path), rc = -1;
  if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
    snprintf(msg, msglen, "cannot write a temporary file for Graphviz");
    if (fd >= 0) close(fd);
    unlink(path);
    return -1;
  }
  close(fd);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "dot -Tsvg '%s' 2>/dev/null", path);
  FILE *p = popen(cmd, "r");
  cli_sbuf svg = {0};
  if (p) {
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, p)) > 0) cli_sb_printf(&svg, "%.*s", (int)k, buf);
    int st = pclose(p);
    const char *s = svg.s ? strstr(svg.s, "<svg") : NULL;
    if (st == 0 && s && !svg.oom) {
      cli_sb_printf(out, "%s", s);
      rc = 0;
    }
  }
  if (rc) snprintf(msg, msglen, "Graphviz's dot did not run (install graphviz: tools/install-deps.sh)");
  free(svg.s);
  unlink(path);
  return rc;
}

/* The legend: one swatch per device (or a note on fusion groups). */
static void legend(cli_sbuf *b, const cli_report_ctx *r) {
  cli_sb_printf(b, "<p class=\"legend\">");
  if (r->task == GOPT_TASK_FUSION) {
    cli_sb_printf(b, "colour: fusion group of the best decisions (white: unfused)</p>\n");
    return;
  }
  for (int d = 0; d < r->c->n_devices; d++) {
    cli_sb_printf(b, "<span><i class=\"sw\" style=\"background:%s\"></i>", class_colour(d));
    cli_xml_text(b, r->c->devices[d].name);
    cli_sb_printf(b, "</span>");
  }
  cli_sb_printf(b, "</p>\n");
}

void cli_report_graph(cli_sbuf *b, const cli_report_ctx *r, size_t max_nodes) {
  const gopt_graph *g = r->g;
  size_t N = g->nodes.n, live = gopt_graph_node_count(g), ng = 0;
  int depth = 0;
  int32_t *grp = calloc(N + 1, sizeof *grp), *first = calloc(SCOPE_MAX + 1, sizeof *first);
  cli_sbuf dot = {0};
  cli_sb_printf(b, "<section id=\"graph\"><h2>Graph</h2>\n");
  if (!grp || !first) {
    b->oom = 1;
    goto done;
  }
  cli_sb_printf(&dot, "digraph g {\n  graph [rankdir=TB, ranksep=0.25, nodesep=0.15];\n"
                      "  node [shape=box, style=\"filled,rounded\", fontsize=9, fontname=\"Helvetica\", "
                      "height=0.3];\n  edge [arrowsize=0.5, color=\"#777\"];\n");
  if (live <= max_nodes) {
    full_dot(&dot, r);
    cli_sb_printf(b, "<p class=\"note\">All %zu nodes, coloured by %s.</p>\n", live,
                  r->task == GOPT_TASK_FUSION ? "fusion group" : "device");
  } else {
    /* the deepest scope level that still gives at most SCOPE_MAX groups */
    size_t got = 0;
    for (int k = 1; k <= 8; k++) {
      size_t n = group_by_scope(g, k, grp, first, SCOPE_MAX);
      if (n == (size_t)-1) break;
      got = n;
      depth = k;
    }
    if (!depth) {
      cli_sb_printf(b, "<p class=\"note\">%zu nodes: too many scopes to draw (more than %d at the top level of "
                       "the node names).</p>\n", live, SCOPE_MAX);
      goto done;
    }
    ng = group_by_scope(g, depth, grp, first, SCOPE_MAX);
    (void)got;
    collapsed_dot(&dot, r, grp, first, ng, depth);
    cli_sb_printf(b, "<p class=\"note\">%zu nodes collapsed by scope into %zu groups (node names up to %d "
                     "components), each coloured by its most common device.</p>\n", live, ng, depth);
  }
  cli_sb_printf(&dot, "}\n");
  legend(b, r);
  char msg[256];
  cli_sb_printf(b, "<div class=\"gv\">\n");
  if (dot.oom || run_dot(dot.s, dot.n, b, msg, sizeof msg)) cli_sb_printf(b, "<p class=\"note\">%s</p>\n", dot.oom ? "out of memory" : msg);
  cli_sb_printf(b, "</div>\n");
done:
  cli_sb_printf(b, "</section>\n");
  free(dot.s);
  free(grp);
  free(first);
}
