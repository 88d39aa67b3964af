/* zoo_cnn.c: convolutional models of the zoo: ResNet (torchvision v1.5 layout), Inception-v3
 * (torchvision layout, no auxiliary head), AmoebaNet-A (NASNet-style cells, TF/TPU layout) and
 * WaveNet (dilated causal 1-D convolution stacks). */
#include <stdio.h>
#include <string.h>

#include "zoo/zoo_internal.h"

/* Name helper: formats into a caller buffer and returns it. */
#define FMT(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* Head shared by the image models: GlobalAveragePool -> Flatten -> Gemm(fc). */
static zt classifier(zb *b, zt x, int64_t classes) {
  zb_scope(b, "%s", "");
  zt p = zb_op(b, "GlobalAveragePool", "avgpool", ZS(x.d[0], x.d[1], 1, 1), 1, x.id);
  zt f = zb_op(b, "Flatten", "flatten", ZS(x.d[0], x.d[1]), 1, p.id);
  zb_ai(b, "axis", 1);
  zt w = zb_param(b, "fc.weight", ZS(classes, x.d[1]));
  zt bias = zb_param(b, "fc.bias", ZS(classes));
  zt y = zb_op(b, "Gemm", "fc", ZS(x.d[0], classes), 3, f.id, w.id, bias.id);
  zb_ai(b, "transB", 1);
  zb_output(b, y);
  return y;
}

/* ==== ResNet ================================================================================ */

static const gopt_zoo_knob resnet_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"image", 224, 32, 8192, "input height and width"},
    {"depth", 50, 18, 3000002,
     "18 or 34 (basic blocks); 50, 101, 152, 200 or any 3n+2 >= 50 (bottleneck blocks; blocks "
     "beyond ResNet-50's go to stage 3 as in ResNet-101)"},
    {"classes", 1000, 1, 100000, "classifier outputs"},
};

/* conv -> BN (-> Relu when relu_name) under the current scope; with `tensat` the BN is left out
 * (TASO/Tensat's graphs have none). */
static zt conv_bn(zb *b, const char *conv, const char *bn, const char *relu, zt x, int64_t cout,
                  int k, int s, int64_t group, int tensat) {
  int p = k / 2;
  zt y = zb_conv2d(b, conv, x, cout, k, k, s, s, p, p, p, p, group);
  if (!tensat) y = zb_bn(b, bn, y, 1e-5);
  return relu ? zb_unary(b, "Relu", relu, y) : y;
}

/* ResNet / ResNeXt body (torchvision layout): bottleneck width = planes * wpg / 64 * groups.
 * tensat=1 builds TASO/Tensat's ResNeXt-50 instead: no BN, a Relu after the downsample conv, no
 * classifier. */
