/* sim_internal.h: the simulator's context and workspace layouts, shared by the src/sim sources.
 *
 * Indexing: a node's "position" is its index in the topological order (0..n-1); an unfused unit
 * is a position, so unit ids are topological. Fused units are numbered in a topological order of
 * the quotient graph. An "act" is a tensor produced by a live node (activations); constants and
 * graph inputs are "resident" tensors.
 *
 * Incremental re-evaluation (sim_run.c has the proof of exactness): a recording evaluation keeps,
 * besides the timeline, the iteration of the event loop in which each unit became ready and in
 * which it finished, logs of every counter decrement and of the start order, and small snapshots
 * of the O(D + L) event-loop state every `ck_every` iterations. Decisions changed afterwards give
 * the earliest iteration that can observe them (st->inc_from); the next evaluation rolls the
 * state back to the last snapshot at or before it and replays from there. */
#ifndef GOPT_SIM_INTERNAL_H
#define GOPT_SIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/costdb.h"
#include "gopt/sim.h"

/* The streaming layout of a light evaluation (sim_stream.c): unit k is the position of default
 * rank k, acts are numbered by producer. */
typedef struct sim_ku {
  int32_t in;                  /* first input (in k_in) */
  int32_t out;                 /* first output act (its acts are out .. next unit's out - 1) */
  double ob;                   /* bytes of its outputs (summed) */
} sim_ku;
typedef struct sim_ka {
  double bytes;
  int32_t cons;                /* first consumer (in k_cons) */
  int32_t out;                 /* 1: a graph output */
} sim_ka;
/* Per-act run state of a light evaluation in the streaming layout: buffer holders left, the
 * producer's device (its first transfer is in the state's kxh). */
typedef struct sim_kact {
  int32_t ref, dev;
} sim_kact;
/* A pending event of the streaming loop: its time and what ends (a device d: d; a link l: D + l). */
typedef struct sim_kev {
  double t;
  int32_t id, spare;
} sim_kev;

struct gopt_sim {
  const gopt_graph *g;
  const gopt_cluster *cl;
  int D, L;
  int32_t n;                   /* live nodes */
  int32_t *order;              /* [n] position -> node id */
  int32_t *pos;                /* [g->nodes.n] node id -> position (-1: dead) */
  double *ncost;               /* [D * n] kernel seconds of position p on device d at d * n + p */
  double *nflops, *nbytes;     /* [n] cost facts */
  uint8_t *ncls, *ndt;         /* [n] op class, dtype of the first output */
  size_t n_measured;           /* positions whose time came from the cost database */
  const gopt_costdb *db;       /* measured costs apply (a measured device and --costs auto/measured):
                                  fused groups are looked up too (gopt_group_signature), else NULL */
  uint64_t *nsig;              /* [n] gopt_op_signature per position when db, else NULL */
  double *dprio;               /* [n] default priority: bottom level / max, in [0, 1] */
  int32_t *drank, *drunit;     /* [n] rank of each position by (dprio desc, position), and back */
  uint64_t *dkey;              /* [n] encoded ready-queue key of dprio (sim_key) */
  double *lat;                 /* [L] link latency, [L] reciprocal bandwidth follow */
  double *inv_bw;
  int32_t *route;              /* [D * D] */
  /* activations */
  int32_t n_act;
  int32_t *act_tensor;         /* [n_act] tensor id */
  int32_t *act_of;             /* [g->tensors.n] tensor -> act, -1 when none */
  int32_t *act_prod;           /* [n_act] producing position */
  double *act_bytes;           /* [n_act] */
  uint8_t *act_out;            /* [n_act] 1 for graph outputs */
  int32_t n_gout;              /* acts that are graph outputs ... */
  int32_t *gout;               /* [n_gout] ... ascending */
  double *out_bytes;           /* [n] bytes of the acts each position produces (summed) */
  int32_t *in_off, *in_act;    /* CSR [n + 1]: distinct acts each position reads */
  int32_t *out_off, *out_act;  /* CSR [n + 1]: acts each position produces */
  int32_t *cons_off, *cons;    /* CSR [n_act + 1]: distinct consumer positions of each act */
  /* resident tensors: constants and graph inputs read by live nodes */
  int32_t n_res;
  int32_t *res_tensor;         /* [n_res] */
  double *res_bytes;           /* [n_res] */
  int32_t *res_off, *res_cons; /* CSR [n_res + 1]: distinct consumer positions */
  int32_t *nres_off, *nres;    /* CSR [n + 1]: resident tensors each position reads */
  /* resident bytes per device at reset, fast form (sim_run.c's resident_bytes), when res_int:
   * every resident's byte count is an integer and their total is below 2^53, so their sums in any
   * order are exact. The residents read by one position only, summed per position, as pairs
   * (res1_pos, res1_bytes); the residents read by several positions listed in resm. */
  int res_int;
  int32_t n_res1, n_resm;
  int32_t *res1_pos, *resm;    /* [n_res1], [n_resm] */
  int64_t *res1_bytes;         /* [n_res1] */
  int32_t n_src, *src;         /* positions with no input act (ready at reset), ascending */
  /* the streaming layout (sim_stream.c; NULL when it could not be built): unit k = the position
   * of default rank k (drunit[k]), acts renumbered in the order of their producers' k */
  sim_ku *k_u;                 /* [n + 1] */
  int32_t *k_in;               /* inputs of each unit, renumbered acts */
  sim_ka *k_a;                 /* [n_act + 1] */
  int32_t *k_cons;             /* consumers of each act, renumbered units, in their CSR order */
  int32_t *k_a2a, *k_aprod;    /* [n_act] renumbered act -> act, -> producing position */
  int32_t *k_nin;              /* [n] inputs per unit */
  double *k_cost;              /* [D * n] kernel seconds (device-major) */
  int32_t *k_src, *k_gout;     /* src as units, gout as acts, renumbered */
};

