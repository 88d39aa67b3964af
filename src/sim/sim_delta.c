/* sim_delta.c: exact delta simulation. A replay after a few changed decisions (sim_run.c) stops
 * as soon as its state equals the recorded run's at one of the recorded checkpoints, and the
 * recorded tail's records and results are spliced onto the replayed prefix.
 *
 * Why splicing is exact. The tail of a run from the top of iteration K on is a deterministic
 * function of (a) the loop state at K and (b) the decisions the tail reads. (b): a changed unit's
 * device is read only until it has finished and every consumer of its outputs has finished
 * ("settled"), its priority only until it started (we require finished too); so when every
 * changed unit is settled at K in both runs, the tail reads only unchanged decisions. (a): the
 * state at the top of an iteration is: the scalars (now, last kernel end, kernels done, started
 * units), the dirty device / link lists (their order fixes the order of new transfers), the
 * pending events, per device (running unit, previous unit, queue length, order position, memory
 * allocated), per link (queued transfers in FIFO order, the one in flight, the previous one),
 * and per unit / act / transfer the counters and fields a later iteration reads. The first groups
 * are compared exactly (transfers by identity: act, destination and link, since transfer numbers
 * shift when the transfer set changes). Of the per-object state, the ready queues' contents with
 * what a start reads (the cause, and whether the unit became ready at the current instant: a
 * start compares the ready time only with its own time, later than every earlier instant) are
 * compared through fingerprints: sums of a 64-bit mix of each waiting unit and its cause, over
 * all waiting units and over those ready at the current instant, kept by the loop (added when a
 * unit becomes ready, subtracted when it starts), so two runs' sums agree when the sets agree (a
 * false match needs a 64-bit collision between different sets, ~2^-64 per comparison). The
 * ready iterations of waiting units are not compared: the splice keeps the replay's. Everything else is
 * implied: with equal queues, running units and link queues, the set of finished units and of
 * completed transfers is equal (a unit finished in one run only would, walking back through its
 * inputs, show a producer or a transfer still queued, running or waiting in the other, and a
 * source unit waiting in a queue), and pending counts and buffer references are functions of
 * those sets and of the (unchanged, or settled) placement. Busy time, link bytes and busy time
 * are exact sums (integers), so the spliced totals are prefix + (recorded total - recorded
 * prefix) exactly; peaks are maxima over checkpoint segments (sim_ck_save).
 *
 * What the splice rewrites: the recorded transfers past the checkpoint move to follow the
 * replayed ones, and every transfer number in the tail (FIFO and per-act links, transfers'
 * causes, the transfer-reference log, link records in later checkpoints; unit lines name a
 * transfer by identity) is mapped: tail transfers shift, earlier ones are found by identity; the
 * logs' tails move to the replay's log lengths; later checkpoints shift their log lengths,
 * transfer count, busy sums and cumulative peaks. The tail's unit records are shifted lazily (a
 * splice entry, sim_ur in sim_internal.h), but for the units waiting or running at the
 * convergence point (fix_settled). Counters (pending inputs, buffer references, transfer
 * references) are left at their value at the convergence point: the undo in ck_restore starts
 * from there (sim_internal.h, cnt_mid). */
#include <stdlib.h>
#include <string.h>

#include "sim/sim_internal.h"
#include "util/util_internal.h"

struct sim_old {
  int32_t c, nck, iters, np, nr, nxr, ns, nx, nx_c;
  double step;
  sim_xfer *x;      /* [capx] the recorded transfers from nx_c on */
  sim_dev *dv;      /* [D] the recorded run's end state */
  sim_link *lk;     /* [L] */
  int32_t *qtail;   /* [L] each link's queue tail at the checkpoint ... */
  int32_t *qnext;   /* [L] ... and its next_q in the recorded run (ck_restore cuts it) */
  int32_t *lp, *lr, *lx;     /* [capl] the replay's log entries from the checkpoint on (the
                                recorded tails stay in the logs until the splice) ... */
  int32_t lp0, lr0, lx0;     /* ... which start at these positions */
  int32_t ofin[SIM_CHG_MAX]; /* per changed unit: recorded iteration by which it settled */
  unsigned char *ck;         /* [ck_max * ck_size] the recorded checkpoints from ck0 on (the
                                replay overwrites st->ck with its own) */
  int32_t ck0, kc;           /* first one copied; the one the replay is heading for */
  double dt;                 /* the converged replay's time shift */
};

