/* exec.c: the executor's core: planning (execution order, fused groups, tensor lifetimes), the
 * value table and buffer planner (allocate when produced, free after last use, live/peak bytes),
 * random weights for data-less constants, inputs, the run loop with the NaN/Inf scan, outputs. */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_vec.h"
#include "gopt/costdb.h"
#include "gopt/util.h"
#include "util/util_internal.h"

/* ---- small helpers -------------------------------------------------------------------------------- */

void gopt_host_tensor_clear(gopt_host_tensor *t) {
  if (!t) return;
  free(t->data);
  free(t->name);
  memset(t, 0, sizeof *t);
}

int64_t gopt_host_tensor_numel(const gopt_host_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

int64_t ex_numel(const gopt_exec *x, int32_t t) {
  const int64_t *d = ex_dims(x, t);
  int64_t n = 1;
  for (int i = 0; i < ex_rank(x, t); i++) n *= d[i];
  return n;
}

int ex_own(gopt_exec *x, void *p) {
  if (x->n_owned == x->cap_owned) {
    size_t cap = x->cap_owned ? 2 * x->cap_owned : 64;
    void **a = realloc(x->owned_consts, cap * sizeof *a);
    if (!a) {
      free(p);
      return GOPT_ENOMEM;
    }
    x->owned_consts = a;
    x->cap_owned = cap;
  }
  x->owned_consts[x->n_owned++] = p;
  return GOPT_OK;
}

int ex_node_error(const gopt_exec *x, int32_t n, gopt_error *err, int code, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return gopt_error_set(err, code, "node '%s' (%s): %s", gopt_node_name(x->g, n),
                        gopt_node_type(x->g, n), msg);
}

int ex_is_const(const gopt_exec *x, int32_t t) {
  return t >= 0 && (x->g->tensors.a[t].flags & GOPT_T_CONST);
}

int ex_read_ints(const gopt_exec *x, int32_t t, int64_t *v, size_t cap, size_t *count) {
  int64_t n = ex_numel(x, t);
  const void *p = x->graph_only || !x->vals ? gopt_tensor_data(x->g, t) : ex_data(x, t); /* graph-level checks */
  if (!p || n < 0 || (size_t)n > cap) return GOPT_EINVAL;
  for (int64_t i = 0; i < n; i++) {
    switch (ex_dtype(x, t)) {
      case GOPT_DT_INT64: v[i] = ((const int64_t *)p)[i]; break;
      case GOPT_DT_INT32: v[i] = ((const int32_t *)p)[i]; break;
      case GOPT_DT_FLOAT: v[i] = (int64_t)((const float *)p)[i]; break;
      case GOPT_DT_DOUBLE: v[i] = (int64_t)((const double *)p)[i]; break;
      default: return GOPT_EINVAL;
    }
  }
  *count = (size_t)n;
  return GOPT_OK;
}

/* ---- buffer pool ------------------------------------------------------------------------------------ */

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Bytes of a new buffer for n bytes: n rounded up to its size class (steps of an eighth of the
 * power of two below it, at most 12.5 % spare), so that a freed buffer can serve the next tensors
 * of about its size (a DenseNet's outputs grow by one layer's channels each). */
static size_t pool_class(size_t n) {
  n = round64(n ? n : 1);
  if (n <= 4096) return n;
  size_t step = ((size_t)1 << (63 - __builtin_clzll((unsigned long long)n))) / 8;
  return (n + step - 1) / step * step;
}

/* A buffer of at least nbytes: the most recently freed one of the pool that holds them without
 * being twice their class (most likely still in the cache), else a new one; *cap: its bytes. */
static void *pool_get(gopt_exec *x, size_t nbytes, size_t *cap) {
  size_t want = pool_class(nbytes);
  for (size_t i = x->n_pool; i-- > 0;) {
    if (x->pool[i].nbytes >= want && x->pool[i].nbytes <= 2 * want) {
      void *p = x->pool[i].p;
      *cap = x->pool[i].nbytes;
      memmove(&x->pool[i], &x->pool[i + 1], (x->n_pool - i - 1) * sizeof *x->pool);
      x->n_pool--;
      return p;
    }
  }
  *cap = want;
  void *p = aligned_alloc(64, want);
  if (p) x->pool_bytes += want;
  return p;
}

/* Returns buffer p of cap bytes to the pool (the most recent at the end). */
static void pool_put(gopt_exec *x, void *p, size_t nbytes) {
  if (!p) return;
  if (x->n_pool == x->cap_pool) {
    size_t cap = x->cap_pool ? 2 * x->cap_pool : 64;
    ex_pool_ent *a = realloc(x->pool, cap * sizeof *a);
    if (!a) {
      free(p);
      return;
    }
    x->pool = a;
    x->cap_pool = cap;
  }
  x->pool[x->n_pool++] = (ex_pool_ent){nbytes, p};
}

/* ---- deterministic random numbers ------------------------------------------------------------------ */

static float urand(uint64_t *s) { return (float)((gopt_splitmix64(s) >> 40) * (1.0 / 16777216.0)); }

/* Largest valid index bound for t when it is read as Gather indices (0 when not). */
static int64_t index_bound(const gopt_graph *g, int32_t t) {
  int64_t bound = 0;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t n = g->slots.a[s].node;
    if (!gopt_node_alive(g, n) || g->nodes.a[n].op != GOPT_OP_GATHER) continue;
    if (s - (int32_t)g->nodes.a[n].in != 1) continue;
    int32_t data = gopt_node_input(g, n, 0);
    int64_t axis = gopt_node_get_int(g, n, "axis", 0);
    int r = g->tensors.a[data].rank;
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) continue;
    int64_t d = gopt_tensor_dims(g, data)[axis];
    if (d > 0 && (bound == 0 || d < bound)) bound = d;
  }
  return bound;
}

