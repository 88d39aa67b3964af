/* gopt/exec.h: the CPU executor: runs a graph for real on this host (oneDNN for convolution,
 * matmul, pooling and normalisation; gopt's own C for the rest), with a buffer planner that tracks
 * live activation bytes, an explicit op order (a schedule), fused elementwise groups compiled to
 * one loop each, per-op profiling into the measured-cost database, and tensor files in ONNX
 * TensorProto (.pb) and NumPy (.npy) form. docs/EXECUTOR.md describes the design and choices. */
#ifndef GOPT_EXEC_H
#define GOPT_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/costdb.h"
#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor held in host memory (inputs, outputs, tensor files). data is malloc'd and owned by
 * whoever holds the struct; gopt_host_tensor_clear frees it. name may be NULL. A STRING tensor's
 * data is one (uint32 little-endian length, bytes) record per element and nbytes their total. */
typedef struct gopt_host_tensor {
  int dtype; /* gopt_dtype */
  int rank;
  int64_t dims[GOPT_MAX_RANK];
  void *data;
  size_t nbytes;
  char *name;
} gopt_host_tensor;

void gopt_host_tensor_clear(gopt_host_tensor *t); /* frees data and name; accepts NULL */
int64_t gopt_host_tensor_numel(const gopt_host_tensor *t);

/* Reads a tensor file: ONNX TensorProto (".pb", any other extension) or NumPy (".npy", v1-3,
 * little-endian, C order). Errors name the file and what is wrong. */
int gopt_exec_tensor_read(const char *path, gopt_host_tensor *t, gopt_error *err);
/* Writes t atomically as .npy when path ends in ".npy", otherwise as an ONNX TensorProto. */
int gopt_exec_tensor_write(const char *path, const gopt_host_tensor *t, gopt_error *err);

typedef struct gopt_exec gopt_exec;

/* Whether node n can join a fused elementwise group: a float elementwise/broadcast op (Where's
 * condition may be BOOL; Clip's bounds constant scalars) with one output. */
int gopt_exec_fusable(const gopt_graph *g, int32_t n);
/* What the executor runs a fusion group of the live nodes mem[0..n_mem) as (the host target's
 * fusion legality, which the fusion task applies on a cpu cluster, docs/TASKS.md):
 *   GOPT_EXEC_GROUP_LOOP   float elementwise/broadcast ops as one fused loop (gopt_exec_fusable
 *                          members, static shapes, every member output and input broadcasting to
 *                          the largest member output, every output read outside the group of
 *                          that full size);
 *   GOPT_EXEC_GROUP_CHAIN  a float Conv or MatMul with constant weights and exactly the post-op
 *                          chain the layout pass builds from it (MatMul bias Add, Relu, LeakyRelu,
 *                          Clip with constant bounds, Sigmoid, Tanh, HardSwish, x*Sigmoid(x), one
 *                          residual Add as oneDNN sum; a zero Pad before a Conv) as one oneDNN step,
 *                          or that chain extended by post-ops only a group takes (oneDNN binary
 *                          Add/Mul/Sub/Div/Max/Min with a broadcast operand, PyTorch's GELU);
 *                          also the layout pass's pairings: an inference BatchNormalization
 *                          whose only reader is a Relu, with that Relu (oneDNN's fuse_norm_relu),
 *                          a zero Pad with the AveragePool after it (the pool's padding), a
 *                          channel Concat with the inference BatchNormalization that is its only
 *                          reader (and that one's only-reader Relu, or not) as one pass, and a
 *                          1x1 Conv with the unpadded AveragePool that is its only reader (a Pad of
 *                          nothing between them included) run pool first when the pool at least
 *                          halves the pixels;
 *   GOPT_EXEC_GROUP_NONE   anything else, and groups of fewer than two nodes.
 * Constants without data (structure-only files) count as present (the executor makes them up),
 * except Clip bounds, whose values must be known. Graph only: no executor needed. */
