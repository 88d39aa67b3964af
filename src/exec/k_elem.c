/* k_elem.c: elementwise and broadcast ops. Float ops (alone or as a fused group) compile to a small
 * per-element program: loads of the external inputs with broadcast-aware index math, one
 * instruction per op over register blocks, stores of the group's outputs; one OpenMP-parallel
 * loop over blocks of the output, so a fused group makes one pass over memory with no
 * intermediate buffers. The block loops themselves are in k_vec.inc, compiled per instruction set
 * (exec_isa.c picks one). Integer/bool ops and casts take a generic (scalar) broadcast path. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "exec/k_vec.h"

static void fx_free(void *p) {
  fx_prog *f = p;
  if (!f) return;
  free(f->loads);
  free(f->instr);
  free(f->stores);
  free(f->scratch);
  free(f->ptrs);
  free(f->own);
  fx_free(f->pre);
  free(f);
}

/* ---- which ops ------------------------------------------------------------------------------------ */

static int fx_opcode(int op) {
  switch (op) {
    case GOPT_OP_IDENTITY: case GOPT_OP_DROPOUT: case GOPT_OP_EXPAND: case GOPT_OP_CAST: return FX_COPY;
    case GOPT_OP_RELU: return FX_RELU;
    case GOPT_OP_LEAKY_RELU: return FX_LEAKY;
    case GOPT_OP_ELU: return FX_ELU;
    case GOPT_OP_SIGMOID: return FX_SIGMOID;
    case GOPT_OP_HARD_SIGMOID: return FX_HSIGMOID;
    case GOPT_OP_HARD_SWISH: return FX_HSWISH;
    case GOPT_OP_TANH: return FX_TANH;
    case GOPT_OP_EXP: return FX_EXP;
    case GOPT_OP_LOG: return FX_LOG;
    case GOPT_OP_SQRT: return FX_SQRT;
    case GOPT_OP_RECIPROCAL: return FX_RECIP;
    case GOPT_OP_NEG: return FX_NEG;
    case GOPT_OP_ABS: return FX_ABS;
    case GOPT_OP_ERF: return FX_ERF;
    case GOPT_OP_FLOOR: return FX_FLOOR;
    case GOPT_OP_CEIL: return FX_CEIL;
    case GOPT_OP_ROUND: return FX_ROUND;
    case GOPT_OP_SIGN: return FX_SIGN;
    case GOPT_OP_SIN: return FX_SIN;
    case GOPT_OP_COS: return FX_COS;
    case GOPT_OP_SOFTPLUS: return FX_SOFTPLUS;
    case GOPT_OP_CLIP: return FX_CLIP;
    case GOPT_OP_ADD: case GOPT_OP_SUM: return FX_ADD;
    case GOPT_OP_SUB: return FX_SUB;
    case GOPT_OP_MUL: return FX_MUL;
    case GOPT_OP_DIV: return FX_DIV;
    case GOPT_OP_POW: return FX_POW;
    case GOPT_OP_MAX: return FX_MAX;
    case GOPT_OP_MIN: return FX_MIN;
    case GOPT_OP_PRELU: return FX_PRELU;
    case GOPT_OP_WHERE: return FX_WHERE;
    default: return -1;
  }
}

int ex_dropout_is_copy(const gopt_exec *x, int32_t n) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op != GOPT_OP_DROPOUT || nd->n_out < 1) return 0;
  int32_t mask = nd->n_out > 1 ? gopt_node_output(g, n, 1) : -1;
  if (mask >= 0) {
    if (gopt_tensor_use_count(g, mask) > 0) return 0;
    for (size_t i = 0; i < g->outputs.n; i++)
      if (g->outputs.a[i] == mask) return 0;
  }
  int32_t ratio = nd->n_in > 1 ? gopt_node_input(g, n, 1) : -1, tm = nd->n_in > 2 ? gopt_node_input(g, n, 2) : -1;
  /* gopt_exec_fusable asks without an executor (no value table): read constants from the graph */
  const float *r = ratio >= 0 && ex_is_const(x, ratio) && ex_dtype(x, ratio) == GOPT_DT_FLOAT && ex_numel(x, ratio) == 1
                       ? (x->vals ? ex_data(x, ratio) : gopt_tensor_data(g, ratio)) : NULL;
  if (tm < 0 || (r && r[0] == 0.0f)) return 1; /* inference, or training with ratio 0: identity */
  const uint8_t *v = ex_is_const(x, tm) ? (x->vals ? ex_data(x, tm) : gopt_tensor_data(g, tm)) : NULL;
  return v && ex_dtype(x, tm) == GOPT_DT_BOOL && ex_numel(x, tm) == 1 && v[0] == 0;
}

int ex_fusable(const gopt_exec *x, int32_t n) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op == GOPT_OP_DROPOUT) {
    if (!ex_dropout_is_copy(x, n)) return 0;
  } else if (fx_opcode(nd->op) < 0 || nd->n_out != 1) {
    return 0;
  }
  if (ex_dtype(x, gopt_node_output(g, n, 0)) != GOPT_DT_FLOAT) return 0;
  for (int i = 0; i < nd->n_in; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t < 0) continue;
    if (nd->op == GOPT_OP_WHERE && i == 0) {
      if (ex_dtype(x, t) != GOPT_DT_BOOL) return 0;
      continue;
    }
    if ((nd->op == GOPT_OP_EXPAND || nd->op == GOPT_OP_DROPOUT) && i >= 1) continue;
    if (nd->op == GOPT_OP_CLIP && i > 0) {
      if (!ex_is_const(x, t) || ex_numel(x, t) != 1) return 0;
      continue;
    }
    if (ex_dtype(x, t) != GOPT_DT_FLOAT) return 0;
  }
  return 1;
}

