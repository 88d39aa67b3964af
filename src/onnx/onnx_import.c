/* onnx_import.c: ONNX model -> graph IR. Parses with protobuf-c (after a nesting-depth guard and
 * under an allocation cap), then builds one gopt_graph per ONNX graph: inputs, initializers
 * (constants), Constant nodes (folded into constant tensors), node outputs with value_info shapes,
 * nodes in file order with typed attributes and recursively imported sub-graphs, and graph outputs;
 * validates names, dangling inputs, duplicate producers and cycles. See docs/ONNX.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "ir/ir_internal.h"
#include "onnx/onnx_internal.h"

#define MAX_SUBGRAPH_DEPTH 48
#define MIN_OPSET 1    /* opsets 1-6 only for the ops of onnx_legacy.c */
#define FULL_OPSET 7   /* every op gopt knows from here on */

typedef struct imp {
  onnx_ext_ctx ext;
  int depth; /* sub-graph nesting */
} imp;

/* Chain of enclosing graphs, innermost first: names a sub-graph reads from outer scopes. */
typedef struct scope {
  gopt_graph *g;
  const struct scope *up;
} scope;

static const char *S(const char *s) { return s ? s : ""; }

static int is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

/* Error code of a failed IR call (which has filled err). */
static int ir_rc(const gopt_error *err, int fallback) {
  return err && err->code ? err->code : fallback;
}

/* ---- types and shapes ----------------------------------------------------------------------- */

/* Applies a ValueInfo type to tensor t: element type and shape (dim_param -> named symbol, an
 * empty dim -> fresh symbol). Non-tensor types (sequence, map, optional) leave t untyped. */
static int apply_type(gopt_graph *g, int32_t t, const Onnx__TypeProto *tp, gopt_error *err) {
  int64_t dims[GOPT_MAX_RANK];
  const char *name = gopt_graph_str(g, g->tensors.a[t].name);
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return GOPT_OK;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int dt = tt->has_elem_type ? tt->elem_type : 0;
  if (dt < 0 || dt >= GOPT_DT_COUNT)
    return gopt_error_set(err, GOPT_EUNSUP, "tensor '%s': unsupported element type %d", name, dt);
  g->tensors.a[t].dtype = (uint8_t)dt;
  if (!tt->shape) return GOPT_OK;
  size_t r = tt->shape->n_dim;
  if (r > GOPT_MAX_RANK)
    return gopt_error_set(err, GOPT_EUNSUP, "tensor '%s': rank %zu exceeds the maximum %d", name,
                          r, GOPT_MAX_RANK);
  int64_t stat[GOPT_MAX_RANK];
  size_t n_stat = 0;
  for (size_t i = 0; i < r; i++) {
    const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
    if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (dm->dim_value < 0)
        return gopt_error_set(err, GOPT_ERANGE, "tensor '%s': negative dimension %lld", name,
                              (long long)dm->dim_value);
      dims[i] = stat[n_stat++] = dm->dim_value;
    } else if (dm && dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               dm->dim_param && *dm->dim_param) {
      dims[i] = GOPT_DIM_SYM(gopt_graph_symbol(g, dm->dim_param));
    } else {
      dims[i] = GOPT_DIM_SYM(gopt_graph_new_symbol(g));
    }
  }
  int64_t numel;
  size_t es = gopt_dtype_size(dt);
  if (onnx_dims_numel(stat, n_stat, es ? es : 1, &numel))
    return gopt_error_set(err, GOPT_ERANGE, "tensor '%s': dimensions overflow", name);
  if (gopt_tensor_set_shape(g, t, (int)r, dims))
    return gopt_error_set(err, GOPT_ENOMEM, "tensor '%s': cannot set shape", name);
  return GOPT_OK;
}

