/* zoo_tensat.c: the benchmark models of TASO (Jia et al., SOSP 2019) and Tensat (Yang et al.,
 * MLSys 2021) that the rest of the zoo lacks: SqueezeNet 1.1 and VGG-19 (torchvision layouts, or
 * Tensat's bias-free graphs with tensat=1), NasNet-A and NasRNN (TASO's examples/nasnet_a.py and
 * nasrnn.py, as Tensat's nasneta.rs/nasrnn.rs build them) and Tensat's BERT (bert.rs: 64x1024,
 * 8 layers, 16 heads). ResNeXt-50 and Inception-v3 live in zoo_cnn.c (their tensat=1 knobs). */
#include <stdio.h>
#include <string.h>

#include "zoo/zoo_internal.h"

#define FMT(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* Conv (with torchvision's bias unless tensat) -> Relu, nodes "<name>" and "<name>.relu". */
static zt conv_relu(zb *b, const char *name, zt x, int64_t cout, int k, int s, int p, int tensat) {
  char r[128];
  zt y = tensat ? zb_conv2d(b, name, x, cout, k, k, s, s, p, p, p, p, 1)
                : zb_conv2d_bias(b, name, x, cout, k, s, p);
  return zb_unary(b, "Relu", FMT(r, "%s.relu", name), y);
}

/* ==== SqueezeNet 1.1 ========================================================================= */

static const gopt_zoo_knob squeezenet_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"tensat", 0, 0, 1, "1: Tensat's SqueezeNet graph (the same network without conv biases)"},
};

/* Fire module: squeeze 1x1, then expand 1x1 and 3x3 concatenated (torchvision's names). */
static zt fire(zb *b, int idx, zt x, int64_t sq, int64_t e1, int64_t e3, int tensat) {
  zb_scope(b, "features.%d", idx);
  zt s = conv_relu(b, "squeeze", x, sq, 1, 1, 0, tensat), br[2];
  br[0] = conv_relu(b, "expand1x1", s, e1, 1, 1, 0, tensat);
  br[1] = conv_relu(b, "expand3x3", s, e3, 3, 1, 1, tensat);
  return zb_concat(b, "concat", 1, 2, br);
}

/* torchvision squeezenet1_1 at 224x224 (its ceil-mode max pools give the floor sizes there). */
static void build_squeezenet(zb *b) {
  int tensat = (int)zb_knob(b, "tensat");
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(zb_knob(b, "batch"), 3, 224, 224));
  zb_scope(b, "%s", "");
  x = conv_relu(b, "features.0", x, 64, 3, 2, 0, tensat);
  x = zb_pool2d(b, "MaxPool", "features.2", x, 3, 2, 0, 0, 0, 0, 0);
  x = fire(b, 3, x, 16, 64, 64, tensat);
  x = fire(b, 4, x, 16, 64, 64, tensat);
  zb_scope(b, "%s", "");
  x = zb_pool2d(b, "MaxPool", "features.5", x, 3, 2, 0, 0, 0, 0, 0);
  x = fire(b, 6, x, 32, 128, 128, tensat);
  x = fire(b, 7, x, 32, 128, 128, tensat);
  zb_scope(b, "%s", "");
  x = zb_pool2d(b, "MaxPool", "features.8", x, 3, 2, 0, 0, 0, 0, 0);
  x = fire(b, 9, x, 48, 192, 192, tensat);
  x = fire(b, 10, x, 48, 192, 192, tensat);
  x = fire(b, 11, x, 64, 256, 256, tensat);
  x = fire(b, 12, x, 64, 256, 256, tensat);
  zb_scope(b, "%s", "");
  x = conv_relu(b, "classifier.1", x, 1000, 1, 1, 0, tensat);
  x = zb_op(b, "GlobalAveragePool", "classifier.3", ZS(x.d[0], x.d[1], 1, 1), 1, x.id);
  x = zb_op(b, "Flatten", "flatten", ZS(x.d[0], x.d[1]), 1, x.id);
  zb_ai(b, "axis", 1);
  zb_output(b, x);
}

const zoo_entry zoo_squeezenet = {
    {"squeezenet",
     "SqueezeNet 1.1 (torchvision layout, 224x224): Tensat's SqueezeNet benchmark (tensat=1: "
     "without conv biases)",
     ZOO_KNOBS(squeezenet_knobs)},
    build_squeezenet};

/* ==== VGG-19 ================================================================================= */

static const gopt_zoo_knob vgg_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"tensat", 0, 0, 1, "1: Tensat's VGG-19 graph (the same network without biases)"},
};

