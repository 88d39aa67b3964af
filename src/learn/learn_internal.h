/* learn_internal.h: the policy's layout, a graph's prepared encoding and the pieces shared by the
 * learn module's files (policy, file format, trainer, optimize). */
#ifndef GOPT_LEARN_INTERNAL_H
#define GOPT_LEARN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/learn.h"
#include "gopt/nn.h"

#define LEARN_NCTX 6                          /* context columns after the env features (see docs/LEARNED.md) */
#define LEARN_NIN (GOPT_ENV_NFEAT + LEARN_NCTX) /* input width */
#define LEARN_NDEV 6                          /* device feature columns */
#define LEARN_MAX_SAGE 4
#define LEARN_NCFG 4                          /* local advantage model: configuration columns per row */
#define LEARN_PIPE_INIT 4.0f                  /* initial weight of the device head's pipeline prior */
#define LEARN_SEG_NF 7                        /* segment head: conditioning features per (cluster, device);
                                                 older files use the first 6 or 4 (gopt_policy.seg_nf) */
#define LEARN_SEG_NF_V4 6                     /* the head of file versions 3 and 4 (no return transfer) */
#define LEARN_SEG_NF_V2 4
/* Whether f is a segment head's feature count (a file's or gopt_learn_arch.seg_feats). */
#define LEARN_SEG_FEATS_OK(f) ((f) == LEARN_SEG_NF || (f) == LEARN_SEG_NF_V4 || (f) == LEARN_SEG_NF_V2)
#define LEARN_SEG_MAXDEV 256                  /* segment head: most devices */
#define LEARN_SEG_PER_NODE INT32_MAX           /* segment head: one cluster per row (the node-level decode) */
#define LEARN_SEG_DEFAULT 256                  /* segment head: default cluster count (placement) */
#define LEARN_SEG_EFT_INIT 8.0f               /* segment head (version 3): initial weight of the finish-time feature */
#define LEARN_SEG_STAY_INIT 8.0f              /* segment head: initial refinement bonus for the cluster's device */

/* A link's busy interval [t0, t1) in us, in its list sorted by time (prev / next: -1 at the ends). */
typedef struct learn_seg_iv {
  double t0, t1;
  int32_t prev, next;
} learn_seg_iv;

