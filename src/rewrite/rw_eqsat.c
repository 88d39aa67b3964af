/* rw_eqsat.c: the `eqsat` rewrite method (Tensat, Yang et al. MLSys 2021): equality saturation
 * over the e-graph of rw_egraph.c with the same rules greedy uses, then extraction (rw_extract.c).
 *
 * Each iteration collects every match, then applies them: pattern rules are e-matched (pattern
 * ops bound to e-nodes, variables to e-classes; multi-output patterns whose outputs share only
 * inputs are matched as Tensat's multi-patterns, by joining on the shared variables); built-in
 * rules (C code that matches IR graphs and computes weights) are matched on the store graph,
 * whose nodes are every e-node wired to one tensor per child class, and (those of several ops)
 * on its views, where each e-node reads another member of its classes (rw_view.c), so a
 * built-in finds a pattern through any members of one op kind. A match is applied by
 * building its source as a small IR graph, rewriting that with gopt_rewrite_apply (the same
 * application, shape checks, cycle check and weight folding as greedy) and importing the result
 * into the e-graph, merged with the matched outputs; weights over RW_EG_LEAN bytes stay out of the
 * fragment, and those the rewrite derives from them are folded lazily (rw_lazy.c). Then the
 * e-graph is rebuilt and cycles are filtered. Stops at saturation, the iteration limit, the
 * e-node limit or the time limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gopt/ops.h"
#include "gopt/util.h"
#include "rewrite/rw_egraph.h"

#define EQ_ITERS 10          /* Tensat's iteration limit */
#define EQ_NODES 20000       /* Tensat's node limit (live e-nodes; --budget overrides) */
#define EQ_SECONDS 10.0      /* default total time (saturation gets 40%) */
#define EQ_RULE_MATCHES 2000 /* matches of one rule per iteration */
#define EQ_MULTI_ITERS 1     /* Tensat's k_multi: multi-pattern rules in the first iterations only */
/* passes over its bytes, timed like eq_copy_rate's fresh copy, to compute a lazily folded
 * constant: the recipe's fragment is copied with its weights, folded by the executor, its output
 * copied out and materialized, chained recipes run first, every fresh buffer page-faulted in;
 * VGG-19's 494 MB of folded classifier weights took 15-16 such passes on a 2-core EPYC
 * (2026-11-29, conversion 4.8-5.9 s at 1.2-1.65 GB/s) */
#define EQ_LAZY_PASSES 16.0
#define EQ_VIEW_DEPTH 2      /* views per op kind: the first and second member of that kind in a class */
#define EQ_MAX_OV 16         /* inputs of a built-in match found on a view that differ from S's */

typedef struct eq_match {
  int32_t rule;
  int32_t op[GOPT_REWRITE_MAX_OPS];  /* S nodes of the source ops */
  int32_t var[RW_MAX_VARS];          /* classes (pattern rules) / S tensors (built-ins) */
  int n_nodes;                       /* built-ins: nodes of the IR match */
  int n_ov;                          /* built-ins found on a view (rw_view.c): input ov_slot[i] of */
  uint8_t ov_op[EQ_MAX_OV], ov_slot[EQ_MAX_OV]; /* matched node op[ov_op[i]] reads S tensor */
  int32_t ov_t[EQ_MAX_OV];           /* ov_t[i] (another member of its class), not S's input */
} eq_match;

typedef struct eq_ctx {
  rw_egraph *e;
  const gopt_ruleset *rs;
  const rw_rule *r;
  int32_t rule;
  int order[GOPT_REWRITE_MAX_OPS], via_op[GOPT_REWRITE_MAX_OPS], via_slot[GOPT_REWRITE_MAX_OPS];
  eq_match cur;
  eq_match *ms;
  size_t n, cap, per_rule;
  int multi_ok;                      /* multi-pattern rules are matched this iteration */
  int32_t **by_op;                   /* live e-nodes by op kind */
  size_t *by_op_n;
} eq_ctx;

/* ---- e-matching ------------------------------------------------------------------------------ */

static int32_t out_class(const rw_egraph *e, int32_t n, int k) {
  return k < e->s->nodes.a[n].n_out ? rw_eg_tclass(e, gopt_node_output(e->s, n, k)) : -2;
}

/* The order ops are bound in: from the first output's op through producers; then the other
 * outputs' ops (multi-patterns), each reached through all e-nodes of its kind. */
static void eq_order(eq_ctx *x) {
  const rw_pattern *p = &x->r->src;
  int seen[GOPT_REWRITE_MAX_OPS] = {0}, n = 0;
  for (int o = 0; o <= p->n_out; o++) {
    int start = o < p->n_out ? RW_REF_OPI(p->out[o]) : -1;
    for (int i = 0; o == p->n_out && i < p->n_ops; i++)
      if (!seen[i]) start = i;
    if (start < 0 || seen[start]) continue;
    seen[start] = 1;
    x->via_op[start] = -1;
    x->order[n++] = start;
    for (int q = n - 1; q < n; q++) {
      const rw_pop *op = &p->ops[x->order[q]];
      for (int k = 0; k < op->n_in; k++)
        if (RW_REF_IS_OP(op->in[k]) && !seen[RW_REF_OPI(op->in[k])]) {
          int j = RW_REF_OPI(op->in[k]);
          seen[j] = 1;
          x->via_op[j] = x->order[q];
          x->via_slot[j] = k;
          x->order[n++] = j;
        }
    }
    if (o == p->n_out && n < p->n_ops) o--; /* more unreached ops */
  }
}

