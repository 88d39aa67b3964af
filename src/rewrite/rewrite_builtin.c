/* rewrite_builtin.c: TASO's hand-written substitutions as built-in rules: Conv followed by
 * BatchNormalization / Mul / Add folded into the conv's weights and bias, parallel convs sharing an
 * input merged into one (with kernel enlargement when their kernels differ) followed by a Split,
 * parallel MatMuls sharing their left input merged the same way, constant folding, and two
 * Split identities at any rank (a unary op on every Split output moves before the Split; a Concat
 * of a Split's outputs in order is its input), and TASO's merge of group convs (G groups -> G / 2). Weights are
 * computed when their data exists; otherwise the new weights are data-less (structure only) and the
 * application is flagged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "rewrite/rewrite_internal.h"
#include "util/util_internal.h"

static int is_const(const gopt_graph *g, int32_t t) {
  return t >= 0 && (g->tensors.a[t].flags & GOPT_T_CONST);
}

static int is_output(const gopt_graph *g, int32_t t) {
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == t) return 1;
  return 0;
}

/* The single live consumer of t (-1 when none, several, or t is a graph output). */
static int32_t sole_user(const gopt_graph *g, int32_t t) {
  int32_t who = -1;
  if (is_output(g, t)) return -1;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t n = g->slots.a[s].node;
    if (!gopt_node_alive(g, n)) continue;
    if (who >= 0) return -1;
    who = n;
  }
  return who;
}

/* A 2-D convolution with constant weights (and bias). */
static int conv_ok(const gopt_graph *g, int32_t n) {
  if (!gopt_node_alive(g, n) || g->nodes.a[n].op != GOPT_OP_CONV || g->nodes.a[n].n_out != 1) return 0;
  int32_t w = gopt_node_input(g, n, 1);
  if (!is_const(g, w) || g->tensors.a[w].rank != 4 || g->tensors.a[w].dtype != GOPT_DT_FLOAT) return 0;
  if (g->nodes.a[n].n_in > 2 && gopt_node_input(g, n, 2) >= 0 && !is_const(g, gopt_node_input(g, n, 2)))
    return 0;
  const char *ap = gopt_node_get_string(g, n, "auto_pad", "NOTSET");
  return !strcmp(ap, "NOTSET");
}

/* ---- Conv + BatchNorm / Mul / Add ------------------------------------------------------------ */

enum { AFF_BN, AFF_MUL, AFF_ADD };

/* The per-output-channel constant of a Mul/Add after a conv with cout channels, or -1. */
static int32_t channel_const(const gopt_graph *g, int32_t n, int32_t y, int64_t cout) {
  int32_t a = gopt_node_input(g, n, 0), b = gopt_node_input(g, n, 1);
  int32_t c = a == y ? b : b == y ? a : -1;
  if (c < 0 || c == y || !is_const(g, c) || g->tensors.a[c].dtype != GOPT_DT_FLOAT) return -1;
  int64_t numel = gopt_tensor_numel(g, c);
  int r = g->tensors.a[c].rank;
  const int64_t *d = gopt_tensor_dims(g, c);
  if (numel == 1) return c;
  if (numel != cout) return -1;
  /* [C,1,1] or [1,C,1,1] */
  if (r == 3 && d[0] == cout) return c;
  if (r == 4 && d[0] == 1 && d[1] == cout) return c;
  return -1;
}

