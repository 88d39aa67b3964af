/* nn_ctx.c: tensor memory for gopt's NN engine: the per-pass arena and tape (gopt_nn_ctx), the
 * single-allocation parameter store (gopt_nn_params), leaf constructors, CSR neighbourhoods,
 * thread settings and the blocked GEMM used by every matmul. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

/* ---- errors and threads ------------------------------------------------------------------ */

static int g_threads = 1;
static int g_blas_set = 0;

void gopt_nn_set_threads(int n) {
  if (n < 1) n = 1;
  g_threads = n;
  openblas_set_num_threads(1);
  g_blas_set = 1;
}
int gopt_nn_get_threads(void) { return g_threads; }
int nn_threads(void) {
  if (!g_blas_set) { openblas_set_num_threads(1); g_blas_set = 1; }
  return g_threads;
}

void nn_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  int nt = nn_threads();
  enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  double work = (double)M * (double)N * (double)(K > 0 ? K : 1);
  if (nt <= 1 || work < 2e6 || (M < 2 * 16 && N < 2 * 16)) {
    cblas_sgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
    return;
  }
  int split_rows = M >= N;
  int64_t dim = split_rows ? M : N;
  int64_t chunk = (dim + nt - 1) / nt;
  chunk = (chunk + 15) / 16 * 16;
  int64_t nchunks = (dim + chunk - 1) / chunk;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t s = c * chunk, e = s + chunk < dim ? s + chunk : dim;
    if (split_rows) {
      const float *Ab = ta ? A + s : A + s * lda;
      cblas_sgemm(CblasRowMajor, TA, TB, (int)(e - s), (int)N, (int)K, alpha, Ab, (int)lda, B,
                  (int)ldb, beta, C + s * ldc, (int)ldc);
    } else {
      const float *Bb = tb ? B + s * ldb : B + s;
      cblas_sgemm(CblasRowMajor, TA, TB, (int)M, (int)(e - s), (int)K, alpha, A, (int)lda, Bb,
                  (int)ldb, beta, C + s, (int)ldc);
    }
  }
}

/* ---- arena -------------------------------------------------------------------------------- */
static nn_block *block_new(size_t size) {
  nn_block *b = malloc(sizeof *b);
  if (!b) return NULL;
  b->mem = aligned_alloc(64, (size + 63) / 64 * 64);
  if (!b->mem) { free(b); return NULL; }
  b->size = (size + 63) / 64 * 64;
  b->used = 0;
  b->next = NULL;
  return b;
}

gopt_nn_ctx *gopt_nn_ctx_new(size_t bytes_hint) {
  gopt_nn_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->hint = bytes_hint < (1u << 20) ? (1u << 20) : bytes_hint;
  ctx->blocks = block_new(ctx->hint);
  if (!ctx->blocks) { free(ctx); return NULL; }
  ctx->training = 1;
  (void)nn_threads();
  return ctx;
}

void gopt_nn_ctx_free(gopt_nn_ctx *ctx) {
  if (!ctx) return;
  for (nn_block *b = ctx->blocks, *n; b; b = n) { n = b->next; free(b->mem); free(b); }
  free(ctx->tape);
  free(ctx);
}

void gopt_nn_ctx_reset(gopt_nn_ctx *ctx) {
  if (!ctx) return;
  if (ctx->blocks && ctx->blocks->next) {
    /* grew during the pass: replace all blocks by one big enough for it */
    size_t total = 0;
    for (nn_block *b = ctx->blocks; b; b = b->next) total += b->size;
    for (nn_block *b = ctx->blocks, *n; b; b = n) { n = b->next; free(b->mem); free(b); }
    ctx->blocks = block_new(total);
  }
  if (ctx->blocks) ctx->blocks->used = 0;
  ctx->total_used = 0;
  ctx->n_tape = 0;
  ctx->err.code = 0;
  ctx->err.msg[0] = 0;
}

void *nn_fail(gopt_nn_ctx *ctx, int code, const char *fmt, ...) {
  if (ctx && ctx->err.code == 0) {
    va_list ap;
    va_start(ap, fmt);
    ctx->err.code = code;
    vsnprintf(ctx->err.msg, sizeof ctx->err.msg, fmt, ap);
    va_end(ap);
  }
  return NULL;
}

void *nn_alloc(gopt_nn_ctx *ctx, size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  nn_block *b = ctx->blocks;
  if (!b || b->size - b->used < bytes) {
    size_t sz = b ? b->size * 2 : ctx->hint;
    if (sz < bytes) sz = bytes;
    nn_block *nb = block_new(sz);
    if (!nb) return nn_fail(ctx, GOPT_ENOMEM, "nn: arena: cannot allocate %zu bytes", sz);
    nb->next = b;
    ctx->blocks = b = nb;
  }
  void *p = b->mem + b->used;
  b->used += bytes;
  ctx->total_used += bytes;
  return p;
}