static const Onnx__ValueInfoProto *vi_get(const Onnx__GraphProto *gp, const onnx_map *vi,
                                          const char *name) {
  int64_t k = onnx_map_get(vi, name);
  if (k < 0) return NULL;
  if ((size_t)k < gp->n_value_info) return gp->value_info[k];
  return gp->output[(size_t)k - gp->n_value_info];
}

/* Tensor `name` as seen from scope sc: a tensor of sc->g, or a reference to an enclosing graph's
 * tensor, which becomes a tensor of sc->g with the same name, dtype and shape and no producer
 * (an outer-scope reference; see docs/ONNX.md). -1 when the name is defined nowhere. */
static int32_t resolve(const scope *sc, const char *name, gopt_error *err) {
  gopt_graph *g = sc->g;
  int32_t t = gopt_graph_find_tensor(g, name);
  if (t >= 0) return t;
  for (const scope *s = sc->up; s; s = s->up) {
    int32_t o = gopt_graph_find_tensor(s->g, name);
    if (o < 0) continue;
    const gopt_tensor *ot = &s->g->tensors.a[o];
    int64_t dims[GOPT_MAX_RANK];
    const int64_t *od = ot->rank ? gopt_tensor_dims(s->g, o) : NULL;
    for (int i = 0; i < ot->rank; i++)
      dims[i] = od[i] >= 0 ? od[i]
                           : GOPT_DIM_SYM(gopt_graph_symbol(
                                 g, gopt_graph_str(s->g, s->g->syms.a[GOPT_DIM_SYM_ID(od[i])])));
    int rank = (ot->flags & GOPT_T_NOSHAPE) ? -1 : ot->rank;
    return gopt_graph_add_tensor(g, name, ot->dtype, rank, dims, err);
  }
  return -1;
}

/* ---- attributes ------------------------------------------------------------------------------- */

static int import_graph(imp *im, const Onnx__GraphProto *gp, gopt_graph *g, const scope *up,
                        gopt_error *err);

static const char *attr_type_name(int t) {
  switch (t) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
  default: return "UNDEFINED";
  }
}

