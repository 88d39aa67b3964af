/* bench_sim.c: simulator throughput on zoo graphs: full evaluations per second (apply a whole
 * random placement + simulate), the same one-node change simulated from time 0 (incremental
 * off), incremental ones (move one random node to another device, or change one random node's
 * priority, then simulate: replayed from a checkpoint) with delta evaluation off (replayed to the
 * end) and on (stopped where the state converges back to the recorded run), with the
 * distribution of the replayed share of the timeline per delta evaluation, on one thread and on
 * all threads (one state per thread), next to the time of one sequential pass over the
 * simulator's own input arrays measured in the same run (the memory-bandwidth reference).
 * One-thread rates and the pass are timed in thread CPU time (robust to the machine being shared:
 * time-slicing does not count), all-thread rates in wall time. Usage: bench_sim SPEC [CLUSTER
 * [REPS]]; prints one JSON object. Medians over REPS. Also estimates, for 200 device moves,
 * how much of the timeline a splice of a time-shifted recorded tail could skip (shift_*). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
/* Seconds of CPU time this thread has used. */
static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
/* Moves one random node to a random other device (a real change: never its current one). */
static void move_one(gopt_sim_state *st, const int32_t *live, size_t nlive, int D, uint64_t *seed) {
  int32_t n = live[xs(seed) % nlive];
  int cur = gopt_sim_state_device(st, n), dv = (int)(xs(seed) % (uint64_t)(D > 1 ? D - 1 : 1));
  if (D > 1 && dv >= cur) dv++;
  gopt_sim_state_set_device(st, n, D > 1 ? dv : 0);
}

#define MAXREP 64

/* ---- how much of a device move's timeline a time-shifted splice could skip (an estimate) ----
 * Exact delta evaluation splices the recorded tail only where the new run's state equals the
 * recorded one. A shifted splice would also accept a tail shifted by a constant: one for the
 * whole cluster (global), or one per device (not exact in general: an upper bound). For one move,
 * units in order of their recorded start time: the longest suffix whose start times are all
 * equal (shift 0), all shifted by one constant (global), and, per device, the suffix of its
 * units shifted by that device's own constant (the splice point is the latest of those). The
 * replayed share each would leave is 1 - suffix share - the share before the replay started
 * (units, not loop iterations: an estimate). */
typedef struct shift_ctx {
  gopt_sim_item *a, *b; /* recorded and new timelines (kernels first, unit order) */
  size_t cap;
  int32_t *ord;
} shift_ctx;

static const gopt_sim_item *g_sort_items;
static int by_start(const void *x, const void *y) {
  const gopt_sim_item *a = &g_sort_items[*(const int32_t *)x], *b = &g_sort_items[*(const int32_t *)y];
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (*(const int32_t *)x > *(const int32_t *)y) - (*(const int32_t *)x < *(const int32_t *)y);
}

/* One move's suffix shares (out[0]: shift 0, out[1]: global shift, out[2]: per-device shifts),
 * from the recorded timeline in c->a and the new one in c->b (K kernels each). */
static void shift_suffixes(shift_ctx *c, size_t K, int D, double step, double out[3]) {
  for (size_t i = 0; i < K; i++) c->ord[i] = (int32_t)i;
  g_sort_items = c->a;
  qsort(c->ord, K, sizeof *c->ord, by_start);
  double tol = 1e-9 * step;
  size_t e = K, gl = K;
  while (e > 0) { /* exactly equal */
    const gopt_sim_item *x = &c->a[c->ord[e - 1]], *y = &c->b[c->ord[e - 1]];
    if (x->start != y->start || x->end != y->end || x->device != y->device) break;
    e--;
  }
  double dg = c->b[c->ord[K - 1]].start - c->a[c->ord[K - 1]].start;
  while (gl > 0) {
    const gopt_sim_item *x = &c->a[c->ord[gl - 1]], *y = &c->b[c->ord[gl - 1]];
    if (x->device != y->device || fabs((y->start - x->start) - dg) > tol ||
        fabs((y->end - x->end) - dg) > tol)
      break;
    gl--;
  }
  /* per device: walking back from the end, each device keeps the shift of its last unit; the
   * first unit (from the end) off its device's shift is the latest break, the splice point */
  double dd[64];
  int set[64] = {0};
  size_t pd = D <= 64 ? K : 0;
  while (pd > 0) {
    const gopt_sim_item *x = &c->a[c->ord[pd - 1]], *y = &c->b[c->ord[pd - 1]];
    int d = x->device;
    double s = y->start - x->start;
    if (!set[d]) {
      set[d] = 1;
      dd[d] = s;
    }
    if (x->device != y->device || fabs(s - dd[d]) > tol || fabs((y->end - x->end) - dd[d]) > tol)
      break;
    pd--;
  }
  out[0] = (double)(K - e) / (double)K;
  out[1] = (double)(K - gl) / (double)K;
  out[2] = (double)(K - pd) / (double)K;
}

