/* test_hlo_exec_cudnn.c: the HLO executor's cuDNN convolution custom-calls of optimised GPU modules
 * (__cudnn$convForward, $convBackwardInput, $convBackwardFilter, $convBiasActivationForward).
 * On seeded random inputs, for each convolution form the real modules use (dense, feature groups
 * with stride, depthwise, window dilation, 1-D with asymmetric padding, 3-D, base dilation with
 * window reversal, batch groups): the forward custom-call equals the plain HLO `convolution`
 * kernel (itself checked against PyTorch in test_hlo_exec_window), and the two backward ones are
 * its adjoints: <conv(x, w), dy> = <x, backward_input(dy, w)> = <w, backward_filter(x, dy)>.
 * The fused bias/side-input/ReLU form against a result worked by hand. */
#include <stdint.h>
#include <stdlib.h>

#include "hlo_test_util.h"

typedef struct ccase {
  const char *what, *xs, *ws, *ys, *attrs; /* shapes (f32[...]) of input, filter, output; conv attributes */
} ccase;

static const ccase cases[] = {
    {"dense 3x3 pad 1", "f32[2,6,6,3]", "f32[4,3,3,3]", "f32[2,6,6,4]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f"},
    {"4 feature groups, stride 2", "f32[2,8,8,8]", "f32[8,3,3,2]", "f32[2,4,4,8]",
     "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f, feature_group_count=4"},
    {"depthwise", "f32[2,5,5,4]", "f32[4,3,3,1]", "f32[2,5,5,4]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_o01i->b01f, feature_group_count=4"},
    {"window dilation 2", "f32[1,6,6,2]", "f32[3,3,3,2]", "f32[1,6,6,3]",
     "window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, dim_labels=b01f_o01i->b01f"},
    {"1-D, stride 2, pad 1_2", "f32[2,11,3]", "f32[4,5,3]", "f32[2,5,4]", "window={size=5 stride=2 pad=1_2}, dim_labels=b0f_o0i->b0f"},
    {"3-D, feature-major", "f32[1,2,4,4,4]", "f32[3,2,3,3,3]", "f32[1,3,4,4,4]",
     "window={size=3x3x3 pad=1_1x1_1x1_1}, dim_labels=bf012_oi012->bf012"},
    {"base dilation 2, window reversal", "f32[1,3,3,2]", "f32[2,3,3,2]", "f32[1,7,7,2]",
     "window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=b01f_o01i->b01f"},
    {"2 batch groups", "f32[4,5,5,3]", "f32[4,3,3,3]", "f32[2,3,3,4]",
     "window={size=3x3}, dim_labels=b01f_o01i->b01f, batch_group_count=2"},
};

/* Seeded values in [-1, 1) (a 64-bit LCG). */
static float rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(*s >> 11) / 9007199254740992.0 * 2 - 1);
}

/* An f32 tensor of the dims in the shape text ("f32[2,6,6,3]") filled from the seed. */
static gopt_host_tensor random_tensor(const char *shape, uint64_t *seed) {
  gopt_host_tensor t = {0};
  t.dtype = GOPT_DT_FLOAT;
  int64_t n = 1;
  for (const char *p = shape + 4; *p && *p != ']';) {
    char *e;
    t.dims[t.rank] = strtoll(p, &e, 10);
    n *= t.dims[t.rank++];
    p = *e == ',' ? e + 1 : e;
  }
  t.nbytes = (size_t)n * sizeof(float);
  t.data = malloc(t.nbytes);
  for (int64_t i = 0; i < n; i++) ((float *)t.data)[i] = rnd(seed);
  return t;
}

/* Sum of a[i] * b[i] over n floats, and of |a[i] * b[i]| into mag. */
static double dotf(const gopt_host_tensor *a, const gopt_host_tensor *b, double *mag) {
  double s = 0;
  int64_t n = gopt_host_tensor_numel(a);
  for (int64_t i = 0; i < n; i++) {
    double v = (double)((float *)a->data)[i] * ((float *)b->data)[i];
    s += v;
    *mag += fabs(v);
  }
  return s;
}

