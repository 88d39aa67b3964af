/* test_onnx_import.c: ONNX import of the fixtures made by tests/onnx/make_fixtures.py: raw vs typed
 * initializer fields (identical bytes, checked against the generator's closed-form values),
 * external data present / disabled / missing (one warning) / through symbolic links (refused when
 * they leave the model directory), every Constant node form, an If with sub-graphs reading outer
 * tensors, an opaque op with value_info, symbols, names and opsets. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/onnx_test_util.h"

/* The generator's element values (make_fixtures.py val()). */
static int val(int i) { return (i * 7) % 11 - 5; }

static float get_f32(const void *p, int i) {
  float f;
  memcpy(&f, (const char *)p + 4 * i, 4);
  return f;
}

static uint64_t get_le(const void *p, int i, int size) {
  const unsigned char *b = (const unsigned char *)p + (size_t)i * (size_t)size;
  uint64_t v = 0;
  for (int k = 0; k < size; k++) v |= (uint64_t)b[k] << (8 * k);
  return v;
}

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return (h & 0x8000) ? -v : v;
}

static gopt_graph *load(const char *path, const gopt_onnx_load_opts *o, warn_log *w) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  gopt_set_warn_handler(warn_capture, w);
  int rc = gopt_onnx_load(path, o, &g, &err);
  gopt_set_warn_handler(NULL, NULL);
  CHECK_MSG(rc == 0 && g, "%s: %s", path, err.msg);
  return g;
}

