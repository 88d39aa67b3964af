/* task_group.c: FUSE bits -> fusion groups. Positions are visited in reverse topological order;
 * a position whose bit is set joins the union of its consumers' groups when that union stays
 * convex (no path leaves it and re-enters), keeps the groups mutually independent (the quotient
 * graph stays acyclic), lies on one device, holds at most one heavy op (conv-like or reduction
 * class; on a cpu cluster instead: is one kernel of gopt's executor, host_ok), and passes the
 * caller's extra rule; otherwise its bit is repaired to 0. The result depends only on the bits and devices (deterministic).
 *
 * The cycle check searches the quotient graph (groups as units) from the merged set, bounded by a
 * topological order tau of the units that is maintained across merges as in Pearce and Kelly's
 * dynamic topological sort: a path leaving the set S and returning can only visit units with
 * tau below max tau(S); after the merge, the ancestors of S above min tau(S), the merged unit and
 * the descendants of S below max tau(S) are laid out again on the same tau slots, in that order. */
#include <stdlib.h>
#include <string.h>

#include "gopt/exec.h"
#include "gopt/ops.h"
#include "task/task_internal.h"
#include "util/util_internal.h"

void task_grouper_free(task_grouper *gr) {
  if (!gr) return;
  void *arrs[] = {gr->parent, gr->next, gr->tail, gr->tau, gr->dev, gr->size, gr->nconv,
                  gr->nops, gr->vis, gr->mark, gr->stack, gr->roots, gr->alist, gr->dlist,
                  gr->slots, gr->eff, gr->group, gr->tmp, gr->owner, gr->memb};
  for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) free(arrs[i]);
  free(gr);
}

task_grouper *task_grouper_new(const gopt_env *e) {
  task_grouper *gr = calloc(1, sizeof *gr);
  if (!gr) return NULL;
  gr->e = e;
  int32_t n = e->n;
  if (GOPT_ALLOC(gr->parent, n) || GOPT_ALLOC(gr->next, n) || GOPT_ALLOC(gr->tail, n) || GOPT_ALLOC(gr->tau, n) ||
      GOPT_ALLOC(gr->dev, n) || GOPT_ALLOC(gr->size, n) || GOPT_ALLOC(gr->nconv, n) || GOPT_ALLOC(gr->nops, n) ||
      GOPT_ALLOC(gr->vis, n) || GOPT_ALLOC(gr->mark, n) || GOPT_ALLOC(gr->stack, n) || GOPT_ALLOC(gr->roots, n) ||
      GOPT_ALLOC(gr->alist, n) || GOPT_ALLOC(gr->dlist, n) || GOPT_ALLOC(gr->slots, 3 * (size_t)n) ||
      GOPT_ALLOC(gr->eff, n) || GOPT_ALLOC(gr->group, n) || GOPT_ALLOC(gr->tmp, 3 * (size_t)n) || GOPT_ALLOC(gr->owner, n) ||
      GOPT_ALLOC(gr->memb, n)) {
    task_grouper_free(gr);
    return NULL;
  }
  return gr;
}

int32_t task_grouper_find(task_grouper *gr, int32_t p) {
  int32_t r = p;
  while (gr->parent[r] != r) r = gr->parent[r];
  while (gr->parent[p] != r) {
    int32_t q = gr->parent[p];
    gr->parent[p] = r;
    p = q;
  }
  return r;
}

/* Number of distinct input tensors of position p (activations, weights and graph inputs). */
static int32_t n_inputs(const gopt_env *e, int32_t p) {
  const gopt_graph *g = e->g;
  const gopt_node *nd = &g->nodes.a[e->order[p]];
  int32_t k = 0;
  for (uint32_t i = 0; i < nd->n_in; i++) {
    int32_t t = g->slots.a[nd->in + i].tensor;
    if (t < 0 || (g->tensors.a[t].flags & GOPT_T_ATTR)) continue;
    int dup = 0;
    for (uint32_t j = 0; j < i && !dup; j++) dup = g->slots.a[nd->in + j].tensor == t;
    k += !dup;
  }
  return k;
}

