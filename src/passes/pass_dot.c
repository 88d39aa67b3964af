/* pass_dot.c: the dot passes after XLA's: the dot decomposer (every dot into the canonical form
 * [batch..., M, K] x [batch..., K, N] -> [batch..., M, N] with transposes and reshapes around
 * it), the dot merger (two independent dots sharing an operand become one dot on the
 * concatenated other operands, sliced apart), and the operand upcaster (dot/convolution operands
 * converted to the result's element type when it is wider). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes_internal.h"

typedef struct dotdims {
  size_t nb, nc;                     /* batch and contracting dimension counts */
  int64_t lb[GOPT_MAX_RANK], rb[GOPT_MAX_RANK], lc[GOPT_MAX_RANK], rc[GOPT_MAX_RANK];
} dotdims;

static int dot_dims(const gopt_graph *g, int32_t n, dotdims *d) {
  const char *key[4] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"};
  int64_t *dst[4] = {d->lb, d->rb, d->lc, d->rc};
  size_t c[4];
  for (int i = 0; i < 4; i++) {
    const int64_t *v = gopt_node_get_ints(g, n, key[i], &c[i]);
    if (c[i] > GOPT_MAX_RANK) return -1;
    if (c[i]) memcpy(dst[i], v, c[i] * sizeof *v);
  }
  d->nb = c[0];
  d->nc = c[2];
  return c[0] == c[1] && c[2] == c[3] && g->nodes.a[n].n_in == 2 && g->nodes.a[n].n_out == 1 ? 0 : -1;
}

static int set_dot_dims(pctx *p, int32_t t, const dotdims *d) {
  return pass_set_ints(p, t, "lhs_batch_dims", d->lb, d->nb) || pass_set_ints(p, t, "rhs_batch_dims", d->rb, d->nb) ||
         pass_set_ints(p, t, "lhs_contracting_dims", d->lc, d->nc) ||
         pass_set_ints(p, t, "rhs_contracting_dims", d->rc, d->nc);
}

/* ---- dot decomposer ---------------------------------------------------------------------------- */

/* Operand x (rank r) with batch dims b[0..nb), contracting c[0..nc) becomes [batch..., F, C]
 * (free_first) or [batch..., C, F]: a transpose (unless identity) and a reshape (unless the shape
 * is already that). *F receives the free size. Returns the tensor or -1. */
static int32_t canon_operand(pctx *p, int32_t x, const int64_t *b, size_t nb, const int64_t *c, size_t nc,
                             int free_first, int64_t *F) {
  gopt_graph *g = p->g;
  int r = g->tensors.a[x].rank, k = 0, dt = g->tensors.a[x].dtype;
  int64_t xd[GOPT_MAX_RANK]; /* a copy: adding tensors moves the graph's shape storage */
  if (r) memcpy(xd, gopt_tensor_dims(g, x), (size_t)r * sizeof *xd);
  int64_t perm[GOPT_MAX_RANK], pd[GOPT_MAX_RANK], fr[GOPT_MAX_RANK], nf = 0, Fs = 1, Cs = 1, ident = 1;
  unsigned char used[GOPT_MAX_RANK] = {0};
  for (size_t i = 0; i < nb; i++) perm[k++] = b[i], used[b[i]] = 1;
  for (size_t i = 0; i < nc; i++) used[c[i]] = 1;
  for (int i = 0; i < r; i++)
    if (!used[i]) fr[nf++] = i, Fs *= xd[i];
  for (size_t i = 0; i < nc; i++) Cs *= xd[c[i]];
  if (free_first) {
    for (int64_t i = 0; i < nf; i++) perm[k++] = fr[i];
    for (size_t i = 0; i < nc; i++) perm[k++] = c[i];
  } else {
    for (size_t i = 0; i < nc; i++) perm[k++] = c[i];
    for (int64_t i = 0; i < nf; i++) perm[k++] = fr[i];
  }
  for (int i = 0; i < r; i++) {
    pd[i] = xd[perm[i]];
    ident &= perm[i] == i;
  }
  *F = Fs;
  int32_t t = x;
  if (!ident) {
    t = pass_add_hlo(p, "transpose", "transpose", 1, &x, dt, r, pd);
    if (t < 0 || pass_set_ints(p, t, "dimensions", perm, (size_t)r)) return -1;
  }
  int64_t cd[GOPT_MAX_RANK];
  for (size_t i = 0; i < nb; i++) cd[i] = xd[b[i]];
  cd[nb] = free_first ? Fs : Cs;
  cd[nb + 1] = free_first ? Cs : Fs;
  if (r == (int)nb + 2 && !memcmp(pd, cd, (nb + 2) * sizeof *cd)) return t;
  return pass_add_hlo(p, "reshape", "reshape", 1, &t, dt, (int)nb + 2, cd);
}

