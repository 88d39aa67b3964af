/* gopt/hlo.h: XLA HLO text modules in and out of the graph IR.
 *
 * Import reads both text syntaxes XLA writes (the older one with `%` names, typed operands and
 * computation signatures; the newer one with bare names, untyped operands, `/ *index=N* /`
 * comments and elided constants `{...}`). Every computation becomes a gopt_graph (the ENTRY one is
 * returned; called computations are sub-graph attributes of the calling node, one copy per call
 * site, named after the computation). Every instruction is kept: parameters are graph inputs,
 * constants are constant tensors (elided ones have no bytes), every other instruction is one node
 * whose type is "hlo::OPCODE". A tuple-shaped value is flattened into its leaf tensors (a node has
 * one output per leaf, named NAME#i#j...). Nodes get the gopt op kind with the same semantics
 * where there is one (and gopt's shape rules then check the text's shapes); the others carry the
 * flag GOPT_N_OPAQUE with the shapes the text gives and a kind of the same fusion class. See
 * docs/HLO.md for the mapping and the attribute encoding. */
#ifndef GOPT_HLO_H
#define GOPT_HLO_H

#include <stddef.h>

#include "gopt/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses HLO text (len bytes, need not be NUL-terminated) into *out. label names the source in
 * messages, which are one line: "LABEL:LINE:COL: what is wrong". Returns 0 or a GOPT_E* code. */
int gopt_hlo_load_mem(const char *text, size_t len, const char *label, gopt_graph **out,
                      gopt_error *err);
int gopt_hlo_load(const char *path, gopt_graph **out, gopt_error *err);

/* 1 when path ends in .hlo, or its first line starts with "HloModule". */
int gopt_hlo_is_hlo_file(const char *path);

/* Instructions of g counted as HLO text counts them: over g and every distinct computation it
 * calls (sub-graphs counted once per name), parameters + constants + nodes. */
size_t gopt_hlo_instruction_count(const gopt_graph *g);

/* Writes g as HLO text (old syntax, which XLA's parser reads): a malloc'd NUL-terminated string in
 * *text. Nodes of other front ends (ONNX ops, training ops) are written as custom-calls with
 * custom_call_target="gopt.TYPE" and their attributes in backend_config, so they re-import to
 * the same graph. Returns 0 or an error. */
int gopt_hlo_save_mem(const gopt_graph *g, char **text, size_t *len, gopt_error *err);
int gopt_hlo_save(const gopt_graph *g, const char *path, gopt_error *err);

#ifdef __cplusplus
}
#endif
#endif