static int find_affine(const gopt_graph *g, int32_t rule, int kind, gopt_rewrite_match **out,
                       size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t c = (int32_t)i;
    if (!conv_ok(g, c)) continue;
    int32_t y = gopt_node_output(g, c, 0);
    int32_t u = sole_user(g, y);
    if (u < 0) continue;
    int op = g->nodes.a[u].op;
    int64_t cout = gopt_tensor_dims(g, gopt_node_input(g, c, 1))[0];
    gopt_rewrite_match m = {rule, 2, 1, {u, c}, {gopt_node_input(g, c, 0)}};
    if (kind == AFF_BN) {
      if (op != GOPT_OP_BATCH_NORM || g->nodes.a[u].n_out != 1 || g->nodes.a[u].n_in != 5 ||
          gopt_node_input(g, u, 0) != y || gopt_node_get_int(g, u, "training_mode", 0))
        continue;
      int ok = 1;
      for (int k = 1; k < 5; k++) ok &= is_const(g, gopt_node_input(g, u, k));
      if (!ok) continue;
    } else if (op != (kind == AFF_MUL ? GOPT_OP_MUL : GOPT_OP_ADD) ||
               channel_const(g, u, y, cout) < 0) {
      continue;
    } else if (g->tensors.a[gopt_node_output(g, u, 0)].rank != 4) {
      continue;
    }
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int find_bn(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_affine(g, r, AFF_BN, o, n, c);
}
static int find_mul(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_affine(g, r, AFF_MUL, o, n, c);
}
static int find_add(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_affine(g, r, AFF_ADD, o, n, c);
}

static const float *cdata(const gopt_graph *g, int32_t t) {
  return t >= 0 ? (const float *)gopt_tensor_data(g, t) : NULL;
}

/* Per-channel scale and shift of the affine op u after a conv with cout channels; 0 when the
 * constants have no data (*have = 0). */
static int affine_coeffs(const gopt_graph *g, int32_t u, int32_t y, int64_t cout, float *scale,
                         float *shift, int *have) {
  int op = g->nodes.a[u].op;
  *have = 1;
  for (int64_t o = 0; o < cout; o++) scale[o] = 1, shift[o] = 0;
  if (op == GOPT_OP_BATCH_NORM) {
    const float *s = cdata(g, gopt_node_input(g, u, 1)), *b = cdata(g, gopt_node_input(g, u, 2));
    const float *mu = cdata(g, gopt_node_input(g, u, 3)), *v = cdata(g, gopt_node_input(g, u, 4));
    if (!s || !b || !mu || !v) return *have = 0;
    double eps = gopt_node_get_float(g, u, "epsilon", 1e-5);
    for (int64_t o = 0; o < cout; o++) {
      scale[o] = (float)(s[o] / sqrt((double)v[o] + eps));
      shift[o] = b[o] - mu[o] * scale[o];
    }
    return 0;
  }
  int32_t c = channel_const(g, u, y, cout);
  const float *d = cdata(g, c);
  if (!d) return *have = 0;
  int64_t numel = gopt_tensor_numel(g, c);
  for (int64_t o = 0; o < cout; o++) {
    float v = d[numel == 1 ? 0 : o];
    if (op == GOPT_OP_MUL) scale[o] = v;
    else shift[o] = v;
  }
  return 0;
}

/* Copies conv c's attributes to conv nc; group > 0 replaces its group. 0 or GOPT_ENOMEM. */
static int copy_conv_attrs(gopt_graph *h, int32_t c, int32_t nc, int64_t group) {
  const char *ia[] = {"group", "kernel_shape", "pads", "strides", "dilations"};
  int rc = 0;
  for (size_t k = 0; k < sizeof ia / sizeof ia[0] && !rc; k++) {
    const gopt_attr *a = gopt_node_attr(h, c, ia[k]);
    if (k == 0 && group > 0) rc = gopt_node_set_int(h, nc, "group", group);
    else if (!a) continue;
    else if (a->kind == GOPT_ATTR_INT) rc = gopt_node_set_int(h, nc, ia[k], a->v.i);
    else if (a->kind == GOPT_ATTR_INTS) {
      int64_t v[GOPT_MAX_RANK * 2];
      size_t cnt = a->n < GOPT_MAX_RANK * 2 ? a->n : GOPT_MAX_RANK * 2;
      memcpy(v, h->ints.a + a->v.off, cnt * sizeof *v);
      rc = gopt_node_set_ints(h, nc, ia[k], v, cnt);
    }
  }
  return rc ? GOPT_ENOMEM : 0;
}

static int apply_affine(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t u = m->nodes[0], c = m->nodes[1];
  int32_t w = gopt_node_input(h, c, 1), b = h->nodes.a[c].n_in > 2 ? gopt_node_input(h, c, 2) : -1;
  int32_t y = gopt_node_output(h, c, 0), z = gopt_node_output(h, u, 0);
  int64_t wd[4]; /* copied: adding tensors below may move the dims array */
  memcpy(wd, gopt_tensor_dims(h, w), sizeof wd);
  int64_t cout = wd[0], per = gopt_tensor_numel(h, w) / (cout ? cout : 1);
  float *scale = NULL, *shift = NULL, *nw = NULL, *nbias = NULL;
  int have, rc = GOPT_ENOMEM;
  if (GOPT_ALLOC(scale, cout) || GOPT_ALLOC(shift, cout)) goto done;
  affine_coeffs(h, u, y, cout, scale, shift, &have);
  const float *ow = cdata(h, w), *ob = cdata(h, b);
  if (have && ow && (b < 0 || ob)) {
    if (GOPT_ALLOC(nw, cout * per) || GOPT_ALLOC(nbias, cout)) goto done;
    for (int64_t o = 0; o < cout; o++) {
      for (int64_t i = 0; i < per; i++) nw[o * per + i] = ow[o * per + i] * scale[o];
      nbias[o] = (ob ? ob[o] : 0.0f) * scale[o] + shift[o];
    }
  } else {
    *flags |= GOPT_RW_NODATA;
  }
  *flags |= GOPT_RW_WEIGHTS;
  int64_t bd[1] = {cout};
  int32_t tw = rw_const(h, GOPT_DT_FLOAT, 4, wd, nw, err);
  int32_t tb = rw_const(h, GOPT_DT_FLOAT, 1, bd, nbias, err);
  if (tw < 0 || tb < 0) goto done;
  int32_t nt = rw_new_tensor(h, err);
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[3] = {gopt_node_input(h, c, 0), tw, tb};
  int32_t nc = gopt_graph_add_node(h, "Conv", name, 3, in, 1, &nt, err);
  if (nt < 0 || nc < 0) goto done;
  if ((rc = copy_conv_attrs(h, c, nc, 0))) goto done;
  if ((rc = rw_replace(h, z, nt, err))) goto done;
  gopt_graph_remove_node(h, u);
  gopt_graph_remove_node(h, c);
  rc = 0;
done:
  if (rc == GOPT_ENOMEM && (!err || !err->code)) gopt_error_set(err, rc, "out of memory");
  free(scale);
  free(shift);
  free(nw);
  free(nbias);
  return rc;
}

/* ---- parallel convs / matmuls ---------------------------------------------------------------- */

static int ints_eq(const gopt_graph *g, int32_t a, int32_t b, const char *name) {
  size_t na, nb;
  const int64_t *x = gopt_node_get_ints(g, a, name, &na), *y = gopt_node_get_ints(g, b, name, &nb);
  if (na != nb) return 0;
  return na == 0 || !memcmp(x, y, na * sizeof *x);
}

/* "Same" padding: pads = k/2 on each side, odd kernel, stride and dilation 1 . */
static int same_padded(const gopt_graph *g, int32_t n) {
  const int64_t *wd = gopt_tensor_dims(g, gopt_node_input(g, n, 1));
  size_t np, ns, nd;
  const int64_t *p = gopt_node_get_ints(g, n, "pads", &np);
  const int64_t *s = gopt_node_get_ints(g, n, "strides", &ns);
  const int64_t *d = gopt_node_get_ints(g, n, "dilations", &nd);
  for (int k = 0; k < 2; k++) {
    int64_t kk = wd[2 + k];
    if (kk % 2 == 0) return 0;
    int64_t pb = np == 4 ? p[k] : 0, pe = np == 4 ? p[k + 2] : 0;
    if (pb != kk / 2 || pe != kk / 2) return 0;
    if (ns == 2 && s[k] != 1) return 0;
    if (nd == 2 && d[k] != 1) return 0;
  }
  return 1;
}

/* enlarge = 0: identical kernels and attributes; 1: different kernels, both "same" padded. */
static int convs_mergeable(const gopt_graph *g, int32_t a, int32_t b, int enlarge) {
  if (!conv_ok(g, b) || gopt_node_get_int(g, a, "group", 1) != 1 || gopt_node_get_int(g, b, "group", 1) != 1)
    return 0;
  const int64_t *wa = gopt_tensor_dims(g, gopt_node_input(g, a, 1));
  const int64_t *wb = gopt_tensor_dims(g, gopt_node_input(g, b, 1));
  if (wa[1] != wb[1]) return 0;
  int same_k = wa[2] == wb[2] && wa[3] == wb[3];
  if (!enlarge)
    return same_k && ints_eq(g, a, b, "pads") && ints_eq(g, a, b, "strides") &&
           ints_eq(g, a, b, "dilations");
  return !same_k && same_padded(g, a) && same_padded(g, b);
}

static int find_parallel(const gopt_graph *g, int32_t rule, int op, int enlarge,
                         gopt_rewrite_match **out, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t a = (int32_t)i;
    if (op == GOPT_OP_CONV ? !conv_ok(g, a)
                           : (!gopt_node_alive(g, a) || g->nodes.a[a].op != GOPT_OP_MATMUL))
      continue;
    int32_t x = gopt_node_input(g, a, 0);
    for (int32_t s = g->tensors.a[x].first_use; s >= 0; s = g->slots.a[s].next_use) {
      int32_t b = g->slots.a[s].node;
      if (b <= a || !gopt_node_alive(g, b) || g->nodes.a[b].op != op || gopt_node_input(g, b, 0) != x)
        continue;
      if (op == GOPT_OP_CONV && !convs_mergeable(g, a, b, enlarge)) continue;
      if (op == GOPT_OP_MATMUL) {
        int32_t ba = gopt_node_input(g, a, 1), bb = gopt_node_input(g, b, 1);
        if (g->tensors.a[ba].rank != 2 || g->tensors.a[bb].rank != 2 || ba == bb ||
            gopt_tensor_dims(g, ba)[0] != gopt_tensor_dims(g, bb)[0] ||
            g->tensors.a[gopt_node_output(g, a, 0)].rank < 2)
          continue;
      }
      gopt_rewrite_match m = {rule, 2, 1, {a, b}, {x}};
      if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
      break;
    }
  }
  return 0;
}