int ex_elem_handles(const gopt_exec *x, int32_t n) {
  int op = x->g->nodes.a[n].op;
  if (fx_opcode(op) >= 0) return 1;
  switch (op) {
    case GOPT_OP_NOT: case GOPT_OP_EQUAL: case GOPT_OP_LESS: case GOPT_OP_LESS_OR_EQUAL:
    case GOPT_OP_GREATER: case GOPT_OP_GREATER_OR_EQUAL: case GOPT_OP_AND: case GOPT_OP_OR:
    case GOPT_OP_XOR: case GOPT_OP_MOD: case GOPT_OP_ISNAN:
      return 1;
    default: return 0;
  }
}

/* ---- the program's kernel ------------------------------------------------------------------------- */

/* fx_exec: out_k[i] = program(in_0[bcast(i)], ...) for i in [0, numel) (shapes in f), after f's
 * pre-program (which fills the buffers f loads from); the blocks run through the ISA's block
 * function (k_vec.inc). */
static void fx_exec(gopt_exec *x, fx_prog *f) {
  if (f->pre) fx_exec(x, f->pre);
  for (int l = 0; l < f->n_loads; l++)
    f->loads[l].base = f->loads[l].own ? (const void *)f->loads[l].own : ex_data(x, f->loads[l].tensor);
  for (int s = 0; s < f->n_stores; s++)
    f->stores[s].base = f->stores[s].own ? f->stores[s].own : ex_data(x, f->stores[s].tensor);
  int64_t nblk = (f->numel + FX_BLK - 1) / FX_BLK;
  int nt = f->n_threads;
#pragma omp parallel for schedule(static) num_threads(nt) if (nblk > 8)
  for (int64_t b = 0; b < nblk; b++) {
    int tid = omp_get_thread_num();
    float *regs = f->scratch + (size_t)tid * (size_t)f->n_regs * FX_BLK;
    const float **rp = f->ptrs + (size_t)tid * (size_t)f->n_regs;
    int64_t start = b * FX_BLK;
    int64_t len = f->numel - start < FX_BLK ? f->numel - start : FX_BLK;
    f->block(f, regs, rp, start, len);
  }
}

static int fx_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  fx_exec(x, k->st);
  (void)err;
  return GOPT_OK;
}

/* k->in[in_j] may share out_j's buffer when the loop reads it contiguously, in full (a load of the
 * main program: the pre-program's inputs are smaller than the loop). */
int ex_elem_can_alias(const gopt_exec *x, const ex_kernel *k, int in_j, int out_j) {
  if (k->run != fx_run || in_j < 0 || out_j < 0 || in_j >= k->n_in) return 0;
  const fx_prog *f = k->st;
  if (out_j >= f->n_stores) return 0;
  const fx_load *l = NULL;
  for (int j = 0; j < f->n_loads && !l; j++)
    if (f->loads[j].tensor == k->in[in_j] && !f->loads[j].own) l = &f->loads[j];
  return l && l->kind == 1 && !l->is_bool && ex_dtype(x, l->tensor) == GOPT_DT_FLOAT &&
         ex_numel(x, l->tensor) == f->numel && ex_numel(x, f->stores[out_j].tensor) == f->numel;
}

/* ---- compiling a group ------------------------------------------------------------------------------ */

/* Broadcast strides of tensor t over loop dims (right-aligned); -1 when t does not broadcast. */
static int bcast_strides(const gopt_exec *x, int32_t t, int rank, const int64_t *dims, int64_t *st) {
  int r = ex_rank(x, t);
  const int64_t *d = ex_dims(x, t);
  if (r > rank) return -1;
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    int j = i - (rank - r);
    if (j < 0) {
      st[i] = 0;
      continue;
    }
    if (d[j] == dims[i]) {
      st[i] = dims[i] == 1 ? 0 : s;
    } else if (d[j] == 1) {
      st[i] = 0;
    } else {
      return -1;
    }
    s *= d[j];
  }
  return 0;
}

static float const_scalar(const gopt_exec *x, int32_t t, float dflt) {
  if (t < 0 || !ex_data(x, t)) return dflt;
  switch (ex_dtype(x, t)) {
    case GOPT_DT_FLOAT: return ((const float *)ex_data(x, t))[0];
    case GOPT_DT_DOUBLE: return (float)((const double *)ex_data(x, t))[0];
    default: return dflt;
  }
}

/* Pow whose exponent t is a constant scalar 2 or 3 runs as x*x or x*x*x (FX_SQUARE, FX_CUBE:
 * vectorised, where powf is a libm call per element; x*x is exactly powf's correctly rounded
 * square, x*x*x within an ulp of the cube); -1 otherwise. */
static int pow_special(const gopt_exec *x, int32_t t) {
  if (!ex_is_const(x, t) || ex_numel(x, t) != 1 || !ex_data(x, t)) return -1;
  float v = const_scalar(x, t, NAN);
  return v == 2.0f ? FX_SQUARE : v == 3.0f ? FX_CUBE : -1;
}

/* Merges adjacent loop dims that every broadcast (general) load walks the same way (stride of the
 * outer dim = stride of the inner one times its size, 0 and 0 included): x[4,64,112,112] + c[64,1,1]
 * becomes a loop over [4,64,12544] whose load of c is one constant per 12544-element run, so a
 * block is filled by one splat instead of a walk through 112-element runs. The flat element order,
 * and so every result, is unchanged. */
static void fx_collapse_dims(fx_prog *f) {
  for (int d = f->rank - 1; d > 0; d--) {
    int ok = 1;
    for (int l = 0; l < f->n_loads && ok; l++)
      if (f->loads[l].kind == 0) ok = f->loads[l].strides[d - 1] == f->loads[l].strides[d] * f->dims[d];
    if (!ok) continue;
    f->dims[d - 1] *= f->dims[d];
    for (int l = 0; l < f->n_loads; l++) {
      int64_t *st = f->loads[l].strides;
      st[d - 1] = st[d];
      memmove(st + d, st + d + 1, (size_t)(f->rank - 1 - d) * sizeof *st);
    }
    memmove(f->dims + d, f->dims + d + 1, (size_t)(f->rank - 1 - d) * sizeof *f->dims);
    f->rank--;
  }
}

