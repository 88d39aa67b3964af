/* decisions.c: per-node decisions (decisions.h) and their JSON files keyed by node names:
 * placement, fusion groups, schedule priorities and an explicit order (docs/DECISIONS.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/decisions.h"
#include "gopt/util.h"
#include "util/util_internal.h"

void gopt_decisions_init(gopt_decisions *d, const gopt_graph *g) {
  memset(d, 0, sizeof *d);
  d->n_nodes = g ? g->nodes.n : 0;
}

void gopt_decisions_clear(gopt_decisions *d) {
  if (!d) return;
  free(d->placement);
  free(d->group);
  free(d->priority);
  free(d->order);
  size_t n = d->n_nodes;
  memset(d, 0, sizeof *d);
  d->n_nodes = n;
}

int32_t gopt_graph_find_node(const gopt_graph *g, const char *name) {
  if (!name) return -1;
  for (size_t i = 0; i < g->nodes.n; i++)
    if (!(g->nodes.a[i].flags & GOPT_N_DEAD) && !strcmp(gopt_node_name(g, (int32_t)i), name))
      return (int32_t)i;
  return -1;
}

/* Name -> live node index: open addressing over string hashes. */
typedef struct name_index {
  int32_t *slot;  /* node + 1, 0 empty */
  size_t mask;
} name_index;

static uint64_t name_hash(const char *s) { return gopt_hash_bytes(s, strlen(s), 0x6e616d65); }

static int index_build(name_index *ix, const gopt_graph *g) {
  size_t cap = 16;
  while (cap < 2 * g->nodes.n + 16) cap <<= 1;
  ix->slot = calloc(cap, sizeof *ix->slot);
  ix->mask = cap - 1;
  if (!ix->slot) return GOPT_ENOMEM;
  for (size_t i = 0; i < g->nodes.n; i++) {
    if (g->nodes.a[i].flags & GOPT_N_DEAD) continue;
    size_t h = (size_t)name_hash(gopt_node_name(g, (int32_t)i)) & ix->mask;
    while (ix->slot[h]) h = (h + 1) & ix->mask;
    ix->slot[h] = (int32_t)i + 1;
  }
  return GOPT_OK;
}

static int32_t index_find(const name_index *ix, const gopt_graph *g, const char *name) {
  size_t h = (size_t)name_hash(name) & ix->mask;
  while (ix->slot[h]) {
    int32_t n = ix->slot[h] - 1;
    if (!strcmp(gopt_node_name(g, n), name)) return n;
    h = (h + 1) & ix->mask;
  }
  return -1;
}

