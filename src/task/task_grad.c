/* task_grad.c: which forward node each gradient and optimizer-update node of a training step
 * belongs to. gopt's training-step builder names a gradient op "grad/<forward node or tensor>/..."
 * and flags it GOPT_N_GRAD, an optimizer update GOPT_N_UPDATE; TensorFlow's
 * colocate_gradients_with_ops puts each on its forward op's device, as the expert placement of
 * the papers (baselines/expert.c) and go's gradient-colocated decodes (learn_optimize.c) do. */
#include <stdlib.h>
#include <string.h>

#include "ir/strtab.h"
#include "task/task_internal.h"
#include "util/util_internal.h"

int task_is_forward(const gopt_graph *g, int32_t id) {
  return !(g->nodes.a[id].flags & (GOPT_N_GRAD | GOPT_N_UPDATE));
}

/* Position of the forward node that tensor t belongs to: its producer, else (a parameter or an
 * input) its first forward consumer; -1 when none. */
static int32_t fwd_of_tensor(const gopt_env *e, int32_t t) {
  const gopt_graph *g = e->g;
  int32_t pr = g->tensors.a[t].producer;
  if (pr >= 0) return task_is_forward(g, pr) ? e->pos[pr] : -1;
  for (int32_t s = g->tensors.a[t].first_use; s >= 0; s = g->slots.a[s].next_use) {
    int32_t c = g->slots.a[s].node;
    if (e->pos[c] >= 0 && task_is_forward(g, c)) return e->pos[c];
  }
  return -1;
}

/* Forward position named by s[0..len) as a forward node or a tensor, -1 when none (node_of_str:
 * the forward node each string id names, -1). */
static int32_t fwd_of_text(const gopt_env *e, const int32_t *node_of_str, const char *s, size_t len) {
  const gopt_graph *g = e->g;
  uint32_t id = strtab_find(g->strs, s, len);
  if (id == UINT32_MAX) return -1;
  if (node_of_str[id] >= 0) return e->pos[node_of_str[id]];
  if (id < g->tensor_of_str.n && g->tensor_of_str.a[id] >= 0) return fwd_of_tensor(e, g->tensor_of_str.a[id]);
  return -1;
}

/* Forward position a gradient op named "grad/<rest>" differentiates: the longest prefix of rest
 * ending before a '/' (or rest itself, or rest without a "_<k>" uniqueness suffix) that names a
 * forward node or tensor. -1 when none. */
static int32_t fwd_of_grad_name(const gopt_env *e, const int32_t *node_of_str, const char *rest) {
  size_t len = strlen(rest);
  int32_t q = fwd_of_text(e, node_of_str, rest, len);
  for (size_t i = len; q < 0 && i > 0; i--)
    if (rest[i - 1] == '/') q = fwd_of_text(e, node_of_str, rest, i - 1);
  size_t u = len;
  while (u > 0 && rest[u - 1] >= '0' && rest[u - 1] <= '9') u--;
  if (q < 0 && u > 1 && u < len && rest[u - 1] == '_') q = fwd_of_text(e, node_of_str, rest, u - 1);
  return q;
}

int task_grad_owner(const gopt_env *e, int32_t *fwd, gopt_error *err) {
  const gopt_graph *g = e->g;
  int any = 0, owned = 0;
  int32_t *node_of_str = NULL;
  for (int32_t p = 0; p < e->n; p++) {
    fwd[p] = -1;
    any |= !task_is_forward(g, e->order[p]);
  }
  if (!any) return 0;
  if (GOPT_ALLOC(node_of_str, g->strs->n)) return gopt_error_set(err, GOPT_ENOMEM, "training step: out of memory");
  for (size_t i = 0; i < g->strs->n; i++) node_of_str[i] = -1;
  for (int32_t p = 0; p < e->n; p++)
    if (task_is_forward(g, e->order[p])) node_of_str[g->nodes.a[e->order[p]].name] = e->order[p];
  for (int32_t p = 0; p < e->n; p++) {
    int32_t id = e->order[p];
    const gopt_node *nd = &g->nodes.a[id];
    const char *name = gopt_node_name(g, id);
    if (nd->flags & GOPT_N_UPDATE) {
      for (uint32_t k = 0; k < nd->n_in && fwd[p] < 0; k++) {
        int32_t t = g->slots.a[nd->in + k].tensor;
        if (t >= 0 && (g->tensors.a[t].flags & GOPT_T_PARAM)) fwd[p] = fwd_of_tensor(e, t);
      }
    } else if ((nd->flags & GOPT_N_GRAD) && !strncmp(name, "grad/", 5)) {
      fwd[p] = fwd_of_grad_name(e, node_of_str, name + 5);
    }
    owned += fwd[p] >= 0;
  }
  free(node_of_str);
  return owned;
}

int gopt_env_grad_owner(const gopt_env *e, int32_t *owner, gopt_error *err) {
  for (size_t v = 0; v < e->nvars; v++) owner[v] = -1;
  if (e->off_dev < 0) return 0;
  int32_t *fwd = NULL;
  if (GOPT_ALLOC(fwd, e->n)) return gopt_error_set(err, GOPT_ENOMEM, "training step: out of memory");
  int owned = task_grad_owner(e, fwd, err);
  for (int32_t p = 0; owned > 0 && p < e->n; p++)
    if (fwd[p] >= 0) owner[e->off_dev + p] = e->off_dev + fwd[p];
  free(fwd);
  return owned;
}
