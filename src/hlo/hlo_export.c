/* hlo_export.c: graph IR -> HLO text (the old syntax: `%` names, computation signatures; XLA's
 * parser reads it, and so does gopt's). Each computation is written once per distinct content
 * (sub-graphs with equal gopt_graph_hash share a name), callees before callers, ENTRY last.
 * Parameters come from the inputs (leaves NAME#i... regrouped into tuple parameters), constants
 * from constant tensors (elided as {...} when their bytes are missing or larger than the limit),
 * "hlo::OPCODE" nodes as themselves, and nodes of other front ends as custom-calls
 * "gopt.TYPE" whose backend_config encodes the attributes (hlo_import.c decodes them). Operands
 * that are parts of tuples get get-tuple-element instructions, mixed groups a tuple. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/hlo.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "hlo/hlo_internal.h"
#include "ir/ir_internal.h"
#include "onnx/onnx_internal.h"

/* ---- string buffer ------------------------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + n + 1) c *= 2;
    char *q = realloc(b->p, c);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q;
    b->cap = c;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    sb_add(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb_add(b, big, (size_t)n);
  free(big);
}

/* Percent-encodes s (everything but [A-Za-z0-9_.-]) for backend_config. */
static void sb_pct(sbuf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '.' || c == '-')
      sb_add(b, (const char *)&c, 1);
    else
      sb_printf(b, "%%%02X", c);
  }
}

/* ---- exporter state ------------------------------------------------------------------------- */

typedef struct emitted {
  char *name;
  uint64_t hash;
} emitted;

typedef struct ex {
  sbuf out;
  GOPT_ARRAY(emitted) comps;
  size_t max_const;    /* elements; larger constants are elided */
  size_t n_elided;
  gopt_error *err;
} ex;

/* One value of a computation: a parameter (group of inputs), a constant or a node. */
typedef struct val {
  char *name;
  int32_t *leaves;     /* tensor ids (points into the computation's leaf array) */
  int32_t n;
  int16_t (*path)[8];  /* per leaf: tuple index path (plen entries; 0 for a plain array) */
  int8_t *plen;
} val;

typedef struct cx {
  ex *x;
  const gopt_graph *g;
  val *v;
  size_t nv;
  int32_t *tval, *tleaf; /* per tensor: value and leaf position (-1 when none) */
  int32_t *node_val;     /* per node: its value */
  size_t n_params;       /* values [0, n_params) are the parameters */
  onnx_map names;        /* instruction names in use (keys owned by the names list) */
  char **owned;
  size_t n_owned;
  unsigned synth;
  char **comp_of_attr;   /* per g->attrs index: emitted computation name (GRAPH attrs) */
} cx;

static int x_err(ex *x, int code, const char *fmt, const char *a, const char *b) {
  char msg[400];
  snprintf(msg, sizeof msg, fmt, a, b);
  return gopt_error_set(x->err, code, "%s", msg);
}

static int valid_name_ch(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

/* A unique instruction name from base (invalid characters become '_'); NULL when out of memory. */
static char *unique_name(cx *c, const char *base, size_t len) {
  char *s = malloc(len + 24);
  if (!s) return NULL;
  for (size_t i = 0; i < len; i++) s[i] = valid_name_ch(base[i]) ? base[i] : '_';
  if (len == 0) s[len++] = 'v';
  s[len] = 0;
  for (unsigned k = 1; onnx_map_get(&c->names, s) >= 0; k++) snprintf(s + len, 24, ".%u", k);
  char **o = realloc(c->owned, (c->n_owned + 1) * sizeof *o);
  if (!o) {
    free(s);
    return NULL;
  }
  c->owned = o;
  c->owned[c->n_owned++] = s;
  if (onnx_map_put(&c->names, s, 1)) return NULL;
  return s;
}

/* ---- shapes --------------------------------------------------------------------------------- */

static int leaf_shape(cx *c, sbuf *b, int32_t t) {
  const gopt_graph *g = c->g;
  const gopt_tensor *x = &g->tensors.a[t];
  const char *nm = gopt_graph_str(g, x->name);
  const char *dt = hlo_dtype_name(x->dtype);
  if (!dt) return x_err(c->x, GOPT_EUNSUP, "tensor '%s': element type %s has no HLO type", nm, gopt_dtype_name(x->dtype));
  if (x->flags & GOPT_T_NOSHAPE) return x_err(c->x, GOPT_EUNSUP, "tensor '%s': shape unknown%s", nm, "");
  sb_printf(b, "%s[", dt);
  for (int i = 0; i < x->rank; i++) {
    int64_t d = gopt_tensor_dims(g, t)[i];
    if (d < 0)
      return x_err(c->x, GOPT_EUNSUP, "tensor '%s' has a symbolic dimension (%s): bind it (e.g. --batch N) to write HLO",
                   nm, gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d)]));
    sb_printf(b, "%s%" PRId64, i ? "," : "", d);
  }
  sb_puts(b, "]");
  return 0;
}

/* Shape of leaves [lo, hi) of v whose paths agree up to depth. */
static int tree_shape(cx *c, sbuf *b, const val *v, int lo, int hi, int depth) {
  if (hi - lo == 1 && v->plen[lo] == depth) return leaf_shape(c, b, v->leaves[lo]);
  sb_puts(b, "(");
  for (int i = lo, first = 1; i < hi; first = 0) {
    int j = i + 1;
    while (j < hi && v->path[j][depth] == v->path[i][depth]) j++;
    if (!first) sb_puts(b, ", ");
    int rc = tree_shape(c, b, v, i, j, depth + 1);
    if (rc) return rc;
    i = j;
  }
  sb_puts(b, ")");
  return 0;
}

