/* rewrite_rule.c: rule sets: the built-in set, rules.json reading and writing (jansson), patterns
 * as JSON, and the accessors of gopt/rewrite.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "gopt/util.h"
#include "rewrite/rewrite_internal.h"
#include "util/util_internal.h"

gopt_ruleset *rw_ruleset_new(void) { return calloc(1, sizeof(gopt_ruleset)); }

int rw_ruleset_push(gopt_ruleset *rs, const rw_rule *r) {
  if (rs->n == rs->cap) {
    size_t c = rs->cap ? rs->cap * 2 : 32;
    rw_rule *p = realloc(rs->r, c * sizeof *p);
    if (!p) return GOPT_ENOMEM;
    rs->r = p;
    rs->cap = c;
  }
  rs->r[rs->n++] = *r;
  return 0;
}

void rw_pattern_clear(rw_pattern *p) {
  for (int i = 0; i < p->n_ops; i++) json_decref(p->ops[i].attrs);
  memset(p, 0, sizeof *p);
}

void rw_rule_clear(rw_rule *r) {
  rw_pattern_clear(&r->src);
  rw_pattern_clear(&r->dst);
  json_decref(r->shapes);
  json_decref(r->extra);
  r->shapes = r->extra = NULL;
}

void gopt_ruleset_free(gopt_ruleset *rs) {
  if (!rs) return;
  for (size_t i = 0; i < rs->n; i++) rw_rule_clear(&rs->r[i]);
  free(rs->r);
  rw_icache_free(rs->icache);
  free(rs);
}

gopt_ruleset *gopt_ruleset_builtin(void) {
  gopt_ruleset *rs = rw_ruleset_new();
  if (!rs) return NULL;
  size_t nb;
  const rw_builtin *b = rw_builtins(&nb);
  for (size_t i = 0; i < nb; i++) {
    rw_rule r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", b[i].name);
    r.builtin = (int)i;
    r.enabled = 1;
    if (rw_ruleset_push(rs, &r)) {
      gopt_ruleset_free(rs);
      return NULL;
    }
  }
  return rs;
}

size_t gopt_ruleset_count(const gopt_ruleset *rs) { return rs ? rs->n : 0; }
const char *gopt_ruleset_rule_name(const gopt_ruleset *rs, size_t i) {
  return rs && i < rs->n ? rs->r[i].name : NULL;
}
int gopt_ruleset_rule_enabled(const gopt_ruleset *rs, size_t i) {
  return rs && i < rs->n && rs->r[i].enabled;
}
const char *gopt_ruleset_rule_reason(const gopt_ruleset *rs, size_t i) {
  return rs && i < rs->n ? rs->r[i].reason : "";
}
int gopt_ruleset_rule_size(const gopt_ruleset *rs, size_t i) {
  if (!rs || i >= rs->n) return 0;
  if (rs->r[i].builtin >= 0) {
    size_t nb;
    return rw_builtins(&nb)[rs->r[i].builtin].size;
  }
  return rs->r[i].src.n_ops;
}
void gopt_ruleset_disable(gopt_ruleset *rs, size_t i, const char *why) {
  if (!rs || i >= rs->n) return;
  rs->r[i].enabled = 0;
  snprintf(rs->r[i].reason, sizeof rs->r[i].reason, "%s", why ? why : "disabled");
}
void gopt_ruleset_force_enable(gopt_ruleset *rs, size_t i) {
  if (rs && i < rs->n) rs->r[i].enabled = 1;
}

/* ---- patterns as JSON ------------------------------------------------------------------------ */

/* "x3" -> 3; "o2" -> op 2 output 0; "o2.1" -> output 1. Returns 0 or -1 when malformed. */
static int parse_ref(const char *s, int n_vars, int n_ops_before, int *ref) {
  char *end;
  if (s[0] == 'x') {
    long v = strtol(s + 1, &end, 10);
    if (end == s + 1 || *end || v < 0 || v >= n_vars) return -1;
    *ref = (int)v;
    return 0;
  }
  if (s[0] != 'o') return -1;
  long i = strtol(s + 1, &end, 10), k = 0;
  if (end == s + 1 || i < 0 || i >= n_ops_before) return -1;
  if (*end == '.') {
    const char *q = end + 1;
    k = strtol(q, &end, 10);
    if (end == q || k < 0 || k >= RW_MAX_OUT) return -1;
  }
  if (*end) return -1;
  *ref = RW_REF_OP((int)i, (int)k);
  return 0;
}

