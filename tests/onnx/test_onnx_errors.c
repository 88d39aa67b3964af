/* test_onnx_errors.c: every kind of bad input gives one error line naming the file (and the node
 * or tensor) with the right code, and nothing crashes or leaks: empty, truncated at every offset,
 * corrupted, non-ONNX files (text, PNG), missing file, unknown ops without value_info, a cycle, a
 * dangling input, duplicate producers, an op whose opset-6 meaning differs from opset 7's,
 * negative / overflowing dims, short raw_data, and protobuf nesting deep enough to overflow a
 * recursive parser. */
#include "onnx/onnx_test_util.h"

static void quiet(const char *msg, void *user) { (void)msg; (void)user; }

/* Loads path and checks rc == code and that the message contains every string in subs. */
static void expect_fail(const char *path, int code, const char *const *subs) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc = gopt_onnx_load(path, NULL, &g, &err);
  CHECK_MSG(rc == code, "%s: rc %d (%s), want %d", path, rc, err.msg, code);
  CHECK_MSG(g == NULL, "%s: graph returned on failure", path);
  CHECK_MSG(err.code == rc, "%s: err.code %d vs rc %d", path, err.code, rc);
  CHECK_MSG(strncmp(err.msg, path, strlen(path)) == 0, "%s: message does not start with the file: %s",
            path, err.msg);
  CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: message has a newline", path);
  for (; subs && *subs; subs++)
    CHECK_MSG(strstr(err.msg, *subs) != NULL, "%s: message lacks '%s': %s", path, *subs, err.msg);
  gopt_graph_free(g);
}

#define FAIL(file, code, ...) do { static const char *const s_[] = {__VA_ARGS__, NULL}; \
  expect_fail(FIX file, code, s_); } while (0)

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = malloc(1 << 16);
  *len = 0;
  if (f && buf) *len = fread(buf, 1, 1 << 16, f);
  if (f) fclose(f);
  return buf;
}

static void test_truncated_and_corrupt(void) {
  size_t len;
  unsigned char *buf = slurp(FIX "if_model.onnx", &len);
  CHECK(len > 100);
  /* Every proper prefix fails (a single opset import is the last field), with the label first. */
  int fails = 0;
  for (size_t cut = 0; cut < len; cut++) {
    gopt_error err = {0};
    gopt_graph *g = NULL;
    int rc = gopt_onnx_load_mem(buf, cut, "cut.onnx", NULL, &g, &err);
    if (rc < 0 && !g && strncmp(err.msg, "cut.onnx: ", 10) == 0) fails++;
    else fprintf(stderr, "cut at %zu: rc %d: %s\n", cut, rc, err.msg);
    gopt_graph_free(g);
  }
  CHECK_EQ_INT(fails, (long long)len);
  /* Half: the generic parse failure message. */
  gopt_error err = {0};
  gopt_graph *g = NULL;
  CHECK_EQ_INT(gopt_onnx_load_mem(buf, len / 2, "half.onnx", NULL, &g, &err), GOPT_EPARSE);
  CHECK_MSG(strcmp(err.msg, "half.onnx: not an ONNX model (protobuf parse failed)") == 0, "%s", err.msg);
  /* Corruption: every byte flipped in turn either still loads or fails with the label. */
  int ok = 0, bad = 0;
  for (size_t i = 0; i < len; i++) {
    for (int v = 0; v < 3; v++) {
      unsigned char save = buf[i];
      buf[i] = v == 0 ? (unsigned char)~save : v == 1 ? 0xff : 0x00;
      memset(&err, 0, sizeof err);
      g = NULL;
      int rc = gopt_onnx_load_mem(buf, len, "bad.onnx", NULL, &g, &err);
      if (rc == 0 && g) ok++;
      else if (rc < 0 && !g && strncmp(err.msg, "bad.onnx: ", 10) == 0) bad++;
      else fprintf(stderr, "flip at %zu: rc %d: %s\n", i, rc, err.msg);
      gopt_graph_free(g);
      buf[i] = save;
    }
  }
  CHECK_EQ_INT(ok + bad, 3 * (long long)len);
  CHECK(bad > 0);
  buf[0] = 0xff; /* field number 31, wire type 7: never valid */
  g = NULL;
  CHECK_EQ_INT(gopt_onnx_load_mem(buf, len, "bad.onnx", NULL, &g, &err), GOPT_EPARSE);
  CHECK(strstr(err.msg, "not an ONNX model") != NULL);
  free(buf);
}

