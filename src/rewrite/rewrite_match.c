/* rewrite_match.c: the matcher of pattern rules on the IR (backtracking over the pattern's ops,
 * reached through producers and use lists from an anchor op), pattern building, and
 * gopt_rewrite_find / gopt_rewrite_apply for both rule kinds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "rewrite/rewrite_internal.h"

/* ---- attributes ------------------------------------------------------------------------------ */

static int attr_value_equal(const gopt_graph *g, int32_t n, const char *name, const json_t *v) {
  const gopt_attr *a = gopt_node_attr(g, n, name);
  if (!a) return 0;
  if (json_is_integer(v)) return a->kind == GOPT_ATTR_INT && a->v.i == json_integer_value(v);
  if (json_is_real(v)) return a->kind == GOPT_ATTR_FLOAT && fabs(a->v.f - json_real_value(v)) < 1e-6;
  if (json_is_string(v))
    return a->kind == GOPT_ATTR_STRING && !strcmp(gopt_graph_str(g, a->v.s), json_string_value(v));
  if (json_is_array(v)) {
    size_t cnt;
    const int64_t *x = gopt_node_get_ints(g, n, name, &cnt);
    if (!x || cnt != json_array_size(v)) return 0;
    for (size_t i = 0; i < cnt; i++)
      if (x[i] != json_integer_value(json_array_get(v, i))) return 0;
    return 1;
  }
  return 0;
}

int rw_attrs_equal(const gopt_graph *g, int32_t n, const json_t *a) {
  const gopt_node *nd = &g->nodes.a[n];
  if ((size_t)nd->n_attr != (a ? json_object_size(a) : 0)) return 0;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)a, key, v) {
    if (!attr_value_equal(g, n, key, v)) return 0;
  }
  return 1;
}

int rw_attrs_set(gopt_graph *g, int32_t n, const json_t *a) {
  const char *key;
  json_t *v;
  int rc = 0;
  json_object_foreach((json_t *)a, key, v) {
    if (json_is_integer(v)) rc = gopt_node_set_int(g, n, key, json_integer_value(v));
    else if (json_is_real(v)) rc = gopt_node_set_float(g, n, key, json_real_value(v));
    else if (json_is_string(v)) rc = gopt_node_set_string(g, n, key, json_string_value(v));
    else if (json_is_array(v)) {
      int64_t x[GOPT_MAX_RANK * 2];
      size_t cnt = json_array_size(v);
      if (cnt > sizeof x / sizeof x[0]) return GOPT_ERANGE;
      for (size_t i = 0; i < cnt; i++) x[i] = json_integer_value(json_array_get(v, i));
      rc = gopt_node_set_ints(g, n, key, x, cnt);
    }
    if (rc) return rc;
  }
  return 0;
}

/* ---- pattern building ------------------------------------------------------------------------ */

