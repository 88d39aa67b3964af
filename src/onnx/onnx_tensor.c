/* onnx_tensor.c: ONNX TensorProto <-> gopt constant tensors: dtype and dims checks, raw and typed
 * data fields (little-endian bytes), external data (read, or kept as a reference when missing), and
 * the reverse for export. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_internal.h"

static void put_le(unsigned char *p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Formats dims as "[2,3]" into buf. */
static const char *dims_str(const int64_t *d, size_t n, char *buf, size_t cap) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  for (size_t i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)d[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* Parses a non-negative decimal; -1 when malformed. */
static int64_t parse_nonneg(const char *s) {
  if (!s || !*s) return -1;
  int64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

/* 1 when loc is a relative path with no ".." component. */
static int location_ok(const char *loc) {
  if (!*loc || loc[0] == '/') return 0;
  const char *p = loc;
  while (*p) {
    const char *q = strchr(p, '/');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
    if (!q) break;
    p = q + 1;
  }
  return 1;
}

/* Resolves base_dir/path (symbolic links and all) into *real (malloc'd). Returns 0, 1 when the
 * file does not exist, or an error when it resolves outside the resolved base_dir: a link must not
 * reach what a '../' or absolute location may not. */
static int resolve_inside(const char *base_dir, const char *path, const char *loc, const char *what,
                          const char *tname, char **real, gopt_error *err) {
  *real = realpath(path, NULL);
  if (!*real) {
    if (errno == ENOENT || errno == ENOTDIR) return 1;
    return gopt_error_set(err, GOPT_EIO, "%s '%s': cannot open external data '%s': %s", what, tname,
                          loc, strerror(errno));
  }
  char *base = realpath(base_dir, NULL);
  size_t n = base ? strlen(base) : 0;
  int inside = base && !strncmp(*real, base, n) && (n == 1 || (*real)[n] == '/');
  int rc = GOPT_OK;
  if (!base)
    rc = gopt_error_set(err, GOPT_EIO, "%s '%s': cannot resolve the model directory '%s': %s", what,
                        tname, base_dir, strerror(errno));
  else if (!inside)
    rc = gopt_error_set(err, GOPT_EPARSE,
                        "%s '%s': external data '%s' resolves to '%s', outside the model directory",
                        what, tname, loc, *real);
  free(base);
  if (rc) {
    free(*real);
    *real = NULL;
  }
  return rc;
}

/* Reads nbytes at off of base_dir/loc into *data. *missing = 1 (and 0 returned) when the file does
 * not exist. A location that resolves (through symbolic links) outside base_dir is an error. */
/* Replaces *data, numel elements of sub-byte dtype in ONNX's packed form, with their one-per-byte
 * form (want bytes). */
static int unpack_lowbit(int dtype, int64_t numel, size_t want, void **data, const char *what,
                         const char *tname, gopt_error *err) {
  uint8_t *u = malloc(want ? want : 1);
  if (!u) return gopt_error_set(err, GOPT_ENOMEM, "%s '%s': out of memory for %zu bytes", what, tname, want);
  gopt_lowbit_unpack(dtype, *data, numel, u);
  free(*data);
  *data = u;
  return GOPT_OK;
}

static int read_external(const char *base_dir, const char *loc, int64_t off, size_t nbytes,
                         const char *what, const char *tname, void **data, int *missing,
                         gopt_error *err) {
  int rc = GOPT_OK;
  char *path = NULL, *real = NULL;
  FILE *f = NULL;
  unsigned char *buf = NULL;
  size_t plen = strlen(base_dir) + strlen(loc) + 2;
  *data = NULL;
  *missing = 0;
  path = malloc(plen);
  if (!path) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    goto done;
  }
  snprintf(path, plen, "%s/%s", base_dir, loc);
  rc = resolve_inside(base_dir, path, loc, what, tname, &real, err);
  if (rc == 1) {
    *missing = 1;
    rc = GOPT_OK;
    goto done;
  }
  if (rc) goto done;
  f = fopen(real, "rb");
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR)
      *missing = 1;
    else
      rc = gopt_error_set(err, GOPT_EIO, "%s '%s': cannot open external data '%s': %s", what,
                          tname, loc, strerror(errno));
    goto done;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    rc = gopt_error_set(err, GOPT_EIO, "%s '%s': external data '%s' is not a regular file", what,
                        tname, loc);
    goto done;
  }
  if ((uint64_t)off > (uint64_t)st.st_size || nbytes > (uint64_t)st.st_size - (uint64_t)off) {
    rc = gopt_error_set(err, GOPT_EPARSE,
                        "%s '%s': external data (offset %lld, %zu bytes) lies beyond the end of "
                        "'%s' (%lld bytes)",
                        what, tname, (long long)off, nbytes, loc, (long long)st.st_size);
    goto done;
  }
  buf = malloc(nbytes ? nbytes : 1);
  if (!buf) {
    rc = gopt_error_set(err, GOPT_ENOMEM, "%s '%s': out of memory for %zu bytes", what, tname,
                        nbytes);
    goto done;
  }
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 || (nbytes && fread(buf, 1, nbytes, f) != nbytes)) {
    rc = gopt_error_set(err, GOPT_EIO, "%s '%s': short read of external data '%s'", what, tname,
                        loc);
    goto done;
  }
  *data = buf;
  buf = NULL;
