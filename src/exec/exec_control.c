/* exec_control.c: ONNX control flow in the executor: If, Loop and Scan run their sub-graphs
 * (docs/IR.md keeps them as GRAPH attributes). Each execution of a sub-graph works on a copy of
 * it: the values it is given (branch/body inputs) and the outer-scope tensors it reads become
 * constants of the copy, shape inference runs again (so shapes that depend on an iteration's
 * values, e.g. a Slice at the iteration number, are static), and a nested executor runs it.
 * Correct rather than fast: every iteration re-plans its body. The outer-scope tensors a node's
 * sub-graphs read are added to the step's inputs so the planner keeps them alive until then.
 * Semantics as the ONNX operator specification states them (If-1/11/13, Loop-1/11/13, Scan-8/9+). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

#define NODE (k->node)
#define G (x->g)
#define CF_MAX_IO 64
#define CF_MAX_TRIPS 100000000LL /* a Loop without a trip count past this many rounds is an error */

static const char *cf_type(const gopt_exec *x, int32_t n) { return gopt_node_type(x->g, n); }

static int cf_is_control(const char *t) {
  return !strcmp(t, "If") || !strcmp(t, "Loop") || !strcmp(t, "Scan");
}

static const gopt_graph *cf_sub(const gopt_graph *g, int32_t n, const char *name) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  return a && a->kind == GOPT_ATTR_GRAPH ? g->subgraphs.a[a->v.graph] : NULL;
}

static size_t cf_bytes(const gopt_exec *x, int32_t t) {
  return (size_t)ex_numel(x, t) * gopt_dtype_size(ex_dtype(x, t));
}

/* Whether tensor t of s is an outer-scope reference (no producer, not an input or constant). */
static int cf_outer_ref(const gopt_graph *s, size_t t) {
  const gopt_tensor *tt = &s->tensors.a[t];
  return tt->producer < 0 && !(tt->flags & (GOPT_T_INPUT | GOPT_T_CONST)) && tt->first_use >= 0;
}

/* Adds to k->in every tensor of x's graph that a sub-graph of node n (at any depth) reads. */
static int cf_add_implicit(gopt_exec *x, ex_kernel *k, const gopt_graph *s) {
  for (size_t t = 0; t < s->tensors.n; t++) {
    if (!cf_outer_ref(s, t)) continue;
    int32_t o = gopt_graph_find_tensor(G, gopt_graph_str(s, s->tensors.a[t].name));
    if (o < 0) continue; /* defined in an enclosing sub-graph: its own executor binds it */
    int dup = 0;
    for (int i = 0; i < k->n_in && !dup; i++) dup = k->in[i] == o;
    if (dup) continue;
    int32_t *in = realloc(k->in, (size_t)(k->n_in + 2) * sizeof *in);
    if (!in) return GOPT_ENOMEM;
    k->in = in;
    k->in[k->n_in++] = o;
  }
  for (size_t i = 0; i < s->subgraphs.n; i++) {
    int rc = cf_add_implicit(x, k, s->subgraphs.a[i]);
    if (rc) return rc;
  }
  return GOPT_OK;
}

/* Makes every outer-scope reference of c (and of its sub-graphs) to a tensor of x a constant with
 * that tensor's current value. */
static int cf_bind_outer(const gopt_exec *x, gopt_graph *c, gopt_error *err) {
  for (size_t t = 0; t < c->tensors.n; t++) {
    if (!cf_outer_ref(c, t)) continue;
    int32_t o = gopt_graph_find_tensor(G, gopt_graph_str(c, c->tensors.a[t].name));
    if (o < 0 || !ex_data(x, o)) continue;
    c->tensors.a[t].dtype = (uint8_t)ex_dtype(x, o);
    c->tensors.a[t].flags &= (uint16_t)~GOPT_T_NOSHAPE;
    int rc = gopt_tensor_set_shape(c, (int32_t)t, ex_rank(x, o), ex_dims(x, o));
    if (!rc) rc = gopt_tensor_set_const(c, (int32_t)t, ex_data(x, o), cf_bytes(x, o), err);
    if (rc) return rc;
  }
  for (size_t i = 0; i < c->subgraphs.n; i++) {
    int rc = cf_bind_outer(x, c->subgraphs.a[i], err);
    if (rc) return rc;
  }
  return GOPT_OK;
}

