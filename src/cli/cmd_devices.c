/* cmd_devices.c: `gopt devices`: lists the device presets and cluster shorthands the simulator
 * accepts (--cluster). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gopt/device.h"
#include "gopt/ops.h"

static const char dev_help[] =
    "usage: gopt devices [--json]\n"
    "  lists the device presets (peak FLOP/s, memory bandwidth and size, launch overhead,\n"
    "  per-op-class efficiency) and cluster shorthands for --cluster: [N x]PRESET[-LINK] with\n"
    "  LINK one of nvlink, nvswitch, pcie, ici, shm, eth; or a cluster JSON file\n";

int cli_devices(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(dev_help, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else {
      return cli_usage_error("devices", "unknown argument '%s' (see gopt devices --help)", argv[i]);
    }
  }
  size_t n = gopt_device_preset_count();
  if (json) {
    json_t *o = json_object(), *arr = json_array(), *sh = json_array();
    for (size_t i = 0; i < n; i++) {
      const gopt_device *d = gopt_device_preset(i);
      json_t *e = json_object(), *pf = json_object(), *ef = json_object();
      json_object_set_new(e, "name", json_string(d->model));
      json_object_set_new(e, "kind", json_string(d->kind));
      json_object_set_new(e, "note", json_string(gopt_device_preset_note(i)));
      for (int t = 1; t < GOPT_DT_COUNT; t++)
        if (d->peak_flops[t] > 0) json_object_set_new(pf, gopt_dtype_name(t), json_real(d->peak_flops[t]));
      json_object_set_new(e, "peak_flops", pf);
      json_object_set_new(e, "mem_bw", json_real(d->mem_bw));
      json_object_set_new(e, "memory", json_real(d->mem_bytes));
      json_object_set_new(e, "launch_us", json_real(d->launch_s * 1e6));
      for (int k = 0; k < GOPT_SIM_NCLASS; k++)
        json_object_set_new(ef, gopt_op_class_name(k), json_real(d->eff[k]));
      json_object_set_new(e, "efficiency", ef);
      json_object_set_new(e, "measured", json_boolean(d->measured));
      if (d->gpu_model) json_object_set_new(e, "gpu_cost_model", json_string(d->gpu_version));
      json_array_append_new(arr, e);
    }
    for (size_t i = 0; i < gopt_cluster_shorthand_count(); i++)
      json_array_append_new(sh, json_string(gopt_cluster_shorthand_example(i)));
    json_object_set_new(o, "presets", arr);
    json_object_set_new(o, "shorthand_examples", sh);
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
    return 0;
  }
  printf("%-6s %-4s %12s %12s %10s %9s %7s  %s\n", "preset", "kind", "f32 TFLOP/s",
         "f16 TFLOP/s", "mem GB/s", "mem GiB", "launch", "efficiency conv/elemwise");
  for (size_t i = 0; i < n; i++) {
    const gopt_device *d = gopt_device_preset(i);
    printf("%-6s %-4s %12.1f %12.1f %10.0f %9.1f %5.1fus  %.2f/%.2f\n", d->model, d->kind,
           gopt_device_peak(d, GOPT_DT_FLOAT) / 1e12, gopt_device_peak(d, GOPT_DT_FLOAT16) / 1e12,
           d->mem_bw / 1e9, d->mem_bytes / (1024.0 * 1024 * 1024), d->launch_s * 1e6,
           d->eff[GOPT_OPC_CONV], d->eff[GOPT_OPC_ELEMWISE]);
    printf("       %s\n", gopt_device_preset_note(i));
    if (d->gpu_model)
      printf("       cost model: measured-GPU %s%s\n", d->gpu_version,
             strstr(d->gpu_version, "-scaled") ? " (extrapolated from the H100 by data-sheet peaks)"
                                               : " (calibrated on a real GPU)");
  }
  printf("\ncluster shorthands ([N x]PRESET[-LINK]; LINK: nvlink nvswitch pcie ici shm eth):");
  for (size_t i = 0; i < gopt_cluster_shorthand_count(); i++)
    printf(" %s", gopt_cluster_shorthand_example(i));
  printf("\nor a cluster JSON file (docs/SIMULATOR.md); gopt calibrate fits the host preset\n");
  return 0;
}
