/* exec_profile.c: profiling as TASO measures ops: warm-up runs, then the median of timed runs, for
 * every execution step in isolation and for the whole graph; distinct signatures are measured once
 * and cached in the measured-cost database (gopt_costdb). In context (GOPT_EXEC_PROFILE_CONTEXT)
 * each step is timed inside whole runs instead: the caches hold what the run left there (weights
 * are not warm from re-running the step) and the executor's per-step work (output allocation, the
 * frees after it, in-place hand-overs) is counted, and the steps' medians are scaled to add up to
 * the median run without step timers (context_scale). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/exec_internal.h"
#include "gopt/util.h"


/* CPU seconds of the run: with one executor thread the calling thread's clock (every kernel runs
 * on it: OpenMP, oneDNN and OpenBLAS are set to one thread), else the process's (every thread).
 * Not the process's clock for one thread: a library's idle worker counts there too. OpenBLAS
 * (pthread build) starts a worker per core when it is loaded, and that worker spins (sched_yield)
 * for about its first 0.1 s; on a free core it doubled the CPU time of the early runs of a short
 * `gopt run --time --threads 1` (shufflenet_v2_x1_0: 10.3 ms CPU for 5.2 ms wall). */
static double cpu_now(const gopt_exec *x) {
  struct timespec ts;
  clock_gettime(x->threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The profiler's clock: with one thread that thread's CPU clock (a loaded host's waits for a core
 * are not counted; on an idle host it is the run's wall time), else wall time. */
double ex_prof_now(const gopt_exec *x) { return x->threads == 1 ? cpu_now(x) : gopt_now(); }

/* Describes step k for the database: the node's signature, or the fused group's members. */
static void step_desc(const gopt_exec *x, const ex_kernel *k, char *buf, size_t len) {
  if (k->group < 0) {
    gopt_op_signature_desc(x->g, k->node, buf, len);
    return;
  }
  int n = snprintf(buf, len, "fused group of %d ops from %s:", k->n_members, gopt_node_name(x->g, k->node));
  for (int j = 0; j < k->n_out && n > 0 && (size_t)n < len; j++) {
    int32_t t = k->out[j];
    n += snprintf(buf + n, len - (size_t)n, " -> %s[%lld]", gopt_dtype_name(ex_dtype(x, t)), (long long)ex_numel(x, t));
  }
}

/* In-context step times: `reps` whole runs after `warmup`, each step timed inside them
 * (x->step_sec); ctx[s * reps + i] is step s's time in run i. */
static int context_times(gopt_exec *x, int warmup, int reps, double *ctx, gopt_error *err) {
  int rc = GOPT_OK;
  x->step_sec = calloc(x->n_steps + 1, sizeof *x->step_sec);
  if (!x->step_sec) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < warmup && !rc; i++) rc = gopt_exec_run(x, err);
  for (int i = 0; i < reps && !rc; i++) {
    rc = gopt_exec_run(x, err);
    for (size_t s = 0; !rc && s < x->n_steps; s++) ctx[s * (size_t)reps + (size_t)i] = x->step_sec[s];
  }
  free(x->step_sec);
  x->step_sec = NULL;
  return rc;
}

/* Median of every in-context sample of the steps with step s's signature (pooled over them). */
static double context_median(const gopt_exec *x, const double *ctx, int reps, size_t s, double *buf) {
  size_t n = 0;
  for (size_t q = s; q < x->n_steps; q++)
    if (x->steps[q].sig == x->steps[s].sig)
      for (int i = 0; i < reps; i++) buf[n++] = ctx[q * (size_t)reps + (size_t)i];
  return gopt_median(buf, n);
}

/* The factor that makes the steps' in-context medians add up to run_s, the median run measured
 * just before without step timers: a step's time is skewed (a run that waits for a core or loses
 * its cache slows a few steps, which their medians drop but the run's median keeps), and each step
 * pays for two reads of the CPU clock (about 1 us each on this VM), so unscaled the medians were
 * 5-8 % short of the run on the CNNs and long on small models. 1 when there is nothing to scale. */
static double context_scale(const gopt_exec *x, const double *ctx, int reps, double run_s, double *buf) {
  double sum_med = 0;
  for (size_t s = 0; s < x->n_steps; s++) sum_med += context_median(x, ctx, reps, s, buf);
  return sum_med > 0 && run_s > 0 ? run_s / sum_med : 1;
}

int gopt_exec_profile_run(gopt_exec *x, int warmup, int reps, gopt_costdb *db, gopt_exec_profile *p,
                          gopt_error *err) {
  return gopt_exec_profile_run_mode(x, warmup, reps, GOPT_EXEC_PROFILE_ISOLATED, db, p, err);
}

int gopt_exec_profile_run_mode(gopt_exec *x, int warmup, int reps, int mode, gopt_costdb *db, gopt_exec_profile *p,
                               gopt_error *err) {
  int rc = GOPT_OK;
  int saved_nan = x->check_nan;
  double *t = NULL, *ctx = NULL, *pool = NULL, scale = 1;
  memset(p, 0, sizeof *p);
  if (reps < 1) reps = 1;
  if (warmup < 0) warmup = 0;
  t = malloc((size_t)reps * sizeof *t);
  p->steps = calloc(x->n_steps + 1, sizeof *p->steps);
  if (mode == GOPT_EXEC_PROFILE_CONTEXT) {
    ctx = malloc((x->n_steps + 1) * (size_t)reps * sizeof *ctx);
    pool = malloc((x->n_steps + 1) * (size_t)reps * sizeof *pool);
  }
  if (!t || !p->steps || (mode == GOPT_EXEC_PROFILE_CONTEXT && (!ctx || !pool))) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  x->check_nan = 0;
  /* end to end */
  for (int i = 0; i < warmup; i++)
    if ((rc = gopt_exec_run(x, err))) goto done;
  for (int i = 0; i < reps; i++) {
    double t0 = ex_prof_now(x);
    if ((rc = gopt_exec_run(x, err))) goto done;
    t[i] = ex_prof_now(x) - t0;
  }
  p->seconds = gopt_median(t, (size_t)reps);
  p->peak_bytes = x->peak_bytes;
  if (ctx) { /* per step inside whole runs */
    if ((rc = context_times(x, warmup, reps, ctx, err))) goto done;
    scale = context_scale(x, ctx, reps, p->seconds, pool);
  } else { /* per step: one run that keeps every buffer, then each step alone */
    x->profiling = 1;
    rc = gopt_exec_run(x, err);
    if (rc) goto done;
  }
  p->n_steps = x->n_steps;
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    gopt_exec_op_time *o = &p->steps[s];
    o->node = k->node;
    o->group = k->group;
    o->sig = k->sig;
    gopt_cost_entry e;
    if (db && gopt_costdb_get(db, k->sig, &e)) {
      o->seconds = e.seconds;
      o->cached = 1;
    } else {
      int found = 0;
      for (size_t q = 0; q < s && !found; q++)
        if (p->steps[q].sig == k->sig) {
          o->seconds = p->steps[q].seconds;
          o->cached = p->steps[q].cached;
          found = 1;
        }
      if (!found && ctx) {
        o->seconds = context_median(x, ctx, reps, s, pool) * scale;
      } else if (!found) {
        for (int i = 0; i < warmup; i++)
          if ((rc = k->run(x, k, err))) goto done;
        for (int i = 0; i < reps; i++) {
          double t0 = ex_prof_now(x);
          if ((rc = k->run(x, k, err))) goto done;
          t[i] = ex_prof_now(x) - t0;
        }
        o->seconds = gopt_median(t, (size_t)reps);
      }
      if (!found) {
        p->n_measured++;
        if (db) {
          char desc[512];
          step_desc(x, k, desc, sizeof desc);
          e.sig = k->sig;
          e.op = k->group >= 0 ? "FusedElementwise" : gopt_node_type(x->g, k->node);
          e.desc = desc;
          e.seconds = o->seconds;
          e.reps = reps;
          if (gopt_costdb_put(db, &e)) {
            rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
            goto done;
          }
        }
      }
    }
    p->sum_op_seconds += o->seconds;
  }
done:
  x->profiling = 0;
  x->check_nan = saved_nan;
  ex_release_acts(x);
  free(t);
  free(ctx);
  free(pool);
  if (rc) gopt_exec_profile_clear(p);
  return rc;
}

int gopt_exec_time_run_cpu(gopt_exec *x, int warmup, int reps, double *seconds, double *cpu_seconds,
                           gopt_error *err) {
  int rc = GOPT_OK, saved_nan = x->check_nan;
  if (reps < 1) reps = 1;
  double *t = malloc(2 * (size_t)reps * sizeof *t), *c = t + reps;
  if (!t) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  x->check_nan = 0;
  for (int i = 0; i < warmup && !rc; i++) rc = gopt_exec_run(x, err);
  for (int i = 0; i < reps && !rc; i++) {
    double t0 = gopt_now(), c0 = cpu_now(x);
    rc = gopt_exec_run(x, err);
    c[i] = cpu_now(x) - c0;
    t[i] = gopt_now() - t0;
  }
  if (!rc) *seconds = gopt_median(t, (size_t)reps);
  if (!rc && cpu_seconds) *cpu_seconds = gopt_median(c, (size_t)reps);
  x->check_nan = saved_nan;
  free(t);
  return rc;
}

int gopt_exec_time_run(gopt_exec *x, int warmup, int reps, double *seconds, gopt_error *err) {
  return gopt_exec_time_run_cpu(x, warmup, reps, seconds, NULL, err);
}

void gopt_exec_profile_clear(gopt_exec_profile *p) {
  if (!p) return;
  free(p->steps);
  memset(p, 0, sizeof *p);
}