/* Recorded checkpoint j (j >= ck0) of the run a replay may converge to. */
static ck_view old_ck(const gopt_sim_state *st, int32_t j) {
  return sim_ck_in(st, st->old->ck, j - st->old->ck0);
}

void sim_delta_free(gopt_sim_state *st) {
  if (!st || !st->old) return;
  free(st->old->x);
  free(st->old->dv);
  free(st->old->lk);
  free(st->old->qtail);
  free(st->old->qnext);
  free(st->old->lp);
  free(st->old->lr);
  free(st->old->lx);
  free(st->old->ck);
  free(st->old);
  st->old = NULL;
}

void sim_delta_note(gopt_sim_state *st, int32_t u, int dev) {
  if (st->nchg >= SIM_CHG_MAX) {
    st->nchg = SIM_CHG_MAX + 1;
    return;
  }
  st->chg_dev[st->nchg] = (uint8_t)(dev != 0);
  st->chg[st->nchg++] = u;
}

int sim_delta_begin(gopt_sim_state *st, int32_t c) {
  const gopt_sim *s = st->s;
  st->delta_on = 0;
  if (!st->delta || st->nchg < 1 || st->nchg > SIM_CHG_MAX || st->strict) return 0;
  if (!st->old) {
    struct sim_old *o = calloc(1, sizeof *o);
    if (!o) return 0;
    st->old = o;
    if (GOPT_ALLOC(o->x, st->capx + 1) || GOPT_ALLOC(o->dv, st->D) || GOPT_ALLOC(o->lk, st->L + 1) ||
        GOPT_ALLOC(o->qtail, st->L + 1) || GOPT_ALLOC(o->qnext, st->L + 1) ||
        GOPT_ALLOC(o->lp, st->capl + 1) || GOPT_ALLOC(o->lr, st->capl + 1) || GOPT_ALLOC(o->lx, st->capl + 1) ||
        !(o->ck = malloc((size_t)st->ck_max * st->ck_size))) {
      sim_delta_free(st);
      return 0;
    }
  }
  struct sim_old *o = st->old;
  if (c + 1 >= st->nck) return 0; /* no recorded checkpoint left to converge to */
  ck_view v = sim_ck_at(st, c);
  o->c = c;
  o->ck0 = o->kc = c + 1;
  memcpy(o->ck, st->ck + (size_t)(c + 1) * st->ck_size, (size_t)(st->nck - c - 1) * st->ck_size);
  st->dl_done = old_ck(st, c + 1).h->v.done;
  o->nck = st->nck;
  o->iters = st->iters;
  o->np = st->np;
  o->nr = st->nr;
  o->nxr = st->nxr;
  o->ns = st->ns;
  o->nx = (int32_t)st->nx;
  o->nx_c = v.h->nx;
  o->step = st->step;
  memcpy(o->x, st->x + o->nx_c, (size_t)(o->nx - o->nx_c) * sizeof *o->x);
  /* the replay writes its log entries from the checkpoint on to scratch buffers, so that the
   * recorded tails stay where they are (no copy unless it converges) */
  o->lp0 = v.h->v.np;
  o->lr0 = v.h->v.nr;
  o->lx0 = v.h->v.nxr;
  st->lw[0] = o->lp;
  st->lw[1] = o->lr;
  st->lw[2] = o->lx;
  st->lwb[0] = o->lp0;
  st->lwb[1] = o->lr0;
  st->lwb[2] = o->lx0;
  memcpy(o->dv, st->dv, (size_t)st->D * sizeof *o->dv);
  memcpy(o->lk, st->lk, (size_t)st->L * sizeof *o->lk);
  for (int l = 0; l < st->L; l++) {
    o->qtail[l] = v.lk[l].qtail;
    o->qnext[l] = o->qtail[l] >= 0 ? st->x[o->qtail[l]].next_q : -1;
  }
  /* when each changed unit settled in the recorded run; it is marked unfinished for the replay */
  for (int32_t i = 0; i < st->nchg; i++) {
    int32_t u = st->chg[i], f = sim_ur_at(st, u)->fin_it;
    for (int32_t j = st->out_off[u]; j < st->out_off[u + 1] && st->chg_dev[i]; j++) {
      int32_t a = st->out_act[j];
      if (s->act_out[a]) f = INT32_MAX;
      for (int32_t k = st->cons_off[a]; k < st->cons_off[a + 1] && f < INT32_MAX; k++)
        if (sim_ur_at(st, st->cons[k])->fin_it > f) f = st->ur[st->cons[k]].fin_it;
    }
    o->ofin[i] = f;
  }
  for (int32_t i = 0; i < st->nchg; i++) st->ur[st->chg[i]].fin_it = INT32_MAX;
  st->delta_on = 1;
  return 1;
}