void *nn_calloc(gopt_nn_ctx *ctx, size_t bytes) {
  void *p = nn_alloc(ctx, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

int gopt_nn_ctx_status(const gopt_nn_ctx *ctx, gopt_error *err) {
  if (!ctx) return nn_err(err, GOPT_EINVAL, "nn: NULL ctx");
  if (ctx->err.code) {
    if (err) *err = ctx->err;
    return ctx->err.code;
  }
  return 0;
}

size_t gopt_nn_ctx_bytes_used(const gopt_nn_ctx *ctx) { return ctx ? ctx->total_used : 0; }
void gopt_nn_ctx_set_training(gopt_nn_ctx *ctx, int training) { if (ctx) ctx->training = training; }
int gopt_nn_ctx_training(const gopt_nn_ctx *ctx) { return ctx ? ctx->training : 0; }

static int shape_ok(int ndim, const int64_t *shape, int64_t *n) {
  if (ndim < 1 || ndim > GOPT_NN_MAX_DIMS || !shape) return 0;
  int64_t t = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] > 0 && t > INT64_MAX / 4 / shape[i])) return 0;
    t *= shape[i];
  }
  *n = t;
  return 1;
}

static gopt_nn_tensor *op_header(gopt_nn_ctx *ctx, int op, int ndim, const int64_t *shape, float *alias) {
  if (!ctx) return NULL;
  int64_t n;
  if (!shape_ok(ndim, shape, &n)) return nn_fail(ctx, GOPT_ESHAPE, "nn: op %d: bad output shape", op);
  if (ctx->n_tape == ctx->cap_tape) {
    int64_t cap = ctx->cap_tape ? ctx->cap_tape * 2 : 256;
    gopt_nn_tensor **t = realloc(ctx->tape, (size_t)cap * sizeof *t);
    if (!t) return nn_fail(ctx, GOPT_ENOMEM, "nn: tape: out of memory");
    ctx->tape = t;
    ctx->cap_tape = cap;
  }
  gopt_nn_tensor *t = nn_calloc(ctx, sizeof *t);
  if (!t) return NULL;
  t->data = alias ? alias : nn_alloc(ctx, (size_t)(n ? n : 1) * sizeof(float));
  if (!t->data) return NULL;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->n = n;
  t->op = op;
  ctx->tape[ctx->n_tape++] = t;
  return t;
}

gopt_nn_tensor *nn_op_new(gopt_nn_ctx *ctx, int op, int ndim, const int64_t *shape) {
  return op_header(ctx, op, ndim, shape, NULL);
}

gopt_nn_tensor *nn_op_view(gopt_nn_ctx *ctx, int op, int ndim, const int64_t *shape, float *data) {
  return op_header(ctx, op, ndim, shape, data);
}

void nn_op_srcs(gopt_nn_tensor *t, gopt_nn_tensor *a, gopt_nn_tensor *b, gopt_nn_tensor *c) {
  t->src[0] = a; t->src[1] = b; t->src[2] = c;
  t->requires_grad = (a && a->requires_grad) || (b && b->requires_grad) || (c && c->requires_grad);
}

gopt_nn_tensor *gopt_nn_new(gopt_nn_ctx *ctx, int ndim, const int64_t *shape) {
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_LEAF, ndim, shape);
  if (t) memset(t->data, 0, (size_t)t->n * sizeof(float));
  return t;
}
gopt_nn_tensor *gopt_nn_new1(gopt_nn_ctx *ctx, int64_t n0) { return gopt_nn_new(ctx, 1, &n0); }
gopt_nn_tensor *gopt_nn_new2(gopt_nn_ctx *ctx, int64_t n0, int64_t n1) {
  int64_t s[2] = {n0, n1};
  return gopt_nn_new(ctx, 2, s);
}
gopt_nn_tensor *gopt_nn_from(gopt_nn_ctx *ctx, int ndim, const int64_t *shape, const float *data) {
  gopt_nn_tensor *t = nn_op_new(ctx, GOPT_NN_OP_LEAF, ndim, shape);
  if (t && data) memcpy(t->data, data, (size_t)t->n * sizeof(float));
  return t;
}
void gopt_nn_set_requires_grad(gopt_nn_tensor *t, int on) { if (t) t->requires_grad = on ? 1 : 0; }

