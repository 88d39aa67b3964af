/* gopt/gpu_cost.h: the measured-GPU kernel cost model (docs/SIMULATOR.md, "GPU cost model").
 *
 * A node's GPU time is linear in a few per-kernel features, grouped by GPU kernel kind (dense /
 * grouped / depthwise convolution, GEMM, batched matmul, elementwise, normalisation / reduction,
 * pooling, data movement, recurrent (forward and backward: both sweep the sequence), the
 * convolutions' backward kinds, optimizer updates):
 *
 *   t(node) = sum_j coef[j] * feature_j(node)
 *
 * with, per kind, five features: the kernel count (its floor: launch inside a CUDA graph plus the
 * smallest runtime of that kind), FLOPs, "wave K-steps" (GEMM-shaped kernels: ceil(tiles / SMs)
 * * K, the time of a wave of 128x128 output tiles marching over K — what makes a small or skinny
 * matmul or convolution slower than its FLOPs say; for recurrent kinds the sequential time steps)
 * and bytes read + written. The coefficients are fitted to measurements (gopt calibrate --gpu) by
 * non-negative least squares on relative errors; the H100 preset ships them, V100 and A100 scale
 * them by their data-sheet peaks (extrapolated). */
#ifndef GOPT_GPU_COST_H
#define GOPT_GPU_COST_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"
#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPU kernel kinds. */
enum {
  GOPT_GK_CONV, GOPT_GK_CONV_GROUPED, GOPT_GK_CONV_DW, GOPT_GK_GEMM, GOPT_GK_BMM, GOPT_GK_ELTWISE,
  GOPT_GK_NORM, GOPT_GK_POOL, GOPT_GK_MOVE, GOPT_GK_RNN, GOPT_GK_CONV_BWD, GOPT_GK_CONV_GROUPED_BWD,
  GOPT_GK_CONV_DW_BWD, GOPT_GK_UPDATE, GOPT_GK_EPILOGUE,
  GOPT_GK_EPILOGUE_BWD, GOPT_GK_COUNT
};
/* Features per kind: kernel count, FLOPs, wave K-steps (recurrent: time steps; BatchNorm
 * backward and a convolution bias's gradient: the per-channel reduction length times
 * ceil(channels / SMs), as one block reduces one channel), bytes, and "alternative" FLOPs:
 * those of dense 3x3 stride-1 convolutions (cuDNN runs them as Winograd transforms: counted
 * directly, they are cheaper, above all in the backward pass) and of GEMMs with a transposed
 * operand (Gemm transA/transB: PyTorch's Linear, x W^T), which cuBLAS runs with other kernels. */
enum { GOPT_GF_N, GOPT_GF_FLOPS, GOPT_GF_WAVES, GOPT_GF_BYTES, GOPT_GF_FLOPS_ALT, GOPT_GF_PER_KIND };
#define GOPT_GPU_NCOEF (GOPT_GK_COUNT * GOPT_GF_PER_KIND)
/* GPU geometry the wave feature assumes: output tile edge and SM count (H100 SXM: 132). */
#define GOPT_GPU_TILE 128
#define GOPT_GPU_SMS 132

/* Name of kind k ("conv", "conv_grouped", ...) and of feature f ("n", "flops", "waves",
 * "bytes", "flops_alt"); "" when out of range. Coefficient j is "<kind>.<feature>" with
 * j = k * GOPT_GF_PER_KIND + f. */
const char *gopt_gpu_kind_name(int k);
const char *gopt_gpu_feature_name(int f);
/* Index of the coefficient named "<kind>.<feature>", or -1. */
int gopt_gpu_coef_index(const char *name);

/* Features of node n of g (shapes inferred) added into phi[GOPT_GPU_NCOEF] (not cleared). Nodes
 * that launch no GPU kernel (shape ops, Identity, Dropout, nodes whose inputs are all constants)
 * add nothing. Returns the kind, or -1 when the node adds nothing. `dyn` is what
 * gopt_gpu_dynamic_tensors computed for g (NULL: every tensor counts as dynamic). */
int gopt_gpu_node_features(const gopt_graph *g, int32_t n, const uint8_t *dyn, double *phi);

