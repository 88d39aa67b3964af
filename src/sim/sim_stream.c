/* sim_stream.c: the light evaluation (no recording, no per-unit timeline) over a streaming data
 * layout: units renumbered by their default ready-queue rank, acts by their producer's number
 * (issue 24, fifth round).
 *
 * Why: a light evaluation's cost is the scattered reads of the units it executes (their costs,
 * input and output lists, consumers' pending counts and devices). Units run roughly in priority
 * order on each device (a device pops the smallest rank it has ready), so in the order of their
 * default rank k = drank[p] the per-unit arrays, the consumer lists and the per-act records are
 * read in a few sequential streams instead of at random (on the 80k GNMT 2,100 successive starts
 * on one device are more than 64 ranks apart, against 27,600 more than 64 positions apart).
 *
 * The layout is built once per simulator (gopt_sim_new): per unit k its inputs (renumbered acts)
 * and its first output act (the acts of unit k are numbered consecutively, in its output order),
 * per act its bytes, graph-output flag and consumers (renumbered units, in their original order),
 * the kernel times per device and the output bytes, in k order. A state keeps the device of every
 * unit in k order (kdev, written by apply and set_device next to uq), pending counts and per-act
 * records in k order.
 *
 * Exactness: the loop is run_loop's light instantiation (sim_run.c) with every unit and act id
 * renamed by a bijection. The ready-queue key of unit k under the default priorities is its rank,
 * which is k itself, so every pop returns the same unit; consumer lists keep their order, so new
 * transfers are numbered and queued in the same order; every other decision reads only device,
 * link and event state, which is the same. Transfer records hold renumbered acts during the loop
 * and the acts (and, in causes, producing positions) of the normal numbering when it ends. It
 * applies when the priorities are the defaults (sim_internal.h's pdef: unfused, no explicit order
 * or priority) and the cluster has at most 255 devices; otherwise sim_run.c's loop runs. */
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"
#include "util/util_internal.h"

void sim_stream_free(gopt_sim *s) {
  void *arrs[] = {s->k_u, s->k_in, s->k_a, s->k_cons, s->k_a2a, s->k_aprod, s->k_nin, s->k_cost,
                  s->k_src, s->k_gout};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
}

int sim_stream_build(gopt_sim *s) {
  const int32_t n = s->n, A = s->n_act, D = s->D;
  const int32_t *r2p = s->drunit, *p2k = s->drank;
  const size_t E = (size_t)s->in_off[n];
  int32_t *o2k = NULL; /* act -> renumbered act */
  if (GOPT_ALLOC(s->k_u, (size_t)n + 1) || GOPT_ALLOC(s->k_in, E + 1) || GOPT_ALLOC(s->k_a, (size_t)A + 1) ||
      GOPT_ALLOC(s->k_cons, E + 1) || GOPT_ALLOC(s->k_a2a, (size_t)A + 1) ||
      GOPT_ALLOC(s->k_aprod, (size_t)A + 1) || GOPT_ALLOC(s->k_nin, (size_t)n + 1) ||
      GOPT_ALLOC(s->k_cost, (size_t)D * n + 1) ||
      GOPT_ALLOC(s->k_src, (size_t)s->n_src + 1) || GOPT_ALLOC(s->k_gout, (size_t)s->n_gout + 1) ||
      GOPT_ALLOC(o2k, (size_t)A + 1))
    goto oom;
  int32_t na = 0, ni = 0, nc = 0;
  for (int32_t k = 0; k < n; k++) {
    int32_t p = r2p[k];
    s->k_u[k].in = ni;
    s->k_u[k].out = na;
    for (int32_t j = s->out_off[p]; j < s->out_off[p + 1]; j++) {
      int32_t a = s->out_act[j];
      o2k[a] = na;
      s->k_a2a[na] = a;
      s->k_aprod[na] = p;
      na++;
    }
    s->k_nin[k] = s->in_off[p + 1] - s->in_off[p];
    ni += s->k_nin[k];
    for (int d = 0; d < D; d++) s->k_cost[(size_t)d * n + k] = s->ncost[(size_t)d * n + p];
    s->k_u[k].ob = s->out_bytes[p];
  }
  s->k_u[n].in = ni;
  s->k_u[n].out = na;
  s->k_u[n].ob = 0;
  int fits = na == A; /* every act has one producer (sim.c) */
  for (int32_t k = 0; k < n; k++) fits &= s->k_nin[k] < (1 << 24); /* (sim_state's kpd) */
  if (!fits) goto oom; /* (not built: the normal loop runs) */
  for (int32_t k = 0; k < n; k++) {
    int32_t p = r2p[k], w = s->k_u[k].in;
    for (int32_t j = s->in_off[p]; j < s->in_off[p + 1]; j++) s->k_in[w++] = o2k[s->in_act[j]];
  }
  for (int32_t b = 0; b < A; b++) {
    int32_t a = s->k_a2a[b];
    s->k_a[b].bytes = s->act_bytes[a];
    s->k_a[b].cons = nc;
    s->k_a[b].out = s->act_out[a];
    for (int32_t j = s->cons_off[a]; j < s->cons_off[a + 1]; j++) s->k_cons[nc++] = p2k[s->cons[j]];
  }
  s->k_a[A].bytes = 0;
  s->k_a[A].cons = nc;
  s->k_a[A].out = 0;
  for (int32_t i = 0; i < s->n_src; i++) s->k_src[i] = p2k[s->src[i]];
  for (int32_t i = 0; i < s->n_gout; i++) s->k_gout[i] = o2k[s->gout[i]];
  free(o2k);
  return GOPT_OK;
oom:
  free(o2k);
  sim_stream_free(s);
  s->k_u = NULL;
  s->k_in = s->k_cons = s->k_a2a = s->k_aprod = s->k_nin = s->k_src = s->k_gout = NULL;
  s->k_a = NULL;
  s->k_cost = NULL;
  return GOPT_ENOMEM;
}

