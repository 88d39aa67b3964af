/* ir_internal.h: growable-array helpers shared by the IR's source files (internal). */
#ifndef GOPT_IR_INTERNAL_H
#define GOPT_IR_INTERNAL_H

#include <stdlib.h>

#include "gopt/graph.h"
#include "ir/strtab.h"

/* Ensures room for `extra` more elements in a GOPT_ARRAY; returns 0 or -1 when out of memory. */
static inline int gopt_arr_grow_(void **a, size_t *cap, size_t n, size_t extra, size_t elem) {
  if (n + extra <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < n + extra) c = c + c / 2 + 16;
  void *p = realloc(*a, c * elem);
  if (!p) return -1;
  *a = p;
  *cap = c;
  return 0;
}
#define GOPT_ARR_GROW(arr, extra) \
  gopt_arr_grow_((void **)&(arr).a, &(arr).cap, (arr).n, (extra), sizeof *(arr).a)
#define GOPT_ARR_PUSH(arr, v) \
  (GOPT_ARR_GROW(arr, 1) ? -1 : ((arr).a[(arr).n++] = (v), 0))
#define GOPT_ARR_FREE(arr) (free((arr).a), (arr).a = NULL, (arr).n = (arr).cap = 0)

/* Records tensor t under its name for lookup. */
int ir_graph_index_name(gopt_graph *g, uint32_t name, int32_t t);

/* Copies every attribute of node n to node m (sub-graphs cloned, list values shared). 0 or
 * GOPT_ENOMEM. */
int ir_node_copy_attrs(gopt_graph *g, int32_t n, int32_t m);
/* Renames tensor t (the name index follows). 0 or GOPT_ENOMEM. */
int ir_tensor_rename(gopt_graph *g, int32_t t, const char *name);
/* Hash of one attribute (name, kind, value; sub-graphs recursively). */
uint64_t ir_attr_hash(const gopt_graph *g, const gopt_attr *a);
/* Hash of a tensor's dtype and shape (symbols by name). */
uint64_t ir_tensor_shape_hash(const gopt_graph *g, const gopt_tensor *x);

#endif
