/* sim.c: building the simulator context (sim.h): topological order, CSR arrays of inputs, outputs
 * and consumers, resident tensors, per-node kernel times on every device (analytical roofline or
 * the measured cost database) and default priorities (normalised bottom level). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/ops.h"
#include "sim/sim_internal.h"
#include "util/util_internal.h"

void gopt_sim_free(gopt_sim *s) {
  if (!s) return;
  void *arrs[] = {s->order, s->pos, s->ncost, s->nflops, s->nbytes, s->ncls, s->ndt, s->dprio,
                  s->lat, s->inv_bw, s->route, s->act_tensor, s->act_of, s->act_prod,
                  s->act_bytes, s->act_out, s->in_off, s->in_act, s->out_off, s->out_act,
                  s->cons_off, s->cons, s->res_tensor, s->res_bytes, s->res_off, s->res_cons,
                  s->nres_off, s->nres, s->gout, s->out_bytes, s->drank, s->drunit, s->nsig,
                  s->res1_pos, s->resm, s->res1_bytes, s->src, s->dkey};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
  sim_stream_free(s);
  free(s);
}

int gopt_sim_tensor_resident(const gopt_graph *g, int32_t t) {
  const gopt_tensor *x = &g->tensors.a[t];
  return x->producer < 0 && !(x->flags & GOPT_T_ATTR) && (x->flags & (GOPT_T_CONST | GOPT_T_INPUT));
}

/* Consumers of resident q. */
static int32_t res_ncons(const gopt_sim *s, int32_t q) { return s->res_off[q + 1] - s->res_off[q]; }

/* The fast forms of the reset's resident bytes and ready units (sim_internal.h). */
static int sim_reset_lists(gopt_sim *s) {
  double tot = 0;
  s->res_int = 1;
  for (int32_t q = 0; q < s->n_res; q++) {
    double b = s->res_bytes[q];
    if (!(b >= 0 && b == floor(b))) s->res_int = 0;
    tot += b;
    s->n_resm += res_ncons(s, q) > 1;
  }
  if (!(tot < 0x1p53)) s->res_int = 0;
  int32_t np = 0; /* positions reading a one-consumer resident */
  for (int32_t p = 0; p < s->n; p++) {
    int has = 0;
    for (int32_t j = s->nres_off[p]; j < s->nres_off[p + 1]; j++)
      has |= res_ncons(s, s->nres[j]) == 1;
    np += has;
    s->n_src += s->in_off[p + 1] == s->in_off[p];
  }
  if (GOPT_ALLOC(s->res1_pos, np) || GOPT_ALLOC(s->res1_bytes, np) || GOPT_ALLOC(s->resm, s->n_resm) ||
      GOPT_ALLOC(s->src, s->n_src))
    return GOPT_ENOMEM;
  for (int32_t q = 0, k = 0; q < s->n_res; q++)
    if (res_ncons(s, q) > 1) s->resm[k++] = q;
  for (int32_t p = 0, k = 0; p < s->n; p++) {
    int64_t b = 0;
    int has = 0;
    for (int32_t j = s->nres_off[p]; j < s->nres_off[p + 1]; j++)
      if (res_ncons(s, s->nres[j]) == 1) {
        has = 1;
        b += (int64_t)s->res_bytes[s->nres[j]];
      }
    if (has) {
      s->res1_pos[s->n_res1] = p;
      s->res1_bytes[s->n_res1++] = b;
    }
    if (s->in_off[p + 1] == s->in_off[p]) s->src[k++] = p;
  }
  return GOPT_OK;
}