/* The role of a float constant for its first consumer: 1 = scale/variance (positive around 1). */
static int positive_role(const gopt_graph *g, int32_t t, int64_t *fan_in) {
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t n = g->slots.a[s].node;
    if (!gopt_node_alive(g, n)) continue;
    int i = s - (int32_t)g->nodes.a[n].in;
    int op = g->nodes.a[n].op;
    if (op == GOPT_OP_BATCH_NORM && (i == 1 || i == 4)) return 1;
    if (op == GOPT_OP_LAYER_NORM && i == 1) return 1;
    if (op == GOPT_OP_MATMUL && i == 1 && g->tensors.a[t].rank >= 2)
      *fan_in = gopt_tensor_dims(g, t)[g->tensors.a[t].rank - 2];
    if (op == GOPT_OP_GEMM && i == 1 && g->tensors.a[t].rank == 2)
      *fan_in = gopt_tensor_dims(g, t)[gopt_node_get_int(g, n, "transB", 0) ? 1 : 0];
    return 0;
  }
  return 0;
}

/* Fills constant t (no data) with random values; returns the buffer or NULL with err. */
static void *random_const(gopt_exec *x, int32_t t, uint64_t seed, gopt_error *err) {
  const gopt_graph *g = x->g;
  const gopt_tensor *tt = &g->tensors.a[t];
  int64_t n = ex_numel(x, t);
  size_t es = gopt_dtype_size(tt->dtype);
  void *p = malloc(round64((size_t)n * es + 1));
  if (!p) {
    gopt_error_set(err, GOPT_ENOMEM, "out of memory for random weights of '%s'",
                   gopt_graph_str(g, tt->name));
    return NULL;
  }
  const char *name = gopt_graph_str(g, tt->name);
  uint64_t s = gopt_hash_bytes(name, strlen(name), seed ^ 0x77656967ULL);
  if (tt->dtype == GOPT_DT_FLOAT) {
    float *f = p;
    int64_t fan_in = tt->rank >= 2 && tt->dims ? n / (gopt_tensor_dims(g, t)[0] ? gopt_tensor_dims(g, t)[0] : 1) : 0;
    int pos = positive_role(g, t, &fan_in);
    float lo, hi;
    if (pos) {
      lo = 0.5f;
      hi = 1.5f;
    } else if (tt->rank >= 2 && fan_in > 0) {
      hi = (float)sqrt(3.0 / (double)fan_in);
      lo = -hi;
    } else {
      lo = -0.1f;
      hi = 0.1f;
    }
    for (int64_t i = 0; i < n; i++) f[i] = lo + (hi - lo) * urand(&s);
  } else if (tt->dtype == GOPT_DT_INT64 || tt->dtype == GOPT_DT_INT32) {
    int64_t b = index_bound(g, t);
    if (b <= 0) {
      free(p);
      gopt_error_set(err, GOPT_EUNSUP,
                     "constant '%s' (%s) has no data and is not used as indices: its values "
                     "cannot be made up",
                     name, gopt_dtype_name(tt->dtype));
      return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t v = (int64_t)(gopt_splitmix64(&s) % (uint64_t)b);
      if (tt->dtype == GOPT_DT_INT64) ((int64_t *)p)[i] = v;
      else ((int32_t *)p)[i] = (int32_t)v;
    }
  } else if (tt->dtype == GOPT_DT_BOOL) {
    for (int64_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)(gopt_splitmix64(&s) & 1);
  } else {
    free(p);
    gopt_error_set(err, GOPT_EUNSUP, "constant '%s' (%s) has no data: cannot make up values",
                   name, gopt_dtype_name(tt->dtype));
    return NULL;
  }
  return p;
}

/* ---- kernels: dispatch -------------------------------------------------------------------------------- */

static int kernel_fill_io(gopt_exec *x, ex_kernel *k, int32_t n) {
  const gopt_node *nd = &x->g->nodes.a[n];
  k->node = n;
  k->group = -1;
  k->n_in = nd->n_in;
  k->n_out = nd->n_out;
  k->in = malloc((nd->n_in + 1) * sizeof *k->in);
  k->out = malloc((nd->n_out + 1) * sizeof *k->out);
  if (!k->in || !k->out) return GOPT_ENOMEM;
  for (int i = 0; i < nd->n_in; i++) k->in[i] = gopt_node_input(x->g, n, i);
  for (int i = 0; i < nd->n_out; i++) k->out[i] = gopt_node_output(x->g, n, i);
  return GOPT_OK;
}

static int prepare_kind(gopt_exec *x, ex_kernel *k, int32_t n, gopt_error *err) {
  int rc;
  int op = x->g->nodes.a[n].op;
  /* An opaque HLO node (its kind only shares the fusion class, docs/HLO.md) runs k_hlo.c's kernel
   * for its opcode, never the kind's. */
  if ((x->g->nodes.a[n].flags & GOPT_N_OPAQUE) && !strncmp(gopt_node_type(x->g, n), "hlo::", 5)) {
    if (ex_hlo_handles(x, n)) return ex_prepare_hlo(x, k, err); /* the opcodes of k_hlo.c */
    return ex_node_error(x, n, err, GOPT_EUNSUP, "op type not supported by the executor");
  }
  if (ex_control_handles(x, n)) return ex_prepare_control(x, k, err); /* If, Loop, Scan */
  if (ex_string_handles(x, n)) return ex_prepare_string(x, k, err);   /* STRING tensors */
  if (ex_ref_claims(x, n)) return ex_prepare_ref(x, k, err);
  if (ex_layout_concat_chain(x, n)) return ex_prepare_concat_bn(x, k, err);
  if (ex_layout_dnnl_claims(x, n) || ex_dnnl_handles(op)) rc = ex_prepare_dnnl(x, k, err);
  else if (ex_elem_handles(x, n)) rc = ex_prepare_elem(x, k, err);
  else if (ex_data_handles(op)) rc = ex_prepare_data(x, k, err);
  else if (ex_misc_handles(op)) rc = ex_prepare_misc(x, k, err);
  else if (!ex_ref_handles(x, n))
    return ex_node_error(x, n, err, GOPT_EUNSUP, "op type not supported by the executor");
  else rc = GOPT_EUNSUP;
  if (rc != GOPT_EUNSUP || !ex_ref_handles(x, n)) return rc;
  /* a case the specialised kernel does not cover (dtype, attribute, run-time operand): the
   * reference kernel runs it */
  if (k->fini) k->fini(k->st);
  k->fini = NULL;
  k->st = NULL;
  k->run = NULL;
  return ex_prepare_ref(x, k, err);
}

