/* pass_slice.c: the algebraic simplifier's slice and concatenate rules (R15-R18 in
 * docs/PASSES.md, after XLA's AlgebraicSimplifier HandleSlice/HandleConcatenate) and broadcast
 * folding (the broadcast rules of XLA's simplifier: broadcast of broadcast, elementwise ops sunk
 * below a broadcast, reshape/transpose/slice of a broadcast scalar). */
#include <stdlib.h>
#include <string.h>

#include "ops/ops_hlo.h"
#include "passes/passes_internal.h"

static const int64_t *dims_of(const gopt_graph *g, int32_t t) { return gopt_tensor_dims(g, t); }
static int rank_of(const gopt_graph *g, int32_t t) { return g->tensors.a[t].rank; }

/* R15 slice(slice(x)) -> slice(x); R16 slice(concatenate(..., x, ...)) within x -> slice(x).
 * Both rewire n in place; returns 1 when it did, 0 when not, -2 on error. */
static int slice_rules(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  int32_t a = gopt_node_input(g, n, 0), y = gopt_node_output(g, n, 0), pa = a >= 0 ? g->tensors.a[a].producer : -1;
  int r = rank_of(g, y);
  int64_t st[GOPT_MAX_RANK], li[GOPT_MAX_RANK], sd[GOPT_MAX_RANK], s2[GOPT_MAX_RANK], l2[GOPT_MAX_RANK], d2[GOPT_MAX_RANK];
  if (pa < 0 || ops_hlo_slice(g, n, r, st, li, sd)) return 0;
  const int64_t *od = dims_of(g, y);
  if (pass_is(g, pa, "slice") && g->nodes.a[pa].n_in == 1 && !ops_hlo_slice(g, pa, r, s2, l2, d2)) {
    for (int i = 0; i < r; i++) {
      st[i] = s2[i] + st[i] * d2[i];
      sd[i] *= d2[i];
      li[i] = od[i] ? st[i] + (od[i] - 1) * sd[i] + 1 : st[i];
    }
    gopt_node_set_input(g, n, 0, gopt_node_input(g, pa, 0));
    pass_drop_unused(p, pa);
    p->st->rewrites++;
    return pass_slice_set(p, n, r, st, li, sd) ? -2 : 1;
  }
  size_t k = 0;
  const int64_t *cd = gopt_node_get_ints(g, pa, "dimensions", &k);
  if (!pass_is(g, pa, "concatenate") || k != 1 || cd[0] < 0 || cd[0] >= r || !od[cd[0]]) return 0;
  int d = (int)cd[0];
  int64_t first = st[d], last = st[d] + (od[d] - 1) * sd[d], off = 0;
  for (int j = 0; j < g->nodes.a[pa].n_in; j++) {
    int32_t x = gopt_node_input(g, pa, j);
    int64_t len = dims_of(g, x)[d];
    if (first >= off && last < off + len) {
      st[d] -= off;
      li[d] -= off;
      gopt_node_set_input(g, n, 0, x);
      pass_drop_unused(p, pa);
      p->st->rewrites++;
      return pass_slice_set(p, n, r, st, li, sd) ? -2 : 1;
    }
    off += len;
  }
  return 0;
}

/* 1 when slices u and v (outputs of slice nodes) read adjacent ranges of the same operand along d
 * with stride 1 there and equal ranges elsewhere; st/li receive the merged range. */
static int adjacent(const gopt_graph *g, int32_t u, int32_t v, int d, int r, int64_t *st, int64_t *li, int64_t *sd) {
  int32_t pu = g->tensors.a[u].producer, pv = g->tensors.a[v].producer;
  int64_t s2[GOPT_MAX_RANK], l2[GOPT_MAX_RANK], d2[GOPT_MAX_RANK];
  if (pu < 0 || pv < 0 || !pass_is(g, pu, "slice") || !pass_is(g, pv, "slice") ||
      gopt_node_input(g, pu, 0) != gopt_node_input(g, pv, 0) || ops_hlo_slice(g, pu, r, st, li, sd) ||
      ops_hlo_slice(g, pv, r, s2, l2, d2) || sd[d] != 1 || d2[d] != 1 || li[d] != s2[d])
    return 0;
  for (int i = 0; i < r; i++)
    if (i != d && (st[i] != s2[i] || li[i] != l2[i] || sd[i] != d2[i])) return 0;
  li[d] = l2[d];
  return 1;
}

