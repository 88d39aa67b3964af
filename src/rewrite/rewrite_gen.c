/* rewrite_gen.c: rule generation by TASO's method. In each domain (rewrite_gen_ops.c: the 2-D
 * one: MatMul, Add, Mul, Relu, Transpose, Concat and Split (both axes) on up to three n x n input
 * matrices; the conv ones: Conv 1x1 / 3x3 / 1x3 / grouped / strided / dilated, Add, Relu, scalar
 * Mul, Concat and Split on 4-D activations and weights; the Gemm one; BatchNormalization and
 * Reshape, whose parameters / target are the domain's constants, "const" variables in the rules
 * after the enumerated ones) every graph of up to max_ops ops is enumerated
 * (independent ops in one canonical order; duplicate graphs removed by their expression text), evaluated by a small double-precision reference evaluator on random
 * inputs (the fingerprint), and graphs with equal fingerprints are paired into candidate rules.
 * Each graph is paired both ways with its fingerprint group's smallest member (a star, not all
 * pairs). Candidates are pruned by input renaming (rules equal up to renaming the variables) and common
 * subgraphs (an op on the same variables on both sides), re-checked by the reference evaluator on
 * further random inputs and a second size, verified with gopt's executor (gopt_rule_verify) and,
 * when enabled, proved with Z3 over operator axioms (rewrite_z3.c). At 4 ops only a bounded set
 * of candidates is kept (gopt_rulegen_opts.max_rules4). The result is the built-in
 * rules followed by the generated ones; dropped rules stay in the set, disabled, with the reason. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "gopt/util.h"
#include "rewrite/rewrite_gen.h"
#include "rewrite/rewrite_internal.h"
#include "util/util_internal.h"

/* A recorded graph: ops, outputs (tensor indices), fingerprint. Tensor t < G_VARS is variable t;
 * G_VARS + 2 i + k is output k of op i. */
typedef struct grec {
  gop ops[G_MAXOPS];
  uint8_t n_ops, n_out, out[2], vars;
  uint64_t fp;
} grec;

typedef struct gen {
  const gdomain *dom;
  int max_ops, n;
  gval vals[G_MAXT];   /* current values (one random input set) */
  gparams par;         /* the domain's parameters (BN, Reshape) for them */
  int have[G_MAXT];
  int uses[G_MAXT];
  gop ops[G_MAXOPS];
  int n_ops;
  grec *recs;
  size_t n_recs, cap;
  uint64_t *seen;      /* open-addressing set of expression hashes */
  size_t seen_cap, seen_n;
  size_t enumerated;
  int oom;
} gen;

static int seen_add(gen *g, uint64_t h) {
  if (!h) h = 1;
  if ((g->seen_n + 1) * 2 > g->seen_cap) {
    size_t nc = g->seen_cap ? g->seen_cap * 2 : 1 << 16;
    uint64_t *na = calloc(nc, sizeof *na);
    if (!na) return g->oom = 1, 0;
    for (size_t i = 0; i < g->seen_cap; i++)
      if (g->seen[i]) {
        size_t j = g->seen[i] & (nc - 1);
        while (na[j]) j = (j + 1) & (nc - 1);
        na[j] = g->seen[i];
      }
    free(g->seen);
    g->seen = na;
    g->seen_cap = nc;
  }
  size_t j = h & (g->seen_cap - 1);
  while (g->seen[j]) {
    if (g->seen[j] == h) return 0;
    j = (j + 1) & (g->seen_cap - 1);
  }
  g->seen[j] = h;
  g->seen_n++;
  return 1;
}