int nn_invert_index(gopt_nn_ctx *ctx, const int32_t *idx, int64_t m, int64_t n, int32_t **ptr,
                    int32_t **pos) {
  int32_t *p = nn_calloc(ctx, (size_t)(n + 1) * sizeof *p);
  int32_t *q = nn_alloc(ctx, (size_t)(m ? m : 1) * sizeof *q);
  if (!p || !q) return GOPT_ENOMEM;
  for (int64_t i = 0; i < m; i++) p[idx[i] + 1]++;
  for (int64_t j = 0; j < n; j++) p[j + 1] += p[j];
  int32_t *fill = nn_alloc(ctx, (size_t)(n ? n : 1) * sizeof *fill);
  if (!fill) return GOPT_ENOMEM;
  memcpy(fill, p, (size_t)n * sizeof *fill);
  for (int64_t i = 0; i < m; i++) q[fill[idx[i]]++] = (int32_t)i;
  *ptr = p;
  *pos = q;
  return 0;
}

/* ---- CSR ---------------------------------------------------------------------------------- */
int gopt_nn_csr_init(gopt_nn_csr *g, int64_t n_dst, int64_t n_src, const int32_t *rowptr,
                     const int32_t *col, gopt_error *err) {
  if (!g) return nn_err(err, GOPT_EINVAL, "nn_csr: NULL csr");
  memset(g, 0, sizeof *g);
  if (n_dst < 0 || n_src < 0 || !rowptr || n_dst > INT32_MAX || n_src > INT32_MAX)
    return nn_err(err, GOPT_EINVAL, "nn_csr: bad sizes n_dst=%lld n_src=%lld", (long long)n_dst,
                  (long long)n_src);
  if (rowptr[0] != 0) return nn_err(err, GOPT_EINVAL, "nn_csr: rowptr[0] must be 0");
  for (int64_t i = 0; i < n_dst; i++)
    if (rowptr[i + 1] < rowptr[i])
      return nn_err(err, GOPT_EINVAL, "nn_csr: rowptr decreases at row %lld", (long long)i);
  int64_t E = rowptr[n_dst];
  if (E > 0 && !col) return nn_err(err, GOPT_EINVAL, "nn_csr: NULL col");
  for (int64_t e = 0; e < E; e++)
    if (col[e] < 0 || col[e] >= n_src)
      return nn_err(err, GOPT_ERANGE, "nn_csr: col[%lld]=%d out of range [0,%lld)", (long long)e,
                    col[e], (long long)n_src);
  g->n_dst = n_dst; g->n_src = n_src; g->n_edges = E;
  g->rowptr = malloc((size_t)(n_dst + 1) * sizeof(int32_t));
  g->col = malloc((size_t)(E ? E : 1) * sizeof(int32_t));
  g->t_ptr = calloc((size_t)(n_src + 1), sizeof(int32_t));
  g->t_row = malloc((size_t)(E ? E : 1) * sizeof(int32_t));
  g->inv_deg = malloc((size_t)(n_dst ? n_dst : 1) * sizeof(float));
  int32_t *fill = malloc((size_t)(n_src ? n_src : 1) * sizeof(int32_t));
  if (!g->rowptr || !g->col || !g->t_ptr || !g->t_row || !g->inv_deg || !fill) {
    free(fill);
    gopt_nn_csr_free(g);
    return nn_err(err, GOPT_ENOMEM, "nn_csr: out of memory (%lld edges)", (long long)E);
  }
  memcpy(g->rowptr, rowptr, (size_t)(n_dst + 1) * sizeof(int32_t));
  if (E) memcpy(g->col, col, (size_t)E * sizeof(int32_t));
  for (int64_t e = 0; e < E; e++) g->t_ptr[col[e] + 1]++;
  for (int64_t j = 0; j < n_src; j++) g->t_ptr[j + 1] += g->t_ptr[j];
  if (n_src) memcpy(fill, g->t_ptr, (size_t)n_src * sizeof(int32_t));
  for (int64_t i = 0; i < n_dst; i++) {
    int32_t d = rowptr[i + 1] - rowptr[i];
    g->inv_deg[i] = d ? 1.0f / (float)d : 0.0f;
    for (int32_t e = rowptr[i]; e < rowptr[i + 1]; e++) g->t_row[fill[col[e]]++] = (int32_t)i;
  }
  free(fill);
  return 0;
}

void gopt_nn_csr_free(gopt_nn_csr *g) {
  if (!g) return;
  free(g->rowptr); free(g->col); free(g->t_ptr); free(g->t_row); free(g->inv_deg);
  memset(g, 0, sizeof *g);
}

/* ---- parameters --------------------------------------------------------------------------- */
typedef struct nn_param_decl { gopt_nn_tensor t; char *name; int init; float scale; } nn_param_decl;

struct gopt_nn_params {
  nn_param_decl **p;
  int n, cap;
  float *block;        /* [2*total]: values then gradients */
  size_t total;
  int finalized;
  int bad;             /* a declaration failed: reported by finalize */
  char bad_msg[256];
};

