/* device.c: device presets, cluster shorthands, the cluster JSON format and the analytical
 * kernel time (device.h). Preset numbers are vendor peak figures; the GPU presets carry the
 * measured-GPU cost model calibrated on an H100 (gopt/gpu_cost.h; V100/A100 scaled from it), the
 * TPU and host presets the roofline with conservative efficiencies (`gopt calibrate` refits the
 * host). */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gopt/device.h"
#include "gopt/ops.h"
#include "gopt/util.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Per-class efficiency defaults: shape, elemwise, broadcast, injective, reduce, conv, opaque. */
static const double eff_gpu[GOPT_SIM_NCLASS] = {1.0, 0.75, 0.7, 0.5, 0.5, 0.6, 0.3};
static const double eff_tpu[GOPT_SIM_NCLASS] = {1.0, 0.7, 0.65, 0.4, 0.45, 0.7, 0.3};
static const double eff_cpu[GOPT_SIM_NCLASS] = {1.0, 0.5, 0.45, 0.3, 0.3, 0.4, 0.2};

typedef struct preset {
  gopt_device d;
  const char *note;
  const char *link;  /* default interconnect of a multi-device shorthand */
  double p2p_bw;     /* bytes/s of its point-to-point link (nvlink/nvswitch/ici/shm) */
} preset;

static preset presets[5];
static int presets_ready = 0;

static void set_peaks(gopt_device *d, double f32, double f16, double bf16, double f64, double i8) {
  d->peak_flops[GOPT_DT_FLOAT] = f32;
  d->peak_flops[GOPT_DT_FLOAT16] = f16;
  d->peak_flops[GOPT_DT_BFLOAT16] = bf16;
  d->peak_flops[GOPT_DT_DOUBLE] = f64;
  d->peak_flops[GOPT_DT_INT8] = i8;
  d->peak_flops[GOPT_DT_UINT8] = i8;
}

static void mk(preset *p, const char *model, const char *kind, double bw, double mem,
               double launch, const double *eff, const char *link, double p2p, const char *note) {
  memset(p, 0, sizeof *p);
  snprintf(p->d.name, sizeof p->d.name, "%s", model);
  snprintf(p->d.model, sizeof p->d.model, "%s", model);
  snprintf(p->d.kind, sizeof p->d.kind, "%s", kind);
  p->d.mem_bw = bw;
  p->d.mem_bytes = mem;
  p->d.launch_s = launch;
  memcpy(p->d.eff, eff, sizeof p->d.eff);
  p->link = link;
  p->p2p_bw = p2p;
  p->note = note;
}

/* Reads cpu0's unified/data cache sizes of levels 2 and 3 from sysfs into d->cache_bytes (the
 * bandwidths stay 0, i.e. mem_bw, until gopt calibrate fits them). Missing files: no caches. */
static void host_caches(gopt_device *d) {
  for (int idx = 0; idx < 8; idx++) {
    char path[96], buf[64];
    int level = 0;
    double size = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
    FILE *f = fopen(path, "r");
    if (!f) break;
    if (fgets(buf, sizeof buf, f)) level = atoi(buf);
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
    if (!(f = fopen(path, "r"))) continue;
    if (fgets(buf, sizeof buf, f)) {
      char *end;
      size = strtod(buf, &end);
      if (*end == 'K') size *= 1024;
      else if (*end == 'M') size *= 1024 * 1024;
      else if (*end == 'G') size *= GIB;
    }
    fclose(f);
    if ((level == 2 || level == 3) && size > 0 && size > d->cache_bytes[level - 2])
      d->cache_bytes[level - 2] = size;
  }
  if (d->cache_bytes[0] <= 0 && d->cache_bytes[1] > 0) { /* keep them smallest first */
    d->cache_bytes[0] = d->cache_bytes[1];
    d->cache_bytes[1] = 0;
  }
}

/* Fills the preset table once (the host entry reads this machine's core count and memory). The
 * values are constant for a machine, so concurrent first calls write identical bytes. */
