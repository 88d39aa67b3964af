/* cmd_fidelity.c: `gopt fidelity MODEL... --costdb FILE`: how well the analytical cost model
 * predicts measured times: per model and pooled over all, Kendall's tau and the median absolute %
 * error of predicted vs measured per-op times, and predicted vs measured step time (the sum of
 * measured op times along the executed order, i.e. one CPU device; and a measured end-to-end time
 * when the database has one in its optional "steps" field, docs/SIMULATOR.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/costdb.h"
#include "gopt/sim.h"

static const char fid_help[] =
    "usage: gopt fidelity MODEL... --costdb FILE [--cluster C] [--json]\n"
    "  compares the analytical per-op times on the host device (or device 0 of --cluster, e.g.\n"
    "  the file gopt calibrate -o wrote) with the measured ones in the cost database\n";

/* Measured end-to-end seconds for a model from the db file's optional "steps" array, or -1. */
static double e2e_of(json_t *steps, const char *model, const char *gname) {
  size_t i;
  json_t *e;
  json_array_foreach(steps, i, e) {
    const char *m = json_string_value(json_object_get(e, "model"));
    json_t *sec = json_object_get(e, "seconds");
    if (m && json_is_number(sec) && (!strcmp(m, model) || !strcmp(m, gname)))
      return json_number_value(sec);
  }
  return -1;
}

