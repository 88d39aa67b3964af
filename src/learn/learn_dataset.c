/* learn_dataset.c: the local advantage dataset (localadv.h): collection by Gibbs sampling (its
 * on_sample stream regrouped into per-variable records), the file format (magic, version,
 * checksum, atomic write), loading with one-line errors, appending datasets. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "learn/learn_localadv.h"

static const char LA_MAGIC[8] = {'G', 'O', 'P', 'T', 'L', 'A', 'D', '1'};

static int lad_oom(gopt_error *err) { return gopt_error_set(err, GOPT_ENOMEM, "dataset: out of memory"); }

int gopt_ladata_new(int task, gopt_ladata **out, gopt_error *err) {
  *out = NULL;
  if (task != GOPT_TASK_FUSION && task != GOPT_TASK_PLACEMENT)
    return gopt_error_set(err, GOPT_EINVAL,
                          "dataset: task '%s' has continuous priority variables; local advantage "
                          "supports fusion and placement", gopt_task_name(task) ? gopt_task_name(task) : "?");
  gopt_ladata *d = calloc(1, sizeof *d);
  if (!d) return lad_oom(err);
  d->task = task;
  *out = d;
  return 0;
}

static void graph_free(ladata_graph *g) {
  free(g->model);
  free(g->cluster);
  free(g->card);
  free(g->dflt);
  free(g->var);
  free(g->cfg);
  free(g->cost_off);
  free(g->cost);
}

void gopt_ladata_free(gopt_ladata *d) {
  if (!d) return;
  for (size_t i = 0; i < d->n; i++) graph_free(&d->g[i]);
  free(d->g);
  free(d);
}

int gopt_ladata_task(const gopt_ladata *d) { return d->task; }
size_t gopt_ladata_graphs(const gopt_ladata *d) { return d->n; }
const char *gopt_ladata_model(const gopt_ladata *d, size_t g) { return g < d->n ? d->g[g].model : NULL; }
const char *gopt_ladata_cluster(const gopt_ladata *d, size_t g) { return g < d->n ? d->g[g].cluster : NULL; }
size_t gopt_ladata_records(const gopt_ladata *d, size_t g) { return g < d->n ? d->g[g].nrec : 0; }

long ladata_add_graph(gopt_ladata *d, const char *model, const char *cluster, uint64_t hash,
                      uint32_t nvars, const uint8_t *card, const uint8_t *dflt) {
  if (d->n == d->cap) {
    size_t c = d->cap ? 2 * d->cap : 8;
    ladata_graph *q = realloc(d->g, c * sizeof *q);
    if (!q) return -1;
    d->g = q;
    d->cap = c;
  }
  ladata_graph *g = &d->g[d->n];
  memset(g, 0, sizeof *g);
  g->model = strdup(model);
  g->cluster = strdup(cluster);
  g->card = malloc((size_t)nvars + 1);
  g->dflt = malloc((size_t)nvars + 1);
  if (!g->model || !g->cluster || !g->card || !g->dflt) {
    graph_free(g);
    return -1;
  }
  memcpy(g->card, card, nvars);
  memcpy(g->dflt, dflt, nvars);
  g->hash = hash;
  g->nvars = nvars;
  return (long)d->n++;
}

int ladata_add_record(ladata_graph *g, uint32_t var, const uint8_t *cfg, const double *cost) {
  size_t k = g->card[var];
  if (g->nrec == g->rcap) {
    size_t c = g->rcap ? 2 * g->rcap : 256;
    uint32_t *v = realloc(g->var, c * sizeof *v);
    if (v) g->var = v;
    size_t *o = realloc(g->cost_off, c * sizeof *o);
    if (o) g->cost_off = o;
    uint8_t *f = realloc(g->cfg, c * (size_t)g->nvars + 1);
    if (f) g->cfg = f;
    if (!v || !o || !f) return GOPT_ENOMEM;
    g->rcap = c;
  }
  if (g->ncost + k > g->ccap) {
    size_t c = g->ccap ? 2 * g->ccap : 1024;
    while (c < g->ncost + k) c *= 2;
    double *q = realloc(g->cost, c * sizeof *q);
    if (!q) return GOPT_ENOMEM;
    g->cost = q;
    g->ccap = c;
  }
  g->var[g->nrec] = var;
  memcpy(g->cfg + g->nrec * g->nvars, cfg, g->nvars);
  g->cost_off[g->nrec] = g->ncost;
  memcpy(g->cost + g->ncost, cost, k * sizeof *cost);
  g->ncost += k;
  g->nrec++;
  return 0;
}

/* ---- collection ---------------------------------------------------------------------------- */
/* Gibbs reports each visited variable's choices 0, 1, ..., card - 1 consecutively, configurations
 * differing only in that variable (search_gibbs.c); a group that is cut short or does not follow
 * the pattern is dropped. */
