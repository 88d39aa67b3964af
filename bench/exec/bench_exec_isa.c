/* bench_exec_isa.c: the executor's vector kernels under each instruction set (GOPT_ISA=baseline,
 * avx2, avx512; those this CPU lacks are reported as skipped). Times, as medians of REPS runs after
 * WARMUP (gopt_exec_time_run), single-op graphs on x[4,64,112,112] (the gopt kernels that are
 * hot in the corpus: Relu, a broadcast Add, Sigmoid, Tanh, Exp, a contiguous ReduceMean, a strided
 * ReduceMax, GlobalAveragePool) and, with --chain DIR, the ew_chain model of
 * bench/exec/bench_exec_torch.py (DIR/model.onnx, DIR/test_data_set_0/input_0.pb or random) fused
 * (--fusion auto's groups) and unfused. Prints one JSON object: {"threads", "isas": {ISA:
 * {kernel: seconds} or null}}; bench/exec/run.sh puts it beside PyTorch's times of the same ops.
 * Usage: bench_exec_isa [--threads N] [--warmup W] [--reps R] [--chain DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

enum { S0 = 4, S1 = 64, S2 = 112, S3 = 112 };

static const char *const isas[] = {"baseline", "avx2", "avx512"};
static const char *const kernels[] = {"relu", "add_bcast", "sigmoid", "tanh", "exp",
                                      "reduce_mean_last", "reduce_max_c", "global_avg_pool"};
#define N_KERNELS (sizeof kernels / sizeof kernels[0])

static int opts_threads = 1, opts_warmup = 3, opts_reps = 10;

/* A graph of one op on x[4,64,112,112] (c[64,1,1] for the Add), opset 11 (Reduce axes as
 * attributes). NULL on error (printed). */
static gopt_graph *kernel_graph(const char *k) {
  gopt_error err = {0};
  gopt_graph *g = gopt_graph_new(k);
  int64_t xd[4] = {S0, S1, S2, S3}, cd[3] = {S1, 1, 1};
  gopt_graph_set_opset(g, "", 11);
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 4, xd, &err);
  gopt_graph_add_input(g, x);
  int64_t od[4] = {S0, S1, S2, S3};
  const char *type = "Relu";
  int32_t in[2] = {x, -1};
  int n_in = 1;
  int64_t axis = -1;
  if (!strcmp(k, "add_bcast")) {
    static float c[S1];
    for (int i = 0; i < S1; i++) c[i] = 0.01f * (float)i;
    in[1] = gopt_graph_add_tensor(g, "c", GOPT_DT_FLOAT, 3, cd, &err);
    gopt_tensor_set_const(g, in[1], c, sizeof c, &err);
    type = "Add";
    n_in = 2;
  } else if (!strcmp(k, "sigmoid")) type = "Sigmoid";
  else if (!strcmp(k, "tanh")) type = "Tanh";
  else if (!strcmp(k, "exp")) type = "Exp";
  else if (!strcmp(k, "reduce_mean_last")) type = "ReduceMean", axis = 3, od[3] = 1;
  else if (!strcmp(k, "reduce_max_c")) type = "ReduceMax", axis = 1, od[1] = 1;
  else if (!strcmp(k, "global_avg_pool")) type = "GlobalAveragePool", od[2] = od[3] = 1;
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_FLOAT, 4, od, &err);
  int32_t n = gopt_graph_add_node(g, type, "op", n_in, in, 1, &y, &err);
  if (n >= 0 && axis >= 0) gopt_node_set_ints(g, n, "axes", &axis, 1);
  gopt_graph_add_output(g, y);
  gopt_infer_opts io = {.fold_constants = 0, .keep_source_shapes = 1};
  if (n < 0 || gopt_infer_shapes(g, &io, &err)) {
    fprintf(stderr, "bench_exec_isa: %s: %s\n", k, err.msg);
    gopt_graph_free(g);
    return NULL;
  }
  return g;
}

/* Median seconds of one run of g under the current GOPT_ISA (input: in, or random); -1 on error,
 * -2 when the CPU lacks the instruction set. */