/* Distinct tensors of producer p read by consumer c. */
static int32_t n_edge_tensors(const gopt_env *e, int32_t p, int32_t c) {
  const gopt_graph *g = e->g;
  const gopt_node *np = &g->nodes.a[e->order[p]], *nc = &g->nodes.a[e->order[c]];
  int32_t k = 0;
  for (uint32_t i = 0; i < nc->n_in; i++) {
    int32_t t = g->slots.a[nc->in + i].tensor;
    if (t < 0 || g->tensors.a[t].producer != e->order[p]) continue;
    int dup = 0;
    for (uint32_t j = 0; j < i && !dup; j++) dup = g->slots.a[nc->in + j].tensor == t;
    k += !dup;
  }
  (void)np;
  return k;
}

/* Whether node n is among mem[0..k). */
static int in_list(const int32_t *mem, int k, int32_t n) {
  for (int i = 0; i < k; i++)
    if (mem[i] == n) return 1;
  return 0;
}

/* Whether a node of mem[0..k) outside the executor's own chains (an extended post-op) is a binary op
 * reading a tensor computed at run time outside mem: an activation or graph input, not a constant.
 * The host target does not offer such a post-op. The executor runs it (oneDNN binary post-op with a
 * runtime operand), but measured it was no faster than the executor's own plan: on
 * lraspp_mobilenet_v3_large's head (Conv-Relu times a squeeze-excitation scale), +0.1 % [-0.8,
 * +2.0] and -0.1 % [-1.1, +0.7] gain on the head cut out as a model of its own (101 rounds each);
 * the chain must wait for the operand's branch, which then runs between two reads of the conv's
 * input (docs/BENCHMARKS.md "Host fusion", seventh round). Constant operands (a layer scale, a
 * bias) stay. */
static int host_runtime_operand(const gopt_env *e, const int32_t *mem, int k) {
  const gopt_graph *g = e->g;
  for (int i = 0; i < k; i++) {
    const gopt_node *nd = &g->nodes.a[mem[i]];
    if (e->host_chain[mem[i]] >= 0 || gopt_op_class_of(nd->op) != GOPT_OPC_BROADCAST) continue;
    for (uint32_t j = 0; j < nd->n_in; j++) {
      int32_t t = g->slots.a[nd->in + j].tensor;
      if (t < 0 || (g->tensors.a[t].flags & (GOPT_T_CONST | GOPT_T_ATTR))) continue;
      int32_t pr = g->tensors.a[t].producer;
      if (pr < 0 || !in_list(mem, k, pr)) return 1;
    }
  }
  return 0;
}

/* Host legality of merging p with the groups roots[0..nr): whether gopt's executor runs the union
 * as one kernel. Without a node the executor runs in its own oneDNN steps, the union must be one
 * elementwise loop. With one of its post-op chains' nodes, the union completed by those chains
 * whole (task_host_chains adds the rest) must be one Conv/MatMul chain: the executor's chain, or
 * that chain extended by the union's other nodes as post-ops (binary ops, GELU: the extended
 * post-ops of exec_layout.c, which only a fusion decision makes), all on p's device. A per-channel
 * Mul/Add or GlobalAveragePool the executor runs as a oneDNN step of its own joins a group only as
 * such a chain's post-op (in a loop it would end a oneDNN layout). */
static int host_ok(task_grouper *gr, int32_t p, int nr) {
  const gopt_env *e = gr->e;
  int k = 0, chains = 0;
  gr->memb[k++] = e->order[p];
  for (int i = 0; i < nr; i++)
    for (int32_t m = gr->roots[i]; m >= 0; m = gr->next[m]) gr->memb[k++] = e->order[m];
  for (int i = 0; i < k; i++) chains += e->host_step[gr->memb[i]] >= 0;
  if (!chains) return gopt_exec_group_kind(e->g, gr->memb, k) == GOPT_EXEC_GROUP_LOOP;
  int k0 = k;
  for (int i = 0; i < k0; i++) {
    int32_t c = e->host_chain[gr->memb[i]];
    if (c < 0) continue;
    for (int32_t j = e->host_chain_off[c]; j < e->host_chain_off[c + 1]; j++) {
      int32_t m = e->host_chain_mem[j], q = e->pos[m];
      if (in_list(gr->memb, k, m)) continue;
      if (q < 0 || gr->dev[task_grouper_find(gr, q)] != gr->dev[p]) return 0;
      gr->memb[k++] = m;
    }
  }
  return gopt_exec_group_kind(e->g, gr->memb, k) == GOPT_EXEC_GROUP_CHAIN && !host_runtime_operand(e, gr->memb, k);
}

