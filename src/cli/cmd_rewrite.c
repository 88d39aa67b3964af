/* cmd_rewrite.c: `gopt rewrite MODEL -o OUT.onnx`: searches for a cheaper equivalent graph with the
 * substitution rules (rules.json + built-ins), verifies the result against the input (gopt's
 * executor on random inputs with the model's weights, or made-up weights for a structure-only
 * model; and ONNX Runtime through tools/ort/ort_run.js), then writes it; and `gopt rules
 * generate|verify|list`. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gopt/exec.h"
#include "gopt/onnx.h"
#include "gopt/rewrite.h"
#include "gopt/util.h"

static const char rewrite_help[] =
    "usage: gopt rewrite MODEL -o OUT.onnx [--method greedy|eqsat|rl] [--cluster C] [--budget N]\n"
    "                    [--seconds S] [--alpha A] [--rules F] [--seed S] [--verify exec|ort|both]\n"
    "                    [--json] [--measure] [--measure-on exec|ort] [--costdb DB] [--batch N]\n"
    "                    [--policy P.gpol] [--samples N]\n"
    "       gopt rewrite --list-methods\n"
    "  MODEL          an .onnx file or a zoo spec\n"
    "  --method M     greedy (TASO's cost-ordered backtracking search; default), eqsat (Tensat:\n"
    "                 equality saturation in an e-graph, ILP extraction with GLPK) or rl (X-RLflow-\n"
    "                 style agent: episodes of a learned policy, one rewrite per step, temporary\n"
    "                 losses allowed; the best graph seen is the result)\n"
    "  --policy P     rl: the policy (default: the shipped policies/rewrite.gpol; gopt train --method rewrite)\n"
    "  --samples N    rl: episodes sampled from the policy (seeds from --seed) after its greedy\n"
    "                 one, while --seconds allows (default 64; 0: the greedy episode only)\n"
    "  --cluster C    cost device preset (default V100): the simulator's step time\n"
    "  --costdb DB    measured op costs (TASO's cost model) for a cluster with measured devices\n"
    "                 (--cluster host): every op is priced from its measured time in DB (a\n"
    "                 `gopt run --profile --costdb` database, JSON or SQLite); ops DB lacks are\n"
    "                 profiled on demand (alone, one thread, median of 10 runs) and added to DB\n"
    "  --budget N     greedy: graphs dequeued (default 100); eqsat: e-node limit (20000); rl: steps (100)\n"
    "  --seconds S    wall-clock limit of the search (eqsat: default 10: 40% saturation, the rest\n"
    "                 extraction and building the result; rl: default 10, all its episodes;\n"
    "                 verification and writing come after)\n"
    "                 (every method: a progress line on stderr when it is a terminal; Ctrl-C stops\n"
    "                 the search with its best graph so far, verified and written as usual)\n"
    "  --alpha A      accept candidates costing < A x best (default 1.05)\n"
    "  --rules F      rules.json (default: the shipped rules/rules.json, else the built-ins)\n"
    "  --verify V     exec: gopt's executor; ort: also ONNX Runtime (default both)\n"
    "  --json         print one JSON object\n"
    "  --measure      time input and result on gopt's executor (one thread; median of 11 runs,\n"
    "                 input and result interleaved) and, unless --verify exec, ONNX Runtime (one\n"
    "                 thread; 3 interleaved rounds of 5 runs, median of the round medians),\n"
    "                 made-up weights where the\n"
    "                 model has none; a result measured slower than its input on the --measure-on\n"
    "                 executor is not written: the input is written instead, with the reason\n"
    "  --measure-on E exec (gopt's executor, default) or ort (ONNX Runtime): the executor whose\n"
    "                 measurement decides whether the result is written\n"
    "  --list-methods print the search methods of --method, one per line\n";

static int fail(const char *msg) {
  fprintf(stderr, "gopt rewrite: %s\n", msg);
  return 1;
}

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}


/* The shipped rules.json: $GOPT_RULES, else rules/rules.json where gopt_find_shipped looks. */
int cli_rewrite_find_rules(char *buf, size_t n) {
  const char *env = getenv("GOPT_RULES");
  if (env && *env && exists(env)) {
    snprintf(buf, n, "%s", env);
    return 1;
  }
  return gopt_find_shipped("rules/rules.json", NULL, buf, n);
}

/* Drops the data of big float constants (the search works on structure; replay adds weights). */
void cli_rewrite_strip_weights(gopt_graph *g, const uint8_t *keep) {
  for (size_t t = 0; t < g->tensors.n; t++) {
    gopt_tensor *x = &g->tensors.a[t];
    if (!(x->flags & GOPT_T_CONST) || x->dtype != GOPT_DT_FLOAT || (keep && keep[t])) continue;
    if (!keep && gopt_tensor_numel(g, (int32_t)t) <= 64) continue;
    if (!gopt_tensor_data(g, (int32_t)t)) continue;
    size_t nb = g->consts.a[x->cdata].nbytes;
    gopt_tensor_set_const(g, (int32_t)t, NULL, nb, NULL);
    g->consts.a[x->cdata].nbytes = nb;
  }
}

