/* exec_arena.c: the executor's static memory plan, as ONNX Runtime's memory patterns and TFLite's
 * arena planner make one. Once per executor (graph, order, fusion plan, layouts, in-place
 * decisions) it replays the run loop's allocations without running anything: every activation
 * buffer (a tensor's, or a chain of tensors sharing one in place) gets its bytes and the steps it
 * lives over, [the step producing it, the step of its last read] (graph outputs: to the end).
 * Buffers are then placed greedily by size (the largest first, each at the lowest offset where it
 * overlaps no placed buffer whose steps overlap its own) in one arena, allocated at the first run.
 * A run then takes each output's buffer at its planned offset, so where every activation lands is
 * fixed per plan and independent of earlier runs (the pool in exec.c hands out buffers in the order
 * the previous run freed them). Per-step profiling that keeps every buffer alive still uses the
 * pool. Environment GOPT_ARENA=0 turns the plan off (the pool serves every run). Under
 * AddressSanitizer every buffer is followed by a 64-byte gap and only live buffers are unpoisoned,
 * so an overrun is caught as it was with one allocation per buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define ARENA_GAP 64
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ARENA_GAP 0
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct arena_blk {
  size_t size, off;
  int32_t first, last; /* steps: produced at first, last read at last (inclusive) */
} arena_blk;

typedef struct arena_sim {
  arena_blk *b;
  size_t n, cap;
  int32_t *blk_of; /* per tensor: its buffer, -1 none */
  uint8_t *live;   /* per tensor: holds its buffer at this point of the replay */
} arena_sim;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t ex_act_nbytes(const gopt_exec *x, int32_t t) {
  size_t n = ex_layout_nbytes(x, t); /* a oneDNN layout may pad the channels */
  return n ? n : (size_t)ex_numel(x, t) * gopt_dtype_size(ex_dtype(x, t));
}

/* A new buffer of nbytes produced at step s; returns its index or -1 (out of memory). */
static int32_t sim_new(arena_sim *m, size_t nbytes, int32_t s) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    arena_blk *a = realloc(m->b, cap * sizeof *a);
    if (!a) return -1;
    m->b = a;
    m->cap = cap;
  }
  m->b[m->n] = (arena_blk){round64(nbytes ? nbytes : 1) + ARENA_GAP, 0, s, INT32_MAX};
  return (int32_t)m->n++;
}

/* Whether input j of step k hands its buffer to one of the step's outputs (in place, as the
 * exec_inplace.c decisions say); shared by the run loop (exec.c) and the plan's replay. */
int ex_kernel_gives(const ex_kernel *k, int j) {
  for (int o = 0; k->reuse && o < k->n_out; o++)
    if (k->reuse[o] == j) return 1;
  return 0;
}

/* Replays gopt_exec_run's allocations and frees (exec.c) step by step. Returns GOPT_OK, 1 when a
 * tensor is produced twice in one run (no static plan: the pool serves it), or GOPT_ENOMEM. */
static int replay(const gopt_exec *x, arena_sim *m) {
  for (size_t s = 0; s < x->n_steps; s++) {
    const ex_kernel *k = &x->steps[s];
    for (int j = 0; j < k->n_out; j++) {
      int32_t t = k->out[j];
      if (x->vals[t].kind != EX_V_ACT || m->live[t]) continue;
      if (m->blk_of[t] >= 0) return 1;
      int32_t b = -1;
      if (k->reuse && k->reuse[j] >= 0) b = m->blk_of[k->in[k->reuse[j]]];
      if (b >= 0) {
        size_t need = round64(ex_act_nbytes(x, t)) + ARENA_GAP;
        if (m->b[b].size < need) m->b[b].size = need;
      } else if ((b = sim_new(m, ex_act_nbytes(x, t), (int32_t)s)) < 0) {
        return GOPT_ENOMEM;
      }
      m->blk_of[t] = b;
      m->live[t] = 1;
    }
    for (int j = 0; j < k->n_in + k->n_out; j++) {
      int32_t t = j < k->n_in ? k->in[j] : k->out[j - k->n_in];
      if (t < 0 || x->last_use[t] != (int32_t)s || x->vals[t].kind != EX_V_ACT || !m->live[t]) continue;
      m->live[t] = 0;
      if (j < k->n_in && ex_kernel_gives(k, j)) continue; /* the buffer lives on as an output's */
      m->b[m->blk_of[t]].last = (int32_t)s;
    }
  }
  return GOPT_OK;
}

static int by_size(const void *a, const void *b) {
  const arena_blk *p = *(arena_blk *const *)a, *q = *(arena_blk *const *)b;
  if (p->size != q->size) return p->size > q->size ? -1 : 1;
  if (p->first != q->first) return p->first < q->first ? -1 : 1;
  return p < q ? -1 : p > q;
}