void sim_delta_end(gopt_sim_state *st) {
  st->delta_on = 0;
  st->dl_done = INT32_MAX;
}

void sim_delta_logs_back(gopt_sim_state *st, int conv) {
  int32_t *lg[3] = {st->plog, st->rlog, st->xlog}, len[3] = {st->np, st->nr, st->nxr};
  for (int k = 0; k < 3; k++) {
    if (!conv && st->lw[k] != lg[k] && len[k] > st->lwb[k])
      memcpy(lg[k] + st->lwb[k], st->lw[k], (size_t)(len[k] - st->lwb[k]) * sizeof *lg[k]);
    st->lw[k] = lg[k];
    st->lwb[k] = 0;
  }
}

/* The recorded run's transfer oi (by its number then). */
static inline const sim_xfer *old_x(const gopt_sim_state *st, int32_t oi) {
  return oi < st->old->nx_c ? &st->x[oi] : &st->old->x[oi - st->old->nx_c];
}

/* next_q of recorded transfer oi in the recorded run. */
static int32_t old_next(const gopt_sim_state *st, int l, int32_t oi) {
  if (oi == st->old->qtail[l]) return st->old->qnext[l];
  return old_x(st, oi)->next_q;
}

static inline int same_x(const sim_xfer *a, const sim_xfer *b) {
  return a->act == b->act && a->dst == b->dst && a->link == b->link;
}

/* Whether the replay's state at the top of this iteration equals the recorded checkpoint k
 * shifted by one time dt (every time the recorded one + dt) and one iteration offset (same
 * kernels done and units started): then the rest of the replay is the recorded tail shifted,
 * since every duration is on the 2^-44 s grid and every time stays below 2^9 s, where sums of
 * grid values are exact (sim_grid), so the loop's arithmetic and its time comparisons commute
 * with the shift; iteration numbers are only stored, never compared. Sets o->dt. */
static int converged(gopt_sim_state *st, const sim_lv *lv, ck_view k, const sim_ev *ev, int nev) {
  struct sim_old *o = st->old;
  const sim_lv *r = &k.h->v;
  if (r->done != lv->done || r->ns != lv->ns) return 0;
  if (r->nd != lv->nd || r->nl != lv->nl || k.h->nev != nev) return 0;
  if (!(lv->now >= 0 && lv->now < 0x1p9 && o->step < 0x1p9)) return 0;
  const double dt = lv->now - r->now; /* exact: both on the grid below 2^9 s */
  if (!(o->step + dt < 0x1p9)) return 0;
  /* the last kernel end so far: the result's step time unless a kernel ends later */
  if (lv->step != r->step + dt && lv->done >= st->U) return 0;
  if (r->h != lv->h || r->h1 != lv->h1) return 0;
  for (int32_t i = 0; i < st->nchg; i++) {
    int32_t u = st->chg[i];
    if (o->ofin[i] >= r->it || st->ur[u].fin_it >= lv->it) return 0;
    if (st->chg_dev[i])
      for (int32_t j = st->out_off[u]; j < st->out_off[u + 1]; j++)
        if (st->aref[st->out_act[j]] != 0) return 0;
  }
  for (int i = 0; i < nev; i++)
    if (ev[i].t != k.ev[i].t + dt || ev[i].kind != k.ev[i].kind || ev[i].id != k.ev[i].id) return 0;
  for (int i = 0; i < lv->nd; i++)
    if (k.dirty[i] != st->ddirty[i]) return 0;
  for (int i = 0; i < lv->nl; i++)
    if (k.dirty[st->D + i] != st->ldirty[i]) return 0;
  for (int d = 0; d < st->D; d++) {
    const sim_dev *a = &st->dv[d], *b = &k.dv[d];
    if (a->running != b->running || a->prev_unit != b->prev_unit || a->hn != b->hn ||
        a->seqpos != b->seqpos || a->mem != b->mem)
      return 0;
  }
  for (int l = 0; l < st->L; l++) {
    const sim_link *a = &st->lk[l], *b = &k.lk[l];
    if ((a->run < 0) != (b->run < 0) || (a->prev < 0) != (b->prev < 0)) return 0;
    if (a->run >= 0 && !same_x(&st->x[a->run], old_x(st, b->run))) return 0;
    if (a->prev >= 0 && !same_x(&st->x[a->prev], old_x(st, b->prev))) return 0;
    int32_t i = a->qhead, j = b->qhead;
    while (i >= 0 && j >= 0) { /* queued: same transfers, requested now in both or before now
                                  in both (all a dispatch reads of req: req < now) */
      if (!same_x(&st->x[i], old_x(st, j)) || (st->x[i].req == lv->now) != (old_x(st, j)->req == r->now))
        return 0;
      i = st->x[i].next_q;
      j = old_next(st, l, j);
    }
    if (i >= 0 || j >= 0) return 0;
  }
  o->dt = dt;
  return 1;
}

