/* onnx_legacy.c: models of the default ONNX domain at opsets 1-6. gopt's op rules, shape inference
 * and kernels follow the opset-7 (and later) definitions, so such a model is accepted only when
 * every default-domain node has an op whose version in effect at the model's opset means the same
 * as its opset-7 version. The table below comes from the ONNX operator Changelog: the versions
 * before 7 of these ops differ from the opset-7 ones only by the legacy `consumed_inputs`
 * attribute (dropped in version 6; an optimisation hint that does not change the result, ignored
 * here) or by the types they accept. Every other op (Add/Mul with the old `broadcast` attribute,
 * BatchNormalization, Dropout, Gemm, PRelu, …) is refused with the node named. */
#include <string.h>

#include "onnx/onnx_internal.h"

typedef struct legacy_op {
  const char *type;
  int since; /* first opset whose version of the op means the same as at opset 7 */
} legacy_op;

static const legacy_op legacy_ops[] = {
    /* version 1 (consumed_inputs), version 6 (types only): same function */
    {"Abs", 1}, {"Ceil", 1}, {"Elu", 1}, {"Exp", 1}, {"Floor", 1}, {"HardSigmoid", 1},
    {"InstanceNormalization", 1}, {"LeakyRelu", 1}, {"Log", 1}, {"Neg", 1}, {"Reciprocal", 1},
    {"Relu", 1}, {"Sigmoid", 1}, {"Sqrt", 1}, {"Tanh", 1},
    /* version 1 still in effect at opset 7 */
    {"GlobalAveragePool", 1}, {"GlobalMaxPool", 1}, {"Identity", 1}, {"MatMul", 1}, {"Not", 1},
    {"Softplus", 1}, {"Softsign", 1},
    /* Selu-1's default alpha/gamma (1.6732, 1.0507) are rounded versions of Selu-6's */
    {"Selu", 6},
    {NULL, 0}};

static int legacy_since(const char *type) {
  for (const legacy_op *o = legacy_ops; o->type; o++)
    if (!strcmp(o->type, type)) return o->since;
  return -1;
}

int onnx_legacy_check(const gopt_graph *g, int64_t opset, gopt_error *err) {
  for (size_t n = 0; n < g->nodes.n; n++) {
    const char *type = gopt_graph_str(g, g->nodes.a[n].type);
    if (strstr(type, "::")) continue; /* another domain: its own opset applies */
    int since = legacy_since(type);
    if (since < 0 || opset < since)
      return gopt_error_set(err, GOPT_EUNSUP,
                            "node '%s' (%s): not supported at opset %lld of the default ONNX domain "
                            "(gopt accepts opsets 1-6 only for ops that mean the same there as at "
                            "opset 7); convert the model to opset 7 or later",
                            gopt_graph_str(g, g->nodes.a[n].name), type, (long long)opset);
  }
  for (size_t i = 0; i < g->subgraphs.n; i++) {
    int rc = onnx_legacy_check(g->subgraphs.a[i], opset, err);
    if (rc) return rc;
  }
  return GOPT_OK;
}