static int val_shape(cx *c, sbuf *b, const val *v) {
  if (v->n == 0) {
    sb_puts(b, "()");
    return 0;
  }
  return tree_shape(c, b, v, 0, v->n, 0);
}

/* Fills v's leaf paths from names base#i#j (a consistent tree), else a flat tuple (or an array
 * for a single leaf named base). */
static void set_paths(cx *c, val *v, const char *base, size_t bl) {
  int ok = 1;
  for (int32_t i = 0; i < v->n && ok; i++) {
    const char *nm = gopt_graph_str(c->g, c->g->tensors.a[v->leaves[i]].name);
    v->plen[i] = 0;
    if (strncmp(nm, base, bl)) { ok = 0; break; }
    const char *p = nm + bl;
    while (*p == '#' && ok) {
      char *e;
      long k = strtol(p + 1, &e, 10);
      if (e == p + 1 || k < 0 || k > 32767 || v->plen[i] >= 8) ok = 0;
      else v->path[i][v->plen[i]++] = (int16_t)k;
      p = e;
    }
    if (*p) ok = 0;
  }
  /* consistency: a leaf with a shorter path cannot share a prefix with another leaf */
  for (int32_t i = 1; i < v->n && ok; i++) {
    int common = 0;
    while (common < v->plen[i - 1] && common < v->plen[i] && v->path[i - 1][common] == v->path[i][common]) common++;
    if (common == v->plen[i - 1] || common == v->plen[i]) ok = 0;
    else if (v->path[i][common] < v->path[i - 1][common]) ok = 0;
  }
  if (ok && v->n == 1 && v->plen[0] == 0) return;
  if (ok && v->n > 0 && v->plen[0] > 0) return;
  for (int32_t i = 0; i < v->n; i++) {
    v->plen[i] = 1;
    v->path[i][0] = (int16_t)(i < 32767 ? i : 32767);
  }
  if (v->n == 1) v->plen[0] = 0; /* one leaf with another name: a plain array */
}

/* ---- values ----------------------------------------------------------------------------------- */

static size_t base_len(const char *nm) {
  const char *h = strchr(nm, '#');
  return h ? (size_t)(h - nm) : strlen(nm);
}

/* Adds a value over leaves[0..n) (already stored in the leaf array) named after base. */
static int add_val(cx *c, int32_t *leaves, int32_t n, const char *base, size_t bl) {
  val *v = &c->v[c->nv];
  memset(v, 0, sizeof *v);
  v->leaves = leaves;
  v->n = n;
  v->path = calloc((size_t)n + 1, sizeof *v->path);
  v->plen = calloc((size_t)n + 1, 1);
  v->name = unique_name(c, base, bl);
  if (!v->path || !v->plen || !v->name) return gopt_error_set(c->x->err, GOPT_ENOMEM, "out of memory");
  set_paths(c, v, base, bl);
  for (int32_t i = 0; i < n; i++) {
    c->tval[leaves[i]] = (int32_t)c->nv;
    c->tleaf[leaves[i]] = i;
  }
  c->nv++;
  return 0;
}

/* Name base of node n's value: the common base of its outputs' names, else the node's name. */
static const char *node_base(const gopt_graph *g, int32_t n, size_t *bl) {
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->n_out > 0) {
    const char *b0 = gopt_graph_str(g, g->tensors.a[gopt_node_output(g, n, 0)].name);
    size_t l0 = base_len(b0);
    int same = 1;
    for (int i = 1; i < nd->n_out && same; i++) {
      const char *bi = gopt_graph_str(g, g->tensors.a[gopt_node_output(g, n, i)].name);
      same = base_len(bi) == l0 && !strncmp(bi, b0, l0);
    }
    if (same && (nd->n_out > 1 || strchr(b0, '#') || l0)) {
      *bl = l0;
      return b0;
    }
  }
  const char *nm = gopt_node_name(g, n);
  *bl = strlen(nm);
  return nm;
}

/* ---- operands ---------------------------------------------------------------------------------- */

/* Writes "%NAME" of value vi, followed by "#i" per entry of path[0..plen) (an element of a
 * tuple value, as today's XLA writes operands). */
static void elem_ref(cx *c, sbuf *ref, int32_t vi, const int16_t *path, int plen) {
  sb_printf(ref, "%%%s", c->v[vi].name);
  for (int d = 0; d < plen; d++) sb_printf(ref, "#%d", path[d]);
}

/* Prefix length of the tuple element that holds exactly leaves [p, p + k) of value vi with a
 * tuple shape (tuple) or as one array (!tuple), -1 when no element does. */
static int subtree_prefix(const val *v, int32_t p, int k, int tuple) {
  if (k <= 0 || p + k > v->n) return -1;
  int len = v->plen[p];
  for (int i = 1; i < k; i++) { /* longest common prefix */
    int q = 0;
    while (q < len && q < v->plen[p + i] && v->path[p + i][q] == v->path[p][q]) q++;
    len = q;
  }
  if (tuple) {
    for (int i = 0; i < k; i++)
      if (len >= v->plen[p + i]) len = v->plen[p + i] - 1;
  } else if (k != 1) {
    return -1;
  }
  if (len < 0) return -1;
  for (int i = 0; i < v->n; i++) { /* exactly the leaves under the prefix */
    int under = v->plen[i] >= len && !memcmp(v->path[i], v->path[p], sizeof(int16_t) * (size_t)len);
    if (under != (i >= p && i < p + k)) return -1;
  }
  return len;
}

