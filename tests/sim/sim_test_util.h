/* sim_test_util.h: helpers shared by the simulator tests: a seeded xorshift generator, building a
 * zoo graph with inferred shapes, and opening a cluster and a simulator on a graph. Include after
 * check.h (the helpers count their checks there). */
#ifndef GOPT_SIM_TEST_UTIL_H
#define GOPT_SIM_TEST_UTIL_H
#include <stdint.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/sim.h"
#include "gopt/zoo.h"

/* xorshift64 step on *state; returns 32 bits of the new state. */
static inline uint32_t sim_test_rnd(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (uint32_t)(*state >> 16);
}

/* Builds zoo model spec and infers its shapes (folding constants); NULL after a failed check. */
static inline gopt_graph *sim_test_zoo(const char *spec) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_zoo_build(spec, &g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return NULL;
  gopt_infer_opts io = {1, 1};
  rc = gopt_infer_shapes(g, &io, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return g;
}

/* Parses cluster into *c and makes a simulator of g on it into *s (default options), checking
 * that both succeed. */
static inline void sim_test_open(const gopt_graph *g, const char *cluster, gopt_cluster **c, gopt_sim **s) {
  gopt_error err = {0};
  *c = NULL;
  *s = NULL;
  CHECK_EQ_INT(gopt_cluster_parse(cluster, c, &err), 0);
  CHECK_EQ_INT(gopt_sim_new(g, *c, NULL, s, &err), 0);
}

#endif
