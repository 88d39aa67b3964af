/* sim_run.c: one event-driven step simulation over a state's decisions (gopt_sim_evaluate), run
 * in full or replayed from a checkpoint after incremental changes.
 *
 * Events are kernel completions (one per device at a time) and transfer completions (one per
 * link at a time), so at most D + L are pending (a small sorted array). All events at one
 * instant are processed before idle devices and links pick new work, so simultaneous completions
 * never depend on processing order. Nothing is allocated here.
 *
 * Loop structure: iteration `it` = (checkpoint if due) + dispatch idle devices and links at `now`
 * + advance `now` to the next event time and process every event at that instant. The loop is
 * one always-inline function instantiated for one device (no transfer code) or many, recording
 * (incremental on) or not. Ready queues are per-device bitmaps over unit ranks: a unit's rank is
 * its position in the order (priority descending, unit ascending), computed by apply (known for
 * the default priorities, a radix sort for explicit ones, the order for a strict one) and kept
 * by set_priority; a pop takes the smallest rank, exactly the unit a (key, unit) heap pops.
 *
 * ---- Exact incremental re-evaluation -------------------------------------------------------
 * A recording run stores in each unit's line ready_it (iteration whose processing phase put it
 * on a ready queue, -1 for units ready at reset) and fin_it (iteration whose processing phase
 * handled its completion), the start order (slog), logs of every decrement of a unit's pending
 * count (plog), an act's buffer references (rlog) and a transfer's consumer references (xlog),
 * and every `ck_every` iterations a checkpoint of the O(D + L) loop state: scalars, log lengths,
 * the per-device records (running unit, previous unit, order position, busy, memory, peak,
 * dirty flag), the per-link records (queue head and tail, transfer in flight, previous one,
 * bytes, busy, dirty flag), the dirty lists and the pending events.
 *
 * Claim: let K be the first iteration whose processing phase reads a changed decision value in
 * the old run. Then the old and the new run are identical up to the top of iteration K (by
 * induction: every step before reads only unchanged values). Where are decisions read?
 *   - the device of a unit v: (a) at reset, to queue an initially ready v (K = 0: full run);
 *     (b) when a producer of v finishes (local consumer or transfer destination): processing
 *     phase of min over v's producers of fin_it; (c) when a transfer of v's input completes (its
 *     producer finished earlier, so later than (b)); (d) when v or a consumer of v's outputs
 *     finishes, or a transfer of v's output completes (after v started, after (b)); (e) the
 *     dispatch phase reads only the device being dispatched and the popped unit's own cost, and
 *     v cannot be popped before it is ready (after (b)); (f) resident bytes and the per-device
 *     unit counts are not loop state (resid, dcnt: kept current by set_device); (g) with an
 *     explicit order each device's sequence is built from the placement at reset, so a device
 *     change there runs in full.
 *   So for a device change of v, K = min over v's input producers of fin_it (0 with no input).
 *   - the priority of v: only through ranks. A change moves v's rank; the others keep their
 *     relative order (numbers between shift by one), and a queue pops by relative order only. v's
 *     rank is read when v is queued, in the processing phase of ready_it[v] (-1: at reset, a
 *     full run), so K = ready_it[v]. With an explicit order priorities are not used at all.
 * Restoring the state at the top of a checkpoint iteration C <= K: the loop scalars, device and
 * link records and pending events come from the checkpoint; every counter decremented after C is
 * re-incremented from the logs (decrements are by one, so the logs are the undo); the ready
 * queues at C hold exactly the units with ready_it < C that started at or after C (the start
 * log's suffix, where each unit's ready count, units started + kernels done when the iteration
 * that readied it began processing, tells them apart: below C's count, ready before C; above, not;
 * equal, its ready_it decides), queued again with their current ranks; a link's queue is the chain of next_q
 * links from its saved head, whose tail may have gained a successor after C (reset to -1); per-
 * unit and per-transfer fields written after C (start, end, cause, ready_t, dep, ready_it,
 * fin_it, a transfer's times, transfers past the saved count) and per-act fields (ref, producer
 * device, first transfer: set when the act is produced) are rewritten by the replay before they
 * are read. The replay is then the same deterministic computation a full run does from C on.
 * Memory is tracked as the non-resident bytes (mem, dpeak); the reported peak is resident +
 * dpeak, exact because byte counts are integers (sums below 2^53 are exact, so summation order
 * never matters), which is also why this equals the former resident-inclusive accounting bit for
 * bit.
 *
 * Memory bound of the records, per state: the start log (U ints), three logs of at most (input
 * edges + graph outputs) ints each, the resident-consumer counts (resident tensors x D ints), and
 * at most SIM_CK_MAX (256) checkpoints of sizeof(sim_ck) + D sizeof(sim_dev) + L sizeof(sim_link)
 * + (D + L) (sizeof(sim_ev) + 4) bytes (under 3 KiB for 8 devices and 28 links); when a run needs
 * more checkpoints every other one is dropped and the spacing doubles, so a replay starts at most
 * 2 * iterations / SIM_CK_MAX iterations before the earliest affected one. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sim/sim_internal.h"

/* ---- pending events: at most D + L, kept sorted latest first, so the earliest is the last ---- */
static inline int ev_less(const sim_ev *a, const sim_ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static inline void ev_push(sim_ev *ev, int *nev, uint64_t *evseq, double t, int32_t kind,
                           int32_t id) {
  int i = (*nev)++;
  sim_ev e = {t, (*evseq)++, kind, id};
  while (i > 0 && ev_less(&ev[i - 1], &e)) {
    ev[i] = ev[i - 1];
    i--;
  }
  ev[i] = e;
}

/* ---- per-device ready queues: bitmaps over unit ranks, smallest rank (highest priority, then
 * lowest unit) first. Three levels: b0 has a bit per rank, b1 a bit per b0 word, b2 a bit per b1
 * word; b2 has more than one word only beyond 2^18 units (scanned from the start). ---------- */
static inline bm_q bm_at(const gopt_sim_state *st, int d) { return st->bq[d]; }
/* (bm_push and bm_pop are in sim_internal.h, shared with sim_stream.c.) */

/* Smallest rank in the (non-empty) queue. */
static inline int32_t bm_min(bm_q q) {
  uint32_t i2 = 0;
  while (!q.b2[i2]) i2++;
  uint32_t j1 = (i2 << 6) | (uint32_t)__builtin_ctzll(q.b2[i2]);
  uint32_t j0 = (j1 << 6) | (uint32_t)__builtin_ctzll(q.b1[j1]);
  return (int32_t)((j0 << 6) | (uint32_t)__builtin_ctzll(q.b0[j0]));
}

/* ---- checkpoints ---------------------------------------------------------------------------- */
static size_t al8(size_t x) { return (x + 7) & ~(size_t)7; }

size_t sim_ck_size(int D, int L) {
  return al8(sizeof(sim_ck)) + (size_t)D * sizeof(sim_dev) + (size_t)L * sizeof(sim_link) +
         (size_t)(D + L) * sizeof(sim_ev) + al8((size_t)(D + L) * sizeof(int32_t));
}

ck_view sim_ck_at(gopt_sim_state *st, int32_t c) { return sim_ck_in(st, st->ck, c); }

ck_view sim_ck_in(const gopt_sim_state *st, unsigned char *blob, int32_t c) {
  unsigned char *b = blob + (size_t)c * st->ck_size;
  ck_view v;
  v.h = (sim_ck *)(void *)b;
  v.dv = (sim_dev *)(void *)(b + al8(sizeof(sim_ck)));
  v.lk = (sim_link *)(void *)(v.dv + st->D);
  v.ev = (sim_ev *)(void *)(v.lk + st->L);
  v.dirty = (int32_t *)(void *)(v.ev + st->D + st->L);
  return v;
}

#define CPY(dst, src, cnt) memcpy((dst), (src), (size_t)(cnt) * sizeof *(src))

/* Saves the loop state at the top of iteration lv->it (before dispatch) as the next checkpoint;
 * when all are used, keeps every other one and doubles the spacing first. Each device's segment
 * peak (speak) is folded into its running peak (dpeak) and restarts; the checkpoint keeps the
 * segment's peak in its speak (a merged pair of segments keeps the larger). */
void sim_ck_save(gopt_sim_state *st, const sim_lv *lv, const sim_ev *ev, int nev, uint64_t evseq,
                 size_t nx) {
  if (st->nck == st->ck_max) {
    for (int32_t i = 1; i < st->ck_max / 2; i++) {
      ck_view a = sim_ck_at(st, 2 * i - 1), b = sim_ck_at(st, 2 * i);
      for (int d = 0; d < st->D; d++)
        if (a.dv[d].speak > b.dv[d].speak) b.dv[d].speak = a.dv[d].speak;
      memcpy(st->ck + (size_t)i * st->ck_size, st->ck + (size_t)(2 * i) * st->ck_size, st->ck_size);
    }
    /* the segment after the last kept checkpoint absorbs the dropped odd one */
    ck_view a = sim_ck_at(st, st->ck_max - 1);
    for (int d = 0; d < st->D; d++)
      if (a.dv[d].speak > st->dv[d].speak) st->dv[d].speak = a.dv[d].speak;
    st->nck = st->ck_max / 2;
    st->ck_every *= 2;
  }
  ck_view v = sim_ck_at(st, st->nck++);
  v.h->v = *lv;
  v.h->evseq = evseq;
  v.h->nx = (int32_t)nx;
  v.h->nev = nev;
  for (int d = 0; d < st->D; d++) {
    sim_dev *x = &st->dv[d];
    if (x->speak > x->dpeak) x->dpeak = x->speak;
  }
  CPY(v.dv, st->dv, st->D);
  for (int d = 0; d < st->D; d++) st->dv[d].speak = st->dv[d].mem;
  CPY(v.lk, st->lk, st->L);
  CPY(v.ev, ev, nev);
  CPY(v.dirty, st->ddirty, lv->nd);
  CPY(v.dirty + st->D, st->ldirty, lv->nl);
}

/* Empties the ready queues (a run that could not complete leaves entries) and lays out the
 * strict sequences: device d's units in seq[hbase[d] .. hbase[d] + dcnt[d]). */
static void queues_reset(gopt_sim_state *st) {
  st->hbase[0] = 0;
  for (int d = 0; d < st->D; d++) {
    st->hbase[d + 1] = st->hbase[d] + st->dcnt[d];
    if (st->dv[d].hn) memset(st->bm + (size_t)d * st->bm_words, 0, st->bm_words * sizeof *st->bm);
    st->dv[d].hn = 0;
  }
}

/* Rolls the state back to checkpoint c of the last (recording, successful) run, for replaying
 * with the current decisions; the caller guarantees no change is visible before its iteration
 * (see the top of this file). Fills *lv. */
static void ck_restore(gopt_sim_state *st, int32_t c, sim_lv *lv) {
  const int D = st->D, L = st->L;
  ck_view v = sim_ck_at(st, c);
  const sim_lv *o = &v.h->v;
  sim_ur *ur = st->ur;
  /* undo the decrements made after the checkpoint: from the end of the run (counters 0), or from
   * where a converged delta replay left them when that is not before the checkpoint (a counter's
   * value at a log position is its end value plus its entries from there on; an act's or a
   * transfer's count starts when it is made, so the counters cannot be moved forward: from before
   * the checkpoint they are set to their end values first) */
  int32_t np = st->np, nr = st->nr, nxr = st->nxr;
  if (st->cnt_mid) {
    if (o->np <= st->cnt_np && o->nr <= st->cnt_nr && o->nxr <= st->cnt_nxr) {
      np = st->cnt_np;
      nr = st->cnt_nr;
      nxr = st->cnt_nxr;
    } else {
      memset(st->pend, 0, (size_t)st->U * sizeof *st->pend);
      memset(st->aref, 0, (size_t)st->s->n_act * sizeof *st->aref);
      for (size_t i = 0; i < st->nx; i++) st->x[i].refs = 0;
    }
    st->cnt_mid = 0;
  }
  if (st->delta_on) /* the replay may stop soon: most of these units' lines are not read */
    for (int32_t i = o->np; i < np; i++) st->pend[st->plog[i]]++;
  else
    for (int32_t i = o->np; i < np; i++) {
      st->pend[st->plog[i]]++;
      __builtin_prefetch(&ur[st->plog[i]], 1); /* the replay reads these units' lines */
    }
  for (int32_t i = o->nr; i < nr; i++) st->aref[st->rlog[i]]++;
  for (int32_t i = o->nxr; i < nxr; i++) st->x[st->xlog[i]].refs++;
  /* devices and links as they were (queues refilled below, dirty flags from the lists) */
  CPY(st->dv, v.dv, D);
  CPY(st->lk, v.lk, L);
  int32_t queued = 0; /* units in the ready queues at the checkpoint */
  for (int d = 0; d < D; d++) {
    queued += st->dv[d].hn;
    st->dv[d].hn = 0; /* the queues are empty after a complete run */
    st->dv[d].speak = st->dv[d].mem;
  }
  st->hbase[0] = 0;
  for (int d = 0; d < D; d++) st->hbase[d + 1] = st->hbase[d] + st->dcnt[d];
  /* ready queues: ready before the checkpoint, started at or after it (the scan stops when all
   * are found) */
  const int32_t ce = o->ns + o->done;
  for (int32_t i = o->ns, found = 0; i < st->ns && found < queued; i++) {
    if (st->sre[i] > ce) continue; /* (read sequentially; the unit's line only on a tie) */
    if (st->sre[i] == ce && sim_ur_at(st, st->slog[i])->ready_it >= o->it) continue;
    found++;
    int32_t u = st->slog[i];
    {
      int d = st->uq[u].dev;
      bm_push(bm_at(st, d), st->uq[u].rank);
      st->dv[d].hn++;
    }
  }
  *lv = *o;
  lv->next_ck = o->it + st->ck_every;
  st->nck = c + 1;
  st->evseq = v.h->evseq;
  st->nx = (size_t)v.h->nx;
  st->nev = v.h->nev;
  CPY(st->ev, v.ev, st->nev);
  CPY(st->ddirty, v.dirty, o->nd);
  CPY(st->ldirty, v.dirty + D, o->nl);
  for (int l = 0; l < L; l++)
    if (st->lk[l].qtail >= 0) st->x[st->lk[l].qtail].next_q = -1;
  st->np = o->np;
  st->nr = o->nr;
  st->nxr = o->nxr;
  st->ns = o->ns;
}

/* Resident bytes per device: each resident tensor counts once on every device with a consumer. */
static void resident_bytes(gopt_sim_state *st) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  const int32_t *uo = st->unit_of;
  const sim_uq *uq = st->uq;
#define RDEV(p_) uq[uo ? uo[p_] : (p_)].dev
  for (int d = 0; d < D; d++) {
    st->resid[d] = 0;
    st->dv[d].dmark = -1;
  }
  if (D == 1) {
    for (int32_t q = 0; q < s->n_res; q++) st->resid[0] += s->res_bytes[q];
    return;
  }
  if (D <= 64 && s->res_int) { /* integer sums, exact in any order (sim_internal.h) */
    int64_t acc[4][64];
    memset(acc, 0, sizeof acc);
    const int32_t *rp = s->res1_pos, n1 = s->n_res1;
    const int64_t *rb = s->res1_bytes;
    int32_t i = 0;
    for (; i + 4 <= n1; i += 4) { /* four sums: no chain through one counter */
      acc[0][RDEV(rp[i])] += rb[i];
      acc[1][RDEV(rp[i + 1])] += rb[i + 1];
      acc[2][RDEV(rp[i + 2])] += rb[i + 2];
      acc[3][RDEV(rp[i + 3])] += rb[i + 3];
    }
    for (; i < n1; i++) acc[0][RDEV(rp[i])] += rb[i];
    const uint64_t all = D == 64 ? ~0ULL : (1ULL << D) - 1;
    for (int32_t k = 0; k < s->n_resm; k++) {
      int32_t q = s->resm[k];
      uint64_t m = 0;
      for (int32_t j = s->res_off[q]; j < s->res_off[q + 1] && m != all; j++)
        m |= 1ULL << RDEV(s->res_cons[j]);
      for (; m; m &= m - 1) acc[0][__builtin_ctzll(m)] += (int64_t)s->res_bytes[q];
    }
    for (int d = 0; d < D; d++) st->resid[d] = (double)(acc[0][d] + acc[1][d] + acc[2][d] + acc[3][d]);
    return;
  }
  if (D <= 64) { /* the devices with a consumer of q as a bit set (sums in q order, as below) */
    for (int32_t q = 0; q < s->n_res; q++) {
      uint64_t m = 0;
      for (int32_t j = s->res_off[q]; j < s->res_off[q + 1]; j++) m |= 1ULL << RDEV(s->res_cons[j]);
      for (; m; m &= m - 1) st->resid[__builtin_ctzll(m)] += s->res_bytes[q];
    }
    return;
  }
  for (int32_t q = 0; q < s->n_res; q++)
    for (int32_t j = s->res_off[q]; j < s->res_off[q + 1]; j++) {
      int d = RDEV(s->res_cons[j]);
      if (st->dv[d].dmark != q) {
        st->dv[d].dmark = q;
        st->resid[d] += s->res_bytes[q];
      }
    }
#undef RDEV
  for (int d = 0; d < D; d++) st->dv[d].dmark = -1;
}

