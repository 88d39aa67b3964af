/* test_sim_timing.c: the step simulator against hand-computed timelines on small graphs: a chain,
 * a diamond (one device, and split over two with transfers), two transfers contending on one
 * link, a fused chain (one launch, boundary bytes only), a non-convex fusion group, a group split
 * over two devices, memory accounting with an overflow amount, strict order, priorities, and the
 * critical path. Every expected value is written out as arithmetic on the device/link numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gopt/sim.h"

/* Test device: 1 TFLOP/s, 100 GB/s, launch 1 us, efficiency 1 everywhere; link 1 GB/s, 10 us. */
#define PEAK 1e12
#define BW 1e11
#define LAUNCH 1e-6
#define LBW 1e9
#define LLAT 1e-5

static const char *cluster_json(int ndev, double mem) {
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "{\"name\":\"test\",\"devices\":[{\"name\":\"d\",\"count\":%d,\"peak_flops\":%g,"
           "\"mem_bw\":%g,\"memory\":%g,\"launch_us\":%g,\"efficiency\":1}],"
           "\"links\":[{\"name\":\"bus\",\"devices\":[%s],\"bw\":%g,\"latency_us\":%g}]}",
           ndev, PEAK, BW, mem, LAUNCH * 1e6, ndev == 3 ? "0,1,2" : "0,1", LBW, LLAT * 1e6);
  if (ndev == 1)
    snprintf(buf, sizeof buf,
             "{\"devices\":[{\"peak_flops\":%g,\"mem_bw\":%g,\"memory\":%g,\"launch_us\":%g,"
             "\"efficiency\":1}]}", PEAK, BW, mem, LAUNCH * 1e6);
  return buf;
}

/* Hand-set cost facts per node id. */
typedef struct costs {
  double flops[64], bytes[64];
} costs;
static void cost_fn(const gopt_graph *g, int32_t n, gopt_cost *c, void *user) {
  const costs *k = user;
  c->flops = k->flops[n];
  c->bytes_read = k->bytes[n];
  c->bytes_written = 0;
  c->params = 0;
}

static int32_t tensor(gopt_graph *g, const char *name, int64_t elems) {
  return gopt_graph_add_tensor(g, name, GOPT_DT_FLOAT, 1, &elems, NULL);
}
static int32_t node1(gopt_graph *g, const char *type, const char *name, int n_in, const int32_t *in,
                     int32_t out) {
  return gopt_graph_add_node(g, type, name, n_in, in, 1, &out, NULL);
}

typedef struct fixture {
  gopt_graph *g;
  gopt_cluster *c;
  gopt_sim *s;
  gopt_sim_state *st;
  costs k;
} fixture;

