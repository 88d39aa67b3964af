/* test_sim_light.c: a light evaluation (one that neither records nor writes the per-unit timeline:
 * an apply that followed another apply, or incremental evaluation off) gives the timeline readers
 * (gopt_sim_timeline, gopt_sim_critical_path, gopt_sim_memory_curve, gopt_sim_transfer) exactly
 * what a fresh recording evaluation of the same decisions gives, bit for bit, on random placements
 * on 1 and 4 devices, with and without fused groups; after a decision change that follows a light
 * evaluation the readers report no evaluation instead of a timeline of other decisions. A light
 * evaluation with default priorities runs in the streaming layout (sim_stream.c): every result
 * field and transfer equals sim_run.c's loop's (a recording evaluation), also after set_device
 * calls on a state with incremental evaluation off. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sim/sim_internal.h"
#include "sim_test_util.h"

/* Random placement (and, when fuse, pairs of a node with its first consumer fused on one device). */
static void random_decisions(const gopt_graph *g, gopt_decisions *d, int D, int fuse, uint64_t *seed) {
  size_t N = d->n_nodes;
  for (size_t i = 0; i < N; i++) d->placement[i] = (int32_t)(sim_test_rnd(seed) % (uint32_t)D);
  if (!fuse) return;
  for (size_t i = 0; i < N; i++) d->group[i] = -1;
  for (size_t i = 0; i + 1 < N; i += 7) { /* a node and the next one when it reads its output */
    const gopt_node *a = &g->nodes.a[i], *b = &g->nodes.a[i + 1];
    if (!gopt_node_alive(g, (int32_t)i) || !gopt_node_alive(g, (int32_t)i + 1) || !a->n_out || !b->n_in ||
        g->slots.a[b->in].tensor != g->outs.a[a->out])
      continue;
    d->group[i] = d->group[i + 1] = (int32_t)i;
    d->placement[i + 1] = d->placement[i];
  }
}

/* Every reader of a and b agrees bit for bit (a: light, b: recording). */
static void same_readers(gopt_sim_state *a, gopt_sim_state *b, int D, const char *what) {
  size_t na = gopt_sim_timeline(a, NULL, 0), nb = gopt_sim_timeline(b, NULL, 0);
  CHECK_MSG(na == nb && na > 0, "%s: timeline %zu items, recording run %zu", what, na, nb);
  gopt_sim_item *ia = calloc(na + 1, sizeof *ia), *ib = calloc(nb + 1, sizeof *ib);
  if (na == nb) {
    gopt_sim_timeline(a, ia, na);
    gopt_sim_timeline(b, ib, nb);
    CHECK_MSG(memcmp(ia, ib, na * sizeof *ia) == 0, "%s: timelines differ", what);
    size_t ca = gopt_sim_critical_path(a, NULL, 0), cb = gopt_sim_critical_path(b, NULL, 0);
    CHECK_MSG(ca == cb && ca > 0 && ca <= na, "%s: critical path %zu items, recording run %zu", what, ca, cb);
    if (ca == cb && ca <= na) {
      gopt_sim_critical_path(a, ia, ca);
      gopt_sim_critical_path(b, ib, cb);
      CHECK_MSG(memcmp(ia, ib, ca * sizeof *ia) == 0, "%s: critical paths differ", what);
    }
  }
  CHECK_EQ_INT((int)gopt_sim_transfer_count(a), (int)gopt_sim_transfer_count(b));
  for (size_t i = 0; i < gopt_sim_transfer_count(a) && i < gopt_sim_transfer_count(b); i++) {
    gopt_sim_transfer_info ta, tb;
    gopt_sim_transfer(a, i, &ta);
    gopt_sim_transfer(b, i, &tb);
    CHECK_MSG(memcmp(&ta, &tb, sizeof ta) == 0, "%s: transfer %zu differs", what, i);
  }
  for (int dev = 0; dev < D; dev++) {
    double *ta = NULL, *ya = NULL, *tb = NULL, *yb = NULL;
    size_t ma = 0, mb = 0;
    gopt_error err = {0};
    CHECK_EQ_INT(gopt_sim_memory_curve(a, dev, &ta, &ya, &ma, &err), 0);
    CHECK_EQ_INT(gopt_sim_memory_curve(b, dev, &tb, &yb, &mb, &err), 0);
    CHECK_MSG(ma == mb && ma > 0 && memcmp(ta, tb, ma * sizeof *ta) == 0 && memcmp(ya, yb, ma * sizeof *ya) == 0,
              "%s: memory curves of device %d differ", what, dev);
    free(ta);
    free(ya);
    free(tb);
    free(yb);
  }
  free(ia);
  free(ib);
}

