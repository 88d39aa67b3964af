/* onnx_test_util.h: shared helpers of the ONNX tests: warning capture, tensor lookups and
 * comparisons of two graphs (names, op types, attributes, dtypes, shapes, constant bytes). */
#ifndef GOPT_TEST_ONNX_UTIL_H
#define GOPT_TEST_ONNX_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"

#define FIX "tests/onnx/data/"

typedef struct warn_log {
  int n;
  char last[1024];
} warn_log;

static inline void warn_capture(const char *msg, void *user) {
  warn_log *w = user;
  w->n++;
  snprintf(w->last, sizeof w->last, "%s", msg);
}

static inline int32_t find_node(const gopt_graph *g, const char *name) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (gopt_node_alive(g, (int32_t)n) && strcmp(gopt_node_name(g, (int32_t)n), name) == 0)
      return (int32_t)n;
  return -1;
}

static inline int count_nodes_of_type(const gopt_graph *g, const char *type) {
  int c = 0;
  for (size_t n = 0; n < g->nodes.n; n++)
    if (gopt_node_alive(g, (int32_t)n) && strcmp(gopt_node_type(g, (int32_t)n), type) == 0) c++;
  return c;
}

/* Name of dim i of tensor t: its value as text or the symbol's name. */
static inline const char *dim_text(const gopt_graph *g, int32_t t, int i, char *buf, size_t cap) {
  int64_t d = gopt_tensor_dims(g, t)[i];
  if (d >= 0) {
    snprintf(buf, cap, "%lld", (long long)d);
    return buf;
  }
  return gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]);
}

/* 1 when tensor a of ga and b of gb have equal dtype and shape (symbols compared by name). */
static inline int same_shape(const gopt_graph *ga, int32_t a, const gopt_graph *gb, int32_t b) {
  const gopt_tensor *x = &ga->tensors.a[a], *y = &gb->tensors.a[b];
  char b1[32], b2[32];
  if (x->dtype != y->dtype) return 0;
  if ((x->flags & GOPT_T_NOSHAPE) != (y->flags & GOPT_T_NOSHAPE)) return 0;
  if (x->flags & GOPT_T_NOSHAPE) return 1;
  if (x->rank != y->rank) return 0;
  for (int i = 0; i < x->rank; i++)
    if (strcmp(dim_text(ga, a, i, b1, sizeof b1), dim_text(gb, b, i, b2, sizeof b2)) != 0) return 0;
  return 1;
}

static inline int same_const(const gopt_graph *ga, int32_t a, const gopt_graph *gb, int32_t b) {
  int ca = ga->tensors.a[a].cdata, cb = gb->tensors.a[b].cdata;
  if ((ca < 0) != (cb < 0)) return 0;
  if (ca < 0) return 1;
  const gopt_const *x = &ga->consts.a[ca], *y = &gb->consts.a[cb];
  if ((x->data == NULL) != (y->data == NULL) || x->nbytes != y->nbytes) return 0;
  if (x->data) return x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0;
  return strcmp(gopt_graph_str(ga, x->external), gopt_graph_str(gb, y->external)) == 0 &&
         x->ext_offset == y->ext_offset;
}

static inline int same_attr(const gopt_graph *ga, const gopt_attr *x, const gopt_graph *gb,
                     const gopt_attr *y) {
  if (x->kind != y->kind || x->n != y->n) return 0;
  switch (x->kind) {
  case GOPT_ATTR_INT: return x->v.i == y->v.i;
  case GOPT_ATTR_FLOAT: return x->v.f == y->v.f;
  case GOPT_ATTR_STRING: return strcmp(gopt_graph_str(ga, x->v.s), gopt_graph_str(gb, y->v.s)) == 0;
  case GOPT_ATTR_INTS:
    return x->n == 0 || memcmp(ga->ints.a + x->v.off, gb->ints.a + y->v.off, x->n * sizeof(int64_t)) == 0;
  case GOPT_ATTR_FLOATS:
    return x->n == 0 || memcmp(ga->floats.a + x->v.off, gb->floats.a + y->v.off, x->n * sizeof(float)) == 0;
  case GOPT_ATTR_STRINGS:
    for (uint32_t i = 0; i < x->n; i++)
      if (strcmp(gopt_graph_str(ga, ga->strids.a[x->v.off + i]),
                 gopt_graph_str(gb, gb->strids.a[y->v.off + i])) != 0)
        return 0;
    return 1;
  case GOPT_ATTR_TENSOR:
    return same_shape(ga, x->v.tensor, gb, y->v.tensor) && same_const(ga, x->v.tensor, gb, y->v.tensor);
  case GOPT_ATTR_GRAPH:
    return gopt_graph_hash(ga->subgraphs.a[x->v.graph]) == gopt_graph_hash(gb->subgraphs.a[y->v.graph]);
  default: return 0;
  }
}