/* Attribute type, from `type` or (when absent, as in old files) from the field that is set. */
static int attr_kind(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return a->type;
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static char *bytes_dup(const ProtobufCBinaryData *b) {
  char *s = malloc(b->len + 1);
  if (!s) return NULL;
  if (b->len) memcpy(s, b->data, b->len);
  s[b->len] = 0;
  return s;
}

/* Adds attribute a to node n of g. Messages name the node (nname, type) and the attribute. */
static int import_attr(imp *im, const scope *sc, int32_t n, const Onnx__AttributeProto *a,
                       const char *nname, const char *type, gopt_error *err) {
  gopt_graph *g = sc->g;
  int rc = GOPT_OK;
  char *s = NULL;
  char **strs = NULL;
  size_t n_strs = 0;
  gopt_graph *sub = NULL;
  const char *an = S(a->name);
  if (!*an) {
    rc = gopt_error_set(err, GOPT_EPARSE, "node '%s' (op %s): attribute with no name", nname, type);
    goto done;
  }
  if (gopt_node_attr(g, n, an)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "node '%s' (op %s): attribute '%s' given twice", nname,
                        type, an);
    goto done;
  }
  int kind = attr_kind(a);
  switch (kind) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    rc = gopt_node_set_int(g, n, an, a->i);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    rc = gopt_node_set_float(g, n, an, (double)a->f);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    s = bytes_dup(&a->s);
    rc = s ? gopt_node_set_string(g, n, an, s) : GOPT_ENOMEM;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    rc = gopt_node_set_ints(g, n, an, a->ints, a->n_ints);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    rc = gopt_node_set_floats(g, n, an, a->floats, a->n_floats);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    strs = calloc(a->n_strings ? a->n_strings : 1, sizeof *strs);
    if (!strs) {
      rc = GOPT_ENOMEM;
      break;
    }
    for (n_strs = 0; n_strs < a->n_strings; n_strs++)
      if (!(strs[n_strs] = bytes_dup(&a->strings[n_strs]))) break;
    rc = n_strs < a->n_strings ? GOPT_ENOMEM
                               : gopt_node_set_strings(g, n, an, (const char *const *)strs, n_strs);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    int32_t t;
    if (!a->t) {
      rc = gopt_error_set(err, GOPT_EPARSE, "node '%s' (op %s): attribute '%s' has no tensor",
                          nname, type, an);
      goto done;
    }
    rc = onnx_tensor_import(g, a->t, NULL, "tensor attribute", &im->ext, &t, err);
    if (rc) {
      gopt_error_prefix(err, "node '%s' (op %s) attribute '%s': ", nname, type, an);
      goto done;
    }
    rc = gopt_node_set_tensor(g, n, an, t);
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: {
    if (!a->g) {
      rc = gopt_error_set(err, GOPT_EPARSE, "node '%s' (op %s): attribute '%s' has no graph",
                          nname, type, an);
      goto done;
    }
    if (im->depth >= MAX_SUBGRAPH_DEPTH) {
      rc = gopt_error_set(err, GOPT_EUNSUP, "node '%s' (op %s): sub-graphs nest deeper than %d",
                          nname, type, MAX_SUBGRAPH_DEPTH);
      goto done;
    }
    sub = gopt_graph_new(S(a->g->name));
    if (!sub) {
      rc = GOPT_ENOMEM;
      break;
    }
    sub->parent = g;
    im->depth++;
    rc = import_graph(im, a->g, sub, sc, err);
    im->depth--;
    if (rc) {
      gopt_error_prefix(err, "node '%s' (op %s) attribute '%s': ", nname, type, an);
      goto done;
    }
    rc = gopt_node_set_graph(g, n, an, sub);
    if (rc == GOPT_OK) sub = NULL; /* owned by g now */
    break;
  }
  default:
    rc = gopt_error_set(err, GOPT_EUNSUP, "node '%s' (op %s): attribute '%s' of type %s is not supported",
                        nname, type, an, attr_type_name(kind));
    goto done;
  }
  if (rc)
    rc = gopt_error_set(err, rc, "node '%s' (op %s): cannot store attribute '%s': %s", nname, type,
                        an, gopt_error_name(rc));
done:
  free(s);
  for (size_t i = 0; i < n_strs; i++) free(strs[i]);
  free(strs);
  gopt_graph_free(sub);
  return rc;
}

/* ---- Constant nodes ------------------------------------------------------------------------------ */

/* Turns Constant node np into a constant tensor named after its output (the node is dropped).
 * Handles value, value_float(s), value_int(s) and value_string(s). */
