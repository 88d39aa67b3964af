/* rw_extract.c: extraction of the eqsat rewrite method: picks one e-node per needed e-class of
 * the e-graph minimising the sum of the chosen e-nodes' simulated kernel times, by Tensat's ILP
 * (GLPK) with a greedy bottom-up extraction as the fallback, and converts the choice back to an
 * IR graph. */
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/sim.h"
#include "gopt/util.h"
#include "rewrite/rw_egraph.h"

void rw_extraction_clear(rw_extraction *x) {
  if (!x) return;
  free(x->choice);
  free(x->choice_k);
  memset(x, 0, sizeof *x);
}

/* Per S node: the simulator's kernel time on c (every S node, so shapes of all alternatives),
 * except what gopt_rewrite_cost (greedy's cost) leaves out: on one device a Split into contiguous
 * blocks is a view and costs nothing. Every cost is > 0 (1e-9 s added) so the greedy extraction's
 * choice is acyclic. What still differs from the simulated step: the step also overlaps kernels
 * (and, on several devices, transfers), which a sum of per-node times cannot express. */
static int ex_costs(const rw_egraph *e, const gopt_cluster *c, double *cost, gopt_error *err) {
  gopt_cluster *own = NULL;
  gopt_sim *s = NULL;
  int rc = 0;
  if (!c) {
    if ((rc = gopt_cluster_parse("V100", &own, err))) return rc;
    c = own;
  }
  /* measured op costs (greedy's rw_cost does the same): the executor's Split is timed, no view */
  gopt_sim_opts so = {GOPT_SIM_COSTS_ANALYTICAL, NULL, NULL, NULL};
  if (e->costs) rc = rw_costs_prepare(e->costs, e->s, c, &so, err);
  if (!rc && !(rc = gopt_sim_new(e->s, c, &so, &s, err)))
    for (size_t n = 0; n < e->s->nodes.n; n++)
      cost[n] = 1e-9 + (gopt_node_alive(e->s, (int32_t)n) &&
                                !(!so.costdb && c->n_devices == 1 && rw_split_is_view(e->s, (int32_t)n))
                            ? gopt_sim_node_time(s, (int32_t)n, 0)
                            : 0);
  gopt_sim_free(s);
  gopt_cluster_free(own);
  return rc;
}

static int usable(const rw_egraph *e, int32_t n) { return e->state[n] == EG_LIVE; }

/* Greedy: a class's best cost is its cheapest e-node's cost plus its child classes' best costs
 * (leaf classes cost 0), to a fixpoint; costs are positive, so the choice is acyclic. */
static void ex_greedy(const rw_egraph *e, const double *cost, rw_extraction *x) {
  double *best = malloc((e->nc + 1) * sizeof *best);
  if (!best) return;
  for (size_t c = 0; c < e->nc; c++) best[c] = e->cleaf[c] >= 0 ? 0 : INFINITY;
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t c = 0; c < e->nc; c++) {
      if (rw_eg_find(e, (int32_t)c) != (int32_t)c || e->cleaf[c] >= 0) continue;
      for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
        int32_t n = e->mnode[i];
        if (!usable(e, n)) continue;
        double v = cost[n];
        for (int k = 0; k < e->s->nodes.a[n].n_in && v < INFINITY; k++) {
          int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
          if (cc >= 0) v += best[cc];
        }
        if (v < best[c] * (1 - 1e-12)) {
          best[c] = v;
          x->choice[c] = n;
          x->choice_k[c] = e->mk[i];
          changed = 1;
        }
      }
    }
  }
  free(best);
}

/* Columns of the ILP: x_n for usable e-nodes of needed classes, t_c for classes. */
typedef struct ilp_rows {
  int *ind;
  double *val;
  int n, cap;
} ilp_rows;

/* Adds v to column col's coefficient in the row being built (GLPK refuses repeated columns:
 * an e-node in its own child class, or a self-loop's order row, sums to one coefficient). */
