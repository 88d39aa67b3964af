/* test_sim_decisions.c: decisions files: load of every key, save/load round trip (the arrays come
 * back identical), keys absent leave the old arrays, and one-line errors naming the file, key and
 * node for unknown nodes, wrong types, a node in two groups, an incomplete or repeated order, an
 * unknown key and malformed JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/decisions.h"

static char path[] = "/tmp/gopt_dec_XXXXXX";

static void put(const char *text) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static gopt_graph *diamond(void) {
  gopt_graph *g = gopt_graph_new("d");
  int64_t e = 4;
  int32_t x = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 1, &e, NULL);
  int32_t a = gopt_graph_add_tensor(g, "a", GOPT_DT_FLOAT, 1, &e, NULL);
  int32_t b = gopt_graph_add_tensor(g, "b", GOPT_DT_FLOAT, 1, &e, NULL);
  int32_t c = gopt_graph_add_tensor(g, "c", GOPT_DT_FLOAT, 1, &e, NULL);
  int32_t d = gopt_graph_add_tensor(g, "d", GOPT_DT_FLOAT, 1, &e, NULL);
  gopt_graph_add_input(g, x);
  gopt_graph_add_node(g, "Relu", "conv1", 1, &x, 1, &a, NULL);
  gopt_graph_add_node(g, "Relu", "relu1", 1, &a, 1, &b, NULL);
  gopt_graph_add_node(g, "Relu", "relu2", 1, &a, 1, &c, NULL);
  int32_t bc[2] = {b, c};
  gopt_graph_add_node(g, "Add", "add3", 2, bc, 1, &d, NULL);
  gopt_graph_add_output(g, d);
  return g;
}

static void expect_error(gopt_graph *g, const char *text, const char *want1, const char *want2) {
  gopt_decisions d;
  gopt_error err = {0};
  gopt_decisions_init(&d, g);
  put(text);
  int rc = gopt_decisions_load(&d, g, path, &err);
  CHECK_MSG(rc != 0, "accepted: %s", text);
  CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)) &&
                !strchr(err.msg, '\n'),
            "%s -> %s", text, err.msg);
  CHECK(d.placement == NULL && d.group == NULL && d.priority == NULL && d.order == NULL);
  gopt_decisions_clear(&d);
}

int main(void) {
  int fd = mkstemp(path);
  close(fd);
  gopt_graph *g = diamond();
  CHECK_EQ_INT(gopt_graph_find_node(g, "relu2"), 2);
  CHECK_EQ_INT(gopt_graph_find_node(g, "nope"), -1);
  gopt_decisions d, e;
  gopt_error err = {0};
  gopt_decisions_init(&d, g);
  put("{\"placement\": {\"conv1\": 0, \"relu1\": 1},\n"
      " \"fusion\": [[\"relu2\", \"add3\"]],\n"
      " \"schedule\": {\"relu1\": 0.75, \"conv1\": -2},\n"
      " \"order\": [\"conv1\", \"relu2\", \"relu1\", \"add3\"]}");
  int rc = gopt_decisions_load(&d, g, path, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  CHECK(d.placement && d.placement[0] == 0 && d.placement[1] == 1 && d.placement[2] == -1 &&
        d.placement[3] == -1);
  CHECK(d.group && d.group[0] == -1 && d.group[1] == -1 && d.group[2] == 0 && d.group[3] == 0);
  CHECK_EQ_INT(d.n_groups, 1);
  CHECK(d.priority && d.priority[1] == 0.75 && d.priority[0] == -2 && isnan(d.priority[2]));
  CHECK(d.order && d.n_order == 4 && d.order[1] == 2 && d.order[2] == 1);
  /* round trip */
  CHECK_EQ_INT(gopt_decisions_save(&d, g, path, &err), 0);
  gopt_decisions_init(&e, g);
  CHECK_EQ_INT(gopt_decisions_load(&e, g, path, &err), 0);
  CHECK(e.placement && !memcmp(d.placement, e.placement, 4 * sizeof *d.placement));
  CHECK(e.group && !memcmp(d.group, e.group, 4 * sizeof *d.group) && e.n_groups == 1);
  CHECK(e.priority && e.priority[1] == 0.75 && e.priority[0] == -2 && isnan(e.priority[3]));
  CHECK(e.order && e.n_order == 4 && !memcmp(d.order, e.order, 4 * sizeof *d.order));
  /* a file with one key keeps the others */
  put("{\"placement\": {\"add3\": 3}}");
  CHECK_EQ_INT(gopt_decisions_load(&e, g, path, &err), 0);
  CHECK(e.placement[3] == 3 && e.placement[0] == -1 && e.group && e.order);
  gopt_decisions_clear(&e);
  CHECK(e.placement == NULL && e.n_nodes == 4);
  gopt_decisions_clear(&e); /* twice is fine */
  gopt_decisions_clear(NULL);
  gopt_decisions_clear(&d);

  expect_error(g, "{\"placement\": {\"conv9\": 1}}", "placement: unknown node 'conv9'", NULL);
  expect_error(g, "{\"placement\": {\"conv1\": \"gpu\"}}", "placement: node 'conv1'", "device index");
  expect_error(g, "{\"placement\": {\"conv1\": -1}}", "node 'conv1'", NULL);
  expect_error(g, "{\"fusion\": [[\"conv1\", \"relu1\"], [\"relu1\"]]}", "node 'relu1' is in groups 0 and 1", NULL);
  expect_error(g, "{\"fusion\": [[\"conv1\", \"zz\"]]}", "unknown node 'zz'", NULL);
  expect_error(g, "{\"fusion\": [[]]}", "group 0", NULL);
  expect_error(g, "{\"schedule\": {\"add3\": true}}", "schedule: node 'add3'", NULL);
  expect_error(g, "{\"order\": [\"conv1\", \"relu1\", \"add3\"]}", "node 'relu2' is missing", NULL);
  expect_error(g, "{\"order\": [\"conv1\", \"relu1\", \"relu1\", \"add3\"]}", "'relu1' listed twice", NULL);
  expect_error(g, "{\"placment\": {}}", "unknown key 'placment'", NULL);
  expect_error(g, "{\"placement\": {\"conv1\": 1}", "line", NULL);
  expect_error(g, "[1]", "expected a JSON object", NULL);
  /* a failed load leaves earlier arrays untouched */
  gopt_decisions_init(&d, g);
  put("{\"placement\": {\"conv1\": 1}}");
  CHECK_EQ_INT(gopt_decisions_load(&d, g, path, &err), 0);
  put("{\"placement\": {\"conv1\": 2, \"bogus\": 1}}");
  CHECK(gopt_decisions_load(&d, g, path, &err) != 0);
  CHECK(d.placement && d.placement[0] == 1);
  gopt_decisions_clear(&d);
  unlink(path);
  gopt_graph_free(g);
  return check_exit("test_sim_decisions");
}
