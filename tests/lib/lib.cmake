# lib.cmake: checks on the shared library itself: libgopt.so exports only gopt_* names (the
# version script src/gopt.map keeps internal helpers and the protobuf-c code local).
add_test(NAME lib_exports_only_gopt
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_exports.sh $<TARGET_FILE:gopt_shared>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