/* Expression text of tensor t (shared subexpressions written out in full). */
static void expr(const gop *ops, int t, char *buf, size_t n, size_t *len) {
  if (*len + 16 >= n) return;
  if (t < G_VARS) {
    *len += (size_t)snprintf(buf + *len, n - *len, "x%d", t);
    return;
  }
  int i = (t - G_VARS) / 2, k = (t - G_VARS) % 2;
  const gop *o = &ops[i];
  *len += (size_t)snprintf(buf + *len, n - *len, "%s%s(", rw_gen_name[o->type], k ? ".1" : "");
  for (int a = 0; a < rw_gen_arity[o->type]; a++) {
    if (a && *len + 1 < n) buf[(*len)++] = ',';
    expr(ops, o->in[a], buf, n, len);
  }
  if (*len + 1 < n) buf[(*len)++] = ')';
  buf[*len < n ? *len : n - 1] = 0;
}

static uint64_t value_fp(const gval *v) {
  uint64_t h;
  if (v->rank == 2) {
    h = gopt_hash_mix((uint64_t)v->d[0], (uint64_t)v->d[1]); /* as the shipped 2-D rules were made */
  } else {
    h = gopt_hash_mix(0x4d, (uint64_t)v->rank);
    for (int k = 0; k < v->rank; k++) h = gopt_hash_mix(h, (uint64_t)v->d[k]);
  }
  for (int i = 0; i < gval_numel(v); i++) h = gopt_hash_mix(h, (uint64_t)llround(v->v[i] * 1e6));
  return h;
}

/* Records the current graph when every op output but at most two (the outputs) is used and the
 * variables used are x0..x(k-1). */
static void record(gen *g) {
  int outs[G_MAXT], no = 0;
  for (int t = G_VARS; t < G_VARS + 2 * g->n_ops; t++)
    if (g->have[t] && !g->uses[t]) outs[no++] = t;
  if (no < 1 || no > 2) return;
  int vars = 0;
  for (int v = 0; v < G_VARS; v++)
    if (g->uses[v]) vars = v + 1;
  for (int v = 0; v < vars; v++)
    if (!g->uses[v]) return;
  char buf[1024];
  size_t len = 0;
  for (int k = 0; k < no; k++) {
    expr(g->ops, outs[k], buf, sizeof buf, &len);
    if (len + 1 < sizeof buf) buf[len++] = ';';
  }
  buf[len < sizeof buf ? len : sizeof buf - 1] = 0;
  if (!seen_add(g, gopt_hash_bytes(buf, len, 77))) return;
  if (g->n_recs == g->cap) {
    size_t nc = g->cap ? g->cap * 2 : 4096;
    grec *p = realloc(g->recs, nc * sizeof *p);
    if (!p) {
      g->oom = 1;
      return;
    }
    g->recs = p;
    g->cap = nc;
  }
  grec *r = &g->recs[g->n_recs++];
  memset(r, 0, sizeof *r);
  memcpy(r->ops, g->ops, sizeof r->ops);
  r->n_ops = (uint8_t)g->n_ops;
  r->n_out = (uint8_t)no;
  r->vars = (uint8_t)vars;
  uint64_t h = (uint64_t)vars;
  for (int k = 0; k < no; k++) {
    r->out[k] = (uint8_t)outs[k];
    h = gopt_hash_mix(h, value_fp(&g->vals[outs[k]]));
  }
  r->fp = h;
}

static int op_sig(const gop *o) { return ((o->type * 32 + o->in[0]) * 32 + o->in[1]) * 32 + o->in[2]; }

/* Tries op o (inputs set) on top of the current graph and recurses. */
static void dfs(gen *g);
static void push_op(gen *g, gop o) {
  int nt = G_VARS + 2 * g->n_ops, ar = rw_gen_arity[o.type];
  int prev_first = G_VARS + 2 * (g->n_ops - 1);
  /* canonical order of independent ops: a new op reads the previous op's output or has a larger
   * signature */
  if (g->n_ops > 0) {
    int reads_prev = 0;
    for (int k = 0; k < ar; k++) reads_prev |= o.in[k] >= prev_first;
    if (!reads_prev && op_sig(&o) <= op_sig(&g->ops[g->n_ops - 1])) return;
  }
  /* evaluated in place: the inputs are below nt */
  if (rw_gen_eval(o.type, &g->vals[o.in[0]], &g->vals[o.in[1]], &g->vals[o.in[2]], &g->par, &g->vals[nt], &o)) return;
  g->enumerated++;
  g->ops[g->n_ops++] = o;
  for (int k = 0; k < rw_gen_outs[o.type]; k++) {
    g->have[nt + k] = 1;
    g->uses[nt + k] = 0;
  }
  for (int k = 0; k < ar; k++) g->uses[o.in[k]]++;
  dfs(g);
  for (int k = 0; k < ar; k++) g->uses[o.in[k]]--;
  g->have[nt] = g->have[nt + 1] = 0;
  g->n_ops--;
}