/* A transfer of one act to one device. */
typedef struct sim_xfer {
  int32_t act, src, dst, link;
  double req, start, end;
  int32_t next_q;    /* next transfer in the link's FIFO */
  int32_t next_act;  /* next transfer of the same act */
  int32_t refs;      /* consumers on dst that have not finished */
  int32_t cause;     /* SIM_CAUSE encoding */
  int32_t start_it, fin_it; /* loop iterations that dispatched / ended it (memory curve order) */
} sim_xfer;

/* Causes (critical path): -1 none; unit u: 2u; transfer x: 2x + 1 (in transfer records), or by
 * identity in unit lines: the transfer of act a to device dst, 2 (a D + dst) + 1 (gopt_sim_new
 * checks that n_act D < 2^30). */
#define SIM_CAUSE_UNIT(u) ((int32_t)(u) * 2)
#define SIM_CAUSE_XFER(x) ((int32_t)(x) * 2 + 1)
#define SIM_CAUSE_XID(a, dst, D) ((int32_t)(((a) * (D) + (dst)) * 2 + 1))

typedef struct sim_ev {
  double t;
  uint64_t seq;
  int32_t kind;   /* 0: device kernel done, 1: link transfer done */
  int32_t id;
} sim_ev;


/* Per-act run state, written when its producer finishes (its reference count, the holders of the
 * original buffer — local consumers, transfers, graph output — is in the state's aref array, with
 * the other counters that a replay's undo restores). */
typedef struct sim_act {
  int32_t dev;    /* device of the producer */
  int32_t xhead;  /* first transfer of the act (-1: none) */
} sim_act;

/* Per-unit state in one cache line: the run-time fields the event loop writes (recording runs
 * and runs that write the per-unit timeline).
 *
 * Lazily re-based records (issue 24): a converged delta replay does not rewrite the records of the
 * units its spliced tail started; it appends a splice entry (start index bp, time shift dt,
 * iteration shift dk; gopt_sim_state's spl_*) and the line catches up when it is next touched
 * (sim_ur_settle): every splice s >= ep whose tail holds the unit (sx >= bp_s) adds its shifts to
 * the time fields (ready_t, start, end) and the iteration fields (ready_it, start_it, fin_it).
 * Applied in splice order, each step gives the unit's record in the run after that splice (times
 * below 2^9 s on the 2^-44 s grid: exact sums, sim_delta.c). The exceptions are fixed when the
 * splice is made: the units waiting in a ready queue at the convergence point keep the replay's
 * ready fields, the units running there end in the tail. Transfer causes name the transfer by
 * identity (SIM_CAUSE_XID: act and destination), which a splice does not renumber. */
