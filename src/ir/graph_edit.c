/* graph_edit.c: in-place editing of the graph IR: rewiring uses, removing nodes, compaction. */
#include <string.h>

#include "ir/ir_internal.h"

/* Unlinks slot s from the use list of the tensor it reads. */
static void use_unlink(gopt_graph *g, int32_t s) {
  int32_t t = g->slots.a[s].tensor;
  if (t < 0) return;
  int32_t *p = &g->tensors.a[t].first_use;
  while (*p >= 0 && *p != s) p = &g->slots.a[*p].next_use;
  if (*p == s) *p = g->slots.a[s].next_use;
  g->slots.a[s].next_use = -1;
  g->slots.a[s].tensor = -1;
}

static void use_link(gopt_graph *g, int32_t s, int32_t t) {
  g->slots.a[s].tensor = t;
  g->slots.a[s].next_use = -1;
  if (t < 0) return;
  g->slots.a[s].next_use = g->tensors.a[t].first_use;
  g->tensors.a[t].first_use = s;
}

int gopt_node_set_input(gopt_graph *g, int32_t n, int i, int32_t t) {
  if (n < 0 || (size_t)n >= g->nodes.n || i < 0 || i >= g->nodes.a[n].n_in ||
      t < -1 || t >= (int32_t)g->tensors.n)
    return GOPT_EINVAL;
  int32_t s = (int32_t)(g->nodes.a[n].in + (uint32_t)i);
  use_unlink(g, s);
  use_link(g, s, t);
  return GOPT_OK;
}

size_t gopt_graph_replace_uses(gopt_graph *g, int32_t from, int32_t to) {
  size_t count = 0;
  if (from == to) return 0;
  int32_t s = g->tensors.a[from].first_use;
  while (s >= 0) {
    int32_t next = g->slots.a[s].next_use;
    g->slots.a[s].next_use = -1;
    use_link(g, s, to);
    s = next;
    count++;
  }
  g->tensors.a[from].first_use = -1;
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == from) {
      g->outputs.a[i] = to;
      count++;
    }
  /* Output flags follow the list. */
  int still = 0;
  for (size_t i = 0; i < g->outputs.n; i++) still |= g->outputs.a[i] == from;
  if (!still) g->tensors.a[from].flags &= (uint16_t)~GOPT_T_OUTPUT;
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == to) g->tensors.a[to].flags |= GOPT_T_OUTPUT;
  return count;
}

int gopt_graph_remove_node(gopt_graph *g, int32_t n) {
  if (n < 0 || (size_t)n >= g->nodes.n) return GOPT_EINVAL;
  gopt_node *nd = &g->nodes.a[n];
  if (nd->flags & GOPT_N_DEAD) return GOPT_OK;
  for (uint32_t i = 0; i < nd->n_in; i++) use_unlink(g, (int32_t)(nd->in + i));
  for (uint32_t i = 0; i < nd->n_out; i++) {
    int32_t t = g->outs.a[nd->out + i];
    if (g->tensors.a[t].producer == n) {
      g->tensors.a[t].producer = -1;
      g->tensors.a[t].out_index = -1;
    }
  }
  nd->flags |= GOPT_N_DEAD;
  g->n_dead++;
  return GOPT_OK;
}

size_t gopt_tensor_use_count(const gopt_graph *g, int32_t t) {
  size_t c = 0;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use)
    if (!(g->nodes.a[g->slots.a[s].node].flags & GOPT_N_DEAD)) c++;
  return c;
}

/* Marks tensors referenced by TENSOR attributes of live nodes as kept. */
static void keep_attr_tensors(const gopt_graph *g, unsigned char *keep) {
  for (size_t n = 0; n < g->nodes.n; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    for (uint32_t i = 0; i < nd->n_attr; i++) {
      const gopt_attr *a = &g->attrs.a[nd->attr + i];
      if (a->kind == GOPT_ATTR_TENSOR && a->v.tensor >= 0) keep[a->v.tensor] = 1;
    }
  }
}