static void ref_text(int ref, char *buf, size_t n) {
  if (!RW_REF_IS_OP(ref)) snprintf(buf, n, "x%d", ref);
  else if (RW_REF_OUTK(ref)) snprintf(buf, n, "o%d.%d", RW_REF_OPI(ref), RW_REF_OUTK(ref));
  else snprintf(buf, n, "o%d", RW_REF_OPI(ref));
}

int rw_pattern_parse(json_t *j, int n_vars, rw_pattern *p, const char *where, gopt_error *err) {
  memset(p, 0, sizeof *p);
  json_t *ops = json_object_get(j, "ops"), *out = json_object_get(j, "out");
  if (!json_is_array(ops) || !json_is_array(out) || json_array_size(ops) == 0 ||
      json_array_size(ops) > GOPT_REWRITE_MAX_OPS || json_array_size(out) == 0 ||
      json_array_size(out) > RW_MAX_OUT)
    return gopt_error_set(err, GOPT_EPARSE, "%s: needs \"ops\" (1..%d) and \"out\" (1..%d) arrays",
                          where, GOPT_REWRITE_MAX_OPS, RW_MAX_OUT);
  for (size_t i = 0; i < json_array_size(ops); i++) {
    json_t *o = json_array_get(ops, i);
    rw_pop *op = &p->ops[i];
    const char *type = json_string_value(json_object_get(o, "op"));
    json_t *in = json_object_get(o, "in");
    if (!type || !json_is_array(in) || json_array_size(in) > RW_MAX_IN) {
      rw_pattern_clear(p);
      return gopt_error_set(err, GOPT_EPARSE, "%s: op %zu needs \"op\" and \"in\" (up to %d)",
                            where, i, RW_MAX_IN);
    }
    op->op = gopt_op_from_name(type);
    if (op->op == 0) {
      rw_pattern_clear(p);
      return gopt_error_set(err, GOPT_EPARSE, "%s: op %zu: unknown op type '%s'", where, i, type);
    }
    snprintf(op->type, sizeof op->type, "%s", type);
    op->n_in = (int)json_array_size(in);
    json_t *no = json_object_get(o, "outputs");
    op->n_out = no ? (int)json_integer_value(no) : 1;
    if (op->n_out < 1 || op->n_out > RW_MAX_OUT) op->n_out = 1;
    for (int k = 0; k < op->n_in; k++) {
      const char *s = json_string_value(json_array_get(in, (size_t)k));
      if (!s || parse_ref(s, n_vars, (int)i, &op->in[k])) {
        rw_pattern_clear(p);
        return gopt_error_set(err, GOPT_EPARSE, "%s: op %zu input %d: bad reference '%s'", where, i,
                              k, s ? s : "?");
      }
    }
    json_t *a = json_object_get(o, "attrs");
    op->attrs = a ? json_incref(a) : json_object();
    p->n_ops = (int)i + 1;
  }
  p->n_out = (int)json_array_size(out);
  for (int k = 0; k < p->n_out; k++) {
    const char *s = json_string_value(json_array_get(out, (size_t)k));
    if (!s || parse_ref(s, n_vars, p->n_ops, &p->out[k]) || !RW_REF_IS_OP(p->out[k])) {
      rw_pattern_clear(p);
      return gopt_error_set(err, GOPT_EPARSE, "%s: output %d: bad reference '%s'", where, k,
                            s ? s : "?");
    }
  }
  return 0;
}

