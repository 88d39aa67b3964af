/* hlo_parse.c: a parser for XLA's HLO text format into the syntax tree of hlo_internal.h. Reads
 * both syntaxes (old: `%` names, typed operands, computation signatures; new: bare names, untyped
 * operands, headers without signatures) with `/ *...* /` comments anywhere, module attributes, and
 * attribute values kept as raw text (balanced brackets and strings). Every error names
 * LABEL:LINE:COL. Text after the last computation that cannot start one (the JavaScript tail of
 * some published dumps) is ignored with a warning. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "hlo/hlo_internal.h"

/* ---- arena --------------------------------------------------------------------------------- */

typedef struct hlo_arena {
  struct hlo_arena *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} hlo_arena;

void *hlo_alloc(hlo_module *m, size_t n) {
  n = (n + 15) & ~(size_t)15;
  hlo_arena *a = m->arena;
  if (!a || a->cap - a->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    hlo_arena *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = a;
    b->used = 0;
    b->cap = cap;
    m->arena = a = b;
  }
  void *p = a->data + a->used;
  a->used += n;
  memset(p, 0, n);
  return p;
}

char *hlo_strndup(hlo_module *m, const char *s, size_t n) {
  char *p = hlo_alloc(m, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

void hlo_module_free(hlo_module *m) {
  if (!m) return;
  for (int i = 0; i < m->n; i++) free(m->comps[i].ins);
  free(m->comps);
  free(m->tables);
  for (hlo_arena *a = m->arena, *b; a; a = b) {
    b = a->next;
    free(a);
  }
  memset(m, 0, sizeof *m);
}

/* ---- types ---------------------------------------------------------------------------------- */

static const struct {
  const char *name;
  int dt;
} dtypes[] = {{"pred", GOPT_DT_BOOL},   {"s8", GOPT_DT_INT8},      {"s16", GOPT_DT_INT16},
              {"s32", GOPT_DT_INT32},   {"s64", GOPT_DT_INT64},    {"u8", GOPT_DT_UINT8},
              {"u16", GOPT_DT_UINT16},  {"u32", GOPT_DT_UINT32},   {"u64", GOPT_DT_UINT64},
              {"f16", GOPT_DT_FLOAT16}, {"bf16", GOPT_DT_BFLOAT16}, {"f32", GOPT_DT_FLOAT},
              {"f64", GOPT_DT_DOUBLE},  {"c64", GOPT_DT_COMPLEX64}, {"c128", GOPT_DT_COMPLEX128},
              {"f8e4m3fn", GOPT_DT_FLOAT8E4M3FN}, {"f8e4m3fnuz", GOPT_DT_FLOAT8E4M3FNUZ},
              {"f8e5m2", GOPT_DT_FLOAT8E5M2}, {"f8e5m2fnuz", GOPT_DT_FLOAT8E5M2FNUZ},
              {"f4e2m1fn", GOPT_DT_FLOAT4E2M1}, {"f8e8m0fnu", GOPT_DT_FLOAT8E8M0},
              {"s4", GOPT_DT_INT4},     {"u4", GOPT_DT_UINT4},     {"s2", GOPT_DT_INT2},
              {"u2", GOPT_DT_UINT2},    {"token", HLO_DT_TOKEN}};

int hlo_dtype_from_name(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0) return dtypes[i].dt;
  return -1;
}

const char *hlo_dtype_name(int dt) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (dtypes[i].dt == dt) return dtypes[i].name;
  return NULL;
}

static int in_list(const char *key, const char *const *l) {
  for (; *l; l++)
    if (!strcmp(key, *l)) return 1;
  return 0;
}

int hlo_is_comp_attr(const char *key) {
  static const char *const l[] = {"to_apply", "calls", "body", "condition", "select", "scatter",
                                  "true_computation", "false_computation", NULL};
  return in_list(key, l);
}

int hlo_is_comp_list_attr(const char *key) {
  static const char *const l[] = {"branch_computations", "called_computations", NULL};
  return in_list(key, l);
}

