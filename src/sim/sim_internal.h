/* sim_internal.h: the simulator's context and workspace layouts, shared by the src/sim sources.
 *
 * Indexing: a node's "position" is its index in the topological order (0..n-1); an unfused unit
 * is a position, so unit ids are topological. Fused units are numbered in a topological order of
 * the quotient graph. An "act" is a tensor produced by a live node (activations); constants and
 * graph inputs are "resident" tensors. */
#ifndef GOPT_SIM_INTERNAL_H
#define GOPT_SIM_INTERNAL_H

#include <stdint.h>

#include "gopt/sim.h"

struct gopt_sim {
  const gopt_graph *g;
  const gopt_cluster *cl;
  int D, L;
  int32_t n;                   /* live nodes */
  int32_t *order;              /* [n] position -> node id */
  int32_t *pos;                /* [g->nodes.n] node id -> position (-1: dead) */
  double *ncost;               /* [n * D] kernel seconds of position p on device d */
  double *nflops, *nbytes;     /* [n] cost facts */
  uint8_t *ncls, *ndt;         /* [n] op class, dtype of the first output */
  size_t n_measured;           /* positions whose time came from the cost database */
  double *dprio;               /* [n] default priority: bottom level / max, in [0, 1] */
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
  int32_t *in_off, *in_act;    /* CSR [n + 1]: distinct acts each position reads */
  int32_t *out_off, *out_act;  /* CSR [n + 1]: acts each position produces */
  int32_t *cons_off, *cons;    /* CSR [n_act + 1]: distinct consumer positions of each act */
  /* resident tensors: constants and graph inputs read by live nodes */
  int32_t n_res;
  int32_t *res_tensor;         /* [n_res] */
  double *res_bytes;           /* [n_res] */
  int32_t *res_off, *res_cons; /* CSR [n_res + 1]: distinct consumer positions */
  int32_t *nres_off, *nres;    /* CSR [n + 1]: resident tensors each position reads */
};

/* A transfer of one act to one device. */
typedef struct sim_xfer {
  int32_t act, src, dst, link;
  double req, start, end;
  int32_t next_q;    /* next transfer in the link's FIFO */
  int32_t next_act;  /* next transfer of the same act */
  int32_t refs;      /* consumers on dst that have not finished */
  int32_t cause;     /* SIM_CAUSE encoding */
} sim_xfer;

/* Causes (critical path): -1 none; unit u: 2u; transfer x: 2x + 1. */
#define SIM_CAUSE_UNIT(u) ((int32_t)(u) * 2)
#define SIM_CAUSE_XFER(x) ((int32_t)(x) * 2 + 1)

typedef struct sim_ev {
  double t;
  uint64_t seq;
  int32_t kind;   /* 0: device kernel done, 1: link transfer done */
  int32_t id;
} sim_ev;

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
  double *f_cost, *f_dprio, *f_flops, *f_bytes;
  const int32_t *in_off, *in_act, *out_off, *out_act, *cons_off, *cons, *aprod;
  const double *ucost, *udprio;
  /* per unit */
  int32_t *udev;               /* maintained by apply / set_device */
  double *uprio;               /* maintained by apply / set_priority */
  double *ukey;                /* strict: -rank */
  int32_t *rorder;             /* strict: units by rank */
  int32_t *pending;
  double *ready_t, *start, *end;
  int32_t *dep, *cause;
  int32_t *heap, *seq;
  /* per act */
  int32_t *ref, *xhead;
  /* transfers */
  sim_xfer *x;
  size_t nx, capx;
  /* per device */
  int32_t *hbase, *hn, *seqpos, *running, *prev_unit, *dmark, *dcount, *dlist;
  double *mem, *peak, *over, *busy, *resid, *endmem;
  int32_t *ddirty;
  uint8_t *dflag;
  /* per link */
  int32_t *qhead, *qtail, *lrun, *lprev, *ldirty;
  uint8_t *lflag;
  double *lbytes, *lbusy;
  /* event heap (at most D + L entries) */
  sim_ev *ev;
  int nev;
  uint64_t evseq;
  int evaluated;               /* the timeline arrays hold an evaluation */
  double step;
};

/* Position -> unit. */
static inline int32_t sim_unit(const gopt_sim_state *st, int32_t p) {
  return st->unit_of ? st->unit_of[p] : p;
}
/* First position of a unit. */
static inline int32_t sim_unit_first(const gopt_sim_state *st, int32_t u) {
  return st->fused ? st->u_pos[st->u_off[u]] : u;
}

/* Frees the fused-unit arrays and points the state at the unfused ones. */
void sim_state_unfuse(gopt_sim_state *st);

#endif
