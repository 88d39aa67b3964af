/* gopt/nn.h: the neural-network engine shared by gopt's learned optimizers.
 *
 * fp32 tensors, reverse-mode autograd on a tape, graph layers (GraphSAGE, segment-recurrent
 * attention), policy heads (categorical, Beta), optimizers (SGD, Adam/AdamW) and checkpoints.
 *
 * Memory model (ggml-like):
 *   - a gopt_nn_params owns every trainable parameter: all values live in ONE allocation and all
 *     gradients in the second half of it (llm.c style); layers declare parameters, then
 *     gopt_nn_params_finalize() allocates and initialises them;
 *   - a gopt_nn_ctx is an arena for one forward/backward pass: every op constructor allocates its
 *     output in the arena and records itself on the ctx's tape; gopt_nn_backward() walks the tape
 *     backwards (one switch over op kinds) and accumulates gradients (+=) into parameter grads;
 *     gopt_nn_ctx_reset() frees the whole pass at once and keeps the memory for the next one.
 *   - op constructors never fail loudly: on a shape error or allocation failure they return NULL,
 *     remember the first error in the ctx, and every later op given a NULL input returns NULL;
 *     check gopt_nn_ctx_status() once after building the graph.
 *
 * Shapes are row-major; shape[0] is the outermost dimension. "Last axis" ops work on shape[ndim-1].
 * Threads: heavy ops use OpenMP with static schedules and no atomics; OpenBLAS is kept at one thread
 * and large GEMMs are split into blocks by gopt itself, so a run with the same seed and the same
 * thread count is bitwise reproducible.
 */
#ifndef GOPT_NN_H
#define GOPT_NN_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GOPT_NN_MAX_DIMS 4

typedef enum gopt_nn_op {
  GOPT_NN_OP_LEAF = 0, GOPT_NN_OP_MATMUL, GOPT_NN_OP_ADD, GOPT_NN_OP_SUB, GOPT_NN_OP_MUL,
  GOPT_NN_OP_SCALE, GOPT_NN_OP_ADD_SCALAR, GOPT_NN_OP_RELU, GOPT_NN_OP_GELU, GOPT_NN_OP_GELU_TANH,
  GOPT_NN_OP_TANH, GOPT_NN_OP_SIGMOID, GOPT_NN_OP_EXP, GOPT_NN_OP_LOG, GOPT_NN_OP_SOFTPLUS,
  GOPT_NN_OP_CLAMP, GOPT_NN_OP_MINIMUM, GOPT_NN_OP_SOFTMAX, GOPT_NN_OP_LOG_SOFTMAX,
  GOPT_NN_OP_LAYERNORM, GOPT_NN_OP_L2NORM, GOPT_NN_OP_CONCAT, GOPT_NN_OP_SLICE, GOPT_NN_OP_RESHAPE,
  GOPT_NN_OP_SUM, GOPT_NN_OP_MEAN, GOPT_NN_OP_SUM_LAST, GOPT_NN_OP_GATHER_ROWS,
  GOPT_NN_OP_SCATTER_ADD, GOPT_NN_OP_PICK, GOPT_NN_OP_SEG_SUM, GOPT_NN_OP_SEG_MEAN,
  GOPT_NN_OP_SEG_MAX, GOPT_NN_OP_DROPOUT, GOPT_NN_OP_DETACH, GOPT_NN_OP_ATTENTION,
  GOPT_NN_OP_BETA_LOGPROB, GOPT_NN_OP_BETA_ENTROPY, GOPT_NN_OP_LINEAR, GOPT_NN_OP_COUNT
} gopt_nn_op;

