/* onnx_export.c: graph IR -> ONNX model. Builds protobuf-c structs in an arena (borrowing names and
 * constant bytes from the graph) and packs them with onnx__model_proto__pack: live nodes in
 * topological order, used constants as initializers (raw_data, or external-data references when the
 * bytes are missing; constants not from initializers as Constant nodes), value_info for every
 * intermediate tensor with a known type, attributes including sub-graphs, and opset imports.
 * See docs/ONNX.md. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "gopt/onnx.h"
#include "gopt/util.h"
#include "onnx/onnx_internal.h"

#define DEFAULT_OPSET 17
#define DEFAULT_IR_VERSION 8

typedef struct ex {
  onnx_arena ar;
  onnx_ext_out eo;  /* structure-only constants without a source file */
  onnx_map domains; /* custom domains used by nodes (keys in the arena) */
  int64_t ir_version;
} ex;

static char *gstr(const gopt_graph *g, uint32_t id) { return (char *)gopt_graph_str(g, id); }

/* ValueInfo of tensor t: element type, and the shape when known (symbols as dim_param). */
static Onnx__ValueInfoProto *value_info(ex *x, const gopt_graph *g, int32_t t) {
  const gopt_tensor *tt = &g->tensors.a[t];
  Onnx__ValueInfoProto *v = onnx_arena_alloc(&x->ar, sizeof *v);
  Onnx__TypeProto *tp = onnx_arena_alloc(&x->ar, sizeof *tp);
  Onnx__TypeProto__Tensor *ten = onnx_arena_alloc(&x->ar, sizeof *ten);
  if (!v || !tp || !ten) return NULL;
  onnx__value_info_proto__init(v);
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(ten);
  v->name = gstr(g, tt->name);
  v->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = ten;
  ten->has_elem_type = 1;
  ten->elem_type = tt->dtype;
  if (tt->flags & GOPT_T_NOSHAPE) return v;
  Onnx__TensorShapeProto *sh = onnx_arena_alloc(&x->ar, sizeof *sh);
  Onnx__TensorShapeProto__Dimension *dv = onnx_arena_array(&x->ar, tt->rank + 1u, sizeof *dv);
  Onnx__TensorShapeProto__Dimension **dp = onnx_arena_array(&x->ar, tt->rank + 1u, sizeof *dp);
  if (!sh || !dv || !dp) return NULL;
  onnx__tensor_shape_proto__init(sh);
  const int64_t *d = tt->rank ? gopt_tensor_dims(g, t) : NULL;
  for (int i = 0; i < tt->rank; i++) {
    onnx__tensor_shape_proto__dimension__init(&dv[i]);
    if (d[i] >= 0) {
      dv[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dv[i].dim_value = d[i];
    } else if (GOPT_DIM_SYM_ID(d[i]) < g->syms.n) {
      dv[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dv[i].dim_param = gstr(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])]);
    }
    dp[i] = &dv[i];
  }
  sh->n_dim = tt->rank;
  sh->dim = dp;
  ten->shape = sh;
  return v;
}


static int export_graph(ex *x, const gopt_graph *g, Onnx__GraphProto *gp, gopt_error *err);

