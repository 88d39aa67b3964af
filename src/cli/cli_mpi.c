/* cli_mpi.c: the gopt command under mpirun (docs/SCALING.md): MPI start and end, the ordered
 * all-gather that distributed PPO training uses (gopt_learn_dist), the island-model search of
 * `gopt optimize` and the spreading of `gopt compare`'s methods over the ranks. libgopt itself has
 * no MPI. Built with -DGOPT_MPI=ON (the default when Open MPI is found); without it, or when the
 * process was not started by mpirun, every function here acts as a single process (rank 0 of 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/util.h"
#include "util/util_internal.h"

#ifdef GOPT_MPI
#include <mpi.h>
static int mpi_on = 0; /* MPI_Init succeeded (only under a launcher) */
#endif

static int mpi_rank = 0, mpi_size = 1;
int cli_mpi_search = 1;

int cli_mpi_rank(void) { return mpi_rank; }
int cli_mpi_size(void) { return mpi_size; }

void cli_mpi_init(int *argc, char ***argv) {
#ifdef GOPT_MPI
  /* only under a launcher: a plain `gopt` never pays for MPI start-up */
  if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) return;
  if (MPI_Init(argc, argv) != MPI_SUCCESS) return;
  mpi_on = 1;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  /* rank 0 speaks for the job: errors inside collectives reach it (cli_mpi_allgather) */
  if (mpi_rank != 0 && !getenv("GOPT_MPI_VERBOSE")) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) return;
  }
#else
  (void)argc;
  (void)argv;
#endif
}

void cli_mpi_finalize(void) {
#ifdef GOPT_MPI
  if (mpi_on) MPI_Finalize();
  mpi_on = 0;
#endif
}

/* The all-gather of gopt_learn_dist (learn.h): first every rank's status and error line, then (when
 * all are 0) the blocks, in rank order. With one process it only returns rc. */
int cli_mpi_allgather(void *buf, size_t bytes, int rc, void *user, gopt_error *err) {
  (void)user;
  if (mpi_size == 1) return rc;
#ifdef GOPT_MPI
  typedef struct { int rc; char msg[252]; } status;
  status mine = {rc, ""}, *all = calloc((size_t)mpi_size, sizeof *all);
  if (!all) return gopt_error_set(err, GOPT_ENOMEM, "mpi: out of memory");
  if (rc) snprintf(mine.msg, sizeof mine.msg, "%.250s", err && err->msg[0] ? err->msg : "failed");
  int mrc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  if (mrc != MPI_SUCCESS) { free(all); return gopt_error_set(err, GOPT_EIO, "mpi: MPI_Allgather failed (error %d) on rank %d", mrc, mpi_rank); }
  for (int r = 0; r < mpi_size; r++)
    if (all[r].rc) {
      int code = all[r].rc;
      gopt_error_set(err, code, "rank %d of %d: %s", r, mpi_size, all[r].msg);
      free(all);
      return code;
    }
  free(all);
  if (bytes > (size_t)0x7fffffff) return gopt_error_set(err, GOPT_EINVAL, "mpi: all-gather block of %zu bytes is too large", bytes);
  mrc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  if (mrc != MPI_SUCCESS) return gopt_error_set(err, GOPT_EIO, "mpi: MPI_Allgather of %zu bytes failed (error %d) on rank %d", bytes, mrc, mpi_rank);
  return 0;
#else
  (void)buf;
  (void)bytes;
  (void)err;
  return rc;
#endif
}

const gopt_learn_dist *cli_mpi_learn_dist(void) {
  static gopt_learn_dist d;
  if (mpi_size == 1) return NULL;
  d.rank = mpi_rank;
  d.size = mpi_size;
  d.allgather = cli_mpi_allgather;
  d.user = NULL;
  return &d;
}

int cli_mpi_bcast(void *buf, size_t bytes, int root) {
#ifdef GOPT_MPI
  if (mpi_size > 1 && MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS) return GOPT_EIO;
#else
  (void)buf;
  (void)bytes;
  (void)root;
#endif
  return 0;
}

/* ---- island-model search ------------------------------------------------------------------ */