/* Runs sub-graph s of node n once: in[0..nin) are its inputs (borrowed), out[0..nout) receive its
 * outputs (caller clears them). Errors name the node and the sub-graph. */
static int cf_run(gopt_exec *x, int32_t n, const gopt_graph *s, const gopt_host_tensor *in, size_t nin,
                  gopt_host_tensor *out, size_t nout, gopt_error *err) {
  gopt_error sub = {0};
  gopt_exec *e = NULL;
  int rc = GOPT_OK;
  const char *sname = gopt_graph_str(s, s->name);
  if (s->inputs.n != nin || s->outputs.n != nout)
    return ex_node_error(x, n, err, GOPT_EINVAL, "sub-graph '%s' has %zu inputs and %zu outputs, %zu and %zu expected",
                         sname, s->inputs.n, s->outputs.n, nin, nout);
  gopt_graph *c = gopt_graph_clone(s);
  if (!c) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t i = 0; i < nin && !rc; i++) {
    int32_t t = c->inputs.a[i];
    c->tensors.a[t].dtype = (uint8_t)in[i].dtype;
    c->tensors.a[t].flags &= (uint16_t)~GOPT_T_NOSHAPE;
    rc = gopt_tensor_set_shape(c, t, in[i].rank, in[i].dims);
    if (!rc) rc = gopt_tensor_set_const(c, t, in[i].data, in[i].nbytes, &sub);
  }
  if (!rc) rc = cf_bind_outer(x, c, &sub);
  if (!rc && !c->opsets.n) rc = gopt_graph_set_opset(c, "", gopt_graph_opset(s, "", x->opset));
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  if (!rc) rc = gopt_infer_shapes(c, &io, &sub);
  gopt_exec_opts o = {0};
  o.threads = x->threads;
  o.seed = x->seed;
  if (!rc) rc = gopt_exec_new(c, &o, &e, NULL, &sub);
  if (!rc) rc = gopt_exec_run(e, &sub);
  for (size_t i = 0; i < nout && !rc; i++) rc = gopt_exec_get_output(e, i, &out[i], &sub);
  gopt_exec_free(e);
  gopt_graph_free(c);
  if (rc) return ex_node_error(x, n, err, rc, "sub-graph '%s': %s", sname, sub.msg);
  return GOPT_OK;
}

static int cf_same_shape(const gopt_host_tensor *h, const gopt_exec *x, int32_t t) {
  if (h->dtype != ex_dtype(x, t) || h->rank != ex_rank(x, t)) return 0;
  return !h->rank || !memcmp(h->dims, ex_dims(x, t), (size_t)h->rank * sizeof *h->dims);
}

/* Copies h into the node's output i after checking its dtype and shape against the graph's. */
static int cf_store(gopt_exec *x, ex_kernel *k, int i, const gopt_host_tensor *h, gopt_error *err) {
  int32_t t = k->out[i];
  if (t < 0) return GOPT_OK;
  if (!cf_same_shape(h, x, t)) {
    char a[160], b[160];
    size_t p = 0, q = 0;
    for (int j = 0; j < h->rank && p < sizeof a; j++) p += (size_t)snprintf(a + p, sizeof a - p, "%s%lld", j ? "," : "", (long long)h->dims[j]);
    for (int j = 0; j < ex_rank(x, t) && q < sizeof b; j++) q += (size_t)snprintf(b + q, sizeof b - q, "%s%lld", j ? "," : "", (long long)ex_dims(x, t)[j]);
    a[p < sizeof a ? p : sizeof a - 1] = 0, b[q < sizeof b ? q : sizeof b - 1] = 0;
    return ex_node_error(x, NODE, err, GOPT_ESHAPE, "output '%s': the sub-graph gives %s[%s], the graph declares %s[%s]",
                         gopt_graph_str(G, G->tensors.a[t].name), gopt_dtype_name(h->dtype), a,
                         gopt_dtype_name(ex_dtype(x, t)), b);
  }
  memcpy(ex_data(x, t), h->data, h->nbytes);
  return GOPT_OK;
}

static void cf_clear(gopt_host_tensor *h, size_t n) {
  for (size_t i = 0; i < n; i++) gopt_host_tensor_clear(&h[i]);
}