/* torchvision vgg19 (configuration E) at 224x224: its adaptive 7x7 average pool is the identity
 * there and is left out, as is dropout (inference). */
static void build_vgg19(zb *b) {
  static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0,
                            512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
  int tensat = (int)zb_knob(b, "tensat");
  char n[64];
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(zb_knob(b, "batch"), 3, 224, 224));
  zb_scope(b, "%s", "");
  int idx = 0;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    if (cfg[i]) {
      x = conv_relu(b, FMT(n, "features.%d", idx), x, cfg[i], 3, 1, 1, tensat);
      idx += 2;
    } else {
      x = zb_pool2d(b, "MaxPool", FMT(n, "features.%d", idx), x, 2, 2, 0, 0, 0, 0, 0);
      idx++;
    }
  }
  x = zb_op(b, "Flatten", "flatten", ZS(x.d[0], x.d[1] * x.d[2] * x.d[3]), 1, x.id);
  zb_ai(b, "axis", 1);
  static const int64_t fc[3] = {4096, 4096, 1000};
  for (int i = 0; i < 3; i++) {
    zt w = zb_param(b, FMT(n, "classifier.%d.weight", 3 * i), ZS(fc[i], x.d[1]));
    zt bias = tensat ? w : zb_param(b, FMT(n, "classifier.%d.bias", 3 * i), ZS(fc[i]));
    x = zb_op(b, "Gemm", FMT(n, "classifier.%d", 3 * i), ZS(x.d[0], fc[i]), tensat ? 2 : 3, x.id,
              w.id, bias.id);
    zb_ai(b, "transB", 1);
    if (i < 2) x = zb_unary(b, "Relu", FMT(n, "classifier.%d", 3 * i + 1), x);
  }
  zb_output(b, x);
}

const zoo_entry zoo_vgg19 = {
    {"vgg19",
     "VGG-19 (torchvision layout, 224x224): Tensat's VGG-19 benchmark (tensat=1: without "
     "biases)",
     ZOO_KNOBS(vgg_knobs)},
    build_vgg19};

/* ==== NasNet-A (TASO/Tensat) ================================================================= */

static const gopt_zoo_knob nasnet_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"cells", 5, 1, 100000, "normal cells per stage (3 stages, each followed by a reduction cell)"},
    {"filters", 128, 1, 65536, "cell filters of the first stage (doubled at each reduction)"},
};

/* 1x1 conv + Relu ("squeeze" in TASO's builder). */
static zt nas_squeeze(zb *b, const char *name, zt x, int64_t oc) {
  char r[96];
  x = zb_conv_same(b, name, x, oc, 1, 1, 1, 1);
  return zb_unary(b, "Relu", FMT(r, "%s.relu", name), x);
}

/* TASO's seperable_conv: a grouped kxk conv (weight [oc, C/oc, k, k]) then a 1x1 conv, no
 * activation. */
static zt nas_sep(zb *b, const char *name, zt x, int64_t oc, int k, int s) {
  char n[96];
  if (x.d[1] % oc) {
    zb_fail(b, GOPT_EINVAL, "%s: %lld channels not a multiple of %lld", name, (long long)x.d[1],
            (long long)oc);
    return x;
  }
  x = zb_conv_same(b, FMT(n, "%s.depthwise", name), x, oc, k, k, s, oc);
  return zb_conv_same(b, FMT(n, "%s.pointwise", name), x, oc, 1, 1, 1, 1);
}

static zt nas_pool(zb *b, const char *type, const char *name, zt x, int s) {
  int pt, pb, pl, pr;
  zb_same_pads(x.d[2], 3, s, &pt, &pb);
  zb_same_pads(x.d[3], 3, s, &pl, &pr);
  return zb_pool2d(b, type, name, x, 3, s, pt, pl, pb, pr, 0);
}

/* prev brought to cur's size: 1x1 conv + Relu, or 3x3/2 conv + Relu when the spatial size differs
 * (TASO's fit). */
static zt nas_fit(zb *b, zt cur, zt prev) {
  if (prev.d[2] == cur.d[2]) return nas_squeeze(b, "fit", prev, cur.d[1]);
  zt y = zb_conv_same(b, "fit", prev, cur.d[1], 3, 3, 2, 1);
  return zb_unary(b, "Relu", "fit.relu", y);
}

