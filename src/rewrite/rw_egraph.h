/* rw_egraph.h: the e-graph of the eqsat rewrite method (Tensat), internal to src/rewrite.
 *
 * The e-graph keeps every e-node as a node of one IR "store" graph S: an e-node is S node s
 * (its op type and attributes live in S); its children are the e-classes of the tensors s reads;
 * output k of s is a member of the e-class of S's output tensor k. Leaves (graph inputs and
 * constants) are S tensors without producer, each its own e-class. S only grows: new e-nodes
 * read tensors that already exist, so S stays a valid acyclic IR graph whose tensors all have
 * shapes (the simulator can cost its nodes). E-classes are a union-find over class ids; the
 * hash-cons table maps (type, attributes, child classes) to the canonical e-node, and rebuilding
 * restores congruence after unions. Cycle filtering (Tensat's "efficient" variant) removes
 * e-nodes through which a class would reach itself. */
#ifndef GOPT_RW_EGRAPH_H
#define GOPT_RW_EGRAPH_H

#include "rewrite/rewrite_internal.h"

/* State of an S node. */
enum { EG_NONE = 0, EG_LIVE, EG_DUP, EG_FILTERED };

/* Bytes: larger constants are left out of S (read from the input graph) and out of the fragments
 * that rewrites are applied to. */
#define RW_EG_LEAN 65536

/* A lazily folded constant's recipe: the source fragment of the application that derived it (the
 * weights it computes from left out) and the match in it. rw_eg_to_graph runs the rewrite again
 * with those weights when the extracted graph uses such a constant: saturation never computes
 * (and S never holds) folded weights that the result may not use. */
typedef struct rw_lazy {
  gopt_graph *l;                /* the fragment (owned) */
  gopt_rewrite_match m;         /* the match in l */
  int32_t *in_l, *in_s;         /* l's constants left out, and the S tensors they stand for */
  int n_in;
} rw_lazy;

typedef struct rw_egraph {
  gopt_graph *s;        /* the store (owned) */
  int32_t *tcls;        /* S tensor -> class (-1: none yet) */
  int32_t *tapp;        /* S tensor -> the application that made it (-1: the input graph) */
  size_t tcap;
  int32_t *parent;      /* union-find over classes */
  int32_t *crep;        /* a tensor of the class (shapes; wiring of new e-nodes) */
  int32_t *cleaf;       /* a leaf tensor (input or constant) of the class, -1 when none */
  size_t nc, ccap;
  uint8_t *state;       /* per S node: EG_* */
  int32_t *napp;        /* per S node: the application that made it (-1: the input graph) */
  size_t ncap;
  int32_t *ht;          /* hash-cons table of S node ids (-1 empty) */
  size_t htcap;
  int32_t *mstart, *mnode; /* after rebuild: members of class c: mnode[mstart[c] .. mstart[c+1]) */
  uint8_t *mk;          /* ... and the output index of each member */
  size_t live, filtered;
  size_t unions;        /* merges so far (saturation check) */
  size_t n_orig;        /* S nodes 0 .. n_orig-1 are the input graph's */
  int32_t *roots;       /* classes of the graph outputs */
  size_t n_roots;
  gopt_rewrite_costs *costs; /* measured op costs for the extraction (borrowed; NULL: analytical) */
  const gopt_graph *src; /* the input graph (borrowed; must outlive e): S tensor t < n_src_t holds
                            no bytes over RW_EG_LEAN, they are src's tensor t's */
  size_t n_src_t;
  const gopt_ruleset *rs; /* the rules the recipes re-run (borrowed) */
  rw_lazy *lazy;        /* recipes of the lazily folded constants */
  size_t n_lazy, cap_lazy;
  int32_t *tlazy;       /* per S tensor: its recipe (-1: none) ... */
  int32_t *tlazy_h;     /* ... and the tensor of the recipe's rewritten fragment that it is */
  size_t lcap;
} rw_egraph;

/* Seeds the e-graph from g (shapes inferred): S = a copy of g without its constants' bytes over
 * RW_EG_LEAN, which stay g's (g must outlive e). */
int rw_eg_init(rw_egraph *e, const gopt_graph *g, gopt_error *err);
void rw_eg_clear(rw_egraph *e); /* accepts a zeroed or cleared e-graph */
int32_t rw_eg_find(const rw_egraph *e, int32_t c);
/* Class of S tensor t (canonical), -1 when none. */
int32_t rw_eg_tclass(const rw_egraph *e, int32_t t);
/* Merges two classes; returns 1 when they were different, 0 when equal, <0 out of memory. */
int rw_eg_union(rw_egraph *e, int32_t a, int32_t b);
/* The bytes of S tensor t: S's own, the input graph's, or NULL (a lazily folded constant, or a
 * constant without bytes). */
const void *rw_eg_data(const rw_egraph *e, int32_t t);
/* Takes recipe l/m (l owned from now on, also on failure) for the constants that importing its
 * rewrite h made without bytes: S tensors tm[t] >= first_t of h's constants t (tm: h tensor ->
 * S tensor, -1 none). in_l/in_s: l's constants left out and their S tensors. 0 or GOPT_ENOMEM. */
int rw_eg_add_lazy(rw_egraph *e, const gopt_ruleset *rs, gopt_graph *l, const gopt_rewrite_match *m,
                   const int32_t *in_l, const int32_t *in_s, int n_in, const gopt_graph *h, const int32_t *tm,
                   size_t first_t, gopt_error *err);
/* Gives the constants of g (a copy of S, same tensor ids, nodes not needed removed) that live
 * nodes read or that are outputs their bytes: a copy of S's or the input graph's, or those of
 * lazily folded constants, computed by their recipes (recursively). Constants without bytes
 * anywhere stay so. */