static void resnet_net(zb *b, int64_t depth, int64_t groups, int64_t wpg, int tensat) {
  int64_t B = zb_knob(b, "batch"), img = zb_knob(b, "image");
  int64_t blocks[4] = {3, 4, 6, 3};
  int bottleneck = 1;
  if (depth == 18 || depth == 34) {
    bottleneck = 0;
    if (depth == 18) {
      for (int i = 0; i < 4; i++) blocks[i] = 2;
    }
  } else if (depth == 152) {
    blocks[1] = 8;
    blocks[2] = 36;
  } else if (depth == 200) {
    blocks[1] = 24;
    blocks[2] = 36;
  } else if (depth >= 50 && (depth - 2) % 3 == 0) {
    blocks[2] = (depth - 2) / 3 - 10;
  } else {
    zb_fail(b, GOPT_EINVAL,
            "knob 'depth' must be 18, 34, or 3n+2 >= 50 (50, 101, 152, 200, ...), got %lld",
            (long long)depth);
    return;
  }
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(B, 3, img, img));
  zb_scope(b, "%s", "");
  x = conv_bn(b, "conv1", "bn1", "relu", x, 64, 7, 2, 1, tensat);
  x = zb_pool2d(b, "MaxPool", "maxpool", x, 3, 2, 1, 1, 1, 1, 0);
  for (int st = 0; st < 4; st++) {
    int64_t planes = 64 << st, width = planes * wpg / 64 * groups;
    int64_t out = bottleneck ? planes * 4 : planes;
    for (int64_t i = 0; i < blocks[st] && zb_ok(b); i++) {
      int s = (st > 0 && i == 0) ? 2 : 1;
      zb_scope(b, "layer%d.%lld", st + 1, (long long)i);
      zt id = x, y;
      if (bottleneck) {
        y = conv_bn(b, "conv1", "bn1", "relu1", x, width, 1, 1, 1, tensat);
        y = conv_bn(b, "conv2", "bn2", "relu2", y, width, 3, s, groups, tensat);
        y = conv_bn(b, "conv3", "bn3", NULL, y, out, 1, 1, 1, tensat);
      } else {
        y = conv_bn(b, "conv1", "bn1", "relu1", x, width, 3, s, 1, tensat);
        y = conv_bn(b, "conv2", "bn2", NULL, y, out, 3, 1, 1, tensat);
      }
      if (s != 1 || x.d[1] != out)
        id = conv_bn(b, "downsample.0", "downsample.1", tensat ? "downsample.relu" : NULL, x, out,
                     1, s, 1, tensat);
      y = zb_binary(b, "Add", "add", y, id);
      x = zb_unary(b, "Relu", "relu_out", y);
    }
  }
  if (tensat) zb_output(b, x);
  else classifier(b, x, zb_knob(b, "classes"));
}

static void build_resnet(zb *b) { resnet_net(b, zb_knob(b, "depth"), 1, 64, 0); }

static const gopt_zoo_knob resnext_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"image", 224, 32, 8192, "input height and width"},
    {"classes", 1000, 1, 100000, "classifier outputs"},
    {"tensat", 0, 0, 1,
     "1: TASO/Tensat's ResNeXt-50 benchmark graph (Conv+Relu without BN, Relu after the "
     "downsample conv, no classifier)"},
};

static void build_resnext50(zb *b) { resnet_net(b, 50, 32, 4, (int)zb_knob(b, "tensat")); }

const zoo_entry zoo_resnext50 = {
    {"resnext50",
     "ResNeXt-50 32x4d (torchvision layout, BN as separate ops; tensat=1: TASO/Tensat's "
     "benchmark graph)",
     ZOO_KNOBS(resnext_knobs)},
    build_resnext50};

const zoo_entry zoo_resnet50 = {
    {"resnet50",
     "ResNet (torchvision v1.5 layout; ResNet-50 by default, BN kept as separate ops), the "
     "image-classification baseline of placement/fusion studies",
     ZOO_KNOBS(resnet_knobs)},
    build_resnet};

/* ==== Inception-v3 ========================================================================== */

static const gopt_zoo_knob inception_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"image", 299, 75, 8192, "input height and width"},
    {"repeat", 1, 1, 100000,
     "repeats the Inception-A/C/E module groups (3, 4 and 2 modules each) this many times"},
    {"classes", 1000, 1, 100000, "classifier outputs"},
    {"tensat", 0, 0, 1,
     "1: TASO/Tensat's Inception-v3 benchmark graph (Conv+Relu without BN, ends at the global "
     "average pool, no classifier)"},
};

/* BasicConv2d: conv (no bias) -> BN(eps 1e-3) -> Relu, nodes "<name>.conv/.bn/.relu"; without
 * the BN under tensat=1 (TASO's conv2d with activation RELU). */
static zt bconv(zb *b, const char *name, zt x, int64_t cout, int kh, int kw, int s, int ph,
                int pw) {
  char c[128], n[128], r[128];
  zt y = zb_conv2d(b, FMT(c, "%s.conv", name), x, cout, kh, kw, s, s, ph, pw, ph, pw, 1);
  if (!zb_knob(b, "tensat")) y = zb_bn(b, FMT(n, "%s.bn", name), y, 1e-3);
  return zb_unary(b, "Relu", FMT(r, "%s.relu", name), y);
}

static zt avgpool3(zb *b, zt x) {
  return zb_pool2d(b, "AveragePool", "avg_pool", x, 3, 1, 1, 1, 1, 1, 1);
}