int gopt_graph_compact(gopt_graph *g, int32_t *old_to_new_node) {
  int rc = GOPT_OK;
  size_t nt = g->tensors.n, nn = g->nodes.n;
  unsigned char *keep = calloc(nt ? nt : 1, 1);
  int32_t *tmap = malloc((nt ? nt : 1) * sizeof *tmap);
  int32_t *nmap = old_to_new_node ? old_to_new_node : malloc((nn ? nn : 1) * sizeof *nmap);
  gopt_graph tmp;
  memset(&tmp, 0, sizeof tmp);
  if (!keep || !tmap || !nmap) {
    rc = GOPT_ENOMEM;
    goto done;
  }
  for (size_t t = 0; t < nt; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if ((x->flags & (GOPT_T_INPUT | GOPT_T_OUTPUT)) || x->producer >= 0) keep[t] = 1;
  }
  for (size_t n = 0; n < nn; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) continue;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      int32_t t = g->slots.a[nd->in + i].tensor;
      if (t >= 0) keep[t] = 1;
    }
  }
  keep_attr_tensors(g, keep);
  /* New storage. */
  size_t live = nn - g->n_dead;
  if (GOPT_ARR_GROW(tmp.nodes, live) || GOPT_ARR_GROW(tmp.tensors, nt) ||
      GOPT_ARR_GROW(tmp.dims, g->dims.n) || GOPT_ARR_GROW(tmp.slots, g->slots.n) ||
      GOPT_ARR_GROW(tmp.outs, g->outs.n) || GOPT_ARR_GROW(tmp.attrs, g->attrs.n) ||
      GOPT_ARR_GROW(tmp.consts, g->consts.n)) {
    rc = GOPT_ENOMEM;
    goto done;
  }
  for (size_t t = 0; t < nt; t++) {
    if (!keep[t]) {
      tmap[t] = -1;
      if (g->tensors.a[t].cdata >= 0) free(g->consts.a[g->tensors.a[t].cdata].data);
      g->tensor_of_str.a[g->tensors.a[t].name] = -1;
      continue;
    }
    gopt_tensor x = g->tensors.a[t];
    tmap[t] = (int32_t)tmp.tensors.n;
    uint32_t d = (uint32_t)tmp.dims.n;
    for (int i = 0; i < x.rank; i++) tmp.dims.a[tmp.dims.n++] = g->dims.a[x.dims + (uint32_t)i];
    x.dims = d;
    x.first_use = -1;
    if (x.cdata >= 0) {
      gopt_const k = g->consts.a[x.cdata];
      k.tensor = tmap[t];
      x.cdata = (int32_t)tmp.consts.n;
      tmp.consts.a[tmp.consts.n++] = k;
    }
    tmp.tensors.a[tmp.tensors.n++] = x;
  }
  for (size_t n = 0; n < nn; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if (nd->flags & GOPT_N_DEAD) {
      nmap[n] = -1;
      continue;
    }
    nmap[n] = (int32_t)tmp.nodes.n;
    gopt_node x = *nd;
    x.in = (uint32_t)tmp.slots.n;
    x.out = (uint32_t)tmp.outs.n;
    x.attr = (uint32_t)tmp.attrs.n;
    for (uint32_t i = 0; i < nd->n_in; i++) {
      gopt_slot s = g->slots.a[nd->in + i];
      s.tensor = s.tensor >= 0 ? tmap[s.tensor] : -1;
      s.node = nmap[n];
      s.next_use = -1;
      tmp.slots.a[tmp.slots.n++] = s;
    }
    for (uint32_t i = 0; i < nd->n_out; i++) tmp.outs.a[tmp.outs.n++] = tmap[g->outs.a[nd->out + i]];
    for (uint32_t i = 0; i < nd->n_attr; i++) {
      gopt_attr a = g->attrs.a[nd->attr + i];
      if (a.kind == GOPT_ATTR_TENSOR && a.v.tensor >= 0) a.v.tensor = tmap[a.v.tensor];
      tmp.attrs.a[tmp.attrs.n++] = a;
    }
    tmp.nodes.a[tmp.nodes.n++] = x;
  }
  /* Producers and use lists in the new numbering. */
  for (size_t t = 0; t < tmp.tensors.n; t++) {
    gopt_tensor *x = &tmp.tensors.a[t];
    if (x->producer >= 0) x->producer = nmap[x->producer];
    if (x->producer < 0) x->out_index = -1;
  }
  for (size_t s = tmp.slots.n; s-- > 0;) {
    gopt_slot *sl = &tmp.slots.a[s];
    if (sl->tensor < 0) continue;
    sl->next_use = tmp.tensors.a[sl->tensor].first_use;
    tmp.tensors.a[sl->tensor].first_use = (int32_t)s;
  }
  for (size_t i = 0; i < g->inputs.n; i++) g->inputs.a[i] = tmap[g->inputs.a[i]];
  for (size_t i = 0; i < g->outputs.n; i++) g->outputs.a[i] = tmap[g->outputs.a[i]];
  for (size_t t = 0; t < tmp.tensors.n; t++) g->tensor_of_str.a[tmp.tensors.a[t].name] = (int32_t)t;
  GOPT_ARR_FREE(g->nodes);
  GOPT_ARR_FREE(g->tensors);
  GOPT_ARR_FREE(g->dims);
  GOPT_ARR_FREE(g->slots);
  GOPT_ARR_FREE(g->outs);
  GOPT_ARR_FREE(g->attrs);
  GOPT_ARR_FREE(g->consts);
  g->nodes = tmp.nodes;
  g->tensors = tmp.tensors;
  g->dims = tmp.dims;
  g->slots = tmp.slots;
  g->outs = tmp.outs;
  g->attrs = tmp.attrs;
  g->consts = tmp.consts;
  memset(&tmp, 0, sizeof tmp);
  g->n_dead = 0;
done:
  GOPT_ARR_FREE(tmp.nodes);
  GOPT_ARR_FREE(tmp.tensors);
  GOPT_ARR_FREE(tmp.dims);
  GOPT_ARR_FREE(tmp.slots);
  GOPT_ARR_FREE(tmp.outs);
  GOPT_ARR_FREE(tmp.attrs);
  GOPT_ARR_FREE(tmp.consts);
  free(keep);
  free(tmap);
  if (nmap != old_to_new_node) free(nmap);
  return rc;
}
