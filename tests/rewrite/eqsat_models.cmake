# eqsat on small models reproducing the vgg11/vgg19 (unsound rule instance) and efficientnet_b0/
# lraspp (merge_group_conv lost its input) failures: verified by the executor and ONNX Runtime.
add_test(NAME rewrite_eqsat_models COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_eqsat_models.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