static void one(const char *spec, const char *cluster, int fuse, uint64_t seed) {
  gopt_graph *g = sim_test_zoo(spec);
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  if (!g) return;
  sim_test_open(g, cluster, &c, &s);
  int D = c->n_devices;
  gopt_decisions d[2];
  for (int k = 0; k < 2; k++) {
    gopt_decisions_init(&d[k], g);
    d[k].placement = calloc(d[k].n_nodes + 1, sizeof *d[k].placement);
    if (fuse) d[k].group = calloc(d[k].n_nodes + 1, sizeof *d[k].group);
    random_decisions(g, &d[k], D, fuse, &seed);
  }
  gopt_sim_state *a = gopt_sim_state_new(s), *b = gopt_sim_state_new(s);
  gopt_error err = {0};
  gopt_sim_result ra, rb;
  char what[160];
  snprintf(what, sizeof what, "%s on %s%s", spec, cluster, fuse ? " fused" : "");
  /* a: apply, evaluate, apply again, evaluate (light); b: one recording evaluation */
  CHECK_EQ_INT(gopt_sim_state_apply(a, &d[0], &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
  CHECK_EQ_INT(gopt_sim_state_apply(a, &d[1], &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
  CHECK_MSG(!a->tl_valid, "%s: the second evaluation after two applies is light", what);
  CHECK_EQ_INT(gopt_sim_state_apply(b, &d[1], &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate(b, &rb, &err), 0);
  CHECK(b->tl_valid);
  CHECK_MSG(!fuse || rb.n_kernels < gopt_sim_node_count(s), "%s: some nodes fused", what);
  CHECK_MSG(ra.step_time == rb.step_time, "%s: step %.17g, recording run %.17g", what, ra.step_time, rb.step_time);
  same_readers(a, b, D, what);
  /* the same with incremental evaluation off (every evaluation light) */
  gopt_sim_state_set_incremental(a, 0);
  CHECK_EQ_INT(gopt_sim_state_apply(a, &d[1], &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
  CHECK(!a->tl_valid);
  same_readers(a, b, D, what);
  /* a change after a light evaluation: no timeline of other decisions */
  CHECK_EQ_INT(gopt_sim_state_apply(a, &d[0], &err), 0);
  CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
  CHECK_EQ_INT(gopt_sim_state_apply(a, &d[1], &err), 0);
  CHECK_EQ_INT((int)gopt_sim_timeline(a, NULL, 0), 0);
  CHECK_EQ_INT((int)gopt_sim_critical_path(a, NULL, 0), 0);
  double *t = NULL, *y = NULL;
  size_t m = 0;
  CHECK(gopt_sim_memory_curve(a, 0, &t, &y, &m, &err) != 0 && m == 0);
  CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
  same_readers(a, b, D, what); /* evaluated again: the readers answer again */
  for (int k = 0; k < 2; k++) gopt_decisions_clear(&d[k]);
  gopt_sim_state_free(a);
  gopt_sim_state_free(b);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

/* Every field of two results agrees bit for bit. */
static void same_result(const gopt_sim_result *a, const gopt_sim_result *b, const char *what) {
  int ok = a->step_time == b->step_time && a->feasible == b->feasible && a->n_devices == b->n_devices &&
           a->n_links == b->n_links && a->n_kernels == b->n_kernels && a->n_transfers == b->n_transfers &&
           a->transfer_bytes == b->transfer_bytes;
  for (int d = 0; ok && d < a->n_devices; d++)
    ok = a->busy[d] == b->busy[d] && a->peak_mem[d] == b->peak_mem[d] && a->mem_over[d] == b->mem_over[d] &&
         a->resident[d] == b->resident[d] && a->end_mem[d] == b->end_mem[d];
  for (int l = 0; ok && l < a->n_links; l++) ok = a->link_bytes[l] == b->link_bytes[l] && a->link_busy[l] == b->link_busy[l];
  CHECK_MSG(ok, "%s: results differ (step %.17g / %.17g, transfers %zu / %zu)", what, a->step_time, b->step_time,
            a->n_transfers, b->n_transfers);
}

/* The transfer records of the last evaluations of a and b agree bit for bit (read before any
 * timeline reader, which would evaluate a again), but for the consumer counts (refs: 0 after a run
 * to the end; a converged delta replay leaves them at its convergence point). */
static void same_transfers(const gopt_sim_state *a, const gopt_sim_state *b, const char *what) {
  int ok = a->nx == b->nx;
  for (size_t i = 0; ok && i < a->nx; i++) {
    sim_xfer p = a->x[i], q = b->x[i];
    ok = p.refs == 0;
    p.refs = q.refs = 0;
    ok = ok && memcmp(&p, &q, sizeof p) == 0;
  }
  CHECK_MSG(ok, "%s: transfer records differ", what);
}

/* The streaming light evaluation against sim_run.c's loop on random placements (blocks of the
 * storage order with some nodes moved, as a placer makes: transfers, queues with many units), then
 * after single set_device calls with incremental evaluation off. */
static void stream(const char *spec, const char *cluster, uint64_t seed) {
  gopt_graph *g = sim_test_zoo(spec);
  gopt_cluster *c = NULL;
  gopt_sim *s = NULL;
  if (!g) return;
  sim_test_open(g, cluster, &c, &s);
  int D = c->n_devices;
  size_t N = g->nodes.n;
  gopt_decisions d;
  gopt_decisions_init(&d, g);
  d.placement = calloc(N + 1, sizeof *d.placement);
  gopt_sim_state *a = gopt_sim_state_new(s), *b = gopt_sim_state_new(s);
  gopt_sim_state_set_incremental(a, 0); /* every evaluation light */
  gopt_error err = {0};
  gopt_sim_result ra, rb;
  char what[160];
  for (int round = 0; round < 6; round++) {
    for (size_t i = 0; i < N; i++) {
      d.placement[i] = (int32_t)(i * (size_t)D / N);
      if (sim_test_rnd(&seed) % (round < 3 ? 50u : 3u) == 0) d.placement[i] = (int32_t)(sim_test_rnd(&seed) % (uint32_t)D);
    }
    snprintf(what, sizeof what, "%s on %s, stream, placement %d", spec, cluster, round);
    CHECK_EQ_INT(gopt_sim_state_apply(a, &d, &err), 0);
    CHECK_MSG(sim_stream_ok(a), "%s: the streaming layout applies", what);
    CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
    CHECK_EQ_INT(gopt_sim_state_apply(b, &d, &err), 0);
    CHECK_EQ_INT(gopt_sim_evaluate(b, &rb, &err), 0);
    CHECK(b->tl_valid && !a->tl_valid);
    same_result(&ra, &rb, what);
    same_transfers(a, b, what);
    CHECK_MSG(D == 1 || ra.n_transfers > 0, "%s: some transfers", what);
    same_readers(a, b, D, what);
    for (int k = 0; k < 4; k++) { /* one node moved, both states */
      int32_t nid = (int32_t)(sim_test_rnd(&seed) % (uint32_t)N);
      if (!gopt_node_alive(g, nid)) continue;
      int dev = (int)(sim_test_rnd(&seed) % (uint32_t)D);
      CHECK_EQ_INT(gopt_sim_state_set_device(a, nid, dev), 0);
      CHECK_EQ_INT(gopt_sim_state_set_device(b, nid, dev), 0);
      CHECK_EQ_INT(gopt_sim_evaluate(a, &ra, &err), 0);
      CHECK_EQ_INT(gopt_sim_evaluate(b, &rb, &err), 0);
      snprintf(what, sizeof what, "%s on %s, stream, placement %d, move %d", spec, cluster, round, k);
      same_result(&ra, &rb, what);
      same_transfers(a, b, what);
    }
    same_readers(a, b, D, what);
  }
  gopt_decisions_clear(&d);
  gopt_sim_state_free(a);
  gopt_sim_state_free(b);
  gopt_sim_free(s);
  gopt_cluster_free(c);
  gopt_graph_free(g);
}

int main(void) {
  const char *smodels[] = {"gnmt:steps=8", "inception_v3", "transformer:layers=2"};
  for (size_t m = 0; m < sizeof smodels / sizeof smodels[0]; m++) {
    stream(smodels[m], "4xV100-nvlink", 41 + m);
    stream(smodels[m], "8xH100", 53 + m);
    stream(smodels[m], "V100", 67 + m);
  }
  const char *models[] = {"gnmt:layers=2,steps=6", "inception_v3", "transformer:layers=2"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
    for (int fuse = 0; fuse < 2; fuse++) {
      one(models[m], "4xV100-nvlink", fuse, 11 + m);
      one(models[m], "V100", fuse, 23 + m);
    }
  return check_exit("test_sim_light");
}