int hlo_is_ints_attr(const char *key) {
  static const char *const l[] = {"dimensions", "lhs_contracting_dims", "rhs_contracting_dims",
                                  "lhs_batch_dims", "rhs_batch_dims", "dynamic_slice_sizes",
                                  "slice_sizes", "offset_dims", "collapsed_slice_dims",
                                  "start_index_map", "update_window_dims", "inserted_window_dims",
                                  "scatter_dims_to_operand_dims", "operand_batching_dims",
                                  "start_indices_batching_dims", "input_batching_dims",
                                  "scatter_indices_batching_dims", NULL};
  return in_list(key, l);
}

int hlo_is_int_attr(const char *key) {
  static const char *const l[] = {"index", "iota_dimension", "feature_index", "index_vector_dim",
                                  "feature_group_count", "batch_group_count", "exponent_bits",
                                  "mantissa_bits", "k", NULL};
  return in_list(key, l);
}

int hlo_is_float_attr(const char *key) { return !strcmp(key, "epsilon"); }

/* ---- lexer ------------------------------------------------------------------------------------ */

typedef struct lx {
  const char *p, *end, *line_start;
  int line;
  hlo_module *m;
  gopt_error *err;
} lx;

static int lx_err(lx *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int lx_err(lx *l, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return gopt_error_set(l->err, GOPT_EPARSE, "%s:%d:%d: %s", l->m->label, l->line,
                        (int)(l->p - l->line_start) + 1, msg);
}

static int col(const lx *l) { return (int)(l->p - l->line_start) + 1; }

/* Skips blanks and comments; newlines too when nl. Returns -1 on an unterminated comment. */
static int skip(lx *l, int nl) {
  while (l->p < l->end) {
    char c = *l->p;
    if (c == ' ' || c == '\t' || c == '\r') {
      l->p++;
    } else if (c == '\n' && nl) {
      l->p++;
      l->line++;
      l->line_start = l->p;
    } else if (c == '/' && l->p + 1 < l->end && l->p[1] == '*') {
      const char *q = l->p + 2;
      while (q + 1 < l->end && !(q[0] == '*' && q[1] == '/')) {
        if (*q == '\n') {
          if (!nl) return 0; /* a comment spanning lines ends the logical line */
          l->line++;
          l->line_start = q + 1;
        }
        q++;
      }
      if (q + 1 >= l->end) return lx_err(l, "unterminated comment") ? -1 : -1;
      l->p = q + 2;
    } else if (c == '/' && l->p + 1 < l->end && l->p[1] == '/') {
      while (l->p < l->end && *l->p != '\n') l->p++;
    } else {
      break;
    }
  }
  return 0;
}

static int peek(const lx *l) { return l->p < l->end ? (unsigned char)*l->p : -1; }

static int is_name_ch(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

/* A name ([%]chars); returns its length (0 when none) with the start in *s (without '%'). */
static size_t lex_name(lx *l, const char **s) {
  if (peek(l) == '%') l->p++;
  *s = l->p;
  while (l->p < l->end && is_name_ch((unsigned char)*l->p)) l->p++;
  return (size_t)(l->p - *s);
}

static int expect(lx *l, char c, const char *what) {
  if (skip(l, 1)) return -1;
  if (peek(l) != c) return lx_err(l, "expected '%c' %s", c, what);
  l->p++;
  return 0;
}

/* ---- shapes ------------------------------------------------------------------------------------- */

/* Skips a balanced {...} (layouts). */
static int skip_braces(lx *l) {
  int depth = 0;
  do {
    if (l->p >= l->end) return lx_err(l, "unbalanced '{'");
    if (*l->p == '{') depth++;
    if (*l->p == '}') depth--;
    if (*l->p == '\n') return lx_err(l, "unbalanced '{' in a layout");
    l->p++;
  } while (depth > 0);
  return 0;
}

static int parse_shape(lx *l, hlo_shape *sh, int depth) {
  memset(sh, 0, sizeof *sh);
  if (skip(l, 1)) return -1;
  if (depth > 32) return lx_err(l, "tuple shapes nest too deeply");
  if (peek(l) == '(') {
    hlo_shape tmp[64], *big = NULL;
    int n = 0, cap = 64, rc = 0;
    l->p++;
    sh->tuple = 1;
    if (skip(l, 1)) return -1;
    while (peek(l) != ')') {
      hlo_shape e;
      if ((rc = parse_shape(l, &e, depth + 1))) break;
      if (n == cap) {
        hlo_shape *nb = hlo_alloc(l->m, sizeof *nb * (size_t)cap * 2);
        if (!nb) { rc = lx_err(l, "out of memory"); break; }
        memcpy(nb, big ? big : tmp, sizeof *nb * (size_t)n);
        big = nb;
        cap *= 2;
      }
      (big ? big : tmp)[n++] = e;
      if (skip(l, 1)) return -1;
      if (peek(l) == ',') {
        l->p++;
        if (skip(l, 1)) return -1;
      } else if (peek(l) != ')') {
        rc = lx_err(l, "expected ',' or ')' in a tuple shape");
        break;
      }
    }
    if (rc) return rc;
    l->p++;
    sh->n = n;
    sh->elems = n ? hlo_alloc(l->m, sizeof *sh->elems * (size_t)n) : NULL;
    if (n && !sh->elems) return lx_err(l, "out of memory");
    if (n) memcpy(sh->elems, big ? big : tmp, sizeof *sh->elems * (size_t)n);
    return 0;
  }
  const char *s = l->p;
  while (l->p < l->end && ((*l->p >= 'a' && *l->p <= 'z') || (*l->p >= '0' && *l->p <= '9'))) l->p++;
  size_t n = (size_t)(l->p - s);
  if (n == 0) return lx_err(l, "expected a shape");
  int dt = hlo_dtype_from_name(s, n);
  if (dt < 0) {
    l->p = s;
    return lx_err(l, "unsupported element type '%.*s'", (int)(n > 20 ? 20 : n), s);
  }
  sh->dtype = dt;
  if (peek(l) != '[') return lx_err(l, "expected '[' after the element type");
  l->p++;
  while (peek(l) != ']') {
    if (sh->rank >= GOPT_MAX_RANK) return lx_err(l, "rank exceeds %d", GOPT_MAX_RANK);
    if (peek(l) == '<' && l->p + 1 < l->end && l->p[1] == '=') l->p += 2; /* dynamic bound */
    if (peek(l) == '?') return lx_err(l, "unbounded dynamic dimensions are not supported");
    int64_t v = 0;
    const char *d0 = l->p;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
      if (v > ((int64_t)1 << 40)) return lx_err(l, "dimension too large");
      v = v * 10 + (*l->p++ - '0');
    }
    if (l->p == d0) return lx_err(l, "expected a dimension");
    sh->dims[sh->rank++] = v;
    if (peek(l) == ',') l->p++;
    else if (peek(l) != ']') return lx_err(l, "expected ',' or ']' in dimensions");
  }
  l->p++;
  if (peek(l) == '{' && skip_braces(l)) return -1; /* layout */
  return 0;
}

int hlo_parse_shape_str(hlo_module *m, const char *s, hlo_shape *sh, const char **end) {
  gopt_error e = {0};
  lx l = {s, s + strlen(s), s, 1, m, &e};
  int rc = parse_shape(&l, sh, 0);
  *end = l.p;
  return rc ? -1 : 0;
}

/* ---- raw values ------------------------------------------------------------------------------------ */

/* Raw text of an attribute value: up to a ',' / ')' / newline at bracket depth 0. Newlines inside
 * brackets are kept. */
static int raw_value(lx *l, const char **out) {
  const char *s = l->p;
  int depth = 0;
  while (l->p < l->end) {
    char c = *l->p;
    if (c == '"') {
      l->p++;
      while (l->p < l->end && *l->p != '"') {
        if (*l->p == '\\' && l->p + 1 < l->end) l->p++;
        if (*l->p == '\n') return lx_err(l, "unterminated string");
        l->p++;
      }
      if (l->p >= l->end) return lx_err(l, "unterminated string");
      l->p++;
      continue;
    }
    if (c == '/' && l->p + 1 < l->end && l->p[1] == '*') { /* a comment ("/ *index=5* /") */
      const char *q = l->p + 2;
      while (q + 1 < l->end && !(q[0] == '*' && q[1] == '/') && *q != '\n') q++;
      if (q + 1 >= l->end || *q == '\n') return lx_err(l, "unterminated comment in a value");
      l->p = q + 2;
      continue;
    }
    if (c == '{' || c == '(' || c == '[') depth++;
    if (c == '}' || c == ')' || c == ']') {
      if (depth == 0) break;
      depth--;
    }
    if (depth == 0 && (c == ',' || c == '\n')) break;
    if (c == '\n') {
      l->line++;
      l->line_start = l->p + 1;
    }
    l->p++;
  }
  if (depth) return lx_err(l, "unbalanced brackets in a value");
  const char *e = l->p;
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
  if (e == s) return lx_err(l, "expected a value");
  if (!(*out = hlo_strndup(l->m, s, (size_t)(e - s)))) return lx_err(l, "out of memory");
  return 0;
}

/* key=value pairs after ',' until the end of the logical line. */
static int parse_attrs(lx *l, hlo_attr **attrs, int *n_attrs) {
  hlo_attr tmp[64];
  int n = 0;
  for (;;) {
    if (skip(l, 0)) return -1;
    if (peek(l) != ',') break;
    l->p++;
    if (skip(l, 1)) return -1;
    if (n == 64) return lx_err(l, "more than 64 attributes");
    tmp[n].line = l->line;
    tmp[n].col = col(l);
    const char *k = l->p;
    while (l->p < l->end && is_name_ch((unsigned char)*l->p)) l->p++;
    if (l->p == k) return lx_err(l, "expected an attribute name");
    if (!(tmp[n].key = hlo_strndup(l->m, k, (size_t)(l->p - k)))) return lx_err(l, "out of memory");
    if (skip(l, 0)) return -1;
    if (peek(l) != '=') return lx_err(l, "expected '=' after attribute '%s'", tmp[n].key);
    l->p++;
    if (skip(l, 0)) return -1;
    if (raw_value(l, &tmp[n].val)) return -1;
    for (int i = 0; i < n; i++)
      if (!strcmp(tmp[i].key, tmp[n].key))
        return lx_err(l, "attribute '%s' given twice", tmp[n].key);
    n++;
  }
  *n_attrs = n;
  *attrs = n ? hlo_alloc(l->m, sizeof **attrs * (size_t)n) : NULL;
  if (n && !*attrs) return lx_err(l, "out of memory");
  if (n) memcpy(*attrs, tmp, sizeof **attrs * (size_t)n);
  return 0;
}

/* ---- instructions --------------------------------------------------------------------------------- */

/* True when an operand starts with a shape (old syntax): a dtype name followed by '[', or '('. */
static int operand_has_shape(const lx *l) {
  if (peek(l) == '(') return 1;
  const char *q = l->p;
  while (q < l->end && ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9'))) q++;
  return q < l->end && *q == '[' && hlo_dtype_from_name(l->p, (size_t)(q - l->p)) >= 0;
}

static int parse_operands(lx *l, hlo_instr *in) {
  const char **tmp = NULL;
  int n = 0, cap = 0, rc = 0;
  if (skip(l, 1)) return -1;
  while (peek(l) != ')') {
    if (operand_has_shape(l)) {
      hlo_shape sh;
      if ((rc = parse_shape(l, &sh, 0))) break;
      if ((rc = skip(l, 1))) break;
    }
    const char *s;
    size_t len = lex_name(l, &s);
    if (!len) { rc = lx_err(l, "expected an operand name"); break; }
    while (peek(l) == '#') { /* "x#1": element 1 of tuple x (and "x#1#0" below it) */
      const char *d = ++l->p;
      while (l->p < l->end && *l->p >= '0' && *l->p <= '9' && l->p - d < 9) l->p++;
      if (l->p == d || (l->p < l->end && *l->p >= '0' && *l->p <= '9')) break;
      len = (size_t)(l->p - s);
    }
    if (s + len != l->p) { rc = lx_err(l, "expected a tuple index after '#'"); break; }
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      const char **nt = realloc(tmp, sizeof *nt * (size_t)cap);
      if (!nt) { rc = lx_err(l, "out of memory"); break; }
      tmp = nt;
    }
    if (!(tmp[n++] = hlo_strndup(l->m, s, len))) { rc = lx_err(l, "out of memory"); break; }
    if ((rc = skip(l, 1))) break;
    if (peek(l) == ',') {
      l->p++;
      if ((rc = skip(l, 1))) break;
    } else if (peek(l) != ')') {
      rc = lx_err(l, "expected ',' or ')' after operand '%s'", tmp[n - 1]);
      break;
    }
  }
  if (!rc) {
    l->p++;
    in->n_ops = n;
    in->ops = n ? hlo_alloc(l->m, sizeof *in->ops * (size_t)n) : NULL;
    if (n && !in->ops) rc = lx_err(l, "out of memory");
    else if (n) memcpy(in->ops, tmp, sizeof *in->ops * (size_t)n);
  }
  free(tmp);
  return rc;
}

/* The literal of constant(...): raw text up to the matching ')'. */
static int parse_literal(lx *l, hlo_instr *in) {
  const char *s = l->p;
  int depth = 0;
  while (l->p < l->end) {
    char c = *l->p;
    if (c == '(' || c == '{') depth++;
    if (c == '}' ) depth--;
    if (c == ')') {
      if (depth == 0) break;
      depth--;
    }
    if (c == '\n') {
      l->line++;
      l->line_start = l->p + 1;
    }
    l->p++;
  }
  if (l->p >= l->end) return lx_err(l, "unterminated constant literal");
  if (!(in->literal = hlo_strndup(l->m, s, (size_t)(l->p - s)))) return lx_err(l, "out of memory");
  l->p++;
  return 0;
}

static int parse_instr(lx *l, hlo_instr *in) {
  memset(in, 0, sizeof *in);
  in->line = l->line;
  in->col = col(l);
  if (l->end - l->p > 5 && !memcmp(l->p, "ROOT", 4) && (l->p[4] == ' ' || l->p[4] == '\t')) {
    in->root = 1;
    l->p += 4;
    if (skip(l, 0)) return -1;
  }
  const char *s;
  size_t len = lex_name(l, &s);
  if (!len) return lx_err(l, "expected an instruction name");
  if (!(in->name = hlo_strndup(l->m, s, len))) return lx_err(l, "out of memory");
  if (skip(l, 0)) return -1;
  if (peek(l) != '=') return lx_err(l, "expected '=' after instruction name '%s'", in->name);
  l->p++;
  if (skip(l, 0)) return -1;
  const char *st = l->p;
  if (parse_shape(l, &in->shape, 0)) return -1;
  if (!(in->shape_text = hlo_strndup(l->m, st, (size_t)(l->p - st)))) return lx_err(l, "out of memory");
  if (skip(l, 0)) return -1;
  s = l->p;
  while (l->p < l->end && ((*l->p >= 'a' && *l->p <= 'z') || *l->p == '-' || *l->p == '_' ||
                           (*l->p >= '0' && *l->p <= '9')))
    l->p++;
  if (l->p == s) return lx_err(l, "expected an opcode");
  if (!(in->opcode = hlo_strndup(l->m, s, (size_t)(l->p - s)))) return lx_err(l, "out of memory");
  if (peek(l) != '(') return lx_err(l, "expected '(' after opcode '%s'", in->opcode);
  l->p++;
  if (!strcmp(in->opcode, "constant")) {
    if (parse_literal(l, in)) return -1;
  } else if (!strcmp(in->opcode, "parameter")) {
    if (skip(l, 0)) return -1;
    int64_t v = 0;
    const char *d0 = l->p;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9' && v < 100000000) v = v * 10 + (*l->p++ - '0');
    if (l->p == d0) return lx_err(l, "expected a parameter number");
    in->param = v;
    if (expect(l, ')', "after the parameter number")) return -1;
  } else if (parse_operands(l, in)) {
    return -1;
  }
  return parse_attrs(l, &in->attrs, &in->n_attrs);
}

/* ---- computations and module --------------------------------------------------------------------- */

static int parse_comp(lx *l, hlo_comp *c) {
  memset(c, 0, sizeof *c);
  c->line = l->line;
  c->col = col(l);
  if (l->end - l->p > 6 && !memcmp(l->p, "ENTRY", 5) && (l->p[5] == ' ' || l->p[5] == '%')) {
    c->entry = 1;
    l->p += 5;
    if (skip(l, 1)) return -1;
  }
  const char *s;
  size_t len = lex_name(l, &s);
  if (!len) return lx_err(l, "expected a computation name");
  if (!(c->name = hlo_strndup(l->m, s, len))) return lx_err(l, "out of memory");
  if (skip(l, 1)) return -1;
  if (peek(l) == '(') { /* signature: names and shapes; the parameters say the same */
    int depth = 0;
    do {
      if (l->p >= l->end) return lx_err(l, "unterminated computation signature");
      if (*l->p == '(') depth++;
      if (*l->p == ')') depth--;
      if (*l->p == '\n') {
        l->line++;
        l->line_start = l->p + 1;
      }
      l->p++;
    } while (depth > 0);
    if (skip(l, 1)) return -1;
  }
  if (l->end - l->p >= 2 && l->p[0] == '-' && l->p[1] == '>') {
    hlo_shape sh;
    l->p += 2;
    if (parse_shape(l, &sh, 0)) return -1;
  }
  if (expect(l, '{', "to open the computation body")) return -1;
  int cap = 0;
  for (;;) {
    if (skip(l, 1)) return -1;
    if (peek(l) == '}') {
      l->p++;
      break;
    }
    if (peek(l) < 0) return lx_err(l, "computation '%s' is not closed with '}'", c->name);
    if (c->n == cap) {
      cap = cap ? cap * 2 : 16;
      hlo_instr *ni = realloc(c->ins, sizeof *ni * (size_t)cap);
      if (!ni) return lx_err(l, "out of memory");
      c->ins = ni;
    }
    if (parse_instr(l, &c->ins[c->n])) return -1;
    c->n++;
  }
  return parse_attrs(l, &c->attrs, &c->n_attrs); /* "}, execution_thread=..." */
}

/* True when the text at l is a header table's name: a bare word alone on its line. */
static int at_table(const lx *l) {
  const char *q = l->p;
  if (q < l->end && (*q == '%' || (*q >= '0' && *q <= '9'))) return 0;
  while (q < l->end && is_name_ch((unsigned char)*q)) q++;
  if (q == l->p || (q - l->p == 5 && !memcmp(l->p, "ENTRY", 5))) return 0;
  while (q < l->end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
  return q >= l->end || *q == '\n';
}

/* End of the first token of v: a "string" or a balanced {...} (strings inside skipped). */
static const char *one_token(const char *v) {
  int depth = 0;
  do {
    if (*v == '"') {
      for (v++; *v && *v != '"'; v++)
        if (*v == '\\' && v[1]) v++;
      if (!*v) return v;
    } else if (*v == '{') {
      depth++;
    } else if (*v == '}') {
      depth--;
    }
    v++;
  } while (*v && depth > 0);
  return v;
}

/* A header table: NAME, then rows "ID VALUE" (VALUE a string or {...}) one per line, kept as
 * text in t->rows. */
static int parse_table(lx *l, hlo_table *t) {
  const char *s;
  t->line = l->line;
  t->col = col(l);
  size_t n = lex_name(l, &s);
  char *rows = NULL;
  size_t len = 0;
  int rc = 0;
  if (!(t->name = hlo_strndup(l->m, s, n))) return lx_err(l, "out of memory");
  for (;;) {
    if ((rc = skip(l, 1))) break;
    if (peek(l) < '0' || peek(l) > '9') break;
    const char *r0 = l->p, *v;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') l->p++;
    if (peek(l) != ' ' && peek(l) != '\t') { rc = lx_err(l, "table '%s': expected ' ' after the row id", t->name); break; }
    if ((rc = skip(l, 0))) break;
    if (peek(l) != '"' && peek(l) != '{') { rc = lx_err(l, "table '%s': expected a string or {...}", t->name); break; }
    const char *v0 = l->p;
    if ((rc = raw_value(l, &v))) break;
    if (one_token(v) != v + strlen(v) || ((rc = skip(l, 0)) == 0 && peek(l) >= 0 && peek(l) != '\n')) {
      l->p = v0 + (one_token(v) - v);
      rc = lx_err(l, "table '%s': expected the end of the row", t->name);
      break;
    }
    size_t rl = (size_t)(l->p - r0);
    while (rl && (r0[rl - 1] == ' ' || r0[rl - 1] == '\t' || r0[rl - 1] == '\r')) rl--;
    char *nr = realloc(rows, len + rl + 2);
    if (!nr) { rc = lx_err(l, "out of memory"); break; }
    rows = nr;
    if (len) rows[len++] = '\n';
    memcpy(rows + len, r0, rl);
    len += rl;
  }
  if (!rc && !(t->rows = hlo_strndup(l->m, rows ? rows : "", len))) rc = lx_err(l, "out of memory");
  free(rows);
  return rc ? -1 : 0;
}

int hlo_parse(const char *text, size_t len, const char *label, hlo_module *m, gopt_error *err) {
  lx l = {text, text + len, text, 1, m, err};
  m->label = label;
  for (const char *q = text; q < text + len; q++) { /* control bytes (NUL included): not text */
    unsigned char ch = (unsigned char)*q;
    if (ch == '\n') {
      l.line++;
      l.line_start = q + 1;
    } else if (ch < 0x20 && ch != '\t' && ch != '\r') {
      l.p = q;
      return lx_err(&l, "control byte 0x%02x: not HLO text", ch);
    }
  }
  l.line = 1;
  l.line_start = text;
  if (skip(&l, 1)) return GOPT_EPARSE;
  if (l.end - l.p < 10 || memcmp(l.p, "HloModule", 9) || (l.p[9] != ' ' && l.p[9] != '\t'))
    return lx_err(&l, "not an HLO module (expected 'HloModule NAME')");
  l.p += 9;
  if (skip(&l, 0)) return GOPT_EPARSE;
  const char *s;
  size_t n = lex_name(&l, &s);
  if (!n) return lx_err(&l, "expected the module name");
  if (!(m->name = hlo_strndup(m, s, n))) return lx_err(&l, "out of memory");
  if (parse_attrs(&l, &m->attrs, &m->n_attrs)) return GOPT_EPARSE;
  int cap = 0, tcap = 0;
  for (;;) {
    if (skip(&l, 1)) return GOPT_EPARSE;
    int c = peek(&l);
    if (c < 0) break;
    if (m->n > 0 && c != '%' && !is_name_ch(c)) {
      gopt_warn("%s:%d:%d: ignoring the text after the last computation", label, l.line, col(&l));
      break;
    }
    if (at_table(&l)) {
      if (m->n_tables == tcap) {
        tcap = tcap ? tcap * 2 : 4;
        hlo_table *nt = realloc(m->tables, sizeof *nt * (size_t)tcap);
        if (!nt) return lx_err(&l, "out of memory");
        m->tables = nt;
      }
      memset(&m->tables[m->n_tables], 0, sizeof *m->tables);
      if (parse_table(&l, &m->tables[m->n_tables++])) return GOPT_EPARSE;
      continue;
    }
    if (m->n == cap) {
      cap = cap ? cap * 2 : 8;
      hlo_comp *nc = realloc(m->comps, sizeof *nc * (size_t)cap);
      if (!nc) return lx_err(&l, "out of memory");
      m->comps = nc;
    }
    m->comps[m->n].ins = NULL;
    m->comps[m->n].n = 0;
    int rc = parse_comp(&l, &m->comps[m->n]);
    m->n++; /* counted even on failure so that hlo_module_free frees its instructions */
    if (rc) return GOPT_EPARSE;
  }
  if (m->n == 0) return lx_err(&l, "the module has no computation");
  return 0;
}
