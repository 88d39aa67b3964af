/* zoo_rnn.c: recurrent models of the zoo, unrolled over time like TF1's static RNN graphs:
 * GNMT (bidirectional first encoder layer, residual stacks, Bahdanau attention fed to every
 * decoder layer) and an LSTM language model. Each LSTM cell step is spelled out in ONNX ops
 * (Concat, MatMul, Add, Split, Sigmoid/Tanh, Mul, Add), one set per layer and time step; the
 * weights of a layer are shared by all its steps. */
#include <stdio.h>
#include <stdlib.h>

#include "zoo/zoo_internal.h"

#define FMT(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)
#define MAX_STEPS 65535 /* a Split/Concat over time has one output/input per step (uint16) */

/* Weights of one LSTM layer: W [in + H, 4H] (gates i, j, f, o) and bias [4H]. */
typedef struct lstm_w {
  zt w, bias;
} lstm_w;

static lstm_w lstm_params(zb *b, int64_t in, int64_t H) {
  lstm_w p;
  p.w = zb_param(b, "lstm_cell.kernel", ZS(in + H, 4 * H));
  p.bias = zb_param(b, "lstm_cell.bias", ZS(4 * H));
  return p;
}

/* One LSTM step under the current scope: x [B,in], state h, c [B,H] -> new h, c. */
static void lstm_cell(zb *b, const lstm_w *p, zt x, zt *h, zt *c) {
  zt xh[2] = {x, *h}, g[4];
  zt t = zb_concat(b, "lstm_cell.concat", 1, 2, xh);
  t = zb_matmul(b, "lstm_cell.matmul", t, p->w);
  t = zb_binary(b, "Add", "lstm_cell.bias_add", t, p->bias);
  zb_split(b, "lstm_cell.split", t, 1, 4, g);
  zt i = zb_unary(b, "Sigmoid", "lstm_cell.input_gate", g[0]);
  zt j = zb_unary(b, "Tanh", "lstm_cell.candidate", g[1]);
  zt f = zb_unary(b, "Sigmoid", "lstm_cell.forget_gate", g[2]);
  zt o = zb_unary(b, "Sigmoid", "lstm_cell.output_gate", g[3]);
  zt fc = zb_binary(b, "Mul", "lstm_cell.forget", f, *c);
  zt ij = zb_binary(b, "Mul", "lstm_cell.update", i, j);
  *c = zb_binary(b, "Add", "lstm_cell.cell", fc, ij);
  zt tc = zb_unary(b, "Tanh", "lstm_cell.cell_tanh", *c);
  *h = zb_binary(b, "Mul", "lstm_cell.hidden", o, tc);
}

/* Zero initial state [B, H] (data when small). */
static zt zeros(zb *b, int64_t B, int64_t H) {
  char nm[64];
  float *data = NULL;
  if (b->g && zb_ok(b) && B * H <= ZB_DATA_LIMIT && !(data = calloc((size_t)(B * H), sizeof *data))) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    return ZS(B, H);
  }
  zt z = zb_const_f32(b, FMT(nm, "const.zeros(%lldx%lld)", (long long)B, (long long)H), ZS(B, H),
                      data);
  free(data);
  return z;
}

/* Embeds tokens [B, T] and splits them into T step inputs [B, H] (xs, T entries). */
static void embed_steps(zb *b, const char *side, zt tokens, int64_t V, int64_t H, zt *xs) {
  int64_t B = tokens.d[0], T = tokens.d[1];
  zb_scope(b, "%s", side);
  zt table = zb_param(b, "embedding.weight", ZS(V, H));
  zt e = zb_op(b, "Gather", "embedding", ZS(B, T, H), 2, table.id, tokens.id);
  zb_ai(b, "axis", 0);
  zb_split(b, "embedding.steps", e, 1, (int)T, xs);
  for (int64_t t = 0; t < T && zb_ok(b); t++) {
    zb_scope(b, "%s.t%lld", side, (long long)t);
    xs[t] = zb_squeeze(b, "embedding.squeeze", xs[t], 1);
  }
}

/* Per-step logits [B, V] -> Unsqueeze -> one Concat [B, T, V] graph output "logits". */
static zt logits_step(zb *b, zt h, zt w, zt bias) {
  zt y = zb_matmul(b, "logits", h, w);
  y = zb_binary(b, "Add", "logits.add", y, bias);
  return zb_unsqueeze(b, "logits.unsqueeze", y, 1);
}

static void stack_logits(zb *b, int64_t T, const zt *ys) {
  int32_t *ids = malloc((size_t)T * sizeof *ids);
  if (!ids) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    return;
  }
  for (int64_t t = 0; t < T; t++) ids[t] = ys[t].id;
  zt out = ys[0];
  out.d[1] = T;
  zb_scope(b, "%s", "");
  zb_output(b, zb_concat_ids(b, "logits", 1, (int)T, ids, out));
  free(ids);
}

/* ==== GNMT =================================================================================== */