static void init_presets(void) {
  if (presets_ready) return;
  mk(&presets[0], "V100", "gpu", 900e9, 16 * GIB, 5e-6, eff_gpu, "nvlink", 50e9,
     "NVIDIA V100 SXM2 16 GB: 15.7 TFLOP/s f32, 125 f16 (tensor cores), 900 GB/s");
  set_peaks(&presets[0].d, 15.7e12, 125e12, 15.7e12, 7.8e12, 62.8e12);
  mk(&presets[1], "A100", "gpu", 1555e9, 40 * GIB, 4e-6, eff_gpu, "nvswitch", 300e9,
     "NVIDIA A100 SXM4 40 GB: 19.5 TFLOP/s f32, 312 f16/bf16, 1555 GB/s");
  set_peaks(&presets[1].d, 19.5e12, 312e12, 312e12, 9.7e12, 624e12);
  mk(&presets[2], "H100", "gpu", 3350e9, 80 * GIB, 3e-6, eff_gpu, "nvswitch", 450e9,
     "NVIDIA H100 SXM5 80 GB: 67 TFLOP/s f32, 989 f16/bf16 (dense), 3350 GB/s");
  set_peaks(&presets[2].d, 67e12, 989e12, 989e12, 34e12, 1979e12);
  /* GPUs: the measured-GPU cost model calibrated on a real H100 (docs/SIMULATOR.md); V100 and
   * A100 extrapolate it by their data-sheet peaks, bandwidths and launch overheads */
  for (int i = 0; i < 3; i++) {
    gopt_device *d = &presets[i].d;
    d->gpu_model = 1;
    gopt_gpu_scale(gopt_gpu_h100_coef, 67e12, 3350e9, 3e-6, d->peak_flops[GOPT_DT_FLOAT], d->mem_bw,
                   d->launch_s, d->gpu_coef);
    snprintf(d->gpu_version, sizeof d->gpu_version, "%s%s", gopt_gpu_h100_version,
             i == 2 ? "" : "-scaled");
    /* the tensor-core speed-up over f32, scaled by the data-sheet fp16/f32 peak ratios */
    d->gpu_half_speedup = gopt_gpu_h100_half_speedup *
                          (d->peak_flops[GOPT_DT_FLOAT16] / d->peak_flops[GOPT_DT_FLOAT]) / (989e12 / 67e12);
    if (d->gpu_half_speedup < 1) d->gpu_half_speedup = 1;
  }
  mk(&presets[3], "TPUv3", "tpu", 450e9, 16 * GIB, 1e-6, eff_tpu, "ici", 70e9,
     "Google TPU v3, one core: 61.5 TFLOP/s bf16 (f32 matmuls ~1/3), 450 GB/s HBM, 16 GB");
  set_peaks(&presets[3].d, 20e12, 61.5e12, 61.5e12, 0, 61.5e12);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
  if (cores < 1) cores = 1;
  double mem = (pages > 0 && psize > 0) ? (double)pages * (double)psize : 8 * GIB;
  double bw = 12e9 * (double)cores;
  if (bw > 100e9) bw = 100e9;
  mk(&presets[4], "host", "cpu", bw, mem, 2e-6, eff_cpu, "shm", 10e9,
     "this machine's CPU: cores x 2.5 GHz x 32 f32 FLOP/cycle, 12 GB/s per core (max 100)");
  double f32 = (double)cores * 2.5e9 * 32;
  set_peaks(&presets[4].d, f32, f32 / 4, f32 / 2, f32 / 2, f32);
  presets[4].d.measured = 1;
  host_caches(&presets[4].d);
  presets_ready = 1;
}

size_t gopt_device_preset_count(void) { return sizeof presets / sizeof presets[0]; }

const gopt_device *gopt_device_preset(size_t i) {
  init_presets();
  return i < gopt_device_preset_count() ? &presets[i].d : NULL;
}

const char *gopt_device_preset_note(size_t i) {
  init_presets();
  return i < gopt_device_preset_count() ? presets[i].note : "";
}

static const preset *find_preset(const char *name, size_t len) {
  init_presets();
  for (size_t i = 0; i < gopt_device_preset_count(); i++)
    if (strlen(presets[i].d.model) == len && strncasecmp(presets[i].d.model, name, len) == 0)
      return &presets[i];
  /* aliases */
  if (len == 5 && strncasecmp(name, "tpuv3", 5) == 0) return &presets[3];
  if (len == 6 && strncasecmp(name, "tpu-v3", 6) == 0) return &presets[3];
  if (len == 3 && strncasecmp(name, "cpu", 3) == 0) return &presets[4];
  return NULL;
}

const gopt_device *gopt_device_find_preset(const char *name) {
  const preset *p = name ? find_preset(name, strlen(name)) : NULL;
  return p ? &p->d : NULL;
}

static const char *const shorthands[] = {"V100", "4xV100-nvlink", "2xV100-pcie", "8xA100",
                                         "8xH100", "4xTPUv3", "2xhost"};
size_t gopt_cluster_shorthand_count(void) { return sizeof shorthands / sizeof shorthands[0]; }
const char *gopt_cluster_shorthand_example(size_t i) {
  return i < gopt_cluster_shorthand_count() ? shorthands[i] : "";
}

double gopt_device_peak(const gopt_device *d, int dtype) {
  double p = (dtype > 0 && dtype < GOPT_DT_COUNT) ? d->peak_flops[dtype] : 0;
  return p > 0 ? p : d->peak_flops[GOPT_DT_FLOAT];
}

/* A fused group (or any class-level cost) on a measured-GPU device: the count, FLOPs and bytes
 * terms of the kind its class stands for. */
