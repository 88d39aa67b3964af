/* gopt/rewrite.h: graph rewriting: substitution rules, the matcher, rule application, rule
 * verification, rule generation (TASO's method) and the rewrite search (greedy, rl; a method
 * table for more). docs/REWRITE.md describes the design and the measured results.
 *
 * A rule is a source pattern and a target pattern over pattern variables (the tensors the pattern
 * reads). Two kinds exist:
 *   - pattern rules: both patterns are small op graphs (ops with attribute constraints; variables
 *     may be constrained to be constants); the i-th source output maps to the i-th target output;
 *     shapes are constrained by requiring the target's outputs to infer to the source outputs'
 *     shapes and dtypes. They are stored in rules.json and verified before use.
 *   - built-in rules: TASO's hand-written substitutions (Conv+BatchNorm/Mul/Add folding, merging
 *     parallel convs and matmuls that share an input, kernel enlargement, constant folding) whose
 *     targets compute new weights; rules.json names them.
 * Applying a rule works on a copy of the graph: the target ops are added, the source outputs'
 * uses rewired, the source ops removed, the graph checked for cycles, shapes re-inferred and
 * compared. An application is rejected when a source op output that is not mapped is used
 * outside the match, when it would create a cycle, or when shapes differ. */
#ifndef GOPT_REWRITE_H
#define GOPT_REWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/costdb.h"
#include "gopt/device.h"
#include "gopt/graph.h"
#include "gopt/learn_seq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_ruleset gopt_ruleset;
typedef struct gopt_rewrite_costs gopt_rewrite_costs;

/* The built-in (hand-written) rules only. NULL when out of memory. */
gopt_ruleset *gopt_ruleset_builtin(void);
/* Reads rules.json text (label names the source in messages) / a file. Pattern rules whose
 * "verified" field is not true are kept but disabled (never applied). Errors name the rule. */
int gopt_ruleset_parse(const char *text, const char *label, gopt_ruleset **out, gopt_error *err);
int gopt_ruleset_load(const char *path, gopt_ruleset **out, gopt_error *err);
/* Writes the rule set as JSON (atomically); extra (a JSON object text, may be NULL) is merged
 * into the top level (the generator's counts). */
int gopt_ruleset_save(const gopt_ruleset *rs, const char *path, const char *extra, gopt_error *err);
void gopt_ruleset_free(gopt_ruleset *rs); /* accepts NULL */

size_t gopt_ruleset_count(const gopt_ruleset *rs);
const char *gopt_ruleset_rule_name(const gopt_ruleset *rs, size_t i);
/* 1 when rule i may be applied (built-in, or a pattern rule that passed verification). */
int gopt_ruleset_rule_enabled(const gopt_ruleset *rs, size_t i);
/* Why rule i is disabled ("" when enabled). */
const char *gopt_ruleset_rule_reason(const gopt_ruleset *rs, size_t i);
/* Number of source ops of rule i (built-ins: the ops their pattern matches). */
int gopt_ruleset_rule_size(const gopt_ruleset *rs, size_t i);

/* Verifies every enabled pattern rule numerically: source and target built on each of the
 * rule's test shapes (and a doubled-size variant), run by the executor on random inputs from
 * seed, outputs compared (relative tolerance 1e-4). A failing rule is disabled with the reason
 * recorded. Returns the number of rules disabled (>= 0) or an error. */
int gopt_ruleset_verify(gopt_ruleset *rs, uint64_t seed, gopt_error *err);
/* Same for one rule; returns 0 when it holds, GOPT_EINVAL with the reason in err when it does not. */
int gopt_rule_verify(const gopt_ruleset *rs, size_t i, uint64_t seed, gopt_error *err);
/* Disables rule i, recording why. */
void gopt_ruleset_disable(gopt_ruleset *rs, size_t i, const char *why);
/* Test hook: enables rule i whatever its verification said (a deliberately wrong rule reaches
 * the search, so the final output check must catch it). */
void gopt_ruleset_force_enable(gopt_ruleset *rs, size_t i);

/* One place a rule matches: the host nodes matched by the source ops (in pattern order) and the
 * tensors bound to the pattern variables. */
#define GOPT_REWRITE_MAX_OPS 8
typedef struct gopt_rewrite_match {
  int32_t rule;
  int n_nodes, n_vars;
  int32_t nodes[GOPT_REWRITE_MAX_OPS];
  int32_t vars[GOPT_REWRITE_MAX_OPS];
} gopt_rewrite_match;

