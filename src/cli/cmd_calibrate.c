/* cmd_calibrate.c: `gopt calibrate --costdb FILE [MODEL...] [-o host.json]`: fits the host
 * device's launch overhead and per-op-class efficiencies to the measured cost database (least
 * squares on log times) using the FLOPs and bytes of the models' nodes whose signatures the
 * database holds; reports the fit and writes a one-device cluster file usable as --cluster. */
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/costdb.h"
#include "gopt/ops.h"
#include "gopt/sim.h"
#include "gopt/util.h"

static const char cal_help[] =
    "usage: gopt calibrate --costdb FILE [MODEL...] [-o host.json] [--samples F.csv] [--json]\n"
    "       gopt calibrate --gpu MEASUREMENTS.json [--device NAME] [-o dev.json] [--loo] ...\n"
    "         (a measured GPU; see gopt calibrate --gpu --help)\n"
    "  fits the host device (launch overhead, per-op-class efficiency) to measured op times;\n"
    "  MODELs give each signature's FLOPs and bytes (default: corpus/*.onnx)\n"
    "  -o FILE   write the calibrated host as a cluster JSON file (use it as --cluster FILE)\n"
    "  --samples FILE  also write the fitted samples as CSV (signature, op, class, dtype, FLOPs,\n"
    "            bytes, measured and predicted seconds before/after, description) for analysis\n";

/* Writes the samples as CSV (one row per distinct signature) with the predictions of the preset
 * (before) and the fitted device (after); atomically. */
static int write_samples(const char *path, const gopt_costdb *db, const uint64_t *sigs,
                         const int *cnt, const gopt_sim_sample *smp, size_t ns, const gopt_device *before,
                         const gopt_device *after, gopt_error *err) {
  size_t cap = 256 + ns * 320, len = 0;
  char *buf = malloc(cap);
  if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  len += (size_t)snprintf(buf, cap, "sig,op,class,dtype,nodes,flops,bytes,seconds,pred_before,pred_after,desc\n");
  for (size_t i = 0; i < ns && len < cap; i++) {
    gopt_cost_entry e;
    if (!gopt_costdb_get(db, sigs[i], &e)) continue;
    const gopt_sim_sample *x = &smp[i];
    char desc[200];
    size_t k = 0;
    for (const char *q = e.desc ? e.desc : ""; *q && k + 1 < sizeof desc; q++)
      desc[k++] = *q == ',' ? ';' : *q == '"' ? '\'' : *q; /* keep the CSV one field */
    desc[k] = 0;
    len += (size_t)snprintf(buf + len, cap - len, "%016llx,%s,%s,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%s\n",
                            (unsigned long long)sigs[i], e.op ? e.op : "",
                            gopt_op_class_name(x->cls), x->dtype, cnt[i], x->flops, x->bytes, x->seconds,
                            gopt_device_kernel_time(before, x->cls, x->dtype, x->flops, x->bytes),
                            gopt_device_kernel_time(after, x->cls, x->dtype, x->flops, x->bytes),
                            desc);
  }
  if (len >= cap) len = cap - 1;
  int rc = gopt_file_write_atomic(path, buf, len, err);
  free(buf);
  return rc;
}

