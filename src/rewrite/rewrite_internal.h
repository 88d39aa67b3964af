/* rewrite_internal.h: the rewriting module's shared internals: the rule and pattern structures,
 * pattern building, the built-in rule table and graph-editing helpers (internal). */
#ifndef GOPT_REWRITE_INTERNAL_H
#define GOPT_REWRITE_INTERNAL_H

#include <jansson.h>

#include "gopt/rewrite.h"
#include "gopt/sim.h"

#define RW_MAX_IN 5 /* BatchNormalization */
#define RW_MAX_OUT 4
#define RW_MAX_VARS GOPT_REWRITE_MAX_OPS

/* A pattern reference: >= 0 is variable v; < 0 is output k of op i, encoded -(i * 8 + k) - 1. */
#define RW_REF_OP(i, k) (-((i) * 8 + (k)) - 1)
#define RW_REF_IS_OP(r) ((r) < 0)
#define RW_REF_OPI(r) ((-(r)-1) / 8)
#define RW_REF_OUTK(r) ((-(r)-1) % 8)

typedef struct rw_pop {
  int op;                 /* gopt_op kind */
  char type[32];          /* its type name */
  int n_in, n_out;
  int in[RW_MAX_IN];
  json_t *attrs;          /* attribute values (constraints in a source, values in a target) */
} rw_pop;

typedef struct rw_pattern {
  int n_ops, n_out;
  rw_pop ops[GOPT_REWRITE_MAX_OPS];
  int out[RW_MAX_OUT];
} rw_pattern;

/* A built-in rule: finds its matches and applies one to a graph copy (ids as in the original). */
typedef struct rw_builtin {
  const char *name;
  int size;  /* source ops */
  int (*find)(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n, size_t *cap);
  int (*apply)(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err);
} rw_builtin;

typedef struct rw_rule {
  char name[64];
  int builtin;            /* index in rw_builtins(), -1 for a pattern rule */
  int enabled;
  char reason[256];
  int n_vars;
  int var_const[RW_MAX_VARS];
  int var_rank[RW_MAX_VARS];   /* rank the variable must have (its test shapes'), -1: any */
  rw_pattern src, dst;
  json_t *shapes;         /* array of {"x0": [dims], ...} test shape assignments */
  json_t *extra;          /* other fields of the rule's JSON object, kept for saving */
} rw_rule;

/* Results of rw_instance_ok, by rule and variable shapes (see rewrite_exec.c). */
typedef struct rw_icache {
  uint64_t *key;          /* 0: empty */
  uint8_t *ok;
  size_t n, cap;
} rw_icache;

struct gopt_ruleset {
  rw_rule *r;
  size_t n, cap;
  rw_icache *icache;      /* created on first use (a const set may fill it) */
};

const rw_builtin *rw_builtins(size_t *n);
/* The "rl" search method (rewrite_rl.c). */
int rw_search_rl(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                 gopt_rewrite_result *r, gopt_error *err);
/* Appends a rule (copied; the set takes ownership of its json references). */
int rw_ruleset_push(gopt_ruleset *rs, const rw_rule *r);
gopt_ruleset *rw_ruleset_new(void);
void rw_rule_clear(rw_rule *r);
/* Adds variable v of rule r to g for a test: a graph input of its dims in the test shape set
 * `shape` (scaled by mul), or for a "const" variable an initializer: its int64 "values" from the
 * shape set (a Reshape target), else positive floats (BN parameters). Its id, or -1 (err set). */
int32_t rw_rule_var_tensor(gopt_graph *g, const rw_rule *r, int v, json_t *shape, int mul, gopt_error *err);
/* The same with variable v's rank and dims given; vals: its int64 "values" (a Reshape target) or
 * NULL (an input, or positive floats for a float constant). */
int32_t rw_rule_var_tensor_dims(gopt_graph *g, const rw_rule *r, int v, int rank, const int64_t *dims,
                                json_t *vals, gopt_error *err);
/* Parses / prints one pattern ({"ops": [...], "out": [...]}). */
int rw_pattern_parse(json_t *j, int n_vars, rw_pattern *p, const char *where, gopt_error *err);
json_t *rw_pattern_json(const rw_pattern *p);
void rw_pattern_clear(rw_pattern *p);
/* Adds pattern p's ops to g reading vars[v] for variable v; outs[k] receives the tensor of
 * pattern output k. New tensors get unknown shapes (run shape inference after). */
int rw_pattern_build(gopt_graph *g, const rw_pattern *p, const int32_t *vars, int32_t *outs,
                     gopt_error *err);