static double gpu_class_time(const gopt_device *d, int cls, int dtype, double flops, double bytes) {
  int k = cls == GOPT_OPC_CONV ? GOPT_GK_CONV
          : cls == GOPT_OPC_ELEMWISE || cls == GOPT_OPC_BROADCAST ? GOPT_GK_ELTWISE
          : cls == GOPT_OPC_REDUCE ? GOPT_GK_NORM : GOPT_GK_MOVE;
  double phi[GOPT_GPU_NCOEF] = {0};
  phi[k * GOPT_GF_PER_KIND + GOPT_GF_N] = 1;
  phi[k * GOPT_GF_PER_KIND + GOPT_GF_FLOPS] = flops;
  phi[k * GOPT_GF_PER_KIND + GOPT_GF_BYTES] = bytes;
  if (dtype == GOPT_DT_FLOAT16 || dtype == GOPT_DT_BFLOAT16)
    return gopt_gpu_time_half(d->gpu_coef, phi, d->gpu_half_speedup);
  return gopt_gpu_time(d->gpu_coef, phi);
}

double gopt_device_node_time(const gopt_device *d, const gopt_graph *g, int32_t n,
                             const uint8_t *dyn, int cls, int dtype, double flops, double bytes) {
  if (!d->gpu_model || !g) return gopt_device_kernel_time(d, cls, dtype, flops, bytes);
  double phi[GOPT_GPU_NCOEF] = {0};
  if (gopt_gpu_node_features(g, n, dyn, phi) < 0) return 0;
  if (dtype == GOPT_DT_FLOAT16 || dtype == GOPT_DT_BFLOAT16)
    return gopt_gpu_time_half(d->gpu_coef, phi, d->gpu_half_speedup);
  return gopt_gpu_time(d->gpu_coef, phi);
}

double gopt_device_kernel_time(const gopt_device *d, int cls, int dtype, double flops,
                               double bytes) {
  if (cls == GOPT_OPC_SHAPE) return 0;
  if (cls < 0 || cls >= GOPT_SIM_NCLASS) cls = GOPT_OPC_OPAQUE;
  if (d->gpu_model) return gpu_class_time(d, cls, dtype, flops, bytes);
  double p = gopt_device_peak(d, dtype), bw = d->mem_bw;
  for (int i = 0; i < 2; i++)
    if (d->cache_bw[i] > 0 && d->cache_bytes[i] > 0 && bytes <= d->cache_bytes[i]) {
      bw = d->cache_bw[i];
      break;
    }
  double tf = p > 0 ? flops / p : 0, tb = bw > 0 ? bytes / bw : 0;
  double e = d->eff[cls] > 0 ? d->eff[cls] : 1;
  double em = d->eff_mem[cls] > 0 ? d->eff_mem[cls] : e;
  double ef = e;
  if (d->eff_slope[cls] != 0 && flops > 0 && bytes > 0) ef *= pow(flops / bytes, d->eff_slope[cls]);
  /* divided separately, so that with equal efficiencies this is max(tf, tb) / e bit for bit */
  tf /= ef;
  tb /= em;
  double hi = tf > tb ? tf : tb, lo = tf > tb ? tb : tf;
  return d->launch_s + d->op_s[cls] + hi + (d->serial > 0 ? d->serial * lo : 0);
}

/* ---- clusters ------------------------------------------------------------------------------ */

void gopt_cluster_free(gopt_cluster *c) {
  if (!c) return;
  free(c->devices);
  free(c->links);
  free(c->route);
  free(c);
}

static gopt_cluster *cluster_alloc(int nd, int nl) {
  gopt_cluster *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n_devices = nd;
  c->n_links = nl;
  c->devices = calloc((size_t)nd, sizeof *c->devices);
  c->links = calloc(nl > 0 ? (size_t)nl : 1, sizeof *c->links);
  c->route = malloc((size_t)nd * (size_t)nd * sizeof *c->route);
  if (!c->devices || !c->links || !c->route) {
    gopt_cluster_free(c);
    return NULL;
  }
  for (int i = 0; i < nd * nd; i++) c->route[i] = -1;
  return c;
}

gopt_cluster *gopt_cluster_single(const gopt_device *d) {
  gopt_cluster *c = cluster_alloc(1, 0);
  if (!c) return NULL;
  c->devices[0] = *d;
  snprintf(c->name, sizeof c->name, "%s", d->name);
  return c;
}

/* Link kinds of the shorthand: point-to-point (one link per device pair) or one shared bus. */
static int link_kind(const char *s, double *bw, double *lat, int *p2p, const preset *p) {
  if (!strcasecmp(s, "nvlink") || !strcasecmp(s, "nvswitch") || !strcasecmp(s, "ici")) {
    *bw = p->p2p_bw;
    *lat = !strcasecmp(s, "ici") ? 2e-6 : 5e-6;
    *p2p = 1;
  } else if (!strcasecmp(s, "pcie")) {
    /* PCIe 3/4/5 x16 effective, by GPU generation */
    *bw = !strcmp(p->d.model, "H100") ? 48e9 : !strcmp(p->d.model, "A100") ? 24e9 : 12e9;
    *lat = 10e-6;
    *p2p = 0;
  } else if (!strcasecmp(s, "shm")) {
    *bw = 10e9;
    *lat = 2e-6;
    *p2p = 0;
  } else if (!strcasecmp(s, "eth")) {
    *bw = 1.25e9;
    *lat = 50e-6;
    *p2p = 0;
  } else {
    return -1;
  }
  return 0;
}

