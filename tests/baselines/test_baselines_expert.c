/* test_baselines_expert.c: the human-expert placement (docs/TASKS.md, `expert`), checked against
 * expectations derived independently from node names: GNMT one LSTM layer per device (layer i on
 * floor(i * D / L), embeddings on device 0, attention and softmax on D - 1, gradients and updates
 * with their forward layer) and fitting in memory when training on 8 V100s; BERT and Transformer
 * layers contiguous and monotone in device and balanced; an ONNX export's "/layers.<k>/" scopes
 * split the same way; a graph without scope structure gets the cost-balanced contiguous split
 * (recomputed here from the documented formula). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/baselines.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/task.h"
#include "gopt/train.h"
#include "gopt/zoo.h"

/* Runs `method` on the placement task of g on cluster spec; dev[node id] receives the device (-1
 * for nodes without a variable) and *r the evaluation. Returns 0 or an error code. */
static int place(const gopt_graph *g, const char *cluster, const char *method, int *dev,
                 gopt_env_result *r) {
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  gopt_env_ws *w = NULL;
  double *x = NULL;
  gopt_env_opts o = {.task = GOPT_TASK_PLACEMENT};
  int rc = gopt_cluster_parse(cluster, &c, &err);
  rc = rc ? rc : gopt_env_new(g, c, &o, &e, &err);
  if (!rc && !(x = calloc(gopt_env_nvars(e) + 1, sizeof *x))) rc = GOPT_ENOMEM;
  rc = rc ? rc : gopt_baseline_run(method, e, x, &err);
  if (!rc && !(w = gopt_env_ws_new(e))) rc = GOPT_ENOMEM;
  rc = rc ? rc : gopt_env_evaluate(w, x, r, NULL, &err);
  CHECK_MSG(rc == 0, "%s on %s: %s", method, cluster, err.msg);
  for (size_t i = 0; i < g->nodes.n; i++) dev[i] = -1;
  if (!rc) {
    const gopt_env_var *v = gopt_env_vars(e);
    for (size_t i = 0; i < gopt_env_nvars(e); i++)
      if (v[i].kind == GOPT_VAR_DEVICE) dev[v[i].node] = (int)x[i];
  }
  free(x);
  gopt_env_ws_free(w);
  gopt_env_free(e);
  gopt_cluster_free(c);
  return rc;
}

/* Builds zoo spec (a training step when training) and *dev, an array for a device per node id;
 * NULL (checked) on failure. */
static gopt_graph *zoo_graph(const char *spec, int training, int **dev) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  *dev = NULL;
  int rc = gopt_zoo_build(spec, &g, &err);
  if (!rc && training) rc = gopt_train_build(g, NULL, &err);
  if (!rc && !(*dev = calloc(g->nodes.n + 1, sizeof **dev))) rc = GOPT_ENOMEM;
  CHECK_MSG(rc == 0, "%s: %s", spec, err.msg);
  if (rc) {
    gopt_graph_free(g);
    return NULL;
  }
  return g;
}

/* Layer index of a GNMT name ("enc.l3.t0...", "grad/dec.l5.t2.../d0", "update/enc.l1...."),
 * -2 for embeddings, -3 for attention / logits, -1 for anything else. */
static int gnmt_layer(const char *s) {
  for (const char *p = s; (p = strstr(p, ".l")) != NULL; p++) {
    int k = 0, len = 0;
    if (p > s && p[-1] == 'c' && sscanf(p + 2, "%d%n", &k, &len) == 1 &&
        p[2 + len] == '.')
      return k;
  }
  if (strstr(s, "embedding")) return -2;
  if (strstr(s, "attention") || strstr(s, "logits") || strstr(s, ".memory")) return -3;
  return -1;
}

/* (1) GNMT layer by layer on D devices; training graphs also check gradient and update ops. */
static void test_gnmt_layers(const char *spec, const char *cluster, int D, int training) {
  int *dev;
  gopt_graph *g = zoo_graph(spec, training, &dev);
  gopt_env_result r;
  if (!g || place(g, cluster, "expert", dev, &r)) goto done;
  size_t checked = 0, live = 0, grads = 0, bad = 0;
  int L = 0;
  for (size_t i = 0; i < g->nodes.n; i++)
    if (gopt_node_alive(g, (int32_t)i) && gnmt_layer(gopt_node_name(g, (int32_t)i)) + 1 > L)
      L = gnmt_layer(gopt_node_name(g, (int32_t)i)) + 1;
  CHECK_EQ_INT(L, 8);
  for (size_t i = 0; i < g->nodes.n; i++) {
    if (!gopt_node_alive(g, (int32_t)i)) continue;
    const char *name = gopt_node_name(g, (int32_t)i);
    int l = gnmt_layer(name), want = l >= 0 ? l * D / L : l == -2 ? 0 : l == -3 ? D - 1 : -1;
    live++;
    if (want < 0) continue;
    checked++;
    grads += !strncmp(name, "grad/", 5) || !strncmp(name, "update/", 7);
    if (dev[i] != want && bad++ < 5) fprintf(stderr, "  %s: device %d, want %d\n", name, dev[i], want);
  }
  fprintf(stderr, "  %s on %s%s: %zu of %zu nodes checked by name (%zu backward/update), %zu wrong\n",
          spec, cluster, training ? " training" : "", checked, live, grads, bad);
  CHECK_EQ_INT(bad, 0);
  CHECK(checked >= live * 95 / 100);
  CHECK(!training || grads > checked / 3);
done:
  free(dev);
  gopt_graph_free(g);
}