typedef struct collect_state {
  ladata_graph *g;
  const gopt_env_var *vars;
  size_t nv;
  double *first;          /* [nv] the group's first configuration */
  double cost[256];
  long var;               /* the group's variable, -1 before its second member */
  size_t len;             /* members so far (0: no group) */
  uint8_t *cfg;           /* [nv] */
  int rc;
} collect_state;

/* The single variable where a and b differ, -1 when none, -2 when several. */
static long diff_one(const double *a, const double *b, size_t n) {
  long at = -1;
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) {
      if (at >= 0) return -2;
      at = (long)i;
    }
  return at;
}

static void collect_restart(collect_state *s, const double *x, const gopt_env_result *r) {
  memcpy(s->first, x, s->nv * sizeof *x);
  s->cost[0] = r->objective;
  s->len = 1;
  s->var = -1;
}

static void collect_sample(const double *x, const gopt_env_result *r, void *user) {
  collect_state *s = user;
  if (s->rc) return;
  if (s->len == 0) {
    collect_restart(s, x, r);
    return;
  }
  long i = diff_one(s->first, x, s->nv);
  int fits = i >= 0 && (s->var < 0 ? s->first[i] == 0 && x[i] == 1 : i == s->var && x[i] == (double)s->len);
  if (!fits || s->len >= 256) {
    collect_restart(s, x, r);
    return;
  }
  s->var = i;
  s->cost[s->len++] = r->objective;
  if (s->len < (size_t)s->vars[i].card) return;
  for (size_t j = 0; j < s->nv; j++) s->cfg[j] = (uint8_t)s->first[j];
  s->cfg[i] = 0;
  if (ladata_add_record(s->g, (uint32_t)i, s->cfg, s->cost)) s->rc = GOPT_ENOMEM;
  s->len = 0;
}

int gopt_ladata_collect(gopt_ladata *d, gopt_env *e, const char *model, const char *cluster,
                        const gopt_search_opts *o, size_t *n_records, gopt_error *err) {
  if (n_records) *n_records = 0;
  if (gopt_env_task(e) != d->task)
    return gopt_error_set(err, GOPT_EINVAL, "dataset: %s is a '%s' environment, the dataset is for '%s'", model,
                          gopt_task_name(gopt_env_task(e)), gopt_task_name(d->task));
  size_t nv = gopt_env_nvars(e);
  const gopt_env_var *vars = gopt_env_vars(e);
  if (nv > UINT32_MAX) return gopt_error_set(err, GOPT_EINVAL, "dataset: %s: too many variables", model);
  uint8_t *card = malloc(nv + 1), *dflt = malloc(nv + 1);
  double *x0 = malloc((nv + 1) * sizeof *x0), *xb = malloc((nv + 1) * sizeof *xb);
  collect_state s = {.vars = vars, .nv = nv, .first = malloc((nv + 1) * sizeof(double)), .cfg = malloc(nv + 1)};
  int rc = 0;
  if (!card || !dflt || !x0 || !xb || !s.first || !s.cfg) { rc = lad_oom(err); goto done; }
  gopt_env_default(e, x0);
  for (size_t i = 0; i < nv; i++) {
    if (vars[i].kind == GOPT_VAR_PRIORITY || vars[i].card < 1 || vars[i].card > 255) {
      rc = gopt_error_set(err, GOPT_EINVAL, "dataset: %s: variable %zu is not discrete with at most 255 choices", model, i);
      goto done;
    }
    card[i] = (uint8_t)vars[i].card;
    dflt[i] = (uint8_t)x0[i];
  }
  long gi = ladata_add_graph(d, model, cluster, gopt_graph_hash(gopt_env_graph(e)), (uint32_t)nv, card, dflt);
  if (gi < 0) { rc = lad_oom(err); goto done; }
  s.g = &d->g[gi];
  gopt_search_opts so = *o;
  so.x0 = NULL;
  so.on_sample = collect_sample;
  so.user = &s;
  gopt_search_result res;
  rc = gopt_search_run("gibbs", e, &so, xb, &res, err);
  if (!rc && s.rc) rc = lad_oom(err);
  if (!rc && n_records) *n_records = s.g->nrec;
done:
  free(card);
  free(dflt);
  free(x0);
  free(xb);
  free(s.first);
  free(s.cfg);
  return rc;
}

