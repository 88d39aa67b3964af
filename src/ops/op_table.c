/* op_table.c: names and fusion classes of the op kinds listed in op_list.h, and name lookup. */
#include <string.h>

#include "gopt/ops.h"

static const char *const op_names[GOPT_OP_COUNT] = {
#define GOPT_OP(e, name, cls) name,
#include "gopt/op_list.h"
};

static const unsigned char op_classes[GOPT_OP_COUNT] = {
#define GOPT_OP(e, name, cls) GOPT_OPC_##cls,
#include "gopt/op_list.h"
};

int gopt_op_from_name(const char *type) {
  if (!type || !*type) return GOPT_OP_OPAQUE;
  /* Linear scan over ~120 names happens once per imported node; a hash is not worth it. */
  for (int i = 1; i < GOPT_OP_COUNT; i++)
    if (strcmp(op_names[i], type) == 0) return i;
  return GOPT_OP_OPAQUE;
}

const char *gopt_op_name(int op) {
  return (op >= 0 && op < GOPT_OP_COUNT) ? op_names[op] : "";
}

int gopt_op_class_of(int op) {
  return (op >= 0 && op < GOPT_OP_COUNT) ? op_classes[op] : GOPT_OPC_OPAQUE;
}

const char *gopt_op_class_name(int cls) {
  static const char *const names[] = {"shape", "elemwise", "broadcast", "injective",
                                      "reduce", "conv", "opaque"};
  return (cls >= 0 && cls <= GOPT_OPC_OPAQUE) ? names[cls] : "opaque";
}
