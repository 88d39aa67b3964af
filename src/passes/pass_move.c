/* pass_move.c: the reshape mover and the while-loop simplifier, after XLA's ReshapeMover and
 * WhileLoopSimplifier (docs/PASSES.md lists what each does here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "ir/ir_internal.h"
#include "ops/ops_hlo.h"
#include "passes/passes_internal.h"

/* ---- reshape mover ----------------------------------------------------------------------------- */

/* 1 when t is a broadcast of a scalar (it can take any shape for free). */
static int scalar_bcast(const gopt_graph *g, int32_t t) {
  int32_t pr = g->tensors.a[t].producer;
  return pr >= 0 && pass_is(g, pr, "broadcast") && g->nodes.a[pr].n_in == 1 &&
         g->tensors.a[gopt_node_input(g, pr, 0)].rank == 0;
}

/* 1 when rearranges a and b (reshape or transpose nodes) are the same op on the same shape. */
static int same_rearrange(const gopt_graph *g, int32_t a, int32_t b) {
  int32_t xa = gopt_node_input(g, a, 0), xb = gopt_node_input(g, b, 0);
  int r = g->tensors.a[xa].rank;
  if (strcmp(gopt_node_type(g, a), gopt_node_type(g, b)) || r != g->tensors.a[xb].rank ||
      (r && memcmp(gopt_tensor_dims(g, xa), gopt_tensor_dims(g, xb), (size_t)r * sizeof(int64_t))))
    return 0;
  if (!pass_is(g, a, "transpose")) return 1;
  size_t ka, kb;
  const int64_t *pa = gopt_node_get_ints(g, a, "dimensions", &ka), *pb = gopt_node_get_ints(g, b, "dimensions", &kb);
  return ka == kb && (!ka || !memcmp(pa, pb, ka * sizeof *pa));
}

/* 1 when n's operand i already appeared as an operand j < i. */
static int seen_before(const gopt_graph *g, int32_t n, int i) {
  for (int j = 0; j < i; j++)
    if (gopt_node_input(g, n, j) == gopt_node_input(g, n, i)) return 1;
  return 0;
}

/* op(rearrange(x1), ..., rearrange(xk), broadcast(scalar)...) -> rearrange(op(x1, ..., xk,
 * broadcast'(scalar))) when the rearranges (reshape, or transpose with one permutation) are equal
 * ops on equal shapes and each feeds only this op. Returns the replacement, -1, or -2. */
static int32_t sink_rearrange(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  int nin = g->nodes.a[n].n_in, k = 0, nsb = 0, nsb_gone = 0;
  int32_t first = -1, y = gopt_node_output(g, n, 0), ins[8];
  if (nin < 1 || nin > 8) return -1;
  for (int i = 0; i < nin; i++) {
    int32_t t = gopt_node_input(g, n, i), pr = t >= 0 ? g->tensors.a[t].producer : -1;
    if (t < 0) return -1;
    if (pr >= 0 && (pass_is(g, pr, "reshape") || pass_is(g, pr, "transpose")) && g->nodes.a[pr].n_in == 1 &&
        !scalar_bcast(g, t)) {
      size_t here = 0;
      for (int j = 0; j < nin; j++) here += gopt_node_input(g, n, j) == t;
      if (gopt_tensor_use_count(g, t) != here || pass_is_output(p, t)) return -1;
      if (first < 0) first = pr;
      else if (!same_rearrange(g, first, pr)) return -1;
      k += !seen_before(g, n, i);
    } else if (!scalar_bcast(g, t)) return -1;
    else if (!seen_before(g, n, i)) { /* a new broadcast replaces it; the old one may stay */
      size_t here = 0;
      for (int j = 0; j < nin; j++) here += gopt_node_input(g, n, j) == t;
      nsb++;
      nsb_gone += gopt_tensor_use_count(g, t) == here && !pass_is_output(p, t);
    }
  }
  /* instructions: + op' + rearrange' + new broadcasts; - op - rearranges - dead broadcasts */
  if (!k || 1 + nsb > k + nsb_gone) return -1;
  int32_t x0 = gopt_node_input(g, first, 0);
  int r = g->tensors.a[x0].rank;
  int64_t sd[GOPT_MAX_RANK], perm[GOPT_MAX_RANK];
  size_t np = 0;
  if (r) memcpy(sd, gopt_tensor_dims(g, x0), (size_t)r * sizeof *sd);
  if (pass_is(g, first, "transpose")) {
    const int64_t *pp = gopt_node_get_ints(g, first, "dimensions", &np);
    if (np) memcpy(perm, pp, np * sizeof *perm);
  }
  for (int i = 0; i < nin; i++) {
    int32_t t = gopt_node_input(g, n, i), pr = g->tensors.a[t].producer;
    if (!scalar_bcast(g, t)) {
      ins[i] = gopt_node_input(g, pr, 0);
      continue;
    }
    int32_t s = gopt_node_input(g, pr, 0);
    ins[i] = pass_add_hlo(p, "broadcast", "broadcast", 1, &s, g->tensors.a[t].dtype, r, sd);
    int64_t none = 0;
    if (ins[i] < 0 || pass_set_ints(p, ins[i], "dimensions", &none, 0)) return -2;
  }
  int32_t e = pass_add_hlo(p, pass_op(g, n), pass_op(g, n), nin, ins, g->tensors.a[y].dtype, r, sd);
  if (e < 0 || pass_copy_string_attrs(p, n, g->tensors.a[e].producer)) return -2;
  int is_t = pass_is(g, first, "transpose");
  int32_t o = pass_add_hlo(p, is_t ? "transpose" : "reshape", is_t ? "transpose" : "reshape", 1, &e,
                           g->tensors.a[y].dtype, g->tensors.a[y].rank, gopt_tensor_dims(g, y));
  if (o < 0 || (is_t && pass_set_ints(p, o, "dimensions", perm, np))) return -2;
  return o;
}

