/* k_string.c: STRING tensors in the executor and the ops on them: Cast / CastLike between STRING
 * and the numeric types, StringNormalizer, Identity, StringConcat, StringSplit, Equal, RegexFullMatch (POSIX
 * extended expressions with GNU's \w / \b, through regcomp), and ai.onnx.ml's LabelEncoder (string or
 * numeric keys and values). gopt_dtype_size(STRING) is 0, so a string
 * tensor's buffer in the value table is empty; its strings live in a side table of the executor
 * (x->strs: per tensor, packed (uint32 little-endian length, bytes) records, one per element: the
 * format of STRING constants in the IR and of STRING host tensors). Inputs fill it
 * (gopt_exec_set_input), kernels replace their outputs' entries, gopt_exec_get_output copies them.
 * Semantics as the ONNX operator specification states them; numbers print as numpy's str() of the
 * value does (the shortest text that reads back to the same float). */
#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_ref.h"

#define NODE (k->node)
#define G (x->g)

typedef struct ex_strtab {
  unsigned char **buf; /* per tensor: packed records (NULL: none yet) */
  size_t *len;
} ex_strtab;

void ex_str_free(gopt_exec *x) {
  ex_strtab *s = x->strs;
  if (!s) return;
  for (size_t t = 0; t < x->g->tensors.n; t++) free(s->buf[t]);
  free(s->buf);
  free(s->len);
  free(s);
  x->strs = NULL;
}

/* Takes ownership of p (n bytes of packed records) as tensor t's strings. */
static int str_put_own(gopt_exec *x, int32_t t, unsigned char *p, size_t n) {
  ex_strtab *s = x->strs;
  if (!s) {
    s = calloc(1, sizeof *s);
    if (s) s->buf = calloc(x->g->tensors.n + 1, sizeof *s->buf);
    if (s) s->len = calloc(x->g->tensors.n + 1, sizeof *s->len);
    if (!s || !s->buf || !s->len) {
      if (s) free(s->buf), free(s->len);
      free(s);
      free(p);
      return GOPT_ENOMEM;
    }
    x->strs = s;
  }
  free(s->buf[t]);
  s->buf[t] = p;
  s->len[t] = n;
  return GOPT_OK;
}

/* Packed strings of tensor t (a constant's bytes, or the side table); NULL with *n = 0 when none. */
static const unsigned char *str_get(const gopt_exec *x, int32_t t, size_t *n) {
  const gopt_tensor *tt = &x->g->tensors.a[t];
  ex_strtab *s = x->strs;
  *n = 0;
  if ((tt->flags & GOPT_T_CONST) && tt->cdata >= 0) {
    *n = x->g->consts.a[tt->cdata].nbytes;
    return x->g->consts.a[tt->cdata].data;
  }
  if (!s || !s->buf[t]) return NULL;
  *n = s->len[t];
  return s->buf[t];
}

/* Checks that p (n bytes) holds exactly cnt well-formed records. */
static int str_valid(const unsigned char *p, size_t n, int64_t cnt) {
  size_t off = 0;
  for (int64_t i = 0; i < cnt; i++) {
    if (n - off < 4) return 0;
    uint32_t len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
    off += 4;
    if (n - off < len) return 0;
    off += len;
  }
  return off == n;
}

int ex_str_set_input(gopt_exec *x, int32_t t, const gopt_host_tensor *h, gopt_error *err) {
  if (!str_valid(h->data, h->nbytes, ex_numel(x, t)))
    return gopt_error_set(err, GOPT_EINVAL, "input '%s': not %lld packed strings",
                          gopt_graph_str(x->g, x->g->tensors.a[t].name), (long long)ex_numel(x, t));
  unsigned char *p = malloc(h->nbytes + 1);
  if (!p) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (h->nbytes) memcpy(p, h->data, h->nbytes);
  if (str_put_own(x, t, p, h->nbytes)) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  return GOPT_OK;
}

