/* k_ref_more.c: reference kernels (k_ref.h) for signal, detection and training ops: the window
 * functions (Hann, Hamming, Blackman), DFT, STFT, MelWeightMatrix, BatchNormalization in training
 * mode, InstanceNormalization, Unique, NonMaxSuppression, RoiAlign (avg and max), TfIdfVectorizer (integer input), and the
 * ai.onnx.preview.training optimisers (Adagrad, Momentum, Adam). ONNX semantics as the operator
 * specification states them; double precision. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

static const char *optype(const gopt_exec *x, int32_t n) { return gopt_graph_str(x->g, x->g->nodes.a[n].type); }

static int f_window(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)in, (void)nin, (void)nout, (void)err;
  const char *t = optype(x, NODE);
  int64_t N = out[0].n;
  double D = gopt_node_get_int(G, NODE, "periodic", 1) ? (double)N : (double)(N - 1);
  for (int64_t i = 0; i < N; i++) {
    double c = 2 * M_PI * (double)i / D;
    if (!strcmp(t, "HannWindow")) out[0].v[i] = 0.5 - 0.5 * cos(c);
    else if (!strcmp(t, "HammingWindow")) out[0].v[i] = 25.0 / 46.0 - 21.0 / 46.0 * cos(c);
    else out[0].v[i] = 0.42 - 0.5 * cos(c) + 0.08 * cos(2 * c);
  }
  return GOPT_OK;
}

/* DFT (opsets 17 and 20): input [B, ..., N, 1 or 2] along axis (the attribute, default 1; from
 * opset 20 the axis input, default -2), dft_length input, onesided, inverse; output [..., K, 2],
 * or [..., K, 1] for an inverse onesided (real) result, whose missing upper half of the input
 * spectrum is the conjugate mirror of the lower (X[n] = conj(X[K - n])). */
static int f_dft(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int r = in[0].rank, axis, rc;
  if (x->opset >= 20) {
    int64_t a = nin > 2 && in[2].v ? (int64_t)in[2].v[0] : -2;
    if (a < 0) a += r;
    if (a < 0 || a >= r - 1) return ex_node_error(x, NODE, err, GOPT_EINVAL, "axis %lld out of range", (long long)a);
    axis = (int)a;
  } else if ((rc = ref_axis(x, NODE, "axis", 1, r - 1, &axis, err))) {
    return rc;
  }
  int inv = (int)gopt_node_get_int(G, NODE, "inverse", 0), one = (int)gopt_node_get_int(G, NODE, "onesided", 0);
  int cplx = in[0].d[r - 1] == 2, co = out[0].d[r - 1] == 2 ? 2 : 1;
  int64_t Nin = in[0].d[axis], K = out[0].d[axis];
  int64_t L = nin > 1 && in[1].v ? (int64_t)in[1].v[0] : inv && one ? K : Nin;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= in[0].d[i];
  for (int i = axis + 1; i < r - 1; i++) inner *= in[0].d[i];
  int ci = cplx ? 2 : 1, mirror = inv && one;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      for (int64_t f = 0; f < K; f++) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < L; n++) {
          int64_t src = n, conj = 0;
          if (mirror && n >= Nin) src = L - n, conj = 1;
          if (src >= Nin || src < 0) continue; /* zero padding */
          const double *p = in[0].v + ((o * Nin + src) * inner + i) * ci;
          double a = (inv ? 2 : -2) * M_PI * (double)f * (double)n / (double)L;
          double xr = p[0], xi = cplx ? (conj ? -p[1] : p[1]) : 0;
          re += xr * cos(a) - xi * sin(a);
          im += xr * sin(a) + xi * cos(a);
        }
        double *q = out[0].v + ((o * K + f) * inner + i) * co;
        q[0] = inv ? re / (double)L : re;
        if (co == 2) q[1] = inv ? im / (double)L : im;
      }
  return GOPT_OK;
}

/* STFT (opset 17): signal [B, L, 1 or 2], frame_step, window [W] (optional), frame_length
 * (optional); output [B, frames, bins, 2], bins = W/2+1 when onesided. */
