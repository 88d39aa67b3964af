/* zoo.c: the model zoo's registry and entry points: spec parsing ("name:knob=v,..."), knob
 * checking, and the two-pass build (count, then reserve and build). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo/zoo_internal.h"

static const zoo_entry *const models[] = {
    &zoo_inception_v3, &zoo_resnet50, &zoo_transformer, &zoo_transformer_xl, &zoo_bert,
    &zoo_gpt2,         &zoo_wavenet,  &zoo_gnmt,        &zoo_amoebanet,      &zoo_rnnlm,
    &zoo_resnext50,    &zoo_squeezenet, &zoo_vgg19,    &zoo_nasnet_a,       &zoo_nasrnn,
    &zoo_bert_tensat,
};
#define N_MODELS (sizeof models / sizeof models[0])

/* ONNX opset the zoo's graphs are written for (LayerNormalization needs 17; Split, Squeeze,
 * Unsqueeze and Slice take their sizes/axes as inputs as opset >= 13 defines). */
#define ZOO_OPSET 17

size_t gopt_zoo_count(void) { return N_MODELS; }

const gopt_zoo_model *gopt_zoo_get(size_t i) { return i < N_MODELS ? &models[i]->pub : NULL; }

const gopt_zoo_model *gopt_zoo_find(const char *name) {
  for (size_t i = 0; i < N_MODELS; i++)
    if (name && strcmp(models[i]->pub.name, name) == 0) return &models[i]->pub;
  return NULL;
}

int64_t zb_knob(const zb *b, const char *name) {
  for (size_t i = 0; i < b->model->n_knobs; i++)
    if (strcmp(b->model->knobs[i].name, name) == 0) return b->knob[i];
  return 0; /* a builder bug; every builder reads only its own knobs */
}

static void list_knobs(const gopt_zoo_model *m, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < m->n_knobs && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", m->knobs[i].name);
}

/* Parses spec into the model entry and its knob values (defaults for knobs not given). */
static int parse_spec(const char *spec, const zoo_entry **out, int64_t *vals, gopt_error *err) {
  char knobs[256];
  if (!spec || !*spec) return gopt_error_set(err, GOPT_EINVAL, "zoo: empty model spec");
  size_t nlen = strcspn(spec, ":");
  const zoo_entry *e = NULL;
  for (size_t i = 0; i < N_MODELS; i++)
    if (strlen(models[i]->pub.name) == nlen && strncmp(models[i]->pub.name, spec, nlen) == 0)
      e = models[i];
  if (!e) {
    char names[512];
    size_t n = 0;
    for (size_t i = 0; i < N_MODELS; i++)
      n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
                            models[i]->pub.name);
    return gopt_error_set(err, GOPT_EINVAL, "zoo: unknown model '%.*s'; models: %s", (int)nlen,
                          spec, names);
  }
  const gopt_zoo_model *m = &e->pub;
  list_knobs(m, knobs, sizeof knobs);
  for (size_t i = 0; i < m->n_knobs; i++) vals[i] = m->knobs[i].dflt;
  unsigned char seen[32] = {0};
  const char *p = spec + nlen;
  if (*p == ':') p++;
  else if (*p) return gopt_error_set(err, GOPT_EINVAL, "zoo: %s: bad spec '%s'", m->name, spec);
  while (*p || spec[nlen] == ':') {
    size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    if (!eq)
      return gopt_error_set(err, GOPT_EINVAL, "zoo: %s: expected knob=value, got '%.*s'; knobs: %s",
                            m->name, (int)len, p, knobs);
    size_t klen = (size_t)(eq - p);
    size_t k = 0;
    while (k < m->n_knobs && !(strlen(m->knobs[k].name) == klen &&
                               strncmp(m->knobs[k].name, p, klen) == 0))
      k++;
    if (k == m->n_knobs)
      return gopt_error_set(err, GOPT_EINVAL, "zoo: %s: unknown knob '%.*s'; knobs: %s", m->name,
                            (int)klen, p, knobs);
    const gopt_zoo_knob *kn = &m->knobs[k];
    if (seen[k])
      return gopt_error_set(err, GOPT_EINVAL, "zoo: %s: knob '%s' given twice", m->name, kn->name);
    seen[k] = 1;
    const char *vs = eq + 1;
    size_t vlen = len - klen - 1;
    char buf[32];
    char *end = NULL;
    long long v = 0;
    int ok = vlen > 0 && vlen < sizeof buf;
    if (ok) {
      memcpy(buf, vs, vlen);
      buf[vlen] = 0;
      ok = buf[0] >= '0' && buf[0] <= '9';
      errno = 0;
      v = strtoll(buf, &end, 10);
      ok = ok && *end == 0 && errno == 0;
    }
    if (!ok)
      return gopt_error_set(err, GOPT_EINVAL,
                            "zoo: %s: knob '%s' needs an integer in [%lld, %lld], got '%.*s'; "
                            "knobs: %s",
                            m->name, kn->name, (long long)kn->min, (long long)kn->max, (int)vlen,
                            vs, knobs);
    if (v < kn->min || v > kn->max)
      return gopt_error_set(err, GOPT_EINVAL,
                            "zoo: %s: knob '%s' must be in [%lld, %lld], got %lld; knobs: %s",
                            m->name, kn->name, (long long)kn->min, (long long)kn->max, v, knobs);
    vals[k] = v;
    p += len;
    if (*p == ',') {
      p++;
      if (!*p)
        return gopt_error_set(err, GOPT_EINVAL, "zoo: %s: trailing ',' in '%s'", m->name, spec);
    } else {
      break;
    }
  }
  *out = e;
  return GOPT_OK;
}

