/* learn_localadv.h: what the local advantage files share (learn_dataset.c: the dataset in memory;
 * learn_localadv.c: model, labels, prioritised sampling, training, prediction). */
#ifndef GOPT_LEARN_LOCALADV_H
#define GOPT_LEARN_LOCALADV_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/localadv.h"
#include "learn/learn_internal.h"

/* One graph's records: record r is variable var[r] in configuration cfg + r * nvars, with the
 * costs cost[cost_off[r] .. cost_off[r] + card[var[r]]) of its choices 0, 1, ... */
typedef struct ladata_graph {
  char *model, *cluster;
  uint64_t hash;
  uint32_t nvars;
  uint8_t *card, *dflt;      /* [nvars] */
  size_t nrec, rcap;
  uint32_t *var;             /* [nrec] */
  uint8_t *cfg;              /* [nrec * nvars] */
  size_t *cost_off;          /* [nrec] */
  double *cost;
  size_t ncost, ccap;
} ladata_graph;

struct gopt_ladata {
  int task;
  size_t n, cap;
  ladata_graph *g;
};

/* Adds a record to graph gi (grows the arrays); returns 0 or GOPT_ENOMEM. */
int ladata_add_record(ladata_graph *g, uint32_t var, const uint8_t *cfg, const double *cost);
/* Adds an empty graph; returns its index, or -1 when out of memory. */
long ladata_add_graph(gopt_ladata *d, const char *model, const char *cluster, uint64_t hash,
                      uint32_t nvars, const uint8_t *card, const uint8_t *dflt);

/* One training label: record rec of graph g, choice k (k != the default), value t (transformed). */
typedef struct la_label {
  uint32_t g;
  uint32_t k;
  size_t rec;
  double t;
} la_label;

/* The labels of a dataset, per graph sigma-transformed, and the prioritised-sampling split: the
 * indices of labels in the top fraction of |t| of their graph (top[0..ntop)) and the rest. */
typedef struct la_labels {
  la_label *l;
  size_t n;
  size_t *top, ntop, *rest, nrest;
  double *sigma;             /* per graph */
} la_labels;

int la_labels_build(const gopt_ladata *d, double top_frac, la_labels *out, gopt_error *err);
void la_labels_free(la_labels *ls);
/* Draws one label index: with probability top_prob from the top set, else from the rest (each
 * uniformly; the other set when one is empty). */
size_t la_labels_draw(const la_labels *ls, double top_prob, gopt_nn_rng *rng);

#endif