static zt inception_a(zb *b, zt x, int64_t pf) {
  zt br[4];
  br[0] = bconv(b, "branch1x1", x, 64, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch5x5_1", x, 48, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch5x5_2", br[1], 64, 5, 5, 1, 2, 2);
  br[2] = bconv(b, "branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0);
  br[2] = bconv(b, "branch3x3dbl_2", br[2], 96, 3, 3, 1, 1, 1);
  br[2] = bconv(b, "branch3x3dbl_3", br[2], 96, 3, 3, 1, 1, 1);
  br[3] = bconv(b, "branch_pool", avgpool3(b, x), pf, 1, 1, 1, 0, 0);
  return zb_concat(b, "concat", 1, 4, br);
}

static zt inception_b(zb *b, zt x) {
  zt br[3];
  br[0] = bconv(b, "branch3x3", x, 384, 3, 3, 2, 0, 0);
  br[1] = bconv(b, "branch3x3dbl_1", x, 64, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch3x3dbl_2", br[1], 96, 3, 3, 1, 1, 1);
  br[1] = bconv(b, "branch3x3dbl_3", br[1], 96, 3, 3, 2, 0, 0);
  br[2] = zb_pool2d(b, "MaxPool", "max_pool", x, 3, 2, 0, 0, 0, 0, 0);
  return zb_concat(b, "concat", 1, 3, br);
}

static zt inception_c(zb *b, zt x, int64_t c7) {
  zt br[4];
  br[0] = bconv(b, "branch1x1", x, 192, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch7x7_1", x, c7, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch7x7_2", br[1], c7, 1, 7, 1, 0, 3);
  br[1] = bconv(b, "branch7x7_3", br[1], 192, 7, 1, 1, 3, 0);
  br[2] = bconv(b, "branch7x7dbl_1", x, c7, 1, 1, 1, 0, 0);
  br[2] = bconv(b, "branch7x7dbl_2", br[2], c7, 7, 1, 1, 3, 0);
  br[2] = bconv(b, "branch7x7dbl_3", br[2], c7, 1, 7, 1, 0, 3);
  br[2] = bconv(b, "branch7x7dbl_4", br[2], c7, 7, 1, 1, 3, 0);
  br[2] = bconv(b, "branch7x7dbl_5", br[2], 192, 1, 7, 1, 0, 3);
  br[3] = bconv(b, "branch_pool", avgpool3(b, x), 192, 1, 1, 1, 0, 0);
  return zb_concat(b, "concat", 1, 4, br);
}

static zt inception_d(zb *b, zt x) {
  zt br[3];
  br[0] = bconv(b, "branch3x3_1", x, 192, 1, 1, 1, 0, 0);
  br[0] = bconv(b, "branch3x3_2", br[0], 320, 3, 3, 2, 0, 0);
  br[1] = bconv(b, "branch7x7x3_1", x, 192, 1, 1, 1, 0, 0);
  br[1] = bconv(b, "branch7x7x3_2", br[1], 192, 1, 7, 1, 0, 3);
  br[1] = bconv(b, "branch7x7x3_3", br[1], 192, 7, 1, 1, 3, 0);
  br[1] = bconv(b, "branch7x7x3_4", br[1], 192, 3, 3, 2, 0, 0);
  br[2] = zb_pool2d(b, "MaxPool", "max_pool", x, 3, 2, 0, 0, 0, 0, 0);
  return zb_concat(b, "concat", 1, 3, br);
}

static zt inception_e(zb *b, zt x) {
  zt br[4], t[2];
  br[0] = bconv(b, "branch1x1", x, 320, 1, 1, 1, 0, 0);
  zt a = bconv(b, "branch3x3_1", x, 384, 1, 1, 1, 0, 0);
  t[0] = bconv(b, "branch3x3_2a", a, 384, 1, 3, 1, 0, 1);
  t[1] = bconv(b, "branch3x3_2b", a, 384, 3, 1, 1, 1, 0);
  br[1] = zb_concat(b, "branch3x3.concat", 1, 2, t);
  a = bconv(b, "branch3x3dbl_1", x, 448, 1, 1, 1, 0, 0);
  a = bconv(b, "branch3x3dbl_2", a, 384, 3, 3, 1, 1, 1);
  t[0] = bconv(b, "branch3x3dbl_3a", a, 384, 1, 3, 1, 0, 1);
  t[1] = bconv(b, "branch3x3dbl_3b", a, 384, 3, 1, 1, 1, 0);
  br[2] = zb_concat(b, "branch3x3dbl.concat", 1, 2, t);
  br[3] = bconv(b, "branch_pool", avgpool3(b, x), 192, 1, 1, 1, 0, 0);
  return zb_concat(b, "concat", 1, 4, br);
}

/* Module name: torchvision's ("Mixed_5b") at repeat 1, "Mixed_5.<i>" otherwise. */
static void module_scope(zb *b, int stage, int64_t i, int64_t repeat, char first) {
  if (repeat == 1) zb_scope(b, "Mixed_%d%c", stage, (char)(first + i));
  else zb_scope(b, "Mixed_%d.%lld", stage, (long long)i);
}

static void build_inception_v3(zb *b) {
  int64_t B = zb_knob(b, "batch"), img = zb_knob(b, "image"), r = zb_knob(b, "repeat");
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(B, 3, img, img));
  zb_scope(b, "%s", "");
  x = bconv(b, "Conv2d_1a_3x3", x, 32, 3, 3, 2, 0, 0);
  x = bconv(b, "Conv2d_2a_3x3", x, 32, 3, 3, 1, 0, 0);
  x = bconv(b, "Conv2d_2b_3x3", x, 64, 3, 3, 1, 1, 1);
  x = zb_pool2d(b, "MaxPool", "maxpool1", x, 3, 2, 0, 0, 0, 0, 0);
  x = bconv(b, "Conv2d_3b_1x1", x, 80, 1, 1, 1, 0, 0);
  x = bconv(b, "Conv2d_4a_3x3", x, 192, 3, 3, 1, 0, 0);
  x = zb_pool2d(b, "MaxPool", "maxpool2", x, 3, 2, 0, 0, 0, 0, 0);
  for (int64_t i = 0; i < 3 * r && zb_ok(b); i++) {
    module_scope(b, 5, i, r, 'b');
    x = inception_a(b, x, i == 0 ? 32 : 64);
  }
  zb_scope(b, "%s", r == 1 ? "Mixed_6a" : "Mixed_6.reduce");
  x = inception_b(b, x);
  for (int64_t i = 0; i < 4 * r && zb_ok(b); i++) {
    module_scope(b, 6, i, r, 'b');
    x = inception_c(b, x, i == 0 ? 128 : i == 4 * r - 1 ? 192 : 160);
  }
  zb_scope(b, "%s", r == 1 ? "Mixed_7a" : "Mixed_7.reduce");
  x = inception_d(b, x);
  for (int64_t i = 0; i < 2 * r && zb_ok(b); i++) {
    module_scope(b, 7, i, r, 'b');
    x = inception_e(b, x);
  }
  if (zb_knob(b, "tensat")) {
    zb_scope(b, "%s", "");
    zb_output(b, zb_op(b, "GlobalAveragePool", "avgpool", ZS(x.d[0], x.d[1], 1, 1), 1, x.id));
    return;
  }
  classifier(b, x, zb_knob(b, "classes"));
}

const zoo_entry zoo_inception_v3 = {
    {"inception_v3",
     "Inception-v3 (torchvision layout, no auxiliary head): GO/HDP/REGAL's image benchmark",
     ZOO_KNOBS(inception_knobs)},
    build_inception_v3};

/* ==== AmoebaNet-A ============================================================================ */

static const gopt_zoo_knob amoeba_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"image", 331, 32, 8192, "input height and width"},
    {"cells", 6, 1, 1000000, "normal cells per stack (N; 3 stacks)"},
    {"filters", 190, 2, 65536, "filters of the first stack (F; doubled at each reduction)"},
    {"classes", 1000, 1, 100000, "classifier outputs"},
};

