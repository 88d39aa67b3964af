# python.cmake: the Python binding's tests, run with Debian's /usr/bin/python3 against this build's
# libgopt.so (GOPT_LIB) and the checkout's python/ (PYTHONPATH): the binding agrees with the CLI's
# JSON (check_binding.py), the environment's contract (check_env.py), and the REINFORCE example
# that must beat random placement (python/examples/reinforce_placement.py, fixed seed).
# In a sanitizer build the interpreter is not instrumented, so the ASan runtime is preloaded and
# leak checking is off (CPython keeps objects alive at exit by design).
set(PY_ENV GOPT_LIB=$<TARGET_FILE:gopt_shared> PYTHONPATH=${CMAKE_SOURCE_DIR}/python OMP_NUM_THREADS=2)
if(GOPT_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE PY_ASAN
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND PY_ENV LD_PRELOAD=${PY_ASAN} ASAN_OPTIONS=detect_leaks=0)
endif()
set(PY_DIR ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME python_binding COMMAND ${GOPT_PYTHON} ${PY_DIR}/check_binding.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME python_env COMMAND ${GOPT_PYTHON} ${PY_DIR}/check_env.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME python_reinforce_placement
         COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/python/examples/reinforce_placement.py --seed 0
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_binding python_env python_reinforce_placement PROPERTIES
                     ENVIRONMENT "${PY_ENV}" LABELS python TIMEOUT 300)
