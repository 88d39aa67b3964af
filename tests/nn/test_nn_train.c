/* test_nn_train.c: training determinism and checkpoints. Trains a small GraphSAGE + segment-
 * attention model with dropout, Adam (clipping, warmup-cosine schedule) on 2 threads and asserts:
 * two runs with the same seed are bitwise identical (losses and parameters); saving at step k and
 * resuming from the file in fresh objects reproduces the uninterrupted run's losses and parameters
 * bitwise; damaged checkpoints (bad magic, wrong version, truncated, flipped byte, wrong shapes,
 * missing file) fail with the right error code, a one-line message, and leave the model untouched. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/nn.h"

typedef struct model {
  gopt_nn_params *p;
  gopt_nn_sage s0;
  gopt_nn_seg_block blk;
  gopt_nn_linear out;
  gopt_nn_optim *o;
  gopt_nn_rng rng;
} model;

typedef struct data { int64_t n, f; gopt_nn_csr g; float *x, *y; } data;

static void make_data(data *d, int64_t n, int64_t f) {
  gopt_nn_rng r;
  gopt_nn_rng_seed(&r, 7);
  d->n = n;
  d->f = f;
  int32_t *rp = malloc((size_t)(n + 1) * 4), *col = malloc((size_t)n * 3 * 4);
  rp[0] = 0;
  int64_t e = 0;
  for (int64_t i = 0; i < n; i++) {
    int deg = (int)(gopt_nn_rng_u64(&r) % 4);  /* 0..3 */
    for (int k = 0; k < deg; k++) col[e++] = (int32_t)(gopt_nn_rng_u64(&r) % (uint64_t)n);
    rp[i + 1] = (int32_t)e;
  }
  CHECK_EQ_INT(gopt_nn_csr_init(&d->g, n, n, rp, col, NULL), 0);
  free(rp);
  free(col);
  d->x = malloc((size_t)(n * f) * 4);
  d->y = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n * f; i++) d->x[i] = (float)gopt_nn_rng_normal(&r);
  for (int64_t i = 0; i < n; i++) d->y[i] = (float)(d->x[i * f] * 0.5 - d->x[i * f + 1]);
}

static void free_data(data *d) { gopt_nn_csr_free(&d->g); free(d->x); free(d->y); }

static void model_init(model *m, int64_t f, int64_t h, int64_t seg, uint64_t seed) {
  gopt_error err = {0};
  m->p = gopt_nn_params_new();
  CHECK_EQ_INT(gopt_nn_sage_init(&m->s0, m->p, "sage0", f, h, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM), 0);
  CHECK_EQ_INT(gopt_nn_seg_block_init(&m->blk, m->p, "blk0", h, 2, 2 * h, seg), 0);
  CHECK_EQ_INT(gopt_nn_linear_init(&m->out, m->p, "out", h, 1, 1), 0);
  CHECK_EQ_INT(gopt_nn_params_finalize(m->p, seed, &err), 0);
  gopt_nn_optim_cfg c = gopt_nn_optim_defaults(GOPT_NN_ADAMW, 3e-3f);
  c.clip_norm = 1.0f;
  c.sched = GOPT_NN_LR_WARMUP_COSINE;
  c.warmup_steps = 2;
  c.total_steps = 8;
  m->o = gopt_nn_optim_new(&c, m->p, &err);
  CHECK(m->o != NULL);
  gopt_nn_rng_seed(&m->rng, seed ^ 0x1234);
}

static void model_free(model *m) { gopt_nn_optim_free(m->o); gopt_nn_params_free(m->p); }

static float train_step(model *m, gopt_nn_ctx *ctx, const data *d) {
  gopt_nn_ctx_reset(ctx);
  int64_t xs[2] = {d->n, d->f}, ys[2] = {d->n, 1};
  gopt_nn_tensor *x = gopt_nn_from(ctx, 2, xs, d->x), *y = gopt_nn_from(ctx, 2, ys, d->y);
  gopt_nn_tensor *h = gopt_nn_sage_forward(ctx, &m->s0, x, &d->g);
  h = gopt_nn_dropout(ctx, h, 0.1f, &m->rng);
  h = gopt_nn_seg_block_forward(ctx, &m->blk, h, 0, NULL);
  gopt_nn_tensor *diff = gopt_nn_sub(ctx, gopt_nn_linear_forward(ctx, &m->out, h), y);
  gopt_nn_tensor *loss = gopt_nn_mean(ctx, gopt_nn_mul(ctx, diff, diff));
  gopt_error err = {0};
  gopt_nn_params_zero_grad(m->p);
  int rc = gopt_nn_backward(ctx, loss, &err);
  CHECK_MSG(rc == 0, "backward: %s", err.msg);
  if (rc) return NAN;
  gopt_nn_optim_step(m->o);
  return loss->data[0];
}

/* Runs steps [from, to); saves after step save_at (if > 0) into path. */
static void train(model *m, gopt_nn_ctx *ctx, const data *d, int from, int to, float *losses,
                  int save_at, const char *path) {
  for (int s = from; s < to; s++) {
    losses[s] = train_step(m, ctx, d);
    if (save_at > 0 && s + 1 == save_at) {
      gopt_error err = {0};
      int rc = gopt_nn_ckpt_save(path, m->p, m->o, &m->rng, s + 1, &err);
      CHECK_MSG(rc == 0, "save: %s", err.msg);
    }
  }
}