static int import_constant(imp *im, gopt_graph *g, const Onnx__NodeProto *np, const char *nname,
                           gopt_error *err) {
  if (np->n_output != 1 || !np->output[0][0] || np->n_input != 0)
    return gopt_error_set(err, GOPT_EPARSE,
                          "node '%s' (op Constant): needs no inputs and exactly one named output",
                          nname);
  if (np->n_attribute != 1 || !np->attribute[0])
    return gopt_error_set(err, GOPT_EPARSE,
                          "node '%s' (op Constant): needs exactly one value attribute", nname);
  const char *out = np->output[0];
  const Onnx__AttributeProto *a = np->attribute[0];
  const char *an = S(a->name);
  Onnx__TensorProto tmp;
  int64_t dim;
  const Onnx__TensorProto *tp = &tmp;
  onnx__tensor_proto__init(&tmp);
  tmp.has_data_type = 1;
  if (strcmp(an, "value") == 0) {
    if (!a->t)
      return gopt_error_set(err, GOPT_EPARSE, "node '%s' (op Constant): 'value' has no tensor",
                            nname);
    tp = a->t;
  } else if (strcmp(an, "value_float") == 0) {
    tmp.data_type = GOPT_DT_FLOAT;
    tmp.n_float_data = 1;
    tmp.float_data = (float *)&a->f;
  } else if (strcmp(an, "value_floats") == 0) {
    tmp.data_type = GOPT_DT_FLOAT;
    dim = (int64_t)a->n_floats;
    tmp.n_dims = 1;
    tmp.dims = &dim;
    tmp.n_float_data = a->n_floats;
    tmp.float_data = a->floats;
  } else if (strcmp(an, "value_int") == 0) {
    tmp.data_type = GOPT_DT_INT64;
    tmp.n_int64_data = 1;
    tmp.int64_data = (int64_t *)&a->i;
  } else if (strcmp(an, "value_ints") == 0) {
    tmp.data_type = GOPT_DT_INT64;
    dim = (int64_t)a->n_ints;
    tmp.n_dims = 1;
    tmp.dims = &dim;
    tmp.n_int64_data = a->n_ints;
    tmp.int64_data = a->ints;
  } else if (strcmp(an, "value_string") == 0) {
    tmp.data_type = GOPT_DT_STRING;
    tmp.n_string_data = 1;
    tmp.string_data = (ProtobufCBinaryData *)&a->s;
  } else if (strcmp(an, "value_strings") == 0) {
    tmp.data_type = GOPT_DT_STRING;
    dim = (int64_t)a->n_strings;
    tmp.n_dims = 1;
    tmp.dims = &dim;
    tmp.n_string_data = a->n_strings;
    tmp.string_data = a->strings;
  } else if (strcmp(an, "sparse_value") == 0) {
    return gopt_error_set(err, GOPT_EUNSUP,
                          "node '%s' (op Constant): sparse_value is not supported", nname);
  } else {
    return gopt_error_set(err, GOPT_EPARSE, "node '%s' (op Constant): unknown attribute '%s'",
                          nname, an);
  }
  int32_t t;
  int rc = onnx_tensor_import(g, tp, out, "Constant output", &im->ext, &t, err);
  if (rc) gopt_error_prefix(err, "node '%s' (op Constant): ", nname);
  return rc;
}

/* ---- graphs ------------------------------------------------------------------------------------- */

/* Message for a tensor name defined twice. */
static int dup_error(gopt_graph *g, const onnx_map *prod, char *const *nnames, const char *nname,
                     const char *type, const char *tname, gopt_error *err) {
  int32_t t = gopt_graph_find_tensor(g, tname);
  int64_t p = onnx_map_get(prod, tname);
  const char *what = "is already defined";
  if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_INPUT)) what = "is already a graph input";
  if (p >= 0)
    return gopt_error_set(err, GOPT_EGRAPH, "node '%s' (op %s): output '%s' is already produced by node '%s'",
                          nname, type, tname, nnames[p]);
  if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_CONST)) what = "is already an initializer";
  return gopt_error_set(err, GOPT_EGRAPH, "node '%s' (op %s): output '%s' %s", nname, type,
                        tname, what);
}

/* Op type as stored in the IR: "Type" for the default domain, "domain::Type" otherwise. */
static char *full_type(const Onnx__NodeProto *np) {
  const char *op = S(np->op_type), *dom = S(np->domain);
  size_t n = strlen(op) + strlen(dom) + 3;
  char *s = malloc(n);
  if (!s) return NULL;
  if (is_default_domain(dom))
    snprintf(s, n, "%s", op);
  else
    snprintf(s, n, "%s::%s", dom, op);
  return s;
}

/* Imports the ONNX graph gp into the empty graph g; up is the chain of enclosing graphs (NULL for
 * the main graph). */