enum { GOPT_EXEC_GROUP_NONE = 0, GOPT_EXEC_GROUP_LOOP = 1, GOPT_EXEC_GROUP_CHAIN = 2 };
int gopt_exec_group_kind(const gopt_graph *g, const int32_t *mem, int n_mem);
/* The executor's own plan of g without fusion groups under --layouts auto (the layout pass), graph
 * only: step_of[n] (g->nodes.n entries) is the node whose oneDNN step runs node n (n itself for a
 * Conv/MatMul heading a post-op chain, a BatchNorm taking its Relu, an AveragePool taking its zero
 * Pad, a Concat taking the BatchNorm (and Relu) after it, a 1x1 Conv taking the AveragePool it
 * runs after, and for a GlobalAveragePool or per-channel Mul/Add that reads or writes a tensor kept in
 * oneDNN's layout; the head for the chain's other nodes), -1 for nodes gopt's own kernels run (and
 * plain convs, pooling, BatchNorm, which no group can hold anyway). Every chain here is a group
 * gopt_exec_group_kind calls GOPT_EXEC_GROUP_CHAIN.
 * A group of -1 nodes changes nothing the plan decided; a group holding a chain's node but not its
 * whole chain, or a claimed Mul/Add, breaks a chain or makes a oneDNN layout end (reorders).
 * Returns 0, GOPT_ENOMEM, or the topological sort's error (a cycle). */
int gopt_exec_auto_plan(const gopt_graph *g, int32_t *step_of);
/* Automatic fusion groups: every maximal tree of fusable ops whose intermediate results each feed
 * exactly one other member and have the group's loop size becomes one group. Writes g->nodes.n
 * entries to group (-1 = unfused; singletons stay -1) and returns the number of groups. */
int32_t gopt_exec_auto_fusion(const gopt_graph *g, int32_t *group);

typedef struct gopt_exec_opts {
  int threads;          /* OpenMP threads for every kernel; <= 0: the OpenMP default */
  uint64_t seed;        /* random weights for constants without data */
  const int32_t *order; /* n_order live node ids: the execution order; NULL: topological order */
  size_t n_order;
  const int32_t *group; /* g->nodes.n entries: fusion group per node (-1 unfused); NULL: none */
  int check_nan;        /* after each op, look for the first NaN/Inf it produced (warning) */
  int layouts;          /* GOPT_EXEC_LAYOUT_PLAIN (0): every activation row-major, each oneDNN conv
                           reorders around itself; GOPT_EXEC_LAYOUT_AUTO: the layout-assignment pass
                           (convs absorb following Relu/Clip/Sigmoid/... and residual Adds as oneDNN
                           post-ops; activations between oneDNN ops keep oneDNN's layout; steps whose
                           inputs are all constants run once at plan time) */
} gopt_exec_opts;

enum { GOPT_EXEC_LAYOUT_PLAIN = 0, GOPT_EXEC_LAYOUT_AUTO = 1 };

/* What the layout-assignment pass decided (docs/EXECUTOR.md "Layouts"). */
typedef struct gopt_exec_layout_stats {
  int mode;              /* GOPT_EXEC_LAYOUT_* */
  size_t reorders;       /* activation reorders per run (NCHW <-> oneDNN layout, around convs) */
  size_t reorders_plain; /* what GOPT_EXEC_LAYOUT_PLAIN does on this graph */
  size_t kept_tensors;   /* activations that stay in a oneDNN layout between oneDNN ops */
  size_t post_op_nodes;  /* nodes run as post-ops of a convolution or as a matmul's bias/post-ops (no step
                            of their own) */
} gopt_exec_layout_stats;
void gopt_exec_layout_stats_get(const gopt_exec *x, gopt_exec_layout_stats *s);
/* Layout of tensor t's buffer: "plain", or oneDNN's name of the layout the pass kept ("aBcd16b" =
 * nChw16c, "acdb" = NHWC); written into buf (cap bytes) and returned. */
const char *gopt_exec_tensor_layout(const gopt_exec *x, int32_t t, char *buf, size_t cap);

/* Prepares g for execution: every live node gets a kernel (oneDNN primitives are created here,
 * weights reordered once), every tensor must have a static shape, constants without data get
 * deterministic random values from opts->seed (*n_random counts them; may be NULL). g must stay
 * alive and unchanged while the executor exists. Fails naming the node and op type for an
 * unsupported op or attribute, an order that is not a valid permutation, a fusion group with a
 * non-elementwise op or one that cannot run as one loop. */
int gopt_exec_new(const gopt_graph *g, const gopt_exec_opts *opts, gopt_exec **out,
                  size_t *n_random, gopt_error *err);