/* Reference to tensors ts[0..k) as one operand (written to ref; helper instructions to pre): a
 * tuple operand when tuple (the whole value, or one element "x#i", when ts are exactly its
 * leaves, else a new tuple), else the array ts[0] (itself or an element "x#i#j"). */
static int group_ref(cx *c, sbuf *pre, sbuf *ref, const int32_t *ts, int k, int tuple) {
  const gopt_graph *g = c->g;
  for (int i = 0; i < k; i++)
    if (ts[i] < 0 || c->tval[ts[i]] < 0)
      return x_err(c->x, GOPT_EUNSUP, "tensor '%s' is read but not defined in computation '%s'",
                   ts[i] < 0 ? "(omitted)" : gopt_graph_str(g, g->tensors.a[ts[i]].name),
                   gopt_graph_str(g, g->name));
  int32_t v0 = k > 0 ? c->tval[ts[0]] : -1;
  int same = k > 0;
  for (int i = 0; i < k && same; i++) same = c->tval[ts[i]] == v0 && c->tleaf[ts[i]] == c->tleaf[ts[0]] + i;
  int pl = same ? subtree_prefix(&c->v[v0], c->tleaf[ts[0]], k, tuple) : -1;
  if (pl >= 0 && (tuple || k == 1)) {
    elem_ref(c, ref, v0, c->v[v0].path[c->tleaf[ts[0]]], pl);
    return 0;
  }
  if (!tuple && k == 1) {
    const val *v = &c->v[v0];
    elem_ref(c, ref, v0, v->path[c->tleaf[ts[0]]], v->plen[c->tleaf[ts[0]]]);
    return 0;
  }
  sbuf parts = {0}, shp = {0};
  int rc = 0;
  sb_puts(&shp, "(");
  for (int i = 0; i < k && !rc; i++) {
    const val *v = &c->v[c->tval[ts[i]]];
    int32_t p = c->tleaf[ts[i]];
    if (i) sb_puts(&parts, ", ");
    elem_ref(c, &parts, c->tval[ts[i]], v->path[p], v->plen[p]);
    if (i) sb_puts(&shp, ", ");
    rc = leaf_shape(c, &shp, ts[i]);
  }
  sb_puts(&shp, ")");
  char base[32];
  snprintf(base, sizeof base, "tuple.gopt%u", ++c->synth);
  char *nm = rc ? NULL : unique_name(c, base, strlen(base));
  if (!rc && !nm) rc = gopt_error_set(c->x->err, GOPT_ENOMEM, "out of memory");
  if (!rc) {
    sb_printf(pre, "  %%%s = %s tuple(%s)\n", nm, shp.p ? shp.p : "()", parts.p ? parts.p : "");
    sb_printf(ref, "%%%s", nm);
  }
  free(parts.p);
  free(shp.p);
  return rc;
}

/* ---- literals ---------------------------------------------------------------------------------- */