/* Number in the spliced run of recorded transfer oi (the replay's when it precedes the tail). */
static int32_t map_x(const gopt_sim_state *st, int32_t oi, int32_t nx_k_old, int32_t dx) {
  if (oi < 0 || oi < st->old->nx_c) return oi;
  if (oi >= nx_k_old) return oi + dx;
  const sim_xfer *x = old_x(st, oi);
  int32_t i = st->act[x->act].xhead;
  while (i >= 0 && st->x[i].dst != x->dst) i = st->x[i].next_act;
  return i;
}

static inline int32_t map_cause(const gopt_sim_state *st, int32_t c, int32_t nxk, int32_t dx) {
  return (c >= 0 && (c & 1)) ? SIM_CAUSE_XFER(map_x(st, c >> 1, nxk, dx)) : c;
}

/* One sweep over the start log (every unit line's sx is its index there): at index i, the shift
 * owed by a line written after e splices is the sum over the splices s >= e whose tail holds i
 * (bp_s <= i). Times are summed as integers of grid units (exact: every shift is on the 2^-44 s
 * grid, and the total is a difference of two times below 2^9 s, so adding it is exact too). */
void sim_ur_settle_all(gopt_sim_state *st) {
  const int32_t n = st->nspl;
  if (!n) return;
  int32_t ord[SIM_SPL_MAX], dk[SIM_SPL_MAX + 1] = {0};
  int64_t dt[SIM_SPL_MAX + 1] = {0};
  for (int32_t s = 0; s < n; s++) { /* splices by breakpoint (insertion sort: at most 64) */
    int32_t j = s;
    for (; j > 0 && st->spl_bp[ord[j - 1]] > st->spl_bp[s]; j--) ord[j] = ord[j - 1];
    ord[j] = s;
  }
  for (int32_t i = 0, j = 0; i < st->U; i++) {
    for (; j < n && st->spl_bp[ord[j]] <= i; j++) {
      int32_t s = ord[j];
      int64_t q = (int64_t)(st->spl_dt[s] * SIM_FX);
      for (int32_t e = 0; e <= s; e++) {
        dt[e] += q;
        dk[e] += st->spl_dk[s];
      }
    }
    if (i + 8 < st->U) __builtin_prefetch(&st->ur[st->slog[i + 8]], 1);
    sim_ur *W = &st->ur[st->slog[i]];
    int32_t e = W->ep;
    if (dt[e] || dk[e]) {
      double t = (double)dt[e] / SIM_FX;
      W->ready_t += t;
      W->start += t;
      W->end += t;
      W->ready_it += dk[e];
      W->start_it += dk[e];
      W->fin_it += dk[e];
    }
    W->ep = 0;
  }
  st->nspl = 0;
}

int32_t sim_xid_index(const gopt_sim_state *st, int32_t cause) {
  int32_t id = cause >> 1, a = id / st->D, dst = id % st->D, i = st->act[a].xhead;
  while (i >= 0 && st->x[i].dst != dst) i = st->x[i].next_act;
  return i;
}