done:
  free(buf);
  if (f) fclose(f);
  free(real);
  free(path);
  return rc;
}

/* Converts the typed data field matching dtype into little-endian bytes (*data, malloc'd).
 * Returns GOPT_EPARSE when the element count does not match numel. */
static int typed_data(const Onnx__TensorProto *tp, int dtype, int64_t numel, const char *what,
                      const char *tname, void **data, size_t *nbytes, gopt_error *err) {
  size_t es = gopt_dtype_size(dtype);
  size_t have = 0, want = (size_t)numel;
  const char *field = "";
  unsigned char *buf = NULL;
  *data = NULL;
  *nbytes = 0;
  switch (dtype) {
  case GOPT_DT_FLOAT:
  case GOPT_DT_COMPLEX64:
    field = "float_data";
    have = tp->n_float_data;
    if (dtype == GOPT_DT_COMPLEX64) want *= 2;
    break;
  case GOPT_DT_INT32: case GOPT_DT_INT16: case GOPT_DT_INT8: case GOPT_DT_UINT16:
  case GOPT_DT_UINT8: case GOPT_DT_BOOL: case GOPT_DT_FLOAT16: case GOPT_DT_BFLOAT16:
  case GOPT_DT_FLOAT8E4M3FN: case GOPT_DT_FLOAT8E4M3FNUZ: case GOPT_DT_FLOAT8E5M2:
  case GOPT_DT_FLOAT8E5M2FNUZ: case GOPT_DT_FLOAT8E8M0:
    field = "int32_data";
    have = tp->n_int32_data;
    break;
  case GOPT_DT_UINT4: case GOPT_DT_INT4: case GOPT_DT_FLOAT4E2M1: case GOPT_DT_UINT2:
  case GOPT_DT_INT2: /* one packed byte per int32 */
    field = "int32_data";
    have = tp->n_int32_data;
    want = ((size_t)numel * (size_t)gopt_dtype_bits(dtype) + 7) / 8;
    break;
  case GOPT_DT_INT64:
    field = "int64_data";
    have = tp->n_int64_data;
    break;
  case GOPT_DT_DOUBLE:
  case GOPT_DT_COMPLEX128:
    field = "double_data";
    have = tp->n_double_data;
    if (dtype == GOPT_DT_COMPLEX128) want *= 2;
    break;
  case GOPT_DT_UINT32:
  case GOPT_DT_UINT64:
    field = "uint64_data";
    have = tp->n_uint64_data;
    break;
  case GOPT_DT_STRING:
    field = "string_data";
    have = tp->n_string_data;
    break;
  default:
    return gopt_error_set(err, GOPT_EUNSUP, "%s '%s': unsupported data type %d", what, tname,
                          dtype);
  }
  if (have != want) {
    if (have == 0)
      return gopt_error_set(err, GOPT_EPARSE, "%s '%s': no data (%lld %s elements expected)",
                            what, tname, (long long)numel, gopt_dtype_name(dtype));
    return gopt_error_set(err, GOPT_EPARSE, "%s '%s': %s has %zu values, expected %zu", what,
                          tname, field, have, want);
  }
  size_t total = dtype == GOPT_DT_STRING ? onnx_strings_pack_size(tp->string_data, have)
                                         : (size_t)numel * es;
  buf = malloc(total ? total : 1);
  if (!buf)
    return gopt_error_set(err, GOPT_ENOMEM, "%s '%s': out of memory for %zu bytes", what, tname,
                          total);
  unsigned char *p = buf;
  switch (dtype) {
  case GOPT_DT_FLOAT:
  case GOPT_DT_COMPLEX64:
    for (size_t i = 0; i < have; i++, p += 4) {
      uint32_t u;
      memcpy(&u, &tp->float_data[i], 4);
      put_le(p, u, 4);
    }
    break;
  case GOPT_DT_DOUBLE:
  case GOPT_DT_COMPLEX128:
    for (size_t i = 0; i < have; i++, p += 8) {
      uint64_t u;
      memcpy(&u, &tp->double_data[i], 8);
      put_le(p, u, 8);
    }
    break;
  case GOPT_DT_INT64:
    for (size_t i = 0; i < have; i++, p += 8) put_le(p, (uint64_t)tp->int64_data[i], 8);
    break;
  case GOPT_DT_UINT32:
  case GOPT_DT_UINT64:
    for (size_t i = 0; i < have; i++, p += es) put_le(p, tp->uint64_data[i], es);
    break;
  case GOPT_DT_STRING:
    for (size_t i = 0; i < have; i++) {
      size_t n = tp->string_data[i].len;
      put_le(p, (uint64_t)n, 4);
      if (n) memcpy(p + 4, tp->string_data[i].data, n);
      p += 4 + n;
    }
    break;
  case GOPT_DT_UINT4: case GOPT_DT_INT4: case GOPT_DT_FLOAT4E2M1: case GOPT_DT_UINT2:
  case GOPT_DT_INT2:
    for (size_t i = 0; i < have; i++) p[total - have + i] = (unsigned char)tp->int32_data[i];
    gopt_lowbit_unpack(dtype, p + total - have, numel, p); /* writes stay behind the reads */
    break;
  default: /* int32_data carriers: the value (or bit pattern for 16-bit floats) in the low bytes */
    for (size_t i = 0; i < have; i++, p += es) put_le(p, (uint64_t)(uint32_t)tp->int32_data[i], es);
    break;
  }
  *data = buf;
  *nbytes = total;
  return GOPT_OK;
}