static int f_stft(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout, (void)err;
  int64_t B = in[0].d[0], L = in[0].d[1], ci = in[0].d[2], step = (int64_t)in[1].v[0];
  const double *win = nin > 2 && in[2].v ? in[2].v : NULL;
  int64_t W = nin > 3 && in[3].v ? (int64_t)in[3].v[0] : win ? in[2].n : L;
  int64_t F = out[0].d[1], K = out[0].d[2];
  (void)x, (void)k;
  for (int64_t b = 0; b < B; b++)
    for (int64_t f = 0; f < F; f++)
      for (int64_t q = 0; q < K; q++) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < W && f * step + n < L; n++) {
          const double *p = in[0].v + (b * L + f * step + n) * ci;
          double w = win ? win[n] : 1, a = -2 * M_PI * (double)q * (double)n / (double)W;
          double xr = p[0] * w, xi = ci == 2 ? p[1] * w : 0;
          re += xr * cos(a) - xi * sin(a);
          im += xr * sin(a) + xi * cos(a);
        }
        double *o = out[0].v + ((b * F + f) * K + q) * 2;
        o[0] = re, o[1] = im;
      }
  return GOPT_OK;
}

/* RoiAlign (avg or max; half_pixel or output_half_pixel): X [N,C,H,W], rois [R,4] (x1,y1,x2,y2),
 * batch_indices [R] -> [R, C, oh, ow]; each bin takes bilinear samples on a grid: avg averages
 * the interpolated values; max takes, per sample, the largest of the four weighted corner
 * terms and the largest of those over the bin (ONNX's reference and ONNX Runtime do this, not
 * the max of the interpolated values). A sample more than a pixel outside gives 0. */
static double roi_sample(const double *p, int64_t H, int64_t W, double y, double x, int max) {
  if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return 0;
  y = y < 0 ? 0 : y;
  x = x < 0 ? 0 : x;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, y = (double)yl;
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, x = (double)xl;
  else xh = xl + 1;
  double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
  double t[4] = {hy * hx * p[yl * W + xl], hy * lx * p[yl * W + xh], ly * hx * p[yh * W + xl], ly * lx * p[yh * W + xh]};
  if (!max) return t[0] + t[1] + t[2] + t[3];
  return fmax(fmax(t[0], t[1]), fmax(t[2], t[3]));
}

static int f_roialign(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  const char *mode = gopt_node_get_string(G, NODE, "mode", "avg");
  int max = !strcmp(mode, "max");
  if (!max && strcmp(mode, "avg"))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "mode '%s' is neither avg nor max", mode);
  int half = !strcmp(gopt_node_get_string(G, NODE, "coordinate_transformation_mode", "half_pixel"), "half_pixel");
  double sc = gopt_node_get_float(G, NODE, "spatial_scale", 1.0), off = half ? 0.5 : 0;
  int64_t sr = gopt_node_get_int(G, NODE, "sampling_ratio", 0);
  int64_t C = in[0].d[1], H = in[0].d[2], W = in[0].d[3], R = out[0].d[0], oh = out[0].d[2], ow = out[0].d[3];
  for (int64_t r = 0; r < R; r++) {
    const double *b = in[1].v + r * 4;
    double x0 = b[0] * sc - off, y0 = b[1] * sc - off, x1 = b[2] * sc - off, y1 = b[3] * sc - off;
    double rw = x1 - x0, rh = y1 - y0;
    if (!half) rw = fmax(rw, 1), rh = fmax(rh, 1);
    double bh = rh / (double)oh, bw = rw / (double)ow;
    int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)oh), gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)ow);
    double cnt = (double)(gh * gw > 1 ? gh * gw : 1);
    int64_t bi = (int64_t)in[2].v[r];
    for (int64_t c = 0; c < C; c++) {
      const double *p = in[0].v + (bi * C + c) * H * W;
      for (int64_t ph = 0; ph < oh; ph++)
        for (int64_t pw = 0; pw < ow; pw++) {
          double acc = 0;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
              double yy = y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
              double xx = x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              double v = roi_sample(p, H, W, yy, xx, max);
              acc = !max ? acc + v : (iy || ix) ? fmax(acc, v) : v;
            }
          out[0].v[((r * C + c) * oh + ph) * ow + pw] = max ? acc : acc / cnt;
        }
    }
  }
  return GOPT_OK;
}

/* TfIdfVectorizer on integer input [L] or [B, L]: counts the pool's n-grams (n in
 * [min_gram_length, max_gram_length], items skip-1 apart for skip in [0, max_skip_count]; a
 * unigram counts once), mode TF (counts), IDF (weight when present) or TFIDF (count x weight). */
