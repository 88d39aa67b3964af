/* zoo_nlp.c: attention models of the zoo: the NMT Transformer (encoder-decoder, post-LN),
 * Transformer-XL (segments with recurrent memory and relative positions), BERT (post-LN encoder
 * with erf GELU and pooler) and GPT-2 (pre-LN causal decoder with tanh GELU and tied LM head).
 * Tensors are batch-first [B, S, H]; attention follows the ONNX export of the reference
 * implementations (Reshape/Transpose per head, MatMul, scale Mul, mask Add, Softmax). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "zoo/zoo_internal.h"

#define FMT(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

static const zt NO_MASK = {-1, 0, {0}};

static int check_heads(zb *b, const char *dname, int64_t d, int64_t heads) {
  if (d % heads) {
    zb_fail(b, GOPT_EINVAL, "knob '%s' (%lld) must be divisible by knob 'heads' (%lld)", dname,
            (long long)d, (long long)heads);
    return -1;
  }
  return 0;
}

/* Token embedding: Gather(table, ids) -> [B, S, d]. */
static zt embed(zb *b, const char *local, zt table, zt ids) {
  zt y = zb_op(b, "Gather", local, ZS(ids.d[0], ids.d[1], table.d[1]), 2, table.id, ids.id);
  zb_ai(b, "axis", 0);
  return y;
}

/* x@W (+bias) with given parameters. */
static zt lin(zb *b, const char *local, zt x, zt w, zt bias) {
  char n[160];
  zt y = zb_matmul(b, local, x, w);
  return bias.rank ? zb_binary(b, "Add", FMT(n, "%s.add", local), y, bias) : y;
}

/* Learned absolute positions: the constant ids 0..S-1 named ids_name, a [P, d] parameter table
 * named table_name and Gather(table, ids) -> [S, d] named local (in that order) into *pe.
 * Returns 0, or -1 when the ids cannot be allocated (the builder has failed; *pe is unset). */
static int pos_embed(zb *b, const char *ids_name, const char *table_name, const char *local, int64_t S,
                     int64_t P, int64_t d, zt *pe) {
  int64_t *pv = NULL;
  if (b->g && zb_ok(b)) {
    if (!(pv = malloc((size_t)S * sizeof *pv))) {
      zb_fail(b, GOPT_ENOMEM, "out of memory");
      return -1;
    }
    for (int64_t i = 0; i < S; i++) pv[i] = i;
  }
  zt pos_ids = zb_ints_named(b, ids_name, (int)S, pv);
  free(pv);
  zt table = zb_param(b, table_name, ZS(P, d));
  *pe = zb_op(b, "Gather", local, ZS(S, d), 2, table.id, pos_ids.id);
  zb_ai(b, "axis", 0);
  return 0;
}

/* Names of the nodes of attn_sublayer: the q, k and v projections, the attention (prefix) and
 * the output projection. */
typedef struct attn_names {
  const char *q, *k, *v, *attn, *out;
} attn_names;

/* Multi-head attention sub-layer without residual: q from x, k and v from mem (width-d linear
 * projections with bias), zb_attention over heads with mask, then the width-d output projection.
 * Nodes are created in that order under the names in nm. */
static zt attn_sublayer(zb *b, const attn_names *nm, zt x, zt mem, int64_t d, int64_t heads, zt mask) {
  zt q = zb_linear(b, nm->q, x, d, 1);
  zt k = zb_linear(b, nm->k, mem, d, 1);
  zt v = zb_linear(b, nm->v, mem, d, 1);
  zt a = zb_attention(b, nm->attn, q, k, v, heads, mask);
  return zb_linear(b, nm->out, a, d, 1);
}

/* Post-LN residual: LayerNorm(Add(first, second)) with the Add named res and the norm named norm. */
static zt add_norm(zb *b, const char *res, const char *norm, zt first, zt second, double eps) {
  zt r = zb_binary(b, "Add", res, first, second);
  return zb_layernorm(b, norm, r, eps);
}

typedef zt (*act_fn)(zb *b, const char *local, zt x);