/* 1 when dot n is canonical: batch dims 0..nb-1 on both sides, lhs [b, M, K], rhs [b, K, N]. */
static int canonical(const gopt_graph *g, int32_t n, const dotdims *d) {
  int ra = g->tensors.a[gopt_node_input(g, n, 0)].rank, rb = g->tensors.a[gopt_node_input(g, n, 1)].rank;
  int nb = (int)d->nb;
  if (ra != nb + 2 || rb != nb + 2 || d->nc != 1 || d->lc[0] != nb + 1 || d->rc[0] != nb) return 0;
  for (int i = 0; i < nb; i++)
    if (d->lb[i] != i || d->rb[i] != i) return 0;
  return 1;
}

int pass_dot_decomposer(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    dotdims d;
    if (!gopt_node_alive(g, (int32_t)n) || !pass_is(g, (int32_t)n, "dot") || dot_dims(g, (int32_t)n, &d) ||
        canonical(g, (int32_t)n, &d) || d.nb + 2 > GOPT_MAX_RANK)
      continue;
    int32_t a = gopt_node_input(g, (int32_t)n, 0), b = gopt_node_input(g, (int32_t)n, 1), y = gopt_node_output(g, (int32_t)n, 0);
    int64_t M, N, od[GOPT_MAX_RANK];
    int32_t ca = canon_operand(p, a, d.lb, d.nb, d.lc, d.nc, 1, &M);
    int32_t cb = ca < 0 ? -1 : canon_operand(p, b, d.rb, d.nb, d.rc, d.nc, 0, &N);
    if (cb < 0) return p->err->code ? p->err->code : GOPT_ENOMEM;
    for (size_t i = 0; i < d.nb; i++) od[i] = gopt_tensor_dims(g, a)[d.lb[i]];
    od[d.nb] = M;
    od[d.nb + 1] = N;
    int32_t ins[2] = {ca, cb};
    int32_t t = pass_add_hlo(p, "dot", "dot", 2, ins, g->tensors.a[y].dtype, (int)d.nb + 2, od);
    dotdims c = {d.nb, 1, {0}, {0}, {0}, {0}};
    for (size_t i = 0; i < d.nb; i++) c.lb[i] = c.rb[i] = (int64_t)i;
    c.lc[0] = (int64_t)d.nb + 1;
    c.rc[0] = (int64_t)d.nb;
    if (t < 0 || set_dot_dims(p, t, &c)) return p->err->code ? p->err->code : GOPT_ENOMEM;
    int32_t pc = g->tensors.a[t].producer;
    const char *pet = gopt_node_get_string(g, (int32_t)n, "precision_config", NULL);
    if (pet && gopt_node_set_string(g, pc, "precision_config", pet)) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    if (!pass_same_type(g, t, y))
      t = pass_add_hlo(p, "reshape", "reshape", 1, &t, g->tensors.a[y].dtype, g->tensors.a[y].rank, gopt_tensor_dims(g, y));
    if (t < 0) return p->err->code ? p->err->code : GOPT_ENOMEM;
    pass_replace(p, (int32_t)n, &t);
  }
  return 0;
}

/* ---- dot merger -------------------------------------------------------------------------------- */

/* 1 when node `to` is reachable from node `from` through operands (to is an ancestor of from). */
static int depends(const gopt_graph *g, int32_t from, int32_t to, unsigned char *seen, int32_t *stack) {
  size_t sp = 0;
  memset(seen, 0, g->nodes.n);
  stack[sp++] = from;
  while (sp) {
    int32_t v = stack[--sp];
    if (v == to) return 1;
    for (int i = 0; i < g->nodes.a[v].n_in; i++) {
      int32_t t = gopt_node_input(g, v, i), pr = t >= 0 ? g->tensors.a[t].producer : -1;
      if (pr >= 0 && !seen[pr]) seen[pr] = 1, stack[sp++] = pr;
    }
  }
  return 0;
}

