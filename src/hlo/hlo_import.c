/* hlo_import.c: HLO syntax tree -> graph IR (see gopt/hlo.h for the representation). Each
 * computation becomes a gopt_graph: parameters are inputs in parameter order, constants are
 * constant tensors, every other instruction a node "hlo::OPCODE" with its attributes (computation
 * references as sub-graph attributes, one copy per call site); tuple-shaped values are flattened
 * into leaf tensors NAME#i#j. The nodes get their gopt op kind from ops_hlo.c; where the kind's
 * shape rule applies, shape inference re-derives every output and must agree with the text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/hlo.h"
#include "gopt/ops.h"
#include "gopt/util.h"
#include "hlo/hlo_internal.h"
#include "ir/ir_internal.h"
#include "onnx/onnx_internal.h"
#include "ops/ops_hlo.h"

/* Largest constant gopt materialises (bytes); larger literals keep their shape without bytes. */
#define HLO_MAX_CONST_BYTES ((size_t)1 << 28)

typedef struct imp {
  hlo_module *m;
  gopt_error *err;
  gopt_graph **graphs; /* per computation, built in text order */
  unsigned char *used; /* per computation: called from somewhere */
  onnx_map comps;      /* computation name -> index */
} imp;

/* Per-computation state. */
typedef struct cimp {
  imp *im;
  const hlo_comp *c;
  gopt_graph *g;
  onnx_map names;      /* instruction name -> index */
  int32_t *leaf_off, *leaf_n;
  GOPT_ARRAY(int32_t) leaves;
  int32_t *node_line;  /* per node id: instruction index (for messages) */
} cimp;

static int at(const imp *im, int line, int col, int code, const char *fmt, const char *a,
              const char *b) {
  char msg[1200];
  snprintf(msg, sizeof msg, fmt, a, b);
  return gopt_error_set(im->err, code, "%s:%d:%d: %s", im->m->label, line, col, msg);
}

/* ---- leaves ------------------------------------------------------------------------------- */

/* Creates the leaf tensors of shape sh named base (array) or base#i#j... (tuple elements), and
 * appends their ids to ci->leaves. */