static int rows_push(ilp_rows *r, int col, double v) {
  for (int i = 1; i <= r->n; i++)
    if (r->ind[i] == col) {
      r->val[i] += v;
      return 0;
    }
  if (r->n + 2 > r->cap) {
    int nc = r->cap ? r->cap * 2 : 64;
    int *ni = realloc(r->ind, (size_t)nc * sizeof *ni);
    if (!ni) return -1;
    r->ind = ni;
    double *nv = realloc(r->val, (size_t)nc * sizeof *nv);
    if (!nv) return -1;
    r->val = nv;
    r->cap = nc;
  }
  r->n++;
  r->ind[r->n] = col;
  r->val[r->n] = v;
  return 0;
}

static void rows_emit(glp_prob *lp, ilp_rows *r, int type, double rhs) {
  int k = 0;
  for (int j = 1; j <= r->n; j++) /* zero coefficients dropped */
    if (r->val[j] != 0) {
      k++;
      r->ind[k] = r->ind[j];
      r->val[k] = r->val[j];
    }
  r->n = k;
  int i = glp_add_rows(lp, 1);
  glp_set_row_bnds(lp, i, type, rhs, rhs);
  glp_set_mat_row(lp, i, r->n, r->ind, r->val);
  r->n = 0;
}

/* Adds "sum of class cc's usable memberships >= x_n" (x_n = 0: the class alone is needed). */
static int ilp_cover(glp_prob *lp, const rw_egraph *e, const int *coly, int32_t cc, int xn, ilp_rows *rw) {
  for (int32_t i = e->mstart[cc]; i < e->mstart[cc + 1]; i++)
    if (coly[i] > 0 && rows_push(rw, coly[i], 1)) return -1;
  if (xn > 0 && rows_push(rw, xn, -1)) return -1;
  rows_emit(lp, rw, GLP_LO, xn > 0 ? 0 : 1);
  return 0;
}

/* GLPK's branch-and-cut callback: a stop request (Ctrl-C) or the deadline ends the ILP with its
 * best so far; branching points go through ilp_branch; at the first heuristic point the greedy
 * extraction is offered as the incumbent (start, columns 1..n; NULL: none), so a time-limited
 * ILP ends with a solution at least as good. */
typedef struct ilp_cb {
  const double *start;
  int offered;
  double deadline;      /* gopt_now() past which the search ends with its best so far */
  int late;             /* it did */
  double dth_k;         /* seconds per candidate and row of GLPK's Driebeck-Tomlin branching */
  double dth_t0;        /* when the one running started (0: none) */
  double dth_work;      /* ... and its candidates x rows */
} ilp_cb;

/* At a branching point: GLPK's default choice (Driebeck-Tomlin: a tableau row per fractional
 * candidate) is the better one for proving optimality, but it takes seconds on large e-graphs
 * (4 s at the root of VGG-19's 19,491 rows and 394 candidates) and GLPK checks no time limit
 * inside it. Its time is predicted from candidates x rows at the slowest rate seen (the first
 * guess 1e-6 s: twice that root's); when it would not end well before the deadline the last
 * fractional column is branched on instead (the rewrites' newest e-nodes come last). */
static void ilp_branch(glp_tree *tree, ilp_cb *c) {
  glp_prob *p = glp_ios_get_prob(tree);
  int nc = glp_get_num_cols(p), cand = 0, last = 0;
  for (int j = 1; j <= nc; j++)
    if (glp_ios_can_branch(tree, j)) cand++, last = j;
  double work = (double)cand * glp_get_num_rows(p);
  if (last && gopt_now() + 2 * c->dth_k * work > c->deadline) {
    glp_ios_branch_upon(tree, last, GLP_NO_BRNCH);
    return;
  }
  c->dth_t0 = gopt_now();
  c->dth_work = work;
}

static void ilp_stop_cb(glp_tree *tree, void *info) {
  ilp_cb *c = info;
  if (c->dth_t0 > 0) { /* the Driebeck-Tomlin branching just ended: its rate */
    double k = (gopt_now() - c->dth_t0) / (c->dth_work > 1 ? c->dth_work : 1);
    if (k > c->dth_k) c->dth_k = k;
    c->dth_t0 = 0;
  }
  if (rw_stop_requested()) glp_ios_terminate(tree);
  else if (gopt_now() > c->deadline && !c->late) { /* GLPK's own tm_lim is checked less often */
    c->late = 1;
    glp_ios_terminate(tree);
  } else if (glp_ios_reason(tree) == GLP_IBRANCH) {
    ilp_branch(tree, c);
  }
  if (c->start && !c->offered && glp_ios_reason(tree) == GLP_IHEUR) {
    c->offered = 1;
    glp_ios_heur_sol(tree, c->start);
  }
}

