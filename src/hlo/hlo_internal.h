/* hlo_internal.h: the HLO text parser's syntax tree (hlo_parse.c), shared with the importer
 * (hlo_import.c) and the exporter (hlo_export.c). Internal to src/hlo. */
#ifndef GOPT_HLO_INTERNAL_H
#define GOPT_HLO_INTERNAL_H

#include <stddef.h>
#include <string.h>
#include <stdint.h>

#include "gopt/graph.h"

/* dtype used for HLO's token type (HLO has no strings, so STRING is free to mean token). */
#define HLO_DT_TOKEN GOPT_DT_STRING

/* A shape: an array (dtype, dims) or a tuple of shapes. */
typedef struct hlo_shape {
  int tuple;                 /* 1: elems[0..n) */
  int dtype;                 /* gopt dtype (HLO_DT_TOKEN for token) */
  int rank;
  int64_t dims[GOPT_MAX_RANK];
  int n;
  struct hlo_shape *elems;   /* in the parse arena */
} hlo_shape;

typedef struct hlo_attr {
  const char *key, *val;     /* val: the raw text after '=' */
  int line, col;
} hlo_attr;

typedef struct hlo_instr {
  const char *name, *opcode;
  int root;
  hlo_shape shape;
  const char *shape_text;    /* the shape as written (layouts included) */
  const char **ops;          /* operand names (no '%'); "x#1#0" names an element of tuple x */
  int n_ops;
  const char *literal;       /* constant: raw literal text; NULL otherwise */
  int64_t param;             /* parameter number */
  hlo_attr *attrs;
  int n_attrs;
  int line, col;
} hlo_instr;

typedef struct hlo_comp {
  const char *name;
  int entry, line, col;
  hlo_instr *ins;
  int n;
  hlo_attr *attrs;           /* after the closing '}': ", execution_thread=..." */
  int n_attrs;
} hlo_comp;

/* A header table between the HloModule line and the computations ("FileNames", "StackFrames"):
 * rows "ID VALUE" one per line, kept as text. */
typedef struct hlo_table {
  const char *name, *rows;   /* rows: "1 \"a.py\"\n2 {...}" (no trailing newline); "" when empty */
  int line, col;
} hlo_table;

typedef struct hlo_module {
  const char *name;
  hlo_attr *attrs;
  int n_attrs;
  hlo_table *tables;
  int n_tables;
  hlo_comp *comps;
  int n;
  struct hlo_arena *arena;
  const char *label;
} hlo_module;

/* Parses text into m (zeroed by the caller). Errors: "LABEL:LINE:COL: message". */
int hlo_parse(const char *text, size_t len, const char *label, hlo_module *m, gopt_error *err);
void hlo_module_free(hlo_module *m);

/* Parses a shape from s ("f32[2,3]{1,0}", "(s32[], f32[4])"); *end receives where it stopped.
 * Returns 0, or -1 when s is not a shape (the arena holds tuple elements). */
int hlo_parse_shape_str(hlo_module *m, const char *s, hlo_shape *sh, const char **end);

/* HLO type name <-> gopt dtype ("f32" <-> FLOAT; token <-> HLO_DT_TOKEN); -1 / NULL when none. */
int hlo_dtype_from_name(const char *s, size_t n);
const char *hlo_dtype_name(int dt);

/* Allocation in the module's arena (zeroed); NULL when out of memory. */
void *hlo_alloc(hlo_module *m, size_t n);
char *hlo_strndup(hlo_module *m, const char *s, size_t n);

/* Attribute keys whose value names computations: one ("to_apply=%c") or a list
 * ("branch_computations={%a, %b}"). */
int hlo_is_comp_attr(const char *key);
int hlo_is_comp_list_attr(const char *key);
/* Keys stored as INTS ("dimensions={0,1}"), INT, FLOAT. */
int hlo_is_ints_attr(const char *key);
int hlo_is_int_attr(const char *key);
int hlo_is_float_attr(const char *key);

/* Attribute names gopt itself derives on imported nodes (convert's "to", transpose's "perm", ...)
 * and its own bookkeeping: export leaves them out, so a text attribute of that name is refused on
 * import rather than lost on the way back. */
static inline int hlo_attr_reserved(const char *k) {
  return !strcmp(k, "to") || !strcmp(k, "perm") || !strcmp(k, "axis") || !strcmp(k, "equation") ||
         !strncmp(k, "hlo.", 4);
}

#endif