/* R17 concatenate: nested concatenates along the same dimension are flattened and zero-sized
 * operands dropped; R18 adjacent slices of one operand become one slice. Returns the replacement
 * of n's output, -1 when nothing changes, -2 on error. */
static int32_t concat_rules(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  size_t k = 0, m = 0;
  const int64_t *cd = gopt_node_get_ints(g, n, "dimensions", &k);
  int32_t y = gopt_node_output(g, n, 0);
  int r = rank_of(g, y), changed = 0;
  if (k != 1 || cd[0] < 0 || cd[0] >= r) return -1;
  int d = (int)cd[0];
  int32_t *ops = malloc(((size_t)g->nodes.a[n].n_in * 64 + 1) * sizeof *ops);
  if (!ops) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory"), -2;
  for (int j = 0; j < g->nodes.a[n].n_in; j++) {
    int32_t x = gopt_node_input(g, n, j), px = g->tensors.a[x].producer;
    const int64_t *xd = NULL;
    size_t xk = 0;
    if (px >= 0 && pass_is(g, px, "concatenate") && (xd = gopt_node_get_ints(g, px, "dimensions", &xk)) && xk == 1 &&
        xd[0] == d && g->nodes.a[px].n_in <= 64) {
      for (int i = 0; i < g->nodes.a[px].n_in; i++) ops[m++] = gopt_node_input(g, px, i);
      changed = 1;
    } else ops[m++] = x;
  }
  size_t w = 0;
  for (size_t j = 0; j < m; j++) /* zero-sized operands add nothing */
    if (dims_of(g, ops[j])[d] != 0 || (w == 0 && j == m - 1)) ops[w++] = ops[j];
  changed |= w != m;
  m = w;
  int64_t st[GOPT_MAX_RANK], li[GOPT_MAX_RANK], sd[GOPT_MAX_RANK];
  int32_t out = -1;
  for (size_t j = 0; j + 1 < m; j++) {
    if (!adjacent(g, ops[j], ops[j + 1], d, r, st, li, sd)) continue;
    int64_t od[GOPT_MAX_RANK];
    int32_t x = gopt_node_input(g, g->tensors.a[ops[j]].producer, 0);
    memcpy(od, dims_of(g, ops[j]), (size_t)r * sizeof *od);
    od[d] += dims_of(g, ops[j + 1])[d];
    int32_t s = pass_add_hlo(p, "slice", "slice", 1, &x, g->tensors.a[y].dtype, r, od);
    if (s < 0 || pass_slice_set(p, g->tensors.a[s].producer, r, st, li, sd)) goto fail;
    ops[j] = s;
    memmove(ops + j + 1, ops + j + 2, (m - j - 2) * sizeof *ops);
    m--;
    j--; /* the merged slice may merge with the next one too */
    changed = 1;
  }
  if (!changed) out = -1;
  else if (m == 1 && pass_same_type(g, ops[0], y)) out = ops[0];
  else {
    int64_t dd = d;
    out = pass_add_hlo(p, "concatenate", "concatenate", (int)m, ops, g->tensors.a[y].dtype, r, dims_of(g, y));
    if (out < 0 || pass_set_ints(p, out, "dimensions", &dd, 1)) goto fail;
  }
  free(ops);
  return out;
fail:
  free(ops);
  return -2;
}

int32_t pass_algsimp_slice(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  if (g->nodes.a[n].n_out != 1 || g->nodes.a[n].n_in < 1) return -1;
  if (pass_is(g, n, "slice") && g->nodes.a[n].n_in == 1) {
    int rc;
    while ((rc = slice_rules(p, n)) == 1) {} /* chains of slices collapse at once */
    return rc < 0 ? -2 : -1;
  }
  if (pass_is(g, n, "concatenate")) return concat_rules(p, n);
  return -1;
}

/* ---- broadcast folding ----------------------------------------------------------------------- */

/* B1 broadcast(broadcast(x)) -> broadcast(x) (dimensions composed); B2 reshape, transpose or
 * slice of broadcast(scalar) -> broadcast(scalar). Returns the replacement, -1, or -2. */