/* One environment prepared for the policy: rows are live nodes in topological order. */
typedef struct learn_graph {
  int64_t n;              /* rows */
  float *feat;            /* n x LEARN_NIN */
  gopt_nn_csr csr;        /* undirected dataflow neighbourhood over rows */
  int n_dev;
  float *dev_feat;        /* n_dev x LEARN_NDEV */
  size_t nvars;
  int64_t nk[3];          /* variables per kind (GOPT_VAR_*) */
  int32_t *rows[3];       /* per kind: the row of each variable's node */
  int32_t *var[3];        /* per kind: the variable index in x */
  uint8_t *valid;         /* n ones (attention key mask) */
  float *cfg;             /* NULL, or n x LEARN_NCFG: the configuration a local advantage model reads
                           * (learn_localadv.c sets it before each forward pass) */
  float *pipe;            /* nk[DEVICE] x n_dev: pipeline prior -|c[n] * D - (d + 1/2)|, c[n] the
                           * node's midpoint in cumulative kernel time along the topological order */
  /* segment head (learn_segment.c; n_seg == 0 when the policy has none) */
  int64_t n_seg;          /* clusters */
  int32_t *seg_of;        /* n: each row's cluster */
  double *seg_time;       /* n_seg: kernel-time share of each cluster */
  double *seg_mid;        /* n_seg: midpoint of each cluster in cumulative kernel-time share */
  float *seg_prior;       /* n_seg x n_dev: pipeline prior of each cluster */
  int32_t *var_seg;       /* nk[DEVICE]: each device variable's cluster */
  gopt_nn_csr seg_csr;    /* cluster <- its rows (mean pooling) */
  int32_t *src_ptr, *src_seg; /* per cluster: the earlier clusters its rows neighbour */
  float *src_w;           /* and their share of its edges to earlier clusters */
  int32_t *in_ptr, *in_row; /* per cluster: the distinct rows of earlier clusters it reads ... */
  float *in_bytes;        /* ... and the bytes of their outputs */
  double *arrive;         /* n x n_dev: when a row's output is on a device in the list schedule
                           * (INFINITY: not yet moved there) */
  double *seg_us;         /* n_seg: kernel time of each cluster on device 0, us */
  double *seg_mem;        /* n_seg: bytes a cluster holds (weights + outputs) */
  double tau_us;          /* mean cluster time (us): the finish-time feature's unit */
  double *dev_slow;       /* n_dev: kernel-time factor of each device against device 0 */
  double *dev_mem;        /* n_dev: memory capacity, bytes */
  double *x_us_b, *x_lat; /* n_dev^2: a transfer's us per byte and latency (us) from a to b */
  int32_t *x_link;        /* n_dev^2: the link it queues on (-1: none) */
  int n_links;
  learn_seg_iv *iv;       /* the links' busy intervals in the list schedule (learn_segment.c) */
  int32_t *lk_ends;       /* 2 n_links + 1: each link's first and last interval (-1: none), then
                           * the intervals in use */
  double *seg_outb;       /* n_seg: bytes of its rows' outputs that later clusters read (each row once) */
  double *seg_fin;        /* n_seg: the list schedule's finish time of each placed cluster (us) */
  int32_t *dst_ptr, *dst_seg; /* per cluster: the later clusters that read it (src_seg reversed) */
  int32_t *ord_pend, *ord_ready; /* n_seg each: decode-order scratch (pending sources, ready list) */
  double *seg_rank;       /* n_seg: upward rank, the cluster's kernel time plus the longest path after it (us) */
  int time_order;         /* decide the clusters in list-schedule order (the policy's seg_order), not s order */
  double *scratch;        /* n_dev x (LEARN_SEG_NF + 4) doubles of sampling scratch */
} learn_graph;

/* The actions of one sample (per kind, in learn_graph order). */
typedef struct learn_acts {
  int32_t *dev, *fuse;
  int32_t *seg;           /* segment head: each cluster's device */
  float *pri;
} learn_acts;

/* Outputs of a forward pass (NULL for kinds the graph has no variable of). */
typedef struct learn_fwd {
  gopt_nn_tensor *dev_logits;   /* [Vd, D] */
  gopt_nn_tensor *fuse_logits;  /* [Vf, 2] */
  gopt_nn_tensor *alpha, *beta; /* [Vp, 1] */
  gopt_nn_tensor *rows[3];      /* per kind: the final embeddings of its variables' rows */
  /* segment head (dev_logits NULL): */
  gopt_nn_tensor *seg_base;     /* [S, D]: cluster logits before conditioning (incl. pipeline prior) */
  gopt_nn_tensor *seg_coef;     /* [S, LEARN_SEG_NF]: per-cluster weights of the conditioning features */
  gopt_nn_tensor *node_logits;  /* [Vd, D]: refinement logits (before the stay bonus) */
  gopt_nn_tensor *stay;         /* [1]: the refinement's bonus for the cluster's device */
  gopt_nn_tensor *dev_emb;      /* [n, H]: the device block's embeddings the head pooled (learn_seg_forward) */
} learn_fwd;

/* Per-graph feature modulation (fine-tuning): h <- h * (1 + scale) + shift. */
typedef struct learn_mod {
  gopt_nn_params *params;
  gopt_nn_tensor *scale, *shift;   /* [hidden] */
} learn_mod;

enum { LEARN_HEAD_GO = 0, LEARN_HEAD_LOCALADV = 1, LEARN_HEAD_REGAL = 2 }; /* the kind (gopt_policy_kind) */

