/* exec_io.c: tensor files for the executor: ONNX TensorProto (.pb, through the protobuf-c code
 * generated from onnx.proto: raw_data and the typed fields) and NumPy .npy (v1-3 header + raw
 * little-endian C-order data). Writes are atomic (gopt_file_write_atomic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "gopt/util.h"
#include "onnx/onnx.pb-c.h"

int gopt_exec_input_dtype(const gopt_exec *x, size_t i) { return ex_dtype(x, x->inputs[i]); }

static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcmp(s + n - m, suf);
}

/* numel * element size into *nbytes; GOPT_ERANGE on a negative dim or overflow. */
static int tensor_bytes(const gopt_host_tensor *t, size_t *nbytes) {
  size_t es = gopt_dtype_size(t->dtype);
  uint64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0 || (t->dims[i] && n > (UINT64_C(1) << 40) / (uint64_t)t->dims[i])) return GOPT_ERANGE;
    n *= (uint64_t)t->dims[i];
  }
  *nbytes = (size_t)n * es;
  return es ? GOPT_OK : GOPT_EUNSUP;
}

/* ---- TensorProto ------------------------------------------------------------------------------------ */

/* STRING: string_data packed as (uint32 little-endian length, bytes) records, one per element (the
 * format of STRING constants in the IR and of STRING host tensors). */
static int pb_read_strings(const char *path, const Onnx__TensorProto *tp, gopt_host_tensor *t, gopt_error *err) {
  uint64_t n = 1;
  size_t total = 0;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i] < 0 || (t->dims[i] && n > (UINT64_C(1) << 40) / (uint64_t)t->dims[i]))
      return gopt_error_set(err, GOPT_ERANGE, "%s: bad or too large dims", path);
    n *= (uint64_t)t->dims[i];
  }
  if (tp->n_string_data != n)
    return gopt_error_set(err, GOPT_EPARSE, "%s: %zu strings, dims say %llu", path, tp->n_string_data,
                          (unsigned long long)n);
  for (size_t i = 0; i < n; i++) total += 4 + tp->string_data[i].len;
  unsigned char *p = malloc(total + 1);
  if (!p) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  t->data = p;
  t->nbytes = total;
  for (size_t i = 0; i < n; i++) {
    uint32_t len = (uint32_t)tp->string_data[i].len;
    for (int b = 0; b < 4; b++) *p++ = (unsigned char)(len >> (8 * b));
    if (len) memcpy(p, tp->string_data[i].data, len);
    p += len;
  }
  if (tp->name && *tp->name && !(t->name = strdup(tp->name)))
    return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  return GOPT_OK;
}

static int pb_read(const char *path, const void *buf, size_t len, gopt_host_tensor *t, gopt_error *err) {
  int rc = GOPT_OK;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  if (!tp) return gopt_error_set(err, GOPT_EPARSE, "%s: not an ONNX TensorProto", path);
  if (tp->n_dims > GOPT_MAX_RANK) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: rank %zu is too large", path, tp->n_dims);
    goto done;
  }
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: external data in a tensor file is not supported", path);
    goto done;
  }
  t->dtype = tp->data_type;
  t->rank = (int)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) t->dims[i] = tp->dims[i];
  size_t nb = 0;
  int brc = tensor_bytes(t, &nb);
  if (t->dtype == GOPT_DT_STRING) {
    rc = pb_read_strings(path, tp, t, err);
    goto done;
  }
  if (brc == GOPT_EUNSUP || t->dtype <= 0 || t->dtype >= GOPT_DT_COUNT) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: data type %s is not supported", path, gopt_dtype_name(t->dtype));
    goto done;
  }
  if (brc) {
    rc = gopt_error_set(err, GOPT_ERANGE, "%s: bad or too large dims", path);
    goto done;
  }
  size_t es = gopt_dtype_size(t->dtype), n = es ? nb / es : 0;
  t->nbytes = nb;
  t->data = malloc(nb + 1);
  if (!t->data) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  int bits = gopt_dtype_bits(t->dtype);
  size_t packed = bits < 8 ? (n * (size_t)bits + 7) / 8 : nb;
  if (bits < 8 && (tp->has_raw_data || tp->raw_data.len)) {
    if (tp->raw_data.len != packed) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: raw_data has %zu bytes, %zu %s elements take %zu", path,
                          tp->raw_data.len, n, gopt_dtype_name(t->dtype), packed);
      goto done;
    }
    gopt_lowbit_unpack(t->dtype, tp->raw_data.data, (int64_t)n, t->data);
  } else if (bits < 8 && tp->n_int32_data == packed) { /* one packed byte per int32 */
    uint8_t *b = malloc(packed + 1);
    if (!b) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
      goto done;
    }
    for (size_t i = 0; i < packed; i++) b[i] = (uint8_t)tp->int32_data[i];
    gopt_lowbit_unpack(t->dtype, b, (int64_t)n, t->data);
    free(b);
  } else if (tp->has_raw_data || tp->raw_data.len) {
    if (tp->raw_data.len != nb) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: raw_data has %zu bytes, dims say %zu", path, tp->raw_data.len, nb);
      goto done;
    }
    if (nb) memcpy(t->data, tp->raw_data.data, nb); /* empty tensors have no data pointer */
  } else if (t->dtype == GOPT_DT_FLOAT && tp->n_float_data == n) {
    if (nb) memcpy(t->data, tp->float_data, nb);
  } else if (t->dtype == GOPT_DT_DOUBLE && tp->n_double_data == n) {
    if (nb) memcpy(t->data, tp->double_data, nb);
  } else if (t->dtype == GOPT_DT_INT64 && tp->n_int64_data == n) {
    if (nb) memcpy(t->data, tp->int64_data, nb);
  } else if ((t->dtype == GOPT_DT_UINT64 || t->dtype == GOPT_DT_UINT32) && tp->n_uint64_data == n) {
    for (size_t i = 0; i < n; i++) {
      if (t->dtype == GOPT_DT_UINT64) ((uint64_t *)t->data)[i] = tp->uint64_data[i];
      else ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
    }
  } else if (tp->n_int32_data == n && (es == 4 || es == 2 || es == 1)) {
    for (size_t i = 0; i < n; i++) {
      int32_t v = tp->int32_data[i];
      if (es == 4) memcpy((char *)t->data + 4 * i, &v, 4);
      else if (es == 2) ((uint16_t *)t->data)[i] = (uint16_t)v;
      else ((uint8_t *)t->data)[i] = (uint8_t)v;
    }
  } else {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: no data for %zu %s elements", path, n, gopt_dtype_name(t->dtype));
    goto done;
  }
  if (tp->name && *tp->name) {
    t->name = strdup(tp->name);
    if (!t->name) rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  }
