# packaging.cmake: what `cmake --install` places (CLI, libraries, headers, gopt.pc, man page,
# shipped policies and rule files, the ONNX Runtime runner) and the Debian package CPack makes from it
# (`cpack -G DEB` in the build tree, or tools/make-deb.sh). The package's runtime dependencies
# come from dpkg-shlibdeps over the installed binaries, so they name the Debian library packages
# that the build actually linked.
include(GNUInstallDirs)

# libgopt.so carries the project version; the soname changes with the major version.
set_target_properties(gopt_shared PROPERTIES VERSION ${PROJECT_VERSION}
                                             SOVERSION ${PROJECT_VERSION_MAJOR})

# gopt.pc finds the prefix relative to itself (${pcfiledir}), so it stays right under any
# `cmake --install --prefix` and in the .deb.
file(RELATIVE_PATH GOPT_PC_PREFIX_REL /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" GOPT_PC_PREFIX_REL "${GOPT_PC_PREFIX_REL}")
configure_file(${CMAKE_SOURCE_DIR}/packaging/gopt.pc.in ${CMAKE_BINARY_DIR}/gopt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gopt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
configure_file(${CMAKE_SOURCE_DIR}/packaging/gopt.1 ${CMAKE_BINARY_DIR}/gopt.1 @ONLY) # the version
install(FILES ${CMAKE_BINARY_DIR}/gopt.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# Trained artefacts, when the checkout has them: policies/*.gpol and rules/*.
foreach(dir policies rules)
  if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${dir})
    install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gopt/${dir})
  endif()
endforeach()

# The ONNX Runtime runner `gopt rewrite` verifies with (it needs npm onnxruntime-node on NODE_PATH
# when installed).
install(FILES ${CMAKE_SOURCE_DIR}/tools/ort/ort_run.js DESTINATION ${CMAKE_INSTALL_DATADIR}/gopt/tools/ort)

# The Python binding (python/gopt, pure Python over libgopt.so with ctypes and numpy) goes where
# Debian's /usr/bin/python3 imports it from when the prefix is /usr (the .deb):
# PREFIX/lib/python3/dist-packages/gopt; other prefixes put PREFIX/lib/python3/dist-packages on
# PYTHONPATH. _install.py tells the package where the library is relative to itself, so an
# installed binding loads the installed libgopt.so.<major> under any prefix (cmake --install
# --prefix included). Its examples go to share/gopt/examples.
set(GOPT_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "where cmake --install puts the Python package gopt, relative to the prefix")
file(RELATIVE_PATH GOPT_PY_LIBDIR_REL /p/${GOPT_PYTHON_INSTALL_DIR}/gopt /p/${CMAKE_INSTALL_LIBDIR})
configure_file(${CMAKE_SOURCE_DIR}/packaging/python_install.py.in ${CMAKE_BINARY_DIR}/python/_install.py @ONLY)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/gopt DESTINATION ${GOPT_PYTHON_INSTALL_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/python/_install.py DESTINATION ${GOPT_PYTHON_INSTALL_DIR}/gopt)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gopt/examples
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

set(CPACK_PACKAGE_NAME gopt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gopt developers <gopt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "graph-level optimizer for ML compilers: placement, fusion, scheduling, rewriting")
set(CPACK_PACKAGE_DESCRIPTION
    "gopt makes the graph-level decisions of ML compilers (device placement, operator fusion,\
 scheduling, graph rewriting, pass ordering) with learned optimizers and every heuristic and\
 search baseline they must beat. This package holds the gopt command, libgopt (shared and\
 static), its headers, pkg-config file and man page, the Python binding (ctypes + numpy) and\
 the shipped trained artefacts.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX}) # tools/make-deb.sh configures /usr
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # gopt_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "graphviz, python3, python3-numpy") # report graph layout; the Python binding
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/gopt")
set(CPACK_GENERATOR DEB)
include(CPack)
