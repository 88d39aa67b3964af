/* gopt/sim.h: the step simulator every gopt optimizer is scored by.
 *
 * A gopt_sim is built once per (graph, cluster, cost options): topological order, flat CSR arrays
 * of node inputs/outputs and tensor consumers, and a table of per-node kernel times on every
 * device. A gopt_sim_state is a per-thread workspace holding one set of decisions (placement,
 * fusion, schedule) and everything an evaluation needs, so evaluating allocates nothing.
 *
 * Evaluation is an event-driven simulation of one step (docs/SIMULATOR.md has the full model):
 * each device runs one kernel at a time, picking the ready kernel of highest priority; a tensor
 * needed on another device is sent once per destination device over the link between them, links
 * queue transfers FIFO (B / bw + latency each); memory per device counts the weights and graph
 * inputs its kernels read (resident all step), each output from its kernel's start until its last
 * local consumer and outgoing transfer finish, and each received copy from its transfer's start
 * until its last consumer there finishes; graph outputs stay until the step ends. A fused group is
 * one kernel: one launch, its summed FLOPs, and only the bytes crossing its boundary.
 *
 * Usage:
 *   gopt_sim *s; gopt_sim_new(g, cluster, &opts, &s, &err);
 *   gopt_sim_state *st = gopt_sim_state_new(s);
 *   gopt_sim_state_apply(st, &decisions, &err);   // or leave the defaults
 *   gopt_sim_result r; gopt_sim_evaluate(st, &r, &err);
 *   gopt_sim_state_set_device(st, node, 2);       // incremental change, then evaluate again
 * The graph and cluster must outlive the sim; the sim must outlive its states. */
#ifndef GOPT_SIM_H
#define GOPT_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/costdb.h"
#include "gopt/decisions.h"
#include "gopt/device.h"
#include "gopt/graph.h"
#include "gopt/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gopt_sim_costs {
  GOPT_SIM_COSTS_ANALYTICAL = 0, /* roofline model only */
  GOPT_SIM_COSTS_MEASURED,       /* cost database for nodes it has (on measured devices); needs one */
  GOPT_SIM_COSTS_AUTO            /* measured when a database is given, else analytical */
} gopt_sim_costs;

/* Cost facts override (tests, what-if studies): fills *c for node n instead of gopt_node_cost. */
typedef void (*gopt_sim_cost_fn)(const gopt_graph *g, int32_t n, gopt_cost *c, void *user);

typedef struct gopt_sim_opts {
  int costs;                    /* gopt_sim_costs */
  const gopt_costdb *costdb;    /* measured database (devices with measured=1 use it) */
  gopt_sim_cost_fn cost_fn;     /* NULL: gopt_node_cost */
  void *cost_user;
} gopt_sim_opts;

typedef struct gopt_sim gopt_sim;
typedef struct gopt_sim_state gopt_sim_state;

/* Builds the simulator context: topological order, CSR arrays, per-node kernel times on every
 * device, default priorities. opts may be NULL (analytical). Errors: cycle in the graph
 * (GOPT_EGRAPH), measured costs without a database (GOPT_EINVAL), out of memory. */
int gopt_sim_new(const gopt_graph *g, const gopt_cluster *c, const gopt_sim_opts *opts,
                 gopt_sim **out, gopt_error *err);
void gopt_sim_free(gopt_sim *s); /* accepts NULL */

/* Whether tensor t is resident for the whole step in the simulator's memory model: a constant or
 * graph input (not an attribute value). Models of the simulator (exact methods) use the same rule. */
int gopt_sim_tensor_resident(const gopt_graph *g, int32_t t);

/* Live node count, and how many nodes took their time from the cost database. */
size_t gopt_sim_node_count(const gopt_sim *s);
size_t gopt_sim_measured_count(const gopt_sim *s);
/* Kernel time (seconds) of unfused node n on device d, as the simulator uses it. */
double gopt_sim_node_time(const gopt_sim *s, int32_t n, int d);
/* Bytes the simulator's per-evaluation input arrays take (for the bandwidth comparison). */
size_t gopt_sim_input_bytes(const gopt_sim *s);
/* One sequential pass reading every input array the event loop reads; returns a checksum (so
 * the pass is not optimized away). Used by the benchmark as the memory-bandwidth reference. */
double gopt_sim_input_pass(const gopt_sim *s);

/* A workspace with default decisions (all on device 0, unfused, default priority). NULL on out
 * of memory. */
gopt_sim_state *gopt_sim_state_new(const gopt_sim *s);
void gopt_sim_state_free(gopt_sim_state *st); /* accepts NULL */

/* Replaces all decisions by d (NULL: the defaults). Checks: device indices in range, fusion
 * groups convex (a group a path leaves and re-enters is rejected naming the group) and not
 * mutually dependent, a group's explicitly placed nodes on one device (unplaced members follow
 * the group), an order consistent with the dataflow. Errors name the node or group; on error
 * the state keeps its previous decisions (except an order that contradicts the new fusion
 * groups, found last: the state then holds the defaults). */
