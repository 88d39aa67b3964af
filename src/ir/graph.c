/* graph.c: graph IR storage: lifetime, strings, tensors, nodes and attributes (see graph.h). */
#include <stdio.h>
#include <string.h>

#include "gopt/ops.h"
#include "ir/ir_internal.h"

/* ---- dtypes ---------------------------------------------------------------------------------- */

static const char *const dtype_names[GOPT_DT_COUNT] = {
    "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
    "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
/* Bytes per element in memory (the low-bit types one each, see graph.h). */
static const unsigned char dtype_sizes[GOPT_DT_COUNT] = {0, 4, 1, 1, 2, 2, 4, 8, 0, 1, 2, 8, 4, 8,
                                                         8, 16, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

const char *gopt_dtype_name(int dtype) {
  return (dtype >= 0 && dtype < GOPT_DT_COUNT) ? dtype_names[dtype] : "UNDEFINED";
}

size_t gopt_dtype_size(int dtype) {
  return (dtype >= 0 && dtype < GOPT_DT_COUNT) ? dtype_sizes[dtype] : 0;
}

int gopt_dtype_from_name(const char *name) {
  for (int i = 1; i < GOPT_DT_COUNT; i++)
    if (strcmp(dtype_names[i], name) == 0) return i;
  return GOPT_DT_UNDEFINED;
}

/* ---- strings --------------------------------------------------------------------------------- */

uint32_t gopt_graph_intern_n(gopt_graph *g, const char *s, size_t len) {
  return strtab_intern(g->strs, s ? s : "", s ? len : 0);
}

uint32_t gopt_graph_intern(gopt_graph *g, const char *s) {
  return gopt_graph_intern_n(g, s, s ? strlen(s) : 0);
}

const char *gopt_graph_str(const gopt_graph *g, uint32_t id) {
  return strtab_get(g->strs, id);
}

/* ---- lifetime -------------------------------------------------------------------------------- */

gopt_graph *gopt_graph_new(const char *name) {
  gopt_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->strs = strtab_new();
  if (!g->strs) {
    free(g);
    return NULL;
  }
  g->name = gopt_graph_intern(g, name ? name : "");
  return g;
}

void gopt_graph_free(gopt_graph *g) {
  if (!g) return;
  for (size_t i = 0; i < g->consts.n; i++) free(g->consts.a[i].data);
  for (size_t i = 0; i < g->subgraphs.n; i++) gopt_graph_free(g->subgraphs.a[i]);
  GOPT_ARR_FREE(g->nodes);
  GOPT_ARR_FREE(g->tensors);
  GOPT_ARR_FREE(g->slots);
  GOPT_ARR_FREE(g->outs);
  GOPT_ARR_FREE(g->attrs);
  GOPT_ARR_FREE(g->dims);
  GOPT_ARR_FREE(g->ints);
  GOPT_ARR_FREE(g->floats);
  GOPT_ARR_FREE(g->strids);
  GOPT_ARR_FREE(g->consts);
  GOPT_ARR_FREE(g->inputs);
  GOPT_ARR_FREE(g->outputs);
  GOPT_ARR_FREE(g->syms);
  GOPT_ARR_FREE(g->subgraphs);
  GOPT_ARR_FREE(g->opsets);
  GOPT_ARR_FREE(g->props);
  GOPT_ARR_FREE(g->tensor_of_str);
  GOPT_ARR_FREE(g->sym_of_str);
  strtab_free(g->strs);
  free(g);
}

/* Copies a GOPT_ARRAY's used part; returns -1 when out of memory. */
#define CLONE_ARR(dst, src)                                                    \
  ((src).n == 0 ? ((dst).a = NULL, (dst).n = (dst).cap = 0, 0)                 \
                : (((dst).a = malloc((src).n * sizeof *(src).a)) == NULL       \
                       ? ((dst).n = (dst).cap = 0, -1)                         \
                       : (memcpy((dst).a, (src).a, (src).n * sizeof *(src).a), \
                          (dst).n = (dst).cap = (src).n, 0)))

gopt_graph *gopt_graph_clone(const gopt_graph *g) { return gopt_graph_clone_lean(g, SIZE_MAX); }

gopt_graph *gopt_graph_clone_lean(const gopt_graph *g, size_t max_bytes) {
  gopt_graph *c = calloc(1, sizeof *c);
  uint8_t *attr = NULL; /* per constant: an attribute's value (ConstantOfShape's value): kept */
  if (!c) return NULL;
  *c = *g;
  c->strs = NULL;
  memset(&c->consts, 0, sizeof c->consts);
  memset(&c->subgraphs, 0, sizeof c->subgraphs);
  int bad = 0;
  bad |= CLONE_ARR(c->nodes, g->nodes);
  bad |= CLONE_ARR(c->tensors, g->tensors);
  bad |= CLONE_ARR(c->slots, g->slots);
  bad |= CLONE_ARR(c->outs, g->outs);
  bad |= CLONE_ARR(c->attrs, g->attrs);
  bad |= CLONE_ARR(c->dims, g->dims);
  bad |= CLONE_ARR(c->ints, g->ints);
  bad |= CLONE_ARR(c->floats, g->floats);
  bad |= CLONE_ARR(c->strids, g->strids);
  bad |= CLONE_ARR(c->inputs, g->inputs);
  bad |= CLONE_ARR(c->outputs, g->outputs);
  bad |= CLONE_ARR(c->syms, g->syms);
  bad |= CLONE_ARR(c->opsets, g->opsets);
  bad |= CLONE_ARR(c->props, g->props);
  bad |= CLONE_ARR(c->tensor_of_str, g->tensor_of_str);
  bad |= CLONE_ARR(c->sym_of_str, g->sym_of_str);
  c->strs = strtab_clone(g->strs);
  if (bad || !c->strs) goto fail;
  if (GOPT_ARR_GROW(c->consts, g->consts.n)) goto fail;
  if (max_bytes != SIZE_MAX && g->consts.n && !(attr = calloc(g->consts.n, 1))) goto fail;
  for (size_t t = 0; attr && t < g->tensors.n; t++)
    if ((g->tensors.a[t].flags & GOPT_T_ATTR) && g->tensors.a[t].cdata >= 0 &&
        (size_t)g->tensors.a[t].cdata < g->consts.n)
      attr[g->tensors.a[t].cdata] = 1;
  for (size_t i = 0; i < g->consts.n; i++) {
    gopt_const k = g->consts.a[i];
    if (k.data && k.nbytes > max_bytes && !(attr && attr[i])) k.data = NULL; /* the bytes stay out */
    if (k.data) {
      void *d = malloc(k.nbytes ? k.nbytes : 1);
      if (!d) goto fail;
      memcpy(d, g->consts.a[i].data, k.nbytes);
      k.data = d;
    }
    c->consts.a[c->consts.n++] = k;
  }
  if (GOPT_ARR_GROW(c->subgraphs, g->subgraphs.n)) goto fail;
  for (size_t i = 0; i < g->subgraphs.n; i++) {
    gopt_graph *s = gopt_graph_clone(g->subgraphs.a[i]); /* whole: only g's own constants are left out */
    if (!s) goto fail;
    s->parent = c;
    c->subgraphs.a[c->subgraphs.n++] = s;
  }
  free(attr);
  return c;
fail:
  free(attr);
  gopt_graph_free(c);
  return NULL;
}

void gopt_graph_reserve(gopt_graph *g, size_t n) {
  /* Failure here is harmless: the arrays grow on demand later. */
  (void)GOPT_ARR_GROW(g->nodes, n);
  (void)GOPT_ARR_GROW(g->tensors, n + n / 2);
  (void)GOPT_ARR_GROW(g->slots, 2 * n);
  (void)GOPT_ARR_GROW(g->outs, n);
  (void)GOPT_ARR_GROW(g->dims, 4 * n);
  (void)GOPT_ARR_GROW(g->tensor_of_str, 3 * n);
}

/* ---- tensors --------------------------------------------------------------------------------- */

int ir_graph_index_name(gopt_graph *g, uint32_t name, int32_t t) {
  if (name >= g->tensor_of_str.n) {
    size_t n = g->tensor_of_str.n;
    if (GOPT_ARR_GROW(g->tensor_of_str, name + 1 - n)) return -1;
    for (size_t i = n; i <= name; i++) g->tensor_of_str.a[i] = -1;
    g->tensor_of_str.n = name + 1;
  }
  g->tensor_of_str.a[name] = t;
  return 0;
}

static int32_t tensor_by_strid(const gopt_graph *g, uint32_t id) {
  return id < g->tensor_of_str.n ? g->tensor_of_str.a[id] : -1;
}

int32_t gopt_graph_find_tensor(const gopt_graph *g, const char *name) {
  uint32_t id = strtab_find(g->strs, name, strlen(name));
  return id == UINT32_MAX ? -1 : tensor_by_strid(g, id);
}

int32_t gopt_graph_add_tensor(gopt_graph *g, const char *name, int dtype, int rank,
                              const int64_t *dims, gopt_error *err) {
  uint32_t sid;
  char buf[48];
  if (rank > GOPT_MAX_RANK) {
    gopt_error_set(err, GOPT_EUNSUP, "tensor '%s': rank %d exceeds the maximum %d",
                   name ? name : "", rank, GOPT_MAX_RANK);
    return -1;
  }
  if (g->tensors.n >= INT32_MAX - 1) {
    gopt_error_set(err, GOPT_ERANGE, "graph has too many tensors");
    return -1;
  }
  if (name && *name) {
    sid = gopt_graph_intern(g, name);
    if (sid == UINT32_MAX) goto oom;
    if (tensor_by_strid(g, sid) >= 0) {
      gopt_error_set(err, GOPT_EGRAPH, "tensor name '%s' is defined twice", name);
      return -1;
    }
  } else {
    do {
      snprintf(buf, sizeof buf, "t__%u", g->n_unnamed++);
      sid = gopt_graph_intern(g, buf);
      if (sid == UINT32_MAX) goto oom;
    } while (tensor_by_strid(g, sid) >= 0);
  }
  int r = rank < 0 ? 0 : rank;
  if (GOPT_ARR_GROW(g->tensors, 1) || GOPT_ARR_GROW(g->dims, (size_t)r)) goto oom;
  int32_t id = (int32_t)g->tensors.n;
  if (ir_graph_index_name(g, sid, id)) goto oom;
  gopt_tensor *t = &g->tensors.a[g->tensors.n++];
  memset(t, 0, sizeof *t);
  t->name = sid;
  t->dtype = (uint8_t)dtype;
  t->rank = (uint8_t)r;
  t->flags = rank < 0 ? GOPT_T_NOSHAPE : 0;
  t->dims = (uint32_t)g->dims.n;
  t->producer = -1;
  t->out_index = -1;
  t->first_use = -1;
  t->cdata = -1;
  for (int i = 0; i < r; i++) g->dims.a[g->dims.n++] = dims ? dims[i] : 0;
  return id;
oom:
  gopt_error_set(err, GOPT_ENOMEM, "out of memory adding tensor '%s'", name ? name : "");
  return -1;
}

int gopt_tensor_set_shape(gopt_graph *g, int32_t t, int rank, const int64_t *dims) {
  gopt_tensor *x = &g->tensors.a[t];
  if (rank > GOPT_MAX_RANK) return GOPT_EUNSUP;
  if (rank < 0) {
    x->flags |= GOPT_T_NOSHAPE;
    x->rank = 0;
    return GOPT_OK;
  }
  if (rank > x->rank) {
    if (GOPT_ARR_GROW(g->dims, (size_t)rank)) return GOPT_ENOMEM;
    x = &g->tensors.a[t];
    x->dims = (uint32_t)g->dims.n;
    g->dims.n += (size_t)rank;
  }
  x->rank = (uint8_t)rank;
  x->flags &= (uint16_t)~GOPT_T_NOSHAPE;
  /* memmove: dims may point into g->dims itself. */
  if (rank) memmove(g->dims.a + x->dims, dims, (size_t)rank * sizeof *dims);
  return GOPT_OK;
}

int64_t gopt_tensor_numel(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  if (x->rank == 0) return 1; /* no dims stored (g->dims may still be empty) */
  const int64_t *d = g->dims.a + x->dims;
  int64_t n = 1;
  for (int i = 0; i < x->rank; i++)
    if (d[i] >= 0 && __builtin_mul_overflow(n, d[i], &n)) return INT64_MAX; /* saturates */
  return n;
}

double gopt_tensor_bytes(const gopt_graph *g, int32_t t) {
  if (t < 0 || (g->tensors.a[t].flags & GOPT_T_NOSHAPE)) return 0;
  return (double)gopt_tensor_numel(g, t) * (double)gopt_dtype_size(g->tensors.a[t].dtype);
}

int gopt_tensor_is_static(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  if (x->flags & GOPT_T_NOSHAPE) return 0;
  const int64_t *d = g->dims.a + x->dims;
  for (int i = 0; i < x->rank; i++)
    if (d[i] < 0) return 0;
  return 1;
}

/* Records symbol k under string id sid (-1 fills the gaps). Returns 0 or -1 on out of memory. */
static int index_symbol(gopt_graph *g, uint32_t sid, uint32_t k) {
  if (sid >= g->sym_of_str.n) {
    size_t n = g->sym_of_str.n;
    if (GOPT_ARR_GROW(g->sym_of_str, sid + 1 - n)) return -1;
    for (size_t i = n; i <= sid; i++) g->sym_of_str.a[i] = -1;
    g->sym_of_str.n = sid + 1;
  }
  g->sym_of_str.a[sid] = (int32_t)k;
  return 0;
}

uint32_t gopt_graph_symbol(gopt_graph *g, const char *name) {
  uint32_t sid = gopt_graph_intern(g, name);
  if (sid == UINT32_MAX) return 0;
  if (sid < g->sym_of_str.n && g->sym_of_str.a[sid] >= 0) return (uint32_t)g->sym_of_str.a[sid];
  if (GOPT_ARR_PUSH(g->syms, sid)) return 0;
  uint32_t k = (uint32_t)(g->syms.n - 1);
  if (index_symbol(g, sid, k)) return 0;
  return k;
}

uint32_t gopt_graph_new_symbol(gopt_graph *g) {
  char buf[32];
  uint32_t sid;
  /* A fresh name: unk__N not used by any symbol yet (a source may name its own dims so). */
  size_t n = g->syms.n;
  do {
    snprintf(buf, sizeof buf, "unk__%zu", n++);
    sid = gopt_graph_intern(g, buf);
    if (sid == UINT32_MAX) return 0;
  } while (sid < g->sym_of_str.n && g->sym_of_str.a[sid] >= 0);
  if (GOPT_ARR_PUSH(g->syms, sid)) return 0;
  uint32_t k = (uint32_t)(g->syms.n - 1);
  if (index_symbol(g, sid, k)) return 0;
  return k;
}

int gopt_tensor_set_const(gopt_graph *g, int32_t t, const void *data, size_t nbytes,
                          gopt_error *err) {
  void *copy = NULL;
  if (data) {
    copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
      return gopt_error_set(err, GOPT_ENOMEM, "out of memory for %zu bytes of constant '%s'",
                            nbytes, gopt_graph_str(g, g->tensors.a[t].name));
    memcpy(copy, data, nbytes);
  }
  return gopt_tensor_adopt_const(g, t, copy, nbytes, err);
}

int gopt_tensor_adopt_const(gopt_graph *g, int32_t t, void *data, size_t nbytes, gopt_error *err) {
  gopt_tensor *x = &g->tensors.a[t];
  if (x->cdata >= 0) {
    gopt_const *k = &g->consts.a[x->cdata];
    free(k->data);
    k->data = data;
    k->nbytes = data ? nbytes : k->nbytes;
    if (data) k->external = 0;
    return GOPT_OK;
  }
  gopt_const k = {data, nbytes, t, 0, 0, -1};
  if (GOPT_ARR_PUSH(g->consts, k)) {
    free(data);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  x->cdata = (int32_t)(g->consts.n - 1);
  x->flags |= GOPT_T_CONST;
  return GOPT_OK;
}

const void *gopt_tensor_data(const gopt_graph *g, int32_t t) {
  int32_t c = g->tensors.a[t].cdata;
  return c >= 0 ? g->consts.a[c].data : NULL;
}

int gopt_graph_add_input(gopt_graph *g, int32_t t) {
  if (GOPT_ARR_PUSH(g->inputs, t)) return GOPT_ENOMEM;
  g->tensors.a[t].flags |= GOPT_T_INPUT;
  return GOPT_OK;
}

int gopt_graph_set_opset(gopt_graph *g, const char *domain, int64_t version) {
  uint32_t d = gopt_graph_intern(g, domain);
  if (d == UINT32_MAX) return GOPT_ENOMEM;
  for (size_t i = 0; i < g->opsets.n; i++)
    if (g->opsets.a[i].domain == d) {
      g->opsets.a[i].version = version;
      return GOPT_OK;
    }
  gopt_opset o = {d, version};
  return GOPT_ARR_PUSH(g->opsets, o) ? GOPT_ENOMEM : GOPT_OK;
}

int64_t gopt_graph_opset(const gopt_graph *g, const char *domain, int64_t dflt) {
  int want_default = !*domain || !strcmp(domain, "ai.onnx");
  for (; g; g = g->parent)
    for (size_t i = 0; i < g->opsets.n; i++) {
      const char *d = gopt_graph_str(g, g->opsets.a[i].domain);
      int is_default = !*d || !strcmp(d, "ai.onnx");
      if (want_default ? is_default : !strcmp(d, domain)) return g->opsets.a[i].version;
    }
  return dflt;
}

int gopt_graph_set_prop(gopt_graph *g, const char *key, const char *val) {
  uint32_t k = gopt_graph_intern(g, key), v = gopt_graph_intern(g, val);
  if (k == UINT32_MAX || v == UINT32_MAX) return GOPT_ENOMEM;
  for (size_t i = 0; i < g->props.n; i++)
    if (g->props.a[i].key == k) {
      g->props.a[i].val = v;
      return GOPT_OK;
    }
  gopt_prop p = {k, v};
  return GOPT_ARR_PUSH(g->props, p) ? GOPT_ENOMEM : GOPT_OK;
}

const char *gopt_graph_get_prop(const gopt_graph *g, const char *key) {
  for (size_t i = 0; i < g->props.n; i++)
    if (!strcmp(gopt_graph_str(g, g->props.a[i].key), key)) return gopt_graph_str(g, g->props.a[i].val);
  return NULL;
}

int gopt_graph_add_output(gopt_graph *g, int32_t t) {
  if (GOPT_ARR_PUSH(g->outputs, t)) return GOPT_ENOMEM;
  g->tensors.a[t].flags |= GOPT_T_OUTPUT;
  return GOPT_OK;
}

/* ---- nodes ----------------------------------------------------------------------------------- */

const char *gopt_node_type(const gopt_graph *g, int32_t n) {
  return gopt_graph_str(g, g->nodes.a[n].type);
}

const char *gopt_node_name(const gopt_graph *g, int32_t n) {
  return gopt_graph_str(g, g->nodes.a[n].name);
}

int32_t gopt_graph_add_node(gopt_graph *g, const char *type, const char *name, int n_in,
                            const int32_t *inputs, int n_out, const int32_t *outputs,
                            gopt_error *err) {
  char buf[48];
  if (n_in < 0 || n_out < 0 || n_in > UINT16_MAX || n_out > UINT16_MAX) {
    gopt_error_set(err, GOPT_EINVAL, "node '%s' (op %s): bad input/output count",
                   name ? name : "", type);
    return -1;
  }
  if (g->nodes.n >= INT32_MAX - 1 || g->slots.n + (size_t)n_in >= INT32_MAX) {
    gopt_error_set(err, GOPT_ERANGE, "graph has too many nodes");
    return -1;
  }
  for (int i = 0; i < n_in; i++)
    if (inputs[i] < -1 || inputs[i] >= (int32_t)g->tensors.n) {
      gopt_error_set(err, GOPT_EINVAL, "node '%s' (op %s): input %d is not a tensor",
                     name ? name : "", type, i);
      return -1;
    }
  for (int i = 0; i < n_out; i++) {
    if (outputs[i] < 0 || outputs[i] >= (int32_t)g->tensors.n) {
      gopt_error_set(err, GOPT_EINVAL, "node '%s' (op %s): output %d is not a tensor",
                     name ? name : "", type, i);
      return -1;
    }
    if (g->tensors.a[outputs[i]].producer >= 0 || (g->tensors.a[outputs[i]].flags & GOPT_T_CONST)) {
      gopt_error_set(err, GOPT_EGRAPH, "node '%s' (op %s): output '%s' is already defined",
                     name ? name : "", type, gopt_graph_str(g, g->tensors.a[outputs[i]].name));
      return -1;
    }
  }
  uint32_t tid = gopt_graph_intern(g, type);
  uint32_t nid;
  if (name && *name) {
    nid = gopt_graph_intern(g, name);
  } else {
    snprintf(buf, sizeof buf, "n__%zu", g->nodes.n);
    nid = gopt_graph_intern(g, buf);
  }
  if (tid == UINT32_MAX || nid == UINT32_MAX || GOPT_ARR_GROW(g->nodes, 1) ||
      GOPT_ARR_GROW(g->slots, (size_t)n_in) || GOPT_ARR_GROW(g->outs, (size_t)n_out)) {
    gopt_error_set(err, GOPT_ENOMEM, "out of memory adding node '%s'", name ? name : "");
    return -1;
  }
  int32_t id = (int32_t)g->nodes.n++;
  gopt_node *nd = &g->nodes.a[id];
  memset(nd, 0, sizeof *nd);
  nd->name = nid;
  nd->type = tid;
  nd->op = (uint16_t)gopt_op_from_name(type);
  if (nd->op == GOPT_OP_OPAQUE) nd->flags |= GOPT_N_OPAQUE;
  nd->n_in = (uint16_t)n_in;
  nd->n_out = (uint16_t)n_out;
  nd->in = (uint32_t)g->slots.n;
  nd->out = (uint32_t)g->outs.n;
  nd->attr = (uint32_t)g->attrs.n;
  for (int i = 0; i < n_in; i++) {
    int32_t s = (int32_t)g->slots.n++;
    gopt_slot *sl = &g->slots.a[s];
    sl->tensor = inputs[i];
    sl->node = id;
    sl->next_use = -1;
    if (inputs[i] >= 0) {
      sl->next_use = g->tensors.a[inputs[i]].first_use;
      g->tensors.a[inputs[i]].first_use = s;
    }
  }
  for (int i = 0; i < n_out; i++) {
    g->outs.a[g->outs.n++] = outputs[i];
    g->tensors.a[outputs[i]].producer = id;
    g->tensors.a[outputs[i]].out_index = i;
  }
  return id;
}

/* ---- attributes ------------------------------------------------------------------------------ */

/* Returns a writable attribute slot named `name` on node n (existing or new), or NULL. */
static gopt_attr *attr_slot(gopt_graph *g, int32_t n, const char *name) {
  uint32_t sid = gopt_graph_intern(g, name);
  if (sid == UINT32_MAX) return NULL;
  gopt_node *nd = &g->nodes.a[n];
  for (uint32_t i = 0; i < nd->n_attr; i++)
    if (g->attrs.a[nd->attr + i].name == sid) return &g->attrs.a[nd->attr + i];
  if (nd->n_attr == UINT16_MAX || GOPT_ARR_GROW(g->attrs, (size_t)nd->n_attr + 1)) return NULL;
  nd = &g->nodes.a[n];
  if (nd->attr + nd->n_attr != g->attrs.n) {
    /* Not the last range: move this node's attributes to the end (the old range is garbage
     * until gopt_graph_compact). */
    memmove(g->attrs.a + g->attrs.n, g->attrs.a + nd->attr, nd->n_attr * sizeof(gopt_attr));
    nd->attr = (uint32_t)g->attrs.n;
    g->attrs.n += nd->n_attr;
  }
  gopt_attr *a = &g->attrs.a[g->attrs.n++];
  nd->n_attr++;
  memset(a, 0, sizeof *a);
  a->name = sid;
  return a;
}

int gopt_node_set_int(gopt_graph *g, int32_t n, const char *name, int64_t v) {
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_INT;
  a->n = 1;
  a->v.i = v;
  return GOPT_OK;
}

int gopt_node_set_float(gopt_graph *g, int32_t n, const char *name, double v) {
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_FLOAT;
  a->n = 1;
  a->v.f = v;
  return GOPT_OK;
}

int gopt_node_set_string(gopt_graph *g, int32_t n, const char *name, const char *v) {
  uint32_t sid = gopt_graph_intern(g, v);
  gopt_attr *a = sid == UINT32_MAX ? NULL : attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_STRING;
  a->n = 1;
  a->v.s = sid;
  return GOPT_OK;
}

int gopt_node_set_ints(gopt_graph *g, int32_t n, const char *name, const int64_t *v, size_t cnt) {
  if (cnt > UINT32_MAX || GOPT_ARR_GROW(g->ints, cnt)) return GOPT_ENOMEM;
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_INTS;
  a->n = (uint32_t)cnt;
  a->v.off = (uint32_t)g->ints.n;
  if (cnt) memcpy(g->ints.a + g->ints.n, v, cnt * sizeof *v);
  g->ints.n += cnt;
  return GOPT_OK;
}

int gopt_node_set_floats(gopt_graph *g, int32_t n, const char *name, const float *v, size_t cnt) {
  if (cnt > UINT32_MAX || GOPT_ARR_GROW(g->floats, cnt)) return GOPT_ENOMEM;
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_FLOATS;
  a->n = (uint32_t)cnt;
  a->v.off = (uint32_t)g->floats.n;
  if (cnt) memcpy(g->floats.a + g->floats.n, v, cnt * sizeof *v);
  g->floats.n += cnt;
  return GOPT_OK;
}

int gopt_node_set_strings(gopt_graph *g, int32_t n, const char *name, const char *const *v,
                          size_t cnt) {
  if (cnt > UINT32_MAX || GOPT_ARR_GROW(g->strids, cnt)) return GOPT_ENOMEM;
  size_t off = g->strids.n;
  for (size_t i = 0; i < cnt; i++) {
    uint32_t sid = gopt_graph_intern(g, v[i]);
    if (sid == UINT32_MAX) return GOPT_ENOMEM;
    g->strids.a[off + i] = sid;
  }
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  g->strids.n = off + cnt;
  a->kind = GOPT_ATTR_STRINGS;
  a->n = (uint32_t)cnt;
  a->v.off = (uint32_t)off;
  return GOPT_OK;
}

int gopt_node_set_tensor(gopt_graph *g, int32_t n, const char *name, int32_t tensor) {
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) return GOPT_ENOMEM;
  a->kind = GOPT_ATTR_TENSOR;
  a->n = 1;
  a->v.tensor = tensor;
  g->tensors.a[tensor].flags |= GOPT_T_ATTR;
  return GOPT_OK;
}

int gopt_node_set_graph(gopt_graph *g, int32_t n, const char *name, gopt_graph *sub) {
  if (GOPT_ARR_PUSH(g->subgraphs, sub)) return GOPT_ENOMEM;
  gopt_attr *a = attr_slot(g, n, name);
  if (!a) {
    g->subgraphs.n--;
    return GOPT_ENOMEM;
  }
  sub->parent = g;
  a->kind = GOPT_ATTR_GRAPH;
  a->n = 1;
  a->v.graph = (int32_t)(g->subgraphs.n - 1);
  return GOPT_OK;
}

const gopt_attr *gopt_node_attr(const gopt_graph *g, int32_t n, const char *name) {
  uint32_t sid = strtab_find(g->strs, name, strlen(name));
  if (sid == UINT32_MAX) return NULL;
  const gopt_node *nd = &g->nodes.a[n];
  for (uint32_t i = 0; i < nd->n_attr; i++)
    if (g->attrs.a[nd->attr + i].name == sid) return &g->attrs.a[nd->attr + i];
  return NULL;
}

int64_t gopt_node_get_int(const gopt_graph *g, int32_t n, const char *name, int64_t dflt) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a) return dflt;
  if (a->kind == GOPT_ATTR_INT) return a->v.i;
  /* A float attribute read as an integer: truncated; NaN or out of range gives dflt. */
  if (a->kind == GOPT_ATTR_FLOAT) return (a->v.f > -9.2e18 && a->v.f < 9.2e18) ? (int64_t)a->v.f : dflt;
  return dflt;
}

