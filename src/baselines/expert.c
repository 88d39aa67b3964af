/* expert.c: the human-expert placement of the papers (docs/TASKS.md, `expert`). Every node gets a
 * layer unit from its scope name, then units map to devices by the model family's rule:
 *  - LSTM models (zoo gnmt, rnnlm): layer i (scope token "l<i>") on device floor(i * D / L),
 *    embeddings on device 0, attention and softmax on device D - 1 (Wu et al. 2016; the "human
 *    expert" of HDP and GO);
 *  - layered models (zoo transformer, transformer_xl, bert, gpt2, wavenet, and any other graph
 *    whose scope names carry layer indices, e.g. ONNX exports "/encoder/layer.3/..."): the units
 *    in topological order cut into at most D contiguous ranges on devices 0, 1, ..., balanced by
 *    kernel time subject to each range's estimated memory fitting its device;
 *  - CNNs (zoo inception_v3, resnet50, amoebanet): top-level stages cut the same way into the
 *    fewest ranges (1, 2, ..., D) whose placement fits in memory in the simulator: one device
 *    when the model fits there, as the papers' expert ran them;
 *  - no layer structure (fewer than two units): the cost-balanced contiguous split.
 * In training graphs a gradient op goes with the forward op it differentiates (its name is
 * "grad/<forward node or tensor>/..."), an optimizer update with its parameter's first forward
 * consumer; nodes without a unit (shape plumbing, embeddings, heads of layered models) follow a
 * placed producer, else a placed consumer. Deterministic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "baselines/baselines_internal.h"
#include "ir/strtab.h"
#include "util/util_internal.h"

enum { FAM_GENERIC, FAM_RNN, FAM_LAYERS, FAM_CNN };
enum { U_FOLLOW = -1, U_FIRST = -2, U_LAST = -3 };
#define EX_MAXC 64 /* name components looked at */

typedef struct ex_ctx {
  const gopt_env *e;
  int fam;
  int32_t nunits;
  int32_t *unit;        /* [n] unit of a forward position, or U_* */
  int32_t *fwd;         /* [n] forward position a gradient/update position follows, or -1 */
  double *ut, *um;      /* [nunits] kernel seconds and estimated bytes of each unit */
  int32_t *udev;        /* [nunits] device of each unit */
} ex_ctx;

/* Family of a graph by its name: the zoo model name (the spec before ':'), else generic. */
static int family_of(const char *gname) {
  static const struct {
    const char *name;
    int fam;
  } tab[] = {{"gnmt", FAM_RNN},         {"rnnlm", FAM_RNN},          {"transformer", FAM_LAYERS},
             {"transformer_xl", FAM_LAYERS}, {"bert", FAM_LAYERS}, {"gpt2", FAM_LAYERS},
             {"wavenet", FAM_LAYERS},   {"inception_v3", FAM_CNN},   {"resnet50", FAM_CNN},
             {"amoebanet", FAM_CNN}};
  size_t len = strcspn(gname, ":");
  for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
    if (strlen(tab[i].name) == len && !strncmp(tab[i].name, gname, len)) return tab[i].fam;
  return FAM_GENERIC;
}

/* Splits s at '/' and '.' into at most EX_MAXC components (start offsets cs, lengths cl); *last
 * receives the index of the first component of the final '/'-separated part (the node's own
 * name in ONNX exports), or the final component when s has no '/'. Returns the count. */
static int split_name(const char *s, size_t *cs, size_t *cl, int *last) {
  int k = 0;
  size_t i = 0;
  *last = 0;
  while (k < EX_MAXC) {
    size_t len = strcspn(s + i, "/.");
    cs[k] = i;
    cl[k++] = len;
    if (!s[i + len]) break;
    if (s[i + len] == '/') *last = k;
    i += len + 1;
  }
  if (!strchr(s, '/')) *last = k - 1;
  return k;
}