/* ---- ONNX Runtime check ---------------------------------------------------------------------- */

/* Runs ort_run.js on model; with reps > 0 it also times it (median of reps runs). */
static int run_ort(const char *model, const char *in_json, const char *out_dir, int reps) {
  char cmd[4096];
  const char *root = getenv("GOPT_SOURCE_DIR");
  char js[1200] = "tools/ort/ort_run.js";
  if (root && *root) snprintf(js, sizeof js, "%.1000s/tools/ort/ort_run.js", root);
  else if (!exists(js) && !gopt_find_shipped("tools/ort/ort_run.js", NULL, js, sizeof js))
    snprintf(js, sizeof js, "tools/ort/ort_run.js"); /* node names the missing file */
  snprintf(cmd, sizeof cmd, "node '%s' '%s' '%s' '%s' --threads 1 --time %d >/dev/null", js, model,
           in_json, out_dir, reps);
  return system(cmd);
}

/* Writes random inputs of g for ort_run.js into dir/in.json. */
static int write_inputs(const gopt_graph *g, const char *dir, uint64_t seed, gopt_error *err) {
  json_t *root = json_object(), *ins = json_object();
  uint64_t s = seed * 2654435761u + 1;
  int rc = 0;
  for (size_t i = 0; i < g->inputs.n && !rc; i++) {
    int32_t t = g->inputs.a[i];
    const gopt_tensor *x = &g->tensors.a[t];
    if (x->flags & GOPT_T_CONST) continue;
    int64_t n = gopt_tensor_numel(g, t);
    const char *name = gopt_graph_str(g, x->name);
    char file[64], path[1200];
    snprintf(file, sizeof file, "in%zu.bin", i);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    const char *type = x->dtype == GOPT_DT_FLOAT ? "float32" : x->dtype == GOPT_DT_INT64 ? "int64"
                       : x->dtype == GOPT_DT_INT32 ? "int32" : NULL;
    if (!type) {
      rc = gopt_error_set(err, GOPT_EUNSUP, "input '%s': no random values for dtype %s", name,
                          gopt_dtype_name(x->dtype));
      break;
    }
    size_t es = gopt_dtype_size(x->dtype);
    unsigned char *buf = malloc((size_t)n * es + 1);
    if (!buf) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      break;
    }
    for (int64_t j = 0; j < n; j++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      if (x->dtype == GOPT_DT_FLOAT) ((float *)buf)[j] = (float)((double)(s >> 40) / 8388608.0 - 1.0);
      else if (x->dtype == GOPT_DT_INT64) ((int64_t *)buf)[j] = (int64_t)((s >> 33) & 1);
      else ((int32_t *)buf)[j] = (int32_t)((s >> 33) & 1);
    }
    rc = gopt_file_write_atomic(path, buf, (size_t)n * es, err);
    free(buf);
    json_t *d = json_array();
    for (int k = 0; k < x->rank; k++) json_array_append_new(d, json_integer(gopt_tensor_dims(g, t)[k]));
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "dims", d);
    json_object_set_new(e, "file", json_string(file));
    json_object_set_new(ins, name, e);
  }
  json_object_set_new(root, "inputs", ins);
  char path[1200];
  snprintf(path, sizeof path, "%s/in.json", dir);
  if (!rc && json_dump_file(root, path, 0)) rc = gopt_error_set(err, GOPT_EIO, "%s: cannot write", path);
  json_decref(root);
  return rc;
}

/* Compares float outputs of two ort_run.js output directories. */
static int compare_ort(const char *da, const char *db, gopt_error *err) {
  char pa[2600], pb[2600];
  snprintf(pa, sizeof pa, "%.1200s/outputs.json", da);
  snprintf(pb, sizeof pb, "%.1200s/outputs.json", db);
  json_t *ja = json_load_file(pa, 0, NULL), *jb = json_load_file(pb, 0, NULL);
  int rc = 0;
  if (!ja || !jb) {
    rc = gopt_error_set(err, GOPT_EIO, "ONNX Runtime produced no outputs (%s)", !ja ? pa : pb);
    goto done;
  }
  const char *key;
  json_t *va;
  json_object_foreach(json_object_get(ja, "outputs"), key, va) {
    json_t *vb = json_object_get(json_object_get(jb, "outputs"), key);
    if (!vb) {
      rc = gopt_error_set(err, GOPT_EINVAL, "ONNX Runtime: output '%s' missing after the rewrite", key);
      break;
    }
    snprintf(pa, sizeof pa, "%.1200s/%.1200s", da, json_string_value(json_object_get(va, "file")));
    snprintf(pb, sizeof pb, "%.1200s/%.1200s", db, json_string_value(json_object_get(vb, "file")));
    void *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    if ((rc = gopt_file_read(pa, &a, &la, err)) || (rc = gopt_file_read(pb, &b, &lb, err))) {
      free(a);
      break;
    }
    if (la != lb) rc = gopt_error_set(err, GOPT_EINVAL, "ONNX Runtime: output '%s' changed size", key);
    else if (!strcmp(json_string_value(json_object_get(va, "type")), "float32")) {
      const float *x = a, *y = b;
      double scale = 0;
      for (size_t i = 0; i < la / 4; i++) scale = scale > fabsf(x[i]) ? scale : fabsf(x[i]);
      for (size_t i = 0; i < la / 4 && !rc; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        double tol = 1e-4 + 1e-3 * (fabs((double)x[i]) > 0.01 * scale ? fabs((double)x[i]) : 0.01 * scale);
        if (!(d <= tol))
          rc = gopt_error_set(err, GOPT_EINVAL, "ONNX Runtime: output '%s' differs at %zu: %g vs %g",
                              key, i, (double)x[i], (double)y[i]);
      }
    } else if (memcmp(a, b, la)) {
      rc = gopt_error_set(err, GOPT_EINVAL, "ONNX Runtime: output '%s' differs", key);
    }
    free(a);
    free(b);
    if (rc) break;
  }
done:
  json_decref(ja);
  json_decref(jb);
  return rc;
}