typedef struct gopt_nn_tensor gopt_nn_tensor;
struct gopt_nn_tensor {
  float *data;               /* n floats, row-major */
  float *grad;               /* n floats: parameters always, other tensors after backward; else NULL */
  int64_t shape[GOPT_NN_MAX_DIMS];
  int ndim;
  int64_t n;                 /* product of shape */
  int op;                    /* gopt_nn_op that produced it */
  int requires_grad;         /* 1 when a gradient flows into it */
  gopt_nn_tensor *src[5];    /* op inputs (NULL when unused) */
  int64_t ip[6];             /* op integer parameters */
  float fp[4];               /* op float parameters */
  const int32_t *idx;        /* op index argument (copied into the ctx arena) */
  const void *aux;           /* op extra argument (e.g. the CSR of a segment op) */
  void *saved;               /* op state saved for backward (ctx arena) */
  const char *name;          /* parameters: their name; otherwise NULL */
};

/* ---- threads ---------------------------------------------------------------------------- */
/* Sets the number of OpenMP threads heavy ops use (n < 1 means 1). OpenBLAS is set to 1 thread. */
void gopt_nn_set_threads(int n);
int gopt_nn_get_threads(void);

/* ---- random numbers (xoshiro256**, seeded through splitmix64) ------------------------------ */
typedef struct gopt_nn_rng { uint64_t s[4]; } gopt_nn_rng;
void gopt_nn_rng_seed(gopt_nn_rng *r, uint64_t seed);
uint64_t gopt_nn_rng_u64(gopt_nn_rng *r);
double gopt_nn_rng_uniform(gopt_nn_rng *r);          /* [0, 1) with 53 random bits */
double gopt_nn_rng_normal(gopt_nn_rng *r);           /* standard normal (Box-Muller, 2 draws) */
double gopt_nn_rng_gamma(gopt_nn_rng *r, double shape); /* Gamma(shape, 1), Marsaglia-Tsang */
double gopt_nn_rng_beta(gopt_nn_rng *r, double a, double b); /* X/(X+Y), X~G(a), Y~G(b) */

/* ---- special functions (double precision; x > 0) ---------------------------------------- */
double gopt_nn_lgamma(double x);
double gopt_nn_digamma(double x);
double gopt_nn_trigamma(double x);

/* ---- parameters ------------------------------------------------------------------------- */
typedef enum gopt_nn_init {
  GOPT_NN_INIT_ZEROS = 0, GOPT_NN_INIT_ONES, GOPT_NN_INIT_UNIFORM, /* U(-scale, scale) */
  GOPT_NN_INIT_NORMAL /* N(0, scale^2) */
} gopt_nn_init;

typedef struct gopt_nn_params gopt_nn_params;
gopt_nn_params *gopt_nn_params_new(void);
void gopt_nn_params_free(gopt_nn_params *p);
/* Declares a parameter (name copied; must be unique). Returns a tensor whose data/grad pointers are
 * valid only after gopt_nn_params_finalize(); NULL after finalize, on a duplicate name or bad
 * shape (the error is reported by finalize). */
gopt_nn_tensor *gopt_nn_param(gopt_nn_params *p, const char *name, int ndim, const int64_t *shape,
                              gopt_nn_init init, float scale);
/* Allocates every declared parameter in one block (values then gradients, zeroed) and initialises
 * the values from a RNG seeded with seed, in declaration order. */
int gopt_nn_params_finalize(gopt_nn_params *p, uint64_t seed, gopt_error *err);
int gopt_nn_params_count(const gopt_nn_params *p);
gopt_nn_tensor *gopt_nn_params_get(const gopt_nn_params *p, int i);
gopt_nn_tensor *gopt_nn_params_find(const gopt_nn_params *p, const char *name);
size_t gopt_nn_params_total(const gopt_nn_params *p);   /* number of scalar parameters */
float *gopt_nn_params_data(gopt_nn_params *p);          /* total floats, all values */
float *gopt_nn_params_grad(gopt_nn_params *p);          /* total floats, all gradients */
void gopt_nn_params_zero_grad(gopt_nn_params *p);

