/* learn_seq.c: the sequential-decision agent (gopt/learn_seq.h): the network (the module's GNN
 * encoder, candidate-scoring and STOP heads, value head), one step's forward pass, episodes,
 * and the .gpol files of kind "seq:<kind>". The PPO trainer is learn_seq_train.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "learn/learn_seq_internal.h"

#define SEQ_VERSION 1
#define SEQ_STOP_BIAS (-2.0f) /* initial STOP logit bias: untrained agents explore past the first steps */
#define SEQ_EXPERT_SHARE 0.5  /* imitation: the share of steps that take the expert's action; the
                                 others take the policy's sample (DAgger: states the policy reaches,
                                 labelled by the expert) */

static gopt_seq_arch seq_arch_fill(const gopt_seq_arch *a) {
  gopt_seq_arch r = *a;
  if (r.hidden <= 0) r.hidden = 32;
  if (r.sage_layers <= 0) r.sage_layers = 2;
  if (r.mlp_hidden <= 0) r.mlp_hidden = 64;
  if (r.cand_feat < 0) r.cand_feat = 0;
  return r;
}

int gopt_seq_policy_new(const char *kind, const gopt_seq_arch *arch, uint64_t seed,
                        gopt_seq_policy **out, gopt_error *err) {
  *out = NULL;
  if (!kind || !*kind || strlen(kind) >= 24 || strpbrk(kind, " \n\t"))
    return gopt_error_set(err, GOPT_EINVAL, "learn: bad sequential policy kind");
  gopt_seq_arch a = seq_arch_fill(arch);
  if (a.node_feat < 1 || a.node_feat > 4096 || a.cand_feat > 4096 || a.hidden > 4096 || a.mlp_hidden > 4096 ||
      a.sage_layers > LEARN_MAX_SAGE)
    return gopt_error_set(err, GOPT_EINVAL, "learn: bad sequential architecture (node_feat %d, cand_feat %d, hidden %d, sage layers %d <= %d)",
                          a.node_feat, a.cand_feat, a.hidden, a.sage_layers, LEARN_MAX_SAGE);
  gopt_seq_policy *p = calloc(1, sizeof *p);
  if (!p || !(p->params = gopt_nn_params_new()) || !(p->trainset = calloc(1, 1))) {
    gopt_seq_policy_free(p);
    return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (policy)");
  }
  snprintf(p->kind, sizeof p->kind, "%s", kind);
  p->arch = a;
  p->best_ret = NAN;
  int rc = gopt_nn_linear_init(&p->in, p->params, "in", a.node_feat, a.hidden, 1);
  char nm[32];
  for (int i = 0; !rc && i < a.sage_layers; i++) {
    snprintf(nm, sizeof nm, "sage%d", i);
    rc = gopt_nn_sage_init(&p->sage[i], p->params, nm, a.hidden, a.hidden, GOPT_NN_ACT_RELU, GOPT_NN_NORM_LAYERNORM);
  }
  int64_t cd[3] = {2 * a.hidden + a.cand_feat, a.mlp_hidden, 1}, vd[3] = {a.hidden, a.mlp_hidden, 1};
  rc = rc ? rc : gopt_nn_mlp_init(&p->cand, p->params, "cand", 2, cd, GOPT_NN_ACT_RELU);
  rc = rc ? rc : gopt_nn_linear_init(&p->stop, p->params, "stop", a.hidden, 1, 1);
  rc = rc ? rc : gopt_nn_mlp_init(&p->value, p->params, "value", 2, vd, GOPT_NN_ACT_RELU);
  rc = rc ? rc : gopt_nn_params_finalize(p->params, seed, err);
  if (!rc) p->stop.b->data[0] = SEQ_STOP_BIAS;
  if (rc) {
    if (!err || !err->msg[0]) gopt_error_set(err, rc, "learn: cannot build the sequential policy network");
    gopt_seq_policy_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void gopt_seq_policy_free(gopt_seq_policy *p) {
  if (!p) return;
  gopt_nn_params_free(p->params);
  free(p->trainset);
  free(p->ckpt);
  free(p);
}

const char *gopt_seq_policy_kind(const gopt_seq_policy *p) { return p->kind; }
gopt_seq_arch gopt_seq_policy_arch(const gopt_seq_policy *p) { return p->arch; }
size_t gopt_seq_policy_param_count(const gopt_seq_policy *p) { return gopt_nn_params_total(p->params); }
const float *gopt_seq_policy_weights(const gopt_seq_policy *p) { return gopt_nn_params_data(p->params); }
int64_t gopt_seq_policy_iters(const gopt_seq_policy *p) { return p->iter; }
const char *gopt_seq_policy_trainset(const gopt_seq_policy *p) { return p->trainset ? p->trainset : ""; }

/* ---- steps ----------------------------------------------------------------------------------- */

/* Undirected CSR over the observation's edges (self-loops and out-of-range ends refused). */
static int seq_csr(const gopt_seq_obs *o, gopt_nn_csr *csr, gopt_error *err) {
  int64_t n = o->n_nodes;
  int32_t *rowptr = calloc((size_t)n + 2, sizeof *rowptr), *fill = malloc(((size_t)n + 1) * sizeof *fill);
  int32_t *col = malloc(((size_t)o->n_edges * 2 + 1) * sizeof *col);
  int rc = 0;
  if (!rowptr || !fill || !col) { rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (state)"); goto done; }
  for (int64_t e = 0; e < o->n_edges; e++) {
    int32_t a = o->edges[2 * e], b = o->edges[2 * e + 1];
    if (a < 0 || b < 0 || a >= n || b >= n) { rc = gopt_error_set(err, GOPT_EINVAL, "learn: state edge %lld names node %d of %lld", (long long)e, a < 0 || a >= n ? a : b, (long long)n); goto done; }
    if (a == b) continue;
    rowptr[a + 1]++;
    rowptr[b + 1]++;
  }
  for (int64_t i = 0; i < n; i++) rowptr[i + 1] += rowptr[i];
  memcpy(fill, rowptr, (size_t)n * sizeof *fill);
  for (int64_t e = 0; e < o->n_edges; e++) {
    int32_t a = o->edges[2 * e], b = o->edges[2 * e + 1];
    if (a == b) continue;
    col[fill[a]++] = b;
    col[fill[b]++] = a;
  }
  rc = gopt_nn_csr_init(csr, n, n, rowptr, col, err);
done:
  free(rowptr);
  free(fill);
  free(col);
  return rc;
}

int seq_step_from_obs(const gopt_seq_policy *p, const gopt_seq_obs *o, seq_step *s, gopt_error *err) {
  memset(s, 0, sizeof *s);
  if (o->n_nodes < 1 || o->n_nodes > (1 << 30) || o->n_edges < 0 || o->n_cand < 0 || o->n_cand > GOPT_SEQ_MAX_CAND)
    return gopt_error_set(err, GOPT_EINVAL, "learn: bad state (%lld nodes, %lld edges, %d candidates; at most %d)",
                          (long long)o->n_nodes, (long long)o->n_edges, o->n_cand, GOPT_SEQ_MAX_CAND);
  size_t nf = (size_t)p->arch.node_feat, cf = (size_t)p->arch.cand_feat, n = (size_t)o->n_nodes, m = (size_t)o->n_cand;
  s->n = o->n_nodes;
  s->m = o->n_cand;
  s->feat = malloc((n * nf + 1) * sizeof *s->feat);
  s->cf = malloc((m * cf + 1) * sizeof *s->cf);
  s->anchor = malloc((m + 1) * sizeof *s->anchor);
  if (!s->feat || !s->cf || !s->anchor) { seq_step_free(s); return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (state)"); }
  memcpy(s->feat, o->node_feat, n * nf * sizeof *s->feat);
  if (m > 0 && cf > 0) memcpy(s->cf, o->cand_feat, m * cf * sizeof *s->cf);
  for (size_t i = 0; i < m; i++) {
    int32_t a = o->anchor ? o->anchor[i] : -1;
    if (a >= o->n_nodes || a < -1) { seq_step_free(s); return gopt_error_set(err, GOPT_EINVAL, "learn: candidate %zu anchors node %d of %lld", i, a, (long long)o->n_nodes); }
    s->anchor[i] = a < 0 ? (int32_t)n : a;
  }
  int rc = seq_csr(o, &s->csr, err);
  if (rc) seq_step_free(s);
  return rc;
}

void seq_step_free(seq_step *s) {
  if (!s) return;
  free(s->feat);
  free(s->cf);
  free(s->anchor);
  free(s->ok);
  gopt_nn_csr_free(&s->csr);
  memset(s, 0, sizeof *s);
}

int seq_forward(gopt_nn_ctx *ctx, const gopt_seq_policy *p, const seq_step *s, gopt_nn_tensor **logits,
                gopt_nn_tensor **value, gopt_error *err) {
  int64_t H = p->arch.hidden, n = s->n, m = s->m;
  int64_t xs[2] = {n, p->arch.node_feat};
  gopt_nn_tensor *h = learn_encode(ctx, gopt_nn_linear_forward(ctx, &p->in, gopt_nn_from(ctx, 2, xs, s->feat)), p->sage,
                                   p->arch.sage_layers, &s->csr);
  gopt_nn_tensor *w = gopt_nn_new2(ctx, 1, n);
  if (w) for (int64_t i = 0; i < n; i++) w->data[i] = 1.0f / (float)n;
  gopt_nn_tensor *g = gopt_nn_matmul(ctx, w, h, 0, 0); /* [1, H]: mean over nodes */
  gopt_nn_tensor *stop = gopt_nn_linear_forward(ctx, &p->stop, g);
  *logits = stop;
  if (m > 0) {
    int32_t *zero = calloc((size_t)m, sizeof *zero);
    if (!zero) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (state)");
    gopt_nn_tensor *hp = gopt_nn_concat(ctx, h, gopt_nn_new2(ctx, 1, H), 0);
    gopt_nn_tensor *in = gopt_nn_gather_rows(ctx, g, zero, m); /* the ctx keeps a copy of idx */
    free(zero);
    if (p->arch.cand_feat > 0) {
      int64_t cs[2] = {m, p->arch.cand_feat};
      in = gopt_nn_concat(ctx, in, gopt_nn_from(ctx, 2, cs, s->cf), 1);
    }
    in = gopt_nn_concat(ctx, in, gopt_nn_gather_rows(ctx, hp, s->anchor, m), 1);
    int64_t rs[2] = {1, m};
    gopt_nn_tensor *sc = gopt_nn_reshape(ctx, gopt_nn_mlp_forward(ctx, &p->cand, in), 2, rs);
    *logits = gopt_nn_concat(ctx, sc, stop, 1);
  }
  *value = gopt_nn_mlp_forward(ctx, &p->value, g);
  return gopt_nn_ctx_status(ctx, err);
}

int gopt_seq_policy_probs(gopt_seq_policy *p, const gopt_seq_obs *obs, double *probs, gopt_error *err) {
  seq_step s;
  int rc = seq_step_from_obs(p, obs, &s, err);
  if (rc) return rc;
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  gopt_nn_tensor *lg = NULL, *v = NULL;
  if (!ctx) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  if (!rc) gopt_nn_ctx_set_training(ctx, 0);
  if (!rc && !(rc = seq_forward(ctx, p, &s, &lg, &v, err))) {
    gopt_nn_tensor *pr = gopt_nn_softmax(ctx, lg);
    if (!(rc = gopt_nn_ctx_status(ctx, err)))
      for (int i = 0; i <= s.m; i++) probs[i] = pr->data[i];
  }
  gopt_nn_ctx_free(ctx);
  seq_step_free(&s);
  return rc;
}

/* ---- episodes -------------------------------------------------------------------------------- */

/* One decision: observe, record the step, sample (or argmax) its action; when imitating, record the
 * expert's accepted actions and take its first one or the policy's sample (SEQ_EXPERT_SHARE). */
static int seq_decide(gopt_nn_ctx *ctx, gopt_seq_policy *p, const gopt_seq_env *env, int mode,
                      gopt_nn_rng *rng, seq_step *s, gopt_error *err) {
  gopt_seq_obs obs;
  memset(&obs, 0, sizeof obs);
  int rc = env->observe(env->env, &obs, err);
  rc = rc ? rc : seq_step_from_obs(p, &obs, s, err);
  if (rc) return rc;
  int ex = -1;
  if (mode == SEQ_EXPERT) {
    if (!(s->ok = calloc((size_t)s->m + 1, 1))) rc = gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (state)");
    rc = rc ? rc : env->expert(env->env, s->ok, err);
    for (int a = 0; !rc && a <= s->m && ex < 0; a++)
      if (s->ok[a]) ex = a;
    if (!rc && ex < 0) rc = gopt_error_set(err, GOPT_EINVAL, "learn: the expert accepts none of %d candidates or STOP", s->m);
  }
  if (rc) { seq_step_free(s); return rc; }
  gopt_nn_tensor *lg = NULL, *v = NULL, *lp = NULL;
  gopt_nn_ctx_reset(ctx);
  gopt_nn_ctx_set_training(ctx, 0);
  if (!(rc = seq_forward(ctx, p, s, &lg, &v, err))) {
    gopt_nn_categorical_sample(lg, rng, mode == SEQ_GREEDY, &s->action);
    if (mode == SEQ_EXPERT && gopt_nn_rng_uniform(rng) < SEQ_EXPERT_SHARE) s->action = ex;
    lp = gopt_nn_categorical_logprob(ctx, lg, &s->action);
    rc = gopt_nn_ctx_status(ctx, err);
  }
  if (rc) { seq_step_free(s); return rc; }
  s->logp_old = lp->data[0];
  s->value = v->data[0];
  return 0;
}

void seq_steps_clear(seq_steps *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) seq_step_free(&v->a[i]);
  free(v->a);
  memset(v, 0, sizeof *v);
}

int seq_episode(gopt_nn_ctx *ctx, gopt_seq_policy *p, const gopt_seq_env *env, size_t graph, int mode,
                gopt_nn_rng *rng, int max_steps, seq_steps *v, double *ret, gopt_error *err) {
  *ret = 0;
  int rc = env->reset(env->env, graph, err);
  for (int t = 0; !rc && t < max_steps; t++) {
    if (v->n == v->cap) {
      seq_step *q = realloc(v->a, (v->cap * 2 + 16) * sizeof *q);
      if (!q) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory (episode)");
      v->a = q;
      v->cap = v->cap * 2 + 16;
    }
    seq_step *s = &v->a[v->n];
    if ((rc = seq_decide(ctx, p, env, mode, rng, s, err))) break;
    v->n++;
    int action = s->action == s->m ? GOPT_SEQ_STOP : s->action, done = 0;
    if ((rc = env->step(env->env, action, &s->reward, &done, err))) break;
    *ret += s->reward;
    if (done || action == GOPT_SEQ_STOP) break;
  }
  return rc;
}

int gopt_seq_run(gopt_seq_policy *p, const gopt_seq_env *env, size_t graph, int greedy, uint64_t seed,
                 int max_steps, double *ret, int *steps, gopt_error *err) {
  gopt_nn_ctx *ctx = gopt_nn_ctx_new(0);
  if (!ctx) return gopt_error_set(err, GOPT_ENOMEM, "learn: out of memory");
  gopt_nn_rng rng;
  gopt_nn_rng_seed(&rng, seed);
  seq_steps v = {0};
  double r = 0;
  int rc = seq_episode(ctx, p, env, graph, greedy ? SEQ_GREEDY : SEQ_SAMPLE, &rng, max_steps > 0 ? max_steps : 16, &v,
                       &r, err);
  if (ret) *ret = r;
  if (steps) *steps = (int)v.n;
  seq_steps_clear(&v);
  gopt_nn_ctx_free(ctx);
  return rc;
}

/* ---- files ----------------------------------------------------------------------------------- */

typedef struct sbuf { char *p; size_t n, cap; int oom; } sbuf;
static void sput(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sput(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->oom || k < 0) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t c = (b->n + (size_t)k + 1) * 2;
    char *q = realloc(b->p, c);
    if (!q) { b->oom = 1; return; }
    b->p = q;
    b->cap = c;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

int gopt_seq_policy_save(const gopt_seq_policy *p, const char *path, gopt_error *err) {
  sbuf m = {0};
  const gopt_seq_arch *a = &p->arch;
  sput(&m, "task seq:%s\nseq_version %d\n", p->kind, SEQ_VERSION);
  sput(&m, "seq_arch %d %d %d %d %d\n", a->node_feat, a->cand_feat, a->hidden, a->sage_layers, a->mlp_hidden);
  sput(&m, "iters %lld\ntrain_state %d\ntotal_iters %lld\nn_graphs %zu\nbest %a\n", (long long)p->iter, p->has_train,
       (long long)p->total_iters, p->n_graphs, p->best_ret);
  for (const char *s = p->trainset; s && *s;) {
    const char *e = strchr(s, '\n');
    int l = e ? (int)(e - s) : (int)strlen(s);
    sput(&m, "set %.*s\n", l, s);
    s += l + (e ? 1 : 0);
  }
  unsigned char *ck = p->ckpt;
  size_t ckn = p->ckpt_len;
  int rc = 0;
  if (!(p->has_train && ck) && (rc = learn_ckpt_to_blob(p->params, NULL, NULL, p->iter, &ck, &ckn, err))) { free(m.p); return rc; }
  rc = m.oom ? gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the policy", path)
             : learn_file_write(path, m.p, m.n, ck, ckn, err);
  if (ck != p->ckpt) free(ck);
  free(m.p);
  return rc;
}

/* Parses the metadata into a fresh policy of the right architecture (weights not loaded yet). */
static int seq_parse_meta(const char *path, char *meta, const char *kind, gopt_seq_policy **out, gopt_error *err) {
  char got[64] = "";
  int ver = -1, has_train = 0;
  gopt_seq_arch a = {0};
  long long iters = 0, total = 0;
  size_t ng = 0;
  double best = NAN;
  sbuf set = {0};
  int rc = 0;
  for (char *line = strtok(meta, "\n"); line; line = strtok(NULL, "\n")) {
    char name[32];
    if (!strncmp(line, "task ", 5)) snprintf(got, sizeof got, "%s", line + 5);
    else if (sscanf(line, "seq_version %d", &ver) == 1) {}
    else if (sscanf(line, "seq_arch %d %d %d %d %d", &a.node_feat, &a.cand_feat, &a.hidden, &a.sage_layers, &a.mlp_hidden) == 5) {}
    else if (sscanf(line, "iters %lld", &iters) == 1) {}
    else if (sscanf(line, "train_state %d", &has_train) == 1) {}
    else if (sscanf(line, "total_iters %lld", &total) == 1) {}
    else if (sscanf(line, "n_graphs %zu", &ng) == 1) {}
    else if (sscanf(line, "best %la", &best) == 1) {}
    else if (!strncmp(line, "set ", 4)) sput(&set, "%s\n", line + 4);
    else if (strncmp(got, "seq:", 4)) break; /* a task policy: its own lines are not ours */
    else if (sscanf(line, "%31s", name) == 1) { rc = gopt_error_set(err, GOPT_EPARSE, "%s: unknown policy metadata '%s'", path, name); goto done; }
  }
  if (strncmp(got, "seq:", 4) || strcmp(got + 4, kind)) {
    rc = gopt_error_set(err, GOPT_EINVAL, "%s: policy is for '%s', not 'seq:%s'", path, got[0] ? got : "?", kind);
    goto done;
  }
  if (ver != SEQ_VERSION) { rc = gopt_error_set(err, GOPT_EUNSUP, "%s: sequential policy version %d, this build reads %d (retrain it)", path, ver, SEQ_VERSION); goto done; }
  if (set.oom) { rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path); goto done; }
  if ((rc = gopt_seq_policy_new(kind, &a, 0, out, err))) { gopt_error_prefix(err, "%s: ", path); goto done; }
  gopt_seq_policy *p = *out;
  if (set.p) { free(p->trainset); p->trainset = set.p; set.p = NULL; }
  p->iter = iters;
  p->total_iters = total;
  p->has_train = has_train;
  p->n_graphs = ng;
  p->best_ret = best;
done:
  free(set.p);
  return rc;
}

int gopt_seq_policy_load(const char *path, const char *kind, gopt_seq_policy **out, gopt_error *err) {
  *out = NULL;
  learn_file f;
  int rc = learn_file_read(path, &f, err);
  if (rc) return rc;
  if (!(rc = seq_parse_meta(path, f.meta, kind, out, err)))
    rc = learn_file_restore(path, &f, (*out)->params, (*out)->has_train, &(*out)->ckpt, &(*out)->ckpt_len, err);
  if (rc) { gopt_seq_policy_free(*out); *out = NULL; }
  learn_file_free(&f);
  return rc;
}
