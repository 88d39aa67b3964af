/* onnx_util.c: support code for ONNX import/export: a string-keyed hash map, a bump arena, the
 * protobuf guard (descriptor-guided nesting-depth check and an allocation-capped allocator for
 * protobuf-c) and dimension arithmetic with overflow checks. */
#include <stdlib.h>
#include <string.h>

#include "gopt/util.h"
#include "onnx/onnx_internal.h"

/* ---- map ------------------------------------------------------------------------------------ */

static size_t map_hash(const char *s) {
  return (size_t)gopt_hash_bytes(s, strlen(s), 0x6f6e6e78);
}

int64_t onnx_map_get(const onnx_map *m, const char *key) {
  if (!m->cap || !key) return -1;
  size_t mask = m->cap - 1;
  for (size_t i = map_hash(key) & mask;; i = (i + 1) & mask) {
    if (!m->keys[i]) return -1;
    if (strcmp(m->keys[i], key) == 0) return m->vals[i];
  }
}

static int map_grow(onnx_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  const char **keys = calloc(ncap, sizeof *keys);
  int64_t *vals = calloc(ncap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return GOPT_ENOMEM;
  }
  for (size_t j = 0; j < m->cap; j++) {
    if (!m->keys[j]) continue;
    size_t i = map_hash(m->keys[j]) & (ncap - 1);
    while (keys[i]) i = (i + 1) & (ncap - 1);
    keys[i] = m->keys[j];
    vals[i] = m->vals[j];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = ncap;
  return GOPT_OK;
}

int onnx_map_put(onnx_map *m, const char *key, int64_t val) {
  if ((m->n + 1) * 2 > m->cap && map_grow(m)) return GOPT_ENOMEM;
  size_t mask = m->cap - 1;
  size_t i = map_hash(key) & mask;
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->n++;
  }
  m->vals[i] = val;
  return GOPT_OK;
}

void onnx_map_free(onnx_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ---- arena ---------------------------------------------------------------------------------- */

struct onnx_arena_blk {
  struct onnx_arena_blk *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
};

#define ARENA_BLOCK (64 * 1024)

void *onnx_arena_alloc(onnx_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  struct onnx_arena_blk *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
    if (cap > SIZE_MAX - sizeof *b) return NULL;
    b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    if (a->head && n > ARENA_BLOCK) {
      /* A big one-off block goes behind the current one so the current keeps filling. */
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
  }
  void *p = b->mem + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

void *onnx_arena_array(onnx_arena *a, size_t n, size_t sz) {
  if (sz && n > (SIZE_MAX / 2) / sz) return NULL;
  return onnx_arena_alloc(a, n * sz);
}

char *onnx_arena_strdup(onnx_arena *a, const char *s) {
  size_t n = strlen(s);
  char *p = onnx_arena_alloc(a, n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

void onnx_arena_free(onnx_arena *a) {
  struct onnx_arena_blk *b = a->head;
  while (b) {
    struct onnx_arena_blk *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
}

/* ---- protobuf guard --------------------------------------------------------------------------- */

static int read_varint(const uint8_t *buf, size_t end, size_t *pos, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return -1;
    uint8_t b = buf[(*pos)++];
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -1;
}

int onnx_wire_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                    int max_depth) {
  const ProtobufCMessageDescriptor *dstack[ONNX_MAX_MSG_DEPTH + 1];
  size_t estack[ONNX_MAX_MSG_DEPTH + 1];
  if (max_depth > ONNX_MAX_MSG_DEPTH) max_depth = ONNX_MAX_MSG_DEPTH;
  int sp = 0;
  size_t pos = 0;
  dstack[0] = desc;
  estack[0] = len;
  for (;;) {
    if (pos == estack[sp]) {
      if (sp == 0) return 0;
      sp--;
      continue;
    }
    uint64_t tag, v;
    if (read_varint(buf, estack[sp], &pos, &tag)) return -1;
    uint64_t field = tag >> 3;
    if (field == 0 || field > 0x1fffffff) return -1;
    switch (tag & 7) {
    case 0:
      if (read_varint(buf, estack[sp], &pos, &v)) return -1;
      break;
    case 1:
      if (estack[sp] - pos < 8) return -1;
      pos += 8;
      break;
    case 5:
      if (estack[sp] - pos < 4) return -1;
      pos += 4;
      break;
    case 2: {
      if (read_varint(buf, estack[sp], &pos, &v) || v > estack[sp] - pos) return -1;
      const ProtobufCFieldDescriptor *f =
          dstack[sp] ? protobuf_c_message_descriptor_get_field(dstack[sp], (unsigned)field) : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (sp + 1 > max_depth) return -2;
        sp++;
        dstack[sp] = f->descriptor;
        estack[sp] = pos + (size_t)v;
      } else {
        pos += (size_t)v;
      }
      break;
    }
    default:
      return -1; /* groups (3, 4) are not supported by protobuf-c; 6 and 7 are invalid */
    }
  }
}

#define CAP_HDR 16

static void *cap_alloc(void *ud, size_t size) {
  onnx_alloc_cap *a = ud;
  if (size > a->limit - a->live || size > SIZE_MAX - CAP_HDR) {
    a->hit = 1;
    return NULL;
  }
  unsigned char *p = malloc(size + CAP_HDR);
  if (!p) return NULL;
  memcpy(p, &size, sizeof size);
  a->live += size;
  return p + CAP_HDR;
}

static void cap_free(void *ud, void *ptr) {
  onnx_alloc_cap *a = ud;
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - CAP_HDR;
  size_t size;
  memcpy(&size, p, sizeof size);
  a->live -= size;
  free(p);
}

void onnx_alloc_cap_init(onnx_alloc_cap *a, size_t limit) {
  a->base.alloc = cap_alloc;
  a->base.free = cap_free;
  a->base.allocator_data = a;
  a->live = 0;
  a->limit = limit;
  a->hit = 0;
}

/* ---- dims ------------------------------------------------------------------------------------ */

int onnx_dims_numel(const int64_t *dims, size_t n, size_t elem_size, int64_t *numel) {
  const int64_t lim = INT64_C(1) << 56;
  int64_t nz = 1;
  int zero = 0;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] < 0) return GOPT_ERANGE;
    if (dims[i] == 0) {
      zero = 1;
      continue;
    }
    if (dims[i] > lim / nz) return GOPT_ERANGE;
    nz *= dims[i];
  }
  if (elem_size > 1 && nz > lim / (int64_t)elem_size) return GOPT_ERANGE;
  *numel = zero ? 0 : nz;
  return GOPT_OK;
}

size_t onnx_strings_pack_size(const ProtobufCBinaryData *s, size_t n) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += 4 + s[i].len;
  return total;
}
