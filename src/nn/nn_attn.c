/* nn_attn.c: fused segment-recurrent multi-head attention kernels (forward, backward).
 * q,k,v,kmem,vmem: [T, H*dh] row-major; head h owns columns [h*dh, (h+1)*dh). Work is split into
 * (segment, head) tasks; each task writes only its own rows/columns of every output and gradient,
 * so tasks run in parallel without atomics. Scores are recomputed in backward from the saved
 * log-sum-exp (memory O(T*H) instead of O(T*seg_len*H)). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "nn/nn_internal.h"
#include "nn/nn_kernels.h"

typedef struct attn_geo {
  int64_t T, HD, dh, L, nseg;
  int H, causal;
  float scale;
  const uint8_t *kv;
} attn_geo;

static attn_geo geo_of(const gopt_nn_tensor *out) {
  attn_geo g;
  g.T = out->shape[0];
  g.HD = out->shape[1];
  g.H = (int)out->ip[0];
  g.dh = g.HD / g.H;
  g.L = out->ip[1];
  g.nseg = g.T ? (g.T + g.L - 1) / g.L : 0;
  g.causal = (int)out->ip[2];
  g.scale = 1.0f / sqrtf((float)g.dh);
  g.kv = (const uint8_t *)out->aux;
  return g;
}

/* Scaled scores S[Lq, Lm+Lq] for task (s, h), masked entries set to -inf. */
static void scores(const attn_geo *g, const gopt_nn_tensor *q, const gopt_nn_tensor *k,
                   const gopt_nn_tensor *kmem, int64_t s, int h, int64_t *pLq, int64_t *pLm, float *S) {
  int64_t s0 = s * g->L, Lq = g->T - s0 < g->L ? g->T - s0 : g->L;
  int64_t Lm = (kmem && s > 0) ? g->L : 0, m0 = s0 - Lm, W = Lm + Lq;
  const float *Q = q->data + s0 * g->HD + h * g->dh;
  if (Lm)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Lq, (int)Lm, (int)g->dh, g->scale, Q,
                (int)g->HD, kmem->data + m0 * g->HD + h * g->dh, (int)g->HD, 0.0f, S, (int)W);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Lq, (int)Lq, (int)g->dh, g->scale, Q,
              (int)g->HD, k->data + s0 * g->HD + h * g->dh, (int)g->HD, 0.0f, S + Lm, (int)W);
  for (int64_t i = 0; i < Lq; i++) {
    float *row = S + i * W;
    if (g->kv)
      for (int64_t j = 0; j < Lm; j++)
        if (!g->kv[m0 + j]) row[j] = -INFINITY;
    for (int64_t j = 0; j < Lq; j++)
      if ((g->causal && j > i) || (g->kv && !g->kv[s0 + j])) row[Lm + j] = -INFINITY;
  }
  *pLq = Lq;
  *pLm = Lm;
}

void nn_attention_forward(gopt_nn_tensor *out) {
  attn_geo g = geo_of(out);
  gopt_nn_tensor *q = out->src[0], *k = out->src[1], *v = out->src[2], *km = out->src[3], *vm = out->src[4];
  nn_attn_state *st = out->saved;
  int64_t ntask = g.nseg * g.H;
#pragma omp parallel for num_threads(st->nt) schedule(static) if (ntask > 1 && g.T * g.HD > NN_PAR_MIN)
  for (int64_t task = 0; task < ntask; task++) {
    int64_t s = task / g.H;
    int h = (int)(task % g.H);
    float *S = st->scratch + (int64_t)omp_get_thread_num() * st->per_thread;
    int64_t Lq, Lm;
    scores(&g, q, k, km, s, h, &Lq, &Lm, S);
    int64_t s0 = s * g.L, W = Lm + Lq;
    for (int64_t i = 0; i < Lq; i++) {
      float *row = S + i * W, mx = -INFINITY;
      for (int64_t j = 0; j < W; j++) mx = row[j] > mx ? row[j] : mx;
      if (mx == -INFINITY) {
        for (int64_t j = 0; j < W; j++) row[j] = 0.0f;
        st->lse[h * g.T + s0 + i] = -INFINITY;
        continue;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < W; j++) {
        float e = row[j] == -INFINITY ? 0.0f : expf(row[j] - mx);
        row[j] = e;
        sum += e;
      }
      float inv = 1.0f / sum;
      for (int64_t j = 0; j < W; j++) row[j] *= inv;
      st->lse[h * g.T + s0 + i] = mx + logf(sum);
    }
    float *O = out->data + s0 * g.HD + h * g.dh;
    if (Lm)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Lq, (int)g.dh, (int)Lm, 1.0f, S,
                  (int)W, vm->data + (s0 - Lm) * g.HD + h * g.dh, (int)g.HD, 0.0f, O, (int)g.HD);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Lq, (int)g.dh, (int)Lq, 1.0f, S + Lm,
                (int)W, v->data + s0 * g.HD + h * g.dh, (int)g.HD, Lm ? 1.0f : 0.0f, O, (int)g.HD);
  }
}

