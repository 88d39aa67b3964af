/* search_ilp.c: exact methods by mixed-integer linear programming with GLPK ("ilp").
 *
 * Placement (task placement): x[v][d] binary (node v on device d), start times s[v], makespan C,
 * order bits o[u][v] for pairs of nodes neither of which reaches the other. Constraints: one
 * device per node; an edge u -> v starts v after u ends plus, when they are on different
 * devices, the transfer time of the tensors u sends v (sum over them of B / bw + latency, with
 * the fastest link's bandwidth and latency: a lower bound of the simulator's FIFO link queues);
 * two nodes on one device do not overlap (big-M disjunction on o); per-device memory: the
 * resident bytes (weights and graph inputs read by the device's nodes, as the simulator counts
 * them) plus the working set of any one node placed there (its distinct input and output
 * activations, all live while it runs) within the capacity. Every simulated schedule satisfies
 * these constraints, so for a fixed placement the ILP's makespan is a lower bound of the
 * simulator's step time. The search solves the ILP with the objective cut off below the best
 * simulated objective so far, simulates the placement it returns, excludes that placement with
 * a no-good cut and repeats; when the ILP has no solution left, no memory-feasible placement can
 * beat the best one simulated, which is then optimal (within a relative 1e-7) for the simulator
 * itself, link contention and the list scheduler's order included.
 *
 * Peak memory on one device (task memory, one device): a time-indexed model, x[v][t] = node v
 * runs in slot t (one node per slot, precedence by prefix sums), live[a][t] >= started(producer
 * by t) - finished(consumer c before t) for each consumer c (graph outputs: >= started; unread
 * outputs: >= runs in t), peak >= resident + sum of live bytes per slot; minimise the peak. This
 * is the simulator's one-device memory model exactly; the order becomes priorities. */
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/sim.h"
#include "search/search_internal.h"

#define ILP_MAX_NODES 30
#define ILP_MEM_MAX_NODES 20
#define ILP_REL_TOL 1e-7

int search_ilp_applicable(const gopt_env *e, const char **why) {
  int task = gopt_env_task(e);
  size_t n = gopt_graph_node_count(gopt_env_graph(e));
  if (task == GOPT_TASK_PLACEMENT) {
    if ((long)n > search_env_knob("GOPT_SEARCH_ILP_MAX_NODES", ILP_MAX_NODES)) {
      *why = "graph too large for the placement ILP (more nodes than GOPT_SEARCH_ILP_MAX_NODES, "
             "default 30)";
      return 0;
    }
    return 1;
  }
  if (task == GOPT_TASK_MEMORY) {
    if (gopt_env_cluster(e)->n_devices != 1) {
      *why = "the peak-memory ILP schedules one device (the memory task on several devices also "
             "chooses placement)";
      return 0;
    }
    if ((long)n > search_env_knob("GOPT_SEARCH_ILP_MEM_MAX_NODES", ILP_MEM_MAX_NODES)) {
      *why = "graph too large for the peak-memory ILP (more nodes than "
             "GOPT_SEARCH_ILP_MEM_MAX_NODES, default 20)";
      return 0;
    }
    return 1;
  }
  *why = "the ILP models placement (task placement) and one-device peak-memory scheduling "
         "(task memory) only";
  return 0;
}

/* ---- row builder (GLPK arrays are 1-based; duplicate columns are merged) -------------------- */
typedef struct rowb {
  int n, cap;
  int *ind;
  double *val;
} rowb;