/* "seconds" of an ort_run.js output directory (-1 when absent). */
static double ort_seconds(const char *dir) {
  char p[1300];
  snprintf(p, sizeof p, "%.1200s/outputs.json", dir);
  json_t *j = json_load_file(p, 0, NULL);
  json_t *v = json_object_get(j, "seconds");
  double s = json_is_number(v) ? json_number_value(v) : -1;
  json_decref(j);
  return s;
}

/* Runs both graphs (with weights) under ONNX Runtime on the same random inputs; with rounds > 0
 * also times each: `rounds` rounds, each running a then b (reversed every other round) for a
 * median of 5 runs after a warm-up; t[0] (a) and t[1] (b) receive the medians of the rounds. */
#define ORT_ROUNDS_MAX 5
static int verify_ort(const gopt_graph *a, const gopt_graph *b, uint64_t seed, int rounds, double t[2],
                      gopt_error *err) {
  char dir[] = "/tmp/gopt-rewrite-XXXXXX";
  if (!mkdtemp(dir)) return gopt_error_set(err, GOPT_EIO, "cannot create a temporary directory");
  char ma[1200], mb[1200], oa[1200], ob[1200], in[1200];
  snprintf(ma, sizeof ma, "%s/a.onnx", dir);
  snprintf(mb, sizeof mb, "%s/b.onnx", dir);
  snprintf(oa, sizeof oa, "%s/oa", dir);
  snprintf(ob, sizeof ob, "%s/ob", dir);
  snprintf(in, sizeof in, "%s/in.json", dir);
  int rc = gopt_onnx_save(a, ma, err);
  if (!rc) rc = gopt_onnx_save(b, mb, err);
  if (!rc) rc = write_inputs(a, dir, seed, err);
  if (rounds > ORT_ROUNDS_MAX) rounds = ORT_ROUNDS_MAX;
  if (!rc && (run_ort(ma, in, oa, rounds > 0 ? 5 : 0) || run_ort(mb, in, ob, rounds > 0 ? 5 : 0)))
    rc = gopt_error_set(err, GOPT_EIO, "ONNX Runtime could not run the models (node tools/ort/ort_run.js)");
  if (!rc) rc = compare_ort(oa, ob, err);
  double v[2][ORT_ROUNDS_MAX];
  int n = 0;
  for (int r = 0; !rc && r < rounds; r++) {
    if (r > 0) { /* a later round: b first every other round */
      int bf = r % 2;
      if (run_ort(bf ? mb : ma, in, bf ? ob : oa, 5) || run_ort(bf ? ma : mb, in, bf ? oa : ob, 5)) break;
    }
    v[0][n] = ort_seconds(oa);
    v[1][n] = ort_seconds(ob);
    if (v[0][n] < 0 || v[1][n] < 0) break;
    n++;
  }
  if (n > 0) {
    t[0] = gopt_median(v[0], (size_t)n);
    t[1] = gopt_median(v[1], (size_t)n);
  }
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) { /* best effort */
  }
  return rc;
}

/* ---- gopt rewrite ---------------------------------------------------------------------------- */

typedef struct rw_args {
  const char *model, *out, *method, *cluster, *rules, *verify, *policy, *costdb, *measure_on;
  long budget, seed, samples; /* samples: -1 = none (--samples 0), 0 = the default */
  double seconds, alpha;
  int json, measure;
  cli_model_opts mo;
} rw_args;