/* Fingerprint weight m(u) of unit u waiting in a ready queue: the unit and why it became ready (a
 * unit, or a transfer by its act and destination (SIM_CAUSE_XID), so that transfer numbering may
 * differ between runs); whether it became ready at `now` is the sum h1 (sim_lv). */
static inline uint64_t hready(int32_t u, const sim_ur *W) {
  uint64_t dep = (uint64_t)(int64_t)W->dep;
  return sim_mix((uint64_t)(uint32_t)u * 0x9E3779B97F4A7C15ULL ^ dep * 0xD6E8FEB86659FD93ULL) | 1;
}

/* Computes m(u) when u becomes ready and keeps it in its line for its start. */
static inline uint64_t hready_set(int32_t u, sim_ur *W) {
  uint64_t m = hready(u, W);
  W->hm[0] = (uint32_t)m;
  W->hm[1] = (uint32_t)(m >> 32);
  return m;
}
static inline uint64_t hready_get(const sim_ur *W) { return (uint64_t)W->hm[1] << 32 | W->hm[0]; }

/* Resets everything for a run from time 0 and pushes the initially ready units; `stream`: for a
 * run in the streaming layout, which sets its own pending counts and ready units (sim_stream.c). */
static void full_reset(gopt_sim_state *st, sim_lv *lv, int rec, int tl, int stream) {
  const int D = st->D, L = st->L;
  const int32_t U = st->U;
  const int32_t *in_off = st->in_off;
  sim_ur *ur = st->ur;
  queues_reset(st);
  if (!stream)
    for (int32_t u = 0; u < U; u++) st->pend[u] = in_off[u + 1] - in_off[u];
  for (int d = 0; d < D; d++) {
    sim_dev *v = &st->dv[d];
    v->running = v->prev_unit = v->dmark = -1;
    v->busy = 0;
    v->mem = v->dpeak = v->speak = 0;
    v->seqpos = 0;
    st->ddirty[d] = d; /* every device is dirty at the start */
    v->flag = 1;
  }
  for (int l = 0; l < L; l++) {
    sim_link *k = &st->lk[l];
    k->qhead = k->qtail = k->run = k->prev = -1;
    k->bytes = 0;
    k->busy = 0;
    k->flag = 0;
  }
  if (st->strict) { /* each device's units in rank order */
    for (int d = 0; d < D; d++) st->dv[d].dcount = st->hbase[d];
    for (int32_t i = 0; i < U; i++) {
      int32_t u = st->rorder[i];
      st->seq[st->dv[st->uq[u].dev].dcount++] = u;
    }
  }
  st->nx = 0;
  st->nev = 0;
  st->evseq = 0;
  if (tl) st->nspl = 0; /* every unit line is written afresh */
  st->cnt_mid = 0;      /* every counter is set when its unit, act or transfer is */
  resident_bytes(st);
  uint64_t h = 0;
  /* the units with no input (unfused: the listed positions) */
  const int32_t *src = st->fused ? NULL : st->s->src, nsrc = stream ? 0 : st->fused ? U : st->s->n_src;
  for (int32_t i = 0; i < nsrc; i++) {
    int32_t u = src ? src[i] : i;
    if (st->pend[u] == 0) {
      int d = st->uq[u].dev;
      if (tl) {
        ur[u].ready_t = 0;
        ur[u].dep = -1;
        ur[u].ready_it = -1;
        ur[u].ep = 0;
      }
      if (rec) ur[u].re = -1;
      bm_push(bm_at(st, d), st->uq[u].rank);
      st->dv[d].hn++;
      if (rec) {
        uint64_t m = hready_set(u, &ur[u]);
        h += m;
      }
    }
  }
  memset(lv, 0, sizeof *lv);
  lv->h = h;
  lv->h1 = h; /* ready at time 0 = now */
  lv->nd = D;
  st->np = st->nr = st->nxr = st->ns = 0;
  if (rec) {
    int32_t every = U / (st->ck_max / 2);
    st->ck_every = every < 8 ? 8 : every;
    st->nck = 0;
  }
}

