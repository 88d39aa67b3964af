/* test_task_host_operand.c: on the host target a Conv chain takes a binary post-op whose other
 * operand is a constant, never one computed at run time (task_group.c, host_runtime_operand; docs/
 * TASKS.md "Fusion legality per target"). Two heads on one input x [1,8,6,6]: Conv-Relu times a
 * constant per-channel scale, and Conv-Relu times a squeeze-excitation scale
 * Sigmoid(Conv(GlobalAveragePool(x))), as lraspp_mobilenet_v3_large's segmentation head. With every
 * FUSE bit set, the first Mul joins its Conv's group and the second does not (both are executor
 * kernels: gopt_exec_group_kind calls each union a chain), and the second head's Conv-Relu is
 * still one group (the executor's own chain). */
#include <stdlib.h>

#include "check.h"
#include "exec/exec_graph.h"
#include "gopt/decisions.h"
#include "gopt/device.h"
#include "gopt/exec.h"
#include "gopt/task.h"

int main(void) {
  gopt_graph *g = gopt_graph_new("heads");
  gopt_error err = {0};
  CHECK(gopt_graph_set_opset(g, "", 13) == 0);
  int64_t dx[4] = {1, 8, 6, 6}, dw[4] = {8, 8, 1, 1}, dc[4] = {1, 8, 1, 1};
  float w[64], sc[8];
  for (int i = 0; i < 64; i++) w[i] = (float)((i * 37) % 17 - 8) / 16.0f;
  for (int i = 0; i < 8; i++) sc[i] = 0.5f + 0.125f * (float)i;
  int32_t x = tensor(g, "x", GOPT_DT_FLOAT, 4, dx);
  gopt_graph_add_input(g, x);
  int32_t w1 = const_tensor(g, "w1", GOPT_DT_FLOAT, 4, dw, w, sizeof w);
  int32_t w2 = const_tensor(g, "w2", GOPT_DT_FLOAT, 4, dw, w, sizeof w);
  int32_t w3 = const_tensor(g, "w3", GOPT_DT_FLOAT, 4, dw, w, sizeof w);
  int32_t s1 = const_tensor(g, "s1", GOPT_DT_FLOAT, 4, dc, sc, sizeof sc);
  int32_t c1 = tensor(g, "c1", GOPT_DT_FLOAT, 4, dx), r1 = tensor(g, "r1", GOPT_DT_FLOAT, 4, dx);
  int32_t y1 = tensor(g, "y1", GOPT_DT_FLOAT, 4, dx), c2 = tensor(g, "c2", GOPT_DT_FLOAT, 4, dx);
  int32_t r2 = tensor(g, "r2", GOPT_DT_FLOAT, 4, dx), y2 = tensor(g, "y2", GOPT_DT_FLOAT, 4, dx);
  int32_t gp = tensor(g, "gp", GOPT_DT_FLOAT, 4, dc), c3 = tensor(g, "c3", GOPT_DT_FLOAT, 4, dc);
  int32_t sg = tensor(g, "sg", GOPT_DT_FLOAT, 4, dc);
  int32_t nc1 = node(g, "Conv", "conv1", 2, (int32_t[]){x, w1}, c1);
  node(g, "Relu", "relu1", 1, &c1, r1);
  int32_t nm1 = node(g, "Mul", "mul_const", 2, (int32_t[]){r1, s1}, y1);
  node(g, "GlobalAveragePool", "gap", 1, &x, gp);
  node(g, "Conv", "conv3", 2, (int32_t[]){gp, w3}, c3);
  node(g, "Sigmoid", "sig", 1, &c3, sg);
  int32_t nc2 = node(g, "Conv", "conv2", 2, (int32_t[]){x, w2}, c2);
  int32_t nr2 = node(g, "Relu", "relu2", 1, &c2, r2);
  int32_t nm2 = node(g, "Mul", "mul_runtime", 2, (int32_t[]){r2, sg}, y2);
  gopt_graph_add_output(g, y1);
  gopt_graph_add_output(g, y2);
  finish(g);
  /* both unions are executor kernels: the rule is the task's, not the executor's */
  CHECK_EQ_INT(gopt_exec_group_kind(g, (int32_t[]){nc1, nc1 + 1, nm1}, 3), GOPT_EXEC_GROUP_CHAIN);
  CHECK_EQ_INT(gopt_exec_group_kind(g, (int32_t[]){nc2, nr2, nm2}, 3), GOPT_EXEC_GROUP_CHAIN);
  gopt_cluster *host = NULL;
  gopt_env *e = NULL;
  gopt_env_opts eo = {.task = GOPT_TASK_FUSION, .threads = 1};
  CHECK_MSG(gopt_cluster_parse("host", &host, &err) == 0 && gopt_env_new(g, host, &eo, &e, &err) == 0, "%s", err.msg);
  size_t nv = e ? gopt_env_nvars(e) : 0;
  double *xv = malloc((nv + 1) * sizeof *xv);
  for (size_t i = 0; i < nv; i++) xv[i] = 1;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  CHECK_MSG(e && gopt_env_to_decisions(e, xv, &d, &err) == 0 && d.group, "%s", err.msg);
  if (d.group) {
    CHECK_MSG(d.group[nc1] >= 0 && d.group[nm1] == d.group[nc1], "the constant scale is not conv1's post-op");
    CHECK_MSG(d.group[nm2] < 0 || d.group[nm2] != d.group[nc2], "the runtime scale was made conv2's post-op");
    CHECK_MSG(d.group[nc2] >= 0 && d.group[nr2] == d.group[nc2], "conv2-relu2 is no longer one group");
  }
  gopt_decisions_clear(&d);
  free(xv);
  gopt_env_free(e);
  gopt_cluster_free(host);
  gopt_graph_free(g);
  return check_exit("test_task_host_operand");
}