/* dyn[t] = 1 when tensor t depends on a graph input (a GPU runtime computes the others once,
 * ahead of the step). Returns a malloc'd array of g->tensors.n entries, NULL on out of memory. */
uint8_t *gopt_gpu_dynamic_tensors(const gopt_graph *g);

/* Time of a feature vector under coefficients coef: sum coef[j] * phi[j]. */
double gopt_gpu_time(const double *coef, const double *phi);

/* Non-negative least squares: minimises ||A x - b|| subject to x >= 0 (Lawson-Hanson active set,
 * the inner least squares by LAPACK dgels). A is m x n, row-major. Returns 0, or GOPT_ENOMEM /
 * GOPT_EINVAL (no convergence in 3n iterations). */
int gopt_nnls(const double *A, const double *b, int m, int n, double *x, gopt_error *err);

/* ---- measurements and the fit (src/cost/gpu_fit.c; format: docs/SIMULATOR.md) ---- */

/* What a measured row is. */
enum {
  GOPT_GPU_ROW_MICRO,   /* one micro-benchmark op */
  GOPT_GPU_ROW_FWD,     /* one layer, forward */
  GOPT_GPU_ROW_FWDBWD,  /* one layer, forward + backward */
  GOPT_GPU_ROW_B1,      /* whole model, batch 1 (CUDA-graph replay) */
  GOPT_GPU_ROW_B32,     /* whole model, batch 32, sum of kernel times */
  GOPT_GPU_ROW_TRAIN,   /* whole model, batch-32 training step, sum of kernel times */
  GOPT_GPU_ROW_NWHAT
};

typedef struct gopt_gpu_row {
  double phi[GOPT_GPU_NCOEF];  /* features of what ran */
  double seconds;              /* measured GPU time */
  int model;                   /* index in gopt_gpu_data.models, -1 for micro-benchmarks */
  int what;                    /* GOPT_GPU_ROW_* */
  int kind;                    /* kind of the main kernel (layers, micros), -1 for models */
  int count;                   /* how often the model runs this layer (1 otherwise) */
  int batch;                   /* layer rows: 1 (layers_b1) or 32 (layers_b32) */
  int folded_bn;               /* model rows: BatchNorm modules the graph folded away, added */
  char label[48];              /* op class for reports ("Conv2d depthwise", "LSTM", ...) */
} gopt_gpu_row;

typedef struct gopt_gpu_data {
  gopt_gpu_row *rows;
  size_t n, cap;
  char (*models)[64];          /* model names, in file order */
  int n_models;
  int *has_model_rows;         /* per model: 1 when its ONNX was found and its totals are rows */
  char device[96];             /* the file's "device" */
  size_t skipped;              /* layer rows with no kernel or no rule (Dropout, Flatten...) */
} gopt_gpu_data;

/* Loads a GPU measurements file (the format tools/gpu_profile.py writes) into rows: every micro
 * entry, every layer row's fwd_gpu_ms (and fwdbwd_gpu_ms), and, for each model whose ONNX file
 * model_dir/NAME.onnx exists (model_dir NULL: none), its infer_b1_graph_ms, infer_b32_kernel_ms
 * and train_b32_kernel_ms against the features of that graph at batch 1 / 32 (a fixed-batch-1
 * model is re-batched) and of its training step. Errors: one line naming the file and the entry
 * (GOPT_EIO, GOPT_EPARSE: malformed, truncated, or not a measurements file). */
int gopt_gpu_data_load(const char *path, const char *model_dir, gopt_gpu_data **out,
                       gopt_error *err);
void gopt_gpu_data_free(gopt_gpu_data *d); /* accepts NULL */

/* Fits coef[GOPT_GPU_NCOEF] >= 0 to every row except those of model exclude (-1: none): weighted
 * non-negative least squares on relative errors, a whole-model row weighing model_weight times a
 * layer or micro row. */
int gopt_gpu_fit(const gopt_gpu_data *d, int exclude, double model_weight, double *coef,
                 gopt_error *err);

/* Features of the ONNX model at path at the given batch (re-batching a fixed-batch-1 model when
 * needed), as a training step when training; the whole graph's nodes summed. */
int gopt_gpu_model_features(const char *path, int batch, int training, double *phi,
                            gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