static int32_t fold_bcast_user(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  int32_t a = gopt_node_input(g, n, 0), y = gopt_node_output(g, n, 0), pa = g->tensors.a[a].producer;
  if (pa < 0 || !pass_is(g, pa, "broadcast") || g->nodes.a[pa].n_in != 1) return -1;
  int32_t x = gopt_node_input(g, pa, 0);
  size_t k1 = 0, k2 = 0;
  const int64_t *d1 = gopt_node_get_ints(g, pa, "dimensions", &k1);
  int64_t nd[GOPT_MAX_RANK];
  if (pass_is(g, n, "broadcast")) {
    const int64_t *d2 = gopt_node_get_ints(g, n, "dimensions", &k2);
    if ((int)k1 != rank_of(g, x) || (int)k2 != rank_of(g, a)) return -1;
    for (size_t i = 0; i < k1; i++) {
      if (d1[i] < 0 || (size_t)d1[i] >= k2) return -1;
      nd[i] = d2[d1[i]];
    }
  } else if (rank_of(g, x) != 0 || !(pass_is(g, n, "reshape") || pass_is(g, n, "transpose") || pass_is(g, n, "slice")))
    return -1;
  if (g->tensors.a[y].dtype != g->tensors.a[x].dtype) return -1;
  if (pass_same_type(g, x, y)) return x;
  int32_t b = pass_add_hlo(p, "broadcast", "broadcast", 1, &x, g->tensors.a[y].dtype, rank_of(g, y), dims_of(g, y));
  if (b < 0 || pass_set_ints(p, b, "dimensions", nd, (size_t)rank_of(g, x))) return -2;
  return b;
}

/* B3 op(broadcast(x1, D), ..., broadcast(xk, D)) -> broadcast(op(x1, ..., xk), D) for an
 * elementwise op whose operands are all broadcasts with the same dimensions from the same shape
 * (scalars broadcast to everything may stand in as broadcasts too only when all are scalars). */
static int32_t sink_bcast(pctx *p, int32_t n) {
  gopt_graph *g = p->g;
  const gopt_node *nd = &g->nodes.a[n];
  int32_t y = gopt_node_output(g, n, 0), xs[8];
  size_t k0 = 0;
  const int64_t *d0 = NULL;
  if (nd->n_in > 8 || nd->n_in < 1) return -1;
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i), pt = t >= 0 ? g->tensors.a[t].producer : -1;
    size_t k = 0;
    if (pt < 0 || !pass_is(g, pt, "broadcast") || g->nodes.a[pt].n_in != 1) return -1;
    size_t here = 0; /* the broadcast feeds only this op: sinking it never adds instructions */
    for (int j = 0; j < nd->n_in; j++) here += gopt_node_input(g, n, j) == t;
    if (gopt_tensor_use_count(g, t) != here || pass_is_output(p, t)) return -1;
    const int64_t *d = gopt_node_get_ints(g, pt, "dimensions", &k);
    xs[i] = gopt_node_input(g, pt, 0);
    if (i == 0) d0 = d, k0 = k;
    else if (k != k0 || (k && memcmp(d, d0, k * sizeof *d)) || rank_of(g, xs[i]) != rank_of(g, xs[0]) ||
             (k && memcmp(dims_of(g, xs[i]), dims_of(g, xs[0]), k * sizeof(int64_t))))
      return -1;
  }
  int64_t dims[GOPT_MAX_RANK];
  if (k0) memcpy(dims, d0, k0 * sizeof *dims);
  int32_t e = pass_add_hlo(p, pass_op(g, n), pass_op(g, n), nd->n_in, xs, g->tensors.a[y].dtype, rank_of(g, xs[0]),
                           dims_of(g, xs[0]));
  if (e < 0) return -2;
  if (pass_copy_string_attrs(p, n, g->tensors.a[e].producer)) return -2;
  int32_t b = pass_add_hlo(p, "broadcast", "broadcast", 1, &e, g->tensors.a[y].dtype, rank_of(g, y), dims_of(g, y));
  if (b < 0 || pass_set_ints(p, b, "dimensions", dims, k0)) return -2;
  return b;
}

int pass_broadcast_folding(pctx *p) {
  gopt_graph *g = p->g;
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].n_out != 1 || g->nodes.a[n].n_in < 1) continue;
    const char *op = pass_op(g, (int32_t)n);
    if (!op) continue;
    int32_t to = -1;
    if (!strcmp(op, "broadcast") || !strcmp(op, "reshape") || !strcmp(op, "transpose") || !strcmp(op, "slice"))
      to = fold_bcast_user(p, (int32_t)n);
    else if (pass_elementwise(op)) to = sink_bcast(p, (int32_t)n);
    if (to == -2) return p->err->code ? p->err->code : GOPT_ENOMEM;
    if (to >= 0) pass_replace(p, (int32_t)n, &to);
  }
  return 0;
}