void task_host_chains(const gopt_env *e, const int32_t *dev, gopt_decisions *d) {
  if (!e->host_chain || !d->group || e->n_host_chains == 0) return;
  int32_t *dv = malloc((size_t)e->n_host_chains * sizeof *dv), next = (int32_t)d->n_groups;
  int32_t *id = malloc((size_t)e->n_host_chains * sizeof *id);
  if (!dv || !id) { /* without the chains the groups are still legal; only their price is off */
    free(dv);
    free(id);
    return;
  }
  for (int32_t c = 0; c < e->n_host_chains; c++) dv[c] = -1, id[c] = -1;
  for (int32_t p = 0; p < e->n; p++) { /* -2: the chain's nodes are on several devices */
    int32_t c = e->host_chain[e->order[p]], v = dev ? dev[p] : 0;
    if (c < 0) continue;
    dv[c] = dv[c] == -1 ? v : dv[c] == v ? v : -2;
    if (d->group[e->order[p]] >= 0) id[c] = d->group[e->order[p]]; /* extended: the decision's group */
  }
  for (int32_t c = 0; c < e->n_host_chains; c++)
    if (id[c] < 0 && dv[c] >= 0) id[c] = next++;
  for (int32_t c = 0; c < e->n_host_chains; c++)
    for (int32_t j = e->host_chain_off[c]; id[c] >= 0 && j < e->host_chain_off[c + 1]; j++)
      d->group[e->host_chain_mem[j]] = id[c];
  d->n_groups = next;
  free(dv);
  free(id);
}

/* Sorts n distinct non-negative 32-bit keys in a (insertion sort when short, else LSD radix
 * sort, 8 bits per pass; tmp has room for n). */
static void sort_keys(uint32_t *a, int32_t n, uint32_t *tmp) {
  if (n < 48) {
    for (int32_t i = 1; i < n; i++) {
      uint32_t v = a[i];
      int32_t j = i - 1;
      while (j >= 0 && a[j] > v) {
        a[j + 1] = a[j];
        j--;
      }
      a[j + 1] = v;
    }
    return;
  }
  for (int shift = 0; shift < 32; shift += 8) {
    int32_t cnt[257] = {0};
    for (int32_t i = 0; i < n; i++) cnt[((a[i] >> shift) & 255) + 1]++;
    for (int k = 0; k < 256; k++) cnt[k + 1] += cnt[k];
    for (int32_t i = 0; i < n; i++) tmp[cnt[(a[i] >> shift) & 255]++] = a[i];
    memcpy(a, tmp, (size_t)n * sizeof *a);
  }
}

/* Sorts units by tau (tau values are distinct): sorts the taus, then maps back through owner[]. */
static void sort_by_tau(task_grouper *gr, int32_t *a, int32_t n) {
  if (n < 2) return;
  uint32_t *k = (uint32_t *)gr->tmp, *t = k + n;
  for (int32_t i = 0; i < n; i++) {
    k[i] = (uint32_t)gr->tau[a[i]];
    gr->owner[gr->tau[a[i]]] = a[i];
  }
  sort_keys(k, n, t);
  for (int32_t i = 0; i < n; i++) a[i] = gr->owner[k[i]];
}

/* Cycle check for merging the units S = {p} + roots[0..nr) (marked with mstamp): searches the
 * units reachable from S with tau below max tau(S); reaching S again means the merge would make
 * a group non-convex or two groups mutually dependent. On success *nd descendants are in dlist. */