static int same_params(model *a, model *b) {
  size_t n = gopt_nn_params_total(a->p);
  return n == gopt_nn_params_total(b->p) &&
         memcmp(gopt_nn_params_data(a->p), gopt_nn_params_data(b->p), n * sizeof(float)) == 0;
}

static void test_determinism(gopt_nn_ctx *ctx) {
  data d;
  make_data(&d, 2000, 8);  /* big enough that the OpenMP paths and split GEMMs are used */
  model a, b;
  float la[3], lb[3];
  model_init(&a, 8, 32, 64, 42);
  model_init(&b, 8, 32, 64, 42);
  train(&a, ctx, &d, 0, 3, la, 0, NULL);
  train(&b, ctx, &d, 0, 3, lb, 0, NULL);
  CHECK(memcmp(la, lb, sizeof la) == 0);
  CHECK(same_params(&a, &b));
  CHECK(la[2] < la[0]);  /* it learns something */
  fprintf(stderr, "determinism: losses %.6f %.6f %.6f\n", la[0], la[1], la[2]);
  model_free(&a);
  model_free(&b);
  free_data(&d);
}

static int write_bytes(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(p, 1, n, f);
  fclose(f);
  return w == n ? 0 : -1;
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)sz);
  *n = fread(p, 1, (size_t)sz, f);
  fclose(f);
  return p;
}

static void expect_fail(const char *what, const char *path, model *m, int code, const char *needle) {
  size_t n = gopt_nn_params_total(m->p);
  float *before = malloc(n * sizeof(float));
  memcpy(before, gopt_nn_params_data(m->p), n * sizeof(float));
  int64_t step = -1;
  gopt_error err = {0};
  int rc = gopt_nn_ckpt_load(path, m->p, m->o, &m->rng, &step, &err);
  CHECK_MSG(rc == code, "%s: rc %d, want %d (%s)", what, rc, code, err.msg);
  CHECK_MSG(err.msg[0] && !strchr(err.msg, '\n'), "%s: message must be one non-empty line", what);
  CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, needle);
  CHECK_MSG(memcmp(before, gopt_nn_params_data(m->p), n * sizeof(float)) == 0, "%s: model changed", what);
  CHECK_EQ_INT(step, -1);
  fprintf(stderr, "  %s -> %s\n", what, err.msg);
  free(before);
}

static void test_checkpoint(gopt_nn_ctx *ctx, const char *dir) {
  data d;
  make_data(&d, 60, 6);
  char path[512], bad[512];
  snprintf(path, sizeof path, "%s/run.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  const int N = 8, K = 3;
  float full[8], resumed[8];
  model a, b;
  model_init(&a, 6, 16, 16, 5);
  train(&a, ctx, &d, 0, N, full, K, path);
  model_init(&b, 6, 16, 16, 999);  /* different init and RNG: everything must come from the file */
  int64_t step = 0;
  gopt_error err = {0};
  int rc = gopt_nn_ckpt_load(path, b.p, b.o, &b.rng, &step, &err);
  CHECK_MSG(rc == 0, "load: %s", err.msg);
  CHECK_EQ_INT(step, K);
  CHECK_EQ_INT(gopt_nn_optim_steps(b.o), K);
  train(&b, ctx, &d, (int)step, N, resumed, 0, NULL);
  CHECK(memcmp(full + K, resumed + K, (size_t)(N - K) * sizeof(float)) == 0);
  CHECK(same_params(&a, &b));
  for (int i = K; i < N; i++) fprintf(stderr, "resume: step %d loss %.7f vs %.7f\n", i, full[i], resumed[i]);

  /* damaged files */
  size_t n;
  unsigned char *img = read_all(path, &n);
  CHECK(img != NULL && n > 100);
  if (img) {
    unsigned char *c = malloc(n);
    memcpy(c, img, n); c[0] = 'X';
    write_bytes(bad, c, n);
    expect_fail("bad magic", bad, &b, GOPT_EPARSE, "magic");
    memcpy(c, img, n); c[8] = 9;
    write_bytes(bad, c, n);
    expect_fail("wrong version", bad, &b, GOPT_EUNSUP, "version 9");
    write_bytes(bad, img, n / 2);
    expect_fail("truncated payload", bad, &b, GOPT_EPARSE, "truncated");
    write_bytes(bad, img, 40);
    expect_fail("truncated table", bad, &b, GOPT_EPARSE, "truncated");
    memcpy(c, img, n); c[n - 200] ^= 0x10;
    write_bytes(bad, c, n);
    expect_fail("flipped byte", bad, &b, GOPT_EPARSE, "checksum");
    snprintf(bad, sizeof bad, "%s/missing.ckpt", dir);
    expect_fail("missing file", bad, &b, GOPT_EIO, "cannot open");
    free(c);
  }
  free(img);
  model w;
  model_init(&w, 6, 24, 16, 5);  /* hidden 24 instead of 16 */
  expect_fail("wrong shapes", path, &w, GOPT_ESHAPE, "sage0.lin.weight");
  model_free(&w);
  /* no temp files left behind */
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  CHECK(access(tmp, F_OK) != 0);
  model_free(&a);
  model_free(&b);
  free_data(&d);
  remove(path);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  remove(bad);
}

int main(void) {
  gopt_nn_set_threads(2);
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(1 << 20);
  char dir[] = "/tmp/gopt_nn_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  test_determinism(ctx);
  test_checkpoint(ctx, dir);
  rmdir(dir);
  gopt_nn_ctx_free(ctx);
  return check_exit("test_nn_train");
}
