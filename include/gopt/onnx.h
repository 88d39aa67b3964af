/* gopt/onnx.h: ONNX import and export of the graph IR. */
#ifndef GOPT_ONNX_H
#define GOPT_ONNX_H

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gopt_onnx_load_opts {
  /* Directory external data locations are relative to (NULL: the model file's directory). */
  const char *base_dir;
  /* Load external data bytes when the files exist (0: structure only, never read them). */
  int load_external_data;
} gopt_onnx_load_opts;

/* Loads an ONNX model file into a new graph (*out). Initializers become constant tensors (raw and
 * typed fields; external data loaded when its file exists, otherwise kept as missing with one
 * warning); Constant nodes become constants; value_info shapes are kept; every node is kept
 * (an op with no gopt rule becomes an opaque node whose outputs need value_info shapes; without
 * them the load fails naming the node). Shapes are not inferred here: call gopt_infer_shapes().
 * Returns 0 or an error whose message starts with the file name. opts may be NULL. */
int gopt_onnx_load(const char *path, const gopt_onnx_load_opts *opts, gopt_graph **out,
                   gopt_error *err);
/* Same from memory; label names the source in messages. */
int gopt_onnx_load_mem(const void *buf, size_t len, const char *label,
                       const gopt_onnx_load_opts *opts, gopt_graph **out, gopt_error *err);

/* Writes g as an ONNX model (via a temporary file renamed into place). Constants whose bytes are
 * missing are written as external-data references to their original location. */
int gopt_onnx_save(const gopt_graph *g, const char *path, gopt_error *err);
/* Serialises to a malloc'd buffer (*buf, *len). */
int gopt_onnx_save_mem(const gopt_graph *g, void **buf, size_t *len, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