static int import_graph(imp *im, const Onnx__GraphProto *gp, gopt_graph *g, const scope *up,
                        gopt_error *err) {
  int rc = GOPT_OK;
  onnx_map vi = {0}, inits = {0}, nmap = {0}, prod = {0};
  char **nnames = NULL;   /* node display names (unique) */
  char **types = NULL;    /* IR op type strings */
  int32_t *ids = NULL, *order = NULL;
  size_t nn = gp->n_node, max_io = 1;
  scope here = {g, up};

  gopt_graph_reserve(g, nn);
  for (size_t i = 0; i < gp->n_value_info; i++)
    if (gp->value_info[i]->name && *gp->value_info[i]->name &&
        (rc = onnx_map_put(&vi, gp->value_info[i]->name, (int64_t)i)))
      goto oom;
  for (size_t i = 0; i < gp->n_output; i++)
    if (gp->output[i]->name && *gp->output[i]->name &&
        (rc = onnx_map_put(&vi, gp->output[i]->name, (int64_t)(gp->n_value_info + i))))
      goto oom;

  /* Initializer names first: inputs that are also initializers are constants, not inputs. */
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const char *name = S(gp->initializer[i]->name);
    if (!*name) {
      rc = gopt_error_set(err, GOPT_EPARSE, "initializer #%zu has no name", i);
      goto done;
    }
    if (onnx_map_get(&inits, name) >= 0) {
      rc = gopt_error_set(err, GOPT_EGRAPH, "initializer '%s' is defined twice", name);
      goto done;
    }
    if ((rc = onnx_map_put(&inits, name, (int64_t)i))) goto oom;
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *name = S(gp->input[i]->name);
    if (!*name) {
      rc = gopt_error_set(err, GOPT_EPARSE, "graph input #%zu has no name", i);
      goto done;
    }
    if (onnx_map_get(&inits, name) >= 0) continue;
    if (gopt_graph_find_tensor(g, name) >= 0) {
      rc = gopt_error_set(err, GOPT_EGRAPH, "graph input '%s' is listed twice", name);
      goto done;
    }
    int32_t t = gopt_graph_add_tensor(g, name, GOPT_DT_UNDEFINED, -1, NULL, err);
    if (t < 0) {
      rc = ir_rc(err, GOPT_ENOMEM);
      goto done;
    }
    if ((rc = apply_type(g, t, gp->input[i]->type, err))) goto done;
    if ((rc = gopt_graph_add_input(g, t))) goto oom;
  }
  for (size_t i = 0; i < gp->n_initializer; i++) {
    int32_t t;
    rc = onnx_tensor_import(g, gp->initializer[i], gp->initializer[i]->name, "initializer",
                            &im->ext, &t, err);
    if (rc) goto done;
    int dt = g->tensors.a[t].dtype;
    g->tensors.a[t].flags |= GOPT_T_INIT;
    if (dt == GOPT_DT_FLOAT || dt == GOPT_DT_DOUBLE || dt == GOPT_DT_FLOAT16 ||
        dt == GOPT_DT_BFLOAT16)
      g->tensors.a[t].flags |= GOPT_T_PARAM;
  }

  /* Unique node names (kept when given and unique, otherwise generated) and IR op types. */
  nnames = calloc(nn ? nn : 1, sizeof *nnames);
  types = calloc(nn ? nn : 1, sizeof *types);
  if (!nnames || !types) goto oom;
  for (size_t i = 0; i < nn; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    const char *name = S(np->name);
    char buf[96];
    if (!(types[i] = full_type(np))) goto oom;
    if (!*name || onnx_map_get(&nmap, name) >= 0) {
      const char *op = *S(np->op_type) ? np->op_type : "node";
      snprintf(buf, sizeof buf, "%.60s_%zu", op, i);
      for (unsigned k = 1; onnx_map_get(&nmap, buf) >= 0; k++)
        snprintf(buf, sizeof buf, "%.60s_%zu_%u", op, i, k);
      name = buf;
    }
    if (!(nnames[i] = strdup(name))) goto oom;
    if ((rc = onnx_map_put(&nmap, nnames[i], (int64_t)i))) goto oom;
    if (np->n_input > max_io) max_io = np->n_input;
    if (np->n_output > max_io) max_io = np->n_output;
  }

  /* Constant nodes become constants; other nodes' named outputs are created with their
   * value_info shapes, so that every name exists before any node reads it. */
  for (size_t i = 0; i < nn; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    if (!*S(np->op_type)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "node '%s': no op type", nnames[i]);
      goto done;
    }
    /* The IR writes a non-default domain as "domain::Type", so ':' cannot be part of either
     * (a domain ":" would give ":::Type", read back as another split; a fuzz finding). */
    if (strchr(np->op_type, ':') || strchr(S(np->domain), ':')) {
      rc = gopt_error_set(err, GOPT_EPARSE, "node '%s': invalid op type '%s' (domain '%s')",
                          nnames[i], np->op_type, S(np->domain));
      goto done;
    }
    if (is_default_domain(np->domain) && strcmp(np->op_type, "Constant") == 0) {
      if (np->n_output == 1 && gopt_graph_find_tensor(g, np->output[0]) >= 0) {
        rc = dup_error(g, &prod, nnames, nnames[i], types[i], np->output[0], err);
        goto done;
      }
      if ((rc = import_constant(im, g, np, nnames[i], err))) goto done;
      if ((rc = onnx_map_put(&prod, np->output[0], (int64_t)i))) goto oom;
      continue;
    }
    for (size_t j = 0; j < np->n_output; j++) {
      const char *name = np->output[j];
      if (!*name) continue;
      if (gopt_graph_find_tensor(g, name) >= 0) {
        rc = dup_error(g, &prod, nnames, nnames[i], types[i], name, err);
        goto done;
      }
      int32_t t = gopt_graph_add_tensor(g, name, GOPT_DT_UNDEFINED, -1, NULL, err);
      if (t < 0) {
        rc = ir_rc(err, GOPT_ENOMEM);
        goto done;
      }
      const Onnx__ValueInfoProto *v = vi_get(gp, &vi, name);
      if (v && (rc = apply_type(g, t, v->type, err))) goto done;
      if ((rc = onnx_map_put(&prod, name, (int64_t)i))) goto oom;
    }
  }

  /* Nodes in file order. */
  ids = malloc(2 * max_io * sizeof *ids);
  if (!ids) goto oom;
  for (size_t i = 0; i < nn; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    if (is_default_domain(np->domain) && strcmp(np->op_type, "Constant") == 0) continue;
    int32_t *in = ids, *out = ids + max_io;
    for (size_t j = 0; j < np->n_input; j++) {
      const char *name = np->input[j];
      in[j] = -1;
      if (!*name) continue;
      in[j] = resolve(&here, name, err);
      if (in[j] < 0) {
        rc = gopt_error_set(err, GOPT_EGRAPH,
                            "node '%s' (op %s): input '%s' is not a graph input, initializer or "
                            "node output",
                            nnames[i], types[i], name);
        goto done;
      }
    }
    for (size_t j = 0; j < np->n_output; j++) {
      const char *name = np->output[j];
      out[j] = *name ? gopt_graph_find_tensor(g, name)
                     : gopt_graph_add_tensor(g, NULL, GOPT_DT_UNDEFINED, -1, NULL, err);
      if (out[j] < 0) {
        rc = ir_rc(err, GOPT_ENOMEM);
        goto done;
      }
    }
    if (np->n_input > UINT16_MAX || np->n_output > UINT16_MAX || np->n_attribute > UINT16_MAX) {
      rc = gopt_error_set(err, GOPT_EUNSUP, "node '%s' (op %s): too many inputs, outputs or attributes",
                          nnames[i], types[i]);
      goto done;
    }
    int32_t n = gopt_graph_add_node(g, types[i], nnames[i], (int)np->n_input, in,
                                    (int)np->n_output, out, err);
    if (n < 0) {
      rc = ir_rc(err, GOPT_EGRAPH);
      goto done;
    }
    for (size_t j = 0; j < np->n_attribute; j++)
      if ((rc = import_attr(im, &here, n, np->attribute[j], nnames[i], types[i], err))) goto done;
    if (g->nodes.a[n].op == GOPT_OP_OPAQUE) {
      /* No shape rule: every named output needs a type from value_info. */
      for (size_t j = 0; j < np->n_output; j++) {
        const char *name = np->output[j];
        const Onnx__ValueInfoProto *v = *name ? vi_get(gp, &vi, name) : NULL;
        if (*name && (!v || !v->type ||
                      v->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)) {
          rc = gopt_error_set(err, GOPT_EUNSUP,
                              "node '%s' (op %s): no shape rule and no value_info for output '%s'",
                              nnames[i], types[i], name);
          goto done;
        }
      }
    }
  }

  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = S(gp->output[i]->name);
    if (!*name) {
      rc = gopt_error_set(err, GOPT_EPARSE, "graph output #%zu has no name", i);
      goto done;
    }
    int32_t t = resolve(&here, name, err);
    if (t < 0) {
      rc = gopt_error_set(err, GOPT_EGRAPH,
                          "graph output '%s' is not a graph input, initializer or node output", name);
      goto done;
    }
    const gopt_tensor *x = &g->tensors.a[t];
    if (x->dtype == GOPT_DT_UNDEFINED && (x->flags & GOPT_T_NOSHAPE) &&
        (rc = apply_type(g, t, gp->output[i]->type, err)))
      goto done;
    if ((rc = gopt_graph_add_output(g, t))) goto oom;
  }

  order = malloc((g->nodes.n ? g->nodes.n : 1) * sizeof *order);
  if (!order) goto oom;
  if (gopt_graph_topo(g, order, err) < 0) {
    rc = ir_rc(err, GOPT_EGRAPH);
    goto done;
  }
  rc = GOPT_OK;
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
done:
  if (rc && err && err->code == GOPT_OK) gopt_error_set(err, rc, "%s", gopt_error_name(rc));
  for (size_t i = 0; i < nn && nnames; i++) free(nnames[i]);
  for (size_t i = 0; i < nn && types; i++) free(types[i]);
  free(nnames);
  free(types);
  free(ids);
  free(order);
  onnx_map_free(&vi);
  onnx_map_free(&inits);
  onnx_map_free(&nmap);
  onnx_map_free(&prod);
  return rc;
}

