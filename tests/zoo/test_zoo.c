/* test_zoo.c: the built-in model zoo. Every model builds with its defaults into a valid, acyclic,
 * fully shaped graph of known ONNX ops; node counts match gopt_zoo_node_count and the settings
 * docs/ZOO.md gives for ~80k and ~1M nodes; parameter counts of ResNet-50, BERT-base and GPT-2
 * match formulas written out from the architectures; ResNet-50's FLOPs match its conv/fc MACs;
 * shape inference (src/ops) re-derives every shape the builders set; bad specs fail with one
 * line naming the model and knob. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/ops.h"
#include "gopt/zoo.h"
#include "zoo/zoo_internal.h"

/* The settings docs/ZOO.md documents (keep the two in sync). */
static const struct {
  const char *spec;
  size_t nodes;
} documented[] = {
    {"inception_v3", 313},
    {"inception_v3:repeat=309", 80085},
    {"inception_v3:repeat=3861", 1000053},
    {"resnet50", 175},
    {"resnet50:depth=23999", 80005},
    {"resnet50:depth=299999", 1000005},
    {"transformer", 494},
    {"transformer:layers=988", 80036},
    {"transformer:layers=12346", 1000034},
    {"transformer_xl", 644},
    {"transformer_xl:segments=125", 80500},
    {"transformer_xl:segments=1553", 1000132},
    {"bert", 421},
    {"bert:layers=2353", 80015},
    {"bert:layers=29412", 1000021},
    {"gpt2", 414},
    {"gpt2:layers=2353", 80008},
    {"gpt2:layers=29412", 1000014},
    {"wavenet", 453},
    {"wavenet:blocks=889", 80013},
    {"wavenet:blocks=11112", 1000083},
    {"gnmt", 12907},
    {"gnmt:steps=311", 80245},
    {"gnmt:steps=3876", 1000015},
    {"amoebanet", 1118},
    {"amoebanet:cells=554", 80030},
    {"amoebanet:cells=6943", 1000046},
    {"rnnlm", 1053},
    {"rnnlm:steps=2667", 80013},
    {"rnnlm:steps=33334", 1000023},
    {"resnext50", 175},
    {"resnext50:tensat=1", 123},
    {"squeezenet", 65},
    {"vgg19", 43},
    {"nasnet_a", 420},
    {"nasrnn", 230},
    {"bert_tensat", 113},
    {"inception_v3:tensat=1", 217},
};

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Structural checks every zoo graph must pass. */
static void check_structure(const gopt_graph *g, const char *spec) {
  gopt_error err = {0};
  int rc = gopt_graph_validate(g, &err);
  CHECK_MSG(rc == 0, "%s: validate: %s", spec, err.msg);
  size_t nn = gopt_graph_node_count(g);
  int32_t *order = malloc((g->nodes.n + 1) * sizeof *order);
  CHECK_EQ_INT(gopt_graph_topo(g, order, &err), (long long)nn); /* acyclic */
  free(order);
  CHECK_MSG(g->inputs.n > 0 && g->outputs.n > 0, "%s: inputs/outputs not marked", spec);
  /* Node names unique. */
  uint32_t *names = malloc((nn + 1) * sizeof *names);
  for (size_t n = 0; n < nn; n++) names[n] = g->nodes.a[n].name;
  qsort(names, nn, sizeof *names, cmp_u32);
  size_t dup = 0;
  for (size_t n = 1; n < nn; n++) dup += names[n] == names[n - 1];
  free(names);
  CHECK_MSG(dup == 0, "%s: %zu duplicate node names", spec, dup);
  /* Every op is one gopt has shape/cost rules for. */
  size_t opaque = 0;
  for (size_t n = 0; n < nn; n++) opaque += g->nodes.a[n].op == GOPT_OP_OPAQUE;
  CHECK_MSG(opaque == 0, "%s: %zu ops unknown to the registry", spec, opaque);
  /* Every tensor has a static shape; parameters are data-less constants; every produced tensor
   * is used or a graph output; every graph input is used. */
  size_t noshape = 0, badparam = 0, dangling = 0, unused_in = 0;
  for (size_t t = 0; t < g->tensors.n; t++) {
    const gopt_tensor *x = &g->tensors.a[t];
    if (!gopt_tensor_is_static(g, (int32_t)t) || x->dtype == GOPT_DT_UNDEFINED) noshape++;
    if ((x->flags & GOPT_T_PARAM) &&
        (!(x->flags & GOPT_T_CONST) || gopt_tensor_data(g, (int32_t)t) != NULL))
      badparam++;
    if (x->producer >= 0 && x->first_use < 0 && !(x->flags & GOPT_T_OUTPUT)) dangling++;
    if ((x->flags & GOPT_T_INPUT) && x->first_use < 0) unused_in++;
  }
  CHECK_MSG(noshape == 0, "%s: %zu tensors without a static shape", spec, noshape);
  CHECK_MSG(badparam == 0, "%s: %zu bad parameter tensors", spec, badparam);
  CHECK_MSG(dangling == 0, "%s: %zu computed tensors never used", spec, dangling);
  CHECK_MSG(unused_in == 0, "%s: %zu unused graph inputs", spec, unused_in);
}