static void test_initializers(void) {
  warn_log w = {0};
  gopt_graph *raw = load(FIX "init_raw.onnx", NULL, &w);
  gopt_graph *typ = load(FIX "init_typed.onnx", NULL, &w);
  CHECK_EQ_INT(w.n, 0);
  if (!raw || !typ) goto done;
  static const char *names[] = {"w_float", "w_double", "w_int8", "w_uint8", "w_int16", "w_uint16",
                                "w_int32", "w_int64", "w_uint32", "w_uint64", "w_bool",
                                "w_float16", "w_complex64", "w_complex128", "w_bfloat16", "w_string"};
  static const int dtypes[] = {GOPT_DT_FLOAT, GOPT_DT_DOUBLE, GOPT_DT_INT8, GOPT_DT_UINT8,
                               GOPT_DT_INT16, GOPT_DT_UINT16, GOPT_DT_INT32, GOPT_DT_INT64,
                               GOPT_DT_UINT32, GOPT_DT_UINT64, GOPT_DT_BOOL, GOPT_DT_FLOAT16,
                               GOPT_DT_COMPLEX64, GOPT_DT_COMPLEX128, GOPT_DT_BFLOAT16, GOPT_DT_STRING};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    int32_t a = gopt_graph_find_tensor(raw, names[k]), b = gopt_graph_find_tensor(typ, names[k]);
    CHECK_MSG(a >= 0 && b >= 0, "%s missing", names[k]);
    if (a < 0 || b < 0) continue;
    const gopt_tensor *x = &raw->tensors.a[a];
    CHECK_EQ_INT(x->dtype, dtypes[k]);
    CHECK_MSG(x->flags & GOPT_T_CONST, "%s not const", names[k]);
    CHECK_MSG(!(x->flags & GOPT_T_INPUT), "%s is an input", names[k]);
    int is_float = dtypes[k] == GOPT_DT_FLOAT || dtypes[k] == GOPT_DT_DOUBLE ||
                   dtypes[k] == GOPT_DT_FLOAT16 || dtypes[k] == GOPT_DT_BFLOAT16;
    CHECK_MSG(!!(x->flags & GOPT_T_PARAM) == is_float, "%s PARAM flag", names[k]);
    CHECK_MSG(x->flags & GOPT_T_INIT, "%s INIT flag", names[k]);
    CHECK_MSG(same_shape(raw, a, typ, b) && same_const(raw, a, typ, b),
              "%s: raw and typed differ", names[k]);
    const void *d = gopt_tensor_data(raw, a);
    CHECK_MSG(d != NULL, "%s has no data", names[k]);
    if (!d) continue;
    if (dtypes[k] == GOPT_DT_STRING) {
      CHECK_EQ_INT(x->rank, 1);
      CHECK_EQ_INT(raw->consts.a[x->cdata].nbytes, 4 + 2 + 4);
      CHECK(memcmp(d, "\x02\0\0\0ab\0\0\0\0", 10) == 0);
      continue;
    }
    CHECK_EQ_INT(x->rank, 2);
    CHECK_EQ_INT(gopt_tensor_dims(raw, a)[0], 2);
    CHECK_EQ_INT(gopt_tensor_dims(raw, a)[1], 3);
    for (int i = 0; i < 6; i++) {
      double want = val(i), got = 0;
      switch (dtypes[k]) {
      case GOPT_DT_FLOAT: got = get_f32(d, i); break;
      case GOPT_DT_DOUBLE: { double v; memcpy(&v, (const char *)d + 8 * i, 8); got = v; break; }
      case GOPT_DT_INT8: got = (int8_t)get_le(d, i, 1); break;
      case GOPT_DT_INT16: got = (int16_t)get_le(d, i, 2); break;
      case GOPT_DT_INT32: got = (int32_t)get_le(d, i, 4); break;
      case GOPT_DT_INT64: got = (double)(int64_t)get_le(d, i, 8); break;
      case GOPT_DT_UINT8: got = (double)get_le(d, i, 1) - 5; break;
      case GOPT_DT_UINT16: got = (double)get_le(d, i, 2) - 5; break;
      case GOPT_DT_UINT32: got = (double)get_le(d, i, 4) - 5; break;
      case GOPT_DT_UINT64: got = (double)get_le(d, i, 8) - 5; break;
      case GOPT_DT_BOOL: got = (double)get_le(d, i, 1); want = val(i) > 0; break;
      case GOPT_DT_FLOAT16: got = half_to_double((uint16_t)get_le(d, i, 2)); break;
      case GOPT_DT_BFLOAT16: { uint32_t u = (uint32_t)get_le(d, i, 2) << 16; float f; memcpy(&f, &u, 4); got = f; break; }
      case GOPT_DT_COMPLEX64:
        CHECK_NEAR(get_f32(d, 2 * i + 1), val(i) + 1, 0);
        got = get_f32(d, 2 * i);
        break;
      case GOPT_DT_COMPLEX128: { double re, im; memcpy(&re, (const char *)d + 16 * i, 8);
        memcpy(&im, (const char *)d + 16 * i + 8, 8); CHECK_NEAR(im, val(i) + 1, 0); got = re; break; }
      }
      CHECK_MSG(got == want, "%s[%d] = %g, want %g", names[k], i, got, want);
    }
  }
  /* Only x is a runtime input; the initializers are not. */
  CHECK_EQ_INT(raw->inputs.n, 1);
  CHECK_EQ_INT(gopt_graph_node_count(raw), 1);
  CHECK_EQ_INT(raw->ir_version, 8);
  CHECK(gopt_graph_hash(raw) == gopt_graph_hash(typ));
done:
  gopt_graph_free(raw);
  gopt_graph_free(typ);
}

