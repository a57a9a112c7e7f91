#!/usr/bin/env bash
# Builds attnkit (scripts/build.sh) and runs every test with CTest: the CPU suite, the GPU suite
# (skipped, visibly, without a GPU) and the attnkit program's smoke tests; then the Python
# package's tests (scripts/python_tests.sh). The Python extension is built by the same CMake build
# from the library's objects, with the python of build/venv (scripts/python_env.sh installs numpy,
# pytest, nanobind and scikit-build-core there). Extra arguments go to ctest (e.g. -R cpu). Exits
# non-zero if any test fails.
#   TEST_TIMEOUT  seconds allowed to each test (default 1800)
#   PYTHON_TESTS  0 skips the Python package (its build and tests; default 1)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR
PY=""
if [ "${PYTHON_TESTS:-1}" != 0 ]; then
  PY=$(scripts/python_env.sh) || exit 1
  export CMAKE_EXTRA_ARGS="${CMAKE_EXTRA_ARGS:-} -DATTNKIT_BUILD_PYTHON=ON -DPython_EXECUTABLE=$PY"
fi
scripts/build.sh || exit $?

ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "${TEST_TIMEOUT:-1800}" "$@"
rc=$?

# GoogleTest's own summary lines (ctest shows a test's output only when it fails).
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  echo
  echo "test summary (from $log):"
  grep -E '^([0-9]+/[0-9]+ Test: |\[==========\] .* ran\.|\[  PASSED  \]|\[  FAILED  \]|\[  SKIPPED \] [0-9]+ test|SKIPPED: |edge shapes: [0-9]+ passed)' "$log" |
    sed -E -e 's/^[0-9]+\/[0-9]+ Test: /-- /' -e 's/^/  /'
fi

if [ -n "$PY" ]; then
  echo
  echo "==== Python package tests (scripts/python_tests.sh) ===="
  PY=$PY scripts/python_tests.sh
  py_rc=$?
  echo "python tests: exit $py_rc"
  [ $rc -eq 0 ] && rc=$py_rc
fi
exit $rc