void nn_attention_backward(gopt_nn_tensor *out) {
  attn_geo g = geo_of(out);
  gopt_nn_tensor *q = out->src[0], *k = out->src[1], *v = out->src[2], *km = out->src[3], *vm = out->src[4];
  nn_attn_state *st = out->saved;
  int64_t ntask = g.nseg * g.H, HD = g.HD, dh = g.dh;
#pragma omp parallel for num_threads(st->nt) schedule(static) if (ntask > 1 && g.T * g.HD > NN_PAR_MIN)
  for (int64_t task = 0; task < ntask; task++) {
    int64_t s = task / g.H;
    int h = (int)(task % g.H);
    float *S = st->scratch + (int64_t)omp_get_thread_num() * st->per_thread;
    int64_t Lq, Lm;
    scores(&g, q, k, km, s, h, &Lq, &Lm, S);
    int64_t s0 = s * g.L, m0 = s0 - Lm, W = Lm + Lq;
    float *dP = S + g.L * st->lk, *Drow = dP + g.L * st->lk;
    const float *dO = out->grad + s0 * HD + h * dh, *O = out->data + s0 * HD + h * dh;
    for (int64_t i = 0; i < Lq; i++) {
      float d = 0.0f;
      for (int64_t c = 0; c < dh; c++) d += dO[i * HD + c] * O[i * HD + c];
      Drow[i] = d;
      float l = st->lse[h * g.T + s0 + i];
      float *row = S + i * W;
      for (int64_t j = 0; j < W; j++)
        row[j] = (l == -INFINITY || row[j] == -INFINITY) ? 0.0f : expf(row[j] - l);
    }
    /* dP = dO V^T */
    if (Lm)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Lq, (int)Lm, (int)dh, 1.0f, dO, (int)HD,
                  vm->data + m0 * HD + h * dh, (int)HD, 0.0f, dP, (int)W);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Lq, (int)Lq, (int)dh, 1.0f, dO, (int)HD,
                v->data + s0 * HD + h * dh, (int)HD, 0.0f, dP + Lm, (int)W);
    /* dV += P^T dO */
    if (Lm && vm->grad)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Lm, (int)dh, (int)Lq, 1.0f, S, (int)W,
                  dO, (int)HD, 1.0f, vm->grad + m0 * HD + h * dh, (int)HD);
    if (v->grad)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Lq, (int)dh, (int)Lq, 1.0f, S + Lm, (int)W,
                  dO, (int)HD, 1.0f, v->grad + s0 * HD + h * dh, (int)HD);
    /* dS = P * (dP - D) (stored in dP) */
    for (int64_t i = 0; i < Lq; i++)
      for (int64_t j = 0; j < W; j++) dP[i * W + j] = S[i * W + j] * (dP[i * W + j] - Drow[i]);
    const float *Q = q->data + s0 * HD + h * dh;
    if (q->grad) {
      float *dQ = q->grad + s0 * HD + h * dh;
      if (Lm)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Lq, (int)dh, (int)Lm, g.scale, dP,
                    (int)W, km->data + m0 * HD + h * dh, (int)HD, 1.0f, dQ, (int)HD);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Lq, (int)dh, (int)Lq, g.scale, dP + Lm,
                  (int)W, k->data + s0 * HD + h * dh, (int)HD, 1.0f, dQ, (int)HD);
    }
    if (Lm && km->grad)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Lm, (int)dh, (int)Lq, g.scale, dP, (int)W,
                  Q, (int)HD, 1.0f, km->grad + m0 * HD + h * dh, (int)HD);
    if (k->grad)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Lq, (int)dh, (int)Lq, g.scale, dP + Lm,
                  (int)W, Q, (int)HD, 1.0f, k->grad + s0 * HD + h * dh, (int)HD);
  }
}
