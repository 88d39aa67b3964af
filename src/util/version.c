/* version.c: the library's version string, set by CMake from project(VERSION) (GOPT_VERSION_STRING),
 * so `gopt --version`, gopt.pc, the soname and the ONNX producer_version all agree. */
#include "gopt/util.h"

#ifndef GOPT_VERSION_STRING
#error "GOPT_VERSION_STRING must be defined by the build (CMakeLists.txt)"
#endif

const char *gopt_version(void) { return GOPT_VERSION_STRING; }
