# `gopt report` in a real browser (check_report.sh, check_report.js): the page opens in headless
# Chromium (Debian chromium, playwright-core from npm; both in the test set of
# tools/install-deps.sh) with no console error or network request, every section present, the
# timeline's zoom working (buttons, wheel, drag); the screenshot is build/report/report.png.
add_test(NAME report_browser COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_report.sh ${GOPT_BIN}
         ${CMAKE_BINARY_DIR}/report WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(report_browser PROPERTIES LABELS report TIMEOUT 120)
