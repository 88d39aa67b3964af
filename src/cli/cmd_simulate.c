/* cmd_simulate.c: `gopt simulate MODEL --cluster C`: one simulated step with optional placement,
 * fusion and schedule decisions; prints step time, per-device busy time and memory, per-link
 * traffic and the critical path (text or JSON), and optionally writes a Chrome trace. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/costdb.h"
#include "gopt/decisions.h"
#include "gopt/sim.h"

static const char sim_help[] =
    "usage: gopt simulate MODEL --cluster C [--placement F] [--fusion F] [--schedule F]\n"
    "                      [--costs analytical|measured|auto] [--costdb F] [--json] [--trace F]\n"
    "                      [--batch N] [--training]\n"
    "  MODEL          an .onnx file or a zoo spec\n"
    "  --cluster C    a shorthand (V100, 4xV100-nvlink, 2xV100-pcie, 8xH100, 4xTPUv3, 2xhost) or\n"
    "                 a cluster JSON file (gopt devices lists presets; docs/SIMULATOR.md)\n"
    "  --placement F, --fusion F, --schedule F, --decisions F\n"
    "                 decisions files (docs/DECISIONS.md); each may hold any of the keys placement,\n"
    "                 fusion, schedule, order; later files override keys of earlier ones\n"
    "  --costs M      analytical (default without --costdb), measured (needs --costdb), auto\n"
    "  --costdb F     measured cost database (gopt run --profile) for devices of this host\n"
    "  --json         print one JSON object\n"
    "  --trace F      write the timeline as Chrome trace-event JSON (Perfetto, chrome://tracing)\n"
    "  --batch N      bind the symbolic batch dimension;  --training  simulate a training step\n";

static int fail(const char *msg) {
  fprintf(stderr, "gopt simulate: %s\n", msg);
  return 1;
}

/* What prices a kernel on c's devices, each kind once, into buf: "roofline" and the measured-GPU
 * calibrations in use ("measured-GPU h100-2026-11-28", ...; gopt devices lists each preset's). */
static void kernel_model(const gopt_cluster *c, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < c->n_devices; i++) {
    const gopt_device *d = &c->devices[i];
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) {
      const gopt_device *e = &c->devices[j];
      seen = e->gpu_model == d->gpu_model && (!d->gpu_model || !strcmp(e->gpu_version, d->gpu_version));
    }
    if (!seen && used < n)
      used += (size_t)snprintf(buf + used, n - used, "%s%s%s", used ? ", " : "",
                               d->gpu_model ? "measured-GPU " : "roofline", d->gpu_model ? d->gpu_version : "");
  }
}