/* Every match of enabled rules (rule < 0) or of rule `rule` in g (shapes inferred), at most one
 * per anchor node and rule; *out is malloc'd (caller frees). Matches found here may still be
 * rejected by gopt_rewrite_apply. */
int gopt_rewrite_find(const gopt_graph *g, const gopt_ruleset *rs, int rule,
                      gopt_rewrite_match **out, size_t *n, gopt_error *err);

/* Application flags. */
enum {
  GOPT_RW_WEIGHTS = 1 << 0,   /* the rule computed new weight data */
  GOPT_RW_NODATA = 1 << 1     /* ... but the weights had no data: applied to the structure only */
};

/* Applies match m to a copy of g: *out receives the rewritten graph (shapes inferred, compacted).
 * Returns 0, or GOPT_EGRAPH ("would create a cycle"; "output 'x' of the match is used outside
 * it and not mapped") or GOPT_ESHAPE (target shapes differ) with the reason in err. *flags
 * (may be NULL) receives GOPT_RW_* bits. */
int gopt_rewrite_apply(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_match *m,
                       gopt_graph **out, int *flags, gopt_error *err);

/* Folds every live node whose inputs are all constants (and whose op is elementwise, broadcast,
 * layout or shape) into a constant computed by the executor; constants without data give
 * data-less results (*nodata counts them; may be NULL). Returns the number of nodes folded. */
int gopt_rewrite_fold_constants(gopt_graph *g, size_t *nodata, gopt_error *err);

/* Gives every data-less float/bool constant deterministic random data from seed (BatchNorm
 * scales and variances positive) so a structure-only model can run; returns the count or an
 * error naming a constant whose values cannot be made up. */
int64_t gopt_rewrite_materialize(gopt_graph *g, uint64_t seed, gopt_error *err);

/* Runs a and b (same inputs and outputs by position) with the executor on random inputs from
 * seed and compares every output (|x - y| <= atol + rtol |y|). Returns 0 when equal, GOPT_EINVAL
 * naming the output and the largest difference when not, other codes when a graph cannot run.
 * *max_diff (may be NULL) receives the largest absolute difference. */
int gopt_rewrite_compare(const gopt_graph *a, const gopt_graph *b, uint64_t seed, double rtol,
                         double atol, double *max_diff, gopt_error *err);

/* ---- search ---------------------------------------------------------------------------------- */
/* Where a running search is, for gopt_rewrite_opts.progress. */
typedef struct gopt_rewrite_progress {
  const char *method;          /* "greedy", "eqsat" or "rl" */
  const char *phase;           /* greedy: "search"; eqsat: "saturation" or "extraction"; rl: "episode" */
  size_t step, steps;          /* greedy: graphs dequeued and the budget; eqsat: the iteration
                                  (1-based) and the iteration limit; rl: rewrites applied and the
                                  episode's step limit */
  size_t size;                 /* greedy, rl: candidates generated; eqsat: live e-nodes */
  size_t applied;              /* eqsat, rl: rewrites applied so far (greedy: 0) */
  double cost_before;          /* the input's simulated step (seconds) */
  double best_cost;            /* greedy, rl: the best graph's so far; eqsat: 0 (known after extraction) */
  double elapsed, seconds;     /* wall seconds so far, and the limit (0: none) */
} gopt_rewrite_progress;

typedef struct gopt_rewrite_opts {
  const char *method;          /* "greedy", "eqsat" or "rl" (NULL: greedy) */
  const gopt_cluster *cluster; /* cost device: the simulator's step time (NULL: a V100) */
  double alpha;                /* greedy: accept cost < alpha * best (<= 0: 1.05) */
  long budget;                 /* greedy: graphs dequeued (<= 0: 100); eqsat: e-node limit
                                  (<= 0: 20000) */
  double seconds;              /* wall-clock limit (<= 0: none; eqsat: 10, 40% for saturation,
                                  the rest for the ILP; rl: 10, all its episodes) */
  double max_growth;           /* op count limit as a multiple of the original (<= 0: 2) */
  uint64_t seed;
  const char *policy;          /* rl: the policy file (NULL: the shipped policies/rewrite.gpol);
                                * budget = the episode's steps (<= 0: 100) */
  /* greedy, eqsat and rl: called often (after each dequeued graph; per eqsat iteration and every few
   * applications; per rl candidate tried) from the searching thread; the callee rate-limits its output. NULL: none. */
  void (*progress)(const gopt_rewrite_progress *p, void *user);
  void *progress_user;
  /* measured op costs (TASO's cost model; NULL: the cluster's analytical presets only): on the
   * cluster's measured devices (`host`) every op is priced from its measured time, and ops the
   * database lacks are profiled on demand (gopt_rewrite_costs_new) */
  gopt_rewrite_costs *costs;
  long samples;                /* rl: episodes sampled from the policy after its greedy one, seeds
                                  seed + 1 ... (0: 64; < 0: none), while `seconds` (rl default: 10,
                                  all episodes together) allows; the best graph of all is the result */
} gopt_rewrite_opts;