/* ---- If ------------------------------------------------------------------------------------------ */

static int run_if(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  gopt_host_tensor out[CF_MAX_IO] = {{0}};
  const uint8_t *c = ex_data(x, k->in[0]);
  const gopt_graph *s = cf_sub(G, NODE, c && c[0] ? "then_branch" : "else_branch");
  if (!s) return ex_node_error(x, NODE, err, GOPT_EINVAL, "no then_branch / else_branch graph");
  int rc = cf_run(x, NODE, s, NULL, 0, out, (size_t)k->n_out, err);
  for (int i = 0; i < k->n_out && !rc; i++) rc = cf_store(x, k, i, &out[i], err);
  cf_clear(out, (size_t)k->n_out);
  return rc;
}

/* ---- scan outputs: per-iteration values stacked along an axis ------------------------------------------ */

typedef struct cf_stack {
  gopt_host_tensor first; /* shape of one iteration's value */
  char *buf;              /* iterations in order, each first.nbytes */
  size_t n, cap;
} cf_stack;

static int cf_stack_push(cf_stack *s, const gopt_host_tensor *h) {
  if (s->n && (h->dtype != s->first.dtype || h->rank != s->first.rank || h->nbytes != s->first.nbytes ||
               memcmp(h->dims, s->first.dims, (size_t)h->rank * sizeof *h->dims)))
    return GOPT_ESHAPE;
  if (!s->n) s->first = (gopt_host_tensor){h->dtype, h->rank, {0}, NULL, h->nbytes, NULL};
  if (!s->n) memcpy(s->first.dims, h->dims, sizeof h->dims);
  if ((s->n + 1) * h->nbytes > s->cap) {
    size_t cap = 2 * (s->n + 1) * (h->nbytes ? h->nbytes : 1);
    char *b = realloc(s->buf, cap);
    if (!b) return GOPT_ENOMEM;
    s->buf = b;
    s->cap = cap;
  }
  if (h->nbytes) memcpy(s->buf + s->n * h->nbytes, h->data, h->nbytes);
  s->n++;
  return GOPT_OK;
}

/* Writes the stacked iterations into host tensor *o (allocated): shape of one iteration with the
 * iteration count inserted at axis; reverse: last iteration first. */
static int cf_stack_take(const cf_stack *s, int axis, int reverse, gopt_host_tensor *o) {
  const gopt_host_tensor *f = &s->first;
  if (f->rank + 1 > GOPT_MAX_RANK || axis < 0 || axis > f->rank) return GOPT_EINVAL;
  memset(o, 0, sizeof *o);
  o->dtype = f->dtype;
  o->rank = f->rank + 1;
  int64_t outer = 1;
  for (int i = 0, j = 0; i < o->rank; i++) o->dims[i] = i == axis ? (int64_t)s->n : f->dims[j++];
  for (int i = 0; i < axis; i++) outer *= f->dims[i];
  size_t inner = outer ? f->nbytes / (size_t)outer : 0;
  o->nbytes = f->nbytes * s->n;
  o->data = malloc(o->nbytes + 1);
  if (!o->data) return GOPT_ENOMEM;
  for (size_t t = 0; t < s->n; t++) {
    size_t src = reverse ? s->n - 1 - t : t;
    for (int64_t q = 0; q < outer; q++)
      memcpy((char *)o->data + ((size_t)q * s->n + t) * inner, s->buf + src * f->nbytes + (size_t)q * inner, inner);
  }
  return GOPT_OK;
}

/* ---- Loop ------------------------------------------------------------------------------------------ */

/* Loop: inputs M (trip count, optional), cond (optional), N loop-carried values; the body takes
 * (iteration, cond, N values) and gives (cond, N values, K scan values); outputs: the N final
 * values, then the K scan values stacked along a new first axis. */
