/* test_costdb.c: op signatures (equal for equal type/attrs/shapes, different otherwise) and the
 * cost database's put/get and save/load round trip, plus rejection of malformed files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/costdb.h"
#include "gopt/util.h"

static int32_t relu(gopt_graph *g, const char *in, const char *out, int64_t n, const char *name) {
  int64_t d[2] = {2, n};
  int32_t a = gopt_graph_add_tensor(g, in, GOPT_DT_FLOAT, 2, d, NULL);
  int32_t b = gopt_graph_add_tensor(g, out, GOPT_DT_FLOAT, 2, d, NULL);
  gopt_graph_add_input(g, a);
  return gopt_graph_add_node(g, "Relu", name, 1, &a, 1, &b, NULL);
}

int main(void) {
  gopt_graph *g = gopt_graph_new("sig");
  int32_t n0 = relu(g, "a", "b", 8, "r0");
  int32_t n1 = relu(g, "c", "d", 8, "r1");  /* same signature, other names */
  int32_t n2 = relu(g, "e", "f", 9, "r2");  /* other shape */
  int32_t n3 = relu(g, "h", "i", 8, "r3");
  gopt_node_set_int(g, n3, "alpha", 1);     /* other attributes */
  CHECK(gopt_op_signature(g, n0) == gopt_op_signature(g, n1));
  CHECK(gopt_op_signature(g, n0) != gopt_op_signature(g, n2));
  CHECK(gopt_op_signature(g, n0) != gopt_op_signature(g, n3));
  char desc[256];
  gopt_op_signature_desc(g, n0, desc, sizeof desc);
  CHECK_MSG(!strcmp(desc, "Relu FLOAT[2,8] -> FLOAT[2,8]"), "%s", desc);

  char host[256];
  gopt_costdb_this_host(host, sizeof host);
  gopt_costdb *db = gopt_costdb_new(host, 2);
  for (int i = 0; i < 1000; i++) {
    gopt_cost_entry e = {(uint64_t)i * 0x9e3779b97f4a7c15ULL, "Relu", "x", 1e-6 * i, 32};
    CHECK_EQ_INT(gopt_costdb_put(db, &e), 0);
  }
  gopt_cost_entry e = {7 * 0x9e3779b97f4a7c15ULL, "Relu", "y", 0.5, 8};
  gopt_costdb_put(db, &e); /* replace */
  CHECK_EQ_INT(gopt_costdb_put_step(db, "corpus/resnet18.onnx", 0.25), 0);
  CHECK_EQ_INT(gopt_costdb_put_step(db, "bert", 0.5), 0);
  CHECK_EQ_INT(gopt_costdb_put_step(db, "corpus/resnet18.onnx", 0.125), 0); /* replace */
  CHECK(gopt_costdb_step(db, "nope") == -1);
  CHECK_EQ_INT(gopt_costdb_size(db), 1000);
  char path[] = "/tmp/gopt_costdb_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_costdb_save(db, path, &err), 0);
  gopt_costdb *db2 = NULL;
  CHECK_EQ_INT(gopt_costdb_load(path, &db2, &err), 0);
  CHECK(db2 && gopt_costdb_size(db2) == 1000 && gopt_costdb_threads(db2) == 2);
  gopt_cost_entry got;
  CHECK(db2 && gopt_costdb_get(db2, 7 * 0x9e3779b97f4a7c15ULL, &got) && got.seconds == 0.5 &&
        !strcmp(got.desc, "y") && got.reps == 8);
  CHECK(db2 && gopt_costdb_get(db2, 999 * 0x9e3779b97f4a7c15ULL, &got) && got.seconds == 1e-6 * 999);
  CHECK(db2 && !gopt_costdb_get(db2, 12345, &got));
  CHECK(db2 && !strcmp(gopt_costdb_host(db2), host));
  CHECK(db2 && gopt_costdb_step(db2, "corpus/resnet18.onnx") == 0.125 && gopt_costdb_step(db2, "bert") == 0.5);
  /* malformed files */
  FILE *f = fopen(path, "w");
  fputs("{\"format\":\"gopt-costdb\",\"version\":1,\"entries\":[{\"sig\":\"zz\",\"seconds\":1}]}", f);
  fclose(f);
  gopt_costdb *db3 = NULL;
  CHECK(gopt_costdb_load(path, &db3, &err) == GOPT_EPARSE && db3 == NULL);
  CHECK(strstr(err.msg, path) && strstr(err.msg, "entry 0"));
  f = fopen(path, "w");
  fputs("{\"format\":", f);
  fclose(f);
  CHECK(gopt_costdb_load(path, &db3, &err) == GOPT_EPARSE && strstr(err.msg, path));
  unlink(path);
  gopt_costdb_free(db);
  gopt_costdb_free(db2);
  gopt_costdb_free(NULL);
  gopt_graph_free(g);
  return check_exit("test_costdb");
}