int ex_str_get_output(const gopt_exec *x, int32_t t, gopt_host_tensor *h, gopt_error *err) {
  size_t n = 0;
  const unsigned char *p = str_get(x, t, &n);
  if (!p) return gopt_error_set(err, GOPT_EINVAL, "output '%s' has no strings (run first)",
                                gopt_graph_str(x->g, x->g->tensors.a[t].name));
  free(h->data);
  h->data = malloc(n + 1);
  if (!h->data) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  if (n) memcpy(h->data, p, n);
  h->nbytes = n;
  return GOPT_OK;
}

/* ---- strings as C arrays for the kernels ---------------------------------------------------------------- */

typedef struct strs {
  int64_t n;
  char **s; /* NUL-terminated copies */
} strs;

static void strs_free(strs *a) {
  for (int64_t i = 0; a->s && i < a->n; i++) free(a->s[i]);
  free(a->s);
  a->s = NULL;
}

/* Tensor t's strings (empty strings when it has none yet). */
static int strs_load(const gopt_exec *x, int32_t t, strs *a) {
  size_t n = 0, off = 0;
  const unsigned char *p = str_get(x, t, &n);
  a->n = ex_numel(x, t);
  a->s = calloc((size_t)a->n + 1, sizeof *a->s);
  if (!a->s) return GOPT_ENOMEM;
  if (p && !str_valid(p, n, a->n)) p = NULL;
  for (int64_t i = 0; i < a->n; i++) {
    uint32_t len = 0;
    if (p) {
      len = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
      off += 4;
    }
    a->s[i] = malloc(len + 1);
    if (!a->s[i]) return GOPT_ENOMEM;
    if (len) memcpy(a->s[i], p + off, len);
    a->s[i][len] = 0;
    off += len;
  }
  return GOPT_OK;
}

/* Packs a->s[0..n) as tensor t's strings. */
static int strs_store(gopt_exec *x, int32_t t, char *const *s, int64_t n) {
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) total += 4 + strlen(s[i]);
  unsigned char *p = malloc(total + 1), *q = p;
  if (!p) return GOPT_ENOMEM;
  for (int64_t i = 0; i < n; i++) {
    uint32_t len = (uint32_t)strlen(s[i]);
    for (int b = 0; b < 4; b++) *q++ = (unsigned char)(len >> (8 * b));
    memcpy(q, s[i], len);
    q += len;
  }
  return str_put_own(x, t, p, total);
}

/* ---- Cast / CastLike ------------------------------------------------------------------------------------ */

/* numpy's str() of a float32 (or float64) value: the shortest %.*g text that reads back to the
 * same value, with ".0" added to integral values; nan, inf, -inf. */