static int run_loop(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *s = cf_sub(G, NODE, "body");
  int nv = G->nodes.a[NODE].n_in - 2, nk = k->n_out - nv, rc = GOPT_OK;
  if (!s || nv < 0 || nk < 0 || 2 + nv > CF_MAX_IO || 1 + nv + nk > CF_MAX_IO)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs a body graph and at most %d values", CF_MAX_IO - 2);
  int64_t M = -1, iter = 0;
  uint8_t cond = 1;
  if ((k->in[0] >= 0 && (ex_dtype(x, k->in[0]) != GOPT_DT_INT64 || ex_numel(x, k->in[0]) != 1)) ||
      (k->in[1] >= 0 && (ex_dtype(x, k->in[1]) != GOPT_DT_BOOL || ex_numel(x, k->in[1]) != 1)))
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "M must be one INT64 and cond one BOOL");
  if (k->in[0] >= 0) M = *(const int64_t *)ex_data(x, k->in[0]);
  if (k->in[1] >= 0) cond = *(const uint8_t *)ex_data(x, k->in[1]) != 0;
  gopt_host_tensor state[CF_MAX_IO] = {{0}}, bin[CF_MAX_IO] = {{0}}, bout[CF_MAX_IO] = {{0}};
  cf_stack st[CF_MAX_IO];
  memset(st, 0, sizeof st);
  for (int i = 0; i < nv; i++) bin[2 + i] = ex_host_view(x, k->in[2 + i]);
  for (; (M < 0 || iter < M) && cond && !rc; iter++) {
    if (M < 0 && iter >= CF_MAX_TRIPS) {
      rc = ex_node_error(x, NODE, err, GOPT_ERANGE, "loop ran %lld rounds", (long long)iter);
      break;
    }
    bin[0] = (gopt_host_tensor){GOPT_DT_INT64, 0, {0}, &iter, sizeof iter, NULL};
    bin[1] = (gopt_host_tensor){GOPT_DT_BOOL, 0, {0}, &cond, 1, NULL};
    rc = cf_run(x, NODE, s, bin, (size_t)(2 + nv), bout, (size_t)(1 + nv + nk), err);
    if (rc) break;
    cond = bout[0].nbytes && ((const uint8_t *)bout[0].data)[0];
    cf_clear(state, (size_t)nv);
    for (int i = 0; i < nv; i++) {
      state[i] = bout[1 + i]; /* ownership moves to state */
      memset(&bout[1 + i], 0, sizeof bout[1 + i]);
      bin[2 + i] = state[i];
    }
    for (int j = 0; j < nk && !rc; j++)
      if ((rc = cf_stack_push(&st[j], &bout[1 + nv + j])))
        rc = ex_node_error(x, NODE, err, rc, "scan output %d changes shape between iterations", j);
    cf_clear(bout, (size_t)(1 + nv + nk));
  }
  for (int i = 0; i < nv && !rc; i++) rc = cf_store(x, k, i, &bin[2 + i], err);
  for (int j = 0; j < nk && !rc; j++) {
    gopt_host_tensor o = {0};
    if (!st[j].n) { /* no iteration: an empty scan output */
      if (k->out[nv + j] >= 0 && ex_numel(x, k->out[nv + j]) != 0)
        rc = ex_node_error(x, NODE, err, GOPT_ESHAPE, "no iteration ran but scan output %d is not empty", j);
      continue;
    }
    rc = cf_stack_take(&st[j], 0, 0, &o);
    if (rc) rc = ex_node_error(x, NODE, err, rc, "scan output %d: out of memory or rank too large", j);
    else rc = cf_store(x, k, nv + j, &o, err);
    gopt_host_tensor_clear(&o);
  }
  cf_clear(state, (size_t)nv);
  for (int j = 0; j < nk; j++) free(st[j].buf);
  return rc;
}

/* ---- Scan ------------------------------------------------------------------------------------------ */

/* Slice t of h along axis (the axis removed) into *o (allocated). */
static int cf_slice(const gopt_host_tensor *h, int axis, int64_t t, gopt_host_tensor *o) {
  memset(o, 0, sizeof *o);
  o->dtype = h->dtype;
  o->rank = h->rank - 1;
  int64_t outer = 1, T = h->dims[axis];
  for (int i = 0, j = 0; i < h->rank; i++)
    if (i != axis) o->dims[j++] = h->dims[i];
  for (int i = 0; i < axis; i++) outer *= h->dims[i];
  o->nbytes = T && outer ? h->nbytes / (size_t)T : 0;
  size_t inner = outer ? o->nbytes / (size_t)outer : 0;
  o->data = malloc(o->nbytes + 1);
  if (!o->data) return GOPT_ENOMEM;
  for (int64_t q = 0; q < outer; q++)
    memcpy((char *)o->data + (size_t)q * inner, (const char *)h->data + ((size_t)(q * T + t)) * inner, inner);
  return GOPT_OK;
}