/* ---- context (arena + tape) ------------------------------------------------------------- */
typedef struct gopt_nn_ctx gopt_nn_ctx;
gopt_nn_ctx *gopt_nn_ctx_new(size_t bytes_hint);
void gopt_nn_ctx_free(gopt_nn_ctx *ctx);
/* Forgets every tensor of the pass; keeps (and consolidates) the memory for the next pass. */
void gopt_nn_ctx_reset(gopt_nn_ctx *ctx);
/* 0 when every op so far succeeded; otherwise the first error (code and message into err). */
int gopt_nn_ctx_status(const gopt_nn_ctx *ctx, gopt_error *err);
size_t gopt_nn_ctx_bytes_used(const gopt_nn_ctx *ctx);
/* Training flag read by layers (dropout is the identity when 0). Default 1. */
void gopt_nn_ctx_set_training(gopt_nn_ctx *ctx, int training);
int gopt_nn_ctx_training(const gopt_nn_ctx *ctx);

gopt_nn_tensor *gopt_nn_new(gopt_nn_ctx *ctx, int ndim, const int64_t *shape);   /* zeros */
gopt_nn_tensor *gopt_nn_new1(gopt_nn_ctx *ctx, int64_t n0);
gopt_nn_tensor *gopt_nn_new2(gopt_nn_ctx *ctx, int64_t n0, int64_t n1);
/* Copies data (n floats) into a new leaf. */
gopt_nn_tensor *gopt_nn_from(gopt_nn_ctx *ctx, int ndim, const int64_t *shape, const float *data);
/* Marks a leaf as needing a gradient (filled by backward). */
void gopt_nn_set_requires_grad(gopt_nn_tensor *t, int on);

/* Runs backward from a scalar (n == 1) tensor: seeds d loss = 1 and accumulates gradients into every
 * requires_grad tensor. Parameter gradients accumulate (+=) across calls (call
 * gopt_nn_params_zero_grad between steps); gradients of the pass's own tensors are recomputed. */
int gopt_nn_backward(gopt_nn_ctx *ctx, gopt_nn_tensor *loss, gopt_error *err);