/* ---- entry points ---------------------------------------------------------------------------------- */

static int import_model(const Onnx__ModelProto *m, const char *label, imp *im, gopt_graph **out,
                        gopt_error *err) {
  int rc = GOPT_OK;
  int64_t default_opset = -1;
  gopt_graph *g = NULL;
  if (!m->graph)
    return gopt_error_set(err, GOPT_EPARSE, "%s: not an ONNX model (no graph)", label);
  if (m->n_opset_import == 0)
    return gopt_error_set(err, GOPT_EPARSE, "%s: no opset_import (every ONNX model declares its opset)",
                          label);
  g = gopt_graph_new(S(m->graph->name));
  if (!g) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", label);
  g->ir_version = m->has_ir_version ? m->ir_version : 0;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    int64_t v = o->has_version ? o->version : 0;
    if (is_default_domain(o->domain)) {
      if (v < MIN_OPSET) {
        rc = gopt_error_set(err, GOPT_EUNSUP,
                            "%s: opset %lld of the default ONNX domain is not supported (gopt "
                            "needs opset %d or later)",
                            label, (long long)v, MIN_OPSET);
        goto done;
      }
      default_opset = v;
    }
    gopt_opset os = {gopt_graph_intern(g, S(o->domain)), v};
    if (os.domain == UINT32_MAX || GOPT_ARR_PUSH(g->opsets, os)) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", label);
      goto done;
    }
  }
  rc = import_graph(im, m->graph, g, NULL, err);
  if (!rc && default_opset >= 0 && default_opset < FULL_OPSET)
    rc = onnx_legacy_check(g, default_opset, err);
  if (rc) {
    gopt_error_prefix(err, "%s: ", label);
    goto done;
  }
  *out = g;
  g = NULL;