static void test_external(void) {
  warn_log w = {0};
  gopt_error err = {0};
  /* Present: bytes loaded from ext_model.data at the recorded offsets. */
  gopt_graph *g = load(FIX "ext_model.onnx", NULL, &w);
  CHECK_EQ_INT(w.n, 0);
  if (g) {
    int32_t W = gopt_graph_find_tensor(g, "W"), B = gopt_graph_find_tensor(g, "B");
    CHECK(W >= 0 && B >= 0);
    const void *dw = W >= 0 ? gopt_tensor_data(g, W) : NULL, *db = B >= 0 ? gopt_tensor_data(g, B) : NULL;
    CHECK(dw && db);
    for (int i = 0; dw && i < 16; i++) CHECK_NEAR(get_f32(dw, i), val(i), 0);
    for (int i = 0; db && i < 4; i++) CHECK_NEAR(get_f32(db, i), val(i + 100), 0);
    CHECK(W >= 0 && (g->tensors.a[W].flags & GOPT_T_PARAM));
  }
  gopt_graph_free(g);

  /* Structure only on request: no bytes, no warning, reference kept. */
  gopt_onnx_load_opts so = {NULL, 0};
  g = load(FIX "ext_model.onnx", &so, &w);
  CHECK_EQ_INT(w.n, 0);
  if (g) {
    int32_t W = gopt_graph_find_tensor(g, "W");
    CHECK(W >= 0 && gopt_tensor_data(g, W) == NULL);
    const gopt_const *k = &g->consts.a[g->tensors.a[W].cdata];
    CHECK(strcmp(gopt_graph_str(g, k->external), "ext_model.data") == 0);
    CHECK_EQ_INT(k->ext_offset, 16);
    CHECK_EQ_INT(k->ext_length, 64);
    CHECK_EQ_INT(k->nbytes, 64);
  }
  gopt_graph_free(g);

  /* Missing file: one warning naming the model, the file and the count; structure kept. */
  w.n = 0;
  g = load(FIX "ext_missing.onnx", NULL, &w);
  CHECK_EQ_INT(w.n, 1);
  CHECK_MSG(strstr(w.last, "ext_missing.onnx") && strstr(w.last, "'missing.data' not found") &&
                strstr(w.last, "(2 initializers)"),
            "warning: %s", w.last);
  if (g) {
    int32_t W = gopt_graph_find_tensor(g, "W"), B = gopt_graph_find_tensor(g, "B");
    CHECK(W >= 0 && B >= 0 && gopt_tensor_data(g, W) == NULL && gopt_tensor_data(g, B) == NULL);
    CHECK_EQ_INT(g->tensors.a[W].rank, 2);
    CHECK_EQ_INT(gopt_tensor_dims(g, W)[0], 4);
    CHECK_EQ_INT(gopt_tensor_dims(g, W)[1], 4);
    CHECK(g->tensors.a[W].flags & GOPT_T_CONST);
    CHECK(strcmp(gopt_graph_str(g, g->consts.a[g->tensors.a[B].cdata].external), "missing.data") == 0);
    CHECK_EQ_INT(gopt_graph_node_count(g), 1);
  }
  gopt_graph_free(g);

  /* From memory: without a base directory nothing is read (one warning); with one it is. */
  void *buf = NULL;
  size_t len = 0;
  FILE *f = fopen(FIX "ext_model.onnx", "rb");
  CHECK(f != NULL);
  if (f) {
    buf = malloc(4096);
    len = fread(buf, 1, 4096, f);
    fclose(f);
  }
  w.n = 0;
  gopt_set_warn_handler(warn_capture, &w);
  g = NULL;
  CHECK_EQ_INT(gopt_onnx_load_mem(buf, len, "mem.onnx", NULL, &g, &err), 0);
  CHECK_EQ_INT(w.n, 1);
  CHECK_MSG(strstr(w.last, "mem.onnx") && strstr(w.last, "ext_model.data"), "warning: %s", w.last);
  CHECK(g && gopt_tensor_data(g, gopt_graph_find_tensor(g, "W")) == NULL);
  gopt_graph_free(g);
  gopt_onnx_load_opts bo = {"tests/onnx/data", 1};
  g = NULL;
  w.n = 0;
  CHECK_EQ_INT(gopt_onnx_load_mem(buf, len, "mem.onnx", &bo, &g, &err), 0);
  CHECK_EQ_INT(w.n, 0);
  CHECK(g && gopt_tensor_data(g, gopt_graph_find_tensor(g, "W")) != NULL);
  gopt_set_warn_handler(NULL, NULL);
  gopt_graph_free(g);
  free(buf);

  /* Sub-byte external data: the file holds 5 INT4 values packed in 3 bytes, unpacked on load. */
  w.n = 0;
  g = load(FIX "ext_int4.onnx", NULL, &w);
  CHECK_EQ_INT(w.n, 0);
  int32_t Q = g ? gopt_graph_find_tensor(g, "W") : -1;
  const int8_t *dq = Q >= 0 ? gopt_tensor_data(g, Q) : NULL;
  static const int8_t want_q[5] = {-8, -1, 0, 3, 7};
  CHECK(dq != NULL && g->consts.a[g->tensors.a[Q].cdata].nbytes == 5);
  for (int i = 0; dq && i < 5; i++) CHECK_EQ_INT(dq[i], want_q[i]);
  gopt_graph_free(g);
}