static int64_t param_count(const gopt_graph *g) {
  int64_t p = 0;
  for (size_t t = 0; t < g->tensors.n; t++)
    if (g->tensors.a[t].flags & GOPT_T_PARAM) p += gopt_tensor_numel(g, (int32_t)t);
  return p;
}

static gopt_graph *build(const char *spec) {
  gopt_error err = {0};
  gopt_graph *g = NULL;
  int rc = gopt_zoo_build(spec, &g, &err);
  CHECK_MSG(rc == 0 && g, "%s: %s", spec, err.msg);
  return g;
}

/* Shape cross-check: forget every computed shape and dtype, re-infer with src/ops, compare. */
static void check_shapes(const gopt_graph *g, const char *spec) {
  gopt_graph *c = gopt_graph_clone(g);
  CHECK(c != NULL);
  if (!c) return;
  for (size_t t = 0; t < c->tensors.n; t++) {
    gopt_tensor *x = &c->tensors.a[t];
    if (x->flags & (GOPT_T_INPUT | GOPT_T_CONST)) continue;
    gopt_tensor_set_shape(c, (int32_t)t, -1, NULL);
    c->tensors.a[t].dtype = GOPT_DT_UNDEFINED;
  }
  gopt_infer_opts opts = {0, 0};
  gopt_error err = {0};
  int rc = gopt_infer_shapes(c, &opts, &err);
  CHECK_MSG(rc == 0, "%s: gopt_infer_shapes: %s", spec, err.msg);
  size_t bad = 0;
  for (size_t t = 0; t < g->tensors.n && rc == 0; t++) {
    const gopt_tensor *a = &g->tensors.a[t], *b = &c->tensors.a[t];
    int same = a->dtype == b->dtype && a->rank == b->rank && !(b->flags & GOPT_T_NOSHAPE) &&
               memcmp(gopt_tensor_dims(g, (int32_t)t), gopt_tensor_dims(c, (int32_t)t),
                      a->rank * sizeof(int64_t)) == 0;
    if (!same && bad++ < 5) {
      char sa[128] = "", sb[128] = "";
      size_t ka = 0, kb = 0;
      for (int i = 0; i < a->rank; i++)
        ka += (size_t)snprintf(sa + ka, sizeof sa - ka, "%lld,",
                               (long long)gopt_tensor_dims(g, (int32_t)t)[i]);
      for (int i = 0; i < b->rank && !(b->flags & GOPT_T_NOSHAPE); i++)
        kb += (size_t)snprintf(sb + kb, sizeof sb - kb, "%lld,",
                               (long long)gopt_tensor_dims(c, (int32_t)t)[i]);
      fprintf(stderr, "%s: tensor '%s': builder %s[%s] vs inferred %s[%s]\n", spec,
              gopt_graph_str(g, a->name), gopt_dtype_name(a->dtype), sa,
              gopt_dtype_name(b->dtype), sb);
    }
  }
  CHECK_MSG(bad == 0, "%s: %zu tensors whose inferred shape differs", spec, bad);
  gopt_graph_free(c);
}