static zt nas_normal(zb *b, zt prev, zt cur, int64_t oc) {
  cur = nas_squeeze(b, "squeeze", cur, oc);
  prev = nas_fit(b, cur, prev);
  zt t[10], o[5];
  t[0] = nas_sep(b, "sep0", cur, oc, 3, 1);
  t[1] = cur;
  t[2] = nas_sep(b, "sep2", prev, oc, 3, 1);
  t[3] = nas_sep(b, "sep3", cur, oc, 3, 1);
  t[4] = nas_pool(b, "AveragePool", "avg4", cur, 1);
  t[5] = prev;
  t[6] = nas_pool(b, "AveragePool", "avg6", prev, 1);
  t[7] = nas_pool(b, "AveragePool", "avg7", prev, 1);
  t[8] = nas_sep(b, "sep8", prev, oc, 3, 1);
  t[9] = nas_sep(b, "sep9", prev, oc, 3, 1);
  char n[32];
  for (int i = 0; i < 5; i++) o[i] = zb_binary(b, "Add", FMT(n, "add%d", i), t[2 * i], t[2 * i + 1]);
  return zb_concat(b, "concat", 1, 5, o);
}

static zt nas_reduction(zb *b, zt prev, zt cur, int64_t oc) {
  cur = nas_squeeze(b, "squeeze", cur, oc);
  prev = nas_fit(b, cur, prev);
  zt o[5];
  o[0] = zb_binary(b, "Add", "add0", nas_sep(b, "sep0", prev, oc, 7, 2),
                   nas_sep(b, "sep1", cur, oc, 5, 2));
  o[1] = zb_binary(b, "Add", "add1", nas_pool(b, "MaxPool", "max2", cur, 2),
                   nas_sep(b, "sep3", prev, oc, 7, 2));
  o[2] = zb_binary(b, "Add", "add2", nas_pool(b, "AveragePool", "avg4", cur, 2),
                   nas_sep(b, "sep5", prev, oc, 5, 2));
  o[3] = zb_binary(b, "Add", "add3", nas_pool(b, "MaxPool", "max6", cur, 2),
                   nas_sep(b, "sep7", o[0], oc, 3, 1));
  o[4] = zb_binary(b, "Add", "add4", nas_pool(b, "AveragePool", "avg8", o[0], 1), o[1]);
  return zb_concat(b, "concat", 1, 5, o);
}

/* Tensat's nasneta.rs (TASO's nasnet_a.py with its 224x224 stem): conv 7x7/2 + Relu, max pool
 * 3x3/2, then 3 x (cells normal cells + a reduction cell at twice the filters). */
static void build_nasnet_a(zb *b) {
  int64_t cells = zb_knob(b, "cells"), oc = zb_knob(b, "filters");
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(zb_knob(b, "batch"), 3, 224, 224));
  zb_scope(b, "%s", "stem");
  x = zb_conv_same(b, "conv", x, 64, 7, 7, 2, 1);
  x = zb_unary(b, "Relu", "relu", x);
  x = nas_pool(b, "MaxPool", "maxpool", x, 2);
  for (int st = 0; st < 3 && zb_ok(b); st++) {
    zt prev = x, cur = x;
    for (int64_t j = 0; j < cells && zb_ok(b); j++) {
      zb_scope(b, "stage%d.normal%lld", st, (long long)j);
      zt t = nas_normal(b, prev, cur, oc);
      prev = cur;
      cur = t;
    }
    oc *= 2;
    zb_scope(b, "stage%d.reduction", st);
    x = nas_reduction(b, prev, cur, oc);
  }
  zb_output(b, x);
}

const zoo_entry zoo_nasnet_a = {
    {"nasnet_a",
     "NasNet-A as TASO/Tensat benchmark it (5 normal cells + 1 reduction cell per stage, 3 "
     "stages; grouped and 1x1 convs, pools, adds; no BN)",
     ZOO_KNOBS(nasnet_knobs)},
    build_nasnet_a};

/* ==== NasRNN (TASO/Tensat) =================================================================== */

static const gopt_zoo_knob nasrnn_knobs[] = {
    {"steps", 5, 1, 100000, "unrolled time steps"},
    {"hidden", 512, 1, 65536, "hidden size"},
    {"batch", 1, 1, 65536, "batch size"},
};

/* One of the cell's 8 combinations: x*W1 + h*W2 (weights of their own). */
static zt nasrnn_combine(zb *b, int i, zt x, zt h) {
  char n[64], m[64];
  zt w1 = zb_param(b, FMT(n, "w%d_x", i), ZS(x.d[1], x.d[1]));
  zt w2 = zb_param(b, FMT(n, "w%d_h", i), ZS(h.d[1], h.d[1]));
  zt a = zb_matmul(b, FMT(n, "c%d.x", i), x, w1);
  zt c = zb_matmul(b, FMT(m, "c%d.h", i), h, w2);
  return zb_binary(b, "Add", FMT(n, "c%d", i), a, c);
}

