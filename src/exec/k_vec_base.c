/* k_vec_base.c: the vector kernels of k_vec.inc compiled for baseline (flags in CMakeLists.txt); entry
 * points end in _base. */
#define EX_VEC_SUFFIX base
#include "exec/k_vec.inc"