gopt_nn_params *gopt_nn_params_new(void) { return calloc(1, sizeof(gopt_nn_params)); }

void gopt_nn_params_free(gopt_nn_params *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) { free(p->p[i]->name); free(p->p[i]); }
  free(p->p);
  free(p->block);
  free(p);
}

gopt_nn_tensor *gopt_nn_param(gopt_nn_params *p, const char *name, int ndim, const int64_t *shape,
                              gopt_nn_init init, float scale) {
  if (!p) return NULL;
  int64_t n;
  const char *why = NULL;
  if (p->finalized) why = "declared after finalize";
  else if (!name || !*name || strlen(name) > 200) why = "bad name";
  else if (!shape_ok(ndim, shape, &n)) why = "bad shape";
  else if (gopt_nn_params_find(p, name)) why = "duplicate name";
  if (why) {
    if (!p->bad) snprintf(p->bad_msg, sizeof p->bad_msg, "nn_params: parameter '%s': %s",
                          name ? name : "(null)", why);
    p->bad = 1;
    return NULL;
  }
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 32;
    nn_param_decl **np = realloc(p->p, (size_t)cap * sizeof *np);
    if (!np) { p->bad = 1; snprintf(p->bad_msg, sizeof p->bad_msg, "nn_params: out of memory"); return NULL; }
    p->p = np;
    p->cap = cap;
  }
  nn_param_decl *d = calloc(1, sizeof *d);
  char *nm = d ? strdup(name) : NULL;
  if (!d || !nm) {
    free(d);
    p->bad = 1;
    snprintf(p->bad_msg, sizeof p->bad_msg, "nn_params: out of memory");
    return NULL;
  }
  d->name = nm;
  d->init = init;
  d->scale = scale;
  d->t.ndim = ndim;
  for (int i = 0; i < ndim; i++) d->t.shape[i] = shape[i];
  d->t.n = n;
  d->t.op = GOPT_NN_OP_LEAF;
  d->t.requires_grad = 1;
  d->t.name = nm;
  p->p[p->n++] = d;
  return &d->t;
}

int gopt_nn_params_finalize(gopt_nn_params *p, uint64_t seed, gopt_error *err) {
  if (!p) return nn_err(err, GOPT_EINVAL, "nn_params: NULL params");
  if (p->bad) return nn_err(err, GOPT_EINVAL, "%s", p->bad_msg);
  if (p->finalized) return nn_err(err, GOPT_EINVAL, "nn_params: finalized twice");
  size_t total = 0;
  for (int i = 0; i < p->n; i++) total += (size_t)p->p[i]->t.n;
  size_t bytes = (2 * total + 16) * sizeof(float);
  p->block = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p->block) return nn_err(err, GOPT_ENOMEM, "nn_params: cannot allocate %zu parameters", total);
  memset(p->block, 0, (bytes + 63) / 64 * 64);
  p->total = total;
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, seed);
  size_t off = 0;
  for (int i = 0; i < p->n; i++) {
    nn_param_decl *d = p->p[i];
    d->t.data = p->block + off;
    d->t.grad = p->block + total + off;
    off += (size_t)d->t.n;
    for (int64_t j = 0; j < d->t.n; j++) {
      float v = 0.0f;
      switch (d->init) {
        case GOPT_NN_INIT_ONES: v = 1.0f; break;
        case GOPT_NN_INIT_UNIFORM: v = (float)((2.0 * gopt_nn_rng_uniform(&rng) - 1.0) * d->scale); break;
        case GOPT_NN_INIT_NORMAL: v = (float)(gopt_nn_rng_normal(&rng) * d->scale); break;
        default: v = 0.0f;
      }
      d->t.data[j] = v;
    }
  }
  p->finalized = 1;
  return 0;
}

int gopt_nn_params_count(const gopt_nn_params *p) { return p ? p->n : 0; }
gopt_nn_tensor *gopt_nn_params_get(const gopt_nn_params *p, int i) {
  return (p && i >= 0 && i < p->n) ? &p->p[i]->t : NULL;
}
gopt_nn_tensor *gopt_nn_params_find(const gopt_nn_params *p, const char *name) {
  if (!p || !name) return NULL;
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->p[i]->name, name) == 0) return &p->p[i]->t;
  return NULL;
}
size_t gopt_nn_params_total(const gopt_nn_params *p) { return p ? p->total : 0; }
float *gopt_nn_params_data(gopt_nn_params *p) { return p ? p->block : NULL; }
float *gopt_nn_params_grad(gopt_nn_params *p) { return p && p->block ? p->block + p->total : NULL; }
void gopt_nn_params_zero_grad(gopt_nn_params *p) {
  if (p && p->block) memset(p->block + p->total, 0, p->total * sizeof(float));
}