/* Compares two graphs that should be the same model: live nodes by name (type, inputs, outputs,
 * attributes), graph inputs and outputs in order, and every tensor a node or output uses (dtype,
 * shape, flags, constant bytes). Sub-graphs are compared recursively. Returns failures. */
static inline int compare_graphs(const gopt_graph *a, const gopt_graph *b, const char *what) {
  int bad = 0;
#define CMP(cond, ...) do { if (!(cond)) { bad++; fprintf(stderr, "%s: ", what); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
  CMP(gopt_graph_node_count(a) == gopt_graph_node_count(b), "node count %zu vs %zu",
      gopt_graph_node_count(a), gopt_graph_node_count(b));
  CMP(gopt_graph_hash(a) == gopt_graph_hash(b), "graph hashes differ");
  CMP(a->inputs.n == b->inputs.n && a->outputs.n == b->outputs.n, "input/output counts differ");
  for (size_t i = 0; i < a->inputs.n && i < b->inputs.n; i++) {
    const char *na = gopt_graph_str(a, a->tensors.a[a->inputs.a[i]].name);
    const char *nb = gopt_graph_str(b, b->tensors.a[b->inputs.a[i]].name);
    CMP(strcmp(na, nb) == 0 && same_shape(a, a->inputs.a[i], b, b->inputs.a[i]),
        "input %zu: '%s' vs '%s'", i, na, nb);
  }
  for (size_t i = 0; i < a->outputs.n && i < b->outputs.n; i++) {
    const char *na = gopt_graph_str(a, a->tensors.a[a->outputs.a[i]].name);
    const char *nb = gopt_graph_str(b, b->tensors.a[b->outputs.a[i]].name);
    CMP(strcmp(na, nb) == 0 && same_shape(a, a->outputs.a[i], b, b->outputs.a[i]),
        "output %zu: '%s' vs '%s'", i, na, nb);
  }
  for (size_t n = 0; n < a->nodes.n; n++) {
    if (!gopt_node_alive(a, (int32_t)n)) continue;
    const char *name = gopt_node_name(a, (int32_t)n);
    int32_t m = find_node(b, name);
    CMP(m >= 0, "node '%s' missing after round trip", name);
    if (m < 0) continue;
    const gopt_node *x = &a->nodes.a[n], *y = &b->nodes.a[m];
    CMP(strcmp(gopt_node_type(a, (int32_t)n), gopt_node_type(b, m)) == 0 && x->op == y->op &&
        x->flags == y->flags, "node '%s': type/op/flags differ", name);
    CMP(x->n_in == y->n_in && x->n_out == y->n_out && x->n_attr == y->n_attr,
        "node '%s': arity differs", name);
    if (x->n_in != y->n_in || x->n_out != y->n_out || x->n_attr != y->n_attr) continue;
    for (int i = 0; i < x->n_in + x->n_out; i++) {
      int32_t ta = i < x->n_in ? gopt_node_input(a, (int32_t)n, i) : gopt_node_output(a, (int32_t)n, i - x->n_in);
      int32_t tb = i < x->n_in ? gopt_node_input(b, m, i) : gopt_node_output(b, m, i - x->n_in);
      CMP((ta < 0) == (tb < 0), "node '%s': slot %d omitted on one side", name, i);
      if (ta < 0 || tb < 0) continue;
      const gopt_tensor *p = &a->tensors.a[ta], *q = &b->tensors.a[tb];
      const char *tn = gopt_graph_str(a, p->name);
      CMP(strcmp(tn, gopt_graph_str(b, q->name)) == 0, "node '%s': slot %d names differ", name, i);
      CMP(same_shape(a, ta, b, tb), "tensor '%s': dtype/shape differ", tn);
      uint16_t fm = GOPT_T_INPUT | GOPT_T_OUTPUT | GOPT_T_CONST | GOPT_T_PARAM | GOPT_T_INIT;
      CMP((p->flags & fm) == (q->flags & fm), "tensor '%s': flags %x vs %x", tn, p->flags, q->flags);
      CMP(same_const(a, ta, b, tb), "tensor '%s': constant data differs", tn);
    }
    for (uint32_t i = 0; i < x->n_attr; i++) {
      const gopt_attr *p = &a->attrs.a[x->attr + i];
      const char *an = gopt_graph_str(a, p->name);
      const gopt_attr *q = gopt_node_attr(b, m, an);
      CMP(q && same_attr(a, p, b, q), "node '%s': attribute '%s' differs", name, an);
      if (q && p->kind == GOPT_ATTR_GRAPH && q->kind == GOPT_ATTR_GRAPH)
        bad += compare_graphs(a->subgraphs.a[p->v.graph], b->subgraphs.a[q->v.graph], an);
    }
  }
#undef CMP
  return bad;
}

#endif