done:
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return rc;
}

static int pb_write(const char *path, const gopt_host_tensor *t, gopt_error *err) {
  Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[GOPT_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
  tp.n_dims = (size_t)t->rank;
  tp.dims = dims;
  tp.has_data_type = 1;
  tp.data_type = t->dtype;
  tp.name = t->name ? t->name : (char *)"";
  ProtobufCBinaryData *sd = NULL;
  uint8_t *packed = NULL;
  if (t->dtype == GOPT_DT_STRING) { /* string_data from the packed records */
    int64_t n = gopt_host_tensor_numel(t);
    const unsigned char *p = t->data, *end = p + t->nbytes;
    sd = calloc((size_t)n + 1, sizeof *sd);
    if (!sd) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < n; i++) {
      uint32_t l = end - p >= 4 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
      if (end - p < 4 || (size_t)(end - p - 4) < l) {
        free(sd);
        return gopt_error_set(err, GOPT_EINVAL, "%s: malformed STRING tensor", path);
      }
      sd[i].len = l;
      sd[i].data = (uint8_t *)p + 4;
      p += 4 + l;
    }
    tp.n_string_data = (size_t)n;
    tp.string_data = sd;
  } else if (gopt_dtype_bits(t->dtype) > 0 && gopt_dtype_bits(t->dtype) < 8) { /* sub-byte types are packed */
    int64_t n = gopt_host_tensor_numel(t);
    packed = malloc((size_t)(n * gopt_dtype_bits(t->dtype) + 7) / 8 + 1);
    if (!packed) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    gopt_lowbit_pack(t->dtype, t->data, n, packed);
    tp.has_raw_data = 1;
    tp.raw_data.len = (size_t)(n * gopt_dtype_bits(t->dtype) + 7) / 8;
    tp.raw_data.data = packed;
  } else {
    tp.has_raw_data = 1;
    tp.raw_data.len = t->nbytes;
    tp.raw_data.data = t->data;
  }
  size_t len = onnx__tensor_proto__get_packed_size(&tp);
  uint8_t *buf = malloc(len + 1);
  if (!buf) {
    free(sd);
    free(packed);
    return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  }
  onnx__tensor_proto__pack(&tp, buf);
  free(sd);
  free(packed);
  int rc = gopt_file_write_atomic(path, buf, len, err);
  free(buf);
  return rc;
}

/* ---- .npy -------------------------------------------------------------------------------------------- */

static const struct {
  const char *descr;
  int dtype;
} npy_types[] = {
    {"<f4", GOPT_DT_FLOAT}, {"<f8", GOPT_DT_DOUBLE}, {"<i8", GOPT_DT_INT64}, {"<i4", GOPT_DT_INT32},
    {"<i2", GOPT_DT_INT16}, {"|i1", GOPT_DT_INT8},   {"|u1", GOPT_DT_UINT8}, {"|b1", GOPT_DT_BOOL},
    {"<u2", GOPT_DT_UINT16}, {"<u4", GOPT_DT_UINT32}, {"<u8", GOPT_DT_UINT64}, {"<f2", GOPT_DT_FLOAT16},
};

