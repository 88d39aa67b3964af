/* test_sim_invariants.c: simulator invariants on zoo graphs: one device with no transfers takes
 * exactly the sum of its kernel times; memory returns to the resident weights after the step;
 * the same input gives the same result; incremental placement changes equal a full re-evaluation
 * (random changes, seeded); batch parallel evaluation equals sequential; the trace file parses
 * back (jansson) with well-formed events that never overlap on one track; cluster shorthands,
 * JSON round trip and malformed specs; the calibration fit recovers known efficiencies; Kendall's
 * tau and the median % error against brute-force values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/sim.h"
#include "gopt/zoo.h"
#include "sim/sim_test_util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) { return sim_test_rnd(&rng); }

static int same_result(const gopt_sim_result *a, const gopt_sim_result *b) {
  if (a->step_time != b->step_time || a->feasible != b->feasible || a->n_transfers != b->n_transfers ||
      a->transfer_bytes != b->transfer_bytes)
    return 0;
  for (int d = 0; d < a->n_devices; d++)
    if (a->busy[d] != b->busy[d] || a->peak_mem[d] != b->peak_mem[d]) return 0;
  for (int l = 0; l < a->n_links; l++)
    if (a->link_bytes[l] != b->link_bytes[l]) return 0;
  return 1;
}

/* Copies the per-device/link arrays so a later evaluation does not overwrite them. */
typedef struct saved {
  gopt_sim_result r;
  double busy[16], peak[16], lb[128];
} saved;
static void save(saved *s, const gopt_sim_result *r) {
  s->r = *r;
  memcpy(s->busy, r->busy, (size_t)r->n_devices * sizeof(double));
  memcpy(s->peak, r->peak_mem, (size_t)r->n_devices * sizeof(double));
  memcpy(s->lb, r->link_bytes, (size_t)r->n_links * sizeof(double));
  s->r.busy = s->busy;
  s->r.peak_mem = s->peak;
  s->r.link_bytes = s->lb;
}

