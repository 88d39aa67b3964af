/* costdb.c: the measured-cost database (see costdb.h): op signatures, lookup, JSON load/save
 * (SQLite paths go to costdb_sqlite.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gopt/costdb.h"
#include "gopt/util.h"
#include "cost/cost_internal.h"
#include "util/util_sqlite.h"
#include "ir/ir_internal.h"

struct gopt_costdb {
  char *host;
  int threads;
  gopt_cost_entry *e;
  size_t n, cap;
  int32_t *slots; /* open addressing: entry index + 1, 0 = empty */
  size_t nslots;
  char **step_model; /* measured end-to-end times of whole models */
  double *step_s;
  size_t nsteps;
};

uint64_t gopt_op_signature(const gopt_graph *g, int32_t n) {
  const gopt_node *nd = &g->nodes.a[n];
  const char *type = gopt_graph_str(g, nd->type);
  uint64_t h = gopt_hash_bytes(type, strlen(type), 0x5167);
  uint64_t attrs = 0;
  for (uint32_t i = 0; i < nd->n_attr; i++) attrs += ir_attr_hash(g, &g->attrs.a[nd->attr + i]);
  h = gopt_hash_mix(h, attrs);
  for (uint32_t i = 0; i < nd->n_in; i++) {
    int32_t t = g->slots.a[nd->in + i].tensor;
    h = gopt_hash_mix(h, t < 0 ? 0x0917 : ir_tensor_shape_hash(g, &g->tensors.a[t]));
  }
  for (uint32_t o = 0; o < nd->n_out; o++)
    h = gopt_hash_mix(h, ir_tensor_shape_hash(g, &g->tensors.a[g->outs.a[nd->out + o]]));
  return h;
}

uint64_t gopt_group_sig_add(uint64_t acc, uint64_t op_sig) { return acc + gopt_hash_mix(0x67727570ULL, op_sig); }

uint64_t gopt_group_sig_end(uint64_t acc, int n) { return gopt_hash_mix(acc, 0x66757365ULL + (uint64_t)n); }

uint64_t gopt_sig_blocked(uint64_t sig) { return gopt_hash_mix(sig, 0x626c6b64ULL); }

uint64_t gopt_group_signature(const gopt_graph *g, const int32_t *mem, int n) {
  uint64_t acc = 0;
  for (int i = 0; i < n; i++) acc = gopt_group_sig_add(acc, gopt_op_signature(g, mem[i]));
  return gopt_group_sig_end(acc, n);
}

static size_t desc_tensor(const gopt_graph *g, int32_t t, char *buf, size_t len) {
  if (t < 0) return (size_t)snprintf(buf, len, " -");
  const gopt_tensor *x = &g->tensors.a[t];
  const int64_t *d = gopt_tensor_dims(g, t);
  size_t k = (size_t)snprintf(buf, len, " %s[", gopt_dtype_name(x->dtype));
  for (int i = 0; i < x->rank && k < len; i++) {
    if (d[i] >= 0) k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)d[i]);
    else k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? "," : "",
                               gopt_graph_str(g, g->syms.a[GOPT_DIM_SYM_ID(d[i])]));
  }
  if (k < len) k += (size_t)snprintf(buf + k, len - k, "]");
  return k;
}

void gopt_op_signature_desc(const gopt_graph *g, int32_t n, char *buf, size_t len) {
  const gopt_node *nd = &g->nodes.a[n];
  size_t k = (size_t)snprintf(buf, len, "%s", gopt_graph_str(g, nd->type));
  for (uint32_t i = 0; i < nd->n_in && k < len; i++)
    k += desc_tensor(g, g->slots.a[nd->in + i].tensor, buf + k, len - k);
  if (k < len) k += (size_t)snprintf(buf + k, len - k, " ->");
  for (uint32_t o = 0; o < nd->n_out && k < len; o++)
    k += desc_tensor(g, g->outs.a[nd->out + o], buf + k, len - k);
}

gopt_costdb *gopt_costdb_new(const char *host, int threads) {
  gopt_costdb *db = calloc(1, sizeof *db);
  if (!db) return NULL;
  db->host = strdup(host ? host : "");
  db->threads = threads;
  if (!db->host) {
    free(db);
    return NULL;
  }
  return db;
}

void gopt_costdb_free(gopt_costdb *db) {
  if (!db) return;
  for (size_t i = 0; i < db->n; i++) {
    free((char *)db->e[i].op);
    free((char *)db->e[i].desc);
  }
  for (size_t i = 0; i < db->nsteps; i++) free(db->step_model[i]);
  free(db->step_model);
  free(db->step_s);
  free(db->e);
  free(db->slots);
  free(db->host);
  free(db);
}

