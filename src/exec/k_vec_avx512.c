/* k_vec_avx512.c: the vector kernels of k_vec.inc compiled for AVX-512 (flags in CMakeLists.txt); entry
 * points end in _avx512. */
#define EX_VEC_SUFFIX avx512
#include "exec/k_vec.inc"