static void num_text(double v, int is_float, char *buf, size_t cap) {
  if (isnan(v)) { snprintf(buf, cap, "nan"); return; }
  if (isinf(v)) { snprintf(buf, cap, v < 0 ? "-inf" : "inf"); return; }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    if (is_float ? (float)back == (float)v : back == v) break;
  }
  if (!strpbrk(buf, ".eE")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

static int cast_from_string(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  strs a = {0};
  int32_t o = k->out[0];
  int dt = ex_dtype(x, o), rc = strs_load(x, k->in[0], &a);
  for (int64_t i = 0; i < a.n && !rc; i++) {
    char *end = NULL;
    double v = strtod(a.s[i], &end);
    if (end == a.s[i]) {
      rc = ex_node_error(x, NODE, err, GOPT_EINVAL, "string '%.40s' is not a number", a.s[i]);
      break;
    }
    switch (dt) {
      case GOPT_DT_FLOAT: ((float *)ex_data(x, o))[i] = (float)v; break;
      case GOPT_DT_DOUBLE: ((double *)ex_data(x, o))[i] = v; break;
      case GOPT_DT_INT32: ((int32_t *)ex_data(x, o))[i] = (int32_t)strtoll(a.s[i], NULL, 10); break;
      case GOPT_DT_INT64: ((int64_t *)ex_data(x, o))[i] = strtoll(a.s[i], NULL, 10); break;
      default: rc = ex_node_error(x, NODE, err, GOPT_EUNSUP, "Cast from STRING to %s is not supported", gopt_dtype_name(dt));
    }
  }
  strs_free(&a);
  return rc == GOPT_ENOMEM ? gopt_error_set(err, rc, "out of memory") : rc;
}

static int cast_to_string(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int32_t in = k->in[0];
  int64_t n = ex_numel(x, in);
  int dt = ex_dtype(x, in), rc = GOPT_OK;
  char **s = calloc((size_t)n + 1, sizeof *s), buf[64];
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  const void *d = ex_data(x, in);
  for (int64_t i = 0; i < n && !rc; i++) {
    switch (dt) {
      case GOPT_DT_FLOAT: num_text(((const float *)d)[i], 1, buf, sizeof buf); break;
      case GOPT_DT_DOUBLE: num_text(((const double *)d)[i], 0, buf, sizeof buf); break;
      case GOPT_DT_INT32: snprintf(buf, sizeof buf, "%d", ((const int32_t *)d)[i]); break;
      case GOPT_DT_INT64: snprintf(buf, sizeof buf, "%lld", (long long)((const int64_t *)d)[i]); break;
      case GOPT_DT_BOOL: snprintf(buf, sizeof buf, "%s", ((const uint8_t *)d)[i] ? "True" : "False"); break;
      default: rc = ex_node_error(x, NODE, err, GOPT_EUNSUP, "Cast from %s to STRING is not supported", gopt_dtype_name(dt));
    }
    if (!rc && !(s[i] = strdup(buf))) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  }
  if (!rc && strs_store(x, k->out[0], s, n)) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  strs a = {n, s};
  strs_free(&a);
  return rc;
}

static int copy_strings(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  strs a = {0};
  int rc = strs_load(x, k->in[0], &a);
  if (!rc) rc = strs_store(x, k->out[0], a.s, a.n);
  strs_free(&a);
  return rc ? gopt_error_set(err, rc, "out of memory") : GOPT_OK;
}

/* ---- StringNormalizer ------------------------------------------------------------------------------------ */

static int str_eq(const char *a, const char *b, int case_sensitive) {
  if (case_sensitive) return !strcmp(a, b);
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return *a == *b;
}

/* X [C] or [1, C]: drops the stopwords (compared with or without case), then changes the case of
 * what is left (LOWER, UPPER or NONE); when nothing is left the output is one empty string. */
static int run_normalizer(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  strs a = {0};
  int rc = strs_load(x, k->in[0], &a);
  if (rc) return gopt_error_set(err, rc, "out of memory");
  int cs = (int)gopt_node_get_int(G, NODE, "is_case_sensitive", 0);
  const char *act = gopt_node_get_string(G, NODE, "case_change_action", "NONE");
  const gopt_attr *sw = gopt_node_attr(G, NODE, "stopwords");
  int64_t kept = 0;
  for (int64_t i = 0; i < a.n; i++) {
    int stop = 0;
    for (uint32_t j = 0; sw && sw->kind == GOPT_ATTR_STRINGS && j < sw->n && !stop; j++)
      stop = str_eq(a.s[i], gopt_graph_str(G, G->strids.a[sw->v.off + j]), cs);
    if (stop) {
      free(a.s[i]);
      continue;
    }
    for (char *c = a.s[i]; *c; c++)
      *c = !strcmp(act, "LOWER") ? (char)tolower((unsigned char)*c) : !strcmp(act, "UPPER") ? (char)toupper((unsigned char)*c) : *c;
    a.s[kept++] = a.s[i];
  }
  a.n = kept;
  int64_t want = ex_numel(x, k->out[0]);
  if (!kept && want == 1) {
    a.s[0] = calloc(1, 1);
    a.n = a.s[0] ? 1 : 0;
  }
  if (a.n != want)
    rc = ex_node_error(x, NODE, err, GOPT_ESHAPE, "%lld strings are left, the output holds %lld", (long long)a.n, (long long)want);
  else if (strs_store(x, k->out[0], a.s, a.n))
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  strs_free(&a);
  return rc;
}

/* ---- StringConcat, Equal, RegexFullMatch ------------------------------------------------------------- */

/* Flat index into tensor t (numpy-broadcast to tensor o's shape) of o's flat index i. */
static int64_t str_bcast(const gopt_exec *x, int32_t t, int32_t o, int64_t i) {
  int r = ex_rank(x, o), rt = ex_rank(x, t);
  const int64_t *od = ex_dims(x, o), *td = ex_dims(x, t);
  int64_t idx = 0, a = 1;
  for (int d = r - 1; d >= 0; d--) {
    int64_t c = i % od[d];
    i /= od[d];
    int j = d - (r - rt);
    if (j < 0) continue;
    if (td[j] != 1) idx += c * a;
    a *= td[j];
  }
  return idx;
}

/* StringConcat (a ++ b, broadcast) or Equal on strings (a == b into a BOOL output). */
static int run_concat_equal(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  strs a = {0}, b = {0};
  int eq = !strcmp(gopt_node_type(G, NODE), "Equal"), rc = strs_load(x, k->in[0], &a);
  if (!rc) rc = strs_load(x, k->in[1], &b);
  int64_t n = ex_numel(x, k->out[0]);
  char **s = rc || eq ? NULL : calloc((size_t)n + 1, sizeof *s);
  if (!rc && !eq && !s) rc = GOPT_ENOMEM;
  for (int64_t i = 0; i < n && !rc; i++) {
    const char *u = a.s[str_bcast(x, k->in[0], k->out[0], i)], *v = b.s[str_bcast(x, k->in[1], k->out[0], i)];
    if (eq) {
      ((uint8_t *)ex_data(x, k->out[0]))[i] = !strcmp(u, v);
      continue;
    }
    size_t lu = strlen(u), lv = strlen(v);
    if (!(s[i] = malloc(lu + lv + 1))) rc = GOPT_ENOMEM;
    else memcpy(s[i], u, lu), memcpy(s[i] + lu, v, lv + 1);
  }
  if (!rc && !eq) rc = strs_store(x, k->out[0], s, n);
  strs c = {n, s};
  if (s) strs_free(&c);
  strs_free(&a);
  strs_free(&b);
  return rc ? gopt_error_set(err, rc, "out of memory") : GOPT_OK;
}

/* RE2's class escapes as POSIX extended syntax into out (cap >= 16 * strlen(pat) + 8), anchored as
 * "^(...)$": \d \s (and \D \S) become bracket classes, and inside brackets \w \d \s become
 * [:alnum:]_ / [:digit:] / [:space:], other escapes their character (an escaped '-' goes last). */
static void re2_to_posix(const char *pat, char *out) {
  char *o = out;
  int br = 0, dash = 0;
  o += sprintf(o, "^(");
  for (const char *p = pat; *p; p++) {
    if (br && *p == ']' && p[-1] != '[' && !(p[-1] == '^' && p[-2] == '[')) {
      if (dash) *o++ = '-';
      *o++ = ']';
      br = dash = 0;
    } else if (*p == '\\' && p[1]) {
      char c = *++p;
      if (br) {
        if (c == 'w') o += sprintf(o, "[:alnum:]_");
        else if (c == 'd') o += sprintf(o, "[:digit:]");
        else if (c == 's') o += sprintf(o, "[:space:]");
        else if (c == '-') dash = 1;
        else *o++ = c;
      } else if (c == 'd' || c == 'D') {
        o += sprintf(o, c == 'd' ? "[[:digit:]]" : "[^[:digit:]]");
      } else if (c == 's' || c == 'S') {
        o += sprintf(o, c == 's' ? "[[:space:]]" : "[^[:space:]]");
      } else {
        *o++ = '\\', *o++ = c;
      }
    } else {
      if (*p == '[' && !br) br = 1;
      *o++ = *p;
    }
  }
  sprintf(o, ")$");
}

/* RegexFullMatch: whether each string matches the pattern attribute as a whole. */
static int run_regex(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *pat = gopt_node_get_string(G, NODE, "pattern", "");
  size_t pl = strlen(pat);
  char *full = malloc(16 * pl + 8);
  if (!full) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  re2_to_posix(pat, full);
  regex_t re;
  int rc = regcomp(&re, full, REG_EXTENDED | REG_NOSUB);
  free(full);
  if (rc) return ex_node_error(x, NODE, err, GOPT_EINVAL, "pattern '%.60s' is not a valid regular expression", pat);
  strs a = {0};
  rc = strs_load(x, k->in[0], &a);
  for (int64_t i = 0; i < a.n && !rc; i++) ((uint8_t *)ex_data(x, k->out[0]))[i] = regexec(&re, a.s[i], 0, NULL, 0) == 0;
  regfree(&re);
  strs_free(&a);
  return rc ? gopt_error_set(err, rc, "out of memory") : GOPT_OK;
}

/* StringSplit: each string split as Python's str.split(delimiter, maxsplit) (no or an empty
 * delimiter: runs of whitespace, ends dropped) into Y [..., width] padded with "" and the counts
 * into Z (INT64, X's shape). width is Y's static last dim; more pieces than that is an error. */
static int run_split(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *del = gopt_node_get_string(G, NODE, "delimiter", "");
  int64_t maxs = gopt_node_get_int(G, NODE, "maxsplit", -1), n = ex_numel(x, k->in[0]);
  int64_t w = ex_rank(x, k->out[0]) ? ex_dims(x, k->out[0])[ex_rank(x, k->out[0]) - 1] : 1;
  size_t dl = strlen(del);
  strs a = {0};
  int rc = strs_load(x, k->in[0], &a);
  char **y = rc ? NULL : calloc((size_t)(n * w) + 1, sizeof *y);
  if (!rc && !y) rc = GOPT_ENOMEM;
  for (int64_t i = 0; i < n && !rc; i++) {
    int64_t cnt = 0;
    const char *p = a.s[i];
    while (!rc) {
      const char *e;
      if (!dl) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        e = p;
        if (maxs < 0 || cnt < maxs)
          while (*e && !isspace((unsigned char)*e)) e++;
        else
          e = p + strlen(p);
      } else {
        e = maxs >= 0 && cnt >= maxs ? NULL : strstr(p, del);
        if (!e) e = p + strlen(p);
      }
      if (cnt >= w) {
        rc = ex_node_error(x, NODE, err, GOPT_ESHAPE, "string %lld splits into more than %lld pieces", (long long)i, (long long)w);
        break;
      }
      char *piece = malloc((size_t)(e - p) + 1);
      if (!piece) { rc = GOPT_ENOMEM; break; }
      memcpy(piece, p, (size_t)(e - p));
      piece[e - p] = 0;
      y[i * w + cnt++] = piece;
      if (!*e) break;
      p = e + (dl ? dl : 0);
    }
    if (k->n_out > 1 && k->out[1] >= 0) ((int64_t *)ex_data(x, k->out[1]))[i] = cnt;
  }
  for (int64_t i = 0; !rc && i < n * w; i++)
    if (!y[i] && !(y[i] = calloc(1, 1))) rc = GOPT_ENOMEM;
  if (!rc) rc = strs_store(x, k->out[0], y, n * w);
  strs c = {n * w, y};
  if (y) strs_free(&c);
  strs_free(&a);
  if (rc == GOPT_ENOMEM) return gopt_error_set(err, rc, "out of memory");
  return rc;
}