/* (2) The expert placement of GNMT-8 training fits on 8 V100s and beats one device. */
static void test_gnmt_fits(void) {
  int *dev;
  gopt_graph *g = zoo_graph("gnmt:layers=8", 1, &dev);
  gopt_env_result r, r1;
  if (g && !place(g, "8xV100-nvlink", "expert", dev, &r) &&
      !place(g, "8xV100-nvlink", "single", dev, &r1)) {
    fprintf(stderr, "  gnmt:layers=8 training expert: %.1f ms, peak %.0f MB, feasible %d (single: %.1f ms, "
            "feasible %d)\n", r.step_time * 1e3, r.peak_mem / 1e6, r.feasible, r1.step_time * 1e3, r1.feasible);
    CHECK(r.feasible && r.mem_over == 0);
    CHECK(!r1.feasible); /* the reason a split is needed at all */
  }
  free(dev);
  gopt_graph_free(g);
}

/* Layer of a name by a "<tag><k><sep>" pattern (tag e.g. "encoder.layer.", "/layers."), -1. */
static int tagged_layer(const char *s, const char *tag, char sep) {
  const char *p = strstr(s, tag);
  int k = 0, len = 0;
  if (!p || sscanf(p + strlen(tag), "%d%n", &k, &len) != 1 || p[strlen(tag) + len] != sep) return -1;
  return k;
}

/* (3, 4) Layers by tag: every layer on one device, devices non-decreasing in the layer index,
 * ndev devices used; with equal layers (equal_per = layers per device), exactly that many each.
 * first/last: name substrings of nodes that go with the first / last layer (NULL: none). */
static void check_layers(const gopt_graph *g, const int *dev, const char *tag, char sep, int ndev,
                         int equal_per, const char *first, const char *last, const char *what) {
  int ldev[256], nl = 0, bad = 0;
  for (int k = 0; k < 256; k++) ldev[k] = -1;
  for (size_t i = 0; i < g->nodes.n; i++) {
    if (!gopt_node_alive(g, (int32_t)i) || dev[i] < 0) continue;
    int k = tagged_layer(gopt_node_name(g, (int32_t)i), tag, sep);
    if (k < 0 || k >= 256) continue;
    if (k + 1 > nl) nl = k + 1;
    if (ldev[k] >= 0 && ldev[k] != dev[i]) bad++;
    ldev[k] = dev[i];
  }
  int mono = 1, used = nl > 0, per[64] = {0};
  for (int k = 0; k < nl; k++) {
    if (ldev[k] < 0 || ldev[k] >= 64) {
      CHECK_MSG(0, "%s: layer %d has no device", what, k);
      return;
    }
    if (k && ldev[k] != ldev[k - 1]) used++;
    if (k && ldev[k] < ldev[k - 1]) mono = 0;
    per[ldev[k]]++;
  }
  fprintf(stderr, "  %s: %d layers, devices", what, nl);
  for (int k = 0; k < nl; k++) fprintf(stderr, " %d", ldev[k]);
  fputc('\n', stderr);
  CHECK_MSG(bad == 0, "%s: %d nodes of a layer off its device", what, bad);
  CHECK_MSG(mono, "%s: devices not monotone in the layer", what);
  CHECK_EQ_INT(used, ndev);
  CHECK_EQ_INT(ldev[0], 0);
  for (int d = 0; equal_per && d < ndev; d++) CHECK_EQ_INT(per[d], equal_per);
  for (size_t i = 0; i < g->nodes.n; i++) {
    const char *name = gopt_node_name(g, (int32_t)i);
    if (!gopt_node_alive(g, (int32_t)i) || dev[i] < 0 || strncmp(name, "grad/", 5) == 0) continue;
    if (first && strstr(name, first)) CHECK_MSG(dev[i] == ldev[0], "%s: %s on %d", what, name, dev[i]);
    if (last && strstr(name, last)) CHECK_MSG(dev[i] == ldev[nl - 1], "%s: %s on %d", what, name, dev[i]);
  }
}

