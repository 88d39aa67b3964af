/* onnx_internal.h: helpers shared by ONNX import and export (internal): a string-keyed hash map,
 * a bump arena for building protobuf-c structs, the protobuf guard (nesting depth and allocation
 * cap) and the TensorProto <-> constant conversions. */
#ifndef GOPT_ONNX_INTERNAL_H
#define GOPT_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gopt/graph.h"
#include "onnx/onnx.pb-c.h"

/* ---- string-keyed map (keys are borrowed, not copied) ---------------------------------------- */
typedef struct onnx_map {
  const char **keys;
  int64_t *vals;
  size_t cap, n; /* cap: power of two, 0 when empty */
} onnx_map;

/* Value of key, or -1 when absent. */
int64_t onnx_map_get(const onnx_map *m, const char *key);
/* Inserts or replaces; returns 0 or GOPT_ENOMEM. */
int onnx_map_put(onnx_map *m, const char *key, int64_t val);
void onnx_map_free(onnx_map *m);

/* ---- arena: many small zeroed allocations freed at once ---------------------------------------- */
typedef struct onnx_arena {
  struct onnx_arena_blk *head;
} onnx_arena;

/* Zeroed, 16-byte aligned memory owned by the arena; NULL when out of memory. */
void *onnx_arena_alloc(onnx_arena *a, size_t n);
/* n elements of size sz with overflow check. */
void *onnx_arena_array(onnx_arena *a, size_t n, size_t sz);
char *onnx_arena_strdup(onnx_arena *a, const char *s);
void onnx_arena_free(onnx_arena *a);

/* ---- protobuf guard ------------------------------------------------------------------------------- */
/* Maximum nesting of protobuf messages accepted (protobuf-c unpacks recursively and would overflow
 * the stack on deeply nested input). */
#define ONNX_MAX_MSG_DEPTH 160

/* Walks the wire format of a message of type desc (tags and lengths only, guided by the
 * descriptors) and checks that sub-messages nest at most max_depth deep and that every length
 * stays inside its parent. Returns 0 when within limits, -1 when malformed, -2 when too deep. */
int onnx_wire_check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                    int max_depth);

/* Allocator for protobuf-c that fails once `limit` bytes are live (a cap proportional to the
 * input size, so hostile input cannot make the parser allocate without bound). */
typedef struct onnx_alloc_cap {
  ProtobufCAllocator base;
  size_t live, limit;
  int hit; /* set when an allocation was refused for the cap */
} onnx_alloc_cap;
void onnx_alloc_cap_init(onnx_alloc_cap *a, size_t limit);

/* ---- tensors ---------------------------------------------------------------------------------------- */
/* Element count of dims (rank n) into *numel; GOPT_ERANGE when a dim is negative or the product
 * (or its byte size at elem_size) does not fit comfortably in int64. */
int onnx_dims_numel(const int64_t *dims, size_t n, size_t elem_size, int64_t *numel);

/* Strings of a STRING constant are stored in gopt_const.data as a sequence of (uint32 little-endian
 * length, bytes) records. */
size_t onnx_strings_pack_size(const ProtobufCBinaryData *s, size_t n);

/* External-data policy and bookkeeping of one import. */
typedef struct onnx_ext_ctx {
  const char *base_dir;   /* directory locations are relative to; NULL: never read files */
  int load;               /* read the bytes when the file exists */
  size_t n_missing;       /* tensors whose external file was missing or not read */
  char first_missing[256];
} onnx_ext_ctx;

/* Creates tensor `name` (NULL or "": a generated name) in g as a constant from tp: dtype, dims and
 * bytes from raw_data, the typed fields, or external data. `what` names the tensor's role in
 * messages ("initializer"). Stores the new id in *out. Returns 0 or an error naming the tensor. */
int onnx_tensor_import(gopt_graph *g, const Onnx__TensorProto *tp, const char *name,
                       const char *what, onnx_ext_ctx *ext, int32_t *out, gopt_error *err);

/* Where constants that have neither bytes nor an external reference (built in memory with no
 * data, e.g. zoo weights) are referenced on export: consecutive ranges of one data file that the
 * exporter does not write, so the model is a valid structure-only ONNX file like the corpus. */
typedef struct onnx_ext_out {
  const char *location; /* relative file name, e.g. "model.onnx.data" */
  int64_t next;         /* next free offset (64-byte aligned) */
} onnx_ext_out;

/* Fills tp from constant tensor t under `name`: raw_data (borrowing the constant's bytes), or an
 * external-data reference when the bytes are missing (the original reference, or a new range of
 * eo's file when there is none). Other memory comes from the arena. */
int onnx_tensor_export(const gopt_graph *g, int32_t t, const char *name, onnx_arena *ar,
                       onnx_ext_out *eo, Onnx__TensorProto *tp, gopt_error *err);

/* ---- opsets before 7 (onnx_legacy.c) ---------------------------------------------------------------- */
/* For a model importing the default domain at opset 1-6: GOPT_OK when every default-domain node of
 * g and its sub-graphs has an op whose version at that opset means the same as at opset 7 (legacy
 * attributes such as consumed_inputs are ignored), else GOPT_EUNSUP naming the first other node. */
int onnx_legacy_check(const gopt_graph *g, int64_t opset, gopt_error *err);

#endif