static float f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) {
    if (m == 0) x = s;
    else {
      e = 127 - 15 + 1;
      while (!(m & 0x400)) { m <<= 1; e--; }
      x = s | (e << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31) {
    x = s | 0x7f800000 | (m << 13);
  } else {
    x = s | ((e + 127 - 15) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void put_num(sbuf *b, const void *d, size_t i, int dt) {
  double v = 0;
  switch (dt) {
  case GOPT_DT_BOOL: sb_puts(b, ((const uint8_t *)d)[i] ? "true" : "false"); return;
  case GOPT_DT_INT8: sb_printf(b, "%d", ((const int8_t *)d)[i]); return;
  case GOPT_DT_UINT8: sb_printf(b, "%u", ((const uint8_t *)d)[i]); return;
  case GOPT_DT_INT16: sb_printf(b, "%d", ((const int16_t *)d)[i]); return;
  case GOPT_DT_UINT16: sb_printf(b, "%u", ((const uint16_t *)d)[i]); return;
  case GOPT_DT_INT32: sb_printf(b, "%" PRId32, ((const int32_t *)d)[i]); return;
  case GOPT_DT_UINT32: sb_printf(b, "%" PRIu32, ((const uint32_t *)d)[i]); return;
  case GOPT_DT_INT64: sb_printf(b, "%" PRId64, ((const int64_t *)d)[i]); return;
  case GOPT_DT_UINT64: sb_printf(b, "%" PRIu64, ((const uint64_t *)d)[i]); return;
  case GOPT_DT_FLOAT: v = ((const float *)d)[i]; break;
  case GOPT_DT_DOUBLE: v = ((const double *)d)[i]; break;
  case GOPT_DT_FLOAT16: v = f16_to_f32(((const uint16_t *)d)[i]); break;
  case GOPT_DT_BFLOAT16: {
    uint32_t x = (uint32_t)((const uint16_t *)d)[i] << 16;
    float f;
    memcpy(&f, &x, 4);
    v = f;
    break;
  }
  default:
    if (!gopt_dtype_is_lowbit(dt)) {
      sb_puts(b, "0");
      return;
    }
    v = gopt_lowbit_to_double(dt, ((const uint8_t *)d)[i]);
    if (dt == GOPT_DT_INT4 || dt == GOPT_DT_UINT4 || dt == GOPT_DT_INT2 || dt == GOPT_DT_UINT2) {
      sb_printf(b, "%d", (int)v);
      return;
    }
    break;
  }
  if (isnan(v)) sb_puts(b, signbit(v) ? "-nan" : "nan");
  else if (isinf(v)) sb_puts(b, v < 0 ? "-inf" : "inf");
  else sb_printf(b, dt == GOPT_DT_DOUBLE ? "%.17g" : "%.9g", v);
}

/* Nested-brace literal of dims[k..] starting at element *i. */
static void put_lit(sbuf *b, const void *d, int dt, const int64_t *dims, int rank, int k, size_t *i) {
  if (k == rank) {
    put_num(b, d, (*i)++, dt);
    return;
  }
  sb_puts(b, "{");
  for (int64_t j = 0; j < dims[k]; j++) {
    if (j) sb_puts(b, ", ");
    put_lit(b, d, dt, dims, rank, k + 1, i);
  }
  sb_puts(b, "}");
}

static void const_literal(cx *c, sbuf *b, int32_t t) {
  const gopt_graph *g = c->g;
  const void *d = gopt_tensor_data(g, t);
  const gopt_tensor *x = &g->tensors.a[t];
  int64_t ne = gopt_tensor_numel(g, t);
  if (!d || (c->x->max_const && (size_t)ne > c->x->max_const) || !hlo_dtype_name(x->dtype) ||
      x->dtype == GOPT_DT_COMPLEX64 || x->dtype == GOPT_DT_COMPLEX128 ||
      g->consts.a[x->cdata].nbytes < (size_t)ne * gopt_dtype_size(x->dtype)) {
    if (d) c->x->n_elided++;
    sb_puts(b, "{...}");
    return;
  }
  size_t i = 0;
  put_lit(b, d, x->dtype, x->rank ? gopt_tensor_dims(g, t) : NULL, x->rank, 0, &i);
}

/* ---- kept properties ------------------------------------------------------------------------------ */

/* Leaves of sh in order against tensors ts[*i..n): same element types and dims. */
static int leaves_fit(const gopt_graph *g, const hlo_shape *sh, const int32_t *ts, size_t n, size_t *i) {
  if (sh->tuple) {
    for (int e = 0; e < sh->n; e++)
      if (!leaves_fit(g, &sh->elems[e], ts, n, i)) return 0;
    return 1;
  }
  if (*i >= n) return 0;
  const gopt_tensor *x = &g->tensors.a[ts[*i]];
  (*i)++;
  return x->dtype == sh->dtype && x->rank == sh->rank &&
         (x->rank == 0 || !memcmp(gopt_tensor_dims(g, ts[*i - 1]), sh->dims, sizeof(int64_t) * (size_t)x->rank));
}

/* 1 when an entry_computation_layout value "{(PARAMS)->RESULT}" still describes g's inputs and
 * outputs (a pass or another front end may have changed them). */
static int layout_fits(const gopt_graph *g, const char *val) {
  hlo_module m = {0};
  hlo_shape ps, rs;
  const char *e;
  size_t i = 0, j = 0;
  int ok = *val == '{' && !hlo_parse_shape_str(&m, val + 1, &ps, &e) && ps.tuple;
  while (ok && (*e == ' ')) e++;
  ok = ok && e[0] == '-' && e[1] == '>' && !hlo_parse_shape_str(&m, e + 2, &rs, &e);
  ok = ok && leaves_fit(g, &ps, g->inputs.a, g->inputs.n, &i) && i == g->inputs.n;
  ok = ok && leaves_fit(g, &rs, g->outputs.a, g->outputs.n, &j) && j == g->outputs.n;
  hlo_module_free(&m);
  return ok;
}

/* Writes ", KEY=VALUE" for each property "PREFIXKEY" of g (an entry_computation_layout only when
 * it still fits entry). */
static void put_props(sbuf *b, const gopt_graph *g, const char *prefix, const gopt_graph *entry) {
  size_t pl = strlen(prefix);
  for (size_t i = 0; i < g->props.n; i++) {
    const char *k = gopt_graph_str(g, g->props.a[i].key), *v = gopt_graph_str(g, g->props.a[i].val);
    if (strncmp(k, prefix, pl) || !k[pl]) continue;
    if (entry && !strcmp(k + pl, "entry_computation_layout") && !layout_fits(entry, v)) {
      gopt_warn("HLO export: entry_computation_layout left out (the entry's signature changed)");
      continue;
    }
    sb_printf(b, ", %s=%s", k + pl, v);
  }
}

/* The header line and tables of the module g was imported from (properties "hlo.*"), else
 * "HloModule NAME". */
static void module_head(sbuf *b, const gopt_graph *g) {
  const char *nm = gopt_graph_get_prop(g, "hlo.module");
  if (!nm || !*nm) nm = *gopt_graph_str(g, g->name) ? gopt_graph_str(g, g->name) : "gopt";
  sb_puts(b, "HloModule ");
  for (const char *p = nm; *p; p++) sb_add(b, valid_name_ch(*p) ? p : "_", 1);
  put_props(b, g, "hlo.module_attr.", g);
  sb_puts(b, "\n\n");
  for (size_t i = 0; i < g->props.n; i++) {
    const char *k = gopt_graph_str(g, g->props.a[i].key), *v = gopt_graph_str(g, g->props.a[i].val);
    if (strncmp(k, "hlo.table.", 10) || !k[10]) continue;
    sb_printf(b, "%s\n%s%s\n", k + 10, v, *v ? "\n" : "");
  }
}

/* Property PREFIX+NAME of g, NULL when none. */
static const char *name_prop(const gopt_graph *g, const char *prefix, const char *name) {
  if (!g->props.n) return NULL;
  size_t n = strlen(prefix) + strlen(name) + 1;
  char *key = malloc(n);
  if (!key) return NULL;
  snprintf(key, n, "%s%s", prefix, name);
  const char *v = gopt_graph_get_prop(g, key);
  free(key);
  return v;
}

/* v's shape: the text it was imported with (kept for its layouts) when that still fits v's
 * leaves, else the shape gopt derives. */
static int kept_shape(cx *c, sbuf *b, const val *v) {
  const char *t = name_prop(c->g, "hlo.shape.", v->name);
  if (t) {
    hlo_module m = {0};
    hlo_shape sh;
    const char *e;
    size_t i = 0;
    int ok = !hlo_parse_shape_str(&m, t, &sh, &e) && !*e && leaves_fit(c->g, &sh, v->leaves, (size_t)v->n, &i) &&
             i == (size_t)v->n && (sh.tuple || v->plen[0] == 0);
    hlo_module_free(&m);
    if (ok) {
      sb_puts(b, t);
      return 0;
    }
  }
  return val_shape(c, b, v);
}

/* ---- instructions ------------------------------------------------------------------------------- */

static int emit_comp(ex *x, const gopt_graph *g, const char *name, int entry);

/* Name under which computation sub is (or gets) written: equal content shares a name. */
static int comp_name(ex *x, const gopt_graph *sub, char **out) {
  uint64_t h = gopt_graph_hash(sub);
  const char *nm0 = gopt_graph_str(sub, sub->name);
  size_t l0 = strlen(nm0);
  char *nm = malloc(l0 + 32);
  if (!nm) return gopt_error_set(x->err, GOPT_ENOMEM, "out of memory");
  for (size_t i = 0; i < l0; i++) nm[i] = valid_name_ch(nm0[i]) ? nm0[i] : '_';
  if (l0 == 0) nm[l0++] = 'c';
  nm[l0] = 0;
  for (unsigned k = 1;; k++) {
    size_t i = 0;
    while (i < x->comps.n && strcmp(x->comps.a[i].name, nm)) i++;
    if (i == x->comps.n) break;
    if (x->comps.a[i].hash == h) {
      free(nm);
      *out = x->comps.a[i].name;
      return 0;
    }
    snprintf(nm + l0, 32, ".g%u", k);
  }
  emitted e = {nm, h};
  if (GOPT_ARR_PUSH(x->comps, e)) {
    free(nm);
    return gopt_error_set(x->err, GOPT_ENOMEM, "out of memory");
  }
  *out = nm;
  return emit_comp(x, sub, nm, 0);
}


/* Attributes of an hlo:: node as HLO writes them. */
static void hlo_attrs(cx *c, sbuf *b, int32_t n) {
  const gopt_graph *g = c->g;
  const gopt_node *nd = &g->nodes.a[n];
  for (uint16_t i = 0; i < nd->n_attr; i++) {
    uint32_t ai = nd->attr + i;
    const gopt_attr *a = &g->attrs.a[ai];
    const char *k = gopt_graph_str(g, a->name);
    if (hlo_attr_reserved(k)) continue;
    if (a->kind == GOPT_ATTR_GRAPH) {
      const char *dot = strrchr(k, '.');
      if (!dot) {
        sb_printf(b, ", %s=%%%s", k, c->comp_of_attr[ai]);
        continue;
      }
      if (strcmp(dot, ".0")) continue; /* written with its list */
      size_t pl = (size_t)(dot - k);
      sb_printf(b, ", %.*s={", (int)pl, k);
      for (uint16_t j = 0, first = 1; j < nd->n_attr; j++) {
        const gopt_attr *aj = &g->attrs.a[nd->attr + j];
        const char *kj = gopt_graph_str(g, aj->name);
        if (aj->kind != GOPT_ATTR_GRAPH || strncmp(kj, k, pl + 1)) continue;
        sb_printf(b, "%s%%%s", first ? "" : ", ", c->comp_of_attr[nd->attr + j]);
        first = 0;
      }
      sb_puts(b, "}");
      continue;
    }
    switch (a->kind) {
    case GOPT_ATTR_INT: sb_printf(b, ", %s=%" PRId64, k, a->v.i); break;
    case GOPT_ATTR_FLOAT: sb_printf(b, ", %s=%.9g", k, a->v.f); break;
    case GOPT_ATTR_STRING: sb_printf(b, ", %s=%s", k, gopt_graph_str(g, a->v.s)); break;
    case GOPT_ATTR_INTS:
      sb_printf(b, ", %s={", k);
      for (uint32_t j = 0; j < a->n; j++) sb_printf(b, "%s%" PRId64, j ? "," : "", g->ints.a[a->v.off + j]);
      sb_puts(b, "}");
      break;
    default: break; /* the importer makes no other kinds */
    }
  }
}

/* backend_config of a gopt.TYPE custom-call: the node's attributes and omitted inputs. */
static void gopt_config(cx *c, sbuf *b, int32_t n, sbuf *called) {
  const gopt_graph *g = c->g;
  const gopt_node *nd = &g->nodes.a[n];
  int first = 1, ncalled = 0;
  sb_puts(b, ", backend_config=\"");
  for (int i = 0; i < nd->n_in; i++)
    if (gopt_node_input(g, n, i) < 0) {
      sb_printf(b, "%s%d", first ? "O:=" : ",", i);
      first = 0;
    }
  if (nd->flags & (GOPT_N_GRAD | GOPT_N_UPDATE)) {
    sb_printf(b, "%sN:=%d", first ? "" : ";", nd->flags & (GOPT_N_GRAD | GOPT_N_UPDATE));
    first = 0;
  }
  for (uint16_t i = 0; i < nd->n_attr; i++) {
    const gopt_attr *a = &g->attrs.a[nd->attr + i];
    static const char kinds[] = "?ifsIFStg";
    if (!first) sb_puts(b, ";");
    first = 0;
    sb_printf(b, "%c:", a->kind < sizeof kinds - 1 ? kinds[a->kind] : '?');
    sb_pct(b, gopt_graph_str(g, a->name));
    sb_puts(b, "=");
    switch (a->kind) {
    case GOPT_ATTR_INT: sb_printf(b, "%" PRId64, a->v.i); break;
    case GOPT_ATTR_FLOAT: sb_printf(b, "%.17g", a->v.f); break;
    case GOPT_ATTR_STRING: sb_pct(b, gopt_graph_str(g, a->v.s)); break;
    case GOPT_ATTR_INTS:
      for (uint32_t j = 0; j < a->n; j++) sb_printf(b, "%s%" PRId64, j ? "," : "", g->ints.a[a->v.off + j]);
      break;
    case GOPT_ATTR_FLOATS:
      for (uint32_t j = 0; j < a->n; j++) sb_printf(b, "%s%.9g", j ? "," : "", (double)g->floats.a[a->v.off + j]);
      break;
    case GOPT_ATTR_STRINGS:
      for (uint32_t j = 0; j < a->n; j++) {
        if (j) sb_puts(b, ",");
        sb_pct(b, gopt_graph_str(g, g->strids.a[a->v.off + j]));
      }
      break;
    case GOPT_ATTR_TENSOR: {
      int32_t t = a->v.tensor;
      const gopt_tensor *x = &g->tensors.a[t];
      sb_printf(b, "%d/", x->dtype);
      for (int j = 0; j < x->rank; j++) sb_printf(b, "%s%" PRId64, j ? "," : "", gopt_tensor_dims(g, t)[j]);
      const unsigned char *d = gopt_tensor_data(g, t);
      sb_puts(b, "/");
      if (!d) sb_puts(b, "-");
      for (size_t j = 0; d && j < g->consts.a[x->cdata].nbytes; j++) sb_printf(b, "%02x", d[j]);
      break;
    }
    case GOPT_ATTR_GRAPH:
      sb_printf(b, "%d", ncalled);
      sb_printf(called, "%s%%%s", ncalled ? ", " : "", c->comp_of_attr[nd->attr + i]);
      ncalled++;
      break;
    default: break;
    }
  }
  sb_puts(b, "\"");
}

static int node_line(cx *c, int32_t n, int root) {
  const gopt_graph *g = c->g;
  const gopt_node *nd = &g->nodes.a[n];
  const char *type = gopt_node_type(g, n);
  int hlo = !strncmp(type, "hlo::", 5);
  sbuf pre = {0}, ops = {0}, line = {0}, called = {0};
  int rc = 0;
  size_t nc = 0;
  const int64_t *cnt = hlo ? gopt_node_get_ints(g, n, "hlo.operands", &nc) : NULL;
  int64_t sum = 0;
  for (size_t i = 0; cnt && i < nc; i++) sum += cnt[i] > 0 ? cnt[i] : 1;
  if (cnt && sum != nd->n_in) cnt = NULL;
  int32_t *in = malloc(sizeof *in * ((size_t)nd->n_in + 1));
  if (!in) return gopt_error_set(c->x->err, GOPT_ENOMEM, "out of memory");
  int k = 0;
  for (int i = 0; i < nd->n_in; i++)
    if (gopt_node_input(g, n, i) >= 0) in[k++] = gopt_node_input(g, n, i);
  for (int i = 0, j = 0; i < k && !rc; j++) {
    int m = cnt ? (cnt[j] > 0 ? (int)cnt[j] : 1) : 1;
    if (i) sb_puts(&ops, ", ");
    rc = group_ref(c, &pre, &ops, in + i, m, cnt && cnt[j] > 0);
    i += m;
  }
  free(in);
  int32_t vi = c->node_val[n];
  if (!rc) {
    sb_printf(&line, "  %s%%%s = ", root ? "ROOT " : "", c->v[vi].name);
    rc = kept_shape(c, &line, &c->v[vi]);
  }
  if (!rc && hlo) {
    const char *lit = strcmp(type, "hlo::constant") ? NULL : gopt_node_get_string(g, n, "hlo.literal", NULL);
    sb_printf(&line, " %s(%s)", type + 5, lit ? lit : ops.p ? ops.p : ""); /* a tuple constant's literal */
    hlo_attrs(c, &line, n);
  } else if (!rc) {
    sb_printf(&line, " custom-call(%s), custom_call_target=\"gopt.", ops.p ? ops.p : "");
    sb_pct(&line, type);
    sb_puts(&line, "\"");
    gopt_config(c, &line, n, &called);
    if (called.p) sb_printf(&line, ", called_computations={%s}", called.p);
  }
  if (!rc) {
    if (pre.p) sb_puts(&c->x->out, pre.p);
    if (line.p) sb_puts(&c->x->out, line.p);
    sb_puts(&c->x->out, "\n");
  }
  free(pre.p);
  free(ops.p);
  free(line.p);
  free(called.p);
  return rc;
}

/* ---- computations --------------------------------------------------------------------------------- */

static void cx_free(cx *c) {
  for (size_t i = 0; i < c->nv; i++) {
    free(c->v[i].path);
    free(c->v[i].plen);
  }
  free(c->v);
  free(c->tval);
  free(c->tleaf);
  free(c->node_val);
  for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
  free(c->owned);
  free(c->comp_of_attr);
  onnx_map_free(&c->names);
}

/* Values: parameters (consecutive inputs sharing a base name), constants, live nodes. */
static int build_values(cx *c, int32_t *order, int64_t cnt, int32_t *const_ids) {
  const gopt_graph *g = c->g;
  int rc = 0;
  for (size_t i = 0; i < g->inputs.n && !rc;) {
    const char *nm = gopt_graph_str(g, g->tensors.a[g->inputs.a[i]].name);
    size_t bl = base_len(nm), j = i + 1;
    while (strchr(nm, '#') && j < g->inputs.n) {
      const char *nj = gopt_graph_str(g, g->tensors.a[g->inputs.a[j]].name);
      if (base_len(nj) != bl || strncmp(nj, nm, bl) || !strchr(nj, '#')) break;
      j++;
    }
    rc = add_val(c, g->inputs.a + i, (int32_t)(j - i), nm, bl);
    i = j;
  }
  c->n_params = c->nv;
  size_t nc = 0;
  for (size_t t = 0; t < g->tensors.n && !rc; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_CONST) || (x->flags & (GOPT_T_ATTR | GOPT_T_INPUT)) || x->producer >= 0) continue;
    const_ids[nc] = (int32_t)t;
    const char *nm = gopt_graph_str(g, x->name);
    rc = add_val(c, const_ids + nc, 1, nm, strlen(nm));
    nc++;
  }
  for (int64_t k = 0; k < cnt && !rc; k++) {
    int32_t n = order[k];
    size_t bl;
    const char *base = node_base(g, n, &bl);
    c->node_val[n] = (int32_t)c->nv;
    rc = add_val(c, g->outs.a + g->nodes.a[n].out, g->nodes.a[n].n_out, base, bl);
  }
  return rc;
}

/* The root instruction when the outputs o[0..k) are one element of a tuple value (group_ref
 * wrote "x#i" and no instruction): a get-tuple-element of its parent, written to pre. */
static int root_elem(cx *c, sbuf *pre, const int32_t *o, int k) {
  int32_t vi = c->tval[o[0]], p = c->tleaf[o[0]];
  const val *v = &c->v[vi];
  int pl = k == 1 ? v->plen[p] : subtree_prefix(v, p, k, 1);
  if (pl < 1) return gopt_error_set(c->x->err, GOPT_EUNSUP, "computation '%s': no root value", gopt_graph_str(c->g, c->g->name));
  char base[40];
  snprintf(base, sizeof base, "get-tuple-element.gopt%u", ++c->synth);
  char *nm = unique_name(c, base, strlen(base));
  if (!nm) return gopt_error_set(c->x->err, GOPT_ENOMEM, "out of memory");
  sb_printf(pre, "  %%%s = ", nm);
  int rc = tree_shape(c, pre, v, p, p + k, pl);
  sb_puts(pre, " get-tuple-element(");
  elem_ref(c, pre, vi, v->path[p], pl - 1);
  sb_printf(pre, "), index=%d\n", v->path[p][pl - 1]);
  return rc;
}

static int emit_comp(ex *x, const gopt_graph *g, const char *name, int entry) {
  cx c = {0};
  int rc = 0;
  c.x = x;
  c.g = g;
  size_t nn = g->nodes.n, nt = g->tensors.n;
  int32_t *order = malloc((nn + 1) * sizeof *order), *const_ids = malloc((nt + 1) * sizeof *const_ids);
  c.v = calloc(nn + nt + g->inputs.n + 1, sizeof *c.v);
  c.tval = malloc((nt + 1) * sizeof *c.tval);
  c.tleaf = malloc((nt + 1) * sizeof *c.tleaf);
  c.node_val = calloc(nn + 1, sizeof *c.node_val);
  c.comp_of_attr = calloc(g->attrs.n + 1, sizeof *c.comp_of_attr);
  sbuf sig = {0}, root = {0};
  if (!order || !const_ids || !c.v || !c.tval || !c.tleaf || !c.node_val || !c.comp_of_attr) {
    rc = gopt_error_set(x->err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t t = 0; t < nt; t++) c.tval[t] = c.tleaf[t] = -1;
  gopt_error e2 = {0};
  int64_t cnt = gopt_graph_topo_stable(g, order, &e2);
  if (cnt < 0) {
    rc = gopt_error_set(x->err, (int)cnt, "computation '%s': %s", name, e2.msg);
    goto done;
  }
  for (int64_t k = 0; k < cnt && !rc; k++) { /* callees first */
    const gopt_node *nd = &g->nodes.a[order[k]];
    for (uint16_t i = 0; i < nd->n_attr && !rc; i++) {
      const gopt_attr *a = &g->attrs.a[nd->attr + i];
      if (a->kind == GOPT_ATTR_GRAPH && a->v.graph >= 0)
        rc = comp_name(x, g->subgraphs.a[a->v.graph], &c.comp_of_attr[nd->attr + i]);
    }
  }
  if (rc || (rc = build_values(&c, order, cnt, const_ids))) goto done;
  char ename[300];
  if (entry) { /* the entry's name must not be one of its callees' */
    snprintf(ename, sizeof ename, "%.280s", name);
    for (char *q = ename; *q; q++)
      if (!valid_name_ch(*q)) *q = '_';
    for (unsigned u = 1;; u++) {
      size_t i = 0;
      while (i < x->comps.n && strcmp(x->comps.a[i].name, ename)) i++;
      if (i == x->comps.n) break;
      snprintf(ename + strlen(ename), 16, ".e%u", u);
    }
    name = ename;
  }
  /* root: one whole value, else get-tuple-element / tuple instructions written last */
  int32_t rv = -1;
  const int32_t *o = g->outputs.a;
  int k = (int)g->outputs.n;
  if (k > 0 && c.tval[o[0]] >= 0 && c.v[c.tval[o[0]]].n == k) {
    rv = c.tval[o[0]];
    for (int i = 0; i < k && rv >= 0; i++)
      if (c.tval[o[i]] != rv || c.tleaf[o[i]] != i) rv = -1;
  }
  /* no outputs: the computation returns (); an instruction of that type, the last such, is the
   * root itself (no new empty tuple, so a re-import has the same instructions) */
  for (int64_t j = cnt - 1; k == 0 && rv < 0 && j >= 0; j--)
    if (c.node_val[order[j]] >= 0 && c.v[c.node_val[order[j]]].n == 0) rv = c.node_val[order[j]];
  sbuf rpre = {0}, rref = {0};
  if (rv < 0) rc = group_ref(&c, &rpre, &rref, o, k, k != 1);
  int relem = !rc && rv < 0 && !rpre.p;
  if (relem) rc = root_elem(&c, &rpre, o, k);
  if (!rc) rc = rv >= 0 ? val_shape(&c, &root, &c.v[rv]) : 0;
  if (!rc && relem) { /* the root's shape: the text after "= " up to " get-tuple-element(" */
    const char *s0 = strstr(rpre.p, " = ") + 3, *s1 = strstr(s0, " get-tuple-element(");
    sb_add(&root, s0, (size_t)(s1 - s0));
  } else if (!rc && rv < 0) {
    if (k == 1) rc = leaf_shape(&c, &root, o[0]);
    else {
      sb_puts(&root, "(");
      for (int i = 0; i < k && !rc; i++) {
        if (i) sb_puts(&root, ", ");
        rc = leaf_shape(&c, &root, o[i]);
      }
      sb_puts(&root, ")");
    }
  }
  size_t np = c.n_params;
  for (size_t i = 0; i < np && !rc; i++) {
    sb_printf(&sig, "%s%s: ", i ? ", " : "", c.v[i].name);
    rc = val_shape(&c, &sig, &c.v[i]);
  }
  if (!rc) {
    sb_printf(&x->out, "%s%%%s (%s) -> %s {\n", entry ? "ENTRY " : "", name, sig.p ? sig.p : "", root.p ? root.p : "()");
    for (size_t i = 0; i < c.nv && !rc; i++) {
      const val *v = &c.v[i];
      if (i >= np && (v->n != 1 || g->tensors.a[v->leaves[0]].producer >= 0)) break; /* nodes */
      sb_printf(&x->out, "  %s%%%s = ", (int32_t)i == rv ? "ROOT " : "", v->name);
      rc = kept_shape(&c, &x->out, v);
      if (i < np) sb_printf(&x->out, " parameter(%zu)", i);
      else {
        sb_puts(&x->out, " constant(");
        const_literal(&c, &x->out, v->leaves[0]);
        sb_puts(&x->out, ")");
      }
      const char *kept = name_prop(g, "hlo.attrs.", v->name);
      sb_printf(&x->out, "%s\n", kept ? kept : "");
    }
    for (int64_t j = 0; j < cnt && !rc; j++) rc = node_line(&c, order[j], c.node_val[order[j]] == rv);
  }
  if (!rc && rv < 0) {
    char *last = rpre.p ? rpre.p + rpre.n - 1 : NULL; /* the last helper instruction is the root */
    while (last && last > rpre.p && last[-1] != '\n') last--;
    if (last) {
      sb_add(&x->out, rpre.p, (size_t)(last - rpre.p));
      sb_puts(&x->out, "  ROOT ");
      sb_puts(&x->out, last + 2);
    } else {
      rc = gopt_error_set(x->err, GOPT_EUNSUP, "computation '%s': no output", name);
    }
  }
  if (!rc) {
    sb_puts(&x->out, "}");
    put_props(&x->out, g, "hlo.comp_attr.", NULL);
    sb_puts(&x->out, "\n\n");
  }
  free(rpre.p);
  free(rref.p);
done:
  free(order);
  free(const_ids);
  free(sig.p);
  free(root.p);
  cx_free(&c);
  return rc;
}

int gopt_hlo_save_mem(const gopt_graph *g, char **text, size_t *len, gopt_error *err) {
  ex x = {0};
  int rc;
  if (text) *text = NULL;
  if (!g || !text) return gopt_error_set(err, GOPT_EINVAL, "gopt_hlo_save_mem: bad arguments");
  x.err = err;
  x.max_const = (size_t)1 << 16;
  const char *nm = gopt_graph_str(g, g->name);
  sbuf head = {0};
  module_head(&head, g);
  rc = emit_comp(&x, g, *nm ? nm : "main", 1);
  if (!rc && (x.out.oom || head.oom)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (!rc) {
    sb_add(&head, x.out.p, x.out.n);
    if (head.oom) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  if (!rc && x.n_elided)
    gopt_warn("HLO export: %zu constant(s) larger than %zu elements written elided ({...})", x.n_elided,
              x.max_const);
  for (size_t i = 0; i < x.comps.n; i++) free(x.comps.a[i].name);
  GOPT_ARR_FREE(x.comps);
  free(x.out.p);
  if (rc) {
    free(head.p);
    return rc;
  }
  *text = head.p;
  if (len) *len = head.n;
  return 0;
}

int gopt_hlo_save(const gopt_graph *g, const char *path, gopt_error *err) {
  char *text = NULL;
  size_t len = 0;
  int rc = gopt_hlo_save_mem(g, &text, &len, err);
  if (!rc) rc = gopt_file_write_atomic(path, text, len, err);
  free(text);
  return rc;
}