/* Runs the model's builder once; g NULL = counting mode. */
static int run_builder(const zoo_entry *e, const int64_t *vals, gopt_graph *g, size_t limit,
                       size_t *nodes, size_t *tensors, gopt_error *err) {
  zb b;
  memset(&b, 0, sizeof b);
  b.g = g;
  b.err = err;
  b.model = &e->pub;
  b.knob = vals;
  b.limit = limit;
  b.last = -1;
  e->build(&b);
  if (nodes) *nodes = b.nodes;
  if (tensors) *tensors = b.tensors;
  return b.rc;
}

int zoo_node_count_limit(const char *spec, size_t limit, size_t *nodes, gopt_error *err) {
  const zoo_entry *e;
  int64_t vals[32];
  int rc = parse_spec(spec, &e, vals, err);
  if (rc) return rc;
  return run_builder(e, vals, NULL, limit, nodes, NULL, err);
}

int gopt_zoo_node_count(const char *spec, size_t *nodes, gopt_error *err) {
  return zoo_node_count_limit(spec, GOPT_ZOO_MAX_NODES, nodes, err);
}

int gopt_zoo_build(const char *spec, gopt_graph **out, gopt_error *err) {
  const zoo_entry *e;
  int64_t vals[32];
  size_t nodes = 0, tensors = 0;
  *out = NULL;
  int rc = parse_spec(spec, &e, vals, err);
  if (rc) return rc;
  rc = run_builder(e, vals, NULL, GOPT_ZOO_MAX_NODES, &nodes, &tensors, err);
  if (rc) return rc;
  gopt_graph *g = gopt_graph_new(spec);
  if (!g) return gopt_error_set(err, GOPT_ENOMEM, "zoo: %s: out of memory", e->pub.name);
  if (gopt_graph_set_opset(g, "", ZOO_OPSET)) {
    gopt_graph_free(g);
    return gopt_error_set(err, GOPT_ENOMEM, "zoo: %s: out of memory", e->pub.name);
  }
  /* reserve(n) makes room for n nodes and 1.5 n tensors. */
  gopt_graph_reserve(g, nodes > tensors * 2 / 3 ? nodes : tensors * 2 / 3);
  rc = run_builder(e, vals, g, GOPT_ZOO_MAX_NODES, NULL, NULL, err);
  if (rc) {
    gopt_graph_free(g);
    return rc;
  }
  *out = g;
  return GOPT_OK;
}
