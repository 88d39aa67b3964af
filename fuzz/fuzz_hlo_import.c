/* fuzz_hlo_import.c: libFuzzer target for HLO text import. Each input is parsed from memory; on
 * success the graph is exported as HLO text, the export must re-import to a graph with the same
 * instruction count and structural hash (gopt_graph_hash), and the graph's cost facts are
 * computed. Any crash, leak, sanitizer report or broken round trip is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gopt/hlo.h"
#include "gopt/ops.h"

static void quiet(const char *msg, void *user) { (void)msg; (void)user; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int init;
  if (!init) {
    gopt_set_warn_handler(quiet, NULL);
    init = 1;
  }
  gopt_error err = {0};
  gopt_graph *g = NULL, *h = NULL;
  char *text = NULL;
  size_t len = 0;
  if (gopt_hlo_load_mem((const char *)data, size, "fuzz.hlo", &g, &err) != 0) return 0;
  gopt_graph_stats st;
  gopt_graph_stats_compute(g, &st);
  if (gopt_hlo_save_mem(g, &text, &len, &err) != 0) {
    /* export may refuse what it cannot write (e.g. a tensor without an HLO type): not a finding */
    gopt_graph_free(g);
    return 0;
  }
  if (gopt_hlo_load_mem(text, len, "reimport.hlo", &h, &err) != 0) {
    fprintf(stderr, "re-import of an export failed: %s\n", err.msg);
    abort();
  }
  if (gopt_hlo_instruction_count(g) != gopt_hlo_instruction_count(h) ||
      gopt_graph_hash(g) != gopt_graph_hash(h)) {
    fprintf(stderr, "round trip changed the graph\n");
    abort();
  }
  free(text);
  gopt_graph_free(h);
  gopt_graph_free(g);
  return 0;
}