int cli_fidelity(int argc, char **argv) {
  const char *dbp = NULL, *cl = "host";
  const char **models = calloc((size_t)argc + 1, sizeof *models);
  int nm = 0, json = 0, rc = 1;
  gopt_costdb *db = NULL;
  gopt_cluster *c = NULL, *one = NULL;
  json_t *root = NULL, *out = NULL, *rows = NULL;
  double *pred = NULL, *meas = NULL, *pall = NULL, *mall = NULL;
  size_t nall = 0, capall = 0;
  gopt_error err = {0};
  if (!models) return 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(fid_help, stdout);
      free(models);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--costdb") || !strcmp(argv[i], "--cluster")) {
      if (i + 1 >= argc) {
        free(models);
        return cli_usage_error("fidelity", "%s needs a value", argv[i]);
      }
      if (!strcmp(argv[i], "--costdb")) dbp = argv[++i];
      else cl = argv[++i];
    } else if (argv[i][0] == '-') {
      free(models);
      return cli_usage_error("fidelity", "unknown flag '%s' (see gopt fidelity --help)", argv[i]);
    } else {
      models[nm++] = argv[i];
    }
  }
  if (!dbp || !nm) {
    free(models);
    return cli_usage_error("fidelity", "needs MODEL... and --costdb FILE");
  }
  if (gopt_costdb_load(dbp, &db, &err) || gopt_cluster_parse(cl, &c, &err)) {
    fprintf(stderr, "gopt fidelity: %s\n", err.msg);
    goto done;
  }
  if (!(one = gopt_cluster_single(&c->devices[0]))) goto oom;
  json_error_t je;
  root = json_load_file(dbp, 0, &je);
  json_t *steps = json_object_get(root, "steps");
  if (steps && !json_is_array(steps)) {
    fprintf(stderr, "gopt fidelity: %s: \"steps\" must be an array of {\"model\", \"seconds\"}\n", dbp);
    goto done;
  }
  out = json_object();
  rows = json_array();
  if (!json)
    printf("%-28s %7s %8s %8s %9s %12s %12s %9s %12s\n", "model", "nodes", "matched", "tau",
           "MdAPE %", "pred step ms", "meas step ms", "step err%", "e2e meas ms");
  for (int m = 0; m < nm; m++) {
    /* A symbolic batch is bound to 1, as gopt run does when profiling, so signatures match. */
    cli_model_opts mo = {.default_batch = 1};
    gopt_graph *g = cli_load_model(models[m], &mo);
    if (!g) goto done;
    gopt_sim *s = NULL;
    gopt_sim_state *st = NULL;
    gopt_sim_opts so = {GOPT_SIM_COSTS_ANALYTICAL, NULL, NULL, NULL};
    gopt_sim_result r;
    if (gopt_sim_new(g, one, &so, &s, &err) || !(st = gopt_sim_state_new(s)) ||
        gopt_sim_evaluate(st, &r, &err)) {
      fprintf(stderr, "gopt fidelity: %s: %s\n", models[m], st || err.msg[0] ? err.msg : "out of memory");
      gopt_sim_state_free(st);
      gopt_sim_free(s);
      gopt_graph_free(g);
      goto done;
    }
    size_t N = g->nodes.n, k = 0, live = 0;
    free(pred);
    free(meas);
    pred = malloc((N + 1) * sizeof *pred);
    meas = malloc((N + 1) * sizeof *meas);
    if (!pred || !meas) {
      gopt_sim_state_free(st);
      gopt_sim_free(s);
      gopt_graph_free(g);
      goto oom;
    }
    double psum = 0, msum = 0;
    for (size_t n = 0; n < N; n++) {
      if (!gopt_node_alive(g, (int32_t)n)) continue;
      live++;
      gopt_cost_entry e;
      if (!gopt_costdb_get(db, gopt_op_signature(g, (int32_t)n), &e)) continue;
      pred[k] = gopt_sim_node_time(s, (int32_t)n, 0);
      meas[k] = e.seconds;
      psum += pred[k];
      msum += meas[k];
      k++;
    }
    if (nall + k > capall) {
      capall = 2 * (nall + k) + 64;
      double *a = realloc(pall, capall * sizeof *pall), *b = realloc(mall, capall * sizeof *mall);
      if (a) pall = a;
      if (b) mall = b;
      if (!a || !b) {
        gopt_sim_state_free(st);
        gopt_sim_free(s);
        gopt_graph_free(g);
        goto oom;
      }
    }
    memcpy(pall + nall, pred, k * sizeof *pred);
    memcpy(mall + nall, meas, k * sizeof *meas);
    nall += k;
    double tau = gopt_sim_kendall_tau(pred, meas, k);
    double mdape = gopt_sim_mdape(pred, meas, k, NULL);
    /* one CPU device runs the ops one after another: the measured step is the sum of the
     * measured op times of the executed nodes; compared with the predicted times of the same
     * nodes (and the full simulated step, which equals it when every node was measured) */
    double step_err = msum > 0 ? (psum - msum) / msum * 100 : NAN;
    double e2e = steps ? e2e_of(steps, models[m], gopt_graph_str(g, g->name)) : -1;
    json_t *row = json_object();
    json_object_set_new(row, "model", json_string(models[m]));
    json_object_set_new(row, "nodes", json_integer((json_int_t)live));
    json_object_set_new(row, "matched", json_integer((json_int_t)k));
    json_object_set_new(row, "kendall_tau", json_real(tau));
    json_object_set_new(row, "median_abs_pct_error", k ? json_real(mdape) : json_null());
    json_object_set_new(row, "predicted_step_s", json_real(r.step_time));
    json_object_set_new(row, "predicted_matched_s", json_real(psum));
    json_object_set_new(row, "measured_step_s", json_real(msum));
    json_object_set_new(row, "step_error_pct", msum > 0 ? json_real(step_err) : json_null());
    if (e2e >= 0) {
      json_object_set_new(row, "measured_end_to_end_s", json_real(e2e));
      json_object_set_new(row, "end_to_end_error_pct", json_real((r.step_time - e2e) / e2e * 100));
    }
    json_array_append_new(rows, row);
    if (!json) {
      char e2es[32] = "-";
      if (e2e >= 0) snprintf(e2es, sizeof e2es, "%.3f", e2e * 1e3);
      printf("%-28.28s %7zu %8zu %8.3f %9.1f %12.3f %12.3f %9.1f %12s\n", models[m], live, k, tau,
             k ? mdape : NAN, psum * 1e3, msum * 1e3, step_err, e2es);
    }
    gopt_sim_state_free(st);
    gopt_sim_free(s);
    gopt_graph_free(g);
  }
  double tau_all = gopt_sim_kendall_tau(pall, mall, nall);
  double md_all = gopt_sim_mdape(pall, mall, nall, NULL);
  if (json) {
    json_object_set_new(out, "costdb", json_string(dbp));
    json_object_set_new(out, "device", json_string(c->devices[0].model));
    json_object_set_new(out, "models", rows);
    rows = NULL;
    json_object_set_new(out, "pooled_ops", json_integer((json_int_t)nall));
    json_object_set_new(out, "pooled_kendall_tau", json_real(tau_all));
    json_object_set_new(out, "pooled_median_abs_pct_error", nall ? json_real(md_all) : json_null());
    json_dumpf(out, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
  } else {
    printf("pooled over %zu measured ops: Kendall tau %.3f, median |error| %.1f%% (device %s)\n",
           nall, tau_all, md_all, c->devices[0].model);
  }
  rc = 0;
  goto done;
oom:
  fprintf(stderr, "gopt fidelity: out of memory\n");
done:
  json_decref(rows);
  json_decref(out);
  json_decref(root);
  free(pred);
  free(meas);
  free(pall);
  free(mall);
  gopt_cluster_free(one);
  gopt_cluster_free(c);
  gopt_costdb_free(db);
  free(models);
  return rc;
}