typedef struct sim_ur {
  double ready_t, start, end;  /* seconds: became ready, started, ended */
  int32_t sx;                  /* its index in the start log (slog) when it last started */
  int32_t ep;                  /* splices already applied to this line (spl_*; <= nspl) */
  int32_t re;                  /* units started + kernels done when the iteration that made it
                                  ready began processing (-1: ready at reset; recording runs). Not
                                  decreasing over iterations, and the same in a converged replay:
                                  a splice does not shift it. (The pending input count, the device and the
                                  ready-queue rank are in the state's pend and uq arrays, dense:
                                  the event loop reads them for every consumer, this line only for
                                  the consumers it readies; the output bytes in uobytes.) */
  uint32_t hm[2];               /* its ready-queue fingerprint weight m(u) (recording runs,
                                  low and high halves; set when it becomes ready) */
  int32_t dep, cause;          /* SIM_CAUSE (transfers: SIM_CAUSE_XID): what made it ready; what
                                  it started after */
  int32_t ready_it;            /* loop iteration whose processing made it ready (-1: at reset) */
  int32_t fin_it;              /* loop iteration whose processing ended it */
  int32_t start_it;            /* loop iteration whose dispatch started it (memory curve order) */
} sim_ur;

/* Per-unit fields the event loop reads for every consumer of a finished output, packed apart
 * from the unit's line (the pending-input count is a dense array of its own). */
typedef struct sim_uq {
  int32_t dev;                 /* device (kept by apply / set_device) */
  int32_t rank;                /* ready-queue rank: its position in the (key, unit) order (kept
                                  by apply / set_priority) */
} sim_uq;

/* Per-device run state. */
typedef struct sim_dev {
  int64_t busy;                /* busy time in SIM_FX units (exact sums: order-independent) */
  double mem, dpeak;           /* non-resident bytes allocated now; their peak up to the last
                                  checkpoint (recording runs) or to now (the rest) */
  double speak;                /* peak of mem since the last checkpoint (in a checkpoint's copy:
                                  the peak of the segment that ended there) */
  int32_t running;             /* unit running (-1: idle) */
  int32_t prev_unit;           /* unit that ran last (-1: none) */
  int32_t hn;                  /* units in the ready queue */
  int32_t seqpos;              /* strict order: next position in the device's sequence */
  int32_t dmark, dcount;       /* scratch while an act's transfers are issued */
  int32_t flag;                /* on the dirty list */
  int32_t spare;
} sim_dev;

/* Per-link run state. */
typedef struct sim_link {
  double bytes;                /* integer byte counts: exact sums */
  int64_t busy;                /* SIM_FX units */
  int32_t qhead, qtail;        /* FIFO of transfers (chained by next_q) */
  int32_t run, prev;           /* transfer in flight (-1: none); the last one */
  int32_t flag;                /* on the dirty list */
  int32_t spare;
} sim_link;

/* The event loop's scalar variables. */
typedef struct sim_lv {
  double now, step;            /* current instant; last kernel end so far */
  int32_t it, done, nd, nl;    /* iteration, kernels finished, dirty devices / links */
  int32_t np, nr, nxr, ns;     /* log lengths (pending, act ref, transfer ref, starts) */
  int32_t next_ck;             /* iteration of the next checkpoint */
  uint64_t h;                  /* ready-queue fingerprint (recording runs; sim_delta.c): sum of
                                  m(u) over the waiting units u, ... */
  uint64_t h1;                 /* ... and over those of them that became ready at `now` (the
                                  only fact about a waiting unit's ready time a later iteration
                                  uses: ready_t < start iff ready_t < now or start > now) */
} sim_lv;

