/* bench_import.c: time and memory of getting a model into gopt: ONNX import (or zoo build) and
 * shape inference, median over repetitions, plus peak RSS and IR bytes per node. Prints one JSON
 * object. Run each model in its own process so the peak RSS is that model's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "gopt/zoo.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_import MODEL [REPS]\n");
    return 2;
  }
  const char *model = argv[1];
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (reps < 1) reps = 1;
  int is_file = strstr(model, ".onnx") != NULL;
  double *t_load = calloc((size_t)reps, sizeof(double)), *t_inf = calloc((size_t)reps, sizeof(double));
  size_t nodes = 0, ir_bytes = 0;
  gopt_set_warn_handler(NULL, NULL);
  for (int r = 0; r < reps; r++) {
    gopt_graph *g = NULL;
    gopt_error err = {0};
    double t0 = gopt_now();
    int rc = is_file ? gopt_onnx_load(model, NULL, &g, &err) : gopt_zoo_build(model, &g, &err);
    double t1 = gopt_now();
    if (rc == 0) {
      gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
      rc = gopt_infer_shapes(g, &io, &err);
    }
    double t2 = gopt_now();
    if (rc) {
      fprintf(stderr, "bench_import: %s\n", err.msg);
      gopt_graph_free(g);
      return 1;
    }
    t_load[r] = t1 - t0;
    t_inf[r] = t2 - t1;
    nodes = gopt_graph_node_count(g);
    ir_bytes = gopt_graph_memory(g, 0);
    gopt_graph_free(g);
  }
  qsort(t_load, (size_t)reps, sizeof(double), cmp_d);
  qsort(t_inf, (size_t)reps, sizeof(double), cmp_d);
  printf("{\"model\":\"%s\",\"nodes\":%zu,\"reps\":%d,\"load_s\":%.6f,\"infer_s\":%.6f,"
         "\"ir_bytes\":%zu,\"ir_bytes_per_node\":%.1f,\"peak_rss\":%zu}\n",
         model, nodes, reps, t_load[reps / 2], t_inf[reps / 2], ir_bytes,
         nodes ? (double)ir_bytes / (double)nodes : 0.0, gopt_peak_rss());
  free(t_load);
  free(t_inf);
  return 0;
}
