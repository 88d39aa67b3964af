/* pass_core.c: the structural passes: DCE, CSE (nodes and equal constants), the tuple simplifier
 * and zero-sized HLO elimination. DCE and CSE work on graphs of any front end. */
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "ir/ir_internal.h"
#include "passes/passes_internal.h"

static int32_t *topo(pctx *p, int64_t *cnt) {
  int32_t *order = malloc((p->g->nodes.n + 1) * sizeof *order);
  if (!order) {
    gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
    return NULL;
  }
  *cnt = gopt_graph_topo(p->g, order, p->err);
  if (*cnt < 0) {
    free(order);
    return NULL;
  }
  return order;
}

int pass_dce(pctx *p) {
  gopt_graph *g = p->g;
  int64_t cnt;
  int32_t *order = topo(p, &cnt);
  if (!order) return p->err->code ? p->err->code : GOPT_ENOMEM;
  for (int64_t k = cnt - 1; k >= 0; k--) {
    int32_t n = order[k];
    const gopt_node *nd = &g->nodes.a[n];
    if (pass_side_effect(g, n)) continue;
    int used = 0;
    for (int i = 0; i < nd->n_out && !used; i++) {
      int32_t t = gopt_node_output(g, n, i);
      used = gopt_tensor_use_count(g, t) > 0 || pass_is_output(p, t);
    }
    if (used) continue;
    gopt_graph_remove_node(g, n);
    p->st->removed++;
    p->st->rewrites++;
  }
  free(order);
  return 0;
}

/* Hash of node n's computation: type, inputs, attributes, output types. */
static uint64_t node_key(const gopt_graph *g, int32_t n) {
  const gopt_node *nd = &g->nodes.a[n];
  uint64_t h = gopt_hash_mix(0x9e3779b97f4a7c15ull, nd->type);
  for (int i = 0; i < nd->n_in; i++) h = gopt_hash_mix(h, (uint64_t)(uint32_t)gopt_node_input(g, n, i));
  for (uint16_t a = 0; a < nd->n_attr; a++) h = gopt_hash_mix(h, ir_attr_hash(g, &g->attrs.a[nd->attr + a]));
  for (int i = 0; i < nd->n_out; i++)
    h = gopt_hash_mix(h, ir_tensor_shape_hash(g, &g->tensors.a[gopt_node_output(g, n, i)]));
  return gopt_hash_mix(h, (uint64_t)nd->n_in << 16 | nd->n_out);
}

static int same_node(const gopt_graph *g, int32_t a, int32_t b) {
  const gopt_node *x = &g->nodes.a[a], *y = &g->nodes.a[b];
  if (x->type != y->type || x->n_in != y->n_in || x->n_out != y->n_out || x->n_attr != y->n_attr) return 0;
  for (int i = 0; i < x->n_in; i++)
    if (gopt_node_input(g, a, i) != gopt_node_input(g, b, i)) return 0;
  for (int i = 0; i < x->n_out; i++)
    if (!pass_same_type(g, gopt_node_output(g, a, i), gopt_node_output(g, b, i))) return 0;
  for (uint16_t i = 0; i < x->n_attr; i++)
    if (ir_attr_hash(g, &g->attrs.a[x->attr + i]) != ir_attr_hash(g, &g->attrs.a[y->attr + i])) return 0;
  return 1;
}

/* Merges constants with equal type and bytes (the first one stays). */
static void cse_consts(pctx *p) {
  gopt_graph *g = p->g;
  size_t nt = g->tensors.n;
  for (size_t a = 0; a < nt; a++) {
    const gopt_tensor *x = &g->tensors.a[a];
    if (!(x->flags & GOPT_T_CONST) || (x->flags & (GOPT_T_ATTR | GOPT_T_INPUT)) || !gopt_tensor_data(g, (int32_t)a) ||
        x->first_use < 0)
      continue;
    for (size_t b = a + 1; b < nt; b++) {
      const gopt_tensor *y = &g->tensors.a[b];
      if (!(y->flags & GOPT_T_CONST) || (y->flags & (GOPT_T_ATTR | GOPT_T_INPUT)) || y->first_use < 0 ||
          !pass_same_type(g, (int32_t)a, (int32_t)b) || !gopt_tensor_data(g, (int32_t)b) ||
          g->consts.a[x->cdata].nbytes != g->consts.a[y->cdata].nbytes ||
          memcmp(gopt_tensor_data(g, (int32_t)a), gopt_tensor_data(g, (int32_t)b), g->consts.a[x->cdata].nbytes))
        continue;
      if (gopt_graph_replace_uses(g, (int32_t)b, (int32_t)a)) p->st->rewrites++;
    }
  }
}

int pass_cse(pctx *p) {
  gopt_graph *g = p->g;
  cse_consts(p);
  int64_t cnt;
  int32_t *order = topo(p, &cnt);
  if (!order) return p->err->code ? p->err->code : GOPT_ENOMEM;
  size_t cap = 16;
  while (cap < (size_t)cnt * 2) cap *= 2;
  int32_t *tab = malloc(cap * sizeof *tab);
  uint64_t *keys = malloc(cap * sizeof *keys);
  int32_t *to = malloc((size_t)(UINT16_MAX + 1) * sizeof *to);
  if (!tab || !keys || !to) {
    free(order); free(tab); free(keys); free(to);
    return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < cap; i++) tab[i] = -1;
  for (int64_t k = 0; k < cnt; k++) {
    int32_t n = order[k];
    const char *op = pass_op(g, n);
    if (g->nodes.a[n].n_out == 0 || pass_side_effect(g, n) || (op && !strncmp(op, "rng", 3))) continue;
    uint64_t h = node_key(g, n);
    size_t j = (size_t)h & (cap - 1);
    int merged = 0;
    for (; tab[j] >= 0; j = (j + 1) & (cap - 1)) {
      if (keys[j] != h || !same_node(g, tab[j], n)) continue;
      for (int i = 0; i < g->nodes.a[n].n_out; i++) to[i] = gopt_node_output(g, tab[j], i);
      pass_replace(p, n, to);
      merged = 1;
      break;
    }
    if (!merged) {
      tab[j] = n;
      keys[j] = h;
    }
  }
  free(order); free(tab); free(keys); free(to);
  return 0;
}

