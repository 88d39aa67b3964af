/* fuzz_policy_load.c: libFuzzer target for the policy file loader (gopt_policy_load, behind every
 * --policy P.gpol). A .gpol file ends in a checksum, so random bytes stop at it; the input is
 * therefore framed here. First byte even: the rest is the file as is (magic, version, lengths,
 * checksum). Odd: the rest is a 2-byte little-endian metadata length, the metadata text and the
 * weights checkpoint, written as a well-formed file of this build's version with a correct
 * checksum, so mutations reach the metadata parser and the checkpoint reader. The bytes go to a
 * temporary .gpol (in /dev/shm when writable). The load must either fail with one error line that
 * names the file and no policy, or give a policy that saves and loads back. Any crash, sanitizer
 * report or violated check is a finding; ctest policy_fuzz_seed_corpus replays fuzz/corpus_policy
 * through fuzz/replay_onnx.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/learn.h"
#include "gopt/util.h"

static char path[96], path2[96];

static void fz_fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_policy_load: %s: %s\n", what, detail);
  abort();
}

static void put(FILE *f, const void *p, size_t n) {
  if (n) fwrite(p, 1, n, f);
}

/* Writes the input as the policy file; 0 when it could not be written. */
static int write_input(const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  if (size == 0 || data[0] % 2 == 0) {
    put(f, data + (size > 0), size - (size > 0));
    return fclose(f) == 0;
  }
  size_t rest = size - 1, ml = rest >= 2 ? (size_t)data[1] | (size_t)data[2] << 8 : 0;
  const uint8_t *m = data + 1 + (rest >= 2 ? 2 : rest);
  size_t avail = rest >= 2 ? rest - 2 : 0;
  if (ml > avail) ml = avail;
  uint32_t ver = GOPT_LEARN_FILE_VERSION, ml32 = (uint32_t)ml;
  uint64_t cl = avail - ml;
  size_t n = 8 + 4 + 4 + ml + 8 + (size_t)cl;
  uint8_t *b = malloc(n + 8);
  if (!b) { fclose(f); return 0; }
  memcpy(b, "GOPTPOL1", 8);
  memcpy(b + 8, &ver, 4);
  memcpy(b + 12, &ml32, 4);
  memcpy(b + 16, m, ml);
  memcpy(b + 16 + ml, &cl, 8);
  memcpy(b + 24 + ml, m + ml, (size_t)cl);
  uint64_t h = gopt_hash_bytes(b, n, 0);
  memcpy(b + n, &h, 8);
  put(f, b, n + 8);
  free(b);
  return fclose(f) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) {
    const char *dir = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
    snprintf(path, sizeof path, "%s/gopt_fuzz_pol_%d.gpol", dir, (int)getpid());
    snprintf(path2, sizeof path2, "%s/gopt_fuzz_pol_%d_b.gpol", dir, (int)getpid());
  }
  if (!write_input(data, size)) return 0;
  gopt_error err = {0};
  gopt_policy *p = NULL, *q = NULL;
  int rc = gopt_policy_load(path, -1, &p, &err);
  if (rc) {
    if (p || !err.msg[0] || strchr(err.msg, '\n') || !strstr(err.msg, path)) fz_fail("error", err.msg);
  } else {
    if (!p || !gopt_policy_kind(p)) fz_fail("load", "no policy");
    (void)gopt_policy_arch(p);
    if (gopt_policy_save(p, path2, &err)) fz_fail("save", err.msg);
    if (gopt_policy_load(path2, -1, &q, &err)) fz_fail("reload", err.msg);
    unlink(path2);
  }
  gopt_policy_free(p);
  gopt_policy_free(q);
  unlink(path);
  return 0;
}