static int parse_shorthand(const char *spec, gopt_cluster **out, gopt_error *err) {
  const char *p = spec;
  long n = 1;
  if (isdigit((unsigned char)*p)) {
    char *end;
    n = strtol(p, &end, 10);
    if ((*end != 'x' && *end != 'X') || n < 1 || n > 4096)
      return gopt_error_set(err, GOPT_EINVAL,
                            "--cluster '%s': expected NxPRESET[-LINK] with N in [1, 4096] "
                            "(e.g. 4xV100-nvlink) or a cluster JSON file", spec);
    p = end + 1;
  }
  size_t len = strcspn(p, "-");
  const preset *pr = find_preset(p, len);
  if (!pr)
    return gopt_error_set(err, GOPT_EINVAL,
                          "--cluster '%s': unknown device '%.*s'; presets: V100, A100, H100, "
                          "TPUv3, host (or a cluster JSON file)", spec, (int)len, p);
  const char *lk = p[len] == '-' ? p + len + 1 : pr->link;
  double bw = 0, lat = 0;
  int p2p = 0;
  if (link_kind(lk, &bw, &lat, &p2p, pr))
    return gopt_error_set(err, GOPT_EINVAL,
                          "--cluster '%s': unknown link '%s'; links: nvlink, nvswitch, pcie, ici, "
                          "shm, eth", spec, lk);
  int nd = (int)n;
  long nl = nd < 2 ? 0 : p2p ? (long)nd * (nd - 1) / 2 : 1;
  if (nl > 1000000) return gopt_error_set(err, GOPT_ERANGE, "--cluster '%s': too many links", spec);
  gopt_cluster *c = cluster_alloc(nd, (int)nl);
  if (!c) return gopt_error_set(err, GOPT_ENOMEM, "--cluster '%s': out of memory", spec);
  snprintf(c->name, sizeof c->name, "%s", spec);
  for (int i = 0; i < nd; i++) {
    c->devices[i] = pr->d;
    snprintf(c->devices[i].name, sizeof c->devices[i].name, "%s%d", pr->d.kind, i);
  }
  int k = 0;
  if (nd >= 2 && !p2p) {
    snprintf(c->links[0].name, sizeof c->links[0].name, "%s", lk);
    c->links[0].bw = bw;
    c->links[0].latency_s = lat;
    for (int a = 0; a < nd; a++)
      for (int b = 0; b < nd; b++)
        if (a != b) c->route[a * nd + b] = 0;
  } else {
    for (int a = 0; a < nd; a++)
      for (int b = a + 1; b < nd; b++, k++) {
        snprintf(c->links[k].name, sizeof c->links[k].name, "%s%d-%d", lk, a, b);
        c->links[k].bw = bw;
        c->links[k].latency_s = lat;
        c->route[a * nd + b] = c->route[b * nd + a] = k;
      }
  }
  *out = c;
  return GOPT_OK;
}

static int num_field(json_t *o, const char *key, double *v, int required, const char *label,
                     const char *where, gopt_error *err) {
  json_t *x = json_object_get(o, key);
  if (!x) {
    if (required)
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: missing \"%s\"", label, where, key);
    return 0;
  }
  if (!json_is_number(x) || json_number_value(x) < 0 || !isfinite(json_number_value(x)))
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"%s\" must be a number >= 0", label, where,
                          key);
  *v = json_number_value(x);
  return 0;
}

/* Reads an optional per-class field: a number (every class) or {class: value}; values must lie in
 * [lo, hi] (lo excluded when lo_open); scale multiplies each value (us -> s). */
static int class_field(json_t *o, const char *key, double *v, double lo, int lo_open, double hi,
                       double scale, const char *label, const char *where, gopt_error *err) {
  json_t *x = json_object_get(o, key);
  if (!x) return 0;
#define CF_OK(y) (json_is_number(y) && isfinite(json_number_value(y)) && \
                  (lo_open ? json_number_value(y) > lo : json_number_value(y) >= lo) && \
                  json_number_value(y) <= hi)
  if (json_is_number(x)) {
    if (!CF_OK(x))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"%s\" must be in %s%g, %g]", label, where,
                            key, lo_open ? "(" : "[", lo, hi);
    for (int c = 0; c < GOPT_SIM_NCLASS; c++) v[c] = json_number_value(x) * scale;
    return 0;
  }
  if (!json_is_object(x))
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"%s\" must be a number or {class: value}",
                          label, where, key);
  const char *k;
  json_t *y;
  json_object_foreach(x, k, y) {
    int c = 0;
    while (c < GOPT_SIM_NCLASS && strcmp(gopt_op_class_name(c), k)) c++;
    if (c == GOPT_SIM_NCLASS || !CF_OK(y))
      return gopt_error_set(err, GOPT_EPARSE,
                            "%s: %s: %s: \"%s\" needs a class (shape, elemwise, broadcast, "
                            "injective, reduce, conv, opaque) and a value in %s%g, %g]", label,
                            where, key, k, lo_open ? "(" : "[", lo, hi);
    v[c] = json_number_value(y) * scale;
  }