void gopt_exec_free(gopt_exec *x); /* accepts NULL */
/* Run-time shapes: gives static shapes to g's tensors whose shapes depend on the values of the
 * inputs in[0..n_in) (graph-input order, constants skipped): a copy of g with those inputs as
 * constants is inferred again (io's options, folding on) and every tensor that is static there
 * but not in g takes that shape. Returns the number of tensors completed (0: nothing to do or
 * nothing found; the executor then reports the tensor without a static shape), or a negative
 * error code. */
struct gopt_infer_opts;
int gopt_exec_complete_shapes(gopt_graph *g, const gopt_host_tensor *in, size_t n_in,
                              const struct gopt_infer_opts *io, gopt_error *err);

/* Output equality of graphs a and b with the same inputs (a module before and after a compiler
 * pass or rewrite): both run single-threaded on the random inputs of seed
 * (gopt_exec_random_inputs; constants without data from the same seed), and every output must
 * match: floats within atol + rtol x |before| (NaN where NaN), other dtypes exactly. Returns 1
 * when equal, 0 when not (msg names the output and element), -1 when a cannot run, -2 when b
 * cannot run though a does (msg says why). msg (cap bytes) always gets one line. */
int gopt_exec_same_outputs(const gopt_graph *a, const gopt_graph *b, uint64_t seed, double rtol,
                           double atol, char *msg, size_t cap);

/* Number of graph inputs to feed (graph inputs that are not constants), and input i's tensor. */
size_t gopt_exec_n_inputs(const gopt_exec *x);
int32_t gopt_exec_input_tensor(const gopt_exec *x, size_t i);
/* dtype (gopt_dtype) input i must be fed as. */
int gopt_exec_input_dtype(const gopt_exec *x, size_t i);
size_t gopt_exec_n_outputs(const gopt_exec *x);
int32_t gopt_exec_output_tensor(const gopt_exec *x, size_t i);

/* Copies t into input i; its dtype and shape must equal the graph input's. */
int gopt_exec_set_input(gopt_exec *x, size_t i, const gopt_host_tensor *t, gopt_error *err);
/* Fills every input with deterministic random values from seed: floats uniform in [-1, 1),
 * integers in [0, n) where n is the size of the dimension they index (Gather) or 2; uint32 takes
 * uniform 32-bit patterns (HLO RNG keys). */
int gopt_exec_random_inputs(gopt_exec *x, uint64_t seed, gopt_error *err);

/* Runs the graph once. Inputs must have been set. Returns 0 or an error naming the node. */
int gopt_exec_run(gopt_exec *x, gopt_error *err);
/* Output i of the last run, copied into t (caller clears it). */
int gopt_exec_get_output(const gopt_exec *x, size_t i, gopt_host_tensor *t, gopt_error *err);
/* Peak live activation bytes of the last run: buffers allocated when produced and freed after
 * their last use in the execution order; graph inputs count until their last use, graph outputs
 * until the end. Constants (weights) are not activations. An elementwise step whose input dies
 * there (an activation, not a graph input or output) writes its output into that input's buffer
 * (in place; environment GOPT_INPLACE=0 turns it off), which the peak counts once. */
size_t gopt_exec_peak_bytes(const gopt_exec *x);
/* The peak of the last run as if nothing had run in place (equals gopt_exec_peak_bytes with
 * GOPT_INPLACE=0), and the number of step outputs planned in place. */
size_t gopt_exec_peak_bytes_without_inplace(const gopt_exec *x);
size_t gopt_exec_n_inplace(const gopt_exec *x);
/* The static memory plan (docs/EXECUTOR.md "Memory"): the bytes of the one arena every activation
 * buffer of a run lies in, at an offset fixed per executor (0: no plan, environment GOPT_ARENA=0,
 * or a graph that produces a tensor twice; buffers then come from a pool of freed ones), and
 * tensor t's offset in it (returns 0 when t has no planned buffer: a constant, a graph input).
 * Two activations whose buffers overlap in the arena are never live at the same step, except an
 * output written in place into the input that dies at its step. */
size_t gopt_exec_arena_bytes(const gopt_exec *x);
int gopt_exec_arena_offset(const gopt_exec *x, int32_t t, size_t *off);
/* Bytes of the buffers the pool has made (those the arena does not serve: per-step profiling that
 * keeps every buffer alive, or no plan); they are kept for reuse until the executor is freed. */