/* Pending events: sorted latest first, as sim_run.c's, whose order is (time, push sequence): a
 * new event has the largest sequence number, so it goes before (towards the end: earlier than)
 * only the events with a later time, and no sequence number is needed. */
static inline void kev_push(sim_kev *ev, int *nev, double t, int32_t id) {
  int i = (*nev)++;
  while (i > 0 && ev[i - 1].t <= t) {
    ev[i] = ev[i - 1];
    i--;
  }
  ev[i] = (sim_kev){t, id, 0};
}

int sim_stream_ok(const gopt_sim_state *st) { return st->pdef && st->kdev && st->s->k_u; }

/* Ready queues: sim_run.c's bitmaps (bm_push, bm_pop) and per device a cursor klo[d], a level-0
 * word index with no queued rank below it, so that a pop usually reads one word (the word at the
 * cursor) instead of three dependent ones. */
static inline void kq_push(gopt_sim_state *st, int d, int32_t r) {
  bm_push(st->bq[d], r);
  if ((r >> 6) < st->klo[d]) st->klo[d] = r >> 6;
}

/* Removes and returns the smallest rank of device d's (non-empty) queue q: the one bm_pop returns. */
static inline int32_t kq_pop(bm_q q, int32_t *lo) {
  uint32_t j0 = (uint32_t)*lo;
  uint64_t w0 = q.b0[j0];
  if (__builtin_expect(!w0, 0)) { /* the cursor's word is empty: the levels above find the next */
    uint32_t i2 = 0;
    while (!q.b2[i2]) i2++;
    uint32_t j1 = (i2 << 6) | (uint32_t)__builtin_ctzll(q.b2[i2]);
    j0 = (j1 << 6) | (uint32_t)__builtin_ctzll(q.b1[j1]);
    w0 = q.b0[j0];
    *lo = (int32_t)j0;
  }
  uint32_t r = (j0 << 6) | (uint32_t)__builtin_ctzll(w0);
  w0 &= w0 - 1;
  q.b0[j0] = w0;
  if (!w0) { /* (word j0 is the lowest non-empty one: its bit is the lowest in b1, as in bm_pop) */
    uint32_t j1 = j0 >> 6;
    uint64_t w1 = q.b1[j1] & ~(1ULL << (j0 & 63));
    q.b1[j1] = w1;
    if (!w1) q.b2[j1 >> 6] &= ~(1ULL << (j1 & 63));
  }
  return (int32_t)r;
}

/* Sets the stream's pending counts (with each unit's device) and kernel times on its device, and
 * queues its source units (after sim_run.c's reset of the devices, links and resident bytes, which
 * it shares). */
static void stream_reset(gopt_sim_state *st) {
  const gopt_sim *s = st->s;
  const int32_t n = s->n;
  const uint8_t *kdev = st->kdev;
  const int32_t *nin = s->k_nin;
  const double *kcost = s->k_cost;
  uint32_t *kpd = st->kpd;
  double *kc = st->kc;
  for (int32_t k = 0; k < n; k++) {
    kpd[k] = (uint32_t)kdev[k] << 24 | (uint32_t)nin[k];
    kc[k] = kcost[(size_t)kdev[k] * (size_t)n + (size_t)k];
  }
  for (int d = 0; d < st->D; d++) st->klo[d] = 0;
  for (int32_t i = 0; i < s->n_src; i++) {
    int32_t k = s->k_src[i];
    int d = kdev[k];
    kq_push(st, d, k);
    st->dv[d].hn++;
  }
}

