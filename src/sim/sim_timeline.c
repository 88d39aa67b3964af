/* sim_timeline.c: the last evaluation's timeline as plain arrays for reports (sim.h): every kernel
 * and transfer, and each device's memory over time, rebuilt after the fact from the unit and
 * transfer times by the simulator's memory rules (docs/SIMULATOR.md), so the event loop records
 * nothing extra. */
#include <stdlib.h>

#include "sim/sim_internal.h"
#include "util/util_internal.h"

size_t gopt_sim_timeline(const gopt_sim_state *st, gopt_sim_item *items, size_t max) {
  if (!sim_timeline_need(st)) return 0;
  size_t k = 0;
  for (int32_t u = 0; u < st->U; u++, k++)
    if (k < max)
      items[k] = (gopt_sim_item){0, st->s->order[sim_unit_first(st, u)], st->uq[u].dev, st->ur[u].start,
                                 st->ur[u].end};
  for (size_t i = 0; i < st->nx; i++, k++)
    if (k < max) items[k] = (gopt_sim_item){1, (int32_t)i, st->x[i].link, st->x[i].start, st->x[i].end};
  return k;
}

/* One change of a device's bytes; seq orders changes as the event loop made them: the dispatch
 * phase of iteration i (allocations) is 2i, its processing phase (releases) 2i + 1. */
typedef struct mem_ev {
  double t, d;
  int64_t seq;
} mem_ev;

static int ev_cmp(const void *a, const void *b) {
  const mem_ev *x = a, *y = b;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The consumer unit of act a on device dev that ended last (-1 when none). */
static int32_t last_use(const gopt_sim_state *st, int32_t a, int dev) {
  int32_t best = -1;
  for (int32_t c = st->cons_off[a]; c < st->cons_off[a + 1]; c++) {
    int32_t cu = st->cons[c];
    if (st->uq[cu].dev == dev && (best < 0 || st->ur[cu].fin_it > st->ur[best].fin_it)) best = cu;
  }
  return best;
}

int gopt_sim_memory_curve(const gopt_sim_state *st, int dev, double **t, double **bytes, size_t *n,
                          gopt_error *err) {
  *t = *bytes = NULL;
  *n = 0;
  if (!sim_timeline_need(st)) return gopt_error_set(err, GOPT_EINVAL, "memory curve: no evaluation");
  if (dev < 0 || dev >= st->D) return gopt_error_set(err, GOPT_EINVAL, "memory curve: no device %d", dev);
  const gopt_sim *s = st->s;
  size_t cap = 2 * ((size_t)st->out_off[st->U] + st->nx) + 2, ne = 0;
  mem_ev *ev = NULL;
  if (GOPT_ALLOC(ev, cap)) return gopt_error_set(err, GOPT_ENOMEM, "memory curve: out of memory");
  for (int32_t u = 0; u < st->U; u++) {
    const sim_ur *W = &st->ur[u];
    if (st->uq[u].dev != dev) continue;
    for (int32_t j = st->out_off[u]; j < st->out_off[u + 1]; j++) {
      int32_t a = st->out_act[j], c = last_use(st, a, dev);
      double b = s->act_bytes[a], ft = W->end;
      int64_t fseq = 2 * (int64_t)W->fin_it + 1; /* no reader: released when it ends */
      if (c >= 0) {
        ft = st->ur[c].end;
        fseq = 2 * (int64_t)st->ur[c].fin_it + 1;
      }
      for (size_t i = 0; i < st->nx; i++)
        if (st->x[i].act == a && 2 * (int64_t)st->x[i].fin_it + 1 > fseq) {
          ft = st->x[i].end;
          fseq = 2 * (int64_t)st->x[i].fin_it + 1;
        }
      ev[ne++] = (mem_ev){W->start, b, 2 * (int64_t)W->start_it};
      if (!s->act_out[a]) ev[ne++] = (mem_ev){ft, -b, fseq}; /* graph outputs stay to the end */
    }
  }
  for (size_t i = 0; i < st->nx; i++) {
    const sim_xfer *x = &st->x[i];
    if (x->dst != dev) continue;
    double b = s->act_bytes[x->act];
    int32_t c = last_use(st, x->act, dev);
    ev[ne++] = (mem_ev){x->start, b, 2 * (int64_t)x->start_it};
    if (c >= 0) ev[ne++] = (mem_ev){st->ur[c].end, -b, 2 * (int64_t)st->ur[c].fin_it + 1};
  }
  qsort(ev, ne, sizeof *ev, ev_cmp);
  double *tt = NULL, *bb = NULL;
  if (GOPT_ALLOC(tt, ne + 2) || GOPT_ALLOC(bb, ne + 2)) {
    free(tt);
    free(ev);
    return gopt_error_set(err, GOPT_ENOMEM, "memory curve: out of memory");
  }
  /* One point per instant holding the most bytes held at that instant (zero-length kernels can
   * allocate and release within one), so the curve's maximum is the peak. */
  double m = st->resid[dev];
  size_t k = 0;
  tt[k] = 0;
  bb[k++] = m;
  for (size_t i = 0; i < ne; i++) {
    m += ev[i].d;
    if (tt[k - 1] == ev[i].t) {
      if (m > bb[k - 1]) bb[k - 1] = m;
    } else {
      tt[k] = ev[i].t;
      bb[k++] = m;
    }
  }
  if (tt[k - 1] < st->step) {
    tt[k] = st->step;
    bb[k] = bb[k - 1];
    k++;
  }
  free(ev);
  *t = tt;
  *bytes = bb;
  *n = k;
  return GOPT_OK;
}