struct gopt_policy {
  int task;
  int head;                        /* LEARN_HEAD_*: the policy's kind */
  int localadv;                    /* a local advantage model (localadv.h): cfg input, heads are scores */
  gopt_nn_linear aff_a, aff_b;     /* REGAL: node -> device-embedding queries for alpha, beta */
  gopt_learn_arch arch;
  int kinds[3];                    /* decision kinds the task has */
  gopt_nn_params *params;
  gopt_nn_linear in;
  gopt_nn_sage sage[LEARN_MAX_SAGE];
  gopt_nn_seg_block blk[3];
  gopt_nn_linear dev_q, fuse;
  gopt_nn_tensor *pipe_w;          /* [1]: weight of the pipeline prior in the device logits */
  gopt_nn_mlp dev_mlp;
  gopt_nn_beta_head pri;
  gopt_nn_linear cfg;              /* localadv: configuration columns -> hidden (added to the input layer) */
  int seg;                         /* > 0: segment placement head with at most seg clusters (learn_segment.c) */
  int seg_nf;                      /* its conditioning features: LEARN_SEG_NF, or LEARN_SEG_NF_V2 (older files) */
  int seg_order;                   /* its decode order: GOPT_LEARN_ORDER_LIST, or _INDEX (older files) */
  gopt_nn_linear seg_q, seg_coef;  /* cluster embedding -> device query, -> conditioning weights */
  gopt_nn_tensor *seg_stay;        /* [1]: refinement bonus for the cluster's device */
  char *trainset;                  /* one training graph per line */
  /* trainer state (has_train): restored by gopt_learn_train */
  int has_train;
  int64_t iter;
  size_t n_graphs;
  double *ema, *best;              /* per graph: reward baseline, best objective (NaN: none) */
  unsigned char *ckpt;             /* the NN checkpoint read from the file (weights, Adam, RNG) */
  size_t ckpt_len;
  int64_t total_iters;             /* --iters of the run that wrote it */
};

/* The GNN encoder shared by every policy of the module: h = relu(h0) (h0: the input linear's
 * output, plus whatever a model adds to it), then per GraphSAGE layer h += sage_i(h) over csr. */
gopt_nn_tensor *learn_encode(gopt_nn_ctx *ctx, gopt_nn_tensor *h0, const gopt_nn_sage *sage, int layers,
                             const gopt_nn_csr *csr);
/* gopt_policy_new of a kind (LEARN_HEAD_*: a GO policy, a local advantage model, a REGAL policy). */
int learn_policy_build(int task, const gopt_learn_arch *arch, uint64_t seed, int kind, gopt_policy **out,
                       gopt_error *err);
/* gopt_policy_load of either kind of model (localadv: -1 any, 0 a GO or REGAL policy, 1 an advantage
 * model). */
int learn_policy_load(const char *path, int task, int localadv, gopt_policy **out, gopt_error *err);
/* Where the shipped file `name` is (gopt_learn_find_policy's places). */
int learn_find_file(const char *name, const char *exe, char *buf, size_t n, gopt_error *err);
/* learn_regal.c: adds REGAL's parameters to p (before the parameters are finalized). */
int learn_regal_params(gopt_policy *p);
/* learn_regal.c: REINFORCE training of a REGAL policy (gopt_learn_train dispatches to it). */
int learn_regal_train(gopt_policy *p, gopt_env *const *envs, const char *const *names, size_t n,
                      const gopt_learn_train_opts *o, gopt_learn_train_result *res, gopt_error *err);
/* learn_train.c, shared with REGAL's trainer: fresh trainer state in p (or checks that a resumed run
 * matches it), the all-ranks stop agreement under dist, and advantages of k rewards against the
 * per-graph moving-average baseline *ema (NaN on first visit; updated), or with batch_base against
 * the rewards' own mean (*ema still updated), normalised by the rewards' spread and clamped to
 * [-5, 5]; returns the mean reward. */
int learn_train_state(gopt_policy *p, const char *const *names, size_t n, int64_t iters, gopt_error *err);
int learn_train_agree_stop(const gopt_learn_dist *d, int *stop, gopt_error *err);
double learn_advantages(const double *reward, int k, double *adv, double *ema, double decay, int batch_base);
/* The trainers' Adam (o's learning rate and clipping, warmup-cosine over steps) into *oc / *opt and
 * their generator seeded by o->seed; when resumed, weights, Adam moments and generator from p's
 * checkpoint (its step must be p->iter). *opt may be set on error (the caller frees it). */
