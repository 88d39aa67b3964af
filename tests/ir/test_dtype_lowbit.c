/* test_dtype_lowbit.c: the 8-, 4- and 2-bit element types (dtype_lowbit.c). Independent facts:
 * the formats' published extremes (e4m3fn max 448, e4m3fnuz 240, e5m2 57344, e2m1 6, smallest
 * subnormals 2^-9 / 2^-10 / 2^-16 / 2^-17 / 0.5), every finite code decodes and re-encodes to
 * itself (round trip over all 256 or 16 codes), ties round to the even code, the saturate rules of
 * ONNX's Cast table, and packing two or four values to a byte low bits first. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "gopt/graph.h"

static void round_trips(int dt, int codes) {
  int bad = 0;
  for (int c = 0; c < codes; c++) {
    double v = gopt_lowbit_to_double(dt, (uint8_t)c);
    if (isnan(v) || isinf(v)) continue;
    if (v == 0 && signbit(v) && (dt == GOPT_DT_FLOAT8E4M3FNUZ || dt == GOPT_DT_FLOAT8E5M2FNUZ)) continue;
    if (gopt_lowbit_from_double(dt, v, 1, NULL) != c) bad++;
  }
  CHECK_MSG(bad == 0, "%s: %d codes do not round-trip", gopt_dtype_name(dt), bad);
}

int main(void) {
  const int fl[] = {GOPT_DT_FLOAT8E4M3FN, GOPT_DT_FLOAT8E4M3FNUZ, GOPT_DT_FLOAT8E5M2, GOPT_DT_FLOAT8E5M2FNUZ};
  for (int i = 0; i < 4; i++) round_trips(fl[i], 256);
  round_trips(GOPT_DT_FLOAT4E2M1, 16);
  round_trips(GOPT_DT_FLOAT8E8M0, 255);

  /* extremes and subnormals */
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FN, 0x7E) == 448);
  CHECK(isnan(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FN, 0x7F)));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FN, 0x01) == ldexp(1, -9));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FNUZ, 0x7F) == 240);
  CHECK(isnan(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FNUZ, 0x80)));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E4M3FNUZ, 0x01) == ldexp(1, -10));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E5M2, 0x7B) == 57344);
  CHECK(isinf(gopt_lowbit_to_double(GOPT_DT_FLOAT8E5M2, 0x7C)));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E5M2, 0x01) == ldexp(1, -16));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E5M2FNUZ, 0x7F) == 57344);
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E5M2FNUZ, 0x01) == ldexp(1, -17));
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT4E2M1, 0x07) == 6);
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT4E2M1, 0x0F) == -6);
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT4E2M1, 0x01) == 0.5);
  CHECK(gopt_lowbit_to_double(GOPT_DT_FLOAT8E8M0, 127) == 1);
  CHECK(gopt_lowbit_to_double(GOPT_DT_INT4, 0xF8) == -8);

  /* ties to even: 1.0625 lies halfway between e4m3 1.0 (mantissa 000) and 1.125 (001) */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, 1.0625, 1, NULL), 0x38);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, 1.1875, 1, NULL), 0x3A); /* 1.125|1.25 -> 1.25 */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT4E2M1, 2.5, 1, NULL), 0x04);      /* 2|3 -> 2 */
  /* saturation (ONNX Cast): beyond the range */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, 1000, 1, NULL), 0x7E);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, 1000, 0, NULL), 0x7F);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, -INFINITY, 1, NULL), 0xFE);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E5M2, INFINITY, 0, NULL), 0x7C);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E5M2, 1e6, 1, NULL), 0x7B);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FNUZ, 1000, 0, NULL), 0x80);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FNUZ, -0.0, 1, NULL), 0x00); /* no -0 */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E4M3FN, 464, 0, NULL), 0x7E);    /* tie stays */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT4E2M1, 100, 0, NULL), 0x07);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_INT4, 9.4, 1, NULL), 0x07);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_UINT4, -3, 1, NULL), 0x00);
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E8M0, 3.0, 1, "up"), 129); /* 2^2 */
  CHECK_EQ_INT(gopt_lowbit_from_double(GOPT_DT_FLOAT8E8M0, 3.0, 1, "down"), 128); /* 2^1 */

  /* packing: low bits first */
  uint8_t in4[3] = {0x01, 0xFE, 0x07}, p4[2] = {0}, u4[3] = {0};
  gopt_lowbit_pack(GOPT_DT_INT4, in4, 3, p4);
  CHECK_EQ_INT(p4[0], 0xE1);
  CHECK_EQ_INT(p4[1], 0x07);
  gopt_lowbit_unpack(GOPT_DT_INT4, p4, 3, u4);
  CHECK(memcmp(in4, u4, 3) == 0);
  uint8_t in2[5] = {0, 1, 2, 3, 1}, p2[2] = {0}, u2[5] = {0};
  gopt_lowbit_pack(GOPT_DT_UINT2, in2, 5, p2);
  CHECK_EQ_INT(p2[0], 0xE4);
  CHECK_EQ_INT(p2[1], 0x01);
  gopt_lowbit_unpack(GOPT_DT_UINT2, p2, 5, u2);
  CHECK(memcmp(in2, u2, 5) == 0);
  CHECK_EQ_INT(gopt_dtype_bits(GOPT_DT_FLOAT4E2M1), 4);
  CHECK_EQ_INT(gopt_dtype_bits(GOPT_DT_INT2), 2);
  CHECK_EQ_INT(gopt_dtype_bits(GOPT_DT_FLOAT8E5M2), 8);
  CHECK(gopt_dtype_from_name("FLOAT8E4M3FN") == GOPT_DT_FLOAT8E4M3FN);
  return check_exit("test_dtype_lowbit");
}