/* Binds pattern op i to e-node c when consistent; records variables bound in bound[]. */
static int eq_assign(eq_ctx *x, int i, int32_t c, int *bound, int *nb) {
  const rw_egraph *e = x->e;
  const gopt_graph *s = e->s;
  const rw_pop *op = &x->r->src.ops[i];
  const gopt_node *nd = &s->nodes.a[c];
  *nb = 0;
  if (e->state[c] != EG_LIVE || nd->op != op->op || nd->n_in != op->n_in || nd->n_out != op->n_out)
    return 0;
  for (int j = 0; j < x->r->src.n_ops; j++)
    if (x->cur.op[j] == c) return 0;
  if (!rw_attrs_equal(s, c, op->attrs)) return 0;
  for (int k = 0; k < op->n_in; k++) {
    int32_t cc = rw_eg_tclass(e, gopt_node_input(s, c, k));
    int ref = op->in[k];
    if (cc < 0) goto fail;
    if (RW_REF_IS_OP(ref)) {
      int32_t p = x->cur.op[RW_REF_OPI(ref)];
      if (p >= 0 && out_class(e, p, RW_REF_OUTK(ref)) != cc) goto fail;
    } else if (x->cur.var[ref] >= 0) {
      if (x->cur.var[ref] != cc) goto fail;
    } else {
      int32_t leaf = e->cleaf[cc];
      if (x->r->var_const[ref] && (leaf < 0 || !(s->tensors.a[leaf].flags & GOPT_T_CONST))) goto fail;
      if (x->r->var_rank[ref] >= 0 && s->tensors.a[e->crep[cc]].rank != x->r->var_rank[ref]) goto fail;
      x->cur.var[ref] = cc;
      bound[(*nb)++] = ref;
    }
  }
  /* bound consumers of op i must read c's outputs */
  for (int j = 0; j < x->r->src.n_ops; j++) {
    if (x->cur.op[j] < 0 || j == i) continue;
    const rw_pop *oj = &x->r->src.ops[j];
    for (int k = 0; k < oj->n_in; k++)
      if (RW_REF_IS_OP(oj->in[k]) && RW_REF_OPI(oj->in[k]) == i &&
          rw_eg_tclass(e, gopt_node_input(s, x->cur.op[j], k)) != out_class(e, c, RW_REF_OUTK(oj->in[k])))
        goto fail;
  }
  x->cur.op[i] = c;
  return 1;
fail:
  for (int b = 0; b < *nb; b++) x->cur.var[bound[b]] = -1;
  *nb = 0;
  return 0;
}

static int eq_rec(eq_ctx *x, int p) {
  const rw_egraph *e = x->e;
  if (x->per_rule >= EQ_RULE_MATCHES) return 0;
  if (p == x->r->src.n_ops) {
    if (x->n == x->cap) {
      size_t nc = x->cap ? x->cap * 2 : 256;
      eq_match *q = realloc(x->ms, nc * sizeof *q);
      if (!q) return -1;
      x->ms = q;
      x->cap = nc;
    }
    x->ms[x->n++] = x->cur;
    x->per_rule++;
    return 0;
  }
  int i = x->order[p];
  const int32_t *cand;
  int32_t ncand, lo = 0;
  const uint8_t *want_k = NULL;
  int k = 0;
  if (x->via_op[i] >= 0) {
    int32_t c = x->cur.op[x->via_op[i]];
    int ref = x->r->src.ops[x->via_op[i]].in[x->via_slot[i]];
    int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, c, x->via_slot[i]));
    lo = e->mstart[cc];
    cand = e->mnode;
    ncand = e->mstart[cc + 1];
    want_k = e->mk;
    k = RW_REF_OUTK(ref);
  } else {
    cand = x->by_op[x->r->src.ops[i].op];
    ncand = (int32_t)x->by_op_n[x->r->src.ops[i].op];
  }
  for (int32_t q = lo; q < ncand; q++) {
    if (want_k && want_k[q] != k) continue;
    int bound[RW_MAX_VARS], nb;
    if (!eq_assign(x, i, cand[q], bound, &nb)) continue;
    int rc = eq_rec(x, p + 1);
    x->cur.op[i] = -1;
    for (int b = 0; b < nb; b++) x->cur.var[bound[b]] = -1;
    if (rc) return rc;
  }
  return 0;
}

static void eq_index_free(eq_ctx *x) {
  for (int i = 0; x->by_op && i < GOPT_OP_COUNT; i++) free(x->by_op[i]);
  free(x->by_op);
  free(x->by_op_n);
  x->by_op = NULL;
  x->by_op_n = NULL;
}

/* Live e-nodes grouped by op kind (candidates of ops reached through no consumer). */
static int eq_index_build(eq_ctx *x) {
  const gopt_graph *s = x->e->s;
  x->by_op = calloc(GOPT_OP_COUNT, sizeof *x->by_op);
  x->by_op_n = calloc(GOPT_OP_COUNT, sizeof *x->by_op_n);
  if (!x->by_op || !x->by_op_n) return -1;
  for (size_t n = 0; n < s->nodes.n && n < x->e->ncap; n++)
    if (x->e->state[n] == EG_LIVE && s->nodes.a[n].op < GOPT_OP_COUNT) x->by_op_n[s->nodes.a[n].op]++;
  for (int i = 0; i < GOPT_OP_COUNT; i++) {
    if (!(x->by_op[i] = malloc((x->by_op_n[i] + 1) * sizeof(int32_t)))) return -1;
    x->by_op_n[i] = 0;
  }
  for (size_t n = 0; n < s->nodes.n && n < x->e->ncap; n++)
    if (x->e->state[n] == EG_LIVE && s->nodes.a[n].op < GOPT_OP_COUNT) {
      int op = s->nodes.a[n].op;
      x->by_op[op][x->by_op_n[op]++] = (int32_t)n;
    }
  return 0;
}

/* Every match of pattern rule `rule` (enabled) in the e-graph, appended to x->ms. */
static int eq_find_pattern(eq_ctx *x, int32_t rule) {
  x->rule = rule;
  x->r = &x->rs->r[rule];
  x->per_rule = 0;
  memset(&x->cur, 0xff, sizeof x->cur);
  x->cur.n_ov = 0;
  x->cur.rule = rule;
  x->cur.n_nodes = x->r->src.n_ops;
  eq_order(x);
  if (!x->multi_ok)
    for (int i = 1; i < x->r->src.n_ops; i++)
      if (x->via_op[x->order[i]] < 0) return 0; /* a multi-pattern */
  return eq_rec(x, 0);
}

/* ---- application ----------------------------------------------------------------------------- */

