/* test_rewrite_costdb.c: the rewrite search priced with measured op costs (TASO's cost model,
 * `gopt rewrite --cluster host --costdb`). Two 1x1 convs reading one input: merge_parallel_conv
 * makes one conv of twice the width and a Split.
 *   - On-demand profiling: an empty database gets one entry per distinct op signature of the graph
 *     (the two convs share one), each a positive measured time, and pricing again profiles nothing.
 *   - The database decides: with every op of the input and of the merged graph rigged in the
 *     database, the search merges when the rigged merged conv + Split are cheaper than two convs and
 *     keeps the input when they are dearer; the predicted costs are the rigged sums.
 *   - A cluster without measured devices (V100) ignores the database. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/rewrite.h"

/* x [1, 16, 8, 8] -> Conv(w0 [16, 16, 1, 1]) -> y0, Conv(w1) -> y1. */
static gopt_graph *two_convs(void) {
  gopt_graph *g = gopt_graph_new("pconv");
  gopt_graph_set_opset(g, "", 17);
  int64_t xd[4] = {1, 16, 8, 8}, wd[4] = {16, 16, 1, 1};
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, NULL);
  gopt_graph_add_input(g, x);
  float w[16 * 16];
  for (int j = 0; j < 2; j++) {
    char nm[8];
    for (int i = 0; i < 256; i++) w[i] = (float)(((i + 5 * j) * 37 % 17) - 8) / 50.0f;
    snprintf(nm, sizeof nm, "w%d", j);
    int32_t wt = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 4, wd, NULL);
    gopt_tensor_set_const(g, wt, w, sizeof w, NULL);
    snprintf(nm, sizeof nm, "y%d", j);
    int32_t y = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, -1, NULL, NULL);
    int32_t in[2] = {x, wt};
    snprintf(nm, sizeof nm, "c%d", j);
    CHECK(gopt_graph_add_node(g, "Conv", nm, 2, in, 1, &y, NULL) >= 0);
    gopt_graph_add_output(g, y);
  }
  gopt_infer_opts io = {0, 0};
  CHECK(gopt_infer_shapes(g, &io, NULL) == 0);
  return g;
}

/* Puts seconds under the signature of every live node of g with op type `op` (NULL: every op). */
static void rig(gopt_costdb *db, const gopt_graph *g, const char *op, double seconds) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t n = (int32_t)i;
    if (!gopt_node_alive(g, n) || (op && strcmp(gopt_node_type(g, n), op))) continue;
    gopt_cost_entry e = {gopt_op_signature(g, n), gopt_node_type(g, n), "rigged", seconds, 1};
    CHECK(gopt_costdb_put(db, &e) == 0);
  }
}

/* Greedy over the built-ins with measured costs from db on the host cluster. */
static void search(const gopt_graph *g, const gopt_ruleset *rs, const gopt_cluster *c, gopt_costdb *db,
                   gopt_rewrite_result *r) {
  gopt_rewrite_costs *m = gopt_rewrite_costs_new(db, 3, 1);
  gopt_rewrite_opts o = {"greedy", c, 0, 50, 0, 0, 1};
  o.costs = m;
  gopt_error err = {0};
  CHECK_MSG(gopt_rewrite_search(g, rs, &o, r, &err) == 0, "%s", err.msg);
  gopt_rewrite_costs_free(m);
}

int main(void) {
  gopt_ruleset *rs = gopt_ruleset_builtin();
  gopt_graph *g = two_convs(), *h = NULL;
  gopt_cluster *host = NULL, *v100 = NULL;
  gopt_error err = {0};
  CHECK(gopt_cluster_parse("host", &host, &err) == 0 && gopt_cluster_parse("V100", &v100, &err) == 0);

  /* on-demand profiling fills an empty database, once */
  gopt_costdb *db = gopt_costdb_new("test", 0);
  gopt_rewrite_costs *m = gopt_rewrite_costs_new(db, 3, 1);
  double s = 0;
  CHECK_MSG(gopt_rewrite_cost_measured(g, host, m, &s, &err) == 0, "%s", err.msg);
  size_t prof = 0, bad = 0;
  gopt_rewrite_costs_stats(m, &prof, &bad, NULL);
  CHECK_MSG(gopt_costdb_size(db) == 1 && prof == 1 && bad == 0, "entries %zu profiled %zu failed %zu",
            gopt_costdb_size(db), prof, bad);
  gopt_cost_entry e;
  CHECK(gopt_costdb_get(db, gopt_op_signature(g, 0), &e) == 1 && e.seconds > 0 && !strcmp(e.op, "Conv"));
  CHECK_MSG(s >= 2 * e.seconds * 0.999, "step %g for two convs of %g", s, e.seconds);
  CHECK(gopt_rewrite_cost_measured(g, host, m, &s, &err) == 0);
  gopt_rewrite_costs_stats(m, &prof, NULL, NULL);
  CHECK(prof == 1 && gopt_costdb_size(db) == 1);
  /* the analytical V100 preset ignores the database (and profiles nothing) */
  double sv = 0, sv0 = 0;
  CHECK(gopt_rewrite_cost_measured(g, v100, m, &sv, &err) == 0 && gopt_rewrite_cost(g, v100, &sv0, &err) == 0);
  CHECK(sv == sv0 && gopt_costdb_size(db) == 1);
  gopt_rewrite_costs_free(m);
  gopt_costdb_free(db);

  /* the merged graph, to rig its ops */
  gopt_rewrite_match *ms = NULL;
  size_t nm = 0, ri = 0, at = 0;
  CHECK(gopt_rewrite_find(g, rs, -1, &ms, &nm, &err) == 0);
  for (size_t k = 0; k < nm; k++)
    if (!strcmp(gopt_ruleset_rule_name(rs, (size_t)ms[k].rule), "merge_parallel_conv")) {
      ri = (size_t)ms[k].rule;
      at = k + 1;
    }
  CHECK_MSG(at && gopt_rewrite_apply(g, rs, &ms[at - 1], &h, NULL, &err) == 0, "merge_parallel_conv: %s", err.msg);
  free(ms);
  for (int cheap = 0; cheap < 2 && h; cheap++) {
    db = gopt_costdb_new("test", 0);
    rig(db, g, NULL, 1e-3);                  /* each conv of the input: 1 ms */
    rig(db, h, "Split", 1e-5);
    rig(db, h, "Conv", cheap ? 1.5e-3 : 3e-3); /* the merged conv: 1.5 ms (cheaper) or 3 ms */
    gopt_rewrite_result r;
    search(g, rs, host, db, &r);
    CHECK_MSG(fabs(r.cost_before - 2e-3) < 2e-6, "predicted before %g, rigged 2 ms", r.cost_before);
    if (cheap) {
      CHECK_MSG(r.n_steps == 1 && r.steps[0].rule == (int32_t)ri, "rigged cheaper merge not taken (%zu steps)", r.n_steps);
      CHECK_MSG(fabs(r.cost_after - 1.51e-3) < 2e-6, "predicted after %g, rigged 1.51 ms", r.cost_after);
    } else {
      CHECK_MSG(r.n_steps == 0 && r.cost_after == r.cost_before, "rigged dearer merge taken (%zu steps)", r.n_steps);
    }
    gopt_rewrite_result_clear(&r);
    gopt_costdb_free(db);
  }
  gopt_graph_free(h);
  gopt_graph_free(g);
  gopt_cluster_free(host);
  gopt_cluster_free(v100);
  gopt_ruleset_free(rs);
  return check_exit("test_rewrite_costdb");
}