/* Checkpoint header (the device and link records, pending events and dirty lists follow it in
 * the checkpoint's blob; sim_run.c lays them out). */
typedef struct sim_ck {
  sim_lv v;
  uint64_t evseq;
  int32_t nx, nev;
} sim_ck;

/* Busy times are summed as integers of 2^-44 s (57 fs) so that a delta evaluation can splice the
 * sums of a recorded tail exactly (floating-point sums depend on their order). */
#define SIM_FX 0x1p44
static inline int64_t sim_fx(double sec) { return (int64_t)(sec * SIM_FX + 0.5); }
/* Every kernel and transfer duration is rounded to that grid (below 2^18 s), so that every time
 * below 2^9 s is an exact integer of grid units in a double: sums do not depend on a common shift
 * ((t + D) + d == (t + d) + D), which a shifted delta splice needs (sim_delta.c). */
static inline double sim_grid(double sec) {
  return (sec >= 0 && sec < 0x1p18) ? (double)sim_fx(sec) / SIM_FX : sec;
}

/* Encoded ready-queue key of priority v: ascending in the order "higher priority first"; -0.0
 * and 0.0 encode alike (they compare equal as doubles). */
static inline uint64_t sim_key(double v) {
  union {
    double d;
    uint64_t u;
  } x;
  x.d = v + 0.0; /* -0.0 -> 0.0 */
  uint64_t b = x.u;
  uint64_t asc = (b >> 63) ? ~b : (b | 0x8000000000000000ULL); /* ascending in v */
  return ~asc;
}

/* A device's ready queue: three bitmap levels over unit ranks (sim_run.c). */
typedef struct bm_q {
  uint64_t *b0, *b1, *b2;
} bm_q;

/* Queues rank r (sim_run.c describes the levels). */
static inline void bm_push(bm_q q, int32_t r) {
  uint32_t x = (uint32_t)r;
  q.b0[x >> 6] |= 1ULL << (x & 63);
  q.b1[x >> 12] |= 1ULL << ((x >> 6) & 63);
  q.b2[x >> 18] |= 1ULL << ((x >> 12) & 63);
}

/* Removes and returns the smallest rank (the lowest set bit of every word on its path). */
static inline int32_t bm_pop(bm_q q) {
  uint32_t i2 = 0;
  while (!q.b2[i2]) i2++;
  uint64_t w2 = q.b2[i2];
  uint32_t j1 = (i2 << 6) | (uint32_t)__builtin_ctzll(w2);
  uint64_t w1 = q.b1[j1];
  uint32_t j0 = (j1 << 6) | (uint32_t)__builtin_ctzll(w1);
  uint64_t w0 = q.b0[j0];
  uint32_t r = (j0 << 6) | (uint32_t)__builtin_ctzll(w0);
  w0 &= w0 - 1;
  q.b0[j0] = w0;
  if (!w0) {
    w1 &= w1 - 1;
    q.b1[j1] = w1;
    if (!w1) q.b2[i2] = w2 & (w2 - 1);
  }
  return (int32_t)r;
}

#define SIM_CHG_MAX 64
#define SIM_SPL_MAX 64
struct sim_old;