/* The loop shape of members mem: the largest member output (the highest rank among equal sizes). */
static void fx_loop_shape(const gopt_exec *x, const int32_t *mem, int n_mem, fx_prog *f) {
  const gopt_graph *g = x->g;
  int64_t best = -1;
  for (int m = 0; m < n_mem; m++) {
    int32_t t = gopt_node_output(g, mem[m], 0);
    if (ex_numel(x, t) > best || (ex_numel(x, t) == best && ex_rank(x, t) > f->rank)) {
      best = ex_numel(x, t);
      f->rank = ex_rank(x, t);
      if (f->rank) memcpy(f->dims, ex_dims(x, t), (size_t)f->rank * sizeof(int64_t)); /* scalars: no dims */
    }
  }
  f->numel = best;
  if (f->rank == 0) {
    f->rank = 1;
    f->dims[0] = 1;
  }
}

/* Whether output t of a member is read outside the group in_group (by a node, a graph output or a
 * control-flow sub-graph). */
static int fx_read_outside(const gopt_exec *x, int32_t t, const uint8_t *in_group) {
  const gopt_graph *g = x->g;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t c = g->slots.a[s].node;
    if (gopt_node_alive(g, c) && !in_group[c]) return 1;
  }
  for (size_t i = 0; i < g->outputs.n; i++)
    if (g->outputs.a[i] == t) return 1;
  return ex_control_reads(x, t);
}

/* Every member output broadcasts to the loop, and every one read outside the group has its size. */
static int fx_check_members(gopt_exec *x, const int32_t *mem, int n_mem, const uint8_t *in_group,
                            const fx_prog *f, gopt_error *err) {
  const gopt_graph *g = x->g;
  for (int m = 0; m < n_mem; m++) {
    int32_t out = gopt_node_output(g, mem[m], 0);
    int64_t tmp[GOPT_MAX_RANK];
    if (bcast_strides(x, out, f->rank, f->dims, tmp) < 0)
      return ex_node_error(x, mem[m], err, GOPT_EUNSUP, "fusion group: output shape does not broadcast "
                           "to the group's loop shape");
    if (ex_numel(x, out) != f->numel && fx_read_outside(x, out, in_group))
      return ex_node_error(x, mem[m], err, GOPT_EUNSUP,
                           "fusion group: output '%s' is used outside the group but is smaller "
                           "than the group's loop (%lld of %lld elements)",
                           gopt_graph_str(g, g->tensors.a[out].name), (long long)ex_numel(x, out),
                           (long long)f->numel);
  }
  return GOPT_OK;
}

/* Hoisting: a member whose output has at most 1/FX_HOIST of the loop's elements (LayerNorm's
 * Sqrt(var + eps) over [T, 1] in a loop over [T, C]) would be recomputed for every element of the
 * loop it broadcasts over. Those members (closed under their in-group producers: an elementwise
 * op's inputs are never larger than its output) run first as a pre-program over their own shape,
 * whose stores fill buffers of the step; the loop loads them like inputs. The same float ops on
 * the same values, so the results are bit for bit those of the single loop. Nested pre-programs
 * hoist every member smaller than their own loop, so each of their stores has their loop's size. */
#define FX_HOIST 4

static int fx_hoisted(const gopt_exec *x, int32_t n, const fx_prog *f, int top) {
  int64_t e = ex_numel(x, gopt_node_output(x->g, n, 0));
  return e < f->numel && (!top || e * FX_HOIST <= f->numel); /* never all of them (an empty loop) */
}

static int fx_prepare(gopt_exec *x, ex_kernel *k, const int32_t *mem, int n_mem, int top, gopt_error *err);

/* The members to hoist out of f's loop (fx_hoisted), or none when they do not all broadcast to the
 * largest of them (a pre-program has one loop shape). */
static int fx_pick_hoist(const gopt_exec *x, const fx_prog *f, const int32_t *mem, int n_mem, int top,
                         int32_t *hoist) {
  int n_hoist = 0;
  for (int m = 0; m < n_mem; m++)
    if (fx_hoisted(x, mem[m], f, top)) hoist[n_hoist++] = mem[m];
  if (!n_hoist) return 0;
  fx_prog shape = {0};
  int64_t tmp[GOPT_MAX_RANK];
  fx_loop_shape(x, hoist, n_hoist, &shape);
  for (int m = 0; m < n_hoist; m++)
    if (bcast_strides(x, gopt_node_output(x->g, hoist[m], 0), shape.rank, shape.dims, tmp) < 0) return 0;
  return n_hoist;
}

/* Builds f->pre over the hoisted members of mem (their inputs from outside to pre_in[*n_pre_in])
 * and writes the rest, in order, to loop_mem[*n_loop]. */