/* Unit line W brought up to date with the splices before the one being made (`last`: the list's
 * last entry, 0: none made), which then counts as applied: the caller fixes W by hand. */
static sim_ur *settle_fix(gopt_sim_state *st, sim_ur *W, int last) {
  st->nspl -= last;
  sim_ur_settle(st, W);
  st->nspl += last;
  W->ep = st->nspl;
  return W;
}

/* The units the lazy rule (sim_ur) gets wrong for the splice being made: those waiting in a ready
 * queue at the convergence point (readied by the replay or before it, started in the tail) keep
 * their ready fields, take the tail's start fields shifted, and their start-log entries take the
 * replay's ready count (ck_restore reads them; a stale ready iteration there once left a
 * unit out of a restored queue: "never runs"); those running there end in the tail. Their causes need nothing: a
 * transfer is named by identity, and the fingerprints say that a waiting unit became ready for
 * the same reason in both runs. Empties the ready queues (a complete run leaves them empty). */
static void fix_settled(gopt_sim_state *st, double dt, int32_t dk, int last) {
  for (int d = 0; d < st->D; d++)
    if (st->dv[d].running >= 0) settle_fix(st, &st->ur[st->dv[d].running], last)->fin_it += dk;
  for (int d = 0; d < st->D; d++) {
    if (!st->dv[d].hn) continue;
    uint64_t *b0 = st->bm + (size_t)d * st->bm_words, *b1 = b0 + st->bm_off[1],
             *b2 = b0 + st->bm_off[2];
    for (size_t w1 = 0; w1 < st->bm_off[2] - st->bm_off[1]; w1++) {
      for (uint64_t m1 = b1[w1]; m1; m1 &= m1 - 1) {
        size_t w0 = (w1 << 6) | (size_t)__builtin_ctzll(m1);
        for (uint64_t m0 = b0[w0]; m0; m0 &= m0 - 1) {
          sim_ur *W = settle_fix(st, &st->ur[sim_runit(st)[(w0 << 6) | (size_t)__builtin_ctzll(m0)]], last);
          W->start += dt;
          W->end += dt;
          W->start_it += dk;
          W->fin_it += dk;
          st->sre[W->sx] = W->re;
        }
        b0[w0] = 0;
      }
      b1[w1] = 0;
    }
    memset(b2, 0, (st->bm_words - st->bm_off[2]) * sizeof *b2);
  }
}

/* Log lg after a converged replay: the recorded tail [from, end) moves to `to` (the replay's
 * length; the replay's own entries, from `base` on, are in `scratch`), then the replay's entries
 * take their place before it. */
static void log_tail(int32_t *lg, const int32_t *scratch, int32_t base, int32_t from, int32_t end,
                     int32_t to) {
  if (end > from && to != from) memmove(lg + to, lg + from, (size_t)(end - from) * sizeof *lg);
  if (to > base) memcpy(lg + base, scratch, (size_t)(to - base) * sizeof *lg);
}

/* The records of the units started in the tail (recorded start log from r->ns on) shift by dt and
 * dk iterations: lazily (a splice entry, sim_ur) but for the units fix_settled corrects. (The
 * start log's ready counts of the units the tail readied need no shift: a converged replay has
 * the same numbers of units started and kernels done.) */
static void shift_units(gopt_sim_state *st, const sim_lv *r, double dt, int32_t dk) {
  int last = dt != 0 || dk != 0;
  if (last) {
    if (st->nspl == SIM_SPL_MAX) sim_ur_settle_all(st);
    st->spl_bp[st->nspl] = r->ns;
    st->spl_dt[st->nspl] = dt;
    st->spl_dk[st->nspl] = dk;
    st->nspl++;
  }
  fix_settled(st, dt, dk, last);
}

/* The replay's checkpoints, then the one at the convergence point, then the recorded ones past
 * kc re-based (iteration, times, fingerprint sums, log lengths, transfer count and numbers, busy
 * sums, cumulative peaks). When they would not fit, the replay's newest ones are dropped (their
 * segment peaks folded into the current segment). */
