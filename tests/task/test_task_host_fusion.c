/* test_task_host_fusion.c: one fusion legality per target. On the host cluster every fusion
 * decision, whatever its FUSE bits (random at four densities, as any search or policy may set
 * them), projects to groups gopt's executor runs as one kernel each (gopt_exec_group_kind), holds
 * every post-op chain of the executor's own plan (gopt_exec_auto_plan) whole, and runs with outputs
 * equal to the unfused run's bit for bit (the loops compute the same float ops in the same order;
 * the chains are the plan's own, or extended by binary post-ops, the same float ops), except where
 * a chain takes a GELU (oneDNN's erf, not gopt's: then within 1e-4 + 1e-3|x|). On a GPU preset
 * (XLA's rules) the all-ones bits give groups the executor could not run, so the two targets'
 * legalities differ. Corpus models of three kinds:
 * efficientnet_b0 (conv + swish + squeeze-excitation), bert_tiny (attention, GELU, LayerNorm),
 * wavenet (dilated convs with pads, gated Tanh * Sigmoid). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/decisions.h"
#include "gopt/device.h"
#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/ops.h"
#include "gopt/task.h"

static gopt_graph *load(const char *path) {
  gopt_graph *g = NULL;
  gopt_error err = {0};
  int rc = gopt_onnx_load(path, NULL, &g, &err);
  const char *sym = rc ? NULL : gopt_graph_batch_symbol(g);
  if (sym) gopt_graph_bind_symbol(g, sym, 1);
  gopt_infer_opts io = {.fold_constants = 1, .keep_source_shapes = 1};
  if (!rc) rc = gopt_infer_shapes(g, &io, &err);
  CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
  return g;
}

/* Runs g with the groups (NULL: none), seed 7; returns the outputs (n_out of them) or NULL. */
static gopt_host_tensor *run(const gopt_graph *g, const int32_t *group, size_t *n_out) {
  gopt_error err = {0};
  gopt_exec *x = NULL;
  gopt_exec_opts o = {.threads = 1, .seed = 1, .group = group, .layouts = GOPT_EXEC_LAYOUT_AUTO};
  int rc = gopt_exec_new(g, &o, &x, NULL, &err);
  if (!rc) rc = gopt_exec_random_inputs(x, 7, &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  *n_out = rc ? 0 : gopt_exec_n_outputs(x);
  gopt_host_tensor *out = calloc(*n_out + 1, sizeof *out);
  for (size_t i = 0; !rc && i < *n_out; i++) rc = gopt_exec_get_output(x, i, &out[i], &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  gopt_exec_free(x);
  return out;
}

/* Whether a group of d holds an Erf (a GELU post-op: oneDNN computes it). */
static int has_gelu(const gopt_graph *g, const gopt_decisions *d) {
  for (size_t n = 0; n < g->nodes.n; n++)
    if (d->group[n] >= 0 && g->nodes.a[n].op == GOPT_OP_ERF) return 1;
  return 0;
}

/* Whether a and b are float tensors within 1e-4 + 1e-3|b| everywhere (bitwise when exact). */
static int outputs_close(const gopt_host_tensor *a, const gopt_host_tensor *b, int exact) {
  if (a->nbytes != b->nbytes) return 0;
  if (exact || a->dtype != GOPT_DT_FLOAT) return !memcmp(a->data, b->data, a->nbytes);
  const float *p = a->data, *q = b->data;
  for (size_t i = 0; i < a->nbytes / sizeof *p; i++)
    if (fabsf(p[i] - q[i]) > 1e-4f + 1e-3f * fabsf(q[i])) return 0;
  return 1;
}

static void free_outs(gopt_host_tensor *t, size_t n) {
  for (size_t i = 0; t && i < n; i++) gopt_host_tensor_clear(&t[i]);
  free(t);
}

/* Checks every group of d: its kind, and that the chain groups are exactly the plan's chains. */
static void check_groups(const char *name, const gopt_graph *g, const gopt_decisions *d, const int32_t *step_of,
                         int32_t n_chains) {
  int32_t *mem = malloc((g->nodes.n + 1) * sizeof *mem), chains = 0;
  for (int32_t gr = 0; gr < d->n_groups; gr++) {
    int k = 0;
    for (size_t n = 0; n < g->nodes.n; n++)
      if (d->group[n] == gr) mem[k++] = (int32_t)n;
    if (k < 2) continue;
    int kind = gopt_exec_group_kind(g, mem, k);
    CHECK_MSG(kind != GOPT_EXEC_GROUP_NONE, "%s: group %d (%d nodes, first '%s') is no executor kernel", name, gr, k,
              gopt_node_name(g, mem[0]));
    for (int i = 0; i < k && kind == GOPT_EXEC_GROUP_LOOP; i++)
      CHECK_MSG(step_of[mem[i]] < 0, "%s: loop group %d takes '%s', which the executor runs in a oneDNN step", name,
                gr, gopt_node_name(g, mem[i]));
    chains += kind == GOPT_EXEC_GROUP_CHAIN;
  }
  CHECK_MSG(chains == n_chains, "%s: %d chain groups, the executor's plan has %d chains", name, chains, n_chains);
  free(mem);
}

static void test_model(const char *path) {
  gopt_graph *g = load(path);
  if (!g) return;
  gopt_error err = {0};
  gopt_cluster *host = NULL, *gpu = NULL;
  CHECK(gopt_cluster_parse("host", &host, &err) == 0 && gopt_cluster_parse("V100", &gpu, &err) == 0);
  gopt_env_opts eo = {.task = GOPT_TASK_FUSION, .threads = 1};
  gopt_env *e = NULL, *eg = NULL;
  CHECK_MSG(gopt_env_new(g, host, &eo, &e, &err) == 0 && gopt_env_new(g, gpu, &eo, &eg, &err) == 0, "%s", err.msg);
  int32_t *step_of = malloc(g->nodes.n * sizeof *step_of), n_chains = 0;
  int32_t *cnt = calloc(g->nodes.n, sizeof *cnt);
  CHECK(gopt_exec_auto_plan(g, step_of) == 0);
  for (size_t n = 0; n < g->nodes.n; n++)
    if (step_of[n] >= 0) cnt[step_of[n]]++;
  for (size_t n = 0; n < g->nodes.n; n++) n_chains += step_of[n] == (int32_t)n && cnt[n] >= 2;
  size_t nv = e ? gopt_env_nvars(e) : 0, n_ref = 0;
  double *x = calloc(nv + 1, sizeof *x);
  gopt_host_tensor *ref = run(g, NULL, &n_ref);
  uint64_t s = 0x9e3779b97f4a7c15ULL;
  for (int dens = 1; e && dens <= 4; dens++) {
    for (size_t i = 0; i < nv; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      x[i] = (double)((s >> 11) % 4 < (uint64_t)dens);
    }
    gopt_decisions d;
    gopt_decisions_init(&d, g);
    CHECK_MSG(gopt_env_to_decisions(e, x, &d, &err) == 0 && d.group, "%s", err.msg);
    if (d.group) check_groups(path, g, &d, step_of, n_chains);
    size_t n_out = 0;
    gopt_host_tensor *out = d.group ? run(g, d.group, &n_out) : NULL;
    CHECK_EQ_INT(n_out, n_ref);
    int exact = d.group && !has_gelu(g, &d);
    for (size_t i = 0; i < n_out && i < n_ref; i++)
      CHECK_MSG(outputs_close(&out[i], &ref[i], exact), "%s: density %d/4: output %zu differs from the unfused run%s",
                path, dens, i, exact ? " (expected bitwise equal)" : "");
    free_outs(out, n_out);
    gopt_decisions_clear(&d);
  }
  /* the GPU target (XLA's rules) fuses what the executor could not run as one kernel */
  size_t nvg = eg ? gopt_env_nvars(eg) : 0;
  double *xg = malloc((nvg + 1) * sizeof *xg);
  for (size_t i = 0; i < nvg; i++) xg[i] = 1;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  int foreign = 0;
  if (eg && gopt_env_to_decisions(eg, xg, &d, &err) == 0 && d.group) {
    int32_t *mem = malloc((g->nodes.n + 1) * sizeof *mem);
    for (int32_t gr = 0; gr < d.n_groups && !foreign; gr++) {
      int k = 0;
      for (size_t n = 0; n < g->nodes.n; n++)
        if (d.group[n] == gr) mem[k++] = (int32_t)n;
      foreign = k >= 2 && gopt_exec_group_kind(g, mem, k) == GOPT_EXEC_GROUP_NONE;
    }
    free(mem);
  }
  CHECK_MSG(foreign, "%s: every XLA-rule group of the GPU target is also an executor kernel", path);
  gopt_decisions_clear(&d);
  free(xg);
  free_outs(ref, n_ref);
  free(x);
  free(step_of);
  free(cnt);
  gopt_env_free(e);
  gopt_env_free(eg);
  gopt_cluster_free(host);
  gopt_cluster_free(gpu);
  gopt_graph_free(g);
}

int main(void) {
  test_model("corpus/efficientnet_b0.onnx");
  test_model("corpus/bert_tiny.onnx");
  test_model("corpus/wavenet.onnx");
  return check_exit("test_task_host_fusion");
}