static int rb_add(rowb *r, int col, double v) {
  if (v == 0) return 0;
  for (int i = 1; i <= r->n; i++)
    if (r->ind[i] == col) {
      r->val[i] += v;
      return 0;
    }
  if (r->n + 1 >= r->cap) {
    int nc = r->cap ? 2 * r->cap : 64;
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

/* Adds the row sum(val * col) {>=, <=, =} rhs (type GLP_LO / GLP_UP / GLP_FX) and clears r. */
static void rb_emit(glp_prob *lp, rowb *r, int type, double rhs) {
  int i = glp_add_rows(lp, 1);
  glp_set_row_bnds(lp, i, type, rhs, rhs);
  /* drop coefficients merged to zero */
  int k = 0;
  for (int j = 1; j <= r->n; j++)
    if (r->val[j] != 0) {
      k++;
      r->ind[k] = r->ind[j];
      r->val[k] = r->val[j];
    }
  glp_set_mat_row(lp, i, k, r->ind, r->val);
  r->n = 0;
}

typedef struct ilp_cb {
  search_ctx *c;
} ilp_cb;

static void ilp_callback(glp_tree *T, void *info) {
  ilp_cb *cb = info;
  const gopt_search_opts *o = cb->c->o;
  if (search_stop_requested() || (o->budget_seconds > 0 && search_elapsed(cb->c) >= o->budget_seconds))
    glp_ios_terminate(T);
}

/* Solves lp; returns the MIP status (GLP_OPT, GLP_FEAS, GLP_NOFEAS, GLP_UNDEF) and sets
 * *complete when the solver finished (not stopped by time or the stop flag). */
static int solve(search_ctx *c, glp_prob *lp, int *complete) {
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  parm.mip_gap = 0;
  /* pseudocost branching and best-projection backtracking: measured several times faster than
   * GLPK's defaults on the placement model (docs/SEARCH.md) */
  parm.br_tech = GLP_BR_PCH;
  parm.bt_tech = GLP_BT_BPH;
  ilp_cb cb = {c};
  parm.cb_func = ilp_callback;
  parm.cb_info = &cb;
  if (c->o->budget_seconds > 0) {
    double left = c->o->budget_seconds - search_elapsed(c);
    parm.tm_lim = left <= 0 ? 1 : left * 1000 > INT_MAX ? INT_MAX : (int)(left * 1000) + 1;
  }
  int ret = glp_intopt(lp, &parm);
  *complete = ret == 0 || ret == GLP_ENOPFS || ret == GLP_ENODFS;
  if (ret == GLP_ENOPFS) return GLP_NOFEAS;
  if (ret != 0 && ret != GLP_ETMLIM && ret != GLP_ESTOP) return GLP_UNDEF;
  return glp_mip_status(lp);
}

/* ---- placement ------------------------------------------------------------------------------ */
typedef struct plc_model {
  const search_model *m;
  const gopt_cluster *cl;
  int D;
  int32_t n;
  const double *t;         /* [n * D] kernel seconds */
  const double *tau;       /* [edges] transfer lower bound per (pred CSR) edge */
  const uint64_t *reach;   /* [n * W] descendants */
  size_t W;
  int mem_rows;
  int32_t *cuts;           /* [ncuts * n] placements excluded */
  size_t ncuts;
  double tmax;
} plc_model;

/* Builds the placement MIP over the horizon H seconds (start times and makespan within H; the
 * big-M of the disjunctions follows from H). Columns: x[p][d] at *cx + p * D + d. Time unit
 * H / 1000. NULL when out of memory. */
static glp_prob *build_placement(const plc_model *pm, double H, rowb *rb, int *cx_out) {
  const search_model *m = pm->m;
  const int D = pm->D;
  const int32_t n = pm->n;
  const size_t W = pm->W;
  const double unit = H / 1000, Hs = 1000, M = Hs + pm->tmax / unit;
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  const int cx = glp_add_cols(lp, n * D); /* x[p][d] = cx + p * D + d */
  for (int j = 0; j < n * D; j++) glp_set_col_kind(lp, cx + j, GLP_BV);
  const int cs = glp_add_cols(lp, n);
  for (int32_t p = 0; p < n; p++) glp_set_col_bnds(lp, cs + p, GLP_DB, 0, Hs);
  const int cC = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, cC, GLP_DB, 0, Hs);
  glp_set_obj_coef(lp, cC, 1);
  *cx_out = cx;
#define XC(p, d) (cx + (p) * D + (d))
#define TT(p, d) (pm->t[(size_t)(p) * D + (d)] / unit)
  for (int32_t p = 0; p < n; p++) {
    for (int d = 0; d < D; d++)
      if (rb_add(rb, XC(p, d), 1)) goto oom;
    rb_emit(lp, rb, GLP_FX, 1);
    /* makespan */
    if (rb_add(rb, cC, 1) || rb_add(rb, cs + p, -1)) goto oom;
    for (int d = 0; d < D; d++)
      if (rb_add(rb, XC(p, d), -TT(p, d))) goto oom;
    rb_emit(lp, rb, GLP_LO, 0);
  }
  /* each device runs its nodes one at a time: makespan >= its load (a strong LP bound) */
  for (int d = 0; d < D && D > 1; d++) {
    if (rb_add(rb, cC, 1)) goto oom;
    for (int32_t p = 0; p < n; p++)
      if (rb_add(rb, XC(p, d), -TT(p, d))) goto oom;
    rb_emit(lp, rb, GLP_LO, 0);
  }
  /* precedence with transfers */
  for (int32_t v = 0; v < n; v++)
    for (int32_t j = m->pred_off[v]; j < m->pred_off[v + 1]; j++) {
      int32_t u = m->pred[j];
      double tu = pm->tau[j] / unit;
      for (int d = 0; d < (tu > 0 ? D : 1); d++) {
        if (rb_add(rb, cs + v, 1) || rb_add(rb, cs + u, -1)) goto oom;
        for (int d2 = 0; d2 < D; d2++)
          if (rb_add(rb, XC(u, d2), -TT(u, d2))) goto oom;
        if (tu > 0 && (rb_add(rb, XC(u, d), -tu) || rb_add(rb, XC(v, d), tu))) goto oom;
        rb_emit(lp, rb, GLP_LO, 0);
      }
    }
  /* disjunctions for pairs of nodes neither of which reaches the other */
  for (int32_t u = 0; u < n; u++)
    for (int32_t v = u + 1; v < n; v++) {
      if ((pm->reach[(size_t)u * W + (size_t)v / 64] >> (v % 64)) & 1) continue;
      if ((pm->reach[(size_t)v * W + (size_t)u / 64] >> (u % 64)) & 1) continue;
      int co = glp_add_cols(lp, 1);
      glp_set_col_kind(lp, co, GLP_BV);
      for (int d = 0; d < D; d++) {
        if (TT(u, d) > 0) { /* o = 1: u before v */
          if (rb_add(rb, cs + v, 1) || rb_add(rb, cs + u, -1) || rb_add(rb, co, -M) ||
              rb_add(rb, XC(u, d), -M) || rb_add(rb, XC(v, d), -M))
            goto oom;
          rb_emit(lp, rb, GLP_LO, TT(u, d) - 3 * M);
        }
        if (TT(v, d) > 0) { /* o = 0: v before u */
          if (rb_add(rb, cs + u, 1) || rb_add(rb, cs + v, -1) || rb_add(rb, co, M) ||
              rb_add(rb, XC(u, d), -M) || rb_add(rb, XC(v, d), -M))
            goto oom;
          rb_emit(lp, rb, GLP_LO, TT(v, d) - 2 * M);
        }
      }
    }
  /* memory: resident bytes + one node's working set within each device's capacity */
  if (pm->mem_rows) {
    const int cz = m->n_res > 0 ? glp_add_cols(lp, m->n_res * D) : 0;
    for (int j = 0; j < m->n_res * D; j++) glp_set_col_bnds(lp, cz + j, GLP_DB, 0, 1);
    for (int32_t r = 0; r < m->n_res; r++)
      for (int32_t k = m->res_off[r]; k < m->res_off[r + 1]; k++)
        for (int d = 0; d < D; d++) {
          if (rb_add(rb, cz + r * D + d, 1) || rb_add(rb, XC(m->res_cons[k], d), -1)) goto oom;
          rb_emit(lp, rb, GLP_LO, 0);
        }
    for (int d = 0; d < D; d++) {
      double cap = pm->cl->devices[d].mem_bytes;
      if (!(cap > 0)) continue;
      for (int32_t p = 0; p < n; p++) {
        double ws = 0;
        for (int32_t k = m->in_off[p]; k < m->in_off[p + 1]; k++) ws += m->act_bytes[m->in_act[k]];
        for (int32_t k = m->out_off[p]; k < m->out_off[p + 1]; k++) ws += m->act_bytes[m->out_act[k]];
        for (int32_t r = 0; r < m->n_res; r++)
          if (rb_add(rb, cz + r * D + d, m->res_bytes[r] / cap)) goto oom;
        if (rb_add(rb, XC(p, d), ws / cap)) goto oom;
        rb_emit(lp, rb, GLP_UP, 1);
      }
    }
  }
  /* no-good cuts: not exactly an already simulated placement again */
  for (size_t k = 0; k < pm->ncuts; k++) {
    for (int32_t p = 0; p < n; p++)
      if (rb_add(rb, XC(p, pm->cuts[k * (size_t)n + (size_t)p]), 1)) goto oom;
    rb_emit(lp, rb, GLP_UP, n - 1);
  }
#undef XC
#undef TT
  return lp;
oom:
  glp_delete_prob(lp);
  rb->n = 0;
  return NULL;
}

static int ilp_placement(search_ctx *c, const search_model *m) {
  const gopt_env *e = c->e;
  const gopt_cluster *cl = gopt_env_cluster(e);
  const gopt_sim *sim = gopt_env_sim(e);
  const int D = cl->n_devices;
  const int32_t n = m->n;
  int rc = 0;
  glp_prob *lp = NULL;
  rowb rb = {0};
  int32_t *dvar = malloc(((size_t)n + 1) * sizeof *dvar);
  double *t = malloc(((size_t)n * D + 1) * sizeof *t), *x = malloc(c->nv * sizeof *x);
  const size_t W = ((size_t)n + 63) / 64;
  uint64_t *reach = calloc((size_t)n * W + 1, sizeof *reach);
  double *tau = NULL;
  plc_model pm = {0};
  if (!dvar || !t || !x || !reach) goto oom;
  search_model_var_index(m, e, GOPT_VAR_DEVICE, dvar);
  for (int32_t p = 0; p < n; p++)
    if (dvar[p] < 0) {
      rc = gopt_error_set(c->err, GOPT_EINVAL, "search ilp: node '%s' has no device variable",
                          gopt_node_name(gopt_env_graph(e), m->node[p]));
      goto done;
    }
  /* kernel times, transfer lower bounds per edge, reachability */
  double inv_bw = INFINITY, lat = INFINITY;
  for (int l = 0; l < cl->n_links; l++) {
    if (1.0 / cl->links[l].bw < inv_bw) inv_bw = 1.0 / cl->links[l].bw;
    if (cl->links[l].latency_s < lat) lat = cl->links[l].latency_s;
  }
  if (D == 1 || cl->n_links == 0) inv_bw = lat = 0;
  double ub = 0, tmax = 0;
  for (int32_t p = 0; p < n; p++) {
    double mx = 0;
    for (int d = 0; d < D; d++) {
      t[(size_t)p * D + d] = gopt_sim_node_time(sim, m->node[p], d);
      if (t[(size_t)p * D + d] > mx) mx = t[(size_t)p * D + d];
    }
    ub += mx;
    if (mx > tmax) tmax = mx;
  }
  const int32_t E = m->pred_off[n];
  if (!(tau = calloc((size_t)E + 1, sizeof *tau))) goto oom;
  for (int32_t v = 0; v < n; v++)
    for (int32_t j = m->pred_off[v]; j < m->pred_off[v + 1]; j++) {
      int32_t u = m->pred[j];
      for (int32_t k = m->in_off[v]; k < m->in_off[v + 1]; k++) {
        int32_t a = m->in_act[k];
        if (m->act_prod[a] == u) tau[j] += m->act_bytes[a] * inv_bw + lat;
      }
      ub += tau[j];
    }
  for (int32_t v = n - 1; v >= 0; v--) /* reach[u] = descendants of u (positions are topological) */
    for (int32_t j = m->pred_off[v]; j < m->pred_off[v + 1]; j++) {
      int32_t u = m->pred[j];
      reach[(size_t)u * W + (size_t)v / 64] |= 1ULL << (v % 64);
      for (size_t w = 0; w < W; w++) reach[(size_t)u * W + w] |= reach[(size_t)v * W + w];
    }
  if (!(ub > 0)) { /* every placement takes no time: the start is optimal */
    c->optimal = c->best.feasible;
    goto done;
  }
  /* memory rows only when some placement could exceed a capacity */
  double total = 0, capmin = INFINITY;
  for (int32_t r = 0; r < m->n_res; r++) total += m->res_bytes[r];
  for (int32_t a = 0; a < m->n_act; a++) total += m->act_bytes[a];
  for (int d = 0; d < D; d++)
    if (cl->devices[d].mem_bytes < capmin) capmin = cl->devices[d].mem_bytes;
  pm = (plc_model){m, cl, D, n, t, tau, reach, W, total > capmin, NULL, 0, tmax};
  /* solve, simulate, cut, repeat */
  for (;;) {
    if (search_done(c)) break;
    double H = c->best.objective * (1 - ILP_REL_TOL);
    if (!(H < ub)) H = ub;
    if (!(H > 0)) {
      c->optimal = c->best.feasible;
      break;
    }
    int cx;
    lp = build_placement(&pm, H, &rb, &cx);
    if (!lp) goto oom;
    int complete, st = solve(c, lp, &complete);
    if (st == GLP_NOFEAS && complete) { /* nothing beats the best */
      c->optimal = c->best.feasible;
      break;
    }
    if (st != GLP_OPT && st != GLP_FEAS) break; /* stopped without a solution, or solver failure */
    memcpy(x, c->best_x, c->nv * sizeof *x);
    int32_t *cut = realloc(pm.cuts, (pm.ncuts + 1) * (size_t)n * sizeof *cut);
    if (!cut) goto oom;
    pm.cuts = cut;
    for (int32_t p = 0; p < n; p++) {
      int bd = 0;
      for (int d = 1; d < D; d++)
        if (glp_mip_col_val(lp, cx + p * D + d) > glp_mip_col_val(lp, cx + p * D + bd)) bd = d;
      cut[pm.ncuts * (size_t)n + (size_t)p] = bd;
      x[dvar[p]] = bd;
    }
    pm.ncuts++;
    glp_delete_prob(lp);
    lp = NULL;
    gopt_env_result r;
    if ((rc = search_eval(c, c->ws[0], x, &r))) goto done;
    if (!complete) break;
  }
  goto done;
oom:
  rc = gopt_error_set(c->err, GOPT_ENOMEM, "search ilp: out of memory");
done:
  free(pm.cuts);
  if (lp) glp_delete_prob(lp);
  free(rb.ind);
  free(rb.val);
  free(dvar);
  free(t);
  free(x);
  free(reach);
  free(tau);
  return rc;
}

/* ---- peak memory on one device -------------------------------------------------------------- */
static int ilp_memory(search_ctx *c, const search_model *m) {
  const gopt_env *e = c->e;
  const int32_t n = m->n;
  int rc = 0;
  glp_prob *lp = NULL;
  rowb rb = {0};
  int32_t *pidx = malloc(((size_t)n + 1) * sizeof *pidx), *slot = malloc(((size_t)n + 1) * sizeof *slot);
  int32_t *nanc = calloc((size_t)n + 1, sizeof *nanc), *ndesc = calloc((size_t)n + 1, sizeof *ndesc);
  const size_t W = ((size_t)n + 63) / 64;
  uint64_t *anc = calloc((size_t)n * W + 1, sizeof *anc);
  double *x = malloc(c->nv * sizeof *x);
  if (!pidx || !slot || !nanc || !ndesc || !anc || !x) goto oom;
  search_model_var_index(m, e, GOPT_VAR_PRIORITY, pidx);
  for (int32_t p = 0; p < n; p++)
    if (pidx[p] < 0) {
      rc = gopt_error_set(c->err, GOPT_EINVAL, "search ilp: node '%s' has no priority variable",
                          gopt_node_name(gopt_env_graph(e), m->node[p]));
      goto done;
    }
  for (int32_t v = 0; v < n; v++)
    for (int32_t j = m->pred_off[v]; j < m->pred_off[v + 1]; j++) {
      int32_t u = m->pred[j];
      anc[(size_t)v * W + (size_t)u / 64] |= 1ULL << (u % 64);
      for (size_t w = 0; w < W; w++) anc[(size_t)v * W + w] |= anc[(size_t)u * W + w];
    }
  for (int32_t v = 0; v < n; v++)
    for (int32_t u = 0; u < n; u++)
      if ((anc[(size_t)v * W + (size_t)u / 64] >> (u % 64)) & 1) {
        nanc[v]++;
        ndesc[u]++;
      }
  double R = 0, scale = 1;
  for (int32_t r = 0; r < m->n_res; r++) R += m->res_bytes[r];
  for (int32_t a = 0; a < m->n_act; a++)
    if (m->act_bytes[a] > scale) scale = m->act_bytes[a];
  if (R > scale) scale = R;
  lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  const int cx = glp_add_cols(lp, n * n); /* x[v][t] = cx + v * n + t */
#define XT(v, s) (cx + (v) * n + (s))
  for (int32_t v = 0; v < n; v++)
    for (int32_t s = 0; s < n; s++) {
      glp_set_col_kind(lp, XT(v, s), GLP_BV);
      if (s < nanc[v] || s > n - 1 - ndesc[v]) glp_set_col_bnds(lp, XT(v, s), GLP_FX, 0, 0);
    }
  const int cP = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, cP, GLP_LO, 0, 0);
  glp_set_obj_coef(lp, cP, 1);
  const int cl0 = m->n_act > 0 ? glp_add_cols(lp, m->n_act * n) : 0; /* live[a][t] */
  for (int j = 0; j < m->n_act * n; j++) glp_set_col_bnds(lp, cl0 + j, GLP_DB, 0, 1);
  for (int32_t v = 0; v < n; v++) {
    for (int32_t s = 0; s < n; s++)
      if (rb_add(&rb, XT(v, s), 1)) goto oom;
    rb_emit(lp, &rb, GLP_FX, 1);
  }
  for (int32_t s = 0; s < n; s++) {
    for (int32_t v = 0; v < n; v++)
      if (rb_add(&rb, XT(v, s), 1)) goto oom;
    rb_emit(lp, &rb, GLP_FX, 1);
  }
  /* precedence: v started by slot s implies u ran before s */
  for (int32_t v = 0; v < n; v++)
    for (int32_t j = m->pred_off[v]; j < m->pred_off[v + 1]; j++) {
      int32_t u = m->pred[j];
      for (int32_t s = 0; s < n; s++) {
        for (int32_t q = 0; q <= s; q++)
          if (rb_add(&rb, XT(v, q), 1) || (q < s && rb_add(&rb, XT(u, q), -1))) goto oom;
        rb_emit(lp, &rb, GLP_UP, 0);
      }
    }
  /* liveness */
  for (int32_t a = 0; a < m->n_act; a++) {
    int32_t p = m->act_prod[a];
    int nc = m->cons_off[a + 1] - m->cons_off[a];
    for (int32_t s = 0; s < n; s++) {
      int lv = cl0 + a * n + s;
      if (m->act_out[a] || nc == 0) {
        if (rb_add(&rb, lv, 1)) goto oom;
        if (m->act_out[a]) {
          for (int32_t q = 0; q <= s; q++)
            if (rb_add(&rb, XT(p, q), -1)) goto oom;
        } else if (rb_add(&rb, XT(p, s), -1)) {
          goto oom;
        }
        rb_emit(lp, &rb, GLP_LO, 0);
        continue;
      }
      for (int32_t k = m->cons_off[a]; k < m->cons_off[a + 1]; k++) {
        int32_t cn = m->cons[k];
        if (rb_add(&rb, lv, 1)) goto oom;
        for (int32_t q = 0; q <= s; q++)
          if (rb_add(&rb, XT(p, q), -1) || (q < s && rb_add(&rb, XT(cn, q), 1))) goto oom;
        rb_emit(lp, &rb, GLP_LO, 0);
      }
    }
  }
  /* peak */
  for (int32_t s = 0; s < n; s++) {
    if (rb_add(&rb, cP, 1)) goto oom;
    for (int32_t a = 0; a < m->n_act; a++)
      if (rb_add(&rb, cl0 + a * n + s, -m->act_bytes[a] / scale)) goto oom;
    rb_emit(lp, &rb, GLP_LO, R / scale);
  }
  int complete, st = solve(c, lp, &complete);
  if (st != GLP_OPT && st != GLP_FEAS) goto done;
  double lb = glp_mip_obj_val(lp) * scale;
  for (int32_t v = 0; v < n; v++) {
    slot[v] = 0;
    for (int32_t s = 1; s < n; s++)
      if (glp_mip_col_val(lp, XT(v, s)) > glp_mip_col_val(lp, XT(v, slot[v]))) slot[v] = s;
  }
#undef XT
  memcpy(x, c->best_x, c->nv * sizeof *x);
  for (size_t i = 0; i < c->nv; i++)
    if (c->vars[i].kind == GOPT_VAR_DEVICE) x[i] = 0;
  for (int32_t v = 0; v < n; v++) x[pidx[v]] = 1.0 - (slot[v] + 0.5) / n;
  if (search_evals_left(c) == 0) goto done;
  gopt_env_result r;
  if ((rc = search_eval(c, c->ws[0], x, &r))) goto done;
  if (st == GLP_OPT && complete) {
    if (fabs(r.peak_mem - lb) <= ILP_REL_TOL * (r.peak_mem > 1 ? r.peak_mem : 1))
      c->optimal = 1;
    else
      gopt_warn("search ilp: simulated peak %.17g differs from the ILP optimum %.17g", r.peak_mem, lb);
  }
  goto done;
oom:
  rc = gopt_error_set(c->err, GOPT_ENOMEM, "search ilp: out of memory");
done:
  if (lp) glp_delete_prob(lp);
  free(rb.ind);
  free(rb.val);
  free(pidx);
  free(slot);
  free(nanc);
  free(ndesc);
  free(anc);
  free(x);
  return rc;
}

int search_ilp(search_ctx *c) {
  if (search_done(c)) return 0; /* no evaluation left for a solution */
  search_model m;
  int rc = search_model_build(gopt_env_graph(c->e), &m, c->err);
  if (rc) return rc;
  if (gopt_env_task(c->e) == GOPT_TASK_PLACEMENT) rc = ilp_placement(c, &m);
  else rc = ilp_memory(c, &m);
  search_model_free(&m);
  return rc;
}