static void splice_cks(gopt_sim_state *st, sim_lv *lv, int32_t kc, const sim_ev *ev, int nev,
                       uint64_t evseq, size_t nx_new, const int64_t *dbusy, const double *dlb,
                       const int64_t *dlbusy) {
  struct sim_old *o = st->old;
  const int D = st->D, L = st->L;
  ck_view k = old_ck(st, kc);
  const sim_lv r = k.h->v;
  const int32_t nxk = k.h->nx, dx = (int32_t)nx_new - nxk, dk = lv->it - r.it;
  const int32_t dp = lv->np - r.np, dr = lv->nr - r.nr, dxr = lv->nxr - r.nxr;
  int32_t tail = o->nck - kc - 1, keep = st->nck;
  if (keep > st->ck_max - 1 - tail) keep = st->ck_max - 1 - tail;
  for (int32_t j = keep; j < st->nck; j++) {
    ck_view v = sim_ck_at(st, j);
    for (int d = 0; d < D; d++)
      if (v.dv[d].speak > st->dv[d].speak) st->dv[d].speak = v.dv[d].speak;
  }
  st->nck = keep;
  sim_ck_save(st, lv, ev, nev, evseq, nx_new);
  for (int32_t j = kc + 1; j < o->nck; j++) {
    int32_t n = st->nck++;
    memcpy(st->ck + (size_t)n * st->ck_size, o->ck + (size_t)(j - o->ck0) * st->ck_size, st->ck_size);
    ck_view v = sim_ck_at(st, n), p = sim_ck_at(st, n - 1);
    sim_lv *w = &v.h->v;
    w->it += dk;
    w->now += o->dt;
    w->step = w->done > r.done ? w->step + o->dt : lv->step; /* a kernel ended in the tail */
    w->np += dp;
    w->nr += dr;
    w->nxr += dxr;
    v.h->nx += dx;
    for (int i = 0; i < v.h->nev; i++) v.ev[i].t += o->dt;
    for (int d = 0; d < D; d++) {
      v.dv[d].busy += dbusy[d];
      double c0 = p.dv[d].dpeak;
      v.dv[d].dpeak = v.dv[d].speak > c0 ? v.dv[d].speak : c0;
    }
    for (int l = 0; l < L; l++) {
      sim_link *q = &v.lk[l];
      q->bytes += dlb[l];
      q->busy += dlbusy[l];
      q->qhead = map_x(st, q->qhead, nxk, dx);
      q->qtail = map_x(st, q->qtail, nxk, dx);
      q->run = map_x(st, q->run, nxk, dx);
      q->prev = map_x(st, q->prev, nxk, dx);
    }
  }
}

/* The splice: the state is the replay's at the top of an iteration equal to recorded checkpoint
 * kc shifted (converged); afterwards it is the complete run's, as a full evaluation leaves it. */
