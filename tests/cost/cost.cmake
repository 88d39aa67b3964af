# Fuzz seeds and regressions of the SQLite loaders (cost database, run history): every
# fuzz/corpus_sqlite file goes through the fuzz target's own entry point (fuzz/fuzz_sqlite_load.c)
# via the shared replay driver (fuzz/replay_onnx.c), in every build, sanitizers included. A crash,
# sanitizer report or violated check (a loaded database that is not valid, an error that is not one
# line naming the file) aborts. The seeds come from fuzz/make_sqlite_seeds.py.
add_executable(replay_sqlite ${CMAKE_SOURCE_DIR}/fuzz/replay_onnx.c ${CMAKE_SOURCE_DIR}/fuzz/fuzz_sqlite_load.c)
target_link_libraries(replay_sqlite PRIVATE gopt m)
add_test(NAME sqlite_fuzz_regressions COMMAND replay_sqlite ${CMAKE_SOURCE_DIR}/fuzz/corpus_sqlite
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME sqlite_fuzz_seed_corpus COMMAND replay_sqlite ${CMAKE_SOURCE_DIR}/fuzz/corpus_sqlite "*.sqlite"
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(sqlite_fuzz_regressions sqlite_fuzz_seed_corpus PROPERTIES FAIL_REGULAR_EXPRESSION "runtime error|Sanitizer")
