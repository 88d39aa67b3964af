/* fuzz_onnx_import.c: libFuzzer target for ONNX import. Each input is loaded from memory (external
 * data never read); on success the graph is exported, the export must re-import to an equal graph
 * (same gopt_graph_hash), then shapes are inferred and the graph exported again. Any crash, leak,
 * sanitizer report or broken round trip is a finding. Set GOPT_FUZZ_NO_INFER=1 to skip shape
 * inference (to tell import/export findings from src/ops ones). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gopt/onnx.h"
#include "gopt/ops.h"

static void quiet(const char *msg, void *user) { (void)msg; (void)user; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int init, no_infer;
  if (!init) {
    gopt_set_warn_handler(quiet, NULL);
    no_infer = getenv("GOPT_FUZZ_NO_INFER") != NULL;
    init = 1;
  }
  gopt_onnx_load_opts opts = {NULL, 0};
  gopt_error err = {0};
  gopt_graph *g = NULL, *h = NULL;
  void *buf = NULL;
  size_t len = 0;
  if (gopt_onnx_load_mem(data, size, "fuzz.onnx", &opts, &g, &err) != 0) return 0;
  if (gopt_onnx_save_mem(g, &buf, &len, &err) != 0) {
    fprintf(stderr, "export of an imported graph failed: %s\n", err.msg);
    abort();
  }
  if (gopt_onnx_load_mem(buf, len, "reimport.onnx", &opts, &h, &err) != 0) {
    fprintf(stderr, "re-import of an export failed: %s\n", err.msg);
    abort();
  }
  if (gopt_graph_hash(g) != gopt_graph_hash(h)) {
    fprintf(stderr, "round trip changed the graph hash\n");
    abort();
  }
  free(buf);
  buf = NULL;
  gopt_graph_free(h);
  if (!no_infer) {
    gopt_infer_opts io = {1, 1};
    if (gopt_infer_shapes(g, &io, &err) == 0 && gopt_onnx_save_mem(g, &buf, &len, &err) == 0)
      free(buf);
  }
  gopt_graph_free(g);
  return 0;
}
