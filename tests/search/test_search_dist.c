/* test_search_dist.c: distributed evaluation of a search (gopt_search_opts.dist, docs/SCALING.md)
 * without MPI: P forked processes play P ranks, each with its own graph and environment, joined by
 * an all-gather made of a process-shared barrier and a shared mapping. Every rank must return bitwise the one-process result (x_best,
 * best, evaluation count) for the batch methods (random, brkga: batches split over the ranks, P
 * not dividing the batch included) and for a sequential one (local: runs whole on every rank). */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gopt/learn.h"
#include "search_fixture.h"

#define MAXP 3
#define BLOCKMAX (64 * 1024)

/* What the ranks share (an anonymous shared mapping: ranks are forked processes, as under mpirun). */
typedef struct fake_world {
  pthread_barrier_t bar; /* process-shared */
  int rcs[MAXP];
  unsigned char data[MAXP][BLOCKMAX]; /* each rank's block during an exchange */
  double x[MAXP][4096];               /* each rank's result */
  gopt_search_result res[MAXP];
  int rc[MAXP];
  char msg[MAXP][256];
} fake_world;

typedef struct fake_rank {
  fake_world *w;
  gopt_learn_dist dist;
} fake_rank;

/* gopt_learn_allgather_fn over processes: publish my block, wait, copy the others', wait. */
static int fake_allgather(void *buf, size_t bytes, int rc, void *user, gopt_error *err) {
  fake_rank *me = user;
  fake_world *w = me->w;
  int r = me->dist.rank, P = me->dist.size;
  if (bytes > BLOCKMAX) rc = gopt_error_set(err, GOPT_EINVAL, "test: block of %zu bytes", bytes);
  if (!rc) memcpy(w->data[r], (unsigned char *)buf + (size_t)r * bytes, bytes);
  w->rcs[r] = rc;
  pthread_barrier_wait(&w->bar);
  int any = 0;
  for (int q = 0; q < P; q++) any = any ? any : w->rcs[q];
  if (!any)
    for (int q = 0; q < P; q++)
      if (q != r) memcpy((unsigned char *)buf + (size_t)q * bytes, w->data[q], bytes);
  pthread_barrier_wait(&w->bar);
  return any ? gopt_error_set(err, any, "rank failed") : 0;
}

/* Rank r: its own graph, cluster and environment, the search; results into the shared world. */
static void run_rank(fake_world *w, int r, int P, const char *method, const gopt_search_opts *o) {
  fake_rank me = {.w = w, .dist = {.rank = r, .size = P, .allgather = fake_allgather}};
  me.dist.user = &me;
  gopt_search_opts ro = *o;
  ro.dist = &me.dist;
  gopt_graph *g = NULL;
  gopt_error err = {0};
  gopt_cluster *c = fx_cluster(4, 16e9, 0.25, 0);
  gopt_env *e = NULL;
  w->rc[r] = gopt_zoo_build("gpt2:layers=1", &g, &err);
  if (!w->rc[r]) e = fx_env(g, c, GOPT_TASK_PLACEMENT, NULL, 1);
  if (!w->rc[r]) w->rc[r] = e ? gopt_search_run(method, e, &ro, w->x[r], &w->res[r], &err) : -1;
  snprintf(w->msg[r], sizeof w->msg[r], "%.200s", err.msg);
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

static void check_case(gopt_graph *g, gopt_cluster *c, const char *method, uint64_t seed, int P) {
  gopt_search_opts o;
  memset(&o, 0, sizeof o);
  o.budget_evals = 301;
  o.seed = seed;
  o.threads = 1;
  /* the one-process reference */
  gopt_env *e = fx_env(g, c, GOPT_TASK_PLACEMENT, NULL, 1);
  size_t nv = gopt_env_nvars(e);
  CHECK(nv <= 4096);
  static double xr[4096];
  gopt_search_result rr;
  gopt_error err = {0};
  CHECK_MSG(gopt_search_run(method, e, &o, xr, &rr, &err) == 0, "%s", err.msg);
  gopt_env_free(e);

  fake_world *w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(w != MAP_FAILED);
  if (w == MAP_FAILED) return;
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&w->bar, &ba, (unsigned)P);
  pid_t pid[MAXP];
  for (int r = 1; r < P; r++)
    if ((pid[r] = fork()) == 0) {
      run_rank(w, r, P, method, &o);
      _exit(0);
    }
  run_rank(w, 0, P, method, &o);
  for (int r = 1; r < P; r++) waitpid(pid[r], NULL, 0);
  pthread_barrier_destroy(&w->bar);
  pthread_barrierattr_destroy(&ba);
  for (int r = 0; r < P; r++) {
    CHECK_MSG(w->rc[r] == 0, "%s P=%d rank %d: %s", method, P, r, w->msg[r]);
    CHECK_MSG(w->res[r].evals == rr.evals && rr.evals == o.budget_evals,
              "%s P=%d rank %d: %llu evaluations, one process %llu", method, P, r,
              (unsigned long long)w->res[r].evals, (unsigned long long)rr.evals);
    const gopt_env_result *a = &w->res[r].best, *b = &rr.best; /* field by field: the struct has padding */
    int same = a->objective == b->objective && a->step_time == b->step_time && a->peak_mem == b->peak_mem &&
               a->mem_over == b->mem_over && a->feasible == b->feasible;
    CHECK_MSG(same && memcmp(w->x[r], xr, nv * sizeof *xr) == 0, "%s P=%d seed %llu rank %d: %.17g, one process %.17g",
              method, P, (unsigned long long)seed, r, a->objective, b->objective);
  }
  munmap(w, sizeof *w);
}

int main(void) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  CHECK_MSG(gopt_zoo_build("gpt2:layers=1", &g, &err) == 0, "%s", err.msg);
  gopt_cluster *c = fx_cluster(4, 16e9, 0.25, 0);
  if (!g || !c) return check_exit("test_search_dist");
  const char *methods[] = {"random", "brkga", "local"};
  for (size_t m = 0; m < 3; m++)
    for (uint64_t seed = 1; seed <= 2; seed++)
      for (int P = 2; P <= MAXP; P++) check_case(g, c, methods[m], seed, P);
  gopt_cluster_free(c);
  gopt_graph_free(g);
  return check_exit("test_search_dist");
}
