/* sim_trace.c: reading the last evaluation's timeline: transfers, the critical path, and the
 * Chrome trace-event JSON file (Perfetto / chrome://tracing). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "sim/sim_internal.h"

size_t gopt_sim_transfer_count(const gopt_sim_state *st) { return st->evaluated ? st->nx : 0; }

void gopt_sim_transfer(const gopt_sim_state *st, size_t i, gopt_sim_transfer_info *t) {
  const sim_xfer *x = &st->x[i];
  t->tensor = st->s->act_tensor[x->act];
  t->src = x->src;
  t->dst = x->dst;
  t->link = x->link;
  t->bytes = st->s->act_bytes[x->act];
  t->start = x->start;
  t->end = x->end;
}

/* The cause of unit u with a transfer named by its number (unit lines name it by identity). */
static int32_t unit_cause(const gopt_sim_state *st, int32_t u) {
  int32_t c = st->ur[u].cause;
  return (c >= 0 && (c & 1)) ? SIM_CAUSE_XFER(sim_xid_index(st, c)) : c;
}

size_t gopt_sim_critical_path(const gopt_sim_state *st, gopt_sim_item *items, size_t max) {
  if (!sim_timeline_need(st) || st->U == 0) return 0;
  const gopt_sim *s = st->s;
  int32_t last = 0;
  for (int32_t u = 1; u < st->U; u++)
    if (st->ur[u].end > st->ur[last].end) last = u;
  /* walk back, counting first, then fill from the end */
  size_t len = 0;
  for (int32_t c = SIM_CAUSE_UNIT(last); c >= 0; len++)
    c = (c & 1) ? st->x[c >> 1].cause : unit_cause(st, c >> 1);
  size_t k = len;
  for (int32_t c = SIM_CAUSE_UNIT(last); c >= 0;) {
    k--;
    gopt_sim_item it;
    if (c & 1) {
      const sim_xfer *x = &st->x[c >> 1];
      it = (gopt_sim_item){1, c >> 1, x->link, x->start, x->end};
      c = x->cause;
    } else {
      int32_t u = c >> 1;
      const sim_ur *w = &st->ur[u];
      it = (gopt_sim_item){0, s->order[sim_unit_first(st, u)], st->uq[u].dev, w->start, w->end};
      c = unit_cause(st, u);
    }
    if (k < max) items[k] = it;
  }
  return len;
}

static json_t *meta(const char *what, int pid, int tid, const char *name) {
  json_t *e = json_object(), *a = json_object();
  json_object_set_new(e, "name", json_string(what));
  json_object_set_new(e, "ph", json_string("M"));
  json_object_set_new(e, "pid", json_integer(pid));
  json_object_set_new(e, "tid", json_integer(tid));
  json_object_set_new(e, "ts", json_integer(0));
  json_object_set_new(e, "dur", json_integer(0));
  json_object_set_new(a, "name", json_string(name));
  json_object_set_new(e, "args", a);
  return e;
}

static json_t *span(const char *name, const char *cat, int pid, int tid, double t0, double t1) {
  json_t *e = json_object();
  json_object_set_new(e, "name", json_string(name));
  json_object_set_new(e, "cat", json_string(cat));
  json_object_set_new(e, "ph", json_string("X"));
  json_object_set_new(e, "pid", json_integer(pid));
  json_object_set_new(e, "tid", json_integer(tid));
  json_object_set_new(e, "ts", json_real(t0 * 1e6));
  json_object_set_new(e, "dur", json_real((t1 - t0) * 1e6));
  return e;
}

int gopt_sim_write_trace(const gopt_sim_state *st, const char *path, gopt_error *err) {
  const gopt_sim *s = st->s;
  const gopt_graph *g = s->g;
  if (!sim_timeline_need(st)) return gopt_error_set(err, GOPT_EINVAL, "%s: no evaluation to trace", path);
  json_t *root = json_object(), *ev = json_array();
  char buf[160];
  /* pid 1: devices (tid = device + 1); pid 2: links (tid = link + 1) */
  json_array_append_new(ev, meta("process_name", 1, 0, "devices"));
  json_array_append_new(ev, meta("process_name", 2, 0, "links"));
  for (int d = 0; d < st->D; d++) {
    snprintf(buf, sizeof buf, "%d %s (%s)", d, s->cl->devices[d].name, s->cl->devices[d].model);
    json_array_append_new(ev, meta("thread_name", 1, d + 1, buf));
  }
  for (int l = 0; l < st->L; l++) {
    snprintf(buf, sizeof buf, "%s", s->cl->links[l].name);
    json_array_append_new(ev, meta("thread_name", 2, l + 1, buf));
  }
  for (int32_t u = 0; u < st->U; u++) {
    int32_t p = sim_unit_first(st, u), nid = s->order[p];
    int32_t cnt = st->fused ? st->u_off[u + 1] - st->u_off[u] : 1;
    if (cnt > 1) snprintf(buf, sizeof buf, "%s +%d", gopt_node_name(g, nid), cnt - 1);
    else snprintf(buf, sizeof buf, "%s", gopt_node_name(g, nid));
    json_t *e = span(buf, cnt > 1 ? "fused" : "kernel", 1, st->uq[u].dev + 1, st->ur[u].start,
                     st->ur[u].end);
    json_t *a = json_object();
    json_object_set_new(a, "op", json_string(gopt_node_type(g, nid)));
    json_object_set_new(a, "flops", json_real(st->fused ? st->f_flops[u] : s->nflops[u]));
    json_object_set_new(a, "bytes", json_real(st->fused ? st->f_bytes[u] : s->nbytes[u]));
    if (cnt > 1) {
      json_t *ns = json_array();
      for (int32_t i = st->u_off[u]; i < st->u_off[u + 1]; i++)
        json_array_append_new(ns, json_string(gopt_node_name(g, s->order[st->u_pos[i]])));
      json_object_set_new(a, "nodes", ns);
    }
    json_object_set_new(e, "args", a);
    json_array_append_new(ev, e);
  }
  for (size_t i = 0; i < st->nx; i++) {
    const sim_xfer *x = &st->x[i];
    int32_t t = s->act_tensor[x->act];
    json_t *e = span(gopt_graph_str(g, g->tensors.a[t].name), "transfer", 2, x->link + 1, x->start,
                     x->end);
    json_t *a = json_object();
    json_object_set_new(a, "bytes", json_real(s->act_bytes[x->act]));
    json_object_set_new(a, "from", json_integer(x->src));
    json_object_set_new(a, "to", json_integer(x->dst));
    json_object_set_new(a, "producer", json_string(gopt_node_name(g, s->order[s->act_prod[x->act]])));
    json_object_set_new(e, "args", a);
    json_array_append_new(ev, e);
  }
  json_object_set_new(root, "traceEvents", ev);
  json_object_set_new(root, "displayTimeUnit", json_string("ns"));
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory writing the trace", path);
  int rc = gopt_file_write_atomic(path, text, strlen(text), err);
  free(text);
  return rc;
}