static int export_attr(ex *x, const gopt_graph *g, const gopt_attr *a, Onnx__AttributeProto *ap,
                       gopt_error *err) {
  onnx__attribute_proto__init(ap);
  ap->name = gstr(g, a->name);
  ap->has_type = 1;
  switch (a->kind) {
  case GOPT_ATTR_INT:
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    ap->has_i = 1;
    ap->i = a->v.i;
    break;
  case GOPT_ATTR_FLOAT:
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    ap->has_f = 1;
    ap->f = (float)a->v.f;
    break;
  case GOPT_ATTR_STRING: {
    const char *s = gopt_graph_str(g, a->v.s);
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    ap->has_s = 1;
    ap->s.len = strlen(s);
    ap->s.data = (uint8_t *)s;
    break;
  }
  case GOPT_ATTR_INTS:
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    ap->n_ints = a->n;
    ap->ints = a->n ? g->ints.a + a->v.off : NULL;
    break;
  case GOPT_ATTR_FLOATS:
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    ap->n_floats = a->n;
    ap->floats = a->n ? g->floats.a + a->v.off : NULL;
    break;
  case GOPT_ATTR_STRINGS:
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    ap->strings = onnx_arena_array(&x->ar, a->n + 1u, sizeof *ap->strings);
    if (!ap->strings) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < a->n; i++) {
      const char *s = gopt_graph_str(g, g->strids.a[a->v.off + i]);
      ap->strings[i].len = strlen(s);
      ap->strings[i].data = (uint8_t *)s;
    }
    ap->n_strings = a->n;
    break;
  case GOPT_ATTR_TENSOR: {
    Onnx__TensorProto *tp = onnx_arena_alloc(&x->ar, sizeof *tp);
    if (!tp) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    if (a->v.tensor < 0 || (size_t)a->v.tensor >= g->tensors.n)
      return gopt_error_set(err, GOPT_EINVAL, "attribute '%s': bad tensor id", ap->name);
    int rc = onnx_tensor_export(g, a->v.tensor, "", &x->ar, &x->eo, tp, err);
    if (rc) return rc;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    ap->t = tp;
    break;
  }
  case GOPT_ATTR_GRAPH: {
    Onnx__GraphProto *sp = onnx_arena_alloc(&x->ar, sizeof *sp);
    if (!sp) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    if (a->v.graph < 0 || (size_t)a->v.graph >= g->subgraphs.n)
      return gopt_error_set(err, GOPT_EINVAL, "attribute '%s': bad sub-graph id", ap->name);
    int rc = export_graph(x, g->subgraphs.a[a->v.graph], sp, err);
    if (rc) {
      gopt_error_prefix(err, "attribute '%s': ", ap->name);
      return rc;
    }
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    ap->g = sp;
    break;
  }
  default:
    return gopt_error_set(err, GOPT_EINVAL, "attribute '%s': unknown kind %d", ap->name, a->kind);
  }
  return GOPT_OK;
}

/* Marks tensors of target that sub-graphs under sub read as outer-scope references. */
static void mark_outer(const gopt_graph *sub, const gopt_graph *target, unsigned char *used) {
  for (size_t t = 0; t < sub->tensors.n; t++) {
    const gopt_tensor *x = &sub->tensors.a[t];
    if (x->producer >= 0 || (x->flags & (GOPT_T_INPUT | GOPT_T_CONST | GOPT_T_ATTR))) continue;
    int32_t o = gopt_graph_find_tensor(target, gopt_graph_str(sub, x->name));
    if (o >= 0) used[o] = 1;
  }
  for (size_t i = 0; i < sub->subgraphs.n; i++) mark_outer(sub->subgraphs.a[i], target, used);
}

