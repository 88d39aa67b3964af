/* grad_move.c: gradient rules of data-movement and masking ops whose adjoint is one or two
 * standard ONNX ops:
 *   DepthToSpace (DCR)  dX = SpaceToDepth(dY)             SpaceToDepth  dX = DepthToSpace(dY, DCR)
 *   DepthToSpace (CRD)  dX = Reshape(Transpose(Reshape(dY))), its steps undone (static shapes)
 *   Trilu               dX = Trilu(dY) (same k, upper)    CumSum        dX = CumSum(dY), reverse flipped
 *   ReduceSumSquare     dX = 2 X dY' (dY' reshaped to the kept-dims shape)
 *   Tile                dX = ReduceSum(Reshape(dY, [r0, d0, r1, d1, ...])) over the r axes
 *   GatherElements,     dX = ScatterElements / ScatterND(zeros, indices, dY, reduction=add)
 *   GatherND (batch_dims 0)
 *   TopK                dX = ScatterElements(zeros, Indices, dValues, reduction=add) along the axis
 *   ScatterElements     d data = ScatterElements(dY, indices, zeros) (reduction none) or dY (add);
 *                       d updates = GatherElements(dY, indices)
 * CRD DepthToSpace, Tile and ReduceSumSquare over symbolic shapes, and Tile with repeats that are
 * not a constant, are refused in one line. docs/TRAINING.md lists the rules. */
#include <string.h>

#include "train/train_internal.h"

/* X's dims into xd (static only); 0 or an error naming the op. */
static int static_dims(tb *b, int32_t n, int32_t x, int64_t *xd) {
  const gopt_graph *g = b->g;
  for (int i = 0; i < g->tensors.a[x].rank; i++)
    if ((xd[i] = gopt_tensor_dims(g, x)[i]) < 0)
      return tb_fail(b, GOPT_EUNSUP, "%s over a symbolic shape has no gradient rule", gopt_node_type(g, n));
  return 0;
}

/* DepthToSpace in CRD mode (PyTorch's PixelShuffle): dY [N, C, H b, W b] -> Reshape [N, C, H, b, W, b]
 * -> Transpose (0, 1, 3, 5, 2, 4) -> Reshape [N, C b b, H, W], the forward op's steps undone. */
static int rule_d2s_crd(tb *b, int32_t n, int32_t d, int32_t x, int64_t bs) {
  gopt_graph *g = b->g;
  int dt = g->tensors.a[x].dtype, rc;
  int64_t xd[GOPT_MAX_RANK];
  if (g->tensors.a[x].rank != 4) return tb_fail(b, GOPT_EUNSUP, "DepthToSpace of rank %d", g->tensors.a[x].rank);
  if ((rc = static_dims(b, n, x, xd))) return rc;
  int64_t C = xd[1] / (bs * bs), s6[6] = {xd[0], C, xd[2], bs, xd[3], bs}, t6[6] = {xd[0], C, bs, bs, xd[2], xd[3]};
  static const int64_t perm[6] = {0, 1, 3, 5, 2, 4};
  int32_t sh, t, in[2];
  TRY(sh = tb_const_i64(b, "blocks_shape", s6, 6));
  in[0] = d, in[1] = sh;
  TRY(t = tb_op(b, "Reshape", "dy_blocks", 2, in, dt, 6, s6));
  TRY(t = tb_op(b, "Transpose", "dy_depth", 1, &t, dt, 6, t6));
  if (gopt_node_set_ints(g, g->tensors.a[t].producer, "perm", perm, 6)) return tb_fail(b, GOPT_ENOMEM, "out of memory");
  TRY(sh = tb_const_i64(b, "x_shape", xd, 4));
  in[0] = t, in[1] = sh;
  TRY(t = tb_op(b, "Reshape", "d0", 2, in, dt, 4, xd));
  return tb_partial(b, x, t);
}

static int rule_d2s(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  int d2s = g->nodes.a[n].op == GOPT_OP_DEPTH_TO_SPACE;
  int64_t bs = gopt_node_get_int(g, n, "blocksize", 1);
  if (d2s && strcmp(gopt_node_get_string(g, n, "mode", "DCR"), "DCR")) return rule_d2s_crd(b, n, d, x, bs);
  int32_t t;
  TRY(t = tb_op_like(b, d2s ? "SpaceToDepth" : "DepthToSpace", "d0", 1, &d, x));
  gopt_node_set_int(g, g->tensors.a[t].producer, "blocksize", bs);
  return tb_partial(b, x, t);
}