enum { OP_NONE, OP_AVG3, OP_MAX3, OP_SEP3, OP_SEP5, OP_SEP7, OP_C1771 };
/* AmoebaNet-A genotype (Real et al. 2019; TF TPU amoeba_net): pairs of (hidden state, op) whose
 * results are added; state 0 is the cell's input after its 1x1 base conv, 1 the previous one. */
static const int amoeba_normal[10][2] = {{0, OP_AVG3}, {0, OP_MAX3}, {1, OP_SEP3}, {1, OP_NONE},
                                         {0, OP_NONE}, {1, OP_AVG3}, {0, OP_SEP3}, {2, OP_SEP5},
                                         {5, OP_AVG3}, {0, OP_SEP3}};
static const int amoeba_normal_concat[] = {1, 3, 4, 6};
static const int amoeba_reduce[10][2] = {{1, OP_SEP3}, {0, OP_AVG3}, {0, OP_MAX3}, {2, OP_SEP7},
                                         {1, OP_MAX3}, {0, OP_MAX3}, {4, OP_SEP3}, {0, OP_C1771},
                                         {1, OP_AVG3}, {0, OP_SEP7}};
static const int amoeba_reduce_concat[] = {2, 3, 4, 5, 6};

/* One cell operation on x (F channels) under node prefix p. */
static zt amoeba_op(zb *b, const char *p, int op, zt x, int s, int64_t F) {
  char n[160];
  int pt, pb, pl, pr;
  switch (op) {
  case OP_AVG3:
  case OP_MAX3:
    zb_same_pads(x.d[2], 3, s, &pt, &pb);
    zb_same_pads(x.d[3], 3, s, &pl, &pr);
    return zb_pool2d(b, op == OP_AVG3 ? "AveragePool" : "MaxPool",
                     FMT(n, "%s.%s", p, op == OP_AVG3 ? "avg3" : "max3"), x, 3, s, pt, pl, pb,
                     pr, 0);
  case OP_SEP3:
  case OP_SEP5:
  case OP_SEP7: {
    int k = op == OP_SEP3 ? 3 : op == OP_SEP5 ? 5 : 7;
    for (int rep = 0; rep < 2; rep++) {
      x = zb_unary(b, "Relu", FMT(n, "%s.sep%d.%d.relu", p, k, rep), x);
      x = zb_conv_same(b, FMT(n, "%s.sep%d.%d.depthwise", p, k, rep), x, x.d[1], k, k,
                    rep ? 1 : s, x.d[1]);
      x = zb_conv_same(b, FMT(n, "%s.sep%d.%d.pointwise", p, k, rep), x, F, 1, 1, 1, 1);
      x = zb_bn(b, FMT(n, "%s.sep%d.%d.bn", p, k, rep), x, 1e-3);
    }
    return x;
  }
  case OP_C1771:
    x = zb_unary(b, "Relu", FMT(n, "%s.c17.relu1", p), x);
    x = zb_conv_same(b, FMT(n, "%s.c17.conv1x7", p), x, F, 1, 7, s, 1);
    x = zb_bn(b, FMT(n, "%s.c17.bn1", p), x, 1e-3);
    x = zb_unary(b, "Relu", FMT(n, "%s.c17.relu2", p), x);
    x = zb_conv_same(b, FMT(n, "%s.c17.conv7x1", p), x, F, 7, 1, 1, 1);
    return zb_bn(b, FMT(n, "%s.c17.bn2", p), x, 1e-3);
  default:
    return x; /* none (only used with stride 1) */
  }
}

