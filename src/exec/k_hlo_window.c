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

/* 0 when the input x, filter f and output y of a convolution fit dim_labels c (parsed from node n,
 * with its window w and group counts), else -1. */
static int conv_fit(const gopt_graph *g, int32_t n, const rt *xi, const rt *fi, const rt *yo, cdims *c, hwin *w,
                    int64_t *fg, int64_t *bg, int *bad_window) {
  *bad_window = 0;
  if (conv_dims(g, n, c) || xi->rank != c->ns + 2 || fi->rank != c->ns + 2 || yo->rank != c->ns + 2) return -1;
  if (win_parse(g, n, c->ns, w)) return *bad_window = 1, -1;
  *fg = gopt_node_get_int(g, n, "feature_group_count", 1), *bg = gopt_node_get_int(g, n, "batch_group_count", 1);
  int64_t N = xi->d[c->lb], cin = xi->d[c->lf], cg = fi->d[c->ri], O = fi->d[c->ro];
  if (*fg < 1 || *bg < 1 || cin != *fg * cg || O != yo->d[c->of] || O % *fg || O % *bg || N % *bg ||
      yo->d[c->ob] != N / *bg || (*bg > 1 && (O < N || O % N)))
    return -1;
  for (int i = 0; i < c->ns; i++) /* the filter's spatial dims are the window's */
    if (fi->d[c->rs[i]] != w->size[i]) return -1;
  return 0;
}

/* The lhs offset of output feature o: its batch group's and feature group's (see the file comment). */
static int64_t conv_lboff(int64_t o, int64_t O, int64_t N, int64_t fg, int64_t bg, int64_t cg, const cdims *c, const int64_t *ls) {
  int64_t dm = bg > 1 ? O / N : 1;
  return ((o / dm) * (N / bg) % N) * ls[c->lb] * (bg > 1) + (o / (O / fg)) * cg * ls[c->lf];
}

static int f_conv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  cdims c;
  hwin w;
  int64_t fg, bg;
  int bw;
  if (conv_fit(G, NODE, &in[0], &in[1], &out[0], &c, &w, &fg, &bg, &bw))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, bw ? "convolution: bad window attribute"
                                                          : "convolution: dim_labels or feature/batch group counts do not fit the operands");
  int64_t N = in[0].d[c.lb], cg = in[1].d[c.ri], O = in[1].d[c.ro];
  int64_t ls[GOPT_MAX_RANK], rs[GOPT_MAX_RANK], os[GOPT_MAX_RANK], pos[GOPT_MAX_RANK] = {0}, box[GOPT_MAX_RANK];
  ref_strides(&in[0], ls), ref_strides(&in[1], rs), ref_strides(&out[0], os);
  double *acc = malloc((size_t)O * sizeof *acc + 1);
  int64_t *lboff = malloc((size_t)O * sizeof *lboff + 1);
  if (!acc || !lboff) {
    free(acc);
    free(lboff);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t o = 0; o < O; o++) lboff[o] = conv_lboff(o, O, N, fg, bg, cg, &c, ls);
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

/* ---- cuDNN convolution custom-calls ------------------------------------------------------------ */

/* The convolution y = conv(xi, fi) of dims c, window w and groups fg/bg, or one of its adjoints: it
 * visits every term y[yi] += xi[l] * fi[r] of the forward sum and, by mode, accumulates
 * 0: y[yi] += xi[l] * fi[r] (forward), 1: fi[r] += xi[l] * y[yi] (the filter gradient, y the output
 * gradient), 2: xi[l] += fi[r] * y[yi] (the input gradient). The tensor it writes is zeroed first. */
static void conv_terms(int mode, const cdims *c, const hwin *w, int64_t fg, int64_t bg, rt *xi, rt *fi, rt *yo) {
  rt *res = mode == 0 ? yo : mode == 1 ? fi : xi;
  if (res->n) memset(res->v, 0, (size_t)res->n * sizeof(double));
  int64_t N = xi->d[c->lb], cg = fi->d[c->ri], O = fi->d[c->ro];
  int64_t ls[GOPT_MAX_RANK], rs[GOPT_MAX_RANK], os[GOPT_MAX_RANK], pos[GOPT_MAX_RANK] = {0}, wi[GOPT_MAX_RANK];
  ref_strides(xi, ls), ref_strides(fi, rs), ref_strides(yo, os);
  if (!yo->n || !xi->n || !fi->n) return;
  do { /* every output element, feature dim included */
    int64_t o = pos[c->of], yi = 0;
    for (int i = 0; i < c->ns + 2; i++) yi += pos[i] * os[i];
    int64_t lbase = pos[c->ob] * ls[c->lb] + conv_lboff(o, O, N, fg, bg, cg, c, ls), rbase = o * rs[c->ro];
    double acc = 0, yv = yo->v[yi];
    memset(wi, 0, sizeof wi);
    do {
      int64_t l = lbase, r = rbase, ok = 1;
      for (int i = 0; i < c->ns && ok; i++) {
        int64_t p = win_pos(w, i, pos[c->os[i]], wi[i], xi->d[c->ls[i]]);
        ok = p >= 0;
        l += p * ls[c->ls[i]];
        r += (w->rev[i] ? w->size[i] - 1 - wi[i] : wi[i]) * rs[c->rs[i]];
      }
      for (int64_t z = 0; ok && z < cg; z++) {
        int64_t lz = l + z * ls[c->lf], rz = r + z * rs[c->ri];
        if (mode == 0) acc += xi->v[lz] * fi->v[rz];
        else if (mode == 1) fi->v[rz] += xi->v[lz] * yv;
        else xi->v[lz] += fi->v[rz] * yv;
      }
    } while (c->ns && bump(wi, w->size, c->ns));
    if (mode == 0) yo->v[yi] = acc;
  } while (bump(pos, yo->d, c->ns + 2));
}