/* The rare parts of the loop, kept out of it (fewer live values in the loop, no spills). */

/* Starts the transfers queued on the dirty links at `now`. */
static __attribute__((noinline)) void stream_links(gopt_sim_state *st, int32_t nl, double now, int32_t it,
                                                   int *nev) {
  const gopt_sim *s = st->s;
  for (int i = 0; i < nl; i++) {
    int l = st->ldirty[i];
    sim_link *k = &st->lk[l];
    k->flag = 0;
    if (k->run >= 0 || k->qhead < 0) continue;
    int32_t a = st->x[k->qhead].act; /* renumbered until the run ends */
    kev_push(st->kev, nev, sim_link_start(st, l, now, it, s->k_a[a].bytes, s->k_aprod[a]), st->D + l);
  }
}

/* The transfer on link l ended (iteration it): its act's reference, its consumers on the
 * destination. */
static __attribute__((noinline)) void stream_link_done(gopt_sim_state *st, int l, int32_t it, int32_t *nl,
                                                       int32_t *nd) {
  const gopt_sim *s = st->s;
  sim_link *k = &st->lk[l];
  int32_t xi = k->run;
  sim_xfer *x = &st->x[xi];
  k->run = -1;
  k->prev = xi;
  x->fin_it = it;
  if (!k->flag) {
    k->flag = 1;
    st->ldirty[(*nl)++] = l;
  }
  int32_t a = x->act;
  sim_kact *A = &st->kact[a];
  if (--A->ref == 0) st->dv[A->dev].mem -= s->k_a[a].bytes;
  const int32_t *kcons = s->k_cons;
  const uint32_t dst = (uint32_t)x->dst;
  uint32_t *kpd = st->kpd;
  for (int32_t c = s->k_a[a].cons; c < s->k_a[a + 1].cons; c++) {
    int32_t cu = kcons[c];
    if ((kpd[cu] >> 24) != dst) continue;
    if ((--kpd[cu] & 0xFFFFFF) == 0) {
      kq_push(st, (int)dst, cu);
      sim_dev *v = &st->dv[dst];
      v->hn++;
      if (!v->flag) {
        v->flag = 1;
        st->ddirty[(*nd)++] = dst;
      }
    }
  }
}

/* Unit u on device d read act a from another device: drops its reference to the copy there. */
static __attribute__((noinline)) void stream_remote_in(gopt_sim_state *st, int32_t a, int d, sim_dev *v) {
  const sim_xfer *xs = st->x;
  int32_t xi = st->kxh[a];
  while (xi >= 0 && xs[xi].dst != d) xi = xs[xi].next_act;
  if (xi >= 0 && --st->x[xi].refs == 0) v->mem -= st->s->k_a[a].bytes;
}

/* The consumers of act a (produced on d) from consumer index c on, the first of them on another
 * device: wakes the local ones, counts the others per device (dlist), issues the transfers. Returns
 * the act's local consumers plus transfers. */
static __attribute__((noinline)) int32_t stream_remote_out(gopt_sim_state *st, int32_t a, int d, int32_t c,
                                                           int32_t local, double now, size_t *nx,
                                                           int32_t *nl) {
  const gopt_sim *s = st->s;
  const int32_t *kcons = s->k_cons;
  uint32_t *kpd = st->kpd;
  sim_dev *dv = st->dv;
  int32_t ndst = 0;
  for (const int32_t c1 = s->k_a[a + 1].cons; c < c1; c++) {
    int32_t cu = kcons[c];
    int cd = (int)(kpd[cu] >> 24);
    if (cd == d) {
      local++;
      if ((--kpd[cu] & 0xFFFFFF) == 0) {
        kq_push(st, d, cu);
        dv[d].hn++; /* (d is on the dirty list: its unit just ended) */
      }
    } else {
      sim_dest_count(st, cd, a, &ndst);
    }
  }
  st->kxh[a] = -1;
  sim_xfers_issue(st, nx, a, d, ndst, now, &st->kxh[a], nl);
  return local + ndst;
}

/* The loop (see the top of the file): sim_run.c's run_loop for one = rec = tl = 0 in the
 * renumbered arrays. */