/* Appends a protobuf varint. */
static size_t put_varint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  do {
    p[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return n;
}

/* A model whose graph nests If-like sub-graphs `depth` deep (graph.node.attribute.g ...): a
 * recursive protobuf parser without a depth limit overflows its stack on it. */
static unsigned char *deep_model(int depth, size_t *len) {
  size_t cap = (size_t)depth * 24 + 64;
  unsigned char *a = calloc(cap, 1), *b = calloc(cap, 1);
  size_t n = 0;
  for (int i = 0; i < depth; i++) {
    static const unsigned char tags[3] = {(6 << 3) | 2, (5 << 3) | 2, (1 << 3) | 2};
    for (int k = 0; k < 3; k++) {
      size_t m = 0;
      b[m++] = tags[k];
      m += put_varint(b + m, n);
      memcpy(b + m, a, n);
      n += m;
      unsigned char *t = a;
      a = b;
      b = t;
    }
  }
  /* ModelProto: ir_version 8, graph, opset_import {version 13}. */
  size_t m = 0;
  b[m++] = 0x08;
  b[m++] = 8;
  b[m++] = (7 << 3) | 2;
  m += put_varint(b + m, n);
  memcpy(b + m, a, n);
  m += n;
  b[m++] = (8 << 3) | 2;
  b[m++] = 2;
  b[m++] = 0x10;
  b[m++] = 13;
  free(a);
  *len = m;
  return b;
}

static void test_deep_nesting(void) {
  size_t len;
  unsigned char *buf = deep_model(20000, &len);
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc = gopt_onnx_load_mem(buf, len, "deep.onnx", NULL, &g, &err);
  CHECK(rc < 0 && g == NULL);
  CHECK_MSG(strstr(err.msg, "deep.onnx: ") == err.msg && strstr(err.msg, "nest"), "%s", err.msg);
  free(buf);
  /* Shallow nesting of the same shape parses (and then fails on the empty nodes, not crashes). */
  buf = deep_model(5, &len);
  g = NULL;
  rc = gopt_onnx_load_mem(buf, len, "shallow.onnx", NULL, &g, &err);
  CHECK_MSG(rc < 0 && strstr(err.msg, "shallow.onnx: node ") == err.msg, "%s", err.msg);
  gopt_graph_free(g);
  free(buf);
}

int main(void) {
  gopt_set_warn_handler(quiet, NULL);
  FAIL("empty.onnx", GOPT_EPARSE, "empty file", "not an ONNX model");
  FAIL("not_onnx.txt", GOPT_EPARSE, "not an ONNX model (protobuf parse failed)");
  FAIL("not_onnx.png", GOPT_EPARSE, "not an ONNX model (protobuf parse failed)");
  FAIL("does_not_exist.onnx", GOPT_EIO, "cannot open");
  FAIL("opaque_novi.onnx", GOPT_EUNSUP, "node 'foo'", "(op com.example::MyOp)",
       "no shape rule and no value_info for output 'h'");
  FAIL("unknown_op.onnx", GOPT_EUNSUP, "node 'mystery'", "(op FooBar)", "'y_internal'");
  FAIL("cyclic.onnx", GOPT_EGRAPH, "cycle", "node 'n");
  FAIL("dangling.onnx", GOPT_EGRAPH, "node 'adder'", "input 'nope'");
  FAIL("dup_output.onnx", GOPT_EGRAPH, "node 'second'", "output 'y'", "node 'first'");
  FAIL("opset6.onnx", GOPT_EUNSUP, "node 'r' (Add)", "not supported at opset 6",
       "opset 7 or later");
  FAIL("negative_dim.onnx", GOPT_ERANGE, "tensor 'x'", "negative dimension -3");
  FAIL("huge_dims.onnx", GOPT_ERANGE, "initializer 'w'", "invalid dims");
  FAIL("short_raw.onnx", GOPT_EPARSE, "initializer 'w'", "raw_data has 8 bytes, expected 4000000");
  test_truncated_and_corrupt();
  test_deep_nesting();
  return check_exit("test_onnx_errors");
}