/* Node n's attributes equal the object a exactly (same names, same values). */
int rw_attrs_equal(const gopt_graph *g, int32_t n, const json_t *a);
/* Sets the attributes in a on node n. */
int rw_attrs_set(gopt_graph *g, int32_t n, const json_t *a);

/* Editing helpers (rewrite_edit.c). */
/* A new tensor with a generated name and unknown shape. */
int32_t rw_new_tensor(gopt_graph *g, gopt_error *err);
/* Rewires the uses of `from` to `to`; when `from` is a graph output, `to` takes its name (so
 * exported output names stay) and `from` gets a fresh one. */
int rw_replace(gopt_graph *g, int32_t from, int32_t to, gopt_error *err);
/* Removes live nodes whose outputs are all unused and not graph outputs, repeatedly. */
void rw_dce(gopt_graph *g);
/* A new constant tensor of dtype FLOAT/INT64 with the given shape and data (NULL: data-less). */
int32_t rw_const(gopt_graph *g, int dtype, int rank, const int64_t *dims, const void *data,
                 gopt_error *err);
/* Finishes an application: cycle check, DCE, shape inference (compact after). */
int rw_finish(gopt_graph *h, gopt_error *err);

/* 1 after gopt_rewrite_request_stop (until gopt_rewrite_clear_stop). */
int rw_stop_requested(void);

/* 1 when node n is a Split whose input has only size-1 dims before the axis: it cuts the input
 * into contiguous blocks, its outputs are views and, on one device, it costs nothing in
 * gopt_rewrite_cost (rewrite_search.c) and in eqsat's extraction. */
int rw_split_is_view(const gopt_graph *g, int32_t n);
/* The cost of g under the search options: gopt_rewrite_cost_measured with o's cluster and costs. */
int rw_cost(const gopt_graph *g, const gopt_rewrite_opts *o, double *seconds, gopt_error *err);
/* Profiles g's ops that m's database lacks (rewrite_costdb.c) and points so at the database when
 * c has a measured device (else leaves so analytical). */
int rw_costs_prepare(gopt_rewrite_costs *m, const gopt_graph *g, const gopt_cluster *c, gopt_sim_opts *so,
                     gopt_error *err);

/* 1 when pattern rule r (index i of rs) holds at the variable shapes of the match in h
 * (tensors vars[0 .. r->n_vars)), 0 when it does not (why says), < 0 on error. A rule is verified
 * on its test shapes, which are often square (every dim 4): a rule with an equal-halves Split
 * can hold there only because the pieces it cuts are equal (Concat(x1, x0) = Concat(Split(
 * Concat(x0, x1)) swapped) needs |x0| = |x1|), while every output shape still matches at other
 * shapes. Such rules (a Split in either side) are run on the match's own shapes (random values,
 * both sides compared); others return 1 at once. Results are cached in rs (not thread-safe). */
int rw_instance_ok(const gopt_ruleset *rs, size_t i, const gopt_graph *h, const int32_t *vars,
                   char *why, size_t n);
void rw_icache_free(rw_icache *c); /* accepts NULL */

/* Constant folding of live nodes with id >= first (rewrite_exec.c); returns the count folded. */
int rw_fold(gopt_graph *g, size_t first, size_t *nodata, gopt_error *err);

/* Copies node n's attributes (not tensor/graph ones: GOPT_EUNSUP) to node mn of m. */
int rw_copy_attrs(const gopt_graph *g, int32_t n, gopt_graph *m, int32_t mn);

/* Node n is foldable now (alive, a cheap op class, every input constant). */
int rw_foldable(const gopt_graph *g, int32_t n);
/* Folds node n (its outputs become constants; data-less when an input has no data). */
int rw_fold_node(gopt_graph *g, int32_t n, size_t *nodata, gopt_error *err);

/* Proves rule r with Z3 over the operator axioms (rewrite_z3.c): 1 proved, 0 not (why says). */
int rw_z3_prove(const rw_rule *r, int timeout_ms, char *why, size_t n);

/* gopt_rewrite_apply on h itself (no copy; h is left half-edited on failure): the replay of a
 * search's history on a model with weights, where a copy per step would double the memory. */
int rw_apply_inplace(gopt_graph *h, const gopt_ruleset *rs, const gopt_rewrite_match *m,
                     int *flags, gopt_error *err);

/* Appends m to the growing match array (*out, *n, *cap); GOPT_ENOMEM on failure. */
int rw_match_push(gopt_rewrite_match **out, size_t *n, size_t *cap, const gopt_rewrite_match *m);

#endif