static zt relu(zb *b, const char *local, zt x) { return zb_unary(b, "Relu", local, x); }

/* Feed-forward network without residual: linear to inner width (named fc1), activation act
 * (named act_name), linear back to out width (named fc2); linears have bias. */
static zt mlp(zb *b, const char *fc1, const char *act_name, act_fn act, const char *fc2, zt x, int64_t inner,
              int64_t out) {
  zt h = zb_linear(b, fc1, x, inner, 1);
  h = act(b, act_name, h);
  return zb_linear(b, fc2, h, out, 1);
}

/* ==== Transformer (NMT) ====================================================================== */

static const gopt_zoo_knob transformer_knobs[] = {
    {"layers", 6, 1, 1000000, "encoder layers (and as many decoder layers)"},
    {"d_model", 512, 1, 65536, "model width"},
    {"heads", 8, 1, 1024, "attention heads (must divide d_model)"},
    {"ff", 2048, 1, 262144, "feed-forward inner width"},
    {"seq", 128, 1, 1000000, "source and target length"},
    {"batch", 1, 1, 65536, "batch size"},
    {"vocab", 32000, 2, 10000000, "vocabulary size"},
};

/* Post-LN sub-layers of the NMT Transformer. */
static zt mha_block(zb *b, const char *p, zt x, zt mem, int64_t heads, zt mask) {
  char q[128], k[128], v[128], o[128], r[128], n[128];
  const attn_names nm = {FMT(q, "%s.q", p), FMT(k, "%s.k", p), FMT(v, "%s.v", p), p, FMT(o, "%s.out", p)};
  zt a = attn_sublayer(b, &nm, x, mem, x.d[2], heads, mask);
  return add_norm(b, FMT(r, "%s.residual", p), FMT(n, "%s.norm", p), x, a, 1e-5);
}

static zt ffn_block(zb *b, zt x, int64_t ff) {
  zt h = mlp(b, "ffn.fc1", "ffn.relu", relu, "ffn.fc2", x, ff, x.d[2]);
  return add_norm(b, "ffn.residual", "ffn.norm", x, h, 1e-5);
}

static zt nmt_embed(zb *b, const char *side, zt ids, int64_t V, int64_t d) {
  char n[64];
  zb_scope(b, "%s", side);
  zt e = embed(b, "embed", zb_param(b, "embed.weight", ZS(V, d)), ids);
  e = zb_binary(b, "Mul", "embed.scale", e, zb_scalar(b, (float)sqrt((double)d)));
  zt pe = zb_sinusoid(b, FMT(n, "const.sinusoid(%lldx%lld)", (long long)ids.d[1], (long long)d),
                      ids.d[1], d, 0);
  return zb_binary(b, "Add", "embed.position", e, pe);
}

static void build_transformer(zb *b) {
  int64_t L = zb_knob(b, "layers"), d = zb_knob(b, "d_model"), h = zb_knob(b, "heads");
  int64_t ff = zb_knob(b, "ff"), S = zb_knob(b, "seq"), B = zb_knob(b, "batch");
  int64_t V = zb_knob(b, "vocab");
  if (check_heads(b, "d_model", d, h)) return;
  zt src = zb_input(b, "src_tokens", GOPT_DT_INT64, ZS(B, S));
  zt tgt = zb_input(b, "tgt_tokens", GOPT_DT_INT64, ZS(B, S));
  zt x = nmt_embed(b, "enc", src, V, d);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "enc.l%lld", (long long)l);
    x = mha_block(b, "self_attn", x, x, h, NO_MASK);
    x = ffn_block(b, x, ff);
  }
  zt memory = x;
  zt mask = zb_causal_mask(b, S, S);
  x = nmt_embed(b, "dec", tgt, V, d);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "dec.l%lld", (long long)l);
    x = mha_block(b, "self_attn", x, x, h, mask);
    x = mha_block(b, "cross_attn", x, memory, h, NO_MASK);
    x = ffn_block(b, x, ff);
  }
  zb_scope(b, "%s", "");
  zt logits = zb_linear(b, "generator", x, V, 1);
  zb_output(b, logits);
}

