/* k_hlo_window.c: the executor's windowed HLO ops, as XLA's operation semantics and its reference
 * evaluator (HloEvaluator) define them:
 * - convolution: dim_labels ("b01f_01io->b01f"), window size/stride/pad/lhs_dilate (base
 *   dilation)/rhs_dilate (window dilation)/rhs_reversal, feature_group_count (output feature o
 *   reads input features of group o / (O / G)) and batch_group_count (output feature o reads the
 *   input batch ((o / (O / N)) * (N / B)) % N + output batch, N the input batch size, as the
 *   evaluator does); the lhs and rhs are converted to the result's type first (doubles here);
 * - reduce-window (variadic): the computation folds the window's in-bounds, non-hole elements into
 *   the initial values, (accumulators..., elements...) -> accumulators;
 * - select-and-scatter: per source element, the window's first element is selected and replaced by
 *   each later one for which select(selected, current) is false; scatter(source, result) then
 *   updates the selected position of the result (initialised to the init value).
 * Window positions that fall in padding or between dilated elements are skipped (XLA's
 * IterateThroughWindow). */
#include <stdlib.h>
#include <string.h>

#include "exec/k_hlo.h"

#define NODE (k->node)
#define G (x->g)

typedef struct hwin {
  int n;
  int64_t size[GOPT_MAX_RANK], stride[GOPT_MAX_RANK], lo[GOPT_MAX_RANK], base[GOPT_MAX_RANK],
      wdil[GOPT_MAX_RANK], rev[GOPT_MAX_RANK];
} hwin;

/* The 'x'-separated list after "key=" in s (pairs "lo_hi" when pairs: the low ends), into v; the
 * entry count, or -1 when key is absent. */
static int win_list(const char *s, const char *key, int64_t *v, int pairs) {
  size_t kl = strlen(key);
  const char *p = s;
  while ((p = strstr(p, key)) && p > s && p[-1] != ' ' && p[-1] != '{') p += kl;
  if (!p) return -1;
  char *e = (char *)p + kl;
  int n = 0;
  for (; n < GOPT_MAX_RANK; n++) {
    v[n] = strtoll(e, &e, 10);
    if (pairs && *e == '_') strtoll(e + 1, &e, 10);
    if (*e != 'x') return n + 1;
    e++;
  }
  return n;
}

/* window="{size=AxB stride=.. pad=lo_hi.. lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}" of node n
 * for rank dims; 0, or -1 when it does not fit. A node without a window has zero dims. */
static int win_parse(const gopt_graph *g, int32_t n, int rank, hwin *w) {
  const char *s = gopt_node_get_string(g, n, "window", "");
  int64_t tmp[GOPT_MAX_RANK];
  w->n = *s ? win_list(s, "size=", w->size, 0) : 0;
  if (w->n != rank) return -1;
  for (int i = 0; i < rank; i++) w->stride[i] = w->base[i] = w->wdil[i] = 1, w->lo[i] = w->rev[i] = 0;
  struct { const char *key; int64_t *v; int pairs; } f[] = {{"stride=", w->stride, 0}, {"pad=", w->lo, 1},
      {"lhs_dilate=", w->base, 0}, {"rhs_dilate=", w->wdil, 0}, {"rhs_reversal=", w->rev, 0}};
  for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
    int c = win_list(s, f[j].key, tmp, f[j].pairs);
    if (c >= 0 && c != rank) return -1;
    if (c > 0) memcpy(f[j].v, tmp, (size_t)rank * sizeof *tmp);
  }
  for (int i = 0; i < rank; i++)
    if (w->size[i] < 1 || w->stride[i] < 1 || w->base[i] < 1 || w->wdil[i] < 1) return -1;
  return 0;
}

/* Operand position of window element wi for output position o along dim i (XLA's
 * IterateThroughWindow), -1 when it falls in padding or a dilation hole. */
static int64_t win_pos(const hwin *w, int i, int64_t o, int64_t wi, int64_t dim) {
  int64_t b = o * w->stride[i] + wi * w->wdil[i] - w->lo[i];
  if (w->base[i] > 1) {
    if (b % w->base[i]) return -1;
    b /= w->base[i];
  }
  return b >= 0 && b < dim ? b : -1;
}