/* 1 for names gopt_graph_add_tensor generates for unnamed tensors ("t__17"). */
static int is_generated_name(const char *s) {
  if (strncmp(s, "t__", 3) != 0 || !s[3]) return 0;
  for (s += 3; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* An output nothing reads, with a generated name and no type, stands for an omitted optional
 * output: it is written as "" (re-import generates a name again). */
static int omitted_output(const gopt_graph *g, int32_t t, const unsigned char *used) {
  const gopt_tensor *x = &g->tensors.a[t];
  return !used[t] && !(x->flags & GOPT_T_OUTPUT) && x->dtype == GOPT_DT_UNDEFINED &&
         (x->flags & GOPT_T_NOSHAPE) && is_generated_name(gopt_graph_str(g, x->name));
}

/* Fills node proto np from node n (name, domain-split op type, inputs, outputs, attributes). */
static int export_node(ex *x, const gopt_graph *g, int32_t n, const unsigned char *used,
                       Onnx__NodeProto *np, gopt_error *err) {
  const gopt_node *nd = &g->nodes.a[n];
  const char *type = gopt_graph_str(g, nd->type);
  const char *sep = strstr(type, "::");
  onnx__node_proto__init(np);
  np->name = gstr(g, nd->name);
  if (sep) {
    size_t dl = (size_t)(sep - type);
    char *dom = onnx_arena_alloc(&x->ar, dl + 1);
    if (!dom) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    memcpy(dom, type, dl);
    np->domain = dom;
    np->op_type = (char *)sep + 2;
    if (onnx_map_get(&x->domains, dom) < 0 && onnx_map_put(&x->domains, dom, 1))
      return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  } else {
    np->op_type = (char *)type;
  }
  np->input = onnx_arena_array(&x->ar, nd->n_in + 1u, sizeof(char *));
  np->output = onnx_arena_array(&x->ar, nd->n_out + 1u, sizeof(char *));
  np->attribute = onnx_arena_array(&x->ar, nd->n_attr + 1u, sizeof(Onnx__AttributeProto *));
  Onnx__AttributeProto *aps = onnx_arena_array(&x->ar, nd->n_attr + 1u, sizeof *aps);
  if (!np->input || !np->output || !np->attribute || !aps)
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    np->input[i] = t >= 0 ? gstr(g, g->tensors.a[t].name) : "";
  }
  np->n_input = nd->n_in;
  for (int i = 0; i < nd->n_out; i++) {
    int32_t t = gopt_node_output(g, n, i);
    np->output[i] = omitted_output(g, t, used) ? "" : gstr(g, g->tensors.a[t].name);
  }
  np->n_output = nd->n_out;
  for (uint32_t i = 0; i < nd->n_attr; i++) {
    int rc = export_attr(x, g, &g->attrs.a[nd->attr + i], &aps[i], err);
    if (rc) {
      gopt_error_prefix(err, "node '%s' (op %s) ", np->name, type);
      return rc;
    }
    np->attribute[i] = &aps[i];
  }
  np->n_attribute = nd->n_attr;
  return GOPT_OK;
}

/* Fills gp from g. */
static int export_graph(ex *x, const gopt_graph *g, Onnx__GraphProto *gp, gopt_error *err) {
  int rc = GOPT_OK;
  int32_t *order = NULL, *inits = NULL, *cnodes = NULL;
  unsigned char *used = NULL;
  size_t n_init = 0, n_cn = 0, n_vi = 0;
  onnx__graph_proto__init(gp);
  const char *gname = gopt_graph_str(g, g->name);
  gp->name = *gname ? (char *)gname : "gopt";

  order = malloc((g->nodes.n ? g->nodes.n : 1) * sizeof *order);
  used = calloc(g->tensors.n ? g->tensors.n : 1, 1);
  inits = malloc((g->tensors.n ? g->tensors.n : 1) * sizeof *inits);
  cnodes = malloc((g->tensors.n ? g->tensors.n : 1) * sizeof *cnodes);
  if (!order || !used || !inits || !cnodes) goto oom;
  int64_t cnt = gopt_graph_topo_stable(g, order, err);
  if (cnt < 0) {
    rc = (int)cnt;
    goto done;
  }
  for (int64_t k = 0; k < cnt; k++) {
    const gopt_node *nd = &g->nodes.a[order[k]];
    for (int i = 0; i < nd->n_in; i++) {
      int32_t t = gopt_node_input(g, order[k], i);
      if (t < 0) continue;
      used[t] = 1;
      const gopt_tensor *x2 = &g->tensors.a[t];
      if (!g->parent && x2->producer < 0 && !(x2->flags & (GOPT_T_INPUT | GOPT_T_CONST))) {
        rc = gopt_error_set(err, GOPT_EGRAPH, "node '%s' reads tensor '%s' that nothing produces",
                            gopt_node_name(g, order[k]), gstr(g, x2->name));
        goto done;
      }
    }
  }
  for (size_t i = 0; i < g->outputs.n; i++) used[g->outputs.a[i]] = 1;
  for (size_t i = 0; i < g->subgraphs.n; i++) mark_outer(g->subgraphs.a[i], g, used);

  /* Constants: those that came from initializers (GOPT_T_INIT) as initializers; the others
   * (Constant nodes, folded values) as Constant nodes when their bytes are there, so re-import
   * gives the same flags and the same parameter count. */
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *tt = &g->tensors.a[t];
    if (!(tt->flags & GOPT_T_CONST) || (tt->flags & GOPT_T_ATTR) || !used[t]) continue;
    if (tt->producer >= 0 && gopt_node_alive(g, tt->producer)) continue;
    if (!(tt->flags & (GOPT_T_INIT | GOPT_T_INPUT)) && gopt_tensor_data(g, (int32_t)t))
      cnodes[n_cn++] = (int32_t)t;
    else
      inits[n_init++] = (int32_t)t;
  }

  /* Initializers. */
  gp->initializer = onnx_arena_array(&x->ar, n_init + 1, sizeof *gp->initializer);
  Onnx__TensorProto *tps = onnx_arena_array(&x->ar, n_init + 1, sizeof *tps);
  if (!gp->initializer || !tps) goto oom;
  for (size_t i = 0; i < n_init; i++) {
    int32_t t = inits[i];
    if ((rc = onnx_tensor_export(g, t, gstr(g, g->tensors.a[t].name), &x->ar, &x->eo, &tps[i], err)))
      goto done;
    gp->initializer[i] = &tps[i];
  }
  gp->n_initializer = n_init;

  /* Nodes: Constant nodes first, then the live nodes in topological order. */
  gp->node = onnx_arena_array(&x->ar, n_cn + (size_t)cnt + 1, sizeof *gp->node);
  Onnx__NodeProto *nps = onnx_arena_array(&x->ar, n_cn + (size_t)cnt + 1, sizeof *nps);
  if (!gp->node || !nps) goto oom;
  for (size_t i = 0; i < n_cn; i++) {
    int32_t t = cnodes[i];
    Onnx__NodeProto *np = &nps[i];
    Onnx__AttributeProto *ap = onnx_arena_alloc(&x->ar, sizeof *ap);
    Onnx__TensorProto *tp = onnx_arena_alloc(&x->ar, sizeof *tp);
    char *name = onnx_arena_alloc(&x->ar, strlen(gstr(g, g->tensors.a[t].name)) + 16);
    if (!ap || !tp || !name) goto oom;
    onnx__node_proto__init(np);
    np->attribute = onnx_arena_alloc(&x->ar, sizeof *np->attribute);
    np->output = onnx_arena_alloc(&x->ar, sizeof *np->output);
    if (!np->attribute || !np->output) goto oom;
    strcpy(name, "Constant_");
    strcat(name, gstr(g, g->tensors.a[t].name));
    np->name = name;
    np->op_type = "Constant";
    np->output[0] = gstr(g, g->tensors.a[t].name);
    np->n_output = 1;
    onnx__attribute_proto__init(ap);
    ap->name = "value";
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if ((rc = onnx_tensor_export(g, t, "", &x->ar, &x->eo, tp, err))) goto done;
    ap->t = tp;
    np->attribute[0] = ap;
    np->n_attribute = 1;
    gp->node[i] = np;
  }
  for (int64_t k = 0; k < cnt; k++) {
    if ((rc = export_node(x, g, order[k], used, &nps[n_cn + (size_t)k], err))) goto done;
    gp->node[n_cn + (size_t)k] = &nps[n_cn + (size_t)k];
  }
  gp->n_node = n_cn + (size_t)cnt;

  /* Inputs (for IR versions before 4, initializers are listed among the inputs too). */
  int init_inputs = x->ir_version < 4;
  size_t n_in = g->inputs.n + (init_inputs ? n_init : 0);
  gp->input = onnx_arena_array(&x->ar, n_in + 1, sizeof *gp->input);
  if (!gp->input) goto oom;
  for (size_t i = 0; i < g->inputs.n; i++)
    if (!(gp->input[gp->n_input++] = value_info(x, g, g->inputs.a[i]))) goto oom;
  for (size_t i = 0; init_inputs && i < n_init; i++)
    if (!(gp->input[gp->n_input++] = value_info(x, g, inits[i]))) goto oom;

  gp->output = onnx_arena_array(&x->ar, g->outputs.n + 1, sizeof *gp->output);
  if (!gp->output) goto oom;
  for (size_t i = 0; i < g->outputs.n; i++)
    if (!(gp->output[gp->n_output++] = value_info(x, g, g->outputs.a[i]))) goto oom;

  /* value_info: every node output that is not a graph output and has a known type or shape. */
  for (int64_t k = 0; k < cnt; k++) n_vi += g->nodes.a[order[k]].n_out;
  gp->value_info = onnx_arena_array(&x->ar, n_vi + 1, sizeof *gp->value_info);
  if (!gp->value_info) goto oom;
  for (int64_t k = 0; k < cnt; k++) {
    const gopt_node *nd = &g->nodes.a[order[k]];
    for (int i = 0; i < nd->n_out; i++) {
      int32_t t = gopt_node_output(g, order[k], i);
      const gopt_tensor *tt = &g->tensors.a[t];
      if (tt->flags & GOPT_T_OUTPUT) continue;
      if (omitted_output(g, t, used)) continue;
      /* Untyped outputs are skipped, except those of opaque nodes: import requires them. */
      if (tt->dtype == GOPT_DT_UNDEFINED && (tt->flags & GOPT_T_NOSHAPE) &&
          !(nd->flags & GOPT_N_OPAQUE))
        continue;
      if (!(gp->value_info[gp->n_value_info++] = value_info(x, g, t))) goto oom;
    }
  }
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
done:
  free(order);
  free(used);
  free(inits);
  free(cnodes);
  return rc;
}