const zoo_entry zoo_transformer = {
    {"transformer",
     "Transformer NMT encoder-decoder (Vaswani et al., base size by default; post-LN, causal "
     "decoder self-attention, cross-attention): the Transformer of GO/HDP/REGAL",
     ZOO_KNOBS(transformer_knobs)},
    build_transformer};

/* ==== Transformer-XL ========================================================================= */

static const gopt_zoo_knob txl_knobs[] = {
    {"layers", 16, 1, 100000, "layers"},
    {"d_model", 410, 1, 65536, "model width"},
    {"heads", 10, 1, 1024, "attention heads (must divide d_model)"},
    {"d_inner", 2100, 1, 262144, "feed-forward inner width"},
    {"seq", 150, 1, 100000, "segment (target) length"},
    {"mem_len", 150, 1, 100000, "memory length"},
    {"segments", 1, 1, 1000000, "segments unrolled (memory flows from each to the next)"},
    {"batch", 1, 1, 65536, "batch size"},
    {"vocab", 267735, 2, 10000000, "vocabulary size"},
};

/* Per-layer parameters of Transformer-XL (shared by all segments). */
typedef struct txl_layer {
  zt qkv, r_net, r_w_bias, r_r_bias, o, ln1_w, ln1_b, ff1_w, ff1_b, ff2_w, ff2_b, ln2_w, ln2_b;
} txl_layer;

static zt ln_p(zb *b, const char *local, zt x, zt w, zt bias) {
  zt y = zb_op(b, "LayerNormalization", local, x, 3, x.id, w.id, bias.id);
  zb_ai(b, "axis", -1);
  zb_af(b, "epsilon", 1e-5);
  return y;
}

/* One Transformer-XL layer on h [B,Q,d] with memory mem [B,M,d]; *new_mem gets the memory the
 * next segment uses for this layer. */
static zt txl_layer_fwd(zb *b, const txl_layer *p, zt h, zt mem, zt pos, zt mask, int64_t n,
                        zt *new_mem) {
  int64_t B = h.d[0], Q = h.d[1], d = h.d[2], M = mem.d[1], K = M + Q, dh = d / n;
  zt in2[2] = {mem, h}, parts[3];
  zt cat = zb_concat(b, "attn.cat_mem", 1, 2, in2);
  *new_mem = zb_slice(b, "attn.next_mem", cat, 1, K - M, K);
  zt w = zb_matmul(b, "attn.qkv", cat, p->qkv);
  zb_split(b, "attn.qkv_split", w, 2, 3, parts);
  zt q = zb_slice(b, "attn.q_last", parts[0], 1, K - Q, K);
  zt r = zb_matmul(b, "attn.r_net", pos, p->r_net);
  zt q4 = zb_reshape(b, "attn.q_split", q, ZS(B, Q, n, dh));
  zt k4 = zb_reshape(b, "attn.k_split", parts[1], ZS(B, K, n, dh));
  zt v4 = zb_reshape(b, "attn.v_split", parts[2], ZS(B, K, n, dh));
  zt r3 = zb_reshape(b, "attn.r_split", r, ZS(K, n, dh));
  zt rwq = zb_binary(b, "Add", "attn.q_rw", q4, p->r_w_bias);
  zt rrq = zb_binary(b, "Add", "attn.q_rr", q4, p->r_r_bias);
  zt ac = zb_matmul(b, "attn.ac", ZTRANS("attn.q_rw_heads", rwq, 0, 2, 1, 3),
                    ZTRANS("attn.k_heads", k4, 0, 2, 3, 1));
  zt bd = zb_matmul(b, "attn.bd", ZTRANS("attn.q_rr_heads", rrq, 0, 2, 1, 3),
                    ZTRANS("attn.r_heads", r3, 1, 2, 0));
  /* rel_shift: pad one zero column in front, view as [K+1, Q], drop the first row. */
  zt pads = ZI(0, 0, 0, 1, 0, 0, 0, 0);
  zt padded = zb_op(b, "Pad", "attn.shift_pad", ZS(B, n, Q, K + 1), 2, bd.id, pads.id);
  zt view = zb_reshape(b, "attn.shift_view", padded, ZS(B, n, K + 1, Q));
  view = zb_slice(b, "attn.shift_slice", view, 2, 1, K + 1);
  bd = zb_reshape(b, "attn.shift_back", view, ZS(B, n, Q, K));
  zt s = zb_binary(b, "Add", "attn.score", ac, bd);
  s = zb_binary(b, "Mul", "attn.scale", s, zb_scalar(b, (float)(1.0 / sqrt((double)dh))));
  s = zb_binary(b, "Add", "attn.mask", s, mask);
  s = zb_op(b, "Softmax", "attn.softmax", s, 1, s.id);
  zb_ai(b, "axis", -1);
  zt c = zb_matmul(b, "attn.context", s, ZTRANS("attn.v_heads", v4, 0, 2, 1, 3));
  c = ZTRANS("attn.merge_heads", c, 0, 2, 1, 3);
  c = zb_reshape(b, "attn.merge", c, ZS(B, Q, d));
  c = zb_matmul(b, "attn.o", c, p->o);
  h = ln_p(b, "attn.norm", zb_binary(b, "Add", "attn.residual", h, c), p->ln1_w, p->ln1_b);
  zt f = lin(b, "ff.fc1", h, p->ff1_w, p->ff1_b);
  f = zb_unary(b, "Relu", "ff.relu", f);
  f = lin(b, "ff.fc2", f, p->ff2_w, p->ff2_b);
  return ln_p(b, "ff.norm", zb_binary(b, "Add", "ff.residual", h, f), p->ln2_w, p->ln2_b);
}