/* Next multi-index of a box of sizes d[0..r) (odometer); 0 when it wrapped. */
static int bump(int64_t *idx, const int64_t *d, int r) {
  for (int i = r - 1; i >= 0; i--) {
    if (++idx[i] < d[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

/* ---- convolution ----------------------------------------------------------------------------- */

typedef struct cdims {
  int ns;                                   /* spatial dims */
  int lb, lf, ls[GOPT_MAX_RANK];            /* lhs batch, feature, spatial positions */
  int ri, ro, rs[GOPT_MAX_RANK];            /* rhs input/output feature, spatial */
  int ob, of, os[GOPT_MAX_RANK];            /* output batch, feature, spatial */
} cdims;

/* One part of dim_labels ("b01f"): the positions of the two letters and of the digits. */
static int labels(const char *s, size_t len, char c1, char c2, int *p1, int *p2, int *sp, int *ns) {
  *p1 = *p2 = -1;
  int nd = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == c1) *p1 = (int)i;
    else if (s[i] == c2) *p2 = (int)i;
    else if (s[i] >= '0' && s[i] <= '9' && s[i] - '0' < GOPT_MAX_RANK) sp[s[i] - '0'] = (int)i, nd++;
    else return -1;
  }
  if (*ns >= 0 && nd != *ns) return -1;
  *ns = nd;
  return *p1 < 0 || *p2 < 0 || (int)len != nd + 2 ? -1 : 0;
}

static int conv_dims(const gopt_graph *g, int32_t n, cdims *c) {
  const char *s = gopt_node_get_string(g, n, "dim_labels", "");
  const char *u = strchr(s, '_'), *a = strstr(s, "->");
  c->ns = -1;
  if (!u || !a || a < u) return -1;
  if (labels(s, (size_t)(u - s), 'b', 'f', &c->lb, &c->lf, c->ls, &c->ns)) return -1;
  if (labels(u + 1, (size_t)(a - u - 1), 'i', 'o', &c->ri, &c->ro, c->rs, &c->ns)) return -1;
  return labels(a + 2, strlen(a + 2), 'b', 'f', &c->ob, &c->of, c->os, &c->ns);
}

static int f_conv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  cdims c;
  hwin w;
  if (conv_dims(G, NODE, &c) || in[0].rank != c.ns + 2 || in[1].rank != c.ns + 2 || out[0].rank != c.ns + 2)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "convolution: dim_labels do not fit the operands");
  if (win_parse(G, NODE, c.ns, &w)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "convolution: bad window attribute");
  int64_t fg = gopt_node_get_int(G, NODE, "feature_group_count", 1), bg = gopt_node_get_int(G, NODE, "batch_group_count", 1);
  int64_t N = in[0].d[c.lb], cin = in[0].d[c.lf], cg = in[1].d[c.ri], O = in[1].d[c.ro];
  if (fg < 1 || bg < 1 || cin != fg * cg || O != out[0].d[c.of] || O % fg || O % bg || N % bg || out[0].d[c.ob] != N / bg ||
      (bg > 1 && (O < N || O % N)))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "convolution: feature/batch group counts do not fit the shapes");
  int64_t ls[GOPT_MAX_RANK], rs[GOPT_MAX_RANK], os[GOPT_MAX_RANK], pos[GOPT_MAX_RANK] = {0}, box[GOPT_MAX_RANK];
  ref_strides(&in[0], ls), ref_strides(&in[1], rs), ref_strides(&out[0], os);
  int64_t ofg = O / fg, dm = bg > 1 ? O / N : 1, bgs = N / bg;
  double *acc = malloc((size_t)O * sizeof *acc + 1);
  int64_t *lboff = malloc((size_t)O * sizeof *lboff + 1);
  if (!acc || !lboff) {
    free(acc);
    free(lboff);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t o = 0; o < O; o++) /* per output feature: its batch group's and feature group's lhs offset */
    lboff[o] = ((o / dm) * bgs % N) * ls[c.lb] * (bg > 1) + (o / ofg) * cg * ls[c.lf];
  for (int i = 0; i < c.ns + 2; i++) box[i] = i == c.of ? 1 : out[0].d[i];
  int64_t wsz[GOPT_MAX_RANK], wi[GOPT_MAX_RANK];
  for (int i = 0; i < c.ns; i++) wsz[i] = w.size[i];
  if (out[0].n) do { /* every output position but the feature dim */
      memset(acc, 0, (size_t)O * sizeof *acc);
      memset(wi, 0, sizeof wi);
      int64_t lbase = pos[c.ob] * ls[c.lb];
      do { /* every window position */
        int64_t l = lbase, r = 0, ok = 1;
        for (int i = 0; i < c.ns && ok; i++) {
          int64_t p = win_pos(&w, i, pos[c.os[i]], wi[i], in[0].d[c.ls[i]]);
          ok = p >= 0;
          l += p * ls[c.ls[i]];
          r += (w.rev[i] ? w.size[i] - 1 - wi[i] : wi[i]) * rs[c.rs[i]];
        }
        if (ok && fg == 1 && bg == 1) /* one group: every output feature reads the same inputs */
          for (int64_t z = 0; z < cg; z++) {
            const double lv = in[0].v[l + z * ls[c.lf]], *rp = in[1].v + r + z * rs[c.ri];
            for (int64_t o = 0; o < O; o++) acc[o] += lv * rp[o * rs[c.ro]];
          }
        else
          for (int64_t o = 0; ok && o < O; o++) {
            const double *lp = in[0].v + l + lboff[o], *rp = in[1].v + r + o * rs[c.ro];
            double s = 0;
            for (int64_t z = 0; z < cg; z++) s += lp[z * ls[c.lf]] * rp[z * rs[c.ri]];
            acc[o] += s;
          }
      } while (c.ns && bump(wi, wsz, c.ns));
      int64_t ob = 0;
      for (int i = 0; i < c.ns + 2; i++) ob += pos[i] * os[i];
      for (int64_t o = 0; o < O; o++) out[0].v[ob + o * os[c.of]] = acc[o];
    } while (bump(pos, box, c.ns + 2));
  free(acc);
  free(lboff);
  return GOPT_OK;
}