static int same_dims(const dotdims *a, const dotdims *b) {
  return a->nb == b->nb && a->nc == b->nc && !memcmp(a->lb, b->lb, a->nb * 8) && !memcmp(a->rb, b->rb, a->nb * 8) &&
         !memcmp(a->lc, b->lc, a->nc * 8) && !memcmp(a->rc, b->rc, a->nc * 8);
}

/* The single free (non-batch, non-contracting) dimension of operand `side`, -1 when not one. */
static int single_free(const gopt_graph *g, int32_t n, int side, const dotdims *d) {
  int r = g->tensors.a[gopt_node_input(g, n, side)].rank, f = -1;
  for (int i = 0; i < r; i++) {
    int used = 0;
    for (size_t j = 0; j < d->nb; j++) used |= (side ? d->rb : d->lb)[j] == i;
    for (size_t j = 0; j < d->nc; j++) used |= (side ? d->rc : d->lc)[j] == i;
    if (used) continue;
    if (f >= 0) return -1;
    f = i;
  }
  return f;
}

/* Merges dots u and v that share operand 1-side and differ in operand `side`. */
static int merge(pctx *p, int32_t u, int32_t v, int side, const dotdims *d) {
  gopt_graph *g = p->g;
  int32_t xu = gopt_node_input(g, u, side), xv = gopt_node_input(g, v, side), sh = gopt_node_input(g, u, 1 - side);
  int32_t yu = gopt_node_output(g, u, 0), yv = gopt_node_output(g, v, 0);
  int f = single_free(g, u, side, d), r = g->tensors.a[xu].rank, ro = g->tensors.a[yu].rank;
  int64_t cd[GOPT_MAX_RANK], od[GOPT_MAX_RANK], fd = f;
  memcpy(cd, gopt_tensor_dims(g, xu), (size_t)r * sizeof *cd);
  cd[f] += gopt_tensor_dims(g, xv)[f];
  int32_t ins[2] = {xu, xv};
  int32_t c = pass_add_hlo(p, "concatenate", "concatenate", 2, ins, g->tensors.a[xu].dtype, r, cd);
  if (c < 0 || pass_set_ints(p, c, "dimensions", &fd, 1)) return -1;
  /* the free dimension's place in the result: after the batch dims, lhs free dims, then rhs's */
  int od_f = (int)d->nb + (side ? g->tensors.a[sh].rank - (int)d->nb - (int)d->nc : 0);
  if (ro) memcpy(od, gopt_tensor_dims(g, yu), (size_t)ro * sizeof *od);
  int64_t nu = od[od_f];
  od[od_f] += gopt_tensor_dims(g, yv)[od_f];
  ins[side] = c;
  ins[1 - side] = sh;
  int32_t m = pass_add_hlo(p, "dot", "dot", 2, ins, g->tensors.a[yu].dtype, ro, od);
  if (m < 0 || set_dot_dims(p, m, d)) return -1;
  int32_t outs[2];
  for (int k = 0; k < 2; k++) {
    int64_t st[GOPT_MAX_RANK] = {0}, li[GOPT_MAX_RANK], sd[GOPT_MAX_RANK];
    int32_t y = k ? yv : yu;
    memcpy(li, od, (size_t)ro * sizeof *li);
    for (int i = 0; i < ro; i++) sd[i] = 1;
    st[od_f] = k ? nu : 0;
    li[od_f] = k ? od[od_f] : nu;
    outs[k] = pass_add_hlo(p, "slice", "slice", 1, &m, g->tensors.a[y].dtype, ro, gopt_tensor_dims(g, y));
    if (outs[k] < 0 || pass_slice_set(p, g->tensors.a[outs[k]].producer, ro, st, li, sd)) return -1;
  }
  pass_replace(p, u, &outs[0]);
  pass_replace(p, v, &outs[1]);
  return 0;
}