static int make_leaves(cimp *ci, const hlo_shape *sh, char *name, size_t len, size_t cap,
                       const hlo_instr *in) {
  if (sh->tuple) {
    for (int i = 0; i < sh->n; i++) {
      int w = snprintf(name + len, cap - len, "#%d", i);
      if (w < 0 || (size_t)w >= cap - len)
        return at(ci->im, in->line, in->col, GOPT_EUNSUP, "instruction '%s': tuple nesting too deep%s",
                  in->name, "");
      int rc = make_leaves(ci, &sh->elems[i], name, len + (size_t)w, cap, in);
      if (rc) return rc;
    }
    name[len] = 0;
    return 0;
  }
  name[len] = 0;
  gopt_error e2 = {0};
  int32_t t = gopt_graph_add_tensor(ci->g, name, sh->dtype, sh->rank, sh->dims, &e2);
  if (t < 0)
    return at(ci->im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': %s", in->name, e2.msg);
  if (GOPT_ARR_PUSH(ci->leaves, t)) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  return 0;
}

static int instr_leaves(cimp *ci, int i) {
  const hlo_instr *in = &ci->c->ins[i];
  size_t len = strlen(in->name), cap = len + 256;
  char *name = malloc(cap);
  if (!name) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  memcpy(name, in->name, len + 1);
  ci->leaf_off[i] = (int32_t)ci->leaves.n;
  int rc = make_leaves(ci, &in->shape, name, len, cap, in);
  ci->leaf_n[i] = (int32_t)ci->leaves.n - ci->leaf_off[i];
  free(name);
  return rc;
}

/* ---- constants ------------------------------------------------------------------------------ */

static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  int ee = (int)e - 127 + 15;
  if (ee >= 31) return (uint16_t)(sign | 0x7c00);
  if (ee <= 0) {
    if (ee < -10) return (uint16_t)sign;
    m |= 0x800000;
    return (uint16_t)(sign | ((m >> (14 - ee)) + ((m >> (13 - ee)) & 1)));
  }
  uint32_t h = sign | ((uint32_t)ee << 10) | (m >> 13);
  if (m & 0x1000) h++; /* round half up (ties are rare in literals) */
  return (uint16_t)h;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static int is_int_dt(int dt) {
  return dt == GOPT_DT_BOOL || dt == GOPT_DT_INT8 || dt == GOPT_DT_UINT8 || dt == GOPT_DT_INT16 ||
         dt == GOPT_DT_UINT16 || dt == GOPT_DT_INT32 || dt == GOPT_DT_UINT32 || dt == GOPT_DT_INT64 ||
         dt == GOPT_DT_UINT64 || dt == GOPT_DT_INT4 || dt == GOPT_DT_UINT4 || dt == GOPT_DT_INT2 || dt == GOPT_DT_UINT2;
}

static void store(void *buf, size_t i, int dt, double v, int64_t iv, int is_int) {
  switch (dt) {
  case GOPT_DT_FLOAT: ((float *)buf)[i] = (float)v; break;
  case GOPT_DT_DOUBLE: ((double *)buf)[i] = v; break;
  case GOPT_DT_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)v); break;
  case GOPT_DT_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
  case GOPT_DT_BOOL: ((uint8_t *)buf)[i] = is_int ? iv != 0 : v != 0; break;
  case GOPT_DT_INT8: ((int8_t *)buf)[i] = (int8_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_INT16: ((int16_t *)buf)[i] = (int16_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_UINT16: ((uint16_t *)buf)[i] = (uint16_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_INT32: ((int32_t *)buf)[i] = (int32_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)(is_int ? iv : (int64_t)v); break;
  case GOPT_DT_INT64: ((int64_t *)buf)[i] = is_int ? iv : (int64_t)v; break;
  case GOPT_DT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)(is_int ? iv : (int64_t)v); break;
  default: /* the 8-, 4- and 2-bit types, one element per byte */
    if (gopt_dtype_is_lowbit(dt)) ((uint8_t *)buf)[i] = gopt_lowbit_from_double(dt, is_int ? (double)iv : v, 0, "nearest");
    break;
  }
}

/* Decodes literal text into *data (malloc'd; NULL when elided, complex or too large). */
static int parse_literal_data(const imp *im, const hlo_instr *in, int32_t t, const gopt_graph *g,
                              void **data, size_t *nbytes) {
  *data = NULL;
  *nbytes = 0;
  int dt = in->shape.dtype;
  size_t es = gopt_dtype_size(dt);
  if (strstr(in->literal, "...") || es == 0 || dt == GOPT_DT_COMPLEX64 || dt == GOPT_DT_COMPLEX128)
    return 0;
  double ne = 1;
  for (int k = 0; k < in->shape.rank; k++) ne *= (double)in->shape.dims[k];
  if (ne * (double)es > (double)HLO_MAX_CONST_BYTES) return 0;
  size_t n = (size_t)ne, i = 0;
  void *buf = malloc(n * es + 1);
  if (!buf) return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory for constant '%s'", in->name);
  for (const char *p = in->literal; *p;) {
    if (*p == '{' || *p == '}' || *p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
      p++;
      continue;
    }
    double v = 0;
    int64_t iv = 0;
    int is_int = 0;
    const char *q = p;
    if (!strncmp(p, "true", 4)) { iv = 1; is_int = 1; q = p + 4; }
    else if (!strncmp(p, "false", 5)) { is_int = 1; q = p + 5; }
    else if (!strncmp(p, "-nan", 4)) { v = -NAN; q = p + 4; }
    else if (!strncmp(p, "nan", 3)) { v = NAN; q = p + 3; }
    else if (!strncmp(p, "-inf", 4)) { v = -INFINITY; q = p + 4; }
    else if (!strncmp(p, "inf", 3)) { v = INFINITY; q = p + 3; }
    else {
      char *e1 = NULL, *e2 = NULL;
      if (is_int_dt(dt)) {
        if (*p == '-') iv = strtoll(p, &e1, 10);
        else iv = (int64_t)strtoull(p, &e1, 10);
        is_int = 1;
        q = e1;
        if (q && (*q == '.' || *q == 'e' || *q == 'E')) { v = strtod(p, &e2); is_int = 0; q = e2; }
      } else {
        v = strtod(p, &e2);
        q = e2;
      }
    }
    if (!q || q == p) {
      free(buf);
      return at(im, in->line, in->col, GOPT_EPARSE, "constant '%s': cannot read the literal near '%.12s'",
                in->name, p);
    }
    if (i >= n) {
      free(buf);
      return at(im, in->line, in->col, GOPT_EPARSE, "constant '%s': more values than its shape %s",
                in->name, "holds");
    }
    if (!is_int && is_int_dt(dt) && !(fabs(v) < 9.2e18)) { /* nan, inf, beyond int64 */
      free(buf);
      return at(im, in->line, in->col, GOPT_EPARSE, "constant '%s': %.12s is not a value of its integer type",
                in->name, p);
    }
    store(buf, i++, dt, v, iv, is_int);
    while (*q && (*q == ':' || (*q >= 'a' && *q <= 'z'))) q++; /* sparse / suffixes */
    p = q;
  }
  if (i != n) {
    free(buf);
    return at(im, in->line, in->col, GOPT_EPARSE, "constant '%s': fewer values than its shape %s",
              in->name, "holds");
  }
  (void)t;
  (void)g;
  *data = buf;
  *nbytes = n * es;
  return 0;
}

/* ---- attributes ------------------------------------------------------------------------------- */

/* "{1, 2,3}" / "{}" into v (at most max); returns the count, -1 when not such a list. */
static int parse_int_list(const char *s, int64_t *v, int max) {
  int n = 0;
  while (*s == ' ') s++;
  if (*s++ != '{') return -1;
  for (;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == '}') return s[1] == 0 ? n : -1;
    char *e = NULL;
    long long x = strtoll(s, &e, 10);
    if (e == s || n >= max) return -1;
    v[n++] = x;
    s = e;
  }
}

/* Graph of computation `name` (with or without '%') cloned for a call site; NULL with err set. */
static gopt_graph *called_graph(cimp *ci, const hlo_attr *a, const char *name, size_t len) {
  imp *im = ci->im;
  char buf[512];
  while (len && (*name == ' ' || *name == '%')) name++, len--;
  while (len && name[len - 1] == ' ') len--;
  if (len == 0 || len >= sizeof buf) {
    at(im, a->line, a->col, GOPT_EPARSE, "attribute '%s': bad computation name%s", a->key, "");
    return NULL;
  }
  memcpy(buf, name, len);
  buf[len] = 0;
  int64_t k = onnx_map_get(&im->comps, buf);
  if (k < 0 || !im->graphs[k]) {
    at(im, a->line, a->col, GOPT_EGRAPH,
       k < 0 ? "attribute '%s': no computation named '%s'"
             : "attribute '%s': computation '%s' is used before it is defined",
       a->key, buf);
    return NULL;
  }
  im->used[k] = 1;
  gopt_graph *s = gopt_graph_clone(im->graphs[k]);
  if (!s) gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  if (s) s->parent = ci->g;
  return s;
}

static int attach(cimp *ci, int32_t n, const char *key, gopt_graph *s) {
  if (!s) return ci->im->err->code ? ci->im->err->code : GOPT_ENOMEM;
  if (gopt_node_set_graph(ci->g, n, key, s)) {
    gopt_graph_free(s);
    return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  }
  return 0;
}

