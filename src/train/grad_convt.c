/* grad_convt.c: the gradient rule of ConvTranspose. Y = ConvTranspose(X, W) is the input gradient
 * of the convolution that maps Y's space to X's with the same kernel_shape, strides, pads,
 * dilations and group (output_padding only widens Y so that this convolution gives X's shape
 * back), so
 *   dX = Conv(dY, W)                                  (that convolution, run forward)
 *   dW = ConvGradWeight(X, dY, shape(W))              (X as its output gradient, dY as its input)
 *   dB = ReduceSum(dY) over every axis but 1.
 * Explicit pads only: auto_pad other than NOTSET and output_shape are refused in one line.
 * docs/TRAINING.md lists the rule. */
#include <string.h>

#include "train/train_internal.h"

/* Copies the convolution attributes both directions share from node `from` to node `to`. */
static int conv_attrs(tb *b, int32_t from, int32_t to) {
  static const char *const ints[] = {"kernel_shape", "strides", "pads", "dilations"};
  gopt_graph *g = b->g;
  for (int i = 0; i < 4; i++) {
    size_t cnt = 0;
    int64_t v[2 * GOPT_MAX_RANK]; /* a copy: setting an attribute may move the graph's arrays */
    const int64_t *p = gopt_node_get_ints(g, from, ints[i], &cnt);
    if (!p) continue;
    if (cnt > 2 * GOPT_MAX_RANK) return tb_fail(b, GOPT_EINVAL, "ConvTranspose attribute '%s' has %zu values", ints[i], cnt);
    memcpy(v, p, cnt * sizeof *v);
    if (gopt_node_set_ints(g, to, ints[i], v, cnt)) return tb_fail(b, GOPT_ENOMEM, "out of memory (ConvTranspose gradient)");
  }
  if (gopt_node_set_int(g, to, "group", gopt_node_get_int(g, from, "group", 1)))
    return tb_fail(b, GOPT_ENOMEM, "out of memory (ConvTranspose gradient)");
  return 0;
}

int tb_rule_conv_transpose(tb *b, int32_t n, int32_t d, const unsigned char *need) {
  gopt_graph *g = b->g;
  const char *pad = gopt_node_get_string(g, n, "auto_pad", "NOTSET");
  if (strcmp(pad, "NOTSET"))
    return tb_fail(b, GOPT_EUNSUP, "ConvTranspose with auto_pad=%s has no gradient rule (explicit pads only)", pad);
  if (gopt_node_attr(g, n, "output_shape"))
    return tb_fail(b, GOPT_EUNSUP, "ConvTranspose with output_shape has no gradient rule (explicit pads only)");
  int32_t X = tb_in(g, n, 0), W = tb_in(g, n, 1), Bi = tb_in(g, n, 2), t, s;
  if (NEED(0)) {
    int32_t in[2] = {d, W};
    TRY(t = tb_op_like(b, "Conv", "d0", 2, in, X));
    if (conv_attrs(b, n, g->tensors.a[t].producer)) return b->err->code;
    TRY(tb_partial(b, X, t));
  }
  if (NEED(1)) {
    TRY(s = tb_shape_of(b, W));
    int32_t in[3] = {X, d, s};
    TRY(t = tb_op_like(b, "ConvGradWeight", "d1", 3, in, W));
    if (conv_attrs(b, n, g->tensors.a[t].producer)) return b->err->code;
    TRY(tb_partial(b, W, t));
  }
  if (NEED(2)) {
    int r = g->tensors.a[d].rank;
    int64_t axes[GOPT_MAX_RANK], bd[1] = {gopt_tensor_dims(g, Bi)[0]};
    int na = 0;
    for (int i = 0; i < r; i++)
      if (i != 1) axes[na++] = i;
    TRY(t = tb_reduce_sum(b, d, axes, na, 0, "d2", 1, bd));
    TRY(tb_partial(b, Bi, t));
  }
  return 0;
}