static int fx_hoist(gopt_exec *x, fx_prog *f, const int32_t *mem, int n_mem, int top, int32_t *loop_mem,
                    int *n_loop, int32_t *pre_in, int *n_pre_in, gopt_error *err) {
  int32_t *hoist = malloc(((size_t)n_mem + 1) * sizeof *hoist);
  ex_kernel sub = {0};
  int n_hoist = 0, rc = GOPT_OK;
  *n_loop = *n_pre_in = 0;
  if (!hoist) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  n_hoist = fx_pick_hoist(x, f, mem, n_mem, top, hoist);
  for (int m = 0, h = 0; m < n_mem; m++) {
    if (h < n_hoist && hoist[h] == mem[m]) h++;
    else loop_mem[(*n_loop)++] = mem[m];
  }
  if (!n_hoist) goto done;
  sub.node = mem[0];
  if ((rc = fx_prepare(x, &sub, hoist, n_hoist, 0, err))) goto done;
  f->pre = sub.st;
  sub.st = NULL;
  size_t per = (size_t)f->pre->numel, total = (size_t)f->pre->n_stores * per + 16;
  f->own = aligned_alloc(64, (total * sizeof(float) + 63) / 64 * 64);
  if (!f->own) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (int s = 0; s < f->pre->n_stores; s++) f->pre->stores[s].own = f->own + (size_t)s * per;
  memcpy(pre_in, sub.in, (size_t)sub.n_in * sizeof *pre_in);
  *n_pre_in = sub.n_in;
  if (top) x->n_loop_hoisted += (size_t)n_hoist;
done:
  if (sub.fini) sub.fini(sub.st);
  free(sub.in);
  free(sub.out);
  free(hoist);
  return rc;
}

/* The buffer f's pre-program stores tensor t in, or NULL. */
static const float *fx_pre_buffer(const fx_prog *f, int32_t t) {
  for (int s = 0; f->pre && s < f->pre->n_stores; s++)
    if (f->pre->stores[s].tensor == t) return f->pre->stores[s].own;
  return NULL;
}