static int parse_args(int argc, char **argv, rw_args *a) {
  int mf;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      fputs(rewrite_help, stdout);
      return 0;
    } else if (!strcmp(s, "--list-methods")) {
      for (size_t k = 0; k < gopt_rewrite_method_count(); k++) puts(gopt_rewrite_method_name(k));
      return 0;
    } else if (!strcmp(s, "--json")) {
      a->json = 1;
    } else if (!strcmp(s, "--measure")) {
      a->measure = 1;
    } else if ((mf = cli_model_flag("rewrite", argc, argv, &i, &a->mo)) != 0) {
      if (mf < 0) return 2;
    } else if (!strcmp(s, "-o") || !strcmp(s, "--method") || !strcmp(s, "--cluster") ||
               !strcmp(s, "--rules") || !strcmp(s, "--verify") || !strcmp(s, "--budget") ||
               !strcmp(s, "--seed") || !strcmp(s, "--seconds") || !strcmp(s, "--alpha") ||
               !strcmp(s, "--policy") || !strcmp(s, "--costdb") || !strcmp(s, "--measure-on") ||
               !strcmp(s, "--samples")) {
      if (!has) return cli_usage_error("rewrite", "%s needs a value", s);
      const char *v = argv[++i];
      char *end;
      if (!strcmp(s, "-o")) a->out = v;
      else if (!strcmp(s, "--method")) a->method = v;
      else if (!strcmp(s, "--cluster")) a->cluster = v;
      else if (!strcmp(s, "--rules")) a->rules = v;
      else if (!strcmp(s, "--verify")) a->verify = v;
      else if (!strcmp(s, "--policy")) a->policy = v;
      else if (!strcmp(s, "--costdb")) a->costdb = v;
      else if (!strcmp(s, "--measure-on")) a->measure_on = v;
      else if (!strcmp(s, "--budget")) {
        if (cli_parse_long("rewrite", s, v, 1, 1000000, &a->budget)) return 2;
      } else if (!strcmp(s, "--seed")) {
        if (cli_parse_long("rewrite", s, v, 0, 0x7fffffff, &a->seed)) return 2;
      } else if (!strcmp(s, "--samples")) {
        if (cli_parse_long("rewrite", s, v, 0, 100000, &a->samples)) return 2;
        if (!a->samples) a->samples = -1;
      } else {
        double d = strtod(v, &end);
        if (*end || !(d > 0)) return cli_usage_error("rewrite", "%s: expected a positive number, got '%s'", s, v);
        if (!strcmp(s, "--seconds")) a->seconds = d;
        else a->alpha = d;
      }
    } else if (s[0] == '-' && s[1]) {
      return cli_usage_error("rewrite", "unknown flag '%s' (see gopt rewrite --help)", s);
    } else if (!a->model) {
      a->model = s;
    } else {
      return cli_usage_error("rewrite", "unexpected argument '%s' (one MODEL)", s);
    }
  }
  if (!a->model) return cli_usage_error("rewrite", "missing MODEL (see gopt rewrite --help)");
  if (!a->out) return cli_usage_error("rewrite", "missing -o OUT.onnx");
  if (a->verify && strcmp(a->verify, "exec") && strcmp(a->verify, "ort") && strcmp(a->verify, "both"))
    return cli_usage_error("rewrite", "--verify: expected exec, ort or both, got '%s'", a->verify);
  if (a->samples && (!a->method || strcmp(a->method, "rl")))
    return cli_usage_error("rewrite", "--samples is for --method rl");
  if (a->measure_on && strcmp(a->measure_on, "exec") && strcmp(a->measure_on, "ort"))
    return cli_usage_error("rewrite", "--measure-on: expected exec or ort, got '%s'", a->measure_on);
  if (a->measure_on && !strcmp(a->measure_on, "ort") && a->verify && !strcmp(a->verify, "exec"))
    return cli_usage_error("rewrite", "--measure-on ort needs ONNX Runtime (not --verify exec)");
  return -1;
}

#define MEASURE_REPS 11
/* Times a and b (b may be NULL: a alone) with gopt's executor (one thread, as the cost database's
 * op times) on the same random inputs: a warm-up each, then MEASURE_REPS runs of each, interleaved
 * (a b, then b a, ...) so that a drift of the machine's speed hits both alike; t[0] and t[1]
 * receive the median wall times, cpu[0] and cpu[1] the median CPU times (-1 when a graph cannot
 * run). */
static void measure_pair(const gopt_graph *a, const gopt_graph *b, uint64_t seed, double t[2], double cpu[2]) {
  gopt_exec *x[2] = {NULL, NULL};
  gopt_exec_opts eo = {1, seed, NULL, 0, NULL, 0};
  double v[2][MEASURE_REPS], c[2][MEASURE_REPS];
  const gopt_graph *gs[2] = {a, b};
  int ok[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    t[k] = cpu[k] = -1;
    ok[k] = gs[k] && !gopt_exec_new(gs[k], &eo, &x[k], NULL, NULL) && !gopt_exec_random_inputs(x[k], seed, NULL) &&
            !gopt_exec_time_run(x[k], 1, 1, &v[k][0], NULL);
  }
  for (int i = 0; i < MEASURE_REPS; i++)
    for (int j = 0; j < 2; j++) {
      int k = (i + j) % 2; /* even rounds a first, odd rounds b first */
      if (ok[k] && gopt_exec_time_run_cpu(x[k], 0, 1, &v[k][i], &c[k][i], NULL)) ok[k] = 0;
    }
  for (int k = 0; k < 2; k++) {
    if (ok[k]) {
      t[k] = gopt_median(v[k], (size_t)MEASURE_REPS);
      cpu[k] = gopt_median(c[k], (size_t)MEASURE_REPS);
    }
    gopt_exec_free(x[k]);
  }
}

