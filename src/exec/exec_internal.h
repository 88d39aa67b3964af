/* exec_internal.h: the executor's internal structures shared by its files: runtime tensor values,
 * kernels (one per node or fused group), the oneDNN context, and the kernel entry points. */
#ifndef GOPT_EXEC_INTERNAL_H
#define GOPT_EXEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/exec.h"
#include "gopt/ops.h"

typedef struct ex_kernel ex_kernel;
typedef struct ex_layout ex_layout;
typedef int (*ex_run_fn)(gopt_exec *x, ex_kernel *k, gopt_error *err);

/* One executable step: a node's kernel, or a fused elementwise group. */
struct ex_kernel {
  int32_t node;       /* node id (first member for a fused group) */
  int32_t group;      /* fusion group or -1 */
  int n_members;      /* nodes in the step (1, or the fused group's size) */
  uint64_t sig;       /* cost-database signature (gopt_op_signature; groups combine members') */
  int n_in, n_out;    /* tensors read from / written to the value table (externally visible) */
  int32_t *in, *out;  /* tensor ids (-1: omitted optional input) */
  ex_run_fn run;
  void (*fini)(void *st);
  void *st;           /* kernel state (oneDNN primitives, fused program, parameters) */
  int32_t *reuse;     /* NULL, or per output: index into in[] whose buffer it takes (-1 none) */
};

/* Runtime value of a tensor. */
typedef struct ex_val {
  void *data;         /* NULL when not live */
  size_t nbytes;
  size_t cap;         /* bytes of an activation's pooled buffer (its size class, >= nbytes) */
  uint8_t kind;       /* EX_V_* */
} ex_val;

enum { EX_V_ACT = 0, EX_V_CONST = 1, EX_V_INPUT = 2 };

/* Free buffers kept for reuse (pool_get: by size class, the most recently freed first). */
typedef struct ex_pool_ent {
  size_t nbytes;
  void *p;
} ex_pool_ent;

struct gopt_exec {
  const gopt_graph *g;
  int threads;
  uint64_t seed;             /* opts->seed (nested executors of called computations) */
  int check_nan;
  int opset;                 /* default-domain opset of the model */
  ex_val *vals;              /* per tensor */
  void **owned_consts;       /* random weights / reordered copies to free */
  size_t n_owned, cap_owned;
  ex_kernel *steps;          /* in execution order */
  size_t n_steps;
  int32_t *last_use;         /* per tensor: last step reading it (-1 none) */
  int32_t *inputs;           /* fed graph inputs */
  size_t n_inputs;
  void **input_data;         /* persistent copies of the inputs */
  ex_pool_ent *pool;
  size_t n_pool, cap_pool;
  size_t pool_bytes;         /* bytes of every buffer the pool has made */
  uint8_t *arena;            /* the static memory plan's arena (exec_arena.c); NULL before a run */
  size_t arena_bytes;        /* its bytes; 0: no plan, the pool serves every run */
  size_t *arena_off;         /* per tensor: its buffer's offset in the arena, SIZE_MAX none */
  size_t live_bytes, peak_bytes;
  int ran;                   /* outputs of a run are live */
  void *dnnl;                /* ex_dnnl context (engine, stream) */
  int profiling;             /* keep every buffer alive (per-step profiling) */
  ex_layout *lay;            /* layout-assignment pass (exec_layout.c); NULL: plain layouts */
  size_t reorders;           /* activation reorders per run without the pass */
  int isa;                   /* EX_ISA_* of the vector kernels (exec_isa.c) */
  uint8_t *nan_const;        /* per tensor: NaN (1) / Inf (2) flags of constants and inputs for
                                the NaN check; constants scanned at the first checked run only */
  size_t n_inplace;          /* outputs planned to take a dying input's buffer (exec_inplace.c) */
  size_t n_hoisted;          /* nodes run once at plan time on constants (exec_hoist.c) */
  size_t n_loop_hoisted;     /* fused-group members computed before their loop (k_elem.c) */
  size_t live_plain, peak_plain; /* live/peak bytes as if nothing ran in place */
  uint8_t *cf_reads;         /* per tensor: read by a control node's sub-graph; NULL when none */
  void *strs;                /* STRING tensors' values (k_string.c); NULL when none */
  int graph_only;            /* a graph-level check (gopt_exec_group_kind, gopt_exec_auto_plan): no
                                values; constants are read from the graph or count as present */
  double *step_sec;          /* NULL, or per step: the profiler clock's seconds of the step in the last
                                run (its outputs' allocation, kernel and frees; in-context profiling) */
};