/* Appends member m (node n, register m) to f: a load per input not seen yet, its instruction(s). */
static int fx_emit(gopt_exec *x, ex_kernel *k, fx_prog *f, int32_t n, int m, int32_t *reg_of,
                   int16_t *next_reg, gopt_error *err) {
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  int16_t src[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int nsrc = 0;
  for (int i = 0; i < nd->n_in && nsrc < 8; i++) {
    int32_t t = gopt_node_input(g, n, i);
    if (t < 0) continue;
    if ((nd->op == GOPT_OP_EXPAND && i == 1) || (nd->op == GOPT_OP_DROPOUT && i >= 1)) continue;
    if (nd->op == GOPT_OP_CLIP && i > 0) continue;
    if (nd->op == GOPT_OP_POW && i == 1 && pow_special(x, t) >= 0) continue;
    if (reg_of[t]) {
      src[nsrc++] = (int16_t)(reg_of[t] - 1);
      continue;
    }
    /* a new load */
    fx_load *l = &f->loads[f->n_loads];
    l->tensor = t;
    l->own = fx_pre_buffer(f, t);
    l->is_bool = ex_dtype(x, t) == GOPT_DT_BOOL;
    if (bcast_strides(x, t, f->rank, f->dims, l->strides) < 0)
      return ex_node_error(x, n, err, GOPT_EUNSUP, "input '%s' does not broadcast to the loop shape",
                           gopt_graph_str(g, g->tensors.a[t].name));
    int64_t tn = ex_numel(x, t);
    l->kind = tn == 1 ? 2 : tn == f->numel ? 1 : 0;
    reg_of[t] = *next_reg + 1;
    src[nsrc++] = (*next_reg)++;
    f->n_loads++;
    if (!l->own) k->in[k->n_in++] = t;
  }
  fx_instr *in = &f->instr[f->n_instr++];
  in->op = (uint8_t)fx_opcode(nd->op);
  if (nd->op == GOPT_OP_POW && nd->n_in > 1 && pow_special(x, gopt_node_input(g, n, 1)) >= 0)
    in->op = (uint8_t)pow_special(x, gopt_node_input(g, n, 1));
  in->dst = (int16_t)m;
  in->a = src[0];
  in->b = in->c = -1;
  if (nsrc >= 2) in->b = src[1];
  if (nsrc >= 3) in->c = src[2];
  switch (nd->op) {
    case GOPT_OP_LEAKY_RELU: in->p0 = (float)gopt_node_get_float(g, n, "alpha", 0.01); break;
    case GOPT_OP_ELU: in->p0 = (float)gopt_node_get_float(g, n, "alpha", 1.0); break;
    case GOPT_OP_HARD_SIGMOID:
      in->p0 = (float)gopt_node_get_float(g, n, "alpha", 0.2);
      in->p1 = (float)gopt_node_get_float(g, n, "beta", 0.5);
      break;
    case GOPT_OP_CLIP:
      if (nd->n_in > 1) {
        in->p0 = const_scalar(x, nd->n_in > 1 ? gopt_node_input(g, n, 1) : -1, -INFINITY);
        in->p1 = const_scalar(x, nd->n_in > 2 ? gopt_node_input(g, n, 2) : -1, INFINITY);
      } else {
        in->p0 = (float)gopt_node_get_float(g, n, "min", -INFINITY);
        in->p1 = (float)gopt_node_get_float(g, n, "max", INFINITY);
      }
      break;
    default: break;
  }
  int need = nd->op == GOPT_OP_WHERE ? 3 : (in->op >= FX_ADD && in->op <= FX_PRELU) ? 2 : 1;
  if (nsrc < need) return ex_node_error(x, n, err, GOPT_EINVAL, "expected %d inputs", need);
  /* variadic Sum/Max/Min: chain the remaining inputs */
  for (int j = 2; j < nsrc && nd->op != GOPT_OP_WHERE; j++) {
    fx_instr *c2 = &f->instr[f->n_instr++];
    *c2 = *in;
    c2->a = (int16_t)m;
    c2->b = src[j];
  }
  reg_of[gopt_node_output(g, n, 0)] = m + 1;
  return GOPT_OK;
}

/* Appends the pre-program's inputs to k->in that the loop does not read itself. */
static void fx_merge_inputs(ex_kernel *k, int n_loop_in) {
  int n = n_loop_in;
  for (int j = n_loop_in; j < k->n_in; j++) {
    int dup = 0;
    for (int i = 0; i < n && !dup; i++) dup = k->in[i] == k->in[j];
    if (!dup) k->in[n++] = k->in[j];
  }
  k->n_in = n;
}

/* fx_prepare: compiles members mem (a topological order) into k's program; top: the whole group
 * (hoists members of at most 1/FX_HOIST of the loop), else a pre-program (hoists every smaller one). */
static int fx_prepare(gopt_exec *x, ex_kernel *k, const int32_t *mem, int n_mem, int top, gopt_error *err) {
  const gopt_graph *g = x->g;
  int rc = GOPT_OK;
  fx_prog *f = calloc(1, sizeof *f);
  int32_t *reg_of = NULL; /* tensor -> register + 1 for tensors defined so far */
  int32_t *loop_mem = NULL, *pre_in = NULL;
  uint8_t *in_group = NULL;
  int max_in = 0, n_loop = 0, n_pre_in = 0;
  if (!f) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = f;
  k->fini = fx_free;
  k->run = fx_run;
  for (int m = 0; m < n_mem; m++) max_in += g->nodes.a[mem[m]].n_in;
  f->loads = calloc((size_t)max_in + 1, sizeof *f->loads);
  f->instr = calloc((size_t)(max_in + n_mem) + 1, sizeof *f->instr);
  f->stores = calloc((size_t)n_mem + 1, sizeof *f->stores);
  reg_of = calloc(g->tensors.n + 1, sizeof *reg_of);
  loop_mem = malloc(((size_t)n_mem + 1) * sizeof *loop_mem);
  pre_in = malloc(((size_t)max_in + 1) * sizeof *pre_in);
  in_group = calloc((size_t)g->nodes.n + 1, 1);
  free(k->in);
  free(k->out);
  k->in = malloc(((size_t)max_in + 1) * sizeof *k->in);
  k->out = malloc(((size_t)n_mem + 1) * sizeof *k->out);
  k->n_in = k->n_out = 0;
  if (!f->loads || !f->instr || !f->stores || !reg_of || !loop_mem || !pre_in || !in_group || !k->in || !k->out) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  for (int m = 0; m < n_mem; m++) in_group[mem[m]] = 1;
  fx_loop_shape(x, mem, n_mem, f);
  if (top && (rc = fx_check_members(x, mem, n_mem, in_group, f, err))) goto done;
  if ((rc = fx_hoist(x, f, mem, n_mem, top, loop_mem, &n_loop, pre_in, &n_pre_in, err))) goto done;
  /* the loop's member outputs are registers 0..n_loop-1; loads follow */
  int16_t next_reg = (int16_t)n_loop;
  for (int m = 0; m < n_loop && !rc; m++) rc = fx_emit(x, k, f, loop_mem[m], m, reg_of, &next_reg, err);
  if (rc) goto done;
  int n_loop_in = k->n_in; /* the pre-program's inputs go after the loop's own */
  memcpy(k->in + k->n_in, pre_in, (size_t)n_pre_in * sizeof *pre_in);
  k->n_in += n_pre_in;
  fx_merge_inputs(k, n_loop_in);
  /* stores: member outputs read outside the members (all of the loop's size: fx_check_members for
   * the group; a pre-program hoists every smaller member) */
  for (int m = 0; m < n_loop; m++) {
    int32_t out = gopt_node_output(g, loop_mem[m], 0);
    if (!fx_read_outside(x, out, in_group)) continue;
    f->stores[f->n_stores++] = (fx_store){out, (int16_t)m, NULL, NULL};
    k->out[k->n_out++] = out;
  }
  fx_collapse_dims(f);
  f->n_regs = next_reg;
  f->n_members = n_loop;
  f->n_threads = x->threads > 0 ? x->threads : 1;
  f->scratch = aligned_alloc(64, (size_t)f->n_threads * (size_t)f->n_regs * FX_BLK * sizeof(float));
  f->ptrs = malloc(((size_t)f->n_threads * (size_t)f->n_regs + 1) * sizeof *f->ptrs);
  f->block = ex_vec_ops_for(x->isa)->fx_block;
  if (!f->scratch || !f->ptrs) rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
done:
  free(reg_of);
  free(loop_mem);
  free(pre_in);
  free(in_group);
  return rc;
}

int ex_prepare_fused(gopt_exec *x, ex_kernel *k, const int32_t *mem, int n_mem, gopt_error *err) {
  return fx_prepare(x, k, mem, n_mem, 1, err);
}

size_t gopt_exec_n_loop_hoisted(const gopt_exec *x) { return x ? x->n_loop_hoisted : 0; }

/* ---- generic (non-float) path ------------------------------------------------------------------------- */

typedef struct gen_st {
  int op;
  int to;  /* Cast target */
  int n_in;
  int rank;
  int64_t dims[GOPT_MAX_RANK];
  int64_t st[3][GOPT_MAX_RANK];
} gen_st;

static double get_d(const void *p, int dt, int64_t i) {
  switch (dt) {
    case GOPT_DT_FLOAT: return ((const float *)p)[i];
    case GOPT_DT_DOUBLE: return ((const double *)p)[i];
    case GOPT_DT_INT64: return (double)((const int64_t *)p)[i];
    case GOPT_DT_INT32: return ((const int32_t *)p)[i];
    case GOPT_DT_INT16: return ((const int16_t *)p)[i];
    case GOPT_DT_INT8: return ((const int8_t *)p)[i];
    case GOPT_DT_UINT16: return ((const uint16_t *)p)[i];
    case GOPT_DT_UINT8: case GOPT_DT_BOOL: return ((const uint8_t *)p)[i];
    default: return 0;
  }
}
static int64_t get_i(const void *p, int dt, int64_t i) {
  switch (dt) {
    case GOPT_DT_FLOAT: return (int64_t)((const float *)p)[i];
    case GOPT_DT_DOUBLE: return (int64_t)((const double *)p)[i];
    case GOPT_DT_INT64: return ((const int64_t *)p)[i];
    case GOPT_DT_INT32: return ((const int32_t *)p)[i];
    case GOPT_DT_INT16: return ((const int16_t *)p)[i];
    case GOPT_DT_INT8: return ((const int8_t *)p)[i];
    case GOPT_DT_UINT16: return ((const uint16_t *)p)[i];
    case GOPT_DT_UINT8: case GOPT_DT_BOOL: return ((const uint8_t *)p)[i];
    default: return 0;
  }
}
static int is_int_dt(int dt) {
  return dt == GOPT_DT_INT64 || dt == GOPT_DT_INT32 || dt == GOPT_DT_INT16 || dt == GOPT_DT_INT8 ||
         dt == GOPT_DT_UINT8 || dt == GOPT_DT_UINT16 || dt == GOPT_DT_BOOL;
}
static void put(void *p, int dt, int64_t i, double d, int64_t v, int use_int) {
  switch (dt) {
    case GOPT_DT_FLOAT: ((float *)p)[i] = use_int ? (float)v : (float)d; break;
    case GOPT_DT_DOUBLE: ((double *)p)[i] = use_int ? (double)v : d; break;
    case GOPT_DT_INT64: ((int64_t *)p)[i] = use_int ? v : (int64_t)d; break;
    case GOPT_DT_INT32: ((int32_t *)p)[i] = (int32_t)(use_int ? v : (int64_t)d); break;
    case GOPT_DT_INT16: ((int16_t *)p)[i] = (int16_t)(use_int ? v : (int64_t)d); break;
    case GOPT_DT_INT8: ((int8_t *)p)[i] = (int8_t)(use_int ? v : (int64_t)d); break;
    case GOPT_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)(use_int ? v : (int64_t)d); break;
    case GOPT_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)(use_int ? v : (int64_t)d); break;
    case GOPT_DT_BOOL: ((uint8_t *)p)[i] = (uint8_t)(use_int ? v != 0 : d != 0); break;
    default: break;
  }
}