int gopt_sim_new(const gopt_graph *g, const gopt_cluster *c, const gopt_sim_opts *opts,
                 gopt_sim **out, gopt_error *err) {
  gopt_sim_opts o = {0};
  if (opts) o = *opts;
  int rc = GOPT_OK;
  int32_t *mark = NULL, *rmark = NULL, *res_of = NULL, *cnt = NULL;
  double *bl = NULL;
  *out = NULL;
  if (o.costs == GOPT_SIM_COSTS_MEASURED && !o.costdb)
    return gopt_error_set(err, GOPT_EINVAL, "--costs measured needs a cost database (--costdb FILE)");
  if (!c || c->n_devices < 1)
    return gopt_error_set(err, GOPT_EINVAL, "simulator: the cluster has no device");
  gopt_sim *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "simulator: out of memory");
  s->g = g;
  s->cl = c;
  s->D = c->n_devices;
  s->L = c->n_links;
  size_t NN = g->nodes.n, NT = g->tensors.n;
  const int D = s->D;
  if (GOPT_ALLOC(s->order, NN) || GOPT_ALLOC(s->pos, NN) || GOPT_ALLOC(s->act_of, NT) || GOPT_ALLOC(mark, NT) ||
      GOPT_ALLOC(res_of, NT) || GOPT_ALLOC(s->lat, s->L) || GOPT_ALLOC(s->inv_bw, s->L) ||
      GOPT_ALLOC(s->route, (size_t)D * D))
    goto oom;
  int64_t n = gopt_graph_topo(g, s->order, err);
  if (n < 0) {
    rc = (int)n;
    goto fail;
  }
  s->n = (int32_t)n;
  for (size_t i = 0; i < NN; i++) s->pos[i] = -1;
  for (int32_t p = 0; p < s->n; p++) s->pos[s->order[p]] = p;
  for (int l = 0; l < s->L; l++) {
    s->lat[l] = c->links[l].latency_s;
    s->inv_bw[l] = 1.0 / c->links[l].bw;
  }
  memcpy(s->route, c->route, (size_t)D * D * sizeof *s->route);

  /* acts and resident tensors */
  int32_t n_act = 0, n_res = 0;
  size_t n_in = 0, n_rin = 0;
  for (size_t t = 0; t < NT; t++) s->act_of[t] = res_of[t] = -1;
  for (int32_t p = 0; p < s->n; p++) {
    const gopt_node *nd = &g->nodes.a[s->order[p]];
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      if (t >= 0 && s->act_of[t] < 0) s->act_of[t] = n_act++;
    }
  }
  if (GOPT_ALLOC(s->act_tensor, n_act) || GOPT_ALLOC(s->act_prod, n_act) || GOPT_ALLOC(s->act_bytes, n_act) ||
      GOPT_ALLOC(s->act_out, n_act) || GOPT_ALLOC(s->out_off, s->n + 1) || GOPT_ALLOC(s->out_act, n_act) ||
      GOPT_ALLOC(s->in_off, s->n + 1) || GOPT_ALLOC(s->nres_off, s->n + 1) || GOPT_ALLOC(rmark, NT))
    goto oom;
  s->n_act = n_act;
  if ((int64_t)n_act * D >= (int64_t)1 << 30) { /* SIM_CAUSE_XID: a transfer's identity in 30 bits */
    rc = gopt_error_set(err, GOPT_EINVAL, "simulator: %d activations on %d devices: more than 2^30 possible transfers",
                        (int)n_act, D);
    goto fail;
  }
  for (size_t t = 0; t < NT; t++) mark[t] = rmark[t] = -1;
  /* pass 1: outputs, and counts of distinct inputs */
  int32_t k_out = 0;
  for (int32_t p = 0; p < s->n; p++) {
    const gopt_node *nd = &g->nodes.a[s->order[p]];
    s->out_off[p] = k_out;
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      if (t < 0 || mark[t] == p) continue;
      mark[t] = p;
      int32_t a = s->act_of[t];
      s->act_tensor[a] = t;
      s->act_prod[a] = p;
      s->act_bytes[a] = gopt_tensor_bytes(g, t);
      s->out_act[k_out++] = a;
    }
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0) continue;
      if (s->act_of[t] >= 0) {
        if (mark[t] != -2 - p) {
          mark[t] = -2 - p;
          n_in++;
        }
      } else if (gopt_sim_tensor_resident(g, t)) {
        if (rmark[t] != p) {
          rmark[t] = p;
          n_rin++;
          if (res_of[t] < 0) res_of[t] = n_res++;
        }
      }
    }
  }
  s->out_off[s->n] = k_out;
  for (size_t i = 0; i < g->outputs.n; i++) {
    int32_t t = g->outputs.a[i];
    if (t >= 0 && (size_t)t < NT && s->act_of[t] >= 0) s->act_out[s->act_of[t]] = 1;
  }
  /* graph-output acts (released at the end of the step) and summed output bytes per position */
  if (GOPT_ALLOC(s->gout, n_act) || GOPT_ALLOC(s->out_bytes, s->n)) goto oom;
  for (int32_t a = 0; a < n_act; a++)
    if (s->act_out[a]) s->gout[s->n_gout++] = a;
  for (int32_t p = 0; p < s->n; p++)
    for (int32_t j = s->out_off[p]; j < s->out_off[p + 1]; j++)
      s->out_bytes[p] += s->act_bytes[s->out_act[j]];
  s->n_res = n_res;
  if (GOPT_ALLOC(s->in_act, n_in) || GOPT_ALLOC(s->nres, n_rin) || GOPT_ALLOC(s->cons_off, n_act + 1) ||
      GOPT_ALLOC(s->cons, n_in) || GOPT_ALLOC(s->res_tensor, n_res) || GOPT_ALLOC(s->res_bytes, n_res) ||
      GOPT_ALLOC(s->res_off, n_res + 1) || GOPT_ALLOC(s->res_cons, n_rin) || GOPT_ALLOC(cnt, (n_act > n_res ? n_act : n_res) + 1))
    goto oom;
  /* pass 2: input lists */
  for (size_t t = 0; t < NT; t++) mark[t] = rmark[t] = -1;
  size_t ki = 0, kr = 0;
  for (int32_t p = 0; p < s->n; p++) {
    const gopt_node *nd = &g->nodes.a[s->order[p]];
    s->in_off[p] = (int32_t)ki;
    s->nres_off[p] = (int32_t)kr;
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0) continue;
      if (s->act_of[t] >= 0) {
        if (mark[t] != p) {
          mark[t] = p;
          s->in_act[ki++] = s->act_of[t];
        }
      } else if (gopt_sim_tensor_resident(g, t) && rmark[t] != p) {
        rmark[t] = p;
        s->nres[kr++] = res_of[t];
        s->res_tensor[res_of[t]] = t;
      }
    }
  }
  s->in_off[s->n] = (int32_t)ki;
  s->nres_off[s->n] = (int32_t)kr;
  for (int32_t r = 0; r < n_res; r++) s->res_bytes[r] = gopt_tensor_bytes(g, s->res_tensor[r]);
  /* consumers CSR (act -> positions) and resident consumers (res -> positions) */
  memset(cnt, 0, ((size_t)(n_act > n_res ? n_act : n_res) + 1) * sizeof *cnt);
  for (size_t i = 0; i < ki; i++) cnt[s->in_act[i]]++;
  s->cons_off[0] = 0;
  for (int32_t a = 0; a < n_act; a++) s->cons_off[a + 1] = s->cons_off[a] + cnt[a];
  for (int32_t a = 0; a < n_act; a++) cnt[a] = s->cons_off[a];
  for (int32_t p = 0; p < s->n; p++)
    for (int32_t i = s->in_off[p]; i < s->in_off[p + 1]; i++) s->cons[cnt[s->in_act[i]]++] = p;
  memset(cnt, 0, ((size_t)(n_act > n_res ? n_act : n_res) + 1) * sizeof *cnt);
  for (size_t i = 0; i < kr; i++) cnt[s->nres[i]]++;
  s->res_off[0] = 0;
  for (int32_t r = 0; r < n_res; r++) s->res_off[r + 1] = s->res_off[r] + cnt[r];
  for (int32_t r = 0; r < n_res; r++) cnt[r] = s->res_off[r];
  for (int32_t p = 0; p < s->n; p++)
    for (int32_t i = s->nres_off[p]; i < s->nres_off[p + 1]; i++) s->res_cons[cnt[s->nres[i]]++] = p;
  if (sim_reset_lists(s)) goto oom;

  /* per-node costs on every device */
  if (GOPT_ALLOC(s->ncost, (size_t)s->n * D) || GOPT_ALLOC(s->nflops, s->n) || GOPT_ALLOC(s->nbytes, s->n) ||
      GOPT_ALLOC(s->ncls, s->n) || GOPT_ALLOC(s->ndt, s->n) || GOPT_ALLOC(s->dprio, s->n) || GOPT_ALLOC(bl, s->n))
    goto oom;
  int use_db = o.costdb && o.costs != GOPT_SIM_COSTS_ANALYTICAL;
  int any_measured_dev = 0;
  int any_gpu_model = 0;
  for (int d = 0; d < D; d++) any_measured_dev |= c->devices[d].measured;
  if (use_db && any_measured_dev) {
    if (GOPT_ALLOC(s->nsig, s->n)) goto oom;
    s->db = o.costdb;
  }
  for (int d = 0; d < D; d++) any_gpu_model |= c->devices[d].gpu_model;
  /* measured-GPU models cost a node from its own features; nodes of constants cost nothing */
  uint8_t *dyn = any_gpu_model && !o.cost_fn ? gopt_gpu_dynamic_tensors(g) : NULL;
  for (int32_t p = 0; p < s->n; p++) {
    int32_t nid = s->order[p];
    const gopt_node *nd = &g->nodes.a[nid];
    gopt_cost co = {0};
    if (o.cost_fn) o.cost_fn(g, nid, &co, o.cost_user);
    else gopt_node_cost(g, nid, &co);
    s->nflops[p] = co.flops;
    s->nbytes[p] = co.bytes_read + co.bytes_written;
    s->ncls[p] = (uint8_t)gopt_op_class_of(nd->op);
    s->ndt[p] = nd->n_out ? g->tensors.a[g->outs.a[nd->out]].dtype : GOPT_DT_FLOAT;
    double meas = -1;
    gopt_cost_entry e;
    if (s->nsig) s->nsig[p] = gopt_op_signature(g, nid);
    if (s->nsig && gopt_costdb_get_run(o.costdb, s->nsig[p], &e)) {
      meas = e.seconds;
      s->n_measured++;
    }
    for (int d = 0; d < D; d++)
      s->ncost[(size_t)d * s->n + p] = sim_grid(
          (meas >= 0 && c->devices[d].measured)
              ? meas
              : gopt_device_node_time(&c->devices[d], o.cost_fn ? NULL : g, nid, dyn,
                                      s->ncls[p], s->ndt[p], s->nflops[p], s->nbytes[p]));
  }
  free(dyn);
  /* default priority: bottom level on device 0, normalised */
  double mx = 0;
  for (int32_t p = s->n - 1; p >= 0; p--) {
    double best = 0;
    for (int32_t i = s->out_off[p]; i < s->out_off[p + 1]; i++) {
      int32_t a = s->out_act[i];
      for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++)
        if (bl[s->cons[j]] > best) best = bl[s->cons[j]];
    }
    bl[p] = s->ncost[p] + best;
    if (bl[p] > mx) mx = bl[p];
  }
  for (int32_t p = 0; p < s->n; p++) s->dprio[p] = mx > 0 ? bl[p] / mx : 0;
  /* ranks of the default priorities (the ready-queue order of a state without explicit ones) */
  {
    uint64_t *kb = NULL;
    int32_t *ub = NULL;
    if (GOPT_ALLOC(s->drank, s->n) || GOPT_ALLOC(s->drunit, s->n) || GOPT_ALLOC(s->dkey, s->n) ||
        GOPT_ALLOC(kb, 2 * (size_t)s->n) || GOPT_ALLOC(ub, 2 * (size_t)s->n)) {
      free(kb);
      free(ub);
      goto oom;
    }
    for (int32_t p = 0; p < s->n; p++) s->dkey[p] = sim_key(s->dprio[p]);
    sim_rank_keys(s->dkey, s->n, s->drank, s->drunit, kb, ub);
    free(kb);
    free(ub);
  }
  (void)sim_stream_build(s); /* out of memory: light evaluations use sim_run.c's loop */
  *out = s;
  s = NULL;
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "simulator: out of memory");
fail:
done:
  gopt_sim_free(s);
  free(mark);
  free(rmark);
  free(res_of);
  free(cnt);
  free(bl);
  return rc;
}