/* Scan layout of one call of the body loop. */
typedef struct cf_scan {
  int n, m, k;                 /* states, scan inputs, scan outputs */
  int in_axis[CF_MAX_IO], in_rev[CF_MAX_IO], out_axis[CF_MAX_IO], out_rev[CF_MAX_IO];
} cf_scan;

/* Runs body s over scan inputs in[n..n+m) with initial states in[0..n); fills res[0..n+k) (final
 * states, stacked scan outputs; allocated, caller clears). */
static int cf_scan_run(gopt_exec *x, ex_kernel *k, const gopt_graph *s, const cf_scan *sc,
                       const gopt_host_tensor *in, gopt_host_tensor *res, gopt_error *err) {
  int rc = GOPT_OK, n = sc->n, m = sc->m, nk = sc->k;
  int64_t T = -1;
  for (int j = 0; j < m; j++) {
    int a = sc->in_axis[j];
    if (a < 0 || a >= in[n + j].rank || (T >= 0 && in[n + j].dims[a] != T))
      return ex_node_error(x, NODE, err, GOPT_ESHAPE, "scan input %d: bad axis %d or a sequence length that differs", j, a);
    T = in[n + j].dims[a];
  }
  gopt_host_tensor state[CF_MAX_IO] = {{0}}, bin[CF_MAX_IO] = {{0}}, bout[CF_MAX_IO] = {{0}};
  cf_stack st[CF_MAX_IO];
  memset(st, 0, sizeof st);
  for (int i = 0; i < n; i++) bin[i] = in[i];
  for (int64_t t = 0; t < T && !rc; t++) {
    for (int j = 0; j < m && !rc; j++)
      rc = cf_slice(&in[n + j], sc->in_axis[j], sc->in_rev[j] ? T - 1 - t : t, &bin[n + j]);
    if (!rc) rc = cf_run(x, NODE, s, bin, (size_t)(n + m), bout, (size_t)(n + nk), err);
    else rc = gopt_error_set(err, rc, "out of memory");
    cf_clear(bin + n, (size_t)m);
    if (rc) break;
    cf_clear(state, (size_t)n);
    for (int i = 0; i < n; i++) {
      state[i] = bout[i];
      memset(&bout[i], 0, sizeof bout[i]);
      bin[i] = state[i];
    }
    for (int j = 0; j < nk && !rc; j++)
      if ((rc = cf_stack_push(&st[j], &bout[n + j])))
        rc = ex_node_error(x, NODE, err, rc, "scan output %d changes shape between iterations", j);
    cf_clear(bout, (size_t)(n + nk));
  }
  for (int i = 0; i < n && !rc; i++) { /* final states (copies: state may still be the inputs) */
    res[i] = bin[i];
    res[i].name = NULL;
    res[i].data = malloc(bin[i].nbytes + 1);
    if (!res[i].data) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    else memcpy(res[i].data, bin[i].data, bin[i].nbytes);
  }
  for (int j = 0; j < nk && !rc; j++) {
    if (!st[j].n) rc = ex_node_error(x, NODE, err, GOPT_EUNSUP, "scan over an empty sequence");
    else if ((rc = cf_stack_take(&st[j], sc->out_axis[j], sc->out_rev[j], &res[n + j])))
      rc = ex_node_error(x, NODE, err, rc, "scan output %d: bad axis or out of memory", j);
  }
  cf_clear(state, (size_t)n);
  for (int j = 0; j < nk; j++) free(st[j].buf);
  return rc;
}

/* Reads attribute `name` (cnt values, default 0) into v; negative axes count from rank[i] + 1 when
 * rank is given. */
static void cf_ints(const gopt_graph *g, int32_t n, const char *name, int cnt, int *v, const int *rank) {
  size_t c = 0;
  const int64_t *a = gopt_node_get_ints(g, n, name, &c);
  for (int i = 0; i < cnt; i++) {
    int64_t q = a && (size_t)i < c ? a[i] : 0;
    if (q < 0 && rank) q += rank[i];
    v[i] = (int)q;
  }
}