struct gopt_sim_state {
  const gopt_sim *s;
  int D, L;
  int32_t n;
  /* raw decisions per position */
  int32_t *pdev;               /* [n] explicit device, -1 default */
  double *pprio;               /* [n] explicit priority, NaN default */
  int32_t *prank;              /* [n] order rank, valid when strict */
  int strict;                  /* an explicit order is set */
  /* units */
  int fused;
  int32_t U;
  int32_t *unit_of;            /* [n] position -> unit (identity when unfused) */
  int32_t *u_off, *u_pos;      /* CSR [U + 1]: positions of each unit, topological */
  int32_t *f_in_off, *f_in, *f_out_off, *f_out, *f_cons_off, *f_cons, *f_aprod;
  double *f_cost, *f_dprio, *f_flops, *f_bytes, *f_obytes;
  int32_t *f_drank, *f_drunit;
  const int32_t *in_off, *in_act, *out_off, *out_act, *cons_off, *cons, *aprod;
  const double *ucost, *udprio, *uobytes; /* unit u on device d: ucost[d * U + u] */
  const int32_t *udrank, *udrunit; /* ranks of the default priorities */
  /* per unit */
  sim_ur *ur;                  /* [n] (64-byte aligned) */
  double *uprio;               /* maintained by apply / set_priority */
  uint64_t *ukey;              /* encoded ready-queue key: of uprio, or of the rank when strict */
  int32_t *runit;              /* unit of each rank */
  int pdef;                    /* unfused default priorities: pprio, uprio, ukey and runit not
                                  filled (their values: NaN, dprio, dkey, drunit; sim_prio_fill) */
  uint64_t *sk;                /* [2n] sort scratch (keys) ... */
  int32_t *su;                 /* [3n] ... (units, and ranks) */
  int32_t *rorder;             /* strict: units by rank */
  /* ready queues: per device a three-level bitmap over ranks (level k at word offset bm_off[k]
   * of the device's bm_words words; sim_run.c) */
  uint64_t *bm;
  size_t bm_off[3], bm_words;
  bm_q *bq;                    /* [D] each device's three levels */
  int32_t *seq;                /* strict: each device's units in rank order, region hbase[d] */
  /* per act */
  sim_act *act;
  int32_t *aref;               /* [n_act] buffer holders left (see sim_act) */
  int32_t *pend;               /* [n] per unit: inputs not yet present on its device */
  sim_uq *uq;                  /* [n] per unit: device, ready-queue rank */
  /* the streaming layout's per-evaluation arrays (sim_stream.c) */
  uint8_t *kdev;               /* [n] unfused: device of the position of default rank k (kept by
                                  apply and set_device with uq; NULL when D > 255) */
  uint32_t *kpd;               /* [n] device << 24 | pending inputs (set at the run's start) */
  sim_kact *kact;              /* [n_act] */
  int32_t *kxh;                /* [n_act] first transfer */
  sim_kev *kev;                /* [D + L] pending events */
  double *kc;                  /* [n] kernel seconds on its device (set at the run's start) */
  int32_t *klo;                /* [D] ready-queue cursors (sim_stream.c) */
  /* transfers */
  sim_xfer *x;
  size_t nx, capx;
  /* per device */
  sim_dev *dv;
  int32_t *dcnt;               /* units on each device (maintained with the devices) */
  int32_t *hbase, *ddirty, *dlist;
  double *peak, *over, *busy, *resid, *endmem; /* results */
  /* per resident tensor and device: consumer positions there (valid when res_valid) */
  int32_t *rescnt;
  int res_valid;
  /* per link */
  sim_link *lk;
  int32_t *ldirty;
  double *lbytes, *lbusy;      /* results */
  /* pending events (at most D + L), sorted latest first */
  sim_ev *ev;
  int nev;
  uint64_t evseq;
  int evaluated;               /* the timeline arrays hold an evaluation */
  int tl_valid;                /* ... including the per-unit timeline (the unit lines): not after a
                                  light evaluation, one that neither records nor was asked for
                                  it (sim_timeline_need) */
  int tl_need;                 /* the next evaluation writes the per-unit timeline */
  uint64_t dec_gen, eval_gen;  /* decision changes so far; their count at the last evaluation */
  double step;
  /* incremental re-evaluation */
  int incremental;             /* record and replay (gopt_sim_state_set_incremental) */
  int rec_next;                /* the next evaluation records (when incremental): not after an
                                  apply that followed another apply with no set_device /
                                  set_priority in between (a caller evaluating whole decision
                                  sets never replays) */
  int moved;                   /* set_device / set_priority called since the last apply */
  int applied;                 /* apply has been called */
  int inc_valid;               /* the records describe the current timeline */
  int32_t inc_from;            /* earliest iteration a change since then can affect (INT32_MAX:
                                  none) */
  int32_t *slog;               /* [U] units in start order */
  int32_t *sre;                /* [U] their ready counts (sim_ur.re), in the same order: a unit
                                  was ready before checkpoint c if its count is below c's ns +
                                  done, not if above (if equal: its ready_it decides) */
  int32_t *plog, *rlog, *xlog; /* [capl] pending / act ref / transfer ref decrements */
  int32_t np, nr, nxr, ns;
  size_t capl;
  int cnt_mid;                 /* the counters (pend, aref, transfer refs) hold their values at log
                                  positions cnt_np / cnt_nr / cnt_nxr (a converged delta replay
                                  leaves them at its convergence point), not at the end of the run
                                  (all 0, as a complete run leaves them) */
  int32_t cnt_np, cnt_nr, cnt_nxr;
  int32_t *lw[3];              /* where the loop writes entry i of the pending / act ref /
                                  transfer ref log: lw[k][i - lwb[k]] (the logs themselves, or
                                  during a delta replay scratch buffers, so that the recorded tails
                                  stay in place for the splice; sim_delta.c) */
  int32_t lwb[3];
  int32_t iters;               /* iterations of the last evaluation */
  int32_t ck_every, nck, ck_max;
  size_t ck_size;              /* bytes per checkpoint */
  unsigned char *ck;           /* [ck_max * ck_size] */
  gopt_sim_inc_stats stats;
  /* delta evaluation (sim_delta.c): units changed since the last evaluation, and what a replay
   * keeps of the recorded run it may converge back to */
  int32_t nchg;                /* changed units listed (SIM_CHG_MAX + 1: too many to list) */
  int32_t chg[SIM_CHG_MAX];
  uint8_t chg_dev[SIM_CHG_MAX];/* 1: device changed (else priority) */
  struct sim_old *old;         /* what a replay keeps of the recorded run (allocated once) */
  int delta;                   /* delta evaluation on (gopt_sim_state_set_delta) */
  int delta_on;                /* a replay may converge: check at its checkpoints */
  int32_t dl_done;             /* a delta replay checks convergence at every iteration top with
                                  this many kernels done (-1: none; sim_delta.c) */
  /* splices not yet applied to every unit line (sim_ur): splice s shifted the records of the units
   * started at start-log index >= spl_bp[s] by spl_dt[s] seconds and spl_dk[s] iterations */
  int32_t nspl;
  int32_t spl_bp[SIM_SPL_MAX], spl_dk[SIM_SPL_MAX];
  double spl_dt[SIM_SPL_MAX];
};