int pass_reshape_mover(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n; /* moved rearranges are considered again in the next run */
  for (size_t n = 0; n < nn; n++) {
    const char *op = gopt_node_alive(g, (int32_t)n) ? pass_op(g, (int32_t)n) : NULL;
    if (!op || g->nodes.a[n].n_out != 1 || !pass_elementwise(op)) continue;
    int32_t to = sink_rearrange(p, (int32_t)n);
    if (to == -2) return p->err->code ? p->err->code : GOPT_ENOMEM;
    if (to >= 0) pass_replace(p, (int32_t)n, &to);
  }
  return 0;
}

/* ---- while-loop simplifier ------------------------------------------------------------------- */

/* need[i] = 1 when the outputs of s (those with out_mask[k] set; all when NULL) depend on s's
 * input i. */
static int needed_inputs(const gopt_graph *s, const unsigned char *out_mask, unsigned char *need, gopt_error *err) {
  size_t nt = s->tensors.n, sp = 0;
  unsigned char *seen = calloc(nt + 1, 1);
  int32_t *stack = malloc((nt + 1) * sizeof *stack);
  if (!seen || !stack) {
    free(seen);
    free(stack);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < s->outputs.n; i++)
    if ((!out_mask || out_mask[i]) && !seen[s->outputs.a[i]]) seen[s->outputs.a[i]] = 1, stack[sp++] = s->outputs.a[i];
  while (sp) {
    int32_t t = stack[--sp], pr = s->tensors.a[t].producer;
    int leaf = -1; /* tuple and get-tuple-element results are one operand leaf each */
    if (pr >= 0 && pass_is(s, pr, "tuple")) leaf = s->tensors.a[t].out_index;
    if (pr >= 0 && pass_is(s, pr, "get-tuple-element"))
      leaf = (int)gopt_node_get_int(s, pr, "hlo.leaf_offset", 0) + s->tensors.a[t].out_index;
    if (leaf >= 0 && leaf < s->nodes.a[pr].n_in) {
      int32_t u = gopt_node_input(s, pr, leaf);
      if (u >= 0 && !seen[u]) seen[u] = 1, stack[sp++] = u;
      continue;
    }
    for (int i = 0; pr >= 0 && i < s->nodes.a[pr].n_in; i++) {
      int32_t u = gopt_node_input(s, pr, i);
      if (u >= 0 && !seen[u]) seen[u] = 1, stack[sp++] = u;
    }
  }
  for (size_t i = 0; i < s->inputs.n; i++) need[i] = seen[s->inputs.a[i]];
  free(seen);
  free(stack);
  return 0;
}