/* Serialises g; data-less constants without a source file are referenced in `location`. */
static int save_mem_at(const gopt_graph *g, const char *location, void **buf, size_t *len,
                       gopt_error *err) {
  int rc = GOPT_OK;
  ex x;
  Onnx__ModelProto m;
  Onnx__GraphProto gp;
  uint8_t *out = NULL;
  if (!g || !buf || !len) return gopt_error_set(err, GOPT_EINVAL, "gopt_onnx_save_mem: bad arguments");
  *buf = NULL;
  *len = 0;
  memset(&x, 0, sizeof x);
  x.eo.location = location;
  x.ir_version = g->ir_version > 0 ? g->ir_version : DEFAULT_IR_VERSION;
  onnx__model_proto__init(&m);
  m.has_ir_version = 1;
  m.ir_version = x.ir_version;
  m.producer_name = "gopt";
  m.producer_version = (char *)gopt_version();
  if ((rc = export_graph(&x, g, &gp, err))) goto done;
  m.graph = &gp;

  /* Opset imports: the graph's, the default domain at DEFAULT_OPSET when missing, and version 1
   * of any custom domain a node uses without an import. */
  size_t n_os = g->opsets.n + x.domains.n + 1;
  m.opset_import = onnx_arena_array(&x.ar, n_os, sizeof *m.opset_import);
  Onnx__OperatorSetIdProto *os = onnx_arena_array(&x.ar, n_os, sizeof *os);
  if (!m.opset_import || !os) goto oom;
  int have_default = 0;
  for (size_t i = 0; i < g->opsets.n; i++) {
    Onnx__OperatorSetIdProto *o = &os[m.n_opset_import];
    const char *d = gopt_graph_str(g, g->opsets.a[i].domain);
    onnx__operator_set_id_proto__init(o);
    o->domain = (char *)d;
    o->has_version = 1;
    o->version = g->opsets.a[i].version;
    if (!*d || strcmp(d, "ai.onnx") == 0) have_default = 1;
    if (onnx_map_get(&x.domains, d) >= 0 && onnx_map_put(&x.domains, d, 0)) goto oom;
    m.opset_import[m.n_opset_import++] = o;
  }
  if (!have_default) {
    Onnx__OperatorSetIdProto *o = &os[m.n_opset_import];
    onnx__operator_set_id_proto__init(o);
    o->domain = "";
    o->has_version = 1;
    o->version = DEFAULT_OPSET;
    m.opset_import[m.n_opset_import++] = o;
  }
  for (size_t i = 0; i < x.domains.cap; i++) {
    if (!x.domains.keys[i] || x.domains.vals[i] != 1) continue;
    Onnx__OperatorSetIdProto *o = &os[m.n_opset_import];
    onnx__operator_set_id_proto__init(o);
    o->domain = (char *)x.domains.keys[i];
    o->has_version = 1;
    o->version = 1;
    m.opset_import[m.n_opset_import++] = o;
  }

  size_t n = onnx__model_proto__get_packed_size(&m);
  if (n > (size_t)INT32_MAX) {
    rc = gopt_error_set(err, GOPT_ERANGE,
                        "model needs %zu bytes, over protobuf's 2 GiB limit (keep weights as "
                        "external data)",
                        n);
    goto done;
  }
  out = malloc(n ? n : 1);
  if (!out) goto oom;
  if (onnx__model_proto__pack(&m, out) != n) {
    rc = gopt_error_set(err, GOPT_EINVAL, "protobuf packing produced an unexpected size");
    goto done;
  }
  *buf = out;
  *len = n;
  out = NULL;
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
done:
  free(out);
  onnx_map_free(&x.domains);
  onnx_arena_free(&x.ar);
  return rc;
}