static void test_zoo_layers(const char *spec, int training, const char *cluster, const char *tag,
                            int ndev, int equal_per, const char *first, const char *last) {
  int *dev;
  gopt_graph *g = zoo_graph(spec, training, &dev);
  gopt_env_result r;
  if (g && !place(g, cluster, "expert", dev, &r)) {
    char what[128];
    snprintf(what, sizeof what, "%s%s on %s", spec, training ? " training" : "", cluster);
    check_layers(g, dev, tag, '.', ndev, equal_per, first, last, what);
    if (training) { /* gradients of a layer on that layer's device */
      char gtag[64];
      snprintf(gtag, sizeof gtag, "grad/%s", tag);
      check_layers(g, dev, gtag, '.', ndev, equal_per, NULL, NULL, "  gradients");
    }
  }
  free(dev);
  gopt_graph_free(g);
}

/* (4) An ONNX export: "/layers.<k>/" scope names give the split. */
static void test_onnx_layers(void) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc = gopt_onnx_load("corpus/bert_tiny.onnx", NULL, &g, &err);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  rc = rc ? rc : gopt_infer_shapes(g, &io, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  int *dev = g ? calloc(g->nodes.n + 1, sizeof *dev) : NULL;
  gopt_env_result r;
  if (!rc && dev && !place(g, "2xV100-nvlink", "expert", dev, &r))
    check_layers(g, dev, "/layers.", '/', 2, 0, NULL, NULL, "bert_tiny.onnx on 2xV100");
  if (!rc && dev && !place(g, "3xV100-nvlink", "expert", dev, &r))
    check_layers(g, dev, "/layers.", '/', 3, 0, NULL, NULL, "bert_tiny.onnx on 3xV100");
  free(dev);
  gopt_graph_free(g);
}

/* (5) No scope structure: a chain "n0" ... "n23" of unequal MatMuls gets the cost-balanced
 * contiguous split, recomputed here: device floor((cost before + cost / 2) / total * D). */
static void test_fallback(void) {
  gopt_graph *g = gopt_graph_new("chain");
  int64_t d[2] = {64, 64};
  int32_t t = gopt_graph_add_tensor(g, "x", GOPT_DT_FLOAT, 2, d, NULL);
  gopt_graph_add_input(g, t);
  for (int i = 0; i < 24; i++) {
    char nm[16], wn[16];
    int64_t wd[2] = {64, 64};
    snprintf(nm, sizeof nm, "n%d", i);
    snprintf(wn, sizeof wn, "w%d", i);
    int32_t w = gopt_graph_add_tensor(g, wn, GOPT_DT_FLOAT, 2, wd, NULL);
    gopt_tensor_set_const(g, w, NULL, 64 * 64 * 4, NULL);
    int32_t o = gopt_graph_add_tensor(g, nm, GOPT_DT_FLOAT, 2, d, NULL);
    int32_t in[2] = {t, w};
    if (i % 3 == 2) gopt_graph_add_node(g, "Relu", nm, 1, in, 1, &o, NULL);
    else gopt_graph_add_node(g, "MatMul", nm, 2, in, 1, &o, NULL);
    t = o;
  }
  gopt_graph_add_output(g, t);
  int dev[32];
  gopt_env_result r;
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_env *e = NULL;
  gopt_env_opts o = {.task = GOPT_TASK_PLACEMENT};
  int rc = gopt_cluster_parse("4xV100-nvlink", &c, &err);
  rc = rc ? rc : gopt_env_new(g, c, &o, &e, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (!rc && !place(g, "4xV100-nvlink", "expert", dev, &r)) {
    const gopt_sim *s = gopt_env_sim(e);
    double total = 0, before = 0;
    for (int32_t i = 0; i < 24; i++) total += gopt_sim_node_time(s, i, 0);
    int used[4] = {0};
    for (int32_t i = 0; i < 24; i++) {
      double ti = gopt_sim_node_time(s, i, 0);
      int want = (int)floor((before + ti / 2) / total * 4);
      before += ti;
      CHECK_MSG(dev[i] == (want > 3 ? 3 : want), "n%d: device %d, want %d", i, dev[i], want);
      used[dev[i] & 3] = 1;
    }
    CHECK(used[0] && used[1] && used[2] && used[3]);
  }
  gopt_env_free(e);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  test_gnmt_layers("gnmt:layers=8,steps=6", "8xV100-nvlink", 8, 0);
  test_gnmt_layers("gnmt:layers=8,steps=6", "4xV100-nvlink", 4, 0);
  test_gnmt_layers("gnmt:layers=8,steps=6,hidden=64,vocab=100,batch=4", "8xV100-nvlink", 8, 1);
  test_gnmt_fits();
  test_zoo_layers("bert", 0, "4xV100-nvlink", "encoder.layer.", 4, 3, "embeddings.", "pooler.");
  test_zoo_layers("bert:layers=8,seq=32,hidden=128,heads=4,intermediate=256,vocab=1000", 1,
                  "4xV100-nvlink", "encoder.layer.", 4, 2, "embeddings.", "pooler.");
  test_zoo_layers("transformer", 0, "4xV100-nvlink", "enc.l", 2, 3, "enc.embed.", NULL);
  test_onnx_layers();
  test_fallback();
  return check_exit("test_baselines_expert");
}