static int find_pconv(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_parallel(g, r, GOPT_OP_CONV, 0, o, n, c);
}
static int find_econv(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_parallel(g, r, GOPT_OP_CONV, 1, o, n, c);
}
static int find_pmm(const gopt_graph *g, int32_t r, gopt_rewrite_match **o, size_t *n, size_t *c) {
  return find_parallel(g, r, GOPT_OP_MATMUL, 0, o, n, c);
}

/* Adds a Split of t along axis into outputs of sizes s0, s1 (an input in opset >= 13). */
static int add_split(gopt_graph *h, int32_t t, int64_t axis, int64_t s0, int64_t s1, int32_t *outs,
                     gopt_error *err) {
  int64_t sz[2] = {s0, s1}, two = 2;
  outs[0] = rw_new_tensor(h, err);
  outs[1] = rw_new_tensor(h, err);
  if (outs[0] < 0 || outs[1] < 0) return GOPT_ENOMEM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t n;
  if (gopt_graph_opset(h, "", 13) >= 13) {
    int32_t st = rw_const(h, GOPT_DT_INT64, 1, &two, sz, err);
    if (st < 0) return GOPT_ENOMEM;
    h->tensors.a[st].flags &= (uint16_t)~GOPT_T_PARAM;
    int32_t in[2] = {t, st};
    n = gopt_graph_add_node(h, "Split", name, 2, in, 2, outs, err);
  } else {
    n = gopt_graph_add_node(h, "Split", name, 1, &t, 2, outs, err);
    if (n >= 0 && gopt_node_set_ints(h, n, "split", sz, 2)) return GOPT_ENOMEM;
  }
  if (n < 0) return GOPT_EINVAL;
  return gopt_node_set_int(h, n, "axis", axis) ? GOPT_ENOMEM : 0;
}

static int apply_pconv(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t a = m->nodes[0], b = m->nodes[1];
  int32_t wa = gopt_node_input(h, a, 1), wb = gopt_node_input(h, b, 1);
  int32_t ba = h->nodes.a[a].n_in > 2 ? gopt_node_input(h, a, 2) : -1;
  int32_t bb = h->nodes.a[b].n_in > 2 ? gopt_node_input(h, b, 2) : -1;
  int64_t da[4], db[4]; /* copied: adding tensors below may move the dims array */
  memcpy(da, gopt_tensor_dims(h, wa), sizeof da);
  memcpy(db, gopt_tensor_dims(h, wb), sizeof db);
  int64_t ca = da[0], cb = db[0], cin = da[1];
  int64_t kh = da[2] > db[2] ? da[2] : db[2], kw = da[3] > db[3] ? da[3] : db[3];
  int64_t wd[4] = {ca + cb, cin, kh, kw}, bd[1] = {ca + cb};
  float *nw = NULL, *nbias = NULL;
  int rc = GOPT_ENOMEM;
  const float *pa = cdata(h, wa), *pb = cdata(h, wb), *qa = cdata(h, ba), *qb = cdata(h, bb);
  int have = pa && pb && (ba < 0 || qa) && (bb < 0 || qb);
  if (have) {
    if (GOPT_ALLOC(nw, wd[0] * cin * kh * kw) || GOPT_ALLOC(nbias, wd[0])) goto done;
    for (int side = 0; side < 2; side++) {
      const int64_t *d = side ? db : da;
      const float *src = side ? pb : pa, *bias = side ? qb : qa;
      int64_t off = side ? ca : 0, oh = (kh - d[2]) / 2, ow = (kw - d[3]) / 2;
      for (int64_t o = 0; o < d[0]; o++) {
        nbias[off + o] = bias ? bias[o] : 0.0f;
        for (int64_t i = 0; i < cin; i++)
          for (int64_t y = 0; y < d[2]; y++)
            for (int64_t x = 0; x < d[3]; x++)
              nw[(((off + o) * cin + i) * kh + y + oh) * kw + x + ow] = src[((o * cin + i) * d[2] + y) * d[3] + x];
      }
    }
  } else {
    *flags |= GOPT_RW_NODATA;
  }
  *flags |= GOPT_RW_WEIGHTS;
  int32_t tw = rw_const(h, GOPT_DT_FLOAT, 4, wd, nw, err), tb = rw_const(h, GOPT_DT_FLOAT, 1, bd, nbias, err);
  int32_t nt = rw_new_tensor(h, err);
  if (tw < 0 || tb < 0 || nt < 0) goto done;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[3] = {m->vars[0], tw, tb};
  int32_t nc = gopt_graph_add_node(h, "Conv", name, 3, in, 1, &nt, err);
  if (nc < 0) goto done;
  int32_t big = da[2] * da[3] >= db[2] * db[3] ? a : b;
  const char *ia[] = {"pads", "strides", "dilations"};
  for (size_t k = 0; k < 3; k++) {
    size_t cnt;
    const int64_t *v = gopt_node_get_ints(h, big, ia[k], &cnt);
    int64_t copy[8];
    if (!v || cnt > 8) continue;
    memcpy(copy, v, cnt * sizeof *v);
    if (gopt_node_set_ints(h, nc, ia[k], copy, cnt)) goto done;
  }
  int64_t ks[2] = {kh, kw}, same[4] = {kh / 2, kw / 2, kh / 2, kw / 2};
  if (gopt_node_set_ints(h, nc, "kernel_shape", ks, 2)) goto done;
  /* enlarged (both convs "same" padded): the merged kernel's own padding; the larger kernel's
   * pads were wrong for 1x3 with 3x1 (3x3 padded 0,1: 8x8 became 6x8) */
  if ((da[2] != db[2] || da[3] != db[3]) && gopt_node_set_ints(h, nc, "pads", same, 4)) goto done;
  int32_t outs[2];
  if ((rc = add_split(h, nt, 1, ca, cb, outs, err))) goto done;
  if ((rc = rw_replace(h, gopt_node_output(h, a, 0), outs[0], err)) ||
      (rc = rw_replace(h, gopt_node_output(h, b, 0), outs[1], err)))
    goto done;
  gopt_graph_remove_node(h, a);
  gopt_graph_remove_node(h, b);
  rc = 0;
done:
  free(nw);
  free(nbias);
  return rc;
}

static int apply_pmm(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  (void)flags;
  int32_t a = m->nodes[0], b = m->nodes[1];
  int32_t ba = gopt_node_input(h, a, 1), bb = gopt_node_input(h, b, 1);
  int64_t na = gopt_tensor_dims(h, ba)[1], nb = gopt_tensor_dims(h, bb)[1];
  int r = h->tensors.a[gopt_node_output(h, a, 0)].rank;
  int32_t cat = rw_new_tensor(h, err), mm = rw_new_tensor(h, err);
  if (cat < 0 || mm < 0) return GOPT_ENOMEM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[2] = {ba, bb};
  int32_t nc = gopt_graph_add_node(h, "Concat", name, 2, in, 1, &cat, err);
  if (nc < 0 || gopt_node_set_int(h, nc, "axis", 1)) return GOPT_EINVAL;
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in2[2] = {m->vars[0], cat};
  if (gopt_graph_add_node(h, "MatMul", name, 2, in2, 1, &mm, err) < 0) return GOPT_EINVAL;
  int32_t outs[2];
  int rc = add_split(h, mm, r - 1, na, nb, outs, err);
  if (rc) return rc;
  if ((rc = rw_replace(h, gopt_node_output(h, a, 0), outs[0], err)) ||
      (rc = rw_replace(h, gopt_node_output(h, b, 0), outs[1], err)))
    return rc;
  gopt_graph_remove_node(h, a);
  gopt_graph_remove_node(h, b);
  return 0;
}