int rw_pattern_build(gopt_graph *g, const rw_pattern *p, const int32_t *vars, int32_t *outs,
                     gopt_error *err) {
  int32_t made[GOPT_REWRITE_MAX_OPS][RW_MAX_OUT];
  for (int i = 0; i < p->n_ops; i++) {
    const rw_pop *op = &p->ops[i];
    int32_t in[RW_MAX_IN];
    for (int k = 0; k < op->n_in; k++) {
      int r = op->in[k];
      in[k] = RW_REF_IS_OP(r) ? made[RW_REF_OPI(r)][RW_REF_OUTK(r)] : vars[r];
    }
    for (int k = 0; k < op->n_out; k++)
      if ((made[i][k] = rw_new_tensor(g, err)) < 0) return GOPT_ENOMEM;
    char name[48];
    snprintf(name, sizeof name, "rw__%u", g->n_unnamed++);
    int32_t n = gopt_graph_add_node(g, op->type, name, op->n_in, in, op->n_out, made[i], err);
    if (n < 0) return err ? err->code : GOPT_EINVAL;
    if (op->attrs && rw_attrs_set(g, n, op->attrs))
      return gopt_error_set(err, GOPT_ENOMEM, "cannot set the attributes of '%s'", op->type);
    /* an equal Split names its output count from opset 18 on */
    if (op->op == GOPT_OP_SPLIT && op->n_in == 1 && gopt_graph_opset(g, "", 13) >= 18 &&
        gopt_node_set_int(g, n, "num_outputs", op->n_out))
      return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  for (int k = 0; k < p->n_out; k++) outs[k] = made[RW_REF_OPI(p->out[k])][RW_REF_OUTK(p->out[k])];
  return 0;
}

/* ---- matching -------------------------------------------------------------------------------- */

typedef struct mstate {
  const gopt_graph *g;
  const rw_rule *r;
  int32_t nodes[GOPT_REWRITE_MAX_OPS];
  int32_t vars[RW_MAX_VARS];
} mstate;

static int32_t ref_tensor(const mstate *s, int ref) {
  if (!RW_REF_IS_OP(ref)) return s->vars[ref];
  int32_t n = s->nodes[RW_REF_OPI(ref)];
  if (n < 0) return -1;
  int k = RW_REF_OUTK(ref);
  return k < s->g->nodes.a[n].n_out ? gopt_node_output(s->g, n, k) : -2;
}

/* Assigns host node c to pattern op i when consistent; bound[] records variables it bound. */
static int try_assign(mstate *s, int i, int32_t c, int *bound, int *nb) {
  const gopt_graph *g = s->g;
  const rw_pop *op = &s->r->src.ops[i];
  const gopt_node *nd = &g->nodes.a[c];
  *nb = 0;
  if (!gopt_node_alive(g, c) || nd->op != op->op || nd->n_in != op->n_in || nd->n_out != op->n_out)
    return 0;
  for (int j = 0; j < s->r->src.n_ops; j++)
    if (s->nodes[j] == c) return 0;
  if (!rw_attrs_equal(g, c, op->attrs)) return 0;
  s->nodes[i] = c;
  for (int k = 0; k < op->n_in; k++) {
    int32_t t = gopt_node_input(g, c, k);
    int ref = op->in[k];
    if (t < 0) goto fail;
    if (RW_REF_IS_OP(ref)) {
      int32_t want = ref_tensor(s, ref);
      if (want != -1 && want != t) goto fail;
      if (want == -1) {
        /* the producer must be matched later as that op */
        const gopt_tensor *x = &g->tensors.a[t];
        if (x->producer < 0 || x->out_index != RW_REF_OUTK(ref)) goto fail;
      }
    } else if (s->vars[ref] >= 0) {
      if (s->vars[ref] != t) goto fail;
    } else {
      if (s->r->var_const[ref] && !(g->tensors.a[t].flags & GOPT_T_CONST)) goto fail;
      if (s->r->var_rank[ref] >= 0 && g->tensors.a[t].rank != s->r->var_rank[ref]) goto fail;
      s->vars[ref] = t;
      bound[(*nb)++] = ref;
    }
  }
  /* matched consumers of op i must read c's outputs */
  for (int j = 0; j < s->r->src.n_ops; j++) {
    if (s->nodes[j] < 0 || j == i) continue;
    const rw_pop *oj = &s->r->src.ops[j];
    for (int k = 0; k < oj->n_in; k++)
      if (RW_REF_IS_OP(oj->in[k]) && RW_REF_OPI(oj->in[k]) == i &&
          gopt_node_input(g, s->nodes[j], k) != ref_tensor(s, oj->in[k]))
        goto fail;
  }
  return 1;
fail:
  s->nodes[i] = -1;
  for (int b = 0; b < *nb; b++) s->vars[bound[b]] = -1;
  *nb = 0;
  return 0;
}

static int match_rec(mstate *s) {
  const rw_pattern *p = &s->r->src;
  int next = -1;
  int32_t via_producer = -1;
  int32_t via_tensor = -1;
  int via_slot = 0;
  for (int i = 0; i < p->n_ops && next < 0; i++) {
    if (s->nodes[i] >= 0) continue;
    for (int j = 0; j < p->n_ops && next < 0; j++) {
      if (s->nodes[j] < 0) continue;
      for (int k = 0; k < p->ops[j].n_in; k++)
        if (RW_REF_IS_OP(p->ops[j].in[k]) && RW_REF_OPI(p->ops[j].in[k]) == i) {
          int32_t t = gopt_node_input(s->g, s->nodes[j], k);
          next = i;
          via_producer = s->g->tensors.a[t].producer;
          break;
        }
    }
    for (int k = 0; k < p->ops[i].n_in && next < 0; k++) {
      int32_t t = ref_tensor(s, p->ops[i].in[k]);
      if (t >= 0) {
        next = i;
        via_tensor = t;
        via_slot = k;
      }
    }
  }
  if (next < 0) {
    for (int i = 0; i < p->n_ops; i++)
      if (s->nodes[i] < 0) return 0; /* disconnected pattern */
    return 1;
  }
  int bound[RW_MAX_IN], nb;
  if (via_producer >= 0 || via_tensor < 0) {
    if (via_producer < 0) return 0;
    if (!try_assign(s, next, via_producer, bound, &nb)) return 0;
    if (match_rec(s)) return 1;
    s->nodes[next] = -1;
    for (int b = 0; b < nb; b++) s->vars[bound[b]] = -1;
    return 0;
  }
  for (int32_t sl = s->g->tensors.a[via_tensor].first_use; sl >= 0; sl = s->g->slots.a[sl].next_use) {
    int32_t c = s->g->slots.a[sl].node;
    if (sl - (int32_t)s->g->nodes.a[c].in != via_slot) continue;
    if (!try_assign(s, next, c, bound, &nb)) continue;
    if (match_rec(s)) return 1;
    s->nodes[next] = -1;
    for (int b = 0; b < nb; b++) s->vars[bound[b]] = -1;
  }
  return 0;
}

int rw_match_push(gopt_rewrite_match **out, size_t *n, size_t *cap, const gopt_rewrite_match *m) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 64;
    gopt_rewrite_match *p = realloc(*out, c * sizeof *p);
    if (!p) return GOPT_ENOMEM;
    *out = p;
    *cap = c;
  }
  (*out)[(*n)++] = *m;
  return 0;
}