/* Trilu (k input kept) and CumSum (axis input kept; reverse flipped, exclusive kept). */
static int rule_mask_scan(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  int trilu = g->nodes.a[n].op == GOPT_OP_TRILU;
  int32_t in[2] = {d, tb_in(g, n, 1)}, t;
  TRY(t = tb_op_like(b, trilu ? "Trilu" : "CumSum", "d0", in[1] >= 0 ? 2 : 1, in, x));
  int32_t p = g->tensors.a[t].producer;
  if (trilu) {
    gopt_node_set_int(g, p, "upper", gopt_node_get_int(g, n, "upper", 1));
  } else {
    gopt_node_set_int(g, p, "exclusive", gopt_node_get_int(g, n, "exclusive", 0));
    gopt_node_set_int(g, p, "reverse", !gopt_node_get_int(g, n, "reverse", 0));
  }
  return tb_partial(b, x, t);
}

static int rule_sum_square(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  int r = g->tensors.a[x].rank, na = -1, dt = g->tensors.a[x].dtype, rc;
  int64_t xd[GOPT_MAX_RANK], kd[GOPT_MAX_RANK], axes[GOPT_MAX_RANK];
  if ((rc = static_dims(b, n, x, xd)) || (rc = tb_reduce_axes(b, n, r, axes, &na))) return rc;
  if (na < 0 || (na == 0 && !gopt_node_get_int(g, n, "noop_with_empty_axes", 0)))
    for (na = 0; na < r; na++) axes[na] = na;
  memcpy(kd, xd, (size_t)r * sizeof *kd);
  for (int i = 0; i < na; i++) kd[axes[i]] = 1;
  int32_t dk = d, t, two;
  if (!gopt_node_get_int(g, n, "keepdims", 1)) {
    int32_t sh, in[2];
    TRY(sh = tb_const_i64(b, "kept_shape", kd, r));
    in[0] = d, in[1] = sh;
    TRY(dk = tb_op(b, "Reshape", "dy_kept", 2, in, dt, r, kd));
  }
  TRY(two = tb_const_scalar(b, "two", dt, 2.0));
  int32_t in1[2] = {x, two}, in2[2];
  TRY(t = tb_op(b, "Mul", "two_x", 2, in1, dt, r, xd));
  in2[0] = t, in2[1] = dk;
  TRY(t = tb_op(b, "Mul", "d0", 2, in2, dt, r, xd));
  return tb_partial(b, x, t);
}

static int rule_tile(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  int r = g->tensors.a[x].rank, dt = g->tensors.a[x].dtype, rc;
  int64_t xd[GOPT_MAX_RANK], rep[GOPT_MAX_RANK], sd[2 * GOPT_MAX_RANK], axes[GOPT_MAX_RANK];
  if ((rc = static_dims(b, n, x, xd))) return rc;
  if (tb_const_ints(g, tb_in(g, n, 1), rep, GOPT_MAX_RANK) != r)
    return tb_fail(b, GOPT_EUNSUP, "Tile whose repeats are not a constant of rank %d has no gradient rule", r);
  if (2 * r > GOPT_MAX_RANK) return tb_fail(b, GOPT_EUNSUP, "Tile of rank %d has no gradient rule (at most %d)", r, GOPT_MAX_RANK / 2);
  for (int i = 0; i < r; i++) {
    sd[2 * i] = rep[i];
    sd[2 * i + 1] = xd[i];
    axes[i] = 2 * i;
  }
  int32_t sh, t, in[2];
  TRY(sh = tb_const_i64(b, "tiles_shape", sd, 2 * r));
  in[0] = d, in[1] = sh;
  TRY(t = tb_op(b, "Reshape", "dy_tiles", 2, in, dt, 2 * r, sd));
  TRY(t = tb_reduce_sum(b, t, axes, r, 0, "d0", r, xd));
  return tb_partial(b, x, t);
}

