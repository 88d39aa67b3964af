# Training steps of PyTorch exports that reach the newer gradient rules (PixelShuffle, ConvTranspose,
# InstanceNorm/GroupNorm, PReLU, maximum/amax, cumsum, GRU, RNN, einsum): built and simulated.
add_test(NAME train_torch_exports COMMAND ${GOPT_PYTHON} ${CMAKE_SOURCE_DIR}/tests/train/check_torch_training.py ${GOPT_BIN}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(train_torch_exports PROPERTIES LABELS train TIMEOUT 300)