/* ---- reduce-window, select-and-scatter ------------------------------------------------------- */

/* Flat operand index of window element wi for output position o, -1 when skipped. */
static int64_t win_elem(const hwin *w, const rt *op, const int64_t *o, const int64_t *wi) {
  int64_t f = 0;
  for (int i = 0; i < op->rank; i++) {
    int64_t p = win_pos(w, i, o[i], wi[i], op->d[i]);
    if (p < 0) return -1;
    f = f * op->d[i] + p;
  }
  return f;
}

/* reduce-window(x_0..x_{k-1}, init_0..init_{k-1}), window, to_apply. */
static int f_reduce_window(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const gopt_graph *s = ex_hlo_comp(G, NODE, "to_apply");
  int kk = nin / 2;
  hwin w;
  if (!s || nin != 2 * kk || nout != kk || kk > 4 || (int)s->inputs.n != 2 * kk || (int)s->outputs.n != kk)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "reduce-window needs k operands, k initial values, k results (k <= 4) and to_apply");
  if (win_parse(G, NODE, in[0].rank, &w)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "reduce-window: bad window attribute");
  ex_hlo_scomp c;
  int rc = ex_hlo_scomp_init(&c, s, err);
  int64_t o[GOPT_MAX_RANK], wi[GOPT_MAX_RANK];
  double args[8], res[4];
  for (int64_t f = 0; f < out[0].n && !rc; f++) {
    ex_hlo_unravel(&out[0], f, o);
    for (int j = 0; j < kk; j++) args[j] = in[kk + j].v[0];
    memset(wi, 0, sizeof wi);
    do {
      int64_t e = win_elem(&w, &in[0], o, wi);
      if (e < 0) continue;
      for (int j = 0; j < kk; j++) args[kk + j] = in[j].v[e];
      ex_hlo_scomp_eval(&c, args, res);
      memcpy(args, res, (size_t)kk * sizeof *res);
    } while (in[0].rank && bump(wi, w.size, in[0].rank));
    for (int j = 0; j < kk; j++) out[j].v[f] = args[j];
  }
  ex_hlo_scomp_free(&c);
  return rc;
}

/* select-and-scatter(operand, source, init), window, select, scatter. */
static int f_select_scatter(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  const gopt_graph *ss = ex_hlo_comp(G, NODE, "select"), *sc = ex_hlo_comp(G, NODE, "scatter");
  hwin w;
  if (!ss || !sc || nin != 3 || in[1].rank != in[0].rank || ss->inputs.n != 2 || sc->inputs.n != 2)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "select-and-scatter needs operand, source, init, select and scatter");
  if (win_parse(G, NODE, in[0].rank, &w)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "select-and-scatter: bad window attribute");
  ex_hlo_scomp cs = {0}, cc = {0};
  int rc = ex_hlo_scomp_init(&cs, ss, err);
  if (!rc) rc = ex_hlo_scomp_init(&cc, sc, err);
  int64_t o[GOPT_MAX_RANK], wi[GOPT_MAX_RANK];
  for (int64_t f = 0; f < out[0].n; f++) out[0].v[f] = in[2].v[0];
  for (int64_t f = 0; f < in[1].n && !rc; f++) {
    ex_hlo_unravel(&in[1], f, o);
    memset(wi, 0, sizeof wi);
    int64_t sel = -1;
    do {
      int64_t e = win_elem(&w, &in[0], o, wi);
      double a[2], r;
      if (e < 0) continue;
      if (sel < 0) sel = e;
      a[0] = in[0].v[sel], a[1] = in[0].v[e];
      ex_hlo_scomp_eval(&cs, a, &r);
      if (r == 0) sel = e;
    } while (in[0].rank && bump(wi, w.size, in[0].rank));
    if (sel < 0) continue;
    double a[2] = {in[1].v[f], out[0].v[sel]};
    ex_hlo_scomp_eval(&cc, a, &out[0].v[sel]);
  }
  ex_hlo_scomp_free(&cs);
  ex_hlo_scomp_free(&cc);
  return rc;
}

ref_fn ex_hlo_window_kernel(const gopt_graph *g, int32_t n) {
  const char *op = ex_hlo_op(g, n);
  if (!op) return NULL;
  if (!strcmp(op, "convolution")) return f_conv;
  if (!strcmp(op, "reduce-window")) return f_reduce_window;
  if (!strcmp(op, "select-and-scatter")) return f_select_scatter;
  return NULL;
}