static void test_one_device(const char *spec) {
  gopt_graph *g = sim_test_zoo(spec);
  if (!g) return;
  gopt_error err = {0};
  gopt_cluster *c;
  gopt_sim *s;
  sim_test_open(g, "V100", &c, &s);
  gopt_sim_state *st = gopt_sim_state_new(s);
  gopt_sim_result r;
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  double sum = 0;
  size_t launches = 0;
  for (size_t i = 0; i < g->nodes.n; i++)
    if (gopt_node_alive(g, (int32_t)i)) {
      sum += gopt_sim_node_time(s, (int32_t)i, 0);
      launches += gopt_op_class_of(g->nodes.a[i].op) != GOPT_OPC_SHAPE;
    }
  CHECK_MSG(fabs(r.step_time - sum) <= 1e-9 * sum, "%s: step %.9g vs sum %.9g", spec, r.step_time, sum);
  CHECK(r.busy[0] == r.step_time || fabs(r.busy[0] - r.step_time) <= 1e-9 * sum);
  CHECK(sum >= launches * c->devices[0].launch_s);
  CHECK_EQ_INT(r.n_transfers, 0);
  CHECK_MSG(fabs(r.end_mem[0] - r.resident[0]) <= 1e-6 * (r.resident[0] + 1), "%s: end %.17g resident %.17g",
            spec, r.end_mem[0], r.resident[0]);
  CHECK(r.peak_mem[0] >= r.resident[0]);
  /* same input, same result; a fresh state too */
  saved a;
  save(&a, &r);
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  CHECK(same_result(&a.r, &r));
  gopt_sim_state *st2 = gopt_sim_state_new(s);
  CHECK_EQ_INT(gopt_sim_evaluate(st2, &r, &err), 0);
  CHECK(same_result(&a.r, &r));
  gopt_sim_state_free(st2);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Incremental single-node changes vs a fresh apply of the whole placement, and batch vs
 * sequential, on a 4-GPU cluster. */
static void test_incremental_batch(const char *spec) {
  gopt_graph *g = sim_test_zoo(spec);
  if (!g) return;
  gopt_error err = {0};
  gopt_cluster *c;
  gopt_sim *s;
  sim_test_open(g, "4xV100-nvlink", &c, &s);
  gopt_sim_state *inc = gopt_sim_state_new(s), *full = gopt_sim_state_new(s);
  size_t N = g->nodes.n;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  d.placement = malloc(N * sizeof *d.placement);
  for (size_t i = 0; i < N; i++) d.placement[i] = -1;
  gopt_sim_result r1, r2;
  int mismatches = 0, transfers_seen = 0;
  for (int it = 0; it < 200; it++) {
    int32_t n;
    do n = (int32_t)(rnd() % N); while (!gopt_node_alive(g, n));
    int dev = (int)(rnd() % 4);
    d.placement[n] = dev;
    CHECK_EQ_INT(gopt_sim_state_set_device(inc, n, dev), 0);
    CHECK_EQ_INT(gopt_sim_evaluate(inc, &r1, &err), 0);
    saved si;
    save(&si, &r1);
    CHECK_EQ_INT(gopt_sim_state_apply(full, &d, &err), 0);
    CHECK_EQ_INT(gopt_sim_evaluate(full, &r2, &err), 0);
    transfers_seen += r2.n_transfers > 0;
    if (!same_result(&si.r, &r2)) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  CHECK(transfers_seen > 0);
  gopt_decisions_clear(&d);
  gopt_sim_state_free(inc);
  gopt_sim_state_free(full);

  /* exact comparison with priorities: incremental path vs applying the same decisions */
  gopt_sim_state *a = gopt_sim_state_new(s), *b = gopt_sim_state_new(s);
  gopt_decisions_init(&d, g);
  d.placement = malloc(N * sizeof *d.placement);
  d.priority = malloc(N * sizeof *d.priority);
  for (size_t i = 0; i < N; i++) {
    d.placement[i] = -1;
    d.priority[i] = NAN;
  }
  mismatches = 0;
  for (int it = 0; it < 200; it++) {
    int32_t n;
    do n = (int32_t)(rnd() % N); while (!gopt_node_alive(g, n));
    if (rnd() % 3 == 0) {
      double p = (double)(rnd() % 1000) / 100.0;
      d.priority[n] = p;
      gopt_sim_state_set_priority(a, n, p);
    } else {
      int dev = (int)(rnd() % 4);
      d.placement[n] = dev;
      gopt_sim_state_set_device(a, n, dev);
    }
    CHECK_EQ_INT(gopt_sim_evaluate(a, &r1, &err), 0);
    saved sa;
    save(&sa, &r1);
    CHECK_EQ_INT(gopt_sim_state_apply(b, &d, &err), 0);
    CHECK_EQ_INT(gopt_sim_evaluate(b, &r2, &err), 0);
    if (!same_result(&sa.r, &r2)) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  gopt_sim_state_free(a);
  gopt_sim_state_free(b);
  gopt_decisions_clear(&d);

  /* batch: 24 random placements; parallel (2 and all threads) == sequential */
  enum { B = 24 };
  gopt_decisions ds[B];
  gopt_sim_summary par[B], par1[B];
  double seq_t[B];
  gopt_sim_state *sq = gopt_sim_state_new(s);
  for (int i = 0; i < B; i++) {
    gopt_decisions_init(&ds[i], g);
    ds[i].placement = malloc(N * sizeof *ds[i].placement);
    for (size_t k = 0; k < N; k++) ds[i].placement[k] = (int32_t)(rnd() % 4);
    CHECK_EQ_INT(gopt_sim_state_apply(sq, &ds[i], &err), 0);
    CHECK_EQ_INT(gopt_sim_evaluate(sq, &r1, &err), 0);
    seq_t[i] = r1.step_time;
  }
  CHECK_EQ_INT(gopt_sim_evaluate_batch(s, ds, B, par, 2, &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate_batch(s, ds, B, par1, 0, &err), 0);
  for (int i = 0; i < B; i++) {
    CHECK(par[i].rc == 0 && par[i].step_time == seq_t[i]);
    CHECK(par1[i].step_time == seq_t[i]);
  }
  /* a bad item is reported with its index */
  ds[3].placement[0] = 9;
  CHECK(gopt_sim_evaluate_batch(s, ds, B, par, 2, &err) == GOPT_EINVAL);
  CHECK_MSG(strstr(err.msg, "batch item 3") != NULL, "%s", err.msg);
  CHECK(par[3].rc == GOPT_EINVAL && par[4].rc == 0);
  for (int i = 0; i < B; i++) gopt_decisions_clear(&ds[i]);
  gopt_sim_state_free(sq);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Trace file: parse back, check every event, and that events on one track do not overlap. */
static void test_trace(void) {
  gopt_graph *g = sim_test_zoo("resnet50");
  if (!g) return;
  gopt_error err = {0};
  gopt_cluster *c;
  gopt_sim *s;
  sim_test_open(g, "2xV100-pcie", &c, &s);
  gopt_sim_state *st = gopt_sim_state_new(s);
  for (size_t i = 0; i < g->nodes.n; i++)
    if (gopt_node_alive(g, (int32_t)i) && rnd() % 2) gopt_sim_state_set_device(st, (int32_t)i, 1);
  gopt_sim_result r;
  CHECK_EQ_INT(gopt_sim_evaluate(st, &r, &err), 0);
  CHECK(r.n_transfers > 0);
  char path[] = "/tmp/gopt_trace_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  CHECK_EQ_INT(gopt_sim_write_trace(st, path, &err), 0);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  CHECK_MSG(root != NULL, "%s", je.text);
  json_t *ev = json_object_get(root, "traceEvents");
  CHECK(json_is_array(ev));
  size_t i, nx = 0, nmeta = 0;
  json_t *e;
  /* last end per (pid, tid) track; events are written in start order per track for kernels
   * (unit ids are not start-ordered, so collect and sort) */
  typedef struct { int pid, tid; double ts, dur; } span;
  span *sp = malloc(json_array_size(ev) * sizeof *sp);
  int bad = 0;
  json_array_foreach(ev, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    json_t *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
    json_t *pid = json_object_get(e, "pid"), *tid = json_object_get(e, "tid");
    if (!ph || !json_is_number(ts) || !json_is_number(dur) || !json_is_integer(pid) ||
        !json_is_integer(tid) || !json_is_string(json_object_get(e, "name"))) {
      bad++;
      continue;
    }
    if (!strcmp(ph, "M")) {
      nmeta++;
      continue;
    }
    if (strcmp(ph, "X") || json_number_value(dur) < 0 || json_number_value(ts) < 0) bad++;
    sp[nx++] = (span){(int)json_integer_value(pid), (int)json_integer_value(tid),
                      json_number_value(ts), json_number_value(dur)};
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(nx, r.n_kernels + r.n_transfers);
  CHECK_EQ_INT(nmeta, 2 + 2 + 1); /* two processes, two devices, one link */
  int overlaps = 0;
  for (size_t a = 0; a < nx; a++)
    for (size_t b = a + 1; b < nx; b++) {
      if (sp[a].pid != sp[b].pid || sp[a].tid != sp[b].tid) continue;
      double a0 = sp[a].ts, a1 = a0 + sp[a].dur, b0 = sp[b].ts, b1 = b0 + sp[b].dur;
      if (sp[a].dur > 0 && sp[b].dur > 0 && a0 < b1 - 1e-6 && b0 < a1 - 1e-6) overlaps++;
    }
  CHECK_EQ_INT(overlaps, 0);
  /* the last event ends at the step time */
  double mx = 0;
  for (size_t a = 0; a < nx; a++)
    if (sp[a].ts + sp[a].dur > mx) mx = sp[a].ts + sp[a].dur;
  CHECK_NEAR(mx, r.step_time * 1e6, 1e-6 * mx);
  free(sp);
  json_decref(root);
  unlink(path);
  gopt_sim_state_free(st);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

static void test_clusters(void) {
  gopt_cluster *c = NULL;
  gopt_error err = {0};
  const char *ok[] = {"V100", "4xV100-nvlink", "8xH100", "2xhost", "2xV100-pcie", "4xTPUv3", "A100"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int rc = gopt_cluster_parse(ok[i], &c, &err);
    CHECK_MSG(rc == 0, "%s: %s", ok[i], err.msg);
    if (rc) continue;
    /* JSON round trip */
    char *js = gopt_cluster_to_json(c);
    gopt_cluster *c2 = NULL;
    rc = gopt_cluster_from_json(js, "rt", &c2, &err);
    CHECK_MSG(rc == 0, "%s: %s", ok[i], err.msg);
    if (!rc) {
      CHECK(c2->n_devices == c->n_devices && c2->n_links == c->n_links);
      CHECK(!memcmp(c->route, c2->route, (size_t)c->n_devices * c->n_devices * sizeof *c->route));
      CHECK(c2->devices[0].mem_bw == c->devices[0].mem_bw &&
            fabs(c2->devices[0].launch_s - c->devices[0].launch_s) < 1e-18 &&
            c2->devices[0].eff[GOPT_OPC_CONV] == c->devices[0].eff[GOPT_OPC_CONV]);
    }
    free(js);
    gopt_cluster_free(c2);
    gopt_cluster_free(c);
  }
  CHECK_EQ_INT(gopt_cluster_parse("4xV100-nvlink", &c, &err), 0);
  CHECK(c->n_devices == 4 && c->n_links == 6 && c->route[0 * 4 + 3] != c->route[1 * 4 + 2]);
  gopt_cluster_free(c);
  CHECK_EQ_INT(gopt_cluster_parse("2xV100-pcie", &c, &err), 0);
  CHECK(c->n_links == 1 && c->links[0].bw == 12e9);
  gopt_cluster_free(c);
  const char *bad[] = {"4xV999", "0xV100", "4xV100-carrier", "", "/nonexistent/c.json"};
  const char *want[] = {"unknown device 'V999'", "expected NxPRESET", "unknown link 'carrier'",
                        "empty", "cannot open"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c = NULL;
    CHECK(gopt_cluster_parse(bad[i], &c, &err) != 0 && c == NULL);
    CHECK_MSG(strstr(err.msg, want[i]) && !strchr(err.msg, '\n'), "%s -> %s", bad[i], err.msg);
  }
  const char *badjson[] = {"{\"devices\":[]}", "{\"devices\":[{\"preset\":\"V100\",\"count\":2}]}",
                           "{\"devices\":[{\"preset\":\"Q\"}]}", "{\"devices\":[{\"mem_bw\":1}]}",
                           "[1,2"};
  const char *wantj[] = {"non-empty", "share no link", "unknown preset", "needs peak_flops", "line 1"};
  for (size_t i = 0; i < sizeof badjson / sizeof badjson[0]; i++) {
    c = NULL;
    CHECK(gopt_cluster_from_json(badjson[i], "c.json", &c, &err) != 0 && c == NULL);
    CHECK_MSG(strstr(err.msg, wantj[i]) && !strncmp(err.msg, "c.json", 6), "%s -> %s", badjson[i], err.msg);
  }
  /* kernel time: roofline + launch (the V100 preset without its measured-GPU model); shape class
   * free */
  const gopt_device *vp = gopt_device_find_preset("v100");
  CHECK(vp != NULL && vp->gpu_model);
  gopt_device vr = *vp;
  vr.gpu_model = 0;
  const gopt_device *v = &vr;
  CHECK_NEAR(gopt_device_kernel_time(v, GOPT_OPC_CONV, GOPT_DT_FLOAT, 15.7e12, 0), 5e-6 + 1.0 / 0.6, 1e-9);
  CHECK_NEAR(gopt_device_kernel_time(v, GOPT_OPC_ELEMWISE, GOPT_DT_FLOAT16, 0, 900e9), 5e-6 + 1.0 / 0.75, 1e-9);
  CHECK_NEAR(gopt_device_kernel_time(v, GOPT_OPC_CONV, GOPT_DT_FLOAT16, 125e12, 0), 5e-6 + 1.0 / 0.6, 1e-9);
  CHECK(gopt_device_kernel_time(v, GOPT_OPC_SHAPE, GOPT_DT_FLOAT, 1e9, 1e9) == 0);
  /* with the model: the conv kind's terms; an fp16 conv's FLOP term divided by the speed-up */
  const double *k = vp->gpu_coef + GOPT_GK_CONV * GOPT_GF_PER_KIND;
  CHECK_NEAR(gopt_device_kernel_time(vp, GOPT_OPC_CONV, GOPT_DT_FLOAT, 1e12, 1e6),
             k[GOPT_GF_N] + k[GOPT_GF_FLOPS] * 1e12 + k[GOPT_GF_BYTES] * 1e6, 1e-12);
  CHECK(vp->gpu_half_speedup > 1);
  CHECK_NEAR(gopt_device_kernel_time(vp, GOPT_OPC_CONV, GOPT_DT_FLOAT16, 1e12, 0),
             k[GOPT_GF_N] + k[GOPT_GF_FLOPS] * 1e12 / vp->gpu_half_speedup, 1e-12);
  CHECK(gopt_device_kernel_time(vp, GOPT_OPC_SHAPE, GOPT_DT_FLOAT, 1e9, 1e9) == 0);
}

static void test_fit_stats(void) {
  /* samples generated from known efficiencies and launch: the fit recovers them */
  gopt_device d = *gopt_device_find_preset("host"), truth = d;
  truth.launch_s = 3e-6;
  truth.eff[GOPT_OPC_CONV] = 0.25;
  truth.eff[GOPT_OPC_ELEMWISE] = 0.6;
  gopt_sim_sample smp[40];
  for (int i = 0; i < 40; i++) {
    int cls = i % 2 ? GOPT_OPC_CONV : GOPT_OPC_ELEMWISE;
    double f = 1e5 * pow(1.5, i), b = cls == GOPT_OPC_CONV ? f / 50 : f * 8;
    smp[i] = (gopt_sim_sample){cls, GOPT_DT_FLOAT, f, b, 0};
    smp[i].seconds = gopt_device_kernel_time(&truth, cls, GOPT_DT_FLOAT, f, b);
  }
  gopt_sim_fit fit;
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_sim_fit_device(&d, smp, 40, &fit, &err), 0);
  CHECK_NEAR(fit.eff[GOPT_OPC_CONV], 0.25, 0.01);
  CHECK_NEAR(fit.eff[GOPT_OPC_ELEMWISE], 0.6, 0.03);
  CHECK_NEAR(fit.launch_s, 3e-6, 0.3e-6);
  CHECK(fit.rms_log_after < 0.05 && fit.rms_log_after <= fit.rms_log_before);
  CHECK_EQ_INT(fit.n[GOPT_OPC_CONV], 20);
  CHECK(gopt_sim_fit_device(&d, smp, 0, &fit, &err) == GOPT_EINVAL);
  /* Kendall tau-b against a brute-force count on a small example with ties */
  double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 3, 2, 4, 6, 5}, z[6] = {6, 5, 4, 3, 2, 1};
  /* y: 15 pairs, discordant (2,3) and (5,6): tau = (13 - 2) / 15 */
  CHECK_NEAR(gopt_sim_kendall_tau(x, y, 6), 11.0 / 15.0, 1e-12);
  CHECK_NEAR(gopt_sim_kendall_tau(x, z, 6), -1.0, 1e-12);
  double t1[4] = {1, 1, 2, 3}, t2[4] = {1, 2, 3, 4};
  /* tau-b: n0 = 6, ties in t1: 1 pair; concordant 5: 5 / sqrt(5 * 6) */
  CHECK_NEAR(gopt_sim_kendall_tau(t1, t2, 4), 5.0 / sqrt(30.0), 1e-12);
  double pred[4] = {1.1, 2.0, 2.5, 8}, meas[4] = {1, 2, 2, 4};
  /* errors: 10, 0, 25, 100 %: median 17.5 */
  CHECK_NEAR(gopt_sim_mdape(pred, meas, 4, NULL), 17.5, 1e-9);
}

int main(void) {
  test_clusters();
  test_fit_stats();
  test_one_device("resnet50");
  test_one_device("bert:layers=2");
  test_one_device("gnmt:layers=2,steps=5");
  test_incremental_batch("inception_v3");
  test_trace();
  return check_exit("test_sim_invariants");
}