/* Copies file src to dst; 0 on success. */
static int copy_file(const char *src, const char *dst) {
  FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
  int rc = a && b ? 0 : -1;
  char buf[4096];
  size_t n;
  while (!rc && (n = fread(buf, 1, sizeof buf, a)) > 0)
    if (fwrite(buf, 1, n, b) != n) rc = -1;
  if (a) fclose(a);
  if (b && fclose(b)) rc = -1;
  return rc;
}

/* External data reached through a symbolic link: a link resolving outside the model's directory
 * is refused like '../' (one error line naming the location and where it leads); links that stay
 * inside (relative or absolute) still load the right bytes. */
static void test_external_symlink(void) {
  char root[] = "/tmp/gopt_extlink_XXXXXX", dir[64], sub[128], model[128], out[128], link[128],
       in[256];
  if (!mkdtemp(root)) {
    CHECK_MSG(0, "mkdtemp failed");
    return;
  }
  snprintf(dir, sizeof dir, "%s/model", root);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  snprintf(model, sizeof model, "%s/ext_model.onnx", dir);
  snprintf(out, sizeof out, "%s/outside.data", root);
  snprintf(link, sizeof link, "%s/ext_model.data", dir);
  snprintf(in, sizeof in, "%s/real.data", sub);
  CHECK_EQ_INT(mkdir(dir, 0700), 0);
  CHECK_EQ_INT(mkdir(sub, 0700), 0);
  CHECK_EQ_INT(copy_file(FIX "ext_model.onnx", model), 0);
  CHECK_EQ_INT(copy_file(FIX "ext_model.data", out), 0);
  CHECK_EQ_INT(copy_file(FIX "ext_model.data", in), 0);

  /* relative link leaving the directory: refused */
  CHECK_EQ_INT(symlink("../outside.data", link), 0);
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_onnx_load(model, NULL, &g, &err);
  CHECK(rc != 0 && g == NULL);
  CHECK_MSG(strstr(err.msg, "ext_model.data") && strstr(err.msg, "outside.data") &&
                strstr(err.msg, "outside the model directory") && !strchr(err.msg, '\n'),
            "error: %s", err.msg);
  gopt_graph_free(g);
  g = NULL;
  /* absolute link leaving the directory: refused */
  unlink(link);
  CHECK_EQ_INT(symlink(out, link), 0);
  err = (gopt_error){0};
  CHECK(gopt_onnx_load(model, NULL, &g, &err) != 0 && strstr(err.msg, "outside the model directory"));
  gopt_graph_free(g);
  g = NULL;

  /* links that stay inside: relative and absolute, bytes as in the fixture */
  const char *targets[2] = {"sub/real.data", in};
  for (int k = 0; k < 2; k++) {
    unlink(link);
    CHECK_EQ_INT(symlink(targets[k], link), 0);
    warn_log w = {0};
    g = load(model, NULL, &w);
    CHECK_EQ_INT(w.n, 0);
    int32_t W = g ? gopt_graph_find_tensor(g, "W") : -1;
    const void *dw = W >= 0 ? gopt_tensor_data(g, W) : NULL;
    CHECK_MSG(dw != NULL, "link to %s: no data", targets[k]);
    for (int i = 0; dw && i < 16; i++) CHECK_NEAR(get_f32(dw, i), val(i), 0);
    gopt_graph_free(g);
    g = NULL;
  }
  unlink(link);
  unlink(in);
  unlink(out);
  unlink(model);
  rmdir(sub);
  rmdir(dir);
  rmdir(root);
}