static int setup(fixture *f, int ndev, double mem) {
  gopt_error err = {0};
  int rc = gopt_cluster_from_json(cluster_json(ndev, mem), "test", &f->c, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return rc;
  gopt_sim_opts o = {GOPT_SIM_COSTS_ANALYTICAL, NULL, cost_fn, &f->k};
  rc = gopt_sim_new(f->g, f->c, &o, &f->s, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  if (rc) return rc;
  f->st = gopt_sim_state_new(f->s);
  CHECK(f->st != NULL);
  return f->st ? 0 : -1;
}
static void teardown(fixture *f) {
  gopt_sim_state_free(f->st);
  gopt_sim_free(f->s);
  gopt_cluster_free(f->c);
  gopt_graph_free(f->g);
  memset(f, 0, sizeof *f);
}
static double eval(fixture *f, gopt_sim_result *r) {
  gopt_error err = {0};
  gopt_sim_result tmp;
  if (!r) r = &tmp;
  int rc = gopt_sim_evaluate(f->st, r, &err);
  CHECK_MSG(rc == 0, "%s", err.msg);
  return rc ? -1 : r->step_time;
}

/* x -> A -> a -> B -> b -> C -> c; tensors of E floats. */
static void build_chain(fixture *f, int64_t E) {
  f->g = gopt_graph_new("chain");
  int32_t x = tensor(f->g, "x", E), a = tensor(f->g, "a", E), b = tensor(f->g, "b", E),
          c = tensor(f->g, "c", E);
  gopt_graph_add_input(f->g, x);
  node1(f->g, "Relu", "A", 1, &x, a);
  node1(f->g, "Relu", "B", 1, &a, b);
  node1(f->g, "Relu", "C", 1, &b, c);
  gopt_graph_add_output(f->g, c);
}

static void test_chain(void) {
  fixture f = {0};
  build_chain(&f, 1000);
  for (int i = 0; i < 3; i++) {
    f.k.flops[i] = 2e6;  /* 2 us of compute */
    f.k.bytes[i] = 1e5;  /* 1 us of memory traffic: compute-bound */
  }
  if (setup(&f, 1, 1e9)) return teardown(&f);
  gopt_sim_result r;
  double t = eval(&f, &r);
  /* each node: launch + max(2e6 / 1e12, 1e5 / 1e11) = 1 us + 2 us */
  double node = LAUNCH + 2e6 / PEAK;
  CHECK_NEAR(t, 3 * node, 1e-12);
  CHECK_NEAR(r.busy[0], 3 * node, 1e-12);
  CHECK_EQ_INT(r.n_transfers, 0);
  /* memory: x resident (4000 B); A: +a; B: +b then -a; C: +c then -b; c is an output */
  CHECK_NEAR(r.resident[0], 4000, 0);
  CHECK_NEAR(r.peak_mem[0], 4000 + 4000 + 4000, 0);
  CHECK_NEAR(r.end_mem[0], r.resident[0], 0);
  CHECK(r.feasible);
  /* critical path: A, B, C back to back */
  gopt_sim_item items[8];
  size_t n = gopt_sim_critical_path(f.st, items, 8);
  CHECK_EQ_INT(n, 3);
  for (size_t i = 0; i < n && i < 3; i++) {
    CHECK_EQ_INT(items[i].kind, 0);
    CHECK_EQ_INT(items[i].id, (int)i);
    CHECK_NEAR(items[i].start, i * node, 1e-12);
  }
  teardown(&f);
}

/* x -> A -> a; a -> B -> b; a -> C -> c; (b, c) -> D -> d. */
static void build_diamond(fixture *f, int64_t E) {
  f->g = gopt_graph_new("diamond");
  int32_t x = tensor(f->g, "x", E), a = tensor(f->g, "a", E), b = tensor(f->g, "b", E),
          c = tensor(f->g, "c", E), d = tensor(f->g, "d", E);
  gopt_graph_add_input(f->g, x);
  node1(f->g, "Relu", "A", 1, &x, a);
  node1(f->g, "Relu", "B", 1, &a, b);
  node1(f->g, "Relu", "C", 1, &a, c);
  int32_t bc[2] = {b, c};
  node1(f->g, "Add", "D", 2, bc, d);
  gopt_graph_add_output(f->g, d);
}

static void test_diamond(void) {
  fixture f = {0};
  build_diamond(&f, 1000);
  double F[4] = {1e6, 4e6, 2e6, 3e6}; /* A 1 us, B 4 us, C 2 us, D 3 us of compute */
  for (int i = 0; i < 4; i++) {
    f.k.flops[i] = F[i];
    f.k.bytes[i] = 1e3;
  }
  if (setup(&f, 2, 1e9)) return teardown(&f);
  double tA = LAUNCH + 1e6 / PEAK, tB = LAUNCH + 4e6 / PEAK, tC = LAUNCH + 2e6 / PEAK,
         tD = LAUNCH + 3e6 / PEAK;
  /* one device: the sum */
  CHECK_NEAR(eval(&f, NULL), tA + tB + tC + tD, 1e-12);
  /* default priority is the bottom level: B (4+3) runs before C (2+3) */
  CHECK_EQ_INT(gopt_sim_critical_path(f.st, NULL, 0), 4);
  /* B on device 1: a goes over the link (4000 B / 1 GB/s + 10 us), B runs there, b comes back;
   * C runs on device 0 meanwhile; D waits for b. */
  gopt_sim_state_set_device(f.st, 1, 1);
  gopt_sim_result r;
  double x = 4000 / LBW + LLAT;
  double t = eval(&f, &r);
  CHECK_NEAR(t, tA + x + tB + x + tD, 1e-12);
  CHECK_EQ_INT(r.n_transfers, 2);
  CHECK_NEAR(r.transfer_bytes, 8000, 0);
  CHECK_NEAR(r.link_busy[0], 2 * x, 1e-12);
  CHECK_NEAR(r.busy[0], tA + tC + tD, 1e-12);
  CHECK_NEAR(r.busy[1], tB, 1e-12);
  /* critical path: A, transfer a, B, transfer b, D */
  gopt_sim_item it[8];
  size_t n = gopt_sim_critical_path(f.st, it, 8);
  CHECK_EQ_INT(n, 5);
  if (n == 5) {
    CHECK(it[0].kind == 0 && it[0].id == 0);
    CHECK(it[1].kind == 1 && it[2].kind == 0 && it[2].id == 1 && it[3].kind == 1);
    CHECK(it[4].kind == 0 && it[4].id == 3);
    for (int i = 1; i < 5; i++) CHECK_NEAR(it[i].start, it[i - 1].end, 1e-15);
  }
  /* memory on device 1: a's copy (4000) + b (4000); device 0: x (resident), a, c, b's copy, d */
  CHECK_NEAR(r.peak_mem[1], 8000, 0);
  CHECK_NEAR(r.end_mem[0], r.resident[0], 0);
  CHECK_NEAR(r.end_mem[1], 0, 0);
  /* an explicit priority reverses B and C on one device: C first */
  gopt_sim_state_set_device(f.st, 1, 0);
  gopt_sim_state_set_priority(f.st, 2, 5.0);
  eval(&f, NULL);
  gopt_sim_item it2[8];
  CHECK_EQ_INT(gopt_sim_critical_path(f.st, it2, 8), 4);
  CHECK(it2[1].id == 2 && it2[2].id == 1);
  teardown(&f);
}

/* A (Split) makes two tensors of different sizes, both consumed on device 1: two transfers are
 * requested at once and queue FIFO on the one link. */
static void test_contention(void) {
  fixture f = {0};
  f.g = gopt_graph_new("contend");
  int32_t x = tensor(f.g, "x", 10), p = tensor(f.g, "p", 2000), q = tensor(f.g, "q", 500),
          u = tensor(f.g, "u", 10), v = tensor(f.g, "v", 10);
  gopt_graph_add_input(f.g, x);
  int32_t pq[2] = {p, q};
  gopt_graph_add_node(f.g, "Split", "S", 1, &x, 2, pq, NULL);
  node1(f.g, "Relu", "U", 1, &p, u);
  node1(f.g, "Relu", "V", 1, &q, v);
  gopt_graph_add_output(f.g, u);
  gopt_graph_add_output(f.g, v);
  f.k.flops[0] = 1e6;
  f.k.flops[1] = 1e6;
  f.k.flops[2] = 1e6;
  if (setup(&f, 2, 1e9)) return teardown(&f);
  gopt_sim_state_set_device(f.st, 1, 1);
  gopt_sim_state_set_device(f.st, 2, 1);
  gopt_sim_result r;
  double t = eval(&f, &r);
  double tS = LAUNCH + 1e6 / PEAK, tU = tS, tV = tS;
  double xp = 8000 / LBW + LLAT, xq = 2000 / LBW + LLAT;
  /* p goes first (output order), q waits for the link: it ends at tS + xp + xq; U runs at
   * tS + xp .. tS + xp + tU (2 us) which is before q arrives (xq = 12 us), then V. */
  CHECK_NEAR(t, tS + xp + xq + tV, 1e-12);
  CHECK_NEAR(r.link_busy[0], xp + xq, 1e-12);
  gopt_sim_transfer_info a, b;
  CHECK_EQ_INT(gopt_sim_transfer_count(f.st), 2);
  gopt_sim_transfer(f.st, 0, &a);
  gopt_sim_transfer(f.st, 1, &b);
  /* every duration is rounded to the 2^-44 s grid (< 29 fs each: sim_grid) */
  CHECK_NEAR(a.start, tS, 1e-13);
  CHECK_NEAR(b.start, tS + xp, 2e-13); /* queued behind p */
  CHECK_NEAR(b.end, tS + xp + xq, 3e-13);
  (void)tU;
  teardown(&f);
}

/* Fused chain: one launch, summed FLOPs, and only x and c cross the boundary. */
static void test_fusion(void) {
  fixture f = {0};
  int64_t E = 1000000; /* 4 MB tensors: memory-bound */
  build_chain(&f, E);
  for (int i = 0; i < 3; i++) {
    f.k.flops[i] = 1e5;
    f.k.bytes[i] = 2 * 4.0 * E; /* reads one tensor, writes one */
  }
  if (setup(&f, 1, 1e9)) return teardown(&f);
  double unfused = 3 * (LAUNCH + 8e6 / BW);
  CHECK_NEAR(eval(&f, NULL), unfused, 1e-12);
  gopt_decisions d;
  gopt_decisions_init(&d, f.g);
  d.group = malloc(3 * sizeof *d.group);
  d.group[0] = d.group[1] = d.group[2] = 0;
  d.n_groups = 1;
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_sim_state_apply(f.st, &d, &err), 0);
  gopt_sim_result r;
  double t = eval(&f, &r);
  /* launch + max(3e5 / 1e12, (4e6 in + 4e6 out) / 1e11) */
  CHECK_NEAR(t, LAUNCH + (4.0 * E + 4.0 * E) / BW, 1e-12);
  CHECK_EQ_INT(r.n_kernels, 1);
  /* the intermediates a, b are never materialised: peak = x + c */
  CHECK_NEAR(r.peak_mem[0], 8.0 * E, 0);
  int32_t nodes[4];
  CHECK_EQ_INT(gopt_sim_unit_nodes(f.st, 1, nodes, 4), 3);
  /* group of A and B only: A+B fused, C alone */
  d.group[2] = -1;
  CHECK_EQ_INT(gopt_sim_state_apply(f.st, &d, &err), 0);
  CHECK_NEAR(eval(&f, NULL), (LAUNCH + 8.0 * E / BW) + (LAUNCH + 8e6 / BW), 1e-12);
  gopt_decisions_clear(&d);
  teardown(&f);
}

static void test_nonconvex(void) {
  fixture f = {0};
  build_diamond(&f, 100);
  if (setup(&f, 2, 1e9)) return teardown(&f);
  gopt_decisions d;
  gopt_decisions_init(&d, f.g);
  d.group = malloc(4 * sizeof *d.group);
  /* {A, D}: the path A -> B -> D leaves the group and comes back */
  d.group[0] = 7;
  d.group[1] = -1;
  d.group[2] = -1;
  d.group[3] = 7;
  gopt_error err = {0};
  int rc = gopt_sim_state_apply(f.st, &d, &err);
  CHECK(rc == GOPT_EINVAL);
  CHECK_MSG(strstr(err.msg, "group 7") && strstr(err.msg, "not convex") && strstr(err.msg, "A"),
            "%s", err.msg);
  /* the state kept its (default) decisions */
  CHECK_EQ_INT(eval(&f, NULL) > 0, 1);
  /* a convex group with members placed on two devices */
  d.group[0] = d.group[1] = 0;
  d.group[3] = -1;
  d.placement = malloc(4 * sizeof *d.placement);
  d.placement[0] = 0;
  d.placement[1] = 1;
  d.placement[2] = d.placement[3] = -1;
  rc = gopt_sim_state_apply(f.st, &d, &err);
  CHECK_MSG(rc == GOPT_EINVAL && strstr(err.msg, "one device"), "%s", err.msg);
  /* device out of range */
  d.placement[1] = 5;
  rc = gopt_sim_state_apply(f.st, &d, &err);
  CHECK_MSG(rc == GOPT_EINVAL && strstr(err.msg, "'B'") && strstr(err.msg, "2 devices"), "%s", err.msg);
  gopt_decisions_clear(&d);
  teardown(&f);
}

static void test_memory(void) {
  fixture f = {0};
  build_chain(&f, 1000); /* 4000-byte tensors */
  /* a weight on B: 100 floats */
  int64_t wd = 100;
  int32_t w = gopt_graph_add_tensor(f.g, "w", GOPT_DT_FLOAT, 1, &wd, NULL);
  gopt_tensor_set_const(f.g, w, NULL, 400, NULL);
  /* W reads b and the weight */
  int64_t e = 1000;
  int32_t y = gopt_graph_add_tensor(f.g, "y", GOPT_DT_FLOAT, 1, &e, NULL);
  int32_t in2[2] = {gopt_node_output(f.g, 1, 0), w};
  node1(f.g, "Mul", "W", 2, in2, y);
  gopt_graph_add_output(f.g, y);
  for (int i = 0; i < 4; i++) f.k.flops[i] = 1e6;
  if (setup(&f, 2, 1e4)) return teardown(&f);
  /* one device (cap 10000): x (4000) + w (400) resident.
   * A: +a -> 8400. B: +b -> 12400, -a -> 8400. C and W both read b; order by bottom level
   * (equal: C first by id): C: +c -> 12400; W: +y -> 16400, then b is freed -> 12400.
   * Peak 16400, over by 6400; after the step only x and w remain. */
  gopt_sim_result r;
  eval(&f, &r);
  CHECK_NEAR(r.resident[0], 4400, 0);
  CHECK_NEAR(r.peak_mem[0], 16400, 0);
  CHECK_NEAR(r.mem_over[0], 6400, 0);
  CHECK(!r.feasible);
  CHECK_NEAR(r.end_mem[0], 4400, 0);
  /* W on device 1: w is resident there, b is copied there (4000) and y allocated (4000) */
  gopt_sim_state_set_device(f.st, 3, 1);
  eval(&f, &r);
  CHECK_NEAR(r.resident[0], 4000, 0);
  CHECK_NEAR(r.resident[1], 400, 0);
  CHECK_NEAR(r.peak_mem[1], 400 + 4000 + 4000, 0);
  /* device 0: x + a + b = 12000 while B runs; then a is freed, C adds c (x + b + c = 12000),
   * and b stays until its transfer ends */
  CHECK_NEAR(r.peak_mem[0], 4000 + 4000 + 4000, 0);
  CHECK_NEAR(r.end_mem[0], 4000, 0);
  CHECK_NEAR(r.end_mem[1], 400, 0);
  teardown(&f);
}

static void test_order(void) {
  fixture f = {0};
  build_diamond(&f, 1000);
  double F[4] = {1e6, 4e6, 2e6, 3e6};
  for (int i = 0; i < 4; i++) f.k.flops[i] = F[i];
  if (setup(&f, 2, 1e9)) return teardown(&f);
  gopt_decisions d;
  gopt_decisions_init(&d, f.g);
  d.order = malloc(4 * sizeof *d.order);
  d.n_order = 4;
  int32_t ord[4] = {0, 2, 1, 3}; /* A, C, B, D */
  memcpy(d.order, ord, sizeof ord);
  gopt_error err = {0};
  CHECK_EQ_INT(gopt_sim_state_apply(f.st, &d, &err), 0);
  eval(&f, NULL);
  gopt_sim_item it[8];
  CHECK_EQ_INT(gopt_sim_critical_path(f.st, it, 8), 4);
  CHECK(it[1].id == 2 && it[2].id == 1);
  /* strict order across devices: C on device 1 still starts only after its input arrives, D on
   * device 0 waits for C's output */
  int32_t bad[4] = {1, 0, 2, 3}; /* B before A */
  memcpy(d.order, bad, sizeof bad);
  int rc = gopt_sim_state_apply(f.st, &d, &err);
  CHECK_MSG(rc == GOPT_EINVAL && strstr(err.msg, "'B'") && strstr(err.msg, "'A'"), "%s", err.msg);
  gopt_decisions_clear(&d);
  teardown(&f);
}

int main(void) {
  test_chain();
  test_diamond();
  test_contention();
  test_fusion();
  test_nonconvex();
  test_memory();
  test_order();
  return check_exit("test_sim_timing");
}