static int merge_ok(task_grouper *gr, int32_t p, int nr, int32_t *nd) {
  const gopt_env *e = gr->e;
  int32_t hi = gr->tau[p], sp = 0, k = 0;
  for (int i = 0; i < nr; i++)
    if (gr->tau[gr->roots[i]] > hi) hi = gr->tau[gr->roots[i]];
  gr->vstamp++;
  for (int i = 0; i < nr; i++)
    for (int32_t m = gr->roots[i]; m >= 0; m = gr->next[m])
      for (int32_t j = e->succ_off[m]; j < e->succ_off[m + 1]; j++) {
        int32_t r = task_grouper_find(gr, e->succ[j]);
        if (gr->mark[r] == gr->mstamp || gr->vis[r] == gr->vstamp || gr->tau[r] >= hi) continue;
        gr->vis[r] = gr->vstamp;
        gr->stack[sp++] = r;
      }
  while (sp > 0) {
    int32_t u = gr->stack[--sp];
    gr->dlist[k++] = u;
    for (int32_t m = u; m >= 0; m = gr->next[m])
      for (int32_t j = e->succ_off[m]; j < e->succ_off[m + 1]; j++) {
        int32_t r = task_grouper_find(gr, e->succ[j]);
        if (gr->mark[r] == gr->mstamp) return 0;
        if (gr->vis[r] == gr->vstamp || gr->tau[r] >= hi) continue;
        gr->vis[r] = gr->vstamp;
        gr->stack[sp++] = r;
      }
  }
  *nd = k;
  return 1;
}

/* Ancestors of S (marked) with tau above min tau(S), into alist; returns their count. */
static int32_t ancestors(task_grouper *gr, int32_t p, int nr) {
  const gopt_env *e = gr->e;
  int32_t lo = gr->tau[p], sp = 0, k = 0;
  for (int i = 0; i < nr; i++)
    if (gr->tau[gr->roots[i]] < lo) lo = gr->tau[gr->roots[i]];
  gr->vstamp++;
  for (int i = -1; i < nr; i++)
    for (int32_t m = i < 0 ? p : gr->roots[i]; m >= 0; m = i < 0 ? -1 : gr->next[m])
      for (int32_t j = e->pred_off[m]; j < e->pred_off[m + 1]; j++) {
        int32_t r = task_grouper_find(gr, e->pred[j]);
        if (gr->mark[r] == gr->mstamp || gr->vis[r] == gr->vstamp || gr->tau[r] <= lo) continue;
        gr->vis[r] = gr->vstamp;
        gr->stack[sp++] = r;
      }
  while (sp > 0) {
    int32_t u = gr->stack[--sp];
    gr->alist[k++] = u;
    for (int32_t m = u; m >= 0; m = gr->next[m])
      for (int32_t j = e->pred_off[m]; j < e->pred_off[m + 1]; j++) {
        int32_t r = task_grouper_find(gr, e->pred[j]);
        if (gr->mark[r] == gr->mstamp || gr->vis[r] == gr->vstamp || gr->tau[r] <= lo) continue;
        gr->vis[r] = gr->vstamp;
        gr->stack[sp++] = r;
      }
  }
  return k;
}