/* Test hook (GOPT_REWRITE_APPLY_RULE=NAME): the history becomes every match of rule NAME in g,
 * whatever the cost, so a rule the cost model never picks (merge_group_conv: more FLOPs) still goes
 * through the replay, both verifications, the checker and the write. 0, or -1 out of memory. */
static int apply_rule_hook(const gopt_graph *g, const gopt_ruleset *rs, gopt_rewrite_result *res) {
  const char *name = getenv("GOPT_REWRITE_APPLY_RULE");
  if (!name) return 0;
  for (size_t i = 0; i < gopt_ruleset_count(rs); i++) {
    if (strcmp(gopt_ruleset_rule_name(rs, i), name)) continue;
    gopt_rewrite_match *ms = NULL;
    size_t nm = 0;
    if (gopt_rewrite_find(g, rs, (int)i, &ms, &nm, NULL)) return -1;
    gopt_rewrite_step *st = nm ? calloc(nm, sizeof *st) : NULL;
    if (nm && !st) {
      free(ms);
      return -1;
    }
    for (size_t k = 0; k < nm; k++) {
      st[k].rule = (int32_t)i;
      st[k].flags = GOPT_RW_WEIGHTS;
      snprintf(st[k].where, sizeof st[k].where, "%s", gopt_node_name(g, ms[k].nodes[0]));
    }
    free(ms);
    free(res->steps);
    res->steps = st;
    res->n_steps = nm;
    res->flags = nm ? GOPT_RW_WEIGHTS : 0;
  }
  return 0;
}

/* --costdb: the database (loaded, or new for this host when the file does not exist yet) and the
 * on-demand profiler over it. A cluster without a measured device prices nothing from it (one
 * warning). Returns 0, or 1 after printing the error. */
static int costs_open(const rw_args *a, const gopt_cluster *c, uint64_t seed, gopt_costdb **db,
                      gopt_rewrite_costs **m) {
  gopt_error err = {0};
  if (!a->costdb) return 0;
  int measured = 0;
  for (int d = 0; d < c->n_devices; d++) measured |= c->devices[d].measured;
  if (!measured)
    fprintf(stderr, "gopt rewrite: warning: --costdb %s: cluster %s has no measured device (use --cluster "
            "host); the search prices ops analytically\n", a->costdb, c->name);
  if (exists(a->costdb)) {
    if (gopt_costdb_load(a->costdb, db, &err)) return fail(err.msg);
  } else {
    char host[256];
    gopt_costdb_this_host(host, sizeof host);
    if (!(*db = gopt_costdb_new(host, 0))) return fail("out of memory");
  }
  if (!(*m = gopt_rewrite_costs_new(*db, 10, seed + 17))) return fail("out of memory");
  return 0;
}

/* The measurement guard of --measure: writes into why (n bytes) the reason the result is not
 * written ("" when it is): measured slower than its input on the --measure-on executor (gopt's
 * executor: its median wall time or its median CPU time higher), or not measured there. t and cpu
 * are gopt's executor's medians (before, after). Test hook GOPT_REWRITE_FAKE_MEASURE="BEFORE_S,
 * AFTER_S" replaces the times (wall and CPU alike). */
static void measure_guard(const rw_args *a, const double t[2], const double cpu[2], const double ort_t[2],
                          char *why, size_t n) {
  int ort = a->measure_on && !strcmp(a->measure_on, "ort");
  double b = ort ? ort_t[0] : t[0], f = ort ? ort_t[1] : t[1];
  double cb = ort ? b : cpu[0], cf = ort ? f : cpu[1];
  const char *fake = getenv("GOPT_REWRITE_FAKE_MEASURE");
  if (fake && sscanf(fake, "%lf,%lf", &b, &f) != 2) b = f = -1;
  if (fake) {
    cb = b;
    cf = f;
  }
  const char *on = ort ? "ONNX Runtime" : "gopt's executor";
  why[0] = 0;
  if (b < 0 || f < 0 || cb < 0 || cf < 0)
    snprintf(why, n, "input kept: the result could not be timed on %s", on);
  else if (f > b)
    snprintf(why, n, "input kept: the result measured slower than its input on %s: %.4g ms -> %.4g ms (%s)",
             on, b * 1e3, f * 1e3, fake ? "GOPT_REWRITE_FAKE_MEASURE" :
             ort ? "median of 3 interleaved rounds of 5 runs" : "median of 11 interleaved runs");
  else if (cf > cb)
    snprintf(why, n, "input kept: the result measured slower than its input on %s in CPU time: %.4g ms -> "
             "%.4g ms (median of 11 interleaved runs)", on, cb * 1e3, cf * 1e3);
}

/* What `gopt rewrite` did, for its --json object. */
typedef struct rw_outcome {
  const char *cluster, *rules_path, *kept; /* kept: why the input was written ("" when not) */
  size_t nodes_before, nodes_after, cand_nodes;
  double t[2], cpu[2], ort[2], maxd;        /* measured (before, after): wall, CPU, ONNX Runtime */
  int verified, unchanged, structure_only;
} rw_outcome;