static void test_constants(void) {
  warn_log w = {0};
  gopt_graph *g = load(FIX "constants.onnx", NULL, &w);
  if (!g) return;
  CHECK_EQ_INT(count_nodes_of_type(g, "Constant"), 0);
  CHECK_EQ_INT(gopt_graph_node_count(g), 8);
  struct { const char *name; int dtype, rank; int64_t dim0; } want[] = {
      {"c_value", GOPT_DT_FLOAT, 2, 2}, {"c_float", GOPT_DT_FLOAT, 0, 0},
      {"c_floats", GOPT_DT_FLOAT, 1, 3}, {"c_int", GOPT_DT_INT64, 0, 0},
      {"c_ints", GOPT_DT_INT64, 1, 4}, {"c_string", GOPT_DT_STRING, 0, 0},
      {"c_strings", GOPT_DT_STRING, 1, 2}};
  for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
    int32_t t = gopt_graph_find_tensor(g, want[k].name);
    CHECK_MSG(t >= 0, "%s missing", want[k].name);
    if (t < 0) continue;
    const gopt_tensor *x = &g->tensors.a[t];
    CHECK_EQ_INT(x->dtype, want[k].dtype);
    CHECK_EQ_INT(x->rank, want[k].rank);
    if (x->rank) CHECK_EQ_INT(gopt_tensor_dims(g, t)[0], want[k].dim0);
    CHECK_MSG((x->flags & (GOPT_T_CONST | GOPT_T_PARAM | GOPT_T_INIT)) == GOPT_T_CONST, "%s flags %x",
              want[k].name, x->flags);
    CHECK_EQ_INT(x->producer, -1);
    CHECK(gopt_tensor_data(g, t) != NULL);
  }
  const void *d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_value"));
  for (int i = 0; d && i < 4; i++) CHECK_NEAR(get_f32(d, i), val(i), 0);
  d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_float"));
  CHECK(d && get_f32(d, 0) == 2.5f);
  d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_floats"));
  CHECK(d && get_f32(d, 0) == 1.0f && get_f32(d, 1) == -2.0f && get_f32(d, 2) == 3.5f);
  d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_int"));
  CHECK(d && (int64_t)get_le(d, 0, 8) == -7);
  d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_ints"));
  CHECK(d && (int64_t)get_le(d, 2, 8) == -6 && (int64_t)get_le(d, 3, 8) == 7);
  d = gopt_tensor_data(g, gopt_graph_find_tensor(g, "c_strings"));
  CHECK(d && memcmp(d, "\x01\0\0\0a\x02\0\0\0bc", 11) == 0);
  /* The Add reads the constant directly. */
  int32_t add = find_node(g, "add");
  CHECK(add >= 0 && gopt_node_input(g, add, 1) == gopt_graph_find_tensor(g, "c_value"));
  gopt_graph_free(g);
}

static void test_if_subgraph(void) {
  warn_log w = {0};
  gopt_graph *g = load(FIX "if_model.onnx", NULL, &w);
  if (!g) return;
  int32_t n = find_node(g, "if");
  CHECK(n >= 0);
  if (n < 0) goto done;
  CHECK_EQ_INT(g->nodes.a[n].op, GOPT_OP_IF);
  const gopt_attr *th = gopt_node_attr(g, n, "then_branch"), *el = gopt_node_attr(g, n, "else_branch");
  CHECK(th && th->kind == GOPT_ATTR_GRAPH && el && el->kind == GOPT_ATTR_GRAPH);
  if (!th || !el) goto done;
  const gopt_graph *s = g->subgraphs.a[th->v.graph];
  CHECK(s->parent == g);
  CHECK(strcmp(gopt_graph_str(s, s->name), "then_branch") == 0);
  CHECK_EQ_INT(gopt_graph_node_count(s), 1);
  CHECK_EQ_INT(s->inputs.n, 0);
  CHECK_EQ_INT(s->outputs.n, 1);
  /* Outer-scope references: tensors of the sub-graph named like the outer ones, with their types,
   * no producer, neither inputs nor constants. */
  int32_t x = gopt_graph_find_tensor(s, "x"), wt = gopt_graph_find_tensor(s, "w");
  CHECK(x >= 0 && wt >= 0);
  if (x >= 0 && wt >= 0) {
    CHECK_EQ_INT(s->tensors.a[x].producer, -1);
    CHECK_EQ_INT(s->tensors.a[x].flags & (GOPT_T_INPUT | GOPT_T_CONST), 0);
    CHECK(same_shape(s, x, g, gopt_graph_find_tensor(g, "x")));
    CHECK(same_shape(s, wt, g, gopt_graph_find_tensor(g, "w")));
    char b[32];
    CHECK(strcmp(dim_text(s, x, 0, b, sizeof b), "n") == 0);
  }
  int32_t add = find_node(s, "then_add");
  CHECK(add >= 0 && gopt_node_input(s, add, 0) == x);
  const gopt_graph *e = g->subgraphs.a[el->v.graph];
  CHECK(find_node(e, "else_neg") >= 0);
  CHECK(gopt_graph_find_tensor(e, "w") < 0); /* only names a branch reads are referenced */
  gopt_error err = {0};
  CHECK_MSG(gopt_graph_validate(g, &err) == 0, "%s", err.msg);
done:
  gopt_graph_free(g);
}

