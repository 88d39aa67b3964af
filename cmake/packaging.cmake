# packaging.cmake: what `cmake --install` places (CLI, libraries, headers, gopt.pc, man page,
# shipped policies and rule files) and the Debian package CPack makes from it
# (`cpack -G DEB` in the build tree, or tools/make-deb.sh). The package's runtime dependencies
# come from dpkg-shlibdeps over the installed binaries, so they name the Debian library packages
# that the build actually linked.
include(GNUInstallDirs)

# libgopt.so carries the project version; the soname changes with the major version.
set_target_properties(gopt_shared PROPERTIES VERSION ${PROJECT_VERSION}
                                             SOVERSION ${PROJECT_VERSION_MAJOR})

configure_file(${CMAKE_SOURCE_DIR}/packaging/gopt.pc.in ${CMAKE_BINARY_DIR}/gopt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gopt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/gopt.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# Trained artefacts, when the checkout has them: policies/*.gpol and rules/*.
foreach(dir policies rules)
  if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${dir})
    install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gopt/${dir})
  endif()
endforeach()

set(CPACK_PACKAGE_NAME gopt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gopt developers <gopt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "graph-level optimizer for ML compilers: placement, fusion, scheduling, rewriting")
set(CPACK_PACKAGE_DESCRIPTION
    "gopt makes the graph-level decisions of ML compilers (device placement, operator fusion,\
 scheduling, graph rewriting, pass ordering) with learned optimizers and every heuristic and\
 search baseline they must beat. This package holds the gopt command, libgopt (shared and\
 static), its headers, pkg-config file and man page, and the shipped trained artefacts.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX}) # tools/make-deb.sh configures /usr
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # gopt_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/gopt")
set(CPACK_GENERATOR DEB)
include(CPack)