static void test_defaults(void) {
  CHECK_EQ_INT(gopt_zoo_count(), 16);
  CHECK(gopt_zoo_get(gopt_zoo_count()) == NULL);
  for (size_t i = 0; i < gopt_zoo_count(); i++) {
    const gopt_zoo_model *m = gopt_zoo_get(i);
    CHECK(m && m->name && m->description && m->n_knobs > 0);
    CHECK(gopt_zoo_find(m->name) == m);
    for (size_t k = 0; k < m->n_knobs; k++)
      CHECK_MSG(m->knobs[k].min <= m->knobs[k].dflt && m->knobs[k].dflt <= m->knobs[k].max,
                "%s.%s default out of range", m->name, m->knobs[k].name);
    gopt_graph *g = build(m->name);
    if (!g) continue;
    check_structure(g, m->name);
    size_t n = 0;
    gopt_error err = {0};
    CHECK(gopt_zoo_node_count(m->name, &n, &err) == 0);
    CHECK_EQ_INT(n, gopt_graph_node_count(g));
    CHECK(strcmp(gopt_graph_str(g, g->name), m->name) == 0);
    check_shapes(g, m->name);
    gopt_graph_free(g);
  }
  /* TASO/Tensat's forms of the models that also have a torchvision layout. */
  const char *tensat[] = {"resnext50:tensat=1", "squeezenet:tensat=1", "vgg19:tensat=1",
                          "inception_v3:tensat=1"};
  for (int i = 0; i < 4; i++) {
    gopt_graph *g = build(tensat[i]);
    if (!g) continue;
    check_structure(g, tensat[i]);
    check_shapes(g, tensat[i]);
    gopt_graph_free(g);
  }
}

/* Documented node counts (counting only: no graph is built, so 1M settings stay cheap). */
static void test_documented_counts(void) {
  for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
    size_t n = 0;
    gopt_error err = {0};
    int rc = gopt_zoo_node_count(documented[i].spec, &n, &err);
    CHECK_MSG(rc == 0, "%s: %s", documented[i].spec, err.msg);
    CHECK_MSG(n == documented[i].nodes, "%s: %zu nodes, docs say %zu", documented[i].spec, n,
              documented[i].nodes);
  }
  /* Two of the ~80k settings built for real. */
  const char *big[] = {"rnnlm:steps=2667", "bert:layers=2353"};
  for (int i = 0; i < 2; i++) {
    gopt_graph *g = build(big[i]);
    if (!g) continue;
    CHECK_MSG(gopt_graph_node_count(g) >= 80000, "%s: %zu nodes", big[i],
              gopt_graph_node_count(g));
    check_structure(g, big[i]);
    gopt_graph_free(g);
  }
}

/* ResNet-50 parameters (torchvision: 25,557,032 = conv weights + BN gamma/beta + fc; BN running
 * statistics are buffers, not parameters) from the architecture. */
static int64_t resnet50_params(void) {
  const int64_t blocks[4] = {3, 4, 6, 3};
  int64_t p = 3 * 64 * 7 * 7 + 2 * 64, cin = 64;
  for (int s = 0; s < 4; s++) {
    int64_t w = 64 << s, out = 4 * w;
    for (int64_t i = 0; i < blocks[s]; i++) {
      p += cin * w + 2 * w + w * w * 9 + 2 * w + w * out + 2 * out;
      if (i == 0) p += cin * out + 2 * out;
      cin = out;
    }
  }
  return p + 2048 * 1000 + 1000;
}

