/* test_sim_memory_curve.c: the per-device memory curve (gopt_sim_memory_curve), rebuilt after the
 * fact from unit and transfer times, against the event loop's own accounting: its maximum equals
 * peak_mem, it starts at 0 with at least the resident bytes and ends at the step's end, on
 * several zoo models with random placements on 1, 2 and 4 devices (fused groups are not covered);
 * gopt_sim_timeline lists every unit and transfer. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "sim_test_util.h"

static void one(const char *spec, const char *cluster, uint64_t seed, int fuse) {
  gopt_graph *g = sim_test_zoo(spec);
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  if (!g) return;
  sim_test_open(g, cluster, &c, &s);
  gopt_sim_state *st = gopt_sim_state_new(s);
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  size_t N = d.n_nodes;
  d.placement = calloc(N + 1, sizeof *d.placement);
  for (size_t i = 0; i < N; i++) d.placement[i] = (int32_t)(sim_test_rnd(&seed) % (uint32_t)c->n_devices);
  if (fuse) { /* an explicit all-unfused fusion array */
    d.group = calloc(N + 1, sizeof *d.group);
    for (size_t i = 0; i < N; i++) d.group[i] = -1;
  }
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_sim_state_apply(st, &d, &err), 0);
  gopt_sim_result r;
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  for (int dev = 0; dev < c->n_devices; dev++) {
    double *t = NULL, *b = NULL;
    size_t n = 0;
    CHECK_EQ_INT(gopt_sim_memory_curve(st, dev, &t, &b, &n, &err), 0);
    double mx = 0;
    for (size_t i = 0; i < n; i++) {
      mx = fmax(mx, b[i]);
      if (i) CHECK(t[i] > t[i - 1]);
    }
    CHECK(n >= 1 && t[0] == 0 && b[0] >= r.resident[dev]);
    CHECK_MSG(mx == r.peak_mem[dev], "%s on %s dev %d: curve max %.0f, peak %.0f", spec, cluster, dev, mx,
              r.peak_mem[dev]);
    CHECK_MSG(fabs(t[n - 1] - r.step_time) <= 1e-15 + 1e-12 * r.step_time, "curve ends at the step");
    free(t);
    free(b);
  }
  size_t k = gopt_sim_timeline(st, NULL, 0);
  CHECK(k == r.n_kernels + r.n_transfers);
  gopt_decisions_clear(&d);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  const char *models[] = {"resnet50:depth=18", "transformer:layers=2", "gnmt:layers=2,steps=4", "inception_v3"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      one(models[m], seed == 1 ? "V100" : "4xV100-nvlink", seed * 7919, 0);
      one(models[m], "2xV100-pcie", seed * 104729, 1);
    }
  return check_exit("test_sim_memory_curve");
}