/* ---- dispatch (exec.c) ------------------------------------------------------------------------------------ */

int ex_string_handles(const gopt_exec *x, int32_t n) {
  const gopt_node *nd = &x->g->nodes.a[n];
  const char *t = gopt_node_type(x->g, n);
  if (!strcmp(t, "StringNormalizer") || !strcmp(t, "StringConcat") || !strcmp(t, "RegexFullMatch") ||
      !strcmp(t, "StringSplit") || !strcmp(t, "ai.onnx.ml::LabelEncoder"))
    return 1;
  if (!strcmp(t, "Equal")) return nd->n_in == 2 && ex_dtype(x, gopt_node_input(x->g, n, 0)) == GOPT_DT_STRING;
  if (strcmp(t, "Cast") && strcmp(t, "CastLike") && strcmp(t, "Identity")) return 0;
  int32_t in = nd->n_in ? gopt_node_input(x->g, n, 0) : -1, out = nd->n_out ? gopt_node_output(x->g, n, 0) : -1;
  return (in >= 0 && ex_dtype(x, in) == GOPT_DT_STRING) || (out >= 0 && ex_dtype(x, out) == GOPT_DT_STRING);
}

/* ---- ai.onnx.ml LabelEncoder ------------------------------------------------------------------------------ */

/* One side of LabelEncoder's map (keys, values or the default): strings or numbers. */
typedef struct le_side {
  int is_str;
  strs s;   /* is_str */
  double *v;
  int64_t n;
} le_side;

