/* k_ref_nn.c: reference kernels (k_ref.h) for network ops: ConvTranspose, GRU, RNN, Einsum, LRN,
 * MeanVarianceNormalization, the quantized ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/k_ref.h"

const ref_entry ex_ref_nn_table[] = {
    {NULL, NULL, NULL},
};