typedef struct eq_frag {
  gopt_graph *l;                       /* the source as a small IR graph */
  gopt_rewrite_match m;                /* the match in l */
  char in_names[RW_MAX_VARS * 4][16];  /* l's inputs ("eqin<i>") ... */
  int32_t in_s[RW_MAX_VARS * 4];       /* ... stand for these S tensors */
  int n_in;
  int32_t left_l[RW_MAX_VARS * 4];     /* l's constants left out (large or lazily folded) ... */
  int32_t left_s[RW_MAX_VARS * 4];     /* ... and their S tensors */
  int n_left;
  int32_t out_cls[RW_MAX_OUT * 4];     /* l's outputs, in order, belong to these classes */
  int32_t out_s0;                      /* the S tensor of output 0 */
  int n_out;
} eq_frag;

/* An l tensor standing for S tensor t (constants keep their bytes up to RW_EG_LEAN, others are
 * graph inputs). A constant whose bytes are left out (large, or lazily folded) is recorded: a
 * rewrite that computes weights from it makes lazily folded constants (eq_apply). */
static int32_t frag_input(eq_frag *f, const rw_egraph *e, int32_t t, gopt_error *err) {
  const gopt_graph *s = e->s;
  if (f->n_in >= (int)(sizeof f->in_s / sizeof f->in_s[0]))
    return gopt_error_set(err, GOPT_EUNSUP, "fragment has too many inputs"), -1;
  const gopt_tensor *x = &s->tensors.a[t];
  snprintf(f->in_names[f->n_in], sizeof f->in_names[0], "eqin%d", f->n_in);
  int32_t lt = gopt_graph_add_tensor(f->l, f->in_names[f->n_in], x->dtype, x->rank, gopt_tensor_dims(s, t), err);
  if (lt < 0) return -1;
  if (x->flags & GOPT_T_CONST) {
    const gopt_const *cd = &s->consts.a[x->cdata];
    const void *data = rw_eg_data(e, t);
    int keep = data && cd->nbytes <= RW_EG_LEAN;
    if (!keep && (data || e->tlazy[t] >= 0)) {
      f->left_l[f->n_left] = lt;
      f->left_s[f->n_left++] = t;
    }
    if (gopt_tensor_set_const(f->l, lt, keep ? data : NULL, cd->nbytes, err)) return -1;
    f->l->consts.a[f->l->tensors.a[lt].cdata].nbytes = cd->nbytes;
    f->l->tensors.a[lt].flags |= x->flags & (GOPT_T_INIT | GOPT_T_PARAM);
  } else if (gopt_graph_add_input(f->l, lt)) {
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory"), -1;
  }
  f->in_s[f->n_in++] = t;
  return lt;
}

static int frag_output(eq_frag *f, int32_t lt, int32_t cls, int32_t st) {
  if (!f->n_out) f->out_s0 = st;
  if (f->n_out >= (int)(sizeof f->out_cls / sizeof f->out_cls[0]) || gopt_graph_add_output(f->l, lt)) return -1;
  f->out_cls[f->n_out++] = cls;
  return 0;
}