#undef CF_OK
  return 0;
}

/* Reads the optional measured-GPU model: "gpu_model": {"<kind>.<feature>": seconds per unit >= 0}
 * (coefficients not named are 0) or false (off: the roofline, e.g. a GPU preset as it was before
 * the measured model), "gpu_version": a string, "gpu_half_speedup": a number >= 0. */
static int gpu_model_field(json_t *o, gopt_device *d, const char *label, const char *where,
                           gopt_error *err) {
  json_t *x = json_object_get(o, "gpu_model"), *v = json_object_get(o, "gpu_version");
  json_t *h = json_object_get(o, "gpu_half_speedup");
  if (h) {
    if (!json_is_number(h) || !(json_number_value(h) >= 0) || !isfinite(json_number_value(h)))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"gpu_half_speedup\" must be a number >= 0", label, where);
    d->gpu_half_speedup = json_number_value(h);
  }
  if (v) {
    if (!json_is_string(v))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"gpu_version\" must be a string", label, where);
    snprintf(d->gpu_version, sizeof d->gpu_version, "%s", json_string_value(v));
  }
  if (!x) return 0;
  if (json_is_false(x) || json_is_null(x)) { /* off: the roofline with the entry's efficiencies */
    d->gpu_model = 0;
    return 0;
  }
  if (!json_is_object(x))
    return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"gpu_model\" must be false or an object "
                                            "{\"kind.feature\": seconds per unit}", label, where);
  memset(d->gpu_coef, 0, sizeof d->gpu_coef);
  const char *k;
  json_t *y;
  json_object_foreach(x, k, y) {
    int j = gopt_gpu_coef_index(k);
    if (j < 0 || !json_is_number(y) || !(json_number_value(y) >= 0) || !isfinite(json_number_value(y)))
      return gopt_error_set(err, GOPT_EPARSE,
                            "%s: %s: gpu_model: \"%s\" needs a name KIND.FEATURE (kinds conv, "
                            "conv_grouped, conv_dw, gemm, bmm, eltwise, norm, pool, move, rnn, "
                            "*_bwd, update; features n, flops, waves, bytes) and a number >= 0",
                            label, where, k);
    d->gpu_coef[j] = json_number_value(y);
  }
  d->gpu_model = 1;
  return 0;
}