static int f_tfidf(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  size_t np = 0, nc = 0, ni = 0, nw = 0;
  const int64_t *pool = gopt_node_get_ints(G, NODE, "pool_int64s", &np);
  const int64_t *cnt = gopt_node_get_ints(G, NODE, "ngram_counts", &nc);
  const int64_t *idx = gopt_node_get_ints(G, NODE, "ngram_indexes", &ni);
  const float *wt = gopt_node_get_floats(G, NODE, "weights", &nw);
  if (!pool || !cnt || !idx) return ex_node_error(x, NODE, err, GOPT_EUNSUP, "needs pool_int64s, ngram_counts, ngram_indexes");
  int64_t mn = gopt_node_get_int(G, NODE, "min_gram_length", 1), mx = gopt_node_get_int(G, NODE, "max_gram_length", 1);
  int64_t skip = gopt_node_get_int(G, NODE, "max_skip_count", 0);
  const char *mode = gopt_node_get_string(G, NODE, "mode", "TF");
  int64_t B = in[0].rank == 2 ? in[0].d[0] : 1, L = in[0].d[in[0].rank - 1], O = out[0].d[out[0].rank - 1];
  for (int64_t b = 0; b < B; b++) {
    const double *row = in[0].v + b * L;
    double *o = out[0].v + b * O;
    for (int64_t n = mn; n <= mx; n++) {
      if (n < 1 || (size_t)n > nc) continue;
      size_t lo = (size_t)cnt[n - 1], hi = (size_t)n < nc ? (size_t)cnt[n] : np; /* pool range of n-grams */
      size_t first = 0; /* index of the first n-gram of this size among all n-grams */
      for (int64_t m = 1; m < n; m++) first += ((size_t)(m < (int64_t)nc ? cnt[m] : (int64_t)np) - (size_t)cnt[m - 1]) / (size_t)m;
      for (int64_t sk = 0; sk <= (n == 1 ? 0 : skip); sk++)
        for (int64_t i = 0; i + (n - 1) * (sk + 1) < L; i++)
          for (size_t q = lo; q + (size_t)n <= hi; q += (size_t)n) {
            int match = 1;
            for (int64_t j = 0; j < n && match; j++) match = (int64_t)row[i + j * (sk + 1)] == pool[q + (size_t)j];
            size_t g = first + (q - lo) / (size_t)n;
            if (match && g < ni && idx[g] < O) o[idx[g]] += 1;
          }
    }
    for (int64_t j = 0; j < O; j++) {
      double w = 1; /* weights[g] belongs to the pool's g-th n-gram, output ngram_indexes[g] */
      for (size_t g = 0; wt && g < ni && g < nw; g++)
        if (idx[g] == j) w = wt[g];
      if (!strcmp(mode, "IDF")) o[j] = o[j] > 0 ? w : 0;
      else if (!strcmp(mode, "TFIDF")) o[j] *= w;
    }
  }
  return GOPT_OK;
}

/* MelWeightMatrix (opset 17): [dft_length/2+1, num_mel_bins] triangular filters between mel-spaced
 * bin edges (num_mel_bins + 2 edges from lower_edge_hertz to upper_edge_hertz). */
static int f_melweight(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  int64_t nm = (int64_t)in[0].v[0], dft = (int64_t)in[1].v[0], nb = dft / 2 + 1;
  double sr = in[2].v[0], lo = 2595 * log10(1 + in[3].v[0] / 700), hi = 2595 * log10(1 + in[4].v[0] / 700);
  if (nm < 1 || nm > 4096 || out[0].n != nb * nm || sr <= 0)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "inputs do not match the output shape");
  int64_t *edge = malloc((size_t)(nm + 2) * sizeof *edge);
  if (!edge) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  double step = (hi - lo) / (double)(nm + 2);
  for (int64_t i = 0; i < nm + 2; i++) {
    double hz = 700 * (pow(10, ((double)i * step + lo) / 2595) - 1);
    edge[i] = (int64_t)floor((double)(dft + 1) * hz / sr);
  }
  for (int64_t i = 0; i < nm; i++) {
    int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (c == l) {
      if (c >= 0 && c < nb) out[0].v[c * nm + i] = 1;
    } else {
      for (int64_t j = l; j <= c; j++)
        if (j >= 0 && j < nb) out[0].v[j * nm + i] = (double)(j - l) / (double)(c - l);
    }
    for (int64_t j = c; h > c && j < h; j++)
      if (j >= 0 && j < nb) out[0].v[j * nm + i] = (double)(h - j) / (double)(h - c);
  }
  free(edge);
  return GOPT_OK;
}

