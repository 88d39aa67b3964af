/* bench_nn.c: forward+backward time of a GraphSAGE(2 layers, hidden 128) + segment-recurrent
 * attention (2 blocks, 4 heads, segment 128, FFN 256) model on random graphs, plus OpenBLAS's own
 * sgemm GFLOP/s measured in the same run for reference.
 *
 *   bench_nn [--nodes N] [--feat F] [--threads T] [--reps R] [--dump FILE]
 *
 * --dump writes the graph and inputs (see bench_nn_torch.py) so PyTorch times the same model on the
 * same data. Prints one "RESULT ..." line per measurement (medians over R reps after 1 warm-up). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gopt/nn.h"

#define HID 128
#define HEADS 4
#define DFF 256
#define SEG 128

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmpd); return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]); }

/* Model FLOPs of one forward pass (matmuls + attention products); fwd+bwd counted as 3x. */
static double model_flops(double n, double f) {
  double d = HID, fl = 0;
  fl += 2 * n * (2 * f) * d + 2 * n * (2 * d) * d;             /* SAGE linears */
  for (int b = 0; b < 2; b++) {
    fl += 6 * 2 * n * d * d;                                  /* q,k,v,o + memory k,v */
    fl += 2 * 2 * n * (2.0 * SEG) * d;                        /* QK^T and PV, keys = memory + own */
    fl += 2 * 2 * n * d * DFF;                                /* FFN */
  }
  fl += 2 * n * d;                                            /* output */
  return 3 * fl;
}

