/* test_exec_cpuclock.c: the CPU time `gopt run --time --threads 1` reports (gopt_exec_time_run_cpu)
 * is the executing thread's, not the process's. Two other threads of the process spin the whole
 * time (as OpenBLAS's idle worker does for its first 0.1 s after the library is loaded) while a
 * one-thread executor runs a chain of four elementwise ops over 16 MB tensors, one timed run per
 * call: the run's reported CPU time must lie within this thread's CPU time across the call (and
 * within its wall time). With the process clock the spinners' time was counted too (the check
 * failed in every run: 24-41 ms reported for 10-12 ms of this thread's time). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "exec_graph.h"
#include "gopt/exec.h"

enum { SPINNERS = 2 };
static atomic_int stop;

/* Spins, reading its own CPU clock all the time: that read brings the kernel's count of the thread's
 * CPU time up to date, so the process clock sees the spinning at once (as it sees OpenBLAS's
 * worker, which calls sched_yield in its loop), while the thread keeps its fair share of a core. */
static void *spin(void *arg) {
  (void)arg;
  struct timespec ts;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return NULL;
}

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
  enum { N = 1 << 22 }; /* 16 MB a tensor: a run of the four ops takes several ms (ticks) */
  gopt_graph *g = gopt_graph_new("chain");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t d[1] = {N};
  int32_t t[5];
  const char *names[5] = {"x", "a", "b", "c", "y"};
  for (int i = 0; i < 5; i++) t[i] = tensor(g, names[i], GOPT_DT_FLOAT, 1, d);
  gopt_graph_add_input(g, t[0]);
  for (int i = 0; i < 4; i++) {
    char nm[8];
    snprintf(nm, sizeof nm, "r%d", i);
    node(g, i % 2 ? "Neg" : "Relu", nm, 1, &t[i], t[i + 1]);
  }
  gopt_graph_add_output(g, t[4]);
  finish(g);
  float *xv = calloc(N, sizeof *xv);
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1};
  CHECK_MSG(xv && gopt_exec_new(g, &o, &x, NULL, &err) == 0, "%s", err.msg);
  if (x) {
    for (int i = 0; i < N; i++) xv[i] = (float)(i % 7) - 3.0f;
    gopt_host_tensor in = {.dtype = GOPT_DT_FLOAT, .rank = 1, .dims = {N}, .data = xv, .nbytes = (size_t)N * sizeof *xv};
    CHECK_MSG(gopt_exec_set_input(x, 0, &in, &err) == 0, "%s", err.msg);
    pthread_t th[SPINNERS];
    for (int i = 0; i < SPINNERS; i++) CHECK(pthread_create(&th[i], NULL, spin, NULL) == 0);
    /* one timed run per call, bracketed by this thread's CPU clock: the run's CPU time lies inside */
    for (int r = 0; r < 5; r++) {
      double sec = 0, cpu = 0, t0 = thread_cpu();
      CHECK_MSG(gopt_exec_time_run_cpu(x, 0, 1, &sec, &cpu, &err) == 0, "%s", err.msg);
      double mine = thread_cpu() - t0;
      CHECK_MSG(cpu > 0 && cpu <= mine && cpu <= sec + 20e-6, "run %d: cpu %.6f s, this thread %.6f s, wall %.6f s", r,
                cpu, mine, sec);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < SPINNERS; i++) pthread_join(th[i], NULL);
  }
  gopt_exec_free(x);
  gopt_graph_free(g);
  free(xv);
  return check_exit("test_exec_cpuclock");
}