/* Runs computation s on vals[i] (NULL: zeros; only inputs the outputs do not depend on may be
 * NULL) and returns its outputs in outs (s->outputs.n of them, caller clears). 0, 1 when it cannot
 * run (unsupported op), or an error. */
static int eval_comp(const gopt_graph *s, const void *const *vals, gopt_host_tensor *outs) {
  gopt_exec *x = NULL;
  gopt_exec_opts o = {0};
  gopt_error e = {0};
  o.threads = 1;
  if (gopt_exec_new(s, &o, &x, NULL, &e) || gopt_exec_n_inputs(x) != s->inputs.n) {
    gopt_exec_free(x);
    return 1;
  }
  int rc = 0;
  for (size_t i = 0; i < s->inputs.n && !rc; i++) {
    int32_t t = s->inputs.a[i];
    gopt_host_tensor h = {0};
    h.dtype = s->tensors.a[t].dtype;
    h.rank = s->tensors.a[t].rank;
    if (h.rank) memcpy(h.dims, gopt_tensor_dims(s, t), (size_t)h.rank * sizeof *h.dims);
    h.nbytes = (size_t)gopt_tensor_numel(s, t) * gopt_dtype_size(h.dtype);
    h.data = vals[i] ? (void *)vals[i] : calloc(h.nbytes + 1, 1);
    if (!h.data) rc = 1;
    else rc = gopt_exec_set_input(x, i, &h, &e) ? 1 : 0;
    if (!vals[i]) free(h.data);
  }
  if (!rc) rc = gopt_exec_run(x, &e) ? 1 : 0;
  for (size_t i = 0; i < s->outputs.n && !rc; i++) rc = gopt_exec_get_output(x, i, &outs[i], &e) ? 1 : 0;
  gopt_exec_free(x);
  return rc;
}

/* The trip count of while node n when it is 0 or 1 and follows from constant initial values:
 * 0, 1, or -1 when unknown. */
static int trip_count(pctx *p, int32_t n, const gopt_graph *cond, const gopt_graph *body) {
  gopt_graph *g = p->g;
  size_t nl = (size_t)g->nodes.a[n].n_in;
  int res = -1;
  unsigned char *nc = calloc(nl + 1, 1), *nb = calloc(nl + 1, 1);
  const void **vals = calloc(nl + 1, sizeof *vals), **v2 = calloc(nl + 1, sizeof *v2);
  gopt_host_tensor *bo = calloc(nl + 1, sizeof *bo), co[2];
  memset(co, 0, sizeof co);
  if (!nc || !nb || !vals || !v2 || !bo || cond->inputs.n != nl || body->inputs.n != nl || body->outputs.n != nl ||
      cond->outputs.n != 1 || needed_inputs(cond, NULL, nc, p->err))
    goto done;
  for (size_t i = 0; i < nl; i++) { /* the condition's inputs must be constants */
    int32_t t = gopt_node_input(g, n, (int)i), pr;
    while (t >= 0 && (pr = g->tensors.a[t].producer) >= 0 && pass_is(g, pr, "tuple")) /* a tuple's leaf k is its input k */
      t = gopt_node_input(g, pr, g->tensors.a[t].out_index);
    vals[i] = t >= 0 && (g->tensors.a[t].flags & GOPT_T_CONST) ? gopt_tensor_data(g, t) : NULL;
    if (nc[i] && !vals[i]) goto done;
  }
  if (eval_comp(cond, vals, co) || co[0].dtype != GOPT_DT_BOOL || co[0].nbytes != 1) goto done;
  if (!((unsigned char *)co[0].data)[0]) {
    res = 0;
    goto done;
  }
  /* one iteration: the body outputs the condition reads must follow from constants */
  gopt_graph *sub = gopt_graph_clone(body);
  if (!sub) goto done;
  size_t w = 0;
  for (size_t i = 0; i < nl; i++)
    if (nc[i]) sub->outputs.a[w++] = sub->outputs.a[i];
  sub->outputs.n = w;
  gopt_graph *lean = NULL; /* only what the condition reads is evaluated */
  gopt_error e2 = {0};
  if (!gopt_pass_run(gopt_pass_find("dce"), sub, &lean, NULL, &e2)) {
    gopt_graph_free(sub);
    sub = lean;
  }
  int ok = !needed_inputs(sub, NULL, nb, p->err);
  for (size_t i = 0; ok && i < nl; i++) ok = !nb[i] || vals[i];
  if (ok) ok = !eval_comp(sub, vals, bo);
  for (size_t i = 0, j = 0; ok && i < nl; i++) v2[i] = nc[i] ? bo[j++].data : NULL;
  gopt_host_tensor_clear(&co[0]);
  if (ok && !eval_comp(cond, v2, co) && co[0].dtype == GOPT_DT_BOOL && !((unsigned char *)co[0].data)[0]) res = 1;
  for (size_t i = 0; i < w; i++) gopt_host_tensor_clear(&bo[i]);
  gopt_graph_free(sub);
done:
  gopt_host_tensor_clear(&co[0]);
  free(nc);
  free(nb);
  free(vals);
  free(v2);
  free(bo);
  return res;
}