static const gopt_zoo_knob gnmt_knobs[] = {
    {"layers", 8, 2, 10000, "encoder layers (first bidirectional) and as many decoder layers"},
    {"steps", 50, 1, MAX_STEPS, "source and target time steps unrolled"},
    {"hidden", 1024, 1, 65536, "LSTM width (and embedding width)"},
    {"batch", 128, 1, 65536, "batch size"},
    {"vocab", 32000, 2, 10000000, "vocabulary size"},
    {"attention", 1, 0, 1, "1: Bahdanau attention from the bottom decoder layer fed to all "
                           "layers; 0: plain encoder-decoder started from the encoder's final states"},
};

static void build_gnmt(zb *b) {
  int64_t L = zb_knob(b, "layers"), T = zb_knob(b, "steps"), H = zb_knob(b, "hidden");
  int64_t B = zb_knob(b, "batch"), V = zb_knob(b, "vocab"), att = zb_knob(b, "attention");
  zt *xs = calloc((size_t)T, sizeof *xs), *hs = calloc((size_t)T, sizeof *hs);
  zt *bw = calloc((size_t)T, sizeof *bw);
  lstm_w *dec = calloc((size_t)L, sizeof *dec);
  zt *hd = calloc((size_t)L, sizeof *hd), *cd = calloc((size_t)L, sizeof *cd);
  if (!xs || !hs || !bw || !dec || !hd || !cd) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  zt src = zb_input(b, "src_tokens", GOPT_DT_INT64, ZS(B, T));
  zt tgt = zb_input(b, "tgt_tokens", GOPT_DT_INT64, ZS(B, T));
  zt z = zeros(b, B, H);
  /* Encoder layer 0: forward and backward LSTMs, outputs concatenated per step. */
  embed_steps(b, "enc", src, V, H, xs);
  zb_scope(b, "%s", "enc.l0.fw");
  lstm_w fw = lstm_params(b, H, H);
  zb_scope(b, "%s", "enc.l0.bw");
  lstm_w bwp = lstm_params(b, H, H);
  zt h = z, c = z;
  for (int64_t t = 0; t < T && zb_ok(b); t++) {
    zb_scope(b, "enc.l0.fw.t%lld", (long long)t);
    lstm_cell(b, &fw, xs[t], &h, &c);
    hs[t] = h;
  }
  hd[0] = h, cd[0] = c; /* final states: the decoder's initial ones without attention */
  h = z, c = z;
  for (int64_t t = T - 1; t >= 0 && zb_ok(b); t--) {
    zb_scope(b, "enc.l0.bw.t%lld", (long long)t);
    lstm_cell(b, &bwp, xs[t], &h, &c);
    bw[t] = h;
  }
  for (int64_t t = 0; t < T && zb_ok(b); t++) {
    zt two[2] = {hs[t], bw[t]};
    zb_scope(b, "enc.l0.t%lld", (long long)t);
    xs[t] = zb_concat(b, "concat_directions", 1, 2, two);
  }
  /* Encoder layers 1..L-1 (residual from layer 2 on). */
  for (int64_t l = 1; l < L && zb_ok(b); l++) {
    zb_scope(b, "enc.l%lld", (long long)l);
    lstm_w p = lstm_params(b, xs[0].d[1], H);
    h = z, c = z;
    for (int64_t t = 0; t < T && zb_ok(b); t++) {
      zb_scope(b, "enc.l%lld.t%lld", (long long)l, (long long)t);
      lstm_cell(b, &p, xs[t], &h, &c);
      /* Without attention nothing reads the top layer's per-step outputs. */
      if (!att && l == L - 1) continue;
      xs[t] = l >= 2 ? zb_binary(b, "Add", "residual", h, xs[t]) : h;
    }
    hd[l] = h, cd[l] = c;
  }
  /* Attention memory [B, T, H] and its key projection. */
  zt memory = xs[0], keys = xs[0], att_q = xs[0], att_v = xs[0];
  if (att) {
    for (int64_t t = 0; t < T && zb_ok(b); t++) {
      zb_scope(b, "enc.t%lld", (long long)t);
      hs[t] = zb_unsqueeze(b, "memory.unsqueeze", xs[t], 1);
    }
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    if (!ids) {
      zb_fail(b, GOPT_ENOMEM, "out of memory");
      goto done;
    }
    for (int64_t t = 0; t < T; t++) ids[t] = hs[t].id;
    zb_scope(b, "%s", "attention");
    memory = zb_concat_ids(b, "memory", 1, (int)T, ids, ZS(B, T, H));
    free(ids);
    keys = zb_matmul(b, "memory_layer", memory, zb_param(b, "memory_layer.weight", ZS(H, H)));
    att_q = zb_param(b, "query_layer.weight", ZS(H, H));
    att_v = zb_param(b, "v.weight", ZS(H, 1));
  }
  /* Decoder, step by step. */
  embed_steps(b, "dec", tgt, V, H, xs);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "dec.l%lld", (long long)l);
    dec[l] = lstm_params(b, att ? 2 * H : H, H);
    if (att) hd[l] = cd[l] = z; /* else the encoder's final states (Sutskever et al.) */
  }
  zb_scope(b, "%s", "dec");
  zt out_w = zb_param(b, "output_projection.weight", ZS(H, V));
  zt out_b = zb_param(b, "output_projection.bias", ZS(V));
  zt ctx = z;
  for (int64_t t = 0; t < T && zb_ok(b); t++) {
    zt in = xs[t];
    for (int64_t l = 0; l < L && zb_ok(b); l++) {
      zb_scope(b, "dec.l%lld.t%lld", (long long)l, (long long)t);
      zt below = in;
      if (att) {
        zt two[2] = {in, ctx};
        in = zb_concat(b, "concat_context", 1, 2, two);
      }
      lstm_cell(b, &dec[l], in, &hd[l], &cd[l]);
      in = l >= 2 ? zb_binary(b, "Add", "residual", hd[l], below) : hd[l];
      if (att && l == 0) {
        zb_scope(b, "dec.t%lld.attention", (long long)t);
        zt q = zb_matmul(b, "query", hd[0], att_q);
        q = zb_unsqueeze(b, "query.unsqueeze", q, 1);
        zt s = zb_binary(b, "Add", "add_keys", keys, q);
        s = zb_unary(b, "Tanh", "tanh", s);
        s = zb_matmul(b, "score", s, att_v);
        s = zb_squeeze(b, "score.squeeze", s, 2);
        s = zb_op(b, "Softmax", "weights", s, 1, s.id);
        zb_ai(b, "axis", -1);
        s = zb_unsqueeze(b, "weights.unsqueeze", s, 1);
        s = zb_matmul(b, "context", s, memory);
        ctx = zb_squeeze(b, "context.squeeze", s, 1);
      }
    }
    zb_scope(b, "dec.t%lld", (long long)t);
    hs[t] = logits_step(b, in, out_w, out_b);
  }
  if (zb_ok(b)) stack_logits(b, T, hs);