int learn_train_optim(gopt_policy *p, const gopt_learn_train_opts *o, int64_t steps, int resumed,
                      gopt_nn_optim_cfg *oc, gopt_nn_optim **opt, gopt_nn_rng *rng, gopt_error *err);
/* Ends an iteration (its learning rate into info, p->iter + 1, o->on_iter); at the end of a run,
 * keeps the trainer's checkpoint (weights, Adam, generator) in p for the policy file. */
void learn_train_iter_done(gopt_policy *p, const gopt_learn_train_opts *o, const gopt_nn_optim_cfg *oc,
                           const gopt_nn_optim *opt, gopt_learn_iter_info *info);
int learn_train_finish(gopt_policy *p, const gopt_nn_optim *opt, const gopt_nn_rng *rng, gopt_error *err);

int learn_graph_new(const gopt_env *e, learn_graph **out, gopt_error *err);
void learn_graph_free(learn_graph *g);
/* learn_segment.c: the segment head's clusters of lg (at most S, LEARN_SEG_PER_NODE: one per row;
 * S < 0: learn_part_clusters' split of -S min-cut parts; nothing when S == 0 or the graph has no
 * device variable); learn_graph_for = learn_graph_new plus the clusters p's head needs (clusters
 * of them: 0 for the policy's own count, LEARN_SEG_PER_NODE or -K) in p's decode order. */
int learn_graph_segment(learn_graph *lg, const gopt_env *e, int S, gopt_error *err);
/* learn_segment.c: each cluster's kernel-time share and midpoint (lg->seg_time, lg->seg_mid) from
 * lg->seg_of and lg->n_seg. GOPT_ENOMEM or 0. */
int learn_seg_shares(learn_graph *lg);
/* learn_parts.c: lg->seg_of and n_seg from K METIS parts of the rows, each split by phase so that
 * clusters are numbered in a topological order (sp/sc: the readers' CSR, sorted, no repeats; rb:
 * each row's output bytes), then learn_seg_shares. */
int learn_part_clusters(learn_graph *lg, const int32_t *sp, const int32_t *sc, const double *rb, int K, gopt_error *err);
int learn_graph_for(const gopt_policy *p, const gopt_env *e, int clusters, learn_graph **out, gopt_error *err);
void learn_graph_segment_free(learn_graph *g);
/* learn_segment.c: kernel time of row r (us, from its features). */
double learn_row_us(const learn_graph *lg, int64_t r);
/* learn_segment.c: the rows of an encoding of g with n_rows rows (gopt_graph_topo's order): topo
 * (row -> node), pos (node -> row, -1 for a dead node; both g->nodes.n entries) and, unless NULL,
 * bytes (n_rows: each row's output tensors' bytes, what moves to a reader on another device).
 * Returns 0, or an error when g no longer has n_rows live nodes. */
int learn_row_index(const gopt_graph *g, int64_t n_rows, int32_t *topo, int32_t *pos, double *bytes, gopt_error *err);
/* learn_segment.c: the rows' dataflow edges as a CSR over rows (pos: node id -> row, -1 for a dead
 * node; n rows): dir 1 each row's readers, dir 0 its producers. uniq 0: one entry per input slot
 * (repeats kept), in node-id order; uniq 1: each list sorted, without repeats. The caller frees
 * both arrays. */
int learn_row_csr(const gopt_graph *g, const int32_t *pos, int64_t n, int dir, int uniq, int32_t **ptr_out,
                  int32_t **col_out);
/* learn_colocate.c: the constant subexpressions of a placement move to their readers (the device
 * where they send the fewest bytes).
 * learn_coloc_new precomputes lg's producer and reader lists; learn_coloc_apply rewrites the device
 * variables of x (dev_of: lg->n rows of scratch). */