static void build_transformer_xl(zb *b) {
  int64_t L = zb_knob(b, "layers"), d = zb_knob(b, "d_model"), n = zb_knob(b, "heads");
  int64_t di = zb_knob(b, "d_inner"), Q = zb_knob(b, "seq"), M = zb_knob(b, "mem_len");
  int64_t nseg = zb_knob(b, "segments"), B = zb_knob(b, "batch"), V = zb_knob(b, "vocab");
  if (check_heads(b, "d_model", d, n)) return;
  int64_t K = M + Q, dh = d / n;
  zt *h = calloc((size_t)nseg, sizeof *h), *mem = calloc((size_t)nseg + 1, sizeof *mem);
  if (!h || !mem) {
    zb_fail(b, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  zb_scope(b, "%s", "");
  zt emb_w = zb_param(b, "word_emb.weight", ZS(V, d));
  zt out_w = zb_param(b, "out.weight", ZS(d, V));
  zt out_b = zb_param(b, "out.bias", ZS(V));
  char nm[96];
  zt pos = zb_sinusoid(b, FMT(nm, "const.pos_emb(%lldx%lld)", (long long)K, (long long)d), K,
                       d, 1);
  zt mask = zb_causal_mask(b, Q, K);
  for (int64_t s = 0; s < nseg && zb_ok(b); s++) {
    zt ids = zb_input(b, FMT(nm, "tokens.seg%lld", (long long)s), GOPT_DT_INT64, ZS(B, Q));
    zb_scope(b, "seg%lld", (long long)s);
    zt e = embed(b, "word_emb", emb_w, ids);
    h[s] = zb_binary(b, "Mul", "emb_scale", e, zb_scalar(b, (float)sqrt((double)d)));
  }
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    txl_layer p;
    zb_scope(b, "l%lld", (long long)l);
    p.qkv = zb_param(b, "attn.qkv.weight", ZS(d, 3 * d));
    p.r_net = zb_param(b, "attn.r_net.weight", ZS(d, d));
    p.r_w_bias = zb_param(b, "attn.r_w_bias", ZS(n, dh));
    p.r_r_bias = zb_param(b, "attn.r_r_bias", ZS(n, dh));
    p.o = zb_param(b, "attn.o.weight", ZS(d, d));
    p.ln1_w = zb_param(b, "attn.norm.weight", ZS(d));
    p.ln1_b = zb_param(b, "attn.norm.bias", ZS(d));
    p.ff1_w = zb_param(b, "ff.fc1.weight", ZS(d, di));
    p.ff1_b = zb_param(b, "ff.fc1.bias", ZS(di));
    p.ff2_w = zb_param(b, "ff.fc2.weight", ZS(di, d));
    p.ff2_b = zb_param(b, "ff.fc2.bias", ZS(d));
    p.ln2_w = zb_param(b, "ff.norm.weight", ZS(d));
    p.ln2_b = zb_param(b, "ff.norm.bias", ZS(d));
    mem[0] = zb_input(b, FMT(nm, "mems.l%lld", (long long)l), GOPT_DT_FLOAT, ZS(B, M, d));
    for (int64_t s = 0; s < nseg && zb_ok(b); s++) {
      zb_scope(b, "seg%lld.l%lld", (long long)s, (long long)l);
      h[s] = txl_layer_fwd(b, &p, h[s], mem[s], pos, mask, n, &mem[s + 1]);
    }
    zb_output(b, mem[nseg]);
  }
  for (int64_t s = 0; s < nseg && zb_ok(b); s++) {
    zb_scope(b, "seg%lld", (long long)s);
    zb_output(b, lin(b, "logits", h[s], out_w, out_b));
  }
done:
  free(h);
  free(mem);
}

const zoo_entry zoo_transformer_xl = {
    {"transformer_xl",
     "Transformer-XL (WT103 base size by default): segments unrolled with per-layer recurrent "
     "memory (Concat/Slice), relative positions with rel-shift: GO's Transformer-XL",
     ZOO_KNOBS(txl_knobs)},
    build_transformer_xl};

/* ==== BERT =================================================================================== */

static const gopt_zoo_knob bert_knobs[] = {
    {"layers", 12, 1, 1000000, "encoder layers"},
    {"hidden", 768, 1, 65536, "hidden size"},
    {"heads", 12, 1, 1024, "attention heads (must divide hidden)"},
    {"intermediate", 3072, 1, 262144, "feed-forward inner width"},
    {"seq", 128, 1, 1000000, "sequence length"},
    {"batch", 1, 1, 65536, "batch size"},
    {"vocab", 30522, 2, 10000000, "vocabulary size"},
};

static void build_bert(zb *b) {
  int64_t L = zb_knob(b, "layers"), H = zb_knob(b, "hidden"), nh = zb_knob(b, "heads");
  int64_t I = zb_knob(b, "intermediate"), S = zb_knob(b, "seq"), B = zb_knob(b, "batch");
  int64_t V = zb_knob(b, "vocab"), P = S > 512 ? S : 512;
  if (check_heads(b, "hidden", H, nh)) return;
  zt ids = zb_input(b, "input_ids", GOPT_DT_INT64, ZS(B, S));
  zt types = zb_input(b, "token_type_ids", GOPT_DT_INT64, ZS(B, S));
  zt am = zb_input(b, "attention_mask", GOPT_DT_FLOAT, ZS(B, S));
  zb_scope(b, "%s", "embeddings");
  zt we = embed(b, "word_embeddings", zb_param(b, "word_embeddings.weight", ZS(V, H)), ids);
  zt te = embed(b, "token_type_embeddings",
                zb_param(b, "token_type_embeddings.weight", ZS(2, H)), types);
  zt pe;
  if (pos_embed(b, "embeddings.position_ids", "position_embeddings.weight", "position_embeddings", S, P, H,
                &pe))
    return;
  zt x = zb_binary(b, "Add", "add_type", we, te);
  x = zb_binary(b, "Add", "add_position", x, pe);
  x = zb_layernorm(b, "LayerNorm", x, 1e-12);
  zb_scope(b, "%s", "extended_mask");
  zt m = zb_reshape(b, "reshape", am, ZS(B, 1, 1, S));
  m = zb_binary(b, "Sub", "invert", zb_scalar(b, 1.0f), m);
  m = zb_binary(b, "Mul", "scale", m, zb_scalar(b, -10000.0f));
  static const attn_names bert_attn = {"attention.self.query", "attention.self.key", "attention.self.value",
                                       "attention.self", "attention.output.dense"};
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "encoder.layer.%lld", (long long)l);
    zt a = attn_sublayer(b, &bert_attn, x, x, H, nh, m);
    x = add_norm(b, "attention.output.residual", "attention.output.LayerNorm", a, x, 1e-12);
    zt f = mlp(b, "intermediate.dense", "intermediate.gelu", zb_gelu_erf, "output.dense", x, I, H);
    x = add_norm(b, "output.residual", "output.LayerNorm", f, x, 1e-12);
  }
  zb_output(b, x);
  zb_scope(b, "%s", "pooler");
  zt first = zb_op(b, "Gather", "first_token", ZS(B, H), 2, x.id, zb_int_scalar(b, 0).id);
  zb_ai(b, "axis", 1);
  zt pooled = zb_linear(b, "dense", first, H, 1);
  pooled = zb_unary(b, "Tanh", "tanh", pooled);
  zb_output(b, pooled);
}