static __attribute__((noinline)) void stream_loop(gopt_sim_state *st, sim_lv *lv) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  const sim_ku *ku = s->k_u;
  const sim_ka *ka = s->k_a;
  const int32_t *kin = s->k_in, *kcons = s->k_cons;
  const double *kc = st->kc;
  int32_t *klo = st->klo;
  uint32_t *kpd = st->kpd;
  sim_kact *kact = st->kact;
  sim_dev *dv = st->dv;
  int32_t *ddirty = st->ddirty;
  const bm_q *const bq = st->bq;
  sim_kev *ev = st->kev;
  int nev = 0;
  size_t nx = 0;
  double now = 0, step = 0;
  int32_t it = 0, done = 0, nd = lv->nd, nl = 0;
  for (;;) {
    /* dispatch idle devices and links */
    for (int i = 0; i < nd; i++) {
      int d = ddirty[i];
      sim_dev *v = &dv[d];
      v->flag = 0;
      if (v->running >= 0 || v->hn == 0) continue;
      int32_t u = kq_pop(bq[d], &klo[d]);
      v->hn--;
      double dur = kc[u];
      v->busy += sim_fx(dur);
      const sim_ku U0 = ku[u];
      v->mem += U0.ob;
      if (v->mem > v->speak) v->speak = v->mem;
      v->running = u;
      __builtin_prefetch(&kin[U0.in]); /* what its end reads */
      __builtin_prefetch(&ka[U0.out]);
      __builtin_prefetch(&kact[U0.out], 1);
      kev_push(ev, &nev, now + dur, d);
    }
    nd = 0;
    if (nl) {
      stream_links(st, nl, now, it, &nev);
      nl = 0;
    }
    if (nev == 0) break;
    /* process every event at the next instant */
    now = ev[nev - 1].t;
    while (nev > 0 && ev[nev - 1].t == now) {
      const int32_t id = ev[--nev].id;
      if (id >= D) {
        stream_link_done(st, id - D, it, &nl, &nd);
        continue;
      }
      int d = id;
      sim_dev *v = &dv[d];
      int32_t u = v->running;
      v->running = -1;
      v->prev_unit = u;
      done++;
      step = now;
      if (!v->flag) {
        v->flag = 1;
        ddirty[nd++] = d;
      }
      const sim_ku U0 = ku[u], U1 = ku[u + 1];
      /* inputs: drop this unit's reference to the buffer it read on d */
      for (int32_t j = U0.in; j < U1.in; j++) {
        int32_t a = kin[j];
        sim_kact *A = &kact[a];
        if (A->dev == d) {
          if (--A->ref == 0) v->mem -= ka[a].bytes;
        } else {
          stream_remote_in(st, a, d, v);
        }
      }
      /* outputs: wake local consumers, send one copy to every other device that needs it */
      for (int32_t a = U0.out; a < U1.out; a++) {
        int32_t held = 0;
        const int32_t c1 = ka[a + 1].cons;
        sim_kact *A = &kact[a];
        A->dev = d;
        for (int32_t c = ka[a].cons; c < c1; c++) {
          int32_t cu = kcons[c];
          uint32_t w = kpd[cu];
          if ((w >> 24) != (uint32_t)d) { /* a consumer elsewhere: this act goes to other devices */
            held = stream_remote_out(st, a, d, c, held, now, &nx, &nl);
            break;
          }
          held++;
          kpd[cu] = --w;
          if ((w & 0xFFFFFF) == 0) {
            __builtin_prefetch(&kc[cu]); /* what its start reads */
            __builtin_prefetch(&ku[cu]);
            bm_push(bq[d], cu);
            if ((cu >> 6) < klo[d]) klo[d] = cu >> 6;
            v->hn++;
          }
        }
        A->ref = held + ka[a].out;
        if (A->ref == 0) v->mem -= ka[a].bytes;
      }
    }
    it++;
  }
  lv->now = now;
  lv->step = step;
  lv->it = it;
  lv->done = done;
  lv->nd = nd;
  lv->nl = nl;
  st->nev = nev;
  st->evseq = 0; /* (read by checkpoints only, which a light evaluation does not make) */
  st->nx = nx;
}

int sim_stream_run(gopt_sim_state *st, sim_lv *lv) {
  const gopt_sim *s = st->s;
  stream_reset(st);
  stream_loop(st, lv);
  if (lv->done < st->U) return 0;
  /* transfers in the normal numbering (causes name positions or transfer numbers already) */
  for (size_t i = 0; i < st->nx; i++) st->x[i].act = s->k_a2a[st->x[i].act];
  /* graph outputs are released at the end of the step */
  for (int32_t i = 0; i < s->n_gout; i++) {
    int32_t a = s->k_gout[i];
    if (--st->kact[a].ref == 0) st->dv[st->kact[a].dev].mem -= s->k_a[a].bytes;
  }
  return 1;
}