/* ResNet-50 multiply-accumulates of its convolutions and fc at batch 1, image 224. */
static double resnet50_macs(void) {
  const int64_t blocks[4] = {3, 4, 6, 3};
  double m = 112.0 * 112 * 64 * 3 * 49, cin = 64, hin = 56;
  for (int s = 0; s < 4; s++) {
    double w = 64 << s, out = 4 * w, h = 56 >> s;
    for (int64_t i = 0; i < blocks[s]; i++) {
      m += hin * hin * cin * w + h * h * w * w * 9 + h * h * w * out;
      if (i == 0) m += h * h * cin * out;
      cin = out;
      hin = h;
    }
  }
  return m + 2048.0 * 1000;
}

static void test_resnet50(void) {
  CHECK_EQ_INT(resnet50_params(), 25557032);
  gopt_graph *g = build("resnet50");
  if (!g) return;
  CHECK_EQ_INT(param_count(g), resnet50_params());
  gopt_graph_stats s;
  memset(&s, 0, sizeof s);
  gopt_graph_stats_compute(g, &s);
  CHECK_EQ_INT(s.trainable, 25557032);
  /* params also counts the BatchNorm running mean and variance (2 per BN channel): the stem's 64,
   * and per bottleneck block 2*width + 4*width, plus 4*width for each stage's downsample. */
  int64_t bn_channels = 64;
  const int64_t widths[4] = {64, 128, 256, 512}, blocks[4] = {3, 4, 6, 3};
  for (int st = 0; st < 4; st++) bn_channels += blocks[st] * 6 * widths[st] + 4 * widths[st];
  CHECK_EQ_INT(s.params, 25557032 + 2 * bn_channels);
  double macs = resnet50_macs();
  CHECK_NEAR(macs / 1e9, 4.1, 0.02 * 4.1);  /* published ~4.1 GMACs */
  CHECK_NEAR(s.flops / 1e9, 8.2, 0.02 * 8.2); /* ~8.2 GFLOPs (MAC = 2 FLOPs) */
  CHECK_NEAR(s.flops, 2 * macs, 0.02 * 2 * macs);
  gopt_graph_free(g);
  g = build("resnet50:depth=101,batch=2,image=128");
  if (g) {
    check_structure(g, "resnet101");
    CHECK_EQ_INT(param_count(g), 44549160); /* torchvision resnet101 */
    gopt_graph_free(g);
  }
}

static void test_bert_gpt2_params(void) {
  const int64_t V = 30522, P = 512, T = 2, H = 768, I = 3072, L = 12;
  int64_t emb = V * H + P * H + T * H + 2 * H;
  int64_t layer = 4 * (H * H + H)      /* query, key, value, attention output */
                  + 2 * H              /* attention LayerNorm */
                  + H * I + I + I * H + H /* feed-forward */
                  + 2 * H;             /* output LayerNorm */
  int64_t pooler = H * H + H;
  int64_t bert = emb + L * layer + pooler;
  CHECK_EQ_INT(bert, 109482240);
  gopt_graph *g = build("bert");
  if (g) {
    CHECK_EQ_INT(param_count(g), bert);
    gopt_graph_free(g);
  }
  /* GPT-2 small: wte + wpe, per layer ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj; ln_f; lm_head
   * tied to wte (counted once). */
  const int64_t gV = 50257, gP = 1024, d = 768;
  int64_t gpt2 = gV * d + gP * d +
                 12 * (2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) +
                       (4 * d * d + d)) +
                 2 * d;
  CHECK_EQ_INT(gpt2, 124439808);
  g = build("gpt2");
  if (g) {
    CHECK_EQ_INT(param_count(g), gpt2);
    gopt_graph_free(g);
  }
}