/* Scan-9 and later: N states then M scan inputs, axes and directions per attribute. Scan-8: an
 * optional sequence_lens first, a batch axis 0 on every input and output, scanning axis 1. */
static int run_scan(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const gopt_graph *s = cf_sub(G, NODE, "body");
  int v8 = x->opset < 9, first = v8 ? 1 : 0, nin = G->nodes.a[NODE].n_in - first, rc = GOPT_OK;
  cf_scan sc = {0};
  sc.m = (int)gopt_node_get_int(G, NODE, "num_scan_inputs", 0);
  sc.n = nin - sc.m;
  sc.k = k->n_out - sc.n;
  if (!s || sc.m < 1 || sc.n < 0 || sc.k < 0 || nin > CF_MAX_IO || k->n_out > CF_MAX_IO)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs a body graph, num_scan_inputs >= 1 and at most %d values", CF_MAX_IO);
  gopt_host_tensor in[CF_MAX_IO] = {{0}}, res[CF_MAX_IO] = {{0}};
  int rin[CF_MAX_IO], rout[CF_MAX_IO];
  for (int i = 0; i < nin; i++) {
    if (k->in[first + i] < 0 || (v8 && ex_rank(x, k->in[first + i]) < 1))
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "input %d is missing%s", first + i, v8 ? " or has no batch axis" : "");
    in[i] = ex_host_view(x, k->in[first + i]);
  }
  for (int j = 0; j < sc.m; j++) rin[j] = in[sc.n + j].rank - v8;
  for (int j = 0; j < sc.k; j++) rout[j] = k->out[sc.n + j] >= 0 ? ex_rank(x, k->out[sc.n + j]) - v8 : 1;
  cf_ints(G, NODE, "scan_input_axes", sc.m, sc.in_axis, rin);
  cf_ints(G, NODE, v8 ? "directions" : "scan_input_directions", sc.m, sc.in_rev, NULL);
  cf_ints(G, NODE, "scan_output_axes", sc.k, sc.out_axis, rout);
  cf_ints(G, NODE, "scan_output_directions", sc.k, sc.out_rev, NULL);
  if (!v8) {
    rc = cf_scan_run(x, k, s, &sc, in, res, err);
    for (int i = 0; i < k->n_out && !rc; i++) rc = cf_store(x, k, i, &res[i], err);
    cf_clear(res, (size_t)k->n_out);
    return rc;
  }
  if (first && k->in[0] >= 0 && ex_numel(x, k->in[0]) > 0)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "Scan-8 with sequence_lens is not supported");
  int64_t B = nin && in[0].rank ? in[0].dims[0] : 0;
  for (int64_t b = 0; b < B && !rc; b++) { /* each batch row: slice axis 0, scan, write row b */
    gopt_host_tensor row[CF_MAX_IO] = {{0}};
    for (int i = 0; i < nin && !rc; i++) rc = cf_slice(&in[i], 0, b, &row[i]);
    if (!rc) rc = cf_scan_run(x, k, s, &sc, row, res, err);
    for (int i = 0; i < k->n_out && !rc; i++) {
      int32_t t = k->out[i];
      size_t nb = res[i].nbytes;
      if (t < 0) continue;
      if ((size_t)B * nb != cf_bytes(x, t) || res[i].dtype != ex_dtype(x, t))
        rc = ex_node_error(x, NODE, err, GOPT_ESHAPE, "output %d: the body gives the wrong size", i);
      else memcpy((char *)ex_data(x, t) + (size_t)b * nb, res[i].data, nb);
    }
    cf_clear(row, (size_t)nin);
    cf_clear(res, (size_t)k->n_out);
  }
  return rc;
}

/* ---- dispatch (exec.c) ---------------------------------------------------------------------------- */

int ex_control_handles(const gopt_exec *x, int32_t n) {
  return !strchr(cf_type(x, n), ':') && cf_is_control(cf_type(x, n));
}