/* Brings prev to net's spatial size (factorized reduction) and F channels (1x1 conv). */
static zt amoeba_prev(zb *b, zt prev, zt net, int64_t F) {
  if (prev.d[2] != net.d[2]) {
    zt x = zb_unary(b, "Relu", "prev.relu", prev), p[2];
    zt a = zb_pool2d(b, "AveragePool", "prev.path1.avg", x, 1, 2, 0, 0, 0, 0, 0);
    p[0] = zb_conv2d(b, "prev.path1.conv", a, F / 2, 1, 1, 1, 1, 0, 0, 0, 0, 1);
    zt pads = ZI(0, 0, 0, 0, 0, 0, 1, 1);
    zt padded = x;
    padded.d[2] += 1, padded.d[3] += 1;
    padded = zb_op(b, "Pad", "prev.path2.pad", padded, 2, x.id, pads.id);
    zt sh = zb_slice(b, "prev.path2.shift_h", padded, 2, 1, padded.d[2]);
    sh = zb_slice(b, "prev.path2.shift_w", sh, 3, 1, padded.d[3]);
    a = zb_pool2d(b, "AveragePool", "prev.path2.avg", sh, 1, 2, 0, 0, 0, 0, 0);
    p[1] = zb_conv2d(b, "prev.path2.conv", a, F - F / 2, 1, 1, 1, 1, 0, 0, 0, 0, 1);
    x = zb_concat(b, "prev.concat", 1, 2, p);
    return zb_bn(b, "prev.bn", x, 1e-3);
  }
  if (prev.d[1] != F) {
    zt x = zb_unary(b, "Relu", "prev.relu", prev);
    x = zb_conv2d(b, "prev.conv", x, F, 1, 1, 1, 1, 0, 0, 0, 0, 1);
    return zb_bn(b, "prev.bn", x, 1e-3);
  }
  return prev;
}