static int set_attr(cimp *ci, int32_t n, const hlo_instr *in, const hlo_attr *a) {
  gopt_graph *g = ci->g;
  int rc = 0;
  if (hlo_attr_reserved(a->key))
    return at(ci->im, a->line, a->col, GOPT_EPARSE, "attribute '%s' is not an HLO attribute%s", a->key, "");
  if (hlo_is_comp_attr(a->key)) return attach(ci, n, a->key, called_graph(ci, a, a->val, strlen(a->val)));
  if (hlo_is_comp_list_attr(a->key)) {
    const char *s = a->val;
    if (*s != '{') return at(ci->im, a->line, a->col, GOPT_EPARSE, "attribute '%s': expected {...}%s", a->key, "");
    s++;
    for (int k = 0;; k++) {
      const char *e = s;
      while (*e && *e != ',' && *e != '}') e++;
      if (e > s) {
        char key[96];
        snprintf(key, sizeof key, "%s.%d", a->key, k);
        if ((rc = attach(ci, n, key, called_graph(ci, a, s, (size_t)(e - s))))) return rc;
      }
      if (*e != ',') break;
      s = e + 1;
    }
    return 0;
  }
  if (hlo_is_ints_attr(a->key)) {
    int64_t v[GOPT_MAX_RANK * 4];
    int cnt = parse_int_list(a->val, v, GOPT_MAX_RANK * 4);
    if (cnt < 0)
      return at(ci->im, a->line, a->col, GOPT_EPARSE, "attribute '%s': expected {INT,...}, got '%.40s'",
                a->key, a->val);
    rc = gopt_node_set_ints(g, n, a->key, v, (size_t)cnt);
  } else if (hlo_is_int_attr(a->key)) {
    char *e = NULL;
    long long v = strtoll(a->val, &e, 10);
    if (!*a->val || *e)
      return at(ci->im, a->line, a->col, GOPT_EPARSE, "attribute '%s': expected an integer, got '%.40s'",
                a->key, a->val);
    rc = gopt_node_set_int(g, n, a->key, v);
  } else if (hlo_is_float_attr(a->key)) {
    char *e = NULL;
    double v = strtod(a->val, &e);
    if (!*a->val || *e)
      return at(ci->im, a->line, a->col, GOPT_EPARSE, "attribute '%s': expected a number, got '%.40s'",
                a->key, a->val);
    rc = gopt_node_set_float(g, n, a->key, v);
  } else {
    rc = gopt_node_set_string(g, n, a->key, a->val);
  }
  (void)in;
  return rc ? gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory") : 0;
}

/* ---- op kinds ----------------------------------------------------------------------------------- */

/* ---- gopt.TYPE custom-calls (nodes of other front ends, written by hlo_export.c) ------------ */

static int hexv(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decodes s[0..n) into a malloc'd string. */
static char *pct_dup(const char *s, size_t n) {
  char *o = malloc(n + 1), *q = o;
  if (!o) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && hexv(s[i + 1]) >= 0 && hexv(s[i + 2]) >= 0) {
      *q++ = (char)(hexv(s[i + 1]) * 16 + hexv(s[i + 2]));
      i += 2;
    } else {
      *q++ = s[i];
    }
  }
  *q = 0;
  return o;
}

static const hlo_attr *find_attr(const hlo_instr *in, const char *key) {
  for (int i = 0; i < in->n_attrs; i++)
    if (!strcmp(in->attrs[i].key, key)) return &in->attrs[i];
  return NULL;
}

/* The TYPE of a custom-call written by gopt (custom_call_target="gopt.TYPE"), malloc'd; NULL
 * when in is something else. */
static char *gopt_type(const hlo_instr *in) {
  const hlo_attr *a = strcmp(in->opcode, "custom-call") ? NULL : find_attr(in, "custom_call_target");
  if (!a || strncmp(a->val, "\"gopt.", 6)) return NULL;
  size_t n = strlen(a->val);
  if (n < 8 || a->val[n - 1] != '"') return NULL;
  return pct_dup(a->val + 6, n - 7);
}

/* Number list "1,2,-3" of the value text [s, e) into v; returns the count. */
static size_t num_list(const char *s, const char *e, int64_t *v, double *f, size_t max) {
  size_t n = 0;
  while (s < e && n < max) {
    char *q;
    if (f) f[n] = strtod(s, &q);
    else v[n] = strtoll(s, &q, 10);
    if (q == s) break;
    n++;
    s = q;
    if (s < e && *s == ',') s++;
  }
  return n;
}