/* What one rank reports after a round: status, its best, evaluations used, then its x. */
typedef struct island_head {
  gopt_env_result best;
  uint64_t evals;
  int interrupted;
} island_head;

int cli_mpi_island_search(const char *method, gopt_env *e, const gopt_search_opts *o, double *x_best,
                          gopt_search_result *res, gopt_error *err) {
  size_t nv = gopt_env_nvars(e), bytes = sizeof(island_head) + nv * sizeof(double);
  int P = mpi_size, rc = 0;
  uint64_t B = o->budget_evals, per = B / (uint64_t)P, mine = per + ((uint64_t)mpi_rank < B % (uint64_t)P);
  /* migration every `interval` evaluations of each rank: GOPT_MPI_MIGRATE, else a quarter of the
   * smallest share (at least 25); the same number of rounds on every rank */
  const char *mig = getenv("GOPT_MPI_MIGRATE");
  uint64_t interval = mig && atoll(mig) > 0 ? (uint64_t)atoll(mig) : per / 4;
  if (interval < 25) interval = 25;
  uint64_t rounds = B ? (per + interval - 1) / interval : 4;
  if (rounds < 1) rounds = 1;
  unsigned char *buf = calloc((size_t)P, bytes);
  double *x = malloc((nv + 1) * sizeof *x);
  if (!buf || !x) { free(buf); free(x); return gopt_error_set(err, GOPT_ENOMEM, "mpi: out of memory (islands)"); }
  memset(res, 0, sizeof *res);
  double t0 = gopt_now();
  if (o->x0) memcpy(x_best, o->x0, nv * sizeof *x_best);
  else gopt_env_default(e, x_best);
  int have = 0;
  for (uint64_t k = 0; k < rounds; k++) {
    gopt_search_opts ro = *o;
    /* the seed stream of (seed, rank, round): distinct for every triple */
    uint64_t s = o->seed, a = gopt_splitmix64(&s);
    a ^= (uint64_t)mpi_rank * 0xd1b54a32d192ed03ULL;
    a += k * 0x8cb92ba72f3d8dd7ULL;
    ro.seed = gopt_splitmix64(&a);
    ro.x0 = x_best;
    ro.budget_evals = B ? (k + 1 < rounds ? mine / rounds : mine - (rounds - 1) * (mine / rounds)) : 0;
    if (B && ro.budget_evals == 0) ro.budget_evals = 1;
    ro.budget_seconds = o->budget_seconds > 0 ? o->budget_seconds / (double)rounds : 0;
    ro.on_improve = NULL;
    ro.dist = NULL; /* each island searches alone */
    ro.progress = o->progress && mpi_rank == 0;
    gopt_search_result rr;
    memset(&rr, 0, sizeof rr);
    int lrc = gopt_search_run(method, e, &ro, x, &rr, err);
    island_head *h = (island_head *)(buf + (size_t)mpi_rank * bytes);
    h->best = rr.best;
    h->evals = rr.evals;
    h->interrupted = rr.interrupted;
    memcpy(buf + (size_t)mpi_rank * bytes + sizeof *h, x, nv * sizeof *x);
    if ((rc = cli_mpi_allgather(buf, bytes, lrc, NULL, err))) break;
    /* migration: every island continues from the best of all (ties: the lowest rank) */
    int best = -1, stop = 0;
    for (int r = 0; r < P; r++) {
      const island_head *hr = (const island_head *)(buf + (size_t)r * bytes);
      res->evals += hr->evals;
      stop |= hr->interrupted;
      if (best < 0 || gopt_env_result_cmp(&hr->best, &((const island_head *)(buf + (size_t)best * bytes))->best) < 0) best = r;
    }
    const island_head *hb = (const island_head *)(buf + (size_t)best * bytes);
    if (!have || gopt_env_result_cmp(&hb->best, &res->best) < 0) {
      res->best = hb->best;
      memcpy(x_best, buf + (size_t)best * bytes + sizeof *hb, nv * sizeof *x_best);
      have = 1;
    }
    if (stop) { res->interrupted = 1; break; }
  }
  res->seconds = gopt_now() - t0;
  free(buf);
  free(x);
  return rc;
}
