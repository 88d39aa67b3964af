/* sim_run.c: one event-driven step simulation over a state's decisions (gopt_sim_evaluate).
 *
 * Events are kernel completions (one per device at a time) and transfer completions (one per
 * link at a time), so the event heap holds at most D + L entries. All events at one instant are
 * processed before idle devices and links pick new work, so simultaneous completions never
 * depend on processing order. Nothing is allocated here. */
#include <math.h>
#include <string.h>

#include "sim/sim_internal.h"

/* ---- event heap: earliest time first, then insertion order ---------------------------------- */
static inline int ev_less(const sim_ev *a, const sim_ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(gopt_sim_state *st, double t, int32_t kind, int32_t id) {
  int i = st->nev++;
  sim_ev e = {t, st->evseq++, kind, id};
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!ev_less(&e, &st->ev[p])) break;
    st->ev[i] = st->ev[p];
    i = p;
  }
  st->ev[i] = e;
}

static sim_ev ev_pop(gopt_sim_state *st) {
  sim_ev top = st->ev[0], last = st->ev[--st->nev];
  int i = 0, n = st->nev;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    const sim_ev *best = &last;
    if (l < n && ev_less(&st->ev[l], best)) {
      m = l;
      best = &st->ev[l];
    }
    if (r < n && ev_less(&st->ev[r], best)) m = r;
    if (m == i) break;
    st->ev[i] = st->ev[m];
    i = m;
  }
  if (n > 0) st->ev[i] = last;
  return top;
}

/* ---- per-device ready heaps: highest key first, then lowest unit id (topological) ----------- */
static inline int rq_before(const double *key, int32_t a, int32_t b) {
  return key[a] > key[b] || (key[a] == key[b] && a < b);
}

static void rq_push(gopt_sim_state *st, const double *key, int d, int32_t u) {
  int32_t *h = st->heap + st->hbase[d];
  int32_t i = st->hn[d]++;
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (!rq_before(key, u, h[p])) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = u;
}

static int32_t rq_pop(gopt_sim_state *st, const double *key, int d) {
  int32_t *h = st->heap + st->hbase[d];
  int32_t top = h[0], last = h[--st->hn[d]], n = st->hn[d], i = 0;
  for (;;) {
    int32_t l = 2 * i + 1, r = l + 1, m = -1;
    int32_t best = last;
    if (l < n && rq_before(key, h[l], best)) {
      m = l;
      best = h[l];
    }
    if (r < n && rq_before(key, h[r], best)) m = r;
    if (m < 0) break;
    h[i] = h[m];
    i = m;
  }
  if (n > 0) h[i] = last;
  return top;
}

static inline void mark_dev(gopt_sim_state *st, int d, int *nd) {
  if (!st->dflag[d]) {
    st->dflag[d] = 1;
    st->ddirty[(*nd)++] = d;
  }
}
static inline void mark_link(gopt_sim_state *st, int l, int *nl) {
  if (!st->lflag[l]) {
    st->lflag[l] = 1;
    st->ldirty[(*nl)++] = l;
  }
}

static inline void alloc_mem(gopt_sim_state *st, int d, double b) {
  st->mem[d] += b;
  if (st->mem[d] > st->peak[d]) st->peak[d] = st->mem[d];
}

/* Drops one reference to act a's original buffer on its producer's device. */
static inline void release_orig(gopt_sim_state *st, int32_t a) {
  if (--st->ref[a] == 0) st->mem[st->udev[st->aprod[a]]] -= st->s->act_bytes[a];
}

