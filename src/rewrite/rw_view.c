/* rw_view.c: views of the e-graph's store for the built-in rules of eqsat.
 *
 * Built-in rules are C matchers over IR graphs: in the store S each e-node reads one tensor per
 * child class (the one it was made with, or the class's constant), so a matcher that follows a
 * tensor to its producer (Concat of one Split's outputs, a unary op on every Split output, Conv
 * then BatchNorm, ...) sees one member of each class, never the others. A view is a structure copy
 * of S in which every live e-node reads, in each child class that has one, a live member of one op
 * kind: view (op, j) wires each input to the j-th such member of its class (the last when the
 * class has fewer), the other inputs as in S. Running the matchers over the views of every kind
 * present in a class with several members finds a pattern whose nodes read members of one kind
 * (all j up to a depth for classes with several of that kind). Rewiring an input to another member
 * of its class changes no e-node's children (classes), so a match found on a view is a match of
 * the e-graph; eqsat records the inputs that differ from S's wiring with the match and builds its
 * fragment from them. */
#include <string.h>

#include "gopt/ops.h"
#include "rewrite/rw_egraph.h"

/* The S tensor of the j-th live member of class c produced by an op of kind op (the last such
 * member when there are fewer than j + 1), -1 when none. */
static int32_t view_member(const rw_egraph *e, int32_t c, int op, int j) {
  int32_t got = -1;
  for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
    int32_t n = e->mnode[i];
    if (e->state[n] != EG_LIVE || e->s->nodes.a[n].op != op) continue;
    got = gopt_node_output(e->s, n, e->mk[i]);
    if (j-- == 0) break;
  }
  return got;
}

int rw_view_kinds(const rw_egraph *e, int *depth) {
  int any = 0;
  memset(depth, 0, GOPT_OP_COUNT * sizeof *depth);
  int per[GOPT_OP_COUNT];
  for (size_t c = 0; c < e->nc; c++) {
    if (e->mstart[c + 1] - e->mstart[c] < 2 || e->cleaf[c] >= 0) continue;
    memset(per, 0, sizeof per);
    for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
      int32_t n = e->mnode[i];
      int op = e->s->nodes.a[n].op;
      if (e->state[n] == EG_LIVE && op >= 0 && op < GOPT_OP_COUNT && ++per[op] > depth[op]) depth[op] = per[op];
    }
    any = 1;
  }
  return any;
}

int rw_view_wire(const rw_egraph *e, gopt_graph *v, int op, int j) {
  int differs = 0;
  const gopt_graph *s = e->s;
  for (size_t n = 0; n < s->nodes.n && n < e->ncap; n++) {
    if (e->state[n] != EG_LIVE) continue;
    for (int k = 0; k < s->nodes.a[n].n_in; k++) {
      int32_t t = gopt_node_input(s, (int32_t)n, k), c = t >= 0 ? rw_eg_tclass(e, t) : -1, want = t;
      if (c >= 0 && e->cleaf[c] < 0) {
        int32_t m = view_member(e, c, op, j);
        if (m >= 0 && s->tensors.a[m].producer != (int32_t)n) want = m; /* never its own output */
      }
      differs |= want != t;
      if (gopt_node_input(v, (int32_t)n, k) != want) gopt_node_set_input(v, (int32_t)n, k, want);
    }
  }
  return differs;
}
