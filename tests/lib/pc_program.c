/* pc_program.c: a small external program built by check_install.sh against an installed gopt using
 * only `pkg-config --cflags --libs gopt`: it loads a zoo model the way `gopt info` does (build,
 * shape inference with constant folding) and prints "VERSION NODES" for comparison with the CLI. */
#include <gopt/ops.h>
#include <gopt/util.h>
#include <gopt/zoo.h>
#include <stdio.h>

int main(int argc, char **argv) {
  const char *spec = argc > 1 ? argv[1] : "resnet50";
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  if (gopt_zoo_build(spec, &g, &err) || gopt_infer_shapes(g, &io, &err)) {
    fprintf(stderr, "pc_program: %s\n", err.msg);
    gopt_graph_free(g);
    return 1;
  }
  printf("%s %zu\n", gopt_version(), gopt_graph_node_count(g));
  gopt_graph_free(g);
  return 0;
}