/* The operand leaf that output leaf t of a get-tuple-element node is (-1 when t is not one): a
 * get-tuple-element reads all leaves of its tuple operand; its outputs are the leaves from
 * "hlo.leaf_offset" on. */
static int32_t gte_source(const gopt_graph *g, int32_t t) {
  int32_t pr = t >= 0 ? g->tensors.a[t].producer : -1;
  if (pr < 0 || !pass_is(g, pr, "get-tuple-element")) return -1;
  int64_t off = gopt_node_get_int(g, pr, "hlo.leaf_offset", -1), k = off + g->tensors.a[t].out_index;
  return off >= 0 && k < g->nodes.a[pr].n_in ? gopt_node_input(g, pr, (int)k) : -1;
}

/* Tuples are flattened into leaves: get-tuple-element(tuple(...)) is the tuple's inputs, and
 * tuple(get-tuple-element(x, 0), ..., get-tuple-element(x, n-1)) over all of x's leaves is x. */
int pass_tuple_simplifier(pctx *p) {
  gopt_graph *g = p->g;
  int32_t *to = malloc((size_t)(UINT16_MAX + 1) * sizeof *to);
  if (!to) return gopt_error_set(p->err, GOPT_ENOMEM, "out of memory");
  for (size_t n = 0; n < g->nodes.n; n++) {
    if (!gopt_node_alive(g, (int32_t)n)) continue;
    const gopt_node *nd = &g->nodes.a[n];
    if (pass_is(g, (int32_t)n, "get-tuple-element") && nd->n_out > 0) {
      int ok = 1;
      for (int i = 0; i < nd->n_out && ok; i++) {
        int32_t s = gte_source(g, gopt_node_output(g, (int32_t)n, i));
        int32_t pr = s >= 0 ? g->tensors.a[s].producer : -1;
        if (pr >= 0 && pass_is(g, pr, "tuple")) {
          to[i] = gopt_node_input(g, pr, g->tensors.a[s].out_index); /* tuple output k = input k */
        } else { /* a leaf that is a value of its own (not part of a tuple) is read directly */
          ok = s >= 0 && (pr < 0 || g->nodes.a[pr].n_out == 1) &&
               !strchr(gopt_graph_str(g, g->tensors.a[s].name), '#');
          to[i] = s;
        }
      }
      if (ok) pass_replace(p, (int32_t)n, to);
    } else if (pass_is(g, (int32_t)n, "tuple") && nd->n_in > 0) {
      int32_t src = -2;
      int ok = 1;
      for (int i = 0; i < nd->n_in && ok; i++) {
        int32_t s = gte_source(g, gopt_node_input(g, (int32_t)n, i));
        int32_t pr = s >= 0 ? g->tensors.a[s].producer : -1;
        if (i == 0) src = pr;
        ok = s >= 0 && pr >= 0 && pr == src && g->tensors.a[s].out_index == i;
        if (ok) to[i] = s;
      }
      /* x must be a whole node value with exactly these leaves */
      if (ok && src >= 0 && g->nodes.a[src].n_out == nd->n_in) pass_replace(p, (int32_t)n, to);
    }
  }
  free(to);
  return 0;
}

int pass_zero_sized(pctx *p) {
  gopt_graph *g = p->g;
  size_t nn = g->nodes.n;
  for (size_t n = 0; n < nn; n++) {
    if (!gopt_node_alive(g, (int32_t)n) || g->nodes.a[n].n_out != 1 || pass_side_effect(g, (int32_t)n)) continue;
    const char *op = pass_op(g, (int32_t)n);
    int32_t t = gopt_node_output(g, (int32_t)n, 0);
    const gopt_tensor *x = &g->tensors.a[t];
    if (!op || !strcmp(op, "tuple") || !strcmp(op, "get-tuple-element") || (x->flags & GOPT_T_NOSHAPE) ||
        x->rank == 0 || gopt_tensor_numel(g, t) != 0 || x->dtype == GOPT_DT_STRING)
      continue;
    int static_ = 1;
    for (int k = 0; k < x->rank; k++) static_ &= gopt_tensor_dims(g, t)[k] >= 0;
    if (!static_) continue;
    int64_t dims[GOPT_MAX_RANK];
    memcpy(dims, gopt_tensor_dims(g, t), (size_t)x->rank * sizeof *dims);
    int32_t c = gopt_graph_add_tensor(g, NULL, x->dtype, x->rank, dims, p->err);
    unsigned char none = 0;
    if (c < 0 || gopt_tensor_set_const(g, c, &none, 0, p->err)) return p->err->code ? p->err->code : GOPT_ENOMEM;
    pass_replace(p, (int32_t)n, &c);
  }
  return 0;
}