int ex_prepare_control(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *t = cf_type(x, NODE);
  const gopt_node *nd = &G->nodes.a[NODE];
  if (k->n_out > CF_MAX_IO || nd->n_in > CF_MAX_IO)
    return ex_node_error(x, NODE, err, GOPT_EUNSUP, "more than %d inputs or outputs", CF_MAX_IO);
  for (uint16_t a = 0; a < nd->n_attr; a++) {
    const gopt_attr *at = &G->attrs.a[nd->attr + a];
    if (at->kind == GOPT_ATTR_GRAPH && cf_add_implicit(x, k, G->subgraphs.a[at->v.graph]))
      return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  if (!strcmp(t, "If")) {
    if (!cf_sub(G, NODE, "then_branch") || !cf_sub(G, NODE, "else_branch") || nd->n_in < 1)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "If needs cond, then_branch and else_branch");
    k->run = run_if;
  } else if (!strcmp(t, "Loop")) {
    if (nd->n_in < 2) return ex_node_error(x, NODE, err, GOPT_EINVAL, "Loop needs inputs M and cond (either may be empty)");
    k->run = run_loop;
  } else {
    k->run = run_scan;
  }
  return GOPT_OK;
}

/* ---- order: a control node after the producers of the outer-scope tensors its sub-graphs read -------- */

/* Appends to *deps (growing) the tensors of g that sub-graph s (at any depth) reads from outer
 * scope. */
static int cf_outer_producers(const gopt_graph *g, const gopt_graph *s, int32_t **deps, size_t *n, size_t *cap) {
  for (size_t t = 0; t < s->tensors.n; t++) {
    if (!cf_outer_ref(s, t)) continue;
    int32_t o = gopt_graph_find_tensor(g, gopt_graph_str(s, s->tensors.a[t].name));
    if (o < 0) continue;
    if (*n == *cap) {
      size_t c = *cap ? 2 * *cap : 16;
      int32_t *d = realloc(*deps, c * sizeof *d);
      if (!d) return GOPT_ENOMEM;
      *deps = d;
      *cap = c;
    }
    (*deps)[(*n)++] = o;
  }
  for (size_t i = 0; i < s->subgraphs.n; i++) {
    int rc = cf_outer_producers(g, s->subgraphs.a[i], deps, n, cap);
    if (rc) return rc;
  }
  return GOPT_OK;
}

/* Node n's implicit inputs (tensors of g) into *deps (malloc'd, may be NULL when none). */
static int cf_node_deps(const gopt_graph *g, int32_t n, int32_t **deps, size_t *nd) {
  size_t cap = 0;
  *deps = NULL;
  *nd = 0;
  const gopt_node *node = &g->nodes.a[n];
  if (strchr(gopt_node_type(g, n), ':') || !cf_is_control(gopt_node_type(g, n))) return GOPT_OK;
  for (uint16_t a = 0; a < node->n_attr; a++) {
    const gopt_attr *at = &g->attrs.a[node->attr + a];
    if (at->kind != GOPT_ATTR_GRAPH) continue;
    int rc = cf_outer_producers(g, g->subgraphs.a[at->v.graph], deps, nd, &cap);
    if (rc) return rc;
  }
  return GOPT_OK;
}

static void heap_push(int32_t *h, size_t *n, int32_t v) {
  size_t i = (*n)++;
  for (; i && h[(i - 1) / 2] > v; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = v;
}
static int32_t heap_pop(int32_t *h, size_t *n) {
  int32_t top = h[0], v = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= v) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = v;
  return top;
}

/* Kahn's algorithm over the explicit edges plus the implicit ones, ready nodes taken by their
 * position in the given order. */