static int by_off(const void *a, const void *b) {
  const arena_blk *p = *(arena_blk *const *)a, *q = *(arena_blk *const *)b;
  return p->off < q->off ? -1 : p->off > q->off;
}

/* Greedy by size: each buffer, the largest first, at the lowest offset clear of every placed
 * buffer whose steps overlap its own. Returns the arena's bytes, or SIZE_MAX (out of memory). */
static size_t place(arena_sim *m) {
  arena_blk **order = malloc((m->n + 1) * sizeof *order), **near = malloc((m->n + 1) * sizeof *near);
  size_t total = 0;
  if (!order || !near) {
    free(order);
    free(near);
    return SIZE_MAX;
  }
  for (size_t i = 0; i < m->n; i++) order[i] = &m->b[i];
  qsort(order, m->n, sizeof *order, by_size);
  for (size_t i = 0; i < m->n; i++) {
    arena_blk *b = order[i];
    size_t n_near = 0, off = 0;
    for (size_t q = 0; q < i; q++)
      if (order[q]->first <= b->last && b->first <= order[q]->last) near[n_near++] = order[q];
    qsort(near, n_near, sizeof *near, by_off);
    for (size_t q = 0; q < n_near; q++) {
      if (off + b->size <= near[q]->off) break;
      if (near[q]->off + near[q]->size > off) off = near[q]->off + near[q]->size;
    }
    b->off = off;
    if (off + b->size > total) total = off + b->size;
  }
  free(order);
  free(near);
  return total;
}

int ex_arena_plan(gopt_exec *x, gopt_error *err) {
  const char *e = getenv("GOPT_ARENA");
  size_t nt = x->g->tensors.n;
  arena_sim m = {0};
  int rc = GOPT_OK;
  x->arena_bytes = 0;
  if (e && !strcmp(e, "0")) return GOPT_OK;
  m.blk_of = malloc((nt + 1) * sizeof *m.blk_of);
  m.live = calloc(nt + 1, 1);
  x->arena_off = malloc((nt + 1) * sizeof *x->arena_off);
  if (!m.blk_of || !m.live || !x->arena_off) {
    rc = GOPT_ENOMEM;
    goto done;
  }
  for (size_t t = 0; t < nt; t++) m.blk_of[t] = -1;
  rc = replay(x, &m);
  if (rc == GOPT_OK && m.n) {
    size_t total = place(&m);
    if (total == SIZE_MAX) rc = GOPT_ENOMEM;
    x->arena_bytes = total == SIZE_MAX ? 0 : total;
  }
  for (size_t t = 0; t < nt; t++)
    x->arena_off[t] = rc == GOPT_OK && m.blk_of[t] >= 0 ? m.b[m.blk_of[t]].off : SIZE_MAX;
done:
  free(m.b);
  free(m.blk_of);
  free(m.live);
  if (rc != GOPT_OK || !x->arena_bytes) { /* no plan: the pool serves every run */
    free(x->arena_off);
    x->arena_off = NULL;
    x->arena_bytes = 0;
  }
  return rc == GOPT_ENOMEM ? gopt_error_set(err, GOPT_ENOMEM, "out of memory") : GOPT_OK;
}

void *ex_arena_get(gopt_exec *x, int32_t t) {
  if (!x->arena_off || x->profiling || x->arena_off[t] == SIZE_MAX) return NULL;
  if (!x->arena) {
    x->arena = aligned_alloc(4096, (x->arena_bytes + 4095) & ~(size_t)4095);
    if (!x->arena) return NULL;
    ARENA_POISON(x->arena, x->arena_bytes);
  }
  void *p = x->arena + x->arena_off[t];
  ARENA_UNPOISON(p, round64(x->vals[t].nbytes ? x->vals[t].nbytes : 1));
  return p;
}

int ex_arena_put(gopt_exec *x, void *p, size_t nbytes) {
  uint8_t *q = p;
  if (!x->arena || q < x->arena || q >= x->arena + x->arena_bytes) return 0;
  ARENA_POISON(q, round64(nbytes ? nbytes : 1));
  return 1;
}

int gopt_exec_arena_offset(const gopt_exec *x, int32_t t, size_t *off) {
  if (!x || !x->arena_off || t < 0 || (size_t)t >= x->g->tensors.n || x->arena_off[t] == SIZE_MAX) return 0;
  *off = x->arena_off[t];
  return 1;
}

size_t gopt_exec_arena_bytes(const gopt_exec *x) { return x ? x->arena_bytes : 0; }
size_t gopt_exec_pool_bytes(const gopt_exec *x) { return x ? x->pool_bytes : 0; }