int onnx_tensor_import(gopt_graph *g, const Onnx__TensorProto *tp, const char *name,
                       const char *what, onnx_ext_ctx *ext, int32_t *out, gopt_error *err) {
  int rc = GOPT_OK;
  void *data = NULL;
  size_t nbytes = 0;
  int missing = 0;
  char dbuf[160];
  const char *tname = name && *name ? name : (tp->name ? tp->name : "");
  int dtype = tp->has_data_type ? tp->data_type : 0;
  int64_t numel = 0;
  const char *loc = NULL;
  int64_t ext_off = 0, ext_len = -1;
  *out = -1;
  if (dtype <= GOPT_DT_UNDEFINED || dtype >= GOPT_DT_COUNT) {
    rc = gopt_error_set(err, dtype == 0 ? GOPT_EPARSE : GOPT_EUNSUP,
                        "%s '%s': %s data type %d", what, tname,
                        dtype == 0 ? "missing" : "unsupported", dtype);
    goto done;
  }
  if (tp->n_dims > GOPT_MAX_RANK) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s '%s': rank %zu exceeds the maximum %d", what, tname,
                        tp->n_dims, GOPT_MAX_RANK);
    goto done;
  }
  size_t es = gopt_dtype_size(dtype);
  if (onnx_dims_numel(tp->dims, tp->n_dims, es, &numel)) {
    rc = gopt_error_set(err, GOPT_ERANGE, "%s '%s': invalid dims %s", what, tname,
                        dims_str(tp->dims, tp->n_dims, dbuf, sizeof dbuf));
    goto done;
  }
  if (tp->segment) {
    rc = gopt_error_set(err, GOPT_EUNSUP, "%s '%s': segmented tensors are not supported", what,
                        tname);
    goto done;
  }
  size_t want = (size_t)numel * es;
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    if (dtype == GOPT_DT_STRING) {
      rc = gopt_error_set(err, GOPT_EUNSUP, "%s '%s': external STRING data is not supported",
                          what, tname);
      goto done;
    }
    for (size_t i = 0; i < tp->n_external_data; i++) {
      const Onnx__StringStringEntryProto *e = tp->external_data[i];
      const char *k = e->key ? e->key : "";
      if (strcmp(k, "location") == 0) {
        loc = e->value ? e->value : "";
      } else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
        int64_t v = parse_nonneg(e->value);
        if (v < 0) {
          rc = gopt_error_set(err, GOPT_EPARSE, "%s '%s': bad external data %s '%s'", what, tname,
                              k, e->value ? e->value : "");
          goto done;
        }
        if (k[0] == 'o') ext_off = v;
        else ext_len = v;
      }
    }
    if (!loc || !location_ok(loc)) {
      rc = gopt_error_set(err, GOPT_EPARSE,
                          "%s '%s': external data location '%s' is missing or leaves the model "
                          "directory",
                          what, tname, loc ? loc : "");
      goto done;
    }
    /* The file holds ONNX's packed form: sub-byte types two or four to a byte. */
    size_t packed = (size_t)(((uint64_t)numel * (uint64_t)gopt_dtype_bits(dtype) + 7) / 8);
    if (ext_len >= 0 && (uint64_t)ext_len != (uint64_t)packed) {
      rc = gopt_error_set(err, GOPT_EPARSE,
                          "%s '%s': external data length %lld does not match %s %s (%zu bytes)",
                          what, tname, (long long)ext_len, gopt_dtype_name(dtype),
                          dims_str(tp->dims, tp->n_dims, dbuf, sizeof dbuf), packed);
      goto done;
    }
    nbytes = want;
    if (ext->load && ext->base_dir) {
      rc = read_external(ext->base_dir, loc, ext_off, packed, what, tname, &data, &missing, err);
      if (rc) goto done;
      if (data && gopt_dtype_bits(dtype) < 8) rc = unpack_lowbit(dtype, numel, want, &data, what, tname, err);
      if (rc) goto done;
    } else {
      missing = ext->load; /* load wanted but no directory to read from */
    }
    if (missing) {
      if (ext->n_missing++ == 0) snprintf(ext->first_missing, sizeof ext->first_missing, "%s", loc);
    }
  } else if (tp->has_raw_data) {
    if (dtype == GOPT_DT_STRING) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s '%s': STRING tensors cannot use raw_data", what,
                          tname);
      goto done;
    }
    size_t packed = (size_t)(((uint64_t)numel * (uint64_t)gopt_dtype_bits(dtype) + 7) / 8);
    if (tp->raw_data.len != packed) {
      rc = gopt_error_set(err, GOPT_EPARSE, "%s '%s': raw_data has %zu bytes, expected %zu (%s %s)",
                          what, tname, tp->raw_data.len, packed, gopt_dtype_name(dtype),
                          dims_str(tp->dims, tp->n_dims, dbuf, sizeof dbuf));
      goto done;
    }
    data = malloc(want ? want : 1);
    if (!data) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "%s '%s': out of memory for %zu bytes", what, tname,
                          want);
      goto done;
    }
    /* sub-byte types always unpack: one element packs into one byte too (and is sign-extended) */
    if (gopt_dtype_bits(dtype) < 8) gopt_lowbit_unpack(dtype, tp->raw_data.data, numel, data);
    else if (want) memcpy(data, tp->raw_data.data, want);
    nbytes = want;
  } else if (numel == 0 && dtype != GOPT_DT_STRING) {
    data = malloc(1);
    if (!data) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
    nbytes = 0;
  } else {
    rc = typed_data(tp, dtype, numel, what, tname, &data, &nbytes, err);
    if (rc) goto done;
  }
  int32_t t = gopt_graph_add_tensor(g, name, dtype, (int)tp->n_dims, tp->dims, err);
  if (t < 0) {
    rc = err ? err->code : GOPT_EINVAL;
    if (rc == GOPT_OK) rc = GOPT_EINVAL;
    goto done;
  }
  /* A constant whose bytes are missing passes NULL: gopt_tensor_set_const records the size. */
  static const unsigned char empty[1];
  rc = gopt_tensor_set_const(g, t, data ? data : (loc ? NULL : empty), nbytes, err);
  if (rc) goto done;
  if (loc && !data) {
    gopt_const *k = &g->consts.a[g->tensors.a[t].cdata];
    k->external = gopt_graph_intern(g, loc);
    k->ext_offset = ext_off;
    k->ext_length = ext_len;
    if (k->external == UINT32_MAX) {
      rc = gopt_error_set(err, GOPT_ENOMEM, "out of memory");
      goto done;
    }
  }
  *out = t;