static int prepare_node(gopt_exec *x, ex_kernel *k, int32_t n, gopt_error *err) {
  int rc = kernel_fill_io(x, k, n);
  if (rc) return gopt_error_set(err, rc, "out of memory");
  rc = prepare_kind(x, k, n, err);
  if (rc != GOPT_EUNSUP || strncmp(gopt_node_type(x->g, n), "hlo::", 5) != 0 || !ex_hlo_handles(x, n))
    return rc;
  /* an HLO node with an ONNX twin in a case the ONNX kernels refuse (dtype uint32, dot's
   * dimension numbers): k_hlo.c runs it */
  if (k->fini) k->fini(k->st);
  free(k->in); /* a refusing kernel may have rewritten the step's inputs and outputs */
  free(k->out);
  memset(k, 0, sizeof *k);
  if (kernel_fill_io(x, k, n)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (err) err->code = 0, err->msg[0] = 0;
  return ex_prepare_hlo(x, k, err);
}

/* ---- planning ------------------------------------------------------------------------------------------ */

static int model_opset(const gopt_graph *g) {
  for (size_t i = 0; i < g->opsets.n; i++)
    if (g->opsets.a[i].domain == 0) return (int)g->opsets.a[i].version;
  return 17;
}

/* Reorders a topological order so that every fusion group's members are contiguous (Kahn's
 * algorithm over units: a group or a single node; ready units taken in topological position). */
static int group_order(const gopt_graph *g, const int32_t *group, int32_t *order, size_t n,
                       gopt_error *err) {
  size_t nn = g->nodes.n;
  int rc = GOPT_OK;
  int32_t *unit = malloc((nn + 1) * sizeof *unit), *indeg = calloc(nn + 1, sizeof *indeg);
  int32_t *first = malloc((nn + 1) * sizeof *first), *next = malloc((nn + 1) * sizeof *next);
  int32_t *heap = malloc((nn + 1) * sizeof *heap), *pos = malloc((nn + 1) * sizeof *pos);
  int32_t *gunit = NULL, *out = malloc((n + 1) * sizeof *out);
  int32_t max_g = -1;
  if (!unit || !indeg || !first || !next || !heap || !pos || !out) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    if (group[order[i]] > max_g) max_g = group[order[i]];
  gunit = malloc(((size_t)max_g + 2) * sizeof *gunit);
  if (!gunit) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (int32_t i = 0; i <= max_g; i++) gunit[i] = -1;
  /* a unit is named by its first member in topological order; members chained in order */
  for (size_t i = 0; i < n; i++) {
    int32_t v = order[i], gr = group[v];
    pos[v] = (int32_t)i;
    first[v] = -1;
    next[v] = -1;
    if (gr >= 0 && gunit[gr] >= 0) {
      unit[v] = gunit[gr];
      int32_t q = unit[v];
      while (next[q] >= 0) q = next[q];
      next[q] = v;
    } else {
      unit[v] = v;
      if (gr >= 0) gunit[gr] = v;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int32_t v = order[i];
    for (int j = 0; j < g->nodes.a[v].n_in; j++) {
      int32_t t = gopt_node_input(g, v, j);
      int32_t p = t >= 0 ? g->tensors.a[t].producer : -1;
      if (p >= 0 && gopt_node_alive(g, p) && unit[p] != unit[v]) indeg[unit[v]]++;
    }
  }
  /* min-heap of ready units by topological position */
  size_t hn = 0, k = 0;
#define HPUSH(u)                                                                   \
  do {                                                                             \
    size_t c_ = hn++;                                                              \
    heap[c_] = (u);                                                                \
    while (c_ > 0 && pos[heap[(c_ - 1) / 2]] > pos[heap[c_]]) {                    \
      int32_t t_ = heap[c_];                                                       \
      heap[c_] = heap[(c_ - 1) / 2];                                               \
      heap[(c_ - 1) / 2] = t_;                                                     \
      c_ = (c_ - 1) / 2;                                                           \
    }                                                                              \
  } while (0)
  for (size_t i = 0; i < n; i++)
    if (unit[order[i]] == order[i] && indeg[order[i]] == 0) HPUSH(order[i]);
  while (hn > 0) {
    int32_t u = heap[0];
    heap[0] = heap[--hn];
    for (size_t c = 0;;) {
      size_t l = 2 * c + 1, r = l + 1, m = c;
      if (l < hn && pos[heap[l]] < pos[heap[m]]) m = l;
      if (r < hn && pos[heap[r]] < pos[heap[m]]) m = r;
      if (m == c) break;
      int32_t t = heap[c];
      heap[c] = heap[m];
      heap[m] = t;
      c = m;
    }
    for (int32_t v = u; v >= 0; v = next[v]) {
      out[k++] = v;
      for (int j = 0; j < g->nodes.a[v].n_out; j++) {
        int32_t t = gopt_node_output(g, v, j);
        for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
          int32_t c = g->slots.a[s].node;
          if (!gopt_node_alive(g, c) || unit[c] == u) continue;
          if (--indeg[unit[c]] == 0) HPUSH(unit[c]);
        }
      }
    }
  }
#undef HPUSH
  if (k != n) {
    rc = gopt_error_set(err, GOPT_EINVAL,
                        "fusion groups form a cycle with the ops between them (a group cannot run "
                        "as one step)");
    goto done;
  }
  memcpy(order, out, n * sizeof *order);
done:
  free(unit);
  free(indeg);
  free(first);
  free(next);
  free(heap);
  free(pos);
  free(gunit);
  free(out);
  return rc;
}

/* Builds the execution order into *order (live nodes). */
static int make_order(gopt_exec *x, const gopt_exec_opts *o, int32_t **order_out, size_t *n_out,
                      gopt_error *err) {
  const gopt_graph *g = x->g;
  size_t nn = g->nodes.n, live = gopt_graph_node_count(g);
  int32_t *order = malloc((nn + 1) * sizeof *order);
  uint8_t *seen = calloc(nn + 1, 1);
  uint8_t *ready = calloc(g->tensors.n + 1, 1);
  int rc = GOPT_OK;
  if (!order || !seen || !ready) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  if (o && o->order) {
    if (o->n_order != live) {
      rc = gopt_error_set(err, GOPT_EINVAL, "order: %zu nodes given, the graph has %zu live nodes",
                          o->n_order, live);
      goto done;
    }
    for (size_t i = 0; i < o->n_order; i++) {
      int32_t n = o->order[i];
      if (n < 0 || (size_t)n >= nn || !gopt_node_alive(g, n) || seen[n]) {
        rc = gopt_error_set(err, GOPT_EINVAL, "order: entry %zu is not a live node or repeats one", i);
        goto done;
      }
      seen[n] = 1;
      order[i] = n;
    }
    /* every input must be ready before its reader */
    for (size_t t = 0; t < g->tensors.n; t++)
      if (g->tensors.a[t].producer < 0) ready[t] = 1;
    for (size_t i = 0; i < o->n_order; i++) {
      int32_t n = order[i];
      for (int j = 0; j < g->nodes.a[n].n_in; j++) {
        int32_t t = gopt_node_input(g, n, j);
        if (t >= 0 && !ready[t]) {
          rc = gopt_error_set(err, GOPT_EINVAL,
                              "order: node '%s' runs before '%s', which produces its input '%s'",
                              gopt_node_name(g, n), gopt_node_name(g, g->tensors.a[t].producer),
                              gopt_graph_str(g, g->tensors.a[t].name));
          goto done;
        }
      }
      for (int j = 0; j < g->nodes.a[n].n_out; j++) ready[gopt_node_output(g, n, j)] = 1;
    }
    *n_out = o->n_order;
    rc = ex_control_order(x, order, o->n_order, 0, err); /* sub-graphs' outer-scope reads */
  } else {
    int64_t cnt = gopt_graph_topo(g, order, err);
    if (cnt < 0) {
      rc = (int)cnt;
      goto done;
    }
    *n_out = (size_t)cnt;
    if (o && o->group) rc = group_order(g, o->group, order, (size_t)cnt, err);
    if (!rc) rc = ex_control_order(x, order, (size_t)cnt, 1, err); /* sub-graphs' outer-scope reads */
  }
done:
  free(seen);
  free(ready);
  if (rc) {
    free(order);
    order = NULL;
  }
  *order_out = order;
  return rc;
}

/* Builds the steps from the order and the fusion groups. */
static int make_steps(gopt_exec *x, const int32_t *order, size_t n_order, const int32_t *group,
                      gopt_error *err) {
  const gopt_graph *g = x->g;
  int rc = GOPT_OK;
  int32_t max_group = -1;
  int32_t *pos = NULL, *count = NULL, *members = NULL, *first = NULL;
  uint8_t *ready = NULL;
  x->steps = calloc(n_order + 1, sizeof *x->steps);
  if (!x->steps) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (group)
    for (size_t i = 0; i < n_order; i++)
      if (group[order[i]] > max_group) max_group = group[order[i]];
  size_t ng = (size_t)(max_group + 1);
  count = calloc(ng + 1, sizeof *count);
  first = malloc((ng + 1) * sizeof *first);
  pos = malloc((g->nodes.n + 1) * sizeof *pos);
  members = malloc((n_order + 1) * sizeof *members);
  ready = calloc(g->tensors.n + 1, 1);
  if (!count || !first || !pos || !members || !ready) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n_order; i++) {
    pos[order[i]] = (int32_t)i;
    int32_t gr = group ? group[order[i]] : -1;
    if (gr >= 0) count[gr]++;
  }
  /* prefix sums: members of group gr in first[gr] .. first[gr]+count[gr], in order */
  {
    int32_t s = 0;
    for (size_t gr = 0; gr < ng; gr++) {
      first[gr] = s;
      s += count[gr];
      count[gr] = 0;
    }
    for (size_t i = 0; i < n_order; i++) {
      int32_t gr = group ? group[order[i]] : -1;
      if (gr >= 0) members[first[gr] + count[gr]++] = order[i];
    }
  }
  for (size_t t = 0; t < g->tensors.n; t++)
    if (g->tensors.a[t].producer < 0) ready[t] = 1;
  for (size_t i = 0; i < n_order; i++) {
    int32_t n = order[i];
    int32_t gr = group ? group[n] : -1;
    ex_kernel *k = &x->steps[x->n_steps];
    /* a group that is a Conv/MatMul with its post-op chain runs as that chain's step */
    if (gr < 0 || count[gr] == 1 || ex_layout_group_is_chain(x, members + first[gr], count[gr])) {
      int32_t sn = ex_layout_step_node(x, n); /* a conv with post-ops runs at its chain's end */
      if (sn < 0) continue;
      ex_layout_step_begin(x);
      rc = prepare_node(x, k, sn, err);
      x->n_steps++;
      if (rc || (rc = ex_layout_step_end(x, k, err))) goto done;
      k->n_members = 1;
      k->sig = gopt_op_signature(g, sn);
      if (x->lay) k->sig = ex_layout_step_sig(x, k);
    } else {
      const int32_t *mem = members + first[gr];
      if (mem[count[gr] - 1] != n) continue; /* the group runs at its last member's position */
      for (int j = 0; j < count[gr]; j++)
        if (!ex_fusable(x, mem[j])) {
          rc = ex_node_error(x, mem[j], err, GOPT_EUNSUP,
                             "fusion group %d: only float elementwise/broadcast ops can be fused "
                             "into one loop, or a Conv/MatMul with constant weights and its post-op "
                             "chain into one oneDNN step (this op is %s)",
                             gr, gopt_op_class_name(gopt_op_class_of(g->nodes.a[mem[j]].op)));
          goto done;
        }
      k->node = mem[0];
      k->group = gr;
      ex_layout_step_begin(x);
      rc = ex_prepare_fused(x, k, mem, count[gr], err);
      x->n_steps++;
      if (rc || (rc = ex_layout_step_end(x, k, err))) goto done;
      k->n_members = count[gr];
      k->sig = gopt_group_signature(g, mem, count[gr]);
    }
    /* the step's visible inputs must be ready now */
    for (int j = 0; j < k->n_in; j++) {
      int32_t t = k->in[j];
      if (t >= 0 && !ready[t]) {
        rc = ex_node_error(x, k->node, err, GOPT_EINVAL,
                           "the order runs this step before '%s' is computed (a fusion group "
                           "and the order conflict)",
                           gopt_graph_str(g, g->tensors.a[t].name));
        goto done;
      }
    }
    for (int j = 0; j < k->n_out; j++) ready[k->out[j]] = 1;
  }
done:
  free(pos);
  free(count);
  free(first);
  free(members);
  free(ready);
  return rc;
}