/* Tensat's nasrnn.rs / TASO's nasrnn.py: the NAS recurrent cell (8 combinations, then a tree of
 * Relu/Sigmoid/Tanh and Add/Mul), unrolled over `steps` inputs from a learned initial state. */
static void build_nasrnn(zb *b) {
  int64_t steps = zb_knob(b, "steps"), H = zb_knob(b, "hidden"), B = zb_knob(b, "batch");
  char n[64];
  zb_scope(b, "%s", "");
  zt h = zb_param(b, "state0", ZS(B, H));
  for (int64_t s = 0; s < steps && zb_ok(b); s++) {
    zt x = zb_input(b, FMT(n, "x%lld", (long long)s), GOPT_DT_FLOAT, ZS(B, H));
    zb_scope(b, "step%lld", (long long)s);
    zt t[8], m[7];
    for (int i = 0; i < 8; i++) t[i] = nasrnn_combine(b, i, x, h);
#define U(op, nm, v) zb_unary(b, op, nm, v)
    m[0] = zb_binary(b, "Add", "m0", U("Relu", "r0", t[0]), U("Sigmoid", "s3", t[3]));
    m[1] = zb_binary(b, "Add", "m1", U("Sigmoid", "s1", t[1]), U("Tanh", "t2", t[2]));
    m[2] = zb_binary(b, "Mul", "m2", U("Sigmoid", "s4", t[4]), U("Tanh", "t5", t[5]));
    m[3] = zb_binary(b, "Mul", "m3", U("Sigmoid", "s6", t[6]), U("Relu", "r7", t[7]));
    m[4] = zb_binary(b, "Add", "m4", U("Sigmoid", "sm1", m[1]), U("Tanh", "tm2", m[2]));
    m[5] = zb_binary(b, "Mul", "m5", U("Tanh", "tm0", m[0]), U("Tanh", "tm3", m[3]));
    m[6] = zb_binary(b, "Mul", "m6", U("Tanh", "tm4", m[4]), U("Tanh", "tm5", m[5]));
    h = U("Tanh", "state", m[6]);
#undef U
  }
  zb_output(b, h);
}

const zoo_entry zoo_nasrnn = {
    {"nasrnn",
     "NasRNN as TASO/Tensat benchmark it: the NAS recurrent cell unrolled over 5 steps, hidden "
     "512 (8 MatMul pairs per step)",
     ZOO_KNOBS(nasrnn_knobs)},
    build_nasrnn};

/* ==== BERT as Tensat builds it ================================================================ */

static const gopt_zoo_knob bert_tensat_knobs[] = {
    {"layers", 8, 1, 100000, "attention layers"},
};

/* Tensat's bert.rs (TASO's examples/bert.py): input [64, 1024] -> Relu, then per layer Q/K/V
 * MatMuls, Reshape [64,16,64], Transpose (1,0,2), MatMul(q, k) (no transpose of k, no softmax),
 * MatMul(., v), Transpose back, Reshape [64,1024] -- every layer's result is a graph output --
 * while the next layer's input is MatMul(layer input, W_linear), exactly as the builder has it. */
static void build_bert_tensat(zb *b) {
  int64_t L = zb_knob(b, "layers");
  char n[64];
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(64, 1024));
  zb_scope(b, "%s", "");
  x = zb_unary(b, "Relu", "relu", x);
  for (int64_t l = 0; l < L && zb_ok(b); l++) {
    zb_scope(b, "layer%lld", (long long)l);
    zt qkv[3];
    static const char *nm[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
      qkv[i] = zb_linear(b, nm[i], x, 1024, 0);
      qkv[i] = zb_reshape(b, FMT(n, "%s.reshape", nm[i]), qkv[i], ZS(64, 16, 64));
      qkv[i] = ZTRANS(FMT(n, "%s.transpose", nm[i]), qkv[i], 1, 0, 2);
    }
    zt lg = zb_matmul(b, "logits", qkv[0], qkv[1]);
    zt o = zb_matmul(b, "context", lg, qkv[2]);
    o = ZTRANS("context.transpose", o, 1, 0, 2);
    zb_output(b, zb_reshape(b, "output", o, ZS(64, 1024)));
    x = zb_linear(b, "linear", x, 1024, 0);
  }
  zb_output(b, x);
}

const zoo_entry zoo_bert_tensat = {
    {"bert_tensat",
     "BERT as Tensat benchmarks it (bert.rs: 64x1024, 8 layers, 16 heads; attention without "
     "softmax or FFN)",
     ZOO_KNOBS(bert_tensat_knobs)},
    build_bert_tensat};