const zoo_entry zoo_bert = {
    {"bert",
     "BERT encoder (BERT-base by default; HF/ONNX-export layout with erf GELU, extended "
     "attention mask and pooler): the BERT of HDP/REGAL-style studies",
     ZOO_KNOBS(bert_knobs)},
    build_bert};

/* ==== GPT-2 ================================================================================== */

static const gopt_zoo_knob gpt2_knobs[] = {
    {"layers", 12, 1, 1000000, "decoder layers"},
    {"d_model", 768, 1, 65536, "model width"},
    {"heads", 12, 1, 1024, "attention heads (must divide d_model)"},
    {"seq", 1024, 1, 1000000, "sequence length"},
    {"batch", 1, 1, 65536, "batch size"},
    {"vocab", 50257, 2, 10000000, "vocabulary size"},
};

static void build_gpt2(zb *b) {
  int64_t L = zb_knob(b, "layers"), d = zb_knob(b, "d_model"), nh = zb_knob(b, "heads");
  int64_t S = zb_knob(b, "seq"), B = zb_knob(b, "batch"), V = zb_knob(b, "vocab");
  int64_t P = S > 1024 ? S : 1024;
  if (check_heads(b, "d_model", d, nh)) return;
  zt ids = zb_input(b, "input_ids", GOPT_DT_INT64, ZS(B, S));
  zb_scope(b, "%s", "");
  zt wte = zb_param(b, "wte.weight", ZS(V, d));
  zt x = embed(b, "wte", wte, ids);
  zt pe;
  if (pos_embed(b, "position_ids", "wpe.weight", "wpe", S, P, d, &pe)) return;
  x = zb_binary(b, "Add", "embed", x, pe);
  zt mask = zb_causal_mask(b, S, S);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zt qkv[3];
    zb_scope(b, "h.%lld", (long long)l);
    zt a = zb_layernorm(b, "ln_1", x, 1e-5);
    a = zb_linear(b, "attn.c_attn", a, 3 * d, 1);
    zb_split(b, "attn.split_qkv", a, 2, 3, qkv);
    a = zb_attention(b, "attn", qkv[0], qkv[1], qkv[2], nh, mask);
    a = zb_linear(b, "attn.c_proj", a, d, 1);
    x = zb_binary(b, "Add", "attn.residual", x, a);
    zt f = zb_layernorm(b, "ln_2", x, 1e-5);
    f = mlp(b, "mlp.c_fc", "mlp.gelu", zb_gelu_tanh, "mlp.c_proj", f, 4 * d, d);
    x = zb_binary(b, "Add", "mlp.residual", x, f);
  }
  zb_scope(b, "%s", "");
  x = zb_layernorm(b, "ln_f", x, 1e-5);
  zt wt = ZTRANS("lm_head.weight_t", wte, 1, 0);
  zb_output(b, zb_matmul(b, "lm_head", x, wt));
}

const zoo_entry zoo_gpt2 = {
    {"gpt2",
     "GPT-2 decoder (124M 'small' by default; pre-LN, fused QKV + Split, causal mask, tanh "
     "GELU, LM head tied to the token embedding)",
     ZOO_KNOBS(gpt2_knobs)},
    build_gpt2};
