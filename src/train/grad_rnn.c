/* grad_rnn.c: the gradient rules of the recurrent ops, LSTM, GRU and RNN: one backward op each
 * (LSTMGrad, GRUGrad, RNNGrad of op_list_train.h; backpropagation through time over the whole sequence,
 * gates recomputed from the inputs and the hidden states in Y). Semantics and costs:
 * docs/TRAINING.md; shapes and costs: src/ops/ops_train.c. */
#include "train/train_internal.h"



/* LSTM: inputs X, W [D, 4H, I], R [D, 4H, H], B [D, 8H], sequence_lens, initial_h, initial_c, P;
 * LSTMGrad reads those but P, then Y, dY, dY_h, dY_c, and writes dX, dW, dR, dB, d_initial_h,
 * d_initial_c. GRU: inputs X, W [D, 3H, I], R [D, 3H, H], B [D, 6H], sequence_lens, initial_h;
 * GRUGrad reads those, then Y, dY, dY_h, and writes dX, dW, dR, dB, d_initial_h. RNN: as GRU with
 * W [D, H, I], R [D, H, H], B [D, 2H], and RNNGrad. The bias gradient
 * is [D, 2 x W's rows] and the state gradients [D, batch, H] ([batch, D, H] with layout 1) even
 * when the forward op had no such input. */
int tb_rule_rnn(tb *b, int32_t n, const int32_t *dy, const unsigned char *need) {
  gopt_graph *g = b->g;
  int lstm = g->nodes.a[n].op == GOPT_OP_LSTM, ns = lstm ? 2 : 1; /* state inputs: h (and c) */
  if (lstm && NEED(7)) return tb_fail(b, GOPT_EUNSUP, "LSTM peephole (P) gradient is not supported");
  int32_t X = tb_in(g, n, 0), W = tb_in(g, n, 1), R = tb_in(g, n, 2);
  int layout = (int)gopt_node_get_int(g, n, "layout", 0);
  const int64_t *wd = gopt_tensor_dims(g, W), *rd = gopt_tensor_dims(g, R), *xd = gopt_tensor_dims(g, X);
  int64_t D = wd[0], H = rd[2], batch = layout ? xd[0] : xd[1];
  int64_t bdims[2] = {D, H < 0 || wd[1] < 0 ? wd[1] : 2 * wd[1]};
  int64_t hdims[3] = {D, batch, H};
  if (layout) { hdims[0] = batch; hdims[1] = D; }
  if (bdims[1] < 0) return tb_fail(b, GOPT_EUNSUP, "%s with a symbolic hidden size", gopt_node_type(g, n));
  int32_t in[11], out[6];
  int k = 0, nout = (int)g->nodes.a[n].n_out;
  for (int i = 0; i < 5 + ns; i++) in[k++] = tb_in(g, n, i); /* X W R B sequence_lens initial_h (initial_c) */
  in[k++] = tb_out(g, n, 0);
  for (int o = 0; o <= ns; o++) in[k++] = o < nout ? dy[o] : -1; /* dY dY_h (dY_c) */
  int dt = g->tensors.a[X].dtype;
  TRY(out[0] = tb_tensor_like(b, "d0", X));
  TRY(out[1] = tb_tensor_like(b, "d1", W));
  TRY(out[2] = tb_tensor_like(b, "d2", R));
  TRY(out[3] = tb_tensor(b, "d3", dt, 2, bdims));
  TRY(out[4] = tb_tensor(b, "d5", dt, 3, hdims));
  if (lstm) TRY(out[5] = tb_tensor(b, "d6", dt, 3, hdims));
  int32_t node;
  int op = g->nodes.a[n].op;
  TRY(node = tb_node(b, lstm ? "LSTMGrad" : op == GOPT_OP_GRU ? "GRUGrad" : "RNNGrad", k, in, 4 + ns, out));
  if (tb_copy_attrs(b, n, node)) return b->err->code;
  static const int in_of_out[6] = {0, 1, 2, 3, 5, 6};
  for (int o = 0; o < 4 + ns; o++)
    if (NEED(in_of_out[o])) TRY(tb_partial(b, tb_in(g, n, in_of_out[o]), out[o]));
  return 0;
}