static void dfs(gen *g) {
  if (g->oom) return;
  if (g->n_ops > 0) record(g);
  if (g->n_ops == g->max_ops) return;
  int nt = G_VARS + 2 * g->n_ops;
  for (int type = 0; type < G_NOPS; type++) {
    if (!(g->dom->ops & (1u << type))) continue;
    int ar = rw_gen_arity[type];
    for (int a = 0; a < nt; a++) {
      if (!g->have[a]) continue;
      for (int b = ar >= 2 ? 0 : a; b < (ar >= 2 ? nt : a + 1); b++) {
        if (!g->have[b]) continue;
        if ((type == G_ADD || type == G_MUL) && b < a) continue; /* commutative */
        for (int c = 0; c < (ar == 3 ? nt : 1); c++) {
          if (ar == 3 && !g->have[c]) continue;
          gop o = {(uint8_t)type, {(uint8_t)a, (uint8_t)(ar >= 2 ? b : 0), (uint8_t)(ar == 3 ? c : 0)}, 0, 0, 0};
          push_op(g, o);
        }
      }
    }
  }
}

/* ---- candidates -------------------------------------------------------------------------------- */

/* Random values in [-1, 1) for the variables, in the domain's shape set `set`. */
static void fill_random(gval *vals, const gdomain *dom, int set, uint64_t seed) {
  uint64_t s = seed;
  for (int v = 0; v < G_VARS; v++) {
    vals[v].rank = dom->rank[v];
    memcpy(vals[v].d, dom->dims[set][v], sizeof vals[v].d);
    for (int i = 0; i < gval_numel(&vals[v]); i++)
      vals[v].v[i] = (double)(gopt_splitmix64(&s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
  }
}

/* Evaluates r on inputs vals (G_VARS filled) and parameters par; outputs into out[0..n_out-1]. */
static int run_rec(const grec *r, const gval *in, const gparams *par, gval *out) {
  static __thread gval t[G_MAXT];
  for (int v = 0; v < G_VARS; v++) t[v] = in[v];
  for (int i = 0; i < r->n_ops; i++) {
    const gop *o = &r->ops[i];
    gop tmp = *o;
    if (rw_gen_eval(o->type, &t[o->in[0]], &t[o->in[1]], &t[o->in[2]], par, &t[G_VARS + 2 * i], &tmp)) return -1;
  }
  for (int k = 0; k < r->n_out; k++) out[k] = t[r->out[k]];
  return 0;
}

/* a and b agree on further random inputs of the domain's shape set `set` (relative 1e-9). */
static int agree(const gdomain *dom, const grec *a, const grec *b, int set, uint64_t seed) {
  static __thread gval in[G_VARS], oa[2], ob[2];
  static __thread gparams par;
  for (int trial = 0; trial < 3; trial++) {
    fill_random(in, dom, set, seed + (uint64_t)trial * 1000003);
    rw_gen_params(dom, set, seed + (uint64_t)trial * 1000033, &par);
    if (run_rec(a, in, &par, oa) || run_rec(b, in, &par, ob)) return set ? 1 : 0; /* size does not fit */
    for (int k = 0; k < a->n_out; k++) {
      if (oa[k].rank != ob[k].rank || memcmp(oa[k].d, ob[k].d, sizeof(int) * (size_t)oa[k].rank)) return 0;
      for (int i = 0; i < gval_numel(&oa[k]); i++)
        if (fabs(oa[k].v[i] - ob[k].v[i]) > 1e-9 * (1 + fabs(oa[k].v[i]))) return 0;
    }
  }
  return 1;
}

static uint64_t expr_hash(const gop *ops, int t) {
  char buf[1024];
  size_t len = 0;
  expr(ops, t, buf, sizeof buf, &len);
  return gopt_hash_bytes(buf, len, 5);
}

/* Common subgraph (TASO's pruning): some op output computes the same expression on both sides, or
 * both sides end in the same op with all inputs but one equal; the rule then follows from a
 * smaller one. */
static int common_subgraph(const grec *a, const grec *b) {
  uint64_t ha[2 * G_MAXOPS];
  int na = 0;
  for (int i = 0; i < a->n_ops; i++)
    for (int k = 0; k < rw_gen_outs[a->ops[i].type]; k++) ha[na++] = expr_hash(a->ops, G_VARS + 2 * i + k);
  for (int j = 0; j < b->n_ops; j++)
    for (int k = 0; k < rw_gen_outs[b->ops[j].type]; k++) {
      uint64_t h = expr_hash(b->ops, G_VARS + 2 * j + k);
      for (int q = 0; q < na; q++)
        if (ha[q] == h) return 1;
    }
  if (a->n_out == 1) {
    const gop *x = &a->ops[(a->out[0] - G_VARS) / 2], *y = &b->ops[(b->out[0] - G_VARS) / 2];
    if (x->type == y->type && rw_gen_outs[x->type] == 1) {
      int ar = rw_gen_arity[x->type], diff = 0;
      for (int k = 0; k < ar; k++)
        diff += expr_hash(a->ops, x->in[k]) != expr_hash(b->ops, y->in[k]);
      if (diff <= 1) return 1;
    }
  }
  return 0;
}

/* Canonical text of the rule a -> b with variables renamed in a's first-use order, with the
 * variables' shapes in the domain (the same text means another rule in another domain). */
static uint64_t rule_key(const gdomain *dom, const grec *a, const grec *b) {
  int ren[G_VARS] = {-1, -1, -1}, next = 0;
  for (int i = 0; i < a->n_ops; i++)
    for (int k = 0; k < rw_gen_arity[a->ops[i].type]; k++) {
      int t = a->ops[i].in[k];
      if (t < G_VARS && ren[t] < 0) ren[t] = next++;
    }
  gop oa[G_MAXOPS], ob[G_MAXOPS];
  memcpy(oa, a->ops, sizeof oa);
  memcpy(ob, b->ops, sizeof ob);
  for (int i = 0; i < G_MAXOPS; i++)
    for (int k = 0; k < 3; k++) {
      if (oa[i].in[k] < G_VARS && ren[oa[i].in[k]] >= 0) oa[i].in[k] = (uint8_t)ren[oa[i].in[k]];
      if (ob[i].in[k] < G_VARS && ren[ob[i].in[k]] >= 0) ob[i].in[k] = (uint8_t)ren[ob[i].in[k]];
    }
  char buf[2048];
  size_t len = 0;
  for (int k = 0; k < a->n_out; k++) {
    expr(oa, a->out[k], buf, sizeof buf, &len);
    if (len + 1 < sizeof buf) buf[len++] = ';';
  }
  if (len + 2 < sizeof buf) buf[len++] = '>';
  for (int k = 0; k < b->n_out; k++) {
    expr(ob, b->out[k], buf, sizeof buf, &len);
    if (len + 1 < sizeof buf) buf[len++] = ';';
  }
  uint64_t h = gopt_hash_bytes(buf, len, 99);
  if (dom->rank[0] == 2 && !dom->key_ops) return h; /* the 2-D domain: as the shipped rules */
  if (dom->conv_stride > 1 || dom->conv_dil > 1) /* not the stride-1 domains' rules */
    h = gopt_hash_mix(h, (uint64_t)(dom->conv_stride * 16 + dom->conv_dil));
  for (int v = 0; v < G_VARS; v++) {
    int src = -1;
    for (int w = 0; w < G_VARS; w++)
      if (ren[w] == v) src = w;
    if (src < 0) continue;
    h = gopt_hash_mix(h, (uint64_t)dom->rank[src]);
    for (int k = 0; k < dom->rank[src]; k++) h = gopt_hash_mix(h, (uint64_t)dom->dims[0][src][k]);
  }
  return h;
}

/* ---- rules from records ---------------------------------------------------------------------- */

static const char *onnx_type(int t) {
  switch (t) {
    case G_MATMUL: return "MatMul";
    case G_ADD: return "Add";
    case G_MUL: case G_SMUL: return "Mul";
    case G_RELU: return "Relu";
    case G_TRANSPOSE: return "Transpose";
    case G_CONCAT0: case G_CONCAT1: return "Concat";
    case G_CONV: return "Conv";
    case G_GEMM: case G_GEMM_TA: case G_GEMM_TB: case G_GEMM_C: return "Gemm";
    case G_BN: return "BatchNormalization";
    case G_RESHAPE: return "Reshape";
    default: return "Split";
  }
}

/* The attributes of generated op o (a Conv has all five, as exporters and the zoo write them:
 * the matcher compares attributes exactly). */
static json_t *op_attrs(const gop *o) {
  json_t *a = json_object();
  switch (o->type) {
    case G_TRANSPOSE: json_object_set_new(a, "perm", json_pack("[ii]", 1, 0)); break;
    case G_CONCAT0: case G_SPLIT0: json_object_set_new(a, "axis", json_integer(0)); break;
    case G_CONCAT1: case G_SPLIT1: json_object_set_new(a, "axis", json_integer(1)); break;
    case G_GEMM_TA: json_object_set_new(a, "transA", json_integer(1)); break;
    case G_GEMM_TB: json_object_set_new(a, "transB", json_integer(1)); break;
    case G_BN: json_object_set_new(a, "epsilon", json_real(1e-5)); break; /* as the zoo writes it */
    case G_CONV:
      json_object_set_new(a, "dilations", json_pack("[ii]", o->dl, o->dl));
      json_object_set_new(a, "group", json_integer(o->grp));
      json_object_set_new(a, "kernel_shape", json_pack("[ii]", o->kh, o->kw));
      json_object_set_new(a, "pads", json_pack("[iiii]", o->dl * (o->kh / 2), o->dl * (o->kw / 2),
                                               o->dl * (o->kh / 2), o->dl * (o->kw / 2)));
      json_object_set_new(a, "strides", json_pack("[ii]", o->st, o->st));
      break;
  }
  return a;
}

/* Pattern of r; the domain's parameters are the variables from r->vars on. */
static void rec_pattern(const grec *r, rw_pattern *p) {
  memset(p, 0, sizeof *p);
  p->n_ops = r->n_ops;
  for (int i = 0; i < r->n_ops; i++) {
    const gop *o = &r->ops[i];
    rw_pop *q = &p->ops[i];
    q->op = gopt_op_from_name(onnx_type(o->type));
    snprintf(q->type, sizeof q->type, "%s", onnx_type(o->type));
    q->n_in = rw_gen_arity[o->type];
    q->n_out = rw_gen_outs[o->type];
    for (int k = 0; k < q->n_in; k++) {
      int t = o->in[k];
      q->in[k] = t < G_VARS ? t : RW_REF_OP((t - G_VARS) / 2, (t - G_VARS) % 2);
    }
    if (o->type == G_BN || o->type == G_RESHAPE) { /* scale, bias, mean, var / the shape */
      q->n_in = o->type == G_BN ? 5 : 2;
      for (int k = 1; k < q->n_in; k++) q->in[k] = r->vars + k - 1;
    }
    q->attrs = op_attrs(o);
  }
  p->n_out = r->n_out;
  for (int k = 0; k < r->n_out; k++) p->out[k] = RW_REF_OP((r->out[k] - G_VARS) / 2, (r->out[k] - G_VARS) % 2);
}

static int cmp_fp(const void *a, const void *b) {
  const grec *x = a, *y = b;
  if (x->fp != y->fp) return x->fp < y->fp ? -1 : 1;
  if (x->n_ops != y->n_ops) return x->n_ops - y->n_ops;
  return memcmp(x->ops, y->ops, sizeof x->ops);
}

/* The test shapes of a rule over n_vars variables of domain dom, then n_par parameters:
 * {"x0": dims, ...} per shape set; a Reshape target's values under "values". */
static json_t *rule_shapes(const gdomain *dom, int n_vars, int n_par) {
  json_t *arr = json_array();
  for (int s = 0; s < dom->shapes_listed; s++) {
    json_t *sh = json_object();
    for (int v = 0; v < n_vars + n_par; v++) {
      char k[16];
      snprintf(k, sizeof k, "x%d", v);
      json_t *d = json_array();
      if (v >= n_vars)
        json_array_append_new(d, json_integer(dom->shape_rank ? dom->shape_rank : dom->par_dim[s]));
      for (int q = 0; q < (v < n_vars ? dom->rank[v] : 0); q++) json_array_append_new(d, json_integer(dom->dims[s][v][q]));
      json_object_set_new(sh, k, d);
      if (v >= n_vars && dom->shape_rank) {
        json_t *vals = json_array();
        for (int q = 0; q < dom->shape_rank; q++) json_array_append_new(vals, json_integer(dom->shape[s][q]));
        json_object_set_new(sh, "values", json_pack("{so}", k, vals));
      }
    }
    json_array_append_new(arr, sh);
  }
  return arr;
}

/* r has a BN or Reshape (reads the domain's parameters). */
static int uses_params(const grec *r) {
  for (int i = 0; i < r->n_ops; i++)
    if (r->ops[i].type == G_BN || r->ops[i].type == G_RESHAPE) return 1;
  return 0;
}

/* Adds candidate a -> b as a rule (verified or dropped) to rs. */
static int add_rule(gopt_ruleset *rs, const gdomain *dom, const grec *a, const grec *b, size_t idx,
                    const gopt_rulegen_opts *o, gopt_rulegen_stats *st) {
  rw_rule r;
  memset(&r, 0, sizeof r);
  r.builtin = -1;
  snprintf(r.name, sizeof r.name, "%s%s_%04zu", dom->prefix, a->n_ops == 4 ? "4" : "", idx);
  int n_par = uses_params(a) ? dom->n_par : 0;
  r.n_vars = a->vars + n_par;
  rec_pattern(a, &r.src);
  rec_pattern(b, &r.dst);
  r.shapes = rule_shapes(dom, a->vars, n_par);
  for (int v = 0; v < RW_MAX_VARS; v++) {
    r.var_rank[v] = v < a->vars ? dom->rank[v] : v < r.n_vars ? 1 : -1;
    r.var_const[v] = v >= a->vars && v < r.n_vars; /* BN parameters, a Reshape target: initializers */
  }
  r.enabled = 1;
  if (rw_ruleset_push(rs, &r)) {
    rw_rule_clear(&r);
    return GOPT_ENOMEM;
  }
  gopt_error e2 = {0};
  rw_rule *rr = &rs->r[rs->n - 1];
  if (gopt_rule_verify(rs, rs->n - 1, o->seed + 5, &e2)) {
    rr->enabled = 0;
    snprintf(rr->reason, sizeof rr->reason, "numeric verification failed: %.200s", e2.msg);
    st->dropped_numeric++;
    return 0;
  }
  if (o->use_z3) {
    char why[200] = "";
    int p = rw_z3_prove(rr, 1000, why, sizeof why);
    rr->extra = json_object();
    if (p == 1) {
      json_object_set_new(rr->extra, "proof", json_string("z3"));
      st->proved++;
    } else {
      rr->enabled = 0;
      snprintf(rr->reason, sizeof rr->reason, "not proved by Z3 from the axioms: %s", why);
      st->dropped_formal++;
      return 0;
    }
  }
  st->verified++;
  return 0;
}

/* A key operator of dom in r: a Conv, scalar Mul or Gemm (what the conv and Gemm domains are
 * for), or one of dom->key_mask (BN, Reshape). */
static int has_key_op(const gdomain *dom, const grec *r) {
  for (int i = 0; i < r->n_ops; i++)
    if (dom->key_mask ? dom->key_mask >> r->ops[i].type & 1 : r->ops[i].type >= G_CONV) return 1;
  return 0;
}

/* The domain's bound on candidate a -> b: conv domains keep rules with a Conv or scalar Mul; the
 * Gemm domain only rules between one Gemm and a graph without Gemm (Gemm's definition by MatMul,
 * Transpose and Add; its thousands of variants of MatMul rules are left out). */
static int domain_keeps(const gdomain *dom, const grec *a, const grec *b) {
  if (!dom->key_ops) return 1;
  /* both sides read the same parameters (or none) */
  if (uses_params(a) != uses_params(b)) return 0;
  if (!(dom->ops & (1u << G_GEMM))) return has_key_op(dom, a) || has_key_op(dom, b);
  return (a->n_ops == 1 && has_key_op(dom, a) && !has_key_op(dom, b)) ||
         (b->n_ops == 1 && has_key_op(dom, b) && !has_key_op(dom, a));
}

typedef struct keyset {
  uint64_t *k;
  size_t n, cap;
} keyset;

/* Adds key; 1 when new, 0 when present, -1 out of memory. */
static int keyset_add(keyset *ks, uint64_t key) {
  for (size_t q = 0; q < ks->n; q++)
    if (ks->k[q] == key) return 0;
  if (ks->n == ks->cap) {
    size_t nc = ks->cap ? ks->cap * 2 : 1024;
    uint64_t *p = realloc(ks->k, nc * sizeof *p);
    if (!p) return -1;
    ks->k = p;
    ks->cap = nc;
  }
  ks->k[ks->n++] = key;
  return 1;
}

/* Enumerates domain dom, pairs equal fingerprints, prunes and adds the rules to rs. */
static int run_domain(gen *g, const gdomain *dom, int max_ops, keyset *ks, gopt_ruleset *rs,
                      const gopt_rulegen_opts *o, gopt_rulegen_stats *st, double t0, gopt_error *err) {
  size_t limit4 = o->max_rules4 ? o->max_rules4 : 1000;
  g->dom = dom;
  g->max_ops = max_ops;
  g->n_recs = 0;
  g->seen_n = 0;
  if (g->seen) memset(g->seen, 0, g->seen_cap * sizeof *g->seen);
  memset(g->have, 0, sizeof g->have);
  fill_random(g->vals, dom, 0, o->seed * 7 + 1);
  rw_gen_params(dom, 0, o->seed * 7 + 3, &g->par);
  for (int v = 0; v < G_VARS; v++) g->have[v] = 1;
  dfs(g);
  if (g->oom) return gopt_error_set(err, GOPT_ENOMEM, "out of memory enumerating graphs (%zu recorded)", g->n_recs);
  st->graphs += g->n_recs;
  qsort(g->recs, g->n_recs, sizeof *g->recs, cmp_fp);
  size_t idx = 0;
  for (size_t i = 0; i < g->n_recs;) {
    size_t j = i;
    while (j < g->n_recs && g->recs[j].fp == g->recs[i].fp) j++;
    /* Each graph is paired with the group's representative (fewest ops, first in order) both
     * ways: a star instead of all k (k - 1) pairs; any two members are two rewrites apart. */
    size_t rep = i;
    for (size_t q = i; q < j; q++)
      if (g->recs[q].n_ops < g->recs[rep].n_ops) rep = q;
    for (size_t a = i; a < j; a++)
      for (size_t b = i; b < j; b++) {
        if (a == b || (a != rep && b != rep)) continue;
        const grec *ra = &g->recs[a], *rb = &g->recs[b];
        if (ra->n_out != rb->n_out || ra->vars != rb->vars) continue;
        if (!domain_keeps(dom, ra, rb)) continue;
        int four = ra->n_ops == 4 || rb->n_ops == 4;
        /* the documented 4-op bound: sources of 4 ops with targets of at most 2, capped */
        if (four ? (ra->n_ops != 4 || rb->n_ops > 2 || st->rules4 >= limit4) : o->only4) continue;
        st->candidates++;
        int fresh = 0;
        if (!common_subgraph(ra, rb) && agree(dom, ra, rb, 0, o->seed + 11) && agree(dom, ra, rb, 1, o->seed + 13) &&
            (fresh = keyset_add(ks, rule_key(dom, ra, rb))) < 0)
          return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
        if (fresh != 1) {
          st->pruned++;
          continue;
        }
        if (getenv("GOPT_RULEGEN_PROGRESS") && idx % 100 == 0)
          fprintf(stderr, "rulegen %s: %zu graphs, %zu candidates, %zu rules, %zu proved, %.1f s\n",
                  dom->prefix, st->graphs, st->candidates, idx, st->proved, gopt_now() - t0);
        st->rules4 += four;
        int rc = add_rule(rs, dom, ra, rb, idx++, o, st);
        if (rc) return gopt_error_set(err, rc, "out of memory");
      }
    i = j;
  }
  return 0;
}

/* Domain `prefix` is in the comma-separated list (NULL: every domain). */
static int domain_listed(const char *list, const char *prefix) {
  if (!list) return 1;
  size_t n = strlen(prefix);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, prefix, n)) return 1;
    p += len + (e ? 1 : 0);
  }
  return 0;
}