static int all_digits(const char *s, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

/* A time-step or segment token ("t3", "seg0"): not a layer index. */
static int time_token(const char *s, size_t n) {
  return (n > 1 && s[0] == 't' && all_digits(s + 1, n - 1)) ||
         (n > 3 && !strncmp(s, "seg", 3) && all_digits(s + 3, n - 3));
}

/* Layer key of a forward node name: [*kb, *kb + *kl). Layered: from the first component that is
 * not a time/segment token through the first one ending in a digit ("l3", the "0" of "layer.0",
 * "block2"). Stage (CNN): the first non-empty component. The node's own (final) name part never
 * counts. Returns 0 when the name has no key. */
static int layer_key(const char *s, int stage, size_t *kb, size_t *kl) {
  size_t cs[EX_MAXC], cl[EX_MAXC];
  int last, k = split_name(s, cs, cl, &last);
  int start = -1;
  for (int i = 0; i < last && i < k; i++) {
    const char *c = s + cs[i];
    if (!cl[i]) continue;
    if (start < 0 && time_token(c, cl[i])) continue;
    if (start < 0) start = i;
    if (stage || (c[cl[i] - 1] >= '0' && c[cl[i] - 1] <= '9')) {
      *kb = cs[start];
      *kl = cs[i] + cl[i] - cs[start];
      return 1;
    }
  }
  return 0;
}

/* LSTM models: layer index of "l<i>", else U_FIRST for embeddings, U_LAST for attention and the
 * softmax (logits), else U_FOLLOW. */
static int32_t rnn_unit(const char *s) {
  size_t cs[EX_MAXC], cl[EX_MAXC];
  int last, k = split_name(s, cs, cl, &last);
  for (int i = 0; i < k; i++)
    if (cl[i] > 1 && cl[i] < 9 && s[cs[i]] == 'l' && all_digits(s + cs[i] + 1, cl[i] - 1))
      return (int32_t)atol(s + cs[i] + 1);
  for (int i = 0; i < k; i++)
    if (cl[i] == 9 && !strncmp(s + cs[i], "embedding", 9)) return U_FIRST;
  for (int i = 0; i < k; i++)
    if ((cl[i] == 9 && !strncmp(s + cs[i], "attention", 9)) ||
        (cl[i] == 6 && !strncmp(s + cs[i], "logits", 6)) ||
        (cl[i] == 6 && !strncmp(s + cs[i], "memory", 6)))
      return U_LAST;
  return U_FOLLOW;
}

/* Units of the forward positions; unit ids in order of first appearance in topological order. */
static int assign_units(ex_ctx *x, gopt_error *err) {
  const gopt_env *e = x->e;
  const gopt_graph *g = e->g;
  gopt_strtab *keys = NULL;
  if (x->fam != FAM_RNN && !(keys = strtab_new()))
    return gopt_error_set(err, GOPT_ENOMEM, "expert: out of memory");
  for (int32_t p = 0; p < e->n; p++) {
    int32_t id = e->order[p];
    const char *name = gopt_node_name(g, id);
    size_t kb, kl;
    x->unit[p] = U_FOLLOW;
    if (!task_is_forward(g, id)) continue;
    if (x->fam == FAM_RNN) {
      x->unit[p] = rnn_unit(name);
      if (x->unit[p] >= e->n) x->unit[p] = U_FOLLOW; /* no more layers than nodes */
      if (x->unit[p] >= x->nunits) x->nunits = x->unit[p] + 1;
    } else if (layer_key(name, x->fam == FAM_CNN, &kb, &kl)) {
      uint32_t k = strtab_intern(keys, name + kb, kl);
      if (k == UINT32_MAX) {
        strtab_free(keys);
        return gopt_error_set(err, GOPT_ENOMEM, "expert: out of memory");
      }
      x->unit[p] = (int32_t)k - 1; /* id 0 is "" */
    }
  }
  if (keys) x->nunits = (int32_t)keys->n - 1;
  strtab_free(keys);
  return GOPT_OK;
}

/* Unit of any position (a gradient/update position takes its forward node's), or -1. */
static int32_t unit_of(const ex_ctx *x, int32_t p) {
  if (x->unit[p] >= 0) return x->unit[p];
  return x->fwd[p] >= 0 && x->unit[x->fwd[p]] >= 0 ? x->unit[x->fwd[p]] : -1;
}

/* ut/um: kernel seconds and bytes (outputs of the unit's ops, which training keeps until the
 * backward pass, plus the weights/state it reads first) per unit. */
static int unit_costs(ex_ctx *x, gopt_error *err) {
  const gopt_env *e = x->e;
  const gopt_graph *g = e->g;
  uint8_t *seen = NULL;
  if (GOPT_ALLOC(x->ut, x->nunits) || GOPT_ALLOC(x->um, x->nunits) || GOPT_ALLOC(x->udev, x->nunits) ||
      GOPT_ALLOC(seen, g->tensors.n))
    return gopt_error_set(err, GOPT_ENOMEM, "expert: out of memory");
  for (int32_t p = 0; p < e->n; p++) {
    int32_t u = unit_of(x, p);
    if (u < 0) continue;
    const gopt_node *nd = &g->nodes.a[e->order[p]];
    x->ut[u] += e->t0[p];
    x->um[u] += e->out_bytes[p];
    for (uint32_t k = 0; k < nd->n_in; k++) {
      int32_t t = g->slots.a[nd->in + k].tensor;
      if (t < 0 || seen[t] || !gopt_sim_tensor_resident(g, t)) continue;
      seen[t] = 1;
      x->um[u] += gopt_tensor_bytes(g, t);
    }
  }
  free(seen);
  return GOPT_OK;
}

/* Packs the units in order into contiguous ranges, each at most tau seconds and (use_mem) within
 * its device's memory, starting a range early when the units left are just enough for one per
 * device left (so min(k, nunits) devices get work); writes udev and returns the ranges used, or
 * k + 1 when more than k are needed. */
static int pack(ex_ctx *x, int k, double tau, int use_mem) {
  int part = 0;
  double t = 0, m = 0;
  for (int32_t u = 0; u < x->nunits; u++) {
    double cap = use_mem ? (double)x->e->c->devices[part].mem_bytes : INFINITY;
    /* a new range when this one would run over, or when the units left just fill the devices */
    if (u > 0 && (t + x->ut[u] > tau || m + x->um[u] > cap || x->nunits - u <= k - 1 - part)) {
      if (++part >= k) return k + 1;
      t = m = 0;
      cap = use_mem ? (double)x->e->c->devices[part].mem_bytes : INFINITY;
    }
    if (use_mem && x->um[u] > cap) return k + 1;
    t += x->ut[u];
    m += x->um[u];
    x->udev[u] = part;
  }
  return part + 1;
}

/* Contiguous ranges over at most k devices with the smallest longest range (bisection on tau),
 * subject to memory when some packing fits, else by time alone. */
static void balance(ex_ctx *x, int k) {
  double lo = 0, hi = 0;
  for (int32_t u = 0; u < x->nunits; u++) {
    lo = fmax(lo, x->ut[u]);
    hi += x->ut[u];
  }
  int use_mem = pack(x, k, INFINITY, 1) <= k;
  for (int it = 0; it < 100 && hi > lo; it++) {
    double mid = 0.5 * (lo + hi);
    if (pack(x, k, mid, use_mem) <= k) hi = mid;
    else lo = mid;
  }
  if (pack(x, k, hi, use_mem) > k) pack(x, k, INFINITY, use_mem); /* rounding: hi >= the total */
}

/* Unplaced positions (forward ones only when only_fwd) take a placed producer's device, in
 * topological order; those still unplaced then a placed consumer's, in reverse order. */
static void follow(const gopt_env *e, int32_t *dev, int only_fwd) {
  for (int32_t p = 0; p < e->n; p++)
    for (int32_t i = e->pred_off[p]; dev[p] < 0 && i < e->pred_off[p + 1]; i++)
      if ((!only_fwd || task_is_forward(e->g, e->order[p])) && dev[e->pred[i]] >= 0) dev[p] = dev[e->pred[i]];
  for (int32_t p = e->n - 1; p >= 0; p--)
    for (int32_t i = e->succ_off[p]; dev[p] < 0 && i < e->succ_off[p + 1]; i++)
      if ((!only_fwd || task_is_forward(e->g, e->order[p])) && dev[e->succ[i]] >= 0) dev[p] = dev[e->succ[i]];
}

/* dev from the units: unit devices; unit-less forward nodes follow a neighbour; gradient and
 * update nodes their forward node; the rest a placed neighbour, else device 0. */
static void finish(const ex_ctx *x, int32_t *dev) {
  const gopt_env *e = x->e;
  for (int32_t p = 0; p < e->n; p++) {
    int32_t u = x->unit[p];
    dev[p] = u >= 0 ? x->udev[u] : u == U_FIRST ? 0 : u == U_LAST ? e->D - 1 : -1;
  }
  follow(e, dev, 1);
  for (int32_t p = 0; p < e->n; p++)
    if (dev[p] < 0 && x->fwd[p] >= 0) dev[p] = dev[x->fwd[p]];
  follow(e, dev, 0);
  for (int32_t p = 0; p < e->n; p++)
    if (dev[p] < 0) dev[p] = 0;
}

/* CNNs: the fewest contiguous stage ranges whose placement fits in memory in the simulator (D
 * ranges when none does). */
static int fewest_fitting(ex_ctx *x, int32_t *dev, gopt_error *err) {
  const gopt_env *e = x->e;
  gopt_sim_state *st = gopt_sim_state_new(e->sim);
  if (!st) return gopt_error_set(err, GOPT_ENOMEM, "expert: out of memory");
  int rc = GOPT_OK;
  for (int k = 1; k <= e->D; k++) {
    balance(x, k);
    finish(x, dev);
    if (k == e->D) break;
    for (int32_t p = 0; p < e->n && !rc; p++)
      if (gopt_sim_state_set_device(st, e->order[p], dev[p]))
        rc = gopt_error_set(err, GOPT_EINVAL, "expert: node %s: device %d out of range",
                            gopt_node_name(e->g, e->order[p]), (int)dev[p]);
    gopt_sim_result r;
    if (rc || (rc = gopt_sim_evaluate(st, &r, err)) || r.feasible) break;
  }
  gopt_sim_state_free(st);
  return rc;
}

int bl_expert(const gopt_env *e, const double *xv, int32_t *dev, gopt_error *err) {
  (void)xv;
  ex_ctx x = {.e = e, .fam = family_of(gopt_graph_str(e->g, e->g->name))};
  int rc = GOPT_OK;
  if (GOPT_ALLOC(x.unit, e->n) || GOPT_ALLOC(x.fwd, e->n)) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "expert: out of memory");
    goto done;
  }
  if ((rc = assign_units(&x, err))) goto done;
  if (x.nunits < (x.fam == FAM_RNN ? 1 : 2)) { /* no layer structure */
    task_contiguous_split(e, dev);
    goto done;
  }
  if ((rc = task_grad_owner(e, x.fwd, err)) < 0 || (rc = unit_costs(&x, err))) goto done;
  if (x.fam == FAM_RNN) {
    for (int32_t u = 0; u < x.nunits; u++) x.udev[u] = (int32_t)((int64_t)u * e->D / x.nunits);
    finish(&x, dev);
  } else if (x.fam == FAM_CNN) {
    rc = fewest_fitting(&x, dev, err);
  } else {
    balance(&x, e->D);
    finish(&x, dev);
  }
done:
  free(x.unit);
  free(x.fwd);
  free(x.ut);
  free(x.um);
  free(x.udev);
  return rc;
}