/* The event loop from the state in *lv (and st) to the end. `one`: a single device (no links);
 * `rec`: record for incremental re-evaluation; `tl`: write the per-unit timeline (the unit lines:
 * times, causes, iterations; implied by rec). Without it the loop touches no unit line: a light
 * evaluation (gopt_sim_evaluate). Constant arguments specialise the inlined copies.
 * Returns 1 when a delta replay converged to the recorded run (sim_delta_try spliced its tail;
 * the state is complete), else 0. */
static inline __attribute__((always_inline)) int run_loop(gopt_sim_state *st, sim_lv *lv,
                                                         const int one, const int rec,
                                                         const int tl) {
  const gopt_sim *s = st->s;
  const int32_t U = st->U;
  const int strict = st->strict;
  const int32_t *in_off = st->in_off, *in_act = st->in_act, *out_off = st->out_off,
                *out_act = st->out_act, *cons_off = st->cons_off, *cons = st->cons;
  const double *ucost = st->ucost, *abytes = s->act_bytes, *uob = st->uobytes;
  const uint8_t *aout = s->act_out;
  sim_ur *ur = st->ur;
  sim_dev *dv = st->dv;
  sim_link *lk = st->lk;
  sim_act *act = st->act;
  int32_t *aref = st->aref, *pend = st->pend;
  const sim_uq *uq = st->uq;
  sim_xfer *xs = st->x;
  int32_t *ddirty = st->ddirty, *ldirty = st->ldirty;
  sim_ev *ev = st->ev;
  int nev = st->nev;
  uint64_t evseq = st->evseq;
  size_t nx = st->nx;
  double now = lv->now, step = lv->step;
  int32_t it = lv->it, done = lv->done, nd = lv->nd, nl = lv->nl, next_ck = lv->next_ck;
  int32_t ecount = 0;
  int32_t np = st->np, nr = st->nr, nxr = st->nxr, ns = st->ns;
  int32_t *const plw = st->lw[0], *const rlw = st->lw[1], *const xlw = st->lw[2];
  const int32_t plb = st->lwb[0], rlb = st->lwb[1], xlb = st->lwb[2];
  uint64_t hh = lv->h, hh1 = lv->h1;
  const bm_q *const bq = st->bq;
  const int32_t *const runit = sim_runit(st);
  const int32_t nspl = st->nspl; /* (a replay leaves the splice list as it is) */

#define MARK_DEV(d_)            \
  do {                          \
    if (!dv[d_].flag) {         \
      dv[d_].flag = 1;          \
      ddirty[nd++] = (d_);      \
    }                           \
  } while (0)
#define MARK_LINK(l_)           \
  do {                          \
    if (!lk[l_].flag) {         \
      lk[l_].flag = 1;          \
      ldirty[nl++] = (l_);      \
    }                           \
  } while (0)
#define READY(c_, dv_, why_)                 \
  do {                                       \
    if (tl) {                                \
      if ((c_)->ep != nspl) sim_ur_settle(st, (c_)); \
      (c_)->ready_t = now;                   \
      (c_)->dep = (why_);                    \
      (c_)->ready_it = it;                   \
    }                                        \
    if (rec) {                               \
      (c_)->re = ecount;                     \
      uint64_t m_ = hready_set(cu, (c_));    \
      hh += m_;                              \
      hh1 += m_;                             \
    }                                        \
    bm_push(bq[dv_], uq[cu].rank);          \
    dv[dv_].hn++;                            \
    MARK_DEV(dv_);                           \
  } while (0)

  for (;;) {
    if (rec && (it == next_ck || done >= st->dl_done)) {
      lv->now = now;
      lv->step = step;
      lv->it = it;
      lv->done = done;
      lv->nd = nd;
      lv->nl = nl;
      lv->np = np;
      lv->nr = nr;
      lv->nxr = nxr;
      lv->ns = ns;
      lv->h = hh;
      lv->h1 = hh1;
      if (st->delta_on && sim_delta_try(st, lv, ev, nev, evseq, nx)) return 1;
      if (it == next_ck) {
        sim_ck_save(st, lv, ev, nev, evseq, nx);
        next_ck = it + st->ck_every;
      }
    }
    /* dispatch idle devices and links */
    for (int i = 0; i < nd; i++) {
      int d = ddirty[i];
      sim_dev *v = &dv[d];
      v->flag = 0;
      if (v->running >= 0 || v->hn == 0) continue;
      bm_q q = bq[d];
      if (strict && bm_min(q) != uq[st->seq[st->hbase[d] + v->seqpos]].rank) continue;
      int32_t u = runit[bm_pop(q)];
      sim_ur *W = &ur[u];
      if (tl && W->ep != nspl) sim_ur_settle(st, W); /* queued before this run */
      v->hn--;
      if (strict) v->seqpos++;
      if (rec) {
        uint64_t m = hready_get(W);
        hh -= m;
        if (W->ready_t == now) hh1 -= m;
      }
      double dur = ucost[(size_t)d * U + u];
      if (tl) {
        W->start = now;
        W->start_it = it;
        W->cause = (W->ready_t < now && v->prev_unit >= 0) ? SIM_CAUSE_UNIT(v->prev_unit) : W->dep;
        W->end = now + dur;
        W->sx = ns;
      }
      v->busy += sim_fx(dur);
      v->mem += uob[u];
      if (v->mem > v->speak) v->speak = v->mem;
      v->running = u;
      /* its consumers are read when it ends: start fetching (the first few of) their lines */
      for (int32_t j = out_off[u]; j < out_off[u + 1]; j++) {
        int32_t c0 = cons_off[out_act[j]], c1 = cons_off[out_act[j] + 1];
        if (c1 > c0 + 4) c1 = c0 + 4;
        for (int32_t c = c0; c < c1; c++) {
          if (tl) __builtin_prefetch(&ur[cons[c]], 1);
          else __builtin_prefetch(&pend[cons[c]], 1);
        }
      }
      ev_push(ev, &nev, &evseq, now + dur, 0, d);
      if (rec) {
        st->sre[ns] = W->re;
        st->slog[ns++] = u;
      }
    }
    nd = 0;
    if (!one) {
      for (int i = 0; i < nl; i++) {
        int l = ldirty[i];
        sim_link *k = &lk[l];
        k->flag = 0;
        if (k->run >= 0 || k->qhead < 0) continue;
        int32_t a = xs[k->qhead].act;
        ev_push(ev, &nev, &evseq, sim_link_start(st, l, now, it, abytes[a], st->aprod[a]), 1, l);
      }
      nl = 0;
    }
    if (nev == 0) break;
    /* process every event at the next instant */
    if (rec && ev[nev - 1].t != now) hh1 = 0; /* every waiting unit became ready before it */
    if (rec) ecount = ns + done;
    now = ev[nev - 1].t;
    while (nev > 0 && ev[nev - 1].t == now) {
      sim_ev e = ev[--nev];
      if (one || e.kind == 0) {
        int d = e.id;
        sim_dev *v = &dv[d];
        int32_t u = v->running;
        v->running = -1;
        v->prev_unit = u;
        done++;
        if (tl) {
          if (ur[u].ep != nspl) sim_ur_settle(st, &ur[u]); /* started before this run */
          ur[u].fin_it = it;
        }
        step = now;
        MARK_DEV(d);
        /* inputs: drop this unit's reference to the buffer it read on d */
        for (int32_t j = in_off[u]; j < in_off[u + 1]; j++) {
          int32_t a = in_act[j];
          sim_act *A = &act[a];
          if (one || A->dev == d) {
            if (--aref[a] == 0) v->mem -= abytes[a];
            if (rec) rlw[nr++ - rlb] = a;
          } else {
            int32_t xi = A->xhead;
            while (xi >= 0 && xs[xi].dst != d) xi = xs[xi].next_act;
            if (xi >= 0) {
              if (--xs[xi].refs == 0) v->mem -= abytes[a];
              if (rec) xlw[nxr++ - xlb] = xi;
            }
          }
        }
        /* outputs: wake local consumers, send one copy to every other device that needs it */
        for (int32_t j = out_off[u]; j < out_off[u + 1]; j++) {
          int32_t a = out_act[j], local = 0, ndst = 0;
          sim_act *A = &act[a];
          for (int32_t c = cons_off[a]; c < cons_off[a + 1]; c++) {
            int32_t cu = cons[c];
            int cd = one ? 0 : uq[cu].dev;
            if (one || cd == d) {
              local++;
              if (rec) plw[np++ - plb] = cu;
              if (--pend[cu] == 0) READY(&ur[cu], cd, SIM_CAUSE_UNIT(u));
            } else {
              sim_dest_count(st, cd, a, &ndst);
            }
          }
          A->dev = d;
          A->xhead = -1;
          if (!one) sim_xfers_issue(st, &nx, a, d, ndst, now, &A->xhead, &nl);
          aref[a] = local + ndst + aout[a];
          if (aref[a] == 0) v->mem -= abytes[a];
        }
      } else {
        int l = e.id;
        sim_link *k = &lk[l];
        int32_t xi = k->run;
        sim_xfer *x = &xs[xi];
        k->run = -1;
        k->prev = xi;
        x->fin_it = it;
        MARK_LINK(l);
        int32_t a = x->act;
        if (--aref[a] == 0) dv[act[a].dev].mem -= abytes[a];
        if (rec) rlw[nr++ - rlb] = a;
        int dst = x->dst;
        for (int32_t c = cons_off[a]; c < cons_off[a + 1]; c++) {
          int32_t cu = cons[c];
          if (uq[cu].dev != dst) continue;
          if (rec) plw[np++ - plb] = cu;
          if (--pend[cu] == 0) READY(&ur[cu], dst, SIM_CAUSE_XID(a, dst, st->D));
        }
      }
    }
    it++;
  }
#undef READY
#undef MARK_LINK
#undef MARK_DEV
  lv->now = now;
  lv->step = step;
  lv->it = it;
  lv->done = done;
  lv->nd = nd;
  lv->nl = nl;
  lv->next_ck = next_ck;
  lv->h = hh;
  lv->h1 = hh1;
  st->nev = nev;
  st->evseq = evseq;
  st->nx = nx;
  st->np = np;
  st->nr = nr;
  st->nxr = nxr;
  st->ns = ns;
  return 0;
}