/* Finds 'key': in the header dict and returns a pointer just after the colon (NULL when absent). */
static const char *npy_key(const char *h, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(h, pat);
  if (!p) return NULL;
  p = strchr(p + strlen(pat), ':');
  if (!p) return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

static int npy_read(const char *path, const unsigned char *buf, size_t len, gopt_host_tensor *t, gopt_error *err) {
  if (len < 10 || memcmp(buf, "\x93NUMPY", 6))
    return gopt_error_set(err, GOPT_EPARSE, "%s: not a .npy file (bad magic)", path);
  int major = buf[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = (size_t)buf[8] | ((size_t)buf[9] << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return gopt_error_set(err, GOPT_EPARSE, "%s: truncated header", path);
    hlen = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
    off = 12;
  } else {
    return gopt_error_set(err, GOPT_EUNSUP, "%s: .npy version %d is not supported", path, major);
  }
  if (hlen > len - off || hlen > 65536) return gopt_error_set(err, GOPT_EPARSE, "%s: truncated header", path);
  char *h = malloc(hlen + 1);
  if (!h) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  memcpy(h, buf + off, hlen);
  h[hlen] = 0;
  int rc = GOPT_OK;
  const char *d = npy_key(h, "descr"), *f = npy_key(h, "fortran_order"), *s = npy_key(h, "shape");
  if (!d || !f || !s || *d != '\'' || *s != '(') {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: malformed .npy header", path);
    goto done;
  }
  if (!strncmp(f, "True", 4)) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: Fortran-order arrays are not supported", path);
    goto done;
  }
  t->dtype = 0;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    size_t n = strlen(npy_types[i].descr);
    if (!strncmp(d + 1, npy_types[i].descr, n) && d[1 + n] == '\'') t->dtype = npy_types[i].dtype;
  }
  if (!t->dtype) {
    const char *e = strchr(d + 1, '\'');
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s: dtype %.*s is not supported (little-endian numeric only)",
                        path, e ? (int)(e - d + 1) : 8, d);
    goto done;
  }
  t->rank = 0;
  const char *p = s + 1;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || t->rank >= GOPT_MAX_RANK) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s: malformed shape in the .npy header", path);
      goto done;
    }
    t->dims[t->rank++] = v;
    p = end;
    if (*p == 'L') p++;
  }
  size_t nb = 0;
  if (tensor_bytes(t, &nb)) {
    rc = gopt_error_set(err, GOPT_ERANGE, "%s: shape too large", path);
    goto done;
  }
  if (len - off - hlen != nb) {
    rc = gopt_error_set(err, GOPT_EPARSE, "%s: %zu data bytes, the header says %zu", path, len - off - hlen, nb);
    goto done;
  }
  t->nbytes = nb;
  t->data = malloc(nb + 1);
  if (!t->data) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  memcpy(t->data, buf + off + hlen, nb);
done:
  free(h);
  return rc;
}

static int npy_write(const char *path, const gopt_host_tensor *t, gopt_error *err) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dtype == t->dtype) descr = npy_types[i].descr;
  if (!descr) return gopt_error_set(err, GOPT_EUNSUP, "%s: no .npy dtype for %s", path, gopt_dtype_name(t->dtype));
  char h[512];
  int k = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < t->rank; i++)
    k += snprintf(h + k, sizeof h - (size_t)k, "%lld,%s", (long long)t->dims[i], i + 1 < t->rank ? " " : "");
  if (t->rank > 1) k--; /* numpy writes (2, 3) but (4,) */
  k += snprintf(h + k, sizeof h - (size_t)k, "), }");
  size_t total = 10 + (size_t)k + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)k + pad + 1;
  size_t len = 10 + hlen + t->nbytes;
  unsigned char *buf = malloc(len);
  if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hlen & 0xff);
  buf[9] = (unsigned char)(hlen >> 8);
  memcpy(buf + 10, h, (size_t)k);
  memset(buf + 10 + k, ' ', pad);
  buf[10 + hlen - 1] = '\n';
  memcpy(buf + 10 + hlen, t->data, t->nbytes);
  int rc = gopt_file_write_atomic(path, buf, len, err);
  free(buf);
  return rc;
}

int gopt_exec_tensor_read(const char *path, gopt_host_tensor *t, gopt_error *err) {
  void *buf = NULL;
  size_t len = 0;
  memset(t, 0, sizeof *t);
  int rc = gopt_file_read(path, &buf, &len, err);
  if (rc) return rc;
  rc = ends_with(path, ".npy") ? npy_read(path, buf, len, t, err) : pb_read(path, buf, len, t, err);
  free(buf);
  if (rc) gopt_host_tensor_clear(t);
  return rc;
}

int gopt_exec_tensor_write(const char *path, const gopt_host_tensor *t, gopt_error *err) {
  size_t nb = 0;
  if (t->dtype == GOPT_DT_STRING) /* pb_write checks the records */
    return ends_with(path, ".npy") ? gopt_error_set(err, GOPT_EUNSUP, "%s: STRING tensors are written as .pb only", path)
                                   : pb_write(path, t, err);
  if (tensor_bytes(t, &nb) || nb != t->nbytes)
    return gopt_error_set(err, GOPT_EINVAL, "%s: tensor has %zu bytes for its shape, expected %zu", path,
                          t->nbytes, nb);
  return ends_with(path, ".npy") ? npy_write(path, t, err) : pb_write(path, t, err);
}