/* One applied rewrite of the best graph's history. */
typedef struct gopt_rewrite_step {
  int32_t rule;
  char where[96];              /* the anchor node's name in the graph it was applied to */
  int flags;                   /* GOPT_RW_* */
} gopt_rewrite_step;

typedef struct gopt_rewrite_result {
  gopt_graph *graph;           /* the best graph (owned; gopt_rewrite_result_clear frees it) */
  double cost_before, cost_after; /* simulated step seconds */
  double search_seconds;
  size_t dequeued, generated, rejected;
  gopt_rewrite_step *steps;    /* the best graph's applied rewrites, in order */
  size_t n_steps;
  int flags;                   /* OR of the steps' flags */
  char note[320];              /* the method's own summary (eqsat: iterations, e-graph size,
                                  why it stopped, which extraction was used); "" when none */
  int interrupted;             /* stopped early by gopt_rewrite_request_stop: graph is the best so
                                  far (greedy: the best dequeued or generated; eqsat: extracted
                                  from the e-graph saturated so far, without the ILP) */
  int input_kept;              /* eqsat: nothing cheaper was extracted, graph is a copy of the
                                  input (the other methods: n_steps == 0 says it) */
} gopt_rewrite_result;
void gopt_rewrite_result_clear(gopt_rewrite_result *r); /* accepts NULL */

size_t gopt_rewrite_method_count(void);
const char *gopt_rewrite_method_name(size_t i);
/* The simulated step time of g on c (NULL: a V100). On one device, Splits into contiguous blocks
 * (only size-1 dims before the axis) are views and cost nothing, as in TASO and Tensat. */
int gopt_rewrite_cost(const gopt_graph *g, const gopt_cluster *c, double *seconds, gopt_error *err);

/* Measured op costs for the search (rewrite_costdb.c): db (borrowed; it must outlive the costs)
 * holds per-op times keyed by gopt_op_signature, as `gopt run --profile --costdb` writes them.
 * Pricing a graph first profiles every op whose signature db lacks: the op alone in a one-op graph
 * (its constant inputs kept constant; inputs random from seed), run by the executor in plain
 * layouts on one thread (CPU time: steady on a loaded machine), 2 warm-ups then the median of `reps` runs (<= 0: 10), TASO's way; the time is added to
 * db (the caller saves it). An op the executor cannot run alone is remembered and priced by the
 * cluster's analytical model. NULL when out of memory. */
gopt_rewrite_costs *gopt_rewrite_costs_new(gopt_costdb *db, int reps, uint64_t seed);
void gopt_rewrite_costs_free(gopt_rewrite_costs *m); /* accepts NULL */
/* Ops profiled so far, ops that could not be, and the seconds spent profiling. */
void gopt_rewrite_costs_stats(const gopt_rewrite_costs *m, size_t *profiled, size_t *failed, double *seconds);
/* gopt_rewrite_cost with measured op costs (m NULL: the same as gopt_rewrite_cost): the simulated
 * step on c where c's measured devices take each op's time from the database (profiling the
 * missing ones first). Contiguous Splits count as views only without measurements (the executor
 * copies them, and its measured time says so). */
int gopt_rewrite_cost_measured(const gopt_graph *g, const gopt_cluster *c, gopt_rewrite_costs *m,
                               double *seconds, gopt_error *err);
/* Asks a running greedy or eqsat search to stop and return its best graph so far (async-signal-
 * safe: the CLI calls it on Ctrl-C); the flag stays set until gopt_rewrite_clear_stop. */
void gopt_rewrite_request_stop(void);
void gopt_rewrite_clear_stop(void);
/* Searches for a cheaper graph equivalent to g under the enabled rules of rs. g must have
 * inferred shapes. Returns 0 (r filled; the best may be g itself) or an error. */
