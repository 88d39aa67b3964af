/* graph_analysis.c: counts, topological order, validation and the canonical structural hash. */
#include <string.h>

#include "gopt/util.h"
#include "ir/ir_internal.h"

size_t gopt_graph_node_count(const gopt_graph *g) { return g->nodes.n - g->n_dead; }

size_t gopt_graph_edge_count(const gopt_graph *g) {
  size_t e = 0;
  for (size_t n = 0; n < g->nodes.n; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = g->slots.a[nd->in + i].tensor;
      if (t >= 0 && g->tensors.a[t].producer >= 0) e++;
    }
  }
  return e;
}

int64_t gopt_graph_topo(const gopt_graph *g, int32_t *order, gopt_error *err) {
  size_t nn = g->nodes.n;
  int32_t *indeg = calloc(nn ? nn : 1, sizeof *indeg);
  if (!indeg) return gopt_error_set(err, GOPT_ENOMEM, "out of memory in topological sort");
  size_t head = 0, tail = 0, live = 0;
  for (size_t n = 0; n < nn; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    live++;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = g->slots.a[nd->in + i].tensor;
      if (t >= 0 && g->tensors.a[t].producer >= 0) indeg[n]++;
    }
    if (indeg[n] == 0) order[tail++] = (int32_t)n;
  }
  /* FIFO over ready nodes, seeded in id order: deterministic for a given graph. */
  while (head < tail) {
    int32_t n = order[head++];
    const gopt_node *nd = &g->nodes.a[n];
    for (uint32_t o = 0; o < nd->n_out; o++) {
      int32_t t = g->outs.a[nd->out + o];
      if (g->tensors.a[t].producer != n) continue;
      for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
        int32_t c = g->slots.a[s].node;
        if (g->nodes.a[c].flags & GOPT_N_DEAD) continue;
        if (--indeg[c] == 0) order[tail++] = c;
      }
    }
  }
  int64_t rc = (int64_t)tail;
  if (tail != live) {
    size_t bad = 0;
    while (bad < nn && ((g->nodes.a[bad].flags & GOPT_N_DEAD) || indeg[bad] == 0)) bad++;
    rc = gopt_error_set(err, GOPT_EGRAPH, "graph has a cycle through node '%s' (op %s)",
                        bad < nn ? gopt_node_name(g, (int32_t)bad) : "?",
                        bad < nn ? gopt_node_type(g, (int32_t)bad) : "?");
  }
  free(indeg);
  return rc;
}

int64_t gopt_graph_topo_stable(const gopt_graph *g, int32_t *order, gopt_error *err) {
  size_t nn = g->nodes.n, hn = 0, k = 0, live = 0;
  int32_t *indeg = calloc(nn ? nn : 1, sizeof *indeg);
  int32_t *heap = malloc((nn ? nn : 1) * sizeof *heap);
  int64_t rc;
  if (!indeg || !heap) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
#define HPUSH(v)                                                         \
  do {                                                                   \
    size_t i_ = hn++;                                                    \
    heap[i_] = (v);                                                      \
    while (i_ && heap[(i_ - 1) / 2] > heap[i_]) {                        \
      int32_t t_ = heap[i_]; heap[i_] = heap[(i_ - 1) / 2]; heap[(i_ - 1) / 2] = t_; \
      i_ = (i_ - 1) / 2;                                                 \
    }                                                                    \
  } while (0)
  for (size_t n = 0; n < nn; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    live++;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = g->slots.a[nd->in + i].tensor;
      if (t >= 0 && g->tensors.a[t].producer >= 0 && gopt_node_alive(g, g->tensors.a[t].producer))
        indeg[n]++;
    }
    if (indeg[n] == 0) HPUSH((int32_t)n);
  }
  while (hn) {
    int32_t n = heap[0];
    heap[0] = heap[--hn];
    for (size_t i = 0;;) {
      size_t l = 2 * i + 1, r = l + 1, m = i;
      if (l < hn && heap[l] < heap[m]) m = l;
      if (r < hn && heap[r] < heap[m]) m = r;
      if (m == i) break;
      int32_t t = heap[i]; heap[i] = heap[m]; heap[m] = t;
      i = m;
    }
    order[k++] = n;
    const gopt_node *nd = &g->nodes.a[n];
    for (uint32_t o = 0; o < nd->n_out; o++) {
      int32_t t = g->outs.a[nd->out + o];
      if (g->tensors.a[t].producer != n) continue;
      for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
        int32_t c = g->slots.a[s].node;
        if (!gopt_node_alive(g, c)) continue;
        if (--indeg[c] == 0) HPUSH(c);
      }
    }
  }