/* BatchNormalization training_mode=1: batch statistics; running mean/var updated with momentum. */
static int f_bn_train(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin;
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5), mom = gopt_node_get_float(G, NODE, "momentum", 0.9);
  int64_t N = in[0].d[0], C = in[0].d[1], S = in[0].n / (N * C != 0 ? N * C : 1);
  (void)err;
  for (int64_t c = 0; c < C; c++) {
    double mu = 0, var = 0, cnt = (double)(N * S);
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) mu += in[0].v[(n * C + c) * S + s];
    mu /= cnt;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        double d = in[0].v[(n * C + c) * S + s] - mu;
        var += d * d;
      }
    var /= cnt;
    for (int64_t n = 0; n < N; n++)
      for (int64_t s = 0; s < S; s++) {
        int64_t p = (n * C + c) * S + s;
        out[0].v[p] = (in[0].v[p] - mu) / sqrt(var + eps) * in[1].v[c] + in[2].v[c];
      }
    if (nout > 1 && out[1].v) out[1].v[c] = in[3].v[c] * mom + mu * (1 - mom);
    if (nout > 2 && out[2].v) out[2].v[c] = in[4].v[c] * mom + var * (1 - mom);
  }
  return GOPT_OK;
}

static int claim_bn_train(const gopt_exec *x, int32_t n) {
  return gopt_node_get_int(x->g, n, "training_mode", 0) != 0;
}

/* ---- Unique ----------------------------------------------------------------------------------------- */

static const double *g_u_v;
static int64_t g_u_len, g_u_stride, g_u_inner;
/* compares slices a and b (slice j: elements (o * m + j) * inner + i for all o, i) */
static int u_cmp_slices(int64_t a, int64_t b) {
  for (int64_t e = 0; e < g_u_len; e++) {
    int64_t o = e / g_u_inner, i = e % g_u_inner;
    double u = g_u_v[(o * g_u_stride + a) * g_u_inner + i], w = g_u_v[(o * g_u_stride + b) * g_u_inner + i];
    if (u != w) return u < w ? -1 : 1;
  }
  return 0;
}
static int u_qcmp(const void *p, const void *q) {
  int64_t a = *(const int64_t *)p, b = *(const int64_t *)q;
  int c = u_cmp_slices(a, b);
  return c ? c : (a < b ? -1 : a > b);
}

