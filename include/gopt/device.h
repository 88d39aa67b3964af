/* gopt/device.h: devices, links and clusters the simulator (sim.h) runs a step on: the built-in
 * presets (V100, A100, H100, TPU-v3 core, this host's CPU), cluster shorthands ("4xV100-nvlink",
 * "8xH100", "2xhost") and the cluster JSON file format (docs/SIMULATOR.md), and the analytical
 * per-kernel cost (roofline + launch overhead + per-op-class efficiency). */
#ifndef GOPT_DEVICE_H
#define GOPT_DEVICE_H

#include <stddef.h>

#include "gopt/error.h"
#include "gopt/gpu_cost.h"
#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of op classes (gopt_op_class in ops.h: shape .. opaque). */
#define GOPT_SIM_NCLASS 7

typedef struct gopt_device {
  char name[32];                      /* instance name ("gpu0") */
  char model[32];                     /* preset it came from ("V100"), or "custom" */
  char kind[8];                       /* "gpu", "tpu" or "cpu" */
  double peak_flops[GOPT_DT_COUNT];   /* FLOP/s per dtype (gopt_dtype); 0 = the FLOAT value */
  double mem_bw;                      /* memory bandwidth, bytes/s */
  double mem_bytes;                   /* memory capacity, bytes */
  double launch_s;                    /* per-kernel launch overhead, seconds */
  double eff[GOPT_SIM_NCLASS];        /* fraction of the roofline reached, per op class */
  int measured;                       /* 1: the cost database measured on this host applies */
  /* Optional refinements (gopt calibrate fits them for the host; zero = off, i.e. the plain
   * roofline: the GPU/TPU presets and old cluster files leave them zero). */
  double eff_mem[GOPT_SIM_NCLASS];    /* memory-regime efficiency per class; 0 = eff[class] */
  double eff_slope[GOPT_SIM_NCLASS];  /* compute efficiency x (FLOPs/byte)^slope, slope in [-1, 1] */
  double op_s[GOPT_SIM_NCLASS];       /* fixed per-op overhead per class (s), added to launch_s */
  double serial;                      /* in [0, 1]: share of the shorter of compute and memory time
                                       * not hidden behind the longer (0: max, 1: their sum) */
  double cache_bytes[2];              /* cache levels, smallest first (bytes; 0 = none) ... */
  double cache_bw[2];                 /* ... and the bandwidth a working set that fits reaches
                                       * (bytes/s; 0 = mem_bw) */
  /* Measured-GPU cost model (gopt/gpu_cost.h; gopt calibrate --gpu; python/gopt/_lib.py mirrors
   * these fields): when gpu_model is set, a
   * node's time is sum gpu_coef[j] * feature_j(node) instead of the roofline above. */
  int gpu_model;
  double gpu_coef[GOPT_GPU_NCOEF];    /* seconds per unit of each feature, >= 0 */
  char gpu_version[24];               /* calibration the coefficients come from ("h100-2026-11-27") */
  double gpu_half_speedup;            /* bf16/fp16 nodes: tensor-core compute terms / this (0: 1) */
} gopt_device;

/* A link is one shared channel: every transfer routed over it queues FIFO behind the others
 * (both directions share it). A transfer of B bytes occupies it for B / bw + latency_s. */
typedef struct gopt_link {
  char name[48];
  double bw;          /* bytes/s */
  double latency_s;   /* seconds per transfer */
} gopt_link;

typedef struct gopt_cluster {
  char name[64];
  int n_devices;
  int n_links;
  gopt_device *devices;
  gopt_link *links;
  /* route[a * n_devices + b]: the link a transfer from device a to device b uses (-1 when a == b).
   * Every pair of distinct devices has one (multi-hop routes are not modelled). */
  int *route;
} gopt_cluster;

/* Built-in device presets ("V100", "A100", "H100", "TPUv3", "host"); the host preset is filled
 * from this machine's core count and memory size (no measurement; `gopt calibrate` refines it). */
size_t gopt_device_preset_count(void);
const gopt_device *gopt_device_preset(size_t i);
/* Preset by name (case-insensitive), NULL when none. */
const gopt_device *gopt_device_find_preset(const char *name);
/* One-line description of preset i for listings. */
const char *gopt_device_preset_note(size_t i);

/* Cluster shorthands accepted by gopt_cluster_parse: [N x]PRESET[-LINK], LINK one of nvlink,
 * nvswitch, pcie, ici, shm, eth (default: the preset's usual interconnect). */
size_t gopt_cluster_shorthand_count(void);
const char *gopt_cluster_shorthand_example(size_t i);

/* Parses a cluster: a shorthand ("4xV100-nvlink") or the path of a cluster JSON file (anything
 * containing '/' or ending in ".json"). Errors: one line naming the spec/file and the problem
 * (GOPT_EINVAL, GOPT_EIO, GOPT_EPARSE). *out is NULL on failure. */
int gopt_cluster_parse(const char *spec, gopt_cluster **out, gopt_error *err);
/* Parses cluster JSON text; label names the source in messages. */
int gopt_cluster_from_json(const char *text, const char *label, gopt_cluster **out,
                           gopt_error *err);
/* Cluster as JSON text (malloc'd; NULL on out of memory); parses back to the same cluster. */
char *gopt_cluster_to_json(const gopt_cluster *c);
/* Cluster of one device (copied) with no links. NULL on out of memory. */
gopt_cluster *gopt_cluster_single(const gopt_device *d);
void gopt_cluster_free(gopt_cluster *c); /* accepts NULL */

/* Peak FLOP/s of d for dtype (the FLOAT peak when the dtype has none). */
double gopt_device_peak(const gopt_device *d, int dtype);
/* Analytical kernel time in seconds: 0 for the SHAPE class (metadata only, no kernel); otherwise
 *   tf = flops / peak(dtype) / (eff[cls] * (flops / bytes)^eff_slope[cls])   (no factor when
 *        the slope, flops or bytes is 0)
 *   tb = bytes / bw / eff_mem[cls]  (eff_mem 0: eff[cls]; bw = cache_bw[i] of the first cache
 *        level with bytes <= cache_bytes[i] and cache_bw[i] > 0, else mem_bw)
 *   t  = launch_s + op_s[cls] + max(tf, tb) + serial * min(tf, tb).
 * With the refinements zero (every preset but a calibrated host) this is the plain roofline
 * launch_s + max(flops / peak(dtype), bytes / mem_bw) / eff[cls]. An unknown class counts as
 * opaque. */
double gopt_device_kernel_time(const gopt_device *d, int cls, int dtype, double flops,
                               double bytes);
/* With a measured-GPU model (d->gpu_model) gopt_device_kernel_time uses, for what it is given
 * (a fused group: class, FLOPs, bytes), the kind of the class (conv -> conv, elemwise/broadcast ->
 * eltwise, injective -> move, reduce -> norm, opaque -> move): count + FLOPs + bytes terms.
 * gopt_device_node_time costs one node: with a GPU model from the node's own features
 * (gopt_gpu_node_features; dyn from gopt_gpu_dynamic_tensors, may be NULL), otherwise
 * gopt_device_kernel_time of its class, dtype, FLOPs and bytes. */
double gopt_device_node_time(const gopt_device *d, const gopt_graph *g, int32_t n,
                             const uint8_t *dyn, int cls, int dtype, double flops, double bytes);

#ifdef __cplusplus
}
#endif
#endif