/* Decodes one "K:NAME=VALUE" entry of backend_config onto node n. */
static int gopt_entry(cimp *ci, int32_t n, const hlo_instr *in, const char *s, const char *e,
                      const char *const *called, int n_called) {
  gopt_graph *g = ci->g;
  const hlo_attr *bc = find_attr(in, "backend_config");
  const char *eq = memchr(s, '=', (size_t)(e - s));
  if (e - s < 3 || s[1] != ':' || !eq)
    return at(ci->im, bc->line, bc->col, GOPT_EPARSE, "instruction '%s': bad gopt backend_config entry%s", in->name, "");
  char *name = pct_dup(s + 2, (size_t)(eq - s - 2));
  const char *v = eq + 1;
  int rc = 0;
  int64_t iv[1024];
  double fv[1024];
  if (!name) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  switch (s[0]) {
  case 'i': rc = gopt_node_set_int(g, n, name, strtoll(v, NULL, 10)); break;
  case 'f': rc = gopt_node_set_float(g, n, name, strtod(v, NULL)); break;
  case 's': {
    char *str = pct_dup(v, (size_t)(e - v));
    rc = str ? gopt_node_set_string(g, n, name, str) : GOPT_ENOMEM;
    free(str);
    break;
  }
  case 'I': rc = gopt_node_set_ints(g, n, name, iv, num_list(v, e, iv, NULL, 1024)); break;
  case 'F': {
    size_t k = num_list(v, e, NULL, fv, 1024);
    float ff[1024];
    for (size_t i = 0; i < k; i++) ff[i] = (float)fv[i];
    rc = gopt_node_set_floats(g, n, name, ff, k);
    break;
  }
  case 'S': {
    char *strs[256];
    size_t k = 0;
    for (const char *p = v; p <= e && k < 256;) {
      const char *q = memchr(p, ',', (size_t)(e - p));
      if (!q) q = e;
      if (!(strs[k] = pct_dup(p, (size_t)(q - p)))) break;
      k++;
      p = q + 1;
      if (q == e) break;
    }
    rc = gopt_node_set_strings(g, n, name, (const char *const *)strs, k);
    for (size_t i = 0; i < k; i++) free(strs[i]);
    break;
  }
  case 't': { /* dtype/dims/hex or - */
    char *e1, *e2;
    long dt = strtol(v, &e1, 10);
    const char *slash2 = e1 < e ? memchr(e1 + 1, '/', (size_t)(e - e1 - 1)) : NULL;
    if (*e1 != '/' || !slash2 || dt < 0 || dt >= GOPT_DT_COUNT) { rc = GOPT_EPARSE; break; }
    size_t r = num_list(e1 + 1, slash2, iv, NULL, GOPT_MAX_RANK);
    gopt_error e3 = {0};
    int32_t t = gopt_graph_add_tensor(g, NULL, (int)dt, (int)r, iv, &e3);
    if (t < 0) { rc = GOPT_EPARSE; break; }
    g->tensors.a[t].flags |= GOPT_T_ATTR;
    const char *h = slash2 + 1;
    size_t nb = (size_t)(e - h) / 2;
    unsigned char *d = NULL;
    if (*h != '-' && (d = malloc(nb + 1)))
      for (size_t i = 0; i < nb; i++) d[i] = (unsigned char)(hexv(h[2 * i]) * 16 + hexv(h[2 * i + 1]));
    (void)e2;
    rc = gopt_tensor_set_const(g, t, d, d ? nb : (size_t)gopt_tensor_bytes(g, t), &e3);
    free(d);
    if (!rc) rc = gopt_node_set_tensor(g, n, name, t);
    break;
  }
  case 'g': {
    long k = strtol(v, NULL, 10);
    if (k < 0 || k >= n_called) { rc = GOPT_EPARSE; break; }
    hlo_attr fake = *bc;
    fake.key = "called_computations";
    rc = attach(ci, n, name, called_graph(ci, &fake, called[k], strlen(called[k])));
    if (rc) { free(name); return rc; }
    break;
  }
  case 'N': g->nodes.a[n].flags |= (uint16_t)(strtol(v, NULL, 10) & (GOPT_N_GRAD | GOPT_N_UPDATE)); break;
  case 'O': break;
  default: rc = GOPT_EPARSE;
  }
  free(name);
  if (rc == GOPT_EPARSE)
    return at(ci->im, bc->line, bc->col, GOPT_EPARSE, "instruction '%s': bad gopt backend_config entry '%.40s'",
              in->name, s);
  return rc ? gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory") : 0;
}

/* Attributes of a gopt.TYPE node from backend_config (and called_computations). */
static int gopt_attrs(cimp *ci, int32_t n, const hlo_instr *in) {
  const hlo_attr *bc = find_attr(in, "backend_config"), *cc = find_attr(in, "called_computations");
  const char *called[64];
  int n_called = 0, rc = 0;
  if (!bc) return 0;
  if (cc) {
    char *list = strdup(cc->val);
    if (!list) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
    for (char *p = strtok(list, "{}, %"); p && n_called < 64; p = strtok(NULL, "{}, %")) {
      int64_t k = onnx_map_get(&ci->im->comps, p);
      called[n_called++] = k >= 0 ? ci->im->m->comps[k].name : "?";
    }
    free(list);
  }
  size_t len = strlen(bc->val);
  const char *s = bc->val + 1, *end = bc->val + (len > 1 ? len - 1 : 1);
  while (s < end && !rc) {
    const char *e = memchr(s, ';', (size_t)(end - s));
    if (!e) e = end;
    rc = gopt_entry(ci, n, in, s, e, called, n_called);
    s = e + 1;
  }
  return rc;
}

/* Positions of omitted inputs ("O:=2,4" in backend_config) into pos; returns the count. */
static size_t omitted_inputs(const hlo_instr *in, int64_t *pos, size_t max) {
  const hlo_attr *bc = find_attr(in, "backend_config");
  if (!bc || strncmp(bc->val, "\"O:=", 4)) return 0;
  const char *e = strpbrk(bc->val + 4, ";\"");
  return num_list(bc->val + 4, e ? e : bc->val + strlen(bc->val), pos, NULL, max);
}

/* Leaf tensors of a shape (arrays 1, tuples the sum over their elements). */
static int64_t shape_leaves(const hlo_shape *s) {
  if (!s->tuple) return 1;
  int64_t k = 0;
  for (int i = 0; i < s->n; i++) k += shape_leaves(&s->elems[i]);
  return k;
}

/* Resolves operand text "x" or "x#i#j" (element j of element i of tuple x) of instruction in:
 * x's instruction index, and the element's first leaf (among x's leaves), leaf count and shape. */