/* Reads root (consumed) into d; path names the source in messages. */
static int load_root(gopt_decisions *d, const gopt_graph *g, json_t *root, const char *path,
                     gopt_error *err) {
  name_index ix = {0};
  int rc = GOPT_OK;
  int32_t *placement = NULL, *group = NULL, *order = NULL, *seen = NULL;
  double *priority = NULL;
  int32_t n_groups = 0;
  size_t n_order = 0;
  size_t NN = g->nodes.n;
  if (!json_is_object(root)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: expected a JSON object with placement, fusion, "
                                          "schedule and/or order", path);
    goto done;
  }
  if (d->n_nodes != NN) {
    rc = gopt_error_set(err, GOPT_EINVAL, "%s: decisions made for %zu nodes, the graph has %zu",
                        path, d->n_nodes, NN);
    goto done;
  }
  if (index_build(&ix, g)) goto oom;
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "placement") && strcmp(key, "fusion") && strcmp(key, "schedule") &&
        strcmp(key, "order")) {
      rc = gopt_error_set(err, GOPT_EPARSE,
                          "%s: unknown key '%s' (expected placement, fusion, schedule, order)",
                          path, key);
      goto done;
    }
  }
  json_t *jp = json_object_get(root, "placement");
  if (jp) {
    if (!json_is_object(jp)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: placement: expected {\"node\": device, ...}", path);
      goto done;
    }
    if (GOPT_ALLOC(placement, NN)) goto oom;
    for (size_t i = 0; i < NN; i++) placement[i] = -1;
    json_object_foreach(jp, key, val) {
      int32_t n = index_find(&ix, g, key);
      if (n < 0) {
        rc = gopt_error_set(err, GOPT_EINVAL, "%s: placement: unknown node '%s'", path, key);
        goto done;
      }
      if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > 1000000) {
        rc = gopt_error_set(err, GOPT_EPARSE,
                            "%s: placement: node '%s': expected a device index (integer >= 0)",
                            path, key);
        goto done;
      }
      placement[n] = (int32_t)json_integer_value(val);
    }
  }
  json_t *jf = json_object_get(root, "fusion");
  if (jf) {
    if (!json_is_array(jf)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: fusion: expected [[\"node\", ...], ...]", path);
      goto done;
    }
    if (GOPT_ALLOC(group, NN)) goto oom;
    for (size_t i = 0; i < NN; i++) group[i] = -1;
    size_t gi, ni;
    json_t *grp, *nm;
    json_array_foreach(jf, gi, grp) {
      if (!json_is_array(grp) || json_array_size(grp) == 0) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: fusion: group %zu: expected a non-empty array of "
                                              "node names", path, gi);
        goto done;
      }
      json_array_foreach(grp, ni, nm) {
        int32_t n = json_is_string(nm) ? index_find(&ix, g, json_string_value(nm)) : -1;
        if (!json_is_string(nm)) {
          rc = gopt_error_set(err, GOPT_EPARSE, "%s: fusion: group %zu: entry %zu is not a node name",
                              path, gi, ni);
          goto done;
        }
        if (n < 0) {
          rc = gopt_error_set(err, GOPT_EINVAL, "%s: fusion: group %zu: unknown node '%s'", path,
                              gi, json_string_value(nm));
          goto done;
        }
        if (group[n] >= 0) {
          rc = gopt_error_set(err, GOPT_EINVAL, "%s: fusion: node '%s' is in groups %d and %zu",
                              path, json_string_value(nm), group[n], gi);
          goto done;
        }
        group[n] = (int32_t)gi;
      }
    }
    n_groups = (int32_t)json_array_size(jf);
  }
  json_t *js = json_object_get(root, "schedule");
  if (js) {
    if (!json_is_object(js)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: schedule: expected {\"node\": priority, ...}", path);
      goto done;
    }
    if (GOPT_ALLOC(priority, NN)) goto oom;
    for (size_t i = 0; i < NN; i++) priority[i] = NAN;
    json_object_foreach(js, key, val) {
      int32_t n = index_find(&ix, g, key);
      if (n < 0) {
        rc = gopt_error_set(err, GOPT_EINVAL, "%s: schedule: unknown node '%s'", path, key);
        goto done;
      }
      if (!json_is_number(val) || !isfinite(json_number_value(val))) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: schedule: node '%s': expected a number", path, key);
        goto done;
      }
      priority[n] = json_number_value(val);
    }
  }
  json_t *jo = json_object_get(root, "order");
  if (jo) {
    if (!json_is_array(jo)) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: order: expected [\"node\", ...]", path);
      goto done;
    }
    n_order = json_array_size(jo);
    if (GOPT_ALLOC(order, n_order) || GOPT_ALLOC(seen, NN)) goto oom;
    size_t i;
    json_array_foreach(jo, i, val) {
      int32_t n = json_is_string(val) ? index_find(&ix, g, json_string_value(val)) : -1;
      if (!json_is_string(val)) {
        rc = gopt_error_set(err, GOPT_EPARSE, "%s: order: entry %zu is not a node name", path, i);
        goto done;
      }
      if (n < 0) {
        rc = gopt_error_set(err, GOPT_EINVAL, "%s: order: unknown node '%s'", path,
                            json_string_value(val));
        goto done;
      }
      if (seen[n]) {
        rc = gopt_error_set(err, GOPT_EINVAL, "%s: order: node '%s' listed twice", path,
                            json_string_value(val));
        goto done;
      }
      seen[n] = 1;
      order[i] = n;
    }
    for (size_t k = 0; k < NN; k++)
      if (!(g->nodes.a[k].flags & GOPT_N_DEAD) && !seen[k]) {
        rc = gopt_error_set(err, GOPT_EINVAL, "%s: order: node '%s' is missing (the order must "
                                              "list every node once)", path,
                            gopt_node_name(g, (int32_t)k));
        goto done;
      }
  }
  /* commit */
  if (jp) {
    free(d->placement);
    d->placement = placement;
    placement = NULL;
  }
  if (jf) {
    free(d->group);
    d->group = group;
    d->n_groups = n_groups;
    group = NULL;
  }
  if (js) {
    free(d->priority);
    d->priority = priority;
    priority = NULL;
  }
  if (jo) {
    free(d->order);
    d->order = order;
    d->n_order = n_order;
    order = NULL;
  }
  goto done;