static int32_t *find_slot(const gopt_costdb *db, uint64_t sig) {
  if (!db->nslots) return NULL;
  size_t i = (size_t)(sig ^ (sig >> 29)) & (db->nslots - 1);
  for (;; i = (i + 1) & (db->nslots - 1)) {
    int32_t v = db->slots[i];
    if (!v || db->e[v - 1].sig == sig) return &db->slots[i];
  }
}

int gopt_costdb_get(const gopt_costdb *db, uint64_t sig, gopt_cost_entry *e) {
  int32_t *s = find_slot(db, sig);
  if (!s || !*s) return 0;
  if (e) *e = db->e[*s - 1];
  return 1;
}

int gopt_costdb_get_run(const gopt_costdb *db, uint64_t sig, gopt_cost_entry *e) {
  return gopt_costdb_get(db, gopt_sig_blocked(sig), e) || gopt_costdb_get(db, sig, e);
}

static int rehash(gopt_costdb *db, size_t nslots) {
  int32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return GOPT_ENOMEM;
  free(db->slots);
  db->slots = slots;
  db->nslots = nslots;
  for (size_t k = 0; k < db->n; k++) *find_slot(db, db->e[k].sig) = (int32_t)k + 1;
  return GOPT_OK;
}

int gopt_costdb_put(gopt_costdb *db, const gopt_cost_entry *e) {
  char *op = strdup(e->op ? e->op : ""), *desc = strdup(e->desc ? e->desc : "");
  if (!op || !desc) goto oom;
  int32_t *s = find_slot(db, e->sig);
  if (s && *s) {
    gopt_cost_entry *x = &db->e[*s - 1];
    free((char *)x->op);
    free((char *)x->desc);
    *x = *e;
    x->op = op;
    x->desc = desc;
    return GOPT_OK;
  }
  if (db->n == db->cap) {
    size_t cap = db->cap ? db->cap * 2 : 64;
    gopt_cost_entry *ne = realloc(db->e, cap * sizeof *ne);
    if (!ne) goto oom;
    db->e = ne;
    db->cap = cap;
  }
  db->e[db->n] = *e;
  db->e[db->n].op = op;
  db->e[db->n].desc = desc;
  db->n++;
  if (db->n * 2 > db->nslots) {
    if (rehash(db, db->nslots ? db->nslots * 2 : 128)) {
      db->n--;
      goto oom;
    }
  } else {
    *find_slot(db, e->sig) = (int32_t)db->n;
  }
  return GOPT_OK;
oom:
  free(op);
  free(desc);
  return GOPT_ENOMEM;
}

int gopt_costdb_put_step(gopt_costdb *db, const char *model, double seconds) {
  for (size_t i = 0; i < db->nsteps; i++)
    if (!strcmp(db->step_model[i], model)) {
      db->step_s[i] = seconds;
      return GOPT_OK;
    }
  char *m = strdup(model);
  char **nm = m ? realloc(db->step_model, (db->nsteps + 1) * sizeof *nm) : NULL;
  if (!nm) {
    free(m);
    return GOPT_ENOMEM;
  }
  db->step_model = nm;
  double *ns = realloc(db->step_s, (db->nsteps + 1) * sizeof *ns);
  if (!ns) {
    free(m);
    return GOPT_ENOMEM;
  }
  db->step_s = ns;
  db->step_model[db->nsteps] = m;
  db->step_s[db->nsteps++] = seconds;
  return GOPT_OK;
}

double gopt_costdb_step(const gopt_costdb *db, const char *model) {
  for (size_t i = 0; i < db->nsteps; i++)
    if (!strcmp(db->step_model[i], model)) return db->step_s[i];
  return -1;
}

size_t gopt_costdb_size(const gopt_costdb *db) { return db->n; }
const gopt_cost_entry *gopt_costdb_at(const gopt_costdb *db, size_t i) {
  return i < db->n ? &db->e[i] : NULL;
}
const char *gopt_costdb_host(const gopt_costdb *db) { return db->host; }
int gopt_costdb_threads(const gopt_costdb *db) { return db->threads; }

void gopt_costdb_this_host(char *buf, size_t len) {
  char model[256] = "unknown cpu";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "model name", 10)) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ') c++;
          c[strcspn(c, "\n")] = 0;
          snprintf(model, sizeof model, "%s", c);
        }
        break;
      }
    fclose(f);
  }
  snprintf(buf, len, "%s x%ld", model, sysconf(_SC_NPROCESSORS_ONLN));
}

size_t costdb_step_count(const gopt_costdb *db) { return db->nsteps; }
void costdb_step_at(const gopt_costdb *db, size_t i, const char **model, double *seconds) {
  *model = db->step_model[i];
  *seconds = db->step_s[i];
}