/* Brings unit line W up to date with the splices made since it was last written (sim_ur). */
static inline void sim_ur_settle(const gopt_sim_state *st, sim_ur *W) {
  for (int32_t s = W->ep; s < st->nspl; s++)
    if (W->sx >= st->spl_bp[s]) {
      W->ready_t += st->spl_dt[s];
      W->start += st->spl_dt[s];
      W->end += st->spl_dt[s];
      W->ready_it += st->spl_dk[s];
      W->start_it += st->spl_dk[s];
      W->fin_it += st->spl_dk[s];
    }
  W->ep = st->nspl;
}
/* Unit u's line, up to date. */
static inline sim_ur *sim_ur_at(const gopt_sim_state *st, int32_t u) {
  sim_ur *W = &st->ur[u];
  if (W->ep != st->nspl) sim_ur_settle(st, W);
  return W;
}
/* Brings every unit line up to date and empties the splice list (sim_delta.c). */
void sim_ur_settle_all(gopt_sim_state *st);
/* Transfer number of a unit cause naming a transfer by identity (SIM_CAUSE_XID), -1 when the last
 * evaluation has none. */
int32_t sim_xid_index(const gopt_sim_state *st, int32_t cause);

/* Fills pprio, uprio, ukey and runit when they are the lazy defaults (pdef; sim_state.c). */
void sim_prio_fill(gopt_sim_state *st);
/* Unit of each ready-queue rank. */
static inline const int32_t *sim_runit(const gopt_sim_state *st) {
  return st->pdef ? st->s->drunit : st->runit;
}
/* Device of unit u. */
static inline int32_t sim_udev(const gopt_sim_state *st, int32_t u) { return st->uq[u].dev; }
/* Position -> unit. */
static inline int32_t sim_unit(const gopt_sim_state *st, int32_t p) {
  return st->unit_of ? st->unit_of[p] : p;
}
/* First position of a unit. */
static inline int32_t sim_unit_first(const gopt_sim_state *st, int32_t u) {
  return st->fused ? st->u_pos[st->u_off[u]] : u;
}