#undef HPUSH
  rc = (int64_t)k;
  if (k != live) {
    size_t bad = 0;
    while (bad < nn && (!gopt_node_alive(g, (int32_t)bad) || indeg[bad] == 0)) bad++;
    rc = gopt_error_set(err, GOPT_EGRAPH, "graph has a cycle through node '%s' (op %s)",
                        bad < nn ? gopt_node_name(g, (int32_t)bad) : "?",
                        bad < nn ? gopt_node_type(g, (int32_t)bad) : "?");
  }
done:
  free(indeg);
  free(heap);
  return rc;
}

/* Whether a tensor named like t exists in an enclosing graph (an outer-scope reference). */
static int outer_scope(const gopt_graph *g, int32_t t) {
  const char *name = gopt_graph_str(g, g->tensors.a[t].name);
  for (const gopt_graph *p = g->parent; p; p = p->parent)
    if (gopt_graph_find_tensor(p, name) >= 0) return 1;
  return 0;
}

int gopt_graph_validate(const gopt_graph *g, gopt_error *err) {
  int rc = GOPT_OK;
  int32_t *order = NULL;
  size_t *uses = calloc(g->tensors.n ? g->tensors.n : 1, sizeof *uses);
  if (!uses) return gopt_error_set(err, GOPT_ENOMEM, "out of memory validating graph");
  for (size_t n = 0; n < g->nodes.n; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      const gopt_slot *sl = &g->slots.a[nd->in + i];
      if (sl->node != (int32_t)n) {
        rc = gopt_error_set(err, GOPT_EGRAPH, "node '%s': input slot %u is owned by another node",
                            gopt_node_name(g, (int32_t)n), i);
        goto done;
      }
      int32_t t = sl->tensor;
      if (t < 0) continue;
      uses[t]++;
      const gopt_tensor *x = &g->tensors.a[t];
      if (x->producer < 0 && !(x->flags & (GOPT_T_INPUT | GOPT_T_CONST)) && !outer_scope(g, t)) {
        rc = gopt_error_set(err, GOPT_EGRAPH,
                            "node '%s' (op %s): input '%s' is not produced by any node, not a "
                            "graph input and not a constant",
                            gopt_node_name(g, (int32_t)n), gopt_node_type(g, (int32_t)n),
                            gopt_graph_str(g, x->name));
        goto done;
      }
    }
    for (uint32_t o = 0; o < nd->n_out; o++) {
      int32_t t = g->outs.a[nd->out + o];
      if (g->tensors.a[t].producer != (int32_t)n) {
        rc = gopt_error_set(err, GOPT_EGRAPH, "node '%s': output '%s' names another producer",
                            gopt_node_name(g, (int32_t)n), gopt_graph_str(g, g->tensors.a[t].name));
        goto done;
      }
    }
  }
  for (size_t t = 0; t < g->tensors.n; t++) {
    size_t c = 0;
    for (int32_t s = g->tensors.a[t].first_use; s >= 0 && c <= g->slots.n; s = g->slots.a[s].next_use)
      if (!(g->nodes.a[g->slots.a[s].node].flags & GOPT_N_DEAD)) {
        if (g->slots.a[s].tensor != (int32_t)t) c = g->slots.n + 1;
        c++;
      }
    if (c != uses[t]) {
      rc = gopt_error_set(err, GOPT_EGRAPH, "tensor '%s': use list is inconsistent",
                          gopt_graph_str(g, g->tensors.a[t].name));
      goto done;
    }
  }
  for (size_t i = 0; i < g->outputs.n; i++) {
    const gopt_tensor *x = &g->tensors.a[g->outputs.a[i]];
    if (x->producer < 0 && !(x->flags & (GOPT_T_INPUT | GOPT_T_CONST))) {
      rc = gopt_error_set(err, GOPT_EGRAPH, "graph output '%s' is not produced by any node",
                          gopt_graph_str(g, x->name));
      goto done;
    }
  }
  order = malloc((g->nodes.n ? g->nodes.n : 1) * sizeof *order);
  if (!order) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory validating graph");
    goto done;
  }
  int64_t k = gopt_graph_topo(g, order, err);
  if (k < 0) rc = (int)k;
done:
  free(order);
  free(uses);
  return rc;
}

/* ---- canonical hash ------------------------------------------------------------------------ */

static uint64_t hash_str(const gopt_graph *g, uint32_t id) {
  const char *s = gopt_graph_str(g, id);
  return gopt_hash_bytes(s, strlen(s), 0x5157);
}

uint64_t ir_tensor_shape_hash(const gopt_graph *g, const gopt_tensor *x) {
  uint64_t h = gopt_hash_mix(x->dtype, (uint64_t)x->rank + ((x->flags & GOPT_T_NOSHAPE) ? 1000 : 0));
  for (int i = 0; i < x->rank; i++) {
    int64_t d = g->dims.a[x->dims + (uint32_t)i];
    h = gopt_hash_mix(h, d >= 0 ? (uint64_t)d : hash_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]));
  }
  return h;
}