double gopt_node_get_float(const gopt_graph *g, int32_t n, const char *name, double dflt) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a) return dflt;
  if (a->kind == GOPT_ATTR_FLOAT) return a->v.f;
  if (a->kind == GOPT_ATTR_INT) return (double)a->v.i;
  return dflt;
}

const int64_t *gopt_node_get_ints(const gopt_graph *g, int32_t n, const char *name, size_t *cnt) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a || a->kind != GOPT_ATTR_INTS) {
    *cnt = 0;
    return NULL;
  }
  static const int64_t none[1];
  *cnt = a->n;
  return a->n ? g->ints.a + a->v.off : none; /* present but empty: non-NULL, even with no pool */
}

const float *gopt_node_get_floats(const gopt_graph *g, int32_t n, const char *name, size_t *cnt) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a || a->kind != GOPT_ATTR_FLOATS) {
    *cnt = 0;
    return NULL;
  }
  static const float none[1];
  *cnt = a->n;
  return a->n ? g->floats.a + a->v.off : none;
}

const char *gopt_node_get_string(const gopt_graph *g, int32_t n, const char *name,
                                 const char *dflt) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a || a->kind != GOPT_ATTR_STRING) return dflt;
  return gopt_graph_str(g, a->v.s);
}

size_t gopt_graph_memory(const gopt_graph *g, int include_data) {
  size_t m = sizeof *g + strtab_memory(g->strs);
  m += g->nodes.cap * sizeof *g->nodes.a + g->tensors.cap * sizeof *g->tensors.a;
  m += g->slots.cap * sizeof *g->slots.a + g->outs.cap * sizeof *g->outs.a;
  m += g->attrs.cap * sizeof *g->attrs.a + g->dims.cap * sizeof *g->dims.a;
  m += g->ints.cap * sizeof *g->ints.a + g->floats.cap * sizeof *g->floats.a;
  m += g->strids.cap * sizeof *g->strids.a + g->consts.cap * sizeof *g->consts.a;
  m += g->inputs.cap * sizeof(int32_t) + g->outputs.cap * sizeof(int32_t);
  m += g->syms.cap * sizeof(uint32_t) + g->tensor_of_str.cap * sizeof(int32_t);
  m += g->sym_of_str.cap * sizeof(int32_t);
  m += g->opsets.cap * sizeof(gopt_opset) + g->subgraphs.cap * sizeof(void *);
  m += g->props.cap * sizeof(gopt_prop);
  for (size_t i = 0; i < g->subgraphs.n; i++) m += gopt_graph_memory(g->subgraphs.a[i], include_data);
  if (include_data)
    for (size_t i = 0; i < g->consts.n; i++)
      if (g->consts.a[i].data) m += g->consts.a[i].nbytes;
  return m;
}