int gopt_rewrite_search(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                        gopt_rewrite_result *r, gopt_error *err);
/* Replays r's steps on g (the graph the search started from, or the same structure with weight
 * data): each step's rule is matched again at its recorded anchor and applied. With check, each
 * intermediate graph is compared with g (gopt_rewrite_compare) and the first that differs is an
 * error naming its rule and location. *out receives the final graph. */
int gopt_rewrite_replay(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_result *r,
                        int check, uint64_t seed, gopt_graph **out, gopt_error *err);
/* Replays r's steps on g one at a time, comparing each intermediate graph with g
 * (gopt_rewrite_compare) and stops at the first that differs: err names its rule and location.
 * Returns 0 when every step holds. */
int gopt_rewrite_replay_check(const gopt_graph *g, const gopt_ruleset *rs,
                              const gopt_rewrite_result *r, uint64_t seed, gopt_error *err);

/* ---- rl (X-RLflow; docs/REWRITE.md "## rl") ------------------------------------------------- */
/* The rewriting MDP for the sequential agent (gopt/learn_seq.h): state = the current graph (node
 * features: the learn module's env features + cost ratio to the original and candidate count);
 * candidates = up to
 * GOPT_REWRITE_RL_CANDIDATES (rule, location) matches whose application succeeds and changes the
 * graph, the cheapest first (features: hashed rule id, rule size, relative simulated cost change,
 * op-count change, weight-changing flag; anchored at the match's first node); reward = (previous
 * cost - new cost) / original cost, so a step may lose; STOP ends the episode. Policies are of
 * kind GOPT_REWRITE_RL_KIND. */
#define GOPT_REWRITE_RL_KIND "rewrite"
#define GOPT_REWRITE_RL_CANDIDATES 64
typedef struct gopt_rewrite_rl gopt_rewrite_rl;
/* An environment over graphs[0..n) (shapes inferred; they must outlive it), o's cluster (NULL: a
 * V100), max_growth and seconds (per episode); episodes end after max_steps steps (<= 0: 32). */
int gopt_rewrite_rl_new(const gopt_graph *const *graphs, size_t n, const gopt_ruleset *rs,
                        const gopt_rewrite_opts *o, int max_steps, gopt_rewrite_rl **out, gopt_error *err);
void gopt_rewrite_rl_free(gopt_rewrite_rl *r); /* accepts NULL */
gopt_seq_env gopt_rewrite_rl_env(gopt_rewrite_rl *r);
/* The feature widths a rewrite policy needs (other fields 0: the defaults). */
gopt_seq_arch gopt_rewrite_rl_arch(void);
/* Trains p (kind GOPT_REWRITE_RL_KIND) on graphs with gopt_seq_train (to->max_steps: episode
 * length, default 16). */
int gopt_rewrite_rl_train(const gopt_graph *const *graphs, const char *const *names, size_t n,
                          const gopt_ruleset *rs, const gopt_rewrite_opts *o, gopt_seq_policy *p,
                          const gopt_seq_train_opts *to, gopt_learn_train_result *res, gopt_error *err);

/* ---- generation (TASO's method) -------------------------------------------------------------- */
typedef struct gopt_rulegen_opts {
  int max_ops;     /* 1..4 (default 3) */
  uint64_t seed;
  int use_z3;      /* prove candidates with Z3 over operator axioms (1 default when built in) */
  /* The bound on 4 ops (~4M graphs, millions of candidates): a candidate with a 4-op side is kept
   * only when its source has 4 ops and its target at most 2 (it removes >= 2 ops), and at most
   * max_rules4 of them are verified (0: 1000), in fingerprint order. Rules up to 3 ops: all. */
  size_t max_rules4;
  int only4;       /* keep only the 4-op candidates (to extend a 3-op rule file; named gen4_*) */
  const char *domains; /* comma-separated domain prefixes to run (gen, genc3, ..., genbn, genr);
                        * NULL: all. Rule names do not depend on it. */
} gopt_rulegen_opts;
typedef struct gopt_rulegen_stats {
  size_t graphs, candidates, pruned, verified, dropped_numeric, dropped_formal, proved, builtin;
  size_t rules4;   /* candidates with a 4-op side that went to verification */
  double seconds;
} gopt_rulegen_stats;
/* Enumerates graphs, fingerprints them, pairs, prunes and verifies: *out receives the built-in
 * rules followed by the verified generated rules (dropped ones kept disabled with the reason). */
int gopt_rulegen_run(const gopt_rulegen_opts *o, gopt_ruleset **out, gopt_rulegen_stats *st,
                     gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