static int cf_reorder(const gopt_graph *g, int32_t *order, size_t n, int32_t **extra, size_t *n_extra,
                      gopt_error *err) {
  size_t nn = g->nodes.n;
  int rc = GOPT_OK;
  int32_t *pos = malloc((nn + 1) * sizeof *pos), *indeg = calloc(nn + 1, sizeof *indeg);
  int32_t *heap = malloc((n + 1) * sizeof *heap), *out = malloc((n + 1) * sizeof *out);
  if (!pos || !indeg || !heap || !out) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) pos[order[i]] = (int32_t)i;
  for (size_t i = 0; i < n; i++) {
    int32_t v = order[i];
    for (int j = 0; j < g->nodes.a[v].n_in; j++) {
      int32_t t = gopt_node_input(g, v, j);
      if (t >= 0 && g->tensors.a[t].producer >= 0) indeg[v]++;
    }
    for (size_t q = 0; q < n_extra[v]; q++) indeg[v] += g->tensors.a[extra[v][q]].producer >= 0;
  }
  size_t nh = 0, k = 0;
  for (size_t i = 0; i < n; i++)
    if (!indeg[order[i]]) heap_push(heap, &nh, (int32_t)i);
  while (nh) {
    int32_t v = order[heap_pop(heap, &nh)];
    out[k++] = v;
    for (int j = 0; j < g->nodes.a[v].n_out; j++) { /* explicit readers */
      int32_t t = gopt_node_output(g, v, j);
      for (int32_t s = t >= 0 ? g->tensors.a[t].first_use : -1; s >= 0; s = g->slots.a[s].next_use) {
        int32_t r = g->slots.a[s].node;
        if (gopt_node_alive(g, r) && --indeg[r] == 0) heap_push(heap, &nh, pos[r]);
      }
    }
    for (size_t i = 0; i < n; i++) { /* implicit readers (few control nodes) */
      int32_t r = order[i];
      for (size_t q = 0; q < n_extra[r]; q++)
        if (g->tensors.a[extra[r][q]].producer == v && --indeg[r] == 0) heap_push(heap, &nh, pos[r]);
    }
  }
  if (k != n) rc = gopt_error_set(err, GOPT_EGRAPH, "the sub-graphs' outer-scope reads make a cycle");
  else memcpy(order, out, n * sizeof *order);
done:
  free(pos);
  free(indeg);
  free(heap);
  free(out);
  return rc;
}

/* A given order must already run each control node after the producers of what its sub-graphs
 * read. */
static int cf_check_order(const gopt_graph *g, const int32_t *order, size_t n, int32_t **extra,
                          const size_t *n_extra, gopt_error *err) {
  int32_t *pos = malloc((g->nodes.n + 1) * sizeof *pos);
  if (!pos) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  int rc = GOPT_OK;
  for (size_t i = 0; i < n; i++) pos[order[i]] = (int32_t)i;
  for (size_t i = 0; i < n && !rc; i++)
    for (size_t q = 0; q < n_extra[order[i]] && !rc; q++) {
      int32_t t = extra[order[i]][q], p = g->tensors.a[t].producer;
      if (p >= 0 && pos[p] > (int32_t)i)
        rc = gopt_error_set(err, GOPT_EINVAL, "order: node '%s' runs before '%s', which produces '%s' that its sub-graphs read",
                            gopt_node_name(g, order[i]), gopt_node_name(g, p), gopt_graph_str(g, g->tensors.a[t].name));
    }
  free(pos);
  return rc;
}

int ex_control_reads(const gopt_exec *x, int32_t t) { return x->cf_reads && x->cf_reads[t]; }

int ex_control_order(gopt_exec *x, int32_t *order, size_t n, int reorder, gopt_error *err) {
  const gopt_graph *g = x->g;
  size_t nn = g->nodes.n, any = 0;
  int rc = GOPT_OK;
  int32_t **extra = calloc(nn + 1, sizeof *extra);
  size_t *n_extra = calloc(nn + 1, sizeof *n_extra);
  if (!extra || !n_extra) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && !rc; i++) {
    if ((rc = cf_node_deps(g, order[i], &extra[order[i]], &n_extra[order[i]])))
      rc = gopt_error_set(err, rc, "out of memory");
    any += n_extra[order[i]];
  }
  if (!rc && any && !x->cf_reads) { /* tensors sub-graphs read: kernels must store them */
    x->cf_reads = calloc(g->tensors.n + 1, 1);
    if (!x->cf_reads || ex_own(x, x->cf_reads)) {
      x->cf_reads = NULL;
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n && !rc; i++)
      for (size_t q = 0; q < n_extra[order[i]]; q++) x->cf_reads[extra[order[i]][q]] = 1;
  }
  if (!rc && any && reorder) rc = cf_reorder(g, order, n, extra, n_extra, err);
  if (!rc && any && !reorder) rc = cf_check_order(g, order, n, extra, n_extra, err);
  for (size_t i = 0; extra && i < nn; i++) free(extra[i]);
  free(extra);
  free(n_extra);
  return rc;
}