static int64_t floordiv_mod(int64_t a, int64_t b) {
  if (b == 0) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* gen_forward: out[i] = op(in_0[bcast i], in_1[...], in_2[...]) in double or int64 arithmetic. */
static int gen_run(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  gen_st *s = k->st;
  int32_t o = k->out[0];
  void *out = ex_data(x, o);
  int odt = ex_dtype(x, o);
  const void *in[3] = {0};
  int dt[3] = {0};
  int all_int = 1;
  int ni = 0;
  for (int j = 0; j < k->n_in && ni < 3; j++) {
    if (k->in[j] < 0) continue;
    if (s->op == GOPT_OP_EXPAND && j == 1) continue;
    if (s->op == GOPT_OP_CLIP && j > 0) continue;
    in[ni] = ex_data(x, k->in[j]);
    dt[ni] = ex_dtype(x, k->in[j]);
    if (!(s->op == GOPT_OP_WHERE && ni == 0) && !is_int_dt(dt[ni])) all_int = 0;
    ni++;
  }
  int64_t n = ex_numel(x, o);
  int rank = s->rank;
  int64_t c[GOPT_MAX_RANK] = {0};
  int64_t off[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++) {
    double a = ni > 0 ? get_d(in[0], dt[0], off[0]) : 0, b = ni > 1 ? get_d(in[1], dt[1], off[1]) : 0;
    int64_t ia = ni > 0 ? get_i(in[0], dt[0], off[0]) : 0, ib = ni > 1 ? get_i(in[1], dt[1], off[1]) : 0;
    double rd = 0;
    int64_t ri = 0;
    int ui = all_int;
    switch (s->op) {
      case GOPT_OP_CAST: case GOPT_OP_IDENTITY: case GOPT_OP_DROPOUT: case GOPT_OP_EXPAND:
        ui = is_int_dt(dt[0]);
        rd = a;
        ri = ia;
        if (s->op == GOPT_OP_CAST && odt == GOPT_DT_BOOL) { ri = ui ? ia != 0 : a != 0; ui = 1; }
        break;
      case GOPT_OP_NOT: ri = !ia; ui = 1; break;
      case GOPT_OP_ISNAN: ri = isnan(a); ui = 1; break;
      case GOPT_OP_NEG: rd = -a; ri = -ia; break;
      case GOPT_OP_ABS: rd = fabs(a); ri = ia < 0 ? -ia : ia; break;
      case GOPT_OP_RELU: rd = a > 0 ? a : 0; ri = ia > 0 ? ia : 0; break;
      case GOPT_OP_SIGN: rd = (a > 0) - (a < 0); ri = (ia > 0) - (ia < 0); break;
      case GOPT_OP_ADD: case GOPT_OP_SUM: rd = a + b; ri = ia + ib; break;
      case GOPT_OP_SUB: rd = a - b; ri = ia - ib; break;
      case GOPT_OP_MUL: rd = a * b; ri = ia * ib; break;
      case GOPT_OP_DIV: rd = a / b; ri = ib ? ia / ib : 0; break;
      case GOPT_OP_MOD: rd = fmod(a, b); ri = floordiv_mod(ia, ib); break;
      case GOPT_OP_POW: rd = pow(a, b); ui = 0; break;
      case GOPT_OP_MAX: rd = a > b ? a : b; ri = ia > ib ? ia : ib; break;
      case GOPT_OP_MIN: rd = a < b ? a : b; ri = ia < ib ? ia : ib; break;
      case GOPT_OP_EQUAL: ri = all_int ? ia == ib : a == b; ui = 1; break;
      case GOPT_OP_LESS: ri = all_int ? ia < ib : a < b; ui = 1; break;
      case GOPT_OP_LESS_OR_EQUAL: ri = all_int ? ia <= ib : a <= b; ui = 1; break;
      case GOPT_OP_GREATER: ri = all_int ? ia > ib : a > b; ui = 1; break;
      case GOPT_OP_GREATER_OR_EQUAL: ri = all_int ? ia >= ib : a >= b; ui = 1; break;
      case GOPT_OP_AND: ri = ia && ib; ui = 1; break;
      case GOPT_OP_OR: ri = ia || ib; ui = 1; break;
      case GOPT_OP_XOR: ri = (ia != 0) != (ib != 0); ui = 1; break;
      case GOPT_OP_WHERE:
        ui = is_int_dt(dt[1]);
        rd = ia ? b : get_d(in[2], dt[2], off[2]);
        ri = ia ? ib : get_i(in[2], dt[2], off[2]);
        break;
      default:
        return ex_node_error(x, k->node, err, GOPT_EUNSUP, "no %s kernel for dtype %s",
                             gopt_node_type(x->g, k->node), gopt_dtype_name(dt[0]));
    }
    put(out, odt, i, rd, ri, ui);
    /* advance coordinates */
    for (int d = rank - 1; d >= 0; d--) {
      c[d]++;
      for (int j = 0; j < ni; j++) off[j] += s->st[j][d];
      if (c[d] < s->dims[d]) break;
      for (int j = 0; j < ni; j++) off[j] -= s->st[j][d] * c[d];
      c[d] = 0;
    }
  }
  return GOPT_OK;
}

int ex_prepare_elem(gopt_exec *x, ex_kernel *k, gopt_error *err) {
  int32_t n = k->node;
  if (ex_fusable(x, n)) {
    int32_t one = n;
    return ex_prepare_fused(x, k, &one, 1, err);
  }
  const gopt_graph *g = x->g;
  const gopt_node *nd = &g->nodes.a[n];
  if (nd->op == GOPT_OP_CLIP)
    return ex_node_error(x, n, err, GOPT_EUNSUP, "Clip runs on FLOAT with constant scalar min/max only");
  switch (nd->op) {
    case GOPT_OP_CAST: case GOPT_OP_IDENTITY: case GOPT_OP_DROPOUT: case GOPT_OP_EXPAND:
    case GOPT_OP_NOT: case GOPT_OP_ISNAN: case GOPT_OP_NEG: case GOPT_OP_ABS: case GOPT_OP_RELU:
    case GOPT_OP_SIGN: case GOPT_OP_ADD: case GOPT_OP_SUB: case GOPT_OP_MUL:
    case GOPT_OP_DIV: case GOPT_OP_MOD: case GOPT_OP_POW: case GOPT_OP_EQUAL: case GOPT_OP_LESS:
    case GOPT_OP_LESS_OR_EQUAL: case GOPT_OP_GREATER: case GOPT_OP_GREATER_OR_EQUAL:
    case GOPT_OP_AND: case GOPT_OP_OR: case GOPT_OP_XOR: case GOPT_OP_WHERE:
      break;
    case GOPT_OP_SUM: case GOPT_OP_MAX: case GOPT_OP_MIN:
      if (nd->n_in == 2) break;
      /* fall through */
    default:
      return ex_node_error(x, n, err, GOPT_EUNSUP, "no kernel for these input dtypes (%s)",
                           nd->n_in ? gopt_dtype_name(ex_dtype(x, k->in[0] >= 0 ? k->in[0] : k->out[0])) : "-");
  }
  gen_st *s = calloc(1, sizeof *s);
  if (!s) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  k->st = s;
  k->fini = free;
  k->run = gen_run;
  s->op = nd->op;
  int32_t o = k->out[0];
  s->rank = ex_rank(x, o);
  if (s->rank) memcpy(s->dims, ex_dims(x, o), (size_t)s->rank * sizeof(int64_t));
  if (s->rank == 0) {
    s->rank = 1;
    s->dims[0] = 1;
  }
  int ni = 0;
  for (int j = 0; j < k->n_in && ni < 3; j++) {
    int32_t t = k->in[j];
    if (t < 0 || (s->op == GOPT_OP_EXPAND && j == 1) || (s->op == GOPT_OP_CLIP && j > 0)) continue;
    if (ex_dtype(x, t) == GOPT_DT_STRING || gopt_dtype_size(ex_dtype(x, t)) == 0 ||
        ex_dtype(x, t) == GOPT_DT_FLOAT16 || ex_dtype(x, t) == GOPT_DT_BFLOAT16 ||
        ex_dtype(x, t) >= GOPT_DT_UINT32)
      return ex_node_error(x, n, err, GOPT_EUNSUP, "dtype %s is not supported",
                           gopt_dtype_name(ex_dtype(x, t)));
    if (bcast_strides(x, t, s->rank, s->dims, s->st[ni]) < 0)
      return ex_node_error(x, n, err, GOPT_ESHAPE, "input %d does not broadcast to the output", j);
    ni++;
  }
  s->n_in = ni;
  int odt = ex_dtype(x, o);
  if (odt == GOPT_DT_STRING || odt == GOPT_DT_FLOAT16 || odt == GOPT_DT_BFLOAT16 || odt >= GOPT_DT_UINT32)
    return ex_node_error(x, n, err, GOPT_EUNSUP, "output dtype %s is not supported", gopt_dtype_name(odt));
  return GOPT_OK;
}

/* ---- automatic fusion groups ------------------------------------------------------------------------ */

int gopt_exec_fusable(const gopt_graph *g, int32_t n) {
  gopt_exec x = {0};
  x.g = g;
  return gopt_node_alive(g, n) && ex_fusable(&x, n);
}

/* Elements of t with every symbolic dim (an unbound batch) counted as 2: orders tensors by size
 * as any binding >= 2 would; the executor sees the bound shapes, for which the checks below that
 * compare symbolic dims by identity are conservative. */
static int64_t sym_numel(const gopt_graph *g, int32_t t) {
  int64_t n = 1;
  for (int i = 0; i < g->tensors.a[t].rank; i++) {
    int64_t d = gopt_tensor_dims(g, t)[i];
    n *= GOPT_DIM_IS_SYM(d) ? 2 : d;
  }
  return n;
}

/* Whether t, aligned to the right of the loop shape dims[0..rank), has every dim of it that is
 * not 1 (it is the loop's full size once bound). */
static int full_size(const gopt_graph *g, int32_t t, int rank, const int64_t *dims) {
  int r = g->tensors.a[t].rank;
  const int64_t *d = gopt_tensor_dims(g, t);
  if (r > rank) return 0;
  for (int i = 0; i < rank; i++) {
    int j = i - (rank - r);
    if (dims[i] != 1 && (j < 0 || d[j] != dims[i])) return 0;
  }
  return 1;
}

/* Whether the live nodes mem[0..n_mem) run as one fused loop (ex_prepare_fused's conditions, read
 * from the graph): every member fusable with static shapes; the loop shape is the largest member
 * output; every member output and every loaded input broadcasts to it; every member output read
 * outside the group (or a graph output) has the loop's full size. */
static int loop_group_ok(const gopt_graph *g, const int32_t *mem, int n_mem) {
  gopt_exec x = {0};
  x.g = g;
  int rank = 0;
  int64_t best = -1, dims[GOPT_MAX_RANK], st[GOPT_MAX_RANK];
  for (int m = 0; m < n_mem; m++) {
    if (!gopt_node_alive(g, mem[m]) || !ex_fusable(&x, mem[m])) return 0;
    int32_t t = gopt_node_output(g, mem[m], 0);
    if (sym_numel(g, t) > best || (sym_numel(g, t) == best && ex_rank(&x, t) > rank)) {
      best = sym_numel(g, t);
      rank = ex_rank(&x, t);
      if (rank) memcpy(dims, ex_dims(&x, t), (size_t)rank * sizeof *dims);
    }
  }
  for (int m = 0; m < n_mem; m++) {
    int32_t n = mem[m], out = gopt_node_output(g, n, 0);
    const gopt_node *nd = &g->nodes.a[n];
    if (bcast_strides(&x, out, rank, dims, st) < 0) return 0;
    for (int i = 0; i < nd->n_in; i++) {
      int32_t t = gopt_node_input(g, n, i);
      if (t < 0 || ((nd->op == GOPT_OP_EXPAND || nd->op == GOPT_OP_DROPOUT || nd->op == GOPT_OP_CLIP) && i >= 1))
        continue;
      if (bcast_strides(&x, t, rank, dims, st) < 0) return 0;
    }
    int ext = 0;
    for (int32_t s = g->tensors.a[out].first_use; s >= 0 && !ext; s = g->slots.a[s].next_use) {
      int32_t c = g->slots.a[s].node, in = 0;
      for (int j = 0; j < n_mem && !in; j++) in = mem[j] == c;
      ext = gopt_node_alive(g, c) && !in;
    }
    for (size_t i = 0; i < g->outputs.n && !ext; i++) ext = g->outputs.a[i] == out;
    if (ext && !full_size(g, out, rank, dims)) return 0;
  }
  return 1;
}

int gopt_exec_group_kind(const gopt_graph *g, const int32_t *mem, int n_mem) {
  if (n_mem < 2) return GOPT_EXEC_GROUP_NONE;
  if (loop_group_ok(g, mem, n_mem)) return GOPT_EXEC_GROUP_LOOP;
  return ex_group_chain_ok(g, mem, n_mem) ? GOPT_EXEC_GROUP_CHAIN : GOPT_EXEC_GROUP_NONE;
}

int32_t gopt_exec_auto_fusion(const gopt_graph *g, int32_t *group) {
  size_t nn = g->nodes.n;
  int32_t next = 0;
  for (size_t i = 0; i < nn; i++) group[i] = -1;
  int32_t *order = malloc((nn + 1) * sizeof *order);
  if (!order) return 0;
  int64_t cnt = gopt_graph_topo(g, order, NULL);
  for (int64_t i = 0; i < cnt; i++) {
    int32_t n = order[i];
    if (!gopt_exec_fusable(g, n)) continue;
    int32_t out = gopt_node_output(g, n, 0);
    int64_t size = gopt_tensor_numel(g, out);
    for (int j = 0; j < g->nodes.a[n].n_in; j++) {
      int32_t t = gopt_node_input(g, n, j);
      if (t < 0) continue;
      int32_t p = g->tensors.a[t].producer;
      if (p < 0 || !gopt_exec_fusable(g, p)) continue;
      if (gopt_tensor_use_count(g, t) != 1 || gopt_tensor_numel(g, t) != size) continue;
      int is_out = 0;
      for (size_t o = 0; o < g->outputs.n; o++) is_out |= g->outputs.a[o] == t;
      if (is_out) continue;
      if (group[p] < 0) group[p] = next++;
      if (group[n] < 0) {
        group[n] = group[p];
      } else if (group[n] != group[p]) {
        int32_t from = group[p];
        for (size_t q = 0; q < nn; q++)
          if (group[q] == from) group[q] = group[n];
      }
    }
  }
  free(order);
  /* renumber densely */
  int32_t *map = malloc(((size_t)next + 1) * sizeof *map);
  if (!map) return 0;
  for (int32_t i = 0; i < next; i++) map[i] = -1;
  int32_t ng = 0;
  for (size_t q = 0; q < nn; q++)
    if (group[q] >= 0) {
      if (map[group[q]] < 0) map[group[q]] = ng++;
      group[q] = map[group[q]];
    }
  free(map);
  return ng;
}