/* Makes the per-unit timeline (unit lines: start, end, cause, iterations) of the last evaluation
 * available: after a light one, runs the evaluation again with the same decisions writing it (the
 * same deterministic computation, so every result is the same; the statistics are kept). Returns
 * 0 when there is none: no evaluation, or a light one whose decisions changed since. The readers
 * of the timeline call it first (sim_run.c). */
int sim_timeline_need(const gopt_sim_state *st);
/* Frees the fused-unit arrays and points the state at the unfused ones. */
void sim_state_unfuse(gopt_sim_state *st);
/* Ranks units 0..U-1 by (key[u], u) ascending into rank[u] and runit[rank] (a stable LSD radix
 * sort over the key bytes that differ); kbuf and ubuf hold 2U entries (sim.c). */
void sim_rank_keys(const uint64_t *key, int32_t U, int32_t *rank, int32_t *runit, uint64_t *kbuf,
                   int32_t *ubuf);
/* The streaming layout (sim_stream.c): built by gopt_sim_new (GOPT_ENOMEM: not built, the
 * arrays NULL), freed by gopt_sim_free. */
int sim_stream_build(gopt_sim *s);
void sim_stream_free(gopt_sim *s);
/* Whether the next light evaluation can run in the streaming layout (default priorities). */
int sim_stream_ok(const gopt_sim_state *st);
/* A light evaluation in the streaming layout, after sim_run.c's reset of devices, links and
 * resident bytes; *lv as that reset left it. Returns 1 when every kernel ran (transfers in the
 * normal numbering, graph outputs released); 0 when the schedule cannot complete (the caller
 * runs the normal loop for the error). */
int sim_stream_run(gopt_sim_state *st, sim_lv *lv);
/* Bytes of one checkpoint for D devices and L links (sim_run.c). */
size_t sim_ck_size(int D, int L);
/* Most checkpoints a state keeps. */
#define SIM_CK_MAX 256

/* ---- checkpoints and ready queues (sim_run.c), used by the delta evaluation (sim_delta.c) ---- */
typedef struct ck_view {
  sim_ck *h;
  sim_dev *dv;    /* [D] */
  sim_link *lk;   /* [L] */
  sim_ev *ev;     /* [D + L] */
  int32_t *dirty; /* ddirty[D], ldirty[L] */
} ck_view;
ck_view sim_ck_at(gopt_sim_state *st, int32_t c);
/* Checkpoint c of a blob laid out like st->ck (a delta replay's copy of the recorded ones). */
ck_view sim_ck_in(const gopt_sim_state *st, unsigned char *blob, int32_t c);
void sim_ck_save(gopt_sim_state *st, const sim_lv *lv, const sim_ev *ev, int nev, uint64_t evseq,
                 size_t nx);

/* ---- delta evaluation (sim_delta.c) ---------------------------------------------------------- */
/* 64-bit mixer (splitmix64's finaliser) for the live-state fingerprint. */
static inline uint64_t sim_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
static inline uint64_t sim_dbits(double v) {
  union {
    double d;
    uint64_t u;
  } x;
  x.d = v;
  return x.u;
}
/* Records a change of unit u for the next evaluation (dev: a device change). */
void sim_delta_note(gopt_sim_state *st, int32_t u, int dev);
/* Before a replay from checkpoint c: saves what convergence checks and the splice need (the
 * recorded run's end state, its transfers past the checkpoint, the link queue tails). Returns 1
 * when the replay may converge (changes listed, memory available), else 0. */
int sim_delta_begin(gopt_sim_state *st, int32_t c);
/* At the top of checkpoint iteration lv->it of a replay: whether the state equals the recorded
 * run's checkpoint there and no changed decision can be read later; if so splices the recorded
 * tail (records, results) and returns 1 (the evaluation is complete). */