done:
  free(xs);
  free(hs);
  free(bw);
  free(dec);
  free(hd);
  free(cd);
}

const zoo_entry zoo_gnmt = {
    {"gnmt",
     "GNMT (Wu et al. 2016): LSTM encoder-decoder unrolled over time, bidirectional first "
     "encoder layer, residual connections, attention: the NMT/GNMT of GO/HDP/Placeto",
     ZOO_KNOBS(gnmt_knobs)},
    build_gnmt};

/* ==== RNN language model ====================================================================== */

static const gopt_zoo_knob rnnlm_knobs[] = {
    {"layers", 2, 1, 100000, "stacked LSTM layers"},
    {"steps", 35, 1, MAX_STEPS, "time steps unrolled (BPTT length)"},
    {"hidden", 650, 1, 65536, "LSTM and embedding width"},
    {"vocab", 10000, 2, 10000000, "vocabulary size"},
    {"batch", 20, 1, 65536, "batch size"},
};

static void build_rnnlm(zb *b) {
  int64_t L = zb_knob(b, "layers"), T = zb_knob(b, "steps"), H = zb_knob(b, "hidden");
  int64_t V = zb_knob(b, "vocab"), B = zb_knob(b, "batch");
  zt *xs = calloc((size_t)T, sizeof *xs);
  lstm_w *p = calloc((size_t)L, sizeof *p);
  zt *hh = calloc((size_t)L, sizeof *hh), *cc = calloc((size_t)L, sizeof *cc);
  if (!xs || !p || !hh || !cc) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  zt tokens = zb_input(b, "tokens", GOPT_DT_INT64, ZS(B, T));
  zt z = zeros(b, B, H);
  embed_steps(b, "lm", tokens, V, H, xs);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "lm.l%lld", (long long)l);
    p[l] = lstm_params(b, H, H);
    hh[l] = cc[l] = z;
  }
  zb_scope(b, "%s", "lm");
  zt out_w = zb_param(b, "decoder.weight", ZS(H, V));
  zt out_b = zb_param(b, "decoder.bias", ZS(V));
  for (int64_t t = 0; t < T && zb_ok(b); t++) {
    zt in = xs[t];
    for (int64_t l = 0; l < L && zb_ok(b); l++) {
      zb_scope(b, "lm.l%lld.t%lld", (long long)l, (long long)t);
      lstm_cell(b, &p[l], in, &hh[l], &cc[l]);
      in = hh[l];
    }
    zb_scope(b, "lm.t%lld", (long long)t);
    xs[t] = logits_step(b, in, out_w, out_b);
  }
  if (zb_ok(b)) stack_logits(b, T, xs);
done:
  free(xs);
  free(p);
  free(hh);
  free(cc);
}

const zoo_entry zoo_rnnlm = {
    {"rnnlm",
     "LSTM language model (Zaremba et al. medium size by default) unrolled over time: the RNNLM "
     "of the placement papers (Mirhoseini et al., Placeto, GO)",
     ZOO_KNOBS(rnnlm_knobs)},
    build_rnnlm};
