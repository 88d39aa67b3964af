/* k_vec_avx2.c: the vector kernels of k_vec.inc compiled for AVX2 (flags in CMakeLists.txt); entry
 * points end in _avx2. */
#define EX_VEC_SUFFIX avx2
#include "exec/k_vec.inc"
