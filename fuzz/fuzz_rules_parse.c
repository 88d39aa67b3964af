/* fuzz_rules_parse.c: libFuzzer target for the rules.json reader (gopt_ruleset_parse). A parsed rule
 * set is written back and must parse again to as many rules. Build with fuzz/run.sh's
 * configuration; run: build-fuzz/fuzz/fuzz_rules_parse -max_total_time=60 DIR. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/rewrite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  gopt_ruleset *rs = NULL, *again = NULL;
  gopt_error err = {0};
  if (gopt_ruleset_parse(text, "fuzz.json", &rs, &err) == 0) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-rules-%d.json", (int)getpid());
    if (gopt_ruleset_save(rs, path, NULL, &err) == 0) {
      if (gopt_ruleset_load(path, &again, &err) != 0 ||
          gopt_ruleset_count(again) != gopt_ruleset_count(rs)) {
        fprintf(stderr, "rules did not round-trip: %s\n", err.msg);
        abort();
      }
      unlink(path);
    }
  }
  gopt_ruleset_free(again);
  gopt_ruleset_free(rs);
  free(text);
  return 0;
}