/* ---- helpers (exec.c) ---------------------------------------------------------------------------- */
static inline const int64_t *ex_dims(const gopt_exec *x, int32_t t) { return gopt_tensor_dims(x->g, t); }
static inline int ex_rank(const gopt_exec *x, int32_t t) { return x->g->tensors.a[t].rank; }
static inline int ex_dtype(const gopt_exec *x, int32_t t) { return x->g->tensors.a[t].dtype; }
static inline void *ex_data(const gopt_exec *x, int32_t t) { return t < 0 ? NULL : x->vals[t].data; }
int64_t ex_numel(const gopt_exec *x, int32_t t);
/* A host tensor viewing tensor t's current value (data borrowed, not to be cleared). */
static inline gopt_host_tensor ex_host_view(const gopt_exec *x, int32_t t) {
  gopt_host_tensor h = {0};
  h.dtype = ex_dtype(x, t);
  h.rank = ex_rank(x, t);
  for (int i = 0; i < h.rank; i++) h.dims[i] = ex_dims(x, t)[i];
  h.data = ex_data(x, t);
  h.nbytes = (size_t)ex_numel(x, t) * gopt_dtype_size(h.dtype);
  return h;
}
/* Keeps p (malloc'd) until the executor is freed. Returns 0 or GOPT_ENOMEM (p freed). */
int ex_own(gopt_exec *x, void *p);
/* Error naming node n: "node 'NAME' (TYPE): MESSAGE". */
int ex_node_error(const gopt_exec *x, int32_t n, gopt_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
/* Reads an integer constant-or-runtime tensor as int64 values (count = numel, at most cap). */
int ex_read_ints(const gopt_exec *x, int32_t t, int64_t *v, size_t cap, size_t *count);
/* Whether tensor t's data is known at plan time (a constant). */
int ex_is_const(const gopt_exec *x, int32_t t);

/* ---- kernel preparation: each fills k->run / k->st for node k->node ------------------------------- */
int ex_prepare_dnnl(gopt_exec *x, ex_kernel *k, gopt_error *err);   /* Conv, MatMul, Gemm, pools, BN, LN, Softmax */
int ex_prepare_elem(gopt_exec *x, ex_kernel *k, gopt_error *err);   /* elementwise / broadcast */
int ex_prepare_data(gopt_exec *x, ex_kernel *k, gopt_error *err);   /* layout, indexing, shape ops */
/* Inference BatchNormalization of a plain [N, C, ...] float source, a Relu after it when relu
 * (k_misc.c). */
int ex_prepare_bn_plain(gopt_exec *x, ex_kernel *k, int relu, gopt_error *err);
/* An inference BatchNorm's affine form per channel: ab[c] = scale / sqrt(var + eps) (a), ab[C + c] =
 * B - mean a (b); y = x a + b (k_misc.c) */
void ex_bn_affine(float *ab, int64_t C, const float *sc, const float *bi, const float *mu, const float *var,
                  float eps);
int ex_prepare_misc(gopt_exec *x, ex_kernel *k, gopt_error *err);   /* reductions, LSTM, pooling extras */
/* Whether ex_prepare_X handles op (used for dispatch). */
int ex_dnnl_handles(int op);
int ex_elem_handles(const gopt_exec *x, int32_t n);
int ex_data_handles(int op);
int ex_misc_handles(int op);
/* Reference kernels (k_ref.c, by op type name): ex_ref_claims says whether they run node n instead
 * of the specialised kernels; ex_ref_handles whether they can run it when those refuse it. */
int ex_ref_claims(const gopt_exec *x, int32_t n);
int ex_ref_handles(const gopt_exec *x, int32_t n);
int ex_prepare_ref(gopt_exec *x, ex_kernel *k, gopt_error *err);

/* HLO opcodes of nodes that are opaque in the IR (k_hlo.c): whether a kernel runs node n, and its
 * preparation (data movement, elementwise ops without an ONNX twin, reduce, tuples, call/fusion
 * in a nested executor, cuda_threefry2x32). */
int ex_hlo_handles(const gopt_exec *x, int32_t n);
int ex_prepare_hlo(gopt_exec *x, ex_kernel *k, gopt_error *err);

/* ONNX control flow (exec_control.c): whether node n is an If, Loop or Scan, and its preparation
 * (the outer-scope tensors its sub-graphs read are added to k->in). */
int ex_control_handles(const gopt_exec *x, int32_t n);
int ex_prepare_control(gopt_exec *x, ex_kernel *k, gopt_error *err);
/* Notes the tensors control nodes' sub-graphs read (ex_control_reads) and, with reorder, reorders
 * order (n live nodes, valid for the explicit edges) so that every control node also runs after
 * the producers of those tensors, keeping the order otherwise; without, checks that it does. */
int ex_control_order(gopt_exec *x, int32_t *order, size_t n, int reorder, gopt_error *err);
/* Whether a sub-graph of a control node reads tensor t (an output no node reads explicitly that
 * must still be stored). */
int ex_control_reads(const gopt_exec *x, int32_t t);

/* STRING tensors (k_string.c): their values live beside the value table (a STRING element has
 * size 0 there). Ops on strings (Cast/CastLike to or from STRING, Identity, StringNormalizer),
 * feeding an input and reading an output (packed records, see gopt_host_tensor), freeing. */
int ex_string_handles(const gopt_exec *x, int32_t n);
int ex_prepare_string(gopt_exec *x, ex_kernel *k, gopt_error *err);
int ex_str_set_input(gopt_exec *x, int32_t t, const gopt_host_tensor *h, gopt_error *err);
int ex_str_get_output(const gopt_exec *x, int32_t t, gopt_host_tensor *h, gopt_error *err);
void ex_str_free(gopt_exec *x);

/* Fused group: compiles the members (node ids, in a valid order) into one loop. */
int ex_prepare_fused(gopt_exec *x, ex_kernel *k, const int32_t *members, int n_members,
                     gopt_error *err);
/* Whether node n can be a member of a fused group (float elementwise/broadcast op). */
int ex_fusable(const gopt_exec *x, int32_t n);
/* Whether Dropout node n is a plain copy: inference (training_mode absent or a constant false) or
 * a constant ratio of 0, and its mask output absent or unread (then the fused-loop engine runs it as a copy instead of the
 * reference kernel, in double precision, that computes the mask). */
int ex_dropout_is_copy(const gopt_exec *x, int32_t n);

/* Vector kernels: picks x->isa from the CPU and GOPT_ISA (exec_isa.c). */
int ex_isa_select(gopt_exec *x, gopt_error *err);
/* In-place planning (exec_inplace.c): fills the steps' reuse after the lifetimes are known. */
int ex_plan_inplace(gopt_exec *x, gopt_error *err);
/* Constant-step hoisting (exec_hoist.c, under --layouts auto): runs every step whose inputs are
 * all constants once, makes its outputs constants and drops it from the steps; before the
 * lifetimes are computed. */
int ex_hoist_const_steps(gopt_exec *x, gopt_error *err);
/* Whether step k (a fused elementwise program) may write output out_j into input in_j's buffer. */
int ex_elem_can_alias(const gopt_exec *x, const ex_kernel *k, int in_j, int out_j);

/* oneDNN context. */
int ex_dnnl_init(gopt_exec *x, gopt_error *err);
void ex_dnnl_fini(gopt_exec *x);

/* Returns every activation buffer to the pool (outputs of the last run included). */
void ex_release_acts(gopt_exec *x);

/* ---- static memory plan (exec_arena.c) --------------------------------------------------------- */
/* Bytes of activation t's buffer: its oneDNN layout's (padded channels) or its plain size. */
size_t ex_act_nbytes(const gopt_exec *x, int32_t t);
/* Whether input j of step k hands its buffer to one of its outputs (in place). */
int ex_kernel_gives(const ex_kernel *k, int j);
/* Plans every activation buffer's offset in one arena (after ex_plan_inplace). */
int ex_arena_plan(gopt_exec *x, gopt_error *err);
/* Tensor t's planned buffer (the arena made at the first call), or NULL: no plan for it, or
 * profiling keeps every buffer alive (the caller takes one from the pool). */
void *ex_arena_get(gopt_exec *x, int32_t t);
/* Whether p (nbytes) lies in the arena (then it is released there, not to the pool). */
int ex_arena_put(gopt_exec *x, void *p, size_t nbytes);

/* ---- layout assignment (exec_layout.c) ------------------------------------------------------------- */
/* One post-op of a convolution: a oneDNN eltwise (alg = dnnl_alg_kind_t, alpha, beta), the sum
 * with the chain's residual tensor, or (in a --fusion group only, ex_chain's extended post-ops) a
 * oneDNN binary op (bin = dnnl_alg_kind_t) with tensor src1 broadcast to the output. */
#define EX_MAX_POST 6
#define EX_MAX_CHAIN_NODES (2 + 5 * EX_MAX_POST) /* head, Pad aside; GELU takes 5 nodes */
typedef struct ex_post {
  int sum;
  int alg;
  float alpha, beta;
  int bin;       /* dnnl binary alg, 0: not a binary post-op */
  int32_t src1;  /* the binary op's other operand */
} ex_post;
/* A Conv, or a MatMul with constant 2-D weights, and the nodes its step runs as post-ops (nodes[0]
 * is the head; the step runs at the last node's position, writes out and reads residual (-1: none)
 * and every binary post-op's src1 besides the head's inputs). */
typedef struct ex_chain {
  int n_post, n_nodes;
  ex_post post[EX_MAX_POST];
  int32_t nodes[EX_MAX_CHAIN_NODES];
  int32_t residual, out;
  int32_t bias;       /* a MatMul chain's constant bias (its first Add; the matmul's bias), or -1 */
  int32_t pad;        /* a Conv's zero Pad node before it, folded into its padding, or -1 */
  int32_t pool;       /* a 1x1 Conv's AveragePool run before it instead of after (nodes[1]), or -1 */
  int64_t pad_l[3], pad_r[3]; /* that Pad's spatial amounts (begin, end) */
} ex_chain;
/* Runs the pass on the execution order (before the steps are prepared): post-op chains and the
 * tensors that may stay in a oneDNN layout. A chain takes only nodes of its head's fusion group
 * (-1: in none), so a group holding a Conv/MatMul is its chain. chains_only (--layouts plain with
 * fusion groups): only grouped heads' chains, every tensor plain. */
int ex_layout_plan(gopt_exec *x, const int32_t *order, size_t n_order, const int32_t *group, int chains_only,
                   gopt_error *err);
/* Whether the fusion group mem[0..n_mem) is exactly one planned post-op chain (head and the
 * nodes its step runs). */
int ex_layout_group_is_chain(const gopt_exec *x, const int32_t *mem, int n_mem);
/* The same without an executor (graph only; the task's host legality): whether the live nodes
 * mem[0..n_mem) are one Conv/MatMul head that the layout pass would make the head of a chain of
 * exactly the other members. */
int ex_group_chain_ok(const gopt_graph *g, const int32_t *mem, int n_mem);
void ex_layout_free(gopt_exec *x);
/* The node whose step runs at node n's position: n itself, the chain's conv at the chain's last
 * node, or -1 for the other nodes of a chain (no step of their own). */
int ex_layout_step_node(const gopt_exec *x, int32_t n);
/* The post-op chain of conv n (NULL: none). */
const ex_chain *ex_layout_chain(const gopt_exec *x, int32_t n);
/* dnnl_memory_desc_t recorded for tensor t (NULL: plain), whether t may stay in a oneDNN layout,
 * and recording the layout its producer chose (ignored unless t may stay). */
const void *ex_layout_md(const gopt_exec *x, int32_t t);
int ex_layout_keep(const gopt_exec *x, int32_t t);
int ex_layout_set_md(gopt_exec *x, int32_t t, const void *md);
/* A oneDNN kernel that reads oneDNN layouts (and applied node's post-op chain) reports so once
 * prepared, with its activation reorders per run and the number --layouts plain would have. */
void ex_layout_note(gopt_exec *x, int32_t node, int reorders, int reorders_plain);
/* Under the pass, GlobalAveragePool and a Mul/Add of an activation with a per-channel tensor run
 * through oneDNN when they read or write a kept tensor (ex_layout_dnnl_claims); the activation's
 * input slot of such a Mul/Add (-1: not one). */
int ex_layout_dnnl_claims(const gopt_exec *x, int32_t n);
int ex_layout_binary_slot(const gopt_exec *x, int32_t n, const int32_t *group);
/* Under the pass, oneDNN runs a unary activation (eltwise) or a channel Concat of at most
 * EX_CONCAT_MAX inputs that reads or writes a kept tensor, on the layouts it is given. */
#define EX_CONCAT_MAX 64
int ex_layout_eltwise_ok(const gopt_exec *x, int32_t n, const int32_t *group);
/* The oneDNN eltwise algorithm (dnnl_alg_kind_t) and alpha/beta of unary node n; 0: not one. */
int ex_layout_eltwise_of(const gopt_exec *x, int32_t n, int *alg, float *alpha, float *beta);
int ex_layout_concat_ok(const gopt_exec *x, int32_t n, const int32_t *group);
/* Whether n heads a Concat -> BatchNorm (-> Relu) chain of the pass, and its step's preparation
 * (k_concat_bn.c: one pass over the Concat's inputs writes the BatchNorm's or Relu's output). */
int ex_layout_concat_chain(const gopt_exec *x, int32_t n);
int ex_prepare_concat_bn(gopt_exec *x, ex_kernel *k, gopt_error *err);
/* Whether n is a float Pad that pads nothing, run under the pass as a copy in any layout. */
int ex_layout_nop_pad(const gopt_exec *x, int32_t n, const int32_t *group);
/* Buffer bytes of t in its recorded layout (0: plain, numel x dtype size). */
size_t ex_layout_nbytes(const gopt_exec *x, int32_t t);
/* Around each step's preparation: the end checks that the step applied its chain and can read
 * its inputs' layouts (a planning error names the node otherwise). */
int ex_layout_step_begin(gopt_exec *x);
/* Cost-database signature of a step under the pass: a conv with post-ops combines its members'
 * signatures, and a step that reads or writes a oneDNN layout is marked as such. */
uint64_t ex_layout_step_sig(const gopt_exec *x, const ex_kernel *k);
int ex_layout_step_end(gopt_exec *x, const ex_kernel *k, gopt_error *err);

/* The profiler's clock (exec_profile.c): with one thread the process's CPU clock, else wall time. */
double ex_prof_now(const gopt_exec *x);

/* ---- NaN / Inf scan --------------------------------------------------------------------------------- */
/* Counts non-finite floats in n elements. */

#endif