int cli_calibrate(int argc, char **argv) {
  const char *dbp = NULL, *outp = NULL, *csvp = NULL;
  const char **models = calloc((size_t)argc + 1, sizeof *models);
  int nm = 0, json = 0, rc = 1;
  glob_t gl;
  int globbed = 0;
  gopt_costdb *db = NULL;
  gopt_sim_sample *smp = NULL;
  uint64_t *sigs = NULL;
  int *cnt = NULL;                   /* nodes per distinct signature (for --samples) */
  size_t ns = 0, cap = 0;
  gopt_cluster *c = NULL;
  char *text = NULL;
  gopt_error err = {0};
  if (!models) return 1;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--gpu")) {
      free(models);
      return cli_calibrate_gpu(argc, argv);
    }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(cal_help, stdout);
      free(models);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--costdb") || !strcmp(argv[i], "-o") ||
               !strcmp(argv[i], "--samples")) {
      if (i + 1 >= argc) {
        free(models);
        return cli_usage_error("calibrate", "%s needs a value", argv[i]);
      }
      if (!strcmp(argv[i], "-o")) outp = argv[++i];
      else if (!strcmp(argv[i], "--samples")) csvp = argv[++i];
      else dbp = argv[++i];
    } else if (argv[i][0] == '-') {
      free(models);
      return cli_usage_error("calibrate", "unknown flag '%s' (see gopt calibrate --help)", argv[i]);
    } else {
      models[nm++] = argv[i];
    }
  }
  if (!dbp) {
    free(models);
    return cli_usage_error("calibrate", "missing --costdb FILE");
  }
  if (gopt_costdb_load(dbp, &db, &err)) {
    fprintf(stderr, "gopt calibrate: %s\n", err.msg);
    goto done;
  }
  if (nm == 0) {
    if (glob("corpus/*.onnx", 0, NULL, &gl) == 0) {
      globbed = 1;
      for (size_t i = 0; i < gl.gl_pathc && nm < argc; i++) models[nm++] = gl.gl_pathv[i];
    }
    if (nm == 0) {
      fprintf(stderr, "gopt calibrate: no MODEL given and no corpus/*.onnx here\n");
      goto done;
    }
  }
  for (int m = 0; m < nm; m++) {
    /* A symbolic batch is bound to 1, as gopt run does when profiling, so signatures match. */
    cli_model_opts mo = {.default_batch = 1};
    gopt_graph *g = cli_load_model(models[m], &mo);
    if (!g) goto done;
    for (size_t n = 0; n < g->nodes.n; n++) {
      const gopt_node *nd = &g->nodes.a[n];
      gopt_cost_entry e;
      if (!gopt_node_alive(g, (int32_t)n)) continue;
      uint64_t sig = gopt_op_signature(g, (int32_t)n);
      if (!gopt_costdb_get(db, sig, &e)) continue;
      if (ns == cap) {
        cap = cap ? 2 * cap : 256;
        gopt_sim_sample *a = realloc(smp, cap * sizeof *smp);
        uint64_t *b = realloc(sigs, cap * sizeof *sigs);
        int *cn = realloc(cnt, cap * sizeof *cnt);
        if (a) smp = a;
        if (b) sigs = b;
        if (cn) cnt = cn;
        if (!a || !b || !cn) {
          gopt_graph_free(g);
          fprintf(stderr, "gopt calibrate: out of memory\n");
          goto done;
        }
      }
      /* each signature once: skip ones already taken */
      int dup = 0;
      for (size_t k = 0; k < ns && !dup; k++)
        if (sigs[k] == sig) {
          dup = 1;
          cnt[k]++;
        }
      if (dup) continue;
      gopt_cost co;
      gopt_node_cost(g, (int32_t)n, &co);
      sigs[ns] = sig;
      cnt[ns] = 1;
      smp[ns++] = (gopt_sim_sample){gopt_op_class_of(nd->op),
                                     nd->n_out ? g->tensors.a[gopt_node_output(g, (int32_t)n, 0)].dtype : 1,
                                     co.flops, co.bytes_read + co.bytes_written, e.seconds};
    }
    gopt_graph_free(g);
  }
  /* each node is one sample (a signature weighs as often as it runs, as in the step time) */
  size_t nn = 0;
  for (size_t k = 0; k < ns; k++) nn += (size_t)cnt[k];
  gopt_sim_sample *all = malloc((nn ? nn : 1) * sizeof *all);
  if (!all) {
    fprintf(stderr, "gopt calibrate: out of memory\n");
    goto done;
  }
  nn = 0;
  for (size_t k = 0; k < ns; k++)
    for (int j = 0; j < cnt[k]; j++) all[nn++] = smp[k];
  gopt_device host = *gopt_device_find_preset("host");
  gopt_sim_fit fit;
  int frc = gopt_sim_fit_device(&host, all, nn, &fit, &err);
  free(all);
  if (frc) {
    fprintf(stderr, "gopt calibrate: %s: %s\n", dbp, err.msg);
    goto done;
  }
  if (csvp && write_samples(csvp, db, sigs, cnt, smp, ns, gopt_device_find_preset("host"), &host, &err)) {
    fprintf(stderr, "gopt calibrate: %s\n", err.msg);
    goto done;
  }
  snprintf(host.name, sizeof host.name, "host");
  snprintf(host.model, sizeof host.model, "host-calibrated");
  const gopt_device *orig = gopt_device_find_preset("host");
  if (outp) {
    if (!(c = gopt_cluster_single(&host))) {
      fprintf(stderr, "gopt calibrate: out of memory\n");
      goto done;
    }
    snprintf(c->name, sizeof c->name, "host-calibrated");
    text = gopt_cluster_to_json(c);
    if (!text || gopt_file_write_atomic(outp, text, strlen(text), &err)) {
      fprintf(stderr, "gopt calibrate: %s\n", text ? err.msg : "out of memory");
      goto done;
    }
  }
  if (json) {
    json_t *o = json_object(), *cl = json_array();
    json_object_set_new(o, "costdb", json_string(dbp));
    json_object_set_new(o, "samples", json_integer((json_int_t)ns));
    json_object_set_new(o, "nodes", json_integer((json_int_t)nn));
    json_object_set_new(o, "op_us_base", json_real(host.launch_s * 1e6));
    json_object_set_new(o, "serial", json_real(host.serial));
    json_object_set_new(o, "peak_flops_f32", json_real(host.peak_flops[GOPT_DT_FLOAT]));
    json_object_set_new(o, "mem_bw", json_real(host.mem_bw));
    json_t *ca = json_array();
    for (int k = 0; k < 2; k++)
      if (host.cache_bytes[k] > 0) {
        json_t *e = json_object();
        json_object_set_new(e, "bytes", json_real(host.cache_bytes[k]));
        json_object_set_new(e, "bw", json_real(host.cache_bw[k] > 0 ? host.cache_bw[k] : host.mem_bw));
        json_array_append_new(ca, e);
      }
    json_object_set_new(o, "caches", ca);
    json_object_set_new(o, "launch_us_before", json_real(orig->launch_s * 1e6));
    json_object_set_new(o, "launch_us", json_real(fit.launch_s * 1e6));
    for (int k = 1; k < GOPT_SIM_NCLASS; k++) {
      json_t *e = json_object();
      json_object_set_new(e, "class", json_string(gopt_op_class_name(k)));
      json_object_set_new(e, "samples", json_integer(fit.n[k]));
      json_object_set_new(e, "efficiency_before", json_real(orig->eff[k]));
      json_object_set_new(e, "efficiency", json_real(fit.eff[k]));
      json_object_set_new(e, "efficiency_mem", json_real(host.eff_mem[k] > 0 ? host.eff_mem[k] : host.eff[k]));
      json_object_set_new(e, "efficiency_slope", json_real(host.eff_slope[k]));
      json_object_set_new(e, "op_us", json_real(host.op_s[k] * 1e6));
      json_array_append_new(cl, e);
    }
    json_object_set_new(o, "classes", cl);
    json_object_set_new(o, "rms_log_error_before", json_real(fit.rms_log_before));
    json_object_set_new(o, "rms_log_error", json_real(fit.rms_log_after));
    json_object_set_new(o, "median_abs_pct_error_before", json_real(fit.mdape_before));
    json_object_set_new(o, "median_abs_pct_error", json_real(fit.mdape_after));
    if (outp) json_object_set_new(o, "output", json_string(outp));
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
  } else {
    printf("calibrated host from %s: %zu distinct measured signatures (%zu nodes) over %d model(s)\n",
           dbp, ns, nn, nm);
    printf("launch overhead: %.2f us (was %.2f); peak f32 %.1f GFLOP/s (was %.1f), mem_bw %.1f GB/s "
           "(was %.1f); serial %.2f\n", fit.launch_s * 1e6, orig->launch_s * 1e6,
           host.peak_flops[GOPT_DT_FLOAT] / 1e9, orig->peak_flops[GOPT_DT_FLOAT] / 1e9,
           host.mem_bw / 1e9, orig->mem_bw / 1e9, host.serial);
    for (int k = 0; k < 2; k++)
      if (host.cache_bytes[k] > 0)
        printf("cache level %d: %.0f KiB at %.1f GB/s\n", k + 2, host.cache_bytes[k] / 1024,
               (host.cache_bw[k] > 0 ? host.cache_bw[k] : host.mem_bw) / 1e9);
    printf("%-10s %8s %12s %12s %12s %8s %8s\n", "class", "nodes", "eff before", "eff fitted",
           "eff mem", "slope", "op us");
    for (int k = 1; k < GOPT_SIM_NCLASS; k++)
      printf("%-10s %8d %12.4f %12.4g %12.4g %8.3f %8.3f\n", gopt_op_class_name(k), fit.n[k],
             orig->eff[k], fit.eff[k], host.eff_mem[k] > 0 ? host.eff_mem[k] : host.eff[k],
             host.eff_slope[k], host.op_s[k] * 1e6);
    printf("RMS log error %.3f -> %.3f; median |error| %.1f%% -> %.1f%%\n", fit.rms_log_before,
           fit.rms_log_after, fit.mdape_before, fit.mdape_after);
    if (outp) printf("written to %s (use --cluster %s)\n", outp, outp);
  }
  rc = 0;
done:
  free(text);
  gopt_cluster_free(c);
  free(smp);
  free(sigs);
  free(cnt);
  gopt_costdb_free(db);
  if (globbed) globfree(&gl);
  free(models);
  return rc;
}