static double time_graph(const gopt_graph *g, const int32_t *group, const gopt_host_tensor *in) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = opts_threads, .seed = 1, .group = group};
  double sec = -1;
  if (gopt_exec_new(g, &o, &x, NULL, &err)) {
    if (strstr(err.msg, "does not support")) return -2;
    fprintf(stderr, "bench_exec_isa: %s\n", err.msg);
    return -1;
  }
  int rc = in ? gopt_exec_set_input(x, 0, in, &err) : gopt_exec_random_inputs(x, 1, &err);
  if (!rc) rc = gopt_exec_time_run(x, opts_warmup, opts_reps, &sec, &err);
  if (rc) {
    fprintf(stderr, "bench_exec_isa: %s\n", err.msg);
    sec = -1;
  }
  gopt_exec_free(x);
  return sec;
}

/* Loads the ew_chain model and its input from dir. */
static gopt_graph *load_chain(const char *dir, gopt_host_tensor *in) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  if (gopt_onnx_load(path, NULL, &g, &err) || gopt_infer_shapes(g, &io, &err)) {
    fprintf(stderr, "bench_exec_isa: %s\n", err.msg);
    gopt_graph_free(g);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/test_data_set_0/input_0.pb", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return g; /* no input file: random inputs (the times do not depend on the values) */
  fclose(f);
  if (gopt_exec_tensor_read(path, in, &err)) {
    fprintf(stderr, "bench_exec_isa: %s\n", err.msg);
    gopt_graph_free(g);
    return NULL;
  }
  return g;
}

int main(int argc, char **argv) {
  const char *chain = NULL;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && !strcmp(argv[i], "--threads")) opts_threads = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--warmup")) opts_warmup = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--reps")) opts_reps = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--chain")) chain = argv[++i];
    else {
      fprintf(stderr, "usage: bench_exec_isa [--threads N] [--warmup W] [--reps R] [--chain DIR]\n");
      return 2;
    }
  }
  if (opts_threads < 1 || opts_reps < 1 || opts_warmup < 0) {
    fprintf(stderr, "bench_exec_isa: --threads and --reps must be >= 1, --warmup >= 0\n");
    return 2;
  }
  gopt_graph *kg[N_KERNELS];
  for (size_t k = 0; k < N_KERNELS; k++)
    if (!(kg[k] = kernel_graph(kernels[k]))) return 1;
  gopt_host_tensor cin = {0};
  gopt_graph *cg = chain ? load_chain(chain, &cin) : NULL;
  int32_t *group = NULL;
  if (chain && !cg) return 1;
  if (cg) {
    group = malloc((cg->nodes.n + 1) * sizeof *group);
    if (!group) return 1;
    gopt_exec_auto_fusion(cg, group);
  }
  int status = 0;
  printf("{\"threads\": %d, \"warmup\": %d, \"reps\": %d, \"isas\": {", opts_threads, opts_warmup,
         opts_reps);
  for (int i = 0; i < 3; i++) {
    setenv("GOPT_ISA", isas[i], 1);
    printf("%s\"%s\": ", i ? ", " : "", isas[i]);
    double t0 = time_graph(kg[0], NULL, NULL);
    if (t0 == -2) {
      printf("null");
      continue;
    }
    printf("{");
    for (size_t k = 0; k < N_KERNELS; k++) {
      double t = k == 0 ? t0 : time_graph(kg[k], NULL, NULL);
      if (t < 0) status = 1;
      printf("%s\"%s\": %.9f", k ? ", " : "", kernels[k], t);
    }
    if (cg) {
      const gopt_host_tensor *ci = cin.data ? &cin : NULL;
      double tf = time_graph(cg, group, ci), tu = time_graph(cg, NULL, ci);
      if (tf < 0 || tu < 0) status = 1;
      printf(", \"ew_chain_fused\": %.9f, \"ew_chain_unfused\": %.9f", tf, tu);
    }
    printf("}");
    fflush(stdout);
  }
  printf("}}\n");
  unsetenv("GOPT_ISA");
  for (size_t k = 0; k < N_KERNELS; k++) gopt_graph_free(kg[k]);
  gopt_graph_free(cg);
  gopt_host_tensor_clear(&cin);
  free(group);
  return status;
}