done:
  gopt_graph_free(g);
  return rc;
}

int gopt_onnx_load_mem(const void *buf, size_t len, const char *label,
                       const gopt_onnx_load_opts *opts, gopt_graph **out, gopt_error *err) {
  int rc = GOPT_OK;
  Onnx__ModelProto *m = NULL;
  onnx_alloc_cap cap;
  imp im;
  label = label && *label ? label : "<memory>";
  if (out) *out = NULL;
  if (!out || (!buf && len))
    return gopt_error_set(err, GOPT_EINVAL, "%s: bad arguments to gopt_onnx_load_mem", label);
  if (len == 0)
    return gopt_error_set(err, GOPT_EPARSE, "%s: empty file: not an ONNX model", label);
  int wc = onnx_wire_check(&onnx__model_proto__descriptor, buf, len, ONNX_MAX_MSG_DEPTH);
  if (wc == -2)
    return gopt_error_set(err, GOPT_EUNSUP,
                          "%s: not a usable ONNX model (protobuf messages nest deeper than %d)",
                          label, ONNX_MAX_MSG_DEPTH);
  if (wc != 0)
    return gopt_error_set(err, GOPT_EPARSE, "%s: not an ONNX model (protobuf parse failed)", label);
  /* protobuf-c needs a few times the input size; far more means hostile input. */
  size_t limit = len > (SIZE_MAX - ((size_t)64 << 20)) / 64 ? SIZE_MAX : len * 64 + ((size_t)64 << 20);
  onnx_alloc_cap_init(&cap, limit);
  m = onnx__model_proto__unpack(&cap.base, len, buf);
  if (!m) {
    if (cap.hit)
      return gopt_error_set(err, GOPT_ERANGE,
                            "%s: parsing needs more than %zu bytes of memory; refusing", label,
                            limit);
    return gopt_error_set(err, GOPT_EPARSE, "%s: not an ONNX model (protobuf parse failed)", label);
  }
  memset(&im, 0, sizeof im);
  im.ext.load = opts ? opts->load_external_data : 1;
  im.ext.base_dir = opts ? opts->base_dir : NULL;
  rc = import_model(m, label, &im, out, err);
  if (rc == GOPT_OK && im.ext.n_missing) {
    if (im.ext.base_dir)
      gopt_warn("%s: external data file '%s' not found: loading structure only (%zu initializers)",
                label, im.ext.first_missing, im.ext.n_missing);
    else
      gopt_warn("%s: external data '%s' not read (no base directory): loading structure only "
                "(%zu initializers)",
                label, im.ext.first_missing, im.ext.n_missing);
  }
  onnx__model_proto__free_unpacked(m, &cap.base);
  return rc;
}

int gopt_onnx_load(const char *path, const gopt_onnx_load_opts *opts, gopt_graph **out,
                   gopt_error *err) {
  void *buf = NULL;
  size_t len = 0;
  char *dir = NULL;
  gopt_onnx_load_opts o = {NULL, 1};
  if (out) *out = NULL;
  if (!path || !out) return gopt_error_set(err, GOPT_EINVAL, "gopt_onnx_load: bad arguments");
  int rc = gopt_file_read(path, &buf, &len, err);
  if (rc) return rc;
  if (opts) o = *opts;
  if (!o.base_dir) {
    const char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      goto done;
    }
    o.base_dir = dir;
  }
  rc = gopt_onnx_load_mem(buf, len, path, &o, out, err);
done:
  free(dir);
  free(buf);
  return rc;
}