/* A pattern match's source: the rule's source pattern over the variables' tensors. */
static int frag_pattern(const rw_egraph *e, const rw_rule *r, const eq_match *mm, eq_frag *f, gopt_error *err) {
  int32_t vars[RW_MAX_VARS], outs[RW_MAX_OUT];
  for (int v = 0; v < r->n_vars; v++) {
    int32_t c = rw_eg_find(e, mm->var[v]);
    int32_t t = r->var_const[v] || e->cleaf[c] >= 0 ? e->cleaf[c] : e->crep[c];
    if ((vars[v] = frag_input(f, e, t, err)) < 0) return err->code;
  }
  int rc = rw_pattern_build(f->l, &r->src, vars, outs, err);
  for (int o = 0; !rc && o < r->src.n_out; o++) {
    int ref = r->src.out[o];
    int32_t st = gopt_node_output(e->s, mm->op[RW_REF_OPI(ref)], RW_REF_OUTK(ref));
    if (frag_output(f, outs[o], rw_eg_tclass(e, st), st))
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  if (rc) return rc;
  int anchor = RW_REF_OPI(r->src.out[0]);
  f->m.rule = mm->rule;
  f->m.n_nodes = r->src.n_ops;
  f->m.n_vars = r->n_vars;
  f->m.nodes[0] = anchor; /* rw_pattern_build made op i as node i */
  for (int i = 0, j = 1; i < r->src.n_ops; i++)
    if (i != anchor) f->m.nodes[j++] = i;
  for (int v = 0; v < r->n_vars; v++) f->m.vars[v] = vars[v];
  return 0;
}

/* The fragment tensor standing for S tensor t in frag_builtin's map, -1 when none. */
static int32_t frag_lookup(const int32_t *ms, const int32_t *ml, int n, int32_t t) {
  for (int i = 0; i < n; i++)
    if (ms[i] == t) return ml[i];
  return -1;
}

/* The S tensor input k of matched node i reads: the view's the match was found on (mm's
 * overrides), else S's. */
static int32_t frag_in(const gopt_graph *s, const eq_match *mm, int i, int k) {
  for (int o = 0; o < mm->n_ov; o++)
    if (mm->ov_op[o] == i && mm->ov_slot[o] == k) return mm->ov_t[o];
  return gopt_node_input(s, mm->op[i], k);
}

/* A built-in match's source: copies of its S nodes, wired as on the view the match was found on;
 * outputs read by no other matched node are the fragment's outputs. S tensors are mapped to
 * fragment tensors by id (names can be longer than the fragment keeps, and a built-in's variables
 * must find their tensors). */
static int frag_builtin(const rw_egraph *e, const eq_match *mm, const gopt_rewrite_match *sm, eq_frag *f,
                        gopt_error *err) {
  const gopt_graph *s = e->s;
  int32_t lnode[GOPT_REWRITE_MAX_OPS];
  int32_t ms[GOPT_REWRITE_MAX_OPS * (RW_MAX_IN * 4 + RW_MAX_OUT * 2)], ml[sizeof ms / sizeof ms[0]];
  int nm = 0;
  int done[GOPT_REWRITE_MAX_OPS] = {0}, left = sm->n_nodes;
  f->m = *sm;
  while (left > 0) {
    int progress = 0;
    for (int i = 0; i < sm->n_nodes; i++) {
      int32_t n = sm->nodes[i];
      if (done[i]) continue;
      const gopt_node *nd = &s->nodes.a[n];
      int ready = 1;
      for (int k = 0; k < nd->n_in; k++) {
        int32_t t = frag_in(s, mm, i, k);
        for (int j = 0; t >= 0 && j < sm->n_nodes; j++)
          if (!done[j] && s->tensors.a[t].producer == sm->nodes[j]) ready = 0;
      }
      if (!ready) continue;
      int32_t in[RW_MAX_IN * 4], out[RW_MAX_OUT * 2];
      if (nd->n_in > RW_MAX_IN * 4 || nd->n_out > RW_MAX_OUT * 2)
        return gopt_error_set(err, GOPT_EUNSUP, "node '%s' has too many inputs", gopt_node_name(s, n));
      for (int k = 0; k < nd->n_in; k++) {
        int32_t t = frag_in(s, mm, i, k), lt = -1;
        if (t >= 0 && (lt = frag_lookup(ms, ml, nm, t)) < 0) {
          if ((lt = frag_input(f, e, t, err)) < 0) return err->code;
          ms[nm] = t;
          ml[nm++] = lt;
        }
        in[k] = lt;
      }
      for (int k = 0; k < nd->n_out; k++) {
        int32_t t = gopt_node_output(s, n, k);
        if ((out[k] = gopt_graph_add_tensor(f->l, NULL, s->tensors.a[t].dtype, s->tensors.a[t].rank,
                                            gopt_tensor_dims(s, t), err)) < 0)
          return err->code;
        ms[nm] = t;
        ml[nm++] = out[k];
      }
      if ((lnode[i] = gopt_graph_add_node(f->l, gopt_node_type(s, n), gopt_node_name(s, n), nd->n_in, in,
                                          nd->n_out, out, err)) < 0)
        return err->code;
      int rc = rw_copy_attrs(s, n, f->l, lnode[i]);
      if (rc) return gopt_error_set(err, rc, "cannot copy the attributes of '%s'", gopt_node_name(s, n));
      done[i] = 1;
      left--;
      progress = 1;
    }
    if (!progress) return gopt_error_set(err, GOPT_EGRAPH, "built-in match is not a DAG");
  }
  for (int i = 0; i < sm->n_nodes; i++) {
    f->m.nodes[i] = lnode[i];
    for (int k = 0; k < s->nodes.a[sm->nodes[i]].n_out; k++) {
      int32_t lt = gopt_node_output(f->l, lnode[i], k);
      if (!gopt_tensor_use_count(f->l, lt) &&
          frag_output(f, lt, rw_eg_tclass(e, gopt_node_output(s, sm->nodes[i], k)),
                      gopt_node_output(s, sm->nodes[i], k)))
        return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    }
  }
  for (int v = 0; v < sm->n_vars; v++) {
    f->m.vars[v] = sm->vars[v] < 0 ? -1 : frag_lookup(ms, ml, nm, sm->vars[v]);
    if (sm->vars[v] >= 0 && f->m.vars[v] < 0) /* a variable no matched node reads */
      return gopt_error_set(err, GOPT_EGRAPH, "built-in match's variable %d is outside its nodes", v);
  }
  return 0;
}

/* The tensors of the rewritten fragment h standing for the fragment's inputs: a non-constant
 * input by its position among h's graph inputs (a rewrite that maps a source output to an input,
 * such as concat_of_split or Transpose(Transpose(x)) = x, swaps that input's name with the
 * output's, see rw_replace), a constant by name (-1 when renamed so: it is then imported as a new
 * constant, a copy). */
static void frag_resolve(const eq_frag *f, const gopt_graph *s, const gopt_graph *h, int32_t *map_h) {
  size_t k = 0;
  for (int i = 0; i < f->n_in; i++) {
    if (s->tensors.a[f->in_s[i]].flags & GOPT_T_CONST) {
      int32_t t = gopt_graph_find_tensor(h, f->in_names[i]);
      map_h[i] = t >= 0 && (h->tensors.a[t].flags & GOPT_T_CONST) && h->tensors.a[t].producer < 0 ? t : -1;
    } else {
      map_h[i] = k < h->inputs.n ? h->inputs.a[k++] : -1;
    }
  }
}

/* 1 when the rewritten fragment h's outputs have the dtypes and shapes of the source fragment l's:
 * importing merges each into the class of the output it replaces, and a class must hold one shape
 * (in a whole graph greedy's shape inference rejects such a rewrite where the output is read; a
 * fragment's outputs are read by nothing). */
static int frag_same_outputs(const gopt_graph *l, const gopt_graph *h) {
  if (l->outputs.n != h->outputs.n) return 0;
  for (size_t i = 0; i < l->outputs.n; i++) {
    const gopt_tensor *a = &l->tensors.a[l->outputs.a[i]], *b = &h->tensors.a[h->outputs.a[i]];
    if (a->dtype != b->dtype || a->rank != b->rank ||
        (a->rank > 0 && memcmp(gopt_tensor_dims(l, l->outputs.a[i]), gopt_tensor_dims(h, h->outputs.a[i]),
                               (size_t)a->rank * sizeof(int64_t))))
      return 0;
  }
  return 1;
}

/* 1 when every live node of the rewritten fragment h has its first input and known shapes on
 * every tensor it reads and writes: a rewrite that lost an input or a shape is rejected, else the
 * extraction could pick a node (costed as nearly free) that the executor cannot run. */
static int frag_shaped(const gopt_graph *h) {
  for (size_t n = 0; n < h->nodes.n; n++) {
    if (!gopt_node_alive(h, (int32_t)n)) continue;
    const gopt_node *nd = &h->nodes.a[n];
    for (int k = 0; k < nd->n_in + nd->n_out; k++) {
      int32_t t = k < nd->n_in ? gopt_node_input(h, (int32_t)n, k) : gopt_node_output(h, (int32_t)n, k - nd->n_in);
      if (t < 0 && k == 0) return 0; /* every op's first input is required */
      if (t >= 0 && (h->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
    }
  }
  return 1;
}

/* Applies one match: its source as a fragment (weights over RW_EG_LEAN bytes left out),
 * rewritten by gopt_rewrite_apply and imported; io_t receives the S tensors of the source's and
 * the result's first output. Weights the rewrite derives from weights left out are imported
 * without bytes, with the fragment as their recipe (rw_eg_add_lazy). Returns the new e-nodes
 * (>= 0), -1 when the application is rejected (the fragment cannot be built, or
 * gopt_rewrite_apply rejects it), -2 on out of memory (err set). */
static int eq_apply(rw_egraph *e, const gopt_ruleset *rs, const eq_match *mm, const gopt_rewrite_match *sm,
                    int32_t app, int *flags, int32_t *io_t, gopt_error *err) {
  eq_frag *f = calloc(1, sizeof *f);
  gopt_graph *h = NULL;
  int32_t *tm = NULL;
  gopt_error e2 = {0};
  int rc = -1;
  if (!f || !(f->l = gopt_graph_new("eqsat"))) {
    gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    rc = -2;
    goto done;
  }
  gopt_graph_set_opset(f->l, "", gopt_graph_opset(e->s, "", 13));
  int fr = sm ? frag_builtin(e, mm, sm, f, &e2) : frag_pattern(e, &rs->r[mm->rule], mm, f, &e2);
  gopt_infer_opts io = {0, 0};
  if (fr || gopt_infer_shapes(f->l, &io, &e2) || gopt_rewrite_apply(f->l, rs, &f->m, &h, flags, &e2)) {
    if (e2.code == GOPT_ENOMEM) {
      *err = e2;
      rc = -2;
    }
    goto done;
  }
  if (!frag_shaped(h) || !frag_same_outputs(f->l, h)) goto done; /* rejected: S keeps static shapes everywhere */
  int32_t map_h[RW_MAX_VARS * 4];
  frag_resolve(f, e->s, h, map_h);
  io_t[0] = f->out_s0;
  size_t first_t = e->s->tensors.n;
  if (!(tm = malloc((h->tensors.n + 1) * sizeof *tm))) {
    rc = -2;
    gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  rc = rw_eg_import(e, h, map_h, f->in_s, f->n_in, f->out_cls, f->n_out, app, &io_t[1], tm, &e2);
  if (rc < 0 && e2.code != GOPT_EGRAPH) { /* GOPT_EGRAPH: h cannot be imported, rejected (-1) */
    *err = e2;
    rc = -2;
  } else if (rc < 0) {
    rc = -1;
  } else if (f->n_left) { /* the fragment is the recipe of what it derived from what was left out */
    gopt_graph *l = f->l;
    f->l = NULL;
    if (rw_eg_add_lazy(e, rs, l, &f->m, f->left_l, f->left_s, f->n_left, h, tm, first_t, err)) rc = -2;
  }
done:
  free(tm);
  gopt_graph_free(h);
  if (f) gopt_graph_free(f->l);
  free(f);
  return rc;
}

/* ---- saturation ------------------------------------------------------------------------------ */

typedef struct eq_app {
  int32_t rule;
  char where[96];
  int flags;
  int32_t io_t[2];      /* S tensors: the match's first output, and what it was merged with */
} eq_app;

typedef struct eq_run {
  eq_app *apps;
  size_t n_apps, cap_apps;
  uint64_t *seen;       /* applied matches (hash set of match keys) */
  size_t seen_cap, seen_n;
  size_t iters, matches, rejected, filtered;
  const char *stop;
  int limited;          /* a limit or a stop request ended the application loop */
  const gopt_rewrite_opts *o; /* progress (NULL: none) */
  double t0, cost_before;
} eq_run;

static void eq_progress(const eq_run *q, const rw_egraph *e, const char *phase) {
  if (!q->o || !q->o->progress) return;
  double secs = q->o->seconds > 0 ? q->o->seconds : EQ_SECONDS;
  gopt_rewrite_progress p = {"eqsat", phase, q->iters + 1, EQ_ITERS, e->live, q->n_apps,
                             q->cost_before, 0, gopt_now() - q->t0, secs};
  q->o->progress(&p, q->o->progress_user);
}

static uint64_t match_key(const eq_match *m) {
  uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)m->rule;
  for (int i = 0; i < m->n_nodes; i++) h = (h ^ (uint64_t)(uint32_t)m->op[i]) * 0x100000001b3ULL;
  for (int i = 0; i < m->n_ov; i++) /* the same nodes on another view: another match */
    h = (h ^ ((uint64_t)m->ov_op[i] << 40 | (uint64_t)m->ov_slot[i] << 32 | (uint32_t)m->ov_t[i])) * 0x100000001b3ULL;
  return h | 1;
}

/* 1 when key is new (inserted), 0 seen, -1 out of memory. */
static int seen_add(eq_run *q, uint64_t key) {
  if ((q->seen_n + 1) * 2 > q->seen_cap) {
    size_t nc = q->seen_cap ? q->seen_cap * 2 : 4096;
    uint64_t *na = calloc(nc, sizeof *na);
    if (!na) return -1;
    for (size_t i = 0; i < q->seen_cap; i++)
      if (q->seen[i]) {
        size_t j = q->seen[i] & (nc - 1);
        while (na[j]) j = (j + 1) & (nc - 1);
        na[j] = q->seen[i];
      }
    free(q->seen);
    q->seen = na;
    q->seen_cap = nc;
  }
  size_t j = key & (q->seen_cap - 1);
  while (q->seen[j]) {
    if (q->seen[j] == key) return 0;
    j = (j + 1) & (q->seen_cap - 1);
  }
  q->seen[j] = key;
  q->seen_n++;
  return 1;
}

/* Appends built-in match sm of rule, found on v (S itself or a view of it), to x->ms with the
 * inputs of its nodes that differ from S's; skipped when a node is not live or more than
 * EQ_MAX_OV inputs differ. 0 or GOPT_ENOMEM. */
static int eq_push_builtin(const rw_egraph *e, eq_ctx *x, int32_t rule, const gopt_rewrite_match *sm,
                           const gopt_graph *v, gopt_error *err) {
  eq_match m;
  memset(&m, 0xff, sizeof m);
  m.rule = rule;
  m.n_nodes = sm->n_nodes;
  m.n_ov = 0;
  for (int k = 0; k < sm->n_nodes; k++) {
    m.op[k] = sm->nodes[k];
    if (e->state[m.op[k]] != EG_LIVE) return 0;
    for (int i = 0; v != e->s && i < e->s->nodes.a[m.op[k]].n_in; i++) {
      int32_t t = gopt_node_input(v, m.op[k], i);
      if (t == gopt_node_input(e->s, m.op[k], i)) continue;
      if (m.n_ov == EQ_MAX_OV) return 0;
      m.ov_op[m.n_ov] = (uint8_t)k;
      m.ov_slot[m.n_ov] = (uint8_t)i;
      m.ov_t[m.n_ov++] = t;
    }
  }
  for (int k = 0; k < sm->n_vars; k++) m.var[k] = sm->vars[k];
  if (x->n == x->cap) {
    size_t nc = x->cap ? x->cap * 2 : 256;
    eq_match *q = realloc(x->ms, nc * sizeof *q);
    if (!q) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    x->ms = q;
    x->cap = nc;
  }
  x->ms[x->n++] = m;
  return 0;
}

/* 1 when built-in rule r is matched this iteration (merges only while multi-patterns are). */
static int eq_builtin_on(const eq_ctx *x, const rw_rule *r) {
  return r->enabled && r->builtin >= 0 &&
         (x->multi_ok || (strncmp(r->name, "merge_", 6) && strncmp(r->name, "enlarge_", 8)));
}

/* The built-ins of more than one op matched again on the views of S (rw_view.c): a node reading a
 * class through another member than S's wiring shows (Concat over the Split that a merge put in
 * its inputs' classes, a unary op on every output of such a Split). */
static int eq_collect_views(rw_egraph *e, const gopt_ruleset *rs, eq_ctx *x, double deadline, gopt_error *err) {
  int depth[GOPT_OP_COUNT];
  size_t nb;
  const rw_builtin *b = rw_builtins(&nb);
  if (!rw_view_kinds(e, depth)) return 0;
  gopt_graph *v = gopt_graph_clone_lean(e->s, 0);
  if (!v) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc = 0;
  for (int op = 0; op < GOPT_OP_COUNT && !rc; op++)
    for (int j = 0; j < depth[op] && j < EQ_VIEW_DEPTH && !rc; j++) {
      if (gopt_now() > deadline || rw_stop_requested()) goto done;
      if (!rw_view_wire(e, v, op, j)) continue;
      for (size_t i = 0; i < rs->n && !rc; i++) {
        const rw_rule *r = &rs->r[i];
        if (!eq_builtin_on(x, r) || b[r->builtin].size < 2) continue;
        gopt_rewrite_match *ms = NULL;
        size_t nm = 0;
        rc = gopt_rewrite_find(v, rs, (int)i, &ms, &nm, err);
        for (size_t k = 0; k < nm && !rc; k++) rc = eq_push_builtin(e, x, (int32_t)i, &ms[k], v, err);
        free(ms);
      }
    }
done:
  gopt_graph_free(v);
  return rc;
}

/* Collects this iteration's matches: pattern rules by e-matching, built-ins on the store and on
 * its views. */
static int eq_collect(rw_egraph *e, const gopt_ruleset *rs, eq_ctx *x, double deadline, gopt_error *err) {
  x->e = e;
  x->rs = rs;
  x->n = 0;
  if (eq_index_build(x)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < rs->n && !rc; i++) {
    const rw_rule *r = &rs->r[i];
    if (!r->enabled) continue;
    if ((i & 63) == 0 && (gopt_now() > deadline || rw_stop_requested())) break; /* the apply loop reports it */
    if (r->builtin < 0) {
      if (eq_find_pattern(x, (int32_t)i)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      continue;
    }
    if (!eq_builtin_on(x, r)) continue; /* built-in multi-patterns: parallel ops merged */
    gopt_rewrite_match *ms = NULL;
    size_t nm = 0;
    if ((rc = gopt_rewrite_find(e->s, rs, (int)i, &ms, &nm, err))) break;
    for (size_t j = 0; j < nm && !rc; j++) rc = eq_push_builtin(e, x, (int32_t)i, &ms[j], e->s, err);
    free(ms);
  }
  eq_index_free(x);
  return rc ? rc : eq_collect_views(e, rs, x, deadline, err);
}

/* Applies the collected matches not applied before, within the limits. */
static int eq_apply_all(rw_egraph *e, const gopt_ruleset *rs, eq_ctx *x, eq_run *q, size_t node_limit,
                        double deadline, size_t *added, gopt_error *err) {
  for (size_t i = 0; i < x->n; i++) {
    if (e->live >= node_limit || gopt_now() > deadline || rw_stop_requested()) {
      q->stop = rw_stop_requested() ? "interrupted" : e->live >= node_limit ? "node limit" : "time limit";
      q->limited = 1;
      break;
    }
    if ((i & 63) == 63) eq_progress(q, e, "saturation");
    const eq_match *m = &x->ms[i];
    int isnew = seen_add(q, match_key(m));
    if (isnew < 0) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    if (!isnew) continue;
    const rw_rule *r = &rs->r[m->rule];
    gopt_rewrite_match sm = {m->rule, m->n_nodes, 0, {0}, {0}};
    if (r->builtin >= 0) {
      for (int k = 0; k < m->n_nodes; k++) sm.nodes[k] = m->op[k];
      for (int k = 0; k < RW_MAX_VARS && m->var[k] >= 0; k++) sm.vars[sm.n_vars++] = m->var[k];
    }
    if (q->n_apps == q->cap_apps) {
      size_t nc = q->cap_apps ? q->cap_apps * 2 : 256;
      eq_app *na = realloc(q->apps, nc * sizeof *na);
      if (!na) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      q->apps = na;
      q->cap_apps = nc;
    }
    eq_app *ap = &q->apps[q->n_apps];
    memset(ap, 0, sizeof *ap);
    ap->rule = m->rule;
    int32_t anchor = r->builtin >= 0 ? m->op[0] : m->op[RW_REF_OPI(r->src.out[0])];
    snprintf(ap->where, sizeof ap->where, "%s", gopt_node_name(e->s, anchor));
    q->matches++;
    ap->io_t[0] = ap->io_t[1] = -1;
    int got = eq_apply(e, rs, m, r->builtin >= 0 ? &sm : NULL, (int32_t)q->n_apps, &ap->flags, ap->io_t, err);
    if (got == -2) return err->code ? err->code : GOPT_ENOMEM;
    if (got == -1) {
      q->rejected++;
      continue;
    }
    q->n_apps++;
    *added += (size_t)got;
  }
  return 0;
}

/* Runs equality saturation on e until saturation or a limit. */
static int eq_saturate(rw_egraph *e, const gopt_ruleset *rs, size_t node_limit, double deadline,
                       eq_run *q, gopt_error *err) {
  eq_ctx x;
  memset(&x, 0, sizeof x);
  int rc = 0;
  q->stop = "iteration limit";
  for (q->iters = 0; q->iters < EQ_ITERS; q->iters++) {
    size_t added = 0;
    x.multi_ok = q->iters < EQ_MULTI_ITERS;
    eq_progress(q, e, "saturation");
    if ((rc = eq_collect(e, rs, &x, deadline, err))) break;
    if (rw_stop_requested() || gopt_now() > deadline) { /* collection cut short: not saturated */
      q->stop = rw_stop_requested() ? "interrupted" : "time limit";
      q->limited = 1;
    }
    size_t before = e->unions;
    if (!q->limited && (rc = eq_apply_all(e, rs, &x, q, node_limit, deadline, &added, err))) break;
    int merges = rw_eg_rebuild(e, err);
    if (merges < 0) {
      rc = merges;
      break;
    }
    q->filtered += rw_eg_filter_cycles(e);
    rw_eg_wire_constants(e);
    if (q->limited) { /* a limit stopped the application loop */
      q->iters++;
      break;
    }
    if (!added && e->unions == before) {
      q->stop = "saturated";
      q->iters++;
      break;
    }
  }
  free(x.ms);
  return rc;
}

/* ---- the method ------------------------------------------------------------------------------ */

/* The rule applications whose e-nodes the extracted graph uses become r's steps. */
static int eq_steps(const rw_egraph *e, const rw_extraction *xt, const eq_run *q, gopt_rewrite_result *r) {
  uint8_t *used = calloc(q->n_apps + 1, 1), *need = calloc(e->nc + 1, 1);
  int32_t *stack = malloc((e->nc + 1) * sizeof *stack);
  size_t sp = 0;
  if (!used || !need || !stack) {
    free(used);
    free(need);
    free(stack);
    return -1;
  }
  for (size_t i = 0; i < e->n_roots; i++) {
    int32_t rc = rw_eg_find(e, e->roots[i]);
    if (!need[rc]) need[rc] = 1, stack[sp++] = rc;
  }
  /* a rewrite whose result already existed (Relu(Relu(x)) = Relu(x), or Concat(Split(M)) = M
   * after a merge made M) made no e-node: it is credited when the extraction picks that existing
   * e-node instead of the matched one */
  int32_t *credit = malloc((e->nc + 1) * sizeof *credit); /* per class: such a rewrite */
  if (!credit) sp = 0;
  for (size_t c = 0; credit && c < e->nc; c++) credit[c] = -1;
  for (size_t i = 0; credit && i < q->n_apps; i++) {
    int32_t d = q->apps[i].io_t[1], p = d >= 0 ? e->s->tensors.a[d].producer : -1;
    if (p >= 0 && (e->state[p] == EG_DUP || e->napp[p] != (int32_t)i) && credit[rw_eg_tclass(e, d)] < 0)
      credit[rw_eg_tclass(e, d)] = (int32_t)i;
  }
  while (sp > 0) { /* the classes the extracted graph needs */
    int32_t c = stack[--sp], n = xt->choice[c], leaf = e->cleaf[c];
    if (leaf >= 0) {
      if (e->tapp[leaf] >= 0) used[e->tapp[leaf]] = 1; /* a folded constant */
      continue;
    }
    if (n < 0) continue;
    if (e->napp[n] >= 0) used[e->napp[n]] = 1;
    if (credit[c] >= 0 && e->napp[n] != credit[c] && e->s->tensors.a[q->apps[credit[c]].io_t[0]].producer != n)
      used[credit[c]] = 1;
    for (int k = 0; k < e->s->nodes.a[n].n_in; k++) {
      int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
      if (cc >= 0 && !need[cc]) need[cc] = 1, stack[sp++] = cc;
    }
  }
  free(need);
  free(stack);
  free(credit);
  size_t k = 0;
  for (size_t i = 0; i < q->n_apps; i++) k += used[i];
  r->steps = calloc(k + 1, sizeof *r->steps);
  if (!r->steps) {
    free(used);
    return -1;
  }
  for (size_t i = 0; i < q->n_apps; i++) {
    if (!used[i]) continue;
    gopt_rewrite_step *st = &r->steps[r->n_steps++];
    st->rule = q->apps[i].rule;
    st->flags = q->apps[i].flags;
    snprintf(st->where, sizeof st->where, "%s", q->apps[i].where);
    r->flags |= st->flags;
  }
  free(used);
  return 0;
}

/* Bytes per second of copying weights into fresh memory on this machine now (page faults
 * included): a timed copy of up to 64 MB of g's largest constant; 0 when none has 1 MB. */
static double eq_copy_rate(const gopt_graph *g) {
  size_t big = 0;
  const void *d = NULL;
  for (size_t i = 0; i < g->consts.n; i++)
    if (g->consts.a[i].data && g->consts.a[i].nbytes > big) big = g->consts.a[i].nbytes, d = g->consts.a[i].data;
  size_t n = big < ((size_t)64 << 20) ? big : (size_t)64 << 20;
  if (n < ((size_t)1 << 20)) return 0;
  double t = gopt_now();
  void *p = malloc(n);
  if (!p) return 0;
  memcpy(p, d, n);
  volatile unsigned char sink = ((unsigned char *)p)[n - 1];
  (void)sink;
  free(p);
  t = gopt_now() - t;
  return t > 0 ? (double)n / t : 0;
}

/* Seconds to keep for what follows the extraction: copying the structure (t_init, timed at the
 * start) and the result's weights (or the kept input's) once, timed at `rate`, with 50% to
 * spare; at least a tenth of the total. (The lazily folded constants the extraction uses are
 * kept time for by rw_extract: EQ_LAZY_PASSES.) */
static double eq_reserve(const rw_egraph *e, double t_init, double rate, double secs) {
  double bytes = 0;
  for (size_t i = 0; i < e->src->consts.n; i++) bytes += (double)e->src->consts.a[i].nbytes;
  double est = 1.5 * (t_init + (rate > 0 ? bytes / rate : 0));
  return est > 0.1 * secs ? est : 0.1 * secs;
}

/* Tensat: saturate, extract, convert back; the input graph is kept when nothing cheaper is
 * extracted. o->budget is the e-node limit, o->seconds the total time (40% for saturation). */
int rw_search_eqsat(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                    gopt_rewrite_result *r, gopt_error *err) {
  double t0 = gopt_now(), secs = o->seconds > 0 ? o->seconds : EQ_SECONDS;
  clock_t c0 = clock();
  size_t node_limit = o->budget > 0 ? (size_t)o->budget : EQ_NODES;
  rw_egraph e;
  rw_extraction xt;
  eq_run q;
  gopt_graph *best = NULL;
  memset(&xt, 0, sizeof xt);
  memset(&q, 0, sizeof q);
  int rc = rw_cost(g, o, &r->cost_before, err);
  if (rc || (rc = rw_eg_init(&e, g, err))) return rc;
  e.costs = o->costs;
  double t_init = gopt_now() - t0; /* about what one copy of g's structure costs */
  double rate = eq_copy_rate(g);
  q.o = o;
  q.t0 = t0;
  q.cost_before = r->cost_before;
  if ((rc = eq_saturate(&e, rs, node_limit, t0 + 0.4 * secs, &q, err))) goto done;
  /* the extraction gets what is left but a reserve for building the extracted graph (or copying
   * the kept input), so the search ends within `secs` */
  double reserve = eq_reserve(&e, t_init, rate, secs);
  double t_sat = gopt_now(), left = secs - (t_sat - t0) - reserve;
  eq_progress(&q, &e, "extraction");
  /* after a stop request only the greedy extraction runs (fast); a request during the ILP stops
   * it with its best solution so far (rw_extract) */
  int mode = rw_stop_requested() ? 0 : RW_X_ILP; /* filtering left it acyclic: no order rows */
  /* computing a lazily folded constant: EQ_LAZY_PASSES over its bytes, 50% to spare */
  double lazy_s = rate > 0 ? 1.5 * EQ_LAZY_PASSES / rate : 0;
  if ((rc = rw_extract(&e, o->cluster, mode, left > 0.2 ? left : 0.2, lazy_s, &xt, err))) goto done;
  double t_ext = gopt_now();
  if ((r->interrupted = rw_stop_requested()) && !mode) snprintf(xt.how, sizeof xt.how, "greedy (stop requested: no ILP)");
  gopt_error e2 = {0};
  double after = 0;
  const char *kept = "";
  /* the input's own choice is no worse by the extraction's measure: no conversion */
  int same = !(xt.objective < xt.input_objective * (1 - 1e-9));
  /* a converted graph that does not validate is never handed on (a backstop: the input is kept,
   * the note says why; it caught a tensor read but never produced after concat_of_split, since
   * fixed in frag_resolve) */
  int failed = !same && (rw_eg_to_graph(&e, &xt, &best, &e2) || gopt_graph_validate(best, &e2) ||
                         rw_cost(best, o, &after, &e2));
  if (failed) {
    kept = "; the extracted graph failed to convert, input kept";
  } else if (same || !(after < r->cost_before)) {
    kept = "; nothing cheaper extracted, input kept";
  }
  if (kept[0]) {
    r->input_kept = 1;
    gopt_graph_free(best);
    if (!(best = gopt_graph_clone(g))) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
    after = r->cost_before;
  } else if (eq_steps(&e, &xt, &q, r)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  r->graph = best;
  best = NULL;
  r->cost_after = after;
  r->dequeued = q.iters;
  r->generated = e.live;
  r->rejected = q.rejected;
  if (snprintf(r->note, sizeof r->note,
           "eqsat: %.2f s CPU; wall %.1f s saturation, %.1f s extraction, %.1f s conversion (%.0f MB folded); "
           "%zu iterations "
           "(stop: %s), %zu e-nodes, %zu e-classes, %zu rewrites (%zu rejected), %zu cyclic e-nodes filtered; "
           "extraction: %s%s%s%.60s",
           (double)(clock() - c0) / CLOCKS_PER_SEC, t_sat - t0, t_ext - t_sat, gopt_now() - t_ext,
           xt.lazy_bytes / 1e6, q.iters, q.stop,
           e.live, e.nc, q.n_apps, q.rejected, q.filtered, xt.how, kept, failed ? ": " : "", failed ? e2.msg : "") >=
      (int)sizeof r->note)
    r->note[sizeof r->note - 1] = 0; /* truncated */
done:
  gopt_graph_free(best);
  rw_extraction_clear(&xt);
  rw_eg_clear(&e);
  free(q.apps);
  free(q.seen);
  return rc;
}

int rw_eq_saturate(rw_egraph *e, const gopt_ruleset *rs, size_t node_limit, double seconds, char *stop,
                   size_t n, gopt_error *err) {
  eq_run q;
  memset(&q, 0, sizeof q);
  int rc = eq_saturate(e, rs, node_limit, gopt_now() + seconds, &q, err);
  if (stop) snprintf(stop, n, "%s", q.stop ? q.stop : "");
  free(q.apps);
  free(q.seen);
  return rc;
}