static int make_lifetimes(gopt_exec *x, gopt_error *err) {
  const gopt_graph *g = x->g;
  x->last_use = malloc((g->tensors.n + 1) * sizeof *x->last_use);
  if (!x->last_use) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (size_t t = 0; t < g->tensors.n; t++) x->last_use[t] = -1;
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    for (int j = 0; j < k->n_out; j++) x->last_use[k->out[j]] = (int32_t)s;
    for (int j = 0; j < k->n_in; j++)
      if (k->in[j] >= 0) x->last_use[k->in[j]] = (int32_t)s;
  }
  for (size_t i = 0; i < g->outputs.n; i++) x->last_use[g->outputs.a[i]] = INT32_MAX;
  return GOPT_OK;
}

int gopt_exec_new(const gopt_graph *g, const gopt_exec_opts *o, gopt_exec **out, size_t *n_random,
                  gopt_error *err) {
  int rc = GOPT_OK;
  int32_t *order = NULL;
  size_t n_order = 0, nrand = 0;
  gopt_exec *x = calloc(1, sizeof *x);
  *out = NULL;
  if (n_random) *n_random = 0;
  if (!x) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  x->g = g;
  x->threads = o && o->threads > 0 ? o->threads : omp_get_max_threads();
  x->seed = o ? o->seed : 0;
  x->check_nan = o ? o->check_nan : 0;
  x->opset = model_opset(g);
  omp_set_num_threads(x->threads);
  x->vals = calloc(g->tensors.n + 1, sizeof *x->vals);
  x->inputs = malloc((g->inputs.n + 1) * sizeof *x->inputs);
  x->input_data = calloc(g->inputs.n + 1, sizeof *x->input_data);
  if (!x->vals || !x->inputs || !x->input_data) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto fail;
  }
  /* every tensor a live node touches must have a static shape */
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    const gopt_node *nd = &g->nodes.a[n];
    for (int j = 0; j < nd->n_in + nd->n_out; j++) {
      int32_t t = j < nd->n_in ? gopt_node_input(g, (int32_t)n, j)
                               : gopt_node_output(g, (int32_t)n, j - nd->n_in);
      if (t < 0) continue;
      if ((g->tensors.a[t].flags & GOPT_T_NOSHAPE) || !gopt_tensor_is_static(g, t)) {
        rc = ex_node_error(x, (int32_t)n, err, GOPT_ESHAPE,
                           "tensor '%s' has no static shape (bind the batch with --batch N or "
                           "give inputs)",
                           gopt_graph_str(g, g->tensors.a[t].name));
        goto fail;
      }
    }
  }
  /* constants and inputs */
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *tt = &g->tensors.a[t];
    if (!(tt->flags & GOPT_T_CONST)) continue;
    x->vals[t].kind = EX_V_CONST;
    x->vals[t].nbytes = (size_t)ex_numel(x, (int32_t)t) * gopt_dtype_size(tt->dtype);
    const void *d = gopt_tensor_data(g, (int32_t)t);
    if (d) {
      x->vals[t].data = (void *)d;
      continue;
    }
    if (tt->first_use < 0 || (tt->flags & GOPT_T_ATTR)) continue;
    void *p = random_const(x, (int32_t)t, o ? o->seed : 0, err);
    if (!p) {
      rc = err ? err->code : GOPT_EINVAL;
      goto fail;
    }
    if ((rc = ex_own(x, p))) {
      rc = gopt_error_set(err, rc, "out of memory");
      goto fail;
    }
    x->vals[t].data = p;
    nrand++;
  }
  for (size_t i = 0; i < g->inputs.n; i++) {
    int32_t t = g->inputs.a[i];
    if (g->tensors.a[t].flags & GOPT_T_CONST) continue;
    if (!gopt_tensor_is_static(g, t)) {
      rc = gopt_error_set(err, GOPT_ESHAPE,
                          "input '%s' has a symbolic shape (bind it with --batch N or give inputs)",
                          gopt_graph_str(g, g->tensors.a[t].name));
      goto fail;
    }
    x->vals[t].kind = EX_V_INPUT;
    x->vals[t].nbytes = (size_t)ex_numel(x, t) * gopt_dtype_size(g->tensors.a[t].dtype);
    x->inputs[x->n_inputs++] = t;
  }
  if ((rc = ex_isa_select(x, err))) goto fail;
  if ((rc = ex_dnnl_init(x, err))) goto fail;
  if ((rc = make_order(x, o, &order, &n_order, err))) goto fail;
  /* under --layouts plain a fusion group may still be a Conv/MatMul with its post-op chain */
  if (o && (o->layouts == GOPT_EXEC_LAYOUT_AUTO || o->group) &&
      (rc = ex_layout_plan(x, order, n_order, o->group, o->layouts != GOPT_EXEC_LAYOUT_AUTO, err)))
    goto fail;
  if ((rc = make_steps(x, order, n_order, o ? o->group : NULL, err))) goto fail;
  if (o && o->layouts == GOPT_EXEC_LAYOUT_AUTO && (rc = ex_hoist_const_steps(x, err))) goto fail;
  if ((rc = make_lifetimes(x, err))) goto fail;
  if ((rc = ex_plan_inplace(x, err))) goto fail;
  if ((rc = ex_arena_plan(x, err))) goto fail;
  free(order);
  if (n_random) *n_random = nrand;
  *out = x;
  return GOPT_OK;