/* Quantile q of v[0..n) (sorts v). */
static double quantile(double *v, size_t n, double q) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, dcmp);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

/* K one-node changes (kind 0: device move, 1: priority) each evaluated, from the state's current
 * decisions; returns evaluations per second (thread CPU time) and appends each evaluation's
 * replayed share of the timeline (iterations simulated / iterations of the step) to share and its
 * time to tm. */
static double changes(gopt_sim_state *st, int kind, int K, const int32_t *live, size_t nlive,
                      int D, uint64_t *seed, double *share, double *tm, size_t *nshare,
                      double *step) {
  gopt_sim_result r;
  gopt_error err = {0};
  double t = 0;
  for (int k = 0; k < K; k++) {
    if (kind == 0) move_one(st, live, nlive, D, seed);
    else gopt_sim_state_set_priority(st, live[xs(seed) % nlive], (double)(xs(seed) % 1000000) / 1e6);
    double t0 = cpu_now();
    gopt_sim_evaluate(st, &r, &err);
    double dt = cpu_now() - t0;
    t += dt;
    *step += r.step_time;
    gopt_sim_inc_stats is;
    gopt_sim_state_inc_stats(st, &is);
    tm[*nshare] = dt;
    share[(*nshare)++] = (double)(is.last_to - is.last_from) / (is.last_iters > 0 ? is.last_iters : 1);
  }
  return K / t;
}

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
  double full[MAXREP], resim[MAXREP], inc[MAXREP], incp[MAXREP], pass[MAXREP], fullT[MAXREP],
      incT[MAXREP], repl[MAXREP], dd[MAXREP], dp[MAXREP];
  double chk = 0, step = 0;
  size_t transfers = 0;
  /* calibrate the number of evaluations per repetition to ~0.3 s */
  gopt_sim_state_apply(st, &ds[0], &err);
  gopt_sim_evaluate(st, &r, &err); /* warm: first touch of the state's pages */
  gopt_sim_state_apply(st, &ds[1], &err);
  t0 = cpu_now();
  gopt_sim_evaluate(st, &r, &err);
  double one = cpu_now() - t0;
  int K = (int)(0.3 / (one > 1e-7 ? one : 1e-7));
  if (K < 3) K = 3;
  if (K > 100000) K = 100000;
  /* delta evaluations: enough to time (~0.3 s at the calibrated rate, at least 200) */
  int KD = K * 10 < 200 ? 200 : K * 10;
  double *shd = malloc((size_t)KD * (size_t)reps * sizeof *shd),
         *shp = malloc((size_t)KD * (size_t)reps * sizeof *shp),
         *tmd = malloc((size_t)KD * (size_t)reps * sizeof *tmd),
         *tmp = malloc((size_t)KD * (size_t)reps * sizeof *tmp);
  size_t nshd = 0, nshp = 0;
  for (int rep = 0; rep < reps; rep++) {
    /* pass over the input arrays */
    int PK = 20;
    t0 = cpu_now();
    for (int k = 0; k < PK; k++) chk += gopt_sim_input_pass(s);
    pass[rep] = (cpu_now() - t0) / PK;
    /* full: apply a whole placement + evaluate */
    t0 = cpu_now();
    for (int k = 0; k < K; k++) {
      gopt_sim_state_apply(st, &ds[k % P], &err);
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
      transfers = r.n_transfers;
    }
    full[rep] = K / (cpu_now() - t0);
    /* one-node moves simulated from time 0 (incremental off) */
    gopt_sim_state_apply(st, &ds[0], &err);
    gopt_sim_state_set_incremental(st, 0);
    t0 = cpu_now();
    for (int k = 0; k < K; k++) {
      move_one(st, live, nlive, D, &seed);
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
    }
    resim[rep] = K / (cpu_now() - t0);
    gopt_sim_state_set_incremental(st, 1);
    /* incremental without delta: move one node, evaluate (replayed to the end) */
    gopt_sim_state_set_delta(st, 0);
    gopt_sim_state_apply(st, &ds[0], &err);
    gopt_sim_evaluate(st, &r, &err);
    gopt_sim_inc_stats is0, is1;
    gopt_sim_state_inc_stats(st, &is0);
    t0 = cpu_now();
    for (int k = 0; k < K; k++) {
      move_one(st, live, nlive, D, &seed);
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
    }
    inc[rep] = K / (cpu_now() - t0);
    gopt_sim_state_inc_stats(st, &is1);
    /* share of the event-loop iterations the replays ran */
    repl[rep] = (double)(is1.iters_replayed - is0.iters_replayed + is1.iters_full - is0.iters_full) /
                ((double)K * (is1.last_iters > 0 ? is1.last_iters : 1));
    /* incremental: change one node's priority, evaluate */
    t0 = cpu_now();
    for (int k = 0; k < K; k++) {
      gopt_sim_state_set_priority(st, live[xs(&seed) % nlive], (double)(xs(&seed) % 1000000) / 1e6);
      gopt_sim_evaluate(st, &r, &err);
      step += r.step_time;
    }
    incp[rep] = K / (cpu_now() - t0);
    /* delta: one-node device moves, then priority changes (each timed per evaluation) */
    gopt_sim_state_set_delta(st, 1);
    gopt_sim_state_apply(st, &ds[0], &err);
    gopt_sim_evaluate(st, &r, &err);
    dd[rep] = changes(st, 0, KD, live, nlive, D, &seed, shd, tmd, &nshd, &step);
    dp[rep] = changes(st, 1, KD, live, nlive, D, &seed, shp, tmp, &nshp, &step);
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
        move_one(ts, live, nlive, D, &sd);
        gopt_sim_evaluate(ts, &tr, &te);
        step += tr.step_time;
      }
      gopt_sim_state_free(ts);
    }
    incT[rep] = KT / (gopt_now() - t0);
  }
  /* shifted-splice estimate over SH device moves (delta on, a random walk as above) */
  enum { SH = 200 };
  double shs[3][SH], shact[SH];
  {
    shift_ctx sc;
    sc.cap = (size_t)r.n_kernels + r.n_transfers + 4 * N + 16;
    sc.a = malloc(sc.cap * sizeof *sc.a);
    sc.b = malloc(sc.cap * sizeof *sc.b);
    sc.ord = malloc(sc.cap * sizeof *sc.ord);
    gopt_sim_state_set_delta(st, 1);
    gopt_sim_state_apply(st, &ds[0], &err);
    gopt_sim_evaluate(st, &r, &err);
    for (int k = 0; k < SH; k++) {
      size_t K0 = r.n_kernels;
      double step0 = r.step_time;
      gopt_sim_timeline(st, sc.a, sc.cap);
      move_one(st, live, nlive, D, &seed);
      gopt_sim_evaluate(st, &r, &err);
      gopt_sim_timeline(st, sc.b, sc.cap);
      gopt_sim_inc_stats si;
      gopt_sim_state_inc_stats(st, &si);
      double it = si.last_iters > 0 ? si.last_iters : 1, from = si.last_from / it, suf[3];
      shact[k] = (si.last_to - si.last_from) / it;
      shift_suffixes(&sc, K0, D, step0 > r.step_time ? step0 : r.step_time, suf);
      for (int j = 0; j < 3; j++) shs[j][k] = suf[j] + from >= 1 ? 0 : 1 - suf[j] - from;
    }
    free(sc.a);
    free(sc.b);
    free(sc.ord);
  }
  double shm[3] = {0, 0, 0}, sh50[3], sha50 = quantile(shact, SH, 0.5);
  for (int j = 0; j < 3; j++) {
    for (int k = 0; k < SH; k++) shm[j] += shs[j][k] / SH;
    sh50[j] = quantile(shs[j], SH, 0.5);
  }
  double mfull = median(full, reps), mresim = median(resim, reps), minc = median(inc, reps);
  double mincp = median(incp, reps), mpass = median(pass, reps), mrepl = median(repl, reps);
  double mfullT = median(fullT, reps), mincT = median(incT, reps);
  double mdd = median(dd, reps), mdp = median(dp, reps);
  double shd50 = quantile(shd, nshd, 0.5), shd90 = quantile(shd, nshd, 0.9),
         shp50 = quantile(shp, nshp, 0.5), shp90 = quantile(shp, nshp, 0.9);
  double tmd50 = quantile(tmd, nshd, 0.5), tmp50 = quantile(tmp, nshp, 0.5);
  double shdm = 0, shpm = 0;
  for (size_t i = 0; i < nshd; i++) shdm += shd[i] / (double)nshd;
  for (size_t i = 0; i < nshp; i++) shpm += shp[i] / (double)nshp;
  size_t bytes = gopt_sim_input_bytes(s);
  gopt_sim_inc_stats is;
  gopt_sim_state_inc_stats(st, &is);
  printf("{\"model\":\"%s\",\"nodes\":%zu,\"cluster\":\"%s\",\"threads\":%d,\"reps\":%d,"
         "\"evals_per_rep\":%d,\"setup_s\":%.6f,\"transfers\":%zu,\"iterations\":%d,"
         "\"full_per_s\":%.2f,\"resim_per_s\":%.2f,\"incremental_per_s\":%.2f,"
         "\"incremental_prio_per_s\":%.2f,\"full_per_s_all\":%.2f,"
         "\"incremental_per_s_all\":%.2f,\"replayed_share\":%.3f,\"record_bytes\":%zu,"
         "\"input_bytes\":%zu,\"pass_s\":%.9f,\"pass_gb_s\":%.3f,"
         "\"full_over_pass\":%.2f,\"resim_over_pass\":%.2f,\"incremental_over_pass\":%.2f,"
         "\"speedup_vs_full\":%.2f,\"speedup_vs_resim\":%.2f,\"prio_speedup_vs_resim\":%.2f,"
         "\"delta_dev_per_s\":%.2f,\"delta_prio_per_s\":%.2f,\"delta_dev_speedup_vs_full\":%.2f,"
         "\"delta_prio_speedup_vs_full\":%.2f,\"delta_dev_speedup_vs_resim\":%.2f,"
         "\"delta_evals\":%d,\"share_dev_p50\":%.4f,\"share_dev_p90\":%.4f,\"share_dev_mean\":%.4f,"
         "\"share_prio_p50\":%.4f,\"share_prio_p90\":%.4f,\"share_prio_mean\":%.4f,"
         "\"delta_dev_p50_s\":%.9f,\"delta_prio_p50_s\":%.9f,\"delta_dev_p50_speedup_vs_full\":%.2f,"
         "\"delta_prio_p50_speedup_vs_full\":%.2f,"
         "\"shift_moves\":%d,\"shift_actual_p50\":%.4f,\"shift_none_p50\":%.4f,\"shift_none_mean\":%.4f,"
         "\"shift_global_p50\":%.4f,\"shift_global_mean\":%.4f,\"shift_device_p50\":%.4f,"
         "\"shift_device_mean\":%.4f,"
         "\"checksum\":%.6g}\n",
         spec, nlive, cspec, T, reps, K, setup_s, transfers, is.last_iters, mfull, mresim, minc,
         mincp, mfullT, mincT, mrepl, is.record_bytes, bytes, mpass, bytes / mpass / 1e9,
         (1.0 / mfull) / mpass, (1.0 / mresim) / mpass, (1.0 / minc) / mpass, minc / mfull,
         minc / mresim, mincp / mresim, mdd, mdp, mdd / mfull, mdp / mfull, mdd / mresim, KD, shd50,
         shd90, shdm, shp50, shp90, shpm, tmd50, tmp50, (1.0 / mfull) / tmd50,
         (1.0 / mfull) / tmp50, (int)SH, sha50, sh50[0], shm[0], sh50[1], shm[1], sh50[2], shm[2],
         fmod(chk + step, 1000.0));
  free(shd);
  free(shp);
  free(tmd);
  free(tmp);
  for (int i = 0; i < P; i++) gopt_decisions_clear(&ds[i]);
  free(ds);
  free(live);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
  return 0;
}