static int f_unique(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin;
  int has_axis = gopt_node_attr(G, NODE, "axis") != NULL, axis = 0, rc;
  int64_t outer = 1, m = in[0].n, inner = 1;
  if (has_axis) {
    if ((rc = ref_axis(x, NODE, "axis", 0, in[0].rank, &axis, err))) return rc;
    ref_split3(&in[0], axis, &outer, &m, &inner);
  }
  int sorted = (int)gopt_node_get_int(G, NODE, "sorted", 1);
  int64_t *ord = malloc((size_t)(m + 1) * sizeof *ord), *first = malloc((size_t)(m + 1) * sizeof *first);
  int64_t *cnt = calloc((size_t)m + 1, sizeof *cnt), *inv = malloc((size_t)(m + 1) * sizeof *inv);
  if (!ord || !first || !cnt || !inv) {
    free(ord), free(first), free(cnt), free(inv);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  g_u_v = in[0].v, g_u_len = outer * inner, g_u_stride = m, g_u_inner = inner;
  int64_t nu = 0;
  for (int64_t j = 0; j < m; j++) { /* first occurrences, in order of appearance */
    int64_t f = -1;
    for (int64_t q = 0; q < nu && f < 0; q++)
      if (!u_cmp_slices(first[q], j)) f = q;
    if (f < 0) first[f = nu++] = j;
    cnt[f]++;
    inv[j] = f;
  }
  for (int64_t q = 0; q < nu; q++) ord[q] = q;
  if (sorted) { /* order the unique slices; remap inverse indices and counts */
    int64_t *pos = malloc((size_t)(nu + 1) * sizeof *pos), *c2 = malloc((size_t)(nu + 1) * sizeof *c2);
    int64_t *f2 = malloc((size_t)(nu + 1) * sizeof *f2);
    if (!pos || !c2 || !f2) {
      free(pos), free(c2), free(f2), free(ord), free(first), free(cnt), free(inv);
      return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    }
    for (int64_t q = 0; q < nu; q++) f2[q] = first[q];
    qsort(f2, (size_t)nu, sizeof *f2, u_qcmp);
    for (int64_t q = 0; q < nu; q++)
      for (int64_t z = 0; z < nu; z++)
        if (first[z] == f2[q]) pos[z] = q, c2[q] = cnt[z];
    for (int64_t j = 0; j < m; j++) inv[j] = pos[inv[j]];
    memcpy(first, f2, (size_t)nu * sizeof *first);
    memcpy(cnt, c2, (size_t)nu * sizeof *cnt);
    free(pos), free(c2), free(f2);
  }
  for (int64_t q = 0; q < nu; q++)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++)
        if ((o * nu + q) * inner + i < out[0].n) out[0].v[(o * nu + q) * inner + i] = in[0].v[(o * m + first[q]) * inner + i];
  for (int64_t q = 0; q < nu; q++) {
    if (nout > 1 && out[1].v && q < out[1].n) out[1].v[q] = (double)first[q];
    if (nout > 3 && out[3].v && q < out[3].n) out[3].v[q] = (double)cnt[q];
  }
  for (int64_t j = 0; j < m; j++)
    if (nout > 2 && out[2].v && j < out[2].n) out[2].v[j] = (double)inv[j];
  free(ord), free(first), free(cnt), free(inv);
  return GOPT_OK;
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------------ */

static double iou(const double *a, const double *b, int center) {
  double ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
  if (center) {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  } else {
    ay0 = fmin(a[0], a[2]), ay1 = fmax(a[0], a[2]), ax0 = fmin(a[1], a[3]), ax1 = fmax(a[1], a[3]);
    by0 = fmin(b[0], b[2]), by1 = fmax(b[0], b[2]), bx0 = fmin(b[1], b[3]), bx1 = fmax(b[1], b[3]);
  }
  double iw = fmin(ax1, bx1) - fmax(ax0, bx0), ih = fmin(ay1, by1) - fmax(ay0, by0);
  if (iw <= 0 || ih <= 0) return 0;
  double inter = iw * ih, uni = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter;
  return uni > 0 ? inter / uni : 0;
}

static const double *g_nms_s;
static int nms_cmp(const void *p, const void *q) {
  int64_t a = *(const int64_t *)p, b = *(const int64_t *)q;
  if (g_nms_s[a] != g_nms_s[b]) return g_nms_s[a] > g_nms_s[b] ? -1 : 1;
  return a < b ? -1 : a > b;
}

static int f_nms(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nout;
  int64_t B = in[1].d[0], C = in[1].d[1], Nb = in[1].d[2];
  int64_t maxo = nin > 2 && in[2].v && in[2].n ? (int64_t)in[2].v[0] : 0;
  double thr = nin > 3 && in[3].v && in[3].n ? in[3].v[0] : 0;
  int has_st = nin > 4 && in[4].v && in[4].n;
  double st = has_st ? in[4].v[0] : 0;
  int center = (int)gopt_node_get_int(G, NODE, "center_point_box", 0);
  int64_t *ix = malloc((size_t)(Nb + 1) * sizeof *ix), *sel = malloc((size_t)(Nb + 1) * sizeof *sel), no = 0;
  if (!ix || !sel) {
    free(ix), free(sel);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      g_nms_s = in[1].v + (b * C + c) * Nb;
      int64_t n = 0, ns = 0;
      for (int64_t i = 0; i < Nb; i++)
        if (!has_st || g_nms_s[i] > st) ix[n++] = i;
      qsort(ix, (size_t)n, sizeof *ix, nms_cmp);
      for (int64_t i = 0; i < n && ns < maxo; i++) {
        int keep = 1;
        for (int64_t j = 0; j < ns && keep; j++)
          if (iou(in[0].v + (b * Nb + ix[i]) * 4, in[0].v + (b * Nb + sel[j]) * 4, center) > thr) keep = 0;
        if (!keep) continue;
        sel[ns++] = ix[i];
        if (no < out[0].d[0]) {
          out[0].v[no * 3] = (double)b, out[0].v[no * 3 + 1] = (double)c, out[0].v[no * 3 + 2] = (double)ix[i];
        }
        no++;
      }
    }
  free(ix), free(sel);
  if (no != out[0].d[0])
    return ex_node_error(x, NODE, err, GOPT_ESHAPE, "%lld boxes selected, the output holds %lld", (long long)no,
                         (long long)out[0].d[0]);
  return GOPT_OK;
}

/* ---- training optimisers (ai.onnx.preview.training) --------------------------------------------------- */

static int f_optim(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)err;
  const char *t = optype(x, NODE);
  double R = in[0].v[0], T = in[1].v[0];
  double norm = gopt_node_get_float(G, NODE, "norm_coefficient", 0);
  int adam = strstr(t, "Adam") != NULL, ada = strstr(t, "Adagrad") != NULL;
  int groups = ada ? 3 : adam ? 4 : 3, nt = (nin - 2) / groups;
  (void)nout;
  for (int q = 0; q < nt; q++) {
    const rt *X = &in[2 + q], *Gr = &in[2 + nt + q], *H = &in[2 + 2 * nt + q];
    const rt *H2 = adam ? &in[2 + 3 * nt + q] : NULL;
    for (int64_t i = 0; i < X->n; i++) {
      double g = norm * X->v[i] + Gr->v[i];
      if (ada) {
        double decay = gopt_node_get_float(G, NODE, "decay_factor", 0), eps = gopt_node_get_float(G, NODE, "epsilon", 0);
        double r = R / (1 + T * decay), h = H->v[i] + g * g;
        out[q].v[i] = X->v[i] - r * g / (sqrt(h) + eps);
        out[nt + q].v[i] = h;
      } else if (adam) {
        double al = gopt_node_get_float(G, NODE, "alpha", 0.9), be = gopt_node_get_float(G, NODE, "beta", 0.999);
        double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-6);
        double post = gopt_node_get_float(G, NODE, "norm_coefficient_post", 0);
        double v = al * H->v[i] + (1 - al) * g, h = be * H2->v[i] + (1 - be) * g * g;
        double ra = T > 0 ? R * sqrt(1 - pow(be, T)) / (1 - pow(al, T)) : R;
        double xn = X->v[i] - ra * v / (sqrt(h) + eps);
        out[q].v[i] = (1 - post) * xn;
        out[nt + q].v[i] = v;
        out[2 * nt + q].v[i] = h;
      } else {
        double al = gopt_node_get_float(G, NODE, "alpha", 0), be = gopt_node_get_float(G, NODE, "beta", 0);
        int nest = !strcmp(gopt_node_get_string(G, NODE, "mode", "standard"), "nesterov");
        double v = al * H->v[i] + (T > 0 ? be : 1) * g;
        out[q].v[i] = X->v[i] - R * (nest ? g + al * v : v);
        out[nt + q].v[i] = v;
      }
    }
  }
  return GOPT_OK;
}