fail:
  free(order);
  gopt_exec_free(x);
  return rc ? rc : GOPT_EINVAL;
}

void ex_release_acts(gopt_exec *x) {
  for (size_t t = 0; t < x->g->tensors.n; t++) {
    ex_val *v = &x->vals[t];
    if (v->kind == EX_V_ACT && v->data) {
      if (!ex_arena_put(x, v->data, v->nbytes)) pool_put(x, v->data, v->cap);
      v->data = NULL;
    }
  }
  x->ran = 0;
}

void gopt_exec_free(gopt_exec *x) {
  if (!x) return;
  if (x->vals) ex_release_acts(x);
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    if (k->fini && k->st) k->fini(k->st);
    free(k->in);
    free(k->out);
    free(k->reuse);
  }
  free(x->steps);
  ex_layout_free(x);
  ex_dnnl_fini(x);
  for (size_t i = 0; i < x->n_owned; i++) free(x->owned_consts[i]);
  free(x->owned_consts);
  for (size_t i = 0; i < x->n_pool; i++) free(x->pool[i].p);
  free(x->pool);
  free(x->arena);
  free(x->arena_off);
  if (x->input_data)
    for (size_t i = 0; i < x->n_inputs; i++) free(x->input_data[i]);
  free(x->input_data);
  free(x->inputs);
  free(x->last_use);
  ex_str_free(x);
  free(x->nan_const);
  free(x->vals);
  free(x);
}