done:
  free(data);
  return rc;
}

int onnx_tensor_export(const gopt_graph *g, int32_t t, const char *name, onnx_arena *ar,
                       onnx_ext_out *eo, Onnx__TensorProto *tp, gopt_error *err) {
  const gopt_tensor *x = &g->tensors.a[t];
  const int64_t *d = x->rank ? gopt_tensor_dims(g, t) : NULL;
  const char *tname = gopt_graph_str(g, x->name);
  onnx__tensor_proto__init(tp);
  tp->name = (char *)name;
  if (x->flags & GOPT_T_NOSHAPE)
    return gopt_error_set(err, GOPT_EINVAL, "constant '%s' has no shape", tname);
  tp->n_dims = x->rank;
  tp->dims = onnx_arena_array(ar, x->rank ? x->rank : 1, sizeof(int64_t));
  if (!tp->dims) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
  for (int i = 0; i < x->rank; i++) {
    if (d[i] < 0)
      return gopt_error_set(err, GOPT_EINVAL, "constant '%s' has a symbolic dimension", tname);
    tp->dims[i] = d[i];
  }
  tp->has_data_type = 1;
  tp->data_type = x->dtype;
  if (x->cdata < 0) return GOPT_OK;
  const gopt_const *k = &g->consts.a[x->cdata];
  if (k->data && x->dtype == GOPT_DT_STRING) {
    /* Decode the (u32 length, bytes) records back into string_data. */
    int64_t numel = gopt_tensor_numel(g, t);
    const unsigned char *p = k->data, *end = p + k->nbytes;
    tp->string_data = onnx_arena_array(ar, numel ? (size_t)numel : 1, sizeof *tp->string_data);
    if (!tp->string_data) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    for (int64_t i = 0; i < numel; i++) {
      if (end - p < 4) return gopt_error_set(err, GOPT_EINVAL, "constant '%s': bad string data", tname);
      size_t n = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
      p += 4;
      if ((size_t)(end - p) < n)
        return gopt_error_set(err, GOPT_EINVAL, "constant '%s': bad string data", tname);
      tp->string_data[i].len = n;
      tp->string_data[i].data = (uint8_t *)p;
      p += n;
    }
    tp->n_string_data = (size_t)numel;
  } else if (k->data && gopt_dtype_bits(x->dtype) > 0 && gopt_dtype_bits(x->dtype) < 8) { /* sub-byte: packed */
    int64_t numel = gopt_tensor_numel(g, t);
    size_t nb = (size_t)(numel * gopt_dtype_bits(x->dtype) + 7) / 8;
    uint8_t *packed = onnx_arena_alloc(ar, nb ? nb : 1);
    if (!packed) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    gopt_lowbit_pack(x->dtype, k->data, numel, packed);
    tp->has_raw_data = 1;
    tp->raw_data.len = nb;
    tp->raw_data.data = packed;
  } else if (k->data) {
    tp->has_raw_data = 1;
    tp->raw_data.len = k->nbytes;
    tp->raw_data.data = k->data;
  } else if (k->external || eo) {
    const char *loc = k->external ? gopt_graph_str(g, k->external) : eo->location;
    int64_t off = k->ext_offset, length = k->ext_length;
    if (!k->external) {
      /* No source file: reserve the next range of the structure-only data file. */
      length = (gopt_tensor_numel(g, t) * gopt_dtype_bits(x->dtype) + 7) / 8; /* packed, as written */
      off = eo->next;
      eo->next += (length + 63) / 64 * 64;
    }
    Onnx__StringStringEntryProto **ents = onnx_arena_array(ar, 3, sizeof *ents);
    Onnx__StringStringEntryProto *e = onnx_arena_array(ar, 3, sizeof *e);
    char *num = onnx_arena_alloc(ar, 64);
    if (!ents || !e || !num) return gopt_error_set(err, GOPT_ENOMEM, "out of memory");
    size_t n = 0;
    onnx__string_string_entry_proto__init(&e[n]);
    e[n].key = "location";
    e[n].value = (char *)loc;
    ents[n] = &e[n];
    n++;
    if (off > 0) {
      onnx__string_string_entry_proto__init(&e[n]);
      snprintf(num, 32, "%lld", (long long)off);
      e[n].key = "offset";
      e[n].value = num;
      ents[n] = &e[n];
      n++;
    }
    if (length >= 0) {
      onnx__string_string_entry_proto__init(&e[n]);
      snprintf(num + 32, 32, "%lld", (long long)length);
      e[n].key = "length";
      e[n].value = num + 32;
      ents[n] = &e[n];
      n++;
    }
    tp->n_external_data = n;
    tp->external_data = ents;
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  }
  return GOPT_OK;
}
