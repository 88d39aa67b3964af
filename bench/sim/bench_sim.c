/* bench_sim.c: simulator throughput on zoo graphs: full evaluations per second (apply a whole
 * random placement + simulate) and incremental ones (move one node + simulate), on one thread and
 * on all threads (one state per thread), next to the time of one sequential pass over the
 * simulator's own input arrays measured in the same run (the memory-bandwidth reference).
 * Usage: bench_sim SPEC [CLUSTER [REPS]]; prints one JSON object. Medians over REPS. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "gopt/sim.h"
#include "gopt/util.h"
#include "gopt/zoo.h"

static int dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, dcmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

#define MAXREP 64

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_sim SPEC [CLUSTER [REPS]]\n");
    return 2;
  }
  const char *spec = argv[1], *cspec = argc > 2 ? argv[2] : "4xV100-nvlink";
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (reps < 1) reps = 1;
  if (reps > MAXREP) reps = MAXREP;
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  if (gopt_zoo_build(spec, &g, &err) || gopt_infer_shapes(g, &(gopt_infer_opts){1, 1}, &err) ||
      gopt_cluster_parse(cspec, &c, &err)) {
    fprintf(stderr, "bench_sim: %s\n", err.msg);
    return 1;
  }
  double t0 = gopt_now();
  if (gopt_sim_new(g, c, NULL, &s, &err)) {
    fprintf(stderr, "bench_sim: %s\n", err.msg);
    return 1;
  }
  double setup_s = gopt_now() - t0;
  size_t N = g->nodes.n;
  int D = c->n_devices, T = omp_get_max_threads();
  /* a pool of random placements */
  enum { P = 64 };
  gopt_decisions *ds = calloc(P, sizeof *ds);
  uint64_t seed = 12345;
  int32_t *live = malloc(N * sizeof *live);
  size_t nlive = 0;
  for (size_t i = 0; i < N; i++)
    if (gopt_node_alive(g, (int32_t)i)) live[nlive++] = (int32_t)i;
  for (int i = 0; i < P; i++) {
    gopt_decisions_init(&ds[i], g);
    ds[i].placement = malloc(N * sizeof *ds[i].placement);
    /* contiguous blocks of the topological storage order, as a placer would produce, with
     * 2% of nodes moved at random: realistic transfer counts */
    for (size_t k = 0; k < N; k++) {
      int dv = (int)((k * (size_t)D) / N);
      if (xs(&seed) % 50 == 0) dv = (int)(xs(&seed) % (uint64_t)D);
      ds[i].placement[k] = dv;
    }
  }
  gopt_sim_state *st = gopt_sim_state_new(s);
  gopt_sim_result r;
  double full[MAXREP], inc[MAXREP], pass[MAXREP], fullT[MAXREP], incT[MAXREP];
  double chk = 0, step = 0;
  size_t transfers = 0;
  /* calibrate the number of evaluations per repetition to ~0.3 s */
  gopt_sim_state_apply(st, &ds[0], &err);
  t0 = gopt_now();
  gopt_sim_evaluate(st, &r, &err);
  double one = gopt_now() - t0;
  int K = (int)(0.3 / (one > 1e-7 ? one : 1e-7));
  if (K < 3) K = 3;
  if (K > 100000) K = 100000;
  for (int rep = 0; rep < reps; rep++) {
    /* pass over the input arrays */
    int PK = 20;
    t0 = gopt_now();
    for (int k = 0; k < PK; k++) chk += gopt_sim_input_pass(s);
    pass[rep] = (gopt_now() - t0) / PK;
    /* full: apply a whole placement + evaluate */
    t0 = gopt_now();
    for (int k = 0; k < K; k++) {
      gopt_sim_state_apply(st, &ds[k % P], &err);
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
      transfers = r.n_transfers;
    }
    full[rep] = K / (gopt_now() - t0);
    /* incremental: move one node, evaluate */
    gopt_sim_state_apply(st, &ds[0], &err);
    t0 = gopt_now();
    for (int k = 0; k < K; k++) {
      gopt_sim_state_set_device(st, live[xs(&seed) % nlive], (int)(xs(&seed) % (uint64_t)D));
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
    }
    inc[rep] = K / (gopt_now() - t0);
    /* all threads: each thread its own state */
    int KT = K * T;
    t0 = gopt_now();
#pragma omp parallel reduction(+ : step)
    {
      gopt_sim_state *ts = gopt_sim_state_new(s);
      gopt_sim_result tr;
      gopt_error te;
#pragma omp for schedule(static)
      for (int k = 0; k < KT; k++) {
        gopt_sim_state_apply(ts, &ds[k % P], &te);
        gopt_sim_evaluate(ts, &tr, &te);
        step += tr.step_time;
      }
      gopt_sim_state_free(ts);
    }
    fullT[rep] = KT / (gopt_now() - t0);
    t0 = gopt_now();
#pragma omp parallel reduction(+ : step)
    {
      gopt_sim_state *ts = gopt_sim_state_new(s);
      gopt_sim_result tr;
      gopt_error te;
      uint64_t sd = 777 + (uint64_t)omp_get_thread_num();
      gopt_sim_state_apply(ts, &ds[0], &te);
#pragma omp for schedule(static)
      for (int k = 0; k < KT; k++) {
        gopt_sim_state_set_device(ts, live[xs(&sd) % nlive], (int)(xs(&sd) % (uint64_t)D));
        gopt_sim_evaluate(ts, &tr, &te);
        step += tr.step_time;
      }
      gopt_sim_state_free(ts);
    }
    incT[rep] = KT / (gopt_now() - t0);
  }
  double mfull = median(full, reps), minc = median(inc, reps), mpass = median(pass, reps);
  double mfullT = median(fullT, reps), mincT = median(incT, reps);
  size_t bytes = gopt_sim_input_bytes(s);
  printf("{\"model\":\"%s\",\"nodes\":%zu,\"cluster\":\"%s\",\"threads\":%d,\"reps\":%d,"
         "\"evals_per_rep\":%d,\"setup_s\":%.6f,\"transfers\":%zu,"
         "\"full_per_s\":%.2f,\"incremental_per_s\":%.2f,\"full_per_s_all\":%.2f,"
         "\"incremental_per_s_all\":%.2f,\"input_bytes\":%zu,\"pass_s\":%.9f,\"pass_gb_s\":%.3f,"
         "\"full_over_pass\":%.2f,\"incremental_over_pass\":%.2f,\"checksum\":%.6g}\n",
         spec, nlive, cspec, T, reps, K, setup_s, transfers, mfull, minc, mfullT, mincT, bytes,
         mpass, bytes / mpass / 1e9, (1.0 / mfull) / mpass, (1.0 / minc) / mpass,
         fmod(chk + step, 1000.0));
  for (int i = 0; i < P; i++) gopt_decisions_clear(&ds[i]);
  free(ds);
  free(live);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
  return 0;
}
