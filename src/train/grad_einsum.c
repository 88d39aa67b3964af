/* grad_einsum.c: the gradient rule of Einsum. For Y = einsum("A,B,...->C", x0, x1, ...), the
 * gradient of operand i is one more Einsum: dY (subscripts C) with every other operand (their own
 * subscripts) contracted to operand i's subscripts, "C,B,...->A" for i = 0. That holds when A
 * names each axis once (no diagonal) and every letter of A also appears in C or in another operand
 * (an axis summed within x_i alone would need a broadcast back); an ellipsis is not handled. Each
 * of those cases is one line saying so. docs/TRAINING.md lists the rule. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "train/train_internal.h"

#define EQ_MAX 256   /* equation characters */
#define EQ_TERMS 16  /* operands */

typedef struct eq_terms {
  char buf[EQ_MAX];
  const char *in[EQ_TERMS]; /* each operand's subscripts (NUL-terminated in buf) */
  int n_in;
  char out[64];             /* the output's subscripts */
} eq_terms;

/* The implicit output of numpy's einsum: the letters that appear once over all operands, in
 * alphabetical order (upper case before lower case, as in ASCII). */
static void implicit_out(eq_terms *t) {
  int cnt[128] = {0}, k = 0;
  for (int i = 0; i < t->n_in; i++)
    for (const char *p = t->in[i]; *p; p++) cnt[(unsigned char)*p]++;
  for (int c = 0; c < 128 && k < (int)sizeof t->out - 1; c++)
    if (cnt[c] == 1) t->out[k++] = (char)c;
  t->out[k] = 0;
}

/* Splits equation eq (spaces ignored) into t. Returns 0, or an error through b. */
static int eq_parse(tb *b, const char *eq, eq_terms *t) {
  size_t k = 0;
  for (const char *p = eq; *p; p++) {
    if (*p == ' ') continue;
    if (k + 1 >= sizeof t->buf) return tb_fail(b, GOPT_EUNSUP, "Einsum equation longer than %d characters", EQ_MAX - 1);
    t->buf[k++] = *p;
  }
  t->buf[k] = 0;
  if (strstr(t->buf, "...")) return tb_fail(b, GOPT_EUNSUP, "Einsum with an ellipsis ('%s') has no gradient rule", eq);
  char *arrow = strstr(t->buf, "->"), *rhs = NULL;
  if (arrow) {
    *arrow = 0;
    rhs = arrow + 2;
  }
  t->n_in = 0;
  for (char *p = t->buf, *q; p; p = q) {
    if ((q = strchr(p, ','))) *q++ = 0;
    if (t->n_in == EQ_TERMS) return tb_fail(b, GOPT_EUNSUP, "Einsum with more than %d operands", EQ_TERMS);
    t->in[t->n_in++] = p;
  }
  for (int i = 0; i < t->n_in; i++)
    for (const char *p = t->in[i]; *p; p++)
      if (!isalpha((unsigned char)*p)) return tb_fail(b, GOPT_EINVAL, "Einsum equation '%s': unexpected '%c'", eq, *p);
  if (!rhs) {
    implicit_out(t);
    return 0;
  }
  if (strlen(rhs) >= sizeof t->out) return tb_fail(b, GOPT_EUNSUP, "Einsum output with too many subscripts");
  for (const char *p = rhs; *p; p++)
    if (!isalpha((unsigned char)*p)) return tb_fail(b, GOPT_EINVAL, "Einsum equation '%s': unexpected '%c'", eq, *p);
  strcpy(t->out, rhs);
  return 0;
}

/* Checks that operand i's gradient is one Einsum (the header's conditions). */
static int eq_check(tb *b, const eq_terms *t, int i, const char *eq) {
  const char *a = t->in[i];
  for (const char *p = a; *p; p++) {
    if (strchr(p + 1, *p))
      return tb_fail(b, GOPT_EUNSUP, "Einsum '%s': operand %d repeats subscript '%c' (a diagonal) and has no gradient rule", eq,
                     i, *p);
    int seen = strchr(t->out, *p) != NULL;
    for (int j = 0; j < t->n_in && !seen; j++) seen = j != i && strchr(t->in[j], *p);
    if (!seen)
      return tb_fail(b, GOPT_EUNSUP, "Einsum '%s': subscript '%c' is summed within operand %d alone and has no gradient rule",
                     eq, *p, i);
  }
  return 0;
}

int tb_rule_einsum(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  const char *eq0 = gopt_node_get_string(g, n, "equation", NULL);
  if (!eq0) return tb_fail(b, GOPT_EINVAL, "Einsum without an equation");
  char eq[EQ_MAX]; /* a copy: adding nodes may move the graph's strings */
  if (strlen(eq0) >= sizeof eq) return tb_fail(b, GOPT_EUNSUP, "Einsum equation longer than %d characters", EQ_MAX - 1);
  strcpy(eq, eq0);
  eq_terms t;
  int rc = eq_parse(b, eq, &t);
  if (rc) return rc;
  int n_in = (int)g->nodes.a[n].n_in;
  if (t.n_in != n_in) return tb_fail(b, GOPT_EINVAL, "Einsum '%s' names %d operands, the node has %d", eq, t.n_in, n_in);
  for (int i = 0; i < n_in; i++) {
    if (!need[i]) continue;
    if ((rc = eq_check(b, &t, i, eq))) return rc;
    char geq[EQ_MAX + 64], nm[32];
    int32_t in[EQ_TERMS], x = g->slots.a[g->nodes.a[n].in + i].tensor, k = 0;
    int len = snprintf(geq, sizeof geq, "%s", t.out);
    in[k++] = d;
    for (int j = 0; j < n_in; j++) {
      if (j == i) continue;
      len += snprintf(geq + len, sizeof geq - (size_t)len, ",%s", t.in[j]);
      in[k++] = g->slots.a[g->nodes.a[n].in + j].tensor;
    }
    snprintf(geq + len, sizeof geq - (size_t)len, "->%s", t.in[i]);
    int32_t y = tb_op_like(b, "Einsum", tb_dname(i, nm, sizeof nm), k, in, x);
    if (y < 0) return b->err->code ? b->err->code : GOPT_EINVAL;
    if (gopt_node_set_string(g, g->tensors.a[y].producer, "equation", geq))
      return tb_fail(b, GOPT_ENOMEM, "out of memory (Einsum gradient)");
    if ((rc = tb_partial(b, x, y))) return rc;
  }
  return 0;
}