/* Reads one device object over *d (which holds the preset or zeros). */
static int parse_device(json_t *o, gopt_device *d, const char *label, const char *where,
                        gopt_error *err) {
  int rc;
  json_t *x;
  if ((x = json_object_get(o, "name"))) {
    if (!json_is_string(x))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"name\" must be a string", label, where);
    snprintf(d->name, sizeof d->name, "%s", json_string_value(x));
  }
  if ((x = json_object_get(o, "model")) && json_is_string(x))
    snprintf(d->model, sizeof d->model, "%s", json_string_value(x));
  if ((x = json_object_get(o, "kind"))) {
    if (!json_is_string(x))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"kind\" must be a string", label, where);
    snprintf(d->kind, sizeof d->kind, "%s", json_string_value(x));
  }
  double us = d->launch_s * 1e6;
  if ((rc = num_field(o, "mem_bw", &d->mem_bw, 0, label, where, err)) ||
      (rc = num_field(o, "memory", &d->mem_bytes, 0, label, where, err)) ||
      (rc = num_field(o, "launch_us", &us, 0, label, where, err)))
    return rc;
  d->launch_s = us * 1e-6;
  if ((x = json_object_get(o, "measured"))) d->measured = json_is_true(x);
  if ((x = json_object_get(o, "peak_flops"))) {
    if (json_is_number(x)) {
      d->peak_flops[GOPT_DT_FLOAT] = json_number_value(x);
    } else if (json_is_object(x)) {
      const char *k;
      json_t *v;
      json_object_foreach(x, k, v) {
        int dt = gopt_dtype_from_name(k);
        if (dt == GOPT_DT_UNDEFINED || !json_is_number(v) || json_number_value(v) < 0)
          return gopt_error_set(err, GOPT_EPARSE,
                                "%s: %s: peak_flops: \"%s\" needs an ONNX dtype name (FLOAT, "
                                "FLOAT16, ...) and a number >= 0", label, where, k);
        d->peak_flops[dt] = json_number_value(v);
      }
    } else {
      return gopt_error_set(err, GOPT_EPARSE,
                            "%s: %s: \"peak_flops\" must be a number or {dtype: FLOP/s}", label,
                            where);
    }
  }
  if ((x = json_object_get(o, "efficiency"))) {
    if (json_is_number(x)) {
      for (int c = 0; c < GOPT_SIM_NCLASS; c++) d->eff[c] = json_number_value(x);
    } else if (json_is_object(x)) {
      const char *k;
      json_t *v;
      json_object_foreach(x, k, v) {
        int c = 0;
        while (c < GOPT_SIM_NCLASS && strcmp(gopt_op_class_name(c), k)) c++;
        if (c == GOPT_SIM_NCLASS || !json_is_number(v) || json_number_value(v) <= 0 ||
            json_number_value(v) > 1)
          return gopt_error_set(err, GOPT_EPARSE,
                                "%s: %s: efficiency: \"%s\" needs a class (shape, elemwise, "
                                "broadcast, injective, reduce, conv, opaque) and a value in (0, 1]",
                                label, where, k);
        d->eff[c] = json_number_value(v);
      }
    } else {
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"efficiency\" must be a number or object",
                            label, where);
    }
  }
  /* optional refinements (device.h); absent: unchanged (zero = the plain roofline) */
  if ((rc = class_field(o, "efficiency_mem", d->eff_mem, 0, 1, 1, 1, label, where, err)) ||
      (rc = class_field(o, "efficiency_slope", d->eff_slope, -1, 0, 1, 1, label, where, err)) ||
      (rc = class_field(o, "op_us", d->op_s, 0, 0, 1e6, 1e-6, label, where, err)))
    return rc;
  if ((x = json_object_get(o, "serial"))) {
    if (!json_is_number(x) || !(json_number_value(x) >= 0 && json_number_value(x) <= 1))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"serial\" must be a number in [0, 1]",
                            label, where);
    d->serial = json_number_value(x);
  }
  if ((x = json_object_get(o, "caches"))) {
    if (!json_is_array(x) || json_array_size(x) > 2)
      return gopt_error_set(err, GOPT_EPARSE,
                            "%s: %s: \"caches\" must be an array of at most 2 {\"bytes\", \"bw\"} "
                            "(smallest first)", label, where);
    double cb[2] = {0, 0}, cw[2] = {0, 0};
    for (size_t i = 0; i < json_array_size(x); i++) {
      json_t *e = json_array_get(x, i);
      char w2[96];
      snprintf(w2, sizeof w2, "%s: caches[%zu]", where, i);
      if (!json_is_object(e))
        return gopt_error_set(err, GOPT_EPARSE, "%s: %s: must be an object", label, w2);
      if ((rc = num_field(e, "bytes", &cb[i], 1, label, w2, err)) ||
          (rc = num_field(e, "bw", &cw[i], 0, label, w2, err)))
        return rc;
    }
    if (cb[1] > 0 && cb[1] < cb[0])
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"caches\" must be smallest first", label,
                            where);
    memcpy(d->cache_bytes, cb, sizeof cb);
    memcpy(d->cache_bw, cw, sizeof cw);
  }
  if ((rc = gpu_model_field(o, d, label, where, err))) return rc;
  for (int c = 0; c < GOPT_SIM_NCLASS; c++)
    if (!(d->eff[c] > 0 && d->eff[c] <= 1))
      return gopt_error_set(err, GOPT_EPARSE, "%s: %s: efficiency of %s must be in (0, 1]", label,
                            where, gopt_op_class_name(c));
  if (!(d->peak_flops[GOPT_DT_FLOAT] > 0) || !(d->mem_bw > 0) || !(d->mem_bytes > 0))
    return gopt_error_set(err, GOPT_EPARSE,
                          "%s: %s: needs peak_flops, mem_bw and memory > 0 (or a \"preset\")",
                          label, where);
  return 0;
}