int cli_simulate(int argc, char **argv) {
  const char *model = NULL, *cluster = NULL, *costdb_path = NULL, *trace = NULL, *costs = NULL;
  const char *files[16];
  int nfiles = 0, json = 0, rc = 1;
  cli_model_opts mo = {0};
  int mf;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(sim_help, stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if ((mf = cli_model_flag("simulate", argc, argv, &i, &mo)) != 0) {
      if (mf < 0) return 2;
    } else if (!strcmp(a, "--cluster") || !strcmp(a, "--costdb") || !strcmp(a, "--trace") ||
               !strcmp(a, "--costs") || !strcmp(a, "--placement") || !strcmp(a, "--fusion") ||
               !strcmp(a, "--schedule") || !strcmp(a, "--decisions")) {
      if (!has) return cli_usage_error("simulate", "%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--cluster")) cluster = v;
      else if (!strcmp(a, "--costdb")) costdb_path = v;
      else if (!strcmp(a, "--trace")) trace = v;
      else if (!strcmp(a, "--costs")) costs = v;
      else {
        if (nfiles == 16) return cli_usage_error("simulate", "at most 16 decisions files");
        files[nfiles++] = v;
      }
    } else if (a[0] == '-' && a[1]) {
      return cli_usage_error("simulate", "unknown flag '%s' (see gopt simulate --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return cli_usage_error("simulate", "unexpected argument '%s' (one MODEL)", a);
    }
  }
  if (!model) return cli_usage_error("simulate", "missing MODEL (see gopt simulate --help)");
  if (!cluster) return cli_usage_error("simulate", "missing --cluster (e.g. --cluster 4xV100-nvlink)");
  int mode = costdb_path ? GOPT_SIM_COSTS_AUTO : GOPT_SIM_COSTS_ANALYTICAL;
  if (costs) {
    if (!strcmp(costs, "analytical")) mode = GOPT_SIM_COSTS_ANALYTICAL;
    else if (!strcmp(costs, "measured")) mode = GOPT_SIM_COSTS_MEASURED;
    else if (!strcmp(costs, "auto")) mode = GOPT_SIM_COSTS_AUTO;
    else return cli_usage_error("simulate", "--costs: expected analytical, measured or auto, got '%s'", costs);
  }
  if (mode == GOPT_SIM_COSTS_MEASURED && !costdb_path)
    return cli_usage_error("simulate", "--costs measured needs --costdb FILE");

  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_costdb *db = NULL;
  gopt_graph *g = NULL;
  gopt_sim *s = NULL;
  gopt_sim_state *st = NULL;
  gopt_sim_item *path = NULL;
  gopt_decisions d;
  memset(&d, 0, sizeof d);
  if (gopt_cluster_parse(cluster, &c, &err)) {
    fail(err.msg);
    goto done;
  }
  if (costdb_path && gopt_costdb_load(costdb_path, &db, &err)) {
    fail(err.msg);
    goto done;
  }
  if (!(g = cli_load_model(model, &mo))) goto done;
  gopt_decisions_init(&d, g);
  for (int i = 0; i < nfiles; i++)
    if (gopt_decisions_load(&d, g, files[i], &err)) {
      fail(err.msg);
      goto done;
    }
  gopt_sim_opts so = {mode, db, NULL, NULL};
  if (gopt_sim_new(g, c, &so, &s, &err)) {
    fail(err.msg);
    goto done;
  }
  if (!(st = gopt_sim_state_new(s))) {
    fail("out of memory");
    goto done;
  }
  if (gopt_sim_state_apply(st, &d, &err)) {
    gopt_error_prefix(&err, "%s: ", nfiles ? files[nfiles - 1] : "decisions");
    fail(err.msg);
    goto done;
  }
  gopt_sim_result r;
  if (gopt_sim_evaluate(st, &r, &err)) {
    fail(err.msg);
    goto done;
  }
  if (trace && gopt_sim_write_trace(st, trace, &err)) {
    fail(err.msg);
    goto done;
  }
  size_t np = gopt_sim_critical_path(st, NULL, 0);
  path = calloc(np ? np : 1, sizeof *path);
  if (!path) {
    fail("out of memory");
    goto done;
  }
  gopt_sim_critical_path(st, path, np);
  const char *cost_name = mode == GOPT_SIM_COSTS_ANALYTICAL ? "analytical"
                          : mode == GOPT_SIM_COSTS_MEASURED ? "measured" : "auto";
  char kmodel[128];
  kernel_model(c, kmodel, sizeof kmodel);
  if (json) {
    json_t *o = json_object(), *jd = json_array(), *jl = json_array(), *cp = json_array();
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "nodes", json_integer((json_int_t)gopt_sim_node_count(s)));
    json_object_set_new(o, "cluster", json_string(c->name));
    json_object_set_new(o, "costs", json_string(cost_name));
    json_object_set_new(o, "kernel_model", json_string(kmodel));
    json_object_set_new(o, "measured_nodes", json_integer((json_int_t)gopt_sim_measured_count(s)));
    json_object_set_new(o, "step_time_s", json_real(r.step_time));
    json_object_set_new(o, "feasible", json_boolean(r.feasible));
    json_object_set_new(o, "kernels", json_integer((json_int_t)r.n_kernels));
    json_object_set_new(o, "transfers", json_integer((json_int_t)r.n_transfers));
    json_object_set_new(o, "transfer_bytes", json_real(r.transfer_bytes));
    for (int k = 0; k < r.n_devices; k++) {
      json_t *e = json_object();
      json_object_set_new(e, "name", json_string(c->devices[k].name));
      json_object_set_new(e, "model", json_string(c->devices[k].model));
      json_object_set_new(e, "busy_s", json_real(r.busy[k]));
      json_object_set_new(e, "utilization", json_real(r.step_time > 0 ? r.busy[k] / r.step_time : 0));
      json_object_set_new(e, "peak_mem_bytes", json_real(r.peak_mem[k]));
      json_object_set_new(e, "resident_bytes", json_real(r.resident[k]));
      json_object_set_new(e, "capacity_bytes", json_real(c->devices[k].mem_bytes));
      json_object_set_new(e, "over_bytes", json_real(r.mem_over[k]));
      json_array_append_new(jd, e);
    }
    for (int l = 0; l < r.n_links; l++) {
      json_t *e = json_object();
      json_object_set_new(e, "name", json_string(c->links[l].name));
      json_object_set_new(e, "bytes", json_real(r.link_bytes[l]));
      json_object_set_new(e, "busy_s", json_real(r.link_busy[l]));
      json_array_append_new(jl, e);
    }
    for (size_t i = 0; i < np; i++) {
      json_t *e = json_object();
      if (path[i].kind == 0) {
        json_object_set_new(e, "kind", json_string("kernel"));
        json_object_set_new(e, "node", json_string(gopt_node_name(g, path[i].id)));
        json_object_set_new(e, "device", json_integer(path[i].device));
      } else {
        gopt_sim_transfer_info t;
        gopt_sim_transfer(st, (size_t)path[i].id, &t);
        json_object_set_new(e, "kind", json_string("transfer"));
        json_object_set_new(e, "tensor", json_string(gopt_graph_str(g, g->tensors.a[t.tensor].name)));
        json_object_set_new(e, "link", json_integer(t.link));
        json_object_set_new(e, "bytes", json_real(t.bytes));
      }
      json_object_set_new(e, "start_s", json_real(path[i].start));
      json_object_set_new(e, "end_s", json_real(path[i].end));
      json_array_append_new(cp, e);
    }
    json_object_set_new(o, "devices", jd);
    json_object_set_new(o, "links", jl);
    json_object_set_new(o, "critical_path", cp);
    if (trace) json_object_set_new(o, "trace", json_string(trace));
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
  } else {
    printf("model %s: %zu nodes on %s (%d devices, %d links), %s costs (kernels: %s)", model,
           gopt_sim_node_count(s), c->name, c->n_devices, c->n_links, cost_name, kmodel);
    if (db) printf(" (%zu nodes measured)", gopt_sim_measured_count(s));
    printf("\nstep time %.3f ms, %s, %zu kernels, %zu transfers (%.3f MB)\n", r.step_time * 1e3,
           r.feasible ? "feasible" : "INFEASIBLE (out of memory)", r.n_kernels, r.n_transfers,
           r.transfer_bytes / 1e6);
    printf("\n%-4s %-12s %-8s %12s %6s %14s %14s %14s\n", "dev", "name", "model", "busy ms", "util",
           "peak MB", "capacity MB", "over MB");
    for (int k = 0; k < r.n_devices; k++)
      printf("%-4d %-12s %-8s %12.3f %5.1f%% %14.3f %14.1f %14.3f\n", k, c->devices[k].name,
             c->devices[k].model, r.busy[k] * 1e3,
             r.step_time > 0 ? 100 * r.busy[k] / r.step_time : 0, r.peak_mem[k] / 1e6,
             c->devices[k].mem_bytes / 1e6, r.mem_over[k] / 1e6);
    int shown = 0;
    for (int l = 0; l < r.n_links; l++)
      if (r.link_bytes[l] > 0) {
        if (!shown++) printf("\n%-20s %14s %12s\n", "link", "MB", "busy ms");
        printf("%-20s %14.3f %12.3f\n", c->links[l].name, r.link_bytes[l] / 1e6, r.link_busy[l] * 1e3);
      }
    printf("\ncritical path: %zu items\n", np);
    for (size_t i = 0; i < np; i++) {
      if (np > 24 && i == 10) {
        printf("  ... %zu more ...\n", np - 20);
        i = np - 10;
      }
      if (path[i].kind == 0)
        printf("  %10.3f ms  %-8s dev %-3d %s\n", path[i].start * 1e3, "kernel", path[i].device,
               gopt_node_name(g, path[i].id));
      else {
        gopt_sim_transfer_info t;
        gopt_sim_transfer(st, (size_t)path[i].id, &t);
        printf("  %10.3f ms  %-8s %d->%d %s (%.0f B)\n", path[i].start * 1e3, "transfer", t.src,
               t.dst, gopt_graph_str(g, g->tensors.a[t.tensor].name), t.bytes);
      }
    }
    if (trace) printf("\ntrace written to %s\n", trace);
  }
  rc = 0;
done:
  free(path);
  gopt_decisions_clear(&d);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_graph_free(g);
  gopt_costdb_free(db);
  gopt_cluster_free(c);
  return rc;
}