/* The number after "key": in the JSON text s, dflt when absent. */
static double json_num(const char *s, const char *key, double dflt) {
  const char *p = strstr(s, key);
  return p ? strtod(p + strlen(key), NULL) : dflt;
}

/* XLA's cuDNN convolution custom-calls (its GPU conv rewriter's kinds), each a tuple (result,
 * u8[] scratch); window, dim_labels and group counts are those of the forward convolution
 * input (*) filter -> output, and the operands and result take the roles
 * - __cudnn$convForward (input, filter) -> output;
 * - __cudnn$convBackwardInput (output gradient, filter) -> input gradient;
 * - __cudnn$convBackwardFilter (input, output gradient) -> filter gradient;
 * - __cudnn$convBiasActivationForward (input, filter, bias [O], side input?) -> output:
 *   act(conv_result_scale * conv + side_input_scale * side + bias), act kNone or kRelu;
 * the result of each is scaled by backend_config's conv_result_scale (cuDNN's alpha). */
static int f_cudnn_conv(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const char *t = gopt_node_get_string(G, NODE, "custom_call_target", ""), *bc = gopt_node_get_string(G, NODE, "backend_config", "");
  int mode = strstr(t, "BackwardFilter") ? 1 : strstr(t, "BackwardInput") ? 2 : 0, bias = strstr(t, "BiasActivation") != NULL;
  int relu = strstr(bc, "\"activation_mode\":\"kRelu\"") != NULL;
  if (strstr(bc, "\"activation_mode\":\"") && !relu && !strstr(bc, "\"activation_mode\":\"kNone\""))
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "%s: activation mode other than kNone/kRelu", t);
  if (nin < 2 + bias || nin > (bias ? 4 : 2) || nout < 1)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: %d operands, %d results", t, nin, nout);
  rt *xi = mode == 2 ? &out[0] : &in[0], *fi = mode == 1 ? &out[0] : &in[1], *yo = mode == 0 ? &out[0] : mode == 1 ? &in[1] : &in[0];
  cdims c;
  hwin w;
  int64_t fg, bg;
  int bw;
  if (conv_fit(G, NODE, xi, fi, yo, &c, &w, &fg, &bg, &bw))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: window, dim_labels or group counts do not fit the operands", t);
  int64_t O = fi->d[c.ro], os[GOPT_MAX_RANK];
  if (bias && (in[2].n != O || (nin == 4 && in[3].n != out[0].n)))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "%s: bias or side input does not fit the output", t);
  conv_terms(mode, &c, &w, fg, bg, xi, fi, yo);
  double alpha = json_num(bc, "\"conv_result_scale\":", 1), beta = json_num(bc, "\"side_input_scale\":", 0);
  ref_strides(&out[0], os);
  for (int64_t i = 0; i < out[0].n; i++) {
    double v = alpha * out[0].v[i];
    if (bias) v += in[2].v[(i / os[c.of]) % O] + (nin == 4 ? beta * in[3].v[i] : 0);
    out[0].v[i] = relu && v < 0 ? 0 : v;
  }
  for (int j = 1; j < nout; j++) /* the scratch buffer */
    if (out[j].v) memset(out[j].v, 0, (size_t)out[j].n * sizeof(double));
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

#define RW_MAX 8 /* operands of a variadic reduce-window (XLA's max-pool gradient fusion has 5) */

/* reduce-window(x_0..x_{k-1}, init_0..init_{k-1}), window, to_apply. */
static int f_reduce_window(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  const gopt_graph *s = ex_hlo_comp(G, NODE, "to_apply");
  int kk = nin / 2;
  hwin w;
  if (!s || nin != 2 * kk || nout != kk || kk > RW_MAX || (int)s->inputs.n != 2 * kk || (int)s->outputs.n != kk)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "reduce-window needs k operands, k initial values, k results (k <= %d) and to_apply", RW_MAX);
  if (win_parse(G, NODE, in[0].rank, &w)) return ex_node_error(x, NODE, err, GOPT_EINVAL, "reduce-window: bad window attribute");
  ex_hlo_scomp c;
  int rc = ex_hlo_scomp_init(&c, s, err);
  int64_t o[GOPT_MAX_RANK], wi[GOPT_MAX_RANK];
  double args[2 * RW_MAX], res[RW_MAX];
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
  if (!strcmp(op, "custom-call") && strstr(gopt_node_get_string(g, n, "custom_call_target", ""), "__cudnn$conv")) return f_cudnn_conv;
  if (!strcmp(op, "reduce-window")) return f_reduce_window;
  if (!strcmp(op, "select-and-scatter")) return f_select_scatter;
  return NULL;
}