static int find_pattern(const gopt_graph *g, const rw_rule *r, int32_t rule, gopt_rewrite_match **out,
                        size_t *n, size_t *cap) {
  int anchor = RW_REF_OPI(r->src.out[0]);
  for (size_t c = 0; c < g->nodes.n; c++) {
    if (!gopt_node_alive(g, (int32_t)c) || g->nodes.a[c].op != r->src.ops[anchor].op) continue;
    mstate s = {g, r, {0}, {0}};
    for (int i = 0; i < GOPT_REWRITE_MAX_OPS; i++) s.nodes[i] = s.vars[i] = -1;
    int bound[RW_MAX_IN], nb;
    if (!try_assign(&s, anchor, (int32_t)c, bound, &nb)) continue;
    if (!match_rec(&s)) continue;
    gopt_rewrite_match m = {rule, r->src.n_ops, r->n_vars, {0}, {0}};
    /* anchor first so the step's location is the anchor */
    m.nodes[0] = s.nodes[anchor];
    for (int i = 0, k = 1; i < r->src.n_ops; i++)
      if (i != anchor) m.nodes[k++] = s.nodes[i];
    memcpy(m.vars, s.vars, sizeof m.vars);
    if (rw_match_push(out, n, cap, &m)) return GOPT_ENOMEM;
  }
  return 0;
}