void task_grouper_build(task_grouper *gr, const uint8_t *want, const int32_t *dev,
                        task_accept_fn accept, void *user) {
  const gopt_env *e = gr->e;
  const int32_t n = e->n;
  for (int32_t p = 0; p < n; p++) {
    gr->parent[p] = p;
    gr->next[p] = -1;
    gr->tail[p] = p;
    gr->tau[p] = e->dfs_rank[p];
    gr->dev[p] = dev ? dev[p] : 0;
    gr->size[p] = 1;
    gr->nconv[p] = task_heavy_class(e->cls[p]);
    gr->nops[p] = n_inputs(e, p);
    gr->vis[p] = gr->mark[p] = 0;
    gr->eff[p] = 0;
  }
  gr->vstamp = gr->mstamp = 0;
  gr->repaired = 0;
  for (int32_t p = n - 1; p >= 0; p--) {
    if (!want[p]) continue;
    /* p is still alone here: groups so far hold only later positions */
    int nr = 0, ok = 1;
    int32_t nd = 0;
    gr->mstamp++;
    gr->mark[p] = gr->mstamp;
    for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++) {
      int32_t r = task_grouper_find(gr, e->succ[j]);
      if (gr->mark[r] == gr->mstamp) continue;
      gr->mark[r] = gr->mstamp;
      gr->roots[nr++] = r;
      if (gr->dev[r] != gr->dev[p]) ok = 0;
    }
    if (nr == 0 || e->fuse_var[p] < 0) ok = 0;
    /* Every fusion holds at most one heavy op (conv-like or reduction): a kernel library or XLA
     * fuses a matmul/conv with elementwise neighbours (output fusion) or a reduction with its
     * elementwise producers (input fusion), never two matmuls, so the simulator's one-launch,
     * boundary-bytes-only cost of a group is only claimed for groups a compiler can build. */
    if (ok) {
      int32_t heavy = gr->nconv[p];
      for (int i = 0; i < nr; i++) heavy += gr->nconv[gr->roots[i]];
      if (heavy > 1) ok = 0;
    }
    if (ok && e->fuse_host) ok = host_ok(gr, p, nr);
    if (ok && accept) ok = accept(gr, p, gr->roots, nr, user);
    if (ok) ok = merge_ok(gr, p, nr, &nd);
    if (!ok) {
      gr->repaired++;
      continue;
    }
    /* new topological order. Every ancestor of S has tau below max tau(S); with no descendant of
     * S below it either, the merged unit simply takes that slot. Otherwise the ancestors above
     * min tau(S), the merged unit and the descendants below max tau(S) are laid out again on
     * their own slots in that order (ancestors only move earlier, descendants only later). */
    if (nd == 0) {
      for (int i = 0; i < nr; i++)
        if (gr->tau[gr->roots[i]] > gr->tau[p]) gr->tau[p] = gr->tau[gr->roots[i]];
    } else {
      int32_t na = ancestors(gr, p, nr), ns = 0;
      if (na == 0) { /* no ancestor above min tau(S): the merged unit takes that slot */
        for (int i = 0; i < nr; i++)
          if (gr->tau[gr->roots[i]] < gr->tau[p]) gr->tau[p] = gr->tau[gr->roots[i]];
        goto merge;
      }
      for (int32_t i = 0; i < na; i++) gr->slots[ns++] = gr->tau[gr->alist[i]];
      gr->slots[ns++] = gr->tau[p];
      for (int i = 0; i < nr; i++) gr->slots[ns++] = gr->tau[gr->roots[i]];
      for (int32_t i = 0; i < nd; i++) gr->slots[ns++] = gr->tau[gr->dlist[i]];
      sort_keys((uint32_t *)gr->slots, ns, (uint32_t *)gr->tmp);
      sort_by_tau(gr, gr->alist, na);
      sort_by_tau(gr, gr->dlist, nd);
      for (int32_t i = 0; i < na; i++) gr->tau[gr->alist[i]] = gr->slots[i];
      gr->tau[p] = gr->slots[na];
      for (int32_t i = 0; i < nd; i++) gr->tau[gr->dlist[i]] = gr->slots[ns - nd + i];
    }
  merge:;
    /* merge into p's root: p becomes the head (smallest position), groups appended in order */
    int32_t ops = gr->nops[p];
    for (int i = 0; i < nr; i++) {
      int32_t r = gr->roots[i];
      ops += gr->nops[r];
      gr->parent[r] = p;
      gr->next[gr->tail[p]] = r;
      gr->tail[p] = gr->tail[r];
      gr->size[p] += gr->size[r];
      gr->nconv[p] += gr->nconv[r];
    }
    for (int32_t j = e->succ_off[p]; j < e->succ_off[p + 1]; j++) ops -= n_edge_tensors(e, p, e->succ[j]);
    gr->nops[p] = ops > 0 ? ops : 0;
    gr->eff[p] = 1;
  }
  /* groups of two or more, numbered by their first position */
  gr->n_groups = 0;
  for (int32_t p = 0; p < n; p++) gr->vis[p] = -1;
  for (int32_t p = 0; p < n; p++) {
    int32_t r = task_grouper_find(gr, p);
    if (gr->size[r] < 2) {
      gr->group[p] = -1;
      continue;
    }
    if (gr->vis[r] < 0) gr->vis[r] = gr->n_groups++;
    gr->group[p] = gr->vis[r];
  }
  for (int32_t p = 0; p < n; p++) gr->vis[p] = 0;
}