static void check_case(const ccase *c, uint64_t seed) {
  char text[4096];
  snprintf(text, sizeof text,
           "HloModule c\nENTRY e {\n  x = %s parameter(0)\n  w = %s parameter(1)\n  dy = %s parameter(2)\n"
           "  ref = %s convolution(x, w), %s\n"
           "  cf = (%s, u8[0]) custom-call(x, w), %s, custom_call_target=\"__cudnn$convForward\"\n"
           "  y = %s get-tuple-element(cf), index=0\n"
           "  bi = (%s, u8[16]) custom-call(dy, w), %s, custom_call_target=\"__cudnn$convBackwardInput\"\n"
           "  dx = %s get-tuple-element(bi), index=0\n"
           "  bf = (%s, u8[0]) custom-call(x, dy), %s, custom_call_target=\"__cudnn$convBackwardFilter\"\n"
           "  dw = %s get-tuple-element(bf), index=0\n"
           "  ROOT t = (%s, %s, %s, %s) tuple(ref, y, dx, dw)\n}\n",
           c->xs, c->ws, c->ys, c->ys, c->attrs, c->ys, c->attrs, c->ys, c->xs, c->attrs, c->xs, c->ws, c->attrs, c->ws,
           c->ys, c->ys, c->xs, c->ws);
  gopt_graph *g = load(text);
  gopt_exec *x = NULL;
  gopt_exec_opts eo = {0};
  gopt_error err = {0};
  gopt_host_tensor in[3] = {random_tensor(c->xs, &seed), random_tensor(c->ws, &seed), random_tensor(c->ys, &seed)}, o[4] = {{0}};
  int rc = g ? gopt_exec_new(g, &eo, &x, NULL, &err) : -1;
  for (size_t i = 0; i < 3 && !rc; i++) rc = gopt_exec_set_input(x, i, &in[i], &err);
  if (!rc) rc = gopt_exec_run(x, &err);
  for (size_t i = 0; i < 4 && !rc; i++) rc = gopt_exec_get_output(x, i, &o[i], &err);
  CHECK_MSG(rc == 0, "%s: %s", c->what, err.msg);
  if (!rc) {
    int64_t n = gopt_host_tensor_numel(&o[0]), bad = 0;
    for (int64_t i = 0; i < n; i++) {
      double r = ((float *)o[0].data)[i], v = ((float *)o[1].data)[i];
      bad += fabs(r - v) > 1e-5 * (1 + fabs(r));
    }
    CHECK_MSG(bad == 0 && n == gopt_host_tensor_numel(&in[2]), "%s: forward custom-call differs from convolution at %lld of %lld",
              c->what, (long long)bad, (long long)n);
    double m0 = 0, m1 = 0, m2 = 0, s0 = dotf(&o[0], &in[2], &m0), s1 = dotf(&in[0], &o[2], &m1), s2 = dotf(&in[1], &o[3], &m2);
    CHECK_MSG(fabs(s0 - s1) <= 1e-5 * (m0 + m1) && m0 > 0, "%s: <conv(x,w),dy> %.9g but <x,backward_input> %.9g", c->what, s0, s1);
    CHECK_MSG(fabs(s0 - s2) <= 1e-5 * (m0 + m2), "%s: <conv(x,w),dy> %.9g but <w,backward_filter> %.9g", c->what, s0, s2);
  }
  for (int i = 0; i < 4; i++) gopt_host_tensor_clear(&o[i]);
  for (int i = 0; i < 3; i++) gopt_host_tensor_clear(&in[i]);
  gopt_exec_free(x);
  gopt_graph_free(g);
}

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 42 + i);
  /* x = (1, 4, 2), w = (1, -1): conv = (-3, 2); 2 * conv + bias 0.5 + 3 * side (1, 1) = (-2.5, 7.5); ReLU: (0, 7.5).
   * Without the side input and ReLU: 2 * conv + 0.5 = (-5.5, 4.5). */
  static const double fused[] = {0, 7.5}, plain[] = {-5.5, 4.5};
#define XW "  x = f32[1,3,1] constant({ { {1}, {4}, {2} } })\n  w = f32[1,2,1] constant({ { {1}, {-1} } })\n  b = f32[1] constant({0.5})\n"
  kernel_case("conv + bias + side input, ReLU",
              "ENTRY e {\n" XW "  s = f32[1,2,1] constant({ { {1}, {1} } })\n"
              "  ROOT c = (f32[1,2,1], u8[0]) custom-call(x, w, b, s), window={size=2}, dim_labels=b0f_o0i->b0f, "
              "custom_call_target=\"__cudnn$convBiasActivationForward\", backend_config={\"cudnn_conv_backend_config\":"
              "{\"activation_mode\":\"kRelu\",\"conv_result_scale\":2,\"side_input_scale\":3}}\n}\n",
              0, fused, 2);
  kernel_case("conv + bias, no activation",
              "ENTRY e {\n" XW "  ROOT c = (f32[1,2,1], u8[0]) custom-call(x, w, b), window={size=2}, dim_labels=b0f_o0i->b0f, "
              "custom_call_target=\"__cudnn$convBiasActivationForward\", backend_config={\"cudnn_conv_backend_config\":"
              "{\"activation_mode\":\"kNone\",\"conv_result_scale\":2,\"side_input_scale\":0}}\n}\n",
              0, plain, 2);
  return check_exit("test_hlo_exec_cudnn");
}