static uint64_t hash_const(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  uint64_t h = gopt_hash_mix(ir_tensor_shape_hash(g, x), 0xC0);
  const gopt_const *k = &g->consts.a[x->cdata];
  if (k->data) h = gopt_hash_mix(h, gopt_hash_bytes(k->data, k->nbytes, 0));
  else h = gopt_hash_mix(h, gopt_hash_mix(hash_str(g, k->external), (uint64_t)k->ext_offset));
  return h;
}

uint64_t ir_attr_hash(const gopt_graph *g, const gopt_attr *a) {
  uint64_t h = gopt_hash_mix(hash_str(g, a->name), a->kind);
  switch (a->kind) {
  case GOPT_ATTR_INT: return gopt_hash_mix(h, (uint64_t)a->v.i);
  case GOPT_ATTR_FLOAT: return gopt_hash_mix(h, gopt_hash_bytes(&a->v.f, sizeof a->v.f, 0));
  case GOPT_ATTR_STRING: return gopt_hash_mix(h, hash_str(g, a->v.s));
  case GOPT_ATTR_INTS:
    return gopt_hash_mix(h, a->n ? gopt_hash_bytes(g->ints.a + a->v.off, a->n * sizeof(int64_t), 0) : 0);
  case GOPT_ATTR_FLOATS:
    return gopt_hash_mix(h, a->n ? gopt_hash_bytes(g->floats.a + a->v.off, a->n * sizeof(float), 0) : 0);
  case GOPT_ATTR_STRINGS:
    for (uint32_t i = 0; i < a->n; i++) h = gopt_hash_mix(h, hash_str(g, g->strids.a[a->v.off + i]));
    return h;
  case GOPT_ATTR_TENSOR:
    return gopt_hash_mix(h, a->v.tensor >= 0 && g->tensors.a[a->v.tensor].cdata >= 0
                                ? hash_const(g, a->v.tensor) : 0);
  case GOPT_ATTR_GRAPH: return gopt_hash_mix(h, gopt_graph_hash(g->subgraphs.a[a->v.graph]));
  default: return h;
  }
}

uint64_t gopt_graph_hash(const gopt_graph *g) {
  size_t nn = g->nodes.n;
  int32_t *order = malloc((nn ? nn : 1) * sizeof *order);
  uint64_t *nh = malloc((nn ? nn : 1) * sizeof *nh);
  uint64_t h = 0x6f707467ULL, side = 0;
  if (!order || !nh) goto done;
  int64_t cnt = gopt_graph_topo(g, order, NULL);
  if (cnt < 0) goto done;
  for (int64_t k = 0; k < cnt; k++) {
    int32_t n = order[k];
    const gopt_node *nd = &g->nodes.a[n];
    uint64_t x = hash_str(g, nd->type);
    uint64_t attrs = 0; /* attributes combine order-independently */
    for (uint32_t i = 0; i < nd->n_attr; i++) attrs += ir_attr_hash(g, &g->attrs.a[nd->attr + i]);
    x = gopt_hash_mix(x, attrs);
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = g->slots.a[nd->in + i].tensor;
      uint64_t th;
      if (t < 0) th = 0x0917;
      else if (g->tensors.a[t].producer >= 0)
        th = gopt_hash_mix(nh[g->tensors.a[t].producer], (uint64_t)g->tensors.a[t].out_index);
      else if (g->tensors.a[t].cdata >= 0) th = hash_const(g, t);
      else {
        size_t pos = 0;
        while (pos < g->inputs.n && g->inputs.a[pos] != t) pos++;
        th = gopt_hash_mix(ir_tensor_shape_hash(g, &g->tensors.a[t]), 0x1000 + pos);
      }
      x = gopt_hash_mix(x, th);
    }
    for (uint32_t o = 0; o < nd->n_out; o++)
      x = gopt_hash_mix(x, ir_tensor_shape_hash(g, &g->tensors.a[g->outs.a[nd->out + o]]));
    nh[n] = x;
    side += x;
  }
  for (size_t i = 0; i < g->outputs.n; i++) {
    int32_t t = g->outputs.a[i];
    const gopt_tensor *x = &g->tensors.a[t];
    uint64_t th = x->producer >= 0 ? gopt_hash_mix(nh[x->producer], (uint64_t)x->out_index)
                  : x->cdata >= 0 ? hash_const(g, t)
                                  : ir_tensor_shape_hash(g, x);
    h = gopt_hash_mix(h, th);
  }
  h = gopt_hash_mix(h, side);
done:
  free(order);
  free(nh);
  return h;
}
