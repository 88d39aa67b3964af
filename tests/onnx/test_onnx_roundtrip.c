/* test_onnx_roundtrip.c: import -> export -> re-import over the ONNX fixtures and the model corpus
 * gives the same graph (node names, op types, attributes, tensor names, dtypes, shapes, constant
 * bytes, flags, gopt_graph_hash), and exporting the re-imported graph reproduces the same bytes.
 * Also checks that export skips dead nodes and unused constants and keeps structure-only constants
 * as external references (sub-byte ones reserved at their packed size). With `--export DIR` it
 * instead writes the exported fixtures to DIR for tests/onnx/check_exported.py (onnx.checker and a
 * comparison with the originals, via onnx). */
#include <dirent.h>
#include <sys/stat.h>

#include "onnx/onnx_test_util.h"

static const char *const fixtures[] = {"init_raw.onnx", "init_typed.onnx", "ext_model.onnx",
                                       "ext_missing.onnx", "constants.onnx", "if_model.onnx",
                                       "opaque_vi.onnx", "shapes.onnx", "ir3_model.onnx", NULL};

static void quiet(const char *msg, void *user) { (void)msg; (void)user; }

static void roundtrip(const char *path) {
  gopt_error err = {0};
  gopt_graph *a = NULL, *b = NULL;
  void *buf = NULL, *buf2 = NULL;
  size_t len = 0, len2 = 0;
  int rc = gopt_onnx_load(path, NULL, &a, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return;
  rc = gopt_onnx_save_mem(a, &buf, &len, &err);
  CHECK_MSG(rc == 0, "%s: export: %s", path, err.msg);
  if (rc) goto done;
  rc = gopt_onnx_load_mem(buf, len, "exported.onnx", NULL, &b, &err);
  CHECK_MSG(rc == 0, "%s: re-import: %s", path, err.msg);
  if (rc) goto done;
  int bad = compare_graphs(a, b, path);
  CHECK_MSG(bad == 0, "%s: %d differences after round trip", path, bad);
  CHECK_EQ_INT(a->ir_version ? a->ir_version : 8, b->ir_version);
  CHECK_EQ_INT(a->opsets.n, b->opsets.n);
  rc = gopt_onnx_save_mem(b, &buf2, &len2, &err);
  CHECK_MSG(rc == 0, "%s: second export: %s", path, err.msg);
  CHECK_MSG(rc == 0 && len == len2 && memcmp(buf, buf2, len) == 0, "%s: exports differ", path);
done:
  free(buf);
  free(buf2);
  gopt_graph_free(a);
  gopt_graph_free(b);
}

/* Export drops dead nodes and constants nothing uses, keeps node order topological, and writes
 * missing-bytes constants as external references (dims kept). */
static void test_export_pruning(void) {
  gopt_error err = {0};
  gopt_graph *g = NULL, *h = NULL;
  void *buf = NULL;
  size_t len = 0;
  int rc = gopt_onnx_load(FIX "ext_missing.onnx", NULL, &g, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return;
  /* A Relu after the Gemm, a dead extra node, and an unused constant. */
  int64_t d4[2] = {1, 4};
  int32_t y = gopt_graph_find_tensor(g, "y");
  int32_t z = gopt_graph_add_tensor(g, "z", GOPT_DT_FLOAT, 2, d4, &err);
  int32_t dead_out = gopt_graph_add_tensor(g, "dead_out", GOPT_DT_FLOAT, 2, d4, &err);
  int32_t unused = gopt_graph_add_tensor(g, "unused_const", GOPT_DT_INT64, 1, d4 + 1, &err);
  int64_t vals[4] = {1, 2, 3, 4};
  CHECK(gopt_tensor_set_const(g, unused, vals, sizeof vals, &err) == 0);
  int32_t relu = gopt_graph_add_node(g, "Relu", "relu_new", 1, &y, 1, &z, &err);
  int32_t dead = gopt_graph_add_node(g, "Neg", "dead_node", 1, &y, 1, &dead_out, &err);
  CHECK(relu >= 0 && dead >= 0);
  CHECK(gopt_graph_remove_node(g, dead) == 0);
  g->outputs.a[0] = z; /* z replaces y as the graph output */
  g->tensors.a[y].flags &= (uint16_t)~GOPT_T_OUTPUT;
  g->tensors.a[z].flags |= GOPT_T_OUTPUT;
  rc = gopt_onnx_save_mem(g, &buf, &len, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_set_warn_handler(quiet, NULL);
  if (rc == 0) rc = gopt_onnx_load_mem(buf, len, "pruned.onnx", NULL, &h, &err);
  gopt_set_warn_handler(NULL, NULL);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (h) {
    CHECK_EQ_INT(gopt_graph_node_count(h), 2);
    CHECK(find_node(h, "dead_node") < 0);
    CHECK(gopt_graph_find_tensor(h, "unused_const") < 0);
    CHECK(find_node(h, "gemm") == 0 && find_node(h, "relu_new") == 1); /* topological order */
    int32_t W = gopt_graph_find_tensor(h, "W");
    CHECK(W >= 0 && gopt_tensor_data(h, W) == NULL && h->tensors.a[W].rank == 2);
    if (W >= 0) {
      const gopt_const *k = &h->consts.a[h->tensors.a[W].cdata];
      CHECK(strcmp(gopt_graph_str(h, k->external), "missing.data") == 0 && k->ext_offset == 16 &&
            k->ext_length == 64);
    }
    CHECK(gopt_graph_hash(g) == gopt_graph_hash(h));
  }
  free(buf);
  gopt_graph_free(g);
  gopt_graph_free(h);
}

/* A structure-only INT4 [5] constant without a source file is reserved in the data file at its
 * packed size, 3 bytes, as ONNX stores it (and as the importer reads it back). */
static void test_export_reserved_lowbit(void) {
  gopt_error err = {0};
  gopt_graph *g = gopt_graph_new("lowbit"), *h = NULL;
  void *buf = NULL;
  size_t len = 0;
  int64_t d5 = 5;
  int32_t q = gopt_graph_add_tensor(g, "q", GOPT_DT_INT4, 1, &d5, &err);
  int32_t y = gopt_graph_add_tensor(g, "y", GOPT_DT_INT4, 1, &d5, &err);
  CHECK(q >= 0 && y >= 0 && gopt_tensor_set_const(g, q, NULL, 5, &err) == 0);
  CHECK(gopt_graph_add_node(g, "Identity", "id", 1, &q, 1, &y, &err) >= 0);
  CHECK(gopt_graph_add_output(g, y) == 0);
  int rc = gopt_onnx_save_mem(g, &buf, &len, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_onnx_load_opts so = {NULL, 0};
  if (rc == 0) rc = gopt_onnx_load_mem(buf, len, "lowbit.onnx", &so, &h, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  int32_t t = h ? gopt_graph_find_tensor(h, "q") : -1;
  CHECK(t >= 0);
  if (t >= 0) CHECK_EQ_INT(h->consts.a[h->tensors.a[t].cdata].ext_length, 3);
  free(buf);
  gopt_graph_free(g);
  gopt_graph_free(h);
}

/* Writes every fixture, exported, to dir/NAME. */
static int export_all(const char *dir) {
  mkdir(dir, 0755);
  for (const char *const *f = fixtures; *f; f++) {
    char in[512], out[512];
    gopt_error err = {0};
    gopt_graph *g = NULL;
    snprintf(in, sizeof in, FIX "%s", *f);
    snprintf(out, sizeof out, "%s/%s", dir, *f);
    int rc = gopt_onnx_load(in, NULL, &g, &err);
    if (rc == 0) rc = gopt_onnx_save(g, out, &err);
    CHECK_MSG(rc == 0, "%s: %s", *f, err.msg);
    gopt_graph_free(g);
  }
  return check_exit("test_onnx_roundtrip --export");
}

int main(int argc, char **argv) {
  gopt_set_warn_handler(quiet, NULL);
  if (argc == 3 && strcmp(argv[1], "--export") == 0) return export_all(argv[2]);
  for (const char *const *f = fixtures; *f; f++) {
    char path[512];
    snprintf(path, sizeof path, FIX "%s", *f);
    roundtrip(path);
  }
  DIR *d = opendir("corpus");
  int n_corpus = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t n = strlen(e->d_name);
      if (n < 6 || strcmp(e->d_name + n - 5, ".onnx") != 0) continue;
      char path[512];
      snprintf(path, sizeof path, "corpus/%s", e->d_name);
      roundtrip(path);
      n_corpus++;
    }
    closedir(d);
  }
  fprintf(stderr, "round-tripped %d corpus models\n", n_corpus);
  test_export_pruning();
  test_export_reserved_lowbit();
  gopt_set_warn_handler(NULL, NULL);
  return check_exit("test_onnx_roundtrip");
}