/* Prints the --json object (one line). */
static void print_json(const rw_args *a, const gopt_ruleset *rs, const gopt_rewrite_result *res, const rw_outcome *oc,
                       gopt_rewrite_costs *costs, const gopt_costdb *db) {
  json_t *o = json_object(), *ra = json_object();
  for (size_t i = 0; i < res->n_steps; i++) {
    const char *n = gopt_ruleset_rule_name(rs, (size_t)res->steps[i].rule);
    json_t *v = json_object_get(ra, n);
    json_object_set_new(ra, n, json_integer(v ? json_integer_value(v) + 1 : 1));
  }
  json_object_set_new(o, "model", json_string(a->model));
  json_object_set_new(o, "method", json_string(a->method ? a->method : "greedy"));
  json_object_set_new(o, "cluster", json_string(oc->cluster));
  json_object_set_new(o, "rules", json_string(oc->rules_path[0] ? oc->rules_path : "built-in"));
  json_object_set_new(o, "rules_applied", ra);
  json_object_set_new(o, "nodes_before", json_integer((json_int_t)oc->nodes_before));
  json_object_set_new(o, "nodes_after", json_integer((json_int_t)oc->nodes_after));
  json_object_set_new(o, "predicted_before_s", json_real(res->cost_before));
  json_object_set_new(o, "predicted_after_s", json_real(res->cost_after));
  json_object_set_new(o, "measured_before_s", oc->t[0] >= 0 ? json_real(oc->t[0]) : json_null());
  json_object_set_new(o, "measured_after_s", oc->t[1] >= 0 ? json_real(oc->t[1]) : json_null());
  json_object_set_new(o, "measured_cpu_before_s", oc->cpu[0] >= 0 ? json_real(oc->cpu[0]) : json_null());
  json_object_set_new(o, "measured_cpu_after_s", oc->cpu[1] >= 0 ? json_real(oc->cpu[1]) : json_null());
  json_object_set_new(o, "ort_measured_before_s", oc->ort[0] >= 0 ? json_real(oc->ort[0]) : json_null());
  json_object_set_new(o, "ort_measured_after_s", oc->ort[1] >= 0 ? json_real(oc->ort[1]) : json_null());
  json_object_set_new(o, "verified", json_boolean(oc->verified));
  json_object_set_new(o, "written", json_boolean(!oc->unchanged && !oc->kept[0]));
  json_object_set_new(o, "kept_input", json_boolean(oc->kept[0] != 0));
  if (oc->kept[0]) json_object_set_new(o, "kept_reason", json_string(oc->kept));
  json_object_set_new(o, "candidate_nodes_after", json_integer((json_int_t)oc->cand_nodes));
  json_object_set_new(o, "measured_on", json_string(a->measure_on ? a->measure_on : "exec"));
  json_object_set_new(o, "measured_reps", json_integer(MEASURE_REPS));
  if (costs) {
    size_t prof = 0, bad = 0;
    double ps_s = 0;
    gopt_rewrite_costs_stats(costs, &prof, &bad, &ps_s);
    json_object_set_new(o, "costdb", json_string(a->costdb));
    json_object_set_new(o, "costdb_entries", json_integer((json_int_t)gopt_costdb_size(db)));
    json_object_set_new(o, "costdb_profiled", json_integer((json_int_t)prof));
    json_object_set_new(o, "costdb_unmeasurable", json_integer((json_int_t)bad));
    json_object_set_new(o, "costdb_profile_seconds", json_real(ps_s));
  }
  /* nothing rewritten: the output is the input, verified trivially */
  json_object_set_new(o, "verified_with",
                      json_string(oc->unchanged ? "unchanged" : a->verify ? a->verify : "both"));
  json_object_set_new(o, "max_abs_diff", json_real(oc->maxd));
  json_object_set_new(o, "structure_only", json_boolean(oc->structure_only));
  if (oc->structure_only && oc->t[0] >= 0) json_object_set_new(o, "measured_weights", json_string("made-up"));
  json_object_set_new(o, "weights_flagged", json_boolean(oc->structure_only && (res->flags & GOPT_RW_WEIGHTS)));
  json_object_set_new(o, "search_seconds", json_real(res->search_seconds));
  json_object_set_new(o, "interrupted", json_boolean(res->interrupted));
  json_object_set_new(o, "dequeued", json_integer((json_int_t)res->dequeued));
  json_object_set_new(o, "generated", json_integer((json_int_t)res->generated));
  json_object_set_new(o, "rejected", json_integer((json_int_t)res->rejected));
  if (res->note[0]) json_object_set_new(o, "search_note", json_string(res->note));
  char *s = json_dumps(o, JSON_COMPACT);
  if (s) puts(s);
  free(s);
  json_decref(o);}

