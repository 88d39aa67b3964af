/* replay_onnx.c: replays saved fuzz inputs through an import fuzz target without libFuzzer (linked
 * with fuzz_onnx_import.c as replay_onnx, with fuzz_hlo_import.c as replay_hlo),
 * so every regression input runs in the ordinary (gcc) builds and under ASan+UBSan.
 *   replay_onnx DIR [PATTERN]   every DIR/PATTERN file (glob, default "regress-*"), sorted
 * Each file is read whole and handed to LLVMFuzzerTestOneInput (fuzz_onnx_import.c, linked in), the
 * same entry point the fuzzer calls. A crash, sanitizer report or broken round trip aborts the
 * process; finding no file, or a file that cannot be read, exits 1. New regress-* inputs are picked
 * up without touching the build. */
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gopt/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: replay_onnx DIR [PATTERN]   (PATTERN defaults to regress-*)\n");
    return 2;
  }
  char pat[4096];
  snprintf(pat, sizeof pat, "%s/%s", argv[1], argc > 2 ? argv[2] : "regress-*");
  glob_t gl;
  int grc = glob(pat, 0, NULL, &gl);
  if (grc == GLOB_NOMATCH || (grc == 0 && gl.gl_pathc == 0)) {
    fprintf(stderr, "replay_onnx: no input matches %s\n", pat);
    if (grc == 0) globfree(&gl);
    return 1;
  }
  if (grc != 0) {
    fprintf(stderr, "replay_onnx: cannot list %s\n", pat);
    return 1;
  }
  int rc = 0;
  for (size_t i = 0; i < gl.gl_pathc; i++) {
    void *buf = NULL;
    size_t len = 0;
    gopt_error err = {0};
    if (gopt_file_read(gl.gl_pathv[i], &buf, &len, &err)) {
      fprintf(stderr, "replay_onnx: %s\n", err.msg);
      rc = 1;
      continue;
    }
    printf("replay %s (%zu bytes)\n", gl.gl_pathv[i], len);
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
  }
  printf("replayed %zu input(s) matching %s\n", gl.gl_pathc, pat);
  globfree(&gl);
  return rc;
}