static int operand_ref(cimp *ci, const hlo_instr *in, const char *op, int64_t *idx, int32_t *off,
                       int32_t *cnt, const hlo_shape **sh) {
  const char *h = strchr(op, '#');
  size_t bl = h ? (size_t)(h - op) : strlen(op);
  char *base = malloc(bl + 1);
  if (!base) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  memcpy(base, op, bl);
  base[bl] = 0;
  *idx = onnx_map_get(&ci->names, base);
  free(base);
  if (*idx < 0)
    return at(ci->im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': operand '%s' is not defined", in->name, op);
  const hlo_shape *s = &ci->c->ins[*idx].shape;
  int64_t o = 0;
  while (h) {
    char *e;
    long k = strtol(h + 1, &e, 10);
    if (!s->tuple || k < 0 || k >= s->n)
      return at(ci->im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': operand '%s' names no tuple element",
                in->name, op);
    for (long j = 0; j < k; j++) o += shape_leaves(&s->elems[j]);
    s = &s->elems[k];
    h = *e == '#' ? e : NULL;
  }
  *off = (int32_t)o;
  *cnt = (int32_t)shape_leaves(s);
  *sh = s;
  return 0;
}

/* ---- computations ------------------------------------------------------------------------------- */

static int add_node(cimp *ci, int i, int32_t *ins, size_t max_in) {
  const hlo_instr *in = &ci->c->ins[i];
  imp *im = ci->im;
  gopt_graph *g = ci->g;
  size_t k = 0;
  int64_t counts[1024];
  int uneven = 0;
  for (int j = 0; j < in->n_ops; j++) {
    int64_t o;
    int32_t off, cnt;
    const hlo_shape *osh;
    int rc = operand_ref(ci, in, in->ops[j], &o, &off, &cnt, &osh);
    if (rc) return rc;
    if (o == i)
      return at(im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': reads itself%s", in->name, "");
    for (int32_t l = 0; l < cnt; l++) {
      if (k >= max_in)
        return at(im, in->line, in->col, GOPT_EUNSUP, "instruction '%s': too many operands%s", in->name, "");
      ins[k++] = ci->leaves.a[ci->leaf_off[o] + off + l];
    }
    /* per operand: its leaf count when it is a tuple value, 0 for an array */
    if (j < 1024) counts[j] = osh->tuple ? cnt : 0;
    uneven |= osh->tuple;
  }
  if (uneven && in->n_ops > 1024)
    return at(im, in->line, in->col, GOPT_EUNSUP, "instruction '%s': too many tuple operands%s", in->name, "");
  if (ci->leaf_n[i] > UINT16_MAX)
    return at(im, in->line, in->col, GOPT_EUNSUP, "instruction '%s': too many tuple elements%s", in->name, "");
  char type[96];
  char *gt = gopt_type(in);
  snprintf(type, sizeof type, "hlo::%.80s", in->opcode);
  if (gt) { /* a node of another front end: its inputs with the omitted ones back in place */
    int64_t om[64];
    size_t no = omitted_inputs(in, om, 64);
    if (k + no > max_in) {
      free(gt);
      return at(im, in->line, in->col, GOPT_EUNSUP, "instruction '%s': too many operands%s", in->name, "");
    }
    for (size_t a = 0; a < no; a++) {
      size_t p = om[a] < 0 ? 0 : (size_t)om[a] > k ? k : (size_t)om[a];
      memmove(ins + p + 1, ins + p, (k - p) * sizeof *ins);
      ins[p] = -1;
      k++;
    }
  }
  gopt_error e2 = {0};
  /* an empty tuple (`()`) has no leaves; the leaf array may not exist yet */
  const int32_t *outs = ci->leaves.a ? ci->leaves.a + ci->leaf_off[i] : NULL;
  int32_t n = gopt_graph_add_node(g, gt ? gt : type, in->name, (int)k, ins, ci->leaf_n[i], outs, &e2);
  if (n < 0) {
    free(gt);
    return at(im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': %s", in->name, e2.msg);
  }
  if (gt) {
    free(gt);
    ci->node_line[n] = i;
    return gopt_attrs(ci, n, in);
  }
  ci->node_line[n] = i;
  int rc = 0;
  if (uneven && gopt_node_set_ints(g, n, "hlo.operands", counts, (size_t)in->n_ops))
    return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  if (!strcmp(in->opcode, "get-tuple-element") && in->n_ops == 1) {
    /* which of the operand's leaves the element is: the leaves of the elements before it */
    const hlo_attr *ix = find_attr(in, "index");
    const hlo_shape *os;
    int64_t oi;
    int32_t ooff, ocnt;
    if ((rc = operand_ref(ci, in, in->ops[0], &oi, &ooff, &ocnt, &os))) return rc;
    long idx = ix ? strtol(ix->val, NULL, 10) : -1;
    if (!os->tuple || idx < 0 || idx >= os->n)
      return at(im, in->line, in->col, GOPT_EGRAPH, "instruction '%s': index out of range of operand '%s'",
                in->name, in->ops[0]);
    int64_t off = 0;
    for (long e = 0; e < idx; e++) off += shape_leaves(&os->elems[e]);
    if (gopt_node_set_int(g, n, "hlo.leaf_offset", off))
      return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  }
  if (in->literal && gopt_node_set_string(g, n, "hlo.literal", in->literal))
    return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  for (int a = 0; a < in->n_attrs && !rc; a++) rc = set_attr(ci, n, in, &in->attrs[a]);
  if (rc) return rc;
  ops_hlo_set_kind(g, n, in->shape.tuple);
  return 0;
}

/* Parameters as inputs in parameter-number order. */
static int add_params(cimp *ci) {
  const hlo_comp *c = ci->c;
  int np = 0;
  for (int i = 0; i < c->n; i++) np += !strcmp(c->ins[i].opcode, "parameter");
  for (int p = 0; p < np; p++) {
    int found = -1;
    for (int i = 0; i < c->n; i++) {
      if (strcmp(c->ins[i].opcode, "parameter") || c->ins[i].param != p) continue;
      if (found >= 0)
        return at(ci->im, c->ins[i].line, c->ins[i].col, GOPT_EGRAPH, "parameter %s of computation '%s' is defined twice",
                  c->ins[i].name, c->name);
      found = i;
    }
    if (found < 0) {
      char num[24];
      snprintf(num, sizeof num, "%d", p);
      return at(ci->im, c->line, c->col, GOPT_EGRAPH, "computation '%s': parameter(%s) is missing", c->name, num);
    }
    int rc = instr_leaves(ci, found);
    if (rc) return rc;
    for (int32_t l = 0; l < ci->leaf_n[found]; l++)
      if (gopt_graph_add_input(ci->g, ci->leaves.a[ci->leaf_off[found] + l]))
        return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  }
  return 0;
}

static int add_const(cimp *ci, int i) {
  const hlo_instr *in = &ci->c->ins[i];
  int rc = instr_leaves(ci, i);
  if (rc) return rc;
  int32_t t = ci->leaves.a[ci->leaf_off[i]];
  void *data = NULL;
  size_t nb = 0;
  if ((rc = parse_literal_data(ci->im, in, t, ci->g, &data, &nb))) return rc;
  gopt_error e2 = {0};
  rc = gopt_tensor_set_const(ci->g, t, data, nb, &e2);
  if (!rc && !data) /* elided: bytes not available, size known */
    ci->g->consts.a[ci->g->tensors.a[t].cdata].nbytes = (size_t)gopt_tensor_bytes(ci->g, t);
  free(data);
  return rc ? gopt_error_set(ci->im->err, rc, "%s", e2.msg) : 0;
}

/* 1 unless n is an opaque dot (one whose result type differs from its operands') whose result
 * dims disagree with its dimension numbers (the "equation" ops_hlo_set_kind derived): a dot's
 * type may change, its dims follow the rule. */
static int dot_dims_agree(const gopt_graph *g, int32_t n) {
  const char *eq = gopt_node_get_string(g, n, "equation", NULL), *arrow = eq ? strstr(eq, "->") : NULL;
  if (!arrow || strcmp(gopt_node_type(g, n), "hlo::dot") || g->nodes.a[n].n_in != 2 || g->nodes.a[n].n_out != 1)
    return 1;
  int32_t a = gopt_node_input(g, n, 0), b = gopt_node_input(g, n, 1), y = gopt_node_output(g, n, 0);
  const char *comma = strchr(eq, ',');
  const int64_t *da = gopt_tensor_dims(g, a), *db = gopt_tensor_dims(g, b), *dy = gopt_tensor_dims(g, y);
  int ra = g->tensors.a[a].rank, rb = g->tensors.a[b].rank, ry = g->tensors.a[y].rank;
  if (!comma || comma - eq != ra || arrow - comma - 1 != rb || (int)strlen(arrow + 2) != ry) return 0;
  int64_t size[128];
  for (int i = 0; i < 128; i++) size[i] = -1;
  for (int i = 0; i < ra + rb; i++) { /* a letter's sizes agree in both operands (contracted, batch) */
    unsigned char c = (unsigned char)(i < ra ? eq[i] : comma[1 + i - ra]) & 127;
    int64_t d = i < ra ? da[i] : db[i - ra];
    if (size[c] >= 0 && size[c] != d) return 0;
    size[c] = d;
  }
  for (int i = 0; i < ry; i++)
    if (size[(unsigned char)arrow[2 + i] & 127] != dy[i]) return 0;
  return 1;
}

/* Infers the shapes of the checked nodes and compares them with the text's. */
static int check_shapes(cimp *ci) {
  gopt_graph *g = ci->g;
  size_t nt = g->tensors.n;
  int64_t *saved = malloc((nt + 1) * sizeof(int64_t) * (GOPT_MAX_RANK + 2));
  if (!saved) return gopt_error_set(ci->im->err, GOPT_ENOMEM, "out of memory");
  for (size_t t = 0; t < nt; t++) {
    int64_t *s = saved + t * (GOPT_MAX_RANK + 2);
    s[0] = g->tensors.a[t].dtype;
    s[1] = g->tensors.a[t].rank;
    if (g->tensors.a[t].rank)
      memcpy(s + 2, gopt_tensor_dims(g, (int32_t)t), (size_t)g->tensors.a[t].rank * sizeof(int64_t));
  }
  gopt_infer_opts io = {0, 1};
  gopt_error e2 = {0};
  int rc = gopt_infer_shapes(g, &io, &e2);
  for (size_t n = 0; n < g->nodes.n && !rc; n++) {
    const gopt_node *nd = &g->nodes.a[n];
    if ((nd->flags & GOPT_N_OPAQUE) && dot_dims_agree(g, (int32_t)n)) continue;
    int32_t t = gopt_node_output(g, (int32_t)n, 0);
    const int64_t *s = saved + (size_t)t * (GOPT_MAX_RANK + 2);
    const gopt_tensor *x = &g->tensors.a[t];
    int same = (nd->flags & GOPT_N_OPAQUE) ? 0 : s[0] == x->dtype && s[1] == x->rank && !(x->flags & GOPT_T_NOSHAPE) &&
               (x->rank == 0 || !memcmp(s + 2, gopt_tensor_dims(g, t), (size_t)x->rank * sizeof(int64_t)));
    if (!same) {
      const hlo_instr *in = &ci->c->ins[ci->node_line[n]];
      char got[160];
      int p = snprintf(got, sizeof got, "%s[", gopt_dtype_name(x->dtype));
      for (int k = 0; k < x->rank && p < (int)sizeof got - 24; k++)
        p += snprintf(got + p, sizeof got - (size_t)p, "%s%lld", k ? "," : "", (long long)gopt_tensor_dims(g, t)[k]);
      snprintf(got + p, sizeof got - (size_t)p, "]");
      if (nd->flags & GOPT_N_OPAQUE) /* a dot with its own result type: the dims are wrong */
        snprintf(got, sizeof got, "dims against the dimension numbers");
      rc = at(ci->im, in->line, in->col, GOPT_ESHAPE,
              "instruction '%s': the text's shape disagrees with gopt's shape rule (%s)", in->name, got);
    }
  }
  if (rc && !ci->im->err->code)
    rc = gopt_error_set(ci->im->err, rc, "%s:%d:%d: computation '%s': %s", ci->im->m->label,
                        ci->c->line, ci->c->col, ci->c->name, e2.msg);
  free(saved);
  return rc;
}

/* Keeps attributes of a module or computation as properties PREFIX.KEY of g. */
static int keep_attrs(imp *im, gopt_graph *g, const char *prefix, const hlo_attr *a, int n) {
  for (int i = 0; i < n; i++) {
    char key[200];
    snprintf(key, sizeof key, "%s.%.140s", prefix, a[i].key);
    if (gopt_graph_set_prop(g, key, a[i].val)) return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  }
  return 0;
}

/* 1 when every layout in a shape's text is the default one (minor_to_major rank-1..0, no
 * tiling, memory space or other parts) or absent. */
static int layouts_default(const char *t) {
  for (const char *p = strchr(t, '['); p; p = strchr(p, '[')) {
    int rank = 0, any = 0;
    for (p++; *p && *p != ']'; p++) {
      if (*p == ',') rank++;
      else if (*p != ' ') any = 1;
    }
    rank += any;
    if (*p != ']' || p[1] != '{') continue;
    p += 2;
    for (int want = rank - 1; want >= 0; want--) {
      char *e;
      long v = strtol(p, &e, 10);
      if (e == p || v != want) return 0;
      p = e;
      if (want && *p++ != ',') return 0;
    }
    if (*p != '}') return 0;
  }
  return 1;
}

/* Keeps what the graph has no place for, as properties of g named after instruction in: its
 * shape text when a layout is not the default ("hlo.shape.NAME"), and the attributes of a
 * parameter or constant (", KEY=VALUE..." in "hlo.attrs.NAME"). */
static int keep_instr(imp *im, gopt_graph *g, const hlo_instr *in) {
  size_t nl = strlen(in->name);
  char *key = malloc(nl + 16), *txt = NULL;
  int rc = key ? 0 : GOPT_ENOMEM;
  if (!rc && in->shape_text && !layouts_default(in->shape_text)) {
    snprintf(key, nl + 16, "hlo.shape.%s", in->name);
    rc = gopt_graph_set_prop(g, key, in->shape_text);
  }
  if (!rc && in->n_attrs && (!strcmp(in->opcode, "parameter") || !strcmp(in->opcode, "constant"))) {
    size_t len = 1, o = 0;
    for (int a = 0; a < in->n_attrs; a++) len += strlen(in->attrs[a].key) + strlen(in->attrs[a].val) + 3;
    if (!(txt = malloc(len))) rc = GOPT_ENOMEM;
    for (int a = 0; a < in->n_attrs && !rc; a++)
      o += (size_t)snprintf(txt + o, len - o, ", %s=%s", in->attrs[a].key, in->attrs[a].val);
    snprintf(key, nl + 16, "hlo.attrs.%s", in->name);
    if (!rc) rc = gopt_graph_set_prop(g, key, txt);
  }
  free(key);
  free(txt);
  return rc ? gopt_error_set(im->err, GOPT_ENOMEM, "out of memory") : 0;
}

/* Keeps the module's name, attributes and header tables as properties of the entry graph g. */
static int keep_module(imp *im, gopt_graph *g) {
  const hlo_module *m = im->m;
  int rc = gopt_graph_set_prop(g, "hlo.module", m->name) ? GOPT_ENOMEM : 0;
  for (int i = 0; i < m->n_tables && !rc; i++) {
    char key[160];
    snprintf(key, sizeof key, "hlo.table.%.140s", m->tables[i].name);
    rc = gopt_graph_set_prop(g, key, m->tables[i].rows);
  }
  if (rc) return gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
  return keep_attrs(im, g, "hlo.module_attr", m->attrs, m->n_attrs);
}

static int build_comp(imp *im, int ci_idx, gopt_graph **out) {
  const hlo_comp *c = &im->m->comps[ci_idx];
  cimp ci = {0};
  int rc = 0;
  ci.im = im;
  ci.c = c;
  ci.g = gopt_graph_new(c->name);
  ci.leaf_off = calloc((size_t)c->n + 1, sizeof *ci.leaf_off);
  ci.leaf_n = calloc((size_t)c->n + 1, sizeof *ci.leaf_n);
  ci.node_line = calloc((size_t)c->n + 1, sizeof *ci.node_line);
  int32_t *ins = malloc(sizeof *ins * 65536);
  if (!ci.g || !ci.leaf_off || !ci.leaf_n || !ci.node_line || !ins) {
    rc = gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  gopt_graph_reserve(ci.g, (size_t)c->n);
  for (int i = 0; i < c->n; i++) {
    if (onnx_map_get(&ci.names, c->ins[i].name) >= 0) {
      rc = at(im, c->ins[i].line, c->ins[i].col, GOPT_EGRAPH, "instruction '%s' is defined twice in '%s'",
              c->ins[i].name, c->name);
      goto done;
    }
    if (strchr(c->ins[i].name, '#')) abort(); /* the lexer never yields '#' */
    if (onnx_map_put(&ci.names, c->ins[i].name, i)) {
      rc = gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
  }
  if ((rc = add_params(&ci))) goto done;
  for (int i = 0; i < c->n && !rc; i++) { /* a tuple constant is a node (literal kept as text) */
    if (!strcmp(c->ins[i].opcode, "constant") && !c->ins[i].shape.tuple) rc = add_const(&ci, i);
    else if (strcmp(c->ins[i].opcode, "parameter")) rc = instr_leaves(&ci, i);
  }
  for (int i = 0; i < c->n && !rc; i++)
    if ((strcmp(c->ins[i].opcode, "constant") || c->ins[i].shape.tuple) && strcmp(c->ins[i].opcode, "parameter"))
      rc = add_node(&ci, i, ins, 65536);
  if (rc) goto done;
  int root = c->n - 1;
  for (int i = 0; i < c->n; i++)
    if (c->ins[i].root) root = i;
  if (root < 0) {
    rc = at(im, c->line, c->col, GOPT_EPARSE, "computation '%s' has no instruction%s", c->name, "");
    goto done;
  }
  for (int32_t l = 0; l < ci.leaf_n[root]; l++)
    if (gopt_graph_add_output(ci.g, ci.leaves.a[ci.leaf_off[root] + l])) {
      rc = gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
  if ((rc = keep_attrs(im, ci.g, "hlo.comp_attr", c->attrs, c->n_attrs))) goto done;
  for (int i = 0; i < c->n && !rc; i++) rc = keep_instr(im, ci.g, &c->ins[i]);
  if (rc) goto done;
  int32_t *order = malloc((ci.g->nodes.n + 1) * sizeof *order);
  gopt_error e2 = {0};
  if (!order || gopt_graph_topo(ci.g, order, &e2) < 0) {
    rc = order ? at(im, c->line, c->col, GOPT_EGRAPH, "computation '%s': %s", c->name, e2.msg)
               : gopt_error_set(im->err, GOPT_ENOMEM, "out of memory");
    free(order);
    goto done;
  }
  free(order);
  rc = check_shapes(&ci);
done:
  if (rc) gopt_graph_free(ci.g);
  else *out = ci.g;
  onnx_map_free(&ci.names);
  free(ci.leaf_off);
  free(ci.leaf_n);
  free(ci.node_line);
  GOPT_ARR_FREE(ci.leaves);
  free(ins);
  return rc;
}

/* ---- module ------------------------------------------------------------------------------------- */

int gopt_hlo_load_mem(const char *text, size_t len, const char *label, gopt_graph **out,
                      gopt_error *err) {
  hlo_module m = {0};
  imp im = {0};
  int rc, entry = -1;
  label = label && *label ? label : "<memory>";
  if (out) *out = NULL;
  if (!out || (!text && len)) return gopt_error_set(err, GOPT_EINVAL, "%s: bad arguments", label);
  im.m = &m;
  im.err = err;
  if ((rc = hlo_parse(text, len, label, &m, err))) goto done;
  im.graphs = calloc((size_t)m.n, sizeof *im.graphs);
  im.used = calloc((size_t)m.n, 1);
  if (!im.graphs || !im.used) { rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory"); goto done; }
  for (int i = 0; i < m.n; i++) {
    if (onnx_map_get(&im.comps, m.comps[i].name) >= 0) {
      rc = at(&im, m.comps[i].line, m.comps[i].col, GOPT_EGRAPH, "computation '%s' is defined twice%s",
              m.comps[i].name, "");
      goto done;
    }
    if (m.comps[i].entry) {
      if (entry >= 0) {
        rc = at(&im, m.comps[i].line, m.comps[i].col, GOPT_EGRAPH, "second ENTRY computation '%s'%s",
                m.comps[i].name, "");
        goto done;
      }
      entry = i;
    }
    if (onnx_map_put(&im.comps, m.comps[i].name, i)) { rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory"); goto done; }
  }
  if (entry < 0) entry = m.n - 1;
  for (int i = 0; i < m.n; i++)
    if ((rc = build_comp(&im, i, &im.graphs[i]))) goto done;
  for (int i = 0; i < m.n; i++)
    if (!im.used[i] && i != entry)
      gopt_warn("%s:%d:%d: computation '%s' is never called: not kept", label, m.comps[i].line,
                m.comps[i].col, m.comps[i].name);
  *out = im.graphs[entry];
  im.graphs[entry] = NULL;
  if ((rc = keep_module(&im, *out))) {
    gopt_graph_free(*out);
    *out = NULL;
  } else if (gopt_graph_set_opset(*out, "", 17)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    gopt_graph_free(*out);
    *out = NULL;
  }
done:
  for (int i = 0; im.graphs && i < m.n; i++) gopt_graph_free(im.graphs[i]);
  free(im.graphs);
  free(im.used);
  onnx_map_free(&im.comps);
  hlo_module_free(&m);
  return rc;
}

int gopt_hlo_load(const char *path, gopt_graph **out, gopt_error *err) {
  void *buf = NULL;
  size_t len = 0;
  if (out) *out = NULL;
  if (!path || !out) return gopt_error_set(err, GOPT_EINVAL, "gopt_hlo_load: bad arguments");
  int rc = gopt_file_read(path, &buf, &len, err);
  if (rc) return rc;
  rc = gopt_hlo_load_mem(buf, len, path, out, err);
  free(buf);
  return rc;
}

int gopt_hlo_is_hlo_file(const char *path) {
  size_t n = path ? strlen(path) : 0;
  if (n > 4 && !strcmp(path + n - 4, ".hlo")) return 1;
  FILE *f = path ? fopen(path, "rb") : NULL;
  if (!f) return 0;
  char buf[16] = {0};
  size_t r = fread(buf, 1, 10, f);
  fclose(f);
  return r >= 10 && !memcmp(buf, "HloModule", 9) && (buf[9] == ' ' || buf[9] == '\t');
}

/* ---- instruction count ----------------------------------------------------------------------- */

static size_t count_graph(const gopt_graph *g, onnx_map *seen) {
  size_t n = 0;
  for (size_t i = 0; i < g->inputs.n; i++) { /* one parameter per distinct base name */
    const char *nm = gopt_graph_str(g, g->tensors.a[g->inputs.a[i]].name);
    const char *h = strchr(nm, '#');
    if (!h) { n++; continue; }
    int first = 1;
    size_t bl = (size_t)(h - nm);
    for (size_t j = 0; j < i && first; j++) {
      const char *pm = gopt_graph_str(g, g->tensors.a[g->inputs.a[j]].name);
      first = !(strncmp(pm, nm, bl) == 0 && pm[bl] == '#');
    }
    n += first;
  }
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if ((x->flags & GOPT_T_CONST) && !(x->flags & (GOPT_T_ATTR | GOPT_T_INPUT)) && x->producer < 0)
      n++;
  }
  n += gopt_graph_node_count(g);
  for (size_t k = 0; k < g->nodes.n; k++) { /* computations called by live nodes, once each */
    if (!gopt_node_alive(g, (int32_t)k)) continue;
    const gopt_node *nd = &g->nodes.a[k];
    for (uint16_t a = 0; a < nd->n_attr; a++) {
      const gopt_attr *at_ = &g->attrs.a[nd->attr + a];
      if (at_->kind != GOPT_ATTR_GRAPH || at_->v.graph < 0) continue;
      const gopt_graph *sub = g->subgraphs.a[at_->v.graph];
      const char *nm = gopt_graph_str(sub, sub->name);
      if (onnx_map_get(seen, nm) >= 0 || onnx_map_put(seen, nm, 1)) continue;
      n += count_graph(sub, seen);
    }
  }
  return n;
}

size_t gopt_hlo_instruction_count(const gopt_graph *g) {
  if (!g) return 0;
  onnx_map seen = {0};
  size_t n = count_graph(g, &seen);
  onnx_map_free(&seen);
  return n;
}
