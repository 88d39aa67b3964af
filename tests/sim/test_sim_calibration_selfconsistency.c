/* test_sim_calibration_selfconsistency.c: calibration self-consistency (not fidelity to real
 * hardware). A synthetic cost database holds, for every op signature of resnet50, the time a known
 * "truth" host device (other launch overhead and efficiencies than the preset) gives. Checks: with
 * --costs measured on the host the simulated step equals the sum of the db times; devices not
 * marked measured ignore the db; calibrating the host preset on these samples recovers the truth;
 * Kendall tau / error of the calibrated model are (near) perfect. Writes the db (with an end-to-end
 * "steps" entry) to $TMPDIR/gopt_sim_synth_costdb.json for the CLI tests in sim.cmake (fixture). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/costdb.h"
#include "gopt/sim.h"
#include "gopt/zoo.h"

int main(void) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_zoo_build("resnet50", &g, &err), 0);
  gopt_infer_opts io = {1, 1};
  CHECK_EQ_INT(gopt_infer_shapes(g, &io, &err), 0);
  gopt_device truth = *gopt_device_find_preset("host");
  truth.launch_s = 4e-6;
  truth.eff[GOPT_OPC_CONV] = 0.35;
  truth.eff[GOPT_OPC_ELEMWISE] = 0.4;
  truth.eff[GOPT_OPC_BROADCAST] = 0.3;
  truth.eff[GOPT_OPC_REDUCE] = 0.2;
  truth.eff[GOPT_OPC_INJECTIVE] = 0.25;
  gopt_costdb *db = gopt_costdb_new("synthetic", 1);
  double sum = 0;
  size_t live = 0;
  gopt_sim_sample *smp = calloc(g->nodes.n, sizeof *smp);
  size_t ns = 0;
  for (size_t i = 0; i < g->nodes.n; i++) {
    if (!gopt_node_alive(g, (int32_t)i)) continue;
    live++;
    gopt_cost c;
    gopt_node_cost(g, (int32_t)i, &c);
    int cls = gopt_op_class_of(g->nodes.a[i].op);
    int dt = g->tensors.a[gopt_node_output(g, (int32_t)i, 0)].dtype;
    double t = gopt_device_kernel_time(&truth, cls, dt, c.flops, c.bytes_read + c.bytes_written);
    char desc[256];
    gopt_op_signature_desc(g, (int32_t)i, desc, sizeof desc);
    gopt_cost_entry e = {gopt_op_signature(g, (int32_t)i), gopt_node_type(g, (int32_t)i), desc, t, 8};
    gopt_cost_entry old;
    if (!gopt_costdb_get(db, e.sig, &old)) smp[ns++] = (gopt_sim_sample){cls, dt, c.flops, c.bytes_read + c.bytes_written, t};
    gopt_costdb_put(db, &e);
    sum += t;
  }
  /* measured costs on the host: the step is the sum of the db times */
  gopt_cluster *host = NULL, *v100 = NULL;
  CHECK_EQ_INT(gopt_cluster_parse("host", &host, &err), 0);
  CHECK_EQ_INT(gopt_cluster_parse("V100", &v100, &err), 0);
  gopt_sim_opts mo = {GOPT_SIM_COSTS_MEASURED, db, NULL, NULL};
  gopt_sim *s = NULL;
  CHECK_EQ_INT(gopt_sim_new(g, host, &mo, &s, &err), 0);
  CHECK_EQ_INT(gopt_sim_measured_count(s), live);
  gopt_sim_state *st = gopt_sim_state_new(s);
  gopt_sim_result r;
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  CHECK_NEAR(r.step_time, sum, 1e-9 * sum);
  double host_measured_step = r.step_time;
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  /* analytical on the same host differs (other efficiencies) */
  gopt_sim_opts ao = {GOPT_SIM_COSTS_ANALYTICAL, db, NULL, NULL};
  CHECK_EQ_INT(gopt_sim_new(g, host, &ao, &s, &err), 0);
  CHECK_EQ_INT(gopt_sim_measured_count(s), 0);
  st = gopt_sim_state_new(s);
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  CHECK(fabs(r.step_time - host_measured_step) > 0.05 * host_measured_step);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  /* a V100 is not the host: the db does not apply */
  CHECK_EQ_INT(gopt_sim_new(g, v100, &mo, &s, &err), 0);
  CHECK_EQ_INT(gopt_sim_measured_count(s), 0);
  gopt_sim_free(s);
  /* measured without a db */
  gopt_sim_opts bad = {GOPT_SIM_COSTS_MEASURED, NULL, NULL, NULL};
  CHECK(gopt_sim_new(g, host, &bad, &s, &err) == GOPT_EINVAL && strstr(err.msg, "--costdb"));
  /* calibration recovers the truth */
  gopt_device d = *gopt_device_find_preset("host");
  gopt_sim_fit fit;
  CHECK_EQ_INT(gopt_sim_fit_device(&d, smp, ns, &fit, &err), 0);
  CHECK_NEAR(fit.eff[GOPT_OPC_CONV], 0.35, 0.02);
  CHECK_NEAR(fit.eff[GOPT_OPC_ELEMWISE], 0.4, 0.03);
  CHECK_NEAR(fit.launch_s, 4e-6, 0.5e-6);
  CHECK(fit.mdape_after < 2.0 && fit.mdape_before > fit.mdape_after);
  /* write the db plus an end-to-end step for the CLI tests */
  const char *tmp = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/gopt_sim_synth_costdb.json", tmp && *tmp ? tmp : "/tmp");
  CHECK_EQ_INT(gopt_costdb_save(db, path, &err), 0);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  CHECK(root != NULL);
  if (root) {
    json_t *steps = json_array(), *e = json_object();
    json_object_set_new(e, "model", json_string("resnet50"));
    json_object_set_new(e, "seconds", json_real(sum * 1.1));
    json_array_append_new(steps, e);
    json_object_set_new(root, "steps", steps);
    CHECK_EQ_INT(json_dump_file(root, path, JSON_INDENT(1)), 0);
    json_decref(root);
  }
  gopt_costdb *back = NULL;
  CHECK_EQ_INT(gopt_costdb_load(path, &back, &err), 0); /* the extra field is ignored there */
  gopt_costdb_free(back);
  free(smp);
  gopt_cluster_free(host);
  gopt_cluster_free(v100);
  gopt_costdb_free(db);
  gopt_graph_free(g);
  return check_exit("test_sim_calibration_selfconsistency");
}