/* Finds a dot v (after u in storage) sharing an operand with u that can merge with it. */
static int merge_partner(pctx *p, int32_t u, unsigned char *seen, int32_t *stack, int *side_out) {
  gopt_graph *g = p->g;
  dotdims du, dv;
  if (dot_dims(g, u, &du)) return -1;
  for (size_t v = (size_t)u + 1; v < g->nodes.n; v++) {
    if (!gopt_node_alive(g, (int32_t)v) || !pass_is(g, (int32_t)v, "dot") || dot_dims(g, (int32_t)v, &dv) ||
        !same_dims(&du, &dv))
      continue;
    for (int side = 0; side < 2; side++) {
      int32_t su = gopt_node_input(g, u, 1 - side), sv = gopt_node_input(g, (int32_t)v, 1 - side);
      int32_t xu = gopt_node_input(g, u, side), xv = gopt_node_input(g, (int32_t)v, side);
      int f = single_free(g, u, side, &du);
      if (su != sv || xu == xv || f < 0 || g->tensors.a[xu].dtype != g->tensors.a[xv].dtype ||
          g->tensors.a[gopt_node_output(g, u, 0)].dtype != g->tensors.a[gopt_node_output(g, (int32_t)v, 0)].dtype ||
          g->tensors.a[xu].rank != g->tensors.a[xv].rank)
        continue;
      int ok = 1;
      for (int i = 0; i < g->tensors.a[xu].rank && ok; i++)
        ok = i == f || gopt_tensor_dims(g, xu)[i] == gopt_tensor_dims(g, xv)[i];
      if (!ok || depends(g, u, (int32_t)v, seen, stack) || depends(g, (int32_t)v, u, seen, stack)) continue;
      *side_out = side;
      return (int)v;
    }
  }
  return -1;
}

int pass_dot_merger(pctx *p) {
  gopt_graph *g = p->g;
  size_t cap = 3 * g->nodes.n + 8; /* each merge adds 4 nodes and removes 2 dots */
  unsigned char *seen = malloc(cap);
  int32_t *stack = malloc(cap * sizeof *stack);
  int rc = 0;
  if (!seen || !stack) rc = gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  size_t nn = g->nodes.n; /* merged dots are not merged again in this run */
  for (size_t u = 0; u < nn && !rc; u++) {
    if (!gopt_node_alive(g, (int32_t)u) || !pass_is(g, (int32_t)u, "dot")) continue;
    int side = 0, v = merge_partner(p, (int32_t)u, seen, stack, &side);
    dotdims d;
    if (v < 0 || dot_dims(g, (int32_t)u, &d)) continue;
    if (merge(p, (int32_t)u, v, side, &d)) rc = p->err->code ? p->err->code : GOPT_ENOMEM;
  }
  free(seen);
  free(stack);
  return rc;
}

/* ---- operand upcaster -------------------------------------------------------------------------- */

static int fbits(int dt) {
  switch (dt) {
    case GOPT_DT_FLOAT16: case GOPT_DT_BFLOAT16: return 16;
    case GOPT_DT_FLOAT: return 32;
    case GOPT_DT_DOUBLE: return 64;
    default: return 0;
  }
}
static int ibits(int dt) {
  switch (dt) {
    case GOPT_DT_INT8: return 8;
    case GOPT_DT_INT16: return 16;
    case GOPT_DT_INT32: return 32;
    case GOPT_DT_INT64: return 64;
    default: return 0;
  }
}

int pass_operand_upcaster(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].n_out != 1 ||
        !(pass_is(g, (int32_t)n, "dot") || pass_is(g, (int32_t)n, "convolution")) || g->nodes.a[n].n_in != 2)
      continue;
    int yt = g->tensors.a[gopt_node_output(g, (int32_t)n, 0)].dtype;
    for (int i = 0; i < 2; i++) {
      int32_t x = gopt_node_input(g, (int32_t)n, i);
      int xt = g->tensors.a[x].dtype;
      int wider = (fbits(yt) && fbits(xt) && fbits(yt) > fbits(xt)) || (ibits(yt) && ibits(xt) && ibits(yt) > ibits(xt)) ||
                  (fbits(yt) && ibits(xt));
      if (!wider) continue;
      int32_t c = pass_add_hlo(p, "convert", "convert", 1, &x, yt, g->tensors.a[x].rank, gopt_tensor_dims(g, x));
      if (c < 0) return p->err->code ? p->err->code : GOPT_ENOMEM;
      gopt_node_set_input(g, (int32_t)n, i, c);
      p->st->rewrites++;
    }
  }
  return 0;
}