/* ---- Split / Concat identities at any rank ------------------------------------------------------ */

/* Unary elementwise ops without attributes that commute with a Split. */
static int plain_unary(int op) {
  return op == GOPT_OP_RELU || op == GOPT_OP_SIGMOID || op == GOPT_OP_TANH;
}

/* Split whose every output feeds exactly one op of one plain unary type: the op moves before the
 * Split (one kernel instead of n_out). nodes = {split, users...}. */
static int find_hoist(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n,
                      size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t s = (int32_t)i;
    const gopt_node *nd = &g->nodes.a[s];
    if (!gopt_node_alive(g, s) || nd->op != GOPT_OP_SPLIT || nd->n_out < 2 ||
        nd->n_out >= GOPT_REWRITE_MAX_OPS)
      continue;
    gopt_rewrite_match m = {rule, 1 + nd->n_out, 1, {s}, {gopt_node_input(g, s, 0)}};
    int op = -1, ok = 1;
    for (int k = 0; k < nd->n_out && ok; k++) {
      int32_t u = sole_user(g, gopt_node_output(g, s, k));
      ok = u >= 0 && plain_unary(g->nodes.a[u].op) && g->nodes.a[u].n_in == 1 &&
           (op < 0 || g->nodes.a[u].op == op);
      if (ok) op = g->nodes.a[u].op, m.nodes[1 + k] = u;
    }
    if (ok && rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int apply_hoist(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  (void)flags;
  int32_t s = m->nodes[0], t = rw_new_tensor(h, err);
  if (t < 0) return GOPT_ENOMEM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t x = m->vars[0];
  if (gopt_graph_add_node(h, gopt_node_type(h, m->nodes[1]), name, 1, &x, 1, &t, err) < 0)
    return GOPT_EINVAL;
  if (gopt_node_set_input(h, s, 0, t)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int k = 1; k < m->n_nodes; k++) {
    int rc = rw_replace(h, gopt_node_output(h, m->nodes[k], 0), gopt_node_output(h, s, k - 1), err);
    if (rc) return rc;
    gopt_graph_remove_node(h, m->nodes[k]);
  }
  return 0;
}

/* Axis attribute of n normalised by rank r. */
static int64_t norm_axis(const gopt_graph *g, int32_t n, int r) {
  int64_t a = gopt_node_get_int(g, n, "axis", 0);
  return a < 0 ? a + r : a;
}

/* Concat whose inputs are all outputs of one Split on the same axis, in order: it is the Split's
 * input. nodes = {concat, split}. */
static int find_concat_split(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out,
                             size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t c = (int32_t)i;
    const gopt_node *nd = &g->nodes.a[c];
    if (!gopt_node_alive(g, c) || nd->op != GOPT_OP_CONCAT || nd->n_in < 2) continue;
    int32_t s = g->tensors.a[gopt_node_input(g, c, 0)].producer;
    if (s < 0 || !gopt_node_alive(g, s) || g->nodes.a[s].op != GOPT_OP_SPLIT || g->nodes.a[s].n_out != nd->n_in) continue;
    int32_t x = gopt_node_input(g, s, 0);
    int r = g->tensors.a[x].rank, ok = norm_axis(g, c, r) == norm_axis(g, s, r);
    for (int k = 0; k < nd->n_in && ok; k++) ok = gopt_node_input(g, c, k) == gopt_node_output(g, s, k);
    /* a graph input or constant cannot take over an output's name */
    if (!ok || is_const(g, x) || is_output(g, x) || g->tensors.a[x].producer < 0) continue;
    gopt_rewrite_match m = {rule, 2, 1, {c, s}, {x}};
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int apply_concat_split(gopt_graph *h, const gopt_rewrite_match *m, int *flags,
                              gopt_error *err) {
  (void)flags;
  int rc = rw_replace(h, gopt_node_output(h, m->nodes[0], 0), m->vars[0], err);
  if (!rc) gopt_graph_remove_node(h, m->nodes[0]);
  return rc;
}

/* ---- group convs ------------------------------------------------------------------------------ */

/* TASO's merge of group convs: a conv with an even group count G becomes one with G / 2 groups
 * whose weight is block-diagonal (each pair of old groups shares a new group; the other half of
 * its input channels gets zero weights). nodes = {conv}. */
static int find_gconv(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n,
                      size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t c = (int32_t)i;
    if (!conv_ok(g, c)) continue;
    int64_t grp = gopt_node_get_int(g, c, "group", 1);
    int64_t cout = gopt_tensor_dims(g, gopt_node_input(g, c, 1))[0];
    if (grp < 2 || grp % 2 || cout % grp) continue;
    gopt_rewrite_match m = {rule, 1, 1, {c}, {gopt_node_input(g, c, 0)}};
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int apply_gconv(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t c = m->nodes[0], w = gopt_node_input(h, c, 1);
  int32_t b = h->nodes.a[c].n_in > 2 ? gopt_node_input(h, c, 2) : -1;
  int64_t grp = gopt_node_get_int(h, c, "group", 1), wd[4];
  memcpy(wd, gopt_tensor_dims(h, w), sizeof wd); /* copied: adding tensors may move dims */
  int64_t cout = wd[0], cg = wd[1], ks = wd[2] * wd[3], ocg = cout / grp;
  int64_t nd[4] = {cout, 2 * cg, wd[2], wd[3]};
  const float *ow = cdata(h, w);
  float *nw = NULL;
  int rc = GOPT_ENOMEM;
  if (ow) {
    if (GOPT_ALLOC(nw, cout * 2 * cg * ks)) goto done;
    memset(nw, 0, sizeof *nw * (size_t)(cout * 2 * cg * ks));
    for (int64_t o = 0; o < cout; o++) {
      int64_t off = (o / ocg) % 2 * cg; /* the old group's half of the new group's channels */
      memcpy(nw + (o * 2 * cg + off) * ks, ow + o * cg * ks, sizeof *nw * (size_t)(cg * ks));
    }
  } else {
    *flags |= GOPT_RW_NODATA;
  }
  *flags |= GOPT_RW_WEIGHTS;
  int32_t tw = rw_const(h, GOPT_DT_FLOAT, 4, nd, nw, err), nt = rw_new_tensor(h, err);
  if (tw < 0 || nt < 0) goto done;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[3] = {m->vars[0], tw, b};
  int32_t nc = gopt_graph_add_node(h, "Conv", name, b >= 0 ? 3 : 2, in, 1, &nt, err);
  if (nc < 0) {
    rc = GOPT_EINVAL;
    goto done;
  }
  if ((rc = copy_conv_attrs(h, c, nc, grp / 2))) goto done;
  if ((rc = rw_replace(h, gopt_node_output(h, c, 0), nt, err))) goto done;
  gopt_graph_remove_node(h, c);
  rc = 0;
done:
  if (rc == GOPT_ENOMEM && (!err || !err->code)) gopt_error_set(err, rc, "out of memory");
  free(nw);
  return rc;
}

/* ---- constant folding ------------------------------------------------------------------------ */

static int find_fold(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    if (!rw_foldable(g, (int32_t)i)) continue;
    gopt_rewrite_match m = {rule, 1, 0, {(int32_t)i}, {0}};
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int apply_fold(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  size_t nodata = 0;
  int rc = rw_fold_node(h, m->nodes[0], &nodata, err);
  *flags |= GOPT_RW_WEIGHTS | (nodata ? GOPT_RW_NODATA : 0);
  return rc;
}

/* ---- unary ops through Concat and MaxPool; parallel MatMuls as one batched MatMul -------------- */

/* Concat whose every input is the sole use of one plain unary op of one type (Relu, Sigmoid,
 * Tanh): the op moves after the Concat (one kernel instead of n; the other direction of
 * hoist_unary_over_split). nodes = {concat, unary ops...}. */
static int find_sink_concat(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out,
                            size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t c = (int32_t)i;
    const gopt_node *nd = &g->nodes.a[c];
    if (!gopt_node_alive(g, c) || nd->op != GOPT_OP_CONCAT || nd->n_in < 2 || nd->n_in >= GOPT_REWRITE_MAX_OPS)
      continue;
    gopt_rewrite_match m = {rule, 1 + nd->n_in, 1, {c}, {0}};
    int op = -1, ok = 1;
    for (int k = 0; k < nd->n_in && ok; k++) {
      int32_t t = gopt_node_input(g, c, k), u = t >= 0 ? g->tensors.a[t].producer : -1;
      ok = u >= 0 && gopt_node_alive(g, u) && sole_user(g, t) == c && plain_unary(g->nodes.a[u].op) &&
           g->nodes.a[u].n_in == 1 && (op < 0 || g->nodes.a[u].op == op);
      if (ok) op = g->nodes.a[u].op, m.nodes[1 + k] = u;
    }
    if (ok) m.vars[0] = gopt_node_input(g, m.nodes[1], 0);
    if (ok && rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

/* Reuses the nodes: the Concat reads the unary ops' inputs, the first unary op reads the Concat's
 * output and takes over its uses, the other unary ops go. */
static int apply_sink_concat(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  (void)flags;
  int32_t c = m->nodes[0], u = m->nodes[1], y = gopt_node_output(h, c, 0);
  int rc = rw_replace(h, y, gopt_node_output(h, u, 0), err);
  for (int k = 1; !rc && k < m->n_nodes; k++)
    if (gopt_node_set_input(h, c, k - 1, gopt_node_input(h, m->nodes[k], 0)))
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (!rc && gopt_node_set_input(h, u, 0, y)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int k = 2; !rc && k < m->n_nodes; k++) gopt_graph_remove_node(h, m->nodes[k]);
  return rc;
}

/* MaxPool (one output) of the sole use of a Relu, Sigmoid or Tanh: a non-decreasing function
 * commutes with a max over a window (pads are ignored by the max), so the pool runs first and the
 * unary op on the pooled, smaller tensor. nodes = {maxpool, unary}. */
static int find_swap_maxpool(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out,
                             size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t p = (int32_t)i;
    if (!gopt_node_alive(g, p) || g->nodes.a[p].op != GOPT_OP_MAX_POOL || g->nodes.a[p].n_out != 1) continue;
    int32_t t = gopt_node_input(g, p, 0), u = g->tensors.a[t].producer;
    if (u < 0 || !gopt_node_alive(g, u) || !plain_unary(g->nodes.a[u].op) || g->nodes.a[u].n_in != 1 ||
        sole_user(g, t) != p)
      continue;
    gopt_rewrite_match m = {rule, 2, 1, {p, u}, {gopt_node_input(g, u, 0)}};
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

static int apply_swap_maxpool(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  (void)flags;
  int32_t p = m->nodes[0], u = m->nodes[1], y = gopt_node_output(h, p, 0);
  int rc = rw_replace(h, y, gopt_node_output(h, u, 0), err);
  if (!rc && (gopt_node_set_input(h, p, 0, m->vars[0]) || gopt_node_set_input(h, u, 0, y)))
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  return rc;
}

/* A new float constant of dims whose data is a's elements followed by b's (both float constants;
 * their element counts add up to dims'); data-less and flagged when either has none. -1 on
 * failure. */
static int32_t stack_consts(gopt_graph *h, int32_t a, int32_t b, int rank, const int64_t *dims, int *flags,
                            gopt_error *err) {
  int64_t na = gopt_tensor_numel(h, a), nb = gopt_tensor_numel(h, b);
  const float *pa = cdata(h, a), *pb = cdata(h, b);
  float *w = NULL;
  if (pa && pb) {
    if (GOPT_ALLOC(w, na + nb)) {
      gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      return -1;
    }
    memcpy(w, pa, sizeof *w * (size_t)na);
    memcpy(w + na, pb, sizeof *w * (size_t)nb);
  } else {
    *flags |= GOPT_RW_NODATA;
  }
  *flags |= GOPT_RW_WEIGHTS;
  int32_t t = rw_const(h, GOPT_DT_FLOAT, rank, dims, w, err);
  free(w);
  return t;
}

/* Two MatMuls reading one 2-D input x [M, K] with constant float right operands of rank 2 or 3 and
 * equal trailing dims [K, N] (b1 and b2 matrices; rank 2 is one): one MatMul with the operands
 * stacked into [b1 + b2, K, N] (x broadcast; one kernel), a Split on axis 0 (contiguous: views)
 * and, for a rank-2 operand, a Reshape [1, M, N] -> [M, N] (no kernel). Unlike
 * merge_parallel_matmul, whose Split on the last axis is a copy unless M = 1. nodes = {a, b}. */
static int bmm_operand_ok(const gopt_graph *g, int32_t n, int32_t x) {
  if (!gopt_node_alive(g, n) || g->nodes.a[n].op != GOPT_OP_MATMUL || gopt_node_input(g, n, 0) != x) return 0;
  int32_t w = gopt_node_input(g, n, 1);
  int r = g->tensors.a[w].rank;
  return is_const(g, w) && g->tensors.a[w].dtype == GOPT_DT_FLOAT && (r == 2 || r == 3);
}

static int find_bmm(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t a = (int32_t)i, x = gopt_node_alive(g, a) ? gopt_node_input(g, a, 0) : -1;
    if (x < 0 || g->tensors.a[x].rank != 2 || g->tensors.a[x].dtype != GOPT_DT_FLOAT || !bmm_operand_ok(g, a, x))
      continue;
    int32_t wa = gopt_node_input(g, a, 1);
    const int64_t *da = gopt_tensor_dims(g, wa) + g->tensors.a[wa].rank - 2;
    for (int32_t s = g->tensors.a[x].first_use; s >= 0; s = g->slots.a[s].next_use) {
      int32_t b = g->slots.a[s].node;
      if (b <= a || !bmm_operand_ok(g, b, x)) continue;
      int32_t wb = gopt_node_input(g, b, 1);
      const int64_t *db = gopt_tensor_dims(g, wb) + g->tensors.a[wb].rank - 2;
      if (wa == wb || da[0] != db[0] || da[1] != db[1]) continue;
      gopt_rewrite_match m = {rule, 2, 1, {a, b}, {x}};
      if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
      break;
    }
  }
  return 0;
}

/* t viewed as dims (a Reshape with a non-parameter int64 shape constant); -1 on failure. */
static int32_t add_reshape(gopt_graph *h, int32_t t, int rank, const int64_t *dims, gopt_error *err) {
  int64_t r = rank;
  int32_t sh = rw_const(h, GOPT_DT_INT64, 1, &r, dims, err), y = rw_new_tensor(h, err);
  if (sh < 0 || y < 0) return -1;
  h->tensors.a[sh].flags &= (uint16_t)~GOPT_T_PARAM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[2] = {t, sh};
  return gopt_graph_add_node(h, "Reshape", name, 2, in, 1, &y, err) < 0 ? -1 : y;
}

static int apply_bmm(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t a = m->nodes[0], b = m->nodes[1], x = m->vars[0];
  int32_t wa = gopt_node_input(h, a, 1), wb = gopt_node_input(h, b, 1);
  int ra = h->tensors.a[wa].rank, rb = h->tensors.a[wb].rank;
  int64_t ba = ra == 3 ? gopt_tensor_dims(h, wa)[0] : 1, bb = rb == 3 ? gopt_tensor_dims(h, wb)[0] : 1;
  int64_t K = gopt_tensor_dims(h, wa)[ra - 2], N = gopt_tensor_dims(h, wa)[ra - 1];
  int64_t M = gopt_tensor_dims(h, x)[0], wd[3] = {ba + bb, K, N};
  int32_t tw = stack_consts(h, wa, wb, 3, wd, flags, err), mm = rw_new_tensor(h, err);
  if (tw < 0 || mm < 0) return err && err->code ? err->code : GOPT_ENOMEM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[2] = {x, tw}, outs[2];
  if (gopt_graph_add_node(h, "MatMul", name, 2, in, 1, &mm, err) < 0) return GOPT_EINVAL;
  int rc = add_split(h, mm, 0, ba, bb, outs, err);
  int64_t flat[2] = {M, N};
  for (int side = 0; side < 2 && !rc; side++) {
    int32_t y = outs[side];
    if ((side ? rb : ra) == 2 && (y = add_reshape(h, y, 2, flat, err)) < 0) rc = GOPT_ENOMEM;
    if (!rc) rc = rw_replace(h, gopt_node_output(h, side ? b : a, 0), y, err);
  }
  if (rc) return rc;
  gopt_graph_remove_node(h, a);
  gopt_graph_remove_node(h, b);
  return 0;
}

/* Add(MatMul(p, W1), MatMul(q, W2)) with 2-D p [M, K1], q [M, K2] (p != q) and constant float
 * W1 [K1, N], W2 [K2, N], each MatMul used only by the Add: one MatMul of Concat(p, q) on axis 1
 * with the stacked constant [W1; W2] (TASO's concat-of-matmuls identity, which needs four
 * variables: the generator's domains have three). An existing Concat(p, q) on axis 1 is reused,
 * so the cells of an RNN that all combine the same x and h share it and their MatMuls can then be
 * merged. */
static int mma_side(const gopt_graph *g, int32_t t, int32_t add) {
  int32_t m = t >= 0 ? g->tensors.a[t].producer : -1;
  if (m < 0 || !gopt_node_alive(g, m) || g->nodes.a[m].op != GOPT_OP_MATMUL || sole_user(g, t) != add) return -1;
  int32_t p = gopt_node_input(g, m, 0), w = gopt_node_input(g, m, 1);
  if (g->tensors.a[p].rank != 2 || g->tensors.a[w].rank != 2 || !is_const(g, w) ||
      g->tensors.a[w].dtype != GOPT_DT_FLOAT || g->tensors.a[p].dtype != GOPT_DT_FLOAT)
    return -1;
  return m;
}

/* A plain Gemm (no transposes, alpha = beta = 1) computes A B + C like an Add of a MatMul. */
static int plain_gemm(const gopt_graph *g, int32_t n) {
  return g->nodes.a[n].op == GOPT_OP_GEMM && g->nodes.a[n].n_in == 3 && !gopt_node_get_int(g, n, "transA", 0) &&
         !gopt_node_get_int(g, n, "transB", 0) && gopt_node_get_float(g, n, "alpha", 1.0) == 1.0 &&
         gopt_node_get_float(g, n, "beta", 1.0) == 1.0;
}

/* The (add, a, b) of an Add node s of MatMuls over 2-D p != q with equal rows and equal N (a
 * plain Gemm s(p, W1, MatMul(q, W2)) gives a = s); 0 when s is not one. */
static int mma_cell(const gopt_graph *g, int32_t s, int32_t *a, int32_t *b) {
  if (!gopt_node_alive(g, s)) return 0;
  int gemm = plain_gemm(g, s);
  if (!gemm && (g->nodes.a[s].op != GOPT_OP_ADD || g->nodes.a[s].n_in != 2)) return 0;
  *a = -1;
  *b = mma_side(g, gopt_node_input(g, s, gemm ? 2 : 1), s);
  if (!gemm) *a = mma_side(g, gopt_node_input(g, s, 0), s);
  else if (gopt_node_input(g, s, 0) >= 0 && g->tensors.a[gopt_node_input(g, s, 0)].rank == 2 &&
           is_const(g, gopt_node_input(g, s, 1)) && g->tensors.a[gopt_node_input(g, s, 1)].dtype == GOPT_DT_FLOAT)
    *a = s;
  if (*a < 0 || *b < 0 || *a == *b) return 0;
  int32_t p = gopt_node_input(g, *a, 0), q = gopt_node_input(g, *b, 0);
  const int64_t *wa = gopt_tensor_dims(g, gopt_node_input(g, *a, 1)), *wb = gopt_tensor_dims(g, gopt_node_input(g, *b, 1));
  return p != q && gopt_tensor_dims(g, p)[0] == gopt_tensor_dims(g, q)[0] && wa[1] == wb[1];
}

/* Also matches Gemm(p, W1, MatMul(q, W2)), the form geng_0007 (Add of a MatMul -> Gemm) leaves.
 * A match holds one such node and, when there is one, a second over the same (p, q) (nodes =
 * {s, a, b} per node, a = s for a Gemm): both are rewritten at once, so the first application in
 * an RNN step already pays for the shared Concat (one cell alone saves no more than merging two
 * MatMuls, and the greedy search then merges those first, which blocks this rule). */
static int find_mma(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t s = (int32_t)i, a, b, a2, b2;
    if (!mma_cell(g, s, &a, &b)) continue;
    int32_t p = gopt_node_input(g, a, 0), q = gopt_node_input(g, b, 0);
    gopt_rewrite_match m = {rule, 3, 2, {s, a, b}, {p, q}};
    for (size_t j = i + 1; j < g->nodes.n; j++)
      if (mma_cell(g, (int32_t)j, &a2, &b2) && gopt_node_input(g, a2, 0) == p && gopt_node_input(g, b2, 0) == q) {
        m.nodes[3] = (int32_t)j, m.nodes[4] = a2, m.nodes[5] = b2, m.n_nodes = 6;
        break;
      }
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

/* The output of a live Concat(p, q) on axis 1 (or -1) of 2-D tensors, or -1. */
static int32_t find_concat2(const gopt_graph *g, int32_t p, int32_t q) {
  for (int32_t s = g->tensors.a[p].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t c = g->slots.a[s].node;
    if (gopt_node_alive(g, c) && g->nodes.a[c].op == GOPT_OP_CONCAT && g->nodes.a[c].n_in == 2 &&
        gopt_node_input(g, c, 0) == p && gopt_node_input(g, c, 1) == q && norm_axis(g, c, 2) == 1)
      return gopt_node_output(g, c, 0);
  }
  return -1;
}

/* Rewrites one cell (s, a, b) of a merge_matmul_add match onto cat = Concat(p, q). */
static int mma_apply_cell(gopt_graph *h, int32_t s, int32_t a, int32_t b, int32_t cat, int *flags, gopt_error *err) {
  int32_t w1 = gopt_node_input(h, a, 1), w2 = gopt_node_input(h, b, 1);
  int64_t wd[2] = {gopt_tensor_dims(h, w1)[0] + gopt_tensor_dims(h, w2)[0], gopt_tensor_dims(h, w1)[1]};
  int32_t tw = stack_consts(h, w1, w2, 2, wd, flags, err), mm = rw_new_tensor(h, err);
  if (tw < 0 || mm < 0) return err && err->code ? err->code : GOPT_ENOMEM;
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in2[2] = {cat, tw};
  if (gopt_graph_add_node(h, "MatMul", name, 2, in2, 1, &mm, err) < 0) return GOPT_EINVAL;
  int rc = rw_replace(h, gopt_node_output(h, s, 0), mm, err);
  if (rc) return rc;
  gopt_graph_remove_node(h, s);
  if (a != s) gopt_graph_remove_node(h, a);
  gopt_graph_remove_node(h, b);
  return 0;
}

static int apply_mma(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t p = m->vars[0], q = m->vars[1], cat = find_concat2(h, p, q);
  if (cat < 0) {
    int32_t in[2] = {p, q};
    char name[48];
    snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
    int32_t c = (cat = rw_new_tensor(h, err)) < 0 ? -1 : gopt_graph_add_node(h, "Concat", name, 2, in, 1, &cat, err);
    if (c < 0 || gopt_node_set_int(h, c, "axis", 1)) return err && err->code ? err->code : GOPT_EINVAL;
  }
  int rc = 0;
  for (int k = 0; k + 2 < m->n_nodes && !rc; k += 3)
    rc = mma_apply_cell(h, m->nodes[k], m->nodes[k + 1], m->nodes[k + 2], cat, flags, err);
  return rc;
}

/* ---- separable convs summed: NasNet-A's sep(x) + sep'(x) ---------------------------------------- */

/* A 1x1 conv, stride 1, no pads, group 1 (the pointwise half of a separable conv). */
static int pointwise(const gopt_graph *g, int32_t n) {
  if (!conv_ok(g, n) || gopt_node_get_int(g, n, "group", 1) != 1) return 0;
  const int64_t *w = gopt_tensor_dims(g, gopt_node_input(g, n, 1));
  size_t np, ns, nd;
  const int64_t *p = gopt_node_get_ints(g, n, "pads", &np), *st = gopt_node_get_ints(g, n, "strides", &ns);
  const int64_t *d = gopt_node_get_ints(g, n, "dilations", &nd);
  for (size_t i = 0; i < np; i++) if (p[i]) return 0;
  for (size_t i = 0; i < ns; i++) if (st[i] != 1) return 0;
  for (size_t i = 0; i < nd; i++) if (d[i] != 1) return 0;
  return w[2] == 1 && w[3] == 1;
}

/* The conv producing input 0 of pointwise conv p, used only by p; -1 if none. */
static int32_t sep_first(const gopt_graph *g, int32_t p) {
  int32_t t = gopt_node_input(g, p, 0), c = g->tensors.a[t].producer;
  return c >= 0 && conv_ok(g, c) && sole_user(g, t) == p ? c : -1;
}

/* Add(P_a(G_a(x)), P_b(G_b(x))): two separable convs (a conv G with g groups, then a pointwise conv
 * P), both G reading x with equal groups, kernels, pads, strides and dilations, each output used
 * only by the next op. One conv with g groups computes both G (group j outputs G_a's channels of
 * group j, then G_b's: interleaved), and one pointwise conv over those channels, its weight
 * columns permuted to match, computes the sum: 2 kernels instead of 5. nodes = {add, pa, pb, ga,
 * gb}. */
static int find_sepsum(const gopt_graph *g, int32_t rule, gopt_rewrite_match **out, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->nodes.n; i++) {
    int32_t s = (int32_t)i;
    if (!gopt_node_alive(g, s) || g->nodes.a[s].op != GOPT_OP_ADD || g->nodes.a[s].n_in != 2) continue;
    int32_t ya = gopt_node_input(g, s, 0), yb = gopt_node_input(g, s, 1);
    int32_t pa = g->tensors.a[ya].producer, pb = g->tensors.a[yb].producer;
    if (ya == yb || pa < 0 || pb < 0 || !pointwise(g, pa) || !pointwise(g, pb) || sole_user(g, ya) != s ||
        sole_user(g, yb) != s || g->tensors.a[ya].rank != 4 || g->tensors.a[yb].rank != 4 ||
        memcmp(gopt_tensor_dims(g, ya), gopt_tensor_dims(g, yb), 4 * sizeof(int64_t)))
      continue;
    int32_t ga = sep_first(g, pa), gb = sep_first(g, pb);
    if (ga < 0 || gb < 0 || ga == gb || gopt_node_input(g, ga, 0) != gopt_node_input(g, gb, 0)) continue;
    int64_t grp = gopt_node_get_int(g, ga, "group", 1);
    const int64_t *wa = gopt_tensor_dims(g, gopt_node_input(g, ga, 1)), *wb = gopt_tensor_dims(g, gopt_node_input(g, gb, 1));
    if (grp != gopt_node_get_int(g, gb, "group", 1) || grp < 1 || wa[0] % grp || wb[0] % grp || wa[1] != wb[1] ||
        wa[2] != wb[2] || wa[3] != wb[3] || !ints_eq(g, ga, gb, "pads") || !ints_eq(g, ga, gb, "strides") ||
        !ints_eq(g, ga, gb, "dilations"))
      continue;
    gopt_rewrite_match m = {rule, 5, 1, {s, pa, pb, ga, gb}, {gopt_node_input(g, ga, 0)}};
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

/* The merged weights and biases of a merge_separable_sum match (see find_sepsum); d* are the
 * (copied) weight dims, NULL data when absent. Interleaved channel of G_a's channel c (group j =
 * c / ra, r = c % ra): j (ra + rb) + r; of G_b's: j (ra + rb) + ra + r. */
typedef struct sepsum_w {
  const float *wga, *wgb, *bga, *bgb, *wpa, *wpb, *bpa, *bpb;
  int64_t grp, oa, ob, per, npw;
} sepsum_w;

static void sepsum_fill(const sepsum_w *w, float *gw, float *gb, float *pw, float *pb) {
  int64_t ra = w->oa / w->grp, rb = w->ob / w->grp, o = w->oa + w->ob;
  for (int side = 0; side < 2; side++) {
    int64_t cnt = side ? w->ob : w->oa, rs = side ? rb : ra;
    const float *src = side ? w->wgb : w->wga, *bias = side ? w->bgb : w->bga, *p = side ? w->wpb : w->wpa;
    for (int64_t c = 0; c < cnt; c++) {
      int64_t k = (c / rs) * (ra + rb) + (side ? ra : 0) + c % rs;
      memcpy(gw + k * w->per, src + c * w->per, sizeof *gw * (size_t)w->per);
      gb[k] = bias ? bias[c] : 0.0f;
      for (int64_t q = 0; q < w->npw; q++) pw[q * o + k] = p[q * cnt + c];
    }
  }
  for (int64_t q = 0; q < w->npw; q++) pb[q] = (w->bpa ? w->bpa[q] : 0.0f) + (w->bpb ? w->bpb[q] : 0.0f);
}

/* Bias input of conv n (-1 when none). */
static int32_t conv_bias(const gopt_graph *g, int32_t n) {
  return g->nodes.a[n].n_in > 2 ? gopt_node_input(g, n, 2) : -1;
}

/* Adds conv(x, w, b) with conv c's attributes; returns its output or -1. */
static int32_t add_conv_like(gopt_graph *h, int32_t c, int32_t x, int32_t w, int32_t b, gopt_error *err) {
  int32_t y = rw_new_tensor(h, err);
  char name[48];
  snprintf(name, sizeof name, "rw__%u", h->n_unnamed++);
  int32_t in[3] = {x, w, b};
  int32_t n = y < 0 ? -1 : gopt_graph_add_node(h, "Conv", name, 3, in, 1, &y, err);
  return n < 0 || copy_conv_attrs(h, c, n, 0) ? -1 : y;
}

static int apply_sepsum(gopt_graph *h, const gopt_rewrite_match *m, int *flags, gopt_error *err) {
  int32_t s = m->nodes[0], pa = m->nodes[1], pb = m->nodes[2], ga = m->nodes[3], gb = m->nodes[4];
  int32_t wga = gopt_node_input(h, ga, 1), wgb = gopt_node_input(h, gb, 1);
  int32_t wpa = gopt_node_input(h, pa, 1), wpb = gopt_node_input(h, pb, 1);
  int64_t dg[4], dpa[4]; /* copied: adding tensors below may move the dims array */
  memcpy(dg, gopt_tensor_dims(h, wga), sizeof dg);
  memcpy(dpa, gopt_tensor_dims(h, wpa), sizeof dpa);
  sepsum_w w = {cdata(h, wga), cdata(h, wgb), cdata(h, conv_bias(h, ga)), cdata(h, conv_bias(h, gb)),
                cdata(h, wpa), cdata(h, wpb), cdata(h, conv_bias(h, pa)), cdata(h, conv_bias(h, pb)),
                gopt_node_get_int(h, ga, "group", 1), dg[0], gopt_tensor_dims(h, wgb)[0],
                dg[1] * dg[2] * dg[3], dpa[0]};
  int64_t o = w.oa + w.ob, gd[4] = {o, dg[1], dg[2], dg[3]}, pd[4] = {w.npw, o, 1, 1}, bd1[1] = {o}, bd2[1] = {w.npw};
  int have = w.wga && w.wgb && w.wpa && w.wpb;
  for (int k = 1; k < 5; k++) /* a bias that exists must have data */
    if (conv_bias(h, m->nodes[k]) >= 0 && !cdata(h, conv_bias(h, m->nodes[k]))) have = 0;
  float *gw = NULL, *gbias = NULL, *pw = NULL, *pbias = NULL;
  int rc = GOPT_ENOMEM;
  if (have) {
    if (GOPT_ALLOC(gw, o * w.per) || GOPT_ALLOC(gbias, o) || GOPT_ALLOC(pw, w.npw * o) || GOPT_ALLOC(pbias, w.npw))
      goto done;
    sepsum_fill(&w, gw, gbias, pw, pbias);
  } else {
    *flags |= GOPT_RW_NODATA;
  }
  *flags |= GOPT_RW_WEIGHTS;
  int32_t tgw = rw_const(h, GOPT_DT_FLOAT, 4, gd, gw, err), tgb = rw_const(h, GOPT_DT_FLOAT, 1, bd1, gbias, err);
  int32_t tpw = rw_const(h, GOPT_DT_FLOAT, 4, pd, pw, err), tpb = rw_const(h, GOPT_DT_FLOAT, 1, bd2, pbias, err);
  if (tgw < 0 || tgb < 0 || tpw < 0 || tpb < 0) goto done;
  int32_t y1 = add_conv_like(h, ga, m->vars[0], tgw, tgb, err);
  int32_t y2 = y1 < 0 ? -1 : add_conv_like(h, pa, y1, tpw, tpb, err);
  if (y2 < 0) goto done;
  if ((rc = rw_replace(h, gopt_node_output(h, s, 0), y2, err))) goto done;
  for (int k = 0; k < 5; k++) gopt_graph_remove_node(h, m->nodes[k]);
done:
  if (rc == GOPT_ENOMEM && (!err || !err->code)) gopt_error_set(err, rc, "out of memory");
  free(gw);
  free(gbias);
  free(pw);
  free(pbias);
  return rc;
}

static const rw_builtin k_builtins[] = {
    {"fuse_conv_batchnorm", 2, find_bn, apply_affine},
    {"fuse_conv_mul", 2, find_mul, apply_affine},
    {"fuse_conv_add", 2, find_add, apply_affine},
    {"merge_parallel_conv", 2, find_pconv, apply_pconv},
    {"enlarge_merge_conv", 2, find_econv, apply_pconv},
    {"merge_parallel_matmul", 2, find_pmm, apply_pmm},
    {"fold_constants", 1, find_fold, apply_fold},
    {"hoist_unary_over_split", 3, find_hoist, apply_hoist},
    {"concat_of_split", 2, find_concat_split, apply_concat_split},
    {"merge_group_conv", 1, find_gconv, apply_gconv},
    {"sink_unary_below_concat", 3, find_sink_concat, apply_sink_concat},
    {"swap_unary_maxpool", 2, find_swap_maxpool, apply_swap_maxpool},
    {"merge_parallel_matmul_batched", 2, find_bmm, apply_bmm},
    {"merge_matmul_add", 3, find_mma, apply_mma},
    {"merge_separable_sum", 5, find_sepsum, apply_sepsum},
};

const rw_builtin *rw_builtins(size_t *n) {
  *n = sizeof k_builtins / sizeof k_builtins[0];
  return k_builtins;
}