static void splice(gopt_sim_state *st, sim_lv *lv, int32_t kc, const sim_ev *ev, int nev,
                   uint64_t evseq, size_t nx_new) {
  struct sim_old *o = st->old;
  const int D = st->D, L = st->L;
  ck_view k = old_ck(st, kc);
  const sim_lv r = k.h->v;
  const int32_t nxk = k.h->nx, dx = (int32_t)nx_new - nxk, dk = lv->it - r.it;
  const int32_t dp = lv->np - r.np, dr = lv->nr - r.nr, dxr = lv->nxr - r.nxr;
  const double dt = o->dt;
  /* 0. the units of the tail (and those waiting or running at K; empties the ready queues) */
  shift_units(st, &r, dt, dk);
  /* 1. transfers waiting or in flight at K: the tail wrote their times and cause in the
   * recorded copies; tail transfers follow the replay's */
  for (int l = 0; l < L; l++) {
    for (int32_t i = st->lk[l].qhead, j = k.lk[l].qhead; i >= 0;) {
      const sim_xfer *ox = old_x(st, j);
      int32_t ni = st->x[i].next_q, nj = old_next(st, l, j);
      st->x[i].start = ox->start + dt;
      st->x[i].end = ox->end + dt;
      st->x[i].start_it = ox->start_it + dk;
      st->x[i].fin_it = ox->fin_it + dk;
      st->x[i].cause = map_cause(st, ox->cause, nxk, dx);
      st->x[i].next_q = map_x(st, nj, nxk, dx); /* the last one's successor is in the tail */
      i = ni;
      j = nj;
    }
  }
  for (int l = 0; l < L; l++) /* in flight at K: the tail ended it */
    if (st->lk[l].run >= 0) st->x[st->lk[l].run].fin_it = old_x(st, k.lk[l].run)->fin_it + dk;
  for (int32_t j = nxk; j < o->nx; j++) {
    int32_t ni = j + dx;
    sim_xfer x = *old_x(st, j);
    x.next_q = map_x(st, x.next_q, nxk, dx);
    x.next_act = map_x(st, x.next_act, nxk, dx);
    x.cause = map_cause(st, x.cause, nxk, dx);
    x.req += dt;
    x.start += dt;
    x.end += dt;
    x.start_it += dk;
    x.fin_it += dk;
    st->x[ni] = x;
    st->act[x.act].xhead = ni; /* the batch's last (its head) wins */
  }
  /* 3. logs */
  log_tail(st->plog, o->lp, o->lp0, r.np, o->np, lv->np);
  log_tail(st->rlog, o->lr, o->lr0, r.nr, o->nr, lv->nr);
  log_tail(st->xlog, o->lx, o->lx0, r.nxr, o->nxr, lv->nxr);
  for (int32_t i = lv->nxr; i < o->nxr + dxr; i++) st->xlog[i] = map_x(st, st->xlog[i], nxk, dx);
  /* 4. checkpoints */
  int64_t dbusy[64];
  double dlb[64];
  int64_t dlbusy[64];
  for (int d = 0; d < D; d++) dbusy[d] = st->dv[d].busy - k.dv[d].busy; /* sim_delta_try: D, L <= 64 */
  for (int l = 0; l < L; l++) {
    dlb[l] = st->lk[l].bytes - k.lk[l].bytes;
    dlbusy[l] = st->lk[l].busy - k.lk[l].busy;
  }
  splice_cks(st, lv, kc, ev, nev, evseq, nx_new, dbusy, dlb, dlbusy);
  /* 5. the end state and results */
  ck_view last = sim_ck_at(st, st->nck - 1);
  for (int d = 0; d < D; d++) {
    sim_dev e = o->dv[d]; /* speak: the peak of the segment after the last checkpoint */
    e.busy += dbusy[d];
    e.dpeak = last.dv[d].dpeak; /* the peak up to it, as a full run leaves them (a later splice
                                   takes speak as that segment's peak) */
    st->dv[d] = e;
  }
  for (int l = 0; l < L; l++) {
    sim_link e = o->lk[l];
    e.bytes += dlb[l];
    e.busy += dlbusy[l];
    e.prev = map_x(st, e.prev, nxk, dx);
    e.qhead = e.qtail = e.run = -1;
    st->lk[l] = e;
  }
  /* the counters stay at their values at the convergence point (ck_restore) */
  st->cnt_mid = 1;
  st->cnt_np = lv->np;
  st->cnt_nr = lv->nr;
  st->cnt_nxr = lv->nxr;
  st->nx = (size_t)(o->nx + dx);
  st->np = o->np + dp;
  st->nr = o->nr + dr;
  st->nxr = o->nxr + dxr;
  st->ns = o->ns;
  st->nev = 0;
  lv->it = o->iters + dk;
  lv->step = o->step + dt;
  lv->done = st->U;
  lv->nd = lv->nl = 0;
}

int sim_delta_try(gopt_sim_state *st, sim_lv *lv, const sim_ev *ev, int nev, uint64_t evseq,
                  size_t nx) {
  struct sim_old *o = st->old;
  int32_t kc = o->kc;
  if (st->D > 64 || st->L > 64) kc = o->nck;
  /* the next recorded checkpoint by progress: (kernels done, units started) */
  while (kc < o->nck) {
    const sim_lv *r = &old_ck(st, kc).h->v;
    if (r->done < lv->done || (r->done == lv->done && r->ns < lv->ns)) kc++;
    else break;
  }
  o->kc = kc;
  if (kc >= o->nck) {
    sim_delta_end(st);
    return 0;
  }
  ck_view k = old_ck(st, kc);
  st->dl_done = k.h->v.done;
  if (k.h->v.done != lv->done || k.h->v.ns != lv->ns) return 0;
  if (!converged(st, lv, k, ev, nev)) return 0;
  st->stats.last_to = lv->it;
  if (o->dt != 0 || lv->it != k.h->v.it) st->stats.shifted++;
  splice(st, lv, kc, ev, nev, evseq, nx);
  return 1;
}
