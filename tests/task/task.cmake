# Task CLI tests: optimize -> simulate reproduces the objective for every task (baseline and
# search method, zoo and corpus model), compare runs on both for every task (check_optimize.sh),
# and one-line errors for bad tasks, methods, budgets and not-applicable methods.
set(TASK_DIR ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME task_optimize_compare COMMAND bash ${TASK_DIR}/check_optimize.sh ${GOPT_BIN} ${GOPT_PYTHON}
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(task_optimize_compare PROPERTIES TIMEOUT 300 LABELS task)

set(task_err_cases
  "bad_task|--task: unknown task 'placment'|optimize resnet50 --task placment --cluster V100 --method metis"
  "no_task|missing --task|optimize resnet50 --cluster V100 --method metis"
  "no_method|missing --method|optimize resnet50 --task placement --cluster V100"
  "bad_method|--method: unknown method 'metiss' \\(single, round_robin|optimize resnet50 --task placement --cluster 2xV100 --method metiss"
  "bad_component|unknown method 'metis\\+nope'|optimize resnet50 --task memory --cluster 2xV100 --method metis+nope"
  "not_applicable|method 'metis' does not apply to the fusion task: 'metis' decides placement|optimize resnet50 --task fusion --cluster V100 --method metis"
  "search_not_applicable|method 'dp' does not apply to the placement task|optimize resnet50 --task placement --cluster 2xV100 --method dp"
  "bad_budget|--budget: expected an integer in .1, 1000000000.|optimize resnet50 --task placement --cluster 2xV100 --method local --budget 0"
  "bad_budget_text|--budget: expected an integer|optimize resnet50 --task placement --cluster 2xV100 --method local --budget lots"
  "bad_seconds|--seconds: expected a positive number|optimize resnet50 --task placement --cluster 2xV100 --method local --seconds -1"
  "bad_cluster|unknown device 'V999'|optimize resnet50 --task placement --cluster 2xV999 --method metis"
  "bad_flag|unknown flag '--bogus'|optimize resnet50 --task placement --cluster V100 --method metis --bogus"
  "cmp_bad_task|--task: unknown task 'fuse'|compare resnet50 --task fuse --cluster V100"
  "cmp_bad_method|--methods: unknown method 'annealing'|compare resnet50 --task placement --cluster 2xV100 --methods metis,annealing"
  "cmp_not_applicable|method 'xla' does not apply to the placement task|compare resnet50 --task placement --cluster 2xV100 --methods metis,xla"
  "cmp_bad_budget|--budget: expected an integer|compare resnet50 --task placement --cluster 2xV100 --budget -5"
  "cmp_no_cluster|missing --cluster|compare resnet50 --task placement")
gopt_error_tests(task_err "task" ${task_err_cases})