/* The greedy extraction g as ILP column values (x, y at 1 for the chosen e-nodes of the needed
 * classes, t at 0: only without order rows); NULL when out of memory. */
static double *ilp_start(const rw_egraph *e, const rw_extraction *g, const int *colx, const int *coly, int ncol) {
  double *v = calloc((size_t)ncol + 1, sizeof *v);
  uint8_t *need = calloc(e->nc + 1, 1);
  int32_t *stack = malloc((e->nc + 1) * sizeof *stack);
  size_t sp = 0;
  if (!v || !need || !stack) {
    free(v);
    v = NULL;
    goto done;
  }
  for (size_t i = 0; i < e->n_roots; i++) {
    int32_t r = rw_eg_find(e, e->roots[i]);
    if (!need[r]) need[r] = 1, stack[sp++] = r;
  }
  while (sp > 0) {
    int32_t c = stack[--sp], n = g->choice[c];
    if (e->cleaf[c] >= 0 || n < 0 || !colx[n]) continue;
    v[colx[n]] = 1;
    for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++)
      if (e->mnode[i] == n && e->mk[i] == g->choice_k[c] && coly[i]) v[coly[i]] = 1;
    for (int k = 0; k < e->s->nodes.a[n].n_in; k++) {
      int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
      if (cc >= 0 && !need[cc]) need[cc] = 1, stack[sp++] = cc;
    }
  }
done:
  free(need);
  free(stack);
  return v;
}

/* The ILP's columns: x_n per usable e-node (binary, its cost), y_i per membership i of a
 * multi-output e-node (binary, y_i <= x_n: the e-node is chosen for that class; a single-output
 * e-node's membership is x_n itself), t_c per non-leaf class in [0, 1]. Returns the count. */
static int ilp_columns(glp_prob *lp, const rw_egraph *e, const double *cost, int *colx, int *coly, int *colt,
                       ilp_rows *rw) {
  int ncol = 0;
  size_t nn = e->s->nodes.n, nm = (size_t)e->mstart[e->nc];
  for (size_t n = 0; n < nn; n++)
    if (n < e->ncap && usable(e, (int32_t)n)) colx[n] = ++ncol;
  for (size_t i = 0; i < nm; i++) {
    int32_t n = e->mnode[i];
    coly[i] = !colx[n] ? 0 : e->s->nodes.a[n].n_out == 1 ? colx[n] : ++ncol;
  }
  int nx = ncol;
  for (size_t c = 0; c < e->nc; c++)
    if (rw_eg_find(e, (int32_t)c) == (int32_t)c && e->cleaf[c] < 0) colt[c] = ++ncol;
  glp_add_cols(lp, ncol);
  for (int j = 1; j <= nx; j++) glp_set_col_kind(lp, j, GLP_BV);
  for (size_t n = 0; n < nn; n++)
    if (colx[n]) glp_set_obj_coef(lp, colx[n], cost[n] * 1e3); /* ms: better scaled */
  for (size_t i = 0; i < nm; i++)
    if (coly[i] && coly[i] != colx[e->mnode[i]]) {
      if (rows_push(rw, coly[i], 1) || rows_push(rw, colx[e->mnode[i]], -1)) return -1;
      rows_emit(lp, rw, GLP_UP, 0);
    }
  for (size_t c = 0; c < e->nc; c++)
    if (colt[c]) glp_set_col_bnds(lp, colt[c], GLP_DB, 0, 1);
  return ncol;
}

/* Tensat's ILP: min sum cost_n x_n subject to: every root class covered; every chosen e-node's
 * non-leaf child classes covered; with topo, t_c - t_child >= eps for each child of the e-node
 * chosen for class c (topological order: no cycles). The order binds only the class an e-node is
 * chosen for (y), not its other outputs: a Split chosen for one class may have another output in
 * a class that one of its inputs needs (computed by another e-node). Fills x when solved. */