int ir_node_copy_attrs(gopt_graph *g, int32_t n, int32_t m) {
  for (uint16_t k = 0; k < g->nodes.a[n].n_attr; k++) {
    gopt_attr src = g->attrs.a[g->nodes.a[n].attr + k]; /* a copy: attr_slot may move the array */
    gopt_graph *sub = NULL;
    if (src.kind == GOPT_ATTR_GRAPH && !(sub = gopt_graph_clone(g->subgraphs.a[src.v.graph]))) return GOPT_ENOMEM;
    if (sub && GOPT_ARR_PUSH(g->subgraphs, sub)) {
      gopt_graph_free(sub);
      return GOPT_ENOMEM;
    }
    gopt_attr *a = attr_slot(g, m, gopt_graph_str(g, src.name));
    if (!a) return GOPT_ENOMEM; /* sub (if any) is owned by g->subgraphs now */
    uint32_t name = a->name;
    *a = src; /* list values share their (never rewritten) storage */
    a->name = name;
    if (sub) {
      sub->parent = g;
      a->v.graph = (int32_t)(g->subgraphs.n - 1);
    }
  }
  return GOPT_OK;
}

int ir_tensor_rename(gopt_graph *g, int32_t t, const char *name) {
  uint32_t old = g->tensors.a[t].name, sid = gopt_graph_intern(g, name);
  if (sid == UINT32_MAX || ir_graph_index_name(g, sid, t)) return GOPT_ENOMEM;
  if (old < g->tensor_of_str.n && old != sid && g->tensor_of_str.a[old] == t) g->tensor_of_str.a[old] = -1;
  g->tensors.a[t].name = sid;
  return GOPT_OK;
}