int gopt_cluster_from_json(const char *text, const char *label, gopt_cluster **out,
                           gopt_error *err) {
  json_error_t je;
  gopt_cluster *c = NULL;
  gopt_device *devs = NULL;
  int rc = GOPT_OK, nd = 0;
  char where[64];
  *out = NULL;
  json_t *root = json_loads(text, 0, &je);
  if (!root) return gopt_error_set(err, GOPT_EPARSE, "%s: line %d: %s", label, je.line, je.text);
  json_t *jd = json_object_get(root, "devices"), *jl = json_object_get(root, "links");
  if (!json_is_object(root) || !json_is_array(jd) || json_array_size(jd) == 0) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: a cluster needs a non-empty \"devices\" array",
                        label);
    goto done;
  }
  if (jl && !json_is_array(jl)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: \"links\" must be an array", label);
    goto done;
  }
  /* count devices (an entry may repeat itself with "count") */
  size_t i;
  json_t *e;
  long total = 0;
  json_array_foreach(jd, i, e) {
    json_t *cnt = json_object_get(e, "count");
    long k = cnt ? (long)json_integer_value(cnt) : 1;
    if (!json_is_object(e) || (cnt && (!json_is_integer(cnt) || k < 1 || k > 4096))) {
      rc = gopt_error_set(err, GOPT_EPARSE,
                          "%s: devices[%zu]: must be an object with an optional count in [1, 4096]",
                          label, i);
      goto done;
    }
    total += k;
  }
  if (total > 4096) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: more than 4096 devices", label);
    goto done;
  }
  devs = calloc((size_t)total, sizeof *devs);
  if (!devs) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", label);
    goto done;
  }
  json_array_foreach(jd, i, e) {
    gopt_device d;
    memset(&d, 0, sizeof d);
    json_t *ps = json_object_get(e, "preset");
    if (ps) {
      const gopt_device *p = json_is_string(ps) ? gopt_device_find_preset(json_string_value(ps)) : NULL;
      if (!p) {
        rc = gopt_error_set(err, GOPT_EPARSE,
                            "%s: devices[%zu]: unknown preset; presets: V100, A100, H100, TPUv3, host",
                            label, i);
        goto done;
      }
      d = *p;
    } else {
      snprintf(d.model, sizeof d.model, "custom");
      snprintf(d.kind, sizeof d.kind, "gpu");
      memcpy(d.eff, eff_gpu, sizeof d.eff);
      d.launch_s = 5e-6;
    }
    snprintf(where, sizeof where, "devices[%zu]", i);
    if ((rc = parse_device(e, &d, label, where, err))) goto done;
    json_t *cnt = json_object_get(e, "count");
    long k = cnt ? (long)json_integer_value(cnt) : 1;
    for (long j = 0; j < k; j++) {
      devs[nd] = d;
      if (k > 1 || !json_object_get(e, "name"))
        snprintf(devs[nd].name, sizeof devs[nd].name, "%.20s%d", k > 1 ? d.name : d.kind, nd);
      nd++;
    }
  }
  int nl = jl ? (int)json_array_size(jl) : 0;
  c = cluster_alloc(nd, nl);
  if (!c) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", label);
    goto done;
  }
  memcpy(c->devices, devs, (size_t)nd * sizeof *devs);
  json_t *nm = json_object_get(root, "name");
  snprintf(c->name, sizeof c->name, "%s", json_is_string(nm) ? json_string_value(nm) : label);
  for (int l = 0; l < nl; l++) {
    json_t *o = json_array_get(jl, (size_t)l), *ld = json_object_get(o, "devices");
    snprintf(where, sizeof where, "links[%d]", l);
    double us = 0;
    if (!json_is_object(o) || !json_is_array(ld) || json_array_size(ld) < 2) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: %s: needs \"devices\": [two or more indices]",
                          label, where);
      goto done;
    }
    if ((rc = num_field(o, "bw", &c->links[l].bw, 1, label, where, err)) ||
        (rc = num_field(o, "latency_us", &us, 0, label, where, err)))
      goto done;
    if (!(c->links[l].bw > 0)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: %s: \"bw\" must be > 0", label, where);
      goto done;
    }
    c->links[l].latency_s = us * 1e-6;
    json_t *ln = json_object_get(o, "name");
    if (json_is_string(ln)) snprintf(c->links[l].name, sizeof c->links[l].name, "%s", json_string_value(ln));
    else snprintf(c->links[l].name, sizeof c->links[l].name, "link%d", l);
    size_t a, b;
    json_t *va, *vb;
    json_array_foreach(ld, a, va) {
      json_int_t x = json_integer_value(va);
      if (!json_is_integer(va) || x < 0 || x >= nd) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: %s: device index %s out of range [0, %d)",
                            label, where, json_is_integer(va) ? "" : "(not an integer)", nd);
        goto done;
      }
      json_array_foreach(ld, b, vb) {
        json_int_t y = json_integer_value(vb);
        if (!json_is_integer(vb) || y < 0 || y >= nd || x == y) continue;
        int *r = &c->route[x * nd + y];
        /* the fastest link joining the pair carries its transfers */
        if (*r < 0 || c->links[*r].bw < c->links[l].bw) *r = l;
      }
    }
  }
  for (int a = 0; a < nd; a++)
    for (int b = 0; b < nd; b++)
      if (a != b && c->route[a * nd + b] < 0) {
        rc = gopt_error_set(err, GOPT_EPARSE,
                            "%s: devices %d and %d share no link (every pair needs one; multi-hop "
                            "routes are not modelled)", label, a, b);
        goto done;
      }
  *out = c;
  c = NULL;
done:
  gopt_cluster_free(c);
  free(devs);
  json_decref(root);
  return rc;
}