size_t gopt_exec_n_inputs(const gopt_exec *x) { return x->n_inputs; }
int32_t gopt_exec_input_tensor(const gopt_exec *x, size_t i) { return x->inputs[i]; }
size_t gopt_exec_n_outputs(const gopt_exec *x) { return x->g->outputs.n; }
int32_t gopt_exec_output_tensor(const gopt_exec *x, size_t i) { return x->g->outputs.a[i]; }
size_t gopt_exec_peak_bytes(const gopt_exec *x) { return x->peak_bytes; }
size_t gopt_exec_n_steps(const gopt_exec *x) { return x->n_steps; }

static void shape_str(const int64_t *d, int rank, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < rank && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)d[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

int gopt_exec_set_input(gopt_exec *x, size_t i, const gopt_host_tensor *t, gopt_error *err) {
  if (i >= x->n_inputs) return gopt_error_set(err, GOPT_EINVAL, "input #%zu: the model has %zu inputs", i, x->n_inputs);
  int32_t id = x->inputs[i];
  const char *name = gopt_graph_str(x->g, x->g->tensors.a[id].name);
  int rank = ex_rank(x, id);
  const int64_t *d = ex_dims(x, id);
  int same = t->rank == rank && t->dtype == ex_dtype(x, id);
  for (int j = 0; same && j < rank; j++) same = d[j] == t->dims[j];
  if (!same) {
    char want[200], got[200];
    shape_str(d, rank, want, sizeof want);
    shape_str(t->dims, t->rank, got, sizeof got);
    return gopt_error_set(err, GOPT_ESHAPE, "input '%s': expected %s%s, got %s%s", name,
                          gopt_dtype_name(ex_dtype(x, id)), want, gopt_dtype_name(t->dtype), got);
  }
  size_t nb = x->vals[id].nbytes;
  if (t->nbytes < nb) return gopt_error_set(err, GOPT_ESHAPE, "input '%s': %zu bytes of data, %zu needed", name, t->nbytes, nb);
  if (!x->input_data[i]) {
    x->input_data[i] = aligned_alloc(64, round64(nb ? nb : 1));
    if (!x->input_data[i]) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  memcpy(x->input_data[i], t->data, nb);
  x->vals[id].data = x->input_data[i];
  if (ex_dtype(x, id) == GOPT_DT_STRING) return ex_str_set_input(x, id, t, err); /* k_string.c */
  return GOPT_OK;
}

/* The f16 or bf16 pattern of v, a multiple of 2^-8 below 1 in magnitude (exact in both types). */
static uint16_t half_bits(int dt, double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (dt == GOPT_DT_BFLOAT16 || v == 0) return dt == GOPT_DT_BFLOAT16 ? (uint16_t)(u >> 16) : (uint16_t)((u >> 16) & 0x8000);
  int e;
  double m = frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1), e >= -7: a normal half */
  return (uint16_t)((v < 0 ? 0x8000u : 0u) | (uint32_t)(e + 14) << 10 | ((uint32_t)(m * 2048) - 1024));
}

int gopt_exec_random_inputs(gopt_exec *x, uint64_t seed, gopt_error *err) {
  for (size_t i = 0; i < x->n_inputs; i++) {
    int32_t id = x->inputs[i];
    gopt_host_tensor t = {0};
    t.dtype = ex_dtype(x, id);
    t.rank = ex_rank(x, id);
    if (t.rank) memcpy(t.dims, ex_dims(x, id), (size_t)t.rank * sizeof(int64_t));
    int64_t n = ex_numel(x, id);
    t.nbytes = x->vals[id].nbytes;
    t.data = malloc(t.nbytes + 1);
    if (!t.data) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    const char *name = gopt_graph_str(x->g, x->g->tensors.a[id].name);
    uint64_t s = gopt_hash_bytes(name, strlen(name), seed ^ 0x696e70ULL);
    int64_t b = index_bound(x->g, id);
    if (b <= 0) b = 2;
    for (int64_t j = 0; j < n; j++) {
      switch (t.dtype) {
        case GOPT_DT_FLOAT: ((float *)t.data)[j] = 2.0f * urand(&s) - 1.0f; break;
        case GOPT_DT_DOUBLE: ((double *)t.data)[j] = 2.0 * urand(&s) - 1.0; break;
        case GOPT_DT_INT64: ((int64_t *)t.data)[j] = (int64_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_INT32: ((int32_t *)t.data)[j] = (int32_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_BOOL: ((uint8_t *)t.data)[j] = (uint8_t)(gopt_splitmix64(&s) & 1); break;
        case GOPT_DT_UINT32: ((uint32_t *)t.data)[j] = (uint32_t)gopt_splitmix64(&s); break; /* bits, RNG keys */
        case GOPT_DT_UINT8: ((uint8_t *)t.data)[j] = (uint8_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_INT8: ((int8_t *)t.data)[j] = (int8_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_INT16: ((int16_t *)t.data)[j] = (int16_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_UINT16: ((uint16_t *)t.data)[j] = (uint16_t)(gopt_splitmix64(&s) % (uint64_t)b); break;
        case GOPT_DT_UINT64: ((uint64_t *)t.data)[j] = gopt_splitmix64(&s) % (uint64_t)b; break;
        case GOPT_DT_FLOAT16: case GOPT_DT_BFLOAT16: /* k / 256, |k| < 256: exact in both */
          ((uint16_t *)t.data)[j] = half_bits(t.dtype, (double)((int)(gopt_splitmix64(&s) % 512) - 256) / 256.0);
          break;
        default:
          if (gopt_dtype_is_lowbit(t.dtype)) { /* floats k / 8, |k| < 8 (exact in every 8-bit float); integers below b */
            int fl = t.dtype != GOPT_DT_INT4 && t.dtype != GOPT_DT_UINT4 && t.dtype != GOPT_DT_INT2 && t.dtype != GOPT_DT_UINT2;
            double v = fl ? (double)((int)(gopt_splitmix64(&s) % 16) - 8) / 8.0 : (double)(gopt_splitmix64(&s) % (uint64_t)b);
            ((uint8_t *)t.data)[j] = gopt_lowbit_from_double(t.dtype, v, 1, "nearest");
            break;
          }
          free(t.data);
          return gopt_error_set(err, GOPT_EUNSUP, "input '%s': no random values for dtype %s",
                                name, gopt_dtype_name(t.dtype));
      }
    }
    int rc = gopt_exec_set_input(x, i, &t, err);
    free(t.data);
    if (rc) return rc;
  }
  return GOPT_OK;
}

/* ---- running ------------------------------------------------------------------------------------------ */

typedef struct nan_state {
  uint8_t *flags; /* per tensor: 1 = has NaN, 2 = has Inf */
  int warned_nan, warned_inf;
} nan_state;

static uint8_t scan_flags(const gopt_exec *x, int32_t t) {
  if (ex_dtype(x, t) != GOPT_DT_FLOAT || !ex_data(x, t)) return 0;
  size_t nan = 0;
  int64_t n = ex_layout_nbytes(x, t) ? (int64_t)(ex_layout_nbytes(x, t) / sizeof(float)) : ex_numel(x, t);
  size_t bad = ex_vec_ops_for(x->isa)->count_nonfinite(ex_data(x, t), n, &nan);
  return (uint8_t)((nan ? 1 : 0) | (bad > nan ? 2 : 0));
}

static void nan_check(gopt_exec *x, ex_kernel *k, nan_state *ns) {
  uint8_t in = 0;
  for (int j = 0; j < k->n_in; j++)
    if (k->in[j] >= 0) in |= ns->flags[k->in[j]];
  for (int j = 0; j < k->n_out; j++) {
    int32_t t = k->out[j];
    uint8_t f = scan_flags(x, t);
    ns->flags[t] = f;
    const char *what = NULL;
    if ((f & 1) && !(in & 1) && !ns->warned_nan) {
      what = "NaN";
      ns->warned_nan = 1;
    } else if ((f & 2) && !(in & 3) && !ns->warned_inf) {
      what = "Inf";
      ns->warned_inf = 1;
    }
    if (what) {
      size_t nan = 0;
      size_t bad = ex_vec_ops_for(x->isa)->count_nonfinite(ex_data(x, t), ex_numel(x, t), &nan);
      gopt_warn("node '%s' (%s) is the first op to produce %s: output '%s' has %zu non-finite of "
                "%lld values (its inputs had none)",
                gopt_node_name(x->g, k->node),
                k->group >= 0 ? "fused group" : gopt_node_type(x->g, k->node), what,
                gopt_graph_str(x->g, x->g->tensors.a[t].name), bad, (long long)ex_numel(x, t));
    }
  }
}

/* The NaN check's flags at the start of a run: constants' from their one scan (they do not change
 * between runs; weights can be hundreds of MB), the graph inputs' scanned now. */
static int nan_flags_init(gopt_exec *x, nan_state *ns, gopt_error *err) {
  size_t nt = x->g->tensors.n;
  if (!x->nan_const) {
    if (!(x->nan_const = calloc(nt + 1, 1))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    for (size_t t = 0; t < nt; t++)
      if (x->vals[t].kind == EX_V_CONST) x->nan_const[t] = scan_flags(x, (int32_t)t);
  }
  if (!(ns->flags = malloc(nt + 1))) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  memcpy(ns->flags, x->nan_const, nt + 1);
  for (size_t t = 0; t < nt; t++)
    if (x->vals[t].kind == EX_V_INPUT) ns->flags[t] = scan_flags(x, (int32_t)t);
  return GOPT_OK;
}

/* Whether step k's input j gave its buffer to one of the step's outputs (in place; never while
 * profiling, which keeps every buffer). */
static int given_in_place(const gopt_exec *x, const ex_kernel *k, int j) {
  return !x->profiling && ex_kernel_gives(k, j);
}

/* After a failed step: the inputs that gave their buffers to outputs no longer own them (so
 * ex_release_acts returns each buffer to the pool once). */
static void drop_given(gopt_exec *x, const ex_kernel *k) {
  for (int j = 0; j < k->n_in; j++)
    if (k->in[j] >= 0 && given_in_place(x, k, j)) x->vals[k->in[j]].data = NULL;
}

int gopt_exec_run(gopt_exec *x, gopt_error *err) {
  int rc = GOPT_OK;
  nan_state ns = {0};
  for (size_t i = 0; i < x->n_inputs; i++)
    if (!x->input_data[i])
      return gopt_error_set(err, GOPT_EINVAL, "input '%s' was not set",
                            gopt_graph_str(x->g, x->g->tensors.a[x->inputs[i]].name));
  omp_set_num_threads(x->threads);
  ex_release_acts(x);
  if (x->check_nan && (rc = nan_flags_init(x, &ns, err))) return rc;
  x->live_bytes = 0;
  for (size_t i = 0; i < x->n_inputs; i++)
    if (x->last_use[x->inputs[i]] >= 0) x->live_bytes += x->vals[x->inputs[i]].nbytes;
  x->peak_bytes = x->live_bytes;
  x->live_plain = x->peak_plain = x->live_bytes;
  for (size_t s = 0; s < x->n_steps; s++) {
    ex_kernel *k = &x->steps[s];
    double t_step = x->step_sec ? ex_prof_now(x) : 0;
    for (int j = 0; j < k->n_out; j++) {
      int32_t t = k->out[j];
      ex_val *v = &x->vals[t];
      if (v->kind != EX_V_ACT || v->data) continue;
      v->nbytes = ex_act_nbytes(x, t);
      x->live_plain += v->nbytes;
      if (k->reuse && k->reuse[j] >= 0 && !x->profiling) {
        /* in place (exec_inplace.c): the input dies here, its buffer becomes the output's */
        v->data = x->vals[k->in[k->reuse[j]]].data;
        v->cap = x->vals[k->in[k->reuse[j]]].cap;
        continue;
      }
      v->cap = v->nbytes;
      if (!(v->data = ex_arena_get(x, t))) v->data = pool_get(x, v->nbytes, &v->cap);
      if (!v->data) {
        rc = ex_node_error(x, k->node, err, GOPT_ENOMEM, "out of memory for output '%s' (%zu bytes)",
                           gopt_graph_str(x->g, x->g->tensors.a[t].name), v->nbytes);
        drop_given(x, k);
        goto done;
      }
      x->live_bytes += v->nbytes;
    }
    if (x->live_bytes > x->peak_bytes) x->peak_bytes = x->live_bytes;
    if (x->live_plain > x->peak_plain) x->peak_plain = x->live_plain;
    if ((rc = k->run(x, k, err))) {
      drop_given(x, k);
      goto done;
    }
    if (x->check_nan) nan_check(x, k, &ns);
    if (x->profiling) continue;
    for (int j = 0; j < k->n_in + k->n_out; j++) {
      int32_t t = j < k->n_in ? k->in[j] : k->out[j - k->n_in];
      if (t < 0 || x->last_use[t] != (int32_t)s) continue;
      ex_val *v = &x->vals[t];
      if (v->kind == EX_V_CONST) continue;
      int dup = 0;
      for (int q = 0; q < j && !dup; q++) dup = (q < k->n_in ? k->in[q] : k->out[q - k->n_in]) == t;
      if (dup) continue;
      x->live_plain -= v->nbytes;
      if (j < k->n_in && given_in_place(x, k, j)) { /* its buffer is an output's now */
        v->data = NULL;
        continue;
      }
      x->live_bytes -= v->nbytes;
      if (v->kind == EX_V_ACT) {
        if (!ex_arena_put(x, v->data, v->nbytes)) pool_put(x, v->data, v->cap);
        v->data = NULL;
      }
    }
    if (x->step_sec) x->step_sec[s] = ex_prof_now(x) - t_step;
  }
  x->ran = 1;
done:
  free(ns.flags);
  return rc;
}

int gopt_exec_get_output(const gopt_exec *x, size_t i, gopt_host_tensor *t, gopt_error *err) {
  memset(t, 0, sizeof *t);
  if (i >= x->g->outputs.n) return gopt_error_set(err, GOPT_EINVAL, "output #%zu does not exist", i);
  int32_t id = x->g->outputs.a[i];
  const void *d = ex_data(x, id);
  if (!d) return gopt_error_set(err, GOPT_EINVAL, "output '%s' has no value (run first)",
                                gopt_graph_str(x->g, x->g->tensors.a[id].name));
  t->dtype = ex_dtype(x, id);
  t->rank = ex_rank(x, id);
  if (t->rank) memcpy(t->dims, ex_dims(x, id), (size_t)t->rank * sizeof(int64_t));
  t->nbytes = (size_t)ex_numel(x, id) * gopt_dtype_size(t->dtype);
  t->data = malloc(t->nbytes + 1);
  t->name = strdup(gopt_graph_str(x->g, x->g->tensors.a[id].name));
  if (!t->data || !t->name) {
    gopt_host_tensor_clear(t);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  memcpy(t->data, d, t->nbytes);
  if (t->dtype == GOPT_DT_STRING && ex_str_get_output(x, id, t, err)) { /* k_string.c */
    gopt_host_tensor_clear(t);
    return err ? err->code : GOPT_ENOMEM;
  }
  return GOPT_OK;
}