static void le_free(le_side *a) {
  strs_free(&a->s);
  free(a->v);
}

/* Reads the attribute <p>_strings / <p>_int64s / <p>_floats / <p>_tensor (default: <p>_string /
 * _int64 / _float / _tensor, single values) into *a; a->n = 0 when none is given. */
static int le_load(gopt_exec *x, ex_kernel *k, const char *p, int single, le_side *a) {
  char nm[48];
  const gopt_attr *at;
  memset(a, 0, sizeof *a);
  snprintf(nm, sizeof nm, "%s_tensor", p);
  if ((at = gopt_node_attr(G, NODE, nm)) && at->kind == GOPT_ATTR_TENSOR && at->v.tensor >= 0) {
    if (G->tensors.a[at->v.tensor].dtype == GOPT_DT_STRING) {
      a->is_str = 1;
      int rc = strs_load(x, at->v.tensor, &a->s);
      a->n = a->s.n;
      return rc;
    }
    a->v = ref_attr_values(x, NODE, nm, &a->n);
    return a->n < 0 ? GOPT_ENOMEM : GOPT_OK;
  }
  snprintf(nm, sizeof nm, single ? "%s_string" : "%s_strings", p);
  if ((at = gopt_node_attr(G, NODE, nm))) {
    a->is_str = 1;
    a->n = a->s.n = at->kind == GOPT_ATTR_STRINGS ? (int64_t)at->n : 1;
    if (!(a->s.s = calloc((size_t)a->n + 1, sizeof *a->s.s))) return GOPT_ENOMEM;
    for (int64_t i = 0; i < a->n; i++) {
      const char *str = at->kind == GOPT_ATTR_STRINGS ? gopt_graph_str(G, G->strids.a[at->v.off + (size_t)i])
                                                      : gopt_node_get_string(G, NODE, nm, "");
      if (!(a->s.s[i] = strdup(str))) return GOPT_ENOMEM;
    }
    return GOPT_OK;
  }
  const char *num[2] = {single ? "%s_int64" : "%s_int64s", single ? "%s_float" : "%s_floats"};
  for (int j = 0; j < 2; j++) {
    snprintf(nm, sizeof nm, num[j], p);
    if (!(at = gopt_node_attr(G, NODE, nm))) continue;
    if (at->kind == GOPT_ATTR_INT || at->kind == GOPT_ATTR_FLOAT) {
      if (!(a->v = malloc(sizeof *a->v))) return GOPT_ENOMEM;
      a->v[0] = at->kind == GOPT_ATTR_INT ? (double)gopt_node_get_int(G, NODE, nm, 0) : gopt_node_get_float(G, NODE, nm, 0);
      a->n = 1;
      return GOPT_OK;
    }
    a->v = ref_attr_values(x, NODE, nm, &a->n);
    return a->n < 0 ? GOPT_ENOMEM : GOPT_OK;
  }
  return GOPT_OK;
}