static void expect_error(const char *spec, int code, const char *const *needles) {
  gopt_error err = {0};
  gopt_graph *g = (gopt_graph *)&err; /* must be reset to NULL */
  int rc = gopt_zoo_build(spec, &g, &err);
  CHECK_MSG(rc == code, "%s: rc %d (%s), want %d", spec, rc, err.msg, code);
  CHECK(g == NULL);
  CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: multi-line error", spec);
  for (; *needles; needles++)
    CHECK_MSG(strstr(err.msg, *needles) != NULL, "%s: error '%s' lacks '%s'", spec, err.msg,
              *needles);
  size_t n = 0;
  CHECK(gopt_zoo_node_count(spec, &n, &err) == code);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bad_specs(void) {
  expect_error("nosuch", GOPT_EINVAL, NEEDLES("nosuch", "resnet50", "gnmt"));
  expect_error("", GOPT_EINVAL, NEEDLES("empty"));
  expect_error("resnet50:foo=1", GOPT_EINVAL, NEEDLES("resnet50", "foo", "batch", "depth"));
  expect_error("gnmt:steps=abc", GOPT_EINVAL, NEEDLES("gnmt", "steps", "abc", "layers"));
  expect_error("bert:layers=0", GOPT_EINVAL, NEEDLES("bert", "layers", "0"));
  expect_error("bert:layers=-3", GOPT_EINVAL, NEEDLES("bert", "layers", "-3"));
  expect_error("bert:layers=12x", GOPT_EINVAL, NEEDLES("bert", "layers", "12x"));
  expect_error("gnmt:steps=100000", GOPT_EINVAL, NEEDLES("gnmt", "steps", "65535"));
  expect_error("gnmt:steps", GOPT_EINVAL, NEEDLES("gnmt", "steps"));
  expect_error("resnet50:", GOPT_EINVAL, NEEDLES("resnet50"));
  expect_error("resnet50:batch=2,", GOPT_EINVAL, NEEDLES("resnet50"));
  expect_error("resnet50:batch=2,batch=3", GOPT_EINVAL, NEEDLES("resnet50", "batch", "twice"));
  expect_error("resnet50:depth=60", GOPT_EINVAL, NEEDLES("resnet50", "depth", "60"));
  expect_error("bert:hidden=770", GOPT_EINVAL, NEEDLES("bert", "hidden", "heads"));
  /* The node limit: the public one (50M) costs seconds of counting to reach, so it is checked
   * through the same code path with a small limit. */
  {
    gopt_error err = {0};
    size_t n = 0;
    int rc = zoo_node_count_limit("rnnlm:steps=1000", 20000, &n, &err);
    CHECK_EQ_INT(rc, GOPT_ERANGE);
    CHECK_MSG(strstr(err.msg, "rnnlm") && strstr(err.msg, "20000") && strstr(err.msg, "steps"),
              "limit error: %s", err.msg);
    CHECK(zoo_node_count_limit("rnnlm:steps=100", 20000, &n, &err) == 0 && n < 20000);
  }
  expect_error("gpt2:seq=1000000,batch=65536", GOPT_ERANGE, NEEDLES("gpt2", "elements", "seq"));
  /* A knob set explicitly to its default builds the same graph. */
  gopt_graph *a = build("gnmt:steps=5,layers=3"), *b = build("gnmt:layers=3,steps=5,attention=1");
  if (a && b) {
    CHECK_EQ_INT(gopt_graph_node_count(a), gopt_graph_node_count(b));
    CHECK(gopt_graph_hash(a) == gopt_graph_hash(b));
  }
  gopt_graph_free(a);
  gopt_graph_free(b);
  a = build("gnmt:steps=5,attention=0");
  if (a) {
    check_structure(a, "gnmt:attention=0");
    check_shapes(a, "gnmt:attention=0");
  }
  gopt_graph_free(a);
}

int main(void) {
  test_defaults();
  test_documented_counts();
  test_resnet50();
  test_bert_gpt2_params();
  test_bad_specs();
  return check_exit("test_zoo");
}
