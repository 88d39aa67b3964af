/* gopt/zoo.h: the built-in model zoo: the research benchmark graphs (Inception-v3, ResNet,
 * Transformer, Transformer-XL, BERT, GPT-2, WaveNet, GNMT, AmoebaNet, RNN LM) built in memory as
 * ONNX-style op graphs with static shapes, weights as data-less parameter constants, and size
 * knobs that scale them from a few hundred to tens of millions of nodes. docs/ZOO.md lists the
 * models, their knobs and the settings that reach 80k and 1M nodes. */
#ifndef GOPT_ZOO_H
#define GOPT_ZOO_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/error.h"
#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest graph gopt_zoo_build makes; a spec that would exceed it fails with GOPT_ERANGE. */
#define GOPT_ZOO_MAX_NODES 50000000u

/* One size knob of a model: an integer in [min, max], default dflt. */
typedef struct gopt_zoo_knob {
  const char *name;
  int64_t dflt;
  int64_t min;
  int64_t max;
  const char *description;
} gopt_zoo_knob;

typedef struct gopt_zoo_model {
  const char *name;          /* "resnet50" */
  const char *description;   /* one line: what it builds and what it approximates */
  size_t n_knobs;
  const gopt_zoo_knob *knobs;
} gopt_zoo_model;

/* Number of models, and model i (NULL when i is out of range); the order is stable. */
size_t gopt_zoo_count(void);
const gopt_zoo_model *gopt_zoo_get(size_t i);
/* Model by name, NULL when unknown. */
const gopt_zoo_model *gopt_zoo_find(const char *name);

/* Builds the graph a spec names: "name" or "name:knob=v,knob=v" ("gnmt:layers=8,steps=100").
 * Knobs not given take their defaults. On success *out owns a new validated-shape graph (every
 * tensor has a static shape; graph inputs, outputs and parameters are marked) named after the
 * spec. Errors (one line naming the model and knob, and listing the valid knobs): unknown model
 * or knob, a value that is not an integer or is outside [min, max] (GOPT_EINVAL), knob values
 * that do not fit together (GOPT_EINVAL), a graph over GOPT_ZOO_MAX_NODES nodes or a tensor too
 * large to describe (GOPT_ERANGE), out of memory (GOPT_ENOMEM). *out is NULL on failure. */
int gopt_zoo_build(const char *spec, gopt_graph **out, gopt_error *err);

/* Exact node count gopt_zoo_build would produce for spec, computed without building (fast even
 * for huge settings). Same errors as gopt_zoo_build. */
int gopt_zoo_node_count(const char *spec, size_t *nodes, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