/* InstanceNormalization: X [N, C, spatial...]; each (n, c) plane normalised by its own mean and
 * (biased) variance, then scaled by scale[c] and shifted by B[c]. */
static int f_instnorm(gopt_exec *x, ex_kernel *k, rt *in, int nin, rt *out, int nout, gopt_error *err) {
  (void)nin, (void)nout;
  const rt *X = &in[0];
  if (X->rank < 2 || in[1].n != X->d[1] || in[2].n != X->d[1])
    return ex_node_error(x, NODE, err, GOPT_ESHAPE, "scale and B must have C = %lld elements",
                         (long long)(X->rank > 1 ? X->d[1] : 0));
  double eps = gopt_node_get_float(G, NODE, "epsilon", 1e-5);
  int64_t C = X->d[1], planes = X->d[0] * C, plane = planes > 0 ? X->n / planes : 0;
  for (int64_t p = 0; p < planes; p++) {
    const double *a = X->v + p * plane;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < plane; i++) mean += a[i];
    mean /= (double)(plane ? plane : 1);
    for (int64_t i = 0; i < plane; i++) var += (a[i] - mean) * (a[i] - mean);
    var /= (double)(plane ? plane : 1);
    double sc = in[1].v[p % C] / sqrt(var + eps), b = in[2].v[p % C];
    for (int64_t i = 0; i < plane; i++) out[0].v[p * plane + i] = (a[i] - mean) * sc + b;
  }
  return GOPT_OK;
}

const ref_entry ex_ref_more_table[] = {
    {"InstanceNormalization", f_instnorm, NULL},
    {"HannWindow", f_window, NULL}, {"HammingWindow", f_window, NULL}, {"BlackmanWindow", f_window, NULL},
    {"DFT", f_dft, NULL}, {"STFT", f_stft, NULL}, {"RoiAlign", f_roialign, NULL},
    {"TfIdfVectorizer", f_tfidf, NULL}, {"MelWeightMatrix", f_melweight, NULL}, {"BatchNormalization", f_bn_train, claim_bn_train}, {"Unique", f_unique, NULL},
    {"NonMaxSuppression", f_nms, NULL}, {"ai.onnx.preview.training::Adagrad", f_optim, NULL},
    {"ai.onnx.preview.training::Momentum", f_optim, NULL}, {"ai.onnx.preview.training::Adam", f_optim, NULL},
    {NULL, NULL, NULL},
};