void sim_rank_keys(const uint64_t *key, int32_t U, int32_t *rank, int32_t *runit, uint64_t *kbuf,
                   int32_t *ubuf) {
  uint64_t *ka = kbuf, *kb = kbuf + U;
  int32_t *ua = ubuf, *ub = ubuf + U;
  int32_t cnt[8][256];
  memset(cnt, 0, sizeof cnt);
  for (int32_t u = 0; u < U; u++) {
    uint64_t k = key[u];
    ka[u] = k;
    ua[u] = u;
    for (int b = 0; b < 8; b++) cnt[b][(k >> (8 * b)) & 255]++;
  }
  for (int b = 0; b < 8 && U > 0; b++) {
    int32_t *c = cnt[b];
    if (c[(ka[0] >> (8 * b)) & 255] == U) continue; /* every key has this byte */
    int32_t sum = 0;
    for (int v = 0; v < 256; v++) {
      int32_t t = c[v];
      c[v] = sum;
      sum += t;
    }
    for (int32_t i = 0; i < U; i++) {
      int32_t at = c[(ka[i] >> (8 * b)) & 255]++;
      kb[at] = ka[i];
      ub[at] = ua[i];
    }
    uint64_t *tk = ka;
    ka = kb;
    kb = tk;
    int32_t *tu = ua;
    ua = ub;
    ub = tu;
  }
  for (int32_t r = 0; r < U; r++) {
    runit[r] = ua[r];
    rank[ua[r]] = r;
  }
}