int rw_eg_fill_data(const rw_egraph *e, gopt_graph *g, gopt_error *err);

/* Copies graph h's live nodes into S (h's tensors map_h[i] (-1: none) stand for S tensors
 * map_t[i]; other constants become new leaves; every non-constant graph input of h must be mapped,
 * else GOPT_EGRAPH before anything is imported), hash-conses them and merges, for each i < n_out,
 * the class of h's output i (by position: names may have been swapped by rw_replace) with class
 * out_cls[i]; out_t (may be NULL) receives the S tensor of h's output 0. app tags the new e-nodes
 * and leaves; tm (may be NULL; h->tensors.n entries) receives the S tensor of each h tensor (-1
 * none). Returns the number of new e-nodes or < 0 (GOPT_EGRAPH: h cannot be imported). */
int rw_eg_import(rw_egraph *e, const gopt_graph *h, const int32_t *map_h, const int32_t *map_t, int n_map,
                 const int32_t *out_cls, int n_out, int32_t app, int32_t *out_t, int32_t *tm, gopt_error *err);
/* Restores congruence (merging classes of e-nodes that became equal) and rebuilds the member
 * lists; returns the number of merges or < 0. */
int rw_eg_rebuild(rw_egraph *e, gopt_error *err);
/* Rewires S nodes that read a computed tensor whose class also holds a constant (a folded
 * result) to read the constant, so the built-in rules, which match the store graph, see it
 * (constant folding chains, weights computed by earlier rewrites). Classes are unchanged. */
void rw_eg_wire_constants(rw_egraph *e);
/* Tensat's efficient cycle filtering: a DFS from the roots marks EG_FILTERED every e-node with a
 * child class on the DFS stack, so the remaining e-graph is acyclic. Returns the number newly
 * filtered. Call after rw_eg_rebuild (uses the member lists). */
size_t rw_eg_filter_cycles(rw_egraph *e);

/* ---- views of the store for the built-in rules (rw_view.c) ------------------------------------ */
/* depth[op] (GOPT_OP_COUNT entries) = the most live members of kind op in one class without a
 * leaf that has several members; returns 0 when no such class exists (no view differs from S).
 * Call after rw_eg_rebuild (uses the member lists). */
int rw_view_kinds(const rw_egraph *e, int *depth);
/* Wires v, a structure copy of S (same node and tensor ids, possibly wired for another view), as
 * view (op, j): each input of a live e-node whose class has no leaf and a live member of kind op
 * (not the e-node itself) reads the j-th such member (the last when fewer); every other input
 * reads what it reads in S. Returns 1 when the view differs from S. */
int rw_view_wire(const rw_egraph *e, gopt_graph *v, int op, int j);

/* ---- extraction (rw_extract.c) ----------------------------------------------------------------- */
typedef struct rw_extraction {
  int32_t *choice;      /* per class: chosen S node (-1: its leaf, or not needed) */
  uint8_t *choice_k;    /* ... output index of the chosen node */
  int used_ilp;         /* 1 the ILP's solution, 0 the greedy fallback */
  char how[96];         /* "ilp (optimal)", "ilp (time limit, best found)", "greedy (...)" */
  double objective;     /* sum of the chosen e-nodes' simulated kernel times */
  double input_objective; /* the same sum over the input graph's nodes */
  double lazy_bytes;    /* bytes of the lazily folded constants the choice reads (rw_lazy.c) */
} rw_extraction;

/* Extraction modes. */
enum { RW_X_ILP = 1, RW_X_TOPO = 2 };
/* Extracts one e-node per needed class minimising the sum of the e-nodes' kernel times on c
 * (the simulator's per-node time): greedily bottom-up, and with RW_X_ILP by ILP with GLPK within
 * ilp_seconds of the call (costing and building included; the LP relaxation first, then branch
 * and cut with the greedy choice as the incumbent) less lazy_s_per_byte times the bytes of the
 * lazily folded constants the greedy choice uses (time kept for computing them) (Tensat's
 * formulation: binary e-node variables, each chosen e-node's child classes covered; with
 * RW_X_TOPO also topological-order variables that forbid cycles). The ILP's solution is used
 * unless it is missing (time limit) or worse than greedy's (x->how says). */
int rw_extract(const rw_egraph *e, const gopt_cluster *c, int mode, double ilp_seconds, double lazy_s_per_byte,
               rw_extraction *x, gopt_error *err);
void rw_extraction_clear(rw_extraction *x); /* accepts NULL */
/* Builds the IR graph of an extraction: a copy of S whose chosen nodes are rewired to the chosen
 * tensors of their child classes, graph outputs taken from the root classes, the rest removed,
 * shapes inferred and compacted. */
int rw_eg_to_graph(const rw_egraph *e, const rw_extraction *x, gopt_graph **out, gopt_error *err);

/* ---- the method (rw_eqsat.c) ----------------------------------------------------------------- */
/* The eqsat entry of the search method table (gopt_rewrite_search). */
int rw_search_eqsat(const gopt_graph *g, const gopt_ruleset *rs, const gopt_rewrite_opts *o,
                    gopt_rewrite_result *r, gopt_error *err);
/* Equality saturation of e with the enabled rules of rs until saturation, the iteration limit,
 * node_limit live e-nodes or `seconds`; stop (n bytes, may be NULL) receives why it stopped. */
int rw_eq_saturate(rw_egraph *e, const gopt_ruleset *rs, size_t node_limit, double seconds, char *stop,
                   size_t n, gopt_error *err);

#endif