int gopt_sim_evaluate(gopt_sim_state *st, gopt_sim_result *r, gopt_error *err) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  const int32_t U = st->U, A = s->n_act;
  const double *key = st->strict ? st->ukey : st->uprio;
  const int32_t *udev = st->udev;
  int nd = 0, nl = 0;

  /* reset */
  for (int d = 0; d <= D; d++) st->hbase[d] = 0;
  for (int32_t u = 0; u < U; u++) {
    st->pending[u] = st->in_off[u + 1] - st->in_off[u];
    st->hbase[udev[u] + 1]++;
  }
  for (int d = 0; d < D; d++) {
    st->hbase[d + 1] += st->hbase[d];
    st->hn[d] = 0;
    st->running[d] = st->prev_unit[d] = st->dmark[d] = -1;
    st->busy[d] = st->resid[d] = 0;
    st->dflag[d] = 0;
    st->seqpos[d] = 0;
  }
  for (int l = 0; l < st->L; l++) {
    st->qhead[l] = st->qtail[l] = st->lrun[l] = st->lprev[l] = -1;
    st->lbytes[l] = st->lbusy[l] = 0;
    st->lflag[l] = 0;
  }
  if (st->strict) { /* each device's units in rank order */
    for (int d = 0; d < D; d++) st->dcount[d] = st->hbase[d];
    for (int32_t i = 0; i < U; i++) {
      int32_t u = st->rorder[i];
      st->seq[st->dcount[udev[u]]++] = u;
    }
  }
  for (int32_t a = 0; a < A; a++) st->xhead[a] = -1;
  st->nx = 0;
  st->nev = 0;
  st->evseq = 0;
  /* resident tensors: on every device with a consumer */
  for (int32_t q = 0; q < s->n_res; q++)
    for (int32_t j = s->res_off[q]; j < s->res_off[q + 1]; j++) {
      int d = udev[sim_unit(st, s->res_cons[j])];
      if (st->dmark[d] != q) {
        st->dmark[d] = q;
        st->resid[d] += s->res_bytes[q];
      }
    }
  for (int d = 0; d < D; d++) {
    st->mem[d] = st->peak[d] = st->resid[d];
    st->dmark[d] = -1;
  }
  for (int32_t u = 0; u < U; u++)
    if (st->pending[u] == 0) {
      st->ready_t[u] = 0;
      st->dep[u] = -1;
      rq_push(st, key, udev[u], u);
    }
  for (int d = 0; d < D; d++) mark_dev(st, d, &nd);

  double now = 0;
  int32_t done = 0;
  for (;;) {
    /* dispatch idle devices and links */
    for (int i = 0; i < nd; i++) {
      int d = st->ddirty[i];
      st->dflag[d] = 0;
      if (st->running[d] >= 0 || st->hn[d] == 0) continue;
      if (st->strict && st->heap[st->hbase[d]] != st->seq[st->hbase[d] + st->seqpos[d]]) continue;
      int32_t u = rq_pop(st, key, d);
      if (st->strict) st->seqpos[d]++;
      st->start[u] = now;
      st->cause[u] = (st->ready_t[u] < now && st->prev_unit[d] >= 0) ? SIM_CAUSE_UNIT(st->prev_unit[d])
                                                                      : st->dep[u];
      double dur = st->ucost[(size_t)u * D + d];
      st->end[u] = now + dur;
      st->busy[d] += dur;
      for (int32_t j = st->out_off[u]; j < st->out_off[u + 1]; j++)
        alloc_mem(st, d, s->act_bytes[st->out_act[j]]);
      st->running[d] = u;
      ev_push(st, now + dur, 0, d);
    }
    nd = 0;
    for (int i = 0; i < nl; i++) {
      int l = st->ldirty[i];
      st->lflag[l] = 0;
      if (st->lrun[l] >= 0 || st->qhead[l] < 0) continue;
      int32_t xi = st->qhead[l];
      sim_xfer *x = &st->x[xi];
      st->qhead[l] = x->next_q;
      if (st->qhead[l] < 0) st->qtail[l] = -1;
      double b = s->act_bytes[x->act], dur = b * s->inv_bw[l] + s->lat[l];
      x->start = now;
      x->end = now + dur;
      x->cause = (x->req < now && st->lprev[l] >= 0) ? SIM_CAUSE_XFER(st->lprev[l])
                                                      : SIM_CAUSE_UNIT(st->aprod[x->act]);
      st->lbytes[l] += b;
      st->lbusy[l] += dur;
      alloc_mem(st, x->dst, b);
      st->lrun[l] = xi;
      ev_push(st, x->end, 1, l);
    }
    nl = 0;
    if (st->nev == 0) break;
    /* process every event at the next instant */
    now = st->ev[0].t;
    while (st->nev > 0 && st->ev[0].t == now) {
      sim_ev e = ev_pop(st);
      if (e.kind == 0) {
        int d = e.id;
        int32_t u = st->running[d];
        st->running[d] = -1;
        st->prev_unit[d] = u;
        done++;
        mark_dev(st, d, &nd);
        /* inputs: drop this unit's reference to the buffer it read on d */
        for (int32_t j = st->in_off[u]; j < st->in_off[u + 1]; j++) {
          int32_t a = st->in_act[j];
          if (udev[st->aprod[a]] == d) {
            release_orig(st, a);
          } else {
            int32_t xi = st->xhead[a];
            while (xi >= 0 && st->x[xi].dst != d) xi = st->x[xi].next_act;
            if (xi >= 0 && --st->x[xi].refs == 0) st->mem[d] -= s->act_bytes[a];
          }
        }
        /* outputs: wake local consumers, send one copy to every other device that needs it */
        for (int32_t j = st->out_off[u]; j < st->out_off[u + 1]; j++) {
          int32_t a = st->out_act[j], local = 0, ndst = 0;
          for (int32_t c = st->cons_off[a]; c < st->cons_off[a + 1]; c++) {
            int32_t cu = st->cons[c];
            int dv = udev[cu];
            if (dv == d) {
              local++;
              if (--st->pending[cu] == 0) {
                st->ready_t[cu] = now;
                st->dep[cu] = SIM_CAUSE_UNIT(u);
                rq_push(st, key, dv, cu);
                mark_dev(st, dv, &nd);
              }
            } else {
              if (st->dmark[dv] != a) {
                st->dmark[dv] = a;
                st->dcount[dv] = 0;
                st->dlist[ndst++] = dv;
              }
              st->dcount[dv]++;
            }
          }
          for (int32_t k = 0; k < ndst; k++) {
            int dv = st->dlist[k];
            st->dmark[dv] = -1;
            int l = s->route[d * D + dv];
            int32_t xi = (int32_t)st->nx++;
            sim_xfer *x = &st->x[xi];
            x->act = a;
            x->src = d;
            x->dst = dv;
            x->link = l;
            x->req = now;
            x->start = x->end = 0;
            x->next_q = -1;
            x->next_act = st->xhead[a];
            st->xhead[a] = xi;
            x->refs = st->dcount[dv];
            x->cause = -1;
            if (st->qtail[l] >= 0) st->x[st->qtail[l]].next_q = xi;
            else st->qhead[l] = xi;
            st->qtail[l] = xi;
            mark_link(st, l, &nl);
          }
          st->ref[a] = local + ndst + s->act_out[a];
          if (st->ref[a] == 0) st->mem[d] -= s->act_bytes[a];
        }
      } else {
        int l = e.id;
        int32_t xi = st->lrun[l];
        sim_xfer *x = &st->x[xi];
        st->lrun[l] = -1;
        st->lprev[l] = xi;
        mark_link(st, l, &nl);
        release_orig(st, x->act);
        int32_t a = x->act;
        for (int32_t c = st->cons_off[a]; c < st->cons_off[a + 1]; c++) {
          int32_t cu = st->cons[c];
          if (udev[cu] == x->dst && --st->pending[cu] == 0) {
            st->ready_t[cu] = now;
            st->dep[cu] = SIM_CAUSE_XFER(xi);
            rq_push(st, key, x->dst, cu);
            mark_dev(st, x->dst, &nd);
          }
        }
      }
    }
  }
  st->evaluated = 1;
  if (done < U) {
    st->evaluated = 0;
    for (int32_t u = 0; u < U; u++)
      if (st->pending[u] > 0 || st->hn[udev[u]] > 0)
        return gopt_error_set(err, GOPT_EINVAL,
                              "simulate: the schedule cannot complete: node '%s' never runs",
                              gopt_node_name(s->g, s->order[sim_unit_first(st, u)]));
    return gopt_error_set(err, GOPT_EINVAL, "simulate: the schedule cannot complete");
  }
  double step = 0, tb = 0;
  for (int32_t u = 0; u < U; u++)
    if (st->end[u] > step) step = st->end[u];
  st->step = step;
  /* graph outputs are released at the end of the step */
  for (int32_t a = 0; a < A; a++)
    if (s->act_out[a]) release_orig(st, a);
  int feasible = 1;
  for (int d = 0; d < D; d++) {
    st->endmem[d] = st->mem[d];
    double cap = s->cl->devices[d].mem_bytes;
    st->over[d] = st->peak[d] > cap ? st->peak[d] - cap : 0;
    if (st->over[d] > 0) feasible = 0;
  }
  for (int l = 0; l < st->L; l++) tb += st->lbytes[l];
  if (r) {
    r->step_time = step;
    r->feasible = feasible;
    r->n_devices = D;
    r->n_links = st->L;
    r->n_kernels = (size_t)U;
    r->n_transfers = st->nx;
    r->transfer_bytes = tb;
    r->busy = st->busy;
    r->peak_mem = st->peak;
    r->mem_over = st->over;
    r->resident = st->resid;
    r->end_mem = st->endmem;
    r->link_bytes = st->lbytes;
    r->link_busy = st->lbusy;
  }
  return GOPT_OK;
}
