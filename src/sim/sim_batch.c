/* sim_batch.c: many evaluations in parallel (gopt_sim_evaluate_batch): one workspace per OpenMP
 * thread, items handed out dynamically; every item's result is independent of the thread count. */
#include <omp.h>
#include <stdlib.h>

#include "sim/sim_internal.h"

int gopt_sim_evaluate_batch(const gopt_sim *s, const gopt_decisions *d, size_t n,
                            gopt_sim_summary *out, int threads, gopt_error *err) {
  if (threads <= 0) threads = omp_get_max_threads();
  if ((size_t)threads > n) threads = n ? (int)n : 1;
  gopt_sim_state **sts = calloc((size_t)threads, sizeof *sts);
  if (!sts) return gopt_error_set(err, GOPT_ENOMEM, "simulate: out of memory");
  int rc = GOPT_OK;
  for (int t = 0; t < threads; t++) {
    if (!(sts[t] = gopt_sim_state_new(s))) rc = GOPT_ENOMEM;
    else gopt_sim_state_set_incremental(sts[t], 0); /* every item is a fresh apply: no replays */
  }
  if (rc) {
    for (int t = 0; t < threads; t++) gopt_sim_state_free(sts[t]);
    free(sts);
    return gopt_error_set(err, GOPT_ENOMEM, "simulate: out of memory");
  }
  long long first_bad = -1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (long long i = 0; i < (long long)n; i++) {
    gopt_sim_state *st = sts[omp_get_thread_num()];
    gopt_sim_summary *o = &out[i];
    gopt_sim_result r;
    gopt_error e = {0};
    o->rc = gopt_sim_state_apply(st, &d[i], &e);
    if (!o->rc) o->rc = gopt_sim_evaluate(st, &r, &e);
    if (o->rc) {
      o->step_time = 0;
      o->feasible = 0;
      o->max_over = o->max_peak = 0;
    } else {
      o->step_time = r.step_time;
      o->feasible = r.feasible;
      o->max_over = o->max_peak = 0;
      for (int k = 0; k < r.n_devices; k++) {
        if (r.mem_over[k] > o->max_over) o->max_over = r.mem_over[k];
        if (r.peak_mem[k] > o->max_peak) o->max_peak = r.peak_mem[k];
      }
    }
  }
  for (size_t i = 0; i < n; i++)
    if (out[i].rc && first_bad < 0) first_bad = (long long)i;
  if (first_bad >= 0) {
    /* re-run the first failing item to report its message deterministically */
    rc = gopt_sim_state_apply(sts[0], &d[first_bad], err);
    if (!rc) rc = gopt_sim_evaluate(sts[0], NULL, err);
    if (!rc) rc = out[first_bad].rc;
    gopt_error_prefix(err, "batch item %lld: ", first_bad);
  }
  for (int t = 0; t < threads; t++) gopt_sim_state_free(sts[t]);
  free(sts);
  return rc;
}