size_t gopt_sim_node_count(const gopt_sim *s) { return (size_t)s->n; }
size_t gopt_sim_measured_count(const gopt_sim *s) { return s->n_measured; }

double gopt_sim_node_time(const gopt_sim *s, int32_t n, int d) {
  if (n < 0 || (size_t)n >= s->g->nodes.n || s->pos[n] < 0 || d < 0 || d >= s->D) return 0;
  return s->ncost[(size_t)d * s->n + s->pos[n]];
}

size_t gopt_sim_input_bytes(const gopt_sim *s) {
  size_t n = (size_t)s->n, a = (size_t)s->n_act, r = (size_t)s->n_res;
  size_t ni = (size_t)s->in_off[s->n], nr = (size_t)s->nres_off[s->n];
  return (n + 1) * 4 * 3 + ni * 4 * 2 + a * 4 /* out_act */ + (a + 1) * 4 /* cons_off */ +
         a * (4 + 8 + 1) /* prod, bytes, out */ + n * (size_t)s->D * 8 /* ncost */ + n * 8 /* dprio */ +
         n * 8 /* out_bytes */ + (size_t)s->n_gout * 4 + (r + 1) * 4 + nr * 4 * 2 + r * 8;
}

/* Sums every array the evaluation reads, front to back. */
double gopt_sim_input_pass(const gopt_sim *s) {
  double acc = 0;
  int64_t iacc = 0;
  size_t n = (size_t)s->n, a = (size_t)s->n_act, r = (size_t)s->n_res;
  size_t ni = (size_t)s->in_off[s->n], nr = (size_t)s->nres_off[s->n];
  for (size_t i = 0; i <= n; i++) iacc += s->in_off[i] + s->out_off[i] + s->nres_off[i];
  for (size_t i = 0; i < ni; i++) iacc += s->in_act[i] + s->cons[i];
  for (size_t i = 0; i < a; i++) iacc += s->out_act[i] + s->cons_off[i] + s->act_prod[i] + s->act_out[i];
  iacc += s->cons_off[a];
  for (size_t i = 0; i < a; i++) acc += s->act_bytes[i];
  for (size_t i = 0; i < n * (size_t)s->D; i++) acc += s->ncost[i];
  for (size_t i = 0; i < n; i++) acc += s->dprio[i] + s->out_bytes[i];
  for (int32_t i = 0; i < s->n_gout; i++) iacc += s->gout[i];
  for (size_t i = 0; i <= r; i++) iacc += s->res_off[i];
  for (size_t i = 0; i < nr; i++) iacc += s->res_cons[i] + s->nres[i];
  for (size_t i = 0; i < r; i++) acc += s->res_bytes[i];
  return acc + (double)iacc;
}