size_t gopt_exec_pool_bytes(const gopt_exec *x);
/* Nodes the executor ran once at plan time because every input is a constant (--layouts auto;
 * docs/EXECUTOR.md "Constant steps"): they are not run again per run. */
size_t gopt_exec_n_hoisted(const gopt_exec *x);
/* Members of fused elementwise groups computed once at their own, smaller shape before the group's
 * loop instead of per element of it (LayerNorm's Sqrt(var + eps) over [T, 1] in a loop over
 * [T, C]; docs/EXECUTOR.md "Fusion"). */
size_t gopt_exec_n_loop_hoisted(const gopt_exec *x);
/* Constant weights reordered once at plan time into the layout a oneDNN primitive wants (packed
 * MatMul/Gemm weights, blocked conv filters): the number of copies (one per weight tensor and
 * layout, however many primitives read it), their bytes, and the primitives reading one (more
 * than the copies when steps share a weight, as an unrolled RNN's do). bytes/readers may be NULL. */
size_t gopt_exec_packed_weights(const gopt_exec *x, size_t *bytes, size_t *readers);
/* The instruction set the fused elementwise loops and reductions run with: "baseline" (any
 * x86-64), "avx2" or "avx512"; the best this CPU supports unless the environment variable
 * GOPT_ISA names one (baseline|avx2|avx512|auto; gopt_exec_new refuses one the CPU lacks). */
const char *gopt_exec_isa(const gopt_exec *x);
/* Number of execution steps (nodes, a fused group counting as one). */
size_t gopt_exec_n_steps(const gopt_exec *x);

/* One step's profile. */
typedef struct gopt_exec_op_time {
  int32_t node;      /* node id, or the first node of a fused group */
  int32_t group;     /* fusion group, -1 when unfused */
  uint64_t sig;      /* cost-database signature */
  double seconds;    /* median of the timed runs (or the cached value) */
  int cached;        /* 1 when taken from the cost database */
} gopt_exec_op_time;

typedef struct gopt_exec_profile {
  double seconds;          /* end-to-end: median of `reps` whole runs after `warmup` */
  double sum_op_seconds;   /* sum of the per-step times */
  size_t peak_bytes;       /* peak live activation bytes */
  size_t n_steps;
  gopt_exec_op_time *steps; /* in execution order */
  size_t n_measured;       /* distinct signatures measured in this call */
} gopt_exec_profile;

/* Profiles the graph as TASO measures ops: `warmup` runs, then the median of `reps` timed runs,
 * for each step in isolation (its inputs computed by one whole run first) and end to end. Steps
 * whose signature (gopt_op_signature; fused groups combine their members') is in db are not
 * measured again; newly measured ones are added to db (db may be NULL). Inputs must be set.
 * With one thread (gopt_exec_opts.threads == 1) every time is the process's CPU time (on an idle
 * host the wall time; on a loaded one without the waits for a core), else wall time. */
int gopt_exec_profile_run(gopt_exec *x, int warmup, int reps, gopt_costdb *db,
                          gopt_exec_profile *p, gopt_error *err);
/* The same with the steps timed in one of two ways: GOPT_EXEC_PROFILE_ISOLATED (as above: each step
 * re-run alone on its inputs, TASO's way) or GOPT_EXEC_PROFILE_CONTEXT (each step timed inside
 * `reps` whole runs, its output allocation and frees included, and a signature's samples over all
 * its steps pooled: what the step costs in this run, so the steps add up to the whole run). */
enum { GOPT_EXEC_PROFILE_ISOLATED = 0, GOPT_EXEC_PROFILE_CONTEXT = 1 };
int gopt_exec_profile_run_mode(gopt_exec *x, int warmup, int reps, int mode, gopt_costdb *db,
                               gopt_exec_profile *p, gopt_error *err);
void gopt_exec_profile_clear(gopt_exec_profile *p); /* accepts NULL */
/* End-to-end time only: `warmup` runs, then the median of `reps` timed runs into *seconds. */
int gopt_exec_time_run(gopt_exec *x, int warmup, int reps, double *seconds, gopt_error *err);
/* The same, also the median CPU time of one run: with one executor thread that thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID: on a loaded host it leaves out the time the run waited for a core, and
 * an idle library thread's spinning is not counted), with more the process's (every thread).
 * cpu_seconds may be NULL. */
int gopt_exec_time_run_cpu(gopt_exec *x, int warmup, int reps, double *seconds, double *cpu_seconds,
                           gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