json_t *rw_pattern_json(const rw_pattern *p) {
  json_t *o = json_object(), *ops = json_array(), *out = json_array();
  char buf[32];
  for (int i = 0; i < p->n_ops; i++) {
    json_t *op = json_object(), *in = json_array();
    json_object_set_new(op, "op", json_string(p->ops[i].type));
    for (int k = 0; k < p->ops[i].n_in; k++) {
      ref_text(p->ops[i].in[k], buf, sizeof buf);
      json_array_append_new(in, json_string(buf));
    }
    json_object_set_new(op, "in", in);
    if (p->ops[i].n_out != 1) json_object_set_new(op, "outputs", json_integer(p->ops[i].n_out));
    if (p->ops[i].attrs && json_object_size(p->ops[i].attrs))
      json_object_set(op, "attrs", p->ops[i].attrs);
    json_array_append_new(ops, op);
  }
  for (int k = 0; k < p->n_out; k++) {
    ref_text(p->out[k], buf, sizeof buf);
    json_array_append_new(out, json_string(buf));
  }
  json_object_set_new(o, "ops", ops);
  json_object_set_new(o, "out", out);
  return o;
}

/* ---- rules.json ------------------------------------------------------------------------------- */

static int parse_rule(json_t *o, size_t idx, rw_rule *r, gopt_error *err) {
  memset(r, 0, sizeof *r);
  r->builtin = -1;
  const char *name = json_string_value(json_object_get(o, "name"));
  char where[96];
  snprintf(where, sizeof where, "rule %zu (%s)", idx, name ? name : "unnamed");
  if (!name) return gopt_error_set(err, GOPT_EPARSE, "%s: missing \"name\"", where);
  snprintf(r->name, sizeof r->name, "%s", name);
  if (json_is_true(json_object_get(o, "builtin"))) {
    size_t nb;
    const rw_builtin *b = rw_builtins(&nb);
    for (size_t i = 0; i < nb; i++)
      if (!strcmp(b[i].name, name)) r->builtin = (int)i;
    if (r->builtin < 0) return gopt_error_set(err, GOPT_EPARSE, "%s: no built-in rule of that name", where);
    r->enabled = !json_is_false(json_object_get(o, "enabled"));
    return 0;
  }
  json_t *nv = json_object_get(o, "vars");
  r->n_vars = (int)json_integer_value(nv);
  if (r->n_vars < 1 || r->n_vars > RW_MAX_VARS)
    return gopt_error_set(err, GOPT_EPARSE, "%s: \"vars\" must be 1..%d", where, RW_MAX_VARS);
  json_t *cs = json_object_get(o, "const");
  for (size_t i = 0; i < json_array_size(cs); i++) {
    const char *s = json_string_value(json_array_get(cs, i));
    int v;
    if (!s || parse_ref(s, r->n_vars, 0, &v))
      return gopt_error_set(err, GOPT_EPARSE, "%s: \"const\": bad variable", where);
    r->var_const[v] = 1;
  }
  char w2[128];
  snprintf(w2, sizeof w2, "%s: src", where);
  int rc = rw_pattern_parse(json_object_get(o, "src"), r->n_vars, &r->src, w2, err);
  if (rc) return rc;
  snprintf(w2, sizeof w2, "%s: dst", where);
  if ((rc = rw_pattern_parse(json_object_get(o, "dst"), r->n_vars, &r->dst, w2, err))) {
    rw_rule_clear(r);
    return rc;
  }
  if (r->src.n_out != r->dst.n_out) {
    rw_rule_clear(r);
    return gopt_error_set(err, GOPT_EPARSE, "%s: src and dst have different output counts", where);
  }
  json_t *sh = json_object_get(o, "shapes");
  r->shapes = json_is_array(sh) ? json_incref(sh) : json_array();
  /* shape constraint: a variable matches tensors of its test shapes' rank only */
  for (int v = 0; v < r->n_vars; v++) {
    char key[16];
    snprintf(key, sizeof key, "x%d", v);
    json_t *d = json_object_get(json_array_get(r->shapes, 0), key);
    r->var_rank[v] = json_is_array(d) ? (int)json_array_size(d) : -1;
  }
  r->enabled = json_is_true(json_object_get(o, "verified"));
  const char *why = json_string_value(json_object_get(o, "reason"));
  snprintf(r->reason, sizeof r->reason, "%s", why ? why : r->enabled ? "" : "not verified");
  json_t *proof = json_object_get(o, "proof");
  if (proof) {
    r->extra = json_object();
    json_object_set(r->extra, "proof", proof);
  }
  return 0;
}