static zt amoeba_cell(zb *b, zt net, zt prev, int64_t F, int reduction) {
  char n[64], p[64];
  zt st[7];
  st[1] = amoeba_prev(b, prev, net, F);
  zt x = zb_unary(b, "Relu", "base.relu", net);
  x = zb_conv2d(b, "base.conv", x, F, 1, 1, 1, 1, 0, 0, 0, 0, 1);
  st[0] = zb_bn(b, "base.bn", x, 1e-3);
  const int(*ops)[2] = reduction ? amoeba_reduce : amoeba_normal;
  for (int i = 0; i < 5; i++) {
    zt lr[2];
    for (int j = 0; j < 2; j++) {
      int src = ops[2 * i + j][0];
      int s = reduction && src < 2 ? 2 : 1;
      lr[j] = amoeba_op(b, FMT(p, "comb%d.%s", i, j ? "right" : "left"), ops[2 * i + j][1],
                        st[src], s, F);
    }
    st[2 + i] = zb_binary(b, "Add", FMT(n, "comb%d.add", i), lr[0], lr[1]);
  }
  zt cat[5];
  int nc = reduction ? 5 : 4;
  for (int i = 0; i < nc; i++)
    cat[i] = st[reduction ? amoeba_reduce_concat[i] : amoeba_normal_concat[i]];
  return zb_concat(b, "concat", 1, nc, cat);
}

static void build_amoebanet(zb *b) {
  int64_t B = zb_knob(b, "batch"), img = zb_knob(b, "image"), N = zb_knob(b, "cells");
  int64_t F = zb_knob(b, "filters");
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(B, 3, img, img));
  zb_scope(b, "%s", "stem");
  x = zb_conv2d(b, "conv", x, 96, 3, 3, 2, 2, 0, 0, 0, 0, 1);
  x = zb_bn(b, "bn", x, 1e-3);
  zt prev = x, net = x;
  int64_t cell = 0;
  for (int i = 0; i < 2; i++) {
    zb_scope(b, "stem_cell%d", i);
    zt out = amoeba_cell(b, net, prev, F / (i ? 2 : 4), 1);
    prev = net, net = out;
  }
  for (int stack = 0; stack < 3 && zb_ok(b); stack++) {
    if (stack > 0) {
      zb_scope(b, "reduction_cell%d", stack - 1);
      zt out = amoeba_cell(b, net, prev, F << stack, 1);
      prev = net, net = out;
    }
    for (int64_t i = 0; i < N && zb_ok(b); i++, cell++) {
      zb_scope(b, "cell%lld", (long long)cell);
      zt out = amoeba_cell(b, net, prev, F << stack, 0);
      prev = net, net = out;
    }
  }
  zb_scope(b, "%s", "");
  net = zb_unary(b, "Relu", "final_relu", net);
  classifier(b, net, zb_knob(b, "classes"));
}