int gopt_sim_state_apply(gopt_sim_state *st, const gopt_decisions *d, gopt_error *err);
/* Incremental changes (O(1) plus the group size): the device of node n (its whole fusion group
 * moves with it), or its schedule priority (NaN = default). Return GOPT_EINVAL when n is not a
 * live node or the device is out of range. */
int gopt_sim_state_set_device(gopt_sim_state *st, int32_t n, int device);
int gopt_sim_state_set_priority(gopt_sim_state *st, int32_t n, double priority);
/* Current device of node n. */
int gopt_sim_state_device(const gopt_sim_state *st, int32_t n);

typedef struct gopt_sim_result {
  double step_time;          /* seconds: the last kernel's end */
  int feasible;              /* every device's peak memory within its capacity */
  int n_devices, n_links;
  size_t n_kernels;          /* units run (a fused group counts once) */
  size_t n_transfers;
  double transfer_bytes;     /* over all links */
  /* Per device / per link arrays, owned by the state, valid until its next evaluation: */
  const double *busy;        /* device busy seconds */
  const double *peak_mem;    /* device peak bytes */
  const double *mem_over;    /* bytes over capacity (0 when within) */
  const double *resident;    /* bytes of weights and graph inputs resident on the device */
  const double *end_mem;     /* bytes still allocated after the step once graph outputs are
                                released (equals resident: an accounting invariant) */
  const double *link_bytes;  /* bytes sent over each link */
  const double *link_busy;   /* seconds each link was occupied */
} gopt_sim_result;

/* Runs one step with the state's decisions. No allocation. Returns 0, or an error (a schedule
 * that cannot complete). After set_device / set_priority changes it replays only from the last
 * checkpoint before the earliest moment a change can influence (exact: bit-identical to a full
 * evaluation; docs/SIMULATOR.md), and with no change since the last evaluation it returns that
 * evaluation's results; after gopt_sim_state_apply it runs in full. */
int gopt_sim_evaluate(gopt_sim_state *st, gopt_sim_result *r, gopt_error *err);

/* Incremental re-evaluation on (default) or off. On, an evaluation also records what a replay
 * needs (per-unit iteration numbers, decrement logs, at most 256 checkpoints of the O(D + L)
 * event-loop state), except after an apply that followed another apply with no set_device /
 * set_priority in between (a caller evaluating whole decision sets never replays; the first
 * evaluation after a single change then runs in full and records); off, nothing is recorded and
 * every evaluation runs in full (what gopt_sim_evaluate_batch uses). Results are identical
 * either way. */
void gopt_sim_state_set_incremental(gopt_sim_state *st, int on);

/* Delta evaluation on (default) or off (incremental evaluation stays as set). On, a replay after
 * changes to at most 64 units stops at the first recorded checkpoint where its state equals the
 * recorded run's and no changed decision can be read later, and splices the recorded rest
 * (docs/SIMULATOR.md); results are identical either way. */
void gopt_sim_state_set_delta(gopt_sim_state *st, int on);

/* How the state's evaluations ran (for tests and benchmarks). */
typedef struct gopt_sim_inc_stats {
  uint64_t full;          /* evaluations run from time 0 */
  uint64_t incremental;   /* evaluations replayed from a checkpoint */
  uint64_t cached;        /* evaluations with no change since the previous one */
  uint64_t iters_full;    /* event-loop iterations run by full evaluations */
  uint64_t iters_replayed;/* event-loop iterations run by incremental ones */
  int32_t last_iters;     /* iterations of the last evaluation's timeline */
  int32_t last_from;      /* iteration the last evaluation started from (0: full) */
  int32_t checkpoints;    /* checkpoints held now, ... */
  int32_t ck_every;       /* ... one every this many iterations */
  size_t record_bytes;    /* memory of the logs, checkpoints and delta copies */
  uint64_t converged;     /* incremental evaluations that converged to the recorded run */
  uint64_t iters_spliced; /* event-loop iterations taken from the recorded run, not simulated */
  int32_t last_to;        /* iteration the last evaluation simulated to (its convergence point,
                             or last_iters when it ran to the end) */
  uint64_t shifted;       /* converged evaluations whose spliced tail was the recorded one shifted
                             in time or in iteration numbers */
} gopt_sim_inc_stats;
void gopt_sim_state_inc_stats(const gopt_sim_state *st, gopt_sim_inc_stats *out);

/* Timeline of the last evaluation. An evaluation that does not record (after an apply that
 * followed another apply, or with incremental evaluation off) does not keep the per-kernel times
 * and causes: the first of gopt_sim_timeline, gopt_sim_critical_path, gopt_sim_memory_curve and
 * gopt_sim_write_trace after it runs the same decisions once more to rebuild them (the same
 * results, bit for bit), and they report no evaluation when the decisions changed since. */
