/* search_model.c: the graph model the exact methods optimise over, built from the IR the same way
 * the simulator builds its own (src/sim/sim.c): live nodes by topological position; activations
 * (tensors produced by live nodes) with their bytes, producer, distinct consumer positions and
 * graph-output flag; resident tensors (constants and graph inputs read by live nodes, not
 * attribute values) with their bytes and consumers; and the distinct producer positions of each
 * node. Bytes = elements x dtype size, as the simulator counts them. */
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"
#include "util/util_internal.h"

void search_model_free(search_model *m) {
  if (!m) return;
  void *a[] = {m->node, m->pos, m->act_bytes, m->act_prod, m->act_out, m->out_off, m->out_act,
               m->in_off, m->in_act, m->cons_off, m->cons, m->res_bytes, m->res_off, m->res_cons,
               m->pred_off, m->pred};
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) free(a[i]);
  memset(m, 0, sizeof *m);
}

/* Builds CSR (off[k + 1], val) from pairs (key[i], v[i]), i < np, keeping pair order per key. */
static int csr(int32_t nk, const int32_t *key, const int32_t *v, size_t np, int32_t **off,
               int32_t **val) {
  if (GOPT_ALLOC(*off, nk + 1) || GOPT_ALLOC(*val, np)) return -1;
  for (size_t i = 0; i < np; i++) (*off)[key[i] + 1]++;
  for (int32_t k = 0; k < nk; k++) (*off)[k + 1] += (*off)[k];
  int32_t *fill = calloc((size_t)nk + 1, sizeof *fill);
  if (!fill) return -1;
  memcpy(fill, *off, (size_t)nk * sizeof *fill);
  for (size_t i = 0; i < np; i++) (*val)[fill[key[i]]++] = v[i];
  free(fill);
  return 0;
}

int search_model_build(const gopt_graph *g, search_model *m, gopt_error *err) {
  memset(m, 0, sizeof *m);
  size_t NN = g->nodes.n, NT = g->tensors.n;
  int rc = 0;
  int32_t *act_of = NULL, *res_of = NULL, *mark = NULL;
  int32_t *pk = NULL, *pv = NULL, *rk = NULL, *rv = NULL, *ek = NULL, *ev = NULL;
  if (GOPT_ALLOC(m->node, NN) || GOPT_ALLOC(m->pos, NN) || GOPT_ALLOC(act_of, NT) || GOPT_ALLOC(res_of, NT) ||
      GOPT_ALLOC(mark, NT))
    goto oom;
  int64_t n = gopt_graph_topo(g, m->node, err);
  if (n < 0) {
    rc = (int)n;
    goto fail;
  }
  m->n = (int32_t)n;
  for (size_t i = 0; i < NN; i++) m->pos[i] = -1;
  for (int32_t p = 0; p < m->n; p++) m->pos[m->node[p]] = p;
  for (size_t t = 0; t < NT; t++) act_of[t] = res_of[t] = mark[t] = -1;
  /* activations, in production order */
  size_t n_in = 0;
  for (int32_t p = 0; p < m->n; p++) {
    const gopt_node *nd = &g->nodes.a[m->node[p]];
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      if (t >= 0 && act_of[t] < 0) act_of[t] = m->n_act++;
    }
    n_in += nd->n_in;
  }
  if (GOPT_ALLOC(m->act_bytes, m->n_act) || GOPT_ALLOC(m->act_prod, m->n_act) || GOPT_ALLOC(m->act_out, m->n_act) ||
      GOPT_ALLOC(m->out_off, m->n + 1) || GOPT_ALLOC(m->out_act, m->n_act) || GOPT_ALLOC(pk, n_in) ||
      GOPT_ALLOC(pv, n_in) || GOPT_ALLOC(rk, n_in) || GOPT_ALLOC(rv, n_in) || GOPT_ALLOC(ek, n_in) || GOPT_ALLOC(ev, n_in))
    goto oom;
  int32_t ko = 0;
  size_t np = 0, nr = 0, ne = 0;
  for (int32_t p = 0; p < m->n; p++) {
    const gopt_node *nd = &g->nodes.a[m->node[p]];
    m->out_off[p] = ko;
    for (uint32_t k = 0; k < nd->n_out; k++) {
      int32_t t = g->outs.a[nd->out + k];
      if (t < 0 || mark[t] == p) continue;
      mark[t] = p;
      int32_t a = act_of[t];
      m->act_prod[a] = p;
      m->act_bytes[a] = gopt_tensor_bytes(g, t);
      m->out_act[ko++] = a;
    }
  }
  m->out_off[m->n] = ko;
  for (size_t t = 0; t < NT; t++) mark[t] = -1;
  /* inputs: distinct acts (pairs act -> consumer), distinct residents, distinct producers */
  int32_t n_res = 0;
  for (int32_t p = 0; p < m->n; p++) {
    const gopt_node *nd = &g->nodes.a[m->node[p]];
    size_t e0 = ne;
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0 || mark[t] == p) continue;
      if (act_of[t] >= 0) {
        mark[t] = p;
        int32_t a = act_of[t];
        pk[np] = a;
        pv[np++] = p;
        int32_t q = m->act_prod[a], dup = 0;
        for (size_t j = e0; j < ne; j++) dup |= ev[j] == q;
        if (!dup) {
          ek[ne] = p;
          ev[ne++] = q;
        }
      } else if (gopt_sim_tensor_resident(g, t)) {
        mark[t] = p;
        if (res_of[t] < 0) res_of[t] = n_res++;
        rk[nr] = res_of[t];
        rv[nr++] = p;
      }
    }
  }
  m->n_res = n_res;
  if (GOPT_ALLOC(m->res_bytes, n_res)) goto oom;
  for (size_t t = 0; t < NT; t++)
    if (res_of[t] >= 0) m->res_bytes[res_of[t]] = gopt_tensor_bytes(g, (int32_t)t);
  for (size_t i = 0; i < g->outputs.n; i++) {
    int32_t t = g->outputs.a[i];
    if (t >= 0 && (size_t)t < NT && act_of[t] >= 0) m->act_out[act_of[t]] = 1;
  }
  if (csr(m->n_act, pk, pv, np, &m->cons_off, &m->cons) ||
      csr(m->n_res, rk, rv, nr, &m->res_off, &m->res_cons) ||
      csr(m->n, ek, ev, ne, &m->pred_off, &m->pred))
    goto oom;
  /* node -> distinct acts it reads (same pairs keyed by consumer) */
  if (csr(m->n, pv, pk, np, &m->in_off, &m->in_act)) goto oom;
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "search: out of memory");
fail:
  search_model_free(m);
done:
  free(act_of);
  free(res_of);
  free(mark);
  free(pk);
  free(pv);
  free(rk);
  free(rv);
  free(ek);
  free(ev);
  return rc;
}

void search_model_var_index(const search_model *m, const gopt_env *e, int kind, int32_t *idx) {
  for (int32_t p = 0; p < m->n; p++) idx[p] = -1;
  const gopt_env_var *v = gopt_env_vars(e);
  size_t nv = gopt_env_nvars(e);
  for (size_t i = 0; i < nv; i++) {
    if (v[i].kind != kind || v[i].node < 0) continue;
    int32_t p = m->pos[v[i].node];
    if (p >= 0) idx[p] = (int32_t)i;
  }
}