static int ex_ilp(const rw_egraph *e, const double *cost, double seconds, int topo, const rw_extraction *greedy,
                  rw_extraction *x) {
  size_t nn = e->s->nodes.n, nm = (size_t)e->mstart[e->nc];
  int *colx = calloc(nn + 1, sizeof *colx), *colt = calloc(e->nc + 1, sizeof *colt), ret = -1;
  int *coly = calloc(nm + 1, sizeof *coly);
  double t_in = gopt_now(); /* building the rows counts against `seconds` */
  glp_prob *lp = glp_create_prob();
  ilp_rows rw = {0};
  int ncol;
  if (!colx || !colt || !coly || !lp || (ncol = ilp_columns(lp, e, cost, colx, coly, colt, &rw)) < 0) goto done;
  double eps = 1.0 / ((double)e->nc + 1), A = 2.0;
  for (size_t i = 0; i < e->n_roots; i++) {
    int32_t r = rw_eg_find(e, e->roots[i]);
    if (e->cleaf[r] < 0 && ilp_cover(lp, e, coly, r, 0, &rw)) goto done;
  }
  for (size_t n = 0; n < nn; n++) {
    if (!colx[n]) continue;
    const gopt_node *nd = &e->s->nodes.a[n];
    for (int k = 0; k < nd->n_in; k++) {
      int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, (int32_t)n, k));
      int dup = 0;
      for (int j = 0; j < k; j++) dup |= rw_eg_tclass(e, gopt_node_input(e->s, (int32_t)n, j)) == cc;
      if (cc < 0 || e->cleaf[cc] >= 0 || dup) continue;
      if (ilp_cover(lp, e, coly, cc, colx[n], &rw)) goto done;
    }
  }
  for (size_t c = 0; topo && c < e->nc; c++) {
    if (!colt[c]) continue;
    for (int32_t i = e->mstart[c]; i < e->mstart[c + 1]; i++) {
      int32_t n = e->mnode[i];
      if (!coly[i]) continue;
      for (int k = 0; k < e->s->nodes.a[n].n_in; k++) {
        int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
        if (cc < 0 || !colt[cc]) continue;
        if (rows_push(&rw, colt[c], 1) || rows_push(&rw, colt[cc], -1) || rows_push(&rw, coly[i], -A))
          goto done;
        rows_emit(lp, &rw, GLP_LO, eps - A);
      }
    }
  }
  glp_set_obj_dir(lp, GLP_MIN);
  /* the LP relaxation first, under the time limit (glp_intopt's own presolve does not heed it),
   * then branch and cut from its basis with what is left */
  double t0 = gopt_now(), lim = seconds - (t0 - t_in);
  glp_smcp sp;
  glp_init_smcp(&sp);
  sp.msg_lev = GLP_MSG_OFF;
  sp.presolve = GLP_OFF; /* GLPK's presolver heeds no time limit (0.5 s past it on BERT) */
  sp.tm_lim = lim * 1000 > INT_MAX ? INT_MAX : lim > 0.05 ? (int)(lim * 1000) : 50;
  int lr = glp_simplex(lp, &sp);
  if (lr || glp_get_status(lp) != GLP_OPT) {
    snprintf(x->how, sizeof x->how, "the ILP's LP relaxation was not solved%s",
             lr == GLP_ETMLIM ? " within its time limit" : "");
    goto done;
  }
  ilp_cb cb = {topo || !isfinite(greedy->objective) ? NULL : ilp_start(e, greedy, colx, coly, ncol), 0,
               t0 + lim, 0, 1e-6, 0, 0};
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.cb_func = ilp_stop_cb;
  parm.cb_info = &cb;
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_OFF;
  /* depth first: the search is time-limited and diving finds integer solutions soonest (on
   * NasNet-A the default best-bound order spent 9 s without bettering the greedy incumbent, 1.1%,
   * where depth first reached 18.8%) */
  parm.bt_tech = GLP_BT_DFS;
  double rest = lim - (gopt_now() - t0);
  parm.tm_lim = rest * 1000 > INT_MAX ? INT_MAX : rest > 0.05 ? (int)(rest * 1000) : 50;
  int r = glp_intopt(lp, &parm), st = glp_mip_status(lp);
  free((void *)cb.start);
  if (st != GLP_OPT && st != GLP_FEAS) {
    snprintf(x->how, sizeof x->how, "the ILP found no solution%s",
             r == GLP_ETMLIM || cb.late ? " within its time limit" : r == GLP_ESTOP ? " before the stop request" : "");
    goto done;
  }
  for (size_t c = 0; c < e->nc; c++) x->choice[c] = -1;
  for (size_t c = 0; c < e->nc; c++)
    for (int32_t i = e->mstart[c]; i < e->mstart[c + 1] && x->choice[c] < 0; i++)
      if (coly[i] && glp_mip_col_val(lp, coly[i]) > 0.5) {
        x->choice[c] = e->mnode[i];
        x->choice_k[c] = e->mk[i];
      }
  x->used_ilp = 1;
  snprintf(x->how, sizeof x->how, "ilp (%s, %d columns, %d rows%s)",
           st == GLP_OPT ? "optimal" : r == GLP_ESTOP && !cb.late ? "interrupted, best found" : "time limit, best found",
           ncol, glp_get_num_rows(lp), topo ? "" : ", no order constraints");
  ret = 0;
