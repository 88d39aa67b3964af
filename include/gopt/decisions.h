/* gopt/decisions.h: per-node decisions (placement, fusion groups, schedule priorities, explicit
 * execution order) and their JSON files, keyed by node names (the ONNX node names).
 *
 * File format (docs/DECISIONS.md); every key is optional, a file may hold any subset:
 *   {"placement": {"conv1": 0, "relu1": 1, ...},          node -> device index
 *    "fusion":    [["conv1", "relu1"], ["add3", "mul4"]], groups run as one kernel
 *    "schedule":  {"conv1": 0.7, ...},                    node -> priority (higher runs first)
 *    "order":     ["conv1", "relu1", ...]}                a full execution order
 * Nodes left out take the default (device 0 / unfused / topological priority). */
#ifndef GOPT_DECISIONS_H
#define GOPT_DECISIONS_H

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_decisions {
  size_t n_nodes;        /* g->nodes.n when made; arrays below are indexed by node id */
  int32_t *placement;    /* device per node, -1 = default; NULL when absent */
  int32_t *group;        /* fusion group per node, -1 = unfused; NULL when absent */
  int32_t n_groups;
  double *priority;      /* schedule priority per node (NaN = default); NULL when absent */
  int32_t *order;        /* n_order node ids; NULL when absent */
  size_t n_order;
} gopt_decisions;

/* Empty decisions for g (all arrays NULL). */
void gopt_decisions_init(gopt_decisions *d, const gopt_graph *g);
void gopt_decisions_clear(gopt_decisions *d); /* frees arrays; accepts an empty struct */
/* Reads the keys present in a JSON file into d (keys absent stay as they were). An unknown node
 * name, a wrong type, a node in two fusion groups, or an order that is not a permutation of the
 * live nodes fails with one line naming the file, key and node. */
int gopt_decisions_load(gopt_decisions *d, const gopt_graph *g, const char *path, gopt_error *err);
/* Same as gopt_decisions_load from JSON text; label names the source in messages. */
int gopt_decisions_loads(gopt_decisions *d, const gopt_graph *g, const char *text,
                         const char *label, gopt_error *err);
/* The file's JSON text (malloc'd; the caller frees), NULL on out of memory or a node-count
 * mismatch. */
char *gopt_decisions_dumps(const gopt_decisions *d, const gopt_graph *g);
/* Writes the arrays that are set, atomically. */
int gopt_decisions_save(const gopt_decisions *d, const gopt_graph *g, const char *path,
                        gopt_error *err);
/* Node id by name among live nodes, -1 when none (linear scan; loaders build their own index). */
int32_t gopt_graph_find_node(const gopt_graph *g, const char *name);

#ifdef __cplusplus
}
#endif
#endif