/* Every name in the list is a domain. */
static int check_domains(const char *list, const gdomain *doms, int nd, gopt_error *err) {
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    int len = e ? (int)(e - p) : (int)strlen(p), found = 0;
    for (int d = 0; d < nd; d++) found |= (int)strlen(doms[d].prefix) == len && !strncmp(p, doms[d].prefix, (size_t)len);
    if (!found) {
      char names[256] = "";
      for (int d = 0; d < nd; d++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", d ? ", " : "", doms[d].prefix);
      return gopt_error_set(err, GOPT_EINVAL, "--domains: unknown domain '%.*s' (domains: %s)", len, p, names);
    }
    p += len + (e ? 1 : 0);
  }
  return 0;
}

int gopt_rulegen_run(const gopt_rulegen_opts *o, gopt_ruleset **out, gopt_rulegen_stats *st,
                     gopt_error *err) {
  memset(st, 0, sizeof *st);
  *out = NULL;
  double t0 = gopt_now();
  int max_ops = o->max_ops >= 1 && o->max_ops <= G_MAXOPS ? o->max_ops : 3;
  gen *g = calloc(1, sizeof *g);
  gopt_ruleset *rs = gopt_ruleset_builtin();
  keyset ks = {0};
  int rc = 0, nd;
  const gdomain *doms = rw_gen_domains(&nd);
  if (!g || !rs) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  st->builtin = gopt_ruleset_count(rs);
  if ((rc = check_domains(o->domains, doms, nd, err))) goto done;
  /* the conv and Gemm domains stop at 3 ops (their 4-op graphs are millions each); --only4 is
   * about the 2-D domain alone */
  for (int d = 0; d < nd && !rc; d++)
    if ((d == 0 || !o->only4) && domain_listed(o->domains, doms[d].prefix))
      rc = run_domain(g, &doms[d], d == 0 || max_ops < 3 ? max_ops : 3, &ks, rs, o, st, t0, err);
  if (rc) goto done;
  *out = rs;
  rs = NULL;
done:
  st->seconds = gopt_now() - t0;
  if (g) {
    free(g->recs);
    free(g->seen);
  }
  free(g);
  free(ks.k);
  gopt_ruleset_free(rs);
  return rc;
}