typedef struct learn_coloc learn_coloc;
int learn_coloc_new(const gopt_env *e, const learn_graph *lg, learn_coloc **out, gopt_error *err);
void learn_coloc_apply(learn_coloc *c, const learn_graph *lg, double *x, int32_t *dev_of);
void learn_coloc_free(learn_coloc *c); /* accepts NULL */
/* learn_optimize.c: the variant of each zero-shot row 0..k (row_lv[k + 1]) given the `levels`
 * greedy decodes' results (levels <= LEARN_DEC_VARIANTS: LEARN_DEC_LEVELS levels, each also
 * gradient-colocated, and the balanced decodes): row r < levels is variant r's greedy decode; the
 * samples rotate over those of the first `sampled` variants whose greedy result is the best of
 * them (gopt_env_result_better; ties share). greedy[0] is not read when sampled == 1. */
#define LEARN_DEC_COARSEST 64 /* the coarsest level: S / 64 clusters (levels S / 4, S / 16, ... up to it) */
#define LEARN_DEC_PARTS 2     /* min-cut levels: D and 2 D METIS parts (learn_parts.c) */
#define LEARN_DEC_LEVELS (5 + LEARN_DEC_PARTS) /* S, one per node, S / 4, S / 16, S / 64, the parts */
#define LEARN_DEC_BALANCED (1 + LEARN_DEC_PARTS) /* balanced decodes: level 0's and the parts' */
#define LEARN_DEC_VARIANTS (2 * LEARN_DEC_LEVELS + LEARN_DEC_BALANCED)
#define LEARN_DEC_CAP_SLACK 1.05 /* the balanced decode: a device holds at most 1.05 x its share */
void learn_alloc_levels(const gopt_env_result *greedy, int levels, int sampled, int k, int8_t *row_lv);
/* learn_segment.c: the segment head's sampling (cluster devices in order, each conditioned on the
 * earlier ones, then the node refinement), its log-probabilities ([1 + Vd]: the sum of the cluster
 * factors, then one per device variable) and each cluster's majority device from a->dev (imitation
 * targets). cap: NULL, or per cluster a weight (summing to 1): the balanced decode, in which no
 * device takes more than LEARN_DEC_CAP_SLACK times its speed's share of the weight while another
 * has room (cap_mask). */
void learn_seg_sample(const learn_fwd *f, const learn_graph *g, gopt_nn_rng *rng, int greedy, const double *cap,
                      learn_acts *a);
/* The segment head's log-probability entries of a (clusters, then nodes); with kl, also
 * KL(policy || prior) summed over the cluster decisions ([1]): per cluster, the divergence of its
 * device distribution from the one the head's fixed feature weights alone give (the untrained
 * head without its random embedding part), both under the conditioning a's decisions leave; NULL
 * for a head without the six features. One replay of the conditioning serves both. */
gopt_nn_tensor *learn_seg_logp(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a,
                               gopt_nn_tensor **kl);
/* The list schedule's links. learn_seg_link_book books link l for x us from the earliest time >= r
 * at which it is free that long (the first gap in its busy intervals, so a transfer whose tensor is
 * ready early is not queued behind one booked earlier in the decode order but later in time) and
 * returns the end; learn_seg_link_unbook removes the last interval booked (it must be on l).
 * g->iv holds at most in_ptr[n_seg] plus the largest in-degree intervals. */
double learn_seg_link_book(const learn_graph *g, int l, double r, double x);
void learn_seg_link_unbook(const learn_graph *g, int l);
void learn_seg_from_dev(const learn_graph *g, learn_acts *a);
/* The conditioning features [n_seg, D, nf] of every cluster for the cluster devices seg_dev,
 * replaying learn_seg_sample's decode order (a function of the devices already chosen). */
void learn_seg_cond(const learn_graph *g, const int32_t *seg_dev, int nf, float *cond);
/* learn_segment.c: the segment head's parameters (before finalize), their initial values (after),
 * and its part of the forward pass (e: every row's embedding, rows: the device variables'). */
int learn_seg_params(gopt_policy *p);
void learn_seg_init(gopt_policy *p);
void learn_seg_forward(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, gopt_nn_tensor *e,
                       gopt_nn_tensor *rows, learn_fwd *f);
/* Builds the pass's outputs. mod may be NULL. Returns 0 or the ctx error. */
int learn_forward(gopt_nn_ctx *ctx, const gopt_policy *p, const learn_graph *g, const learn_mod *mod,
                  learn_fwd *f, gopt_error *err);
