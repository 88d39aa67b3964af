/* fuzz_gpu_measure.c: libFuzzer target for the GPU measurements loader (gopt_gpu_data_load, the
 * importer behind `gopt calibrate --gpu`). The input bytes are written to a temporary .json file
 * (in /dev/shm when writable) and loaded without a model directory; the load must either fail
 * with one error line that names the file, or give rows whose times are finite and > 0 and whose
 * features are finite and >= 0, which a fit then accepts. Any crash, sanitizer report or violated
 * check is a finding; ctest gpu_fuzz_seed_corpus replays fuzz/corpus_gpu through
 * fuzz/replay_onnx.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/gpu_cost.h"

static char path[96];

static void fz_fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_gpu_measure: %s: %s\n", what, detail);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0])
    snprintf(path, sizeof path, "%s/gopt_fuzz_gpu_%d.json", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm",
             (int)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  size_t w = size ? fwrite(data, 1, size, f) : 0;
  if (fclose(f) || w != size) return 0;
  gopt_error err = {0};
  gopt_gpu_data *d = NULL;
  int rc = gopt_gpu_data_load(path, NULL, &d, &err);
  if (rc) {
    if (d || !err.msg[0] || strchr(err.msg, '\n') || !strstr(err.msg, path)) fz_fail("error", err.msg);
  } else {
    for (size_t i = 0; i < d->n; i++) {
      const gopt_gpu_row *r = &d->rows[i];
      if (!(r->seconds > 0) || !isfinite(r->seconds)) fz_fail("row", "time not finite and > 0");
      for (int j = 0; j < GOPT_GPU_NCOEF; j++)
        if (!(r->phi[j] >= 0) || !isfinite(r->phi[j])) fz_fail("row", "feature not finite and >= 0");
    }
    double coef[GOPT_GPU_NCOEF];
    if (d->n <= 64 && gopt_gpu_fit(d, -1, 15, coef, &err)) fz_fail("fit", err.msg);
  }
  gopt_gpu_data_free(d);
  unlink(path);
  return 0;
}