int gopt_ruleset_parse(const char *text, const char *label, gopt_ruleset **out, gopt_error *err) {
  *out = NULL;
  json_error_t je;
  json_t *root = json_loads(text, 0, &je);
  if (!root)
    return gopt_error_set(err, GOPT_EPARSE, "%s:%d: %s", label, je.line, je.text);
  json_t *rules = json_object_get(root, "rules");
  gopt_ruleset *rs = rw_ruleset_new();
  int rc = 0;
  if (!rs) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  if (!json_is_array(rules)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: expected an object with a \"rules\" array", label);
    goto done;
  }
  for (size_t i = 0; i < json_array_size(rules); i++) {
    rw_rule r;
    if ((rc = parse_rule(json_array_get(rules, i), i, &r, err))) {
      gopt_error_prefix(err, "%s: ", label);
      goto done;
    }
    if (rw_ruleset_push(rs, &r)) {
      rw_rule_clear(&r);
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
  }
  *out = rs;
  rs = NULL;
done:
  gopt_ruleset_free(rs);
  json_decref(root);
  return rc;
}

int gopt_ruleset_load(const char *path, gopt_ruleset **out, gopt_error *err) {
  void *buf = NULL;
  size_t len;
  int rc = gopt_file_read(path, &buf, &len, err);
  if (rc) return rc;
  rc = gopt_ruleset_parse(buf, path, out, err);
  free(buf);
  return rc;
}

int gopt_ruleset_save(const gopt_ruleset *rs, const char *path, const char *extra, gopt_error *err) {
  json_t *root = json_object(), *rules = json_array();
  if (extra) {
    json_t *e = json_loads(extra, 0, NULL);
    if (json_is_object(e)) json_object_update(root, e);
    json_decref(e);
  }
  for (size_t i = 0; i < rs->n; i++) {
    const rw_rule *r = &rs->r[i];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r->name));
    if (r->builtin >= 0) {
      json_object_set_new(o, "builtin", json_true());
      if (!r->enabled) json_object_set_new(o, "enabled", json_false());
    } else {
      json_object_set_new(o, "vars", json_integer(r->n_vars));
      json_t *cs = json_array();
      for (int v = 0; v < r->n_vars; v++)
        if (r->var_const[v]) {
          char b[16];
          snprintf(b, sizeof b, "x%d", v);
          json_array_append_new(cs, json_string(b));
        }
      if (json_array_size(cs)) json_object_set_new(o, "const", cs);
      else json_decref(cs);
      json_object_set_new(o, "src", rw_pattern_json(&r->src));
      json_object_set_new(o, "dst", rw_pattern_json(&r->dst));
      json_object_set(o, "shapes", r->shapes ? r->shapes : json_array());
      json_object_set_new(o, "verified", json_boolean(r->enabled));
      if (r->reason[0]) json_object_set_new(o, "reason", json_string(r->reason));
      if (r->extra) json_object_update(o, r->extra);
    }
    json_array_append_new(rules, o);
  }
  /* One rule per line, so the file diffs well. */
  size_t cap = 1024, len = 0;
  char *text = malloc(cap);
  int oom = !text;
  const char *key;
  json_t *val;
  size_t nk = 0;