int learn_acts_alloc(learn_acts *a, const learn_graph *g);
void learn_acts_free(learn_acts *a);
/* Draws one action set from the forward pass's values (greedy: argmax / Beta mean). */
void learn_sample(const learn_fwd *f, const learn_graph *g, gopt_nn_rng *rng, int greedy, learn_acts *a);
/* Writes the actions into x (nvars doubles). */
void learn_to_x(const learn_graph *g, const learn_acts *a, double *x);
/* Per-variable log-probabilities of the actions -> [V] (kinds in order DEVICE, PRIORITY, FUSE); seg_kl
 * (may be NULL): the segment head's KL anchor term (learn_seg_logp), NULL without one. */
gopt_nn_tensor *learn_logp(gopt_nn_ctx *ctx, const learn_fwd *f, const learn_graph *g, const learn_acts *a,
                           gopt_nn_tensor **seg_kl);
/* Mean per-variable entropy -> [1]. */
gopt_nn_tensor *learn_entropy(gopt_nn_ctx *ctx, const learn_fwd *f);
/* Log-probability entries of a sample in g (learn_logp's length): the variables (sum of nk), plus
 * the segment head's cluster factors (one per cluster, first). */
int64_t learn_nv(const learn_graph *g);

int learn_mod_new(const gopt_policy *p, learn_mod *m, gopt_error *err);
void learn_mod_free(learn_mod *m);

/* NN checkpoint <-> memory (through a temporary file). label names the policy in messages. */
int learn_ckpt_to_blob(const gopt_nn_params *p, const gopt_nn_optim *o, const gopt_nn_rng *rng,
                       int64_t step, unsigned char **blob, size_t *len, gopt_error *err);
int learn_ckpt_from_blob(const char *label, const unsigned char *blob, size_t len, gopt_nn_params *p,
                         gopt_nn_optim *o, gopt_nn_rng *rng, int64_t *step, gopt_error *err);

/* The .gpol container (gopt/learn.h): written atomically around a metadata text and an NN
 * checkpoint blob; read back with magic, version, size and checksum checked (one line naming
 * path on failure). meta is NUL-terminated; ck points into buf. */
typedef struct learn_file { char *meta; unsigned char *buf; const unsigned char *ck; size_t ck_len; } learn_file;
int learn_file_write(const char *path, const void *meta, size_t meta_len, const unsigned char *ck,
                     size_t ckn, gopt_error *err);
int learn_file_read(const char *path, learn_file *f, gopt_error *err);
void learn_file_free(learn_file *f); /* accepts NULL */
/* Loads f's checkpoint into params and, when has_train, keeps a copy of the blob in *ckpt / *len
 * (the trainer state a resumed run restores with learn_resume_restore). */
int learn_file_restore(const char *path, const learn_file *f, gopt_nn_params *params, int has_train,
                       unsigned char **ckpt, size_t *len, gopt_error *err);
/* A resumed trainer's weights, Adam state and (when rng) RNG from the kept blob; its step must be
 * iter (learn_train.c). */
int learn_resume_restore(const unsigned char *blob, size_t len, gopt_nn_params *p, gopt_nn_optim *o,
                         gopt_nn_rng *rng, int64_t iter, gopt_error *err);

/* A resumed run must match the saved trainer state (graph count, total iterations): 0, or one
 * line naming both (learn_train.c). */
int learn_resume_check(size_t n_saved, int64_t iters_saved, size_t n, int64_t iters, gopt_error *err);
/* The training-set text of a policy file: names[i] (NULL or missing: "?"), one per line; NULL
 * when out of memory. */
char *learn_trainset_text(const char *const *names, size_t n);


/* A growable byte buffer for the file writers: oom is set when an allocation fails (the later puts
 * do nothing); the caller frees p. */
typedef struct learn_buf { unsigned char *p; size_t n, cap; int oom; } learn_buf;
void learn_buf_put(learn_buf *b, const void *d, size_t n);

/* A stop request is pending (gopt_learn_request_stop). */
int learn_stop_requested(void);

#endif
