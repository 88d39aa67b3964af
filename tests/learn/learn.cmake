# The policy file loader's fuzz seeds (fuzz/corpus_policy: the shipped policies' metadata, framed
# by make_policy_seeds.py --small, and any regress-* finding) replayed through the fuzz target's
# entry point (fuzz/fuzz_policy_load.c) in every build.
add_executable(replay_policy ${CMAKE_SOURCE_DIR}/fuzz/replay_onnx.c ${CMAKE_SOURCE_DIR}/fuzz/fuzz_policy_load.c)
target_link_libraries(replay_policy PRIVATE gopt)
add_test(NAME policy_fuzz_seed_corpus COMMAND replay_policy ${CMAKE_SOURCE_DIR}/fuzz/corpus_policy "*"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(policy_fuzz_seed_corpus PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer" LABELS learn)