done:
  if (lp) glp_delete_prob(lp);
  free(colx);
  free(coly);
  free(colt);
  free(rw.ind);
  free(rw.val);
  return ret;
}

/* The sum of the chosen e-nodes' costs over the classes the roots need; *lazy (may be NULL)
 * receives the bytes of the lazily folded constants among them. */
static double ex_objective(const rw_egraph *e, const double *cost, const rw_extraction *x, double *lazy) {
  if (lazy) *lazy = 0;
  uint8_t *need = calloc(e->nc + 1, 1), *counted = calloc(e->s->nodes.n + 1, 1);
  int32_t *stack = malloc((e->nc + 1) * sizeof *stack);
  double sum = 0;
  size_t sp = 0;
  if (!need || !counted || !stack) goto done;
  for (size_t i = 0; i < e->n_roots; i++) {
    int32_t r = rw_eg_find(e, e->roots[i]);
    if (!need[r]) need[r] = 1, stack[sp++] = r;
  }
  while (sp > 0) {
    int32_t c = stack[--sp], n = x->choice[c], leaf = e->cleaf[c];
    if (leaf >= 0 && lazy && (size_t)leaf < e->lcap && e->tlazy[leaf] >= 0)
      *lazy += (double)e->s->consts.a[e->s->tensors.a[leaf].cdata].nbytes;
    if (leaf >= 0) continue;
    if (n < 0) {
      sum = INFINITY;
      break;
    }
    if (!counted[n]) sum += cost[n], counted[n] = 1;
    for (int k = 0; k < e->s->nodes.a[n].n_in; k++) {
      int32_t cc = rw_eg_tclass(e, gopt_node_input(e->s, n, k));
      if (cc >= 0 && !need[cc]) need[cc] = 1, stack[sp++] = cc;
    }
  }
done:
  free(need);
  free(counted);
  free(stack);
  return sum;
}