/* Element i of numeric tensor data d of dtype dt, and storing v there. */
static double num_get(const void *d, int dt, int64_t i) {
  switch (dt) {
    case GOPT_DT_FLOAT: return ((const float *)d)[i];
    case GOPT_DT_DOUBLE: return ((const double *)d)[i];
    case GOPT_DT_INT16: return ((const int16_t *)d)[i];
    case GOPT_DT_INT32: return ((const int32_t *)d)[i];
    default: return (double)((const int64_t *)d)[i];
  }
}
static void num_put(void *d, int dt, int64_t i, double v) {
  switch (dt) {
    case GOPT_DT_FLOAT: ((float *)d)[i] = (float)v; break;
    case GOPT_DT_DOUBLE: ((double *)d)[i] = v; break;
    case GOPT_DT_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case GOPT_DT_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    default: ((int64_t *)d)[i] = (int64_t)v; break;
  }
}

/* LabelEncoder (ai.onnx.ml 2-4): each element of X looked up among the keys (strings or numbers;
 * NaN matches a NaN key), replaced by the value at the same index, or by the default (default_*
 * attributes; else "_Unused", -1 or -0.0 by the output's type). Y has X's shape. */
static int run_label_encoder(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  le_side key, val, def;
  strs in = {0}, outs = {0};
  int32_t X = k->in[0], Y = k->out[0];
  int idt = ex_dtype(x, X), odt = ex_dtype(x, Y), sin = idt == GOPT_DT_STRING, sout = odt == GOPT_DT_STRING;
  int64_t n = ex_numel(x, X);
  int rc = le_load(x, k, "keys", 0, &key);
  if (!rc) rc = le_load(x, k, "values", 0, &val);
  if (!rc) rc = le_load(x, k, "default", 1, &def);
  if (!rc && sin) rc = strs_load(x, X, &in);
  if (!rc && sout && !(outs.s = calloc((size_t)n + 1, sizeof *outs.s))) rc = GOPT_ENOMEM;
  outs.n = sout ? n : 0;
  if (rc) goto done;
  if (key.n != val.n || key.is_str != sin || val.is_str != sout || (def.n && def.is_str != sout)) {
    rc = ex_node_error(x, NODE, err, GOPT_EINVAL,
                       "keys (%lld) and values (%lld) must be as many, of the input's and the output's types",
                       (long long)key.n, (long long)val.n);
    goto done;
  }
  const void *xd = sin ? NULL : ex_data(x, X);
  for (int64_t i = 0; i < n && !rc; i++) {
    int64_t hit = -1;
    double xv = sin ? 0 : num_get(xd, idt, i);
    for (int64_t j = 0; j < key.n && hit < 0; j++)
      if (sin ? !strcmp(in.s[i], key.s.s[j]) : (key.v[j] == xv || (isnan(key.v[j]) && isnan(xv)))) hit = j;
    if (sout) {
      const char *v = hit >= 0 ? val.s.s[hit] : def.n ? def.s.s[0] : "_Unused";
      if (!(outs.s[i] = strdup(v))) rc = GOPT_ENOMEM;
    } else {
      num_put(ex_data(x, Y), odt, i, hit >= 0 ? val.v[hit] : def.n ? def.v[0] : odt == GOPT_DT_FLOAT || odt == GOPT_DT_DOUBLE ? -0.0 : -1);
    }
  }
  if (!rc && sout) rc = strs_store(x, Y, outs.s, n);
done:
  le_free(&key);
  le_free(&val);
  le_free(&def);
  strs_free(&in);
  strs_free(&outs);
  return rc == GOPT_ENOMEM ? gopt_error_set(err, rc, "out of memory") : rc;
}

