/* pass_test_util.h: what the pass-ordering tests share (test_pass_env.c, test_pass_rl.c): the HLO
 * pass tests' helpers (hlo_test_util.h: load) and the brute-force optimum over short pass
 * sequences. */
#ifndef GOPT_PASS_TEST_UTIL_H
#define GOPT_PASS_TEST_UTIL_H
#include <string.h>

#include "hlo_test_util.h"
#include "gopt/passes.h"

/* Lowest instruction count over every sequence of at most depth passes from g. */
static inline size_t ptu_brute(const gopt_graph *g, int depth) {
  size_t best = gopt_hlo_instruction_count(g);
  for (int p = 0; depth > 0 && p < gopt_pass_count(); p++) {
    gopt_graph *h = NULL;
    if (gopt_pass_run(p, g, &h, NULL, NULL)) continue;
    size_t c = ptu_brute(h, depth - 1);
    if (c < best) best = c;
    gopt_graph_free(h);
  }
  return best;
}
#endif