int rw_extract(const rw_egraph *e, const gopt_cluster *c, int mode, double ilp_seconds, double lazy_s_per_byte,
               rw_extraction *x, gopt_error *err) {
  memset(x, 0, sizeof *x);
  rw_extraction g = {0};
  double t_in = gopt_now(); /* costing and the greedy extraction count against ilp_seconds */
  double *cost = malloc((e->s->nodes.n + 1) * sizeof *cost);
  x->choice = malloc((e->nc + 1) * sizeof *x->choice);
  x->choice_k = calloc(e->nc + 1, 1);
  g.choice = malloc((e->nc + 1) * sizeof *g.choice);
  g.choice_k = calloc(e->nc + 1, 1);
  int rc = !cost || !x->choice || !x->choice_k || !g.choice || !g.choice_k
               ? gopt_error_set(err, GOPT_ENOMEM, "out of memory")
               : ex_costs(e, c, cost, err);
  if (rc) goto done;
  for (size_t n = 0; n < e->n_orig; n++)
    if (gopt_node_alive(e->s, (int32_t)n)) g.input_objective += cost[n];
  for (size_t k = 0; k < e->nc; k++) g.choice[k] = -1;
  ex_greedy(e, cost, &g);
  g.objective = ex_objective(e, cost, &g, &g.lazy_bytes);
  snprintf(g.how, sizeof g.how, "greedy (ILP not asked for)");
  double ilp_left = ilp_seconds - (gopt_now() - t_in) - lazy_s_per_byte * g.lazy_bytes;
  if ((mode & RW_X_ILP) && !ex_ilp(e, cost, ilp_left > 0.1 ? ilp_left : 0.1, mode & RW_X_TOPO, &g, x)) {
    x->objective = ex_objective(e, cost, x, &x->lazy_bytes);
    x->input_objective = g.input_objective;
    if (!(x->objective <= g.objective * (1 + 1e-9))) {
      /* a time-limited ILP's best can be worse than greedy's choice: keep the better one */
      snprintf(g.how, sizeof g.how, "greedy (better than the ILP's %.40s)", x->how);
      rw_extraction_clear(x);
      *x = g;
      memset(&g, 0, sizeof g);
    }
  } else {
    if (mode & RW_X_ILP) snprintf(g.how, sizeof g.how, "greedy (%.80s)", x->how);
    rw_extraction_clear(x);
    *x = g;
    memset(&g, 0, sizeof g);
  }
done:
  if (rc) rw_extraction_clear(x);
  rw_extraction_clear(&g);
  free(cost);
  return rc;
}

/* ---- back to IR ------------------------------------------------------------------------------ */

/* The tensor of class c in the extraction, wiring its chosen node's inputs first. */
static int32_t to_tensor(const rw_egraph *e, const rw_extraction *x, gopt_graph *g, int32_t c,
                         int32_t *tens, int depth) {
  if (tens[c] != -1) return tens[c];
  if (e->cleaf[c] >= 0) return tens[c] = e->cleaf[c];
  int32_t n = x->choice[c];
  if (n < 0 || depth > 100000) return -2;
  tens[c] = -2; /* in progress: a cycle reads -2 */
  for (int k = 0; k < g->nodes.a[n].n_in; k++) {
    int32_t t = gopt_node_input(g, n, k);
    if (t < 0) continue;
    int32_t cc = rw_eg_tclass(e, t), nt = to_tensor(e, x, g, cc, tens, depth + 1);
    if (nt < 0) return -2;
    if (nt != t && gopt_node_set_input(g, n, k, nt)) return -2;
  }
  return tens[c] = gopt_node_output(g, n, x->choice_k[c]);
}

int rw_eg_to_graph(const rw_egraph *e, const rw_extraction *x, gopt_graph **out, gopt_error *err) {
  *out = NULL;
  gopt_graph *g = gopt_graph_clone_lean(e->s, 0); /* bytes only for what is used: rw_eg_fill_data */
  int32_t *tens = malloc((e->nc + 1) * sizeof *tens);
  int rc = 0;
  if (!g || !tens) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (size_t c = 0; c < e->nc; c++) tens[c] = -1;
  for (size_t i = 0; i < g->outputs.n && !rc; i++) {
    int32_t o = g->outputs.a[i], t = to_tensor(e, x, g, rw_eg_tclass(e, o), tens, 0);
    if (t < 0) rc = gopt_error_set(err, GOPT_EGRAPH, "extraction: output %zu has no acyclic choice", i);
    else if (t != o) rc = rw_replace(g, o, t, err);
  }
  if (!rc) {
    rw_dce(g);
    rc = rw_eg_fill_data(e, g, err);
  }
  if (!rc) rc = rw_finish(g, err);
  if (!rc) rc = gopt_graph_compact(g, NULL);
done:
  free(tens);
  if (rc) gopt_graph_free(g);
  else *out = g;
  return rc;
}