int ex_prepare_string(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  const char *t = gopt_node_type(G, NODE);
  if (k->n_in < 1 || k->n_out < 1 || k->in[0] < 0)
    return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs an input and an output");
  int sin = ex_dtype(x, k->in[0]) == GOPT_DT_STRING, sout = ex_dtype(x, k->out[0]) == GOPT_DT_STRING;
  if (!strcmp(t, "ai.onnx.ml::LabelEncoder")) {
    k->run = run_label_encoder;
  } else if (!strcmp(t, "StringConcat") || !strcmp(t, "Equal")) {
    if (k->n_in != 2 || k->in[1] < 0 || !sin || ex_dtype(x, k->in[1]) != GOPT_DT_STRING)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "needs two STRING inputs");
    k->run = run_concat_equal;
  } else if (!strcmp(t, "StringSplit")) {
    if (!sin || !sout) return ex_node_error(x, NODE, err, GOPT_EINVAL, "input and output 0 must be STRING");
    k->run = run_split;
  } else if (!strcmp(t, "RegexFullMatch")) {
    if (!sin || ex_dtype(x, k->out[0]) != GOPT_DT_BOOL)
      return ex_node_error(x, NODE, err, GOPT_EINVAL, "input must be STRING and output BOOL");
    k->run = run_regex;
  } else if (!strcmp(t, "StringNormalizer")) {
    if (!sin || !sout) return ex_node_error(x, NODE, err, GOPT_EINVAL, "input and output must be STRING");
    k->run = run_normalizer;
  } else if (sin && sout) {
    k->run = copy_strings;
  } else {
    k->run = sin ? cast_from_string : cast_to_string;
  }
  return GOPT_OK;
}
