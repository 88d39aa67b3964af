/* test_ops_shapes.c: shape inference against onnx. Reads tests/ops/expect_shapes.txt (written by
 * tests/ops/make_expect.py, which builds the same graphs with onnx.helper and runs onnx's shape
 * inference), rebuilds each graph with the IR API, runs gopt_infer_shapes and compares every
 * output's dtype and shape with onnx's (and with numpy's where onnx 1.12 cannot tell). Error cases
 * must fail with GOPT_ESHAPE naming the node; fold cases check which nodes folding removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/graph.h"
#include "gopt/ops.h"
#include "ir/ir_internal.h"

#define MAXTOK 4096

static char *toks[MAXTOK];
static int ntok;

static void split(char *line) {
  ntok = 0;
  for (char *p = strtok(line, " \t\r\n"); p && ntok < MAXTOK; p = strtok(NULL, " \t\r\n")) toks[ntok++] = p;
}

static int is_int(const char *s) {
  if (*s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static int32_t tensor_or_new(gopt_graph *g, const char *name) {
  int32_t t = gopt_graph_find_tensor(g, name);
  if (t < 0) t = gopt_graph_add_tensor(g, name, GOPT_DT_UNDEFINED, -1, NULL, NULL);
  return t;
}

static int32_t find_node(const gopt_graph *g, const char *name) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (strcmp(gopt_node_name(g, (int32_t)n), name) == 0) return (int32_t)n;
  return -1;
}

/* Writes count values parsed from toks[at..] as dtype into a malloc'd buffer. */
static void *parse_values(int dt, int count, int at, size_t *nbytes) {
  size_t es = gopt_dtype_size(dt);
  unsigned char *buf = calloc((size_t)count + 1, es ? es : 1);
  for (int i = 0; i < count; i++) {
    const char *s = toks[at + i];
    unsigned char *q = buf + (size_t)i * es;
    if (dt == GOPT_DT_FLOAT) { float f = strtof(s, NULL); memcpy(q, &f, 4); }
    else if (dt == GOPT_DT_INT64) { int64_t v = strtoll(s, NULL, 10); memcpy(q, &v, 8); }
    else if (dt == GOPT_DT_INT32) { int32_t v = (int32_t)strtol(s, NULL, 10); memcpy(q, &v, 4); }
    else if (dt == GOPT_DT_BOOL) { q[0] = strcmp(s, "True") == 0 || strcmp(s, "1") == 0; }
  }
  *nbytes = (size_t)count * es;
  return buf;
}

/* Compares tensor `name` with rank and dims in toks[at..]. */
static void compare(const char *cs, gopt_graph *g, const char *name, int dt, int rank, int at) {
  int32_t t = gopt_graph_find_tensor(g, name);
  CHECK_MSG(t >= 0, "%s: tensor %s missing", cs, name);
  if (t < 0) return;
  const gopt_tensor *x = &g->tensors.a[t];
  if (dt > 0) CHECK_MSG(x->dtype == dt, "%s: %s dtype %d, onnx %d", cs, name, x->dtype, dt);
  if (rank < 0) return;
  CHECK_MSG(!(x->flags & GOPT_T_NOSHAPE) && x->rank == rank, "%s: %s rank %d%s, expected %d", cs, name,
            x->rank, (x->flags & GOPT_T_NOSHAPE) ? " (unknown)" : "", rank);
  if ((x->flags & GOPT_T_NOSHAPE) || x->rank != rank) return;
  const int64_t *d = gopt_tensor_dims(g, t);
  for (int i = 0; i < rank; i++) {
    const char *e = toks[at + i];
    if (strcmp(e, "?") == 0) continue;
    if (e[0] == '$') {
      const char *sn = d[i] < 0 ? gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])]) : "";
      CHECK_MSG(d[i] < 0 && strcmp(sn, e + 1) == 0, "%s: %s dim %d is %lld/%s, expected symbol %s", cs,
                name, i, (long long)d[i], sn, e + 1);
    } else {
      CHECK_MSG(d[i] == strtoll(e, NULL, 10), "%s: %s dim %d is %lld, expected %s", cs, name, i,
                (long long)d[i], e);
    }
  }
}