typedef struct gopt_sim_item {
  int kind;          /* 0 = kernel (a node or fused group), 1 = transfer */
  int32_t id;        /* kernel: first node id of the unit; transfer: index for gopt_sim_transfer */
  int device;        /* kernel: device; transfer: link */
  double start, end; /* seconds */
} gopt_sim_item;

typedef struct gopt_sim_transfer_info {
  int32_t tensor;    /* tensor id */
  int src, dst, link;
  double bytes, start, end;
} gopt_sim_transfer_info;

/* Number of transfers of the last evaluation and transfer i. */
size_t gopt_sim_transfer_count(const gopt_sim_state *st);
void gopt_sim_transfer(const gopt_sim_state *st, size_t i, gopt_sim_transfer_info *t);
/* Critical path of the last evaluation, first item first, into items (room for max); returns its
 * length (which may exceed max; only max are written). Each item started when the previous one
 * ended: kernel after its last input (local producer or transfer) or after the device's previous
 * kernel, transfer after its producer or after the link's previous transfer. */
size_t gopt_sim_critical_path(const gopt_sim_state *st, gopt_sim_item *items, size_t max);
/* Node ids of the unit (fused group, or n alone) node n belongs to, in topological order, into
 * nodes (room for max); returns the unit's size (0 when n is not a live node). */
size_t gopt_sim_unit_nodes(const gopt_sim_state *st, int32_t n, int32_t *nodes, size_t max);
/* Every kernel (one item per unit, in unit order) then every transfer of the last evaluation into
 * items (room for max); returns the count (which may exceed max; only max are written). */
size_t gopt_sim_timeline(const gopt_sim_state *st, gopt_sim_item *items, size_t max);
/* Device dev's allocated bytes over the last evaluation (resident bytes included), as a step
 * function: (*t)[i] the instants in increasing order, from 0 to the step's end, and (*bytes)[i]
 * the most bytes held at that instant (held until the next one, unless kernels of zero length
 * allocated and released within the instant). Rebuilt from the unit and
 * transfer times by the memory rules above, so its maximum is the state's peak_mem[dev]. The
 * caller frees both arrays. */
int gopt_sim_memory_curve(const gopt_sim_state *st, int dev, double **t, double **bytes, size_t *n,
                          gopt_error *err);
/* Writes the last evaluation's timeline as Chrome trace-event JSON (one track per device and per
 * link; complete "X" events in microseconds; process/thread name metadata), atomically. */
int gopt_sim_write_trace(const gopt_sim_state *st, const char *path, gopt_error *err);

/* Short outcome of one evaluation in a batch. */
typedef struct gopt_sim_summary {
  double step_time;
  int feasible;
  double max_over;     /* largest bytes over capacity on any device */
  double max_peak;     /* largest device peak memory */
  int rc;              /* 0, or the error code of this item (decisions rejected) */
} gopt_sim_summary;

/* Evaluates n decision sets in parallel on up to `threads` OpenMP threads (<= 0: all), one state
 * per thread; out[i] is exactly what a sequential gopt_sim_state_apply + gopt_sim_evaluate of
 * d[i] gives. Returns 0, GOPT_ENOMEM, or the first item's error when any item failed (its
 * message in err; every item's code in out[i].rc). */
int gopt_sim_evaluate_batch(const gopt_sim *s, const gopt_decisions *d, size_t n,
                            gopt_sim_summary *out, int threads, gopt_error *err);

/* ---- cost-model fitting and fidelity (calibrate.c) ---------------------------------------- */

/* One measured op: its class, dtype, FLOPs, bytes and measured seconds. */
typedef struct gopt_sim_sample {
  int cls, dtype;
  double flops, bytes, seconds;
} gopt_sim_sample;

typedef struct gopt_sim_fit {
  double launch_s;                  /* fitted launch overhead */
  double eff[GOPT_SIM_NCLASS];      /* fitted efficiency per class (unchanged when no samples) */
  int n[GOPT_SIM_NCLASS];           /* samples per class */
  double rms_log_before, rms_log_after; /* RMS of ln(predicted / measured) */
  double mdape_before, mdape_after;     /* median absolute % error */
} gopt_sim_fit;

/* Fits launch_s and per-class efficiencies of d to samples, minimising the squared error of
 * ln(predicted) - ln(measured) (grid over the launch overhead, closed form per class), and
 * writes them into d. SHAPE-class samples are ignored. Returns GOPT_EINVAL with no usable sample. */
int gopt_sim_fit_device(gopt_device *d, const gopt_sim_sample *samples, size_t n, gopt_sim_fit *fit,
                        gopt_error *err);
/* Kendall's tau-b of two series (ties handled), O(n^2); 0 for n < 2. */
double gopt_sim_kendall_tau(const double *x, const double *y, size_t n);
/* Median of |pred - meas| / meas * 100 over pairs with meas > 0 (scratch: n doubles, may be
 * NULL to allocate). */
double gopt_sim_mdape(const double *pred, const double *meas, size_t n, double *scratch);

#ifdef __cplusplus
}
#endif
#endif
