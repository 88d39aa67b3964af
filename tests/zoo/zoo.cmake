# Zoo models against independent references (torchvision parameter counts; TASO's builders worked
# out by hand for NasNet-A, NasRNN and Tensat's BERT) through `gopt info --json`.
add_test(NAME zoo_tensat_reference
         COMMAND ${GOPT_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_zoo_torch.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(zoo_tensat_reference PROPERTIES TIMEOUT 120)