static const gopt_graph *comp_attr(const gopt_graph *g, int32_t n, const char *key) {
  const gopt_attr *a = gopt_node_attr(g, n, key);
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

/* ---- W3: dead loop-carried elements ---- */

/* 1 when ts[0..n) are named BASE#0 .. BASE#n-1: the leaves of one flat tuple of arrays. */
static int flat_tuple(const gopt_graph *g, const int32_t *ts, int n) {
  const char *b = n > 0 ? gopt_graph_str(g, g->tensors.a[ts[0]].name) : "";
  size_t bl = strcspn(b, "#");
  for (int i = 0; i < n; i++) {
    char want[16];
    snprintf(want, sizeof want, "#%d", i);
    const char *nm = gopt_graph_str(g, g->tensors.a[ts[i]].name);
    if (!b[bl] || strncmp(nm, b, bl) || strcmp(nm + bl, want)) return 0;
  }
  return n > 0;
}

/* Renames the kept leaves ts[i] (keep[i]) of a flat tuple BASE#i to BASE#0, BASE#1, ... */
static int renumber(gopt_graph *g, const int32_t *ts, int n, const unsigned char *keep) {
  const char *b = gopt_graph_str(g, g->tensors.a[ts[0]].name);
  size_t bl = strcspn(b, "#");
  char *name = malloc(bl + 16);
  int rc = name ? 0 : GOPT_ENOMEM;
  for (int i = 0, j = 0; i < n && !rc; i++) {
    if (!keep[i]) continue;
    memcpy(name, b, bl); /* b stays valid: renaming interns new strings after it */
    snprintf(name + bl, 16, "#%d", j++);
    rc = ir_tensor_rename(g, ts[i], name);
    b = gopt_graph_str(g, g->tensors.a[ts[0]].name);
    if (i == 0) bl = strcspn(b, "#");
  }
  free(name);
  return rc;
}

/* used[i] = 1 when leaf i of the flat tuple ts[0..nl) is a graph output or is read other than by a
 * get-tuple-element of the whole tuple extracting another leaf; those get-tuple-elements go to
 * gtes (capacity: ts[0]'s use count + 1), *ng of them. */
static void leaf_uses(const gopt_graph *g, const int32_t *ts, int nl, unsigned char *used, int32_t *gtes, int *ng) {
  *ng = 0;
  for (int i = 0; i < nl; i++) {
    used[i] = (g->tensors.a[ts[i]].flags & GOPT_T_OUTPUT) != 0;
    for (int32_t s = g->tensors.a[ts[i]].first_use; s >= 0; s = g->slots.a[s].next_use) {
      int32_t u = g->slots.a[s].node;
      if (!gopt_node_alive(g, u)) continue;
      int gte = pass_is(g, u, "get-tuple-element") && g->nodes.a[u].n_in == nl && g->nodes.a[u].n_out == 1;
      for (int k = 0; gte && k < nl; k++) gte = gopt_node_input(g, u, k) == ts[k];
      int64_t e = gte ? gopt_node_get_int(g, u, "hlo.leaf_offset", -1) : -1;
      if (e < 0 || e >= nl || gopt_node_get_int(g, u, "index", e) != e) used[i] = 1;
      else if (e == i) used[i] = 1;
      if (gte && i == 0) gtes[(*ng)++] = u;
    }
  }
}

/* Drops the dead leaves of a flat tuple ts[0..nl) from its get-tuple-elements gtes[0..ng): each
 * reads only the live leaves and its index counts live leaves. */
static int fix_gtes(gopt_graph *g, const int32_t *gtes, int ng, const unsigned char *keep, gopt_error *err) {
  for (int k = 0; k < ng; k++) {
    int64_t e = gopt_node_get_int(g, gtes[k], "hlo.leaf_offset", 0), ne = 0, live = 0;
    for (int i = 0; i < g->nodes.a[gtes[k]].n_in; i++) live += keep[i], ne += i < e && keep[i];
    int32_t m = pass_rebuild_node(g, gtes[k], keep, NULL, err);
    if (m < 0 || gopt_node_set_int(g, m, "hlo.leaf_offset", ne) || gopt_node_set_int(g, m, "index", ne) ||
        gopt_node_set_ints(g, m, "hlo.operands", &live, 1)) /* one operand: the whole tuple */
      return err->code ? err->code : gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  return 0;
}

/* Removes the dead leaves (keep[i] == 0) of computation s's flat tuple parameter, and for a body
 * (is_body) first the dead elements of its root tuple and what computes only them (DCE). Returns
 * the new computation (s is consumed), or NULL when it does not have that form or on error
 * (err->code set). */
static gopt_graph *drop_params(gopt_graph *s, int nl, const unsigned char *keep, int is_body, gopt_error *err) {
  int32_t r = is_body && s->outputs.n ? s->tensors.a[s->outputs.a[0]].producer : -1;
  int ok = (size_t)nl == s->inputs.n && flat_tuple(s, s->inputs.a, nl);
  if (ok && is_body) {
    ok = r >= 0 && pass_is(s, r, "tuple") && s->outputs.n == (size_t)nl && s->nodes.a[r].n_in == nl &&
         s->nodes.a[r].n_out == nl && flat_tuple(s, s->outputs.a, nl);
    for (int k = 0; ok && k < nl; k++) ok = gopt_node_output(s, r, k) == s->outputs.a[k];
    for (int k = 0, j = 0; ok && k < nl; k++) {
      if (!keep[k]) s->tensors.a[s->outputs.a[k]].flags &= (uint16_t)~GOPT_T_OUTPUT;
      else s->outputs.a[j++] = s->outputs.a[k];
    }
    if (ok && (pass_rebuild_node(s, r, keep, keep, err) < 0 || renumber(s, s->outputs.a, nl, keep))) ok = 0;
    if (ok) s->outputs.n = 0; /* recounted below */
    for (int k = 0; ok && k < nl; k++) s->outputs.n += keep[k];
  }
  gopt_graph *lean = NULL;
  gopt_error e2 = {0};
  if (ok && !gopt_pass_run(gopt_pass_find("dce"), s, &lean, NULL, &e2)) {
    gopt_graph_free(s);
    s = lean;
  } else ok = 0;
  size_t cap = ok ? gopt_tensor_use_count(s, s->inputs.a[0]) + 1 : 0;
  unsigned char *used = malloc((size_t)nl + 1);
  int32_t *gtes = malloc(cap * sizeof *gtes + 1);
  int ng = 0;
  if (ok && used && gtes) leaf_uses(s, s->inputs.a, nl, used, gtes, &ng);
  for (int k = 0; ok && k < nl; k++) ok = used && gtes && (keep[k] || !used[k]);
  if (ok && (fix_gtes(s, gtes, ng, keep, err) || renumber(s, s->inputs.a, nl, keep))) ok = 0;
  for (int k = 0, j = 0; ok && k < nl; k++) {
    if (!keep[k]) s->tensors.a[s->inputs.a[k]].flags &= (uint16_t)~GOPT_T_INPUT;
    else s->inputs.a[j++] = s->inputs.a[k];
    if (k == nl - 1) s->inputs.n = (size_t)j;
  }
  free(used);
  free(gtes);
  if (!ok) {
    gopt_graph_free(s);
    return NULL;
  }
  return s;
}

/* The dead elements of while n's flat state tuple: not read by the condition, by the while's
 * users, nor by the body's computation of a live element (a fixed point, so elements that only
 * feed each other die together). keep[i] = 0 for them; the count of dead ones, or -1 on error. */
static int dead_elements(pctx *p, int32_t n, const gopt_graph *cond, const gopt_graph *body, unsigned char *keep,
                         int32_t *gtes, int *ng) {
  gopt_graph *g = p->g;
  int nl = g->nodes.a[n].n_in;
  unsigned char *nc = calloc((size_t)nl + 1, 1), *need = calloc((size_t)nl + 1, 1);
  int dead = -1;
  if (!nc || !need || needed_inputs(cond, NULL, nc, p->err)) goto done;
  leaf_uses(g, g->outs.a + g->nodes.a[n].out, nl, need, gtes, ng);
  for (int i = 0; i < nl; i++) keep[i] = nc[i] || need[i] || pass_is_output(p, gopt_node_output(g, n, i));
  for (int changed = 1; changed;) {
    changed = 0;
    if (needed_inputs(body, keep, need, p->err)) goto done;
    for (int i = 0; i < nl; i++)
      if (!keep[i] && need[i]) keep[i] = 1, changed = 1;
  }
  dead = 0;
  for (int i = 0; i < nl; i++) dead += !keep[i];
done:
  free(nc);
  free(need);
  return dead;
}

/* After W3 dropped while operands: the initial tuple t0 (tensors tv[0..nl), the while's old
 * operands) loses the dead elements too when nothing else reads them, and their producers when
 * they become unused. 0 or an error. */
static int drop_init_elements(pctx *p, const int32_t *tv, int nl, const unsigned char *keep) {
  gopt_graph *g = p->g;
  int32_t t0 = g->tensors.a[tv[0]].producer;
  int ok = t0 >= 0 && pass_is(g, t0, "tuple") && g->nodes.a[t0].n_in == nl && g->nodes.a[t0].n_out == nl &&
           flat_tuple(g, tv, nl);
  for (int k = 0; ok && k < nl; k++)
    ok = gopt_node_output(g, t0, k) == tv[k] && (keep[k] || (!gopt_tensor_use_count(g, tv[k]) && !pass_is_output(p, tv[k])));
  if (!ok) return 0;
  int32_t *src = malloc((size_t)nl * sizeof *src);
  if (!src) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  for (int k = 0; k < nl; k++) src[k] = gopt_node_input(g, t0, k);
  int rc = pass_rebuild_node(g, t0, keep, keep, p->err) < 0 ? GOPT_ENOMEM : renumber(g, tv, nl, keep);
  for (int k = 0; !rc && k < nl; k++)
    if (!keep[k] && src[k] >= 0 && g->tensors.a[src[k]].producer >= 0) pass_drop_unused(p, g->tensors.a[src[k]].producer);
  free(src);
  return rc;
}

/* W3: removes while n's dead state elements (dead_elements) from its operands and results, the
 * body's and condition's parameter, the body's root tuple, the while's get-tuple-element users
 * (indices renumbered) and the initial tuple (drop_init_elements). 0 or an error. */
static int remove_dead_elements(pctx *p, int32_t n, const gopt_graph *cond, const gopt_graph *body) {
  gopt_graph *g = p->g;
  int nl = g->nodes.a[n].n_in, ng = 0, rc = 0;
  size_t k = 0;
  const int64_t *lo = gopt_node_get_ints(g, n, "hlo.operands", &k);
  if (!lo || k != 1 || lo[0] != nl || !flat_tuple(g, g->outs.a + g->nodes.a[n].out, nl) || cond->outputs.n != 1)
    return 0;
  unsigned char *keep = malloc((size_t)nl + 1);
  int32_t *gtes = malloc((gopt_tensor_use_count(g, gopt_node_output(g, n, 0)) + 1) * sizeof *gtes);
  int32_t *tv = malloc(2 * (size_t)nl * sizeof *tv); /* the while's old operands, then results */
  if (!keep || !gtes || !tv) {
    rc = gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < nl; i++) tv[i] = gopt_node_input(g, n, i), tv[nl + i] = gopt_node_output(g, n, i);
  int dead = dead_elements(p, n, cond, body, keep, gtes, &ng);
  if (dead < 0) rc = p->err->code;
  if (dead <= 0 || dead == nl) goto done;
  gopt_graph *nb = gopt_graph_clone(body), *nc = gopt_graph_clone(cond);
  nb = nb ? drop_params(nb, nl, keep, 1, p->err) : NULL;
  nc = nc ? drop_params(nc, nl, keep, 0, p->err) : NULL;
  size_t before = gopt_graph_node_count(body) + gopt_graph_node_count(cond);
  size_t after = nb && nc ? gopt_graph_node_count(nb) + gopt_graph_node_count(nc) : before;
  int32_t m = nb && nc ? pass_rebuild_node(g, n, keep, keep, p->err) : -1;
  if (m >= 0 && !gopt_node_set_graph(g, m, "body", nb)) nb = NULL;
  if (m >= 0 && !nb && !gopt_node_set_graph(g, m, "condition", nc)) nc = NULL;
  int64_t live = nl - dead;
  if (m >= 0 && !nb && !nc) {
    rc = gopt_node_set_ints(g, m, "hlo.operands", &live, 1) ? GOPT_ENOMEM : fix_gtes(g, gtes, ng, keep, p->err);
    if (!rc) rc = renumber(g, tv + nl, nl, keep);
    if (!rc) rc = drop_init_elements(p, tv, nl, keep);
    p->st->rewrites++;
    p->st->removed += before > after ? before - after : 0; /* in the body and condition */
  } else if (m >= 0 || p->err->code) rc = p->err->code ? p->err->code : GOPT_ENOMEM;
  gopt_graph_free(nb);
  gopt_graph_free(nc);
done:
  free(keep);
  free(gtes);
  free(tv);
  if (rc && !p->err->code) gopt_error_set(p->err, rc, "out of memory");
  return rc;
}

/* W1: a while whose condition is false on its (constant) initial values is its initial values.
 * W2: one that runs exactly once is a call of its body (call-inliner then inlines it).
 * W3: other loops lose their dead state elements (remove_dead_elements). */
int pass_while_simplifier(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || !pass_is(g, (int32_t)n, "while")) continue;
    const gopt_graph *cond = comp_attr(g, (int32_t)n, "condition"), *body = comp_attr(g, (int32_t)n, "body");
    int nl = g->nodes.a[n].n_in;
    if (!cond || !body || nl != g->nodes.a[n].n_out || nl > UINT16_MAX) continue;
    int tc = trip_count(p, (int32_t)n, cond, body);
    if (p->err->code) return p->err->code;
    int32_t *buf = malloc(2 * ((size_t)nl + 1) * sizeof *buf);
    if (!buf) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    for (int i = 0; i < nl; i++) buf[i] = gopt_node_input(g, (int32_t)n, i), buf[nl + i] = gopt_node_output(g, (int32_t)n, i);
    int rc = 0;
    if (tc < 0) rc = remove_dead_elements(p, (int32_t)n, cond, body);
    if (tc == 0) pass_replace(p, (int32_t)n, buf);
    else if (tc == 1) {
      char name[128];
      snprintf(name, sizeof name, "call.gopt%zu", g->nodes.n);
      gopt_graph *bc = gopt_graph_clone(body);
      size_t k = 0;
      const int64_t *lo = gopt_node_get_ints(g, (int32_t)n, "hlo.operands", &k); /* operand leaf counts */
      int64_t *leaves = malloc((k + 1) * sizeof *leaves);
      if (leaves && k) memcpy(leaves, lo, k * sizeof *leaves);
      gopt_graph_remove_node(g, (int32_t)n); /* its outputs become the call's */
      int32_t c = bc && leaves ? gopt_graph_add_node(g, "hlo::call", name, nl, buf, nl, buf + nl, p->err) : -1;
      if (c >= 0 && k && gopt_node_set_ints(g, c, "hlo.operands", leaves, k)) c = -1;
      free(leaves);
      if (c < 0 || gopt_node_set_graph(g, c, "to_apply", bc)) {
        if (c < 0) gopt_graph_free(bc);
        rc = p->err->code ? p->err->code : gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
      } else {
        ops_hlo_set_kind(g, c, 1);
        p->st->rewrites++;
        p->st->removed++;
        p->st->added++;
      }
    }
    free(buf);
    if (rc) return rc;
  }
  return 0;
}