static void fill_result(gopt_sim_state *st, gopt_sim_result *r) {
  double tb = 0;
  for (int l = 0; l < st->L; l++) tb += st->lbytes[l];
  int feasible = 1;
  for (int d = 0; d < st->D; d++)
    if (st->over[d] > 0) feasible = 0;
  r->step_time = st->step;
  r->feasible = feasible;
  r->n_devices = st->D;
  r->n_links = st->L;
  r->n_kernels = (size_t)st->U;
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

int gopt_sim_evaluate(gopt_sim_state *st, gopt_sim_result *r, gopt_error *err) {
  const gopt_sim *s = st->s;
  const int D = st->D;
  const int32_t U = st->U;
  const int rec = st->incremental && st->rec_next;
  const int tl = rec || st->tl_need; /* else a light evaluation (sim_internal.h) */
  if (rec && st->inc_valid && st->inc_from == INT32_MAX) { /* nothing changed */
    st->stats.cached++;
    st->stats.last_from = st->iters;
    if (r) fill_result(st, r);
    return GOPT_OK;
  }
  sim_lv lv;
  int32_t c = -1;
  int stream = 0; /* a light evaluation in the streaming layout (sim_stream.c) */
  if (rec && st->inc_valid && st->nck > 0) { /* the last checkpoint at or before inc_from (a
                                                 shifted splice leaves them off the grid) */
    int32_t lo = 0, hi = st->nck - 1;
    while (lo < hi) {
      int32_t mid = (lo + hi + 1) / 2;
      if (sim_ck_at(st, mid).h->v.it <= st->inc_from) lo = mid;
      else hi = mid - 1;
    }
    c = lo;
  }
  st->lw[0] = st->plog;
  st->lw[1] = st->rlog;
  st->lw[2] = st->xlog;
  st->lwb[0] = st->lwb[1] = st->lwb[2] = 0;
  if (c >= 1) {
    if (st->delta) sim_delta_begin(st, c);
    ck_restore(st, c, &lv);
  } else {
    if (!rec) st->nck = 0;
    stream = !rec && !tl && sim_stream_ok(st);
    full_reset(st, &lv, rec, tl, stream);
  }
  int32_t from = lv.it;
  st->inc_valid = 0;
  st->inc_from = INT32_MAX;
  int conv = 0;
  if (stream && !sim_stream_run(st, &lv)) { /* cannot complete: the normal loop names the unit */
    stream = 0;
    full_reset(st, &lv, 0, 0, 0);
  }
  if (stream) {
  } else if (D == 1) {
    if (rec) conv = run_loop(st, &lv, 1, 1, 1);
    else if (tl) conv = run_loop(st, &lv, 1, 0, 1);
    else conv = run_loop(st, &lv, 1, 0, 0);
  } else {
    if (rec) conv = run_loop(st, &lv, 0, 1, 1);
    else if (tl) conv = run_loop(st, &lv, 0, 0, 1);
    else conv = run_loop(st, &lv, 0, 0, 0);
  }
  st->tl_valid = tl;
  st->eval_gen = st->dec_gen;
  int32_t to = conv ? st->stats.last_to : lv.it; /* sim_delta_try set last_to */
  sim_delta_end(st);
  sim_delta_logs_back(st, conv);
  st->nchg = 0;
  st->iters = lv.it;
  st->stats.last_iters = lv.it;
  st->stats.last_from = from;
  st->stats.last_to = to;
  if (from > 0) {
    st->stats.incremental++;
    st->stats.iters_replayed += (uint64_t)(to - from);
    if (conv) {
      st->stats.converged++;
      st->stats.iters_spliced += (uint64_t)(lv.it - to);
    }
  } else {
    st->stats.full++;
    st->stats.iters_full += (uint64_t)lv.it;
  }
  st->evaluated = 1;
  if (lv.done < U) {
    st->evaluated = 0;
    for (int32_t u = 0; u < U; u++)
      if (st->pend[u] > 0 || st->dv[st->uq[u].dev].hn > 0)
        return gopt_error_set(err, GOPT_EINVAL,
                              "simulate: the schedule cannot complete: node '%s' never runs",
                              gopt_node_name(s->g, s->order[sim_unit_first(st, u)]));
    return gopt_error_set(err, GOPT_EINVAL, "simulate: the schedule cannot complete");
  }
  st->step = U > 0 ? lv.step : 0;
  /* graph outputs are released at the end of the step (logged: a replay undoes them too; a
   * converged replay spliced the recorded release) */
  for (int32_t i = 0; i < s->n_gout && !conv && !stream; i++) {
    int32_t a = s->gout[i];
    if (--st->aref[a] == 0) st->dv[st->act[a].dev].mem -= s->act_bytes[a];
    if (rec) st->rlog[st->nr++] = a;
  }
  for (int d = 0; d < D; d++) {
    const sim_dev *v = &st->dv[d];
    st->busy[d] = (double)v->busy / SIM_FX;
    st->endmem[d] = st->resid[d] + v->mem;
    st->peak[d] = st->resid[d] + (v->speak > v->dpeak ? v->speak : v->dpeak);
    double cap = s->cl->devices[d].mem_bytes;
    st->over[d] = st->peak[d] > cap ? st->peak[d] - cap : 0;
  }
  for (int l = 0; l < st->L; l++) {
    st->lbytes[l] = st->lk[l].bytes;
    st->lbusy[l] = (double)st->lk[l].busy / SIM_FX;
  }
  if (rec) st->inc_valid = 1;
  if (r) fill_result(st, r);
  return GOPT_OK;
}

int sim_timeline_need(const gopt_sim_state *cst) {
  gopt_sim_state *st = (gopt_sim_state *)cst; /* a workspace: created mutable by gopt_sim_state_new */
  if (!st->evaluated) return 0;
  if (st->tl_valid) {
    sim_ur_settle_all(st); /* the readers read the unit lines directly */
    return 1;
  }
  if (st->dec_gen != st->eval_gen) return 0; /* the decisions changed since: cannot be rebuilt */
  gopt_sim_inc_stats keep = st->stats;
  st->tl_need = 1;
  gopt_sim_evaluate(st, NULL, NULL); /* the same decisions: the same deterministic run */
  st->tl_need = 0;
  st->stats = keep;
  return st->tl_valid;
}