int main(void) {
  FILE *f = fopen("tests/ops/expect_shapes.txt", "r");
  CHECK_MSG(f != NULL, "cannot open tests/ops/expect_shapes.txt (run from the source root)");
  if (!f) return check_exit("test_ops_shapes");
  static char line[65536];
  gopt_graph *g = NULL;
  char cname[128] = "";
  int32_t last_node = -1;
  int fold = 0, ran = 0, rc = 0, cases = 0;
  gopt_error err;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    split(line);
    if (ntok == 0) continue;
    const char *k = toks[0];
    if (strcmp(k, "case") == 0) {
      gopt_graph_free(g);
      g = gopt_graph_new(toks[1]);
      snprintf(cname, sizeof cname, "%s", toks[1]);
      gopt_opset os = {gopt_graph_intern(g, ""), strtoll(toks[2], NULL, 10)};
      GOPT_ARR_PUSH(g->opsets, os);
      fold = ran = 0;
      last_node = -1;
      cases++;
    } else if (strcmp(k, "input") == 0 || strcmp(k, "weight") == 0 || strcmp(k, "init") == 0) {
      int dt = atoi(toks[2]), r = atoi(toks[3]);
      int64_t dims[GOPT_MAX_RANK];
      for (int i = 0; i < r; i++)
        dims[i] = is_int(toks[4 + i]) ? strtoll(toks[4 + i], NULL, 10) : GOPT_DIM_SYM(gopt_graph_symbol(g, toks[4 + i]));
      int32_t t = gopt_graph_add_tensor(g, toks[1], dt, r, dims, &err);
      CHECK_MSG(t >= 0, "%s: %s", cname, err.msg);
      if (t < 0) continue;
      if (k[0] == 'i' && k[1] == 'n' && k[2] == 'p') {
        gopt_graph_add_input(g, t);
      } else {
        size_t nb = 0;
        void *data = NULL;
        if (k[0] == 'i') data = parse_values(dt, atoi(toks[4 + r]), 5 + r, &nb);
        else nb = (size_t)gopt_tensor_numel(g, t) * gopt_dtype_size(dt);
        gopt_tensor_set_const(g, t, data, nb, &err);
        g->tensors.a[t].flags |= GOPT_T_INIT | (dt == GOPT_DT_FLOAT ? GOPT_T_PARAM : 0);
        free(data);
      }
    } else if (strcmp(k, "node") == 0) {
      int nin = atoi(toks[3]), nout = atoi(toks[4 + nin]);
      int32_t ins[32], outs[32];
      for (int i = 0; i < nin; i++) ins[i] = strcmp(toks[4 + i], "-") == 0 ? -1 : tensor_or_new(g, toks[4 + i]);
      for (int i = 0; i < nout; i++) outs[i] = tensor_or_new(g, toks[5 + nin + i]);
      last_node = gopt_graph_add_node(g, toks[1], toks[2], nin, ins, nout, outs, &err);
      CHECK_MSG(last_node >= 0, "%s: %s", cname, err.msg);
    } else if (strcmp(k, "attr") == 0 && last_node >= 0) {
      const char *an = toks[1], *kind = toks[2];
      if (strcmp(kind, "i") == 0) gopt_node_set_int(g, last_node, an, strtoll(toks[3], NULL, 10));
      else if (strcmp(kind, "f") == 0) gopt_node_set_float(g, last_node, an, strtod(toks[3], NULL));
      else if (strcmp(kind, "s") == 0) gopt_node_set_string(g, last_node, an, toks[3]);
      else if (strcmp(kind, "ints") == 0) {
        int cnt = atoi(toks[3]);
        int64_t v[64];
        for (int i = 0; i < cnt && i < 64; i++) v[i] = strtoll(toks[4 + i], NULL, 10);
        gopt_node_set_ints(g, last_node, an, v, (size_t)cnt);
      } else if (strcmp(kind, "floats") == 0) {
        int cnt = atoi(toks[3]);
        float v[64];
        for (int i = 0; i < cnt && i < 64; i++) v[i] = strtof(toks[4 + i], NULL);
        gopt_node_set_floats(g, last_node, an, v, (size_t)cnt);
      } else if (strcmp(kind, "tensor") == 0) {
        int dt = atoi(toks[3]);
        int64_t cnt = atoi(toks[4]);
        size_t nb;
        void *data = parse_values(dt, (int)cnt, 5, &nb);
        int32_t t = gopt_graph_add_tensor(g, NULL, dt, 1, &cnt, &err);
        gopt_tensor_set_const(g, t, data, nb, &err);
        g->tensors.a[t].flags |= GOPT_T_ATTR;
        gopt_node_set_tensor(g, last_node, an, t);
        free(data);
      }
    } else if (strcmp(k, "fold") == 0) {
      fold = 1;
    } else if (strcmp(k, "expect") == 0 || strcmp(k, "want") == 0 || strcmp(k, "error") == 0 ||
               strcmp(k, "check") == 0 || strcmp(k, "end") == 0) {
      if (!ran) {
        gopt_infer_opts o = {fold, 1};
        memset(&err, 0, sizeof err);
        rc = gopt_infer_shapes(g, &o, &err);
        ran = 1;
        if (strcmp(k, "error") != 0) CHECK_MSG(rc == 0, "%s: inference failed: %s", cname, err.msg);
      }
      if (strcmp(k, "expect") == 0 && rc == 0) {
        compare(cname, g, toks[1], atoi(toks[2]), atoi(toks[3]), 4);
      } else if (strcmp(k, "want") == 0 && rc == 0) {
        compare(cname, g, toks[1], 0, atoi(toks[2]), 3);
      } else if (strcmp(k, "error") == 0) {
        char quoted[160];
        snprintf(quoted, sizeof quoted, "'%s'", toks[1]);
        CHECK_MSG(rc == GOPT_ESHAPE && strstr(err.msg, quoted), "%s: expected a shape error naming %s, got %d: %s",
                  cname, toks[1], rc, err.msg);
        CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: message is not one line", cname);
      } else if (strcmp(k, "check") == 0) {
        const char *what = toks[1];
        if (strcmp(what, "removed") == 0 || strcmp(what, "alive") == 0) {
          int32_t n = find_node(g, toks[2]);
          CHECK_MSG(n >= 0, "%s: node %s missing", cname, toks[2]);
          if (n >= 0)
            CHECK_MSG(gopt_node_alive(g, n) == (what[0] == 'a'), "%s: node %s should be %s", cname, toks[2], what);
        } else if (strcmp(what, "const") == 0) {
          int32_t t = gopt_graph_find_tensor(g, toks[2]);
          CHECK_MSG(t >= 0 && (g->tensors.a[t].flags & GOPT_T_CONST) && gopt_tensor_data(g, t) &&
                    g->tensors.a[t].producer < 0,
                    "%s: tensor %s should be a folded constant", cname, toks[2]);
        }
      }
    }
  }
  fclose(f);
  gopt_graph_free(g);
  CHECK_MSG(cases >= 50, "only %d cases in the fixture", cases);
  return check_exit("test_ops_shapes");
}