int sim_delta_try(gopt_sim_state *st, sim_lv *lv, const sim_ev *ev, int nev, uint64_t evseq,
                  size_t nx);
/* Ends a replay (converged or not). */
void sim_delta_end(gopt_sim_state *st);
/* After the loop: a replay that wrote its log entries to the scratch logs (sim_delta_begin) and
 * did not converge moves them into the logs (a splice did that itself); the loop writes to the
 * logs again. */
void sim_delta_logs_back(gopt_sim_state *st, int conv);
void sim_delta_free(gopt_sim_state *st);

/* ---- shared by the event loops (sim_run.c, sim_stream.c) ---------------------------------- */
/* Counts a consumer of act a on device cd, another device than the producer's: cd is listed in
 * st->dlist (*ndst entries) the first time, for sim_xfers_issue, which makes one transfer per
 * listed device with dv[cd].dcount consumers. */
static inline void sim_dest_count(gopt_sim_state *st, int cd, int32_t a, int32_t *ndst) {
  sim_dev *v = &st->dv[cd];
  if (v->dmark != a) {
    v->dmark = a;
    v->dcount = 0;
    st->dlist[(*ndst)++] = cd;
  }
  v->dcount++;
}

/* Issues the transfers of act a (its number in the caller's numbering), produced on device d at
 * `now`, to the devices in st->dlist[0 .. ndst), each with dv[].dcount consumers there: numbered
 * from *nx on, chained from *xhead (the act's first transfer), appended to their links' FIFOs,
 * the links marked dirty (st->ldirty, *nl). Shared by sim_run.c's and sim_stream.c's loops, so
 * that both number and queue transfers alike. */
static inline void sim_xfers_issue(gopt_sim_state *st, size_t *nx, int32_t a, int d, int32_t ndst,
                                   double now, int32_t *xhead, int32_t *nl) {
  sim_dev *dv = st->dv;
  sim_link *lk = st->lk;
  sim_xfer *xs = st->x;
  for (int32_t k = 0; k < ndst; k++) {
    int dd = st->dlist[k];
    dv[dd].dmark = -1;
    int l = st->s->route[d * st->D + dd];
    int32_t xi = (int32_t)(*nx)++;
    sim_xfer *x = &xs[xi];
    x->act = a;
    x->src = d;
    x->dst = dd;
    x->link = l;
    x->req = now;
    x->start = x->end = 0;
    x->next_q = -1;
    x->next_act = *xhead;
    *xhead = xi;
    x->refs = dv[dd].dcount;
    x->cause = -1;
    if (lk[l].qtail >= 0) xs[lk[l].qtail].next_q = xi;
    else lk[l].qhead = xi;
    lk[l].qtail = xi;
    if (!lk[l].flag) {
      lk[l].flag = 1;
      st->ldirty[(*nl)++] = l;
    }
  }
}

/* Starts the transfer at the head of idle link l's FIFO at `now` (iteration it): b its bytes, p
 * the unit that produced it. Sets its times and cause, the link's sums and the destination's
 * memory; returns its end. Shared by both loops. */
static inline double sim_link_start(gopt_sim_state *st, int l, double now, int32_t it, double b,
                                    int32_t p) {
  sim_link *k = &st->lk[l];
  int32_t xi = k->qhead;
  sim_xfer *x = &st->x[xi];
  k->qhead = x->next_q;
  if (k->qhead < 0) k->qtail = -1;
  double dur = sim_grid(b * st->s->inv_bw[l] + st->s->lat[l]);
  x->start = now;
  x->end = now + dur;
  x->start_it = it;
  x->cause = (x->req < now && k->prev >= 0) ? SIM_CAUSE_XFER(k->prev) : SIM_CAUSE_UNIT(p);
  k->bytes += b;
  k->busy += sim_fx(dur);
  sim_dev *v = &st->dv[x->dst];
  v->mem += b;
  if (v->mem > v->speak) v->speak = v->mem;
  k->run = xi;
  return x->end;
}

#endif