int gopt_ladata_check_env(const gopt_ladata *d, size_t gi, const gopt_env *e, gopt_error *err) {
  const ladata_graph *g = &d->g[gi];
  if (gopt_env_task(e) != d->task)
    return gopt_error_set(err, GOPT_EINVAL, "dataset graph %s: environment is '%s', dataset '%s'", g->model,
                          gopt_task_name(gopt_env_task(e)), gopt_task_name(d->task));
  size_t nv = gopt_env_nvars(e);
  if (nv != g->nvars)
    return gopt_error_set(err, GOPT_EINVAL, "dataset graph %s: %zu variables, the dataset has %u (another graph?)",
                          g->model, nv, g->nvars);
  if (gopt_graph_hash(gopt_env_graph(e)) != g->hash)
    return gopt_error_set(err, GOPT_EINVAL, "dataset graph %s: the model's structure differs from the one collected", g->model);
  const gopt_env_var *vars = gopt_env_vars(e);
  double *x = malloc((nv + 1) * sizeof *x);
  if (!x) return lad_oom(err);
  gopt_env_default(e, x);
  int rc = 0;
  for (size_t i = 0; i < nv && !rc; i++)
    if (vars[i].card != g->card[i] || x[i] != g->dflt[i])
      rc = gopt_error_set(err, GOPT_EINVAL, "dataset graph %s@%s: variable %zu differs (choices or default)",
                          g->model, g->cluster, i);
  free(x);
  return rc;
}

int gopt_ladata_append(gopt_ladata *d, const gopt_ladata *src, gopt_error *err) {
  if (src->task != d->task)
    return gopt_error_set(err, GOPT_EINVAL, "dataset: cannot join a '%s' dataset to a '%s' one",
                          gopt_task_name(src->task), gopt_task_name(d->task));
  for (size_t i = 0; i < src->n; i++) {
    const ladata_graph *s = &src->g[i];
    long gi = ladata_add_graph(d, s->model, s->cluster, s->hash, s->nvars, s->card, s->dflt);
    if (gi < 0) return lad_oom(err);
    for (size_t r = 0; r < s->nrec; r++)
      if (ladata_add_record(&d->g[gi], s->var[r], s->cfg + r * s->nvars, s->cost + s->cost_off[r]))
        return lad_oom(err);
  }
  return 0;
}

/* ---- file ---------------------------------------------------------------------------------- */
static void ob_u32(learn_buf *b, uint32_t v) { learn_buf_put(b, &v, 4); }
static void ob_u64(learn_buf *b, uint64_t v) { learn_buf_put(b, &v, 8); }
static void ob_str(learn_buf *b, const char *s) {
  ob_u32(b, (uint32_t)strlen(s));
  learn_buf_put(b, s, strlen(s));
}

int gopt_ladata_save(const gopt_ladata *d, const char *path, gopt_error *err) {
  learn_buf b = {0};
  learn_buf_put(&b, LA_MAGIC, 8);
  ob_u32(&b, GOPT_LADATA_VERSION);
  ob_u32(&b, (uint32_t)d->task);
  ob_u32(&b, (uint32_t)d->n);
  for (size_t i = 0; i < d->n; i++) {
    const ladata_graph *g = &d->g[i];
    ob_str(&b, g->model);
    ob_str(&b, g->cluster);
    ob_u64(&b, g->hash);
    ob_u32(&b, g->nvars);
    learn_buf_put(&b, g->card, g->nvars);
    learn_buf_put(&b, g->dflt, g->nvars);
    ob_u64(&b, g->nrec);
    for (size_t r = 0; r < g->nrec; r++) {
      ob_u32(&b, g->var[r]);
      learn_buf_put(&b, g->cfg + r * g->nvars, g->nvars);
      learn_buf_put(&b, g->cost + g->cost_off[r], g->card[g->var[r]] * sizeof(double));
    }
  }
  uint64_t h = b.oom ? 0 : gopt_hash_bytes(b.p, b.n, 0);
  ob_u64(&b, h);
  int rc = b.oom ? gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the dataset", path)
                 : gopt_file_write_atomic(path, b.p, b.n, err);
  free(b.p);
  return rc;
}

