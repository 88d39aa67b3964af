/* test_sim_gpu_fused.c: on a measured-GPU preset (H100), a fused Conv -> BatchNormalization ->
 * Relu group is never priced below its convolution alone. The class-level terms a fused group is
 * costed by know nothing of the convolution's own features, and before the anchor floor they made
 * resnet50's layer4 3x3 conv 16x cheaper fused than alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_util.h"

/* producer of node n's first input, -1 when none */
static int32_t first_producer(const gopt_graph *g, int32_t n) {
  const gopt_node *nd = &g->nodes.a[n];
  if (!nd->n_in) return -1;
  int32_t t = g->slots.a[nd->in].tensor;
  return t >= 0 ? g->tensors.a[t].producer : -1;
}

static double step(gopt_sim_state *st, const gopt_decisions *d) {
  gopt_error err = {0};
  gopt_sim_result r;
  CHECK_EQ_INT(gopt_sim_state_apply(st, d, &err), 0);
  int rc = gopt_sim_evaluate(st, &r, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc ? -1 : r.step_time;
}

/* Every Conv -> BN -> Relu chain of the graph fused one at a time on cluster: the fused step
 * saves at most the BN and Relu kernels (the conv's own time stays), and never costs more than
 * the three kernels apart. Returns the number of chains checked. */
static int check_chains(const gopt_graph *g, const char *cluster) {
  gopt_cluster *c;
  gopt_sim *s;
  sim_test_open(g, cluster, &c, &s);
  if (!s) return 0;
  size_t N = g->nodes.n;
  int conv = gopt_op_from_name("Conv"), bn = gopt_op_from_name("BatchNormalization"),
      relu = gopt_op_from_name("Relu"), checked = 0;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  d.group = malloc(N * sizeof *d.group);
  for (size_t i = 0; i < N; i++) d.group[i] = -1;
  gopt_sim_state *st = gopt_sim_state_new(s);
  double base = step(st, &d);
  for (int32_t n = 0; n < (int32_t)N && checked < 6; n++) {
    if (g->nodes.a[n].op != relu) continue;
    int32_t b = first_producer(g, n), k = b >= 0 ? first_producer(g, b) : -1;
    if (b < 0 || k < 0 || g->nodes.a[b].op != bn || g->nodes.a[k].op != conv) continue;
    d.group[n] = d.group[b] = d.group[k] = 0;
    d.n_groups = 1;
    double fused = step(st, &d);
    double tb = gopt_sim_node_time(s, b, 0), tr = gopt_sim_node_time(s, n, 0),
           tk = gopt_sim_node_time(s, k, 0);
    CHECK_MSG(fused >= base - tb - tr - 1e-9, "%s on %s: fused step %.6g < unfused %.6g - bn %.3g - relu %.3g (conv alone %.3g)",
              gopt_node_name(g, k), cluster, fused, base, tb, tr, tk);
    CHECK_MSG(fused <= base + 1e-9, "%s on %s: fused step %.6g > unfused %.6g", gopt_node_name(g, k),
              cluster, fused, base);
    d.group[n] = d.group[b] = d.group[k] = -1;
    d.n_groups = 0;
    checked++;
  }
  gopt_sim_state_free(st);
  gopt_decisions_clear(&d);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  return checked;
}

int main(void) {
  gopt_graph *g = sim_test_zoo("resnet50");
  if (!g) return check_exit("test_sim_gpu_fused");
  CHECK(check_chains(g, "H100") > 0);
  CHECK(check_chains(g, "V100") > 0);
  gopt_graph_free(g);
  return check_exit("test_sim_gpu_fused");
}