int main(int argc, char **argv) {
  int64_t n = 10000, f = 32;
  int threads = 2, reps = 5;
  const char *dump = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--nodes") && i + 1 < argc) n = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--feat") && i + 1 < argc) f = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else { fprintf(stderr, "usage: %s [--nodes N] [--feat F] [--threads T] [--reps R] [--dump FILE]\n", argv[0]); return 2; }
  }
  if (reps < 1) reps = 1;
  if (reps > 50) reps = 50;
  /* random graph: 3n edges (average in-degree 3), CSR by destination */
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, 2024);
  int64_t E = 3 * n;
  int32_t *dst = malloc((size_t)E * 4), *src = malloc((size_t)E * 4), *rp = calloc((size_t)n + 1, 4), *col = malloc((size_t)E * 4);
  float *x = malloc((size_t)(n * f) * 4), *y = malloc((size_t)n * 4);
  for (int64_t e = 0; e < E; e++) { dst[e] = (int32_t)(gopt_nn_rng_u64(&r) % (uint64_t)n); src[e] = (int32_t)(gopt_nn_rng_u64(&r) % (uint64_t)n); }
  for (int64_t e = 0; e < E; e++) rp[dst[e] + 1]++;
  for (int64_t i = 0; i < n; i++) rp[i + 1] += rp[i];
  int32_t *fill = malloc((size_t)n * 4);
  memcpy(fill, rp, (size_t)n * 4);
  for (int64_t e = 0; e < E; e++) col[fill[dst[e]]++] = src[e];
  for (int64_t i = 0; i < n * f; i++) x[i] = (float)gopt_nn_rng_normal(&r);
  for (int64_t i = 0; i < n; i++) y[i] = (float)gopt_nn_rng_normal(&r);
  if (dump) {
    FILE *fp = fopen(dump, "wb");
    if (!fp) { fprintf(stderr, "%s: cannot write\n", dump); return 1; }
    int64_t hdr[2] = {n, f};
    fwrite(hdr, 8, 2, fp);
    fwrite(rp, 4, (size_t)n + 1, fp);
    fwrite(col, 4, (size_t)E, fp);
    fwrite(x, 4, (size_t)(n * f), fp);
    fwrite(y, 4, (size_t)n, fp);
    fclose(fp);
  }
  gopt_error err = {0};
  gopt_nn_csr g;
  if (gopt_nn_csr_init(&g, n, n, rp, col, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }

  /* reference: OpenBLAS sgemm alone, with the same thread count */
  openblas_set_num_threads(threads);
  const int64_t gs[2][3] = {{2048, 2048, 2048}, {n, HID, HID}};
  for (int k = 0; k < 2; k++) {
    int64_t M = gs[k][0], N = gs[k][1], K = gs[k][2];
    float *A = calloc((size_t)(M * K), 4), *B = calloc((size_t)(K * N), 4), *C = calloc((size_t)(M * N), 4);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)(i % 5) * 0.1f;
    double t[50];
    int rr = k == 0 ? 5 : 20;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, A, (int)K, B, (int)N, 0, C, (int)N);
    for (int i = 0; i < rr; i++) {
      double t0 = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, A, (int)K, B, (int)N, 0, C, (int)N);
      t[i] = now() - t0;
    }
    double med = median(t, rr);
    printf("RESULT impl=openblas_sgemm shape=%lldx%lldx%lld threads=%d median_ms=%.3f gflops=%.1f\n",
           (long long)M, (long long)N, (long long)K, threads, med * 1e3, 2.0 * M * N * K / med / 1e9);
    free(A); free(B); free(C);
  }

  gopt_nn_set_threads(threads);
  gopt_nn_params *p = gopt_nn_params_new();
  gopt_nn_sage s0, s1;
  gopt_nn_seg_block b0, b1;
  gopt_nn_linear out;
  gopt_nn_sage_init(&s0, p, "sage0", f, HID, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM);
  gopt_nn_sage_init(&s1, p, "sage1", HID, HID, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM);
  gopt_nn_seg_block_init(&b0, p, "blk0", HID, HEADS, DFF, SEG);
  gopt_nn_seg_block_init(&b1, p, "blk1", HID, HEADS, DFF, SEG);
  gopt_nn_linear_init(&out, p, "out", HID, 1, 1);
  if (gopt_nn_params_finalize(p, 1, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
  gopt_nn_ctx *ctx = gopt_nn_ctx_new((size_t)1 << 26);
  double t[51], tf[51], loss = 0;
  for (int rep = 0; rep <= reps; rep++) {
    double t0 = now();
    gopt_nn_ctx_reset(ctx);
    int64_t xs[2] = {n, f}, ys[2] = {n, 1};
    gopt_nn_tensor *xt = gopt_nn_from(ctx, 2, xs, x), *yt = gopt_nn_from(ctx, 2, ys, y);
    gopt_nn_tensor *h = gopt_nn_sage_forward(ctx, &s0, xt, &g);
    h = gopt_nn_sage_forward(ctx, &s1, h, &g);
    h = gopt_nn_seg_block_forward(ctx, &b0, h, 0, NULL);
    h = gopt_nn_seg_block_forward(ctx, &b1, h, 0, NULL);
    gopt_nn_tensor *d = gopt_nn_sub(ctx, gopt_nn_linear_forward(ctx, &out, h), yt);
    gopt_nn_tensor *l = gopt_nn_mean(ctx, gopt_nn_mul(ctx, d, d));
    double t1 = now();
    gopt_nn_params_zero_grad(p);
    if (gopt_nn_backward(ctx, l, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double t2 = now();
    loss = l->data[0];
    if (rep > 0) { t[rep - 1] = t2 - t0; tf[rep - 1] = t1 - t0; }
  }
  double med = median(t, reps), medf = median(tf, reps), fl = model_flops((double)n, (double)f);
  printf("RESULT impl=gopt nodes=%lld threads=%d median_ms=%.2f fwd_ms=%.2f gflops=%.1f loss=%.5f arena_mb=%.0f\n",
         (long long)n, threads, med * 1e3, medf * 1e3, fl / med / 1e9, loss,
         (double)gopt_nn_ctx_bytes_used(ctx) / 1048576.0);
  gopt_nn_ctx_free(ctx);
  gopt_nn_params_free(p);
  gopt_nn_csr_free(&g);
  free(dst); free(src); free(rp); free(col); free(x); free(y); free(fill);
  return 0;
}