/* "<base>.data" with characters other than letters, digits, '.', '_' and '-' replaced by '_'. */
static void data_location(const char *base, char *out, size_t n) {
  size_t k = 0;
  for (; *base && k + 6 < n; base++, k++) {
    char c = *base;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    out[k] = ok ? c : '_';
  }
  if (k == 0) out[k++] = 'g';
  snprintf(out + k, n - k, ".data");
}

int gopt_onnx_save_mem(const gopt_graph *g, void **buf, size_t *len, gopt_error *err) {
  char loc[256];
  data_location(g ? gopt_graph_str(g, g->name) : "", loc, sizeof loc);
  return save_mem_at(g, loc, buf, len, err);
}

int gopt_onnx_save(const gopt_graph *g, const char *path, gopt_error *err) {
  void *buf = NULL;
  size_t len = 0;
  char loc[256];
  if (!path) return gopt_error_set(err, GOPT_EINVAL, "gopt_onnx_save: no path");
  const char *slash = strrchr(path, '/');
  data_location(slash ? slash + 1 : path, loc, sizeof loc);
  int rc = save_mem_at(g, loc, &buf, &len, err);
  if (rc) {
    gopt_error_prefix(err, "%s: ", path);
    return rc;
  }
  rc = gopt_file_write_atomic(path, buf, len, err);
  free(buf);
  return rc;
}