/* GatherElements / GatherND: dY scattered with addition into zeros shaped like X (float32). */
static int rule_gather_scatter(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  int elems = g->nodes.a[n].op == GOPT_OP_GATHER_ELEMENTS;
  if (!elems && gopt_node_get_int(g, n, "batch_dims", 0))
    return tb_fail(b, GOPT_EUNSUP, "GatherND with batch_dims has no gradient rule");
  if (g->tensors.a[x].dtype != GOPT_DT_FLOAT)
    return tb_fail(b, GOPT_EUNSUP, "%s of a non-float32 tensor has no gradient rule", gopt_node_type(g, n));
  int32_t z, t;
  TRY(z = tb_zeros_like(b, "zeros", x));
  int32_t in[3] = {z, tb_in(g, n, 1), d};
  TRY(t = tb_op_like(b, elems ? "ScatterElements" : "ScatterND", "d0", 3, in, x));
  int32_t p = g->tensors.a[t].producer;
  if (elems) gopt_node_set_int(g, p, "axis", gopt_node_get_int(g, n, "axis", 0));
  gopt_node_set_string(g, p, "reduction", "add");
  return tb_partial(b, x, t);
}

/* TopK: the values' gradient scattered with addition into zeros at the indices along the axis. */
static int rule_topk(tb *b, int32_t n, int32_t d, int32_t x) {
  gopt_graph *g = b->g;
  if (g->tensors.a[x].dtype != GOPT_DT_FLOAT) return tb_fail(b, GOPT_EUNSUP, "TopK of a non-float32 tensor has no gradient rule");
  int32_t z, t;
  TRY(z = tb_zeros_like(b, "zeros", x));
  int32_t in[3] = {z, tb_out(g, n, 1), d};
  TRY(t = tb_op_like(b, "ScatterElements", "d0", 3, in, x));
  gopt_node_set_int(g, g->tensors.a[t].producer, "axis", gopt_node_get_int(g, n, "axis", -1));
  gopt_node_set_string(g, g->tensors.a[t].producer, "reduction", "add");
  return tb_partial(b, x, t);
}

/* ScatterElements (reduction none or add): d data = dY with zeros at the written positions (none)
 * or dY itself (add); d updates = GatherElements(dY, indices) along the axis. */
static int rule_scatter_elements(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  const char *red = gopt_node_get_string(g, n, "reduction", "none");
  int add = !strcmp(red, "add");
  if (!add && strcmp(red, "none")) return tb_fail(b, GOPT_EUNSUP, "ScatterElements with reduction=%s has no gradient rule", red);
  int32_t x = tb_in(g, n, 0), idx = tb_in(g, n, 1), upd = tb_in(g, n, 2), t, p;
  int64_t axis = gopt_node_get_int(g, n, "axis", 0);
  if (need[0] && add) TRY(tb_partial(b, x, d));
  if (need[0] && !add) {
    if (g->tensors.a[upd].dtype != GOPT_DT_FLOAT)
      return tb_fail(b, GOPT_EUNSUP, "ScatterElements of non-float32 updates has no gradient rule");
    int32_t z;
    TRY(z = tb_zeros_like(b, "zeros", upd));
    int32_t in[3] = {d, idx, z};
    TRY(t = tb_op_like(b, "ScatterElements", "d0", 3, in, x));
    gopt_node_set_int(g, g->tensors.a[t].producer, "axis", axis);
    TRY(tb_partial(b, x, t));
  }
  if (need[2]) {
    int32_t in[2] = {d, idx};
    TRY(t = tb_op_like(b, "GatherElements", "d2", 2, in, upd));
    p = g->tensors.a[t].producer;
    gopt_node_set_int(g, p, "axis", axis);
    TRY(tb_partial(b, upd, t));
  }
  return 0;
}

int tb_rule_move(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  int32_t x = tb_in(g, n, 0);
  if (g->nodes.a[n].op == GOPT_OP_SCATTER_ELEMENTS) return rule_scatter_elements(b, n, d, need);
  if (!need[0]) return 0;
  switch (g->nodes.a[n].op) {
    case GOPT_OP_DEPTH_TO_SPACE: case GOPT_OP_SPACE_TO_DEPTH: return rule_d2s(b, n, d, x);
    case GOPT_OP_TRILU: case GOPT_OP_CUMSUM: return rule_mask_scan(b, n, d, x);
    case GOPT_OP_REDUCE_SUM_SQUARE: return rule_sum_square(b, n, d, x);
    case GOPT_OP_GATHER_ELEMENTS: case GOPT_OP_GATHER_ND: return rule_gather_scatter(b, n, d, x);
    case GOPT_OP_TOPK: return rule_topk(b, n, d, x);
    default: return rule_tile(b, n, d, x);
  }
}