int gopt_cluster_parse(const char *spec, gopt_cluster **out, gopt_error *err) {
  *out = NULL;
  if (!spec || !*spec) return gopt_error_set(err, GOPT_EINVAL, "--cluster: empty cluster spec");
  size_t n = strlen(spec);
  if (strchr(spec, '/') || (n > 5 && !strcmp(spec + n - 5, ".json"))) {
    void *buf = NULL;
    size_t len = 0;
    int rc = gopt_file_read(spec, &buf, &len, err);
    if (rc) return rc;
    rc = gopt_cluster_from_json(buf, spec, out, err);
    free(buf);
    return rc;
  }
  return parse_shorthand(spec, out, err);
}

char *gopt_cluster_to_json(const gopt_cluster *c) {
  json_t *root = json_object(), *jd = json_array(), *jl = json_array();
  json_object_set_new(root, "name", json_string(c->name));
  for (int i = 0; i < c->n_devices; i++) {
    const gopt_device *d = &c->devices[i];
    json_t *o = json_object(), *pf = json_object(), *ef = json_object();
    json_object_set_new(o, "name", json_string(d->name));
    json_object_set_new(o, "model", json_string(d->model));
    json_object_set_new(o, "kind", json_string(d->kind));
    for (int t = 1; t < GOPT_DT_COUNT; t++)
      if (d->peak_flops[t] > 0) json_object_set_new(pf, gopt_dtype_name(t), json_real(d->peak_flops[t]));
    json_object_set_new(o, "peak_flops", pf);
    json_object_set_new(o, "mem_bw", json_real(d->mem_bw));
    json_object_set_new(o, "memory", json_real(d->mem_bytes));
    json_object_set_new(o, "launch_us", json_real(d->launch_s * 1e6));
    for (int k = 0; k < GOPT_SIM_NCLASS; k++)
      json_object_set_new(ef, gopt_op_class_name(k), json_real(d->eff[k]));
    json_object_set_new(o, "efficiency", ef);
    /* refinements only when set, so files of plain devices stay as they were */
    const double *arrs[3] = {d->eff_mem, d->eff_slope, d->op_s};
    const char *keys[3] = {"efficiency_mem", "efficiency_slope", "op_us"};
    for (int a = 0; a < 3; a++) {
      int any = 0;
      for (int k = 0; k < GOPT_SIM_NCLASS; k++) any |= arrs[a][k] != 0;
      if (!any) continue;
      json_t *m = json_object();
      for (int k = 0; k < GOPT_SIM_NCLASS; k++)
        if (arrs[a][k] != 0)
          json_object_set_new(m, gopt_op_class_name(k), json_real(arrs[a][k] * (a == 2 ? 1e6 : 1)));
      json_object_set_new(o, keys[a], m);
    }
    if (d->serial != 0) json_object_set_new(o, "serial", json_real(d->serial));
    if (d->cache_bytes[0] > 0) {
      json_t *ca = json_array();
      for (int k = 0; k < 2 && d->cache_bytes[k] > 0; k++) {
        json_t *e = json_object();
        json_object_set_new(e, "bytes", json_real(d->cache_bytes[k]));
        json_object_set_new(e, "bw", json_real(d->cache_bw[k]));
        json_array_append_new(ca, e);
      }
      json_object_set_new(o, "caches", ca);
    }
    if (d->gpu_model) {
      json_t *gm = json_object();
      for (int j = 0; j < GOPT_GPU_NCOEF; j++)
        if (d->gpu_coef[j] > 0) {
          char key[48];
          snprintf(key, sizeof key, "%s.%s", gopt_gpu_kind_name(j / GOPT_GF_PER_KIND),
                   gopt_gpu_feature_name(j % GOPT_GF_PER_KIND));
          json_object_set_new(gm, key, json_real(d->gpu_coef[j]));
        }
      json_object_set_new(o, "gpu_model", gm);
      if (d->gpu_version[0]) json_object_set_new(o, "gpu_version", json_string(d->gpu_version));
      if (d->gpu_half_speedup > 0) json_object_set_new(o, "gpu_half_speedup", json_real(d->gpu_half_speedup));
    }
    json_object_set_new(o, "measured", json_boolean(d->measured));
    json_array_append_new(jd, o);
  }
  for (int l = 0; l < c->n_links; l++) {
    json_t *o = json_object(), *ds = json_array();
    json_object_set_new(o, "name", json_string(c->links[l].name));
    json_object_set_new(o, "bw", json_real(c->links[l].bw));
    json_object_set_new(o, "latency_us", json_real(c->links[l].latency_s * 1e6));
    for (int a = 0; a < c->n_devices; a++) {
      int on = 0;
      for (int b = 0; b < c->n_devices && !on; b++)
        on = c->route[a * c->n_devices + b] == l || c->route[b * c->n_devices + a] == l;
      if (on) json_array_append_new(ds, json_integer(a));
    }
    json_object_set_new(o, "devices", ds);
    json_array_append_new(jl, o);
  }
  json_object_set_new(root, "devices", jd);
  json_object_set_new(root, "links", jl);
  char *s = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
  json_decref(root);
  return s;
}