int gopt_costdb_load(const char *path, gopt_costdb **out, gopt_error *err) {
  if (util_sqlite_is_path(path)) return costdb_sqlite_load(path, out, err);
  json_error_t je;
  gopt_costdb *db = NULL;
  int rc = GOPT_OK;
  *out = NULL;
  json_t *root = json_load_file(path, 0, &je);
  if (!root)
    return gopt_error_set(err, GOPT_EPARSE, "%s: line %d: %s", path, je.line, je.text);
  const char *fmt = json_string_value(json_object_get(root, "format"));
  json_t *entries = json_object_get(root, "entries");
  if (!fmt || strcmp(fmt, "gopt-costdb") || json_integer_value(json_object_get(root, "version")) != 1 ||
      !json_is_array(entries)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: not a gopt cost database (version 1)", path);
    goto done;
  }
  db = gopt_costdb_new(json_string_value(json_object_get(root, "host")),
                       (int)json_integer_value(json_object_get(root, "threads")));
  if (!db) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  size_t i;
  json_t *it;
  json_array_foreach(entries, i, it) {
    const char *sig = json_string_value(json_object_get(it, "sig"));
    json_t *sec = json_object_get(it, "seconds");
    char *end = NULL;
    unsigned long long s = sig ? strtoull(sig, &end, 16) : 0;
    if (!sig || *end || strlen(sig) != 16 || !json_is_number(sec) || json_number_value(sec) < 0) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: entry %zu: needs a 16-hex-digit sig and seconds >= 0",
                          path, i);
      goto done;
    }
    gopt_cost_entry e = {(uint64_t)s, json_string_value(json_object_get(it, "op")),
                         json_string_value(json_object_get(it, "desc")), json_number_value(sec),
                         (int)json_integer_value(json_object_get(it, "reps"))};
    if (gopt_costdb_put(db, &e)) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      goto done;
    }
  }
  json_t *steps = json_object_get(root, "steps");
  if (steps && !json_is_array(steps)) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: \"steps\" must be an array", path);
    goto done;
  }
  json_array_foreach(steps, i, it) {
    const char *model = json_string_value(json_object_get(it, "model"));
    json_t *sec = json_object_get(it, "seconds");
    if (!model || !json_is_number(sec) || json_number_value(sec) < 0) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: steps entry %zu: needs a model and seconds >= 0",
                          path, i);
      goto done;
    }
    if (gopt_costdb_put_step(db, model, json_number_value(sec))) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      goto done;
    }
  }
  *out = db;
  db = NULL;
done:
  gopt_costdb_free(db);
  json_decref(root);
  return rc;
}

/* Sets o[key] to the string s: 0, or -1 when s is not UTF-8 text (json_string refuses it). */
static int costdb_set_str(json_t *o, const char *key, const char *s) {
  json_t *v = json_string(s ? s : "");
  return v ? json_object_set_new(o, key, v) : -1;
}

int gopt_costdb_save(const gopt_costdb *db, const char *path, gopt_error *err) {
  if (util_sqlite_is_path(path)) return costdb_sqlite_save(db, path, err);
  json_t *root = json_object(), *arr = json_array();
  char sig[17], bad[64] = "";
  json_object_set_new(root, "format", json_string("gopt-costdb"));
  json_object_set_new(root, "version", json_integer(1));
  if (costdb_set_str(root, "host", db->host)) snprintf(bad, sizeof bad, "host");
  json_object_set_new(root, "threads", json_integer(db->threads));
  for (size_t i = 0; i < db->n; i++) {
    json_t *e = json_object();
    snprintf(sig, sizeof sig, "%016llx", (unsigned long long)db->e[i].sig);
    json_object_set_new(e, "sig", json_string(sig));
    if ((costdb_set_str(e, "op", db->e[i].op) | costdb_set_str(e, "desc", db->e[i].desc)) && !bad[0])
      snprintf(bad, sizeof bad, "entry %s", sig);
    json_object_set_new(e, "seconds", json_real(db->e[i].seconds));
    json_object_set_new(e, "reps", json_integer(db->e[i].reps));
    json_array_append_new(arr, e);
  }
  json_object_set_new(root, "entries", arr);
  if (db->nsteps) {
    json_t *steps = json_array();
    for (size_t i = 0; i < db->nsteps; i++) {
      json_t *e = json_object();
      if (costdb_set_str(e, "model", db->step_model[i]) && !bad[0]) snprintf(bad, sizeof bad, "step %zu's model", i);
      json_object_set_new(e, "seconds", json_real(db->step_s[i]));
      json_array_append_new(steps, e);
    }
    json_object_set_new(root, "steps", steps);
  }
  if (bad[0]) { /* json_string refuses it: it would be left out silently */
    json_decref(root);
    return gopt_error_set(err, GOPT_EINVAL, "%s: %s is not UTF-8 text, which JSON requires (keep this database in SQLite)",
                          path, bad);
  }
  char *text = json_dumps(root, JSON_INDENT(1));
  json_decref(root);
  if (!text) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  int rc = gopt_file_write_atomic(path, text, strlen(text), err);
  free(text);
  return rc;
}