/* ---- ops (all return NULL on error, see above) ------------------------------------------- */
/* matmul: op(a)[M,K] @ op(b)[K,N] -> [M,N]; ta/tb transpose a/b (2-D only). OpenBLAS sgemm. */
gopt_nn_tensor *gopt_nn_matmul(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b, int ta, int tb);
/* fused linear: x[N,in] @ w[out,in]^T + b[out] (b may be NULL) -> [N,out] */
gopt_nn_tensor *gopt_nn_linear_op(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_tensor *w, gopt_nn_tensor *b);
/* elementwise with numpy broadcasting (output has the broadcast shape). */
gopt_nn_tensor *gopt_nn_add(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b);
gopt_nn_tensor *gopt_nn_sub(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b);
gopt_nn_tensor *gopt_nn_mul(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b);
/* torch.minimum semantics, ties split the gradient in halves like PyTorch. */
gopt_nn_tensor *gopt_nn_minimum(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b);
gopt_nn_tensor *gopt_nn_scale(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float s);
gopt_nn_tensor *gopt_nn_add_scalar(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float c);
gopt_nn_tensor *gopt_nn_relu(gopt_nn_ctx *ctx, gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_gelu(gopt_nn_ctx *ctx, gopt_nn_tensor *x);      /* exact: x*Phi(x) (erf) */
gopt_nn_tensor *gopt_nn_gelu_tanh(gopt_nn_ctx *ctx, gopt_nn_tensor *x); /* approximate='tanh' */
gopt_nn_tensor *gopt_nn_tanh(gopt_nn_ctx *ctx, gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_sigmoid(gopt_nn_ctx *ctx, gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_exp(gopt_nn_ctx *ctx, gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_log(gopt_nn_ctx *ctx, gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_softplus(gopt_nn_ctx *ctx, gopt_nn_tensor *x);  /* log(1+e^x), threshold 20 */
/* clamp to [lo, hi]; gradient 1 where lo <= x <= hi (as torch.clamp). */
gopt_nn_tensor *gopt_nn_clamp(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float lo, float hi);
gopt_nn_tensor *gopt_nn_softmax(gopt_nn_ctx *ctx, gopt_nn_tensor *x);     /* over last axis */
gopt_nn_tensor *gopt_nn_log_softmax(gopt_nn_ctx *ctx, gopt_nn_tensor *x); /* over last axis */
/* layer norm over the last axis (biased variance, eps inside sqrt); gamma/beta [D] or NULL. */
gopt_nn_tensor *gopt_nn_layernorm(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_tensor *gamma,
                                  gopt_nn_tensor *beta, float eps);
/* x / max(||x||_2, eps) over the last axis (torch.nn.functional.normalize). */
gopt_nn_tensor *gopt_nn_l2norm(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float eps);
gopt_nn_tensor *gopt_nn_concat(gopt_nn_ctx *ctx, gopt_nn_tensor *a, gopt_nn_tensor *b, int axis);
gopt_nn_tensor *gopt_nn_slice(gopt_nn_ctx *ctx, gopt_nn_tensor *x, int axis, int64_t start, int64_t len);
gopt_nn_tensor *gopt_nn_reshape(gopt_nn_ctx *ctx, gopt_nn_tensor *x, int ndim, const int64_t *shape);
gopt_nn_tensor *gopt_nn_sum(gopt_nn_ctx *ctx, gopt_nn_tensor *x);      /* all -> [1] */
gopt_nn_tensor *gopt_nn_mean(gopt_nn_ctx *ctx, gopt_nn_tensor *x);     /* all -> [1] */
gopt_nn_tensor *gopt_nn_sum_last(gopt_nn_ctx *ctx, gopt_nn_tensor *x); /* [..,D] -> [..] */
/* rows of x[N,D] picked by idx[M] (values in [0,N)) -> [M,D]; also the embedding lookup. */
gopt_nn_tensor *gopt_nn_gather_rows(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const int32_t *idx, int64_t m);
gopt_nn_tensor *gopt_nn_embedding(gopt_nn_ctx *ctx, gopt_nn_tensor *table, const int32_t *idx, int64_t m);
/* out[n_out,D], out[idx[i]] += src[i] for src[M,D]. Deterministic (no atomics). */
gopt_nn_tensor *gopt_nn_scatter_add(gopt_nn_ctx *ctx, gopt_nn_tensor *src, const int32_t *idx,
                                    int64_t n_out);
/* x[N,C], idx[N] -> [N]: x[i, idx[i]] (log-prob of taken actions). */
gopt_nn_tensor *gopt_nn_pick(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const int32_t *idx);
gopt_nn_tensor *gopt_nn_detach(gopt_nn_ctx *ctx, gopt_nn_tensor *x);   /* stop-gradient */
/* inverted dropout: zero with probability p, scale the rest by 1/(1-p). The mask comes from one
 * draw of rng (counter-based per element, so independent of thread count). Identity when p == 0
 * or the ctx is not training. */
gopt_nn_tensor *gopt_nn_dropout(gopt_nn_ctx *ctx, gopt_nn_tensor *x, float p, gopt_nn_rng *rng);

/* CSR neighbourhood: row i (destination node) aggregates x[col[e]] for e in [rowptr[i], rowptr[i+1]).
 * gopt_nn_csr_init copies the arrays and builds the transpose used by backward; the CSR must outlive
 * every ctx pass that uses it. */
typedef struct gopt_nn_csr {
  int64_t n_dst, n_src, n_edges;
  int32_t *rowptr, *col;      /* [n_dst+1], [n_edges] */
  int32_t *t_ptr, *t_row;     /* transpose: for source j, edges' destination rows in edge order */
  float *inv_deg;             /* [n_dst]: 1/deg, 0 for isolated rows */
} gopt_nn_csr;
int gopt_nn_csr_init(gopt_nn_csr *g, int64_t n_dst, int64_t n_src, const int32_t *rowptr,
                     const int32_t *col, gopt_error *err);
void gopt_nn_csr_free(gopt_nn_csr *g);
/* x[n_src,D] -> [n_dst,D]; empty neighbourhoods give 0 (also for max). */
gopt_nn_tensor *gopt_nn_seg_sum(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g);
gopt_nn_tensor *gopt_nn_seg_mean(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g);
gopt_nn_tensor *gopt_nn_seg_max(gopt_nn_ctx *ctx, gopt_nn_tensor *x, const gopt_nn_csr *g);

/* Segment-recurrent multi-head attention (fused, Transformer-XL style memory).
 * q,k,v: [T, H*dh]; the sequence is cut into segments of seg_len rows (the last may be shorter).
 * Queries of segment s attend to the keys of their own segment plus, when kmem/vmem are given
 * ([T, H*dh], must be tensors distinct from k/v, typically projections of a detached input), the
 * kmem/vmem rows of segment s-1 (the memory; segment 0 has none). seg_len >= T gives plain full
 * attention. causal masks own-segment keys after the query; key_valid[T] (or NULL) masks padded
 * positions (memory included). Scores are scaled by 1/sqrt(dh). A query with no visible key
 * outputs 0. Memory is O(T*H) besides the output: probabilities are recomputed in backward. */
gopt_nn_tensor *gopt_nn_attention(gopt_nn_ctx *ctx, gopt_nn_tensor *q, gopt_nn_tensor *k,
                                  gopt_nn_tensor *v, gopt_nn_tensor *kmem, gopt_nn_tensor *vmem,
                                  int n_heads, int64_t seg_len, int causal, const uint8_t *key_valid);

/* Beta(alpha, beta) log-density at x and entropy, elementwise, differentiable in alpha and beta
 * (and x for the log-density). */
gopt_nn_tensor *gopt_nn_beta_logprob(gopt_nn_ctx *ctx, gopt_nn_tensor *alpha, gopt_nn_tensor *beta,
                                     gopt_nn_tensor *x);
gopt_nn_tensor *gopt_nn_beta_entropy(gopt_nn_ctx *ctx, gopt_nn_tensor *alpha, gopt_nn_tensor *beta);

/* ---- layers ------------------------------------------------------------------------------ */
typedef enum gopt_nn_act {
  GOPT_NN_ACT_NONE = 0, GOPT_NN_ACT_RELU, GOPT_NN_ACT_GELU, GOPT_NN_ACT_GELU_TANH, GOPT_NN_ACT_TANH,
  GOPT_NN_ACT_SIGMOID
} gopt_nn_act;
gopt_nn_tensor *gopt_nn_activate(gopt_nn_ctx *ctx, gopt_nn_tensor *x, gopt_nn_act act);

/* y = x W^T + b, W [out,in], b [out] ("<prefix>.weight", "<prefix>.bias"; PyTorch layout/init). */
typedef struct gopt_nn_linear { gopt_nn_tensor *w, *b; int64_t in, out; } gopt_nn_linear;
int gopt_nn_linear_init(gopt_nn_linear *l, gopt_nn_params *p, const char *prefix, int64_t in,
                        int64_t out, int bias);
gopt_nn_tensor *gopt_nn_linear_forward(gopt_nn_ctx *ctx, const gopt_nn_linear *l, gopt_nn_tensor *x);

/* MLP: dims[0] -> dims[1] -> ... -> dims[n_layers]; act between layers (not after the last).
 * Parameters "<prefix>.<i>.weight/bias". */
#define GOPT_NN_MLP_MAX 8
typedef struct gopt_nn_mlp { gopt_nn_linear l[GOPT_NN_MLP_MAX]; int n_layers; gopt_nn_act act; } gopt_nn_mlp;
int gopt_nn_mlp_init(gopt_nn_mlp *m, gopt_nn_params *p, const char *prefix, int n_layers,
                     const int64_t *dims, gopt_nn_act act);
gopt_nn_tensor *gopt_nn_mlp_forward(gopt_nn_ctx *ctx, const gopt_nn_mlp *m, gopt_nn_tensor *x);

/* GraphSAGE layer: h' = norm(act(Linear([h ; mean_{j in N(i)} h_j]))), Linear in = 2*in.
 * norm: NONE, L2 (F.normalize) or LAYERNORM ("<prefix>.ln.weight/bias"). Linear: "<prefix>.lin". */
typedef enum gopt_nn_norm { GOPT_NN_NORM_NONE = 0, GOPT_NN_NORM_L2, GOPT_NN_NORM_LAYERNORM } gopt_nn_norm;
typedef struct gopt_nn_sage {
  gopt_nn_linear lin; gopt_nn_tensor *ln_w, *ln_b; gopt_nn_act act; gopt_nn_norm norm;
} gopt_nn_sage;
int gopt_nn_sage_init(gopt_nn_sage *s, gopt_nn_params *p, const char *prefix, int64_t in,
                      int64_t out, gopt_nn_act act, gopt_nn_norm norm);
gopt_nn_tensor *gopt_nn_sage_forward(gopt_nn_ctx *ctx, const gopt_nn_sage *s, gopt_nn_tensor *h,
                                     const gopt_nn_csr *g);

/* Multi-head attention with output projection: "<prefix>.q/.k/.v/.o" linears [d,d].
 * forward(x[T,d]): seg_len <= 0 means full attention; use_memory adds the Transformer-XL memory
 * (keys/values of the previous segment projected from detach(x)). */
typedef struct gopt_nn_mha { gopt_nn_linear q, k, v, o; int n_heads; int64_t d; } gopt_nn_mha;
int gopt_nn_mha_init(gopt_nn_mha *m, gopt_nn_params *p, const char *prefix, int64_t d, int n_heads);
gopt_nn_tensor *gopt_nn_mha_forward(gopt_nn_ctx *ctx, const gopt_nn_mha *m, gopt_nn_tensor *x,
                                    int64_t seg_len, int use_memory, int causal,
                                    const uint8_t *key_valid);

/* Segment-recurrent attention block (post-norm, Transformer-XL style):
 *   a = LN1(x + MHA(x; segments of seg_len with memory)),  y = LN2(a + W2 gelu(W1 a)).
 * Parameters "<prefix>.attn.*", "<prefix>.ln1.*", "<prefix>.ff1", "<prefix>.ff2", "<prefix>.ln2.*". */
typedef struct gopt_nn_seg_block {
  gopt_nn_mha attn; gopt_nn_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b; gopt_nn_linear ff1, ff2;
  int64_t seg_len;
} gopt_nn_seg_block;
int gopt_nn_seg_block_init(gopt_nn_seg_block *b, gopt_nn_params *p, const char *prefix, int64_t d,
                           int n_heads, int64_t d_ff, int64_t seg_len);
gopt_nn_tensor *gopt_nn_seg_block_forward(gopt_nn_ctx *ctx, const gopt_nn_seg_block *b,
                                          gopt_nn_tensor *x, int causal, const uint8_t *key_valid);

/* ---- distribution heads ------------------------------------------------------------------ */
/* Categorical over the last axis of logits [N,C]. */
gopt_nn_tensor *gopt_nn_categorical_logprob(gopt_nn_ctx *ctx, gopt_nn_tensor *logits,
                                            const int32_t *actions);          /* -> [N] */
gopt_nn_tensor *gopt_nn_categorical_entropy(gopt_nn_ctx *ctx, gopt_nn_tensor *logits); /* -> [N] */
/* Samples one action per row from logits data (inverse CDF); argmax when greedy. */
void gopt_nn_categorical_sample(const gopt_nn_tensor *logits, gopt_nn_rng *rng, int greedy,
                                int32_t *actions);
/* Beta head: alpha = softplus(x W_a^T + b_a) + 1, beta likewise ("<prefix>.alpha", "<prefix>.beta"). */
typedef struct gopt_nn_beta_head { gopt_nn_linear a, b; } gopt_nn_beta_head;
int gopt_nn_beta_head_init(gopt_nn_beta_head *h, gopt_nn_params *p, const char *prefix, int64_t in,
                           int64_t out);
void gopt_nn_beta_head_forward(gopt_nn_ctx *ctx, const gopt_nn_beta_head *h, gopt_nn_tensor *x,
                               gopt_nn_tensor **alpha, gopt_nn_tensor **beta);
/* Samples x ~ Beta(alpha[i], beta[i]) for every element (n values), clamped into (1e-6, 1-1e-6). */
void gopt_nn_beta_sample(const gopt_nn_tensor *alpha, const gopt_nn_tensor *beta, gopt_nn_rng *rng,
                         float *out);

/* PPO clipped surrogate: -mean(min(r*A, clamp(r, 1-eps, 1+eps)*A)), r = exp(logp - logp_old). */
gopt_nn_tensor *gopt_nn_ppo_loss(gopt_nn_ctx *ctx, gopt_nn_tensor *logp, gopt_nn_tensor *logp_old,
                                 gopt_nn_tensor *adv, float clip_eps);

/* ---- optimizers -------------------------------------------------------------------------- */
typedef enum gopt_nn_optim_kind { GOPT_NN_SGD = 0, GOPT_NN_ADAM, GOPT_NN_ADAMW } gopt_nn_optim_kind;
typedef enum gopt_nn_sched { GOPT_NN_LR_CONSTANT = 0, GOPT_NN_LR_WARMUP_LINEAR, GOPT_NN_LR_WARMUP_COSINE } gopt_nn_sched;
typedef struct gopt_nn_optim_cfg {
  gopt_nn_optim_kind kind;
  float lr, momentum;          /* SGD: PyTorch semantics (buf = mu*buf + g; no dampening) */
  float beta1, beta2, eps;     /* Adam/AdamW (PyTorch semantics, bias-corrected) */
  float weight_decay;          /* SGD/Adam: added to the gradient; AdamW: decoupled */
  float clip_norm;             /* > 0: clip gradients by global L2 norm first */
  gopt_nn_sched sched;         /* learning-rate schedule over steps */
  int64_t warmup_steps, total_steps;
  float min_lr_ratio;          /* cosine floor as a fraction of lr */
} gopt_nn_optim_cfg;
gopt_nn_optim_cfg gopt_nn_optim_defaults(gopt_nn_optim_kind kind, float lr);
typedef struct gopt_nn_optim gopt_nn_optim;
gopt_nn_optim *gopt_nn_optim_new(const gopt_nn_optim_cfg *cfg, gopt_nn_params *p, gopt_error *err);
void gopt_nn_optim_free(gopt_nn_optim *o);
/* Learning rate at step (0-based) under cfg's schedule. */
float gopt_nn_lr_at(const gopt_nn_optim_cfg *cfg, int64_t step);
/* One update from the parameters' gradients (clip, schedule, update); returns the gradient's global
 * norm before clipping. Does not zero the gradients. */
double gopt_nn_optim_step(gopt_nn_optim *o);
int64_t gopt_nn_optim_steps(const gopt_nn_optim *o);
/* Global L2 norm of all gradients (double, fixed reduction order); scales them to max_norm when
 * larger (PyTorch clip_grad_norm_ with the 1e-6 term). Returns the norm before clipping. */
double gopt_nn_clip_grad_norm(gopt_nn_params *p, double max_norm);

/* ---- checkpoints ------------------------------------------------------------------------- */
/* Format v1 (little-endian): "GOPTNNCK" | u32 version | u32 n_records | u64 payload_bytes |
 * n_records x {u16 name_len, name, u8 kind, u8 ndim, i64 shape[ndim]} | payload (f32 data and
 * state) | u64 FNV-1a-64 of every byte before it. Written to "<path>.tmp.<pid>" and renamed.
 * Saves parameter values, optimizer moments and step (if o), RNG state (if rng) and user_step. */
#define GOPT_NN_CKPT_VERSION 1
int gopt_nn_ckpt_save(const char *path, const gopt_nn_params *p, const gopt_nn_optim *o,
                      const gopt_nn_rng *rng, int64_t user_step, gopt_error *err);
/* Loads into existing params/optim/rng (names and shapes must match exactly). Verifies the whole
 * file (magic, version, sizes, checksum) before changing anything; fails with GOPT_EIO, GOPT_EPARSE
 * (bad magic, truncated, checksum), GOPT_EUNSUP (version), GOPT_ESHAPE (names/shapes/state). */
int gopt_nn_ckpt_load(const char *path, gopt_nn_params *p, gopt_nn_optim *o, gopt_nn_rng *rng,
                      int64_t *user_step, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