int cli_rewrite(int argc, char **argv) {
  rw_args a;
  memset(&a, 0, sizeof a);
  a.mo.default_batch = 1;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  rc = 1;
  gopt_error err = {0};
  gopt_cluster *c = NULL;
  gopt_ruleset *rs = NULL;
  gopt_graph *g = NULL, *full = NULL, *sg = NULL, *outg = NULL;
  gopt_rewrite_result res;
  memset(&res, 0, sizeof res);
  uint8_t *had = NULL;
  char rules_path[1200] = "";
  char kept[400] = "";
  uint64_t seed = (uint64_t)a.seed;
  gopt_costdb *db = NULL;
  gopt_rewrite_costs *costs = NULL;
  size_t cand_nodes = 0;
  if (gopt_cluster_parse(a.cluster ? a.cluster : "V100", &c, &err)) {
    fail(err.msg);
    goto done;
  }
  if (costs_open(&a, c, seed, &db, &costs)) goto done;
  if (a.rules) snprintf(rules_path, sizeof rules_path, "%s", a.rules);
  else cli_rewrite_find_rules(rules_path, sizeof rules_path);
  if (rules_path[0] ? gopt_ruleset_load(rules_path, &rs, &err) : !(rs = gopt_ruleset_builtin())) {
    fail(rules_path[0] ? err.msg : "out of memory");
    goto done;
  }
  const char *forced = getenv("GOPT_REWRITE_FORCE_RULE"); /* test hook: skip verifying one rule */
  if (forced)
    for (size_t i = 0; i < gopt_ruleset_count(rs); i++)
      if (!strcmp(gopt_ruleset_rule_name(rs, i), forced)) gopt_ruleset_force_enable(rs, i);
  if (!(g = cli_load_model(a.model, &a.mo))) goto done;
  /* which constants came with data: a structure-only model's made-up weights are not written */
  if (!(had = calloc(g->tensors.n + 1, 1)) || !(full = gopt_graph_clone(g)) || !(sg = gopt_graph_clone(g))) {
    fail("out of memory");
    goto done;
  }
  int structure_only = 0;
  for (size_t t = 0; t < g->tensors.n; t++) {
    if (!(g->tensors.a[t].flags & GOPT_T_CONST)) continue;
    had[t] = gopt_tensor_data(g, (int32_t)t) != NULL;
    if (!had[t]) structure_only = 1;
  }
  cli_rewrite_strip_weights(g, NULL); /* g is kept for its names only: one copy of the weights (in full) */
  int64_t made = gopt_rewrite_materialize(full, seed + 1, &err);
  if (made < 0) {
    fail(err.msg);
    goto done;
  }
  cli_rewrite_strip_weights(sg, NULL);
  cli_rewrite_progress_state ps = {cli_rewrite_progress_mode(), 0, 0};
  gopt_rewrite_opts ro = {a.method, c, a.alpha, a.budget, a.seconds, 0, seed, a.policy,
                          ps.mode ? cli_rewrite_progress : NULL, &ps, costs, a.samples};
  int eqsat = a.method && !strcmp(a.method, "eqsat");
  /* Every pattern rule the best result uses is verified again (numerically, with the executor)
   * before it is applied to the model; one that fails is disabled and the search runs again, so
   * a rule whose verification fails is never applied. */
  uint8_t *checked = calloc(gopt_ruleset_count(rs) + 1, 1);
  if (!checked) {
    fail("out of memory");
    goto done;
  }
  cli_rewrite_sigint(1); /* Ctrl-C: the best graph so far, verified and written as usual */
  for (;;) {
    gopt_rewrite_result_clear(&res);
    /* eqsat keeps one copy of the graph (its e-graph store), so it works on the weights */
    int src = gopt_rewrite_search(eqsat ? full : sg, rs, &ro, &res, &err);
    cli_rewrite_progress_end(&ps);
    if (src) {
      cli_rewrite_sigint(0);
      free(checked);
      fail(err.msg);
      goto done;
    }
    int again = 0;
    for (size_t i = 0; i < res.n_steps; i++) {
      size_t ri = (size_t)res.steps[i].rule;
      if (checked[ri] || (forced && !strcmp(gopt_ruleset_rule_name(rs, ri), forced))) continue;
      checked[ri] = 1;
      gopt_error ve = {0};
      if (gopt_rule_verify(rs, ri, seed + 11, &ve)) {
        fprintf(stderr, "gopt rewrite: warning: rule '%s' dropped, never applied: %s\n",
                gopt_ruleset_rule_name(rs, ri), ve.msg);
        gopt_ruleset_disable(rs, ri, ve.msg);
        again = 1;
      }
    }
    if (!again) break;
  }
  cli_rewrite_sigint(0);
  free(checked);
  /* the measured op times (the cached and the newly profiled ones) for the next run */
  if (db && gopt_costdb_save(db, a.costdb, &err)) {
    fail(err.msg);
    goto done;
  }
  if (res.interrupted)
    fprintf(stderr, "gopt rewrite: interrupted: verifying and writing the best graph found so far\n");
  if (apply_rule_hook(sg, rs, &res)) {
    fail("out of memory");
    goto done;
  }
  /* the best history replayed on the graph with weights (eqsat's result has them), then verified;
   * with no rewrite the output is the input (no second copy of the weights, nothing to compare) */
  int unchanged = eqsat ? res.input_kept : res.n_steps == 0;
  if (unchanged) {
    outg = full;
    full = NULL;
  } else if (eqsat ? !(outg = gopt_graph_clone(res.graph))
                   : gopt_rewrite_replay(full, rs, &res, 0, seed, &outg, &err)) {
    fail(eqsat ? "out of memory" : err.msg);
    goto done;
  }
  int verified = 0;
  gopt_error ve = {0};
  double maxd = 0;
  if (!unchanged && gopt_rewrite_compare(full, outg, seed + 2, 1e-3, 1e-4, &maxd, &ve)) {
    /* name the first step that breaks it (eqsat: the rewrites the extracted graph uses) */
    if (eqsat) {
      char used[600] = "";
      for (size_t i = 0; i < res.n_steps && strlen(used) < 400; i++)
        snprintf(used + strlen(used), sizeof used - strlen(used), "%s'%.60s' at '%.60s'", i ? ", " : "",
                 gopt_ruleset_rule_name(rs, (size_t)res.steps[i].rule), res.steps[i].where);
      if (snprintf(err.msg, sizeof err.msg, "verification failed: %.200s (eqsat used %.200s)", ve.msg, used) < 0)
        err.msg[0] = 0;
    } else if (gopt_rewrite_replay_check(full, rs, &res, seed + 2, &err) == 0) {
      snprintf(err.msg, sizeof err.msg, "verification failed: %.400s", ve.msg);
    }
    fail(err.msg);
    goto done;
  }
  int timed = !structure_only || a.measure;
  double ort_t[2] = {-1, -1};
  if (!unchanged && (!a.verify || strcmp(a.verify, "exec"))) {
    if (verify_ort(full, outg, seed + 3, timed ? (a.measure ? 3 : 1) : 0, ort_t, &err)) {
      gopt_error_prefix(&err, "verification with ONNX Runtime failed (%zu rewrites): ", res.n_steps);
      fail(err.msg);
      goto done;
    }
  }
  verified = 1;
  double cpu[2] = {-1, -1}, t[2] = {-1, -1};
  if (timed) {
    measure_pair(unchanged ? outg : full, unchanged ? NULL : outg, seed + 4, t, cpu);
    if (unchanged) {
      cpu[1] = cpu[0];
      t[1] = t[0];
    }
  }
  cand_nodes = gopt_graph_node_count(outg);
  if (a.measure && !unchanged) measure_guard(&a, t, cpu, ort_t, kept, sizeof kept);
  if (kept[0]) { /* the input is written, as it came */
    fprintf(stderr, "gopt rewrite: %s\n", kept);
    gopt_graph_free(outg);
    outg = full;
    full = NULL;
  }
  if (structure_only) {
    /* written as the input came: weights without data stay data-less */
    for (size_t t = 0; t < outg->tensors.n; t++) {
      int32_t ot = gopt_graph_find_tensor(g, gopt_graph_str(outg, outg->tensors.a[t].name));
      if (ot >= 0 && had[ot]) continue;
      gopt_tensor *x = &outg->tensors.a[t];
      if ((x->flags & GOPT_T_CONST) && x->dtype == GOPT_DT_FLOAT && gopt_tensor_data(outg, (int32_t)t)) {
        size_t nb = outg->consts.a[x->cdata].nbytes;
        gopt_tensor_set_const(outg, (int32_t)t, NULL, nb, NULL);
        outg->consts.a[x->cdata].nbytes = nb;
      }
    }
  }
  if (gopt_onnx_save(outg, a.out, &err)) {
    fail(err.msg);
    goto done;
  }
  if (a.json) {
    rw_outcome oc = {c->name, rules_path, kept, gopt_graph_node_count(g), gopt_graph_node_count(outg), cand_nodes,
                     {t[0], t[1]}, {cpu[0], cpu[1]}, {ort_t[0], ort_t[1]}, maxd, verified, unchanged, structure_only};
    print_json(&a, rs, &res, &oc, costs, db);
  } else {
    printf("%s: %zu rewrites, predicted %.4g ms -> %.4g ms on %s (%.1f%% less), %zu -> %zu nodes, "
           "search %.2f s%s, verified\n",
           a.out, res.n_steps, res.cost_before * 1e3, res.cost_after * 1e3, c->name,
           res.cost_before > 0 ? 100 * (1 - res.cost_after / res.cost_before) : 0.0,
           gopt_graph_node_count(g), gopt_graph_node_count(outg), res.search_seconds,
           res.interrupted ? " (interrupted: best so far)" : "");
    if (res.note[0]) printf("  %s\n", res.note);
    if (kept[0]) printf("  %s\n", kept);
    if (structure_only && (res.flags & GOPT_RW_WEIGHTS))
      printf("  note: the model has no weight data; weight-changing rewrites were applied to the structure only\n");
  }
  rc = 0;
done:
  gopt_rewrite_result_clear(&res);
  gopt_graph_free(g);
  gopt_graph_free(full);
  gopt_graph_free(sg);
  gopt_graph_free(outg);
  gopt_ruleset_free(rs);
  gopt_cluster_free(c);
  gopt_rewrite_costs_free(costs);
  gopt_costdb_free(db);
  free(had);
  return rc;
}