int gopt_rewrite_find(const gopt_graph *g, const gopt_ruleset *rs, int rule,
                      gopt_rewrite_match **out, size_t *n, gopt_error *err) {
  *out = NULL;
  *n = 0;
  size_t cap = 0, nb;
  const rw_builtin *b = rw_builtins(&nb);
  for (size_t i = 0; i < rs->n; i++) {
    if (rule >= 0 ? (size_t)rule != i : !rs->r[i].enabled) continue;
    const rw_rule *r = &rs->r[i];
    int rc = r->builtin >= 0 ? b[r->builtin].find(g, (int32_t)i, out, n, &cap)
                             : find_pattern(g, r, (int32_t)i, out, n, &cap);
    if (rc) {
      free(*out);
      *out = NULL;
      *n = 0;
      return gopt_error_set(err, rc, "out of memory matching rule '%s'", r->name);
    }
  }
  return 0;
}

/* Node of pattern op i of a match (the anchor is stored first). */
static int32_t match_node(const rw_rule *r, const gopt_rewrite_match *m, int i) {
  int anchor = RW_REF_OPI(r->src.out[0]);
  if (i == anchor) return m->nodes[0];
  return m->nodes[i < anchor ? i + 1 : i];
}

static int in_match(const gopt_rewrite_match *m, int32_t n) {
  for (int i = 0; i < m->n_nodes; i++)
    if (m->nodes[i] == n) return 1;
  return 0;
}

/* Rejects a match whose unmapped outputs are used outside it. */
static int check_unmapped(const gopt_graph *g, const rw_rule *r, const gopt_rewrite_match *m,
                          gopt_error *err) {
  for (int i = 0; i < r->src.n_ops; i++) {
    int32_t c = match_node(r, m, i);
    for (int k = 0; k < g->nodes.a[c].n_out; k++) {
      int mapped = 0;
      for (int o = 0; o < r->src.n_out; o++)
        if (r->src.out[o] == RW_REF_OP(i, k)) mapped = 1;
      if (mapped) continue;
      int32_t t = gopt_node_output(g, c, k);
      int outside = 0;
      for (size_t q = 0; q < g->outputs.n; q++)
        if (g->outputs.a[q] == t) outside = 1;
      for (int32_t s = g->tensors.a[t].first_use; s >= 0 && !outside; s = g->slots.a[s].next_use)
        if (gopt_node_alive(g, g->slots.a[s].node) && !in_match(m, g->slots.a[s].node)) outside = 1;
      if (outside)
        return gopt_error_set(err, GOPT_EGRAPH,
                              "rule '%s' at '%s': output '%s' of the match is used outside it and "
                              "not mapped",
                              r->name, gopt_node_name(g, m->nodes[0]),
                              gopt_graph_str(g, g->tensors.a[t].name));
    }
  }
  return 0;
}

static int apply_pattern(gopt_graph *h, const rw_rule *r, const gopt_rewrite_match *m,
                         gopt_error *err) {
  int32_t src_out[RW_MAX_OUT], dst_out[RW_MAX_OUT];
  int rank[RW_MAX_OUT], dtype[RW_MAX_OUT];
  int64_t dims[RW_MAX_OUT][GOPT_MAX_RANK];
  const char *where = gopt_node_name(h, m->nodes[0]);
  char loc[96];
  snprintf(loc, sizeof loc, "%s", where);
  for (int o = 0; o < r->src.n_out; o++) {
    int ref = r->src.out[o];
    src_out[o] = gopt_node_output(h, match_node(r, m, RW_REF_OPI(ref)), RW_REF_OUTK(ref));
    const gopt_tensor *x = &h->tensors.a[src_out[o]];
    rank[o] = x->rank;
    dtype[o] = x->dtype;
    memcpy(dims[o], gopt_tensor_dims(h, src_out[o]), (size_t)x->rank * sizeof(int64_t));
  }
  int rc = rw_pattern_build(h, &r->dst, m->vars, dst_out, err);
  if (rc) return rc;
  for (int o = 0; o < r->src.n_out; o++)
    if ((rc = rw_replace(h, src_out[o], dst_out[o], err))) return rc;
  for (int i = 0; i < m->n_nodes; i++) gopt_graph_remove_node(h, m->nodes[i]);
  if ((rc = rw_finish(h, err))) {
    gopt_error_prefix(err, "rule '%s' at '%s': ", r->name, loc);
    return rc;
  }
  for (int o = 0; o < r->src.n_out; o++) {
    const gopt_tensor *x = &h->tensors.a[dst_out[o]];
    if (x->rank != rank[o] || x->dtype != dtype[o] ||
        memcmp(gopt_tensor_dims(h, dst_out[o]), dims[o], (size_t)rank[o] * sizeof(int64_t)))
      return gopt_error_set(err, GOPT_ESHAPE,
                            "rule '%s' at '%s': target output %d has a different shape or dtype",
                            r->name, loc, o);
  }
  return 0;
}