oom:
  rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
done:
  free(ix.slot);
  free(placement);
  free(group);
  free(priority);
  free(order);
  free(seen);
  json_decref(root);
  return rc;
}

int gopt_decisions_load(gopt_decisions *d, const gopt_graph *g, const char *path,
                        gopt_error *err) {
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) return gopt_error_set(err, GOPT_EPARSE, "%s: line %d: %s", path, je.line, je.text);
  return load_root(d, g, root, path, err);
}

int gopt_decisions_loads(gopt_decisions *d, const gopt_graph *g, const char *text,
                         const char *label, gopt_error *err) {
  json_error_t je;
  json_t *root = json_loads(text ? text : "", 0, &je);
  if (!root) return gopt_error_set(err, GOPT_EPARSE, "%s: line %d: %s", label, je.line, je.text);
  return load_root(d, g, root, label, err);
}

char *gopt_decisions_dumps(const gopt_decisions *d, const gopt_graph *g) {
  if (d->n_nodes != g->nodes.n) return NULL;
  json_t *root = json_object();
  size_t NN = g->nodes.n;
  if (d->placement) {
    json_t *o = json_object();
    for (size_t i = 0; i < NN; i++)
      if (!(g->nodes.a[i].flags & GOPT_N_DEAD) && d->placement[i] >= 0)
        json_object_set_new(o, gopt_node_name(g, (int32_t)i), json_integer(d->placement[i]));
    json_object_set_new(root, "placement", o);
  }
  if (d->group) {
    int32_t mx = -1;
    for (size_t i = 0; i < NN; i++)
      if (!(g->nodes.a[i].flags & GOPT_N_DEAD) && d->group[i] > mx) mx = d->group[i];
    json_t *a = json_array();
    for (int32_t k = 0; k <= mx; k++) {
      json_t *grp = json_array();
      for (size_t i = 0; i < NN; i++)
        if (!(g->nodes.a[i].flags & GOPT_N_DEAD) && d->group[i] == k)
          json_array_append_new(grp, json_string(gopt_node_name(g, (int32_t)i)));
      if (json_array_size(grp)) json_array_append_new(a, grp);
      else json_decref(grp);
    }
    json_object_set_new(root, "fusion", a);
  }
  if (d->priority) {
    json_t *o = json_object();
    for (size_t i = 0; i < NN; i++)
      if (!(g->nodes.a[i].flags & GOPT_N_DEAD) && !isnan(d->priority[i]))
        json_object_set_new(o, gopt_node_name(g, (int32_t)i), json_real(d->priority[i]));
    json_object_set_new(root, "schedule", o);
  }
  if (d->order) {
    json_t *a = json_array();
    for (size_t i = 0; i < d->n_order; i++)
      json_array_append_new(a, json_string(gopt_node_name(g, d->order[i])));
    json_object_set_new(root, "order", a);
  }
  char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
  json_decref(root);
  return text;
}

int gopt_decisions_save(const gopt_decisions *d, const gopt_graph *g, const char *path,
                        gopt_error *err) {
  if (d->n_nodes != g->nodes.n)
    return gopt_error_set(err, GOPT_EINVAL, "%s: decisions made for %zu nodes, the graph has %zu",
                          path, d->n_nodes, g->nodes.n);
  char *text = gopt_decisions_dumps(d, g);
  if (!text) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  int rc = gopt_file_write_atomic(path, text, strlen(text), err);
  free(text);
  return rc;
}
