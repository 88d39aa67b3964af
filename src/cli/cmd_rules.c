/* cmd_rules.c: `gopt rules generate -o rules.json [--max-ops N] [--seed S]` (TASO's method: the
 * built-in substitutions plus enumerated, fingerprinted, pruned and verified pattern rules),
 * `gopt rules verify F` (numerical verification of every pattern rule) and `gopt rules list F`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/rewrite.h"

static const char rules_help[] =
    "usage: gopt rules generate -o rules.json [--max-ops 1..4] [--seed S] [--max-rules4 N] [--only4]\n"
    "         [--domains D1,D2,...]\n"
    "         --max-ops 4 is bounded: 4-op sources with targets of at most 2 ops, the first N\n"
    "         (default 1000) in fingerprint order; rules up to 3 ops are all kept, or none with\n"
    "         --only4 (the built-ins and gen4_* rules, to add to a 3-op file); the conv\n"
    "         (genc*_*), Gemm (geng_*), BatchNormalization (genbn_*) and Reshape (genr*_*)\n"
    "         domains stop at 3 ops; --domains runs only the domains named (rule names stay)\n"
    "       gopt rules verify RULES.json     (numerically; failing rules listed, exit 1)\n"
    "       gopt rules list RULES.json\n";

static int generate(int argc, char **argv) {
  const char *out = NULL;
  long max_ops = 3, seed = 0, max4 = 1000;
  int only4 = 0;
  const char *domains = NULL;
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      fputs(rules_help, stdout);
      return 0;
    }
    if (!strcmp(s, "--only4")) {
      only4 = 1;
      continue;
    }
    if (i + 1 >= argc) return cli_usage_error("rules", "%s needs a value", s);
    if (!strcmp(s, "-o")) out = argv[++i];
    else if (!strcmp(s, "--domains")) domains = argv[++i];
    else if (!strcmp(s, "--max-ops")) {
      if (cli_parse_long("rules", s, argv[++i], 1, 4, &max_ops)) return 2;
    } else if (!strcmp(s, "--max-rules4")) {
      if (cli_parse_long("rules", s, argv[++i], 1, 10000000, &max4)) return 2;
    } else if (!strcmp(s, "--seed")) {
      if (cli_parse_long("rules", s, argv[++i], 0, 0x7fffffff, &seed)) return 2;
    } else
      return cli_usage_error("rules", "unknown flag '%s' (see gopt rules --help)", s);
  }
  if (!out) return cli_usage_error("rules", "generate: missing -o rules.json");
  if (only4 && max_ops != 4) return cli_usage_error("rules", "--only4 needs --max-ops 4");
  gopt_rulegen_opts o = {(int)max_ops, (uint64_t)seed, 1, (size_t)max4, only4, domains};
  gopt_rulegen_stats st;
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  if (gopt_rulegen_run(&o, &rs, &st, &err)) {
    fprintf(stderr, "gopt rules: %s\n", err.msg);
    return 1;
  }
  char extra[512];
  snprintf(extra, sizeof extra,
           "{\"generator\": {\"max_ops\": %ld, \"seed\": %ld, \"graphs\": %zu, \"candidates\": %zu, "
           "\"pruned\": %zu, \"verified\": %zu, \"dropped_numeric\": %zu, \"dropped_formal\": %zu, "
           "\"builtin\": %zu, \"rules4\": %zu}}",
           max_ops, seed, st.graphs, st.candidates, st.pruned, st.verified, st.dropped_numeric,
           st.dropped_formal, st.builtin, st.rules4);
  int rc = gopt_ruleset_save(rs, out, extra, &err);
  gopt_ruleset_free(rs);
  if (rc) {
    fprintf(stderr, "gopt rules: %s\n", err.msg);
    return 1;
  }
  printf("%s: %zu graphs enumerated, %zu candidate rules, %zu pruned, %zu verified (%zu proved by Z3), "
         "%zu dropped (numeric), %zu dropped (Z3), %zu built-in; %zu of the rules have a 4-op "
         "source; %.1f s\n",
         out, st.graphs, st.candidates, st.pruned, st.verified, st.proved, st.dropped_numeric,
         st.dropped_formal, st.builtin, st.rules4, st.seconds);
  return 0;
}

int cli_rules(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(rules_help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "generate")) return generate(argc, argv);
  if (strcmp(argv[1], "verify") && strcmp(argv[1], "list"))
    return cli_usage_error("rules", "unknown action '%s' (generate, verify, list)", argv[1]);
  if (argc != 3) return cli_usage_error("rules", "%s needs one RULES.json", argv[1]);
  gopt_ruleset *rs = NULL;
  gopt_error err = {0};
  if (gopt_ruleset_load(argv[2], &rs, &err)) {
    fprintf(stderr, "gopt rules: %s\n", err.msg);
    return 1;
  }
  int bad = 0;
  if (!strcmp(argv[1], "verify")) bad = gopt_ruleset_verify(rs, 1, &err);
  for (size_t i = 0; i < gopt_ruleset_count(rs); i++)
    printf("%-28s %d ops  %s%s\n", gopt_ruleset_rule_name(rs, i), gopt_ruleset_rule_size(rs, i),
           gopt_ruleset_rule_enabled(rs, i) ? "enabled" : "disabled: ", gopt_ruleset_rule_reason(rs, i));
  gopt_ruleset_free(rs);
  return bad > 0 ? 1 : 0;
}