int rw_apply_inplace(gopt_graph *h, const gopt_ruleset *rs, const gopt_rewrite_match *m,
                     int *flags, gopt_error *err) {
  if (flags) *flags = 0;
  if (!m || m->rule < 0 || (size_t)m->rule >= rs->n)
    return gopt_error_set(err, GOPT_EINVAL, "match names no rule of the set");
  const rw_rule *r = &rs->r[m->rule];
  int rc, fl = 0;
  if (r->builtin < 0 && (rc = check_unmapped(h, r, m, err))) return rc;
  if (r->builtin < 0) { /* a rule verified on square shapes may not hold at these */
    char why[256];
    int ok = rw_instance_ok(rs, (size_t)m->rule, h, m->vars, why, sizeof why);
    if (ok < 0) return gopt_error_set(err, ok, "out of memory");
    if (!ok) return gopt_error_set(err, GOPT_ESHAPE, "%s (at '%s')", why, gopt_node_name(h, m->nodes[0]));
  }
  size_t nb;
  const rw_builtin *b = rw_builtins(&nb);
  size_t first_new = h->nodes.n;
  char loc[96];
  snprintf(loc, sizeof loc, "%s", gopt_node_name(h, m->nodes[0]));
  if (r->builtin >= 0) {
    rc = b[r->builtin].apply(h, m, &fl, err);
    if (!rc && (rc = rw_finish(h, err))) gopt_error_prefix(err, "rule '%s' at '%s': ", r->name, loc);
  } else {
    rc = apply_pattern(h, r, m, err);
  }
  if (!rc) {
    /* new nodes whose inputs are all constants (weights concatenated, scaled) are folded */
    size_t nodata = 0;
    int nf = rw_fold(h, first_new, &nodata, err);
    if (nf < 0) rc = nf;
    else if (nf > 0) {
      fl |= GOPT_RW_WEIGHTS;
      if (nodata) fl |= GOPT_RW_NODATA;
    }
  }
  if (!rc) rc = gopt_graph_compact(h, NULL);
  if (!rc && flags) *flags = fl;
  return rc;
}

int gopt_rewrite_apply(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_match *m,
                       gopt_graph **out, int *flags, gopt_error *err) {
  *out = NULL;
  if (flags) *flags = 0;
  if (!m || m->rule < 0 || (size_t)m->rule >= rs->n)
    return gopt_error_set(err, GOPT_EINVAL, "match names no rule of the set");
  const rw_rule *r = &rs->r[m->rule];
  int rc;
  /* checked before cloning: most rejected matches fail here, cheaply */
  if (r->builtin < 0 && (rc = check_unmapped(g, r, m, err))) return rc;
  gopt_graph *h = gopt_graph_clone(g);
  if (!h) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if ((rc = rw_apply_inplace(h, rs, m, flags, err))) {
    gopt_graph_free(h);
    return rc;
  }
  *out = h;
  return 0;
}