static void test_opaque_and_attrs(void) {
  warn_log w = {0};
  gopt_graph *g = load(FIX "opaque_vi.onnx", NULL, &w);
  if (!g) return;
  int32_t n = find_node(g, "foo");
  CHECK(n >= 0);
  if (n < 0) goto done;
  CHECK(strcmp(gopt_node_type(g, n), "com.example::MyOp") == 0);
  CHECK_EQ_INT(g->nodes.a[n].op, GOPT_OP_OPAQUE);
  CHECK(g->nodes.a[n].flags & GOPT_N_OPAQUE);
  int32_t h = gopt_node_output(g, n, 0);
  CHECK_EQ_INT(g->tensors.a[h].dtype, GOPT_DT_FLOAT);
  CHECK_EQ_INT(g->tensors.a[h].rank, 3);
  char b[32];
  CHECK(strcmp(dim_text(g, h, 0, b, sizeof b), "batch") == 0);
  CHECK_EQ_INT(gopt_tensor_dims(g, h)[1], 8);
  CHECK(GOPT_DIM_IS_SYM(gopt_tensor_dims(g, h)[2]));
  /* The batch symbol is shared with the input. */
  CHECK_EQ_INT(gopt_tensor_dims(g, h)[0], gopt_tensor_dims(g, gopt_graph_find_tensor(g, "x"))[0]);
  CHECK_NEAR(gopt_node_get_float(g, n, "alpha", 0), 0.5, 0);
  CHECK(strcmp(gopt_node_get_string(g, n, "mode", ""), "fast") == 0);
  size_t cnt;
  const int64_t *iv = gopt_node_get_ints(g, n, "sizes", &cnt);
  CHECK(iv && cnt == 3 && iv[0] == 1 && iv[2] == 3);
  const float *fv = gopt_node_get_floats(g, n, "scales", &cnt);
  CHECK(fv && cnt == 2 && fv[0] == 0.25f && fv[1] == 0.5f);
  const gopt_attr *a = gopt_node_attr(g, n, "tags");
  CHECK(a && a->kind == GOPT_ATTR_STRINGS && a->n == 2 &&
        strcmp(gopt_graph_str(g, g->strids.a[a->v.off + 1]), "q") == 0);
  CHECK_EQ_INT(g->opsets.n, 2);
  if (g->opsets.n == 2) {
    CHECK(strcmp(gopt_graph_str(g, g->opsets.a[0].domain), "") == 0 && g->opsets.a[0].version == 13);
    CHECK(strcmp(gopt_graph_str(g, g->opsets.a[1].domain), "com.example") == 0 && g->opsets.a[1].version == 1);
  }
done:
  gopt_graph_free(g);
}