const zoo_entry zoo_amoebanet = {
    {"amoebanet",
     "AmoebaNet-A (N normal cells x 3 stacks with reduction cells; separable convs, pools, adds; "
     "ImageNet stem): the NAS cell network of GO/Placeto/GPipe",
     ZOO_KNOBS(amoeba_knobs)},
    build_amoebanet};

/* ==== WaveNet ================================================================================ */

static const gopt_zoo_knob wavenet_knobs[] = {
    {"batch", 1, 1, 65536, "batch size"},
    {"length", 16000, 1, 100000000, "audio samples"},
    {"blocks", 5, 1, 10000000, "dilation stacks"},
    {"layers", 10, 1, 30, "layers per stack (dilations 1, 2, ..., 2^(layers-1))"},
    {"channels", 32, 1, 65536, "residual and dilation channels"},
    {"skip", 512, 1, 65536, "skip channels"},
    {"quant", 256, 2, 65536, "quantization levels (input/output channels)"},
};

/* Causal 1-D convolution with bias: kernel k, dilation d, left padding d*(k-1). */
static zt conv1d(zb *b, const char *name, zt x, int64_t cout, int k, int64_t d) {
  char n[160];
  zt w = zb_param(b, FMT(n, "%s.weight", name), ZS(cout, x.d[1], k));
  zt bias = zb_param(b, FMT(n, "%s.bias", name), ZS(cout));
  zt y = zb_op(b, "Conv", name, ZS(x.d[0], cout, x.d[2]), 3, x.id, w.id, bias.id);
  ZAIS("kernel_shape", k);
  ZAIS("strides", 1);
  ZAIS("dilations", d);
  ZAIS("pads", d * (k - 1), 0);
  return y;
}

static void build_wavenet(zb *b) {
  int64_t B = zb_knob(b, "batch"), L = zb_knob(b, "length"), nb = zb_knob(b, "blocks");
  int64_t nl = zb_knob(b, "layers"), C = zb_knob(b, "channels"), S = zb_knob(b, "skip");
  int64_t Q = zb_knob(b, "quant");
  zt x = zb_input(b, "input", GOPT_DT_FLOAT, ZS(B, Q, L));
  zb_scope(b, "%s", "");
  x = conv1d(b, "causal_conv", x, C, 2, 1);
  zt skip = x;
  for (int64_t blk = 0; blk < nb && zb_ok(b); blk++)
    for (int64_t l = 0; l < nl; l++) {
      int64_t d = (int64_t)1 << l;
      zb_scope(b, "block%lld.layer%lld", (long long)blk, (long long)l);
      zt f = zb_unary(b, "Tanh", "tanh", conv1d(b, "filter", x, C, 2, d));
      zt g = zb_unary(b, "Sigmoid", "sigmoid", conv1d(b, "gate", x, C, 2, d));
      zt z = zb_binary(b, "Mul", "gated", f, g);
      zt sk = conv1d(b, "skip", z, S, 1, 1);
      skip = (blk == 0 && l == 0) ? sk : zb_binary(b, "Add", "skip_sum", skip, sk);
      if (blk == nb - 1 && l == nl - 1) break; /* the last residual output would be unused */
      zt res = conv1d(b, "dense", z, C, 1, 1);
      x = zb_binary(b, "Add", "residual", x, res);
    }
  zb_scope(b, "%s", "postprocess");
  zt y = zb_unary(b, "Relu", "relu1", skip);
  y = conv1d(b, "conv1", y, S, 1, 1);
  y = zb_unary(b, "Relu", "relu2", y);
  y = conv1d(b, "conv2", y, Q, 1, 1);
  y = zb_op(b, "Softmax", "softmax", y, 1, y.id);
  zb_ai(b, "axis", 1);
  zb_output(b, y);
}

const zoo_entry zoo_wavenet = {
    {"wavenet",
     "WaveNet (gated dilated causal conv stacks with residual and skip paths, tf-wavenet "
     "layout): GO's WaveNet benchmark",
     ZOO_KNOBS(wavenet_knobs)},
    build_wavenet};