typedef struct ibuf { const unsigned char *p; size_t n, at; int bad; } ibuf;
static const void *ib_get(ibuf *b, size_t n) {
  if (b->bad || n > b->n - b->at) { b->bad = 1; return NULL; }
  const void *q = b->p + b->at;
  b->at += n;
  return q;
}
static uint32_t ib_u32(ibuf *b) {
  const void *q = ib_get(b, 4);
  uint32_t v = 0;
  if (q) memcpy(&v, q, 4);
  return v;
}
static uint64_t ib_u64(ibuf *b) {
  const void *q = ib_get(b, 8);
  uint64_t v = 0;
  if (q) memcpy(&v, q, 8);
  return v;
}
static char *ib_str(ibuf *b) {
  uint32_t l = ib_u32(b);
  const char *q = ib_get(b, l);
  char *s = q ? malloc((size_t)l + 1) : NULL;
  if (s) { memcpy(s, q, l); s[l] = 0; }
  return s;
}

/* Reads the graphs after the header; returns 0, 1 when the data runs out or is inconsistent, or
 * GOPT_ENOMEM. */
static int load_graphs(ibuf *b, gopt_ladata *d, uint32_t ng) {
  double cost[256];
  for (uint32_t i = 0; i < ng; i++) {
    char *model = ib_str(b), *cluster = ib_str(b);
    uint64_t hash = ib_u64(b);
    uint32_t nv = ib_u32(b);
    const uint8_t *card = ib_get(b, nv), *dflt = ib_get(b, nv);
    uint64_t nrec = ib_u64(b);
    long gi = b->bad || !model || !cluster ? -2 : ladata_add_graph(d, model, cluster, hash, nv, card, dflt);
    free(model);
    free(cluster);
    if (gi == -1) return GOPT_ENOMEM;
    if (gi < 0) return 1;
    for (uint32_t v = 0; v < nv; v++)
      if (card[v] < 1 || dflt[v] >= card[v]) return 1;
    for (uint64_t r = 0; r < nrec; r++) {
      uint32_t var = ib_u32(b);
      const uint8_t *cfg = ib_get(b, nv);
      if (b->bad || var >= nv) return 1;
      const void *c = ib_get(b, card[var] * sizeof(double));
      if (!c) return 1;
      memcpy(cost, c, card[var] * sizeof(double));
      for (uint32_t v = 0; v < nv; v++)
        if (cfg[v] >= card[v]) return 1;
      if (ladata_add_record(&d->g[gi], var, cfg, cost)) return GOPT_ENOMEM;
    }
  }
  return 0;
}

int gopt_ladata_load(const char *path, gopt_ladata **out, gopt_error *err) {
  *out = NULL;
  void *v = NULL;
  size_t n = 0;
  int rc = gopt_file_read(path, &v, &n, err);
  if (rc) return rc;
  gopt_ladata *d = NULL;
  ibuf b = {v, n, 0, 0};
  if (n < 8 || memcmp(v, LA_MAGIC, 8)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: not a gopt local advantage dataset (bad magic)", path);
    goto done;
  }
  if (n < 8 + 12 + 8) goto trunc;
  uint64_t h;
  memcpy(&h, (unsigned char *)v + n - 8, 8);
  b.at = 8;
  uint32_t ver = ib_u32(&b), task = ib_u32(&b), ng = ib_u32(&b);
  if (ver != GOPT_LADATA_VERSION) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: dataset format version %u, this build reads %d", path, ver, GOPT_LADATA_VERSION);
    goto done;
  }
  if (gopt_hash_bytes(v, n - 8, 0) != h) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: dataset checksum mismatch (truncated or corrupted)", path);
    goto done;
  }
  if ((rc = gopt_ladata_new((int)task, &d, err))) {
    gopt_error_prefix(err, "%s: ", path);
    goto done;
  }
  b.n = n - 8;
  int lr = load_graphs(&b, d, ng);
  if (lr == GOPT_ENOMEM) { rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path); goto done; }
  if (lr || b.at != b.n) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: dataset is inconsistent (bad record or length)", path);
    goto done;
  }
  *out = d;
  d = NULL;
  goto done;
trunc:
  rc = gopt_error_set(err, GOPT_EPARSE, "%s: dataset is truncated", path);
done:
  gopt_ladata_free(d);
  free(v);
  return rc;
}