static void test_shapes_and_names(void) {
  warn_log w = {0};
  gopt_graph *g = load(FIX "shapes.onnx", NULL, &w);
  if (!g) return;
  char b[32];
  CHECK_EQ_INT(g->ir_version, 7);
  CHECK_EQ_INT(g->inputs.n, 1); /* wc is an initializer too: a constant, not an input */
  int32_t x = gopt_graph_find_tensor(g, "x");
  CHECK(x >= 0 && g->inputs.n && g->inputs.a[0] == x);
  CHECK(strcmp(dim_text(g, x, 0, b, sizeof b), "batch") == 0);
  CHECK_EQ_INT(gopt_tensor_dims(g, x)[1], 3);
  CHECK(strncmp(dim_text(g, x, 3, b, sizeof b), "unk__", 5) == 0);
  int32_t wc = gopt_graph_find_tensor(g, "wc"), sh = gopt_graph_find_tensor(g, "shape");
  CHECK(wc >= 0 && (g->tensors.a[wc].flags & (GOPT_T_CONST | GOPT_T_PARAM | GOPT_T_INPUT)) ==
                       (GOPT_T_CONST | GOPT_T_PARAM));
  CHECK(sh >= 0 && (g->tensors.a[sh].flags & (GOPT_T_CONST | GOPT_T_PARAM | GOPT_T_INIT)) ==
                       (GOPT_T_CONST | GOPT_T_INIT));
  /* Nodes in file order; names unique (empty and duplicate ones generated). */
  static const char *types[] = {"Conv", "LeakyRelu", "Reshape", "Softmax", "Sum"};
  CHECK_EQ_INT(g->nodes.n, 5);
  for (size_t i = 0; i < g->nodes.n && i < 5; i++) {
    CHECK(strcmp(gopt_node_type(g, (int32_t)i), types[i]) == 0);
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(gopt_node_name(g, (int32_t)i), gopt_node_name(g, (int32_t)j)) != 0);
    CHECK(*gopt_node_name(g, (int32_t)i));
  }
  CHECK(strcmp(gopt_node_name(g, 0), "conv") == 0);
  CHECK(strcmp(gopt_node_name(g, 2), "dup") == 0);
  size_t cnt;
  const int64_t *ks = gopt_node_get_ints(g, 0, "kernel_shape", &cnt);
  CHECK(ks && cnt == 2 && ks[0] == 3);
  CHECK_NEAR(gopt_node_get_float(g, 1, "alpha", 0), 0.125, 0);
  CHECK_EQ_INT(gopt_node_get_int(g, 3, "axis", -5), 1);
  int32_t c = gopt_graph_find_tensor(g, "c");
  CHECK(c >= 0 && g->tensors.a[c].rank == 4 && gopt_tensor_dims(g, c)[0] == gopt_tensor_dims(g, x)[0]);
  int32_t y = gopt_graph_find_tensor(g, "y");
  CHECK(y >= 0 && (g->tensors.a[y].flags & GOPT_T_OUTPUT) && g->tensors.a[y].rank == 2);
  /* Tensors with no shape info for known ops are left for shape inference. */
  int32_t f = gopt_graph_find_tensor(g, "f");
  CHECK(f >= 0 && (g->tensors.a[f].flags & GOPT_T_NOSHAPE) && g->tensors.a[f].dtype == 0);
  CHECK_EQ_INT(g->opsets.n, 2);
  gopt_error err = {0};
  CHECK_MSG(gopt_graph_validate(g, &err) == 0, "%s", err.msg);
  gopt_graph_free(g);
}

/* Opset 1 with Relu-1's legacy consumed_inputs: accepted (Relu means the same as at opset 7), the
 * opset kept as written and the attribute kept (export never drops one). */
static void test_legacy_opset(void) {
  warn_log w = {0};
  gopt_graph *g = load(FIX "opset1_relu.onnx", NULL, &w);
  if (!g) return;
  CHECK_EQ_INT(gopt_graph_opset(g, "", -1), 1);
  CHECK_EQ_INT(g->nodes.n, 1);
  CHECK(g->nodes.n && strcmp(gopt_node_type(g, 0), "Relu") == 0);
  CHECK(g->nodes.n && g->nodes.a[0].n_attr == 1);
  gopt_graph_free(g);
}

int main(void) {
  test_initializers();
  test_legacy_opset();
  test_external();
  test_external_symlink();
  test_constants();
  test_if_subgraph();
  test_opaque_and_attrs();
  test_shapes_and_names();
  return check_exit("test_onnx_import");
}