#define RW_APPEND(str)                                          \
  do {                                                          \
    const char *s_ = (str);                                     \
    size_t l_ = strlen(s_);                                     \
    if (!oom && len + l_ + 1 > cap) {                           \
      while (len + l_ + 1 > cap) cap *= 2;                      \
      char *p_ = realloc(text, cap);                            \
      if (!p_) oom = 1;                                         \
      else text = p_;                                           \
    }                                                           \
    if (!oom) {                                                 \
      memcpy(text + len, s_, l_ + 1);                           \
      len += l_;                                                \
    }                                                           \
  } while (0)
  RW_APPEND("{\n");
  json_object_foreach(root, key, val) {
    char *v = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *k = json_string(key);
    char *ks = json_dumps(k, JSON_ENCODE_ANY);
    json_decref(k);
    if (!v || !ks) oom = 1;
    else {
      RW_APPEND(nk++ ? ",\n" : "");
      RW_APPEND(ks);
      RW_APPEND(": ");
      RW_APPEND(v);
    }
    free(v);
    free(ks);
  }
  RW_APPEND(nk ? ",\n\"rules\": [\n" : "\"rules\": [\n");
  for (size_t i = 0; i < json_array_size(rules); i++) {
    char *v = json_dumps(json_array_get(rules, i), JSON_COMPACT);
    if (!v) oom = 1;
    else {
      RW_APPEND(i ? ",\n" : "");
      RW_APPEND(v);
    }
    free(v);
  }
  RW_APPEND("\n]}\n");
#undef RW_APPEND
  json_decref(rules);
  json_decref(root);
  if (oom) {
    free(text);
    return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  size_t n = strlen(text);
  int rc = gopt_file_write_atomic(path, text, n, err);
  free(text);
  return rc;
}

int32_t rw_rule_var_tensor_dims(gopt_graph *g, const rw_rule *r, int v, int rank, const int64_t *dims,
                                json_t *vals, gopt_error *err) {
  char key[16];
  snprintf(key, sizeof key, "x%d", v);
  if (!r->var_const[v]) {
    int32_t t = gopt_graph_add_tensor(g, key, GOPT_DT_FLOAT, rank, dims, err);
    if (t >= 0) gopt_graph_add_input(g, t);
    return t;
  }
  int64_t n = 1;
  for (int k = 0; k < rank; k++) n *= dims[k];
  /* a constant: the listed values (int64: a Reshape target), or positive floats from a fixed seed
   * (the same on both sides; valid as a BatchNormalization variance) */
  if (vals) {
    int64_t iv[GOPT_MAX_RANK];
    if (rank != 1 || (int64_t)json_array_size(vals) != n || n > GOPT_MAX_RANK) {
      gopt_error_set(err, GOPT_EINVAL, "rule '%s': values of %s do not fit its shape", r->name, key);
      return -1;
    }
    for (int64_t i = 0; i < n; i++) iv[i] = json_integer_value(json_array_get(vals, (size_t)i));
    return rw_const(g, GOPT_DT_INT64, rank, dims, iv, err);
  }
  float *f = n > 0 && n <= 1 << 20 ? malloc((size_t)n * sizeof *f) : NULL;
  if (!f) {
    gopt_error_set(err, GOPT_EINVAL, "rule '%s': constant %s has a bad size", r->name, key);
    return -1;
  }
  uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(v + 1);
  for (int64_t i = 0; i < n; i++) f[i] = 0.5f + (float)(gopt_splitmix64(&s) >> 40) / 16777216.0f;
  int32_t t = rw_const(g, GOPT_DT_FLOAT, rank, dims, f, err);
  free(f);
  return t;
}

int32_t rw_rule_var_tensor(gopt_graph *g, const rw_rule *r, int v, json_t *shape, int mul, gopt_error *err) {
  char key[16];
  snprintf(key, sizeof key, "x%d", v);
  json_t *d = json_object_get(shape, key);
  int64_t dims[GOPT_MAX_RANK];
  int rank = (int)json_array_size(d);
  if (!json_is_array(d) || rank > GOPT_MAX_RANK) {
    gopt_error_set(err, GOPT_EINVAL, "rule '%s': test shape lacks %s", r->name, key);
    return -1;
  }
  json_t *vals = r->var_const[v] ? json_object_get(json_object_get(shape, "values"), key) : NULL;
  for (int k = 0; k < rank; k++) dims[k] = json_integer_value(json_array_get(d, (size_t)k)) * (vals ? 1 : mul);
  return rw_rule_var_tensor_dims(g, r, v, rank, dims, vals, err);
}
